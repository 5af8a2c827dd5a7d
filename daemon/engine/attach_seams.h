/* SPDX-License-Identifier: MIT */
/*
 * The engine's two seams: how it reaches VFs (inventory, GUID programming)
 * and ports (wait for ACTIVE with the PKeys). ibvfd wires them to the VF
 * manager (attach_vf.h) and the port watcher (attach_port.h), the lab
 * "fake" module to files, the unit tests to fakes. Used by the attach state
 * machine and by reconciliation.
 */
#ifndef IBVF_ATTACH_SEAMS_H
#define IBVF_ATTACH_SEAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guid_pool.h"

/** A VF as the engine sees it. */
struct ibvf_attach_vf {
	char pci[32]; /* "0000:03:00.2" */
	char pf[16];  /* PF netdev */
	int vf_index;
	char netdev[32];    /* VF netdev, "" when none (e.g. moved into a Pod) */
	char rdma_dev[32];  /* VF RDMA device, "" when none */
	bool guids_known;   /* node/port GUID could be read back */
	uint64_t node_guid; /* host order */
	uint64_t port_guid;
	char link_state[8]; /* "auto" / "enable" / "disable" / "" unknown */
	/*
	 * No kernel driver bound (sysfs "driver" link absent): its "" netdev then
	 * says nothing of a Pod (a rebind cut short). Drivers that cannot tell
	 * leave it false.
	 */
	bool unbound;
};

/** VF seam: inventory and GUID programming (vf_netlink / lab ibsim driver, or fakes). */
struct ibvf_vf_ops {
	/** lookup() - the VF at PCI address @pci, current GUIDs read back if possible. */
	int (*lookup)(void *ctx, const char *pci, struct ibvf_attach_vf *out, char *err,
		      size_t errlen);
	/**
	 * program() - set node and port GUID (and link state unless NULL/""),
	 * rebind the VF driver, then refresh @vf's netdev/RDMA device names.
	 * On failure the VF is left as it was (the driver rolls back).
	 */
	int (*program)(void *ctx, struct ibvf_attach_vf *vf, uint64_t node_guid, uint64_t port_guid,
		       const char *link_state, char *err, size_t errlen);
	/** list() - every VF of the node (reconciliation); @cb's non-zero return stops. */
	int (*list)(void *ctx, int (*cb)(void *arg, const struct ibvf_attach_vf *vf), void *arg,
		    char *err, size_t errlen);
	void *ctx;
};

/** What the port watcher saw. */
struct ibvf_port_result {
	uint16_t lid;
	uint16_t sm_lid;
	char state[16];			     /* "ACTIVE", "INIT", ... */
	int pkey_index[IBVF_POOL_MAX_PKEYS]; /* per requested PKey, -1 if absent */
};

/** Port seam: wait for the VF port to be ACTIVE with every PKey in its P_Key table. */
struct ibvf_port_ops {
	/**
	 * wait() - until @deadline_ms (CLOCK_MONOTONIC ms). @pkeys carry the
	 * membership bit. On -ETIMEDOUT @out holds what was last seen and @err
	 * says what was missing.
	 */
	int (*wait)(void *ctx, const struct ibvf_attach_vf *vf, uint64_t port_guid,
		    const uint16_t *pkeys, size_t n, int64_t deadline_ms,
		    struct ibvf_port_result *out, char *err, size_t errlen);
	void *ctx;
};

#endif /* IBVF_ATTACH_SEAMS_H */
