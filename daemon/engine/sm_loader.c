// SPDX-License-Identifier: MIT
/* Loading SM backend modules with their ABI checks (sm_loader.h). */
#include "sm_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "module_file.h"

/*
 * The version of the SM ABI whose entry point (IBVF_SM_ENTRY_PREFIX + N)
 * @handle exports instead of this ABI's, or 0 when it exports none of
 * versions 1..IBVF_SM_ABI_PROBE_MAX. No code of the module is called.
 */
#define IBVF_SM_ABI_PROBE_MAX 32

static unsigned other_abi_version(void *handle)
{
	char sym[sizeof(IBVF_SM_ENTRY_PREFIX) + 10];

	for (unsigned v = 1; v <= IBVF_SM_ABI_PROBE_MAX; v++) {
		if (v == IBVF_SM_ABI_VERSION)
			continue;
		snprintf(sym, sizeof(sym), IBVF_SM_ENTRY_PREFIX "%u", v);
		if (dlsym(handle, sym))
			return v;
	}
	return 0;
}

/* Find the entry point; a module of another ABI version is refused by name. */
static int find_entry(struct ibvf_sm_module *m, ibvf_sm_entry_fn *entry, char *err, size_t errlen)
{
	const char *e;
	char why[256];
	unsigned v;

	dlerror();
	*(void **)entry = dlsym(m->handle, IBVF_SM_ENTRY_SYMBOL);
	if (*entry)
		return 0;
	e = dlerror();
	/* copied: the probes below overwrite dlerror()'s text */
	snprintf(why, sizeof(why), "%s", e ? e : "not found");
	v = other_abi_version(m->handle);
	if (v)
		return ibvf_errf(err, errlen, -EPROTO,
				 "SM backend module %s implements SM ABI "
				 "version %u (it exports %s%u, not %s); this ibvfd needs version "
				 "%u: rebuild the module against this ibvf's "
				 "include/ibvf/sm_backend.h",
				 m->path, v, IBVF_SM_ENTRY_PREFIX, v, IBVF_SM_ENTRY_SYMBOL,
				 IBVF_SM_ABI_VERSION);
	return ibvf_errf(err, errlen, -ENOEXEC,
			 "SM backend module %s has no symbol %s "
			 "(not an ibvf SM backend): %s",
			 m->path, IBVF_SM_ENTRY_SYMBOL, why);
}

static int check_ops(const struct ibvf_sm_ops *o, const char *path, const char *name, char *err,
		     size_t errlen)
{
	if (!o)
		return ibvf_errf(err, errlen, -EPROTO,
				 "SM backend module %s: %s() returned "
				 "NULL",
				 path, IBVF_SM_ENTRY_SYMBOL);
	if (o->abi_version != IBVF_SM_ABI_VERSION)
		return ibvf_errf(err, errlen, -EPROTO,
				 "SM backend module %s implements SM ABI "
				 "version %u; this ibvfd needs version %u (rebuild the module)",
				 path, o->abi_version, IBVF_SM_ABI_VERSION);
	/* smaller than today's table is fine: optional entries (IBVF_SM_OPS_HAS()) */
	if (o->struct_size < IBVF_SM_OPS_V2_BASE_SIZE)
		return ibvf_errf(err, errlen, -EPROTO,
				 "SM backend module %s: ops table of %u "
				 "bytes, smaller than the %zu bytes of ABI version %u",
				 path, o->struct_size, (size_t)IBVF_SM_OPS_V2_BASE_SIZE,
				 IBVF_SM_ABI_VERSION);
	if (!o->name || strcmp(o->name, name))
		return ibvf_errf(err, errlen, -EPROTO,
				 "SM backend module %s calls itself '%.64s', "
				 "expected '%s'",
				 path, o->name ? o->name : "(null)", name);
	if (!o->init || !o->fini || !o->validate || !o->add_members || !o->remove_members ||
	    !o->list_members)
		return ibvf_errf(err, errlen, -EPROTO,
				 "SM backend module %s: its ops table "
				 "lacks an operation",
				 path);
	return 0;
}

int ibvf_sm_module_load(const char *module_dir, const char *name, struct ibvf_sm_module **out,
			char *err, size_t errlen)
{
	struct ibvf_sm_module *m;
	ibvf_sm_entry_fn entry;
	int ret;

	*out = NULL;
	ret = ibvf_module_name_check("SM backend", name, "opensm, ufm, noop", err, errlen);
	if (ret)
		return ret;
	m = calloc(1, sizeof(*m));
	if (!m)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (snprintf(m->path, sizeof(m->path), "%s/%s.so", module_dir, name) >=
	    (int)sizeof(m->path)) {
		free(m);
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sm.module_dir is too long");
	}
	ret = ibvf_module_file_check("SM backend", m->path, "sm.module_dir", module_dir, err,
				     errlen);
	if (ret)
		goto fail;
	dlerror();
	m->handle = dlopen(m->path, RTLD_NOW | RTLD_LOCAL);
	if (!m->handle) {
		ret = ibvf_errf(err, errlen, -ENOEXEC, "SM backend module %s: dlopen: %s", m->path,
				dlerror());
		goto fail;
	}
	ret = find_entry(m, &entry, err, errlen);
	if (ret)
		goto fail;
	m->ops = entry();
	ret = check_ops(m->ops, m->path, name, err, errlen);
	if (ret)
		goto fail;
	*out = m;
	return 0;
fail:
	ibvf_sm_module_unload(m);
	return ret;
}

void ibvf_sm_module_unload(struct ibvf_sm_module *m)
{
	if (!m)
		return;
	if (m->handle)
		dlclose(m->handle);
	free(m);
}

int ibvf_sm_open(const char *module_dir, const char *name, const char *json_config,
		 struct ibvf_sm *out, char *err, size_t errlen)
{
	int ret;

	out->mod = NULL;
	out->b = NULL;
	ret = ibvf_sm_module_load(module_dir, name, &out->mod, err, errlen);
	if (ret)
		return ret;
	ret = out->mod->ops->init(json_config, &out->b, err, errlen);
	if (ret) {
		ibvf_err_prefix(err, errlen, ret, "SM backend %s", name);
		ibvf_sm_module_unload(out->mod);
		out->mod = NULL;
		out->b = NULL;
	}
	return ret;
}

void ibvf_sm_close(struct ibvf_sm *sm)
{
	if (sm->mod && sm->b)
		sm->mod->ops->fini(sm->b);
	ibvf_sm_module_unload(sm->mod);
	sm->mod = NULL;
	sm->b = NULL;
}
