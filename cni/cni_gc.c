// SPDX-License-Identifier: MIT
/*
 * ib-sriov CNI plugin: GC and STATUS (CNI spec 1.1.0 section 2).
 *
 * GC: every cache entry of this network whose (containerID, ifname) is not
 * in "cni.dev/valid-attachments" is torn down like a DEL (IPAM DEL with the
 * cached configuration, devices back when their netns still exists, ibvfd
 * release / VF restore); then ibvfd's own "gc" releases owners the cache
 * does not know; then GC is forwarded to the IPAM plugin when it speaks 1.1.0.
 * Errors do not stop the sweep; the first is reported.
 *
 * STATUS: ibvfd reachable, ready and its SM backend validated (daemon mode),
 * and the IPAM plugin's own STATUS when it speaks 1.1.0; otherwise code 50.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cni_cmd.h"
#include "cni_daemon.h"
#include "cni_ipam.h"
#include "cni_ops.h"
#include "cni_result.h"
#include "log.h"

struct gc {
	struct cni_ctx *ctx;
	size_t swept, failed;
	struct cni_fail first;
};

static bool is_valid(json_t *valid, const char *cid, const char *ifname)
{
	json_t *e;
	size_t i;

	json_array_foreach(valid, i, e)
	{
		const char *c = json_string_value(json_object_get(e, "containerID"));
		const char *n = json_string_value(json_object_get(e, "ifname"));

		if (c && n && !strcmp(c, cid) && !strcmp(n, ifname))
			return true;
	}
	return false;
}

static void note(struct gc *g)
{
	g->failed++;
	if (!g->first.code)
		g->first = g->ctx->fail;
	memset(&g->ctx->fail, 0, sizeof(g->ctx->fail));
}

static int sweep_one(struct cni_cache *c, void *arg)
{
	struct gc *g = arg;
	struct cni_ctx *ctx = g->ctx;
	char err[IBVF_ERR_LEN];
	int locks[2];

	if (strcmp(c->network, ctx->nc.name) || !c->container_id[0] || !c->ifname[0] ||
	    is_valid(ctx->nc.valid_attachments, c->container_id, c->ifname))
		return 0;
	log_info("GC: releasing stale attachment %s/%s (VF %s)", c->container_id, c->ifname,
		 c->device_id);
	if (cni_lock(c->device_id[0] ? c->device_id : NULL, c->mode == CNI_MODE_COMPAT, locks, err,
		     sizeof(err))) {
		cni_failf(ctx, CNI_ERR_IO, "cannot take the plugin lock", "%s", err);
		note(g);
		return 0;
	}
	if (cni_teardown(ctx, c, c->netns, NULL, 0, true)) {
		note(g);
	} else if (cni_cache_remove(ctx->cache_dir, c->container_id, c->ifname, err, sizeof(err))) {
		cni_failf(ctx, CNI_ERR_STATE, "failed to remove the plugin cache", "%s", err);
		note(g);
	} else {
		g->swept++;
	}
	cni_unlock(locks);
	return 0;
}

static void gc_ipam(struct gc *g)
{
	struct cni_ctx *ctx = g->ctx;
	struct cni_ipam_call call = {
		.type = ctx->nc.ipam_type,
		.cni_path = ctx->env.path,
		.command = "GC",
		.conf = ctx->conf_text,
		.conf_len = ctx->conf_len,
	};
	char err[IBVF_ERR_LEN];
	unsigned v = 0;

	if (cni_host->ipam_max_version(ctx->nc.ipam_type, ctx->env.path, &v, err, sizeof(err))) {
		cni_failf(ctx, CNI_ERR_IPAM, "IPAM plugin unusable", "%s", err);
		note(g);
		return;
	}
	if (v < 10100) {
		log_debug("GC: IPAM plugin %s does not speak 1.1.0 (no GC); released per "
			  "attachment instead",
			  ctx->nc.ipam_type);
		return;
	}
	if (cni_host->ipam_exec(&call, NULL, err, sizeof(err))) {
		cni_failf(ctx, CNI_ERR_IPAM, "IPAM GC failed", "%s", err);
		note(g);
	}
}

int cni_cmd_gc(struct cni_ctx *ctx)
{
	struct gc g = {.ctx = ctx};
	struct cni_daemon_error de;
	char err[IBVF_ERR_LEN];
	const char *socket;
	size_t released = 0;

	if (ctx->nc.version < 10100)
		return cni_failf(ctx, CNI_ERR_INCOMPATIBLE_VERSION,
				 "config version does not allow "
				 "GC",
				 "cniVersion %s predates GC (1.1.0)", ctx->nc.cni_version);
	if (!ctx->nc.valid_attachments)
		/* absent is not "none valid": refuse rather than release every attachment */
		return cni_failf(ctx, CNI_ERR_INVALID_CONFIG, "cni.dev/valid-attachments missing",
				 "GC of network %s needs the list of valid attachments (spec "
				 "section 2, GC); nothing was released",
				 ctx->nc.name);
	if (cni_cache_foreach(ctx->cache_dir, sweep_one, &g, err, sizeof(err))) {
		cni_failf(ctx, CNI_ERR_STATE, "cannot read the plugin cache", "%s", err);
		note(&g);
	}
	if (cni_mode_select(&ctx->nc, &socket) == CNI_MODE_DAEMON) {
		if (cni_ibvfd->gc(socket, ctx->nc.ibvfd_timeout_ms, ctx->nc.name,
				  ctx->nc.valid_attachments, &released, &de, err, sizeof(err))) {
			cni_failf(ctx, de.cni_code, "ibvfd GC failed", "%s", err);
			note(&g);
		}
	}
	if (ctx->nc.ipam_type)
		gc_ipam(&g);
	log_info("GC of network %s: %zu stale attachments released from the cache, %zu by "
		 "ibvfd, %zu failures",
		 ctx->nc.name, g.swept, released, g.failed);
	if (g.first.code) {
		ctx->fail = g.first;
		return -1;
	}
	return 0;
}

int cni_cmd_status(struct cni_ctx *ctx)
{
	struct cni_daemon_error de;
	char err[IBVF_ERR_LEN];
	const char *socket;
	unsigned v = 0;

	if (ctx->nc.version < 10100)
		return cni_failf(ctx, CNI_ERR_INCOMPATIBLE_VERSION,
				 "config version does not allow "
				 "STATUS",
				 "cniVersion %s predates STATUS (1.1.0)", ctx->nc.cni_version);
	if (cni_mode_select(&ctx->nc, &socket) == CNI_MODE_DAEMON &&
	    cni_ibvfd->status(socket, ctx->nc.ibvfd_timeout_ms, &de, err, sizeof(err)))
		return cni_failf(ctx, CNI_ERR_NOT_AVAILABLE, "ibvfd not available", "%s", err);
	if (!ctx->nc.ipam_type)
		return 0;
	if (cni_host->ipam_max_version(ctx->nc.ipam_type, ctx->env.path, &v, err, sizeof(err)))
		return cni_failf(ctx, CNI_ERR_NOT_AVAILABLE, "IPAM plugin not available", "%s",
				 err);
	if (v >= 10100) {
		struct cni_ipam_call call = {
			.type = ctx->nc.ipam_type,
			.cni_path = ctx->env.path,
			.command = "STATUS",
			.conf = ctx->conf_text,
			.conf_len = ctx->conf_len,
		};

		if (cni_host->ipam_exec(&call, NULL, err, sizeof(err)))
			return cni_failf(ctx,
					 call.remote_code >= 50 && call.remote_code <= 51
						 ? call.remote_code
						 : CNI_ERR_NOT_AVAILABLE,
					 "IPAM plugin not available", "%s", err);
	}
	return 0;
}
