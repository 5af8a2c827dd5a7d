// SPDX-License-Identifier: MIT
/*
 * Unit tests of the opensm backend without OpenSM: the config, the safe
 * write path (partition_file.c), finding and signalling OpenSM
 * (opensm_reload.c), and the whole add/remove/list/validate flow with a
 * stand-in "opensm" process and a fake SMP verifier.
 *
 * The stand-in is this test binary itself, copied to <tmp>/opensm so that
 * /proc/PID/comm reads "opensm": run under that name it counts SIGHUPs into
 * the file named by $IBVF_FAKE_HUPS.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "err.h"
#include "opensm_reload.h"
#include "partition_file.h"
#include "sm_opensm.h"

#define G(x) UINT64_C(x)

static const char admin_text[] =
	"# cluster partitions (admin)\n"
	"Default=0x7fff, ipoib : ALL=full ;\n"
	"storage=0x0a01, ipoib : 0x0002c90300a00001=full, 0x0002c90300a00002=limited ;\n"
	"infra=0x0a02 : ALL_SWITCHES=full, SELF=full ;\n";

/* --------------------------------------------------------------- helpers -- */

static void assert_has(const char *hay, const char *needle)
{
	if (!hay || !strstr(hay, needle)) {
		print_error("expected \"%s\" in \"%s\"\n", needle, hay ? hay : "(null)");
		fail();
	}
}

static char *slurp(const char *path, size_t *len)
{
	struct stat st;
	char *t = NULL;
	size_t l = 0;

	if (pf_read(path, &t, &l, &st, NULL, 0))
		return NULL;
	if (len)
		*len = l;
	return t;
}

static void spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------ the fake opensm -- */

static volatile sig_atomic_t hups;

static void on_hup(int sig)
{
	(void)sig;
	hups++;
}

static void write_count(const char *path, int n)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (f) {
		fprintf(f, "%d\n", n);
		fclose(f);
		rename(tmp, path);
	}
}

/* Run as <tmp>/opensm: count SIGHUPs until SIGTERM. */
static int fake_opensm(void)
{
	const char *out = getenv("IBVF_FAKE_HUPS");
	struct sigaction sa = {.sa_handler = on_hup};
	sigset_t block, old;
	int seen = 0;

	if (!out)
		return 2;
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &old);
	sigaction(SIGHUP, &sa, NULL);
	write_count(out, 0);
	for (;;) {
		sigsuspend(&old);
		if (hups != seen) {
			seen = hups;
			write_count(out, seen);
		}
	}
}

struct lab {
	char dir[64];
	char parts[128], pidf[128], hupf[128], bak[128], lock[128];
	pid_t osm;
};

static int hup_count(const struct lab *l)
{
	char *t = slurp(l->hupf, NULL);
	int n = t ? atoi(t) : -1;

	free(t);
	return n;
}

/*
 * Wait (10 s at most: the machine may be busy) for the fake to count @n
 * SIGHUPs. Call it after each signalling step: SIGHUPs that arrive while one
 * is pending merge into one (as they do for the real OpenSM, which then
 * re-reads the latest file once).
 */
static void expect_hups(const struct lab *l, int n)
{
	int64_t end = now_ms() + 10000;

	while (hup_count(l) != n && now_ms() < end)
		usleep(2000);
	assert_int_equal(hup_count(l), n);
}

static pid_t spawn_opensm(struct lab *l, const char *const extra[])
{
	char exe[160], self[4096], cmd[8400];
	const char *argv[8] = {exe};
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	assert_true(n > 0);
	self[n] = '\0';
	snprintf(exe, sizeof(exe), "%s/opensm", l->dir);
	if (access(exe, X_OK)) {
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", self, exe);
		assert_int_equal(system(cmd), 0);
	}
	for (int i = 0; extra && extra[i] && i < 6; i++)
		argv[i + 1] = extra[i];
	unlink(l->hupf);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		setenv("IBVF_FAKE_HUPS", l->hupf, 1);
		/* execv() only reads argv; POSIX keeps char *const [] for compatibility */
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	for (int64_t end = now_ms() + 10000; hup_count(l) != 0 && now_ms() < end;)
		usleep(2000);
	assert_int_equal(hup_count(l), 0);
	return pid;
}

static void stop_pid(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
}

static void write_pidfile(const struct lab *l, pid_t pid)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%d\n", (int)pid);
	spit(l->pidf, buf);
}

static int lab_setup(void **state)
{
	struct lab *l = calloc(1, sizeof(*l));

	snprintf(l->dir, sizeof(l->dir), "/tmp/ibvf-smopensm-XXXXXX");
	if (!mkdtemp(l->dir))
		return -1;
	snprintf(l->parts, sizeof(l->parts), "%s/partitions.conf", l->dir);
	snprintf(l->pidf, sizeof(l->pidf), "%s/opensm.pid", l->dir);
	snprintf(l->hupf, sizeof(l->hupf), "%s/hups", l->dir);
	snprintf(l->bak, sizeof(l->bak), "%s/partitions.conf.ibvf-prev", l->dir);
	snprintf(l->lock, sizeof(l->lock), "%s/partitions.conf.ibvf-lock", l->dir);
	spit(l->parts, admin_text);
	chmod(l->parts, 0640);
	l->osm = spawn_opensm(l, NULL);
	write_pidfile(l, l->osm);
	*state = l;
	return 0;
}

static int lab_teardown(void **state)
{
	struct lab *l = *state;
	char cmd[128];

	stop_pid(l->osm);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", l->dir);
	if (system(cmd))
		return -1;
	free(l);
	return 0;
}

/* ---------------------------------------------------------- fake verifier -- */

struct fake_call {
	uint64_t guid;
	uint16_t lid, pkey;
	enum pv_want want;
	uint32_t timeout_ms;
};

struct fake {
	uint64_t on_fabric[8]; /* GUIDs the "SA" resolves (LID = index + 1) */
	uint64_t broken;       /* a GUID whose wait times out */
	int fail_next;	       /* so many more waits time out, whatever the GUID */
	int resolve_err;       /* returned for every resolve when set */
	int resolves;
	struct fake_call calls[64];
	int n_calls;
	bool closed;
};

static int fake_resolve(void *ctx, uint64_t guid, uint16_t *lid, char *err, size_t errlen)
{
	struct fake *f = ctx;

	f->resolves++;
	if (f->resolve_err)
		return ibvf_errf(err, errlen, f->resolve_err, "no SM LID");
	for (int i = 0; i < 8; i++) {
		if (f->on_fabric[i] && f->on_fabric[i] == guid) {
			*lid = (uint16_t)(i + 1);
			return 0;
		}
	}
	return ibvf_errf(err, errlen, -ENOENT, "no path");
}

static int fake_wait(void *ctx, uint16_t lid, uint16_t pkey, enum pv_want want, uint32_t timeout_ms,
		     char *err, size_t errlen)
{
	struct fake *f = ctx;
	uint64_t guid = f->on_fabric[lid - 1];

	if (f->n_calls < 64)
		f->calls[f->n_calls++] = (struct fake_call){guid, lid, pkey, want, timeout_ms};
	if (guid == f->broken || (f->fail_next && f->fail_next--))
		return ibvf_errf(err, errlen, -ETIMEDOUT,
				 "timed out after %u ms: P_Key 0x%04x "
				 "absent",
				 timeout_ms, pkey);
	return 0;
}

static const char *fake_name(void *ctx)
{
	(void)ctx;
	return "fake:1";
}

static void fake_close(void *ctx)
{
	((struct fake *)ctx)->closed = true;
}

static const struct pkey_verifier_ops fake_ops = {fake_resolve, fake_wait, fake_name, fake_close};

/* ------------------------------------------------------------ the backend -- */

static struct ibvf_sm_backend *open_backend(const struct lab *l, const char *extra, struct fake *fk,
					    const char *verify)
{
	char cfg[1024], err[IBVF_ERR_LEN] = "";
	struct ibvf_sm_backend *b = NULL;

	snprintf(cfg, sizeof(cfg),
		 "{\"partition_file\": \"%s\", \"pid_file\": \"%s\", "
		 "\"verify\": \"%s\", \"lock_timeout_ms\": 200%s%s}",
		 l->parts, l->pidf,
		 verify ? verify
		 : fk	? "fabric"
			: "off",
		 extra ? ", " : "", extra ? extra : "");
	if (opensm_ops.init(cfg, &b, err, sizeof(err))) {
		print_error("init: %s\n", err);
		fail();
	}
	if (fk) {
		struct pkey_verifier v = {&fake_ops, fk};

		opensm_set_verifier(b, &v);
	}
	return b;
}

static const char *section_of(const char *text)
{
	const char *s = strstr(text, PC_BEGIN_MARKER);

	assert_non_null(s);
	return s;
}

static void test_config(void **state)
{
	struct opensm_cfg c;
	char err[IBVF_ERR_LEN] = "";

	(void)state;
	assert_int_equal(
		opensm_cfg_parse("{\"pid_file\": \"/run/opensm.pid\"}", &c, err, sizeof(err)), 0);
	assert_string_equal(c.partition_file, "/etc/opensm/partitions.conf");
	assert_string_equal(c.backup_file, "/etc/opensm/partitions.conf.ibvf-prev");
	assert_string_equal(c.lock_file, "/etc/opensm/partitions.conf.ibvf-lock");
	assert_int_equal(c.reload_timeout_ms, 10000);
	assert_int_equal(c.verify, PV_FABRIC);
	assert_int_equal(c.poll_min_ms, 5);
	assert_int_equal(c.poll_max_ms, 50);
	assert_true(c.props.ipoib);
	assert_int_equal(c.props.mtu, -1);
	assert_false(c.index0);
	assert_null(c.umad_ca);
	opensm_cfg_free(&c);
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"partition_file\": "
					  "\"/x/p.conf\", \"verify\": \"all\", \"umad_ca\": "
					  "\"mlx5_0\", \"umad_port\": 1, \"defaults\": "
					  "{\"ipoib\": false, \"indx0\": true, \"mtu\": 5, "
					  "\"rate\": 7, \"sl\": 3}}",
					  &c, err, sizeof(err)),
			 0);
	assert_string_equal(c.backup_file, "/x/p.conf.ibvf-prev");
	assert_int_equal(c.verify, PV_ALL);
	assert_string_equal(c.umad_ca, "mlx5_0");
	assert_int_equal(c.umad_port, 1);
	assert_false(c.props.ipoib);
	assert_true(c.index0);
	assert_int_equal(c.props.mtu, 5);
	assert_int_equal(c.props.rate, 7);
	assert_int_equal(c.props.sl, 3);
	opensm_cfg_free(&c);
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"reload_timeout\": 5}", &c,
					  err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "reload_timeout: unknown key");
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"\"}", &c, err, sizeof(err)), -EINVAL);
	assert_has(err, "pid_file: must not be empty");
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", "
					  "\"defaults\": {\"sl\": 16}}",
					  &c, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "defaults.sl: 16 is out of range 0..15");
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"poll_min_ms\": 100, "
					  "\"poll_max_ms\": 20}",
					  &c, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "poll_max_ms: must not be below poll_min_ms");
	/* relative paths would follow the cwd of each process (ibvfd, ibvfctl) */
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"opensm.pid\"}", &c, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "pid_file: 'opensm.pid' is not an absolute path");
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"partition_file\": "
					  "\"etc/p.conf\"}",
					  &c, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "partition_file: 'etc/p.conf' is not an absolute path");
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"lock_file\": "
					  "\"./l\"}",
					  &c, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "lock_file: './l' is not an absolute path");
}

/* ------------------------------------------------------------ write path -- */

static void test_install(void **state)
{
	struct lab *l = *state;
	char err[IBVF_ERR_LEN] = "", *t, cmd[256];
	struct stat st, st2;
	size_t len;

	assert_int_equal(pf_read(l->parts, &t, &len, &st, err, sizeof(err)), 0);
	assert_int_equal(pf_install(l->parts, l->bak, t, len, &st, "new ;\n", 6, err, sizeof(err)),
			 0);
	free(t);
	t = slurp(l->parts, NULL);
	assert_string_equal(t, "new ;\n");
	free(t);
	t = slurp(l->bak, NULL);
	assert_string_equal(t, admin_text);
	free(t);
	assert_int_equal(stat(l->parts, &st2), 0);
	assert_int_equal(st2.st_mode & 07777, 0640); /* the mode is kept */
	/* the file changed since it was read: nothing is replaced */
	assert_int_equal(pf_install(l->parts, NULL, "old", 3, &st, "x", 1, err, sizeof(err)),
			 -EAGAIN);
	assert_has(err, "changed while ibvf was updating it");
	t = slurp(l->parts, NULL);
	assert_string_equal(t, "new ;\n");
	free(t);
	/* no temp file is left behind */
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s | grep -E '^[.].*ibvf-|[.]tmp[.]')\"",
		 l->dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(pf_read("/nonexistent/p.conf", &t, &len, &st, err, sizeof(err)), -ENOENT);
	assert_has(err, "ibvf never creates OpenSM's partition file");
	assert_int_equal(pf_read(l->dir, &t, &len, &st, err, sizeof(err)), -EINVAL);
	spit(l->parts, admin_text);
}

/*
 * partitions.conf -> conf.d/real.conf (and the backup a link too): every
 * write replaces the links' targets, in the targets' directory, and keeps
 * the links (issue 15 item 3).
 */
static void test_symlinked_file(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member m = {G(0x0002c90300100001), IBVF_MEMBER_FULL};
	const uint64_t rm = G(0x0002c90300100001);
	char err[IBVF_ERR_LEN] = "", real[192], rbak[192], sub[160], cmd[512];
	struct ibvf_sm_backend *b;
	struct stat st;
	char *t;

	snprintf(sub, sizeof(sub), "%s/conf.d", l->dir);
	snprintf(real, sizeof(real), "%s/real-partitions.conf", sub);
	snprintf(rbak, sizeof(rbak), "%s/real-partitions.conf.prev", sub);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(rename(l->parts, real), 0);
	/* a relative link, and a backup link whose target does not exist yet */
	assert_int_equal(symlink("conf.d/real-partitions.conf", l->parts), 0);
	assert_int_equal(symlink(rbak, l->bak), 0);
	assert_int_equal(pf_resolve(l->parts, cmd, sizeof(cmd), err, sizeof(err)), 0);
	assert_string_equal(cmd, real);

	b = open_backend(l, NULL, NULL, NULL);
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)), 0);
	expect_hups(l, 1);
	assert_int_equal(lstat(l->parts, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(lstat(l->bak, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	t = slurp(real, NULL);
	assert_has(t, PC_BEGIN_MARKER);
	assert_has(section_of(t), "0x0002c90300100001=full");
	free(t);
	t = slurp(rbak, NULL);
	assert_string_equal(t, admin_text);
	free(t);
	assert_int_equal(stat(real, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* the admin's later edit of the real file is what the next write reads */
	t = slurp(real, NULL);
	{
		FILE *f = fopen(real, "a");

		assert_non_null(f);
		fputs("extra=0x0a05 : ALL=limited ;\n", f);
		fclose(f);
	}
	free(t);
	assert_int_equal(opensm_ops.remove_members(b, 0x0a10, &rm, 1, err, sizeof(err)), 0);
	expect_hups(l, 2);
	t = slurp(l->parts, NULL);
	assert_has(t, "extra=0x0a05 : ALL=limited ;\n");
	assert_null(strstr(t, "0x0002c90300100001=full"));
	free(t);
	assert_int_equal(lstat(l->parts, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	/* no temp file next to the link or the target */
	snprintf(cmd, sizeof(cmd),
		 "test -z \"$( (ls -A %s; ls -A %s) | grep -E '^[.].*ibvf-|[.]tmp[.]')\"", l->dir,
		 sub);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(opensm_ops.validate(b, cmd, sizeof(cmd), err, sizeof(err)), 0);
	assert_has(cmd, "4 admin partitions");
	/* a link loop is refused, not followed forever */
	assert_int_equal(unlink(l->bak), 0);
	assert_int_equal(symlink(l->bak, l->bak), 0);
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)), -ELOOP);
	opensm_ops.fini(b);
	/* the fixture's teardown removes the directory */
	assert_int_equal(unlink(l->parts), 0);
	assert_int_equal(rename(real, l->parts), 0);
}

static void test_find_opensm(void **state)
{
	struct lab *l = *state;
	char err[IBVF_ERR_LEN] = "", path[4096];
	pid_t pid = 0, other;

	assert_int_equal(opensm_find(l->pidf, &pid, err, sizeof(err)), 0);
	assert_int_equal(pid, l->osm);
	assert_int_equal(opensm_reload(l->pidf, &pid, err, sizeof(err)), 0);
	expect_hups(l, 1);
	assert_int_equal(opensm_partition_path(l->osm, path, sizeof(path), err, sizeof(err)), 0);
	assert_string_equal(path, "/etc/opensm/partitions.conf");

	write_pidfile(l, getpid());
	assert_int_equal(opensm_reload(l->pidf, &pid, err, sizeof(err)), -ESRCH);
	assert_has(err, "not opensm; refusing to signal it");
	spit(l->pidf, "12abc\n");
	assert_int_equal(opensm_find(l->pidf, &pid, err, sizeof(err)), -EINVAL);
	assert_has(err, "does not hold a process id");
	spit(l->pidf, "999999999\n");
	assert_int_equal(opensm_find(l->pidf, &pid, err, sizeof(err)), -ESRCH);
	assert_has(err, "OpenSM is not running: no process 999999999");
	unlink(l->pidf);
	assert_int_equal(opensm_find(l->pidf, &pid, err, sizeof(err)), -ESRCH);
	assert_has(err, "does not exist (is OpenSM running?)");

	/* which file does it read: -P, --Pconfig=, or -F's partition_config_file */
	other = spawn_opensm(l, (const char *const[]){"-B", "-P", "/x/p1.conf", NULL});
	assert_int_equal(opensm_partition_path(other, path, sizeof(path), err, sizeof(err)), 0);
	assert_string_equal(path, "/x/p1.conf");
	stop_pid(other);
	other = spawn_opensm(l, (const char *const[]){"--Pconfig=/x/p2.conf", NULL});
	assert_int_equal(opensm_partition_path(other, path, sizeof(path), err, sizeof(err)), 0);
	assert_string_equal(path, "/x/p2.conf");
	stop_pid(other);
	snprintf(path, sizeof(path), "%s/osm.conf", l->dir);
	spit(path, "# opensm.conf\nguid 0x1\npartition_config_file /x/p3.conf\n");
	other = spawn_opensm(l, (const char *const[]){"-F", path, NULL});
	assert_int_equal(opensm_partition_path(other, path, sizeof(path), err, sizeof(err)), 0);
	assert_string_equal(path, "/x/p3.conf");
	stop_pid(other);
	write_pidfile(l, l->osm);
}

struct seen {
	int n, admin;
	uint16_t pkey[16];
	struct ibvf_sm_member m[16];
	bool managed[16];
};

static int collect(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct seen *s = arg;

	if (s->n < 16) {
		s->pkey[s->n] = pkey;
		s->m[s->n] = *m;
		s->managed[s->n] = managed;
	}
	s->n++;
	s->admin += !managed;
	return 0;
}

static void test_add_remove_list(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member m[] = {
		{G(0x0002c90300100001), IBVF_MEMBER_FULL},
		{G(0x0002c90300100003), IBVF_MEMBER_LIMITED},
	};
	const struct ibvf_sm_pkey_flags idx0 = {.index0 = true, .ipoib = false};
	const uint64_t rm[] = {G(0x0002c90300100001), G(0x0002c90300100003)};
	struct ibvf_sm_backend *b =
		open_backend(l, "\"admin_pkeys\": {\"0x0a01\": \"request\"}", NULL, NULL);
	char err[IBVF_ERR_LEN] = "", *t, *bak;
	struct seen s = {0};
	struct stat st1, st2;

	/* a new partition with the configured defaults (ipoib) */
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, m, 2, NULL, err, sizeof(err)), 0);
	expect_hups(l, 1);
	t = slurp(l->parts, NULL);
	assert_memory_equal(t, admin_text, strlen(admin_text));
	assert_has(section_of(t), "ibvf_0x0a10=0x0a10, ipoib :\n\t0x0002c90300100001=full, "
				  "0x0002c90300100003=limited ;\n");
	bak = slurp(l->bak, NULL);
	assert_string_equal(bak, admin_text);
	free(bak);
	free(t);

	/* idempotent: nothing written, OpenSM not signalled */
	assert_int_equal(stat(l->parts, &st1), 0);
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, m, 2, NULL, err, sizeof(err)), 0);
	assert_int_equal(stat(l->parts, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	expect_hups(l, 1);

	/* a PKey the admin defines: merged, no partition flags; index0 → indx0 */
	assert_int_equal(opensm_ops.add_members(b, 0x0a01, m, 1, &idx0, err, sizeof(err)), 0);
	expect_hups(l, 2);
	t = slurp(l->parts, NULL);
	assert_has(section_of(t), "ibvf_0x0a01=0x0a01, indx0 :\n\t0x0002c90300100001=full ;\n");
	free(t);

	/* a GUID the admin lists explicitly is the admin's */
	{
		const struct ibvf_sm_member fs = {G(0x0002c90300a00002), IBVF_MEMBER_FULL};

		assert_int_equal(opensm_ops.add_members(b, 0x0a01, &fs, 1, NULL, err, sizeof(err)),
				 -EEXIST);
		assert_has(err, "already a limited member of PKey 0x0a01 by the administrator's "
				"definition at line 3");
	}

	/* list: managed members, then the admin's explicit GUIDs (read-only) */
	assert_int_equal(opensm_ops.list_members(b, -1, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 5);
	assert_int_equal(s.admin, 2);
	assert_int_equal(s.pkey[0], 0x0a01);
	assert_true(s.managed[0]);
	assert_int_equal(s.pkey[1], 0x0a10);
	assert_int_equal(s.m[2].membership, IBVF_MEMBER_LIMITED);
	assert_false(s.managed[3]);
	assert_true(s.m[3].guid == G(0x0002c90300a00001));
	memset(&s, 0, sizeof(s));
	assert_int_equal(opensm_ops.list_members(b, 0x0a10, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 2);

	/* remove: absent GUIDs are fine; the emptied PKey goes, the markers stay */
	assert_int_equal(opensm_ops.remove_members(b, 0x0a10, rm, 2, err, sizeof(err)), 0);
	expect_hups(l, 3);
	assert_int_equal(opensm_ops.remove_members(b, 0x0a10, rm, 2, err, sizeof(err)), 0);
	assert_int_equal(opensm_ops.remove_members(b, 0x0a01, rm, 1, err, sizeof(err)), 0);
	expect_hups(l, 4);
	t = slurp(l->parts, NULL);
	assert_string_equal(section_of(t), PC_BEGIN_MARKER "\n" PC_END_MARKER "\n");
	free(t);
	opensm_ops.fini(b);
}

/*
 * Joining an administrator's partition is an opt-in per PKey (admin_pkeys),
 * and the membership is the opt-in's: the admin's defmember unless it says
 * "full", "limited" or "request" (issue 15 item 4).
 */
static void test_admin_opt_in(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member full = {G(0x0002c90300100001), IBVF_MEMBER_FULL};
	const struct ibvf_sm_member lim = {G(0x0002c90300100001), IBVF_MEMBER_LIMITED};
	char err[IBVF_ERR_LEN] = "", text[1024], *t;
	struct ibvf_sm_backend *b;
	struct opensm_cfg c;

	snprintf(text, sizeof(text), "%stenants=0x0a03, defmember=full : 0x0002c90300a00009 ;\n",
		 admin_text);
	spit(l->parts, text);
	/* no opt-in: refused, naming the admin's partition; nothing written */
	b = open_backend(l, NULL, NULL, NULL);
	assert_int_equal(opensm_ops.add_members(b, 0x0a01, &full, 1, NULL, err, sizeof(err)),
			 -EPERM);
	assert_has(err, "PKey 0x0a01 is the administrator's partition 'storage' (line 3");
	assert_has(err, "defmember=limited");
	assert_has(err, "admin_pkeys");
	assert_false(ibvf_sm_err_is_transient(-EPERM));
	assert_int_equal(opensm_ops.add_members(b, 0x0a03, &lim, 1, NULL, err, sizeof(err)),
			 -EPERM);
	assert_has(err, "'tenants' (line 5");
	/* a PKey only ibvf defines needs none */
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &full, 1, NULL, err, sizeof(err)), 0);
	expect_hups(l, 1);
	opensm_ops.fini(b);

	b = open_backend(l,
			 "\"admin_pkeys\": {\"0x0a01\": \"defmember\", \"0x8a03\": \"defmember\", "
			 "\"0x0a02\": \"full\", \"0x0a04\": \"limited\"}",
			 NULL, NULL);
	/* storage is defmember=limited: full is refused, limited joins */
	assert_int_equal(opensm_ops.add_members(b, 0x0a01, &full, 1, NULL, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "full membership of the administrator's partition 'storage'");
	assert_has(err, "allows only limited members (\"defmember\")");
	assert_true(ibvf_sm_err_is_member_fault(-EINVAL));
	expect_hups(l, 1);
	assert_int_equal(opensm_ops.add_members(b, 0x0a01, &lim, 1, NULL, err, sizeof(err)), 0);
	expect_hups(l, 2);
	/* tenants is defmember=full (the opt-in's key may carry the full bit) */
	assert_int_equal(opensm_ops.add_members(b, 0x0a03, &lim, 1, NULL, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(opensm_ops.add_members(b, 0x0a03, &full, 1, NULL, err, sizeof(err)), 0);
	expect_hups(l, 3);
	/* infra: the opt-in overrides the defmember (limited) */
	assert_int_equal(opensm_ops.add_members(b, 0x0a02, &lim, 1, NULL, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "allows only full members (\"full\")");
	assert_int_equal(opensm_ops.add_members(b, 0x0a02, &full, 1, NULL, err, sizeof(err)), 0);
	expect_hups(l, 4);
	t = slurp(l->parts, NULL);
	assert_memory_equal(t, text, strlen(text));
	assert_has(section_of(t), "ibvf_0x0a01=0x0a01 :\n\t0x0002c90300100001=limited ;\n");
	assert_has(section_of(t), "ibvf_0x0a02=0x0a02 :\n\t0x0002c90300100001=full ;\n");
	assert_has(section_of(t), "ibvf_0x0a03=0x0a03 :\n\t0x0002c90300100001=full ;\n");
	free(t);
	/* removal needs no opt-in */
	opensm_ops.fini(b);
	b = open_backend(l, NULL, NULL, NULL);
	assert_int_equal(opensm_ops.remove_members(b, 0x0a01, &full.guid, 1, err, sizeof(err)), 0);
	expect_hups(l, 5);
	opensm_ops.fini(b);

	/* config errors name the key */
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"admin_pkeys\": "
					  "{\"0xzz\": \"full\"}}",
					  &c, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "admin_pkeys.0xzz: expected a PKey");
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"admin_pkeys\": "
					  "{\"0x0a01\": \"most\"}}",
					  &c, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "expected \"defmember\", \"full\", \"limited\" or \"request\"");
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"admin_pkeys\": "
					  "{\"0x0a01\": \"full\", \"0x8a01\": \"limited\"}}",
					  &c, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "given twice");
	assert_int_equal(opensm_cfg_parse("{\"pid_file\": \"/run/p\", \"admin_pkeys\": "
					  "{\"0x7fff\": \"full\"}}",
					  &c, err, sizeof(err)),
			 -EINVAL);
	spit(l->parts, admin_text);
}

static void test_bad_requests(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member ok = {G(0x0002c90300100001), IBVF_MEMBER_FULL};
	const struct ibvf_sm_member dup[] = {ok, {ok.guid, IBVF_MEMBER_LIMITED}};
	const struct ibvf_sm_member zero = {0, IBVF_MEMBER_FULL};
	const uint64_t ones = ~UINT64_C(0);
	struct ibvf_sm_backend *b = open_backend(l, NULL, NULL, NULL);
	char err[IBVF_ERR_LEN] = "";

	assert_int_equal(opensm_ops.add_members(b, 0, &ok, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(opensm_ops.add_members(b, 0x8a10, &ok, 1, NULL, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "expected a 15-bit partition key");
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &zero, 1, NULL, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, dup, 2, NULL, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "given twice with different memberships");
	assert_int_equal(opensm_ops.remove_members(b, 0x0a10, &ones, 1, err, sizeof(err)), -EINVAL);
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, NULL, 0, NULL, err, sizeof(err)), 0);
	assert_int_equal(opensm_ops.list_members(b, 0x8000, collect, NULL, err, sizeof(err)),
			 -EINVAL);
	expect_hups(l, 0);
	opensm_ops.fini(b);
}

/* Whatever goes wrong before the rename leaves the file and OpenSM alone. */
static void test_refusals_touch_nothing(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member m = {G(0x0002c90300100001), IBVF_MEMBER_FULL};
	struct ibvf_sm_backend *b = open_backend(l, NULL, NULL, NULL);
	static const char broken[] = "Default=0x7fff : ALL=full ;\n"
				     "tenant1=0x0a05 : 0x0002c90300001001=full, 0xZZZZ=full ;\n";
	char err[IBVF_ERR_LEN] = "", *t;
	int fd;

	/* an unparsable base file */
	spit(l->parts, broken);
	/* the admin's file is at fault, permanently, not the member: -EBADMSG */
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)),
			 -EBADMSG);
	assert_false(ibvf_sm_err_is_transient(-EBADMSG));
	assert_false(ibvf_sm_err_is_member_fault(-EBADMSG));
	assert_has(err, "nothing was changed: ");
	assert_has(err, "partitions.conf:2:43: bad port GUID '0xZZZZ'");
	t = slurp(l->parts, NULL);
	assert_string_equal(t, broken);
	free(t);
	assert_int_equal(access(l->bak, F_OK), -1);

	/* OpenSM not running, or the pid is not OpenSM */
	spit(l->parts, admin_text);
	write_pidfile(l, 999999999);
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)), -ESRCH);
	write_pidfile(l, getpid());
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)), -ESRCH);
	assert_has(err, "not opensm");
	t = slurp(l->parts, NULL);
	assert_string_equal(t, admin_text);
	free(t);
	write_pidfile(l, l->osm);

	/* another ibvf writer holds the lock */
	fd = open(l->lock, O_RDWR | O_CREAT, 0600);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)), -EBUSY);
	assert_has(err, "held by another ibvf process");
	close(fd);
	expect_hups(l, 0);
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)), 0);
	expect_hups(l, 1);
	opensm_ops.fini(b);
}

/*
 * A FIFO in place of the partition file or the pid file: the backend used to
 * block for ever in open(2) (holding the writers' lock), waiting for a
 * writer. It must refuse at once. alarm() turns a regression into a failure.
 */
static void test_special_files(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member m = {G(0x0002c90300100001), IBVF_MEMBER_FULL};
	struct ibvf_sm_backend *b = open_backend(l, NULL, NULL, NULL);
	char err[IBVF_ERR_LEN] = "", keep[160];
	struct stat st;
	size_t len;
	pid_t pid;
	char *t;

	snprintf(keep, sizeof(keep), "%s.keep", l->parts);
	assert_int_equal(rename(l->parts, keep), 0);
	assert_int_equal(mkfifo(l->parts, 0600), 0);
	alarm(20);
	assert_int_equal(pf_read(l->parts, &t, &len, &st, err, sizeof(err)), -EINVAL);
	assert_has(err, "not a regular file");
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_has(err, "not a regular file");
	alarm(0);
	assert_int_equal(unlink(l->parts), 0);
	assert_int_equal(rename(keep, l->parts), 0);

	assert_int_equal(unlink(l->pidf), 0);
	assert_int_equal(mkfifo(l->pidf, 0600), 0);
	alarm(20);
	assert_int_equal(opensm_find(l->pidf, &pid, err, sizeof(err)), -EINVAL);
	assert_has(err, "is not a regular file");
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)), -EINVAL);
	alarm(0);
	assert_int_equal(unlink(l->pidf), 0);
	write_pidfile(l, l->osm);
	t = slurp(l->parts, NULL);
	assert_string_equal(t, admin_text);
	free(t);
	expect_hups(l, 0);
	opensm_ops.fini(b);
}

/* Entries of @dir whose name starts with @prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
	char cmd[512];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -c '^%s'", dir, prefix);
	p = popen(cmd, "r");
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

/*
 * Writers SIGKILLed at random points of add_members(): the partition file is
 * never partly written and the admin's part never changes; the temp files
 * the killed writers left (".partitions.conf.ibvf-XXXXXX",
 * "partitions.conf.ibvf-prev.tmp.PID") used to pile up in /etc/opensm for
 * ever. The next write removes them, and nothing else.
 */
static void test_killed_writers(void **state)
{
	struct lab *l = *state;
	char err[IBVF_ERR_LEN] = "", path[256];
	struct ibvf_sm_backend *b;
	unsigned seed = 12345;
	struct stat st;
	char *t;

	for (int round = 0; round < 25; round++) {
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (!pid) {
			b = open_backend(l, NULL, NULL, NULL);
			for (uint64_t i = 0;; i++) {
				uint64_t g = G(0x0002c90300200000) + (uint64_t)round * 1000 + i;
				struct ibvf_sm_member m = {g, IBVF_MEMBER_FULL};

				opensm_ops.add_members(b, 0x0a10 + (uint16_t)(i % 3), &m, 1, NULL,
						       err, sizeof(err));
			}
		}
		usleep(1000 + rand_r(&seed) % 20000);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		t = slurp(l->parts, NULL);
		assert_non_null(t);
		assert_memory_equal(t, admin_text, strlen(admin_text));
		free(t);
	}
	/* leftovers of the kind a killed writer leaves, and look-alikes that must stay */
	snprintf(path, sizeof(path), "%s/.partitions.conf.ibvf-AbC123", l->dir);
	spit(path, "stale");
	snprintf(path, sizeof(path), "%s.tmp.4242", l->bak);
	spit(path, "stale");
	snprintf(path, sizeof(path), "%s/.partitions.conf.ibvf-admin-notes", l->dir);
	spit(path, "keep");
	snprintf(path, sizeof(path), "%s.tmp.mine", l->bak);
	spit(path, "keep");
	snprintf(path, sizeof(path), "%s/.partitions.conf.ibvf-Dir123", l->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	b = open_backend(l, NULL, NULL, NULL);
	{
		const struct ibvf_sm_member m = {G(0x0002c90300300001), IBVF_MEMBER_FULL};

		assert_int_equal(opensm_ops.add_members(b, 0x0a20, &m, 1, NULL, err, sizeof(err)),
				 0);
	}
	opensm_ops.fini(b);
	assert_int_equal(count_prefixed(l->dir, "[.]partitions[.]conf[.]ibvf-"), 2);
	assert_int_equal(count_prefixed(l->dir, "partitions[.]conf[.]ibvf-prev[.]tmp[.]"), 1);
	snprintf(path, sizeof(path), "%s/.partitions.conf.ibvf-admin-notes", l->dir);
	assert_int_equal(stat(path, &st), 0);
	snprintf(path, sizeof(path), "%s.tmp.mine", l->bak);
	assert_int_equal(stat(path, &st), 0);
	t = slurp(l->parts, NULL);
	assert_memory_equal(t, admin_text, strlen(admin_text));
	assert_has(t, "0x0002c90300300001=full");
	free(t);
}

/*
 * The section's markers damaged (both indented, as a template engine might
 * do): remove_members() used to report success without removing anything,
 * the GUID staying a full member for its next owner, and add_members()
 * appended a second section. Both must refuse and touch nothing.
 */
static void test_damaged_markers(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member m = {G(0x0002c90300100002), IBVF_MEMBER_FULL};
	const uint64_t g = G(0x0002c90300100001);
	struct ibvf_sm_backend *b = open_backend(l, NULL, NULL, NULL);
	char err[IBVF_ERR_LEN] = "", text[2048], *t;

	snprintf(text, sizeof(text),
		 "%s  %s\nibvf_0x0a10=0x0a10 :\n\t0x0002c90300100001=full ;\n"
		 "  %s\n",
		 admin_text, PC_BEGIN_MARKER, PC_END_MARKER);
	spit(l->parts, text);
	assert_int_equal(opensm_ops.remove_members(b, 0x0a10, &g, 1, err, sizeof(err)), -EBADMSG);
	assert_has(err, "nothing was changed");
	assert_has(err, "looks like an ibvf section marker");
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)),
			 -EBADMSG);
	t = slurp(l->parts, NULL);
	assert_string_equal(t, text);
	free(t);
	expect_hups(l, 0);
	opensm_ops.fini(b);
}

static void test_validate(void **state)
{
	struct lab *l = *state;
	struct ibvf_sm_backend *b = open_backend(l, NULL, NULL, NULL);
	char err[IBVF_ERR_LEN] = "", desc[512] = "";

	assert_int_equal(opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	assert_has(desc, "OpenSM pid ");
	assert_has(desc, "3 admin partitions (0 warnings), 0 managed PKeys with 0 members; "
			 "verification off");
	opensm_ops.fini(b);
	/* an OpenSM that reads another file */
	stop_pid(l->osm);
	l->osm = spawn_opensm(l, (const char *const[]){"-P", "/etc/hostname", NULL});
	write_pidfile(l, l->osm);
	b = open_backend(l, NULL, NULL, NULL);
	assert_int_equal(opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err)), -EINVAL);
	assert_has(err, "reads its partitions from /etc/hostname");
	opensm_ops.fini(b);
}

/* The state letter of /proc/@pid/stat ('R', 'S', 'Z', ...), or 0. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * A zombie opensm (exited, not reaped: the pid file still names it) and a
 * stale pid are "not running": validate() and every change say so.
 */
static void test_validate_dead_opensm(void **state)
{
	struct lab *l = *state;
	struct ibvf_sm_backend *b = open_backend(l, NULL, NULL, NULL);
	char err[IBVF_ERR_LEN] = "", desc[512] = "";
	struct ibvf_sm_member m = {G(0x0002c90300100001), IBVF_MEMBER_FULL};
	pid_t z = spawn_opensm(l, NULL), pid = 0;

	kill(z, SIGKILL); /* and no waitpid(): a zombie whose comm is still "opensm" */
	for (int64_t end = now_ms() + 10000; proc_state(z) != 'Z' && now_ms() < end;)
		usleep(2000);
	assert_int_equal(proc_state(z), 'Z');
	write_pidfile(l, z);
	assert_int_equal(opensm_find(l->pidf, &pid, err, sizeof(err)), -ESRCH);
	assert_has(err, "has exited (state Z, a zombie its parent has not reaped)");
	assert_int_equal(opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err)), -ESRCH);
	assert_has(err, "OpenSM is not running");
	assert_int_equal(opensm_ops.add_members(b, 0x0012, &m, 1, NULL, err, sizeof(err)), -ESRCH);
	assert_has(err, "zombie");
	/* reaped: the pid file is stale */
	assert_int_equal(waitpid(z, NULL, 0), z);
	assert_int_equal(opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err)), -ESRCH);
	assert_has(err, "OpenSM is not running: no process");
	write_pidfile(l, l->osm);
	assert_int_equal(opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	opensm_ops.fini(b);
}

/* Child of test_validate_read_only(): l->dir read-only in a mount namespace of its own. */
static int ro_mount_child(const struct lab *l)
{
	struct ibvf_sm_member m = {G(0x0002c90300100001), IBVF_MEMBER_FULL};
	char cfg[1024], err[IBVF_ERR_LEN] = "", desc[512] = "";
	struct ibvf_sm_backend *b = NULL;
	int ret;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount(l->dir, l->dir, NULL, MS_BIND, NULL) ||
	    mount(NULL, l->dir, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL)) {
		fprintf(stderr, "# read-only bind mount of %s: %s\n", l->dir, strerror(errno));
		return 77;
	}
	snprintf(cfg, sizeof(cfg),
		 "{\"partition_file\": \"%s\", \"pid_file\": \"%s\", \"verify\": \"off\"}",
		 l->parts, l->pidf);
	if (opensm_ops.init(cfg, &b, err, sizeof(err)))
		return 2;
	ret = opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err));
	if (ret != -EROFS || !strstr(err, "is not writable")) {
		fprintf(stderr, "# validate on a read-only mount: %d %s\n", ret, err);
		return 3;
	}
	ret = opensm_ops.add_members(b, 0x0012, &m, 1, NULL, err, sizeof(err));
	if (ret != -EROFS) {
		fprintf(stderr, "# add on a read-only mount: %d %s\n", ret, err);
		return 4;
	}
	opensm_ops.fini(b);
	return 0;
}

/*
 * A partition file ibvf cannot replace (a read-only mount, an immutable
 * file) fails every change: validate() must not call that SM "ok".
 */
static void test_validate_read_only(void **state)
{
	struct lab *l = *state;
	struct ibvf_sm_backend *b = open_backend(l, NULL, NULL, NULL);
	char err[IBVF_ERR_LEN] = "", desc[512] = "";
	int fd, flags = 0, st = 0, tried = 0;
	pid_t pid;

	assert_int_equal(opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	/* a read-only file system (e.g. a ConfigMap mount) */
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		_exit(ro_mount_child(l));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77 && geteuid() != 0) {
		/* not root: a directory without write permission does the same */
		assert_int_equal(chmod(l->dir, 0555), 0);
		assert_int_equal(opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err)),
				 -EACCES);
		assert_has(err, "is not writable");
		assert_int_equal(chmod(l->dir, 0700), 0);
		tried++;
	} else if (WEXITSTATUS(st) == 77) {
		fprintf(stderr, "# SKIP read-only mount case: no mount namespace here\n");
	} else {
		assert_int_equal(WEXITSTATUS(st), 0);
		tried++;
	}
	/* an immutable file (chattr +i) in a writable directory */
	fd = open(l->parts, O_RDONLY);
	assert_true(fd >= 0);
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
	    (flags |= FS_IMMUTABLE_FL, ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0)) {
		int ret = opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err));

		flags &= ~FS_IMMUTABLE_FL;
		assert_int_equal(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
		assert_int_equal(ret, -EPERM);
		assert_has(err, "it is immutable");
		tried++;
	} else {
		fprintf(stderr, "# SKIP immutable case: %s\n", strerror(errno));
	}
	close(fd);
	assert_true(tried > 0); /* at least one way to make the file read-only worked */
	assert_int_equal(opensm_ops.validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	opensm_ops.fini(b);
}

/* ---------------------------------------------------------- verification -- */

static void test_verify_fabric(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member m[] = {
		{G(0x0002c90300100001), IBVF_MEMBER_FULL},
		{G(0x0002c90300100003), IBVF_MEMBER_LIMITED},
		{G(0x0002c90300100005), IBVF_MEMBER_FULL}, /* not on the fabric */
	};
	const uint64_t rm[] = {G(0x0002c90300100001), G(0x0002c90300100005)};
	struct fake fk = {.on_fabric = {G(0x0002c90300100001), G(0x0002c90300100003)}};
	struct ibvf_sm_backend *b = open_backend(
		l, "\"reload_timeout_ms\": 300, \"admin_pkeys\": {\"0x0a02\": \"request\"}", &fk,
		NULL);
	char err[IBVF_ERR_LEN] = "";

	assert_int_equal(opensm_ops.add_members(b, 0x0a10, m, 3, NULL, err, sizeof(err)), 0);
	assert_int_equal(fk.resolves, 3);
	assert_int_equal(fk.n_calls, 2); /* the off-fabric GUID is skipped */
	assert_int_equal(fk.calls[0].want, PV_FULL);
	assert_int_equal(fk.calls[0].pkey, 0x0a10);
	assert_int_equal(fk.calls[0].lid, 1);
	assert_int_equal(fk.calls[1].want, PV_LIMITED);
	assert_true(fk.calls[1].timeout_ms <= 300);
	expect_hups(l, 1);

	/* removal: the port must lose the P_Key */
	fk.n_calls = 0;
	assert_int_equal(opensm_ops.remove_members(b, 0x0a10, rm, 2, err, sizeof(err)), 0);
	assert_int_equal(fk.n_calls, 1);
	assert_int_equal(fk.calls[0].want, PV_ABSENT);
	expect_hups(l, 2); /* before the next one: pending SIGHUPs merge into one */

	/* removal from a PKey whose admin definition has keywords: not verifiable */
	fk.n_calls = 0;
	assert_int_equal(opensm_ops.add_members(b, 0x0a02, m, 1, NULL, err, sizeof(err)), 0);
	assert_int_equal(fk.n_calls, 1);
	expect_hups(l, 3);
	fk.n_calls = 0;
	assert_int_equal(opensm_ops.remove_members(b, 0x0a02, rm, 1, err, sizeof(err)), 0);
	assert_int_equal(fk.n_calls, 0);
	expect_hups(l, 4);

	/* a port that never shows the P_Key: a clear error, the file keeps the change */
	fk.broken = G(0x0002c90300100003);
	fk.n_calls = 0;
	assert_int_equal(opensm_ops.add_members(b, 0x0a11, m, 2, NULL, err, sizeof(err)),
			 -ETIMEDOUT);
	assert_has(err, "OpenSM reloaded ");
	assert_has(err, "P_Key 0x0a11 not confirmed through SMPs on 1 of 2 ports within 300 ms: "
			"GUID 0x0002c90300100003 (LID 2, want limited): timed out");
	expect_hups(l, 5);
	/* the retry changes nothing in the file: a quick look, then OpenSM is asked again */
	fk.broken = 0;
	fk.fail_next = 1;
	fk.n_calls = 0;
	assert_int_equal(opensm_ops.add_members(b, 0x0a11, m, 2, NULL, err, sizeof(err)), 0);
	expect_hups(l, 6);
	assert_int_equal(fk.n_calls, 4); /* 2 quick checks + 2 waits */
	assert_int_equal(fk.calls[0].timeout_ms, 0);

	/* the SA cannot be asked at all: refused before anything changes */
	fk.resolve_err = -EHOSTUNREACH;
	assert_int_equal(opensm_ops.add_members(b, 0x0a12, m, 1, NULL, err, sizeof(err)),
			 -EHOSTUNREACH);
	assert_has(err, "SMP verification from fake:1 cannot ask the SA: no SM LID");
	expect_hups(l, 6);
	opensm_ops.fini(b);
	assert_true(fk.closed);
}

static void test_verify_all(void **state)
{
	struct lab *l = *state;
	const struct ibvf_sm_member m = {G(0x0002c90300100007), IBVF_MEMBER_FULL};
	struct fake fk = {.on_fabric = {G(0x0002c90300100001)}};
	struct ibvf_sm_backend *b = open_backend(l, "\"reload_timeout_ms\": 150", &fk, "all");
	char err[IBVF_ERR_LEN] = "";
	int64_t t0;

	t0 = now_ms();
	assert_int_equal(opensm_ops.add_members(b, 0x0a10, &m, 1, NULL, err, sizeof(err)),
			 -ETIMEDOUT);
	assert_true(now_ms() - t0 >= 150);
	assert_has(err, "GUID 0x0002c90300100007 (LID 0, want full): the SA still knows no port "
			"with this GUID: no path");
	assert_true(fk.resolves >= 2); /* before the change, and again after it */
	opensm_ops.fini(b);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config),
		cmocka_unit_test_setup_teardown(test_install, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_symlinked_file, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_find_opensm, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_add_remove_list, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_admin_opt_in, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_bad_requests, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_refusals_touch_nothing, lab_setup,
						lab_teardown),
		cmocka_unit_test_setup_teardown(test_special_files, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_killed_writers, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_damaged_markers, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_validate, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_validate_dead_opensm, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_validate_read_only, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_verify_fabric, lab_setup, lab_teardown),
		cmocka_unit_test_setup_teardown(test_verify_all, lab_setup, lab_teardown),
	};

	(void)argc;
	if (!strcmp(basename(argv[0]), "opensm"))
		return fake_opensm();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
