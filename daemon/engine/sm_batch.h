/* SPDX-License-Identifier: MIT */
/*
 * SM request batcher: coalesces PKey membership adds and removes from many
 * concurrent attaches into few SM backend calls (include/ibvf/sm_backend.h).
 *
 * Requests are queued per (PKey, GUID); a later request for the same pair
 * replaces an earlier one that has not been sent yet (the last word wins,
 * the replaced waiter is told -ECANCELED for an add, 0 for a remove).
 * Batches are self-clocking (issue 17): one SM thread sends a request at
 * once when no call is in flight; requests that arrive while a call is in
 * flight form the next batch, sent as soon as that call returns. An idle
 * SM waits only for requests announced with ibvf_sm_batch_expect() (a
 * burst on its way), for the optional minimum window_ms (ms since the
 * first queued request; 0 by default), or not at all once batch_max
 * requests are queued. Each PKey then costs one remove_members() and one
 * add_members() call per batch_max GUIDs. Failures follow the SM ABI's
 * error contract (include/ibvf/sm_backend.h): a transient one
 * (ibvf_sm_err_is_transient()) is retried with exponential backoff and
 * jitter (bounded attempts, never past the latest waiter's deadline); a
 * member fault (ibvf_sm_err_is_member_fault(), e.g. -EINVAL for one bad
 * GUID) of several requests is split in halves so it does not fail its
 * neighbours; any other error fails the call's requests at once, after one
 * attempt, with the backend's reason.
 *
 * Every backend call (also list/validate through ibvf_sm_batch_lock()) is
 * made under one mutex: the ABI allows one call at a time per instance.
 */
#ifndef IBVF_SM_BATCH_H
#define IBVF_SM_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/sm_backend.h>

struct ibvf_sm_batch;

enum ibvf_sm_req_kind {
	IBVF_SM_REQ_REMOVE = 0,
	IBVF_SM_REQ_ADD = 1,
};

struct ibvf_sm_batch_opts {
	const struct ibvf_sm_ops *ops;
	struct ibvf_sm_backend *backend;
	uint32_t window_ms;	/* optional minimum age of a batch, ms (0: none) */
	uint32_t batch_max;	/* flush at this many queued requests; max GUIDs per call */
	uint32_t retry_base_ms; /* first backoff, ms (default 100) */
	uint32_t retry_max_ms;	/* backoff cap, ms (default 5000) */
	uint32_t max_attempts;	/* per call, >= 1 (default 8) */
	uint32_t hold_max_ms;	/* cap of the hold (ibvf_sm_batch_expect), ms after the
				 * window closed; default 1000 */
	unsigned int seed;	/* jitter seed (tests: reproducible) */
};

/**
 * ibvf_sm_done_fn - completion of one request, called on the SM thread.
 * @status: 0, or the negative errno of the last failed attempt; -ETIMEDOUT
 *          when @deadline passed first; -ECANCELED when a later request for
 *          the same (PKey, GUID) replaced it; -ESHUTDOWN at shutdown.
 * @msg:    one-line reason when @status != 0 (valid during the call).
 */
typedef void (*ibvf_sm_done_fn)(void *arg, int status, const char *msg);

/**
 * One add_members()/remove_members() call as it returned (retries are calls
 * of their own). Source of the rule: issue 14, "status reflects the last SM
 * call".
 */
struct ibvf_sm_call_record {
	uint64_t seq;  /* 1, 2, ...: the number of the call; 0 = no call yet */
	int64_t at_ms; /* when it returned, CLOCK_REALTIME ms since the epoch */
	enum ibvf_sm_req_kind kind;
	uint16_t pkey;	 /* 15-bit key */
	size_t n;	 /* GUIDs in the call */
	int result;	 /* 0, or the backend's negative errno */
	char error[512]; /* the backend's reason when @result < 0 */
};

/** Counters (monotonic since creation). */
struct ibvf_sm_batch_stats {
	uint64_t requests;     /* submitted */
	uint64_t coalesced;    /* replaced by a later request before sending */
	uint64_t flushes;      /* batches sent */
	uint64_t add_calls;    /* add_members() calls, retries included */
	uint64_t remove_calls; /* remove_members() calls, retries included */
	uint64_t retries;
	uint64_t failures;	/* requests completed with an error */
	uint64_t call_ms_total; /* time spent in add/remove calls, ms */
	int last_error;		/* negative errno of the last failed call, 0 if none */
	struct ibvf_sm_call_record last_call;	/* of either kind */
	struct ibvf_sm_call_record last_add;	/* what a prepare needs */
	struct ibvf_sm_call_record last_remove; /* a no-op remove may succeed on a broken SM */
};

/** ibvf_sm_batch_new() - start the SM thread. Return: 0 or -errno. */
int ibvf_sm_batch_new(const struct ibvf_sm_batch_opts *o, struct ibvf_sm_batch **out, char *err,
		      size_t errlen);

/**
 * ibvf_sm_batch_last_call_ns() - how long the calling thread's last backend
 * call (add_members/remove_members, CLOCK_MONOTONIC ns) took; 0 before any.
 * A submit's completion runs on the SM thread right after the call that
 * answered it, so there it is that call's duration (the per-step timing
 * splits the SM step with it, attach_timing.h).
 */
uint64_t ibvf_sm_batch_last_call_ns(void);

/**
 * ibvf_sm_batch_submit() - queue one membership change. @member->guid is a
 * port GUID (host order), @pkey the 15-bit key. @flags is used when the
 * batch creates the partition (adds only; NULL: the backend's configured
 * defaults). Adds of one PKey go in one backend call only with the same
 * membership and flags (UFM's add takes one membership for all its GUIDs).
 * @deadline_ms: CLOCK_MONOTONIC ms after which the request fails with
 * -ETIMEDOUT (0: only the attempt bound applies). @done is called exactly
 * once, on the SM thread, unless this returns an error.
 * Return: 0, -ENOMEM, -ESHUTDOWN.
 */
int ibvf_sm_batch_submit(struct ibvf_sm_batch *b, enum ibvf_sm_req_kind kind, uint16_t pkey,
			 const struct ibvf_sm_member *member,
			 const struct ibvf_sm_pkey_flags *flags, int64_t deadline_ms,
			 ibvf_sm_done_fn done, void *arg);

/**
 * ibvf_sm_batch_submit_owned() - ibvf_sm_batch_submit() with the owner of an
 * add (@owner NULL: unknown; removes ignore it): the attachment's text, e.g.
 * "ns/pod net1 (network)", cut to IBVF_SM_OWNER_MAX bytes of printable ASCII
 * (ibvf_sm_owner_clean()). It reaches a backend that has the optional entry
 * add_members_owned() (SM ABI 2, include/ibvf/sm_backend.h; the cluster
 * backend stores it in etcd); other backends get add_members() as before.
 * Return: as ibvf_sm_batch_submit().
 */
int ibvf_sm_batch_submit_owned(struct ibvf_sm_batch *b, enum ibvf_sm_req_kind kind, uint16_t pkey,
			       const struct ibvf_sm_member *member, const char *owner,
			       const struct ibvf_sm_pkey_flags *flags, int64_t deadline_ms,
			       ibvf_sm_done_fn done, void *arg);

/**
 * ibvf_sm_batch_call() - submit and wait (for worker threads). Return the
 * request's status; @msg gets the reason.
 */
int ibvf_sm_batch_call(struct ibvf_sm_batch *b, enum ibvf_sm_req_kind kind, uint16_t pkey,
		       const struct ibvf_sm_member *member, int64_t deadline_ms, char *msg,
		       size_t msglen);

/** One membership of a shared listing (ibvf_sm_batch_members()). */
struct ibvf_sm_listed {
	uint64_t guid;
	uint16_t pkey; /* 15-bit key */
	enum ibvf_membership membership;
	bool managed; /* as the backend reported it (sm_backend.h) */
};

/** A listing of every PKey's members, sorted by GUID; shared, refcounted. */
struct ibvf_sm_members {
	int status;    /* 0, or list_members' negative errno */
	char err[256]; /* why, when status < 0 */
	struct ibvf_sm_listed *m;
	size_t n, cap;
	int refs;     /* ibvf_sm_batch_members_put() */
	uint64_t seq; /* listings are numbered from 1 */
};

/** Called on the lister thread with a listing (NULL: out of memory); put it back when done. */
typedef void (*ibvf_sm_members_fn)(void *arg, struct ibvf_sm_members *m);

/**
 * ibvf_sm_batch_members_async() - the SM's membership (list_members of
 * every PKey) as seen by a listing that STARTS after this call; @done gets
 * it on the batcher's lister thread. Concurrent callers share one listing,
 * so a burst of prepares or releases costs one or two SM round trips, and
 * no worker waits for it. Return: 0, or -ENOMEM (@done is not called).
 */
int ibvf_sm_batch_members_async(struct ibvf_sm_batch *b, ibvf_sm_members_fn done, void *arg);

/**
 * ibvf_sm_batch_expect_listing() - @delta askers of ibvf_sm_batch_members_async_announced()
 * are on their way (+), or one of them will not ask after all (-). While any are
 * announced and no listing is in flight, waiters for a listing are held (up to
 * hold_max_ms after the oldest asked), so a burst of cold prepares, whose
 * allocations finish at different times, shares one listing (issue 17: 256 cold
 * prepares against a UFM at 200 ms, one list round trip instead of two). Waiters
 * that queued while a listing was in flight are not held: they go when it returns.
 * A lone asker announces only itself and lists at once.
 */
void ibvf_sm_batch_expect_listing(struct ibvf_sm_batch *b, int delta);

/**
 * ibvf_sm_batch_members_async_announced() - ibvf_sm_batch_members_async() for
 * an asker counted by ibvf_sm_batch_expect_listing(): the count drops and the
 * waiter is queued in one step, so the lister never starts without it. Return:
 * 0, or -ENOMEM (@done is not called; the announcement is used up all the same).
 */
int ibvf_sm_batch_members_async_announced(struct ibvf_sm_batch *b, ibvf_sm_members_fn done,
					  void *arg);

/**
 * ibvf_sm_batch_members() - the same, waiting for it (worker threads, rare
 * paths). Return: 0 and *@out (its status says whether the listing
 * worked; give it back with ibvf_sm_batch_members_put()), or -ENOMEM.
 */
int ibvf_sm_batch_members(struct ibvf_sm_batch *b, struct ibvf_sm_members **out);
void ibvf_sm_batch_members_put(struct ibvf_sm_batch *b, struct ibvf_sm_members *m);

/**
 * ibvf_sm_batch_lock()/unlock() - exclusive use of the backend for calls
 * that are not batched (validate, list_members). Return of lock: the ops.
 */
const struct ibvf_sm_ops *ibvf_sm_batch_lock(struct ibvf_sm_batch *b,
					     struct ibvf_sm_backend **backend);
void ibvf_sm_batch_unlock(struct ibvf_sm_batch *b);

/**
 * ibvf_sm_batch_expect() - @delta requests are on their way (+) or arrived /
 * gave up (-). While any are expected and no call is in flight, a batch
 * whose window has closed is held open (up to hold_max_ms after its first
 * request), so a burst of attaches whose earlier steps finish at different
 * times still shares one SM call. A batch that queued while a call was in
 * flight is not held: it goes when the call returns. Without expected
 * requests the window alone decides.
 */
void ibvf_sm_batch_expect(struct ibvf_sm_batch *b, int delta);

/** ibvf_sm_batch_flush_now() - close the current window at once (shutdown, tests). */
void ibvf_sm_batch_flush_now(struct ibvf_sm_batch *b);

/** ibvf_sm_batch_set_window() - change window and batch_max (SIGHUP reload). */
void ibvf_sm_batch_set_window(struct ibvf_sm_batch *b, uint32_t window_ms, uint32_t batch_max);

/** ibvf_sm_batch_get_stats() - a snapshot of the counters. */
void ibvf_sm_batch_get_stats(struct ibvf_sm_batch *b, struct ibvf_sm_batch_stats *st);

/**
 * ibvf_sm_batch_free() - send what is queued (one attempt each, no retries),
 * complete every waiter, stop the thread. NULL is a no-op.
 */
void ibvf_sm_batch_free(struct ibvf_sm_batch *b);

#endif /* IBVF_SM_BATCH_H */
