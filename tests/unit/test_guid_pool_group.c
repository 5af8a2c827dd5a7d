// SPDX-License-Identifier: MIT
/*
 * Group commit of the GUID pool with sync "full" (issue 17): concurrent
 * writes share a transaction and one fdatasync() of the WAL, and none is
 * acknowledged before the fdatasync() that covers it succeeded.
 *
 * The sync seam (ibvf_pool_opts.sync_fault) stands in for fdatasync(): it
 * counts the calls and can hold them at a gate until the test gives a
 * verdict, so the test sees which writes returned while their group was not
 * yet on disk (none may have), and what a failed fdatasync() or COMMIT does
 * to every write of its group.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "pool_fixture.h"

static const struct ibvf_guid_range ranges[] = {{0x0200000000000001ull, 0x020000000000ffffull}};
#define G0 0x0200000000000001ull

/* The seams' state: a gate for fdatasync() calls, and a COMMIT fault. */
struct seam {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool hold;	/* fdatasync() calls wait for a verdict */
	int verdict;	/* for the held call: 0 or a negative errno */
	bool given;	/* @verdict is set for the call at the gate */
	int at_gate;	/* calls waiting at the gate */
	int syncs;	/* fdatasync() calls so far */
	int commit_err; /* write_fault: returned at each COMMIT */
	int delay_us;	/* each fdatasync() takes this long (a slow disk) */
};

static struct seam sm = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static int sync_seam(void *arg)
{
	struct seam *s = arg;
	int v = 0;

	pthread_mutex_lock(&s->mu);
	s->syncs++;
	if (s->hold) {
		s->at_gate++;
		pthread_cond_broadcast(&s->cv);
		while (!s->given)
			pthread_cond_wait(&s->cv, &s->mu);
		s->given = false;
		s->at_gate--;
		v = s->verdict;
	}
	pthread_mutex_unlock(&s->mu);
	if (s->delay_us)
		usleep((useconds_t)s->delay_us);
	return v;
}

static int commit_seam(void *arg)
{
	struct seam *s = arg;
	int v;

	pthread_mutex_lock(&s->mu);
	v = s->commit_err;
	pthread_mutex_unlock(&s->mu);
	return v;
}

static void seam_reset(void)
{
	pthread_mutex_lock(&sm.mu);
	sm.hold = sm.given = false;
	sm.verdict = sm.at_gate = sm.syncs = sm.commit_err = sm.delay_us = 0;
	pthread_mutex_unlock(&sm.mu);
}

/*
 * Wait (at most 10 s) until @n calls are at the gate, or @w (optional) has
 * returned: a write acknowledged without its fdatasync().
 */
static void wait_at_gate(int n, const bool *w)
{
	int at = 0;

	for (int i = 0; i < 1000; i++) {
		bool returned;

		pthread_mutex_lock(&sm.mu);
		at = sm.at_gate;
		returned = w && *w;
		pthread_mutex_unlock(&sm.mu);
		if (at == n || returned)
			break;
		usleep(10000);
	}
	assert_false(w && *w);
	assert_int_equal(at, n);
}

/* Let the call at the gate go with @verdict. */
static void give(int verdict)
{
	pthread_mutex_lock(&sm.mu);
	sm.verdict = verdict;
	sm.given = true;
	pthread_cond_broadcast(&sm.cv);
	pthread_mutex_unlock(&sm.mu);
}

static int syncs(void)
{
	int n;

	pthread_mutex_lock(&sm.mu);
	n = sm.syncs;
	pthread_mutex_unlock(&sm.mu);
	return n;
}

/* The generation pool.id records (issue 14: the store's identity outside it). */
static unsigned long long id_generation(struct pool_fx *f)
{
	char *path = tu_path(f->state, IBVF_POOL_ID_NAME), buf[256] = "", id[64];
	unsigned long long g = 0;
	FILE *fp = fopen(path, "r");

	assert_non_null(fp);
	assert_true(fread(buf, 1, sizeof(buf) - 1, fp) > 0);
	fclose(fp);
	free(path);
	assert_int_equal(sscanf(buf, "ibvf-pool-id 1 id %63s generation %llu", id, &g), 2);
	return g;
}

static int open_seams(struct pool_fx *f, bool sync_full)
{
	struct ibvf_pool_opts o = {
		.state_dir = f->state,
		.ranges = ranges,
		.n_ranges = 1,
		.quarantine_s = 60,
		.sync_full = sync_full,
		.now_ms = fx_clock,
		.now_arg = &f->now,
		.write_fault = commit_seam,
		.sync_fault = sync_seam,
		.fault_arg = &sm,
	};

	ibvf_pool_close(f->p);
	f->p = NULL;
	return ibvf_pool_open(&o, &f->p, f->err, sizeof(f->err));
}

static int open_full(struct pool_fx *f)
{
	return open_seams(f, true);
}

/* One allocating thread; @done is set (under sm.mu) when its call returned. */
struct writer {
	struct ibvf_pool *p;
	char owner[32];
	pthread_t t;
	bool done;
	int ret;
	uint64_t guid;
	char err[IBVF_ERR_LEN];
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a;
	int ret;

	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "%s", w->owner);
	snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
	ret = ibvf_pool_allocate(w->p, &rq, &a, w->err, sizeof(w->err));
	pthread_mutex_lock(&sm.mu);
	w->ret = ret;
	w->guid = ret ? 0 : a.guid;
	w->done = true;
	pthread_mutex_unlock(&sm.mu);
	return NULL;
}

static void start(struct writer *w, struct ibvf_pool *p, const char *prefix, int i)
{
	memset(w, 0, sizeof(*w));
	w->p = p;
	snprintf(w->owner, sizeof(w->owner), "%s%d", prefix, i);
	assert_int_equal(pthread_create(&w->t, NULL, writer_main, w), 0);
}

static int n_done(struct writer *w, int n)
{
	int d = 0;

	pthread_mutex_lock(&sm.mu);
	for (int i = 0; i < n; i++)
		d += w[i].done;
	pthread_mutex_unlock(&sm.mu);
	return d;
}

#define N_GROUP 16

/*
 * Writer "a" leads: its group is at the (held) fdatasync(). 16 writers that
 * come meanwhile all run and then wait as one group: none returns while its
 * fdatasync() is held, they share one fdatasync(), and when it fails every
 * one of them fails; "a" succeeds when its own does.
 */
static void test_not_acknowledged_before_durable(void **state)
{
	struct pool_fx *f = *state;
	struct writer a, b[N_GROUP], c;
	struct ibvf_pool_health h;
	struct ibvf_alloc rec;
	unsigned long long gen0;

	seam_reset();
	assert_int_equal(open_full(f), 0);
	assert_int_equal(syncs(), 0); /* the open's own writes: synchronous=FULL */
	gen0 = id_generation(f);
	pthread_mutex_lock(&sm.mu);
	sm.hold = true;
	pthread_mutex_unlock(&sm.mu);

	start(&a, f->p, "a", 0);
	wait_at_gate(1, &a.done);
	for (int i = 0; i < N_GROUP; i++)
		start(&b[i], f->p, "b", i);
	usleep(300000); /* they run their SQL now: the pool's mutex is free */
	assert_int_equal(n_done(&a, 1), 0);
	assert_int_equal(n_done(b, N_GROUP), 0);
	/* pool.id never names a generation that is not on disk yet (a power loss
	 * would make the store look lost) */
	assert_int_equal(id_generation(f), gen0);

	give(0);	       /* a's fdatasync() succeeds */
	wait_at_gate(1, NULL); /* the next leader: one fdatasync() for all 16 */
	pthread_join(a.t, NULL);
	assert_int_equal(a.ret, 0);
	assert_int_equal(a.guid, G0);
	assert_int_equal(id_generation(f), gen0 + 1); /* a's group, durable now */
	usleep(100000);
	assert_int_equal(n_done(b, N_GROUP), 0);
	assert_int_equal(syncs(), 2);

	give(-EIO); /* and it fails */
	for (int i = 0; i < N_GROUP; i++) {
		pthread_join(b[i].t, NULL);
		assert_int_equal(b[i].ret, -EIO);
		assert_non_null(strstr(b[i].err, "fdatasync"));
	}
	assert_int_equal(syncs(), 2);
	assert_int_equal(id_generation(f), gen0 + 1); /* the failed group's is not */
	ibvf_pool_health(f->p, &h);
	assert_int_equal(h.last_write_result, -EIO);
	assert_int_equal(h.write_failures, N_GROUP);

	/* the next write is durable again (through a checkpoint) */
	pthread_mutex_lock(&sm.mu);
	sm.hold = false;
	pthread_mutex_unlock(&sm.mu);
	start(&c, f->p, "c", 0);
	pthread_join(c.t, NULL);
	assert_int_equal(c.ret, 0);
	ibvf_pool_health(f->p, &h);
	assert_int_equal(h.last_write_result, 0);
	assert_int_equal(ibvf_pool_find_owner(f->p, "c0", "net1", &rec, NULL, 0), 0);
}

/*
 * A COMMIT that fails fails the whole group, and rolls it back: none of
 * its writes is acknowledged, none is in the store, no GUID is used up.
 */
static void test_failed_commit_fails_group(void **state)
{
	struct pool_fx *f = *state;
	struct writer a, b[N_GROUP], c;
	struct ibvf_alloc rec;

	seam_reset();
	assert_int_equal(open_full(f), 0);
	pthread_mutex_lock(&sm.mu);
	sm.hold = true;
	pthread_mutex_unlock(&sm.mu);
	start(&a, f->p, "a", 0);
	wait_at_gate(1, &a.done);
	for (int i = 0; i < N_GROUP; i++)
		start(&b[i], f->p, "b", i);
	usleep(300000);
	assert_int_equal(n_done(b, N_GROUP), 0);
	pthread_mutex_lock(&sm.mu);
	sm.commit_err = -ENOSPC; /* the group's COMMIT fails */
	sm.hold = false;
	pthread_mutex_unlock(&sm.mu);
	give(0);
	pthread_join(a.t, NULL);
	assert_int_equal(a.ret, 0);
	for (int i = 0; i < N_GROUP; i++) {
		pthread_join(b[i].t, NULL);
		assert_int_equal(b[i].ret, -EIO);
		assert_non_null(strstr(b[i].err, "(injected)"));
		assert_int_equal(ibvf_pool_find_owner(f->p, b[i].owner, "net1", &rec, NULL, 0),
				 -ENOENT);
	}
	pthread_mutex_lock(&sm.mu);
	sm.commit_err = 0;
	pthread_mutex_unlock(&sm.mu);
	start(&c, f->p, "c", 0);
	pthread_join(c.t, NULL);
	assert_int_equal(c.ret, 0);
	assert_int_equal(c.guid, G0 + 1);
}

#define N_THREADS 32
#define N_EACH	  40

struct churn {
	struct ibvf_pool *p;
	int id;
	int failures;
	uint64_t got[N_EACH];
};

/* Allocate, move through the attach states, release half of them again. */
static void *churn_main(void *arg)
{
	struct churn *c = arg;
	char err[IBVF_ERR_LEN];

	for (int i = 0; i < N_EACH; i++) {
		struct ibvf_alloc_request rq = {.vf_index = -1};
		struct ibvf_alloc a, r;

		snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "t%d-%d", c->id, i);
		snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
		if (ibvf_pool_allocate(c->p, &rq, &a, err, sizeof(err))) {
			c->failures++;
			continue;
		}
		c->got[i] = a.guid;
		a.state = IBVF_ALLOC_SM_REQUESTED;
		c->failures += ibvf_pool_update(c->p, &a, err, sizeof(err)) != 0;
		c->failures += ibvf_pool_get(c->p, a.guid, &r, err, sizeof(err)) != 0;
		c->failures += r.state != IBVF_ALLOC_SM_REQUESTED;
		a.state = IBVF_ALLOC_PORT_READY;
		c->failures += ibvf_pool_update(c->p, &a, err, sizeof(err)) != 0;
		if (i % 2)
			c->failures += ibvf_pool_release(c->p, a.guid, err, sizeof(err)) != 0;
	}
	return NULL;
}

static int count_findings(void *arg, const struct ibvf_audit_finding *fd)
{
	(void)fd;
	++*(int *)arg;
	return 0;
}

/* A list callback that writes (nested call) while other threads write. */
static int touch_cb(void *arg, const struct ibvf_alloc *a)
{
	struct ibvf_pool *p = arg;
	struct ibvf_alloc b = *a;

	if (b.state != IBVF_ALLOC_PORT_READY)
		return 0;
	b.state = IBVF_ALLOC_HANDED;
	return ibvf_pool_update(p, &b, NULL, 0) ? 1 : 0;
}

/*
 * 32 threads write at once (allocate, two updates, reads, release): every
 * call succeeds, no GUID is handed out twice, fdatasync() calls are shared
 * (a slow disk: 2 ms each), and a reopened store has every write.
 */
static void test_concurrent_writers(void **state)
{
	struct pool_fx *f = *state;
	static struct churn c[N_THREADS];
	pthread_t t[N_THREADS];
	struct ibvf_pool_stats st;
	int n_writes = 0, findings = 0, s;

	seam_reset();
	pthread_mutex_lock(&sm.mu);
	sm.delay_us = 2000;
	pthread_mutex_unlock(&sm.mu);
	assert_int_equal(open_full(f), 0);
	for (int i = 0; i < N_THREADS; i++) {
		c[i] = (struct churn){.p = f->p, .id = i};
		assert_int_equal(pthread_create(&t[i], NULL, churn_main, &c[i]), 0);
	}
	/* meanwhile: nested writes from a list callback */
	for (int k = 0; k < 5; k++)
		assert_true(ibvf_pool_list(f->p, NULL, touch_cb, f->p, f->err, sizeof(f->err)) >=
			    0);
	for (int i = 0; i < N_THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(c[i].failures, 0);
		n_writes += N_EACH * 3 + N_EACH / 2;
	}
	for (int i = 0; i < N_THREADS * N_EACH; i++)
		for (int j = i + 1; j < N_THREADS * N_EACH; j++)
			assert_true(c[i / N_EACH].got[i % N_EACH] != c[j / N_EACH].got[j % N_EACH]);
	s = syncs();
	print_message("%d writes, %d fdatasync() calls\n", n_writes, s);
	assert_true(s > 0);
	assert_true(s <= n_writes / 2);

	assert_int_equal(open_full(f), 0); /* closed and reopened */
	assert_int_equal(ibvf_pool_stats(f->p, &st, f->err, sizeof(f->err)), 0);
	assert_int_equal(st.allocated, N_THREADS * N_EACH / 2);
	assert_int_equal(st.quarantined, N_THREADS * N_EACH / 2);
	assert_int_equal(ibvf_pool_audit(f->p, count_findings, &findings, f->err, sizeof(f->err)),
			 0);
}

/* Without sync full nothing waits: no fdatasync() of ours, each call commits. */
static void test_normal_no_group_sync(void **state)
{
	struct pool_fx *f = *state;
	struct writer w;

	seam_reset();
	assert_int_equal(open_seams(f, false), 0);
	start(&w, f->p, "n", 0);
	pthread_join(w.t, NULL);
	assert_int_equal(w.ret, 0);
	assert_int_equal(syncs(), 0);
}

/*
 * Group commit with sync "normal" (issue 17): a write returns only after the
 * COMMIT of its group. The COMMIT seam holds writer "a"'s COMMIT: its call
 * does not return meanwhile; once let go it succeeds.
 */
static int held_commit_fd = -1; /* the child's pipe: 'G' when a COMMIT is held */
static int commits_seen, hold_commit_at;

static int hold_commit_seam(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&sm.mu);
	commits_seen++;
	if (hold_commit_at && commits_seen == hold_commit_at) {
		pthread_mutex_unlock(&sm.mu);
		if (held_commit_fd >= 0) {
			/* the crash test: say so, then hang in the COMMIT until killed */
			if (write(held_commit_fd, "G\n", 2) != 2)
				_exit(3);
			for (;;)
				pause();
		}
		return 0;
	}
	while (sm.hold)
		pthread_cond_wait(&sm.cv, &sm.mu);
	pthread_mutex_unlock(&sm.mu);
	return 0;
}

static int open_normal_seam(struct pool_fx *f)
{
	struct ibvf_pool_opts o = {
		.state_dir = f->state,
		.ranges = ranges,
		.n_ranges = 1,
		.quarantine_s = 60,
		.now_ms = fx_clock,
		.now_arg = &f->now,
		.write_fault = hold_commit_seam,
		.fault_arg = &sm,
	};

	ibvf_pool_close(f->p);
	f->p = NULL;
	return ibvf_pool_open(&o, &f->p, f->err, sizeof(f->err));
}

static void test_normal_ack_after_commit(void **state)
{
	struct pool_fx *f = *state;
	struct writer a;
	struct ibvf_alloc rec;
	int seen;

	seam_reset();
	hold_commit_at = 0;
	assert_int_equal(open_normal_seam(f), 0);
	pthread_mutex_lock(&sm.mu);
	commits_seen = 0;
	sm.hold = true;
	pthread_mutex_unlock(&sm.mu);
	start(&a, f->p, "a", 0);
	for (int i = 0; i < 1000; i++) { /* until a's COMMIT is at the seam (10 s at most) */
		pthread_mutex_lock(&sm.mu);
		seen = commits_seen;
		pthread_mutex_unlock(&sm.mu);
		if (seen)
			break;
		usleep(10000);
	}
	assert_int_equal(seen, 1);
	usleep(100000);
	assert_int_equal(n_done(&a, 1), 0); /* not acknowledged before its COMMIT */
	pthread_mutex_lock(&sm.mu);
	sm.hold = false;
	pthread_cond_broadcast(&sm.cv);
	pthread_mutex_unlock(&sm.mu);
	pthread_join(a.t, NULL);
	assert_int_equal(a.ret, 0);
	assert_int_equal(ibvf_pool_find_owner(f->p, "a0", "net1", &rec, NULL, 0), 0);
}

/*
 * Under a burst the calls queue on the pool's lock; the leader lets them
 * join its open group before it COMMITs (group_fill()), instead of each
 * committing alone (issue 17: ~1 COMMIT per write before, bench_pool -p).
 * Writer "a"'s COMMIT is held (it holds the lock); 15 writers queue behind
 * it; once "a" goes on, the 15 share far fewer COMMITs than 15 (at most 4:
 * a writer that reaches the lock late forms another group), each returns
 * only after its group's COMMIT, and every one is in the store.
 * (Without the fill: 15 COMMITs.)
 */
#define N_QUEUED 15

static void test_normal_burst_shares_commit(void **state)
{
	struct pool_fx *f = *state;
	struct writer a, b[N_QUEUED];
	struct ibvf_alloc rec;
	int seen = 0, after;

	seam_reset();
	hold_commit_at = 0;
	assert_int_equal(open_normal_seam(f), 0);
	pthread_mutex_lock(&sm.mu);
	commits_seen = 0;
	sm.hold = true;
	pthread_mutex_unlock(&sm.mu);
	start(&a, f->p, "a", 0);
	for (int i = 0; i < 1000 && !seen; i++) { /* a's COMMIT at the seam (10 s at most) */
		pthread_mutex_lock(&sm.mu);
		seen = commits_seen;
		pthread_mutex_unlock(&sm.mu);
		if (!seen)
			usleep(10000);
	}
	assert_int_equal(seen, 1);
	for (int i = 0; i < N_QUEUED; i++)
		start(&b[i], f->p, "q", i);
	usleep(200000); /* let them queue on the lock (a late one only forms one more group) */
	assert_int_equal(n_done(b, N_QUEUED), 0);
	pthread_mutex_lock(&sm.mu);
	sm.hold = false;
	pthread_cond_broadcast(&sm.cv);
	pthread_mutex_unlock(&sm.mu);
	pthread_join(a.t, NULL);
	assert_int_equal(a.ret, 0);
	for (int i = 0; i < N_QUEUED; i++) {
		char owner[32];

		pthread_join(b[i].t, NULL);
		assert_int_equal(b[i].ret, 0);
		snprintf(owner, sizeof(owner), "q%d", i);
		assert_int_equal(ibvf_pool_find_owner(f->p, owner, "net1", &rec, NULL, 0), 0);
	}
	pthread_mutex_lock(&sm.mu);
	after = commits_seen - 1;
	pthread_mutex_unlock(&sm.mu);
	print_message("%d queued writes: %d COMMITs\n", N_QUEUED, after);
	assert_true(after >= 1);
	assert_true(after <= 4);
}

/* Child of test_normal_crash_mid_commit: 16 writers; each acknowledged owner to @fd. */
struct ack_writer {
	struct ibvf_pool *p;
	int id, fd;
};

static void *ack_main(void *arg)
{
	struct ack_writer *w = arg;
	char line[64], err[IBVF_ERR_LEN];

	for (int i = 0;; i++) {
		struct ibvf_alloc_request rq = {.vf_index = -1};
		struct ibvf_alloc a;
		int n;

		snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "k%d-%d", w->id, i);
		snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
		if (ibvf_pool_allocate(w->p, &rq, &a, err, sizeof(err)))
			continue;
		a.state = IBVF_ALLOC_SM_REQUESTED; /* a second write, as an attach does */
		if (ibvf_pool_update(w->p, &a, err, sizeof(err)))
			continue;
		n = snprintf(line, sizeof(line), "%s\n", rq.owner.container_id);
		if (write(w->fd, line, (size_t)n) != n) /* < PIPE_BUF: one piece */
			_exit(4);
	}
	return NULL;
}

/*
 * kill -9 while a group's COMMIT is under way (the seam hangs in the 20th
 * COMMIT), 16 writers at once, sync "normal": every write acknowledged
 * before the kill (allocation and state write both returned) is in the
 * reopened store, in the state it was acknowledged with.
 */
static void test_normal_crash_mid_commit(void **state)
{
	struct pool_fx *f = *state;
	enum { W = 16 };
	int fds[2], st, acked = 0;
	static char buf[4 << 20];
	size_t len = 0;
	bool held = false;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		static struct ack_writer w[W];
		pthread_t t[W];

		close(fds[0]);
		held_commit_fd = fds[1];
		hold_commit_at = 20;
		commits_seen = 0;
		seam_reset();
		if (open_normal_seam(f))
			_exit(2);
		for (int i = 0; i < W; i++) {
			w[i] = (struct ack_writer){f->p, i, fds[1]};
			pthread_create(&t[i], NULL, ack_main, &w[i]);
		}
		for (;;)
			pause();
	}
	close(fds[1]);
	/* read until the child hangs in a COMMIT, then kill it there */
	while (!held && len < sizeof(buf) - 1) {
		ssize_t n = read(fds[0], buf + len, sizeof(buf) - 1 - len);

		assert_true(n > 0);
		buf[len + (size_t)n] = 0;
		held = strstr(buf + (len > 2 ? len - 2 : 0), "G\n") != NULL ||
		       strstr(buf, "G\n") != NULL;
		len += (size_t)n;
	}
	assert_true(held);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	for (;;) { /* acknowledgements written before the kill */
		ssize_t n = read(fds[0], buf + len, sizeof(buf) - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	close(fds[0]);
	hold_commit_at = 0;
	seam_reset();
	assert_int_equal(open_normal_seam(f), 0);
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		struct ibvf_alloc rec;

		if (!strcmp(line, "G"))
			continue;
		if (ibvf_pool_find_owner(f->p, line, "net1", &rec, NULL, 0))
			fail_msg("%s was acknowledged before the kill and is not in the store",
				 line);
		if (rec.state != IBVF_ALLOC_SM_REQUESTED)
			fail_msg("%s: state %d, acknowledged as sm_requested", line,
				 (int)rec.state);
		acked++;
	}
	print_message("%d acknowledged writes before the kill, all in the store\n", acked);
	assert_true(acked > 0);
}

/* ------------------------------------------------------- lazy writes -- */

/* One call on its own thread: a lazy or synced update, or a read. */
struct call {
	struct ibvf_pool *p;
	enum { C_UPDATE_LAZY, C_RELEASE_LAZY, C_UPDATE, C_GET } kind;
	struct ibvf_alloc a;
	pthread_t t;
	bool done;
	int ret;
};

static void *call_main(void *arg)
{
	struct call *c = arg;
	struct ibvf_alloc r;
	int ret = -1;

	switch (c->kind) {
	case C_UPDATE_LAZY:
		ret = ibvf_pool_update_lazy(c->p, &c->a, NULL, 0);
		break;
	case C_RELEASE_LAZY:
		ret = ibvf_pool_release_lazy(c->p, c->a.guid, NULL, 0);
		break;
	case C_UPDATE:
		ret = ibvf_pool_update(c->p, &c->a, NULL, 0);
		break;
	case C_GET:
		ret = ibvf_pool_get(c->p, c->a.guid, &r, NULL, 0);
		break;
	}
	pthread_mutex_lock(&sm.mu);
	c->ret = ret;
	c->done = true;
	pthread_mutex_unlock(&sm.mu);
	return NULL;
}

static void call_start(struct call *c, struct ibvf_pool *p, int kind, const struct ibvf_alloc *a)
{
	memset(c, 0, sizeof(*c));
	c->p = p;
	c->kind = kind;
	c->a = *a;
	assert_int_equal(pthread_create(&c->t, NULL, call_main, c), 0);
}

/* Wait (at most 10 s) for @c to return; false if it did not. */
static bool call_returned(struct call *c)
{
	for (int i = 0; i < 1000; i++) {
		bool d;

		pthread_mutex_lock(&sm.mu);
		d = c->done;
		pthread_mutex_unlock(&sm.mu);
		if (d)
			return true;
		usleep(10000);
	}
	return false;
}

/* Wait (at most 10 s) until the call at the gate took its verdict. */
static void wait_taken(void)
{
	for (int i = 0; i < 1000; i++) {
		bool g;

		pthread_mutex_lock(&sm.mu);
		g = sm.given;
		pthread_mutex_unlock(&sm.mu);
		if (!g)
			return;
		usleep(10000);
	}
	fail_msg("the verdict was not taken");
}

static void hold_syncs(bool on)
{
	pthread_mutex_lock(&sm.mu);
	sm.hold = on;
	pthread_mutex_unlock(&sm.mu);
}

/*
 * A lazy write (issue 17, docs/pool.md "Durability classes") returns while
 * the fdatasync() that makes it durable is still held at the gate (the pool's
 * syncer runs it, not the caller), and pool.id does not name its generation
 * yet; a read that comes meanwhile waits for that fdatasync(), as it would
 * for any write it may have seen. When the syncer's fdatasync() fails, the
 * next synced write (a checkpoint, after a failed fdatasync()) makes the
 * lazy write durable with its own: the WAL is append-only.
 */
static void test_lazy_write(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a, b, rec;
	struct ibvf_pool_health h;
	struct call lz, rd, w;
	unsigned long long gen0;

	seam_reset();
	assert_int_equal(open_full(f), 0);
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "lazy0");
	snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0);
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "lazy1");
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &b, f->err, sizeof(f->err)), 0);
	assert_int_equal(syncs(), 2);
	gen0 = id_generation(f);

	/* 1: the lazy write returns with its fdatasync() still at the gate */
	hold_syncs(true);
	a.state = IBVF_ALLOC_HANDED;
	call_start(&lz, f->p, C_UPDATE_LAZY, &a);
	assert_true(call_returned(&lz));
	pthread_join(lz.t, NULL);
	assert_int_equal(lz.ret, 0);
	wait_at_gate(1, NULL); /* the syncer's fdatasync() of it */
	assert_int_equal(id_generation(f), gen0);
	/* 2: a read of it waits for that fdatasync() */
	call_start(&rd, f->p, C_GET, &a);
	usleep(200000);
	pthread_mutex_lock(&sm.mu);
	assert_false(rd.done);
	pthread_mutex_unlock(&sm.mu);
	give(0);
	assert_true(call_returned(&rd));
	pthread_join(rd.t, NULL);
	assert_int_equal(rd.ret, 0);
	assert_int_equal(id_generation(f), gen0 + 1);
	assert_int_equal(ibvf_pool_get(f->p, a.guid, &rec, NULL, 0), 0);
	assert_int_equal(rec.state, IBVF_ALLOC_HANDED);

	/* 3: the syncer's fdatasync() fails: the next synced write covers the lazy one */
	call_start(&lz, f->p, C_RELEASE_LAZY, &a);
	assert_true(call_returned(&lz));
	pthread_join(lz.t, NULL);
	assert_int_equal(lz.ret, 0);
	wait_at_gate(1, NULL);
	b.state = IBVF_ALLOC_PORT_READY;
	call_start(&w, f->p, C_UPDATE, &b);
	give(-EIO); /* the lazy write's own fdatasync() */
	wait_taken();
	wait_at_gate(1, &w.done); /* the synced write's: a checkpoint now (a sync failed) */
	assert_int_equal(id_generation(f), gen0 + 1);
	give(0);
	assert_true(call_returned(&w));
	pthread_join(w.t, NULL);
	assert_int_equal(w.ret, 0);
	assert_int_equal(id_generation(f), gen0 + 3); /* both durable */
	ibvf_pool_health(f->p, &h);
	assert_true(h.write_failures >= 1); /* the failed fdatasync() is not hidden */
	hold_syncs(false);
	assert_int_equal(ibvf_pool_sync(f->p, f->err, sizeof(f->err)), 0);
	assert_int_equal(open_full(f), 0); /* closed and reopened */
	assert_int_equal(ibvf_pool_get(f->p, a.guid, &rec, NULL, 0), 0);
	assert_int_equal(rec.state, IBVF_ALLOC_QUARANTINED);
	assert_int_equal(ibvf_pool_get(f->p, b.guid, &rec, NULL, 0), 0);
	assert_int_equal(rec.state, IBVF_ALLOC_PORT_READY);
}

/*
 * A lazy write is still pending (its fdatasync() held at the gate, or the
 * syncer still lingering) when a synced write comes: the synced write
 * returns only once an fdatasync() that covers both has succeeded, so the
 * lazy write is durable when it returns (pool.id names the synced write's
 * generation, and nothing is left to sync). Every fdatasync() that reaches
 * the gate meanwhile is let go; the synced write must not return before.
 */
static void test_lazy_then_synced(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a, b;
	struct call lz, w;
	unsigned long long gen0;
	int before, given = 0;
	bool done = false;

	seam_reset();
	assert_int_equal(open_full(f), 0);
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "ls0");
	snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0);
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "ls1");
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &b, f->err, sizeof(f->err)), 0);
	gen0 = id_generation(f);
	hold_syncs(true);
	a.state = IBVF_ALLOC_HANDED;
	call_start(&lz, f->p, C_UPDATE_LAZY, &a);
	assert_true(call_returned(&lz));
	pthread_join(lz.t, NULL);
	assert_int_equal(lz.ret, 0);
	b.state = IBVF_ALLOC_PORT_READY;
	call_start(&w, f->p, C_UPDATE, &b);
	/* let each fdatasync() at the gate go (the syncer's, the synced write's) */
	for (int i = 0; i < 1000 && !done; i++) {
		int at;

		pthread_mutex_lock(&sm.mu);
		at = sm.at_gate;
		done = w.done;
		pthread_mutex_unlock(&sm.mu);
		if (at && !done) {
			give(0);
			wait_taken();
			given++;
		} else if (!done) {
			usleep(10000);
		}
	}
	assert_true(done);
	pthread_join(w.t, NULL);
	assert_int_equal(w.ret, 0);
	assert_true(given >= 1);		      /* it did not return without an fdatasync() */
	assert_int_equal(id_generation(f), gen0 + 2); /* both generations durable */
	before = syncs();
	hold_syncs(false);
	assert_int_equal(ibvf_pool_sync(f->p, f->err, sizeof(f->err)), 0);
	assert_int_equal(syncs(), before); /* nothing was left to sync */
}

/*
 * kill -9 after a lazy write returned, its fdatasync() never done (held at
 * the gate): the write is in the reopened store. The COMMIT put it in the
 * WAL in the kernel's page cache; only an OS crash could lose it.
 */
static void test_lazy_survives_kill(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_alloc rec;
	int fds[2], st;
	char c = 0;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ibvf_alloc_request rq = {.vf_index = -1};
		struct ibvf_alloc a;

		close(fds[0]);
		seam_reset();
		if (open_full(f))
			_exit(2);
		snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "k0");
		snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
		if (ibvf_pool_allocate(f->p, &rq, &a, NULL, 0))
			_exit(3);
		hold_syncs(true); /* no fdatasync() from here on */
		a.state = IBVF_ALLOC_PORT_READY;
		if (ibvf_pool_update_lazy(f->p, &a, NULL, 0))
			_exit(4);
		if (ibvf_pool_release_lazy(f->p, a.guid, NULL, 0))
			_exit(5);
		if (write(fds[1], "L", 1) != 1)
			_exit(6);
		for (;;)
			pause();
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 1);
	assert_int_equal(c, 'L');
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	close(fds[0]);
	seam_reset();
	assert_int_equal(open_full(f), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	assert_int_equal(ibvf_pool_get(f->p, G0, &rec, NULL, 0), 0);
	assert_int_equal(rec.state, IBVF_ALLOC_QUARANTINED);
}

static void *close_main(void *arg)
{
	ibvf_pool_close(arg);
	return NULL;
}

/*
 * Close (shutdown, SIGHUP's reopen) with a lazy write pending: the syncer is
 * at the gate with an earlier lazy write's fdatasync() when the close stops
 * it, and a second lazy write is committed, not synced. The close makes it
 * durable: after the close pool.id names its generation (pool.id follows
 * only an fdatasync() that covered it), and the reopened store has both. A
 * close that left it to SQLite's own checkpoint would lose it to an OS crash
 * whenever another connection (ibvfctl, a reader) kept the WAL from one.
 */
static void test_lazy_pending_at_close(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a, b, rec;
	unsigned long long gen0;
	pthread_t closer;

	seam_reset();
	assert_int_equal(open_full(f), 0);
	snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "close0");
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err)), 0);
	snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "close1");
	assert_int_equal(ibvf_pool_allocate(f->p, &rq, &b, f->err, sizeof(f->err)), 0);
	gen0 = id_generation(f);

	hold_syncs(true);
	a.state = IBVF_ALLOC_HANDED;
	assert_int_equal(ibvf_pool_update_lazy(f->p, &a, f->err, sizeof(f->err)), 0);
	wait_at_gate(1, NULL); /* the syncer, with the first lazy write's fdatasync() */
	b.state = IBVF_ALLOC_HANDED;
	assert_int_equal(ibvf_pool_update_lazy(f->p, &b, f->err, sizeof(f->err)), 0);
	assert_int_equal(pthread_create(&closer, NULL, close_main, f->p), 0);
	usleep(200000); /* the close stops the syncer, waits for it to leave the gate */
	hold_syncs(false);
	give(0);
	pthread_join(closer, NULL);
	f->p = NULL;
	assert_int_equal(id_generation(f), gen0 + 2); /* the second lazy write too */

	assert_int_equal(open_full(f), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	assert_int_equal(ibvf_pool_get(f->p, a.guid, &rec, NULL, 0), 0);
	assert_int_equal(rec.state, IBVF_ALLOC_HANDED);
	assert_int_equal(ibvf_pool_get(f->p, b.guid, &rec, NULL, 0), 0);
	assert_int_equal(rec.state, IBVF_ALLOC_HANDED);
}

/*
 * Two handles on one store, as ibvfd and an admin's ibvfctl with other
 * ranges are two processes (issue 17's caches: the ranges text kept in the
 * pool, the generation bump as a cached UPDATE). After the other handle
 * rebuilt the free list for its ranges, this one's next write must see the
 * store's ranges differ from its own and rebuild it again: every GUID it
 * hands out is in its own ranges and none is one the other holds. And each
 * write of either handle raises meta 'generation' past the other's, and
 * pool.id always names the store's generation (no loss at the next open).
 */
static void test_other_process_ranges_and_generation(void **state)
{
	static const struct ibvf_guid_range mine[] = {
		{0x0200000000001000ull, 0x0200000000001003ull}};
	static const struct ibvf_guid_range theirs[] = {
		{0x0200000000002000ull, 0x0200000000002003ull}};
	struct pool_fx *f = *state;
	struct ibvf_pool_opts o = {
		.state_dir = f->state,
		.ranges = theirs,
		.n_ranges = 1,
		.quarantine_s = 60,
		.now_ms = fx_clock,
		.now_arg = &f->now,
	};
	struct ibvf_pool *other = NULL;
	struct ibvf_alloc_request rq = {.vf_index = -1};
	struct ibvf_alloc a;
	sqlite3_int64 gen, last;
	uint64_t g;
	const char *gen_sql = "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'generation'";

	assert_int_equal(fx_open(f, mine, 1, 60), 0);
	g = fx_alloc_ok(f, "mine0"); /* the ranges text is cached now */
	assert_int_equal(g, 0x0200000000001000ull);
	last = fx_sql_int(f, gen_sql);

	assert_int_equal(ibvf_pool_open(&o, &other, f->err, sizeof(f->err)), 0);
	fx_owner(&rq.owner, "theirs0", NULL);
	assert_int_equal(ibvf_pool_allocate(other, &rq, &a, f->err, sizeof(f->err)), 0);
	assert_int_equal(a.guid, 0x0200000000002000ull);
	gen = fx_sql_int(f, gen_sql);
	assert_true(gen > last);
	last = gen;
	assert_int_equal(id_generation(f), (unsigned long long)gen);

	for (int i = 1; i < 4; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "mine%d", i);
		g = fx_alloc_ok(f, cid);
		/* from its own ranges, not the free list the other one left */
		assert_true(g >= mine[0].start && g <= mine[0].end);
		assert_int_equal(g, mine[0].start + (uint64_t)i);
		gen = fx_sql_int(f, gen_sql);
		assert_true(gen > last); /* past the other handle's bump */
		last = gen;
		assert_int_equal(id_generation(f), (unsigned long long)gen);

		snprintf(cid, sizeof(cid), "theirs%d", i);
		fx_owner(&rq.owner, cid, NULL);
		assert_int_equal(ibvf_pool_allocate(other, &rq, &a, f->err, sizeof(f->err)), 0);
		assert_true(a.guid >= theirs[0].start && a.guid <= theirs[0].end);
		gen = fx_sql_int(f, gen_sql);
		assert_true(gen > last);
		last = gen;
	}
	/* mine is full: the other's free GUIDs are none of its */
	assert_int_equal(fx_alloc(f, "mine4", 0, &g), -ENOSPC);

	ibvf_pool_close(other);
	assert_int_equal(fx_open(f, mine, 1, 60), 0);
	assert_false(ibvf_pool_lost(f->p, NULL, 0));
	assert_int_equal(fx_sql_int(f, "SELECT COUNT(*) FROM alloc"), 8);
}

/* A failed test may leave a call at the gate: open it before closing the pool. */
static int teardown(void **state)
{
	pthread_mutex_lock(&sm.mu);
	sm.hold = false;
	sm.verdict = 0;
	sm.given = true;
	pthread_cond_broadcast(&sm.cv);
	pthread_mutex_unlock(&sm.mu);
	return fx_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_not_acknowledged_before_durable, fx_setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_commit_fails_group, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_writers, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_normal_no_group_sync, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_normal_ack_after_commit, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_normal_burst_shares_commit, fx_setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_normal_crash_mid_commit, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_write, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_then_synced, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_survives_kill, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_pending_at_close, fx_setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_process_ranges_and_generation, fx_setup,
						teardown),
	};

	ibvf_log_init("test_guid_pool_group", IBVF_LOG_STDERR, LOG_WARNING);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
