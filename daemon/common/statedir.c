// SPDX-License-Identifier: MIT
#include "statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int ibvf_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
			   char *err, size_t errlen)
{
	return ibvf_file_replace(path, data, len, mode, IBVF_FILE_FSYNC, err, errlen);
}
