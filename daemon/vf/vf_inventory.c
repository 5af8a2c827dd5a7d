// SPDX-License-Identifier: MIT
/* VF inventory from sysfs (see vf_inventory.h for the layout read). */
#include "vf_inventory.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "sort.h"
#include "file_read.h"
#include "vf_netlink.h"

int ibvf_pci_dev_path(const char *sysfs_root, const char *pci, const char *sub, char *buf,
		      size_t len)
{
	int n = snprintf(buf, len, "%s/bus/pci/devices/%s%s%s", sysfs_root, pci, sub ? "/" : "",
			 sub ? sub : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

bool ibvf_pci_dev_exists(const char *sysfs_root, const char *pci)
{
	char p[PATH_MAX];
	struct stat st;

	return !ibvf_pci_dev_path(sysfs_root, pci, NULL, p, sizeof(p)) && stat(p, &st) == 0 &&
	       S_ISDIR(st.st_mode);
}

/* ibvf_file_open_regular(): a FIFO in a fake sysfs tree must not block a scan. */
int ibvf_sysfs_read_str(const char *path, char *buf, size_t len)
{
	int fd = ibvf_file_open_regular(path, 0, NULL, NULL, 0);
	ssize_t r;
	size_t n;

	buf[0] = 0;
	if (fd < 0)
		return fd;
	r = read(fd, buf, len - 1);
	close(fd);
	n = r > 0 ? (size_t)r : 0;
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static int read_int(const char *path, int *out)
{
	char buf[32], *end;
	long v;
	int ret = ibvf_sysfs_read_str(path, buf, sizeof(buf));

	if (ret)
		return ret;
	errno = 0;
	v = strtol(buf, &end, 0);
	if (errno || end == buf || *end || v < INT_MIN || v > INT_MAX)
		return -EIO;
	*out = (int)v;
	return 0;
}

int ibvf_sysfs_link_base(const char *path, char *buf, size_t len)
{
	char t[PATH_MAX];
	ssize_t n = readlink(path, t, sizeof(t) - 1);
	const char *b;

	if (n < 0)
		return -errno;
	t[n] = 0;
	while (n > 1 && t[n - 1] == '/')
		t[--n] = 0;
	b = strrchr(t, '/');
	b = b ? b + 1 : t;
	if (strlen(b) >= len)
		return -ENAMETOOLONG;
	memcpy(buf, b, strlen(b) + 1);
	return 0;
}

static int path_of(char *buf, size_t len, const char *dir, const char *a, const char *b)
{
	int n = snprintf(buf, len, "%s/%s%s%s", dir, a, b ? "/" : "", b ? b : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static bool exists(const char *dir, const char *a, const char *b)
{
	char p[PATH_MAX];

	return !path_of(p, sizeof(p), dir, a, b) && access(p, F_OK) == 0;
}

/*
 * The netdev of PCI device directory @dev: a non-child netdev, preferring
 * ARPHRD_INFINIBAND when @want_ib, lowest ifindex first. @need_ib: only an
 * ARPHRD_INFINIBAND netdev qualifies (the PF's IPoIB netdev).
 */
static void find_netdev(const char *dev, bool need_ib, char *name, size_t len, int *ifindex)
{
	char netdir[PATH_MAX], p[PATH_MAX];
	int best = -1, best_ib = 0;
	struct dirent *de;
	DIR *d;

	name[0] = 0;
	*ifindex = 0;
	if (path_of(netdir, sizeof(netdir), dev, "net", NULL) || !(d = opendir(netdir)))
		return;
	while ((de = readdir(d))) {
		int type = -1, idx = 0, is_ib;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= len ||
		    strlen(de->d_name) >= IBVF_IFNAME_LEN)
			continue;
		if (exists(netdir, de->d_name, "parent"))
			continue; /* IPoIB P_Key child interface */
		if (!path_of(p, sizeof(p), netdir, de->d_name, "type"))
			read_int(p, &type);
		if (!path_of(p, sizeof(p), netdir, de->d_name, "ifindex"))
			read_int(p, &idx);
		is_ib = type == IBVF_ARPHRD_INFINIBAND;
		if (need_ib && !is_ib)
			continue;
		if (best >= 0 && (best_ib > is_ib || (best_ib == is_ib && idx >= best)))
			continue;
		best = idx;
		best_ib = is_ib;
		snprintf(name, len, "%s", de->d_name);
		*ifindex = idx;
	}
	closedir(d);
}

/* First entry (by name) of directory @dev/@sub into @buf, "" when none. */
static void first_entry(const char *dev, const char *sub, char *buf, size_t len)
{
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;

	buf[0] = 0;
	if (path_of(dir, sizeof(dir), dev, sub, NULL) || !(d = opendir(dir)))
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && strlen(de->d_name) < len &&
		    (!buf[0] || strcmp(de->d_name, buf) < 0))
			snprintf(buf, len, "%s", de->d_name);
	closedir(d);
}

static void read_driver(const char *dev, char *buf, size_t len)
{
	char p[PATH_MAX];

	buf[0] = 0;
	if (!path_of(p, sizeof(p), dev, "driver", NULL) && ibvf_sysfs_link_base(p, buf, len))
		buf[0] = 0;
}

/* Fill the PF part of @pf from its device directory. */
static void fill_pf(const char *dev, struct ibvf_pf_info *pf)
{
	char p[PATH_MAX];

	find_netdev(dev, true, pf->netdev, sizeof(pf->netdev), &pf->ifindex);
	first_entry(dev, "infiniband", pf->rdma_dev, sizeof(pf->rdma_dev));
	read_driver(dev, pf->driver, sizeof(pf->driver));
	pf->num_vfs = pf->total_vfs = 0;
	if (!path_of(p, sizeof(p), dev, "sriov_numvfs", NULL))
		read_int(p, &pf->num_vfs);
	if (!path_of(p, sizeof(p), dev, "sriov_totalvfs", NULL))
		read_int(p, &pf->total_vfs);
}

static void fill_vf(const char *dev, const struct ibvf_pf_info *pf, int index,
		    struct ibvf_vf_info *vf)
{
	vf->index = index;
	read_driver(dev, vf->driver, sizeof(vf->driver));
	find_netdev(dev, false, vf->netdev, sizeof(vf->netdev), &vf->ifindex);
	first_entry(dev, "infiniband", vf->rdma_dev, sizeof(vf->rdma_dev));
	snprintf(vf->pf_pci, sizeof(vf->pf_pci), "%s", pf->pci);
	snprintf(vf->pf_netdev, sizeof(vf->pf_netdev), "%s", pf->netdev);
	vf->pf_ifindex = pf->ifindex;
	snprintf(vf->pf_driver, sizeof(vf->pf_driver), "%s", pf->driver);
}

/* VF index of @vf_pci among the virtfnN links of PF directory @pfdir; -1 if none. */
static int virtfn_index(const char *pfdir, const char *vf_pci)
{
	char p[PATH_MAX], target[IBVF_PCI_LEN];
	struct dirent *de;
	int idx = -1;
	DIR *d = opendir(pfdir);

	if (!d)
		return -1;
	while (idx < 0 && (de = readdir(d))) {
		char *end;
		long n;

		if (strncmp(de->d_name, "virtfn", 6) || !isdigit((unsigned char)de->d_name[6]))
			continue;
		n = strtol(de->d_name + 6, &end, 10);
		if (*end || n < 0 || n > 65535)
			continue;
		if (!path_of(p, sizeof(p), pfdir, de->d_name, NULL) &&
		    !ibvf_sysfs_link_base(p, target, sizeof(target)) && !strcmp(target, vf_pci))
			idx = (int)n;
	}
	closedir(d);
	return idx;
}

int ibvf_vf_lookup(const char *sysfs_root, const char *pci_in, struct ibvf_vf_info *out, char *err,
		   size_t errlen)
{
	char dev[PATH_MAX], pfdir[PATH_MAX], p[PATH_MAX], pci[IBVF_PCI_LEN];
	struct ibvf_pf_info pf = {0};
	int ret, idx;

	ret = ibvf_pci_addr_parse(pci_in, pci, err, errlen); /* sysfs names are lowercase */
	if (ret)
		return ret;
	memset(out, 0, sizeof(*out));
	if (ibvf_pci_dev_path(sysfs_root, pci, NULL, dev, sizeof(dev)) ||
	    ibvf_pci_dev_path(sysfs_root, pci, "physfn", p, sizeof(p)))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs path too long");
	if (!ibvf_pci_dev_exists(sysfs_root, pci))
		return ibvf_errf(err, errlen, -ENODEV, "no PCI device %s (%s does not exist)", pci,
				 dev);
	ret = ibvf_sysfs_link_base(p, pf.pci, sizeof(pf.pci));
	if (ret) {
		if (exists(dev, "sriov_totalvfs", NULL))
			return ibvf_errf(err, errlen, -EINVAL,
					 "%s is an SR-IOV PF, not a VF: give the PCI address of "
					 "one of its VFs (see 'ibvfctl vf list')",
					 pci);
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s is not an SR-IOV VF (it has no physfn link)", pci);
	}
	if (ibvf_pci_dev_path(sysfs_root, pf.pci, NULL, pfdir, sizeof(pfdir)))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs path too long");
	fill_pf(pfdir, &pf);
	if (pf.num_vfs <= 0)
		return ibvf_errf(err, errlen, -ENODEV,
				 "PF %s of VF %s is not in SR-IOV mode (sriov_numvfs is 0)", pf.pci,
				 pci);
	idx = virtfn_index(pfdir, pci);
	if (idx < 0)
		return ibvf_errf(err, errlen, -ENODEV,
				 "VF %s is not among the virtfnN links of its PF %s", pci, pf.pci);
	snprintf(out->pci, sizeof(out->pci), "%s", pci);
	fill_vf(dev, &pf, idx, out);
	return 0;
}

int ibvf_vf_reread(const char *sysfs_root, struct ibvf_vf_info *vf, unsigned what, char *err,
		   size_t errlen)
{
	char dev[PATH_MAX], pci[IBVF_PCI_LEN];
	int ret = ibvf_pci_addr_parse(vf->pci, pci, err, errlen);

	if (ret)
		return ret;
	if (ibvf_pci_dev_path(sysfs_root, pci, NULL, dev, sizeof(dev)))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs path too long");
	if (!exists(dev, "physfn", NULL)) {
		if (!ibvf_pci_dev_exists(sysfs_root, pci))
			return ibvf_errf(err, errlen, -ENODEV,
					 "no PCI device %s (%s does not exist)", pci, dev);
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s is not an SR-IOV VF (it has no physfn link)", pci);
	}
	if (what & IBVF_REREAD_NETDEV)
		find_netdev(dev, false, vf->netdev, sizeof(vf->netdev), &vf->ifindex);
	if (what & IBVF_REREAD_RDMA)
		first_entry(dev, "infiniband", vf->rdma_dev, sizeof(vf->rdma_dev));
	return 0;
}

/* PCI address of a PF given by PCI address, netdev or RDMA device name. */
static int resolve_pf(const char *sysfs_root, const char *pf, char *pci, size_t len, char *err,
		      size_t errlen)
{
	static const char *const classes[] = {"net", "infiniband"};
	char p[PATH_MAX];

	if (len >= IBVF_PCI_ADDR_LEN && !ibvf_pci_addr_parse(pf, pci, NULL, 0))
		return 0; /* a PCI address, in lower case as sysfs names it */
	if (!*pf || strchr(pf, '/') || !strcmp(pf, ".") || !strcmp(pf, ".."))
		return ibvf_errf(err, errlen, -EINVAL, "'%.40s' is not a PF name", pf);
	for (size_t i = 0; i < 2; i++) {
		int n = snprintf(p, sizeof(p), "%s/class/%s/%s/device", sysfs_root, classes[i], pf);

		if (n > 0 && (size_t)n < sizeof(p) && !ibvf_sysfs_link_base(p, pci, len))
			return 0;
	}
	return ibvf_errf(err, errlen, -ENODEV,
			 "no PF '%s' (not a PCI address, netdev or RDMA device under %s/class)", pf,
			 sysfs_root);
}

int ibvf_vf_lookup_index(const char *sysfs_root, const char *pf, int index,
			 struct ibvf_vf_info *out, char *err, size_t errlen)
{
	char pci[IBVF_PCI_LEN], p[PATH_MAX], link[32], vf[IBVF_PCI_LEN];
	struct ibvf_pf_info pfi = {0};
	int ret = resolve_pf(sysfs_root, pf, pci, sizeof(pci), err, errlen);

	if (ret)
		return ret;
	if (ibvf_pci_dev_path(sysfs_root, pci, NULL, p, sizeof(p)))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs path too long");
	if (!exists(p, "sriov_totalvfs", NULL))
		return ibvf_errf(err, errlen, -ENODEV, "%s (%s) is not an SR-IOV PF", pf, pci);
	fill_pf(p, &pfi);
	if (pfi.num_vfs <= 0)
		return ibvf_errf(err, errlen, -ENODEV,
				 "PF %s (%s) is not in SR-IOV mode (sriov_numvfs is 0)", pf, pci);
	snprintf(link, sizeof(link), "virtfn%d", index);
	if (index < 0 || ibvf_pci_dev_path(sysfs_root, pci, link, p, sizeof(p)) ||
	    ibvf_sysfs_link_base(p, vf, sizeof(vf)))
		return ibvf_errf(err, errlen, -ENODEV, "PF %s (%s) has no VF %d (it has %d)", pf,
				 pci, index, pfi.num_vfs);
	return ibvf_vf_lookup(sysfs_root, vf, out, err, errlen);
}

/* ------------------------------------------------------------ scan -- */

static int vf_cmp(const void *a, const void *b)
{
	const struct ibvf_vf_info *x = a, *y = b;

	return (x->index > y->index) - (x->index < y->index);
}

static int pf_cmp(const void *a, const void *b)
{
	const struct ibvf_pf_info *x = a, *y = b;

	return strcmp(x->pci, y->pci);
}

static int scan_vfs(const char *sysfs_root, const char *pfdir, struct ibvf_pf_info *pf)
{
	struct dirent *de;
	size_t cap = 0;
	DIR *d = opendir(pfdir);

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char p[PATH_MAX], vfdir[PATH_MAX];
		struct ibvf_vf_info *vf;
		char *end;
		long n;

		if (strncmp(de->d_name, "virtfn", 6) || !isdigit((unsigned char)de->d_name[6]))
			continue;
		n = strtol(de->d_name + 6, &end, 10);
		if (*end || n < 0 || n > 65535)
			continue;
		if (pf->n_vfs == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			void *nv = realloc(pf->vfs, ncap * sizeof(*pf->vfs));

			if (!nv) {
				closedir(d);
				return -ENOMEM;
			}
			pf->vfs = nv;
			cap = ncap;
		}
		vf = &pf->vfs[pf->n_vfs];
		memset(vf, 0, sizeof(*vf));
		if (path_of(p, sizeof(p), pfdir, de->d_name, NULL) ||
		    ibvf_sysfs_link_base(p, vf->pci, sizeof(vf->pci)) ||
		    ibvf_pci_dev_path(sysfs_root, vf->pci, NULL, vfdir, sizeof(vfdir)))
			continue;
		fill_vf(vfdir, pf, (int)n, vf);
		pf->n_vfs++;
	}
	closedir(d);
	ibvf_sort(pf->vfs, pf->n_vfs, sizeof(*pf->vfs), vf_cmp);
	return 0;
}

/* Default resolver: if_nametoindex(3), then rtnetlink for (long) altnames. */
static unsigned int resolve_name(const char *name)
{
	unsigned int idx = strlen(name) < IF_NAMESIZE ? if_nametoindex(name) : 0;
	struct ibvf_nl *nl;
	int r;

	if (idx || ibvf_nl_open(&nl, NULL, 0))
		return idx;
	r = ibvf_nl_ifindex_by_name(nl, name, NULL, 0);
	ibvf_nl_close(nl);
	return r > 0 ? (unsigned int)r : 0;
}

int ibvf_inventory_scan(const char *sysfs_root, struct ibvf_inventory **out, char *err,
			size_t errlen)
{
	struct ibvf_inventory *inv;
	char dir[PATH_MAX];
	struct dirent *de;
	size_t cap = 0;
	int ret = 0;
	DIR *d;

	if (snprintf(dir, sizeof(dir), "%s/bus/pci/devices", sysfs_root) >= (int)sizeof(dir))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs root too long");
	d = opendir(dir);
	if (!d) {
		int e = errno;

		return ibvf_errf(err, errlen, e == ENOENT ? -ENOENT : -EIO, "%s: %s", dir,
				 strerror(e));
	}
	inv = calloc(1, sizeof(*inv));
	if (!inv || !(inv->sysfs_root = strdup(sysfs_root))) {
		ret = -ENOMEM;
		goto out;
	}
	inv->resolve = resolve_name;
	while ((de = readdir(d))) {
		char dev[PATH_MAX];
		struct ibvf_pf_info *pf;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= IBVF_PCI_LEN ||
		    path_of(dev, sizeof(dev), dir, de->d_name, NULL) ||
		    !exists(dev, "sriov_totalvfs", NULL))
			continue;
		if (inv->n_pfs == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			void *np = realloc(inv->pfs, ncap * sizeof(*inv->pfs));

			if (!np) {
				ret = -ENOMEM;
				goto out;
			}
			inv->pfs = np;
			cap = ncap;
		}
		pf = &inv->pfs[inv->n_pfs];
		memset(pf, 0, sizeof(*pf));
		/* the length was checked above; the precision tells the compiler */
		snprintf(pf->pci, sizeof(pf->pci), "%.*s", (int)sizeof(pf->pci) - 1, de->d_name);
		fill_pf(dev, pf);
		if (!pf->netdev[0] && !pf->rdma_dev[0])
			continue; /* an SR-IOV NIC that is not an HCA */
		inv->n_pfs++;
		ret = scan_vfs(sysfs_root, dev, pf);
		if (ret)
			goto out;
	}
	ibvf_sort(inv->pfs, inv->n_pfs, sizeof(*inv->pfs), pf_cmp);
out:
	closedir(d);
	if (ret) {
		ibvf_inventory_free(inv);
		return ibvf_errf(err, errlen, ret, "scanning %s: %s", dir, strerror(-ret));
	}
	*out = inv;
	return 0;
}

void ibvf_inventory_free(struct ibvf_inventory *inv)
{
	if (!inv)
		return;
	for (size_t i = 0; i < inv->n_pfs; i++)
		free(inv->pfs[i].vfs);
	free(inv->pfs);
	free(inv->sysfs_root);
	free(inv);
}

const struct ibvf_pf_info *ibvf_inventory_find_pf(const struct ibvf_inventory *inv,
						  const char *name)
{
	for (size_t i = 0; i < inv->n_pfs; i++) {
		const struct ibvf_pf_info *pf = &inv->pfs[i];

		if (!strcmp(pf->pci, name) || (pf->netdev[0] && !strcmp(pf->netdev, name)) ||
		    (pf->rdma_dev[0] && !strcmp(pf->rdma_dev, name)))
			return pf;
	}
	return NULL;
}

#define FOR_EACH_VF(inv, vf)                                                                       \
	for (size_t _p = 0; _p < (inv)->n_pfs; _p++)                                               \
		for (size_t _v = 0; _v < (inv)->pfs[_p].n_vfs; _v++)                               \
			if (((vf) = &(inv)->pfs[_p].vfs[_v]))

const struct ibvf_vf_info *ibvf_inventory_find_vf_pci(const struct ibvf_inventory *inv,
						      const char *pci)
{
	const struct ibvf_vf_info *vf;

	FOR_EACH_VF(inv, vf)
	if (!strcasecmp(vf->pci, pci))
		return vf;
	return NULL;
}

const struct ibvf_vf_info *ibvf_inventory_find_vf_netdev(const struct ibvf_inventory *inv,
							 const char *name)
{
	const struct ibvf_vf_info *vf;
	unsigned int idx;

	FOR_EACH_VF(inv, vf)
	if (vf->netdev[0] && !strcmp(vf->netdev, name))
		return vf;
	idx = inv->resolve ? inv->resolve(name) : 0; /* altname → ifindex */
	if (!idx)
		return NULL;
	FOR_EACH_VF(inv, vf)
	if (vf->ifindex > 0 && (unsigned int)vf->ifindex == idx)
		return vf;
	return NULL;
}

const struct ibvf_vf_info *ibvf_inventory_find_vf_rdma(const struct ibvf_inventory *inv,
						       const char *name)
{
	const struct ibvf_vf_info *vf;

	FOR_EACH_VF(inv, vf)
	if (vf->rdma_dev[0] && !strcmp(vf->rdma_dev, name))
		return vf;
	return NULL;
}
