// SPDX-License-Identifier: MIT
/*
 * ib-sriov CNI plugin: DEL (CNI spec 1.1.0 section 2: best effort, repeatable,
 * success when the interface or state is already gone).
 *
 * The cache (ours or ib-sriov-cni's) says what ADD did. Without it, DEL
 * still releases the IP (stdin configuration), moves back a netdev in the Pod
 * that carries this plugin's ifalias mark for the configured VF, and asks
 * ibvfd to release the owner when a daemon socket is present.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cni_cmd.h"
#include "cni_daemon.h"
#include "cni_ops.h"
#include "cni_result.h"
#include "cni_vf.h"
#include "log.h"

/* A record for an attachment the cache does not know. */
static void synthesize(struct cni_ctx *ctx, struct cni_cache *c)
{
	const struct cni_netconf *nc = &ctx->nc;
	const char *socket;
	struct stat st;

	cni_cache_init(c);
	c->format = -1;
	c->mode = cni_mode_select(nc, &socket);
	if (c->mode == CNI_MODE_DAEMON && (stat(socket, &st) || !S_ISSOCK(st.st_mode))) {
		/* nothing says ibvfd ever held this attachment, and it is not running */
		log_info("no cache and no ibvfd socket at %s: nothing to release there", socket);
		c->mode = CNI_MODE_COMPAT;
	}
	snprintf(c->container_id, sizeof(c->container_id), "%s", ctx->env.container_id);
	snprintf(c->ifname, sizeof(c->ifname), "%s", ctx->env.ifname);
	snprintf(c->network, sizeof(c->network), "%s", nc->name);
	snprintf(c->device_id, sizeof(c->device_id), "%s", nc->device_id ? nc->device_id : "");
	c->rdma_isolation = nc->rdma_isolation;
	if (c->rdma_isolation && nc->device_id &&
	    cni_host->vf_rdma_dev(nc->device_id, c->rdma_dev, sizeof(c->rdma_dev), NULL, 0))
		c->rdma_dev[0] = 0;
	c->vfio = nc->vfio_pci_mode;
	c->conf = json_incref(nc->root);
}

int cni_cmd_del(struct cni_ctx *ctx)
{
	const char *netns = ctx->env.netns;
	char err[IBVF_ERR_LEN];
	struct cni_cache c;
	int locks[2] = {-1, -1}, ret;
	bool cached;

	cni_steps_start(&ctx->steps);
	ret = cni_cache_read(ctx->cache_dir, ctx->env.container_id, ctx->env.ifname, &c, err,
			     sizeof(err));
	cached = !ret;
	if (ret == -ENOENT) {
		log_info("DEL %s/%s: no cache entry", ctx->env.container_id, ctx->env.ifname);
	} else if (ret) {
		log_warn("DEL %s/%s: %s; cleaning up from the configuration instead",
			 ctx->env.container_id, ctx->env.ifname, err);
	}
	if (!cached) {
		cni_cache_free(&c);
		synthesize(ctx, &c);
	}
	if (!netns && c.netns[0])
		netns = c.netns;
	cni_steps_mark(&ctx->steps, "cache_read");
	ret = cni_lock(c.device_id[0] ? c.device_id : NULL, c.mode == CNI_MODE_COMPAT, locks, err,
		       sizeof(err));
	cni_steps_mark(&ctx->steps, "lock");
	if (ret) {
		ret = cni_failf(ctx, CNI_ERR_IO, "cannot take the plugin lock", "%s", err);
		goto out;
	}
	ret = cni_teardown(ctx, &c, netns, ctx->conf_text, ctx->conf_len, false);
	if (!ret && cni_cache_remove(ctx->cache_dir, ctx->env.container_id, ctx->env.ifname, err,
				     sizeof(err)))
		ret = cni_failf(ctx, CNI_ERR_STATE, "failed to remove the plugin cache", "%s", err);
	cni_steps_mark(&ctx->steps, "cache_remove");
out:
	cni_unlock(locks);
	cni_cache_free(&c);
	cni_steps_mark(&ctx->steps, "close");
	cni_steps_log(&ctx->steps, "DEL");
	return ret;
}
