/* SPDX-License-Identifier: MIT */
/*
 * Programming one VF end to end: validate, lock, read the old state, set
 * node GUID, port GUID and link state, rebind the driver, and wait until the
 * VF's netdev and RDMA device are back, found again by PCI address (never by
 * the old name: udev may rename it, ib-sriov-cni issue 217). A failure at any
 * step rolls back what was done and reports both the original error and the
 * rollback's outcome.
 *
 * Locking: one lock file per VF (<lock_dir>/vf-<pci>.lock, flock(2)), so
 * operations on different VFs run in parallel while the same VF is never
 * programmed twice at once, across threads (each operation opens its own
 * file description) and processes (ibvfd and ibvfctl) alike.
 *
 * GUIDs are host-order u64s (ibvf/types.h). Times are milliseconds.
 */
#ifndef IBVF_VF_MANAGER_H
#define IBVF_VF_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vf_driver.h"
#include "vf_inventory.h"

struct ibvf_vf_manager_opts {
	const char *sysfs_root;
	const char *lock_dir;	    /* created (0700) if absent */
	uint32_t rebind_timeout_ms; /* wait for netdev + RDMA device; 0 → 5000 */
	uint32_t lock_timeout_ms;   /* wait for another operation on the VF; 0 → 30000 */
	uint32_t poll_ms;	    /* sysfs polling period; 0 → 20 */
};

/** A request to program one VF. */
struct ibvf_vf_request {
	uint64_t node_guid; /* assignable (not 0, not all-ones) */
	uint64_t port_guid; /* assignable */
	int link_state;	    /* enum ibvf_vf_link_state, or -1 to leave it */
	bool rebind;	    /* unbind/bind so the GUIDs take effect (normally true) */
	/*
	 * The caller's record of the VF before (e.g. the daemon's store), used
	 * for rollback where the driver cannot read back (kernels without
	 * ndo_get_vf_guid, EMSGSIZE). NULL: read back only.
	 */
	const struct ibvf_vf_state *prev;
};

struct ibvf_vf_manager;

/**
 * ibvf_vf_manager_create() - take ownership of @drv (destroyed with the
 * manager, also on failure).
 * Return: 0, -ENOMEM, or the lock directory's error.
 */
int ibvf_vf_manager_create(const struct ibvf_vf_manager_opts *o, struct ibvf_vf_driver *drv,
			   struct ibvf_vf_manager **out, char *err, size_t errlen);

/** ibvf_vf_manager_destroy() - NULL is a no-op. */
void ibvf_vf_manager_destroy(struct ibvf_vf_manager *m);

/** ibvf_vf_manager_driver() - the driver in use. */
struct ibvf_vf_driver *ibvf_vf_manager_driver(struct ibvf_vf_manager *m);

/**
 * ibvf_vf_program() - program VF @pci (see the file comment for the steps).
 * @out: on success the VF as it is now (new netdev name and RDMA device).
 * Return: 0 or a negative errno; on failure @err holds "<what failed>;
 * rolled back: ..." or "...; ROLLBACK FAILED: ...". Bad input fails before
 * anything is touched: -EINVAL (GUID 0 / all-ones, PCI address not a VF,
 * VF bound to vfio-pci or unbound), -ENODEV (no such VF, PF not in SR-IOV
 * mode). Kernel: -EOPNOTSUPP (driver has no VF GUID support). Rebind:
 * -ETIMEDOUT (netdev / RDMA device not back within rebind_timeout_ms),
 * -ENODEV (the VF vanished). -EBUSY: the VF stayed locked by another
 * operation for lock_timeout_ms.
 */
int ibvf_vf_program(struct ibvf_vf_manager *m, const char *pci, const struct ibvf_vf_request *req,
		    struct ibvf_vf_info *out, char *err, size_t errlen);

/**
 * ibvf_vf_reset() - give VF @pci GUID 0 (node and port) and rebind: the
 * state SR-IOV creates a VF in, for when its owner is gone. Idempotent.
 */
int ibvf_vf_reset(struct ibvf_vf_manager *m, const char *pci, struct ibvf_vf_info *out, char *err,
		  size_t errlen);

/**
 * ibvf_vf_reset_link() - ibvf_vf_reset() that also sets the VF's link state
 * to @link_state (enum ibvf_vf_link_state, or -1 to leave it), in the same
 * locked, rolled-back operation: a release puts back the link state the VF
 * had before its attach (issue 15). Errors as ibvf_vf_program().
 */
int ibvf_vf_reset_link(struct ibvf_vf_manager *m, const char *pci, int link_state,
		       struct ibvf_vf_info *out, char *err, size_t errlen);

/**
 * ibvf_vf_request_make() - the request behind the engine's VF seam call
 * program(@node, @port, @link) (engine/attach_seams.h): GUIDs, rebind, and
 * the link state named by @link ("auto", "enable", "disable", any case) or
 * -1 when @link is NULL or "". *@reset is true when both GUIDs are 0: the
 * VF is reset (ibvf_vf_reset_link() with @req->link_state), the state
 * SR-IOV creates it in, with the link state restored all the same. The
 * production seam (attach_vf.c) and the lab's fake seam both build their
 * requests here, so the fake cannot disagree with the real reset path.
 * Return: 0 or -EINVAL (unknown link state name, in @err).
 */
int ibvf_vf_request_make(uint64_t node, uint64_t port, const char *link,
			 struct ibvf_vf_request *req, bool *reset, char *err, size_t errlen);

/**
 * ibvf_vf_query() - the VF now (sysfs) and what its driver reads back.
 * A read-back failure leaves @st unknown and is only logged.
 */
int ibvf_vf_query(struct ibvf_vf_manager *m, const char *pci, struct ibvf_vf_info *vf,
		  struct ibvf_vf_state *st, char *err, size_t errlen);

#endif /* IBVF_VF_MANAGER_H */
