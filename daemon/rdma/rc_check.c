// SPDX-License-Identifier: MIT
/*
 * rc_check.c - RC QP ping-pong check of one RDMA device port (see rc_check.h).
 *
 * Two RC QPs on one port, one CQ with a completion channel, one MR holding
 * the four message buffers (A send, A receive, B send, B receive). Each
 * round trip: A sends, B receives and answers, A receives. The verbs sequence
 * follows rdma-core's rc_pingpong example; completions are busy-polled for
 * opts.spin_us, then awaited on the completion channel (and the async event
 * fd) with poll(2), so no wait is unbounded.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file_read.h"
#include "log.h"
#include "sort.h"
#include "clock.h"
#include "rc_check.h"
#include "rc_verbs.h"

/*
 * Fault injection for tests/lab/vm/rc_check_vmtest.c, which includes this
 * file with IBVF_RC_FAULT_INJECT defined: the N-th resource step fails with
 * EIO, so every cleanup path runs against a real device. Compiled out of the
 * library.
 */
#ifdef IBVF_RC_FAULT_INJECT
static unsigned int rc_fault_at, rc_fault_count;
static unsigned int rc_fault_child_delay_ms; /* netns child stalls (parent must kill it) */
static bool rc_fault(void)
{
	if (!rc_fault_at || ++rc_fault_count != rc_fault_at)
		return false;
	errno = EIO;
	return true;
}
#else
static inline bool rc_fault(void)
{
	return false;
}
#endif

enum { QP_A = 0, QP_B = 1 };

#define RC_SQ_DEPTH	    4
#define RC_RQ_DEPTH	    2
#define RC_CQ_DEPTH	    (2 * (RC_SQ_DEPTH + RC_RQ_DEPTH))
#define RC_LIVENESS_MS	    100 /* how often the device's uverbs node is looked at */
#define RC_WRID(side, recv) (((uint64_t)(side) << 1) | (recv))

/* RC attributes as rc_pingpong / perftest use them (IBTA 11.2.4.2). */
#define RC_MIN_RNR_TIMER 12 /* 0.64 ms */
#define RC_TIMEOUT	 14 /* 4.096 us * 2^14 = 67 ms per retry */
#define RC_RETRY_CNT	 7
#define RC_RNR_RETRY	 7 /* receives are always posted first; waits are bounded */
#define RC_HOP_LIMIT	 64

struct rc_run {
	const struct ibvf_rc_opts *o;
	struct ibvf_rc_result *res;
	char *err;
	size_t errlen;
	const char *netns_label;    /* for "no RDMA device visible in this netns" */
	const struct ibvf_verbs *v; /* libibverbs, loaded by ibvf_rc_check() (rc_verbs.h) */

	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buf_len;
	struct ibv_comp_channel *chan;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	unsigned int cq_events; /* received, to be acked before destroy */
	bool armed;

	uint16_t *pkeys;
	struct ibv_gid_entry *gids;
	uint64_t *samples;

	struct ibv_port_attr pa;
	union ibv_gid sgid;
	char uverbs_path[IBV_SYSFS_PATH_MAX]; /* "" = liveness not available */
	uint64_t deadline_ns, next_live_ns;
	unsigned int sends_posted[2], sends_done[2], recvs_done[2];
};

const char *ibvf_rc_status_name(enum ibvf_rc_status s)
{
	switch (s) {
	case IBVF_RC_PASS:
		return "pass";
	case IBVF_RC_FAIL:
		return "fail";
	case IBVF_RC_SLOW:
		return "slow";
	case IBVF_RC_NOT_CHECKABLE:
		return "not-checkable";
	case IBVF_RC_INVALID:
		return "invalid";
	case IBVF_RC_ERROR:
		return "error";
	}
	return "?";
}

void ibvf_rc_opts_init(struct ibvf_rc_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->port = 1;
	o->gid_index = -1;
	o->iterations = IBVF_RC_DEF_ITERATIONS;
	o->warmup = IBVF_RC_DEF_WARMUP;
	o->msg_size = IBVF_RC_DEF_MSG_SIZE;
	o->mr_bytes = IBVF_RC_DEF_MR_BYTES;
	o->op_timeout_ms = IBVF_RC_DEF_OP_TIMEOUT_MS;
	o->timeout_ms = IBVF_RC_DEF_TIMEOUT_MS;
	o->spin_us = IBVF_RC_DEF_SPIN_US;
}

/* ------------------------------------------------------------- errors -- */

/*
 * Record a failure: status, step/verb, errno, and "<dev> port <n>: <reason>"
 * in the caller's buffer. @code is a negative errno and is returned.
 */
static int __attribute__((format(printf, 5, 6)))
rc_fail(struct rc_run *r, enum ibvf_rc_status st, const char *verb, int code, const char *fmt, ...)
{
	char msg[IBVF_ERR_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->res->status = st;
	snprintf(r->res->verb, sizeof(r->res->verb), "%s", verb);
	r->res->error_errno = -code;
	ibvf_errf(r->err, r->errlen, code, "%s port %u: %s", r->o->dev, r->o->port, msg);
	log_debug("rc-check %s port %u: %s", r->o->dev, r->o->port, msg);
	return code;
}

/* A libibverbs call failed with positive errno @e (0 is taken as EIO). */
static int rc_verb_fail(struct rc_run *r, const char *verb, int e, const char *hint)
{
	if (e <= 0)
		e = EIO;
	return rc_fail(r, IBVF_RC_FAIL, verb, -e, "%s failed: %s (errno %d)%s%s", verb, strerror(e),
		       e, hint && *hint ? ": " : "", hint ? hint : "");
}

/* Append to @buf at *@off, never past its end (output is truncated). */
static void __attribute__((format(printf, 4, 5)))
rc_appendf(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off = *off + (size_t)n < len ? *off + (size_t)n : len;
}

/* ------------------------------------------------------- P_Key table -- */

static bool pkey_valid(uint16_t v)
{
	return ibvf_pkey_key(v) != 0;
}

static int pkey_find(const uint16_t *table, size_t len, uint16_t v)
{
	for (size_t i = 0; i < len; i++)
		if (table[i] == v && pkey_valid(v))
			return (int)i;
	return -1;
}

char *ibvf_rc_pkey_table_format(const uint16_t *table, size_t len, char *buf, size_t buflen)
{
	size_t off = 0, shown = 0, valid = 0;

	if (!buflen)
		return buf;
	buf[0] = 0;
	for (size_t i = 0; i < len; i++) {
		if (!pkey_valid(table[i]))
			continue;
		valid++;
		if (shown == 16)
			continue;
		rc_appendf(buf, buflen, &off, "%s[%zu]=0x%04x", shown ? " " : "", i, table[i]);
		shown++;
	}
	if (!valid)
		snprintf(buf, buflen, "no valid entry among %zu", len);
	else if (valid > shown)
		rc_appendf(buf, buflen, &off, " ... and %zu more", valid - shown);
	return buf;
}

int ibvf_rc_pkey_pick(const uint16_t *table, size_t len, uint16_t pkey,
		      struct ibvf_rc_pkey_pick *out, char *err, size_t errlen)
{
	uint16_t key = ibvf_pkey_key(pkey), full = key | IBVF_PKEY_FULL_BIT, lim = key;
	const char *want = ibvf_pkey_is_full(pkey) ? "full" : "limited";
	char tb[400];
	int fi, li;

	if (!key)
		return ibvf_errf(
			err, errlen, -EINVAL,
			"PKey 0x%04x is invalid: partition key 0 is reserved (IBTA 10.9.1.1)",
			pkey);
	fi = pkey_find(table, len, full);
	li = pkey_find(table, len, lim);
	ibvf_rc_pkey_table_format(table, len, tb, sizeof(tb));
	if (ibvf_pkey_is_full(pkey)) {
		if (fi >= 0) {
			*out = (struct ibvf_rc_pkey_pick){(uint16_t)fi, (uint16_t)fi, full, full};
			return 0;
		}
		if (li >= 0)
			return ibvf_errf(
				err, errlen, -ENOENT,
				"PKey 0x%04x (full member of partition 0x%04x) is not in the "
				"P_Key table: the port is only a limited member (0x%04x at "
				"index %d); table: %s",
				pkey, key, lim, li, tb);
	} else {
		if (li >= 0 && fi >= 0) {
			*out = (struct ibvf_rc_pkey_pick){(uint16_t)li, (uint16_t)fi, lim, full};
			return 0;
		}
		if (li >= 0)
			return ibvf_errf(
				err, errlen, -EOPNOTSUPP,
				"PKey 0x%04x (limited member of partition 0x%04x, index %d) "
				"is not checkable: the P_Key table holds no full-member entry "
				"of that partition and two limited members cannot talk "
				"(IBTA 10.9.3); table: %s",
				pkey, key, li, tb);
		if (fi >= 0)
			return ibvf_errf(
				err, errlen, -ENOENT,
				"PKey 0x%04x (limited member of partition 0x%04x) is not in "
				"the P_Key table: the port is a full member (0x%04x at index "
				"%d), not limited as requested; table: %s",
				pkey, key, full, fi, tb);
	}
	return ibvf_errf(err, errlen, -ENOENT,
			 "PKey 0x%04x (%s member of partition 0x%04x) is not in the P_Key table "
			 "(%s): the SM has not added this port to the partition",
			 pkey, want, key, tb);
}

int ibvf_rc_pkey_pick_port(const uint16_t *table, size_t len, uint16_t pkey, bool ethernet,
			   struct ibvf_rc_pkey_pick *out, char *err, size_t errlen)
{
	int ret = ibvf_rc_pkey_pick(table, len, pkey, out, err, errlen);
	int def = -1;

	if (ret != -ENOENT || !ethernet)
		return ret;
	for (size_t i = 0; i < len; i++) {
		if (!pkey_valid(table[i]))
			continue;
		if (table[i] != IBVF_RC_DEFAULT_PKEY)
			return ret; /* P_Keys configured on this RoCE port: strict */
		if (def < 0)
			def = (int)i;
	}
	if (def < 0)
		return ret;
	*out = (struct ibvf_rc_pkey_pick){(uint16_t)def, (uint16_t)def, IBVF_RC_DEFAULT_PKEY,
					  IBVF_RC_DEFAULT_PKEY, true};
	if (errlen)
		err[0] = 0;
	return 0;
}

/* ---------------------------------------------------------- GID table -- */

static bool gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return !memcmp(g->raw, zero, sizeof(zero));
}

static bool gid_is_v4mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = {[10] = 0xff, [11] = 0xff};

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

/* Lower is preferred; see ibvf_rc_gid_pick(). */
static int gid_class(const struct ibv_gid_entry *e)
{
	bool link_local = e->gid.raw[0] == 0xfe && (e->gid.raw[1] & 0xc0) == 0x80;

	if (e->gid_type == IBV_GID_TYPE_ROCE_V2)
		return gid_is_v4mapped(&e->gid) ? 0 : link_local ? 2 : 1;
	if (e->gid_type == IBV_GID_TYPE_ROCE_V1)
		return 3;
	return 4;
}

static void gid_list_valid(const struct ibv_gid_entry *tab, size_t n, uint32_t port, char *buf,
			   size_t len)
{
	size_t off = 0, shown = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n && shown < 16; i++) {
		if (tab[i].port_num != port || gid_is_zero(&tab[i].gid))
			continue;
		rc_appendf(buf, len, &off, "%s%u", shown ? " " : "", tab[i].gid_index);
		shown++;
	}
	if (!shown)
		snprintf(buf, len, "none");
}

int ibvf_rc_gid_pick(const struct ibv_gid_entry *tab, size_t n, uint32_t port, bool ethernet,
		     int want, int *out, char *err, size_t errlen)
{
	const struct ibv_gid_entry *best = NULL;
	char valid[128];

	for (size_t i = 0; i < n; i++) {
		const struct ibv_gid_entry *e = &tab[i];

		if (e->port_num != port || gid_is_zero(&e->gid))
			continue;
		if (want >= 0) {
			if (e->gid_index == (uint32_t)want) {
				*out = want;
				return 0;
			}
			continue;
		}
		if (!best || gid_class(e) < gid_class(best) ||
		    (gid_class(e) == gid_class(best) && e->gid_index < best->gid_index))
			best = e;
	}
	gid_list_valid(tab, n, port, valid, sizeof(valid));
	if (want >= 0)
		return ibvf_errf(err, errlen, -ENOENT,
				 "GID index %d is not a valid entry of the port's GID table "
				 "(valid indexes: %s)",
				 want, valid);
	if (!ethernet) {
		*out = -1;
		return 0;
	}
	if (!best)
		return ibvf_errf(err, errlen, -ENOENT,
				 "the port's GID table has no valid entry: a RoCE port needs a GID "
				 "(does its netdev have an IP address and is it up?)");
	*out = (int)best->gid_index;
	return 0;
}

/* -------------------------------------------------------------- netns -- */

int ibvf_rc_netns_path(const char *netns, char *buf, size_t buflen, char *err, size_t errlen)
{
	int n;

	if (!netns || !*netns || !strcmp(netns, ".") || !strcmp(netns, ".."))
		return ibvf_errf(err, errlen, -EINVAL, "netns '%s' is not a name or a path",
				 netns ? netns : "");
	if (strchr(netns, '/'))
		n = snprintf(buf, buflen, "%s", netns);
	else
		n = snprintf(buf, buflen, "/run/netns/%s", netns);
	if (n < 0 || (size_t)n >= buflen)
		return ibvf_errf(err, errlen, -EINVAL, "netns '%.64s...' is too long", netns);
	return 0;
}

/* ---------------------------------------------------------- statistics -- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted @s: the ceil(p/100 * n)-th value. */
static uint64_t rc_percentile(const uint64_t *s, size_t n, unsigned int p)
{
	size_t rank = ((size_t)p * n + 99) / 100;

	return s[rank ? rank - 1 : 0];
}

/* Sort @ns (round trips in ns) and fill the µs figures of @res. */
static void rc_stats(uint64_t *ns, size_t n, struct ibvf_rc_result *res)
{
	double sum = 0;

	if (!n)
		return;
	ibvf_sort(ns, n, sizeof(*ns), cmp_u64);
	for (size_t i = 0; i < n; i++)
		sum += (double)ns[i];
	res->min_us = (double)ns[0] / 1e3;
	res->p50_us = (double)rc_percentile(ns, n, 50) / 1e3;
	res->p99_us = (double)rc_percentile(ns, n, 99) / 1e3;
	res->max_us = (double)ns[n - 1] / 1e3;
	res->avg_us = sum / (double)n / 1e3;
}

/* ----------------------------------------------------------- options -- */

static int rc_validate(struct rc_run *r)
{
	const struct ibvf_rc_opts *o = r->o;

#define BAD(...) rc_fail(r, IBVF_RC_INVALID, "options", -EINVAL, __VA_ARGS__)
	if (!o->dev || !*o->dev || strlen(o->dev) >= IBVF_RC_DEV_LEN || strchr(o->dev, '/'))
		return BAD("RDMA device name '%.80s' is empty, too long or contains '/'",
			   o->dev ? o->dev : "");
	if (!o->port)
		return BAD("port 0 does not exist (ports are numbered from 1)");
	if (!o->iterations || o->iterations > IBVF_RC_MAX_ITERATIONS)
		return BAD("iterations %u out of range 1..%u", o->iterations,
			   IBVF_RC_MAX_ITERATIONS);
	if (o->warmup > IBVF_RC_MAX_ITERATIONS)
		return BAD("warm-up %u out of range 0..%u", o->warmup, IBVF_RC_MAX_ITERATIONS);
	if (!o->msg_size || o->msg_size > IBVF_RC_MAX_MSG_SIZE)
		return BAD("message size %zu out of range 1..%u bytes", o->msg_size,
			   IBVF_RC_MAX_MSG_SIZE);
	if (o->mr_bytes > IBVF_RC_MAX_MR_BYTES)
		return BAD("registered size %zu above %u bytes", o->mr_bytes, IBVF_RC_MAX_MR_BYTES);
	if (!o->op_timeout_ms || !o->timeout_ms || o->op_timeout_ms > IBVF_RC_MAX_TIMEOUT_MS ||
	    o->timeout_ms > IBVF_RC_MAX_TIMEOUT_MS)
		return BAD("timeouts must be within 1..%u ms", IBVF_RC_MAX_TIMEOUT_MS);
	if (o->spin_us > IBVF_RC_MAX_SPIN_US)
		return BAD("spin %u us above %u us", o->spin_us, IBVF_RC_MAX_SPIN_US);
	if (o->gid_index < -1)
		return BAD("GID index %d is negative", o->gid_index);
	if (!isfinite(o->p99_max_us) || o->p99_max_us < 0)
		return BAD("p99 bound must be a non-negative number of microseconds");
	if (o->use_pkey && !ibvf_pkey_key(o->pkey))
		return BAD("PKey 0x%04x is invalid: partition key 0 is reserved (IBTA 10.9.1.1)",
			   o->pkey);
#undef BAD
	return 0;
}

/* ------------------------------------------------------ device, port -- */

static int rc_open(struct rc_run *r)
{
	struct ibv_device **list, *dev = NULL;
	char names[256];
	size_t off = 0;
	int n = 0;

	list = rc_fault() ? NULL : r->v->get_device_list(&n);
	if (!list)
		return rc_verb_fail(r, "ibv_get_device_list", errno,
				    errno == ENOSYS ? "the kernel has no RDMA support (ib_uverbs "
						      "not loaded?)"
						    : NULL);
	if (n == 0) {
		r->v->free_device_list(list);
		return rc_fail(r, IBVF_RC_FAIL, "ibv_get_device_list", -ENODEV,
			       "no RDMA device visible in this netns%s%s%s (looking for %s)",
			       r->netns_label ? " (" : "", r->netns_label ? r->netns_label : "",
			       r->netns_label ? ")" : "", r->o->dev);
	}
	names[0] = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(r->v->get_device_name(list[i]), r->o->dev))
			dev = list[i];
		rc_appendf(names, sizeof(names), &off, "%s%s", i ? " " : "",
			   r->v->get_device_name(list[i]));
	}
	if (!dev) {
		r->v->free_device_list(list);
		return rc_fail(r, IBVF_RC_FAIL, "ibv_get_device_list", -ENODEV,
			       "RDMA device not found in this netns (visible: %s)", names);
	}
	r->ctx = rc_fault() ? NULL : r->v->open_device(dev);
	if (!r->ctx) {
		int e = errno;
		char hint[256];

		snprintf(hint, sizeof(hint), "cannot open its uverbs device (%s)%s", dev->dev_name,
			 e == EACCES || e == EPERM ? "; check the device file's permissions "
						     "and the container's device cgroup"
						   : "");
		r->v->free_device_list(list);
		return rc_verb_fail(r, "ibv_open_device", e, hint);
	}
	snprintf(r->uverbs_path, sizeof(r->uverbs_path), "%s", dev->dev_path);
	if (access(r->uverbs_path, F_OK))
		r->uverbs_path[0] = 0; /* no sysfs view of it: liveness by events only */
	r->v->free_device_list(list);
	return 0;
}

/*
 * Has the kernel started to remove the device? Its uverbs class device
 * (/sys/class/infiniband_verbs/uverbsN) goes away first. Drivers with
 * disassociate support also raise IBV_EVENT_DEVICE_FATAL; others (rxe)
 * block the removal until every user closes, so without this check the
 * removal would wait for the whole run.
 */
static int rc_liveness(struct rc_run *r, uint64_t t)
{
	if (t >= r->deadline_ns)
		return rc_fail(r, IBVF_RC_FAIL, "timeout", -ETIMEDOUT,
			       "the check did not finish within its timeout of %u ms "
			       "(%u of %u round trips done)",
			       r->o->timeout_ms, r->res->iterations, r->o->iterations);
	if (t < r->next_live_ns)
		return 0;
	r->next_live_ns = t + RC_LIVENESS_MS * 1000000ull;
	if (r->uverbs_path[0] && access(r->uverbs_path, F_OK) && errno == ENOENT)
		return rc_fail(r, IBVF_RC_FAIL, "device_removed", -ENODEV,
			       "the device is being removed (%s is gone)", r->uverbs_path);
	return 0;
}

static int rc_port(struct rc_run *r)
{
	struct ibv_device_attr da;
	int ret;

	ret = r->v->query_device(r->ctx, &da);
	if (ret)
		return rc_verb_fail(r, "ibv_query_device", ret, NULL);
	if (r->o->port > da.phys_port_cnt)
		return rc_fail(r, IBVF_RC_FAIL, "ibv_query_port", -ENODEV,
			       "no such port: the device has %u port(s)", da.phys_port_cnt);
	ret = ibvf_verbs_query_port(r->v, r->ctx, r->o->port, &r->pa);
	if (ret)
		return rc_verb_fail(r, "ibv_query_port", ret, NULL);
	r->res->ethernet = r->pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	r->res->lid = r->pa.lid;
	r->res->mtu = 128u << r->pa.active_mtu;
	if (r->pa.state != IBV_PORT_ACTIVE)
		return rc_fail(r, IBVF_RC_FAIL, "ibv_query_port", -ENETDOWN,
			       "port state is %s, not ACTIVE", r->v->port_state_str(r->pa.state));
	if (!r->res->ethernet && !r->pa.lid)
		return rc_fail(r, IBVF_RC_FAIL, "ibv_query_port", -ENETDOWN,
			       "port has LID 0: no subnet manager has configured it");
	if (r->o->msg_size > r->pa.max_msg_sz)
		return rc_fail(r, IBVF_RC_FAIL, "ibv_query_port", -EMSGSIZE,
			       "message size %zu is above the port's max_msg_sz %u", r->o->msg_size,
			       r->pa.max_msg_sz);
	return 0;
}

static int rc_pkey(struct rc_run *r)
{
	struct ibvf_rc_pkey_pick pick;
	char msg[IBVF_ERR_LEN];
	size_t len = (size_t)r->pa.pkey_tbl_len;
	int ret;

	if (!len)
		return rc_fail(r, IBVF_RC_FAIL, "ibv_query_port", -ENOENT,
			       "the port has an empty P_Key table");
	r->pkeys = calloc(len, sizeof(*r->pkeys));
	if (!r->pkeys)
		return rc_fail(r, IBVF_RC_ERROR, "calloc", -ENOMEM, "out of memory");
	for (size_t i = 0; i < len; i++) {
		__be16 v;

		if (r->v->query_pkey(r->ctx, r->o->port, (int)i, &v))
			return rc_verb_fail(r, "ibv_query_pkey", errno, "reading the P_Key table");
		r->pkeys[i] = be16toh(v);
	}
	if (!r->o->use_pkey) {
		char tb[400];

		if (!pkey_valid(r->pkeys[0]))
			return rc_fail(r, IBVF_RC_FAIL, "pkey_lookup", -ENOENT,
				       "P_Key index 0 is empty (table: %s)",
				       ibvf_rc_pkey_table_format(r->pkeys, len, tb, sizeof(tb)));
		pick = (struct ibvf_rc_pkey_pick){0, 0, r->pkeys[0], r->pkeys[0]};
	} else {
		ret = ibvf_rc_pkey_pick_port(r->pkeys, len, r->o->pkey,
					     r->res->ethernet && r->o->roce_default_pkey, &pick,
					     msg, sizeof(msg));
		if (ret)
			return rc_fail(r,
				       ret == -EOPNOTSUPP ? IBVF_RC_NOT_CHECKABLE
				       : ret == -EINVAL	  ? IBVF_RC_INVALID
							  : IBVF_RC_FAIL,
				       "pkey_lookup", ret, "%s", msg);
	}
	r->res->pkey_index = pick.index;
	r->res->peer_pkey_index = pick.peer_index;
	r->res->pkey = pick.pkey;
	r->res->peer_pkey = pick.peer_pkey;
	r->res->pkey_roce_default = pick.roce_default;
	return 0;
}

static int rc_gid(struct rc_run *r)
{
	struct ibv_device_attr da;
	char msg[IBVF_ERR_LEN];
	size_t cap = 0;
	ssize_t n;
	int idx, ret;

	if (!r->res->ethernet && r->o->gid_index < 0)
		return 0; /* InfiniBand: LID routed, no GRH */
	ret = r->v->query_device(r->ctx, &da);
	if (ret)
		return rc_verb_fail(r, "ibv_query_device", ret, NULL);
	for (unsigned int p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;

		if (!ibvf_verbs_query_port(r->v, r->ctx, (uint8_t)p, &pa))
			cap += (size_t)pa.gid_tbl_len;
	}
	r->gids = calloc(cap ? cap : 1, sizeof(*r->gids));
	if (!r->gids)
		return rc_fail(r, IBVF_RC_ERROR, "calloc", -ENOMEM, "out of memory");
	n = r->v->_query_gid_table(r->ctx, r->gids, cap, 0, sizeof(*r->gids));
	if (n < 0)
		return rc_verb_fail(r, "ibv_query_gid_table", (int)-n, "reading the GID table");
	ret = ibvf_rc_gid_pick(r->gids, (size_t)n, r->o->port, r->res->ethernet, r->o->gid_index,
			       &idx, msg, sizeof(msg));
	if (ret)
		return rc_fail(r, IBVF_RC_FAIL, "gid_lookup", ret, "%s", msg);
	for (ssize_t i = 0; i < n; i++) {
		const struct ibv_gid_entry *e = &r->gids[i];

		if (e->port_num != r->o->port || e->gid_index != (uint32_t)idx)
			continue;
		r->sgid = e->gid;
		inet_ntop(AF_INET6, e->gid.raw, r->res->gid, sizeof(r->res->gid));
		if (e->ndev_ifindex && !if_indextoname(e->ndev_ifindex, r->res->gid_netdev))
			r->res->gid_netdev[0] = 0;
	}
	r->res->gid_index = idx;
	return 0;
}

/* ---------------------------------------------------------- resources -- */

static int rc_setup(struct rc_run *r)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t want = 4 * r->o->msg_size, align = page > 0 ? (size_t)page : 4096;
	int ret;
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = RC_SQ_DEPTH,
			.max_recv_wr = RC_RQ_DEPTH,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};

	if (r->o->mr_bytes > want)
		want = r->o->mr_bytes;
	r->buf_len = (want + align - 1) / align * align;
	ret = rc_fault() ? EIO : posix_memalign((void **)&r->buf, align, r->buf_len);
	if (ret) {
		r->buf = NULL;
		return rc_fail(r, IBVF_RC_ERROR, "posix_memalign", -ret,
			       "posix_memalign: cannot allocate %zu bytes: %s", r->buf_len,
			       strerror(ret));
	}
	memset(r->buf, 0, r->buf_len);
	r->pd = rc_fault() ? NULL : r->v->alloc_pd(r->ctx);
	if (!r->pd)
		return rc_verb_fail(r, "ibv_alloc_pd", errno, NULL);
	r->mr = rc_fault() ? NULL : r->v->reg_mr(r->pd, r->buf, r->buf_len, IBV_ACCESS_LOCAL_WRITE);
	if (!r->mr) {
		int e = errno;
		struct rlimit rl = {0};
		char hint[200] = "";

		if ((e == ENOMEM || e == EPERM || e == EAGAIN) && !getrlimit(RLIMIT_MEMLOCK, &rl))
			snprintf(hint, sizeof(hint),
				 "registering %zu bytes needs locked memory; RLIMIT_MEMLOCK "
				 "(memlock) is %llu bytes (hard %llu): raise the memlock limit or "
				 "grant CAP_IPC_LOCK",
				 r->buf_len, (unsigned long long)rl.rlim_cur,
				 (unsigned long long)rl.rlim_max);
		return rc_verb_fail(r, "ibv_reg_mr", e, hint);
	}
	r->res->mr_bytes = r->buf_len;
	r->chan = rc_fault() ? NULL : r->v->create_comp_channel(r->ctx);
	if (!r->chan)
		return rc_verb_fail(r, "ibv_create_comp_channel", errno, NULL);
	r->cq = rc_fault() ? NULL : r->v->create_cq(r->ctx, RC_CQ_DEPTH, NULL, r->chan, 0);
	if (!r->cq)
		return rc_verb_fail(r, "ibv_create_cq", errno, NULL);
	qia.send_cq = r->cq;
	qia.recv_cq = r->cq;
	for (int s = QP_A; s <= QP_B; s++) {
		struct ibv_qp_init_attr a = qia;

		r->qp[s] = rc_fault() ? NULL : r->v->create_qp(r->pd, &a);
		if (!r->qp[s])
			return rc_verb_fail(r, "ibv_create_qp", errno, NULL);
	}
	if (fcntl(r->chan->fd, F_SETFL, fcntl(r->chan->fd, F_GETFL) | O_NONBLOCK) ||
	    fcntl(r->ctx->async_fd, F_SETFL, fcntl(r->ctx->async_fd, F_GETFL) | O_NONBLOCK))
		return rc_fail(r, IBVF_RC_ERROR, "fcntl", -errno, "fcntl(O_NONBLOCK): %s",
			       strerror(errno));
	return 0;
}

static void rc_release(struct rc_run *r)
{
	for (int s = QP_A; s <= QP_B; s++)
		if (r->qp[s] && r->v->destroy_qp(r->qp[s]))
			log_warn("rc-check %s: ibv_destroy_qp failed", r->o->dev);
	if (r->cq) {
		r->v->ack_cq_events(r->cq, r->cq_events);
		if (r->v->destroy_cq(r->cq))
			log_warn("rc-check %s: ibv_destroy_cq failed", r->o->dev);
	}
	if (r->chan && r->v->destroy_comp_channel(r->chan))
		log_warn("rc-check %s: ibv_destroy_comp_channel failed", r->o->dev);
	if (r->mr && r->v->dereg_mr(r->mr))
		log_warn("rc-check %s: ibv_dereg_mr failed", r->o->dev);
	free(r->buf);
	if (r->pd && r->v->dealloc_pd(r->pd))
		log_warn("rc-check %s: ibv_dealloc_pd failed", r->o->dev);
	if (r->ctx && r->v->close_device(r->ctx))
		log_warn("rc-check %s: ibv_close_device failed", r->o->dev);
	free(r->pkeys);
	free(r->gids);
	free(r->samples);
}

/* ---------------------------------------------------- QP state machine -- */

static int rc_modify(struct rc_run *r, int s, struct ibv_qp_attr *a, int mask, const char *verb)
{
	int ret = rc_fault() ? EIO : r->v->modify_qp(r->qp[s], a, mask);

	if (!ret)
		return 0;
	return rc_fail(r, IBVF_RC_FAIL, verb, -ret, "%s on QP %c failed: %s (errno %d)", verb,
		       'A' + s, strerror(ret), ret);
}

static int rc_post_recv(struct rc_run *r, int s)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(r->buf + (2 * (size_t)s + 1) * r->o->msg_size),
		.length = (uint32_t)r->o->msg_size,
		.lkey = r->mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = RC_WRID(s, 1), .sg_list = &sge, .num_sge = 1}, *bad;
	int ret = rc_fault() ? EIO : ibv_post_recv(r->qp[s], &wr, &bad);

	if (ret)
		return rc_verb_fail(r, "ibv_post_recv", ret, NULL);
	return 0;
}

/* Byte @i of message number @seq sent by QP @s. */
static uint8_t rc_pattern(unsigned int seq, int s, size_t i)
{
	return (uint8_t)(seq * 131u + (unsigned int)s * 0x55u + (unsigned int)i);
}

static int rc_post_send(struct rc_run *r, int s)
{
	uint8_t *p = r->buf + 2 * (size_t)s * r->o->msg_size;
	unsigned int seq = r->sends_posted[s];
	struct ibv_sge sge = {
		.addr = (uintptr_t)p,
		.length = (uint32_t)r->o->msg_size,
		.lkey = r->mr->lkey,
	};
	struct ibv_send_wr wr =
				   {
					   .wr_id = RC_WRID(s, 0),
					   .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED,
				   },
			   *bad;
	int ret;

	for (size_t i = 0; i < r->o->msg_size; i++)
		p[i] = rc_pattern(seq, s, i);
	ret = rc_fault() ? EIO : ibv_post_send(r->qp[s], &wr, &bad);
	if (ret)
		return rc_verb_fail(r, "ibv_post_send", ret, NULL);
	r->sends_posted[s]++;
	return 0;
}

static int rc_connect(struct rc_run *r)
{
	uint32_t psn[2];
	uint16_t index[2] = {(uint16_t)r->res->pkey_index, (uint16_t)r->res->peer_pkey_index};
	uint64_t seed = ibvf_mono_ns() ^ ((uint64_t)getpid() << 20);

	psn[0] = (uint32_t)(seed * 2654435761u) & 0xffffff;
	psn[1] = (uint32_t)((seed >> 7) * 40503u + 1) & 0xffffff;
	for (int s = QP_A; s <= QP_B; s++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT,
			.pkey_index = index[s],
			.port_num = r->o->port,
		};

		if (rc_modify(r, s, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
			      "ibv_modify_qp(INIT)"))
			return -r->res->error_errno;
		if (rc_post_recv(r, s))
			return -r->res->error_errno;
	}
	for (int s = QP_A; s <= QP_B; s++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR,
			.path_mtu = r->pa.active_mtu,
			.dest_qp_num = r->qp[!s]->qp_num,
			.rq_psn = psn[!s],
			.max_dest_rd_atomic = 1,
			.min_rnr_timer = RC_MIN_RNR_TIMER,
			.ah_attr = {.dlid = r->pa.lid, .port_num = r->o->port},
		};

		if (r->res->gid_index >= 0) {
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.dgid = r->sgid;
			a.ah_attr.grh.sgid_index = (uint8_t)r->res->gid_index;
			a.ah_attr.grh.hop_limit = RC_HOP_LIMIT;
		}
		if (rc_modify(r, s, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER,
			      "ibv_modify_qp(RTR)"))
			return -r->res->error_errno;
	}
	for (int s = QP_A; s <= QP_B; s++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTS,
			.timeout = RC_TIMEOUT,
			.retry_cnt = RC_RETRY_CNT,
			.rnr_retry = RC_RNR_RETRY,
			.sq_psn = psn[s],
			.max_rd_atomic = 1,
		};

		if (rc_modify(r, s, &a,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
			      "ibv_modify_qp(RTS)"))
			return -r->res->error_errno;
	}
	return 0;
}

/* ------------------------------------------------------- completions -- */

static int rc_async(struct rc_run *r)
{
	struct ibv_async_event ev;

	while (!r->v->get_async_event(r->ctx, &ev)) {
		enum ibv_event_type t = ev.event_type;
		bool ours_qp = (t == IBV_EVENT_QP_FATAL || t == IBV_EVENT_QP_REQ_ERR ||
				t == IBV_EVENT_QP_ACCESS_ERR) &&
			       (ev.element.qp == r->qp[QP_A] || ev.element.qp == r->qp[QP_B]);
		bool port_down = t == IBV_EVENT_PORT_ERR && ev.element.port_num == r->o->port;
		bool fatal = t == IBV_EVENT_DEVICE_FATAL ||
			     (t == IBV_EVENT_CQ_ERR && ev.element.cq == r->cq);

		r->v->ack_async_event(&ev);
		log_debug("rc-check %s: async event %s", r->o->dev, r->v->event_type_str(t));
		if (ours_qp || port_down || fatal)
			return rc_fail(r, IBVF_RC_FAIL, "ibv_get_async_event",
				       t == IBV_EVENT_DEVICE_FATAL ? -ENODEV
				       : port_down		   ? -ENETDOWN
								   : -EIO,
				       "async event %s during the check", r->v->event_type_str(t));
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		return rc_verb_fail(r, "ibv_get_async_event", errno, NULL);
	return 0;
}

static int rc_handle_wc(struct rc_run *r, const struct ibv_wc *wc)
{
	int s = (int)(wc->wr_id >> 1);
	bool recv = wc->wr_id & 1;

	if (wc->status != IBV_WC_SUCCESS)
		return rc_fail(r, IBVF_RC_FAIL, "ibv_poll_cq", -EIO,
			       "%s on QP %c completed with status %s (%d, vendor_err 0x%x)%s",
			       recv ? "receive" : "send", 'A' + s, r->v->wc_status_str(wc->status),
			       wc->status, wc->vendor_err,
			       wc->status == IBV_WC_RETRY_EXC_ERR
				       ? ": the peer never acknowledged (packets lost: P_Key "
					 "mismatch, unresolvable GID, or a port that drops traffic)"
				       : "");
	if (!recv) {
		r->sends_done[s]++;
		return 0;
	}
	if (wc->byte_len != r->o->msg_size)
		return rc_fail(r, IBVF_RC_FAIL, "data_check", -EIO,
			       "QP %c received %u bytes, expected %zu", 'A' + s, wc->byte_len,
			       r->o->msg_size);
	{
		const uint8_t *p = r->buf + (2 * (size_t)s + 1) * r->o->msg_size;
		unsigned int seq = r->recvs_done[s];

		for (size_t i = 0; i < r->o->msg_size; i++)
			if (p[i] != rc_pattern(seq, !s, i))
				return rc_fail(
					r, IBVF_RC_FAIL, "data_check", -EIO,
					"message %u received by QP %c is corrupt at byte %zu", seq,
					'A' + s, i);
	}
	r->recvs_done[s]++;
	return 0;
}

/* Sleep on the completion channel and the async event fd until @deadline. */
static int rc_block(struct rc_run *r, uint64_t t, uint64_t op_deadline, const char *what)
{
	uint64_t deadline = op_deadline < r->deadline_ns ? op_deadline : r->deadline_ns;
	struct pollfd pfd[2] = {
		{.fd = r->chan->fd, .events = POLLIN},
		{.fd = r->ctx->async_fd, .events = POLLIN},
	};
	uint64_t left;
	int n, ret;

	if (t >= deadline) {
		if (t >= r->deadline_ns)
			return rc_liveness(r, t);
		return rc_fail(r, IBVF_RC_FAIL, "timeout", -ETIMEDOUT,
			       "no completion for %s within %u ms (round trip %u): the message "
			       "or its acknowledgement was lost",
			       what, r->o->op_timeout_ms, r->res->iterations + 1);
	}
	left = (deadline - t + 999999) / 1000000;
	if (left > RC_LIVENESS_MS)
		left = RC_LIVENESS_MS;
	n = poll(pfd, 2, (int)left);
	if (n < 0 && errno != EINTR)
		return rc_fail(r, IBVF_RC_ERROR, "poll", -errno, "poll: %s", strerror(errno));
	if (n > 0 && pfd[1].revents) {
		ret = rc_async(r);
		if (ret)
			return ret;
	}
	if (n > 0 && pfd[0].revents) {
		struct ibv_cq *cq;
		void *cq_ctx;

		if (!r->v->get_cq_event(r->chan, &cq, &cq_ctx)) {
			r->cq_events++;
			r->armed = false;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
			return rc_verb_fail(r, "ibv_get_cq_event", errno, NULL);
		}
	}
	return rc_liveness(r, ibvf_mono_ns());
}

/* Wait for one completion: spin for spin_us, then arm and sleep. */
static int rc_next_wc(struct rc_run *r, uint64_t op_deadline, const char *what)
{
	uint64_t spin_end = ibvf_mono_ns() + (uint64_t)r->o->spin_us * 1000u;
	struct ibv_wc wc;

	/* spinning never outlasts a deadline: rc_block() reports it */
	if (spin_end > op_deadline)
		spin_end = op_deadline;
	if (spin_end > r->deadline_ns)
		spin_end = r->deadline_ns;

	for (;;) {
		int n = ibv_poll_cq(r->cq, 1, &wc);
		uint64_t t;
		int ret;

		if (n < 0)
			return rc_verb_fail(r, "ibv_poll_cq", -n, NULL);
		if (n == 1)
			return rc_handle_wc(r, &wc);
		t = ibvf_mono_ns();
		if (t < spin_end)
			continue;
		if (!r->armed) {
			ret = ibv_req_notify_cq(r->cq, 0);
			if (ret)
				return rc_verb_fail(r, "ibv_req_notify_cq", ret, NULL);
			r->armed = true;
			continue; /* poll once more: a completion may have raced the arming */
		}
		ret = rc_block(r, t, op_deadline, what);
		if (ret)
			return ret;
	}
}

static int rc_wait(struct rc_run *r, unsigned int *counter, unsigned int target, const char *what)
{
	uint64_t op_deadline = ibvf_mono_ns() + (uint64_t)r->o->op_timeout_ms * 1000000u;

	while (*counter < target) {
		int ret = rc_next_wc(r, op_deadline, what);

		if (ret)
			return ret;
	}
	return 0;
}

static int rc_send(struct rc_run *r, int s)
{
	/* keep the send queue from overflowing: reap old send completions */
	if (r->sends_posted[s] - r->sends_done[s] >= RC_SQ_DEPTH &&
	    rc_wait(r, &r->sends_done[s], r->sends_posted[s] - RC_SQ_DEPTH + 1,
		    s == QP_A ? "a send on QP A" : "a send on QP B"))
		return -r->res->error_errno;
	return rc_post_send(r, s);
}

/* One round trip: A -> B, B -> A. */
static int rc_round_trip(struct rc_run *r, unsigned int i)
{
	if (rc_send(r, QP_A) ||
	    rc_wait(r, &r->recvs_done[QP_B], i + 1, "the message from QP A to QP B") ||
	    rc_post_recv(r, QP_B) || rc_send(r, QP_B) ||
	    rc_wait(r, &r->recvs_done[QP_A], i + 1, "the reply from QP B to QP A"))
		return -r->res->error_errno;
	return 0;
}

static int rc_pingpong(struct rc_run *r)
{
	unsigned int total = r->o->warmup + r->o->iterations;

	r->samples = calloc(r->o->iterations, sizeof(*r->samples));
	if (!r->samples)
		return rc_fail(r, IBVF_RC_ERROR, "calloc", -ENOMEM, "out of memory");
	for (unsigned int i = 0; i < total; i++) {
		uint64_t t0 = ibvf_mono_ns(), t1;

		if (rc_round_trip(r, i))
			return -r->res->error_errno;
		t1 = ibvf_mono_ns();
		if (i >= r->o->warmup)
			r->samples[r->res->iterations++] = t1 - t0;
		if (rc_post_recv(r, QP_A) || rc_liveness(r, t1))
			return -r->res->error_errno;
	}
	/* every send must have completed before the QPs are destroyed */
	for (int s = QP_A; s <= QP_B; s++)
		if (rc_wait(r, &r->sends_done[s], r->sends_posted[s], "the last sends"))
			return -r->res->error_errno;
	return 0;
}

/* --------------------------------------------------------------- check -- */

static int rc_run_check(const struct ibvf_rc_opts *o, const struct ibvf_verbs *v,
			struct ibvf_rc_result *res, char *err, size_t errlen,
			const char *netns_label)
{
	struct rc_run r = {.o = o,
			   .res = res,
			   .err = err,
			   .errlen = errlen,
			   .netns_label = netns_label,
			   .v = v};
	uint64_t t0 = ibvf_mono_ns();
	int ret;

	r.deadline_ns = t0 + (uint64_t)o->timeout_ms * 1000000u;
	r.next_live_ns = t0;
	ret = rc_open(&r);
	if (!ret)
		ret = rc_port(&r);
	if (!ret)
		ret = rc_pkey(&r);
	if (!ret)
		ret = rc_gid(&r);
	if (!ret) {
		log_debug("rc-check %s port %u: pkey 0x%04x index %d/%d, gid %d %s%s%s, mtu %u",
			  o->dev, o->port, res->pkey, res->pkey_index, res->peer_pkey_index,
			  res->gid_index, res->gid, res->gid_netdev[0] ? " on " : "",
			  res->gid_netdev, res->mtu);
		ret = rc_setup(&r);
	}
	if (!ret)
		ret = rc_connect(&r);
	if (!ret)
		ret = rc_pingpong(&r);
	rc_stats(r.samples, res->iterations, res);
	rc_release(&r);
	res->elapsed_ms = (double)(ibvf_mono_ns() - t0) / 1e6;
	if (ret)
		return ret;
	if (o->p99_max_us > 0 && res->p99_us > o->p99_max_us)
		return rc_fail(&r, IBVF_RC_SLOW, "latency_bound", -ERANGE,
			       "p99 round trip %.1f us exceeds the bound of %.1f us (p50 %.1f us, "
			       "max %.1f us over %u round trips)",
			       res->p99_us, o->p99_max_us, res->p50_us, res->max_us,
			       res->iterations);
	res->status = IBVF_RC_PASS;
	return 0;
}

static void rc_result_init(struct ibvf_rc_result *res, const struct ibvf_rc_opts *o)
{
	memset(res, 0, sizeof(*res));
	res->pkey_index = res->peer_pkey_index = res->gid_index = -1;
	if (o->dev)
		snprintf(res->dev, sizeof(res->dev), "%s", o->dev);
	res->port = o->port;
	res->msg_size = o->msg_size;
}

/* ------------------------------------------------------ netns (child) -- */

struct rc_child_msg {
	int ret;
	struct ibvf_rc_result res;
	char err[IBVF_ERR_LEN];
};

/* In the child: enter the netns and give it its own sysfs (as ip-netns(8)). */
static int rc_enter_netns(int fd, const char *label, struct rc_child_msg *m)
{
	const char *verb = NULL;

	if (setns(fd, CLONE_NEWNET))
		verb = "setns(CLONE_NEWNET)";
	else if (unshare(CLONE_NEWNS))
		verb = "unshare(CLONE_NEWNS)";
	else if (mount("none", "/", NULL, MS_REC | MS_SLAVE, NULL))
		verb = "mount(/, MS_SLAVE)";
	else if (umount2("/sys", MNT_DETACH) && errno != EINVAL)
		verb = "umount(/sys)";
	else if (mount("sysfs", "/sys", "sysfs", 0, NULL))
		verb = "mount(sysfs)";
	if (!verb)
		return 0;
	m->ret = -errno;
	m->res.status = IBVF_RC_ERROR;
	m->res.error_errno = errno;
	snprintf(m->res.verb, sizeof(m->res.verb), "%s", verb);
	snprintf(m->err, sizeof(m->err), "netns %s: %s failed: %s (errno %d)", label, verb,
		 strerror(errno), errno);
	return -1;
}

static void rc_child(int fd, int wfd, const struct ibvf_rc_opts *o, const struct ibvf_verbs *v,
		     const char *label)
{
	struct ibvf_rc_opts co = *o;
	struct rc_child_msg m;
	size_t off = 0;

#ifdef IBVF_RC_FAULT_INJECT
	if (rc_fault_child_delay_ms)
		usleep(rc_fault_child_delay_ms * 1000u);
#endif
	memset(&m, 0, sizeof(m));
	rc_result_init(&m.res, o);
	co.netns = NULL;
	if (!rc_enter_netns(fd, label, &m))
		m.ret = rc_run_check(&co, v, &m.res, m.err, sizeof(m.err), label);
	while (off < sizeof(m)) {
		ssize_t n = write(wfd, (char *)&m + off, sizeof(m) - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	_exit(0);
}

static int rc_reap(pid_t pid, bool kill_it)
{
	int st = 0;

	if (kill_it)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

static int __attribute__((format(printf, 7, 8)))
rc_parent_err(struct ibvf_rc_result *res, enum ibvf_rc_status st, const char *verb, int code,
	      char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	res->status = st;
	snprintf(res->verb, sizeof(res->verb), "%s", verb);
	res->error_errno = -code;
	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static int rc_check_netns(const struct ibvf_rc_opts *o, const struct ibvf_verbs *v,
			  struct ibvf_rc_result *res, char *err, size_t errlen)
{
	uint64_t deadline = ibvf_mono_ns() + ((uint64_t)o->timeout_ms + 2000u) * 1000000u;
	struct rc_child_msg m;
	char path[4096], err2[IBVF_ERR_LEN];
	size_t off = 0;
	int fd, p[2], ret, st;
	pid_t pid;

#define RC_ERR(st_, verb_, code_, ...)                                                             \
	rc_parent_err(res, st_, verb_, code_, err, errlen, __VA_ARGS__)
	ret = ibvf_rc_netns_path(o->netns, path, sizeof(path), err, errlen);
	if (ret) {
		res->status = IBVF_RC_INVALID;
		snprintf(res->verb, sizeof(res->verb), "options");
		res->error_errno = -ret;
		return ret;
	}
	/* non-blocking, and it must be a network namespace (file_read.h) */
	fd = ibvf_file_open_netns(path, err2, sizeof(err2));
	if (fd < 0)
		return RC_ERR(fd == -EINVAL ? IBVF_RC_INVALID : IBVF_RC_ERROR, "open(netns)", fd,
			      "netns %s: cannot open %s: %s", o->netns, path, err2);
	if (pipe2(p, O_CLOEXEC)) {
		ret = -errno;
		close(fd);
		return RC_ERR(IBVF_RC_ERROR, "pipe", ret, "pipe: %s", strerror(-ret));
	}
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(fd);
		close(p[0]);
		close(p[1]);
		return RC_ERR(IBVF_RC_ERROR, "fork", ret, "fork: %s", strerror(-ret));
	}
	if (pid == 0) {
		close(p[0]);
		rc_child(fd, p[1], o, v, o->netns);
	}
	close(fd);
	close(p[1]);
	while (off < sizeof(m)) {
		uint64_t t = ibvf_mono_ns();
		struct pollfd pfd = {.fd = p[0], .events = POLLIN};
		ssize_t n;

		if (t >= deadline)
			break;
		n = poll(&pfd, 1,
			 (deadline - t) / 1000000u >= 1000 ? 1000
							   : (int)((deadline - t) / 1000000u) + 1);
		if (n == 0 || (n < 0 && errno == EINTR))
			continue; /* the deadline is checked at the top */
		if (n < 0)
			break;
		n = read(p[0], (char *)&m + off, sizeof(m) - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(p[0]);
	st = rc_reap(pid, off < sizeof(m));
	if (off < sizeof(m)) {
		if (ibvf_mono_ns() >= deadline)
			return RC_ERR(
				IBVF_RC_FAIL, "timeout", -ETIMEDOUT,
				"netns %s: the check did not finish within %u ms; its process "
				"was killed",
				o->netns, o->timeout_ms);
		return RC_ERR(IBVF_RC_ERROR, "fork", -EIO,
			      "netns %s: the check process died (%s %d) without a result", o->netns,
			      WIFSIGNALED(st) ? "signal" : "exit status",
			      WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
#undef RC_ERR
	*res = m.res;
	m.err[sizeof(m.err) - 1] = 0;
	if (m.ret)
		ibvf_errf(err, errlen, m.ret, "%s", m.err);
	return m.ret;
}

int ibvf_rc_check(const struct ibvf_rc_opts *o, struct ibvf_rc_result *res, char *err,
		  size_t errlen)
{
	struct rc_run r = {.o = o, .res = res, .err = err, .errlen = errlen};
	char lerr[IBVF_ERR_LEN];
	int ret;

	rc_result_init(res, o);
	ret = rc_validate(&r);
	if (ret)
		return ret;
	/* in this process, before a netns child forks: the child inherits it */
	ret = ibvf_verbs_load(o->verbs_lib, &r.v, lerr, sizeof(lerr));
	if (ret)
		return rc_fail(&r, IBVF_RC_ERROR, "dlopen", ret, "%s", lerr);
	if (o->netns)
		return rc_check_netns(o, r.v, res, err, errlen);
	return rc_run_check(o, r.v, res, err, errlen, NULL);
}
