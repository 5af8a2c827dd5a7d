/* SPDX-License-Identifier: MIT */
/*
 * The attach engine's port seam (attach.h struct ibvf_port_ops) over the
 * port watcher (port_watch.h): wait until the VF port is ACTIVE, has a LID,
 * and holds every requested PKey with its membership (IBTA vol. 1, 10.9.1.2);
 * report the PKeys' P_Key table indexes.
 *
 * port_watch.source "local": each wait opens the VF's own RDMA device (port 1)
 * and polls its sysfs through libibumad; waits run in parallel.
 * "fabric": one libibmad port on the node's first CA, shared by all waits
 * under a lock (libibmad keeps global state and is not thread-safe, and each
 * open port is an ibsim client slot in the labs); the VF port is found by its
 * port GUID through the SA and read with PortInfo/P_KeyTable SMPs. Waits take
 * the lock in slices of at most 250 ms so concurrent attaches progress.
 */
#ifndef IBVF_ATTACH_PORT_H
#define IBVF_ATTACH_PORT_H

#include "attach.h"
#include "config.h"

/** ibvf_attach_port_ops() - fill @ops. Return: 0 or the port source's open error. */
int ibvf_attach_port_ops(const struct ibvf_port_watch_config *cfg, struct ibvf_port_ops *ops,
			 char *err, size_t errlen);

/** ibvf_attach_port_ops_free() - close the shared source; NULL ctx is fine. */
void ibvf_attach_port_ops_free(struct ibvf_port_ops *ops);

#endif /* IBVF_ATTACH_PORT_H */
