// SPDX-License-Identifier: MIT
/*
 * A pool.db that is not a healthy ibvf store must give a clear error that
 * names the file, and must never be reset or changed: the test keeps a copy
 * of the bytes and compares them after every open attempt.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool_fixture.h"

static const struct ibvf_guid_range ranges[] = {{0x0200000000000001ull, 0x020000000000ffffull}};

/* Fill a real store with @n allocations (some released), then close it. */
static void make_store(struct pool_fx *f, size_t n)
{
	struct ibvf_alloc_request rq[100];
	struct ibvf_alloc out[100];

	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	for (size_t done = 0; done < n; done += 100) {
		for (size_t i = 0; i < 100; i++) {
			char cid[64];

			memset(&rq[i], 0, sizeof(rq[i]));
			snprintf(cid, sizeof(cid), "container-%06zu-with-a-long-id", done + i);
			fx_owner(&rq[i].owner, cid, NULL);
			rq[i].vf_index = -1;
		}
		assert_int_equal(
			ibvf_pool_allocate_batch(f->p, rq, 100, out, f->err, sizeof(f->err)), 0);
		assert_int_equal(fx_release(f, out[7].guid), 0);
	}
	ibvf_pool_close(f->p);
	f->p = NULL;
}

static void write_store(struct pool_fx *f, const void *data, size_t len)
{
	if (access(f->state, F_OK))
		assert_int_equal(mkdir(f->state, 0700), 0);
	assert_int_equal(tu_write_file(f->db, data, len), 0);
}

/*
 * Open read-write and read-only; both must fail with @want_ret and an error
 * holding the file name and @frag; the file must be byte-for-byte the same.
 */
static void expect_refused(struct pool_fx *f, int want_ret, const char *frag)
{
	size_t len0, len1;
	char *before = tu_read_file(f->db, &len0), *after;
	struct stat st0, st1;

	assert_non_null(before);
	assert_int_equal(stat(f->db, &st0), 0);
	for (int ro = 0; ro < 2; ro++) {
		int ret = fx_open_opts(f, ranges, 1, 60, ro, true);

		if (ret != want_ret)
			print_error("%s open: ret %d, want %d: %s\n",
				    ro ? "read-only" : "read-write", ret, want_ret, f->err);
		assert_int_equal(ret, want_ret);
		assert_null(f->p);
		assert_contains(f->err, f->db);
		assert_contains(f->err, frag);
		after = tu_read_file(f->db, &len1);
		assert_non_null(after);
		assert_int_equal(len0, len1);
		assert_memory_equal(before, after, len0);
		free(after);
		assert_int_equal(stat(f->db, &st1), 0);
		assert_true(st0.st_ino == st1.st_ino); /* not replaced either */
	}
	free(before);
}

static void test_zero_byte_store(void **state)
{
	struct pool_fx *f = *state;

	write_store(f, "", 0);
	expect_refused(f, -EIO, "is not a usable ibvf GUID pool (no ibvf schema version)");
	assert_contains(f->err, "left untouched");
}

static void test_random_bytes_store(void **state)
{
	struct pool_fx *f = *state;
	unsigned char buf[65536];
	uint32_t x = 2463534242u;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (unsigned char)x;
	}
	write_store(f, buf, sizeof(buf));
	expect_refused(f, -EIO, "is not a usable ibvf GUID pool");
}

static void test_text_file_store(void **state)
{
	struct pool_fx *f = *state;
	static const char txt[] = "guid,owner\n02:00:00:00:00:00:00:01,abc\n";

	write_store(f, txt, sizeof(txt) - 1);
	expect_refused(f, -EIO, "is not a usable ibvf GUID pool");
}

static void test_foreign_sqlite_store(void **state)
{
	struct pool_fx *f = *state;

	assert_int_equal(mkdir(f->state, 0700), 0);
	/* another program's database (no user_version) */
	fx_sql(f, "CREATE TABLE foo(a, b); INSERT INTO foo VALUES(1, 2);");
	expect_refused(f, -EIO, "no ibvf schema version");
	/* one with a version number but not our tables */
	fx_sql(f, "PRAGMA user_version = 1;");
	expect_refused(f, -EIO, "tables missing");
	/* one with our table names but WAL mode and other content */
	fx_sql(f, "PRAGMA journal_mode = WAL; CREATE TABLE meta(x); CREATE TABLE alloc(y);");
	expect_refused(f, -EIO, "tables missing");
}

static void test_newer_schema_store(void **state)
{
	struct pool_fx *f = *state;

	make_store(f, 200);
	fx_sql(f, "PRAGMA user_version = 4;");
	expect_refused(f, -EPROTO, "has schema version 4, newer than this ibvf (3): upgrade ibvf");
}

/* A store cut off in the middle (a half-written copy, a full disk). */
static void test_truncated_store(void **state)
{
	struct pool_fx *f = *state;
	size_t len = 0;
	char *data;

	make_store(f, 3000);
	data = tu_read_file(f->db, &len);
	assert_non_null(data);
	assert_true(len > 65536);
	assert_int_equal(tu_write_file(f->db, data, len / 2), 0);
	free(data);
	expect_refused(f, -EIO, "is not a usable ibvf GUID pool");
}

/* Just the first pages: the header and schema survive, the tables do not. */
static void test_truncated_after_header(void **state)
{
	struct pool_fx *f = *state;
	size_t len = 0;
	char *data;

	make_store(f, 3000);
	data = tu_read_file(f->db, &len);
	assert_non_null(data);
	assert_int_equal(tu_write_file(f->db, data, 8192), 0);
	free(data);
	expect_refused(f, -EIO, "is not a usable ibvf GUID pool");
}

/* Garbage over one page in the middle (a torn write). */
static void test_overwritten_page_store(void **state)
{
	struct pool_fx *f = *state;
	size_t len = 0;
	char *data;

	make_store(f, 3000);
	data = tu_read_file(f->db, &len);
	assert_non_null(data);
	memset(data + (len / 2 / 4096) * 4096, 0xa5, 4096);
	assert_int_equal(tu_write_file(f->db, data, len), 0);
	free(data);
	expect_refused(f, -EIO, "is not a usable ibvf GUID pool");
}

/* pool.db as a symlink is refused (never followed to a file elsewhere). */
static void test_symlinked_store(void **state)
{
	struct pool_fx *f = *state;
	char *target = tu_path(f->dir, "elsewhere.db");
	size_t len = 0;
	char *data;

	make_store(f, 100);
	assert_int_equal(rename(f->db, target), 0);
	assert_int_equal(symlink(target, f->db), 0);
	data = tu_read_file(target, &len);
	for (int ro = 0; ro < 2; ro++) {
		char *after;
		size_t len2;

		assert_true(fx_open_opts(f, ranges, 1, 60, ro, true) < 0);
		assert_contains(f->err, f->db);
		after = tu_read_file(target, &len2);
		assert_int_equal(len, len2);
		assert_memory_equal(data, after, len);
		free(after);
	}
	free(data);
	free(target);
}

/*
 * pool.db, or one of SQLite's companion files, that is not a regular file: a
 * FIFO (a read-only open used to block for ever in open(2)), a directory, a
 * socket-like leftover, a dangling symlink. Each open must fail at once,
 * name the file and its type, and leave the rest as it was. The opens run
 * under alarm() so a regression fails instead of hanging the suite.
 */
static void expect_special_refused(struct pool_fx *f, const char *file, const char *type)
{
	for (int ro = 0; ro < 2; ro++) {
		int ret;

		alarm(20);
		ret = fx_open_opts(f, ranges, 1, 60, ro, true);
		alarm(0);
		if (ret != -EIO)
			print_error("%s: %s open: ret %d: %s\n", file,
				    ro ? "read-only" : "read-write", ret, f->err);
		assert_int_equal(ret, -EIO);
		assert_null(f->p);
		assert_contains(f->err, file);
		assert_contains(f->err, type);
		assert_contains(f->err, "not a regular file");
	}
}

static void test_special_file_store(void **state)
{
	struct pool_fx *f = *state;
	static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
	char *target = tu_path(f->dir, "gone.db");

	make_store(f, 100);
	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		char path[PATH_MAX + 16], keep[PATH_MAX + 32];

		snprintf(path, sizeof(path), "%s%s", f->db, sfx[i]);
		snprintf(keep, sizeof(keep), "%s.keep", f->db);
		if (!i)
			assert_int_equal(rename(f->db, keep), 0);
		assert_int_equal(mkfifo(path, 0600), 0);
		expect_special_refused(f, path, "a FIFO");
		assert_int_equal(unlink(path), 0);
		assert_int_equal(mkdir(path, 0700), 0);
		expect_special_refused(f, path, "a directory");
		assert_int_equal(rmdir(path), 0);
		assert_int_equal(symlink(target, path), 0); /* dangling */
		expect_special_refused(f, path, "a symbolic link");
		assert_int_equal(unlink(path), 0);
		if (!i)
			assert_int_equal(rename(keep, f->db), 0);
	}
	/* nothing was created in place of the special files, and the store is whole */
	assert_int_equal(fx_open_opts(f, ranges, 1, 60, true, true), 0);
	free(target);
}

/* The healthy store used by the corruption tests does open (the tests are not vacuous). */
static void test_healthy_store_opens(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_pool_stats st;
	struct fx_findings fs;

	make_store(f, 3000);
	assert_int_equal(fx_open_opts(f, ranges, 1, 60, true, true), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.allocated == 2970 && st.quarantined == 30);
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	assert_int_equal(fx_audit(f, &fs), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_healthy_store_opens),	T(test_zero_byte_store),
		T(test_random_bytes_store),	T(test_text_file_store),
		T(test_foreign_sqlite_store),	T(test_newer_schema_store),
		T(test_truncated_store),	T(test_truncated_after_header),
		T(test_overwritten_page_store), T(test_symlinked_store),
		T(test_special_file_store),
	};

	return cmocka_run_group_tests_name("guid_pool_corrupt", tests, NULL, NULL);
}
