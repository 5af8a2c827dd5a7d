// SPDX-License-Identifier: MIT
/* ibvfctl vf: list the VFs of this node, program a VF's GUID by hand. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "ctl.h"
#include "err.h"
#include "log.h"
#include "vf_driver.h"
#include "vf_inventory.h"
#include "vf_manager.h"

/* Live records of the GUID pool, to show who holds each VF; none when no store. */
struct owners {
	struct ibvf_alloc *a;
	size_t n, cap;
};

static int owners_cb(void *arg, const struct ibvf_alloc *a)
{
	struct owners *o = arg;

	if (o->n == o->cap) {
		size_t ncap = o->cap ? o->cap * 2 : 32;
		void *na = realloc(o->a, ncap * sizeof(*o->a));

		if (!na)
			return -ENOMEM;
		o->a = na;
		o->cap = ncap;
	}
	o->a[o->n++] = *a;
	return 0;
}

/* Read the pool store if it exists; a missing store is not an error here. */
static void load_owners(struct ctl_ctx *ctx, struct owners *o)
{
	struct ibvf_pool_opts po = {0};
	struct ibvf_pool_filter f = {.pkey = -1};
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN], db[4096];
	int ret;

	snprintf(db, sizeof(db), "%s/%s", ctx->cfg.state_dir, IBVF_POOL_DB_NAME);
	if (access(db, F_OK))
		return; /* no store yet: nobody holds anything */
	po.state_dir = ctx->cfg.state_dir;
	po.ranges = ctx->cfg.pool.ranges;
	po.n_ranges = ctx->cfg.pool.n_ranges;
	po.quarantine_s = ctx->cfg.pool.quarantine_s;
	po.read_only = true;
	ret = ibvf_pool_open(&po, &p, err, sizeof(err));
	if (ret) {
		if (ret != -ENOENT)
			log_warn("GUID pool store not readable, owners not shown: %s", err);
		return;
	}
	if (ibvf_pool_list(p, &f, owners_cb, o, err, sizeof(err)) < 0)
		log_warn("GUID pool store: %s", err);
	ibvf_pool_close(p);
}

/* The record holding VF @vf (by PCI address, else by its port GUID). */
static const struct ibvf_alloc *owner_of(const struct owners *o, const struct ibvf_vf_info *vf,
					 const struct ibvf_vf_state *st)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->a[i].pci[0] && !strcasecmp(o->a[i].pci, vf->pci))
			return &o->a[i];
	if (!st->port_guid_known || !ibvf_guid_is_assignable(st->port_guid))
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (o->a[i].guid == st->port_guid)
			return &o->a[i];
	return NULL;
}

static bool warm_record(const struct ibvf_alloc *a)
{
	return a && ibvf_alloc_is_warm(a);
}

/*
 * What the VF is to ibvf: "free" (no record), "warm" (vf.warm: a pool GUID
 * set ahead, port seen ACTIVE; the next Pod takes it without a rebind),
 * "warming" (being set up, or re-GUIDed after a release), else the attach
 * state of the Pod's record.
 */
static json_t *state_json(const struct ibvf_alloc *a)
{
	if (!a)
		return json_string("free");
	if (warm_record(a))
		return json_string(a->state == IBVF_ALLOC_PORT_READY ? "warm" : "warming");
	return json_string(ibvf_alloc_state_name(a->state));
}

static json_t *owner_json(const struct ibvf_alloc *a)
{
	char s[400];

	if (!a || warm_record(a))
		return json_string("-");
	if (a->owner.pod_name[0])
		snprintf(s, sizeof(s), "%s%s%s", a->owner.pod_namespace,
			 a->owner.pod_namespace[0] ? "/" : "", a->owner.pod_name);
	else
		snprintf(s, sizeof(s), "%.12s", a->owner.container_id);
	return ctl_json_text(s);
}

static json_t *guid_json(bool known, uint64_t g)
{
	char s[IBVF_GUID_STR_LEN];

	return known ? json_string(ibvf_guid_format(g, s)) : json_null();
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? ctl_json_text(s) : json_null();
}

static json_t *vf_json(const struct ibvf_vf_info *vf, const struct ibvf_vf_state *st,
		       const struct ibvf_alloc *owner)
{
	return json_pack("{s:o,s:o,s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "pf",
			 str_or_null(vf->pf_netdev), "pf_pci", ctl_json_text(vf->pf_pci), "vf",
			 vf->index, "pci", ctl_json_text(vf->pci), "netdev",
			 str_or_null(vf->netdev), "rdma_dev", str_or_null(vf->rdma_dev), "driver",
			 str_or_null(vf->driver), "node_guid",
			 guid_json(st->node_guid_known, st->node_guid), "port_guid",
			 guid_json(st->port_guid_known, st->port_guid), "link_state",
			 st->link_state_known ? json_string(ibvf_vf_link_state_name(st->link_state))
					      : json_null(),
			 "state", state_json(owner), "owner", owner_json(owner));
}

/* -------------------------------------------------------------- list -- */

static int vf_list(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {{"pf", required_argument, NULL, 'p'}, {0}};
	static const struct ctl_col cols[] = {
		{"pf", "PF"},
		{"vf", "VF"},
		{"pci", "PCI"},
		{"netdev", "NETDEV"},
		{"rdma_dev", "RDMA"},
		{"node_guid", "NODE GUID"},
		{"port_guid", "PORT GUID"},
		{"link_state", "LINK"},
		{"state", "STATE"},
		{"owner", "OWNER"},
		{0},
	};
	struct owners own = {0};
	struct ibvf_inventory *inv;
	struct ibvf_vf_driver *drv;
	const char *pf_filter = NULL;
	char err[IBVF_ERR_LEN];
	json_t *rows;
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "p:", opts)) != -1) {
		if (c == 'p') {
			pf_filter = optarg;
			continue;
		}
		ctl_cmd_usage(c == 'h' ? stdout : stderr, &ctl_vf_object, &ctl_vf_object.cmds[0]);
		return c == 'h' ? CTL_OK : CTL_USAGE;
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	ret = ctl_load_config(ctx);
	if (ret)
		return ret;
	ret = ibvf_inventory_scan(ctx->cfg.sysfs_root, &inv, err, sizeof(err));
	if (ret)
		return ctl_error(ret == -ENOENT ? CTL_USAGE : CTL_FAILED, "%s", err);
	if (pf_filter && !ibvf_inventory_find_pf(inv, pf_filter)) {
		ibvf_inventory_free(inv);
		return ctl_error(CTL_USAGE,
				 "no InfiniBand SR-IOV PF '%s' (by netdev, RDMA device "
				 "or PCI address)",
				 pf_filter);
	}
	ret = ibvf_config_vf_driver_create(&ctx->cfg, &drv, err, sizeof(err));
	if (ret) {
		ibvf_inventory_free(inv);
		return ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "%s", err);
	}
	load_owners(ctx, &own);
	rows = json_array();
	for (size_t p = 0; p < inv->n_pfs; p++) {
		const struct ibvf_pf_info *pf = &inv->pfs[p];
		const struct ibvf_vf_info **vfs;
		struct ibvf_vf_state *st;

		if (pf_filter && pf != ibvf_inventory_find_pf(inv, pf_filter))
			continue;
		vfs = calloc(pf->n_vfs + 1, sizeof(*vfs));
		st = calloc(pf->n_vfs + 1, sizeof(*st));
		if (!vfs || !st) {
			free(vfs);
			free(st);
			continue;
		}
		for (size_t i = 0; i < pf->n_vfs; i++)
			vfs[i] = &pf->vfs[i];
		if (pf->n_vfs && drv->ops->read_back(drv, vfs, pf->n_vfs, st, err, sizeof(err))) {
			log_warn("%s", err);
			memset(st, 0, pf->n_vfs * sizeof(*st));
		}
		for (size_t i = 0; i < pf->n_vfs; i++)
			json_array_append_new(rows, vf_json(&pf->vfs[i], &st[i],
							    owner_of(&own, &pf->vfs[i], &st[i])));
		free(vfs);
		free(st);
	}
	free(own.a);
	ibvf_vf_driver_destroy(drv);
	ibvf_inventory_free(inv);
	ctl_emit_table(ctx, rows, cols);
	return CTL_OK;
}

/* ---------------------------------------------------------- set-guid -- */

/* Refuse a GUID the pool gave to someone else, unless --force. */
static int check_pool(struct ctl_ctx *ctx, const char *pci, uint64_t guid)
{
	struct owners own = {0};
	char s[IBVF_GUID_STR_LEN];
	int ret = CTL_OK;

	load_owners(ctx, &own);
	for (size_t i = 0; i < own.n; i++) {
		const struct ibvf_alloc *a = &own.a[i];
		json_t *o;

		if (a->guid != guid || (a->pci[0] && !strcasecmp(a->pci, pci)))
			continue;
		o = owner_json(a);
		ret = ctl_error(CTL_USAGE,
				"GUID %s is held by %s (container %.12s, VF %s) in the GUID pool; "
				"programming it on %s too would duplicate it on the fabric (use "
				"--force to do it anyway)",
				ibvf_guid_format(guid, s), json_string_value(o),
				a->owner.container_id, a->pci[0] ? a->pci : "none", pci);
		json_decref(o);
		break;
	}
	free(own.a);
	return ret;
}

/*
 * A running ibvfd owns the VFs it attaches and reconciles them against its
 * store: a GUID programmed behind it is a drift or an orphan it resets. So
 * with ibvfd up, set-guid is refused (attach by hand with `daemon prepare`);
 * with ibvfd down it holds the state directory's lock (shared) while it
 * programs, so an ibvfd starting meanwhile waits for it.
 */
static int refuse_if_daemon(struct ctl_ctx *ctx)
{
	json_t *r = NULL;
	int ret = ctl_daemon_call(ctx, "status", NULL, &r, true);

	json_decref(r);
	if (ret == CTL_OK)
		return ctl_error(CTL_FAILED,
				 "ibvfd is running (%s): it owns the VFs and their GUIDs; attach "
				 "a VF by hand with 'ibvfctl daemon prepare', or stop ibvfd to "
				 "program one directly",
				 ctx->cfg.api.socket);
	if (ret != -ENOTCONN)
		return ret;
	return ctl_offline_begin(ctx, false);
}

static int vf_set_guid(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"node-guid", required_argument, NULL, 'n'},
		{"link-state", required_argument, NULL, 'l'},
		{"no-rebind", no_argument, NULL, 'R'},
		{"force", no_argument, NULL, 'f'},
		{0},
	};
	static const struct ctl_col cols[] = {
		{"pf", "PF:"},
		{"vf", "VF:"},
		{"pci", "PCI:"},
		{"netdev", "Netdev:"},
		{"rdma_dev", "RDMA device:"},
		{"driver", "Driver:"},
		{"node_guid", "Node GUID:"},
		{"port_guid", "Port GUID:"},
		{"link_state", "Link state:"},
		{"owner", "Owner:"},
		{0},
	};
	struct ibvf_vf_request req = {.link_state = -1, .rebind = true};
	struct owners own = {0};
	const char *node_arg = NULL;
	struct ibvf_vf_manager *m;
	struct ibvf_vf_info vf, out;
	struct ibvf_vf_state st;
	enum ibvf_vf_link_state ls;
	char err[IBVF_ERR_LEN];
	bool force = false;
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "n:l:Rf", opts)) != -1) {
		switch (c) {
		case 'n':
			node_arg = optarg;
			break;
		case 'l':
			if (ibvf_vf_link_state_parse(optarg, &ls, err, sizeof(err)))
				return ctl_error(CTL_USAGE, "%s", err);
			req.link_state = (int)ls;
			break;
		case 'R':
			req.rebind = false;
			break;
		case 'f':
			force = true;
			break;
		case 'h':
			ctl_cmd_usage(stdout, &ctl_vf_object, &ctl_vf_object.cmds[1]);
			return CTL_OK;
		default:
			ctl_cmd_usage(stderr, &ctl_vf_object, &ctl_vf_object.cmds[1]);
			return CTL_USAGE;
		}
	}
	if (optind + 2 != argc)
		return ctl_error(CTL_USAGE, "expected PCI GUID (e.g. vf set-guid 0000:03:00.2 "
					    "02:00:00:00:00:00:10:01)");
	if (ibvf_guid_parse(argv[optind + 1], &req.port_guid, err, sizeof(err)) ||
	    (node_arg && ibvf_guid_parse(node_arg, &req.node_guid, err, sizeof(err))))
		return ctl_error(CTL_USAGE, "%s", err);
	if (!node_arg)
		req.node_guid = req.port_guid; /* as ib-sriov-cni does: both the same */
	if (!ibvf_guid_is_assignable(req.port_guid) || !ibvf_guid_is_assignable(req.node_guid))
		return ctl_error(CTL_USAGE,
				 "GUID 0 and all-ones are not assignable (an SM gives no LID to a "
				 "zero port GUID; all-ones is reserved)");
	ret = ctl_load_config(ctx);
	if (ret)
		return ret;
	ret = refuse_if_daemon(ctx);
	if (ret)
		return ret;
	if (ibvf_vf_lookup(ctx->cfg.sysfs_root, argv[optind], &vf, err, sizeof(err)))
		return ctl_error(CTL_USAGE, "%s", err);
	if (!force && (ret = check_pool(ctx, vf.pci, req.port_guid)))
		return ret;
	ret = ibvf_config_vf_manager_create(&ctx->cfg, NULL, &m, err, sizeof(err));
	if (ret)
		return ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "%s", err);
	ret = ibvf_vf_program(m, vf.pci, &req, &out, err, sizeof(err));
	if (ret) {
		ibvf_vf_manager_destroy(m);
		return ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "%s", err);
	}
	if (ibvf_vf_query(m, vf.pci, &out, &st, err, sizeof(err)))
		memset(&st, 0, sizeof(st));
	ibvf_vf_manager_destroy(m);
	load_owners(ctx, &own);
	ctl_emit_object(ctx, vf_json(&out, &st, owner_of(&own, &out, &st)), cols);
	free(own.a);
	return CTL_OK;
}

static const struct ctl_cmd vf_cmds[] = {
	{"list", vf_list, "[--pf PF]",
	 "VFs of the node's IB PFs: PCI address, netdev, RDMA device, node/port GUID, link "
	 "state and owner (from the GUID pool)"},
	{"set-guid", vf_set_guid,
	 "PCI GUID [--node-guid GUID] [--link-state auto|enable|disable] [--no-rebind] [--force]",
	 "program a VF's port (and node) GUID, rebind its driver and wait for its netdev; rolls "
	 "back on failure"},
	{0},
};

const struct ctl_object ctl_vf_object = {
	.name = "vf",
	.help = "SR-IOV virtual functions and their GUIDs",
	.cmds = vf_cmds,
};
