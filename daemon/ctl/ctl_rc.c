// SPDX-License-Identifier: MIT
/* ibvfctl rc-check: the RC QP ping-pong check of one RDMA port (daemon/rdma/rc_check.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/types.h>

#include "ctl.h"
#include "err.h"
#include "rc_check.h"

static const struct ctl_cmd rc_cmds[];

static int rc_usage(FILE *f, int code)
{
	ctl_cmd_usage(f, &ctl_rc_object, &rc_cmds[0]);
	return code;
}

/* Strict unsigned parse: decimal or 0x hex, whole string, within [min, max]. */
static int parse_num(const char *opt, const char *s, unsigned long long min, unsigned long long max,
		     unsigned long long *out)
{
	char *end;

	errno = 0;
	if (!*s || *s == '-' || *s == '+')
		goto bad;
	*out = strtoull(s, &end, 0);
	if (errno || *end || *out < min || *out > max)
		goto bad;
	return 0;
bad:
	/* a constant, so the compiler sees that 0 always comes with *out set */
	ctl_error(CTL_USAGE, "%s '%s': expected a number in %llu..%llu", opt, s, min, max);
	return CTL_USAGE;
}

/* "DEV" or "DEV:PORT". */
static int parse_target(const char *s, char *dev, size_t devlen, uint8_t *port)
{
	const char *colon = strrchr(s, ':');
	unsigned long long p;
	size_t n = colon ? (size_t)(colon - s) : strlen(s);

	if (!n || n >= devlen)
		return ctl_error(CTL_USAGE, "device '%s': expected DEV or DEV:PORT", s);
	memcpy(dev, s, n);
	dev[n] = 0;
	*port = 1;
	if (colon) {
		if (parse_num("port", colon + 1, 1, 255, &p))
			return CTL_USAGE;
		*port = (uint8_t)p;
	}
	return CTL_OK;
}

static json_t *num_or_null(bool valid, json_t *v)
{
	if (valid)
		return v;
	json_decref(v);
	return json_null();
}

static json_t *pkey_json(bool valid, uint16_t pkey)
{
	char s[8];

	snprintf(s, sizeof(s), "0x%04x", pkey);
	return valid ? json_string(s) : json_null();
}

static json_t *result_json(const struct ibvf_rc_opts *o, const struct ibvf_rc_result *r,
			   const char *err)
{
	bool ran = r->iterations > 0, pk = r->pkey_index >= 0;
	json_t *j = json_object();

	json_object_set_new(j, "status", json_string(ibvf_rc_status_name(r->status)));
	json_object_set_new(j, "device", ctl_json_text(r->dev));
	json_object_set_new(j, "port", json_integer(r->port));
	json_object_set_new(j, "netns", o->netns ? ctl_json_text(o->netns) : json_null());
	json_object_set_new(j, "link_layer",
			    json_string(r->mtu ? (r->ethernet ? "Ethernet" : "InfiniBand") : ""));
	json_object_set_new(j, "lid", num_or_null(r->mtu && !r->ethernet, json_integer(r->lid)));
	json_object_set_new(j, "pkey", pkey_json(pk, r->pkey));
	json_object_set_new(j, "pkey_index", num_or_null(pk, json_integer(r->pkey_index)));
	json_object_set_new(j, "peer_pkey", pkey_json(pk, r->peer_pkey));
	json_object_set_new(j, "peer_pkey_index",
			    num_or_null(pk, json_integer(r->peer_pkey_index)));
	/* RoCE port without SM-managed P_Keys: the default P_Key was checked */
	json_object_set_new(j, "pkey_roce_default", json_boolean(r->pkey_roce_default));
	json_object_set_new(j, "gid_index",
			    num_or_null(r->gid_index >= 0, json_integer(r->gid_index)));
	json_object_set_new(j, "gid", json_string(r->gid));
	json_object_set_new(j, "gid_netdev", json_string(r->gid_netdev));
	json_object_set_new(j, "mtu", num_or_null(r->mtu, json_integer(r->mtu)));
	json_object_set_new(j, "msg_size", json_integer((json_int_t)r->msg_size));
	json_object_set_new(j, "mr_bytes",
			    num_or_null(r->mr_bytes, json_integer((json_int_t)r->mr_bytes)));
	json_object_set_new(j, "iterations", json_integer(r->iterations));
	json_object_set_new(j, "min_us", num_or_null(ran, json_real(r->min_us)));
	json_object_set_new(j, "p50_us", num_or_null(ran, json_real(r->p50_us)));
	json_object_set_new(j, "p99_us", num_or_null(ran, json_real(r->p99_us)));
	json_object_set_new(j, "max_us", num_or_null(ran, json_real(r->max_us)));
	json_object_set_new(j, "avg_us", num_or_null(ran, json_real(r->avg_us)));
	json_object_set_new(j, "p99_max_us",
			    num_or_null(o->p99_max_us > 0, json_real(o->p99_max_us)));
	json_object_set_new(j, "elapsed_ms", json_real(r->elapsed_ms));
	json_object_set_new(j, "verb", json_string(r->verb));
	json_object_set_new(j, "errno", json_integer(r->error_errno));
	json_object_set_new(j, "error", ctl_json_text(err));
	return j;
}

static const struct ctl_col rc_fields[] = {
	{"status", "Status:"},
	{"device", "Device:"},
	{"port", "Port:"},
	{"netns", "Netns:"},
	{"link_layer", "Link layer:"},
	{"lid", "LID:"},
	{"pkey", "PKey:"},
	{"pkey_index", "PKey index:"},
	{"peer_pkey", "Peer PKey:"},
	{"peer_pkey_index", "Peer PKey index:"},
	{"pkey_roce_default", "RoCE default PKey:"},
	{"gid_index", "GID index:"},
	{"gid", "GID:"},
	{"gid_netdev", "GID netdev:"},
	{"mtu", "Path MTU:"},
	{"msg_size", "Message size:"},
	{"mr_bytes", "Registered bytes:"},
	{"iterations", "Round trips:"},
	{"min_us", "Min (us):"},
	{"p50_us", "p50 (us):"},
	{"p99_us", "p99 (us):"},
	{"max_us", "Max (us):"},
	{"avg_us", "Avg (us):"},
	{"p99_max_us", "p99 bound (us):"},
	{"elapsed_ms", "Elapsed (ms):"},
	{"verb", "Failed at:"},
	{"errno", "Errno:"},
	{"error", "Error:"},
	{0},
};

static int exit_code(enum ibvf_rc_status s)
{
	switch (s) {
	case IBVF_RC_PASS:
		return CTL_OK;
	case IBVF_RC_FAIL:
	case IBVF_RC_SLOW:
	case IBVF_RC_NOT_CHECKABLE:
		return CTL_PROBLEMS;
	case IBVF_RC_INVALID:
		return CTL_USAGE;
	case IBVF_RC_ERROR:
		break;
	}
	return CTL_FAILED;
}

enum {
	OPT_FULL = 256,
	OPT_LIMITED,
	OPT_WARMUP,
	OPT_GID,
	OPT_TIMEOUT,
	OPT_OP_TIMEOUT,
	OPT_P99,
	OPT_ROCE_DEFAULT,
	OPT_MR,
	OPT_SPIN,
};

static int rc_option(int c, struct ibvf_rc_opts *o, int *member, bool *have_pkey)
{
	char err[IBVF_ERR_LEN];
	unsigned long long v;
	char *end;

	switch (c) {
	case 'p':
		if (ibvf_pkey_parse(optarg, &o->pkey, err, sizeof(err)))
			return ctl_error(CTL_USAGE, "%s", err);
		*have_pkey = true;
		return CTL_OK;
	case OPT_FULL:
	case OPT_LIMITED:
		*member = c;
		return CTL_OK;
	case 'n':
		if (parse_num("--iterations", optarg, 1, IBVF_RC_MAX_ITERATIONS, &v))
			return CTL_USAGE;
		o->iterations = (unsigned int)v;
		return CTL_OK;
	case 's':
		if (parse_num("--size", optarg, 1, IBVF_RC_MAX_MSG_SIZE, &v))
			return CTL_USAGE;
		o->msg_size = (size_t)v;
		return CTL_OK;
	case OPT_WARMUP:
		if (parse_num("--warmup", optarg, 0, IBVF_RC_MAX_ITERATIONS, &v))
			return CTL_USAGE;
		o->warmup = (unsigned int)v;
		return CTL_OK;
	case 'g':
	case OPT_GID:
		if (parse_num("--gid-index", optarg, 0, INT_MAX, &v))
			return CTL_USAGE;
		o->gid_index = (int)v;
		return CTL_OK;
	case OPT_TIMEOUT:
	case OPT_OP_TIMEOUT:
		if (parse_num(c == OPT_TIMEOUT ? "--timeout" : "--op-timeout", optarg, 1,
			      IBVF_RC_MAX_TIMEOUT_MS, &v))
			return CTL_USAGE;
		*(c == OPT_TIMEOUT ? &o->timeout_ms : &o->op_timeout_ms) = (unsigned int)v;
		return CTL_OK;
	case OPT_SPIN:
		if (parse_num("--spin", optarg, 0, IBVF_RC_MAX_SPIN_US, &v))
			return CTL_USAGE;
		o->spin_us = (unsigned int)v;
		return CTL_OK;
	case OPT_MR:
		if (parse_num("--mr-size", optarg, 0, IBVF_RC_MAX_MR_BYTES, &v))
			return CTL_USAGE;
		o->mr_bytes = (size_t)v;
		return CTL_OK;
	case OPT_P99:
		o->p99_max_us = strtod(optarg, &end);
		if (*end || end == optarg || !(o->p99_max_us > 0) || o->p99_max_us > 1e9)
			return ctl_error(CTL_USAGE, "--p99-max '%s': expected microseconds > 0",
					 optarg);
		return CTL_OK;
	case 'N':
		o->netns = optarg;
		return CTL_OK;
	case OPT_ROCE_DEFAULT:
		o->roce_default_pkey = true;
		return CTL_OK;
	case 'h':
		return rc_usage(stdout, -1);
	}
	return rc_usage(stderr, CTL_USAGE);
}

static int rc_run(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"pkey", required_argument, NULL, 'p'},
		{"full", no_argument, NULL, OPT_FULL},
		{"limited", no_argument, NULL, OPT_LIMITED},
		{"iterations", required_argument, NULL, 'n'},
		{"size", required_argument, NULL, 's'},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"gid-index", required_argument, NULL, OPT_GID},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"op-timeout", required_argument, NULL, OPT_OP_TIMEOUT},
		{"spin", required_argument, NULL, OPT_SPIN},
		{"mr-size", required_argument, NULL, OPT_MR},
		{"p99-max", required_argument, NULL, OPT_P99},
		{"netns", required_argument, NULL, 'N'},
		{"roce-default-pkey", no_argument, NULL, OPT_ROCE_DEFAULT},
		{0},
	};
	struct ibvf_rc_opts o;
	struct ibvf_rc_result res;
	char dev[IBVF_RC_DEV_LEN], err[IBVF_ERR_LEN] = "";
	const char *target = NULL;
	bool have_pkey = false;
	int c, ret, member = 0;

	ibvf_rc_opts_init(&o);
	/* options may come before and after DEV[:PORT] */
	while (optind < argc) {
		c = ctl_getopt(ctx, argc, argv, "p:n:s:g:", opts);
		if (c == -1) {
			if (optind >= argc)
				break;
			if (target)
				return ctl_error(CTL_USAGE, "unexpected argument '%s'",
						 argv[optind]);
			target = argv[optind++];
			continue;
		}
		ret = rc_option(c, &o, &member, &have_pkey);
		if (ret)
			return ret < 0 ? CTL_OK : ret;
	}
	if (!target) {
		ctl_error(CTL_USAGE, "rc-check needs a device: DEV[:PORT]");
		return rc_usage(stderr, CTL_USAGE);
	}
	if (parse_target(target, dev, sizeof(dev), &o.port))
		return CTL_USAGE;
	if (member && !have_pkey)
		return ctl_error(CTL_USAGE, "--full/--limited need --pkey");
	if (member == OPT_FULL)
		o.pkey |= IBVF_PKEY_FULL_BIT;
	else if (member == OPT_LIMITED)
		o.pkey &= IBVF_PKEY_KEY_MASK;
	o.dev = dev;
	o.use_pkey = have_pkey;
	ret = ibvf_rc_check(&o, &res, err, sizeof(err));
	if (res.status == IBVF_RC_INVALID)
		return ctl_error(CTL_USAGE, "rc-check: %s", err);
	ctl_emit_object(ctx, result_json(&o, &res, ret ? err : ""), rc_fields);
	if (ret)
		ctl_error(exit_code(res.status), "rc-check %s: %s", ibvf_rc_status_name(res.status),
			  err);
	return exit_code(res.status);
}

static const struct ctl_cmd rc_cmds[] = {
	{"run", rc_run,
	 "DEV[:PORT] [--pkey PKEY [--full|--limited]] [--iterations N] [--size BYTES] "
	 "[--warmup N] [--gid-index N] [--timeout MS] [--op-timeout MS] [--spin US] "
	 "[--mr-size BYTES] [--p99-max US] [--netns NAME|PATH] [--roce-default-pkey]",
	 "RC QP ping-pong between two QPs of one port; exit 1 when the check fails"},
	{0},
};

const struct ctl_object ctl_rc_object = {
	.name = "rc-check",
	.help = "prove a port's RDMA path: RC QP ping-pong with the tenant's P_Key",
	.cmds = rc_cmds,
	.args_to_default = true,
};
