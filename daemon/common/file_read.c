// SPDX-License-Identifier: MIT
/* Non-blocking reads of regular files named by config, env or argv (file_read.h). */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>

#include "err.h"

static const char *file_kind(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISDIR(m))
		return "a directory";
	return "unknown type";
}

int ibvf_file_open_regular(const char *path, unsigned flags, struct stat *st, char *err,
			   size_t errlen)
{
	struct stat s;
	int fd, ret;

	/*
	 * O_NONBLOCK: open(2) of a FIFO waits for a writer without it; the
	 * fstat(2) below then refuses anything that is not a regular file.
	 */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		ret = -errno;
		return ibvf_errf(err, errlen, ret, "%s: %s", path, strerror(-ret));
	}
	if (fstat(fd, &s)) {
		ret = -errno;
		close(fd);
		return ibvf_errf(err, errlen, ret, "%s: %s", path, strerror(-ret));
	}
	if (!S_ISREG(s.st_mode)) {
		close(fd);
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s is not a regular file (%s): refused, it could block ibvf",
				 path, file_kind(s.st_mode));
	}
	if ((flags & IBVF_FILE_SECRET) && (s.st_uid != geteuid() || (s.st_mode & 077))) {
		close(fd);
		return ibvf_errf(err, errlen, -EPERM,
				 "%s holds a secret but is mode %04o owned by uid %u: it must be "
				 "owned by uid %u and not accessible by group or others "
				 "(chown %u %s; chmod 0600 %s)",
				 path, (unsigned)(s.st_mode & 07777), (unsigned)s.st_uid,
				 (unsigned)geteuid(), (unsigned)geteuid(), path, path);
	}
	/* a regular file: plain blocking reads (O_NONBLOCK has no effect on it anyway) */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (st)
		*st = s;
	return fd;
}

int ibvf_file_open_netns(const char *path, char *err, size_t errlen)
{
	struct stat s;
	int fd, ret;

	/* O_NONBLOCK: a FIFO in the netns path would block open(2) without it */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		ret = -errno;
		return ibvf_errf(err, errlen, ret, "network namespace %s: %s", path,
				 strerror(-ret));
	}
	/* NS_GET_NSTYPE (linux/nsfs.h, 4.11+) answers only for nsfs files */
	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET) {
		bool ok = !fstat(fd, &s);

		close(fd);
		return ibvf_errf(err, errlen, -EINVAL, "%s is not a network namespace (%s)", path,
				 !ok		      ? "fstat failed"
				 : S_ISREG(s.st_mode) ? "a regular file or another namespace"
						      : file_kind(s.st_mode));
	}
	return fd;
}

int ibvf_file_open_append(const char *path, mode_t mode, char *err, size_t errlen)
{
	struct stat s;
	int fd, ret;

	/* O_NONBLOCK: open(2) of a FIFO for writing waits for a reader without it */
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, mode);
	if (fd < 0) {
		ret = -errno;
		return ibvf_errf(err, errlen, ret, "%s: %s", path, strerror(-ret));
	}
	if (fstat(fd, &s)) {
		ret = -errno;
		close(fd);
		return ibvf_errf(err, errlen, ret, "%s: %s", path, strerror(-ret));
	}
	if (!S_ISREG(s.st_mode)) {
		close(fd);
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s is not a regular file (%s): refused, it could block ibvf",
				 path, file_kind(s.st_mode));
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

void ibvf_file_wipe_free(char *buf, size_t len)
{
	if (buf) {
		explicit_bzero(buf, len);
		free(buf);
	}
}

int ibvf_file_read_regular(const char *path, size_t max_bytes, unsigned flags, char **buf,
			   size_t *len, struct stat *st, char *err, size_t errlen)
{
	bool secret = flags & IBVF_FILE_SECRET;
	size_t cap, got = 0;
	struct stat s;
	char *b;
	int fd, ret = 0;

	*buf = NULL;
	*len = 0;
	if (max_bytes >= SIZE_MAX - 2)
		max_bytes = SIZE_MAX - 3;
	fd = ibvf_file_open_regular(path, flags, &s, err, errlen);
	if (fd < 0)
		return fd;
	if (s.st_size > 0 && (uintmax_t)s.st_size > max_bytes) {
		close(fd);
		return ibvf_errf(err, errlen, -EFBIG, "%s is larger than %zu bytes", path,
				 max_bytes);
	}
	/*
	 * Room for one byte past the limit (to tell "exactly max" from
	 * "longer") and the NUL. A secret gets it all at once: a realloc
	 * would leave a copy behind in freed memory.
	 */
	cap = secret ? max_bytes + 2 : (size_t)s.st_size + 2;
	if (cap < 64 && max_bytes + 2 >= 64)
		cap = 64;
	b = malloc(cap);
	if (!b) {
		close(fd);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory reading %s", path);
	}
	for (;;) {
		ssize_t n;

		if (got == cap - 1) {
			size_t ncap = cap * 2 > max_bytes + 2 ? max_bytes + 2 : cap * 2;
			char *nb;

			if (secret || ncap <= cap)
				break; /* got == max_bytes + 1: too long */
			nb = realloc(b, ncap);
			if (!nb) {
				ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory reading %s",
						path);
				break;
			}
			b = nb;
			cap = ncap;
		}
		n = read(fd, b + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			ibvf_errf(err, errlen, ret, "reading %s: %s", path, strerror(-ret));
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (!ret && got > max_bytes)
		ret = ibvf_errf(err, errlen, -EFBIG, "%s is larger than %zu bytes", path,
				max_bytes);
	if (ret) {
		ibvf_file_wipe_free(b, secret ? cap : got);
		return ret;
	}
	b[got] = '\0';
	*buf = b;
	*len = got;
	if (st)
		*st = s;
	return 0;
}
