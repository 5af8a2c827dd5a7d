// SPDX-License-Identifier: MIT
/*
 * The `cluster` SM backend (sm-backends/cluster/) and the SM agent's core
 * (daemon/smd/smd_agent.c) against a real 3-member etcd cluster on loopback,
 * with the noop backend (behind a lock, as the ABI's one-thread rule wants:
 * the test reads it while the agent runs) as the agent's SM:
 *   - without a live agent a node's add times out (transient -ETIMEDOUT) and
 *     validate() says no agent is live;
 *   - two nodes' adds in shared and separate PKeys return once applied, and
 *     the SM then holds every one of them;
 *   - a GUID another node desires is refused (-EEXIST naming that node);
 *     a node's remove of another node's GUID leaves it alone;
 *   - remove: the SM drops the GUID before the call returns, the tombstone
 *     is swept, a second remove returns at once;
 *   - reconciliation: a lost membership is pushed again, a pool GUID nobody
 *     desires is removed, a GUID outside the pool ranges is left (reported);
 *   - election: two agents of one group, one leader calls the SM; the
 *     leader goes (lease revoked) and the standby leads and applies;
 *   - semantics (issue 19 follow-up): the owner of add_members_owned() in
 *     etcd and `ibvfctl cluster members --json` (a hostile one cut and
 *     cleaned); a node's list reads only its view (bynode/), its add only
 *     its GUIDs' keys; keys of the old layout honoured (view rebuilt once,
 *     marker); an SM's permanent refusal fails the node's add within a pass
 *     (passes counted) naming the PKey and the SM's message, a member fault
 *     only its member, a transient SM error stays a transient timeout;
 *   - reclaim-node (rule 2): a reclaimed node's desires and view go, its
 *     block waits for the agents to apply the removals, and a GUID of it
 *     given to a new tenant is in the new owner's PKey only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "guid_blocks.h"
#include "log.h"
#include "sm_cluster.h"
#include "sm_members.h"
#include "smd_agent.h"

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

static struct etcd_lab lab;
static const struct cluster_range pool[] = {{0x1000, 0x1fff}};
static const char *ibvfctl;
static char ctl_out[65536];

static const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

/* Run ibvfctl --config CONFIG ARGS...; stdout into out (stderr is the test's). */
static int ctl(const char *config, const char *const *args)
{
	const char *argv[16] = {ibvfctl, "--config", config};
	int po[2], st, n = 3;
	size_t lo = 0;
	ssize_t r;
	pid_t pid;

	for (const char *const *a = args; *a && n < 15; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	if (pipe(po))
		return -1;
	pid = fork();
	if (!pid) {
		dup2(po[1], 1);
		close(po[0]);
		execv(ibvfctl, (char *const *)argv);
		_exit(127);
	}
	close(po[1]);
	while ((r = read(po[0], ctl_out + lo, sizeof(ctl_out) - 1 - lo)) > 0)
		lo += (size_t)r;
	ctl_out[lo] = '\0';
	close(po[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* An ibvfctl config for the etcd prefix @prefix ("/a/") into @config. */
static void ctl_config(const char *prefix, char *config, size_t len)
{
	char text[2048], name[64];

	snprintf(text, sizeof(text),
		 "{\"state_dir\": \"%s\", \"run_dir\": \"%s\", \"pool\": {\"ranges\": "
		 "[{\"start\": \"00:00:00:00:00:00:10:00\", \"end\": "
		 "\"00:00:00:00:00:00:1f:ff\"}], \"cluster\": {\"endpoints\": [\"%s\"], "
		 "\"prefix\": \"%s\", \"node\": \"ctl\", \"block_size\": 256}}}",
		 lab.dir, lab.dir, lab.urls[0], prefix);
	snprintf(name, sizeof(name), "ctl%c.json", prefix[1]);
	etcd_lab_write_file(&lab, name, text, 0644, config, len);
}

/* ibvfctl cluster members / status against prefix /a/ while agent sm1 runs. */
static void test_ctl(void)
{
	char config[PATH_MAX];
	json_t *j, *row = NULL;
	size_t i;
	int rc;

	ctl_config("/a/", config, sizeof(config));
	rc = ctl(config, (const char *[]){"--json", "cluster", "members", "--pkey", "0x10", NULL});
	j = json_loads(ctl_out, 0, NULL);
	json_array_foreach(j, i, row)
	{
		if (!strcmp(jstr(row, "guid"), "00:00:00:00:00:00:18:01"))
			break;
		row = NULL;
	}
	CHECK(rc == 0 && json_array_size(j) == 3 && row &&
		      !strcmp(json_string_value(json_object_get(row, "node")), "n2") &&
		      !strcmp(json_string_value(json_object_get(row, "state")), "applied") &&
		      !strcmp(json_string_value(json_object_get(row, "pkey")), "0x0010"),
	      "ibvfctl cluster members --pkey 0x10: 3 rows, 0x1801 of n2 applied (rc %d) %.300s",
	      rc, ctl_out);
	json_decref(j);
	rc = ctl(config, (const char *[]){"--json", "cluster", "status", NULL});
	j = json_loads(ctl_out, 0, NULL);
	CHECK(rc == 0 && j && strstr(jstr(j, "sm_agents"), "sm1(sm1 noop") &&
		      json_integer_value(json_object_get(j, "sm_applied")) > 0,
	      "ibvfctl cluster status: the live agent sm1 and its applied revision (rc %d) %.300s",
	      rc, ctl_out);
	json_decref(j);
}

/* ---------------------------------------- the agent's SM: noop, locked -- */

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void); /* sm_noop.c, linked in */

static const struct ibvf_sm_ops *noop;
static pthread_mutex_t sm_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int sm_adds; /* add_members calls */

static int l_init(const char *j, struct ibvf_sm_backend **out, char *err, size_t errlen)
{
	return noop->init(j, out, err, errlen);
}

static void l_fini(struct ibvf_sm_backend *b)
{
	noop->fini(b);
}

static int l_validate(struct ibvf_sm_backend *b, char *d, size_t dl, char *err, size_t errlen)
{
	pthread_mutex_lock(&sm_lock);
	int ret = noop->validate(b, d, dl, err, errlen);
	pthread_mutex_unlock(&sm_lock);
	return ret;
}

/* Refusals the SM makes up: adds to refuse_pkey (of refuse_guid, 0: any) fail with refuse_errno. */
static atomic_int refuse_pkey, refuse_errno;
static _Atomic uint64_t refuse_guid;
#define REFUSE_MSG "UFM HTTP 400: partition not allowed for this tenant"

static int l_add(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m, size_t n,
		 const struct ibvf_sm_pkey_flags *f, char *err, size_t errlen)
{
	if (atomic_load(&refuse_pkey) && pkey == atomic_load(&refuse_pkey)) {
		uint64_t g = atomic_load(&refuse_guid);
		bool hit = !g;

		for (size_t i = 0; i < n && !hit; i++)
			hit = m[i].guid == g;
		if (hit) {
			atomic_fetch_add(&sm_adds, 1);
			return ibvf_errf(err, errlen, atomic_load(&refuse_errno),
					 "%s (PKey 0x%04x)", REFUSE_MSG, pkey);
		}
	}
	pthread_mutex_lock(&sm_lock);
	int ret = noop->add_members(b, pkey, m, n, f, err, errlen);
	pthread_mutex_unlock(&sm_lock);
	atomic_fetch_add(&sm_adds, 1);
	return ret;
}

static int l_remove(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *g, size_t n,
		    char *err, size_t errlen)
{
	pthread_mutex_lock(&sm_lock);
	int ret = noop->remove_members(b, pkey, g, n, err, errlen);
	pthread_mutex_unlock(&sm_lock);
	return ret;
}

/* Membership (pkey, guid) in the SM: 0 absent, 1 full, 2 limited. */
struct find {
	uint16_t pkey;
	uint64_t guid;
	int found;
};

static int find_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct find *f = arg;

	(void)managed;
	if (pkey == f->pkey && m->guid == f->guid)
		f->found = m->membership == IBVF_MEMBER_FULL ? 1 : 2;
	return 0;
}

static int l_list(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg, char *err,
		  size_t errlen)
{
	pthread_mutex_lock(&sm_lock);
	int ret = noop->list_members(b, pkey, cb, arg, err, errlen);
	pthread_mutex_unlock(&sm_lock);
	return ret;
}

static const struct ibvf_sm_ops locked_ops = {
	.abi_version = IBVF_SM_ABI_VERSION,
	.struct_size = sizeof(struct ibvf_sm_ops),
	.name = "noop",
	.init = l_init,
	.fini = l_fini,
	.validate = l_validate,
	.add_members = l_add,
	.remove_members = l_remove,
	.list_members = l_list,
};

static int in_sm(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid)
{
	struct find f = {pkey, guid, 0};
	char err[IBVF_ERR_LEN];

	l_list(b, -1, find_cb, &f, err, sizeof(err));
	return f.found;
}

/* ------------------------------------------------------ agent threads -- */

struct agent {
	struct etcd_client *etcd, *etcd_ka;
	struct smd_agent *a;
	pthread_t th;
	atomic_bool stop;
	atomic_int errors;
	char last_err[IBVF_ERR_LEN];
};

static void *agent_main(void *arg)
{
	struct agent *g = arg;

	while (!atomic_load(&g->stop)) {
		char err[IBVF_ERR_LEN] = "";

		if (smd_agent_step(g->a, 100, err, sizeof(err))) {
			atomic_fetch_add(&g->errors, 1);
			snprintf(g->last_err, sizeof(g->last_err), "%s", err);
			usleep(50000);
		}
	}
	return NULL;
}

static struct etcd_client *client(void)
{
	struct etcd_client_opts eo = {.endpoints = lab.urls, .n_endpoints = 3, .timeout_ms = 8000};
	struct etcd_client *c = NULL;
	char err[IBVF_ERR_LEN];

	if (etcd_client_new(&eo, &c, err, sizeof(err)))
		fprintf(stderr, "etcd client: %s\n", err);
	return c;
}

static int agent_start(struct agent *g, const char *prefix, const char *id, const char *group,
		       bool election, struct ibvf_sm_backend *b)
{
	struct smd_agent_opts o = {.prefix = prefix,
				   .id = id,
				   .group = group,
				   .election = election,
				   .lease_ttl_s = 2,
				   .reconcile_s = 1,
				   .batch_max = 4096,
				   .ranges = pool,
				   .n_ranges = 1,
				   .ops = &locked_ops,
				   .b = b};
	char err[IBVF_ERR_LEN];
	int ret;

	memset(g, 0, sizeof(*g));
	g->etcd = client();
	g->etcd_ka = client();
	o.etcd = g->etcd;
	o.etcd_ka = g->etcd_ka;
	ret = smd_agent_new(&o, &g->a, err, sizeof(err));
	if (!ret)
		ret = smd_agent_start(g->a, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "agent %s: %s\n", id, err);
		return ret;
	}
	return pthread_create(&g->th, NULL, agent_main, g);
}

static void agent_stop(struct agent *g)
{
	atomic_store(&g->stop, true);
	pthread_join(g->th, NULL);
	smd_agent_free(g->a);
	etcd_client_free(g->etcd);
	etcd_client_free(g->etcd_ka);
	g->a = NULL;
}

/* --------------------------------------------------------- the nodes -- */

static struct ibvf_sm_backend *node_open(const char *prefix, const char *node, int apply_ms)
{
	char cfg[1024], err[IBVF_ERR_LEN];
	struct ibvf_sm_backend *b = NULL;

	snprintf(cfg, sizeof(cfg),
		 "{\"endpoints\":[\"%s\",\"%s\",\"%s\"],\"prefix\":\"%s\",\"node\":\"%s\","
		 "\"apply_timeout_ms\":%d,\"etcd_timeout_ms\":8000}",
		 lab.urls[0], lab.urls[1], lab.urls[2], prefix, node, apply_ms);
	if (cluster_ops.init(cfg, &b, err, sizeof(err)))
		fprintf(stderr, "cluster backend %s: %s\n", node, err);
	return b;
}

static int add1(struct ibvf_sm_backend *n, uint16_t pkey, uint64_t guid, char *err, size_t len)
{
	struct ibvf_sm_member m = {guid, IBVF_MEMBER_FULL};

	return cluster_ops.add_members(n, pkey, &m, 1, NULL, err, len);
}

static bool key_exists(struct etcd_client *c, const char *prefix, uint16_t pkey, uint64_t guid)
{
	struct etcd_range_result r = {0};
	char key[256], err[IBVF_ERR_LEN];
	bool yes;

	cluster_member_key(prefix, pkey, guid, false, key, sizeof(key));
	if (etcd_range(c, key, 0, NULL, 0, 0, true, &r, err, sizeof(err)))
		return true;
	yes = r.n_kvs > 0;
	etcd_range_result_free(&r);
	return yes;
}

static bool wait_for(bool (*pred)(void *), void *arg, int ms)
{
	for (int64_t end = ibvf_mono_ms() + ms; ibvf_mono_ms() < end; usleep(20000))
		if (pred(arg))
			return true;
	return pred(arg);
}

struct smq {
	struct ibvf_sm_backend *b;
	uint16_t pkey;
	uint64_t guid;
	int want;
	struct etcd_client *c;
};

static bool sm_is(void *arg)
{
	struct smq *q = arg;

	return in_sm(q->b, q->pkey, q->guid) == q->want;
}

static bool key_gone(void *arg)
{
	struct smq *q = arg;

	return !key_exists(q->c, "/a/", q->pkey, q->guid);
}

static void test_membership(void)
{
	struct ibvf_sm_backend *sm = NULL, *n1 = node_open("/a/", "n1", 800),
			       *n2 = node_open("/a/", "n2", 8000);
	struct etcd_client *c = client();
	char err[IBVF_ERR_LEN] = "", desc[256] = "";
	struct agent ag;
	int64_t t0;
	int ret;

	CHECK(n1 && n2 && c, "two node backends (n1, n2) on the same etcd prefix");
	if (!n1 || !n2 || !c)
		return;
	ret = cluster_ops.validate(n1, desc, sizeof(desc), err, sizeof(err));
	CHECK(ret == -EHOSTUNREACH && strstr(err, "no SM agent"),
	      "validate without a live agent: -EHOSTUNREACH, 'no SM agent' (%d: %s)", ret, err);
	t0 = ibvf_mono_ms();
	ret = add1(n1, 0x10, 0x1001, err, sizeof(err));
	CHECK(ret == -ETIMEDOUT && ibvf_sm_err_is_transient(ret) && ibvf_mono_ms() - t0 >= 700,
	      "add without an agent: transient -ETIMEDOUT after apply_timeout_ms (%d, %lld ms: %s)",
	      ret, (long long)(ibvf_mono_ms() - t0), err);
	noop->init("{}", &sm, err, sizeof(err));
	CHECK(agent_start(&ag, "/a/", "sm1", "sm1", false, sm) == 0, "agent sm1 started");
	ret = cluster_ops.validate(n1, desc, sizeof(desc), err, sizeof(err));
	CHECK(ret == 0 && strstr(desc, "sm1(sm1)"), "validate names the live agent: %s", desc);
	/* the first add's key was written before the agent: its pass applies it */
	ret = add1(n1, 0x10, 0x1001, err, sizeof(err));
	CHECK(ret == 0 && in_sm(sm, 0x10, 0x1001) == 1,
	      "n1 add 0x1001 to 0x10 (written earlier, timed out) returns once applied: in the SM "
	      "(%d %s)",
	      ret, err);
	{
		struct ibvf_sm_member m[2] = {{0x1002, IBVF_MEMBER_FULL},
					      {0x1003, IBVF_MEMBER_LIMITED}};

		ret = cluster_ops.add_members(n1, 0x10, m, 2, NULL, err, sizeof(err));
	}
	CHECK(ret == 0 && in_sm(sm, 0x10, 0x1002) == 1 && in_sm(sm, 0x10, 0x1003) == 2,
	      "n1 adds two GUIDs (full, limited) to 0x10: both in the SM when the call returns (%d "
	      "%s)",
	      ret, err);
	ret = add1(n2, 0x10, 0x1801, err, sizeof(err));
	CHECK(ret == 0 && in_sm(sm, 0x10, 0x1801) == 1,
	      "n2 adds 0x1801 to the shared PKey 0x10: in the SM (%d %s)", ret, err);
	ret = add1(n2, 0x20, 0x1802, err, sizeof(err));
	CHECK(ret == 0 && in_sm(sm, 0x20, 0x1802) == 1 && !in_sm(sm, 0x10, 0x1802),
	      "n2 adds 0x1802 to its own PKey 0x20: there only (%d %s)", ret, err);
	ret = add1(n2, 0x10, 0x1001, err, sizeof(err));
	CHECK(ret == -EEXIST && strstr(err, "node n1"),
	      "n2 adding n1's GUID 0x1001: -EEXIST naming n1 (%d %s)", ret, err);
	ret = add1(n1, 0x10, 0x1001, err, sizeof(err));
	CHECK(ret == 0, "n1 adding 0x1001 again (idempotent): 0 (%d %s)", ret, err);
	{
		uint64_t g = 0x1001;

		ret = cluster_ops.remove_members(n2, 0x10, &g, 1, err, sizeof(err));
		CHECK(ret == 0 && in_sm(sm, 0x10, 0x1001) == 1 && key_exists(c, "/a/", 0x10, g),
		      "n2 removing n1's GUID: 0 and untouched (%d %s)", ret, err);
		ret = cluster_ops.remove_members(n1, 0x10, &g, 1, err, sizeof(err));
		CHECK(ret == 0 && !in_sm(sm, 0x10, 0x1001),
		      "n1 removes 0x1001: gone from the SM when the call returns (%d %s)", ret,
		      err);
		struct smq q = {.pkey = 0x10, .guid = g, .c = c};

		CHECK(wait_for(key_gone, &q, 5000), "its tombstone is swept from etcd");
		t0 = ibvf_mono_ms();
		ret = cluster_ops.remove_members(n1, 0x10, &g, 1, err, sizeof(err));
		CHECK(ret == 0 && ibvf_mono_ms() - t0 < 500,
		      "a second remove returns at once (%d, %lld ms)", ret,
		      (long long)(ibvf_mono_ms() - t0));
	}
	{
		struct counter {
			int n;
		};
		struct cluster_member *v = NULL;
		size_t n = 0;

		cluster_members_list(c, "/a/", -1, "n2", &v, &n, NULL, NULL, err, sizeof(err));
		CHECK(n == 2 && !strcmp(v[0].node, "n2"),
		      "cluster_members_list(node n2): its 2 memberships (%zu)", n);
		free(v);
	}
	/* reconciliation: the SM changed behind the agent's back */
	{
		struct ibvf_sm_member lost = {0x1002, IBVF_MEMBER_FULL};
		struct ibvf_sm_member extra[2] = {{0x1fff, IBVF_MEMBER_FULL},
						  {0x9000, IBVF_MEMBER_FULL}};
		uint64_t g = lost.guid;
		struct smq q1 = {sm, 0x10, 0x1002, 1, c}, q2 = {sm, 0x10, 0x1fff, 0, c};

		l_remove(sm, 0x10, &g, 1, err, sizeof(err));
		l_add(sm, 0x10, extra, 2, NULL, err, sizeof(err));
		CHECK(wait_for(sm_is, &q1, 5000), "a lost membership (0x1002) is pushed again");
		CHECK(wait_for(sm_is, &q2, 5000),
		      "a pool GUID nobody desires (0x1fff) is removed from the SM");
		CHECK(in_sm(sm, 0x10, 0x9000) == 1,
		      "a GUID outside the pool ranges (0x9000) is left (reported only)");
	}
	{
		struct cluster_sm_state s;

		cluster_sm_state_read(c, "/a/", &s, err, sizeof(err));
		bool st = false;

		for (size_t i = 0; i < s.n_status; i++)
			st |= s.status[i].pkey == 0x20 && s.status[i].desired == 1 &&
			      s.status[i].applied == 1;
		CHECK(s.n_agents == 1 && s.agents[0].applied_revision > 0 && st,
		      "smd/: one agent, an applied revision, PKey 0x20 status 1/1 (%zu agents)",
		      s.n_agents);
		cluster_sm_state_free(&s);
	}
	test_ctl();
	{
		/* a figure, not an assertion: one add's round trip through etcd and the agent */
		int64_t lat[20];
		int ok = 0;

		for (int i = 0; i < 20; i++) {
			int64_t t = ibvf_mono_ns();

			ok += add1(n1, 0x50, 0x1100 + (uint64_t)i, err, sizeof(err)) == 0;
			lat[i] = (int64_t)(ibvf_mono_ns() - (uint64_t)t);
		}
		for (int i = 1; i < 20; i++)
			for (int j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
				int64_t x = lat[j];

				lat[j] = lat[j - 1];
				lat[j - 1] = x;
			}
		CHECK(ok == 20, "20 single-GUID adds through the agent (noop SM) succeed");
		printf("# add through etcd + agent (noop SM): p50 %.1f ms, max %.1f ms\n",
		       (double)lat[10] / 1e6, (double)lat[19] / 1e6);
	}
	{
		/* the etcd leader killed: the node's write and the agent's pass ride it out */
		int l = etcd_lab_leader(&lab);

		etcd_lab_member_stop(&lab, l, true);
		t0 = ibvf_mono_ms();
		ret = add1(n2, 0x20, 0x1803, err, sizeof(err));
		CHECK(ret == 0 && in_sm(sm, 0x20, 0x1803) == 1,
		      "etcd leader (member %d) SIGKILLed: n2's add is still applied (%d, %lld ms: %s)",
		      l, ret, (long long)(ibvf_mono_ms() - t0), err);
		etcd_lab_member_start(&lab, l, err, sizeof(err));
		etcd_lab_wait_writable(&lab, 10000);
	}
	agent_stop(&ag);
	CHECK(atomic_load(&ag.errors) <= 2,
	      "the agent's passes failed at most twice (the etcd election) (%d: %s)",
	      atomic_load(&ag.errors), ag.last_err);
	cluster_ops.fini(n1);
	cluster_ops.fini(n2);
	noop->fini(sm);
	etcd_client_free(c);
}

/* ------------------------------------------- semantics (prefix /s/) -- */

static bool index_exists(struct etcd_client *c, const char *node, uint16_t pkey, uint64_t guid)
{
	struct etcd_range_result r = {0};
	char key[256], err[IBVF_ERR_LEN];
	bool yes;

	cluster_member_index_key("/s/", node, pkey, guid, false, key, sizeof(key));
	if (etcd_range(c, key, 0, NULL, 0, 0, true, &r, err, sizeof(err)))
		return false;
	yes = r.n_kvs > 0;
	etcd_range_result_free(&r);
	return yes;
}

/* The row of @guid ("00:..:12:01") in ibvfctl's --json output, or NULL (borrowed from @j). */
static json_t *ctl_row(json_t *j, const char *guid)
{
	size_t i;
	json_t *row;

	json_array_foreach(j, i, row) if (!strcmp(jstr(row, "guid"), guid)) return row;
	return NULL;
}

struct lister {
	uint64_t guids[64];
	size_t n;
};

static int lister_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct lister *l = arg;

	(void)pkey;
	(void)managed;
	if (l->n < 64)
		l->guids[l->n++] = m->guid;
	return 0;
}

/* Keys and key+value bytes under P members/ (what the old list read). */
static size_t members_bytes(struct etcd_client *c, const char *prefix, size_t *keys)
{
	struct etcd_range_result r = {0};
	char key[256], end[256], err[IBVF_ERR_LEN];
	int kl = cluster_member_key(prefix, -1, 0, false, key, sizeof(key));
	int el = etcd_prefix_end(key, (size_t)kl, end, sizeof(end));
	size_t b = 0;

	*keys = 0;
	if (etcd_range(c, key, (size_t)kl, end, (size_t)el, 0, false, &r, err, sizeof(err)))
		return 0;
	for (size_t i = 0; i < r.n_kvs; i++)
		b += r.kvs[i].key_len + r.kvs[i].value_len;
	*keys = r.n_kvs;
	etcd_range_result_free(&r);
	return b;
}

static unsigned long long agent_passes(struct agent *g)
{
	struct smd_agent_stats st;

	smd_agent_get_stats(g->a, &st);
	return st.passes;
}

/* The owner in etcd and ibvfctl; a node's view; old-layout keys; refusals to the node. */
static void test_semantics(void)
{
	struct ibvf_sm_backend *sm = NULL, *s1 = node_open("/s/", "s1", 10000),
			       *s2 = node_open("/s/", "s2", 10000),
			       *s3 = node_open("/s/", "s3", 800), *old1 = NULL;
	struct etcd_client *c = client();
	char err[IBVF_ERR_LEN] = "", config[PATH_MAX], hostile[600];
	struct sm_cluster_stats st0, st1;
	struct agent ag;
	int ret;

	CHECK(s1 && s2 && s3 && c, "nodes s1, s2, s3 on prefix /s/");
	if (!s1 || !s2 || !s3 || !c)
		return;
	noop->init("{}", &sm, err, sizeof(err));
	CHECK(agent_start(&ag, "/s/", "sms", "sms", false, sm) == 0, "agent sms started");
	ctl_config("/s/", config, sizeof(config));

	/* 1. the owner: through add_members_owned() into etcd and ibvfctl */
	{
		struct ibvf_sm_member m[2] = {{0x1201, IBVF_MEMBER_FULL},
					      {0x1202, IBVF_MEMBER_LIMITED}};
		const char *owners[2] = {"ns1/pod-a net1 (ibnet)", hostile};
		struct cluster_member *v = NULL;
		size_t n = 0;
		json_t *j, *r1, *r2;
		int rc;

		/* CNI input: quotes, a newline, JSON and key syntax, non-ASCII, too long */
		snprintf(hostile, sizeof(hostile),
			 "ns2/p\"},\n\"node\":\"evil\"/../members/\xff%0300d", 7);
		ret = cluster_ops.add_members_owned(s1, 0x40, m, owners, 2, NULL, err, sizeof(err));
		cluster_members_list(c, "/s/", 0x40, NULL, &v, &n, NULL, NULL, err, sizeof(err));
		CHECK(ret == 0 && n == 2 && !strcmp(v[0].owner, "ns1/pod-a net1 (ibnet)") &&
			      !strcmp(v[0].node, "s1") && !strcmp(v[1].node, "s1") &&
			      strlen(v[1].owner) == IBVF_SM_OWNER_MAX &&
			      !strncmp(v[1].owner, "ns2/p\"},?\"node\":\"evil\"/../members/", 34),
		      "add_members_owned: both owners in etcd, the hostile one cut to %d "
		      "printable bytes, node and keys intact (%d: %s; %zu keys)",
		      IBVF_SM_OWNER_MAX, ret, err, n);
		free(v);
		rc = ctl(config,
			 (const char *[]){"--json", "cluster", "members", "--pkey", "0x40", NULL});
		j = json_loads(ctl_out, 0, NULL);
		r1 = ctl_row(j, "00:00:00:00:00:00:12:01");
		r2 = ctl_row(j, "00:00:00:00:00:00:12:02");
		CHECK(rc == 0 && r1 && r2 && !strcmp(jstr(r1, "owner"), "ns1/pod-a net1 (ibnet)") &&
			      !strcmp(jstr(r1, "node"), "s1") &&
			      !strcmp(jstr(r1, "state"), "applied") &&
			      !strncmp(jstr(r2, "owner"), "ns2/p\"},?\"node\"", 15),
		      "ibvfctl cluster members --json: the owners round trip (rc %d) %.300s", rc,
		      ctl_out);
		json_decref(j);
		/* an add without an owner (reconciliation's re-push) keeps the recorded one */
		ret = add1(s1, 0x40, 0x1201, err, sizeof(err));
		cluster_members_list(c, "/s/", 0x40, "s1", &v, &n, NULL, NULL, err, sizeof(err));
		CHECK(ret == 0 && n == 2 && !strcmp(v[0].owner, "ns1/pod-a net1 (ibnet)"),
		      "an add without an owner keeps the recorded owner (%d)", ret);
		free(v);
	}

	/* 2. a node's list reads only its own view */
	{
		struct lister l = {0};
		size_t keys = 0, bytes;

		for (uint64_t g = 0x1a00; g < 0x1a10; g++)
			add1(s2, 0x41, g, err, sizeof(err));
		ret = add1(s2, 0x40, 0x1a20, err, sizeof(err));
		bytes = members_bytes(c, "/s/", &keys);
		sm_cluster_get_stats(s1, &st0);
		ret |= cluster_ops.list_members(s1, -1, lister_cb, &l, err, sizeof(err));
		sm_cluster_get_stats(s1, &st1);
		CHECK(ret == 0 && l.n == 2 && l.guids[0] == 0x1201 && l.guids[1] == 0x1202 &&
			      st1.list_keys - st0.list_keys == 2 && keys >= 19,
		      "s1's list: its 2 memberships, 2 keys read (%llu keys, %llu bytes) of the "
		      "%zu keys, %zu bytes under members/ (%d %s)",
		      st1.list_keys - st0.list_keys, st1.list_bytes - st0.list_bytes, keys, bytes,
		      ret, err);
		printf("# node list read: %llu keys %llu bytes (its view) vs %zu keys %zu bytes "
		       "(all of members/)\n",
		       st1.list_keys - st0.list_keys, st1.list_bytes - st0.list_bytes, keys, bytes);
		sm_cluster_get_stats(s1, &st0);
		ret = add1(s1, 0x40, 0x1203, err, sizeof(err));
		sm_cluster_get_stats(s1, &st1);
		CHECK(ret == 0 && st1.read_keys - st0.read_keys <= 1,
		      "s1's add to the shared PKey 0x40 (3 keys of s2 there) reads only its GUID's "
		      "key (%llu keys read)",
		      st1.read_keys - st0.read_keys);
		ret = add1(s1, 0x41, 0x1a05, err, sizeof(err));
		CHECK(ret == -EEXIST && strstr(err, "node s2"),
		      "s1 adding s2's GUID 0x1a05: still -EEXIST naming s2 (point read) (%d %s)",
		      ret, err);
	}

	/* 3. removal deletes the view key with the desire */
	{
		uint64_t g = 0x1203;

		CHECK(index_exists(c, "s1", 0x40, g), "the view key of s1's 0x1203 exists");
		ret = cluster_ops.remove_members(s1, 0x40, &g, 1, err, sizeof(err));
		CHECK(ret == 0 && !index_exists(c, "s1", 0x40, g) && !in_sm(sm, 0x40, g),
		      "remove: the view key is gone with the desire, the SM dropped it (%d %s)",
		      ret, err);
	}

	/* 4. keys of the old layout (no view key, written by the previous ibvfd) */
	{
		char key[256], val[256], mk[256];
		struct lister l = {0};
		struct etcd_range_result r = {0};
		struct ibvf_sm_backend *again;

		cluster_member_key("/s/", 0x42, 0x1301, false, key, sizeof(key));
		snprintf(val, sizeof(val),
			 "{\"index0\":false,\"ipoib\":true,\"membership\":\"full\",\"ms\":1,"
			 "\"node\":\"old1\",\"owner\":\"\"}");
		etcd_put(c, key, 0, val, 0, 0, NULL, err, sizeof(err));
		cluster_member_key("/s/", 0x42, 0x1302, false, key, sizeof(key));
		etcd_put(c, key, 0, "{\"membership\":\"full\",\"node\":\"old1\",\"ms\":1}", 0, 0,
			 NULL, err, sizeof(err));
		cluster_member_key("/s/", 0x42, 0x1303, false, key, sizeof(key));
		etcd_put(c, key, 0, "{\"removed\":true,\"node\":\"old1\",\"ms\":1}", 0, 0, NULL,
			 err, sizeof(err));
		old1 = node_open("/s/", "old1", 10000);
		ret = old1 ? cluster_ops.list_members(old1, -1, lister_cb, &l, err, sizeof(err))
			   : -1;
		sm_cluster_get_stats(old1, &st1);
		cluster_member_marker_key("/s/", "old1", mk, sizeof(mk));
		etcd_range(c, mk, 0, NULL, 0, 0, true, &r, err, sizeof(err));
		CHECK(ret == 0 && l.n == 2 && l.guids[0] == 0x1301 && l.guids[1] == 0x1302 &&
			      st1.view_migrated == 2 && r.n_kvs == 1 &&
			      index_exists(c, "old1", 0x42, 0x1301) &&
			      !index_exists(c, "old1", 0x42, 0x1303),
		      "old-layout keys: the node's first list rebuilds its view (2 keys put, the "
		      "tombstone left out) and marks it (%d %s; %zu listed, %llu migrated)",
		      ret, err, l.n, st1.view_migrated);
		etcd_range_result_free(&r);
		again = node_open("/s/", "old1", 10000);
		memset(&l, 0, sizeof(l));
		ret = cluster_ops.list_members(again, -1, lister_cb, &l, err, sizeof(err));
		sm_cluster_get_stats(again, &st1);
		CHECK(ret == 0 && l.n == 2 && st1.view_migrated == 0 && st1.list_keys == 2,
		      "a restarted node with the marker: no rebuild, 2 keys read (%d, %llu, %llu)",
		      ret, st1.view_migrated, st1.list_keys);
		ret = add1(again, 0x42, 0x1301, err, sizeof(err));
		CHECK(ret == 0 && in_sm(sm, 0x42, 0x1301) == 1,
		      "an old-layout desire is applied by the agent and its add returns (%d %s)",
		      ret, err);
		{
			uint64_t g = 0x1302;

			ret = cluster_ops.remove_members(again, 0x42, &g, 1, err, sizeof(err));
			CHECK(ret == 0 && !in_sm(sm, 0x42, g) && !index_exists(c, "old1", 0x42, g),
			      "an old-layout desire is removed (view key and SM) (%d %s)", ret,
			      err);
		}
		cluster_ops.fini(again);
	}

	/* 5. a permanent refusal of a PKey reaches the node's add within a pass */
	{
		unsigned long long p0, p1;
		int64_t t0 = ibvf_mono_ms();
		json_t *j, *row;
		int rc;

		atomic_store(&refuse_errno, -EPROTO);
		atomic_store(&refuse_guid, 0);
		atomic_store(&refuse_pkey, 0x60);
		p0 = agent_passes(&ag);
		ret = add1(s1, 0x60, 0x1401, err, sizeof(err));
		p1 = agent_passes(&ag);
		CHECK(ret == -EPROTO && !ibvf_sm_err_is_transient(ret) && strstr(err, "0x0060") &&
			      strstr(err, REFUSE_MSG) && strstr(err, "0x0000000000001401") &&
			      p1 - p0 <= 2,
		      "PKey 0x60 refused by the SM (-EPROTO): the node's add fails permanently "
		      "after %llu agent pass(es), naming the PKey and the SM's message (%d, %lld ms: "
		      "%s)",
		      p1 - p0, ret, (long long)(ibvf_mono_ms() - t0), err);
		p0 = agent_passes(&ag);
		ret = add1(s1, 0x60, 0x1401, err, sizeof(err));
		p1 = agent_passes(&ag);
		CHECK(ret == -EPROTO && p1 - p0 <= 1,
		      "the same add again fails at once from the status (%d after %llu passes)",
		      ret, p1 - p0);
		rc = ctl(config,
			 (const char *[]){"--json", "cluster", "members", "--pkey", "0x60", NULL});
		j = json_loads(ctl_out, 0, NULL);
		row = ctl_row(j, "00:00:00:00:00:00:14:01");
		CHECK(rc == 0 && row && !strcmp(jstr(row, "state"), "refused") &&
			      strstr(jstr(row, "error"), REFUSE_MSG),
		      "ibvfctl cluster members: the GUID is 'refused' with the SM's reason (rc %d) "
		      "%.300s",
		      rc, ctl_out);
		json_decref(j);
		/* the node's rollback: remove the desire */
		{
			uint64_t g = 0x1401;

			ret = cluster_ops.remove_members(s1, 0x60, &g, 1, err, sizeof(err));
			CHECK(ret == 0, "the refused desire is removed (rollback) (%d %s)", ret,
			      err);
		}
		/* one GUID of two refused (a member fault): only that one fails */
		{
			struct ibvf_sm_member m[2] = {{0x1501, IBVF_MEMBER_FULL},
						      {0x1502, IBVF_MEMBER_FULL}};

			atomic_store(&refuse_errno, -EEXIST);
			atomic_store(&refuse_guid, 0x1502);
			atomic_store(&refuse_pkey, 0x61);
			ret = cluster_ops.add_members(s1, 0x61, m, 2, NULL, err, sizeof(err));
			CHECK(ret == -EEXIST && strstr(err, "0x0000000000001502") &&
				      in_sm(sm, 0x61, 0x1501) == 1,
			      "a member fault of 0x1502 fails the call naming 0x1502; 0x1501 is "
			      "applied (%d %s)",
			      ret, err);
			ret = add1(s1, 0x61, 0x1501, err, sizeof(err));
			CHECK(ret == 0, "0x1501 alone (the batcher's split): 0 (%d %s)", ret, err);
		}
		/* a transient SM error stays transient: the node times out and retries */
		{
			struct cluster_sm_state ss;
			bool refused = false;

			atomic_store(&refuse_errno, -EAGAIN);
			atomic_store(&refuse_guid, 0);
			atomic_store(&refuse_pkey, 0x62);
			ret = add1(s3, 0x62, 0x1601, err, sizeof(err));
			cluster_sm_state_read(c, "/s/", &ss, err + 200, sizeof(err) - 200);
			for (size_t i = 0; i < ss.n_status; i++)
				refused |= ss.status[i].pkey == 0x62 && ss.status[i].n_refused;
			cluster_sm_state_free(&ss);
			CHECK(ret == -ETIMEDOUT && ibvf_sm_err_is_transient(ret) && !refused,
			      "an -EAGAIN from the SM: the node's add is transient -ETIMEDOUT, "
			      "nothing 'refused' in the status (%d %.150s)",
			      ret, err);
			atomic_store(&refuse_pkey, 0);
			ret = add1(s3, 0x62, 0x1601, err, sizeof(err));
			CHECK(ret == 0 && in_sm(sm, 0x62, 0x1601) == 1,
			      "the SM back: the retried add is applied (%d %s)", ret, err);
		}
	}
	agent_stop(&ag);
	cluster_ops.fini(s1);
	cluster_ops.fini(s2);
	cluster_ops.fini(s3);
	cluster_ops.fini(old1);
	noop->fini(sm);
	etcd_client_free(c);
}

struct lead_q {
	struct agent *g;
};

static bool leads(void *arg)
{
	struct smd_agent_stats st;

	smd_agent_get_stats(((struct lead_q *)arg)->g->a, &st);
	return st.leader;
}

static void test_election(void)
{
	struct ibvf_sm_backend *sm_a = NULL, *sm_b = NULL, *n1 = node_open("/e/", "n1", 10000);
	char err[IBVF_ERR_LEN] = "";
	struct agent A, B;
	struct smd_agent_stats sa, sb;
	struct lead_q qa = {&A}, qb = {&B};
	int64_t t0;
	int ret;

	noop->init("{}", &sm_a, err, sizeof(err));
	noop->init("{}", &sm_b, err, sizeof(err));
	CHECK(agent_start(&A, "/e/", "ufm-a", "ufm", true, sm_a) == 0, "agent ufm-a started");
	CHECK(wait_for(leads, &qa, 5000), "ufm-a leads group ufm");
	CHECK(agent_start(&B, "/e/", "ufm-b", "ufm", true, sm_b) == 0, "agent ufm-b started");
	ret = add1(n1, 0x30, 0x1100, err, sizeof(err));
	smd_agent_get_stats(B.a, &sb);
	CHECK(ret == 0 && in_sm(sm_a, 0x30, 0x1100) && !in_sm(sm_b, 0x30, 0x1100) && !sb.leader,
	      "an add is applied by the leader only; the standby calls nothing (%d %s)", ret, err);
	t0 = ibvf_mono_ms();
	agent_stop(&A); /* revokes its lease: the leader key goes at once */
	CHECK(wait_for(leads, &qb, 5000), "the standby ufm-b leads after ufm-a stops (%lld ms)",
	      (long long)(ibvf_mono_ms() - t0));
	ret = add1(n1, 0x30, 0x1101, err, sizeof(err));
	CHECK(ret == 0 && in_sm(sm_b, 0x30, 0x1101) && in_sm(sm_b, 0x30, 0x1100),
	      "ufm-b applies the next add and re-pushed the earlier one to its SM (%d %s)", ret,
	      err);
	smd_agent_get_stats(B.a, &sb);
	(void)sa;
	agent_stop(&B);
	cluster_ops.fini(n1);
	noop->fini(sm_a);
	noop->fini(sm_b);
}

/* ------------------------------------------------ reclaim-node, rule 2 -- */

static struct cluster_blocks *blocks_open(struct etcd_client *c, const char *prefix,
					  const char *node)
{
	struct cluster_blocks_opts o = {.etcd = c,
					.prefix = prefix,
					.node = node,
					.ranges = pool,
					.n_ranges = 1,
					.block_size = 256,
					.quarantine_s = 0};
	struct cluster_blocks *b = NULL;
	char err[IBVF_ERR_LEN];

	if (cluster_blocks_open(&o, &b, err, sizeof(err)))
		fprintf(stderr, "blocks %s: %s\n", node, err);
	return b;
}

/* Keys under P bynode/<node> (its view and its marker). */
static size_t view_keys(struct etcd_client *c, const char *prefix, const char *node)
{
	struct etcd_range_result r = {0};
	char key[256], end[256], err[IBVF_ERR_LEN];
	int kl = cluster_member_marker_key(prefix, node, key, sizeof(key)), el;
	size_t n;

	el = etcd_prefix_end(key, (size_t)kl, end, sizeof(end));
	if (etcd_range(c, key, (size_t)kl, end, (size_t)el, 0, true, &r, err, sizeof(err)))
		return 9999;
	n = r.n_kvs;
	etcd_range_result_free(&r);
	return n;
}

/* The desired (not removed) memberships node @node still has in members/. */
static size_t desired_of(struct etcd_client *c, const char *prefix, const char *node)
{
	struct cluster_member *v = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0, k = 0;

	if (cluster_members_list(c, prefix, -1, node, &v, &n, NULL, NULL, err, sizeof(err)))
		return 9999;
	for (size_t i = 0; i < n; i++)
		k += !v[i].removed;
	free(v);
	return k;
}

struct gone_q {
	struct ibvf_sm_backend *sm;
	uint64_t g1, g2;
};

static bool removed_from_sm(void *arg)
{
	struct gone_q *q = arg;

	return !in_sm(q->sm, 0x10, q->g1) && !in_sm(q->sm, 0x10, q->g2) &&
	       !in_sm(q->sm, 0x11, q->g2);
}

/*
 * `ibvfctl cluster reclaim-node` of a node that had memberships: its
 * members/ desires and its bynode/ view go with its blocks (the agent
 * removes them from the SM), the block is not claimable before the agents
 * applied the removals, and a GUID of it handed to a new tenant is in
 * exactly the new owner's PKey (rule 2).
 */
static void test_reclaim(void)
{
	struct ibvf_sm_backend *sm = NULL, *dead = node_open("/r/", "dead", 8000),
			       *n3 = node_open("/r/", "n3", 8000);
	struct etcd_client *c = client();
	struct cluster_blocks *bd = c ? blocks_open(c, "/r/", "dead") : NULL,
			      *b3 = c ? blocks_open(c, "/r/", "n3") : NULL;
	char err[IBVF_ERR_LEN] = "", config[PATH_MAX];
	struct cluster_block blk = {0}, got = {0};
	struct agent ag;
	bool early = false;
	uint64_t g1, g2, gr;
	int ret, rc, claims = 0;
	json_t *j;

	CHECK(dead && n3 && c && bd && b3, "nodes dead, n3 on prefix /r/ (SM backend and blocks)");
	if (!dead || !n3 || !c || !bd || !b3)
		return;
	noop->init("{}", &sm, err, sizeof(err));
	CHECK(agent_start(&ag, "/r/", "smr", "smr", false, sm) == 0, "agent smr started");
	ret = cluster_blocks_claim(bd, &blk, err, sizeof(err));
	g1 = blk.first + 1;
	g2 = blk.first + 2;
	gr = blk.first == 0x1000 ? 0x1f01 : 0x1001; /* a requested GUID, in another block */
	ret = ret ? ret : cluster_guid_reserve(bd, gr, NULL, 0, err, sizeof(err));
	ret = ret ? ret : add1(dead, 0x10, g1, err, sizeof(err));
	ret = ret ? ret : add1(dead, 0x10, g2, err, sizeof(err));
	ret = ret ? ret : add1(dead, 0x11, g2, err, sizeof(err));
	ret = ret ? ret : add1(dead, 0x10, gr, err, sizeof(err));
	CHECK(ret == 0 && in_sm(sm, 0x10, g1) && in_sm(sm, 0x10, g2) && in_sm(sm, 0x11, g2) &&
		      in_sm(sm, 0x10, gr) && desired_of(c, "/r/", "dead") == 4 &&
		      view_keys(c, "/r/", "dead") >= 4,
	      "node dead: block %016" PRIx64 ", reserved GUID %016" PRIx64
	      ", 4 memberships applied, its view written (%d %s)",
	      blk.first, gr, ret, err);
	/* the node is gone for good; the agent is down while the admin reclaims */
	agent_stop(&ag);
	ctl_config("/r/", config, sizeof(config));
	rc = ctl(config, (const char *[]){"--json", "cluster", "reclaim-node", "dead", NULL});
	j = json_loads(ctl_out, 0, NULL);
	CHECK(rc == 0 && json_integer_value(json_object_get(j, "blocks_freed")) == 1 &&
		      json_integer_value(json_object_get(j, "memberships_removed")) == 4 &&
		      json_integer_value(json_object_get(j, "reserved_freed")) == 0 &&
		      json_integer_value(json_object_get(j, "reserved_kept")) == 1 &&
		      json_is_false(json_object_get(j, "sm_applied")),
	      "reclaim-node dead (no agent live): exit 0, 1 block freed, 4 memberships removed, "
	      "its reserved GUID kept (rc %d) %.400s",
	      rc, ctl_out);
	json_decref(j);
	CHECK(desired_of(c, "/r/", "dead") == 0 && view_keys(c, "/r/", "dead") == 0,
	      "after reclaim: no members/ desire of dead (%zu), no bynode/dead keys (%zu)",
	      desired_of(c, "/r/", "dead"), view_keys(c, "/r/", "dead"));
	/* before any agent applied the removals, the block is not handed out */
	for (;;) {
		ret = cluster_blocks_claim(b3, &got, err, sizeof(err));
		if (ret)
			break;
		claims++;
		early |= got.first == blk.first;
	}
	CHECK(ret == -ENOSPC && !early && claims == 14,
	      "removals not applied yet: n3 claims the 14 blocks without dead's GUIDs, not "
	      "dead's block (%d, %d claims%s: %s)",
	      ret, claims, early ? ", dead's block among them" : "", err);
	rc = ctl(config, (const char *[]){"--json", "cluster", "reclaim-node", "dead", NULL});
	j = json_loads(ctl_out, 0, NULL);
	CHECK(rc == 0 && json_integer_value(json_object_get(j, "blocks_freed")) == 0 &&
		      json_integer_value(json_object_get(j, "memberships_removed")) == 0 &&
		      json_integer_value(json_object_get(j, "reserved_kept")) == 1,
	      "reclaim-node dead a second time, agent still down: exit 0, nothing more to "
	      "remove, the reservation still kept (rc %d) %.400s",
	      rc, ctl_out);
	json_decref(j);
	CHECK(agent_start(&ag, "/r/", "smr", "smr", false, sm) == 0, "agent smr back");
	{
		struct gone_q q = {sm, g1, g2};
		struct smq qr = {sm, 0x10, gr, 0, c};

		CHECK(wait_for(removed_from_sm, &q, 8000) && wait_for(sm_is, &qr, 8000),
		      "the agent removes dead's GUIDs from PKeys 0x10 and 0x11");
	}
	ret = -1;
	err[0] = '\0';
	for (int64_t end = ibvf_mono_ms() + 8000; ret && ibvf_mono_ms() < end; usleep(50000))
		ret = cluster_blocks_claim(b3, &got, err, sizeof(err));
	CHECK(ret == 0 && got.first == blk.first,
	      "once applied, n3 claims dead's old block %016" PRIx64 " (%d %s)", blk.first, ret,
	      err);
	rc = ctl(config, (const char *[]){"--json", "cluster", "reclaim-node", "dead", NULL});
	j = json_loads(ctl_out, 0, NULL);
	CHECK(rc == 0 && json_integer_value(json_object_get(j, "reserved_freed")) == 1 &&
		      json_integer_value(json_object_get(j, "reserved_kept")) == 0 &&
		      json_is_true(json_object_get(j, "sm_applied")),
	      "reclaim-node dead once applied: its reserved GUID freed (rc %d) %.400s", rc,
	      ctl_out);
	json_decref(j);
	/* a new tenant gets GUID g1 in PKey 0x30: it is there and nowhere else */
	err[0] = '\0';
	ret = add1(n3, 0x30, g1, err, sizeof(err));
	CHECK(ret == 0 && in_sm(sm, 0x30, g1) && !in_sm(sm, 0x10, g1) && !in_sm(sm, 0x10, g2) &&
		      !in_sm(sm, 0x11, g2),
	      "rule 2: GUID %016" PRIx64 " of n3 in PKey 0x30 only, not in dead's 0x10 (%d %s)", g1,
	      ret, err);
	agent_stop(&ag);
	cluster_blocks_free(bd);
	cluster_blocks_free(b3);
	cluster_ops.fini(dead);
	cluster_ops.fini(n3);
	noop->fini(sm);
	etcd_client_free(c);
}

int main(int argc, char **argv)
{
	const char *missing = etcd_lab_missing();
	char err[IBVF_ERR_LEN];
	int64_t t0 = ibvf_mono_ms();

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* the ibvfctl checks are part of the test, not optional (meson passes it) */
	if (argc != 2) {
		fprintf(stderr, "usage: test_sm_agent PATH/TO/ibvfctl\n");
		return 2;
	}
	if (missing)
		return etcd_lab_skip(missing);
	noop = ibvf_sm_backend_v2();
	ibvfctl = argv[1];
	ibvf_log_init("test_sm_agent", IBVF_LOG_STDERR, getenv("V") ? LOG_DEBUG : LOG_WARNING);
	if (etcd_lab_start(&lab, 3, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&lab);
		return 1;
	}
	test_membership();
	test_semantics();
	test_election();
	test_reclaim();
	etcd_lab_stop(&lab);
	printf("1..%d\n# %d failure(s), %lld ms\n", checks, failures,
	       (long long)(ibvf_mono_ms() - t0));
	return failures ? 1 : 0;
}
