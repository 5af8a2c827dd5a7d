// SPDX-License-Identifier: MIT
/*
 * Persistent GUID pool over SQLite (see guid_pool.h and docs/pool.md).
 *
 * GUIDs are stored as INTEGER keys after flipping the top bit (enc()), which
 * maps unsigned u64 order onto SQLite's signed int64 order, so "lowest free
 * GUID" and range scans are index operations. Free GUIDs are kept as a table
 * of extents [start, end], so allocate, allocate-specific and free are
 * O(log n) whatever the size of the ranges.
 */
#include "guid_pool.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "clock.h"
#include "err.h"
#include "file_read.h"
#include "log.h"
#include "statedir.h"

#define SCHEMA_VERSION 3
#define ST_Q	       IBVF_ALLOC_QUARANTINED

/* A prepared statement kept for reuse (see prep()). */
struct stmt_slot {
	uint32_t hash;
	char *sql;
	sqlite3_stmt *st;
};

#define STMT_CACHE_MAX 48

struct ibvf_pool {
	pthread_mutex_t lock;	 /* recursive; held by every public call (guid_pool.h) */
	atomic_int lock_waiters; /* public calls waiting for @lock (pool_lock()) */
	sqlite3 *db;
	struct stmt_slot stmts[STMT_CACHE_MAX];
	size_t n_stmts;
	char path[PATH_MAX];
	char id_path[PATH_MAX]; /* <state_dir>/pool.id (check_identity()) */
	char store_id[40];	/* meta 'store_id' */
	uint64_t generation;	/* meta 'generation' after our last commit */
	int id_fd;		/* pool.id, open for pwrite() in place; -1 = none */
	dev_t id_dev;		/* @id_fd's file (open_id_fd(): check_files() compares) */
	ino_t id_ino;
	dev_t db_dev; /* pool.db as opened (check_files()) */
	ino_t db_ino;
	bool id_write_failed;
	struct ibvf_guid_range *ranges;
	size_t n_ranges;
	/* ranges_text() of @ranges, kept for the check at every BEGIN (free_list_matches()) */
	char *rtext;
	struct ibvf_guid_range *rtext_for; /* the ranges @rtext was made of */
	size_t rtext_n;
	uint32_t quarantine_s;
	bool sm_check; /* ibvf_pool_set_sm_check(): quarantine waits for the SM */
	bool read_only;
	int schema_version; /* of the open store (read-only opens may see an old one) */
	int64_t (*now_ms)(void *arg);
	void *now_arg;
	int (*write_fault)(void *arg);
	void *fault_arg;
	/* the write transaction in progress: did SQLite fail (db_err()), and why */
	bool store_failed;
	char store_msg[IBVF_ERR_LEN];
	int store_ret;
	int64_t changes_at_begin;
	/*
	 * Group commit (sync_full; see "group commit" below). Under @lock: the
	 * open write transaction that concurrent calls share, and the nesting
	 * depth of public calls on the thread that holds @lock.
	 */
	bool sync_full;
	bool grouped; /* group commit on (both syncs, after the open; not read-only) */
	int depth;
	bool tx_open;	   /* BEGIN IMMEDIATE done, not yet committed */
	bool tx_dirty;	   /* a call changed rows in it: someone waits for it */
	uint64_t tx_group; /* the open transaction's group number */
	bool filling;	   /* a leader waits in group_fill() (on @fill_cond) */
	pthread_cond_t fill_cond;
	uint64_t next_group;
	uint64_t committed;	/* the last group whose COMMIT succeeded */
	uint64_t committed_gen; /* ... and the store generation it committed */
	uint64_t id_gen;	/* the generation pool.id was last written with by a sync */
	bool in_savepoint;	/* the current call joined the open transaction (SAVEPOINT op) */
	uint64_t need;		/* the group the current top-level call must see durable */
	bool need_changed;	/* ... because it wrote (health counts it) */
	int wal_fd;		/* <path>-wal, for fdatasync() outside @lock; -1 = none */
	int (*sync_fault)(void *arg);
	bool sync_broken; /* an fdatasync() failed: durability only through a checkpoint */
	/* Under @sync_lock: durability of committed groups. */
	pthread_mutex_t sync_lock;
	pthread_cond_t sync_cond;
	bool syncing;	 /* a leader is in fdatasync() */
	uint64_t synced; /* every group <= @synced is resolved (durable or failed) */
	struct group_failure {
		uint64_t lo, hi; /* groups lo..hi failed (COMMIT or fdatasync) */
		int ret;
	} failed[16];
	size_t n_failed;
	uint64_t failed_dropped; /* groups <= this may have failed (older than @failed) */
	char sync_msg[IBVF_ERR_LEN];
	/*
	 * Lazy writes (ibvf_pool_update_lazy() ...): the syncer thread makes
	 * their groups durable off the caller's path. @lazy_started under @lock;
	 * the rest under @sync_lock.
	 */
	bool lazy_started;
	bool lazy_stop;
	uint64_t lazy_want; /* the last lazy write's group */
	pthread_cond_t lazy_cond;
	pthread_t lazy_thread;
	pthread_mutex_t health_lock; /* @health only: status never waits for a transaction */
	struct ibvf_pool_health health;
	/* GUIDs other views show in use (ibvf_pool_set_in_use()), each sorted */
	uint64_t *in_use[IBVF_VIEW_COUNT];
	size_t n_in_use[IBVF_VIEW_COUNT];
};

static const char *const state_names[IBVF_ALLOC_STATE_COUNT] = {
	"allocated",  "programmed", "sm_requested", "sm_confirmed",
	"port_ready", "handed",	    "releasing",    "quarantined",
};

const char *ibvf_alloc_state_name(enum ibvf_alloc_state s)
{
	return (unsigned)s < IBVF_ALLOC_STATE_COUNT ? state_names[s] : "?";
}

int ibvf_alloc_state_parse(const char *s)
{
	for (int i = 0; i < IBVF_ALLOC_STATE_COUNT; i++)
		if (!strcmp(s, state_names[i]))
			return i;
	return -EINVAL;
}

const char *ibvf_pool_db_path(const struct ibvf_pool *p)
{
	return p->path;
}

static sqlite3_int64 enc(uint64_t g)
{
	return (sqlite3_int64)(g ^ 0x8000000000000000ull);
}

static uint64_t dec(sqlite3_int64 v)
{
	return (uint64_t)v ^ 0x8000000000000000ull;
}

static int64_t now_ms(struct ibvf_pool *p)
{
	return p->now_ms ? p->now_ms(p->now_arg) : ibvf_wall_ms();
}

/* Clip a configured range to assignable GUIDs; false when nothing is left. */
static bool clip(const struct ibvf_guid_range *r, uint64_t *a, uint64_t *b)
{
	*a = r->start ? r->start : 1;
	*b = r->end != IBVF_GUID_ALL_ONES ? r->end : IBVF_GUID_ALL_ONES - 1;
	return *a <= *b;
}

static bool in_ranges(const struct ibvf_pool *p, uint64_t g)
{
	for (size_t i = 0; i < p->n_ranges; i++) {
		uint64_t a, b;

		if (clip(&p->ranges[i], &a, &b) && g >= a && g <= b)
			return true;
	}
	return false;
}

/* Every SQLite failure passes here: it is remembered for ibvf_pool_health(). */
static void write_id_file(struct ibvf_pool *p);
static void open_id_fd(struct ibvf_pool *p);
static int begin(struct ibvf_pool *p, char *err, size_t errlen);
static int finish(struct ibvf_pool *p, int ret, char *err, size_t errlen);
static int meta_set(struct ibvf_pool *p, const char *key, const char *value, char *err,
		    size_t errlen);
static int read_id_file(struct ibvf_pool *p, char *id, size_t idlen, uint64_t *gen, char *why,
			size_t whylen);
static void write_id_file_gen(struct ibvf_pool *p, uint64_t gen);
static int check_identity(struct ibvf_pool *p, char *err, size_t errlen);
static int injected_fault(struct ibvf_pool *p, char *err, size_t errlen);
/* group commit (below) */
static void pool_lock(struct ibvf_pool *p);
static int pool_unlock(struct ibvf_pool *p, int ret, char *err, size_t errlen);
static void pool_unlock_mem(struct ibvf_pool *p);
static void commit_inline(struct ibvf_pool *p, char *err, size_t errlen);
static void lazy_join(struct ibvf_pool *p);

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Is @g in use in a view other than the store? Which one in *@view. */
static bool seen_in_use(const struct ibvf_pool *p, uint64_t g, enum ibvf_pool_view *view)
{
	for (int v = 0; v < IBVF_VIEW_COUNT; v++)
		if (p->n_in_use[v] &&
		    bsearch(&g, p->in_use[v], p->n_in_use[v], sizeof(g), cmp_u64)) {
			if (view)
				*view = (enum ibvf_pool_view)v;
			return true;
		}
	return false;
}

static const char *view_name(enum ibvf_pool_view v)
{
	return v == IBVF_VIEW_VF   ? "on a VF"
	       : v == IBVF_VIEW_SM ? "in the SM's partition membership"
				   : "recorded in the CNI plugin's cache";
}

static int db_err(struct ibvf_pool *p, char *err, size_t errlen, const char *what)
{
	int code = sqlite3_errcode(p->db);
	int ret = (code == SQLITE_BUSY || code == SQLITE_LOCKED) ? -EBUSY : -EIO;

	ibvf_errf(p->store_msg, sizeof(p->store_msg), ret, "pool store %s: %s: %s", p->path, what,
		  sqlite3_errmsg(p->db));
	p->store_failed = true;
	p->store_ret = ret;
	return ibvf_errf(err, errlen, ret, "%s", p->store_msg);
}

/* The outcome of one write call (begin() .. finish(), then durable); @msg when failed. */
static void record_write_msg(struct ibvf_pool *p, int result, const char *msg)
{
	int64_t t = now_ms(p);
	bool was_ok;

	pthread_mutex_lock(&p->health_lock);
	was_ok = p->health.last_write_result == 0;
	p->health.last_write_ms = t;
	p->health.last_write_result = result;
	if (result) {
		snprintf(p->health.last_error, sizeof(p->health.last_error), "%s", msg);
		p->health.write_failures++;
	} else {
		p->health.last_error[0] = 0;
		p->health.last_ok_ms = t;
	}
	pthread_mutex_unlock(&p->health_lock);
	if (result && was_ok)
		log_err("GUID pool store: a write failed (attaches fail until writes work again): %s",
			msg);
}

static void record_write(struct ibvf_pool *p, int result)
{
	record_write_msg(p, result, p->store_msg);
}

void ibvf_pool_health(struct ibvf_pool *p, struct ibvf_pool_health *out)
{
	pthread_mutex_lock(&p->health_lock);
	*out = p->health;
	pthread_mutex_unlock(&p->health_lock);
}

static int exec(struct ibvf_pool *p, const char *sql, char *err, size_t errlen)
{
	if (sqlite3_exec(p->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return db_err(p, err, errlen, sql);
	return 0;
}

static uint32_t sql_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/*
 * Prepared statements are cached per pool (SQLITE_PREPARE_PERSISTENT) and
 * reset by stmt_done(): parsing the SQL of each statement was most of the CPU
 * time of an allocation. A cached statement still in use (a list callback
 * that calls back into the pool) is not shared: a private one is prepared,
 * and stmt_done() finalizes it.
 */
static int prep(struct ibvf_pool *p, sqlite3_stmt **st, const char *sql, char *err, size_t errlen)
{
	uint32_t h = sql_hash(sql);
	size_t i;

	for (i = 0; i < p->n_stmts; i++) {
		if (p->stmts[i].hash != h || strcmp(p->stmts[i].sql, sql))
			continue;
		if (!sqlite3_stmt_busy(p->stmts[i].st)) {
			*st = p->stmts[i].st;
			return 0;
		}
		break;
	}
	if (sqlite3_prepare_v3(p->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return db_err(p, err, errlen, "prepare");
	if (i == p->n_stmts && p->n_stmts < STMT_CACHE_MAX) {
		char *copy = strdup(sql);

		if (copy)
			p->stmts[p->n_stmts++] = (struct stmt_slot){h, copy, *st};
	}
	return 0;
}

/* Give back a statement from prep(): reset if cached, finalized otherwise. */
static void stmt_done(struct ibvf_pool *p, sqlite3_stmt *st)
{
	for (size_t i = 0; i < p->n_stmts; i++) {
		if (p->stmts[i].st == st) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			return;
		}
	}
	sqlite3_finalize(st);
}

/* Run a statement that returns no rows (or ignore them); finalizes it. */
static int run(struct ibvf_pool *p, sqlite3_stmt *st, char *err, size_t errlen)
{
	int rc = sqlite3_step(st);

	stmt_done(p, st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return db_err(p, err, errlen, "step");
	return 0;
}

/*
 * exec() of one statement without parameters through the statement cache:
 * sqlite3_exec() parses its SQL on every call (BEGIN IMMEDIATE, COMMIT: a
 * tenth of a lone write's CPU). The error names @sql, as exec() does.
 */
static int exec_cached(struct ibvf_pool *p, const char *sql, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	if (prep(p, &st, sql, err, errlen))
		return -EIO;
	rc = sqlite3_step(st);
	stmt_done(p, st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return db_err(p, err, errlen, sql);
	return 0;
}

static int scalar_i64(struct ibvf_pool *p, const char *sql, sqlite3_int64 a, sqlite3_int64 b,
		      sqlite3_int64 *out, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	if (prep(p, &st, sql, err, errlen))
		return -EIO;
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	rc = sqlite3_step(st);
	*out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	stmt_done(p, st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_err(p, err, errlen, "query");
	return rc == SQLITE_ROW ? 1 : 0;
}

/* ------------------------------------------------------------ schema -- */

static const char schema_v1[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE alloc("
	" guid INTEGER PRIMARY KEY," /* enc(GUID) */
	" state INTEGER NOT NULL,"
	" container_id TEXT NOT NULL, ifname TEXT NOT NULL,"
	" pod_namespace TEXT NOT NULL DEFAULT '', pod_name TEXT NOT NULL DEFAULT '',"
	" pod_uid TEXT NOT NULL DEFAULT '', network TEXT NOT NULL DEFAULT '',"
	" pf TEXT NOT NULL DEFAULT '', vf_index INTEGER NOT NULL DEFAULT -1,"
	" pci TEXT NOT NULL DEFAULT '', pkeys TEXT NOT NULL DEFAULT '',"
	" created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,"
	" released_ms INTEGER NOT NULL DEFAULT 0);"
	"CREATE UNIQUE INDEX alloc_owner ON alloc(container_id, ifname) WHERE state != 7;"
	"CREATE INDEX alloc_quarantine ON alloc(released_ms) WHERE state = 7;"
	"CREATE TABLE free_extent(start INTEGER PRIMARY KEY, end INTEGER NOT NULL);"
	"INSERT INTO meta VALUES('ranges', '');"
	"PRAGMA user_version = 1;";

/*
 * Migrations: migrations[v] takes a store from version v to v + 1. Each runs
 * in its own transaction together with the user_version bump.
 */
/* v2 (ibvfd): the VF's GUIDs and link state before the attach, restored on release. */
static const char schema_v2[] =
	"ALTER TABLE alloc ADD COLUMN prev_node_guid INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE alloc ADD COLUMN prev_port_guid INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE alloc ADD COLUMN prev_link_state TEXT NOT NULL DEFAULT '';"
	"CREATE INDEX alloc_pci ON alloc(pci) WHERE state != 7 AND pci != '';"
	"PRAGMA user_version = 2;";
/*
 * v3 (issue 15 item 8): the owner key of a quarantined record, (pod namespace,
 * pod name, network, ifname), is looked up when that owner comes back within
 * the quarantine; the columns exist since v1, v3 indexes them.
 */
static const char schema_v3[] =
	"CREATE INDEX IF NOT EXISTS alloc_owner_key ON alloc(pod_name, pod_namespace, network,"
	" ifname) WHERE state = 7 AND pod_name != '' AND network != '';"
	"PRAGMA user_version = 3;";

static const char *const migrations[SCHEMA_VERSION] = {
	[0] = schema_v1,
	[1] = schema_v2,
	[2] = schema_v3,
};

static void fsync_dir_of(const char *path)
{
	char dir[PATH_MAX];
	size_t n = strlen(path);
	char *slash;
	int fd;

	if (n >= sizeof(dir))
		return; /* no such path can exist */
	memcpy(dir, path, n + 1);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/*
 * Build the schema in a temp file and link(2) it into place, so pool.db
 * always has a schema from its first byte (an empty or schema-less pool.db
 * is then always corruption, never "new"). link() never replaces an
 * existing pool.db: when several processes create the store at once, the
 * first one wins and the others use its store. (rename() would swap the
 * file under a process that already opened and wrote the first one.) The
 * temp file is put in WAL mode before it is linked, so no opener has to
 * switch the journal mode of a store others use.
 */
static int create_store(struct ibvf_pool *p, char *err, size_t errlen)
{
	char tmp[PATH_MAX + 32];
	sqlite3 *db = NULL;
	int rc, ret = 0;

	snprintf(tmp, sizeof(tmp), "%s.new.%d", p->path, (int)getpid());
	unlink(tmp);
	rc = sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, schema_v1, NULL, NULL, NULL);
	/* a new store is born at the current schema: no migration ever runs on it */
	for (int v = 1; rc == SQLITE_OK && v < SCHEMA_VERSION; v++)
		rc = sqlite3_exec(db, migrations[v], NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		ibvf_errf(err, errlen, -EIO, "creating pool store %s: %s", tmp,
			  db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		unlink(tmp);
		return -EIO;
	}
	/* closing the last connection checkpoints and removes tmp's WAL */
	if (sqlite3_close(db) != SQLITE_OK || chmod(tmp, 0600)) {
		unlink(tmp);
		return ibvf_errf(err, errlen, -EIO, "creating pool store %s: cannot finish it",
				 tmp);
	}
	if (link(tmp, p->path) == 0) {
		fsync_dir_of(p->path);
		log_info("created GUID pool store %s (schema version %d)", p->path, SCHEMA_VERSION);
	} else if (errno != EEXIST) {
		ret = ibvf_errf(err, errlen, -errno, "linking %s to %s: %s", tmp, p->path,
				strerror(errno));
	}
	unlink(tmp);
	return ret;
}

static int corrupt(struct ibvf_pool *p, char *err, size_t errlen, const char *why)
{
	return ibvf_errf(err, errlen, -EIO,
			 "pool store %.160s is not a usable ibvf GUID pool (%.120s); left "
			 "untouched. Restore it with its -wal file from a backup; do not just "
			 "delete it (VFs and the SM carry its GUIDs): see docs/operations.md, "
			 "\"Store lost or damaged\" (ibvfctl pool rebuild)",
			 p->path, why);
}

/*
 * Version, tables and a b-tree check (PRAGMA quick_check: O(size of the
 * store), about 0.3 s for 1,000,000 records) on every open, read-only ones
 * included, so that a damaged store is an error at open and never read in
 * part as if it were whole.
 */
static int check_schema(struct ibvf_pool *p, char *err, size_t errlen)
{
	sqlite3_int64 ver = 0, tables = 0;
	char buf[256];
	int ret;

	ret = scalar_i64(p, "PRAGMA user_version", 0, 0, &ver, err, errlen);
	if (ret < 0)
		return corrupt(p, err, errlen, sqlite3_errmsg(p->db));
	if (ver > SCHEMA_VERSION)
		return ibvf_errf(err, errlen, -EPROTO,
				 "pool store %s has schema version %lld, newer than this ibvf "
				 "(%d): upgrade ibvf",
				 p->path, (long long)ver, SCHEMA_VERSION);
	if (ver < 1)
		return corrupt(p, err, errlen, "no ibvf schema version");
	ret = scalar_i64(p,
			 "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
			 "('meta','alloc','free_extent')",
			 0, 0, &tables, err, errlen);
	if (ret < 0 || tables != 3)
		return corrupt(p, err, errlen, "tables missing");
	{
		sqlite3_stmt *st;
		const char *r;

		if (sqlite3_prepare_v2(p->db, "PRAGMA quick_check(1)", -1, &st, NULL) != SQLITE_OK)
			return corrupt(p, err, errlen, sqlite3_errmsg(p->db));
		ret = sqlite3_step(st);
		r = ret == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
		snprintf(buf, sizeof(buf), "%s", r ? r : sqlite3_errmsg(p->db));
		stmt_done(p, st);
		if (!r || strcmp(buf, "ok"))
			return corrupt(p, err, errlen, buf);
	}
	p->schema_version = (int)ver;
	for (sqlite3_int64 v = ver; v < SCHEMA_VERSION && !p->read_only; v++) {
		sqlite3_int64 now = 0;

		if (exec(p, "BEGIN IMMEDIATE", err, errlen))
			return -EIO;
		/* under the write lock: another process may have migrated it meanwhile */
		if (scalar_i64(p, "PRAGMA user_version", 0, 0, &now, err, errlen) < 0) {
			sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
			return -EIO;
		}
		if (now > v) {
			sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
			v = now - 1;
			p->schema_version = (int)now;
			continue;
		}
		log_notice("migrating pool store %s from schema %lld to %lld", p->path,
			   (long long)v, (long long)v + 1);
		if (exec(p, migrations[v], err, errlen) || exec(p, "COMMIT", err, errlen)) {
			sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
			return -EIO;
		}
		p->schema_version = (int)v + 1;
	}
	return 0;
}

/* ---------------------------------------------------- free extents -- */

static int extent_insert(struct ibvf_pool *p, uint64_t a, uint64_t b, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (prep(p, &st, "INSERT INTO free_extent(start, end) VALUES(?, ?)", err, errlen))
		return -EIO;
	sqlite3_bind_int64(st, 1, enc(a));
	sqlite3_bind_int64(st, 2, enc(b));
	return run(p, st, err, errlen);
}

static int extent_delete(struct ibvf_pool *p, uint64_t a, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (prep(p, &st, "DELETE FROM free_extent WHERE start = ?", err, errlen))
		return -EIO;
	sqlite3_bind_int64(st, 1, enc(a));
	return run(p, st, err, errlen);
}

/* The extent with the greatest start <= g: 1 found, 0 none, <0 error. */
static int extent_at_or_before(struct ibvf_pool *p, uint64_t g, uint64_t *a, uint64_t *b, char *err,
			       size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	if (prep(p, &st,
		 "SELECT start, end FROM free_extent WHERE start <= ? ORDER BY start DESC LIMIT 1",
		 err, errlen))
		return -EIO;
	sqlite3_bind_int64(st, 1, enc(g));
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*a = dec(sqlite3_column_int64(st, 0));
		*b = dec(sqlite3_column_int64(st, 1));
	}
	stmt_done(p, st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_err(p, err, errlen, "free list lookup");
	return rc == SQLITE_ROW;
}

/* Remove @g from the free list: 0 done, 1 it was not free, <0 error. */
static int extent_take(struct ibvf_pool *p, uint64_t g, char *err, size_t errlen)
{
	uint64_t a, b;
	int ret = extent_at_or_before(p, g, &a, &b, err, errlen);

	if (ret <= 0)
		return ret < 0 ? ret : 1;
	if (b < g)
		return 1;
	ret = extent_delete(p, a, err, errlen);
	if (!ret && a < g)
		ret = extent_insert(p, a, g - 1, err, errlen);
	if (!ret && g < b)
		ret = extent_insert(p, g + 1, b, err, errlen);
	return ret;
}

/*
 * Take the lowest free GUID: 0 and *g set, 1 none free, <0 error. The
 * lowest extent shrinks from its start (one UPDATE of its key) or goes.
 */
static int extent_take_lowest(struct ibvf_pool *p, uint64_t *g, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	uint64_t end = 0;
	int rc;

	if (prep(p, &st, "SELECT start, end FROM free_extent ORDER BY start LIMIT 1", err, errlen))
		return -EIO;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*g = dec(sqlite3_column_int64(st, 0));
		end = dec(sqlite3_column_int64(st, 1));
	}
	stmt_done(p, st);
	if (rc == SQLITE_DONE)
		return 1;
	if (rc != SQLITE_ROW)
		return db_err(p, err, errlen, "free list lookup");
	if (end <= *g)
		return extent_delete(p, *g, err, errlen);
	if (prep(p, &st, "UPDATE free_extent SET start = ? WHERE start = ?", err, errlen))
		return -EIO;
	sqlite3_bind_int64(st, 1, enc(*g + 1));
	sqlite3_bind_int64(st, 2, enc(*g));
	return run(p, st, err, errlen);
}

/*
 * Take the lowest free GUID that no other view shows in use: as
 * extent_take_lowest(), skipping the in-use GUIDs (issue 14: allocation never
 * trusts the store alone). Visits at most one extent per in-use GUID more.
 */
static int extent_take_lowest_unused(struct ibvf_pool *p, uint64_t *g, char *err, size_t errlen)
{
	uint64_t from = 0, a = 0, b = 0; /* set on SQLITE_ROW, the only path that reads them */
	sqlite3_stmt *st;
	int rc;

	if (!p->n_in_use[IBVF_VIEW_VF] && !p->n_in_use[IBVF_VIEW_SM] && !p->n_in_use[IBVF_VIEW_CNI])
		return extent_take_lowest(p, g, err, errlen);
	for (;;) {
		if (prep(p, &st,
			 "SELECT start, end FROM free_extent WHERE start >= ? ORDER BY start "
			 "LIMIT 1",
			 err, errlen))
			return -EIO;
		sqlite3_bind_int64(st, 1, enc(from));
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			a = dec(sqlite3_column_int64(st, 0));
			b = dec(sqlite3_column_int64(st, 1));
		}
		stmt_done(p, st);
		if (rc == SQLITE_DONE)
			return 1;
		if (rc != SQLITE_ROW)
			return db_err(p, err, errlen, "free list lookup");
		while (a < b && seen_in_use(p, a, NULL))
			a++;
		if (!seen_in_use(p, a, NULL)) {
			*g = a;
			return extent_take(p, a, err, errlen);
		}
		if (b == UINT64_MAX)
			return 1;
		from = b + 1;
	}
}

/* Put @g back into the free list, merging with its neighbours. */
static int extent_give(struct ibvf_pool *p, uint64_t g, char *err, size_t errlen)
{
	uint64_t a = g, b = g, pa, pb;
	int ret;

	ret = extent_at_or_before(p, g, &pa, &pb, err, errlen);
	if (ret < 0)
		return ret;
	if (ret == 1 && pb >= g)
		return 0; /* already free */
	if (ret == 1 && pb == g - 1) {
		a = pa;
		if ((ret = extent_delete(p, pa, err, errlen)))
			return ret;
	}
	if (g + 1 != 0) {
		ret = extent_at_or_before(p, g + 1, &pa, &pb, err, errlen);
		if (ret < 0)
			return ret;
		if (ret == 1 && pa == g + 1) {
			b = pb;
			if ((ret = extent_delete(p, pa, err, errlen)))
				return ret;
		}
	}
	return extent_insert(p, a, b, err, errlen);
}

/*
 * The ranges as stored in meta 'ranges' ("start-end,start-end", 16 hex digits
 * each): malloc'd, NULL when out of memory. Never truncated: the store's free
 * list is rebuilt whenever this text differs, so every range must count.
 */
static char *ranges_text(const struct ibvf_pool *p)
{
	size_t len = p->n_ranges * 34 + 1, off = 0;
	char *buf = malloc(len);

	if (!buf)
		return NULL;
	buf[0] = 0;
	for (size_t i = 0; i < p->n_ranges; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%016llx-%016llx", i ? "," : "",
					(unsigned long long)p->ranges[i].start,
					(unsigned long long)p->ranges[i].end);
	return buf;
}

/*
 * ranges_text() kept in the pool (free_list_matches() runs at every BEGIN:
 * its malloc and snprintf()s were a few percent of a write's CPU), made
 * anew whenever @ranges differ from those it was made of. NULL: no memory.
 */
static const char *ranges_text_cached(struct ibvf_pool *p)
{
	size_t sz = p->n_ranges * sizeof(*p->ranges);

	if (p->rtext && p->rtext_n == p->n_ranges && (!sz || !memcmp(p->rtext_for, p->ranges, sz)))
		return p->rtext;
	free(p->rtext);
	free(p->rtext_for);
	p->rtext = ranges_text(p);
	p->rtext_for = malloc(sz + 1);
	if (!p->rtext || !p->rtext_for) {
		free(p->rtext);
		free(p->rtext_for);
		p->rtext = NULL;
		p->rtext_for = NULL;
		return NULL;
	}
	if (sz)
		memcpy(p->rtext_for, p->ranges, sz);
	p->rtext_n = p->n_ranges;
	return p->rtext;
}

/* Free extents for the GUIDs of [@a, @b] that have no record: O(records in it). */
static int free_span(struct ibvf_pool *p, uint64_t a, uint64_t b, char *err, size_t errlen)
{
	sqlite3_stmt *rows;
	uint64_t pos = a;
	int ret = 0, rc;

	if (prep(p, &rows, "SELECT guid FROM alloc WHERE guid BETWEEN ? AND ? ORDER BY guid", err,
		 errlen))
		return -EIO;
	sqlite3_bind_int64(rows, 1, enc(a));
	sqlite3_bind_int64(rows, 2, enc(b));
	while (!ret && (rc = sqlite3_step(rows)) == SQLITE_ROW) {
		uint64_t g = dec(sqlite3_column_int64(rows, 0));

		if (g > pos)
			ret = extent_insert(p, pos, g - 1, err, errlen);
		pos = g + 1;
	}
	stmt_done(p, rows);
	if (!ret && pos <= b && pos != 0)
		ret = extent_insert(p, pos, b, err, errlen);
	return ret;
}

/* Rebuild the free list from the ranges and the records: O(records). */
static int rebuild_free(struct ibvf_pool *p, char *err, size_t errlen)
{
	int ret = exec(p, "DELETE FROM free_extent", err, errlen);

	for (size_t i = 0; !ret && i < p->n_ranges; i++) {
		uint64_t a, b;

		if (clip(&p->ranges[i], &a, &b))
			ret = free_span(p, a, b, err, errlen);
	}
	return ret;
}

/*
 * Was the store's free list built for our ranges? 1 yes, 0 no, <0 error.
 * Call inside a transaction: another process with other ranges (an admin's
 * ibvfctl with another config) may have rebuilt it since we opened.
 */
static int free_list_matches(struct ibvf_pool *p, char *err, size_t errlen)
{
	const char *want = ranges_text_cached(p);
	const unsigned char *have = NULL;
	sqlite3_stmt *st;
	int rc, same;

	if (!want)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (prep(p, &st, "SELECT value FROM meta WHERE key = 'ranges'", err, errlen))
		return -EIO;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		have = sqlite3_column_text(st, 0);
	same = have && !strcmp(want, (const char *)have);
	stmt_done(p, st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_err(p, err, errlen, "reading the ranges");
	return same;
}

/* Make the free list match our ranges; inside a write transaction. */
static int ensure_free_list_locked(struct ibvf_pool *p, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	char *want;
	int ret = free_list_matches(p, err, errlen);

	if (ret)
		return ret < 0 ? ret : 0;
	want = ranges_text(p);
	if (!want)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	log_notice("GUID ranges of %s differ from the configured ones (%zu ranges: %.200s%s): "
		   "rebuilding its free list",
		   p->path, p->n_ranges, want, strlen(want) > 200 ? "..." : "");
	ret = rebuild_free(p, err, errlen);
	if (!ret && prep(p, &st, "UPDATE meta SET value = ? WHERE key = 'ranges'", err, errlen))
		ret = -EIO;
	if (!ret) {
		sqlite3_bind_text(st, 1, want, -1, SQLITE_TRANSIENT);
		ret = run(p, st, err, errlen);
	}
	free(want);
	return ret;
}

/* At a read-write open: bring the free list to our ranges (one transaction). */
static int sync_ranges(struct ibvf_pool *p, char *err, size_t errlen)
{
	int ret;

	if (p->read_only)
		return 0;
	ret = exec(p, "BEGIN IMMEDIATE", err, errlen);
	if (ret)
		return ret;
	ret = ensure_free_list_locked(p, err, errlen);
	if (!ret)
		ret = exec(p, "COMMIT", err, errlen);
	if (ret)
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
	return ret;
}

/* --------------------------------------------------------------- open -- */

static const char *file_type_name(mode_t m)
{
	if (S_ISLNK(m))
		return "a symbolic link";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device";
	return "not a regular file";
}

/*
 * pool.db and SQLite's companion files must be regular files when present.
 * SQLite would block for ever opening a FIFO read-only, follow a symbolic
 * link to some other file, or fail with a misleading "disk I/O error" on a
 * directory. Only the owner can create them in the private state directory,
 * so this is about mistakes (a restore gone wrong), not attacks.
 * Return: 0, -ENOENT (no pool.db), or -EIO with the file named.
 */
static int check_store_files(struct ibvf_pool *p, char *err, size_t errlen)
{
	static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
	bool have_db = true;

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		char f[PATH_MAX + 16];
		struct stat st;

		snprintf(f, sizeof(f), "%s%s", p->path, suffix[i]);
		if (lstat(f, &st)) {
			if (errno != ENOENT)
				return ibvf_errf(err, errlen, -errno, "pool store %s: %s", f,
						 strerror(errno));
			have_db &= i != 0;
			continue;
		}
		if (!S_ISREG(st.st_mode))
			return ibvf_errf(err, errlen, -EIO,
					 "pool store file %s is %s, not a regular file; ibvf "
					 "does not open it: replace it with the regular file it "
					 "stands for (or restore the store from a backup); see "
					 "docs/operations.md for a store that is lost",
					 f, file_type_name(st.st_mode));
	}
	return have_db ? 0 : -ENOENT;
}

/* Recursive: a list or audit callback may call the pool again. */
static void init_lock(struct ibvf_pool *p)
{
	pthread_mutexattr_t a;
	pthread_condattr_t ca;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&p->lock, &a);
	atomic_init(&p->lock_waiters, 0);
	pthread_mutexattr_destroy(&a);
	pthread_mutex_init(&p->health_lock, NULL);
	pthread_mutex_init(&p->sync_lock, NULL);
	pthread_cond_init(&p->sync_cond, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->lazy_cond, &ca);
	pthread_cond_init(&p->fill_cond, &ca);
	pthread_condattr_destroy(&ca);
}

/*
 * sync_full: from here on SQLite commits without syncing (synchronous=NORMAL)
 * and group commit makes each write durable with its own fdatasync() of the
 * WAL (see "group commit"). The open's own writes ran with synchronous=FULL.
 * The WAL file stays the same file while the connection is open (SQLite
 * removes it only when the last connection closes; a checkpoint truncates
 * it in place). Return: 0 or -EIO.
 */
static int start_group_commit(struct ibvf_pool *p, char *err, size_t errlen)
{
	char wal[PATH_MAX + 8];
	struct stat st;
	int ret;

	snprintf(wal, sizeof(wal), "%s-wal", p->path);
	p->wal_fd = open(wal, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (p->wal_fd < 0 || fstat(p->wal_fd, &st) || !S_ISREG(st.st_mode))
		return ibvf_errf(err, errlen, -EIO, "pool store WAL %s: %s", wal,
				 p->wal_fd < 0 ? strerror(errno) : "not a regular file");
	fsync_dir_of(wal); /* a WAL created by this open: its name is durable too */
	ret = exec(p, "PRAGMA synchronous=NORMAL", err, errlen);
	if (!ret)
		p->sync_full = true;
	return ret;
}

int ibvf_pool_open(const struct ibvf_pool_opts *o, struct ibvf_pool **out, char *err, size_t errlen)
{
	struct ibvf_pool *p;
	struct stat st;
	int ret, flags;
	char sql[64];

	*out = NULL;
	if (!o->n_ranges)
		return ibvf_errf(err, errlen, -EINVAL,
				 "no GUID ranges configured (pool.ranges or "
				 "GUID_POOL_RANGE_START/END)");
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ranges = calloc(o->n_ranges, sizeof(*p->ranges));
	if (!p->ranges) {
		free(p);
		return -ENOMEM;
	}
	init_lock(p);
	p->id_fd = -1;
	p->wal_fd = -1;
	memcpy(p->ranges, o->ranges, o->n_ranges * sizeof(*p->ranges));
	p->n_ranges = o->n_ranges;
	p->quarantine_s = o->quarantine_s;
	p->read_only = o->read_only;
	p->now_ms = o->now_ms;
	p->now_arg = o->now_arg;
	p->write_fault = o->write_fault;
	p->fault_arg = o->fault_arg;
	p->sync_fault = o->sync_fault;
	if (snprintf(p->path, sizeof(p->path), "%s/%s", o->state_dir, IBVF_POOL_DB_NAME) >=
	    (int)sizeof(p->path)) {
		ret = ibvf_errf(err, errlen, -ENAMETOOLONG, "state dir path too long");
		goto fail;
	}
	snprintf(p->id_path, sizeof(p->id_path), "%s/%s", o->state_dir, IBVF_POOL_ID_NAME);
	if (o->read_only && lstat(p->path, &st)) {
		ret = ibvf_errf(err, errlen, -ENOENT,
				"no GUID pool store at %s (has ibvfd or a write command run with "
				"this state directory?)",
				p->path);
		goto fail;
	}
	ret = ibvf_dir_prepare(o->state_dir, 0700, !o->read_only, err, errlen);
	if (ret)
		goto fail;
	ret = check_store_files(p, err, errlen);
	if (ret && ret != -ENOENT)
		goto fail;
	if (ret == -ENOENT) {
		if (o->read_only) {
			ret = ibvf_errf(err, errlen, -ENOENT,
					"no GUID pool store at %s (has ibvfd or a write command "
					"run with this state directory?)",
					p->path);
			goto fail;
		}
		ret = create_store(p, err, errlen);
		if (ret)
			goto fail;
	}
	flags = o->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
	if (sqlite3_open_v2(p->path, &p->db, flags | SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
		ret = corrupt(p, err, errlen, p->db ? sqlite3_errmsg(p->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(p->db, 10000);
	if (!stat(p->path, &st)) {
		p->db_dev = st.st_dev;
		p->db_ino = st.st_ino;
	}
	/* schema check first: journal_mode=WAL would write to a foreign file */
	ret = check_schema(p, err, errlen);
	if (ret)
		goto fail;
	if (!o->read_only) {
		if (exec(p, "PRAGMA journal_mode=WAL", err, errlen)) {
			ret = corrupt(p, err, errlen, sqlite3_errmsg(p->db));
			goto fail;
		}
		snprintf(sql, sizeof(sql), "PRAGMA synchronous=%s",
			 o->sync_full ? "FULL" : "NORMAL");
		if ((ret = exec(p, sql, err, errlen)))
			goto fail;
		/*
		 * Checkpoint every 1000 WAL pages (SQLite's default; 10000 before
		 * issue 14): what lives only in the WAL is what a damaged WAL loses
		 * (SQLite takes a bad frame for the end of the log). The engine
		 * also checkpoints after hand-overs (one per 1 s window) and each periodic pass
		 * (ibvf_pool_checkpoint()); a loss is detected by the generation
		 * check (pool.id) either way.
		 */
		if ((ret = exec(p, "PRAGMA wal_autocheckpoint=1000", err, errlen)))
			goto fail;
	}
	ret = sync_ranges(p, err, errlen);
	if (!ret)
		ret = check_identity(p, err, errlen);
	if (!ret && !o->read_only && o->sync_full)
		ret = start_group_commit(p, err, errlen);
	if (ret)
		goto fail;
	p->grouped = !o->read_only;
	/* the identity write of the open is no attach's write: health starts empty */
	pthread_mutex_lock(&p->health_lock);
	p->health.last_write_ms = p->health.last_ok_ms = 0;
	p->health.last_write_result = 0;
	pthread_mutex_unlock(&p->health_lock);
	*out = p;
	return 0;
fail:
	ibvf_pool_close(p);
	return ret;
}

void ibvf_pool_close(struct ibvf_pool *p)
{
	char err[IBVF_ERR_LEN] = "";

	if (!p)
		return;
	lazy_join(p);
	/*
	 * The syncer stops without syncing what a lazy write left: make it
	 * durable here (and pool.id name it), not only by SQLite's checkpoint at
	 * close, which another connection to the store prevents.
	 */
	if (p->db && ibvf_pool_sync(p, err, sizeof(err)))
		log_err("GUID pool store: closing with writes not durable: %s", err);
	if (p->tx_open && p->db)
		commit_inline(p, NULL, 0);
	for (size_t i = 0; i < p->n_stmts; i++) {
		sqlite3_finalize(p->stmts[i].st);
		free(p->stmts[i].sql);
	}
	sqlite3_close(p->db);
	if (p->id_fd >= 0)
		close(p->id_fd);
	if (p->wal_fd >= 0)
		close(p->wal_fd);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->health_lock);
	pthread_mutex_destroy(&p->sync_lock);
	pthread_cond_destroy(&p->sync_cond);
	pthread_cond_destroy(&p->lazy_cond);
	pthread_cond_destroy(&p->fill_cond);
	for (int v = 0; v < IBVF_VIEW_COUNT; v++)
		free(p->in_use[v]);
	free(p->ranges);
	free(p->rtext);
	free(p->rtext_for);
	free(p);
}

/* ----------------------------------------------------------- records -- */

#define ROW_COLS_V1                                                                                \
	"guid, state, container_id, ifname, pod_namespace, pod_name, pod_uid, network, pf, "       \
	"vf_index, pci, pkeys, created_ms, updated_ms, released_ms"
/* a read-only open may see a v1 store that no writer has migrated yet */
static const char row_cols_v2[] = ROW_COLS_V1 ", prev_node_guid, prev_port_guid, prev_link_state";
static const char row_cols_v1[] = ROW_COLS_V1 ", 0, 0, ''";
#define row_cols (p->schema_version >= 2 ? row_cols_v2 : row_cols_v1)

static void col_text(sqlite3_stmt *st, int i, char *dst, size_t len)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	size_t n = t ? (size_t)sqlite3_column_bytes(st, i) : 0;

	/* as snprintf("%s") did, without its cost per column of every row listed (issue 17) */
	if (n >= len)
		n = len - 1;
	if (n)
		memcpy(dst, t, n);
	dst[n] = 0;
}

static void parse_pkeys(const char *s, struct ibvf_alloc *a)
{
	a->n_pkeys = 0;
	while (s && *s && a->n_pkeys < IBVF_POOL_MAX_PKEYS) {
		char *end;
		unsigned long v = strtoul(s, &end, 16);

		if (end == s)
			break;
		a->pkeys[a->n_pkeys++] = (uint16_t)v;
		s = *end == ',' ? end + 1 : end;
	}
}

static void format_pkeys(const uint16_t *pk, size_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s0x%04x", i ? "," : "", pk[i]);
}

static void read_row(sqlite3_stmt *st, struct ibvf_alloc *a)
{
	char pk[128];

	memset(a, 0, sizeof(*a));
	a->guid = dec(sqlite3_column_int64(st, 0));
	a->state = (enum ibvf_alloc_state)sqlite3_column_int(st, 1);
	col_text(st, 2, a->owner.container_id, sizeof(a->owner.container_id));
	col_text(st, 3, a->owner.ifname, sizeof(a->owner.ifname));
	col_text(st, 4, a->owner.pod_namespace, sizeof(a->owner.pod_namespace));
	col_text(st, 5, a->owner.pod_name, sizeof(a->owner.pod_name));
	col_text(st, 6, a->owner.pod_uid, sizeof(a->owner.pod_uid));
	col_text(st, 7, a->owner.network, sizeof(a->owner.network));
	col_text(st, 8, a->pf, sizeof(a->pf));
	a->vf_index = sqlite3_column_int(st, 9);
	col_text(st, 10, a->pci, sizeof(a->pci));
	col_text(st, 11, pk, sizeof(pk));
	parse_pkeys(pk, a);
	a->created_ms = sqlite3_column_int64(st, 12);
	a->updated_ms = sqlite3_column_int64(st, 13);
	a->released_ms = sqlite3_column_int64(st, 14);
	/* a negative released_ms: quarantined, the SM not yet seen without it */
	a->sm_unseen = a->released_ms < 0;
	if (a->sm_unseen)
		a->released_ms = -a->released_ms;
	a->prev_node_guid = (uint64_t)sqlite3_column_int64(st, 15);
	a->prev_port_guid = (uint64_t)sqlite3_column_int64(st, 16);
	col_text(st, 17, a->prev_link_state, sizeof(a->prev_link_state));
}

/* One record by a WHERE clause with up to two text/int64 binds: 0, -ENOENT, <0. */
static int get_one(struct ibvf_pool *p, const char *where, const char *t1, const char *t2,
		   sqlite3_int64 i1, struct ibvf_alloc *out, char *err, size_t errlen)
{
	char sql[512];
	sqlite3_stmt *st;
	int rc;

	snprintf(sql, sizeof(sql), "SELECT %s FROM alloc WHERE %s", row_cols, where);
	if (prep(p, &st, sql, err, errlen))
		return -EIO;
	if (t1) {
		sqlite3_bind_text(st, 1, t1, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, t2, -1, SQLITE_STATIC);
	} else {
		sqlite3_bind_int64(st, 1, i1);
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		read_row(st, out);
	stmt_done(p, st);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc == SQLITE_DONE)
		return -ENOENT;
	return db_err(p, err, errlen, "lookup");
}

static int pool_get(struct ibvf_pool *p, uint64_t guid, struct ibvf_alloc *out, char *err,
		    size_t errlen)
{
	char g[IBVF_GUID_STR_LEN];
	int ret = get_one(p, "guid = ?1", NULL, NULL, enc(guid), out, err, errlen);

	if (ret == -ENOENT)
		ibvf_errf(err, errlen, ret, "GUID %s is not in the pool store",
			  ibvf_guid_format(guid, g));
	return ret;
}

int ibvf_pool_get(struct ibvf_pool *p, uint64_t guid, struct ibvf_alloc *out, char *err,
		  size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_get(p, guid, out, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

static int pool_find_owner(struct ibvf_pool *p, const char *container_id, const char *ifname,
			   struct ibvf_alloc *out, char *err, size_t errlen)
{
	int ret = get_one(p, "container_id = ?1 AND ifname = ?2 AND state != 7", container_id,
			  ifname, 0, out, err, errlen);

	if (ret == -ENOENT)
		ibvf_errf(err, errlen, ret, "no GUID held by container %.64s ifname %s",
			  container_id, ifname);
	return ret;
}

int ibvf_pool_find_owner(struct ibvf_pool *p, const char *container_id, const char *ifname,
			 struct ibvf_alloc *out, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_find_owner(p, container_id, ifname, out, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

static int pool_find_pci(struct ibvf_pool *p, const char *pci, struct ibvf_alloc *out, char *err,
			 size_t errlen)
{
	int ret;

	if (!pci || !*pci)
		return ibvf_errf(err, errlen, -EINVAL, "empty PCI address");
	ret = get_one(p, "pci = ?1 AND ?2 = ?2 AND state != 7 AND pci != ''", pci, "", 0, out, err,
		      errlen);
	if (ret == -ENOENT)
		ibvf_errf(err, errlen, ret, "no GUID recorded on VF %s", pci);
	return ret;
}

int ibvf_pool_find_pci(struct ibvf_pool *p, const char *pci, struct ibvf_alloc *out, char *err,
		       size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_find_pci(p, pci, out, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_find_attach(struct ibvf_pool *p, const char *container_id, const char *ifname,
			  const char *pci, struct ibvf_alloc *mine, struct ibvf_alloc *other,
			  char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_find_owner(p, container_id, ifname, mine, err, errlen);
	if (ret == -ENOENT)
		ret = pool_find_pci(p, pci, other, err, errlen);
	else if (!ret)
		ret = 1;
	return pool_unlock(p, ret, err, errlen);
}

static int insert_row(struct ibvf_pool *p, const struct ibvf_alloc *a, char *err, size_t errlen)
{
	char pk[128];
	sqlite3_stmt *st;

	if (prep(p, &st,
		 "INSERT INTO alloc(guid, state, container_id, ifname, pod_namespace, pod_name, "
		 "pod_uid, network, pf, vf_index, pci, pkeys, created_ms, updated_ms, "
		 "released_ms, prev_node_guid, prev_port_guid, prev_link_state) "
		 "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,?)",
		 err, errlen))
		return -EIO;
	format_pkeys(a->pkeys, a->n_pkeys, pk, sizeof(pk));
	sqlite3_bind_int64(st, 1, enc(a->guid));
	sqlite3_bind_int(st, 2, (int)a->state);
	sqlite3_bind_text(st, 3, a->owner.container_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, a->owner.ifname, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, a->owner.pod_namespace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, a->owner.pod_name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, a->owner.pod_uid, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, a->owner.network, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 9, a->pf, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 10, a->vf_index);
	sqlite3_bind_text(st, 11, a->pci, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 12, pk, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 13, a->created_ms);
	sqlite3_bind_int64(st, 14, a->updated_ms);
	sqlite3_bind_int64(st, 15, (sqlite3_int64)a->prev_node_guid);
	sqlite3_bind_int64(st, 16, (sqlite3_int64)a->prev_port_guid);
	sqlite3_bind_text(st, 17, a->prev_link_state, -1, SQLITE_STATIC);
	return run(p, st, err, errlen);
}

static int delete_row(struct ibvf_pool *p, uint64_t g, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (prep(p, &st, "DELETE FROM alloc WHERE guid = ?", err, errlen))
		return -EIO;
	sqlite3_bind_int64(st, 1, enc(g));
	return run(p, st, err, errlen);
}

/*
 * Free every GUID whose quarantine is over (and, with sm_check, that the SM
 * was seen without: released_ms > 0, see ibvf_pool_quarantine_seen()).
 * Inside a transaction.
 */
static int expire_locked(struct ibvf_pool *p, char *err, size_t errlen)
{
	int64_t cutoff = now_ms(p) - (int64_t)p->quarantine_s * 1000;
	sqlite3_stmt *st;
	uint64_t batch[256];
	int total = 0, ret = 0;

	for (;;) {
		size_t n = 0;
		int rc;

		if (prep(p, &st,
			 "SELECT guid FROM alloc WHERE state = 7 AND abs(released_ms) <= ?1"
			 " AND (released_ms > 0 OR ?2 = 0) LIMIT 256",
			 err, errlen))
			return -EIO;
		sqlite3_bind_int64(st, 1, cutoff);
		sqlite3_bind_int(st, 2, p->sm_check);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < 256)
			batch[n++] = dec(sqlite3_column_int64(st, 0));
		stmt_done(p, st);
		if (rc != SQLITE_DONE && rc != SQLITE_ROW)
			return db_err(p, err, errlen, "quarantine scan");
		for (size_t i = 0; i < n && !ret; i++) {
			ret = delete_row(p, batch[i], err, errlen);
			if (!ret && in_ranges(p, batch[i]))
				ret = extent_give(p, batch[i], err, errlen);
		}
		if (ret)
			return ret;
		total += (int)n;
		if (n < 256)
			return total;
	}
}

/* Length of a valid UTF-8 sequence at @s (1..4), or 0 (RFC 3629, 4). */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned c = s[0];
	size_t n, i;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

/*
 * A text field of a record: NUL-terminated inside its @size bytes, valid
 * UTF-8, no control characters. Records are shown by ibvfctl (tables on a
 * terminal, JSON) and in logs; a byte that is not text there would make
 * the record unprintable (JSON needs UTF-8) or inject escape sequences.
 */
static int check_text(const char *what, const char *s, size_t size, char *err, size_t errlen)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strnlen(s, size), i = 0;

	if (len == size)
		return ibvf_errf(err, errlen, -EINVAL, "%s is longer than %zu bytes", what,
				 size - 1);
	while (i < len) {
		size_t n = utf8_seq(u + i);

		if (!n || u[i] < 0x20 || u[i] == 0x7f)
			return ibvf_errf(err, errlen, -EINVAL, "%s has %s at byte %zu", what,
					 n ? "a control character" : "a byte that is not UTF-8", i);
		i += n;
	}
	return 0;
}

/*
 * The owner of an allocation (CNI spec 1.x, "Parameters"): CNI_CONTAINERID
 * starts with an alphanumeric character followed by alphanumerics, '_',
 * '.' or '-'; CNI_IFNAME is not empty, "." or "..", and has no '/', ':' or
 * white space; the other fields are text.
 */
static int check_owner(const struct ibvf_owner *o, char *err, size_t errlen)
{
	const char *c = o->container_id;
	int ret;

	if (!o->container_id[0] || !o->ifname[0])
		return ibvf_errf(err, errlen, -EINVAL,
				 "an owner needs a container ID and an interface name");
	if ((ret = check_text("container ID", c, sizeof(o->container_id), err, errlen)) ||
	    (ret = check_text("interface name", o->ifname, sizeof(o->ifname), err, errlen)) ||
	    (ret = check_text("pod namespace", o->pod_namespace, sizeof(o->pod_namespace), err,
			      errlen)) ||
	    (ret = check_text("pod name", o->pod_name, sizeof(o->pod_name), err, errlen)) ||
	    (ret = check_text("pod UID", o->pod_uid, sizeof(o->pod_uid), err, errlen)) ||
	    (ret = check_text("network name", o->network, sizeof(o->network), err, errlen)))
		return ret;
	if (!isalnum((unsigned char)c[0]) ||
	    strspn(c, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
		    strlen(c))
		return ibvf_errf(err, errlen, -EINVAL,
				 "container ID '%.64s' is not a CNI container ID (an alphanumeric "
				 "character, then alphanumerics, '_', '.' or '-')",
				 c);
	if (!strcmp(o->ifname, ".") || !strcmp(o->ifname, "..") || strpbrk(o->ifname, "/: \t"))
		return ibvf_errf(err, errlen, -EINVAL,
				 "interface name '%s' is not valid (CNI: not '.' or '..', no "
				 "'/', ':' or white space)",
				 o->ifname);
	return 0;
}

/* The PF netdev and VF PCI address a record names: text, as owner fields. */
static int check_place(const char *pf, const char *pci, char *err, size_t errlen)
{
	const struct ibvf_alloc *a = NULL;
	int ret = check_text("PF name", pf, sizeof(a->pf), err, errlen);

	return ret ? ret : check_text("PCI address", pci, sizeof(a->pci), err, errlen);
}

/*
 * Reuse the oldest quarantined GUID when the pool is otherwise exhausted:
 * 0 and *g set, 1 none, <0 error. Only a GUID inside the configured ranges
 * qualifies; after a range change the quarantine may hold others.
 */
static int take_oldest_quarantined(struct ibvf_pool *p, uint64_t *g, char *err, size_t errlen)
{
	char s[IBVF_GUID_STR_LEN];
	sqlite3_stmt *st;
	bool found = false;
	int rc = SQLITE_DONE;

	if (prep(p, &st,
		 "SELECT guid FROM alloc WHERE state = 7 AND (released_ms > 0 OR ?1 = 0)"
		 " ORDER BY abs(released_ms), guid",
		 err, errlen))
		return -EIO;
	sqlite3_bind_int(st, 1, p->sm_check);
	while (!found && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		*g = dec(sqlite3_column_int64(st, 0));
		found = ibvf_guid_is_assignable(*g) && in_ranges(p, *g) &&
			!seen_in_use(p, *g, NULL);
	}
	stmt_done(p, st);
	if (!found && rc != SQLITE_DONE)
		return db_err(p, err, errlen, "quarantine lookup");
	if (!found)
		return 1;
	log_warn("GUID pool exhausted: reusing GUID %s before its %u s quarantine is over",
		 ibvf_guid_format(*g, s), p->quarantine_s);
	return delete_row(p, *g, err, errlen);
}

/*
 * The owner key (issue 15 item 8): pod namespace, pod name, network and
 * ifname, never the container ID (a restarted container or a recreated Pod
 * has a new one). Without a pod name or a network there is no key. The
 * namespace may be empty: Podman passes only K8S_POD_NAME (its container
 * name, unique on the host). The store is this node's, so "same node" holds.
 */
static bool has_owner_key(const struct ibvf_owner *o)
{
	return o->pod_name[0] && o->network[0] && o->ifname[0];
}

static bool same_owner_key(const struct ibvf_owner *a, const struct ibvf_owner *b)
{
	return has_owner_key(a) && !strcmp(a->pod_namespace, b->pod_namespace) &&
	       !strcmp(a->pod_name, b->pod_name) && !strcmp(a->network, b->network) &&
	       !strcmp(a->ifname, b->ifname);
}

/*
 * The GUID @o's owner key held last, when it was released less than the
 * quarantine ago and can be assigned again: it is taken out of the
 * quarantine (row deleted; the caller inserts the new one). Not when a VF
 * or the SM's last listing shows it (a leak: the engine's SM check skips a
 * GUID left in a PKey, and then asks with no_owner_return). Return: 0 (*@g),
 * 1 (none), -EIO.
 */
static int take_owner_quarantined(struct ibvf_pool *p, const struct ibvf_owner *o, uint64_t *g,
				  char *err, size_t errlen)
{
	char s[IBVF_GUID_STR_LEN];
	sqlite3_stmt *st;
	bool found = false;
	int rc = SQLITE_DONE;

	if (!has_owner_key(o))
		return 1;
	if (prep(p, &st,
		 "SELECT guid FROM alloc WHERE state = 7 AND pod_name = ?1 AND pod_namespace = ?2"
		 " AND network = ?3 AND ifname = ?4 AND pod_name != '' AND network != ''"
		 " AND abs(released_ms) > ?5 ORDER BY abs(released_ms) DESC, guid",
		 err, errlen))
		return -EIO;
	sqlite3_bind_text(st, 1, o->pod_name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, o->pod_namespace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, o->network, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, o->ifname, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, now_ms(p) - (int64_t)p->quarantine_s * 1000);
	while (!found && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		*g = dec(sqlite3_column_int64(st, 0));
		found = ibvf_guid_is_assignable(*g) && in_ranges(p, *g) &&
			!seen_in_use(p, *g, NULL);
	}
	stmt_done(p, st);
	if (!found && rc != SQLITE_DONE)
		return db_err(p, err, errlen, "owner quarantine lookup");
	if (!found)
		return 1;
	log_info("GUID %s goes back to its owner pod %s/%s network %s ifname %s (container %.64s), "
		 "released within the %u s quarantine",
		 ibvf_guid_format(*g, s), o->pod_namespace, o->pod_name, o->network, o->ifname,
		 o->container_id, p->quarantine_s);
	return delete_row(p, *g, err, errlen);
}

static int exhausted(struct ibvf_pool *p, char *err, size_t errlen)
{
	struct ibvf_pool_stats st;
	char *r = ranges_text(p);
	int ret;

	if (ibvf_pool_stats(p, &st, NULL, 0))
		memset(&st, 0, sizeof(st));
	ret = ibvf_errf(err, errlen, -ENOSPC,
			"GUID pool exhausted: %zu range(s) %.100s%s hold %llu assignable GUIDs, "
			"%llu allocated, %llu quarantined",
			p->n_ranges, r ? r : "", r && strlen(r) > 100 ? "..." : "",
			(unsigned long long)st.total, (unsigned long long)st.allocated,
			(unsigned long long)st.quarantined);
	free(r);
	return ret;
}

static int take_requested(struct ibvf_pool *p, uint64_t g, const struct ibvf_owner *o,
			  bool reserved, char *err, size_t errlen)
{
	enum ibvf_pool_view view;
	char s[IBVF_GUID_STR_LEN];
	struct ibvf_alloc cur;
	int ret;

	ibvf_guid_format(g, s);
	if (!ibvf_guid_is_assignable(g))
		return ibvf_errf(err, errlen, -EINVAL, "GUID %s is not assignable (0 or all-ones)",
				 s);
	if (!in_ranges(p, g) && !reserved)
		return ibvf_errf(err, errlen, -ERANGE,
				 "requested GUID %s is outside the configured pool ranges", s);
	ret = get_one(p, "guid = ?1", NULL, NULL, enc(g), &cur, err, errlen);
	if (ret == 0 && cur.state == ST_Q && same_owner_key(o, &cur.owner) &&
	    now_ms(p) - cur.released_ms < (int64_t)p->quarantine_s * 1000) {
		log_info("requested GUID %s goes back to its owner pod %s/%s network %s ifname %s "
			 "within the quarantine",
			 s, o->pod_namespace, o->pod_name, o->network, o->ifname);
		return delete_row(p, g, err, errlen);
	}
	if (ret == 0 && cur.state == ST_Q)
		return ibvf_errf(err, errlen, -EBUSY,
				 "requested GUID %s was released %lld s ago and is in quarantine "
				 "(%u s)",
				 s, (long long)((now_ms(p) - cur.released_ms) / 1000),
				 p->quarantine_s);
	if (ret == 0)
		return ibvf_errf(err, errlen, -EEXIST,
				 "requested GUID %s is held by container %.64s ifname %s (pod "
				 "%s/%s); refusing to take it away",
				 s, cur.owner.container_id, cur.owner.ifname,
				 cur.owner.pod_namespace, cur.owner.pod_name);
	if (ret != -ENOENT)
		return ret;
	if (seen_in_use(p, g, &view))
		return ibvf_errf(err, errlen, -EEXIST,
				 "requested GUID %s is in use %s but no store record holds it; it "
				 "is not allocatable until reconciled (ibvfctl pool audit, ibvfctl "
				 "pool rebuild)",
				 s, view_name(view));
	if (!in_ranges(p, g))
		return 0; /* reserved cluster-wide, outside the node's blocks: no free list */
	ret = extent_take(p, g, err, errlen);
	if (ret == 1)
		return ibvf_errf(err, errlen, -EIO,
				 "pool store inconsistent: GUID %s is neither held nor free; run "
				 "'ibvfctl pool audit'",
				 s);
	return ret;
}

/* One allocation inside an open transaction. */
static int allocate_locked(struct ibvf_pool *p, const struct ibvf_alloc_request *req,
			   struct ibvf_alloc *out, char *err, size_t errlen)
{
	struct ibvf_alloc *a = out;
	char s[IBVF_GUID_STR_LEN];
	uint64_t g = 0;
	int ret;

	ret = check_owner(&req->owner, err, errlen);
	if (!ret)
		ret = check_place(req->pf ? req->pf : "", req->pci ? req->pci : "", err, errlen);
	if (ret)
		return ret;
	if (req->n_pkeys > IBVF_POOL_MAX_PKEYS)
		return ibvf_errf(err, errlen, -EINVAL, "at most %d PKeys per owner",
				 IBVF_POOL_MAX_PKEYS);
	if (req->state != IBVF_ALLOC_ALLOCATED && req->state != IBVF_ALLOC_SM_REQUESTED)
		return ibvf_errf(err, errlen, -EINVAL, "a new record cannot start at state %d",
				 (int)req->state);
	ret = get_one(p, "container_id = ?1 AND ifname = ?2 AND state != 7",
		      req->owner.container_id, req->owner.ifname, 0, a, err, errlen);
	if (ret == 0) {
		if (req->guid && req->guid != a->guid)
			return ibvf_errf(err, errlen, -EEXIST,
					 "container %.64s ifname %s already holds GUID %s",
					 req->owner.container_id, req->owner.ifname,
					 ibvf_guid_format(a->guid, s));
		return 0; /* idempotent */
	}
	if (ret != -ENOENT)
		return ret;
	if (req->guid) {
		g = req->guid;
		ret = take_requested(p, g, &req->owner, req->reserved, err, errlen);
	} else {
		ret = req->no_owner_return
			      ? 1
			      : take_owner_quarantined(p, &req->owner, &g, err, errlen);
		if (ret == 1)
			ret = extent_take_lowest_unused(p, &g, err, errlen);
		if (ret == 1)
			ret = take_oldest_quarantined(p, &g, err, errlen);
		if (ret == 1)
			return exhausted(p, err, errlen);
	}
	if (ret)
		return ret;
	memset(a, 0, sizeof(*a));
	a->guid = g;
	a->state = req->state;
	a->owner = req->owner;
	snprintf(a->pf, sizeof(a->pf), "%s", req->pf ? req->pf : "");
	snprintf(a->pci, sizeof(a->pci), "%s", req->pci ? req->pci : "");
	a->vf_index = req->vf_index;
	a->n_pkeys = req->n_pkeys;
	if (req->n_pkeys)
		memcpy(a->pkeys, req->pkeys, req->n_pkeys * sizeof(*req->pkeys));
	a->prev_node_guid = req->prev_node_guid;
	a->prev_port_guid = req->prev_port_guid;
	snprintf(a->prev_link_state, sizeof(a->prev_link_state), "%s",
		 req->prev_link_state ? req->prev_link_state : "");
	a->created_ms = a->updated_ms = now_ms(p);
	return insert_row(p, a, err, errlen);
}

/*
 * ---------------------------------------------------------- group commit --
 *
 * With sync_full, concurrent writes share one transaction and one fdatasync()
 * (issue 17): a write call runs inside the open transaction (BEGIN IMMEDIATE
 * by the first one, each later one in its own SAVEPOINT, so a failing call undoes
 * only itself), then leaves @lock and waits in durable_wait() until its group
 * is on disk. One waiter at a time is the leader: it COMMITs the open group
 * (SQLite synchronous=NORMAL: the WAL frames are written, not synced), then
 * fdatasync()s the WAL outside @lock, while the next calls already fill the
 * next group. A call returns only after the fdatasync() that followed its
 * COMMIT succeeded, so "full" keeps its meaning: on disk before the caller
 * acts on it. A failed COMMIT or fdatasync() fails every call of the groups
 * it covered, and none of them is acknowledged.
 *
 * Without sync_full (NORMAL) the same groups form, and a call returns once
 * the COMMIT of its group succeeded (what NORMAL promises: it survives the
 * process, kill -9, not a power loss); the leader only COMMITs, no sync.
 * Under a burst many calls share one COMMIT, its generation bump and its
 * pool.id write, instead of one each (issue 17: the one store connection
 * was the burst's limiter).
 *
 * Nested calls (a list callback that writes) and the open commit their group
 * at once, inline (with sync_full syncing inline too, holding @lock).
 */

static void pool_lock(struct ibvf_pool *p)
{
	atomic_fetch_add_explicit(&p->lock_waiters, 1, memory_order_relaxed);
	pthread_mutex_lock(&p->lock);
	atomic_fetch_sub_explicit(&p->lock_waiters, 1, memory_order_relaxed);
	p->depth++;
}

/* Is group @g resolved? 0 durable, <0 failed, 1 not yet. Under @sync_lock. */
static int group_result(const struct ibvf_pool *p, uint64_t g)
{
	for (size_t i = 0; i < p->n_failed; i++)
		if (g >= p->failed[i].lo && g <= p->failed[i].hi)
			return p->failed[i].ret;
	if (g <= p->failed_dropped)
		return -EIO; /* may have failed, the record is gone: never acknowledge it */
	return g <= p->synced ? 0 : 1;
}

/* Record that groups @lo..@hi failed with @ret (@msg); under @sync_lock. */
static void group_failed(struct ibvf_pool *p, uint64_t lo, uint64_t hi, int ret, const char *msg)
{
	size_t max = sizeof(p->failed) / sizeof(p->failed[0]);

	if (lo > hi)
		return;
	if (p->n_failed == max) {
		if (p->failed[0].hi > p->failed_dropped)
			p->failed_dropped = p->failed[0].hi;
		memmove(p->failed, p->failed + 1, (max - 1) * sizeof(p->failed[0]));
		p->n_failed--;
	}
	p->failed[p->n_failed++] = (struct group_failure){lo, hi, ret};
	snprintf(p->sync_msg, sizeof(p->sync_msg), "%s", msg);
}

/* Groups up to @target are durable (@ret 0) or failed; under @sync_lock. */
static void groups_synced(struct ibvf_pool *p, uint64_t target, int ret, const char *msg)
{
	if (target <= p->synced)
		return;
	if (ret)
		group_failed(p, p->synced + 1, target, ret, msg);
	p->synced = target;
	pthread_cond_broadcast(&p->sync_cond);
}

/*
 * The generation of this commit (check_identity()), in the open transaction:
 * meta 'generation' + 1, into @gen. A plain UPDATE and a point read, both
 * cached: the upsert with RETURNING they replace opened an ephemeral table
 * and a statement journal on every commit (a sixth of a lone write's CPU,
 * bench_pool -l). A store without the row (never written since its
 * creation) gets it from the upsert. Return: 0 or -EIO.
 */
static int bump_generation(struct ibvf_pool *p, sqlite3_int64 *gen, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (prep(p, &st,
		 "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'", err,
		 errlen) ||
	    run(p, st, err, errlen))
		return -EIO;
	if (sqlite3_changes(p->db) == 0 &&
	    exec_cached(p, "INSERT INTO meta VALUES('generation', '1')", err, errlen))
		return -EIO;
	return scalar_i64(p, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'generation'", 0,
			  0, gen, err, errlen) == 1
		       ? 0
		       : -EIO;
}

/*
 * COMMIT the open transaction (under @lock): the generation bump of a group
 * that changed rows, the fault seam, COMMIT, then pool.id. A failure rolls
 * the whole group back and fails every call in it. Return: 0 or -EIO.
 */
static int commit_open(struct ibvf_pool *p, char *err, size_t errlen)
{
	uint64_t g = p->tx_group;
	bool dirty = p->tx_dirty;
	sqlite3_int64 gen = 0;
	int ret = 0;

	if (!p->tx_open)
		return 0;
	p->store_failed = false;
	if (dirty && bump_generation(p, &gen, err, errlen))
		ret = -EIO;
	if (!ret && injected_fault(p, err, errlen))
		ret = -EIO;
	if (!ret && exec_cached(p, "COMMIT", err, errlen))
		ret = -EIO;
	if (ret && !sqlite3_get_autocommit(p->db))
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
	p->tx_open = p->tx_dirty = false;
	if (!dirty)
		return ret;
	pthread_mutex_lock(&p->sync_lock);
	if (ret) {
		if (!p->store_failed)
			ibvf_errf(p->store_msg, sizeof(p->store_msg), -EIO, "pool store %s: %s",
				  p->path, err && *err ? err : "COMMIT failed");
		group_failed(p, g, g, -EIO, p->store_msg);
		pthread_cond_broadcast(&p->sync_cond);
	} else {
		p->committed = g;
		if (!p->sync_full)
			groups_synced(p, g, 0, NULL); /* NORMAL: committed is all it promises */
	}
	pthread_mutex_unlock(&p->sync_lock);
	if (!ret) {
		p->generation = p->committed_gen = (uint64_t)gen;
		/* sync_full: pool.id follows the fdatasync (id_file_durable()) */
		if (!p->sync_full)
			write_id_file(p);
	}
	return ret;
}

/*
 * After an fdatasync() made generation @gen durable (under @lock): pool.id
 * records it. Never before: after a power loss pool.id must not name a
 * generation the WAL on disk lacks, or the store would look lost.
 */
static void id_file_durable(struct ibvf_pool *p, uint64_t gen)
{
	if (gen <= p->id_gen)
		return;
	write_id_file_gen(p, gen);
	p->id_gen = gen;
}

/*
 * Make the WAL durable: fdatasync() its file, or, once an fdatasync() failed
 * (@broken: write-back errors may have dropped pages the WAL on disk lacks),
 * a checkpoint that copies everything into pool.db and syncs it; that needs
 * @lock. Return: 0 or -EIO (@msg set).
 */
static int sync_wal(struct ibvf_pool *p, bool broken, char *msg, size_t len)
{
	int f = p->sync_fault ? p->sync_fault(p->fault_arg) : 0;
	int log = 0, done = 0, rc;

	if (f < 0)
		return ibvf_errf(msg, len, -EIO, "pool store %s-wal: fdatasync: %s (injected)",
				 p->path, strerror(-f));
	if (broken) {
		rc = sqlite3_wal_checkpoint_v2(p->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
		if (rc != SQLITE_OK || log != done)
			return ibvf_errf(
				msg, len, -EIO,
				"pool store %s: a WAL fdatasync failed, and the checkpoint "
				"that would make the writes since durable did not finish (%s)",
				p->path, rc == SQLITE_OK ? "frames left" : sqlite3_errstr(rc));
		return 0;
	}
	if (p->wal_fd < 0)
		return ibvf_errf(msg, len, -EIO, "pool store %s-wal: not open", p->path);
	if (fdatasync(p->wal_fd))
		return ibvf_errf(msg, len, -EIO, "pool store %s-wal: fdatasync: %s", p->path,
				 strerror(errno));
	return 0;
}

/* After sync_wal(): remember a failure (under @sync_lock). */
static void sync_outcome(struct ibvf_pool *p, bool broken, int rc)
{
	if (rc && !p->sync_broken)
		log_err("GUID pool store: %s (writes fail until a checkpoint succeeds)",
			p->sync_msg);
	else if (!rc && broken && p->sync_broken)
		log_notice(
			"GUID pool store %s: checkpointed after the failed WAL fdatasync; writes "
			"are durable again",
			p->path);
	p->sync_broken = rc != 0;
}

/*
 * Before the leader COMMITs the open group (holding @lock): while public
 * calls wait for @lock, let them in first, so that they join this group
 * instead of each committing one of their own. Under a burst the calls
 * queue on @lock and a group was about one call (bench_pool -p, 16 threads,
 * sync normal: ~1 COMMIT per write call, the COMMIT a third of the store's
 * CPU). The leader waits on @fill_cond, which releases @lock; each public
 * call signals it when it leaves (call_left()). A call that joins waits for
 * this group as before and the leader commits afterwards, so no call
 * returns before its group's COMMIT (and with sync_full its fdatasync()).
 * Bounded: at most GROUP_FILL_MAX calls go first, even when calls keep
 * coming, and the leader stops at the first wait of GROUP_FILL_WAIT_US that
 * no call came through (a waiter that did not get a CPU meanwhile: the
 * commit is a little late, never lost).
 */
#define GROUP_FILL_MAX	   64
#define GROUP_FILL_WAIT_US 1000

static void group_fill(struct ibvf_pool *p)
{
	p->filling = true;
	for (int i = 0; i < GROUP_FILL_MAX && p->tx_open && p->tx_dirty &&
			atomic_load_explicit(&p->lock_waiters, memory_order_relaxed) > 0;
	     i++) {
		struct timespec ts;

		ibvf_mono_deadline_us(GROUP_FILL_WAIT_US, &ts);
		if (pthread_cond_timedwait(&p->fill_cond, &p->lock, &ts) == ETIMEDOUT)
			break; /* no call came through: commit now */
	}
	p->filling = false;
}

/* A public call leaves (@lock held, its depth back at 0): a filling leader goes on. */
static void call_left(struct ibvf_pool *p)
{
	if (p->filling)
		pthread_cond_signal(&p->fill_cond);
}

/*
 * Wait until group @g is durable, leading the commit and fdatasync() when no
 * one else does. Called without @lock. Return: 0, or -EIO (@msg set).
 */
static int durable_wait(struct ibvf_pool *p, uint64_t g, char *msg, size_t len)
{
	char m[IBVF_ERR_LEN] = "";
	uint64_t target, gen;
	bool broken;
	int r, rc;

	pthread_mutex_lock(&p->sync_lock);
	while ((r = group_result(p, g)) > 0) {
		if (p->syncing) {
			pthread_cond_wait(&p->sync_cond, &p->sync_lock);
			continue;
		}
		p->syncing = true;
		broken = p->sync_broken;
		pthread_mutex_unlock(&p->sync_lock);
		pthread_mutex_lock(&p->lock);
		group_fill(p);
		/* everything written so far shares this fdatasync() */
		if (p->tx_open && p->tx_dirty)
			commit_open(p, NULL, 0);
		if (!p->sync_full) {
			/* NORMAL: the COMMIT resolved its group (commit_open()); no sync */
			pthread_mutex_unlock(&p->lock);
			pthread_mutex_lock(&p->sync_lock);
			p->syncing = false;
			pthread_cond_broadcast(&p->sync_cond);
			continue;
		}
		target = p->committed;
		gen = p->committed_gen;
		if (broken) {
			rc = sync_wal(p, true, m, sizeof(m)); /* a checkpoint: the connection */
			if (!rc)
				id_file_durable(p, gen);
			pthread_mutex_unlock(&p->lock);
		} else {
			pthread_mutex_unlock(&p->lock);
			rc = sync_wal(p, false, m, sizeof(m));
			if (!rc) {
				pthread_mutex_lock(&p->lock);
				id_file_durable(p, gen);
				pthread_mutex_unlock(&p->lock);
			}
		}
		pthread_mutex_lock(&p->sync_lock);
		groups_synced(p, target, rc, m);
		sync_outcome(p, broken, rc);
		p->syncing = false;
		pthread_cond_broadcast(&p->sync_cond);
	}
	if (r < 0)
		snprintf(msg, len, "%s", p->sync_msg);
	pthread_mutex_unlock(&p->sync_lock);
	return r;
}

/* Commit the open group and (sync_full) sync it, holding @lock: the inline path. */
static void commit_inline(struct ibvf_pool *p, char *err, size_t errlen)
{
	char m[IBVF_ERR_LEN] = "";
	uint64_t target;
	bool broken;
	int rc;

	if (commit_open(p, err, errlen) || !p->sync_full)
		return;
	target = p->committed;
	pthread_mutex_lock(&p->sync_lock);
	broken = p->sync_broken;
	if (target <= p->synced) /* nothing new to make durable */
		target = 0;
	pthread_mutex_unlock(&p->sync_lock);
	if (!target)
		return;
	rc = sync_wal(p, broken, m, sizeof(m));
	if (!rc)
		id_file_durable(p, p->committed_gen);
	pthread_mutex_lock(&p->sync_lock);
	groups_synced(p, target, rc, m);
	sync_outcome(p, broken, rc);
	pthread_mutex_unlock(&p->sync_lock);
}

/*
 * Undo the current call's part of the open transaction after a failure; the
 * calls before it in the group keep theirs. When SQLite rolled the whole
 * transaction back itself (I/O error, disk full), every call of the group
 * fails.
 */
static void undo_call(struct ibvf_pool *p)
{
	uint64_t g = p->tx_group;

	if (p->in_savepoint)
		sqlite3_exec(p->db, "ROLLBACK TO op; RELEASE op", NULL, NULL, NULL);
	p->in_savepoint = false;
	if (p->tx_open && sqlite3_get_autocommit(p->db)) {
		if (p->tx_dirty) {
			pthread_mutex_lock(&p->sync_lock);
			group_failed(p, g, g, -EIO,
				     p->store_failed ? p->store_msg : "transaction rolled back");
			pthread_cond_broadcast(&p->sync_cond);
			pthread_mutex_unlock(&p->sync_lock);
		}
		p->tx_open = p->tx_dirty = false;
	} else if (p->tx_open && !p->tx_dirty) {
		/* nothing in it to keep: free the write lock */
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
		p->tx_open = false;
	}
	if (p->store_failed)
		record_write(p, p->store_ret);
}

/*
 * Start a write call: join the open transaction of its group, or BEGIN
 * IMMEDIATE a new one (with a free list that matches our ranges); a call
 * that joins runs in its own SAVEPOINT.
 */
static int begin(struct ibvf_pool *p, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	bool opened = false;
	int ret;

	if (p->read_only)
		return ibvf_errf(err, errlen, -EROFS, "pool store %s is open read-only", p->path);
	p->store_failed = false;
	if (!p->tx_open) {
		ret = exec_cached(p, "BEGIN IMMEDIATE", err, errlen);
		if (ret) {
			if (p->store_failed)
				record_write(p, p->store_ret);
			return ret;
		}
		p->tx_open = true;
		p->tx_dirty = false;
		p->tx_group = ++p->next_group;
		opened = true;
	}
	p->changes_at_begin = sqlite3_total_changes64(p->db);
	/*
	 * Calls run one at a time (@lock): the call that opened the transaction
	 * has it to itself, and undoes its failure with ROLLBACK; one that joins
	 * other calls' writes undoes only its own part (SAVEPOINT).
	 */
	p->in_savepoint = !opened;
	ret = 0;
	if (!opened && !(ret = prep(p, &st, "SAVEPOINT op", err, errlen)))
		ret = run(p, st, err, errlen);
	/* another process may rebuild the free list, but only between our transactions */
	if (!ret && opened)
		ret = ensure_free_list_locked(p, err, errlen);
	if (ret)
		undo_call(p);
	return ret;
}

/* The test seam of ibvf_pool_opts.write_fault, as a store error. */
static int injected_fault(struct ibvf_pool *p, char *err, size_t errlen)
{
	int f = p->write_fault ? p->write_fault(p->fault_arg) : 0;

	if (f >= 0)
		return 0;
	ibvf_errf(p->store_msg, sizeof(p->store_msg), -EIO, "pool store %s: COMMIT: %s (injected)",
		  p->path, strerror(-f));
	p->store_failed = true;
	p->store_ret = -EIO;
	return ibvf_errf(err, errlen, -EIO, "%s", p->store_msg);
}

/*
 * End a write call (@ret >= 0: keep its changes; < 0: undo them), and record
 * the outcome for ibvf_pool_health(): a failure of SQLite (db_err())
 * anywhere in the call, or a write that changed rows (once durable). A call
 * that changed nothing (an idempotent no-op, a refusal) proves nothing about
 * the disk. A top-level call with sync_full returns here with its group still
 * to be made durable: pool_unlock() waits for it.
 */
static int finish(struct ibvf_pool *p, int ret, char *err, size_t errlen)
{
	bool changed = sqlite3_total_changes64(p->db) != p->changes_at_begin;
	char msg[IBVF_ERR_LEN] = "";
	sqlite3_stmt *st;
	uint64_t g;
	int r;

	if (ret >= 0 && p->in_savepoint &&
	    (prep(p, &st, "RELEASE op", err, errlen) || run(p, st, err, errlen)))
		ret = -EIO;
	if (ret >= 0)
		p->in_savepoint = false;
	if (ret < 0) {
		undo_call(p);
		return ret;
	}
	p->tx_dirty |= changed;
	if (!p->tx_dirty) {
		/* nothing to make durable: end the transaction (frees the write lock) */
		if (commit_open(p, err, errlen)) {
			if (p->store_failed)
				record_write(p, p->store_ret);
			return -EIO;
		}
		return ret;
	}
	g = p->tx_group;
	if (p->grouped && p->depth == 1) {
		if (g > p->need)
			p->need = g;
		p->need_changed |= changed;
		return ret;
	}
	commit_inline(p, err, errlen);
	pthread_mutex_lock(&p->sync_lock);
	r = group_result(p, g);
	if (r < 0)
		snprintf(msg, sizeof(msg), "%s", p->sync_msg);
	pthread_mutex_unlock(&p->sync_lock);
	if (r < 0) {
		record_write_msg(p, r, msg);
		return ibvf_errf(err, errlen, r, "%s", msg);
	}
	if (changed)
		record_write_msg(p, 0, NULL);
	return ret;
}

/*
 * Leave a public call. At the outermost level with sync_full, wait until
 * what it wrote, and what it read of other calls' writes, is durable. A
 * write whose group failed fails (-EIO, @err set).
 */
static int pool_unlock(struct ibvf_pool *p, int ret, char *err, size_t errlen)
{
	char msg[IBVF_ERR_LEN] = "";
	bool changed = false;
	uint64_t g = 0, vis;
	int r;

	if (--p->depth == 0)
		call_left(p);
	if (p->depth == 0 && p->grouped) {
		g = p->need;
		changed = p->need_changed;
		p->need = 0;
		p->need_changed = false;
		vis = p->tx_open && p->tx_dirty ? p->tx_group : p->committed;
		if (vis > g)
			g = vis;
	}
	pthread_mutex_unlock(&p->lock);
	if (!g)
		return ret;
	r = durable_wait(p, g, msg, sizeof(msg));
	if (!changed)
		return ret; /* a read waited for what it saw; a failed group is its writers' */
	record_write_msg(p, r < 0 ? r : 0, msg);
	return r < 0 ? ibvf_errf(err, errlen, r, "%s", msg) : ret;
}

/* Leave a call that touched no store state. */
static void pool_unlock_mem(struct ibvf_pool *p)
{
	if (--p->depth == 0)
		call_left(p);
	pthread_mutex_unlock(&p->lock);
}

/*
 * ------------------------------------------------------------ lazy writes --
 *
 * A lazy write (issue 17) records a step that has already happened and whose
 * loss reconciliation settles the same way (docs/pool.md, "Durability
 * classes"). It runs and COMMITs like any write (the WAL frames are in the
 * kernel's page cache when it returns: a kill -9 of the process loses
 * nothing), but returns without waiting for the fdatasync(). The WAL is
 * append-only and one fdatasync() covers every frame before it, so the write
 * is durable with the next synced write's fdatasync(), a checkpoint, or the
 * syncer thread below, which starts one right away, off the caller's path.
 * Any later call that reads the store waits for it as for any other write it
 * may have seen (pool_unlock()), so nothing acts on it before it is durable.
 * With "normal" a lazy write is an ordinary write (the COMMIT is all
 * "normal" promises).
 */

#define LAZY_LINGER_US 300

/* Wait LAZY_LINGER_US on @lazy_cond (under @sync_lock), or until stopped. */
static void linger(struct ibvf_pool *p)
{
	struct timespec ts;

	ibvf_mono_deadline_us(LAZY_LINGER_US, &ts);
	while (!p->lazy_stop &&
	       pthread_cond_timedwait(&p->lazy_cond, &p->sync_lock, &ts) != ETIMEDOUT)
		;
}

static void *lazy_main(void *arg)
{
	struct ibvf_pool *p = arg;
	char msg[IBVF_ERR_LEN];
	uint64_t g;
	int r;

	pthread_mutex_lock(&p->sync_lock);
	for (;;) {
		while (!p->lazy_stop && group_result(p, p->lazy_want) <= 0)
			pthread_cond_wait(&p->lazy_cond, &p->sync_lock);
		if (p->lazy_stop)
			break;
		/*
		 * Linger LAZY_LINGER_US first: the caller is still on its way to
		 * its answer (a worker handing a reply to the loop thread), and
		 * an fdatasync() started on the other core at once delayed that
		 * by ~0.07 ms on 2 cores (bench_cni, reply_queue). A call that
		 * needs the write durable meanwhile leads the sync itself.
		 */
		linger(p);
		g = p->lazy_want;
		pthread_mutex_unlock(&p->sync_lock);
		msg[0] = 0;
		r = durable_wait(p, g, msg, sizeof(msg));
		if (r < 0) /* acknowledged already: the store's health shows it */
			record_write_msg(p, r, msg);
		pthread_mutex_lock(&p->sync_lock);
	}
	pthread_mutex_unlock(&p->sync_lock);
	return NULL;
}

/* Stop the syncer (ibvf_pool_close(): the close's own commit and checkpoint follow). */
static void lazy_join(struct ibvf_pool *p)
{
	if (!p->lazy_started)
		return;
	pthread_mutex_lock(&p->sync_lock);
	p->lazy_stop = true;
	pthread_cond_broadcast(&p->lazy_cond);
	pthread_mutex_unlock(&p->sync_lock);
	pthread_join(p->lazy_thread, NULL);
	p->lazy_started = false;
}

/*
 * Leave a lazy write call (instead of pool_unlock()): COMMIT its group now,
 * hand the group to the syncer, return without waiting for the disk. Nested
 * calls, "normal", and a syncer that cannot start: as pool_unlock().
 */
static int pool_unlock_lazy(struct ibvf_pool *p, int ret, char *err, size_t errlen)
{
	char msg[IBVF_ERR_LEN] = "";
	bool changed;
	uint64_t g;
	int r = 0;

	if (p->depth != 1 || !p->grouped || !p->sync_full || !p->need)
		return pool_unlock(p, ret, err, errlen);
	if (!p->lazy_started) {
		p->lazy_stop = false;
		if (pthread_create(&p->lazy_thread, NULL, lazy_main, p))
			return pool_unlock(p, ret, err, errlen); /* synced instead */
		p->lazy_started = true;
	}
	g = p->need;
	changed = p->need_changed;
	p->need = 0;
	p->need_changed = false;
	if (p->tx_open && p->tx_dirty && p->tx_group <= g)
		commit_open(p, NULL, 0); /* a failure is recorded for every call of the group */
	pthread_mutex_lock(&p->sync_lock);
	r = group_result(p, g);
	if (r < 0) {
		snprintf(msg, sizeof(msg), "%s", p->sync_msg);
	} else {
		r = 0;
		if (g > p->lazy_want)
			p->lazy_want = g;
		pthread_cond_signal(&p->lazy_cond);
	}
	pthread_mutex_unlock(&p->sync_lock);
	if (--p->depth == 0)
		call_left(p);
	pthread_mutex_unlock(&p->lock);
	if (changed || r)
		record_write_msg(p, r, msg);
	return r < 0 ? ibvf_errf(err, errlen, r, "%s", msg) : ret;
}

int ibvf_pool_sync(struct ibvf_pool *p, char *err, size_t errlen)
{
	char msg[IBVF_ERR_LEN] = "";
	uint64_t g;
	int r;

	if (p->read_only || !p->grouped)
		return 0;
	pthread_mutex_lock(&p->lock);
	g = p->tx_open && p->tx_dirty ? p->tx_group : p->committed;
	pthread_mutex_unlock(&p->lock);
	if (!g)
		return 0;
	r = durable_wait(p, g, msg, sizeof(msg));
	return r < 0 ? ibvf_errf(err, errlen, r, "%s", msg) : 0;
}

/* --------------------------------------------------- store identity -- */

/* meta @key into @buf: 1 found, 0 absent, <0 error. */
static int meta_get(struct ibvf_pool *p, const char *key, char *buf, size_t len, char *err,
		    size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	buf[0] = 0;
	if (prep(p, &st, "SELECT value FROM meta WHERE key = ?", err, errlen))
		return -EIO;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		col_text(st, 0, buf, len);
	stmt_done(p, st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_err(p, err, errlen, "meta lookup");
	return rc == SQLITE_ROW;
}

/* Set (or with @value NULL delete) meta @key inside a transaction. */
static int meta_set(struct ibvf_pool *p, const char *key, const char *value, char *err,
		    size_t errlen)
{
	sqlite3_stmt *st;

	if (prep(p, &st,
		 value ? "INSERT OR REPLACE INTO meta VALUES(?1, ?2)"
		       : "DELETE FROM meta WHERE key = ?1",
		 err, errlen))
		return -EIO;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (value)
		sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
	return run(p, st, err, errlen);
}

static void set_lost(struct ibvf_pool *p, const char *why)
{
	pthread_mutex_lock(&p->health_lock);
	p->health.lost = why != NULL;
	snprintf(p->health.lost_why, sizeof(p->health.lost_why), "%s", why ? why : "");
	pthread_mutex_unlock(&p->health_lock);
}

static bool is_lost(struct ibvf_pool *p, char *why, size_t len)
{
	bool l;

	pthread_mutex_lock(&p->health_lock);
	l = p->health.lost;
	if (why)
		snprintf(why, len, "%s", p->health.lost_why);
	pthread_mutex_unlock(&p->health_lock);
	return l;
}

/*
 * <state_dir>/pool.id: "ibvf-pool-id 1\nid <32 hex>\ngeneration <n>\n", the
 * store's identity and the generation of its last commit, kept OUTSIDE the
 * database (issue 14): a store that was deleted, replaced, or lost commits
 * (a damaged WAL, an older copy) no longer matches it. Written after every
 * commit that changed rows, never while the store is marked lost: then it
 * keeps the evidence until ibvf_pool_rebuilt(). Created by an atomic,
 * fsync'ed replace at open; then each commit overwrites it in place (one
 * pwrite() of the same length, no fsync: it must survive a process crash
 * like the WAL; after a power loss a mismatch is a real loss or a damaged
 * pool.id, both taken as a loss: safe).
 */
/*
 * pool.db and pool.id are still the files this pool opened (issue 14): one
 * deleted or replaced while ibvfd runs would have it go on writing a file
 * nobody will open again (the next start finds a store that lost records,
 * or no identity to compare with). Checked before every pool.id write and by
 * ibvf_pool_checkpoint() (each periodic pass): two stat(2)s. A change marks
 * the store lost at once (in memory and in its meta 'lost' row): allocation
 * stops, status says why. Called with p->lock held, no transaction open.
 * Return: true when the store is (now) marked lost.
 */
static bool check_files(struct ibvf_pool *p)
{
	char why[IBVF_ERR_LEN] = "", e2[IBVF_ERR_LEN];
	struct stat a;

	if (p->read_only || !p->store_id[0])
		return false;
	if (is_lost(p, NULL, 0))
		return true;
	if (stat(p->path, &a))
		snprintf(why, sizeof(why), "%.200s was removed while ibvfd ran (%s)", p->path,
			 strerror(errno));
	else if (p->db_ino && (a.st_dev != p->db_dev || a.st_ino != p->db_ino))
		snprintf(why, sizeof(why),
			 "%.200s was replaced by another file while ibvfd ran (moved aside, or "
			 "copied back)",
			 p->path);
	else if (p->id_fd >= 0 && stat(p->id_path, &a))
		snprintf(why, sizeof(why),
			 "the store identity %.200s was removed while ibvfd ran (%s): a store "
			 "lost with it could no longer be detected",
			 p->id_path, strerror(errno));
	else if (p->id_fd >= 0 && (a.st_dev != p->id_dev || a.st_ino != p->id_ino)) {
		char fid[40] = "";
		uint64_t fgen = 0;

		/*
		 * Another writer of this store (a second pool, ibvfctl) replaces
		 * pool.id at its open: fine while it names this store. Another
		 * store's identity or a damaged file is a loss.
		 */
		if (read_id_file(p, fid, sizeof(fid), &fgen, e2, sizeof(e2)) ||
		    strcmp(fid, p->store_id))
			snprintf(why, sizeof(why),
				 "the store identity %.200s was replaced while ibvfd ran by one "
				 "that does not name this store (%.200s)",
				 p->id_path, fid[0] ? fid : e2);
		else {
			close(p->id_fd); /* write the one that is there from now on */
			open_id_fd(p);
		}
	}
	if (!why[0])
		return false;
	set_lost(p, why);
	ibvf_log(LOG_CRIT,
		 "GUID POOL STORE LOST RECORDS: %s. Not allocating any GUID until 'ibvfctl pool "
		 "rebuild' has adopted what the VFs and the SM show in use (docs/operations.md, "
		 "\"Store lost or damaged\")",
		 why);
	/* kept in the store too, so a restart does not forget it (pool.id is not rewritten) */
	if (begin(p, e2, sizeof(e2)) == 0 &&
	    finish(p, meta_set(p, "lost", why, e2, sizeof(e2)), e2, sizeof(e2)))
		log_err("GUID pool store: the lost mark is not stored: %s", e2);
	/* at once, not with a group: the caller (a checkpoint) needs no transaction open */
	if (p->tx_open)
		commit_inline(p, NULL, 0);
	return true;
}

/*
 * Open pool.id for the in-place writes (@id_fd, -1 when it cannot be) and
 * keep which file it is: check_files() compares the path's stat() with it
 * on every pool.id write, one fstat() less per commit.
 */
static void open_id_fd(struct ibvf_pool *p)
{
	struct stat st;

	p->id_fd = open(p->id_path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (p->id_fd >= 0 && fstat(p->id_fd, &st)) {
		close(p->id_fd);
		p->id_fd = -1;
	}
	if (p->id_fd >= 0) {
		p->id_dev = st.st_dev;
		p->id_ino = st.st_ino;
	}
}

static void write_id_file(struct ibvf_pool *p)
{
	write_id_file_gen(p, p->generation);
}

/* pool.id with generation @gen (group commit writes it once that is durable). */
static void write_id_file_gen(struct ibvf_pool *p, uint64_t gen)
{
	char buf[128], err[IBVF_ERR_LEN] = "";
	int n, ret = 0;

	if (p->read_only || !p->store_id[0] || is_lost(p, NULL, 0))
		return;
	if (check_files(p))
		return; /* marked lost: pool.id keeps the evidence */
	/* fixed width: an overwrite in place replaces the whole content */
	n = snprintf(buf, sizeof(buf), "ibvf-pool-id 1\nid %s\ngeneration %020llu\n", p->store_id,
		     (unsigned long long)gen);
	if (p->id_fd >= 0) {
		/* one pwrite(): the per-commit cost (a rename per commit cost 5x an allocation) */
		if (pwrite(p->id_fd, buf, (size_t)n, 0) == n)
			goto ok;
		close(p->id_fd);
		p->id_fd = -1;
	}
	ret = ibvf_file_replace(p->id_path, buf, (size_t)n, 0600, IBVF_FILE_FSYNC, err,
				sizeof(err));
	if (!ret) {
		open_id_fd(p);
		goto ok;
	}
	if (!p->id_write_failed)
		log_err("GUID pool store identity %s not updated (a lost store may go unnoticed): "
			"%s",
			p->id_path, err);
	p->id_write_failed = true;
	return;
ok:
	if (p->id_write_failed)
		log_notice("GUID pool store identity %s written again", p->id_path);
	p->id_write_failed = false;
}

/* Read pool.id: 0, -ENOENT, or -EINVAL with @why set (damaged). */
static int read_id_file(struct ibvf_pool *p, char *id, size_t idlen, uint64_t *gen, char *why,
			size_t whylen)
{
	char *buf = NULL, e2[IBVF_ERR_LEN], idbuf[40];
	unsigned long long g;
	size_t len;
	int ret, v;

	ret = ibvf_file_read_regular(p->id_path, 4096, 0, &buf, &len, NULL, e2, sizeof(e2));
	if (ret == -ENOENT)
		return -ENOENT;
	if (ret)
		return ibvf_errf(why, whylen, -EINVAL, "the store identity %s cannot be read: %s",
				 p->id_path, e2);
	ret = sscanf(buf, "ibvf-pool-id %d id %39s generation %llu", &v, idbuf, &g);
	free(buf);
	if (ret != 3 || v != 1 || strlen(idbuf) != 32)
		return ibvf_errf(why, whylen, -EINVAL,
				 "the store identity %s is damaged (not \"ibvf-pool-id 1\")",
				 p->id_path);
	snprintf(id, idlen, "%s", idbuf);
	*gen = g;
	return 0;
}

static int random_id(char *out, size_t len, char *err, size_t errlen)
{
	unsigned char r[16];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return ibvf_errf(err, errlen, -EIO, "getrandom: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(r) && 2 * i + 2 < len; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	return 0;
}

/* Why store (@sid, @gen) and pool.id (@fret, @fid, @fgen) disagree, or "" (check_identity()). */
static void identity_mismatch(struct ibvf_pool *p, const char *sid, uint64_t gen, int fret,
			      const char *fid, uint64_t fgen, const char *fwhy, char *lost,
			      size_t len)
{
	if (fret == -ENOENT)
		return;
	if (fret < 0)
		snprintf(lost, len, "%s", fwhy);
	else if (strcmp(fid, sid))
		snprintf(lost, len,
			 "%.120s is not the store %.120s names (id %s, generation %llu): the "
			 "store this state directory had was deleted, moved aside or replaced",
			 p->path, p->id_path, fid, (unsigned long long)fgen);
	else if (gen < fgen)
		snprintf(lost, len,
			 "%.120s is at generation %llu but %.120s recorded generation %llu: %llu "
			 "committed write(s) are missing (a damaged or lost WAL, or an older copy "
			 "of the store)",
			 p->path, (unsigned long long)gen, p->id_path, (unsigned long long)fgen,
			 (unsigned long long)(fgen - gen));
}

/*
 * A reader's open (ibvfctl's offline commands, issue 14): the same
 * comparison as a writer's, nothing written. A store marked lost, or one
 * that disagrees with pool.id, is reported (ibvf_pool_lost() is true, logged
 * at err) instead of being shown as if it were whole. A store written by a
 * version without an identity, or no pool.id, is no finding.
 */
static int check_identity_ro(struct ibvf_pool *p, int fret, const char *fid, uint64_t fgen,
			     const char *fwhy, char *err, size_t errlen)
{
	char gbuf[32] = "", lost[IBVF_ERR_LEN] = "";
	int ret;

	ret = meta_get(p, "store_id", p->store_id, sizeof(p->store_id), err, errlen);
	if (ret < 0)
		return ret;
	if (ret == 0)
		return 0; /* no identity yet: nothing to compare */
	ret = meta_get(p, "generation", gbuf, sizeof(gbuf), err, errlen);
	if (ret >= 0)
		ret = meta_get(p, "lost", lost, sizeof(lost), err, errlen);
	if (ret < 0)
		return ret;
	p->generation = strtoull(gbuf, NULL, 10);
	if (!lost[0])
		identity_mismatch(p, p->store_id, p->generation, fret, fid, fgen, fwhy, lost,
				  sizeof(lost));
	if (lost[0]) {
		set_lost(p, lost);
		log_err("GUID POOL STORE LOST RECORDS: %s. What it shows may miss GUIDs in use; "
			"run 'ibvfctl pool rebuild' (docs/operations.md, \"Store lost or damaged\")",
			lost);
	}
	return 0;
}

/*
 * At open (writers only): give the store an identity if it has none, compare
 * store and pool.id, and mark the store lost (meta 'lost', kept until
 * ibvf_pool_rebuilt()) when they disagree. Logged at crit: allocation stops.
 */
static int check_identity(struct ibvf_pool *p, char *err, size_t errlen)
{
	char fid[40] = "", gbuf[32], why[IBVF_ERR_LEN] = "", lost[IBVF_ERR_LEN] = "";
	uint64_t fgen = 0;
	bool found_lost = false;
	int ret, fret;

	fret = read_id_file(p, fid, sizeof(fid), &fgen, why, sizeof(why));
	if (p->read_only)
		return check_identity_ro(p, fret, fid, fgen, why, err, errlen);
	ret = begin(p, err, errlen);
	if (ret)
		return ret;
	ret = meta_get(p, "store_id", p->store_id, sizeof(p->store_id), err, errlen);
	if (ret == 0) {
		ret = random_id(p->store_id, sizeof(p->store_id), err, errlen);
		if (!ret)
			ret = meta_set(p, "store_id", p->store_id, err, errlen);
	}
	if (ret >= 0)
		ret = meta_get(p, "generation", gbuf, sizeof(gbuf), err, errlen);
	if (ret >= 0) {
		p->generation = strtoull(gbuf, NULL, 10);
		ret = meta_get(p, "lost", lost, sizeof(lost), err, errlen);
	}
	if (ret == 0 && fret != -ENOENT) {
		identity_mismatch(p, p->store_id, p->generation, fret, fid, fgen, why, lost,
				  sizeof(lost));
		if (lost[0]) {
			found_lost = true;
			ret = meta_set(p, "lost", lost, err, errlen);
		}
	}
	if (lost[0])
		set_lost(p, lost);
	ret = finish(p, ret < 0 ? ret : 0, err, errlen);
	if (ret)
		return ret;
	if (lost[0])
		ibvf_log(LOG_CRIT,
			 "GUID POOL STORE LOST RECORDS%s: %s. Not allocating any GUID until "
			 "'ibvfctl pool rebuild' has adopted what the VFs and the SM show in use "
			 "(docs/operations.md, \"Store lost or damaged\")",
			 found_lost ? "" : " (found before, not rebuilt yet)", lost);
	else
		write_id_file(p);
	return 0;
}

bool ibvf_pool_lost(struct ibvf_pool *p, char *why, size_t len)
{
	return is_lost(p, why, len);
}

static int pool_adopt(struct ibvf_pool *p, const struct ibvf_alloc *in, char *err, size_t errlen)
{
	char s[IBVF_GUID_STR_LEN];
	struct ibvf_alloc cur, a = *in;
	int ret;

	ibvf_guid_format(a.guid, s);
	if (!ibvf_guid_is_assignable(a.guid) || !in_ranges(p, a.guid))
		return ibvf_errf(err, errlen, -ERANGE,
				 "GUID %s is not an assignable GUID of the "
				 "ranges",
				 s);
	ret = check_owner(&a.owner, err, errlen);
	if (ret)
		return ret;
	ret = begin(p, err, errlen);
	if (ret)
		return ret;
	ret = get_one(p, "guid = ?1", NULL, NULL, enc(a.guid), &cur, err, errlen);
	/* a warm VF's record is ibvfd's own: a GUID the SM shows in a tenant PKey
	 * is a Pod's whose take-over the store lost (engine/warm_vf.c) */
	if (ret == 0 && cur.state != ST_Q && !(a.n_pkeys && ibvf_alloc_is_warm(&cur)))
		return finish(p, 1, err, errlen); /* held: nothing to adopt */
	if (ret == 0)
		ret = delete_row(p, a.guid, err, errlen); /* in use again: out of quarantine */
	else if (ret == -ENOENT)
		ret = extent_take(p, a.guid, err, errlen) < 0 ? -EIO : 0;
	if (!ret) {
		a.state = IBVF_ALLOC_HANDED;
		a.created_ms = a.updated_ms = now_ms(p);
		a.released_ms = 0;
		ret = insert_row(p, &a, err, errlen);
	}
	return finish(p, ret, err, errlen);
}

int ibvf_pool_adopt(struct ibvf_pool *p, const struct ibvf_alloc *a, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_adopt(p, a, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

static int pool_rebuilt(struct ibvf_pool *p, char *err, size_t errlen)
{
	int ret = begin(p, err, errlen);

	if (ret)
		return ret;
	ret = meta_set(p, "lost", NULL, err, errlen);
	if (!ret)
		ret = meta_set(p, "rebuilt_ms", "0", err,
			       errlen); /* a change: bumps the generation */
	if (!ret)
		set_lost(p, NULL); /* before finish(): it writes pool.id */
	ret = finish(p, ret, err, errlen);
	if (ret)
		return ret;
	log_notice("GUID pool store %s rebuilt: allocation resumes (identity %s, generation "
		   "%llu)",
		   p->path, p->id_path, (unsigned long long)p->generation);
	return 0;
}

int ibvf_pool_rebuilt(struct ibvf_pool *p, char *err, size_t errlen)
{
	char why[IBVF_ERR_LEN];
	int ret;

	pool_lock(p);
	ret = pool_rebuilt(p, err, errlen);
	ret = pool_unlock(p, ret, err, errlen);
	if (ret && is_lost(p, NULL, 0) == false) {
		/* the commit failed after set_lost(NULL): still lost on disk */
		pool_lock(p);
		if (meta_get(p, "lost", why, sizeof(why), NULL, 0) == 1)
			set_lost(p, why);
		pool_unlock_mem(p);
	}
	return ret;
}

static int pool_allocate_batch(struct ibvf_pool *p, const struct ibvf_alloc_request *reqs, size_t n,
			       struct ibvf_alloc *out, char *err, size_t errlen)
{
	char why[IBVF_ERR_LEN];
	int ret;

	if (is_lost(p, why, sizeof(why)))
		return ibvf_errf(
			err, errlen, -ESTALE,
			"not allocating: the GUID pool store lost records (%s); run "
			"'ibvfctl pool rebuild' to adopt what the VFs and the SM show in use",
			why);
	ret = begin(p, err, errlen);

	if (ret)
		return ret;
	ret = expire_locked(p, err, errlen);
	for (size_t i = 0; ret >= 0 && i < n; i++)
		ret = allocate_locked(p, &reqs[i], &out[i], err, errlen);
	return finish(p, ret < 0 ? ret : 0, err, errlen);
}

int ibvf_pool_allocate_batch(struct ibvf_pool *p, const struct ibvf_alloc_request *reqs, size_t n,
			     struct ibvf_alloc *out, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_allocate_batch(p, reqs, n, out, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_allocate(struct ibvf_pool *p, const struct ibvf_alloc_request *req,
		       struct ibvf_alloc *out, char *err, size_t errlen)
{
	return ibvf_pool_allocate_batch(p, req, 1, out, err, errlen);
}

int ibvf_pool_allocate_lazy(struct ibvf_pool *p, const struct ibvf_alloc_request *req,
			    struct ibvf_alloc *out, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_allocate_batch(p, req, 1, out, err, errlen);
	return pool_unlock_lazy(p, ret, err, errlen);
}

static int pool_expire(struct ibvf_pool *p, char *err, size_t errlen)
{
	int ret = begin(p, err, errlen);

	if (ret)
		return ret;
	return finish(p, expire_locked(p, err, errlen), err, errlen);
}

int ibvf_pool_expire(struct ibvf_pool *p, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_expire(p, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

/* meta 'ranges' := our ranges (the free list was just made to match them) */
static int store_ranges(struct ibvf_pool *p, char *err, size_t errlen)
{
	char *want = ranges_text(p);
	sqlite3_stmt *st;
	int ret;

	if (!want)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (prep(p, &st, "UPDATE meta SET value = ? WHERE key = 'ranges'", err, errlen)) {
		ret = -EIO;
	} else {
		sqlite3_bind_text(st, 1, want, -1, SQLITE_TRANSIENT);
		ret = run(p, st, err, errlen);
	}
	free(want);
	return ret;
}

/*
 * A range disjoint from ours joins them without a rebuild: free extents for
 * its GUIDs without a record (O(records in it)), and a range it touches end
 * to end is extended rather than a new one appended (a node's successive
 * blocks are adjacent; every write checks the ranges' text, so their count
 * costs on each allocation). An overlapping range rebuilds the free list.
 */
static int pool_add_range(struct ibvf_pool *p, uint64_t first, uint64_t last, char *err,
			  size_t errlen)
{
	struct ibvf_guid_range *r, old = {0};
	bool overlap = false, merged = false;
	size_t at;
	uint64_t a, b;
	int ret;

	if (p->read_only || first > last)
		return ibvf_errf(err, errlen, -EINVAL, "cannot add GUID range %016llx-%016llx",
				 (unsigned long long)first, (unsigned long long)last);
	r = realloc(p->ranges, (p->n_ranges + 1) * sizeof(*r));
	if (!r)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	p->ranges = r;
	ret = begin(p, err, errlen);
	if (ret)
		return ret;
	for (size_t i = 0; i < p->n_ranges; i++)
		overlap = overlap || (first <= r[i].end && last >= r[i].start);
	for (at = 0; !overlap && at < p->n_ranges; at++)
		if ((r[at].end != UINT64_MAX && r[at].end + 1 == first) ||
		    (last != UINT64_MAX && last + 1 == r[at].start))
			break;
	if (overlap || at == p->n_ranges) {
		at = p->n_ranges++;
		r[at].start = first;
		r[at].end = last;
	} else {
		merged = true;
		old = r[at];
		r[at].start = first < r[at].start ? first : r[at].start;
		r[at].end = last > r[at].end ? last : r[at].end;
	}
	if (overlap)
		ret = ensure_free_list_locked(p, err, errlen);
	else if (!(ret = clip(&(struct ibvf_guid_range){first, last}, &a, &b)
				 ? free_span(p, a, b, err, errlen)
				 : 0))
		ret = store_ranges(p, err, errlen);
	ret = finish(p, ret, err, errlen);
	if (ret) { /* the free list stays the old ranges' */
		if (merged)
			r[at] = old;
		else
			p->n_ranges--;
	}
	return ret;
}

static int pool_stats(struct ibvf_pool *p, struct ibvf_pool_stats *s, char *err, size_t errlen);

static int pool_remove_range(struct ibvf_pool *p, uint64_t first, uint64_t last, uint64_t min_free,
			     char *err, size_t errlen)
{
	struct ibvf_pool_stats ps = {0};
	struct ibvf_guid_range *r, *old;
	sqlite3_stmt *st;
	size_t k = 0, n_old;
	int64_t busy = 0, quarantined = 0;
	uint64_t gone = 0;
	int ret, rc;

	if (p->read_only || first > last)
		return ibvf_errf(err, errlen, -EINVAL, "cannot remove GUID range %016llx-%016llx",
				 (unsigned long long)first, (unsigned long long)last);
	for (int v = 0; v < IBVF_VIEW_COUNT; v++)
		for (size_t i = 0; i < p->n_in_use[v]; i++)
			if (p->in_use[v][i] >= first && p->in_use[v][i] <= last)
				return ibvf_errf(err, errlen, -EBUSY,
						 "GUID %016llx of %016llx-%016llx is in use %s",
						 (unsigned long long)p->in_use[v][i],
						 (unsigned long long)first,
						 (unsigned long long)last,
						 view_name((enum ibvf_pool_view)v));
	r = calloc(p->n_ranges + 1, sizeof(*r));
	if (!r)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = begin(p, err, errlen);
	if (ret) {
		free(r);
		return ret;
	}
	/* held, or quarantined with the SM not yet seen without it (released_ms < 0) */
	if (prep(p, &st,
		 "SELECT count(*), coalesce(sum(state != 7 OR released_ms <= 0), 0) FROM alloc "
		 "WHERE guid BETWEEN ?1 AND ?2",
		 err, errlen)) {
		free(r);
		return finish(p, -EIO, err, errlen);
	}
	sqlite3_bind_int64(st, 1, enc(first));
	sqlite3_bind_int64(st, 2, enc(last));
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		quarantined = sqlite3_column_int64(st, 0) - sqlite3_column_int64(st, 1);
		busy = sqlite3_column_int64(st, 1);
	}
	stmt_done(p, st);
	if (rc != SQLITE_ROW) {
		free(r);
		return finish(p, db_err(p, err, errlen, "range scan"), err, errlen);
	}
	if (busy) {
		free(r);
		return finish(p,
			      ibvf_errf(err, errlen, -EBUSY,
					"%lld GUIDs of %016llx-%016llx are held (or their "
					"removal from the SM is not yet seen)",
					(long long)busy, (unsigned long long)first,
					(unsigned long long)last),
			      err, errlen);
	}
	/* the ranges are disjoint: only one splits in two */
	for (size_t i = 0; i < p->n_ranges; i++) {
		struct ibvf_guid_range x = p->ranges[i];
		uint64_t a, b;

		if (x.end < first || x.start > last) {
			r[k++] = x;
			continue;
		}
		if (clip(&x, &a, &b) && b >= first && a <= last)
			gone += (b < last ? b : last) - (a > first ? a : first) + 1;
		if (x.start < first)
			r[k++] = (struct ibvf_guid_range){x.start, first - 1};
		if (x.end > last)
			r[k++] = (struct ibvf_guid_range){last + 1, x.end};
	}
	/* the free GUIDs that go with it: the rest must stay at least @min_free */
	gone = gone > (uint64_t)quarantined ? gone - (uint64_t)quarantined : 0;
	ret = pool_stats(p, &ps, err, errlen);
	if (!ret && ps.free < gone + min_free)
		ret = ibvf_errf(err, errlen, -ENOSPC,
				"removing %016llx-%016llx would leave %llu free GUIDs, fewer than "
				"%llu",
				(unsigned long long)first, (unsigned long long)last,
				(unsigned long long)(ps.free > gone ? ps.free - gone : 0),
				(unsigned long long)min_free);
	if (ret) {
		free(r);
		return finish(p, ret, err, errlen);
	}
	old = p->ranges;
	n_old = p->n_ranges;
	p->ranges = r;
	p->n_ranges = k;
	/* quarantined records stay, as records outside the ranges (deleted at expiry) */
	ret = finish(p, ensure_free_list_locked(p, err, errlen), err, errlen);
	if (ret) {
		p->ranges = old; /* the free list stays the old ranges' */
		p->n_ranges = n_old;
		free(r);
	} else {
		free(old);
	}
	return ret;
}

int ibvf_pool_remove_range(struct ibvf_pool *p, uint64_t first, uint64_t last, uint64_t min_free,
			   char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_remove_range(p, first, last, min_free, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_add_range(struct ibvf_pool *p, uint64_t first, uint64_t last, char *err,
			size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_add_range(p, first, last, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_checkpoint(struct ibvf_pool *p, char *err, size_t errlen)
{
	int busy = 0, log = 0, done = 0, rc;

	if (p->read_only)
		return 0;
	pool_lock(p);
	/* a checkpoint needs the connection outside a transaction: commit the open group
	 * (its waiters' leader still syncs it) */
	commit_open(p, NULL, 0);
	check_files(p); /* pool.db or pool.id deleted or replaced while we run */
	rc = sqlite3_wal_checkpoint_v2(p->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
	if (rc != SQLITE_OK && rc != SQLITE_BUSY)
		busy = db_err(p, err, errlen, "checkpoint");
	pool_unlock_mem(p);
	if (busy)
		return busy;
	return rc == SQLITE_BUSY || log > done ? 1 : 0;
}

int ibvf_pool_set_in_use(struct ibvf_pool *p, enum ibvf_pool_view view, const uint64_t *guids,
			 size_t n)
{
	uint64_t *v = NULL;
	size_t k = 0;

	if (view < 0 || view >= IBVF_VIEW_COUNT)
		return -EINVAL;
	if (n) {
		v = malloc(n * sizeof(*v));
		if (!v)
			return -ENOMEM; /* the previous set stays */
		for (size_t i = 0; i < n; i++)
			if (in_ranges(p, guids[i]))
				v[k++] = guids[i];
		qsort(v, k, sizeof(*v), cmp_u64);
	}
	pool_lock(p);
	free(p->in_use[view]);
	p->in_use[view] = v;
	p->n_in_use[view] = k;
	pool_unlock_mem(p);
	return 0;
}

bool ibvf_pool_in_use(struct ibvf_pool *p, uint64_t guid)
{
	bool r;

	pool_lock(p);
	r = seen_in_use(p, guid, NULL);
	pool_unlock_mem(p);
	return r;
}

static int pool_probe_write(struct ibvf_pool *p, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	char t[32];
	int ret = begin(p, err, errlen);

	if (ret)
		return ret;
	if (prep(p, &st, "INSERT OR REPLACE INTO meta VALUES('write_probe_ms', ?)", err, errlen))
		return finish(p, -EIO, err, errlen);
	snprintf(t, sizeof(t), "%lld", (long long)now_ms(p));
	sqlite3_bind_text(st, 1, t, -1, SQLITE_TRANSIENT);
	return finish(p, run(p, st, err, errlen), err, errlen);
}

int ibvf_pool_probe_write(struct ibvf_pool *p, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_probe_write(p, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

static int pool_release(struct ibvf_pool *p, uint64_t guid, char *err, size_t errlen)
{
	struct ibvf_alloc a;
	sqlite3_stmt *st;
	int64_t t;
	int ret = begin(p, err, errlen);

	if (ret)
		return ret;
	ret = get_one(p, "guid = ?1", NULL, NULL, enc(guid), &a, err, errlen);
	if (ret == -ENOENT || (ret == 0 && a.state == ST_Q))
		return finish(p, 1, err, errlen);
	if (ret)
		return finish(p, ret, err, errlen);
	t = now_ms(p);
	if (p->quarantine_s == 0) {
		ret = delete_row(p, guid, err, errlen);
		if (!ret && in_ranges(p, guid))
			ret = extent_give(p, guid, err, errlen);
		return finish(p, ret, err, errlen);
	}
	if (prep(p, &st,
		 "UPDATE alloc SET state = 7, released_ms = ?, updated_ms = ? WHERE guid = ?", err,
		 errlen))
		return finish(p, -EIO, err, errlen);
	sqlite3_bind_int64(st, 1, p->sm_check ? -t : t);
	sqlite3_bind_int64(st, 2, t);
	sqlite3_bind_int64(st, 3, enc(guid));
	return finish(p, run(p, st, err, errlen), err, errlen);
}

int64_t ibvf_pool_clock_ms(struct ibvf_pool *p)
{
	return now_ms(p);
}

void ibvf_pool_set_sm_check(struct ibvf_pool *p, bool on)
{
	pool_lock(p);
	p->sm_check = on;
	pool_unlock_mem(p);
}

static int pool_quarantine_seen(struct ibvf_pool *p, uint64_t guid, bool listed, int64_t list_ms,
				char *err, size_t errlen)
{
	struct ibvf_alloc a;
	sqlite3_stmt *st;
	int64_t v;
	int ret = begin(p, err, errlen);

	if (ret)
		return ret;
	ret = get_one(p, "guid = ?1", NULL, NULL, enc(guid), &a, err, errlen);
	if (ret == -ENOENT || (ret == 0 && a.state != ST_Q))
		return finish(p, 1, err, errlen);
	if (ret)
		return finish(p, ret, err, errlen);
	if (listed)
		v = -now_ms(p); /* back in the SM: the quarantine starts again */
	else if (a.sm_unseen && list_ms > a.released_ms)
		v = a.released_ms;
	else
		return finish(p, 1, err, errlen);
	if (prep(p, &st, "UPDATE alloc SET released_ms = ? WHERE guid = ?", err, errlen))
		return finish(p, -EIO, err, errlen);
	sqlite3_bind_int64(st, 1, v);
	sqlite3_bind_int64(st, 2, enc(guid));
	return finish(p, run(p, st, err, errlen), err, errlen);
}

int ibvf_pool_quarantine_seen(struct ibvf_pool *p, uint64_t guid, bool listed, int64_t list_ms,
			      char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_quarantine_seen(p, guid, listed, list_ms, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_release(struct ibvf_pool *p, uint64_t guid, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_release(p, guid, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_release_lazy(struct ibvf_pool *p, uint64_t guid, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_release(p, guid, err, errlen);
	return pool_unlock_lazy(p, ret, err, errlen);
}

static int pool_update(struct ibvf_pool *p, const struct ibvf_alloc *a, char *err, size_t errlen)
{
	char pk[128], s[IBVF_GUID_STR_LEN];
	sqlite3_stmt *st;
	int ret;

	if ((unsigned)a->state >= ST_Q)
		return ibvf_errf(err, errlen, -EINVAL, "use ibvf_pool_release() to quarantine");
	if (a->n_pkeys > IBVF_POOL_MAX_PKEYS)
		return ibvf_errf(err, errlen, -EINVAL, "too many PKeys");
	ret = check_place(a->pf, a->pci, err, errlen);
	if (ret)
		return ret;
	ret = begin(p, err, errlen);
	if (ret)
		return ret;
	if (prep(p, &st,
		 "UPDATE alloc SET state = ?, pf = ?, vf_index = ?, pci = ?, pkeys = ?, "
		 "updated_ms = ?, prev_node_guid = ?, prev_port_guid = ?, prev_link_state = ? "
		 "WHERE guid = ?10 AND state != 7",
		 err, errlen))
		return finish(p, -EIO, err, errlen);
	format_pkeys(a->pkeys, a->n_pkeys, pk, sizeof(pk));
	sqlite3_bind_int(st, 1, (int)a->state);
	sqlite3_bind_text(st, 2, a->pf, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, a->vf_index);
	sqlite3_bind_text(st, 4, a->pci, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, pk, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, now_ms(p));
	sqlite3_bind_int64(st, 7, (sqlite3_int64)a->prev_node_guid);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)a->prev_port_guid);
	sqlite3_bind_text(st, 9, a->prev_link_state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 10, enc(a->guid));
	ret = run(p, st, err, errlen);
	if (!ret && sqlite3_changes(p->db) == 0)
		ret = ibvf_errf(err, errlen, -ENOENT, "GUID %s has no live record",
				ibvf_guid_format(a->guid, s));
	return finish(p, ret, err, errlen);
}

int ibvf_pool_update(struct ibvf_pool *p, const struct ibvf_alloc *a, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_update(p, a, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_update_lazy(struct ibvf_pool *p, const struct ibvf_alloc *a, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_update(p, a, err, errlen);
	return pool_unlock_lazy(p, ret, err, errlen);
}

static int pool_take_over(struct ibvf_pool *p, uint64_t guid, const struct ibvf_owner *from,
			  enum ibvf_alloc_state from_state, const struct ibvf_owner *to,
			  const uint16_t *pkeys, size_t n_pkeys, enum ibvf_alloc_state state,
			  char *err, size_t errlen)
{
	char pk[128], s[IBVF_GUID_STR_LEN];
	struct ibvf_alloc cur;
	sqlite3_stmt *st;
	int ret;

	if ((unsigned)state >= ST_Q || n_pkeys > IBVF_POOL_MAX_PKEYS)
		return ibvf_errf(err, errlen, -EINVAL, "bad state or too many PKeys");
	ret = check_owner(to, err, errlen);
	if (ret)
		return ret;
	ret = begin(p, err, errlen);
	if (ret)
		return ret;
	ret = pool_find_owner(p, to->container_id, to->ifname, &cur, err, errlen);
	if (!ret)
		return finish(p,
			      ibvf_errf(err, errlen, -EEXIST,
					"container %.64s ifname %s holds GUID %s already",
					to->container_id, to->ifname,
					ibvf_guid_format(cur.guid, s)),
			      err, errlen);
	if (ret != -ENOENT)
		return finish(p, ret, err, errlen);
	if (prep(p, &st,
		 "UPDATE alloc SET state = ?, container_id = ?, ifname = ?, pod_namespace = ?, "
		 "pod_name = ?, pod_uid = ?, network = ?, pkeys = ?, updated_ms = ? "
		 "WHERE guid = ?10 AND state = ?11 AND container_id = ?12 AND ifname = ?13",
		 err, errlen))
		return finish(p, -EIO, err, errlen);
	format_pkeys(pkeys, n_pkeys, pk, sizeof(pk));
	sqlite3_bind_int(st, 1, (int)state);
	sqlite3_bind_text(st, 2, to->container_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, to->ifname, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, to->pod_namespace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, to->pod_name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, to->pod_uid, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, to->network, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, pk, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 9, now_ms(p));
	sqlite3_bind_int64(st, 10, enc(guid));
	sqlite3_bind_int(st, 11, (int)from_state);
	sqlite3_bind_text(st, 12, from->container_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 13, from->ifname, -1, SQLITE_STATIC);
	ret = run(p, st, err, errlen);
	if (!ret && sqlite3_changes(p->db) == 0)
		ret = ibvf_errf(err, errlen, -ENOENT, "GUID %s is not held by %.64s/%s as %s",
				ibvf_guid_format(guid, s), from->container_id, from->ifname,
				ibvf_alloc_state_name(from_state));
	return finish(p, ret, err, errlen);
}

int ibvf_pool_take_over(struct ibvf_pool *p, uint64_t guid, const struct ibvf_owner *from,
			enum ibvf_alloc_state from_state, const struct ibvf_owner *to,
			const uint16_t *pkeys, size_t n_pkeys, enum ibvf_alloc_state state,
			char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_take_over(p, guid, from, from_state, to, pkeys, n_pkeys, state, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

/* -------------------------------------------------------- list/stats -- */

static bool match_filter(const struct ibvf_pool_filter *f, const struct ibvf_alloc *a)
{
	if (!f)
		return a->state != ST_Q;
	if (a->state == ST_Q && !f->include_quarantined)
		return false;
	if (f->owner && *f->owner && !strstr(a->owner.container_id, f->owner) &&
	    !strstr(a->owner.pod_name, f->owner) && !strstr(a->owner.pod_namespace, f->owner))
		return false;
	if (f->pkey >= 0) {
		size_t i;

		for (i = 0; i < a->n_pkeys; i++)
			if (ibvf_pkey_key(a->pkeys[i]) == ibvf_pkey_key((uint16_t)f->pkey))
				break;
		if (i == a->n_pkeys)
			return false;
	}
	return true;
}

static int pool_list(struct ibvf_pool *p, const struct ibvf_pool_filter *f,
		     int (*cb)(void *arg, const struct ibvf_alloc *a), void *arg, char *err,
		     size_t errlen)
{
	char sql[512];
	sqlite3_stmt *st;
	int rc, ret = 0;

	snprintf(sql, sizeof(sql), "SELECT %s FROM alloc ORDER BY guid", row_cols);
	if (prep(p, &st, sql, err, errlen))
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct ibvf_alloc a;

		read_row(st, &a);
		if (match_filter(f, &a) && (ret = cb(arg, &a)))
			break;
	}
	stmt_done(p, st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_err(p, err, errlen, "list");
	return ret;
}

int ibvf_pool_list(struct ibvf_pool *p, const struct ibvf_pool_filter *f,
		   int (*cb)(void *arg, const struct ibvf_alloc *a), void *arg, char *err,
		   size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_list(p, f, cb, arg, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

static int pool_stats(struct ibvf_pool *p, struct ibvf_pool_stats *s, char *err, size_t errlen)
{
	sqlite3_int64 v, rows;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = scalar_i64(p, "SELECT count(*) FROM alloc", 0, 0, &rows, err, errlen);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < p->n_ranges; i++) {
		uint64_t a, b;

		if (!clip(&p->ranges[i], &a, &b))
			continue;
		s->total += b - a + 1;
		ret = scalar_i64(
			p, "SELECT count(*) FROM alloc WHERE guid BETWEEN ? AND ? AND state != 7",
			enc(a), enc(b), &v, err, errlen);
		if (ret < 0)
			return ret;
		s->allocated += (uint64_t)v;
		rows -= v;
		ret = scalar_i64(
			p, "SELECT count(*) FROM alloc WHERE guid BETWEEN ? AND ? AND state = 7",
			enc(a), enc(b), &v, err, errlen);
		if (ret < 0)
			return ret;
		s->quarantined += (uint64_t)v;
		rows -= v;
	}
	s->outside = (uint64_t)rows;
	s->free = s->total - s->allocated - s->quarantined;
	return 0;
}

int ibvf_pool_stats(struct ibvf_pool *p, struct ibvf_pool_stats *s, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_stats(p, s, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_free_count(struct ibvf_pool *p, uint64_t *n, char *err, size_t errlen)
{
	struct ibvf_pool_stats s;
	sqlite3_stmt *st;
	int ret, rc = SQLITE_DONE;

	*n = 0;
	pool_lock(p);
	ret = free_list_matches(p, err, errlen);
	if (ret == 1 && prep(p, &st, "SELECT start, end FROM free_extent", err, errlen)) {
		ret = -EIO;
	} else if (ret == 1) {
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			uint64_t len = dec(sqlite3_column_int64(st, 1)) -
				       dec(sqlite3_column_int64(st, 0)) + 1;

			*n = *n + len < *n ? UINT64_MAX : *n + len;
		}
		stmt_done(p, st);
		ret = rc == SQLITE_DONE ? 0 : db_err(p, err, errlen, "free list");
	} else if (ret == 0) {
		/* another process's ranges: count over ours */
		ret = pool_stats(p, &s, err, errlen);
		*n = ret ? 0 : s.free;
	}
	return pool_unlock(p, ret, err, errlen);
}

int ibvf_pool_range_stats(struct ibvf_pool *p, size_t i, struct ibvf_pool_stats *s, char *err,
			  size_t errlen)
{
	sqlite3_int64 v;
	uint64_t a, b;
	int ret = 0;

	memset(s, 0, sizeof(*s));
	pool_lock(p);
	if (i >= p->n_ranges) {
		ret = -ENOENT;
		goto out;
	}
	if (!clip(&p->ranges[i], &a, &b))
		goto out;
	s->total = b - a + 1;
	ret = scalar_i64(p, "SELECT count(*) FROM alloc WHERE guid BETWEEN ? AND ? AND state != 7",
			 enc(a), enc(b), &v, err, errlen);
	if (ret < 0)
		goto out;
	s->allocated = (uint64_t)v;
	ret = scalar_i64(p, "SELECT count(*) FROM alloc WHERE guid BETWEEN ? AND ? AND state = 7",
			 enc(a), enc(b), &v, err, errlen);
	if (ret < 0)
		goto out;
	s->quarantined = (uint64_t)v;
	s->free = s->total - s->allocated - s->quarantined;
	ret = 0;
out:
	return pool_unlock(p, ret, err, errlen);
}

/* ------------------------------------------------------------- audit -- */

static const char *const audit_names[] = {
	[IBVF_AUDIT_OUTSIDE_RANGE] = "outside-range",
	[IBVF_AUDIT_DUPLICATE_OWNER] = "duplicate-owner",
	[IBVF_AUDIT_EXPIRED_QUARANTINE] = "expired-quarantine",
	[IBVF_AUDIT_FREE_AND_HELD] = "free-and-held",
	[IBVF_AUDIT_LOST] = "lost",
	[IBVF_AUDIT_INVALID_GUID] = "invalid-guid",
};

const char *ibvf_audit_kind_name(enum ibvf_audit_kind k)
{
	return (unsigned)k < sizeof(audit_names) / sizeof(audit_names[0]) ? audit_names[k] : "?";
}

struct audit {
	struct ibvf_pool *p;
	int (*cb)(void *arg, const struct ibvf_audit_finding *f);
	void *arg;
	int problems;
	int stop;
};

static void report(struct audit *au, enum ibvf_audit_kind k, bool problem, uint64_t g,
		   uint64_t count, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void report(struct audit *au, enum ibvf_audit_kind k, bool problem, uint64_t g,
		   uint64_t count, const char *fmt, ...)
{
	struct ibvf_audit_finding f = {.kind = k, .problem = problem, .guid = g, .count = count};
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f.detail, sizeof(f.detail), fmt, ap);
	va_end(ap);
	au->problems += problem;
	if (!au->stop && au->cb)
		au->stop = au->cb(au->arg, &f);
}

/*
 * Two live records of one owner: impossible while the unique index
 * alloc_owner exists (SQLite enforces it on every write), so the O(records)
 * scan runs only when the index is gone (dropped by hand).
 */
static int audit_owners(struct audit *au, char *err, size_t errlen)
{
	struct ibvf_pool *p = au->p;
	sqlite3_int64 unique = 0;
	sqlite3_stmt *st;
	int rc;

	if (scalar_i64(p,
		       "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = "
		       "'alloc_owner' AND sql LIKE 'CREATE UNIQUE INDEX%'",
		       0, 0, &unique, err, errlen) < 0)
		return -EIO;
	if (unique)
		return 0;
	if (prep(p, &st,
		 "SELECT container_id, ifname, count(*) FROM alloc WHERE state != 7 GROUP BY "
		 "container_id, ifname HAVING count(*) > 1",
		 err, errlen))
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		report(au, IBVF_AUDIT_DUPLICATE_OWNER, true, 0,
		       (uint64_t)sqlite3_column_int64(st, 2),
		       "container %.64s ifname %.16s holds %lld GUIDs",
		       (const char *)sqlite3_column_text(st, 0),
		       (const char *)sqlite3_column_text(st, 1),
		       (long long)sqlite3_column_int64(st, 2));
	stmt_done(p, st);
	return rc == SQLITE_DONE ? 0 : db_err(p, err, errlen, "audit owners");
}

/* One pass over the records (rowid order, only the columns the checks need). */
static int audit_records(struct audit *au, char *err, size_t errlen)
{
	struct ibvf_pool *p = au->p;
	int64_t cutoff = now_ms(p) - (int64_t)p->quarantine_s * 1000;
	sqlite3_stmt *st;
	char s[IBVF_GUID_STR_LEN];
	int rc;

	if (prep(p, &st, "SELECT guid, state, released_ms FROM alloc ORDER BY guid", err, errlen))
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t g = dec(sqlite3_column_int64(st, 0));
		int state = sqlite3_column_int(st, 1);

		if (!ibvf_guid_is_assignable(g)) {
			report(au, IBVF_AUDIT_INVALID_GUID, true, g, 1,
			       "store holds the unassignable GUID %s", ibvf_guid_format(g, s));
		} else if (!in_ranges(p, g)) {
			struct ibvf_alloc a;

			if (get_one(p, "guid = ?1", NULL, NULL, enc(g), &a, NULL, 0))
				memset(&a, 0, sizeof(a));
			report(au, IBVF_AUDIT_OUTSIDE_RANGE, true, g, 1,
			       "GUID %s (%s, container %.64s) is outside the configured ranges",
			       ibvf_guid_format(g, s),
			       ibvf_alloc_state_name((enum ibvf_alloc_state)state),
			       a.owner.container_id);
		}
		if (state == ST_Q && llabs(sqlite3_column_int64(st, 2)) <= cutoff &&
		    (sqlite3_column_int64(st, 2) > 0 || !p->sm_check))
			report(au, IBVF_AUDIT_EXPIRED_QUARANTINE, false, g, 1,
			       "GUID %s finished its quarantine; freed by the next allocation or "
			       "--fix",
			       ibvf_guid_format(g, s));
	}
	stmt_done(p, st);
	if (rc != SQLITE_DONE)
		return db_err(p, err, errlen, "audit scan");
	return audit_owners(au, err, errlen);
}

/*
 * Walk one range: every assignable GUID must be exactly one of "held" (a
 * record) or "free" (inside an extent). Records and extents are both sorted,
 * so one merge pass finds overlaps (free and held) and holes (lost).
 */
static int audit_range(struct audit *au, uint64_t a, uint64_t b, char *err, size_t errlen)
{
	struct ibvf_pool *p = au->p;
	sqlite3_stmt *rows, *ext;
	int rr, re;
	uint64_t pos = a, rg = 0, ea = 0, eb = 0;
	bool done = false;
	char s[IBVF_GUID_STR_LEN];

	if (prep(p, &rows, "SELECT guid FROM alloc WHERE guid BETWEEN ? AND ? ORDER BY guid", err,
		 errlen))
		return -EIO;
	if (prep(p, &ext,
		 "SELECT start, end FROM free_extent WHERE end >= ? AND start <= ? ORDER BY start",
		 err, errlen)) {
		stmt_done(p, rows);
		return -EIO;
	}
	sqlite3_bind_int64(rows, 1, enc(a));
	sqlite3_bind_int64(rows, 2, enc(b));
	sqlite3_bind_int64(ext, 1, enc(a));
	sqlite3_bind_int64(ext, 2, enc(b));
	rr = sqlite3_step(rows);
	re = sqlite3_step(ext);
	while (!done && (rr == SQLITE_ROW || re == SQLITE_ROW)) {
		uint64_t start, end;
		bool is_row;

		if (rr == SQLITE_ROW)
			rg = dec(sqlite3_column_int64(rows, 0));
		if (re == SQLITE_ROW) {
			ea = dec(sqlite3_column_int64(ext, 0));
			eb = dec(sqlite3_column_int64(ext, 1));
		}
		is_row = rr == SQLITE_ROW && (re != SQLITE_ROW || rg <= ea);
		start = is_row ? rg : ea;
		end = is_row ? rg : eb;
		if (start < a)
			start = a;
		if (end > b)
			end = b;
		if (start > pos)
			report(au, IBVF_AUDIT_LOST, true, pos, start - pos,
			       "%llu GUID(s) from %s are neither held nor free",
			       (unsigned long long)(start - pos), ibvf_guid_format(pos, s));
		else if (start < pos)
			report(au, IBVF_AUDIT_FREE_AND_HELD, true, start, 1,
			       "GUID %s is both held and in the free list",
			       ibvf_guid_format(start, s));
		if (end >= pos) {
			if (end == b)
				done = true;
			pos = end + 1;
		}
		if (is_row)
			rr = sqlite3_step(rows);
		else
			re = sqlite3_step(ext);
	}
	if (!done && pos <= b)
		report(au, IBVF_AUDIT_LOST, true, pos, b - pos + 1,
		       "%llu GUID(s) from %s are neither held nor free",
		       (unsigned long long)(b - pos + 1), ibvf_guid_format(pos, s));
	stmt_done(p, rows);
	stmt_done(p, ext);
	return 0;
}

static int pool_audit(struct ibvf_pool *p, int (*cb)(void *arg, const struct ibvf_audit_finding *f),
		      void *arg, char *err, size_t errlen)
{
	struct audit au = {.p = p, .cb = cb, .arg = arg};
	int ret, matches = 0;

	/* one read transaction: a consistent snapshot while others write */
	ret = exec(p, "BEGIN", err, errlen);
	if (ret)
		return ret;
	ret = audit_records(&au, err, errlen);
	if (!ret)
		ret = matches = free_list_matches(p, err, errlen);
	if (ret > 0)
		ret = 0;
	for (size_t i = 0; !ret && matches && i < p->n_ranges; i++) {
		uint64_t a, b;

		if (clip(&p->ranges[i], &a, &b))
			ret = audit_range(&au, a, b, err, errlen);
	}
	sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL);
	if (!ret && !matches)
		log_notice("configured ranges differ from the store's; free-list checks skipped "
			   "until a write command or ibvfd rebuilds it");
	return ret ? ret : au.problems;
}

int ibvf_pool_audit(struct ibvf_pool *p, int (*cb)(void *arg, const struct ibvf_audit_finding *f),
		    void *arg, char *err, size_t errlen)
{
	int ret;

	pool_lock(p);
	ret = pool_audit(p, cb, arg, err, errlen);
	return pool_unlock(p, ret, err, errlen);
}
