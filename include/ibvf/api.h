/* SPDX-License-Identifier: MIT */
/*
 * ibvfd local API: JSON-RPC 2.0 (https://www.jsonrpc.org/specification) over
 * a Unix stream socket (default /run/ibvf/ibvfd.sock, mode 0600 in a 0700
 * directory; peers checked with SO_PEERCRED). One JSON object per line
 * ('\n'-terminated, UTF-8), at most IBVF_API_MAX_LINE bytes. Requests on one
 * connection may be pipelined; responses carry the request's "id".
 *
 * GUIDs travel as canonical colon strings "00:02:c9:03:00:00:10:01", PKeys
 * as "0x%04x" strings (membership bit included where a P_Key value is meant,
 * e.g. table entries; tenant requests give the 15-bit key plus "membership").
 *
 * Methods (params → result):
 *
 *   prepare  {owner, pci, pkeys: [{pkey, membership}], guid?, link_state?}
 *            → {guid, pf, vf_index, pci, netdev, rdma_dev, node_guid, port_guid,
 *               lid, sm_lid, port_state, pkeys: [{pkey, membership, index}], state}
 *            Allocates (or, for the same owner, returns) a GUID, programs the
 *            VF, adds the GUID to the PKeys through the SM backend, waits for
 *            the port to be ACTIVE with the PKeys. Idempotent per owner.
 *   commit   {owner} → {guid, state: "handed"}
 *            The CNI moved the VF into the Pod and its checks passed.
 *   release  {owner} → {released: bool, guid?, sm_removal_pending?}
 *            Walks everything back; succeeds when nothing is held (idempotent).
 *            sm_removal_pending: the VF is clean and free, the SM removal failed
 *            and is retried by reconciliation.
 *   release.sm {owner, pci?, guid?} → {held: bool, guid?, sm_removed?}
 *            The SM half of a release while the VF's netdev is still in the
 *            Pod (the CNI DEL, before it moves the netdev back): "releasing"
 *            persisted, the SM removal done and read back; the VF is not
 *            touched and the record stays "releasing" for the plain release,
 *            which skips the removal when this one saw it verified (a note in
 *            memory; a prepare/commit of the owner, a reconciliation pass or
 *            a restart ends it). An ibvfd without it answers
 *            IBVF_RPC_METHOD_NOT_FOUND (docs/api.md, "release.sm").
 *   status   {} → {ready, not_ready: [{check, reason}], version,
 *                  backend: {name, ok, description, error?, checked_ms,
 *                            last_call, last_add, last_remove},
 *                  store: {ok, last_write, last_ok_ms, write_failures},
 *                  pool: {total, allocated, quarantined, free},
 *                  inflight, reconciled, stopping, sm: {batcher counters}}
 *            ready: a prepare can succeed now; false exactly when not_ready is
 *            non-empty (then prepare answers IBVF_RPC_NOT_READY with the same
 *            reasons; IBVF_RPC_SM_ERROR at step "validate" when validate()
 *            failed with a permanent errno of the SM ABI). check is one of "reconcile" (start-up
 * pass not done), "sm" (validate() failed: backend.error), "sm_call" (the last add call failed, not
 * for one bad member, and no validate() passed since), "store" (the last store write failed, or the
 * store cannot be read); reason is one line for people. last_* SM calls are null or {ok, at_ms,
 * kind: "add"|"remove", pkey, guids, errno?, error?}; store.last_write is null or {ok, at_ms,
 *            errno?, error?}. Times (*_ms) are ms since the Unix epoch, 0 =
 *            never. backend.ok is the last validate(), checked_ms its time.
 *   list     {network?, limit?, offset?} →
 *            {owners: [{owner, guid, state, pf, vf_index, pci, pkeys}], total}
 *   gc       {network?, valid: [{container_id, ifname}]} →
 *            {released: [guid...], skipped_busy: [guid...]}
 *            Releases every owner (of @network when given) not in @valid (CNI GC).
 *   audit    {fix?} → {problems, findings: [{kind, severity, guid, pkey?, pci?,
 *                                            detail, fix, fixed}]}
 *            One reconciliation pass (store vs VFs vs SM) now; @fix applies the
 *            fixes for orphans (docs/operations.md). Used by ibvfctl pool audit.
 *   pool.allocate {owner, guid?, pkeys?: [{pkey, membership}]}
 *            → {guid, state, owner, pf, vf_index, pci, pkeys: [{pkey, membership}],
 *               created_ms, updated_ms}
 *            Records a GUID for @owner in the pool, no VF (ibvfctl pool allocate);
 *            the same owner gets its record again. Errors: -32602 (owner, GUID,
 *            PKey refused), -32002 (@guid held, in quarantine, outside the
 *            ranges), -32001 (exhausted), -32008 (an operation on the owner runs).
 *            A record without a VF is mid-flight to reconciliation, which
 *            releases it unless a prepare of the owner takes it up first.
 *   pool.release {guid} → {guid, released: bool, quarantined?, sm_removal_pending?}
 *            Walks the record of @guid back as release does (SM removal, VF
 *            reset, quarantine); released false when nothing holds it
 *            (idempotent). -32008 while an operation on its owner or VF runs.
 *
 * Also: the audit method, list paging (an answer must fit
 * the line limit with 10,000+ owners), and the extra result fields above.
 * docs/api.md describes every method with examples.
 *
 * owner = {container_id, ifname, pod_namespace?, pod_name?, pod_uid?, network?}
 */
#ifndef IBVF_API_H
#define IBVF_API_H

#include <stdbool.h>
#include <string.h>

#define IBVF_API_DEFAULT_SOCKET "/run/ibvf/ibvfd.sock"

/*
 * container_id prefixes ibvfd reserves for its own records (docs/api.md,
 * "Owners"): warm VFs ("ibvf-warm-<pci>"/"warm", engine/warm_vf.c) and the
 * records `ibvfctl pool rebuild` adopts ("ibvf-adopted-<guid>"/"adopted").
 */
#define IBVF_OWNER_WARM_PREFIX	  "ibvf-warm-"
#define IBVF_OWNER_ADOPTED_PREFIX "ibvf-adopted-"

/**
 * ibvf_owner_reserved() - does @container_id start with a prefix ibvfd
 * reserves? prepare, commit, release and pool.allocate refuse such an owner
 * (-32602), so no API caller ever holds anything under it; a DEL of one has
 * nothing to release, and a release request in the spool for one is dropped.
 * Source of the rule: docs/api.md, "Owners".
 */
static inline bool ibvf_owner_reserved(const char *container_id)
{
	return !strncmp(container_id, IBVF_OWNER_WARM_PREFIX, strlen(IBVF_OWNER_WARM_PREFIX)) ||
	       !strncmp(container_id, IBVF_OWNER_ADOPTED_PREFIX, strlen(IBVF_OWNER_ADOPTED_PREFIX));
}
/** Largest request or response line, bytes (including the newline). */
#define IBVF_API_MAX_LINE (1024 * 1024)

/* JSON-RPC 2.0 standard error codes (spec section 5.1). */
#define IBVF_RPC_PARSE_ERROR	  (-32700)
#define IBVF_RPC_INVALID_REQUEST  (-32600)
#define IBVF_RPC_METHOD_NOT_FOUND (-32601)
#define IBVF_RPC_INVALID_PARAMS	  (-32602)
#define IBVF_RPC_INTERNAL_ERROR	  (-32603)

/*
 * ibvf application error codes (JSON-RPC "server error" range). The error
 * object's "data" carries {"errno": N, "step": "<state machine step>"}.
 */
#define IBVF_RPC_POOL_EXHAUSTED (-32001) /* no free GUID */
#define IBVF_RPC_GUID_CONFLICT	(-32002) /* requested GUID held / in quarantine / outside */
#define IBVF_RPC_SM_ERROR	(-32003) /* SM backend refused or is unreachable */
#define IBVF_RPC_VF_ERROR	(-32004) /* VF lookup, netlink or rebind failed */
#define IBVF_RPC_PORT_NOT_READY (-32005) /* port not ACTIVE with the PKey in time */
#define IBVF_RPC_DEADLINE	(-32006) /* the request's overall deadline passed */
#define IBVF_RPC_DENIED		(-32007) /* peer UID not allowed */
#define IBVF_RPC_BUSY		(-32008) /* try again later (VF busy, daemon stopping) */
#define IBVF_RPC_NOT_READY	(-32009) /* daemon up but not ready (status not_ready says why) */
#define IBVF_RPC_VF_IN_USE	(-32010) /* the VF is held by another owner: permanent */

#endif /* IBVF_API_H */
