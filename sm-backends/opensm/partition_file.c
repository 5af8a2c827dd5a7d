// SPDX-License-Identifier: MIT
/* Reading and atomically replacing OpenSM's partition file (partition_file.h). */
#include "partition_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "file_read.h"
#include "statedir.h"

int pf_read(const char *path, char **text, size_t *len, struct stat *st, char *err, size_t errlen)
{
	int ret;

	/* never blocks: a FIFO put in the file's place is refused at once */
	ret = ibvf_file_read_regular(path, PF_MAX_SIZE, 0, text, len, st, err, errlen);
	if (ret == -ENOENT)
		return ibvf_errf(err, errlen, -ENOENT,
				 "%s does not exist; ibvf never creates "
				 "OpenSM's partition file (an absent file means Default=0x7fff "
				 ": ALL=full to OpenSM): create it with at least the Default "
				 "partition",
				 path);
	return ret;
}

int pf_lock(const char *lock_path, unsigned timeout_ms, int *fd, char *err, size_t errlen)
{
	int64_t end = ibvf_mono_ms() + timeout_ms;
	int l = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	*fd = -1;
	if (l < 0)
		return ibvf_errf(err, errlen, -errno, "lock file %s: %s", lock_path,
				 strerror(errno));
	while (flock(l, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int ret = -errno;

			close(l);
			return ibvf_errf(err, errlen, ret, "locking %s: %s", lock_path,
					 strerror(-ret));
		}
		if (ibvf_mono_ms() >= end) {
			close(l);
			return ibvf_errf(err, errlen, -EBUSY,
					 "%s is held by another ibvf process "
					 "for more than %u ms",
					 lock_path, timeout_ms);
		}
		usleep(10000);
	}
	*fd = l;
	return 0;
}

void pf_unlock(int fd)
{
	if (fd >= 0) {
		flock(fd, LOCK_UN);
		close(fd);
	}
}

/* Does @path still hold exactly @old? */
static bool unchanged(const char *path, const char *old, size_t old_len)
{
	struct stat st;
	size_t len;
	char *now;
	bool same;

	if (pf_read(path, &now, &len, &st, NULL, 0))
		return false;
	same = len == old_len && !memcmp(now, old, len);
	free(now);
	return same;
}

static int write_temp(const char *tmp_tmpl, char *tmp, size_t tmplen, const struct stat *st,
		      const char *data, size_t len)
{
	int fd, ret = 0;

	snprintf(tmp, tmplen, "%s", tmp_tmpl);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = ibvf_write_all(fd, data, len);
	if (!ret && fchmod(fd, st->st_mode & 07777))
		ret = -errno;
	if (!ret && geteuid() == 0 && fchown(fd, st->st_uid, st->st_gid))
		ret = -errno;
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* In @dir, remove regular files named @prefix + @tail_len characters (+ digits only if @digits). */
static void remove_matching(const char *dir, const char *prefix, size_t tail_len, bool digits)
{
	size_t plen = strlen(prefix);
	struct dirent *de;
	DIR *d = opendir(dir);
	int dfd;

	if (!d)
		return;
	dfd = dirfd(d);
	while ((de = readdir(d))) {
		const char *t = de->d_name + plen;
		struct stat st;

		if (strncmp(de->d_name, prefix, plen) || !*t ||
		    (tail_len && strlen(t) != tail_len) ||
		    (digits && strspn(t, "0123456789") != strlen(t)))
			continue;
		if (!fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid())
			unlinkat(dfd, de->d_name, 0);
	}
	closedir(d);
}

/*
 * Temp files of an ibvf writer killed during pf_install() (SIGKILL, OOM,
 * power loss): ".<base>.ibvf-XXXXXX" next to @path and "<backup>.tmp.PID"
 * (ibvf_write_file_atomic()). Under the writers' lock none is in use.
 */
static void remove_stale_temps(const char *dir, const char *base, const char *backup)
{
	char prefix[NAME_MAX + 16], bdir[PATH_MAX], bbase[PATH_MAX];

	snprintf(prefix, sizeof(prefix), ".%s.ibvf-", base);
	remove_matching(dir, prefix, 6, false);
	if (!backup)
		return;
	snprintf(bdir, sizeof(bdir), "%s", backup);
	snprintf(bbase, sizeof(bbase), "%s", backup);
	snprintf(prefix, sizeof(prefix), "%s.tmp.", basename(bbase));
	remove_matching(dirname(bdir), prefix, 0, true);
}

/*
 * pf_resolve(): the file a write to @path must replace. An administrator may
 * keep partitions.conf as a symbolic link into a config-managed directory:
 * renaming a temp file over the link would replace the link by a regular
 * file, and OpenSM would go on reading a copy the administrator no longer
 * edits. So the link chain is followed to its last element (which need not
 * exist yet: a backup link may dangle before the first write). A relative
 * link target is relative to the link's directory (symlink(7)).
 */
int pf_resolve(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	char cur[PATH_MAX], target[PATH_MAX], dir[PATH_MAX];
	int hops;

	if (snprintf(cur, sizeof(cur), "%s", path) >= (int)sizeof(cur))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", path);
	for (hops = 0; hops < 40; hops++) {
		struct stat st;
		ssize_t n;

		if (lstat(cur, &st) || !S_ISLNK(st.st_mode))
			break; /* absent or not a link: write here */
		n = readlink(cur, target, sizeof(target) - 1);
		if (n < 0)
			return ibvf_errf(err, errlen, -errno, "reading the link %s: %s", cur,
					 strerror(errno));
		if ((size_t)n >= sizeof(target) - 1)
			return ibvf_errf(err, errlen, -ENAMETOOLONG, "link %s: target too long",
					 cur);
		target[n] = '\0';
		if (target[0] == '/') {
			snprintf(cur, sizeof(cur), "%s", target);
		} else {
			snprintf(dir, sizeof(dir), "%s", cur);
			if (snprintf(cur, sizeof(cur), "%s/%s", dirname(dir), target) >=
			    (int)sizeof(cur))
				return ibvf_errf(err, errlen, -ENAMETOOLONG,
						 "link %s: target too long", path);
		}
	}
	if (hops == 40)
		return ibvf_errf(err, errlen, -ELOOP, "%s: too many levels of symbolic links",
				 path);
	if (snprintf(out, outlen, "%s", cur) >= (int)outlen)
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", path);
	return 0;
}

int pf_install(const char *path, const char *backup, const char *old, size_t old_len,
	       const struct stat *old_st, const char *new, size_t new_len, char *err, size_t errlen)
{
	char dbuf[PATH_MAX], base[PATH_MAX], tmpl[PATH_MAX], tmp[PATH_MAX];
	char real[PATH_MAX], rbackup[PATH_MAX];
	const char *dir;
	int ret, dfd;

	/* through symbolic links: the links stay, their targets are replaced */
	ret = pf_resolve(path, real, sizeof(real), err, errlen);
	if (!ret && backup)
		ret = pf_resolve(backup, rbackup, sizeof(rbackup), err, errlen);
	if (ret)
		return ret;
	path = real;
	if (backup)
		backup = rbackup;
	snprintf(dbuf, sizeof(dbuf), "%s", path);
	snprintf(base, sizeof(base), "%s", path);
	dir = dirname(dbuf);
	if (snprintf(tmpl, sizeof(tmpl), "%s/.%s.ibvf-XXXXXX", dir, basename(base)) >=
	    (int)sizeof(tmpl))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", path);
	remove_stale_temps(dir, basename(base), backup);
	if (backup) {
		ret = ibvf_write_file_atomic(backup, old, old_len, old_st->st_mode & 0777, err,
					     errlen);
		if (ret)
			return ibvf_err_prefix(err, errlen, ret, "backup of %s", path);
	}
	ret = write_temp(tmpl, tmp, sizeof(tmp), old_st, new, new_len);
	if (ret)
		return ibvf_errf(err, errlen, ret, "writing a temp file next to %s: %s", path,
				 strerror(-ret));
	if (!unchanged(path, old, old_len)) {
		unlink(tmp);
		return ibvf_errf(err, errlen, -EAGAIN,
				 "%s changed while ibvf was updating it; "
				 "nothing was replaced (retry)",
				 path);
	}
	if (rename(tmp, path)) {
		ret = -errno;
		unlink(tmp);
		return ibvf_errf(err, errlen, ret, "renaming %s to %s: %s", tmp, path,
				 strerror(-ret));
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* Can files be created in (and renamed within) the directory of @path? */
static int dir_writable(const char *path, const char *what, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	const char *dir;

	snprintf(buf, sizeof(buf), "%s", path);
	dir = dirname(buf);
	if (access(dir, W_OK | X_OK))
		return ibvf_errf(err, errlen, -errno,
				 "%s cannot be replaced: its directory %s is not writable (%s)",
				 what, dir, strerror(errno));
	return 0;
}

int pf_check_writable(const char *path, const char *backup, const char *lock_path, char *err,
		      size_t errlen)
{
	char real[PATH_MAX], rbackup[PATH_MAX];
	struct statvfs vfs;
	int fd, flags = 0, ret;

	/* pf_install() writes in the directories of the links' targets */
	ret = pf_resolve(path, real, sizeof(real), err, errlen);
	if (!ret && backup)
		ret = pf_resolve(backup, rbackup, sizeof(rbackup), err, errlen);
	if (ret)
		return ret;
	path = real;
	if (backup)
		backup = rbackup;
	ret = dir_writable(path, path, err, errlen);
	if (!ret && backup)
		ret = dir_writable(backup, backup, err, errlen);
	if (ret)
		return ret;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd >= 0) {
		/* unsupported (ENOTTY, EOPNOTSUPP): no such attributes there */
		if (!ioctl(fd, FS_IOC_GETFLAGS, &flags) &&
		    (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)))
			ret = ibvf_errf(err, errlen, -EPERM,
					"%s cannot be replaced: it is %s (lsattr shows '%c')", path,
					flags & FS_IMMUTABLE_FL ? "immutable" : "append-only",
					flags & FS_IMMUTABLE_FL ? 'i' : 'a');
		if (!ret && !fstatvfs(fd, &vfs) &&
		    ((vfs.f_bavail == 0 && (geteuid() != 0 || vfs.f_bfree == 0)) ||
		     (vfs.f_files > 0 && vfs.f_favail == 0)))
			ret = ibvf_errf(err, errlen, -ENOSPC,
					"%s cannot be replaced: its file system is full", path);
		close(fd);
		if (ret)
			return ret;
	}
	if (access(lock_path, F_OK) == 0) {
		if (access(lock_path, W_OK))
			return ibvf_errf(err, errlen, -errno, "lock file %s is not writable (%s)",
					 lock_path, strerror(errno));
		return 0;
	}
	return dir_writable(lock_path, lock_path, err, errlen);
}
