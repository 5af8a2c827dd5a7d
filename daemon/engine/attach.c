// SPDX-License-Identifier: MIT
/*
 * The attach engine: JSON-RPC methods of include/ibvf/api.h executed as
 * operations ("ops") on a worker pool, with the attach state machine
 * persisted in the GUID pool store at every step (see attach.h).
 *
 * Threads: the loop thread parses requests, orders operations on the same
 * owner or VF (keys) and sends replies; workers run the blocking steps; the
 * SM batcher's thread completes SM requests and hands the op back to the
 * workers, so a prepare holds no worker while its SM batch is open.
 */
#include "attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "attach_int.h"
#include "err.h"
#include "log.h"

enum op_kind {
	OP_PREPARE,
	OP_COMMIT,
	OP_RELEASE,
	OP_STATUS,
	OP_LIST,
	OP_GC,
	OP_AUDIT,
	OP_UNDO, /* internal: roll back a prepare whose reply was not delivered */
};

enum op_phase {
	PH_BEGIN,
	PH_SM_DONE, /* SM adds completed: confirm, wait for the port */
	PH_DONE,
};

struct op {
	struct ibvf_engine *e;
	enum op_kind kind;
	enum op_phase phase;
	ibvf_reply_fn reply;
	void *ctx;
	struct keyhold keys;
	bool holds_keys;

	/* parameters */
	struct ibvf_owner owner;
	char pci[32];
	uint16_t pkeys[IBVF_POOL_MAX_PKEYS]; /* with membership bit */
	size_t n_pkeys;
	uint64_t req_guid;
	char link_state[8];
	char network[254];
	bool has_network;
	bool fix;
	json_t *valid;	      /* gc: [{container_id, ifname}] */
	size_t limit, offset; /* list */

	/* progress */
	int64_t deadline;
	struct ibvf_alloc a;
	bool created; /* this op allocated the record */
	struct ibvf_attach_vf vf;
	struct ibvf_port_result port;
	bool expecting; /* counted in the batcher's expected requests */
	int sm_pending; /* under e->lock */
	int sm_status;
	char sm_msg[IBVF_ERR_LEN + 96];

	/* outcome */
	json_t *result;
	int code, err_no;
	char step[32];
	char msg[IBVF_ERR_LEN + 128];

	struct op *next; /* waiting list */
};

static void op_run(void *arg);
static void op_finish(void *arg);

/* ------------------------------------------------------------ helpers -- */

void eng_pool_lock(struct ibvf_engine *e)
{
	pthread_mutex_lock(&e->pool_lock);
}

void eng_pool_unlock(struct ibvf_engine *e)
{
	pthread_mutex_unlock(&e->pool_lock);
}

bool eng_in_ranges(const struct ibvf_engine *e, uint64_t g)
{
	for (size_t i = 0; i < e->n_ranges; i++)
		if (g >= e->ranges[i].start && g <= e->ranges[i].end)
			return true;
	return false;
}

static void owner_key(const struct ibvf_owner *o, char *buf, size_t len)
{
	snprintf(buf, len, "%.128s/%.16s", o->container_id, o->ifname);
}

static bool keys_conflict(const struct keyhold *a, const struct keyhold *b)
{
	return (a->owner[0] && !strcmp(a->owner, b->owner)) ||
	       (a->pci[0] && !strcmp(a->pci, b->pci));
}

/* Under e->lock. */
static bool keys_free(struct ibvf_engine *e, const struct keyhold *k, const struct op *upto)
{
	for (struct keyhold *h = e->held; h; h = h->next)
		if (keys_conflict(h, k))
			return false;
	/* FIFO: do not overtake an earlier waiting op on the same key */
	for (struct op *w = e->waiting; w && w != upto; w = w->next)
		if (keys_conflict(&w->keys, k))
			return false;
	return true;
}

bool eng_try_keys(struct ibvf_engine *e, struct keyhold *k)
{
	bool ok;

	pthread_mutex_lock(&e->lock);
	ok = keys_free(e, k, NULL);
	if (ok) {
		k->next = e->held;
		e->held = k;
	}
	pthread_mutex_unlock(&e->lock);
	return ok;
}

static void kick_waiting(void *arg);

static void unlink_keys(struct ibvf_engine *e, struct keyhold *k)
{
	for (struct keyhold **pp = &e->held; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			break;
		}
}

void eng_drop_keys(struct ibvf_engine *e, struct keyhold *k)
{
	bool kick;

	pthread_mutex_lock(&e->lock);
	unlink_keys(e, k);
	kick = e->waiting != NULL;
	pthread_mutex_unlock(&e->lock);
	if (kick)
		ibvf_loop_post(e->loop, kick_waiting, e);
}

static int submit(struct op *op)
{
	int ret = ibvf_workq_submit(op->e->wq, op_run, NULL, op);

	if (ret)
		log_err("cannot queue a request: %s", strerror(-ret));
	return ret;
}

/* Loop thread: start every waiting op whose keys are free now. */
static void kick_waiting(void *arg)
{
	struct ibvf_engine *e = arg;
	struct op *start = NULL, **tail = &start;

	pthread_mutex_lock(&e->lock);
	for (struct op **pp = &e->waiting; *pp;) {
		struct op *op = *pp;

		if (keys_free(e, &op->keys, op)) {
			*pp = op->next;
			op->next = NULL;
			op->keys.next = e->held;
			e->held = &op->keys;
			op->holds_keys = true;
			*tail = op;
			tail = &op->next;
		} else {
			pp = &op->next;
		}
	}
	pthread_mutex_unlock(&e->lock);
	while (start) {
		struct op *op = start;

		start = op->next;
		op->next = NULL;
		if (submit(op)) {
			op->code = IBVF_RPC_INTERNAL_ERROR;
			snprintf(op->msg, sizeof(op->msg), "cannot queue the request");
			op->phase = PH_DONE;
			op_finish(op);
		}
	}
}

static void set_error(struct op *op, int code, int err_no, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void set_error(struct op *op, int code, int err_no, const char *step, const char *fmt, ...)
{
	va_list ap;

	op->code = code;
	op->err_no = err_no < 0 ? -err_no : err_no;
	snprintf(op->step, sizeof(op->step), "%s", step);
	va_start(ap, fmt);
	vsnprintf(op->msg, sizeof(op->msg), fmt, ap);
	va_end(ap);
	json_decref(op->result);
	op->result = NULL;
}

static json_t *guid_json(uint64_t g)
{
	char s[IBVF_GUID_STR_LEN];

	return json_string(ibvf_guid_format(g, s));
}

static json_t *pkey_json(uint16_t pk)
{
	char s[8];

	snprintf(s, sizeof(s), "0x%04x", pk);
	return json_string(s);
}

static json_t *owner_json(const struct ibvf_owner *o)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "container_id", o->container_id, "ifname",
			 o->ifname, "pod_namespace", o->pod_namespace, "pod_name", o->pod_name,
			 "pod_uid", o->pod_uid, "network", o->network);
}

static json_t *pkeys_json(const uint16_t *pk, size_t n, const struct ibvf_port_result *port)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack(
			"{s:o,s:s}", "pkey", pkey_json(ibvf_pkey_key(pk[i])), "membership",
			ibvf_membership_name(ibvf_pkey_is_full(pk[i]) ? IBVF_MEMBER_FULL
								      : IBVF_MEMBER_LIMITED));

		if (port)
			json_object_set_new(o, "index", json_integer(port->pkey_index[i]));
		json_array_append_new(arr, o);
	}
	return arr;
}

static bool deadline_passed(const struct op *op)
{
	return op->deadline && ibvf_mono_ms() >= op->deadline;
}

static bool cancelled(struct ibvf_engine *e)
{
	bool c;

	pthread_mutex_lock(&e->lock);
	c = e->cancel;
	pthread_mutex_unlock(&e->lock);
	return c;
}

/* ------------------------------------------------------------- params -- */

static int copy_str(json_t *o, const char *key, char *dst, size_t len, bool required, char *err,
		    size_t errlen)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v)) {
		if (required)
			return ibvf_errf(err, errlen, -EINVAL, "missing \"%s\"", key);
		return 0;
	}
	if (!json_is_string(v))
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" must be a string", key);
	if (json_string_length(v) >= len)
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" is longer than %zu bytes", key,
				 len - 1);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" contains a NUL byte", key);
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	if (required && !dst[0])
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" is empty", key);
	return 0;
}

static int parse_owner(json_t *params, struct ibvf_owner *o, char *err, size_t errlen)
{
	json_t *j = json_object_get(params, "owner");
	int ret;

	memset(o, 0, sizeof(*o));
	if (!json_is_object(j))
		return ibvf_errf(err, errlen, -EINVAL, "missing \"owner\" object");
	ret = copy_str(j, "container_id", o->container_id, sizeof(o->container_id), true, err,
		       errlen);
	if (!ret)
		ret = copy_str(j, "ifname", o->ifname, sizeof(o->ifname), true, err, errlen);
	if (!ret)
		ret = copy_str(j, "pod_namespace", o->pod_namespace, sizeof(o->pod_namespace),
			       false, err, errlen);
	if (!ret)
		ret = copy_str(j, "pod_name", o->pod_name, sizeof(o->pod_name), false, err, errlen);
	if (!ret)
		ret = copy_str(j, "pod_uid", o->pod_uid, sizeof(o->pod_uid), false, err, errlen);
	if (!ret)
		ret = copy_str(j, "network", o->network, sizeof(o->network), false, err, errlen);
	if (!ret && strchr(o->container_id, '/'))
		ret = ibvf_errf(err, errlen, -EINVAL, "container_id contains '/'");
	return ret ? ibvf_err_prefix(err, errlen, ret, "owner") : 0;
}

/* PCI address "DDDD:BB:DD.F" (lowercase hex), as the kernel names PCI devices. */
static bool pci_valid(const char *s)
{
	static const char pat[] = "hhhh:hh:hh.d";

	if (strlen(s) != sizeof(pat) - 1)
		return false;
	for (size_t i = 0; pat[i]; i++) {
		char c = s[i];

		if (pat[i] == 'h' && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		if (pat[i] == 'd' && !(c >= '0' && c <= '7'))
			return false;
		if ((pat[i] == ':' || pat[i] == '.') && c != pat[i])
			return false;
	}
	return true;
}

static int parse_pkeys(struct ibvf_engine *e, json_t *params, struct op *op, char *err,
		       size_t errlen)
{
	json_t *arr = json_object_get(params, "pkeys"), *it;
	size_t i;

	if (!json_is_array(arr) || json_array_size(arr) == 0)
		return ibvf_errf(err, errlen, -EINVAL,
				 "\"pkeys\" must be a non-empty array of {pkey, membership}");
	if (json_array_size(arr) > IBVF_POOL_MAX_PKEYS)
		return ibvf_errf(err, errlen, -EINVAL, "at most %d PKeys", IBVF_POOL_MAX_PKEYS);
	json_array_foreach(arr, i, it)
	{
		json_t *pk = json_object_get(it, "pkey"), *m = json_object_get(it, "membership");
		enum ibvf_membership mem = IBVF_MEMBER_FULL;
		uint16_t v;
		int ret;

		if (!json_is_object(it))
			return ibvf_errf(err, errlen, -EINVAL, "pkeys[%zu] is not an object", i);
		if (json_is_string(pk)) {
			ret = ibvf_pkey_parse(json_string_value(pk), &v, err, errlen);
			if (ret)
				return ibvf_err_prefix(err, errlen, ret, "pkeys[%zu]", i);
		} else if (json_is_integer(pk) && json_integer_value(pk) >= 0 &&
			   json_integer_value(pk) <= 0xffff) {
			v = (uint16_t)json_integer_value(pk);
		} else {
			return ibvf_errf(err, errlen, -EINVAL,
					 "pkeys[%zu].pkey: expected \"0x....\"", i);
		}
		if (m && (!json_is_string(m) ||
			  ibvf_membership_parse(json_string_value(m), &mem, err, errlen)))
			return ibvf_errf(err, errlen, -EINVAL,
					 "pkeys[%zu].membership: expected \"full\" or \"limited\"",
					 i);
		ret = ibvf_pkey_check_tenant(v, e->allow_default_pkey, err, errlen);
		if (ret)
			return ibvf_err_prefix(err, errlen, ret, "pkeys[%zu]", i);
		v = ibvf_pkey_key(v) | (mem == IBVF_MEMBER_FULL ? IBVF_PKEY_FULL_BIT : 0);
		for (size_t k = 0; k < op->n_pkeys; k++)
			if (ibvf_pkey_key(op->pkeys[k]) == ibvf_pkey_key(v))
				return ibvf_errf(err, errlen, -EINVAL, "PKey 0x%04x given twice",
						 ibvf_pkey_key(v));
		op->pkeys[op->n_pkeys++] = v;
	}
	return 0;
}

static int parse_prepare(struct ibvf_engine *e, json_t *params, struct op *op, char *err,
			 size_t errlen)
{
	json_t *g = json_object_get(params, "guid");
	int ret = parse_owner(params, &op->owner, err, errlen);

	if (!ret)
		ret = copy_str(params, "pci", op->pci, sizeof(op->pci), true, err, errlen);
	if (!ret && !pci_valid(op->pci))
		ret = ibvf_errf(err, errlen, -EINVAL,
				"\"pci\": '%s' is not a PCI address like 0000:03:00.2", op->pci);
	if (!ret)
		ret = parse_pkeys(e, params, op, err, errlen);
	if (!ret && g && !json_is_null(g)) {
		if (!json_is_string(g))
			return ibvf_errf(err, errlen, -EINVAL, "\"guid\" must be a string");
		ret = ibvf_guid_parse(json_string_value(g), &op->req_guid, err, errlen);
		if (!ret && !ibvf_guid_is_assignable(op->req_guid))
			ret = ibvf_errf(err, errlen, -EINVAL, "\"guid\" %s is 0 or all-ones",
					json_string_value(g));
	}
	if (!ret)
		ret = copy_str(params, "link_state", op->link_state, sizeof(op->link_state), false,
			       err, errlen);
	if (!ret && op->link_state[0] && strcmp(op->link_state, "auto") &&
	    strcmp(op->link_state, "enable") && strcmp(op->link_state, "disable"))
		ret = ibvf_errf(err, errlen, -EINVAL,
				"\"link_state\" must be \"auto\", \"enable\" or \"disable\"");
	return ret;
}

static int parse_gc(json_t *params, struct op *op, char *err, size_t errlen)
{
	json_t *v = json_object_get(params, "valid"), *it;
	size_t i;
	int ret = copy_str(params, "network", op->network, sizeof(op->network), false, err, errlen);

	if (ret)
		return ret;
	op->has_network = op->network[0] != 0;
	if (!json_is_array(v))
		return ibvf_errf(err, errlen, -EINVAL,
				 "\"valid\" must be an array of {container_id, ifname}");
	json_array_foreach(v, i, it)
	{
		if (!json_is_string(json_object_get(it, "container_id")) ||
		    !json_is_string(json_object_get(it, "ifname")))
			return ibvf_errf(err, errlen, -EINVAL,
					 "valid[%zu] needs container_id and ifname strings", i);
	}
	op->valid = json_incref(v);
	return 0;
}

static int parse_list(json_t *params, struct op *op, char *err, size_t errlen)
{
	json_t *l = json_object_get(params, "limit"), *o = json_object_get(params, "offset");
	int ret = copy_str(params, "network", op->network, sizeof(op->network), false, err, errlen);

	op->has_network = op->network[0] != 0;
	if (!ret && l && (!json_is_integer(l) || json_integer_value(l) < 1))
		ret = ibvf_errf(err, errlen, -EINVAL, "\"limit\" must be a positive integer");
	if (!ret && o && (!json_is_integer(o) || json_integer_value(o) < 0))
		ret = ibvf_errf(err, errlen, -EINVAL, "\"offset\" must be >= 0");
	op->limit = l ? (size_t)json_integer_value(l) : 0;
	op->offset = o ? (size_t)json_integer_value(o) : 0;
	return ret;
}

/* --------------------------------------------------------------- undo -- */

/* The GUIDs a released VF gets: parked value, else pre-attach (0 if it was ours). */
static void reset_target(struct ibvf_engine *e, const struct ibvf_alloc *a, uint64_t *node,
			 uint64_t *port)
{
	pthread_mutex_lock(&e->lock);
	*node = *port = e->parked_guid;
	pthread_mutex_unlock(&e->lock);
	if (*port)
		return;
	*node = eng_in_ranges(e, a->prev_node_guid) ? 0 : a->prev_node_guid;
	*port = eng_in_ranges(e, a->prev_port_guid) ? 0 : a->prev_port_guid;
}

/* Reset the VF of @a when it still carries @a's GUID (or cannot be read). */
static int reset_vf(struct ibvf_engine *e, const struct ibvf_alloc *a, char *err, size_t errlen)
{
	struct ibvf_attach_vf vf;
	char s[IBVF_GUID_STR_LEN], e2[IBVF_ERR_LEN];
	uint64_t node, port;
	int ret;

	if (!a->pci[0])
		return 0;
	ret = e->vf.lookup(e->vf.ctx, a->pci, &vf, e2, sizeof(e2));
	if (ret == -ENOENT || ret == -ENODEV) {
		log_notice("VF %s (PF %s VF %d) is gone; nothing to reset for GUID %s", a->pci,
			   a->pf, a->vf_index, ibvf_guid_format(a->guid, s));
		return 0;
	}
	if (ret)
		return ibvf_errf(err, errlen, ret, "VF %s: %s", a->pci, e2);
	if (vf.guids_known && vf.port_guid != a->guid && vf.node_guid != a->guid)
		return 0; /* not ours (any more) */
	reset_target(e, a, &node, &port);
	ret = e->vf.program(e->vf.ctx, &vf, node, port,
			    a->prev_link_state[0] ? a->prev_link_state : NULL, e2, sizeof(e2));
	if (ret)
		return ibvf_errf(err, errlen, ret, "resetting VF %s (PF %s VF %d) from GUID %s: %s",
				 a->pci, a->pf, a->vf_index, ibvf_guid_format(a->guid, s), e2);
	log_info("PF %s VF %d (%s): GUID %s removed, VF GUID now %s", a->pf, a->vf_index, a->pci,
		 ibvf_guid_format(a->guid, s), port ? "pre-attach/parked" : "0");
	return 0;
}

/* First half of a walk-back: persist "releasing". */
static int undo_begin(struct ibvf_engine *e, struct ibvf_alloc *a, char *err, size_t errlen)
{
	int ret = 0;

	if (a->state != IBVF_ALLOC_RELEASING) {
		a->state = IBVF_ALLOC_RELEASING;
		eng_pool_lock(e);
		ret = ibvf_pool_update(e->pool, a, err, errlen);
		eng_pool_unlock(e);
	}
	return ret;
}

/* Second half, after the SM removal: VF reset, then pool release (or keep). */
static int undo_finish(struct ibvf_engine *e, struct ibvf_alloc *a, bool sm_failed,
		       bool *sm_pending, char *err, size_t errlen)
{
	char s[IBVF_GUID_STR_LEN];
	int ret;

	*sm_pending = false;
	ret = reset_vf(e, a, err, errlen);
	if (ret) {
		log_err("%s", err);
		return ret;
	}
	if (sm_failed) {
		/* the VF is clean: unbind the record from it, keep it for the SM removal */
		a->pci[0] = 0;
		a->pf[0] = 0;
		a->vf_index = -1;
		eng_pool_lock(e);
		ret = ibvf_pool_update(e->pool, a, err, errlen);
		eng_pool_unlock(e);
		*sm_pending = true;
		return ret;
	}
	eng_pool_lock(e);
	ret = ibvf_pool_release(e->pool, a->guid, err, errlen);
	eng_pool_unlock(e);
	if (ret < 0)
		return ret;
	log_info("GUID %s released (container %.12s ifname %s)", ibvf_guid_format(a->guid, s),
		 a->owner.container_id, a->owner.ifname);
	return 0;
}

int eng_undo(struct ibvf_engine *e, struct ibvf_alloc *a, bool sm_touched, bool *sm_pending,
	     char *err, size_t errlen)
{
	char s[IBVF_GUID_STR_LEN], e2[IBVF_ERR_LEN + 96];
	bool sm_failed = false;
	int ret;

	*sm_pending = false;
	ibvf_guid_format(a->guid, s);
	ret = undo_begin(e, a, err, errlen);
	if (ret)
		return ret;
	pthread_mutex_lock(&e->lock);
	if (sm_touched && !e->sm_ok) {
		/* no SM to talk to (start-up with the SM down): do not sit in retries here,
		 * free the VF now and leave the SM removal to a later pass */
		sm_failed = true;
		sm_touched = false;
	}
	pthread_mutex_unlock(&e->lock);
	for (size_t i = 0; sm_touched && i < a->n_pkeys; i++) {
		struct ibvf_sm_member m = {.guid = a->guid};

		ret = ibvf_sm_batch_call(e->batch, IBVF_SM_REQ_REMOVE, ibvf_pkey_key(a->pkeys[i]),
					 &m, ibvf_mono_ms() + 30000, e2, sizeof(e2));
		if (ret) {
			log_warn(
				"GUID %s PKey 0x%04x: SM removal failed, reconciliation will retry: "
				"%s",
				s, ibvf_pkey_key(a->pkeys[i]), e2);
			sm_failed = true;
		}
	}
	return undo_finish(e, a, sm_failed, sm_pending, err, errlen);
}

/* Roll a failed prepare back; keeps the error already set on @op. */
static void rollback(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN];
	bool pending;
	int ret;

	if (!op->created)
		return;
	ret = eng_undo(e, &op->a, op->a.state >= IBVF_ALLOC_SM_REQUESTED, &pending, err,
		       sizeof(err));
	if (ret) {
		size_t l = strlen(op->msg);

		snprintf(op->msg + l, sizeof(op->msg) - l, "; rollback failed: %.200s", err);
	}
}

/* ------------------------------------------------------------ prepare -- */

static int alloc_code(int ret)
{
	switch (ret) {
	case -ENOSPC:
		return IBVF_RPC_POOL_EXHAUSTED;
	case -EEXIST:
	case -EBUSY:
	case -ERANGE:
	case -EINVAL:
		return IBVF_RPC_GUID_CONFLICT;
	default:
		return IBVF_RPC_INTERNAL_ERROR;
	}
}

static int store_state(struct op *op, enum ibvf_alloc_state st)
{
	char err[IBVF_ERR_LEN];
	int ret;

	op->a.state = st;
	eng_pool_lock(op->e);
	ret = ibvf_pool_update(op->e->pool, &op->a, err, sizeof(err));
	eng_pool_unlock(op->e);
	if (ret)
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, ibvf_alloc_state_name(st), "%s", err);
	return ret;
}

static void prepare_result(struct op *op)
{
	json_t *r;

	r = json_pack("{s:o,s:s,s:i,s:s,s:s,s:s,s:o,s:o,s:i,s:i,s:s,s:o,s:s}", "guid",
		      guid_json(op->a.guid), "pf", op->vf.pf, "vf_index", op->vf.vf_index, "pci",
		      op->vf.pci, "netdev", op->vf.netdev, "rdma_dev", op->vf.rdma_dev, "node_guid",
		      guid_json(op->a.guid), "port_guid", guid_json(op->a.guid), "lid",
		      (int)op->port.lid, "sm_lid", (int)op->port.sm_lid, "port_state",
		      op->port.state, "pkeys", pkeys_json(op->a.pkeys, op->a.n_pkeys, &op->port),
		      "state", ibvf_alloc_state_name(op->a.state));
	json_decref(op->result);
	op->result = r;
}

static void sm_done(void *arg, int status, const char *msg)
{
	struct op *op = arg;
	struct ibvf_engine *e = op->e;
	bool last;

	pthread_mutex_lock(&e->lock);
	if (status && !op->sm_status) {
		op->sm_status = status;
		snprintf(op->sm_msg, sizeof(op->sm_msg), "%s", msg);
	}
	last = --op->sm_pending == 0;
	pthread_mutex_unlock(&e->lock);
	if (last && submit(op)) {
		/* no worker can take it: finish with an error on the loop thread */
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ENOMEM, "sm_add", "cannot queue");
		op->phase = PH_DONE;
		ibvf_loop_post(e->loop, op_finish, op);
	}
}

/* The op stops being an expected SM request (it submits now, or never will). */
static bool op_arrived(struct op *op)
{
	bool was = op->expecting;

	op->expecting = false;
	return was;
}

/*
 * Submit one SM request per PKey of op->a; the last completion resubmits the
 * op to the workers. The op must not be touched after this returns.
 */
static void submit_sm(struct op *op, enum ibvf_sm_req_kind kind)
{
	struct ibvf_engine *e = op->e;
	size_t n = op->a.n_pkeys;
	uint16_t pk[IBVF_POOL_MAX_PKEYS];
	uint64_t g = op->a.guid;
	int64_t dl = op->deadline ? op->deadline : ibvf_mono_ms() + 30000;
	bool exp = op_arrived(op);
	int ret;

	op->phase = PH_SM_DONE;
	op->sm_status = 0;
	op->sm_pending = (int)n;
	/* copy first: the op may move on (another worker) as soon as the last is queued */
	memcpy(pk, op->a.pkeys, sizeof(pk));
	for (size_t i = 0; i < n; i++) {
		struct ibvf_sm_member m = {
			.guid = g,
			.membership =
				ibvf_pkey_is_full(pk[i]) ? IBVF_MEMBER_FULL : IBVF_MEMBER_LIMITED,
		};

		ret = ibvf_sm_batch_submit(e->batch, kind, ibvf_pkey_key(pk[i]), &m, NULL, dl,
					   sm_done, op);
		if (ret)
			sm_done(op, ret, "SM batcher refused the request");
	}
	if (exp)
		ibvf_sm_batch_expect(e->batch, -1);
}

/* Wait for the port and fill op->port; 0 or error already set on @op. */
static int wait_port(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN];
	int64_t dl;
	int ret;

	pthread_mutex_lock(&e->lock);
	dl = ibvf_mono_ms() + e->port_timeout_ms;
	pthread_mutex_unlock(&e->lock);
	if (op->deadline && op->deadline < dl)
		dl = op->deadline;
	memset(&op->port, 0, sizeof(op->port));
	for (size_t i = 0; i < IBVF_POOL_MAX_PKEYS; i++)
		op->port.pkey_index[i] = -1;
	ret = e->port.wait(e->port.ctx, &op->vf, op->a.guid, op->a.pkeys, op->a.n_pkeys, dl,
			   &op->port, err, sizeof(err));
	if (ret)
		set_error(op, deadline_passed(op) ? IBVF_RPC_DEADLINE : IBVF_RPC_PORT_NOT_READY,
			  ret, "port_wait", "PF %s VF %d (%s) GUID %016llx: port not ready: %s",
			  op->vf.pf, op->vf.vf_index, op->pci, (unsigned long long)op->a.guid, err);
	return ret;
}

/* An owner that already holds a ready attachment on this VF: answer it again. */
static void prepare_existing(struct op *op)
{
	char s[IBVF_GUID_STR_LEN];

	if (strcmp(op->a.pci, op->pci)) {
		set_error(op, IBVF_RPC_GUID_CONFLICT, EEXIST, "allocate",
			  "container %.64s ifname %s already holds GUID %s on VF %s",
			  op->owner.container_id, op->owner.ifname, ibvf_guid_format(op->a.guid, s),
			  op->a.pci[0] ? op->a.pci : "(none)");
		return;
	}
	if (op->req_guid && op->req_guid != op->a.guid) {
		set_error(op, IBVF_RPC_GUID_CONFLICT, EEXIST, "allocate",
			  "container %.64s ifname %s already holds GUID %s", op->owner.container_id,
			  op->owner.ifname, ibvf_guid_format(op->a.guid, s));
		return;
	}
	if (op->a.state == IBVF_ALLOC_HANDED) {
		/* the VF is in its Pod: its port is not ours to read; answer what we know */
		memset(&op->port, 0, sizeof(op->port));
		for (size_t i = 0; i < IBVF_POOL_MAX_PKEYS; i++)
			op->port.pkey_index[i] = -1;
		snprintf(op->port.state, sizeof(op->port.state), "handed");
		prepare_result(op);
		return;
	}
	if (wait_port(op))
		return;
	prepare_result(op);
}

/* Return: true when the op was handed to the SM batcher (it must not be touched). */
static bool prepare_begin(struct op *op)
{
	struct ibvf_engine *e = op->e;
	struct ibvf_alloc_request req = {.vf_index = -1};
	struct ibvf_alloc other;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	int ret;

	ret = e->vf.lookup(e->vf.ctx, op->pci, &op->vf, err, sizeof(err));
	if (ret) {
		set_error(op, IBVF_RPC_VF_ERROR, ret, "lookup", "VF %s: %s", op->pci, err);
		return false;
	}
	eng_pool_lock(e);
	ret = ibvf_pool_find_owner(e->pool, op->owner.container_id, op->owner.ifname, &op->a, err,
				   sizeof(err));
	if (ret == -ENOENT)
		ret = ibvf_pool_find_pci(e->pool, op->pci, &other, err, sizeof(err));
	else if (!ret)
		ret = 1;
	eng_pool_unlock(e);
	if (ret == 1) {
		if (op->a.state >= IBVF_ALLOC_PORT_READY && op->a.state <= IBVF_ALLOC_HANDED) {
			prepare_existing(op);
			return false;
		}
		/* a stale half-done attach of this owner: walk it back, start afresh */
		log_notice("container %.12s ifname %s: rolling back its %s attach of GUID %s first",
			   op->owner.container_id, op->owner.ifname,
			   ibvf_alloc_state_name(op->a.state), ibvf_guid_format(op->a.guid, s));
		{
			bool pending;

			ret = eng_undo(e, &op->a, op->a.state >= IBVF_ALLOC_SM_REQUESTED, &pending,
				       err, sizeof(err));
		}
		if (ret) {
			set_error(op, IBVF_RPC_VF_ERROR, ret, "rollback", "%s", err);
			return false;
		}
		ret = -ENOENT;
		eng_pool_lock(e);
		ret = ibvf_pool_find_pci(e->pool, op->pci, &other, err, sizeof(err));
		eng_pool_unlock(e);
	}
	if (ret == 0) {
		set_error(op, IBVF_RPC_BUSY, EBUSY, "allocate",
			  "VF %s (PF %s VF %d) is held by container %.64s ifname %s with GUID %s",
			  op->pci, other.pf, other.vf_index, other.owner.container_id,
			  other.owner.ifname, ibvf_guid_format(other.guid, s));
		return false;
	}
	if (ret != -ENOENT) {
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "allocate", "%s", err);
		return false;
	}
	if (deadline_passed(op) || cancelled(e)) {
		set_error(op, cancelled(e) ? IBVF_RPC_BUSY : IBVF_RPC_DEADLINE, ETIMEDOUT,
			  "allocate", "%s before allocation",
			  cancelled(e) ? "daemon stopping" : "deadline passed");
		return false;
	}

	/* allocated: persisted before the GUID touches the VF or the SM */
	req.owner = op->owner;
	req.guid = op->req_guid;
	req.pf = op->vf.pf;
	req.vf_index = op->vf.vf_index;
	req.pci = op->pci;
	req.pkeys = op->pkeys;
	req.n_pkeys = op->n_pkeys;
	if (op->vf.guids_known) {
		req.prev_node_guid = op->vf.node_guid;
		req.prev_port_guid = op->vf.port_guid;
	}
	req.prev_link_state = op->vf.link_state;
	eng_pool_lock(e);
	ret = ibvf_pool_allocate(e->pool, &req, &op->a, err, sizeof(err));
	eng_pool_unlock(e);
	if (ret) {
		set_error(op, alloc_code(ret), ret, "allocate", "%s", err);
		return false;
	}
	op->created = true;
	ibvf_guid_format(op->a.guid, s);
	log_info("PF %s VF %d (%s): GUID %s allocated for container %.12s ifname %s PKey 0x%04x",
		 op->vf.pf, op->vf.vf_index, op->pci, s, op->owner.container_id, op->owner.ifname,
		 op->pkeys[0]);

	/* programmed: node + port GUID, link state, rebind */
	ret = e->vf.program(e->vf.ctx, &op->vf, op->a.guid, op->a.guid,
			    op->link_state[0] ? op->link_state : NULL, err, sizeof(err));
	if (ret) {
		set_error(op, IBVF_RPC_VF_ERROR, ret, "program", "PF %s VF %d (%s) GUID %s: %s",
			  op->vf.pf, op->vf.vf_index, op->pci, s, err);
		rollback(op);
		return false;
	}
	if (store_state(op, IBVF_ALLOC_PROGRAMMED)) {
		rollback(op);
		return false;
	}
	if (deadline_passed(op) || cancelled(e)) {
		set_error(op, cancelled(e) ? IBVF_RPC_BUSY : IBVF_RPC_DEADLINE, ETIMEDOUT,
			  "program", "%s after programming VF %s",
			  cancelled(e) ? "daemon stopping" : "deadline passed", op->pci);
		rollback(op);
		return false;
	}

	/* sm_requested: persisted before the SM sees the GUID */
	if (store_state(op, IBVF_ALLOC_SM_REQUESTED)) {
		rollback(op);
		return false;
	}
	submit_sm(op, IBVF_SM_REQ_ADD);
	return true;
}

static void prepare_sm_done(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char s[IBVF_GUID_STR_LEN];

	op->phase = PH_DONE;
	ibvf_guid_format(op->a.guid, s);
	if (op->sm_status) {
		set_error(op,
			  op->sm_status == -ETIMEDOUT && deadline_passed(op) ? IBVF_RPC_DEADLINE
									     : IBVF_RPC_SM_ERROR,
			  op->sm_status, "sm_add", "GUID %s: %s", s, op->sm_msg);
		rollback(op);
		return;
	}
	if (store_state(op, IBVF_ALLOC_SM_CONFIRMED)) {
		rollback(op);
		return;
	}
	if (cancelled(e)) {
		set_error(op, IBVF_RPC_BUSY, ESHUTDOWN, "sm_add", "daemon stopping");
		rollback(op);
		return;
	}
	if (wait_port(op)) {
		rollback(op);
		return;
	}
	if (store_state(op, IBVF_ALLOC_PORT_READY)) {
		rollback(op);
		return;
	}
	log_info("PF %s VF %d (%s): GUID %s ready, LID %u, PKey 0x%04x index %d", op->vf.pf,
		 op->vf.vf_index, op->pci, s, op->port.lid, op->a.pkeys[0], op->port.pkey_index[0]);
	prepare_result(op);
}

/* ------------------------------------------------ commit, release, gc -- */

static void do_commit(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN];
	int ret;

	eng_pool_lock(e);
	ret = ibvf_pool_find_owner(e->pool, op->owner.container_id, op->owner.ifname, &op->a, err,
				   sizeof(err));
	eng_pool_unlock(e);
	if (ret) {
		set_error(op, ret == -ENOENT ? IBVF_RPC_INVALID_PARAMS : IBVF_RPC_INTERNAL_ERROR,
			  ret, "commit", "%s", err);
		return;
	}
	if (op->a.state != IBVF_ALLOC_PORT_READY && op->a.state != IBVF_ALLOC_HANDED) {
		set_error(op, IBVF_RPC_INVALID_PARAMS, EINVAL, "commit",
			  "container %.64s ifname %s: attachment is %s, not prepared",
			  op->owner.container_id, op->owner.ifname,
			  ibvf_alloc_state_name(op->a.state));
		return;
	}
	if (op->a.state != IBVF_ALLOC_HANDED && store_state(op, IBVF_ALLOC_HANDED))
		return;
	op->result = json_pack("{s:o,s:s}", "guid", guid_json(op->a.guid), "state", "handed");
}

/* Release the owner's attachment, blocking (worker). 0, or error set on @op. */
static int release_owner(struct op *op, const struct ibvf_owner *o, json_t **out)
{
	struct ibvf_engine *e = op->e;
	struct ibvf_alloc a;
	char err[IBVF_ERR_LEN];
	bool pending;
	int ret;

	eng_pool_lock(e);
	ret = ibvf_pool_find_owner(e->pool, o->container_id, o->ifname, &a, err, sizeof(err));
	eng_pool_unlock(e);
	if (ret == -ENOENT) {
		*out = json_pack("{s:b}", "released", 0);
		return 0;
	}
	if (ret) {
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "release", "%s", err);
		return ret;
	}
	ret = eng_undo(e, &a, a.state >= IBVF_ALLOC_SM_REQUESTED, &pending, err, sizeof(err));
	if (ret) {
		set_error(op, IBVF_RPC_VF_ERROR, ret, "release", "%s", err);
		return ret;
	}
	*out = json_pack("{s:b,s:o}", "released", 1, "guid", guid_json(a.guid));
	if (pending)
		json_object_set_new(*out, "sm_removal_pending", json_true());
	return 0;
}

/* API release, first half: Return true when handed to the SM batcher. */
static bool release_begin(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN];
	int ret;

	eng_pool_lock(e);
	ret = ibvf_pool_find_owner(e->pool, op->owner.container_id, op->owner.ifname, &op->a, err,
				   sizeof(err));
	eng_pool_unlock(e);
	if (ret == -ENOENT) {
		op->result = json_pack("{s:b}", "released", 0);
		return false;
	}
	if (!ret)
		ret = undo_begin(e, &op->a, err, sizeof(err));
	if (ret) {
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "release", "%s", err);
		return false;
	}
	/* "releasing" may be a retry: the record may or may not still be in the SM */
	if (!op->a.n_pkeys)
		return false;
	op->created = true; /* op->a is valid for release_finish() */
	submit_sm(op, IBVF_SM_REQ_REMOVE);
	return true;
}

static void release_finish(struct op *op)
{
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	bool pending;
	int ret;

	op->phase = PH_DONE;
	if (op->sm_status)
		log_warn("GUID %s: SM removal failed, reconciliation will retry: %s",
			 ibvf_guid_format(op->a.guid, s), op->sm_msg);
	ret = undo_finish(op->e, &op->a, op->sm_status != 0, &pending, err, sizeof(err));
	if (ret) {
		set_error(op, IBVF_RPC_VF_ERROR, ret, "release", "%s", err);
		return;
	}
	op->result = json_pack("{s:b,s:o}", "released", 1, "guid", guid_json(op->a.guid));
	if (pending)
		json_object_set_new(op->result, "sm_removal_pending", json_true());
}

struct gc_ctx {
	struct op *op;
	struct ibvf_alloc *victims;
	size_t n, cap;
};

static int gc_collect(void *arg, const struct ibvf_alloc *a)
{
	struct gc_ctx *g = arg;
	json_t *it;
	size_t i;

	if (g->op->has_network && strcmp(a->owner.network, g->op->network))
		return 0;
	json_array_foreach(g->op->valid, i, it)
	{
		if (!strcmp(json_string_value(json_object_get(it, "container_id")),
			    a->owner.container_id) &&
		    !strcmp(json_string_value(json_object_get(it, "ifname")), a->owner.ifname))
			return 0;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		struct ibvf_alloc *v = realloc(g->victims, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		g->victims = v;
		g->cap = cap;
	}
	g->victims[g->n++] = *a;
	return 0;
}

static void do_gc(struct op *op)
{
	struct ibvf_engine *e = op->e;
	struct gc_ctx g = {.op = op};
	json_t *released = json_array(), *skipped = json_array();
	char err[IBVF_ERR_LEN];
	int ret;

	eng_pool_lock(e);
	ret = ibvf_pool_list(e->pool, NULL, gc_collect, &g, err, sizeof(err));
	eng_pool_unlock(e);
	if (ret) {
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "gc", "%s",
			  ret == -ENOMEM ? "out of memory" : err);
		goto out;
	}
	for (size_t i = 0; i < g.n; i++) {
		struct ibvf_alloc *a = &g.victims[i];
		struct keyhold k = {0};
		bool pending;

		owner_key(&a->owner, k.owner, sizeof(k.owner));
		snprintf(k.pci, sizeof(k.pci), "%s", a->pci);
		if (!eng_try_keys(e, &k)) {
			json_array_append_new(skipped, guid_json(a->guid));
			continue; /* an operation on it is running: next GC */
		}
		/* re-read under the keys: it may have changed since the listing */
		eng_pool_lock(e);
		ret = ibvf_pool_get(e->pool, a->guid, a, err, sizeof(err));
		eng_pool_unlock(e);
		if (!ret && a->state != IBVF_ALLOC_QUARANTINED) {
			ret = eng_undo(e, a, a->state >= IBVF_ALLOC_SM_REQUESTED, &pending, err,
				       sizeof(err));
			if (ret)
				log_err("gc: %s", err);
			else
				json_array_append_new(released, guid_json(a->guid));
		}
		eng_drop_keys(e, &k);
	}
	op->result = json_pack("{s:O,s:O}", "released", released, "skipped_busy", skipped);
out:
	json_decref(released);
	json_decref(skipped);
	free(g.victims);
}

/* -------------------------------------------------------- status, list -- */

static void do_status(struct op *op)
{
	struct ibvf_engine *e = op->e;
	struct ibvf_pool_stats st;
	char err[IBVF_ERR_LEN];
	json_t *backend;
	int ret;

	eng_pool_lock(e);
	ret = ibvf_pool_stats(e->pool, &st, err, sizeof(err));
	eng_pool_unlock(e);
	if (ret) {
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "status", "%s", err);
		return;
	}
	pthread_mutex_lock(&e->lock);
	backend = json_pack("{s:s,s:b,s:s}", "name", e->sm_ops->name, "ok", e->sm_ok, "description",
			    e->sm_desc);
	if (!e->sm_ok)
		json_object_set_new(backend, "error", json_string(e->sm_err));
	op->result = json_pack("{s:b,s:s,s:o,s:{s:I,s:I,s:I,s:I},s:I,s:b,s:b}", "ready",
			       e->sm_ok && e->reconciled, "version", IBVF_VERSION, "backend",
			       backend, "pool", "total", (json_int_t)st.total, "allocated",
			       (json_int_t)st.allocated, "quarantined", (json_int_t)st.quarantined,
			       "free", (json_int_t)st.free, "inflight", (json_int_t)e->inflight,
			       "reconciled", e->reconciled, "stopping", e->stopping);
	pthread_mutex_unlock(&e->lock);
	json_object_set_new(op->result, "sm", ibvf_engine_sm_stats(e));
}

struct list_ctx {
	struct op *op;
	json_t *arr;
	size_t seen;
};

static int list_cb(void *arg, const struct ibvf_alloc *a)
{
	struct list_ctx *l = arg;

	if (l->op->has_network && strcmp(a->owner.network, l->op->network))
		return 0;
	if (l->seen++ < l->op->offset)
		return 0;
	if (l->op->limit && json_array_size(l->arr) >= l->op->limit)
		return 0; /* keep counting */
	return json_array_append_new(l->arr,
				     json_pack("{s:o,s:o,s:s,s:s,s:i,s:s,s:o}", "owner",
					       owner_json(&a->owner), "guid", guid_json(a->guid),
					       "state", ibvf_alloc_state_name(a->state), "pf",
					       a->pf, "vf_index", a->vf_index, "pci", a->pci,
					       "pkeys", pkeys_json(a->pkeys, a->n_pkeys, NULL)));
}

static void do_list(struct op *op)
{
	struct list_ctx l = {.op = op, .arr = json_array()};
	char err[IBVF_ERR_LEN];
	int ret;

	eng_pool_lock(op->e);
	ret = ibvf_pool_list(op->e->pool, NULL, list_cb, &l, err, sizeof(err));
	eng_pool_unlock(op->e);
	if (ret) {
		json_decref(l.arr);
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "list", "%s", err);
		return;
	}
	op->result = json_pack("{s:o,s:I}", "owners", l.arr, "total", (json_int_t)l.seen);
}

static void do_audit(struct op *op)
{
	char err[IBVF_ERR_LEN];
	json_t *f = json_array();
	int ret = ibvf_engine_reconcile(op->e, op->fix ? IBVF_PASS_FIX : IBVF_PASS_REPAIR, f, err,
					sizeof(err));

	if (ret < 0) {
		json_decref(f);
		set_error(op, ret == -EBUSY ? IBVF_RPC_BUSY : IBVF_RPC_INTERNAL_ERROR, ret, "audit",
			  "%s", err);
		return;
	}
	op->result = json_pack("{s:i,s:o}", "problems", ret, "findings", f);
}

/* ---------------------------------------------------------- dispatch -- */

static void op_run(void *arg)
{
	struct op *op = arg;

	switch (op->kind) {
	case OP_PREPARE:
		if (op->phase == PH_BEGIN) {
			if (prepare_begin(op))
				return; /* the SM batcher's completion resubmits it */
		} else {
			prepare_sm_done(op);
		}
		break;
	case OP_COMMIT:
		do_commit(op);
		break;
	case OP_RELEASE:
		if (op->phase == PH_BEGIN) {
			if (release_begin(op))
				return; /* the SM batcher's completion resubmits it */
			if (!op->created && !op->code)
				break; /* nothing held */
			if (!op->code)
				release_finish(op); /* no PKeys: nothing in the SM */
		} else {
			release_finish(op);
		}
		break;
	case OP_UNDO: {
		json_t *r = NULL;

		release_owner(op, &op->owner, &r);
		json_decref(r);
		break;
	}
	case OP_STATUS:
		do_status(op);
		break;
	case OP_LIST:
		do_list(op);
		break;
	case OP_GC:
		do_gc(op);
		break;
	case OP_AUDIT:
		do_audit(op);
		break;
	}
	op->phase = PH_DONE;
	if (ibvf_loop_post(op->e->loop, op_finish, op))
		log_err("cannot hand a finished request back to the loop (out of memory)");
}

static void op_free(struct op *op)
{
	json_decref(op->result);
	json_decref(op->valid);
	free(op);
}

static const char *methods_name(enum op_kind k)
{
	static const char *const names[] = {"prepare", "commit", "release", "status",
					    "list",    "gc",	 "audit",   "undo"};

	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

/* Loop thread: reply, drop keys, start waiting ops. */
static void op_finish(void *arg)
{
	struct op *op = arg;
	struct ibvf_engine *e = op->e;
	bool delivered = true;

	if (op_arrived(op))
		ibvf_sm_batch_expect(e->batch, -1);
	if (op->kind != OP_UNDO) {
		if (!op->result && !op->code)
			set_error(op, IBVF_RPC_INTERNAL_ERROR, EIO, "internal", "no result");
		if (op->code && op->kind != OP_STATUS && op->kind != OP_LIST)
			log_warn("%s of container %.12s ifname %s failed at %s: %s",
				 methods_name(op->kind), op->owner.container_id, op->owner.ifname,
				 op->step[0] ? op->step : "-", op->msg);
		delivered = op->reply(op->ctx, op->result, op->code, op->msg, op->err_no, op->step);
		op->result = NULL; /* the reply took it */
	}
	if (!delivered && op->kind == OP_PREPARE && !op->code && op->created) {
		/* nobody will commit or release this: do not leave the VF half-handed */
		log_warn("container %.12s ifname %s went away before its prepare answer; rolling "
			 "back",
			 op->owner.container_id, op->owner.ifname);
		op->kind = OP_UNDO;
		op->phase = PH_BEGIN;
		if (!submit(op))
			return;
	}
	pthread_mutex_lock(&e->lock);
	if (op->holds_keys)
		unlink_keys(e, &op->keys);
	e->inflight--;
	pthread_mutex_unlock(&e->lock);
	op_free(op);
	kick_waiting(e);
}

static const struct {
	const char *name;
	enum op_kind kind;
} methods[] = {
	{"prepare", OP_PREPARE}, {"commit", OP_COMMIT}, {"release", OP_RELEASE},
	{"status", OP_STATUS},	 {"list", OP_LIST},	{"gc", OP_GC},
	{"audit", OP_AUDIT},
};

void ibvf_engine_call(struct ibvf_engine *e, const char *method, json_t *params,
		      ibvf_reply_fn reply, void *ctx)
{
	char err[IBVF_ERR_LEN + 64] = "";
	struct op *op;
	size_t i;
	int ret = 0;
	bool start;

	if (eng_pool_method(e, method, params, reply, ctx))
		return; /* pool.allocate, pool.release: api_pool.c */
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strcmp(methods[i].name, method))
			break;
	if (i == sizeof(methods) / sizeof(methods[0])) {
		reply(ctx, NULL, IBVF_RPC_METHOD_NOT_FOUND, "method not found", 0, "");
		return;
	}
	if (params && !json_is_object(params)) {
		reply(ctx, NULL, IBVF_RPC_INVALID_PARAMS, "params must be an object", EINVAL, "");
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		reply(ctx, NULL, IBVF_RPC_INTERNAL_ERROR, "out of memory", ENOMEM, "");
		return;
	}
	op->e = e;
	op->kind = methods[i].kind;
	op->reply = reply;
	op->ctx = ctx;
	switch (op->kind) {
	case OP_PREPARE:
		ret = parse_prepare(e, params, op, err, sizeof(err));
		break;
	case OP_COMMIT:
	case OP_RELEASE:
		ret = parse_owner(params, &op->owner, err, sizeof(err));
		break;
	case OP_GC:
		ret = parse_gc(params, op, err, sizeof(err));
		break;
	case OP_LIST:
		ret = parse_list(params, op, err, sizeof(err));
		break;
	case OP_AUDIT:
		op->fix = json_is_true(json_object_get(params, "fix"));
		break;
	default:
		break;
	}
	if (ret) {
		reply(ctx, NULL, IBVF_RPC_INVALID_PARAMS, err, -ret, "validate");
		op_free(op);
		return;
	}
	pthread_mutex_lock(&e->lock);
	if (e->stopping) {
		pthread_mutex_unlock(&e->lock);
		reply(ctx, NULL, IBVF_RPC_BUSY, "ibvfd is stopping", ESHUTDOWN, "");
		op_free(op);
		return;
	}
	if (op->kind == OP_PREPARE && !(e->sm_ok && e->reconciled)) {
		snprintf(err, sizeof(err), "ibvfd is not ready: %s",
			 !e->reconciled ? "start-up reconciliation not finished"
					: (e->sm_err[0] ? e->sm_err : "SM backend not validated"));
		pthread_mutex_unlock(&e->lock);
		reply(ctx, NULL, IBVF_RPC_NOT_READY, err, EAGAIN, "validate");
		op_free(op);
		return;
	}
	if (op->kind == OP_PREPARE)
		op->deadline = ibvf_mono_ms() + e->prepare_timeout_ms;
	if (op->kind == OP_PREPARE || op->kind == OP_RELEASE) {
		/* announce it: a closing SM batch waits a little for it (sm_batch.h) */
		op->expecting = true;
		ibvf_sm_batch_expect(e->batch, 1);
	}
	if (op->kind == OP_PREPARE || op->kind == OP_COMMIT || op->kind == OP_RELEASE) {
		owner_key(&op->owner, op->keys.owner, sizeof(op->keys.owner));
		snprintf(op->keys.pci, sizeof(op->keys.pci), "%s", op->pci);
	}
	e->inflight++;
	start = keys_free(e, &op->keys, NULL);
	if (start) {
		op->keys.next = e->held;
		e->held = &op->keys;
		op->holds_keys = true;
	} else {
		struct op **pp = &e->waiting;

		while (*pp)
			pp = &(*pp)->next;
		*pp = op;
	}
	pthread_mutex_unlock(&e->lock);
	if (start && submit(op)) {
		set_error(op, IBVF_RPC_INTERNAL_ERROR, ENOMEM, "", "cannot queue the request");
		op->phase = PH_DONE;
		op_finish(op);
	}
}

/* ------------------------------------------------------------ engine -- */

int ibvf_engine_new(const struct ibvf_engine_opts *o, struct ibvf_engine **out, char *err,
		    size_t errlen)
{
	struct ibvf_sm_batch_opts bo = {
		.ops = o->sm_ops,
		.backend = o->sm,
		.window_ms = o->cfg->sm.batch_window_ms,
		.batch_max = o->cfg->sm.batch_max,
		.seed = o->seed,
		.retry_base_ms = o->sm_retry_base_ms,
		.max_attempts = o->sm_max_attempts,
	};
	struct ibvf_engine *e;
	int ret;

	*out = NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->pool_lock, NULL);
	e->loop = o->loop;
	e->sm_ops = o->sm_ops;
	e->sm = o->sm;
	e->vf = o->vf;
	e->port = o->port;
	e->n_ranges = o->cfg->pool.n_ranges;
	e->ranges = calloc(e->n_ranges ? e->n_ranges : 1, sizeof(*e->ranges));
	if (!e->ranges) {
		free(e);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	memcpy(e->ranges, o->cfg->pool.ranges, e->n_ranges * sizeof(*e->ranges));
	snprintf(e->sm_err, sizeof(e->sm_err), "SM backend %s not validated yet", o->sm_ops->name);
	ibvf_engine_reload(e, o->cfg);
	ret = ibvf_sm_batch_new(&bo, &e->batch, err, errlen);
	if (!ret)
		ret = ibvf_workq_new(o->loop, o->cfg->daemon.workers, &e->wq, err, errlen);
	if (ret) {
		ibvf_engine_free(e);
		return ret;
	}
	e->pool = o->pool;
	*out = e;
	return 0;
}

void ibvf_engine_reload(struct ibvf_engine *e, const struct ibvf_config *cfg)
{
	char s[IBVF_GUID_STR_LEN];

	pthread_mutex_lock(&e->lock);
	e->prepare_timeout_ms = cfg->daemon.prepare_timeout_s * 1000;
	e->port_timeout_ms = cfg->daemon.port_timeout_s * 1000;
	e->allow_default_pkey = cfg->allow_default_pkey;
	e->reconcile = cfg->daemon.reconcile;
	e->parked_guid = cfg->daemon.parked_guid;
	if (e->parked_guid && eng_in_ranges(e, e->parked_guid)) {
		log_err("daemon.parked_guid %s is inside the pool ranges: ignored (a released VF "
			"gets its pre-attach GUID)",
			ibvf_guid_format(e->parked_guid, s));
		e->parked_guid = 0;
	}
	pthread_mutex_unlock(&e->lock);
	if (e->batch)
		ibvf_sm_batch_set_window(e->batch, cfg->sm.batch_window_ms, cfg->sm.batch_max);
}

int ibvf_engine_validate_sm(struct ibvf_engine *e)
{
	char desc[128] = "", err[IBVF_ERR_LEN] = "";
	struct ibvf_sm_backend *b;
	const struct ibvf_sm_ops *ops = ibvf_sm_batch_lock(e->batch, &b);
	int ret = ops->validate(b, desc, sizeof(desc), err, sizeof(err));
	bool was;

	ibvf_sm_batch_unlock(e->batch);
	pthread_mutex_lock(&e->lock);
	was = e->sm_ok;
	e->sm_ok = ret == 0;
	if (!ret)
		snprintf(e->sm_desc, sizeof(e->sm_desc), "%s", desc);
	else
		snprintf(e->sm_err, sizeof(e->sm_err), "SM backend %.16s: %.400s", ops->name,
			 err[0] ? err : strerror(-ret));
	pthread_mutex_unlock(&e->lock);
	if (!ret && !was)
		log_notice("SM backend %s ready: %s", ops->name, desc);
	else if (ret && was)
		log_err("SM backend %s failed validation: %s", ops->name, err);
	return ret;
}

bool ibvf_engine_ready(struct ibvf_engine *e)
{
	bool r;

	pthread_mutex_lock(&e->lock);
	r = e->sm_ok && e->reconciled;
	pthread_mutex_unlock(&e->lock);
	return r;
}

bool ibvf_engine_reconciled(struct ibvf_engine *e)
{
	bool r;

	pthread_mutex_lock(&e->lock);
	r = e->reconciled;
	pthread_mutex_unlock(&e->lock);
	return r;
}

size_t ibvf_engine_inflight(struct ibvf_engine *e)
{
	size_t n;

	pthread_mutex_lock(&e->lock);
	n = e->inflight;
	pthread_mutex_unlock(&e->lock);
	return n;
}

void ibvf_engine_stop(struct ibvf_engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_mutex_unlock(&e->lock);
}

void ibvf_engine_cancel(struct ibvf_engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->stopping = e->cancel = true;
	pthread_mutex_unlock(&e->lock);
	ibvf_sm_batch_flush_now(e->batch);
}

json_t *ibvf_engine_sm_stats(struct ibvf_engine *e)
{
	struct ibvf_sm_batch_stats st;

	ibvf_sm_batch_get_stats(e->batch, &st);
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "call_ms_total",
			 (json_int_t)st.call_ms_total, "requests", (json_int_t)st.requests,
			 "coalesced", (json_int_t)st.coalesced, "flushes", (json_int_t)st.flushes,
			 "add_calls", (json_int_t)st.add_calls, "remove_calls",
			 (json_int_t)st.remove_calls, "retries", (json_int_t)st.retries, "failures",
			 (json_int_t)st.failures);
}

static void reconcile_job(void *arg)
{
	struct ibvf_engine *e = arg;
	char err[IBVF_ERR_LEN];
	bool fix;
	int ret;

	pthread_mutex_lock(&e->lock);
	fix = !e->sm_ok;
	pthread_mutex_unlock(&e->lock);
	if (fix)
		ibvf_engine_validate_sm(e);
	pthread_mutex_lock(&e->lock);
	fix = e->reconcile == IBVF_RECONCILE_FIX;
	pthread_mutex_unlock(&e->lock);
	ret = ibvf_engine_reconcile(e, fix ? IBVF_PASS_FIX : IBVF_PASS_REPAIR, NULL, err,
				    sizeof(err));
	if (ret < 0 && ret != -EBUSY)
		log_warn("reconciliation: %s", err);
	eng_pool_lock(e);
	ibvf_pool_expire(e->pool, NULL, 0);
	eng_pool_unlock(e);
}

void ibvf_engine_reconcile_async(struct ibvf_engine *e)
{
	ibvf_workq_submit(e->wq, reconcile_job, NULL, e);
}

void ibvf_engine_free(struct ibvf_engine *e)
{
	if (!e)
		return;
	ibvf_workq_free(e->wq);
	ibvf_sm_batch_free(e->batch);
	ibvf_pool_close(e->pool);
	json_decref(e->last_findings);
	while (e->waiting) {
		struct op *op = e->waiting;

		e->waiting = op->next;
		op_free(op);
	}
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->pool_lock);
	free(e->ranges);
	free(e);
}
