// SPDX-License-Identifier: MIT
/*
 * ib-sriov CNI plugin: CHECK (CNI spec 1.1.0 section 2): the interface is in
 * the Pod netns under CNI_IFNAME and up, its hardware address (so its GUID)
 * is the one ADD handed over, the addresses of prevResult are on it, the IPAM
 * plugin's CHECK passes, ibvfd still holds the owner with that GUID, and the
 * VF's port is ACTIVE with the PKey(s).
 */
#include <errno.h>
#include <linux/if.h>
#include <stdio.h>
#include <string.h>

#include "cni_cmd.h"
#include "cni_daemon.h"
#include "cni_ipam.h"
#include "cni_netns.h"
#include "cni_ops.h"
#include "cni_result.h"
#include "cni_vf.h"
#include "log.h"

/* Index of our interface in the normalized prevResult, or -1. */
static int find_iface(json_t *pr, const char *ifname, const char *netns)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(pr, "interfaces"), i, e)
	{
		const char *n = json_string_value(json_object_get(e, "name"));
		const char *s = json_string_value(json_object_get(e, "sandbox"));

		if (n && !strcmp(n, ifname) && (!s || !netns || !strcmp(s, netns)))
			return (int)i;
	}
	return -1;
}

static int check_link(struct cni_ctx *ctx, struct cni_cache *c, json_t *pr, struct cni_ns *pod)
{
	char err[IBVF_ERR_LEN], mac[96], g[IBVF_GUID_STR_LEN];
	unsigned long long guid;
	struct cni_link l;
	const char *want;
	int idx, ret;

	ret = cni_host->link_get(pod, ctx->env.ifname, 0, &l, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_CHECK, "interface missing", "%s", err);
	if (!(l.flags & IFF_UP))
		return cni_failf(ctx, CNI_ERR_CHECK, "interface down", "%s in netns %s is down",
				 l.name, ctx->env.netns);
	cni_link_hwaddr(&l, mac, sizeof(mac));
	if (!cni_link_guid(&l, &guid) && c->guid && guid != c->guid)
		return cni_failf(ctx, CNI_ERR_CHECK, "GUID changed",
				 "%s has port GUID %016llx, the attachment was given %s", l.name,
				 guid, ibvf_guid_format(c->guid, g));
	if (c->mac[0] && strcmp(c->mac, mac))
		return cni_failf(ctx, CNI_ERR_CHECK, "hardware address changed",
				 "%s has hardware address %s, ADD handed over %s", l.name, mac,
				 c->mac);
	idx = find_iface(pr, ctx->env.ifname, ctx->env.netns);
	if (idx < 0)
		return cni_failf(ctx, CNI_ERR_CHECK, "interface not in prevResult",
				 "prevResult lists no interface %s in %s", ctx->env.ifname,
				 ctx->env.netns);
	want = json_string_value(json_object_get(
		json_array_get(json_object_get(pr, "interfaces"), (size_t)idx), "mac"));
	if (want && strcasecmp(want, mac))
		return cni_failf(ctx, CNI_ERR_CHECK, "hardware address differs from prevResult",
				 "%s has %s, prevResult says %s", l.name, mac, want);
	ret = cni_host->ipam_check(pod, l.ifindex, pr, idx, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_CHECK, "address missing", "%s: %s", l.name, err);
	return 0;
}

static int check_daemon(struct cni_ctx *ctx, struct cni_cache *c)
{
	char err[IBVF_ERR_LEN], state[32] = "", g1[IBVF_GUID_STR_LEN], g2[IBVF_GUID_STR_LEN];
	struct cni_daemon_error de;
	const char *socket;
	uint64_t guid = 0;
	int ret;

	cni_mode_select(&ctx->nc, &socket);
	ret = cni_ibvfd->owner(socket, ctx->nc.ibvfd_timeout_ms, c->network, c->container_id,
			       c->ifname, &guid, state, &de, err, sizeof(err));
	if (ret == -ENOENT)
		return cni_failf(ctx, CNI_ERR_CHECK, "ibvfd does not hold the VF", "%s", err);
	if (ret)
		return cni_failf(ctx, de.cni_code, "cannot ask ibvfd", "%s", err);
	if (strcmp(state, "handed"))
		return cni_failf(ctx, CNI_ERR_CHECK, "VF not handed over",
				 "ibvfd has owner %s/%s in state \"%s\", not \"handed\"",
				 c->container_id, c->ifname, state);
	if (c->guid && guid != c->guid)
		return cni_failf(ctx, CNI_ERR_CHECK, "GUID differs from ibvfd's",
				 "ibvfd holds GUID %s for the owner, the cache says %s",
				 ibvf_guid_format(guid, g1), ibvf_guid_format(c->guid, g2));
	return 0;
}

static int check_port(struct cni_ctx *ctx, struct cni_cache *c, struct cni_ns *pod)
{
	char dev[64] = "", err[IBVF_ERR_LEN];
	int ret;

	if (c->rdma_dev[0])
		snprintf(dev, sizeof(dev), "%s", c->rdma_dev);
	else if (cni_host->vf_rdma_dev(c->device_id, dev, sizeof(dev), NULL, 0))
		dev[0] = 0;
	if (!dev[0]) {
		log_debug("CHECK: VF %s has no RDMA device: no port to check", c->device_id);
		return 0;
	}
	ret = cni_host->vf_port_check(dev, c->rdma_isolation ? pod->fd : -1, ctx->nc.pkeys,
				      ctx->nc.n_pkeys, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_CHECK, "VF port not ready", "%s", err);
	return 0;
}

int cni_cmd_check(struct cni_ctx *ctx)
{
	struct cni_ns pod = {.fd = -1};
	char err[IBVF_ERR_LEN];
	json_t *pr = NULL;
	struct cni_cache c;
	int ret;

	cni_cache_init(&c);
	if (ctx->nc.version < 400)
		return cni_failf(ctx, CNI_ERR_INCOMPATIBLE_VERSION,
				 "config version does not allow "
				 "CHECK",
				 "cniVersion %s predates CHECK (0.4.0)", ctx->nc.cni_version);
	if (!ctx->nc.prev_result)
		return cni_failf(ctx, CNI_ERR_INVALID_CONFIG, "prevResult missing",
				 "CHECK needs the result of ADD in prevResult (spec section 2)");
	ret = cni_result_normalize(ctx->nc.prev_result, ctx->nc.cni_version, &pr, err, sizeof(err));
	if (ret)
		return cni_failf(ctx, CNI_ERR_INVALID_CONFIG, "bad prevResult", "%s", err);
	ret = cni_cache_read(ctx->cache_dir, ctx->env.container_id, ctx->env.ifname, &c, err,
			     sizeof(err));
	if (ret) {
		ret = cni_failf(ctx, CNI_ERR_CHECK, "no record of this attachment", "%s", err);
		goto out;
	}
	if (!c.vfio) {
		ret = cni_host->ns_open(&pod, ctx->env.netns, err, sizeof(err));
		if (ret) {
			ret = cni_failf(ctx, CNI_ERR_CHECK, "Pod netns not reachable", "%s", err);
			goto out;
		}
		ret = check_link(ctx, &c, pr, &pod);
		if (ret)
			goto out;
	}
	if (ctx->nc.ipam_type && !c.vfio) {
		struct cni_ipam_call call = {
			.type = ctx->nc.ipam_type,
			.cni_path = ctx->env.path,
			.command = "CHECK",
			.conf = ctx->conf_text,
			.conf_len = ctx->conf_len,
		};

		ret = cni_host->ipam_exec(&call, NULL, err, sizeof(err));
		if (ret) {
			ret = cni_failf(ctx, CNI_ERR_IPAM, "IPAM CHECK failed", "%s", err);
			goto out;
		}
	}
	if (c.mode == CNI_MODE_DAEMON && (ret = check_daemon(ctx, &c)))
		goto out;
	if (!c.vfio)
		ret = check_port(ctx, &c, &pod);
out:
	cni_host->ns_close(&pod);
	cni_cache_free(&c);
	json_decref(pr);
	return ret;
}
