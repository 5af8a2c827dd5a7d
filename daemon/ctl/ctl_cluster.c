// SPDX-License-Identifier: MIT
/*
 * ibvfctl cluster: status, blocks, nodes, reclaim-node — the cluster GUID
 * blocks in etcd (pool.cluster, docs/cluster.md), read and changed with the
 * config's etcd endpoints and credentials; ibvfd need not run. members and
 * the SM agents in status: the desired memberships and what the SM agents
 * (ibvf-smd) report applied (issue 19).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/types.h>

#include "clock.h"
#include "cluster_pool.h"
#include "ctl.h"
#include "err.h"
#include "etcd_client.h"
#include "guid_blocks.h"
#include "sm_members.h"

const struct ctl_object ctl_cluster_object;

static int usage_of(int c, int idx)
{
	ctl_cmd_usage(c == 'h' ? stdout : stderr, &ctl_cluster_object,
		      &ctl_cluster_object.cmds[idx]);
	return c == 'h' ? -1 : CTL_USAGE;
}

struct cl {
	struct etcd_client *etcd;
	struct cluster_blocks *b;
	struct cluster_range *ranges;
};

static void cl_close(struct cl *c)
{
	cluster_blocks_free(c->b);
	etcd_client_free(c->etcd);
	free(c->ranges);
}

/* The etcd client and the blocks of the config's pool.cluster. */
static int cl_open(struct ctl_ctx *ctx, struct cl *c)
{
	const struct ibvf_cluster_config *k = &ctx->cfg.pool.cluster;
	char err[IBVF_ERR_LEN];
	int ret = ctl_load_config(ctx);

	memset(c, 0, sizeof(*c));
	if (ret)
		return ret;
	if (!k->enabled)
		return ctl_error(CTL_USAGE, "pool.cluster is not configured (docs/cluster.md)");
	if (!ctx->cfg.pool.n_ranges)
		return ctl_error(CTL_USAGE, "no GUID ranges configured (pool.ranges)");
	ret = ibvf_cluster_etcd_new(k, &c->etcd, err, sizeof(err));
	if (ret)
		return ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "%s", err);
	c->ranges = calloc(ctx->cfg.pool.n_ranges, sizeof(*c->ranges));
	if (!c->ranges) {
		cl_close(c);
		return ctl_error(CTL_FAILED, "out of memory");
	}
	for (size_t i = 0; i < ctx->cfg.pool.n_ranges; i++) {
		c->ranges[i].start = ctx->cfg.pool.ranges[i].start;
		c->ranges[i].end = ctx->cfg.pool.ranges[i].end;
	}
	{
		struct cluster_blocks_opts o = {
			.etcd = c->etcd,
			.prefix = k->prefix,
			.node = k->node,
			.ranges = c->ranges,
			.n_ranges = ctx->cfg.pool.n_ranges,
			.block_size = k->block_size,
			.quarantine_s = ctx->cfg.pool.quarantine_s,
		};

		ret = cluster_blocks_open(&o, &c->b, err, sizeof(err));
	}
	if (ret) {
		cl_close(c);
		return ctl_error(ret == -EEXIST ? CTL_USAGE : CTL_FAILED, "%s", err);
	}
	return CTL_OK;
}

static json_t *guid_json(uint64_t g)
{
	char s[IBVF_GUID_STR_LEN];

	return json_string(ibvf_guid_format(g, s));
}

static int no_args(struct ctl_ctx *ctx, int argc, char **argv, int idx)
{
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "", NULL)) != -1)
		return (ret = usage_of(c, idx)) < 0 ? -1 : ret;
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	return CTL_OK;
}

/* ------------------------------------------------------------ status -- */

static json_t *agents_text(const struct cluster_sm_state *s);
static json_t *min_applied(const struct cluster_sm_state *s);

static int cluster_status(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct ctl_col cols[] = {
		{"node", "Node"},
		{"prefix", "Prefix"},
		{"endpoint", "Endpoint"},
		{"blocks_total", "Blocks"},
		{"blocks_claimed", "Claimed"},
		{"node_blocks", "Node blocks"},
		{"node_alive", "Heartbeat"},
		{"sm_agents", "SM agents"},
		{"sm_applied", "Applied rev"},
		{"conflicts", "Conflicts"},
		{"conflicted", "Conflicted GUIDs"},
		{0},
	};
	struct cluster_sm_state sm = {0};
	struct cluster_block *blocks = NULL;
	json_t *conf = NULL, *obj;
	char err[IBVF_ERR_LEN], text[1024] = "-";
	size_t to = 0;
	size_t n = 0, mine = 0;
	bool alive = false;
	struct cl c;
	int ret = no_args(ctx, argc, argv, 0);

	if (ret)
		return ret < 0 ? CTL_OK : ret;
	if ((ret = cl_open(ctx, &c)))
		return ret;
	if (cluster_blocks_list(c.b, NULL, &blocks, &n, err, sizeof(err)) ||
	    cluster_node_alive(c.b, ctx->cfg.pool.cluster.node, &alive, err, sizeof(err))) {
		free(blocks);
		cl_close(&c);
		return ctl_error(CTL_FAILED, "%s", err);
	}
	for (size_t i = 0; i < n; i++)
		mine += !strcmp(blocks[i].node, ctx->cfg.pool.cluster.node);
	free(blocks);
	/* this node's conflicts as its ibvfd last recorded them (docs/cluster.md) */
	if (ibvf_cluster_local_conflicts(&ctx->cfg, &conf, err, sizeof(err))) {
		cl_close(&c);
		return ctl_error(CTL_FAILED, "%s", err);
	}
	for (size_t i = 0; i < json_array_size(conf) && to < sizeof(text); i++) {
		json_t *x = json_array_get(conf, i);
		int w = snprintf(text + to, sizeof(text) - to, "%s%s (%.12s %s: %s)", i ? "; " : "",
				 json_string_value(json_object_get(x, "guid")),
				 json_string_value(json_object_get(x, "container")),
				 json_string_value(json_object_get(x, "ifname")),
				 json_string_value(json_object_get(x, "reason")));

		if (w < 0)
			break;
		to += (size_t)w;
	}
	if (cluster_sm_state_read(c.etcd, ctx->cfg.pool.cluster.prefix, &sm, err, sizeof(err))) {
		json_decref(conf);
		cl_close(&c);
		return ctl_error(CTL_FAILED, "%s", err);
	}
	obj = json_pack("{s:s,s:s,s:s,s:o,s:I,s:I,s:s,s:I,s:s,s:o,s:o}", "node",
			ctx->cfg.pool.cluster.node, "prefix", ctx->cfg.pool.cluster.prefix,
			"endpoint", etcd_client_endpoint(c.etcd), "blocks_total",
			ctl_count_json(cluster_blocks_total(c.b)), "blocks_claimed", (json_int_t)n,
			"node_blocks", (json_int_t)mine, "node_alive", alive ? "alive" : "none",
			"conflicts", (json_int_t)json_array_size(conf), "conflicted", text,
			"sm_agents", agents_text(&sm), "sm_applied", min_applied(&sm));
	cluster_sm_state_free(&sm);
	if (obj && ctx->json)
		json_object_set(obj, "conflict_list", conf);
	json_decref(conf);
	ctl_emit_object(ctx, obj, cols);
	cl_close(&c);
	return CTL_OK;
}

/* "id(group, leader, rev R)" of each live SM agent, or "none". */
static json_t *agents_text(const struct cluster_sm_state *s)
{
	char buf[2048] = "";
	size_t off = 0;

	for (size_t i = 0; i < s->n_agents && off < sizeof(buf); i++) {
		const struct cluster_agent *a = &s->agents[i];

		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					"%s%.64s(%.64s %.8s%s rev %lld)", i ? ", " : "", a->id,
					a->group, a->mode, a->leader ? " leader" : "",
					(long long)a->applied_revision);
	}
	return ctl_json_text(s->n_agents ? buf : "none");
}

/* The lowest applied revision over the live agents' groups, or null. */
static json_t *min_applied(const struct cluster_sm_state *s)
{
	int64_t m = INT64_MAX;

	for (size_t i = 0; i < s->n_agents; i++)
		if (s->agents[i].applied_revision < m)
			m = s->agents[i].applied_revision;
	return s->n_agents ? json_integer(m) : json_null();
}

/* ----------------------------------------------------------- members -- */

static int cluster_members(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {{"pkey", required_argument, NULL, 'p'}, {0}};
	static const struct ctl_col cols[] = {
		{"pkey", "PKey"},
		{"guid", "GUID"},
		{"membership", "Membership"},
		{"node", "Node"},
		{"owner", "Owner"},
		{"state", "State"},
		{"revision", "Rev"},
		{0},
	};
	struct cluster_sm_state sm = {0};
	struct cluster_member *v = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0, bad = 0;
	int pkey = -1, o, ret;
	json_t *rows;
	struct cl c;

	while ((o = ctl_getopt(ctx, argc, argv, "p:", opts)) != -1) {
		if (o == 'p') {
			uint16_t pk;

			if (ibvf_pkey_parse(optarg, &pk, err, sizeof(err)))
				return ctl_error(CTL_USAGE, "--pkey: %s", err);
			pkey = ibvf_pkey_key(pk);
			continue;
		}
		return (ret = usage_of(o, 4)) < 0 ? CTL_OK : ret;
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	if ((ret = cl_open(ctx, &c)))
		return ret;
	if (cluster_members_list(c.etcd, ctx->cfg.pool.cluster.prefix, pkey, NULL, &v, &n, NULL,
				 &bad, err, sizeof(err)) ||
	    cluster_sm_state_read(c.etcd, ctx->cfg.pool.cluster.prefix, &sm, err, sizeof(err))) {
		free(v);
		cl_close(&c);
		return ctl_error(CTL_FAILED, "%s", err);
	}
	if (bad)
		fprintf(stderr, "ibvfctl: %zu key(s) under %smembers/ are not ibvf's format\n", bad,
			ctx->cfg.pool.cluster.prefix);
	rows = json_array();
	for (size_t i = 0; rows && i < n; i++) {
		/* applied once every live agent group has applied its write */
		bool applied = cluster_sm_applied(&sm, v[i].mod_revision, NULL, 0);
		const char *state = v[i].removed ? (applied ? "removed" : "removing")
						 : (applied ? "applied" : "pending");
		/* a live group's SM refused this very write (smd/status/ "refused") */
		const char *group = NULL;
		const struct cluster_refusal *rf =
			v[i].removed ? NULL
				     : cluster_sm_refused(&sm, v[i].pkey, v[i].guid,
							  v[i].mod_revision, &group);
		char pk[8];
		json_t *row;

		if (rf)
			state = "refused";
		snprintf(pk, sizeof(pk), "0x%04x", v[i].pkey);
		row = json_pack("{s:s,s:o,s:s,s:o,s:o,s:s,s:I}", "pkey", pk, "guid",
				guid_json(v[i].guid), "membership",
				v[i].removed ? "-" : ibvf_membership_name(v[i].membership), "node",
				ctl_json_text(v[i].node), "owner",
				ctl_json_text(v[i].owner[0] ? v[i].owner : "-"), "state", state,
				"revision", (json_int_t)v[i].mod_revision);
		if (row && rf) {
			char why[400];

			snprintf(why, sizeof(why), "group %.64s: %.300s", group, rf->error);
			json_object_set_new(row, "error", ctl_json_text(why));
		}
		json_array_append_new(rows, row);
	}
	if (!sm.n_agents)
		fprintf(stderr, "ibvfctl: no SM agent (ibvf-smd) is live: nothing is applied\n");
	free(v);
	cluster_sm_state_free(&sm);
	cl_close(&c);
	ctl_emit_table(ctx, rows, cols);
	return CTL_OK;
}

/* ------------------------------------------------------------ blocks -- */

static int cluster_blocks(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {{"node", required_argument, NULL, 'n'}, {0}};
	static const struct ctl_col cols[] = {
		{"first", "First GUID"}, {"last", "Last GUID"}, {"size", "Size"},
		{"node", "Node"},	 {"age_s", "Age (s)"},	{0},
	};
	struct cluster_block *blocks = NULL;
	const char *node = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0;
	json_t *rows;
	struct cl c;
	int o, ret;

	while ((o = ctl_getopt(ctx, argc, argv, "n:", opts)) != -1) {
		if (o == 'n') {
			node = optarg;
			continue;
		}
		return (ret = usage_of(o, 1)) < 0 ? CTL_OK : ret;
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	if ((ret = cl_open(ctx, &c)))
		return ret;
	if (cluster_blocks_list(c.b, node, &blocks, &n, err, sizeof(err))) {
		cl_close(&c);
		return ctl_error(CTL_FAILED, "%s", err);
	}
	rows = json_array();
	for (size_t i = 0; rows && i < n; i++)
		json_array_append_new(
			rows,
			json_pack("{s:o,s:o,s:I,s:o,s:I}", "first", guid_json(blocks[i].first),
				  "last", guid_json(blocks[i].last), "size",
				  (json_int_t)(blocks[i].last - blocks[i].first + 1), "node",
				  ctl_json_text(blocks[i].node), "age_s",
				  (json_int_t)((ibvf_wall_ms() - blocks[i].claimed_ms) / 1000)));
	free(blocks);
	cl_close(&c);
	ctl_emit_table(ctx, rows, cols);
	return CTL_OK;
}

/* ------------------------------------------------------------- nodes -- */

static int cluster_nodes(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct ctl_col cols[] = {
		{"node", "Node"},
		{"heartbeat", "Heartbeat"},
		{"up_s", "Up (s)"},
		{"blocks", "Blocks"},
		{"guids", "GUIDs"},
		{"reserved", "Reserved"},
		{0},
	};
	struct cluster_node *nodes = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0;
	json_t *rows;
	struct cl c;
	int ret = no_args(ctx, argc, argv, 2);

	if (ret)
		return ret < 0 ? CTL_OK : ret;
	if ((ret = cl_open(ctx, &c)))
		return ret;
	if (cluster_nodes_list(c.b, &nodes, &n, err, sizeof(err))) {
		cl_close(&c);
		return ctl_error(CTL_FAILED, "%s", err);
	}
	rows = json_array();
	for (size_t i = 0; rows && i < n; i++) {
		json_t *up = nodes[i].alive
				     ? json_integer((ibvf_wall_ms() - nodes[i].since_ms) / 1000)
				     : json_null();

		json_array_append_new(rows, json_pack("{s:o,s:s,s:o,s:I,s:o,s:I}", "node",
						      ctl_json_text(nodes[i].name), "heartbeat",
						      nodes[i].alive ? "alive" : "none", "up_s", up,
						      "blocks", (json_int_t)nodes[i].n_blocks,
						      "guids", ctl_count_json(nodes[i].n_guids),
						      "reserved", (json_int_t)nodes[i].n_reserved));
	}
	free(nodes);
	cl_close(&c);
	ctl_emit_table(ctx, rows, cols);
	return CTL_OK;
}

/* ------------------------------------------------------ reclaim-node -- */

static int cluster_reclaim(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {{"force", no_argument, NULL, 'f'}, {0}};
	static const struct ctl_col cols[] = {
		{"node", "Node"},
		{"forced", "Forced"},
		{"memberships_removed", "Memberships removed"},
		{"blocks_freed", "Blocks freed"},
		{"reserved_freed", "Reserved GUIDs freed"},
		{"reserved_kept", "Reserved GUIDs kept"},
		{"sm_applied", "SM agents applied"},
		{0},
	};
	struct cluster_node *nodes = NULL, left = {0};
	const struct cluster_node *who = NULL;
	struct cluster_reclaim rc;
	char err[IBVF_ERR_LEN];
	size_t n = 0;
	bool force = false;
	const char *name;
	struct cl c;
	int o, ret;

	while ((o = ctl_getopt(ctx, argc, argv, "f", opts)) != -1) {
		if (o == 'f') {
			force = true;
			continue;
		}
		return (ret = usage_of(o, 3)) < 0 ? CTL_OK : ret;
	}
	if (optind + 1 != argc)
		return ctl_error(CTL_USAGE, "cluster reclaim-node takes one NODE");
	name = argv[optind];
	if ((ret = cl_open(ctx, &c)))
		return ret;
	if (cluster_nodes_list(c.b, &nodes, &n, err, sizeof(err))) {
		cl_close(&c);
		return ctl_error(CTL_FAILED, "%s", err);
	}
	for (size_t i = 0; i < n && !who; i++)
		if (!strcmp(nodes[i].name, name))
			who = &nodes[i];
	if (!who && cluster_name_ok(name)) {
		/* no block, reservation nor heartbeat left, but maybe memberships */
		const char *p = ctx->cfg.pool.cluster.prefix;
		struct cluster_member *m = NULL, *mv = NULL;
		size_t nm = 0, nv = 0;

		ret = cluster_members_list(c.etcd, p, -1, name, &m, &nm, NULL, NULL, err,
					   sizeof(err));
		if (!ret)
			ret = cluster_members_list_node(c.etcd, p, name, -1, &mv, &nv, NULL, NULL,
							NULL, err, sizeof(err));
		free(m);
		free(mv);
		if (ret) {
			free(nodes);
			cl_close(&c);
			return ctl_error(CTL_FAILED, "%s", err);
		}
		nm += nv;
		snprintf(left.name, sizeof(left.name), "%s", name);
		if (nm)
			who = &left;
	}
	if (!who) {
		free(nodes);
		cl_close(&c);
		return ctl_error(CTL_USAGE, "cluster: no node '%s' in etcd under %s", name,
				 ctx->cfg.pool.cluster.prefix);
	}
	/* say what it will free first */
	fprintf(stderr,
		"ibvfctl: reclaim-node %s: its PKey memberships to remove, %zu blocks (%" PRIu64
		" GUIDs) and %zu reserved GUIDs to free into quarantine (%u s); heartbeat %s\n",
		name, who->n_blocks, who->n_guids, who->n_reserved, ctx->cfg.pool.quarantine_s,
		who->alive ? "ALIVE" : "none");
	if (who->alive && !force) {
		free(nodes);
		cl_close(&c);
		return ctl_error(CTL_FAILED,
				 "node %s has a live heartbeat: refused (its Pods may hold these "
				 "GUIDs; --force only for a node gone for good)",
				 name);
	}
	free(nodes);
	ret = cluster_node_reclaim_all(c.b, name, force, &rc, err, sizeof(err));
	cl_close(&c);
	if (ret)
		return ctl_error(CTL_FAILED, "%s (run it again to finish)", err);
	if (!rc.applied)
		fprintf(stderr,
			"ibvfctl: reclaim-node %s: the SM agents have not yet applied the removal "
			"of its memberships (revision %lld): its blocks stay unclaimable and %zu "
			"reserved GUIDs kept until they have; run reclaim-node again then to free "
			"those\n",
			name, (long long)rc.members_rev, rc.guids_kept);
	ctl_emit_object(ctx,
			json_pack("{s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b}", "node", name,
				  "forced", force, "memberships_removed",
				  (json_int_t)rc.memberships, "memberships_pending",
				  (json_int_t)rc.pending, "view_keys_deleted",
				  (json_int_t)rc.view_keys, "blocks_freed", (json_int_t)rc.blocks,
				  "reserved_freed", (json_int_t)rc.guids, "reserved_kept",
				  (json_int_t)rc.guids_kept, "members_revision",
				  (json_int_t)rc.members_rev, "sm_applied", rc.applied),
			cols);
	return CTL_OK;
}

int ctl_cluster_blocks_all(struct ctl_ctx *ctx, struct cluster_block **out, size_t *n)
{
	char err[IBVF_ERR_LEN];
	struct cl c;
	int ret = cl_open(ctx, &c);

	*out = NULL;
	*n = 0;
	if (ret)
		return ret;
	if (cluster_blocks_list(c.b, NULL, out, n, err, sizeof(err)))
		ret = ctl_error(CTL_FAILED, "cluster blocks: %s", err);
	cl_close(&c);
	return ret;
}

static const struct ctl_cmd cluster_cmds[] = {
	{"status", cluster_status, "", "this node, the layout, claimed blocks, the endpoint used"},
	{"blocks", cluster_blocks, "[--node NAME]", "claimed GUID blocks and their owner nodes"},
	{"nodes", cluster_nodes, "", "nodes with heartbeat, blocks and reserved GUIDs"},
	{"reclaim-node", cluster_reclaim, "[--force] NODE",
	 "free a node's memberships and blocks (gone for good); refused while its heartbeat "
	 "lives"},
	{"members", cluster_members, "[--pkey P]",
	 "desired PKey memberships (node, owner) and whether the SM agents applied them"},
	{0},
};

const struct ctl_object ctl_cluster_object = {
	.name = "cluster",
	.help = "cluster GUID blocks and PKey memberships in etcd (pool.cluster)",
	.cmds = cluster_cmds,
};
