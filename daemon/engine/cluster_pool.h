/* SPDX-License-Identifier: MIT */
/*
 * Cluster mode at ibvfd's start-up (pool.cluster, docs/cluster.md): the
 * node's GUID blocks in etcd become the local pool's ranges, so the pool
 * allocates as fast as in single-node mode and only from GUIDs no other
 * node owns.
 */
#ifndef IBVF_CLUSTER_POOL_H
#define IBVF_CLUSTER_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config.h"
#include "guid_pool.h"

/** The blocks file in the state directory: the node's blocks as it last knew them. */
#define IBVF_CLUSTER_BLOCKS_FILE "cluster-blocks.json"

struct ibvf_cluster_hb;

/**
 * ibvf_cluster_pool_open() - open the pool of a node in cluster mode:
 * 1. check the layout against etcd (same ranges and block size everywhere);
 * 2. the start-up check: the blocks of <state_dir>/cluster-blocks.json
 *    against etcd: owned ones are kept, ones etcd gives the node that the
 *    file lacks (a claim whose file write a crash lost) are adopted, lost
 *    (reclaimed) and foreign ones are dropped and every live record in
 *    them is logged as a conflict (the pool then keeps it as a record
 *    outside its ranges: no new GUID comes from such a block);
 * 3. with etcd unreachable, the file's blocks alone (a node cut off keeps
 *    its blocks), said in the log;
 * 4. the pool opened with the blocks as its ranges; while fewer than
 *    pool.cluster.low_watermark GUIDs are free, one more block is claimed
 *    (recorded in the file before the pool sees it) and the pool reopened.
 * On success @cfg->pool.ranges is replaced by the node's blocks, so the
 * engine treats only them as its pool GUIDs (the reconciliation of one
 * node never touches another node's GUIDs). @o gives the other pool options.
 * *@hb gets the heartbeat (a thread renewing nodes/<node> every TTL/3 while
 * ibvfd runs; with etcd unreachable it retries; ibvfctl cluster
 * reclaim-node refuses while it lives); stop it with ibvf_cluster_hb_stop().
 * Return: 0, -ENOSPC (no block held and none free), -EIO (etcd unreachable
 * and no block recorded), or the errors of the pool and the etcd client,
 * with the reason in @err.
 */
int ibvf_cluster_pool_open(struct ibvf_config *cfg, const struct ibvf_pool_opts *o,
			   struct ibvf_pool **out, struct ibvf_cluster_hb **hb, char *err,
			   size_t errlen);

struct etcd_client;

/**
 * ibvf_cluster_etcd_new() - an etcd client for the pool.cluster config @k
 * (endpoints, TLS and credential files, per-call timeout in ms), so ibvfd and
 * ibvfctl reach etcd the same way. Return: 0 with *@out set, or the errors of
 * etcd_client_new() (-EINVAL for a bad option, -ENOMEM) with the reason in @err.
 */
int ibvf_cluster_etcd_new(const struct ibvf_cluster_config *k, struct etcd_client **out, char *err,
			  size_t errlen);

/**
 * ibvf_cluster_local_ranges() - the pool ranges of a node in cluster mode as
 * its last start recorded them (<state_dir>/cluster-blocks.json, adjacent
 * blocks merged), for tools that open the store without ibvfd (ibvfctl):
 * with the configured pool.ranges they would hand out GUIDs of other
 * nodes' blocks. *@out is malloc'd. Return: 0, -ENOENT (no block recorded:
 * ibvfd never started in cluster mode here), -EINVAL (a file of another
 * node or prefix, or unreadable), -ENOMEM.
 */
int ibvf_cluster_local_ranges(const struct ibvf_config *cfg, struct ibvf_guid_range **out,
			      size_t *n, char *err, size_t errlen);

struct ibvf_vf_ops;

/**
 * ibvf_cluster_adopt_vfs() - adoption of the GUIDs the node's VFs carry
 * without a store record (ib-kubernetes style, docs/cluster.md), after
 * ibvf_cluster_hb_attach() and before ibvfd serves prepare: a GUID of the
 * ranges outside the node's blocks and reservations gets its block claimed
 * (never claimed nor freed before) or is reserved alone; one another node
 * owns is a conflict (status, ibvfctl cluster status), looked at again at
 * the next start. Adopted blocks go to the file, the engine and the pool as
 * a claim's do. Return: 0 (also when etcd has not answered: logged), the
 * errors of @vf's list(), -ENOMEM, a file or store error.
 */
int ibvf_cluster_adopt_vfs(struct ibvf_cluster_hb *h, const struct ibvf_vf_ops *vf, char *err,
			   size_t errlen);

/**
 * ibvf_cluster_local_conflicts() - the conflicts the node's ibvfd last
 * recorded in <state_dir>/cluster-blocks.json (ibvf_cluster_status()'s list;
 * empty when there is no file), for ibvfctl cluster status. *@out is a new
 * array. Return: 0, -EINVAL (a file of another node or prefix), -ENOMEM.
 */
int ibvf_cluster_local_conflicts(const struct ibvf_config *cfg, json_t **out, char *err,
				 size_t errlen);

/** The node's heartbeat in etcd: a lease-bound nodes/<node> key, renewed by one thread. */
#define IBVF_CLUSTER_HEARTBEAT_TTL_S 30

/**
 * ibvf_cluster_hb_stop() - stop renewing the heartbeat and free @hb (NULL is
 * a no-op). The lease is not revoked: the key expires within its TTL, so a
 * restart does not look like a dead node in between.
 */
void ibvf_cluster_hb_stop(struct ibvf_cluster_hb *hb);

/** Add [first, last] to the engine's pool GUIDs (ibvf_engine_add_range()). 0 or -errno. */
typedef int (*ibvf_cluster_add_range_fn)(void *arg, uint64_t first, uint64_t last);

/**
 * ibvf_cluster_hb_attach() - let the node's thread claim blocks while ibvfd
 * runs (docs/cluster.md): every 500 ms (at once when ibvf_cluster_ready() is
 * asked) it reads @pool's free count, and below pool.cluster.low_watermark
 * claims one block in etcd, records it in cluster-blocks.json, then hands it
 * to @add_range (the engine) and ibvf_pool_add_range(). Above
 * pool.cluster.high_watermark free GUIDs it returns one idle block (every 2
 * s at most): ibvf_pool_remove_range(), @remove_range (the engine), the
 * file, then cluster_block_return() (put back everywhere when etcd fails).
 * It also deletes requested-GUID reservations whose GUID has no record left
 * and drops conflicts whose attachment is released. Never on a prepare's
 * path. @pool NULL detaches (before the pool or engine is freed;
 * waits for a hand-over in progress).
 */
void ibvf_cluster_hb_attach(struct ibvf_cluster_hb *hb, struct ibvf_pool *pool,
			    ibvf_cluster_add_range_fn add_range,
			    ibvf_cluster_add_range_fn remove_range, void *arg);

/**
 * ibvf_cluster_ready() - an ibvf_engine_ready_fn for @arg, the node's
 * struct ibvf_cluster_hb: false, with the reason (the prefix, the node, the
 * etcd endpoints and what they answered) in @why, when the node's blocks
 * have no free GUID and the last claim failed. Reads the thread's state only.
 */
bool ibvf_cluster_ready(void *arg, char *why, size_t len);

/**
 * ibvf_cluster_reserve() - an ibvf_engine_reserve_fn for @arg, the node's
 * struct ibvf_cluster_hb: a requested GUID (runtimeConfig, args.cni) outside
 * the node's blocks is reserved in etcd (cluster_guid_reserve(): one txn,
 * create-if-absent, never another node's GUID) before the pool may take it.
 * The thread deletes the reservation once the GUID has no record left (the
 * DEL's removal verified and its quarantine over: the pool deletes the
 * record only then), never while a prepare of it is in flight. Return: 0,
 * -ERANGE (outside pool.ranges), -EEXIST (another node's: @err names it),
 * -EBUSY (its block in quarantine), -EAGAIN or the etcd client's errors
 * (etcd did not answer: not ready).
 */
int ibvf_cluster_reserve(void *arg, uint64_t guid, bool done, char *err, size_t errlen);

/**
 * ibvf_cluster_status() - the node's cluster view for ibvfd's status, @arg the
 * struct ibvf_cluster_hb: {"node","prefix","blocks":N,"reserved":N,
 * "conflicts":[{"guid","block","owner","reason","container","ifname","pci"}]}
 * (live attachments in blocks reclaimed or owned elsewhere, GUIDs adoption
 * could not claim). A new reference, or NULL (out of memory).
 */
json_t *ibvf_cluster_status(void *arg);

#endif /* IBVF_CLUSTER_POOL_H */
