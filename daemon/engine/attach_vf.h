/* SPDX-License-Identifier: MIT */
/*
 * The attach engine's VF seam (attach.h struct ibvf_vf_ops) over the VF
 * manager of vf_manager.h: inventory by PCI address, GUID programming with
 * rebind, locking and rollback through the configured VF driver (netlink in
 * production, ibsim in the labs).
 */
#ifndef IBVF_ATTACH_VF_H
#define IBVF_ATTACH_VF_H

#include "attach.h"
#include "vf_manager.h"

/**
 * ibvf_attach_vf_ops() - fill @ops so that its calls go to @m (not owned;
 * it must outlive the engine); VF listing scans @sysfs_root (copied).
 * Resetting a VF to GUID 0 uses ibvf_vf_reset_link() (GUID 0 is the state
 * SR-IOV creates a VF in) with the link state the caller gives (a release:
 * the VF's pre-attach link state), so GUID-0 and GUID resets restore it alike.
 * Return: 0 or -ENOMEM.
 */
int ibvf_attach_vf_ops(struct ibvf_vf_manager *m, const char *sysfs_root, struct ibvf_vf_ops *ops);

/** ibvf_attach_vf_ops_free() - free what ibvf_attach_vf_ops() allocated. */
void ibvf_attach_vf_ops_free(struct ibvf_vf_ops *ops);

#endif /* IBVF_ATTACH_VF_H */
