// SPDX-License-Identifier: MIT
/*
 * ibvfctl's offline path: what the pool commands do when ibvfd is not
 * running (nothing answers on api.socket, or only a stale socket file is
 * left). Then ibvfctl works on the store directly, says so on stderr, and
 * holds the state directory's lock (statedir.h) while it does: exclusively
 * to change the store, shared to read it for an audit. ibvfd takes the same
 * lock before it opens the store, so the two never write at once, and a
 * lock held while the socket does not answer (ibvfd starting, or hung) is
 * refused instead of written under.
 *
 * With ibvfd running every change goes through its API (ctl_pool.c,
 * ctl_daemon.c); nothing here builds an engine.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "ctl.h"
#include "err.h"
#include "log.h"
#include "release_spool.h"
#include "sm_loader.h"
#include "statedir.h"
#include "vf_driver.h"
#include "vf_inventory.h"

/* An offline writer waits this long for another offline ibvfctl, ms. */
#define CTL_LOCK_WAIT_MS 5000

int ctl_offline_begin(struct ctl_ctx *ctx, bool write)
{
	char err[IBVF_ERR_LEN];
	pid_t holder = 0;
	int ret = ctl_load_config(ctx);

	if (ret)
		return ret;
	if (ctx->store_lock >= 0)
		return CTL_OK;
	ret = ibvf_state_lock(ctx->cfg.state_dir, write, write, CTL_LOCK_WAIT_MS, &ctx->store_lock,
			      &holder, err, sizeof(err));
	if (ret == -EWOULDBLOCK)
		return ctl_error(CTL_FAILED,
				 "ibvfd does not answer on %s, but %s/%s is locked by %s%.0d "
				 "(ibvfd starting or not responding, or another ibvfctl): "
				 "refusing to work on the store behind it; retry when ibvfd "
				 "answers, or stop it",
				 ctx->cfg.api.socket, ctx->cfg.state_dir, IBVF_STATE_LOCK_NAME,
				 holder ? "pid " : "another process", holder);
	/* a reader needs no lock where no writer ever was (ctl_open_pool says why) */
	if (ret && !(ret == -ENOENT && !write))
		return ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "%s", err);
	fprintf(stderr,
		"ibvfctl: ibvfd is not running (nothing answers on %s): working on the store "
		"directly\n",
		ctx->cfg.api.socket);
	return CTL_OK;
}

int ctl_offline_allocate(struct ctl_ctx *ctx, const struct ibvf_alloc_request *req,
			 struct ibvf_alloc *out)
{
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN];
	int ret = ctl_offline_begin(ctx, true);

	if (!ret)
		ret = ctl_open_pool(ctx, true, &p);
	if (ret)
		return ret;
	ret = ibvf_pool_allocate(p, req, out, err, sizeof(err));
	ibvf_pool_close(p);
	if (ret) /* -EINVAL: a bad owner field or GUID given on the command line */
		return ctl_error(ret == -EINVAL ? CTL_USAGE : CTL_FAILED, "%s", err);
	return CTL_OK;
}

int ctl_offline_release(struct ctl_ctx *ctx, uint64_t guid, bool *released)
{
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN];
	int ret = ctl_offline_begin(ctx, true);

	if (!ret)
		ret = ctl_open_pool(ctx, true, &p);
	if (ret)
		return ret;
	ret = ibvf_pool_release(p, guid, err, sizeof(err));
	ibvf_pool_close(p);
	if (ret < 0)
		return ctl_error(CTL_FAILED, "%s", err);
	*released = ret == 0;
	return CTL_OK;
}

/* ------------------------------------------------------------- audit -- */

struct vf_seen {
	char pci[IBVF_PCI_LEN];
	struct ibvf_vf_state st;
};

struct sm_seen {
	uint16_t pkey;
	uint64_t guid;
	bool full;
};

struct audit {
	struct ctl_ctx *ctx;
	json_t *rows;
	int problems;
	struct ibvf_alloc *recs;
	size_t n_recs, cap_recs;
	struct vf_seen *vfs;
	size_t n_vfs;
	bool vfs_read;
	struct sm_seen *sm;
	size_t n_sm, cap_sm;
	bool sm_read;
	bool all_sm; /* rebuild: members of unmanaged PKeys count too */
};

static void add_finding(struct audit *au, const char *kind, bool problem, uint64_t guid, int pkey,
			const char *pci, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));

static void add_finding(struct audit *au, const char *kind, bool problem, uint64_t guid, int pkey,
			const char *pci, const char *fmt, ...)
{
	char detail[512], g[IBVF_GUID_STR_LEN];
	va_list ap;
	json_t *o;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	au->problems += problem;
	o = json_pack("{s:s,s:s,s:s,s:i,s:o}", "kind", kind, "severity",
		      problem ? "problem" : "notice", "guid", guid ? ibvf_guid_format(guid, g) : "",
		      "count", guid ? 1 : 0, "detail", ctl_json_text(detail));
	if (pkey >= 0) {
		char s[sizeof("0xffffffff")]; /* room for any non-negative int */

		snprintf(s, sizeof(s), "0x%04x", pkey);
		json_object_set_new(o, "pkey", json_string(s));
	}
	if (pci && *pci)
		json_object_set_new(o, "pci", ctl_json_text(pci));
	json_array_append_new(au->rows, o);
}

static int store_cb(void *arg, const struct ibvf_audit_finding *f)
{
	struct audit *au = arg;
	char s[IBVF_GUID_STR_LEN];

	au->problems += f->problem;
	return json_array_append_new(
		au->rows, json_pack("{s:s,s:s,s:s,s:o,s:o}", "kind", ibvf_audit_kind_name(f->kind),
				    "severity", f->problem ? "problem" : "notice", "guid",
				    f->guid ? ibvf_guid_format(f->guid, s) : "", "count",
				    ctl_count_json(f->count), "detail", ctl_json_text(f->detail)));
}

static int rec_cb(void *arg, const struct ibvf_alloc *a)
{
	struct audit *au = arg;

	if (au->n_recs == au->cap_recs) {
		size_t cap = au->cap_recs ? au->cap_recs * 2 : 64;
		void *n = realloc(au->recs, cap * sizeof(*au->recs));

		if (!n)
			return -ENOMEM;
		au->recs = n;
		au->cap_recs = cap;
	}
	au->recs[au->n_recs++] = *a;
	return 0;
}

/* The VFs as the VF layer reads them back: inventory + the configured driver. */
static void read_vfs(struct audit *au)
{
	struct ctl_ctx *ctx = au->ctx;
	struct ibvf_inventory *inv = NULL;
	struct ibvf_vf_driver *drv = NULL;
	char err[IBVF_ERR_LEN];
	size_t n = 0;

	/* the lab drivers that keep VFs outside sysfs cannot be read from here */
	if (strcmp(ctx->cfg.vf.driver, "netlink") && strcmp(ctx->cfg.vf.driver, "ibsim")) {
		fprintf(stderr, "ibvfctl: VF checks skipped: VF driver '%s' has no offline use\n",
			ctx->cfg.vf.driver);
		return;
	}
	if (ibvf_inventory_scan(ctx->cfg.sysfs_root, &inv, err, sizeof(err)) ||
	    ibvf_config_vf_driver_create(&ctx->cfg, &drv, err, sizeof(err))) {
		fprintf(stderr, "ibvfctl: VF checks skipped: %s\n", err);
		ibvf_inventory_free(inv);
		return;
	}
	for (size_t p = 0; p < inv->n_pfs; p++)
		n += inv->pfs[p].n_vfs;
	au->vfs = calloc(n + 1, sizeof(*au->vfs));
	for (size_t p = 0; au->vfs && p < inv->n_pfs; p++) {
		const struct ibvf_pf_info *pf = &inv->pfs[p];
		const struct ibvf_vf_info **vfs = calloc(pf->n_vfs + 1, sizeof(*vfs));
		struct ibvf_vf_state *st = calloc(pf->n_vfs + 1, sizeof(*st));

		for (size_t i = 0; vfs && st && i < pf->n_vfs; i++)
			vfs[i] = &pf->vfs[i];
		if (vfs && st && pf->n_vfs &&
		    drv->ops->read_back(drv, vfs, pf->n_vfs, st, err, sizeof(err)))
			add_finding(au, "vf-read-failed", true, 0, -1, pf->pci,
				    "reading back the VFs of PF %s failed: %s", pf->pci, err);
		for (size_t i = 0; vfs && st && i < pf->n_vfs; i++) {
			struct vf_seen *v = &au->vfs[au->n_vfs++];

			snprintf(v->pci, sizeof(v->pci), "%s", pf->vfs[i].pci);
			v->st = st[i];
		}
		free(vfs);
		free(st);
	}
	au->vfs_read = au->vfs != NULL;
	ibvf_vf_driver_destroy(drv);
	ibvf_inventory_free(inv);
}

static bool in_ranges(const struct ctl_ctx *ctx, uint64_t g)
{
	for (size_t i = 0; i < ctx->cfg.pool.n_ranges; i++)
		if (g >= ctx->cfg.pool.ranges[i].start && g <= ctx->cfg.pool.ranges[i].end)
			return true;
	return false;
}

static int sm_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct audit *au = arg;

	if ((!managed && !au->all_sm) || !in_ranges(au->ctx, m->guid) ||
	    ibvf_pkey_key(pkey) == IBVF_PKEY_DEFAULT)
		return 0;
	if (au->n_sm == au->cap_sm) {
		size_t cap = au->cap_sm ? au->cap_sm * 2 : 64;
		void *n = realloc(au->sm, cap * sizeof(*au->sm));

		if (!n)
			return -ENOMEM;
		au->sm = n;
		au->cap_sm = cap;
	}
	au->sm[au->n_sm++] =
		(struct sm_seen){ibvf_pkey_key(pkey), m->guid, m->membership == IBVF_MEMBER_FULL};
	return 0;
}

/* The SM's membership, read only (list_members) through the configured backend. */
static void read_sm(struct audit *au)
{
	struct ctl_ctx *ctx = au->ctx;
	struct ibvf_sm sm = {0};
	char err[IBVF_ERR_LEN] = "";
	int ret;

	if (!strcmp(ctx->cfg.sm.backend, "noop"))
		return; /* keeps no membership: nothing to compare */
	ret = ibvf_sm_open(ctx->cfg.sm.module_dir, ctx->cfg.sm.backend, ctx->cfg.sm.backend_json,
			   &sm, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "ibvfctl: SM checks skipped: %s\n", err);
		return;
	}
	ret = sm.mod->ops->list_members(sm.b, -1, sm_cb, au, err, sizeof(err));
	ibvf_sm_close(&sm);
	if (ret < 0) {
		add_finding(au, "sm-unreachable", true, 0, -1, NULL,
			    "listing SM membership failed: %s", err[0] ? err : strerror(-ret));
		return;
	}
	au->sm_read = true;
}

static const struct vf_seen *vf_at(const struct audit *au, const char *pci)
{
	for (size_t i = 0; i < au->n_vfs; i++)
		if (!strcmp(au->vfs[i].pci, pci))
			return &au->vfs[i];
	return NULL;
}

static bool sm_has(const struct audit *au, uint16_t pkey, uint64_t guid)
{
	for (size_t i = 0; i < au->n_sm; i++)
		if (au->sm[i].pkey == pkey && au->sm[i].guid == guid)
			return true;
	return false;
}

static const struct ibvf_alloc *rec_of(const struct audit *au, uint64_t guid)
{
	for (size_t i = 0; i < au->n_recs; i++)
		if (au->recs[i].guid == guid)
			return &au->recs[i];
	return NULL;
}

/* One record against the VFs and the SM; what ibvfd would repair is named. */
static void check_rec(struct audit *au, const struct ibvf_alloc *a)
{
	const char *st = ibvf_alloc_state_name(a->state);
	char s[IBVF_GUID_STR_LEN];
	const struct vf_seen *v;

	ibvf_guid_format(a->guid, s);
	if (a->state == IBVF_ALLOC_RELEASING) {
		add_finding(au, "releasing", true, a->guid, -1, a->pci,
			    "GUID %s of container %.12s ifname %s was left releasing; ibvfd "
			    "finishes the release when it starts",
			    s, a->owner.container_id, a->owner.ifname);
		return;
	}
	/* an allocation bound to a VF but not settled: a prepare cut short */
	if (a->state < IBVF_ALLOC_PORT_READY && a->pci[0]) {
		add_finding(au, "mid-flight", true, a->guid, -1, a->pci,
			    "GUID %s of container %.12s ifname %s was left %s; ibvfd rolls the "
			    "attach back when it starts (keeps it as port_ready if its VF "
			    "carries the GUID in a Pod's netns: a lost port_ready)",
			    s, a->owner.container_id, a->owner.ifname, st);
		return;
	}
	if (a->state < IBVF_ALLOC_PORT_READY)
		return; /* a pool allocate without a VF */
	if (au->vfs_read && a->pci[0]) {
		v = vf_at(au, a->pci);
		if (!v)
			add_finding(au, "vf-missing", true, a->guid, -1, a->pci,
				    "GUID %s is held on VF %s, which is not there", s, a->pci);
		else if (v->st.port_guid_known && v->st.port_guid != a->guid)
			add_finding(au, "vf-drift", true, a->guid, -1, a->pci,
				    "VF %s carries port GUID %016llx, its record GUID %s", a->pci,
				    (unsigned long long)v->st.port_guid, s);
	}
	for (size_t i = 0; au->sm_read && i < a->n_pkeys; i++) {
		uint16_t pk = ibvf_pkey_key(a->pkeys[i]);

		if (!sm_has(au, pk, a->guid))
			add_finding(au, "sm-missing", true, a->guid, pk, a->pci,
				    "GUID %s (%s) is not a member of PKey 0x%04x in the SM; ibvfd "
				    "re-pushes it when it starts",
				    s, st, pk);
	}
}

static void check_orphans(struct audit *au)
{
	char s[IBVF_GUID_STR_LEN];

	for (size_t i = 0; au->sm_read && i < au->n_sm; i++) {
		const struct ibvf_alloc *a = rec_of(au, au->sm[i].guid);
		bool asked = false;

		for (size_t k = 0; a && k < a->n_pkeys; k++)
			asked |= ibvf_pkey_key(a->pkeys[k]) == au->sm[i].pkey;
		if (a && a->state == IBVF_ALLOC_QUARANTINED)
			a = NULL; /* released: nobody holds it */
		if (!a)
			add_finding(au, "sm-orphan", true, au->sm[i].guid, au->sm[i].pkey, NULL,
				    "GUID %s is a member of PKey 0x%04x but no owner holds it "
				    "(ibvfd's next pass removes it)",
				    ibvf_guid_format(au->sm[i].guid, s), au->sm[i].pkey);
		else if (!asked)
			add_finding(au, "sm-foreign-pkey", true, au->sm[i].guid, au->sm[i].pkey,
				    a->pci,
				    "GUID %s of container %.12s ifname %s is a member of PKey "
				    "0x%04x, which its owner did not ask for (ibvfd's next pass "
				    "removes it)",
				    ibvf_guid_format(au->sm[i].guid, s), a->owner.container_id,
				    a->owner.ifname, au->sm[i].pkey);
	}
	for (size_t i = 0; au->vfs_read && i < au->n_vfs; i++) {
		const struct vf_seen *v = &au->vfs[i];

		if (!v->st.port_guid_known || !in_ranges(au->ctx, v->st.port_guid))
			continue;
		for (size_t k = 0; k < i; k++)
			if (au->vfs[k].st.port_guid_known &&
			    au->vfs[k].st.port_guid == v->st.port_guid)
				add_finding(au, "duplicate-guid", true, v->st.port_guid, -1, v->pci,
					    "VFs %s and %s carry the same port GUID %s",
					    au->vfs[k].pci, v->pci,
					    ibvf_guid_format(v->st.port_guid, s));
		if (!rec_of(au, v->st.port_guid))
			add_finding(au, "vf-orphan", true, v->st.port_guid, -1, v->pci,
				    "VF %s carries GUID %s of the ranges but no owner holds it "
				    "(ibvfctl daemon audit --fix resets it)",
				    v->pci, ibvf_guid_format(v->st.port_guid, s));
	}
}

static int spool_cb(void *arg, const char *name, const struct ibvf_release_req *r)
{
	struct audit *au = arg;

	if (!r)
		add_finding(au, "release-pending", true, 0, -1, NULL,
			    "%s in ibvfd's release spool is not a release request (ibvfd drops it)",
			    name);
	else
		add_finding(au, "release-pending", true, r->guid, -1, r->device_id,
			    "a CNI DEL of container %.12s ifname %s found ibvfd down: ibvfd "
			    "releases the owner when it starts",
			    r->container_id, r->ifname);
	return 0;
}

/* Release requests the CNI plugin left while ibvfd was down (release_spool.h). */
static void check_spool(struct audit *au)
{
	char dir[4096], err[IBVF_ERR_LEN];

	if (!au->ctx->cfg.api.socket || ibvf_spool_dir(au->ctx->cfg.api.socket, dir, sizeof(dir)))
		return;
	if (ibvf_spool_scan(dir, spool_cb, au, err, sizeof(err)) < 0)
		add_finding(au, "release-pending", true, 0, -1, NULL, "%s", err);
}

int ctl_offline_audit(struct ctl_ctx *ctx, bool fix, json_t **findings, int *problems)
{
	struct ibvf_pool_filter f = {.pkey = -1};
	struct audit au = {.ctx = ctx};
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN];
	int ret = ctl_offline_begin(ctx, fix);

	*findings = NULL;
	if (!ret)
		ret = ctl_open_pool(ctx, fix, &p);
	if (ret)
		return ret;
	if (fix) {
		ret = ibvf_pool_expire(p, err, sizeof(err));
		if (ret < 0) {
			ibvf_pool_close(p);
			return ctl_error(CTL_FAILED, "%s", err);
		}
		if (!ctx->json)
			printf("freed %d GUID(s) whose quarantine was over\n", ret);
	}
	au.rows = json_array();
	{
		char why[IBVF_ERR_LEN];

		/* read-only or not, a store that lost records is the first finding (issue 14) */
		if (ibvf_pool_lost(p, why, sizeof(why)))
			add_finding(&au, "store-lost", true, 0, -1, NULL,
				    "the GUID pool store lost records (%.400s): what it shows may "
				    "miss GUIDs in use; run 'ibvfctl pool rebuild'",
				    why);
	}
	/* the SM first, as ibvfd's reconciliation does (an attach in progress is never an orphan)
	 */
	read_sm(&au);
	ret = ibvf_pool_list(p, &f, rec_cb, &au, err, sizeof(err));
	if (ret >= 0)
		ret = ibvf_pool_audit(p, store_cb, &au, err, sizeof(err));
	ibvf_pool_close(p);
	if (ret < 0) {
		ret = ctl_error(CTL_FAILED, "%s", ret == -ENOMEM ? "out of memory" : err);
		goto out;
	}
	read_vfs(&au);
	for (size_t i = 0; i < au.n_recs; i++)
		check_rec(&au, &au.recs[i]);
	check_orphans(&au);
	check_spool(&au);
	fprintf(stderr, "ibvfctl: checked store%s%s from here%s\n",
		au.vfs_read ? (au.sm_read ? ", VFs and SM" : " and VFs") : "",
		!au.vfs_read && au.sm_read ? " and SM" : "",
		fix ? " (--fix changes the store only: ibvfd repairs VFs and SM when it starts)"
		    : " (dry run: nothing changed)");
	*findings = au.rows;
	au.rows = NULL;
	*problems = au.problems;
	ret = CTL_OK;
out:
	json_decref(au.rows);
	free(au.recs);
	free(au.vfs);
	free(au.sm);
	return ret;
}

/* ----------------------------------------------------------- rebuild -- */

/* Adopt @guid (on VF @pci, or "" for SM-only) with its SM PKeys; a row for each. */
static void adopt_one(struct audit *au, struct ibvf_pool *p, uint64_t guid, const char *pci,
		      json_t *rows, int *failed)
{
	struct ibvf_alloc a = {.guid = guid, .vf_index = -1};
	char s[IBVF_GUID_STR_LEN], cid[64], err[IBVF_ERR_LEN], pk[IBVF_POOL_MAX_PKEYS * 7 + 1] = "";
	int ret;

	ibvf_guid_format(guid, s);
	snprintf(cid, sizeof(cid), IBVF_POOL_ADOPTED_PREFIX "%016llx", (unsigned long long)guid);
	snprintf(a.owner.container_id, sizeof(a.owner.container_id), "%s", cid);
	snprintf(a.owner.ifname, sizeof(a.owner.ifname), "adopted");
	snprintf(a.pci, sizeof(a.pci), "%s", pci);
	for (size_t i = 0; i < au->n_sm && a.n_pkeys < IBVF_POOL_MAX_PKEYS; i++) {
		if (au->sm[i].guid != guid)
			continue;
		a.pkeys[a.n_pkeys++] = (uint16_t)(au->sm[i].pkey | (au->sm[i].full ? 0x8000 : 0));
		snprintf(pk + strlen(pk), sizeof(pk) - strlen(pk), "%s0x%04x",
			 a.n_pkeys > 1 ? "," : "", au->sm[i].pkey);
	}
	ret = ibvf_pool_adopt(p, &a, err, sizeof(err));
	if (ret == 1)
		return; /* held (adopted above, or a record kept it) */
	if (ret < 0) {
		fprintf(stderr, "ibvfctl: adopting GUID %s: %s\n", s, err);
		(*failed)++;
		return;
	}
	json_array_append_new(rows,
			      json_pack("{s:s,s:s,s:s,s:s}", "guid", s, "pci", pci[0] ? pci : "-",
					"pkeys", pk[0] ? pk : "-", "owner", cid));
}

/*
 * A record left mid-flight (allocated .. sm_confirmed) by a store that lost
 * records may be an older state of a handed attachment (a damaged WAL). If
 * the SM lists its GUID in one of its PKeys (or its VF carries it), it is in
 * use: set it port_ready with its owner kept, so ibvfd's start does not roll
 * a running Pod's attachment back; the owner's DEL releases it as usual.
 */
static void promote_in_use(struct audit *au, struct ibvf_pool *p, json_t *rows, int *failed)
{
	char s[IBVF_GUID_STR_LEN], err[IBVF_ERR_LEN];

	for (size_t i = 0; i < au->n_recs; i++) {
		struct ibvf_alloc a = au->recs[i];
		bool used = false;

		if (a.state >= IBVF_ALLOC_PORT_READY)
			continue;
		for (size_t k = 0; k < au->n_sm; k++)
			for (size_t j = 0; j < a.n_pkeys; j++)
				used |= au->sm[k].guid == a.guid &&
					au->sm[k].pkey == (a.pkeys[j] & 0x7fff);
		for (size_t k = 0; a.pci[0] && k < au->n_vfs; k++)
			used |= au->vfs[k].st.port_guid_known &&
				au->vfs[k].st.port_guid == a.guid && !strcmp(au->vfs[k].pci, a.pci);
		if (!used)
			continue;
		ibvf_guid_format(a.guid, s);
		a.state = IBVF_ALLOC_PORT_READY;
		if (ibvf_pool_update(p, &a, err, sizeof(err))) {
			fprintf(stderr, "ibvfctl: keeping GUID %s of %s: %s\n", s,
				a.owner.container_id, err);
			(*failed)++;
			continue;
		}
		json_array_append_new(rows, json_pack("{s:s,s:s,s:s,s:s}", "guid", s, "pci",
						      a.pci[0] ? a.pci : "-", "pkeys", "-", "owner",
						      a.owner.container_id));
	}
}

int ctl_offline_rebuild(struct ctl_ctx *ctx, json_t **adopted)
{
	struct ibvf_pool_filter f = {.pkey = -1};
	struct audit au = {.ctx = ctx, .all_sm = true};
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN], why[IBVF_ERR_LEN] = "";
	json_t *rows = json_array();
	bool was_lost;
	int ret = ctl_offline_begin(ctx, true), failed = 0;

	*adopted = NULL;
	if (!ret)
		ret = ctl_open_pool(ctx, true, &p);
	if (ret) {
		json_decref(rows);
		return ret;
	}
	was_lost = ibvf_pool_lost(p, why, sizeof(why));
	au.rows = json_array();
	read_sm(&au);
	read_vfs(&au);
	if (!au.vfs_read)
		fprintf(stderr, "ibvfctl: WARNING: the VFs could not be read from here: GUIDs that "
				"only VFs carry are not adopted (ibvfd still skips them when it "
				"allocates, from its own VF listing)\n");
	if (!au.sm_read)
		fprintf(stderr, "ibvfctl: WARNING: the SM's membership could not be read: GUIDs "
				"only the SM lists are not adopted (ibvfd still skips them when it "
				"allocates, from its own listing)\n");
	for (size_t i = 0; i < au.n_vfs; i++)
		if (au.vfs[i].st.port_guid_known && in_ranges(ctx, au.vfs[i].st.port_guid))
			adopt_one(&au, p, au.vfs[i].st.port_guid, au.vfs[i].pci, rows, &failed);
	for (size_t i = 0; i < au.n_sm; i++)
		adopt_one(&au, p, au.sm[i].guid, "", rows, &failed);
	ret = ibvf_pool_list(p, &f, rec_cb, &au, err, sizeof(err));
	if (ret >= 0)
		promote_in_use(&au, p, rows, &failed);
	if (ret >= 0 && failed)
		ret = ctl_error(CTL_FAILED,
				"%d GUID(s) in use could not be adopted: the store "
				"stays marked lost",
				failed);
	else if (ret < 0)
		ret = ctl_error(CTL_FAILED, "%s", err);
	else if (ibvf_pool_rebuilt(p, err, sizeof(err)))
		ret = ctl_error(CTL_FAILED, "%s", err);
	else
		ret = CTL_OK;
	if (ret == CTL_OK)
		fprintf(stderr,
			"ibvfctl: store rebuilt: %zu GUID(s) in use adopted (owners %s<GUID>; "
			"release each with 'ibvfctl pool release GUID' once its Pod is gone)%s%s\n",
			json_array_size(rows), IBVF_POOL_ADOPTED_PREFIX,
			was_lost ? "; it was marked lost: " : "", was_lost ? why : "");
	ibvf_pool_close(p);
	json_decref(au.rows);
	free(au.recs);
	free(au.vfs);
	free(au.sm);
	if (ret == CTL_OK)
		*adopted = rows;
	else
		json_decref(rows);
	return ret;
}
