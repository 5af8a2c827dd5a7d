// SPDX-License-Identifier: MIT
/*
 * Two real ibvfd nodes (own state dir, socket, fake VFs, node name) with the
 * SAME pool.ranges and pool.cluster on one real 3-member etcd: prepares on
 * both never give one GUID to both nodes (the single-node baseline would:
 * both hand out the lowest free GUID first); a node restarts with etcd
 * down on the blocks it recorded; a block reclaimed while a node was away
 * is reported as a conflict at its next start and gives no new GUID.
 * Usage: test_ibvfd_cluster IBVFD SM_MODULE_DIR
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "guid_blocks.h"
#include "ibvfd_lab.h"
#include "log.h"

#define N_VFS 6

static struct etcd_lab elab;

/* Add pool.cluster (node @node) to the lab's config file. */
static int add_cluster(struct lab *l, const char *node, bool cluster)
{
	json_t *j, *c;
	char *s;
	FILE *f;

	lab_write_config(l);
	if (!cluster)
		return 0;
	j = json_load_file(l->cfg, 0, NULL);
	c = json_pack("{s:[s,s,s],s:s,s:s,s:i,s:i,s:i}", "endpoints", elab.urls[0], elab.urls[1],
		      elab.urls[2], "prefix", "/d/", "node", node, "block_size", 16,
		      "low_watermark", 4, "timeout_ms", 1500);
	if (!j || !c)
		return -1;
	json_object_set_new(json_object_get(j, "pool"), "cluster", c);
	s = json_dumps(j, JSON_INDENT(1));
	json_decref(j);
	f = fopen(l->cfg, "w");
	if (!f || !s)
		return -1;
	fputs(s, f);
	fclose(f);
	free(s);
	return 0;
}

static uint64_t prepare_guid(struct lab *l, const char *cid, int vf)
{
	struct ibvf_rpc_error re = {0};
	json_t *res = NULL;
	uint64_t g = 0;

	if (!lab_prepare(l, cid, vf, NULL, &res, &re)) {
		const char *s = json_string_value(json_object_get(res, "guid"));

		if (s && ibvf_guid_parse(s, &g, NULL, 0))
			g = 0;
	} else {
		printf("# prepare %s on vf %d: %s\n", cid, vf, re.message);
	}
	json_decref(res);
	return g;
}

/* prepares on every VF of both nodes; how many GUIDs both got */
static int round_of(struct lab *a, struct lab *b, uint64_t *ga, uint64_t *gb, const char *tag)
{
	int dup = 0;

	for (int i = 0; i < N_VFS; i++) {
		char cid[64];

		snprintf(cid, sizeof(cid), "%s-a-%d", tag, i);
		ga[i] = prepare_guid(a, cid, i);
		snprintf(cid, sizeof(cid), "%s-b-%d", tag, i);
		gb[i] = prepare_guid(b, cid, i);
	}
	for (int i = 0; i < N_VFS; i++)
		for (int k = 0; k < N_VFS; k++)
			dup += ga[i] && ga[i] == gb[k];
	return dup;
}

static bool all_set(const uint64_t *g)
{
	for (int i = 0; i < N_VFS; i++)
		if (!g[i])
			return false;
	return true;
}

/* the log's last lines as TAP comments (a start that failed) */
static void log_tail(const struct lab *l)
{
	FILE *f = fopen(l->log, "r");
	char lines[12][512];
	int n = 0;

	while (f && fgets(lines[n % 12], sizeof(lines[0]), f))
		n++;
	for (int i = n > 12 ? n - 12 : 0; i < n; i++)
		printf("# %s", lines[i % 12]);
	if (f)
		fclose(f);
}

static bool log_has(const struct lab *l, const char *what)
{
	FILE *f = fopen(l->log, "r");
	char line[2048];
	bool hit = false;

	while (f && !hit && fgets(line, sizeof(line), f))
		hit = strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return hit;
}

/* pool.quarantine_s of the lab's config (a released GUID stays used that long) */
static int set_quarantine(struct lab *l, int s)
{
	json_t *j = json_load_file(l->cfg, 0, NULL);
	int ret;

	if (!j)
		return -1;
	json_object_set_new(json_object_get(j, "pool"), "quarantine_s", json_integer(s));
	ret = json_dump_file(j, l->cfg, JSON_INDENT(1));
	json_decref(j);
	return ret;
}

/* pool.cluster.high_watermark of the lab's config (idle blocks go back above it) */
static int set_high_watermark(struct lab *l, int n)
{
	json_t *j = json_load_file(l->cfg, 0, NULL);
	int ret;

	if (!j)
		return -1;
	json_object_set_new(json_object_get(json_object_get(j, "pool"), "cluster"),
			    "high_watermark", json_integer(n));
	ret = json_dump_file(j, l->cfg, JSON_INDENT(1));
	json_decref(j);
	return ret;
}

/* one prepare + release on VF 0 (the GUID stays quarantined): the GUID, 0 on error */
static uint64_t cycle(struct lab *l, const char *cid, struct ibvf_rpc_error *re)
{
	json_t *res = NULL;
	uint64_t g = 0;

	memset(re, 0, sizeof(*re));
	if (!lab_prepare(l, cid, 0, NULL, &res, re)) {
		const char *s = json_string_value(json_object_get(res, "guid"));

		if (!s || ibvf_guid_parse(s, &g, NULL, 0))
			g = 0;
	}
	json_decref(res);
	lab_release(l, cid);
	return g;
}

/* the blocks etcd gives @node, or -1 */
static int blocks_of(const char *node)
{
	struct etcd_client_opts eo = {.endpoints = elab.urls, .n_endpoints = 3, .timeout_ms = 1500};
	struct cluster_range r = {LAB_RANGE_START, LAB_RANGE_END};
	struct cluster_blocks_opts bo = {
		.prefix = "/d/", .node = "checker", .ranges = &r, .n_ranges = 1, .block_size = 16};
	struct etcd_client *c = NULL;
	struct cluster_blocks *bl = NULL;
	struct cluster_block *all = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0;
	int mine = -1;

	if (!etcd_client_new(&eo, &c, err, sizeof(err))) {
		bo.etcd = c;
		if (!cluster_blocks_open(&bo, &bl, err, sizeof(err)) &&
		    !cluster_blocks_list(bl, NULL, &all, &n, err, sizeof(err))) {
			mine = 0;
			for (size_t k = 0; k < n; k++)
				mine += !strcmp(all[k].node, node);
		}
	}
	free(all);
	cluster_blocks_free(bl);
	etcd_client_free(c);
	return mine;
}

/* entries of the node's cluster-blocks.json, or -1 */
static int blocks_recorded(const struct lab *l)
{
	char path[256];
	json_t *j;
	int n;

	snprintf(path, sizeof(path), "%s/cluster-blocks.json", l->state);
	j = json_load_file(path, 0, NULL);
	n = j ? (int)json_array_size(json_object_get(j, "blocks")) : -1;
	json_decref(j);
	return n;
}

/*
 * Claims while running (node-c, quarantine 600 s so each prepare uses a new
 * GUID): past its first block a second one is claimed in the background and
 * its GUIDs used; with every etcd member down and the blocks used up, prepare
 * answers not ready naming the cluster and the endpoints; etcd back, it
 * claims and is ready again, without a restart.
 */
static void running_claims(const char *ibvfd, const char *moddir)
{
	struct ibvf_rpc_error re;
	struct lab c;
	uint64_t first = 0, g = 0;
	int waited = 0, ok = 0, other_block = 0, i;
	char err[IBVF_ERR_LEN];
	bool not_ready = false, named = false;

	/* no idle block return here (its quarantined blocks would go back): claims only */
	if (lab_init(&c, ibvfd, N_VFS, "file", moddir, NULL) || add_cluster(&c, "node-c", true) ||
	    set_quarantine(&c, 600) || set_high_watermark(&c, 100000) || lab_start(&c, 20000) < 0) {
		lab_result(false, "node-c starts (quarantine 600 s)");
		log_tail(&c);
		goto out;
	}
	for (i = 0; i < 24; i++) {
		char cid[32];

		snprintf(cid, sizeof(cid), "run-%d", i);
		g = cycle(&c, cid, &re);
		/* a prepare that caught the blocks empty before the claim: retry (counted) */
		for (int t = 0; !g && re.code == IBVF_RPC_NOT_READY && t < 50; t++) {
			waited++;
			usleep(100000);
			g = cycle(&c, cid, &re);
		}
		if (!g) {
			printf("# prepare %s: %d %s\n", cid, re.code, re.message);
			break;
		}
		if (!first)
			first = g;
		ok++;
		other_block += (g - LAB_RANGE_START) / 16 != (first - LAB_RANGE_START) / 16;
	}
	lab_result(ok == 24 && other_block > 0 && blocks_of("node-c") >= 2 &&
			   blocks_recorded(&c) >= 2 && log_has(&c, "while running"),
		   "a running ibvfd claims a new block below the low watermark and uses it "
		   "(%d/24 prepares, %d from a later block, %d blocks in etcd, %d recorded, %d "
		   "prepares retried)",
		   ok, other_block, blocks_of("node-c"), blocks_recorded(&c), waited);

	/* etcd down: use up the held blocks */
	for (int m = 0; m < 3; m++)
		etcd_lab_member_stop(&elab, m, true);
	/* (the claimer holds up to 8 blocks more after a run of prepares) */
	for (i = 0; i < 600 && !not_ready; i++) {
		char cid[32];

		snprintf(cid, sizeof(cid), "down-%d", i);
		g = cycle(&c, cid, &re);
		not_ready = !g && re.code == IBVF_RPC_NOT_READY;
		/*
		 * "a new block is being claimed": the pool was empty while the
		 * claimer was adding a block it had claimed before etcd went
		 * down (attach.c): not used up yet, go on
		 */
		if (not_ready && strstr(re.message, "being claimed")) {
			printf("# prepare %s: not ready while a block was being added: %s\n", cid,
			       re.message);
			not_ready = false;
			usleep(100000);
			continue;
		}
		if (!g && !not_ready)
			printf("# prepare %s: %d %s\n", cid, re.code, re.message);
	}
	{
		const char *reason = NULL;
		json_t *res = NULL;

		/* the claimer's etcd calls time out (timeout_ms 1500): then status says why */
		for (int t = 0; not_ready && !reason && t < 50; t++) {
			struct ibvf_rpc_error se = {0};
			json_t *nr;

			usleep(200000);
			json_decref(res);
			res = NULL;
			if (lab_api(&c, "status", json_object(), &res, &se, 5000))
				continue;
			nr = json_object_get(res, "not_ready");
			for (size_t k = 0; k < json_array_size(nr); k++) {
				json_t *it = json_array_get(nr, k);
				const char *ck = json_string_value(json_object_get(it, "check"));

				if (ck && !strcmp(ck, "cluster"))
					reason = json_string_value(json_object_get(it, "reason"));
			}
		}
		printf("# status not_ready cluster: %s\n", reason ? reason : "(none)");
		named = reason && strstr(reason, "/d/") && strstr(reason, "node-c") &&
			strstr(reason, elab.urls[0]) && strstr(reason, elab.urls[2]);
		json_decref(res);
		g = cycle(&c, "down-again", &re);
		printf("# prepare: %d %s\n", re.code, re.message);
		named = named && !g && re.code == IBVF_RPC_NOT_READY &&
			strstr(re.message, elab.urls[1]);
	}
	lab_result(not_ready && named,
		   "etcd down and the blocks used up: prepare answers not ready (-32009), "
		   "status names the cluster and the endpoints");

	/* etcd back: the next claim makes it ready, no restart */
	for (int m = 0; m < 3; m++)
		etcd_lab_member_start(&elab, m, err, sizeof(err));
	etcd_lab_wait_writable(&elab, 20000);
	g = 0;
	for (i = 0; i < 100 && !g; i++) {
		g = cycle(&c, "back", &re);
		if (!g)
			usleep(200000);
	}
	lab_result(g && blocks_of("node-c") >= 3,
		   "etcd back: node-c claims a block and prepares succeed again (after %d "
		   "tries, %d blocks)",
		   i, blocks_of("node-c"));
out:
	lab_stop(&c, SIGTERM);
	lab_fini(&c);
}

int main(int argc, char **argv)
{
	const char *missing = etcd_lab_missing();
	uint64_t ga[N_VFS], gb[N_VFS];
	struct lab a, b;
	char err[IBVF_ERR_LEN];
	int dup;

	if (argc != 3) {
		fprintf(stderr, "usage: %s IBVFD SM_MODULE_DIR\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ibvf_log_init("test_ibvfd_cluster", IBVF_LOG_STDERR, LOG_ERR);
	if (missing)
		return etcd_lab_skip(missing);
	if (etcd_lab_start(&elab, 3, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&elab);
		return 1;
	}
	if (lab_init(&a, argv[1], N_VFS, "file", argv[2], NULL) ||
	    lab_init(&b, argv[1], N_VFS, "file", argv[2], NULL)) {
		fprintf(stderr, "FAIL: lab_init\n");
		etcd_lab_stop(&elab);
		return 1;
	}

	/* the baseline: today's per-node pools with one config collide */
	add_cluster(&a, "node-a", false);
	add_cluster(&b, "node-b", false);
	if (lab_start(&a, 20000) < 0 || lab_start(&b, 20000) < 0) {
		lab_result(false, "single-node ibvfd start");
		goto out;
	}
	dup = round_of(&a, &b, ga, gb, "base");
	lab_result(dup > 0,
		   "baseline, no cluster: the same ranges on two nodes give %d GUIDs to "
		   "both (the bug cluster mode removes)",
		   dup);
	lab_stop(&a, SIGTERM);
	lab_stop(&b, SIGTERM);
	lab_fini(&a);
	lab_fini(&b);

	/* cluster mode: fresh nodes */
	if (lab_init(&a, argv[1], N_VFS, "file", argv[2], NULL) ||
	    lab_init(&b, argv[1], N_VFS, "file", argv[2], NULL))
		goto out;
	add_cluster(&a, "node-a", true);
	add_cluster(&b, "node-b", true);
	if (lab_start(&a, 20000) < 0 || lab_start(&b, 20000) < 0) {
		lab_result(false, "cluster-mode ibvfd start");
		log_tail(&a);
		log_tail(&b);
		goto out;
	}
	dup = round_of(&a, &b, ga, gb, "c1");
	lab_result(dup == 0 && all_set(ga) && all_set(gb),
		   "cluster mode, one config on both nodes: %d prepares each, no GUID on both",
		   N_VFS);
	{
		struct etcd_client_opts eo = {.endpoints = elab.urls, .n_endpoints = 3};
		struct etcd_client *c = NULL;
		struct cluster_range r = {LAB_RANGE_START, LAB_RANGE_END};
		struct cluster_blocks_opts bo = {.prefix = "/d/",
						 .node = "checker",
						 .ranges = &r,
						 .n_ranges = 1,
						 .block_size = 16};
		struct cluster_blocks *bl = NULL;
		struct cluster_block *all = NULL;
		size_t n = 0;
		int bad = 0;

		etcd_client_new(&eo, &c, err, sizeof(err));
		bo.etcd = c;
		if (c && !cluster_blocks_open(&bo, &bl, err, sizeof(err)) &&
		    !cluster_blocks_list(bl, NULL, &all, &n, err, sizeof(err))) {
			for (int i = 0; i < N_VFS; i++) {
				bool in_a = false, in_b = false;

				for (size_t k = 0; k < n; k++) {
					in_a = in_a ||
					       (ga[i] >= all[k].first && ga[i] <= all[k].last &&
						!strcmp(all[k].node, "node-a"));
					in_b = in_b ||
					       (gb[i] >= all[k].first && gb[i] <= all[k].last &&
						!strcmp(all[k].node, "node-b"));
				}
				bad += !in_a + !in_b;
			}
		} else {
			bad = -1;
		}
		lab_result(bad == 0,
			   "every GUID lies in a block etcd gives its node (%zu blocks, %d "
			   "outside)",
			   n, bad);
		{
			bool alive = false;
			size_t nb = 0, ng = 0;
			int ret;

			for (int i = 0; i < 50 && !alive; i++) {
				cluster_node_alive(bl, "node-a", &alive, err, sizeof(err));
				if (!alive)
					usleep(100000);
			}
			ret = cluster_node_reclaim(bl, "node-a", false, &nb, &ng, err, sizeof(err));
			lab_result(alive && ret == -EBUSY && nb == 0,
				   "a running ibvfd keeps its heartbeat: reclaim without force is "
				   "refused (%s)",
				   err);
		}
		/* while node-a is away (its heartbeat still within its TTL), an admin
		 * reclaims its blocks */
		lab_stop(&a, SIGTERM);
		{
			size_t nb = 0, ng = 0;

			cluster_node_reclaim(bl, "node-a", true, &nb, &ng, err, sizeof(err));
			lab_result(nb > 0, "node-a's %zu blocks reclaimed while it is stopped", nb);
		}
		free(all);
		cluster_blocks_free(bl);
		etcd_client_free(c);
	}
	if (lab_start(&a, 20000) < 0) {
		lab_result(false, "node-a restarts after the reclaim");
		log_tail(&a);
		goto out;
	}
	lab_result(log_has(&a, "cluster conflict: GUID") && log_has(&a, "no longer claimed"),
		   "node-a's start-up check reports its live attachments in reclaimed blocks");
	{
		uint64_t g;
		bool old = false;

		lab_release(&a, "c1-a-0");
		g = prepare_guid(&a, "after-reclaim", 0);

		for (int i = 0; i < N_VFS; i++)
			old = old || ga[i] == g;
		lab_result(g && !old, "a new prepare on node-a gets a GUID of a new block");
	}
	running_claims(argv[1], argv[2]);
	/* etcd down: a restarted node goes on with the blocks it recorded */
	lab_stop(&b, SIGTERM);
	for (int i = 0; i < 3; i++)
		etcd_lab_member_stop(&elab, i, true);
	if (lab_start(&b, 30000) < 0) {
		lab_result(false, "node-b restarts with etcd down");
		log_tail(&b);
		goto out;
	}
	lab_result(log_has(&b, "etcd unreachable"), "node-b starts with etcd down, on its "
						    "recorded blocks");
	{
		char cid[32];
		uint64_t g;
		bool in_b_blocks = false;

		lab_release(&b, "c1-b-0");
		snprintf(cid, sizeof(cid), "offline");
		g = prepare_guid(&b, cid, 0);
		for (int i = 0; i < N_VFS; i++)
			in_b_blocks = in_b_blocks ||
				      (g - LAB_RANGE_START) / 16 == (gb[i] - LAB_RANGE_START) / 16;
		lab_result(g && in_b_blocks, "and allocates from them with etcd down");
	}
out:
	lab_stop(&a, SIGTERM);
	lab_stop(&b, SIGTERM);
	lab_fini(&a);
	lab_fini(&b);
	etcd_lab_stop(&elab);
	printf("1..%d\n", lab_n_ok + lab_n_fail);
	return lab_n_fail ? 1 : 0;
}
