/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: what the plugin needs to know about the VF named by
 * "deviceID", read through the VF inventory of daemon/vf (vf_inventory.h)
 * from sysfs (root configurable with $IBVF_SYSFS_ROOT for tests; default
 * /sys). Layout (Documentation/ABI/testing/sysfs-bus-pci):
 *   bus/pci/devices/<VF>/physfn          -> ../<PF>      (present on VFs only)
 *   bus/pci/devices/<PF>/virtfn<N>       -> ../<VF>      (N = VF index)
 *   bus/pci/devices/<PCI>/net/<netdev>/  (netdevs in the reader's netns)
 *   bus/pci/devices/<PCI>/infiniband/<rdma device>/
 *   bus/pci/devices/<PCI>/driver         -> .../drivers/<name>
 */
#ifndef IBVF_CNI_VF_H
#define IBVF_CNI_VF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cni_config.h"

struct cni_vf {
	char pci[32];
	bool is_vf; /* has physfn */
	char pf_pci[32];
	char pf_netdev[CNI_IFNAME_LEN]; /* "" when the PF has no netdev */
	int vf_index;			/* -1 when not a VF or not found under the PF */
	char netdev[CNI_IFNAME_LEN];	/* "" when none is visible (vfio, moved, absent) */
	char rdma_dev[64];		/* "" when none */
	char driver[64];		/* "" when unbound */
};

/** cni_sysfs_root() - $IBVF_SYSFS_ROOT or "/sys". */
const char *cni_sysfs_root(void);

/**
 * cni_vf_lookup() - fill @vf for the PCI device @pci.
 * Return: 0; -ENODEV when sysfs has no such PCI device; other -errno.
 */
int cni_vf_lookup(const char *pci, struct cni_vf *vf, char *err, size_t errlen);

/**
 * cni_vf_netdev() - the netdev sysfs lists under the VF @pci now (in the
 * reader's netns; cni_vf_lookup()'s choice among several), in @name
 * (CNI_IFNAME_LEN bytes). Re-read from the VF's own directory alone, for
 * the name a rebind or an RDMA device move re-created after the one
 * cni_vf_lookup() (issue 17: not the PF part again).
 * Return: 0, or -ENODEV when there is none (or no such PCI device).
 */
int cni_vf_netdev(const char *pci, char *name, char *err, size_t errlen);

/**
 * cni_vf_rdma_dev() - the first RDMA device of the VF @pci now into @name
 * (@len bytes), re-read as cni_vf_netdev(). Return: 0; -ENODEV if none.
 */
int cni_vf_rdma_dev(const char *pci, char *name, size_t len, char *err, size_t errlen);

struct cni_cache;

/**
 * cni_vf_port_check() - is port 1 of RDMA device @rdma_dev ACTIVE, and does
 * its P_Key table hold every PKey in @pkeys (a full member needs the 0x8000
 * bit, IBTA 10.9.1.2)? Read from sysfs class/infiniband/<dev>/ports/1/
 * {state,pkeys/N}. With @netns_fd >= 0 (device moved to a Pod netns, where
 * sysfs shows it only to that netns) a child process enters the netns and
 * mounts a private sysfs to read it, as `ip netns exec` does.
 * Return: 0; -ENETDOWN (port not ACTIVE); -ENOENT (PKey missing, named in
 * @err); other -errno.
 */
int cni_vf_port_check(const char *rdma_dev, int netns_fd, const struct cni_pkey *pkeys,
		      size_t n_pkeys, char *err, size_t errlen);

/**
 * cni_vf_guid() - the port GUID (host order) the VF's driver reads back for
 * @vf through the VF manager (daemon/vf/vf_manager.h ibvf_vf_query(): the
 * netlink driver's IFLA_VF_IB_PORT_GUID, or a lab driver's state). @known is
 * false when the driver cannot tell (kernels without ndo_get_vf_guid).
 * Return: 0 or -errno (config, no such VF).
 */
int cni_vf_guid(const struct cni_vf *vf, uint64_t *guid, bool *known, char *err, size_t errlen);

/**
 * cni_vf_compat_apply() - compatibility mode (ib-sriov-cni's ApplyVFConfig):
 * set the VF's link state when @ls is not UNSET and, when @set_guid, save
 * the VF's current GUID into @prev_guid (colon form, 24 bytes: the driver's
 * read-back, else @present_guid, the GUID in the netdev's IPoIB address),
 * set its node and port GUID to @guid and rebind it, through the VF manager
 * (daemon/vf/vf_manager.h). Nothing to do → 0.
 * Return: 0 or -errno (the VF manager rolls back what it did).
 */
int cni_vf_compat_apply(const struct cni_vf *vf, enum cni_link_state ls, bool set_guid,
			uint64_t guid, uint64_t present_guid, char prev_guid[24], char *err,
			size_t errlen);

/**
 * cni_vf_restore() - compatibility mode (ib-sriov-cni's ResetVFConfig): put
 * back the GUID saved in c->prev_guid (all-zero becomes all-ones, as
 * ib-sriov-cni does) with a rebind, and link state "auto" when the
 * configuration had set one. Return: 0 or -errno.
 */
int cni_vf_restore(const struct cni_cache *c, char *err, size_t errlen);

#endif /* IBVF_CNI_VF_H */
