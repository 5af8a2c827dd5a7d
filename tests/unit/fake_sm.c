// SPDX-License-Identifier: MIT
/* In-memory SM backend for unit tests (see fake_sm.h). */
#include "fake_sm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct member {
	uint16_t pkey;
	uint64_t guid;
	int membership;
	bool managed;
};

struct ibvf_sm_backend {
	pthread_mutex_t lock;
	struct member *m;
	size_t n, cap;
	struct fake_sm_ctl ctl;
	int in_call;
	struct member *late; /* adds that timed out, applied by fake_sm_apply_late() */
	size_t n_late;
};

struct ibvf_sm_backend *fake_sm_new(void)
{
	struct ibvf_sm_backend *b = calloc(1, sizeof(*b));

	pthread_mutex_init(&b->lock, NULL);
	b->ctl.fail_errno = -ECONNREFUSED;
	return b;
}

struct fake_sm_ctl *fake_sm_ctl(struct ibvf_sm_backend *b)
{
	return &b->ctl;
}

void fake_sm_lock(struct ibvf_sm_backend *b)
{
	pthread_mutex_lock(&b->lock);
}

void fake_sm_unlock(struct ibvf_sm_backend *b)
{
	pthread_mutex_unlock(&b->lock);
}

static long find(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->m[i].pkey == pkey && b->m[i].guid == guid)
			return (long)i;
	return -1;
}

static void put(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid, int mem, bool managed)
{
	long i = find(b, pkey, guid);

	if (i >= 0) {
		b->m[i].membership = mem;
		return;
	}
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 64;
		b->m = realloc(b->m, b->cap * sizeof(*b->m));
	}
	b->m[b->n++] = (struct member){pkey, guid, mem, managed};
}

static void drop(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid)
{
	long i = find(b, pkey, guid);

	if (i >= 0)
		b->m[i] = b->m[--b->n];
}

int fake_sm_has(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid)
{
	long i;
	int r;

	pthread_mutex_lock(&b->lock);
	i = find(b, pkey, guid);
	r = i >= 0 ? b->m[i].membership : -1;
	pthread_mutex_unlock(&b->lock);
	return r;
}

size_t fake_sm_count(struct ibvf_sm_backend *b)
{
	size_t n;

	pthread_mutex_lock(&b->lock);
	n = b->n;
	pthread_mutex_unlock(&b->lock);
	return n;
}

void fake_sm_put(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid, bool managed)
{
	pthread_mutex_lock(&b->lock);
	put(b, pkey, guid, IBVF_MEMBER_FULL, managed);
	pthread_mutex_unlock(&b->lock);
}

void fake_sm_drop(struct ibvf_sm_backend *b, uint16_t pkey, uint64_t guid)
{
	pthread_mutex_lock(&b->lock);
	drop(b, pkey, guid);
	pthread_mutex_unlock(&b->lock);
}

size_t fake_sm_apply_late(struct ibvf_sm_backend *b)
{
	size_t n;

	pthread_mutex_lock(&b->lock);
	n = b->n_late;
	for (size_t i = 0; i < n; i++)
		put(b, b->late[i].pkey, b->late[i].guid, b->late[i].membership, true);
	b->n_late = 0;
	pthread_mutex_unlock(&b->lock);
	return n;
}

/* Enter a call: latency outside the lock, overlap detection. */
static void enter(struct ibvf_sm_backend *b)
{
	unsigned lat;

	pthread_mutex_lock(&b->lock);
	if (b->in_call++)
		b->ctl.concurrent_call_seen = true;
	lat = b->ctl.latency_ms;
	pthread_mutex_unlock(&b->lock);
	if (lat) {
		struct timespec ts = {lat / 1000, (long)(lat % 1000) * 1000000};

		nanosleep(&ts, NULL);
	}
}

static void leave(struct ibvf_sm_backend *b)
{
	b->in_call--;
}

static int f_init(const char *json, struct ibvf_sm_backend **out, char *err, size_t errlen)
{
	(void)json;
	(void)err;
	(void)errlen;
	*out = fake_sm_new();
	return 0;
}

static void f_fini(struct ibvf_sm_backend *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b->late);
	free(b->m);
	free(b);
}

static int f_validate(struct ibvf_sm_backend *b, char *desc, size_t desclen, char *err,
		      size_t errlen)
{
	int ret = 0;

	enter(b);
	pthread_mutex_lock(&b->lock);
	b->ctl.validate_calls++;
	if (b->ctl.fail_validate) {
		b->ctl.fail_validate--;
		ret = b->ctl.fail_errno;
		snprintf(err, errlen, "fake SM unreachable");
	} else {
		snprintf(desc, desclen, "fake SM 1.0");
	}
	leave(b);
	pthread_mutex_unlock(&b->lock);
	return ret;
}

static int f_add(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m, size_t n,
		 const struct ibvf_sm_pkey_flags *flags, char *err, size_t errlen)
{
	int ret = 0;

	enter(b);
	pthread_mutex_lock(&b->lock);
	b->ctl.add_calls++;
	b->ctl.last_flags_set = flags != NULL;
	if (flags)
		b->ctl.last_flags = *flags;
	if (n > b->ctl.max_batch)
		b->ctl.max_batch = (unsigned)n;
	if (b->ctl.fail_add) {
		b->ctl.fail_add--;
		ret = b->ctl.fail_errno;
		snprintf(err, errlen, "fake SM: injected add failure");
		goto out;
	}
	if (b->ctl.late_add) {
		b->ctl.late_add--;
		b->late = realloc(b->late, (b->n_late + n) * sizeof(*b->late));
		for (size_t i = 0; i < n; i++)
			b->late[b->n_late++] =
				(struct member){pkey, m[i].guid, m[i].membership, true};
		ret = -ETIMEDOUT;
		snprintf(err, errlen, "fake SM: add timed out (applied later)");
		goto out;
	}
	for (size_t i = 0; b->ctl.bad_guid && i < n; i++)
		if (m[i].guid == b->ctl.bad_guid) {
			ret = -EINVAL;
			snprintf(err, errlen, "fake SM: GUID %016llx rejected",
				 (unsigned long long)m[i].guid);
			goto out;
		}
	for (size_t i = 0; i < n; i++)
		put(b, pkey, m[i].guid, m[i].membership, true);
out:
	leave(b);
	pthread_mutex_unlock(&b->lock);
	return ret;
}

static int f_remove(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *g, size_t n,
		    char *err, size_t errlen)
{
	int ret = 0;

	enter(b);
	pthread_mutex_lock(&b->lock);
	b->ctl.remove_calls++;
	if (b->ctl.fail_remove) {
		b->ctl.fail_remove--;
		ret = b->ctl.fail_errno;
		snprintf(err, errlen, "fake SM: injected remove failure");
	} else if (b->ctl.lie_remove) {
		b->ctl.lie_remove--; /* "200 {}": OK, nothing removed */
	} else {
		for (size_t i = 0; i < n; i++)
			drop(b, pkey, g[i]);
	}
	leave(b);
	pthread_mutex_unlock(&b->lock);
	return ret;
}

static int f_list(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg, char *err,
		  size_t errlen)
{
	struct member *copy;
	size_t n;
	int ret = 0;

	enter(b);
	pthread_mutex_lock(&b->lock);
	b->ctl.list_calls++;
	if (b->ctl.fail_list) {
		b->ctl.fail_list--;
		leave(b);
		pthread_mutex_unlock(&b->lock);
		snprintf(err, errlen, "fake SM: injected list failure");
		return b->ctl.fail_errno;
	}
	n = b->n;
	copy = malloc((n ? n : 1) * sizeof(*copy));
	if (n)
		memcpy(copy, b->m, n * sizeof(*copy));
	leave(b);
	pthread_mutex_unlock(&b->lock);
	for (size_t i = 0; i < n && !ret; i++) {
		struct ibvf_sm_member m = {copy[i].guid, (enum ibvf_membership)copy[i].membership};

		if (pkey < 0 || copy[i].pkey == pkey)
			ret = cb(arg, copy[i].pkey, &m, copy[i].managed);
	}
	free(copy);
	return ret;
}

/* The optional entry of SM ABI 2: records the first member's owner, then adds. */
static int f_add_owned(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m,
		       const char *const *owners, size_t n, const struct ibvf_sm_pkey_flags *flags,
		       char *err, size_t errlen)
{
	pthread_mutex_lock(&b->lock);
	snprintf(b->ctl.last_owner, sizeof(b->ctl.last_owner), "%s",
		 owners && n && owners[0] ? owners[0] : "");
	pthread_mutex_unlock(&b->lock);
	return f_add(b, pkey, m, n, flags, err, errlen);
}

const struct ibvf_sm_ops fake_sm_ops = {
	.abi_version = IBVF_SM_ABI_VERSION,
	.struct_size = sizeof(struct ibvf_sm_ops),
	.name = "fake",
	.init = f_init,
	.fini = f_fini,
	.validate = f_validate,
	.add_members = f_add,
	.add_members_owned = f_add_owned,
	.remove_members = f_remove,
	.list_members = f_list,
};
