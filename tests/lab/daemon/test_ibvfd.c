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
 *   test_ibvfd crash IBVFD SM_MODULE_DIR [CYCLES] [SEED]
 *       CYCLES (200) prepare/release cycles; before about one in four
 *       requests a thread kill -9s the daemon after a seeded random delay.
 *       After each restart (start-up reconciliation) the store, the VFs and
 *       the SM must agree: no attach left mid-flight, no duplicate or leaked
 *       GUID, SM membership == store.
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
#include "vf_fake.h"

#define N_VFS	    8
#define RANGE_START 0x0002c90300b00001ull
#define RANGE_END   0x0002c90300b00fffull

static int n_ok, n_fail;

static void result(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void result(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", ok ? "ok" : "not ok", n_ok + n_fail + 1);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		n_ok++;
	else
		n_fail++;
}

struct lab {
	char dir[64];
	char cfg[128], sock[128], smfile[128], vfdir[128], state[128], notify[128], log[128];
	char failfile[128];
	const char *ibvfd, *moddir;
	int nfd;		/* our NOTIFY_SOCKET */
	pid_t pid;
	const char *delay_ms;
};

static void write_config(struct lab *l, const char *extra)
{
	FILE *f = fopen(l->cfg, "w");

	fprintf(f,
		"{\"state_dir\": \"%s\", \"run_dir\": \"%s/run\", \"log_level\": \"info\",\n"
		" \"pool\": {\"ranges\": [{\"start\": \"0x%016llx\", \"end\": \"0x%016llx\"}],"
		" \"quarantine_s\": 1, \"sync\": \"normal\"},\n"
		" \"sm\": {\"backend\": \"file\", \"module_dir\": \"%s\", \"periodic_update_s\": 1,"
		" \"batch_window_ms\": 5, \"config\": {\"file\": \"%s\","
		" \"fail_validate_file\": \"%s\"}},\n"
		" \"vf\": {\"driver\": \"fake\", \"fake_dir\": \"%s\"},\n"
		" \"api\": {\"socket\": \"%s\"},\n"
		" \"daemon\": {\"stop_timeout_s\": 5, \"reconcile\": \"fix\"%s}}\n",
		l->state, l->dir, RANGE_START, RANGE_END, l->moddir, l->smfile, l->failfile,
		l->vfdir, l->sock, extra ? extra : "");
	fclose(f);
}

static int lab_init(struct lab *l, const char *ibvfd, const char *moddir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char err[256];

	memset(l, 0, sizeof(*l));
	l->ibvfd = ibvfd;
	l->moddir = moddir;
	snprintf(l->dir, sizeof(l->dir), "/tmp/ibvfd-lab-XXXXXX");
	if (!mkdtemp(l->dir))
		return -errno;
	snprintf(l->cfg, sizeof(l->cfg), "%s/ibvfd.json", l->dir);
	snprintf(l->sock, sizeof(l->sock), "%s/run/ibvfd.sock", l->dir);
	snprintf(l->smfile, sizeof(l->smfile), "%s/sm.members", l->dir);
	snprintf(l->failfile, sizeof(l->failfile), "%s/sm.down", l->dir);
	snprintf(l->vfdir, sizeof(l->vfdir), "%s/vfs", l->dir);
	snprintf(l->state, sizeof(l->state), "%s/state", l->dir);
	snprintf(l->notify, sizeof(l->notify), "%s/notify", l->dir);
	snprintf(l->log, sizeof(l->log), "%s/ibvfd.log", l->dir);
	mkdir(l->vfdir, 0700);
	for (int i = 0; i < N_VFS; i++) {
		char pci[16];

		snprintf(pci, sizeof(pci), "0000:05:00.%d", i);
		if (ibvf_vf_fake_create(l->vfdir, pci, "ib0", i, 0, err, sizeof(err)))
			return -EIO;
	}
	l->nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", l->notify);
	if (bind(l->nfd, (struct sockaddr *)&sa, sizeof(sa)))
		return -errno;
	write_config(l, NULL);
	return 0;
}

/* Wait for a notify datagram containing @what; false on timeout. */
static bool wait_notify(struct lab *l, const char *what, int ms)
{
	int64_t end = ibvf_mono_ms() + ms;

	for (;;) {
		struct pollfd p = { .fd = l->nfd, .events = POLLIN };
		char buf[512];
		int64_t left = end - ibvf_mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return false;
		n = recv(l->nfd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = 0;
		if (strstr(buf, what))
			return true;
	}
}

static void drain_notify(struct lab *l)
{
	char buf[512];

	while (recv(l->nfd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

static pid_t start_daemon(struct lab *l)
{
	pid_t pid;

	drain_notify(l);
	pid = fork();
	if (pid == 0) {
		int fd = open(l->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(fd, 2);
		dup2(fd, 1);
		setenv("NOTIFY_SOCKET", l->notify, 1);
		if (l->delay_ms)
			setenv("IBVF_FAKE_VF_DELAY_MS", l->delay_ms, 1);
		execl(l->ibvfd, "ibvfd", "-f", "-c", l->cfg, (char *)NULL);
		_exit(127);
	}
	l->pid = pid;
	if (!wait_notify(l, "READY=1", 15000)) {
		fprintf(stderr, "ibvfd did not report READY=1 (see %s)\n", l->log);
		return -1;
	}
	return pid;
}

static int stop_daemon(struct lab *l, int sig)
{
	int st = -1;

	if (l->pid <= 0)
		return -1;
	kill(l->pid, sig);
	for (int i = 0; i < 400; i++) {
		if (waitpid(l->pid, &st, WNOHANG) == l->pid) {
			l->pid = 0;
			return st;
		}
		usleep(25000);
	}
	kill(l->pid, SIGKILL);
	waitpid(l->pid, &st, 0);
	l->pid = 0;
	return -1;
}

static void lab_fini(struct lab *l)
{
	char cmd[128];

	if (l->pid > 0)
		stop_daemon(l, SIGKILL);
	close(l->nfd);
	if (getenv("IBVF_KEEP_LAB")) {
		fprintf(stderr, "lab kept in %s\n", l->dir);
		return;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", l->dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", l->dir);
}

static json_t *owner(const char *cid)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "container_id", cid, "ifname", "net1",
			 "pod_namespace", "lab", "pod_name", cid, "network", "lab-net");
}

static int api(struct lab *l, const char *method, json_t *params, json_t **res,
	       struct ibvf_rpc_error *re, int timeout_ms)
{
	char err[512];
	json_t *r = NULL;
	int ret = ibvf_api_call(l->sock, method, params, timeout_ms, &r, re, err, sizeof(err));

	json_decref(params);
	if (res)
		*res = r;
	else
		json_decref(r);
	return ret;
}

static int prepare(struct lab *l, const char *cid, int vf, json_t **res,
		   struct ibvf_rpc_error *re)
{
	char pci[16];

	snprintf(pci, sizeof(pci), "0000:05:00.%d", vf);
	return api(l, "prepare",
		   json_pack("{s:o,s:s,s:[{s:s,s:s}]}", "owner", owner(cid), "pci", pci, "pkeys",
			     "pkey", "0x0012", "membership", "full"),
		   res, re, 15000);
}

static int release(struct lab *l, const char *cid)
{
	return api(l, "release", json_pack("{s:o}", "owner", owner(cid)), NULL, NULL, 15000);
}

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

/* The three views agree; @why gets the first disagreement. */
static bool consistent(struct lab *l, char *why, size_t len)
{
	struct ibvf_guid_range r = { RANGE_START, RANGE_END };
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
		struct ibvf_vf_info vf;
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
			in_sm |= sm[k].guid == a->guid && sm[k].pkey == 0x12;
		if (!in_sm) {
			snprintf(why, len, "GUID %016llx (%s) not in the SM", (unsigned long long)a->guid,
				 a->owner.container_id);
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
		struct ibvf_vf_info vf;
		char pci[16];
		bool held = false;

		snprintf(pci, sizeof(pci), "0000:05:00.%d", i);
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

static int cmd_crash(const char *ibvfd, const char *moddir, int cycles, unsigned seed)
{
	struct lab l;
	unsigned rnd = seed;
	int kills = 0, prepared = 0, failed_checks = 0;
	int64_t t0 = ibvf_mono_ms();
	char why[512];

	if (lab_init(&l, ibvfd, moddir)) {
		result(false, "lab set-up");
		return 1;
	}
	l.delay_ms = "3"; /* a window inside the VF step for the killer */
	printf("# crash test: %d cycles, seed %u, lab %s\n", cycles, seed, l.dir);
	if (start_daemon(&l) < 0) {
		result(false, "ibvfd starts and reports READY=1");
		lab_fini(&l);
		return 1;
	}
	for (int c = 0; c < cycles; c++) {
		char cid[32];
		int vf = rand_r(&rnd) % N_VFS;
		bool kill_prep = rand_r(&rnd) % 4 == 0, kill_rel = rand_r(&rnd) % 5 == 0;
		struct killer k = { .pid = l.pid };
		json_t *res = NULL;
		int ret;

		snprintf(cid, sizeof(cid), "crash%03d", c);
		if (kill_prep) {
			k.delay_us = (unsigned)(rand_r(&rnd) % 40000);
			pthread_create(&k.th, NULL, killer_run, &k);
		}
		ret = prepare(&l, cid, vf, &res, NULL);
		json_decref(res);
		if (!ret)
			prepared++;
		if (!kill_prep && kill_rel) {
			k.delay_us = (unsigned)(rand_r(&rnd) % 30000);
			pthread_create(&k.th, NULL, killer_run, &k);
		}
		if (!ret || kill_prep)
			release(&l, cid);
		if (kill_prep || kill_rel) {
			int st;

			pthread_join(k.th, NULL);
			waitpid(l.pid, &st, 0);
			l.pid = 0;
			kills++;
			if (start_daemon(&l) < 0) {
				result(false, "cycle %d: ibvfd restarts after kill -9", c);
				lab_fini(&l);
				return 1;
			}
			/* READY=1 comes after the start-up reconciliation pass */
			if (!consistent(&l, why, sizeof(why))) {
				result(false, "cycle %d: consistent after kill -9 + restart: %s", c,
				       why);
				failed_checks++;
				break;
			}
			/* the interrupted owner can always be released */
			if (release(&l, cid)) {
				result(false, "cycle %d: release after restart", c);
				failed_checks++;
				break;
			}
		}
	}
	result(failed_checks == 0, "%d cycles, %d kill -9 + restarts: store, VFs and SM agree after "
				   "every restart (%d prepares succeeded, %.1f s)",
	       cycles, kills, prepared, (double)(ibvf_mono_ms() - t0) / 1000);
	result(consistent(&l, why, sizeof(why)), "consistent at the end%s%s",
	       n_fail ? ": " : "", n_fail ? why : "");
	{
		struct member sm[8];

		result(read_sm(&l, sm, 8) == 0, "every owner released: SM membership empty");
	}
	result(WIFEXITED(stop_daemon(&l, SIGTERM)), "SIGTERM: ibvfd exits");
	lab_fini(&l);
	return 0;
}

/* ------------------------------------------------------------ smoke -- */

struct bg_call {
	struct lab *l;
	int ret;
	pthread_t th;
};

static void *bg_prepare(void *arg)
{
	struct bg_call *b = arg;

	b->ret = prepare(b->l, "slow", 3, NULL, NULL);
	return NULL;
}

static int cmd_smoke(const char *ibvfd, const char *moddir)
{
	struct ibvf_rpc_error re;
	struct lab l;
	struct bg_call bg;
	json_t *r = NULL;
	struct stat st;
	int ret, status;
	bool ready = false;

	if (lab_init(&l, ibvfd, moddir)) {
		result(false, "lab set-up");
		return 1;
	}
	/* the SM is unreachable at start-up: the daemon starts anyway */
	close(open(l.failfile, O_CREAT | O_WRONLY, 0600));
	result(start_daemon(&l) > 0, "starts with the SM unreachable, sends READY=1");
	result(stat(l.sock, &st) == 0 && (st.st_mode & 0777) == 0600, "socket mode 0600");
	ret = api(&l, "status", NULL, &r, NULL, 5000);
	result(!ret && json_is_false(json_object_get(r, "ready")) &&
		       json_is_false(json_object_get(json_object_get(r, "backend"), "ok")),
	       "status: not ready, backend not ok");
	json_decref(r);
	ret = prepare(&l, "early", 0, NULL, &re);
	result(ret == -EREMOTEIO && re.code == IBVF_RPC_NOT_READY, "prepare: NOT_READY (%s)",
	       re.message);
	/* the SM comes back: the periodic pass (1 s) notices */
	unlink(l.failfile);
	for (int i = 0; i < 60 && !ready; i++) {
		usleep(100000);
		if (!api(&l, "status", NULL, &r, NULL, 5000))
			ready = json_is_true(json_object_get(r, "ready"));
		json_decref(r);
	}
	result(ready, "ready once the SM answers");
	ret = prepare(&l, "first", 0, &r, &re);
	result(!ret && json_is_string(json_object_get(r, "guid")), "prepare succeeds%s%s",
	       ret ? ": " : "", ret ? re.message : "");
	json_decref(r);
	ret = api(&l, "commit", json_pack("{s:o}", "owner", owner("first")), NULL, NULL, 5000);
	result(!ret, "commit");
	ret = api(&l, "list", NULL, &r, NULL, 5000);
	result(!ret && json_array_size(json_object_get(r, "owners")) == 1, "list shows it");
	json_decref(r);

	/* SIGHUP: reload */
	write_config(&l, ", \"prepare_timeout_s\": 30");
	drain_notify(&l);
	kill(l.pid, SIGHUP);
	result(wait_notify(&l, "RELOADING=1", 5000), "SIGHUP: RELOADING=1");
	ret = api(&l, "status", NULL, &r, NULL, 5000);
	result(!ret && json_is_true(json_object_get(r, "ready")), "still serving after SIGHUP");
	json_decref(r);

	/* SIGTERM with a prepare in flight: it is answered, then exit 0 */
	stop_daemon(&l, SIGTERM);
	l.delay_ms = "600";
	start_daemon(&l);
	bg.l = &l;
	pthread_create(&bg.th, NULL, bg_prepare, &bg);
	usleep(200000);
	drain_notify(&l);
	kill(l.pid, SIGTERM);
	result(wait_notify(&l, "STOPPING=1", 5000), "SIGTERM: STOPPING=1");
	pthread_join(bg.th, NULL);
	result(bg.ret == 0, "the in-flight prepare was finished and answered");
	waitpid(l.pid, &status, 0);
	l.pid = 0;
	result(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0");
	result(stat(l.sock, &st) && errno == ENOENT, "socket removed");
	lab_fini(&l);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: test_ibvfd smoke|crash IBVFD SM_MODULE_DIR [CYCLES] [SEED]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	ibvf_log_init("test_ibvfd", IBVF_LOG_STDERR, LOG_ERR);
	if (!strcmp(argv[1], "smoke"))
		cmd_smoke(argv[2], argv[3]);
	else if (!strcmp(argv[1], "crash"))
		cmd_crash(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 200,
			  argc > 5 ? (unsigned)strtoul(argv[5], NULL, 0) : 20261130u);
	else
		return 2;
	printf("1..%d\n%d passed, %d failed\n", n_ok + n_fail, n_ok, n_fail);
	return n_fail ? 1 : 0;
}
