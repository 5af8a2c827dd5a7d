/* SPDX-License-Identifier: MIT */
/*
 * Loading SM backend modules (include/ibvf/sm_backend.h): dlopen() of
 * <module_dir>/<name>.so, the one entry symbol, and the ABI checks, so that
 * a wrong or broken module is a clear error at start-up, never a crash
 * later.
 */
#ifndef IBVF_SM_LOADER_H
#define IBVF_SM_LOADER_H

#include <stddef.h>

#include <ibvf/sm_backend.h>

/** A loaded module. */
struct ibvf_sm_module {
	void *handle;		       /* dlopen() handle */
	const struct ibvf_sm_ops *ops; /* the module's table, checked */
	char path[4096];	       /* the file loaded */
};

/** A backend instance: its module and its state. */
struct ibvf_sm {
	struct ibvf_sm_module *mod;
	struct ibvf_sm_backend *b;
};

/**
 * ibvf_sm_module_load() - load backend @name ("opensm", "ufm", "noop": letters,
 * digits, '_' and '-' only) from @module_dir/@name.so.
 *
 * The file must be a regular file owned by root or the effective user and
 * not writable by group or others (ibvfd runs as root: a module anyone can
 * replace would be anyone's code). Then: dlopen(RTLD_NOW | RTLD_LOCAL),
 * dlsym(IBVF_SM_ENTRY_SYMBOL) (a module exporting the entry point of another
 * ABI version instead, e.g. ibvf_sm_backend_v1, is refused without calling
 * it), call it, and check the table: abi_version
 * equal to IBVF_SM_ABI_VERSION, struct_size at least
 * IBVF_SM_OPS_V2_BASE_SIZE (a module built before an optional entry was
 * added loads; IBVF_SM_OPS_HAS() guards each optional entry), name equal
 * to @name, no NULL mandatory operation.
 *
 * Return: 0; -EINVAL (bad name), -ENOENT (no such module: the message lists
 * the directory), -EPERM (owner or mode), -ENOEXEC (dlopen failed, or no
 * entry point of any ABI version: dlerror() is quoted), -EPROTO (another
 * ABI version: the message names both versions; size mismatch, bad table).
 * Messages name the file and the symbol.
 */
int ibvf_sm_module_load(const char *module_dir, const char *name, struct ibvf_sm_module **out,
			char *err, size_t errlen);

/** ibvf_sm_module_unload() - dlclose and free; NULL is a no-op. */
void ibvf_sm_module_unload(struct ibvf_sm_module *m);

/**
 * ibvf_sm_open() - load @name and init() an instance with @json_config (the
 * text of the backend's config object; NULL = "{}").
 * Return: as ibvf_sm_module_load(), or init()'s error prefixed with the
 * backend's name.
 */
int ibvf_sm_open(const char *module_dir, const char *name, const char *json_config,
		 struct ibvf_sm *out, char *err, size_t errlen);

/** ibvf_sm_close() - fini() the instance and unload its module. */
void ibvf_sm_close(struct ibvf_sm *sm);

#endif /* IBVF_SM_LOADER_H */
