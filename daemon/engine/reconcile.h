/* SPDX-License-Identifier: MIT */
/*
 * Reconciliation of the three views of an attachment: the GUID pool store,
 * the VFs and the SM's partition membership (reconcile.c describes a pass).
 *
 * It knows nothing of the engine: its caller hands it the pool, the SM
 * batcher, the VF seam and a few operations (struct ibvf_reconcile_ops) in a
 * struct ibvf_reconcile_env, and gets each finding through a callback. The
 * engine calls it; it never calls the engine except through those ops.
 */
#ifndef IBVF_RECONCILE_H
#define IBVF_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "attach_seams.h"
#include "guid_pool.h"
#include "sm_batch.h"

/** What a reconciliation pass may change (docs/operations.md). */
enum ibvf_reconcile_pass {
	IBVF_PASS_DRY_RUN = 0, /* change nothing; report what would be done */
	IBVF_PASS_REPAIR,      /* roll back mid-flight attaches, finish releases, re-push
				* lost memberships; report orphans (daemon default) */
	IBVF_PASS_FIX,	       /* REPAIR + remove orphan SM members, reset orphan VFs */
};

/** One finding of a pass; strings are valid during the callback only. */
struct ibvf_reconcile_finding {
	const char *kind;   /* "mid-flight", "sm-orphan", "store-lost", ... */
	bool problem;	    /* false: a notice */
	uint64_t guid;	    /* 0: none */
	int pkey;	    /* 15-bit key, -1: none */
	const char *pci;    /* "" or NULL: none */
	const char *detail; /* one sentence */
	const char *fix;    /* what a fix does (or "none ...") */
	bool fixed;
};

typedef void (*ibvf_finding_fn)(void *arg, const struct ibvf_reconcile_finding *f);

/**
 * struct ibvf_reconcile_ops - what a pass needs from its caller.
 * @in_ranges:   is @guid in the ibvf GUID ranges?
 * @try_hold:    take the keys of an attachment (@owner, or NULL for none, and
 *               the VF @pci, "" for none) so no operation runs on it; false
 *               when one is running (the pass skips it). *@hold is given back
 *               to @drop.
 * @drop:        give the keys back.
 * @undo:        walk an allocation back (SM removal when @sm_touched, VF
 *               reset, pool release); as eng_undo() in engine_int.h.
 * @parked_guid: the GUID an orphan VF is reset to (0: none).
 * @release_staged: (may be NULL) was a release.sm of @guid answered whose
 *               plain release has not come (the plugin's DEL moves the VF's
 *               netdev back between the two)? Memory only.
 */
struct ibvf_reconcile_ops {
	bool (*in_ranges)(void *ctx, uint64_t guid);
	bool (*try_hold)(void *ctx, const struct ibvf_owner *owner, const char *pci, void **hold);
	void (*drop)(void *ctx, void *hold);
	int (*undo)(void *ctx, struct ibvf_alloc *a, bool sm_touched, bool *sm_pending, char *err,
		    size_t errlen);
	uint64_t (*parked_guid)(void *ctx);
	bool (*release_staged)(void *ctx, uint64_t guid);
};

/** What a pass works on. */
struct ibvf_reconcile_env {
	const struct ibvf_reconcile_ops *ops;
	void *ctx; /* of @ops */
	struct ibvf_pool *pool;
	struct ibvf_sm_batch *batch;
	const struct ibvf_vf_ops *vf; /* list() may be NULL: VFs are not checked */
	bool check_sm;		      /* list the SM's membership */
	bool store_lost; /* the store lost records: no SM orphan is removed (it may be a Pod's) */
	const char
		*cni_cache_dir; /* the CNI plugin's cache (one more in-use view); NULL/"": none */
};

/**
 * ibvf_cni_cache_each() - call @cb with every entry of the ib-sriov CNI
 * plugin's cache in @dir (<dir>/<containerID>-<ifname>, docs/cni.md "Cache
 * format"; daemon and compatibility mode alike), parsed (borrowed). Files
 * are read without blocking and only if regular; unreadable or unparsable
 * ones are skipped. A non-zero return of @cb stops the walk.
 * Return: @cb's non-zero value, 0, -ENOENT when @dir does not exist, or
 * another -errno when it cannot be read.
 */
int ibvf_cni_cache_each(const char *dir, int (*cb)(void *arg, json_t *entry), void *arg);

/**
 * ibvf_reconcile_run() - one pass (blocking; not on the loop thread). @cb
 * (optional) gets each finding; every finding is logged too.
 * Return: number of problems left (found and not fixed), or -errno when the
 * store could not be read (@err set).
 */
int ibvf_reconcile_run(const struct ibvf_reconcile_env *env, enum ibvf_reconcile_pass mode,
		       ibvf_finding_fn cb, void *arg, char *err, size_t errlen);

#endif /* IBVF_RECONCILE_H */
