// SPDX-License-Identifier: MIT
/*
 * The SM agent's core (smd_agent.h): passes from etcd's desired memberships
 * to one SM backend, the applied revision, leader election, tombstones.
 */
#include "smd_agent.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "sm_members.h"

#define SMD_TXN_OPS 100 /* puts or deletes per txn (etcd --max-txn-ops 128) */
/*
 * Adds the SM accepted are applied at once and verified in the SM's list
 * later (issue 19): by the next pass's list, or this long after them when
 * no pass comes.
 */
#define SMD_VERIFY_IDLE_MS 1500

/* One membership the SM lists. */
struct act {
	uint16_t pkey;
	uint64_t guid;
	enum ibvf_membership membership;
	bool managed;
};

/* The last status written for one PKey. */
struct pk_status {
	uint16_t pkey;
	uint32_t desired, applied;
	char error[256];
	char *refused; /* the "refused" array written (compact JSON), NULL: none */
	bool written;
};

struct smd_agent {
	struct smd_agent_opts o;
	char *prefix, *id, *group;
	struct cluster_range *ranges;

	/* lease and keepalive thread */
	int64_t lease;
	pthread_t ka;
	bool ka_running;
	pthread_mutex_t ka_lock;
	pthread_cond_t ka_cond;
	bool ka_stop;
	atomic_bool lease_lost;

	/* election */
	bool leader;
	char leader_val[320];
	int64_t leader_rev; /* revision of the leader key's creation */

	/* what the last pass saw and did */
	struct cluster_member *last;
	size_t n_last;
	bool have_last;
	struct act *actual;
	size_t n_actual;
	bool actual_valid;
	int64_t last_pass_ms;
	bool more; /* the last pass left changes beyond batch_max */

	/* adds the SM accepted: this pass's, and those not yet seen in its list */
	struct act *acc;
	size_t n_acc;
	struct act *pend;
	size_t n_pend;
	int64_t pend_ms;	/* when the first of them was accepted */
	int64_t t_step, t_read; /* this pass: its start, its desired memberships read */

	struct pk_status *st;
	size_t n_st;

	pthread_mutex_t stats_lock;
	struct smd_agent_stats stats;
};

/* ------------------------------------------------------------ helpers -- */

static void sleep_ms(uint32_t ms)
{
	nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L},
		  NULL);
}

static bool in_pool(const struct smd_agent *a, uint64_t guid)
{
	for (size_t i = 0; i < a->o.n_ranges; i++)
		if (guid >= a->ranges[i].start && guid <= a->ranges[i].end)
			return true;
	return false;
}

static int cmp_key(uint16_t p1, uint64_t g1, uint16_t p2, uint64_t g2)
{
	if (p1 != p2)
		return p1 < p2 ? -1 : 1;
	if (g1 != g2)
		return g1 < g2 ? -1 : 1;
	return 0;
}

static int cmp_act(const void *x, const void *y)
{
	const struct act *a = x, *b = y;
	int c = cmp_key(a->pkey, a->guid, b->pkey, b->guid);

	/* managed first: a GUID both in the admin's part and in ibvf's */
	return c ? c : (int)b->managed - (int)a->managed;
}

static const struct act *act_find(const struct smd_agent *a, uint16_t pkey, uint64_t guid)
{
	size_t lo = 0, hi = a->n_actual;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_key(a->actual[mid].pkey, a->actual[mid].guid, pkey, guid);

		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < a->n_actual && a->actual[lo].pkey == pkey && a->actual[lo].guid == guid
		       ? &a->actual[lo]
		       : NULL;
}

static const struct cluster_member *des_find(const struct cluster_member *d, size_t n,
					     uint16_t pkey, uint64_t guid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_key(d[mid].pkey, d[mid].guid, pkey, guid);

		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && d[lo].pkey == pkey && d[lo].guid == guid ? &d[lo] : NULL;
}

struct list_ctx {
	struct act *v;
	size_t n, cap;
};

static int list_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct list_ctx *l = arg;

	if (l->n == l->cap) {
		size_t c = l->cap ? l->cap * 2 : 256;
		struct act *v = realloc(l->v, c * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = c;
	}
	l->v[l->n++] = (struct act){pkey, m->guid, m->membership, managed};
	return 0;
}

/*
 * The verification of the adds the SM accepted in earlier passes, now that
 * its list is in a->actual: one the list lacks is pushed again by the pass
 * that follows (it diffs against that list); the nodes were told at once,
 * their port wait is the final proof.
 */
static void verify_pending(struct smd_agent *a)
{
	size_t lost = 0;
	const struct act *first = NULL;

	for (size_t i = 0; i < a->n_pend; i++) {
		const struct act *p = &a->pend[i], *x = act_find(a, p->pkey, p->guid);

		if (!(x && x->managed && x->membership == p->membership) && !lost++)
			first = p;
	}
	if (lost)
		log_warn("SM agent %s: %zu membership(s) the SM %s accepted are not in its list "
			 "(e.g. GUID 0x%016" PRIx64 " in PKey 0x%04x): pushed again",
			 a->id, lost, a->o.ops->name, first->guid, first->pkey);
	free(a->pend);
	a->pend = NULL;
	a->n_pend = 0;
}

/* The SM's memberships into a->actual (sorted). */
static int list_actual(struct smd_agent *a, char *err, size_t errlen)
{
	struct list_ctx l = {0};
	int ret = a->o.ops->list_members(a->o.b, -1, list_cb, &l, err, errlen);

	pthread_mutex_lock(&a->stats_lock);
	a->stats.sm_calls++;
	pthread_mutex_unlock(&a->stats_lock);
	if (ret) {
		free(l.v);
		a->actual_valid = false;
		if (ret == -ENOMEM)
			ibvf_errf(err, errlen, ret, "out of memory listing the SM");
		return ibvf_err_prefix(err, errlen, ret, "SM %s: list_members", a->o.ops->name);
	}
	if (l.n) /* qsort(NULL, 0) is undefined (C11 7.22.5) */
		qsort(l.v, l.n, sizeof(*l.v), cmp_act);
	free(a->actual);
	a->actual = l.v;
	a->n_actual = l.n;
	a->actual_valid = true;
	verify_pending(a);
	return 0;
}

/* ------------------------------------------------------ lease, leader -- */

static void *ka_main(void *arg)
{
	struct smd_agent *a = arg;
	uint64_t period = (uint64_t)a->o.lease_ttl_s * 1000 / 3;
	char err[IBVF_ERR_LEN];

	pthread_mutex_lock(&a->ka_lock);
	while (!a->ka_stop) {
		struct timespec ts;
		int ret;

		ibvf_mono_deadline_us((int64_t)period * 1000, &ts);
		pthread_cond_timedwait(&a->ka_cond, &a->ka_lock, &ts);
		if (a->ka_stop)
			break;
		pthread_mutex_unlock(&a->ka_lock);
		ret = etcd_lease_keepalive(a->o.etcd_ka, a->lease, NULL, err, sizeof(err));
		pthread_mutex_lock(&a->ka_lock);
		if (ret == -ENOENT) {
			log_err("SM agent %s: lease %" PRIx64 " expired: %s; registering again",
				a->id, (uint64_t)a->lease, err);
			atomic_store(&a->lease_lost, true);
			break;
		}
		if (ret)
			log_warn("SM agent %s: lease keepalive: %s", a->id, err);
	}
	pthread_mutex_unlock(&a->ka_lock);
	return NULL;
}

static void ka_stop(struct smd_agent *a)
{
	if (!a->ka_running)
		return;
	pthread_mutex_lock(&a->ka_lock);
	a->ka_stop = true;
	pthread_cond_signal(&a->ka_cond);
	pthread_mutex_unlock(&a->ka_lock);
	pthread_join(a->ka, NULL);
	a->ka_running = false;
	a->ka_stop = false;
}

static int do_register(struct smd_agent *a, char *err, size_t errlen)
{
	char key[512], *val;
	json_t *o;
	int ret;

	ka_stop(a);
	a->leader = false;
	ret = etcd_lease_grant(a->o.etcd, a->o.lease_ttl_s, 0, &a->lease, NULL, err, errlen);
	if (ret)
		return ibvf_err_prefix(err, errlen, ret, "SM agent %s: lease", a->id);
	cluster_sm_key(a->prefix, "agents", a->id, key, sizeof(key));
	o = json_pack("{s:s,s:s,s:s,s:b,s:I}", "id", a->id, "group", a->group, "mode",
		      a->o.ops->name, "election", a->o.election, "since_ms",
		      (json_int_t)ibvf_wall_ms());
	val = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (!val)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = etcd_put(a->o.etcd, key, 0, val, 0, a->lease, NULL, err, errlen);
	free(val);
	if (ret)
		return ibvf_err_prefix(err, errlen, ret, "SM agent %s: register %s", a->id, key);
	atomic_store(&a->lease_lost, false);
	ret = pthread_create(&a->ka, NULL, ka_main, a);
	if (ret)
		return ibvf_errf(err, errlen, -ret, "keepalive thread: %s", strerror(ret));
	a->ka_running = true;
	log_notice("SM agent %s registered (group %s, %s backend, %s, lease %" PRIx64 " of %u s)",
		   a->id, a->group, a->o.ops->name,
		   a->o.election ? "leader election" : "no election", (uint64_t)a->lease,
		   a->o.lease_ttl_s);
	return 0;
}

int smd_agent_start(struct smd_agent *a, char *err, size_t errlen)
{
	return do_register(a, err, errlen);
}

/*
 * Election: create smd/leader/<group> on our lease if absent. Return 1 when
 * we lead, 0 when another agent does (its id in @who), or an error.
 */
static int try_lead(struct smd_agent *a, char *who, size_t wholen, int64_t *rev, char *err,
		    size_t errlen)
{
	char key[512];
	struct etcd_cmp cmp = {
		.key = key, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL, .number = 0};
	struct etcd_op put = {
		.type = ETCD_OP_PUT, .key = key, .value = a->leader_val, .lease = a->lease};
	struct etcd_op get = {.type = ETCD_OP_RANGE, .key = key};
	struct etcd_txn_result r = {0};
	int ret;

	cluster_sm_key(a->prefix, "leader", a->group, key, sizeof(key));
	snprintf(a->leader_val, sizeof(a->leader_val), "{\"id\":\"%s\",\"lease\":\"%" PRIx64 "\"}",
		 a->id, (uint64_t)a->lease);
	ret = etcd_txn(a->o.etcd, &cmp, 1, &put, 1, &get, 1, &r, err, errlen);
	if (ret)
		return ibvf_err_prefix(err, errlen, ret, "SM agent %s: leader election", a->id);
	*rev = r.revision;
	if (r.succeeded) {
		etcd_txn_result_free(&r);
		return 1;
	}
	who[0] = 0;
	if (r.n_responses && r.responses[0].n_kvs) {
		json_t *o = json_loadb(r.responses[0].kvs[0].value, r.responses[0].kvs[0].value_len,
				       0, NULL);
		const char *id = json_string_value(json_object_get(o, "id"));

		snprintf(who, wholen, "%s", id ? id : "?");
		json_decref(o);
		if (!strncmp(r.responses[0].kvs[0].value, a->leader_val,
			     r.responses[0].kvs[0].value_len) &&
		    r.responses[0].kvs[0].value_len == strlen(a->leader_val)) {
			etcd_txn_result_free(&r);
			return 1; /* ours (same lease) */
		}
	}
	etcd_txn_result_free(&r);
	return 0;
}

struct wake {
	int events;
};

static int wake_cb(void *arg, const struct etcd_event *ev)
{
	struct wake *w = arg;

	(void)ev;
	w->events++;
	return 1;
}

/* Wait up to @ms for a change of [key, key's prefix end) from @from_rev. */
static void wait_change(struct smd_agent *a, const char *key, bool prefix, int64_t from_rev,
			uint32_t ms)
{
	char end[512], err[IBVF_ERR_LEN];
	struct wake w = {0};
	int el = prefix ? etcd_prefix_end(key, strlen(key), end, sizeof(end)) : 0;
	int ret;

	if (el < 0 || !ms)
		return;
	ret = etcd_watch(a->o.etcd, key, 0, prefix ? end : NULL, (size_t)el, from_rev, ms, wake_cb,
			 &w, NULL, err, sizeof(err));
	if (ret == -ERANGE)
		return; /* compacted: the next pass reads everything anyway */
	if (ret) {
		log_debug("SM agent %s: watch %s: %s", a->id, key, err);
		sleep_ms(ms < 200 ? ms : 200);
	}
}

/* ------------------------------------------------------------ a pass -- */

static int push(void **arr, size_t *n, size_t elem, const void *v)
{
	void *p = realloc(*arr, (*n + 1) * elem);

	if (!p)
		return -ENOMEM;
	memcpy((char *)p + *n * elem, v, elem);
	*arr = p;
	(*n)++;
	return 0;
}

/* A permanent refusal of add[off, off + n) of a PKey's work (write_status()). */
struct pk_refusal {
	size_t off, n;
	int err;
	char error[256];
};

struct pk_work {
	uint16_t pkey;
	struct ibvf_sm_member *add;
	int64_t *add_rev; /* mod revision of each add's desired key */
	size_t n_add;
	uint64_t *rm;
	size_t n_rm;
	struct ibvf_sm_pkey_flags flags;
	char fault[256];
	size_t n_faults;
	struct pk_refusal *ref; /* adds the SM refused permanently: to the nodes */
	size_t n_ref;
};

/*
 * Record the SM's permanent refusal (@ret, reason @e) of @n adds of @p from
 * @m on, for the PKey's status: the waiting nodes fail their adds with it.
 * Return: 0, or -ENOMEM.
 */
static int refuse(struct pk_work *p, const struct ibvf_sm_member *m, size_t n, int ret,
		  const char *e)
{
	struct pk_refusal *v = realloc(p->ref, (p->n_ref + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	p->ref = v;
	v[p->n_ref] = (struct pk_refusal){.off = (size_t)(m - p->add), .n = n, .err = ret};
	snprintf(v[p->n_ref].error, sizeof(v[p->n_ref].error), "%s", e[0] ? e : strerror(-ret));
	p->n_ref++;
	return 0;
}

/*
 * Call add or remove for @n members of @p's PKey; split member faults in
 * halves. A permanent refusal of adds (a member fault down to one member,
 * or any other non-transient errno) is recorded in @p (refuse()) and the
 * pass goes on; a transient error, or a remove's permanent one, fails it.
 */
static int sm_call(struct smd_agent *a, bool add, struct pk_work *p, const struct ibvf_sm_member *m,
		   const uint64_t *g, size_t n, const struct ibvf_sm_pkey_flags *flags, char *err,
		   size_t errlen)
{
	uint16_t pkey = p->pkey;
	char e[IBVF_ERR_LEN] = "";
	int ret;

	if (!n)
		return 0;
	ret = add ? a->o.ops->add_members(a->o.b, pkey, m, n, flags, e, sizeof(e))
		  : a->o.ops->remove_members(a->o.b, pkey, g, n, e, sizeof(e));
	pthread_mutex_lock(&a->stats_lock);
	a->stats.sm_calls++;
	if (!ret) {
		if (add)
			a->stats.adds += n;
		else
			a->stats.removes += n;
	}
	pthread_mutex_unlock(&a->stats_lock);
	for (size_t i = 0; add && !ret && i < n; i++) {
		struct act x = {pkey, m[i].guid, m[i].membership, true};

		if (push((void **)&a->acc, &a->n_acc, sizeof(x), &x))
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	if (!ret)
		return 0;
	if (ibvf_sm_err_is_member_fault(ret) && n > 1) {
		size_t h = n / 2;

		ret = sm_call(a, add, p, m, g, h, flags, err, errlen);
		if (!ret)
			ret = sm_call(a, add, p, m ? m + h : NULL, g ? g + h : NULL, n - h, flags,
				      err, errlen);
		return ret;
	}
	if (ibvf_sm_err_is_member_fault(ret)) {
		/* one member at fault: reported in the PKey's status, the pass goes on */
		uint64_t guid = add ? m[0].guid : g[0];

		log_err("SM agent %s: %s GUID 0x%016" PRIx64 " %s PKey 0x%04x refused by %s: %s",
			a->id, add ? "adding" : "removing", guid, add ? "to" : "from", pkey,
			a->o.ops->name, e);
		if (!p->n_faults)
			snprintf(p->fault, sizeof(p->fault), "GUID 0x%016" PRIx64 ": %.200s", guid,
				 e);
		p->n_faults++;
		if (add && refuse(p, m, 1, ret, e))
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		return 0;
	}
	if (add && !ibvf_sm_err_is_transient(ret)) {
		/* permanent for the whole call (e.g. UFM 4xx on the PKey): to the nodes */
		log_err("SM agent %s: adding %zu GUID(s) to PKey 0x%04x refused by %s: %s", a->id,
			n, pkey, a->o.ops->name, e);
		if (!p->n_faults)
			snprintf(p->fault, sizeof(p->fault), "%zu GUID(s): %.200s", n, e);
		p->n_faults += n;
		if (refuse(p, m, n, ret, e))
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		return 0;
	}
	return ibvf_errf(err, errlen, ret, "SM %s: %s %zu member(s) of PKey 0x%04x: %s",
			 a->o.ops->name, add ? "add" : "remove", n, pkey, e);
}

static struct pk_work *pk_get(struct pk_work **w, size_t *n, size_t *cap, uint16_t pkey)
{
	for (size_t i = *n; i-- > 0;)
		if ((*w)[i].pkey == pkey)
			return &(*w)[i];
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct pk_work *v = realloc(*w, c * sizeof(*v));

		if (!v)
			return NULL;
		*w = v;
		*cap = c;
	}
	(*w)[*n] = (struct pk_work){.pkey = pkey};
	return &(*w)[(*n)++];
}

static struct pk_status *st_get(struct smd_agent *a, uint16_t pkey)
{
	for (size_t i = 0; i < a->n_st; i++)
		if (a->st[i].pkey == pkey)
			return &a->st[i];
	if (push((void **)&a->st, &a->n_st, sizeof(*a->st), &(struct pk_status){.pkey = pkey}))
		return NULL;
	return &a->st[a->n_st - 1];
}

#define SMD_REFUSED_MAX 1024 /* members listed in one PKey's "refused" */

/*
 * The "refused" array of PKey @pkey's work in @w (NULL when there is none):
 * one object per refused call, {"errno","error","members":[{"guid","rev"}]}.
 */
static json_t *refused_json(const struct pk_work *w, size_t nw, uint16_t pkey)
{
	json_t *arr = NULL;
	size_t listed = 0;

	for (size_t k = 0; k < nw; k++) {
		if (w[k].pkey != pkey)
			continue;
		for (size_t r = 0; r < w[k].n_ref; r++) {
			const struct pk_refusal *f = &w[k].ref[r];
			json_t *mem = json_array(), *g;

			if (!arr)
				arr = json_array();
			for (size_t j = 0; mem && j < f->n && listed < SMD_REFUSED_MAX;
			     j++, listed++) {
				char hex[20];

				snprintf(hex, sizeof(hex), "%016" PRIx64,
					 w[k].add[f->off + j].guid);
				json_array_append_new(
					mem, json_pack("{s:s,s:I}", "guid", hex, "rev",
						       (json_int_t)w[k].add_rev[f->off + j]));
			}
			g = json_pack("{s:i,s:s,s:o}", "errno", f->err, "error", f->error,
				      "members", mem ? mem : json_array());
			if (arr && g)
				json_array_append_new(arr, g);
		}
	}
	return arr;
}

/*
 * Write the per-PKey status entries that changed, with the pass's revision
 * @H and the SM's permanent refusals ("refused", read by the waiting nodes:
 * sm_members.h). Return: 0, or the first etcd error (logged); entries not
 * written are written again by the next pass.
 */
static int write_status(struct smd_agent *a, const struct cluster_member *d, size_t nd,
			struct pk_work *w, size_t nw, int64_t H)
{
	struct etcd_op ops[SMD_TXN_OPS];
	char keys[SMD_TXN_OPS][600], *vals[SMD_TXN_OPS];
	size_t sidx[SMD_TXN_OPS];
	char err[IBVF_ERR_LEN];
	size_t n = 0;
	int first = 0;

	/* every PKey desired, listed, or worked on */
	for (size_t i = 0; i < nd; i++)
		st_get(a, d[i].pkey);
	for (size_t i = 0; i < a->n_actual; i++)
		if (a->actual[i].managed)
			st_get(a, a->actual[i].pkey);
	for (size_t i = 0; i < nw; i++)
		st_get(a, w[i].pkey);
	for (size_t i = 0; i < a->n_st; i++) {
		struct pk_status *s = &a->st[i], now = {.pkey = s->pkey};
		char name[CLUSTER_NAME_MAX + 8];
		json_t *o, *ref;

		for (size_t k = 0; k < nd; k++) {
			const struct act *x;

			if (d[k].pkey != s->pkey)
				continue;
			now.desired++;
			x = a->actual_valid ? act_find(a, d[k].pkey, d[k].guid) : NULL;
			now.applied += x && x->managed && x->membership == d[k].membership;
		}
		for (size_t k = 0; k < nw; k++)
			if (w[k].pkey == s->pkey && w[k].n_faults)
				snprintf(now.error, sizeof(now.error),
					 "%zu member(s) refused: %.200s", w[k].n_faults,
					 w[k].fault);
		ref = refused_json(w, nw, s->pkey);
		now.refused = ref ? json_dumps(ref, JSON_COMPACT) : NULL;
		if (s->written && now.desired == s->desired && now.applied == s->applied &&
		    !strcmp(now.error, s->error) &&
		    !strcmp(now.refused ? now.refused : "", s->refused ? s->refused : "")) {
			free(now.refused);
			json_decref(ref);
			goto flush;
		}
		snprintf(name, sizeof(name), "%s/%04x", a->group, s->pkey);
		cluster_sm_key(a->prefix, "status", name, keys[n], sizeof(keys[n]));
		o = json_pack("{s:i,s:i,s:s,s:I,s:s,s:I}", "desired", (int)now.desired, "applied",
			      (int)now.applied, "error", now.error, "ms",
			      (json_int_t)ibvf_wall_ms(), "agent", a->id, "revision",
			      (json_int_t)H);
		if (o && ref)
			json_object_set(o, "refused", ref);
		json_decref(ref);
		vals[n] = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(o);
		if (!vals[n]) {
			free(now.refused);
			if (!first)
				first = -ENOMEM;
			goto flush;
		}
		ops[n] = (struct etcd_op){.type = ETCD_OP_PUT, .key = keys[n], .value = vals[n]};
		now.written = true;
		free(s->refused);
		*s = now;
		sidx[n++] = i;
	flush:
		if (n && (n == SMD_TXN_OPS || i + 1 == a->n_st)) {
			struct etcd_txn_result r = {0};
			int ret =
				etcd_txn(a->o.etcd, NULL, 0, ops, n, NULL, 0, &r, err, sizeof(err));

			if (ret) {
				log_warn("SM agent %s: writing PKey status: %s", a->id, err);
				for (size_t k = 0; k < n; k++)
					a->st[sidx[k]].written = false;
				if (!first)
					first = ret;
			}
			etcd_txn_result_free(&r);
			for (size_t k = 0; k < n; k++)
				free(vals[k]);
			n = 0;
		}
	}
	return first;
}

static bool pk_faulted(const struct pk_work *w, size_t nw, uint16_t pkey)
{
	for (size_t k = 0; k < nw; k++)
		if (w[k].pkey == pkey && w[k].n_faults)
			return true;
	return false;
}

/*
 * The adds the SM accepted this pass (a->acc) into the cached list, and into
 * the ones its next list must show (a->pend).
 */
static int accept_adds(struct smd_agent *a, char *err, size_t errlen)
{
	size_t n = a->n_actual;
	struct act *v;

	v = realloc(a->actual, (n + a->n_acc + 1) * sizeof(*v));
	if (!v)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	a->actual = v;
	for (size_t i = 0; i < a->n_acc; i++) {
		struct act *x = (struct act *)act_find(a, a->acc[i].pkey, a->acc[i].guid);

		if (x) {
			x->membership = a->acc[i].membership;
			x->managed = true;
		} else {
			v[n++] = a->acc[i];
		}
	}
	if (n != a->n_actual) {
		a->n_actual = n;
		qsort(a->actual, n, sizeof(*a->actual), cmp_act);
	}
	if (!a->n_pend)
		a->pend_ms = ibvf_mono_ms();
	for (size_t i = 0; i < a->n_acc; i++)
		if (push((void **)&a->pend, &a->n_pend, sizeof(*a->pend), &a->acc[i]))
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	return 0;
}

static int write_applied(struct smd_agent *a, int64_t rev, char *err, size_t errlen);

/*
 * Diff @d (desired at revision @H, sorted) with the SM, call the backend,
 * verify, write applied = @H, then the PKey status (after: the nodes wait
 * for the applied revision, the status is for people).
 */
static int apply(struct smd_agent *a, const struct cluster_member *d, size_t nd, int64_t H,
		 char *err, size_t errlen)
{
	struct pk_work *w = NULL;
	size_t nw = 0, cap = 0, budget = a->o.batch_max, reported = 0, missing = 0, still = 0;
	size_t n_rm = 0, refused = 0;
	const struct act *first_rep = NULL;
	unsigned long long calls0;
	int64_t t_sm;
	int ret = 0;

	pthread_mutex_lock(&a->stats_lock);
	calls0 = a->stats.sm_calls;
	pthread_mutex_unlock(&a->stats_lock);
	a->more = false;
	if (!a->actual_valid && (ret = list_actual(a, err, errlen)))
		return ret;
	for (size_t i = 0; i < nd && !ret; i++) {
		const struct act *x = act_find(a, d[i].pkey, d[i].guid);
		struct ibvf_sm_member m = {d[i].guid, d[i].membership};
		struct pk_work *p;

		if (x && x->managed && x->membership == d[i].membership)
			continue;
		if (!budget) {
			a->more = true;
			break;
		}
		p = pk_get(&w, &nw, &cap, d[i].pkey);
		if (p) {
			size_t na = p->n_add;

			if (push((void **)&p->add_rev, &na, sizeof(d[i].mod_revision),
				 &d[i].mod_revision))
				p = NULL;
		}
		if (!p || push((void **)&p->add, &p->n_add, sizeof(m), &m)) {
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			break;
		}
		if (p->n_add == 1)
			p->flags = (struct ibvf_sm_pkey_flags){d[i].index0, d[i].ipoib};
		budget--;
	}
	for (size_t i = 0; i < a->n_actual && !ret; i++) {
		const struct act *x = &a->actual[i];
		struct pk_work *p;

		if (!x->managed || des_find(d, nd, x->pkey, x->guid))
			continue;
		if (!in_pool(a, x->guid)) {
			if (!reported++)
				first_rep = x;
			continue;
		}
		if (!budget) {
			a->more = true;
			break;
		}
		p = pk_get(&w, &nw, &cap, x->pkey);
		if (!p || push((void **)&p->rm, &p->n_rm, sizeof(x->guid), &x->guid)) {
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			break;
		}
		budget--;
	}
	/* one line when the count changes, not one per GUID and pass (UFM lists every port) */
	if (reported && reported != a->stats.reported)
		log_warn(
			"SM agent %s: %zu managed membership(s) nobody desires are outside the pool "
			"ranges (e.g. GUID 0x%016" PRIx64 " in PKey 0x%04x): reported, not removed",
			a->id, reported, first_rep->guid, first_rep->pkey);
	if (!ret && nw)
		log_info("SM agent %s: pass over %zu desired membership(s): %zu PKey(s) to change",
			 a->id, nd, nw);
	/* removals first: a GUID that moves between PKeys is never in both for long */
	a->n_acc = 0;
	for (size_t i = 0; i < nw && !ret; i++) {
		n_rm += w[i].n_rm;
		ret = sm_call(a, false, &w[i], NULL, w[i].rm, w[i].n_rm, NULL, err, errlen);
	}
	for (size_t i = 0; i < nw && !ret; i++)
		ret = sm_call(a, true, &w[i], w[i].add, NULL, w[i].n_add, &w[i].flags, err, errlen);
	/*
	 * Verify. A removal only in the SM's own list, now: the node quarantines
	 * the GUID once applied is written ([safety]). Adds alone: the SM
	 * accepted them; they go into the cached list at once and are checked
	 * in the SM's list by the next pass, or SMD_VERIFY_IDLE_MS later
	 * (issue 19: one UFM round trip less per pass).
	 */
	if (nw && !ret && n_rm)
		ret = list_actual(a, err, errlen);
	else if (nw && !ret && a->n_acc)
		ret = accept_adds(a, err, errlen);
	if (ret)
		a->actual_valid = false;
	for (size_t i = 0; !ret && i < nd; i++) {
		const struct act *x = act_find(a, d[i].pkey, d[i].guid);

		if (!(x && x->managed && x->membership == d[i].membership) &&
		    !pk_faulted(w, nw, d[i].pkey) && !a->more)
			missing++;
	}
	for (size_t i = 0; !ret && i < nw; i++)
		for (size_t k = 0; k < w[i].n_rm; k++) {
			const struct act *x = act_find(a, w[i].pkey, w[i].rm[k]);

			still += x && x->managed && !w[i].n_faults;
		}
	if (!ret && (missing || still)) {
		a->actual_valid = false;
		ret = ibvf_errf(err, errlen, -EAGAIN,
				"SM %s: after the calls, %zu desired membership(s) not in the SM's "
				"list and %zu removed one(s) still in it (verification)",
				a->o.ops->name, missing, still);
	}
	t_sm = ibvf_mono_ms();
	/*
	 * The nodes read refusals in the status: written before the applied
	 * revision, so a node that sees H applied also sees what H refused.
	 */
	for (size_t i = 0; i < nw; i++)
		refused += w[i].n_ref;
	if (refused) {
		int st = write_status(a, d, nd, w, nw, H);

		if (!ret && st)
			ret = ibvf_errf(err, errlen, st,
					"SM agent %s: the PKey status with the SM's refusals was "
					"not written; applied revision held back",
					a->id);
	}
	if (!ret)
		ret = write_applied(a, H, err, errlen);
	/* where a pass's time goes, on the clock of the UFM simulator's log (bench_cluster) */
	if (!ret && a->stats.sm_calls != calls0)
		log_info("SM agent %s: pass timeline (CLOCK_MONOTONIC ms): start %lld, desired "
			 "read %lld, SM done %lld, applied %lld (revision %lld, %llu SM call(s), "
			 "%zu add(s) to verify)",
			 a->id, (long long)a->t_step, (long long)a->t_read, (long long)t_sm,
			 (long long)ibvf_mono_ms(), (long long)H, a->stats.sm_calls - calls0,
			 a->n_pend);
	if (!refused)
		write_status(a, d, nd, w, nw, H);
	pthread_mutex_lock(&a->stats_lock);
	a->stats.passes++;
	a->stats.reported = reported;
	if (ret)
		a->stats.failures++;
	pthread_mutex_unlock(&a->stats_lock);
	for (size_t i = 0; i < nw; i++) {
		free(w[i].add);
		free(w[i].add_rev);
		free(w[i].rm);
		free(w[i].ref);
	}
	free(w);
	return ret;
}

/* Write smd/applied/<group> = @rev; with election, only while we lead. */
static int write_applied(struct smd_agent *a, int64_t rev, char *err, size_t errlen)
{
	char key[512], lkey[512], val[256];
	struct etcd_cmp cmp = {.key = lkey,
			       .target = ETCD_CMP_VALUE,
			       .result = ETCD_CMP_EQUAL,
			       .value = a->leader_val,
			       .value_len = strlen(a->leader_val)};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = key, .value = val};
	struct etcd_txn_result r = {0};
	int ret;

	cluster_sm_key(a->prefix, "applied", a->group, key, sizeof(key));
	cluster_sm_key(a->prefix, "leader", a->group, lkey, sizeof(lkey));
	snprintf(val, sizeof(val), "{\"agent\":\"%s\",\"ms\":%lld,\"revision\":%lld}", a->id,
		 (long long)ibvf_wall_ms(), (long long)rev);
	ret = etcd_txn(a->o.etcd, &cmp, a->o.election ? 1 : 0, &put, 1, NULL, 0, &r, err, errlen);
	if (ret)
		return ibvf_err_prefix(err, errlen, ret, "SM agent %s: writing %s", a->id, key);
	if (!r.succeeded) {
		etcd_txn_result_free(&r);
		a->leader = false;
		log_warn("SM agent %s: no longer the leader of group %s: applied revision %lld "
			 "not written",
			 a->id, a->group, (long long)rev);
		return ibvf_errf(err, errlen, -EAGAIN, "SM agent %s lost the leadership of %s",
				 a->id, a->group);
	}
	etcd_txn_result_free(&r);
	pthread_mutex_lock(&a->stats_lock);
	a->stats.applied_revision = rev;
	pthread_mutex_unlock(&a->stats_lock);
	return 0;
}

/* Delete the tombstones every live group has applied (compare: unchanged since read). */
static void sweep_tombstones(struct smd_agent *a, const struct cluster_member *all, size_t n)
{
	struct cluster_sm_state s;
	struct etcd_cmp cmp[SMD_TXN_OPS];
	struct etcd_op ops[SMD_TXN_OPS];
	char keys[SMD_TXN_OPS][512], err[IBVF_ERR_LEN];
	int64_t min = INT64_MAX;
	size_t k = 0, done = 0;

	for (size_t i = 0; i < n; i++)
		k += all[i].removed;
	if (!k || cluster_sm_state_read(a->o.etcd, a->prefix, &s, err, sizeof(err)))
		return;
	for (size_t i = 0; i < s.n_agents; i++)
		if (s.agents[i].applied_revision < min)
			min = s.agents[i].applied_revision;
	cluster_sm_state_free(&s);
	k = 0;
	for (size_t i = 0; i < n; i++) {
		if (all[i].removed && all[i].mod_revision <= min) {
			cluster_member_key(a->prefix, all[i].pkey, all[i].guid, false, keys[k],
					   sizeof(keys[k]));
			cmp[k] = (struct etcd_cmp){.key = keys[k],
						   .target = ETCD_CMP_MOD,
						   .result = ETCD_CMP_EQUAL,
						   .number = all[i].mod_revision};
			ops[k] = (struct etcd_op){.type = ETCD_OP_DELETE, .key = keys[k]};
			k++;
		}
		if (k && (k == SMD_TXN_OPS / 2 || i + 1 == n)) {
			struct etcd_txn_result r = {0};

			/* one txn per tombstone set: a compare that fails keeps them all */
			if (!etcd_txn(a->o.etcd, cmp, k, ops, k, NULL, 0, &r, err, sizeof(err)) &&
			    r.succeeded)
				done += k;
			etcd_txn_result_free(&r);
			k = 0;
		}
	}
	pthread_mutex_lock(&a->stats_lock);
	a->stats.tombstones += done;
	pthread_mutex_unlock(&a->stats_lock);
}

/*
 * Did any key under @key (P members/) change after revision @H, when @n keys
 * were there? One keys-only range; *@now gets its revision. On an etcd
 * error: true (the next pass reads everything anyway).
 */
static bool members_changed(struct smd_agent *a, const char *key, int64_t H, size_t n, int64_t *now)
{
	struct etcd_range_result r = {0};
	char end[512], err[IBVF_ERR_LEN];
	int el = etcd_prefix_end(key, strlen(key), end, sizeof(end));
	bool changed;

	if (el < 0 || etcd_range(a->o.etcd, key, 0, end, (size_t)el, 0, true, &r, err, sizeof(err)))
		return true;
	changed = r.n_kvs != n;
	for (size_t i = 0; i < r.n_kvs && !changed; i++)
		changed = r.kvs[i].mod_revision > H;
	*now = r.revision;
	etcd_range_result_free(&r);
	return changed;
}

static bool same_desired(const struct cluster_member *x, size_t nx, const struct cluster_member *y,
			 size_t ny)
{
	if (nx != ny)
		return false;
	for (size_t i = 0; i < nx; i++)
		if (x[i].pkey != y[i].pkey || x[i].guid != y[i].guid ||
		    x[i].membership != y[i].membership || x[i].index0 != y[i].index0 ||
		    x[i].ipoib != y[i].ipoib)
			return false;
	return true;
}

int smd_agent_step(struct smd_agent *a, uint32_t wait_ms, char *err, size_t errlen)
{
	struct cluster_member *all = NULL, *d = NULL;
	size_t n_all = 0, nd = 0;
	int64_t H = 0, max_mod = 0, now = ibvf_mono_ms();
	char key[512];
	int ret;

	if (atomic_load(&a->lease_lost) && (ret = do_register(a, err, errlen)))
		return ret;
	if (a->o.election && !a->leader) {
		char who[CLUSTER_NAME_MAX + 1] = "";
		int64_t rev = 0;

		ret = try_lead(a, who, sizeof(who), &rev, err, errlen);
		if (ret < 0)
			return ret;
		if (!ret) {
			cluster_sm_key(a->prefix, "leader", a->group, key, sizeof(key));
			wait_change(a, key, false, rev + 1, wait_ms);
			return 0;
		}
		a->leader = true;
		a->actual_valid = false; /* a new leader lists the SM before its first change */
		a->have_last = false;
		pthread_mutex_lock(&a->stats_lock);
		a->stats.leader = true;
		a->stats.leader_since_ms = now;
		pthread_mutex_unlock(&a->stats_lock);
		log_notice("SM agent %s leads group %s", a->id, a->group);
	}
	a->t_step = ibvf_mono_ms();
	ret = cluster_members_list(a->o.etcd, a->prefix, -1, NULL, &all, &n_all, &H, NULL, err,
				   errlen);
	a->t_read = ibvf_mono_ms();
	if (ret)
		return ibvf_err_prefix(err, errlen, ret, "SM agent %s: reading desired members",
				       a->id);
	d = calloc(n_all + 1, sizeof(*d));
	if (!d) {
		free(all);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n_all; i++) {
		if (all[i].mod_revision > max_mod)
			max_mod = all[i].mod_revision;
		if (!all[i].removed)
			d[nd++] = all[i];
	}
	if (now - a->last_pass_ms >= (int64_t)a->o.reconcile_s * 1000)
		a->actual_valid = false; /* reconciliation: the SM's own list, not the cache */
	/*
	 * Accepted adds not yet seen in the SM's list: the list of the next pass
	 * that changes something verifies them (and stands for the ufm backend's
	 * PKey read), or a list of its own once SMD_VERIFY_IDLE_MS have passed.
	 */
	if (a->n_pend && (a->t_read - a->pend_ms >= SMD_VERIFY_IDLE_MS || !a->have_last ||
			  !same_desired(d, nd, a->last, a->n_last)))
		a->actual_valid = false;
	if (!a->have_last || !a->actual_valid || a->more ||
	    !same_desired(d, nd, a->last, a->n_last)) {
		ret = apply(a, d, nd, H, err, errlen);
		if (ret)
			goto out;
		free(a->last);
		a->last = d;
		a->n_last = nd;
		d = NULL;
		a->have_last = true;
		a->last_pass_ms = now;
	} else if (max_mod > a->stats.applied_revision) {
		/* only tombstones of memberships the SM no longer has: applied as they are */
		ret = write_applied(a, H, err, errlen);
	}
	if (!ret)
		sweep_tombstones(a, all, n_all);
	if (!ret && !a->more) {
		int64_t now_rev = H;

		cluster_member_key(a->prefix, -1, 0, false, key, sizeof(key));
		/*
		 * Watch from the current revision, past this pass's own writes: etcd
		 * serves a watch that starts in the past from its 100 ms catch-up
		 * loop, which would add up to 100 ms to every change. A member
		 * change since H is seen by the keys-only read instead.
		 */
		if (a->n_pend) {
			int64_t left = a->pend_ms + SMD_VERIFY_IDLE_MS - ibvf_mono_ms();

			if (left < (int64_t)wait_ms)
				wait_ms = left > 0 ? (uint32_t)left : 0;
		}
		if (!members_changed(a, key, H, n_all, &now_rev))
			wait_change(a, key, true, now_rev + 1, wait_ms);
	}
out:
	free(d);
	free(all);
	return ret;
}

/* ------------------------------------------------------------- life -- */

int smd_agent_new(const struct smd_agent_opts *o, struct smd_agent **out, char *err, size_t errlen)
{
	struct smd_agent *a;

	*out = NULL;
	if (!o->etcd || !o->etcd_ka || !o->ops || !o->b)
		return ibvf_errf(err, errlen, -EINVAL, "SM agent: no etcd client or backend");
	if (!o->prefix || !*o->prefix || o->prefix[strlen(o->prefix) - 1] != '/')
		return ibvf_errf(err, errlen, -EINVAL, "SM agent: prefix must end in '/'");
	if (!cluster_name_ok(o->id) || !cluster_name_ok(o->group))
		return ibvf_errf(err, errlen, -EINVAL,
				 "SM agent: id '%.64s' and group '%.64s' must be 1..253 of "
				 "[A-Za-z0-9._-]",
				 o->id ? o->id : "", o->group ? o->group : "");
	if (o->lease_ttl_s < 2 || !o->reconcile_s || !o->batch_max)
		return ibvf_errf(err, errlen, -EINVAL,
				 "SM agent: lease_ttl_s >= 2, reconcile_s and batch_max >= 1");
	a = calloc(1, sizeof(*a));
	if (!a)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	a->o = *o;
	a->prefix = strdup(o->prefix);
	a->id = strdup(o->id);
	a->group = strdup(o->group);
	a->ranges = calloc(o->n_ranges + 1, sizeof(*a->ranges));
	if (!a->prefix || !a->id || !a->group || !a->ranges) {
		free(a->prefix);
		free(a->id);
		free(a->group);
		free(a->ranges);
		free(a);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	if (o->n_ranges)
		memcpy(a->ranges, o->ranges, o->n_ranges * sizeof(*a->ranges));
	pthread_mutex_init(&a->ka_lock, NULL);
	pthread_mutex_init(&a->stats_lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&a->ka_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	atomic_init(&a->lease_lost, false);
	*out = a;
	return 0;
}

void smd_agent_get_stats(struct smd_agent *a, struct smd_agent_stats *out)
{
	pthread_mutex_lock(&a->stats_lock);
	*out = a->stats;
	out->leader = a->leader;
	pthread_mutex_unlock(&a->stats_lock);
}

void smd_agent_free(struct smd_agent *a)
{
	char err[IBVF_ERR_LEN];

	if (!a)
		return;
	ka_stop(a);
	if (a->lease && etcd_lease_revoke(a->o.etcd, a->lease, err, sizeof(err)))
		log_warn("SM agent %s: revoking lease: %s", a->id, err);
	pthread_mutex_destroy(&a->ka_lock);
	pthread_mutex_destroy(&a->stats_lock);
	pthread_cond_destroy(&a->ka_cond);
	free(a->last);
	free(a->actual);
	free(a->acc);
	free(a->pend);
	for (size_t i = 0; i < a->n_st; i++)
		free(a->st[i].refused);
	free(a->st);
	free(a->ranges);
	free(a->prefix);
	free(a->id);
	free(a->group);
	free(a);
}
