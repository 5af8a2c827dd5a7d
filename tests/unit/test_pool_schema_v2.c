// SPDX-License-Identifier: MIT
/*
 * GUID pool store schema v2 (ibvfd: the VF's pre-attach GUIDs and link state):
 * a v1 store is readable read-only and migrated on a read-write open, keeping
 * its records; prev_* fields round-trip; ibvf_pool_find_pci().
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "guid_pool.h"
#include "log.h"

static const struct ibvf_guid_range range = {0x0200000000000001ull, 0x02000000000000ffull};

static struct ibvf_pool *open_pool(const char *dir, bool ro)
{
	struct ibvf_pool_opts o = {
		.state_dir = dir,
		.ranges = &range,
		.n_ranges = 1,
		.quarantine_s = 60,
		.read_only = ro,
	};
	struct ibvf_pool *p = NULL;
	char err[512];

	if (ibvf_pool_open(&o, &p, err, sizeof(err)))
		fail_msg("open: %s", err);
	return p;
}

static void sql(const char *dir, const char *q)
{
	char path[256];
	sqlite3 *db;

	snprintf(path, sizeof(path), "%s/pool.db", dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	if (sqlite3_exec(db, q, NULL, NULL, NULL) != SQLITE_OK)
		fail_msg("%s: %s", q, sqlite3_errmsg(db));
	sqlite3_close(db);
}

static int count_cb(void *arg, const struct ibvf_alloc *a)
{
	(void)a;
	(*(int *)arg)++;
	return 0;
}

static void test_v1_store_migrates(void **state)
{
	char dir[] = "/tmp/ibvf-schema-XXXXXX", cmd[64];
	struct ibvf_alloc_request req = {.vf_index = 3, .pci = "0000:03:00.5"};
	struct ibvf_alloc a, b;
	struct ibvf_pool *p;
	int n = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(req.owner.container_id, sizeof(req.owner.container_id), "old");
	snprintf(req.owner.ifname, sizeof(req.owner.ifname), "net1");
	p = open_pool(dir, false);
	assert_int_equal(ibvf_pool_allocate(p, &req, &a, NULL, 0), 0);
	ibvf_pool_close(p);
	/* make it the store an older ibvf wrote */
	sql(dir, "DROP INDEX alloc_pci; ALTER TABLE alloc DROP COLUMN prev_node_guid;"
		 "ALTER TABLE alloc DROP COLUMN prev_port_guid;"
		 "ALTER TABLE alloc DROP COLUMN prev_link_state; PRAGMA user_version = 1;");
	/* read-only (ibvfctl while no daemon migrated it): readable, not changed */
	p = open_pool(dir, true);
	assert_int_equal(ibvf_pool_list(p, NULL, count_cb, &n, NULL, 0), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ibvf_pool_get(p, a.guid, &b, NULL, 0), 0);
	assert_int_equal(b.prev_port_guid, 0);
	ibvf_pool_close(p);
	/* read-write: migrated, the record kept, prev_* usable */
	p = open_pool(dir, false);
	assert_int_equal(ibvf_pool_get(p, a.guid, &b, NULL, 0), 0);
	assert_string_equal(b.owner.container_id, "old");
	b.prev_node_guid = 0x1111;
	b.prev_port_guid = 0x2222;
	snprintf(b.prev_link_state, sizeof(b.prev_link_state), "enable");
	assert_int_equal(ibvf_pool_update(p, &b, NULL, 0), 0);
	assert_int_equal(ibvf_pool_find_pci(p, "0000:03:00.5", &a, NULL, 0), 0);
	assert_int_equal(a.prev_node_guid, 0x1111);
	assert_int_equal(a.prev_port_guid, 0x2222);
	assert_string_equal(a.prev_link_state, "enable");
	assert_int_equal(ibvf_pool_find_pci(p, "0000:03:00.6", &a, NULL, 0), -ENOENT);
	ibvf_pool_close(p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* Allocation requests carry the pre-attach state into the record. */
static void test_prev_on_allocate(void **state)
{
	char dir[] = "/tmp/ibvf-schema-XXXXXX", cmd[64];
	struct ibvf_alloc_request req = {.vf_index = 1,
					 .pci = "0000:03:00.3",
					 .prev_node_guid = 7,
					 .prev_port_guid = 8,
					 .prev_link_state = "auto"};
	struct ibvf_alloc a;
	struct ibvf_pool *p;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(req.owner.container_id, sizeof(req.owner.container_id), "new");
	snprintf(req.owner.ifname, sizeof(req.owner.ifname), "net1");
	p = open_pool(dir, false);
	assert_int_equal(ibvf_pool_allocate(p, &req, &a, NULL, 0), 0);
	assert_int_equal(ibvf_pool_get(p, a.guid, &a, NULL, 0), 0);
	assert_int_equal(a.prev_node_guid, 7);
	assert_int_equal(a.prev_port_guid, 8);
	assert_string_equal(a.prev_link_state, "auto");
	/* a released record no longer binds the VF */
	assert_int_equal(ibvf_pool_release(p, a.guid, NULL, 0), 0);
	assert_int_equal(ibvf_pool_find_pci(p, "0000:03:00.3", &a, NULL, 0), -ENOENT);
	ibvf_pool_close(p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1_store_migrates),
		cmocka_unit_test(test_prev_on_allocate),
	};

	ibvf_log_init("test_pool_schema_v2", IBVF_LOG_STDERR, LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
