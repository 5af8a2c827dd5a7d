// SPDX-License-Identifier: MIT
/*
 * The claimer of a running node keeps ahead of a steady allocation rate
 * (docs/cluster.md: "an ADD never waits for etcd unless the node is out of
 * GUIDs"): a pool opened as ibvfd opens it in cluster mode (block_size 16,
 * low_watermark 4, quarantine 600 s so each allocation takes a new GUID),
 * the claimer attached, allocations at 200/s for 3 s. Past the first
 * second no allocation may find the blocks used up (-ENOSPC: ibvfd's
 * prepare would answer not ready). A claimer that only looks every 500 ms
 * and claims below the low watermark lets 100 allocations per look through
 * and runs dry again and again.
 * Usage: test_cluster_claimer (a real 3-member etcd, tests/lab/cluster)
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "cluster_pool.h"
#include "config.h"
#include "err.h"
#include "etcd_lab.h"
#include "guid_pool.h"
#include "log.h"

static struct etcd_lab elab;

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(void)
{
	const char *missing = etcd_lab_missing();
	char dir[] = "/tmp/test-claimer-XXXXXX", path[512], state[512], err[IBVF_ERR_LEN];
	struct ibvf_cluster_hb *hb = NULL;
	struct ibvf_pool *p = NULL;
	struct ibvf_config cfg;
	int n = 0, waits_early = 0, waits_late = 0, fails = 0, ret;
	int64_t t0, next;
	FILE *f;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ibvf_log_init("test_cluster_claimer", IBVF_LOG_STDERR, LOG_ERR);
	if (missing)
		return etcd_lab_skip(missing);
	if (etcd_lab_start(&elab, 3, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&elab);
		return 1;
	}
	if (!mkdtemp(dir)) {
		etcd_lab_stop(&elab);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/ibvfd.json", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	mkdir(state, 0700);
	f = fopen(path, "w");
	if (!f) {
		etcd_lab_stop(&elab);
		return 1;
	}
	fprintf(f,
		"{\"state_dir\": \"%s\", \"pool\": {\"ranges\": [{\"start\": "
		"\"0x0002c90300c00001\", \"end\": \"0x0002c90300cfffff\"}], \"quarantine_s\": 600, "
		"\"sync\": \"normal\", \"cluster\": {\"endpoints\": [\"%s\", \"%s\", \"%s\"], "
		"\"prefix\": \"/claimer/\", \"node\": \"claimer-node\", \"block_size\": 16, "
		"\"low_watermark\": 4, \"timeout_ms\": 2000}}}\n",
		state, elab.urls[0], elab.urls[1], elab.urls[2]);
	fclose(f);
	ret = ibvf_config_load(&cfg, path, true, NULL, err, sizeof(err));
	if (!ret) {
		struct ibvf_pool_opts o = {.state_dir = cfg.state_dir,
					   .ranges = cfg.pool.ranges,
					   .n_ranges = cfg.pool.n_ranges,
					   .quarantine_s = cfg.pool.quarantine_s,
					   .sync_full = cfg.pool.sync_full};

		ret = ibvf_cluster_pool_open(&cfg, &o, &p, &hb, err, sizeof(err));
		if (ret)
			ibvf_config_free(&cfg);
	}
	if (ret) {
		printf("not ok 1 - cluster pool opens: %s\n1..1\n", err);
		etcd_lab_stop(&elab);
		return 1;
	}
	ibvf_cluster_hb_attach(hb, p, NULL, NULL, NULL);
	t0 = ibvf_mono_ms();
	next = t0;
	while (ibvf_mono_ms() - t0 < 3000) {
		struct ibvf_alloc_request rq = {.vf_index = -1};
		struct ibvf_alloc a;
		int64_t now = ibvf_mono_ms();

		if (now < next) {
			usleep((useconds_t)(next - now) * 1000);
			continue;
		}
		next += 5; /* 200 allocations per second */
		snprintf(rq.owner.container_id, sizeof(rq.owner.container_id), "c-%d", n);
		snprintf(rq.owner.ifname, sizeof(rq.owner.ifname), "net1");
		ret = ibvf_pool_allocate(p, &rq, &a, err, sizeof(err));
		if (ret == -ENOSPC) {
			char why[IBVF_ERR_LEN + 64];

			/* as the engine does: not ready, and the claimer is asked at once */
			ibvf_cluster_ready(hb, why, sizeof(why));
			if (now - t0 < 1000)
				waits_early++;
			else
				waits_late++;
			continue;
		}
		if (ret) {
			printf("# allocate: %s\n", err);
			fails++;
			break;
		}
		n++;
	}
	ibvf_cluster_hb_attach(hb, NULL, NULL, NULL, NULL);
	ibvf_cluster_hb_stop(hb);
	ibvf_pool_close(p);
	ibvf_config_free(&cfg);
	printf("%s 1 - allocations at 200/s, block_size 16, low_watermark 4: %d allocated, "
	       "%d found the blocks used up in the first second, %d after it (must be 0)\n",
	       !fails && !waits_late && n > 400 ? "ok" : "not ok", n, waits_early, waits_late);
	printf("1..1\n");
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	etcd_lab_stop(&elab);
	return !fails && !waits_late && n > 400 ? 0 : 1;
}
