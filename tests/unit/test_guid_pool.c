// SPDX-License-Identifier: MIT
/* Unit tests of daemon/engine/guid_pool.c (and statedir.c). */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool_fixture.h"
#include "statedir.h"

#define G(x) ((uint64_t)(x))

static const struct ibvf_guid_range r_1_4[] = {{1, 4}};

/* ------------------------------------------------------------- store -- */

static void test_open_creates_private_store(void **state)
{
	struct pool_fx *f = *state;
	struct stat st;
	mode_t old = umask(0);

	/* even with umask 0 the directory is 0700 and the store 0600 */
	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	umask(old);
	assert_int_equal(stat(f->state, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(stat(f->db, &st), 0);
	assert_int_equal(st.st_mode & 0077, 0);
	assert_string_equal(ibvf_pool_db_path(f->p), f->db);
	ibvf_pool_close(f->p);
	f->p = NULL;
	/* WAL mode and the schema version are in the file (v3: owner key index) */
	assert_int_equal(fx_sql_int(f, "PRAGMA user_version"), 3);
	{
		sqlite3 *db;
		sqlite3_stmt *s;

		assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), 0);
		assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), 0);
		assert_int_equal(sqlite3_step(s), SQLITE_ROW);
		assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
		sqlite3_finalize(s);
		sqlite3_close(db);
	}
	/* no temp files are left behind */
	{
		char *pat = tu_path(f->state, "pool.db.new.*");
		glob_t gl;

		assert_int_equal(glob(pat, 0, NULL, &gl), GLOB_NOMATCH);
		free(pat);
	}
}

static void test_open_needs_ranges(void **state)
{
	struct pool_fx *f = *state;

	assert_int_equal(fx_open(f, NULL, 0, 60), -EINVAL);
	assert_contains(f->err, "no GUID ranges configured");
	/* nothing was created */
	assert_int_equal(access(f->state, F_OK), -1);
}

static void test_read_only_open(void **state)
{
	struct pool_fx *f = *state;
	uint64_t g;

	/* read-only never creates anything */
	assert_int_equal(fx_open_opts(f, r_1_4, 1, 60, true, false), -ENOENT);
	assert_contains(f->err, f->db);
	assert_int_equal(access(f->state, F_OK), -1);
	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	fx_alloc_ok(f, "a");
	assert_int_equal(fx_open_opts(f, r_1_4, 1, 60, true, false), 0);
	assert_int_equal(fx_alloc(f, "b", 0, &g), -EROFS);
	assert_contains(f->err, "read-only");
	assert_int_equal(fx_release(f, 1), -EROFS);
	assert_int_equal(ibvf_pool_expire(f->p, f->err, sizeof(f->err)), -EROFS);
	{
		struct ibvf_alloc a;

		assert_int_equal(ibvf_pool_get(f->p, 1, &a, f->err, sizeof(f->err)), 0);
		assert_string_equal(a.owner.container_id, "a");
	}
}

/* ----------------------------------------------------------- ranges -- */

static void test_range_edges(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0x10, 0x11}, {0x20, 0x22}};
	uint64_t g;

	assert_int_equal(fx_open(f, r, 2, 60), 0);
	/* lowest first, crossing the gap between the ranges */
	assert_true(fx_alloc_ok(f, "a") == 0x10);
	assert_true(fx_alloc_ok(f, "b") == 0x11);
	assert_true(fx_alloc_ok(f, "c") == 0x20);
	/* explicit requests: both ends are in, one past either end is out */
	assert_int_equal(fx_alloc(f, "d", 0x22, &g), 0);
	assert_true(g == 0x22);
	assert_int_equal(fx_alloc(f, "e", 0x1f, &g), -ERANGE);
	assert_contains(f->err, "00:00:00:00:00:00:00:1f is outside the configured pool ranges");
	assert_int_equal(fx_alloc(f, "e", 0x23, &g), -ERANGE);
	assert_int_equal(fx_alloc(f, "e", 0x12, &g), -ERANGE);
	assert_int_equal(fx_alloc(f, "e", 0x0f, &g), -ERANGE);
	assert_true(fx_alloc_ok(f, "e") == 0x21);
	assert_int_equal(fx_alloc(f, "f", 0, &g), -ENOSPC);
}

/* The store orders GUIDs as unsigned numbers, across the sign bit of int64. */
static void test_range_across_sign_bit(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0x7ffffffffffffffeull, 0x8000000000000001ull}};
	struct ibvf_pool_stats st;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	assert_true(fx_alloc_ok(f, "a") == 0x7ffffffffffffffeull);
	assert_true(fx_alloc_ok(f, "b") == 0x7fffffffffffffffull);
	assert_true(fx_alloc_ok(f, "c") == 0x8000000000000000ull);
	assert_true(fx_alloc_ok(f, "d") == 0x8000000000000001ull);
	assert_int_equal(fx_alloc(f, "e", 0, NULL), -ENOSPC);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 4 && st.allocated == 4 && st.free == 0);
}

/*
 * Ranges that touch 0 or all-ones (config refuses them, the pool must be safe
 * anyway): those two GUIDs are never handed out, explicitly or not.
 */
static void test_zero_and_all_ones_never_handed_out(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0, 2}, {UINT64_MAX - 2, UINT64_MAX}};
	struct ibvf_pool_stats st;
	uint64_t got[8], g = 0;
	size_t n = 0;

	assert_int_equal(fx_open(f, r, 2, 60), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 4);
	assert_int_equal(fx_alloc(f, "z", 0, &g), 0);
	got[n++] = g;
	assert_int_equal(fx_alloc(f, "x", UINT64_MAX, &g), -EINVAL);
	assert_contains(f->err, "ff:ff:ff:ff:ff:ff:ff:ff is not assignable");
	for (const char *const *c = (const char *const[]){"a", "b", "c", "d", NULL}; *c; c++) {
		int ret = fx_alloc(f, *c, 0, &g);

		if (ret == -ENOSPC)
			break;
		assert_int_equal(ret, 0);
		got[n++] = g;
	}
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++)
		assert_true(ibvf_guid_is_assignable(got[i]));
	assert_true(got[0] == 1 && got[1] == 2 && got[2] == UINT64_MAX - 2 &&
		    got[3] == UINT64_MAX - 1);
	/* even a released and expired GUID at the edges does not open up 0 */
	assert_int_equal(fx_release(f, 1), 0);
	f->now += 61000;
	assert_int_equal(fx_alloc(f, "e", 0, &g), 0);
	assert_true(g == 1);
}

static void test_whole_guid_space(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0, UINT64_MAX}};
	struct ibvf_pool_stats st;
	struct fx_findings fs;
	uint64_t g;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == UINT64_MAX - 1);
	assert_true(fx_alloc_ok(f, "a") == 1);
	assert_int_equal(fx_alloc(f, "b", UINT64_MAX - 1, &g), 0);
	assert_true(g == UINT64_MAX - 1);
	/* 0 in a request means "the lowest free"; all-ones is refused */
	assert_int_equal(fx_alloc(f, "c", UINT64_MAX, &g), -EINVAL);
	assert_true(fx_alloc_ok(f, "d") == 2);
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);
}

/* ------------------------------------------------------- exhaustion -- */

static void test_exhaustion_error(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0x0200000000000001ull, 0x0200000000000002ull},
						   {0x0200000000000010ull, 0x0200000000000010ull}};
	uint64_t g;

	assert_int_equal(fx_open(f, r, 2, 60), 0);
	fx_alloc_ok(f, "a");
	fx_alloc_ok(f, "b");
	fx_alloc_ok(f, "c");
	assert_int_equal(fx_alloc(f, "d", 0, &g), -ENOSPC);
	assert_contains(f->err, "GUID pool exhausted");
	assert_contains(f->err, "0200000000000001-0200000000000002");
	assert_contains(f->err, "0200000000000010-0200000000000010");
	assert_contains(f->err, "3 assignable GUIDs, 3 allocated, 0 quarantined");
	/* the failed allocation left no record behind */
	assert_int_equal(ibvf_pool_find_owner(f->p, "d", "net1", &(struct ibvf_alloc){0}, f->err,
					      sizeof(f->err)),
			 -ENOENT);
}

/* cluster mode's block claimed while running: ibvf_pool_add_range() */
static void test_add_range_while_open(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0x10, 0x11}};
	struct ibvf_pool_stats st;
	uint64_t g;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	fx_alloc_ok(f, "a");
	fx_alloc_ok(f, "b");
	assert_int_equal(fx_alloc(f, "c", 0, &g), -ENOSPC);
	assert_int_equal(ibvf_pool_add_range(f->p, 0x20, 0x22, f->err, sizeof(f->err)), 0);
	assert_true(fx_alloc_ok(f, "c") == 0x20);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 5 && st.allocated == 3 && st.free == 2);
	/* an explicit request inside the new range is inside the pool */
	assert_int_equal(fx_alloc(f, "d", 0x22, &g), 0);
	assert_true(g == 0x22);
	assert_int_equal(ibvf_pool_add_range(f->p, 3, 2, f->err, sizeof(f->err)), -EINVAL);
	/* reopened with the old ranges only, the new range's records stay records */
	assert_int_equal(fx_open(f, r, 1, 60), 0);
	assert_int_equal(fx_alloc(f, "e", 0, &g), -ENOSPC);
}

/* ibvf_pool_free_count() (the free list's size) says what ibvf_pool_stats() says */
static uint64_t fx_free_same(struct pool_fx *f)
{
	struct ibvf_pool_stats st;
	uint64_t n = 1234;

	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_int_equal(ibvf_pool_free_count(f->p, &n, f->err, sizeof(f->err)), 0);
	assert_true(n == st.free);
	return n;
}

/*
 * ibvf_pool_add_range() without a rebuild: a record already inside the new
 * range stays taken, a range that touches one end to end extends it (the
 * exhaustion message lists the merged range), and the free list audits clean.
 */
static void test_add_range_adjacent(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range wide[] = {{0x10, 0x2f}}, r[] = {{0x10, 0x11}};
	struct fx_findings fs;
	uint64_t g, seen = 0;
	int n = 0;

	assert_int_equal(fx_open(f, wide, 1, 60), 0);
	assert_int_equal(fx_alloc(f, "old", 0x22, &g), 0);
	assert_int_equal(fx_open(f, r, 1, 60), 0); /* 0x22 is now a record outside the ranges */
	assert_int_equal(ibvf_pool_add_range(f->p, 0x20, 0x23, f->err, sizeof(f->err)), 0);
	assert_true(fx_free_same(f) == 5); /* 0x10, 0x11, 0x20, 0x21, 0x23 */
	assert_int_equal(ibvf_pool_add_range(f->p, 0x12, 0x1f, f->err, sizeof(f->err)), 0);
	assert_true(fx_free_same(f) == 19);
	for (;;) {
		char cid[16];
		int ret;

		snprintf(cid, sizeof(cid), "n%d", n);
		ret = fx_alloc(f, cid, 0, &g);
		if (ret == -ENOSPC)
			break;
		assert_int_equal(ret, 0);
		assert_true(g >= 0x10 && g <= 0x23 && g != 0x22 && g > seen);
		seen = g;
		n++;
	}
	assert_int_equal(n, 19);
	assert_contains(f->err, "0000000000000010-000000000000001f");
	assert_true(fx_free_same(f) == 0);
	assert_int_equal(fx_release(f, 0x15), 0);
	assert_true(fx_free_same(f) == 0); /* quarantined */
	f->now += 61000;
	assert_int_equal(ibvf_pool_expire(f->p, f->err, sizeof(f->err)), 1);
	assert_true(fx_free_same(f) == 1);
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);
	/* an overlapping range still works (the free list is rebuilt) */
	assert_int_equal(ibvf_pool_add_range(f->p, 0x23, 0x25, f->err, sizeof(f->err)), 0);
	assert_true(fx_free_same(f) == 3); /* 0x15, 0x24, 0x25 */
	assert_true(fx_alloc_ok(f, "m") == 0x15);
	assert_true(fx_alloc_ok(f, "m2") == 0x24);
}

/* cluster mode's idle block returned: ibvf_pool_remove_range() */
static void test_remove_range(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0x10, 0x1f}};
	struct ibvf_pool_stats st;
	struct ibvf_alloc a;
	uint64_t g, h;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	g = fx_alloc_ok(f, "a"); /* 0x10 */
	h = fx_alloc_ok(f, "b"); /* 0x11 */
	/* a held GUID keeps its block */
	assert_int_equal(ibvf_pool_remove_range(f->p, 0x10, 0x17, 0, f->err, sizeof(f->err)),
			 -EBUSY);
	assert_contains(f->err, "held");
	/* quarantined GUIDs go with it; too few would stay free: refused */
	assert_int_equal(fx_release(f, g), 0);
	assert_int_equal(fx_release(f, h), 0);
	/* 14 free, 0x10-0x17 holds 6 of them: 8 stay free */
	assert_int_equal(ibvf_pool_remove_range(f->p, 0x10, 0x17, 9, f->err, sizeof(f->err)),
			 -ENOSPC);
	assert_contains(f->err, "would leave 8 free GUIDs");
	assert_int_equal(ibvf_pool_remove_range(f->p, 0x10, 0x17, 8, f->err, sizeof(f->err)), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 8 && st.free == 8 && st.quarantined == 0 && st.outside == 2);
	/* nothing comes from it any more; its quarantined records stay until expiry */
	assert_true(fx_alloc_ok(f, "c") == 0x18);
	assert_int_equal(fx_alloc(f, "d", 0x12, &g), -ERANGE);
	assert_int_equal(ibvf_pool_get(f->p, 0x10, &a, f->err, sizeof(f->err)), 0);
	assert_int_equal(a.state, IBVF_ALLOC_QUARANTINED);
	f->now += 61000;
	assert_int_equal(ibvf_pool_expire(f->p, f->err, sizeof(f->err)), 2);
	assert_int_equal(ibvf_pool_get(f->p, 0x10, &a, f->err, sizeof(f->err)), -ENOENT);
	assert_int_equal(fx_alloc(f, "d", 0x10, &g), -ERANGE);
	/* put back (etcd refused the return): allocatable again */
	assert_int_equal(ibvf_pool_add_range(f->p, 0x10, 0x17, f->err, sizeof(f->err)), 0);
	assert_true(fx_alloc_ok(f, "e") == 0x10);
	assert_int_equal(ibvf_pool_remove_range(f->p, 3, 2, 0, f->err, sizeof(f->err)), -EINVAL);
}

/* cluster mode: a requested GUID reserved in etcd outside the node's blocks */
static void test_reserved_outside_ranges(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0x10, 0x11}};
	struct ibvf_alloc_request rq = {.guid = 0x50, .vf_index = -1};
	struct ibvf_pool_stats st;
	struct ibvf_alloc a;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	fx_owner(&rq.owner, "x", NULL);
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), -ERANGE);
	rq.reserved = true;
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0);
	assert_true(a.guid == 0x50);
	/* never on the free list: the pool's own GUIDs are untouched */
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 2 && st.free == 2 && st.outside == 1);
	/* held: another owner is refused even when reserved */
	fx_owner(&rq.owner, "y", NULL);
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), -EEXIST);
	assert_int_equal(fx_release(f, 0x50), 0);
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), -EBUSY);
	f->now += 61000;
	assert_int_equal(ibvf_pool_expire(f->p, f->err, sizeof(f->err)), 1);
	/* the record is deleted, not freed into the ranges */
	assert_int_equal(ibvf_pool_get(f->p, 0x50, &a, f->err, sizeof(f->err)), -ENOENT);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 2 && st.free == 2 && st.outside == 0);
	assert_true(fx_alloc_ok(f, "z") == 0x10);
}

/* ------------------------------------------------------- quarantine -- */

static void test_quarantine_order(void **state)
{
	struct pool_fx *f = *state;
	uint64_t g;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	assert_true(fx_alloc_ok(f, "a") == 1);
	assert_true(fx_alloc_ok(f, "b") == 2);
	assert_true(fx_alloc_ok(f, "c") == 3);
	f->now += 1000;
	assert_int_equal(fx_release(f, 2), 0);
	f->now += 1000;
	assert_int_equal(fx_release(f, 1), 0);
	f->now += 1000;
	assert_int_equal(fx_release(f, 3), 0);
	f->now += 1000;
	/* a free GUID is preferred to any quarantined one */
	assert_true(fx_alloc_ok(f, "d") == 4);
	/* otherwise exhausted: the oldest quarantined first (2, then 1, then 3) */
	assert_true(fx_alloc_ok(f, "e") == 2);
	assert_true(fx_alloc_ok(f, "f") == 1);
	assert_true(fx_alloc_ok(f, "g") == 3);
	assert_int_equal(fx_alloc(f, "h", 0, &g), -ENOSPC);
	assert_contains(f->err, "4 allocated, 0 quarantined");
}

static void test_quarantine_expiry(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_pool_stats st;
	struct ibvf_alloc a;
	uint64_t g;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	assert_true(fx_alloc_ok(f, "a") == 1);
	assert_true(fx_alloc_ok(f, "b") == 2);
	assert_int_equal(fx_release(f, 1), 0);
	assert_int_equal(ibvf_pool_get(f->p, 1, &a, f->err, sizeof(f->err)), 0);
	assert_int_equal(a.state, IBVF_ALLOC_QUARANTINED);
	assert_true(a.released_ms == f->now);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.allocated == 1 && st.quarantined == 1 && st.free == 2);
	/* 1 ms before the end of the quarantine: not reused, and not requestable */
	f->now += 59999;
	assert_int_equal(fx_alloc(f, "x", 1, &g), -EBUSY);
	assert_contains(f->err,
			"00:00:00:00:00:00:00:01 was released 59 s ago and is in quarantine");
	assert_true(fx_alloc_ok(f, "c") == 3);
	/* at the end of it, the GUID is free again and the lowest one */
	f->now += 1;
	assert_true(fx_alloc_ok(f, "d") == 1);
	assert_int_equal(ibvf_pool_get(f->p, 1, &a, f->err, sizeof(f->err)), 0);
	assert_string_equal(a.owner.container_id, "d");
	assert_int_equal(a.state, IBVF_ALLOC_ALLOCATED);
	assert_true(a.released_ms == 0);
}

/* A new record starts at the request's state: allocated (default) or sm_requested only. */
static void test_allocate_at_state(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_alloc_request rq = {.vf_index = -1, .state = IBVF_ALLOC_SM_REQUESTED};
	struct ibvf_alloc a, b;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	fx_owner(&rq.owner, "sr", NULL);
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0);
	assert_int_equal(a.state, IBVF_ALLOC_SM_REQUESTED);
	assert_int_equal(ibvf_pool_get(f->p, a.guid, &b, f->err, sizeof(f->err)), 0);
	assert_int_equal(b.state, IBVF_ALLOC_SM_REQUESTED);
	fx_owner(&rq.owner, "bad", NULL);
	for (int st = IBVF_ALLOC_PROGRAMMED; st < IBVF_ALLOC_STATE_COUNT; st++) {
		if (st == IBVF_ALLOC_SM_REQUESTED)
			continue;
		rq.state = (enum ibvf_alloc_state)st;
		assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)),
				 -EINVAL);
	}
	assert_int_equal(ibvf_pool_find_owner(f->p, "bad", "net1", &a, f->err, sizeof(f->err)),
			 -ENOENT);
	assert_true(fx_alloc_ok(f, "al") != 0);
	assert_int_equal(ibvf_pool_find_owner(f->p, "al", "net1", &a, f->err, sizeof(f->err)), 0);
	assert_int_equal(a.state, IBVF_ALLOC_ALLOCATED);
}

static void test_expire_explicitly(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_pool_stats st;

	assert_int_equal(fx_open(f, r_1_4, 1, 10), 0);
	fx_alloc_ok(f, "a");
	fx_alloc_ok(f, "b");
	assert_int_equal(fx_release(f, 1), 0);
	assert_int_equal(fx_release(f, 2), 0);
	assert_int_equal(ibvf_pool_expire(f->p, f->err, sizeof(f->err)), 0);
	f->now += 10000;
	assert_int_equal(ibvf_pool_expire(f->p, f->err, sizeof(f->err)), 2);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.quarantined == 0 && st.free == 4);
	assert_int_equal(ibvf_pool_get(f->p, 1, &(struct ibvf_alloc){0}, f->err, sizeof(f->err)),
			 -ENOENT);
}

/* Expiring many GUIDs at once (more than one internal batch) frees them all. */
static void test_expire_many(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{1, 1000}};
	struct ibvf_alloc_request rq[600];
	struct ibvf_alloc out[600];
	struct ibvf_pool_stats st;
	struct fx_findings fs;

	assert_int_equal(fx_open(f, r, 1, 5), 0);
	for (size_t i = 0; i < 600; i++) {
		char cid[32];

		memset(&rq[i], 0, sizeof(rq[i]));
		snprintf(cid, sizeof(cid), "c%zu", i);
		fx_owner(&rq[i].owner, cid, NULL);
		rq[i].vf_index = -1;
	}
	assert_int_equal(ibvf_pool_allocate_batch(f->p, rq, 600, out, f->err, sizeof(f->err)), 0);
	/* release every other one so the free list fragments, then the rest */
	for (size_t i = 0; i < 600; i += 2)
		assert_int_equal(fx_release(f, out[i].guid), 0);
	for (size_t i = 1; i < 600; i += 2)
		assert_int_equal(fx_release(f, out[i].guid), 0);
	f->now += 5000;
	assert_int_equal(ibvf_pool_expire(f->p, f->err, sizeof(f->err)), 600);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.free == 1000 && st.allocated == 0 && st.quarantined == 0);
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);
	/* the free list merged back into one extent */
	ibvf_pool_close(f->p);
	f->p = NULL;
	assert_int_equal(fx_sql_int(f, "SELECT count(*) FROM free_extent"), 1);
}

/*
 * When the pool is otherwise exhausted, the oldest quarantined GUID is reused,
 * but only one inside the configured ranges: after a range change the
 * quarantine may still hold GUIDs that are no longer ours to hand out.
 */
static void test_exhausted_reuse_stays_in_ranges(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r2[] = {{2, 4}};
	uint64_t g;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	for (const char *const *c = (const char *const[]){"a", "b", "c", "d", NULL}; *c; c++)
		fx_alloc_ok(f, *c);
	assert_int_equal(fx_release(f, 1), 0); /* oldest quarantined, soon outside */
	f->now += 1000;
	assert_int_equal(fx_release(f, 3), 0);
	f->now += 1000;
	assert_int_equal(fx_open(f, r2, 1, 60), 0);
	/* 2 and 4 held, 3 quarantined: 3 is reused, 1 never */
	assert_true(fx_alloc_ok(f, "e") == 3);
	assert_int_equal(fx_alloc(f, "f", 0, &g), -ENOSPC);
	assert_true(g == 0);
	assert_contains(f->err, "3 assignable GUIDs, 3 allocated, 0 quarantined");
	{
		struct ibvf_alloc a;

		assert_int_equal(ibvf_pool_get(f->p, 1, &a, f->err, sizeof(f->err)), 0);
		assert_int_equal(a.state, IBVF_ALLOC_QUARANTINED);
	}
}

/* ---------------------------------------------------------- release -- */

static void test_release_idempotent(void **state)
{
	struct pool_fx *f = *state;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	fx_alloc_ok(f, "a");
	assert_int_equal(fx_release(f, 1), 0);
	assert_int_equal(fx_release(f, 1), 1);	/* already quarantined */
	assert_int_equal(fx_release(f, 3), 1);	/* never allocated */
	assert_int_equal(fx_release(f, 99), 1); /* outside the ranges */
}

static void test_release_without_quarantine(void **state)
{
	struct pool_fx *f = *state;

	assert_int_equal(fx_open(f, r_1_4, 1, 0), 0);
	assert_true(fx_alloc_ok(f, "a") == 1);
	assert_true(fx_alloc_ok(f, "b") == 2);
	assert_int_equal(fx_release(f, 1), 0);
	assert_int_equal(ibvf_pool_get(f->p, 1, &(struct ibvf_alloc){0}, f->err, sizeof(f->err)),
			 -ENOENT);
	assert_contains(f->err, "00:00:00:00:00:00:00:01 is not in the pool store");
	assert_true(fx_alloc_ok(f, "c") == 1);
}

/* ------------------------------------------------------ owner text -- */

/*
 * Owner fields, PF and PCI are text (valid UTF-8, no control characters),
 * the container ID and ifname follow the CNI spec, and a field must end
 * inside its buffer. A PF name longer than the record holds used to be cut
 * silently. Nothing is stored for a refused request.
 */
static void test_owner_text_checked(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{1, 100}};
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a;
	struct ibvf_pool_stats st;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
#define REFUSED(frag)                                                                              \
	do {                                                                                       \
		f->err[0] = 0;                                                                     \
		assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)),        \
				 -EINVAL);                                                         \
		assert_contains(f->err, frag);                                                     \
		fx_owner(&rq.owner, "ok", NULL);                                                   \
		rq.pf = rq.pci = NULL;                                                             \
	} while (0)
	fx_owner(&rq.owner, "ok", NULL);
	memset(rq.owner.container_id, 'c', sizeof(rq.owner.container_id)); /* no NUL */
	REFUSED("container ID is longer than 127 bytes");
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "a\xe2\x82");
	REFUSED("container ID has a byte that is not UTF-8 at byte 1");
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "_leading");
	REFUSED("is not a CNI container ID");
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "a/b");
	REFUSED("is not a CNI container ID");
	snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), ".");
	REFUSED("interface name '.' is not valid");
	snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net:1");
	REFUSED("interface name 'net:1' is not valid");
	snprintf(rq.owner.pod_uid, sizeof(rq.owner.pod_uid), "\xed\xa0\x80"); /* surrogate */
	REFUSED("pod UID has a byte that is not UTF-8");
	snprintf(rq.owner.network, sizeof(rq.owner.network), "net\x7f");
	REFUSED("network name has a control character");
	rq.pf = "a-pf-name-of-20-chars";
	REFUSED("PF name is longer than 15 bytes");
	rq.pci = "0000:03:00.2\n";
	REFUSED("PCI address has a control character");
#undef REFUSED
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.allocated == 0);

	/* text that is fine: UTF-8 pod name, CNI-style IDs */
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "9f3a.b_c-d");
	snprintf(rq.owner.pod_name, sizeof(rq.owner.pod_name), "caf\xc3\xa9-\xf0\x9f\x90\xb3");
	rq.pf = "ib0";
	rq.pci = "0000:03:00.2";
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0);
	/* an update with a PF that is not text is refused too */
	snprintf(a.pf, sizeof(a.pf), "ib\x1b");
	assert_int_equal(ibvf_pool_update(f->p, &a, f->err, sizeof(f->err)), -EINVAL);
	assert_contains(f->err, "PF name has a control character");
	assert_int_equal(ibvf_pool_get(f->p, a.guid, &a, f->err, sizeof(f->err)), 0);
	assert_string_equal(a.pf, "ib0");
}

/* ---------------------------------------------------- explicit GUIDs -- */

static void test_explicit_request_conflicts(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0x0200000000000001ull, 0x02000000000000ffull}};
	struct ibvf_pool_stats before, after;
	struct ibvf_alloc a;
	uint64_t g;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	assert_int_equal(fx_alloc(f, "holder", 0x0200000000000005ull, &g), 0);
	assert_true(g == 0x0200000000000005ull);
	assert_int_equal(fx_alloc(f, "quarantined", 0x0200000000000007ull, &g), 0);
	assert_int_equal(fx_release(f, 0x0200000000000007ull), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &before, f->err, sizeof(f->err)), 0);

	/* held by another live owner: refused, never taken away */
	assert_int_equal(fx_alloc(f, "thief", 0x0200000000000005ull, &g), -EEXIST);
	assert_contains(f->err, "02:00:00:00:00:00:00:05 is held by container holder ifname net1");
	assert_contains(f->err, "pod ns-holder/pod-holder");
	assert_contains(f->err, "refusing to take it away");
	/* in quarantine */
	assert_int_equal(fx_alloc(f, "thief", 0x0200000000000007ull, &g), -EBUSY);
	assert_contains(f->err, "02:00:00:00:00:00:00:07 was released");
	/* outside the ranges, 0, all-ones */
	assert_int_equal(fx_alloc(f, "thief", 0x0200000000000100ull, &g), -ERANGE);
	assert_contains(f->err, "02:00:00:00:00:00:01:00 is outside the configured pool ranges");
	assert_int_equal(fx_alloc(f, "thief", UINT64_MAX, &g), -EINVAL);

	/* nothing changed: the holder still holds it, no record for the thief */
	assert_int_equal(ibvf_pool_get(f->p, 0x0200000000000005ull, &a, f->err, sizeof(f->err)), 0);
	assert_string_equal(a.owner.container_id, "holder");
	assert_int_equal(ibvf_pool_find_owner(f->p, "thief", "net1", &a, f->err, sizeof(f->err)),
			 -ENOENT);
	assert_contains(f->err, "no GUID held by container thief ifname net1");
	assert_int_equal(ibvf_pool_stats(f->p, &after, f->err, sizeof(f->err)), 0);
	assert_memory_equal(&before, &after, sizeof(before));

	/* an owner that already holds a GUID cannot ask for a second, different one */
	assert_int_equal(fx_alloc(f, "holder", 0x0200000000000009ull, &g), -EEXIST);
	assert_contains(f->err, "container holder ifname net1 already holds GUID "
				"02:00:00:00:00:00:00:05");
	/* a free GUID in the middle of the free list can be requested */
	assert_int_equal(fx_alloc(f, "other", 0x0200000000000080ull, &g), 0);
	assert_true(fx_alloc_ok(f, "lowest") == 0x0200000000000001ull);
}

static void test_idempotent_same_owner(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a1, a2;
	struct ibvf_pool_stats st;
	uint64_t g;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	fx_owner(&rq.owner, "ctr", "net1");
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a1, f->err, sizeof(f->err)), 0);
	f->now += 5000;
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a2, f->err, sizeof(f->err)), 0);
	assert_true(a1.guid == a2.guid);
	assert_true(a2.created_ms == a1.created_ms); /* the existing record, not a new one */
	/* asking for the GUID it holds, explicitly, is the same */
	rq.guid = a1.guid;
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a2, f->err, sizeof(f->err)), 0);
	assert_true(a2.guid == a1.guid);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.allocated == 1);
	/* another interface of the same container is another owner */
	assert_int_equal(fx_alloc(f, "ctr", 0, &g), 0);
	assert_true(g == a1.guid);
	rq.guid = 0;
	snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net2");
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a2, f->err, sizeof(f->err)), 0);
	assert_true(a2.guid != a1.guid);
	/* after a release the owner gets a new GUID (the old one is quarantined) */
	assert_int_equal(fx_release(f, a1.guid), 0);
	assert_int_equal(fx_alloc(f, "ctr", 0, &g), 0);
	assert_true(g != a1.guid && g != a2.guid);
}

static void test_bad_requests(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_alloc_request rq = {.vf_index = -1};
	uint16_t pk[IBVF_POOL_MAX_PKEYS + 1] = {0};
	struct ibvf_alloc a;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), -EINVAL);
	assert_contains(f->err, "needs a container ID and an interface name");
	fx_owner(&rq.owner, "c", "net1");
	rq.owner.ifname[0] = 0;
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), -EINVAL);
	fx_owner(&rq.owner, "c", "net1");
	rq.pkeys = pk;
	rq.n_pkeys = IBVF_POOL_MAX_PKEYS + 1;
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), -EINVAL);
	assert_contains(f->err, "at most 8 PKeys");
}

/* ------------------------------------------------------------ batch -- */

static void batch_reqs(struct ibvf_alloc_request *rq, size_t n, const char *prefix)
{
	for (size_t i = 0; i < n; i++) {
		char cid[64];

		memset(&rq[i], 0, sizeof(rq[i]));
		snprintf(cid, sizeof(cid), "%s%zu", prefix, i);
		fx_owner(&rq[i].owner, cid, NULL);
		rq[i].vf_index = -1;
	}
}

static void test_batch_all_or_nothing(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{1, 6}};
	struct ibvf_alloc_request rq[4];
	struct ibvf_alloc out[4];
	struct ibvf_pool_stats st;
	struct fx_findings fs;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	fx_alloc_ok(f, "holder"); /* 1 */

	/* the third request conflicts: none of the batch is stored */
	batch_reqs(rq, 3, "x");
	rq[2].guid = 1;
	assert_int_equal(ibvf_pool_allocate_batch(f->p, rq, 3, out, f->err, sizeof(f->err)),
			 -EEXIST);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.allocated == 1 && st.free == 5);
	assert_int_equal(ibvf_pool_find_owner(f->p, "x0", "net1", &out[0], f->err, sizeof(f->err)),
			 -ENOENT);

	/* more than what is left: none of the batch is stored */
	batch_reqs(rq, 4, "y");
	fx_alloc_ok(f, "filler");  /* 2; 4 left */
	fx_alloc_ok(f, "filler2"); /* 3; 3 left */
	assert_int_equal(ibvf_pool_allocate_batch(f->p, rq, 4, out, f->err, sizeof(f->err)),
			 -ENOSPC);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.allocated == 3 && st.free == 3);

	/* a batch that fits: all stored, distinct, lowest first */
	assert_int_equal(ibvf_pool_allocate_batch(f->p, rq, 3, out, f->err, sizeof(f->err)), 0);
	assert_true(out[0].guid == 4 && out[1].guid == 5 && out[2].guid == 6);
	for (size_t i = 0; i < 3; i++) {
		struct ibvf_alloc a;

		assert_int_equal(ibvf_pool_get(f->p, out[i].guid, &a, f->err, sizeof(f->err)), 0);
		assert_string_equal(a.owner.container_id, rq[i].owner.container_id);
	}
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);
}

/* ---------------------------------------------- records and lookups -- */

static void test_update_and_lookup(void **state)
{
	struct pool_fx *f = *state;
	static const uint16_t pk[] = {0x8001, 0x0002};
	struct ibvf_alloc_request rq = {.vf_index = 3, .pf = "ib0", .pci = "0000:03:00.2"};
	struct ibvf_alloc a, b;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	fx_owner(&rq.owner, "ctr-1", "net1");
	snprintf(rq.owner.pod_uid, sizeof(rq.owner.pod_uid), "uid-1");
	snprintf(rq.owner.network, sizeof(rq.owner.network), "ib-net");
	rq.pkeys = pk;
	rq.n_pkeys = 2;
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0);
	assert_int_equal(a.state, IBVF_ALLOC_ALLOCATED);
	assert_int_equal(a.vf_index, 3);
	assert_string_equal(a.pf, "ib0");

	f->now += 100;
	a.state = IBVF_ALLOC_HANDED;
	a.vf_index = 7;
	snprintf(a.pf, sizeof(a.pf), "ib1");
	a.pkeys[0] = 0x8003;
	a.n_pkeys = 1;
	assert_int_equal(ibvf_pool_update(f->p, &a, f->err, sizeof(f->err)), 0);
	assert_int_equal(ibvf_pool_find_owner(f->p, "ctr-1", "net1", &b, f->err, sizeof(f->err)),
			 0);
	assert_true(b.guid == a.guid);
	assert_int_equal(b.state, IBVF_ALLOC_HANDED);
	assert_int_equal(b.vf_index, 7);
	assert_string_equal(b.pf, "ib1");
	assert_string_equal(b.pci, "0000:03:00.2");
	assert_int_equal(b.n_pkeys, 1);
	assert_int_equal(b.pkeys[0], 0x8003);
	assert_string_equal(b.owner.pod_uid, "uid-1");
	assert_string_equal(b.owner.network, "ib-net");
	assert_true(b.updated_ms == b.created_ms + 100);

	/* the quarantine state is only reached through release */
	a.state = IBVF_ALLOC_QUARANTINED;
	assert_int_equal(ibvf_pool_update(f->p, &a, f->err, sizeof(f->err)), -EINVAL);
	/* no live record: -ENOENT */
	a.state = IBVF_ALLOC_PORT_READY;
	assert_int_equal(fx_release(f, a.guid), 0);
	assert_int_equal(ibvf_pool_update(f->p, &a, f->err, sizeof(f->err)), -ENOENT);
	assert_contains(f->err, "has no live record");
	assert_int_equal(ibvf_pool_find_owner(f->p, "ctr-1", "net1", &b, f->err, sizeof(f->err)),
			 -ENOENT);
}

struct list_acc {
	uint64_t g[16];
	size_t n;
	size_t stop_after;
};

static int list_cb(void *arg, const struct ibvf_alloc *a)
{
	struct list_acc *l = arg;

	l->g[l->n++] = a->guid;
	return l->stop_after && l->n == l->stop_after;
}

static void test_list_filters(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{1, 10}};
	static const uint16_t pk_a[] = {0x8001}, pk_b[] = {0x0002, 0x0001};
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a;
	struct ibvf_pool_filter flt = {.pkey = -1};
	struct list_acc l = {0};

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	fx_owner(&rq.owner, "alpha", NULL);
	rq.pkeys = pk_a;
	rq.n_pkeys = 1;
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0); /* 1 */
	fx_owner(&rq.owner, "beta", NULL);
	rq.pkeys = pk_b;
	rq.n_pkeys = 2;
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0); /* 2 */
	fx_alloc_ok(f, "gamma");							/* 3 */
	assert_int_equal(fx_release(f, 3), 0);
	fx_alloc_ok(f, "delta"); /* 4 */

	assert_int_equal(ibvf_pool_list(f->p, NULL, list_cb, &l, f->err, sizeof(f->err)), 0);
	assert_int_equal(l.n, 3);
	assert_true(l.g[0] == 1 && l.g[1] == 2 && l.g[2] == 4);
	l.n = 0;
	flt.include_quarantined = true;
	assert_int_equal(ibvf_pool_list(f->p, &flt, list_cb, &l, f->err, sizeof(f->err)), 0);
	assert_int_equal(l.n, 4);
	/* PKey filter: the 15-bit key, membership bit ignored */
	l.n = 0;
	flt.pkey = 0x0001;
	assert_int_equal(ibvf_pool_list(f->p, &flt, list_cb, &l, f->err, sizeof(f->err)), 0);
	assert_int_equal(l.n, 2);
	l.n = 0;
	flt.pkey = 0x8002;
	assert_int_equal(ibvf_pool_list(f->p, &flt, list_cb, &l, f->err, sizeof(f->err)), 0);
	assert_int_equal(l.n, 1);
	assert_true(l.g[0] == 2);
	/* owner filter: container ID or pod namespace/name substring */
	l.n = 0;
	flt.pkey = -1;
	flt.owner = "pod-del";
	assert_int_equal(ibvf_pool_list(f->p, &flt, list_cb, &l, f->err, sizeof(f->err)), 0);
	assert_int_equal(l.n, 1);
	assert_true(l.g[0] == 4);
	l.n = 0;
	flt.owner = "a";
	assert_int_equal(ibvf_pool_list(f->p, &flt, list_cb, &l, f->err, sizeof(f->err)), 0);
	assert_int_equal(l.n, 4);
	/* a callback returning non-zero stops the walk and its value is returned */
	l.n = 0;
	l.stop_after = 2;
	assert_int_equal(ibvf_pool_list(f->p, &flt, list_cb, &l, f->err, sizeof(f->err)), 1);
	assert_int_equal(l.n, 2);
}

/* A list callback may call back into the pool, even into the same list. */
struct reenter {
	struct pool_fx *f;
	size_t outer, inner;
};

static int count_inner(void *arg, const struct ibvf_alloc *a)
{
	(void)a;
	++*(size_t *)arg;
	return 0;
}

static int reenter_cb(void *arg, const struct ibvf_alloc *a)
{
	struct reenter *r = arg;
	struct ibvf_alloc b;

	r->outer++;
	assert_int_equal(ibvf_pool_get(r->f->p, a->guid, &b, r->f->err, sizeof(r->f->err)), 0);
	assert_string_equal(a->owner.container_id, b.owner.container_id);
	assert_int_equal(
		ibvf_pool_list(r->f->p, NULL, count_inner, &r->inner, r->f->err, sizeof(r->f->err)),
		0);
	return 0;
}

static void test_list_callback_reenters(void **state)
{
	struct pool_fx *f = *state;
	struct reenter r = {.f = f};

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	fx_alloc_ok(f, "a");
	fx_alloc_ok(f, "b");
	fx_alloc_ok(f, "c");
	for (int round = 0; round < 2; round++) {
		r.outer = r.inner = 0;
		assert_int_equal(ibvf_pool_list(f->p, NULL, reenter_cb, &r, f->err, sizeof(f->err)),
				 0);
		assert_int_equal(r.outer, 3);
		assert_int_equal(r.inner, 9);
	}
	/* and the pool still works afterwards */
	assert_true(fx_alloc_ok(f, "d") == 4);
}

static void test_persistence_across_reopen(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{0x100, 0x1ff}};
	struct ibvf_pool_stats s1, s2;
	struct ibvf_alloc a;
	uint64_t g[5];

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	for (int i = 0; i < 5; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "p%d", i);
		g[i] = fx_alloc_ok(f, cid);
	}
	assert_int_equal(fx_release(f, g[1]), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &s1, f->err, sizeof(f->err)), 0);
	ibvf_pool_close(f->p);
	f->p = NULL;

	f->now += 1000;
	assert_int_equal(fx_open(f, r, 1, 60), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &s2, f->err, sizeof(f->err)), 0);
	assert_memory_equal(&s1, &s2, sizeof(s1));
	for (int i = 0; i < 5; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "p%d", i);
		assert_int_equal(ibvf_pool_get(f->p, g[i], &a, f->err, sizeof(f->err)), 0);
		assert_string_equal(a.owner.container_id, cid);
		assert_int_equal(a.state, i == 1 ? IBVF_ALLOC_QUARANTINED : IBVF_ALLOC_ALLOCATED);
	}
	/* the same owner still gets its GUID; a new one gets the next, not a reused one */
	assert_true(fx_alloc_ok(f, "p0") == g[0]);
	assert_true(fx_alloc_ok(f, "new") == 0x105);
	/* the quarantine survives the restart: still busy 1 s after release */
	assert_int_equal(fx_alloc(f, "x", g[1], NULL), -EBUSY);
}

/* -------------------------------------------------- range change/audit -- */

static void test_range_change_rebuilds_and_audits(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r1[] = {{1, 10}};
	static const struct ibvf_guid_range r2[] = {{4, 20}};
	struct ibvf_pool_stats st;
	struct fx_findings fs;
	size_t first = 0;

	assert_int_equal(fx_open(f, r1, 1, 60), 0);
	for (int i = 0; i < 5; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "r%d", i);
		fx_alloc_ok(f, cid); /* 1..5 */
	}
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);

	/* read-only with other ranges: no rebuild, but outside-range records found */
	assert_int_equal(fx_open_opts(f, r2, 1, 60, true, false), 0);
	assert_int_equal(fx_audit(f, &fs), 3);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_OUTSIDE_RANGE, &first), 3);
	assert_true(fs.f[first].guid == 1 && fs.f[first].problem);
	assert_contains(fs.f[first].detail, "00:00:00:00:00:00:00:01");
	assert_contains(fs.f[first].detail, "container r0");

	/* read-write: the free list is rebuilt for the new ranges */
	assert_int_equal(fx_open(f, r2, 1, 60), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 17 && st.allocated == 2 && st.free == 15 && st.outside == 3);
	assert_true(fx_alloc_ok(f, "n1") == 6);
	assert_int_equal(fx_alloc(f, "n2", 2, NULL), -ERANGE);
	assert_int_equal(fx_audit(f, &fs), 3);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_OUTSIDE_RANGE, NULL), 3);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_LOST, NULL), 0);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_FREE_AND_HELD, NULL), 0);
	/* releasing an outside GUID takes it out of the store after its quarantine */
	assert_int_equal(fx_release(f, 1), 0);
	f->now += 60000;
	assert_int_equal(ibvf_pool_expire(f->p, f->err, sizeof(f->err)), 1);
	assert_int_equal(fx_audit(f, &fs), 2);

	/* back to the old ranges: rebuilt again, clean (the new GUID 6 is inside) */
	assert_int_equal(fx_open(f, r1, 1, 60), 0);
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);
	assert_true(fx_alloc_ok(f, "n3") == 1);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 10 && st.allocated == 6 && st.free == 4 && st.outside == 0);
}

/*
 * Many ranges: the ranges text the store keeps to notice a range change is
 * 34 bytes per range. It was cut at 4 KiB (120 ranges), so a change to a
 * later range went unnoticed: GUIDs added to range 130 were "neither held
 * nor free", and GUIDs removed from it stayed in the free list, to be handed
 * out although outside the configured ranges.
 */
#define MANY_RANGES 130

static void many_ranges(struct ibvf_guid_range *r, uint64_t last_len)
{
	for (size_t i = 0; i < MANY_RANGES; i++) {
		r[i].start = 0x0200000000000001ull + i * 0x100;
		r[i].end = r[i].start + (i == MANY_RANGES - 1 ? last_len : 1);
	}
}

static void test_range_change_after_many_ranges(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_guid_range small[MANY_RANGES], big[MANY_RANGES];
	uint64_t last = 0x0200000000000001ull + (MANY_RANGES - 1) * 0x100, g;
	struct ibvf_pool_stats st;
	struct fx_findings fs;

	many_ranges(small, 1); /* 2 GUIDs per range */
	many_ranges(big, 9);   /* the last range grows to 10 */
	assert_int_equal(fx_open(f, small, MANY_RANGES, 0), 0);
	fx_alloc_ok(f, "first");
	/* grow the last range: its new GUIDs are free */
	assert_int_equal(fx_open(f, big, MANY_RANGES, 0), 0);
	assert_int_equal(fx_alloc(f, "grown", last + 5, &g), 0);
	assert_true(g == last + 5);
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);
	assert_int_equal(fx_release(f, g), 0);
	/* shrink it back: never hand out last + 2..9 again */
	assert_int_equal(fx_open(f, small, MANY_RANGES, 0), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.total == 2 * MANY_RANGES && st.allocated == 1);
	for (size_t i = 1; i < 2 * MANY_RANGES; i++) {
		char cid[32];

		snprintf(cid, sizeof(cid), "c%zu", i);
		assert_int_equal(fx_alloc(f, cid, 0, &g), 0);
		assert_true(g < last + 2);
	}
	assert_int_equal(fx_alloc(f, "one-too-many", 0, &g), -ENOSPC);
	assert_int_equal(fx_audit(f, &fs), 0);
}

/*
 * Two processes with different ranges on one store (an admin's ibvfctl with
 * another config while ibvfd runs): each only ever hands out GUIDs of its
 * own ranges, whatever the other did to the free list in between.
 */
static void test_other_writer_with_other_ranges(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range ra[] = {{1, 10}};
	static const struct ibvf_guid_range rb[] = {{100, 110}};
	struct ibvf_pool_opts ob = {
		.state_dir = f->state,
		.ranges = rb,
		.n_ranges = 1,
		.quarantine_s = 60,
	};
	struct ibvf_pool *b = NULL;
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a;
	struct fx_findings fs;

	assert_int_equal(fx_open(f, ra, 1, 60), 0);
	assert_true(fx_alloc_ok(f, "a1") == 1);
	assert_int_equal(ibvf_pool_open(&ob, &b, f->err, sizeof(f->err)), 0);
	fx_owner(&rq.owner, "b1", NULL);
	assert_int_equal(ibvf_pool_allocate(b, &rq, &a, f->err, sizeof(f->err)), 0);
	assert_true(a.guid == 100);
	/* A again: from its own ranges, not from the free list B left behind */
	assert_true(fx_alloc_ok(f, "a2") == 2);
	fx_owner(&rq.owner, "b2", NULL);
	assert_int_equal(ibvf_pool_allocate(b, &rq, &a, f->err, sizeof(f->err)), 0);
	assert_true(a.guid == 101);
	assert_true(fx_alloc_ok(f, "a3") == 3);
	/* a release and an expiry by one side keep the other side consistent */
	assert_int_equal(ibvf_pool_release(b, 100, f->err, sizeof(f->err)), 0);
	f->now += 60000;
	assert_int_equal(fx_release(f, 2), 0);
	assert_true(fx_alloc_ok(f, "a4") == 4);
	ibvf_pool_close(b);
	assert_int_equal(fx_audit(f, &fs), 2); /* 101 and the quarantined 100: outside A's ranges */
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_OUTSIDE_RANGE, NULL), 2);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_LOST, NULL), 0);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_FREE_AND_HELD, NULL), 0);
}

static void test_audit_expired_quarantine_is_notice(void **state)
{
	struct pool_fx *f = *state;
	struct fx_findings fs;
	size_t i = 0;

	assert_int_equal(fx_open(f, r_1_4, 1, 60), 0);
	fx_alloc_ok(f, "a");
	assert_int_equal(fx_release(f, 1), 0);
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);
	f->now += 60000;
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_EXPIRED_QUARANTINE, &i), 1);
	assert_false(fs.f[i].problem);
	assert_true(fs.f[i].guid == 1);
	assert_string_equal(ibvf_audit_kind_name(fs.f[i].kind), "expired-quarantine");
}

/* Hand-corrupt the free list with SQL: the audit must notice each kind. */
static void test_audit_detects_corruption(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{1, 100}};
	struct fx_findings fs;
	char sql[1024];
	size_t i = 0;
	uint64_t g;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	for (int k = 0; k < 10; k++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "a%d", k);
		fx_alloc_ok(f, cid); /* 1..10; free list [11, 100] */
	}
	assert_int_equal(fx_audit(f, &fs), 0);

	/* LOST: delete the free extent; 90 GUIDs are neither free nor held */
	fx_sql(f, "DELETE FROM free_extent");
	assert_int_equal(fx_audit(f, &fs), 1);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_LOST, &i), 1);
	assert_true(fs.f[i].guid == 11 && fs.f[i].count == 90 && fs.f[i].problem);
	assert_contains(fs.f[i].detail, "90 GUID(s) from 00:00:00:00:00:00:00:0b");
	/* with nothing free, allocation reports exhaustion, never a held GUID */
	assert_int_equal(fx_alloc(f, "x", 0, &g), -ENOSPC);

	/* FREE_AND_HELD: put back the free extent plus one covering held GUID 5 */
	snprintf(sql, sizeof(sql),
		 "INSERT INTO free_extent VALUES(%lld, %lld); INSERT INTO free_extent "
		 "VALUES(%lld, %lld)",
		 (long long)fx_enc(11), (long long)fx_enc(100), (long long)fx_enc(5),
		 (long long)fx_enc(5));
	fx_sql(f, sql);
	assert_int_equal(fx_audit(f, &fs), 1);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_FREE_AND_HELD, &i), 1);
	assert_true(fs.f[i].guid == 5);
	assert_contains(fs.f[i].detail,
			"00:00:00:00:00:00:00:05 is both held and in the free list");
	/* the allocator refuses to hand out the held GUID: an error, not a duplicate */
	assert_true(fx_alloc(f, "x", 0, &g) < 0);
	{
		struct ibvf_alloc a;

		assert_int_equal(ibvf_pool_get(f->p, 5, &a, f->err, sizeof(f->err)), 0);
		assert_string_equal(a.owner.container_id, "a4");
	}

	/* a partial loss in the middle of a range, and a free extent over a held run */
	snprintf(sql, sizeof(sql),
		 "DELETE FROM free_extent; INSERT INTO free_extent VALUES(%lld, %lld);"
		 "INSERT INTO free_extent VALUES(%lld, %lld)",
		 (long long)fx_enc(9), (long long)fx_enc(50), (long long)fx_enc(61),
		 (long long)fx_enc(100));
	fx_sql(f, sql);
	assert_int_equal(fx_audit(f, &fs), 3);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_FREE_AND_HELD, NULL), 2); /* 9, 10 */
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_LOST, &i), 1);
	assert_true(fs.f[i].guid == 51 && fs.f[i].count == 10);

	/* INVALID_GUID and DUPLICATE_OWNER need SQL that bypasses the store's rules */
	snprintf(sql, sizeof(sql),
		 "DELETE FROM free_extent; INSERT INTO free_extent VALUES(%lld, %lld);"
		 "DROP INDEX alloc_owner;"
		 "INSERT INTO alloc(guid, state, container_id, ifname, created_ms, updated_ms)"
		 " VALUES(%lld, 0, 'a0', 'net1', 0, 0);"
		 "INSERT INTO alloc(guid, state, container_id, ifname, created_ms, updated_ms)"
		 " VALUES(%lld, 0, 'zero', 'net1', 0, 0);",
		 (long long)fx_enc(12), (long long)fx_enc(100), (long long)fx_enc(11),
		 (long long)fx_enc(0));
	fx_sql(f, sql);
	assert_int_equal(fx_audit(f, &fs), 2);
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_DUPLICATE_OWNER, &i), 1);
	assert_contains(fs.f[i].detail, "container a0 ifname net1 holds 2 GUIDs");
	assert_int_equal(fx_count_kind(&fs, IBVF_AUDIT_INVALID_GUID, &i), 1);
	assert_true(fs.f[i].guid == 0);
}

/* The audit callback can stop the report early; the count is still complete. */
static int stop_first(void *arg, const struct ibvf_audit_finding *fi)
{
	(void)fi;
	++*(int *)arg;
	return 1;
}

static void test_audit_callback_stops(void **state)
{
	struct pool_fx *f = *state;
	static const struct ibvf_guid_range r[] = {{1, 10}};
	static const struct ibvf_guid_range r2[] = {{5, 10}};
	int calls = 0;

	assert_int_equal(fx_open(f, r, 1, 60), 0);
	fx_alloc_ok(f, "a");
	fx_alloc_ok(f, "b");
	fx_alloc_ok(f, "c");
	assert_int_equal(fx_open(f, r2, 1, 60), 0);
	assert_int_equal(ibvf_pool_audit(f->p, stop_first, &calls, f->err, sizeof(f->err)), 3);
	assert_int_equal(calls, 1);
}

/* ------------------------------------------------------ state dir -- */

static void test_state_dir_permissions(void **state)
{
	struct pool_fx *f = *state;
	char err[IBVF_ERR_LEN];
	char *file;

	/* group- or other-writable: refused, nothing created inside */
	assert_int_equal(mkdir(f->state, 0700), 0);
	assert_int_equal(chmod(f->state, 0770), 0);
	assert_int_equal(fx_open(f, r_1_4, 1, 60), -EPERM);
	assert_contains(f->err, f->state);
	assert_contains(f->err, "has mode 0770: group/other may write it");
	assert_int_equal(access(f->db, F_OK), -1);
	assert_int_equal(fx_open_opts(f, r_1_4, 1, 60, true, false), -ENOENT);
	assert_int_equal(chmod(f->state, 0702), 0);
	assert_int_equal(ibvf_dir_prepare(f->state, 0700, true, err, sizeof(err)), -EPERM);
	assert_contains(err, "has mode 0702");
	assert_int_equal(chmod(f->state, 01777), 0);
	assert_int_equal(ibvf_dir_prepare(f->state, 0700, true, err, sizeof(err)), -EPERM);
	/* readable by others is allowed (only writing lets files be swapped) */
	assert_int_equal(chmod(f->state, 0755), 0);
	assert_int_equal(ibvf_dir_prepare(f->state, 0700, true, err, sizeof(err)), 0);

	/* owned by someone else: refused */
	if (geteuid() == 0) {
		assert_int_equal(chown(f->state, 65534, 65534), 0);
		assert_int_equal(chmod(f->state, 0700), 0);
		assert_int_equal(fx_open(f, r_1_4, 1, 60), -EPERM);
		assert_contains(f->err, "is owned by uid 65534, not by uid 0 running ibvf");
		assert_int_equal(chown(f->state, 0, 0), 0);
	} else {
		/* not root: a directory we do not own is one root owns */
		assert_int_equal(ibvf_dir_prepare("/", 0700, false, err, sizeof(err)), -EPERM);
		assert_contains(err, "is owned by uid 0");
	}

	/* not a directory */
	file = tu_path(f->dir, "plainfile");
	assert_int_equal(tu_write_str(file, "x"), 0);
	assert_int_equal(ibvf_dir_prepare(file, 0700, true, err, sizeof(err)), -ENOTDIR);
	assert_contains(err, "is not a directory");
	free(file);

	/* absent and not to be created */
	file = tu_path(f->dir, "absent");
	assert_int_equal(ibvf_dir_prepare(file, 0700, false, err, sizeof(err)), -ENOENT);
	assert_contains(err, file);
	free(file);

	/* missing parents are created; the leaf gets the asked mode */
	file = tu_path(f->dir, "a/b/c");
	assert_int_equal(ibvf_dir_prepare(file, 0700, true, err, sizeof(err)), 0);
	{
		struct stat st;

		assert_int_equal(stat(file, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0700);
	}
	free(file);
}

static void test_write_file_atomic(void **state)
{
	struct pool_fx *f = *state;
	char err[IBVF_ERR_LEN];
	char *path = tu_path(f->dir, "atomic.txt");
	struct stat st;
	size_t len;
	char *data;

	assert_int_equal(ibvf_write_file_atomic(path, "one", 3, 0640, err, sizeof(err)), 0);
	assert_int_equal(ibvf_write_file_atomic(path, "second", 6, 0600, err, sizeof(err)), 0);
	data = tu_read_file(path, &len);
	assert_non_null(data);
	assert_string_equal(data, "second");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	free(data);
	free(path);
	path = tu_path(f->dir, "no/such/dir/file");
	assert_true(ibvf_write_file_atomic(path, "x", 1, 0600, err, sizeof(err)) < 0);
	assert_contains(err, "no/such/dir/file");
	free(path);
}

static void test_state_names(void **state)
{
	(void)state;
	for (int s = 0; s < IBVF_ALLOC_STATE_COUNT; s++)
		assert_int_equal(ibvf_alloc_state_parse(ibvf_alloc_state_name(s)), s);
	assert_int_equal(ibvf_alloc_state_parse("bogus"), -EINVAL);
	assert_string_equal(ibvf_alloc_state_name(IBVF_ALLOC_STATE_COUNT), "?");
	assert_string_equal(ibvf_audit_kind_name(IBVF_AUDIT_LOST), "lost");
	assert_string_equal(ibvf_audit_kind_name(IBVF_AUDIT_FREE_AND_HELD), "free-and-held");
}

/* ------------------------------------------------------------ health -- */

static int write_fault; /* returned by fault_fn(): a negative errno fails each commit */

static int fault_fn(void *arg)
{
	(void)arg;
	return write_fault;
}

/*
 * ibvf_pool_health() follows the last write that changed rows or failed in
 * SQLite; refusals and no-ops are answers, not evidence that the disk works.
 */
static void test_health_records_writes(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_pool_opts o = {
		.state_dir = f->state,
		.ranges = r_1_4,
		.n_ranges = 1,
		.quarantine_s = 60,
		.now_ms = fx_clock,
		.now_arg = &f->now,
		.write_fault = fault_fn,
	};
	struct ibvf_pool_health h;
	struct ibvf_alloc a;
	uint64_t g;

	write_fault = 0;
	assert_int_equal(ibvf_pool_open(&o, &f->p, f->err, sizeof(f->err)), 0);
	ibvf_pool_health(f->p, &h);
	assert_int_equal(h.last_write_ms, 0);
	g = fx_alloc_ok(f, "a");
	ibvf_pool_health(f->p, &h);
	assert_int_equal(h.last_write_result, 0);
	assert_int_equal(h.last_ok_ms, f->now);
	assert_int_equal(h.write_failures, 0);

	write_fault = -ENOSPC;
	f->now += 1000;
	assert_int_equal(fx_alloc(f, "b", 0, NULL), -EIO);
	assert_non_null(strstr(f->err, "(injected)"));
	ibvf_pool_health(f->p, &h);
	assert_int_equal(h.last_write_result, -EIO);
	assert_int_equal(h.last_write_ms, f->now);
	assert_int_equal(h.last_ok_ms, f->now - 1000);
	assert_int_equal(h.write_failures, 1);
	assert_non_null(strstr(h.last_error, IBVF_POOL_DB_NAME));
	assert_int_equal(ibvf_pool_probe_write(f->p, f->err, sizeof(f->err)), -EIO);

	/* the disk works again, but answers that change nothing do not show it */
	write_fault = 0;
	assert_int_equal(fx_release(f, G(4)), 1);
	assert_int_equal(fx_alloc(f, "c", g, NULL), -EEXIST);
	ibvf_pool_health(f->p, &h);
	assert_int_equal(h.last_write_result, -EIO);
	assert_int_equal(h.write_failures, 2);
	/* a real write does */
	f->now += 1000;
	assert_int_equal(ibvf_pool_probe_write(f->p, f->err, sizeof(f->err)), 0);
	ibvf_pool_health(f->p, &h);
	assert_int_equal(h.last_write_result, 0);
	assert_int_equal(h.last_ok_ms, f->now);
	assert_string_equal(h.last_error, "");
	/* the failed allocation left nothing behind */
	assert_int_equal(ibvf_pool_find_owner(f->p, "b", "net1", &a, NULL, 0), -ENOENT);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_open_creates_private_store),
		T(test_open_needs_ranges),
		T(test_read_only_open),
		T(test_range_edges),
		T(test_allocate_at_state),
		T(test_range_across_sign_bit),
		T(test_zero_and_all_ones_never_handed_out),
		T(test_whole_guid_space),
		T(test_exhaustion_error),
		T(test_add_range_while_open),
		T(test_add_range_adjacent),
		T(test_remove_range),
		T(test_reserved_outside_ranges),
		T(test_quarantine_order),
		T(test_exhausted_reuse_stays_in_ranges),
		T(test_quarantine_expiry),
		T(test_expire_explicitly),
		T(test_expire_many),
		T(test_release_idempotent),
		T(test_release_without_quarantine),
		T(test_explicit_request_conflicts),
		T(test_idempotent_same_owner),
		T(test_bad_requests),
		T(test_batch_all_or_nothing),
		T(test_update_and_lookup),
		T(test_list_filters),
		T(test_list_callback_reenters),
		T(test_persistence_across_reopen),
		T(test_range_change_rebuilds_and_audits),
		T(test_range_change_after_many_ranges),
		T(test_owner_text_checked),
		T(test_other_writer_with_other_ranges),
		T(test_audit_expired_quarantine_is_notice),
		T(test_audit_detects_corruption),
		T(test_audit_callback_stops),
		T(test_state_dir_permissions),
		T(test_write_file_atomic),
		T(test_health_records_writes),
		cmocka_unit_test(test_state_names),
	};

	return cmocka_run_group_tests_name("guid_pool", tests, NULL, NULL);
}
