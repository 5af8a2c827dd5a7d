// SPDX-License-Identifier: MIT
/*
 * ibvfctl port: show, wait, watch — port state and P_Key table of a local
 * RDMA device port, or (fabric source) of any port reached by LID, port GUID
 * or directed route through SMPs sent from that device port.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "ctl.h"
#include "clock.h"
#include "err.h"
#include "port_watch.h"

/* Options every port command shares (device, target, source). */
struct port_args {
	const char *dev; /* DEV[:PORT] */
	char ca[64];
	int port;
	struct ibvf_port_target target;
	int source; /* -1 = from config (or fabric when a target is given) */
};

enum {
	OPT_LID = 0x100,
	OPT_GUID,
	OPT_DR,
	OPT_TPORT,
	OPT_SOURCE,
	OPT_PKEY,
	OPT_FULL,
	OPT_LIMITED,
	OPT_ANY,
	OPT_ABSENT,
	OPT_STATE,
	OPT_TIMEOUT,
	OPT_DURATION,
	OPT_COUNT,
};

#define TARGET_OPTS                                                                                \
	{"lid", required_argument, NULL, OPT_LID}, {"guid", required_argument, NULL, OPT_GUID},    \
		{"dr", required_argument, NULL, OPT_DR},                                           \
		{"target-port", required_argument, NULL, OPT_TPORT},                               \
	{                                                                                          \
		"source", required_argument, NULL, OPT_SOURCE                                      \
	}

#define TARGET_USAGE                                                                               \
	"[--lid LID | --guid GUID | --dr PATH] [--target-port N] [--source local|fabric]"

/* ------------------------------------------------------------ parsing -- */

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	if (!s[0] || s[0] == '-')
		return -EINVAL;
	*out = strtoul(s, &end, 0);
	if (errno || *end || *out > max)
		return -EINVAL;
	return 0;
}

/*
 * "10s", "500ms", "2m", "1h", "1.5s" or a plain number of seconds → ms.
 * Digits with an optional decimal fraction only: strtod() also took "nan"
 * (then cast to uint32_t: undefined behaviour), "0x1p3", "1e3" and signs.
 */
static int parse_duration_ms(const char *s, uint32_t *ms)
{
	static const struct {
		const char *suffix;
		double mult;
	} units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"", 1000}};
	size_t n = strspn(s, "0123456789"), f = 0;
	const char *end;
	char num[32];
	double v;

	if (!n)
		return -EINVAL;
	if (s[n] == '.') {
		f = strspn(s + n + 1, "0123456789");
		if (!f)
			return -EINVAL;
		f++;
	}
	end = s + n + f;
	if (n + f >= sizeof(num))
		return -ERANGE;
	memcpy(num, s, n + f);
	num[n + f] = 0;
	v = strtod(num, NULL);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].suffix)) {
			v *= units[i].mult;
			if (!(v <= 86400000.0))
				return -ERANGE;
			*ms = (uint32_t)(v + 0.5);
			return 0;
		}
	return -EINVAL;
}

static int parse_state(const char *s, uint8_t *st)
{
	static const char *const names[] = {"any", "down", "init", "armed", "active"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i])) {
			*st = (uint8_t)i;
			return 0;
		}
	return -EINVAL;
}

static int parse_dev(struct port_args *a)
{
	const char *colon = strrchr(a->dev, ':');
	size_t n = colon ? (size_t)(colon - a->dev) : strlen(a->dev);
	unsigned long p = 0;

	if (!n || n >= sizeof(a->ca))
		return ctl_error(CTL_USAGE,
				 "bad device '%s' (expected DEV or DEV:PORT, e.g. mlx5_0:1)",
				 a->dev);
	memcpy(a->ca, a->dev, n);
	a->ca[n] = 0;
	if (colon && (parse_uint(colon + 1, 254, &p) || !p))
		return ctl_error(CTL_USAGE, "bad port number in '%s' (1..254)", a->dev);
	a->port = (int)p;
	return CTL_OK;
}

/* Handle one target/source option. Return CTL_OK, CTL_USAGE, or -1 if not ours. */
static int target_opt(struct port_args *a, int c, const char *arg)
{
	char err[IBVF_ERR_LEN];
	unsigned long v;

	switch (c) {
	case OPT_LID:
		if (parse_uint(arg, 0xbfff, &v) || !v)
			return ctl_error(CTL_USAGE, "--lid '%s': expected a unicast LID 1..0xbfff",
					 arg);
		a->target.kind = IBVF_TARGET_LID;
		a->target.lid = (uint16_t)v;
		return CTL_OK;
	case OPT_GUID:
		if (ibvf_guid_parse(arg, &a->target.guid, err, sizeof(err)))
			return ctl_error(CTL_USAGE, "--guid: %s", err);
		a->target.kind = IBVF_TARGET_GUID;
		return CTL_OK;
	case OPT_DR:
		if (strlen(arg) >= sizeof(a->target.dr))
			return ctl_error(CTL_USAGE, "--dr: path too long");
		snprintf(a->target.dr, sizeof(a->target.dr), "%s", arg);
		a->target.kind = IBVF_TARGET_DR;
		return CTL_OK;
	case OPT_TPORT:
		if (parse_uint(arg, 254, &v))
			return ctl_error(CTL_USAGE, "--target-port '%s': expected 0..254", arg);
		a->target.port = (uint8_t)v;
		return CTL_OK;
	case OPT_SOURCE:
		if (!strcmp(arg, "local"))
			a->source = IBVF_PORT_SRC_LOCAL;
		else if (!strcmp(arg, "fabric"))
			a->source = IBVF_PORT_SRC_FABRIC;
		else
			return ctl_error(CTL_USAGE, "--source '%s': expected local or fabric", arg);
		return CTL_OK;
	}
	return -1;
}

/* After option parsing: exactly one positional DEV[:PORT]. */
static int finish_args(struct ctl_ctx *ctx, struct port_args *a, int argc, char **argv)
{
	int ret;

	if (optind < argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!a->dev)
		return ctl_error(CTL_USAGE, "missing device (DEV or DEV:PORT, e.g. mlx5_0:1)");
	ret = parse_dev(a);
	if (ret)
		return ret;
	ret = ctl_load_config(ctx);
	if (ret)
		return ret;
	if (a->source < 0)
		a->source = a->target.kind != IBVF_TARGET_SELF ? IBVF_PORT_SRC_FABRIC
							       : ctx->cfg.port_watch.source;
	if (a->source == IBVF_PORT_SRC_LOCAL && a->target.kind != IBVF_TARGET_SELF)
		return ctl_error(CTL_USAGE, "--lid, --guid and --dr need --source fabric");
	return CTL_OK;
}

/*
 * getopt over a command whose single positional (DEV[:PORT]) may come
 * before or after the options. Calls @fn for each option.
 */
static int parse_cmd(struct ctl_ctx *ctx, int argc, char **argv, const struct option *opts,
		     struct port_args *a, int (*fn)(void *, int, const char *), void *arg,
		     const struct ctl_cmd *cmd)
{
	int c, ret;

	for (;;) {
		c = ctl_getopt(ctx, argc, argv, "", opts);
		if (c == -1) {
			if (optind >= argc)
				break;
			if (a->dev)
				return ctl_error(CTL_USAGE, "unexpected argument '%s'",
						 argv[optind]);
			a->dev = argv[optind++];
			continue;
		}
		if (c == 'h') {
			ctl_cmd_usage(stdout, &ctl_port_object, cmd);
			return -1;
		}
		ret = target_opt(a, c, optarg);
		if (ret == -1 && fn)
			ret = fn(arg, c, optarg);
		if (ret == -1) {
			ctl_error(CTL_USAGE, "unknown option or missing value: '%s'",
				  argv[optind - 1]);
			ctl_cmd_usage(stderr, &ctl_port_object, cmd);
			return CTL_USAGE;
		}
		if (ret)
			return ret;
	}
	return finish_args(ctx, a, argc, argv);
}

/* ------------------------------------------------------------ output -- */

static const char *source_name(int s)
{
	return s == IBVF_PORT_SRC_FABRIC ? "fabric" : "local";
}

static json_t *pkeys_json(const struct ibvf_port_info *i)
{
	json_t *arr = json_array();

	for (size_t k = 0; k < i->n_pkeys; k++) {
		char s[24];

		if (!ibvf_pkey_key(i->pkeys[k]))
			continue;
		snprintf(s, sizeof(s), "%zu:0x%04x", k, i->pkeys[k]);
		json_array_append_new(arr, json_string(s));
	}
	return arr;
}

static void target_text(const struct port_args *a, char *buf, size_t len)
{
	const struct ibvf_port_target *t = &a->target;
	char g[IBVF_GUID_STR_LEN];
	int n = 0;

	switch (t->kind) {
	case IBVF_TARGET_SELF:
		n = snprintf(buf, len, "self");
		break;
	case IBVF_TARGET_LID:
		n = snprintf(buf, len, "lid %u", t->lid);
		break;
	case IBVF_TARGET_GUID:
		n = snprintf(buf, len, "guid %s", ibvf_guid_format(t->guid, g));
		break;
	case IBVF_TARGET_DR:
		n = snprintf(buf, len, "dr %s", t->dr);
		break;
	}
	if (t->port && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " port %u", t->port);
}

/* Wall-clock ms of a CLOCK_MONOTONIC ms timestamp (port_info.ms). */
static int64_t unix_ms_of(int64_t mono_ms)
{
	return ibvf_wall_ms() - (ibvf_mono_ms() - mono_ms);
}

/* The port_info as JSON (the same keys for show, wait and watch). */
static json_t *info_json(const struct ibvf_port_src *src, const struct port_args *a,
			 const struct ibvf_port_info *i)
{
	char g[IBVF_GUID_STR_LEN], tgt[300];
	json_t *o;

	target_text(a, tgt, sizeof(tgt));
	o = json_pack("{s:s,s:s,s:s,s:I,s:b}", "device", src ? ibvf_port_src_name(src) : a->dev,
		      "source", source_name(a->source), "target", tgt, "unix_ms",
		      (json_int_t)unix_ms_of(i->ms), "reachable", i->reachable);
	if (!o)
		return NULL;
	if (!i->reachable) {
		json_object_set_new(o, "error", ctl_json_text(i->error));
		return o;
	}
	json_object_set_new(o, "state", json_string(ibvf_port_state_name(i->state)));
	json_object_set_new(o, "phys_state", json_string(ibvf_port_phys_state_name(i->phys_state)));
	json_object_set_new(o, "lid", json_integer(i->lid));
	json_object_set_new(o, "lmc", json_integer(i->lmc));
	json_object_set_new(o, "sm_lid", json_integer(i->sm_lid));
	json_object_set_new(o, "port_guid",
			    i->port_guid ? json_string(ibvf_guid_format(i->port_guid, g))
					 : json_null());
	json_object_set_new(o, "link_layer",
			    json_string(i->link_layer_ib ? "InfiniBand" : "Ethernet"));
	json_object_set_new(o, "pkey_cap", json_integer(i->pkey_cap));
	json_object_set_new(o, "pkeys", pkeys_json(i));
	return o;
}

static const struct ctl_col info_cols[] = {
	{"device", "Device:"},
	{"source", "Source:"},
	{"target", "Target:"},
	{"reachable", "Reachable:"},
	{"error", "Error:"},
	{"state", "State:"},
	{"phys_state", "Physical state:"},
	{"lid", "LID:"},
	{"lmc", "LMC:"},
	{"sm_lid", "SM LID:"},
	{"port_guid", "Port GUID:"},
	{"link_layer", "Link layer:"},
	{"pkey_cap", "P_Key table size:"},
	{"pkeys", "P_Keys (index:pkey):"},
	{0},
};

static int open_src(struct ctl_ctx *ctx, const struct port_args *a, struct ibvf_port_src **src)
{
	char err[IBVF_ERR_LEN];
	int ret;

	ret = ibvf_port_src_open(a->ca, a->port, (enum ibvf_port_source)a->source,
				 &ctx->cfg.port_watch, src, err, sizeof(err));
	if (ret == -EINVAL)
		return ctl_error(CTL_USAGE, "%s", err);
	if (ret)
		return ctl_error(CTL_FAILED, "%s", err);
	return CTL_OK;
}

/* ------------------------------------------------- clean termination -- */

/*
 * SIGTERM/SIGINT/SIGHUP end wait/watch through a self-pipe, so the command
 * returns normally and exit handlers run (umad2sim releases its ibsim client
 * slot only from one). A handler rather than a signalfd: libraries may run
 * threads (umad2sim does) that did not block the signals.
 */
static int stop_pipe[2] = {-1, -1};

static void on_stop(int sig)
{
	int saved = errno;
	char c = (char)sig;

	if (write(stop_pipe[1], &c, 1) < 0) {
		/* pipe full: a stop is already pending */
	}
	errno = saved;
}

static int stop_fd_open(void)
{
	struct sigaction sa;

	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return stop_pipe[0];
}

/*
 * Once a command is done, further SIGTERM/SIGINT/SIGHUP are ignored rather
 * than restored to their default: timeout(1) sends its signal twice (to the
 * child and to the process group), and the second copy must not kill the
 * process on its way out, before umad2sim's exit handler ran.
 */
static void stop_fd_close(void)
{
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	for (int i = 0; i < 2; i++)
		if (stop_pipe[i] >= 0) {
			close(stop_pipe[i]);
			stop_pipe[i] = -1;
		}
}

/* -------------------------------------------------------------- show -- */

static int port_show(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {TARGET_OPTS, {0}};
	struct port_args a = {.source = -1};
	struct ibvf_port_info *info;
	struct ibvf_port_src *src;
	char err[IBVF_ERR_LEN];
	int ret;

	ret = parse_cmd(ctx, argc, argv, opts, &a, NULL, NULL, &ctl_port_object.cmds[0]);
	if (ret)
		return ret < 0 ? CTL_OK : ret;
	ret = open_src(ctx, &a, &src);
	if (ret)
		return ret;
	info = calloc(1, sizeof(*info));
	if (!info) {
		ibvf_port_src_close(src);
		return ctl_error(CTL_FAILED, "out of memory");
	}
	ret = ibvf_port_query(src, &a.target, info, err, sizeof(err));
	ctl_emit_object(ctx, info_json(src, &a, info), info_cols);
	ibvf_port_src_close(src);
	free(info);
	if (ret == -EINVAL)
		return ctl_error(CTL_USAGE, "%s", err);
	if (ret)
		return ctl_error(CTL_FAILED, "%s", err);
	return CTL_OK;
}

/* -------------------------------------------------------------- wait -- */

struct wait_args {
	bool have_pkey, full, limited, any, absent, have_state;
	uint16_t pkey;
	uint8_t state;
	uint32_t timeout_ms;
};

static int wait_opt(void *arg, int c, const char *v)
{
	struct wait_args *w = arg;
	char err[IBVF_ERR_LEN];

	switch (c) {
	case OPT_PKEY:
		if (ibvf_pkey_parse(v, &w->pkey, err, sizeof(err)))
			return ctl_error(CTL_USAGE, "--pkey: %s", err);
		w->have_pkey = true;
		return CTL_OK;
	case OPT_FULL:
		w->full = true;
		return CTL_OK;
	case OPT_LIMITED:
		w->limited = true;
		return CTL_OK;
	case OPT_ANY:
		w->any = true;
		return CTL_OK;
	case OPT_ABSENT:
		w->absent = true;
		return CTL_OK;
	case OPT_STATE:
		if (parse_state(v, &w->state))
			return ctl_error(CTL_USAGE,
					 "--state '%s': expected any, down, init, armed or active",
					 v);
		w->have_state = true;
		return CTL_OK;
	case OPT_TIMEOUT:
		if (parse_duration_ms(v, &w->timeout_ms))
			return ctl_error(CTL_USAGE,
					 "--timeout '%s': expected a duration like 10s, 500ms, 2m",
					 v);
		return CTL_OK;
	}
	return -1;
}

/* Turn the options into a condition; CTL_USAGE on contradictions. */
static int wait_cond(const struct wait_args *w, struct ibvf_port_cond *c)
{
	memset(c, 0, sizeof(*c));
	if (w->full + w->limited + w->any > 1)
		return ctl_error(CTL_USAGE, "--full, --limited and --any exclude each other");
	if ((w->full || w->limited || w->any || w->absent) && !w->have_pkey)
		return ctl_error(CTL_USAGE, "--full, --limited, --any and --absent need --pkey");
	if (w->have_pkey) {
		bool bit = ibvf_pkey_is_full(w->pkey);

		if (w->limited && bit)
			return ctl_error(
				CTL_USAGE,
				"--pkey 0x%04x has the full-membership bit set but --limited "
				"was given (use 0x%04x)",
				w->pkey, ibvf_pkey_key(w->pkey));
		if (w->full || (bit && !w->any))
			c->match = IBVF_PKEY_MATCH_FULL;
		else if (w->limited)
			c->match = IBVF_PKEY_MATCH_LIMITED;
		else
			c->match = IBVF_PKEY_MATCH_ANY;
		c->pkey = w->pkey;
		c->pkey_want = w->absent ? IBVF_PKEY_WANT_ABSENT : IBVF_PKEY_WANT_PRESENT;
		if (!ibvf_pkey_key(w->pkey))
			return ctl_error(CTL_USAGE, "--pkey 0x%04x: partition key 0 is reserved",
					 w->pkey);
	}
	if (w->have_state) {
		c->state = w->state;
		c->need_lid = w->state == IBVF_PORT_ACTIVE;
	} else if (!w->absent) {
		c->state = IBVF_PORT_ACTIVE;
		c->need_lid = true;
	}
	return CTL_OK;
}

static void cond_text(const struct ibvf_port_cond *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s%s", c->state ? ibvf_port_state_name(c->state) : "any state",
			 c->need_lid ? " with a LID" : "");

	if (c->pkey_want == IBVF_PKEY_WANT_NONE || n < 0 || (size_t)n >= len)
		return;
	snprintf(buf + n, len - (size_t)n, ", P_Key 0x%04x %s %s",
		 c->match == IBVF_PKEY_MATCH_FULL ? (c->pkey | IBVF_PKEY_FULL_BIT)
						  : ibvf_pkey_key(c->pkey),
		 c->match == IBVF_PKEY_MATCH_FULL      ? "(full)"
		 : c->match == IBVF_PKEY_MATCH_LIMITED ? "(limited)"
						       : "(full or limited)",
		 c->pkey_want == IBVF_PKEY_WANT_PRESENT ? "present" : "absent");
}

static int port_wait(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		TARGET_OPTS,
		{"pkey", required_argument, NULL, OPT_PKEY},
		{"full", no_argument, NULL, OPT_FULL},
		{"limited", no_argument, NULL, OPT_LIMITED},
		{"any", no_argument, NULL, OPT_ANY},
		{"absent", no_argument, NULL, OPT_ABSENT},
		{"state", required_argument, NULL, OPT_STATE},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{0},
	};
	static const struct ctl_col cols[] = {
		{"met", "Condition met:"},	{"condition", "Condition:"},
		{"waited_ms", "Waited (ms):"},	{"pkey_index", "P_Key index:"},
		{"pkey_entry", "P_Key entry:"}, {"membership", "Membership:"},
		{"observed", "Observed:"},	{0},
	};
	struct wait_args w = {.timeout_ms = 10000};
	struct port_args a = {.source = -1};
	struct ibvf_port_info *info;
	struct ibvf_port_src *src;
	struct ibvf_port_cond c;
	char err[IBVF_ERR_LEN], desc[IBVF_PORT_DESC_LEN], ctext[128];
	int64_t t0, t1;
	int ret, idx = -1, cancel_fd;
	json_t *o;

	ret = parse_cmd(ctx, argc, argv, opts, &a, wait_opt, &w, &ctl_port_object.cmds[1]);
	if (ret)
		return ret < 0 ? CTL_OK : ret;
	ret = wait_cond(&w, &c);
	if (ret)
		return ret;
	cancel_fd = stop_fd_open();
	ret = open_src(ctx, &a, &src);
	if (ret) {
		stop_fd_close();
		return ret;
	}
	info = calloc(1, sizeof(*info));
	if (!info || cancel_fd < 0) {
		free(info);
		stop_fd_close();
		ibvf_port_src_close(src);
		return ctl_error(CTL_FAILED, "out of memory or no pipe");
	}
	t0 = ibvf_mono_ms();
	ret = ibvf_port_wait(src, &a.target, &c, w.timeout_ms, cancel_fd, info, &idx, err,
			     sizeof(err));
	t1 = ibvf_mono_ms();
	stop_fd_close();
	cond_text(&c, ctext, sizeof(ctext));
	o = info_json(src, &a, info);
	json_object_set_new(o, "met", json_boolean(ret == 0));
	json_object_set_new(o, "condition", json_string(ctext));
	json_object_set_new(o, "waited_ms", json_integer(t1 - t0));
	if (idx >= 0) {
		char e[8];

		snprintf(e, sizeof(e), "0x%04x", info->pkeys[idx]);
		json_object_set_new(o, "pkey_index", json_integer(idx));
		json_object_set_new(o, "pkey_entry", json_string(e));
		json_object_set_new(
			o, "membership",
			json_string(ibvf_pkey_is_full(info->pkeys[idx]) ? "full" : "limited"));
	}
	json_object_set_new(o, "observed",
			    json_string(ibvf_port_describe(info, &c, desc, sizeof(desc))));
	ctl_emit_object(ctx, o, cols);
	ibvf_port_src_close(src);
	free(info);
	if (!ret)
		return CTL_OK;
	if (ret == -ETIMEDOUT) {
		ctl_error(CTL_PROBLEMS, "port wait: %s", err);
		return CTL_PROBLEMS;
	}
	return ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "port wait: %s", err);
}

/* ------------------------------------------------------------- watch -- */

struct watch_state {
	struct ctl_ctx *ctx;
	struct port_args *a;
	struct ibvf_port_src *src;
	int64_t t0; /* CLOCK_MONOTONIC ms */
	unsigned long events;
	bool header;
};

static const struct ctl_col watch_cols[] = {
	{"t_ms", "T_MS"},	{"changed", "CHANGED"}, {"state", "STATE"},
	{"phys_state", "PHYS"}, {"lid", "LID"},		{"sm_lid", "SM_LID"},
	{"pkeys", "PKEYS"},	{"error", "ERROR"},	{0},
};

static json_t *changed_json(unsigned m)
{
	static const struct {
		unsigned bit;
		const char *name;
	} n[] = {
		{IBVF_PORT_CHG_REACHABLE, "reachable"}, {IBVF_PORT_CHG_STATE, "state"},
		{IBVF_PORT_CHG_PHYS, "phys_state"},	{IBVF_PORT_CHG_LID, "lid"},
		{IBVF_PORT_CHG_SM_LID, "sm_lid"},	{IBVF_PORT_CHG_PKEYS, "pkeys"},
		{IBVF_PORT_CHG_GUID, "port_guid"},
	};
	json_t *arr = json_array();

	if (m == ~0u)
		json_array_append_new(arr, json_string("first"));
	else
		for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
			if (m & n[i].bit)
				json_array_append_new(arr, json_string(n[i].name));
	return arr;
}

static void watch_cb(const struct ibvf_port_info *prev, const struct ibvf_port_info *now,
		     unsigned changed, void *arg)
{
	struct watch_state *ws = arg;
	json_t *o;

	(void)prev;
	o = info_json(ws->src, ws->a, now);
	json_object_set_new(o, "t_ms", json_integer(now->ms - ws->t0));
	json_object_set_new(o, "changed", changed_json(changed));
	ctl_emit_stream(ws->ctx, o, watch_cols, &ws->header);
	ws->events++;
}

struct watch_args {
	uint32_t duration_ms;
	unsigned long count;
};

static int watch_opt(void *arg, int c, const char *v)
{
	struct watch_args *w = arg;

	switch (c) {
	case OPT_DURATION:
		if (parse_duration_ms(v, &w->duration_ms))
			return ctl_error(CTL_USAGE, "--duration '%s': expected e.g. 30s", v);
		return CTL_OK;
	case OPT_COUNT:
		if (parse_uint(v, 1000000, &w->count) || !w->count)
			return ctl_error(CTL_USAGE, "--count '%s': expected 1..1000000", v);
		return CTL_OK;
	}
	return -1;
}

static int watch_loop(struct ibvf_port_watch *pw, int stop_fd, const struct watch_args *wa,
		      struct watch_state *ws, char *err, size_t errlen)
{
	struct pollfd p[2] = {{.fd = ibvf_port_watch_fd(pw), .events = POLLIN},
			      {.fd = stop_fd, .events = POLLIN}};

	for (;;) {
		int64_t left = -1;
		int r;

		if (wa->duration_ms) {
			left = (int64_t)wa->duration_ms - (ibvf_mono_ms() - ws->t0);
			if (left <= 0)
				return 0;
		}
		r = poll(p, 2, left < 0 ? -1 : (int)left);
		if (r < 0 && errno != EINTR)
			return ibvf_errf(err, errlen, -errno, "poll: %s", strerror(errno));
		if (r > 0 && (p[1].revents & POLLIN))
			return 0;
		if (r > 0 && (p[0].revents & POLLIN)) {
			r = ibvf_port_watch_dispatch(pw, err, errlen);
			if (r < 0)
				return r;
			if (wa->count && ws->events >= wa->count)
				return 0;
		}
	}
}

static int port_watch(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		TARGET_OPTS,
		{"duration", required_argument, NULL, OPT_DURATION},
		{"count", required_argument, NULL, OPT_COUNT},
		{0},
	};
	struct watch_args wa = {0};
	struct port_args a = {.source = -1};
	struct watch_state ws = {0};
	struct ibvf_port_watch *pw;
	struct ibvf_port_src *src;
	char err[IBVF_ERR_LEN];
	int ret, stop_fd;

	ret = parse_cmd(ctx, argc, argv, opts, &a, watch_opt, &wa, &ctl_port_object.cmds[2]);
	if (ret)
		return ret < 0 ? CTL_OK : ret;
	stop_fd = stop_fd_open();
	ret = open_src(ctx, &a, &src);
	if (ret) {
		stop_fd_close();
		return ret;
	}
	ws.ctx = ctx;
	ws.a = &a;
	ws.src = src;
	ws.t0 = ibvf_mono_ms();
	ret = ibvf_port_watch_new(src, &a.target, watch_cb, &ws, &pw, err, sizeof(err));
	if (ret) {
		stop_fd_close();
		ibvf_port_src_close(src);
		return ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "%s", err);
	}
	if (stop_fd < 0)
		ret = ibvf_errf(err, sizeof(err), stop_fd, "pipe: %s", strerror(-stop_fd));
	else
		ret = watch_loop(pw, stop_fd, &wa, &ws, err, sizeof(err));
	stop_fd_close();
	ibvf_port_watch_free(pw);
	ibvf_port_src_close(src);
	if (ret)
		return ctl_error(CTL_FAILED, "port watch: %s", err);
	return CTL_OK;
}

static const struct ctl_cmd port_cmds[] = {
	{"show", port_show, "DEV[:PORT] " TARGET_USAGE,
	 "port state, LID, SM LID and P_Key table (of DEV:PORT itself, or of a target reached "
	 "through SMPs sent from it)"},
	{"wait", port_wait,
	 "DEV[:PORT] [--pkey PKEY [--full|--limited|--any] [--absent]] [--state STATE] "
	 "[--timeout DURATION] " TARGET_USAGE,
	 "wait until the port is ACTIVE with a LID (or --state) and holds the P_Key; exit 1 on "
	 "timeout with the observed state"},
	{"watch", port_watch, "DEV[:PORT] [--duration DURATION] [--count N] " TARGET_USAGE,
	 "print each change of state, LID, SM LID or P_Key table until SIGTERM/SIGINT"},
	{0},
};

const struct ctl_object ctl_port_object = {
	.name = "port",
	.help = "InfiniBand port state and P_Key table (local sysfs or SMPs)",
	.cmds = port_cmds,
};
