// SPDX-License-Identifier: MIT
/*
 * Cluster GUID blocks against a real 3-member etcd on loopback (issue 18's
 * benchmarks, the parts that exist without the engine wiring): block claim
 * latency p50/p99 for one node, 8 nodes claiming at once (wall, requests
 * per claim, requests per GUID at block_size 256 against the target of at
 * most 0.05 etcd requests per prepare), and claims across a leader kill
 * (how many waited, for how long). Prints numbers, asserts nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "guid_blocks.h"

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

int main(void)
{
	const char *missing = etcd_lab_missing();
	char err[IBVF_ERR_LEN];
	double load[3] = {0};
	FILE *la;

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
	}
out:
	etcd_lab_stop(&lab);
	return 0;
}
