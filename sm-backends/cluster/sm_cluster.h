/* SPDX-License-Identifier: MIT */
/*
 * The `cluster` SM backend (issue 19, docs/cluster.md): a node's membership
 * changes go to etcd as desired memberships (P members/<pkey>/<guid>, with
 * the owner add_members_owned() gives, see daemon/cluster/sm_members.h), each
 * with its key in the node's own view (P bynode/<node>/..., same txn), and a
 * call returns once every live SM agent group reports an applied revision
 * at least the write's, or -ETIMEDOUT (transient: the node's batcher
 * retries) after apply_timeout_ms. An add whose member a group's SM refused
 * permanently at the revision written (smd/status/, "refused") fails at once
 * with the SM's errno, naming the PKey and the SM's reason. list_members()
 * reads only the node's view; the first call of a process rebuilds the view
 * from members/ once unless its marker P bynode/<node> exists (keys written
 * before the view existed).
 *
 * Config (sm.config; ibvfd fills the etcd keys from pool.cluster when they
 * are absent, docs/config.md): endpoints, ca_file, cert_file, key_file, user,
 * user_file, password_file, etcd_timeout_ms (as pool.cluster's), prefix,
 * node, apply_timeout_ms (default 10000), poll_max_ms (default 50: the
 * longest pause when the watch of smd/ fails and the wait polls),
 * index0, ipoib (the flags when the daemon gives none; default false, true).
 */
#ifndef IBVF_SM_CLUSTER_H
#define IBVF_SM_CLUSTER_H

#include <ibvf/sm_backend.h>

extern const struct ibvf_sm_ops cluster_ops;

/** Statistics of one instance, for tests and benchmarks. */
struct sm_cluster_stats {
	unsigned long long txns;	 /* etcd txns written */
	unsigned long long polls;	 /* reads of smd/ while waiting */
	unsigned long long timeouts;	 /* waits that ended in -ETIMEDOUT */
	long long last_revision;	 /* revision the last call waited for */
	unsigned long long skipped_puts; /* members already desired as asked */
	unsigned long long refused;	 /* adds that ended in the SM's permanent refusal */
	unsigned long long reads;	 /* etcd reads of membership keys (ranges, point reads) */
	unsigned long long read_keys;	 /* keys those reads returned */
	unsigned long long read_bytes;	 /* their key + value bytes */
	unsigned long long list_keys;	 /* of them: read by list_members() (reconcile) */
	unsigned long long list_bytes;
	unsigned long long view_migrated; /* view keys put or deleted rebuilding the view */
};

/** sm_cluster_get_stats() - copy the counters of @b. */
void sm_cluster_get_stats(const struct ibvf_sm_backend *b, struct sm_cluster_stats *out);

#endif /* IBVF_SM_CLUSTER_H */
