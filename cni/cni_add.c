// SPDX-License-Identifier: MIT
/*
 * ib-sriov CNI plugin: ADD (docs/cni.md "ADD").
 *
 *   validate -> lock -> prepare (ibvfd) | apply (compatibility mode)
 *   -> RDMA device into the Pod netns (rdmaIsolation) -> netdev into the Pod
 *   -> IPAM -> RC check -> cache -> commit (ibvfd) -> result
 *   (daemon mode: the commit is sent before the cache write and its answer
 *   read after it, step_commit_send())
 *
 * Any failure after the prepare/apply step undoes every step done so far, in
 * reverse order (IPAM DEL, netdev back under its host name, RDMA device back,
 * ibvfd release or GUID/link-state restore, cache removed).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ibvf/api.h>

#include "cni_cmd.h"
#include "cni_daemon.h"
#include "cni_ipam.h"
#include "cni_netns.h"
#include "cni_ops.h"
#include "cni_rdma.h"
#include "cni_result.h"
#include "cni_vf.h"
#include "log.h"
#include "rc_check.h"

/** How long to wait for the netdev an RDMA device move re-creates, ms. */
#define CNI_NETDEV_WAIT_MS 3000

struct add {
	struct cni_ctx *ctx;
	enum cni_mode mode;
	const char *socket;
	json_t *owner;
	struct cni_vf vf;
	bool vfio;
	struct cni_ns host, pod;
	int locks[2];
	struct cni_cache c;
	struct cni_prepared prep;
	struct cni_moved moved;
	json_t *ipam_res;
	char rdma_dev[64];
	char what[256]; /* "PF ib0 VF 2, GUID ..., PKey 0x8010" */
	/* what has been done, for the rollback */
	bool prepared, applied, rdma_moved, netdev_moved, ipam_added, cache_written;
};

/* Refresh a->what: the VF, its GUID and PKeys, for every message about it. */
static void describe(struct add *a)
{
	const struct cni_netconf *nc = &a->ctx->nc;
	char g[IBVF_GUID_STR_LEN] = "none";
	size_t off;

	if (a->c.guid)
		ibvf_guid_format(a->c.guid, g);
	else if (nc->guid_source)
		ibvf_guid_format(nc->guid, g);
	off = (size_t)snprintf(a->what, sizeof(a->what), "PF %s VF %d, GUID %s, PKey",
			       a->vf.pf_netdev[0] ? a->vf.pf_netdev : "?", a->vf.vf_index, g);
	if (!nc->n_pkeys)
		snprintf(a->what + off, sizeof(a->what) - off, " none");
	for (size_t i = 0; i < nc->n_pkeys && off < sizeof(a->what); i++)
		off += (size_t)snprintf(a->what + off, sizeof(a->what) - off, " 0x%04x (%s)",
					nc->pkeys[i].key | (nc->pkeys[i].membership ? 0x8000 : 0),
					ibvf_membership_name(nc->pkeys[i].membership));
}

static int validate(struct add *a)
{
	struct cni_ctx *ctx = a->ctx;
	struct cni_netconf *nc = &ctx->nc;
	char err[IBVF_ERR_LEN];
	bool excl = false;
	int ret;

	a->mode = cni_mode_select(nc, &a->socket);
	if (nc->ib_kubernetes_enabled &&
	    (!nc->ib_app_state || strcmp(nc->ib_app_state, "configured")))
		return cni_failf(ctx, CNI_ERR_TRY_AGAIN, "InfiniBand GUID not configured yet",
				 "ibKubernetesEnabled is true and args.cni[\"mellanox.infiniband."
				 "app\"] is \"%s\", not \"configured\": ib-kubernetes has not "
				 "assigned this Pod's GUID yet",
				 nc->ib_app_state ? nc->ib_app_state : "");
	ret = cni_host->vf_lookup(nc->device_id, &a->vf, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_VF, "VF not found", "%s", err);
	a->vfio = !strcmp(a->vf.driver, "vfio-pci");
	if (nc->vfio_pci_mode && !a->vfio)
		return cni_failf(ctx, CNI_ERR_INVALID_CONFIG, "invalid vfioPciMode",
				 "vfioPciMode is true but %s is bound to \"%s\", not vfio-pci",
				 nc->device_id, a->vf.driver);
	if (!a->vf.is_vf && !a->vfio)
		return cni_failf(ctx, CNI_ERR_INVALID_CONFIG, "deviceID is not a VF",
				 "%s is a PF (no physfn); a PF can only be passed through in "
				 "vfioPciMode (bound to vfio-pci)",
				 nc->device_id);
	if (a->mode == CNI_MODE_COMPAT && nc->ib_kubernetes_enabled && a->vf.is_vf &&
	    !nc->guid_source)
		return cni_failf(ctx, CNI_ERR_INVALID_CONFIG, "no GUID from ib-kubernetes",
				 "ibKubernetesEnabled is true but neither runtimeConfig."
				 "infinibandGUID nor args.cni.guid holds a GUID");
	describe(a);
	if (nc->rdma_isolation && !a->vfio) {
		ret = cni_host->rdma_netns_exclusive(&excl, err, sizeof(err));
		if (ret)
			return cni_failf(ctx, CNI_ERR_VF, "cannot read the RDMA netns mode", "%s",
					 err);
		if (!excl)
			return cni_failf(
				ctx, CNI_ERR_INVALID_CONFIG,
				"rdmaIsolation needs RDMA netns exclusive mode",
				"the RDMA subsystem is in shared netns mode; run `rdma "
				"system set netns exclusive` (before any Pod netns exists) "
				"or load ib_core with netns_mode=0");
	}
	ret = cni_host->ns_open(&a->pod, ctx->env.netns, err, sizeof(err));
	if (ret)
		/* gone, or a path that is no netns (a regular file): code 3 (spec 1.1 "Error") */
		return cni_failf(ctx,
				 ret == -ENOENT || ret == -ENOTDIR || ret == -EINVAL
					 ? CNI_ERR_UNKNOWN_CONTAINER
					 : CNI_ERR_VF,
				 "cannot open the Pod netns", "%s", err);
	ret = cni_host->ns_open(&a->host, NULL, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_VF, "cannot open the host netns", "%s", err);
	if (!a->vfio) {
		struct cni_link l;

		ret = cni_host->link_get(&a->pod, ctx->env.ifname, 0, &l, err, sizeof(err));
		if (!ret)
			return cni_failf(ctx, CNI_ERR_VF, "interface exists in the Pod",
					 "netns %s already has an interface %s", ctx->env.netns,
					 ctx->env.ifname);
	}
	return 0;
}

/*
 * Compatibility mode without a GUID to set: the VF must already have a usable
 * one (issue 15: a GUID-0 VF's port stays INIT forever). The VF driver's
 * read-back decides (also for vfio-pci VFs, which have no netdev); the IPoIB
 * address of the netdev only when the driver cannot read the GUID back.
 */
static int check_present_guid(struct add *a)
{
	char err[IBVF_ERR_LEN], name[CNI_IFNAME_LEN];
	unsigned long long guid;
	uint64_t rb = 0;
	bool known = false;
	struct cni_link l;
	int ret;

	ret = cni_host->vf_guid(&a->vf, &rb, &known, err, sizeof(err));
	if (ret)
		log_warn("VF %s: reading its GUID back: %s", a->vf.pci, err);
	if (known) {
		if (!ibvf_guid_is_assignable(rb))
			return cni_failf(
				a->ctx, CNI_ERR_VF, "VF has no valid GUID",
				"%s: the VF driver reads back GUID %016llx and no GUID "
				"was given (runtimeConfig.infinibandGUID / args.cni.guid); "
				"set one, or run ibvfd to assign one",
				a->what, (unsigned long long)rb);
		a->c.guid = rb;
		return 0;
	}
	if (a->vfio) {
		log_warn("VF %s: bound to vfio-pci and its driver cannot read the GUID back; "
			 "GUID check skipped",
			 a->vf.pci);
		return 0;
	}
	ret = cni_host->vf_netdev(a->vf.pci, name, err, sizeof(err));
	if (!ret)
		ret = cni_host->link_get(&a->host, name, 0, &l, err, sizeof(err));
	if (ret)
		return cni_failf(a->ctx, CNI_ERR_VF, "VF netdev not found", "%s: %s", a->what, err);
	if (cni_link_guid(&l, &guid)) {
		/* nothing can tell (no read-back, no IPoIB address): not provably dead */
		log_warn("VF %s: its driver cannot read the GUID back and netdev %s is not IPoIB "
			 "(%u-byte hardware address); GUID check skipped",
			 a->vf.pci, name, l.addr_len);
		return 0;
	}
	if (!ibvf_guid_is_assignable(guid))
		return cni_failf(a->ctx, CNI_ERR_VF, "VF has no valid GUID",
				 "%s: netdev %s has GUID %016llx and no GUID was given "
				 "(runtimeConfig.infinibandGUID / args.cni.guid)",
				 a->what, name, guid);
	a->c.guid = guid;
	return 0;
}

/* The GUID in the VF netdev's IPoIB address now (what ib-sriov-cni saves), or 0. */
static uint64_t present_guid(struct add *a)
{
	unsigned long long guid = 0;
	struct cni_link l;

	if (a->vf.netdev[0] && !cni_host->link_get(&a->host, a->vf.netdev, 0, &l, NULL, 0) &&
	    !cni_link_guid(&l, &guid))
		return guid;
	return 0;
}

static int step_prepare(struct add *a)
{
	struct cni_ctx *ctx = a->ctx;
	struct cni_netconf *nc = &ctx->nc;
	struct cni_daemon_error de;
	char err[IBVF_ERR_LEN];
	int ret;

	if (a->mode == CNI_MODE_DAEMON) {
		ret = cni_ibvfd->prepare(a->socket, nc, a->owner, nc->device_id, &a->prep, &de, err,
					 sizeof(err));
		if (ret && ret != -EREMOTEIO && ret != -ENOENT && ret != -ECONNREFUSED) {
			/*
			 * No answer (timeout, reset): ibvfd may still finish the prepare.
			 * Release is idempotent, so ask for it rather than leak the GUID.
			 */
			struct cni_daemon_error de2;
			char e2[IBVF_ERR_LEN];

			if (cni_ibvfd->release(a->socket, nc->ibvfd_timeout_ms, a->owner, NULL,
					       &de2, e2, sizeof(e2)))
				log_warn("VF %s: release after a prepare without answer: %s",
					 nc->device_id, e2);
		}
		if (ret == -EREMOTEIO && de.rpc.code == IBVF_RPC_INVALID_PARAMS &&
		    (strstr(err, "PKey") || strstr(err, "pkey")))
			/* name what the user wrote, not the API's "pkeys" (issue 15 item 1) */
			return cni_failf(ctx, CNI_ERR_INVALID_CONFIG, "invalid pkey",
					 "%s: the network configuration's \"pkey\"/\"pkeys\" "
					 "was refused by ibvfd: %s",
					 a->what, err);
		if (ret)
			return cni_failf(ctx, de.cni_code, "ibvfd could not prepare the VF",
					 "%s: %s%s%s%s", a->what, err,
					 de.rpc.step[0] ? " (step " : "", de.rpc.step,
					 de.rpc.step[0] ? ")" : "");
		a->prepared = true;
		a->c.guid = a->prep.guid;
		if (a->prep.vf_index >= 0)
			a->vf.vf_index = a->prep.vf_index;
		if (a->prep.pf[0])
			snprintf(a->vf.pf_netdev, sizeof(a->vf.pf_netdev), "%s", a->prep.pf);
		describe(a);
		log_info("VF %s: prepared by ibvfd: %s, port %s", nc->device_id, a->what,
			 a->prep.port_state[0] ? a->prep.port_state : "?");
		if (!nc->n_pkeys)
			log_info(
				"VF %s: the network has no \"pkey\": no tenant partition membership "
				"was pushed; the port is in the partitions the SM gives every port",
				nc->device_id);
		return 0;
	}
	ret = cni_host->vf_compat_apply(&a->vf, nc->link_state, nc->guid_source != NULL, nc->guid,
					present_guid(a), a->c.prev_guid, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_VF, "failed to configure the VF", "%s: %s", a->what,
				 err);
	a->applied = true;
	if (nc->guid_source) {
		a->c.guid = nc->guid;
		return 0;
	}
	return check_present_guid(a);
}

/* The VF's RDMA device: what ibvfd reported after its rebind, else sysfs. */
static void find_rdma_dev(struct add *a)
{
	if (a->prep.rdma_dev[0])
		snprintf(a->rdma_dev, sizeof(a->rdma_dev), "%s", a->prep.rdma_dev);
	else if (cni_host->vf_rdma_dev(a->vf.pci, a->rdma_dev, sizeof(a->rdma_dev), NULL, 0))
		a->rdma_dev[0] = 0;
}

static int step_rdma(struct add *a)
{
	char err[IBVF_ERR_LEN];
	int ret;

	if (!a->rdma_dev[0])
		return cni_failf(a->ctx, CNI_ERR_VF, "VF has no RDMA device",
				 "%s: rdmaIsolation is set but no RDMA device belongs to it",
				 a->what);
	ret = cni_host->rdma_dev_move(&a->host, a->rdma_dev, &a->pod, err, sizeof(err));
	if (ret)
		return cni_failf(a->ctx, CNI_ERR_VF, "failed to move the RDMA device", "%s: %s",
				 a->what, err);
	a->rdma_moved = true;
	snprintf(a->c.rdma_dev, sizeof(a->c.rdma_dev), "%s", a->rdma_dev);
	return 0;
}

/*
 * The VF's netdev by PCI address. After an RDMA device move the kernel
 * re-creates the IPoIB netdev (and udev may rename it): wait for it, bounded.
 */
static int wait_netdev(struct add *a, char *err, size_t errlen)
{
	int ret;

	for (int i = 0;; i++) {
		ret = cni_host->vf_netdev(a->vf.pci, a->c.host_ifname, err, errlen);
		if (ret != -ENODEV || !a->rdma_moved || i >= CNI_NETDEV_WAIT_MS / 20)
			return ret;
		usleep(20 * 1000);
	}
}

static int step_netdev(struct add *a)
{
	struct cni_ctx *ctx = a->ctx;
	char err[IBVF_ERR_LEN], alias[64];
	int ret;

	/*
	 * By PCI address, now: a rebind (ibvfd) or an RDMA device move re-creates
	 * the netdev and udev may have renamed it.
	 */
	ret = wait_netdev(a, err, sizeof(err));
	cni_steps_mark(&ctx->steps, "netdev_lookup");
	if (ret)
		return cni_failf(ctx, CNI_ERR_VF, "VF netdev not found", "%s: %s", a->what, err);
	snprintf(alias, sizeof(alias), CNI_ALIAS_PREFIX "%s %s", a->vf.pci, a->c.host_ifname);
	ret = cni_host->netdev_to_pod(&a->host, &a->pod, a->c.host_ifname, ctx->env.ifname, alias,
				      &a->moved, err, sizeof(err));
	cni_steps_mark(&ctx->steps, "netdev_move");
	if (ret)
		return cni_failf(ctx, CNI_ERR_VF, "failed to move the VF netdev into the Pod",
				 "%s: netdev %s: %s", a->what, a->c.host_ifname, err);
	a->netdev_moved = true;
	snprintf(a->c.temp_ifname, sizeof(a->c.temp_ifname), "%s", a->moved.temp_name);
	cni_link_hwaddr(&a->moved.link, a->c.mac, sizeof(a->c.mac));
	return 0;
}

static int step_ipam(struct add *a)
{
	struct cni_ctx *ctx = a->ctx;
	struct cni_ipam_call call = {
		.type = ctx->nc.ipam_type,
		.cni_path = ctx->env.path,
		.command = "ADD",
		.conf = ctx->conf_text,
		.conf_len = ctx->conf_len,
	};
	char err[IBVF_ERR_LEN];
	json_t *raw = NULL;
	int ret;

	ret = cni_host->ipam_exec(&call, &raw, err, sizeof(err));
	if (ret)
		return cni_failf(ctx,
				 call.remote_code == CNI_ERR_TRY_AGAIN ? CNI_ERR_TRY_AGAIN
								       : CNI_ERR_IPAM,
				 "IPAM failed", "%s: %s", a->what, err);
	a->ipam_added = true;
	ret = cni_result_normalize(raw, ctx->nc.cni_version, &a->ipam_res, err, sizeof(err));
	json_decref(raw);
	if (ret)
		return cni_failf(ctx, CNI_ERR_IPAM, "IPAM returned a bad result",
				 "%s: IPAM plugin "
				 "%s: %s",
				 a->what, ctx->nc.ipam_type, err);
	if (!json_array_size(json_object_get(a->ipam_res, "ips")))
		return cni_failf(ctx, CNI_ERR_IPAM, "IPAM returned no IP",
				 "%s: IPAM plugin %s "
				 "returned no IP address",
				 a->what, ctx->nc.ipam_type);
	ret = cni_host->ipam_apply(&a->pod, a->moved.pod_ifindex, a->ipam_res, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_IPAM, "failed to configure IP addresses", "%s: %s",
				 a->what, err);
	return 0;
}

/* The P_Key the check uses: the first configured, with its membership bit. */
static void rc_pkey(const struct cni_netconf *nc, struct ibvf_rc_opts *o)
{
	if (!nc->n_pkeys)
		return; /* P_Key index 0, as rc_pingpong does (the default partition) */
	o->use_pkey = true;
	o->pkey = nc->pkeys[0].key |
		  (nc->pkeys[0].membership == IBVF_MEMBER_FULL ? IBVF_PKEY_FULL_BIT : 0);
}

static int step_rc_check(struct add *a)
{
	const struct cni_netconf *nc = &a->ctx->nc;
	struct cni_ns *ns = nc->rdma_isolation ? &a->pod : &a->host;
	struct ibvf_rc_result res;
	struct ibvf_rc_opts o;
	char err[IBVF_ERR_LEN];
	int vis = 0, ret;

	if (nc->rc_check == 0)
		return 0;
	/* "present" means the RDMA core knows the device in its netns, not just sysfs */
	if (a->rdma_dev[0]) {
		vis = cni_host->rdma_dev_visible(ns, a->rdma_dev, err, sizeof(err));
		if (vis < 0)
			log_info("VF %s: RDMA device %s: %s", a->vf.pci, a->rdma_dev, err);
	}
	if (vis <= 0) {
		if (nc->rc_check == 1)
			return cni_failf(
				a->ctx, CNI_ERR_RC_CHECK, "RC check impossible",
				"%s: rcCheck.enabled is true but the VF has no RDMA device "
				"the RDMA core knows%s%s",
				a->what, a->rdma_dev[0] ? " (sysfs names " : "",
				a->rdma_dev[0] ? a->rdma_dev : "");
		log_info("VF %s: no RDMA device, RC check not applicable", a->vf.pci);
		return 0;
	}
	ibvf_rc_opts_init(&o);
	o.dev = a->rdma_dev;
	o.port = 1;
	o.iterations = nc->rc_iterations;
	o.p99_max_us = nc->rc_p99_max_us;
	o.netns = nc->rdma_isolation ? a->ctx->env.netns : NULL;
	o.roce_default_pkey = nc->rc_roce_default;
	rc_pkey(nc, &o);
	ret = cni_host->rc_check(&o, &res, err, sizeof(err));
	if (ret == -EOPNOTSUPP) {
		/* limited-only membership: two limited members cannot talk (IBTA 10.9.3) */
		log_warn("VF %s: RC check not possible with limited-only membership (%s); "
			 "handing the VF over unchecked: %s",
			 a->vf.pci, a->what, err);
		return 0;
	}
	if (ret)
		return cni_failf(a->ctx, CNI_ERR_RC_CHECK, "RC check failed: VF not handed over",
				 "%s: RDMA device %s port 1: %s (%s%s%s)", a->what, a->rdma_dev,
				 err, ibvf_rc_status_name(res.status), res.verb[0] ? ", at " : "",
				 res.verb);
	if (res.pkey_roce_default)
		/* say exactly what was checked: not the tenant's P_Key (ibvf_rc_pkey_pick_port) */
		snprintf(err, sizeof(err),
			 "; RoCE port: no SM-managed P_Keys, PKey 0x%04x is not in its table, so "
			 "the default P_Key 0x%04x at index %d was checked",
			 o.pkey, res.pkey, res.pkey_index);
	else
		err[0] = 0;
	log_info("VF %s: RC check passed on %s port 1 (P_Key index %d = 0x%04x, peer index %d = "
		 "0x%04x%s): %u round trips, p50 %.1f us, p99 %.1f us, max %.1f us",
		 a->vf.pci, a->rdma_dev, res.pkey_index, res.pkey, res.peer_pkey_index,
		 res.peer_pkey, err, res.iterations, res.p50_us, res.p99_us, res.max_us);
	return 0;
}

static int step_cache(struct add *a)
{
	struct cni_ctx *ctx = a->ctx;
	char err[IBVF_ERR_LEN];
	int ret;

	ret = cni_cache_write(ctx->cache_dir, &a->c, ctx->nc.root, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_STATE, "failed to write the plugin cache", "%s: %s",
				 a->what, err);
	a->cache_written = true;
	return 0;
}

static int step_commit(struct add *a)
{
	struct cni_daemon_error de;
	char err[IBVF_ERR_LEN];
	int ret;

	ret = cni_ibvfd->commit(a->socket, a->ctx->nc.ibvfd_timeout_ms, a->owner, &de, err,
				sizeof(err));
	if (ret)
		return cni_failf(a->ctx, de.cni_code, "ibvfd did not accept the hand-over",
				 "%s: %s", a->what, err);
	return 0;
}

/*
 * The commit in two halves around the cache write (issue 17): ibvfd records
 * the hand-over while the plugin writes its cache. The orders that matter
 * hold: the commit leaves only after the netdev is in the Pod and the RC
 * check passed (a handed record's VF is in its Pod: reconcile.c,
 * release_in_host()), and ADD answers only after both the cache is written
 * and ibvfd accepted the commit. Which of the two lands first is no rule: a
 * failure of either rolls everything back (cache removed, ibvfd release,
 * which walks back a handed record as a prepared one), and a plugin killed
 * between them leaves what a kill around the cache write always could, an
 * ADD the runtime reports failed and DELs (with or without a cache entry).
 * Return: 0 when the commit is out (step_commit_recv() must follow).
 */
static int step_commit_send(struct add *a)
{
	struct cni_daemon_error de;
	char err[IBVF_ERR_LEN];
	int ret;

	ret = cni_ibvfd->commit_send(a->socket, a->ctx->nc.ibvfd_timeout_ms, a->owner, &de, err,
				     sizeof(err));
	if (ret)
		return cni_failf(a->ctx, de.cni_code, "ibvfd did not accept the hand-over",
				 "%s: %s", a->what, err);
	return 0;
}

/* The commit's answer; @report false: ADD failed already, only read it (the connection). */
static int step_commit_recv(struct add *a, bool report)
{
	struct cni_daemon_error de;
	char err[IBVF_ERR_LEN];
	int ret = cni_ibvfd->commit_recv(&de, err, sizeof(err));

	if (ret && report)
		return cni_failf(a->ctx, de.cni_code, "ibvfd did not accept the hand-over",
				 "%s: %s", a->what, err);
	return report ? 0 : ret;
}

/* Append " rollback: ..." to the failure's details. */
__attribute__((format(printf, 2, 3))) static void rollback_note(struct add *a, const char *fmt, ...)
{
	char *d = a->ctx->fail.details;
	size_t n = strlen(d), len = sizeof(a->ctx->fail.details);
	va_list ap;

	if (n + 16 >= len)
		return;
	n += (size_t)snprintf(d + n, len - n, "; rollback: ");
	va_start(ap, fmt);
	vsnprintf(d + n, len - n, fmt, ap);
	va_end(ap);
	log_err("VF %s: rollback: %s", a->vf.pci, d + n);
}

static void rollback(struct add *a)
{
	struct cni_ctx *ctx = a->ctx;
	struct cni_daemon_error de;
	char err[IBVF_ERR_LEN];

	if (a->cache_written && cni_cache_remove(ctx->cache_dir, ctx->env.container_id,
						 ctx->env.ifname, err, sizeof(err)))
		rollback_note(a, "%s", err);
	if (a->ipam_added) {
		struct cni_ipam_call call = {
			.type = ctx->nc.ipam_type,
			.cni_path = ctx->env.path,
			.command = "DEL",
			.conf = ctx->conf_text,
			.conf_len = ctx->conf_len,
		};

		if (cni_host->ipam_exec(&call, NULL, err, sizeof(err)))
			rollback_note(a, "%s", err);
	}
	if (a->netdev_moved && cni_host->netdev_to_host(&a->pod, &a->host, ctx->env.ifname,
							a->c.host_ifname, NULL, err, sizeof(err)))
		rollback_note(a, "netdev back to the host: %s", err);
	if (a->rdma_moved &&
	    cni_host->rdma_dev_move(&a->pod, a->rdma_dev, &a->host, err, sizeof(err)))
		rollback_note(a, "%s", err);
	if (a->prepared && cni_ibvfd->release(a->socket, ctx->nc.ibvfd_timeout_ms, a->owner, NULL,
					      &de, err, sizeof(err)))
		rollback_note(a, "ibvfd release: %s", err);
	if (a->applied) {
		a->c.link_state = ctx->nc.link_state;
		snprintf(a->c.device_id, sizeof(a->c.device_id), "%s", a->vf.pci);
		if (cni_host->vf_restore(&a->c, err, sizeof(err)))
			rollback_note(a, "%s", err);
	}
}

/* The ADD result: our interface, IPAM's addresses; chained onto prevResult when given. */
static int build_result(struct add *a)
{
	struct cni_ctx *ctx = a->ctx;
	char err[IBVF_ERR_LEN];
	json_t *res = NULL;
	int idx, ret;

	if (ctx->nc.prev_result) {
		ret = cni_result_normalize(ctx->nc.prev_result, ctx->nc.cni_version, &res, err,
					   sizeof(err));
		if (ret)
			return cni_failf(ctx, CNI_ERR_INVALID_CONFIG, "bad prevResult", "%s", err);
	} else {
		res = cni_result_new();
	}
	if (!res)
		return cni_failf(ctx, CNI_ERR_IO, "out of memory", "building the result");
	idx = cni_result_add_interface(res, ctx->env.ifname, a->vfio ? NULL : a->c.mac,
				       a->vfio ? 0 : a->moved.link.mtu, ctx->env.netns, a->vf.pci);
	if (idx < 0 || (a->ipam_res && cni_result_merge_ipam(res, a->ipam_res, idx))) {
		json_decref(res);
		return cni_failf(ctx, CNI_ERR_IO, "out of memory", "building the result");
	}
	if (!json_object_get(res, "dns") && ctx->nc.dns && json_object_size(ctx->nc.dns))
		json_object_set(res, "dns", ctx->nc.dns);
	ctx->result = res;
	return 0;
}

static void fill_cache(struct add *a)
{
	struct cni_ctx *ctx = a->ctx;
	struct cni_cache *c = &a->c;

	c->format = CNI_CACHE_VERSION;
	c->mode = a->mode;
	snprintf(c->container_id, sizeof(c->container_id), "%s", ctx->env.container_id);
	snprintf(c->ifname, sizeof(c->ifname), "%s", ctx->env.ifname);
	snprintf(c->netns, sizeof(c->netns), "%s", ctx->env.netns);
	snprintf(c->network, sizeof(c->network), "%s", ctx->nc.name);
	snprintf(c->device_id, sizeof(c->device_id), "%s", a->vf.pci);
	snprintf(c->pf, sizeof(c->pf), "%s", a->vf.pf_netdev);
	c->vf_index = a->vf.vf_index;
	c->rdma_isolation = ctx->nc.rdma_isolation;
	c->vfio = a->vfio;
	c->link_state = ctx->nc.link_state;
	c->ib_kubernetes_enabled = ctx->nc.ib_kubernetes_enabled;
	c->ipam = ctx->nc.ipam_type && !a->vfio;
}

int cni_cmd_add(struct cni_ctx *ctx)
{
	struct add a = {.ctx = ctx, .host = {.fd = -1}, .pod = {.fd = -1}, .locks = {-1, -1}};
	char err[IBVF_ERR_LEN];
	int ret;

	cni_steps_start(&ctx->steps);
	cni_cache_init(&a.c);
	ret = validate(&a);
	cni_steps_mark(&ctx->steps, "validate");
	if (ret)
		goto out;
	a.owner = cni_owner_new(ctx->env.container_id, ctx->env.ifname, ctx->env.pod_namespace,
				ctx->env.pod_name, ctx->env.pod_uid, ctx->nc.name);
	if (!a.owner) {
		ret = cni_failf(ctx, CNI_ERR_IO, "out of memory", "owner");
		goto out;
	}
	ret = cni_lock(a.vf.pci, a.mode == CNI_MODE_COMPAT, a.locks, err, sizeof(err));
	cni_steps_mark(&ctx->steps, "lock");
	if (ret) {
		ret = cni_failf(ctx, CNI_ERR_IO, "cannot take the plugin lock", "%s", err);
		goto out;
	}
	fill_cache(&a);
	ret = step_prepare(&a);
	cni_steps_mark(&ctx->steps, a.mode == CNI_MODE_DAEMON ? "prepare" : "apply");
	if (ret)
		goto out; /* prepare and apply undo their own partial work */
	fill_cache(&a);
	if (!a.vfio)
		find_rdma_dev(&a);
	if (ctx->nc.rdma_isolation && !a.vfio) {
		ret = step_rdma(&a);
		cni_steps_mark(&ctx->steps, "rdma_move");
	}
	if (!ret && !a.vfio)
		ret = step_netdev(&a);
	if (!ret && ctx->nc.ipam_type && !a.vfio) {
		ret = step_ipam(&a);
		cni_steps_mark(&ctx->steps, "ipam");
	}
	if (!ret && !a.vfio) {
		ret = step_rc_check(&a);
		cni_steps_mark(&ctx->steps, "rc_check");
	}
	if (!ret && a.mode == CNI_MODE_DAEMON && cni_ibvfd->commit_send && cni_ibvfd->commit_recv) {
		/* commit out, cache written meanwhile, then the commit's answer */
		ret = step_commit_send(&a);
		cni_steps_mark(&ctx->steps, "commit");
		if (!ret) {
			ret = step_cache(&a);
			cni_steps_mark(&ctx->steps, "cache");
			if (ret)
				step_commit_recv(&a, false);
			else
				ret = step_commit_recv(&a, true);
			cni_steps_mark(&ctx->steps, "commit");
		}
	} else {
		if (!ret) {
			ret = step_cache(&a);
			cni_steps_mark(&ctx->steps, "cache");
		}
		if (!ret && a.mode == CNI_MODE_DAEMON) {
			ret = step_commit(&a);
			cni_steps_mark(&ctx->steps, "commit");
		}
	}
	if (!ret)
		ret = build_result(&a);
	if (ret) {
		rollback(&a);
		cni_steps_mark(&ctx->steps, "rollback");
	} else
		log_info("VF %s: attached as %s in %s (%s)", a.vf.pci, ctx->env.ifname,
			 ctx->env.netns, a.what);
out:
	cni_daemon_disconnect(); /* prepare, commit, a rollback's release: one connection */
	cni_unlock(a.locks);
	json_decref(a.ipam_res);
	json_decref(a.owner);
	cni_host->ns_close(&a.pod);
	cni_host->ns_close(&a.host);
	cni_cache_free(&a.c);
	cni_steps_mark(&ctx->steps, "close");
	cni_steps_log(&ctx->steps, "ADD");
	return ret;
}
