/* SPDX-License-Identifier: MIT */
/*
 * Internals of the engine, shared by its three parts and by no other file:
 *
 *   api_methods.c  JSON-RPC: method table, params -> struct eng_req, results -> JSON
 *   engine.c       lifecycle, keys (per owner and VF), starting and finishing ops
 *   attach.c       the attach state machine over typed requests, undo
 *
 * Reconciliation (reconcile.h) does not see these: the engine hands it what
 * it needs as a struct ibvf_reconcile_env.
 */
#ifndef IBVF_ENGINE_INT_H
#define IBVF_ENGINE_INT_H

#include <pthread.h>

#include "attach.h"
#include "attach_timing.h"
#include "err.h"
#include "reconcile.h"
#include "sm_batch.h"
#include "workq.h"

/* Keys an operation holds while it runs: its owner and its VF. */
struct keyhold {
	char owner[160]; /* container_id '/' ifname, "" = none */
	char pci[32];	 /* "" = none */
	/* while held: its chains in the engine's key tables (engine.c), under e->lock */
	struct keyhold *o_next, **o_pprev, *p_next, **p_pprev;
};

/* Buckets of each key table (owner, VF): a power of two. */
#define ENG_KEY_BUCKETS 1024

struct ibvf_engine {
	struct ibvf_loop *loop;
	struct ibvf_pool *pool; /* thread-safe (guid_pool.h) */
	const struct ibvf_sm_ops *sm_ops;
	struct ibvf_sm_backend *sm;
	struct ibvf_sm_batch *batch;
	struct ibvf_workq *wq;
	struct ibvf_vf_ops vf;
	struct ibvf_port_ops port;
	struct ibvf_guid_range *ranges; /* under ranges_lock (a leaf lock) */
	size_t n_ranges;
	pthread_mutex_t ranges_lock;
	/* ibvf_engine_set_ready_hook(), under lock */
	const char *ready_check;
	ibvf_engine_ready_fn ready_fn;
	void *ready_arg;
	/* ibvf_engine_set_status_hook(), under lock */
	const char *status_key;
	json_t *(*status_fn)(void *arg);
	void *status_arg;
	/* ibvf_engine_set_reserve_hook(), under lock */
	ibvf_engine_reserve_fn reserve_fn;
	void *reserve_arg;

	pthread_mutex_t lock; /* everything below */
	uint32_t prepare_timeout_ms;
	uint32_t port_timeout_ms;
	bool allow_default_pkey;
	uint64_t parked_guid;
	char cni_cache_dir[PATH_MAX]; /* daemon.cni_cache_dir */
	enum ibvf_reconcile_mode reconcile;
	/* keys of running operations, hashed by owner and by VF (engine.c) */
	struct keyhold *held_owner[ENG_KEY_BUCKETS], *held_pci[ENG_KEY_BUCKETS];
	struct op *waiting; /* operations waiting for a key (FIFO) */
	bool sm_ok;
	int sm_errno; /* last validate()'s error (negative), 0 when it passed */
	char sm_desc[128];
	char sm_err[IBVF_ERR_LEN];
	int64_t sm_checked_ms;	 /* last validate(), CLOCK_REALTIME ms; 0 = never */
	uint64_t sm_checked_seq; /* the batcher's last call number at that validate() */
	bool reconciled;	 /* the start-up pass is done */
	bool reconcile_running;
	char spool_dir[4096]; /* the CNI plugin's release requests (release_spool.h); "" none */
	char socket[4096];    /* the API socket the spool is next to */
	bool stopping, cancel;
	size_t inflight;
	/* eng_checkpoint_soon(): one WAL checkpoint per window after hand-overs */
	struct ibvf_timer *ckpt_timer; /* loop thread; armed from workers (timerfd) */
	uint32_t ckpt_ms;
	bool ckpt_armed;
	size_t vf_inflight;  /* prepare, release, gc, undo not yet answered (warm_vf.c waits) */
	bool warm;	     /* vf.warm: keep free VFs warm (warm_vf.c) */
	struct eng_warm *wm; /* warm_vf.c's state, under lock */
	/* release.sm notes (attach.c, eng_sm_note_*()): memory only, under lock */
	struct eng_sm_note *sm_notes; /* ENG_SM_NOTES slots, a ring */
	size_t sm_note_next;
	uint64_t sm_gen;     /* bumped by what may change SM memberships behind a note */
	uint64_t rec_passes; /* completed reconciliation passes but dry runs (notes' age) */
};

/*
 * A release.sm that saw the SM without the owner's GUID: the plain release
 * that follows skips the SM removal and its read-back while the note is
 * current (same owner and GUID, no bump of sm_gen since). Memory only: a
 * restart forgets every note, so that release removes and verifies again.
 */
#define ENG_SM_NOTES 256
/*
 * A note keeps gc and reconciliation off its VF (eng_sm_note_pending(): its
 * DEL may be moving the netdev back) for fewer than this many completed
 * reconciliation passes (sm.periodic_update_s apart, 5 s by default): a
 * DEL that never comes back (killed, the Pod's netns kept, no retried DEL)
 * does not hold the VF and GUID until a restart; after that its record is
 * finished as any releasing one (gc, the next pass).
 */
#define ENG_SM_NOTE_PASSES 3
struct eng_sm_note {
	char owner[160]; /* eng_owner_key() of the request's owner; "" = free slot */
	uint64_t guid;
	uint64_t gen;	 /* sm_gen when the removal was verified */
	uint64_t passes; /* rec_passes when it was set (ENG_SM_NOTE_PASSES) */
};

enum op_kind {
	OP_PREPARE,
	OP_COMMIT,
	OP_RELEASE,
	OP_STATUS,
	OP_LIST,
	OP_GC,
	OP_AUDIT,
	OP_UNDO, /* internal: roll back a prepare whose reply was not delivered */
};

enum op_phase {
	PH_BEGIN,
	PH_SM_CHECK,  /* prepare: the new GUID's SM membership was read back */
	PH_SM_DONE,   /* SM adds completed: confirm, wait for the port */
	PH_SM_VERIFY, /* release: SM removals done and read back */
	PH_DONE,
};

/* gc: an attachment the runtime still knows (kept). */
struct eng_owner_id {
	char container_id[128];
	char ifname[16];
};

/* A method's parameters, parsed and checked by api_methods.c. */
struct eng_req {
	struct ibvf_owner owner;
	char pci[32];
	uint16_t pkeys[IBVF_POOL_MAX_PKEYS]; /* with membership bit */
	size_t n_pkeys;
	uint64_t req_guid;
	char link_state[8];
	int index0; /* prepare's "index0": 0 absent (backend default), 1 false, 2 true */
	char network[254];
	bool has_network;
	bool fix;		    /* audit */
	bool sm_stage;		    /* release.sm: the SM half only, VF untouched */
	struct eng_owner_id *valid; /* gc */
	size_t n_valid;
	size_t limit, offset; /* list */
};

/*
 * Where list records and audit findings go as they are produced (worker
 * thread): the API layer's result under construction.
 */
struct eng_sink {
	int (*record)(void *arg, const struct ibvf_alloc *a);
	void (*finding)(void *arg, const struct ibvf_reconcile_finding *f);
	void (*free)(void *arg);
	void *arg;
};

/* A GUID list of a gc result. */
struct eng_guids {
	uint64_t *v;
	size_t n, cap;
};

/*
 * Why a prepare cannot succeed now: status's "not_ready" and the refusal of
 * a prepare (IBVF_RPC_NOT_READY) come from this one computation.
 */
#define ENG_MAX_REASONS 5
struct eng_readiness {
	bool ready; /* n == 0 */
	size_t n;
	struct eng_reason {
		const char *check; /* "reconcile", "sm", "sm_call", "store", "cluster" */
		char reason[IBVF_ERR_LEN + 128];
	} r[ENG_MAX_REASONS];
};

/* What status reports, one snapshot. */
struct eng_status {
	struct ibvf_pool_stats pool;
	bool pool_ok; /* @pool could be read */
	struct ibvf_pool_health store;
	const char *sm_name;
	bool sm_ok, reconciled, stopping;
	char sm_desc[128];
	char sm_err[IBVF_ERR_LEN];
	int64_t sm_checked_ms;
	size_t inflight;
	bool warm_on;			   /* vf.warm */
	uint64_t warm_ready, warm_warming; /* eng_warm_counts() */
	struct ibvf_sm_batch_stats sm;
	struct eng_readiness rd;
};

struct op;

/* Completion of an op on the loop thread (api_methods.c): true if delivered. */
typedef bool (*eng_done_fn)(struct op *op);

struct op {
	struct ibvf_engine *e;
	enum op_kind kind;
	enum op_phase phase;
	eng_done_fn done;
	const void *method;  /* api_methods.c's table entry, for @done */
	ibvf_reply_fn reply; /* for @done */
	void *ctx;
	struct keyhold keys;
	bool holds_keys;

	struct eng_req req;
	struct eng_sink sink;
	uint64_t arrived_ns; /* ibvf_mono_ns() at ibvf_engine_call(): metrics */

	/* progress */
	int64_t deadline;
	struct ibvf_alloc a;
	bool created;  /* this op allocated the record */
	bool sm_asked; /* prepare: this op submitted its SM add (rollback removes it) */
	bool warm;     /* prepare: took a warm VF's GUID (no program step; warm_vf.c) */
	struct ibvf_attach_vf vf;
	struct ibvf_port_result port;
	bool expecting;	     /* counted in the batcher's expected requests */
	bool expecting_list; /* counted in the batcher's announced listings (cold prepare) */
	int sm_pending;	     /* under e->lock */
	int sm_status;
	char sm_msg[IBVF_ERR_LEN + 96];
	struct ibvf_sm_members *listed; /* a shared SM listing for PH_SM_CHECK/VERIFY */
	int check_tries;		/* prepare: GUIDs skipped for foreign PKeys */
	/* prepare, commit, release: the reply's "timing" (attach_timing.h) */
	struct ibvf_attach_timing timing;

	/* typed results (code == 0), turned into JSON by api_methods.c */
	bool have_result;
	bool released, sm_removal_pending; /* release */
	bool sm_removed;		   /* release.sm: the SM is seen without the GUID */
	bool sm_noted;			   /* release: a current release.sm note: SM skipped */
	struct eng_guids gc_released, gc_skipped;
	/* status only (api_methods.c allocates it): 6.8 KB that every other op
	 * zeroed and page-faulted in, ~2.5% of ibvfd's CPU in a prepare burst */
	struct eng_status *status;
	size_t total; /* list: records that matched */
	int problems; /* audit */

	/* error */
	int code, err_no;
	char step[32];
	char msg[IBVF_ERR_LEN + 128];

	struct op *next; /* waiting list */
};

/* ---- engine.c ---- */

/** Try to take @k's keys (worker threads); false when a running op holds one. */
/**
 * eng_key_bucket() - the bucket of key @s (an owner key "container_id/ifname"
 * or a PCI address) in the engine's key tables: FNV-1a (32 bit) of its bytes
 * masked to ENG_KEY_BUCKETS. Exported for the unit test that makes keys share
 * a bucket (tests/unit/test_attach.c).
 */
unsigned eng_key_bucket(const char *s);
bool eng_try_keys(struct ibvf_engine *e, struct keyhold *k);
/** Give them back and let waiting operations start. */
void eng_drop_keys(struct ibvf_engine *e, struct keyhold *k);
/** "container_id/ifname", the owner key. */
void eng_owner_key(const struct ibvf_owner *o, char *buf, size_t len);
bool eng_in_ranges(const struct ibvf_engine *e, uint64_t g);
/** The op stops being an expected SM request; true if it was one. */
bool eng_op_arrived(struct op *op);
/** The op will not ask for its announced SM listing (warm, or finished); true if it had one. */
bool eng_op_listing_dropped(struct op *op);
/** Queue @op on the workers (eng_op_run). */
int eng_submit(struct op *op);
/** Loop thread: admit a parsed op (stopping, readiness, keys) and start it or queue it. */
void eng_start(struct op *op);
/** Loop thread: reply, drop keys, start waiting ops. */
void eng_op_finish(void *arg);
void eng_op_free(struct op *op);
bool eng_cancelled(struct ibvf_engine *e);
/**
 * eng_checkpoint_soon() - a hand-over (commit) was written: have the GUID
 * pool's WAL checkpointed into pool.db (ibvf_pool_checkpoint(), issue 14)
 * at the end of the current window of ckpt_ms (default 1000 ms), on a
 * worker, off the commit's path. One checkpoint serves every hand-over of
 * its window, so a burst of commits pays for one, not one each (issue 17).
 * Durability is not affected: with pool.sync "full" the WAL is synced before
 * a write returns; the checkpoint only bounds what a damaged WAL can lose.
 * Any thread.
 */
void eng_checkpoint_soon(struct ibvf_engine *e);
/**
 * eng_reconcile() - one reconciliation pass (blocking, not on the loop
 * thread); @cb (optional) gets each finding. Return: problems left, or -errno.
 */
int eng_reconcile(struct ibvf_engine *e, enum ibvf_reconcile_pass mode, ibvf_finding_fn cb,
		  void *arg, char *err, size_t errlen);
/** The status snapshot of the engine (pool counts are read by the caller). */
void eng_status_snapshot(struct ibvf_engine *e, struct eng_status *st);
/** Add a reason to @rd (ready becomes false); dropped when ENG_MAX_REASONS are there. */
void eng_readiness_add(struct eng_readiness *rd, const char *check, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- attach.c ---- */

/** Worker: run one step of @op. */
void eng_op_run(void *arg);

void eng_set_error(struct op *op, int code, int err_no, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

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

/**
 * eng_sm_notes_new() - the release.sm note table of @e. Return: 0 or -ENOMEM.
 * Freed by eng_sm_notes_free().
 */
int eng_sm_notes_new(struct ibvf_engine *e);
void eng_sm_notes_free(struct ibvf_engine *e);

/**
 * eng_sm_note_drop() - forget @owner's release.sm note: a prepare or commit
 * of that owner may add its membership again (any thread).
 */
void eng_sm_note_drop(struct ibvf_engine *e, const struct ibvf_owner *owner);

/**
 * eng_sm_notes_stale() - every release.sm note stops being current (their
 * releases remove and verify again): a reconciliation pass, an SM backend
 * that failed validation or came back. Notes stay for
 * eng_sm_note_pending().
 */
void eng_sm_notes_stale(struct ibvf_engine *e);

/**
 * eng_sm_note_pending() - has a release.sm of @guid been answered whose
 * plain release has not come yet, fewer than ENG_SM_NOTE_PASSES completed
 * reconciliation passes ago? (Its VF's netdev may still be in the Pod:
 * reconciliation and gc leave the VF alone, reconcile.c, attach.c do_gc();
 * an older note is a DEL that is not coming back.)
 */
bool eng_sm_note_pending(struct ibvf_engine *e, uint64_t guid);

/* ---- warm_vf.c (issue 17 item 3) ---- */

/** eng_warm_new() - the warm VF state of @e (lock, counters). Return: 0 or -ENOMEM. */
int eng_warm_new(struct ibvf_engine *e);
void eng_warm_free(struct ibvf_engine *e);

/**
 * eng_warm_kick() - a warm pass soon, on a worker (any thread): when
 * vf.warm is on, every free VF gets a fresh pool GUID, is rebound and its
 * port seen ACTIVE, one VF at a time and only while no operation runs or
 * waits; when it is off, warm VFs left from before are reset.
 */
void eng_warm_kick(struct ibvf_engine *e);

/**
 * eng_warm_take() - prepare (worker, under the op's keys) found @w, a warm
 * record, on its VF. When the request can use it (vf.warm on, no requested
 * GUID, the link state unchanged, @w ready and the VF carrying its GUID),
 * the record becomes the owner's at sm_requested (persisted before the SM
 * sees it in a tenant PKey): op->a, op->created, op->warm are set. Otherwise
 * @w is quarantined (never given to a tenant later) and the cold path runs.
 * When the VF carries a GUID another live record holds (a Pod's, beside a
 * stale warm row a rolled-back store kept), neither: IBVF_RPC_VF_IN_USE.
 * Return: 1 taken, 0 cold path, <0 error set on @op.
 */
int eng_warm_take(struct op *op, const struct ibvf_alloc *w);

/**
 * eng_warm_release() - release (worker): instead of resetting the VF of @a
 * (SM removal verified) on the DEL's path, record a NEW warm GUID for it at
 * "allocated" and quarantine @a's GUID; the next warm pass programs it.
 * Return: true done, false when warm is off or it could not (the caller
 * resets the VF as before).
 */
bool eng_warm_release(struct ibvf_engine *e, const struct ibvf_alloc *a);

/** eng_warm_counts() - warm VFs ready, and VFs being warmed, as of the last pass. */
void eng_warm_counts(struct ibvf_engine *e, uint64_t *ready, uint64_t *warming);

/* ---- api_methods.c ---- */

/** eng_kind_name() - the method name of @k ("undo" for the internal kind). */
const char *eng_kind_name(enum op_kind k);

/**
 * eng_pool_method() - the pool.allocate and pool.release methods of
 * include/ibvf/api.h (api_pool.c), on the loop thread; @reply is called
 * exactly once. Return: false when @method is not one of them (nothing done).
 */
bool eng_pool_method(struct ibvf_engine *e, const char *method, json_t *params, ibvf_reply_fn reply,
		     void *ctx);

/**
 * eng_parse_owner() - the "owner" object of an API call's @params (api.h:
 * container_id and ifname required and non-empty, no '/' in container_id,
 * and not starting with IBVF_POOL_WARM_PREFIX or IBVF_POOL_ADOPTED_PREFIX,
 * the pseudo-owners of warm and adopted records: guid_pool.h).
 * Return: 0 or -EINVAL with the reason in @err.
 */
int eng_parse_owner(json_t *params, struct ibvf_owner *o, char *err, size_t errlen);

/**
 * eng_parse_pkey_list() - a "pkeys" array [{pkey, membership?}] into
 * @pkeys[IBVF_POOL_MAX_PKEYS] (15-bit key | 0x8000 when full), *@n entries,
 * through the common PKey + membership validator (ibvf_pkey_member()).
 * Return: 0 or -EINVAL (not an array, too many, a bad or repeated PKey).
 */
int eng_parse_pkey_list(json_t *arr, bool allow_default, uint16_t *pkeys, size_t *n, char *err,
			size_t errlen);

#endif /* IBVF_ENGINE_INT_H */
