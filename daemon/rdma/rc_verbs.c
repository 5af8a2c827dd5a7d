// SPDX-License-Identifier: MIT
/*
 * libibverbs loaded at run time for the RC check; see rc_verbs.h for why.
 */
#include "rc_verbs.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "log.h"

static pthread_mutex_t verbs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibvf_verbs verbs;
static bool verbs_loaded;

#define VERBS_SYM(m)                                                                               \
	{                                                                                          \
		"ibv_" #m, offsetof(struct ibvf_verbs, m)                                          \
	}

static const struct {
	const char *name;
	size_t off;
} verbs_syms[] = {
	VERBS_SYM(get_device_list),
	VERBS_SYM(free_device_list),
	VERBS_SYM(get_device_name),
	VERBS_SYM(open_device),
	VERBS_SYM(close_device),
	VERBS_SYM(query_device),
	VERBS_SYM(query_port),
	VERBS_SYM(query_pkey),
	{"_ibv_query_gid_table", offsetof(struct ibvf_verbs, _query_gid_table)},
	VERBS_SYM(alloc_pd),
	VERBS_SYM(dealloc_pd),
	VERBS_SYM(reg_mr),
	VERBS_SYM(dereg_mr),
	VERBS_SYM(create_comp_channel),
	VERBS_SYM(destroy_comp_channel),
	VERBS_SYM(create_cq),
	VERBS_SYM(destroy_cq),
	VERBS_SYM(get_cq_event),
	VERBS_SYM(ack_cq_events),
	VERBS_SYM(create_qp),
	VERBS_SYM(modify_qp),
	VERBS_SYM(destroy_qp),
	VERBS_SYM(get_async_event),
	VERBS_SYM(ack_async_event),
	VERBS_SYM(port_state_str),
	VERBS_SYM(event_type_str),
	VERBS_SYM(wc_status_str),
};

static int verbs_open(const char *lib, char *err, size_t errlen)
{
	struct ibvf_verbs v;
	const char *e;
	void *h;

	dlerror();
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		e = dlerror();
		return ibvf_errf(err, errlen, -ELIBACC,
				 "rcCheck needs %s (Debian: libibverbs1): %s", lib,
				 e ? e : "dlopen failed");
	}
	memset(&v, 0, sizeof(v));
	for (size_t i = 0; i < sizeof(verbs_syms) / sizeof(verbs_syms[0]); i++) {
		void *p;

		dlerror();
		p = dlsym(h, verbs_syms[i].name);
		e = dlerror();
		if (!p || e) {
			ibvf_errf(err, errlen, -ELIBACC,
				  "rcCheck needs %s (Debian: libibverbs1): %s has no %s: %s", lib,
				  lib, verbs_syms[i].name, e ? e : "NULL symbol");
			dlclose(h);
			return -ELIBACC;
		}
		/* POSIX: a data pointer from dlsym() converts to a function pointer */
		memcpy((char *)&v + verbs_syms[i].off, &p, sizeof(p));
	}
	verbs = v;
	log_debug("rc-check: %s loaded", lib);
	return 0;
}

int ibvf_verbs_load(const char *lib, const struct ibvf_verbs **out, char *err, size_t errlen)
{
	int ret = 0;

	pthread_mutex_lock(&verbs_lock);
	if (!verbs_loaded) {
		ret = verbs_open(lib ? lib : IBVF_VERBS_LIB, err, errlen);
		verbs_loaded = !ret;
	}
	pthread_mutex_unlock(&verbs_lock);
	if (!ret)
		*out = &verbs;
	return ret;
}

int ibvf_verbs_query_port(const struct ibvf_verbs *v, struct ibv_context *ctx, uint8_t port,
			  struct ibv_port_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	if (!vctx) {
		memset(attr, 0, sizeof(*attr));
		return v->query_port(ctx, port, (struct _compat_ibv_port_attr *)attr);
	}
	return vctx->query_port(ctx, port, attr, sizeof(*attr));
}
