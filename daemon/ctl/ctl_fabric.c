// SPDX-License-Identifier: MIT
/*
 * ibvfctl fabric audit: the P_Key tables of every CA port (daemon/port/
 * fabric_scan.c) against the desired state (daemon/port/fabric_audit.c):
 * the local store, the cluster's GUID blocks (cluster mode) and the SM's
 * configured membership. docs/fabric-audit.md.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ibvf/sm_backend.h>
#include <ibvf/types.h>

#include "ctl.h"
#include "err.h"
#include "fabric_audit.h"
#include "fabric_scan.h"
#include "guid_blocks.h"
#include "sm_loader.h"

struct desired {
	struct ibvf_fa_want *wants;
	size_t n_wants, cap_wants;
	struct ibvf_fa_known *known;
	size_t n_known, cap_known;
	struct ibvf_fa_sm *sm;
	size_t n_sm, cap_sm;
	struct ibvf_fa_range *managed;
	size_t n_managed;
	bool store_read, sm_read, cluster_read;
};

static void *grow(void *p, size_t *cap, size_t n, size_t sz)
{
	void *q;

	if (n < *cap)
		return p;
	q = realloc(p, (*cap ? *cap * 2 : 64) * sz);
	if (q)
		*cap = *cap ? *cap * 2 : 64;
	return q;
}

static int add_known(struct desired *d, uint64_t first, uint64_t last, const char *owner)
{
	void *n = grow(d->known, &d->cap_known, d->n_known, sizeof(*d->known));

	if (!n)
		return -ENOMEM;
	d->known = n;
	d->known[d->n_known].first = first;
	d->known[d->n_known].last = last;
	snprintf(d->known[d->n_known].owner, sizeof(d->known[0].owner), "%s", owner);
	d->n_known++;
	return 0;
}

static int add_want(struct desired *d, uint64_t guid, uint16_t pkey, const char *owner,
		    const char *source, bool expect)
{
	void *n = grow(d->wants, &d->cap_wants, d->n_wants, sizeof(*d->wants));

	if (!n)
		return -ENOMEM;
	d->wants = n;
	d->wants[d->n_wants] = (struct ibvf_fa_want){
		.guid = guid, .pkey = pkey, .source = source, .expect_on_fabric = expect};
	snprintf(d->wants[d->n_wants].owner, sizeof(d->wants[0].owner), "%s", owner);
	d->n_wants++;
	return 0;
}

static int store_cb(void *arg, const struct ibvf_alloc *a)
{
	struct desired *d = arg;
	char owner[IBVF_FA_OWNER_LEN];
	bool expect = a->state >= IBVF_ALLOC_PORT_READY && a->state <= IBVF_ALLOC_HANDED;

	if (a->state == IBVF_ALLOC_QUARANTINED)
		snprintf(owner, sizeof(owner), "quarantined (released by %.40s/%.60s)",
			 a->owner.pod_namespace, a->owner.pod_name);
	else if (a->owner.pod_name[0])
		snprintf(owner, sizeof(owner), "%.40s/%.60s %.15s", a->owner.pod_namespace,
			 a->owner.pod_name, a->owner.ifname);
	else
		snprintf(owner, sizeof(owner), "%.64s %.15s", a->owner.container_id,
			 a->owner.ifname);
	if (add_known(d, a->guid, a->guid, owner))
		return -ENOMEM;
	if (a->state == IBVF_ALLOC_QUARANTINED)
		return 0;
	for (size_t i = 0; i < a->n_pkeys; i++)
		if (add_want(d, a->guid, a->pkeys[i], owner, "store", expect))
			return -ENOMEM;
	return 0;
}

/* The local store; a node that never ran ibvfd has none (said, not an error). */
static int read_store(struct ctl_ctx *ctx, struct desired *d)
{
	struct ibvf_pool_filter f = {.pkey = -1, .include_quarantined = true};
	char path[4096], err[IBVF_ERR_LEN];
	struct ibvf_pool *pool;
	struct stat st;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", ctx->cfg.state_dir, IBVF_POOL_DB_NAME);
	if (stat(path, &st) && errno == ENOENT) {
		fprintf(stderr, "ibvfctl: no local store (%s): no Pod of this node is known\n",
			path);
		return CTL_OK;
	}
	ret = ctl_open_pool(ctx, false, &pool);
	if (ret)
		return ret;
	ret = ibvf_pool_list(pool, &f, store_cb, d, err, sizeof(err));
	ibvf_pool_close(pool);
	if (ret)
		return ctl_error(CTL_FAILED, "reading the store: %s",
				 ret == -ENOMEM ? "out of memory" : err);
	d->store_read = true;
	return CTL_OK;
}

static int sm_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct desired *d = arg;
	void *n = grow(d->sm, &d->cap_sm, d->n_sm, sizeof(*d->sm));

	if (!n)
		return -ENOMEM;
	d->sm = n;
	d->sm[d->n_sm++] = (struct ibvf_fa_sm){m->guid, ibvf_pkey_key(pkey),
					       m->membership == IBVF_MEMBER_FULL, managed};
	return 0;
}

/* The SM's configured membership (backend list_members); skipped when unreadable. */
static void read_sm(struct ctl_ctx *ctx, struct desired *d)
{
	struct ibvf_sm sm = {0};
	char err[IBVF_ERR_LEN] = "";
	int ret;

	if (!strcmp(ctx->cfg.sm.backend, "noop"))
		return;
	ret = ibvf_sm_open(ctx->cfg.sm.module_dir, ctx->cfg.sm.backend, ctx->cfg.sm.backend_json,
			   &sm, err, sizeof(err));
	if (!ret) {
		ret = sm.mod->ops->list_members(sm.b, -1, sm_cb, d, err, sizeof(err));
		ibvf_sm_close(&sm);
	}
	if (ret < 0) {
		fprintf(stderr, "ibvfctl: SM membership not compared: %s\n",
			err[0] ? err : strerror(-ret));
		d->n_sm = 0;
		return;
	}
	d->sm_read = true;
}

/*
 * Cluster mode: blocks of other nodes are known (their owner node), and the
 * SM's managed memberships of their GUIDs are what those nodes' Pods asked
 * for (their stores are not readable from here).
 */
static int read_cluster(struct ctl_ctx *ctx, struct desired *d)
{
	struct cluster_block *blocks = NULL;
	size_t n = 0;
	int ret;

	if (!ctx->cfg.pool.cluster.enabled)
		return CTL_OK;
	ret = ctl_cluster_blocks_all(ctx, &blocks, &n);
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++) {
		char owner[IBVF_FA_OWNER_LEN];

		if (!strcmp(blocks[i].node, ctx->cfg.pool.cluster.node))
			continue; /* this node's blocks: its store says which GUIDs are held */
		snprintf(owner, sizeof(owner), "node %.100s (cluster block)", blocks[i].node);
		if (add_known(d, blocks[i].first, blocks[i].last, owner))
			goto oom;
		for (size_t k = 0; k < d->n_sm; k++)
			if (d->sm[k].managed && d->sm[k].guid >= blocks[i].first &&
			    d->sm[k].guid <= blocks[i].last &&
			    add_want(d, d->sm[k].guid,
				     (uint16_t)(d->sm[k].pkey |
						(d->sm[k].full ? IBVF_PKEY_FULL_BIT : 0)),
				     owner, "sm", true))
				goto oom;
	}
	free(blocks);
	d->cluster_read = true;
	return CTL_OK;
oom:
	free(blocks);
	return ctl_error(CTL_FAILED, "out of memory");
}

static void desired_free(struct desired *d)
{
	free(d->wants);
	free(d->known);
	free(d->sm);
	free(d->managed);
}

/* ------------------------------------------------------------ output -- */

static json_t *guid_json(uint64_t g)
{
	char s[IBVF_GUID_STR_LEN];

	return json_string(ibvf_guid_format(g, s));
}

static json_t *pkey_json(int pkey)
{
	char s[12];

	if (pkey < 0)
		return json_null();
	snprintf(s, sizeof(s), "0x%04x", (unsigned)pkey);
	return json_string(s);
}

static json_t *port_json(const struct ibvf_fabric *f, size_t i)
{
	const struct ibvf_fabric_port *p;

	if (i == IBVF_FA_NO_PORT || i >= f->n_ports)
		return json_null();
	p = &f->ports[i];
	return json_pack("{s:o,s:o,s:o,s:i,s:s,s:i,s:s,s:o,s:i,s:b}", "port_guid",
			 guid_json(p->port_guid), "node_guid", guid_json(p->node_guid), "desc",
			 ctl_json_text(p->desc), "port", p->port_num, "dr", p->dr, "lid", p->lid,
			 "state", ibvf_port_state_name(p->state), "switch", guid_json(p->peer_guid),
			 "switch_port", p->peer_port, "local", p->local);
}

static const char *port_label(const struct ibvf_fabric *f, size_t i, char *buf, size_t len)
{
	const struct ibvf_fabric_port *p;

	if (i == IBVF_FA_NO_PORT || i >= f->n_ports)
		return "-";
	p = &f->ports[i];
	snprintf(buf, len, "%.64s%sLID %u", p->desc, p->desc[0] ? " " : "", p->lid);
	return buf;
}

static json_t *findings_json(const struct ibvf_fabric *f, const struct ibvf_fa_result *r,
			     bool table)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < r->n_findings; i++) {
		const struct ibvf_fa_finding *x = &r->findings[i];
		char l[128];
		json_t *o;

		if (table)
			o = json_pack("{s:s,s:s,s:o,s:o,s:s,s:o,s:o}", "severity",
				      x->problem ? "problem" : "notice", "kind",
				      ibvf_fa_kind_name(x->kind), "guid", guid_json(x->guid),
				      "pkey", pkey_json(x->pkey), "port",
				      port_label(f, x->port, l, sizeof(l)), "owner",
				      ctl_json_text(x->owner[0] ? x->owner : "-"), "detail",
				      ctl_json_text(x->detail));
		else
			o = json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "severity",
				      x->problem ? "problem" : "notice", "kind",
				      ibvf_fa_kind_name(x->kind), "guid", guid_json(x->guid),
				      "pkey", pkey_json(x->pkey), "port", port_json(f, x->port),
				      "port2", port_json(f, x->port2), "owner",
				      x->owner[0] ? ctl_json_text(x->owner) : json_null(), "detail",
				      ctl_json_text(x->detail));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *members_json(const struct ibvf_fabric *f, const struct ibvf_fa_pkey *k, bool full,
			    const struct desired *d)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < k->n_members; i++) {
		const struct ibvf_fa_member *m = &k->members[i];
		const struct ibvf_fabric_port *p = &f->ports[m->port];
		const char *owner = NULL;

		if (m->full != full)
			continue;
		for (size_t j = 0; j < d->n_known && !owner; j++)
			if (p->port_guid >= d->known[j].first && p->port_guid <= d->known[j].last)
				owner = d->known[j].owner;
		json_array_append_new(a, json_pack("{s:o,s:o,s:s,s:o}", "port_guid",
						   guid_json(p->port_guid), "desc",
						   ctl_json_text(p->desc), "role",
						   ibvf_fa_role_name(m->role), "owner",
						   owner ? ctl_json_text(owner) : json_null()));
	}
	return a;
}

static json_t *matrix_json(const struct ibvf_fabric *f, const struct ibvf_fa_result *r,
			   const struct desired *d)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < r->n_pkeys; i++) {
		const struct ibvf_fa_pkey *k = &r->pkeys[i];

		json_array_append_new(
			a,
			json_pack("{s:o,s:b,s:I,s:I,s:I,s:I,s:o,s:o}", "pkey", pkey_json(k->pkey),
				  "tenant", k->tenant, "full_members", (json_int_t)k->n_full,
				  "limited_members", (json_int_t)k->n_limited, "full_full_pairs",
				  (json_int_t)k->full_full, "full_limited_pairs",
				  (json_int_t)k->full_limited, "full", members_json(f, k, true, d),
				  "limited", members_json(f, k, false, d)));
	}
	return a;
}

/* Largest partition printed as a grid (--pkey): columns of one character. */
#define GRID_MAX 32

/*
 * The matrix itself for one key: F = both full, L = a full and a limited
 * member, . = two limited members (cannot talk), - = the port itself.
 */
static void print_grid(const struct ibvf_fabric *f, const struct ibvf_fa_pkey *k)
{
	if (!k->n_members || k->n_members > GRID_MAX)
		return;
	printf("\nP_Key 0x%04x: who can talk to whom (F full-full, L full-limited, . no)\n",
	       k->pkey);
	printf("%-24s ", "");
	for (size_t j = 0; j < k->n_members; j++)
		printf("%c", j < 26 ? (int)('a' + j) : (int)('A' + j - 26));
	putchar('\n');
	for (size_t i = 0; i < k->n_members; i++) {
		const struct ibvf_fabric_port *p = &f->ports[k->members[i].port];
		char label[64];

		snprintf(label, sizeof(label), "%c %.14s %s",
			 i < 26 ? (int)('a' + i) : (int)('A' + i - 26), p->desc[0] ? p->desc : "?",
			 k->members[i].full ? "full" : "lim");
		printf("%-24s ", label);
		for (size_t j = 0; j < k->n_members; j++)
			putchar(i == j					   ? '-'
				: k->members[i].full && k->members[j].full ? 'F'
				: k->members[i].full || k->members[j].full ? 'L'
									   : '.');
		putchar('\n');
	}
}

/* Table mode: who talks to whom, one row per member of each key. */
static void print_matrix(struct ctl_ctx *ctx, const struct ibvf_fabric *f,
			 const struct ibvf_fa_result *r, const struct desired *d, bool grid)
{
	static const struct ctl_col cols[] = {
		{"pkey", "PKEY"},
		{"member", "MEMBER"},
		{"guid", "GUID"},
		{"role", "ROLE"},
		{"membership", "MEMBERSHIP"},
		{"talks_to", "TALKS TO"},
		{"owner", "OWNER"},
		{0},
	};
	json_t *rows = json_array();

	for (size_t i = 0; rows && i < r->n_pkeys; i++) {
		const struct ibvf_fa_pkey *k = &r->pkeys[i];

		printf("%sP_Key 0x%04x%s: %zu full, %zu limited; pairs that can talk: %" PRIu64
		       " full-full, %" PRIu64 " full-limited\n",
		       i ? "" : "\n", k->pkey, k->tenant ? " (tenant)" : "", k->n_full,
		       k->n_limited, k->full_full, k->full_limited);
		for (size_t m = 0; m < k->n_members; m++) {
			const struct ibvf_fa_member *mb = &k->members[m];
			const struct ibvf_fabric_port *p = &f->ports[mb->port];
			const char *owner = "-";
			char l[128], t[64];

			for (size_t j = 0; j < d->n_known; j++)
				if (p->port_guid >= d->known[j].first &&
				    p->port_guid <= d->known[j].last) {
					owner = d->known[j].owner;
					break;
				}
			if (mb->full)
				snprintf(t, sizeof(t), "%zu member(s)",
					 k->n_members ? k->n_members - 1 : 0);
			else
				snprintf(t, sizeof(t), "%zu full member(s)", k->n_full);
			json_array_append_new(rows,
					      json_pack("{s:o,s:s,s:o,s:s,s:s,s:s,s:o}", "pkey",
							pkey_json(k->pkey), "member",
							port_label(f, mb->port, l, sizeof(l)),
							"guid", guid_json(p->port_guid), "role",
							ibvf_fa_role_name(mb->role), "membership",
							mb->full ? "full" : "limited", "talks_to",
							t, "owner", ctl_json_text(owner)));
		}
	}
	if (json_array_size(rows))
		ctl_emit_table(ctx, rows, cols);
	else
		json_decref(rows);
	if (grid)
		for (size_t i = 0; i < r->n_pkeys; i++)
			print_grid(f, &r->pkeys[i]);
}

static int fabric_audit(struct ctl_ctx *ctx, int argc, char **argv)
{
	enum { OPT_DEVICE = 256, OPT_PKEY, OPT_RATE, OPT_MATRIX };
	static const struct option opts[] = {
		{"device", required_argument, NULL, OPT_DEVICE},
		{"pkey", required_argument, NULL, OPT_PKEY},
		{"smp-rate", required_argument, NULL, OPT_RATE},
		{"matrix", no_argument, NULL, OPT_MATRIX},
		{0},
	};
	struct ibvf_fabric_scan_opts so = {0};
	struct ibvf_fabric fab = {0};
	struct ibvf_fa_result res = {0};
	struct ibvf_fa_input in = {.pkey = -1};
	struct desired d = {0};
	struct ibvf_port_src *src = NULL;
	char err[IBVF_ERR_LEN], ca[64] = "", *colon;
	const char *dev = NULL;
	bool matrix = false;
	int c, ret, port = 0;

	while ((c = ctl_getopt(ctx, argc, argv, "", opts)) != -1) {
		switch (c) {
		case OPT_DEVICE:
			dev = optarg;
			break;
		case OPT_PKEY: {
			uint16_t k;

			if (ibvf_pkey_parse(optarg, &k, err, sizeof(err)))
				return ctl_error(CTL_USAGE, "--pkey: %s", err);
			in.pkey = ibvf_pkey_key(k);
			break;
		}
		case OPT_RATE: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !v || v > 100000 || optarg[0] < '0' || optarg[0] > '9')
				return ctl_error(
					CTL_USAGE,
					"--smp-rate: '%s' is not 1..100000 SMPs per second",
					optarg);
			so.smp_rate = (uint32_t)v;
			break;
		}
		case OPT_MATRIX:
			matrix = true;
			break;
		case 'h':
			printf("Usage: ibvfctl fabric audit [--device DEV[:PORT]] [--pkey PKEY] "
			       "[--smp-rate N] [--matrix] [--json]\n");
			return CTL_OK;
		default:
			return ctl_error(CTL_USAGE, "fabric audit: unknown option (see --help)");
		}
	}
	if (optind < argc)
		return ctl_error(CTL_USAGE, "fabric audit: unexpected argument '%s'", argv[optind]);
	if (dev) {
		snprintf(ca, sizeof(ca), "%s", dev);
		colon = strchr(ca, ':');
		if (colon) {
			char *end;

			*colon = 0;
			port = (int)strtol(colon + 1, &end, 10);
			if (*end || port < 1 || port > 254)
				return ctl_error(CTL_USAGE, "--device %s: bad port number", dev);
		}
	}
	ret = ctl_load_config(ctx);
	if (ret)
		return ret;
	/* ibvf's GUIDs: the whole ranges (ctl_open_pool() narrows them in cluster mode) */
	d.n_managed = ctx->cfg.pool.n_ranges;
	d.managed = calloc(d.n_managed ? d.n_managed : 1, sizeof(*d.managed));
	if (!d.managed)
		return ctl_error(CTL_FAILED, "out of memory");
	for (size_t i = 0; i < d.n_managed; i++)
		d.managed[i] = (struct ibvf_fa_range){ctx->cfg.pool.ranges[i].start,
						      ctx->cfg.pool.ranges[i].end};
	read_sm(ctx, &d);
	ret = read_cluster(ctx, &d);
	if (!ret)
		ret = read_store(ctx, &d);
	if (ret)
		goto out;
	ret = ibvf_port_src_open(dev ? ca : NULL, port, IBVF_PORT_SRC_FABRIC, &ctx->cfg.port_watch,
				 &src, err, sizeof(err));
	if (ret) {
		ret = ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "%s", err);
		goto out;
	}
	ret = ibvf_fabric_scan(src, &so, &fab, err, sizeof(err));
	ibvf_port_src_close(src);
	if (ret) {
		ret = ctl_error(CTL_FAILED, "fabric scan from the local port: %s", err);
		goto out;
	}
	in.fabric = &fab;
	in.wants = d.wants;
	in.n_wants = d.n_wants;
	in.known = d.known;
	in.n_known = d.n_known;
	in.managed = d.managed;
	in.n_managed = d.n_managed;
	in.sm = d.sm;
	in.n_sm = d.n_sm;
	ret = ibvf_fabric_audit(&in, &res, err, sizeof(err));
	if (ret) {
		ret = ctl_error(CTL_FAILED, "%s", err);
		goto out;
	}
	if (ctx->json) {
		json_t *o = json_pack(
			"{s:{s:I,s:I,s:I,s:I,s:I,s:I},s:{s:b,s:b,s:b},s:o,s:I,s:o,s:o}", "scan",
			"ca_ports", (json_int_t)fab.n_ports, "switches", (json_int_t)fab.n_switches,
			"smps", (json_int_t)fab.smps, "smp_errors", (json_int_t)fab.smp_errors,
			"elapsed_ms", (json_int_t)fab.elapsed_ms, "smp_rate",
			(json_int_t)(so.smp_rate ? so.smp_rate : IBVF_FABRIC_SMP_RATE_DEFAULT),
			"compared", "store", d.store_read, "sm", d.sm_read, "cluster",
			d.cluster_read, "pkey", pkey_json(in.pkey), "problems",
			(json_int_t)res.n_problems, "findings", findings_json(&fab, &res, false),
			"pkeys", matrix_json(&fab, &res, &d));

		if (!o) {
			ret = ctl_error(CTL_FAILED, "out of memory");
			goto out;
		}
		json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
		putchar('\n');
		json_decref(o);
	} else {
		static const struct ctl_col cols[] = {
			{"severity", "SEVERITY"}, {"kind", "KIND"},
			{"guid", "GUID"},	  {"pkey", "PKEY"},
			{"port", "PORT"},	  {"owner", "OWNER"},
			{"detail", "DETAIL"},	  {0},
		};

		printf("scanned %zu CA ports, %zu switches: %" PRIu64 " SMPs (%" PRIu64
		       " failed) in %" PRId64 " ms; compared with:%s%s%s\n",
		       fab.n_ports, fab.n_switches, fab.smps, fab.smp_errors, fab.elapsed_ms,
		       d.store_read ? " store" : "", d.sm_read ? " sm" : "",
		       d.cluster_read ? " cluster" : "");
		if (res.n_findings)
			ctl_emit_table(ctx, findings_json(&fab, &res, true), cols);
		else
			printf("fabric audit clean: no findings\n");
		if (matrix || in.pkey >= 0)
			print_matrix(ctx, &fab, &res, &d, in.pkey >= 0);
	}
	ret = res.n_problems ? CTL_PROBLEMS : CTL_OK;
out:
	ibvf_fa_result_free(&res);
	ibvf_fabric_free(&fab);
	desired_free(&d);
	return ret;
}

static const struct ctl_cmd fabric_cmds[] = {
	{"audit", fabric_audit, "[--device DEV[:PORT]] [--pkey PKEY] [--smp-rate N] [--matrix]",
	 "P_Key tables of every CA port (SMPs) against the stores and the SM"},
	{0},
};

const struct ctl_object ctl_fabric_object = {
	.name = "fabric",
	.help = "the fabric as the ports enforce it (P_Key tables read with SMPs)",
	.cmds = fabric_cmds,
};
