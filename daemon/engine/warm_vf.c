// SPDX-License-Identifier: MIT
/*
 * Warm VFs (vf.warm; issue 17 item 3): the VF rebind, the slowest step of an
 * attach on real hardware, happens before a Pod asks for the VF.
 *
 * A warm pass (on a worker, started by eng_warm_kick()) walks the node's VFs
 * one at a time while no operation runs or waits. Each VF that no live
 * record holds gets a fresh pool GUID, recorded as the warm owner
 * IBVF_POOL_WARM_PREFIX "<pci>"/"warm" with no PKey at "allocated" BEFORE it
 * touches the VF (like any attach step); the SM is checked to list it in no
 * PKey, the VF is programmed (node + port GUID, rebind) and its port is
 * waited for (ACTIVE with a LID), then the record goes to "port_ready": the
 * VF is warm. A failure rolls the record back (VF reset, GUID quarantined)
 * and the VF is tried again after a back-off (2 s, doubled per failure in a
 * row, at most 5 min; the periodic reconciliation pass kicks a warm pass).
 *
 * prepare (attach.c) takes a warm VF with eng_warm_take(): the record
 * changes hands at "sm_requested" in one write, and only the PKey push and
 * the P_Key table wait remain. release (attach.c) calls eng_warm_release():
 * the VF gets a NEW warm GUID at "allocated" and the old one goes to
 * quarantine, so the rebind is off the DEL's path and no tenant inherits
 * another's GUID. A crash anywhere leaves records reconciliation handles
 * like any attach: "allocated" is rolled back, "port_ready" is settled.
 *
 * With vf.warm off, a pass resets the VFs left warm (their pre-warm GUIDs)
 * and quarantines their GUIDs; prepare and release then behave as before.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "engine_int.h"
#include "log.h"
#include "reconcile.h"
#include "sort.h"

#define WARM_MAX_VFS	 65536
#define WARM_BACKOFF_MS	 2000	/* a VF whose warm-up failed waits this long, doubled */
#define WARM_BACKOFF_MAX 300000 /* ... per failure in a row, up to this */
#define WARM_MAX_BACKOFF 1024	/* VFs remembered as failed */

struct warm_fail {
	char pci[32];
	int64_t until_ms; /* CLOCK_MONOTONIC */
	unsigned fails;	  /* in a row */
};

struct eng_warm {
	bool running; /* a pass is queued or running */
	bool again;   /* kicked while running: one more pass */
	uint64_t ready, warming;
	struct warm_fail fail[WARM_MAX_BACKOFF];
	size_t n_fail;
};

int eng_warm_new(struct ibvf_engine *e)
{
	e->wm = calloc(1, sizeof(*e->wm));
	return e->wm ? 0 : -ENOMEM;
}

void eng_warm_free(struct ibvf_engine *e)
{
	free(e->wm);
	e->wm = NULL;
}

static void warm_owner(const char *pci, struct ibvf_owner *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->container_id, sizeof(o->container_id), "%s%s", IBVF_POOL_WARM_PREFIX, pci);
	/* a CNI container ID has no ':' (guid_pool.c): 0000:03:00.2 -> 0000-03-00.2 */
	for (char *c = o->container_id; *c; c++)
		if (*c == ':')
			*c = '-';
	snprintf(o->ifname, sizeof(o->ifname), "%s", IBVF_POOL_WARM_IFNAME);
}

void eng_warm_counts(struct ibvf_engine *e, uint64_t *ready, uint64_t *warming)
{
	pthread_mutex_lock(&e->lock);
	*ready = e->wm ? e->wm->ready : 0;
	*warming = e->wm ? e->wm->warming : 0;
	pthread_mutex_unlock(&e->lock);
}

/* Under e->lock: no prepare, release or gc runs or waits (a warm-up never delays a Pod). */
static bool idle_locked(const struct ibvf_engine *e)
{
	return !e->vf_inflight && !e->waiting && !e->stopping;
}

static bool idle(struct ibvf_engine *e)
{
	bool i;

	pthread_mutex_lock(&e->lock);
	i = idle_locked(e);
	pthread_mutex_unlock(&e->lock);
	return i;
}

/* Under e->lock. */
static bool backing_off(struct eng_warm *w, const char *pci, int64_t now)
{
	for (size_t i = 0; i < w->n_fail; i++)
		if (!strcmp(w->fail[i].pci, pci))
			return w->fail[i].until_ms > now;
	return false;
}

static void note_failure(struct ibvf_engine *e, const char *pci)
{
	struct eng_warm *w = e->wm;
	int64_t wait = WARM_BACKOFF_MS;
	size_t i;

	pthread_mutex_lock(&e->lock);
	for (i = 0; i < w->n_fail && strcmp(w->fail[i].pci, pci); i++)
		;
	if (i == w->n_fail) {
		if (w->n_fail == WARM_MAX_BACKOFF)
			i = 0; /* forget the oldest slot: it is only a back-off */
		else
			w->n_fail++;
		w->fail[i].fails = 0;
	}
	for (unsigned k = 0; k < w->fail[i].fails && wait < WARM_BACKOFF_MAX; k++)
		wait *= 2;
	if (wait > WARM_BACKOFF_MAX)
		wait = WARM_BACKOFF_MAX;
	w->fail[i].fails++;
	snprintf(w->fail[i].pci, sizeof(w->fail[i].pci), "%s", pci);
	w->fail[i].until_ms = ibvf_mono_ms() + wait;
	pthread_mutex_unlock(&e->lock);
}

/* A warm-up of @pci worked: its back-off starts again from the shortest. */
static void note_success(struct ibvf_engine *e, const char *pci)
{
	struct eng_warm *w = e->wm;

	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < w->n_fail; i++)
		if (!strcmp(w->fail[i].pci, pci)) {
			w->fail[i] = w->fail[--w->n_fail];
			break;
		}
	pthread_mutex_unlock(&e->lock);
}

/*
 * Is @guid in a tenant PKey in the SM (default partition and admin entries
 * that name no GUID left out)? 1 yes, 0 no, <0 the listing failed.
 */
static int sm_lists(struct ibvf_engine *e, uint64_t guid, uint16_t *pkey, char *err, size_t errlen)
{
	struct ibvf_sm_members *ms;
	int ret = ibvf_sm_batch_members(e->batch, &ms);

	if (ret)
		return ibvf_errf(err, errlen, ret, "listing SM membership: out of memory");
	ret = ms->status;
	if (ret)
		snprintf(err, errlen, "%s", ms->err);
	for (size_t i = 0; !ret && i < ms->n; i++)
		if (ms->m[i].guid == guid && ms->m[i].pkey != IBVF_PKEY_DEFAULT) {
			*pkey = ms->m[i].pkey;
			ret = 1;
		}
	ibvf_sm_batch_members_put(e->batch, ms);
	return ret;
}

/* Walk a warm record back (VF reset when it carries the GUID, quarantine). */
static void warm_undo(struct ibvf_engine *e, struct ibvf_alloc *a)
{
	char err[IBVF_ERR_LEN];
	bool pending;

	if (eng_undo(e, a, false, &pending, err, sizeof(err)))
		log_err("warm VF %s: rolling back GUID %016llx failed: %s", a->pci,
			(unsigned long long)a->guid, err);
}

/*
 * The CNI cache as one warm pass read it (issue 17: once per pass, not once
 * per VF): the deviceIDs its entries name, sorted, and the directory's mtime
 * then. The plugin writes an entry by temp + rename and DEL unlinks it, so
 * each change of the entries changes the directory's mtime.
 */
struct cni_snap {
	bool read;	 /* a listing was taken */
	int ret;	 /* of that listing: 0, -ENOENT (no directory), or another error */
	char (*dev)[32]; /* deviceIDs, lower case, sorted */
	size_t n, cap;
	struct timespec mtime; /* of the directory, when read */
	struct timespec start; /* CLOCK_REALTIME before the listing */
};

static int cmp_dev(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int snap_add(void *arg, json_t *entry)
{
	struct cni_snap *c = arg;
	const char *dev = json_string_value(json_object_get(entry, "deviceID"));

	if (!dev)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		void *p = realloc(c->dev, cap * sizeof(*c->dev));

		if (!p)
			return -ENOMEM;
		c->dev = p;
		c->cap = cap;
	}
	snprintf(c->dev[c->n], sizeof(c->dev[0]), "%s", dev);
	for (char *q = c->dev[c->n]; *q; q++)
		*q = (char)tolower((unsigned char)*q);
	c->n++;
	return 0;
}

/* (Re-)read the cache of @e into @c. */
static void snap_read(struct ibvf_engine *e, struct cni_snap *c)
{
	struct stat st;

	c->n = 0;
	c->read = true;
	clock_gettime(CLOCK_REALTIME, &c->start);
	memset(&c->mtime, 0, sizeof(c->mtime));
	if (!stat(e->cni_cache_dir, &st))
		c->mtime = st.st_mtim;
	c->ret = ibvf_cni_cache_each(e->cni_cache_dir, snap_add, c);
	if (!c->ret)
		ibvf_sort(c->dev, c->n, sizeof(*c->dev), cmp_dev);
}

/*
 * Does the directory still hold what @c read? Its mtime is the same, and
 * older than the listing by more than a file system timestamp's granularity
 * (a change within the same tick as the listing leaves the mtime as it was).
 */
static bool snap_current(struct ibvf_engine *e, const struct cni_snap *c)
{
	struct stat st;

	if (stat(e->cni_cache_dir, &st))
		return errno == ENOENT && c->ret == -ENOENT;
	if (c->ret || st.st_mtim.tv_sec != c->mtime.tv_sec ||
	    st.st_mtim.tv_nsec != c->mtime.tv_nsec)
		return false;
	return st.st_mtim.tv_sec + 2 < c->start.tv_sec;
}

static bool snap_names(const struct cni_snap *c, const char *pci)
{
	char key[32];

	snprintf(key, sizeof(key), "%s", pci);
	for (char *q = key; *q; q++)
		*q = (char)tolower((unsigned char)*q);
	return c->n && bsearch(key, c->dev, c->n, sizeof(*c->dev), cmp_dev);
}

/*
 * Is the VF @pci in a Pod that ibvfd does not hold? The ib-sriov cache names
 * the VF of every attachment, daemon and compatibility mode alike (an
 * ib-kubernetes network, `ibKubernetesEnabled`, is attached by the plugin
 * alone while ibvfd runs): such a VF is never re-GUIDed or rebound, whatever
 * its GUID and whether its RDMA device stayed in the host (shared RDMA netns
 * mode). An unreadable cache counts as naming it. The pass's listing @c
 * answers when the directory has not changed since; else (an entry written
 * after the pass started, right before this VF is acted on) it is read again.
 */
static bool in_cni_cache(struct ibvf_engine *e, struct cni_snap *c, const char *pci)
{
	if (!e->cni_cache_dir[0])
		return false;
	if (!c->read || !snap_current(e, c))
		snap_read(e, c);
	if (c->ret < 0 && c->ret != -ENOENT)
		log_warn("warm VF %s: CNI cache %s not readable (%s): not warmed", pci,
			 e->cni_cache_dir, strerror(-c->ret));
	return (c->ret < 0 && c->ret != -ENOENT) || (!c->ret && snap_names(c, pci));
}

/*
 * Does a live record other than the warm record @w hold the GUID the VF @vf
 * carries (into *@o)? Then the VF is a Pod's (or being released): never
 * re-GUIDed by a warm-up, nor given to another Pod by a take. A healthy store never has a warm
 * record next to another live record of the same VF but during a release's hand-over (the old
 * record "releasing", reconciliation finishes it); a rolled-back store can:
 * it brings back an older warm row of a VF a Pod holds now, and `ibvfctl
 * pool rebuild` adopts the GUID the VF carries beside it. When that record
 * is settled (port_ready, handed) and names this VF, the warm record is
 * stale: walked back (its GUID is on no VF, so the VF is not touched;
 * quarantined). Source of the rule: docs/vf-guid-lifecycle.md, "Warm VFs"
 * (issue 17 item 3: a warm GUID never replaces a tenant's); a port GUID is
 * live on at most one VF.
 */
static bool held_by_other(struct ibvf_engine *e, const struct ibvf_attach_vf *vf,
			  struct ibvf_alloc *w, struct ibvf_alloc *o)
{
	char s[IBVF_GUID_STR_LEN], s2[IBVF_GUID_STR_LEN];

	if (!vf->guids_known || !vf->port_guid || vf->port_guid == w->guid ||
	    ibvf_pool_get(e->pool, vf->port_guid, o, NULL, 0) || o->state == IBVF_ALLOC_QUARANTINED)
		return false;
	ibvf_guid_format(w->guid, s);
	ibvf_guid_format(o->guid, s2);
	if ((o->state == IBVF_ALLOC_PORT_READY || o->state == IBVF_ALLOC_HANDED) &&
	    !strcmp(o->pci, vf->pci)) {
		log_warn("warm VF %s (PF %s VF %d): it carries GUID %s of container %.12s ifname "
			 "%s (%s): its warm record of GUID %s is stale (a rolled-back store): "
			 "dropped, the VF is not touched",
			 vf->pci, vf->pf, vf->vf_index, s2, o->owner.container_id, o->owner.ifname,
			 ibvf_alloc_state_name(o->state), s);
		warm_undo(e, w);
	} else {
		log_info("warm VF %s: it carries GUID %s of container %.12s (%s): not warmed (warm "
			 "record of GUID %s kept)",
			 vf->pci, s2, o->owner.container_id, ibvf_alloc_state_name(o->state), s);
	}
	return true;
}

/* Warm the VF @pci (the keys are held). Return: true when it is warm now. */
static bool warm_one(struct ibvf_engine *e, const char *pci, struct cni_snap *cache)
{
	struct ibvf_alloc_request req = {.vf_index = -1};
	struct ibvf_port_result pr;
	struct ibvf_attach_vf vf;
	struct ibvf_alloc a, o;
	char err[IBVF_ERR_LEN + 96], s[IBVF_GUID_STR_LEN];
	uint16_t pk = 0;
	int64_t dl;
	int ret;

	ret = e->vf.lookup(e->vf.ctx, pci, &vf, err, sizeof(err));
	if (ret) {
		log_warn("warm VF %s: %s", pci, err);
		note_failure(e, pci);
		return false;
	}
	ret = ibvf_pool_find_pci(e->pool, pci, &a, err, sizeof(err));
	if (ret != 0 && ret != -ENOENT) {
		log_warn("warm VF %s: %s", pci, err);
		return false;
	}
	/* a Pod the plugin attached without ibvfd (compatibility mode) holds it */
	if ((ret == -ENOENT || ibvf_alloc_is_warm(&a)) && in_cni_cache(e, cache, pci))
		return false;
	if (!ret) {
		if (!ibvf_alloc_is_warm(&a) ||
		    (a.state != IBVF_ALLOC_ALLOCATED && a.state != IBVF_ALLOC_PORT_READY))
			return false; /* a Pod's, or being released */
		/* another record holds what the VF carries: a Pod's VF, never re-GUIDed */
		if (held_by_other(e, &vf, &a, &o))
			return false;
		/* warm already; else recorded by a release (or left by a crash): set it up */
		if (a.state == IBVF_ALLOC_PORT_READY && vf.guids_known && vf.port_guid == a.guid)
			return true;
	} else if (ret == -ENOENT) {
		/* no netdev and no RDMA device: a VF not ours to rebind (vfio, in a netns) */
		if (!vf.netdev[0] && !vf.rdma_dev[0])
			return false;
		/*
		 * A pool GUID on a VF no record holds is an orphan (a lost or
		 * rolled-back store: maybe a running Pod's): reconciliation reports
		 * it, and resets it in "fix" mode; only then is the VF warmed.
		 */
		if (vf.guids_known && eng_in_ranges(e, vf.port_guid))
			return false;
		warm_owner(pci, &req.owner);
		req.pf = vf.pf;
		req.vf_index = vf.vf_index;
		req.pci = pci;
		if (vf.guids_known) {
			req.prev_node_guid = vf.node_guid;
			req.prev_port_guid = vf.port_guid;
		}
		req.prev_link_state = vf.link_state;
		req.no_owner_return = true;
		/* "allocated": persisted before the GUID touches the VF */
		ret = ibvf_pool_allocate(e->pool, &req, &a, err, sizeof(err));
		if (ret) {
			if (ret != -ENOSPC)
				log_warn("warm VF %s: allocating a GUID failed: %s", pci, err);
			note_failure(e, pci);
			return false;
		}
	} else {
		log_warn("warm VF %s: %s", pci, err);
		return false;
	}
	ibvf_guid_format(a.guid, s);
	pthread_mutex_lock(&e->lock);
	e->wm->warming++;
	dl = ibvf_mono_ms() + e->port_timeout_ms;
	pthread_mutex_unlock(&e->lock);
	/* a warm GUID belongs to no tenant PKey: the SM must not list it in one */
	ret = sm_lists(e, a.guid, &pk, err, sizeof(err));
	if (ret) {
		if (ret > 0)
			log_warn("warm VF %s: GUID %s is listed in PKey 0x%04x: not used, "
				 "quarantined",
				 pci, s, pk);
		else
			log_warn("warm VF %s: GUID %s: reading its SM membership failed: %s", pci,
				 s, err);
		warm_undo(e, &a);
		goto fail;
	}
	ret = e->vf.program(e->vf.ctx, &vf, a.guid, a.guid, NULL, err, sizeof(err));
	if (ret) {
		log_warn("warm VF %s (PF %s VF %d): programming GUID %s failed: %s", pci, vf.pf,
			 vf.vf_index, s, err);
		warm_undo(e, &a);
		goto fail;
	}
	memset(&pr, 0, sizeof(pr));
	for (size_t i = 0; i < IBVF_POOL_MAX_PKEYS; i++)
		pr.pkey_index[i] = -1;
	ret = e->port.wait(e->port.ctx, &vf, a.guid, NULL, 0, dl, &pr, err, sizeof(err));
	if (!ret) {
		a.state = IBVF_ALLOC_PORT_READY;
		ret = ibvf_pool_update(e->pool, &a, err, sizeof(err));
	}
	if (ret) {
		log_warn("warm VF %s (PF %s VF %d) GUID %s: %s", pci, vf.pf, vf.vf_index, s, err);
		warm_undo(e, &a);
		goto fail;
	}
	log_info("PF %s VF %d (%s): warm with GUID %s, port %s LID %u", vf.pf, vf.vf_index, pci, s,
		 pr.state, pr.lid);
	pthread_mutex_lock(&e->lock);
	e->wm->warming--;
	pthread_mutex_unlock(&e->lock);
	note_success(e, pci);
	return true;
fail:
	pthread_mutex_lock(&e->lock);
	e->wm->warming--;
	pthread_mutex_unlock(&e->lock);
	note_failure(e, pci);
	return false;
}

/* The PCI addresses of the node's VFs. */
struct pci_list {
	char (*pci)[32];
	size_t n, cap;
};

static int list_cb(void *arg, const struct ibvf_attach_vf *vf)
{
	struct pci_list *l = arg;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		void *p;

		if (cap > WARM_MAX_VFS)
			return 1;
		p = realloc(l->pci, cap * sizeof(*l->pci));
		if (!p)
			return -ENOMEM;
		l->pci = p;
		l->cap = cap;
	}
	snprintf(l->pci[l->n++], sizeof(*l->pci), "%s", vf->pci);
	return 0;
}

struct rec_list {
	struct ibvf_alloc *a;
	size_t n, cap;
};

static int warm_rec_cb(void *arg, const struct ibvf_alloc *a)
{
	struct rec_list *l = arg;

	if (!ibvf_alloc_is_warm(a))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		void *p = realloc(l->a, cap * sizeof(*l->a));

		if (!p)
			return -ENOMEM;
		l->a = p;
		l->cap = cap;
	}
	l->a[l->n++] = *a;
	return 0;
}

/* Hold the keys of the warm owner of @pci and of the VF. */
static bool hold(struct ibvf_engine *e, const char *pci, struct keyhold *k)
{
	struct ibvf_owner o;

	memset(k, 0, sizeof(*k));
	warm_owner(pci, &o);
	eng_owner_key(&o, k->owner, sizeof(k->owner));
	snprintf(k->pci, sizeof(k->pci), "%s", pci);
	return eng_try_keys(e, k);
}

/* vf.warm off: reset the VFs left warm (pre-warm GUIDs back, GUIDs quarantined). */
static void cool_pass(struct ibvf_engine *e)
{
	struct ibvf_pool_filter f = {.owner = IBVF_POOL_WARM_PREFIX, .pkey = -1};
	struct rec_list l = {0};
	char err[IBVF_ERR_LEN];

	if (ibvf_pool_lost(e->pool, NULL, 0))
		return; /* its warm records may be stale: a Pod's VF is not reset */
	if (ibvf_pool_list(e->pool, &f, warm_rec_cb, &l, err, sizeof(err)) < 0)
		log_warn("warm VFs: listing the store failed: %s", err);
	for (size_t i = 0; i < l.n && idle(e); i++) {
		struct ibvf_alloc a;
		struct keyhold k;

		if (!hold(e, l.a[i].pci, &k))
			continue;
		if (!ibvf_pool_get(e->pool, l.a[i].guid, &a, NULL, 0) && ibvf_alloc_is_warm(&a) &&
		    a.state != IBVF_ALLOC_QUARANTINED) {
			log_info("vf.warm is off: resetting warm VF %s (GUID %016llx)", a.pci,
				 (unsigned long long)a.guid);
			warm_undo(e, &a);
		}
		eng_drop_keys(e, &k);
	}
	free(l.a);
}

static void warm_pass(struct ibvf_engine *e)
{
	struct cni_snap cache = {0};
	struct pci_list l = {0};
	char err[IBVF_ERR_LEN];
	uint64_t ready = 0;
	bool complete = true;
	int ret;

	/* a store that lost records cannot tell a free VF from a Pod's: nothing until rebuilt */
	if (ibvf_pool_lost(e->pool, NULL, 0))
		return;

	ret = e->vf.list ? e->vf.list(e->vf.ctx, list_cb, &l, err, sizeof(err)) : -ENOTSUP;
	if (ret < 0) {
		log_warn("warm VFs: listing the VFs failed: %s",
			 ret == -ENOTSUP ? "the VF seam cannot list" : err);
		free(l.pci);
		return;
	}
	for (size_t i = 0; i < l.n; i++) {
		struct keyhold k;
		bool skip;

		pthread_mutex_lock(&e->lock);
		complete = idle_locked(e) && e->warm;
		skip = backing_off(e->wm, l.pci[i], ibvf_mono_ms());
		pthread_mutex_unlock(&e->lock);
		if (!complete)
			break; /* a Pod waits: the next kick goes on */
		if (skip || !hold(e, l.pci[i], &k))
			continue;
		ready += warm_one(e, l.pci[i], &cache);
		eng_drop_keys(e, &k);
	}
	free(l.pci);
	free(cache.dev);
	if (complete) {
		pthread_mutex_lock(&e->lock);
		e->wm->ready = ready;
		pthread_mutex_unlock(&e->lock);
	}
}

static void warm_job(void *arg)
{
	struct ibvf_engine *e = arg;

	for (;;) {
		bool on, go;

		pthread_mutex_lock(&e->lock);
		on = e->warm;
		go = idle_locked(e);
		e->wm->again = false;
		pthread_mutex_unlock(&e->lock);
		if (go && on)
			warm_pass(e);
		else if (go)
			cool_pass(e);
		pthread_mutex_lock(&e->lock);
		go = e->wm->again && idle_locked(e);
		if (!go)
			e->wm->running = false;
		pthread_mutex_unlock(&e->lock);
		if (!go)
			return;
	}
}

void eng_warm_kick(struct ibvf_engine *e)
{
	bool submit = false;

	pthread_mutex_lock(&e->lock);
	if (e->wm && !e->stopping) {
		if (e->wm->running)
			e->wm->again = true;
		else
			submit = e->wm->running = true;
	}
	pthread_mutex_unlock(&e->lock);
	if (submit && ibvf_workq_submit(e->wq, warm_job, NULL, e)) {
		pthread_mutex_lock(&e->lock);
		e->wm->running = false;
		pthread_mutex_unlock(&e->lock);
	}
}

int eng_warm_take(struct op *op, const struct ibvf_alloc *w)
{
	struct ibvf_engine *e = op->e;
	struct ibvf_alloc stale, o;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	const char *why = NULL;
	bool on;
	int ret;

	if (!ibvf_alloc_is_warm(w))
		return 0;
	/* the VF carries what another live record holds: a Pod's VF (a stale warm row) */
	stale = *w;
	if (held_by_other(e, &op->vf, &stale, &o)) {
		eng_set_error(
			op, IBVF_RPC_VF_IN_USE, EBUSY, "allocate",
			"VF %s (PF %s VF %d) is held by container %.64s ifname %s with GUID %s",
			w->pci, w->pf, w->vf_index, o.owner.container_id, o.owner.ifname,
			ibvf_guid_format(o.guid, s));
		return -EBUSY;
	}
	pthread_mutex_lock(&e->lock);
	on = e->warm;
	pthread_mutex_unlock(&e->lock);
	ibvf_guid_format(w->guid, s);
	if (!on)
		why = "vf.warm is off";
	else if (op->req.req_guid)
		why = "the Pod asks for a GUID";
	else if (w->state != IBVF_ALLOC_PORT_READY)
		why = "its warm-up has not finished";
	else if (!op->vf.guids_known || op->vf.port_guid != w->guid)
		why = "the VF does not carry its warm GUID";
	else if (op->req.link_state[0] && strcmp(op->req.link_state, op->vf.link_state))
		why = "the Pod asks for another link state";
	if (!why) {
		/* sm_requested: the change of hands is on disk before the SM push */
		ret = ibvf_pool_take_over(e->pool, w->guid, &w->owner, IBVF_ALLOC_PORT_READY,
					  &op->req.owner, op->req.pkeys, op->req.n_pkeys,
					  IBVF_ALLOC_SM_REQUESTED, err, sizeof(err));
		if (!ret)
			ret = ibvf_pool_get(e->pool, w->guid, &op->a, err, sizeof(err));
		ibvf_timing_mark(&op->timing, "store_take");
		if (ret) {
			eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "allocate",
				      "taking warm VF %s (GUID %s): %s", w->pci, s, err);
			return ret;
		}
		op->created = op->warm = true;
		pthread_mutex_lock(&e->lock);
		if (e->wm->ready)
			e->wm->ready--;
		pthread_mutex_unlock(&e->lock);
		log_info("PF %s VF %d (%s): warm GUID %s taken by container %.12s ifname %s PKey "
			 "0x%04x: no rebind",
			 w->pf, w->vf_index, w->pci, s, op->req.owner.container_id,
			 op->req.owner.ifname, op->req.n_pkeys ? op->req.pkeys[0] : 0);
		return 1;
	}
	/*
	 * Cold path: the warm GUID goes to quarantine (never to a tenant); the
	 * VF keeps carrying it until the attach programs the Pod's GUID, and a
	 * rollback resets it to its pre-warm GUIDs, so they are kept.
	 */
	ret = ibvf_pool_release(e->pool, w->guid, err, sizeof(err));
	if (ret < 0) {
		eng_set_error(op, IBVF_RPC_INTERNAL_ERROR, ret, "allocate",
			      "dropping warm GUID %s of VF %s: %s", s, w->pci, err);
		return ret;
	}
	log_info("VF %s: warm GUID %s not used (%s): cold attach", w->pci, s, why);
	op->vf.guids_known = w->prev_port_guid || w->prev_node_guid;
	op->vf.node_guid = w->prev_node_guid;
	op->vf.port_guid = w->prev_port_guid;
	snprintf(op->vf.link_state, sizeof(op->vf.link_state), "%s", w->prev_link_state);
	return 0;
}

bool eng_warm_release(struct ibvf_engine *e, const struct ibvf_alloc *a)
{
	struct ibvf_alloc_request req = {.vf_index = -1};
	struct ibvf_alloc nw;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN], s2[IBVF_GUID_STR_LEN];
	bool on;
	int ret;

	pthread_mutex_lock(&e->lock);
	on = e->warm;
	pthread_mutex_unlock(&e->lock);
	if (!on || !a->pci[0] || ibvf_alloc_is_warm(a))
		return false;
	warm_owner(a->pci, &req.owner);
	req.pf = a->pf;
	req.vf_index = a->vf_index;
	req.pci = a->pci;
	req.prev_node_guid = a->prev_node_guid;
	req.prev_port_guid = a->prev_port_guid;
	req.prev_link_state = a->prev_link_state;
	req.no_owner_return = true;
	/*
	 * The new GUID first (so the VF is never without a record), then the old
	 * one out. Both lazy (docs/pool.md, "Durability classes"): the SM removal
	 * is done, and the VF gets the new GUID only from a warm pass, whose read
	 * of the record waits until it is durable; lost (an OS crash), the old
	 * record is left at "releasing", which reconciliation finishes (and the
	 * warm pass then warms the VF as any free one). Not on the DEL's answer.
	 */
	ret = ibvf_pool_allocate_lazy(e->pool, &req, &nw, err, sizeof(err));
	ibvf_timing_mark_current("store_warm_new");
	if (ret) {
		log_warn("VF %s: no new warm GUID (%s): reset as a cold release", a->pci, err);
		return false;
	}
	ret = ibvf_pool_release_lazy(e->pool, a->guid, err, sizeof(err));
	ibvf_timing_mark_current("store_release");
	if (ret < 0) {
		log_err("VF %s: quarantining GUID %s failed: %s", a->pci,
			ibvf_guid_format(a->guid, s), err);
		ibvf_pool_release(e->pool, nw.guid, NULL, 0);
		return false;
	}
	log_info("GUID %s released (container %.12s ifname %s); VF %s gets warm GUID %s next",
		 ibvf_guid_format(a->guid, s), a->owner.container_id, a->owner.ifname, a->pci,
		 ibvf_guid_format(nw.guid, s2));
	return true;
}
