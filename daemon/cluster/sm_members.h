/* SPDX-License-Identifier: MIT */
/*
 * Cluster membership in etcd (issue 19, docs/cluster.md "The SM agent"): the
 * memberships every node desires, and what the SM agents report applied.
 * Shared by the `cluster` SM backend (the node's writer), the SM agent
 * ibvf-smd (the reader that calls OpenSM or UFM) and `ibvfctl cluster`.
 *
 * Keys under the fabric's prefix P (ending in "/"); PKeys as 4 and GUIDs as
 * 16 lowercase hex digits, so that key order is (PKey, GUID) order:
 *   P members/<pkey>/<guid>  {"membership":"full"|"limited","index0":B,
 *                            "ipoib":B,"node":NAME,"owner":OWNER,"ms":WALL_MS}
 *                            desired by node NAME; a removal replaces the
 *                            value by a tombstone {"removed":true,"node":NAME,
 *                            "ms":WALL_MS}, which the agents delete once every
 *                            live group applied it (so an absent key means
 *                            "not desired, and applied as such")
 *   P smd/agents/<id>        {"id":ID,"group":G,"mode":"opensm"|"ufm",
 *                            "since_ms":WALL_MS} on the agent's lease: a live agent
 *   P smd/leader/<group>     {"id":ID} on the leader's lease (UFM groups only)
 *   P smd/applied/<group>    {"revision":R,"agent":ID,"ms":WALL_MS}: every
 *                            desired change up to etcd revision R is in the
 *                            group's SM
 *   P bynode/<node>/<pkey>/<guid>  the node's own view: the same value as
 *                            its members/ key, written in the same txn (put
 *                            with the desire, deleted with the tombstone), so
 *                            a node's list reads only its own memberships
 *   P bynode/<node>          {"migrated_ms":WALL_MS}: the node's view was
 *                            rebuilt from members/ (keys written before the
 *                            view existed); absent: the node rebuilds it once
 *   P smd/status/<group>/<pkey> {"desired":N,"applied":N,"revision":H,
 *                            "error":TEXT,"agent":ID,"ms":WALL_MS,
 *                            "refused":[{"errno":E,"error":TEXT,
 *                            "members":[{"guid":HEX16,"rev":R},...]},...]}
 *                            "refused": the SM's permanent refusals of the
 *                            pass at revision H, each with the members it
 *                            covers and the mod revision of the desired key
 *                            the agent saw (a node's write of that revision
 *                            failed; a later write is tried again); written
 *                            before the applied revision H
 * A group is one SM: an OpenSM host's own partitions.conf (group = the
 * agent's id) or one UFM (group "ufm" or the configured name, one leader).
 * A change is applied cluster-wide when every group that has a live agent
 * reports an applied revision at least the change's revision.
 */
#ifndef IBVF_SM_MEMBERS_H
#define IBVF_SM_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/types.h>

#include "etcd_client.h"

#define CLUSTER_NAME_MAX  253 /* node, agent and group names */
#define CLUSTER_OWNER_MAX 255 /* an owner ("namespace/pod", CNI container ID) */

/** One desired membership, as a node wrote it. */
struct cluster_member {
	uint16_t pkey; /* 15-bit key */
	uint64_t guid; /* port GUID, host order */
	enum ibvf_membership membership;
	bool index0, ipoib;
	bool removed; /* a tombstone: the node removed it; the agents delete it once applied */
	char node[CLUSTER_NAME_MAX + 1];
	char owner[CLUSTER_OWNER_MAX + 1]; /* "" when the writer did not know it */
	int64_t ms;			   /* wall clock of the write, ms since the epoch */
	int64_t mod_revision;		   /* etcd revision of the write */
};

/** A live agent (smd/agents/) with its group's applied revision. */
struct cluster_agent {
	char id[CLUSTER_NAME_MAX + 1];
	char group[CLUSTER_NAME_MAX + 1];
	char mode[16];		  /* "opensm" or "ufm" */
	int64_t since_ms;	  /* when it registered */
	bool leader;		  /* UFM: holds smd/leader/<group> */
	int64_t applied_revision; /* its group's smd/applied/, 0: none yet */
	int64_t applied_ms;
};

/** One member the SM refused permanently in an agent's pass (smd/status/). */
struct cluster_refusal {
	uint64_t guid;	 /* port GUID, host order */
	int64_t rev;	 /* mod revision of the desired key the agent tried */
	int err;	 /* the SM backend's negative errno (permanent, SM ABI 2) */
	char error[256]; /* the SM's reason */
};

/** Per (group, PKey) status an agent wrote. */
struct cluster_pkey_status {
	char group[CLUSTER_NAME_MAX + 1];
	uint16_t pkey;
	uint32_t desired, applied;
	int64_t revision, ms;
	char error[256];
	struct cluster_refusal *refused; /* malloc'd, n_refused entries */
	size_t n_refused;
};

/** Keys and bytes (key + value) a read returned, for the benchmarks. */
struct cluster_read_stats {
	unsigned long long reads, keys, bytes;
};

/** Everything under P smd/: live agents, applied revisions, per-PKey status. */
struct cluster_sm_state {
	struct cluster_agent *agents;
	size_t n_agents;
	struct cluster_pkey_status *status;
	size_t n_status;
	int64_t revision; /* etcd revision of the read */
};

/**
 * cluster_member_key() - the key of (@pkey, @guid) under @prefix, or of all of
 * @pkey's members (@all_guids), or of every membership (@pkey < 0), into @buf.
 * Return: the key's length, or -ENAMETOOLONG.
 */
int cluster_member_key(const char *prefix, int pkey, uint64_t guid, bool all_guids, char *buf,
		       size_t len);

/**
 * cluster_member_value() - the JSON value of @m (membership, flags, node,
 * owner, ms) as a malloc'd string, or NULL (-ENOMEM).
 */
char *cluster_member_value(const struct cluster_member *m);

/**
 * cluster_member_parse() - a desired membership from one etcd @kv under
 * @prefix (key and value as cluster_member_key()/cluster_member_value()).
 * Return: 0, -EBADMSG (key or value not in this format: @err says which).
 */
int cluster_member_parse(const char *prefix, const struct etcd_kv *kv, struct cluster_member *out,
			 char *err, size_t errlen);

/**
 * cluster_members_list() - every desired membership of @pkey (-1: all),
 * written by @node (NULL: any node), in (PKey, GUID) order, and the etcd
 * revision of the read in *@revision (may be NULL). Keys that do not parse
 * are skipped with a count in *@bad (may be NULL). Tombstones (removed) are
 * included: callers that want the desired set skip them.
 * Return: 0 or etcd_range()'s errors; -ENOMEM.
 */
int cluster_members_list(struct etcd_client *etcd, const char *prefix, int pkey, const char *node,
			 struct cluster_member **out, size_t *n, int64_t *revision, size_t *bad,
			 char *err, size_t errlen);

/**
 * cluster_member_index_key() - the node's view key of (@pkey, @guid) (P
 * bynode/<node>/<pkey>/<guid>), or the prefix of all of @pkey's (@all_guids),
 * or of all the node's (@pkey < 0), into @buf.
 * Return: the key's length, or -ENAMETOOLONG.
 */
int cluster_member_index_key(const char *prefix, const char *node, int pkey, uint64_t guid,
			     bool all_guids, char *buf, size_t len);

/** cluster_member_marker_key() - "P bynode/<node>": the view's migration marker. */
int cluster_member_marker_key(const char *prefix, const char *node, char *buf, size_t len);

/**
 * cluster_members_list_node() - @node's own desired memberships of @pkey (-1:
 * all) from its view (P bynode/<node>/), in (PKey, GUID) order; one range
 * of the node's keys only. Tombstones are never there (deleted with the
 * desire). *@revision, *@bad as cluster_members_list(); @rs (may be NULL)
 * counts what was read.
 * Return: 0 or etcd_range()'s errors; -ENOMEM.
 */
int cluster_members_list_node(struct etcd_client *etcd, const char *prefix, const char *node,
			      int pkey, struct cluster_member **out, size_t *n, int64_t *revision,
			      size_t *bad, struct cluster_read_stats *rs, char *err, size_t errlen);

/**
 * cluster_members_get() - the desired memberships (any node's, tombstones
 * included) of exactly the @n GUIDs @guids in @pkey: point reads in txns
 * of up to 64 ranges, sorted by GUID, absent keys left out. What a node's
 * add reads to see another node's desire, instead of the whole PKey.
 * Return: 0, etcd_txn()'s errors, -ENOMEM.
 */
int cluster_members_get(struct etcd_client *etcd, const char *prefix, uint16_t pkey,
			const uint64_t *guids, size_t n, struct cluster_member **out, size_t *n_out,
			struct cluster_read_stats *rs, char *err, size_t errlen);

/**
 * cluster_sm_refused() - the permanent refusal of (@pkey, @guid) written for
 * the desired key at mod revision @rev by a group with a live agent in @s,
 * or NULL. *@group (may be NULL) gets that group's name.
 */
const struct cluster_refusal *cluster_sm_refused(const struct cluster_sm_state *s, uint16_t pkey,
						 uint64_t guid, int64_t rev, const char **group);

/**
 * cluster_sm_state_read() - the live agents and their groups' applied
 * revisions and per-PKey status, in one range of P smd/.
 * Return: 0, etcd_range()'s errors, -ENOMEM. Free with cluster_sm_state_free().
 */
int cluster_sm_state_read(struct etcd_client *etcd, const char *prefix,
			  struct cluster_sm_state *out, char *err, size_t errlen);

/** cluster_sm_state_free() - free what cluster_sm_state_read() put in @s. */
void cluster_sm_state_free(struct cluster_sm_state *s);

/**
 * cluster_sm_applied() - is every change up to revision @rev applied? True
 * when at least one agent is live and, for every group with a live agent,
 * the group's applied revision is >= @rev. *@why (may be NULL) says which
 * group lags, or that no agent is live.
 */
bool cluster_sm_applied(const struct cluster_sm_state *s, int64_t rev, char *why, size_t whylen);

/**
 * cluster_sm_key() - "P smd/<kind>/<name>" (kind "agents", "leader",
 * "applied", "status"; @name NULL: the kind's prefix) into @buf.
 * Return: length, or -ENAMETOOLONG.
 */
int cluster_sm_key(const char *prefix, const char *kind, const char *name, char *buf, size_t len);

/** cluster_name_ok() - 1..253 bytes of [A-Za-z0-9._-], the agent/group name rule. */
bool cluster_name_ok(const char *s);

/** What cluster_members_reclaim_node() did. */
struct cluster_members_reclaim {
	size_t removed;	  /* the node's desires replaced by tombstones */
	size_t pending;	  /* its tombstones already there (not yet swept by the agents) */
	size_t view_keys; /* P bynode/<node> keys deleted (its view and marker) */
	int64_t revision; /* the SM agents must report this revision applied before the
			   * node's GUIDs are in no PKey; 0: nothing to wait for */
};

/**
 * cluster_members_reclaim_node() - the membership part of reclaiming @node,
 * a node gone for good (ibvfctl cluster reclaim-node; rule 2: a GUID is in
 * exactly the PKeys its owner asked for, and a reclaimed node owns none):
 * each of its desired memberships under P members/ becomes a tombstone (the
 * agents remove it from their SM and then delete it) and its view key goes,
 * RECLAIM_PER_TXN members per txn, each compared at the mod revision read
 * (a key changed meanwhile is read again, up to RECLAIM_ROUNDS times); then
 * P bynode/<node> and everything under P bynode/<node>/ is deleted. With
 * @guard (a heartbeat key, may be NULL), every txn also requires it absent,
 * so a node that comes back stops the reclaim. Idempotent: a second run
 * finds only tombstones (counted in pending) or nothing.
 * Return: 0, -EINVAL (bad node name), -EAGAIN (@guard appeared, or keys kept
 * changing: @err says how far it got), the errors of etcd_range()/etcd_txn().
 */
int cluster_members_reclaim_node(struct etcd_client *etcd, const char *prefix, const char *node,
				 const char *guard, struct cluster_members_reclaim *out, char *err,
				 size_t errlen);

#endif /* IBVF_SM_MEMBERS_H */
