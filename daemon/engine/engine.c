// SPDX-License-Identifier: MIT
/*
 * The engine's lifecycle and the order of its operations: creation, reload,
 * readiness, stop; the keys (per owner and per VF) that keep two operations
 * on the same attachment from running at once; admitting, starting and
 * finishing operations on the loop thread; reconciliation passes, with the
 * engine handed to reconcile.c through struct ibvf_reconcile_ops.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "engine_int.h"
#include "clock.h"
#include "engine_metrics.h"
#include "log.h"
#include "release_spool.h"
#include "statedir.h"

/* --------------------------------------------------------------- keys -- */

bool eng_in_ranges(const struct ibvf_engine *e, uint64_t g)
{
	struct ibvf_engine *m = (struct ibvf_engine *)e; /* the leaf lock only */
	bool in = false;

	pthread_mutex_lock(&m->ranges_lock);
	for (size_t i = 0; !in && i < e->n_ranges; i++)
		in = g >= e->ranges[i].start && g <= e->ranges[i].end;
	pthread_mutex_unlock(&m->ranges_lock);
	return in;
}

int ibvf_engine_add_range(struct ibvf_engine *e, uint64_t first, uint64_t last)
{
	struct ibvf_guid_range *r;

	pthread_mutex_lock(&e->ranges_lock);
	r = realloc(e->ranges, (e->n_ranges + 1) * sizeof(*r));
	if (r) {
		r[e->n_ranges].start = first;
		r[e->n_ranges].end = last;
		e->ranges = r;
		e->n_ranges++;
	}
	pthread_mutex_unlock(&e->ranges_lock);
	return r ? 0 : -ENOMEM;
}

int ibvf_engine_remove_range(struct ibvf_engine *e, uint64_t first, uint64_t last)
{
	struct ibvf_guid_range *r;
	size_t k = 0;
	int ret = 0;

	pthread_mutex_lock(&e->ranges_lock);
	/* the ranges are disjoint: only one can hold [first, last] strictly inside and
	 * split in two, so at most one more range than before */
	r = calloc(e->n_ranges + 1, sizeof(*r));
	if (!r) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < e->n_ranges; i++) {
		struct ibvf_guid_range x = e->ranges[i];

		if (x.end < first || x.start > last) {
			r[k++] = x;
			continue;
		}
		if (x.start < first)
			r[k++] = (struct ibvf_guid_range){x.start, first - 1};
		if (x.end > last)
			r[k++] = (struct ibvf_guid_range){last + 1, x.end};
	}
	free(e->ranges);
	e->ranges = r;
	e->n_ranges = k;
out:
	pthread_mutex_unlock(&e->ranges_lock);
	return ret;
}

void ibvf_engine_set_status_hook(struct ibvf_engine *e, const char *key, json_t *(*fn)(void *arg),
				 void *arg)
{
	pthread_mutex_lock(&e->lock);
	e->status_key = key;
	e->status_fn = fn;
	e->status_arg = arg;
	pthread_mutex_unlock(&e->lock);
}

void ibvf_engine_set_reserve_hook(struct ibvf_engine *e, ibvf_engine_reserve_fn fn, void *arg)
{
	pthread_mutex_lock(&e->lock);
	e->reserve_fn = fn;
	e->reserve_arg = arg;
	pthread_mutex_unlock(&e->lock);
}

void ibvf_engine_set_ready_hook(struct ibvf_engine *e, const char *check, ibvf_engine_ready_fn fn,
				void *arg)
{
	pthread_mutex_lock(&e->lock);
	e->ready_check = check;
	e->ready_fn = fn;
	e->ready_arg = arg;
	pthread_mutex_unlock(&e->lock);
}

void eng_owner_key(const struct ibvf_owner *o, char *buf, size_t len)
{
	snprintf(buf, len, "%.128s/%.16s", o->container_id, o->ifname);
}

static bool keys_conflict(const struct keyhold *a, const struct keyhold *b)
{
	return (a->owner[0] && !strcmp(a->owner, b->owner)) ||
	       (a->pci[0] && !strcmp(a->pci, b->pci));
}

unsigned eng_key_bucket(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h & (ENG_KEY_BUCKETS - 1);
}

/*
 * Under e->lock: is a key of @k held? One bucket per key, not every running
 * op (a burst of N prepares was O(N^2) strcmp() on the loop thread).
 */
static bool keys_held(struct ibvf_engine *e, const struct keyhold *k)
{
	if (k->owner[0])
		for (struct keyhold *h = e->held_owner[eng_key_bucket(k->owner)]; h; h = h->o_next)
			if (!strcmp(h->owner, k->owner))
				return true;
	if (k->pci[0])
		for (struct keyhold *h = e->held_pci[eng_key_bucket(k->pci)]; h; h = h->p_next)
			if (!strcmp(h->pci, k->pci))
				return true;
	return false;
}

/* Under e->lock: @k's keys are held now. */
static void hold_keys(struct ibvf_engine *e, struct keyhold *k)
{
	k->o_pprev = k->p_pprev = NULL;
	if (k->owner[0]) {
		struct keyhold **b = &e->held_owner[eng_key_bucket(k->owner)];

		k->o_next = *b;
		if (*b)
			(*b)->o_pprev = &k->o_next;
		*b = k;
		k->o_pprev = b;
	}
	if (k->pci[0]) {
		struct keyhold **b = &e->held_pci[eng_key_bucket(k->pci)];

		k->p_next = *b;
		if (*b)
			(*b)->p_pprev = &k->p_next;
		*b = k;
		k->p_pprev = b;
	}
}

/* Under e->lock. */
static bool keys_free(struct ibvf_engine *e, const struct keyhold *k, const struct op *upto)
{
	if (keys_held(e, k))
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
	if (ok)
		hold_keys(e, k);
	pthread_mutex_unlock(&e->lock);
	return ok;
}

static void kick_waiting(void *arg);

/* Under e->lock: drop @k's keys (held by hold_keys()); O(1). */
static void unlink_keys(struct ibvf_engine *e, struct keyhold *k)
{
	(void)e;
	if (k->o_pprev) {
		*k->o_pprev = k->o_next;
		if (k->o_next)
			k->o_next->o_pprev = k->o_pprev;
		k->o_pprev = NULL;
	}
	if (k->p_pprev) {
		*k->p_pprev = k->p_next;
		if (k->p_next)
			k->p_next->p_pprev = k->p_pprev;
		k->p_pprev = NULL;
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

int eng_submit(struct op *op)
{
	int ret = ibvf_workq_submit(op->e->wq, eng_op_run, NULL, op);

	if (ret)
		log_err("cannot queue a request: %s", strerror(-ret));
	return ret;
}

/*
 * A prepare that starts (it holds its keys) announces its read-back of a new
 * GUID, so a burst shares one SM listing (sm_batch.h, attach.c). Not while it
 * waits for a key: the op holding it may itself wait for that listing.
 */
static void announce_listing(struct op *op)
{
	if (op->kind != OP_PREPARE || op->expecting_list)
		return;
	op->expecting_list = true;
	ibvf_sm_batch_expect_listing(op->e->batch, 1);
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
			hold_keys(e, &op->keys);
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
		announce_listing(op);
		if (eng_submit(op)) {
			op->code = IBVF_RPC_INTERNAL_ERROR;
			snprintf(op->msg, sizeof(op->msg), "cannot queue the request");
			op->phase = PH_DONE;
			eng_op_finish(op);
		}
	}
}

bool eng_cancelled(struct ibvf_engine *e)
{
	bool c;

	pthread_mutex_lock(&e->lock);
	c = e->cancel;
	pthread_mutex_unlock(&e->lock);
	return c;
}

/* ---------------------------------------------------------------- ops -- */

/* The op stops being an expected SM request (it submits now, or never will). */
bool eng_op_arrived(struct op *op)
{
	bool was = op->expecting;

	op->expecting = false;
	return was;
}

/* The op will not ask for its announced listing (warm, done, failed); true if it had one. */
bool eng_op_listing_dropped(struct op *op)
{
	bool was = op->expecting_list;

	op->expecting_list = false;
	return was;
}

/* Answer @op at once with an error and forget it (loop thread). */
static void refuse(struct op *op, int code, int err_no, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void refuse(struct op *op, int code, int err_no, const char *step, const char *fmt, ...)
{
	va_list ap;

	op->code = code;
	op->err_no = err_no;
	snprintf(op->step, sizeof(op->step), "%s", step);
	va_start(ap, fmt);
	vsnprintf(op->msg, sizeof(op->msg), fmt, ap);
	va_end(ap);
	op->done(op);
	eng_op_free(op);
}

/* ---------------------------------------------------------- readiness -- */

void eng_readiness_add(struct eng_readiness *rd, const char *check, const char *fmt, ...)
{
	va_list ap;

	rd->ready = false;
	if (rd->n >= ENG_MAX_REASONS)
		return;
	rd->r[rd->n].check = check;
	va_start(ap, fmt);
	vsnprintf(rd->r[rd->n].reason, sizeof(rd->r[rd->n].reason), fmt, ap);
	va_end(ap);
	rd->n++;
}

/* "2024-05-01T10:00:00Z" for a CLOCK_REALTIME ms timestamp. */
static const char *utc(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, len, "%lld ms", (long long)ms);
	return buf;
}

/* A failed SM call that says the SM cannot take changes (not one bad member). */
static bool sm_call_failed(const struct ibvf_sm_call_record *c)
{
	return c->seq && c->result < 0 && !ibvf_sm_err_is_member_fault(c->result);
}

/*
 * Under e->lock: can a prepare succeed now? @ph and @bs are read before the
 * lock (they have locks of their own). A failed add call counts until a
 * later add succeeds or a validate() after it passes (removes do not count
 * either way: a rollback's remove of a GUID the SM never got succeeds without
 * writing anything); a failed store write counts until a later write is
 * committed (the periodic pass probes one).
 */
static void readiness_locked(struct ibvf_engine *e, const struct ibvf_pool_health *ph,
			     const struct ibvf_sm_batch_stats *bs, struct eng_readiness *rd)
{
	const struct ibvf_sm_call_record *c = &bs->last_add;
	char t[32];

	memset(rd, 0, sizeof(*rd));
	rd->ready = true;
	if (!e->reconciled)
		eng_readiness_add(rd, "reconcile", "start-up reconciliation not finished");
	if (!e->sm_ok)
		eng_readiness_add(rd, "sm", "%s",
				  e->sm_err[0] ? e->sm_err : "SM backend not validated");
	else if (sm_call_failed(c) && c->seq > e->sm_checked_seq)
		eng_readiness_add(
			rd, "sm_call",
			"the last SM add call (PKey 0x%04x, %zu GUID(s)) failed at %s: %s", c->pkey,
			c->n, utc(c->at_ms, t, sizeof(t)), c->error);
	if (e->ready_fn) {
		char why[IBVF_ERR_LEN + 64];

		if (!e->ready_fn(e->ready_arg, why, sizeof(why)))
			eng_readiness_add(rd, e->ready_check, "%s", why);
	}
	if (ph->lost)
		eng_readiness_add(
			rd, "store",
			"the GUID pool store lost records (%s); run 'ibvfctl pool rebuild'",
			ph->lost_why);
	if (ph->last_write_result < 0)
		eng_readiness_add(rd, "store",
				  "the last write to the GUID pool store failed at %s: %s",
				  utc(ph->last_write_ms, t, sizeof(t)), ph->last_error);
}

/* The inputs of readiness_locked() that are read without e->lock. */
struct ready_inputs {
	struct ibvf_pool_health ph;
	struct ibvf_sm_batch_stats bs;
};

static void ready_inputs(struct ibvf_engine *e, struct ready_inputs *in)
{
	ibvf_pool_health(e->pool, &in->ph);
	ibvf_sm_batch_get_stats(e->batch, &in->bs);
}

/* The reasons of @rd as one line: "store: ...; sm_call: ...". */
static void reasons_line(const struct eng_readiness *rd, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = 0;
	for (size_t i = 0; i < rd->n && o < len; i++) {
		int n = snprintf(buf + o, len - o, "%s%s: %s", i ? "; " : "", rd->r[i].check,
				 rd->r[i].reason);

		if (n < 0)
			break;
		o += (size_t)n;
	}
}

/*
 * Under e->lock: may @op start now? If not, it is answered, freed, and the
 * lock dropped. @in: ready_inputs() for a prepare.
 */
static bool admit(struct op *op, const struct ready_inputs *in)
{
	struct ibvf_engine *e = op->e;
	struct eng_readiness rd;
	char err[IBVF_ERR_LEN + 256];

	if (e->stopping) {
		pthread_mutex_unlock(&e->lock);
		refuse(op, IBVF_RPC_BUSY, ESHUTDOWN, "", "ibvfd is stopping");
		return false;
	}
	if (op->kind != OP_PREPARE)
		return true;
	if (!e->sm_ok && e->sm_errno && !ibvf_sm_err_is_transient(e->sm_errno)) {
		/*
		 * The SM backend refused its configuration (an admin partition
		 * file ibvf cannot keep, a bad UFM credential): permanent until an
		 * administrator acts, so not "not ready, retry" (issue 15 item 9).
		 */
		int en = -e->sm_errno;

		snprintf(err, sizeof(err), "%s", e->sm_err);
		pthread_mutex_unlock(&e->lock);
		refuse(op, IBVF_RPC_SM_ERROR, en, "validate",
		       "ibvfd cannot use its SM backend (an administrator must fix it): %s", err);
		return false;
	}
	readiness_locked(e, &in->ph, &in->bs, &rd);
	if (!rd.ready) {
		reasons_line(&rd, err, sizeof(err));
		pthread_mutex_unlock(&e->lock);
		refuse(op, IBVF_RPC_NOT_READY, EAGAIN, "validate", "ibvfd is not ready: %s", err);
		return false;
	}
	return true;
}

/* Under e->lock: take @op's keys, or queue it behind the op that holds one. */
static bool take_or_wait(struct op *op)
{
	struct ibvf_engine *e = op->e;
	struct op **pp = &e->waiting;

	if (keys_free(e, &op->keys, NULL)) {
		hold_keys(e, &op->keys);
		op->holds_keys = true;
		return true;
	}
	while (*pp)
		pp = &(*pp)->next;
	*pp = op;
	return false;
}

void eng_start(struct op *op)
{
	struct ibvf_engine *e = op->e;
	struct ready_inputs in;
	bool start;

	if (op->kind == OP_PREPARE)
		ready_inputs(e, &in);
	pthread_mutex_lock(&e->lock);
	if (!admit(op, op->kind == OP_PREPARE ? &in : NULL))
		return;
	if (op->kind == OP_PREPARE)
		op->deadline = ibvf_mono_ms() + e->prepare_timeout_ms;
	if (op->kind == OP_PREPARE || op->kind == OP_RELEASE) {
		/* announce it: a closing SM batch waits a little for it (sm_batch.h) */
		op->expecting = true;
		ibvf_sm_batch_expect(e->batch, 1);
	}
	if (op->kind == OP_PREPARE || op->kind == OP_COMMIT || op->kind == OP_RELEASE) {
		eng_owner_key(&op->req.owner, op->keys.owner, sizeof(op->keys.owner));
		snprintf(op->keys.pci, sizeof(op->keys.pci), "%s", op->req.pci);
	}
	e->inflight++;
	if (op->kind == OP_PREPARE || op->kind == OP_RELEASE || op->kind == OP_GC)
		e->vf_inflight++;
	start = take_or_wait(op);
	pthread_mutex_unlock(&e->lock);
	if (start)
		announce_listing(op);
	if (start && eng_submit(op)) {
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ENOMEM, "", "cannot queue the request");
		op->phase = PH_DONE;
		eng_op_finish(op);
	}
}

void eng_op_free(struct op *op)
{
	if (op->sink.free)
		op->sink.free(op->sink.arg);
	free(op->req.valid);
	free(op->gc_released.v);
	free(op->gc_skipped.v);
	free(op->status);
	free(op);
}

/* Loop thread: reply, drop keys, start waiting ops. */
void eng_op_finish(void *arg)
{
	struct op *op = arg;
	struct ibvf_engine *e = op->e;
	bool delivered = true, warm;

	if (eng_op_arrived(op))
		ibvf_sm_batch_expect(e->batch, -1);
	if (eng_op_listing_dropped(op))
		ibvf_sm_batch_expect_listing(e->batch, -1);
	ibvf_timing_mark(&op->timing, "reply_queue"); /* worker -> loop thread */
	if (op->kind != OP_UNDO) {
		if (!op->have_result && !op->code)
			eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, EIO, "internal", "no result");
		if (op->code && op->kind != OP_STATUS && op->kind != OP_LIST)
			log_warn("%s of container %.12s ifname %s failed at %s: %s",
				 eng_kind_name(op->kind), op->req.owner.container_id,
				 op->req.owner.ifname, op->step[0] ? op->step : "-", op->msg);
		delivered = op->done(op);
	}
	if (!delivered && op->kind == OP_PREPARE && !op->code && op->created) {
		/* nobody will commit or release this: do not leave the VF half-handed */
		log_warn("container %.12s ifname %s went away before its prepare answer; rolling "
			 "back",
			 op->req.owner.container_id, op->req.owner.ifname);
		op->kind = OP_UNDO;
		op->phase = PH_BEGIN;
		if (!eng_submit(op))
			return;
	}
	pthread_mutex_lock(&e->lock);
	if (op->holds_keys)
		unlink_keys(e, &op->keys);
	e->inflight--;
	/* the last VF-changing op is done: free VFs can be warmed now (warm_vf.c);
	 * an undo is a prepare whose answer was not delivered */
	warm = op->kind == OP_PREPARE || op->kind == OP_RELEASE || op->kind == OP_GC ||
	       op->kind == OP_UNDO;
	if (warm && e->vf_inflight)
		e->vf_inflight--;
	warm = warm && !e->vf_inflight && e->warm;
	pthread_mutex_unlock(&e->lock);
	eng_op_free(op);
	kick_waiting(e);
	if (warm)
		eng_warm_kick(e);
}

/* ---------------------------------------------------------- reconcile -- */

static bool rec_in_ranges(void *ctx, uint64_t g)
{
	return eng_in_ranges(ctx, g);
}

static bool rec_try_hold(void *ctx, const struct ibvf_owner *owner, const char *pci, void **hold)
{
	struct keyhold *k = calloc(1, sizeof(*k));

	if (!k)
		return false; /* skipped as if busy: the next pass retries */
	if (owner)
		eng_owner_key(owner, k->owner, sizeof(k->owner));
	snprintf(k->pci, sizeof(k->pci), "%s", pci);
	if (!eng_try_keys(ctx, k)) {
		free(k);
		return false;
	}
	*hold = k;
	return true;
}

static void rec_drop(void *ctx, void *hold)
{
	eng_drop_keys(ctx, hold);
	free(hold);
}

static int rec_undo(void *ctx, struct ibvf_alloc *a, bool sm_touched, bool *sm_pending, char *err,
		    size_t errlen)
{
	return eng_undo(ctx, a, sm_touched, sm_pending, err, errlen);
}

static bool rec_release_staged(void *ctx, uint64_t guid)
{
	return eng_sm_note_pending(ctx, guid);
}

static uint64_t rec_parked_guid(void *ctx)
{
	struct ibvf_engine *e = ctx;
	uint64_t g;

	pthread_mutex_lock(&e->lock);
	g = e->parked_guid;
	pthread_mutex_unlock(&e->lock);
	return g;
}

static const struct ibvf_reconcile_ops rec_ops = {
	.in_ranges = rec_in_ranges,
	.try_hold = rec_try_hold,
	.drop = rec_drop,
	.undo = rec_undo,
	.parked_guid = rec_parked_guid,
	.release_staged = rec_release_staged,
};

/* Every finding of a pass counts in ibvf_reconcile_findings_total, then goes to the caller's. */
struct counted_sink {
	ibvf_finding_fn cb;
	void *arg;
};

static void counted_finding(void *arg, const struct ibvf_reconcile_finding *f)
{
	struct counted_sink *s = arg;

	eng_metrics_finding(f->kind, f->fixed);
	if (s->cb)
		s->cb(s->arg, f);
}

int eng_reconcile(struct ibvf_engine *e, enum ibvf_reconcile_pass mode, ibvf_finding_fn cb,
		  void *arg, char *err, size_t errlen)
{
	struct counted_sink counted = {cb, arg};
	uint64_t t0 = ibvf_mono_ns();
	struct ibvf_reconcile_env env = {
		.ops = &rec_ops,
		.ctx = e,
		.pool = e->pool,
		.batch = e->batch,
		.vf = &e->vf,
	};
	char cache[PATH_MAX];
	int ret;

	/*
	 * A store that lost records cannot tell an orphan from a running Pod's
	 * attachment: nothing is removed or reset until it is rebuilt.
	 */
	env.store_lost = ibvf_pool_lost(e->pool, NULL, 0);
	pthread_mutex_lock(&e->lock);
	snprintf(cache, sizeof(cache), "%s", e->cni_cache_dir);
	pthread_mutex_unlock(&e->lock);
	env.cni_cache_dir = cache;
	if (mode == IBVF_PASS_FIX && env.store_lost) {
		log_warn("reconciliation: the GUID pool store lost records: orphans are reported, "
			 "not fixed, until 'ibvfctl pool rebuild'");
		mode = IBVF_PASS_REPAIR;
	}
	pthread_mutex_lock(&e->lock);
	if (e->reconcile_running) {
		pthread_mutex_unlock(&e->lock);
		return ibvf_errf(err, errlen, -EBUSY, "a reconciliation pass is running");
	}
	e->reconcile_running = true;
	env.check_sm = e->sm_ok || !e->reconciled;
	pthread_mutex_unlock(&e->lock);
	/* a pass may change memberships: release.sm notes from before it are stale */
	eng_sm_notes_stale(e);
	ret = ibvf_reconcile_run(&env, mode, counted_finding, &counted, err, errlen);
	eng_sm_notes_stale(e);
	eng_metrics_reconcile((double)(ibvf_mono_ns() - t0) / 1e9, ret);
	pthread_mutex_lock(&e->lock);
	e->reconcile_running = false;
	if (ret >= 0)
		e->reconciled = true;
	if (ret >= 0 && mode != IBVF_PASS_DRY_RUN)
		e->rec_passes++; /* ages the release.sm notes (ENG_SM_NOTE_PASSES) */
	pthread_mutex_unlock(&e->lock);
	/* what the pass rolled back or reset may be warmed again (warm_vf.c) */
	if (ret >= 0 && mode != IBVF_PASS_DRY_RUN)
		eng_warm_kick(e);
	return ret;
}

/* --------------------------------------------------- release spool -- */

struct spool_pass {
	struct ibvf_engine *e;
	size_t applied, left;
};

/*
 * One release request the CNI plugin left while ibvfd did not answer (issue
 * 15 item 7). Only the attachment the DEL meant is released: a record of the
 * same container and ifname created after the request (a new ADD), or one
 * holding another GUID than the plugin's cache named, is left alone.
 */
static int spool_cb(void *arg, const char *name, const struct ibvf_release_req *r)
{
	struct spool_pass *sp = arg;
	struct ibvf_engine *e = sp->e;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	struct ibvf_alloc a;
	void *hold;
	bool pending;
	int ret;

	if (!r) {
		log_warn("release spool: %s/%s is not a release request: removed", e->spool_dir,
			 name);
		ibvf_spool_remove(e->spool_dir, name);
		return 0;
	}
	if (ibvf_owner_reserved(r->container_id)) {
		/* ibvfd's own records (api.h): the API refuses a release of them too */
		log_warn("release spool: %s/%s names container %.64s, an owner ibvfd reserves for "
			 "its own records: removed, nothing released",
			 e->spool_dir, name, r->container_id);
		ibvf_spool_remove(e->spool_dir, name);
		return 0;
	}
	ret = ibvf_pool_find_owner(e->pool, r->container_id, r->ifname, &a, err, sizeof(err));
	if (!ret && (a.created_ms > r->created_ms || (r->guid && r->guid != a.guid)))
		ret = -ENOENT; /* a newer attachment: not the one the DEL meant */
	if (ret == -ENOENT) {
		log_info("release spool: container %.12s ifname %s holds nothing the request "
			 "meant: request removed",
			 r->container_id, r->ifname);
		ibvf_spool_remove(e->spool_dir, name);
		return 0;
	}
	if (ret || !rec_try_hold(e, &a.owner, a.pci, &hold)) {
		sp->left++; /* busy or a store error: the next pass retries */
		return 0;
	}
	ret = ibvf_pool_get(e->pool, a.guid, &a, err, sizeof(err));
	if (!ret && a.state != IBVF_ALLOC_QUARANTINED)
		ret = eng_undo(e, &a, a.state >= IBVF_ALLOC_SM_REQUESTED, &pending, err,
			       sizeof(err));
	rec_drop(e, hold);
	if (ret < 0 && ret != -ENOENT) {
		log_warn("release spool: GUID %s of container %.12s ifname %s: %s",
			 ibvf_guid_format(a.guid, s), r->container_id, r->ifname, err);
		sp->left++;
		return 0;
	}
	log_notice("release request of the CNI plugin applied (ibvfd did not answer its DEL %lld "
		   "s ago): GUID %s of container %.12s ifname %s network %s released%s",
		   (long long)((ibvf_wall_ms() - r->created_ms) / 1000),
		   ibvf_guid_format(a.guid, s), r->container_id, r->ifname, r->network,
		   ret == 0 && pending ? " (SM removal pending: reconciliation finishes it)" : "");
	ibvf_spool_remove(e->spool_dir, name);
	sp->applied++;
	return 0;
}

int ibvf_engine_apply_spool(struct ibvf_engine *e, char *err, size_t errlen)
{
	struct spool_pass sp = {.e = e};
	struct stat st;
	int ret;

	if (!e->spool_dir[0] || stat(e->socket, &st) || !S_ISSOCK(st.st_mode))
		return 0; /* no API socket (yet): no plugin can have used this spool */
	/* ibvfd's own directory, next to its socket: created, checked like it */
	if (mkdir(e->spool_dir, 0700) && errno != EEXIST)
		return ibvf_errf(err, errlen, -errno, "release spool %s: %s", e->spool_dir,
				 strerror(errno));
	ret = ibvf_dir_prepare(e->spool_dir, 0700, false, err, errlen);
	if (ret)
		return ret;
	ret = ibvf_spool_scan(e->spool_dir, spool_cb, &sp, err, errlen);
	if (ret < 0)
		return ret;
	if (sp.applied || sp.left)
		log_info("release spool %s: %zu request(s) applied, %zu left for the next pass",
			 e->spool_dir, sp.applied, sp.left);
	return (int)sp.applied;
}

static void reconcile_job(void *arg)
{
	struct ibvf_engine *e = arg;
	struct ibvf_pool_health ph;
	char err[IBVF_ERR_LEN];
	bool fix;
	int ret;

	/*
	 * Every pass checks the SM again (a dead OpenSM, a read-only file, a
	 * stale pid), and a store whose last write failed gets a real write
	 * to show whether it works again.
	 */
	ibvf_engine_validate_sm(e);
	ibvf_pool_health(e->pool, &ph);
	if (ph.last_write_result < 0 && ibvf_pool_probe_write(e->pool, err, sizeof(err)) == 0)
		log_notice("GUID pool store: writes work again");
	if (ibvf_engine_apply_spool(e, err, sizeof(err)) < 0)
		log_warn("%s", err);
	pthread_mutex_lock(&e->lock);
	fix = e->reconcile == IBVF_RECONCILE_FIX;
	pthread_mutex_unlock(&e->lock);
	ret = eng_reconcile(e, fix ? IBVF_PASS_FIX : IBVF_PASS_REPAIR, NULL, NULL, err,
			    sizeof(err));
	if (ret < 0 && ret != -EBUSY)
		log_warn("reconciliation: %s", err);
	ibvf_pool_expire(e->pool, NULL, 0);
	/* what the pass and the attaches since the last one wrote: out of the WAL */
	if (ibvf_pool_checkpoint(e->pool, err, sizeof(err)) < 0)
		log_warn("GUID pool store checkpoint: %s", err);
}

/* Worker: the deferred checkpoint of the window's hand-overs. */
static void checkpoint_job(void *arg)
{
	struct ibvf_engine *e = arg;
	char err[IBVF_ERR_LEN];

	pthread_mutex_lock(&e->lock);
	e->ckpt_armed = false; /* a hand-over from now on opens the next window */
	pthread_mutex_unlock(&e->lock);
	if (ibvf_pool_checkpoint(e->pool, err, sizeof(err)) < 0)
		log_warn("GUID pool store checkpoint: %s", err);
}

/* Loop thread: the window is over. */
static void checkpoint_due(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct ibvf_engine *e = arg;

	(void)l;
	if (ibvf_workq_submit(e->wq, checkpoint_job, NULL, e))
		ibvf_timer_set(t, 100, 0); /* no room on the workers: soon again */
}

void eng_checkpoint_soon(struct ibvf_engine *e)
{
	bool arm;

	pthread_mutex_lock(&e->lock);
	arm = !e->ckpt_armed && e->ckpt_timer;
	if (arm)
		e->ckpt_armed = true;
	pthread_mutex_unlock(&e->lock);
	/* timerfd_settime(2) is thread-safe; the loop thread runs the expiry */
	if (arm && ibvf_timer_set(e->ckpt_timer, e->ckpt_ms, 0)) {
		char err[IBVF_ERR_LEN];

		/* cannot defer it: do it now, as before issue 17 */
		pthread_mutex_lock(&e->lock);
		e->ckpt_armed = false;
		pthread_mutex_unlock(&e->lock);
		if (ibvf_pool_checkpoint(e->pool, err, sizeof(err)) < 0)
			log_warn("GUID pool store checkpoint: %s", err);
	}
}

void ibvf_engine_reconcile_async(struct ibvf_engine *e)
{
	ibvf_workq_submit(e->wq, reconcile_job, NULL, e);
}

/* ---------------------------------------------------------- lifecycle -- */

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
	pthread_mutex_init(&e->ranges_lock, NULL);
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
	if (o->cfg->api.socket && strlen(o->cfg->api.socket) < sizeof(e->socket) &&
	    !ibvf_spool_dir(o->cfg->api.socket, e->spool_dir, sizeof(e->spool_dir)))
		snprintf(e->socket, sizeof(e->socket), "%s", o->cfg->api.socket);
	else
		e->spool_dir[0] = 0;
	ibvf_engine_reload(e, o->cfg);
	e->ckpt_ms = o->checkpoint_ms ? o->checkpoint_ms : 1000;
	ret = ibvf_sm_batch_new(&bo, &e->batch, err, errlen);
	if (!ret && (eng_warm_new(e) || eng_sm_notes_new(e)))
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (!ret)
		ret = ibvf_workq_new(o->loop, o->cfg->daemon.workers, &e->wq, err, errlen);
	if (!ret && !(e->ckpt_timer = ibvf_loop_timer(o->loop, 0, 0, checkpoint_due, e)))
		ret = ibvf_errf(err, errlen, -errno, "checkpoint timer: %s", strerror(errno));
	if (ret) {
		ibvf_engine_free(e);
		return ret;
	}
	e->pool = o->pool;
	/* a released GUID waits in quarantine until the SM is seen without it,
	 * where the SM lists membership (the noop backend keeps none) */
	ibvf_pool_set_sm_check(e->pool, strcmp(o->sm_ops->name, "noop") != 0);
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
	e->warm = cfg->vf.warm;
	snprintf(e->cni_cache_dir, sizeof(e->cni_cache_dir), "%s", cfg->daemon.cni_cache_dir);
	if (e->parked_guid && eng_in_ranges(e, e->parked_guid)) {
		log_err("daemon.parked_guid %s is inside the pool ranges: ignored (a released VF "
			"gets its pre-attach GUID)",
			ibvf_guid_format(e->parked_guid, s));
		e->parked_guid = 0;
	}
	pthread_mutex_unlock(&e->lock);
	if (e->batch)
		ibvf_sm_batch_set_window(e->batch, cfg->sm.batch_window_ms, cfg->sm.batch_max);
	if (e->wm && e->wq)
		eng_warm_kick(e); /* vf.warm may have changed: warm or reset the VFs */
}

int ibvf_engine_validate_sm(struct ibvf_engine *e)
{
	char desc[128] = "", err[IBVF_ERR_LEN] = "";
	struct ibvf_sm_batch_stats bs;
	struct ibvf_sm_backend *b;
	uint64_t t0 = ibvf_mono_ns();
	const struct ibvf_sm_ops *ops = ibvf_sm_batch_lock(e->batch, &b);
	int ret = ops->validate(b, desc, sizeof(desc), err, sizeof(err));
	bool was;

	eng_metrics_sm_call("validate", 0, (double)(ibvf_mono_ns() - t0) / 1e9, ret);

	/* still under the backend lock: no call ran between validate() and this */
	ibvf_sm_batch_get_stats(e->batch, &bs);
	ibvf_sm_batch_unlock(e->batch);
	pthread_mutex_lock(&e->lock);
	was = e->sm_ok;
	e->sm_ok = ret == 0;
	if (ret || !was) /* an SM that failed or came back may hold other memberships */
		e->sm_gen++;
	e->sm_errno = ret;
	e->sm_checked_ms = ibvf_wall_ms();
	e->sm_checked_seq = bs.last_call.seq;
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
	struct eng_readiness rd;
	struct ready_inputs in;

	ready_inputs(e, &in);
	pthread_mutex_lock(&e->lock);
	readiness_locked(e, &in.ph, &in.bs, &rd);
	pthread_mutex_unlock(&e->lock);
	return rd.ready;
}

bool ibvf_engine_readiness(struct ibvf_engine *e, char *why, size_t len)
{
	struct eng_readiness rd;
	struct ready_inputs in;
	bool stopping;

	ready_inputs(e, &in);
	pthread_mutex_lock(&e->lock);
	readiness_locked(e, &in.ph, &in.bs, &rd);
	stopping = e->stopping;
	pthread_mutex_unlock(&e->lock);
	if (stopping) { /* status is refused then (IBVF_RPC_BUSY): not ready either */
		snprintf(why, len, "stopping: ibvfd is stopping");
		return false;
	}
	if (!rd.ready)
		reasons_line(&rd, why, len);
	return rd.ready;
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

void eng_status_snapshot(struct ibvf_engine *e, struct eng_status *st)
{
	struct ready_inputs in;

	ready_inputs(e, &in);
	pthread_mutex_lock(&e->lock);
	st->sm_name = e->sm_ops->name;
	st->sm_ok = e->sm_ok;
	snprintf(st->sm_desc, sizeof(st->sm_desc), "%s", e->sm_desc);
	snprintf(st->sm_err, sizeof(st->sm_err), "%s", e->sm_err);
	st->sm_checked_ms = e->sm_checked_ms;
	readiness_locked(e, &in.ph, &in.bs, &st->rd);
	st->inflight = e->inflight;
	st->reconciled = e->reconciled;
	st->stopping = e->stopping;
	st->warm_on = e->warm;
	pthread_mutex_unlock(&e->lock);
	eng_warm_counts(e, &st->warm_ready, &st->warm_warming);
	st->sm = in.bs;
	st->store = in.ph;
}

void ibvf_engine_free(struct ibvf_engine *e)
{
	if (!e)
		return;
	ibvf_workq_free(e->wq);
	/* after the workers (a commit arms it); a window still open: pool close checkpoints */
	ibvf_timer_free(e->ckpt_timer);
	ibvf_sm_batch_free(e->batch);
	ibvf_pool_close(e->pool);
	eng_warm_free(e);
	eng_sm_notes_free(e);
	while (e->waiting) {
		struct op *op = e->waiting;

		e->waiting = op->next;
		eng_op_free(op);
	}
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->ranges_lock);
	free(e->ranges);
	free(e);
}
