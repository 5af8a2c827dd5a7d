// SPDX-License-Identifier: MIT
/*
 * The GUID pool methods of ibvfd's API (include/ibvf/api.h, docs/api.md):
 * pool.allocate and pool.release, what `ibvfctl pool allocate/release` call
 * while ibvfd runs, so that ibvfd stays the only writer of its store.
 *
 * Each call is parsed on the loop thread, runs on a worker under the keys of
 * its owner (and VF), like prepare and release, and is answered on the loop
 * thread. It counts as a request in flight (a graceful stop waits for it).
 * A key held by a running operation is answered IBVF_RPC_BUSY at once.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "engine_int.h"
#include "err.h"
#include "log.h"

struct pool_call {
	struct ibvf_engine *e;
	bool release; /* pool.release, else pool.allocate */
	ibvf_reply_fn reply;
	void *ctx;

	/* pool.allocate */
	struct ibvf_alloc_request req;
	uint16_t pkeys[IBVF_POOL_MAX_PKEYS];
	/* pool.release */
	uint64_t guid;

	json_t *result;
	int code, err_no;
	char step[16];
	char msg[IBVF_ERR_LEN + 128];
};

static void fail(struct pool_call *c, int code, int ret, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void fail(struct pool_call *c, int code, int ret, const char *step, const char *fmt, ...)
{
	va_list ap;

	c->code = code;
	c->err_no = ret < 0 ? -ret : ret;
	snprintf(c->step, sizeof(c->step), "%s", step);
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
}

/* The keys of owner @o and VF @pci (NULL or "": none), as the engine's operations take them. */
static void owner_keyhold(const struct ibvf_owner *o, const char *pci, struct keyhold *k)
{
	memset(k, 0, sizeof(*k));
	eng_owner_key(o, k->owner, sizeof(k->owner));
	snprintf(k->pci, sizeof(k->pci), "%s", pci ? pci : "");
}

/* ------------------------------------------------------------- params -- */

static int parse_guid(json_t *params, bool required, uint64_t *g, char *err, size_t errlen)
{
	json_t *v = json_object_get(params, "guid");
	int ret;

	*g = 0;
	if (!v || json_is_null(v))
		return required ? ibvf_errf(err, errlen, -EINVAL, "missing \"guid\"") : 0;
	if (!json_is_string(v))
		return ibvf_errf(err, errlen, -EINVAL, "\"guid\" must be a string");
	ret = ibvf_guid_parse(json_string_value(v), g, err, errlen);
	return ret ? ibvf_err_prefix(err, errlen, ret, "guid") : 0;
}

/* Optional pkeys: [{pkey, membership?}], with prepare's rules (eng_parse_pkey_list()). */
static int parse_pkey_list(struct pool_call *c, json_t *params, char *err, size_t errlen)
{
	json_t *arr = json_object_get(params, "pkeys");
	bool allow_default;

	if (!arr || json_is_null(arr))
		return 0;
	pthread_mutex_lock(&c->e->lock);
	allow_default = c->e->allow_default_pkey;
	pthread_mutex_unlock(&c->e->lock);
	return eng_parse_pkey_list(arr, allow_default, c->pkeys, &c->req.n_pkeys, err, errlen);
}

static int parse(struct pool_call *c, json_t *params, char *err, size_t errlen)
{
	int ret;

	if (params && !json_is_object(params))
		return ibvf_errf(err, errlen, -EINVAL, "params must be an object");
	if (c->release)
		return parse_guid(params, true, &c->guid, err, errlen);
	c->req.vf_index = -1;
	c->req.pkeys = c->pkeys;
	ret = eng_parse_owner(params, &c->req.owner, err, errlen);
	if (!ret)
		ret = parse_guid(params, false, &c->req.guid, err, errlen);
	if (!ret)
		ret = parse_pkey_list(c, params, err, errlen);
	return ret;
}

/* ------------------------------------------------------------ results -- */

static json_t *guid_str(uint64_t g)
{
	char s[IBVF_GUID_STR_LEN];

	return json_string(ibvf_guid_format(g, s));
}

/* A record as pool.allocate answers it (api.h). */
static json_t *record_json(const struct ibvf_alloc *a)
{
	json_t *pk = json_array();

	for (size_t i = 0; i < a->n_pkeys; i++) {
		char s[8];

		snprintf(s, sizeof(s), "0x%04x", ibvf_pkey_key(a->pkeys[i]));
		json_array_append_new(
			pk, json_pack("{s:s,s:s}", "pkey", s, "membership",
				      ibvf_pkey_is_full(a->pkeys[i]) ? "full" : "limited"));
	}
	return json_pack("{s:o,s:s,s:{s:s,s:s,s:s,s:s,s:s,s:s},s:s,s:i,s:s,s:o,s:I,s:I}", "guid",
			 guid_str(a->guid), "state", ibvf_alloc_state_name(a->state), "owner",
			 "container_id", a->owner.container_id, "ifname", a->owner.ifname,
			 "pod_namespace", a->owner.pod_namespace, "pod_name", a->owner.pod_name,
			 "pod_uid", a->owner.pod_uid, "network", a->owner.network, "pf", a->pf,
			 "vf_index", a->vf_index, "pci", a->pci, "pkeys", pk, "created_ms",
			 (json_int_t)a->created_ms, "updated_ms", (json_int_t)a->updated_ms);
}

static int alloc_rpc_code(int ret)
{
	switch (ret) {
	case -EINVAL:
		return IBVF_RPC_INVALID_PARAMS; /* an owner field the pool refuses */
	case -ENOSPC:
		return IBVF_RPC_POOL_EXHAUSTED;
	case -ERANGE:
	case -EEXIST:
	case -EBUSY:
		return IBVF_RPC_GUID_CONFLICT;
	default:
		return IBVF_RPC_INTERNAL_ERROR;
	}
}

/* ------------------------------------------------------------ workers -- */

static void do_allocate(struct pool_call *c)
{
	struct ibvf_engine *e = c->e;
	struct ibvf_alloc a;
	struct keyhold k;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	int ret;

	owner_keyhold(&c->req.owner, NULL, &k);
	if (!eng_try_keys(e, &k)) {
		fail(c, IBVF_RPC_BUSY, EBUSY, "allocate",
		     "an operation on container %.12s ifname %s is running: retry",
		     c->req.owner.container_id, c->req.owner.ifname);
		return;
	}
	ret = ibvf_pool_allocate(e->pool, &c->req, &a, err, sizeof(err));
	eng_drop_keys(e, &k);
	if (ret) {
		fail(c, alloc_rpc_code(ret), ret, "allocate", "%s", err);
		return;
	}
	log_notice("pool.allocate: GUID %s for container %.12s ifname %s (state %s)",
		   ibvf_guid_format(a.guid, s), a.owner.container_id, a.owner.ifname,
		   ibvf_alloc_state_name(a.state));
	c->result = record_json(&a);
}

static void do_release(struct pool_call *c)
{
	struct ibvf_engine *e = c->e;
	struct ibvf_alloc a;
	struct keyhold k;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	bool pending = false;
	int ret;

	ibvf_guid_format(c->guid, s);
	ret = ibvf_pool_get(e->pool, c->guid, &a, err, sizeof(err));
	if (ret == -ENOENT || (!ret && a.state == IBVF_ALLOC_QUARANTINED)) {
		c->result = json_pack("{s:o,s:b}", "guid", guid_str(c->guid), "released", 0);
		return; /* nothing held: idempotent, as release is */
	}
	if (ret) {
		fail(c, IBVF_RPC_INTERNAL_ERROR, ret, "release", "%s", err);
		return;
	}
	owner_keyhold(&a.owner, a.pci, &k);
	if (!eng_try_keys(e, &k)) {
		fail(c, IBVF_RPC_BUSY, EBUSY, "release",
		     "GUID %s: an operation on container %.12s ifname %s or VF %s is running: "
		     "retry",
		     s, a.owner.container_id, a.owner.ifname, a.pci[0] ? a.pci : "-");
		return;
	}
	/* re-read under the keys: it may have changed since */
	ret = ibvf_pool_get(e->pool, c->guid, &a, err, sizeof(err));
	if (ret == -ENOENT || (!ret && a.state == IBVF_ALLOC_QUARANTINED)) {
		c->result = json_pack("{s:o,s:b}", "guid", guid_str(c->guid), "released", 0);
	} else if (ret) {
		fail(c, IBVF_RPC_INTERNAL_ERROR, ret, "release", "%s", err);
	} else {
		/* the whole walk-back: SM removal, VF reset, quarantine (as release does) */
		ret = eng_undo(e, &a, a.state >= IBVF_ALLOC_SM_REQUESTED, &pending, err,
			       sizeof(err));
		if (ret)
			fail(c, IBVF_RPC_VF_ERROR, ret, "release", "%s", err);
	}
	if (!c->code && !c->result) {
		struct ibvf_alloc after;

		ret = ibvf_pool_get(e->pool, c->guid, &after, err, sizeof(err));
		log_notice("pool.release: GUID %s of container %.12s ifname %s released%s", s,
			   a.owner.container_id, a.owner.ifname,
			   pending ? " (SM removal pending)" : "");
		c->result = json_pack("{s:o,s:b,s:b,s:b}", "guid", guid_str(c->guid), "released", 1,
				      "quarantined", !ret && after.state == IBVF_ALLOC_QUARANTINED,
				      "sm_removal_pending", pending);
	}
	eng_drop_keys(e, &k);
}

static void pool_call_run(void *arg)
{
	struct pool_call *c = arg;

	if (c->release)
		do_release(c);
	else
		do_allocate(c);
}

/* Loop thread: answer, stop counting it. */
static void pool_call_done(void *arg)
{
	struct pool_call *c = arg;
	struct ibvf_engine *e = c->e;

	if (c->code)
		log_warn("%s failed at %s: %s", c->release ? "pool.release" : "pool.allocate",
			 c->step, c->msg);
	/* the reply takes the result */
	c->reply(c->ctx, c->code ? NULL : c->result, c->code, c->msg, c->err_no, c->step);
	pthread_mutex_lock(&e->lock);
	e->inflight--;
	pthread_mutex_unlock(&e->lock);
	free(c);
}

/* ------------------------------------------------------------- method -- */

bool eng_pool_method(struct ibvf_engine *e, const char *method, json_t *params, ibvf_reply_fn reply,
		     void *ctx)
{
	char err[IBVF_ERR_LEN + 64];
	struct pool_call *c;
	const char *why = NULL;
	int ret, code = 0, err_no = 0;

	if (strcmp(method, "pool.allocate") && strcmp(method, "pool.release"))
		return false;
	c = calloc(1, sizeof(*c));
	if (!c) {
		reply(ctx, NULL, IBVF_RPC_INTERNAL_ERROR, "out of memory", ENOMEM, "");
		return true;
	}
	c->e = e;
	c->release = !strcmp(method, "pool.release");
	c->reply = reply;
	c->ctx = ctx;
	ret = parse(c, params, err, sizeof(err));
	if (ret) {
		reply(ctx, NULL, IBVF_RPC_INVALID_PARAMS, err, -ret, "validate");
		free(c);
		return true;
	}
	pthread_mutex_lock(&e->lock);
	if (e->stopping) {
		why = "ibvfd is stopping";
		code = IBVF_RPC_BUSY;
		err_no = ESHUTDOWN;
	} else if (!e->reconciled) {
		why = "ibvfd is not ready: start-up reconciliation not finished";
		code = IBVF_RPC_NOT_READY;
		err_no = EAGAIN;
	} else {
		e->inflight++;
	}
	pthread_mutex_unlock(&e->lock);
	if (why) {
		reply(ctx, NULL, code, why, err_no, "validate");
		free(c);
		return true;
	}
	ret = ibvf_workq_submit(e->wq, pool_call_run, pool_call_done, c);
	if (ret) {
		fail(c, IBVF_RPC_INTERNAL_ERROR, ret, "", "cannot queue the request: %s",
		     strerror(-ret));
		pool_call_done(c);
	}
	return true;
}
