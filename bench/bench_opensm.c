// SPDX-License-Identifier: MIT
/*
 * bench_opensm - what the opensm SM backend costs.
 *
 *   bench_opensm [MEMBERS]
 *       Offline (no OpenSM): with MEMBERS (default 10,000) managed members,
 *       time each step of a change - parse the current file, apply, render,
 *       the install gate (parse back + compare), install (backup + temp +
 *       fsync + rename) - then the backend's whole add_members() (verify
 *       off, a stand-in "opensm" process takes the SIGHUP): all members at
 *       once, and one more member into the big file.
 *
 *   bench_opensm --lab MODULE_DIR CONFIG GUID [ROUNDS]
 *       In the fabric lab, under umad2sim on pf0 (bench/bench-opensm-lab.sh):
 *       the module through ibvfd's loader with SMP verification on; time
 *       from add_members() to the P_Key confirmed in GUID's P_Key table by
 *       SMPs, and the same for remove, over ROUNDS rounds (after a warm-up
 *       that opens the umad port); then again with 10,000 members in the
 *       file.
 *
 *   bench_opensm --wide
 *       Offline: a file with 100,000 admin definitions and 32,765 managed
 *       PKeys; time the parse and the admin check over all managed PKeys.
 *
 * Prints numbers and ratios; asserts nothing about time.
 */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "partition_conf.h"
#include "partition_file.h"
#include "sm_loader.h"
#include "sm_opensm.h"

static const char admin[] =
	"# cluster partitions (admin)\n"
	"Default=0x7fff, ipoib : ALL=full ;\n"
	"storage=0x0a01, ipoib, mtu=5 : 0x0002c90300a00001=full, 0x0002c90300a00002=full,\n"
	"\t0x0002c90300a00003=limited ;\n"
	"infra=0x0a02 : ALL_SWITCHES=full, SELF=full ;\n";

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, const char *err) __attribute__((noreturn));

static void die(const char *what, const char *err)
{
	fprintf(stderr, "bench_opensm: %s: %s\n", what, err);
	exit(1);
}

/* ---------------------------------------------------------------- offline -- */

struct steps {
	double parse, apply, render, check, install;
};

static void one_change(const char *path, const char *bak, struct pc_member *mem, size_t n,
		       struct steps *s, size_t *bytes)
{
	char err[IBVF_ERR_LEN], *text, *out;
	struct pc_managed want = {0};
	struct pc_doc *doc;
	size_t len, olen, changed = 0;
	struct stat st;
	double t;

	t = now_ms();
	if (pf_read(path, &text, &len, &st, err, sizeof(err)) ||
	    pc_doc_load(text, len, path, &doc, err, sizeof(err)))
		die("parse", err);
	s->parse = now_ms() - t;
	t = now_ms();
	if (pc_managed_copy(&want, &doc->managed) ||
	    pc_managed_add(&want, 0x0b00, NULL, mem, n, &changed))
		die("apply", "out of memory");
	s->apply = now_ms() - t;
	t = now_ms();
	if (pc_render(doc, &want, &out, &olen, err, sizeof(err)))
		die("render", err);
	s->render = now_ms() - t;
	t = now_ms();
	if (pc_check_rendered(doc, &want, out, olen, path, err, sizeof(err)))
		die("check", err);
	s->check = now_ms() - t;
	t = now_ms();
	if (pf_install(path, bak, doc->text, doc->len, &st, out, olen, err, sizeof(err)))
		die("install", err);
	s->install = now_ms() - t;
	*bytes = olen;
	free(out);
	free(text);
	pc_managed_free(&want);
	pc_doc_free(doc);
}

/* The stand-in OpenSM: alive, named "opensm", ignoring SIGHUP. */
static pid_t spawn_opensm(const char *dir)
{
	char exe[4096], self[4096], cmd[8300];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	if (n <= 0)
		die("readlink", strerror(errno));
	self[n] = '\0';
	snprintf(exe, sizeof(exe), "%s/opensm", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", self, exe);
	if (system(cmd))
		die("cp", cmd);
	pid = fork();
	if (pid == 0) {
		execl(exe, exe, (char *)NULL);
		_exit(127);
	}
	usleep(100000);
	return pid;
}

static double backend_add(struct ibvf_sm_backend *b, uint16_t pkey, struct ibvf_sm_member *m,
			  size_t n, const char *what)
{
	char err[IBVF_ERR_LEN];
	double t = now_ms();

	if (opensm_ops.add_members(b, pkey, m, n, NULL, err, sizeof(err)))
		die(what, err);
	t = now_ms() - t;
	printf("  %-58s %9.1f ms\n", what, t);
	return t;
}

static int offline(size_t n)
{
	char dir[] = "/tmp/ibvf-bench-opensm-XXXXXX", path[128], bak[128], pidf[128];
	char cfg[512], err[IBVF_ERR_LEN], cmd[160];
	struct pc_member *mem = calloc(n, sizeof(*mem));
	struct ibvf_sm_member *sm = calloc(n + 1, sizeof(*sm));
	struct steps s[5];
	double col[5];
	struct ibvf_sm_backend *b;
	double all, one;
	size_t bytes = 0;
	FILE *f;
	pid_t osm;

	if (!mem || !sm || !mkdtemp(dir))
		die("setup", strerror(errno));
	snprintf(path, sizeof(path), "%s/partitions.conf", dir);
	snprintf(bak, sizeof(bak), "%s/partitions.conf.ibvf-prev", dir);
	snprintf(pidf, sizeof(pidf), "%s/opensm.pid", dir);
	for (size_t i = 0; i < n; i++) {
		mem[i] = (struct pc_member){UINT64_C(0x0002c90300200000) + i, i % 3 != 0, false};
		sm[i] = (struct ibvf_sm_member){mem[i].guid,
						i % 3 ? IBVF_MEMBER_FULL : IBVF_MEMBER_LIMITED};
	}
	printf("offline, %zu managed members in one PKey (median of 5 rounds):\n", n);
	for (int r = 0; r < 5; r++) {
		f = fopen(path, "w");
		if (!f || fputs(admin, f) < 0 || fclose(f))
			die("write", path);
		one_change(path, bak, mem, n, &s[r], &bytes);
	}
#define STEP(field, name)                                                                          \
	do {                                                                                       \
		for (int r = 0; r < 5; r++)                                                        \
			col[r] = s[r].field;                                                       \
		printf("  %-58s %9.2f ms\n", name, median(col, 5));                                \
	} while (0)
	STEP(parse, "read + parse the current file (admin part only)");
	STEP(apply, "apply the change to the section");
	STEP(render, "render the new file");
	STEP(check, "install gate: parse back + compare");
	STEP(install, "install: backup + temp + fsync + rename + dir fsync");
	for (int r = 0; r < 5; r++)
		col[r] = s[r].parse + s[r].apply + s[r].render + s[r].check + s[r].install;
	printf("  %-58s %9.2f ms  (%.2f us/member, file %zu bytes)\n",
	       "render + validate + install, total", median(col, 5), median(col, 5) * 1e3 / n,
	       bytes);

	/* the whole backend, verify off, a stand-in OpenSM */
	osm = spawn_opensm(dir);
	f = fopen(pidf, "w");
	if (!f || fprintf(f, "%d\n", (int)osm) < 0 || fclose(f))
		die("pid file", pidf);
	f = fopen(path, "w");
	if (!f || fputs(admin, f) < 0 || fclose(f))
		die("write", path);
	snprintf(cfg, sizeof(cfg),
		 "{\"partition_file\": \"%s\", \"pid_file\": \"%s\", "
		 "\"verify\": \"off\"}",
		 path, pidf);
	if (opensm_ops.init(cfg, &b, err, sizeof(err)))
		die("init", err);
	printf("backend add_members() (verify off; SIGHUP to a stand-in opensm):\n");
	all = backend_add(b, 0x0b00, sm, n, "all members in one call");
	sm[n] = (struct ibvf_sm_member){UINT64_C(0x0002c90300100001), IBVF_MEMBER_FULL};
	one = backend_add(b, 0x0b00, &sm[n], 1, "one more member into the big file");
	printf("  ratio one-more / all-at-once: %.2f (each change rewrites the whole file: batch)"
	       "\n",
	       one / all);
	backend_add(b, 0x0b00, &sm[n], 1, "the same member again (no change: no write)");
	opensm_ops.fini(b);
	kill(osm, SIGTERM);
	waitpid(osm, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "bench_opensm: could not remove %s\n", dir);
	free(mem);
	free(sm);
	return 0;
}

/* -------------------------------------------------------------------- lab -- */

static double lab_op(struct ibvf_sm *sm, bool add, uint16_t pkey, const struct ibvf_sm_member *m,
		     size_t n)
{
	const struct ibvf_sm_ops *o = sm->mod->ops;
	char err[IBVF_ERR_LEN];
	uint64_t *g;
	double t = now_ms();
	int ret;

	if (add) {
		ret = o->add_members(sm->b, pkey, m, n, NULL, err, sizeof(err));
	} else {
		g = calloc(n, sizeof(*g));
		for (size_t i = 0; g && i < n; i++)
			g[i] = m[i].guid;
		ret = g ? o->remove_members(sm->b, pkey, g, n, err, sizeof(err)) : -ENOMEM;
		free(g);
	}
	if (ret)
		die(add ? "add_members" : "remove_members", err);
	return now_ms() - t;
}

static void report(const char *what, double *v, int n)
{
	double lo, hi, med;

	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	lo = v[0];
	hi = v[n - 1];
	med = median(v, n);
	printf("  %-58s median %7.1f ms  min %7.1f  max %7.1f  (%d rounds)\n", what, med, lo, hi,
	       n);
}

static int lab(const char *dir, const char *cfg, const char *guid_s, int rounds)
{
	char err[IBVF_ERR_LEN], desc[512];
	struct ibvf_sm_member one, *big;
	double add[64], rm[64], t;
	struct ibvf_sm sm;
	uint64_t guid;
	size_t nbig = 9999;

	if (rounds < 1 || rounds > 64 || ibvf_guid_parse(guid_s, &guid, err, sizeof(err)))
		die("usage", "bench_opensm --lab MODULE_DIR CONFIG GUID [ROUNDS 1..64]");
	if (ibvf_sm_open(dir, "opensm", cfg, &sm, err, sizeof(err)))
		die("open", err);
	t = now_ms();
	if (sm.mod->ops->validate(sm.b, desc, sizeof(desc), err, sizeof(err)))
		die("validate", err);
	printf("lab (real OpenSM on ibsim, SMP verification from pf0):\n");
	printf("  %-58s %9.1f ms\n", "warm-up: validate (opens the umad port)", now_ms() - t);
	one = (struct ibvf_sm_member){guid, IBVF_MEMBER_FULL};
	for (int r = 0; r < rounds; r++) {
		add[r] = lab_op(&sm, true, 0x0c01, &one, 1);
		rm[r] = lab_op(&sm, false, 0x0c01, &one, 1);
	}
	report("add_members -> P_Key confirmed by SMP (small file)", add, rounds);
	report("remove_members -> P_Key gone, confirmed by SMP", rm, rounds);

	big = calloc(nbig, sizeof(*big));
	if (!big)
		die("calloc", "out of memory");
	for (size_t i = 0; i < nbig; i++)
		big[i] = (struct ibvf_sm_member){UINT64_C(0x0002c90300600000) + i,
						 IBVF_MEMBER_LIMITED};
	t = lab_op(&sm, true, 0x0c02, big, nbig);
	printf("  %-58s %9.1f ms\n", "add 9,999 members not on the fabric (SA lookups)", t);
	for (int r = 0; r < rounds; r++) {
		add[r] = lab_op(&sm, true, 0x0c02, &one, 1);
		rm[r] = lab_op(&sm, false, 0x0c02, &one, 1);
	}
	report("add_members -> P_Key confirmed, 10,000 members in file", add, rounds);
	report("remove_members -> P_Key gone, 10,000 members in file", rm, rounds);
	t = lab_op(&sm, false, 0x0c02, big, nbig);
	printf("  %-58s %9.1f ms\n", "remove the 9,999", t);
	free(big);
	ibvf_sm_close(&sm);
	return 0;
}

/* ------------------------------------------------------------------- wide -- */

/*
 * A wide file: 100,000 admin definitions (all of one PKey) and a section
 * with 32,765 managed PKeys. Every change asks, for each managed PKey,
 * whether the admin defines it (sm_opensm.c drop_admin_props()): that was a
 * scan of all admin definitions per PKey, 5.7 s for one add_members().
 */
static int wide(void)
{
	char err[IBVF_ERR_LEN];
	struct pc_doc *doc;
	FILE *o;
	char *text = NULL;
	size_t len = 0, hits = 0;
	double t0, t1;

	o = open_memstream(&text, &len);
	if (!o)
		die("wide", "out of memory");
	fputs("Default=0x7fff, ipoib : ALL=full ;\n", o);
	for (unsigned i = 0; i < 100000; i++)
		fprintf(o, "p%u=0x0001 : 0x%016llx=full ;\n", i, 0x0002c90300000001ull + i);
	fputs(PC_BEGIN_MARKER "\n", o);
	for (unsigned k = 2; k < 0x7fff; k++)
		fprintf(o, "ibvf_0x%04x=0x%04x :\n\t0x%016llx=full ;\n", k, k,
			0x0002c90320000000ull + k);
	fputs(PC_END_MARKER "\n", o);
	fclose(o);
	t0 = now_ms();
	if (pc_doc_load(text, len, "wide.conf", &doc, err, sizeof(err)))
		die("wide: load", err);
	t1 = now_ms();
	for (size_t i = 0; i < doc->managed.n; i++)
		hits += pc_admin_defines(doc, doc->managed.pkeys[i].pkey);
	printf("wide file: %zu bytes, %zu admin definitions, %zu managed PKeys\n", len,
	       doc->n_admin, doc->managed.n);
	printf("  parse and split        %8.1f ms\n", t1 - t0);
	printf("  admin check, all PKeys %8.3f ms (%zu defined by the admin)\n", now_ms() - t1,
	       hits);
	pc_doc_free(doc);
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	if (!strcmp(basename(argv[0]), "opensm")) {
		signal(SIGHUP, SIG_IGN);
		for (;;)
			pause();
	}
	if (argc >= 2 && !strcmp(argv[1], "--wide"))
		return wide();
	if (argc >= 5 && !strcmp(argv[1], "--lab"))
		return lab(argv[2], argv[3], argv[4], argc > 5 ? atoi(argv[5]) : 10);
	return offline(argc > 1 ? strtoul(argv[1], NULL, 10) : 10000);
}
