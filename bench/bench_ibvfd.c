// SPDX-License-Identifier: MIT
/*
 * bench_ibvfd - numbers for the ibvf node daemon, measured on the real
 * ibvfd binary through its API (fake VF driver: no hardware):
 *
 *   1. attach throughput and prepare latency (p50/p99) with concurrent
 *      clients doing prepare+release cycles, SM backend "noop" (or the
 *      test "file" backend when noop is not built) and the UFM simulator
 *      at 0 / 50 / 200 ms latency, with the SM calls it took;
 *   2. a burst of 256 prepares/releases against the UFM simulator at 200 ms,
 *      pool.sync full, cold and warm (vf.warm, 256 warm VFs): round trips,
 *      UFM calls by endpoint and their timeline (--burst-only runs just this);
 *   3. cost growth: N = 1 .. 1024 concurrent prepares (noop, UFM 50/200 ms):
 *      wall, prepares/s, SM calls, round trips;
 *   4. multi-rail: 8 sequential prepares of one Pod vs one prepare;
 *   4b. warm VFs (vf.warm off/on): ADD, DEL and 8 sequential ADDs with the
 *      fake VF program step at 0/50/500 ms (--warm-only runs just this);
 *   5. restart-to-ready: start to READY=1 (start-up reconciliation done)
 *      with 8k .. 64k owners, each on its own fake VF (in bus tables of
 *      256; BENCH_VF_FILES=1: one file per VF), with RSS; env
 *      BENCH_IBVFD_B=<another ibvfd> times that binary on the same state;
 *      BENCH_OWNERS=<n> runs one size, BENCH_NOOP_ONLY=1 skips the UFM rows;
 *      BENCH_SYNC=full|normal and BENCH_WORKERS=<n> set pool.sync and
 *      daemon.workers of the cost-growth part.
 *
 * The load average (1 min) is printed next to each figure.
 *
 *   bench_ibvfd IBVFD SM_MODULE_DIR TEST_MODULE_DIR UFM_MODULE_DIR
 *               [--quick] [--attach-only | --store-only | --scale-only | --warm-only |
 *               --burst-only]
 *
 * Prints numbers and ratios; asserts nothing (timings are not tests).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "evloop.h"
#include "guid_pool.h"
#include "ibvfd_lab.h"
#include "log.h"
#include "ufm_sim_harness.h"
#include "vf_fake.h"

static const char *ibvfd, *sm_dir, *test_dir, *ufm_dir;
static bool quick, only_attach, only_store, only_scale, only_warm, only_burst;

struct worker {
	struct lab *l;
	int id, cycles;
	double *lat; /* ms per prepare */
	int fails;
	pthread_barrier_t *bar;
};

static void *cycle_worker(void *p)
{
	struct worker *w = p;
	char cid[32];

	pthread_barrier_wait(w->bar);
	for (int c = 0; c < w->cycles; c++) {
		int64_t t0 = ibvf_mono_ms();

		snprintf(cid, sizeof(cid), "b%02d-%04d", w->id, c);
		if (lab_prepare(w->l, cid, w->id, "0x0012", NULL, NULL))
			w->fails++;
		w->lat[c] = (double)(ibvf_mono_ms() - t0);
		if (lab_release(w->l, cid))
			w->fails++;
	}
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct result {
	double per_s, p50, p99;
	long sm_calls;
	int fails;
};

/* @conc clients x @cycles prepare+release cycles against a started daemon. */
static struct result run_cycles(struct lab *l, int conc, int cycles)
{
	struct worker w[64];
	pthread_t th[64];
	pthread_barrier_t bar;
	double *all = calloc((size_t)(conc * cycles), sizeof(double));
	struct result r = {0};
	int64_t t0;
	size_t n = 0;

	pthread_barrier_init(&bar, NULL, (unsigned)conc + 1);
	for (int i = 0; i < conc; i++) {
		w[i] = (struct worker){l, i,   cycles, calloc((size_t)cycles, sizeof(double)),
				       0, &bar};
		pthread_create(&th[i], NULL, cycle_worker, &w[i]);
	}
	pthread_barrier_wait(&bar);
	t0 = ibvf_mono_ms();
	for (int i = 0; i < conc; i++) {
		pthread_join(th[i], NULL);
		memcpy(all + n, w[i].lat, (size_t)cycles * sizeof(double));
		n += (size_t)cycles;
		r.fails += w[i].fails;
		free(w[i].lat);
	}
	r.per_s = (double)n * 1000.0 / (double)(ibvf_mono_ms() - t0 + 1);
	qsort(all, n, sizeof(double), cmp_d);
	r.p50 = all[n / 2];
	r.p99 = all[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
	free(all);
	pthread_barrier_destroy(&bar);
	return r;
}

static long daemon_sm_calls(struct lab *l)
{
	json_t *st = NULL;
	long n = -1;

	if (!lab_api(l, "status", NULL, &st, NULL, 10000)) {
		json_t *sm = json_object_get(st, "sm");

		n = (long)(json_integer_value(json_object_get(sm, "add_calls")) +
			   json_integer_value(json_object_get(sm, "remove_calls")));
	}
	json_decref(st);
	return n;
}

static void print_row(const char *name, struct result *r, int prepares)
{
	printf("%-26s %9.0f %9.1f %9.1f %9ld %8.2f %6d\n", name, r->per_s, r->p50, r->p99,
	       r->sm_calls, prepares ? (double)r->sm_calls / (2.0 * prepares) : 0, r->fails);
	fflush(stdout);
}

static const char *noop_backend(const char **dir)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/noop/noop.so", sm_dir);
	if (access(path, R_OK) == 0) {
		static char d[4096];

		snprintf(d, sizeof(d), "%s/noop", sm_dir);
		*dir = d;
		return "noop";
	}
	*dir = test_dir;
	return "file";
}

static void bench_attach(void)
{
	const int conc = 32, cycles = quick ? 4 : 16;
	const char *dir, *name = noop_backend(&dir);
	struct result base = {0}, r;
	struct lab l;
	char label[64];

	printf("\n== attach: %d clients x %d prepare+release cycles, fake VFs, window 20 ms\n",
	       conc, cycles);
	printf("%-26s %9s %9s %9s %9s %8s %6s\n", "SM backend", "prep/s", "p50 ms", "p99 ms",
	       "SM calls", "calls/op", "fails");
	if (lab_init(&l, ibvfd, conc, name, dir, strcmp(name, "noop") ? NULL : "{}") == 0) {
		l.window_ms = 20;
		lab_write_config(&l);
		if (lab_start(&l, 30000) > 0) {
			base = run_cycles(&l, conc, cycles);
			base.sm_calls = daemon_sm_calls(&l);
			snprintf(label, sizeof(label), "%s%s", name,
				 strcmp(name, "noop") ? " (test file SM)" : "");
			print_row(label, &base, conc * cycles);
		}
		lab_fini(&l);
	}
	{
		struct ufm_sim_opts so = {.user = "admin", .password = "bench"};
		struct ufm_sim sim;
		char err[512], bj[PATH_MAX + 256];
		const char *miss = ufm_sim_missing();
		static const int lat[] = {0, 50, 200};

		if (miss || ufm_sim_start(&so, &sim, err, sizeof(err))) {
			printf("UFM simulator: not run (%s)\n", miss ? miss : err);
			return;
		}
		for (size_t i = 0; i < 3; i++) {
			char cfg[64];

			snprintf(bj, sizeof(bj),
				 "{\"address\": \"127.0.0.1\", \"scheme\": \"http\", \"port\": %d,"
				 " \"username\": \"admin\", \"password_file\": \"%s\"}",
				 sim.port, sim.password_file);
			if (lab_init(&l, ibvfd, conc, "ufm", ufm_dir, bj))
				break;
			l.window_ms = 20;
			lab_write_config(&l);
			ufm_sim_reset(&sim);
			if (lab_start(&l, 30000) > 0) {
				snprintf(cfg, sizeof(cfg), "{\"latency_ms\": %d}", lat[i]);
				ufm_sim_config(&sim, cfg);
				r = run_cycles(&l, conc,
					       lat[i] >= 200 && !quick ? cycles / 2 : cycles);
				r.sm_calls = ufm_sim_calls(&sim, "add") +
					     ufm_sim_calls(&sim, "remove") +
					     ufm_sim_calls(&sim, "delete");
				snprintf(label, sizeof(label), "ufm sim %d ms", lat[i]);
				print_row(label, &r,
					  conc * (lat[i] >= 200 && !quick ? cycles / 2 : cycles));
				if (base.per_s > 0)
					printf("%-26s throughput %.2fx of %s\n", "",
					       r.per_s / base.per_s, name);
			}
			lab_fini(&l);
		}
		ufm_sim_stop(&sim);
	}
}

/* ------------------------------------------------------------ burst -- */

#define N_BURST 256

static const char *loadavg(void);

/* The UFM simulator's calls since its last reset, by endpoint ("add 1, list 2"). */
static void sim_calls_by_endpoint(struct ufm_sim *sim, char *buf, size_t len)
{
	json_t *r = NULL, *calls, *v;
	const char *k;
	size_t n = 0;

	buf[0] = 0;
	if (ufm_sim_ctl(sim, "GET", "/_sim/stats", NULL, &r) != 200) {
		snprintf(buf, len, "? (no stats)");
		return;
	}
	calls = json_object_get(r, "calls");
	json_object_foreach(calls, k, v)
	{
		if (json_integer_value(v) && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s %lld", n ? ", " : "", k,
					      (long long)json_integer_value(v));
	}
	if (!n)
		snprintf(buf, len, "none");
	json_decref(r);
}

/*
 * The simulator's request log since its last reset as a timeline relative
 * to @t0 (CLOCK_MONOTONIC ms, the simulator's t_ms/done_ms clock): one
 * "endpoint@start-end(GUIDs)" per request, GUIDs counted in add bodies.
 */
static void sim_timeline(struct ufm_sim *sim, int64_t t0, char *buf, size_t len)
{
	json_t *r = NULL, *a, *q;
	size_t i, n = 0;

	buf[0] = 0;
	if (ufm_sim_ctl(sim, "GET", "/_sim/requests", NULL, &r) != 200) {
		snprintf(buf, len, "? (no request log)");
		return;
	}
	a = json_object_get(r, "requests");
	json_array_foreach(a, i, q)
	{
		const char *ep = json_string_value(json_object_get(q, "endpoint"));
		double t = json_number_value(json_object_get(q, "t_ms")) - (double)t0;
		json_t *done = json_object_get(q, "done_ms");
		const char *bt = json_string_value(json_object_get(q, "body"));
		json_t *body = json_loads(bt ? bt : "", 0, NULL);
		long g = (long)json_array_size(json_object_get(body, "guids"));

		json_decref(body);
		if (n >= len)
			break;
		n += (size_t)snprintf(buf + n, len - n, "%s%s@%.0f-", n ? " " : "", ep ? ep : "?",
				      t);
		if (n < len && done)
			n += (size_t)snprintf(buf + n, len - n, "%.0f",
					      json_number_value(done) - (double)t0);
		if (n < len && g)
			n += (size_t)snprintf(buf + n, len - n, "(%ld)", g);
	}
	json_decref(r);
	if (!n)
		snprintf(buf, len, "no UFM request");
}

static void warm_wait_ms(struct lab *l, long long want, int ms);

struct bprep {
	struct lab *l;
	int i;
	bool release;
	int ret;
	int64_t end_ms; /* CLOCK_MONOTONIC when the answer came */
	json_t *timing; /* the reply's "timing" (prepare) */
	pthread_barrier_t *bar;
};

static void *bprep_one(void *p)
{
	struct bprep *a = p;
	json_t *res = NULL;
	char cid[32];

	snprintf(cid, sizeof(cid), "burst%03d", a->i);
	pthread_barrier_wait(a->bar);
	if (a->release) {
		a->ret = lab_release(a->l, cid);
	} else {
		a->ret = lab_prepare(a->l, cid, a->i, "0x00a5", &res, NULL);
		a->timing = json_incref(json_object_get(res, "timing"));
		json_decref(res);
	}
	a->end_ms = ibvf_mono_ms();
	return NULL;
}

/* Median of the reply timings' step @k over @a[0..n) (0 when absent). */
static double step_median(struct bprep *a, int n, const char *k)
{
	double *v = calloc((size_t)n, sizeof(double)), m;
	int c = 0;

	for (int i = 0; i < n; i++) {
		json_t *x = json_object_get(a[i].timing, k);

		if (x)
			v[c++] = json_number_value(x);
	}
	qsort(v, (size_t)c, sizeof(double), cmp_d);
	m = c ? v[c / 2] : 0;
	free(v);
	return m;
}

/*
 * N_BURST concurrent prepares (or releases) on their own VFs; the wall time
 * from the barrier to the last answer. *@t0 gets the start (CLOCK_MONOTONIC).
 */
static int64_t bprep_burst(struct lab *l, bool release, int *fails, int64_t *t0, int64_t *p50,
			   struct bprep *a)
{
	pthread_t th[N_BURST];
	pthread_barrier_t bar;
	pthread_attr_t attr;
	int64_t end = 0, lat[N_BURST];

	pthread_barrier_init(&bar, NULL, N_BURST + 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (int i = 0; i < N_BURST; i++) {
		a[i] = (struct bprep){l, i, release, -1, 0, NULL, &bar};
		pthread_create(&th[i], &attr, bprep_one, &a[i]);
	}
	pthread_attr_destroy(&attr);
	pthread_barrier_wait(&bar);
	*t0 = ibvf_mono_ms();
	*fails = 0;
	for (int i = 0; i < N_BURST; i++) {
		pthread_join(th[i], NULL);
		*fails += a[i].ret != 0;
		end = a[i].end_ms > end ? a[i].end_ms : end;
		lat[i] = a[i].end_ms - *t0;
	}
	pthread_barrier_destroy(&bar);
	for (int i = 1; i < N_BURST; i++) /* insertion sort: 256 values */
		for (int k = i; k > 0 && lat[k - 1] > lat[k]; k--) {
			int64_t x = lat[k];

			lat[k] = lat[k - 1];
			lat[k - 1] = x;
		}
	*p50 = lat[N_BURST / 2];
	return end - *t0;
}

/*
 * 256 Pods at once against a UFM answering in 200 ms (issue 17: <= 1.5 round
 * trips in 1-2 SM calls with pool.sync "full"), cold (every prepare allocates
 * a GUID and reads its SM membership back before the add: the [safety] check)
 * and warm (vf.warm: 256 warm fake VFs, the check done when each VF was
 * warmed, off the ADD's path), and warm again with the ufm backend's
 * change_wait_ms 0 (its add then skips the GET of last_updated before the
 * POST: the cost of that read). Round trips = wall / 200 ms; the simulator's
 * calls by endpoint and its request timeline (ms from the burst's start:
 * arrival-answer, GUIDs per add). BENCH_SYNC overrides pool.sync.
 */
static void bench_burst(void)
{
	struct ufm_sim_opts so = {.user = "admin", .password = "bench"};
	static struct bprep a[N_BURST];
	const char *sync = getenv("BENCH_SYNC") ? getenv("BENCH_SYNC") : "full";
	struct ufm_sim sim;
	char err[512], bj[PATH_MAX + 256];
	const char *miss = ufm_sim_missing();

	printf("\n== burst: %d concurrent prepares, then %d releases, each on its own fake VF,"
	       " UFM simulator at 200 ms, pool.sync %s, sm.batch_window_ms 0\n",
	       N_BURST, N_BURST, sync);
	if (miss || ufm_sim_start(&so, &sim, err, sizeof(err))) {
		printf("UFM simulator: not run (%s)\n", miss ? miss : err);
		return;
	}
	snprintf(bj, sizeof(bj),
		 "{\"address\": \"127.0.0.1\", \"scheme\": \"http\", \"port\": %d,"
		 " \"username\": \"admin\", \"password_file\": \"%s\"}",
		 sim.port, sim.password_file);
	for (int m = 0; m < 3; m++) {
		/* 2: warm with the ufm backend's change_wait_ms 0 (no last_updated read) */
		const char *mode = m == 2 ? "warm, change_wait_ms 0," : m ? "warm" : "cold";
		bool warm = m > 0;
		static char line[8192];
		struct lab l;

		if (m == 2)
			snprintf(bj, sizeof(bj),
				 "{\"address\": \"127.0.0.1\", \"scheme\": \"http\", \"port\": %d,"
				 " \"username\": \"admin\", \"password_file\": \"%s\","
				 " \"change_wait_ms\": 0}",
				 sim.port, sim.password_file);
		if (lab_init(&l, ibvfd, N_BURST, "ufm", ufm_dir, bj))
			break;
		l.window_ms = 0;
		l.periodic_s = 3600;
		l.warm = warm;
		snprintf(l.pool_sync, sizeof(l.pool_sync), "%s", sync);
		lab_write_config(&l);
		ufm_sim_reset(&sim);
		if (lab_start(&l, 60000) > 0) {
			int fails;
			int64_t ms, t0, p50;

			if (warm) {
				/* the warm pass at 0 ms (each VF's check lists the SM once) */
				int64_t w0 = ibvf_mono_ms();

				warm_wait_ms(&l, N_BURST, 300000);
				printf("%s: warm pass: %d VFs warm %lld ms after ready (not timed)\n",
				       mode, N_BURST, (long long)(ibvf_mono_ms() - w0));
			}
			ufm_sim_ctl(&sim, "POST", "/_sim/reset", "{\"keep_state\": true}", NULL);
			ufm_sim_config(&sim, "{\"latency_ms\": 200}");
			ms = bprep_burst(&l, false, &fails, &t0, &p50, a);
			sim_calls_by_endpoint(&sim, line, sizeof(line));
			printf("%s prepare %6lld ms = %.2f round trips (p50 %lld ms), %d failed, load1 "
			       "%s; UFM calls: %s\n",
			       mode, (long long)ms, (double)ms / 200.0, (long long)p50, fails,
			       loadavg(), line);
			sim_timeline(&sim, t0, line, sizeof(line));
			printf("  UFM requests (ms from the burst's start, arrival-answer (GUIDs)): "
			       "%s\n",
			       line);
			printf("  prepare timing medians (ms): total %.1f queue %.1f store_allocate %.1f "
			       "sm_check %.1f sm_add_wait %.1f sm_add %.1f "
			       "port_wait %.1f store_port_ready %.1f reply_queue %.1f\n",
			       step_median(a, N_BURST, "total"), step_median(a, N_BURST, "queue"),
			       step_median(a, N_BURST, "store_allocate"),
			       step_median(a, N_BURST, "sm_check"),
			       step_median(a, N_BURST, "sm_add_wait"),
			       step_median(a, N_BURST, "sm_add"),
			       step_median(a, N_BURST, "port_wait"),
			       step_median(a, N_BURST, "store_port_ready"),
			       step_median(a, N_BURST, "reply_queue"));
			for (int i = 0; i < N_BURST; i++)
				json_decref(a[i].timing);
			ufm_sim_ctl(&sim, "POST", "/_sim/reset", "{\"keep_state\": true}", NULL);
			ufm_sim_config(&sim, "{\"latency_ms\": 200}");
			ms = bprep_burst(&l, true, &fails, &t0, &p50, a);
			sim_calls_by_endpoint(&sim, line, sizeof(line));
			printf("%s release %6lld ms = %.2f round trips (p50 %lld ms), %d failed; UFM "
			       "calls: %s\n",
			       mode, (long long)ms, (double)ms / 200.0, (long long)p50, fails,
			       line);
			/* the warm pass re-GUIDs the VFs after the releases: not at 200 ms */
			ufm_sim_config(&sim, "{\"latency_ms\": 0}");
		}
		lab_fini(&l);
	}
	printf("target: 256 prepares against UFM at 200 ms <= 1.5 round trips in 1-2 SM calls, "
	       "pool.sync full (cold floor: a shared listing before the add, 2 round trips)\n");
	ufm_sim_stop(&sim);
}

/* ------------------------------------------------------------ scale -- */

/*
 * One burst's start and end for its client threads: each says it is ready
 * (then waits at @go), says when its reply came (the last one posts @done)
 * and waits at @end before it exits, so the bench measures the CPU of the
 * burst between "every client waits at the start line" and "every reply is
 * in": neither the clients' thread creation nor their exits (stack unmaps,
 * futex wake-ups at join) count as the clients' CPU per prepare, and no
 * exiting thread competes with ibvfd while other prepares are still
 * running.
 */
struct burst_sync {
	pthread_barrier_t go, end;
	int ready, left; /* atomic */
	sem_t done;
};

struct scale_arg {
	struct lab *l;
	int i, round;
	int ret;
	bool release;
	const char *method; /* NULL: prepare / release; else this method (the ping floor) */
	struct burst_sync *bs;
	struct ibvf_rpc_error re;
	json_t *timing;	  /* the reply's "timing" (prepare) */
	double client_ms; /* barrier to reply, as the client saw it */
	double done_ms;	  /* CLOCK_MONOTONIC ms when the reply came */
	int64_t t_bar;	  /* ms: when the burst started (the barrier) */
};

static double now_ms_f(void);

static void *scale_one(void *p)
{
	struct scale_arg *a = p;
	json_t *res = NULL;
	char cid[32];
	double t0;

	snprintf(cid, sizeof(cid), "s%d-%04d", a->round, a->i);
	__atomic_add_fetch(&a->bs->ready, 1, __ATOMIC_RELEASE);
	pthread_barrier_wait(&a->bs->go);
	t0 = now_ms_f();
	if (a->method)
		a->ret = lab_api(a->l, a->method, NULL, NULL, &a->re, 70000);
	else if (a->release)
		a->ret = lab_release(a->l, cid);
	else
		a->ret = lab_prepare(a->l, cid, a->i, "0x00a6", &res, &a->re);
	a->done_ms = now_ms_f();
	a->client_ms = a->done_ms - t0;
	if (res)
		a->timing = json_incref(json_object_get(res, "timing"));
	json_decref(res);
	if (__atomic_sub_fetch(&a->bs->left, 1, __ATOMIC_ACQ_REL) == 0)
		sem_post(&a->bs->done);
	pthread_barrier_wait(&a->bs->end);
	return NULL;
}

/*
 * The per-step breakdown of a burst: median and p99 over the @n replies of
 * each step of their "timing" (docs/api.md; a reply without the step counts
 * 0 ms), plus the client's own view and what lies outside ibvfd's "total"
 * (connect, its retries while the listen backlog is full, the request's
 * parse before "queue" starts, the reply's way back).
 */
static void print_breakdown(struct scale_arg *a, int n)
{
	const char *names[32];
	size_t n_names = 0;
	double *v = calloc((size_t)n, sizeof(double));

	for (int i = 0; i < n; i++) {
		const char *k;
		json_t *x;

		json_object_foreach(a[i].timing, k, x)
		{
			size_t j;

			for (j = 0; j < n_names && strcmp(names[j], k); j++)
				;
			if (j == n_names && n_names < 32)
				names[n_names++] = k;
		}
	}
	printf("   per-step breakdown of the %d prepares, ms (reply \"timing\"; absent = 0):\n", n);
	printf("   %-22s %9s %9s %9s\n", "step", "median", "p99", "max");
	for (size_t j = 0; j <= n_names + 1; j++) {
		const char *name = j < n_names	  ? names[j]
				   : j == n_names ? "client (whole call)"
						  : "client - total";

		for (int i = 0; i < n; i++) {
			double tot = json_real_value(json_object_get(a[i].timing, "total"));

			v[i] = j < n_names ? json_number_value(json_object_get(a[i].timing, name))
			       : j == n_names ? a[i].client_ms
					      : a[i].client_ms - tot;
		}
		qsort(v, (size_t)n, sizeof(double), cmp_d);
		printf("   %-22s %9.3f %9.3f %9.3f\n", name, v[n / 2],
		       v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], v[n - 1]);
	}
	free(v);
	fflush(stdout);
}

/*
 * The CPU use over a burst: every STEP_MS, the CPU time so far of ibvfd
 * (the sum of its threads' /proc/PID/task/TID/schedstat, ns) and of this
 * process (the clients; getrusage), so a timeline shows the steps in which
 * less than every CPU was busy.
 */
#define STEP_MS	  20
#define MAX_STEPS 256

struct cpu_sampler {
	pid_t pid;
	int stop, n;
	pthread_t th;
	double t[MAX_STEPS], d[MAX_STEPS], c[MAX_STEPS];
};

static double self_cpu_ms(void);

/* CPU time of every thread of @pid so far, ms (schedstat: ns resolution). */
static double threads_cpu_ms(pid_t pid)
{
	char path[96];
	struct dirent *de;
	double ms = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		unsigned long long ns = 0;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/schedstat", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (f && fscanf(f, "%llu", &ns) == 1)
			ms += (double)ns / 1e6;
		if (f)
			fclose(f);
	}
	closedir(d);
	return ms;
}

static void *sampler_run(void *p)
{
	struct cpu_sampler *cs = p;

	while (!__atomic_load_n(&cs->stop, __ATOMIC_ACQUIRE) && cs->n < MAX_STEPS) {
		cs->t[cs->n] = now_ms_f();
		cs->d[cs->n] = threads_cpu_ms(cs->pid);
		cs->c[cs->n] = self_cpu_ms();
		cs->n++;
		usleep(STEP_MS * 1000);
	}
	return NULL;
}

/*
 * The timeline of a burst that started at @t0 (CLOCK_MONOTONIC ms): per
 * STEP_MS step, the CPUs ibvfd and the clients used (of @ncpu) and the
 * replies that came in it.
 */
static void print_timeline(struct cpu_sampler *cs, struct scale_arg *a, int n, double t0)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char line[4096];
	size_t k = 0;

	printf("   timeline in %d ms steps from the burst's start: CPUs busy (ibvfd + clients, of "
	       "%ld) / replies in the step:\n   ",
	       STEP_MS, ncpu);
	for (int i = 1; i < cs->n && k < sizeof(line) - 32; i++) {
		double dt = cs->t[i] - cs->t[i - 1];
		double busy =
			dt > 0 ? ((cs->d[i] - cs->d[i - 1]) + (cs->c[i] - cs->c[i - 1])) / dt : 0;
		int got = 0;

		for (int j = 0; j < n; j++)
			got += a[j].done_ms > cs->t[i - 1] && a[j].done_ms <= cs->t[i];
		k += (size_t)snprintf(line + k, sizeof(line) - k, " %.0f-%.0f:%.1f/%d",
				      cs->t[i - 1] - t0, cs->t[i] - t0, busy, got);
	}
	printf("%s\n", line);
}

/* The CPU, ms, of one burst from its start line to its last reply. */
struct burst_cpu {
	double ibvfd; /* every thread of ibvfd (schedstat, ns resolution) */
	double loop;  /* ibvfd's main thread: its event loop */
	double bench; /* this process: the client threads (getrusage) */
};

static double task_schedstat_ms(pid_t pid, pid_t tid);

/*
 * @n concurrent clients, one prepare (or release, or @method) each on its
 * own VF; wall ms, from the start line to the last reply. @breakdown: print
 * the prepares' per-step breakdown and the burst's CPU timeline. @cpu (may
 * be NULL): the CPU of the same window (struct burst_sync).
 */
static int64_t scale_burst_m(struct lab *l, int n, int round, bool release, const char *method,
			     bool breakdown, int *fails, int *warm, struct burst_cpu *cpu)
{
	struct scale_arg *a = calloc((size_t)n, sizeof(*a));
	pthread_t *th = calloc((size_t)n, sizeof(*th));
	struct burst_sync bs = {.left = n};
	pthread_attr_t attr;
	struct cpu_sampler *cs = NULL;
	struct burst_cpu c0 = {0}, c1 = {0};
	int64_t t0;
	double tf = 0;

	pthread_barrier_init(&bs.go, NULL, (unsigned)n + 1);
	pthread_barrier_init(&bs.end, NULL, (unsigned)n + 1);
	sem_init(&bs.done, 0, 0);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (int i = 0; i < n; i++) {
		a[i] = (struct scale_arg){.l = l,
					  .i = i,
					  .round = round,
					  .ret = -1,
					  .release = release,
					  .method = method,
					  .bs = &bs};
		pthread_create(&th[i], &attr, scale_one, &a[i]);
	}
	pthread_attr_destroy(&attr);
	/* every client at the start line (a thread between its count and its futex wait is a
	 * few instructions from it) */
	while (__atomic_load_n(&bs.ready, __ATOMIC_ACQUIRE) < n)
		usleep(1000);
	usleep(2000);
	if (breakdown) {
		cs = calloc(1, sizeof(*cs));
		if (cs) {
			cs->pid = l->pid;
			if (pthread_create(&cs->th, NULL, sampler_run, cs)) {
				free(cs);
				cs = NULL;
			}
		}
	}
	c0 = (struct burst_cpu){threads_cpu_ms(l->pid), task_schedstat_ms(l->pid, l->pid),
				self_cpu_ms()};
	pthread_barrier_wait(&bs.go);
	t0 = ibvf_mono_ms();
	tf = now_ms_f();
	while (sem_wait(&bs.done) && errno == EINTR)
		;
	t0 = ibvf_mono_ms() - t0;
	c1 = (struct burst_cpu){threads_cpu_ms(l->pid), task_schedstat_ms(l->pid, l->pid),
				self_cpu_ms()};
	if (cpu)
		*cpu = (struct burst_cpu){c1.ibvfd - c0.ibvfd, c1.loop - c0.loop,
					  c1.bench - c0.bench};
	pthread_barrier_wait(&bs.end);
	*fails = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		/* the ping floor's unknown method is answered with an error: that is its reply */
		if (method && a[i].ret == -EREMOTEIO)
			a[i].ret = 0;
		if (a[i].ret && !*fails)
			fprintf(stderr, "first failure (client %d): %d %s: %s\n", i, a[i].ret,
				a[i].re.step, a[i].re.message);
		*fails += a[i].ret != 0;
	}
	if (warm) /* a warm prepare neither allocates nor programs the VF (attach.c) */
		for (int i = *warm = 0; i < n; i++)
			*warm += !a[i].ret && a[i].timing &&
				 !json_object_get(a[i].timing, "store_allocate") &&
				 !json_object_get(a[i].timing, "vf_program");
	if (cs) {
		__atomic_store_n(&cs->stop, 1, __ATOMIC_RELEASE);
		pthread_join(cs->th, NULL);
	}
	if (breakdown) {
		/* for a profile of the burst alone: perf record -k CLOCK_MONOTONIC, then
		 * perf report --time START,END */
		printf("   burst on CLOCK_MONOTONIC %.6f,%.6f s (barrier to last reply)\n",
		       tf / 1000.0, (tf + (double)t0) / 1000.0);
		print_breakdown(a, n);
	}
	if (cs)
		print_timeline(cs, a, n, tf);
	free(cs);
	for (int i = 0; i < n; i++)
		json_decref(a[i].timing);
	pthread_barrier_destroy(&bs.go);
	pthread_barrier_destroy(&bs.end);
	sem_destroy(&bs.done);
	free(a);
	free(th);
	return t0;
}

static int64_t scale_burst(struct lab *l, int n, int round, bool release, int *fails)
{
	return scale_burst_m(l, n, round, release, NULL, false, fails, NULL, NULL);
}

/* CPU time of thread @tid of process @pid so far, ms (schedstat: ns resolution); -1 if unknown. */
static double task_schedstat_ms(pid_t pid, pid_t tid)
{
	char path[96];
	unsigned long long ns = 0;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	ok = fscanf(f, "%llu", &ns) == 1;
	fclose(f);
	return ok ? (double)ns / 1e6 : -1;
}

/* CPU time of this process (the bench's client threads), ms. */
static double self_cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

/*
 * How many of @n connects at once find the listen backlog full (EAGAIN: the
 * client then sleeps and retries, api_client.c). Each thread connects once,
 * non-blocking, and closes.
 */
struct probe_arg {
	const char *path;
	pthread_barrier_t *bar;
	int eagain;
};

static void *probe_one(void *p)
{
	struct probe_arg *a = p;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->path);
	pthread_barrier_wait(a->bar);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno == EAGAIN)
		a->eagain = 1;
	/* hold the connection until every thread tried: the backlog is what it is */
	pthread_barrier_wait(a->bar);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int backlog_overflows(struct lab *l, int n)
{
	struct probe_arg *a = calloc((size_t)n, sizeof(*a));
	pthread_t *th = calloc((size_t)n, sizeof(*th));
	pthread_barrier_t bar;
	pthread_attr_t attr;
	int full = 0;

	pthread_barrier_init(&bar, NULL, (unsigned)n + 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (int i = 0; i < n; i++) {
		a[i] = (struct probe_arg){l->sock, &bar, 0};
		pthread_create(&th[i], &attr, probe_one, &a[i]);
	}
	pthread_attr_destroy(&attr);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		full += a[i].eagain;
	}
	pthread_barrier_destroy(&bar);
	free(a);
	free(th);
	return full;
}

/* One thread of store_floor(): prepares @from..@to-1's store calls. */
struct store_arg {
	struct ibvf_pool *p;
	int from, to, fails;
	pthread_barrier_t *bar;
};

static void *store_one(void *arg)
{
	struct store_arg *a = arg;
	static const uint16_t pk = 0x80a6;
	char err[512], pci[16];

	pthread_barrier_wait(a->bar);
	for (int i = a->from; i < a->to; i++) {
		struct ibvf_alloc_request rq = {0};
		struct ibvf_alloc out, cur;

		snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "floor%04d", i);
		snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
		snprintf(rq.owner.network, sizeof(rq.owner.network), "lab-net");
		rq.pf = "ib0";
		rq.vf_index = i;
		rq.pci = lab_pci(i, pci);
		rq.pkeys = &pk;
		rq.n_pkeys = 1;
		/* store_read, store_allocate (at sm_requested: attach.c), store_port_ready */
		rq.state = IBVF_ALLOC_SM_REQUESTED;
		if (ibvf_pool_find_owner(a->p, rq.owner.container_id, "net1", &cur, err,
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
 * The store's own rate: the store calls of @n prepares (one read, the
 * allocation at sm_requested, one state write: port_ready), from @threads threads (the daemon's
 * worker count) on a fresh pool with the daemon's sync setting; no daemon. Prints prepares' store
 * sets per second.
 */
static void store_floor(int n, int threads, bool sync_full)
{
	struct ibvf_guid_range r = {LAB_RANGE_START, LAB_RANGE_END};
	char dir[] = "/tmp/ibvf-floor-XXXXXX", err[512], cmd[64];
	struct ibvf_pool_opts o = {.state_dir = dir,
				   .ranges = &r,
				   .n_ranges = 1,
				   .quarantine_s = 1,
				   .sync_full = sync_full};
	struct store_arg a[64];
	pthread_t th[64];
	pthread_barrier_t bar;
	struct ibvf_pool *p;
	int fails = 0;
	double t0, c0;

	if (!mkdtemp(dir) || ibvf_pool_open(&o, &p, err, sizeof(err))) {
		printf("store floor: not run (%s)\n", err);
		return;
	}
	threads = threads > 64 ? 64 : threads;
	pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		a[i] = (struct store_arg){p, n * i / threads, n * (i + 1) / threads, 0, &bar};
		pthread_create(&th[i], NULL, store_one, &a[i]);
	}
	pthread_barrier_wait(&bar);
	t0 = now_ms_f();
	c0 = self_cpu_ms();
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		fails += a[i].fails;
	}
	t0 = now_ms_f() - t0;
	c0 = self_cpu_ms() - c0;
	printf("%-14s %6d %9.0f %11.0f %9s %9s %8s %10s %6d %6s   (floor: the store calls of "
	       "%d prepares, %d threads, sync %s, no daemon; %.0f ms CPU)\n",
	       "store floor", n, t0, n * 1000.0 / (t0 > 0 ? t0 : 1), "-", "-", "-", "-", fails,
	       loadavg(), n, threads, sync_full ? "full" : "normal", c0);
	fflush(stdout);
	pthread_barrier_destroy(&bar);
	ibvf_pool_close(p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
}

/*
 * The floor of a burst of @n, measured on the same daemon: @n clients at
 * once calling a method ibvfd answers on its loop thread with no work (an
 * unknown method: parse, error reply), i.e. the connections and replies
 * alone; and how many of @n simultaneous connects overflow the listen backlog.
 */
static void scale_floor(struct lab *l, int n)
{
	for (int r = 0; r < 2; r++) {
		int fails, full = backlog_overflows(l, n);
		struct burst_cpu cpu = {0};
		int64_t ms = scale_burst_m(l, n, 100 + r, false, "bench.ping", false, &fails, NULL,
					   &cpu);
		double d0 = cpu.ibvfd, b0 = cpu.bench;

		printf("%-14s %6d %9lld %11.0f %9s %9s %8s %10s %6d %6s   (floor: connect + "
		       "request + error reply, no work; %d of %d connects found the listen "
		       "backlog full)\n",
		       "ping floor", n, (long long)ms, n * 1000.0 / (double)(ms ? ms : 1), "-", "-",
		       "-", "-", fails, loadavg(), full, n);
		printf("   CPU of the %d pings: ibvfd %.0f ms, the bench's clients %.0f ms\n", n,
		       d0, b0);
		fflush(stdout);
	}
}

/*
 * Cost growth (issue 17): N = 1, 8, 64, 256, 1024 concurrent prepares on
 * fake VFs, noop SM cold (vf.warm off, the fake driver's default) and warm
 * (vf.warm on, the netlink driver's default: 1,024 warm VFs, the warm pass
 * finished untimed before each burst; how many prepares took a warm VF),
 * and the UFM simulator at 50 / 200 ms: wall time, prepares/s and the SM add
 * calls they took (self-clocking batches: one round trip idle, about two
 * under a burst). Noop rows also print the CPU of ibvfd (its threads'
 * schedstat) and of the bench's client threads (getrusage) per prepare, from
 * the moment every client waits at the start line to the last reply
 * (struct burst_sync: not the clients' thread creation or exit), and the
 * CPU-bound ceiling they make:
 * CPUs / (ibvfd + clients CPU per prepare). BENCH_SCALE=cold|warm runs one
 * noop variant only, BENCH_SCALE_N=<n> one N only (a profile's run).
 */
static void bench_scale(void)
{
	static const int ns[] = {1, 8, 64, 256, 1024};
	static const int lat[] = {-1, -1, 50, 200}; /* -1: noop (cold, then warm) */
	struct ufm_sim_opts so = {.user = "admin", .password = "bench"};
	struct ufm_sim sim;
	const char *miss = ufm_sim_missing(), *only = getenv("BENCH_SCALE");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	bool have_sim = false;
	char err[512];

	printf("\n== cost growth: N concurrent prepares (one each, own fake VF), then N releases;"
	       " sm.batch_window_ms 0, pool.sync %s\n",
	       getenv("BENCH_SYNC") ? getenv("BENCH_SYNC") : "normal (lab)");
	printf("%-14s %6s %9s %11s %9s %9s %8s %10s %6s %6s\n", "SM", "N", "wall ms", "prepares/s",
	       "SM adds", "SM lists", "RTs", "release ms", "fails", "load1");
	if (!miss && !ufm_sim_start(&so, &sim, err, sizeof(err)))
		have_sim = true;
	for (size_t b = 0; b < sizeof(lat) / sizeof(lat[0]); b++) {
		bool warm = b == 1;
		const char *dir = NULL, *name = lat[b] < 0 ? noop_backend(&dir) : "ufm";
		char bj[PATH_MAX + 256] = "{}", label[32];
		struct lab l;

		if (lat[b] >= 0 && !have_sim) {
			printf("ufm sim: not run (%s)\n", miss ? miss : err);
			continue;
		}
		if (lat[b] >= 0 && getenv("BENCH_NOOP_ONLY"))
			continue;
		if (lat[b] < 0 && only && strcmp(only, warm ? "warm" : "cold"))
			continue;
		if (lat[b] >= 0)
			snprintf(bj, sizeof(bj),
				 "{\"address\": \"127.0.0.1\", \"scheme\": \"http\", \"port\": %d,"
				 " \"username\": \"admin\", \"password_file\": \"%s\"}",
				 sim.port, sim.password_file);
		if (lab_init(&l, ibvfd, 1024, name, lat[b] < 0 ? dir : ufm_dir,
			     lat[b] < 0 && strcmp(name, "noop") ? NULL : bj))
			continue;
		l.window_ms = 0;
		l.periodic_s = 3600;
		l.warm = warm;
		if (getenv("BENCH_SYNC"))
			snprintf(l.pool_sync, sizeof(l.pool_sync), "%s", getenv("BENCH_SYNC"));
		if (getenv("BENCH_WORKERS")) /* daemon.workers (default 16) */
			snprintf(l.daemon_extra, sizeof(l.daemon_extra), ", \"workers\": %d",
				 atoi(getenv("BENCH_WORKERS")));
		lab_write_config(&l);
		if (lat[b] >= 0)
			ufm_sim_reset(&sim);
		if (lab_start(&l, 60000) > 0) {
			for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
				int fails, rf, n_warm = -1;
				long c0, c1;
				int64_t ms, rms;

				if ((quick && ns[k] > 256) ||
				    (getenv("BENCH_SCALE_N") &&
				     atoi(getenv("BENCH_SCALE_N")) != ns[k]))
					continue;
				if (warm) {
					/* every VF warm (the released ones re-GUIDed): untimed */
					int64_t w0 = ibvf_mono_ms();

					warm_wait_ms(&l, 1024, 600000);
					printf("   (warm pass before N=%d: %lld ms, not timed)\n",
					       ns[k], (long long)(ibvf_mono_ms() - w0));
				}
				if (lat[b] >= 0) {
					char cfg[64];

					ufm_sim_ctl(&sim, "POST", "/_sim/reset",
						    "{\"keep_state\": true}", NULL);
					snprintf(cfg, sizeof(cfg), "{\"latency_ms\": %d}", lat[b]);
					ufm_sim_config(&sim, cfg);
					c0 = 0;
				} else {
					c0 = daemon_sm_calls(&l);
				}
				/* ibvfd's main thread is its event loop (one thread: a serial part)
				 */
				struct burst_cpu cpu = {0};

				ms = scale_burst_m(&l, ns[k], (int)k, false, NULL,
						   lat[b] < 0 && ns[k] == 1024, &fails, &n_warm,
						   &cpu);
				double d0 = cpu.ibvfd, b0 = cpu.bench, l0 = cpu.loop;
				c1 = lat[b] >= 0 ? ufm_sim_calls(&sim, "add")
						 : daemon_sm_calls(&l) - c0;
				/* prepare reads the new GUID's membership back first (issue 14) */
				long lists = lat[b] >= 0 ? ufm_sim_calls(&sim, "list") : -1;
				rms = scale_burst(&l, ns[k], (int)k, true, &rf);
				snprintf(label, sizeof(label), "%s%s", name, warm ? " warm" : "");
				if (lat[b] >= 0)
					snprintf(label, sizeof(label), "ufm sim %d ms", lat[b]);
				char rts[16] = "-";

				if (lat[b] > 0)
					snprintf(rts, sizeof(rts), "%.2f", (double)ms / lat[b]);
				double rate = ns[k] * 1000.0 / (double)(ms ? ms : 1);

				printf("%-14s %6d %9lld %11.0f %9ld %9ld %8s %10lld %6d %6s\n",
				       label, ns[k], (long long)ms, rate, c1, lists, rts,
				       (long long)rms, fails + rf, loadavg());
				if (lat[b] < 0) {
					double per = (d0 + b0) / ns[k];

					printf("   CPU of the %d prepares (every client at the start "
					       "line to the last reply): ibvfd %.0f ms, the bench's "
					       "clients %.0f ms, in %lld ms of wall on %ld CPUs; %d of "
					       "%d took a warm VF\n",
					       ns[k], d0, b0, (long long)ms, ncpu, n_warm, ns[k]);
					printf("   per prepare: ibvfd %.3f ms + clients %.3f ms = %.3f ms "
					       "of CPU; CPU-bound ceiling %ld / %.3f ms = %.0f/s; "
					       "measured %.0f/s = %.0f%% of it; target 5000/s\n",
					       d0 / ns[k], b0 / ns[k], per, ncpu, per,
					       per > 0 ? ncpu * 1000.0 / per : 0, rate,
					       per > 0 ? 100.0 * rate * per / (ncpu * 1000.0) : 0);
					printf("   of ibvfd's: its event loop thread %.3f ms per prepare "
					       "(one thread: at most %.0f/s), the other threads %.3f ms\n",
					       l0 / ns[k], l0 > 0 ? ns[k] * 1000.0 / l0 : 0,
					       (d0 - l0) / ns[k]);
				}
				fflush(stdout);
			}
			if (lat[b] < 0 && !warm) {
				const char *sy = getenv("BENCH_SYNC");

				scale_floor(&l, quick ? 256 : 1024);
				for (int r = 0; r < 2; r++)
					store_floor(quick ? 256 : 1024, 16,
						    sy && !strcmp(sy, "full"));
			}
		}
		lab_fini(&l);
	}
	if (have_sim)
		ufm_sim_stop(&sim);
	printf("targets: >= 5000 prepares/s at N=1024 (noop); 256 against UFM at 200 ms "
	       "<= 1.5 round trips in 1-2 calls. Floor: a prepare lists the new GUID's SM "
	       "membership (one shared listing, 1 round trip) before its add (1 round trip): "
	       ">= 2 round trips\n");
}

/* --------------------------------------------------------- multi-rail -- */

static int rail_prepare(struct lab *l, const char *cid, const char *ifname, int vf)
{
	char pci[16];
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s}", "container_id", cid, "ifname", ifname,
			      "pod_namespace", "lab", "pod_name", cid, "network", "lab-net");

	return lab_api(l, "prepare",
		       json_pack("{s:o,s:s,s:[{s:s,s:s}]}", "owner", o, "pci", lab_pci(vf, pci),
				 "pkeys", "pkey", "0x00a7", "membership", "full"),
		       NULL, NULL, 70000);
}

static int rail_release(struct lab *l, const char *cid, const char *ifname)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s}", "container_id", cid, "ifname", ifname,
			      "pod_namespace", "lab", "pod_name", cid, "network", "lab-net");

	return lab_api(l, "release", json_pack("{s:o}", "owner", o), NULL, NULL, 70000);
}

/*
 * Multi-rail (issue 17 item 5): one Pod, 8 interfaces on 8 VFs, prepared
 * one after the other as Multus calls the plugin, versus one prepare of a
 * fresh Pod. Medians of several rounds. Fake VFs: the rebind a real VF pays
 * is absent here (warm VFs, item 3, would take it off the path).
 */
static void bench_multirail(void)
{
	static const int lat[] = {-1, 50};
	enum { ROUNDS = 7 };
	struct ufm_sim_opts so = {.user = "admin", .password = "bench"};
	struct ufm_sim sim;
	const char *miss = ufm_sim_missing();
	bool have_sim = false;
	char err[512];

	printf("\n== multi-rail: 8 sequential prepares of one Pod on 8 fake VFs vs 1 prepare "
	       "(median of %d)\n",
	       ROUNDS);
	printf("%-14s %9s %9s %7s %6s\n", "SM", "1 ADD ms", "8 ADDs ms", "ratio", "load1");
	if (!miss && !ufm_sim_start(&so, &sim, err, sizeof(err)))
		have_sim = true;
	for (size_t b = 0; b < 2; b++) {
		const char *dir = NULL, *name = lat[b] < 0 ? noop_backend(&dir) : "ufm";
		char bj[PATH_MAX + 256] = "{}", label[32];
		double one[ROUNDS], eight[ROUNDS];
		struct lab l;

		if (lat[b] >= 0 && (!have_sim || getenv("BENCH_NOOP_ONLY")))
			continue;
		if (lat[b] >= 0)
			snprintf(bj, sizeof(bj),
				 "{\"address\": \"127.0.0.1\", \"scheme\": \"http\", \"port\": %d,"
				 " \"username\": \"admin\", \"password_file\": \"%s\"}",
				 sim.port, sim.password_file);
		if (lab_init(&l, ibvfd, 16, name, lat[b] < 0 ? dir : ufm_dir,
			     lat[b] < 0 && strcmp(name, "noop") ? NULL : bj))
			continue;
		l.window_ms = 0;
		l.periodic_s = 3600;
		lab_write_config(&l);
		if (lat[b] >= 0) {
			char cfg[64];

			ufm_sim_reset(&sim);
			snprintf(cfg, sizeof(cfg), "{\"latency_ms\": %d}", lat[b]);
			ufm_sim_config(&sim, cfg);
		}
		if (lab_start(&l, 60000) > 0) {
			for (int r = 0; r < ROUNDS; r++) {
				char cid[32], ifn[16];
				double t0 = now_ms_f(); /* fake VFs: below 1 ms now */

				snprintf(cid, sizeof(cid), "one%d", r);
				rail_prepare(&l, cid, "net1", 8);
				one[r] = now_ms_f() - t0;
				rail_release(&l, cid, "net1");
				snprintf(cid, sizeof(cid), "rail%d", r);
				t0 = now_ms_f();
				for (int k = 0; k < 8; k++) {
					snprintf(ifn, sizeof(ifn), "net%d", k + 1);
					rail_prepare(&l, cid, ifn, k);
				}
				eight[r] = now_ms_f() - t0;
				for (int k = 0; k < 8; k++) {
					snprintf(ifn, sizeof(ifn), "net%d", k + 1);
					rail_release(&l, cid, ifn);
				}
			}
			qsort(one, ROUNDS, sizeof(double), cmp_d);
			qsort(eight, ROUNDS, sizeof(double), cmp_d);
			snprintf(label, sizeof(label), "%s", name);
			if (lat[b] >= 0)
				snprintf(label, sizeof(label), "ufm sim %d ms", lat[b]);
			printf("%-14s %9.2f %9.2f %7.2f %6s\n", label, one[ROUNDS / 2],
			       eight[ROUNDS / 2], eight[ROUNDS / 2] / (one[ROUNDS / 2] + 1e-9),
			       loadavg());
			fflush(stdout);
		}
		lab_fini(&l);
	}
	if (have_sim)
		ufm_sim_stop(&sim);
	printf("target: 8 ADDs <= 3x one cold ADD (needs warm VFs, item 3, on real hardware)\n");
}

/* CLOCK_MONOTONIC in ms with a fraction (the warm rows are below 1 ms). */
static double now_ms_f(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1000 + (double)ts.tv_nsec / 1e6;
}

/* vf.warm: until status shows @want VFs warm and none being warmed (@ms at most). */
static void warm_wait_ms(struct lab *l, long long want, int ms)
{
	for (int i = 0; i < ms / 50; i++) {
		json_t *r = NULL, *w;
		long long ready = -1, warming = -1;

		if (!lab_api(l, "status", json_object(), &r, NULL, 5000)) {
			w = json_object_get(r, "warm");
			ready = json_integer_value(json_object_get(w, "ready"));
			warming = json_integer_value(json_object_get(w, "warming"));
		}
		json_decref(r);
		if (ready >= want && !warming)
			return;
		usleep(50000);
	}
}

static void warm_wait(struct lab *l, long long want)
{
	warm_wait_ms(l, want, 30000);
}

/*
 * Warm VFs (issue 17 item 3): one ADD (prepare), its DEL (release), and 8
 * sequential ADDs of one Pod (multi-rail), with vf.warm off and on, the fake
 * VF driver's program step (GUID set + rebind) made to take @rebind ms, as a
 * real VF rebind does. Between rounds the warm daemon is let settle (its
 * re-GUIDs run off the DEL's path, as between Pods). Noop SM. Medians.
 */
static void bench_warm(void)
{
	static const int rebind[] = {0, 50, 500};
	enum { ROUNDS = 7 };
	double cold_add = 0;

	printf("\n== warm VFs (vf.warm): ADD, DEL, 8 sequential ADDs of one Pod; noop SM, "
	       "fake VF program step of N ms (median of %d)\n",
	       ROUNDS);
	printf("%-6s %-5s %8s %8s %9s %12s %6s\n", "N ms", "warm", "ADD ms", "DEL ms", "8 ADDs ms",
	       "8/cold ADD", "load1");
	for (size_t d = 0; d < sizeof(rebind) / sizeof(rebind[0]); d++) {
		if (quick && rebind[d] > 50)
			continue;
		for (int warm = 0; warm < 2; warm++) {
			const char *dir = NULL, *name = noop_backend(&dir);
			double one[ROUNDS], del[ROUNDS], eight[ROUNDS];
			char delay[16];
			struct lab l;

			if (lab_init(&l, ibvfd, 16, name, dir, strcmp(name, "noop") ? NULL : "{}"))
				continue;
			snprintf(delay, sizeof(delay), "%d", rebind[d]);
			l.delay_ms = delay;
			l.window_ms = 0;
			l.periodic_s = 3600;
			l.warm = warm;
			lab_write_config(&l);
			if (lab_start(&l, 60000) <= 0) {
				lab_fini(&l);
				continue;
			}
			for (int r = 0; r < ROUNDS; r++) {
				char cid[32], ifn[16];
				double t0;

				if (warm)
					warm_wait(&l, 16);
				snprintf(cid, sizeof(cid), "one%d", r);
				t0 = now_ms_f();
				rail_prepare(&l, cid, "net1", 8);
				one[r] = now_ms_f() - t0;
				t0 = now_ms_f();
				rail_release(&l, cid, "net1");
				del[r] = now_ms_f() - t0;
				if (warm)
					warm_wait(&l, 16);
				snprintf(cid, sizeof(cid), "rail%d", r);
				t0 = now_ms_f();
				for (int k = 0; k < 8; k++) {
					snprintf(ifn, sizeof(ifn), "net%d", k + 1);
					rail_prepare(&l, cid, ifn, k);
				}
				eight[r] = now_ms_f() - t0;
				for (int k = 0; k < 8; k++) {
					snprintf(ifn, sizeof(ifn), "net%d", k + 1);
					rail_release(&l, cid, ifn);
				}
			}
			qsort(one, ROUNDS, sizeof(double), cmp_d);
			qsort(del, ROUNDS, sizeof(double), cmp_d);
			qsort(eight, ROUNDS, sizeof(double), cmp_d);
			if (!warm)
				cold_add = one[ROUNDS / 2];
			printf("%-6d %-5s %8.2f %8.2f %9.2f %12.2f %6s\n", rebind[d],
			       warm ? "on" : "off", one[ROUNDS / 2], del[ROUNDS / 2],
			       eight[ROUNDS / 2], eight[ROUNDS / 2] / cold_add, loadavg());
			fflush(stdout);
			lab_fini(&l);
		}
	}
	printf("target: 8 ADDs <= 3x one cold ADD (8/cold ADD: over the 'off' row's ADD of the "
	       "same N)\n");
}

/* The PCI address of the bench's fake VF @vf (lab_pci() stops at 2,048). */
static const char *bench_pci(int vf, char buf[16])
{
	snprintf(buf, 16, "%04x:%02x:%02x.%d", 1 + (vf >> 16), (vf >> 8) & 0xff, (vf >> 3) & 0x1f,
		 vf & 7);
	return buf;
}

/*
 * Fill the store of @l with @n handed owners (PKey 0x8012), each on its own
 * fake VF carrying its GUID, and the SM file with their memberships.
 */
static int populate(struct lab *l, int n)
{
	struct ibvf_guid_range r = {LAB_RANGE_START, LAB_RANGE_END};
	struct ibvf_pool_opts o = {
		.state_dir = l->state,
		.ranges = &r,
		.n_ranges = 1,
		.quarantine_s = 1,
	};
	struct ibvf_alloc_request *req = calloc(1000, sizeof(*req));
	struct ibvf_alloc *out = calloc(1000, sizeof(*out));
	char(*pci)[16] = calloc(1000, sizeof(*pci));
	struct ibvf_vf_fake_entry *ent = calloc(1000, sizeof(*ent));
	bool vf_files = getenv("BENCH_VF_FILES") && atoi(getenv("BENCH_VF_FILES"));
	static const uint16_t pk = 0x8012;
	struct ibvf_pool *p;
	char err[512], path[256];
	FILE *sm = fopen(l->smfile, "w");
	sqlite3 *db;
	int ret = ibvf_pool_open(&o, &p, err, sizeof(err));

	for (int done = 0; !ret && done < n; done += 1000) {
		int k = n - done < 1000 ? n - done : 1000;

		for (int i = 0; i < k; i++) {
			memset(&req[i], 0, sizeof(req[i]));
			snprintf(req[i].owner.container_id, sizeof(req[i].owner.container_id),
				 "pop%06d", done + i);
			snprintf(req[i].owner.ifname, sizeof(req[i].owner.ifname), "net1");
			snprintf(req[i].owner.network, sizeof(req[i].owner.network), "bench");
			req[i].pf = "ib0";
			req[i].vf_index = done + i;
			req[i].pci = bench_pci(done + i, pci[i]);
			req[i].pkeys = &pk;
			req[i].n_pkeys = 1;
		}
		ret = ibvf_pool_allocate_batch(p, req, (size_t)k, out, err, sizeof(err));
		for (int i = 0; !ret && i < k; i++) {
			fprintf(sm, "0x0012 %016llx full\n", (unsigned long long)out[i].guid);
			ent[i] = (struct ibvf_vf_fake_entry){pci[i], "ib0", done + i, out[i].guid};
			/* BENCH_VF_FILES=1: one fake VF file per VF (the old shape) */
			if (vf_files)
				ret = ibvf_vf_fake_create(l->vfdir, pci[i], "ib0", done + i,
							  out[i].guid, err, sizeof(err));
		}
		/* else the VFs of each PCI bus (256) in one table, read at once (vf_fake.h) */
		if (!ret && !vf_files)
			ret = ibvf_vf_fake_create_table(l->vfdir, ent, (size_t)k, err, sizeof(err));
	}
	if (!ret)
		ibvf_pool_close(p);
	fclose(sm);
	free(req);
	free(out);
	free(pci);
	free(ent);
	if (ret) {
		fprintf(stderr, "populate: %s\n", err);
		return ret;
	}
	/* one statement instead of n updates: these owners are attached ("handed") */
	snprintf(path, sizeof(path), "%s/pool.db", l->state);
	if (sqlite3_open(path, &db) != SQLITE_OK ||
	    sqlite3_exec(db, "UPDATE alloc SET state = 5 WHERE state = 0", NULL, NULL, NULL) !=
		    SQLITE_OK) {
		fprintf(stderr, "populate: %s\n", sqlite3_errmsg(db));
		sqlite3_close(db);
		return -EIO;
	}
	sqlite3_close(db);
	return 0;
}

static const char *loadavg(void)
{
	static char la[64];
	FILE *f = fopen("/proc/loadavg", "r");

	snprintf(la, sizeof(la), "?");
	if (f && fgets(la, sizeof(la), f))
		la[strcspn(la, " ")] = 0; /* the 1-minute figure */
	if (f)
		fclose(f);
	return la;
}

static int count_vf(void *arg, const struct ibvf_attach_vf *vf)
{
	(void)vf;
	(*(long *)arg)++;
	return 0;
}

static int count_rec(void *arg, const struct ibvf_alloc *a)
{
	(void)a;
	(*(long *)arg)++;
	return 0;
}

/*
 * The floor of a start-up pass, measured here: one listing of the fake VF
 * directory (a file read per VF) and one listing of the store, in ms.
 */
static void listing_floor(struct lab *l, int64_t *vf_ms, int64_t *store_ms)
{
	struct ibvf_guid_range r = {LAB_RANGE_START, LAB_RANGE_END};
	struct ibvf_pool_opts o = {
		.state_dir = l->state, .ranges = &r, .n_ranges = 1, .quarantine_s = 1};
	struct ibvf_vf_ops vf;
	struct ibvf_port_ops port;
	struct ibvf_pool *p;
	char err[512];
	long n = 0;
	int64_t t0;

	*vf_ms = *store_ms = -1;
	if (!ibvf_vf_fake_init(l->vfdir, &vf, &port, err, sizeof(err))) {
		t0 = ibvf_mono_ms();
		vf.list(vf.ctx, count_vf, &n, err, sizeof(err));
		*vf_ms = ibvf_mono_ms() - t0;
		ibvf_vf_fake_fini(&vf);
	}
	if (!ibvf_pool_open(&o, &p, err, sizeof(err))) {
		t0 = ibvf_mono_ms();
		ibvf_pool_list(p, NULL, count_rec, &n, err, sizeof(err));
		*store_ms = ibvf_mono_ms() - t0;
		ibvf_pool_close(p);
	}
}

/*
 * Restart to ready (issue 17: 64k owners on 64k VFs < 1 s, linear): start
 * to READY=1, i.e. the start-up reconciliation over every owner, its VF
 * and its SM membership, done. Ratios to the previous size show the growth
 * (2.0 per doubling is linear).
 */
static void bench_rss_restart(void)
{
	static const int sizes[] = {0, 8000, 16000, 32000, 64000};
	const char *other = getenv("BENCH_IBVFD_B"); /* A/B: e.g. main's ibvfd, same state */
	double prev = 0;
	struct lab l;

	printf("\n== restart to ready: N handed owners, each on its own fake VF (%s), SM "
	       "\"file\" backend holding every membership\n",
	       getenv("BENCH_VF_FILES") && atoi(getenv("BENCH_VF_FILES"))
		       ? "one file per VF, BENCH_VF_FILES=1"
		       : "one table per PCI bus of 256 VFs");
	printf("%-8s %10s %10s %12s %9s %8s %9s %9s %s\n", "owners", "RSS kB", "ready ms",
	       "2nd start ms", "x prev", "load1", "VF list", "store list",
	       other ? "  B: 2nd start ms (BENCH_IBVFD_B)" : "");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int64_t t0, t1, t2 = 0;
		long rss = -1;

		if ((quick && sizes[i] > 8000) ||
		    (getenv("BENCH_OWNERS") && atoi(getenv("BENCH_OWNERS")) != sizes[i]))
			continue;
		if (lab_init(&l, ibvfd, 0, "file", test_dir, NULL))
			return;
		l.periodic_s = 3600; /* only the start-up pass */
		lab_write_config(&l);
		if (sizes[i] && populate(&l, sizes[i])) {
			lab_fini(&l);
			return;
		}
		t0 = ibvf_mono_ms();
		if (lab_start(&l, 300000) < 0) {
			lab_fini(&l);
			return;
		}
		t1 = ibvf_mono_ms();
		rss = lab_rss_kb(l.pid);
		if (!lab_api(&l, "list", json_pack("{s:i}", "limit", 100), NULL, NULL, 60000)) {
			long r2 = lab_rss_kb(l.pid);

			rss = r2 > rss ? r2 : rss;
		}
		lab_stop(&l, SIGTERM);
		t2 = ibvf_mono_ms();
		if (lab_start(&l, 300000) > 0)
			t2 = ibvf_mono_ms() - t2;
		else
			t2 = -1;
		lab_stop(&l, SIGTERM);
		{
			int64_t fv, fs;

			listing_floor(&l, &fv, &fs);
			printf("%-8d %10ld %10lld %12lld %9.2f %8s %9lld %9lld", sizes[i], rss,
			       (long long)(t1 - t0), (long long)t2,
			       prev > 0 ? (double)t2 / prev : 0.0, loadavg(), (long long)fv,
			       (long long)fs);
		}
		if (other) {
			int64_t tb;

			l.ibvfd = other;
			tb = ibvf_mono_ms();
			tb = lab_start(&l, 300000) > 0 ? ibvf_mono_ms() - tb : -1;
			l.ibvfd = ibvfd;
			printf("  %lld (load1 %s)", (long long)tb, loadavg());
		}
		printf("\n");
		prev = (double)t2;
		fflush(stdout);
		lab_fini(&l);
	}
	printf("target: 64000 owners on 64000 VFs ready in < 1000 ms, linear (x prev ~2.0); "
	       "VF list / store list: one fake VF listing / one store listing alone, ms (the "
	       "floor of a pass)\n");
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: bench_ibvfd IBVFD SM_MODULE_DIR TEST_MODULE_DIR "
				"UFM_MODULE_DIR [--quick]\n");
		return 2;
	}
	ibvfd = argv[1];
	sm_dir = argv[2];
	test_dir = argv[3];
	ufm_dir = argv[4];
	for (int i = 5; i < argc; i++) {
		quick |= !strcmp(argv[i], "--quick");
		only_attach |= !strcmp(argv[i], "--attach-only");
		only_store |= !strcmp(argv[i], "--store-only");
		only_scale |= !strcmp(argv[i], "--scale-only");
		only_warm |= !strcmp(argv[i], "--warm-only");
		only_burst |= !strcmp(argv[i], "--burst-only");
	}
	signal(SIGPIPE, SIG_IGN);
	{
		/* 1,024 concurrent clients need more than the default 1,024 fds */
		struct rlimit rl;

		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	ibvf_log_init("bench_ibvfd", IBVF_LOG_STDERR, LOG_ERR);
	printf("bench_ibvfd: ibvfd %s on %ld CPUs, load average:", ibvfd,
	       sysconf(_SC_NPROCESSORS_ONLN));
	{
		FILE *f = fopen("/proc/loadavg", "r");
		char la[64] = "?";

		if (f && fgets(la, sizeof(la), f))
			printf(" %s", la);
		if (f)
			fclose(f);
	}
	if (only_warm) {
		bench_warm();
		return 0;
	}
	if (only_burst) {
		bench_burst();
		return 0;
	}
	if (only_scale) {
		bench_scale();
		bench_multirail();
		return 0;
	}
	if (!only_store) {
		bench_attach();
		bench_burst();
		bench_scale();
		bench_multirail();
		bench_warm();
	}
	if (!only_attach)
		bench_rss_restart();
	return 0;
}
