// SPDX-License-Identifier: MIT
/*
 * The multi-node campaign of issue 18: three real ibvfd nodes (own state
 * dir, socket, fake VFs, node name from NODE_NAME as a DaemonSet sets it)
 * with ONE pool/cluster config on a real 3-member etcd. Every round, all
 * nodes prepare (and commit) on all their free VFs at once, then the test
 * checks that no GUID is live on two nodes (the port GUIDs on the fake VFs
 * and the daemons' lists), that every live GUID lies in a block etcd gives
 * its node, and releases half the VFs. Between rounds: an etcd member
 * killed, the leader killed, quorum lost (two members stopped) and
 * restored, all members down and back, a node daemon SIGKILLed while its
 * block claim is in flight (claims are frequent: block_size 4, quarantine
 * 600 s so each prepare takes a new GUID; the node's etcd answers are held
 * 300 ms by its proxy so that the kill lands between etcd's commit and the
 * node's record), and a node cut off from etcd while its Pods stay attached.
 * Each node reaches etcd through its own TCP proxy (one per member) that the
 * test can cut or slow. CI runs 21 rounds (every fault); IBVF_CLUSTER_SOAK_ROUNDS=N
 * runs N rounds.
 * Usage: test_cluster_campaign IBVFD SM_MODULE_DIR
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "clock.h"
#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "guid_blocks.h"
#include "ibvfd_lab.h"
#include "log.h"

#define N_NODES 3
#define N_VFS	6
#define BLOCK	4
#define PREFIX	"/camp/"
#define HOLD_MS 300

static struct etcd_lab elab;

/* ------------------------------------------------------------ proxy -- */

/* One TCP proxy from a node to one etcd member: cut (connections closed and
 * refused) or slowed (etcd's answers to a txn held HOLD_MS) on demand. */
struct proxy {
	int lfd, port, target;
	atomic_bool *cut, *slow, stop;
	atomic_int *holding; /* connections holding a txn answer now */
	pthread_t th;
};

struct pconn {
	int c, s;
	struct proxy *p;
};

static void *pconn_main(void *arg)
{
	struct pconn *pc = arg;
	bool txn = false;
	char buf[16384];

	while (!atomic_load(&pc->p->stop) && !atomic_load(pc->p->cut)) {
		struct pollfd f[2] = {{.fd = pc->c, .events = POLLIN},
				      {.fd = pc->s, .events = POLLIN}};
		ssize_t n;

		if (poll(f, 2, 50) <= 0)
			continue;
		if (f[0].revents) {
			n = read(pc->c, buf, sizeof(buf) - 1);
			if (n <= 0)
				break;
			buf[n] = 0;
			if (strstr(buf, "POST "))
				txn = strstr(buf, "/kv/txn") != NULL;
			if (write(pc->s, buf, (size_t)n) != n)
				break;
		}
		if (f[1].revents) {
			n = read(pc->s, buf, sizeof(buf));
			if (n <= 0)
				break;
			if (txn && atomic_load(pc->p->slow)) {
				struct timespec ts = {0, HOLD_MS * 1000000L};

				atomic_fetch_add(pc->p->holding, 1);
				nanosleep(&ts, NULL);
				atomic_fetch_sub(pc->p->holding, 1);
			}
			txn = false;
			if (write(pc->c, buf, (size_t)n) != n)
				break;
		}
	}
	close(pc->c);
	close(pc->s);
	free(pc);
	return NULL;
}

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;

	while (!atomic_load(&p->stop)) {
		struct pollfd f = {.fd = p->lfd, .events = POLLIN};
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_port = htons((uint16_t)p->target),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		struct pconn *pc;
		pthread_t t;
		int c, s;

		if (poll(&f, 1, 50) <= 0)
			continue;
		c = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (atomic_load(p->cut) || s < 0 ||
		    connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
			close(c);
			if (s >= 0)
				close(s);
			continue;
		}
		pc = malloc(sizeof(*pc));
		if (!pc) {
			close(c);
			close(s);
			continue;
		}
		*pc = (struct pconn){.c = c, .s = s, .p = p};
		if (pthread_create(&t, NULL, pconn_main, pc)) {
			close(c);
			close(s);
			free(pc);
			continue;
		}
		pthread_detach(t);
	}
	close(p->lfd);
	return NULL;
}

static int proxy_start(struct proxy *p, int target, atomic_bool *cut, atomic_bool *slow,
		       atomic_int *holding)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);

	*p = (struct proxy){.target = target, .cut = cut, .slow = slow, .holding = holding};
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(p->lfd, 64) ||
	    getsockname(p->lfd, (struct sockaddr *)&sa, &sl))
		return -errno;
	p->port = ntohs(sa.sin_port);
	return pthread_create(&p->th, NULL, proxy_main, p) ? -EAGAIN : 0;
}

static void proxy_stop(struct proxy *p)
{
	atomic_store(&p->stop, true);
	pthread_join(p->th, NULL);
}

/* ------------------------------------------------------------- nodes -- */

struct node {
	struct lab l;
	char name[16];
	struct proxy px[3];
	char url[3][64];
	atomic_bool cut, slow;
	atomic_int holding;
	char cid[N_VFS][48]; /* the owner on each VF, "" when free */
	uint64_t guid[N_VFS];
	bool uncommitted[N_VFS];
	bool down; /* SIGKILLed, not yet restarted */
};

static struct node nodes[N_NODES];

struct stats {
	int prepares, not_ready, errors, dups, outside, lost, claims_killed, unlisted, rounds;
	int64_t worst_wait_ms;
};

static struct stats st;

/* The config of every node: the lab's own paths plus the SAME pool and
 * pool.cluster (no "node": NODE_NAME names it, as the downward API does). */
static int write_cfg(struct node *n)
{
	json_t *j, *c;
	int ret;

	lab_write_config(&n->l);
	j = json_load_file(n->l.cfg, 0, NULL);
	c = json_pack("{s:[s,s,s],s:s,s:i,s:i,s:i}", "endpoints", n->url[0], n->url[1], n->url[2],
		      "prefix", PREFIX, "block_size", BLOCK, "low_watermark", 2, "timeout_ms",
		      1500);
	if (!j || !c)
		return -1;
	json_object_set_new(json_object_get(j, "pool"), "cluster", c);
	json_object_set_new(json_object_get(j, "pool"), "quarantine_s", json_integer(600));
	ret = json_dump_file(j, n->l.cfg, JSON_INDENT(1));
	json_decref(j);
	return ret;
}

static int node_start(struct node *n)
{
	int ret;

	setenv("NODE_NAME", n->name, 1); /* inherited by the daemon lab_start() forks */
	ret = lab_start(&n->l, 30000) < 0 ? -1 : 0;
	unsetenv("NODE_NAME");
	n->down = ret != 0;
	return ret;
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

/* ---------------------------------------------------------- prepares -- */

struct job {
	struct node *n;
	int vf, round, max_wait_ms;
	uint64_t guid;
	int code, waits;
	int64_t wait_ms;
	char msg[512], cid[48];
};

/* One Pod's ADD on @j->vf: prepare (NOT_READY retried for up to 8 s, counted) and commit. */
static void *job_main(void *arg)
{
	struct job *j = arg;
	int64_t t0 = ibvf_mono_ms();
	char *cid = j->cid;

	snprintf(j->cid, sizeof(j->cid), "r%d-%s-v%d", j->round, j->n->name, j->vf);
	for (;;) {
		struct ibvf_rpc_error re = {0};
		json_t *res = NULL;
		int ret = lab_prepare(&j->n->l, cid, j->vf, NULL, &res, &re);

		if (!ret) {
			const char *s = json_string_value(json_object_get(res, "guid"));

			if (s && !ibvf_guid_parse(s, &j->guid, NULL, 0))
				j->code = 0;
			else
				j->code = -1;
			json_decref(res);
			break;
		}
		json_decref(res);
		j->code = re.code ? re.code : ret;
		snprintf(j->msg, sizeof(j->msg), "%s", re.message);
		if (re.code != IBVF_RPC_NOT_READY || ibvf_mono_ms() - t0 > j->max_wait_ms)
			break;
		j->waits++;
		usleep(100000);
	}
	j->wait_ms = j->waits ? ibvf_mono_ms() - t0 : 0;
	if (!j->code) {
		/* a Pod whose ADD did not end (commit failed: the daemon was killed)
		 * gets the CNI plugin's DEL later: uncommitted marks it */
		j->n->uncommitted[j->vf] =
			lab_api(&j->n->l, "commit", json_pack("{s:o}", "owner", lab_owner(cid)),
				NULL, NULL, 20000) != 0;
		snprintf(j->n->cid[j->vf], sizeof(j->n->cid[0]), "%s", cid);
		j->n->guid[j->vf] = j->guid;
	}
	return NULL;
}

/* Prepares on every free VF of every running node at once. @ok_not_ready:
 * etcd or the node's link is down, so a node out of GUIDs may answer not ready. */
static void round_prepares(int round, bool ok_not_ready)
{
	static struct job jobs[N_NODES * N_VFS];
	pthread_t th[N_NODES * N_VFS];
	int nj = 0, bad = 0, nr = 0;

	for (int i = 0; i < N_NODES; i++)
		for (int v = 0; v < N_VFS; v++) {
			if (nodes[i].down || nodes[i].cid[v][0])
				continue;
			/* with etcd down a node out of GUIDs stays not ready: wait less */
			jobs[nj] = (struct job){.n = &nodes[i],
						.vf = v,
						.round = round,
						.max_wait_ms = ok_not_ready ? 1000 : 8000};
			if (pthread_create(&th[nj], NULL, job_main, &jobs[nj]))
				continue;
			nj++;
		}
	for (int k = 0; k < nj; k++) {
		pthread_join(th[k], NULL);
		st.prepares++;
		if (jobs[k].wait_ms > st.worst_wait_ms)
			st.worst_wait_ms = jobs[k].wait_ms;
		if (jobs[k].code == IBVF_RPC_NOT_READY) {
			nr++;
			if (!ok_not_ready)
				printf("# round %d %s vf %d: not ready with etcd up: %s\n", round,
				       jobs[k].n->name, jobs[k].vf, jobs[k].msg);
		} else if (jobs[k].code) {
			bad++;
			printf("# round %d %s vf %d: %d %s\n", round, jobs[k].n->name, jobs[k].vf,
			       jobs[k].code, jobs[k].msg);
		}
	}
	st.not_ready += nr;
	st.errors += bad + (ok_not_ready ? 0 : nr);
}

/* Release every other VF (by the round's parity): the GUIDs go to quarantine. */
static void round_releases(int round)
{
	for (int i = 0; i < N_NODES; i++)
		for (int v = round % 2; v < N_VFS; v += 2) {
			if (nodes[i].down || !nodes[i].cid[v][0])
				continue;
			lab_release_at(&nodes[i].l, nodes[i].cid[v], v, nodes[i].guid[v], NULL);
			nodes[i].cid[v][0] = 0;
			nodes[i].guid[v] = 0;
		}
}

/* ------------------------------------------------------------ checks -- */

struct live {
	uint64_t guid;
	int node;
};

/* the port GUIDs on node @i's fake VFs (what the fabric sees) */
static int vf_guids(int i, struct live *out, int max)
{
	int n = 0;

	for (int v = 0; v < N_VFS && n < max; v++) {
		char path[256], pci[16], line[256];
		unsigned long long port = 0;
		FILE *f;
		char *p;

		snprintf(path, sizeof(path), "%s/%s", nodes[i].l.vfdir, lab_pci(v, pci));
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f) && (p = strstr(line, "port=")))
			port = strtoull(p + 5, NULL, 16);
		fclose(f);
		if (port)
			out[n++] = (struct live){port, i};
	}
	return n;
}

/* the GUIDs node @i's daemon lists (-1: the daemon did not answer) */
static int listed_guids(int i, struct live *out, int max)
{
	struct ibvf_rpc_error re = {0};
	json_t *res = NULL, *o;
	int n = 0;

	if (nodes[i].down || lab_api(&nodes[i].l, "list", json_object(), &res, &re, 20000))
		return -1;
	o = json_object_get(res, "owners");
	for (size_t k = 0; k < json_array_size(o) && n < max; k++) {
		const char *s = json_string_value(json_object_get(json_array_get(o, k), "guid"));
		uint64_t g;

		if (s && !ibvf_guid_parse(s, &g, NULL, 0) && g)
			out[n++] = (struct live){g, i};
	}
	json_decref(res);
	return n;
}

static struct etcd_client *checker_etcd;
static struct cluster_blocks *checker;

/* every block etcd lists (-1: etcd did not answer) */
static int etcd_blocks(struct cluster_block **all, size_t *n)
{
	char err[IBVF_ERR_LEN];

	*all = NULL;
	*n = 0;
	if (cluster_blocks_list(checker, NULL, all, n, err, sizeof(err))) {
		printf("# etcd: %s\n", err);
		return -1;
	}
	return 0;
}

/* the blocks etcd gives node @i (-1: etcd did not answer) */
static int etcd_count(int i)
{
	struct cluster_block *all;
	size_t nb;
	int c = 0;

	if (etcd_blocks(&all, &nb))
		return -1;
	for (size_t k = 0; k < nb; k++)
		c += !strcmp(all[k].node, nodes[i].name);
	free(all);
	return c;
}

/* the blocks node @i's store lists (cluster-blocks.json), -1 if unreadable */
static int file_count(int i)
{
	char path[256];
	json_t *j;
	int n;

	snprintf(path, sizeof(path), "%s/cluster-blocks.json", nodes[i].l.state);
	j = json_load_file(path, 0, NULL);
	n = j ? (int)json_array_size(json_object_get(j, "blocks")) : -1;
	json_decref(j);
	return n;
}

/*
 * No GUID live on two nodes (VF port GUIDs and daemon lists of all nodes);
 * with @in_etcd, every live GUID in a block etcd gives its node. Counts into st.
 */
static void check_round(int round, bool in_etcd, const char *what, bool baseline)
{
	struct live lv[N_NODES * N_VFS * 4];
	int n = 0, dups = 0, outside = 0, lost = 0;

	for (int i = 0; i < N_NODES; i++) {
		int nl;

		n += vf_guids(i, lv + n, (int)(sizeof(lv) / sizeof(lv[0])) - n);
		nl = listed_guids(i, lv + n, (int)(sizeof(lv) / sizeof(lv[0])) - n);
		/* no lost attachment: every VF the test holds is listed with its GUID */
		for (int v = 0; nl >= 0 && v < N_VFS; v++) {
			bool found = !nodes[i].cid[v][0] || nodes[i].uncommitted[v];

			for (int k = 0; k < nl && !found; k++)
				found = lv[n + k].guid == nodes[i].guid[v];
			lost += !found;
		}
		n += nl > 0 ? nl : 0;
	}
	for (int a = 0; a < n; a++) {
		bool first = true, two = false;

		for (int b = 0; b < a && first; b++)
			first = lv[b].guid != lv[a].guid;
		for (int b = a + 1; first && b < n; b++)
			two = two || (lv[a].guid == lv[b].guid && lv[a].node != lv[b].node);
		if (!first || !two)
			continue;
		if (dups++ < 4)
			printf("# round %d: GUID %016" PRIx64 " live on %s and another node\n",
			       round, lv[a].guid, nodes[lv[a].node].name);
	}
	if (baseline) {
		lab_result(dups > 0,
			   "baseline, cluster off: the same ranges on %d nodes put %d GUIDs on two "
			   "nodes (the check sees the bug cluster mode removes)",
			   N_NODES, dups);
		return;
	}
	st.dups += dups;
	st.outside += outside > 0 ? outside : 0;
	st.lost += lost;
	st.rounds++;
	lab_result(dups == 0 && outside == 0 && lost == 0,
		   "round %d (%s): %d live GUID records on %d nodes, none on two nodes, %s, %d "
		   "attachments lost",
		   round, what, n, N_NODES,
		   !in_etcd	 ? "etcd not asked"
		   : outside < 0 ? "etcd did not answer"
				 : (outside ? "SOME OUTSIDE their node's blocks"
					    : "all in their node's blocks"),
		   lost);
}

/* ------------------------------------------------------------ faults -- */

static int running_other(int not )
{
	for (int i = 0; i < elab.n; i++)
		if (i != not &&elab.m[i].pid)
			return i;
	return -1;
}

static void etcd_restore(void)
{
	char err[256];

	for (int i = 0; i < elab.n; i++)
		if (!elab.m[i].pid && etcd_lab_member_start(&elab, i, err, sizeof(err)))
			printf("# etcd member %d: %s\n", i, err);
	if (etcd_lab_wait_writable(&elab, 30000))
		printf("# etcd not writable 30 s after the restart\n");
}

/* Pod churn on one free VF: ADD and DEL over and over (quarantine 600 s: a new GUID each) */
struct churn {
	struct node *n;
	int vf, round, k;
	atomic_bool stop;
	char cid[48];
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(&c->stop)) {
		struct ibvf_rpc_error re = {0};

		snprintf(c->cid, sizeof(c->cid), "k%d-%s-%d", c->round, c->n->name, c->k++);
		if (lab_prepare(&c->n->l, c->cid, c->vf, NULL, NULL, &re) &&
		    re.code != IBVF_RPC_NOT_READY)
			break; /* the daemon is gone */
		if (lab_release(&c->n->l, c->cid))
			break;
	}
	return NULL;
}

/*
 * SIGKILL node @i while its block claim is in flight: its etcd answers to a
 * txn are held HOLD_MS by its proxy; prepares on its free VFs and Pod churn
 * on one of them use up its free GUIDs (so the claimer runs); once a txn
 * answer is held, kill -9. Return: true when the kill landed while a txn
 * answer was held (the claim done in etcd, not yet recorded). The caller
 * restarts it on the same state dir.
 */
static bool kill_during_claim(int i, int round)
{
	struct node *n = &nodes[i];
	static struct job jobs[N_VFS];
	static struct churn ch;
	pthread_t th[N_VFS], cth;
	int nj = 0, cv = -1;
	bool hit = false, churning;
	int64_t end;

	atomic_store(&n->slow, true);
	for (int v = 0; v < N_VFS; v++) {
		if (n->cid[v][0])
			continue;
		if (cv < 0) { /* the first free VF churns */
			cv = v;
			continue;
		}
		jobs[nj] =
			(struct job){.n = n, .vf = v, .round = 1000 + round, .max_wait_ms = 8000};
		if (!pthread_create(&th[nj], NULL, job_main, &jobs[nj]))
			nj++;
	}
	ch = (struct churn){.n = n, .vf = cv, .round = round};
	churning = cv >= 0 && !pthread_create(&cth, NULL, churn_main, &ch);
	end = ibvf_mono_ms() + 8000;
	while (!hit && ibvf_mono_ms() < end) {
		hit = atomic_load(&n->holding) > 0;
		if (!hit)
			usleep(2000);
	}
	lab_stop(&n->l, SIGKILL);
	n->down = true;
	atomic_store(&n->slow, false);
	atomic_store(&ch.stop, true);
	for (int k = 0; k < nj; k++) {
		pthread_join(th[k], NULL);
		if (jobs[k].code) { /* an ADD the kill failed: its DEL follows the restart */
			snprintf(n->cid[jobs[k].vf], sizeof(n->cid[0]), "%s", jobs[k].cid);
			n->uncommitted[jobs[k].vf] = true;
		}
	}
	if (churning) { /* the churn's last Pod may be half added: its DEL follows too */
		pthread_join(cth, NULL);
		snprintf(n->cid[cv], sizeof(n->cid[0]), "%s", ch.cid);
		n->uncommitted[cv] = true;
	}
	return hit;
}

/* ------------------------------------------------------------- main -- */

int main(int argc, char **argv)
{
	const char *missing = etcd_lab_missing(), *env = getenv("IBVF_CLUSTER_SOAK_ROUNDS");
	char err[IBVF_ERR_LEN];
	int rounds = env ? atoi(env) : 21, cut_node = -1;
	int64_t t_start = ibvf_mono_ms();
	bool started = true;

	if (argc != 3) {
		fprintf(stderr, "usage: %s IBVFD SM_MODULE_DIR\n", argv[0]);
		return 2;
	}
	if (rounds < 21)
		rounds = 21;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	srand((unsigned)time(NULL));
	ibvf_log_init("test_cluster_campaign", IBVF_LOG_STDERR, LOG_ERR);
	if (missing)
		return etcd_lab_skip(missing);
	if (etcd_lab_start(&elab, 3, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&elab);
		return 1;
	}
	{
		struct etcd_client_opts eo = {
			.endpoints = elab.urls, .n_endpoints = 3, .timeout_ms = 3000};
		struct cluster_range r = {LAB_RANGE_START, LAB_RANGE_END};
		struct cluster_blocks_opts bo = {.prefix = PREFIX,
						 .node = "checker",
						 .ranges = &r,
						 .n_ranges = 1,
						 .block_size = BLOCK};

		if (etcd_client_new(&eo, &checker_etcd, err, sizeof(err)) ||
		    (bo.etcd = checker_etcd,
		     cluster_blocks_open(&bo, &checker, err, sizeof(err)))) {
			fprintf(stderr, "FAIL: checker: %s\n", err);
			etcd_lab_stop(&elab);
			return 1;
		}
	}
	/* the baseline: per-node pools (no pool.cluster) with one config collide */
	for (int i = 0; i < N_NODES; i++) {
		snprintf(nodes[i].name, sizeof(nodes[i].name), "node-%d", i);
		if (lab_init(&nodes[i].l, argv[1], N_VFS, "file", argv[2], NULL) ||
		    node_start(&nodes[i])) {
			lab_result(false, "%s starts without cluster mode", nodes[i].name);
			log_tail(&nodes[i].l);
			goto out;
		}
	}
	round_prepares(-1, false);
	check_round(-1, false, "baseline", true);
	for (int i = 0; i < N_NODES; i++) {
		lab_stop(&nodes[i].l, SIGTERM);
		lab_fini(&nodes[i].l);
		memset(&nodes[i], 0, sizeof(nodes[i]));
	}
	st = (struct stats){0};

	for (int i = 0; i < N_NODES; i++) {
		struct node *n = &nodes[i];

		snprintf(n->name, sizeof(n->name), "node-%d", i);
		if (lab_init(&n->l, argv[1], N_VFS, "file", argv[2], NULL)) {
			fprintf(stderr, "FAIL: lab_init\n");
			return 1;
		}
		for (int m = 0; m < 3; m++) {
			if (proxy_start(&n->px[m], elab.m[m].client_port, &n->cut, &n->slow,
					&n->holding)) {
				fprintf(stderr, "FAIL: proxy\n");
				return 1;
			}
			snprintf(n->url[m], sizeof(n->url[m]), "http://127.0.0.1:%d",
				 n->px[m].port);
		}
		if (write_cfg(n) || node_start(n)) {
			lab_result(false, "%s starts in cluster mode", n->name);
			log_tail(&n->l);
			started = false;
		}
	}
	if (!started)
		goto out;
	lab_result(true,
		   "%d ibvfd nodes started with one pool.cluster config (node name from "
		   "NODE_NAME), block_size %d",
		   N_NODES, BLOCK);

	for (int r = 0; r < rounds; r++) {
		int fault = r % 7, victim = rand() % N_NODES, leader;
		bool etcd_ok = true, nr_ok = false;
		const char *what = "no fault";
		char buf[96];

		/* the fault between the previous round and this one */
		switch (fault) {
		case 1:
			leader = etcd_lab_leader(&elab);
			etcd_lab_member_stop(&elab, running_other(leader), true);
			what = "a follower killed";
			break;
		case 2:
			leader = etcd_lab_leader(&elab);
			etcd_lab_member_stop(&elab, leader < 0 ? 0 : leader, true);
			snprintf(buf, sizeof(buf), "the leader (member %d) killed", leader);
			what = buf;
			break;
		case 3:
			etcd_lab_member_stop(&elab, 0, false);
			etcd_lab_member_stop(&elab, 1, false);
			what = "quorum lost (two members stopped)";
			etcd_ok = false;
			nr_ok = true;
			break;
		case 4:
			for (int m = 0; m < 3; m++)
				etcd_lab_member_stop(&elab, m, true);
			what = "all members down";
			etcd_ok = false;
			nr_ok = true;
			break;
		case 5: {
			bool hit = kill_during_claim(victim, r);
			int in_file, in_etcd;

			st.claims_killed += hit;
			snprintf(buf, sizeof(buf), "%s SIGKILLed %s a block claim, restarted",
				 nodes[victim].name, hit ? "during" : "(not caught in)");
			what = buf;
			/* the txn was held: etcd may own a block for it that its store lacks */
			usleep(HOLD_MS * 1000 + 100000);
			in_file = file_count(victim);
			in_etcd = etcd_count(victim);
			if (node_start(&nodes[victim])) {
				lab_result(false, "%s restarts after SIGKILL", nodes[victim].name);
				log_tail(&nodes[victim].l);
				goto out;
			}
			if (in_etcd > in_file) {
				int fc = -1, ec = -1;

				/*
				 * Adopted: every block etcd gives the node is in its file. The
				 * node may return an idle block meanwhile (high_watermark): it
				 * leaves the file first, then etcd, so poll past that window;
				 * a block never adopted is never returned (not in the pool).
				 */
				for (int t = 0; t < 60; t++) {
					fc = file_count(victim);
					ec = etcd_count(victim);
					if (fc >= 0 && ec >= 0 && fc >= ec)
						break;
					usleep(50000);
				}
				st.unlisted += in_etcd - in_file;
				lab_result(
					fc >= 0 && ec >= 0 && fc >= ec,
					"%s: %d block(s) claimed in etcd but not recorded at the "
					"kill; its restart adopts them (%d recorded, %d in etcd now)",
					nodes[victim].name, in_etcd - in_file, fc, ec);
			}
			/* the CNI plugin's DEL of the ADDs the kill cut short */
			for (int v = 0; v < N_VFS; v++)
				if (nodes[victim].cid[v][0] && nodes[victim].uncommitted[v]) {
					lab_release_at(&nodes[victim].l, nodes[victim].cid[v], v,
						       nodes[victim].guid[v], NULL);
					nodes[victim].cid[v][0] = 0;
					nodes[victim].guid[v] = 0;
					nodes[victim].uncommitted[v] = false;
				}
			break;
		}
		case 6:
			cut_node = victim;
			atomic_store(&nodes[victim].cut, true);
			snprintf(buf, sizeof(buf), "%s cut off from etcd, its Pods attached",
				 nodes[victim].name);
			what = buf;
			nr_ok = true;
			break;
		default:
			break;
		}
		round_prepares(r, nr_ok);
		check_round(r, etcd_ok, what, false);
		if (cut_node >= 0) {
			/* a second round with the node still cut off, then it is back */
			round_releases(r);
			round_prepares(r + 100, true);
			check_round(r, true, "the node still cut off, the others claiming", false);
			atomic_store(&nodes[cut_node].cut, false);
			cut_node = -1;
		}
		round_releases(r);
		if (fault >= 1 && fault <= 4)
			etcd_restore();
	}
	/* all restored: every node serves every VF again */
	{
		int before = st.errors;

		round_releases(0);
		round_releases(1);
		round_prepares(rounds, false);
		check_round(rounds, true, "everything restored", false);
		lab_result(st.errors == before, "after the campaign every node prepares on all its "
						"VFs");
	}
	/* (a kill never caught in a claim would leave that fault untested: a failure) */
	lab_result(st.dups == 0 && st.outside == 0 && st.lost == 0 && st.errors == 0 &&
			   st.claims_killed > 0,
		   "campaign: %d rounds, %d prepares, %d not ready while etcd or the node's link "
		   "was down (longest wait %" PRId64
		   " ms), %d other errors, %d GUIDs on two nodes, "
		   "%d outside their node's blocks, %d lost attachments, %d of %d kills during a "
		   "claim in flight (%d blocks claimed, not recorded, adopted), %.1f s",
		   st.rounds, st.prepares, st.not_ready, st.worst_wait_ms, st.errors, st.dups,
		   st.outside, st.lost, st.claims_killed, (rounds + 1) / 7, st.unlisted,
		   (double)(ibvf_mono_ms() - t_start) / 1000.0);
out:
	for (int i = 0; i < N_NODES; i++) {
		lab_stop(&nodes[i].l, SIGTERM);
		for (int m = 0; m < 3; m++)
			if (nodes[i].px[m].th)
				proxy_stop(&nodes[i].px[m]);
		if (nodes[i].l.dir[0])
			lab_fini(&nodes[i].l);
	}
	cluster_blocks_free(checker);
	etcd_client_free(checker_etcd);
	etcd_lab_stop(&elab);
	printf("1..%d\n", lab_n_ok + lab_n_fail);
	return lab_n_fail ? 1 : 0;
}
