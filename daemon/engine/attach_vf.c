// SPDX-License-Identifier: MIT
/* attach.h VF seam over vf_manager.h (inventory, program, reset, list). */
#include "attach_vf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach_timing.h"
#include "err.h"
#include "vf_driver.h"
#include "vf_inventory.h"

struct ctx {
	struct ibvf_vf_manager *m;
	char *sysfs_root;
};

static void fill(struct ibvf_attach_vf *out, const struct ibvf_vf_info *vf,
		 const struct ibvf_vf_state *st)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->pci, sizeof(out->pci), "%s", vf->pci);
	snprintf(out->pf, sizeof(out->pf), "%s", vf->pf_netdev);
	out->vf_index = vf->index;
	snprintf(out->netdev, sizeof(out->netdev), "%s", vf->netdev);
	snprintf(out->rdma_dev, sizeof(out->rdma_dev), "%.31s", vf->rdma_dev);
	out->unbound = !vf->driver[0];
	if (st) {
		out->guids_known = st->node_guid_known && st->port_guid_known;
		out->node_guid = st->node_guid_known ? st->node_guid : 0;
		out->port_guid = st->port_guid_known ? st->port_guid : 0;
		if (st->link_state_known)
			snprintf(out->link_state, sizeof(out->link_state), "%s",
				 ibvf_vf_link_state_name(st->link_state));
	}
}

static int a_lookup(void *p, const char *pci, struct ibvf_attach_vf *out, char *err, size_t errlen)
{
	struct ctx *c = p;
	struct ibvf_vf_info vf;
	struct ibvf_vf_state st;
	int ret = ibvf_vf_query(c->m, pci, &vf, &st, err, errlen);

	if (ret)
		return ret;
	fill(out, &vf, &st);
	return 0;
}

static int a_program(void *p, struct ibvf_attach_vf *vf, uint64_t node, uint64_t port,
		     const char *link, char *err, size_t errlen)
{
	struct ctx *c = p;
	struct ibvf_vf_request req;
	struct ibvf_vf_info now;
	struct ibvf_vf_state st;
	bool reset;
	int ret = ibvf_vf_request_make(node, port, link, &req, &reset, err, errlen);

	if (ret)
		return ret;
	if (reset)
		ret = ibvf_vf_reset_link(c->m, vf->pci, req.link_state, &now, err, errlen);
	else
		ret = ibvf_vf_program(c->m, vf->pci, &req, &now, err, errlen);
	/* the op's timing (attach_timing.h): GUIDs, link state, rebind and its wait */
	ibvf_timing_mark_current("vf_set");
	if (ret)
		return ret;
	/* names after the rebind (found again by PCI address), GUIDs as set */
	ret = ibvf_vf_query(c->m, vf->pci, &now, &st, NULL, 0);
	ibvf_timing_mark_current("vf_readback");
	if (ret == 0) {
		fill(vf, &now, &st);
	} else {
		fill(vf, &now, NULL);
		vf->guids_known = true;
		vf->node_guid = node;
		vf->port_guid = port;
	}
	return 0;
}

static int a_list(void *p, int (*cb)(void *arg, const struct ibvf_attach_vf *vf), void *arg,
		  char *err, size_t errlen)
{
	struct ctx *c = p;
	struct ibvf_inventory *inv;
	int ret = ibvf_inventory_scan(c->sysfs_root, &inv, err, errlen);

	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < inv->n_pfs; i++) {
		for (size_t k = 0; !ret && k < inv->pfs[i].n_vfs; k++) {
			const struct ibvf_vf_info *v = &inv->pfs[i].vfs[k];
			struct ibvf_attach_vf out;
			struct ibvf_vf_info now;
			struct ibvf_vf_state st;

			if (ibvf_vf_query(c->m, v->pci, &now, &st, NULL, 0))
				fill(&out, v, NULL);
			else
				fill(&out, &now, &st);
			ret = cb(arg, &out);
		}
	}
	ibvf_inventory_free(inv);
	return ret;
}

int ibvf_attach_vf_ops(struct ibvf_vf_manager *m, const char *sysfs_root, struct ibvf_vf_ops *ops)
{
	struct ctx *c = calloc(1, sizeof(*c));

	if (!c || !(c->sysfs_root = strdup(sysfs_root))) {
		free(c);
		return -ENOMEM;
	}
	c->m = m;
	*ops = (struct ibvf_vf_ops){a_lookup, a_program, a_list, c};
	return 0;
}

void ibvf_attach_vf_ops_free(struct ibvf_vf_ops *ops)
{
	struct ctx *c = ops->ctx;

	if (c)
		free(c->sysfs_root);
	free(c);
	ops->ctx = NULL;
}
