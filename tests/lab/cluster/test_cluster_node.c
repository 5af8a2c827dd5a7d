// SPDX-License-Identifier: MIT
/*
 * The node side of cluster mode with real ibvfd nodes on one real 3-member
 * etcd (issue 18, docs/cluster.md):
 * - requested GUIDs outside the node's blocks: two nodes asking for the same
 *   GUID at the same instant, exactly one wins and the other's error names
 *   the winner; a GUID in another node's block is refused naming it; the
 *   reservation stays through the DEL's quarantine (the other node is still
 *   refused) and is deleted after it; with etcd down a requested GUID
 *   outside the blocks is not ready, never granted unchecked;
 * - adoption: a node with a single-node store switches to cluster mode:
 *   its GUIDs are reserved in etcd, the one another node holds is a
 *   conflict (status, ibvfctl cluster status), no attachment is lost;
 * - a node reclaimed while away comes back: its live attachments are
 *   conflicts in status, no new GUID comes from the reclaimed blocks.
 * Usage: test_cluster_node IBVFD SM_MODULE_DIR IBVFCTL
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
#define BLOCK 16

static struct etcd_lab elab;
static const char *ibvfctl;

/* The lab's config with pool.cluster for @node (quarantine @q s); @cluster false: none. */
static int write_config(struct lab *l, const char *node, bool cluster, int q)
{
	json_t *j, *c;
	int ret;

	lab_write_config(l);
	j = json_load_file(l->cfg, 0, NULL);
	if (!j)
		return -1;
	json_object_set_new(json_object_get(j, "pool"), "quarantine_s", json_integer(q));
	if (cluster) {
		c = json_pack("{s:[s,s,s],s:s,s:s,s:i,s:i,s:i}", "endpoints", elab.urls[0],
			      elab.urls[1], elab.urls[2], "prefix", "/n/", "node", node,
			      "block_size", BLOCK, "low_watermark", 4, "timeout_ms", 1500);
		json_object_set_new(json_object_get(j, "pool"), "cluster", c);
	}
	ret = json_dump_file(j, l->cfg, JSON_INDENT(1));
	json_decref(j);
	return ret;
}

/* prepare @cid on @vf asking for @want (0: any): the GUID, 0 on error (in @re) */
static uint64_t prepare_at(struct lab *l, const char *cid, int vf, uint64_t want,
			   struct ibvf_rpc_error *re)
{
	char pci[16], s[IBVF_GUID_STR_LEN];
	json_t *p, *res = NULL;
	uint64_t g = 0;

	memset(re, 0, sizeof(*re));
	p = json_pack("{s:o,s:s,s:[{s:s,s:s}]}", "owner", lab_owner(cid), "pci", lab_pci(vf, pci),
		      "pkeys", "pkey", "0x0012", "membership", "full");
	if (want)
		json_object_set_new(p, "guid", json_string(ibvf_guid_format(want, s)));
	if (!lab_api(l, "prepare", p, &res, re, 70000)) {
		const char *gs = json_string_value(json_object_get(res, "guid"));

		if (!gs || ibvf_guid_parse(gs, &g, NULL, 0))
			g = 0;
	}
	json_decref(res);
	return g;
}

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

/* A checker's view of etcd. */
struct view {
	struct etcd_client *c;
	struct cluster_blocks *b;
};

static int view_open_q(struct view *v, uint32_t quarantine_s)
{
	struct etcd_client_opts eo = {.endpoints = elab.urls, .n_endpoints = 3, .timeout_ms = 1500};
	static struct cluster_range r = {LAB_RANGE_START, LAB_RANGE_END};
	struct cluster_blocks_opts bo = {.prefix = "/n/",
					 .node = "checker",
					 .ranges = &r,
					 .n_ranges = 1,
					 .block_size = BLOCK,
					 .quarantine_s = quarantine_s};
	char err[IBVF_ERR_LEN];

	memset(v, 0, sizeof(*v));
	if (etcd_client_new(&eo, &v->c, err, sizeof(err)))
		return -1;
	bo.etcd = v->c;
	return cluster_blocks_open(&bo, &v->b, err, sizeof(err)) ? -1 : 0;
}

static int view_open(struct view *v)
{
	return view_open_q(v, 0);
}

static void view_close(struct view *v)
{
	cluster_blocks_free(v->b);
	etcd_client_free(v->c);
}

/* the node named in P guids/<g>, "" when none */
static void reserved_by(struct view *v, uint64_t g, char *who, size_t len)
{
	static const char *const nodes[] = {"node-a", "node-b", "node-c"};
	char err[IBVF_ERR_LEN];

	who[0] = 0;
	for (size_t i = 0; i < 3; i++) {
		uint64_t *gs = NULL;
		size_t n = 0;

		if (!cluster_guid_reservations(v->b, nodes[i], &gs, &n, err, sizeof(err)))
			for (size_t k = 0; k < n; k++)
				if (gs[k] == g)
					snprintf(who, len, "%s", nodes[i]);
		free(gs);
	}
}

/* the owner of the block holding @g, "" when unclaimed */
static void block_owner(struct view *v, uint64_t g, char *who, size_t len)
{
	struct cluster_block *all = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0;

	who[0] = 0;
	if (!cluster_blocks_list(v->b, NULL, &all, &n, err, sizeof(err)))
		for (size_t k = 0; k < n; k++)
			if (g >= all[k].first && g <= all[k].last)
				snprintf(who, len, "%s", all[k].node);
	free(all);
}

/* a GUID of the range whose block nobody holds (for requests outside blocks) */
static uint64_t free_guid(struct view *v, uint64_t from)
{
	char who[CLUSTER_NODE_MAX + 1];

	for (uint64_t g = from; g < LAB_RANGE_END; g += BLOCK) {
		block_owner(v, g, who, sizeof(who));
		if (!who[0])
			return g;
	}
	return 0;
}

/* status.cluster.conflicts of @l (new reference) or NULL */
static json_t *conflicts_of(struct lab *l)
{
	struct ibvf_rpc_error re = {0};
	json_t *res = NULL, *c;

	if (lab_api(l, "status", json_object(), &res, &re, 5000))
		return NULL;
	c = json_object_get(json_object_get(res, "cluster"), "conflicts");
	json_incref(c);
	json_decref(res);
	return c;
}

static bool has_conflict(json_t *c, uint64_t g, const char *owner)
{
	char s[IBVF_GUID_STR_LEN];

	ibvf_guid_format(g, s);
	for (size_t i = 0; i < json_array_size(c); i++) {
		json_t *x = json_array_get(c, i);
		const char *gs = json_string_value(json_object_get(x, "guid"));
		const char *o = json_string_value(json_object_get(x, "owner"));

		if (gs && !strcmp(gs, s) && (!owner || (o && !strcmp(o, owner))))
			return true;
	}
	return false;
}

/* `ibvfctl -c CFG cluster status` output contains @what */
static bool ctl_status_has(struct lab *l, const char *what)
{
	char cmd[512], buf[8192];
	size_t n;
	FILE *p;
	bool hit;

	snprintf(cmd, sizeof(cmd), "'%s' -c '%s' cluster status 2>&1", ibvfctl, l->cfg);
	p = popen(cmd, "r");
	if (!p)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = 0;
	pclose(p);
	hit = strstr(buf, what) != NULL;
	if (!hit)
		printf("# ibvfctl cluster status: %s\n", buf);
	return hit;
}

struct racer {
	struct lab *l;
	const char *cid;
	uint64_t want, got;
	struct ibvf_rpc_error re;
	pthread_barrier_t *bar;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->bar);
	r->got = prepare_at(r->l, r->cid, 1, r->want, &r->re);
	return NULL;
}

static void requested(struct lab *a, struct lab *b, struct view *v)
{
	struct ibvf_rpc_error re;
	char who[CLUSTER_NODE_MAX + 1], s[IBVF_GUID_STR_LEN];
	uint64_t g, in_b;
	int wins = 0;

	/* same instant, same GUID outside both nodes' blocks, 5 rounds */
	for (int round = 0; round < 5; round++) {
		pthread_barrier_t bar;
		struct racer ra = {.l = a, .cid = "race-a"}, rb = {.l = b, .cid = "race-b"};
		pthread_t ta, tb;
		struct racer *win, *lose;
		const char *wn, *ln;

		g = free_guid(v, LAB_RANGE_START + (uint64_t)(round + 1) * 4093 * BLOCK);
		ra.want = rb.want = g;
		pthread_barrier_init(&bar, NULL, 2);
		ra.bar = rb.bar = &bar;
		pthread_create(&ta, NULL, race, &ra);
		pthread_create(&tb, NULL, race, &rb);
		pthread_join(ta, NULL);
		pthread_join(tb, NULL);
		pthread_barrier_destroy(&bar);
		win = ra.got ? &ra : &rb;
		lose = ra.got ? &rb : &ra;
		wn = win == &ra ? "node-a" : "node-b";
		ln = win == &ra ? "node-b" : "node-a";
		reserved_by(v, g, who, sizeof(who));
		if ((ra.got != 0) + (rb.got != 0) == 1 && win->got == g && !lose->got &&
		    lose->re.code == IBVF_RPC_GUID_CONFLICT && strstr(lose->re.message, wn) &&
		    !strcmp(who, wn))
			wins++;
		else
			printf("# round %d GUID %s: a %s (%d %s), b %s (%d %s), etcd: %s\n", round,
			       ibvf_guid_format(g, s), ra.got ? "won" : "lost", ra.re.code,
			       ra.re.message, rb.got ? "won" : "lost", rb.re.code, rb.re.message,
			       who);
		(void)ln;
		lab_release(a, "race-a");
		lab_release(b, "race-b");
	}
	lab_result(wins == 5,
		   "two nodes request the same GUID at the same instant: exactly one wins, the "
		   "other's error names the winner, etcd names the winner (%d/5 rounds)",
		   wins);

	/* a GUID inside node-b's block, asked on node-a */
	in_b = prepare_at(b, "inb", 2, 0, &re);
	lab_release(b, "inb"); /* quarantined on node-b, still node-b's block */
	g = in_b ? prepare_at(a, "steal", 2, in_b, &re) : 0;
	lab_result(in_b && !g && re.code == IBVF_RPC_GUID_CONFLICT && strstr(re.message, "node-b"),
		   "a GUID in another node's block is refused naming that node (%s)", re.message);

	/* quarantine holds across nodes: node-a's reservation outlives the DEL */
	g = free_guid(v, LAB_RANGE_START + 777 * BLOCK);
	{
		uint64_t got = prepare_at(a, "q-a", 3, g, &re), other;
		int waited = 0;

		lab_release(a, "q-a");
		usleep(1000000); /* past two sweeps (500 ms), within the 2 s quarantine */
		reserved_by(v, g, who, sizeof(who));
		other = prepare_at(b, "q-b", 3, g, &re);
		lab_result(got == g && !other && re.code == IBVF_RPC_GUID_CONFLICT &&
				   strstr(re.message, "node-a") && !strcmp(who, "node-a"),
			   "after the DEL, within the quarantine, the other node is still refused "
			   "(%s)",
			   re.message);
		for (; waited < 100; waited++) {
			reserved_by(v, g, who, sizeof(who));
			if (!who[0])
				break;
			usleep(100000);
		}
		other = !who[0] ? prepare_at(b, "q-b", 3, g, &re) : 0;
		lab_result(
			!who[0] && other == g && waited >= 5,
			"after the 2 s quarantine, not before, the reservation is deleted (%.1f s "
			"after the DEL) and the "
			"other node gets the GUID (%s)",
			1 + waited / 10.0, other ? "ok" : re.message);
		lab_release(b, "q-b");
	}
}

static void etcd_down_request(struct lab *a, struct view *v)
{
	struct ibvf_rpc_error re;
	char err[IBVF_ERR_LEN];
	uint64_t g = free_guid(v, LAB_RANGE_START + 999 * BLOCK), got;

	for (int m = 0; m < 3; m++)
		etcd_lab_member_stop(&elab, m, true);
	got = prepare_at(a, "down", 4, g, &re);
	lab_result(g && !got && re.code == IBVF_RPC_NOT_READY && strstr(re.message, "etcd"),
		   "etcd down: a requested GUID outside the blocks is not ready, not granted "
		   "(%d %s)",
		   re.code, re.message);
	/* a GUID the node's own block holds is still the local pool's */
	got = prepare_at(a, "down-any", 4, 0, &re);
	lab_result(got != 0, "etcd down: allocation from the held blocks goes on");
	lab_release(a, "down-any");
	for (int m = 0; m < 3; m++)
		etcd_lab_member_start(&elab, m, err, sizeof(err));
	etcd_lab_wait_writable(&elab, 20000);
}

/* give fake VF @vf of @l the GUID @g with no store record (as ib-kubernetes left it) */
static int vf_set_guid(struct lab *l, int vf, uint64_t g)
{
	char path[256], pci[16], pf[16], link[8];
	unsigned gen;
	int idx, n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", l->vfdir, lab_pci(vf, pci));
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fscanf(f, "pf=%15s vf=%d node=%*x port=%*x link=%7s gen=%u", pf, &idx, link, &gen);
	fclose(f);
	if (n != 4 || !(f = fopen(path, "w")))
		return -1;
	fprintf(f, "pf=%s vf=%d node=%016" PRIx64 " port=%016" PRIx64 " link=%s gen=%u\n", pf, idx,
		g, g, link, gen + 1);
	return fclose(f);
}

/* adoption: node-c ran single-node, node-b holds one of its GUIDs */
static void adoption(const char *ibvfd, const char *moddir, struct lab *b, struct view *v)
{
	struct ibvf_rpc_error re;
	uint64_t g[3], vx = 0, vy = 0;
	char who[CLUSTER_NODE_MAX + 1];
	struct lab c;
	json_t *conf = NULL, *res = NULL;
	int ok = 0;

	if (lab_init(&c, ibvfd, N_VFS, "file", moddir, NULL) ||
	    write_config(&c, "node-c", false, 2) || lab_start(&c, 20000) < 0) {
		lab_result(false, "node-c starts single-node");
		goto out;
	}
	for (int i = 0; i < 3; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "c-%d", i);
		g[i] = prepare_at(&c, cid, i, 0, &re);
		ok += g[i] != 0;
	}
	lab_stop(&c, SIGTERM);
	/* meanwhile node-b got c's second GUID (the single-node collision) */
	block_owner(v, g[1], who, sizeof(who));
	if (ok != 3 || who[0] || !prepare_at(b, "b-takes", 5, g[1], &re)) {
		lab_result(false, "set-up: node-c's 3 GUIDs, node-b holds the second (%s, %s)", who,
			   re.message);
		goto out;
	}
	/* and two VFs carry GUIDs with no record: one of a free block, one of node-b's */
	vx = free_guid(v, LAB_RANGE_START + 5000 * BLOCK) + 3;
	vy = prepare_at(b, "b-live", 0, 0, &re);
	if (!vy || vf_set_guid(&c, 4, vx) || vf_set_guid(&c, 5, vy)) {
		lab_result(false, "set-up: VFs carrying GUIDs (%s)", re.message);
		goto out;
	}
	if (write_config(&c, "node-c", true, 2) || lab_start(&c, 20000) < 0) {
		lab_result(false, "node-c restarts in cluster mode");
		log_tail(&c);
		goto out;
	}
	conf = conflicts_of(&c);
	{
		char w0[CLUSTER_NODE_MAX + 1], w2[CLUSTER_NODE_MAX + 1];
		size_t owners = 0;

		reserved_by(v, g[0], w0, sizeof(w0));
		reserved_by(v, g[2], w2, sizeof(w2));
		if (!lab_api(&c, "list", json_object(), &res, &re, 5000))
			owners = json_array_size(json_object_get(res, "owners"));
		lab_result(!strcmp(w0, "node-c") && !strcmp(w2, "node-c") &&
				   has_conflict(conf, g[1], "node-b") &&
				   !has_conflict(conf, g[0], NULL) && owners == 3,
			   "adoption: node-c's GUIDs are reserved for it in etcd (%s, %s), the one "
			   "node-b holds is a conflict naming node-b, all %zu attachments kept",
			   w0, w2, owners);
	}
	block_owner(v, vx, who, sizeof(who));
	lab_result(!strcmp(who, "node-c") && has_conflict(conf, vy, "node-b"),
		   "adoption of VFs' GUIDs: the free block of one is claimed for node-c (%s), "
		   "the one in node-b's block is a conflict naming node-b",
		   who);
	lab_result(ctl_status_has(&c, "Conflicts") && ctl_status_has(&c, "node-b"),
		   "ibvfctl cluster status shows node-c's conflict");
	{
		/* the conflicted GUID is never handed out by node-c, nor its reserved ones
		 * taken by node-b */
		uint64_t x = prepare_at(b, "b-steal", 4, g[0], &re);

		lab_result(!x && re.code == IBVF_RPC_GUID_CONFLICT && strstr(re.message, "node-c"),
			   "node-b cannot take an adopted GUID (%s)", re.message);
	}
	lab_release(b, "b-takes");
	lab_release(b, "b-live");
out:
	json_decref(conf);
	json_decref(res);
	lab_stop(&c, SIGTERM);
	lab_fini(&c);
}

/* node-a reclaimed while stopped comes back */
static void reclaimed(struct lab *a, struct view *v)
{
	struct ibvf_rpc_error re;
	char err[IBVF_ERR_LEN], who[CLUSTER_NODE_MAX + 1];
	uint64_t live, fresh;
	size_t nb = 0, ng = 0;
	json_t *conf;

	live = prepare_at(a, "live", 5, 0, &re);
	lab_stop(a, SIGTERM);
	cluster_node_reclaim(v->b, "node-a", true, &nb, &ng, err, sizeof(err));
	if (!live || !nb || lab_start(a, 20000) < 0) {
		lab_result(false, "node-a reclaimed while stopped, restarted (%zu blocks)", nb);
		log_tail(a);
		return;
	}
	conf = conflicts_of(a);
	lab_result(has_conflict(conf, live, NULL),
		   "a reclaimed node that comes back reports its live attachment as a conflict "
		   "in status");
	json_decref(conf);
	lab_result(ctl_status_has(a, "reclaimed"), "and in ibvfctl cluster status");
	fresh = prepare_at(a, "fresh", 0, 0, &re);
	block_owner(v, fresh, who, sizeof(who));
	lab_result(fresh && (fresh - LAB_RANGE_START) / BLOCK != (live - LAB_RANGE_START) / BLOCK &&
			   !strcmp(who, "node-a"),
		   "no new GUID from the reclaimed block (a new one from node-a's block)");
	lab_release(a, "live");
	for (int i = 0; i < 30; i++) {
		conf = conflicts_of(a);
		if (conf && !json_array_size(conf)) {
			json_decref(conf);
			break;
		}
		json_decref(conf);
		conf = NULL;
		usleep(100000);
	}
	conf = conflicts_of(a);
	lab_result(conf && !json_array_size(conf), "the conflict is over once it is released");
	json_decref(conf);
}

/* the first GUIDs of @node's blocks, sorted; count in *n */
static size_t blocks_of(struct view *v, const char *node, uint64_t *firsts, size_t max)
{
	struct cluster_block *all = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0, k = 0;

	if (!cluster_blocks_list(v->b, node, &all, &n, err, sizeof(err)))
		for (size_t i = 0; i < n && k < max; i++)
			firsts[k++] = all[i].first;
	free(all);
	return k;
}

/* idle blocks go back to etcd above the high watermark; a block in use stays */
static void idle_return(const char *ibvfd, const char *moddir, struct view *v)
{
	enum { PODS = 40 };
	struct ibvf_rpc_error re;
	uint64_t g[PODS], before[16], after[16], top = 0; /* top: the live pod's GUID */
	size_t nb = 0, na = 0;
	struct lab d;
	json_t *j;
	int ok = 0, keep = -1, busy = 0;
	char owner[CLUSTER_NODE_MAX + 1] = "", err[IBVF_ERR_LEN];

	if (lab_init(&d, ibvfd, PODS, "file", moddir, NULL) || write_config(&d, "node-d", true, 30))
		goto out;
	/* high_watermark = low_watermark (4) + block_size (16): the least allowed */
	j = json_load_file(d.cfg, 0, NULL);
	json_object_set_new(json_object_get(json_object_get(j, "pool"), "cluster"),
			    "high_watermark", json_integer(20));
	json_dump_file(j, d.cfg, JSON_INDENT(1));
	json_decref(j);
	if (lab_start(&d, 20000) < 0) {
		lab_result(false, "node-d starts (high_watermark 20)");
		log_tail(&d);
		goto out;
	}
	for (int i = 0; i < PODS; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "d-%d", i);
		g[i] = prepare_at(&d, cid, i, 0, &re);
		for (int t = 0; !g[i] && re.code == IBVF_RPC_NOT_READY && t < 50; t++) {
			usleep(100000); /* the claimer is one block behind */
			g[i] = prepare_at(&d, cid, i, 0, &re);
		}
		ok += g[i] != 0;
		if (g[i] && (!top || g[i] < top)) {
			top = g[i];
			keep = i;
		}
	}
	nb = blocks_of(v, "node-d", before, 16);
	/* everything released but the pod in the lowest block (returned last) */
	for (int i = 0; i < PODS; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "d-%d", i);
		if (i != keep)
			lab_release(&d, cid);
	}
	for (int t = 0; t < 150; t++) {
		na = blocks_of(v, "node-d", after, 16);
		if (na < nb)
			break;
		usleep(100000);
	}
	usleep(2500000); /* and no further return below the high watermark */
	na = blocks_of(v, "node-d", after, 16);
	{
		bool top_kept = false;
		uint64_t gone = 0;

		for (size_t i = 0; i < na; i++)
			top_kept = top_kept || (top >= after[i] && top < after[i] + BLOCK);
		for (size_t i = 0; i < nb; i++) {
			bool still = false;

			for (size_t k = 0; k < na; k++)
				still = still || after[k] == before[i];
			if (!still)
				gone = before[i];
		}
		for (size_t i = 0; i < nb; i++)
			printf("# node-d block %016" PRIx64 " before\n", before[i]);
		for (size_t i = 0; i < na; i++)
			printf("# node-d block %016" PRIx64 " after\n", after[i]);
		printf("# live pod's GUID %016" PRIx64 "\n", top);
		lab_result(ok == PODS && nb >= 3 && na < nb && top_kept,
			   "idle blocks are returned above the high watermark (%zu blocks held "
			   "for %d pods, %zu after the releases), the block of the live pod stays",
			   nb, ok, na);
		/* quarantine travels with the block: nobody may use it for quarantine_s */
		{
			struct view q; /* a node with node-d's quarantine (30 s) */

			if (gone && !view_open_q(&q, 30)) {
				busy = cluster_guid_reserve(q.b, gone + 1, owner, sizeof(owner),
							    err, sizeof(err));
				if (!busy)
					cluster_guid_unreserve(q.b, gone + 1, err, sizeof(err));
			}
			view_close(&q);
		}
		lab_result(gone && busy == -EBUSY,
			   "a returned block (its GUIDs quarantined 30 s on node-d) is in "
			   "quarantine for every node (%d: %s)",
			   busy, err);
	}
out:
	lab_stop(&d, SIGTERM);
	lab_fini(&d);
}

int main(int argc, char **argv)
{
	const char *missing = etcd_lab_missing();
	struct lab a, b;
	struct view v;
	char err[IBVF_ERR_LEN];

	if (argc != 4) {
		fprintf(stderr, "usage: %s IBVFD SM_MODULE_DIR IBVFCTL\n", argv[0]);
		return 2;
	}
	ibvfctl = argv[3];
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ibvf_log_init("test_cluster_node", IBVF_LOG_STDERR, LOG_ERR);
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
	if (write_config(&a, "node-a", true, 2) || write_config(&b, "node-b", true, 2) ||
	    lab_start(&a, 20000) < 0 || lab_start(&b, 20000) < 0 || view_open(&v)) {
		lab_result(false, "two cluster-mode ibvfd start");
		log_tail(&a);
		log_tail(&b);
		goto out;
	}
	requested(&a, &b, &v);
	adoption(argv[1], argv[2], &b, &v);
	reclaimed(&a, &v);
	idle_return(argv[1], argv[2], &v);
	etcd_down_request(&b, &v);
	view_close(&v);
out:
	lab_stop(&a, SIGTERM);
	lab_stop(&b, SIGTERM);
	lab_fini(&a);
	lab_fini(&b);
	etcd_lab_stop(&elab);
	printf("1..%d\n", lab_n_ok + lab_n_fail);
	return lab_n_fail ? 1 : 0;
}
