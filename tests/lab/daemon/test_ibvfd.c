// SPDX-License-Identifier: MIT
/*
 * Whole-daemon tests of ibvfd: the real binary with the "fake" VF driver
 * (VF state in files) and the test-only "file" SM backend (membership in a
 * file that survives kill -9), driven through the real API client.
 *
 *   test_ibvfd smoke IBVFD SM_MODULE_DIR
 *       sd_notify READY/RELOADING/STOPPING, not-ready SM at start-up and
 *       recovery, SIGHUP reload, SIGTERM with a request in flight (it is
 *       answered, exit 0, socket removed).
 *   test_ibvfd ctl-pool IBVFD SM_MODULE_DIR IBVFCTL
 *       ibvfctl pool allocate/release through ibvfd's API while it runs
 *       (ibvfd's log and list show the change, ibvfctl opens no store), the
 *       offline path with ibvfd down and with a stale socket, --json, and
 *       the state dir lock: refused while held, ibvfd waits for it.
 *   test_ibvfd crash IBVFD SM_MODULE_DIR [CYCLES] [SEED]
 *       CYCLES (200) prepare/release cycles; before about one in four
 *       requests a thread kill -9s the daemon after a seeded random delay.
 *       After each restart (start-up reconciliation) the store, the VFs and
 *       the SM must agree: no attach left mid-flight, no duplicate or leaked
 *       GUID, SM membership == store.
 *   test_ibvfd adopted IBVFD SM_MODULE_DIR IBVFCTL
 *       records ibvfctl pool rebuild adopted after a store loss are released
 *       by the owner's release with the VF's PCI address and GUID (the CNI
 *       DEL); the start-up pass binds an SM-only adoption to its VF.
 *   test_ibvfd campaign IBVFD UFM_MODULE_DIR IBVFCTL [CYCLES] [SEED]
 *       issue 14's campaign (cmd_campaign()): kill -9, store damage and SM
 *       faults over CYCLES (1000; $IBVF_CAMPAIGN_CYCLES overrides) cycles
 *       with the UFM simulator; invariants checked after every restart.
 *       SEED (20261201; $IBVF_CAMPAIGN_SEED overrides) is printed first, so a
 *       failed run can be replayed (kill points still vary with timing).
 *   test_ibvfd ufm-leaks IBVFD UFM_MODULE_DIR
 *       issue 14's two SM leaks against the UFM simulator, daemon.reconcile
 *       "report": an add UFM applies after ibvfd timed out and retried
 *       (then the Pod is released), and a remove answered 200 {} without
 *       removing. After each: the next tenant's GUID is in no other PKey,
 *       and (after a pass) no GUID of the ranges is in a PKey its owner
 *       did not ask for.
 *
 * Prints TAP lines and "N passed, N failed"; exit 0 when all passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "api_client.h"
#include "config.h"
#include "evloop.h"
#include "guid_pool.h"
#include "log.h"
#include "ibvfd_lab.h"
#include "ufm_sim_harness.h"
#include "vf_fake.h"

#define N_VFS	    8
#define RANGE_START LAB_RANGE_START
#define RANGE_END   LAB_RANGE_END

/* ------------------------------------------------------- invariants -- */

struct member {
	unsigned pkey;
	unsigned long long guid;
};

static size_t read_sm(struct lab *l, struct member *m, size_t max)
{
	FILE *f = fopen(l->smfile, "r");
	char mb[16];
	size_t n = 0;

	if (!f)
		return 0;
	while (n < max && fscanf(f, "%x %llx %15s", &m[n].pkey, &m[n].guid, mb) == 3)
		n++;
	fclose(f);
	return n;
}

struct live {
	struct ibvf_alloc a[64];
	size_t n;
	bool overflow;
};

static int live_cb(void *arg, const struct ibvf_alloc *a)
{
	struct live *lv = arg;

	if (lv->n == 64) {
		lv->overflow = true;
		return 1;
	}
	lv->a[lv->n++] = *a;
	return 0;
}

static int audit_cb(void *arg, const struct ibvf_audit_finding *f)
{
	char *why = arg;

	if (f->problem && !why[0])
		snprintf(why, 256, "%.20s: %.200s", ibvf_audit_kind_name(f->kind), f->detail);
	return 0;
}

static bool warm_rec(const struct ibvf_alloc *a)
{
	return !strncmp(a->owner.container_id, IBVF_POOL_WARM_PREFIX,
			strlen(IBVF_POOL_WARM_PREFIX));
}

/*
 * vf.warm: wait (10 s at most) until ibvfd's status shows no VF being
 * warmed and at least @want VFs warm. Return: true when it got there.
 */
static bool warm_settled(struct lab *l, long long want)
{
	for (int i = 0; i < 200; i++) {
		json_t *r = NULL, *w;
		long long ready = -1, warming = -1;

		if (!lab_api(l, "status", json_object(), &r, NULL, 5000)) {
			w = json_object_get(r, "warm");
			ready = json_integer_value(json_object_get(w, "ready"));
			warming = json_integer_value(json_object_get(w, "warming"));
		}
		json_decref(r);
		if (ready >= want && warming == 0)
			return true;
		usleep(50000);
	}
	return false;
}

/*
 * The three views agree; @why gets the first disagreement. A warm VF's
 * record (vf.warm) is port_ready, its VF carries the GUID, and the SM lists
 * it in no PKey.
 */
static bool consistent(struct lab *l, char *why, size_t len)
{
	struct ibvf_guid_range r = {RANGE_START, RANGE_END};
	struct ibvf_pool_opts o = {
		.state_dir = l->state,
		.ranges = &r,
		.n_ranges = 1,
		.quarantine_s = 1,
		.read_only = true,
	};
	struct ibvf_pool *p;
	static struct live lv;
	struct member sm[256];
	size_t nsm;
	char err[512], audit[256] = "";
	bool ok = false;
	int ret;

	memset(&lv, 0, sizeof(lv));
	if (ibvf_pool_open(&o, &p, err, sizeof(err))) {
		snprintf(why, len, "open store: %.400s", err);
		return false;
	}
	ret = ibvf_pool_list(p, NULL, live_cb, &lv, err, sizeof(err));
	if (ret >= 0)
		ret = ibvf_pool_audit(p, audit_cb, audit, err, sizeof(err));
	ibvf_pool_close(p);
	if (ret < 0) {
		snprintf(why, len, "store: %.400s", err);
		return false;
	}
	if (ret > 0) {
		snprintf(why, len, "store audit: %s", audit);
		return false;
	}
	nsm = read_sm(l, sm, 256);
	/* store -> SM, VF; no transient state */
	for (size_t i = 0; i < lv.n; i++) {
		struct ibvf_alloc *a = &lv.a[i];
		struct ibvf_attach_vf vf;
		struct ibvf_vf_ops ops;
		struct ibvf_port_ops port;
		bool in_sm = false;

		if (a->state != IBVF_ALLOC_PORT_READY && a->state != IBVF_ALLOC_HANDED) {
			snprintf(why, len, "GUID %016llx left %s", (unsigned long long)a->guid,
				 ibvf_alloc_state_name(a->state));
			return false;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(lv.a[j].pci, a->pci)) {
				snprintf(why, len, "two records on VF %s", a->pci);
				return false;
			}
		for (size_t k = 0; k < nsm; k++)
			in_sm |= sm[k].guid == a->guid && (sm[k].pkey == 0x12 || warm_rec(a));
		if (warm_rec(a) && in_sm) {
			snprintf(why, len, "warm GUID %016llx of VF %s is in the SM",
				 (unsigned long long)a->guid, a->pci);
			return false;
		}
		if (!in_sm && !warm_rec(a)) {
			snprintf(why, len, "GUID %016llx (%s) not in the SM",
				 (unsigned long long)a->guid, a->owner.container_id);
			return false;
		}
		ibvf_vf_fake_init(l->vfdir, &ops, &port, err, sizeof(err));
		ret = ops.lookup(ops.ctx, a->pci, &vf, err, sizeof(err));
		ibvf_vf_fake_fini(&ops);
		if (ret || vf.port_guid != a->guid) {
			snprintf(why, len, "VF %s does not carry GUID %016llx", a->pci,
				 (unsigned long long)a->guid);
			return false;
		}
	}
	/* SM -> store */
	for (size_t k = 0; k < nsm; k++) {
		bool held = false;

		for (size_t i = 0; i < lv.n; i++)
			held |= lv.a[i].guid == sm[k].guid;
		if (!held) {
			snprintf(why, len, "SM has GUID %016llx in PKey 0x%04x, no owner holds it",
				 sm[k].guid, sm[k].pkey);
			return false;
		}
	}
	/* VF -> store */
	for (int i = 0; i < N_VFS; i++) {
		struct ibvf_vf_ops ops;
		struct ibvf_port_ops port;
		struct ibvf_attach_vf vf;
		char pci[16];
		bool held = false;

		lab_pci(i, pci);
		ibvf_vf_fake_init(l->vfdir, &ops, &port, err, sizeof(err));
		ret = ops.lookup(ops.ctx, pci, &vf, err, sizeof(err));
		ibvf_vf_fake_fini(&ops);
		if (ret)
			continue;
		for (size_t j = 0; j < lv.n; j++)
			held |= !strcmp(lv.a[j].pci, pci);
		if (!held && vf.port_guid) {
			snprintf(why, len, "free VF %s still carries GUID %016llx", pci,
				 (unsigned long long)vf.port_guid);
			return false;
		}
	}
	ok = true;
	return ok;
}

/* ----------------------------------------------------------- killer -- */

struct killer {
	pid_t pid;
	unsigned delay_us;
	pthread_t th;
};

static void *killer_run(void *arg)
{
	struct killer *k = arg;

	usleep(k->delay_us);
	kill(k->pid, SIGKILL);
	return NULL;
}

/*
 * kill -9 at random points of prepare and release; @warm: with vf.warm on,
 * prepares take warm VFs, releases re-GUID them, and a third kind of kill
 * lands in the warm-up that follows a release (kill -9 during warm-up).
 */
static int cmd_crash(const char *ibvfd, const char *moddir, int cycles, unsigned seed, bool warm)
{
	struct lab l;
	unsigned rnd = seed;
	int kills = 0, prepared = 0, failed_checks = 0, warm_kills = 0;
	int64_t t0 = ibvf_mono_ms();
	char why[512];

	if (lab_init(&l, ibvfd, N_VFS, "file", moddir, NULL)) {
		lab_result(false, "lab set-up");
		return 1;
	}
	l.delay_ms = "3"; /* a window inside the VF step for the killer */
	l.warm = warm;
	lab_write_config(&l);
	printf("# crash test: %d cycles, seed %u, warm %s, lab %s\n", cycles, seed,
	       warm ? "on" : "off", l.dir);
	if (lab_start(&l, 15000) < 0) {
		lab_result(false, "ibvfd starts and reports READY=1");
		lab_fini(&l);
		return 1;
	}
	for (int c = 0; c < cycles; c++) {
		char cid[32];
		int vf = rand_r(&rnd) % N_VFS;
		bool kill_prep = rand_r(&rnd) % 4 == 0, kill_rel = rand_r(&rnd) % 5 == 0;
		bool kill_warm = warm && !kill_prep && !kill_rel && rand_r(&rnd) % 4 == 0;
		struct killer k = {.pid = l.pid};
		json_t *res = NULL;
		int ret;

		snprintf(cid, sizeof(cid), "crash%03d", c);
		if (kill_prep) {
			k.delay_us = (unsigned)(rand_r(&rnd) % 40000);
			pthread_create(&k.th, NULL, killer_run, &k);
		}
		ret = lab_prepare(&l, cid, vf, NULL, &res, NULL);
		json_decref(res);
		if (!ret)
			prepared++;
		if (!kill_prep && kill_rel) {
			k.delay_us = (unsigned)(rand_r(&rnd) % 30000);
			pthread_create(&k.th, NULL, killer_run, &k);
		}
		if (!ret || kill_prep)
			lab_release(&l, cid);
		if (kill_warm) {
			/* the release re-GUIDs the VF in the background: kill inside that */
			k.delay_us = (unsigned)(rand_r(&rnd) % 8000);
			pthread_create(&k.th, NULL, killer_run, &k);
			warm_kills++;
		}
		if (kill_prep || kill_rel || kill_warm) {
			int st;

			pthread_join(k.th, NULL);
			waitpid(l.pid, &st, 0);
			l.pid = 0;
			kills++;
			if (lab_start(&l, 15000) < 0) {
				lab_result(false, "cycle %d: ibvfd restarts after kill -9", c);
				lab_fini(&l);
				return 1;
			}
			/* READY=1 comes after the start-up reconciliation pass; warm-up
			 * follows it (the interrupted owner may hold one VF) */
			if (warm && !warm_settled(&l, N_VFS - 1)) {
				lab_result(false, "cycle %d: VFs warm again after kill -9", c);
				failed_checks++;
				break;
			}
			if (!consistent(&l, why, sizeof(why))) {
				lab_result(false,
					   "cycle %d: consistent after kill -9 + restart: %s", c,
					   why);
				failed_checks++;
				break;
			}
			/* the interrupted owner can always be released */
			if (lab_release(&l, cid)) {
				lab_result(false, "cycle %d: release after restart", c);
				failed_checks++;
				break;
			}
		}
	}
	lab_result(failed_checks == 0,
		   "%d cycles, %d kill -9 + restarts (%d during warm-up): store, VFs and SM agree "
		   "after every restart (%d prepares succeeded, %.1f s)",
		   cycles, kills, warm_kills, prepared, (double)(ibvf_mono_ms() - t0) / 1000);
	if (warm) {
		/* ibvfd's log says each time a prepare took a warm VF (warm_vf.c) */
		FILE *f = fopen(l.log, "r");
		char line[1024];
		int taken = 0;

		while (f && fgets(line, sizeof(line), f))
			taken += strstr(line, "warm GUID") && strstr(line, "no rebind");
		if (f)
			fclose(f);
		lab_result(warm_kills > 0 && warm_settled(&l, N_VFS),
			   "warm: kill -9 during warm-up exercised, every VF warm at the end");
		lab_result(taken > prepared / 2,
			   "warm: %d warm takes (no rebind) for %d prepares that succeeded", taken,
			   prepared);
	}
	lab_result(consistent(&l, why, sizeof(why)), "consistent at the end%s%s",
		   lab_n_fail ? ": " : "", lab_n_fail ? why : "");
	{
		struct member sm[8];

		lab_result(read_sm(&l, sm, 8) == 0, "every owner released: SM membership empty");
	}
	lab_result(WIFEXITED(lab_stop(&l, SIGTERM)), "SIGTERM: ibvfd exits");
	lab_fini(&l);
	return 0;
}

/* ------------------------------------------------------------ smoke -- */

/* Run "ibvfctl -c CFG ARGS..." with stdout into @out (<= @len bytes); exit status. */
static int run_ctl(struct lab *l, const char *ibvfctl, char *out, size_t len, ...)
{
	char *argv[16] = {(char *)"ibvfctl", (char *)"-c", l->cfg};
	int n = 3, pfd[2], st;
	size_t got = 0;
	va_list ap;
	pid_t pid;

	va_start(ap, len);
	while (n < 15 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		execv(ibvfctl, argv);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		ssize_t r = read(pfd[0], out + got, len - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
		if (got >= len - 1)
			break;
	}
	out[got] = 0;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void ctl_checks(struct lab *l, const char *ibvfctl)
{
	char out[8192];
	int rc;

	rc = run_ctl(l, ibvfctl, out, sizeof(out), "daemon", "status", NULL);
	lab_result(rc == 0 && strstr(out, "Ready:") && strstr(out, "yes"),
		   "ibvfctl daemon status (rc %d)", rc);
	rc = run_ctl(l, ibvfctl, out, sizeof(out), "--json", "daemon", "list", NULL);
	lab_result(rc == 0 && strstr(out, "\"guid\""), "ibvfctl --json daemon list (rc %d)", rc);
	rc = run_ctl(l, ibvfctl, out, sizeof(out), "daemon", "prepare", "--owner", "byhand",
		     "--pci", "0000:05:00.6", "--pkey", "0x12", NULL);
	lab_result(rc == 0 && strstr(out, "ACTIVE"), "ibvfctl daemon prepare (rc %d)", rc);
	rc = run_ctl(l, ibvfctl, out, sizeof(out), "daemon", "prepare", "--owner", "other", "--pci",
		     "0000:05:00.6", "--pkey", "0x12", NULL);
	lab_result(rc == 3, "ibvfctl daemon prepare of a held VF fails with 3 (rc %d)", rc);
	rc = run_ctl(l, ibvfctl, out, sizeof(out), "daemon", "release", "--owner", "byhand", NULL);
	lab_result(rc == 0 && strstr(out, "yes"), "ibvfctl daemon release (rc %d)", rc);
	rc = run_ctl(l, ibvfctl, out, sizeof(out), "pool", "audit", NULL);
	lab_result(rc == 0 && strstr(out, "audit clean"),
		   "ibvfctl pool audit via the daemon (rc %d)", rc);
	/* an SM member of the ibvf ranges nobody holds: removed by the pass itself
	 * (pool GUIDs are ibvf's, issue 14), fix or not */
	{
		FILE *f = fopen(l->smfile, "a");

		fprintf(f, "0x0012 %016llx full\n", (unsigned long long)LAB_RANGE_START + 0x999);
		fclose(f);
	}
	rc = run_ctl(l, ibvfctl, out, sizeof(out), "--json", "pool", "audit", NULL);
	{
		char line[128], hex[32];
		bool still = false;
		FILE *f = fopen(l->smfile, "r");

		snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)LAB_RANGE_START + 0x999);
		while (f && fgets(line, sizeof(line), f))
			still |= strstr(line, hex) != NULL;
		if (f)
			fclose(f);
		/* a periodic pass may have removed it just before the audit */
		lab_result(rc == 0 && !still &&
				   (!strstr(out, "sm-orphan") || (strstr(out, "remove the GUID") &&
								  strstr(out, "\"fixed\": true"))),
			   "pool audit removes an SM orphan of the pool ranges, exit 0 (rc %d)",
			   rc);
	}
	rc = run_ctl(l, ibvfctl, out, sizeof(out), "daemon", "audit", "--fix", NULL);
	lab_result(rc == 0, "daemon audit --fix fixes it (rc %d)", rc);
	rc = run_ctl(l, ibvfctl, out, sizeof(out), "daemon", "frobnicate", NULL);
	lab_result(rc == 2, "unknown command: exit 2 (rc %d)", rc);
}

struct bg_call {
	struct lab *l;
	int ret;
	pthread_t th;
};

static void *bg_prepare(void *arg)
{
	struct bg_call *b = arg;

	b->ret = lab_prepare(b->l, "slow", 3, NULL, NULL, NULL);
	return NULL;
}

static int cmd_smoke(const char *ibvfd, const char *moddir, const char *ibvfctl)
{
	struct ibvf_rpc_error re;
	struct lab l;
	struct bg_call bg;
	json_t *r = NULL;
	struct stat st;
	int ret, status;
	bool ready = false;

	if (lab_init(&l, ibvfd, N_VFS, "file", moddir, NULL)) {
		lab_result(false, "lab set-up");
		return 1;
	}
	/* the SM is unreachable at start-up: the daemon starts anyway */
	close(open(l.failfile, O_CREAT | O_WRONLY, 0600));
	lab_result(lab_start(&l, 15000) > 0, "starts with the SM unreachable, sends READY=1");
	lab_result(stat(l.sock, &st) == 0 && (st.st_mode & 0777) == 0600, "socket mode 0600");
	ret = lab_api(&l, "status", NULL, &r, NULL, 5000);
	lab_result(!ret && json_is_false(json_object_get(r, "ready")) &&
			   json_is_false(json_object_get(json_object_get(r, "backend"), "ok")),
		   "status: not ready, backend not ok");
	json_decref(r);
	ret = lab_prepare(&l, "early", 0, NULL, NULL, &re);
	lab_result(ret == -EREMOTEIO && re.code == IBVF_RPC_NOT_READY, "prepare: NOT_READY (%s)",
		   re.message);
	/* the SM comes back: the periodic pass (1 s) notices */
	unlink(l.failfile);
	for (int i = 0; i < 60 && !ready; i++) {
		usleep(100000);
		if (!lab_api(&l, "status", NULL, &r, NULL, 5000))
			ready = json_is_true(json_object_get(r, "ready"));
		json_decref(r);
	}
	lab_result(ready, "ready once the SM answers");
	ret = lab_prepare(&l, "first", 0, NULL, &r, &re);
	lab_result(!ret && json_is_string(json_object_get(r, "guid")), "prepare succeeds%s%s",
		   ret ? ": " : "", ret ? re.message : "");
	json_decref(r);
	ret = lab_api(&l, "commit", json_pack("{s:o}", "owner", lab_owner("first")), NULL, NULL,
		      5000);
	lab_result(!ret, "commit");
	ret = lab_api(&l, "list", NULL, &r, NULL, 5000);
	lab_result(!ret && json_array_size(json_object_get(r, "owners")) == 1, "list shows it");
	json_decref(r);
	if (ibvfctl)
		ctl_checks(&l, ibvfctl);

	/* SIGHUP: reload */
	snprintf(l.daemon_extra, sizeof(l.daemon_extra), ", \"prepare_timeout_s\": 30");
	lab_write_config(&l);
	lab_drain_notify(&l);
	kill(l.pid, SIGHUP);
	lab_result(lab_wait_notify(&l, "RELOADING=1", 5000), "SIGHUP: RELOADING=1");
	ret = lab_api(&l, "status", NULL, &r, NULL, 5000);
	lab_result(!ret && json_is_true(json_object_get(r, "ready")), "still serving after SIGHUP");
	json_decref(r);

	/* SIGTERM with a prepare in flight: it is answered, then exit 0 */
	lab_stop(&l, SIGTERM);
	l.delay_ms = "600";
	lab_start(&l, 15000);
	bg.l = &l;
	pthread_create(&bg.th, NULL, bg_prepare, &bg);
	usleep(200000);
	lab_drain_notify(&l);
	kill(l.pid, SIGTERM);
	lab_result(lab_wait_notify(&l, "STOPPING=1", 5000), "SIGTERM: STOPPING=1");
	pthread_join(bg.th, NULL);
	lab_result(bg.ret == 0, "the in-flight prepare was finished and answered");
	waitpid(l.pid, &status, 0);
	l.pid = 0;
	lab_result(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0");
	lab_result(stat(l.sock, &st) && errno == ENOENT, "socket removed");
	if (ibvfctl) {
		char out[4096];
		int rc = run_ctl(&l, ibvfctl, out, sizeof(out), "pool", "audit", NULL);

		/* expired quarantine shows up as a notice (quarantine_s is 1): not a problem */
		lab_result(rc == 0 && !strstr(out, "problem"),
			   "pool audit without a daemon: store checks, no problem (rc %d)", rc);
		rc = run_ctl(&l, ibvfctl, out, sizeof(out), "daemon", "status", NULL);
		lab_result(rc == 3, "daemon status without a daemon: exit 3 (rc %d)", rc);
	}
	lab_fini(&l);
	return 0;
}

/* ---------------------------------------------------------- ctl-pool -- */

/*
 * "ibvfctl -c CFG ARGS..." with stdout into @out and stderr into @err (each
 * <= @len bytes, through files in the lab dir); exit status.
 */
static int run_ctl2(struct lab *l, const char *ibvfctl, char *out, char *err, size_t len, ...)
{
	char *argv[24] = {(char *)"ibvfctl", (char *)"-c", l->cfg};
	char po[160], pe[160];
	int n = 3, st;
	va_list ap;
	pid_t pid;

	va_start(ap, len);
	while (n < 23 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	snprintf(po, sizeof(po), "%s/ctl.out", l->dir);
	snprintf(pe, sizeof(pe), "%s/ctl.err", l->dir);
	pid = fork();
	if (pid == 0) {
		int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fo, 1);
		dup2(fe, 2);
		execv(ibvfctl, argv);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	for (int i = 0; i < 2; i++) {
		char *buf = i ? err : out;
		int fd = open(i ? pe : po, O_RDONLY);
		ssize_t r = fd >= 0 ? read(fd, buf, len - 1) : -1;

		buf[r > 0 ? r : 0] = 0;
		if (fd >= 0)
			close(fd);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool file_has(const char *path, const char *needle)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return strstr(buf, needle) != NULL;
}

static bool dir_empty(const char *path)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", path);
	return system(cmd) == 0;
}

static const char *jstr(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

/* Is GUID @g (colon form) held by @cid in ibvfd's own view (list)? */
static bool daemon_holds(struct lab *l, const char *cid, const char *g)
{
	json_t *r = NULL, *it;
	bool found = false;
	size_t i;

	if (lab_api(l, "list", NULL, &r, NULL, 5000))
		return false;
	json_array_foreach(json_object_get(r, "owners"), i, it) found |=
		!strcmp(jstr(json_object_get(it, "owner"), "container_id"), cid) &&
		!strcmp(jstr(it, "guid"), g);
	json_decref(r);
	return found;
}

/* A socket file nobody listens on, as a killed ibvfd leaves it. */
static bool make_stale_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	bool ok;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path);
	ok = fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (fd >= 0)
		close(fd);
	return ok;
}

static void ctl_pool_online(struct lab *l, const char *ibvfctl)
{
	char out[8192], err[8192], empty[160], g[64] = "", gp[64] = "", pci[16];
	json_t *j, *r = NULL;
	int rc;

	/*
	 * --state-dir points ibvfctl at an empty directory: were it to open a
	 * store itself, it would create pool.db (and the lock) there, or fail.
	 */
	snprintf(empty, sizeof(empty), "%s/empty", l->dir);
	mkdir(empty, 0700);
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "-s", empty, "--json", "pool", "allocate",
		      "--owner", "ctl-a", "--pod", "lab/ctl-a", "--pkey", "0x8012", NULL);
	j = json_loads(out, 0, NULL);
	if (j)
		snprintf(g, sizeof(g), "%s", jstr(j, "guid"));
	lab_result(
		rc == 0 && j && !strcmp(jstr(j, "state"), "allocated") &&
			!strcmp(jstr(j, "container_id"), "ctl-a") &&
			!strcmp(jstr(j, "pod"), "lab/ctl-a") &&
			!strcmp(json_string_value(json_array_get(json_object_get(j, "pkeys"), 0)),
				"0x8012"),
		"ibvfd up: --json pool allocate answers the record (rc %d, %s)", rc, g);
	json_decref(j);
	lab_result(!strstr(err, "not running") && !strstr(err, "store directly"),
		   "ibvfd up: pool allocate does not take the offline path (stderr: %.200s)", err);
	lab_result(dir_empty(empty),
		   "ibvfd up: ibvfctl opened no store of its own (%s stays empty)", empty);
	{
		char line[160];

		snprintf(line, sizeof(line), "pool.allocate: GUID %s for container ctl-a", g);
		lab_result(g[0] && file_has(l->log, line),
			   "ibvfd's log shows the allocation ('%s')", line);
	}
	lab_result(g[0] && daemon_holds(l, "ctl-a", g), "ibvfd's list holds %s for ctl-a", g);
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "allocate", "--owner", "ctl-a",
		      NULL);
	lab_result(rc == 0 && strstr(out, g),
		   "ibvfd up: the same owner gets its GUID again (rc %d)", rc);
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "allocate", "--owner", "ctl-b",
		      "--guid", g, NULL);
	lab_result(rc == 3 && strstr(err, "held by container ctl-a"),
		   "ibvfd up: a GUID held by another owner is refused, exit 3 (rc %d: %.160s)", rc,
		   err);
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "allocate", "--owner", "has space",
		      NULL);
	lab_result(rc == 2 && strstr(err, "is not a CNI container ID"),
		   "ibvfd up: an owner the pool refuses is a usage error, exit 2 (rc %d: %.160s)",
		   rc, err);

	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "-s", empty, "--json", "pool", "release",
		      g, NULL);
	j = json_loads(out, 0, NULL);
	lab_result(rc == 0 && j && json_is_true(json_object_get(j, "released")) &&
			   strstr(jstr(j, "result"), "quarantine"),
		   "ibvfd up: --json pool release (rc %d: %.200s)", rc, out);
	json_decref(j);
	{
		char line[160];

		snprintf(line, sizeof(line), "pool.release: GUID %s of container ctl-a", g);
		lab_result(file_has(l->log, line), "ibvfd's log shows the release");
	}
	lab_result(!daemon_holds(l, "ctl-a", g) && dir_empty(empty),
		   "ibvfd no longer holds it; still no store opened by ibvfctl");
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "--json", "pool", "release", g, NULL);
	j = json_loads(out, 0, NULL);
	lab_result(rc == 0 && j && json_is_false(json_object_get(j, "released")),
		   "ibvfd up: releasing it again does nothing, exit 0 (rc %d)", rc);
	json_decref(j);

	/* an attached GUID: pool release walks it back like release (SM, VF, quarantine) */
	if (!lab_prepare(l, "ctl-p", 1, NULL, &r, NULL))
		snprintf(gp, sizeof(gp), "%s", jstr(r, "guid"));
	json_decref(r);
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "release", gp, NULL);
	{
		struct ibvf_vf_ops ops;
		struct ibvf_port_ops port;
		struct ibvf_attach_vf vf = {0};
		char e2[512];
		struct member sm[64];
		size_t nsm = read_sm(l, sm, 64);
		bool in_sm = false;
		uint64_t gv = 0;

		ibvf_guid_parse(gp, &gv, e2, sizeof(e2));
		for (size_t k = 0; k < nsm; k++)
			in_sm |= sm[k].guid == gv;
		ibvf_vf_fake_init(l->vfdir, &ops, &port, e2, sizeof(e2));
		ops.lookup(ops.ctx, lab_pci(1, pci), &vf, e2, sizeof(e2));
		ibvf_vf_fake_fini(&ops);
		lab_result(
			gp[0] && rc == 0 && !in_sm && vf.port_guid != gv,
			"ibvfd up: pool release of an attached GUID removes it from the SM and the VF "
			"(rc %d)",
			rc);
	}
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "vf", "set-guid", lab_pci(2, pci),
		      "02:00:00:00:00:00:10:01", NULL);
	lab_result(rc == 3 && strstr(err, "ibvfd is running"),
		   "ibvfd up: vf set-guid is refused, exit 3 (rc %d: %.160s)", rc, err);
}

static void ctl_pool_offline(struct lab *l, const char *ibvfctl)
{
	char out[8192], err[8192], path[192], pid[24];
	json_t *j;
	int rc, fd;

	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "allocate", "--owner", "off-a",
		      NULL);
	lab_result(rc == 0 && strstr(out, "GUID:") && strstr(err, "ibvfd is not running") &&
			   strstr(err, "working on the store directly"),
		   "ibvfd down: pool allocate works on the store and says so (rc %d: %.200s)", rc,
		   err);
	lab_result(make_stale_socket(l->sock), "a stale socket file is left at %s", l->sock);
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "--json", "pool", "allocate", "--owner",
		      "off-b", NULL);
	j = json_loads(out, 0, NULL);
	lab_result(rc == 0 && j && !strcmp(jstr(j, "container_id"), "off-b") &&
			   strstr(err, "ibvfd is not running"),
		   "stale socket: --json pool allocate takes the offline path (rc %d: %.160s)", rc,
		   err);
	if (j) {
		char g[64];

		snprintf(g, sizeof(g), "%s", jstr(j, "guid"));
		json_decref(j);
		rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "--json", "pool", "release", g,
			      NULL);
		j = json_loads(out, 0, NULL);
		lab_result(rc == 0 && j && json_is_true(json_object_get(j, "released")) &&
				   strstr(err, "working on the store directly"),
			   "stale socket: --json pool release offline (rc %d)", rc);
		json_decref(j);
	}

	/* offline audit: an owner's GUID in a PKey it did not ask for is its own finding */
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "--json", "pool", "allocate", "--owner",
		      "off-f", NULL);
	j = json_loads(out, 0, NULL);
	if (rc == 0 && j) {
		uint64_t g = 0;
		FILE *f;
		char smsave[8192] = "";
		size_t n = 0;

		ibvf_guid_parse(jstr(j, "guid"), &g, NULL, 0);
		f = fopen(l->smfile, "r");
		if (f) {
			n = fread(smsave, 1, sizeof(smsave) - 1, f);
			fclose(f);
		}
		f = fopen(l->smfile, "a");
		fprintf(f, "0x0034 %016llx full\n", (unsigned long long)g);
		fclose(f);
		rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "--json", "pool", "audit", NULL);
		lab_result(rc == 1 && strstr(out, "sm-foreign-pkey") && strstr(out, "off-f"),
			   "offline audit reports owner off-f in a foreign PKey (rc %d)", rc);
		f = fopen(l->smfile, "w"); /* as it was */
		fwrite(smsave, 1, n, f);
		fclose(f);
		run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "release", jstr(j, "guid"),
			 NULL);
	} else {
		lab_result(false, "offline --json pool allocate (rc %d)", rc);
	}
	json_decref(j);

	/* the lock held (as by an ibvfd starting) while nothing answers: refused */
	snprintf(path, sizeof(path), "%s/ibvfd.lock", l->state);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	lab_result(fd >= 0 && !flock(fd, LOCK_EX | LOCK_NB) && ftruncate(fd, 0) == 0 &&
			   write(fd, pid, strlen(pid)) > 0,
		   "the test holds %s", path);
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "allocate", "--owner", "off-c",
		      NULL);
	snprintf(pid, sizeof(pid), "pid %d", (int)getpid());
	lab_result(rc == 3 && strstr(err, "refusing") && strstr(err, pid),
		   "lock held, socket dead: pool allocate is refused and names the holder (rc %d: "
		   "%.200s)",
		   rc, err);
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "audit", "--fix", NULL);
	lab_result(rc == 3 && strstr(err, "refusing"),
		   "lock held: pool audit --fix is refused (rc %d)", rc);
	/* ibvfd takes the same lock: it waits for the holder before it opens the store */
	unlink(l->sock);
	l->pid = 0;
	{
		pid_t dpid = fork();

		if (dpid == 0) {
			int lf = open(l->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

			close(fd);
			dup2(lf, 2);
			dup2(lf, 1);
			setenv("NOTIFY_SOCKET", l->notify, 1);
			execl(l->ibvfd, "ibvfd", "-f", "-c", l->cfg, (char *)NULL);
			_exit(127);
		}
		l->pid = dpid;
		lab_drain_notify(l);
		lab_result(!lab_wait_notify(l, "READY=1", 1500),
			   "ibvfd started while the lock is held does not get ready");
		close(fd);
		lab_result(lab_wait_notify(l, "READY=1", 15000),
			   "once the lock is free, ibvfd starts and reports READY=1");
	}
	rc = run_ctl2(l, ibvfctl, out, err, sizeof(out), "pool", "allocate", "--owner", "on-again",
		      NULL);
	lab_result(rc == 0 && !strstr(err, "not running") &&
			   file_has(l->log, "pool.allocate: GUID") &&
			   file_has(l->log, "for container on-again"),
		   "ibvfd back: pool allocate goes through it again (rc %d)", rc);
}

static int cmd_ctl_pool(const char *ibvfd, const char *moddir, const char *ibvfctl)
{
	struct lab l;

	if (lab_init(&l, ibvfd, N_VFS, "file", moddir, NULL)) {
		lab_result(false, "lab set-up");
		return 1;
	}
	/* no periodic pass during the test: a record without a VF is rolled back by one */
	l.periodic_s = 3600;
	lab_write_config(&l);
	if (lab_start(&l, 15000) < 0) {
		lab_result(false, "ibvfd starts");
		lab_fini(&l);
		return 1;
	}
	ctl_pool_online(&l, ibvfctl);
	lab_result(WIFEXITED(lab_stop(&l, SIGTERM)), "SIGTERM: ibvfd exits");
	ctl_pool_offline(&l, ibvfctl);
	lab_fini(&l);
	return 0;
}

/* --------------------------------------------------------- ufm-batch -- */

#define N_BATCH 256

struct batch_arg {
	struct lab *l;
	int i;
	int ret;
	pthread_barrier_t *bar;
	bool release;
};

static void *batch_one(void *p)
{
	struct batch_arg *a = p;
	char cid[32];

	snprintf(cid, sizeof(cid), "batch%03d", a->i);
	pthread_barrier_wait(a->bar);
	if (a->release)
		a->ret = lab_release(a->l, cid);
	else
		a->ret = lab_prepare(a->l, cid, a->i, "0x0a5", NULL, NULL);
	return NULL;
}

/* Run N_BATCH concurrent prepares (or releases); return the wall time in ms. */
static int64_t run_batch(struct lab *l, bool release, int *failures)
{
	static struct batch_arg a[N_BATCH];
	pthread_t th[N_BATCH];
	pthread_barrier_t bar;
	pthread_attr_t attr;
	int64_t t0;

	pthread_barrier_init(&bar, NULL, N_BATCH + 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (int i = 0; i < N_BATCH; i++) {
		a[i] = (struct batch_arg){l, i, -1, &bar, release};
		pthread_create(&th[i], &attr, batch_one, &a[i]);
	}
	pthread_attr_destroy(&attr);
	pthread_barrier_wait(&bar);
	t0 = ibvf_mono_ms();
	*failures = 0;
	for (int i = 0; i < N_BATCH; i++) {
		pthread_join(th[i], NULL);
		*failures += a[i].ret != 0;
	}
	pthread_barrier_destroy(&bar);
	return ibvf_mono_ms() - t0;
}

static int cmd_ufm_batch(const char *ibvfd, const char *moddir)
{
	struct ufm_sim_opts so = {.user = "admin", .password = "lab-secret"};
	struct ufm_sim sim;
	struct lab l;
	char err[512], bj[PATH_MAX + 256];
	const char *miss = ufm_sim_missing();
	long adds, removes;
	int64_t ms;
	int fails;

	if (miss)
		return ufm_sim_skip(miss);
	if (ufm_sim_start(&so, &sim, err, sizeof(err))) {
		lab_result(false, "UFM simulator starts: %s", err);
		return 1;
	}
	snprintf(bj, sizeof(bj),
		 "{\"address\": \"127.0.0.1\", \"scheme\": \"http\", \"port\": %d,"
		 " \"username\": \"admin\", \"password_file\": \"%s\"}",
		 sim.port, sim.password_file);
	if (lab_init(&l, ibvfd, N_BATCH, "ufm", moddir, bj)) {
		lab_result(false, "lab set-up");
		ufm_sim_stop(&sim);
		return 1;
	}
	l.window_ms = 0; /* the default: self-clocking batches (issue 17) */
	lab_write_config(&l);
	if (lab_start(&l, 20000) < 0) {
		lab_result(false, "ibvfd starts with the ufm backend");
		lab_fini(&l);
		ufm_sim_stop(&sim);
		return 1;
	}
	ufm_sim_ctl(&sim, "POST", "/_sim/reset", "{\"keep_state\": true}", NULL);
	ufm_sim_config(&sim, "{\"latency_ms\": 200}");
	ms = run_batch(&l, false, &fails);
	adds = ufm_sim_calls(&sim, "add");
	lab_result(fails == 0, "%d concurrent prepares with 200 ms UFM latency succeed", N_BATCH);
	lab_result(adds >= 1 && adds <= 3,
		   "they cost %ld UFM add call(s): at most 3 SM round trips (<= 8 calls)", adds);
	printf("# %d prepares: %lld ms wall time (%.1f UFM round trips of 200 ms)\n", N_BATCH,
	       (long long)ms, (double)ms / 200);
	{
		json_t *st = NULL, *pk;

		ufm_sim_ctl(&sim, "GET", "/_sim/state", NULL, &st);
		pk = json_object_get(json_object_get(st, "0xa5"), "guids");
		lab_result(json_array_size(pk) == N_BATCH,
			   "UFM holds all %d GUIDs in PKey 0xa5 (%zu)", N_BATCH,
			   json_array_size(pk));
		json_decref(st);
	}
	ufm_sim_ctl(&sim, "POST", "/_sim/reset", "{\"keep_state\": true}", NULL);
	ufm_sim_config(&sim, "{\"latency_ms\": 200}");
	ms = run_batch(&l, true, &fails);
	/* DELETE .../guids/{g,...} on UFM >= 6.10, the deprecated POST before */
	removes = ufm_sim_calls(&sim, "delete") + ufm_sim_calls(&sim, "remove");
	lab_result(fails == 0 && removes >= 1 && removes <= 8,
		   "%d concurrent releases: %ld UFM remove call(s)", N_BATCH, removes);
	printf("# %d releases: %lld ms wall time\n", N_BATCH, (long long)ms);
	{
		json_t *st = NULL;

		ufm_sim_ctl(&sim, "GET", "/_sim/state", NULL, &st);
		lab_result(json_array_size(json_object_get(json_object_get(st, "0xa5"), "guids")) ==
				   0,
			   "UFM PKey 0xa5 empty after the releases");
		json_decref(st);
	}
	lab_result(WIFEXITED(lab_stop(&l, SIGTERM)), "SIGTERM: ibvfd exits");
	lab_fini(&l);
	ufm_sim_stop(&sim);
	return 0;
}

/* --------------------------------------------------------- ufm-leaks -- */

/* Does a live owner (ibvfd's list) hold @g and ask for @pkey? */
static bool owner_asked(json_t *owners, uint64_t g, unsigned pkey)
{
	size_t i, k;
	json_t *o, *p;

	json_array_foreach(owners, i, o)
	{
		uint64_t og = 0;

		if (ibvf_guid_parse(json_string_value(json_object_get(o, "guid")), &og, NULL, 0) ||
		    og != g)
			continue;
		json_array_foreach(json_object_get(o, "pkeys"), k, p)
		{
			unsigned long v =
				strtoul(json_string_value(json_object_get(p, "pkey")), NULL, 16);

			if ((v & 0x7fff) == pkey)
				return true;
		}
	}
	return false;
}

/*
 * UFM membership of the pool ranges vs ibvfd's owners: how many (PKey, GUID)
 * no owner asked for (0x7fff left out). @only: count @only's memberships only
 * (0: all); @in: when set, gets whether @only is in any PKey but @except.
 */
static int foreign_members(struct lab *l, struct ufm_sim *sim, uint64_t only, unsigned except,
			   bool *in)
{
	json_t *st = NULL, *owners = NULL, *res = NULL, *v;
	const char *key;
	int bad = 0;

	if (in)
		*in = false;
	if (ufm_sim_ctl(sim, "GET", "/_sim/state", NULL, &st) != 200 ||
	    lab_api(l, "list", json_object(), &res, NULL, 10000))
		bad = -1;
	owners = json_object_get(res, "owners");
	json_object_foreach(st, key, v)
	{
		unsigned pk = (unsigned)strtoul(key, NULL, 16) & 0x7fff;
		size_t i;
		json_t *m;

		if (pk == 0x7fff || bad < 0)
			continue;
		json_array_foreach(json_object_get(v, "guids"), i, m)
		{
			uint64_t g = 0;

			if (ibvf_guid_parse(json_string_value(json_object_get(m, "guid")), &g, NULL,
					    0) ||
			    g < RANGE_START || g > RANGE_END || (only && g != only))
				continue;
			if (in && pk != except)
				*in = true;
			if (!owner_asked(owners, g, pk)) {
				printf("# GUID %016llx in PKey 0x%04x: no owner asked for it\n",
				       (unsigned long long)g, pk);
				bad++;
			}
		}
	}
	json_decref(st);
	json_decref(res);
	return bad;
}

static uint64_t res_guid(json_t *r)
{
	uint64_t g = 0;

	if (ibvf_guid_parse(json_string_value(json_object_get(r, "guid")), &g, NULL, 0))
		return 0;
	return g;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* A reconciliation pass of the running daemon, as ibvfctl daemon audit (no --fix). */
static void audit_pass(struct lab *l)
{
	json_t *r = NULL;

	if (lab_api(l, "audit", json_object(), &r, NULL, 60000))
		printf("# audit failed\n");
	else
		printf("# audit: %lld problem(s) left\n",
		       (long long)json_integer_value(json_object_get(r, "problems")));
	json_decref(r);
}

static int cmd_ufm_leaks(const char *ibvfd, const char *moddir)
{
	struct ufm_sim_opts so = {.user = "admin", .password = "lab-secret"};
	struct ufm_sim sim;
	struct lab l;
	char err[512], bj[PATH_MAX + 256];
	const char *miss = ufm_sim_missing();
	json_t *r = NULL;
	uint64_t ga, gb, gc;
	bool in_other;
	int ret;

	if (miss)
		return ufm_sim_skip(miss);
	if (ufm_sim_start(&so, &sim, err, sizeof(err))) {
		lab_result(false, "UFM simulator starts: %s", err);
		return 1;
	}
	/* UFM answers an add in 2.5 s, ibvfd waits 1 s: it times out and retries */
	snprintf(bj, sizeof(bj),
		 "{\"address\": \"127.0.0.1\", \"scheme\": \"http\", \"port\": %d,"
		 " \"username\": \"admin\", \"password_file\": \"%s\", \"timeout_ms\": 1000}",
		 sim.port, sim.password_file);
	if (lab_init(&l, ibvfd, 8, "ufm", moddir, bj)) {
		lab_result(false, "lab set-up");
		ufm_sim_stop(&sim);
		return 1;
	}
	l.reconcile = "report"; /* the default */
	l.periodic_s = 3600;	/* passes when this test asks (audit), not in between */
	lab_write_config(&l);
	if (lab_start(&l, 20000) < 0) {
		lab_result(false, "ibvfd starts with the ufm backend");
		lab_fini(&l);
		ufm_sim_stop(&sim);
		return 1;
	}

	/* 1. the late add */
	ufm_sim_fault(&sim, "{\"endpoint\": \"add\", \"kind\": \"latency\", \"latency_ms\": 2500}");
	ret = lab_prepare(&l, "tenant-a", 0, "0x0012", &r, NULL);
	ga = res_guid(r);
	json_decref(r);
	lab_result(ret == 0 && ga && ufm_sim_calls(&sim, "add") >= 2,
		   "late add: tenant A's prepare succeeds after a timed-out add (%ld add calls)",
		   ufm_sim_calls(&sim, "add"));
	lab_api(&l, "commit", json_pack("{s:o}", "owner", lab_owner("tenant-a")), NULL, NULL,
		10000);
	lab_result(lab_release(&l, "tenant-a") == 0, "late add: tenant A released");
	/* ... and UFM applies the first add now: A's GUID back in 0x12, no owner */
	{
		bool back = false;

		for (int i = 0; i < 40 && !back; i++) {
			sleep_ms(100);
			foreign_members(&l, &sim, ga, 0, &back);
		}
		lab_result(back,
			   "late add: UFM put A's GUID back into PKey 0x12 after the release");
	}
	for (int i = 0; i < 4; i++) {
		char cid[16];

		snprintf(cid, sizeof(cid), "tenant-b%d", i);
		ret = lab_prepare(&l, cid, 1 + i, "0x0034", &r, NULL);
		gb = res_guid(r);
		json_decref(r);
		lab_result(ret == 0 && foreign_members(&l, &sim, gb, 0x34, &in_other) >= 0 &&
				   !in_other,
			   "late add: tenant B%d's GUID %016llx is in no PKey but 0x34%s", i,
			   (unsigned long long)gb, gb == ga ? " (A's old GUID)" : "");
		sleep_ms(700); /* quarantine_s is 1: A's GUID could come back any time */
	}
	audit_pass(&l);
	lab_result(foreign_members(&l, &sim, 0, 0, NULL) == 0,
		   "late add: after a pass no GUID is in a PKey its owner did not ask for");

	/* 2. the faked removal: 200 {} without removing (the removal and its retry) */
	ret = lab_prepare(&l, "tenant-c", 6, "0x0056", &r, NULL);
	gc = res_guid(r);
	json_decref(r);
	ufm_sim_fault(&sim, "{\"endpoint\": \"delete\", \"kind\": \"empty\", \"count\": 2}");
	ret = lab_api(&l, "release", json_pack("{s:o}", "owner", lab_owner("tenant-c")), &r, NULL,
		      70000);
	lab_result(ret == 0 && json_is_true(json_object_get(r, "sm_removal_pending")),
		   "faked remove: the release says sm_removal_pending");
	json_decref(r);
	ret = lab_prepare(&l, "tenant-d", 7, "0x0078", &r, NULL);
	lab_result(ret == 0 && res_guid(r) != gc &&
			   foreign_members(&l, &sim, res_guid(r), 0x78, &in_other) >= 0 &&
			   !in_other,
		   "faked remove: the next tenant gets another GUID, in no other PKey");
	json_decref(r);
	audit_pass(&l);
	lab_result(foreign_members(&l, &sim, gc, 0, &in_other) >= 0 && !in_other,
		   "faked remove: a pass removed C's GUID %016llx from 0x56",
		   (unsigned long long)gc);
	lab_result(foreign_members(&l, &sim, 0, 0, NULL) == 0,
		   "faked remove: after a pass no GUID is in a PKey its owner did not ask for");

	lab_result(WIFEXITED(lab_stop(&l, SIGTERM)), "SIGTERM: ibvfd exits");
	lab_fini(&l);
	ufm_sim_stop(&sim);
	return 0;
}

/* ---------------------------------------------------------- adopted -- */

static void rm_store_files(struct lab *l)
{
	static const char *const names[] = {"pool.db", "pool.db-wal", "pool.db-shm"};
	char path[256];

	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", l->state, names[i]);
		unlink(path);
	}
}

/* The owner (container_id) ibvfd's list shows for GUID @g, "" if none. */
static void list_owner_of(struct lab *l, uint64_t g, char *cid, size_t len, char *pci, size_t plen)
{
	json_t *r = NULL, *it;
	size_t i;

	cid[0] = pci[0] = 0;
	if (lab_api(l, "list", NULL, &r, NULL, 5000))
		return;
	json_array_foreach(json_object_get(r, "owners"), i, it)
	{
		uint64_t og = 0;

		if (!ibvf_guid_parse(jstr(it, "guid"), &og, NULL, 0) && og == g) {
			snprintf(cid, len, "%s",
				 jstr(json_object_get(it, "owner"), "container_id"));
			snprintf(pci, plen, "%s", jstr(it, "pci"));
		}
	}
	json_decref(r);
}

/*
 * Issue 14: records `ibvfctl pool rebuild` adopted after a store loss are
 * released by the owner's DEL (release with the VF's PCI address and GUID,
 * as the CNI plugin sends them) like any other record; the start-up pass
 * binds an SM-only adoption to the VF that carries its GUID; another real
 * owner's record is never released that way.
 */
static int cmd_adopted(const char *ibvfd, const char *moddir, const char *ibvfctl)
{
	struct lab l;
	json_t *r = NULL;
	uint64_t ga = 0, gb = 0;
	char out[8192], err[8192], cid[128], pci[32], want[16];
	int rc;

	if (lab_init(&l, ibvfd, N_VFS, "file", moddir, NULL) || lab_start(&l, 15000) < 0) {
		lab_result(false, "lab set-up, ibvfd starts");
		lab_fini(&l);
		return 1;
	}
	if (!lab_prepare(&l, "pod-a", 0, NULL, &r, NULL))
		ga = res_guid(r);
	json_decref(r);
	r = NULL;
	if (!lab_prepare(&l, "pod-b", 1, NULL, &r, NULL))
		gb = res_guid(r);
	json_decref(r);
	r = NULL;
	lab_result(ga && gb, "pods a and b attached");
	lab_result(WIFEXITED(lab_stop(&l, SIGTERM)), "ibvfd stopped");
	rm_store_files(&l);
	rc = run_ctl2(&l, ibvfctl, out, err, sizeof(out), "pool", "rebuild", NULL);
	lab_result(rc == 0 && strstr(out, "ibvf-adopted-"),
		   "store deleted: ibvfctl pool rebuild adopts what the SM shows (rc %d: %.200s)",
		   rc, err);
	if (lab_start(&l, 15000) < 0) {
		lab_result(false, "ibvfd starts after the rebuild");
		lab_fini(&l);
		return 1;
	}
	list_owner_of(&l, ga, cid, sizeof(cid), pci, sizeof(pci));
	lab_result(!strncmp(cid, IBVF_POOL_ADOPTED_PREFIX, strlen(IBVF_POOL_ADOPTED_PREFIX)) &&
			   !strcmp(pci, lab_pci(0, want)),
		   "A's GUID is held by an adopted record bound to VF 0 (%s on '%s')", cid, pci);
	/* a release that names another owner's VF and GUID releases nothing */
	lab_prepare(&l, "pod-c", 2, NULL, NULL, NULL);
	r = NULL;
	{
		json_t *list = NULL;
		uint64_t gc = 0;

		if (!lab_api(&l, "list", NULL, &list, NULL, 5000)) {
			size_t i;
			json_t *it;

			json_array_foreach(
				json_object_get(list, "owners"), i,
				it) if (!strcmp(jstr(json_object_get(it, "owner"), "container_id"),
						"pod-c"))
				ibvf_guid_parse(jstr(it, "guid"), &gc, NULL, 0);
		}
		json_decref(list);
		char gs[IBVF_GUID_STR_LEN];

		rc = lab_release_at(&l, "pod-x", 2, gc, &r);
		lab_result(rc == 0 && gc && json_is_false(json_object_get(r, "released")) &&
				   daemon_holds(&l, "pod-c", ibvf_guid_format(gc, gs)),
			   "a release naming pod-c's VF and GUID does not release pod-c's record");
		json_decref(r);
		r = NULL;
	}
	rc = lab_release_at(&l, "pod-a", 0, ga, &r);
	lab_result(rc == 0 && json_is_true(json_object_get(r, "released")),
		   "pod-a's DEL (release with VF 0 and its GUID) releases the adopted record");
	json_decref(r);
	r = NULL;
	list_owner_of(&l, ga, cid, sizeof(cid), pci, sizeof(pci));
	{
		struct member sm[64];
		size_t nsm = read_sm(&l, sm, 64);
		bool in_sm = false;

		for (size_t k = 0; k < nsm; k++)
			in_sm |= sm[k].guid == ga;
		lab_result(!cid[0] && !in_sm, "A's GUID is held by nobody and left the SM");
	}
	rc = lab_prepare(&l, "pod-d", 0, NULL, &r, NULL);
	lab_result(rc == 0, "VF 0 is free for a new attach");
	json_decref(r);
	r = NULL;
	/* by GUID alone too (a cache without the PCI address) */
	rc = lab_release_at(&l, "pod-b", -1, gb, &r);
	lab_result(rc == 0 && json_is_true(json_object_get(r, "released")),
		   "pod-b's release with its GUID only releases its adopted record");
	json_decref(r);
	lab_result(WIFEXITED(lab_stop(&l, SIGTERM)), "SIGTERM: ibvfd exits");
	lab_fini(&l);
	return 0;
}

/* --------------------------------------------------------- campaign -- */

/*
 * Issue 14's campaign: kill -9 at random points, store damage (pool.db
 * deleted, WAL truncated or damaged, pool.id removed, also while ibvfd runs)
 * and SM faults (late adds, faked 200 removes, list timeouts, 503s) over
 * CYCLES attach/release cycles through the real ibvfd, the fake VF driver
 * and the UFM simulator, with a model of who holds what. After every
 * restart: no GUID on two VFs, no GUID in a PKey its owner did not ask for,
 * nothing leaked (records, SM members, VF GUIDs), nothing left mid-flight.
 */
#define CAMP_VFS     8
#define CAMP_TIMEOUT 300 /* sm.config timeout_ms */
#define CAMP_LATE    (CAMP_TIMEOUT + 250)

static const char *const camp_pkeys[] = {"0x0012", "0x0034", "0x0056", "0x0078"};

struct camp_slot {
	bool held;
	char cid[32];
	unsigned pkey;
	uint64_t guid;
};

struct camp {
	struct lab l;
	struct ufm_sim sim;
	const char *ibvfctl;
	struct camp_slot slot[CAMP_VFS];
	unsigned rnd;
	int cycles, kills, restarts, damages, rebuilds, faults, checks, prepares, releases;
	int failed_prepares, operator_releases, late_adds, gc_releases, gc_busy;
	int damage_kind[5];
	bool late_pending; /* a late add may still land */
	char why[1024];
};

static bool camp_fail(struct camp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool camp_fail(struct camp *c, const char *fmt, ...)
{
	va_list ap;

	if (c->why[0])
		return false;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	return false;
}

static bool is_adopted(const char *cid)
{
	return !strncmp(cid, IBVF_POOL_ADOPTED_PREFIX, strlen(IBVF_POOL_ADOPTED_PREFIX));
}

/* Run ibvfctl with the lab's config (stdout, stderr to @out, @err); exit status. */
static int camp_ctl(struct camp *c, char *out, char *err, size_t len, const char *a1,
		    const char *a2, const char *a3)
{
	return run_ctl2(&c->l, c->ibvfctl, out, err, len, a1, a2, a3, NULL);
}

/* status says ready; else *@store tells whether the store is a reason. */
static bool camp_ready(struct camp *c, bool *store)
{
	json_t *r = NULL, *it;
	bool ready = false;
	size_t i;

	*store = false;
	if (lab_api(&c->l, "status", NULL, &r, NULL, 10000))
		return false;
	ready = json_is_true(json_object_get(r, "ready"));
	json_array_foreach(json_object_get(r, "not_ready"), i, it) *store |=
		!strcmp(jstr(it, "check"), "store");
	json_decref(r);
	return ready;
}

/* ibvfd stopped: ibvfctl pool rebuild, as docs/operations.md says. */
static bool camp_rebuild(struct camp *c)
{
	static char out[65536], err[65536];
	int rc = camp_ctl(c, out, err, sizeof(out), "pool", "rebuild", NULL);

	c->rebuilds++;
	if (rc)
		return camp_fail(c, "ibvfctl pool rebuild: rc %d: %.300s", rc, err);
	return true;
}

/* (Re)start ibvfd; a lost store is rebuilt (ibvfd stopped) and ibvfd started again. */
static bool camp_start(struct camp *c)
{
	bool store;

	for (int tries = 0; tries < 3; tries++) {
		if (lab_start(&c->l, 20000) < 0)
			return camp_fail(c, "ibvfd does not restart (READY=1)");
		c->restarts++;
		for (int i = 0; i < 50; i++) {
			if (camp_ready(c, &store))
				return true;
			if (store)
				break;
			sleep_ms(100);
		}
		if (!store)
			return camp_fail(c, "ibvfd not ready 5 s after its start");
		/* the store lost records: refused until rebuilt, ibvfd stopped */
		lab_stop(&c->l, SIGTERM);
		if (!camp_rebuild(c))
			return false;
	}
	return camp_fail(c, "still not ready after a rebuild");
}

struct camp_rec {
	char cid[160], pci[32], state[24];
	uint64_t guid;
	unsigned pkeys[8];
	size_t n_pkeys;
};

static size_t camp_list(struct camp *c, struct camp_rec *rec, size_t max)
{
	json_t *r = NULL, *it, *pk;
	size_t i, k, n = 0;

	if (lab_api(&c->l, "list", json_pack("{s:i}", "limit", 1000), &r, NULL, 20000)) {
		camp_fail(c, "list failed");
		return 0;
	}
	json_array_foreach(json_object_get(r, "owners"), i, it)
	{
		struct camp_rec *x = &rec[n];

		if (n == max)
			break;
		memset(x, 0, sizeof(*x));
		snprintf(x->cid, sizeof(x->cid), "%s",
			 jstr(json_object_get(it, "owner"), "container_id"));
		snprintf(x->pci, sizeof(x->pci), "%s", jstr(it, "pci"));
		snprintf(x->state, sizeof(x->state), "%s", jstr(it, "state"));
		ibvf_guid_parse(jstr(it, "guid"), &x->guid, NULL, 0);
		json_array_foreach(json_object_get(it, "pkeys"), k, pk) if (x->n_pkeys < 8)
			x->pkeys[x->n_pkeys++] =
			(unsigned)strtoul(jstr(pk, "pkey"), NULL, 16) & 0x7fff;
		n++;
	}
	json_decref(r);
	return n;
}

/* The operator's step after a rebuild: release adopted records no VF holds (docs). */
static void camp_release_strays(struct camp *c)
{
	static struct camp_rec rec[256];
	size_t n = camp_list(c, rec, 256);

	for (size_t i = 0; i < n; i++) {
		char out[4096], err[4096], g[IBVF_GUID_STR_LEN];
		bool on_held = false;

		if (!is_adopted(rec[i].cid))
			continue;
		for (int v = 0; v < CAMP_VFS; v++)
			on_held |= c->slot[v].held && c->slot[v].guid == rec[i].guid;
		if (on_held)
			continue;
		if (!camp_ctl(c, out, err, sizeof(out), "pool", "release",
			      ibvf_guid_format(rec[i].guid, g)))
			c->operator_releases++;
	}
}

/*
 * The runtime's CNI GC (as containerd and CRI-O run it): every attachment of
 * the network not in the valid list (the model's held slots) is released. A
 * store rolled back by a damaged WAL shows owners that were released before
 * the loss; their DEL is long gone, so GC is what releases them. An owner
 * whose VF an operation holds right then (the warm pass re-warming it after
 * the interrupted owner's DEL) is skipped and reported (skipped_busy,
 * docs/api.md) for the next GC: runtimes run GC again and again, so this
 * one does too until nothing is skipped (50 tries at most).
 */
static void camp_gc(struct camp *c)
{
	for (int tries = 0; tries < 50; tries++) {
		json_t *valid = json_array(), *r = NULL;
		size_t busy = 0;

		for (int v = 0; v < CAMP_VFS; v++)
			if (c->slot[v].held)
				json_array_append_new(valid,
						      json_pack("{s:s,s:s}", "container_id",
								c->slot[v].cid, "ifname", "net1"));
		if (!lab_api(&c->l, "gc",
			     json_pack("{s:s,s:o}", "network", "lab-net", "valid", valid), &r, NULL,
			     60000)) {
			c->gc_releases += (int)json_array_size(json_object_get(r, "released"));
			busy = json_array_size(json_object_get(r, "skipped_busy"));
		}
		json_decref(r);
		if (!busy)
			return;
		c->gc_busy++;
		sleep_ms(100);
	}
}

/* Every invariant, after a restart. False with c->why set. */
static bool camp_check(struct camp *c, int cycle)
{
	static struct camp_rec rec[256];
	struct ibvf_vf_ops ops;
	struct ibvf_port_ops port;
	uint64_t vfg[CAMP_VFS] = {0};
	char err[512], g[IBVF_GUID_STR_LEN];
	json_t *st = NULL, *v, *m;
	const char *key;
	size_t n, i;

	c->checks++;
	if (c->late_pending) {
		/* a late add consumed before now lands within CAMP_LATE; unconsumed ones go */
		ufm_sim_ctl(&c->sim, "DELETE", "/_sim/faults", NULL, NULL);
		sleep_ms(CAMP_LATE + 100);
		c->late_pending = false;
	}
	/* a pass: orphans of the pool ranges are removed, lost memberships re-pushed */
	if (lab_api(&c->l, "audit", json_pack("{s:b}", "fix", 1), NULL, NULL, 60000))
		return camp_fail(c, "cycle %d: audit pass failed", cycle);
	camp_release_strays(c);
	camp_gc(c);
	if (c->l.warm) {
		/* vf.warm: the free VFs are warm again (the gc above kicked a warm pass) */
		int held = 0;

		for (int k = 0; k < CAMP_VFS; k++)
			held += c->slot[k].held;
		if (!warm_settled(&c->l, CAMP_VFS - held))
			return camp_fail(c, "cycle %d: the %d free VFs are not warm again", cycle,
					 CAMP_VFS - held);
	}
	n = camp_list(c, rec, 256);
	if (c->why[0])
		return false;
	/* VFs: read back; no GUID on two VFs */
	ibvf_vf_fake_init(c->l.vfdir, &ops, &port, err, sizeof(err));
	for (int k = 0; k < CAMP_VFS; k++) {
		struct ibvf_attach_vf vf;
		char pci[16];

		if (!ops.lookup(ops.ctx, lab_pci(k, pci), &vf, err, sizeof(err)))
			vfg[k] = vf.port_guid;
	}
	ibvf_vf_fake_fini(&ops);
	for (int a = 0; a < CAMP_VFS; a++)
		for (int b = a + 1; b < CAMP_VFS; b++)
			if (vfg[a] && vfg[a] == vfg[b])
				return camp_fail(c, "cycle %d: GUID %s on VF %d and VF %d", cycle,
						 ibvf_guid_format(vfg[a], g), a, b);
	/* records: nothing mid-flight, each one a held slot's (its owner or adopted) */
	for (i = 0; i < n; i++) {
		const struct camp_rec *x = &rec[i];
		bool found = false;

		if (strcmp(x->state, "port_ready") && strcmp(x->state, "handed"))
			return camp_fail(c, "cycle %d: GUID %s (%s) left %s", cycle,
					 ibvf_guid_format(x->guid, g), x->cid, x->state);
		/* a warm VF's record: on a free slot's VF, which carries it */
		for (int k = 0; c->l.warm && k < CAMP_VFS; k++) {
			char pci[16];

			if (!strncmp(x->cid, IBVF_POOL_WARM_PREFIX,
				     strlen(IBVF_POOL_WARM_PREFIX)) &&
			    !c->slot[k].held && !strcmp(x->pci, lab_pci(k, pci)) &&
			    vfg[k] == x->guid)
				found = true;
		}
		for (int k = 0; k < CAMP_VFS; k++) {
			char pci[16];
			const struct camp_slot *sl = &c->slot[k];

			if (sl->held && sl->guid == x->guid && !strcmp(x->pci, lab_pci(k, pci)) &&
			    (!strcmp(x->cid, sl->cid) || is_adopted(x->cid)))
				found = true;
		}
		if (!found) {
			int k = 0;
			char pci[16];

			while (k < CAMP_VFS - 1 && strcmp(x->pci, lab_pci(k, pci)))
				k++;
			return camp_fail(c,
					 "cycle %d: leaked record: GUID %s held by %s on '%s' (%s, "
					 "slot %d %s, its VF carries %016llx)",
					 cycle, ibvf_guid_format(x->guid, g), x->cid, x->pci,
					 x->state, k, c->slot[k].held ? "held" : "free",
					 (unsigned long long)vfg[k]);
		}
	}
	for (int k = 0; k < CAMP_VFS; k++) {
		const struct camp_slot *sl = &c->slot[k];
		bool found = false;

		for (i = 0; i < n; i++)
			found |= rec[i].guid == sl->guid;
		if (sl->held && (!found || vfg[k] != sl->guid))
			return camp_fail(c,
					 "cycle %d: %s's GUID %s on VF %d: %s, the VF carries %s",
					 cycle, sl->cid, ibvf_guid_format(sl->guid, g), k,
					 found ? "held" : "no record", vfg[k] ? "another" : "none");
		for (i = 0; c->l.warm && !sl->held && i < n; i++)
			if (rec[i].guid == vfg[k] && !strncmp(rec[i].cid, IBVF_POOL_WARM_PREFIX,
							      strlen(IBVF_POOL_WARM_PREFIX)))
				break; /* warm: its own fresh GUID */
		if (!sl->held && vfg[k] >= RANGE_START && vfg[k] <= RANGE_END &&
		    !(c->l.warm && i < n))
			return camp_fail(c, "cycle %d: free VF %d still carries GUID %s", cycle, k,
					 ibvf_guid_format(vfg[k], g));
	}
	/* SM: every member of the ranges is an owner's, in a PKey that owner asked for */
	if (ufm_sim_ctl(&c->sim, "GET", "/_sim/state", NULL, &st) != 200)
		return camp_fail(c, "cycle %d: UFM state not readable", cycle);
	json_object_foreach(st, key, v)
	{
		unsigned pk = (unsigned)strtoul(key, NULL, 16) & 0x7fff;

		if (pk == 0x7fff)
			continue;
		json_array_foreach(json_object_get(v, "guids"), i, m)
		{
			uint64_t gm = 0;
			bool asked = false;

			if (ibvf_guid_parse(jstr(m, "guid"), &gm, NULL, 0) || gm < RANGE_START ||
			    gm > RANGE_END)
				continue;
			for (size_t r = 0; r < n; r++)
				for (size_t q = 0; q < rec[r].n_pkeys; q++)
					asked |= rec[r].guid == gm && rec[r].pkeys[q] == pk;
			if (!asked) {
				json_decref(st);
				return camp_fail(c,
						 "cycle %d: GUID %s in PKey 0x%04x: no owner asked "
						 "for it (%s)",
						 cycle, ibvf_guid_format(gm, g), pk,
						 n ? "leak or foreign PKey" : "no owner at all");
			}
		}
	}
	/* ... and every held slot is in its PKey */
	for (int k = 0; k < CAMP_VFS; k++) {
		const struct camp_slot *sl = &c->slot[k];
		char pks[16];
		bool in = false;

		if (!sl->held)
			continue;
		snprintf(pks, sizeof(pks), "0x%x", sl->pkey);
		json_array_foreach(json_object_get(json_object_get(st, pks), "guids"), i, m)
		{
			uint64_t gm = 0;

			in |= !ibvf_guid_parse(jstr(m, "guid"), &gm, NULL, 0) && gm == sl->guid;
		}
		if (!in) {
			json_decref(st);
			return camp_fail(c, "cycle %d: %s's GUID %s missing from PKey 0x%04x",
					 cycle, sl->cid, ibvf_guid_format(sl->guid, g), sl->pkey);
		}
	}
	json_decref(st);
	return true;
}

/* ibvfd is dead (kill -9): damage the store as a disk or an operator would. */
static void camp_damage(struct camp *c)
{
	char path[256], junk[64];
	int kind = (int)(rand_r(&c->rnd) % 4), fd;
	struct stat st;

	c->damages++;
	c->damage_kind[kind]++;
	switch (kind) {
	case 0: /* pool.db (+ -wal, -shm) deleted ("moved aside") */
		rm_store_files(&c->l);
		break;
	case 1: /* WAL truncated at a random point */
	case 2: /* WAL frame data or header damaged */
		snprintf(path, sizeof(path), "%s/pool.db-wal", c->l.state);
		if (stat(path, &st) || st.st_size <= 32)
			break;
		if (kind == 1) {
			if (truncate(path, (off_t)(rand_r(&c->rnd) % (unsigned)st.st_size)))
				break;
		} else if ((fd = open(path, O_WRONLY)) >= 0) {
			for (size_t i = 0; i < sizeof(junk); i++)
				junk[i] = (char)rand_r(&c->rnd);
			if (pwrite(fd, junk, sizeof(junk),
				   (off_t)(rand_r(&c->rnd) % (unsigned)(st.st_size - 32))) < 0)
				printf("# WAL damage: %s\n", strerror(errno));
			close(fd);
		}
		break;
	case 3: /* pool.id removed */
		snprintf(path, sizeof(path), "%s/pool.id", c->l.state);
		unlink(path);
		break;
	}
}

static void camp_fault(struct camp *c)
{
	char rule[160];

	c->faults++;
	switch (rand_r(&c->rnd) % 4) {
	case 0: /* an add UFM applies after ibvfd timed out (and retried) */
		snprintf(rule, sizeof(rule),
			 "{\"endpoint\": \"add\", \"kind\": \"latency\", \"latency_ms\": %d, "
			 "\"count\": 1}",
			 CAMP_LATE);
		c->late_pending = true;
		c->late_adds++;
		break;
	case 1: /* a remove answered 200 {} without removing */
		snprintf(rule, sizeof(rule),
			 "{\"endpoint\": \"remove\", \"kind\": \"empty\", \"count\": %u}",
			 1 + rand_r(&c->rnd) % 2);
		break;
	case 2: /* a listing that times out */
		snprintf(rule, sizeof(rule),
			 "{\"endpoint\": \"list\", \"kind\": \"latency\", \"latency_ms\": %d, "
			 "\"count\": 1}",
			 CAMP_LATE);
		c->late_pending = true; /* its sleep holds a thread: let it end too */
		break;
	default: /* UFM answers 503 */
		snprintf(rule, sizeof(rule),
			 "{\"endpoint\": \"%s\", \"kind\": \"status\", \"status\": 503, "
			 "\"count\": 1}",
			 rand_r(&c->rnd) % 2 ? "add" : "remove");
		break;
	}
	ufm_sim_fault(&c->sim, rule);
}

/* pool.id removed while ibvfd runs: the store is marked lost; stop, rebuild, start. */
static bool camp_id_removed_live(struct camp *c)
{
	char path[256];
	bool store = false;

	snprintf(path, sizeof(path), "%s/pool.id", c->l.state);
	unlink(path);
	c->damages++;
	c->damage_kind[4]++;
	/* noticed at the next write or periodic pass (1 s) */
	for (int i = 0; i < 40 && !store; i++) {
		camp_ready(c, &store);
		if (!store)
			sleep_ms(100);
	}
	if (!store)
		return camp_fail(c, "pool.id removed while ibvfd runs: status still says ready");
	lab_stop(&c->l, SIGTERM);
	return camp_rebuild(c) && camp_start(c);
}

static int cmd_campaign(const char *ibvfd, const char *moddir, const char *ibvfctl, int cycles,
			unsigned seed, bool warm)
{
	struct ufm_sim_opts so = {.user = "admin", .password = "lab-secret"};
	static struct camp c;
	char err[512], bj[PATH_MAX + 256];
	const char *miss = ufm_sim_missing();
	int64_t t0 = ibvf_mono_ms();
	int cyc;

	if (miss)
		return ufm_sim_skip(miss);
	memset(&c, 0, sizeof(c));
	c.rnd = seed;
	c.ibvfctl = ibvfctl;
	if (ufm_sim_start(&so, &c.sim, err, sizeof(err))) {
		lab_result(false, "UFM simulator starts: %s", err);
		return 1;
	}
	snprintf(bj, sizeof(bj),
		 "{\"address\": \"127.0.0.1\", \"scheme\": \"http\", \"port\": %d,"
		 " \"username\": \"admin\", \"password_file\": \"%s\", \"timeout_ms\": %d,"
		 " \"change_wait_ms\": 0}",
		 c.sim.port, c.sim.password_file, CAMP_TIMEOUT);
	if (lab_init(&c.l, ibvfd, CAMP_VFS, "ufm", moddir, bj)) {
		lab_result(false, "lab set-up");
		ufm_sim_stop(&c.sim);
		return 1;
	}
	c.l.delay_ms = "2"; /* a window inside the VF step for the killer */
	c.l.warm = warm;
	/* change_wait_ms 0: the simulator serialises changes itself (docs/ufm.md) */
	lab_write_config(&c.l);
	chmod(c.l.cfg, 0600);
	printf("# campaign: %d cycles, seed %u, warm %s, lab %s, UFM simulator port %d\n", cycles,
	       seed, warm ? "on" : "off", c.l.dir, c.sim.port);
	if (!camp_start(&c)) {
		lab_result(false, "ibvfd starts with the ufm backend: %s", c.why);
		goto out;
	}
	for (cyc = 0; cyc < cycles && !c.why[0]; cyc++) {
		int vf = (int)(rand_r(&c.rnd) % CAMP_VFS), pk = (int)(rand_r(&c.rnd) % 4);
		struct camp_slot *sl = &c.slot[vf];
		bool kill9 = rand_r(&c.rnd) % 7 == 0, was_held = sl->held, store;
		struct killer k = {.pid = c.l.pid};
		json_t *res = NULL;
		int ret, wst;

		c.cycles++;
		if (rand_r(&c.rnd) % 9 == 0)
			camp_fault(&c);
		if (!was_held) {
			snprintf(sl->cid, sizeof(sl->cid), "camp%05d", cyc);
			sl->pkey = (unsigned)strtoul(camp_pkeys[pk], NULL, 16);
		}
		if (kill9) {
			k.delay_us = (unsigned)(rand_r(&c.rnd) % 30000);
			pthread_create(&k.th, NULL, killer_run, &k);
		}
		if (!was_held) {
			c.prepares++;
			ret = lab_prepare(&c.l, sl->cid, vf, camp_pkeys[pk], &res, NULL);
			if (!ret) {
				sl->held = true;
				sl->guid = res_guid(res);
			} else {
				c.failed_prepares++;
			}
		} else {
			c.releases++;
			ret = lab_release_at(&c.l, sl->cid, vf, sl->guid, NULL);
			if (!ret)
				sl->held = false;
		}
		json_decref(res);
		if (kill9) {
			pthread_join(k.th, NULL);
			waitpid(c.l.pid, &wst, 0);
			c.l.pid = 0;
			c.kills++;
			if (rand_r(&c.rnd) % 3 == 0)
				camp_damage(&c);
			if (!camp_start(&c))
				break;
			/* the interrupted owner's DEL (as the CNI retries it) always succeeds */
			if (lab_release_at(&c.l, sl->cid, vf, sl->held ? sl->guid : 0, NULL)) {
				camp_fail(&c, "cycle %d: %s's release after the restart failed",
					  cyc, sl->cid);
				break;
			}
			sl->held = false;
			camp_check(&c, cyc);
		} else if (ret && !was_held) {
			/* a failed ADD rolls back with a release */
			lab_release_at(&c.l, sl->cid, vf, 0, NULL);
			if (!camp_ready(&c, &store) && store) {
				lab_stop(&c.l, SIGTERM);
				if (camp_rebuild(&c) && camp_start(&c))
					camp_check(&c, cyc);
			}
		} else if (ret) {
			camp_fail(&c, "cycle %d: release of %s failed", cyc, sl->cid);
		}
		if (!c.why[0] && rand_r(&c.rnd) % 200 == 0 && camp_id_removed_live(&c))
			camp_check(&c, cyc);
		if (getenv("IBVF_CAMPAIGN_VERBOSE") && cyc % 100 == 99)
			printf("# cycle %d: %d kills, %d damages, %d faults, %d checks, %.1f s\n",
			       cyc + 1, c.kills, c.damages, c.faults, c.checks,
			       (double)(ibvf_mono_ms() - t0) / 1000);
	}
	lab_result(!c.why[0], "%d cycles: every check after every restart held%s%s", c.cycles,
		   c.why[0] ? ": " : "", c.why);
	/* the end: every owner released, then nothing may be left anywhere */
	if (!c.why[0]) {
		for (int v = 0; v < CAMP_VFS; v++)
			if (c.slot[v].held &&
			    !lab_release_at(&c.l, c.slot[v].cid, v, c.slot[v].guid, NULL))
				c.slot[v].held = false;
		lab_result(camp_check(&c, cyc),
			   "all released: no record, VF GUID or SM member left%s%s",
			   c.why[0] ? ": " : "", c.why);
	}
	printf("# campaign counts: %d cycles (%d prepares, %d failed; %d releases), %d kill -9, "
	       "%d restarts, %d store damages (%d pool.db deleted, %d WAL truncated, %d WAL "
	       "damaged, %d pool.id removed, %d pool.id removed while running), %d rebuilds, %d "
	       "SM faults (%d late adds), %d checks, %d operator releases, %d GC releases (%d GC "
	       "calls again for owners skipped busy), %.1f s\n",
	       c.cycles, c.prepares, c.failed_prepares, c.releases, c.kills, c.restarts, c.damages,
	       c.damage_kind[0], c.damage_kind[1], c.damage_kind[2], c.damage_kind[3],
	       c.damage_kind[4], c.rebuilds, c.faults, c.late_adds, c.checks, c.operator_releases,
	       c.gc_releases, c.gc_busy, (double)(ibvf_mono_ms() - t0) / 1000);
	lab_result(c.kills > 0 && c.damages > 0 && c.faults > 0 && c.checks >= c.kills,
		   "the campaign did kill, damage and fault (%d, %d, %d) and checked after each "
		   "restart (%d checks)",
		   c.kills, c.damages, c.faults, c.checks);
out:
	lab_stop(&c.l, SIGTERM);
	lab_fini(&c.l);
	ufm_sim_stop(&c.sim);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr,
			"usage: test_ibvfd smoke|ctl-pool|crash|crash-warm|ufm-batch|ufm-leaks|adopted|campaign|campaign-warm IBVFD "
			"SM_MODULE_DIR [IBVFCTL|CYCLES] [SEED]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	ibvf_log_init("test_ibvfd", IBVF_LOG_STDERR, LOG_ERR);
	if (!strcmp(argv[1], "smoke"))
		cmd_smoke(argv[2], argv[3], argc > 4 ? argv[4] : NULL);
	else if (!strcmp(argv[1], "ctl-pool") && argc > 4)
		cmd_ctl_pool(argv[2], argv[3], argv[4]);
	else if (!strcmp(argv[1], "adopted") && argc > 4)
		cmd_adopted(argv[2], argv[3], argv[4]);
	else if ((!strcmp(argv[1], "campaign") || !strcmp(argv[1], "campaign-warm")) && argc > 4) {
		/*
		 * IBVF_CAMPAIGN_CYCLES: a longer soak (bench-style runs);
		 * IBVF_CAMPAIGN_SEED: another seed, or the printed one of a failed run again
		 */
		const char *env = getenv("IBVF_CAMPAIGN_CYCLES"),
			   *sd = getenv("IBVF_CAMPAIGN_SEED");
		int r = cmd_campaign(argv[2], argv[3], argv[4],
				     env	? atoi(env)
				     : argc > 5 ? atoi(argv[5])
						: 1000,
				     sd		? (unsigned)strtoul(sd, NULL, 0)
				     : argc > 6 ? (unsigned)strtoul(argv[6], NULL, 0)
						: 20261201u,
				     argv[1][8] == '-');

		if (r == 77 || (r && !lab_n_ok && !lab_n_fail))
			return r;
	} else if (!strcmp(argv[1], "ufm-batch") || !strcmp(argv[1], "ufm-leaks")) {
		int r = argv[1][4] == 'b' ? cmd_ufm_batch(argv[2], argv[3])
					  : cmd_ufm_leaks(argv[2], argv[3]);

		if (r == 77 || (r && !lab_n_ok && !lab_n_fail))
			return r;
	} else if (!strcmp(argv[1], "crash") || !strcmp(argv[1], "crash-warm"))
		cmd_crash(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 200,
			  argc > 5 ? (unsigned)strtoul(argv[5], NULL, 0) : 20261130u,
			  argv[1][5] == '-');
	else
		return 2;
	printf("1..%d\n%d passed, %d failed\n", lab_n_ok + lab_n_fail, lab_n_ok, lab_n_fail);
	return lab_n_fail ? 1 : 0;
}
