/* SPDX-License-Identifier: MIT */
/*
 * Reading a file named by the config, the environment or the command line,
 * without ever blocking on it: every such read in ibvf goes through
 * ibvf_file_read_regular() (issue 14, "a daemon that stops answering": a
 * FIFO put in the place of ibvfd.json hung the daemon for good on SIGHUP).
 */
#ifndef IBVF_FILE_READ_H
#define IBVF_FILE_READ_H

#include <stddef.h>
#include <sys/stat.h>

/*
 * The file holds a secret (a password, a token, a private key): it must be
 * owned by the effective uid and carry no group or other permission bits;
 * the buffer is allocated once (never realloc'd, so no stray copy is left in
 * the heap) and wiped on every error path. Free it with ibvf_file_wipe_free().
 */
#define IBVF_FILE_SECRET 0x1u

/**
 * ibvf_file_open_regular() - open @path for reading without blocking and
 * check that it is a regular file: O_RDONLY | O_NONBLOCK | O_CLOEXEC |
 * O_NOCTTY, then fstat(2). A FIFO, socket, device or directory is refused at
 * once, never waited on. With IBVF_FILE_SECRET the owner and mode rule above
 * is checked too. *@st (if not NULL) receives the fstat(2) result. The
 * message in @err names @path (and, for a secret, its mode and owner).
 * Return: the file descriptor (blocking mode restored; close it), or -ENOENT
 * and open(2)'s other errnos, -EINVAL (not a regular file), -EPERM (a secret
 * file readable by others or owned by another user).
 */
int ibvf_file_open_regular(const char *path, unsigned flags, struct stat *st, char *err,
			   size_t errlen);

/**
 * ibvf_file_read_regular() - read the whole of @path (checked as by
 * ibvf_file_open_regular()) into a new buffer *@buf of *@len bytes plus a
 * terminating NUL (the content may hold NULs itself: use *@len). At most
 * @max_bytes are accepted: a longer file is an error, never truncated.
 * Files of /proc and /sys (st_size 0) are read to their end too.
 * @st may be NULL. On error *@buf is NULL.
 * Return: 0, an ibvf_file_open_regular() error, -EFBIG (longer than
 * @max_bytes), -ENOMEM, or read(2)'s errno.
 */
int ibvf_file_read_regular(const char *path, size_t max_bytes, unsigned flags, char **buf,
			   size_t *len, struct stat *st, char *err, size_t errlen);

/**
 * ibvf_file_open_netns() - open the network namespace file @path (a
 * /proc/PID/ns/net link or a bind mount such as /var/run/netns/NAME) for
 * setns(2), without blocking: O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
 * then ioctl(NS_GET_NSTYPE) must say CLONE_NEWNET. A FIFO, a regular file, a
 * device or another kind of namespace is refused at once (issue 14: no file
 * ibvf opens may block it). The message in @err names @path.
 * Return: the file descriptor (close it), or open(2)'s negative errno,
 * -EINVAL (not a network namespace).
 */
int ibvf_file_open_netns(const char *path, char *err, size_t errlen);

/**
 * ibvf_file_open_append() - open (create with @mode) the log file @path for
 * appending without blocking: O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK |
 * O_CLOEXEC | O_NOCTTY, then fstat(2) must show a regular file (a FIFO or a
 * device is refused, never waited on); blocking mode is restored.
 * Return: the file descriptor, or open(2)'s negative errno (a FIFO without a
 * reader is -ENXIO), -EINVAL (not a regular file).
 */
int ibvf_file_open_append(const char *path, mode_t mode, char *err, size_t errlen);

/** ibvf_file_wipe_free() - explicit_bzero() @len bytes of @buf, then free() it; NULL is a no-op. */
void ibvf_file_wipe_free(char *buf, size_t len);

#endif /* IBVF_FILE_READ_H */
