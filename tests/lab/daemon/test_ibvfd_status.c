// SPDX-License-Identifier: MIT
/*
 * Whole-daemon test of "status that tells the truth" (issue 14): the real
 * ibvfd with the fake VF driver and the test-only "file" SM backend.
 *
 *   test_ibvfd_status IBVFD SM_MODULE_DIR IBVFCTL
 *
 *   1. The SM breaks after it was validated (the file backend's
 *      fail_validate_file appears): within a few periodic passes status says
 *      ready false with an "sm" reason, backend.ok false; it comes back.
 *   2. The store's disk fills up (the state directory is a small tmpfs, a
 *      filler file takes the rest): a prepare fails, status says ready false
 *      with a "store" reason naming the store, prepares are refused, and
 *      `ibvfctl daemon status` shows the reason; once space is freed, the
 *      periodic pass's probe write brings ready back without an attach.
 *
 * Part 2 needs root for the tmpfs (mount(2)); without it that part SKIPs
 * loudly ("# SKIP" on stderr) and part 1 still runs. Prints TAP lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include <ibvf/api.h>

#include "evloop.h"
#include "ibvfd_lab.h"
#include "log.h"

/* status, or NULL. */
static json_t *status(struct lab *l)
{
	json_t *r = NULL;

	if (lab_api(l, "status", NULL, &r, NULL, 10000))
		return NULL;
	return r;
}

/* The reason status gives for @check, or NULL (valid while @st lives). */
static const char *reason(json_t *st, const char *check)
{
	json_t *it;
	size_t i;

	json_array_foreach(json_object_get(st, "not_ready"), i, it)
	{
		const char *c = json_string_value(json_object_get(it, "check"));

		if (c && !strcmp(c, check))
			return json_string_value(json_object_get(it, "reason"));
	}
	return NULL;
}

/* Poll status until its ready is @want (at most @ms); the last status (caller frees). */
static json_t *wait_ready(struct lab *l, bool want, int ms)
{
	int64_t end = ibvf_mono_ms() + ms;
	json_t *st = NULL;

	for (;;) {
		json_decref(st);
		st = status(l);
		if ((st && json_is_true(json_object_get(st, "ready")) == want) ||
		    ibvf_mono_ms() >= end)
			return st;
		usleep(50000);
	}
}

/* "ibvfctl -c CFG daemon status" into @out; its exit status. */
static int ctl_status(struct lab *l, const char *ibvfctl, char *out, size_t len)
{
	int pfd[2], st;
	size_t got = 0;
	pid_t pid;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		execl(ibvfctl, "ibvfctl", "-c", l->cfg, "daemon", "status", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	for (ssize_t r; got < len - 1 && (r = read(pfd[0], out + got, len - 1 - got)) > 0;)
		got += (size_t)r;
	out[got] = 0;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Fill the file system of @path with a file @path until ENOSPC; bytes written. */
static long fill(const char *path)
{
	static char buf[65536];
	size_t chunk = sizeof(buf);
	long total = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	while (chunk) {
		ssize_t n = write(fd, buf, chunk);

		if (n > 0)
			total += n;
		else
			chunk /= 2; /* the tail, down to one byte */
	}
	fsync(fd);
	close(fd);
	return total;
}

static void sm_breaks(struct lab *l)
{
	json_t *st;

	close(open(l->failfile, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	st = wait_ready(l, false, 8000);
	lab_result(st && !json_is_true(json_object_get(st, "ready")) && reason(st, "sm") &&
			   !json_is_true(json_object_get(json_object_get(st, "backend"), "ok")),
		   "an SM that breaks after validation: ready false, backend.ok false, reason "
		   "\"%s\"",
		   st && reason(st, "sm") ? reason(st, "sm") : "(none)");
	json_decref(st);
	unlink(l->failfile);
	st = wait_ready(l, true, 8000);
	lab_result(st && json_is_true(json_object_get(st, "ready")) &&
			   json_array_size(json_object_get(st, "not_ready")) == 0,
		   "the SM is back: ready true, not_ready empty");
	json_decref(st);
}

static void store_fills_up(struct lab *l, const char *ibvfctl, const char *filler)
{
	struct ibvf_rpc_error re = {0};
	char out[8192];
	json_t *st, *w;
	int rc;
	long n;

	rc = lab_prepare(l, "s1", 0, NULL, NULL, &re);
	lab_result(rc == 0, "prepare before the disk is full (rc %d %s)", rc, re.message);
	n = fill(filler);
	lab_result(n > 0, "filled the state directory's tmpfs (%ld bytes)", n);
	rc = lab_prepare(l, "s2", 1, NULL, NULL, &re);
	lab_result(rc != 0, "prepare with the disk full fails (rc %d: %s)", rc, re.message);
	st = status(l);
	w = json_object_get(json_object_get(st, "store"), "last_write");
	lab_result(st && !json_is_true(json_object_get(st, "ready")) && reason(st, "store") &&
			   strstr(reason(st, "store"), "pool.db") &&
			   !json_is_true(json_object_get(w, "ok")),
		   "status: ready false, store reason \"%s\"",
		   st && reason(st, "store") ? reason(st, "store") : "(none)");
	json_decref(st);
	memset(&re, 0, sizeof(re));
	rc = lab_prepare(l, "s3", 2, NULL, NULL, &re);
	lab_result(rc != 0 && re.code == IBVF_RPC_NOT_READY && strstr(re.message, "store: "),
		   "the next prepare is refused as not ready (code %d: %s)", re.code, re.message);
	rc = ctl_status(l, ibvfctl, out, sizeof(out));
	lab_result(rc == 0 && strstr(out, "Not ready:") &&
			   strstr(out, "store: the last write to the GUID pool store failed"),
		   "ibvfctl daemon status shows the reason (rc %d)", rc);
	if (lab_n_fail)
		fprintf(stderr, "%s", out);

	unlink(filler);
	st = wait_ready(l, true, 8000);
	w = json_object_get(json_object_get(st, "store"), "last_write");
	lab_result(st && json_is_true(json_object_get(st, "ready")) &&
			   json_is_true(json_object_get(w, "ok")),
		   "space freed: ready again without an attach (the periodic probe write)");
	json_decref(st);
	memset(&re, 0, sizeof(re));
	rc = lab_prepare(l, "s3", 2, NULL, NULL, &re);
	lab_result(rc == 0, "prepare works again (rc %d %s)", rc, re.message);
	lab_result(lab_release(l, "s1") == 0 && lab_release(l, "s3") == 0, "releases");
	rc = ctl_status(l, ibvfctl, out, sizeof(out));
	lab_result(rc == 0 && strstr(out, "Not ready:") && !strstr(out, "store:"),
		   "ibvfctl daemon status: no reason left (rc %d)", rc);
}

int main(int argc, char **argv)
{
	char filler[160];
	bool tmpfs = false;
	struct lab l;
	int ret;

	if (argc < 4) {
		fprintf(stderr, "usage: test_ibvfd_status IBVFD SM_MODULE_DIR IBVFCTL\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	ibvf_log_init("test_ibvfd_status", IBVF_LOG_STDERR, LOG_ERR);
	ret = lab_init(&l, argv[1], 4, "file", argv[2], NULL);
	if (ret) {
		fprintf(stderr, "lab_init: %s\n", strerror(-ret));
		return 1;
	}
	/* a small file system of its own for the store, to fill up */
	if (mkdir(l.state, 0700) == 0 &&
	    mount("ibvf-status", l.state, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0700") == 0)
		tmpfs = true;
	else
		fprintf(stderr,
			"# SKIP store part: no tmpfs for the state directory (%s; needs "
			"root)\n",
			strerror(errno));
	snprintf(filler, sizeof(filler), "%s/filler", l.state);
	if (lab_start(&l, 20000) < 0) {
		lab_result(false, "ibvfd starts (see %s)", l.log);
	} else {
		json_t *st = status(&l);

		lab_result(st && json_is_true(json_object_get(st, "ready")) &&
				   json_is_array(json_object_get(st, "not_ready")),
			   "ready at start, with an empty not_ready");
		json_decref(st);
		sm_breaks(&l);
		if (tmpfs)
			store_fills_up(&l, argv[3], filler);
		lab_stop(&l, SIGTERM);
	}
	if (tmpfs && umount2(l.state, MNT_DETACH))
		fprintf(stderr, "umount %s: %s\n", l.state, strerror(errno));
	if (lab_n_fail) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "tail -n 40 '%s' >&2", l.log);
		if (system(cmd))
			fprintf(stderr, "no ibvfd log at %s\n", l.log);
	}
	lab_fini(&l);
	printf("1..%d\n%d passed, %d failed\n", lab_n_ok + lab_n_fail, lab_n_ok, lab_n_fail);
	return lab_n_fail ? 1 : 0;
}
