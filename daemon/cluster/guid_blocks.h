/* SPDX-License-Identifier: MIT */
/*
 * Cluster GUID blocks (issue 18, docs/cluster.md): the pool ranges, the same
 * on every node, are cut into blocks of block_size GUIDs from each range's
 * start; a node owns a block once one etcd transaction created the block's
 * key with the node's name, only if the key did not exist. No lease holds
 * ownership: a node cut off from etcd keeps its blocks. GUIDs are then
 * handed out from the node's own blocks with no etcd round trip.
 *
 * Keys under the fabric's prefix P (ending in "/"); GUIDs as 16 lowercase
 * hex digits, so that key order is GUID order:
 *   P layout              {"block_size":N,"ranges":[["<hex>","<hex>"],...]}
 *                         created by the first node, must be equal on all
 *   P blocks/<first GUID> {"node":NAME,"last":"<hex>","claimed_ms":WALL_MS}
 *   P guids/<GUID>        {"node":NAME,"reserved_ms":WALL_MS}: one requested
 *                         GUID outside every claimed block
 *   P released/<first>    {"by":NAME,"released_ms":WALL_MS[,"members_rev":R]}:
 *                         a block returned by its owner or reclaimed by an
 *                         admin; not claimable before quarantine_s has
 *                         passed, nor (R: a reclaim) before the SM agents
 *                         applied revision R (the old node's memberships
 *                         removed, sm_members.h)
 *   P nodes/<NAME>        {"node":NAME,"since_ms":WALL_MS} on a lease: the
 *                         node's heartbeat (never holds a block)
 *
 * Safety: a block claim compares "blocks/<first> absent" and "no
 * guids/<g> key for any g of the block" in one txn; a reservation compares
 * "guids/<g> absent" and "blocks/<first of g's block> absent" in one txn.
 * etcd applies txns one at a time (serializable), so each GUID has at most
 * one owner node, whichever order the claims and reservations race in.
 */
#ifndef IBVF_GUID_BLOCKS_H
#define IBVF_GUID_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd_client.h"

#define CLUSTER_NODE_MAX 253 /* a Kubernetes node name (RFC 1123 subdomain) */

/** An inclusive GUID range [start, end], host-order u64s, sorted, non-overlapping. */
struct cluster_range {
	uint64_t start;
	uint64_t end;
};

struct cluster_blocks_opts {
	struct etcd_client *etcd; /* borrowed; outlives the cluster_blocks */
	const char *prefix;	  /* "/ibvf/" (ends in "/") */
	const char *node;	  /* this node's name */
	const struct cluster_range *ranges;
	size_t n_ranges;
	uint32_t block_size;   /* 1..65536 */
	uint32_t quarantine_s; /* a returned or reclaimed block waits this long (pool.quarantine_s)
				*/
};

/** One claimed block as etcd holds it. */
struct cluster_block {
	uint64_t first, last; /* inclusive */
	char node[CLUSTER_NODE_MAX + 1];
	int64_t claimed_ms;   /* wall clock of the claim, ms since the epoch */
	int64_t mod_revision; /* etcd revision of the owner's write */
};

/** What etcd says of a block the node's store lists (cluster_blocks_verify()). */
enum cluster_block_state {
	CLUSTER_BLOCK_OWNED = 0, /* etcd names this node: allocate from it */
	CLUSTER_BLOCK_LOST,	 /* no key: reclaimed while the node was away */
	CLUSTER_BLOCK_FOREIGN,	 /* another node owns it now */
	CLUSTER_BLOCK_UNLISTED,	 /* etcd names this node but the store does not list it */
};

struct cluster_block_check {
	uint64_t first, last;
	enum cluster_block_state state;
	char owner[CLUSTER_NODE_MAX + 1]; /* FOREIGN: the owner */
};

struct cluster_blocks;

/**
 * cluster_blocks_open() - check @o, and check the fabric's layout key
 * against @o's ranges and block size, creating it when absent (one txn).
 * Return: 0, -EINVAL (bad options), -EEXIST (etcd's layout differs: @err
 * shows both; every node must use the same ranges and block size), the
 * errors of etcd_txn().
 */
int cluster_blocks_open(const struct cluster_blocks_opts *o, struct cluster_blocks **out, char *err,
			size_t errlen);

/** cluster_blocks_free() - free @b (not the etcd client); NULL is a no-op. */
void cluster_blocks_free(struct cluster_blocks *b);

/** cluster_blocks_total() - the number of blocks of the layout. */
uint64_t cluster_blocks_total(const struct cluster_blocks *b);

/**
 * cluster_block_of() - the block [*@first, *@last] that holds @guid.
 * Return: 0, or -ERANGE when @guid is in no range.
 */
int cluster_block_of(const struct cluster_blocks *b, uint64_t guid, uint64_t *first,
		     uint64_t *last);

/**
 * cluster_blocks_list() - every claimed block, sorted by first GUID (one
 * range request). @node non-NULL: only that node's. *@out is malloc'd.
 * Return: 0, -EPROTO (a block key or value ibvf did not write), the errors
 * of etcd_range().
 */
int cluster_blocks_list(struct cluster_blocks *b, const char *node, struct cluster_block **out,
			size_t *n, char *err, size_t errlen);

/**
 * cluster_blocks_claim() - claim one more block for this node: list the
 * claimed blocks, take the first free one at or after a start point spread
 * by the node's name (so that nodes rarely race for the same block), and
 * create its key in a txn that also checks no GUID of it is reserved. A
 * lost race moves on to the next free block. *@out gets the block. The
 * claims of one node must be serialized (one claimer per node): a retried
 * txn whose first attempt was applied is recognised by the node's name.
 * Return: 0, -ENOSPC (no block is free: @err says how many exist and are
 * claimed), the errors of etcd_range() and etcd_txn().
 */
int cluster_blocks_claim(struct cluster_blocks *b, struct cluster_block *out, char *err,
			 size_t errlen);

/**
 * cluster_block_claim_at() - adoption (docs/cluster.md): claim the block that
 * holds @guid (a GUID this node already uses) with the claim txn, only if it
 * was never claimed nor freed (no blocks/ key, no released/ marker, no
 * reserved GUID in it). *@out gets the block; *@owner (may be NULL) the
 * owning node on -EEXIST. Return: 0 (claimed, or already this node's),
 * -EEXIST (another node's: @err names it), -EBUSY (returned or reclaimed
 * earlier: not adopted), -ENOTEMPTY (other nodes reserved GUIDs in it:
 * reserve @guid alone), -ERANGE (in no range), the errors of etcd_txn().
 */
int cluster_block_claim_at(struct cluster_blocks *b, uint64_t guid, struct cluster_block *out,
			   char *owner, size_t owner_len, char *err, size_t errlen);

/**
 * cluster_guid_reserve() - make a requested GUID (runtimeConfig's
 * infinibandGUID, args.cni.guid) this node's, cluster-wide: inside this
 * node's block it is the local pool's to decide (0, nothing written);
 * inside another node's block it is refused; in a block released less
 * than quarantine_s ago it is refused too; outside every block its
 * guids/<GUID> key is created (or found already this node's).
 * *@owner (may be NULL) gets the owning node's name on -EEXIST.
 * Return: 0, -EEXIST (another node owns it: @err names that node), -EBUSY
 * (its block is in quarantine), the errors of etcd_txn().
 */
int cluster_guid_reserve(struct cluster_blocks *b, uint64_t guid, char *owner, size_t owner_len,
			 char *err, size_t errlen);

/**
 * cluster_guid_unreserve() - delete this node's reservation of @guid (a
 * txn comparing the key's value, so another node's is never touched).
 * Return: 0 (also when there was none), the errors of etcd_txn().
 */
int cluster_guid_unreserve(struct cluster_blocks *b, uint64_t guid, char *err, size_t errlen);

/**
 * cluster_guid_reservations() - the GUIDs @node has reserved (guids/ keys
 * naming it; one range request over guids/), sorted (key order). *@out is
 * malloc'd (also when *@n is 0). Return: 0, -ENOMEM, the errors of etcd_range().
 */
int cluster_guid_reservations(struct cluster_blocks *b, const char *node, uint64_t **out, size_t *n,
			      char *err, size_t errlen);

/**
 * cluster_blocks_verify() - the start-up check: compare the blocks the
 * node's store lists (@firsts, first GUIDs) with etcd (one range request).
 * *@out (malloc'd, *@n entries) gets one entry per listed block, then one
 * CLUSTER_BLOCK_UNLISTED entry per block etcd gives this node that the
 * store does not list. Return: the number of entries that are not OWNED
 * (0: all is well), or the errors of cluster_blocks_list().
 */
int cluster_blocks_verify(struct cluster_blocks *b, const uint64_t *firsts, size_t n_firsts,
			  struct cluster_block_check **out, size_t *n, char *err, size_t errlen);

/**
 * cluster_block_return() - give back this node's block @first (the caller
 * checked that every GUID of it is free and past quarantine): one txn
 * deletes the block key if it is still the value this node wrote and puts
 * its released/ marker, so no node claims it before quarantine_s passes.
 * Return: 0, -ENOENT (no such claimed block), -EPERM (another node's: @err
 * names it), -EAGAIN (it changed meanwhile), the errors of etcd_txn().
 */
int cluster_block_return(struct cluster_blocks *b, uint64_t first, char *err, size_t errlen);

/**
 * cluster_node_heartbeat() - keep this node's heartbeat key alive: with
 * *@lease 0, grant a lease of @ttl_s seconds and put nodes/<node> on it;
 * else renew *@lease, and start over when etcd says it expired. Call it
 * every ttl_s / 3. Return: 0, the errors of etcd_lease_grant(),
 * etcd_lease_keepalive() and etcd_put().
 */
int cluster_node_heartbeat(struct cluster_blocks *b, int64_t ttl_s, int64_t *lease, char *err,
			   size_t errlen);

/**
 * cluster_node_alive() - whether @node's heartbeat key exists (*@alive).
 * Return: 0, the errors of etcd_range().
 */
int cluster_node_alive(struct cluster_blocks *b, const char *node, bool *alive, char *err,
		       size_t errlen);

/** One node seen in etcd: by its heartbeat, its blocks or its reservations. */
struct cluster_node {
	char name[CLUSTER_NODE_MAX + 1];
	bool alive;	   /* its heartbeat key exists */
	int64_t since_ms;  /* heartbeat: wall clock of its last (re)start, ms */
	size_t n_blocks;   /* blocks it owns */
	uint64_t n_guids;  /* GUIDs in those blocks */
	size_t n_reserved; /* single reserved GUIDs */
};

/**
 * cluster_nodes_list() - every node etcd knows of under the prefix, sorted
 * by name (three range requests: nodes/, blocks/, guids/). *@out malloc'd.
 * Return: 0, the errors of etcd_range() and cluster_blocks_list().
 */
int cluster_nodes_list(struct cluster_blocks *b, struct cluster_node **out, size_t *n, char *err,
		       size_t errlen);

/** What cluster_node_reclaim_all() did. */
struct cluster_reclaim {
	size_t blocks;	     /* blocks freed into quarantine */
	size_t guids;	     /* reserved GUIDs freed */
	size_t guids_kept;   /* reserved GUIDs kept: the SM agents had not applied the removals */
	size_t memberships;  /* desired memberships (P members/) replaced by tombstones */
	size_t pending;	     /* the node's tombstones already there, not yet swept */
	size_t view_keys;    /* P bynode/<node> keys deleted */
	int64_t members_rev; /* revision the agents must apply (in each released/ marker); 0: none
			      */
	bool applied;	     /* the agents had applied members_rev when the reclaim ended */
};

/**
 * cluster_node_reclaim_all() - free @node, a node gone for good (ibvfctl
 * cluster reclaim-node): refused while its heartbeat lives unless @force.
 * In this order, each step in txns that (without @force) also check the
 * heartbeat is still absent, so a node that comes back stops the reclaim:
 * 1. its desired memberships become tombstones and its view (bynode/) goes
 *    (cluster_members_reclaim_node(); rule 2: the SM agents take its GUIDs
 *    out of its PKeys);
 * 2. each block goes to quarantine like a returned one, its released/
 *    marker carrying members_rev: no node claims it, nor reserves a GUID of
 *    it, before the quarantine has passed and every live SM agent group
 *    reports members_rev applied (no live agent: held);
 * 3. its reservations are deleted if the agents have applied members_rev
 *    already, else kept (guids_kept) for a later run.
 * Running it again is harmless and finishes what a failed or early run left.
 * Return: 0, -EBUSY (heartbeat alive), -EAGAIN (the node came back or keys
 * kept changing: @err says how far it got), the errors of etcd_txn().
 */
int cluster_node_reclaim_all(struct cluster_blocks *b, const char *node, bool force,
			     struct cluster_reclaim *out, char *err, size_t errlen);

/**
 * cluster_node_reclaim() - cluster_node_reclaim_all() with the blocks and
 * reserved GUIDs freed in *@n_blocks and *@n_guids.
 */
int cluster_node_reclaim(struct cluster_blocks *b, const char *node, bool force, size_t *n_blocks,
			 size_t *n_guids, char *err, size_t errlen);

/** cluster_block_state_name() - "owned", "lost", "foreign", "unlisted". */
const char *cluster_block_state_name(enum cluster_block_state s);

#endif /* IBVF_GUID_BLOCKS_H */
