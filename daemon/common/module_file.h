/* SPDX-License-Identifier: MIT */
/*
 * Loading a plug-in module (an SM backend, a lab VF driver): the name rule,
 * the file checks and dlopen()/dlsym(), in one place, so that every kind of
 * module is refused for the same reasons with the same words.
 */
#ifndef IBVF_MODULE_FILE_H
#define IBVF_MODULE_FILE_H

#include <stddef.h>

/**
 * ibvf_module_name_check() - a module name becomes part of a file name, so
 * it must be 1..64 of letters, digits, '_' and '-'. @kind names the module's
 * kind in the message ("SM backend", "VF driver"); @examples is shown after
 * "e.g." when the name is refused.
 * Return: 0 or -EINVAL.
 */
int ibvf_module_name_check(const char *kind, const char *name, const char *examples, char *err,
			   size_t errlen);

/**
 * ibvf_module_file_check() - @path may be loaded: a regular file owned by
 * root or the effective user and not writable by group or others (ibvfd runs
 * as root, so a module anyone can replace would be anyone's code). @kind and
 * @dir_key/@dir as for ibvf_module_open().
 * Return: 0, -ENOENT, -EPERM, or stat(2)'s errno.
 */
int ibvf_module_file_check(const char *kind, const char *path, const char *dir_key, const char *dir,
			   char *err, size_t errlen);

/**
 * ibvf_module_open() - check and dlopen(RTLD_NOW | RTLD_LOCAL) @path, then
 * dlsym(@symbol). The file must be a regular file owned by root or the
 * effective user and not writable by group or others: ibvfd runs as root, so
 * a module anyone can replace would be anyone's code. @dir_key names the
 * config key of the directory in the "not found" message ("sm.module_dir").
 * On success *@handle is the dlopen() handle (dlclose() it) and *@sym the
 * symbol's address.
 * Return: 0; -ENOENT (no such file), -EPERM (owner or mode, not a regular
 * file), -ENOEXEC (dlopen failed, or no such symbol: dlerror() is quoted).
 */
int ibvf_module_open(const char *kind, const char *path, const char *dir_key, const char *dir,
		     const char *symbol, void **handle, void **sym, char *err, size_t errlen);

#endif /* IBVF_MODULE_FILE_H */
