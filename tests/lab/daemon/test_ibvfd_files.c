// SPDX-License-Identifier: MIT
/*
 * Whole-daemon tests of issue 14's "no file may block ibvf" and "secrets"
 * (the real ibvfd with the lab's fake VF driver and "file" SM backend,
 * tests/lab/daemon/ibvfd_lab.c):
 *
 *   test_ibvfd_files IBVFD IBVFCTL SM_MODULE_DIR
 *     - a FIFO as the config file: `ibvfd --print-config -c FIFO` and
 *       `ibvfctl -c FIFO daemon status` end within 10 s with exit 2 and
 *       "not a regular file (a FIFO)";
 *     - a running ibvfd whose config file is replaced by a FIFO: SIGHUP is
 *       refused with a logged reason, the API still answers, SIGTERM stops
 *       it (it used to hang for good in open(2) on the loop thread);
 *     - UFM_PASSWORD given in ibvfd's environment is not in
 *       /proc/PID/environ once it is ready;
 *     - ibvfd is not dumpable: SIGABRT leaves no core dump where a dumpable
 *       control process leaves one (SKIP if the control leaves none).
 *
 * Prints TAP lines and "N passed, N failed"; exit 0 when all passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "ibvfd_lab.h"

#define SECRET "env-pw-5d41402abc4b2a76"

/* The whole of a small file (NULs kept as bytes; *len set), or NULL. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = n + 8192);

			if (!nb)
				break;
			buf = nb;
		}
		size_t r = fread(buf + n, 1, 4096, f);

		if (!r)
			break;
		n += r;
	}
	fclose(f);
	if (buf)
		buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

static bool mem_has(const char *hay, size_t len, const char *needle)
{
	return hay && memmem(hay, len, needle, strlen(needle)) != NULL;
}

/*
 * Run @argv with stdout+stderr to @out, killed after @limit_ms.
 * Return: the wait status, or -1 when it had to be killed (it blocked).
 */
static int run_bounded(const char *const argv[], const char *out, int limit_ms)
{
	int64_t end = ibvf_mono_ms() + limit_ms;
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (ibvf_mono_ms() < end) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static void test_fifo_cli(const char *ibvfd, const char *ibvfctl, const char *dir)
{
	char fifo[256], out[256];
	size_t len;
	char *text;
	int st;

	snprintf(fifo, sizeof(fifo), "%s/fifo.json", dir);
	snprintf(out, sizeof(out), "%s/cli.out", dir);
	if (mkfifo(fifo, 0600)) {
		lab_result(false, "mkfifo %s: %s", fifo, strerror(errno));
		return;
	}
	{
		const char *argv[] = {ibvfd, "--print-config", "-c", fifo, NULL};

		st = run_bounded(argv, out, 10000);
		text = slurp(out, &len);
		lab_result(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 &&
				   mem_has(text, len, "is not a regular file (a FIFO)"),
			   "ibvfd --print-config -c FIFO: exit 2 at once, 'not a regular file (a "
			   "FIFO)' (status %d: %.200s)",
			   st, text ? text : "");
		free(text);
	}
	{
		const char *argv[] = {ibvfctl, "-c", fifo, "daemon", "status", NULL};

		st = run_bounded(argv, out, 10000);
		text = slurp(out, &len);
		lab_result(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 &&
				   mem_has(text, len, "is not a regular file (a FIFO)"),
			   "ibvfctl -c FIFO daemon status: exit 2 at once (status %d: %.200s)", st,
			   text ? text : "");
		free(text);
	}
	unlink(fifo);
}

/*
 * Does @pid leave a core dump when it dies of SIGABRT? Its wait status says
 * (WCOREDUMP). RLIMIT_CORE is raised by the caller before the process
 * starts; the core (if any) goes to its working directory (@dir).
 */
static bool dumped_core(int st)
{
	return WIFSIGNALED(st) && WCOREDUMP(st);
}

/* A dumpable control: a child that aborts in @dir. True when it dumped core. */
static bool control_dumps(const char *dir)
{
	pid_t c = fork();
	int st;

	if (c == 0) {
		if (chdir(dir))
			_exit(3);
		signal(SIGABRT, SIG_DFL);
		abort();
	}
	return c > 0 && waitpid(c, &st, 0) == c && dumped_core(st);
}

static void test_running(const char *ibvfd, const char *moddir, const char *dir)
{
	struct lab l;
	char env[64], aside[160];
	size_t len;
	char *text;
	json_t *r = NULL;
	int ret, st;

	if (lab_init(&l, ibvfd, 2, "file", moddir, NULL)) {
		lab_result(false, "lab_init");
		return;
	}
	setenv("UFM_PASSWORD", SECRET, 1); /* inherited by the ibvfd lab_start() forks */
	if (lab_start(&l, 15000) < 0) {
		lab_result(false, "ibvfd started (see %s)", l.log);
		unsetenv("UFM_PASSWORD");
		lab_fini(&l);
		return;
	}
	unsetenv("UFM_PASSWORD");

	/* secrets: environ scrubbed, not dumpable */
	snprintf(env, sizeof(env), "/proc/%d/environ", (int)l.pid);
	text = slurp(env, &len);
	lab_result(text && len > 0 && !mem_has(text, len, SECRET) &&
			   mem_has(text, len, "NOTIFY_SOCKET="),
		   "UFM_PASSWORD is not in /proc/PID/environ of a ready ibvfd");
	free(text);
	/* a FIFO in the config file's place: SIGHUP refused at once, still serving */
	snprintf(aside, sizeof(aside), "%s.aside", l.cfg);
	ret = rename(l.cfg, aside) || mkfifo(l.cfg, 0600);
	if (ret) {
		lab_result(false, "config replaced by a FIFO: %s", strerror(errno));
	} else {
		kill(l.pid, SIGHUP);
		lab_result(lab_wait_notify(&l, "READY=1", 5000),
			   "SIGHUP with a FIFO config: READY=1 again");
		ret = lab_api(&l, "status", NULL, &r, NULL, 5000);
		lab_result(!ret && json_is_true(json_object_get(r, "ready")),
			   "still serving after SIGHUP with a FIFO config (ret %d)", ret);
		json_decref(r);
		text = slurp(l.log, &len);
		lab_result(mem_has(text, len, "SIGHUP: config not reloaded") &&
				   mem_has(text, len, "is not a regular file (a FIFO)"),
			   "the log says why the config was not reloaded");
		free(text);
	}
	st = lab_stop(&l, SIGTERM);
	lab_result(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		   "SIGTERM after SIGHUP with a FIFO config: exit 0 (status %d)", st);
	unlink(l.cfg);
	rename(aside, l.cfg);

	/* not dumpable: SIGABRT leaves no core, where a control process leaves one */
	if (!control_dumps(dir)) {
		printf("ok %d - # SKIP no core dump from a dumpable control process here "
		       "(core_pattern, RLIMIT_CORE): PR_SET_DUMPABLE not checked\n",
		       lab_n_ok++ + lab_n_fail + 1);
	} else if (lab_start(&l, 15000) < 0) {
		lab_result(false, "ibvfd restarted (see %s)", l.log);
	} else {
		st = lab_stop(&l, SIGABRT);
		lab_result(st != -1 && WIFSIGNALED(st) && !dumped_core(st),
			   "ibvfd is not dumpable: SIGABRT leaves no core (status %d)", st);
	}
	lab_fini(&l);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/ibvf-files.XXXXXX";

	if (argc != 4) {
		fprintf(stderr, "usage: %s IBVFD IBVFCTL SM_MODULE_DIR\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_fifo_cli(argv[1], argv[2], dir);
	/* cores (of the control, or of a regression) land in @dir, removed below */
	{
		struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};

		setrlimit(RLIMIT_CORE, &rl);
		if (chdir(dir))
			return 1;
	}
	test_running(argv[1], argv[3], dir);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -f %s/core*", dir);
		if (system(cmd))
			fprintf(stderr, "could not remove %s/core*\n", dir);
	}
	rmdir(dir);
	printf("%d passed, %d failed\n", lab_n_ok, lab_n_fail);
	return lab_n_fail ? 1 : 0;
}
