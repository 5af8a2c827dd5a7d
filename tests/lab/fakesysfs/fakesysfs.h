/* SPDX-License-Identifier: MIT */
/*
 * Writer of a fake sysfs tree with the PCI / SR-IOV / netdev / RDMA layout
 * that vf_inventory.c reads (tests/lab/fakesysfs/README.md draws it). Used by
 * the unit tests, by the ibvf-fakesysfs lab tool, and by the ibsim lab VF
 * driver, which plays the kernel's part on a "rebind" (the fake netdev goes
 * away and comes back under a new name). Never used on a real /sys.
 *
 * Links are relative, as in the kernel's sysfs, so a tree can be moved.
 * Every function returns 0 or a negative errno.
 */
#ifndef IBVF_FAKESYSFS_H
#define IBVF_FAKESYSFS_H

#include <stdbool.h>
#include <stddef.h>

/** A PF to create. NULL strings mean "none". */
struct ibvf_fake_pf {
	const char *pci;      /* "0000:03:00.0" */
	const char *netdev;   /* the PF's IPoIB netdev, e.g. "ib0" */
	int ifindex;	      /* of @netdev */
	int netdev_type;      /* 0 means 32 (ARPHRD_INFINIBAND) */
	const char *rdma_dev; /* "mlx5_0" */
	const char *driver;   /* "mlx5_core"; NULL: unbound */
	int total_vfs;	      /* sriov_totalvfs (>= num_vfs) */
	int num_vfs;	      /* sriov_numvfs: VFs created now */
	int vf_offset;	      /* routing-ID offset of VF 0 (PCIe SR-IOV First VF Offset); 0 → 2 */
};

/** One VF's function state. NULL strings mean "none". */
struct ibvf_fake_vf {
	const char *driver; /* "mlx5_core", "vfio-pci"; NULL: unbound */
	const char *netdev; /* VF netdev name */
	int ifindex;
	const char *rdma_dev; /* "mlx5_4" */
	const char *altname;  /* recorded in net/<if>/ibvf_altname (documentation only) */
};

/** ibvf_fake_init() - create the skeleton (bus/pci/devices, class/net, ...) under @root. */
int ibvf_fake_init(const char *root);

/**
 * ibvf_fake_vf_pci() - PCI address of VF @index of PF @pf_pci with routing-ID
 * offset @offset (stride 1): PF 0000:03:00.0, offset 2 → VF 0 is 0000:03:00.2,
 * VF 6 is 0000:03:01.0.
 */
int ibvf_fake_vf_pci(const char *pf_pci, int offset, int index, char *buf, size_t len);

/**
 * ibvf_fake_add_pf() - the PF with its netdev, RDMA device, driver and
 * @pf->num_vfs VFs; @vfs has num_vfs entries (NULL: every VF bound to the
 * PF's driver with no netdev and no RDMA device). Also writes the legacy
 * per-VF GUID files sriov/<N>/{node,port,policy} (all-zero GUIDs, "Follow").
 */
int ibvf_fake_add_pf(const char *root, const struct ibvf_fake_pf *pf,
		     const struct ibvf_fake_vf *vfs);

/** ibvf_fake_vf_unbind() - what the kernel does on driver unbind: driver link, net/, infiniband/
 * go. */
int ibvf_fake_vf_unbind(const char *root, const char *pci);

/** ibvf_fake_vf_bind() - bind @v->driver and create @v's netdev and RDMA device. */
int ibvf_fake_vf_bind(const char *root, const char *pci, const struct ibvf_fake_vf *v);

/** ibvf_fake_remove_dev() - the PCI device vanishes (all its links too). */
int ibvf_fake_remove_dev(const char *root, const char *pci);

/** ibvf_fake_set_numvfs() - overwrite sriov_numvfs of a PF (does not add/remove VFs). */
int ibvf_fake_set_numvfs(const char *root, const char *pf_pci, int n);

/** ibvf_fake_write() - write @text to <root>/@rel (created, truncated). */
int ibvf_fake_write(const char *root, const char *rel, const char *text);

/** ibvf_fake_rm_rf() - remove the tree under @path (no symlink is followed). */
int ibvf_fake_rm_rf(const char *path);

#endif /* IBVF_FAKESYSFS_H */
