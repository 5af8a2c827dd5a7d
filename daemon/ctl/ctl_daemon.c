// SPDX-License-Identifier: MIT
/*
 * ibvfctl daemon: talk to a running ibvfd over its local API
 * (include/ibvf/api.h): status, list, prepare/commit/release by hand, gc,
 * audit. Exit codes: 0 ok, 1 problems (audit), 2 usage, 3 failed.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "api_client.h"
#include "ctl.h"
#include "err.h"

#define CTL_API_TIMEOUT_MS 90000 /* > the daemon's 60 s prepare deadline */

int ctl_daemon_call_code(struct ctl_ctx *ctx, const char *method, json_t *params, json_t **result,
			 bool quiet_if_down, int *rpc_code)
{
	struct ibvf_rpc_error re = {0};
	char err[IBVF_ERR_LEN];
	int ret = ctl_load_config(ctx);

	*result = NULL;
	if (rpc_code)
		*rpc_code = 0;
	if (ret)
		return ret;
	ret = ibvf_api_call(ctx->cfg.api.socket, method, params, CTL_API_TIMEOUT_MS, result, &re,
			    err, sizeof(err));
	if (!ret)
		return CTL_OK;
	/* no socket file, or a stale one with no listener: ibvfd is not running */
	if ((ret == -ENOENT || ret == -ECONNREFUSED) && quiet_if_down)
		return -ENOTCONN;
	if (ret == -EREMOTEIO) {
		if (rpc_code)
			*rpc_code = re.code;
		return ctl_error(CTL_FAILED, "%s%s%s%s", re.message, re.step[0] ? " (step " : "",
				 re.step, re.step[0] ? ")" : "");
	}
	return ctl_error(CTL_FAILED, "%s", err);
}

int ctl_daemon_call(struct ctl_ctx *ctx, const char *method, json_t *params, json_t **result,
		    bool quiet_if_down)
{
	return ctl_daemon_call_code(ctx, method, params, result, quiet_if_down, NULL);
}

static const char *str_or(const char *s, const char *dflt)
{
	return s ? s : dflt;
}

static int usage_of(int c, int idx)
{
	ctl_cmd_usage(c == 'h' ? stdout : stderr, &ctl_daemon_object, &ctl_daemon_object.cmds[idx]);
	return c == 'h' ? -1 : CTL_USAGE;
}

/* ------------------------------------------------------------ status -- */

/* status's not_ready list as "check: reason; ...", or "-" */
static json_t *not_ready_text(json_t *list)
{
	char buf[2048] = "";
	size_t o = 0, i;
	json_t *it;

	json_array_foreach(list, i, it)
	{
		int n = snprintf(buf + o, sizeof(buf) - o, "%s%s: %s", i ? "; " : "",
				 str_or(json_string_value(json_object_get(it, "check")), "?"),
				 str_or(json_string_value(json_object_get(it, "reason")), ""));

		if (n < 0 || (size_t)n >= sizeof(buf) - o)
			break;
		o += (size_t)n;
	}
	return json_string(o ? buf : "-");
}

/* status's "warm" object as one line: "off", or "N ready, M warming". */
static json_t *warm_text(json_t *w)
{
	char buf[96];

	if (!json_is_true(json_object_get(w, "enabled")))
		return json_string("off");
	snprintf(buf, sizeof(buf), "%lld ready, %lld warming",
		 (long long)json_integer_value(json_object_get(w, "ready")),
		 (long long)json_integer_value(json_object_get(w, "warming")));
	return json_string(buf);
}

static int daemon_status(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct ctl_col cols[] = {
		{"ready", "Ready:"},
		{"not_ready", "Not ready:"},
		{"version", "Version:"},
		{"backend_name", "SM backend:"},
		{"backend_ok", "SM validated:"},
		{"backend_desc", "SM:"},
		{"backend_error", "SM error:"},
		{"total", "GUIDs total:"},
		{"allocated", "Allocated:"},
		{"quarantined", "Quarantined:"},
		{"free", "Free:"},
		{"inflight", "Requests in flight:"},
		{"warm", "Warm VFs:"},
		{"sm_calls", "SM calls:"},
		{0},
	};
	json_t *r, *b, *p, *sm, *o;
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "", NULL)) != -1)
		return (ret = usage_of(c, 0)) < 0 ? CTL_OK : ret;
	if (optind != argc)
		return ctl_error(CTL_USAGE, "daemon status takes no arguments");
	ret = ctl_daemon_call(ctx, "status", NULL, &r, false);
	if (ret)
		return ret;
	if (ctx->json) {
		ctl_emit_object(ctx, r, cols);
		return CTL_OK;
	}
	b = json_object_get(r, "backend");
	p = json_object_get(r, "pool");
	sm = json_object_get(r, "sm");
	o = json_pack("{s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:I}", "ready",
		      json_object_get(r, "ready"), "version", json_object_get(r, "version"),
		      "backend_name", json_object_get(b, "name"), "backend_ok",
		      json_object_get(b, "ok"), "backend_desc", json_object_get(b, "description"),
		      "backend_error", json_object_get(b, "error"), "total",
		      json_object_get(p, "total"), "allocated", json_object_get(p, "allocated"),
		      "quarantined", json_object_get(p, "quarantined"), "free",
		      json_object_get(p, "free"), "inflight", json_object_get(r, "inflight"),
		      "sm_calls",
		      (json_int_t)(json_integer_value(json_object_get(sm, "add_calls")) +
				   json_integer_value(json_object_get(sm, "remove_calls"))));
	json_object_set_new(o, "not_ready", not_ready_text(json_object_get(r, "not_ready")));
	json_object_set_new(o, "warm", warm_text(json_object_get(r, "warm")));
	json_decref(r);
	ctl_emit_object(ctx, o, cols);
	return CTL_OK;
}

/* -------------------------------------------------------------- list -- */

static int daemon_list(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {{"network", required_argument, NULL, 'n'}, {0}};
	static const struct ctl_col cols[] = {
		{"guid", "GUID"},
		{"state", "STATE"},
		{"container", "CONTAINER"},
		{"ifname", "IF"},
		{"pod", "POD"},
		{"pf", "PF"},
		{"vf_index", "VF"},
		{"pci", "PCI"},
		{"pkeys", "PKEYS"},
		{0},
	};
	json_t *params = json_object(), *r, *rows, *it;
	size_t i;
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "n:", opts)) != -1) {
		if (c == 'n') {
			json_object_set_new(params, "network", json_string(optarg));
			continue;
		}
		json_decref(params);
		return (ret = usage_of(c, 1)) < 0 ? CTL_OK : ret;
	}
	if (optind != argc) {
		json_decref(params);
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	}
	ret = ctl_daemon_call(ctx, "list", params, &r, false);
	json_decref(params);
	if (ret)
		return ret;
	rows = json_array();
	json_array_foreach(json_object_get(r, "owners"), i, it)
	{
		json_t *ow = json_object_get(it, "owner"), *pk = json_array(), *p;
		char cid[13], pod[320];
		size_t k;

		snprintf(cid, sizeof(cid), "%s",
			 str_or(json_string_value(json_object_get(ow, "container_id")), ""));
		snprintf(pod, sizeof(pod), "%s/%s",
			 str_or(json_string_value(json_object_get(ow, "pod_namespace")), ""),
			 str_or(json_string_value(json_object_get(ow, "pod_name")), ""));
		json_array_foreach(json_object_get(it, "pkeys"), k, p)
			json_array_append(pk, json_object_get(p, "pkey"));
		json_array_append_new(rows,
				      json_pack("{s:O,s:O,s:s,s:O,s:s,s:O,s:O,s:O,s:o}", "guid",
						json_object_get(it, "guid"), "state",
						json_object_get(it, "state"), "container", cid,
						"ifname", json_object_get(ow, "ifname"), "pod", pod,
						"pf", json_object_get(it, "pf"), "vf_index",
						json_object_get(it, "vf_index"), "pci",
						json_object_get(it, "pci"), "pkeys", pk));
	}
	json_decref(r);
	ctl_emit_table(ctx, rows, cols);
	return CTL_OK;
}

/* ---------------------------------------------- prepare/commit/release -- */

/*
 * --pci, --guid, --link-state of prepare: checked here with the validators
 * ibvfd uses (<ibvf/types.h>) and sent in their normalised spelling.
 * Return: 0, or CTL_USAGE after the message.
 */
static int prepare_arg(json_t *params, int c, const char *v)
{
	char e[IBVF_ERR_LEN], b[32]; /* >= IBVF_GUID_STR_LEN, IBVF_PCI_ADDR_LEN */
	enum ibvf_vf_link_state ls;
	uint64_t g;

	switch (c) {
	case 'd':
		if (ibvf_pci_addr_parse(v, b, e, sizeof(e)))
			return ctl_error(CTL_USAGE, "--pci: %s", e);
		json_object_set_new(params, "pci", json_string(b));
		return 0;
	case 'g':
		if (ibvf_guid_parse(v, &g, e, sizeof(e)))
			return ctl_error(CTL_USAGE, "--guid: %s", e);
		if (!ibvf_guid_is_assignable(g))
			return ctl_error(CTL_USAGE, "--guid %s is 0 or all-ones (not assignable)",
					 v);
		json_object_set_new(params, "guid", json_string(ibvf_guid_format(g, b)));
		return 0;
	default:
		if (ibvf_vf_link_state_parse(v, &ls, e, sizeof(e)))
			return ctl_error(CTL_USAGE, "--link-state: %s", e);
		json_object_set_new(params, "link_state", json_string(ibvf_vf_link_state_name(ls)));
		return 0;
	}
}

/*
 * The --pkey values with --limited (or not) as the prepare "pkeys" array. The
 * default partition passes here; ibvfd applies its allow_default_pkey.
 */
static json_t *prepare_pkeys(json_t *pkeys, bool limited, int *rc)
{
	json_t *arr = json_array(), *p;
	char e[IBVF_ERR_LEN], b[8];
	size_t i;
	uint16_t v;

	json_array_foreach(pkeys, i, p)
	{
		if (ibvf_pkey_member_parse(json_string_value(p), limited ? "limited" : NULL, true,
					   &v, e, sizeof(e))) {
			*rc = ctl_error(CTL_USAGE, "--pkey: %s", e);
			json_decref(arr);
			return NULL;
		}
		snprintf(b, sizeof(b), "0x%04x", ibvf_pkey_key(v));
		json_array_append_new(arr, json_pack("{s:s,s:s}", "pkey", b, "membership",
						     ibvf_pkey_is_full(v) ? "full" : "limited"));
	}
	return arr;
}

static json_t *owner_opts(struct ctl_ctx *ctx, int argc, char **argv, int idx, bool prepare,
			  int *rc)
{
	static const struct option opts[] = {
		{"owner", required_argument, NULL, 'o'},
		{"ifname", required_argument, NULL, 'i'},
		{"pod", required_argument, NULL, 'P'},
		{"network", required_argument, NULL, 'n'},
		{"pci", required_argument, NULL, 'd'},
		{"pkey", required_argument, NULL, 'p'},
		{"limited", no_argument, NULL, 'l'},
		{"guid", required_argument, NULL, 'g'},
		{"link-state", required_argument, NULL, 's'},
		{0},
	};
	json_t *owner = json_pack("{s:s}", "ifname", "net1"), *params = json_object(),
	       *pkeys = json_array();
	bool limited = false;
	int c;

	*rc = CTL_OK;
	while ((c = ctl_getopt(ctx, argc, argv, "o:i:d:p:lg:s:", opts)) != -1) {
		switch (c) {
		case 'o':
			json_object_set_new(owner, "container_id", json_string(optarg));
			break;
		case 'i':
			json_object_set_new(owner, "ifname", json_string(optarg));
			break;
		case 'P': {
			char *slash = strchr(optarg, '/');

			if (slash) {
				json_object_set_new(owner, "pod_namespace",
						    json_stringn(optarg, (size_t)(slash - optarg)));
				json_object_set_new(owner, "pod_name", json_string(slash + 1));
			} else {
				json_object_set_new(owner, "pod_name", json_string(optarg));
			}
			break;
		}
		case 'n':
			json_object_set_new(owner, "network", json_string(optarg));
			break;
		case 'd':
		case 'g':
		case 's':
			*rc = prepare_arg(params, c, optarg);
			if (*rc)
				goto fail;
			break;
		case 'p':
			json_array_append_new(pkeys, json_string(optarg));
			break;
		case 'l':
			limited = true;
			break;
		default:
			*rc = usage_of(c, idx);
			goto fail;
		}
	}
	if (optind != argc) {
		*rc = ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
		goto fail;
	}
	if (!json_object_get(owner, "container_id")) {
		*rc = ctl_error(CTL_USAGE, "--owner CONTAINER_ID is required");
		goto fail;
	}
	if (prepare) {
		json_t *arr;

		if (!json_object_get(params, "pci") || !json_array_size(pkeys)) {
			*rc = ctl_error(CTL_USAGE, "prepare needs --pci ADDRESS and --pkey PKEY");
			goto fail;
		}
		arr = prepare_pkeys(pkeys, limited, rc);
		if (!arr)
			goto fail;
		json_object_set_new(params, "pkeys", arr);
	} else if (json_object_size(params) || json_array_size(pkeys)) {
		*rc = ctl_error(CTL_USAGE, "--pci/--pkey/--guid/--link-state are for prepare");
		goto fail;
	}
	json_object_set_new(params, "owner", owner);
	json_decref(pkeys);
	return params;
fail:
	json_decref(owner);
	json_decref(params);
	json_decref(pkeys);
	return NULL;
}

static const struct ctl_col prepare_cols[] = {
	{"guid", "GUID:"},
	{"state", "State:"},
	{"pf", "PF:"},
	{"vf_index", "VF:"},
	{"pci", "PCI:"},
	{"netdev", "Netdev:"},
	{"rdma_dev", "RDMA device:"},
	{"lid", "LID:"},
	{"sm_lid", "SM LID:"},
	{"port_state", "Port:"},
	{"pkeys", "PKeys (index):"},
	{0},
};
static const struct ctl_col commit_cols[] = {{"guid", "GUID:"}, {"state", "State:"}, {0}};
static const struct ctl_col release_cols[] = {
	{"released", "Released:"},
	{"guid", "GUID:"},
	{"sm_removal_pending", "SM removal pending:"},
	{0},
};

static int owner_cmd(struct ctl_ctx *ctx, int argc, char **argv, const char *method, int idx,
		     const struct ctl_col *cols)
{
	json_t *params, *r;
	int rc;

	params = owner_opts(ctx, argc, argv, idx, !strcmp(method, "prepare"), &rc);
	if (!params)
		return rc < 0 ? CTL_OK : rc;
	rc = ctl_daemon_call(ctx, method, params, &r, false);
	json_decref(params);
	if (rc)
		return rc;
	if (!ctx->json && json_is_array(json_object_get(r, "pkeys"))) {
		json_t *txt = json_array(), *p;
		size_t i;

		json_array_foreach(json_object_get(r, "pkeys"), i, p)
		{
			char b[64];

			snprintf(b, sizeof(b), "%s %s (%lld)",
				 str_or(json_string_value(json_object_get(p, "pkey")), "?"),
				 str_or(json_string_value(json_object_get(p, "membership")), "?"),
				 (long long)json_integer_value(json_object_get(p, "index")));
			json_array_append_new(txt, json_string(b));
		}
		json_object_set_new(r, "pkeys", txt);
	}
	ctl_emit_object(ctx, r, cols);
	return CTL_OK;
}

static int daemon_prepare(struct ctl_ctx *ctx, int argc, char **argv)
{
	return owner_cmd(ctx, argc, argv, "prepare", 2, prepare_cols);
}

static int daemon_commit(struct ctl_ctx *ctx, int argc, char **argv)
{
	return owner_cmd(ctx, argc, argv, "commit", 3, commit_cols);
}

static int daemon_release(struct ctl_ctx *ctx, int argc, char **argv)
{
	return owner_cmd(ctx, argc, argv, "release", 4, release_cols);
}

/* ---------------------------------------------------------------- gc -- */

static int daemon_gc(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"network", required_argument, NULL, 'n'},
		{"valid", required_argument, NULL, 'k'},
		{0},
	};
	json_t *params = json_pack("{s:[]}", "valid"), *r;
	int c, ret;

	while ((c = ctl_getopt(ctx, argc, argv, "n:k:", opts)) != -1) {
		if (c == 'n') {
			json_object_set_new(params, "network", json_string(optarg));
		} else if (c == 'k') {
			char *slash = strchr(optarg, '/');

			if (!slash) {
				json_decref(params);
				return ctl_error(CTL_USAGE, "--valid takes CONTAINER_ID/IFNAME");
			}
			json_array_append_new(json_object_get(params, "valid"),
					      json_pack("{s:s%,s:s}", "container_id", optarg,
							(size_t)(slash - optarg), "ifname",
							slash + 1));
		} else {
			json_decref(params);
			return (ret = usage_of(c, 5)) < 0 ? CTL_OK : ret;
		}
	}
	if (optind != argc) {
		json_decref(params);
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	}
	static const struct ctl_col gc_cols[] = {
		{"released", "Released:"}, {"skipped_busy", "Skipped (busy):"}, {0}};

	ret = ctl_daemon_call(ctx, "gc", params, &r, false);
	json_decref(params);
	if (ret)
		return ret;
	ctl_emit_object(ctx, r, gc_cols);
	return CTL_OK;
}

/* ------------------------------------------------------------- audit -- */

int ctl_emit_findings(struct ctl_ctx *ctx, json_t *findings)
{
	static const struct ctl_col cols[] = {
		{"severity", "SEVERITY"}, {"kind", "KIND"},	{"guid", "GUID"},
		{"pkey", "PKEY"},	  {"pci", "VF"},	{"fixed", "FIXED"},
		{"fix", "FIX (--fix)"},	  {"detail", "DETAIL"}, {0},
	};

	if (!ctx->json && json_array_size(findings) == 0) {
		json_decref(findings);
		printf("audit clean: no findings\n");
		return CTL_OK;
	}
	ctl_emit_table(ctx, findings, cols);
	return CTL_OK;
}

static int daemon_audit(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {{"fix", no_argument, NULL, 'f'}, {0}};
	bool fix = false;
	json_t *r, *params;
	int c, ret, problems;

	while ((c = ctl_getopt(ctx, argc, argv, "", opts)) != -1) {
		if (c == 'f') {
			fix = true;
			continue;
		}
		return (ret = usage_of(c, 6)) < 0 ? CTL_OK : ret;
	}
	params = json_pack("{s:b}", "fix", fix);
	ret = ctl_daemon_call(ctx, "audit", params, &r, false);
	json_decref(params);
	if (ret)
		return ret;
	problems = (int)json_integer_value(json_object_get(r, "problems"));
	ctl_emit_findings(ctx, json_incref(json_object_get(r, "findings")));
	json_decref(r);
	return problems ? CTL_PROBLEMS : CTL_OK;
}

static const struct ctl_cmd daemon_cmds[] = {
	{"status", daemon_status, "", "readiness, SM backend, pool counts, SM call counters"},
	{"list", daemon_list, "[--network NAME]", "attachments the daemon holds"},
	{"prepare", daemon_prepare,
	 "--owner CONTAINER_ID [--ifname IF] [--pod NS/NAME] [--network NAME] --pci ADDRESS "
	 "--pkey PKEY... [--limited] [--guid GUID] [--link-state auto|enable|disable]",
	 "attach a VF by hand (GUID, VF programming, SM membership, port wait)"},
	{"commit", daemon_commit, "--owner CONTAINER_ID [--ifname IF]",
	 "mark a prepared attachment as handed over"},
	{"release", daemon_release, "--owner CONTAINER_ID [--ifname IF]",
	 "detach: SM removal, VF GUID reset, GUID into quarantine (idempotent)"},
	{"gc", daemon_gc, "[--network NAME] [--valid CONTAINER_ID/IFNAME]...",
	 "release every attachment (of NAME) not listed as valid (CNI GC)"},
	{"audit", daemon_audit, "[--fix]",
	 "reconcile store, VFs and SM now and report (same as pool audit with a daemon)"},
	{0},
};

const struct ctl_object ctl_daemon_object = {
	.name = "daemon",
	.help = "the running ibvfd, over its local API",
	.cmds = daemon_cmds,
};
