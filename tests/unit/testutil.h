/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the cmocka unit tests: private temp directories, file
 * read/write, running a built binary with captured output, and string
 * assertions that print what they compared. Header-only (static functions)
 * so each test executable stays one translation unit plus the core library.
 */
#ifndef IBVF_TESTUTIL_H
#define IBVF_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

/* Fail with both strings shown when @needle is not inside @hay. */
#define assert_contains(hay, needle)	 tu_assert_contains((hay), (needle), __FILE__, __LINE__)
#define assert_not_contains(hay, needle) tu_assert_not_contains((hay), (needle), __FILE__, __LINE__)

static inline void tu_assert_contains(const char *hay, const char *needle, const char *file,
				      int line)
{
	if (!hay || !needle || !strstr(hay, needle)) {
		print_error("%s:%d: expected \"%s\" in \"%s\"\n", file, line,
			    needle ? needle : "(null)", hay ? hay : "(null)");
		_fail(file, line);
	}
}

static inline void tu_assert_not_contains(const char *hay, const char *needle, const char *file,
					  int line)
{
	if (hay && needle && strstr(hay, needle)) {
		print_error("%s:%d: did not expect \"%s\" in \"%s\"\n", file, line, needle, hay);
		_fail(file, line);
	}
}

static inline int tu_rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* A new private directory under $TMPDIR (or /tmp); the caller frees it. */
static inline char *tu_mkdtemp(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (asprintf(&path, "%s/ibvf-%s-XXXXXX", base && *base ? base : "/tmp", tag) < 0)
		return NULL;
	if (!mkdtemp(path)) {
		free(path);
		return NULL;
	}
	return path;
}

/* Remove a tree created by a test (never follows symlinks) and free @path. */
static inline void tu_rmrf(char *path)
{
	if (!path)
		return;
	nftw(path, tu_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(path);
}

static inline char *tu_path(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

static inline int tu_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	size_t n;

	if (!f)
		return -errno;
	n = fwrite(data, 1, len, f);
	if (fclose(f) || n != len)
		return -EIO;
	return 0;
}

static inline int tu_write_str(const char *path, const char *s)
{
	return tu_write_file(path, s, strlen(s));
}

/* Whole file into a malloc'd NUL-terminated buffer; *len gets its size. */
static inline char *tu_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		size_t r;

		if (n + 4097 > cap) {
			char *nb = realloc(buf, cap = cap * 2 + 8192);

			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		r = fread(buf + n, 1, 4096, f);
		n += r;
		if (r < 4096)
			break;
	}
	fclose(f);
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

/* Output and status of a program run by tu_run(). */
struct tu_result {
	int status; /* exit code, or 128 + signal */
	char *out;  /* stdout, NUL-terminated */
	char *err;  /* stderr, NUL-terminated */
};

static inline void tu_result_free(struct tu_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

static inline void tu_append(char **buf, size_t *len, const char *data, size_t n)
{
	char *nb = realloc(*buf, *len + n + 1);

	if (!nb)
		abort();
	memcpy(nb + *len, data, n);
	*len += n;
	nb[*len] = 0;
	*buf = nb;
}

/*
 * tu_strv() - a NULL-terminated list of strings the callee only reads, as the
 * char *const * that environ-style interfaces (execve, ibvf_config_load,
 * cni_env_load) take. With -Wwrite-strings literals are const; POSIX's exec
 * rationale says the lists are char *const [] only for compatibility and are
 * never modified.
 */
static inline char *const *tu_strv(const char *const *v)
{
	return (char *const *)v;
}

/*
 * Run @argv (argv[0] is a path) with extra environment @env (NULL-terminated
 * "NAME=value" list added to a clean environment holding only PATH and the
 * sanitizer options), collect
 * stdout and stderr. The child is killed after @timeout_s seconds.
 */
static inline int tu_run(struct tu_result *r, const char *const *env, int timeout_s,
			 const char *const *argv)
{
	int po[2], pe[2];
	pid_t pid;
	size_t lo = 0, le = 0;
	time_t deadline = time(NULL) + timeout_s;
	struct pollfd pf[2];
	int st, open_fds = 2;

	memset(r, 0, sizeof(*r));
	tu_append(&r->out, &lo, "", 0);
	tu_append(&r->err, &le, "", 0);
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		static const char *const keep[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
						   "MALLOC_PERTURB_", NULL};
		const char *envp[64];
		int n = 0;

		envp[n++] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
		/* sanitizer settings from meson test apply to the child too */
		for (const char *const *k = keep; *k; k++) {
			const char *v = getenv(*k);
			char *kv;

			if (v && asprintf(&kv, "%s=%s", *k, v) > 0)
				envp[n++] = kv;
		}
		for (; env && *env && n < 62; env++)
			envp[n++] = *env;
		envp[n] = NULL;
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execve(argv[0], tu_strv(argv), tu_strv(envp));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	pf[0] = (struct pollfd){.fd = po[0], .events = POLLIN};
	pf[1] = (struct pollfd){.fd = pe[0], .events = POLLIN};
	while (open_fds > 0) {
		int left = (int)(deadline - time(NULL));

		if (left <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		if (poll(pf, 2, left * 1000) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			char buf[4096];
			ssize_t n;

			if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(pf[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
				open_fds--;
				continue;
			}
			if (i == 0)
				tu_append(&r->out, &lo, buf, (size_t)n);
			else
				tu_append(&r->err, &le, buf, (size_t)n);
		}
	}
	for (int i = 0; i < 2; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

/* Path of a built binary from the environment (set by meson), or NULL. */
static inline const char *tu_binary(const char *env_name)
{
	const char *p = getenv(env_name);

	return p && *p && access(p, X_OK) == 0 ? p : NULL;
}

#endif /* IBVF_TESTUTIL_H */
