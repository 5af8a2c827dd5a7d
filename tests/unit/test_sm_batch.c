// SPDX-License-Identifier: MIT
/* Unit tests of the SM batcher (daemon/engine/sm_batch.c) over the fake SM backend. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "err.h"
#include "evloop.h"
#include "fake_sm.h"
#include "sm_batch.h"

struct done_rec {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int n, expect;
	int status[1024];
	int64_t t[1024];
	char msg[16][IBVF_ERR_LEN + 96]; /* reasons of requests 0..15 */
};

static struct done_rec rec;

static void rec_reset(int expect)
{
	memset(&rec.status, 0, sizeof(rec.status));
	memset(&rec.msg, 0, sizeof(rec.msg));
	rec.n = 0;
	rec.expect = expect;
}

static void on_done(void *arg, int status, const char *msg)
{
	int i = (int)(intptr_t)arg;

	pthread_mutex_lock(&rec.lock);
	rec.status[i] = status;
	if (i < 16)
		snprintf(rec.msg[i], sizeof(rec.msg[i]), "%s", msg);
	rec.t[i] = ibvf_mono_ms();
	rec.n++;
	pthread_cond_broadcast(&rec.cond);
	pthread_mutex_unlock(&rec.lock);
}

static void wait_done(int n)
{
	pthread_mutex_lock(&rec.lock);
	while (rec.n < n)
		pthread_cond_wait(&rec.cond, &rec.lock);
	pthread_mutex_unlock(&rec.lock);
}

struct fx {
	struct ibvf_sm_backend *be;
	struct fake_sm_ctl *ctl;
	struct ibvf_sm_batch *b;
};

static struct fx *fx_new(uint32_t window, uint32_t bmax, uint32_t attempts)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct ibvf_sm_batch_opts o = {
		.ops = &fake_sm_ops,
		.window_ms = window,
		.batch_max = bmax,
		.retry_base_ms = 10,
		.retry_max_ms = 40,
		.max_attempts = attempts,
		.seed = 42,
	};
	char err[256];

	f->be = fake_sm_new();
	f->ctl = fake_sm_ctl(f->be);
	o.backend = f->be;
	assert_int_equal(ibvf_sm_batch_new(&o, &f->b, err, sizeof(err)), 0);
	return f;
}

static void fx_free(struct fx *f)
{
	ibvf_sm_batch_free(f->b);
	fake_sm_ops.fini(f->be);
	free(f);
}

static void submit(struct fx *f, enum ibvf_sm_req_kind k, uint16_t pkey, uint64_t guid, int i,
		   int64_t deadline)
{
	struct ibvf_sm_member m = {.guid = guid, .membership = IBVF_MEMBER_FULL};

	assert_int_equal(ibvf_sm_batch_submit(f->b, k, pkey, &m, NULL, deadline, on_done,
					      (void *)(intptr_t)i),
			 0);
}

/* add_members_owned() of a fake SM that records the owners it got. */
static char owned_seen[4][IBVF_SM_OWNER_MAX + 2];
static int owned_calls;

static int owned_add(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m,
		     const char *const *owners, size_t n, const struct ibvf_sm_pkey_flags *f,
		     char *err, size_t errlen)
{
	owned_calls++;
	for (size_t i = 0; i < n && i < 4; i++)
		snprintf(owned_seen[i], sizeof(owned_seen[i]), "%s",
			 owners && owners[i] ? owners[i] : "(null)");
	return fake_sm_ops.add_members(b, pkey, m, n, f, err, errlen);
}

/*
 * The owner of an add reaches a backend with the optional add_members_owned()
 * (SM ABI 2), cleaned (printable ASCII, at most IBVF_SM_OWNER_MAX bytes); a
 * module whose struct_size ends before the entry gets add_members() even if
 * the bytes past its table happen to be non-NULL; removes carry no owner.
 */
static void test_owner_to_backend(void **state)
{
	struct ibvf_sm_ops with = fake_sm_ops, older = fake_sm_ops;
	struct ibvf_sm_member m = {.guid = 0x5001, .membership = IBVF_MEMBER_FULL};
	struct ibvf_sm_batch_opts o = {.window_ms = 0, .batch_max = 64, .max_attempts = 1};
	struct ibvf_sm_backend *be = fake_sm_new();
	struct ibvf_sm_batch *b;
	char err[256], longer[400];

	(void)state;
	with.add_members_owned = owned_add;
	older.add_members_owned = owned_add;
	older.struct_size = IBVF_SM_OPS_V2_BASE_SIZE;
	memset(longer, 'p', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = 0;
	o.ops = &with;
	o.backend = be;
	assert_int_equal(ibvf_sm_batch_new(&o, &b, err, sizeof(err)), 0);
	rec_reset(2);
	owned_calls = 0;
	assert_int_equal(ibvf_sm_batch_submit_owned(b, IBVF_SM_REQ_ADD, 0x12, &m,
						    "ns/pod-a net1 (ib\"net\n\xff)", NULL, 0,
						    on_done, (void *)(intptr_t)0),
			 0);
	wait_done(1);
	assert_int_equal(rec.status[0], 0);
	assert_int_equal(owned_calls, 1);
	assert_string_equal(owned_seen[0], "ns/pod-a net1 (ib\"net?\?)");
	m.guid = 0x5002;
	assert_int_equal(ibvf_sm_batch_submit_owned(b, IBVF_SM_REQ_ADD, 0x12, &m, longer, NULL, 0,
						    on_done, (void *)(intptr_t)1),
			 0);
	wait_done(2);
	assert_int_equal(strlen(owned_seen[0]), IBVF_SM_OWNER_MAX);
	/* the old entry point: no owner */
	m.guid = 0x5003;
	rec_reset(1);
	assert_int_equal(ibvf_sm_batch_submit(b, IBVF_SM_REQ_ADD, 0x12, &m, NULL, 0, on_done,
					      (void *)(intptr_t)0),
			 0);
	wait_done(1);
	assert_string_equal(owned_seen[0], "");
	ibvf_sm_batch_free(b);
	/* a module built before the entry (smaller struct_size): add_members() */
	o.ops = &older;
	assert_int_equal(ibvf_sm_batch_new(&o, &b, err, sizeof(err)), 0);
	owned_calls = 0;
	m.guid = 0x5004;
	rec_reset(1);
	assert_int_equal(ibvf_sm_batch_submit_owned(b, IBVF_SM_REQ_ADD, 0x12, &m, "ns/pod-b net1",
						    NULL, 0, on_done, (void *)(intptr_t)0),
			 0);
	wait_done(1);
	assert_int_equal(rec.status[0], 0);
	assert_int_equal(owned_calls, 0);
	ibvf_sm_batch_free(b);
	fake_sm_ops.fini(be);
}

/* 200 adds to one PKey inside one window: one add_members call with all of them. */
static void test_coalesce_one_pkey(void **state)
{
	struct fx *f = fx_new(50, 1024, 3);
	struct ibvf_sm_batch_stats st;

	(void)state;
	rec_reset(200);
	for (int i = 0; i < 200; i++)
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0x1000 + (uint64_t)i, i, 0);
	wait_done(200);
	for (int i = 0; i < 200; i++)
		assert_int_equal(rec.status[i], 0);
	assert_int_equal(f->ctl->add_calls, 1);
	assert_int_equal(f->ctl->max_batch, 200);
	assert_int_equal(fake_sm_count(f->be), 200);
	ibvf_sm_batch_get_stats(f->b, &st);
	assert_int_equal(st.flushes, 1);
	assert_int_equal(st.requests, 200);
	assert_false(f->ctl->concurrent_call_seen);
	fx_free(f);
}

/* Three PKeys, adds and removes: one call per (kind, PKey). */
static void test_coalesce_per_pkey(void **state)
{
	struct fx *f = fx_new(50, 1024, 3);

	(void)state;
	fake_sm_put(f->be, 0x30, 0x9000, true);
	fake_sm_put(f->be, 0x30, 0x9001, true);
	rec_reset(32);
	for (int i = 0; i < 30; i++)
		submit(f, IBVF_SM_REQ_ADD, (uint16_t)(0x10 + i % 3), 0x2000 + (uint64_t)i, i, 0);
	submit(f, IBVF_SM_REQ_REMOVE, 0x30, 0x9000, 30, 0);
	submit(f, IBVF_SM_REQ_REMOVE, 0x30, 0x9001, 31, 0);
	wait_done(32);
	assert_int_equal(f->ctl->add_calls, 3);
	assert_int_equal(f->ctl->remove_calls, 1);
	assert_int_equal(fake_sm_has(f->be, 0x30, 0x9000), -1);
	assert_int_equal(fake_sm_has(f->be, 0x11, 0x2001), IBVF_MEMBER_FULL);
	fx_free(f);
}

/*
 * Full and limited adds of one PKey go in separate calls (UFM's add takes one
 * membership for all its GUIDs: issue 16, item 1), and so do adds with
 * different flags; no flags given reach the backend as NULL (its defaults).
 */
static void test_one_call_per_membership(void **state)
{
	struct fx *f = fx_new(50, 1024, 3);
	const struct ibvf_sm_pkey_flags i0 = {.index0 = true, .ipoib = true};

	(void)state;
	rec_reset(12);
	for (int i = 0; i < 10; i++) {
		struct ibvf_sm_member m = {.guid = 0x3000 + (uint64_t)i,
					   .membership =
						   i % 2 ? IBVF_MEMBER_LIMITED : IBVF_MEMBER_FULL};

		assert_int_equal(ibvf_sm_batch_submit(f->b, IBVF_SM_REQ_ADD, 0x12, &m, NULL, 0,
						      on_done, (void *)(intptr_t)i),
				 0);
	}
	for (int i = 10; i < 12; i++) {
		struct ibvf_sm_member m = {.guid = 0x3000 + (uint64_t)i,
					   .membership = IBVF_MEMBER_FULL};

		assert_int_equal(ibvf_sm_batch_submit(f->b, IBVF_SM_REQ_ADD, 0x12, &m, &i0, 0,
						      on_done, (void *)(intptr_t)i),
				 0);
	}
	wait_done(12);
	/* full (no flags), limited (no flags), full (index0 flags) */
	assert_int_equal(f->ctl->add_calls, 3);
	assert_int_equal(f->ctl->max_batch, 5);
	assert_int_equal(fake_sm_has(f->be, 0x12, 0x3001), IBVF_MEMBER_LIMITED);
	assert_int_equal(fake_sm_has(f->be, 0x12, 0x3000), IBVF_MEMBER_FULL);
	fx_free(f);
}

/* batch_max flushes before the window closes, and caps each call. */
static void test_flush_on_size(void **state)
{
	struct fx *f = fx_new(10000, 8, 3);
	int64_t t0 = ibvf_mono_ms();

	(void)state;
	rec_reset(16);
	for (int i = 0; i < 16; i++)
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0x3000 + (uint64_t)i, i, 0);
	wait_done(16);
	assert_true(ibvf_mono_ms() - t0 < 5000); /* did not wait for the 10 s window */
	assert_true(f->ctl->max_batch <= 8);
	assert_int_equal(f->ctl->add_calls, 2);
	fx_free(f);
}

/* The window: a lone request waits about window_ms, not more, not much less. */
static void test_flush_on_window(void **state)
{
	struct fx *f = fx_new(100, 1024, 3);
	int64_t t0 = ibvf_mono_ms(), dt;

	(void)state;
	rec_reset(1);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0x4000, 0, 0);
	wait_done(1);
	dt = rec.t[0] - t0;
	assert_true(dt >= 90);
	assert_true(dt < 2000);
	fx_free(f);
}

/* Transient failures are retried (with backoff) until they succeed. */
static void test_retry_then_success(void **state)
{
	struct fx *f = fx_new(5, 1024, 5);
	struct ibvf_sm_batch_stats st;

	(void)state;
	f->ctl->fail_add = 2;
	rec_reset(4);
	for (int i = 0; i < 4; i++)
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0x5000 + (uint64_t)i, i, 0);
	wait_done(4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rec.status[i], 0);
	assert_int_equal(f->ctl->add_calls, 3);
	ibvf_sm_batch_get_stats(f->b, &st);
	assert_int_equal(st.retries, 2);
	assert_int_equal(fake_sm_count(f->be), 4);
	fx_free(f);
}

/* Bounded: after max_attempts the waiters get the last error. */
static void test_retry_bounded(void **state)
{
	struct fx *f = fx_new(5, 1024, 3);

	(void)state;
	f->ctl->fail_add = 100;
	rec_reset(2);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0x6000, 0, 0);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0x6001, 1, 0);
	wait_done(2);
	assert_int_equal(rec.status[0], -ECONNREFUSED);
	assert_int_equal(rec.status[1], -ECONNREFUSED);
	assert_int_equal(f->ctl->add_calls, 3);
	fx_free(f);
}

/* The deadline wins over retries: -ETIMEDOUT, no more calls after it. */
static void test_deadline(void **state)
{
	struct fx *f = fx_new(5, 1024, 1000);
	int64_t t0 = ibvf_mono_ms();

	(void)state;
	f->ctl->fail_add = 1000000;
	rec_reset(1);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0x7000, 0, t0 + 300);
	wait_done(1);
	assert_int_equal(rec.status[0], -ETIMEDOUT);
	assert_true(rec.t[0] - t0 >= 290);
	assert_true(rec.t[0] - t0 < 3000);
	fx_free(f);
}

/* One bad GUID (non-retryable -EINVAL) fails alone; its batch neighbours succeed. */
static void test_split_on_bad_guid(void **state)
{
	struct fx *f = fx_new(20, 1024, 3);

	(void)state;
	f->ctl->bad_guid = 0x8003;
	rec_reset(8);
	for (int i = 0; i < 8; i++)
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0x8000 + (uint64_t)i, i, 0);
	wait_done(8);
	for (int i = 0; i < 8; i++)
		assert_int_equal(rec.status[i], i == 3 ? -EINVAL : 0);
	assert_int_equal(fake_sm_count(f->be), 7);
	/* 1 + 2 halves + 2 quarters + 2 eighths = 7 calls, not 8 x retries */
	assert_true(f->ctl->add_calls <= 7);
	fx_free(f);
}

/* Add then remove of the same (PKey, GUID) before the flush: the last word wins. */
static void test_last_request_wins(void **state)
{
	struct fx *f = fx_new(100, 1024, 3);

	(void)state;
	rec_reset(2);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0x9100, 0, 0);
	submit(f, IBVF_SM_REQ_REMOVE, 0x12, 0x9100, 1, 0);
	wait_done(2);
	assert_int_equal(rec.status[0], -ECANCELED);
	assert_int_equal(rec.status[1], 0);
	assert_int_equal(fake_sm_has(f->be, 0x12, 0x9100), -1);
	assert_int_equal(f->ctl->add_calls, 0);
	fx_free(f);
}

/* Synchronous call from many threads: still one batch, no overlapping backend calls. */
struct th_arg {
	struct fx *f;
	int i;
	int ret;
};

static void *th_call(void *p)
{
	struct th_arg *a = p;
	struct ibvf_sm_member m = {.guid = 0xa000 + (uint64_t)a->i};
	char msg[256];

	a->ret = ibvf_sm_batch_call(a->f->b, IBVF_SM_REQ_ADD, 0x22, &m, 0, msg, sizeof(msg));
	return NULL;
}

static void test_concurrent_callers(void **state)
{
	struct fx *f = fx_new(500, 1024, 3); /* generous: thread start-up is slow under ASan */
	pthread_t th[32];
	struct th_arg a[32];

	(void)state;
	f->ctl->latency_ms = 20;
	for (int i = 0; i < 32; i++) {
		a[i] = (struct th_arg){f, i, -1};
		pthread_create(&th[i], NULL, th_call, &a[i]);
	}
	for (int i = 0; i < 32; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].ret, 0);
	}
	assert_true(f->ctl->add_calls <= 2);
	assert_false(f->ctl->concurrent_call_seen);
	fx_free(f);
}

struct ls_arg {
	struct fx *f;
	int ret;
	size_t n;
	uint64_t seq;
};

static void *th_members(void *p)
{
	struct ls_arg *a = p;
	struct ibvf_sm_members *m;

	a->ret = ibvf_sm_batch_members(a->f->b, &m);
	if (!a->ret) {
		a->ret = m->status;
		a->n = m->n;
		a->seq = m->seq;
		ibvf_sm_batch_members_put(a->f->b, m);
	}
	return NULL;
}

/*
 * Read-backs of concurrent prepares/releases share listings (issue 14: one
 * list_members per prepare must not serialize a burst), and a listing always
 * starts after the request: a member added before the call is in it.
 */
static void test_shared_listing(void **state)
{
	struct fx *f = fx_new(5, 1024, 3);
	pthread_t th[32];
	struct ls_arg a[32];
	struct ibvf_sm_members *m;

	(void)state;
	f->ctl->latency_ms = 50;
	fake_sm_put(f->be, 0x12, 0x1001, true);
	fake_sm_put(f->be, 0x12, 0x1000, true);
	for (int i = 0; i < 32; i++) {
		a[i] = (struct ls_arg){f, -1, 0, 0};
		pthread_create(&th[i], NULL, th_members, &a[i]);
	}
	for (int i = 0; i < 32; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].ret, 0);
		assert_int_equal(a[i].n, 2);
	}
	assert_true(f->ctl->list_calls <= 3);
	/* sorted by GUID; a change made before the call is seen */
	fake_sm_put(f->be, 0x34, 0x0fff, false);
	assert_int_equal(ibvf_sm_batch_members(f->b, &m), 0);
	assert_int_equal(m->n, 3);
	assert_int_equal(m->m[0].guid, 0x0fff);
	assert_false(m->m[0].managed);
	assert_int_equal(m->m[2].guid, 0x1001);
	ibvf_sm_batch_members_put(f->b, m);
	/* a failed listing is reported to its sharers */
	f->ctl->fail_list = 1;
	assert_int_equal(ibvf_sm_batch_members(f->b, &m), 0);
	assert_int_equal(m->status, f->ctl->fail_errno);
	assert_non_null(strstr(m->err, "injected"));
	ibvf_sm_batch_members_put(f->b, m);
	assert_false(f->ctl->concurrent_call_seen);
	fx_free(f);
}

struct ls_rec {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int n;
	uint64_t seq[16];
};

static struct ls_rec lsr = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}};

static void on_listed(void *arg, struct ibvf_sm_members *m)
{
	struct fx *f = arg;

	pthread_mutex_lock(&lsr.lock);
	lsr.seq[lsr.n++ % 16] = m ? m->seq : 0;
	pthread_cond_broadcast(&lsr.cond);
	pthread_mutex_unlock(&lsr.lock);
	ibvf_sm_batch_members_put(f->b, m);
}

static void wait_listed(int n)
{
	pthread_mutex_lock(&lsr.lock);
	while (lsr.n < n)
		pthread_cond_wait(&lsr.cond, &lsr.lock);
	pthread_mutex_unlock(&lsr.lock);
}

/*
 * Announced read-backs (ibvf_sm_batch_expect_listing: each cold prepare at its
 * start) hold an idle lister until the last of them asked, so a burst whose
 * allocations finish at different times costs one listing, not one for the
 * first asker and another for the rest (issue 17, 256 cold prepares against a
 * UFM at 200 ms). An unannounced asker with nobody announced lists at once,
 * and an announced asker that never comes holds the others only hold_max_ms.
 */
static void test_announced_listings_shared(void **state)
{
	struct fx *f = fx_new(0, 1024, 3);
	struct timespec ts = {0, 30 * 1000000};
	struct ibvf_sm_members *m;

	(void)state;
	f->ctl->latency_ms = 50;
	lsr.n = 0;
	ibvf_sm_batch_expect_listing(f->b, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(ibvf_sm_batch_members_async_announced(f->b, on_listed, f), 0);
		nanosleep(&ts, NULL); /* 30 ms apart: the lister would have started alone */
	}
	wait_listed(4);
	assert_int_equal(f->ctl->list_calls, 1);
	for (int i = 1; i < 4; i++)
		assert_int_equal(lsr.seq[i], lsr.seq[0]);
	/* a lone asker, nobody announced: its own listing */
	assert_int_equal(ibvf_sm_batch_members(f->b, &m), 0);
	assert_int_equal(m->status, 0);
	ibvf_sm_batch_members_put(f->b, m);
	assert_int_equal(f->ctl->list_calls, 2);
	/* announced and dropped (a warm prepare, a failed one): nobody is held for it */
	ibvf_sm_batch_expect_listing(f->b, 2);
	ibvf_sm_batch_expect_listing(f->b, -1);
	lsr.n = 0;
	assert_int_equal(ibvf_sm_batch_members_async_announced(f->b, on_listed, f), 0);
	wait_listed(1);
	assert_int_equal(f->ctl->list_calls, 3);
	fx_free(f);
	/* one announced asker never comes: the others list after hold_max_ms, once */
	{
		struct ibvf_sm_batch_opts o = {.ops = &fake_sm_ops, .hold_max_ms = 100, .seed = 1};
		char err[256];

		f = calloc(1, sizeof(*f));
		f->be = fake_sm_new();
		f->ctl = fake_sm_ctl(f->be);
		o.backend = f->be;
		assert_int_equal(ibvf_sm_batch_new(&o, &f->b, err, sizeof(err)), 0);
		lsr.n = 0;
		ibvf_sm_batch_expect_listing(f->b, 3);
		assert_int_equal(ibvf_sm_batch_members_async_announced(f->b, on_listed, f), 0);
		assert_int_equal(ibvf_sm_batch_members_async_announced(f->b, on_listed, f), 0);
		wait_listed(2);
		assert_int_equal(f->ctl->list_calls, 1);
		assert_int_equal(lsr.seq[1], lsr.seq[0]);
		fx_free(f);
	}
}

/* Shutdown sends what is queued (one attempt) and completes every waiter. */
static void test_shutdown_flushes(void **state)
{
	struct fx *f = fx_new(60000, 1024, 3);

	(void)state;
	rec_reset(3);
	for (int i = 0; i < 3; i++)
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0xb000 + (uint64_t)i, i, 0);
	ibvf_sm_batch_free(f->b);
	f->b = NULL;
	assert_int_equal(rec.n, 3);
	assert_int_equal(fake_sm_count(f->be), 3);
	fake_sm_ops.fini(f->be);
	free(f);
}

/* Announced requests hold a closed window open: a spread-out burst shares one call. */
static void test_expected_requests_hold(void **state)
{
	struct fx *f = fx_new(10, 1024, 3);
	struct timespec ts = {0, 30 * 1000000};

	(void)state;
	rec_reset(6);
	ibvf_sm_batch_expect(f->b, 6);
	for (int i = 0; i < 6; i++) {
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0xc000 + (uint64_t)i, i, 0);
		ibvf_sm_batch_expect(f->b, -1);
		nanosleep(&ts, NULL); /* 30 ms apart, window 10 ms */
	}
	wait_done(6);
	assert_int_equal(f->ctl->add_calls, 1);
	/* without announcements the same spread costs one call per window */
	unsigned before = f->ctl->add_calls;

	rec_reset(4);
	for (int i = 0; i < 4; i++) {
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0xd000 + (uint64_t)i, i, 0);
		nanosleep(&ts, NULL);
	}
	wait_done(4);
	assert_true(f->ctl->add_calls - before >= 2); /* not held into one call */
	fx_free(f);
}

/* Self-clocking, no window (the default): a lone request does not wait for a timer. */
static void test_lone_request_at_once(void **state)
{
	struct fx *f = fx_new(0, 1024, 3);
	int64_t t0 = ibvf_mono_ms(), at_once, windowed;

	(void)state;
	rec_reset(1);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0xf000, 0, 0);
	wait_done(1);
	at_once = rec.t[0] - t0;
	assert_int_equal(f->ctl->add_calls, 1);
	fx_free(f);
	/*
	 * The same request with a 400 ms minimum window (batch_window_ms) waits it
	 * out; without one it goes at once. Compared with a wide margin, not a
	 * latency figure: a loaded machine (sanitizers, parallel tests) must not
	 * fail it, a timer wait must.
	 */
	f = fx_new(400, 1024, 3);
	t0 = ibvf_mono_ms();
	rec_reset(1);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0xf001, 0, 0);
	wait_done(1);
	windowed = rec.t[0] - t0;
	fx_free(f);
	assert_true(windowed >= 400);
	assert_true(at_once < 200);
}

/*
 * Requests that arrive while a call is in flight form the next batch and go
 * when it returns, even with an announced attach still on its way (issue 17:
 * only an idle SM waits for announced requests, a clocked batch does not).
 */
static void test_clocked_batch_goes_on_return(void **state)
{
	struct fx *f = fx_new(0, 1024, 3);
	struct timespec ts = {0, 20 * 1000000};
	int64_t t0;

	(void)state;
	f->ctl->latency_ms = 100;
	rec_reset(51);
	t0 = ibvf_mono_ms();
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0xf100, 0, 0);
	nanosleep(&ts, NULL);	       /* the first call is in flight now */
	ibvf_sm_batch_expect(f->b, 1); /* a slow attach, still in its VF step */
	for (int i = 1; i <= 50; i++)
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0xf100 + (uint64_t)i, i, 0);
	wait_done(51);
	for (int i = 0; i <= 50; i++)
		assert_int_equal(rec.status[i], 0);
	assert_int_equal(f->ctl->add_calls, 2);
	assert_int_equal(f->ctl->max_batch, 50);
	/* two round trips (~200 ms), not the 1 s hold_max after the first call */
	if (rec.t[50] - t0 >= 800)
		fail_msg("the clocked batch waited %lld ms", (long long)(rec.t[50] - t0));
	ibvf_sm_batch_expect(f->b, -1);
	assert_false(f->ctl->concurrent_call_seen);
	fx_free(f);
}

/* Bursts still share calls without a window: 1,024 announced -> 1 call; unannounced -> 2. */
static void test_burst_calls_without_window(void **state)
{
	struct fx *f = fx_new(0, 1024, 3);

	(void)state;
	f->ctl->latency_ms = 50;
	rec_reset(1024);
	ibvf_sm_batch_expect(f->b, 1024);
	for (int i = 0; i < 1024; i++) {
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0x10000 + (uint64_t)i, i, 0);
		ibvf_sm_batch_expect(f->b, -1);
	}
	wait_done(1024);
	assert_int_equal(f->ctl->add_calls, 1);
	assert_int_equal(f->ctl->max_batch, 1024);
	/* not announced: the first goes alone, the rest queue behind its call */
	rec_reset(256);
	for (int i = 0; i < 256; i++)
		submit(f, IBVF_SM_REQ_ADD, 0x13, 0x20000 + (uint64_t)i, i, 0);
	wait_done(256);
	assert_true(f->ctl->add_calls - 1 <= 2);
	assert_int_equal(fake_sm_count(f->be), 1024 + 256);
	assert_false(f->ctl->concurrent_call_seen);
	fx_free(f);
}

/* The errnos of the SM ABI's error contract (include/ibvf/sm_backend.h). */
static const int transient_errnos[] = {
	-EAGAIN,   -EBUSY,	  -EINTR,	-ETIMEDOUT, -ECONNREFUSED, -ECONNRESET,
	-ENOTCONN, -EHOSTUNREACH, -ENETUNREACH, -ENETDOWN,  -EREMOTEIO,	   -ESRCH,
};
static const int permanent_errnos[] = {
	-EKEYREJECTED, -ENOENT, -EPROTO, -EINVAL, -EACCES, -EPERM,
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void assert_has(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("expected \"%s\" in \"%s\"", needle, hay);
}

/* One request, every attempt failing with @e: the status, calls and retries it costs. */
static void fail_one(int e, unsigned *calls, uint64_t *retries)
{
	struct fx *f = fx_new(5, 1024, 4);
	struct ibvf_sm_batch_stats st;

	f->ctl->fail_add = 1000;
	f->ctl->fail_errno = e;
	rec_reset(1);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0xe000, 0, 0);
	wait_done(1);
	assert_int_equal(rec.status[0], e);
	assert_has(rec.msg[0], "fake SM: injected add failure");
	assert_has(rec.msg[0], "SM fake add to PKey 0x0012 (1 GUIDs, attempt ");
	*calls = f->ctl->add_calls;
	ibvf_sm_batch_get_stats(f->b, &st);
	*retries = st.retries;
	fx_free(f);
}

/* A permanent errno fails its request at once: one call, no retry, the backend's reason. */
static void test_permanent_errors_fail_at_once(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_OF(permanent_errnos); i++) {
		unsigned calls;
		uint64_t retries;

		fail_one(permanent_errnos[i], &calls, &retries);
		if (calls != 1 || retries != 0)
			fail_msg("errno %d: %u calls, %llu retries; want 1 call, no retry",
				 permanent_errnos[i], calls, (unsigned long long)retries);
		assert_has(rec.msg[0], "attempt 1): fake SM: injected add failure");
	}
}

/* Every errno of the allow-list is retried, up to the attempt bound. */
static void test_transient_errors_retried(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_OF(transient_errnos); i++) {
		unsigned calls;
		uint64_t retries;

		fail_one(transient_errnos[i], &calls, &retries);
		if (calls != 4 || retries != 3)
			fail_msg("errno %d: %u calls, %llu retries; want 4 calls, 3 retries",
				 transient_errnos[i], calls, (unsigned long long)retries);
		assert_has(rec.msg[0], "attempt 4): fake SM: injected add failure");
	}
}

/* A transient errno that clears: the request succeeds on the third call. */
static void test_transient_error_then_success(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_OF(transient_errnos); i++) {
		struct fx *f = fx_new(5, 1024, 8);

		f->ctl->fail_add = 2;
		f->ctl->fail_errno = transient_errnos[i];
		rec_reset(1);
		submit(f, IBVF_SM_REQ_ADD, 0x12, 0xe100, 0, 0);
		wait_done(1);
		assert_int_equal(rec.status[0], 0);
		assert_int_equal(f->ctl->add_calls, 3);
		assert_int_equal(fake_sm_has(f->be, 0x12, 0xe100), IBVF_MEMBER_FULL);
		fx_free(f);
	}
}

/*
 * A batch of four refused with a permanent errno that no member causes
 * (TLS, 404, 4xx, auth) costs one call for all four; a member fault
 * (-EINVAL) is split down to single requests (1 + 2 + 4 calls), never retried.
 */
static void test_permanent_error_batch(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_OF(permanent_errnos); i++) {
		int e = permanent_errnos[i];
		struct fx *f = fx_new(20, 1024, 8);
		struct ibvf_sm_batch_stats st;

		f->ctl->fail_add = 1000;
		f->ctl->fail_errno = e;
		rec_reset(4);
		for (int k = 0; k < 4; k++)
			submit(f, IBVF_SM_REQ_ADD, 0x12, 0xe200 + (uint64_t)k, k, 0);
		wait_done(4);
		for (int k = 0; k < 4; k++) {
			assert_int_equal(rec.status[k], e);
			assert_has(rec.msg[k], "fake SM: injected add failure");
		}
		ibvf_sm_batch_get_stats(f->b, &st);
		assert_int_equal(st.retries, 0);
		if (f->ctl->add_calls != (ibvf_sm_err_is_member_fault(e) ? 7u : 1u))
			fail_msg("errno %d: %u calls for a batch of 4", e, f->ctl->add_calls);
		fx_free(f);
	}
}

/* The permanent errno wins over a passed deadline: the waiter learns the real reason. */
static void test_permanent_error_after_deadline(void **state)
{
	struct fx *f = fx_new(5, 1024, 8);

	(void)state;
	f->ctl->fail_add = 1;
	f->ctl->fail_errno = -EKEYREJECTED;
	f->ctl->latency_ms = 50;
	rec_reset(1);
	submit(f, IBVF_SM_REQ_ADD, 0x12, 0xe300, 0, ibvf_mono_ms() + 20);
	wait_done(1);
	assert_int_equal(rec.status[0], -EKEYREJECTED);
	fx_free(f);
}

static void test_transient_predicate(void **state)
{
	static const int other[] = {0,	    1,	       -EIO,	-ENOMEM, -EBADMSG,   -EEXIST,
				    -E2BIG, -EMSGSIZE, -ENODEV, -ENOSPC, -EOPNOTSUPP};

	(void)state;
	for (size_t i = 0; i < N_OF(transient_errnos); i++) {
		assert_true(ibvf_sm_err_is_transient(transient_errnos[i]));
		assert_false(ibvf_sm_err_is_transient(-transient_errnos[i]));
		assert_false(ibvf_sm_err_is_member_fault(transient_errnos[i]));
	}
	for (size_t i = 0; i < N_OF(permanent_errnos); i++)
		assert_false(ibvf_sm_err_is_transient(permanent_errnos[i]));
	for (size_t i = 0; i < N_OF(other); i++)
		assert_false(ibvf_sm_err_is_transient(other[i]));
	assert_true(ibvf_sm_err_is_member_fault(-EINVAL));
	assert_true(ibvf_sm_err_is_member_fault(-EEXIST));
	assert_true(ibvf_sm_err_is_member_fault(-E2BIG));
	assert_false(ibvf_sm_err_is_member_fault(-ENOENT));
	assert_false(ibvf_sm_err_is_member_fault(-EKEYREJECTED));
	assert_false(ibvf_sm_err_is_member_fault(0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coalesce_one_pkey),
		cmocka_unit_test(test_owner_to_backend),
		cmocka_unit_test(test_coalesce_per_pkey),
		cmocka_unit_test(test_one_call_per_membership),
		cmocka_unit_test(test_flush_on_size),
		cmocka_unit_test(test_flush_on_window),
		cmocka_unit_test(test_retry_then_success),
		cmocka_unit_test(test_retry_bounded),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_split_on_bad_guid),
		cmocka_unit_test(test_last_request_wins),
		cmocka_unit_test(test_concurrent_callers),
		cmocka_unit_test(test_shutdown_flushes),
		cmocka_unit_test(test_expected_requests_hold),
		cmocka_unit_test(test_lone_request_at_once),
		cmocka_unit_test(test_clocked_batch_goes_on_return),
		cmocka_unit_test(test_burst_calls_without_window),
		cmocka_unit_test(test_permanent_errors_fail_at_once),
		cmocka_unit_test(test_transient_errors_retried),
		cmocka_unit_test(test_transient_error_then_success),
		cmocka_unit_test(test_permanent_error_batch),
		cmocka_unit_test(test_permanent_error_after_deadline),
		cmocka_unit_test(test_transient_predicate),
		cmocka_unit_test(test_shared_listing),
		cmocka_unit_test(test_announced_listings_shared),
	};

	pthread_mutex_init(&rec.lock, NULL);
	pthread_cond_init(&rec.cond, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
