/* SPDX-License-Identifier: MIT */
/*
 * An in-memory SM backend for unit tests: the ibvf_sm_ops ABI over a table
 * of (PKey, GUID, membership), with call counters, an artificial latency and
 * failure injection. Thread-safe (the batcher and tests call it).
 */
#ifndef IBVF_TEST_FAKE_SM_H
#define IBVF_TEST_FAKE_SM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/sm_backend.h>

extern const struct ibvf_sm_ops fake_sm_ops;

struct fake_sm_ctl {
	unsigned latency_ms; /* per call */
	int fail_add;	     /* next N add calls fail with fail_errno */
	int fail_remove;
	int fail_list;
	int fail_validate;
	int fail_errno;	   /* negative errno, default -ECONNREFUSED */
	uint64_t bad_guid; /* add with this GUID in it fails -EINVAL */
	/*
	 * An SM that lies (issue 14): the next late_add add calls time out
	 * (-ETIMEDOUT) but their members are applied later, by
	 * fake_sm_apply_late(); the next lie_remove remove calls answer 0
	 * without removing.
	 */
	int late_add;
	int lie_remove;
	unsigned add_calls, remove_calls, list_calls, validate_calls;
	unsigned max_batch; /* largest n seen in one call */
	/* the flags of the last add call: NULL, or these (issue 16: index0) */
	bool last_flags_set;
	struct ibvf_sm_pkey_flags last_flags;
	bool concurrent_call_seen; /* two calls overlapped: ABI violation */
	/* the owner of the first member of the last add (add_members_owned(), SM ABI 2) */
	char last_owner[IBVF_SM_OWNER_MAX + 1];
};

/** fake_sm_new() - an instance (what init() would return). */
struct ibvf_sm_backend *fake_sm_new(void);
struct fake_sm_ctl *fake_sm_ctl(struct ibvf_sm_backend *b);
/** fake_sm_has() - membership of @guid in @pkey: -1 absent, else enum ibvf_membership. */
int fake_sm_has(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid);
/** fake_sm_count() - members in all PKeys. */
size_t fake_sm_count(struct ibvf_sm_backend *b);
/** fake_sm_put()/fake_sm_drop() - change membership behind the daemon's back. */
void fake_sm_put(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid, bool managed);
void fake_sm_drop(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid);
/** fake_sm_apply_late() - apply the adds that timed out (late_add). Return: how many members. */
size_t fake_sm_apply_late(struct ibvf_sm_backend *b);
void fake_sm_lock(struct ibvf_sm_backend *b);
void fake_sm_unlock(struct ibvf_sm_backend *b);

#endif
