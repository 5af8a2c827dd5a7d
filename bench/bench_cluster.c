// SPDX-License-Identifier: MIT
/*
 * Cluster mode against a real 3-member etcd on loopback (issue 18's
 * benchmarks): block claim latency p50/p99 for one node, 8 nodes claiming
 * at once (wall, requests per claim and per GUID at block_size 256), claims
 * across a leader kill; the local allocation rate of the pool in cluster
 * mode (ibvf_cluster_pool_open(), blocks claimed in the background) against
 * single-node mode (target >= 0.95x); with IBVFD and SM_MODULE_DIR given, the
 * same ratio for whole ibvfd prepare+release cycles, prepares while the
 * leader is killed (how many waited, how long), and N node daemons x 10
 * concurrent prepares each (BENCH_CLUSTER_NODES, default 100: wall,
 * duplicate GUIDs (must be 0), etcd requests per prepare counted by the
 * members themselves (grpc_server_started_total of /metrics; target <=
 * 0.05)); with IBVF_SMD given, the same nodes with sm.backend "cluster" and
 * one ibvf-smd (ufm backend) in front of the UFM simulator at 200 ms
 * (issue 19: UFM requests per burst, wall in UFM round trips, p99 prepare).
 * Prints numbers and the load average, asserts nothing.
 * Usage: bench_cluster [IBVFD SM_MODULE_DIR [IBVF_SMD]]
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "clock.h"
#include "cluster_pool.h"
#include "config.h"
#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "guid_blocks.h"
#include "guid_pool.h"
#include "ibvfd_lab.h"
#include "log.h"
#include "sm_members.h"
#include "ufm_sim_harness.h"

#define BS    256
#define ONE_N 200
#define NODES 8
#define PER   50

static struct etcd_lab lab;
static const struct cluster_range range = {0x0200000000000001ull, 0x02000000ffffffffull};

static int open_node(const char *name, const char *prefix, struct etcd_client **c,
		     struct cluster_blocks **b, char *err)
{
	struct etcd_client_opts eo = {.endpoints = lab.urls, .n_endpoints = 3, .timeout_ms = 10000};
	struct cluster_blocks_opts o = {
		.prefix = prefix, .node = name, .ranges = &range, .n_ranges = 1, .block_size = BS};
	int ret = etcd_client_new(&eo, c, err, IBVF_ERR_LEN);

	o.etcd = *c;
	return ret ? ret : cluster_blocks_open(&o, b, err, IBVF_ERR_LEN);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(int64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_i64);
	return n ? (double)v[(size_t)(p * (double)(n - 1))] / 1000.0 : 0;
}

struct worker {
	struct etcd_client *c;
	struct cluster_blocks *b;
	int n_claims, fails;
	atomic_bool *stop;
	int64_t lat_us[4096];
	int64_t start_us[4096];
	int n_lat;
};

static void *claimer(void *arg)
{
	struct worker *w = arg;
	char err[IBVF_ERR_LEN];

	for (int i = 0; i < w->n_claims && (!w->stop || !atomic_load(w->stop)); i++) {
		struct cluster_block blk;
		int64_t t0 = (int64_t)(ibvf_mono_ns() / 1000);

		if (cluster_blocks_claim(w->b, &blk, err, sizeof(err)))
			w->fails++;
		if (w->n_lat < 4096) {
			w->start_us[w->n_lat] = t0;
			w->lat_us[w->n_lat++] = (int64_t)(ibvf_mono_ns() / 1000) - t0;
		}
	}
	return NULL;
}

/* --------------------------------------------------- shared helpers -- */

static const char *ibvfd_path, *sm_dir;

static void loadavg(double l[3])
{
	FILE *f = fopen("/proc/loadavg", "r");

	l[0] = l[1] = l[2] = -1;
	if (f) {
		if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3)
			l[0] = -1;
		fclose(f);
	}
}

static void print_load(const char *when)
{
	double l[3];

	loadavg(l);
	printf("  (load average %s: %.2f %.2f %.2f)\n", when, l[0], l[1], l[2]);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* the blocks etcd gives @node under @prefix (layout @r, @bs), -1 on error */
static int blocks_of(const char *prefix, const char *node, const struct cluster_range *r, int bs)
{
	struct etcd_client_opts eo = {.endpoints = lab.urls, .n_endpoints = 3, .timeout_ms = 10000};
	struct cluster_blocks_opts o = {.prefix = prefix,
					.node = "bench-checker",
					.ranges = r,
					.n_ranges = 1,
					.block_size = bs};
	struct etcd_client *c = NULL;
	struct cluster_blocks *b = NULL;
	struct cluster_block *all = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0;
	int ret = -1;

	if (!etcd_client_new(&eo, &c, err, sizeof(err))) {
		o.etcd = c;
		if (!cluster_blocks_open(&o, &b, err, sizeof(err)) &&
		    !cluster_blocks_list(b, node, &all, &n, err, sizeof(err)))
			ret = (int)n;
	}
	if (ret < 0)
		fprintf(stderr, "bench_cluster: blocks of %s: %s\n", node, err);
	free(all);
	cluster_blocks_free(b);
	etcd_client_free(c);
	return ret;
}

static const struct cluster_range lab_range = {LAB_RANGE_START, LAB_RANGE_END};

/* ---------------------------------------- 4. local allocation rate -- */

/* BENCH_CLUSTER_BLOCK: the block size of this part (default 256; 64..65536) */
static int local_bs = BS;
static char rate_prefix[64] = "/bench/rate/";

static void owner_of(struct ibvf_alloc_request *rq, unsigned long i)
{
	memset(rq, 0, sizeof(*rq));
	snprintf(rq->owner.container_id, sizeof(rq->owner.container_id), "%064lx",
		 i * 0x9e3779b97f4a7c15ul);
	snprintf(rq->owner.ifname, sizeof(rq->owner.ifname), "net1");
	snprintf(rq->owner.pod_namespace, sizeof(rq->owner.pod_namespace), "bench");
	snprintf(rq->owner.pod_name, sizeof(rq->owner.pod_name), "pod-%lu", i);
	rq->vf_index = -1;
}

/*
 * @n single allocations (one transaction each, quarantine 600 s so each
 * takes a new GUID) from a pool opened as ibvfd opens it: single-node mode
 * (the configured range) or cluster mode (ibvf_cluster_pool_open(), the
 * claimer attached: blocks of 256 claimed in the background below 64 free).
 * Return: allocations per second, -1 on error; *@waits: allocations that
 * found the blocks empty and were retried (1 ms).
 */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* @cpu_us: this process's CPU time per allocation (the claimer thread's included) */
static double pool_rate(bool cluster, int run, int n, int split, int *waits, int *blocks,
			double *cpu_us)
{
	double c0;
	struct ibvf_guid_range *sr = NULL;
	char dir[] = "/tmp/bench-cluster-XXXXXX", path[512], state[512], node[32],
	     err[IBVF_ERR_LEN];
	struct ibvf_config cfg;
	struct ibvf_cluster_hb *hb = NULL;
	struct ibvf_pool *p = NULL;
	double rate = -1;
	int64_t t0;
	FILE *f;
	int ret;

	*waits = 0;
	*blocks = 0;
	*cpu_us = 0;
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/ibvfd.json", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(node, sizeof(node), "rate-%d", run);
	mkdir(state, 0700);
	f = fopen(path, "w");
	if (!f)
		goto out_dir;
	fprintf(f,
		"{\"state_dir\": \"%s\", \"pool\": {\"ranges\": [{\"start\": \"0x%016" PRIx64
		"\", \"end\": \"0x%016" PRIx64 "\"}], \"quarantine_s\": 600, \"sync\": \"normal\"",
		state, range.start, range.end);
	if (cluster)
		fprintf(f,
			", \"cluster\": {\"endpoints\": [\"%s\", \"%s\", \"%s\"], \"prefix\": "
			"\"%s\", \"node\": \"%s\", \"block_size\": %d, \"low_watermark\": "
			"64}",
			lab.urls[0], lab.urls[1], lab.urls[2], rate_prefix, node, local_bs);
	fprintf(f, "}}\n");
	fclose(f);
	if (ibvf_config_load(&cfg, path, true, NULL, err, sizeof(err))) {
		fprintf(stderr, "bench_cluster: %s\n", err);
		goto out_dir;
	}
	{
		struct ibvf_pool_opts o = {.state_dir = cfg.state_dir,
					   .ranges = cfg.pool.ranges,
					   .n_ranges = cfg.pool.n_ranges,
					   .quarantine_s = cfg.pool.quarantine_s,
					   .sync_full = cfg.pool.sync_full};

		/* @split: single-node, the range cut into that many blocks (no etcd): what
		 * the pool's own speed is with as many ranges as cluster mode ends with */
		if (!cluster && split > 0 && (sr = calloc((size_t)split, sizeof(*sr)))) {
			for (int i = 0; i < split; i++) {
				sr[i].start = range.start + (uint64_t)i * local_bs;
				sr[i].end = sr[i].start + local_bs - 1;
			}
			o.ranges = sr;
			o.n_ranges = (size_t)split;
		}
		ret = cluster ? ibvf_cluster_pool_open(&cfg, &o, &p, &hb, err, sizeof(err))
			      : ibvf_pool_open(&o, &p, err, sizeof(err));
	}
	if (ret) {
		fprintf(stderr, "bench_cluster: pool open: %s\n", err);
		goto out_cfg;
	}
	if (hb)
		ibvf_cluster_hb_attach(hb, p, NULL, NULL, NULL);
	t0 = (int64_t)ibvf_mono_ns();
	c0 = cpu_s();
	for (int i = 0; i < n; i++) {
		struct ibvf_alloc_request rq;
		struct ibvf_alloc a;

		owner_of(&rq, (unsigned long)i);
		ret = ibvf_pool_allocate(p, &rq, &a, err, sizeof(err));
		if (ret == -ENOSPC && cluster && *waits < 100000) {
			char why[IBVF_ERR_LEN + 64];

			/* as the engine does: the blocks are used up, ask the claimer (a
			 * kick) and answer not ready; the client retries */
			(*waits)++;
			ibvf_cluster_ready(hb, why, sizeof(why));
			usleep(1000);
			i--;
			continue;
		}
		if (ret) {
			fprintf(stderr, "bench_cluster: allocate: %s\n", err);
			break;
		}
		if (i == n - 1) {
			rate = (double)n * 1e9 / (double)((int64_t)ibvf_mono_ns() - t0);
			*cpu_us = (cpu_s() - c0) * 1e6 / n;
		}
	}
	if (hb) {
		ibvf_cluster_hb_attach(hb, NULL, NULL, NULL, NULL);
		ibvf_cluster_hb_stop(hb);
		*blocks = blocks_of(rate_prefix, node, &range, local_bs);
	}
	ibvf_pool_close(p);
out_cfg:
	ibvf_config_free(&cfg);
	free(sr);
out_dir:
	rm_tree(dir);
	return rate;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void bench_local_rate(void)
{
	enum { RUNS = 3, N = 12000 };
	double single[RUNS], clus[RUNS], split[RUNS], cs[RUNS], cc[RUNS], cx[RUNS];
	const char *bse = getenv("BENCH_CLUSTER_BLOCK");
	int waits = 0, blocks = 0, w, b, nsplit;

	if (bse && atoi(bse) >= 64 && atoi(bse) <= 65536)
		local_bs = atoi(bse);
	snprintf(rate_prefix, sizeof(rate_prefix), "/bench/rate-%d/", local_bs);
	nsplit = N / local_bs + 2;

	/* alternated, so that the shared machine's load hits all alike;
	 * BENCH_CLUSTER_ONLY=local-cluster runs the cluster mode alone (for perf) */
	const char *only = getenv("BENCH_CLUSTER_ONLY");
	bool all = !only || strcmp(only, "local-cluster");

	for (int r = 0; r < RUNS; r++) {
		single[r] = all ? pool_rate(false, r, N, 0, &w, &b, &cs[r]) : (cs[r] = 0);
		clus[r] = pool_rate(true, r, N, 0, &w, &b, &cc[r]);
		waits += w;
		blocks += b;
		split[r] = all ? pool_rate(false, r, N, nsplit, &w, &b, &cx[r]) : (cx[r] = 0);
	}
	qsort(single, RUNS, sizeof(double), cmp_dbl);
	qsort(clus, RUNS, sizeof(double), cmp_dbl);
	qsort(split, RUNS, sizeof(double), cmp_dbl);
	qsort(cs, RUNS, sizeof(double), cmp_dbl);
	qsort(cc, RUNS, sizeof(double), cmp_dbl);
	qsort(cx, RUNS, sizeof(double), cmp_dbl);
	printf("local allocation rate (pool as ibvfd opens it, %d allocations x %d runs, "
	       "medians): single-node %.0f/s (%.1f us CPU each), cluster %.0f/s (%.1f us CPU "
	       "each; %d blocks of %d claimed in the background, %d allocations waited for "
	       "one): ratio %.3fx wall, %.3fx CPU (target >= 0.95x); single-node with its range "
	       "cut into %d ranges (no etcd) %.0f/s (%.1f us): %.3fx\n",
	       N, RUNS, single[RUNS / 2], cs[RUNS / 2], clus[RUNS / 2], cc[RUNS / 2], blocks,
	       local_bs, waits, single[RUNS / 2] > 0 ? clus[RUNS / 2] / single[RUNS / 2] : 0,
	       cc[RUNS / 2] > 0 ? cs[RUNS / 2] / cc[RUNS / 2] : 0, nsplit, split[RUNS / 2],
	       cx[RUNS / 2], single[RUNS / 2] > 0 ? split[RUNS / 2] / single[RUNS / 2] : 0);
	print_load("after");
}

/* ------------------------------------------------ ibvfd node helpers -- */

/*
 * a lab ibvfd with SM backend @backend (its config object text @backend_json);
 * @cluster_json: pool.cluster, NULL for single-node
 */
static int node_init_sm(struct lab *l, int n_vfs, int quarantine_s, json_t *cluster_json,
			const char *backend, const char *backend_json)
{
	char mod[4096];
	json_t *j;
	int ret;

	snprintf(mod, sizeof(mod), "%s/%s", sm_dir, backend);
	if (lab_init(l, ibvfd_path, n_vfs, backend, mod, backend_json)) {
		json_decref(cluster_json);
		return -1;
	}
	j = json_load_file(l->cfg, 0, NULL);
	if (!j) {
		json_decref(cluster_json);
		return -1;
	}
	json_object_set_new(json_object_get(j, "pool"), "quarantine_s", json_integer(quarantine_s));
	/*
	 * HTTP on a port the kernel picks: with the default (9479) the 100
	 * nodes of bench_scale() all bound one port, 99 of them failing and
	 * retrying every 2 s through the prepares (and any other ibvfd on the
	 * machine took it from them)
	 */
	json_object_set_new(j, "http", json_pack("{s:i}", "port", 0));
	if (cluster_json)
		json_object_set_new(json_object_get(j, "pool"), "cluster", cluster_json);
	ret = json_dump_file(j, l->cfg, JSON_INDENT(1));
	json_decref(j);
	return ret;
}

/* a lab ibvfd with the noop SM backend; @cluster_json: pool.cluster, NULL for single-node */
static int node_init(struct lab *l, int n_vfs, int quarantine_s, json_t *cluster_json)
{
	return node_init_sm(l, n_vfs, quarantine_s, cluster_json, "noop", "{}");
}

static json_t *cluster_cfg(const char *prefix, int block, int low, const char *node)
{
	json_t *c = json_pack("{s:[s,s,s],s:s,s:i,s:i,s:i}", "endpoints", lab.urls[0], lab.urls[1],
			      lab.urls[2], "prefix", prefix, "block_size", block, "low_watermark",
			      low, "timeout_ms", 1500);

	if (c && node)
		json_object_set_new(c, "node", json_string(node));
	return c;
}

struct cyc {
	struct lab *l;
	int vf, n, fails, not_ready;
	atomic_bool *stop;
	int64_t start_ms[8192], lat_ms[8192];
	int done;
};

/* prepare+release cycles on one VF; a not-ready answer is retried (20 ms) within the prepare */
static void *cyc_main(void *arg)
{
	struct cyc *c = arg;

	for (int i = 0; i < c->n && c->done < 8192 && (!c->stop || !atomic_load(c->stop)); i++) {
		char cid[48];
		int64_t t0 = ibvf_mono_ms();
		int ret;

		snprintf(cid, sizeof(cid), "c%d-%d", c->vf, i);
		for (;;) {
			struct ibvf_rpc_error re = {0};

			ret = lab_prepare(c->l, cid, c->vf, NULL, NULL, &re);
			if (!ret || re.code != IBVF_RPC_NOT_READY || ibvf_mono_ms() - t0 > 20000)
				break;
			c->not_ready++;
			usleep(20000);
		}
		c->fails += ret != 0;
		c->start_ms[c->done] = t0;
		c->lat_ms[c->done++] = ibvf_mono_ms() - t0;
		lab_release(c->l, cid);
	}
	return NULL;
}

/* ------------------------------------- 5. ibvfd prepare rate ratio -- */

static double daemon_rate(bool cluster, int run, int *fails, int *not_ready)
{
	enum { CONC = 8, CYCLES = 100 };
	static struct cyc c[CONC];
	pthread_t th[CONC];
	char node[32];
	struct lab l;
	double rate = -1;
	int64_t t0;

	*fails = 0;
	*not_ready = 0;
	snprintf(node, sizeof(node), "drate-%d", run);
	if (node_init(&l, CONC, 600, cluster ? cluster_cfg("/bench/drate/", BS, 64, node) : NULL) ||
	    lab_start(&l, 30000) < 0) {
		fprintf(stderr, "bench_cluster: ibvfd did not start (%s)\n", l.log);
		lab_fini(&l);
		return -1;
	}
	t0 = ibvf_mono_ms();
	for (int i = 0; i < CONC; i++) {
		c[i] = (struct cyc){.l = &l, .vf = i, .n = CYCLES};
		pthread_create(&th[i], NULL, cyc_main, &c[i]);
	}
	for (int i = 0; i < CONC; i++) {
		pthread_join(th[i], NULL);
		*fails += c[i].fails;
		*not_ready += c[i].not_ready;
	}
	rate = (double)(CONC * CYCLES) * 1000.0 / (double)(ibvf_mono_ms() - t0 + 1);
	lab_stop(&l, SIGTERM);
	lab_fini(&l);
	return rate;
}

static void bench_daemon_rate(void)
{
	enum { RUNS = 3 };
	double single[RUNS], clus[RUNS];
	int fails = 0, f, nr = 0, n;

	for (int r = 0; r < RUNS; r++) {
		single[r] = daemon_rate(false, r, &f, &n);
		fails += f;
		clus[r] = daemon_rate(true, r, &f, &n);
		fails += f;
		nr += n;
	}
	qsort(single, RUNS, sizeof(double), cmp_dbl);
	qsort(clus, RUNS, sizeof(double), cmp_dbl);
	printf("ibvfd prepare+release cycles (8 clients x 100, fake VFs, noop SM, quarantine 600 s, "
	       "medians of %d): single-node %.0f/s, cluster %.0f/s: ratio %.3fx (target >= 0.95x); "
	       "%d failed; in cluster mode %d not-ready answers (blocks used up before the "
	       "next claim), retried after 20 ms\n",
	       RUNS, single[RUNS / 2], clus[RUNS / 2],
	       single[RUNS / 2] > 0 ? clus[RUNS / 2] / single[RUNS / 2] : 0, fails, nr);
	print_load("after");
}

/* ------------------------------------ 6. prepares during a leader change -- */

static void bench_leader_prepares(void)
{
	enum { CONC = 4 };
	static struct cyc c[CONC];
	pthread_t th[CONC];
	atomic_bool stop = false;
	struct lab l;
	int64_t kill_ms, base[8192], worst = 0, base_p99 = 0, limit;
	int nb = 0, after = 0, waited = 0, fails = 0, nr = 0, leader, b0, b1;
	char err[256];

	if (node_init(&l, CONC, 600, cluster_cfg("/bench/lprep/", 16, 4, "lprep")) ||
	    lab_start(&l, 30000) < 0) {
		fprintf(stderr, "bench_cluster: ibvfd did not start (%s)\n", l.log);
		lab_fini(&l);
		return;
	}
	b0 = blocks_of("/bench/lprep/", "lprep", &lab_range, 16);
	for (int i = 0; i < CONC; i++) {
		c[i] = (struct cyc){.l = &l, .vf = i, .n = 1 << 20, .stop = &stop};
		pthread_create(&th[i], NULL, cyc_main, &c[i]);
	}
	usleep(1500000);
	leader = etcd_lab_leader(&lab);
	kill_ms = ibvf_mono_ms();
	etcd_lab_member_stop(&lab, leader < 0 ? 0 : leader, true);
	usleep(4000000);
	atomic_store(&stop, true);
	for (int i = 0; i < CONC; i++) {
		pthread_join(th[i], NULL);
		fails += c[i].fails;
		nr += c[i].not_ready;
		for (int k = 0; k < c[i].done; k++)
			if (c[i].start_ms[k] + c[i].lat_ms[k] < kill_ms && nb < 8192)
				base[nb++] = c[i].lat_ms[k];
	}
	qsort(base, (size_t)nb, sizeof(base[0]), cmp_i64);
	base_p99 = nb ? base[(nb * 99) / 100] : 0;
	limit = base_p99 * 3 > 50 ? base_p99 * 3 : 50;
	for (int i = 0; i < CONC; i++)
		for (int k = 0; k < c[i].done; k++) {
			if (c[i].start_ms[k] + c[i].lat_ms[k] < kill_ms)
				continue;
			after++;
			waited += c[i].lat_ms[k] > limit;
			if (c[i].lat_ms[k] > worst)
				worst = c[i].lat_ms[k];
		}
	b1 = blocks_of("/bench/lprep/", "lprep", &lab_range, 16);
	printf("prepares while the leader (member %d) is killed (ibvfd, block_size 16, low "
	       "watermark 4, quarantine 600 s, %d clients): %d prepares before (p99 %" PRId64
	       " ms), %d after the kill, %d waited > %" PRId64 " ms (the longest %" PRId64
	       " ms), %d not-ready answers retried, %d failed; %d blocks claimed in all\n",
	       leader, CONC, nb, base_p99, after, waited, limit, worst, nr, fails, b1 - b0);
	lab_stop(&l, SIGTERM);
	lab_fini(&l);
	if (etcd_lab_member_start(&lab, leader < 0 ? 0 : leader, err, sizeof(err)))
		fprintf(stderr, "bench_cluster: member restart: %s\n", err);
	etcd_lab_wait_writable(&lab, 20000);
	print_load("after");
}

/* ------------------------------------- 7. N node daemons x 10 prepares -- */

/* etcd's own count of the requests it served: grpc_server_started_total of every member */
static size_t sink(char *p, size_t sz, size_t n, void *arg)
{
	FILE *f = arg;

	return fwrite(p, sz, n, f);
}

static double etcd_requests(void)
{
	double sum = 0;

	for (int m = 0; m < lab.n; m++) {
		char url[128], *buf = NULL, *line, *save = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		CURL *c = curl_easy_init();

		if (!f || !c) {
			if (f)
				fclose(f);
			curl_easy_cleanup(c);
			free(buf);
			return -1;
		}
		snprintf(url, sizeof(url), "%s/metrics", lab.m[m].url);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
		curl_easy_perform(c);
		curl_easy_cleanup(c);
		fclose(f);
		for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *sp;

			if (strncmp(line, "grpc_server_started_total{", 26))
				continue;
			sp = strrchr(line, ' ');
			if (sp)
				sum += strtod(sp + 1, NULL);
		}
		free(buf);
	}
	return sum;
}

/* as lab_start(), without waiting: all nodes start at once (NODE_NAME names each) */
static void node_launch(struct lab *l, const char *node)
{
	pid_t pid;

	lab_drain_notify(l);
	pid = fork();
	if (pid == 0) {
		int fd = open(l->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(fd, 2);
		dup2(fd, 1);
		setenv("NOTIFY_SOCKET", l->notify, 1);
		setenv("NODE_NAME", node, 1);
		close_range(3, ~0U, 0); /* not the lab lock's fd (ibvfd_lab.c lab_start()) */
		execl(l->ibvfd, "ibvfd", "-f", "-c", l->cfg, (char *)NULL);
		_exit(127);
	}
	l->pid = pid;
}

/* wait for READY=1 from @n launched nodes (120 s each); -1 when one is not ready */
static int nodes_wait_ready(struct lab *l, int n)
{
	for (int i = 0; i < n; i++)
		if (!lab_wait_notify(&l[i], "READY=1", 120000)) {
			fprintf(stderr, "bench_cluster: node %d not ready (see %s)\n", i, l[i].log);
			return -1;
		}
	return 0;
}

struct scale_job {
	struct lab *l;
	int vf;
	uint64_t guid;
	int fail;
	int64_t lat_ms; /* the prepare's wall time */
	char why[160];	/* a failed prepare's error */
	pthread_barrier_t *bar;
};

static void *scale_main(void *arg)
{
	struct scale_job *j = arg;
	struct ibvf_rpc_error re = {0};
	json_t *res = NULL;
	char cid[32];
	int ret;

	snprintf(cid, sizeof(cid), "s-%d", j->vf);
	pthread_barrier_wait(j->bar);
	j->lat_ms = ibvf_mono_ms();
	ret = lab_prepare(j->l, cid, j->vf, NULL, &res, &re);
	j->lat_ms = ibvf_mono_ms() - j->lat_ms;
	if (ret) {
		j->fail = 1;
		snprintf(j->why, sizeof(j->why), "%d %.100s (step %.20s)", ret, re.message,
			 re.step);
	} else {
		const char *s = json_string_value(json_object_get(res, "guid"));

		j->fail = !s || ibvf_guid_parse(s, &j->guid, NULL, 0);
	}
	json_decref(res);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void bench_scale(void)
{
	const char *env = getenv("BENCH_CLUSTER_NODES");
	int nn = env ? atoi(env) : 100, per = 10, started = 0, fails = 0, dups = 0, nj = 0;
	struct lab *l = calloc((size_t)(nn > 0 ? nn : 1), sizeof(*l));
	struct scale_job *jobs = calloc((size_t)(nn > 0 ? nn : 1) * 10, sizeof(*jobs));
	pthread_t *th = calloc((size_t)(nn > 0 ? nn : 1) * 10, sizeof(*th));
	uint64_t *g = calloc((size_t)(nn > 0 ? nn : 1) * 10, sizeof(*g));
	pthread_barrier_t bar;
	pthread_attr_t at;
	double r_start, r_ready, r_end;
	int64_t t_start, t_ready, t0, wall;
	long rss = 0;

	if (!l || !jobs || !th || !g || nn < 1)
		goto out;
	r_start = etcd_requests();
	t_start = ibvf_mono_ms();
	for (int i = 0; i < nn; i++) {
		char node[32];

		snprintf(node, sizeof(node), "scale-%03d", i);
		if (node_init(&l[i], per, 60, cluster_cfg("/bench/scale/", BS, 64, NULL))) {
			fprintf(stderr, "bench_cluster: node %d: lab_init failed\n", i);
			break;
		}
		started++;
		node_launch(&l[i], node);
	}
	if (nodes_wait_ready(l, started))
		goto stop;
	t_ready = ibvf_mono_ms();
	r_ready = etcd_requests();
	for (int i = 0; i < started; i++)
		rss += lab_rss_kb(l[i].pid);
	pthread_barrier_init(&bar, NULL, (unsigned)(started * per + 1));
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	for (int i = 0; i < started; i++)
		for (int v = 0; v < per; v++) {
			jobs[nj] = (struct scale_job){.l = &l[i], .vf = v, .bar = &bar};
			if (pthread_create(&th[nj], &at, scale_main, &jobs[nj])) {
				fprintf(stderr, "bench_cluster: thread %d: no thread\n", nj);
				/* the barrier counts it: nobody would start */
				exit(1);
			}
			nj++;
		}
	pthread_barrier_wait(&bar);
	t0 = ibvf_mono_ms();
	for (int k = 0; k < nj; k++) {
		pthread_join(th[k], NULL);
		fails += jobs[k].fail;
		g[k] = jobs[k].fail ? 0 : jobs[k].guid;
	}
	wall = ibvf_mono_ms() - t0;
	r_end = etcd_requests();
	qsort(g, (size_t)nj, sizeof(*g), cmp_u64);
	for (int k = 1; k < nj; k++)
		dups += g[k] && g[k] == g[k - 1];
	printf("%d node daemons x %d concurrent prepares (%d in all): all nodes ready %.1f s "
	       "after the first start (%.0f etcd requests, %.1f per node; RSS %ld kB per "
	       "node), prepares wall %" PRId64 " ms, %d failed, %d duplicate GUIDs (must be "
	       "0); etcd requests during the prepares %.0f = %.3f per prepare (target <= "
	       "0.05), with the start-up claims %.3f per prepare\n",
	       started, per, nj, (double)(t_ready - t_start) / 1000.0, r_ready - r_start,
	       (r_ready - r_start) / started, started ? rss / started : 0, wall, fails, dups,
	       r_end - r_ready, (r_end - r_ready) / nj, (r_end - r_start) / nj);
	pthread_attr_destroy(&at);
	pthread_barrier_destroy(&bar);
stop:
	for (int i = 0; i < started; i++)
		if (l[i].pid > 0)
			kill(l[i].pid, SIGTERM);
	for (int i = 0; i < started; i++) {
		lab_stop(&l[i], SIGTERM);
		lab_fini(&l[i]);
	}
	print_load("after");
out:
	free(l);
	free(jobs);
	free(th);
	free(g);
}

/* --------- 8. N nodes (sm.backend cluster) x 10 prepares, one ibvf-smd (ufm) -- */

static const char *smd_path;

#define SMD_USER     "ibvf-admin"
#define SMD_PASSWORD "bench-Pw_19!"
#define SMD_PREFIX   "/bench/smd/"	 /* the burst at the latency */
#define FLOOR_PREFIX "/bench/smd-floor/" /* the floor at 0 ms: its own keys */

/* the simulator's request counters: "total" and each endpoint's (caller decrefs) */
static json_t *sim_stats(struct ufm_sim *sim)
{
	json_t *j = NULL;

	if (ufm_sim_ctl(sim, "GET", "/_sim/stats", NULL, &j) != 200) {
		json_decref(j);
		return NULL;
	}
	return j;
}

static long stat_delta(json_t *a, json_t *b, const char *key)
{
	return (long)(json_integer_value(json_object_get(b, key)) -
		      json_integer_value(json_object_get(a, key)));
}

/* ibvf-smd (etcd prefix @prefix) with the ufm backend in front of @sim, its files in @dir; the pid
 * or -1 */
static pid_t smd_launch(const char *dir, const char *prefix, struct ufm_sim *sim)
{
	char cfg[PATH_MAX], log[PATH_MAX];
	FILE *f;
	pid_t pid;

	snprintf(cfg, sizeof(cfg), "%s/smd.json", dir);
	snprintf(log, sizeof(log), "%s/smd.log", dir);
	f = fopen(cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
		"{\"state_dir\": \"%s\", \"run_dir\": \"%s\", \"log_level\": \"info\", "
		"\"pool\": {\"ranges\": [{\"start\": \"0x%016" PRIx64 "\", \"end\": \"0x%016" PRIx64
		"\"}], \"cluster\": {\"endpoints\": [\"%s\", \"%s\", \"%s\"], \"prefix\": \"%s\", "
		"\"node\": \"bench-smd\"}}, \"sm\": {\"backend\": \"ufm\", \"module_dir\": "
		"\"%s/ufm\", \"config\": {\"address\": \"127.0.0.1\", \"port\": %d, \"scheme\": "
		"\"http\", \"username\": \"%s\", \"password_file\": \"%s\"}}, \"http\": "
		"{\"enabled\": false}}\n",
		dir, dir, lab_range.start, lab_range.end, lab.urls[0], lab.urls[1], lab.urls[2],
		prefix, sm_dir, sim->port, SMD_USER, sim->password_file);
	fclose(f);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		unsetenv("NOTIFY_SOCKET");
		close_range(3, ~0U, 0);
		execl(smd_path, "ibvf-smd", "-f", "-c", cfg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* wait (@ms) until an agent holds the ufm group's leader key under @prefix */
static bool smd_wait_leader(const char *prefix, int ms)
{
	char k[128];
	struct etcd_client_opts eo = {.endpoints = lab.urls, .n_endpoints = 3, .timeout_ms = 5000};
	struct etcd_client *c = NULL;
	char err[IBVF_ERR_LEN];
	bool led = false;

	if (etcd_client_new(&eo, &c, err, sizeof(err)))
		return false;
	for (int64_t end = ibvf_mono_ms() + ms; !led && ibvf_mono_ms() < end; usleep(20000)) {
		struct etcd_range_result r = {0};

		snprintf(k, sizeof(k), "%ssmd/leader/ufm", prefix);
		if (!etcd_range(c, k, 0, NULL, 0, 0, false, &r, err, sizeof(err)))
			led = r.n_kvs > 0;
		etcd_range_result_free(&r);
	}
	etcd_client_free(c);
	return led;
}

/* how many of @g[0..n) (0: none) UFM's state holds */
static int sim_holds(struct ufm_sim *sim, const uint64_t *g, int n)
{
	json_t *j = NULL;
	char *s, hex[32];
	int found = 0;

	if (ufm_sim_ctl(sim, "GET", "/_sim/state", NULL, &j) != 200) {
		json_decref(j);
		return -1;
	}
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	for (int i = 0; s && i < n; i++) {
		if (!g[i])
			continue;
		snprintf(hex, sizeof(hex), "%016" PRIx64, g[i]);
		found += strcasestr(s, hex) != NULL;
	}
	free(s);
	return found;
}

/*
 * Node @l's config as a deployment has it, not the lab's fast-test values:
 * sm.periodic_update_s 5 (the default; the lab's 1 makes 100 nodes list every
 * desired membership of the cluster 100 times a second), pool.cluster's
 * timeout_ms the default, no HTTP endpoint (100 nodes on one port).
 */
static int node_as_deployed(struct lab *l)
{
	json_t *j = json_load_file(l->cfg, 0, NULL);
	int ret;

	if (!j)
		return -1;
	json_object_set_new(json_object_get(j, "sm"), "periodic_update_s", json_integer(5));
	json_object_del(json_object_get(json_object_get(j, "pool"), "cluster"), "timeout_ms");
	json_object_set_new(j, "http", json_pack("{s:b}", "enabled", 0));
	ret = json_dump_file(j, l->cfg, JSON_INDENT(1));
	json_decref(j);
	return ret;
}

/* One pass of the agent, from its log line "pass timeline (CLOCK_MONOTONIC ms): ..." */
struct smd_pass {
	long long start, read, sm, applied, rev;
};

/* The agent's passes that started at or after @from (monotonic ms) into @p (at most @max). */
static int smd_passes(const char *dir, int64_t from, struct smd_pass *p, int max)
{
	char log[PATH_MAX], line[1024];
	FILE *f;
	int n = 0;

	snprintf(log, sizeof(log), "%s/smd.log", dir);
	f = fopen(log, "r");
	while (f && n < max && fgets(line, sizeof(line), f)) {
		const char *t = strstr(line, "pass timeline (CLOCK_MONOTONIC ms): ");
		struct smd_pass x;

		if (t &&
		    sscanf(t,
			   "pass timeline (CLOCK_MONOTONIC ms): start %lld, desired read "
			   "%lld, SM done %lld, applied %lld (revision %lld",
			   &x.start, &x.read, &x.sm, &x.applied, &x.rev) == 5 &&
		    x.start >= from)
			p[n++] = x;
	}
	if (f)
		fclose(f);
	return n;
}

static int cmp_req_start(const void *x, const void *y)
{
	double a = json_real_value(json_object_get(*(json_t *const *)x, "t_start"));
	double b = json_real_value(json_object_get(*(json_t *const *)y, "t_start"));

	return a < b ? -1 : a > b;
}

/*
 * Where the burst's wall went, on one clock (CLOCK_MONOTONIC ms from the
 * burst's start @t0): each agent pass (its etcd read, each UFM request from
 * the simulator's log with arrival and reply, its applied write) and the
 * nodes' wake-up (how many prepares returned after each applied write).
 * Serial UFM round trips: a request that arrives after every earlier one
 * was answered starts a new one.
 */
static void smd_timeline(struct ufm_sim *sim, const char *dir, int64_t t0, int64_t t_end,
			 const int64_t *end_ms, int nj)
{
	struct smd_pass p[64];
	json_t *j = NULL, *reqs, *v[256];
	size_t nv = 0;
	int np = smd_passes(dir, t0 - 50, p, 64), serial = 0, woke = 0;
	double rend = -1;

	if (ufm_sim_ctl(sim, "GET", "/_sim/requests", NULL, &j) != 200) {
		json_decref(j);
		j = NULL;
	}
	reqs = json_object_get(j, "requests");
	for (size_t i = 0; i < json_array_size(reqs) && nv < 256; i++) {
		json_t *q = json_array_get(reqs, i);

		if (json_real_value(json_object_get(q, "t_start")) * 1000 >= (double)(t0 - 50) &&
		    json_real_value(json_object_get(q, "t_start")) * 1000 <= (double)t_end)
			v[nv++] = q;
	}
	qsort(v, nv, sizeof(*v), cmp_req_start);
	printf("  timeline (ms from the burst's start; UFM requests from the simulator's log, "
	       "'|' = at once):\n");
	for (int k = 0, r = 0; k < np || (size_t)r < nv; k++) {
		char line[1024];
		size_t off = 0;
		int64_t upto = k < np ? p[k].applied : t_end;
		int w = 0;

		if (k < np)
			off += (size_t)snprintf(line + off, sizeof(line) - off,
						"    pass %d: etcd read %+lld..%+lld, UFM", k + 1,
						p[k].start - t0, p[k].read - t0);
		else
			off += (size_t)snprintf(line + off, sizeof(line) - off,
						"    after the last pass: UFM");
		for (; (size_t)r < nv; r++) {
			double ts = json_real_value(json_object_get(v[r], "t_start")) * 1000;
			double te = json_real_value(json_object_get(v[r], "t_end")) * 1000;
			const char *ep = json_string_value(json_object_get(v[r], "endpoint"));
			bool next = ts >= rend;

			if (ts > (double)upto)
				break;
			serial += next;
			if (te > rend)
				rend = te;
			if (off < sizeof(line) - 64)
				off += (size_t)snprintf(line + off, sizeof(line) - off,
							"%s %s %+.0f..%+.0f", next ? "" : " |",
							ep ? ep : "?", ts - (double)t0,
							te - (double)t0);
		}
		for (int i = 0; i < nj; i++)
			w += end_ms[i] <= upto &&
			     (k == 0 || k > np || end_ms[i] > p[k - 1].applied);
		if (k < np) {
			woke += w;
			printf("%s; SM done %+lld, applied %+lld; %d prepare(s) returned by then\n",
			       line, p[k].sm - t0, p[k].applied - t0, w);
		} else {
			printf("%s\n", line);
			break;
		}
	}
	printf("  %d agent pass(es), %d serial UFM round trip(s) in the burst, %d of %d prepares "
	       "returned by the last applied write (the rest: the node side after it)\n",
	       np, serial, woke, nj);
	json_decref(j);
}

struct smd_burst {
	long requests, max_conc;
	char calls[512];
	int64_t wall, p50, p99, max;
	int fails, held;
};

/*
 * One burst: VF @vf0 .. @vf0 + @per - 1 of every node prepared at once (one
 * barrier), the UFM simulator at @latency ms. Fills @out; prints the timeline.
 */
static void smd_burst(struct lab *l, int started, int per, int vf0, struct ufm_sim *sim,
		      const char *dir, int latency, struct smd_burst *out)
{
	char cfgtext[64];
	struct scale_job *jobs = calloc((size_t)started * per, sizeof(*jobs));
	pthread_t *th = calloc((size_t)started * per, sizeof(*th));
	uint64_t *g = calloc((size_t)started * per, sizeof(*g));
	int64_t *lat = calloc((size_t)started * per, sizeof(*lat));
	int64_t *end_ms = calloc((size_t)started * per, sizeof(*end_ms));
	json_t *s0 = NULL, *s1 = NULL, *cv;
	pthread_barrier_t bar;
	pthread_attr_t at;
	const char *key;
	int64_t t0;
	size_t off = 0;
	int nj = 0;

	memset(out, 0, sizeof(*out));
	out->held = -1;
	if (!jobs || !th || !g || !lat || !end_ms)
		goto out;
	snprintf(cfgtext, sizeof(cfgtext), "{\"latency_ms\": %d}", latency);
	ufm_sim_config(sim, cfgtext);
	/* the agent's last pass (and its verification list) is over before the burst */
	usleep(2 * 1000 * (useconds_t)latency + 2000000);
	pthread_barrier_init(&bar, NULL, (unsigned)(started * per + 1));
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	for (int i = 0; i < started; i++)
		for (int v = 0; v < per; v++) {
			jobs[nj] = (struct scale_job){.l = &l[i], .vf = vf0 + v, .bar = &bar};
			if (pthread_create(&th[nj], &at, scale_main, &jobs[nj])) {
				fprintf(stderr, "bench_cluster: thread %d: no thread\n", nj);
				/* the barrier counts it: nobody would start */
				exit(1);
			}
			nj++;
		}
	s0 = sim_stats(sim);
	pthread_barrier_wait(&bar);
	t0 = ibvf_mono_ms();
	for (int k = 0; k < nj; k++) {
		pthread_join(th[k], NULL);
		out->fails += jobs[k].fail;
		g[k] = jobs[k].fail ? 0 : jobs[k].guid;
		lat[k] = jobs[k].lat_ms;
	}
	out->wall = ibvf_mono_ms() - t0;
	s1 = sim_stats(sim);
	for (int k = 0; k < nj; k++)
		end_ms[k] = t0 + jobs[k].lat_ms; /* the barrier releases all at t0 */
	for (int k = 0, shown = 0; k < nj && shown < 5; k++)
		if (jobs[k].fail) {
			fprintf(stderr,
				"bench_cluster: prepare %d (node %d, VF %d) failed after %" PRId64
				" ms: %s\n",
				k, k / per, jobs[k].vf, jobs[k].lat_ms, jobs[k].why);
			shown++;
		}
	out->held = sim_holds(sim, g, nj);
	json_object_foreach(json_object_get(s1, "calls"), key, cv)
	{
		long d =
			stat_delta(json_object_get(s0, "calls"), json_object_get(s1, "calls"), key);

		if (d && off < sizeof(out->calls) - 64)
			off += (size_t)snprintf(out->calls + off, sizeof(out->calls) - off,
						"%s%s %ld", off ? ", " : "", key, d);
	}
	if (!off)
		snprintf(out->calls, sizeof(out->calls), "none");
	out->requests = stat_delta(s0, s1, "total");
	out->max_conc = (long)json_integer_value(json_object_get(s1, "max_concurrent"));
	qsort(lat, (size_t)nj, sizeof(*lat), cmp_i64);
	out->p50 = nj ? lat[(nj - 1) / 2] : 0;
	out->p99 = nj ? lat[((nj - 1) * 99) / 100] : 0;
	out->max = nj ? lat[nj - 1] : 0;
	smd_timeline(sim, dir, t0, t0 + out->wall, end_ms, nj);
	pthread_attr_destroy(&at);
	pthread_barrier_destroy(&bar);
out:
	json_decref(s0);
	json_decref(s1);
	free(jobs);
	free(th);
	free(g);
	free(lat);
	free(end_ms);
}

/*
 * One round of bench_smd() on fresh everything: a UFM simulator, one
 * ibvf-smd and @nn new ibvfd nodes (sm.backend "cluster", @per VFs each)
 * under the etcd prefix @prefix nobody used before, one burst of all their
 * VFs at @latency ms (smd_burst() into @out), then all of it stopped and
 * removed, so that no round sees another's memberships (in etcd, in the
 * nodes' stores, in UFM). *@started: the nodes that came up. 0 or -1.
 */
static int smd_round(int nn, int per, int latency, const char *prefix, const char *what,
		     struct smd_burst *out, int *started)
{
	struct ufm_sim_opts so = {.user = SMD_USER, .password = SMD_PASSWORD};
	struct ufm_sim sim = {0};
	struct lab *l = calloc((size_t)nn, sizeof(*l));
	char dir[] = "/tmp/bench-smd-XXXXXX", err[IBVF_ERR_LEN], when[64];
	pid_t smd = -1;
	int ret = -1;

	*started = 0;
	memset(out, 0, sizeof(*out));
	if (!l || !mkdtemp(dir)) {
		free(l);
		return -1;
	}
	if (ufm_sim_start(&so, &sim, err, sizeof(err))) {
		fprintf(stderr, "bench_cluster: UFM simulator: %s\n", err);
		goto out;
	}
	smd = smd_launch(dir, prefix, &sim);
	if (smd < 0 || !smd_wait_leader(prefix, 30000)) {
		char log[PATH_MAX], line[1024];
		FILE *fl;

		fprintf(stderr, "bench_cluster: ibvf-smd does not lead; its log:\n");
		snprintf(log, sizeof(log), "%s/smd.log", dir);
		fl = fopen(log, "r");
		while (fl && fgets(line, sizeof(line), fl))
			fprintf(stderr, "  %s", line);
		if (fl)
			fclose(fl);
		goto stop;
	}
	for (int i = 0; i < nn; i++) {
		char node[32];

		snprintf(node, sizeof(node), "smd-node-%03d", i);
		if (node_init_sm(&l[i], per, 60, cluster_cfg(prefix, BS, 64, node), "cluster",
				 "{\"apply_timeout_ms\": 60000}") ||
		    node_as_deployed(&l[i])) {
			fprintf(stderr, "bench_cluster: node %d: lab_init failed\n", i);
			break;
		}
		(*started)++;
		node_launch(&l[i], node);
	}
	if (nodes_wait_ready(l, *started))
		goto stop;
	snprintf(when, sizeof(when), "before the %s", what);
	print_load(when);
	smd_burst(l, *started, per, 0, &sim, dir, latency, out);
	ret = 0;
stop:
	for (int i = 0; i < *started; i++)
		if (l[i].pid > 0)
			kill(l[i].pid, SIGTERM);
	for (int i = 0; i < *started; i++) {
		lab_stop(&l[i], SIGTERM);
		lab_fini(&l[i]);
	}
	if (smd > 0) {
		kill(smd, SIGTERM);
		waitpid(smd, NULL, 0);
	}
	ufm_sim_stop(&sim);
	snprintf(when, sizeof(when), "after the %s", what);
	print_load(when);
out:
	if (getenv("IBVF_KEEP_LAB"))
		fprintf(stderr, "the agent's files (%s) kept in %s\n", what, dir);
	else
		rm_tree(dir);
	free(l);
	return ret;
}

/*
 * Issue 19's scale benchmark: BENCH_CLUSTER_NODES (default 100) ibvfd nodes,
 * fake VFs, sm.backend "cluster", 10 concurrent prepares each (all released
 * by one barrier), one ibvf-smd (ufm backend) in front of the UFM simulator
 * at BENCH_SMD_LATENCY_MS (default 200) per request. First the floor: the
 * burst with the simulator at 0 ms (node + etcd + agent cost alone); then
 * the burst at the latency, on new nodes, a new agent and simulator and an
 * etcd prefix of its own (smd_round()): the floor used to run second, with
 * the first burst's 1,000 memberships still desired in etcd, in the nodes
 * and in UFM, and took 14-16 s. Prints, for each, the UFM requests the
 * burst cost (the simulator's own count; target <= 8), the wall time in UFM
 * round trips (target <= 4), prepare latency p50/p99/max, failures, and how
 * many of the GUIDs UFM holds when the prepares have returned; where the
 * wall went (smd_timeline()); and the burst's round trips above the floor.
 */
static void bench_smd(void)
{
	const char *env = getenv("BENCH_CLUSTER_NODES"), *lat_env = getenv("BENCH_SMD_LATENCY_MS");
	int nn = env ? atoi(env) : 100, per = 10, latency = lat_env ? atoi(lat_env) : 200;
	int sf = 0, sb = 0, rt;
	struct smd_burst b, f;
	const char *missing = ufm_sim_missing();

	if (missing) {
		printf("SKIP: the SM agent benchmark: %s\n", missing);
		return;
	}
	if (nn < 1 || latency < 0)
		return;
	rt = latency ? latency : 200; /* the floor's unit: issue 19's 200 ms round trip */
	if (smd_round(nn, per, 0, FLOOR_PREFIX, "floor", &f, &sf))
		return;
	printf("floor (first, on fresh nodes, agent, simulator and etcd keys): %d node daemons x "
	       "%d concurrent prepares (%d in all), the UFM simulator at 0 ms (node + etcd + "
	       "agent alone): UFM requests %ld (%s); wall %" PRId64
	       " ms = %.1f round trips of %d ms; p50 %" PRId64 " ms, p99 %" PRId64
	       " ms, max %" PRId64 " ms; %d failed; UFM holds %d of %d\n",
	       sf, per, sf * per, f.requests, f.calls, f.wall, (double)f.wall / rt, rt, f.p50,
	       f.p99, f.max, f.fails, f.held, sf * per - f.fails);
	if (smd_round(nn, per, latency, SMD_PREFIX, "burst", &b, &sb))
		return;
	printf("%d node daemons (sm.backend cluster) x %d concurrent prepares (%d in all), one "
	       "ibvf-smd (ufm backend) in front of the UFM simulator at %d ms a request (fresh "
	       "nodes, agent, simulator and etcd keys again): UFM "
	       "requests during the burst %ld (%s; at most %ld at once) (target <= 8); wall %" PRId64
	       " ms = %.1f UFM round trips (target <= 4); prepare latency p50 %" PRId64
	       " ms, p99 %" PRId64 " ms, max %" PRId64 " ms; %d failed; UFM holds %d of the %d "
	       "GUIDs when the prepares have returned. It spent %.1f of its %.1f round trips "
	       "above the floor\n",
	       sb, per, sb * per, latency, b.requests, b.calls, b.max_conc, b.wall,
	       latency ? (double)b.wall / latency : 0, b.p50, b.p99, b.max, b.fails, b.held,
	       sb * per - b.fails, (double)(b.wall - f.wall) / rt, (double)b.wall / rt);
}

/*
 * 9. What one node's reconciliation reads (issue 19 follow-up): N nodes
 * (BENCH_CLUSTER_VIEW_NODES, default 1,000) x 10 desired memberships each,
 * written with their view keys as the cluster backend writes them, in 5
 * PKeys shared by everybody; then the list of one node as the cluster
 * backend's list_members() did it before (a range of all of P members/,
 * filtered by node) and as it does now (a range of P bynode/<node>/): keys,
 * bytes, wall (medians of 5).
 */
static void bench_view(void)
{
	const char *prefix = "/bench/view/", *env = getenv("BENCH_CLUSTER_VIEW_NODES");
	int nodes = env && atoi(env) > 0 ? atoi(env) : 1000, per = 10, bad = 0;
	struct etcd_client *c = NULL;
	char err[IBVF_ERR_LEN];
	struct etcd_client_opts eo = {.endpoints = lab.urls, .n_endpoints = 3, .timeout_ms = 10000};
	struct etcd_op ops[128];
	static char keys[128][160];
	char *vals[64] = {0};
	size_t q = 0;
	int64_t t_old[5], t_new[5];
	unsigned long long old_keys = 0, old_bytes = 0, new_keys = 0, new_bytes = 0;
	int64_t t0;

	if (etcd_client_new(&eo, &c, err, sizeof(err))) {
		fprintf(stderr, "view: %s\n", err);
		return;
	}
	print_load("before the view part");
	t0 = ibvf_mono_ms();
	for (int n = 0; n < nodes; n++) {
		for (int k = 0; k < per; k++) {
			struct cluster_member m = {.pkey = (uint16_t)(0x100 + k % 5),
						   .guid = 0x0200000000100000ull +
							   (uint64_t)n * 64 + (uint64_t)k,
						   .membership = IBVF_MEMBER_FULL,
						   .ipoib = true,
						   .ms = ibvf_wall_ms()};

			snprintf(m.node, sizeof(m.node), "node-%04d", n);
			snprintf(m.owner, sizeof(m.owner), "tenant-%d/pod-%d-%d net1 (ib-tenant)",
				 n % 17, n, k);
			vals[q / 2] = cluster_member_value(&m);
			cluster_member_key(prefix, m.pkey, m.guid, false, keys[q], sizeof(keys[q]));
			ops[q] = (struct etcd_op){
				.type = ETCD_OP_PUT, .key = keys[q], .value = vals[q / 2]};
			q++;
			cluster_member_index_key(prefix, m.node, m.pkey, m.guid, false, keys[q],
						 sizeof(keys[q]));
			ops[q] = (struct etcd_op){
				.type = ETCD_OP_PUT, .key = keys[q], .value = vals[q / 2]};
			q++;
			if (q == 128 || (n + 1 == nodes && k + 1 == per)) {
				struct etcd_txn_result r = {0};

				bad += etcd_txn(c, NULL, 0, ops, q, NULL, 0, &r, err,
						sizeof(err)) != 0;
				etcd_txn_result_free(&r);
				for (size_t i = 0; i < q / 2; i++)
					free(vals[i]);
				q = 0;
			}
		}
	}
	printf("view: %d nodes x %d desired memberships (5 shared PKeys) written with their view "
	       "keys in %lld ms (%d failed txns)\n",
	       nodes, per, (long long)(ibvf_mono_ms() - t0), bad);
	for (int run = 0; run < 5; run++) {
		struct cluster_read_stats rs = {0};
		struct etcd_range_result r = {0};
		struct cluster_member *v = NULL;
		char key[256], end[256];
		size_t n = 0;
		int kl = cluster_member_key(prefix, -1, 0, false, key, sizeof(key));
		int el = etcd_prefix_end(key, (size_t)kl, end, sizeof(end));
		int64_t t = (int64_t)ibvf_mono_ns();

		/* before: the whole members/ range (what cluster_members_list(node) reads) */
		if (!etcd_range(c, key, (size_t)kl, end, (size_t)el, 0, false, &r, err,
				sizeof(err))) {
			old_keys = r.n_kvs;
			old_bytes = 0;
			for (size_t i = 0; i < r.n_kvs; i++)
				old_bytes += r.kvs[i].key_len + r.kvs[i].value_len;
		}
		etcd_range_result_free(&r);
		t_old[run] = (int64_t)ibvf_mono_ns() - t;
		t = (int64_t)ibvf_mono_ns();
		/* now: the node's own view */
		if (!cluster_members_list_node(c, prefix, "node-0500", -1, &v, &n, NULL, NULL, &rs,
					       err, sizeof(err))) {
			new_keys = rs.keys;
			new_bytes = rs.bytes;
		}
		free(v);
		t_new[run] = (int64_t)ibvf_mono_ns() - t;
	}
	qsort(t_old, 5, sizeof(t_old[0]), cmp_i64);
	qsort(t_new, 5, sizeof(t_new[0]), cmp_i64);
	printf("view: one node's reconcile list, before (all of members/): %llu keys, %llu bytes, "
	       "%.2f ms; now (bynode/<node>/): %llu keys, %llu bytes, %.2f ms; %.0fx fewer "
	       "bytes (medians of 5)\n",
	       old_keys, old_bytes, (double)t_old[2] / 1e6, new_keys, new_bytes,
	       (double)t_new[2] / 1e6, new_bytes ? (double)old_bytes / (double)new_bytes : 0.0);
	print_load("after the view part");
	etcd_client_free(c);
}

int main(int argc, char **argv)
{
	const char *missing = etcd_lab_missing(), *only = getenv("BENCH_CLUSTER_ONLY");
	char err[IBVF_ERR_LEN];
	double load[3] = {0};
	FILE *la;

	if (argc == 3 || argc == 4) {
		ibvfd_path = argv[1];
		sm_dir = argv[2];
		smd_path = argc == 4 ? argv[3] : NULL;
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [IBVFD SM_MODULE_DIR [IBVF_SMD]]\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* the variable overrides http.port: an inherited fixed port would clash again */
	setenv("IBVF_HTTP_PORT", "0", 1);
	ibvf_log_init("bench_cluster", IBVF_LOG_STDERR, LOG_ERR);
	if (missing)
		return etcd_lab_skip(missing);
	if (etcd_lab_start(&lab, 3, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&lab);
		return 1;
	}
	la = fopen("/proc/loadavg", "r");
	if (la) {
		if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
			load[0] = -1;
		fclose(la);
	}
	printf("bench_cluster: 3-member etcd %s on loopback, block_size %d, load average %.2f "
	       "%.2f %.2f\n",
	       "3.4 (Debian etcd-server)", BS, load[0], load[1], load[2]);

	/* BENCH_CLUSTER_ONLY=local|local-cluster|view|daemon|leader|scale|smd: one part alone
	 * (e.g. under perf, or to repeat a noisy figure) */
	if (only) {
		if (!strncmp(only, "local", 5))
			bench_local_rate();
		else if (!strcmp(only, "view"))
			bench_view();
		else if (!ibvfd_path)
			fprintf(stderr, "bench_cluster: %s needs IBVFD SM_MODULE_DIR\n", only);
		else if (!strcmp(only, "daemon"))
			bench_daemon_rate();
		else if (!strcmp(only, "leader"))
			bench_leader_prepares();
		else if (!strcmp(only, "scale"))
			bench_scale();
		else if (!strcmp(only, "smd") && smd_path)
			bench_smd();
		else if (!strcmp(only, "smd"))
			fprintf(stderr, "bench_cluster: smd needs IBVFD SM_MODULE_DIR IBVF_SMD\n");
		else
			fprintf(stderr, "bench_cluster: BENCH_CLUSTER_ONLY=%s: unknown part\n",
				only);
		goto out;
	}
	/* 1. one node, sequential claims */
	{
		static struct worker w;

		if (open_node("bench-one", "/bench/one/", &w.c, &w.b, err)) {
			fprintf(stderr, "FAIL: %s\n", err);
			goto out;
		}
		w.n_claims = ONE_N;
		claimer(&w);
		printf("claim latency, one node, %d claims: p50 %.2f ms, p99 %.2f ms, max %.2f ms; "
		       "%.2f etcd requests per claim, %.4f per GUID (target <= 0.05 per prepare); "
		       "%d failed\n",
		       w.n_lat, pct(w.lat_us, (size_t)w.n_lat, 0.5),
		       pct(w.lat_us, (size_t)w.n_lat, 0.99), pct(w.lat_us, (size_t)w.n_lat, 1.0),
		       (double)etcd_client_calls(w.c) / ONE_N,
		       (double)etcd_client_calls(w.c) / ONE_N / BS, w.fails);
		cluster_blocks_free(w.b);
		etcd_client_free(w.c);
	}
	/* 2. 8 nodes at once */
	{
		static struct worker w[NODES];
		pthread_t th[NODES];
		int64_t all[NODES * PER], t0;
		size_t n = 0;
		uint64_t calls = 0;
		int fails = 0;

		for (int i = 0; i < NODES; i++) {
			char name[32];

			snprintf(name, sizeof(name), "bench-node-%d", i);
			if (open_node(name, "/bench/many/", &w[i].c, &w[i].b, err)) {
				fprintf(stderr, "FAIL: %s\n", err);
				goto out;
			}
			w[i].n_claims = PER;
		}
		t0 = ibvf_mono_ms();
		for (int i = 0; i < NODES; i++)
			pthread_create(&th[i], NULL, claimer, &w[i]);
		for (int i = 0; i < NODES; i++)
			pthread_join(th[i], NULL);
		t0 = ibvf_mono_ms() - t0;
		for (int i = 0; i < NODES; i++) {
			for (int k = 0; k < w[i].n_lat; k++)
				all[n++] = w[i].lat_us[k];
			calls += etcd_client_calls(w[i].c);
			fails += w[i].fails;
			cluster_blocks_free(w[i].b);
			etcd_client_free(w[i].c);
		}
		printf("%d nodes x %d claims at once: wall %lld ms, p50 %.2f ms, p99 %.2f ms; "
		       "%.2f requests per claim, %.4f per GUID; %d failed\n",
		       NODES, PER, (long long)t0, pct(all, n, 0.5), pct(all, n, 0.99),
		       (double)calls / (double)n, (double)calls / (double)n / BS, fails);
	}
	/* 3. claims across a leader kill */
	{
		static struct worker w;
		atomic_bool stop = false;
		pthread_t th;
		int leader, waited = 0;
		int64_t worst = 0, kill_us;

		if (open_node("bench-leader", "/bench/leader/", &w.c, &w.b, err)) {
			fprintf(stderr, "FAIL: %s\n", err);
			goto out;
		}
		w.n_claims = 4096;
		w.stop = &stop;
		pthread_create(&th, NULL, claimer, &w);
		{
			struct timespec ts = {0, 300 * 1000000L};

			nanosleep(&ts, NULL);
		}
		leader = etcd_lab_leader(&lab);
		kill_us = (int64_t)(ibvf_mono_ns() / 1000);
		etcd_lab_member_stop(&lab, leader < 0 ? 0 : leader, true);
		{
			struct timespec ts = {2, 0};

			nanosleep(&ts, NULL);
		}
		atomic_store(&stop, true);
		pthread_join(th, NULL);
		for (int k = 0; k < w.n_lat; k++) {
			if (w.start_us[k] + w.lat_us[k] < kill_us)
				continue;
			if (w.lat_us[k] > 50000)
				waited++;
			if (w.lat_us[k] > worst)
				worst = w.lat_us[k];
		}
		printf("leader (member %d) killed during claims: %d claims in all, %d waited > 50 ms "
		       "(the longest %.0f ms), %d failed\n",
		       leader, w.n_lat, waited, (double)worst / 1000.0, w.fails);
		cluster_blocks_free(w.b);
		etcd_client_free(w.c);
		if (etcd_lab_member_start(&lab, leader < 0 ? 0 : leader, err, sizeof(err)))
			fprintf(stderr, "bench_cluster: member restart: %s\n", err);
		etcd_lab_wait_writable(&lab, 20000);
	}
	/* 4. the pool's local allocation rate, cluster vs single-node */
	bench_local_rate();
	/* 9. (first: no daemon needed) what one node's reconcile reads */
	bench_view();
	if (!ibvfd_path) {
		printf("(no IBVFD SM_MODULE_DIR given: the ibvfd benchmarks are skipped)\n");
		goto out;
	}
	/* 5.-7. whole ibvfd nodes */
	bench_daemon_rate();
	bench_leader_prepares();
	bench_scale();
	/* 8. the same nodes with sm.backend cluster, one ibvf-smd (ufm) in front */
	if (smd_path)
		bench_smd();
	else
		printf("(no IBVF_SMD given: the SM agent benchmark is skipped)\n");
out:
	etcd_lab_stop(&lab);
	return 0;
}
