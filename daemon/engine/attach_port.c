// SPDX-License-Identifier: MIT
/* attach.h port seam over port_watch.h (local or fabric source). */
#include "attach_port.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/types.h>

#include "err.h"
#include "evloop.h"
#include "port_watch.h"

#define SLICE_MS 250

struct pctx {
	struct ibvf_port_watch_config cfg;
	struct ibvf_port_src *fabric; /* shared, under lock */
	pthread_mutex_t lock;
};

static void fill(struct ibvf_port_result *out, const struct ibvf_port_info *info)
{
	out->lid = info->lid;
	out->sm_lid = info->sm_lid;
	snprintf(out->state, sizeof(out->state), "%s", ibvf_port_state_name(info->state));
}

/*
 * Wait for one PKey (with membership bit) until @deadline; @any: either
 * membership counts (the default partition when the network has no PKey).
 */
static int wait_one(struct pctx *c, struct ibvf_port_src *src, const struct ibvf_port_target *t,
		    uint16_t pkey, bool any, int64_t deadline, struct ibvf_port_result *out,
		    int *index, char *err, size_t errlen)
{
	enum ibvf_pkey_match match =
		ibvf_pkey_is_full(pkey) ? IBVF_PKEY_MATCH_FULL : IBVF_PKEY_MATCH_LIMITED;
	struct ibvf_port_cond cond =
		ibvf_port_cond_ready(ibvf_pkey_key(pkey), any ? IBVF_PKEY_MATCH_ANY : match);
	struct ibvf_port_info *info = calloc(1, sizeof(*info));
	int ret;

	if (!info)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	for (;;) {
		int64_t left = deadline - ibvf_mono_ms();
		uint32_t slice = left <= 0			? 0
				 : left > SLICE_MS && c->fabric ? SLICE_MS
								: (uint32_t)left;

		if (c->fabric)
			pthread_mutex_lock(&c->lock);
		ret = ibvf_port_wait(src, t, &cond, slice, -1, info, index, err, errlen);
		if (c->fabric)
			pthread_mutex_unlock(&c->lock);
		fill(out, info);
		if (ret != -ETIMEDOUT || ibvf_mono_ms() >= deadline)
			break;
	}
	free(info);
	return ret;
}

static int p_wait(void *ctx, const struct ibvf_attach_vf *vf, uint64_t port_guid,
		  const uint16_t *pkeys, size_t n, int64_t deadline_ms,
		  struct ibvf_port_result *out, char *err, size_t errlen)
{
	struct pctx *c = ctx;
	struct ibvf_port_target t = {.kind = IBVF_TARGET_SELF};
	struct ibvf_port_src *src = c->fabric;
	int ret = 0;

	if (!src) {
		if (!vf->rdma_dev[0])
			return ibvf_errf(err, errlen, -ENODEV,
					 "VF %s has no RDMA device to read its port from", vf->pci);
		ret = ibvf_port_src_open(vf->rdma_dev, 1, IBVF_PORT_SRC_LOCAL, &c->cfg, &src, err,
					 errlen);
		if (ret)
			return ret;
	} else {
		t.kind = IBVF_TARGET_GUID;
		t.guid = port_guid;
		t.port = 1;
	}
	for (size_t i = 0; !ret && i < n; i++)
		ret = wait_one(c, src, &t, pkeys[i], false, deadline_ms, out, &out->pkey_index[i],
			       err, errlen);
	if (!n) {
		/* no tenant PKey: ACTIVE in the default partition (IBTA 10.9.1.1) */
		int index = -1;

		ret = wait_one(c, src, &t, IBVF_PKEY_DEFAULT, true, deadline_ms, out, &index, err,
			       errlen);
	}
	if (!c->fabric)
		ibvf_port_src_close(src);
	return ret;
}

int ibvf_attach_port_ops(const struct ibvf_port_watch_config *cfg, struct ibvf_port_ops *ops,
			 char *err, size_t errlen)
{
	struct pctx *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	c->cfg = *cfg;
	pthread_mutex_init(&c->lock, NULL);
	if (cfg->source == IBVF_PORT_SRC_FABRIC) {
		ret = ibvf_port_src_open(NULL, 0, IBVF_PORT_SRC_FABRIC, cfg, &c->fabric, err,
					 errlen);
		if (ret) {
			pthread_mutex_destroy(&c->lock);
			free(c);
			return ret;
		}
	}
	*ops = (struct ibvf_port_ops){p_wait, c};
	return 0;
}

void ibvf_attach_port_ops_free(struct ibvf_port_ops *ops)
{
	struct pctx *c = ops->ctx;

	if (!c)
		return;
	ibvf_port_src_close(c->fabric);
	pthread_mutex_destroy(&c->lock);
	free(c);
	ops->ctx = NULL;
}
