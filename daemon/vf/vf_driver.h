/* SPDX-License-Identifier: MIT */
/*
 * The VF-driver seam: the few operations that program one VF's GUIDs and
 * link state, rebind its driver and read its state back. vf_manager.c
 * orchestrates them (order, wait, rollback, locking); drivers do one step
 * each and never roll back themselves.
 *
 * Implementations:
 *   netlink  built in, the production driver: rtnetlink on the PF's IPoIB
 *            netdev (vf_netlink.c) and sysfs driver/unbind + bind
 *            (vf_driver_netlink.c).
 *   others   VF driver modules (struct ibvf_vf_module below), dlopen'ed from
 *            vf.module_dir. Only lab drivers exist as modules (the ibsim
 *            driver, the fake driver: tests/lab/vf-drivers/); they are built
 *            for tests and never installed.
 * Tests compose their own ops tables (fault injection wraps a real driver).
 */
#ifndef IBVF_VF_DRIVER_H
#define IBVF_VF_DRIVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/types.h>

#include "json_util.h"
#include "vf_inventory.h"

/** Which GUID of a VF (the values are the IFLA_VF_IB_* attribute types). */
enum ibvf_guid_kind {
	IBVF_GUID_NODE = 10, /* IFLA_VF_IB_NODE_GUID */
	IBVF_GUID_PORT = 11, /* IFLA_VF_IB_PORT_GUID */
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
	int (*read_back)(struct ibvf_vf_driver *d, const struct ibvf_vf_info *const *vfs, size_t n,
			 struct ibvf_vf_state *out, char *err, size_t errlen);
	void (*destroy)(struct ibvf_vf_driver *d);
};

struct ibvf_vf_driver {
	const struct ibvf_vf_driver_ops *ops;
	char *sysfs_root;
	void *priv;
	void *module; /* dlopen() handle of the driver's module; set by ibvf_vf_driver_open() */
};

/** What ibvf_vf_driver_open() needs: all strings are borrowed. */
struct ibvf_vf_driver_params {
	const char *name;	  /* "netlink" (built in) or a VF driver module's name */
	const char *sysfs_root;	  /* "/sys" on real hosts */
	const char *options_json; /* text of the driver's own config object, or NULL */
	const char *module_dir;	  /* where <name>.so VF driver modules live */
};

/** Version of struct ibvf_vf_module; a module of another version is refused. */
#define IBVF_VF_MODULE_ABI 1
/** The one symbol a VF driver module exports: a const struct ibvf_vf_module. */
#define IBVF_VF_MODULE_SYMBOL "ibvf_vf_module_v1"

/**
 * struct ibvf_vf_module - what a VF driver module (<module_dir>/<name>.so)
 * exports as IBVF_VF_MODULE_SYMBOL. The module runs inside ibvfd, ibvfctl or
 * ib-sriov and may call the host's VF layer (it is built with this tree).
 * @abi:          IBVF_VF_MODULE_ABI.
 * @name:         the driver's name, equal to the file's base name.
 * @banner:       logged at warning level whenever the driver is opened,
 *                with the driver's name and sysfs root (a lab driver says
 *                loudly that it never touches hardware).
 * @config_check: optional: validate the driver's config object; @path names
 *                it in messages. Return 0 or -EINVAL with the reason in @c.
 * @create:       optional: a VF driver on @sysfs_root with @options_json.
 * @engine_seams: optional, opaque to this layer: a module that replaces the
 *                engine's VF and port seams as a whole (the fake driver)
 *                points it at a struct ibvf_engine_seams (engine/vf_seams.h).
 */
struct ibvf_vf_module {
	unsigned int abi;
	const char *name;
	const char *banner;
	int (*config_check)(const struct ibvf_jctx *c, const char *path, json_t *obj);
	int (*create)(const char *sysfs_root, const char *options_json, struct ibvf_vf_driver **out,
		      char *err, size_t errlen);
	const void *engine_seams;
};

/**
 * ibvf_vf_module_load() - dlopen <@module_dir>/<@name>.so and check its
 * IBVF_VF_MODULE_SYMBOL table (ABI version, name). The module stays loaded
 * until ibvf_vf_module_unload(@handle).
 * Return: 0; -EINVAL (bad name); -ENOENT (no such module: VF driver modules
 * other than netlink are lab drivers, built only for tests); -EPERM (owner
 * or mode); -ENOEXEC (dlopen, missing symbol); -EPROTO (ABI or name
 * mismatch).
 */
int ibvf_vf_module_load(const char *module_dir, const char *name, const struct ibvf_vf_module **out,
			void **handle, char *err, size_t errlen);

/** ibvf_vf_module_unload() - dlclose a handle of ibvf_vf_module_load(); NULL is a no-op. */
void ibvf_vf_module_unload(void *handle);

/**
 * ibvf_vf_module_config_check() - load module @name and run its
 * config_check() on @obj (a module without one accepts any object).
 * Return: 0, the loader's errors (message in @c), or config_check()'s.
 */
int ibvf_vf_module_config_check(const char *module_dir, const char *name, const struct ibvf_jctx *c,
				const char *path, json_t *obj);

/**
 * ibvf_vf_driver_open() - the driver @p->name on @p->sysfs_root: netlink is
 * built in; any other name is a VF driver module (its banner is logged at
 * warning level). A module without create() (the fake driver, which only
 * replaces the engine's seams) is -EOPNOTSUPP here.
 * Return: 0, the loader's errors, -EINVAL (bad options), -ENOMEM, socket
 * errors.
 */
int ibvf_vf_driver_open(const struct ibvf_vf_driver_params *p, struct ibvf_vf_driver **out,
			char *err, size_t errlen);

/** ibvf_vf_driver_destroy() - NULL is a no-op; unloads the driver's module. */
void ibvf_vf_driver_destroy(struct ibvf_vf_driver *d);

/** ibvf_vf_driver_netlink_create() - the production driver. */
int ibvf_vf_driver_netlink_create(const char *sysfs_root, struct ibvf_vf_driver **out, char *err,
				  size_t errlen);

/**
 * ibvf_vf_sysfs_rebind() - unbind @vf from its driver by writing its PCI
 * address to <dev>/driver/unbind, wait (<= @timeout_ms) until the driver
 * link is gone, then write it to <root>/bus/pci/drivers/<driver>/bind.
 * @driver: the driver to bind (the VF's current one when it is bound).
 * Return: 0, -ENODEV (the VF vanished), -ETIMEDOUT (still bound), -EINVAL
 * (no driver known), or the write's errno.
 */
int ibvf_vf_sysfs_rebind(const char *sysfs_root, const struct ibvf_vf_info *vf, const char *driver,
			 uint32_t timeout_ms, char *err, size_t errlen);

/** ibvf_guid_kind_name() - "node" or "port". */
const char *ibvf_guid_kind_name(enum ibvf_guid_kind k);

#endif /* IBVF_VF_DRIVER_H */
