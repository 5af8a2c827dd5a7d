// SPDX-License-Identifier: MIT
/*
 * bench_pool - GUID pool throughput and scale. Prints numbers and their
 * ratio to the targets of the foundation issue; never asserts on timings.
 *
 *   allocations/s persisted, one allocation per call (synchronous FULL and
 *   NORMAL; FULL also from 8 and 64 concurrent threads: group commit), and
 *   batched transactions;
 *   open and audit time of a store with N allocations (default 1,000,000);
 *   wall time and peak RSS of `ibvfctl pool status` and `ibvfctl pool audit`
 *   on that store (getrusage of the child);
 *   the latency of a lone write (no other call in flight): synced (allocate,
 *   update) and lazy, and a synced write right after a lazy one, as p50/p99
 *   in us next to the median fdatasync() of a WAL-sized append in the same
 *   directory, in the same run (the floor a synced write cannot go under).
 *
 * Usage: bench_pool [-n N] [-t SECONDS] [-c IBVFCTL] [-d DIR] [-k]
 *                   [-l [-i ITER] [-g GAP_US]] [-p]
 *   -n  allocations in the store for the scale part (default 1000000)
 *   -t  seconds per single-allocation rate measurement (default 2)
 *   -c  ibvfctl binary (default $IBVFCTL; without it the CLI part is skipped)
 *   -d  work directory (default a new one under $TMPDIR or /tmp)
 *   -k  keep the work directory
 *   -l  the lone-write latency part only (-i: its rounds, default 300; -g:
 *       microseconds between the writes, default 1000)
 *   -p  the prepare's-store-calls part only (1024 cold prepares' calls from
 *       16 threads, sync NORMAL and FULL, 3 rounds; then from 1 thread, 2
 *       rounds; BENCH_POOL_THREADS=<n>: n threads only)
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "err.h"
#include "guid_pool.h"
#include "log.h"

#define TARGET_ALLOC_PER_S 10000.0
#define TARGET_AUDIT_S	   2.0
#define BATCH		   1000

static const struct ibvf_guid_range ranges[] = {{0x0200000000000001ull, 0x02000000ffffffffull}};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this process: on a shared, loaded machine it varies far less than wall time. */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One result line: rate by wall clock, CPU time per operation, ratio to the target. */
static void report_rate(const char *what, unsigned long n, double wall, double cpu)
{
	double rate = wall > 0 ? (double)n / wall : 0;

	printf("%-44s %9.0f alloc/s  %6.1f us CPU/alloc  (%lu in %.2f s)  %5.2fx target\n", what,
	       rate, n ? cpu * 1e6 / (double)n : 0, n, wall, rate / TARGET_ALLOC_PER_S);
}

static int open_pool(const char *state, bool sync_full, bool read_only, struct ibvf_pool **p)
{
	struct ibvf_pool_opts o = {
		.state_dir = state,
		.ranges = ranges,
		.n_ranges = 1,
		.quarantine_s = 60,
		.sync_full = sync_full,
		.read_only = read_only,
	};
	char err[IBVF_ERR_LEN];
	int ret = ibvf_pool_open(&o, p, err, sizeof(err));

	if (ret)
		fprintf(stderr, "bench_pool: %s\n", err);
	return ret;
}

static void owner(struct ibvf_alloc_request *rq, unsigned long i)
{
	memset(rq, 0, sizeof(*rq));
	/* a 64-hex-digit container ID like the ones container runtimes use */
	snprintf(rq->owner.container_id, sizeof(rq->owner.container_id), "%064lx",
		 i * 0x9e3779b97f4a7c15ul);
	snprintf(rq->owner.ifname, sizeof(rq->owner.ifname), "net1");
	snprintf(rq->owner.pod_namespace, sizeof(rq->owner.pod_namespace), "bench");
	snprintf(rq->owner.pod_name, sizeof(rq->owner.pod_name), "pod-%lu", i);
	rq->vf_index = -1;
}

/* Single allocations, one transaction each, for @secs; prints the rate. */
static double rate_single(const char *what, struct ibvf_pool *p, unsigned long *next, double secs)
{
	double t0 = now_s(), c0 = cpu_s(), t;
	char err[IBVF_ERR_LEN];
	unsigned long n = 0;

	do {
		struct ibvf_alloc_request rq;
		struct ibvf_alloc a;

		owner(&rq, (*next)++);
		if (ibvf_pool_allocate(p, &rq, &a, err, sizeof(err))) {
			fprintf(stderr, "bench_pool: allocate: %s\n", err);
			return -1;
		}
		n++;
		t = now_s();
	} while (t - t0 < secs);
	report_rate(what, n, t - t0, cpu_s() - c0);
	return (double)n / (t - t0);
}

struct conc {
	struct ibvf_pool *p;
	unsigned long base; /* owner numbers base + k * stride .. */
	unsigned long stride;
	double until;
	unsigned long n;
	int failed;
};

static void *conc_thread(void *arg)
{
	struct conc *c = arg;
	char err[IBVF_ERR_LEN];

	while (now_s() < c->until) {
		struct ibvf_alloc_request rq;
		struct ibvf_alloc a;

		owner(&rq, c->base + c->n * c->stride);
		if (ibvf_pool_allocate(c->p, &rq, &a, err, sizeof(err))) {
			fprintf(stderr, "bench_pool: allocate: %s\n", err);
			c->failed = 1;
			break;
		}
		c->n++;
	}
	return NULL;
}

/*
 * @threads threads allocating one GUID per call from one pool for @secs
 * (group commit shares transactions and fdatasync()s among them); prints
 * the rate. Owner numbers from *@next on, advanced past what was used.
 */
static double rate_concurrent(const char *what, struct ibvf_pool *p, unsigned long *next,
			      int threads, double secs)
{
	struct conc *c = calloc((size_t)threads, sizeof(*c));
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	double t0 = now_s(), c0 = cpu_s(), wall;
	unsigned long n = 0, most = 0;
	int started = 0;

	if (!c || !t) {
		free(c);
		free(t);
		return -1;
	}
	for (int i = 0; i < threads; i++) {
		c[i] = (struct conc){p, *next + (unsigned long)i, (unsigned long)threads,
				     t0 + secs};
		if (pthread_create(&t[i], NULL, conc_thread, &c[i]))
			break;
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(t[i], NULL);
		n += c[i].n;
		if (c[i].n > most)
			most = c[i].n;
	}
	wall = now_s() - t0;
	*next += (most + 1) * (unsigned long)threads;
	report_rate(what, n, wall, cpu_s() - c0);
	free(c);
	free(t);
	return (double)n / wall;
}

/* Fill up to @total allocations in batches of BATCH; prints the rate. */
static double fill_batched(const char *what, struct ibvf_pool *p, unsigned long *next,
			   unsigned long total)
{
	static struct ibvf_alloc_request rq[BATCH];
	static struct ibvf_alloc out[BATCH];
	char err[IBVF_ERR_LEN];
	unsigned long start = *next, done = 0;
	double t0 = now_s(), c0 = cpu_s(), last = t0;

	while (*next < total) {
		size_t n = total - *next < BATCH ? total - *next : BATCH;

		for (size_t i = 0; i < n; i++)
			owner(&rq[i], *next + i);
		if (ibvf_pool_allocate_batch(p, rq, n, out, err, sizeof(err))) {
			fprintf(stderr, "bench_pool: batch: %s\n", err);
			return -1;
		}
		*next += n;
		done += n;
		if (now_s() - last > 10) {
			last = now_s();
			fprintf(stderr, "  ... %lu of %lu (%.0f/s)\n", *next, total,
				(double)(*next - start) / (last - t0));
		}
	}
	report_rate(what, done, now_s() - t0, cpu_s() - c0);
	return (double)done / (now_s() - t0);
}

/* ------------------------------------------------ lone write latency -- */

#define WAL_APPEND (3 * (4096 + 24)) /* a state write: ~3 WAL frames (row, index, generation) */

enum lone_row { L_ALLOC, L_UPDATE, L_LAZY, L_AFTER_LAZY, L_RELEASE_LAZY, L_FSYNC, L_ROWS };

static const char *const lone_name[L_ROWS] = {
	"lone synced allocate (sm_requested)", "lone synced update (port_ready)",
	"lone lazy update (handed)",	       "synced update 0 us after a lazy one",
	"lone lazy release (quarantine)",      "floor: fdatasync() of a WAL-sized append",
};

static int cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* The 1-minute load average (/proc/loadavg), printed next to the figures. */
static double loadavg(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

static double pct(double *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);

	return n ? v[i < n ? i : n - 1] : 0;
}

static void pause_us(long us)
{
	struct timespec ts = {0, us * 1000L};

	nanosleep(&ts, NULL);
}

/*
 * One attach's store writes in order, each alone (@gap_us apart, default
 * 1 ms, so the lazy syncer is done; ibvfd's ADD and DEL are ~20 ms apart,
 * the netns moves), except "releasing" right after "handed": allocate at
 * sm_requested, port_ready (synced), handed (lazy), releasing (synced, at
 * once), quarantine (lazy); then the fdatasync() probe on a file next to the
 * store. @iters rounds; prints p50/p99 per row and each p50 over the floor.
 */
static int lone_latency(const char *state, unsigned long *next, unsigned long iters, long gap_us)
{
	static double v[L_ROWS][4096];
	char err[IBVF_ERR_LEN], probe[4300];
	double c0 = cpu_s(), floor50, load0 = loadavg();
	struct ibvf_pool *p;
	char *buf;
	off_t size = 0;
	int fd, ret = 0;

	if (iters > 4096)
		iters = 4096;
	if (open_pool(state, true, false, &p))
		return -1;
	snprintf(probe, sizeof(probe), "%s/bench-fdatasync.tmp", state);
	fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	buf = calloc(1, WAL_APPEND);
	if (fd < 0 || !buf) {
		perror("bench_pool: fdatasync probe");
		ibvf_pool_close(p);
		free(buf);
		return -1;
	}
	memset(buf, 0x5a, WAL_APPEND);
	for (unsigned long i = 0; i < iters && !ret; i++) {
		struct ibvf_alloc_request rq;
		struct ibvf_alloc a;
		double t;

		owner(&rq, (*next)++);
		rq.state = IBVF_ALLOC_SM_REQUESTED;
		t = now_s();
		ret = ibvf_pool_allocate(p, &rq, &a, err, sizeof(err));
		v[L_ALLOC][i] = now_s() - t;
		pause_us(gap_us);
		a.state = IBVF_ALLOC_PORT_READY;
		t = now_s();
		ret = ret ? ret : ibvf_pool_update(p, &a, err, sizeof(err));
		v[L_UPDATE][i] = now_s() - t;
		pause_us(gap_us);
		a.state = IBVF_ALLOC_HANDED;
		t = now_s();
		ret = ret ? ret : ibvf_pool_update_lazy(p, &a, err, sizeof(err));
		v[L_LAZY][i] = now_s() - t;
		a.state = IBVF_ALLOC_RELEASING;
		t = now_s();
		ret = ret ? ret : ibvf_pool_update(p, &a, err, sizeof(err));
		v[L_AFTER_LAZY][i] = now_s() - t;
		pause_us(gap_us);
		t = now_s();
		ret = ret ? ret : ibvf_pool_release_lazy(p, a.guid, err, sizeof(err));
		v[L_RELEASE_LAZY][i] = now_s() - t;
		pause_us(gap_us);
		if (size > (4 << 20)) { /* a checkpoint truncates the WAL now and then too */
			if (ftruncate(fd, 0) || fsync(fd))
				ret = -errno;
			size = 0;
		}
		if (pwrite(fd, buf, WAL_APPEND, size) != WAL_APPEND)
			ret = -EIO;
		size += WAL_APPEND;
		t = now_s();
		if (fdatasync(fd))
			ret = -errno;
		v[L_FSYNC][i] = now_s() - t;
		pause_us(gap_us);
	}
	if (ret)
		fprintf(stderr, "bench_pool: lone writes: %s\n", err);
	ibvf_pool_close(p);
	close(fd);
	unlink(probe);
	free(buf);
	if (ret)
		return -1;
	for (int r = 0; r < L_ROWS; r++)
		qsort(v[r], iters, sizeof(double), cmp_dbl);
	floor50 = pct(v[L_FSYNC], iters, 0.5);
	printf("lone writes, sync FULL, %lu rounds, %ld us apart (%.1f us CPU per round of 5 "
	       "writes), load average %.2f -> %.2f:\n",
	       iters, gap_us, (cpu_s() - c0) * 1e6 / (double)iters, load0, loadavg());
	for (int r = 0; r < L_ROWS; r++)
		printf("  %-44s p50 %7.1f us  p99 %7.1f us  p50 %5.2fx floor\n", lone_name[r],
		       pct(v[r], iters, 0.5) * 1e6, pct(v[r], iters, 0.99) * 1e6,
		       floor50 > 0 ? pct(v[r], iters, 0.5) / floor50 : 0);
	return 0;
}

/* ------------------------------------------- a prepare's store calls -- */

struct prep_arg {
	struct ibvf_pool *p;
	unsigned long from, to;
	int fails;
	pthread_barrier_t *bar;
};

/* ibvfd's store calls of one cold prepare: store_read, store_allocate, store_port_ready. */
static void *prep_thread(void *arg)
{
	struct prep_arg *a = arg;
	static const uint16_t pk = 0x80a6;
	char err[IBVF_ERR_LEN], pci[16];

	pthread_barrier_wait(a->bar);
	for (unsigned long i = a->from; i < a->to; i++) {
		struct ibvf_alloc_request rq;
		struct ibvf_alloc out, cur;

		owner(&rq, i);
		snprintf(rq.owner.network, sizeof(rq.owner.network), "lab-net");
		snprintf(pci, sizeof(pci), "0000:%02lx:%02lx.%lu", (i >> 8) & 0xff, (i >> 3) & 0x1f,
			 i & 7);
		rq.pf = "ib0";
		rq.vf_index = (int)(i & 0xffff);
		rq.pci = pci;
		rq.pkeys = &pk;
		rq.n_pkeys = 1;
		rq.state = IBVF_ALLOC_SM_REQUESTED;
		if (ibvf_pool_find_owner(a->p, rq.owner.container_id, rq.owner.ifname, &cur, err,
					 sizeof(err)) != -ENOENT ||
		    ibvf_pool_allocate(a->p, &rq, &out, err, sizeof(err))) {
			a->fails++;
			continue;
		}
		out.state = IBVF_ALLOC_PORT_READY;
		a->fails += ibvf_pool_update(a->p, &out, err, sizeof(err)) != 0;
	}
	return NULL;
}

/*
 * The store calls of @n cold prepares from @threads threads (ibvfd's workers)
 * on a fresh store with @sync_full: prepares/s and CPU us per prepare (the
 * store's share of ibvfd's CPU in bench_ibvfd's N=1024 burst).
 */
static int prepare_calls(const char *dir, unsigned long n, int threads, bool sync_full)
{
	static int round;
	char state[4200];
	struct prep_arg a[64];
	pthread_t th[64];
	pthread_barrier_t bar;
	struct ibvf_pool *p;
	double t0, c0, l0 = loadavg();
	int fails = 0;

	snprintf(state, sizeof(state), "%s/prep-%d", dir, round++);
	if (open_pool(state, sync_full, false, &p))
		return -1;
	threads = threads > 64 ? 64 : threads;
	pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		a[i] = (struct prep_arg){p, n * (unsigned long)i / (unsigned long)threads,
					 n * (unsigned long)(i + 1) / (unsigned long)threads, 0,
					 &bar};
		pthread_create(&th[i], NULL, prep_thread, &a[i]);
	}
	t0 = now_s();
	c0 = cpu_s();
	pthread_barrier_wait(&bar);
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		fails += a[i].fails;
	}
	t0 = now_s() - t0;
	c0 = cpu_s() - c0;
	pthread_barrier_destroy(&bar);
	ibvf_pool_close(p);
	printf("prepare's store calls x %lu, %d threads, sync %-6s %8.0f prepares/s  %6.1f us CPU "
	       "each  (%d fails) load average %.2f -> %.2f\n",
	       n, threads, sync_full ? "FULL" : "NORMAL", (double)n / t0, c0 * 1e6 / (double)n,
	       fails, l0, loadavg());
	return fails ? -1 : 0;
}

static int count_cb(void *arg, const struct ibvf_audit_finding *f)
{
	(void)f;
	++*(int *)arg;
	return 0;
}

/* Run ibvfctl with @args; prints wall time, exit code and peak RSS. */
static void run_ctl(const char *ctl, const char *cfg, const char *obj, const char *cmd)
{
	struct rusage ru;
	double t0 = now_s();
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		execl(ctl, ctl, "-c", cfg, obj, cmd, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || wait4(pid, &st, 0, &ru) != pid) {
		perror("bench_pool: ibvfctl");
		return;
	}
	printf("ibvfctl %s %-6s %36s %7.3f s (%.3f s CPU)  exit %d  peak RSS %.1f MiB\n", obj, cmd,
	       "", now_s() - t0,
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1, (double)ru.ru_maxrss / 1024);
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(int argc, char **argv)
{
	unsigned long total = 1000000, next = 1;
	const char *ctl = getenv("IBVFCTL"), *base = getenv("TMPDIR");
	char dir[4096] = "", state[4200], cfg[4200], err[IBVF_ERR_LEN];
	double secs = 2, t0, c0, t_open, t_audit, c_open, c_audit;
	unsigned long iters = 300;
	long gap_us = 1000;
	bool keep = false, lone_only = false, prep_only = false;
	struct ibvf_pool *p;
	int c, findings = 0, problems;

	while ((c = getopt(argc, argv, "n:t:c:d:klpi:g:")) != -1) {
		switch (c) {
		case 'n':
			total = strtoul(optarg, NULL, 0);
			break;
		case 't':
			secs = atof(optarg);
			break;
		case 'c':
			ctl = optarg;
			break;
		case 'd':
			snprintf(dir, sizeof(dir), "%s", optarg);
			break;
		case 'k':
			keep = true;
			break;
		case 'l':
			lone_only = true;
			break;
		case 'p':
			prep_only = true;
			break;
		case 'i':
			iters = strtoul(optarg, NULL, 0);
			break;
		case 'g':
			gap_us = atol(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: %s [-n N] [-t SECONDS] [-c IBVFCTL] [-d DIR] [-k] [-l [-i ITER] [-g GAP_US]] [-p]\n",
				argv[0]);
			return 2;
		}
	}
	ibvf_log_init("bench_pool", IBVF_LOG_STDERR, LOG_WARNING);
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/ibvf-bench-XXXXXX", base && *base ? base : "/tmp");
		if (!mkdtemp(dir)) {
			perror("bench_pool: mkdtemp");
			return 1;
		}
	}
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(cfg, sizeof(cfg), "%s/ibvfd.json", dir);
	printf("bench_pool: store %s/pool.db, %lu allocations for the scale part\n", state, total);
	if (lone_only) {
		c = lone_latency(state, &next, iters, gap_us) ? 1 : 0;
		goto out;
	}
	if (prep_only) {
		const char *th = getenv("BENCH_POOL_THREADS"); /* one thread count only */

		c = 0;
		for (int r = 0; r < 3 && !c && (!th || atoi(th) == 16); r++)
			c = prepare_calls(dir, 1024, 16, false) ||
			    prepare_calls(dir, 1024, 16, true);
		for (int r = 0; r < 2 && !c && (!th || atoi(th) != 16); r++)
			c = prepare_calls(dir, 1024, th ? atoi(th) : 1, false) ||
			    prepare_calls(dir, 1024, th ? atoi(th) : 1, true);
		goto out;
	}

	/* 1. one allocation per transaction */
	if (open_pool(state, true, false, &p))
		return 1;
	rate_single("single allocation/transaction, sync FULL", p, &next, secs);
	/* 1b. concurrent callers: group commit (issue 17: >= 10k/s with FULL) */
	for (int th = 8; th <= 64; th *= 8) {
		snprintf(err, sizeof(err), "%d threads, one allocation/call, sync FULL", th);
		rate_concurrent(err, p, &next, th, secs);
	}
	ibvf_pool_close(p);
	if (open_pool(state, false, false, &p))
		return 1;
	rate_single("single allocation/transaction, sync NORMAL", p, &next, secs);

	/* 2. batched transactions up to the scale */
	if (fill_batched("batches of 1000 allocations/transaction", p, &next, total + 1) < 0)
		return 1;
	/* single allocations with the store full */
	snprintf(err, sizeof(err), "single, sync NORMAL, at %lu records", next - 1);
	rate_single(err, p, &next, secs / 2);
	ibvf_pool_close(p);
	if (open_pool(state, true, false, &p))
		return 1;
	snprintf(err, sizeof(err), "single, sync FULL, at %lu records", next - 1);
	rate_single(err, p, &next, secs / 2);
	snprintf(err, sizeof(err), "64 threads, sync FULL, at %lu records", next - 1);
	rate_concurrent(err, p, &next, 64, secs / 2);
	ibvf_pool_close(p);

	/* 3. open and audit at scale */
	t0 = now_s();
	c0 = cpu_s();
	if (open_pool(state, true, true, &p))
		return 1;
	t_open = now_s() - t0;
	c_open = cpu_s() - c0;
	t0 = now_s();
	c0 = cpu_s();
	problems = ibvf_pool_audit(p, count_cb, &findings, err, sizeof(err));
	t_audit = now_s() - t0;
	c_audit = cpu_s() - c0;
	ibvf_pool_close(p);
	if (problems < 0)
		fprintf(stderr, "bench_pool: audit: %s\n", err);
	printf("read-only open (schema + quick_check), %lu records: %7.3f s (%.3f s CPU)\n",
	       next - 1, t_open, c_open);
	printf("audit, %lu records:                                %7.3f s (%.3f s CPU)  %d "
	       "findings, %d problems  %.2fx of the %.0f s budget\n",
	       next - 1, t_audit, c_audit, findings, problems, t_audit / TARGET_AUDIT_S,
	       TARGET_AUDIT_S);
	printf("open + audit:                                          %7.3f s (%.3f s CPU)  %.2fx "
	       "of the budget\n",
	       t_open + t_audit, c_open + c_audit, (t_open + t_audit) / TARGET_AUDIT_S);

	/* 4. the CLI on that store */
	if (ctl && access(ctl, X_OK) == 0) {
		FILE *f = fopen(cfg, "w");

		if (f) {
			fprintf(f,
				"{\"state_dir\": \"%s\", \"pool\": {\"ranges\": [{\"start\": "
				"\"0x%016llx\", \"end\": \"0x%016llx\"}]}}\n",
				state, (unsigned long long)ranges[0].start,
				(unsigned long long)ranges[0].end);
			fclose(f);
			run_ctl(ctl, cfg, "pool", "status");
			run_ctl(ctl, cfg, "pool", "audit");
		}
	} else {
		printf("ibvfctl: not measured (set IBVFCTL or -c to the built binary)\n");
	}
	/* 5. lone writes, at the scale's store; 6. a burst of prepares' store calls */
	c = lone_latency(state, &next, iters, gap_us) ? 1 : 0;
	if (!c)
		c = prepare_calls(dir, 1024, 16, false) || prepare_calls(dir, 1024, 16, true);
out:
	if (!keep)
		nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	else
		printf("kept %s\n", dir);
	return c;
}
