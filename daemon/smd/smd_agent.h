/* SPDX-License-Identifier: MIT */
/*
 * The SM agent's core (ibvf-smd, issue 19, docs/cluster.md "The SM agent"):
 * turns the desired memberships every node wrote to etcd
 * (daemon/cluster/sm_members.h) into calls of one SM backend (opensm, ufm),
 * and writes back what is applied.
 *
 * One pass (smd_agent_step()): read every desired membership at etcd
 * revision H; if it changed since the last pass (or the SM's state is not
 * known, or reconcile_s passed), diff it with the backend's list_members()
 * and call add_members()/remove_members() per PKey; list again to verify;
 * then write smd/applied/<group> = H and the per-PKey status, and delete
 * the tombstones every live group has applied. Then wait on an etcd watch of
 * P members/ from H + 1: whatever arrives while a pass runs is the next
 * pass's batch (self-clocking). Reconciliation rules: a desired membership
 * missing in the SM is pushed again; a managed membership of a pool-range
 * GUID nobody desires is removed; one outside the pool ranges is only
 * reported; memberships the SM marks unmanaged (the administrator's) are
 * never touched.
 *
 * Election (UFM): the agent registers smd/agents/<id> on a lease; with
 * election on, only the holder of smd/leader/<group> (a create-only key on
 * the same lease) calls the SM, and its applied write is a txn that compares
 * the leader key, so a deposed leader's late write is refused. A standby
 * watches the leader key and takes over when its lease expires (lease TTL).
 */
#ifndef IBVF_SMD_AGENT_H
#define IBVF_SMD_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/sm_backend.h>

#include "etcd_client.h"
#include "guid_blocks.h"

struct smd_agent_opts {
	struct etcd_client *etcd;	    /* borrowed: passes, watches */
	struct etcd_client *etcd_ka;	    /* borrowed: the keepalive thread's own client */
	const char *prefix;		    /* "/ibvf/" */
	const char *id;			    /* this agent */
	const char *group;		    /* the SM it feeds */
	bool election;			    /* one leader per group */
	uint32_t lease_ttl_s;		    /* >= 2 */
	uint32_t reconcile_s;		    /* full pass at least this often */
	uint32_t batch_max;		    /* member changes per pass */
	const struct cluster_range *ranges; /* the pool ranges: ibvf's GUIDs */
	size_t n_ranges;
	const struct ibvf_sm_ops *ops; /* the backend, borrowed */
	struct ibvf_sm_backend *b;
};

/** Counters for status, tests and benchmarks. */
struct smd_agent_stats {
	unsigned long long passes;	  /* passes that called the backend */
	unsigned long long sm_calls;	  /* add/remove/list calls */
	unsigned long long adds, removes; /* members sent */
	unsigned long long failures;	  /* passes that failed */
	unsigned long long tombstones;	  /* tombstones deleted */
	unsigned long long reported;	  /* unwanted non-pool memberships seen (not touched) */
	long long applied_revision;	  /* last applied revision written */
	bool leader;			  /* election: holds the leader key */
	long long leader_since_ms;	  /* monotonic ms when it became leader */
};

struct smd_agent;

/**
 * smd_agent_new() - check @o and make an agent (no etcd call yet).
 * Return: 0, -EINVAL (@err names the option), -ENOMEM.
 */
int smd_agent_new(const struct smd_agent_opts *o, struct smd_agent **out, char *err, size_t errlen);

/**
 * smd_agent_start() - grant the lease, register smd/agents/<id> on it, and
 * start the keepalive thread (every TTL/3).
 * Return: 0 or the etcd client's errors.
 */
int smd_agent_start(struct smd_agent *a, char *err, size_t errlen);

/**
 * smd_agent_step() - one pass (see the top of this file), then wait at most
 * @wait_ms for the next change (a standby waits for the leader key instead).
 * Return: 0 (a pass done, nothing to do, or standby), or the error of the
 * pass (the SM's or etcd's errno; the caller backs off and calls again).
 */
int smd_agent_step(struct smd_agent *a, uint32_t wait_ms, char *err, size_t errlen);

/** smd_agent_get_stats() - copy the counters. */
void smd_agent_get_stats(struct smd_agent *a, struct smd_agent_stats *out);

/**
 * smd_agent_stop() - stop the keepalive thread and revoke the lease (the
 * registration and leadership go at once, so a standby takes over without
 * waiting for the TTL), then free. NULL is a no-op.
 */
void smd_agent_free(struct smd_agent *a);

#endif /* IBVF_SMD_AGENT_H */
