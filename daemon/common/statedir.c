// SPDX-License-Identifier: MIT
#include "statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

static int mkdir_parents(const char *path)
{
	char buf[PATH_MAX];
	char *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

int ibvf_dir_prepare(const char *path, mode_t mode, bool create, char *err, size_t errlen)
{
	struct stat st;
	int ret;

	if (stat(path, &st)) {
		if (errno != ENOENT || !create)
			return ibvf_errf(err, errlen, -errno, "state directory %s: %s", path,
					 strerror(errno));
		ret = mkdir_parents(path);
		if (ret)
			return ibvf_errf(err, errlen, ret, "creating parents of %s: %s", path,
					 strerror(-ret));
		if (mkdir(path, mode) && errno != EEXIST)
			return ibvf_errf(err, errlen, -errno, "creating %s: %s", path,
					 strerror(errno));
		/* mkdir applies the umask: set the mode we asked for */
		if (chmod(path, mode))
			return ibvf_errf(err, errlen, -errno, "chmod %s: %s", path,
					 strerror(errno));
		if (stat(path, &st))
			return ibvf_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		return ibvf_errf(err, errlen, -ENOTDIR, "%s is not a directory", path);
	if (st.st_uid != geteuid())
		return ibvf_errf(err, errlen, -EPERM,
				 "%s is owned by uid %u, not by uid %u running ibvf; refusing it",
				 path, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return ibvf_errf(err, errlen, -EPERM,
				 "%s has mode %04o: group/other may write it; run chmod 0700 %s",
				 path, (unsigned)(st.st_mode & 07777), path);
	return 0;
}

int ibvf_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void fsync_dir_of(const char *path)
{
	char dir[PATH_MAX];
	int dfd;

	snprintf(dir, sizeof(dir), "%s", path);
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
}

int ibvf_file_replace(const char *path, const void *data, size_t len, mode_t mode,
		      unsigned int flags, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	int fd, ret;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "creating %s: %s", tmp, strerror(errno));
	ret = ibvf_write_all(fd, data, len);
	if (!ret && fchmod(fd, mode))
		ret = -errno;
	if (!ret && (flags & IBVF_FILE_FSYNC) && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		return ibvf_errf(err, errlen, ret, "writing %s: %s", path, strerror(-ret));
	}
	if (flags & IBVF_FILE_FSYNC)
		fsync_dir_of(path);
	return 0;
}

int ibvf_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, char *err,
			   size_t errlen)
{
	return ibvf_file_replace(path, data, len, mode, IBVF_FILE_FSYNC, err, errlen);
}

/* The pid an exclusive holder wrote into the lock file, 0 when unknown. */
static pid_t lock_holder(int fd)
{
	char buf[24] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long v;

	if (n <= 0)
		return 0;
	buf[n] = 0;
	v = strtol(buf, NULL, 10);
	return v > 0 ? (pid_t)v : 0;
}

static void lock_write_pid(int fd)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());

	if (ftruncate(fd, 0) || pwrite(fd, buf, (size_t)n, 0) != n)
		return; /* the pid is only for messages */
}

int ibvf_state_lock(const char *state_dir, bool exclusive, bool create, int wait_ms, int *fd,
		    pid_t *holder, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int ret, lfd, waited = 0;
	pid_t pid;

	*fd = -1;
	if (holder)
		*holder = 0;
	ret = ibvf_dir_prepare(state_dir, 0700, create, err, errlen);
	if (ret)
		return ret;
	if (snprintf(path, sizeof(path), "%s/%s", state_dir, IBVF_STATE_LOCK_NAME) >=
	    (int)sizeof(path))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", state_dir);
	lfd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | (create ? O_CREAT : 0), 0600);
	if (lfd < 0)
		return ibvf_errf(err, errlen, -errno, "lock file %s: %s", path, strerror(errno));
	while (flock(lfd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB)) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK || waited >= wait_ms) {
			ret = -errno;
			pid = ret == -EWOULDBLOCK ? lock_holder(lfd) : 0;
			close(lfd);
			if (holder)
				*holder = pid;
			if (ret != -EWOULDBLOCK)
				return ibvf_errf(err, errlen, ret, "locking %s: %s", path,
						 strerror(-ret));
			if (pid)
				return ibvf_errf(err, errlen, ret, "%s is locked by pid %d", path,
						 (int)pid);
			return ibvf_errf(err, errlen, ret, "%s is locked by another process", path);
		}
		usleep(20000);
		waited += 20;
	}
	if (exclusive)
		lock_write_pid(lfd);
	*fd = lfd;
	return 0;
}
