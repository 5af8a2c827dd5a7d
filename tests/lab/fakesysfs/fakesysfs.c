// SPDX-License-Identifier: MIT
/* Fake sysfs tree writer for labs and tests (see fakesysfs.h). */
#include "fakesysfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAKE_BUS "devices/pci0000:00"

static int fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	int n;

	va_start(ap, f);
	n = vsnprintf(buf, len, f, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int mkdir_p(const char *path)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static int write_path(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	if (n < 0 || (size_t)n != strlen(text)) {
		int e = n < 0 ? errno : EIO;

		close(fd);
		return -e;
	}
	return close(fd) ? -errno : 0;
}

int ibvf_fake_write(const char *root, const char *rel, const char *text)
{
	char p[PATH_MAX];
	int ret = fmt(p, sizeof(p), "%s/%s", root, rel);

	return ret ? ret : write_path(p, text);
}

/* Create symlink @at (absolute) pointing at relative @target, replacing any old one. */
static int link_rel(const char *target, const char *at)
{
	if (unlink(at) && errno != ENOENT)
		return -errno;
	return symlink(target, at) ? -errno : 0;
}

int ibvf_fake_init(const char *root)
{
	static const char *const dirs[] = {FAKE_BUS, "bus/pci/devices", "bus/pci/drivers",
					   "class/net", "class/infiniband"};
	char p[PATH_MAX];
	int ret;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		ret = fmt(p, sizeof(p), "%s/%s", root, dirs[i]);
		if (!ret)
			ret = mkdir_p(p);
		if (ret)
			return ret;
	}
	return 0;
}

int ibvf_fake_vf_pci(const char *pf_pci, int offset, int index, char *buf, size_t len)
{
	unsigned int dom, bus, dev, fn, rid;

	if (sscanf(pf_pci, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || index < 0)
		return -EINVAL;
	rid = (bus << 8 | dev << 3 | fn) + (unsigned int)(offset ? offset : 2) +
	      (unsigned int)index;
	return fmt(buf, len, "%04x:%02x:%02x.%x", dom, (rid >> 8) & 0xff, (rid >> 3) & 0x1f,
		   rid & 7);
}

static int bind_driver(const char *root, const char *pci, const char *drv)
{
	char p[PATH_MAX], t[PATH_MAX];
	int ret;

	if (!drv)
		return 0;
	if ((ret = fmt(p, sizeof(p), "%s/bus/pci/drivers/%s", root, drv)) || (ret = mkdir_p(p)))
		return ret;
	for (int i = 0; i < 2; i++) {
		const char *f = i ? "unbind" : "bind";

		if ((ret = fmt(p, sizeof(p), "%s/bus/pci/drivers/%s/%s", root, drv, f)))
			return ret;
		if (access(p, F_OK) && (ret = write_path(p, "")))
			return ret;
	}
	if ((ret = fmt(p, sizeof(p), "%s/bus/pci/drivers/%s/%s", root, drv, pci)) ||
	    (ret = fmt(t, sizeof(t), "../../../../" FAKE_BUS "/%s", pci)) || (ret = link_rel(t, p)))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/driver", root, pci)) ||
	    (ret = fmt(t, sizeof(t), "../../../bus/pci/drivers/%s", drv)))
		return ret;
	return link_rel(t, p);
}

static int add_netdev(const char *root, const char *pci, const char *name, int ifindex, int type,
		      const char *altname)
{
	char p[PATH_MAX], t[PATH_MAX], v[32];
	int ret;

	if (!name)
		return 0;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/net/%s", root, pci, name)) ||
	    (ret = mkdir_p(p)))
		return ret;
	snprintf(v, sizeof(v), "%d\n", type ? type : 32);
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/net/%s/type", root, pci, name)) ||
	    (ret = write_path(p, v)))
		return ret;
	snprintf(v, sizeof(v), "%d\n", ifindex);
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/net/%s/ifindex", root, pci, name)) ||
	    (ret = write_path(p, v)))
		return ret;
	if (altname &&
	    ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/net/%s/ibvf_altname", root, pci, name)) ||
	     (ret = write_path(p, altname))))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/net/%s/device", root, pci, name)) ||
	    (ret = fmt(t, sizeof(t), "../../../%s", pci)) || (ret = link_rel(t, p)))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/class/net/%s", root, name)) ||
	    (ret = fmt(t, sizeof(t), "../../" FAKE_BUS "/%s/net/%s", pci, name)))
		return ret;
	return link_rel(t, p);
}

static int add_rdma(const char *root, const char *pci, const char *name)
{
	char p[PATH_MAX], t[PATH_MAX];
	int ret;

	if (!name)
		return 0;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/infiniband/%s", root, pci, name)) ||
	    (ret = mkdir_p(p)))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/infiniband/%s/device", root, pci, name)) ||
	    (ret = fmt(t, sizeof(t), "../../../%s", pci)) || (ret = link_rel(t, p)))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/class/infiniband/%s", root, name)) ||
	    (ret = fmt(t, sizeof(t), "../../" FAKE_BUS "/%s/infiniband/%s", pci, name)))
		return ret;
	return link_rel(t, p);
}

static int add_dev(const char *root, const char *pci, bool is_pf)
{
	char p[PATH_MAX], t[PATH_MAX];
	int ret;

	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s", root, pci)) || (ret = mkdir_p(p)))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/vendor", root, pci)) ||
	    (ret = write_path(p, "0x15b3\n")))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/device", root, pci)) ||
	    (ret = write_path(p, is_pf ? "0x101b\n" : "0x101c\n")))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/class", root, pci)) ||
	    (ret = write_path(p, "0x020700\n")))
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/bus/pci/devices/%s", root, pci)) ||
	    (ret = fmt(t, sizeof(t), "../../../" FAKE_BUS "/%s", pci)))
		return ret;
	return link_rel(t, p);
}

int ibvf_fake_vf_bind(const char *root, const char *pci, const struct ibvf_fake_vf *v)
{
	int ret = bind_driver(root, pci, v->driver);

	if (!ret)
		ret = add_netdev(root, pci, v->netdev, v->ifindex, 32, v->altname);
	if (!ret)
		ret = add_rdma(root, pci, v->rdma_dev);
	return ret;
}

static int write_sriov_files(const char *root, const char *pf_pci, int index)
{
	static const char *const files[][2] = {{"node", "00:00:00:00:00:00:00:00\n"},
					       {"port", "00:00:00:00:00:00:00:00\n"},
					       {"policy", "Follow\n"}};
	char p[PATH_MAX];
	int ret;

	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/sriov/%d", root, pf_pci, index)) ||
	    (ret = mkdir_p(p)))
		return ret;
	for (size_t i = 0; i < 3; i++) {
		if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/sriov/%d/%s", root, pf_pci, index,
			       files[i][0])) ||
		    (ret = write_path(p, files[i][1])))
			return ret;
	}
	return 0;
}

int ibvf_fake_add_pf(const char *root, const struct ibvf_fake_pf *pf,
		     const struct ibvf_fake_vf *vfs)
{
	char p[PATH_MAX], t[PATH_MAX], v[32];
	int ret;

	if (!pf->pci || pf->num_vfs < 0 || pf->total_vfs < pf->num_vfs)
		return -EINVAL;
	if ((ret = ibvf_fake_init(root)) || (ret = add_dev(root, pf->pci, true)) ||
	    (ret = bind_driver(root, pf->pci, pf->driver)) ||
	    (ret = add_netdev(root, pf->pci, pf->netdev, pf->ifindex, pf->netdev_type, NULL)) ||
	    (ret = add_rdma(root, pf->pci, pf->rdma_dev)))
		return ret;
	snprintf(v, sizeof(v), "%d\n", pf->total_vfs);
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/sriov_totalvfs", root, pf->pci)) ||
	    (ret = write_path(p, v)) || (ret = ibvf_fake_set_numvfs(root, pf->pci, pf->num_vfs)))
		return ret;
	for (int i = 0; i < pf->num_vfs; i++) {
		struct ibvf_fake_vf def = {.driver = pf->driver};
		char vf[32];

		if ((ret = ibvf_fake_vf_pci(pf->pci, pf->vf_offset, i, vf, sizeof(vf))) ||
		    (ret = add_dev(root, vf, false)))
			return ret;
		if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/physfn", root, vf)) ||
		    (ret = fmt(t, sizeof(t), "../%s", pf->pci)) || (ret = link_rel(t, p)))
			return ret;
		if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/virtfn%d", root, pf->pci, i)) ||
		    (ret = fmt(t, sizeof(t), "../%s", vf)) || (ret = link_rel(t, p)))
			return ret;
		if ((ret = ibvf_fake_vf_bind(root, vf, vfs ? &vfs[i] : &def)) ||
		    (ret = write_sriov_files(root, pf->pci, i)))
			return ret;
	}
	return 0;
}

int ibvf_fake_set_numvfs(const char *root, const char *pf_pci, int n)
{
	char p[PATH_MAX], v[32];
	int ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/sriov_numvfs", root, pf_pci);

	snprintf(v, sizeof(v), "%d\n", n);
	return ret ? ret : write_path(p, v);
}

/* Remove every entry of <dev>/@sub and its /class/@cls/<name> link. */
static int remove_class_entries(const char *root, const char *pci, const char *sub, const char *cls)
{
	char dir[PATH_MAX], p[PATH_MAX];
	struct dirent *de;
	int ret = fmt(dir, sizeof(dir), "%s/" FAKE_BUS "/%s/%s", root, pci, sub);
	DIR *d;

	if (ret)
		return ret;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (!fmt(p, sizeof(p), "%s/class/%s/%s", root, cls, de->d_name))
			unlink(p);
	}
	closedir(d);
	return ibvf_fake_rm_rf(dir);
}

int ibvf_fake_vf_unbind(const char *root, const char *pci)
{
	char p[PATH_MAX], t[PATH_MAX], drv[PATH_MAX];
	ssize_t n;
	int ret;

	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/driver", root, pci)))
		return ret;
	n = readlink(p, t, sizeof(t) - 1);
	if (n > 0) {
		t[n] = 0;
		if (!fmt(drv, sizeof(drv), "%s/bus/pci/drivers/%s/%s", root, strrchr(t, '/') + 1,
			 pci))
			unlink(drv);
		unlink(p);
	}
	if ((ret = remove_class_entries(root, pci, "net", "net")))
		return ret;
	return remove_class_entries(root, pci, "infiniband", "infiniband");
}

int ibvf_fake_remove_dev(const char *root, const char *pci)
{
	char p[PATH_MAX], t[PATH_MAX], pf[64];
	ssize_t n;
	int ret = ibvf_fake_vf_unbind(root, pci);

	if (ret)
		return ret;
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s/physfn", root, pci)))
		return ret;
	n = readlink(p, t, sizeof(t) - 1);
	if (n > 3) { /* drop the PF's virtfnN link to this VF */
		char dir[PATH_MAX], l[PATH_MAX], lt[PATH_MAX];
		struct dirent *de;
		DIR *d;

		t[n] = 0;
		if (strlen(t + 3) >= sizeof(pf))
			return -ENAMETOOLONG;
		memcpy(pf, t + 3, strlen(t + 3) + 1);
		if (!fmt(dir, sizeof(dir), "%s/" FAKE_BUS "/%s", root, pf) && (d = opendir(dir))) {
			while ((de = readdir(d))) {
				ssize_t m;

				if (strncmp(de->d_name, "virtfn", 6) ||
				    fmt(l, sizeof(l), "%s/%s", dir, de->d_name))
					continue;
				m = readlink(l, lt, sizeof(lt) - 1);
				if (m > 0 && (lt[m] = 0, !strcmp(lt + 3, pci)))
					unlink(l);
			}
			closedir(d);
		}
	}
	if (!fmt(p, sizeof(p), "%s/bus/pci/devices/%s", root, pci))
		unlink(p);
	if ((ret = fmt(p, sizeof(p), "%s/" FAKE_BUS "/%s", root, pci)))
		return ret;
	return ibvf_fake_rm_rf(p);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path) ? -errno : 0;
	return unlink(path) ? -errno : 0;
}

int ibvf_fake_rm_rf(const char *path)
{
	int ret;

	if (access(path, F_OK))
		return 0;
	ret = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return ret < 0 ? -errno : ret;
}
