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
 * ibvf_write_file_atomic() - write @len bytes to @path via a temp file in the
 * same directory + fsync + rename(2) + fsync of the directory, mode @mode.
 */
int ibvf_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
			   char *err, size_t errlen);

#endif /* IBVF_STATEDIR_H */
