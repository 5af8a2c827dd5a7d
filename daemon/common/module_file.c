// SPDX-License-Identifier: MIT
/* Plug-in module files: name rule, file checks, dlopen (module_file.h). */
#include "module_file.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

int ibvf_module_name_check(const char *kind, const char *name, const char *examples, char *err,
			   size_t errlen)
{
	size_t n = name ? strlen(name) : 0;

	if (!n || n > 64 ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != n)
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s name '%.64s': expected letters, digits, '_' or '-' (e.g. %s)",
				 kind, name ? name : "", examples);
	return 0;
}

int ibvf_module_file_check(const char *kind, const char *path, const char *dir_key, const char *dir,
			   char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st)) {
		if (errno == ENOENT)
			return ibvf_errf(err, errlen, -ENOENT, "%s module %s not found (%s is %s)",
					 kind, path, dir_key, dir);
		return ibvf_errf(err, errlen, -errno, "%s module %s: %s", kind, path,
				 strerror(errno));
	}
	if (!S_ISREG(st.st_mode))
		return ibvf_errf(err, errlen, -EPERM, "%s module %s is not a regular file", kind,
				 path);
	if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022))
		return ibvf_errf(err, errlen, -EPERM,
				 "%s module %s must be owned by root (or uid %u) and not writable "
				 "by group or others (owner %u, mode %04o)",
				 kind, path, (unsigned)geteuid(), (unsigned)st.st_uid,
				 (unsigned)(st.st_mode & 07777));
	return 0;
}

int ibvf_module_open(const char *kind, const char *path, const char *dir_key, const char *dir,
		     const char *symbol, void **handle, void **sym, char *err, size_t errlen)
{
	int ret;

	*handle = NULL;
	*sym = NULL;
	ret = ibvf_module_file_check(kind, path, dir_key, dir, err, errlen);
	if (ret)
		return ret;
	dlerror();
	*handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!*handle)
		return ibvf_errf(err, errlen, -ENOEXEC, "%s module %s: dlopen: %s", kind, path,
				 dlerror());
	*sym = dlsym(*handle, symbol);
	if (!*sym) {
		ret = ibvf_errf(err, errlen, -ENOEXEC,
				"%s module %s has no symbol %s (not an ibvf %s module, or built "
				"for another ABI): %s",
				kind, path, symbol, kind, dlerror());
		dlclose(*handle);
		*handle = NULL;
	}
	return ret;
}
