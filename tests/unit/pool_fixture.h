/* SPDX-License-Identifier: MIT */
/*
 * Fixture shared by the GUID pool tests: a private state directory, a fake
 * clock (opts.now_ms) and short helpers to allocate/release by owner name.
 */
#ifndef IBVF_POOL_FIXTURE_H
#define IBVF_POOL_FIXTURE_H

#include <sqlite3.h>
#include <stdint.h>

#include <ibvf/types.h>

#include "err.h"
#include "guid_pool.h"
#include "testutil.h"

struct pool_fx {
	char *dir;   /* temp root */
	char *state; /* <dir>/state: the pool's state directory */
	char *db;    /* <state>/pool.db */
	int64_t now; /* fake clock, ms since the epoch */
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN];
};

static inline int64_t fx_clock(void *arg)
{
	return *(const int64_t *)arg;
}

static inline int fx_setup(void **state)
{
	struct pool_fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dir = tu_mkdtemp("pool");
	if (!f->dir)
		return -1;
	f->state = tu_path(f->dir, "state");
	f->db = tu_path(f->state, IBVF_POOL_DB_NAME);
	f->now = 1700000000000; /* 2023-11-14, any fixed point works */
	*state = f;
	return 0;
}

static inline int fx_teardown(void **state)
{
	struct pool_fx *f = *state;

	ibvf_pool_close(f->p);
	free(f->state);
	free(f->db);
	tu_rmrf(f->dir);
	free(f);
	return 0;
}

/* (Re)open the pool over @n ranges; closes a pool already open. Returns the errno. */
static inline int fx_open_opts(struct pool_fx *f, const struct ibvf_guid_range *r, size_t n,
			       uint32_t quarantine_s, bool read_only, bool sync_full)
{
	struct ibvf_pool_opts o = {
		.state_dir = f->state,
		.ranges = r,
		.n_ranges = n,
		.quarantine_s = quarantine_s,
		.sync_full = sync_full,
		.read_only = read_only,
		.now_ms = fx_clock,
		.now_arg = &f->now,
	};

	ibvf_pool_close(f->p);
	f->p = NULL;
	f->err[0] = 0;
	return ibvf_pool_open(&o, &f->p, f->err, sizeof(f->err));
}

static inline int fx_open(struct pool_fx *f, const struct ibvf_guid_range *r, size_t n,
			  uint32_t quarantine_s)
{
	return fx_open_opts(f, r, n, quarantine_s, false, false);
}

static inline void fx_owner(struct ibvf_owner *o, const char *cid, const char *ifname)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->container_id, sizeof(o->container_id), "%s", cid);
	snprintf(o->ifname, sizeof(o->ifname), "%s", ifname ? ifname : "net1");
	snprintf(o->pod_namespace, sizeof(o->pod_namespace), "ns-%.60s", cid);
	snprintf(o->pod_name, sizeof(o->pod_name), "pod-%s", cid);
}

/* Allocate for container @cid (ifname net1); @want 0 = lowest. *@got set on success. */
static inline int fx_alloc(struct pool_fx *f, const char *cid, uint64_t want, uint64_t *got)
{
	struct ibvf_alloc_request rq = {.vf_index = -1, .guid = want};
	struct ibvf_alloc a;
	int ret;

	if (got)
		*got = 0;
	fx_owner(&rq.owner, cid, NULL);
	f->err[0] = 0;
	ret = ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err));
	if (!ret && got)
		*got = a.guid;
	return ret;
}

/* Allocate and expect success; returns the GUID. */
static inline uint64_t fx_alloc_ok(struct pool_fx *f, const char *cid)
{
	uint64_t g = 0;
	int ret = fx_alloc(f, cid, 0, &g);

	if (ret)
		print_error("allocate for %s: %d %s\n", cid, ret, f->err);
	assert_int_equal(ret, 0);
	return g;
}

static inline int fx_release(struct pool_fx *f, uint64_t g)
{
	f->err[0] = 0;
	return ibvf_pool_release(f->p, g, f->err, sizeof(f->err));
}

/* The store's own encoding of a GUID (guid_pool.c enc()): top bit flipped. */
static inline sqlite3_int64 fx_enc(uint64_t g)
{
	return (sqlite3_int64)(g ^ 0x8000000000000000ull);
}

/* Run SQL directly on the store, as an admin with the sqlite3 shell would. */
static inline void fx_sql(struct pool_fx *f, const char *sql)
{
	sqlite3 *db = NULL;
	char *msg = NULL;

	assert_int_equal(
		sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
		SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		print_error("sql '%s': %s\n", sql, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_close(db);
		fail();
	}
	sqlite3_close(db);
}

/* One integer from the store (direct SQL). */
static inline sqlite3_int64 fx_sql_int(struct pool_fx *f, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	sqlite3_int64 v = -1;

	assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* Audit findings collected by fx_audit(). */
struct fx_findings {
	struct ibvf_audit_finding f[64];
	size_t n;
};

static inline int fx_audit_cb(void *arg, const struct ibvf_audit_finding *fi)
{
	struct fx_findings *fs = arg;

	if (fs->n < sizeof(fs->f) / sizeof(fs->f[0]))
		fs->f[fs->n++] = *fi;
	return 0;
}

/* Run the audit; returns its result (problem count or -errno). */
static inline int fx_audit(struct pool_fx *f, struct fx_findings *fs)
{
	memset(fs, 0, sizeof(*fs));
	f->err[0] = 0;
	return ibvf_pool_audit(f->p, fx_audit_cb, fs, f->err, sizeof(f->err));
}

/* How many findings of @kind; the first one's index in *@first (if any). */
static inline size_t fx_count_kind(const struct fx_findings *fs, enum ibvf_audit_kind kind,
				   size_t *first)
{
	size_t n = 0;

	for (size_t i = fs->n; i-- > 0;)
		if (fs->f[i].kind == kind) {
			n++;
			if (first)
				*first = i;
		}
	return n;
}

#endif /* IBVF_POOL_FIXTURE_H */
