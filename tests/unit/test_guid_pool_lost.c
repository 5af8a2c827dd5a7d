// SPDX-License-Identifier: MIT
/*
 * A store that lost records must never hand out GUIDs again as if it were
 * whole (issue 14, "duplicate port GUIDs after the store is lost or
 * damaged"): a deleted or replaced pool.db, an older copy, a damaged WAL or
 * a damaged pool.id is detected at open against <state_dir>/pool.id and
 * allocates nothing until rebuilt; GUIDs other views show in use are
 * skipped; a checkpoint keeps a damaged WAL from losing handed records.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool_fixture.h"

#define START 0x0200000000000001ull
static const struct ibvf_guid_range ranges[] = {{START, 0x020000000000ffffull}};

static char *state_file(const char *dir, const char *name)
{
	return tu_path(dir, name);
}

static void rm_store(const char *state)
{
	static const char *const names[] = {"pool.db", "pool.db-wal", "pool.db-shm"};

	for (size_t i = 0; i < 3; i++) {
		char *p = state_file(state, names[i]);

		unlink(p);
		free(p);
	}
}

/* Copy <from>/name to <to>/name (the test's "snapshot" of files on disk). */
static void copy_file(const char *from, const char *to, const char *name)
{
	char *a = state_file(from, name), *b = state_file(to, name), *data;
	size_t len = 0;

	data = tu_read_file(a, &len);
	if (data) {
		assert_int_equal(tu_write_file(b, data, len), 0);
		chmod(b, 0600);
	}
	free(data);
	free(a);
	free(b);
}

/* A second state directory with the files of f->state as they are now (pool open). */
static char *snapshot(struct pool_fx *f)
{
	char *snap = tu_path(f->dir, "snap");

	assert_int_equal(mkdir(snap, 0700), 0);
	copy_file(f->state, snap, "pool.db");
	copy_file(f->state, snap, "pool.db-wal");
	copy_file(f->state, snap, "pool.id");
	return snap;
}

static int open_dir(struct pool_fx *f, const char *dir)
{
	struct ibvf_pool_opts o = {
		.state_dir = dir,
		.ranges = ranges,
		.n_ranges = 1,
		.quarantine_s = 60,
		.now_ms = fx_clock,
		.now_arg = &f->now,
	};

	ibvf_pool_close(f->p);
	f->p = NULL;
	return ibvf_pool_open(&o, &f->p, f->err, sizeof(f->err));
}

static size_t count_records(struct pool_fx *f)
{
	struct ibvf_pool_stats st;

	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	return (size_t)(st.allocated + st.quarantined);
}

static void expect_lost(struct pool_fx *f, const char *frag)
{
	char why[IBVF_ERR_LEN];
	uint64_t g;

	assert_true(ibvf_pool_lost(f->p, why, sizeof(why)));
	assert_contains(why, frag);
	assert_int_equal(fx_alloc(f, "after-loss", 0, &g), -ESTALE);
	assert_contains(f->err, "ibvfctl pool rebuild");
}

/* pool.db (+ WAL) deleted between two lifetimes: detected, kept, rebuilt. */
static void test_deleted_store(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_alloc a = {.vf_index = 2};
	uint64_t g[3], n;

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	for (int i = 0; i < 3; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "c%d", i);
		g[i] = fx_alloc_ok(f, cid);
	}
	ibvf_pool_close(f->p);
	f->p = NULL;
	rm_store(f->state);
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	expect_lost(f, "deleted, moved aside or replaced");
	/* the mark is in the (new) store: a restart does not forget it */
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	expect_lost(f, "deleted, moved aside or replaced");

	/* rebuild: adopt what is in use (here: one VF carries g[1]), then clear */
	a.guid = g[1];
	fx_owner(&a.owner, IBVF_POOL_ADOPTED_PREFIX "0200000000000002", "adopted");
	snprintf(a.pci, sizeof(a.pci), "0000:03:00.3");
	assert_int_equal(ibvf_pool_adopt(f->p, &a, f->err, sizeof(f->err)), 0);
	assert_int_equal(ibvf_pool_adopt(f->p, &a, f->err, sizeof(f->err)), 1);
	assert_int_equal(ibvf_pool_rebuilt(f->p, f->err, sizeof(f->err)), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	for (int i = 0; i < 3; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "d%d", i);
		n = fx_alloc_ok(f, cid);
		assert_true(n != g[1]);
	}
	{
		struct ibvf_alloc got;

		assert_int_equal(ibvf_pool_get(f->p, g[1], &got, f->err, sizeof(f->err)), 0);
		assert_int_equal(got.state, IBVF_ALLOC_HANDED);
		assert_string_equal(got.pci, "0000:03:00.3");
	}
}

/* An older copy of the store put back (same identity, older generation). */
static void test_rolled_back_store(void **state)
{
	struct pool_fx *f = *state;
	char *old;
	size_t len = 0;

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	fx_alloc_ok(f, "a");
	fx_alloc_ok(f, "b");
	ibvf_pool_close(f->p); /* checkpoints: pool.db is whole */
	f->p = NULL;
	old = tu_read_file(f->db, &len);
	assert_non_null(old);
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	fx_alloc_ok(f, "c");
	fx_alloc_ok(f, "d");
	ibvf_pool_close(f->p);
	f->p = NULL;
	rm_store(f->state);
	assert_int_equal(tu_write_file(f->db, old, len), 0);
	chmod(f->db, 0600);
	free(old);
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	expect_lost(f, "committed write(s) are missing");
}

/* Damage the WAL of a snapshot taken while the pool is open, as in the issue. */
static void damage_wal(const char *snap, int how)
{
	char *wal = state_file(snap, "pool.db-wal"), *data;
	size_t len = 0;

	data = tu_read_file(wal, &len);
	assert_non_null(data);
	assert_true(len > 32 + 3 * (4096 + 24));
	switch (how) {
	case 0: /* truncated in the middle */
		len = len / 2;
		break;
	case 1: /* frame data of a late frame damaged */
		data[len - 2000] ^= 0x5a;
		break;
	case 2: /* frame header of the second frame damaged */
		data[32 + 4096 + 24 + 9] ^= 0xff;
		break;
	}
	assert_int_equal(tu_write_file(wal, data, len), 0);
	free(data);
	free(wal);
}

static void test_damaged_wal(void **state)
{
	struct pool_fx *f = *state;

	for (int how = 0; how < 3; how++) {
		char *snap, cid[32];

		assert_int_equal(fx_open(f, ranges, 1, 60), 0);
		for (int i = 0; i < 20; i++) {
			snprintf(cid, sizeof(cid), "w%d-%d", how, i);
			fx_alloc_ok(f, cid);
		}
		snap = snapshot(f);
		damage_wal(snap, how);
		assert_int_equal(open_dir(f, snap), 0);
		if (!ibvf_pool_lost(f->p, NULL, 0))
			fail_msg("WAL damage %d not detected (%zu records read)", how,
				 count_records(f));
		expect_lost(f, "committed write(s) are missing");
		ibvf_pool_close(f->p);
		f->p = NULL;
		tu_rmrf(snap); /* frees it */
	}
}

/* After ibvf_pool_checkpoint() a destroyed WAL loses nothing. */
static void test_checkpoint_keeps_records(void **state)
{
	struct pool_fx *f = *state;
	char *snap, *wal, cid[32];
	size_t n;

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	for (int i = 0; i < 20; i++) {
		snprintf(cid, sizeof(cid), "k%d", i);
		fx_alloc_ok(f, cid);
	}
	assert_int_equal(ibvf_pool_checkpoint(f->p, f->err, sizeof(f->err)), 0);
	n = count_records(f);
	snap = snapshot(f);
	wal = state_file(snap, "pool.db-wal");
	assert_int_equal(tu_write_str(wal, "garbage garbage garbage garbage garbage"), 0);
	free(wal);
	assert_int_equal(open_dir(f, snap), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	assert_int_equal(count_records(f), n);
	tu_rmrf(snap); /* frees it */
}

/* A damaged pool.id is a loss too (nothing left to compare with). */
static void test_damaged_id_file(void **state)
{
	struct pool_fx *f = *state;
	char *id = state_file(f->state, IBVF_POOL_ID_NAME);

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	fx_alloc_ok(f, "a");
	ibvf_pool_close(f->p);
	f->p = NULL;
	assert_int_equal(tu_write_str(id, "ibvf-pool-id 1\nid zz\n"), 0);
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	expect_lost(f, "damaged");
	free(id);
}

/* A store that matches its pool.id opens as usual; a new state dir too. */
static void test_healthy_not_lost(void **state)
{
	struct pool_fx *f = *state;

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	fx_alloc_ok(f, "a");
	assert_int_equal(fx_open(f, ranges, 1, 60), 0); /* close + open */
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	fx_alloc_ok(f, "b");
	/* and once more, with records in the WAL */
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
}

/* GUIDs other views show in use are skipped and refused. */
static void test_in_use_skipped(void **state)
{
	struct pool_fx *f = *state;
	uint64_t vf[] = {START, START + 1, 0x0100000000000000ull}, sm[] = {START + 3}, g;

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	assert_int_equal(ibvf_pool_set_in_use(f->p, IBVF_VIEW_VF, vf, 3), 0);
	assert_int_equal(ibvf_pool_set_in_use(f->p, IBVF_VIEW_SM, sm, 1), 0);
	assert_int_equal(fx_alloc_ok(f, "a"), START + 2);
	assert_int_equal(fx_alloc_ok(f, "b"), START + 4);
	assert_int_equal(fx_alloc(f, "c", START + 1, &g), -EEXIST);
	assert_contains(f->err, "on a VF");
	assert_int_equal(fx_alloc(f, "c", START + 3, &g), -EEXIST);
	assert_contains(f->err, "SM");
	/* the views changed: free again */
	assert_int_equal(ibvf_pool_set_in_use(f->p, IBVF_VIEW_VF, NULL, 0), 0);
	assert_int_equal(fx_alloc_ok(f, "d"), START);
}

/*
 * pool.id removed or replaced, or pool.db removed or replaced, while the pool
 * is open (ibvfd running): noticed at the next write or periodic checkpoint,
 * the store is marked lost (status not ready, reason store), nothing is
 * allocated, and the mark survives a restart.
 */
static void while_open(struct pool_fx *f, int how)
{
	char *id = state_file(f->state, IBVF_POOL_ID_NAME), *tmp = state_file(f->state, "x");
	uint64_t g;
	struct ibvf_pool_health h;

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	fx_alloc_ok(f, "a");
	fx_alloc_ok(f, "b");
	switch (how) {
	case 0: /* pool.id deleted */
		assert_int_equal(unlink(id), 0);
		break;
	case 1: /* pool.id replaced: a copy of it is fine, another store's is not */
		copy_file(f->state, f->dir, IBVF_POOL_ID_NAME);
		assert_int_equal(unlink(id), 0);
		copy_file(f->dir, f->state, IBVF_POOL_ID_NAME);
		assert_true(ibvf_pool_checkpoint(f->p, f->err, sizeof(f->err)) >= 0);
		assert_false(ibvf_pool_lost(f->p, NULL, 0));
		fx_alloc_ok(f, "c1");
		assert_int_equal(unlink(id), 0);
		assert_int_equal(
			tu_write_str(id, "ibvf-pool-id 1\nid 0123456789abcdef0123456789abcdef\n"
					 "generation 00000000000000000001\n"),
			0);
		break;
	case 2: /* pool.db deleted */
		rm_store(f->state);
		break;
	case 3: /* pool.db moved aside and a copy put in its place */
		copy_file(f->state, f->dir, "pool.db");
		assert_int_equal(rename(f->db, tmp), 0);
		copy_file(f->dir, f->state, "pool.db");
		break;
	}
	if (how % 2) {
		/* noticed by the periodic checkpoint, before any write */
		assert_true(ibvf_pool_checkpoint(f->p, f->err, sizeof(f->err)) >= 0);
		assert_true(ibvf_pool_lost(f->p, NULL, 0));
	} else {
		/* noticed by the next write: that one still commits, the one after is refused */
		assert_int_equal(fx_alloc(f, "c", 0, &g), 0);
	}
	expect_lost(f, how < 2 ? "pool.id" : "pool.db");
	expect_lost(f, how == 0 || how == 2 ? "removed while ibvfd ran" : "replaced");
	if (how == 1)
		expect_lost(f, "does not name this store");
	ibvf_pool_health(f->p, &h);
	assert_true(h.lost);
	if (how < 2) {
		/* the store itself is whole: the restart still knows it is marked */
		assert_int_equal(fx_open(f, ranges, 1, 60), 0);
		expect_lost(f, "while ibvfd ran");
	}
	free(id);
	free(tmp);
}

static void test_id_removed_while_open(void **state)
{
	while_open(*state, 0);
}

static void test_id_replaced_while_open(void **state)
{
	while_open(*state, 1);
}

static void test_db_removed_while_open(void **state)
{
	while_open(*state, 2);
}

static void test_db_replaced_while_open(void **state)
{
	while_open(*state, 3);
}

static int open_ro(struct pool_fx *f)
{
	struct ibvf_guid_range r = ranges[0];
	struct ibvf_pool_opts o = {
		.state_dir = f->state,
		.ranges = &r,
		.n_ranges = 1,
		.quarantine_s = 60,
		.read_only = true,
	};

	ibvf_pool_close(f->p);
	f->p = NULL;
	return ibvf_pool_open(&o, &f->p, f->err, sizeof(f->err));
}

/*
 * A reader (ibvfctl's offline commands) is told about a rolled-back store or
 * one marked lost, not shown it as whole; a healthy store opens quietly.
 */
static void test_read_only_sees_loss(void **state)
{
	struct pool_fx *f = *state;
	char *old, why[IBVF_ERR_LEN];
	size_t len = 0;

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	fx_alloc_ok(f, "a");
	ibvf_pool_close(f->p);
	f->p = NULL;
	assert_int_equal(open_ro(f), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	ibvf_pool_close(f->p);
	f->p = NULL;
	old = tu_read_file(f->db, &len);
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	fx_alloc_ok(f, "b");
	ibvf_pool_close(f->p);
	f->p = NULL;
	rm_store(f->state);
	assert_int_equal(tu_write_file(f->db, old, len), 0);
	chmod(f->db, 0600);
	free(old);
	/* rolled back, found by the reader itself (no writer opened it since) */
	assert_int_equal(open_ro(f), 0);
	assert_true(ibvf_pool_lost(f->p, why, sizeof(why)));
	assert_contains(why, "committed write(s) are missing");
	/* marked by a writer: the reader reports the mark */
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	assert_true(ibvf_pool_lost(f->p, NULL, 0));
	assert_int_equal(open_ro(f), 0);
	assert_true(ibvf_pool_lost(f->p, why, sizeof(why)));
	assert_contains(why, "committed write(s) are missing");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_deleted_store),
		T(test_rolled_back_store),
		T(test_damaged_wal),
		T(test_checkpoint_keeps_records),
		T(test_damaged_id_file),
		T(test_healthy_not_lost),
		T(test_in_use_skipped),
		T(test_id_removed_while_open),
		T(test_id_replaced_while_open),
		T(test_db_removed_while_open),
		T(test_db_replaced_while_open),
		T(test_read_only_sees_loss),
	};

	return cmocka_run_group_tests_name("guid_pool_lost", tests, NULL, NULL);
}
