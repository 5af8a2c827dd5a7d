// SPDX-License-Identifier: MIT
/*
 * Unit tests of the attach engine (daemon/engine/attach.c, reconcile.c): the
 * state machine, rollback at each step, release, gc, undelivered replies,
 * batching of concurrent prepares and reconciliation, with fake VF and port
 * seams, the in-memory fake SM backend and a real GUID pool store.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <sqlite3.h>

#include <ibvf/api.h>

#include "attach.h"
#include "engine_int.h"
#include "clock.h"
#include "config.h"
#include "evloop.h"
#include "fake_sm.h"
#include "guid_pool.h"
#include "log.h"
#include "release_spool.h"

#define RANGE_START 0x0002c90300a00001ull
#define RANGE_END   0x0002c90300a0ffffull
#define N_VFS	    80

/* ------------------------------------------------------ fake VF / port -- */

struct fvf {
	char pci[32];
	uint64_t node, port;
	char link[8];
	unsigned gen;
	bool host_netdev; /* lookup() shows the netdev in the host netns (the Pod is gone) */
	bool unbound;	  /* lookup() shows no driver bound (a rebind cut short) */
};

struct fake_vfs {
	pthread_mutex_t lock;
	struct fvf vf[N_VFS];
	char fail_program_pci[32];
	int fail_program; /* next N program calls fail */
	int fail_port;	  /* next N port waits fail */
	/* every port wait takes this long */
	unsigned port_delay_ms;
	unsigned program_calls;
	unsigned lookup_calls;
	/* VFs not in the host show a netdev name no netdev of this netns has (as the
	 * lab drivers name a Pod's netdev), instead of none */
	bool pod_netdev_names;
	/* the next port wait arms the sync gate (sync_gate), right before port_ready */
	bool arm_sync_gate;
};

static struct fake_vfs fv;

static struct fvf *fv_find(const char *pci)
{
	for (int i = 0; i < N_VFS; i++)
		if (!strcmp(fv.vf[i].pci, pci))
			return &fv.vf[i];
	return NULL;
}

static void fill(const struct fvf *v, struct ibvf_attach_vf *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->pci, sizeof(out->pci), "%s", v->pci);
	snprintf(out->pf, sizeof(out->pf), "ib0");
	out->vf_index = (int)(v - fv.vf);
	snprintf(out->netdev, sizeof(out->netdev), "ib0v%dg%u", out->vf_index, v->gen);
	snprintf(out->rdma_dev, sizeof(out->rdma_dev), "mlx5_%d", out->vf_index + 2);
	out->guids_known = true;
	out->unbound = v->unbound;
	out->node_guid = v->node;
	out->port_guid = v->port;
	snprintf(out->link_state, sizeof(out->link_state), "%s", v->link);
}

/*
 * test_warm_cache_race: the first lookup of VF race_vf at race_pci (the warm pass's,
 * right before its CNI cache check) writes a cache entry naming it into
 * race_dir, as the plugin does (temp + rename).
 */
static int race_vf = -1;
static char race_dir[64], race_pci[32];

static void race_hook(const char *pci)
{
	char tmp[128], path[128];
	FILE *fp;

	if (race_vf < 0 || strcmp(pci, race_pci))
		return;
	snprintf(tmp, sizeof(tmp), "%s/.0c5e-net1.tmp.1", race_dir);
	snprintf(path, sizeof(path), "%s/0c5e-net1", race_dir);
	fp = fopen(tmp, "w");
	if (!fp)
		return;
	fprintf(fp, "{\"cniVersion\": \"1.0.0\", \"type\": \"ib-sriov\", \"deviceID\": \"%s\"}",
		pci);
	fclose(fp);
	if (!rename(tmp, path))
		race_vf = -1;
}

static int f_lookup(void *ctx, const char *pci, struct ibvf_attach_vf *out, char *err,
		    size_t errlen)
{
	struct fvf *v;

	(void)ctx;
	race_hook(pci);
	pthread_mutex_lock(&fv.lock);
	fv.lookup_calls++;
	v = fv_find(pci);
	if (v)
		fill(v, out);
	/* a handed VF's netdev is in the Pod; only program() sees it in the host */
	if (v && !v->host_netdev && fv.pod_netdev_names)
		snprintf(out->netdev, sizeof(out->netdev), "ibvfnone%d", (int)(v - fv.vf));
	else if (v && !v->host_netdev)
		out->netdev[0] = 0;
	else if (v) /* a name that resolves in this netns, as a VF netdev back in the host */
		snprintf(out->netdev, sizeof(out->netdev), "lo");
	pthread_mutex_unlock(&fv.lock);
	if (!v) {
		snprintf(err, errlen, "no VF at %s", pci);
		return -ENODEV;
	}
	return 0;
}

static int f_program(void *ctx, struct ibvf_attach_vf *vf, uint64_t node, uint64_t port,
		     const char *link, char *err, size_t errlen)
{
	struct fvf *v;
	int ret = 0;

	(void)ctx;
	pthread_mutex_lock(&fv.lock);
	fv.program_calls++;
	v = fv_find(vf->pci);
	if (!v) {
		ret = -ENODEV;
	} else if (fv.fail_program ||
		   (fv.fail_program_pci[0] && !strcmp(fv.fail_program_pci, vf->pci))) {
		if (fv.fail_program)
			fv.fail_program--;
		ret = -EOPNOTSUPP;
		snprintf(err, errlen, "driver does not support VF GUIDs (injected)");
	} else {
		v->node = node;
		v->port = port;
		if (link && *link)
			snprintf(v->link, sizeof(v->link), "%s", link);
		v->gen++;
		fill(v, vf);
	}
	pthread_mutex_unlock(&fv.lock);
	return ret;
}

static int f_list(void *ctx, int (*cb)(void *arg, const struct ibvf_attach_vf *vf), void *arg,
		  char *err, size_t errlen)
{
	struct ibvf_attach_vf all[N_VFS];

	(void)ctx;
	(void)err;
	(void)errlen;
	pthread_mutex_lock(&fv.lock);
	for (int i = 0; i < N_VFS; i++) {
		fill(&fv.vf[i], &all[i]);
		/* the listing shows netdevs as lookup() does */
		if (!fv.vf[i].host_netdev && fv.pod_netdev_names)
			snprintf(all[i].netdev, sizeof(all[i].netdev), "ibvfnone%d", i);
		else if (!fv.vf[i].host_netdev)
			all[i].netdev[0] = 0;
		else
			snprintf(all[i].netdev, sizeof(all[i].netdev), "lo");
	}
	pthread_mutex_unlock(&fv.lock);
	for (int i = 0; i < N_VFS; i++)
		if (cb(arg, &all[i]))
			break;
	return 0;
}

/*
 * The store's fdatasync() seam (ibvf_pool_opts.sync_fault; sync "full"
 * fixtures only, setup_sync_full): while armed, each fdatasync() of the WAL
 * waits at the gate until the test opens it (10 s at most: a safety net, so
 * that a write that should not wait makes its test fail, not hang).
 */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool armed;
	int waiting; /* fdatasync() calls at the gate now */
	int passed;  /* fdatasync() calls that went through it since it was armed */
} sync_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, 0};

static void sync_gate_arm(void)
{
	pthread_mutex_lock(&sync_gate.mu);
	sync_gate.armed = true;
	sync_gate.passed = 0;
	pthread_mutex_unlock(&sync_gate.mu);
}

static void sync_gate_open(void)
{
	pthread_mutex_lock(&sync_gate.mu);
	sync_gate.armed = false;
	pthread_cond_broadcast(&sync_gate.cv);
	pthread_mutex_unlock(&sync_gate.mu);
}

static int f_sync_fault(void *arg)
{
	struct timespec ts;

	(void)arg;
	pthread_mutex_lock(&sync_gate.mu);
	if (sync_gate.armed) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 10;
		sync_gate.waiting++;
		while (sync_gate.armed &&
		       pthread_cond_timedwait(&sync_gate.cv, &sync_gate.mu, &ts) != ETIMEDOUT)
			;
		sync_gate.armed = false;
		sync_gate.waiting--;
		sync_gate.passed++;
	}
	pthread_mutex_unlock(&sync_gate.mu);
	return 0;
}

static int f_port_wait(void *ctx, const struct ibvf_attach_vf *vf, uint64_t port_guid,
		       const uint16_t *pkeys, size_t n, int64_t deadline_ms,
		       struct ibvf_port_result *out, char *err, size_t errlen)
{
	int fail;

	(void)ctx;
	(void)pkeys;
	(void)deadline_ms;
	pthread_mutex_lock(&fv.lock);
	fail = fv.fail_port;
	if (fail)
		fv.fail_port--;
	if (fv.arm_sync_gate)
		sync_gate_arm();
	fv.arm_sync_gate = false;
	pthread_mutex_unlock(&fv.lock);
	if (fv.port_delay_ms)
		usleep(fv.port_delay_ms * 1000u);
	snprintf(out->state, sizeof(out->state), fail ? "INIT" : "ACTIVE");
	if (fail) {
		snprintf(err, errlen, "port INIT, LID 0 (injected)");
		return -ETIMEDOUT;
	}
	out->lid = (uint16_t)(0x10 + vf->vf_index);
	out->sm_lid = 1;
	for (size_t i = 0; i < n; i++)
		out->pkey_index[i] = (int)i + 1;
	(void)port_guid;
	return 0;
}

/* ------------------------------------------------------- store fault -- */

/* A negative errno: every store commit fails (ibvf_pool_opts.write_fault). */
static int store_fault;
/* store commits so far (the seam runs before each; sync "normal": one per write call) */
static int store_commits;

static int f_write_fault(void *arg)
{
	(void)arg;
	__atomic_add_fetch(&store_commits, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&store_fault, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------- pool clock -- */

/* The pool's clock runs this many ms ahead of CLOCK_REALTIME (quarantine tests). */
static int64_t clock_ahead_ms;

static int64_t f_now(void *arg)
{
	(void)arg;
	return ibvf_wall_ms() + __atomic_load_n(&clock_ahead_ms, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------------ fixture -- */

struct fx {
	char dir[64];
	struct ibvf_config cfg;
	struct ibvf_loop *loop;
	struct ibvf_pool *pool; /* owned by the engine; used by tests when idle */
	struct ibvf_sm_backend *sm;
	struct fake_sm_ctl *ctl;
	struct ibvf_engine *e;
	unsigned sm_attempts;
	int replies, want;
	bool deliver;
	json_t *result[256];
	int code[256];
	int err_no[256];
	char step[256][32];
	char msg[256][256];
};

struct rctx {
	struct fx *f;
	int slot;
};

static bool on_reply(void *ctx, json_t *result, int code, const char *msg, int err_no,
		     const char *step)
{
	struct rctx *r = ctx;
	struct fx *f = r->f;

	f->err_no[r->slot] = err_no;
	f->result[r->slot] = result;
	f->code[r->slot] = code;
	snprintf(f->step[r->slot], 32, "%s", step ? step : "");
	snprintf(f->msg[r->slot], 256, "%s", msg ? msg : "");
	if (++f->replies >= f->want)
		ibvf_loop_quit(f->loop);
	free(r);
	return f->deliver;
}

static void start(struct fx *f, int slot, const char *method, json_t *params)
{
	struct rctx *r = calloc(1, sizeof(*r));

	r->f = f;
	r->slot = slot;
	ibvf_engine_call(f->e, method, params, on_reply, r);
	json_decref(params);
}

static void clear(struct fx *f)
{
	for (int i = 0; i < 256; i++) {
		json_decref(f->result[i]);
		f->result[i] = NULL;
		f->code[i] = 0;
	}
	f->replies = 0;
}

/* Run the loop until @n replies arrived (bounded by a 20 s watchdog timer). */
static void timeout_cb(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	fail_msg("no reply within 20 s");
	ibvf_loop_quit(l);
}

static void run_until(struct fx *f, int n)
{
	struct ibvf_timer *t = ibvf_loop_timer(f->loop, 20000, 0, timeout_cb, f);

	f->want = n;
	if (f->replies < n)
		ibvf_loop_run(f->loop);
	ibvf_timer_free(t);
}

/* Let posted work (undo after an undelivered reply) finish. */
static void drain(struct fx *f)
{
	for (int i = 0; i < 200 && ibvf_engine_inflight(f->e); i++) {
		struct ibvf_timer *t = ibvf_loop_timer(
			f->loop, 10, 0, (ibvf_timer_cb)(void (*)(void))ibvf_loop_quit, NULL);
		(void)t;
		ibvf_loop_run(f->loop);
		ibvf_timer_free(t);
	}
}

static json_t *call(struct fx *f, const char *method, json_t *params)
{
	clear(f);
	start(f, 0, method, params);
	run_until(f, 1);
	return f->result[0];
}

static json_t *owner(const char *cid, const char *ifname)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "container_id", cid, "ifname", ifname,
			 "pod_namespace", "ns", "pod_name", "pod", "network", "net-a");
}

static json_t *prep_params(const char *cid, const char *pci, const char *pkey)
{
	return json_pack("{s:o,s:s,s:[{s:s,s:s}],s:s}", "owner", owner(cid, "net1"), "pci", pci,
			 "pkeys", "pkey", pkey, "membership", "full", "link_state", "enable");
}

static const char *pci_of(int i)
{
	static char buf[N_VFS][16];

	snprintf(buf[i], sizeof(buf[i]), "0000:03:%02x.%d", 1 + i / 8, i % 8);
	return buf[i];
}

static void open_engine(struct fx *f);

/* vf.warm for the next setup (off unless a warm test asks: the others count programs) */
static bool warm_on;

static int setup_opts(void **state, const char *extra, unsigned sm_attempts)
{
	struct fx *f = calloc(1, sizeof(*f));
	char path[128], err[512], cfgtext[1024];
	FILE *fp;

	snprintf(f->dir, sizeof(f->dir), "/tmp/ibvf-attach-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(path, sizeof(path), "%s/ibvfd.json", f->dir);
	snprintf(
		cfgtext, sizeof(cfgtext),
		"{\"state_dir\": \"%s/state\", \"pool\": {\"ranges\": [{\"start\": "
		"\"0x%016llx\", \"end\": \"0x%016llx\"}], \"quarantine_s\": 60, \"sync\": \"normal\"},"
		" \"sm\": {\"batch_window_ms\": 20}, \"vf\": {\"warm\": %s}%s}",
		f->dir, RANGE_START, RANGE_END, warm_on ? "true" : "false", extra ? extra : "");
	fp = fopen(path, "w");
	fputs(cfgtext, fp);
	fclose(fp);
	assert_int_equal(ibvf_config_load(&f->cfg, path, true, NULL, err, sizeof(err)), 0);

	memset(&fv, 0, sizeof(fv));
	pthread_mutex_init(&fv.lock, NULL);
	for (int i = 0; i < N_VFS; i++) {
		snprintf(fv.vf[i].pci, sizeof(fv.vf[i].pci), "%s", pci_of(i));
		/* a pre-attach GUID outside the ranges, to check release restores it */
		fv.vf[i].node = fv.vf[i].port = i == 0 ? 0x1122334455667700ull : 0;
		snprintf(fv.vf[i].link, sizeof(fv.vf[i].link), "auto");
	}
	assert_int_equal(ibvf_loop_new(&f->loop, err, sizeof(err)), 0);
	assert_int_equal(fake_sm_ops.init("{}", &f->sm, err, sizeof(err)), 0);
	f->ctl = fake_sm_ctl(f->sm);
	f->sm_attempts = sm_attempts;
	open_engine(f);
	f->deliver = true;
	*state = f;
	return 0;
}

/* ibvf_engine_opts.checkpoint_ms of the next open_engine() (0: the default). */
static uint32_t checkpoint_ms;
/* the store of the next open_engine() runs with sync "full" (setup_sync_full) */
static bool sync_full_next;

/* Open the pool and an engine over f->cfg, f->loop and f->sm (fake VFs kept). */
static void open_engine(struct fx *f)
{
	struct ibvf_engine_opts o = {0};
	struct ibvf_pool_opts po = {0};
	char err[512];

	po.state_dir = f->cfg.state_dir;
	po.ranges = f->cfg.pool.ranges;
	po.n_ranges = f->cfg.pool.n_ranges;
	po.quarantine_s = f->cfg.pool.quarantine_s;
	po.write_fault = f_write_fault;
	po.sync_full = sync_full_next;
	po.sync_fault = f_sync_fault;
	po.now_ms = f_now;
	__atomic_store_n(&store_fault, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&clock_ahead_ms, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(ibvf_pool_open(&po, &f->pool, err, sizeof(err)), 0);
	o.loop = f->loop;
	o.pool = f->pool;
	o.sm_ops = &fake_sm_ops;
	o.sm = f->sm;
	o.vf = (struct ibvf_vf_ops){f_lookup, f_program, f_list, NULL};
	o.port = (struct ibvf_port_ops){f_port_wait, NULL};
	o.cfg = &f->cfg;
	o.seed = 7;
	o.sm_retry_base_ms = 10;
	o.sm_max_attempts = f->sm_attempts;
	o.checkpoint_ms = checkpoint_ms;
	assert_int_equal(ibvf_engine_new(&o, &f->e, err, sizeof(err)), 0);
}

static int setup(void **state)
{
	struct fx *f;

	setup_opts(state, NULL, 3);
	f = *state;
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	assert_true(ibvf_engine_ready(f->e));
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	clear(f);
	ibvf_engine_free(f->e);
	fake_sm_ops.fini(f->sm);
	ibvf_loop_free(f->loop);
	ibvf_config_free(&f->cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static uint64_t guid_of(json_t *r)
{
	uint64_t g = 0;

	assert_non_null(r);
	assert_int_equal(
		ibvf_guid_parse(json_string_value(json_object_get(r, "guid")), &g, NULL, 0), 0);
	return g;
}

static int store_state(struct fx *f, uint64_t g)
{
	struct ibvf_alloc a;

	if (ibvf_pool_get(f->pool, g, &a, NULL, 0))
		return -1;
	return (int)a.state;
}

/* -------------------------------------------------------------- tests -- */

static void test_prepare_commit_release(void **state)
{
	struct fx *f = *state;
	int commits = __atomic_load_n(&store_commits, __ATOMIC_SEQ_CST);
	json_t *r = call(f, "prepare", prep_params("c1", pci_of(0), "0x0012"));
	uint64_t g;
	struct ibvf_alloc a;

	assert_int_equal(f->code[0], 0);
	/*
	 * the store writes crash safety needs (issue 17): the allocation, at
	 * sm_requested (before the VF or the SM sees the GUID), port_ready (the
	 * answer); commit adds handed
	 */
	assert_int_equal(__atomic_load_n(&store_commits, __ATOMIC_SEQ_CST) - commits, 2);
	assert_int_equal(ibvf_pool_find_owner(f->pool, "c1", "net1", &a, NULL, 0), 0);
	assert_int_equal(a.state, IBVF_ALLOC_PORT_READY);
	g = guid_of(r);
	assert_true(g >= RANGE_START && g <= RANGE_END);
	/* the add carried its owner (SM ABI 2 add_members_owned(); the cluster backend's etcd) */
	assert_string_equal(f->ctl->last_owner, "ns/pod net1 (net-a)");
	assert_string_equal(json_string_value(json_object_get(r, "state")), "port_ready");
	assert_string_equal(json_string_value(json_object_get(r, "pci")), pci_of(0));
	assert_string_equal(json_string_value(json_object_get(r, "netdev")), "ib0v0g1");
	assert_string_equal(json_string_value(json_object_get(r, "port_state")), "ACTIVE");
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(r, "pkeys"), 0), "index")),
			 1);
	/* the VF carries it, the SM has it, the store says port_ready with pre-attach GUIDs */
	assert_int_equal(fv.vf[0].port, g);
	assert_int_equal(fv.vf[0].node, g);
	assert_string_equal(fv.vf[0].link, "enable");
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_FULL);
	assert_int_equal(ibvf_pool_get(f->pool, g, &a, NULL, 0), 0);
	assert_int_equal(a.state, IBVF_ALLOC_PORT_READY);
	assert_int_equal(a.prev_port_guid, 0x1122334455667700ull);
	assert_string_equal(a.prev_link_state, "auto");

	/* idempotent: same owner, same answer, no second programming */
	r = call(f, "prepare", prep_params("c1", pci_of(0), "0x0012"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(guid_of(r), g);
	assert_int_equal(fv.program_calls, 1);

	commits = __atomic_load_n(&store_commits, __ATOMIC_SEQ_CST);
	r = call(f, "commit", json_pack("{s:o}", "owner", owner("c1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(__atomic_load_n(&store_commits, __ATOMIC_SEQ_CST) - commits, 1);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "handed");
	assert_int_equal(store_state(f, g), IBVF_ALLOC_HANDED);
	/* a retried ADD after commit: same answer, the port in the Pod is not read */
	r = call(f, "prepare", prep_params("c1", pci_of(0), "0x0012"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(guid_of(r), g);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "handed");

	r = call(f, "release", json_pack("{s:o}", "owner", owner("c1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_int_equal(guid_of(r), g);
	/* walked back: SM, VF (pre-attach GUID and link state), store quarantine */
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
	assert_int_equal(fv.vf[0].port, 0x1122334455667700ull);
	assert_string_equal(fv.vf[0].link, "auto");
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);

	/* idempotent release */
	r = call(f, "release", json_pack("{s:o}", "owner", owner("c1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_false(json_is_true(json_object_get(r, "released")));
}

static void expect_error(struct fx *f, int code, const char *step)
{
	assert_null(f->result[0]);
	if (f->code[0] != code)
		fail_msg("code %d, expected %d (%s)", f->code[0], code, f->msg[0]);
	if (step)
		assert_string_equal(f->step[0], step);
}

/* Nothing held by anybody: store, VF and SM are as before. */
static void assert_clean(struct fx *f, int vf)
{
	struct ibvf_pool_stats st;

	assert_int_equal(ibvf_pool_stats(f->pool, &st, NULL, 0), 0);
	assert_int_equal(st.allocated, 0);
	assert_int_equal(fake_sm_count(f->sm), 0);
	assert_int_equal(fv.vf[vf].port, vf == 0 ? 0x1122334455667700ull : 0);
}

static void test_rollback_program(void **state)
{
	struct fx *f = *state;

	fv.fail_program = 1;
	call(f, "prepare", prep_params("c2", pci_of(1), "0x0012"));
	expect_error(f, IBVF_RPC_VF_ERROR, "program");
	assert_non_null(strstr(f->msg[0], "does not support VF GUIDs"));
	assert_clean(f, 1);
	/* stored at sm_requested from the allocation on, but the SM was never asked */
	assert_int_equal(f->ctl->remove_calls, 0);
	assert_int_equal(f->ctl->add_calls, 0);
}

static void test_rollback_sm(void **state)
{
	struct fx *f = *state;

	f->ctl->fail_add = 1;
	f->ctl->fail_errno = -EINVAL; /* not retryable */
	call(f, "prepare", prep_params("c3", pci_of(2), "0x0012"));
	expect_error(f, IBVF_RPC_SM_ERROR, "sm_add");
	assert_clean(f, 2);
	assert_true(fv.program_calls >= 2); /* programmed, then reset */
}

static void test_rollback_port(void **state)
{
	struct fx *f = *state;

	fv.fail_port = 1;
	call(f, "prepare", prep_params("c4", pci_of(3), "0x0012"));
	expect_error(f, IBVF_RPC_PORT_NOT_READY, "port_wait");
	assert_non_null(strstr(f->msg[0], "port INIT"));
	assert_clean(f, 3);
	assert_true(f->ctl->remove_calls >= 1);
}

/*
 * Issue 16, item 2: a network's index0 reaches the SM as flags (absent: NULL,
 * the backend's default), and the port wait checks the P_Key index when
 * index0 is asked for (the fake port puts the first PKey at index 1).
 */
static void test_index0(void **state)
{
	struct fx *f = *state;
	json_t *p;

	call(f, "prepare", prep_params("c40", pci_of(5), "0x0012"));
	assert_false(f->ctl->last_flags_set);
	call(f, "release", json_pack("{s:o}", "owner", owner("c40", "net1")));
	p = prep_params("c41", pci_of(6), "0x0013");
	json_object_set_new(p, "index0", json_false());
	call(f, "prepare", p);
	assert_true(f->ctl->last_flags_set);
	assert_false(f->ctl->last_flags.index0);
	p = prep_params("c42", pci_of(7), "0x0014");
	json_object_set_new(p, "index0", json_true());
	call(f, "prepare", p);
	assert_true(f->ctl->last_flags_set);
	assert_true(f->ctl->last_flags.index0);
	expect_error(f, IBVF_RPC_PORT_NOT_READY, "port_wait");
	assert_non_null(strstr(f->msg[0], "PKey 0x0014 is at P_Key index 1, not 0"));
	/* rolled back: the VF carries no GUID */
	assert_int_equal(fv.vf[7].port, 0);
	p = prep_params("c43", pci_of(8), "0x0014");
	json_object_set_new(p, "index0", json_string("yes"));
	call(f, "prepare", p);
	assert_non_null(strstr(f->msg[0], "\"index0\" must be true or false"));
}

static void test_rollback_deadline(void **state)
{
	struct fx *f;

	setup_opts(state, ", \"daemon\": {\"prepare_timeout_s\": 1}", 1000);
	f = *state;
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	f->ctl->fail_add = 1000000; /* retryable (-ECONNREFUSED) forever */
	call(f, "prepare", prep_params("c5", pci_of(4), "0x0012"));
	expect_error(f, IBVF_RPC_DEADLINE, "sm_add");
	f->ctl->fail_add = 0;
	assert_clean(f, 4);
	teardown(state);
}

static void test_vf_busy_and_params(void **state)
{
	struct fx *f = *state;

	call(f, "prepare", prep_params("c6", pci_of(5), "0x0012"));
	assert_int_equal(f->code[0], 0);
	call(f, "prepare", prep_params("c7", pci_of(5), "0x0012"));
	expect_error(f, IBVF_RPC_VF_IN_USE, "allocate"); /* permanent: not BUSY (issue 15 item 9) */
	assert_non_null(strstr(f->msg[0], "c6"));
	/* same owner on another VF: conflict */
	call(f, "prepare", prep_params("c6", pci_of(6), "0x0012"));
	expect_error(f, IBVF_RPC_GUID_CONFLICT, "allocate");

	call(f, "prepare", prep_params("c8", "03:00.1", "0x0012"));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");
	call(f, "prepare", prep_params("c8", pci_of(7), "0x0000"));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");
	call(f, "prepare", prep_params("c8", pci_of(7), "0x7fff"));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");
	call(f, "prepare", json_pack("{s:s}", "pci", pci_of(7)));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");
	call(f, "prepare", prep_params("c8", "0000:09:00.1", "0x0012"));
	expect_error(f, IBVF_RPC_VF_ERROR, "lookup");
	call(f, "frobnicate", json_object());
	expect_error(f, IBVF_RPC_METHOD_NOT_FOUND, NULL);
	call(f, "commit", json_pack("{s:o}", "owner", owner("nobody", "net1")));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "commit");
	/* requested GUID outside the ranges */
	call(f, "prepare",
	     json_pack("{s:o,s:s,s:[{s:s}],s:s}", "owner", owner("c9", "net1"), "pci", pci_of(8),
		       "pkeys", "pkey", "0x12", "guid", "00:00:00:00:00:00:00:07"));
	expect_error(f, IBVF_RPC_GUID_CONFLICT, "allocate");
	assert_int_equal(fv.vf[8].port, 0);
}

static void test_requested_guid(void **state)
{
	struct fx *f = *state;
	json_t *r = call(f, "prepare",
			 json_pack("{s:o,s:s,s:[{s:s,s:s}],s:s}", "owner", owner("c10", "net1"),
				   "pci", pci_of(9), "pkeys", "pkey", "0x0013", "membership",
				   "limited", "guid", "0x0002c90300a00100"));

	assert_int_equal(f->code[0], 0);
	assert_int_equal(guid_of(r), 0x0002c90300a00100ull);
	assert_int_equal(fake_sm_has(f->sm, 0x13, 0x0002c90300a00100ull), IBVF_MEMBER_LIMITED);
}

/*
 * A network without a PKey (SriovIBNetwork's pkey is optional): a fabric
 * GUID, port ACTIVE, no SM call at all, commit and release work (issue 15
 * item 1). Both spellings: no "pkeys", and an empty array.
 */
static void test_prepare_without_pkey(void **state)
{
	struct fx *f = *state;
	const char *cid[2] = {"np1", "np2"};

	for (int i = 0; i < 2; i++) {
		json_t *p = json_pack("{s:o,s:s}", "owner", owner(cid[i], "net1"), "pci",
				      pci_of(12 + i));
		unsigned adds = f->ctl->add_calls, removes = f->ctl->remove_calls;
		json_t *r;
		uint64_t g;

		if (i)
			json_object_set_new(p, "pkeys", json_array());
		r = call(f, "prepare", p);
		assert_int_equal(f->code[0], 0);
		g = guid_of(r);
		assert_true(g >= RANGE_START && g <= RANGE_END);
		assert_string_equal(json_string_value(json_object_get(r, "port_state")), "ACTIVE");
		assert_int_equal(json_array_size(json_object_get(r, "pkeys")), 0);
		assert_int_equal(fv.vf[12 + i].port, g);
		assert_int_equal(f->ctl->add_calls, adds);
		call(f, "commit", json_pack("{s:o}", "owner", owner(cid[i], "net1")));
		assert_int_equal(f->code[0], 0);
		r = call(f, "release", json_pack("{s:o}", "owner", owner(cid[i], "net1")));
		if (f->code[0])
			fail_msg("release: %s", f->msg[0]);
		assert_int_equal(f->code[0], 0);
		assert_true(json_is_true(json_object_get(r, "released")));
		assert_int_equal(fv.vf[12 + i].port, 0); /* its pre-attach GUID */
		assert_int_equal(f->ctl->remove_calls, removes);
	}
	/* a "pkeys" that is not an array is still refused */
	call(f, "prepare",
	     json_pack("{s:o,s:s,s:s}", "owner", owner("np3", "net1"), "pci", pci_of(14), "pkeys",
		       "0x12"));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, NULL);
}

static void test_not_ready(void **state)
{
	struct fx *f;

	setup_opts(state, NULL, 3);
	f = *state;
	f->ctl->fail_validate = 1;
	assert_true(ibvf_engine_validate_sm(f->e) < 0);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	call(f, "prepare", prep_params("c11", pci_of(10), "0x0012"));
	expect_error(f, IBVF_RPC_NOT_READY, "validate");
	assert_int_equal(f->err_no[0], EAGAIN); /* the fake's -ECONNREFUSED: waiting may help */
	json_t *r = call(f, "status", NULL);
	assert_false(json_is_true(json_object_get(r, "ready")));
	assert_false(json_is_true(json_object_get(json_object_get(r, "backend"), "ok")));
	/* an SM whose validate() fails permanently (opensm: the admin's file is
	 * refused, -EBADMSG): a permanent SM error carrying that errno, not
	 * "not ready, retry" */
	f->ctl->fail_validate = 1;
	f->ctl->fail_errno = -EBADMSG;
	assert_int_equal(ibvf_engine_validate_sm(f->e), -EBADMSG);
	call(f, "prepare", prep_params("c11", pci_of(10), "0x0012"));
	expect_error(f, IBVF_RPC_SM_ERROR, "validate");
	assert_int_equal(f->err_no[0], EBADMSG);
	/* SM comes back: ready */
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	call(f, "prepare", prep_params("c11", pci_of(10), "0x0012"));
	assert_int_equal(f->code[0], 0);
	teardown(state);
}

/*
 * An SM backend that refuses its configuration permanently (an admin file
 * ibvf cannot keep: -EINVAL) is not "not ready, retry": prepare gets the
 * permanent SM error (issue 15 item 9); a transient one stays NOT_READY.
 */
static void test_not_ready_permanent(void **state)
{
	struct fx *f;

	setup_opts(state, NULL, 3);
	f = *state;
	f->ctl->fail_validate = 1;
	f->ctl->fail_errno = -EINVAL;
	assert_true(ibvf_engine_validate_sm(f->e) < 0);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	call(f, "prepare", prep_params("c11", pci_of(10), "0x0012"));
	expect_error(f, IBVF_RPC_SM_ERROR, "validate");
	assert_non_null(strstr(f->msg[0], "fake SM unreachable"));
	f->ctl->fail_validate = 1;
	f->ctl->fail_errno = -ETIMEDOUT;
	assert_true(ibvf_engine_validate_sm(f->e) < 0);
	call(f, "prepare", prep_params("c11", pci_of(10), "0x0012"));
	expect_error(f, IBVF_RPC_NOT_READY, "validate");
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	call(f, "prepare", prep_params("c11", pci_of(10), "0x0012"));
	assert_int_equal(f->code[0], 0);
	teardown(state);
}

static void test_undelivered_rolls_back(void **state)
{
	struct fx *f = *state;
	struct ibvf_pool_stats st;

	f->deliver = false; /* the client went away */
	call(f, "prepare", prep_params("c12", pci_of(11), "0x0012"));
	assert_int_equal(f->code[0], 0);
	drain(f);
	f->deliver = true;
	assert_int_equal(ibvf_pool_stats(f->pool, &st, NULL, 0), 0);
	assert_int_equal(st.allocated, 0);
	assert_int_equal(fake_sm_count(f->sm), 0);
	assert_int_equal(fv.vf[11].port, 0);
}

static void test_gc_list_status(void **state)
{
	struct fx *f = *state;
	json_t *r, *rel;
	char cid[16];

	for (int i = 0; i < 3; i++) {
		snprintf(cid, sizeof(cid), "gc%d", i);
		call(f, "prepare", prep_params(cid, pci_of(20 + i), "0x0014"));
		assert_int_equal(f->code[0], 0);
	}
	r = call(f, "list", json_pack("{s:s}", "network", "net-a"));
	assert_int_equal(json_array_size(json_object_get(r, "owners")), 3);
	r = call(f, "list", json_pack("{s:i,s:i}", "limit", 1, "offset", 1));
	assert_int_equal(json_array_size(json_object_get(r, "owners")), 1);
	assert_int_equal(json_integer_value(json_object_get(r, "total")), 3);
	r = call(f, "gc",
		 json_pack("{s:s,s:[{s:s,s:s}]}", "network", "net-a", "valid", "container_id",
			   "gc1", "ifname", "net1"));
	assert_int_equal(f->code[0], 0);
	rel = json_object_get(r, "released");
	assert_int_equal(json_array_size(rel), 2);
	r = call(f, "list", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "owners")), 1);
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(json_array_get(json_object_get(r, "owners"), 0), "owner"),
			"container_id")),
		"gc1");
	r = call(f, "status", NULL);
	assert_true(json_is_true(json_object_get(r, "ready")));
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(r, "pool"), "allocated")), 1);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(r, "backend"), "name")), "fake");
	call(f, "gc", json_pack("{s:s}", "network", "x"));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");
}

/* 64 concurrent prepares on 64 VFs, 50 ms SM latency: a handful of SM calls. */
static void test_concurrent_prepares_batch(void **state)
{
	struct fx *f = *state;
	uint64_t seen[64];

	f->ctl->latency_ms = 50;
	/* a window that covers the 64 store commits even under ASan */
	f->cfg.sm.batch_window_ms = 300;
	ibvf_engine_reload(f->e, &f->cfg);
	clear(f);
	for (int i = 0; i < 64; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "cc%d", i);
		start(f, i, "prepare", prep_params(cid, pci_of(i), "0x0015"));
	}
	run_until(f, 64);
	for (int i = 0; i < 64; i++) {
		if (f->code[i])
			fail_msg("prepare %d: %s", i, f->msg[i]);
		seen[i] = guid_of(f->result[i]);
		for (int j = 0; j < i; j++)
			assert_true(seen[j] != seen[i]);
	}
	assert_true(f->ctl->add_calls <= 4);
	assert_false(f->ctl->concurrent_call_seen);
	assert_int_equal(fake_sm_count(f->sm), 64);
}

/* Same owner twice at once: serialized; the second gets the first's answer. */
static void test_same_owner_serialized(void **state)
{
	struct fx *f = *state;

	clear(f);
	start(f, 0, "prepare", prep_params("dup", pci_of(30), "0x0012"));
	start(f, 1, "prepare", prep_params("dup", pci_of(30), "0x0012"));
	run_until(f, 2);
	assert_int_equal(f->code[0], 0);
	assert_int_equal(f->code[1], 0);
	assert_int_equal(guid_of(f->result[0]), guid_of(f->result[1]));
	assert_int_equal(fv.program_calls, 1);
}

/*
 * The key tables (engine.c): owners whose keys share one bucket. Held at once,
 * only the same owner waits (its second prepare gets the first's answer);
 * released from the middle, the head and the tail of the bucket's chain, each
 * key is free again (a key left in a chain would keep the next prepare of
 * that owner waiting: no reply within 20 s).
 */
static void test_keys_share_a_bucket(void **state)
{
	static const int order[6] = {3, 0, 5, 1, 4, 2};
	struct fx *f = *state;
	char cid[6][24], key[64];
	unsigned want = 0;
	int n = 0;

	for (int i = 0; n < 6 && i < 1000000; i++) {
		snprintf(key, sizeof(key), "kb%d/net1", i); /* eng_owner_key() of the owner */
		if (!n)
			want = eng_key_bucket(key);
		if (eng_key_bucket(key) == want)
			snprintf(cid[n++], sizeof(cid[0]), "kb%d", i);
	}
	assert_int_equal(n, 6);
	for (int round = 0; round < 2; round++) {
		clear(f);
		fv.program_calls = 0;
		for (int j = 0; j < 6; j++)
			start(f, j, "prepare", prep_params(cid[j], pci_of(50 + j), "0x0012"));
		/* the same owners again, while the first ones hold their keys */
		start(f, 6, "prepare", prep_params(cid[0], pci_of(50), "0x0012"));
		start(f, 7, "prepare", prep_params(cid[3], pci_of(53), "0x0012"));
		run_until(f, 8);
		for (int j = 0; j < 8; j++)
			if (f->code[j])
				fail_msg("round %d prepare %d: %s", round, j, f->msg[j]);
		assert_int_equal(guid_of(f->result[6]), guid_of(f->result[0]));
		assert_int_equal(guid_of(f->result[7]), guid_of(f->result[3]));
		assert_int_equal(fv.program_calls, 6);
		for (int j = 0; j < 6; j++) {
			call(f, "release",
			     json_pack("{s:o}", "owner", owner(cid[order[j]], "net1")));
			if (f->code[0])
				fail_msg("round %d release %s: %s", round, cid[order[j]],
					 f->msg[0]);
		}
	}
}

/* SM removal fails: release still succeeds (VF clean), reconciliation finishes it. */
static void test_release_sm_pending(void **state)
{
	struct fx *f = *state;
	json_t *r = call(f, "prepare", prep_params("c13", pci_of(12), "0x0012"));
	uint64_t g = guid_of(r);
	struct ibvf_alloc a;

	f->ctl->fail_remove = 100;
	f->ctl->fail_errno = -EINVAL;
	r = call(f, "release", json_pack("{s:o}", "owner", owner("c13", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "sm_removal_pending")));
	assert_int_equal(fv.vf[12].port, 0);
	assert_int_equal(ibvf_pool_get(f->pool, g, &a, NULL, 0), 0);
	assert_int_equal(a.state, IBVF_ALLOC_RELEASING);
	assert_string_equal(a.pci, "");
	/* the VF is free again for someone else */
	call(f, "prepare", prep_params("c14", pci_of(12), "0x0012"));
	assert_int_equal(f->code[0], 0);
	f->ctl->fail_remove = 0;
	{
		json_t *fnd = json_array();
		int n = ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0);
		char *t = json_dumps(fnd, 0);

		if (n)
			fail_msg("findings: %s", t);
		free(t);
		json_decref(fnd);
	}
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
}

/* ------------------------------------------ issue 14: an SM that lies -- */

struct member_check {
	struct fx *f;
	int bad;
};

static int member_check_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct member_check *c = arg;
	struct ibvf_alloc a;
	bool asked = false;

	pkey = ibvf_pkey_key(pkey);
	if (!managed || pkey == IBVF_PKEY_DEFAULT || m->guid < RANGE_START || m->guid > RANGE_END)
		return 0;
	if (!ibvf_pool_get(c->f->pool, m->guid, &a, NULL, 0) && a.state != IBVF_ALLOC_QUARANTINED)
		for (size_t i = 0; i < a.n_pkeys; i++)
			asked |= ibvf_pkey_key(a.pkeys[i]) == pkey;
	if (!asked) {
		print_error("GUID %016llx is in PKey 0x%04x, which no owner of it asked for\n",
			    (unsigned long long)m->guid, pkey);
		c->bad++;
	}
	return 0;
}

/* The invariant: every pool GUID in a (non-default) PKey belongs to an owner that asked for it. */
static void assert_no_foreign(struct fx *f, const char *when)
{
	struct member_check c = {.f = f};

	assert_int_equal(fake_sm_ops.list_members(f->sm, -1, member_check_cb, &c, NULL, 0), 0);
	if (c.bad)
		fail_msg("%s: %d membership(s) no owner asked for", when, c.bad);
}

static int problems(struct fx *f, enum ibvf_reconcile_pass mode, const char *want_kind)
{
	json_t *fnd = json_array(), *it;
	bool seen = !want_kind;
	size_t i;
	int n = ibvf_engine_reconcile(f->e, mode, fnd, NULL, 0);

	json_array_foreach(fnd, i, it)
	{
		const char *k = json_string_value(json_object_get(it, "kind"));

		if (want_kind && !strcmp(k, want_kind)) {
			seen = true;
			assert_true(json_is_true(json_object_get(it, "fixed")));
		}
	}
	if (!seen) {
		char *t = json_dumps(fnd, 0);

		fail_msg("no %s finding in %s", want_kind, t);
	}
	json_decref(fnd);
	return n;
}

/* Invariant 1: a removal the SM answers OK without doing is not quarantined. */
static void test_remove_verified(void **state)
{
	struct fx *f = *state;
	json_t *r = call(f, "prepare", prep_params("c20", pci_of(20), "0x0012"));
	uint64_t g = guid_of(r);

	f->ctl->lie_remove = 2; /* the removal and its one retry */
	r = call(f, "release", json_pack("{s:o}", "owner", owner("c20", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "sm_removal_pending")));
	assert_int_equal(store_state(f, g), IBVF_ALLOC_RELEASING);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_FULL);
	assert_int_equal(fv.vf[20].port, 0); /* the VF is clean all the same */
	/* one lie only: the read-back catches it and the retry removes it */
	call(f, "prepare", prep_params("c21", pci_of(21), "0x0012"));
	g = guid_of(f->result[0]);
	f->ctl->lie_remove = 1;
	r = call(f, "release", json_pack("{s:o}", "owner", owner("c21", "net1")));
	assert_false(json_is_true(json_object_get(r, "sm_removal_pending")));
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
	/* the pending one: reconciliation finishes it once the SM tells the truth */
	assert_int_equal(problems(f, IBVF_PASS_REPAIR, "releasing"), 0);
	assert_no_foreign(f, "after reconciliation");
}

/* Invariant 2: quarantine ends only after a listing without the GUID. */
static void test_quarantine_waits_for_sm(void **state)
{
	struct fx *f = *state;
	json_t *r = call(f, "prepare", prep_params("c22", pci_of(22), "0x0012"));
	uint64_t g = guid_of(r);
	struct ibvf_alloc a;

	call(f, "release", json_pack("{s:o}", "owner", owner("c22", "net1")));
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(ibvf_pool_get(f->pool, g, &a, NULL, 0), 0);
	assert_true(a.sm_unseen);
	/* the late add lands; the quarantine time passes with no pass in between */
	fake_sm_put(f->sm, 0x12, g, true);
	__atomic_add_fetch(&clock_ahead_ms, 61000, __ATOMIC_SEQ_CST);
	assert_int_equal(ibvf_pool_expire(f->pool, NULL, 0), 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	/* a pass sees it in the SM: removed, and its quarantine starts again */
	assert_int_equal(problems(f, IBVF_PASS_REPAIR, "sm-orphan"), 0);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
	assert_int_equal(ibvf_pool_get(f->pool, g, &a, NULL, 0), 0);
	assert_true(a.sm_unseen);
	__atomic_add_fetch(&clock_ahead_ms, 61000, __ATOMIC_SEQ_CST);
	assert_int_equal(ibvf_pool_expire(f->pool, NULL, 0), 0); /* time over, not seen */
	/* a pass sees it gone and a fresh quarantine time is over: out */
	assert_int_equal(problems(f, IBVF_PASS_REPAIR, NULL), 0);
	assert_int_equal(ibvf_pool_get(f->pool, g, &a, NULL, 0), 0);
	assert_false(a.sm_unseen);
	assert_int_equal(ibvf_pool_expire(f->pool, NULL, 0), 1);
	assert_int_equal(store_state(f, g), -1);
}

/* Invariant 3: prepare never hands out a GUID the SM has in a foreign tenant PKey. */
static void test_prepare_foreign_pkey(void **state)
{
	struct fx *f = *state;
	uint64_t g;

	/* a fresh store hands out RANGE_START, +1, +2 ... */
	fake_sm_put(f->sm, 0x12, RANGE_START, true);	  /* left by tenant A: repaired */
	fake_sm_put(f->sm, 0x20, RANGE_START + 1, false); /* an admin's: not ours, skip it */
	fake_sm_put(f->sm, IBVF_PKEY_DEFAULT, RANGE_START + 2, false); /* does not count */
	fake_sm_put(f->sm, IBVF_PKEY_DEFAULT, RANGE_START + 2, true);
	call(f, "prepare", prep_params("b1", pci_of(30), "0x0034"));
	assert_int_equal(f->code[0], 0);
	g = guid_of(f->result[0]);
	assert_int_equal(g, RANGE_START);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
	assert_int_equal(fake_sm_has(f->sm, 0x34, g), IBVF_MEMBER_FULL);
	call(f, "prepare", prep_params("b2", pci_of(31), "0x0034"));
	assert_int_equal(f->code[0], 0);
	g = guid_of(f->result[0]);
	assert_int_equal(g, RANGE_START + 2);
	assert_int_equal(fake_sm_has(f->sm, 0x20, RANGE_START + 1), IBVF_MEMBER_FULL);
	assert_int_equal(store_state(f, RANGE_START + 1), IBVF_ALLOC_QUARANTINED);
	/* a requested GUID held in a foreign PKey ibvf may not change: refused */
	call(f, "prepare",
	     json_pack("{s:o,s:s,s:s,s:[{s:s}]}", "owner", owner("b3", "net1"), "pci", pci_of(32),
		       "guid", "0x0002c90300a00010", "pkeys", "pkey", "0x0034"));
	if (f->code[0])
		fail_msg("requested GUID: %s", f->msg[0]);
	fake_sm_put(f->sm, 0x20, RANGE_START + 0x10, false);
	call(f, "prepare",
	     json_pack("{s:o,s:s,s:s,s:[{s:s}]}", "owner", owner("b4", "net1"), "pci", pci_of(33),
		       "guid", "0x0002c90300a00011", "pkeys", "pkey", "0x0034"));
	assert_int_equal(f->code[0], IBVF_RPC_GUID_CONFLICT);
	assert_non_null(strstr(f->msg[0], "0x0020"));
	assert_int_equal(fv.vf[33].port, 0);
	assert_int_equal(fake_sm_has(f->sm, 0x34, RANGE_START + 0x10), -1);
}

/* Invariant 4: pool GUIDs in PKeys nobody (or not their owner) asked for are removed. */
static void test_reconcile_foreign_pkey(void **state)
{
	struct fx *f = *state;
	json_t *r = call(f, "prepare", prep_params("c24", pci_of(24), "0x0012"));
	uint64_t g = guid_of(r), outside = 0x0002c90300b00001ull;

	fake_sm_put(f->sm, 0x34, g, true);		     /* owner in a foreign PKey */
	fake_sm_put(f->sm, 0x34, RANGE_START + 0x40, true);  /* nobody's */
	fake_sm_put(f->sm, 0x34, outside, true);	     /* not a pool GUID: not ours */
	fake_sm_put(f->sm, 0x20, RANGE_START + 0x41, false); /* an admin's */
	/* a dry run changes nothing */
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_DRY_RUN, NULL, NULL, 0), 2);
	assert_int_equal(fake_sm_has(f->sm, 0x34, g), IBVF_MEMBER_FULL);
	/* the daemon's default pass ("report") removes both */
	assert_int_equal(problems(f, IBVF_PASS_REPAIR, "sm-foreign-pkey"), 0);
	assert_int_equal(fake_sm_has(f->sm, 0x34, g), -1);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_FULL);
	assert_int_equal(fake_sm_has(f->sm, 0x34, RANGE_START + 0x40), -1);
	assert_int_equal(fake_sm_has(f->sm, 0x34, outside), IBVF_MEMBER_FULL);
	assert_int_equal(fake_sm_has(f->sm, 0x20, RANGE_START + 0x41), IBVF_MEMBER_FULL);
	assert_no_foreign(f, "after the pass");
}

/*
 * Invariant 5: both leaks of issue 14 replayed through the engine. A late
 * add (timed out, retried, applied after the release) and a faked removal;
 * after each step no pool GUID is in a PKey its owner did not ask for (once
 * a pass ran where the leak is the SM's doing), and the next tenant never
 * gets a GUID that is still in another tenant's PKey.
 */
static void test_leak_replay(void **state)
{
	struct fx *f = *state;
	uint64_t ga, gb;
	json_t *r;

	/* tenant A, PKey 0x12: the first add times out, the retry succeeds */
	f->ctl->late_add = 1;
	r = call(f, "prepare", prep_params("tenant-a", pci_of(60), "0x0012"));
	assert_int_equal(f->code[0], 0);
	ga = guid_of(r);
	call(f, "commit", json_pack("{s:o}", "owner", owner("tenant-a", "net1")));
	assert_no_foreign(f, "A attached");
	call(f, "release", json_pack("{s:o}", "owner", owner("tenant-a", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_no_foreign(f, "A released");
	/* ... and now the SM applies the first, late add */
	assert_int_equal(fake_sm_apply_late(f->sm), 1);
	assert_int_equal(fake_sm_has(f->sm, 0x12, ga), IBVF_MEMBER_FULL);
	/* the quarantine time passes before any pass ran */
	__atomic_add_fetch(&clock_ahead_ms, 61000, __ATOMIC_SEQ_CST);
	r = call(f, "prepare", prep_params("tenant-b", pci_of(61), "0x0034"));
	assert_int_equal(f->code[0], 0);
	gb = guid_of(r);
	assert_int_not_equal(gb, ga);
	assert_int_equal(fake_sm_has(f->sm, 0x12, gb), -1);
	problems(f, IBVF_PASS_REPAIR, "sm-orphan");
	assert_no_foreign(f, "late add, after a pass");
	call(f, "commit", json_pack("{s:o}", "owner", owner("tenant-b", "net1")));

	/* B's release: the SM answers 200 {} twice without removing */
	f->ctl->lie_remove = 2;
	r = call(f, "release", json_pack("{s:o}", "owner", owner("tenant-b", "net1")));
	assert_true(json_is_true(json_object_get(r, "sm_removal_pending")));
	assert_int_equal(store_state(f, gb), IBVF_ALLOC_RELEASING);
	/* a record still holds it: nobody else can get it meanwhile */
	r = call(f, "prepare", prep_params("tenant-c", pci_of(62), "0x0056"));
	assert_int_equal(f->code[0], 0);
	assert_int_not_equal(guid_of(r), gb);
	problems(f, IBVF_PASS_REPAIR, "releasing");
	assert_int_equal(fake_sm_has(f->sm, 0x34, gb), -1);
	assert_int_equal(store_state(f, gb), IBVF_ALLOC_QUARANTINED);
	assert_no_foreign(f, "faked remove, after a pass");

	/* both GUIDs come back only clean: a full cycle later, new tenants get them */
	__atomic_add_fetch(&clock_ahead_ms, 10, __ATOMIC_SEQ_CST);
	problems(f, IBVF_PASS_REPAIR, NULL);
	__atomic_add_fetch(&clock_ahead_ms, 122000, __ATOMIC_SEQ_CST);
	assert_int_equal(ibvf_pool_expire(f->pool, NULL, 0), 2);
	for (int i = 0; i < 3; i++) {
		char cid[16], pk[8];

		snprintf(cid, sizeof(cid), "tenant-d%d", i);
		snprintf(pk, sizeof(pk), "0x%04x", 0x70 + i);
		call(f, "prepare", prep_params(cid, pci_of(63 + i), pk));
		assert_int_equal(f->code[0], 0);
		assert_no_foreign(f, "re-use");
	}
}

/*
 * Issue 16, item 1: the SM holding a limited member as full (what UFM's add
 * made of a mixed add) is found by membership, not presence, and repaired.
 */
static void test_reconcile_membership(void **state)
{
	struct fx *f = *state;
	json_t *p = json_pack("{s:o,s:s,s:[{s:s,s:s}],s:s}", "owner", owner("c50", "net1"), "pci",
			      pci_of(50), "pkeys", "pkey", "0x0012", "membership", "limited",
			      "link_state", "enable");
	json_t *r = call(f, "prepare", p);
	uint64_t g;

	assert_int_equal(f->code[0], 0);
	g = guid_of(r);
	call(f, "commit", json_pack("{s:o}", "owner", owner("c50", "net1")));
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_LIMITED);
	fake_sm_put(f->sm, 0x12, g, true); /* now full */
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_FULL);
	problems(f, IBVF_PASS_REPAIR, "sm-membership");
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_LIMITED);
	problems(f, IBVF_PASS_REPAIR, NULL);
}

/* Crash leftovers and drift are found and handled by reconciliation. */
static void test_reconcile(void **state)
{
	struct fx *f = *state;
	struct ibvf_alloc_request req = {.vf_index = 40};
	uint16_t pk = 0x8016;
	struct ibvf_alloc mid, handed;
	json_t *fnd = json_array(), *r;
	uint64_t orphan = RANGE_START + 0x500, vforphan = RANGE_START + 0x600;
	int n;

	/* 1: an attach cut short at sm_requested: VF programmed, SM has it */
	snprintf(req.owner.container_id, sizeof(req.owner.container_id), "crashed");
	snprintf(req.owner.ifname, sizeof(req.owner.ifname), "net1");
	req.pci = pci_of(40);
	req.pkeys = &pk;
	req.n_pkeys = 1;
	assert_int_equal(ibvf_pool_allocate(f->pool, &req, &mid, NULL, 0), 0);
	mid.state = IBVF_ALLOC_SM_REQUESTED;
	assert_int_equal(ibvf_pool_update(f->pool, &mid, NULL, 0), 0);
	fv.vf[40].port = fv.vf[40].node = mid.guid;
	fv.vf[40].host_netdev = true; /* not moved into a Pod (no answer went out) */
	fake_sm_put(f->sm, 0x16, mid.guid, true);

	/* 2: a handed attach whose membership the SM lost */
	r = call(f, "prepare", prep_params("alive", pci_of(41), "0x0016"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(ibvf_pool_get(f->pool, guid_of(r), &handed, NULL, 0), 0);
	call(f, "commit", json_pack("{s:o}", "owner", owner("alive", "net1")));
	clear(f);
	fake_sm_drop(f->sm, 0x16, handed.guid);

	/* 3: an SM member of the ranges nobody holds; 4: a VF carrying one */
	fake_sm_put(f->sm, 0x16, orphan, true);
	fv.vf[42].port = fv.vf[42].node = vforphan;
	/* not managed by ibvf: left alone */
	fake_sm_put(f->sm, 0x16, RANGE_START + 0x700, false);

	/* dry run (offline audit without --fix): everything reported, nothing touched */
	{
		json_t *dry = json_array();

		n = ibvf_engine_reconcile(f->e, IBVF_PASS_DRY_RUN, dry, NULL, 0);
		assert_int_equal(n, 4);
		assert_int_equal(store_state(f, mid.guid), IBVF_ALLOC_SM_REQUESTED);
		assert_int_equal(fake_sm_has(f->sm, 0x16, mid.guid), IBVF_MEMBER_FULL);
		assert_int_equal(fake_sm_has(f->sm, 0x16, handed.guid), -1);
		assert_int_equal(fv.vf[40].port, mid.guid);
		json_decref(dry);
	}
	/* report mode: fixes the crash and the lost membership, removes the SM
	 * orphan (a pool GUID: ibvf's, issue 14), reports the VF orphan */
	n = ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_state(f, mid.guid), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fv.vf[40].port, 0);
	assert_int_equal(fake_sm_has(f->sm, 0x16, mid.guid), -1);
	assert_int_equal(fake_sm_has(f->sm, 0x16, handed.guid), IBVF_MEMBER_FULL);
	assert_int_equal(fake_sm_has(f->sm, 0x16, orphan), -1);
	assert_int_equal(fv.vf[42].port, vforphan);
	{
		size_t i;
		json_t *it;
		int kinds = 0;

		json_array_foreach(fnd, i, it)
		{
			const char *k = json_string_value(json_object_get(it, "kind"));

			kinds |= !strcmp(k, "mid-flight") << 0 | !strcmp(k, "sm-missing") << 1 |
				 !strcmp(k, "sm-orphan") << 2 | !strcmp(k, "vf-orphan") << 3;
			assert_non_null(json_object_get(it, "fix"));
		}
		assert_int_equal(kinds, 0xf);
	}
	json_decref(fnd);

	/* fix mode: orphans go */
	n = ibvf_engine_reconcile(f->e, IBVF_PASS_FIX, NULL, NULL, 0);
	assert_int_equal(n, 0);
	assert_int_equal(fake_sm_has(f->sm, 0x16, orphan), -1);
	assert_int_equal(fake_sm_has(f->sm, 0x16, RANGE_START + 0x700), IBVF_MEMBER_FULL);
	assert_int_equal(fv.vf[42].port, 0);
	/* and a clean pass finds nothing */
	fnd = json_array();
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0), 0);
	json_decref(fnd);
	/* the audit method runs the same pass */
	r = call(f, "audit", json_object());
	assert_int_equal(f->code[0], 0);
	assert_int_equal(json_integer_value(json_object_get(r, "problems")), 0);
}

static int count_kind(json_t *fnd, const char *kind)
{
	size_t i;
	json_t *it;
	int n = 0;

	json_array_foreach(fnd, i, it) n +=
		!strcmp(json_string_value(json_object_get(it, "kind")), kind);
	return n;
}

/*
 * Issue 17 item 4: a pass works from one VF listing and one store listing,
 * indexed once. Settled owners on their VFs cost no per-VF read; duplicates
 * and orphans are still found (the VF hash, the snapshot by GUID).
 */
static void test_reconcile_linear(void **state)
{
	struct fx *f = *state;
	uint64_t g[40], stray = RANGE_START + 0x900;
	json_t *fnd;

	for (int i = 0; i < 40; i++) {
		char cid[16];
		json_t *r;

		snprintf(cid, sizeof(cid), "lin%d", i);
		r = call(f, "prepare", prep_params(cid, pci_of(i), "0x0019"));
		assert_int_equal(f->code[0], 0);
		g[i] = guid_of(r);
		call(f, "commit", json_pack("{s:o}", "owner", owner(cid, "net1")));
		assert_int_equal(f->code[0], 0);
	}
	clear(f);
	/* a clean pass over 40 attached owners: no VF or store read per owner */
	fv.lookup_calls = 0;
	fnd = json_array();
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_FIX, fnd, NULL, 0), 0);
	assert_int_equal(json_array_size(fnd), 0);
	if (fv.lookup_calls)
		fail_msg("a clean pass read %u VFs one by one", fv.lookup_calls);
	json_decref(fnd);
	/* ... also when the listing names each handed VF's netdev (in its Pod, not
	 * here): one netdev dump per pass, no per-VF check or read */
	fv.pod_netdev_names = true;
	fnd = json_array();
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_FIX, fnd, NULL, 0), 0);
	fv.pod_netdev_names = false;
	assert_int_equal(json_array_size(fnd), 0);
	if (fv.lookup_calls)
		fail_msg("a clean pass with netdev names read %u VFs one by one", fv.lookup_calls);
	json_decref(fnd);

	/* three VFs with one stray pool GUID, one VF with an owner's GUID */
	for (int i = 50; i < 53; i++)
		fv.vf[i].port = fv.vf[i].node = stray;
	fv.vf[53].port = fv.vf[53].node = g[7];
	fnd = json_array();
	ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0);
	/* pairs (50,51) (50,52) (51,52) and (7,53) */
	assert_int_equal(count_kind(fnd, "duplicate-guid"), 4);
	assert_int_equal(count_kind(fnd, "vf-orphan"), 4);
	assert_int_equal(count_kind(fnd, "vf-drift"), 0);
	json_decref(fnd);
	/* fix mode resets the four, leaves the owner's VF alone */
	ibvf_engine_reconcile(f->e, IBVF_PASS_FIX, NULL, NULL, 0);
	for (int i = 50; i < 54; i++)
		assert_int_equal(fv.vf[i].port, 0);
	assert_int_equal(fv.vf[7].port, g[7]);
	/* an owner's VF that drifted is still read and reported */
	fv.vf[9].port = stray + 1;
	fnd = json_array();
	ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0);
	assert_int_equal(count_kind(fnd, "vf-drift"), 1);
	json_decref(fnd);
}

/* Start-up with the SM down and a crash leftover: the VF is freed at once, the
 * SM removal waits for the SM. */
static void test_reconcile_sm_down(void **state)
{
	struct fx *f;
	struct ibvf_alloc_request req = {.vf_index = 50};
	uint16_t pk = 0x8017;
	struct ibvf_alloc mid, a;
	int64_t t0;

	setup_opts(state, NULL, 3);
	f = *state;
	snprintf(req.owner.container_id, sizeof(req.owner.container_id), "crashed2");
	snprintf(req.owner.ifname, sizeof(req.owner.ifname), "net1");
	req.pci = pci_of(50);
	req.pkeys = &pk;
	req.n_pkeys = 1;
	assert_int_equal(ibvf_pool_allocate(f->pool, &req, &mid, NULL, 0), 0);
	mid.state = IBVF_ALLOC_SM_CONFIRMED;
	assert_int_equal(ibvf_pool_update(f->pool, &mid, NULL, 0), 0);
	fv.vf[50].port = fv.vf[50].node = mid.guid;
	fake_sm_put(f->sm, 0x17, mid.guid, true);
	f->ctl->fail_validate = 1;
	f->ctl->fail_list = 1;
	assert_true(ibvf_engine_validate_sm(f->e) < 0);
	t0 = ibvf_mono_ms();
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	assert_true(ibvf_mono_ms() - t0 < 2000); /* no SM retries during start-up */
	assert_int_equal(fv.vf[50].port, 0);
	assert_int_equal(ibvf_pool_get(f->pool, mid.guid, &a, NULL, 0), 0);
	assert_int_equal(a.state, IBVF_ALLOC_RELEASING);
	assert_string_equal(a.pci, "");
	/* the SM is back: the next pass removes the membership and frees the GUID */
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0), 0);
	assert_int_equal(store_state(f, mid.guid), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x17, mid.guid), -1);
	teardown(state);
}

/*
 * End the engine's lifetime and start the next on the same state directory
 * and SM (the VFs keep what they carry); @lose_store: pool.db and its WAL are
 * deleted in between, as an operator who "moved it aside" would.
 */
static const char *not_ready_reason(json_t *status, const char *check);

static void restart_engine(struct fx *f, bool lose_store)
{
	char cmd[256];

	clear(f);
	ibvf_engine_free(f->e);
	if (lose_store) {
		snprintf(cmd, sizeof(cmd), "rm -f %s/pool.db %s/pool.db-wal %s/pool.db-shm",
			 f->cfg.state_dir, f->cfg.state_dir, f->cfg.state_dir);
		assert_int_equal(system(cmd), 0);
	}
	open_engine(f);
}

/* Issue 14: a lost store must not re-issue the GUIDs the VFs and the SM still carry. */
/*
 * A GUID the CNI plugin's cache records (daemon.cni_cache_dir) is in use on
 * this node, whatever the store says: not allocatable until the entry is
 * gone (issue 14, "in the CNI cache").
 */
static void test_cni_cache_in_use(void **state)
{
	struct fx *f = *state;
	char dir[160], path[256], text[256], g[IBVF_GUID_STR_LEN];
	FILE *fp;
	json_t *r;

	snprintf(dir, sizeof(dir), "%s/cni", f->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/c0ffee-net1", dir);
	snprintf(text, sizeof(text),
		 "{\"cniVersion\": \"1.0.0\", \"ibvf\": {\"version\": 1, \"guid\": \"%s\"}}",
		 ibvf_guid_format(RANGE_START, g));
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	snprintf(f->cfg.daemon.cni_cache_dir, sizeof(f->cfg.daemon.cni_cache_dir), "%s", dir);
	ibvf_engine_reload(f->e, &f->cfg);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	assert_true(ibvf_pool_in_use(f->pool, RANGE_START));
	r = call(f, "prepare", prep_params("fresh", pci_of(0), "0x0012"));
	assert_int_equal(f->code[0], 0);
	assert_true(guid_of(r) == RANGE_START + 1);
	/* the entry is gone (the plugin's DEL or GC): allocatable after the next pass */
	assert_int_equal(unlink(path), 0);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	assert_false(ibvf_pool_in_use(f->pool, RANGE_START));
	r = call(f, "prepare", prep_params("fresh2", pci_of(1), "0x0012"));
	assert_int_equal(f->code[0], 0);
	assert_true(guid_of(r) == RANGE_START);
}

static void test_store_lost_no_reissue(void **state)
{
	struct fx *f = *state;
	uint64_t g[3], sm_only;
	json_t *r;
	char cid[16];

	for (int i = 0; i < 3; i++) {
		snprintf(cid, sizeof(cid), "first%d", i);
		r = call(f, "prepare", prep_params(cid, pci_of(i), "0x0012"));
		assert_int_equal(f->code[0], 0);
		g[i] = guid_of(r);
		assert_int_equal(g[i], RANGE_START + (uint64_t)i); /* ...01 .. ...03 */
		call(f, "commit", json_pack("{s:o}", "owner", owner(cid, "net1")));
		assert_int_equal(f->code[0], 0);
	}
	/* one more the SM lists (a VF of another node carries it), not in the store */
	sm_only = RANGE_START + 3;
	fake_sm_put(f->sm, 0x12, sm_only, true);

	restart_engine(f, true);
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	/* the loss is detected (pool.id): not ready, reason "store", prepare refused */
	assert_true(ibvf_pool_lost(f->pool, NULL, 0));
	assert_false(ibvf_engine_ready(f->e));
	r = call(f, "status", json_object());
	assert_non_null(not_ready_reason(r, "store"));
	assert_non_null(strstr(not_ready_reason(r, "store"), "lost records"));
	call(f, "prepare", prep_params("early", pci_of(3), "0x0012"));
	expect_error(f, IBVF_RPC_NOT_READY, "validate");
	/* a fix pass does not reset the "orphans" a lost store cannot account for */
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_FIX, NULL, NULL, 0) > 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fv.vf[i].port, g[i]);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g[0]), IBVF_MEMBER_FULL);
	/*
	 * Cleared without adopting anything (the rebuild adopts; tested in
	 * test_guid_pool): the VFs' and the SM's view alone must keep the
	 * GUIDs in use from being handed out again.
	 */
	assert_int_equal(ibvf_pool_rebuilt(f->pool, NULL, 0), 0);
	assert_true(ibvf_engine_ready(f->e));
	for (int i = 0; i < 3; i++)
		assert_true(ibvf_pool_in_use(f->pool, g[i]));
	assert_true(ibvf_pool_in_use(f->pool, sm_only));
	for (int i = 3; i < 7; i++) {
		uint64_t n;

		snprintf(cid, sizeof(cid), "second%d", i);
		r = call(f, "prepare", prep_params(cid, pci_of(i), "0x0012"));
		assert_int_equal(f->code[0], 0);
		n = guid_of(r);
		for (int k = 0; k < 3; k++)
			if (n == g[k])
				fail_msg("GUID %016llx re-issued: VF %s still carries it",
					 (unsigned long long)n, pci_of(k));
		assert_true(n != sm_only);
		assert_int_equal(n, RANGE_START + (uint64_t)i + 1);
	}
	/* a record the rebuild adopted is never gc'ed: the runtime does not know its owner */
	{
		struct ibvf_alloc a = {.guid = g[0], .vf_index = 0, .n_pkeys = 1};
		struct ibvf_alloc got;

		a.pkeys[0] = 0x8012;
		snprintf(a.owner.container_id, sizeof(a.owner.container_id),
			 IBVF_POOL_ADOPTED_PREFIX "%016llx", (unsigned long long)g[0]);
		snprintf(a.owner.ifname, sizeof(a.owner.ifname), "adopted");
		snprintf(a.pci, sizeof(a.pci), "%s", pci_of(0));
		assert_int_equal(ibvf_pool_adopt(f->pool, &a, NULL, 0), 0);
		call(f, "gc", json_pack("{s:[]}", "valid"));
		assert_int_equal(f->code[0], 0);
		assert_int_equal(ibvf_pool_get(f->pool, g[0], &got, NULL, 0), 0);
		assert_int_equal(got.state, IBVF_ALLOC_HANDED);
		assert_int_equal(fv.vf[0].port, g[0]);
		assert_int_equal(fake_sm_has(f->sm, 0x12, g[0]), IBVF_MEMBER_FULL);
	}
	/* an explicit request for one of them is refused too */
	{
		struct ibvf_alloc_request req = {.vf_index = -1, .guid = g[1]};
		struct ibvf_alloc a;
		char err[512];

		snprintf(req.owner.container_id, sizeof(req.owner.container_id), "explicit");
		snprintf(req.owner.ifname, sizeof(req.owner.ifname), "net1");
		assert_int_equal(ibvf_pool_allocate(f->pool, &req, &a, err, sizeof(err)), -EEXIST);
		assert_non_null(strstr(err, "on a VF"));
	}
}

/* The reason status gives for @check in "not_ready", or NULL. */
static const char *not_ready_reason(json_t *status, const char *check)
{
	json_t *it;
	size_t i;

	json_array_foreach(json_object_get(status, "not_ready"), i, it)
	{
		if (!strcmp(json_string_value(json_object_get(it, "check")), check))
			return json_string_value(json_object_get(it, "reason"));
	}
	return NULL;
}

static void assert_has(const char *hay, const char *needle)
{
	if (!hay || !strstr(hay, needle))
		fail_msg("expected \"%s\" in \"%s\"", needle, hay ? hay : "(null)");
}

/*
 * A store whose writes fail (disk full, I/O error): status says so and
 * prepares are refused with the reason, until a write works again (the
 * periodic pass's probe, with no attach needed).
 */
static void test_store_failure_not_ready(void **state)
{
	struct fx *f = *state;
	json_t *r, *w;

	call(f, "prepare", prep_params("s1", pci_of(30), "0x0012"));
	assert_int_equal(f->code[0], 0);
	r = call(f, "status", NULL);
	assert_true(json_is_true(json_object_get(r, "ready")));
	assert_int_equal(json_array_size(json_object_get(r, "not_ready")), 0);
	w = json_object_get(json_object_get(r, "store"), "last_write");
	assert_true(json_is_true(json_object_get(w, "ok")));
	assert_true(json_integer_value(json_object_get(w, "at_ms")) > 0);

	__atomic_store_n(&store_fault, -ENOSPC, __ATOMIC_SEQ_CST);
	call(f, "prepare", prep_params("s2", pci_of(31), "0x0012"));
	assert_int_not_equal(f->code[0], 0);
	r = call(f, "status", NULL);
	assert_false(json_is_true(json_object_get(r, "ready")));
	assert_has(not_ready_reason(r, "store"), "the last write to the GUID pool store failed");
	assert_has(not_ready_reason(r, "store"), "pool.db");
	assert_false(json_is_true(json_object_get(json_object_get(r, "store"), "ok")));
	w = json_object_get(json_object_get(r, "store"), "last_write");
	assert_false(json_is_true(json_object_get(w, "ok")));
	assert_int_equal(json_integer_value(json_object_get(w, "errno")), EIO);
	assert_has(json_string_value(json_object_get(w, "error")), "(injected)");
	/* the SM is fine: only the store is named */
	assert_null(not_ready_reason(r, "sm"));
	assert_true(json_is_true(json_object_get(json_object_get(r, "backend"), "ok")));
	call(f, "prepare", prep_params("s3", pci_of(32), "0x0012"));
	expect_error(f, IBVF_RPC_NOT_READY, "validate");
	assert_has(f->msg[0], "ibvfd is not ready: store: ");
	/* the store is still failing: the periodic pass's probe fails too */
	ibvf_engine_reconcile_async(f->e);
	drain(f);
	usleep(100000);
	r = call(f, "status", NULL);
	assert_false(json_is_true(json_object_get(r, "ready")));

	/* it works again: the next periodic pass shows it */
	__atomic_store_n(&store_fault, 0, __ATOMIC_SEQ_CST);
	ibvf_engine_reconcile_async(f->e);
	for (int i = 0; i < 500; i++) {
		r = call(f, "status", NULL);
		if (json_is_true(json_object_get(r, "ready")))
			break;
		usleep(10000);
	}
	assert_true(json_is_true(json_object_get(r, "ready")));
	assert_int_equal(json_array_size(json_object_get(r, "not_ready")), 0);
	w = json_object_get(json_object_get(r, "store"), "last_write");
	assert_true(json_is_true(json_object_get(w, "ok")));
	assert_true(json_integer_value(
			    json_object_get(json_object_get(r, "store"), "write_failures")) >= 2);
	call(f, "prepare", prep_params("s3", pci_of(32), "0x0012"));
	assert_int_equal(f->code[0], 0);
}

/*
 * An SM that fails its add calls (every OpenSM write failing, UFM refusing
 * changes) while validate() still passes: status says so and prepares are
 * refused, until a validate() after the failure passes or an add succeeds.
 */
static void test_sm_failure_not_ready(void **state)
{
	struct fx *f = *state;
	json_t *r, *c;

	f->ctl->fail_add = 1000;
	f->ctl->fail_errno = -EIO; /* permanent: one attempt */
	call(f, "prepare", prep_params("m1", pci_of(33), "0x0012"));
	expect_error(f, IBVF_RPC_SM_ERROR, "sm_add");
	r = call(f, "status", NULL);
	assert_false(json_is_true(json_object_get(r, "ready")));
	assert_has(not_ready_reason(r, "sm_call"), "the last SM add call (PKey 0x0012, 1 GUID(s))");
	assert_has(not_ready_reason(r, "sm_call"), "injected add failure");
	assert_null(not_ready_reason(r, "store"));
	c = json_object_get(json_object_get(r, "backend"), "last_add");
	assert_false(json_is_true(json_object_get(c, "ok")));
	assert_int_equal(json_integer_value(json_object_get(c, "errno")), EIO);
	assert_string_equal(json_string_value(json_object_get(c, "pkey")), "0x0012");
	assert_true(json_integer_value(json_object_get(c, "at_ms")) > 0);
	/* the rollback's remove succeeded: that does not make the SM healthy */
	c = json_object_get(json_object_get(r, "backend"), "last_remove");
	assert_true(json_is_true(json_object_get(c, "ok")));
	call(f, "prepare", prep_params("m2", pci_of(34), "0x0012"));
	expect_error(f, IBVF_RPC_NOT_READY, "validate");
	assert_has(f->msg[0], "sm_call: ");

	/* a validate() after the failure passes: prepares may try again (and fail again) */
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	r = call(f, "status", NULL);
	assert_true(json_is_true(json_object_get(r, "ready")));
	call(f, "prepare", prep_params("m2", pci_of(34), "0x0012"));
	expect_error(f, IBVF_RPC_SM_ERROR, "sm_add");
	assert_false(ibvf_engine_ready(f->e));

	/* the SM takes changes again */
	f->ctl->fail_add = 0;
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	call(f, "prepare", prep_params("m2", pci_of(34), "0x0012"));
	assert_int_equal(f->code[0], 0);
	r = call(f, "status", NULL);
	assert_true(json_is_true(json_object_get(r, "ready")));
	c = json_object_get(json_object_get(r, "backend"), "last_add");
	assert_true(json_is_true(json_object_get(c, "ok")));
	assert_null(json_object_get(c, "error"));
}

/* Stop: new calls are refused with BUSY. */
static void test_stop(void **state)
{
	struct fx *f = *state;

	ibvf_engine_stop(f->e);
	call(f, "status", NULL);
	expect_error(f, IBVF_RPC_BUSY, NULL);
}

/* pool.allocate / pool.release: ibvfctl's pool changes while ibvfd runs (api_pool.c). */
static void test_pool_methods(void **state)
{
	struct fx *f = *state;
	char gs[IBVF_GUID_STR_LEN];
	json_t *r;
	uint64_t g, gp;

	r = call(f, "pool.allocate",
		 json_pack("{s:o,s:[{s:s,s:s}]}", "owner", owner("adm", "net1"), "pkeys", "pkey",
			   "0x0012", "membership", "limited"));
	assert_int_equal(f->code[0], 0);
	g = guid_of(r);
	assert_true(g >= RANGE_START && g <= RANGE_END);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "allocated");
	assert_int_equal(json_integer_value(json_object_get(r, "vf_index")), -1);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(r, "pkeys"), 0), "membership")),
			    "limited");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(r, "owner"), "pod_name")), "pod");
	assert_int_equal(store_state(f, g), IBVF_ALLOC_ALLOCATED);
	assert_int_equal(fake_sm_count(f->sm), 0); /* recorded only: no SM, no VF */
	/* the same owner: the same record */
	r = call(f, "pool.allocate", json_pack("{s:o}", "owner", owner("adm", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(guid_of(r), g);
	/* another owner asking for that GUID: conflict, named */
	r = call(f, "pool.allocate",
		 json_pack("{s:o,s:s}", "owner", owner("thief", "net1"), "guid",
			   ibvf_guid_format(g, gs)));
	expect_error(f, IBVF_RPC_GUID_CONFLICT, "allocate");
	assert_non_null(strstr(f->msg[0], "held by container adm"));
	/* parameters: refused before any work */
	r = call(f, "pool.allocate", json_object());
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");
	r = call(f, "pool.allocate",
		 json_pack("{s:o,s:[{s:s}]}", "owner", owner("x", "net1"), "pkeys", "pkey",
			   "0x7fff"));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");
	r = call(f, "pool.allocate", json_pack("{s:o}", "owner", owner("has space", "net1")));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "allocate");
	r = call(f, "pool.release", json_object());
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");
	r = call(f, "pool.release", json_pack("{s:s}", "guid", "zz"));
	expect_error(f, IBVF_RPC_INVALID_PARAMS, "validate");

	/* release of the reservation: quarantine */
	r = call(f, "pool.release", json_pack("{s:s}", "guid", ibvf_guid_format(g, gs)));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_true(json_is_true(json_object_get(r, "quarantined")));
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	r = call(f, "pool.release", json_pack("{s:s}", "guid", ibvf_guid_format(g, gs)));
	assert_int_equal(f->code[0], 0);
	assert_false(json_is_true(json_object_get(r, "released")));

	/* release of an attached GUID: walked back as release does */
	r = call(f, "prepare", prep_params("c1", pci_of(0), "0x0012"));
	assert_int_equal(f->code[0], 0);
	gp = guid_of(r);
	assert_int_equal(fake_sm_has(f->sm, 0x12, gp), IBVF_MEMBER_FULL);
	r = call(f, "pool.release", json_pack("{s:s}", "guid", ibvf_guid_format(gp, gs)));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_false(json_is_true(json_object_get(r, "sm_removal_pending")));
	assert_int_equal(fake_sm_has(f->sm, 0x12, gp), -1);
	assert_int_equal(fv.vf[0].port, 0x1122334455667700ull);
	assert_int_equal(store_state(f, gp), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(ibvf_engine_inflight(f->e), 0);

	/* a stopping engine takes no new pool calls */
	ibvf_engine_stop(f->e);
	r = call(f, "pool.allocate", json_pack("{s:o}", "owner", owner("late", "net1")));
	expect_error(f, IBVF_RPC_BUSY, NULL);
	(void)r;
}

/* ------------------------------------ issue 15 item 7: release without DEL -- */

/* An API socket (the spool is next to it) outside the fixture's directory. */
static char spool_base[64];
static int spool_sock = -1;

static int setup_spool(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char extra[192];
	struct fx *f;

	snprintf(spool_base, sizeof(spool_base), "/tmp/ibvf-spool-XXXXXX");
	assert_non_null(mkdtemp(spool_base));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ibvfd.sock", spool_base);
	spool_sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(spool_sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(extra, sizeof(extra), ", \"api\": {\"socket\": \"%s\"}", sa.sun_path);
	setup_opts(state, extra, 3);
	f = *state;
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	return 0;
}

static int teardown_spool(void **state)
{
	char cmd[128];

	close(spool_sock);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", spool_base);
	assert_int_equal(system(cmd), 0);
	return teardown(state);
}

static int spool_count(void *arg, const char *name, const struct ibvf_release_req *r)
{
	(void)name;
	(void)r;
	(*(int *)arg)++;
	return 0;
}

static uint64_t attach_one(struct fx *f, const char *cid, int vf)
{
	json_t *r = call(f, "prepare", prep_params(cid, pci_of(vf), "0x0016"));
	uint64_t g;

	assert_int_equal(f->code[0], 0);
	g = guid_of(r);
	call(f, "commit", json_pack("{s:o}", "owner", owner(cid, "net1")));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_HANDED);
	return g;
}

/*
 * The plugin's DEL found ibvfd down and left a request: ibvfd applies it
 * (GUID quarantined, VF reset, SM membership removed, request gone), never
 * to a newer attachment of the same container and ifname, and drops a file
 * that is not a request.
 */
static void test_release_spool(void **state)
{
	struct fx *f = *state;
	struct ibvf_release_req rq = {.created_ms = ibvf_wall_ms() + 1000};
	char dir[128], junk[160], err[IBVF_ERR_LEN];
	struct ibvf_alloc newer;
	uint64_t g, g2;
	int n = 0;

	g = attach_one(f, "gone", 50);
	g2 = attach_one(f, "again", 51);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), IBVF_MEMBER_FULL);
	snprintf(dir, sizeof(dir), "%s/release.d", spool_base);
	snprintf(rq.container_id, sizeof(rq.container_id), "gone");
	snprintf(rq.ifname, sizeof(rq.ifname), "net1");
	snprintf(rq.network, sizeof(rq.network), "net-a");
	rq.guid = g;
	assert_int_equal(ibvf_spool_write(dir, &rq, err, sizeof(err)), 0);
	/* a request older than the attachment it would hit: a DEL before this ADD */
	assert_int_equal(ibvf_pool_get(f->pool, g2, &newer, NULL, 0), 0);
	snprintf(rq.container_id, sizeof(rq.container_id), "again");
	rq.guid = 0;
	rq.created_ms = newer.created_ms - 1000;
	assert_int_equal(ibvf_spool_write(dir, &rq, err, sizeof(err)), 0);
	snprintf(junk, sizeof(junk), "%s/junk.json", dir);
	{
		FILE *fp = fopen(junk, "w");

		assert_non_null(fp);
		fputs("{\"version\": 9}", fp);
		fclose(fp);
	}

	assert_int_equal(ibvf_engine_apply_spool(f->e, err, sizeof(err)), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fv.vf[50].port, 0); /* its pre-attach GUID */
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(store_state(f, g2), IBVF_ALLOC_HANDED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g2), IBVF_MEMBER_FULL);
	assert_int_equal(ibvf_spool_scan(dir, spool_count, &n, NULL, 0), 0);
	assert_int_equal(n, 0);
	/* nothing left: a second pass does nothing */
	assert_int_equal(ibvf_engine_apply_spool(f->e, err, sizeof(err)), 0);
}

/*
 * A release request in the spool for an owner ibvfd reserves (a DEL of a
 * container ID "ibvf-adopted-<guid>" or "ibvf-warm-<pci>" while ibvfd was
 * down, or a file written by hand): dropped, the record that carries that
 * name (an adopted Pod's GUID, a warm VF) is left alone.
 */
static void test_release_spool_reserved(void **state)
{
	struct fx *f = *state;
	struct ibvf_release_req rq = {.created_ms = ibvf_wall_ms() + 1000};
	struct ibvf_alloc a = {.guid = RANGE_START + 100, .vf_index = 52, .n_pkeys = 1};
	char dir[128], err[IBVF_ERR_LEN];
	int n = 0;

	a.pkeys[0] = 0x8016;
	snprintf(a.owner.container_id, sizeof(a.owner.container_id),
		 IBVF_POOL_ADOPTED_PREFIX "%016llx", (unsigned long long)a.guid);
	snprintf(a.owner.ifname, sizeof(a.owner.ifname), "adopted");
	snprintf(a.pci, sizeof(a.pci), "%s", pci_of(52));
	assert_int_equal(ibvf_pool_adopt(f->pool, &a, NULL, 0), 0);
	snprintf(dir, sizeof(dir), "%s/release.d", spool_base);
	snprintf(rq.container_id, sizeof(rq.container_id), "%s", a.owner.container_id);
	snprintf(rq.ifname, sizeof(rq.ifname), "adopted");
	snprintf(rq.network, sizeof(rq.network), "net-a");
	assert_int_equal(ibvf_spool_write(dir, &rq, err, sizeof(err)), 0);

	assert_int_equal(ibvf_engine_apply_spool(f->e, err, sizeof(err)), 0);
	assert_int_equal(store_state(f, a.guid), IBVF_ALLOC_HANDED);
	assert_int_equal(ibvf_spool_scan(dir, spool_count, &n, NULL, 0), 0);
	assert_int_equal(n, 0); /* the request is gone */
}

/* A handed VF whose netdev is in the host netns again (the Pod is gone): released. */
static void test_handed_in_host(void **state)
{
	struct fx *f = *state;
	json_t *dry = json_array(), *fnd = json_array(), *it;
	uint64_t g = attach_one(f, "podgone", 52), alive = attach_one(f, "alive", 53);
	bool seen = false;
	size_t i;

	pthread_mutex_lock(&fv.lock);
	fv.vf[52].host_netdev = true;
	pthread_mutex_unlock(&fv.lock);
	/* audit (dry run): reported, nothing touched */
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_DRY_RUN, dry, NULL, 0) >= 1);
	json_array_foreach(dry, i, it)
	{
		const char *k = json_string_value(json_object_get(it, "kind"));

		seen |= k && !strcmp(k, "handed-in-host");
	}
	assert_true(seen);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_HANDED);
	/* a pass releases it, and only it */
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0) >= 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fv.vf[52].port, 0);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(store_state(f, alive), IBVF_ALLOC_HANDED);
	json_decref(dry);
	json_decref(fnd);
}

/*
 * Every step named in @want is in @r's "timing", in this order, none
 * negative; their sum is at most "total" (issue 17: per-step timestamps).
 */
static void assert_timing(json_t *r, const char *const *want)
{
	json_t *t = json_object_get(r, "timing"), *v;
	double sum = 0, total;
	const char *k;
	size_t i = 0;

	assert_non_null(t);
	total = json_real_value(json_object_get(t, "total"));
	json_object_foreach(t, k, v)
	{
		assert_true(json_is_real(v));
		assert_true(json_real_value(v) >= 0);
		if (!strcmp(k, "total"))
			continue;
		sum += json_real_value(v);
		if (want[i] && !strcmp(k, want[i]))
			i++;
	}
	if (want[i])
		fail_msg("timing %s: step %s missing or out of order", json_dumps(t, JSON_COMPACT),
			 want[i]);
	assert_true(sum <= total + 0.01);
}

static void test_timing(void **state)
{
	static const char *const prep[] = {
		"queue",     "vf_lookup",	 "store_read",	"store_allocate",
		"sm_check",  "vf_program",	 "sm_add_wait", "sm_add",
		"port_wait", "store_port_ready", "reply_queue", NULL};
	static const char *const commit[] = {"queue", "store_read", "store_handed", NULL};
	static const char *const release[] = {"queue",		"store_read",	 "store_releasing",
					      "sm_remove_wait", "sm_remove",	 "sm_verify",
					      "vf_reset",	"store_release", NULL};
	struct fx *f = *state;
	json_t *r;

	fv.port_delay_ms = 30;
	r = call(f, "prepare", prep_params("c1", pci_of(0), "0x0012"));
	fv.port_delay_ms = 0;
	assert_int_equal(f->code[0], 0);
	assert_timing(r, prep);
	/* the port wait's time is the port wait's, not another step's */
	assert_true(json_real_value(json_object_get(json_object_get(r, "timing"), "port_wait")) >=
		    30);
	/* the batch's 20 ms minimum window (sm.batch_window_ms here) is the wait, not the call */
	assert_true(json_real_value(json_object_get(json_object_get(r, "timing"), "sm_add_wait")) >=
		    15);
	assert_true(json_real_value(json_object_get(json_object_get(r, "timing"), "sm_add")) <
		    json_real_value(json_object_get(json_object_get(r, "timing"), "sm_add_wait")));
	r = call(f, "commit", json_pack("{s:o}", "owner", owner("c1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_timing(r, commit);
	r = call(f, "release", json_pack("{s:o}", "owner", owner("c1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_timing(r, release);
	/* nothing held: still timed */
	r = call(f, "release", json_pack("{s:o}", "owner", owner("c1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_non_null(json_object_get(json_object_get(r, "timing"), "total"));
}

/*
 * Records in state @st that pool.db alone holds (a copy without its WAL,
 * opened immutable): what survives a destroyed WAL.
 */
static int in_db_without_wal(struct fx *f, enum ibvf_alloc_state st)
{
	char src[300], dst[300], uri[320], cmd[700];
	sqlite3 *db;
	sqlite3_stmt *q;
	int n = -1;

	snprintf(src, sizeof(src), "%s/pool.db", f->cfg.state_dir);
	snprintf(dst, sizeof(dst), "%s/copy.db", f->dir);
	snprintf(cmd, sizeof(cmd), "cp %s %s", src, dst);
	assert_int_equal(system(cmd), 0);
	snprintf(uri, sizeof(uri), "file:%s?immutable=1", dst);
	assert_int_equal(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL),
			 SQLITE_OK);
	assert_int_equal(
		sqlite3_prepare_v2(db, "SELECT count(*) FROM alloc WHERE state = ?", -1, &q, NULL),
		SQLITE_OK);
	sqlite3_bind_int(q, 1, (int)st);
	if (sqlite3_step(q) == SQLITE_ROW)
		n = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	unlink(dst);
	return n;
}

static int setup_checkpoint(void **state)
{
	checkpoint_ms = 1500; /* the three attaches fit in it even on a loaded machine */
	return setup(state);
}

static int teardown_checkpoint(void **state)
{
	checkpoint_ms = 0;
	return teardown(state);
}

/*
 * Issue 17: hand-overs do not each pay a WAL checkpoint under the pool's
 * mutex; one checkpoint at the end of a window (1.5 s here) puts all of
 * the window's handed records into pool.db (issue 14's bound).
 */
static void test_checkpoint_window(void **state)
{
	struct fx *f = *state;
	int n = 0;

	for (int i = 0; i < 3; i++) {
		char cid[8];

		snprintf(cid, sizeof(cid), "k%d", i);
		call(f, "prepare", prep_params(cid, pci_of(i), "0x0012"));
		assert_int_equal(f->code[0], 0);
		call(f, "commit", json_pack("{s:o}", "owner", owner(cid, "net1")));
		assert_int_equal(f->code[0], 0);
	}
	/* the three commits were answered without a checkpoint each */
	assert_int_equal(in_db_without_wal(f, IBVF_ALLOC_HANDED), 0);
	for (int i = 0; i < 200 && n < 3; i++) {
		struct ibvf_timer *t = ibvf_loop_timer(
			f->loop, 50, 0, (ibvf_timer_cb)(void (*)(void))ibvf_loop_quit, NULL);

		ibvf_loop_run(f->loop);
		ibvf_timer_free(t);
		n = in_db_without_wal(f, IBVF_ALLOC_HANDED);
	}
	/* one deferred checkpoint took all three into pool.db */
	assert_int_equal(n, 3);
}

/* ------------------------------------------------------------ warm VFs -- */

static int setup_warm(void **state)
{
	int ret;

	warm_on = true;
	ret = setup(state);
	warm_on = false;
	return ret;
}

/* a compatibility-mode Pod's CNI cache entry naming VF 2 (setup_warm_compat) */
static char compat_cache[64];

static int setup_warm_compat(void **state)
{
	char path[128], extra[160];
	FILE *fp;
	int ret;

	snprintf(compat_cache, sizeof(compat_cache), "/tmp/ibvf-attach-cni-XXXXXX");
	assert_non_null(mkdtemp(compat_cache));
	snprintf(path, sizeof(path), "%s/0c5d-net1", compat_cache);
	fp = fopen(path, "w");
	assert_non_null(fp);
	/* ib-kubernetes' GUID, outside ibvf's ranges; the RDMA device stayed in the host */
	fprintf(fp,
		"{\"cniVersion\": \"1.0.0\", \"type\": \"ib-sriov\", \"deviceID\": \"%s\", "
		"\"ibvf\": {\"version\": 1, \"mode\": \"compat\", \"guid\": "
		"\"02:00:00:00:00:00:99:01\"}}",
		pci_of(2));
	fclose(fp);
	snprintf(extra, sizeof(extra), ", \"daemon\": {\"cni_cache_dir\": \"%s\"}", compat_cache);
	warm_on = true;
	ret = setup_opts(state, extra, 3);
	warm_on = false;
	if (!ret) {
		struct fx *f = *state;

		assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
		assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	}
	return ret;
}

/*
 * setup_warm_compat, with the cache directory's mtime a minute old (so the
 * warm pass trusts the listing it takes at the first free VF) and an entry
 * naming VF 3 written when the pass looks VF 3 up, after that listing.
 */
static int setup_warm_race(void **state)
{
	struct timespec old[2];
	char path[128], extra[160];
	FILE *fp;
	int ret;

	snprintf(compat_cache, sizeof(compat_cache), "/tmp/ibvf-attach-cni-XXXXXX");
	assert_non_null(mkdtemp(compat_cache));
	snprintf(path, sizeof(path), "%s/0c5d-net1", compat_cache);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fprintf(fp, "{\"cniVersion\": \"1.0.0\", \"type\": \"ib-sriov\", \"deviceID\": \"%s\"}",
		pci_of(2));
	fclose(fp);
	clock_gettime(CLOCK_REALTIME, &old[0]);
	old[0].tv_sec -= 60;
	old[1] = old[0];
	assert_int_equal(utimensat(AT_FDCWD, compat_cache, old, 0), 0);
	snprintf(race_dir, sizeof(race_dir), "%s", compat_cache);
	snprintf(race_pci, sizeof(race_pci), "%s", pci_of(3));
	race_vf = 3;
	snprintf(extra, sizeof(extra), ", \"daemon\": {\"cni_cache_dir\": \"%s\"}", compat_cache);
	warm_on = true;
	ret = setup_opts(state, extra, 3);
	warm_on = false;
	if (!ret) {
		struct fx *f = *state;

		assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
		assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	}
	return ret;
}

static int teardown_warm_compat(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", compat_cache);
	assert_int_equal(system(cmd), 0);
	return teardown(state);
}

/* Run the loop for @ms (workers and the SM thread go on meanwhile). */
static void spin(struct fx *f, int ms)
{
	struct ibvf_timer *t = ibvf_loop_timer(f->loop, (uint64_t)ms, 0,
					       (ibvf_timer_cb)(void (*)(void))ibvf_loop_quit, NULL);

	ibvf_loop_run(f->loop);
	ibvf_timer_free(t);
}

/* Until status says @n VFs are warm and none is being warmed (10 s at most). */
static void wait_warm(struct fx *f, uint64_t n)
{
	uint64_t ready = 0, warming = 1;

	for (int i = 0; i < 500; i++) {
		json_t *r = call(f, "status", json_object());
		json_t *w = json_object_get(r, "warm");

		assert_true(json_is_true(json_object_get(w, "enabled")));
		ready = (uint64_t)json_integer_value(json_object_get(w, "ready"));
		warming = (uint64_t)json_integer_value(json_object_get(w, "warming"));
		if (ready == n && !warming)
			return;
		spin(f, 20);
	}
	fail_msg("warm VFs: %llu ready, %llu warming, expected %llu", (unsigned long long)ready,
		 (unsigned long long)warming, (unsigned long long)n);
}

static json_t *prep_nolink(const char *cid, const char *pci, const char *pkey)
{
	return json_pack("{s:o,s:s,s:[{s:s,s:s}]}", "owner", owner(cid, "net1"), "pci", pci,
			 "pkeys", "pkey", pkey, "membership", "full");
}

/* Every fake VF carries a distinct GUID, and no warm GUID is in a tenant PKey. */
static void assert_warm_sane(struct fx *f)
{
	for (int i = 0; i < N_VFS; i++) {
		struct ibvf_alloc a;

		for (int j = 0; j < i; j++)
			if (fv.vf[i].port && fv.vf[i].port == fv.vf[j].port)
				fail_msg("GUID %016llx on VF %d and VF %d",
					 (unsigned long long)fv.vf[i].port, j, i);
		if (ibvf_pool_find_pci(f->pool, pci_of(i), &a, NULL, 0) == 0 &&
		    !strncmp(a.owner.container_id, IBVF_POOL_WARM_PREFIX,
			     strlen(IBVF_POOL_WARM_PREFIX)))
			for (uint16_t pk = 1; pk < 0x40; pk++)
				assert_int_equal(fake_sm_has(f->sm, pk, a.guid), -1);
	}
}

/*
 * A VF the CNI cache names is in a Pod ibvfd does not hold (compatibility
 * mode: ib-kubernetes' networks while ibvfd runs): the warm pass never
 * re-GUIDs or rebinds it, whatever its GUID (issue 17 item 3 x issue 15).
 */
static void test_warm_skips_compat_vf(void **state)
{
	struct fx *f = *state;
	struct ibvf_alloc a;

	wait_warm(f, N_VFS - 1);
	assert_int_equal(fv.program_calls, N_VFS - 1);
	assert_true(fv.vf[2].port == 0); /* untouched */
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(2), &a, NULL, 0), -ENOENT);
	assert_true(fv.vf[1].port >= RANGE_START && fv.vf[1].port <= RANGE_END);
}

/*
 * The warm pass reads the CNI cache once, but an entry written after that
 * (a compatibility-mode ADD of VF 3 while the pass runs) is seen before VF 3
 * is touched: VF 3 is not warmed, like VF 2.
 */
static void test_warm_cache_race(void **state)
{
	struct fx *f = *state;
	struct ibvf_alloc a;

	wait_warm(f, N_VFS - 2);
	assert_int_equal(race_vf, -1); /* the entry was written during the pass */
	assert_int_equal(fv.program_calls, N_VFS - 2);
	assert_true(fv.vf[2].port == 0 && fv.vf[3].port == 0); /* untouched */
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(3), &a, NULL, 0), -ENOENT);
	assert_true(fv.vf[4].port >= RANGE_START && fv.vf[4].port <= RANGE_END);
}

/*
 * vf.warm (issue 17 item 3): after start-up every free VF carries a fresh
 * pool GUID, port ACTIVE, recorded as warm. ADD takes it: no program call
 * (no GUID set, no rebind), only the SM push and the port wait. DEL removes
 * the membership, quarantines the GUID and answers before the VF is
 * touched; the next warm pass gives the VF a NEW GUID.
 */
static void test_warm_add_del(void **state)
{
	struct fx *f = *state;
	unsigned programs;
	uint64_t warm_g, g, next;
	struct ibvf_alloc a;
	json_t *r;

	wait_warm(f, N_VFS);
	assert_int_equal(fv.program_calls, N_VFS);
	warm_g = fv.vf[1].port;
	assert_true(warm_g >= RANGE_START && warm_g <= RANGE_END);
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(1), &a, NULL, 0), 0);
	assert_int_equal(a.guid, warm_g);
	assert_int_equal(a.state, IBVF_ALLOC_PORT_READY);
	assert_int_equal(a.n_pkeys, 0);
	/* VF 0's pre-warm GUID is kept for a cold release */
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(0), &a, NULL, 0), 0);
	assert_int_equal(a.prev_port_guid, 0x1122334455667700ull);
	assert_warm_sane(f);

	programs = fv.program_calls;
	r = call(f, "prepare", prep_nolink("w1", pci_of(1), "0x0012"));
	assert_int_equal(f->code[0], 0);
	g = guid_of(r);
	assert_int_equal(g, warm_g);
	assert_int_equal(fv.program_calls, programs); /* no unbind/bind, no GUID set */
	assert_string_equal(json_string_value(json_object_get(r, "state")), "port_ready");
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_FULL);
	assert_int_equal(ibvf_pool_find_owner(f->pool, "w1", "net1", &a, NULL, 0), 0);
	assert_int_equal(a.guid, g);
	assert_string_equal(a.owner.pod_name, "pod");
	r = call(f, "commit", json_pack("{s:o}", "owner", owner("w1", "net1")));
	assert_int_equal(f->code[0], 0);

	/* DEL: membership gone, GUID quarantined, the VF not touched on the way */
	r = call(f, "release", json_pack("{s:o}", "owner", owner("w1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	/* ... then re-GUIDed off the DEL's path */
	wait_warm(f, N_VFS);
	assert_int_equal(fv.program_calls, programs + 1);
	next = fv.vf[1].port;
	assert_true(next != g && next >= RANGE_START && next <= RANGE_END);
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(1), &a, NULL, 0), 0);
	assert_int_equal(a.guid, next);
	assert_int_equal(a.state, IBVF_ALLOC_PORT_READY);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_warm_sane(f);

	/* a second tenant on that VF never gets the first one's GUID */
	programs = fv.program_calls;
	r = call(f, "prepare", prep_nolink("w2", pci_of(1), "0x0013"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(guid_of(r), next);
	assert_int_equal(fv.program_calls, programs);
}

/*
 * The cold path stays for what a warm VF cannot give: a requested GUID and
 * another link state (the VF is programmed, the warm GUID is quarantined and
 * never handed to the tenant).
 */
static void test_warm_cold_paths(void **state)
{
	struct fx *f = *state;
	unsigned programs;
	uint64_t warm_g;
	json_t *r;

	wait_warm(f, N_VFS);
	warm_g = fv.vf[2].port;
	programs = fv.program_calls;
	r = call(f, "prepare",
		 json_pack("{s:o,s:s,s:[{s:s,s:s}],s:s}", "owner", owner("c2", "net1"), "pci",
			   pci_of(2), "pkeys", "pkey", "0x0013", "membership", "limited", "guid",
			   "0x0002c90300a0f100"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(guid_of(r), 0x0002c90300a0f100ull);
	assert_int_equal(fv.program_calls, programs + 1);
	assert_int_equal(store_state(f, warm_g), IBVF_ALLOC_QUARANTINED);

	warm_g = fv.vf[3].port;
	r = call(f, "prepare", prep_params("c3", pci_of(3), "0x0012")); /* link "enable" */
	assert_int_equal(f->code[0], 0);
	assert_true(guid_of(r) != warm_g);
	assert_int_equal(fv.program_calls, programs + 2);
	assert_string_equal(fv.vf[3].link, "enable");
	assert_int_equal(store_state(f, warm_g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x12, warm_g), -1);
	/* gc never releases a warm VF: it is no runtime's */
	r = call(f, "gc", json_pack("{s:[]}", "valid"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(store_state(f, fv.vf[4].port), IBVF_ALLOC_PORT_READY);
	assert_warm_sane(f);
}

/*
 * Crash during warm-up (kill -9 between "allocated" and "port_ready"): the
 * next start's reconciliation leaves the half-warm record to the warm pass
 * (a notice, not a problem; no tenant's GUID or PKey is in it), which
 * finishes it: the VF carries it, port_ready, nothing on two VFs.
 */
static void test_warm_crash(void **state)
{
	struct fx *f = *state;
	struct ibvf_alloc_request req = {.vf_index = 5};
	struct ibvf_alloc half, a;

	wait_warm(f, N_VFS);
	ibvf_engine_free(f->e);
	/* the store and VF 5 as a kill -9 after the GUID set leaves them */
	open_engine(f);
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(5), &a, NULL, 0), 0);
	assert_int_equal(ibvf_pool_release(f->pool, a.guid, NULL, 0), 0);
	snprintf(req.owner.container_id, sizeof(req.owner.container_id), "%s%s",
		 IBVF_POOL_WARM_PREFIX, "0000-03-01.5");
	snprintf(req.owner.ifname, sizeof(req.owner.ifname), "%s", IBVF_POOL_WARM_IFNAME);
	req.pci = pci_of(5);
	req.pf = "ib0";
	assert_int_equal(ibvf_pool_allocate(f->pool, &req, &half, NULL, 0), 0);
	fv.vf[5].port = fv.vf[5].node = half.guid;
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0), 0);
	wait_warm(f, N_VFS);
	assert_int_equal(fv.vf[5].port, half.guid);
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(5), &a, NULL, 0), 0);
	assert_int_equal(a.state, IBVF_ALLOC_PORT_READY);
	assert_int_equal(a.guid, half.guid);

	/* a release's new warm GUID recorded, the VF still on the old one (crash
	 * before the warm pass): finished the same way, the old one quarantined */
	ibvf_engine_free(f->e);
	open_engine(f);
	assert_int_equal(ibvf_pool_release(f->pool, half.guid, NULL, 0), 0);
	assert_int_equal(ibvf_pool_allocate(f->pool, &req, &a, NULL, 0), 0);
	assert_true(a.guid != half.guid);
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0), 0);
	wait_warm(f, N_VFS);
	assert_int_equal(fv.vf[5].port, a.guid);
	assert_int_equal(store_state(f, half.guid), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(store_state(f, a.guid), IBVF_ALLOC_PORT_READY);
	assert_warm_sane(f);
	/* and a pass finds nothing left to do */
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0), 0);
}

/*
 * A rolled-back store brings back the warm record of a VF a Pod took (the SM
 * lists the GUID in the Pod's PKey): reconciliation adopts it for the Pod,
 * keeps the membership, and no other Pod's prepare gets that GUID.
 */
static void test_warm_in_sm_adopted(void **state)
{
	struct fx *f = *state;
	struct ibvf_alloc a;
	uint64_t g;
	json_t *r;

	wait_warm(f, N_VFS);
	g = fv.vf[6].port;
	fake_sm_put(f->sm, 0x12, g, true);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_FULL);
	assert_int_equal(ibvf_pool_get(f->pool, g, &a, NULL, 0), 0);
	assert_int_equal(strncmp(a.owner.container_id, IBVF_POOL_ADOPTED_PREFIX,
				 strlen(IBVF_POOL_ADOPTED_PREFIX)),
			 0);
	assert_int_equal(a.n_pkeys, 1);
	assert_string_equal(a.pci, pci_of(6));
	/* another Pod does not get that VF's GUID */
	r = call(f, "prepare", prep_nolink("other", pci_of(6), "0x0034"));
	assert_null(r);
	assert_int_equal(f->code[0], IBVF_RPC_VF_IN_USE);
}

/*
 * The Pod's GUID @t on VF @k in PKey 0x12, as `ibvfctl pool rebuild` adopts
 * it after a store loss: with the VF's PCI address, or (@sm_only) from the
 * SM alone, with none.
 */
static void adopt_pod(struct fx *f, int k, uint64_t t, bool sm_only)
{
	struct ibvf_alloc a = {.guid = t, .vf_index = sm_only ? -1 : k, .n_pkeys = 1};

	a.pkeys[0] = 0x8012;
	snprintf(a.owner.container_id, sizeof(a.owner.container_id),
		 IBVF_POOL_ADOPTED_PREFIX "%016llx", (unsigned long long)t);
	snprintf(a.owner.ifname, sizeof(a.owner.ifname), "adopted");
	if (!sm_only) {
		snprintf(a.pci, sizeof(a.pci), "%s", pci_of(k));
		snprintf(a.pf, sizeof(a.pf), "ib0");
	}
	assert_int_equal(ibvf_pool_adopt(f->pool, &a, NULL, 0), 0);
	fv.vf[k].port = fv.vf[k].node = t;
	fake_sm_put(f->sm, 0x12, t, true);
}

/* VF @k's warm row replaced by a release's new one, at "allocated" (into @w). */
static void warm_allocated(struct fx *f, int k, struct ibvf_alloc *w)
{
	struct ibvf_alloc_request req = {.vf_index = k, .no_owner_return = true};
	struct ibvf_alloc a;

	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(k), &a, NULL, 0), 0);
	assert_int_equal(ibvf_pool_release(f->pool, a.guid, NULL, 0), 0);
	snprintf(req.owner.container_id, sizeof(req.owner.container_id), "%s0000-03-01.%d",
		 IBVF_POOL_WARM_PREFIX, k);
	snprintf(req.owner.ifname, sizeof(req.owner.ifname), "%s", IBVF_POOL_WARM_IFNAME);
	req.pci = pci_of(k);
	req.pf = "ib0";
	assert_int_equal(ibvf_pool_allocate(f->pool, &req, w, NULL, 0), 0);
}

/*
 * A rolled-back store (a damaged WAL) brings back an older warm row of a VF
 * a Pod holds now, next to the record `ibvfctl pool rebuild` adopted for the
 * GUID the VF carries (the ibvfd-campaign-warm "leaked record" failure: the
 * warm pass took the stale row for its own and re-GUIDed the Pod's VF). The
 * warm row at port_ready (the VF was warm, a Pod attached cold later: VFs 4,
 * 6) or at allocated (a release's new warm GUID, the next Pod attached cold
 * before the warm pass: VFs 5, 7); the Pod's GUID adopted with the VF's PCI
 * address (4, 5) or from the SM alone (6, 7: bound to the VF in the pass's
 * VF step, after the records). Reconciliation drops the rows of VFs 4 and 5
 * (warm-stale) and binds the adoptions of 6 and 7, the warm pass drops the
 * rows of 6 and 7; no Pod's VF is touched, each keeps its GUID and its PKey,
 * and a second pass finds nothing. Then a take: another Pod's prepare for a
 * VF in that state is refused (VF in use), not run cold over the Pod's GUID.
 */
static void test_warm_stale_rollback(void **state)
{
	struct fx *f = *state;
	struct ibvf_alloc w[N_VFS], a;
	json_t *fnd = json_array();
	char *txt;
	int n;

	wait_warm(f, N_VFS);
	ibvf_engine_free(f->e);
	open_engine(f);
	for (int k = 4; k <= 7; k++) {
		if (k % 2)
			warm_allocated(f, k, &w[k]);
		else
			assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(k), &w[k], NULL, 0), 0);
		assert_int_equal(w[k].state, k % 2 ? IBVF_ALLOC_ALLOCATED : IBVF_ALLOC_PORT_READY);
		adopt_pod(f, k, RANGE_END - (uint64_t)k, k >= 6);
	}

	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0) >= 0);
	txt = json_dumps(fnd, 0);
	n = 0;
	for (const char *p = txt; (p = strstr(p, "\"warm-stale\"")); p++)
		n++;
	if (n != 2)
		fail_msg("%d warm-stale findings, expected 2 (VFs 4, 5): %s", n, txt);
	free(txt);
	json_decref(fnd);
	wait_warm(f, N_VFS - 4);
	for (int k = 4; k <= 7; k++) {
		uint64_t t = RANGE_END - (uint64_t)k;

		if (fv.vf[k].port != t)
			fail_msg("VF %d (a Pod's) carries %016llx, not the Pod's %016llx", k,
				 (unsigned long long)fv.vf[k].port, (unsigned long long)t);
		assert_int_equal(store_state(f, w[k].guid), IBVF_ALLOC_QUARANTINED);
		assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(k), &a, NULL, 0), 0);
		assert_int_equal(a.guid, t);
		assert_int_equal(fake_sm_has(f->sm, 0x12, t), IBVF_MEMBER_FULL);
	}
	assert_warm_sane(f);
	fnd = json_array();
	n = ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0);
	txt = json_dumps(fnd, 0);
	if (n)
		fail_msg("second pass: %s", txt);
	free(txt);
	json_decref(fnd);

	/*
	 * A prepare of another Pod for a VF in that state, before any pass or
	 * warm pass (warm VF 8 found by the take: its row is the older): in use,
	 * and the Pod's VF keeps its GUID (the take's cold path would re-GUID it)
	 */
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(8), &w[8], NULL, 0), 0);
	assert_true(ibvf_alloc_is_warm(&w[8]));
	adopt_pod(f, 8, RANGE_END - 8, false);
	assert_null(call(f, "prepare", prep_nolink("other", pci_of(8), "0x0034")));
	assert_int_equal(f->code[0], IBVF_RPC_VF_IN_USE);
	assert_int_equal(fv.vf[8].port, RANGE_END - 8);
	assert_int_equal(store_state(f, w[8].guid), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(8), &a, NULL, 0), 0);
	assert_int_equal(a.guid, RANGE_END - 8);
}

/*
 * vf.warm turned off (SIGHUP): the warm VFs are reset to their pre-warm
 * GUIDs and their GUIDs quarantined; prepare and release are then as before
 * (the ADD programs the VF, the DEL resets it).
 */
static void test_warm_off(void **state)
{
	struct fx *f = *state;
	struct ibvf_pool_stats st = {0};
	unsigned programs;
	json_t *r;

	wait_warm(f, N_VFS);
	f->cfg.vf.warm = false;
	ibvf_engine_reload(f->e, &f->cfg);
	for (int i = 0; i < 500; i++) {
		assert_int_equal(ibvf_pool_stats(f->pool, &st, NULL, 0), 0);
		if (!st.allocated)
			break;
		spin(f, 20);
	}
	assert_int_equal(st.allocated, 0);
	assert_int_equal(fv.vf[0].port, 0x1122334455667700ull);
	assert_int_equal(fv.vf[1].port, 0);
	programs = fv.program_calls;
	r = call(f, "prepare", prep_nolink("c-off", pci_of(1), "0x0012"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(fv.program_calls, programs + 1);
	r = call(f, "release", json_pack("{s:o}", "owner", owner("c-off", "net1")));
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_int_equal(fv.program_calls, programs + 2);
	assert_int_equal(fv.vf[1].port, 0);
}

/*
 * A lazy write lost (docs/pool.md, "Durability classes"; only an OS crash
 * can lose one): written back to the state before it, straight in the store
 * file, as the WAL on disk would have it. @state < 0 deletes the row and
 * gives the GUID back to the free list (a lost allocation).
 */
static void lose_write(struct fx *f, uint64_t g, int state)
{
	char path[300];
	sqlite3 *db;
	sqlite3_stmt *q;
	sqlite3_int64 k = (sqlite3_int64)(g ^ 0x8000000000000000ull);

	snprintf(path, sizeof(path), "%s/pool.db", f->cfg.state_dir);
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	if (state >= 0) {
		assert_int_equal(sqlite3_prepare_v2(db,
						    "UPDATE alloc SET state = ?, released_ms = 0 "
						    "WHERE guid = ?",
						    -1, &q, NULL),
				 SQLITE_OK);
		sqlite3_bind_int(q, 1, state);
		sqlite3_bind_int64(q, 2, k);
		assert_int_equal(sqlite3_step(q), SQLITE_DONE);
		assert_int_equal(sqlite3_changes(db), 1);
		sqlite3_finalize(q);
	} else {
		assert_int_equal(
			sqlite3_prepare_v2(db, "DELETE FROM alloc WHERE guid = ?1; ", -1, &q, NULL),
			SQLITE_OK);
		sqlite3_bind_int64(q, 1, k);
		assert_int_equal(sqlite3_step(q), SQLITE_DONE);
		assert_int_equal(sqlite3_changes(db), 1);
		sqlite3_finalize(q);
		assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO free_extent VALUES(?1, ?1)",
						    -1, &q, NULL),
				 SQLITE_OK);
		sqlite3_bind_int64(q, 1, k);
		assert_int_equal(sqlite3_step(q), SQLITE_DONE);
		sqlite3_finalize(q);
	}
	sqlite3_close(db);
}

/* The findings of a repair pass that name @g (and what the pass returned). */
static int repair_findings(struct fx *f, uint64_t g, const char *kind)
{
	json_t *fnd = json_array(), *it;
	int n = 0;
	size_t i;

	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0) >= 0);
	json_array_foreach(fnd, i, it)
	{
		uint64_t fg = 0;
		const char *k = json_string_value(json_object_get(it, "kind"));
		const char *gs = json_string_value(json_object_get(it, "guid"));

		if (gs && !ibvf_guid_parse(gs, &fg, NULL, 0) && fg == g) {
			n++;
			if (kind && strcmp(k, kind))
				fail_msg("finding %s for GUID %016llx, expected %s", k,
					 (unsigned long long)g, kind);
		}
	}
	json_decref(fnd);
	return n;
}

/*
 * store_handed lost: the record is back at port_ready. With the VF in the
 * Pod a pass keeps it as it keeps a handed one (no finding; VF, SM as they
 * were), and DEL releases it the same way. With the VF back in the host
 * (the Pod gone, no DEL) it is kept, not released by the pass as a handed
 * one is: its GUID stays held (never re-issued) with its owner's PKeys only,
 * until GC (or DEL) releases it, the same way.
 */
static void test_lazy_handed_lost(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "lz1", 54), g2 = attach_one(f, "lz2", 55), alive;
	unsigned programs;
	json_t *r;

	lose_write(f, g, IBVF_ALLOC_PORT_READY);
	programs = fv.program_calls;
	assert_int_equal(repair_findings(f, g, NULL), 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_PORT_READY);
	assert_int_equal(fv.vf[54].port, g);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), IBVF_MEMBER_FULL);
	assert_int_equal(fv.program_calls, programs);
	/* the SM lost its membership meanwhile: re-pushed as for a handed one */
	fake_sm_drop(f->sm, 0x16, g);
	assert_int_equal(repair_findings(f, g, "sm-missing"), 1);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), IBVF_MEMBER_FULL);
	/* DEL: as from handed */
	r = call(f, "release", json_pack("{s:o}", "owner", owner("lz1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(fv.vf[54].port, 0);

	/* the VF back in the host, the Pod gone without a DEL */
	lose_write(f, g2, IBVF_ALLOC_PORT_READY);
	pthread_mutex_lock(&fv.lock);
	fv.vf[55].host_netdev = true;
	pthread_mutex_unlock(&fv.lock);
	assert_int_equal(repair_findings(f, g2, NULL), 0);
	assert_int_equal(store_state(f, g2), IBVF_ALLOC_PORT_READY);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g2), IBVF_MEMBER_FULL);
	/* held: another Pod's attach gets another GUID */
	alive = attach_one(f, "lz3", 56);
	assert_true(alive != g2);
	/* the runtime's GC (lz3 valid, lz2 not): released as a handed one would be */
	r = call(f, "gc",
		 json_pack("{s:[{s:s,s:s}]}", "valid", "container_id", "lz3", "ifname", "net1"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(store_state(f, g2), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g2), -1);
	assert_int_equal(fv.vf[55].port, 0);
	assert_int_equal(store_state(f, alive), IBVF_ALLOC_HANDED);
}

/*
 * store_release lost: the record is back at "releasing" with the SM removal
 * and the VF reset done. A pass finishes the release (finding "releasing",
 * fixed): quarantined, the SM still without it, the VF not touched again.
 */
static void test_lazy_release_lost(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "lz4", 57);
	unsigned programs;
	json_t *r;

	r = call(f, "release", json_pack("{s:o}", "owner", owner("lz4", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	lose_write(f, g, IBVF_ALLOC_RELEASING);
	programs = fv.program_calls;
	assert_int_equal(repair_findings(f, g, "releasing"), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(fv.vf[57].port, 0);
	assert_int_equal(fv.program_calls, programs); /* not ours any more: no reset */
	assert_int_equal(repair_findings(f, g, NULL), 0);
}

/*
 * The warm release's lazy writes lost (vf.warm): the new warm row kept and
 * the old GUID's quarantine lost, or both lost. Either way a pass finishes
 * the old record (releasing -> quarantined, the VF reset when it still
 * carries it) and the warm pass then gives the VF a new warm GUID: the
 * VF ends warm on a GUID that is not the tenant's, as without a loss.
 */
static void test_lazy_warm_release_lost(void **state)
{
	struct fx *f = *state;

	for (int both = 0; both < 2; both++) {
		char cid[8];
		struct ibvf_alloc a;
		uint64_t g, nw;
		json_t *r;

		snprintf(cid, sizeof(cid), "wl%d", both);
		wait_warm(f, N_VFS);
		r = call(f, "prepare", prep_nolink(cid, pci_of(3), "0x0012"));
		assert_int_equal(f->code[0], 0);
		g = guid_of(r);
		call(f, "commit", json_pack("{s:o}", "owner", owner(cid, "net1")));
		assert_int_equal(f->code[0], 0);
		/* stop the warm pass from re-GUIDing VF 3 before the "crash" */
		ibvf_engine_free(f->e);
		open_engine(f);
		assert_int_equal(ibvf_pool_find_owner(f->pool, cid, "net1", &a, NULL, 0), 0);
		/* what the release leaves: SM removal done, new warm row, old quarantined */
		fake_sm_drop(f->sm, 0x12, g);
		{
			struct ibvf_alloc_request req = {.vf_index = 3};

			snprintf(req.owner.container_id, sizeof(req.owner.container_id),
				 "%s0000-03-01.3", IBVF_POOL_WARM_PREFIX);
			snprintf(req.owner.ifname, sizeof(req.owner.ifname), "%s",
				 IBVF_POOL_WARM_IFNAME);
			req.pci = pci_of(3);
			req.pf = "ib0";
			req.no_owner_return = true;
			assert_int_equal(ibvf_pool_allocate(f->pool, &req, &a, NULL, 0), 0);
			nw = a.guid;
		}
		assert_int_equal(ibvf_pool_release(f->pool, g, NULL, 0), 0);
		/* ... and the lost lazy writes */
		lose_write(f, g, IBVF_ALLOC_RELEASING);
		if (both)
			lose_write(f, nw, -1);
		assert_int_equal(fv.vf[3].port, g);
		assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
		assert_int_equal(repair_findings(f, g, "releasing"), 1);
		assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
		assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
		wait_warm(f, N_VFS);
		assert_int_equal(ibvf_pool_find_pci(f->pool, pci_of(3), &a, NULL, 0), 0);
		assert_true(ibvf_alloc_is_warm(&a));
		assert_int_equal(a.state, IBVF_ALLOC_PORT_READY);
		assert_true(a.guid != g);
		if (!both)
			assert_int_equal(a.guid, nw);
		assert_int_equal(fv.vf[3].port, a.guid);
		assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
		assert_warm_sane(f);
		assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0), 0);
	}
}

/* A prepare answered (port_ready), the VF in the Pod: no commit yet. */
static uint64_t prepare_one(struct fx *f, const char *cid, int vf)
{
	json_t *r = call(f, "prepare", prep_params(cid, pci_of(vf), "0x0016"));
	uint64_t g;

	assert_int_equal(f->code[0], 0);
	g = guid_of(r);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_PORT_READY);
	return g;
}

/*
 * store_port_ready lost: the record is back at sm_requested after the
 * prepare's answer. The plugin moves the VF only after that answer, so a VF
 * carrying the GUID in a Pod's netns proves the write: a pass stores it as
 * port_ready ("port-ready-lost"; a dry run only reports it), the VF and the
 * SM as they were (the membership re-pushed when the SM lost it too), and
 * commit, DEL and GC reach the same outcome as without the loss. With the VF
 * in the host (the answer not acted on yet), not carrying the GUID, or
 * showing a netdev name the host lacks (a lab driver's), the attach is
 * rolled back as today: SM removal, VF reset, quarantine; the plugin's
 * commit then fails and its undo (release) finds nothing left.
 */
static void test_lazy_port_ready_lost(void **state)
{
	struct fx *f = *state;
	uint64_t g = prepare_one(f, "lp1", 58), g2 = prepare_one(f, "lp2", 59), alive;
	json_t *dry = json_array(), *r;
	unsigned programs;

	lose_write(f, g, IBVF_ALLOC_SM_REQUESTED);
	/* audit (dry run): reported, nothing touched */
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_DRY_RUN, dry, NULL, 0) >= 1);
	assert_int_equal(count_kind(dry, "port-ready-lost"), 1);
	assert_int_equal(count_kind(dry, "mid-flight"), 0);
	json_decref(dry);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_SM_REQUESTED);
	/* a pass keeps it: port_ready again, VF and SM untouched */
	programs = fv.program_calls;
	assert_int_equal(repair_findings(f, g, "port-ready-lost"), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_PORT_READY);
	assert_int_equal(fv.vf[58].port, g);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), IBVF_MEMBER_FULL);
	assert_int_equal(fv.program_calls, programs);
	assert_int_equal(repair_findings(f, g, NULL), 0);
	/* lost again, and the SM lost the membership too: kept and re-pushed */
	lose_write(f, g, IBVF_ALLOC_SM_REQUESTED);
	fake_sm_drop(f->sm, 0x16, g);
	assert_int_equal(repair_findings(f, g, NULL), 2);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_PORT_READY);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), IBVF_MEMBER_FULL);
	assert_int_equal(fv.program_calls, programs);
	/* commit and DEL: as without the loss */
	call(f, "commit", json_pack("{s:o}", "owner", owner("lp1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_HANDED);
	r = call(f, "release", json_pack("{s:o}", "owner", owner("lp1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(fv.vf[58].port, 0);

	/* GC of the dead sandbox: released as a port_ready one is */
	lose_write(f, g2, IBVF_ALLOC_SM_REQUESTED);
	assert_int_equal(repair_findings(f, g2, "port-ready-lost"), 1);
	assert_int_equal(store_state(f, g2), IBVF_ALLOC_PORT_READY);
	/* held: another Pod's attach gets another GUID */
	alive = attach_one(f, "lp3", 60);
	assert_true(alive != g2);
	r = call(f, "gc",
		 json_pack("{s:[{s:s,s:s}]}", "valid", "container_id", "lp3", "ifname", "net1"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(store_state(f, g2), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g2), -1);
	assert_int_equal(fv.vf[59].port, 0);
	assert_int_equal(store_state(f, alive), IBVF_ALLOC_HANDED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, alive), IBVF_MEMBER_FULL);

	/* the VF still in the host: no Pod has it, rolled back */
	g = prepare_one(f, "lp4", 61);
	pthread_mutex_lock(&fv.lock);
	fv.vf[61].host_netdev = true;
	pthread_mutex_unlock(&fv.lock);
	lose_write(f, g, IBVF_ALLOC_SM_REQUESTED);
	assert_int_equal(repair_findings(f, g, "mid-flight"), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(fv.vf[61].port, 0);
	/* the plugin's commit fails; its undo of the ADD (release) finds nothing */
	call(f, "commit", json_pack("{s:o}", "owner", owner("lp4", "net1")));
	assert_true(f->code[0] != 0);
	call(f, "release", json_pack("{s:o}", "owner", owner("lp4", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);

	/* the VF no longer carries the GUID: rolled back (SM removal, quarantine) */
	g = prepare_one(f, "lp5", 62);
	lose_write(f, g, IBVF_ALLOC_SM_REQUESTED);
	pthread_mutex_lock(&fv.lock);
	fv.vf[62].port = fv.vf[62].node = 0;
	pthread_mutex_unlock(&fv.lock);
	assert_int_equal(repair_findings(f, g, "mid-flight"), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);

	/* no netdev because no driver is bound (a kill -9 between the VF's unbind
	 * and bind): no Pod has it, rolled back (the VF reset binds it again) */
	g = prepare_one(f, "lp7", 65);
	pthread_mutex_lock(&fv.lock);
	fv.vf[65].unbound = true;
	pthread_mutex_unlock(&fv.lock);
	lose_write(f, g, IBVF_ALLOC_SM_REQUESTED);
	assert_int_equal(repair_findings(f, g, "mid-flight"), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(fv.vf[65].port, 0);
	pthread_mutex_lock(&fv.lock);
	fv.vf[65].unbound = false;
	pthread_mutex_unlock(&fv.lock);

	/* a netdev name the host does not have (a lab driver names one wherever the
	 * VF is, as after a kill -9 in the daemon lab) proves nothing: rolled back */
	g = prepare_one(f, "lp6", 64);
	pthread_mutex_lock(&fv.lock);
	fv.pod_netdev_names = true;
	pthread_mutex_unlock(&fv.lock);
	lose_write(f, g, IBVF_ALLOC_SM_REQUESTED);
	assert_int_equal(repair_findings(f, g, "mid-flight"), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(fv.vf[64].port, 0);
	pthread_mutex_lock(&fv.lock);
	fv.pod_netdev_names = false;
	pthread_mutex_unlock(&fv.lock);
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0), 0);
}

/*
 * store_port_ready lost after a warm take (vf.warm: the warm row handed to
 * the Pod at sm_requested, then port_ready): the warm pass leaves the VF
 * alone (a Pod's record, whatever its state), a pass keeps it as port_ready,
 * commit and DEL as without the loss (the VF warm again on a new GUID). With
 * the VF in the host: rolled back, and the VF warmed again.
 */
static void test_lazy_port_ready_lost_warm(void **state)
{
	struct fx *f = *state;
	unsigned programs;
	uint64_t g;
	json_t *r;

	wait_warm(f, N_VFS);
	g = fv.vf[4].port;
	r = call(f, "prepare", prep_nolink("lw1", pci_of(4), "0x0012"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(guid_of(r), g); /* taken warm */
	lose_write(f, g, IBVF_ALLOC_SM_REQUESTED);
	/* a warm pass meanwhile: the Pod's VF is not re-GUIDed */
	programs = fv.program_calls;
	eng_warm_kick(f->e);
	wait_warm(f, N_VFS - 1);
	assert_int_equal(fv.vf[4].port, g);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_SM_REQUESTED);
	assert_int_equal(fv.program_calls, programs);
	assert_int_equal(repair_findings(f, g, "port-ready-lost"), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_PORT_READY);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), IBVF_MEMBER_FULL);
	wait_warm(f, N_VFS - 1);
	assert_int_equal(fv.vf[4].port, g);
	assert_int_equal(fv.program_calls, programs);
	call(f, "commit", json_pack("{s:o}", "owner", owner("lw1", "net1")));
	assert_int_equal(f->code[0], 0);
	r = call(f, "release", json_pack("{s:o}", "owner", owner("lw1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	wait_warm(f, N_VFS);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
	assert_true(fv.vf[4].port != g);
	assert_warm_sane(f);

	/* the VF still in the host: rolled back, then warm again on another GUID */
	g = fv.vf[5].port;
	r = call(f, "prepare", prep_nolink("lw2", pci_of(5), "0x0012"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(guid_of(r), g);
	pthread_mutex_lock(&fv.lock);
	fv.vf[5].host_netdev = true;
	pthread_mutex_unlock(&fv.lock);
	lose_write(f, g, IBVF_ALLOC_SM_REQUESTED);
	assert_int_equal(repair_findings(f, g, "mid-flight"), 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x12, g), -1);
	wait_warm(f, N_VFS);
	assert_true(fv.vf[5].port != g);
	assert_warm_sane(f);
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0), 0);
}

static int setup_sync_full(void **state)
{
	int ret;

	sync_full_next = true;
	ret = setup(state);
	sync_full_next = false;
	return ret;
}

/*
 * store_port_ready is lazy (sync "full"): COMMITted before the answer (a
 * read sees it at once), its fdatasync() off the prepare's path. The gate
 * holds every fdatasync() from the port wait on: the prepare answers with
 * none through it, and the syncer's fdatasync() of port_ready then waits
 * there. The allocation before it is synced: its fdatasync() is done
 * before the gate is armed.
 */
static void test_lazy_port_ready(void **state)
{
	struct fx *f = *state;
	int passed, waiting = 0;
	json_t *r;
	uint64_t g;

	pthread_mutex_lock(&fv.lock);
	fv.arm_sync_gate = true;
	pthread_mutex_unlock(&fv.lock);
	r = call(f, "prepare", prep_params("ls1", pci_of(63), "0x0016"));
	pthread_mutex_lock(&sync_gate.mu);
	passed = sync_gate.passed;
	pthread_mutex_unlock(&sync_gate.mu);
	assert_int_equal(f->code[0], 0);
	g = guid_of(r);
	/* answered before any fdatasync() went through the gate */
	assert_int_equal(passed, 0);
	/* ... and port_ready's fdatasync() is pending (the syncer, at the gate) */
	for (int i = 0; i < 1000 && !waiting; i++) {
		pthread_mutex_lock(&sync_gate.mu);
		waiting = sync_gate.waiting;
		pthread_mutex_unlock(&sync_gate.mu);
		if (!waiting)
			usleep(10000);
	}
	assert_int_equal(waiting, 1);
	sync_gate_open();
	assert_int_equal(store_state(f, g), IBVF_ALLOC_PORT_READY);
	call(f, "commit", json_pack("{s:o}", "owner", owner("ls1", "net1")));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_HANDED);
}

/* ------------------------------- release.sm: the SM half before the move -- */

static json_t *rel_params(const char *cid)
{
	return json_pack("{s:o}", "owner", owner(cid, "net1"));
}

/*
 * release.sm (the plugin's DEL, the VF's netdev still in the Pod): the SM is
 * seen without the GUID, the record is releasing, the VF untouched (GUID,
 * no program call: no reset, no rebind); the plain release after it makes no
 * SM removal call and no read-back listing, and resets the VF. Nothing held:
 * {held: false}.
 */
static void test_release_sm_stage(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "rsm1", 30);
	unsigned removes = f->ctl->remove_calls, programs = fv.program_calls, lists;
	json_t *r;

	r = call(f, "release.sm", rel_params("rsm1"));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "held")));
	assert_true(json_is_true(json_object_get(r, "sm_removed")));
	assert_int_equal(guid_of(r), g);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(f->ctl->remove_calls, removes + 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_RELEASING);
	assert_int_equal(fv.vf[30].port, g);
	assert_int_equal(fv.vf[30].node, g);
	assert_int_equal(fv.program_calls, programs);
	/* a second one (a retried DEL): the same, still nothing of the VF */
	call(f, "release.sm", rel_params("rsm1"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(fv.vf[30].port, g);
	assert_int_equal(fv.program_calls, programs);
	removes = f->ctl->remove_calls;
	lists = f->ctl->list_calls;

	r = call(f, "release", rel_params("rsm1"));
	assert_int_equal(f->code[0], 0);
	assert_true(json_is_true(json_object_get(r, "released")));
	assert_null(json_object_get(r, "sm_removal_pending"));
	assert_int_equal(f->ctl->remove_calls, removes); /* the note: no SM removal */
	assert_int_equal(f->ctl->list_calls, lists);	 /* ... and no read-back */
	assert_int_equal(fv.vf[30].port, 0);		 /* the VF is reset */
	assert_int_equal(fv.program_calls, programs + 1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	/* the note is used up: another release holds nothing */
	r = call(f, "release.sm", rel_params("rsm1"));
	assert_int_equal(f->code[0], 0);
	assert_false(json_is_true(json_object_get(r, "held")));
	assert_no_foreign(f, "after the staged release");
}

/* An SM that failed the stage-1 removal: no note; the plain release removes as today. */
static void test_release_sm_stage_failed(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "rsm2", 31);
	unsigned removes;
	json_t *r;

	f->ctl->lie_remove = 2; /* the removal and its one retry answer OK, remove nothing */
	r = call(f, "release.sm", rel_params("rsm2"));
	assert_int_equal(f->code[0], 0);
	assert_false(json_is_true(json_object_get(r, "sm_removed")));
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), IBVF_MEMBER_FULL);
	assert_int_equal(fv.vf[31].port, g);
	removes = f->ctl->remove_calls;
	r = call(f, "release", rel_params("rsm2"));
	assert_int_equal(f->code[0], 0);
	assert_true(f->ctl->remove_calls > removes);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED); /* never before seen gone */
}

/* A prepare of the same owner between the two: the plain release removes (and verifies) again. */
static void test_release_sm_then_prepare(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "rsm3", 32);
	unsigned removes;

	call(f, "release.sm", rel_params("rsm3"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	call(f, "prepare", prep_params("rsm3", pci_of(32), "0x0016"));
	removes = f->ctl->remove_calls;
	call(f, "release", rel_params("rsm3"));
	assert_int_equal(f->code[0], 0);
	assert_true(f->ctl->remove_calls > removes);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_int_equal(fv.vf[32].port, 0);
	assert_no_foreign(f, "after a prepare between the stages");
}

/* An ibvfd restart between the two (notes are memory only): the plain release removes again. */
static void test_release_sm_then_restart(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "rsm4", 33);
	unsigned removes;

	call(f, "release.sm", rel_params("rsm4"));
	assert_int_equal(f->code[0], 0);
	restart_engine(f, false);
	assert_int_equal(ibvf_engine_validate_sm(f->e), 0);
	removes = f->ctl->remove_calls;
	call(f, "release", rel_params("rsm4"));
	assert_int_equal(f->code[0], 0);
	assert_true(f->ctl->remove_calls > removes);
	assert_int_equal(fv.vf[33].port, 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
}

/*
 * The plugin killed between release.sm and the move: reconciliation leaves
 * the VF whose netdev is still in the Pod alone (no reset under a move), and
 * a pass after it is back in the host finishes the release; a pass also makes
 * the note stale, so a plain release after one removes again. A retried DEL
 * (release.sm, then release) ends released.
 */
static void test_release_sm_killed_between(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "rsm5", 34), g2 = attach_one(f, "rsm6", 35);
	json_t *fnd = json_array(), *it;
	unsigned programs, removes;
	bool seen = false;
	size_t i;

	call(f, "release.sm", rel_params("rsm5"));
	assert_int_equal(f->code[0], 0);
	programs = fv.program_calls;
	assert_int_equal(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, fnd, NULL, 0), 0);
	json_array_foreach(fnd, i, it)
	{
		const char *k = json_string_value(json_object_get(it, "kind"));

		seen |= k && !strcmp(k, "releasing-in-pod");
	}
	json_decref(fnd);
	assert_true(seen);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_RELEASING);
	assert_int_equal(fv.vf[34].port, g);
	assert_int_equal(fv.program_calls, programs);
	/* the Pod's netns is gone (or the move happened): a pass finishes it */
	pthread_mutex_lock(&fv.lock);
	fv.vf[34].host_netdev = true;
	pthread_mutex_unlock(&fv.lock);
	assert_int_equal(problems(f, IBVF_PASS_REPAIR, "releasing"), 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fv.vf[34].port, 0);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);

	/* the retried DEL: stage 1 again after a pass, then the plain release */
	call(f, "release.sm", rel_params("rsm6"));
	assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	assert_int_equal(store_state(f, g2), IBVF_ALLOC_RELEASING);
	removes = f->ctl->remove_calls;
	call(f, "release", rel_params("rsm6")); /* the pass made the note stale */
	assert_int_equal(f->code[0], 0);
	assert_true(f->ctl->remove_calls > removes);
	call(f, "release.sm", rel_params("rsm6"));
	assert_false(json_is_true(json_object_get(f->result[0], "held")));
	call(f, "release", rel_params("rsm6"));
	assert_false(json_is_true(json_object_get(f->result[0], "released")));
	assert_int_equal(store_state(f, g2), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fv.vf[35].port, 0);
	assert_no_foreign(f, "after the killed DEL");
}

/*
 * ibvfd's gc (the runtime's CNI GC) while a DEL is between release.sm and
 * release: the owner is not valid any more, but its VF may be moving back
 * right now: skipped (skipped_busy), VF untouched; the DEL's release ends it.
 */
static void test_release_sm_gc_skips(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "rsm7", 36);
	json_t *r;

	call(f, "release.sm", rel_params("rsm7"));
	assert_int_equal(f->code[0], 0);
	r = call(f, "gc", json_pack("{s:[]}", "valid"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(json_array_size(json_object_get(r, "released")), 0);
	assert_int_equal(json_array_size(json_object_get(r, "skipped_busy")), 1);
	assert_int_equal(fv.vf[36].port, g);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_RELEASING);
	call(f, "release", rel_params("rsm7"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(fv.vf[36].port, 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
}

/*
 * A DEL whose plugin never comes back after release.sm (killed, the Pod's
 * netns kept by the runtime, no retried DEL): the runtime's GC omits the
 * owner from its valid attachments. gc and reconciliation leave the VF alone
 * while its DEL may still be moving the netdev back, but not forever: after
 * ENG_SM_NOTE_PASSES completed passes the note no longer stands for them, and
 * gc releases the record (VF reset, GUID quarantined) as it did before
 * release.sm; without the bound the VF and GUID stayed held until a restart.
 */
static void test_release_sm_gc_bounded(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "rsm8", 37);
	json_t *r;

	call(f, "release.sm", rel_params("rsm8"));
	assert_int_equal(f->code[0], 0);
	for (int i = 0; i < ENG_SM_NOTE_PASSES; i++) {
		r = call(f, "gc", json_pack("{s:[]}", "valid"));
		assert_int_equal(json_array_size(json_object_get(r, "skipped_busy")), 1);
		assert_int_equal(fv.vf[37].port, g);
		assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
		assert_int_equal(store_state(f, g), IBVF_ALLOC_RELEASING);
	}
	r = call(f, "gc", json_pack("{s:[]}", "valid"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(json_array_size(json_object_get(r, "released")), 1);
	assert_int_equal(json_array_size(json_object_get(r, "skipped_busy")), 0);
	assert_int_equal(fv.vf[37].port, 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	/* the DEL that does come back much later: nothing held, nothing touched */
	call(f, "release", rel_params("rsm8"));
	assert_int_equal(f->code[0], 0);
	assert_false(json_is_true(json_object_get(f->result[0], "released")));
	/* with no gc at all, the pass after the bound finishes it ("releasing") */
	g = attach_one(f, "rsm8b", 39);
	call(f, "release.sm", rel_params("rsm8b"));
	assert_int_equal(f->code[0], 0);
	for (int i = 0; i < ENG_SM_NOTE_PASSES; i++)
		assert_true(ibvf_engine_reconcile(f->e, IBVF_PASS_REPAIR, NULL, NULL, 0) >= 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_RELEASING);
	assert_int_equal(problems(f, IBVF_PASS_REPAIR, "releasing"), 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(fv.vf[39].port, 0);
	assert_no_foreign(f, "after the bounded gc skip");
}

/*
 * The GUID added to its PKey again by someone else (an admin, UFM, the
 * cluster SM agent) between release.sm and the plain release, which skips
 * the read-back on the note: the GUID still goes to quarantine unseen, its
 * quarantine time alone does not free it, a pass removes the membership
 * (sm-orphan), and no prepare gets it while it is a member.
 */
static void test_release_sm_readded_between(void **state)
{
	struct fx *f = *state;
	uint64_t g = attach_one(f, "rsm9", 38);
	struct ibvf_alloc a;

	call(f, "release.sm", rel_params("rsm9"));
	assert_int_equal(f->code[0], 0);
	fake_sm_put(f->sm, 0x16, g, true); /* re-added behind ibvfd's back */
	call(f, "release", rel_params("rsm9"));
	assert_int_equal(f->code[0], 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(ibvf_pool_get(f->pool, g, &a, NULL, 0), 0);
	assert_true(a.sm_unseen);
	__atomic_add_fetch(&clock_ahead_ms, 61000, __ATOMIC_SEQ_CST);
	assert_int_equal(ibvf_pool_expire(f->pool, NULL, 0), 0);
	assert_int_equal(store_state(f, g), IBVF_ALLOC_QUARANTINED);
	assert_int_equal(problems(f, IBVF_PASS_REPAIR, "sm-orphan"), 0);
	assert_int_equal(fake_sm_has(f->sm, 0x16, g), -1);
	assert_no_foreign(f, "after a re-add between the stages");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_prepare_commit_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prepare_without_pkey, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback_program, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback_sm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback_port, setup, teardown),
		cmocka_unit_test_setup_teardown(test_index0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconcile_membership, setup, teardown),
		cmocka_unit_test(test_rollback_deadline),
		cmocka_unit_test_setup_teardown(test_vf_busy_and_params, setup, teardown),
		cmocka_unit_test_setup_teardown(test_requested_guid, setup, teardown),
		cmocka_unit_test(test_not_ready),
		cmocka_unit_test(test_not_ready_permanent),
		cmocka_unit_test_setup_teardown(test_undelivered_rolls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_list_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_prepares_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_owner_serialized, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keys_share_a_bucket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_pending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconcile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconcile_linear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_verified, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quarantine_waits_for_sm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prepare_foreign_pkey, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconcile_foreign_pkey, setup, teardown),
		cmocka_unit_test_setup_teardown(test_leak_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_failure_not_ready, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sm_failure_not_ready, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_methods, setup, teardown),
		cmocka_unit_test(test_reconcile_sm_down),
		cmocka_unit_test_setup_teardown(test_store_lost_no_reissue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_spool, setup_spool, teardown_spool),
		cmocka_unit_test_setup_teardown(test_release_spool_reserved, setup_spool,
						teardown_spool),
		cmocka_unit_test_setup_teardown(test_handed_in_host, setup_spool, teardown_spool),
		cmocka_unit_test_setup_teardown(test_cni_cache_in_use, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_window, setup_checkpoint,
						teardown_checkpoint),
		cmocka_unit_test_setup_teardown(test_warm_add_del, setup_warm, teardown),
		cmocka_unit_test_setup_teardown(test_warm_skips_compat_vf, setup_warm_compat,
						teardown_warm_compat),
		cmocka_unit_test_setup_teardown(test_warm_cache_race, setup_warm_race,
						teardown_warm_compat),
		cmocka_unit_test_setup_teardown(test_warm_cold_paths, setup_warm, teardown),
		cmocka_unit_test_setup_teardown(test_warm_crash, setup_warm, teardown),
		cmocka_unit_test_setup_teardown(test_warm_in_sm_adopted, setup_warm, teardown),
		cmocka_unit_test_setup_teardown(test_warm_stale_rollback, setup_warm, teardown),
		cmocka_unit_test_setup_teardown(test_warm_off, setup_warm, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_handed_lost, setup_spool, teardown_spool),
		cmocka_unit_test_setup_teardown(test_lazy_release_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_warm_release_lost, setup_warm, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_port_ready_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_port_ready_lost_warm, setup_warm,
						teardown),
		cmocka_unit_test_setup_teardown(test_lazy_port_ready, setup_sync_full, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_stage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_stage_failed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_then_prepare, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_then_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_killed_between, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_gc_skips, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_gc_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_sm_readded_between, setup, teardown),
	};

	ibvf_log_init("test_attach", IBVF_LOG_STDERR,
		      getenv("IBVF_TEST_DEBUG") ? LOG_DEBUG : LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
