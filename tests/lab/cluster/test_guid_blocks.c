// SPDX-License-Identifier: MIT
/*
 * daemon/cluster/guid_blocks.c against a real 3-member etcd cluster on
 * loopback: the layout check, block claims by 8 concurrent nodes (no block
 * owned twice, none lost), requested GUIDs (exactly one of two concurrent
 * requesters wins; a GUID in another node's block is refused naming it;
 * claims and reservations racing never give one GUID two owners), the
 * start-up check of a node's blocks, and claims while a member is down.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "guid_blocks.h"

static int failures, checks;
static char last_err[IBVF_ERR_LEN]; /* cleared after each check (unused by most checks) */

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
		last_err[0] = '\0';                                                                \
		fflush(stdout);                                                                    \
	} while (0)

#define NODES 8

static struct etcd_lab lab;

/* 64 blocks of 4 in the first range, 3 in the second (4, 4, 2 GUIDs) */
static const struct cluster_range ranges[] = {{0x1000, 0x10ff}, {0x2000, 0x2009}};
#define TOTAL 67

struct node {
	char name[16];
	struct etcd_client *etcd;
	struct cluster_blocks *b;
	struct cluster_block got[TOTAL];
	size_t n_got;
	int last_ret;
	char err[IBVF_ERR_LEN];
	/* reservation races */
	uint64_t want[64];
	size_t n_want;
	int res_ret[64];
	char res_owner[64][32];
};

static pthread_barrier_t barrier;

static int node_open(struct node *n, const char *name, const char *prefix, uint32_t bs)
{
	struct etcd_client_opts eo = {.endpoints = lab.urls, .n_endpoints = 3, .timeout_ms = 8000};
	struct cluster_blocks_opts o = {
		.prefix = prefix, .node = name, .ranges = ranges, .n_ranges = 2, .block_size = bs};
	int ret;

	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	ret = etcd_client_new(&eo, &n->etcd, n->err, sizeof(n->err));
	o.etcd = n->etcd;
	if (!ret)
		ret = cluster_blocks_open(&o, &n->b, n->err, sizeof(n->err));
	return ret;
}

static void node_close(struct node *n)
{
	cluster_blocks_free(n->b);
	etcd_client_free(n->etcd);
	n->b = NULL;
	n->etcd = NULL;
}

static void *claim_all(void *arg)
{
	struct node *n = arg;

	pthread_barrier_wait(&barrier);
	for (;;) {
		struct cluster_block blk;

		n->last_ret = cluster_blocks_claim(n->b, &blk, n->err, sizeof(n->err));
		if (n->last_ret)
			break;
		if (n->n_got < TOTAL)
			n->got[n->n_got++] = blk;
	}
	return NULL;
}

static void test_layout(void)
{
	struct node a, b;
	uint64_t f = 0, l = 0;
	int ret;

	ret = node_open(&a, "node-a", "/layout/", 4);
	CHECK(!ret && cluster_blocks_total(a.b) == TOTAL, "layout created: %" PRIu64 " blocks %s",
	      a.b ? cluster_blocks_total(a.b) : 0, a.err);
	CHECK(a.b && !cluster_block_of(a.b, 0x2009, &f, &l) && f == 0x2008 && l == 0x2009,
	      "the short last block of a range: %" PRIx64 "..%" PRIx64, f, l);
	CHECK(a.b && cluster_block_of(a.b, 0x3000, &f, &l) == -ERANGE, "a GUID in no range");
	ret = node_open(&b, "node-b", "/layout/", 4);
	CHECK(!ret, "a second node with the same layout %s", b.err);
	node_close(&b);
	ret = node_open(&b, "node-b", "/layout/", 8);
	CHECK(ret == -EEXIST && strstr(b.err, "/layout/layout") && strstr(b.err, "block_size"),
	      "another block size on the same prefix: -EEXIST (%s)", b.err);
	node_close(&b);
	ret = node_open(&b, "node-b", "/other-fabric/", 8);
	CHECK(!ret, "another prefix (another fabric) may differ %s", b.err);
	node_close(&b);
	node_close(&a);
}

static void test_concurrent_claims(void)
{
	static struct node n[NODES];
	pthread_t th[NODES];
	struct cluster_block *all = NULL;
	size_t n_all = 0, sum = 0;
	uint8_t owner_count[TOTAL] = {0};
	bool ok = true, agree = true;
	char err[IBVF_ERR_LEN];
	uint64_t calls = 0;
	int64_t t0;

	for (int i = 0; i < NODES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "node-%d", i);
		if (node_open(&n[i], name, "/claims/", 4)) {
			CHECK(false, "open %s: %s", name, n[i].err);
			return;
		}
	}
	pthread_barrier_init(&barrier, NULL, NODES);
	t0 = ibvf_mono_ms();
	for (int i = 0; i < NODES; i++)
		pthread_create(&th[i], NULL, claim_all, &n[i]);
	for (int i = 0; i < NODES; i++)
		pthread_join(th[i], NULL);
	t0 = ibvf_mono_ms() - t0;
	pthread_barrier_destroy(&barrier);
	for (int i = 0; i < NODES; i++) {
		sum += n[i].n_got;
		calls += etcd_client_calls(n[i].etcd);
		if (n[i].last_ret != -ENOSPC) {
			ok = false;
			printf("# %s ended with %d: %s\n", n[i].name, n[i].last_ret, n[i].err);
		}
		for (size_t k = 0; k < n[i].n_got; k++) {
			uint64_t f, l, idx;

			cluster_block_of(n[i].b, n[i].got[k].first, &f, &l);
			idx = f < 0x2000 ? (f - 0x1000) / 4 : 64 + (f - 0x2000) / 4;
			if (idx < TOTAL)
				owner_count[idx]++;
		}
	}
	CHECK(ok, "every node claimed until -ENOSPC (\"no free GUID block\")");
	{
		bool once = true;

		for (int i = 0; i < TOTAL; i++)
			once = once && owner_count[i] == 1;
		CHECK(sum == TOTAL && once,
		      "%d nodes at once: %zu claims for %d blocks, each block claimed exactly once "
		      "(%lld ms, %" PRIu64 " etcd requests)",
		      NODES, sum, TOTAL, (long long)t0, calls);
	}
	if (!cluster_blocks_list(n[0].b, NULL, &all, &n_all, err, sizeof(err))) {
		for (size_t k = 0; k < n_all; k++) {
			bool found = false;

			for (int i = 0; i < NODES && !found; i++)
				for (size_t j = 0; j < n[i].n_got && !found; j++)
					found = n[i].got[j].first == all[k].first &&
						!strcmp(n[i].name, all[k].node);
			agree = agree && found;
		}
	}
	CHECK(n_all == TOTAL && agree, "etcd's list (%zu blocks) names the node that got each",
	      n_all);
	free(all);
	for (int i = 0; i < NODES; i++)
		node_close(&n[i]);
}

static void *reserve_all(void *arg)
{
	struct node *n = arg;

	pthread_barrier_wait(&barrier);
	for (size_t i = 0; i < n->n_want; i++) {
		char err[IBVF_ERR_LEN];

		n->res_ret[i] = cluster_guid_reserve(n->b, n->want[i], n->res_owner[i],
						     sizeof(n->res_owner[i]), err, sizeof(err));
		if (n->res_ret[i] == -EEXIST && !strstr(err, n->res_owner[i]))
			n->res_ret[i] = -EPROTO; /* the message must name the winner */
	}
	return NULL;
}

static void test_requested_guids(void)
{
	static struct node a, b;
	struct cluster_block blk;
	char owner[32] = "", err[IBVF_ERR_LEN] = "";
	pthread_t th[2];
	int ret, wins_a = 0, wins_b = 0, bad = 0;

	if (node_open(&a, "node-a", "/req/", 4) || node_open(&b, "node-b", "/req/", 4)) {
		CHECK(false, "open: %s %s", a.err, b.err);
		return;
	}
	ret = cluster_blocks_claim(a.b, &blk, err, sizeof(err));
	CHECK(!ret, "node-a claims block %" PRIx64 "..%" PRIx64 " %s", blk.first, blk.last, err);
	ret = cluster_guid_reserve(b.b, blk.first + 1, owner, sizeof(owner), err, sizeof(err));
	CHECK(ret == -EEXIST && !strcmp(owner, "node-a") && strstr(err, "node-a"),
	      "node-b asks for a GUID in node-a's block: refused naming node-a (%s)", err);
	ret = cluster_guid_reserve(a.b, blk.first + 1, owner, sizeof(owner), err, sizeof(err));
	CHECK(!ret, "node-a asks for a GUID in its own block: its pool's to decide %s", err);

	/* two nodes, the same GUIDs (outside any claimed block), at the same instant */
	/* GUIDs of blocks nobody claimed: every 5th GUID, skipping node-a's block */
	a.n_want = b.n_want = 20;
	for (uint64_t g = 0x1000, i = 0; i < 20; g += 5)
		if (g < blk.first || g > blk.last)
			a.want[i] = b.want[i] = g, i++;
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_create(&th[0], NULL, reserve_all, &a);
	pthread_create(&th[1], NULL, reserve_all, &b);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	pthread_barrier_destroy(&barrier);
	for (size_t i = 0; i < 20; i++) {
		bool a_won = !a.res_ret[i], b_won = !b.res_ret[i];

		wins_a += a_won;
		wins_b += b_won;
		if (a_won == b_won ||
		    (a_won && (b.res_ret[i] != -EEXIST || strcmp(b.res_owner[i], "node-a"))) ||
		    (b_won && (a.res_ret[i] != -EEXIST || strcmp(a.res_owner[i], "node-b"))))
			bad++;
	}
	CHECK(bad == 0 && wins_a + wins_b == 20,
	      "20 GUIDs asked by two nodes at once: exactly one winner each, the loser's error "
	      "names the winner (node-a %d, node-b %d)",
	      wins_a, wins_b);

	/* a block holding another node's reserved GUID is never claimed by anyone */
	{
		struct cluster_block *all;
		size_t n_all = 0;
		bool clash = false;

		while (!cluster_blocks_claim(a.b, &blk, err, sizeof(err)))
			;
		CHECK(strstr(err, "no free GUID block") != NULL, "node-a claimed all it could: %s",
		      err);
		if (!cluster_blocks_list(a.b, NULL, &all, &n_all, err, sizeof(err))) {
			for (size_t k = 0; k < n_all; k++)
				for (size_t i = 0; i < 20; i++) {
					bool b_has = !b.res_ret[i];

					if (b_has && b.want[i] >= all[k].first &&
					    b.want[i] <= all[k].last)
						clash = true;
				}
			free(all);
		}
		CHECK(!clash, "no claimed block holds a GUID node-b reserved");
		for (size_t i = 0; i < 20; i++) {
			if (b.res_ret[i])
				continue;
			ret = cluster_guid_unreserve(b.b, b.want[i], err, sizeof(err));
			CHECK(!ret, "node-b releases its reservation of %" PRIx64 " %s", b.want[i],
			      err);
			ret = cluster_blocks_claim(a.b, &blk, err, sizeof(err));
			CHECK(!ret && b.want[i] >= blk.first && b.want[i] <= blk.last,
			      "its block is claimable again: node-a gets %" PRIx64 "..%" PRIx64
			      " %s",
			      blk.first, blk.last, err);
			break;
		}
		ret = cluster_guid_unreserve(b.b, a.want[0], err, sizeof(err));
		CHECK(!ret, "releasing a GUID one does not hold is a no-op %s", err);
	}
	node_close(&a);
	node_close(&b);
}

static void *claim_some(void *arg)
{
	struct node *n = arg;

	pthread_barrier_wait(&barrier);
	for (int i = 0; i < 30; i++) {
		struct cluster_block blk;

		if (cluster_blocks_claim(n->b, &blk, n->err, sizeof(n->err)))
			break;
		if (n->n_got < TOTAL)
			n->got[n->n_got++] = blk;
	}
	return NULL;
}

/* claims (node-a) and reservations (node-b) racing over the same GUIDs */
static void test_claim_reserve_race(void)
{
	static struct node a, b;
	pthread_t th[2];
	int clash = 0, reserved = 0;

	if (node_open(&a, "node-a", "/race/", 4) || node_open(&b, "node-b", "/race/", 4)) {
		CHECK(false, "open: %s %s", a.err, b.err);
		return;
	}
	b.n_want = 64;
	for (size_t i = 0; i < 64; i++)
		b.want[i] = 0x1000 + i * 4 + (i % 4); /* one GUID in each block of range 1 */
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_create(&th[0], NULL, claim_some, &a);
	pthread_create(&th[1], NULL, reserve_all, &b);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	pthread_barrier_destroy(&barrier);
	for (size_t i = 0; i < 64; i++) {
		bool in_a = false;

		for (size_t k = 0; k < a.n_got; k++)
			in_a = in_a || (b.want[i] >= a.got[k].first && b.want[i] <= a.got[k].last);
		if (!b.res_ret[i]) {
			reserved++;
			clash += in_a;
		} else if (!in_a || b.res_ret[i] != -EEXIST || strcmp(b.res_owner[i], "node-a")) {
			clash++; /* refused, but not because node-a owns it */
		}
	}
	CHECK(clash == 0 && a.n_got + (size_t)reserved >= 30,
	      "claims and reservations racing: every GUID has one owner (node-a %zu blocks, "
	      "node-b %d reservations)",
	      a.n_got, reserved);
	node_close(&a);
	node_close(&b);
}

static void test_verify(void)
{
	static struct node a, b;
	struct cluster_block mine[3], theirs;
	struct cluster_block_check *chk = NULL;
	char err[IBVF_ERR_LEN] = "", key[128];
	size_t n = 0;
	int ret;

	if (node_open(&a, "node-a", "/verify/", 4) || node_open(&b, "node-b", "/verify/", 4)) {
		CHECK(false, "open: %s %s", a.err, b.err);
		return;
	}
	for (int i = 0; i < 3; i++)
		cluster_blocks_claim(a.b, &mine[i], err, sizeof(err));
	cluster_blocks_claim(b.b, &theirs, err, sizeof(err));
	{
		uint64_t store[] = {mine[0].first, mine[1].first};

		ret = cluster_blocks_verify(a.b, store, 2, &chk, &n, err, sizeof(err));
		CHECK(ret == 1 && n == 3 && chk[0].state == CLUSTER_BLOCK_OWNED &&
			      chk[1].state == CLUSTER_BLOCK_OWNED &&
			      chk[2].state == CLUSTER_BLOCK_UNLISTED &&
			      chk[2].first == mine[2].first,
		      "start-up check: 2 owned, a third block etcd gives node-a but its store "
		      "lacks is reported (%d)",
		      ret);
		free(chk);
	}
	/* an admin reclaimed mine[1] while node-a was away; the store also lists node-b's */
	snprintf(key, sizeof(key), "/verify/blocks/%016" PRIx64, mine[1].first);
	{
		struct etcd_op del = {.type = ETCD_OP_DELETE, .key = key};
		struct etcd_txn_result t;

		etcd_txn(a.etcd, NULL, 0, &del, 1, NULL, 0, &t, err, sizeof(err));
		etcd_txn_result_free(&t);
	}
	{
		uint64_t store[] = {mine[0].first, mine[1].first, mine[2].first, theirs.first};

		ret = cluster_blocks_verify(a.b, store, 4, &chk, &n, err, sizeof(err));
		CHECK(ret == 2 && n == 4 && chk[0].state == CLUSTER_BLOCK_OWNED &&
			      chk[1].state == CLUSTER_BLOCK_LOST &&
			      chk[2].state == CLUSTER_BLOCK_OWNED &&
			      chk[3].state == CLUSTER_BLOCK_FOREIGN &&
			      !strcmp(chk[3].owner, "node-b"),
		      "a reclaimed block is lost, another node's is foreign (owner node-b) (%d)",
		      ret);
		free(chk);
	}
	node_close(&a);
	node_close(&b);
}

/* two blocks, quarantine 2 s: return, quarantine across nodes, heartbeat, reclaim */
static int open_small(struct node *n, const char *name)
{
	static const struct cluster_range small = {0x5000, 0x5007};
	struct etcd_client_opts eo = {.endpoints = lab.urls, .n_endpoints = 3, .timeout_ms = 8000};
	struct cluster_blocks_opts o = {.prefix = "/ret/",
					.node = name,
					.ranges = &small,
					.n_ranges = 1,
					.block_size = 4,
					.quarantine_s = 2};
	int ret;

	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	ret = etcd_client_new(&eo, &n->etcd, n->err, sizeof(n->err));
	o.etcd = n->etcd;
	return ret ? ret : cluster_blocks_open(&o, &n->b, n->err, sizeof(n->err));
}

static void test_return_and_reclaim(void)
{
	static struct node a, b;
	struct cluster_block x, y, got;
	struct cluster_block_check *chk = NULL;
	char err[IBVF_ERR_LEN] = "";
	int64_t lease_a = 0, lease_b = 0, first_lease;
	size_t nb = 0, ng = 0, n = 0;
	bool alive = false;
	int ret;

	if (open_small(&a, "node-a") || open_small(&b, "node-b")) {
		CHECK(false, "open: %s %s", a.err, b.err);
		return;
	}
	ret = cluster_blocks_claim(a.b, &x, err, sizeof(err));
	ret = ret ? ret : cluster_blocks_claim(a.b, &y, err, sizeof(err));
	CHECK(!ret, "node-a holds both blocks %s", err);
	CHECK(cluster_blocks_claim(b.b, &got, err, sizeof(err)) == -ENOSPC, "node-b: none free");
	ret = cluster_block_return(a.b, x.first, err, sizeof(err));
	CHECK(!ret, "node-a returns %" PRIx64 "..%" PRIx64 " %s", x.first, x.last, err);
	ret = cluster_blocks_claim(b.b, &got, err, sizeof(err));
	CHECK(ret == -ENOSPC && strstr(err, "quarantine"),
	      "node-b cannot claim it during the 2 s quarantine (%s)", err);
	ret = cluster_guid_reserve(b.b, x.first + 1, NULL, 0, err, sizeof(err));
	CHECK(ret == -EBUSY && strstr(err, "quarantine"), "nor ask for one of its GUIDs (%d: %s)",
	      ret, err);
	ret = cluster_block_return(a.b, x.first, err, sizeof(err));
	CHECK(ret == -ENOENT, "returning it twice: -ENOENT (%s)", err);
	ret = cluster_block_return(b.b, y.first, err, sizeof(err));
	CHECK(ret == -EPERM && strstr(err, "node-a"), "node-b cannot return node-a's block (%s)",
	      err);
	sleep(2);
	usleep(300000);
	ret = cluster_blocks_claim(b.b, &got, err, sizeof(err));
	CHECK(!ret && got.first == x.first, "after the quarantine node-b claims it %s", err);

	/* heartbeat and reclaim */
	ret = cluster_node_heartbeat(a.b, 30, &lease_a, err, sizeof(err));
	first_lease = lease_a;
	ret = ret ? ret : cluster_node_heartbeat(a.b, 30, &lease_a, err, sizeof(err));
	CHECK(!ret && lease_a == first_lease, "node-a's heartbeat: granted, then renewed %s", err);
	ret = cluster_node_alive(b.b, "node-a", &alive, err, sizeof(err));
	CHECK(!ret && alive, "node-a is alive");
	ret = cluster_node_reclaim(b.b, "node-a", false, &nb, &ng, err, sizeof(err));
	CHECK(ret == -EBUSY && strstr(err, "node-a") && strstr(err, "heartbeat"),
	      "reclaim of a live node is refused (%s)", err);
	etcd_lease_revoke(a.etcd, lease_a, err, sizeof(err)); /* node-a dies */
	ret = cluster_node_alive(b.b, "node-a", &alive, err, sizeof(err));
	CHECK(!ret && !alive, "node-a's heartbeat is gone");
	ret = cluster_node_reclaim(b.b, "node-a", false, &nb, &ng, err, sizeof(err));
	CHECK(!ret && nb == 1 && ng == 0, "node-a reclaimed: %zu block freed %s", nb, err);
	{
		uint64_t store[] = {y.first};

		ret = cluster_blocks_verify(a.b, store, 1, &chk, &n, err, sizeof(err));
		CHECK(ret == 1 && n == 1 && chk[0].state == CLUSTER_BLOCK_LOST,
		      "node-a comes back: its block is lost (a conflict, no new GUID from it)");
		free(chk);
	}
	ret = cluster_blocks_claim(b.b, &got, err, sizeof(err));
	CHECK(ret == -ENOSPC, "a reclaimed block is in quarantine too (%s)", err);
	ret = cluster_node_heartbeat(b.b, 30, &lease_b, err, sizeof(err));
	ret = ret ? ret : cluster_node_reclaim(a.b, "node-b", true, &nb, &ng, err, sizeof(err));
	CHECK(!ret && nb == 1, "a forced reclaim frees a live node's block (%zu) %s", nb, err);
	etcd_lease_revoke(b.etcd, lease_b, err, sizeof(err));
	node_close(&a);
	node_close(&b);
}

/* a member down: claims go on through the others */
static void test_claim_member_down(void)
{
	static struct node a;
	struct cluster_block blk;
	char err[IBVF_ERR_LEN] = "";
	int ret, leader;

	if (node_open(&a, "node-a", "/down/", 4)) {
		CHECK(false, "open: %s", a.err);
		return;
	}
	leader = etcd_lab_leader(&lab);
	etcd_lab_member_stop(&lab, leader < 0 ? 0 : leader, true);
	ret = cluster_blocks_claim(a.b, &blk, err, sizeof(err));
	CHECK(!ret, "leader (member %d) killed: a block claim still succeeds %s", leader, err);
	etcd_lab_member_start(&lab, leader < 0 ? 0 : leader, err, sizeof(err));
	node_close(&a);
}

int main(void)
{
	const char *missing = etcd_lab_missing();
	char err[IBVF_ERR_LEN];
	int64_t t0 = ibvf_mono_ms();

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (missing)
		return etcd_lab_skip(missing);
	if (etcd_lab_start(&lab, 3, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&lab);
		return 1;
	}
	test_layout();
	test_concurrent_claims();
	test_requested_guids();
	test_claim_reserve_race();
	test_verify();
	test_return_and_reclaim();
	test_claim_member_down();
	etcd_lab_stop(&lab);
	printf("1..%d\n# %d failure(s), %lld ms\n", checks, failures,
	       (long long)(ibvf_mono_ms() - t0));
	return failures ? 1 : 0;
}
