/* SPDX-License-Identifier: MIT */
/*
 * Persistent GUID pool: hands out fabric-unique, assignable port GUIDs from
 * configured ranges and records who holds each one.
 *
 * Store: SQLite in WAL mode at <state_dir>/pool.db (docs/pool.md describes the
 * schema). Every allocation is committed before it is returned, so a crash at
 * any later point never leads to a duplicate. Safe for several processes on
 * one store (ibvfd, ibvfctl): write transactions are BEGIN IMMEDIATE with a
 * busy timeout.
 *
 * Group commit (sync_full, issue 17): concurrent writes of one struct
 * ibvf_pool share a transaction and one fdatasync() of the WAL; each write
 * call still returns only once its write is on disk (a failed commit or
 * fdatasync() fails every write of its group), except the lazy variants
 * (ibvf_pool_update_lazy() ...), which return once committed. A call that
 * read another thread's not yet durable write waits for it too.
 *
 * Threads: a struct ibvf_pool may be shared by threads. Every function below
 * takes the pool's own (recursive) mutex for the whole call, so each call is
 * atomic within the process and callers do no locking around it (the mutex
 * is not held while a write waits for the disk). The
 * callbacks of ibvf_pool_list() and ibvf_pool_audit() run with that mutex
 * held: they may call the pool again, but must not wait for another thread
 * that uses the same pool. A lookup that must be atomic over several
 * queries is one function (ibvf_pool_find_attach()).
 *
 * GUIDs are host-order u64s (see ibvf/types.h). Times are ms since the Unix
 * epoch (CLOCK_REALTIME), because they must survive restarts.
 */
#ifndef IBVF_GUID_POOL_H
#define IBVF_GUID_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ibvf/api.h>

#include "config.h"
#include "err.h"

#define IBVF_POOL_DB_NAME "pool.db"
#define IBVF_POOL_ID_NAME "pool.id" /* the store's identity, outside it (issue 14) */
/* container_id prefix of the records ibvfctl pool rebuild adopts */
#define IBVF_POOL_ADOPTED_PREFIX IBVF_OWNER_ADOPTED_PREFIX
/* container_id prefix of a warm VF's record (engine/warm_vf.c): "ibvf-warm-<pci, ':' as '-'>",
 * ifname "warm"; no PKeys; "allocated" while it is set up, "port_ready" when warm */
#define IBVF_POOL_WARM_PREFIX IBVF_OWNER_WARM_PREFIX
#define IBVF_POOL_WARM_IFNAME "warm"
#define IBVF_POOL_MAX_PKEYS   8

/** Who holds a GUID: the CNI attachment (container ID + ifname) and its Pod. */
struct ibvf_owner {
	char container_id[128]; /* CNI_CONTAINERID; required */
	char ifname[16];	/* CNI_IFNAME (IFNAMSIZ); required */
	char pod_namespace[64];
	char pod_name[254];
	char pod_uid[64];
	char network[254]; /* NetworkAttachmentDefinition / CNI network name */
};

/** Attach states, in order (the daemon's state machine; docs/pool.md). */
enum ibvf_alloc_state {
	IBVF_ALLOC_ALLOCATED = 0,
	IBVF_ALLOC_PROGRAMMED,
	IBVF_ALLOC_SM_REQUESTED,
	IBVF_ALLOC_SM_CONFIRMED,
	IBVF_ALLOC_PORT_READY,
	IBVF_ALLOC_HANDED,
	IBVF_ALLOC_RELEASING,
	IBVF_ALLOC_QUARANTINED,
	IBVF_ALLOC_STATE_COUNT,
};

/** One allocation record (a row of the store). */
struct ibvf_alloc {
	uint64_t guid;
	enum ibvf_alloc_state state;
	struct ibvf_owner owner;
	char pf[16];			     /* PF netdev, "" when not yet bound to a VF */
	int vf_index;			     /* -1 when not yet bound to a VF */
	char pci[32];			     /* VF PCI address "0000:03:00.2" */
	uint16_t pkeys[IBVF_POOL_MAX_PKEYS]; /* P_Keys with membership bit */
	size_t n_pkeys;
	int64_t created_ms;
	int64_t updated_ms;
	int64_t released_ms; /* 0 unless quarantined */
	bool sm_unseen;	     /* quarantined, and no SM listing since showed it gone */
	/* the VF as it was before this attach (schema v2), restored on release */
	uint64_t prev_node_guid;
	uint64_t prev_port_guid;
	char prev_link_state[8]; /* "auto", "enable", "disable" or "" (unknown) */
};

/**
 * ibvf_alloc_is_warm() - is @a a warm VF's record (engine/warm_vf.c): owner
 * IBVF_POOL_WARM_PREFIX "<pci>" with ifname IBVF_POOL_WARM_IFNAME?
 */
static inline bool ibvf_alloc_is_warm(const struct ibvf_alloc *a)
{
	return !strncmp(a->owner.container_id, IBVF_POOL_WARM_PREFIX,
			sizeof(IBVF_POOL_WARM_PREFIX) - 1) &&
	       !strcmp(a->owner.ifname, IBVF_POOL_WARM_IFNAME);
}

/** A request to allocate. */
struct ibvf_alloc_request {
	struct ibvf_owner owner;
	uint64_t guid;	       /* a specific GUID, or 0 for the lowest free one */
	const char *pf;	       /* optional */
	int vf_index;	       /* -1 if unknown */
	const char *pci;       /* optional */
	const uint16_t *pkeys; /* optional, with membership bit */
	size_t n_pkeys;
	uint64_t prev_node_guid; /* the VF's GUIDs before this attach, or 0 */
	uint64_t prev_port_guid;
	const char *prev_link_state; /* optional */
	bool no_owner_return;	     /* never the owner key's quarantined GUID (issue 15 item 8) */
	/* cluster mode: @guid lies outside the node's blocks and the caller reserved it
	 * cluster-wide in etcd (cluster_pool.h): allowed outside the ranges, never on
	 * the free list, its record deleted (not freed) when its quarantine ends */
	bool reserved;
	/* the new record's state: IBVF_ALLOC_ALLOCATED (0, the default) or
	 * IBVF_ALLOC_SM_REQUESTED (a prepare that asks the SM next: one write less,
	 * walked back the same way; docs/pool.md "Store writes per attach") */
	enum ibvf_alloc_state state;
};

struct ibvf_pool_stats {
	uint64_t total;	      /* assignable GUIDs in the ranges */
	uint64_t allocated;   /* held by an owner (any state but quarantined) */
	uint64_t quarantined; /* released, waiting out the quarantine */
	uint64_t free;	      /* total - allocated - quarantined */
	uint64_t outside;     /* records whose GUID is outside the ranges */
};

struct ibvf_pool_opts {
	const char *state_dir; /* directory of pool.db (checked: owner, no g/o write) */
	const struct ibvf_guid_range *ranges;
	size_t n_ranges;
	uint32_t quarantine_s;
	bool sync_full; /* synchronous=FULL (survives power loss) or NORMAL */
	bool read_only; /* open without writing; a missing store is -ENOENT */
	/* test seam: clock in ms since the epoch; NULL = CLOCK_REALTIME */
	int64_t (*now_ms)(void *arg);
	void *now_arg;
	/*
	 * test seam: called before each COMMIT of a write transaction; a
	 * negative errno fails that write as a store I/O error would (rolled
	 * back, -EIO, recorded in ibvf_pool_health()). NULL: no faults.
	 */
	int (*write_fault)(void *arg);
	/*
	 * test seam (sync_full): called before each fdatasync() of the WAL that
	 * makes a group of commits durable; it may block (to hold writers in
	 * their wait), and a negative errno fails it as a failed fdatasync()
	 * would: every write of the groups it covers fails with -EIO, none is
	 * acknowledged. NULL: no faults. Both seams get @fault_arg.
	 */
	int (*sync_fault)(void *arg);
	void *fault_arg;
};

struct ibvf_pool;

/**
 * ibvf_pool_open() - open (creating if needed and not read-only) the store.
 * A store that is not a valid ibvf pool (corrupt, truncated, foreign, newer
 * schema) is never reset: it is an error that names the file.
 * Return: 0, -ENOENT, -EACCES/-EPERM (state dir permissions), -EIO (corrupt),
 * -EPROTO (schema too new), -ENOMEM.
 */
int ibvf_pool_open(const struct ibvf_pool_opts *opts, struct ibvf_pool **out, char *err,
		   size_t errlen);

/** ibvf_pool_close() - close; NULL is a no-op. */
void ibvf_pool_close(struct ibvf_pool *p);

/**
 * ibvf_pool_add_range() - add the GUIDs [@first, @last] (host order,
 * inclusive) to the ranges of an open read-write pool and to its free list
 * (one write transaction; O(records)): cluster mode's block claimed while
 * ibvfd runs (cluster_pool.h). Records already inside it stay. Return: 0,
 * -EINVAL (read-only or first > last), -ENOMEM, or a store error; on error the
 * ranges are unchanged.
 */
int ibvf_pool_add_range(struct ibvf_pool *p, uint64_t first, uint64_t last, char *err,
			size_t errlen);

/**
 * ibvf_pool_remove_range() - remove the GUIDs [@first, @last] (host order,
 * inclusive) from the ranges of an open read-write pool and its free list,
 * in one write transaction, only if none of them is held, seen in use by
 * another view, or quarantined with its removal from the SM not yet seen,
 * and only if at least @min_free GUIDs stay free: cluster mode's idle block
 * returned to etcd (cluster_pool.h). Quarantined records stay as records
 * outside the ranges until they expire. Return: 0, -EBUSY (@err says what
 * holds it), -ENOSPC (too few would stay free), -EINVAL, -ENOMEM, or a
 * store error; on error the ranges are unchanged.
 */
int ibvf_pool_remove_range(struct ibvf_pool *p, uint64_t first, uint64_t last, uint64_t min_free,
			   char *err, size_t errlen);

/**
 * ibvf_pool_allocate() - allocate a GUID for @req->owner, committed before
 * return. The same owner asking again gets its existing record (idempotent).
 * An explicit @req->guid must be inside the ranges (or @req->reserved), assignable, and not held
 * by another owner (never taken away) nor in quarantine (except the owner
 * key's own, within the quarantine).
 * An owner with a key (pod namespace, pod name, network, ifname; not the
 * container ID) that released a GUID less than the quarantine ago gets that
 * GUID back, unless a VF shows it (issue 15 item 8; docs/pool.md); any other
 * owner never does. Otherwise the lowest free GUID.
 * When no GUID is free, the oldest quarantined one is reused (logged).
 * The new record is at @req->state (allocated or sm_requested).
 * Return: 0, -EINVAL (bad owner/GUID/state), -ERANGE (GUID outside the ranges),
 * -EEXIST (held by another owner, or in use on a VF or in the SM:
 * ibvf_pool_set_in_use()), -EBUSY (in quarantine), -ENOSPC (exhausted),
 * -ESTALE (the store lost records: ibvf_pool_lost()), -EIO (store error).
 */
int ibvf_pool_allocate(struct ibvf_pool *p, const struct ibvf_alloc_request *req,
		       struct ibvf_alloc *out, char *err, size_t errlen);

/**
 * ibvf_pool_allocate_batch() - allocate @n requests in one transaction: all
 * or nothing. @out has @n entries.
 */
int ibvf_pool_allocate_batch(struct ibvf_pool *p, const struct ibvf_alloc_request *reqs, size_t n,
			     struct ibvf_alloc *out, char *err, size_t errlen);

/**
 * ibvf_pool_release() - release @guid into quarantine. Releasing a GUID that
 * is already quarantined or not allocated succeeds (idempotent, returns 1
 * when nothing was done).
 */
int ibvf_pool_release(struct ibvf_pool *p, uint64_t guid, char *err, size_t errlen);

/** ibvf_pool_clock_ms() - the pool's clock (ms since the epoch; a test seam). */
int64_t ibvf_pool_clock_ms(struct ibvf_pool *p);

/**
 * ibvf_pool_set_sm_check() - @on: a released GUID stays in quarantine, even
 * past quarantine_s, until ibvf_pool_quarantine_seen() records an SM listing
 * without it (issue 14: a late SM add must not follow the GUID to its next
 * owner). The daemon turns it on for backends that list membership; off (the
 * default) keeps the time-only quarantine (noop backend, offline tools).
 */
void ibvf_pool_set_sm_check(struct ibvf_pool *p, bool on);

/**
 * ibvf_pool_quarantine_seen() - record what an SM listing taken at @list_ms
 * (pool clock, ms since the epoch) showed for the quarantined @guid:
 * @listed true restarts its quarantine and marks it unseen again; false
 * marks it seen-without when the listing is newer than the release.
 * Return: 0 changed, 1 nothing to do (not quarantined, already seen), <0.
 */
int ibvf_pool_quarantine_seen(struct ibvf_pool *p, uint64_t guid, bool listed, int64_t list_ms,
			      char *err, size_t errlen);

/**
 * ibvf_pool_update() - store state, PF/VF/PCI, PKeys and the pre-attach VF
 * GUIDs/link state of an existing live record.
 */
int ibvf_pool_update(struct ibvf_pool *p, const struct ibvf_alloc *a, char *err, size_t errlen);

/**
 * ibvf_pool_take_over() - hand the live record of @guid that @from
 * (container_id, ifname) holds at @from_state to the owner @to, with @pkeys
 * (membership bit set for full, host order) and the new @state, in one write
 * transaction; GUID, VF binding and pre-attach GUIDs stay. A warm VF's GUID
 * (engine/warm_vf.c, issue 17 item 3) becomes a Pod's this way, so the
 * change of hands is persisted before the SM sees the GUID in a tenant PKey.
 * Return: 0, -ENOENT (no such record of @from at @from_state any more),
 * -EEXIST (@to holds a live record), -EINVAL (owner, state, PKeys), -EIO.
 */
int ibvf_pool_take_over(struct ibvf_pool *p, uint64_t guid, const struct ibvf_owner *from,
			enum ibvf_alloc_state from_state, const struct ibvf_owner *to,
			const uint16_t *pkeys, size_t n_pkeys, enum ibvf_alloc_state state,
			char *err, size_t errlen);

/**
 * ibvf_pool_update_lazy(), ibvf_pool_release_lazy(), ibvf_pool_allocate_lazy()
 * - lazy writes (issue 17; docs/pool.md, "Durability classes"): the same
 * writes as ibvf_pool_update(), ibvf_pool_release() and ibvf_pool_allocate(),
 * committed with their group (in the WAL, so a kill -9 of the process loses
 * nothing), but returned without waiting for the WAL's fdatasync() under
 * sync_full. A pool thread starts that fdatasync() at once, off the caller's
 * path; the next synced write or a checkpoint covers it too (the WAL is
 * append-only: one fdatasync() covers every earlier frame). Any later call
 * that reads the store waits until it is durable, as for any write it may
 * have seen. Only an OS crash or power loss before that can lose it: use
 * them only for a record of a step already done whose loss reconciliation
 * settles the same safe way (the rule and each write's class: docs/pool.md).
 * With sync "normal" they are the ordinary writes. Return: as the synced
 * variant (a failed COMMIT fails it; a later failed fdatasync() is recorded
 * in ibvf_pool_health()).
 */
int ibvf_pool_update_lazy(struct ibvf_pool *p, const struct ibvf_alloc *a, char *err,
			  size_t errlen);
int ibvf_pool_release_lazy(struct ibvf_pool *p, uint64_t guid, char *err, size_t errlen);
int ibvf_pool_allocate_lazy(struct ibvf_pool *p, const struct ibvf_alloc_request *req,
			    struct ibvf_alloc *out, char *err, size_t errlen);

/**
 * ibvf_pool_sync() - wait until every write committed so far (lazy ones
 * included) is durable. Return: 0, or -EIO when an fdatasync() covering them
 * failed (@err set).
 */
int ibvf_pool_sync(struct ibvf_pool *p, char *err, size_t errlen);

/** ibvf_pool_get() - the record of @guid; -ENOENT when there is none. */
int ibvf_pool_get(struct ibvf_pool *p, uint64_t guid, struct ibvf_alloc *out, char *err,
		  size_t errlen);

/** ibvf_pool_find_owner() - the live record of (container_id, ifname); -ENOENT if none. */
int ibvf_pool_find_owner(struct ibvf_pool *p, const char *container_id, const char *ifname,
			 struct ibvf_alloc *out, char *err, size_t errlen);

/**
 * ibvf_pool_find_pci() - the live record bound to the VF at PCI address @pci;
 * -ENOENT if none.
 */
int ibvf_pool_find_pci(struct ibvf_pool *p, const char *pci, struct ibvf_alloc *out, char *err,
		       size_t errlen);

/**
 * ibvf_pool_find_attach() - the two lookups of an attach, under one hold of
 * the pool's mutex: the live record of (@container_id, @ifname) into @mine,
 * else the live record bound to the VF at @pci into @other.
 * Return: 1 (the owner holds @mine), 0 (another owner holds @pci: @other),
 * -ENOENT (neither), or another negative errno (@err set).
 */
int ibvf_pool_find_attach(struct ibvf_pool *p, const char *container_id, const char *ifname,
			  const char *pci, struct ibvf_alloc *mine, struct ibvf_alloc *other,
			  char *err, size_t errlen);

/** Filter for ibvf_pool_list(); empty/zero fields match everything. */
struct ibvf_pool_filter {
	const char *owner; /* substring of container ID, pod namespace/name */
	int pkey;	   /* 15-bit key to match (-1: any) */
	bool include_quarantined;
};

/** ibvf_pool_list() - @cb for each record in GUID order; a non-zero return stops. */
int ibvf_pool_list(struct ibvf_pool *p, const struct ibvf_pool_filter *f,
		   int (*cb)(void *arg, const struct ibvf_alloc *a), void *arg, char *err,
		   size_t errlen);

/** ibvf_pool_stats() - counts over the configured ranges. */
int ibvf_pool_stats(struct ibvf_pool *p, struct ibvf_pool_stats *st, char *err, size_t errlen);

/**
 * ibvf_pool_free_count() - *@n := the free GUIDs of the ranges (stats' free,
 * saturated at UINT64_MAX), from the free list: O(free extents) where
 * ibvf_pool_stats() scans every record; for cluster mode's claimer, which
 * looks often while GUIDs are being used (cluster_pool.c). Return: 0 or a
 * store error (-EIO).
 */
int ibvf_pool_free_count(struct ibvf_pool *p, uint64_t *n, char *err, size_t errlen);

/**
 * ibvf_pool_range_stats() - the counts of range @i alone (0-based, in the
 * pool's range order: the config's, then ranges added while open, e.g.
 * cluster blocks); @st->outside is 0. For per-range gauges (docs/metrics.md).
 * Return: 0, -ENOENT when there is no range @i, or the store's -errno.
 */
int ibvf_pool_range_stats(struct ibvf_pool *p, size_t i, struct ibvf_pool_stats *st, char *err,
			  size_t errlen);

/** Kinds of audit finding. */
enum ibvf_audit_kind {
	IBVF_AUDIT_OUTSIDE_RANGE,      /* record's GUID not in any configured range */
	IBVF_AUDIT_DUPLICATE_OWNER,    /* two live records for one (container, ifname) */
	IBVF_AUDIT_EXPIRED_QUARANTINE, /* quarantine over but not yet freed */
	IBVF_AUDIT_FREE_AND_HELD,      /* GUID in the free list and held: duplicate risk */
	IBVF_AUDIT_LOST,	       /* GUID neither free nor held: it leaked */
	IBVF_AUDIT_INVALID_GUID,       /* 0 or all-ones in the store */
};

struct ibvf_audit_finding {
	enum ibvf_audit_kind kind;
	bool problem; /* true: counts as a problem (exit 1); false: notice */
	uint64_t guid;
	uint64_t count; /* for LOST: how many GUIDs from @guid on */
	char detail[256];
};

/** ibvf_audit_kind_name() - short stable name ("outside-range", ...). */
const char *ibvf_audit_kind_name(enum ibvf_audit_kind k);

/**
 * ibvf_pool_audit() - store-level consistency checks; @cb once per finding.
 * Return: number of findings that are problems, or a negative errno.
 */
int ibvf_pool_audit(struct ibvf_pool *p, int (*cb)(void *arg, const struct ibvf_audit_finding *f),
		    void *arg, char *err, size_t errlen);

/**
 * ibvf_pool_expire() - free GUIDs whose quarantine is over (also done inside
 * every allocation). Return: how many were freed.
 */
int ibvf_pool_expire(struct ibvf_pool *p, char *err, size_t errlen);

/**
 * The outcome of the store's last write transaction, for the daemon's status.
 * Only transactions that changed rows, or failed in SQLite (disk full, I/O
 * error, lock timeout), count; refusals such as -EEXIST or -ENOSPC (pool
 * exhausted) are answers, not store failures. Times are the pool's clock (ms
 * since the epoch), 0 = never.
 */
struct ibvf_pool_health {
	int64_t last_write_ms;	       /* when the last counted write ended */
	int last_write_result;	       /* 0, or its negative errno (-EIO, -EBUSY) */
	char last_error[IBVF_ERR_LEN]; /* the store's message when last_write_result < 0 */
	int64_t last_ok_ms;	       /* the last write that was committed */
	uint64_t write_failures;       /* since open */
	/*
	 * The store lost records (issue 14): it does not match its identity
	 * <state_dir>/pool.id (deleted, replaced, rolled back). No allocation
	 * until ibvf_pool_rebuilt(). @lost_why says what was found.
	 */
	bool lost;
	char lost_why[IBVF_ERR_LEN];
};

/**
 * ibvf_pool_health() - a snapshot of the last write's outcome. Never waits
 * for a transaction in progress (its own lock). Source of the rule: issue 14,
 * "status reflects the last store write".
 */
void ibvf_pool_health(struct ibvf_pool *p, struct ibvf_pool_health *out);

/**
 * ibvf_pool_probe_write() - one small real write (the "write_probe_ms" row of
 * the meta table), so a store whose writes failed is seen to work again
 * without waiting for an attach. Return: 0, -EIO/-EBUSY (store error, @err
 * set), -EROFS (opened read-only).
 */
int ibvf_pool_probe_write(struct ibvf_pool *p, char *err, size_t errlen);

/**
 * ibvf_pool_lost() - has the store lost records? (see ibvf_pool_health.lost);
 * @why (optional) gets the reason. Detected at open by a writer: the store's
 * identity and generation (meta 'store_id', 'generation', bumped by every
 * commit that changed rows) are compared with <state_dir>/pool.id, which
 * every such commit rewrites. A store that is not the one pool.id names, or
 * is at an older generation, or a damaged pool.id, marks the store lost (kept
 * in the store until ibvf_pool_rebuilt()); every allocation is then -ESTALE.
 * Source of the rule: issue 14, "detect a lost or rolled-back store".
 */
bool ibvf_pool_lost(struct ibvf_pool *p, char *why, size_t len);

/**
 * ibvf_pool_adopt() - record a GUID that is in use (on a VF, in the SM) but
 * that no live record holds, as state "handed" for @a's owner (by convention
 * IBVF_POOL_ADOPTED_PREFIX + GUID, ifname "adopted"), PF/VF/PCI and PKeys; a
 * quarantined record of it is replaced, and so is a warm VF's record
 * (IBVF_POOL_WARM_PREFIX) when @a has PKeys: a warm GUID is in no tenant
 * PKey, so one the SM shows in a PKey is a Pod's whose take-over the store
 * lost (issue 17 item 3). Works while the store is lost.
 * Return: 0 adopted, 1 a live record holds it already (nothing done),
 * -ERANGE (not an assignable GUID of the ranges), -EINVAL (owner), -EIO.
 */
int ibvf_pool_adopt(struct ibvf_pool *p, const struct ibvf_alloc *a, char *err, size_t errlen);

/**
 * ibvf_pool_rebuilt() - the store was rebuilt from the VFs and the SM
 * (ibvfctl pool rebuild): clear the lost mark, write pool.id anew, allocate
 * again. Return: 0 or -EIO/-EROFS.
 */
int ibvf_pool_rebuilt(struct ibvf_pool *p, char *err, size_t errlen);

/**
 * ibvf_pool_checkpoint() - copy what the WAL holds into pool.db (a PASSIVE
 * checkpoint: never waits for readers or writers of other processes), so a
 * damaged WAL loses little (issue 14). Return: 0 all copied, 1 some frames
 * left (another process reads; the next checkpoint copies them), -EIO.
 */
int ibvf_pool_checkpoint(struct ibvf_pool *p, char *err, size_t errlen);

/** Views of GUIDs in use other than the store (ibvf_pool_set_in_use()). */
enum ibvf_pool_view {
	IBVF_VIEW_VF = 0, /* GUIDs read back from the node's VFs */
	IBVF_VIEW_SM,	  /* GUIDs in the SM's partition membership */
	IBVF_VIEW_CNI,	  /* GUIDs the CNI plugin's cache records (daemon.cni_cache_dir) */
	IBVF_VIEW_COUNT,
};

/**
 * ibvf_pool_set_in_use() - replace the GUIDs that @view shows in use (those
 * outside the ranges are dropped). Until the next call no allocation hands
 * one of them out: the lowest-free choice and the quarantine reuse skip
 * them, an explicit request for one is -EEXIST. Kept in memory only (the
 * caller, reconciliation, rebuilds it each pass). Source of the rule: issue
 * 14, "allocation never trusts the store alone": a lost or rolled-back store
 * must not re-issue a GUID that VFs or the SM still carry.
 * Return: 0, -EINVAL (@view), -ENOMEM (the previous set is kept).
 */
int ibvf_pool_set_in_use(struct ibvf_pool *p, enum ibvf_pool_view view, const uint64_t *guids,
			 size_t n);

/** ibvf_pool_in_use() - is @guid in a set of ibvf_pool_set_in_use()? */
bool ibvf_pool_in_use(struct ibvf_pool *p, uint64_t guid);

/** ibvf_alloc_state_name() - "allocated", ..., "quarantined". */
const char *ibvf_alloc_state_name(enum ibvf_alloc_state s);

/** ibvf_alloc_state_parse() - inverse of ibvf_alloc_state_name(); -EINVAL if unknown. */
int ibvf_alloc_state_parse(const char *s);

/** ibvf_pool_db_path() - the store file of this pool. */
const char *ibvf_pool_db_path(const struct ibvf_pool *p);

#endif /* IBVF_GUID_POOL_H */
