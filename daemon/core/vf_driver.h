/* SPDX-License-Identifier: MIT */
/*
 * The VF-driver seam: the few operations that program one VF's GUIDs and
 * link state, rebind its driver and read its state back. vf_manager.c
 * orchestrates them (order, wait, rollback, locking); drivers do one step
 * each and never roll back themselves.
 *
 * Implementations:
 *   netlink  production: rtnetlink on the PF's IPoIB netdev (vf_netlink.c) and
 *            sysfs driver/unbind + bind (vf_driver_netlink.c).
 *   ibsim    labs only: each VF of a fake-sysfs PF is an HCA node of an ibsim
 *            fabric, programmed through ibsim's console (vf_driver_ibsim.c;
 *            docs/config.md "vf.ibsim").
 * Tests compose their own ops tables (fault injection wraps a real driver).
 */
#ifndef IBVF_VF_DRIVER_H
#define IBVF_VF_DRIVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/types.h>

#include "config.h"
#include "json_util.h"
#include "vf_inventory.h"

/** Which GUID of a VF (the values are the IFLA_VF_IB_* attribute types). */
enum ibvf_guid_kind {
	IBVF_GUID_NODE = 10,	/* IFLA_VF_IB_NODE_GUID */
	IBVF_GUID_PORT = 11,	/* IFLA_VF_IB_PORT_GUID */
};

/* enum ibvf_vf_link_state and its parser live in <ibvf/types.h>. */

/** What a driver can tell about one VF. GUIDs are host-order u64s. */
struct ibvf_vf_state {
	bool node_guid_known, port_guid_known, link_state_known;
	uint64_t node_guid, port_guid;
	enum ibvf_vf_link_state link_state;
};

struct ibvf_vf_driver;

/**
 * Driver operations. Each returns 0 or a negative errno with a reason in
 * @err that names the PF, VF index and (for the kernel) the driver.
 */
struct ibvf_vf_driver_ops {
	const char *name;
	/** set_guid() - program one GUID; it takes effect after rebind(). */
	int (*set_guid)(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
			enum ibvf_guid_kind kind, uint64_t guid, char *err, size_t errlen);
	/** set_link_state() - program the VF's link policy. */
	int (*set_link_state)(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
			      enum ibvf_vf_link_state st, char *err, size_t errlen);
	/**
	 * rebind() - unbind and bind the VF's driver (@vf->driver, or @driver
	 * when the VF is unbound now) so programmed GUIDs take effect. Returns
	 * once the bind was requested; the caller waits for the netdev and RDMA
	 * device. @timeout_ms bounds any wait inside (e.g. for the unbind).
	 */
	int (*rebind)(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf, const char *driver,
		      uint32_t timeout_ms, char *err, size_t errlen);
	/**
	 * read_back() - state of @n VFs of ONE PF into @out[n]; what the driver
	 * cannot tell is left "unknown" (that is not an error).
	 */
	int (*read_back)(struct ibvf_vf_driver *d, const struct ibvf_vf_info *const *vfs,
			 size_t n, struct ibvf_vf_state *out, char *err, size_t errlen);
	void (*destroy)(struct ibvf_vf_driver *d);
};

struct ibvf_vf_driver {
	const struct ibvf_vf_driver_ops *ops;
	char *sysfs_root;
	void *priv;
};

/**
 * ibvf_vf_driver_create() - the driver named by @cfg->vf.driver on
 * @cfg->sysfs_root. A driver other than netlink is logged at warning level,
 * loudly: it never touches hardware.
 * Return: 0, -EINVAL (bad vf.ibsim config), -ENOMEM, socket errors.
 */
int ibvf_vf_driver_create(const struct ibvf_config *cfg, struct ibvf_vf_driver **out, char *err,
			  size_t errlen);

/** ibvf_vf_driver_destroy() - NULL is a no-op. */
void ibvf_vf_driver_destroy(struct ibvf_vf_driver *d);

/** ibvf_vf_driver_netlink_create() - the production driver. */
int ibvf_vf_driver_netlink_create(const char *sysfs_root, struct ibvf_vf_driver **out, char *err,
				  size_t errlen);

/**
 * ibvf_vf_driver_ibsim_create() - the lab driver; @ibsim_json is the text of
 * the vf.ibsim config object (keys: docs/config.md "vf.ibsim").
 */
int ibvf_vf_driver_ibsim_create(const char *sysfs_root, const char *ibsim_json,
				struct ibvf_vf_driver **out, char *err, size_t errlen);

/**
 * ibvf_vf_ibsim_config_check() - validate a vf.ibsim object (unknown keys,
 * types, node names); @path names it in errors ("vf.ibsim").
 * Return: 0 or -EINVAL with file and key path in the context's buffer.
 */
int ibvf_vf_ibsim_config_check(const struct ibvf_jctx *c, const char *path, json_t *obj);

/**
 * ibvf_vf_sysfs_rebind() - unbind @vf from its driver by writing its PCI
 * address to <dev>/driver/unbind, wait (<= @timeout_ms) until the driver
 * link is gone, then write it to <root>/bus/pci/drivers/<driver>/bind.
 * @driver: the driver to bind (the VF's current one when it is bound).
 * Return: 0, -ENODEV (the VF vanished), -ETIMEDOUT (still bound), -EINVAL
 * (no driver known), or the write's errno.
 */
int ibvf_vf_sysfs_rebind(const char *sysfs_root, const struct ibvf_vf_info *vf,
			 const char *driver, uint32_t timeout_ms, char *err, size_t errlen);

/** ibvf_guid_kind_name() - "node" or "port". */
const char *ibvf_guid_kind_name(enum ibvf_guid_kind k);

#endif /* IBVF_VF_DRIVER_H */
