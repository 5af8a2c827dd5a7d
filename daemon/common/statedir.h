/* SPDX-License-Identifier: MIT */
/* State and run directories: created with explicit modes, permissions checked. */
#ifndef IBVF_STATEDIR_H
#define IBVF_STATEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/**
 * ibvf_dir_prepare() - make sure @path is a private directory.
 * @create: create it (and missing parents, 0755) with @mode when absent.
 * The directory must be owned by the effective uid and not writable by group
 * or others; otherwise it is refused (an attacker could swap files in it).
 * Return: 0, -ENOENT (absent and !@create), -EPERM (owner/mode), -ENOTDIR,
 * or the errno of mkdir/stat.
 */
int ibvf_dir_prepare(const char *path, mode_t mode, bool create, char *err, size_t errlen);

/**
 * ibvf_write_all() - write(2) all @len bytes of @data to @fd, retrying short
 * writes and EINTR. Return: 0 or the negative errno of write(2).
 */
int ibvf_write_all(int fd, const void *data, size_t len);

/** ibvf_file_replace() flag: fsync the file before and its directory after rename(2). */
#define IBVF_FILE_FSYNC 1u

/**
 * ibvf_file_replace() - the one atomic file write: @len bytes into
 * <@path>.tmp.<pid> (created O_NOFOLLOW, mode @mode), then rename(2) over
 * @path, so a reader sees the old or the new file, never a part. With
 * IBVF_FILE_FSYNC the data and the rename also survive a power loss (file
 * and directory fsync'ed); without it they survive a process crash only.
 * Return: 0, -ENAMETOOLONG, or the errno of open/write/fsync/rename (the temp
 * file is removed).
 */
int ibvf_file_replace(const char *path, const void *data, size_t len, mode_t mode,
		      unsigned int flags, char *err, size_t errlen);

/** ibvf_write_file_atomic() - ibvf_file_replace() with IBVF_FILE_FSYNC (durable). */
int ibvf_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, char *err,
			   size_t errlen);

/** The state directory's writer lock, <state_dir>/IBVF_STATE_LOCK_NAME. */
#define IBVF_STATE_LOCK_NAME "ibvfd.lock"

/**
 * ibvf_state_lock() - take the lock of the state directory's stores: an
 * flock(2) on <@state_dir>/ibvfd.lock. ibvfd holds it exclusively from before
 * it opens the GUID pool until it exits; ibvfctl takes it for its offline
 * path (ibvfd not running), exclusively to change a store, shared to read
 * one consistently. So an ibvfctl never writes while an ibvfd starts, and an
 * ibvfd that starts while ibvfctl works waits for it.
 * @exclusive: LOCK_EX, and the holder's pid is written into the file; else LOCK_SH.
 * @create: create the directory (0700, ibvf_dir_prepare()) and the lock file
 *	(0600) when absent; without it an absent directory or file is -ENOENT.
 * @wait_ms: how long to wait for a holder, ms (0: try once).
 * @fd: the lock, held until close(*@fd).
 * @holder: when the lock stays taken, the pid written by its exclusive
 *	holder (0 when unknown); may be NULL.
 * Return: 0, -EWOULDBLOCK (still held after @wait_ms; @err names the
 * holder), -ENOENT, -EPERM (directory owner/mode), or the errno of open/flock.
 */
int ibvf_state_lock(const char *state_dir, bool exclusive, bool create, int wait_ms, int *fd,
		    pid_t *holder, char *err, size_t errlen);

#endif /* IBVF_STATEDIR_H */
