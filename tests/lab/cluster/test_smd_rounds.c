// SPDX-License-Identifier: MIT
/*
 * The SM agent's UFM round trips (issue 19): one real ibvf-smd with the ufm
 * backend (its defaults, change_wait_ms included) in front of the UFM
 * simulator (every request held 300 ms), a real 3-member etcd, a node's
 * `cluster` backend in this process. Counted in the simulator's request log
 * (each request's arrival and reply; requests that overlap are one round
 * trip), never timed:
 *   - a pass from idle: last_updated beside the PKey read, then the add: 3
 *     requests in 2 round trips before the node's add returns;
 *   - the next pass right after it: the list (the previous pass's
 *     verification) beside last_updated, then the add, no PKey read: 3
 *     requests in 2 round trips;
 *   - with nothing more to do, the accepted adds are verified by one list;
 *   - a removal UFM answers 200 without doing it: the node's remove returns
 *     only once UFM's list no longer holds the GUIDs ([safety]: removal
 *     verified before the node may quarantine).
 *   test_smd_rounds IBVF_SMD UFM_MODULE_DIR
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "sm_cluster.h"
#include "ufm_sim_harness.h"

static int failures, checks;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (cond) {                                                                        \
			printf("ok %d - ", checks);                                                \
		} else {                                                                           \
			failures++;                                                                \
			printf("not ok %d - (%s:%d) ", checks, __FILE__, __LINE__);                \
		}                                                                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		fflush(stdout);                                                                    \
	} while (0)

#define USER	   "ibvf-admin"
#define PASSWORD   "s3cret-Pw_9!"
#define PKEY	   0x41
#define FIRST	   0x0200000000190200ull
#define LATENCY_MS 300

static struct etcd_lab lab;
static struct ufm_sim sim;
static const char *smd_bin, *ufm_dir;
static struct etcd_client *etcd;

static pid_t smd_start(void)
{
	char text[8192], path[PATH_MAX], log[PATH_MAX];
	pid_t pid;

	snprintf(text, sizeof(text),
		 "{\"state_dir\": \"%s\", \"run_dir\": \"%s\", \"log_level\": \"info\", "
		 "\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:19:02:00\", \"end\": "
		 "\"02:00:00:00:00:19:02:ff\"}], \"cluster\": {\"endpoints\": [\"%s\", \"%s\", "
		 "\"%s\"], \"prefix\": \"/r/\", \"node\": \"smd-r\"}}, \"sm\": {\"backend\": "
		 "\"ufm\", \"module_dir\": \"%s\", \"config\": {\"address\": \"127.0.0.1\", "
		 "\"port\": %d, \"scheme\": \"http\", \"username\": \"%s\", \"password_file\": "
		 "\"%s\"}}, \"smd\": {\"lease_ttl_s\": 2}, \"http\": {\"enabled\": false}}",
		 lab.dir, lab.dir, lab.urls[0], lab.urls[1], lab.urls[2], ufm_dir, sim.port, USER,
		 sim.password_file);
	etcd_lab_write_file(&lab, "smd-r.json", text, 0600, path, sizeof(path));
	snprintf(log, sizeof(log), "%s/smd-r.log", lab.dir);
	pid = fork();
	if (!pid) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(smd_bin, smd_bin, "-f", "-c", path, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static bool leads(void)
{
	struct etcd_range_result r = {0};
	char err[IBVF_ERR_LEN];
	bool yes = false;

	if (!etcd_range(etcd, "/r/smd/leader/ufm", 0, NULL, 0, 0, false, &r, err, sizeof(err)))
		yes = r.n_kvs > 0;
	etcd_range_result_free(&r);
	return yes;
}

static long stat_of(const char *key)
{
	json_t *j = NULL;
	long v = -1;

	if (ufm_sim_ctl(&sim, "GET", "/_sim/stats", NULL, &j) == 200)
		v = (long)json_integer_value(json_object_get(j, key));
	json_decref(j);
	return v;
}

/* Until the simulator saw no request for 1 s (the agent's start-up list is over). */
static void wait_quiet(void)
{
	long last = -1;

	for (int64_t end = ibvf_mono_ms() + 20000; ibvf_mono_ms() < end;) {
		long now = stat_of("total");

		if (now == last && stat_of("in_flight") == 0)
			return;
		last = now;
		usleep(1000000);
	}
}

/* How many of GUIDs FIRST..FIRST+n-1 UFM holds. */
static int in_ufm(int n)
{
	json_t *j = NULL;
	char *s, hex[32];
	int found = 0;

	if (ufm_sim_ctl(&sim, "GET", "/_sim/state", NULL, &j) != 200) {
		json_decref(j);
		return -1;
	}
	s = json_dumps(j, 0);
	json_decref(j);
	for (int i = 0; s && i < n; i++) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, (uint64_t)(FIRST + (uint64_t)i));
		found += strcasestr(s, hex) != NULL;
	}
	free(s);
	return found;
}

struct rounds {
	int n;		 /* requests that arrived and were answered in the window */
	int rounds;	 /* serial round trips among them */
	int by_ep[8];	 /* requests per endpoint (eps[]) */
	char shape[256]; /* e.g. "last_updated|get_pkey, add" */
};

static const char *const eps[] = {"last_updated", "get_pkey", "add", "list", "delete", "other"};

static int ep_index(const char *ep)
{
	for (int i = 0; i < 5; i++)
		if (!strcmp(ep, eps[i]))
			return i;
	return 5;
}

static int cmp_start(const void *x, const void *y)
{
	double a = json_real_value(json_object_get(*(json_t *const *)x, "t_start"));
	double b = json_real_value(json_object_get(*(json_t *const *)y, "t_start"));

	return a < b ? -1 : a > b;
}

/*
 * The UFM requests that arrived at or after @from_ms and were answered by
 * @to_ms (CLOCK_MONOTONIC ms, the simulator's time.monotonic()), and how
 * many round trips they took in a row: a request that arrives after every
 * earlier one was answered starts a new round trip.
 */
static void rounds_of(int64_t from_ms, int64_t to_ms, struct rounds *r)
{
	json_t *j = NULL, *reqs, *v[256];
	size_t i, n = 0, off = 0;
	double end = -1;

	memset(r, 0, sizeof(*r));
	if (ufm_sim_ctl(&sim, "GET", "/_sim/requests", NULL, &j) != 200) {
		json_decref(j);
		r->rounds = -1;
		return;
	}
	reqs = json_object_get(j, "requests");
	for (i = 0; i < json_array_size(reqs) && n < 256; i++) {
		json_t *q = json_array_get(reqs, i), *te = json_object_get(q, "t_end");
		double ts = json_real_value(json_object_get(q, "t_start"));

		if (ts * 1000 >= (double)from_ms && json_is_real(te) &&
		    json_real_value(te) * 1000 <= (double)to_ms)
			v[n++] = q;
	}
	qsort(v, n, sizeof(*v), cmp_start);
	for (i = 0; i < n; i++) {
		const char *ep = json_string_value(json_object_get(v[i], "endpoint"));
		double ts = json_real_value(json_object_get(v[i], "t_start"));
		double te = json_real_value(json_object_get(v[i], "t_end"));
		bool next = ts >= end;

		if (next) {
			r->rounds++;
			end = te;
		} else if (te > end) {
			end = te;
		}
		r->n++;
		r->by_ep[ep_index(ep ? ep : "other")]++;
		if (off < sizeof(r->shape) - 32)
			off += (size_t)snprintf(r->shape + off, sizeof(r->shape) - off, "%s%s",
						!i     ? ""
						: next ? ", "
						       : "|",
						ep ? ep : "?");
	}
	json_decref(j);
}

static int add(struct ibvf_sm_backend *n, int from, int count, char *err)
{
	struct ibvf_sm_member m[16];

	for (int i = 0; i < count; i++)
		m[i] = (struct ibvf_sm_member){FIRST + (uint64_t)(from + i), IBVF_MEMBER_FULL};
	return cluster_ops.add_members(n, PKEY, m, (size_t)count, NULL, err, IBVF_ERR_LEN);
}

int main(int argc, char **argv)
{
	struct ufm_sim_opts so = {.user = USER, .password = PASSWORD};
	struct etcd_client_opts eo = {.n_endpoints = 3, .timeout_ms = 8000};
	const char *missing = etcd_lab_missing();
	struct ibvf_sm_backend *n1 = NULL;
	char err[IBVF_ERR_LEN] = "", cfg[1024];
	struct rounds r;
	int64_t t0, t1;
	pid_t a;
	int st, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: test_smd_rounds IBVF_SMD UFM_MODULE_DIR\n");
		return 2;
	}
	smd_bin = argv[1];
	ufm_dir = argv[2];
	if (missing)
		return etcd_lab_skip(missing);
	if ((missing = ufm_sim_missing()))
		return ufm_sim_skip(missing);
	if (etcd_lab_start(&lab, 3, err, sizeof(err)) ||
	    ufm_sim_start(&so, &sim, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&lab);
		return 1;
	}
	eo.endpoints = lab.urls;
	if (etcd_client_new(&eo, &etcd, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		return 1;
	}
	snprintf(cfg, sizeof(cfg),
		 "{\"endpoints\":[\"%s\",\"%s\",\"%s\"],\"prefix\":\"/r/\",\"node\":\"n1\","
		 "\"apply_timeout_ms\":30000,\"etcd_timeout_ms\":8000}",
		 lab.urls[0], lab.urls[1], lab.urls[2]);
	CHECK(cluster_ops.init(cfg, &n1, err, sizeof(err)) == 0, "node n1's cluster backend (%s)",
	      err);
	a = smd_start();
	for (int64_t end = ibvf_mono_ms() + 10000; !leads() && ibvf_mono_ms() < end;)
		usleep(20000);
	CHECK(leads(), "ibvf-smd leads group ufm (change_wait_ms: the default)");
	wait_quiet();
	ufm_sim_config(&sim, "{\"latency_ms\": 300}"); /* LATENCY_MS */

	/* a pass from idle */
	t0 = ibvf_mono_ms();
	rc = add(n1, 0, 4, err);
	t1 = ibvf_mono_ms();
	rounds_of(t0, t1, &r);
	printf("# pass from idle: %d UFM request(s) in %d round trip(s): %s\n", r.n, r.rounds,
	       r.shape);
	CHECK(rc == 0 && in_ufm(4) == 4, "n1 adds 4 GUIDs: in UFM when it returns (%s)", err);
	CHECK(r.rounds == 2 && r.n == 3 && r.by_ep[0] == 1 && r.by_ep[1] == 1 && r.by_ep[2] == 1,
	      "that pass: last_updated beside the PKey read, then the add (3 requests, 2 round "
	      "trips before the node's add returns; got %d in %d: %s)",
	      r.n, r.rounds, r.shape);

	/* the next pass at once: the list verifies the first and stands for the PKey read */
	t0 = ibvf_mono_ms();
	rc = add(n1, 4, 4, err);
	t1 = ibvf_mono_ms();
	rounds_of(t0, t1, &r);
	printf("# the next pass: %d UFM request(s) in %d round trip(s): %s\n", r.n, r.rounds,
	       r.shape);
	CHECK(rc == 0 && in_ufm(8) == 8, "n1 adds 4 more: all 8 in UFM when it returns (%s)", err);
	CHECK(r.rounds == 2 && r.n == 3 && r.by_ep[3] == 1 && r.by_ep[0] == 1 && r.by_ep[2] == 1 &&
		      r.by_ep[1] == 0,
	      "that pass: the list (the previous pass's verification) beside last_updated, then "
	      "the add, no PKey read (3 requests, 2 round trips; got %d in %d: %s)",
	      r.n, r.rounds, r.shape);

	/* nothing more: the accepted adds are verified by one list of their own */
	t0 = ibvf_mono_ms();
	for (int64_t end = t0 + 6000; ibvf_mono_ms() < end; usleep(100000)) {
		rounds_of(t0, ibvf_mono_ms(), &r);
		if (r.n)
			break;
	}
	usleep(2 * 1000 * LATENCY_MS);
	rounds_of(t0, ibvf_mono_ms(), &r);
	printf("# idle after the passes: %d UFM request(s): %s\n", r.n, r.shape);
	CHECK(r.n == 1 && r.by_ep[3] == 1,
	      "idle: one list verifies the accepted adds, nothing else (got %d: %s)", r.n, r.shape);

	/* a removal UFM answers 200 without doing it */
	ufm_sim_ctl(&sim, "POST", "/_sim/faults",
		    "{\"faults\": [{\"endpoint\": \"delete\", \"kind\": \"body\", \"status\": 200, "
		    "\"body\": \"{}\", \"count\": 1}]}",
		    NULL);
	{
		uint64_t g[8];
		long del0 = ufm_sim_calls(&sim, "delete");
		int left;

		for (int i = 0; i < 8; i++)
			g[i] = FIRST + (uint64_t)i;
		rc = cluster_ops.remove_members(n1, PKEY, g, 8, err, sizeof(err));
		left = in_ufm(8);
		CHECK(rc == 0 && left == 0,
		      "a DELETE answered 200 but not done: the node's remove returns only once "
		      "UFM's list no longer holds them (%d, %d left, %ld DELETEs: %s)",
		      rc, left, ufm_sim_calls(&sim, "delete") - del0, err);
	}
	kill(a, SIGTERM);
	waitpid(a, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: ibvf-smd exits 0");
	if (failures) {
		char log[PATH_MAX], line[1024];
		FILE *f;

		snprintf(log, sizeof(log), "%s/smd-r.log", lab.dir);
		f = fopen(log, "r");
		while (f && fgets(line, sizeof(line), f))
			printf("# smd: %s", line);
		if (f)
			fclose(f);
	}
	cluster_ops.fini(n1);
	etcd_client_free(etcd);
	ufm_sim_stop(&sim);
	etcd_lab_stop(&lab);
	printf("1..%d\n# %d failure(s)\n", checks, failures);
	return failures ? 1 : 0;
}
