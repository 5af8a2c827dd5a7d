/* SPDX-License-Identifier: MIT */
/* Internals shared by attach.c (requests) and reconcile.c (reconciliation). */
#ifndef IBVF_ATTACH_INT_H
#define IBVF_ATTACH_INT_H

#include <pthread.h>

#include "attach.h"
#include "err.h"
#include "sm_batch.h"
#include "workq.h"

/* Keys an operation holds while it runs: its owner and its VF. */
struct keyhold {
	char owner[160]; /* container_id '/' ifname, "" = none */
	char pci[32];	 /* "" = none */
	struct keyhold *next;
};

struct ibvf_engine {
	struct ibvf_loop *loop;
	struct ibvf_pool *pool;
	pthread_mutex_t pool_lock; /* the pool is single-threaded */
	const struct ibvf_sm_ops *sm_ops;
	struct ibvf_sm_backend *sm;
	struct ibvf_sm_batch *batch;
	struct ibvf_workq *wq;
	struct ibvf_vf_ops vf;
	struct ibvf_port_ops port;
	struct ibvf_guid_range *ranges;
	size_t n_ranges;

	pthread_mutex_t lock; /* everything below */
	uint32_t prepare_timeout_ms;
	uint32_t port_timeout_ms;
	bool allow_default_pkey;
	uint64_t parked_guid;
	enum ibvf_reconcile_mode reconcile;
	struct keyhold *held; /* keys of running operations */
	struct op *waiting;   /* operations waiting for a key (FIFO) */
	bool sm_ok;
	char sm_desc[128];
	char sm_err[IBVF_ERR_LEN];
	bool reconciled; /* the start-up pass is done */
	bool reconcile_running;
	bool stopping, cancel;
	size_t inflight;
	json_t *last_findings; /* of the last reconciliation pass */
};

void eng_pool_lock(struct ibvf_engine *e);
void eng_pool_unlock(struct ibvf_engine *e);

/** Try to take @k's keys (worker threads); false when a running op holds one. */
bool eng_try_keys(struct ibvf_engine *e, struct keyhold *k);
/** Give them back and let waiting operations start. */
void eng_drop_keys(struct ibvf_engine *e, struct keyhold *k);

bool eng_in_ranges(const struct ibvf_engine *e, uint64_t g);

/**
 * eng_undo() - walk an allocation back (worker thread, blocking): state
 * releasing, SM removal for its PKeys (@sm_touched), VF GUIDs back to the
 * pre-attach/parked value when the VF still holds @a's GUID, pool release.
 * When the SM removal fails the record stays "releasing" (VF unbound from it)
 * for reconciliation to finish, and *@sm_pending is set.
 * Return: 0, or -errno when the VF could not be reset (record kept, @err set).
 */
int eng_undo(struct ibvf_engine *e, struct ibvf_alloc *a, bool sm_touched, bool *sm_pending,
	     char *err, size_t errlen);

/** eng_owner_keyhold() - the keys of owner @o and VF @pci (NULL or "": none). */
void eng_owner_keyhold(const struct ibvf_owner *o, const char *pci, struct keyhold *k);

/**
 * eng_pool_method() - the pool.allocate and pool.release methods of
 * include/ibvf/api.h (api_pool.c), on the loop thread; @reply is called
 * exactly once. Return: false when @method is not one of them (nothing done).
 */
bool eng_pool_method(struct ibvf_engine *e, const char *method, json_t *params,
		     ibvf_reply_fn reply, void *ctx);

#endif /* IBVF_ATTACH_INT_H */
