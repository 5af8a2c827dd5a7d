// SPDX-License-Identifier: MIT
/*
 * ibvfctl pool: status, list, show, allocate, release, audit. The reads open
 * the store read-only; the changes go through ibvfd's API while it runs
 * (pool.allocate, pool.release, audit) and take the offline path
 * (ctl_offline.c) only when it does not.
 */
#include <errno.h>
#include <stdint.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "ctl.h"
#include "err.h"

static json_t *guid_str(uint64_t g)
{
	char s[IBVF_GUID_STR_LEN];

	return json_string(ibvf_guid_format(g, s));
}

static json_t *pkeys_json(const struct ibvf_alloc *a)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < a->n_pkeys; i++) {
		char s[8];

		snprintf(s, sizeof(s), "0x%04x", a->pkeys[i]);
		json_array_append_new(arr, json_string(s));
	}
	return arr;
}

static json_t *time_str(int64_t ms)
{
	char buf[64];
	struct tm tm;
	time_t t = (time_t)(ms / 1000);

	if (!ms)
		return json_null();
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_string(buf);
}

static json_t *alloc_json(const struct ibvf_alloc *a)
{
	char pod[320];

	snprintf(pod, sizeof(pod), "%s%s%s", a->owner.pod_namespace,
		 a->owner.pod_namespace[0] ? "/" : "", a->owner.pod_name);
	/* ctl_json_text(): a record with bytes that are not UTF-8 still shows */
	return json_pack("{s:o,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:s,s:o,s:o,s:o,s:o}", "guid",
			 guid_str(a->guid), "state", ibvf_alloc_state_name(a->state),
			 "container_id", ctl_json_text(a->owner.container_id), "ifname",
			 ctl_json_text(a->owner.ifname), "pod", ctl_json_text(pod), "pod_uid",
			 ctl_json_text(a->owner.pod_uid), "network",
			 ctl_json_text(a->owner.network), "pf", ctl_json_text(a->pf), "pci",
			 ctl_json_text(a->pci), "vf",
			 a->vf_index >= 0 ? json_integer(a->vf_index) : json_null(), "owner_short",
			 "", "pkeys", pkeys_json(a), "created", time_str(a->created_ms), "updated",
			 time_str(a->updated_ms), "released", time_str(a->released_ms));
}

static const struct ctl_col alloc_fields[] = {
	{"guid", "GUID:"},
	{"state", "State:"},
	{"container_id", "Container:"},
	{"ifname", "Interface:"},
	{"pod", "Pod:"},
	{"pod_uid", "Pod UID:"},
	{"network", "Network:"},
	{"pf", "PF:"},
	{"vf", "VF:"},
	{"pci", "PCI:"},
	{"pkeys", "PKeys:"},
	{"created", "Created:"},
	{"updated", "Updated:"},
	{"released", "Released:"},
	{0},
};

/* ------------------------------------------------------------ status -- */

static int pool_status(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct ctl_col cols[] = {
		{"store", "Store:"},
		{"ranges", "Ranges:"},
		{"total", "Total:"},
		{"allocated", "Allocated:"},
		{"quarantined", "Quarantined:"},
		{"free", "Free:"},
		{"outside_ranges", "Outside ranges:"},
		{"quarantine_s", "Quarantine (s):"},
		{0},
	};
	struct ibvf_pool_stats st;
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN];
	json_t *ranges;
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "", NULL)) != -1) {
		ctl_cmd_usage(c == 'h' ? stdout : stderr, &ctl_pool_object,
			      &ctl_pool_object.cmds[0]);
		return c == 'h' ? CTL_OK : CTL_USAGE;
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "pool status takes no arguments");
	ret = ctl_open_pool(ctx, false, &p);
	if (ret)
		return ret;
	if (ibvf_pool_stats(p, &st, err, sizeof(err))) {
		ibvf_pool_close(p);
		return ctl_error(CTL_FAILED, "%s", err);
	}
	ranges = json_array();
	for (size_t i = 0; i < ctx->cfg.pool.n_ranges; i++) {
		char a[IBVF_GUID_STR_LEN], b[IBVF_GUID_STR_LEN], r[64];

		snprintf(r, sizeof(r), "%s-%s", ibvf_guid_format(ctx->cfg.pool.ranges[i].start, a),
			 ibvf_guid_format(ctx->cfg.pool.ranges[i].end, b));
		json_array_append_new(ranges, json_string(r));
	}
	ctl_emit_object(ctx,
			json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:i}", "store",
				  ctl_json_text(ibvf_pool_db_path(p)), "ranges", ranges, "total",
				  ctl_count_json(st.total), "allocated",
				  ctl_count_json(st.allocated), "quarantined",
				  ctl_count_json(st.quarantined), "free", ctl_count_json(st.free),
				  "outside_ranges", ctl_count_json(st.outside), "quarantine_s",
				  (int)ctx->cfg.pool.quarantine_s),
			cols);
	ibvf_pool_close(p);
	return CTL_OK;
}

/* -------------------------------------------------------------- list -- */

static int list_cb(void *arg, const struct ibvf_alloc *a)
{
	json_t *o = alloc_json(a);
	char shortid[13];

	memcpy(shortid, a->owner.container_id, sizeof(shortid) - 1);
	shortid[sizeof(shortid) - 1] = 0;
	json_object_set_new(o, "owner_short", ctl_json_text(shortid));
	return json_array_append_new(arg, o);
}

static int pool_list(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"owner", required_argument, NULL, 'o'},
		{"pkey", required_argument, NULL, 'p'},
		{"all", no_argument, NULL, 'a'},
		{0},
	};
	static const struct ctl_col cols[] = {
		{"guid", "GUID"},
		{"state", "STATE"},
		{"owner_short", "CONTAINER"},
		{"ifname", "IF"},
		{"pod", "POD"},
		{"pf", "PF"},
		{"vf", "VF"},
		{"pkeys", "PKEYS"},
		{"updated", "UPDATED"},
		{0},
	};
	struct ibvf_pool_filter f = {.pkey = -1};
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN];
	json_t *rows;
	uint16_t pk;
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "o:p:a", opts)) != -1) {
		switch (c) {
		case 'o':
			f.owner = optarg;
			break;
		case 'p':
			if (ibvf_pkey_parse(optarg, &pk, err, sizeof(err)))
				return ctl_error(CTL_USAGE, "%s", err);
			f.pkey = pk;
			break;
		case 'a':
			f.include_quarantined = true;
			break;
		case 'h':
			ctl_cmd_usage(stdout, &ctl_pool_object, &ctl_pool_object.cmds[1]);
			return CTL_OK;
		default:
			ctl_cmd_usage(stderr, &ctl_pool_object, &ctl_pool_object.cmds[1]);
			return CTL_USAGE;
		}
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	ret = ctl_open_pool(ctx, false, &p);
	if (ret)
		return ret;
	rows = json_array();
	err[0] = 0;
	ret = ibvf_pool_list(p, &f, list_cb, rows, err, sizeof(err));
	ibvf_pool_close(p);
	if (ret < 0) {
		json_decref(rows);
		return ctl_error(CTL_FAILED, "%s", err[0] ? err : "out of memory");
	}
	ctl_emit_table(ctx, rows, cols);
	return CTL_OK;
}

/* -------------------------------------------------------------- show -- */

static int one_guid_arg(struct ctl_ctx *ctx, int argc, char **argv, int cmd_index, uint64_t *g)
{
	char err[IBVF_ERR_LEN];
	int c;

	while ((c = ctl_getopt(ctx, argc, argv, "", NULL)) != -1) {
		ctl_cmd_usage(c == 'h' ? stdout : stderr, &ctl_pool_object,
			      &ctl_pool_object.cmds[cmd_index]);
		return c == 'h' ? -1 : CTL_USAGE;
	}
	if (optind + 1 != argc)
		return ctl_error(CTL_USAGE, "expected one GUID argument");
	if (ibvf_guid_parse(argv[optind], g, err, sizeof(err)))
		return ctl_error(CTL_USAGE, "%s", err);
	return CTL_OK;
}

static int pool_show(struct ctl_ctx *ctx, int argc, char **argv)
{
	struct ibvf_pool *p;
	struct ibvf_alloc a;
	char err[IBVF_ERR_LEN];
	uint64_t g;
	int ret = one_guid_arg(ctx, argc, argv, 2, &g);

	if (ret)
		return ret < 0 ? CTL_OK : ret;
	ret = ctl_open_pool(ctx, false, &p);
	if (ret)
		return ret;
	ret = ibvf_pool_get(p, g, &a, err, sizeof(err));
	ibvf_pool_close(p);
	if (ret)
		return ctl_error(ret == -ENOENT ? CTL_PROBLEMS : CTL_FAILED, "%s", err);
	ctl_emit_object(ctx, alloc_json(&a), alloc_fields);
	return CTL_OK;
}

/* ------------------------------------------------- through ibvfd's API -- */

/* A pool.* error: a refused argument is a usage error (exit 2), as offline. */
static int api_exit(int ret, int rpc_code)
{
	return ret == CTL_FAILED && rpc_code == IBVF_RPC_INVALID_PARAMS ? CTL_USAGE : ret;
}

static json_t *owner_params(const struct ibvf_owner *o)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "container_id", o->container_id, "ifname",
			 o->ifname, "pod_namespace", o->pod_namespace, "pod_name", o->pod_name,
			 "pod_uid", o->pod_uid, "network", o->network);
}

static const char *json_str(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "";
}

static void copy_json_str(char *dst, size_t len, json_t *v)
{
	snprintf(dst, len, "%s", json_is_string(v) ? json_string_value(v) : "");
}

/* pool.allocate's record (include/ibvf/api.h) as the store's record type. */
static int record_from_api(json_t *r, struct ibvf_alloc *a)
{
	json_t *ow = json_object_get(r, "owner"), *pk;
	const char *st = json_string_value(json_object_get(r, "state"));
	char err[IBVF_ERR_LEN];
	size_t i;

	memset(a, 0, sizeof(*a));
	if (!json_is_string(json_object_get(r, "guid")) ||
	    ibvf_guid_parse(json_string_value(json_object_get(r, "guid")), &a->guid, err,
			    sizeof(err)))
		return ctl_error(CTL_FAILED, "ibvfd answered pool.allocate without a valid guid");
	a->state = IBVF_ALLOC_STATE_COUNT;
	for (int k = 0; st && k < IBVF_ALLOC_STATE_COUNT; k++)
		if (!strcmp(st, ibvf_alloc_state_name((enum ibvf_alloc_state)k)))
			a->state = (enum ibvf_alloc_state)k;
	if (a->state == IBVF_ALLOC_STATE_COUNT)
		return ctl_error(CTL_FAILED, "ibvfd answered pool.allocate with state '%s'",
				 st ? st : "(none)");
	copy_json_str(a->owner.container_id, sizeof(a->owner.container_id),
		      json_object_get(ow, "container_id"));
	copy_json_str(a->owner.ifname, sizeof(a->owner.ifname), json_object_get(ow, "ifname"));
	copy_json_str(a->owner.pod_namespace, sizeof(a->owner.pod_namespace),
		      json_object_get(ow, "pod_namespace"));
	copy_json_str(a->owner.pod_name, sizeof(a->owner.pod_name),
		      json_object_get(ow, "pod_name"));
	copy_json_str(a->owner.pod_uid, sizeof(a->owner.pod_uid), json_object_get(ow, "pod_uid"));
	copy_json_str(a->owner.network, sizeof(a->owner.network), json_object_get(ow, "network"));
	copy_json_str(a->pf, sizeof(a->pf), json_object_get(r, "pf"));
	copy_json_str(a->pci, sizeof(a->pci), json_object_get(r, "pci"));
	a->vf_index = json_is_integer(json_object_get(r, "vf_index"))
			      ? (int)json_integer_value(json_object_get(r, "vf_index"))
			      : -1;
	json_array_foreach(json_object_get(r, "pkeys"), i, pk)
	{
		uint16_t v;

		if (a->n_pkeys == IBVF_POOL_MAX_PKEYS ||
		    ibvf_pkey_parse(json_str(json_object_get(pk, "pkey")), &v, err, sizeof(err)))
			return ctl_error(CTL_FAILED, "ibvfd answered pool.allocate with bad pkeys");
		a->pkeys[a->n_pkeys++] =
			v | (!strcmp(json_str(json_object_get(pk, "membership")), "full")
				     ? IBVF_PKEY_FULL_BIT
				     : 0);
	}
	a->created_ms = json_integer_value(json_object_get(r, "created_ms"));
	a->updated_ms = json_integer_value(json_object_get(r, "updated_ms"));
	return CTL_OK;
}

/* Return: CTL_OK (*@a set), -ENOTCONN (ibvfd not running), or a CTL_* error (printed). */
static int daemon_allocate(struct ctl_ctx *ctx, const struct ibvf_alloc_request *req,
			   struct ibvf_alloc *a)
{
	json_t *params = json_pack("{s:o,s:[]}", "owner", owner_params(&req->owner), "pkeys");
	json_t *r = NULL;
	int ret, code;

	if (req->guid) {
		char s[IBVF_GUID_STR_LEN];

		json_object_set_new(params, "guid", json_string(ibvf_guid_format(req->guid, s)));
	}
	for (size_t i = 0; i < req->n_pkeys; i++) {
		char s[8];

		snprintf(s, sizeof(s), "0x%04x", ibvf_pkey_key(req->pkeys[i]));
		json_array_append_new(
			json_object_get(params, "pkeys"),
			json_pack("{s:s,s:s}", "pkey", s, "membership",
				  ibvf_pkey_is_full(req->pkeys[i]) ? "full" : "limited"));
	}
	ret = ctl_daemon_call_code(ctx, "pool.allocate", params, &r, true, &code);
	json_decref(params);
	if (ret)
		return api_exit(ret, code);
	ret = record_from_api(r, a);
	json_decref(r);
	return ret;
}

/* ---------------------------------------------------------- allocate -- */

static int copy_field(char *dst, size_t len, const char *src, const char *what)
{
	if (strlen(src) >= len)
		return ctl_error(CTL_USAGE, "%s '%.40s...' is longer than %zu characters", what,
				 src, len - 1);
	memcpy(dst, src, strlen(src) + 1);
	return CTL_OK;
}

static int parse_pod(struct ibvf_owner *o, const char *s)
{
	const char *slash = strchr(s, '/');
	char ns[sizeof(o->pod_namespace)];

	if (!slash)
		return copy_field(o->pod_name, sizeof(o->pod_name), s, "pod name");
	if ((size_t)(slash - s) >= sizeof(ns))
		return ctl_error(CTL_USAGE, "pod namespace too long");
	memcpy(ns, s, (size_t)(slash - s));
	ns[slash - s] = 0;
	return copy_field(o->pod_namespace, sizeof(o->pod_namespace), ns, "pod namespace") ||
	       copy_field(o->pod_name, sizeof(o->pod_name), slash + 1, "pod name");
}

static int pool_allocate(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"owner", required_argument, NULL, 'o'},
		{"ifname", required_argument, NULL, 'i'},
		{"pod", required_argument, NULL, 'P'},
		{"pod-uid", required_argument, NULL, 'U'},
		{"network", required_argument, NULL, 'n'},
		{"guid", required_argument, NULL, 'g'},
		{"pkey", required_argument, NULL, 'p'},
		{0},
	};
	struct ibvf_alloc_request req = {.vf_index = -1};
	uint16_t pkeys[IBVF_POOL_MAX_PKEYS];
	struct ibvf_alloc a;
	char err[IBVF_ERR_LEN];
	int c, ret = 0;

	snprintf(req.owner.ifname, sizeof(req.owner.ifname), "net1");
	while ((c = ctl_getopt(ctx, argc, argv, "o:i:g:p:", opts)) != -1) {
		switch (c) {
		case 'o':
			ret = copy_field(req.owner.container_id, sizeof(req.owner.container_id),
					 optarg, "owner");
			break;
		case 'i':
			ret = copy_field(req.owner.ifname, sizeof(req.owner.ifname), optarg,
					 "ifname");
			break;
		case 'P':
			ret = parse_pod(&req.owner, optarg);
			break;
		case 'U':
			ret = copy_field(req.owner.pod_uid, sizeof(req.owner.pod_uid), optarg,
					 "pod UID");
			break;
		case 'n':
			ret = copy_field(req.owner.network, sizeof(req.owner.network), optarg,
					 "network");
			break;
		case 'g':
			if (ibvf_guid_parse(optarg, &req.guid, err, sizeof(err)))
				return ctl_error(CTL_USAGE, "%s", err);
			break;
		case 'p':
			if (req.n_pkeys == IBVF_POOL_MAX_PKEYS)
				return ctl_error(CTL_USAGE, "at most %d --pkey",
						 IBVF_POOL_MAX_PKEYS);
			if (ibvf_pkey_parse(optarg, &pkeys[req.n_pkeys], err, sizeof(err)))
				return ctl_error(CTL_USAGE, "%s", err);
			req.n_pkeys++;
			break;
		case 'h':
			ctl_cmd_usage(stdout, &ctl_pool_object, &ctl_pool_object.cmds[3]);
			return CTL_OK;
		default:
			ctl_cmd_usage(stderr, &ctl_pool_object, &ctl_pool_object.cmds[3]);
			return CTL_USAGE;
		}
		if (ret)
			return ret;
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!req.owner.container_id[0])
		return ctl_error(CTL_USAGE, "pool allocate needs --owner CONTAINER_ID");
	/* ibvfd's own records' owners (api.h): refused by pool.allocate, and offline too */
	if (ibvf_owner_reserved(req.owner.container_id))
		return ctl_error(CTL_USAGE,
				 "container ID '%.64s' starts with a prefix ibvfd reserves for its "
				 "own records (" IBVF_OWNER_WARM_PREFIX
				 ", " IBVF_OWNER_ADOPTED_PREFIX ")",
				 req.owner.container_id);
	ret = ctl_load_config(ctx);
	if (ret)
		return ret;
	for (size_t i = 0; i < req.n_pkeys; i++)
		if (ibvf_pkey_check_tenant(pkeys[i], ctx->cfg.allow_default_pkey, err, sizeof(err)))
			return ctl_error(CTL_USAGE, "%s", err);
	req.pkeys = pkeys;
	/* ibvfd running: it allocates (its store, its lock); else the store directly */
	ret = daemon_allocate(ctx, &req, &a);
	if (ret == -ENOTCONN)
		ret = ctl_offline_allocate(ctx, &req, &a);
	if (ret)
		return ret;
	ctl_emit_object(ctx, alloc_json(&a), alloc_fields);
	return CTL_OK;
}

/* ----------------------------------------------------------- release -- */

static int pool_release(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct ctl_col cols[] = {
		{"guid", "GUID:"},
		{"released", "Released:"},
		{"result", "Result:"},
		{0},
	};
	bool released = false, quarantined = false, pending = false;
	json_t *params, *r = NULL;
	uint64_t g;
	int code;
	int ret = one_guid_arg(ctx, argc, argv, 4, &g);

	if (ret)
		return ret < 0 ? CTL_OK : ret;
	params = json_pack("{s:o}", "guid", guid_str(g));
	ret = ctl_daemon_call_code(ctx, "pool.release", params, &r, true, &code);
	json_decref(params);
	if (ret == CTL_OK) {
		/* ibvfd walked the attachment back, if any: SM, VF, quarantine */
		released = json_is_true(json_object_get(r, "released"));
		quarantined = json_is_true(json_object_get(r, "quarantined"));
		pending = json_is_true(json_object_get(r, "sm_removal_pending"));
		json_decref(r);
	} else if (ret == -ENOTCONN) {
		ret = ctl_offline_release(ctx, g, &released);
		if (ret)
			return ret;
		quarantined = ctx->cfg.pool.quarantine_s != 0;
	} else {
		return api_exit(ret, code);
	}
	ctl_emit_object(ctx,
			json_pack("{s:o,s:b,s:s}", "guid", guid_str(g), "released", released,
				  "result",
				  !released	? "was not held (nothing to do)"
				  : pending	? "released; the SM removal is pending (retried by "
						  "ibvfd's reconciliation)"
				  : quarantined ? "released into quarantine"
						: "released (no quarantine)"),
			cols);
	return CTL_OK;
}

/* ------------------------------------------------------------- audit -- */

static int pool_audit(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {{"fix", no_argument, NULL, 'f'}, {0}};
	static const struct ctl_col cols[] = {
		{"severity", "SEVERITY"},
		{"kind", "KIND"},
		{"guid", "GUID"},
		{"detail", "DETAIL"},
		{0},
	};
	bool fix = false;
	json_t *rows;
	int c, ret, problems;

	while ((c = ctl_getopt(ctx, argc, argv, "", opts)) != -1) {
		if (c == 'f') {
			fix = true;
			continue;
		}
		ctl_cmd_usage(c == 'h' ? stdout : stderr, &ctl_pool_object,
			      &ctl_pool_object.cmds[5]);
		return c == 'h' ? CTL_OK : CTL_USAGE;
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	/* a running ibvfd checks store, VFs and SM together (reconciliation pass) */
	{
		json_t *r = NULL, *params = json_pack("{s:b}", "fix", fix);

		ret = ctl_daemon_call(ctx, "audit", params, &r, true);
		json_decref(params);
		if (ret == CTL_OK) {
			problems = (int)json_integer_value(json_object_get(r, "problems"));
			ctl_emit_findings(ctx, json_incref(json_object_get(r, "findings")));
			json_decref(r);
			return problems ? CTL_PROBLEMS : CTL_OK;
		}
		if (ret != -ENOTCONN)
			return ret;
	}
	/* no daemon: no engine either; the store, VFs and SM read from here */
	ret = ctl_offline_audit(ctx, fix, &rows, &problems);
	if (ret)
		return ret;
	if (!ctx->json && json_array_size(rows) == 0) {
		json_decref(rows);
		printf("audit clean: no findings\n");
		return CTL_OK;
	}
	ctl_emit_table(ctx, rows, cols);
	return problems ? CTL_PROBLEMS : CTL_OK;
}

/* ----------------------------------------------------------- rebuild -- */

static int pool_rebuild(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {{0}};
	static const struct ctl_col cols[] = {
		{"guid", "GUID"}, {"pci", "VF"}, {"pkeys", "PKEYS"}, {"owner", "OWNER"}, {0},
	};
	json_t *rows, *r = NULL, *params;
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "", opts)) != -1) {
		ctl_cmd_usage(c == 'h' ? stdout : stderr, &ctl_pool_object,
			      &ctl_pool_object.cmds[6]);
		return c == 'h' ? CTL_OK : CTL_USAGE;
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	/* ibvfd holds the store: the rebuild needs it stopped */
	params = json_object();
	ret = ctl_daemon_call(ctx, "status", params, &r, true);
	json_decref(params);
	json_decref(r);
	if (ret == CTL_OK)
		return ctl_error(CTL_FAILED, "ibvfd is running and holds the store: stop it, run "
					     "'ibvfctl pool rebuild', then start it again");
	if (ret != -ENOTCONN)
		return ret;
	ret = ctl_offline_rebuild(ctx, &rows);
	if (ret)
		return ret;
	if (!ctx->json && json_array_size(rows) == 0) {
		json_decref(rows);
		printf("nothing in use to adopt; store rebuilt\n");
		return CTL_OK;
	}
	ctl_emit_table(ctx, rows, cols);
	return CTL_OK;
}

static const struct ctl_cmd pool_cmds[] = {
	{"status", pool_status, "", "ranges and counts: total, allocated, quarantined, free"},
	{"list", pool_list, "[--owner TEXT] [--pkey PKEY] [--all]",
	 "allocations (--all adds quarantined ones)"},
	{"show", pool_show, "GUID", "one allocation record"},
	{"allocate", pool_allocate,
	 "--owner CONTAINER_ID [--ifname IF] [--pod NS/NAME] [--pod-uid UID] [--network NAME] "
	 "[--guid GUID] [--pkey PKEY]...",
	 "allocate a GUID (admins and tests; ibvfd does this on CNI ADD)"},
	{"release", pool_release, "GUID", "release a GUID into quarantine"},
	{"audit", pool_audit, "[--fix]",
	 "store checks: GUIDs outside ranges, duplicate owners, leaked or double-free GUIDs, "
	 "expired quarantine (--fix frees it)"},
	{"rebuild", pool_rebuild, "",
	 "after a lost or damaged store (ibvfd stopped): adopt every GUID of the ranges the VFs "
	 "or the SM show in use, then allocate again"},
	{0},
};

const struct ctl_object ctl_pool_object = {
	.name = "pool",
	.help = "the persistent GUID pool",
	.cmds = pool_cmds,
};
