// SPDX-License-Identifier: MIT
/* SM request batcher: per-PKey coalescing, self-clocking flushes, retries with backoff. */
#include "sm_batch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "sort.h"
#include "evloop.h"
#include "engine_metrics.h"
#include "log.h"

struct req {
	enum ibvf_sm_req_kind kind;
	uint16_t pkey;
	struct ibvf_sm_member member;
	struct ibvf_sm_pkey_flags flags;
	bool has_flags; /* false: the backend's configured defaults (flags NULL) */
	char owner[IBVF_SM_OWNER_MAX +
		   1]; /* adds: who wants it ("": unknown), add_members_owned() */
	int64_t deadline_ms;
	ibvf_sm_done_fn done;
	void *arg;
	bool finished;
};

struct ls_waiter {
	ibvf_sm_members_fn done;
	void *arg;
};

struct ibvf_sm_batch {
	struct ibvf_sm_batch_opts o;
	pthread_mutex_t lock; /* queue, stats, options */
	pthread_cond_t cond;
	pthread_mutex_t be_lock; /* one backend call at a time */
	struct req *q;		 /* queued, not yet sent */
	size_t n, cap;
	int64_t first_ms; /* when the oldest queued request arrived */
	bool stop, flush_now;
	bool clocked;  /* the queue filled while a flush was in flight: send it on return */
	long expected; /* requests announced, not yet submitted */
	pthread_t thread;
	struct ibvf_sm_batch_stats st;
	unsigned int rnd;
	/* shared listings (ibvf_sm_batch_members_async): the lister thread */
	pthread_mutex_t ls_lock;
	pthread_cond_t ls_cond;
	struct ls_waiter *lw; /* waiting for the next listing */
	size_t n_lw, cap_lw;
	bool ls_stop;
	bool ls_clocked;     /* waiters queued while a listing was in flight: go on its return */
	long ls_expected;    /* listings announced (ibvf_sm_batch_expect_listing), not yet asked */
	int64_t ls_first_ms; /* when the oldest waiting asker asked */
	uint64_t ls_seq;
	pthread_t ls_thread;
};

static void finish(struct ibvf_sm_batch *b, struct req *r, int status, const char *msg)
{
	if (r->finished)
		return;
	r->finished = true;
	if (status) {
		pthread_mutex_lock(&b->lock);
		b->st.failures++;
		pthread_mutex_unlock(&b->lock);
	}
	r->done(r->arg, status, msg ? msg : "");
}

/* 0: no flags (backend defaults), else 1 + index0 * 2 + ipoib. */
static int flags_rank(const struct req *r)
{
	return r->has_flags ? 1 + (r->flags.index0 ? 2 : 0) + (r->flags.ipoib ? 1 : 0) : 0;
}

static int cmp_req(const void *x, const void *y)
{
	const struct req *a = x, *b = y;

	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1; /* removes first */
	if (a->pkey != b->pkey)
		return a->pkey < b->pkey ? -1 : 1;
	if (a->member.membership != b->member.membership)
		return a->member.membership < b->member.membership ? -1 : 1;
	if (flags_rank(a) != flags_rank(b))
		return flags_rank(a) < flags_rank(b) ? -1 : 1;
	return a->member.guid < b->member.guid ? -1 : a->member.guid > b->member.guid;
}

/*
 * Can @a and @b go in one backend call? Same kind and PKey, and for adds the
 * same membership and flags: UFM's add takes one "membership" for all its
 * GUIDs and ignores "memberships" (issue 16; NVIDIA's UFM mock), and a
 * call carries one set of flags.
 */
static bool same_call(const struct req *a, const struct req *b)
{
	if (a->kind != b->kind || a->pkey != b->pkey)
		return false;
	if (a->kind != IBVF_SM_REQ_ADD)
		return true;
	return a->member.membership == b->member.membership && flags_rank(a) == flags_rank(b);
}

/* How long the calling thread's last backend call took (ibvf_sm_batch_last_call_ns()). */
static _Thread_local uint64_t last_call_ns;

uint64_t ibvf_sm_batch_last_call_ns(void)
{
	return last_call_ns;
}

/* One backend call for @n requests of one kind and PKey. */
static int backend_call(struct ibvf_sm_batch *b, struct req *r, size_t n, char *err, size_t errlen)
{
	int64_t t0 = ibvf_mono_ms();
	uint64_t t0_ns = ibvf_mono_ns();
	int ret;

	pthread_mutex_lock(&b->be_lock);
	if (r[0].kind == IBVF_SM_REQ_ADD) {
		struct ibvf_sm_member *m = malloc(n * sizeof(*m));

		if (!m) {
			pthread_mutex_unlock(&b->be_lock);
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < n; i++)
			m[i] = r[i].member;
		if (IBVF_SM_OPS_HAS(b->o.ops, add_members_owned)) {
			/* the module stores owners (cluster: etcd): one pointer per member */
			const char **ow = malloc(n * sizeof(*ow));

			if (!ow) {
				free(m);
				pthread_mutex_unlock(&b->be_lock);
				return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			}
			for (size_t i = 0; i < n; i++)
				ow[i] = r[i].owner;
			ret = b->o.ops->add_members_owned(b->o.backend, r[0].pkey, m, ow, n,
							  r[0].has_flags ? &r[0].flags : NULL, err,
							  errlen);
			free(ow);
		} else {
			ret = b->o.ops->add_members(b->o.backend, r[0].pkey, m, n,
						    r[0].has_flags ? &r[0].flags : NULL, err,
						    errlen);
		}
		free(m);
	} else {
		uint64_t *g = malloc(n * sizeof(*g));

		if (!g) {
			pthread_mutex_unlock(&b->be_lock);
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < n; i++)
			g[i] = r[i].member.guid;
		ret = b->o.ops->remove_members(b->o.backend, r[0].pkey, g, n, err, errlen);
		free(g);
	}
	pthread_mutex_unlock(&b->be_lock);
	last_call_ns = ibvf_mono_ns() - t0_ns;
	eng_metrics_sm_call(r[0].kind == IBVF_SM_REQ_ADD ? "add" : "remove", n,
			    (double)last_call_ns / 1e9, ret);
	pthread_mutex_lock(&b->lock);
	b->st.call_ms_total += (uint64_t)(ibvf_mono_ms() - t0);
	if (r[0].kind == IBVF_SM_REQ_ADD)
		b->st.add_calls++;
	else
		b->st.remove_calls++;
	if (ret < 0)
		b->st.last_error = ret;
	b->st.last_call = (struct ibvf_sm_call_record){
		.seq = b->st.add_calls + b->st.remove_calls,
		.at_ms = ibvf_wall_ms(),
		.kind = r[0].kind,
		.pkey = r[0].pkey,
		.n = n,
		.result = ret < 0 ? ret : 0,
	};
	if (ret < 0)
		snprintf(b->st.last_call.error, sizeof(b->st.last_call.error), "%s",
			 err[0] ? err : strerror(-ret));
	if (r[0].kind == IBVF_SM_REQ_ADD)
		b->st.last_add = b->st.last_call;
	else
		b->st.last_remove = b->st.last_call;
	pthread_mutex_unlock(&b->lock);
	return ret < 0 ? ret : 0;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

	while (ms > 0 && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Backoff before attempt @attempt (1-based retries): base * 2^(attempt-1), capped, jittered. */
static int64_t backoff_ms(struct ibvf_sm_batch *b, unsigned attempt)
{
	uint64_t d = b->o.retry_base_ms;

	for (unsigned i = 1; i < attempt && d < b->o.retry_max_ms; i++)
		d *= 2;
	if (d > b->o.retry_max_ms)
		d = b->o.retry_max_ms;
	/* "equal jitter": half fixed, half random, so retries of many daemons spread */
	return (int64_t)(d / 2 + (uint64_t)rand_r(&b->rnd) % (d / 2 + 1));
}

/* Complete every request of @r[0..n) that is still open with @status and @msg. */
static void finish_all(struct ibvf_sm_batch *b, struct req *r, size_t n, int status,
		       const char *msg)
{
	for (size_t i = 0; i < n; i++)
		finish(b, &r[i], status, msg);
}

/*
 * Send @n requests (same kind, PKey) under the error contract of
 * include/ibvf/sm_backend.h: retry a transient failure with backoff; split a
 * member fault of several requests in halves; fail anything else at once.
 */
static void send_group(struct ibvf_sm_batch *b, struct req *r, size_t n, bool shutting_down)
{
	char err[IBVF_ERR_LEN] = "", msg[IBVF_ERR_LEN + 96];
	unsigned attempt = 0;
	int ret;

	for (;;) {
		int64_t now, latest = 0;
		size_t live = 0;

		err[0] = 0;
		ret = backend_call(b, r, n, err, sizeof(err));
		attempt++;
		if (!ret) {
			finish_all(b, r, n, 0, NULL);
			return;
		}
		if (ibvf_sm_err_is_member_fault(ret) && n > 1) {
			send_group(b, r, n / 2, shutting_down);
			send_group(b, r + n / 2, n - n / 2, shutting_down);
			return;
		}
		snprintf(msg, sizeof(msg), "SM %s %s PKey 0x%04x (%zu GUIDs, attempt %u): %s",
			 b->o.ops->name, r[0].kind == IBVF_SM_REQ_ADD ? "add to" : "remove from",
			 r[0].pkey, n, attempt, err[0] ? err : strerror(-ret));
		if (!ibvf_sm_err_is_transient(ret)) {
			log_warn("%s; permanent error, not retried", msg);
			finish_all(b, r, n, ret, msg);
			return;
		}
		now = ibvf_mono_ms();
		for (size_t i = 0; i < n; i++) {
			if (r[i].finished)
				continue;
			if (r[i].deadline_ms && r[i].deadline_ms <= now) {
				finish(b, &r[i], -ETIMEDOUT, msg);
				continue;
			}
			live++;
			if (!r[i].deadline_ms || latest == 0 || r[i].deadline_ms > latest)
				latest = r[i].deadline_ms ? r[i].deadline_ms : INT64_MAX;
		}
		if (!live)
			return;
		if (attempt >= b->o.max_attempts || shutting_down) {
			log_warn("%s; giving up", msg);
			finish_all(b, r, n, ret, msg);
			return;
		}
		{
			int64_t d = backoff_ms(b, attempt);

			if (latest != INT64_MAX && now + d > latest)
				d = latest - now;
			log_warn("%s; retrying in %lld ms", msg, (long long)d);
			pthread_mutex_lock(&b->lock);
			b->st.retries++;
			pthread_mutex_unlock(&b->lock);
			sleep_ms(d);
		}
	}
}

static void flush(struct ibvf_sm_batch *b, struct req *r, size_t n, uint32_t batch_max,
		  bool shutting_down)
{
	size_t i = 0;

	ibvf_sort(r, n, sizeof(*r), cmp_req);
	while (i < n) {
		size_t j = i;

		while (j < n && j - i < batch_max && same_call(&r[j], &r[i]))
			j++;
		log_debug("SM %s: %s %zu GUID(s) %s PKey 0x%04x", b->o.ops->name,
			  r[i].kind == IBVF_SM_REQ_ADD ? "adding" : "removing", j - i,
			  r[i].kind == IBVF_SM_REQ_ADD ? "to" : "from", r[i].pkey);
		send_group(b, r + i, j - i, shutting_down);
		i = j;
	}
}

static void *sm_thread(void *arg)
{
	struct ibvf_sm_batch *b = arg;

	pthread_mutex_lock(&b->lock);
	for (;;) {
		int64_t now = ibvf_mono_ms();
		struct req *r;
		size_t n;
		uint32_t bmax;
		bool stop;

		if (!b->n) {
			if (b->stop)
				break;
			pthread_cond_wait(&b->cond, &b->lock);
			continue;
		}
		/*
		 * Self-clocking (issue 17): with no call in flight a request goes at
		 * once; what queued while a call was in flight goes when it returns
		 * (b->clocked). window_ms is only an optional minimum age of the
		 * oldest request (default 0). An idle SM still waits for announced
		 * requests on their way (bounded by hold_max_ms), so a burst of
		 * attaches shares its first call; in a closed loop everybody ends up
		 * waiting on the batch, so the announced count drains and the hold
		 * ends early. A lone request announces nobody but itself.
		 */
		int64_t hold = (int64_t)b->o.hold_max_ms;

		if (!b->stop && !b->flush_now && b->n < b->o.batch_max &&
		    (now < b->first_ms + b->o.window_ms ||
		     (!b->clocked && b->expected > 0 &&
		      now < b->first_ms + b->o.window_ms + hold))) {
			int64_t until = b->first_ms + b->o.window_ms;
			struct timespec ts;

			if (now >= until)
				until += hold;

			/* condvar uses CLOCK_MONOTONIC (set in ibvf_sm_batch_new) */
			ts.tv_sec = (time_t)(until / 1000);
			ts.tv_nsec = (long)(until % 1000) * 1000000;
			pthread_cond_timedwait(&b->cond, &b->lock, &ts);
			continue;
		}
		r = b->q;
		n = b->n;
		b->q = NULL;
		b->n = b->cap = 0;
		b->flush_now = false;
		b->clocked = false;
		b->st.flushes++;
		bmax = b->o.batch_max;
		stop = b->stop;
		pthread_mutex_unlock(&b->lock);
		flush(b, r, n, bmax, stop);
		free(r);
		pthread_mutex_lock(&b->lock);
		/* arrived during the calls: the next batch, sent now */
		b->clocked = b->n > 0;
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

static void *ls_thread(void *arg);

int ibvf_sm_batch_new(const struct ibvf_sm_batch_opts *o, struct ibvf_sm_batch **out, char *err,
		      size_t errlen)
{
	struct ibvf_sm_batch *b = calloc(1, sizeof(*b));
	pthread_condattr_t ca;
	int ret;

	*out = NULL;
	if (!b)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	b->o = *o;
	if (!b->o.batch_max)
		b->o.batch_max = 1024;
	if (!b->o.retry_base_ms)
		b->o.retry_base_ms = 100;
	if (!b->o.retry_max_ms)
		b->o.retry_max_ms = 5000;
	if (!b->o.max_attempts)
		b->o.max_attempts = 8;
	if (!b->o.hold_max_ms)
		b->o.hold_max_ms = 1000;
	b->rnd = o->seed;
	pthread_mutex_init(&b->lock, NULL);
	pthread_mutex_init(&b->be_lock, NULL);
	pthread_mutex_init(&b->ls_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->ls_cond, &ca);
	pthread_cond_init(&b->cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&b->thread, NULL, sm_thread, b);
	if (!ret) {
		ret = -pthread_create(&b->ls_thread, NULL, ls_thread, b);
		if (ret) {
			pthread_mutex_lock(&b->lock);
			b->stop = true;
			pthread_cond_signal(&b->cond);
			pthread_mutex_unlock(&b->lock);
			pthread_join(b->thread, NULL);
		}
	}
	if (ret) {
		pthread_mutex_destroy(&b->lock);
		pthread_mutex_destroy(&b->be_lock);
		pthread_mutex_destroy(&b->ls_lock);
		pthread_cond_destroy(&b->ls_cond);
		pthread_cond_destroy(&b->cond);
		free(b);
		return ibvf_errf(err, errlen, ret, "pthread_create: %s", strerror(-ret));
	}
	*out = b;
	return 0;
}

int ibvf_sm_batch_submit(struct ibvf_sm_batch *b, enum ibvf_sm_req_kind kind, uint16_t pkey,
			 const struct ibvf_sm_member *member,
			 const struct ibvf_sm_pkey_flags *flags, int64_t deadline_ms,
			 ibvf_sm_done_fn done, void *arg)
{
	return ibvf_sm_batch_submit_owned(b, kind, pkey, member, NULL, flags, deadline_ms, done,
					  arg);
}

int ibvf_sm_batch_submit_owned(struct ibvf_sm_batch *b, enum ibvf_sm_req_kind kind, uint16_t pkey,
			       const struct ibvf_sm_member *member, const char *owner,
			       const struct ibvf_sm_pkey_flags *flags, int64_t deadline_ms,
			       ibvf_sm_done_fn done, void *arg)
{
	struct req nr = {
		.kind = kind,
		.pkey = pkey & IBVF_PKEY_KEY_MASK,
		.member = *member,
		.flags = flags ? *flags : (struct ibvf_sm_pkey_flags){0},
		.has_flags = flags != NULL,
		.deadline_ms = deadline_ms,
		.done = done,
		.arg = arg,
	};
	struct req old = {0};
	bool replaced = false;

	if (owner && kind == IBVF_SM_REQ_ADD)
		ibvf_sm_owner_clean(nr.owner, sizeof(nr.owner), owner);
	pthread_mutex_lock(&b->lock);
	if (b->stop) {
		pthread_mutex_unlock(&b->lock);
		return -ESHUTDOWN;
	}
	b->st.requests++;
	for (size_t i = 0; i < b->n; i++) {
		if (b->q[i].pkey == nr.pkey && b->q[i].member.guid == nr.member.guid) {
			old = b->q[i];
			b->q[i] = nr;
			replaced = true;
			b->st.coalesced++;
			break;
		}
	}
	if (!replaced) {
		if (b->n == b->cap) {
			size_t cap = b->cap ? b->cap * 2 : 64;
			struct req *q = realloc(b->q, cap * sizeof(*q));

			if (!q) {
				b->st.requests--;
				pthread_mutex_unlock(&b->lock);
				return -ENOMEM;
			}
			b->q = q;
			b->cap = cap;
		}
		if (!b->n)
			b->first_ms = ibvf_mono_ms();
		b->q[b->n++] = nr;
	}
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
	if (replaced)
		old.done(old.arg, old.kind == IBVF_SM_REQ_ADD ? -ECANCELED : 0,
			 "replaced by a later request for the same GUID and PKey");
	return 0;
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
	char msg[IBVF_ERR_LEN + 96];
};

static void wake_waiter(void *arg, int status, const char *msg)
{
	struct waiter *w = arg;

	pthread_mutex_lock(&w->lock);
	w->status = status;
	snprintf(w->msg, sizeof(w->msg), "%s", msg);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int ibvf_sm_batch_call(struct ibvf_sm_batch *b, enum ibvf_sm_req_kind kind, uint16_t pkey,
		       const struct ibvf_sm_member *member, int64_t deadline_ms, char *msg,
		       size_t msglen)
{
	struct waiter w = {.done = false};
	int ret;

	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	ret = ibvf_sm_batch_submit(b, kind, pkey, member, NULL, deadline_ms, wake_waiter, &w);
	if (!ret) {
		pthread_mutex_lock(&w.lock);
		while (!w.done)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		ret = w.status;
		if (ret)
			ibvf_errf(msg, msglen, ret, "%s", w.msg);
	} else {
		ibvf_errf(msg, msglen, ret, "SM batcher: %s", strerror(-ret));
	}
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	return ret;
}

static int listed_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct ibvf_sm_members *s = arg;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct ibvf_sm_listed *v = realloc(s->m, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->m = v;
		s->cap = cap;
	}
	s->m[s->n++] =
		(struct ibvf_sm_listed){m->guid, (uint16_t)(pkey & 0x7fff), m->membership, managed};
	return 0;
}

static int cmp_listed(const void *x, const void *y)
{
	const struct ibvf_sm_listed *a = x, *b = y;

	if (a->guid != b->guid)
		return a->guid < b->guid ? -1 : 1;
	return a->pkey < b->pkey ? -1 : a->pkey > b->pkey;
}

/* One listing, under the backend lock; never NULL but on -ENOMEM. */
static struct ibvf_sm_members *list_all(struct ibvf_sm_batch *b, uint64_t seq)
{
	struct ibvf_sm_members *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return NULL;
	s->seq = seq;
	s->refs = 1;
	uint64_t t0 = ibvf_mono_ns();

	pthread_mutex_lock(&b->be_lock);
	ret = b->o.ops->list_members(b->o.backend, -1, listed_cb, s, s->err, sizeof(s->err));
	pthread_mutex_unlock(&b->be_lock);
	eng_metrics_sm_call("list", 0, (double)(ibvf_mono_ns() - t0) / 1e9, ret);
	if (ret > 0 || ret == -ENOMEM)
		ret = -ENOMEM; /* our callback's only refusal */
	s->status = ret < 0 ? ret : 0;
	if (s->status && !s->err[0])
		snprintf(s->err, sizeof(s->err), "listing SM membership failed: %s",
			 strerror(-ret));
	if (!s->status && s->n)
		qsort(s->m, s->n, sizeof(*s->m), cmp_listed);
	return s;
}

/* The lister: one listing for everybody who asked before it started. */
static void *ls_thread(void *arg)
{
	struct ibvf_sm_batch *b = arg;

	pthread_mutex_lock(&b->ls_lock);
	for (;;) {
		struct ibvf_sm_members *s;
		struct ls_waiter *w;
		size_t n;
		uint64_t seq;

		if (!b->n_lw) {
			if (b->ls_stop)
				break;
			pthread_cond_wait(&b->ls_cond, &b->ls_lock);
			continue;
		}
		/*
		 * Like the SM batch (sm_thread): with no listing in flight, waiters
		 * are held while announced askers are still on their way (each
		 * cold prepare announces its read-back when it starts), at most
		 * hold_max_ms after the oldest asked, so a burst of cold prepares
		 * shares one listing instead of a lone first one and a second for
		 * the rest (issue 17: a round trip less). A lone asker announces
		 * nobody but itself and lists at once; waiters that queued during
		 * a listing go when it returns.
		 */
		if (!b->ls_stop && !b->ls_clocked && b->ls_expected > 0) {
			int64_t until = b->ls_first_ms + (int64_t)b->o.hold_max_ms;

			if (ibvf_mono_ms() < until) {
				struct timespec ts = {(time_t)(until / 1000),
						      (long)(until % 1000) * 1000000};

				/* ls_cond uses CLOCK_MONOTONIC (ibvf_sm_batch_new) */
				pthread_cond_timedwait(&b->ls_cond, &b->ls_lock, &ts);
				continue;
			}
		}
		w = b->lw;
		n = b->n_lw;
		b->lw = NULL;
		b->n_lw = b->cap_lw = 0;
		seq = ++b->ls_seq;
		pthread_mutex_unlock(&b->ls_lock);
		s = list_all(b, seq);
		if (s)
			s->refs = (int)n + 1;
		for (size_t i = 0; i < n; i++)
			w[i].done(w[i].arg, s);
		ibvf_sm_batch_members_put(b, s);
		free(w);
		pthread_mutex_lock(&b->ls_lock);
		b->ls_clocked = b->n_lw > 0;
	}
	pthread_mutex_unlock(&b->ls_lock);
	return NULL;
}

/* Queue one waiter for the next listing (ls_lock held); @announced: it had announced itself. */
static int ls_ask(struct ibvf_sm_batch *b, ibvf_sm_members_fn done, void *arg, bool announced)
{
	if (announced && b->ls_expected > 0)
		b->ls_expected--;
	if (b->n_lw == b->cap_lw) {
		size_t cap = b->cap_lw ? b->cap_lw * 2 : 16;
		struct ls_waiter *v = realloc(b->lw, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->lw = v;
		b->cap_lw = cap;
	}
	if (!b->n_lw)
		b->ls_first_ms = ibvf_mono_ms();
	b->lw[b->n_lw++] = (struct ls_waiter){done, arg};
	pthread_cond_signal(&b->ls_cond);
	return 0;
}

int ibvf_sm_batch_members_async(struct ibvf_sm_batch *b, ibvf_sm_members_fn done, void *arg)
{
	int ret;

	pthread_mutex_lock(&b->ls_lock);
	ret = ls_ask(b, done, arg, false);
	pthread_mutex_unlock(&b->ls_lock);
	return ret;
}

int ibvf_sm_batch_members_async_announced(struct ibvf_sm_batch *b, ibvf_sm_members_fn done,
					  void *arg)
{
	int ret;

	pthread_mutex_lock(&b->ls_lock);
	ret = ls_ask(b, done, arg, true);
	pthread_mutex_unlock(&b->ls_lock);
	return ret;
}

void ibvf_sm_batch_expect_listing(struct ibvf_sm_batch *b, int delta)
{
	pthread_mutex_lock(&b->ls_lock);
	b->ls_expected += delta;
	if (b->ls_expected < 0)
		b->ls_expected = 0;
	if (b->ls_expected == 0)
		pthread_cond_signal(&b->ls_cond);
	pthread_mutex_unlock(&b->ls_lock);
}

struct ls_sync {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	struct ibvf_sm_members *m;
};

static void ls_sync_done(void *arg, struct ibvf_sm_members *m)
{
	struct ls_sync *w = arg;

	pthread_mutex_lock(&w->lock);
	w->m = m;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int ibvf_sm_batch_members(struct ibvf_sm_batch *b, struct ibvf_sm_members **out)
{
	struct ls_sync w = {.done = false};
	int ret;

	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	ret = ibvf_sm_batch_members_async(b, ls_sync_done, &w);
	pthread_mutex_lock(&w.lock);
	while (!ret && !w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	if (!ret && !w.m)
		ret = -ENOMEM;
	*out = w.m;
	return ret;
}

void ibvf_sm_batch_members_put(struct ibvf_sm_batch *b, struct ibvf_sm_members *m)
{
	bool last;

	if (!m)
		return;
	pthread_mutex_lock(&b->ls_lock);
	last = --m->refs == 0;
	pthread_mutex_unlock(&b->ls_lock);
	if (last) {
		free(m->m);
		free(m);
	}
}

const struct ibvf_sm_ops *ibvf_sm_batch_lock(struct ibvf_sm_batch *b,
					     struct ibvf_sm_backend **backend)
{
	pthread_mutex_lock(&b->be_lock);
	*backend = b->o.backend;
	return b->o.ops;
}

void ibvf_sm_batch_unlock(struct ibvf_sm_batch *b)
{
	pthread_mutex_unlock(&b->be_lock);
}

void ibvf_sm_batch_expect(struct ibvf_sm_batch *b, int delta)
{
	pthread_mutex_lock(&b->lock);
	b->expected += delta;
	if (b->expected < 0)
		b->expected = 0;
	if (b->expected == 0)
		pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

void ibvf_sm_batch_flush_now(struct ibvf_sm_batch *b)
{
	pthread_mutex_lock(&b->lock);
	b->flush_now = true;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

void ibvf_sm_batch_set_window(struct ibvf_sm_batch *b, uint32_t window_ms, uint32_t batch_max)
{
	pthread_mutex_lock(&b->lock);
	b->o.window_ms = window_ms;
	b->o.batch_max = batch_max ? batch_max : b->o.batch_max;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

void ibvf_sm_batch_get_stats(struct ibvf_sm_batch *b, struct ibvf_sm_batch_stats *st)
{
	pthread_mutex_lock(&b->lock);
	*st = b->st;
	pthread_mutex_unlock(&b->lock);
}

void ibvf_sm_batch_free(struct ibvf_sm_batch *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	b->stop = true;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	free(b->q);
	pthread_mutex_lock(&b->ls_lock);
	b->ls_stop = true;
	pthread_cond_broadcast(&b->ls_cond);
	pthread_mutex_unlock(&b->ls_lock);
	pthread_join(b->ls_thread, NULL); /* it answers every waiter first */
	free(b->lw);
	pthread_mutex_destroy(&b->ls_lock);
	pthread_cond_destroy(&b->ls_cond);
	pthread_mutex_destroy(&b->lock);
	pthread_mutex_destroy(&b->be_lock);
	pthread_cond_destroy(&b->cond);
	free(b);
}
