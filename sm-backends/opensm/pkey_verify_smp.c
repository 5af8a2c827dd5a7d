// SPDX-License-Identifier: MIT
/* pkey_verifier over the port watcher's fabric source (SMPs via libibmad). */
#include "pkey_verify.h"

#include <errno.h>
#include <stdlib.h>

#include "port_watch.h"

static int smp_resolve(void *ctx, uint64_t guid, uint16_t *lid, char *err, size_t errlen)
{
	return ibvf_port_resolve_guid(ctx, guid, lid, err, errlen);
}

static int smp_wait(void *ctx, uint16_t lid, uint16_t pkey, enum pv_want want, uint32_t timeout_ms,
		    char *err, size_t errlen)
{
	struct ibvf_port_target t = {.kind = IBVF_TARGET_LID, .lid = lid};
	struct ibvf_port_cond c = {
		.pkey_want = want == PV_ABSENT ? IBVF_PKEY_WANT_ABSENT : IBVF_PKEY_WANT_PRESENT,
		.pkey = pkey,
		.match = want == PV_FULL      ? IBVF_PKEY_MATCH_FULL
			 : want == PV_LIMITED ? IBVF_PKEY_MATCH_LIMITED
					      : IBVF_PKEY_MATCH_ANY,
	};

	return ibvf_port_wait(ctx, &t, &c, timeout_ms, -1, NULL, NULL, err, errlen);
}

static const char *smp_name(void *ctx)
{
	return ibvf_port_src_name(ctx);
}

static void smp_close(void *ctx)
{
	ibvf_port_src_close(ctx);
}

static const struct pkey_verifier_ops smp_ops = {
	.resolve = smp_resolve,
	.wait = smp_wait,
	.name = smp_name,
	.close = smp_close,
};

int pv_open_smp(const char *ca, int port, uint32_t poll_min_ms, uint32_t poll_max_ms,
		struct pkey_verifier *out, char *err, size_t errlen)
{
	struct ibvf_port_watch_config cfg;
	struct ibvf_port_src *src;
	int ret;

	ibvf_port_watch_config_defaults(&cfg);
	cfg.source = IBVF_PORT_SRC_FABRIC;
	cfg.poll_min_ms = poll_min_ms;
	cfg.poll_max_ms = poll_max_ms;
	ret = ibvf_port_src_open(ca, port, IBVF_PORT_SRC_FABRIC, &cfg, &src, err, errlen);
	if (ret)
		return ret;
	out->ops = &smp_ops;
	out->ctx = src;
	return 0;
}
