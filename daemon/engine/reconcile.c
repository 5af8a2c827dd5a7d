// SPDX-License-Identifier: MIT
/*
 * Reconciliation of the three views of an attachment: the GUID pool store,
 * the VFs (GUIDs read back) and the SM's partition membership
 * (list_members). Runs at start-up (before prepare is accepted) and every
 * sm.periodic_update_s seconds; `ibvfctl pool audit` asks for a pass too.
 *
 *  - store records in a transient state (allocated .. sm_confirmed) with no
 *    running operation were cut short by a crash or kill: rolled back, but
 *    one at sm_requested whose VF carries its GUID in a Pod's netns is kept
 *    as port_ready (its lazy port_ready write was lost: port_ready_lost()); a
 *    warm VF's record at "allocated" (vf.warm) is left to the warm pass,
 *    which finishes it (and the VF meanwhile carries no tenant's PKey);
 *  - records in "releasing" are finished (SM removal, VF reset, pool release),
 *    but one whose release.sm was answered and whose VF netdev is not back in
 *    the host yet is left to its DEL (releasing_in_pod());
 *  - port_ready / handed records whose membership the SM lost are re-pushed;
 *    a VF whose GUID differs from the record is reported (drift);
 *  - SM members in the ibvf ranges that no record holds ("sm-orphan"), or
 *    that their owner holds in a PKey it did not ask for ("sm-foreign-pkey"),
 *    are removed in every pass but a dry run: the ranges are ibvf's, and a
 *    stale membership would follow the GUID to its next tenant (issue 14).
 *    The default partition 0x7fff and memberships the backend reports as
 *    not managed (an admin's) are left alone;
 *  - quarantined GUIDs the listing shows in a PKey start their quarantine
 *    again; those it shows gone are marked seen (ibvf_pool_quarantine_seen);
 *  - VFs carrying a GUID of the ranges that no record holds are reported,
 *    and reset when daemon.reconcile is "fix";
 *  - the store's own audit (leaked or double-free GUIDs) is included.
 *
 * Order matters: the SM is listed BEFORE the store snapshot is read, so a
 * GUID being attached right now (always recorded before the SM sees it) is
 * never mistaken for an orphan. The VFs are listed between the two, for the
 * same reason.
 *
 * Cost (issue 17): one SM listing, one VF listing and one store listing per
 * pass, indexed once (the SM by sort, the VFs by hash of PCI address and
 * GUID, the store by GUID order), so a pass is linear in owners and VFs. A
 * record or VF the listings do not explain is read again one by one under
 * its hold before anything is decided; a clean pass reads nothing twice.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/types.h>

#include <jansson.h>

#include "clock.h"
#include "engine_metrics.h"
#include "err.h"
#include "file_read.h"
#include "sort.h"
#include "evloop.h"
#include "log.h"
#include "reconcile.h"

struct sm_entry {
	uint16_t pkey;
	uint64_t guid;
	enum ibvf_membership membership;
};

struct rec_ctx {
	struct sm_entry *sm;
	size_t n_sm, cap_sm;
	struct ibvf_alloc *recs;
	size_t n_recs, cap_recs;
	struct ibvf_attach_vf *vfs;
	size_t n_vfs, cap_vfs;
	bool vfs_listed;     /* r->vfs is this pass's VF listing */
	bool *vf_stale;	     /* per VF: this pass may have changed it (re-read it) */
	uint32_t *pci_slot;  /* hash of r->vfs by PCI address: index + 1, 0 = empty */
	size_t pci_mask;     /* slots - 1 (a power of two) */
	uint32_t *vf_dup_of; /* per VF: index + 1 of an earlier VF with its GUID, 0 = none */
	uint64_t *used;	     /* GUIDs of the ranges the SM lists (any PKey, managed or not) */
	size_t n_used, cap_used;
	struct if_nameindex *links; /* ibvfd's netns: one RTM_GETLINK dump per pass */
	uint32_t *link_slot;	    /* hash of links by name: index + 1, 0 = empty */
	size_t link_mask;
	int links_read; /* 0 not yet, 1 read, -1 failed (then if_nametoindex(3) per name) */
	const struct ibvf_reconcile_env *env;
	enum ibvf_reconcile_pass mode;
	ibvf_finding_fn cb;
	void *cb_arg;
	int problems;
};

static bool in_ranges(const struct rec_ctx *r, uint64_t g)
{
	return r->env->ops->in_ranges(r->env->ctx, g);
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	void *p;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 64;
	p = realloc(*arr, c * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

static int sm_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct rec_ctx *r = arg;

	if (!in_ranges(r, m->guid))
		return 0;
	/* in use on the fabric whatever the PKey (the pool's in-use set) */
	if (grow((void **)&r->used, &r->cap_used, r->n_used, sizeof(*r->used)))
		return -ENOMEM;
	r->used[r->n_used++] = m->guid;
	/* tenant memberships ibvf manages; the default partition is every port's */
	if (!managed || ibvf_pkey_key(pkey) == IBVF_PKEY_DEFAULT)
		return 0;
	if (grow((void **)&r->sm, &r->cap_sm, r->n_sm, sizeof(*r->sm)))
		return -ENOMEM;
	r->sm[r->n_sm++] = (struct sm_entry){ibvf_pkey_key(pkey), m->guid, m->membership};
	return 0;
}

static int rec_cb(void *arg, const struct ibvf_alloc *a)
{
	struct rec_ctx *r = arg;

	if (grow((void **)&r->recs, &r->cap_recs, r->n_recs, sizeof(*r->recs)))
		return -ENOMEM;
	r->recs[r->n_recs++] = *a;
	return 0;
}

static int vf_cb(void *arg, const struct ibvf_attach_vf *vf)
{
	struct rec_ctx *r = arg;

	if (grow((void **)&r->vfs, &r->cap_vfs, r->n_vfs, sizeof(*r->vfs)))
		return -ENOMEM;
	r->vfs[r->n_vfs++] = *vf;
	return 0;
}

static uint64_t hash_pci(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33; /* the murmur3 finalizer */
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/*
 * Index the VF listing once per pass (issue 17: recovery must be linear): a
 * hash by PCI address for check_record(), and for each VF the previous one
 * carrying the same pool GUID (duplicates) from a hash by GUID.
 */
static int index_vfs(struct rec_ctx *r)
{
	size_t slots = 16, gmask;
	uint32_t *gslot;

	while (slots < 2 * r->n_vfs)
		slots *= 2;
	r->pci_slot = calloc(slots, sizeof(*r->pci_slot));
	gslot = calloc(slots, sizeof(*gslot));
	r->vf_dup_of = calloc(r->n_vfs + 1, sizeof(*r->vf_dup_of));
	r->vf_stale = calloc(r->n_vfs + 1, sizeof(*r->vf_stale));
	if (!r->pci_slot || !gslot || !r->vf_dup_of || !r->vf_stale) {
		free(gslot);
		return -ENOMEM;
	}
	r->pci_mask = gmask = slots - 1;
	for (size_t i = 0; i < r->n_vfs; i++) {
		const struct ibvf_attach_vf *vf = &r->vfs[i];
		size_t h = (size_t)hash_pci(vf->pci) & r->pci_mask;

		while (r->pci_slot[h] && strcmp(r->vfs[r->pci_slot[h] - 1].pci, vf->pci))
			h = (h + 1) & r->pci_mask;
		if (!r->pci_slot[h]) /* the first of a PCI address listed twice wins */
			r->pci_slot[h] = (uint32_t)i + 1;
		if (!vf->guids_known || !in_ranges(r, vf->port_guid))
			continue;
		h = (size_t)hash_u64(vf->port_guid) & gmask;
		while (gslot[h] && r->vfs[gslot[h] - 1].port_guid != vf->port_guid)
			h = (h + 1) & gmask;
		r->vf_dup_of[i] = gslot[h]; /* the latest earlier one, 0 if none */
		gslot[h] = (uint32_t)i + 1;
	}
	free(gslot);
	return 0;
}

/* The listed VF at @pci, or NULL (not listed, or no listing this pass). */
static struct ibvf_attach_vf *vf_by_pci(const struct rec_ctx *r, const char *pci, size_t *idx)
{
	size_t h;

	if (!r->pci_slot || !pci[0])
		return NULL;
	h = (size_t)hash_pci(pci) & r->pci_mask;
	while (r->pci_slot[h]) {
		size_t i = r->pci_slot[h] - 1;

		if (!strcmp(r->vfs[i].pci, pci)) {
			if (idx)
				*idx = i;
			return &r->vfs[i];
		}
		h = (h + 1) & r->pci_mask;
	}
	return NULL;
}

static void finding(struct rec_ctx *r, const char *kind, bool problem, uint64_t guid, int pkey,
		    const char *pci, const char *fix, bool fixed, const char *fmt, ...)
	__attribute__((format(printf, 9, 10)));

static void finding(struct rec_ctx *r, const char *kind, bool problem, uint64_t guid, int pkey,
		    const char *pci, const char *fix, bool fixed, const char *fmt, ...)
{
	struct ibvf_reconcile_finding f;
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (problem && !fixed)
		r->problems++;
	ibvf_log(problem && !fixed ? LOG_WARNING : LOG_INFO, "reconcile: %s: %s%s%s", kind, detail,
		 fixed ? "; fixed: " : "", fixed ? fix : "");
	if (!r->cb)
		return;
	f = (struct ibvf_reconcile_finding){.kind = kind,
					    .problem = problem,
					    .guid = guid,
					    .pkey = pkey,
					    .pci = pci,
					    .detail = detail,
					    .fix = fix,
					    .fixed = fixed};
	r->cb(r->cb_arg, &f);
}

static int cmp_sm(const void *x, const void *y)
{
	const struct sm_entry *a = x, *b = y;

	if (a->pkey != b->pkey)
		return a->pkey < b->pkey ? -1 : 1;
	return a->guid < b->guid ? -1 : a->guid > b->guid;
}

/* r->sm is sorted by (PKey, GUID) once listed. */
static const struct sm_entry *sm_find(const struct rec_ctx *r, uint16_t pkey, uint64_t guid)
{
	struct sm_entry key = {.pkey = pkey, .guid = guid};

	return r->n_sm ? bsearch(&key, r->sm, r->n_sm, sizeof(*r->sm), cmp_sm) : NULL;
}

static bool sm_has(const struct rec_ctx *r, uint16_t pkey, uint64_t guid)
{
	return sm_find(r, pkey, guid) != NULL;
}

/*
 * Is @pk (with its membership bit) there with that membership? A limited
 * member the SM holds as full is an isolation breach, and UFM's add used to
 * make one silently (issue 16): presence alone is not enough.
 */
static bool sm_member_ok(const struct rec_ctx *r, uint16_t pk, uint64_t guid)
{
	const struct sm_entry *e = sm_find(r, ibvf_pkey_key(pk), guid);

	return e &&
	       e->membership == (ibvf_pkey_is_full(pk) ? IBVF_MEMBER_FULL : IBVF_MEMBER_LIMITED);
}

/*
 * Read ibvfd's netns's netdev names once per pass (if_nameindex(3): one
 * RTM_GETLINK dump) and hash them by name, so the handed owners' netdev
 * check costs no socket per VF (issue 17: if_nametoindex(3) opens one per
 * call). Read on first use, which comes after the store listing: a record
 * handed in that listing had its netdev moved into the Pod before its commit
 * (attach.c), so a dump taken later shows it in the host only when the Pod
 * is gone or a DEL moved it back. A name the dump shows is checked again
 * with if_nametoindex(3) under the owner's hold before anything is done.
 */
static void read_links(struct rec_ctx *r)
{
	size_t n = 0, slots = 16;

	r->links_read = -1;
	r->links = if_nameindex();
	if (!r->links)
		return;
	while (r->links[n].if_index)
		n++;
	while (slots < 2 * n)
		slots *= 2;
	r->link_slot = calloc(slots, sizeof(*r->link_slot));
	if (!r->link_slot) {
		if_freenameindex(r->links);
		r->links = NULL;
		return;
	}
	r->link_mask = slots - 1;
	for (size_t i = 0; i < n; i++) {
		size_t h = (size_t)hash_pci(r->links[i].if_name) & r->link_mask;

		while (r->link_slot[h])
			h = (h + 1) & r->link_mask;
		r->link_slot[h] = (uint32_t)i + 1;
	}
	r->links_read = 1;
}

/* Does a netdev named @name exist in ibvfd's netns (per this pass's dump)? */
static bool link_in_host(struct rec_ctx *r, const char *name)
{
	size_t h;

	if (!r->links_read)
		read_links(r);
	if (r->links_read < 0)
		return if_nametoindex(name) != 0;
	h = (size_t)hash_pci(name) & r->link_mask;
	for (; r->link_slot[h]; h = (h + 1) & r->link_mask)
		if (!strcmp(r->links[r->link_slot[h] - 1].if_name, name))
			return true;
	return false;
}

/*
 * A handed VF whose netdev is back in the host netns (issue 15 item 7): the
 * Pod's netns is gone (the kernel returns the device) or a DEL moved it back
 * and its release never reached ibvfd (and left no request). The commit came
 * after the move into the Pod, so a handed owner's netdev is never in the
 * host while the Pod runs. The VF driver's netdev name must also resolve in
 * ibvfd's own netns (if_nametoindex(3)), so a driver that names a netdev
 * wherever it is (the lab drivers) never releases a running Pod's VF. VFIO
 * VFs have no netdev and are never caught here.
 */
static void release_in_host(struct rec_ctx *r, struct ibvf_alloc *a,
			    const struct ibvf_attach_vf *vf)
{
	const struct ibvf_reconcile_env *env = r->env;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	bool pending = false;
	int ret;

	ibvf_guid_format(a->guid, s);
	if (r->mode == IBVF_PASS_DRY_RUN) {
		finding(r, "handed-in-host", true, a->guid, -1, a->pci, "release the owner", false,
			"GUID %s is handed to container %.12s ifname %s (pod %s/%s), but VF %s's "
			"netdev %s is in the host netns: the Pod is gone",
			s, a->owner.container_id, a->owner.ifname, a->owner.pod_namespace,
			a->owner.pod_name, a->pci, vf->netdev);
		return;
	}
	ret = env->ops->undo(env->ctx, a, true, &pending, err, sizeof(err));
	finding(r, "handed-in-host", true, a->guid, -1, a->pci, "release the owner",
		!ret && !pending,
		"GUID %s is handed to container %.12s ifname %s (pod %s/%s), but VF %s's netdev "
		"%s is in the host netns: the Pod is gone%s%s",
		s, a->owner.container_id, a->owner.ifname, a->owner.pod_namespace,
		a->owner.pod_name, a->pci, vf->netdev, ret ? ": " : "",
		ret ? err : (pending ? " (SM removal still pending)" : ""));
}

/*
 * A warm record (vf.warm) whose VF carries another GUID, held by a settled
 * (port_ready, handed) record of the same VF: a rolled-back store brought
 * back an older warm row of a VF that a Pod holds now (the store lost the
 * Pod's attach; `ibvfctl pool rebuild` adopted the VF's GUID beside it, or
 * the attach itself is back). Left as it is, the warm pass could re-GUID the
 * Pod's VF, or a release could leave two warm rows for one VF. A healthy
 * store never has this: a take turns the warm row into the Pod's, a cold
 * attach quarantines it first, a release writes the new warm row only once
 * its old record is on its way out. Walk it back (the VF does not carry its
 * GUID, so it is not touched; quarantine), unless a dry run or the store
 * lost records. @a is read under its hold. Return: true when handled.
 */
static bool stale_warm(struct rec_ctx *r, struct ibvf_alloc *a, struct ibvf_alloc *snap)
{
	const struct ibvf_reconcile_env *env = r->env;
	char s[IBVF_GUID_STR_LEN], s2[IBVF_GUID_STR_LEN], err[IBVF_ERR_LEN];
	struct ibvf_attach_vf vf;
	struct ibvf_alloc o;
	const char *tail = "";
	bool act, pending = false;
	int ret = 0;

	if (!ibvf_alloc_is_warm(a) || !a->pci[0] ||
	    env->vf->lookup(env->vf->ctx, a->pci, &vf, err, sizeof(err)) || !vf.guids_known ||
	    !vf.port_guid || vf.port_guid == a->guid ||
	    ibvf_pool_get(env->pool, vf.port_guid, &o, err, sizeof(err)) ||
	    (o.state != IBVF_ALLOC_PORT_READY && o.state != IBVF_ALLOC_HANDED) ||
	    strcmp(o.pci, a->pci))
		return false;
	ibvf_guid_format(a->guid, s);
	ibvf_guid_format(o.guid, s2);
	act = r->mode != IBVF_PASS_DRY_RUN && !env->store_lost;
	if (act)
		ret = env->ops->undo(env->ctx, a, false, &pending, err, sizeof(err));
	if (act && ret)
		tail = err;
	else if (!act && env->store_lost)
		tail = " (the store lost records: left as it is until 'ibvfctl pool rebuild')";
	finding(r, "warm-stale", true, a->guid, -1, a->pci, "drop the warm record (quarantine)",
		act && !ret,
		"warm GUID %s of VF %s (%s) is stale: the VF carries GUID %s of container %.12s "
		"ifname %s (%s)%s%s",
		s, a->pci, ibvf_alloc_state_name(snap->state), s2, o.owner.container_id,
		o.owner.ifname, ibvf_alloc_state_name(o.state), act && ret ? ": " : "", tail);
	/* handled here: its GUID is no longer a live record's (an SM listing of it is an orphan) */
	if (act && !ret)
		snap->state = IBVF_ALLOC_QUARANTINED;
	return true;
}

/*
 * A record at sm_requested whose VF carries the record's GUID and lists no
 * netdev: the VF is in a Pod (the host's sysfs, which the inventory reads,
 * shows a VF's netdev only while it is in the host netns; a netdev moved
 * into a Pod's netns disappears there). The plugin moves a VF only after
 * the prepare's answer, and the answer comes after port_ready's COMMIT, so
 * port_ready was written and lost (a lazy write: an OS crash or power loss
 * before its fdatasync(); docs/pool.md, "Durability classes"). Stored as
 * port_ready again (finding "port-ready-lost"), so the port_ready checks that
 * follow keep it as they keep one that was not lost (the SM membership
 * re-pushed for its own owner's PKeys when missing), and commit, DEL and GC
 * reach the same outcome. A VF with a netdev (in the host: the attach cut
 * short before the answer, or not moved yet; a lab driver, which names a
 * netdev wherever it is, proves nothing either), one not carrying the GUID,
 * or a missing one: not this case, rolled back by the caller, as after a
 * kill -9 (which never loses a lazy write). A VF with no driver bound (a
 * kill between the VF step's unbind and bind: no netdev anywhere) proves
 * nothing either: rolled back, and the VF reset binds it again. A bound VF
 * without any netdev (vfio-pci) is kept: the safe side, held for its owner
 * with its owner's PKeys until DEL or GC. Dry run,
 * or a store that lost records: reported only. @a is read under its hold.
 * Return: 1 kept (@a and @snap now port_ready), 0 not this case, -1 handled
 * (reported, or the store write failed: left as it is for the next pass).
 */
static int port_ready_lost(struct rec_ctx *r, struct ibvf_alloc *a, struct ibvf_alloc *snap)
{
	const struct ibvf_reconcile_env *env = r->env;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	struct ibvf_attach_vf vf;
	const char *tail = "";
	bool act;
	int ret = 0;

	if (a->state != IBVF_ALLOC_SM_REQUESTED || !a->pci[0] ||
	    env->vf->lookup(env->vf->ctx, a->pci, &vf, err, sizeof(err)) || !vf.guids_known ||
	    vf.port_guid != a->guid || vf.netdev[0] || vf.unbound)
		return 0;
	ibvf_guid_format(a->guid, s);
	act = r->mode != IBVF_PASS_DRY_RUN && !env->store_lost;
	if (act) {
		a->state = IBVF_ALLOC_PORT_READY;
		ret = ibvf_pool_update(env->pool, a, err, sizeof(err));
		if (ret)
			a->state = IBVF_ALLOC_SM_REQUESTED;
	}
	if (act && ret)
		tail = err;
	else if (!act && env->store_lost)
		tail = " (the store lost records: left as it is until 'ibvfctl pool rebuild')";
	finding(r, "port-ready-lost", true, a->guid, -1, a->pci, "store it as port_ready",
		act && !ret,
		"GUID %s of container %.12s ifname %s was left sm_requested, but VF %s carries it "
		"with no netdev in the host netns (moved into the Pod): its port_ready was "
		"written and lost%s%s",
		s, a->owner.container_id, a->owner.ifname, a->pci, act && ret ? ": " : "", tail);
	if (!act || ret) {
		snap->state = IBVF_ALLOC_RELEASING; /* handled here: not an SM orphan */
		return -1;
	}
	*snap = *a;
	return 1;
}

/*
 * A "releasing" record whose release.sm was answered and whose plain release
 * has not come (ops->release_staged, memory only), with its VF still carrying
 * the GUID, a driver bound and no netdev in ibvfd's netns: the plugin's DEL
 * is moving the netdev back from the Pod right now, or was killed before it
 * did. The VF is not reset under that move (a rebind would race it): the
 * record is left as it is (ibvfd's gc skips it too, attach.c do_gc()), and
 * finished by the plain release of the DEL (or of the runtime's retried
 * DEL), or by a pass once the netdev is back in the host (the Pod's netns
 * gone: the kernel returns it). Return: true when left (a notice).
 */
static bool releasing_in_pod(struct rec_ctx *r, const struct ibvf_alloc *a)
{
	const struct ibvf_reconcile_env *env = r->env;
	struct ibvf_attach_vf vf;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];

	if (a->state != IBVF_ALLOC_RELEASING || !a->pci[0] || !env->ops->release_staged ||
	    !env->ops->release_staged(env->ctx, a->guid) ||
	    env->vf->lookup(env->vf->ctx, a->pci, &vf, err, sizeof(err)) || !vf.guids_known ||
	    vf.port_guid != a->guid || vf.unbound || (vf.netdev[0] && if_nametoindex(vf.netdev)))
		return false;
	finding(r, "releasing-in-pod", false, a->guid, -1, a->pci,
		"none: the DEL's release finishes it, or a pass once the netdev is in the host",
		false,
		"GUID %s of container %.12s ifname %s is releasing (SM half done), its VF %s's "
		"netdev is not in the host netns yet: left to the DEL moving it back",
		ibvf_guid_format(a->guid, s), a->owner.container_id, a->owner.ifname, a->pci);
	return true;
}

/* One store record: resume/roll back, check VF and SM. */
static void check_record(struct rec_ctx *r, struct ibvf_alloc *snap, bool sm_listed)
{
	const struct ibvf_reconcile_env *env = r->env;
	struct ibvf_alloc a;
	void *hold;
	char err[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];
	bool pending;
	int ret;

	/*
	 * Decide on the snapshot first: a settled record whose memberships are
	 * all there and that names no VF needs nothing, so a pass over tens of
	 * thousands of owners does not re-read each of them.
	 */
	if (snap->state == IBVF_ALLOC_PORT_READY || snap->state == IBVF_ALLOC_HANDED) {
		const struct ibvf_attach_vf *lv = vf_by_pci(r, snap->pci, NULL);
		bool missing = false;

		for (size_t i = 0; sm_listed && i < snap->n_pkeys; i++)
			missing |= !sm_member_ok(r, snap->pkeys[i], snap->guid);
		/*
		 * ... and whose VF the listing shows with its GUID (and, when
		 * handed, with its netdev not back in the host): no store or VF read
		 */
		if (!missing &&
		    (!snap->pci[0] || (lv && lv->guids_known && lv->port_guid == snap->guid &&
				       !(snap->state == IBVF_ALLOC_HANDED && lv->netdev[0] &&
					 link_in_host(r, lv->netdev)))))
			return;
	}
	if (!env->ops->try_hold(env->ctx, &snap->owner, snap->pci, &hold))
		return; /* a running operation owns it */
	{
		size_t vi;

		/* an undo below may reset the VF: check_vf_orphans() re-reads it */
		if (vf_by_pci(r, snap->pci, &vi))
			r->vf_stale[vi] = true;
	}
	ret = ibvf_pool_get(env->pool, snap->guid, &a, err, sizeof(err));
	*snap = a;
	if (ret || a.state == IBVF_ALLOC_QUARANTINED)
		goto out;
	ibvf_guid_format(a.guid, s);
	/* a warm row a rolled-back store kept next to the record of a Pod's VF */
	if (stale_warm(r, &a, snap))
		goto out;
	/*
	 * A warm VF's record still being set up (engine/warm_vf.c: a warm-up
	 * or a release's new GUID, cut short or not yet done) is the warm
	 * pass's to finish (or roll back, vf.warm off), as long as its VF is
	 * there: not a mid-flight attach, nothing of a tenant's in it.
	 */
	if (a.state == IBVF_ALLOC_ALLOCATED && ibvf_alloc_is_warm(&a) &&
	    (!r->vfs_listed || vf_by_pci(r, a.pci, NULL))) {
		finding(r, "warm-pending", false, a.guid, -1, a.pci, "the warm pass sets it up",
			false, "warm GUID %s of VF %s is not set up yet", s, a.pci);
		goto out;
	}
	/* a lost port_ready (the VF in the Pod): kept, checked as port_ready below */
	ret = port_ready_lost(r, &a, snap);
	if (ret < 0)
		goto out;
	if (a.state < IBVF_ALLOC_PORT_READY || a.state == IBVF_ALLOC_RELEASING) {
		bool mid = a.state != IBVF_ALLOC_RELEASING;
		const char *st = ibvf_alloc_state_name(a.state);

		if (releasing_in_pod(r, &a)) {
			snap->state = IBVF_ALLOC_RELEASING; /* handled here: not an SM orphan */
			goto out;
		}

		/*
		 * A store that lost records may show an older state of the row (a
		 * damaged WAL: a handed attachment read back as "allocated"):
		 * rolling it back would take a running Pod's GUID off its VF. Only
		 * reported until `ibvfctl pool rebuild` (issue 14).
		 */
		if (r->mode == IBVF_PASS_DRY_RUN || env->store_lost) {
			finding(r, mid ? "mid-flight" : "releasing", true, a.guid, -1, a.pci,
				mid ? "roll the attach back" : "finish the release", false,
				"GUID %s of container %.12s ifname %s was left %s%s", s,
				a.owner.container_id, a.owner.ifname, st,
				env->store_lost ? " (the store lost records: left as it is until "
						  "'ibvfctl pool rebuild')"
						: "");
			snap->state = IBVF_ALLOC_RELEASING;
			goto out;
		}
		ret = env->ops->undo(env->ctx, &a, mid ? a.state >= IBVF_ALLOC_SM_REQUESTED : true,
				     &pending, err, sizeof(err));
		finding(r, mid ? "mid-flight" : "releasing", true, a.guid, -1, snap->pci,
			mid ? "roll the attach back" : "finish the release", !ret && !pending,
			"GUID %s of container %.12s ifname %s was left %s%s%s", s,
			a.owner.container_id, a.owner.ifname, st, ret ? ": " : "",
			ret ? err : (pending ? " (SM removal still pending)" : ""));
		snap->state = IBVF_ALLOC_RELEASING; /* handled here: not an SM orphan */
		goto out;
	}
	/* port_ready / handed: the VF must carry the GUID ... */
	if (a.pci[0]) {
		struct ibvf_attach_vf vf;

		ret = env->vf->lookup(env->vf->ctx, a.pci, &vf, err, sizeof(err));
		if (!ret && a.state == IBVF_ALLOC_HANDED && vf.netdev[0] &&
		    if_nametoindex(vf.netdev)) {
			release_in_host(r, &a, &vf);
			snap->state = IBVF_ALLOC_RELEASING; /* handled here: not an SM orphan */
			goto out;
		}
		if (ret)
			finding(r, "vf-missing", true, a.guid, -1, a.pci, "none (report only)",
				false, "GUID %s: VF %s of container %.12s: %s", s, a.pci,
				a.owner.container_id, err);
		else if (vf.guids_known && vf.port_guid != a.guid)
			finding(r, "vf-drift", true, a.guid, -1, a.pci,
				"none (re-attach the Pod's interface)", false,
				"VF %s (PF %s VF %d) carries port GUID %016llx, the store says %s",
				a.pci, a.pf, a.vf_index, (unsigned long long)vf.port_guid, s);
	}
	/* ... and the SM must still have it in every PKey */
	for (size_t i = 0; sm_listed && i < a.n_pkeys; i++) {
		uint16_t pk = ibvf_pkey_key(a.pkeys[i]);
		struct ibvf_sm_member m = {
			.guid = a.guid,
			.membership = ibvf_pkey_is_full(a.pkeys[i]) ? IBVF_MEMBER_FULL
								    : IBVF_MEMBER_LIMITED,
		};
		char e2[IBVF_ERR_LEN + 96];
		bool there = sm_has(r, pk, a.guid);
		const char *kind = there ? "sm-membership" : "sm-missing";
		char what[96];

		if (sm_member_ok(r, a.pkeys[i], a.guid))
			continue;
		if (there)
			snprintf(what, sizeof(what), "holds GUID %s as %s in PKey 0x%04x, not %s",
				 s,
				 ibvf_membership_name(m.membership == IBVF_MEMBER_FULL
							      ? IBVF_MEMBER_LIMITED
							      : IBVF_MEMBER_FULL),
				 pk, ibvf_membership_name(m.membership));
		else
			snprintf(what, sizeof(what), "lost GUID %s from PKey 0x%04x", s, pk);
		/* a store that lost records may show a released owner again: no re-push */
		if (r->mode == IBVF_PASS_DRY_RUN || env->store_lost) {
			finding(r, kind, true, a.guid, pk, a.pci, "re-push the membership", false,
				"the SM %s (container %.12s, %s)%s", what, a.owner.container_id,
				ibvf_alloc_state_name(a.state),
				env->store_lost ? " (the store lost records: not re-pushed until "
						  "'ibvfctl pool rebuild')"
						: "");
			continue;
		}
		ret = ibvf_sm_batch_call(env->batch, IBVF_SM_REQ_ADD, pk, &m,
					 ibvf_mono_ms() + 30000, e2, sizeof(e2));
		finding(r, kind, true, a.guid, pk, a.pci, "re-push the membership", !ret,
			"the SM %s (container %.12s, %s)%s%s", what, a.owner.container_id,
			ibvf_alloc_state_name(a.state), ret ? ": " : "", ret ? e2 : "");
	}
out:
	env->ops->drop(env->ctx, hold);
}

/* r->recs comes from ibvf_pool_list() in GUID order: binary search. */
static const struct ibvf_alloc *store_find(const struct rec_ctx *r, uint64_t guid)
{
	size_t lo = 0, hi = r->n_recs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->recs[mid].guid < guid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == r->n_recs || r->recs[lo].guid != guid ||
	    r->recs[lo].state == IBVF_ALLOC_QUARANTINED)
		return NULL;
	return &r->recs[lo];
}

static bool asked_for(const struct ibvf_alloc *a, uint16_t pkey)
{
	for (size_t k = 0; a && k < a->n_pkeys; k++)
		if (ibvf_pkey_key(a->pkeys[k]) == pkey)
			return true;
	return false;
}

/*
 * The SM lists a warm VF's GUID (engine/warm_vf.c; in no tenant PKey by
 * construction) in a PKey: the store lost the take-over of a Pod that holds
 * it (a rolled-back store). Removing the membership would cut the Pod off,
 * and the warm record could hand the GUID to a second tenant: adopt it, with
 * every PKey the SM shows, as `ibvfctl pool rebuild` would, so the Pod's DEL
 * releases it. Return: true when handled (adopted, or reported in a dry run).
 */
static bool adopt_warm_in_sm(struct rec_ctx *r, const struct ibvf_alloc *a, uint16_t pkey)
{
	const struct ibvf_reconcile_env *env = r->env;
	struct ibvf_alloc ad;
	char s[IBVF_GUID_STR_LEN], err[IBVF_ERR_LEN];
	void *hold;
	int ret;

	if (!a || !ibvf_alloc_is_warm(a))
		return false;
	ibvf_guid_format(a->guid, s);
	if (r->mode == IBVF_PASS_DRY_RUN) {
		finding(r, "warm-in-sm", true, a->guid, pkey, a->pci, "adopt it for the Pod", false,
			"warm GUID %s of VF %s is a member of PKey 0x%04x", s, a->pci, pkey);
		return true;
	}
	if (!env->ops->try_hold(env->ctx, &a->owner, a->pci, &hold))
		return true; /* being taken or warmed right now: the next pass looks again */
	ad = *a;
	memset(&ad.owner, 0, sizeof(ad.owner));
	snprintf(ad.owner.container_id, sizeof(ad.owner.container_id),
		 IBVF_POOL_ADOPTED_PREFIX "%016llx", (unsigned long long)a->guid);
	snprintf(ad.owner.ifname, sizeof(ad.owner.ifname), "adopted");
	ad.n_pkeys = 0;
	for (size_t k = 0; k < r->n_sm && ad.n_pkeys < IBVF_POOL_MAX_PKEYS; k++)
		if (r->sm[k].guid == a->guid && r->sm[k].pkey != IBVF_PKEY_DEFAULT)
			ad.pkeys[ad.n_pkeys++] =
				(uint16_t)(r->sm[k].pkey |
					   (r->sm[k].membership == IBVF_MEMBER_FULL ? 0x8000 : 0));
	ret = ibvf_pool_adopt(env->pool, &ad, err, sizeof(err));
	env->ops->drop(env->ctx, hold);
	if (ret == 1)
		return true; /* adopted for an earlier PKey of this pass, or taken meanwhile */
	finding(r, "warm-in-sm", true, a->guid, pkey, a->pci, "adopt it for the Pod", ret == 0,
		"warm GUID %s of VF %s is a member of PKey 0x%04x: a Pod holds it (the store "
		"lost its attach)%s%s",
		s, a->pci, pkey, ret ? ": " : "; adopted as ", ret ? err : ad.owner.container_id);
	return true;
}

static void check_sm_orphans(struct rec_ctx *r, bool fix)
{
	char s[IBVF_GUID_STR_LEN], e2[IBVF_ERR_LEN + 96];

	for (size_t i = 0; i < r->n_sm; i++) {
		struct sm_entry *m = &r->sm[i];
		struct ibvf_sm_member mem = {.guid = m->guid};
		int ret = 0;

		const struct ibvf_alloc *a = store_find(r, m->guid);

		if (asked_for(a, m->pkey))
			continue;
		if (adopt_warm_in_sm(r, a, m->pkey))
			continue;
		if (fix)
			ret = ibvf_sm_batch_call(r->env->batch, IBVF_SM_REQ_REMOVE, m->pkey, &mem,
						 ibvf_mono_ms() + 30000, e2, sizeof(e2));
		ibvf_guid_format(m->guid, s);
		if (a)
			finding(r, "sm-foreign-pkey", true, m->guid, m->pkey, a->pci,
				"remove the GUID from the PKey", fix && !ret,
				"GUID %s of container %.12s ifname %s is a member of PKey 0x%04x, "
				"which its owner did not ask for%s%s",
				s, a->owner.container_id, a->owner.ifname, m->pkey,
				fix && ret ? ": " : "", fix && ret ? e2 : "");
		else
			finding(r, "sm-orphan", true, m->guid, m->pkey, NULL,
				"remove the GUID from the PKey", fix && !ret,
				"GUID %s is a member of PKey 0x%04x but no owner holds it%s%s", s,
				m->pkey, fix && ret ? ": " : "", fix && ret ? e2 : "");
	}
}

struct q_ctx {
	struct rec_ctx *r;
	uint64_t *guids; /* of r->sm, sorted */
	int64_t list_ms;
};

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static int quarantine_cb(void *arg, const struct ibvf_alloc *a)
{
	struct q_ctx *q = arg;
	bool listed;

	if (a->state != IBVF_ALLOC_QUARANTINED)
		return 0;
	listed = q->r->n_sm && bsearch(&a->guid, q->guids, q->r->n_sm, sizeof(*q->guids), cmp_u64);
	if (listed)
		finding(q->r, "quarantine-restarted", false, a->guid, -1, NULL,
			"keep it in quarantine until the SM is seen without it", true,
			"quarantined GUID %016llx was still (or again) an SM member",
			(unsigned long long)a->guid);
	/* a store error here only delays the GUID's way out of quarantine */
	ibvf_pool_quarantine_seen(q->r->env->pool, a->guid, listed, q->list_ms, NULL, 0);
	return 0;
}

/*
 * What the SM listing (taken at @list_ms) showed for each quarantined GUID
 * of the pass's store snapshot (no second store listing; issue 17). The
 * pool re-reads each record before changing it; a GUID quarantined after the
 * snapshot is looked at by the next pass.
 */
static void check_quarantine(struct rec_ctx *r, int64_t list_ms)
{
	struct q_ctx q = {.r = r, .list_ms = list_ms};

	q.guids = malloc((r->n_sm ? r->n_sm : 1) * sizeof(*q.guids));
	if (!q.guids)
		return; /* the next pass tries again */
	for (size_t i = 0; i < r->n_sm; i++)
		q.guids[i] = r->sm[i].guid;
	ibvf_sort(q.guids, r->n_sm, sizeof(*q.guids), cmp_u64);
	for (size_t i = 0; i < r->n_recs; i++)
		quarantine_cb(&q, &r->recs[i]);
	free(q.guids);
}

/*
 * A record `ibvfctl pool rebuild` adopted from the SM alone (no VF was
 * readable from the command line, so no PCI address) whose GUID this VF
 * carries: bind it to the VF instead of taking the VF for an orphan (and
 * resetting a running Pod's VF), so the owner's DEL (release with the VF's
 * PCI address or GUID) and a new attach see it (issue 14, adopted records).
 * Return: true when bound, or when a live record of the GUID names this VF
 * already (the record find_pci() found there is another, stale one).
 */
static bool bind_adopted(struct rec_ctx *r, const struct ibvf_attach_vf *vf)
{
	const struct ibvf_reconcile_env *env = r->env;
	char s[IBVF_GUID_STR_LEN], err[IBVF_ERR_LEN];
	struct ibvf_alloc a;

	if (ibvf_pool_get(env->pool, vf->port_guid, &a, err, sizeof(err)) ||
	    (a.state != IBVF_ALLOC_HANDED && a.state != IBVF_ALLOC_PORT_READY))
		return false;
	/* a live record of this GUID on this VF (next to a stale one of a lost store) */
	if (!strcmp(a.pci, vf->pci))
		return true;
	if (strncmp(a.owner.container_id, IBVF_POOL_ADOPTED_PREFIX,
		    strlen(IBVF_POOL_ADOPTED_PREFIX)) ||
	    a.pci[0])
		return false;
	snprintf(a.pci, sizeof(a.pci), "%s", vf->pci);
	snprintf(a.pf, sizeof(a.pf), "%s", vf->pf);
	a.vf_index = vf->vf_index;
	if (ibvf_pool_update(env->pool, &a, err, sizeof(err))) {
		log_warn("reconcile: binding adopted GUID %s to VF %s failed: %s",
			 ibvf_guid_format(a.guid, s), vf->pci, err);
		return false;
	}
	finding(r, "adopted-bound", false, a.guid, -1, vf->pci, "none more", true,
		"the adopted record %s of GUID %s is bound to VF %s, which carries it",
		a.owner.container_id, ibvf_guid_format(a.guid, s), vf->pci);
	return true;
}

static void check_vf_orphans(struct rec_ctx *r, bool fix)
{
	const struct ibvf_reconcile_env *env = r->env;
	char s[IBVF_GUID_STR_LEN], err[IBVF_ERR_LEN];

	for (size_t i = 0; i < r->n_vfs; i++) {
		struct ibvf_attach_vf *vf = &r->vfs[i];
		const struct ibvf_alloc *snap;
		struct ibvf_alloc a;
		void *hold;
		int ret;

		if (!vf->guids_known || !in_ranges(r, vf->port_guid))
			continue;
		ibvf_guid_format(vf->port_guid, s);
		for (uint32_t j = r->vf_dup_of[i]; j; j = r->vf_dup_of[j - 1])
			finding(r, "duplicate-guid", true, vf->port_guid, -1, vf->pci,
				"none (release one of the attachments)", false,
				"GUID %s is on VF %s and on VF %s", s, r->vfs[j - 1].pci, vf->pci);
		/*
		 * The pass's store snapshot explains most VFs: a live record of
		 * this GUID on this VF. Only the others are read again, under
		 * the hold (one store query per pass, not per VF; issue 17).
		 */
		snap = r->vf_stale[i] ? NULL : store_find(r, vf->port_guid);
		if (snap && !strcmp(snap->pci, vf->pci) && snap->state != IBVF_ALLOC_RELEASING)
			continue;
		if (!env->ops->try_hold(env->ctx, NULL, vf->pci, &hold))
			continue; /* being attached or released right now */
		{
			struct ibvf_attach_vf now;

			/* what it carries now: the listing is older than the store snapshot */
			if (env->vf->lookup(env->vf->ctx, vf->pci, &now, err, sizeof(err)) == 0) {
				*vf = now;
				r->vf_stale[i] = false;
			}
			if (!vf->guids_known || !in_ranges(r, vf->port_guid)) {
				env->ops->drop(env->ctx, hold);
				continue;
			}
			ibvf_guid_format(vf->port_guid, s);
		}
		ret = ibvf_pool_find_pci(env->pool, vf->pci, &a, err, sizeof(err));
		/* (a releasing record whose release.sm was answered: its DEL's, releasing_in_pod())
		 */
		if (ret == 0 && a.guid == vf->port_guid &&
		    (a.state != IBVF_ALLOC_RELEASING ||
		     (env->ops->release_staged && env->ops->release_staged(env->ctx, a.guid)))) {
			env->ops->drop(env->ctx, hold);
			continue;
		}
		/*
		 * (also when a stale record of a lost store names this VF with
		 * another GUID, a warm one at "allocated" too: before the skip
		 * below, or the warm pass would take the Pod's VF for a free one)
		 */
		if ((ret == -ENOENT || (ret == 0 && a.guid != vf->port_guid)) &&
		    bind_adopted(r, vf)) {
			env->ops->drop(env->ctx, hold);
			continue;
		}
		/* the released tenant's GUID, until the warm pass sets the VF's new one */
		if (ret == 0 && a.state == IBVF_ALLOC_ALLOCATED && ibvf_alloc_is_warm(&a)) {
			env->ops->drop(env->ctx, hold);
			continue;
		}
		if (ret == 0 || ret == -ENOENT) {
			int fret = 0;

			if (fix) {
				/* reset it as a release would: parked GUID or 0, and the
				 * record's pre-attach link state when there is a record */
				char prev_ls[sizeof(a.prev_link_state)] = "";

				if (ret == 0)
					memcpy(prev_ls, a.prev_link_state, sizeof(prev_ls));
				memset(&a, 0, sizeof(a));
				a.guid = vf->port_guid;
				snprintf(a.pci, sizeof(a.pci), "%s", vf->pci);
				snprintf(a.pf, sizeof(a.pf), "%s", vf->pf);
				a.vf_index = vf->vf_index;
				uint64_t parked = env->ops->parked_guid(env->ctx);

				fret = env->vf->program(env->vf->ctx, vf, parked, parked,
							prev_ls[0] ? prev_ls : NULL, err,
							sizeof(err));
				r->vf_stale[i] = true;
			}
			finding(r, "vf-orphan", true, vf->port_guid, -1, vf->pci,
				"reset the VF's GUIDs to the parked value (or 0)", fix && !fret,
				"VF %s (PF %s VF %d) carries GUID %s of the ibvf ranges but no owner "
				"holds it there%s%s",
				vf->pci, vf->pf, vf->vf_index, s, fix && fret ? ": " : "",
				fix && fret ? err : "");
		}
		env->ops->drop(env->ctx, hold);
	}
}

/*
 * The GUIDs the VFs carry now are not allocatable, whatever the store says
 * (issue 14). A VF this pass may have changed (an undo or a fix-pass reset)
 * is read again to leave its old GUID out.
 */
static void set_vf_in_use(struct rec_ctx *r)
{
	const struct ibvf_reconcile_env *env = r->env;
	uint64_t *g = calloc(2 * r->n_vfs + 1, sizeof(*g));
	size_t n = 0;

	if (!g)
		return; /* the previous set stays */
	for (size_t i = 0; i < r->n_vfs; i++) {
		struct ibvf_attach_vf *vf = &r->vfs[i];
		struct ibvf_attach_vf now;
		char e3[IBVF_ERR_LEN];

		if (!vf->guids_known)
			continue;
		if (r->vf_stale[i] &&
		    env->vf->lookup(env->vf->ctx, vf->pci, &now, e3, sizeof(e3)) == 0 &&
		    now.guids_known)
			*vf = now;
		g[n++] = vf->port_guid;
		g[n++] = vf->node_guid;
	}
	ibvf_pool_set_in_use(env->pool, IBVF_VIEW_VF, g, n);
	free(g);
}

/*
 * The GUIDs the ib-sriov CNI plugin's cache records (<dir>/<containerID>-
 * <ifname>, "ibvf": {"guid"}; docs/cni.md, "Cache format") are in use on
 * this node until the plugin's DEL or GC removes the entry, whatever the
 * store says: not allocatable (issue 14, "a GUID of the ranges that any view
 * shows in use ... in the CNI cache"). Files are read without blocking and
 * only if regular; a missing directory is an empty view. An unreadable
 * directory keeps the previous set.
 */
int ibvf_cni_cache_each(const char *dir, int (*cb)(void *arg, json_t *entry), void *arg)
{
	struct dirent *de;
	int ret = 0;
	DIR *d;

	d = opendir(dir);
	if (!d)
		return -errno;
	while (!ret && (de = readdir(d))) {
		char path[PATH_MAX], err[IBVF_ERR_LEN], *buf = NULL;
		size_t len;
		json_t *j;

		if (de->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path) ||
		    ibvf_file_read_regular(path, 1 << 20, 0, &buf, &len, NULL, err, sizeof(err)))
			continue;
		j = json_loadb(buf, len, 0, NULL);
		free(buf);
		if (j)
			ret = cb(arg, j);
		json_decref(j);
	}
	closedir(d);
	return ret;
}

struct cni_view {
	struct rec_ctx *r;
	uint64_t *g;
	size_t n, cap;
};

static int cni_view_cb(void *arg, json_t *j)
{
	struct cni_view *v = arg;
	const char *gs = json_string_value(json_object_get(json_object_get(j, "ibvf"), "guid"));
	uint64_t g = 0;

	if (!gs || ibvf_guid_parse(gs, &g, NULL, 0) || !in_ranges(v->r, g))
		return 0;
	if (v->n == v->cap) {
		void *nv = realloc(v->g, (v->cap = v->cap ? 2 * v->cap : 64) * sizeof(*v->g));

		if (!nv)
			return -ENOMEM;
		v->g = nv;
	}
	v->g[v->n++] = g;
	return 0;
}

/*
 * The GUIDs the ib-sriov CNI plugin's cache records (<dir>/<containerID>-
 * <ifname>, "ibvf": {"guid"}; docs/cni.md, "Cache format") are in use on
 * this node until the plugin's DEL or GC removes the entry, whatever the
 * store says: not allocatable (issue 14, "a GUID of the ranges that any view
 * shows in use ... in the CNI cache"). A missing directory is an empty view.
 * An unreadable directory keeps the previous set.
 */
static void set_cni_in_use(struct rec_ctx *r)
{
	const struct ibvf_reconcile_env *env = r->env;
	struct cni_view v = {.r = r};
	int ret;

	if (!env->cni_cache_dir || !env->cni_cache_dir[0])
		return;
	ret = ibvf_cni_cache_each(env->cni_cache_dir, cni_view_cb, &v);
	if (ret == -ENOENT)
		ibvf_pool_set_in_use(env->pool, IBVF_VIEW_CNI, NULL, 0);
	else if (ret == 0)
		ibvf_pool_set_in_use(env->pool, IBVF_VIEW_CNI, v.g, v.n);
	else if (ret != -ENOMEM)
		log_warn("reconcile: CNI cache %s not readable: %s", env->cni_cache_dir,
			 strerror(-ret));
	free(v.g);
}

static int store_audit_cb(void *arg, const struct ibvf_audit_finding *f)
{
	struct rec_ctx *r = arg;
	char kind[48];

	snprintf(kind, sizeof(kind), "store-%s", ibvf_audit_kind_name(f->kind));
	finding(r, kind, f->problem, f->guid, -1, NULL,
		f->kind == IBVF_AUDIT_EXPIRED_QUARANTINE ? "free the GUID (done every pass)"
							 : "see ibvfctl pool audit",
		false, "%s", f->detail);
	return 0;
}

int ibvf_reconcile_run(const struct ibvf_reconcile_env *env, enum ibvf_reconcile_pass mode,
		       ibvf_finding_fn cb, void *arg, char *err, size_t errlen)
{
	struct rec_ctx r = {.env = env, .mode = mode, .cb = cb, .cb_arg = arg};
	const struct ibvf_pool_filter all_recs = {.include_quarantined = true, .pkey = -1};
	bool fix = mode == IBVF_PASS_FIX;
	char e2[IBVF_ERR_LEN] = "";
	bool sm_listed = false;
	int64_t list_ms = ibvf_pool_clock_ms(env->pool);
	int ret;

	/* 1. the SM's view first (see the comment at the top) */
	if (env->check_sm) {
		struct ibvf_sm_backend *b;
		uint64_t t0 = ibvf_mono_ns();
		const struct ibvf_sm_ops *ops = ibvf_sm_batch_lock(env->batch, &b);

		ret = ops->list_members(b, -1, sm_cb, &r, e2, sizeof(e2));
		ibvf_sm_batch_unlock(env->batch);
		eng_metrics_sm_call("list", 0, (double)(ibvf_mono_ns() - t0) / 1e9, ret);
		sm_listed = ret >= 0;
		if (sm_listed && r.n_sm)
			ibvf_sort(r.sm, r.n_sm, sizeof(*r.sm), cmp_sm);
		if (ret < 0) {
			r.n_sm = 0;
			finding(&r, "sm-unreachable", true, 0, -1, NULL,
				"none (retried every pass)", false,
				"listing SM membership failed: %s", e2[0] ? e2 : strerror(-ret));
		}
		/* what the SM lists is not allocatable, whatever the store says */
		if (ret >= 0)
			ibvf_pool_set_in_use(env->pool, IBVF_VIEW_SM, r.used, r.n_used);
		/* the noop backend keeps no membership: nothing to compare */
		if (!strcmp(ops->name, "noop"))
			sm_listed = false;
	}

	/*
	 * 2. the VFs, listed once and indexed (check_record() compares with
	 * the listing; a mismatch is read again under the hold). After the
	 * SM, before the store: a record is written before its VF changes.
	 */
	if (env->vf->list) {
		ret = env->vf->list(env->vf->ctx, vf_cb, &r, e2, sizeof(e2));
		if (ret < 0) {
			r.n_vfs = 0;
			finding(&r, "vf-list-failed", true, 0, -1, NULL, "none", false,
				"listing VFs failed: %s", e2);
		} else if (index_vfs(&r)) {
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory indexing %zu VFs",
					r.n_vfs);
			goto out;
		} else {
			r.vfs_listed = true;
		}
	}

	/*
	 * 3. the store: one listing (quarantined records too, for
	 * check_quarantine()), then each record against the SM and VF listings
	 */
	ret = ibvf_pool_list(env->pool, &all_recs, rec_cb, &r, err, errlen);
	if (ret < 0)
		goto out;
	for (size_t i = 0; i < r.n_recs; i++)
		if (r.recs[i].state != IBVF_ALLOC_QUARANTINED)
			check_record(&r, &r.recs[i], sm_listed);
	if (sm_listed) {
		/* memberships of pool GUIDs are ibvf's: removed unless a dry run, or
		 * the store lost records and cannot tell an orphan from a Pod's */
		check_sm_orphans(&r, mode != IBVF_PASS_DRY_RUN && !env->store_lost);
		if (mode != IBVF_PASS_DRY_RUN)
			check_quarantine(&r, list_ms);
	}

	/* 4. VFs with a pool GUID no record holds there */
	if (r.vfs_listed) {
		check_vf_orphans(&r, fix);
		set_vf_in_use(&r);
	}

	/* the CNI plugin's cache: one more in-use view */
	set_cni_in_use(&r);

	/* 5. the store's own consistency */
	ret = ibvf_pool_audit(env->pool, store_audit_cb, &r, err, errlen);
	if (ret >= 0)
		ret = 0;
out:
	free(r.sm);
	free(r.used);
	free(r.recs);
	free(r.vfs);
	free(r.vf_stale);
	free(r.pci_slot);
	free(r.vf_dup_of);
	free(r.link_slot);
	if (r.links)
		if_freenameindex(r.links);
	if (ret < 0)
		return ret;
	log_debug("reconciliation: %zu records, %zu SM members, %zu VFs, %d problem(s)", r.n_recs,
		  r.n_sm, r.n_vfs, r.problems);
	return r.problems;
}
