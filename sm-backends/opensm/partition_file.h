/* SPDX-License-Identifier: MIT */
/*
 * Reading and safely replacing OpenSM's partition file.
 *
 * OpenSM re-reads the file on every heavy sweep, at any moment: it must
 * never see a partly written file, nor a moment without a file (a missing
 * file also makes it fall back to Default=0x7fff : ALL=full). So the new
 * file is written to a temp file in the same directory, fsync'd and renamed
 * over the old one (rename(2) is atomic), and the directory is fsync'd.
 */
#ifndef IBVF_PARTITION_FILE_H
#define IBVF_PARTITION_FILE_H

#include <stddef.h>
#include <sys/stat.h>

/* Largest partition file read (bytes); far above 100,000 members. */
#define PF_MAX_SIZE (64u << 20)

/**
 * pf_read() - read the whole file at @path.
 * @text: malloc'd, NUL-terminated, @len bytes (the NUL not counted).
 * @st:   the file's stat (mode and owner are kept by pf_install()).
 * Return: 0; -ENOENT (the message says ibvf never creates the file),
 * -EFBIG (over PF_MAX_SIZE), -EINVAL (not a regular file: a FIFO is refused
 * at once, never waited on), or the errno of open/read.
 */
int pf_read(const char *path, char **text, size_t *len, struct stat *st, char *err, size_t errlen);

/**
 * pf_lock() - take an exclusive flock(2) on @lock_path (created 0600 if
 * absent), waiting at most @timeout_ms. Serialises ibvf writers (ibvfd,
 * ibvfctl); OpenSM and editors do not take it (see pf_install()).
 * @fd: the lock; release with pf_unlock().
 * Return: 0, -EBUSY (still held after @timeout_ms), or open's errno.
 */
int pf_lock(const char *lock_path, unsigned timeout_ms, int *fd, char *err, size_t errlen);

/** pf_unlock() - release and close a pf_lock() (fd < 0 is a no-op). */
void pf_unlock(int fd);

/**
 * pf_resolve() - the file that replacing @path must replace: @path with its
 * chain of symbolic links followed (relative targets from the link's
 * directory; the last target need not exist). Not a link: @path itself.
 * @out: @outlen bytes.
 * Return: 0, -ELOOP (over 40 links), -ENAMETOOLONG, or readlink's errno.
 */
int pf_resolve(const char *path, char *out, size_t outlen, char *err, size_t errlen);

/**
 * pf_install() - replace @path, whose content was @old (@old_len bytes, stat
 * @old_st), with @new_len bytes of @new.
 * @backup: when not NULL, first write @old there (atomically) as the backup.
 *
 * The new file gets @old_st's mode and, when running as root, its owner.
 * Just before the rename the file is read again: if it no longer holds
 * @old (an administrator saved it meanwhile), nothing is replaced.
 * Call with the pf_lock() held: temp files that writers killed during an
 * install left behind (".<name>.ibvf-XXXXXX", "<backup>.tmp.PID") are
 * removed first.
 *
 * A symbolic link at @path or @backup is kept: its target (pf_resolve()) is
 * replaced, with the temp file in the target's directory.
 *
 * Return: 0; -EAGAIN (the file changed underneath), or the errno of the
 * failing step (the message names the file). On error @path is unchanged.
 */
int pf_install(const char *path, const char *backup, const char *old, size_t old_len,
	       const struct stat *old_st, const char *new, size_t new_len, char *err,
	       size_t errlen);

/**
 * pf_check_writable() - could pf_install() replace @path now, and pf_lock()
 * open @lock_path? Checks what each write needs, without writing: the
 * directory of @path (temp file + rename; a read-only mount is -EROFS) and
 * of @backup (when not NULL) allow writing, @path is not immutable or
 * append-only (chattr +i/+a), @lock_path can be opened for writing (or
 * created), and the file system of @path has a free block and inode.
 * For validate(): an SM whose every write would fail is not "ok".
 * Return: 0, or -EROFS/-EACCES/-EPERM/-ENOSPC with a message naming the file.
 */
int pf_check_writable(const char *path, const char *backup, const char *lock_path, char *err,
		      size_t errlen);

#endif /* IBVF_PARTITION_FILE_H */
