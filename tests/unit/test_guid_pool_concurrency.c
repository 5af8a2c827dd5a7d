// SPDX-License-Identifier: MIT
/*
 * Several processes allocating from one store at the same moment never get
 * the same GUID: on an existing store, and on a store that none of them has
 * created yet (all race to create it). Children start together on a
 * barrier (a pipe the parent closes) and report each GUID on a pipe.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "pool_fixture.h"

#define N_PROC	   4
#define N_EXPLICIT 10

static const struct ibvf_guid_range ranges[] = {{0x0200000000000001ull, 0x020000000000ffffull}};
/* explicit requests all children race for */
#define EXPLICIT_BASE 0x0200000000008000ull

struct report {
	uint64_t guid;
	char owner[32];
};

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(int fd, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (write(fd, line, (size_t)n) != n)
		_exit(3);
}

/*
 * One child: wait on @go, open the store, allocate @n_single one by one and
 * @n_batch batches of 5, and race for the explicit GUIDs when @explicit.
 */
static void __attribute__((noreturn))
child(const char *state_dir, int id, int go, int out, int n_single, int n_batch, bool explicit)
{
	struct ibvf_pool_opts o = {
		.state_dir = state_dir,
		.ranges = ranges,
		.n_ranges = 1,
		.quarantine_s = 60,
		.sync_full = id % 2 == 0,
	};
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN], c;
	int idx = 0;

	if (read(go, &c, 1) != 0)
		_exit(4);
	if (ibvf_pool_open(&o, &p, err, sizeof(err))) {
		say(out, "E open: %s\n", err);
		_exit(1);
	}
	for (int i = 0; i < n_single + n_batch; i++) {
		struct ibvf_alloc_request rq[5];
		struct ibvf_alloc a[5];
		int n = i < n_single ? 1 : 5;

		for (int k = 0; k < n; k++) {
			char cid[32];

			memset(&rq[k], 0, sizeof(rq[k]));
			snprintf(cid, sizeof(cid), "c%d-%d", id, idx + k);
			fx_owner(&rq[k].owner, cid, NULL);
			rq[k].vf_index = -1;
		}
		if (ibvf_pool_allocate_batch(p, rq, (size_t)n, a, err, sizeof(err))) {
			say(out, "E allocate: %s\n", err);
			_exit(1);
		}
		for (int k = 0; k < n; k++)
			say(out, "A %016llx c%d-%d\n", (unsigned long long)a[k].guid, id, idx + k);
		idx += n;
		/* interleave the explicit requests with the others */
		if (explicit && i < N_EXPLICIT) {
			struct ibvf_alloc_request x = {.vf_index = -1,
						       .guid = EXPLICIT_BASE + (uint64_t)i};
			char cid[32];
			int ret;

			snprintf(cid, sizeof(cid), "c%d-x%d", id, i);
			fx_owner(&x.owner, cid, NULL);
			ret = ibvf_pool_allocate(p, &x, a, err, sizeof(err));
			if (ret == 0)
				say(out, "A %016llx %s\n", (unsigned long long)a[0].guid, cid);
			else if (ret != -EEXIST) {
				say(out, "E explicit: %d %s\n", ret, err);
				_exit(1);
			}
		}
	}
	ibvf_pool_close(p);
	_exit(0);
}

/* Run N_PROC children on @state_dir at once; collect their reports into @r. */
static size_t run_children(const char *state_dir, int n_single, int n_batch, bool explicit,
			   struct report *r, size_t max)
{
	int go[2], out[2], st;
	pid_t pids[N_PROC];
	char *buf, *line;
	size_t len = 0, cap = 1 << 20, n = 0;
	ssize_t k;

	buf = malloc(cap);
	assert_non_null(buf);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(out), 0);
	for (int i = 0; i < N_PROC; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			close(go[1]);
			close(out[0]);
			child(state_dir, i, go[0], out[1], n_single, n_batch, explicit);
		}
	}
	close(go[0]);
	close(out[1]);
	close(go[1]); /* go! */
	while ((k = read(out[0], buf + len, cap - len - 1)) > 0)
		len += (size_t)k;
	buf[len] = 0;
	close(out[0]);
	for (int i = 0; i < N_PROC; i++) {
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			print_error("child %d: status %d\n%s\n", i, st, buf);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	for (line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long long g;

		if (line[0] == 'E') {
			print_error("child: %s\n", line);
			fail();
		}
		assert_true(n < max);
		assert_int_equal(sscanf(line, "A %llx %31s", &g, r[n].owner), 2);
		r[n++].guid = g;
	}
	free(buf);
	return n;
}

static int cmp_guid(const void *a, const void *b)
{
	const struct report *x = a, *y = b;

	return x->guid < y->guid ? -1 : x->guid > y->guid;
}

/* No GUID twice; the store holds exactly the reported GUIDs with their owners. */
static void check_reports(struct pool_fx *f, struct report *r, size_t n, size_t want)
{
	struct ibvf_pool_stats st;
	struct fx_findings fs;

	assert_int_equal(n, want);
	qsort(r, n, sizeof(*r), cmp_guid);
	for (size_t i = 1; i < n; i++) {
		if (r[i].guid == r[i - 1].guid)
			print_error("GUID %016llx given to %s and %s\n",
				    (unsigned long long)r[i].guid, r[i - 1].owner, r[i].owner);
		assert_true(r[i].guid != r[i - 1].guid);
	}
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_true(st.allocated == n && st.quarantined == 0);
	for (size_t i = 0; i < n; i++) {
		struct ibvf_alloc a;

		assert_int_equal(ibvf_pool_get(f->p, r[i].guid, &a, f->err, sizeof(f->err)), 0);
		assert_string_equal(a.owner.container_id, r[i].owner);
	}
	assert_int_equal(fx_audit(f, &fs), 0);
	assert_int_equal(fs.n, 0);
	ibvf_pool_close(f->p);
	f->p = NULL;
}

static void test_concurrent_allocations(void **state)
{
	struct pool_fx *f = *state;
	size_t max = N_PROC * (60 + 10 * 5 + N_EXPLICIT), n, won[N_EXPLICIT] = {0};
	struct report *r = calloc(max, sizeof(*r));

	assert_non_null(r);
	/* an existing store */
	assert_int_equal(fx_open(f, ranges, 1, 60), 0);
	ibvf_pool_close(f->p);
	f->p = NULL;
	n = run_children(f->state, 60, 10, true, r, max);
	/* each explicit GUID went to exactly one child */
	for (size_t i = 0; i < n; i++)
		if (r[i].guid >= EXPLICIT_BASE && r[i].guid < EXPLICIT_BASE + N_EXPLICIT)
			won[r[i].guid - EXPLICIT_BASE]++;
	for (int i = 0; i < N_EXPLICIT; i++)
		assert_int_equal(won[i], 1);
	check_reports(f, r, n, N_PROC * (60 + 10 * 5) + N_EXPLICIT);
	free(r);
}

/* All children race to create the store: still one store, no duplicate. */
static void test_concurrent_create(void **state)
{
	struct pool_fx *f = *state;
	struct report r[N_PROC * 10];

	for (int iter = 0; iter < 10; iter++) {
		size_t n;

		if (iter) {
			char *dir = f->dir;

			/* a fresh, not yet existing state directory each time */
			free(f->state);
			free(f->db);
			f->dir = tu_mkdtemp("pool");
			assert_non_null(f->dir);
			tu_rmrf(dir);
			f->state = tu_path(f->dir, "state");
			f->db = tu_path(f->state, IBVF_POOL_DB_NAME);
		}
		n = run_children(f->state, 10, 0, false, r, N_PROC * 10);
		check_reports(f, r, n, N_PROC * 10);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_concurrent_allocations, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_create, fx_setup, fx_teardown),
	};

	ibvf_log_init("test", IBVF_LOG_NONE, LOG_ERR);
	return cmocka_run_group_tests_name("guid_pool_concurrency", tests, NULL, NULL);
}
