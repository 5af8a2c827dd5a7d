/* SPDX-License-Identifier: MIT */
/*
 * VF inventory from sysfs: InfiniBand SR-IOV PFs, their VFs, and each VF's
 * netdev, RDMA device and driver, found by PCI address.
 *
 * Layout read (Linux sysfs ABI, Documentation/ABI/testing/sysfs-bus-pci and
 * sysfs-class-net; the root is configurable so tests use a fake tree):
 *   <root>/bus/pci/devices/<pci>            -> the PCI device directory
 *     sriov_totalvfs, sriov_numvfs          PF only (SR-IOV capable)
 *     virtfn<N>   -> ../<vf pci>             PF only: VF index N
 *     physfn      -> ../<pf pci>             VF only
 *     driver      -> .../bus/pci/drivers/<name>  absent when unbound
 *     net/<ifname>/{type,ifindex}           netdevs of the function
 *     infiniband/<ibdev>/                   RDMA device of the function
 *   <root>/bus/pci/drivers/<name>/{bind,unbind}
 * A PF's IPoIB netdev is the one whose type is ARPHRD_INFINIBAND (32,
 * <net/if_arp.h>) and that has no "parent" attribute (IPoIB P_Key child
 * interfaces have one).
 *
 * Nothing here caches: every lookup reads sysfs again, so a netdev renamed by
 * udev or re-created by a driver rebind is found under its new name.
 */
#ifndef IBVF_VF_INVENTORY_H
#define IBVF_VF_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>

#include <ibvf/types.h>

#define IBVF_PCI_LEN	       32 /* "0000:03:00.2" + NUL, with room for long domains */
#define IBVF_IFNAME_LEN	       16 /* IFNAMSIZ */
#define IBVF_IBDEV_LEN	       64 /* IB_DEVICE_NAME_MAX */
#define IBVF_DRIVER_LEN	       64
#define IBVF_ARPHRD_INFINIBAND 32

/** One VF as sysfs shows it now. Empty strings mean "none". */
struct ibvf_vf_info {
	char pci[IBVF_PCI_LEN];	       /* VF PCI address, what Multus passes as deviceID */
	int index;		       /* N of the PF's virtfnN link */
	char driver[IBVF_DRIVER_LEN];  /* bound driver ("mlx5_core", "vfio-pci"); "" unbound */
	char netdev[IBVF_IFNAME_LEN];  /* the VF's netdev, "" when none */
	int ifindex;		       /* of @netdev, 0 when none */
	char rdma_dev[IBVF_IBDEV_LEN]; /* the VF's RDMA device, "" when none */
	char pf_pci[IBVF_PCI_LEN];
	char pf_netdev[IBVF_IFNAME_LEN]; /* PF's IPoIB netdev, "" when none */
	int pf_ifindex;			 /* of @pf_netdev, 0 when none */
	char pf_driver[IBVF_DRIVER_LEN];
};

/** One SR-IOV capable PF with an RDMA device or an IPoIB netdev. */
struct ibvf_pf_info {
	char pci[IBVF_PCI_LEN];
	char netdev[IBVF_IFNAME_LEN]; /* IPoIB netdev, "" when none */
	int ifindex;
	char rdma_dev[IBVF_IBDEV_LEN];
	char driver[IBVF_DRIVER_LEN];
	int num_vfs;		  /* sriov_numvfs: 0 = not in SR-IOV mode */
	int total_vfs;		  /* sriov_totalvfs */
	struct ibvf_vf_info *vfs; /* sorted by index */
	size_t n_vfs;
};

/**
 * Resolve a netdev name (or altname) to an ifindex in the caller's netns;
 * 0 when unknown. The default tries if_nametoindex(3), then RTM_GETLINK with
 * IFLA_ALT_IFNAME (Linux >= 5.5), because altnames may be longer than
 * IFNAMSIZ and the SIOCGIFINDEX ioctl cannot carry them.
 */
typedef unsigned int (*ibvf_ifname_resolver)(const char *name);

struct ibvf_inventory {
	char *sysfs_root;
	struct ibvf_pf_info *pfs; /* sorted by PCI address */
	size_t n_pfs;
	ibvf_ifname_resolver resolve; /* test seam; default if_nametoindex */
};

/* ibvf_pci_addr_parse() / ibvf_pci_addr_valid(): <ibvf/types.h>. */

/**
 * ibvf_inventory_scan() - read every SR-IOV capable PCI device under
 * @sysfs_root that has an RDMA device or an IPoIB netdev, with its VFs.
 * Return: 0, -ENOENT (no <root>/bus/pci/devices), -ENOMEM, -EIO.
 */
int ibvf_inventory_scan(const char *sysfs_root, struct ibvf_inventory **out, char *err,
			size_t errlen);

/** ibvf_inventory_free() - NULL is a no-op. */
void ibvf_inventory_free(struct ibvf_inventory *inv);

/** ibvf_inventory_find_pf() - by PF PCI address, IPoIB netdev or RDMA device name. */
const struct ibvf_pf_info *ibvf_inventory_find_pf(const struct ibvf_inventory *inv,
						  const char *name);

/** ibvf_inventory_find_vf_pci() - the VF with PCI address @pci, or NULL. */
const struct ibvf_vf_info *ibvf_inventory_find_vf_pci(const struct ibvf_inventory *inv,
						      const char *pci);

/**
 * ibvf_inventory_find_vf_netdev() - the VF whose netdev is @name; when no
 * name matches, @name is resolved (altnames too) to an ifindex and matched
 * against the VFs' ifindexes.
 */
const struct ibvf_vf_info *ibvf_inventory_find_vf_netdev(const struct ibvf_inventory *inv,
							 const char *name);

/** ibvf_inventory_find_vf_rdma() - the VF whose RDMA device is @name, or NULL. */
const struct ibvf_vf_info *ibvf_inventory_find_vf_rdma(const struct ibvf_inventory *inv,
						       const char *name);

/**
 * ibvf_vf_lookup() - read one VF by PCI address, without scanning others.
 * Return: 0; -EINVAL (malformed address, or the device is not a VF: no
 * physfn); -ENODEV (no such PCI device; PF not in SR-IOV mode; the VF is not
 * among its PF's virtfnN links); -EIO (unreadable sysfs).
 */
int ibvf_vf_lookup(const char *sysfs_root, const char *pci, struct ibvf_vf_info *out, char *err,
		   size_t errlen);

/** What ibvf_vf_reread() reads. */
enum { IBVF_REREAD_NETDEV = 1, IBVF_REREAD_RDMA = 2 };

/**
 * ibvf_vf_reread() - refresh @vf->netdev and ifindex (@what has
 * IBVF_REREAD_NETDEV) and/or @vf->rdma_dev (IBVF_REREAD_RDMA) of the VF
 * @vf->pci (as ibvf_vf_lookup() gave it) from the VF's own sysfs directory
 * alone, by ibvf_vf_lookup()'s rules (a non-child netdev, IPoIB first, lowest
 * ifindex; the first RDMA device by name), without reading its PF again:
 * for a caller that looked the VF up once and needs a name again after a
 * rebind or an RDMA device move re-created it (issue 17: the PF part is most
 * of a lookup). Empty names when there are none now.
 * Return: 0; -EINVAL (malformed address, or no physfn: not a VF); -ENODEV
 * (no such PCI device).
 */
int ibvf_vf_reread(const char *sysfs_root, struct ibvf_vf_info *vf, unsigned what, char *err,
		   size_t errlen);

/**
 * ibvf_vf_lookup_index() - the VF with index @index of PF @pf (PCI address,
 * IPoIB netdev or RDMA device name). Errors as ibvf_vf_lookup().
 */
int ibvf_vf_lookup_index(const char *sysfs_root, const char *pf, int index,
			 struct ibvf_vf_info *out, char *err, size_t errlen);

/**
 * ibvf_pci_dev_path() - "<root>/bus/pci/devices/<pci>[/<sub>]" into @buf.
 * Return: 0 or -ENAMETOOLONG.
 */
int ibvf_pci_dev_path(const char *sysfs_root, const char *pci, const char *sub, char *buf,
		      size_t len);

/**
 * ibvf_sysfs_read_str() - read a small sysfs attribute file into @buf (@len
 * bytes, NUL-terminated), without trailing newline or blanks. The file
 * is opened by ibvf_file_open_regular(): a FIFO or device in its place is
 * refused at once (a fake sysfs tree is named by config).
 * Return: 0, or ibvf_file_open_regular()'s negative errno (-EINVAL: not a
 * regular file).
 */
int ibvf_sysfs_read_str(const char *path, char *buf, size_t len);

/** ibvf_pci_dev_exists() - the PCI device directory of @pci exists. */
bool ibvf_pci_dev_exists(const char *sysfs_root, const char *pci);

/**
 * ibvf_sysfs_link_base() - the last component of the target of symlink
 * @path (sysfs "driver", "physfn", "virtfn<N>" links: a driver name or a PCI
 * address) into @buf of @len bytes; trailing '/' ignored.
 * Return: 0, -ENAMETOOLONG, or readlink(2)'s errno (-ENOENT when absent).
 */
int ibvf_sysfs_link_base(const char *path, char *buf, size_t len);

#endif /* IBVF_VF_INVENTORY_H */
