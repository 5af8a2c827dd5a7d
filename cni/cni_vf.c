// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: VF facts from sysfs (PF, VF index, netdev, RDMA device, driver). */
#include "cni_vf.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cni_cache.h"
#include "err.h"

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. */
__attribute__((format(printf, 3, 4))) static int pathf(char *buf, size_t len, const char *fmt,
						       ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

const char *cni_sysfs_root(void)
{
	const char *r = getenv("IBVF_SYSFS_ROOT");

	return r && *r ? r : "/sys";
}

/* The first entry of directory @dir (not starting with '.') into @out. */
static int first_entry(const char *dir, char *out, size_t len)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int ret = -ENODEV;

	if (!d)
		return errno == ENOENT ? -ENODEV : -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (strlen(de->d_name) < len) {
			snprintf(out, len, "%s", de->d_name);
			ret = 0;
			break;
		}
	}
	closedir(d);
	return ret;
}

/* basename of the symlink target of @path into @out; -errno. */
static int link_base(const char *path, char *out, size_t len)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(path, buf, sizeof(buf) - 1);
	const char *b;

	if (n < 0)
		return -errno;
	buf[n] = 0;
	b = strrchr(buf, '/');
	if (strlen(b ? b + 1 : buf) >= len)
		return -ENAMETOOLONG;
	strcpy(out, b ? b + 1 : buf);
	return 0;
}

int cni_vf_netdev(const char *pci, char *name, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int ret;

	pathf(dir, sizeof(dir), "%s/bus/pci/devices/%s/net", cni_sysfs_root(), pci);
	ret = first_entry(dir, name, CNI_IFNAME_LEN);
	if (ret)
		return ibvf_errf(err, errlen, ret, "VF %s has no netdev in this netns (%s)", pci,
				 dir);
	return 0;
}

int cni_vf_rdma_dev(const char *pci, char *name, size_t len, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int ret;

	pathf(dir, sizeof(dir), "%s/bus/pci/devices/%s/infiniband", cni_sysfs_root(), pci);
	ret = first_entry(dir, name, len);
	if (ret)
		return ibvf_errf(err, errlen, ret, "VF %s has no RDMA device (%s)", pci, dir);
	return 0;
}

static void find_vf_index(struct cni_vf *vf)
{
	const char *root = cni_sysfs_root();
	char dir[PATH_MAX], target[64];
	struct dirent *de;
	DIR *d;

	pathf(dir, sizeof(dir), "%s/bus/pci/devices/%s", root, vf->pf_pci);
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		char *end;
		long n;

		if (strncmp(de->d_name, "virtfn", 6))
			continue;
		n = strtol(de->d_name + 6, &end, 10);
		if (*end || n < 0 || end == de->d_name + 6)
			continue;
		pathf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!link_base(path, target, sizeof(target)) && !strcmp(target, vf->pci)) {
			vf->vf_index = (int)n;
			break;
		}
	}
	closedir(d);
}

int cni_vf_lookup(const char *pci, struct cni_vf *vf, char *err, size_t errlen)
{
	const char *root = cni_sysfs_root();
	char dev[PATH_MAX], path[PATH_MAX];

	memset(vf, 0, sizeof(*vf));
	vf->vf_index = -1;
	snprintf(vf->pci, sizeof(vf->pci), "%s", pci);
	if (pathf(dev, sizeof(dev), "%s/bus/pci/devices/%s", root, pci) || access(dev, F_OK))
		return ibvf_errf(err, errlen, -ENODEV, "PCI device %s not found (%s)", pci, dev);
	pathf(path, sizeof(path), "%s/physfn", dev);
	if (!link_base(path, vf->pf_pci, sizeof(vf->pf_pci))) {
		vf->is_vf = true;
		find_vf_index(vf);
		pathf(path, sizeof(path), "%s/bus/pci/devices/%s/net", root, vf->pf_pci);
		first_entry(path, vf->pf_netdev, sizeof(vf->pf_netdev));
	}
	pathf(path, sizeof(path), "%s/driver", dev);
	link_base(path, vf->driver, sizeof(vf->driver));
	cni_vf_netdev(pci, vf->netdev, NULL, 0);
	cni_vf_rdma_dev(pci, vf->rdma_dev, sizeof(vf->rdma_dev), NULL, 0);
	return 0;
}

/*
 * Compatibility-mode GUID and link-state programming goes through the VF
 * netlink module (daemon/core, slice 2); until that module is in this tree
 * these refuse clearly instead of pretending.
 */
int cni_vf_compat_apply(const struct cni_vf *vf, enum cni_link_state ls, bool set_guid,
			uint64_t guid, char prev_guid[24], char *err, size_t errlen)
{
	char g[IBVF_GUID_STR_LEN];

	prev_guid[0] = 0;
	if (ls == CNI_LINK_STATE_UNSET && !set_guid)
		return 0;
	return ibvf_errf(err, errlen, -EOPNOTSUPP,
			 "VF %s (PF %s VF %d): setting %s%s%s needs the VF netlink module, which "
			 "this build does not have yet; use ibvfd (daemon mode)",
			 vf->pci, vf->pf_netdev, vf->vf_index, set_guid ? "GUID " : "",
			 set_guid ? ibvf_guid_format(guid, g) : "",
			 ls != CNI_LINK_STATE_UNSET ? " link_state" : "");
}

int cni_vf_restore(const struct cni_cache *c, char *err, size_t errlen)
{
	if (c->link_state == CNI_LINK_STATE_UNSET && !c->prev_guid[0])
		return 0;
	return ibvf_errf(err, errlen, -EOPNOTSUPP,
			 "VF %s: restoring GUID %s / link state needs the VF netlink module, "
			 "which this build does not have yet", c->device_id,
			 c->prev_guid[0] ? c->prev_guid : "-");
}

static int read_small(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

/* The check itself, in whatever netns/mount namespace we are in. */
static int port_check_here(const char *root, const char *dev, const struct cni_pkey *pkeys,
			   size_t n_pkeys, char *err, size_t errlen)
{
	char path[PATH_MAX], buf[64];
	bool found[CNI_MAX_PKEYS] = { false };
	struct dirent *de;
	DIR *d;
	int ret;

	ret = pathf(path, sizeof(path), "%s/class/infiniband/%s/ports/1/state", root, dev);
	if (!ret)
		ret = read_small(path, buf, sizeof(buf));
	if (ret)
		return ibvf_errf(err, errlen, ret, "RDMA device %s: reading %s: %s", dev, path,
				 strerror(-ret));
	if (!strstr(buf, "ACTIVE"))
		return ibvf_errf(err, errlen, -ENETDOWN, "RDMA device %s port 1 is %s, not ACTIVE",
				 dev, buf);
	d = pathf(path, sizeof(path), "%s/class/infiniband/%s/ports/1/pkeys", root, dev) ? NULL
										     : opendir(path);
	if (!d)
		return n_pkeys ? ibvf_errf(err, errlen, -errno, "RDMA device %s: %s: %s", dev, path,
					   strerror(errno))
			       : 0;
	while ((de = readdir(d))) {
		char f[PATH_MAX];
		unsigned long v;
		char *end;

		if (de->d_name[0] == '.' ||
		    pathf(f, sizeof(f), "%s/%s", path, de->d_name) ||
		    read_small(f, buf, sizeof(buf)))
			continue;
		v = strtoul(buf, &end, 0);
		if (end == buf || v > 0xffff)
			continue;
		for (size_t i = 0; i < n_pkeys; i++)
			if ((v & IBVF_PKEY_KEY_MASK) == pkeys[i].key &&
			    (pkeys[i].membership == IBVF_MEMBER_LIMITED || (v & IBVF_PKEY_FULL_BIT)))
				found[i] = true;
	}
	closedir(d);
	for (size_t i = 0; i < n_pkeys; i++)
		if (!found[i])
			return ibvf_errf(err, errlen, -ENOENT, "RDMA device %s port 1: P_Key table "
					 "has no %s member entry for PKey 0x%04x", dev,
					 ibvf_membership_name(pkeys[i].membership), pkeys[i].key);
	return 0;
}

/* In a child: enter @netns_fd, mount a private sysfs, check, report over a pipe. */
static int port_check_in_netns(const char *dev, int netns_fd, const struct cni_pkey *pkeys,
			       size_t n_pkeys, char *err, size_t errlen)
{
	const char *root = cni_sysfs_root();
	int p[2], status = 0, ret;
	char msg[IBVF_ERR_LEN + 8];
	ssize_t n;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return ibvf_errf(err, errlen, -errno, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return ibvf_errf(err, errlen, -errno, "fork: %s", strerror(errno));
	}
	if (!pid) {
		char e[IBVF_ERR_LEN] = "";
		int r;

		close(p[0]);
		if (setns(netns_fd, CLONE_NEWNET) || unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			r = ibvf_errf(e, sizeof(e), -errno, "entering the Pod netns: %s",
				      strerror(errno));
		else if (!strcmp(root, "/sys") && (umount2("/sys", MNT_DETACH),
						   mount("sysfs", "/sys", "sysfs", 0, NULL)))
			r = ibvf_errf(e, sizeof(e), -errno, "mounting sysfs in the Pod netns: %s",
				      strerror(errno));
		else
			r = port_check_here(root, dev, pkeys, n_pkeys, e, sizeof(e));
		if (write(p[1], &r, sizeof(r)) != sizeof(r) || write(p[1], e, strlen(e) + 1) < 0)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], msg, sizeof(msg) - 1);
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n < (ssize_t)sizeof(int))
		return ibvf_errf(err, errlen, -EIO, "port check in the Pod netns: no answer");
	msg[n] = 0;
	memcpy(&ret, msg, sizeof(ret));
	if (ret)
		ibvf_errf(err, errlen, ret, "%s", msg + sizeof(int));
	return ret;
}

int cni_vf_port_check(const char *rdma_dev, int netns_fd, const struct cni_pkey *pkeys,
		      size_t n_pkeys, char *err, size_t errlen)
{
	if (netns_fd < 0)
		return port_check_here(cni_sysfs_root(), rdma_dev, pkeys, n_pkeys, err, errlen);
	return port_check_in_netns(rdma_dev, netns_fd, pkeys, n_pkeys, err, errlen);
}
