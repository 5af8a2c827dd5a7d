// SPDX-License-Identifier: MIT
/*
 * The attach state machine (see attach.h) over typed requests (engine_int.h):
 * prepare, commit, release, gc, status, list and audit as operations on the
 * workers, every step persisted in the GUID pool store; undo walks an
 * attachment back. api_methods.c parses the requests and turns the results
 * into JSON; engine.c starts and finishes the operations.
 *
 * Threads: workers run these steps; the SM batcher's thread completes SM
 * requests and hands the op back to the workers, so a prepare holds no
 * worker while its SM batch is open.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "engine_int.h"
#include "clock.h"
#include "engine_metrics.h"
#include "log.h"

void eng_set_error(struct op *op, int code, int err_no, const char *step, const char *fmt, ...)
{
	va_list ap;

	op->code = code;
	op->err_no = err_no < 0 ? -err_no : err_no;
	snprintf(op->step, sizeof(op->step), "%s", step);
	va_start(ap, fmt);
	vsnprintf(op->msg, sizeof(op->msg), fmt, ap);
	va_end(ap);
	op->have_result = false;
}

static bool deadline_passed(const struct op *op)
{
	return op->deadline && ibvf_mono_ms() >= op->deadline;
}

/* ------------------------------------------------- SM membership read -- */

/* The SM's memberships of one GUID, default partition left out. */
struct sm_seen {
	uint64_t guid;
	size_t n;
	bool more; /* more than fit in @pkey */
	uint16_t pkey[16];
	bool managed[16];
};

/*
 * Read back from the SM (a listing started after this call, shared with
 * concurrent callers: ibvf_sm_batch_members) in which PKeys @guid is a
 * member. The default partition 0x7fff is left out, and so are admin
 * entries that name no GUID (OpenSM "ALL", "SELF"): backends list GUIDs only.
 * Return: 0, or the backend's negative errno (@err set).
 */
static int seen_from(struct ibvf_engine *e, struct ibvf_sm_members *ms, uint64_t guid,
		     struct sm_seen *f, char *err, size_t errlen);

static int sm_read_back(struct ibvf_engine *e, uint64_t guid, struct sm_seen *f, char *err,
			size_t errlen)
{
	struct ibvf_sm_members *ms;
	int ret = ibvf_sm_batch_members(e->batch, &ms);

	if (ret) {
		memset(f, 0, sizeof(*f));
		return ibvf_errf(err, errlen, ret, "listing SM membership: out of memory");
	}
	return seen_from(e, ms, guid, f, err, errlen);
}

/* Fill @f from the listing @ms (NULL: out of memory), and give @ms back. */
static int seen_from(struct ibvf_engine *e, struct ibvf_sm_members *ms, uint64_t guid,
		     struct sm_seen *f, char *err, size_t errlen)
{
	size_t lo = 0, hi;
	int ret;

	memset(f, 0, sizeof(*f));
	f->guid = guid;
	if (!ms)
		return ibvf_errf(err, errlen, -ENOMEM, "listing SM membership: out of memory");
	ret = ms->status;
	if (ret) {
		snprintf(err, errlen, "%s", ms->err);
		ibvf_sm_batch_members_put(e->batch, ms);
		return ret;
	}
	hi = ms->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ms->m[mid].guid < guid)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < ms->n && ms->m[lo].guid == guid; lo++) {
		if (ms->m[lo].pkey == IBVF_PKEY_DEFAULT)
			continue;
		if (f->n == sizeof(f->pkey) / sizeof(f->pkey[0])) {
			f->more = true;
			break;
		}
		f->pkey[f->n] = ms->m[lo].pkey;
		f->managed[f->n++] = ms->m[lo].managed;
	}
	ibvf_sm_batch_members_put(e->batch, ms);
	return 0;
}

static void listed_done(void *arg, struct ibvf_sm_members *m)
{
	struct op *op = arg;

	op->listed = m;
	ibvf_timing_mark(&op->timing, op->phase == PH_SM_CHECK ? "sm_check" : "sm_verify");
	if (eng_submit(op)) {
		/* no worker can take it: finish with an error on the loop thread */
		ibvf_sm_batch_members_put(op->e->batch, m);
		op->listed = NULL;
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ENOMEM, "sm_check", "cannot queue");
		op->phase = PH_DONE;
		ibvf_loop_post(op->e->loop, eng_op_finish, op);
	}
}

/*
 * Ask for a shared SM listing; the op comes back to a worker in @phase.
 * Return: true when handed off (the op must not be touched), false when the
 * request could not be queued (the caller goes on: take_listed() lists).
 */
static bool request_listing(struct op *op, enum op_phase phase)
{
	op->phase = phase;
	op->listed = NULL;
	if (eng_op_listing_dropped(op)) /* the listing it announced at start (engine.c) */
		return ibvf_sm_batch_members_async_announced(op->e->batch, listed_done, op) == 0;
	return ibvf_sm_batch_members_async(op->e->batch, listed_done, op) == 0;
}

/* The memberships of op->a.guid from the listing the op got (or a new one). */
static int take_listed(struct op *op, struct sm_seen *f, char *err, size_t errlen)
{
	struct ibvf_sm_members *ms = op->listed;

	op->listed = NULL;
	if (!ms)
		return sm_read_back(op->e, op->a.guid, f, err, errlen);
	return seen_from(op->e, ms, op->a.guid, f, err, errlen);
}

static bool seen_has(const struct sm_seen *f, uint16_t pkey)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->pkey[i] == ibvf_pkey_key(pkey))
			return true;
	return false;
}

/*
 * After the SM answered the removals of @a's PKeys: does a read-back confirm
 * the GUID is gone from each? A PKey still listed is removed again (once);
 * an SM that answers OK without removing (issue 14) leaves it pending.
 * Return: true when the read-back shows none of @a's PKeys.
 */
static bool sm_removal_verified(struct ibvf_engine *e, const struct ibvf_alloc *a)
{
	char s[IBVF_GUID_STR_LEN], e2[IBVF_ERR_LEN + 96];
	struct sm_seen f;

	ibvf_guid_format(a->guid, s);
	for (int attempt = 0;; attempt++) {
		size_t left = 0;

		e2[0] = 0;
		if (sm_read_back(e, a->guid, &f, e2, sizeof(e2))) {
			log_warn("GUID %s: cannot verify its SM removal, reconciliation will "
				 "retry: %s",
				 s, e2);
			return false;
		}
		for (size_t i = 0; i < a->n_pkeys; i++) {
			struct ibvf_sm_member m = {.guid = a->guid};
			uint16_t pk = ibvf_pkey_key(a->pkeys[i]);

			if (!seen_has(&f, pk))
				continue;
			left++;
			log_warn("GUID %s: the SM answered its removal from PKey 0x%04x but still "
				 "lists it%s",
				 s, pk,
				 attempt ? "; reconciliation will retry" : "; removing again");
			if (!attempt)
				ibvf_sm_batch_call(e->batch, IBVF_SM_REQ_REMOVE, pk, &m,
						   ibvf_mono_ms() + 30000, e2, sizeof(e2));
		}
		if (!left)
			return true;
		if (attempt)
			return false;
	}
}

static void note_drop_guid(struct ibvf_engine *e, uint64_t guid);

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
		ret = ibvf_pool_update(e->pool, a, err, errlen);
		ibvf_timing_mark_current("store_releasing");
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
	ibvf_timing_mark_current("vf_reset");
	if (ret) {
		log_err("%s", err);
		return ret;
	}
	if (sm_failed) {
		/* the VF is clean: unbind the record from it, keep it for the SM removal */
		a->pci[0] = 0;
		a->pf[0] = 0;
		a->vf_index = -1;
		ret = ibvf_pool_update(e->pool, a, err, errlen);
		*sm_pending = true;
		return ret;
	}
	/*
	 * lazy (docs/pool.md, "Durability classes"): the SM removal and the VF
	 * reset are done; a record left at "releasing" by its loss is finished
	 * the same way by reconciliation (idempotent removal, a reset only of
	 * a VF that still carries the GUID, quarantine)
	 */
	ret = ibvf_pool_release_lazy(e->pool, a->guid, err, errlen);
	ibvf_timing_mark_current("store_release");
	if (ret < 0)
		return ret;
	note_drop_guid(e, a->guid); /* released: no release.sm of it is pending any more */
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
	/* quarantine only what the SM is seen without (issue 14: faked removals) */
	if (sm_touched && !sm_failed && a->n_pkeys && !sm_removal_verified(e, a))
		sm_failed = true;
	if (sm_touched)
		ibvf_timing_mark_current("sm_remove");
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
	/* the SM removal only when this op asked the SM (submit_sm()): its record is
	 * at sm_requested from the allocation (or a warm VF's take) on, before that */
	ret = eng_undo(e, &op->a, op->sm_asked, &pending, err, sizeof(err));
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

/* The "timing" step of a store write of state @st (attach_timing.h). */
static const char *store_step(enum ibvf_alloc_state st)
{
	switch (st) {
	case IBVF_ALLOC_SM_REQUESTED:
		return "store_sm_requested";
	case IBVF_ALLOC_PORT_READY:
		return "store_port_ready";
	case IBVF_ALLOC_HANDED:
		return "store_handed";
	default:
		return "store";
	}
}

static int store_state(struct op *op, enum ibvf_alloc_state st)
{
	char err[IBVF_ERR_LEN];
	int ret;

	op->a.state = st;
	/*
	 * "port_ready" and "handed" are lazy writes (docs/pool.md, "Durability
	 * classes"): COMMITted before this returns (a kill -9 loses neither),
	 * only their fdatasync() is deferred, so only an OS crash can lose one.
	 * port_ready records an attach whose effects are all done (VF, SM,
	 * port): lost, the record is at sm_requested, and reconciliation keeps
	 * it as port_ready when the VF carries the GUID in a Pod's netns (the
	 * plugin moves it only after this answer: reconcile.c,
	 * port_ready_lost()), and rolls it back otherwise (no Pod has it).
	 * handed records a hand-over that has happened (the VF is in the Pod):
	 * a record left at port_ready by its loss is kept, released by DEL or
	 * GC, like a handed one. The others come before their step's effects
	 * elsewhere: synced.
	 */
	if (st == IBVF_ALLOC_PORT_READY || st == IBVF_ALLOC_HANDED)
		ret = ibvf_pool_update_lazy(op->e->pool, &op->a, err, sizeof(err));
	else
		ret = ibvf_pool_update(op->e->pool, &op->a, err, sizeof(err));
	ibvf_timing_mark(&op->timing, store_step(st));
	if (ret)
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, ibvf_alloc_state_name(st), "%s",
			      err);
	return ret;
}

/* The answer to a prepare is op->a, op->vf and op->port (api_methods.c). */
static void prepare_result(struct op *op)
{
	op->have_result = true;
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
	if (last) /* SM batch wait, then its call; the op is ours until eng_submit() */
		ibvf_timing_mark_split(&op->timing,
				       op->kind == OP_PREPARE ? "sm_add_wait" : "sm_remove_wait",
				       op->kind == OP_PREPARE ? "sm_add" : "sm_remove",
				       ibvf_sm_batch_last_call_ns());
	if (last && eng_submit(op)) {
		/* no worker can take it: finish with an error on the loop thread */
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ENOMEM, "sm_add", "cannot queue");
		op->phase = PH_DONE;
		ibvf_loop_post(e->loop, eng_op_finish, op);
	}
}

/*
 * The owner text an SM add carries (add_members_owned(), SM ABI 2): the
 * Pod "ns/name ifname (network)" or, without a Pod, "container ifname".
 */
static void sm_owner_text(const struct ibvf_owner *o, char *buf, size_t len)
{
	if (o->pod_name[0])
		snprintf(buf, len, "%.63s/%.90s %.15s%s%.70s%s", o->pod_namespace, o->pod_name,
			 o->ifname, o->network[0] ? " (" : "", o->network,
			 o->network[0] ? ")" : "");
	else
		snprintf(buf, len, "%.64s %.15s", o->container_id, o->ifname);
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
	bool exp = eng_op_arrived(op);
	struct ibvf_sm_pkey_flags fl = {0}, *flp = NULL;
	char owner[IBVF_SM_OWNER_MAX + 1];
	int ret;

	sm_owner_text(&op->a.owner, owner, sizeof(owner));
	op->sm_asked = true;
	op->phase = PH_SM_DONE;
	op->sm_status = 0;
	op->sm_pending = (int)n;
	/* copy first: the op may move on (another worker) as soon as the last is queued */
	memcpy(pk, op->a.pkeys, sizeof(pk));
	/*
	 * A network's "index0" (CNI "pkeyIndex0") goes to the SM as flags; the
	 * ABI's flags carry ipoib too, which then is true (UFM's and OpenSM's
	 * default). Without it the backend's configured defaults apply.
	 */
	if (kind == IBVF_SM_REQ_ADD && op->req.index0) {
		fl.index0 = op->req.index0 == 2;
		fl.ipoib = true;
		flp = &fl;
	}
	for (size_t i = 0; i < n; i++) {
		struct ibvf_sm_member m = {
			.guid = g,
			.membership =
				ibvf_pkey_is_full(pk[i]) ? IBVF_MEMBER_FULL : IBVF_MEMBER_LIMITED,
		};

		/* index0 is for the first (primary) PKey only: one index 0 per port */
		ret = ibvf_sm_batch_submit_owned(e->batch, kind, ibvf_pkey_key(pk[i]), &m, owner,
						 i == 0 ? flp : NULL, dl, sm_done, op);
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
	uint64_t t0 = ibvf_mono_ns();

	ret = e->port.wait(e->port.ctx, &op->vf, op->a.guid, op->a.pkeys, op->a.n_pkeys, dl,
			   &op->port, err, sizeof(err));
	ibvf_timing_mark(&op->timing, "port_wait");
	eng_metrics_port_wait((double)(ibvf_mono_ns() - t0) / 1e9, ret);
	/*
	 * Asked for index 0 (CNI "pkeyIndex0"): verbs' default pkey_index 0
	 * must be the tenant's PKey, else that software runs in the default
	 * partition (issue 16, item 2).
	 */
	if (!ret && op->req.index0 == 2 && op->a.n_pkeys && op->port.pkey_index[0] > 0) {
		ret = -EPROTO;
		snprintf(err, sizeof(err),
			 "PKey 0x%04x is at P_Key index %d, not 0 as the network's pkeyIndex0 "
			 "asks (the SM did not apply index0)",
			 ibvf_pkey_key(op->a.pkeys[0]), op->port.pkey_index[0]);
	}
	if (ret)
		eng_set_error(op, deadline_passed(op) ? IBVF_RPC_DEADLINE : IBVF_RPC_PORT_NOT_READY,
			      ret, "port_wait", "PF %s VF %d (%s) GUID %016llx: port not ready: %s",
			      op->vf.pf, op->vf.vf_index, op->req.pci,
			      (unsigned long long)op->a.guid, err);
	return ret;
}

/* An owner that already holds a ready attachment on this VF: answer it again. */
static void prepare_existing(struct op *op)
{
	char s[IBVF_GUID_STR_LEN];

	if (strcmp(op->a.pci, op->req.pci)) {
		eng_set_error(op, IBVF_RPC_GUID_CONFLICT, EEXIST, "allocate",
			      "container %.64s ifname %s already holds GUID %s on VF %s",
			      op->req.owner.container_id, op->req.owner.ifname,
			      ibvf_guid_format(op->a.guid, s), op->a.pci[0] ? op->a.pci : "(none)");
		return;
	}
	if (op->req.req_guid && op->req.req_guid != op->a.guid) {
		eng_set_error(op, IBVF_RPC_GUID_CONFLICT, EEXIST, "allocate",
			      "container %.64s ifname %s already holds GUID %s",
			      op->req.owner.container_id, op->req.owner.ifname,
			      ibvf_guid_format(op->a.guid, s));
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

/*
 * Before allocating: the VF, and what the store holds for the owner and the
 * VF. A ready attachment of the owner is answered again; a stale half-done
 * one is walked back first. Return: true to go on and allocate (error or
 * answer set on @op otherwise).
 */
static bool prepare_check(struct op *op)
{
	struct ibvf_engine *e = op->e;
	const struct ibvf_owner *o = &op->req.owner;
	struct ibvf_alloc other;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	bool pending;
	int ret;

	ret = e->vf.lookup(e->vf.ctx, op->req.pci, &op->vf, err, sizeof(err));
	ibvf_timing_mark(&op->timing, "vf_lookup");
	if (ret) {
		eng_set_error(op, IBVF_RPC_VF_ERROR, ret, "lookup", "VF %s: %s", op->req.pci, err);
		return false;
	}
	ret = ibvf_pool_find_attach(e->pool, o->container_id, o->ifname, op->req.pci, &op->a,
				    &other, err, sizeof(err));
	ibvf_timing_mark(&op->timing, "store_read");
	if (ret == 1) {
		if (op->a.state >= IBVF_ALLOC_PORT_READY && op->a.state <= IBVF_ALLOC_HANDED) {
			prepare_existing(op);
			return false;
		}
		/* a stale half-done attach of this owner: walk it back, start afresh */
		log_notice("container %.12s ifname %s: rolling back its %s attach of GUID %s first",
			   o->container_id, o->ifname, ibvf_alloc_state_name(op->a.state),
			   ibvf_guid_format(op->a.guid, s));
		ret = eng_undo(e, &op->a, op->a.state >= IBVF_ALLOC_SM_REQUESTED, &pending, err,
			       sizeof(err));
		if (ret) {
			eng_set_error(op, IBVF_RPC_VF_ERROR, ret, "rollback", "%s", err);
			return false;
		}
		ret = ibvf_pool_find_pci(e->pool, op->req.pci, &other, err, sizeof(err));
	}
	if (ret == 0 && ibvf_alloc_is_warm(&other)) {
		/* a warm VF (warm_vf.c): take its GUID, or drop it for the cold path */
		ret = eng_warm_take(op, &other);
		if (ret < 0)
			return false;
		ret = ret ? 1 : -ENOENT;
	}
	if (ret == 0) {
		eng_set_error(
			op, IBVF_RPC_VF_IN_USE, EBUSY, "allocate",
			"VF %s (PF %s VF %d) is held by container %.64s ifname %s with GUID %s",
			op->req.pci, other.pf, other.vf_index, other.owner.container_id,
			other.owner.ifname, ibvf_guid_format(other.guid, s));
		return false;
	}
	if (ret != -ENOENT && !op->warm) {
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "allocate", "%s", err);
		return false;
	}
	if (deadline_passed(op) || eng_cancelled(e)) {
		eng_set_error(op, eng_cancelled(e) ? IBVF_RPC_BUSY : IBVF_RPC_DEADLINE, ETIMEDOUT,
			      "allocate", "%s before allocation",
			      eng_cancelled(e) ? "daemon stopping" : "deadline passed");
		if (op->warm)
			rollback(op);
		return false;
	}
	return true;
}

/*
 * Cluster mode: a requested GUID outside the node's pool GUIDs is reserved in
 * etcd before the pool may take it (ibvf_engine_reserve_fn). *@fn gets the
 * hook to call again once the allocation finished. 0 or error set.
 */
static int cluster_reserve(struct op *op, struct ibvf_alloc_request *req,
			   ibvf_engine_reserve_fn *fn, void **arg)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	int ret;

	pthread_mutex_lock(&e->lock);
	*fn = e->reserve_fn;
	*arg = e->reserve_arg;
	pthread_mutex_unlock(&e->lock);
	if (!*fn || !req->guid || eng_in_ranges(e, req->guid)) {
		*fn = NULL;
		return 0;
	}
	ret = (*fn)(*arg, req->guid, false, err, sizeof(err));
	if (!ret) {
		req->reserved = true;
		return 0;
	}
	*fn = NULL; /* refused: the hook keeps nothing pending */
	if (ret == -EEXIST || ret == -EBUSY || ret == -ERANGE || ret == -EINVAL)
		eng_set_error(op, alloc_code(ret), ret, "allocate", "requested GUID %s: %s",
			      ibvf_guid_format(req->guid, s), err);
	else /* etcd did not answer: never an unchecked grant */
		eng_set_error(op, IBVF_RPC_NOT_READY, EAGAIN, "allocate",
			      "ibvfd is not ready: cluster: requested GUID %s is outside the "
			      "node's GUID blocks and could not be reserved in etcd: %s",
			      ibvf_guid_format(req->guid, s), err);
	return ret;
}

/* allocated: persisted before the GUID touches the VF or the SM. 0 or error set. */
static int prepare_allocate(struct op *op)
{
	struct ibvf_alloc_request req = {.vf_index = -1};
	ibvf_engine_reserve_fn reserve = NULL;
	void *reserve_arg = NULL;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	int ret;

	req.owner = op->req.owner;
	req.guid = op->req.req_guid;
	req.pf = op->vf.pf;
	req.vf_index = op->vf.vf_index;
	req.pci = op->req.pci;
	req.pkeys = op->req.pkeys;
	req.n_pkeys = op->req.n_pkeys;
	if (op->vf.guids_known) {
		req.prev_node_guid = op->vf.node_guid;
		req.prev_port_guid = op->vf.port_guid;
	}
	req.prev_link_state = op->vf.link_state;
	/* a GUID the SM check just skipped is not given back to this owner again */
	req.no_owner_return = op->check_tries > 0;
	/*
	 * Stored at sm_requested at once: recovery then asks the SM to remove it
	 * (harmless before the add: a removal of a GUID the SM never had changes
	 * nothing) and resets the VF when it carries the GUID, as for a record left
	 * after the program step. One store write less per prepare (issue 17): the
	 * record is durable before the VF and the SM see the GUID, as before.
	 */
	req.state = IBVF_ALLOC_SM_REQUESTED;
	ret = cluster_reserve(op, &req, &reserve, &reserve_arg);
	if (ret)
		return ret;
	ret = ibvf_pool_allocate(op->e->pool, &req, &op->a, err, sizeof(err));
	ibvf_timing_mark(&op->timing, "store_allocate");
	if (reserve)
		reserve(reserve_arg, req.guid, true, NULL, 0);
	if (ret == -ENOSPC && !req.guid) {
		/* cluster mode: the blocks are used up; the claimer thread (cluster_pool.c)
		 * claims the next in the background: not ready (and why), not a pool error */
		struct ibvf_engine *e = op->e;
		char why[IBVF_ERR_LEN + 64];
		bool out;

		pthread_mutex_lock(&e->lock);
		out = e->ready_fn != NULL;
		if (out && e->ready_fn(e->ready_arg, why, sizeof(why)))
			snprintf(why, sizeof(why),
				 "the node's GUID blocks have no free GUID; a "
				 "new block is being claimed");
		pthread_mutex_unlock(&e->lock);
		if (out) {
			eng_set_error(op, IBVF_RPC_NOT_READY, EAGAIN, "allocate",
				      "ibvfd is not ready: %s: %s", e->ready_check, why);
			return ret;
		}
	}
	if (ret) {
		eng_set_error(op, alloc_code(ret), ret, "allocate", "%s", err);
		return ret;
	}
	op->created = true;
	log_info("PF %s VF %d (%s): GUID %s allocated for container %.12s ifname %s PKey 0x%04x",
		 op->vf.pf, op->vf.vf_index, op->req.pci, ibvf_guid_format(op->a.guid, s),
		 op->req.owner.container_id, op->req.owner.ifname,
		 op->req.n_pkeys ? op->req.pkeys[0] : 0);
	return 0;
}

/*
 * Node + port GUID, link state, rebind. 0 or error set (not rolled back).
 * The state "programmed" is not stored: sm_requested follows at once, and a
 * record left at "allocated" is walked back the same way (the VF is reset
 * when it carries the GUID), so the write bought no safety (issue 17).
 */
static int prepare_program(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	int ret;

	ret = e->vf.program(e->vf.ctx, &op->vf, op->a.guid, op->a.guid,
			    op->req.link_state[0] ? op->req.link_state : NULL, err, sizeof(err));
	ibvf_timing_mark(&op->timing, "vf_program"); /* GUIDs, link state, rebind */
	if (ret) {
		eng_set_error(op, IBVF_RPC_VF_ERROR, ret, "program", "PF %s VF %d (%s) GUID %s: %s",
			      op->vf.pf, op->vf.vf_index, op->req.pci,
			      ibvf_guid_format(op->a.guid, s), err);
		return ret;
	}
	if (deadline_passed(op) || eng_cancelled(e)) {
		eng_set_error(op, eng_cancelled(e) ? IBVF_RPC_BUSY : IBVF_RPC_DEADLINE, ETIMEDOUT,
			      "program", "%s after programming VF %s",
			      eng_cancelled(e) ? "daemon stopping" : "deadline passed",
			      op->req.pci);
		return -ETIMEDOUT;
	}
	return 0;
}

/*
 * sm_checked: the freshly allocated GUID must not be a member of a tenant
 * PKey the owner did not ask for (issue 14: a late add, a faked removal).
 * Managed memberships are removed and read back; a membership ibvf may not
 * change (an admin's, outside the managed section) makes it -EEXIST so the
 * caller picks another GUID. The default partition and admin entries that
 * name no GUID (OpenSM ALL=full) do not count. 0, -EEXIST, or error set.
 */
static int prepare_sm_check(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN + 96] = "", s[IBVF_GUID_STR_LEN];
	struct sm_seen f;
	int ret;

	ibvf_guid_format(op->a.guid, s);
	for (int attempt = 0;; attempt++) {
		size_t foreign = 0, fixed = 0;
		uint16_t first = 0;

		ret = sm_read_back(e, op->a.guid, &f, err, sizeof(err));
		if (ret) {
			eng_set_error(op, IBVF_RPC_SM_ERROR, ret, "sm_check",
				      "GUID %s: reading its SM membership back failed: %s", s, err);
			return ret;
		}
		for (size_t i = 0; i < f.n; i++) {
			struct ibvf_sm_member m = {.guid = op->a.guid};
			bool asked = false;

			for (size_t k = 0; k < op->a.n_pkeys; k++)
				asked |= ibvf_pkey_key(op->a.pkeys[k]) == f.pkey[i];
			if (asked)
				continue;
			if (!foreign++)
				first = f.pkey[i];
			if (attempt || !f.managed[i])
				continue;
			log_warn("GUID %s is still a member of PKey 0x%04x, which container %.12s "
				 "ifname %s did not ask for: removing it before the attach",
				 s, f.pkey[i], op->req.owner.container_id, op->req.owner.ifname);
			if (!ibvf_sm_batch_call(e->batch, IBVF_SM_REQ_REMOVE, f.pkey[i], &m,
						ibvf_mono_ms() + 30000, err, sizeof(err)))
				fixed++;
		}
		if (!foreign && !f.more)
			return 0;
		if (attempt || !fixed) {
			eng_set_error(op, IBVF_RPC_GUID_CONFLICT, EEXIST, "sm_check",
				      "GUID %s is a member of PKey 0x%04x%s, which container %.64s "
				      "ifname %s did not ask for",
				      s, first, f.more ? " and more" : "",
				      op->req.owner.container_id, op->req.owner.ifname);
			return -EEXIST;
		}
	}
}

static bool prepare_checked(struct op *op);

static void prepare_sm_done(struct op *op);

/*
 * A warm VF's GUID, now the owner's at sm_requested (warm_vf.c): the VF is
 * programmed and its port ACTIVE already, and the GUID is in no tenant
 * PKey; only the SM push and the P_Key wait are left. True when handed on.
 */
static bool prepare_warm(struct op *op)
{
	if (!op->a.n_pkeys) {
		op->sm_status = 0;
		prepare_sm_done(op);
		return false;
	}
	submit_sm(op, IBVF_SM_REQ_ADD);
	return true;
}

/* Return: true when the op was handed on (SM listing or batcher): hands off. */
static bool prepare_begin(struct op *op)
{
	/* the owner asks again: a release.sm note of it no longer stands (attach.c notes) */
	eng_sm_note_drop(op->e, &op->req.owner);
	if (!prepare_check(op))
		return false;
	if (op->warm) {
		/* no read-back: its GUID was checked when the VF was warmed (warm_vf.c) */
		if (eng_op_listing_dropped(op))
			ibvf_sm_batch_expect_listing(op->e->batch, -1);
		return prepare_warm(op);
	}
	if (prepare_allocate(op))
		return false;
	return request_listing(op, PH_SM_CHECK) || prepare_checked(op);
}

/*
 * The new GUID's SM membership is back: repair or skip a GUID the SM holds in
 * a PKey the owner did not ask for, then program the VF and ask the SM.
 * Return: true when the op was handed on.
 */
static bool prepare_checked(struct op *op)
{
	char err[IBVF_ERR_LEN + 96] = "", s[IBVF_GUID_STR_LEN];
	struct sm_seen f;
	bool foreign = false;
	int ret;

	ret = take_listed(op, &f, err, sizeof(err));
	ibvf_timing_mark(&op->timing, "sm_check");
	if (ret) {
		eng_set_error(op, IBVF_RPC_SM_ERROR, ret, "sm_check",
			      "GUID %s: reading its SM membership back failed: %s",
			      ibvf_guid_format(op->a.guid, s), err);
		rollback(op);
		return false;
	}
	for (size_t i = 0; i < f.n; i++) {
		bool asked = false;

		for (size_t k = 0; k < op->a.n_pkeys; k++)
			asked |= ibvf_pkey_key(op->a.pkeys[k]) == f.pkey[i];
		foreign |= !asked;
	}
	if (foreign || f.more) {
		/* rare (a leak): repair now, on this worker */
		ret = prepare_sm_check(op);
		if (ret) {
			/* back into quarantine: it leaves only once the SM is seen without it */
			rollback(op);
			op->created = false;
			if (ret != -EEXIST || op->req.req_guid || ++op->check_tries > 3)
				return false;
			log_warn("GUID %s skipped: %s; trying another",
				 ibvf_guid_format(op->a.guid, s), op->msg);
			op->code = 0;
			op->msg[0] = 0;
			if (prepare_allocate(op))
				return false;
			return request_listing(op, PH_SM_CHECK) || prepare_checked(op);
		}
	}
	/* sm_requested: persisted with the allocation, before the VF and the SM see the GUID */
	if (prepare_program(op)) {
		rollback(op);
		return false;
	}
	if (!op->a.n_pkeys) {
		/* a network without a PKey: nothing to push, wait for the port only */
		log_info("PF %s VF %d (%s): GUID %s has no PKey: no tenant membership pushed to "
			 "the SM; the port is in the partitions the SM gives every port",
			 op->vf.pf, op->vf.vf_index, op->req.pci, ibvf_guid_format(op->a.guid, s));
		op->sm_status = 0;
		prepare_sm_done(op);
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
		eng_set_error(op,
			      op->sm_status == -ETIMEDOUT && deadline_passed(op)
				      ? IBVF_RPC_DEADLINE
				      : IBVF_RPC_SM_ERROR,
			      op->sm_status, "sm_add", "GUID %s: %s", s, op->sm_msg);
		rollback(op);
		return;
	}
	/*
	 * "sm_confirmed" is not stored: a record at sm_requested is walked
	 * back the same way (SM removal, VF reset), and port_ready follows
	 * the port wait (issue 17: one store write less per attach).
	 */
	if (eng_cancelled(e)) {
		eng_set_error(op, IBVF_RPC_BUSY, ESHUTDOWN, "sm_add", "daemon stopping");
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
		 op->vf.vf_index, op->req.pci, s, op->port.lid, op->a.n_pkeys ? op->a.pkeys[0] : 0,
		 op->a.n_pkeys ? op->port.pkey_index[0] : -1);
	prepare_result(op);
}

/* --------------------------------------------------- release.sm notes -- */

int eng_sm_notes_new(struct ibvf_engine *e)
{
	e->sm_notes = calloc(ENG_SM_NOTES, sizeof(*e->sm_notes));
	return e->sm_notes ? 0 : -ENOMEM;
}

void eng_sm_notes_free(struct ibvf_engine *e)
{
	free(e->sm_notes);
	e->sm_notes = NULL;
}

/* The slot of @key's note, or NULL; under e->lock. */
static struct eng_sm_note *note_find(struct ibvf_engine *e, const char *key)
{
	for (size_t i = 0; i < ENG_SM_NOTES; i++)
		if (e->sm_notes[i].owner[0] && !strcmp(e->sm_notes[i].owner, key))
			return &e->sm_notes[i];
	return NULL;
}

/* release.sm saw the SM without @guid for @owner: note it (the oldest note makes room). */
static void note_set(struct ibvf_engine *e, const struct ibvf_owner *owner, uint64_t guid)
{
	struct eng_sm_note *n;
	char key[sizeof(n->owner)];

	eng_owner_key(owner, key, sizeof(key));
	pthread_mutex_lock(&e->lock);
	n = note_find(e, key);
	if (!n) {
		n = &e->sm_notes[e->sm_note_next];
		e->sm_note_next = (e->sm_note_next + 1) % ENG_SM_NOTES;
	}
	snprintf(n->owner, sizeof(n->owner), "%s", key);
	n->guid = guid;
	n->gen = e->sm_gen;
	n->passes = e->rec_passes;
	pthread_mutex_unlock(&e->lock);
}

/*
 * The plain release of @owner (record of @guid): take its note away. Return:
 * true when it was current (same GUID, nothing since that may have changed
 * the membership): the SM removal and its read-back are done.
 */
static bool note_take(struct ibvf_engine *e, const struct ibvf_owner *owner, uint64_t guid)
{
	struct eng_sm_note *n;
	char key[sizeof(n->owner)];
	bool current = false;

	eng_owner_key(owner, key, sizeof(key));
	pthread_mutex_lock(&e->lock);
	n = note_find(e, key);
	if (n) {
		current = n->guid == guid && n->gen == e->sm_gen;
		n->owner[0] = 0;
	}
	pthread_mutex_unlock(&e->lock);
	return current;
}

void eng_sm_note_drop(struct ibvf_engine *e, const struct ibvf_owner *owner)
{
	struct eng_sm_note *n;
	char key[sizeof(n->owner)];

	eng_owner_key(owner, key, sizeof(key));
	pthread_mutex_lock(&e->lock);
	n = note_find(e, key);
	if (n)
		n->owner[0] = 0;
	pthread_mutex_unlock(&e->lock);
}

/* Forget the notes of @guid (its record is released). */
static void note_drop_guid(struct ibvf_engine *e, uint64_t guid)
{
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < ENG_SM_NOTES; i++)
		if (e->sm_notes[i].guid == guid)
			e->sm_notes[i].owner[0] = 0;
	pthread_mutex_unlock(&e->lock);
}

void eng_sm_notes_stale(struct ibvf_engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->sm_gen++;
	pthread_mutex_unlock(&e->lock);
}

bool eng_sm_note_pending(struct ibvf_engine *e, uint64_t guid)
{
	bool found = false;

	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; !found && i < ENG_SM_NOTES; i++)
		found = e->sm_notes[i].owner[0] && e->sm_notes[i].guid == guid &&
			e->rec_passes - e->sm_notes[i].passes < ENG_SM_NOTE_PASSES;
	pthread_mutex_unlock(&e->lock);
	return found;
}

/* ------------------------------------------------ commit, release, gc -- */

static void do_commit(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN];
	int ret;

	/* a commit of the owner may follow a prepare that added its membership again */
	eng_sm_note_drop(e, &op->req.owner);
	ret = ibvf_pool_find_owner(e->pool, op->req.owner.container_id, op->req.owner.ifname,
				   &op->a, err, sizeof(err));
	ibvf_timing_mark(&op->timing, "store_read");
	if (ret) {
		eng_set_error(op,
			      ret == -ENOENT ? IBVF_RPC_INVALID_PARAMS : IBVF_RPC_INTERNAL_ERROR,
			      ret, "commit", "%s", err);
		return;
	}
	if (op->a.state != IBVF_ALLOC_PORT_READY && op->a.state != IBVF_ALLOC_HANDED) {
		eng_set_error(op, IBVF_RPC_INVALID_PARAMS, EINVAL, "commit",
			      "container %.64s ifname %s: attachment is %s, not prepared",
			      op->req.owner.container_id, op->req.owner.ifname,
			      ibvf_alloc_state_name(op->a.state));
		return;
	}
	if (op->a.state != IBVF_ALLOC_HANDED && store_state(op, IBVF_ALLOC_HANDED))
		return;
	/*
	 * a handed record lives in pool.db within a second, not only in the WAL
	 * (issue 14): one deferred checkpoint per window serves every hand-over
	 * in it, off the commit's path and the pool's mutex (issue 17)
	 */
	eng_checkpoint_soon(e);
	op->have_result = true; /* op->a: handed */
}

/* Release the owner's attachment, blocking (worker). 0, or error set on @op. */
static int release_owner(struct op *op, const struct ibvf_owner *o)
{
	struct ibvf_engine *e = op->e;
	struct ibvf_alloc a;
	char err[IBVF_ERR_LEN];
	bool pending;
	int ret;

	ret = ibvf_pool_find_owner(e->pool, o->container_id, o->ifname, &a, err, sizeof(err));
	if (ret == -ENOENT)
		return 0;
	if (ret) {
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "release", "%s", err);
		return ret;
	}
	ret = eng_undo(e, &a, a.state >= IBVF_ALLOC_SM_REQUESTED, &pending, err, sizeof(err));
	if (ret) {
		eng_set_error(op, IBVF_RPC_VF_ERROR, ret, "release", "%s", err);
		return ret;
	}
	return 0;
}

/*
 * The owner holds no record, but says where it was attached (release params
 * "pci" and/or "guid", from the CNI plugin's cache): a record `ibvfctl pool
 * rebuild` adopted there (owner IBVF_POOL_ADOPTED_PREFIX...) is the one it
 * lost with the store, and its DEL releases it like any other (issue 14).
 * A record of another real owner is never touched. 0 (into op->a), -ENOENT.
 */
static bool adopted_match(const struct eng_req *r, const struct ibvf_alloc *a)
{
	return !strncmp(a->owner.container_id, IBVF_POOL_ADOPTED_PREFIX,
			strlen(IBVF_POOL_ADOPTED_PREFIX)) &&
	       (!r->req_guid || a->guid == r->req_guid) &&
	       (!a->pci[0] || !r->pci[0] || !strcmp(a->pci, r->pci)) &&
	       (a->state == IBVF_ALLOC_HANDED || a->state == IBVF_ALLOC_PORT_READY ||
		a->state == IBVF_ALLOC_RELEASING);
}

static int find_adopted(struct op *op, char *err, size_t errlen)
{
	struct ibvf_engine *e = op->e;
	const struct eng_req *r = &op->req;
	struct ibvf_alloc a;
	char s[IBVF_GUID_STR_LEN];
	int ret = -ENOENT;

	if (r->pci[0])
		ret = ibvf_pool_find_pci(e->pool, r->pci, &a, err, errlen);
	if ((ret == -ENOENT || (!ret && !adopted_match(r, &a))) && r->req_guid)
		ret = ibvf_pool_get(e->pool, r->req_guid, &a, err, errlen);
	if (ret)
		return ret;
	if (!adopted_match(r, &a))
		return -ENOENT;
	log_notice("release of container %s/%s: GUID %s on VF %s is held by the adopted record "
		   "%s (ibvfctl pool rebuild): released for it",
		   r->owner.container_id, r->owner.ifname, ibvf_guid_format(a.guid, s),
		   a.pci[0] ? a.pci : "-", a.owner.container_id);
	op->a = a;
	return 0;
}

/* API release, first half: Return true when handed to the SM batcher. */
static bool release_begin(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN];
	int ret;

	ret = ibvf_pool_find_owner(e->pool, op->req.owner.container_id, op->req.owner.ifname,
				   &op->a, err, sizeof(err));
	if (ret == -ENOENT)
		ret = find_adopted(op, err, sizeof(err));
	ibvf_timing_mark(&op->timing, "store_read");
	if (ret == -ENOENT) {
		if (!op->req.sm_stage)
			eng_sm_note_drop(e, &op->req.owner);
		op->have_result = true; /* released: false */
		return false;
	}
	if (!ret)
		ret = undo_begin(e, &op->a, err, sizeof(err));
	if (ret) {
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "release", "%s", err);
		return false;
	}
	op->created = true; /* op->a is valid for release_finish() */
	/*
	 * The plain release after a release.sm whose note still stands: the SM
	 * was seen without the GUID and nothing since could have added it
	 * (no prepare or commit of the owner, no reconciliation pass, no SM
	 * backend failure, no restart): the VF half only. In doubt: remove.
	 */
	if (!op->req.sm_stage && note_take(e, &op->req.owner, op->a.guid)) {
		op->sm_noted = true;
		return false; /* release_finish() next */
	}
	/* "releasing" may be a retry: the record may or may not still be in the SM */
	if (!op->a.n_pkeys)
		return false; /* no PKeys: nothing in the SM, release_finish() next */
	submit_sm(op, IBVF_SM_REQ_REMOVE);
	return true;
}

static void release_finish(struct op *op)
{
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	bool pending, failed;
	int ret;

	op->phase = PH_DONE;
	if (op->sm_status)
		log_warn("GUID %s: SM removal failed, reconciliation will retry: %s",
			 ibvf_guid_format(op->a.guid, s), op->sm_msg);
	failed = op->sm_status != 0;
	if (!failed && op->a.n_pkeys && !op->sm_noted) {
		struct sm_seen f;
		bool left = take_listed(op, &f, err, sizeof(err)) != 0;

		ibvf_timing_mark(&op->timing, "sm_verify");

		for (size_t i = 0; !left && i < op->a.n_pkeys; i++)
			left = seen_has(&f, op->a.pkeys[i]);
		/* still listed (or unknown): remove again and read back, else pending */
		failed = left && !sm_removal_verified(op->e, &op->a);
	}
	if (op->req.sm_stage) {
		/*
		 * release.sm: the VF's netdev is still in the Pod. Nothing of the
		 * VF is touched (no reset, rebind, warm hand-over or quarantine:
		 * the plugin moves the netdev back now); the record stays
		 * "releasing" for the plain release, which a note spares the SM
		 * half when the SM was seen without the GUID.
		 */
		if (!failed)
			note_set(op->e, &op->req.owner, op->a.guid);
		op->have_result = true;
		op->sm_removed = !failed;
		return;
	}
	/* vf.warm: the VF's new GUID is set by the next warm pass, off the DEL's path */
	if (!failed && eng_warm_release(op->e, &op->a)) {
		op->have_result = op->released = true;
		return;
	}
	ret = undo_finish(op->e, &op->a, failed, &pending, err, sizeof(err));
	if (ret) {
		eng_set_error(op, IBVF_RPC_VF_ERROR, ret, "release", "%s", err);
		return;
	}
	op->have_result = op->released = true;
	op->sm_removal_pending = pending;
}

struct gc_ctx {
	struct op *op;
	struct ibvf_alloc *victims;
	size_t n, cap;
};

static int gc_collect(void *arg, const struct ibvf_alloc *a)
{
	struct gc_ctx *g = arg;
	const struct eng_req *req = &g->op->req;

	if (req->has_network && strcmp(a->owner.network, req->network))
		return 0;
	/*
	 * A record `ibvfctl pool rebuild` adopted has no owner the runtime
	 * knows: releasing it would take a running Pod's GUID away (issue 14).
	 * An admin releases it with `ibvfctl pool release GUID`.
	 */
	if (!strncmp(a->owner.container_id, IBVF_POOL_ADOPTED_PREFIX,
		     strlen(IBVF_POOL_ADOPTED_PREFIX)))
		return 0;
	/* a warm VF's GUID is ibvfd's own, no runtime's (warm_vf.c) */
	if (ibvf_alloc_is_warm(a))
		return 0;
	for (size_t i = 0; i < req->n_valid; i++) {
		if (!strcmp(req->valid[i].container_id, a->owner.container_id) &&
		    !strcmp(req->valid[i].ifname, a->owner.ifname))
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

/* Append @g; like a JSON array append, a failure loses the entry only. */
static void guids_add(struct eng_guids *l, uint64_t g)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		uint64_t *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = g;
}

static void do_gc(struct op *op)
{
	struct ibvf_engine *e = op->e;
	struct gc_ctx g = {.op = op};
	char err[IBVF_ERR_LEN];
	int ret;

	ret = ibvf_pool_list(e->pool, NULL, gc_collect, &g, err, sizeof(err));
	if (ret) {
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "gc", "%s",
			      ret == -ENOMEM ? "out of memory" : err);
		free(g.victims);
		return;
	}
	for (size_t i = 0; i < g.n; i++) {
		struct ibvf_alloc *a = &g.victims[i];
		struct keyhold k = {0};
		bool pending;

		eng_owner_key(&a->owner, k.owner, sizeof(k.owner));
		snprintf(k.pci, sizeof(k.pci), "%s", a->pci);
		if (!eng_try_keys(e, &k)) {
			guids_add(&op->gc_skipped, a->guid);
			continue; /* an operation on it is running: next GC */
		}
		/* re-read under the keys: it may have changed since the listing */
		ret = ibvf_pool_get(e->pool, a->guid, a, err, sizeof(err));
		if (!ret && a->state == IBVF_ALLOC_RELEASING && eng_sm_note_pending(e, a->guid)) {
			/*
			 * its DEL sent release.sm and may be moving the netdev
			 * back right now: no VF reset under the move; its
			 * release (or a pass once the netdev is back) ends it
			 */
			guids_add(&op->gc_skipped, a->guid);
		} else if (!ret && a->state != IBVF_ALLOC_QUARANTINED) {
			ret = eng_undo(e, a, a->state >= IBVF_ALLOC_SM_REQUESTED, &pending, err,
				       sizeof(err));
			if (ret)
				log_err("gc: %s", err);
			else
				guids_add(&op->gc_released, a->guid);
		}
		eng_drop_keys(e, &k);
	}
	op->have_result = true;
	free(g.victims);
}

/* ----------------------------------------------------- status, list, audit -- */

static void do_status(struct op *op)
{
	struct ibvf_engine *e = op->e;
	char err[IBVF_ERR_LEN];
	int ret;

	eng_status_snapshot(e, op->status);
	/* a store that cannot be read is a reason to report, not a failed status */
	ret = ibvf_pool_stats(e->pool, &op->status->pool, err, sizeof(err));
	op->status->pool_ok = ret == 0;
	if (ret)
		eng_readiness_add(&op->status->rd, "store",
				  "reading the GUID pool store failed: %s", err);
	op->have_result = true;
}

struct list_ctx {
	struct op *op;
	size_t seen, emitted;
};

static int list_cb(void *arg, const struct ibvf_alloc *a)
{
	struct list_ctx *l = arg;
	const struct eng_req *req = &l->op->req;

	if (req->has_network && strcmp(a->owner.network, req->network))
		return 0;
	if (l->seen++ < req->offset)
		return 0;
	if (req->limit && l->emitted >= req->limit)
		return 0; /* keep counting */
	l->emitted++;
	return l->op->sink.record(l->op->sink.arg, a);
}

static void do_list(struct op *op)
{
	struct list_ctx l = {.op = op};
	char err[IBVF_ERR_LEN];
	int ret;

	ret = ibvf_pool_list(op->e->pool, NULL, list_cb, &l, err, sizeof(err));
	if (ret) {
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "list", "%s", err);
		return;
	}
	op->total = l.seen;
	op->have_result = true;
}

static void do_audit(struct op *op)
{
	char err[IBVF_ERR_LEN];
	int ret = eng_reconcile(op->e, op->req.fix ? IBVF_PASS_FIX : IBVF_PASS_REPAIR,
				op->sink.finding, op->sink.arg, err, sizeof(err));

	if (ret < 0) {
		eng_set_error(op, ret == -EBUSY ? IBVF_RPC_BUSY : IBVF_RPC_INTERNAL_ERROR, ret,
			      "audit", "%s", err);
		return;
	}
	op->problems = ret;
	op->have_result = true;
}

/* ---------------------------------------------------------- dispatch -- */

static void op_step(struct op *op);

void eng_op_run(void *arg)
{
	struct op *op = arg;
	struct ibvf_attach_timing *was = ibvf_timing_set_current(&op->timing);

	ibvf_timing_mark(&op->timing, "queue"); /* keys and a free worker */
	/* may hand @op on (SM batcher, listing): not touched after it */
	op_step(op);
	ibvf_timing_set_current(was);
}

/* One turn of @op on a worker (eng_op_run). */
static void op_step(struct op *op)
{
	switch (op->kind) {
	case OP_PREPARE:
		if (op->phase == PH_BEGIN) {
			if (prepare_begin(op))
				return; /* the SM listing or batcher resubmits it */
		} else if (op->phase == PH_SM_CHECK) {
			if (prepare_checked(op))
				return;
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
		} else if (op->phase == PH_SM_DONE && !op->sm_status) {
			/* removals answered: read them back (shared listing) */
			if (request_listing(op, PH_SM_VERIFY))
				return;
			release_finish(op);
		} else {
			release_finish(op);
		}
		break;
	case OP_UNDO:
		release_owner(op, &op->req.owner);
		break;
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
	if (ibvf_loop_post(op->e->loop, eng_op_finish, op))
		log_err("cannot hand a finished request back to the loop (out of memory)");
}
