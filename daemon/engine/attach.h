/* SPDX-License-Identifier: MIT */
/*
 * The attach engine of ibvfd: executes the JSON-RPC methods of
 * include/ibvf/api.h (prepare, commit, release, status, list, gc, audit)
 * and runs reconciliation. Each prepare walks the attach state machine,
 * persisting every step in the GUID pool store before the next one starts:
 *
 *   allocated → programmed → sm_requested → sm_confirmed → port_ready → handed
 *   (pool)      (VF GUIDs +   (persisted     (SM backend    (port ACTIVE,   (commit)
 *                link + rebind) before the SM) confirmed)     PKeys present)
 *
 * and release walks it back: releasing → SM removal → VF GUIDs reset (to the
 * VF's pre-attach GUIDs, or daemon.parked_guid) → pool release (quarantine).
 * A failing step rolls back every earlier one and the caller gets one error.
 *
 * The engine reaches VFs and ports only through the two seams below, so the
 * state machine is unit-tested with fakes and wired in ibvfd to the netlink /
 * ibsim VF drivers and the port watcher. Blocking work runs on a worker pool;
 * SM membership changes go through the batcher (sm_batch.h) without holding
 * a worker while a batch is open. The GUID pool locks itself (guid_pool.h).
 */
#ifndef IBVF_ATTACH_H
#define IBVF_ATTACH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/sm_backend.h>

#include "attach_seams.h"
#include "config.h"
#include "evloop.h"
#include "guid_pool.h"
#include "reconcile.h"

struct ibvf_engine_opts {
	struct ibvf_loop *loop;
	struct ibvf_pool *pool; /* engine takes ownership (closes it) */
	const struct ibvf_sm_ops *sm_ops;
	struct ibvf_sm_backend *sm; /* not owned */
	struct ibvf_vf_ops vf;
	struct ibvf_port_ops port;
	const struct ibvf_config *cfg; /* read at creation and at ibvf_engine_reload() */
	unsigned int seed;	       /* SM retry jitter */
	uint32_t sm_retry_base_ms;     /* 0: default 100 */
	uint32_t sm_max_attempts;      /* 0: default 8 */
	/* hand-overs' WAL checkpoint: at most one per this many ms (0: default 1000) */
	uint32_t checkpoint_ms;
};

struct ibvf_engine;

/**
 * ibvf_reply_fn - completion of one API call, on the loop thread.
 * @result: new reference to the JSON-RPC "result" (NULL on error).
 * @code/@msg/@err_no/@step: the JSON-RPC error (IBVF_RPC_*) when @result is NULL.
 * Return: true if the reply reached a connected client; false when the
 * client went away (a prepare that created an attachment is then rolled back).
 */
typedef bool (*ibvf_reply_fn)(void *ctx, json_t *result, int code, const char *msg, int err_no,
			      const char *step);

int ibvf_engine_new(const struct ibvf_engine_opts *o, struct ibvf_engine **out, char *err,
		    size_t errlen);

/**
 * ibvf_engine_apply_spool() - apply the release requests the CNI plugin left
 * in the spool next to the API socket while ibvfd did not answer its DEL
 * (release_spool.h; issue 15 item 7). Runs before every reconciliation pass
 * (start-up and periodic); blocking, not on the loop thread. A request whose
 * owner is busy or whose release failed stays for the next pass.
 * Return: how many were applied, or a negative errno (spool unreadable).
 */
int ibvf_engine_apply_spool(struct ibvf_engine *e, char *err, size_t errlen);

/**
 * ibvf_engine_call() - start method @method with @params (borrowed) on the
 * loop thread; @reply is called exactly once (possibly before this returns
 * for invalid params). Unknown methods are answered with
 * IBVF_RPC_METHOD_NOT_FOUND.
 */
void ibvf_engine_call(struct ibvf_engine *e, const char *method, json_t *params,
		      ibvf_reply_fn reply, void *ctx);

/**
 * ibvf_engine_reconcile() - run one reconciliation pass now (blocking; not on
 * the loop thread). @findings (optional) gets a JSON array of
 * {kind, severity, guid, pkey?, pci?, detail, fix, fixed}.
 * Return: number of problems left (found and not fixed), or -errno (-EBUSY:
 * another pass is running).
 */
int ibvf_engine_reconcile(struct ibvf_engine *e, enum ibvf_reconcile_pass mode, json_t *findings,
			  char *err, size_t errlen);

/** ibvf_engine_reconcile_async() - queue a reconciliation pass on the workers (timer). */
void ibvf_engine_reconcile_async(struct ibvf_engine *e);

/** ibvf_engine_validate_sm() - call the backend's validate(); updates readiness. Blocking. */
int ibvf_engine_validate_sm(struct ibvf_engine *e);

/** ibvf_engine_ready() - SM validated and start-up reconciliation done. */
bool ibvf_engine_ready(struct ibvf_engine *e);

/**
 * ibvf_engine_readiness() - the readiness the API's status reports ("ready"
 * and "not_ready", the same computation), for /readyz: true when ready,
 * else false with the reasons as one line "check: reason; ..." in @why.
 * While stopping (status is refused with IBVF_RPC_BUSY) it is false with
 * "stopping: ...". Safe from any thread (short locks).
 */
bool ibvf_engine_readiness(struct ibvf_engine *e, char *why, size_t len);

/**
 * ibvf_engine_add_range() - add [@first, @last] (host order, inclusive) to
 * the GUIDs the engine treats as its pool's (reconciliation, previous GUIDs):
 * cluster mode's block claimed while running (cluster_pool.h). Safe from any
 * thread. Return: 0 or -ENOMEM.
 */
int ibvf_engine_add_range(struct ibvf_engine *e, uint64_t first, uint64_t last);

/**
 * A readiness check from outside the engine (cluster mode: out of GUID
 * blocks). Returns true when ready, else false with the reason in @why. It
 * is called under the engine's lock, so it must only read its own state.
 */
typedef bool (*ibvf_engine_ready_fn)(void *arg, char *why, size_t len);

/**
 * ibvf_engine_set_ready_hook() - add @fn (check name @check, e.g. "cluster")
 * to the readiness of every prepare and of status; NULL removes it. A
 * prepare whose allocation finds the pool exhausted while @fn says not ready
 * answers IBVF_RPC_NOT_READY with @fn's reason, not a pool error.
 */
void ibvf_engine_set_ready_hook(struct ibvf_engine *e, const char *check, ibvf_engine_ready_fn fn,
				void *arg);

/**
 * ibvf_engine_reserve_fn - cluster mode's check of a requested GUID outside
 * the node's pool GUIDs (cluster_pool.h), called from prepare before the
 * allocation with @done false: 0 when @guid is now reserved for this node
 * cluster-wide (the pool may take it outside its ranges), -EEXIST (another
 * node owns it: @err names it), -EBUSY (quarantine), -ERANGE (outside the
 * configured ranges), or another negative errno when etcd did not answer
 * (the prepare answers IBVF_RPC_NOT_READY: never an unchecked grant). After
 * a 0, called again with @done true (@err NULL) once the allocation finished
 * either way (until then the reservation is never deleted).
 */
typedef int (*ibvf_engine_reserve_fn)(void *arg, uint64_t guid, bool done, char *err, size_t len);

/** ibvf_engine_set_reserve_hook() - set (NULL: remove) the requested-GUID check. */
void ibvf_engine_set_reserve_hook(struct ibvf_engine *e, ibvf_engine_reserve_fn fn, void *arg);

/**
 * ibvf_engine_remove_range() - remove [@first, @last] (host order, inclusive)
 * from the engine's pool GUIDs (cluster mode: a block returned to etcd, a
 * reservation deleted), splitting a range that holds it. 0 or -ENOMEM.
 */
int ibvf_engine_remove_range(struct ibvf_engine *e, uint64_t first, uint64_t last);

/**
 * ibvf_engine_set_status_hook() - add the object @fn returns (a new reference,
 * or NULL) to status as member @key (e.g. "cluster"); NULL removes it. @fn
 * runs on the loop thread and must only read its own state.
 */
void ibvf_engine_set_status_hook(struct ibvf_engine *e, const char *key, json_t *(*fn)(void *arg),
				 void *arg);

/** ibvf_engine_reconciled() - the first reconciliation pass has finished. */
bool ibvf_engine_reconciled(struct ibvf_engine *e);

/** ibvf_engine_inflight() - API calls not yet answered. */
size_t ibvf_engine_inflight(struct ibvf_engine *e);

/**
 * ibvf_engine_stop() - refuse new calls (IBVF_RPC_BUSY); calls in flight go
 * on. ibvf_engine_cancel() additionally makes them roll back at their next step.
 */
void ibvf_engine_stop(struct ibvf_engine *e);
void ibvf_engine_cancel(struct ibvf_engine *e);

/** ibvf_engine_reload() - take the reloadable settings from @cfg (SIGHUP). */
void ibvf_engine_reload(struct ibvf_engine *e, const struct ibvf_config *cfg);

/** ibvf_engine_sm_stats() - the batcher's counters as JSON (new reference). */
json_t *ibvf_engine_sm_stats(struct ibvf_engine *e);

/** ibvf_engine_free() - wait for workers, free everything it owns. NULL is a no-op. */
void ibvf_engine_free(struct ibvf_engine *e);

/** The parameters of a "prepare" call, validated and normalised. */
struct ibvf_prepare_params {
	struct ibvf_owner owner;
	char pci[32];			     /* lower case, as sysfs names the VF */
	uint16_t pkeys[IBVF_POOL_MAX_PKEYS]; /* 15-bit key | 0x8000 when full */
	size_t n_pkeys;
	uint64_t req_guid;  /* 0: none requested */
	char link_state[8]; /* "auto"/"enable"/"disable", "" unset */
};

/**
 * ibvf_prepare_params_parse() - the checks ibvf_engine_call() applies to the
 * params of "prepare" before any work (include/ibvf/api.h), without an
 * engine: PCI address, PKeys + membership, GUID and link state go through the
 * validators of <ibvf/types.h>. @allow_default_pkey is the engine's
 * allow_default_pkey setting.
 * Return: 0, -EINVAL (the reason in @err), -ENOMEM.
 */
int ibvf_prepare_params_parse(json_t *params, bool allow_default_pkey,
			      struct ibvf_prepare_params *out, char *err, size_t errlen);

#endif /* IBVF_ATTACH_H */
