// SPDX-License-Identifier: MIT
/*
 * Issue 15 item 8: the same owner (pod namespace/name, network, ifname; not
 * the container ID) coming back within the quarantine gets its GUID back; a
 * different owner never does; schema v3 migration (owner key index).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pool_fixture.h"

static const struct ibvf_guid_range range = {0x0200000000000001ull, 0x02000000000000ffull};

static void owner(struct ibvf_owner *o, const char *cid, const char *ns, const char *pod,
		  const char *net, const char *ifname)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->container_id, sizeof(o->container_id), "%s", cid);
	snprintf(o->pod_namespace, sizeof(o->pod_namespace), "%s", ns);
	snprintf(o->pod_name, sizeof(o->pod_name), "%s", pod);
	snprintf(o->network, sizeof(o->network), "%s", net);
	snprintf(o->ifname, sizeof(o->ifname), "%s", ifname);
}

static int alloc(struct pool_fx *f, const struct ibvf_owner *o, uint64_t want, uint64_t *got)
{
	struct ibvf_alloc_request rq = {.vf_index = -1, .guid = want, .owner = *o};
	struct ibvf_alloc a;
	int ret;

	f->err[0] = 0;
	ret = ibvf_pool_allocate(f->p, &rq, &a, f->err, sizeof(f->err));
	*got = ret ? 0 : a.guid;
	return ret;
}

static uint64_t alloc_ok(struct pool_fx *f, const struct ibvf_owner *o)
{
	uint64_t g;

	if (alloc(f, o, 0, &g))
		fail_msg("allocate for %s: %s", o->container_id, f->err);
	return g;
}

/* A restarted container (new container ID) of the same pod gets its GUID back. */
static void test_same_owner_gets_guid_back(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_owner a, b;
	uint64_t g, filler;

	assert_int_equal(fx_open(f, &range, 1, 60), 0);
	owner(&a, "c1", "ns", "web-0", "ib-net", "net1");
	filler = fx_alloc_ok(f, "filler");
	g = alloc_ok(f, &a);
	assert_int_equal(fx_release(f, filler), 0); /* a lower GUID is free again later */
	assert_int_equal(fx_release(f, g), 0);
	f->now += 59 * 1000;
	owner(&b, "c2", "ns", "web-0", "ib-net", "net1");
	assert_int_equal(alloc_ok(f, &b), g);
	/* the record is live again, for the new container */
	{
		struct ibvf_alloc r;

		assert_int_equal(ibvf_pool_find_owner(f->p, "c2", "net1", &r, NULL, 0), 0);
		assert_int_equal(r.guid, g);
		assert_int_equal(r.state, IBVF_ALLOC_ALLOCATED);
	}
	/* and again with the same container ID (podman restart) */
	assert_int_equal(fx_release(f, g), 0);
	f->now += 1000;
	assert_int_equal(alloc_ok(f, &b), g);
}

/* Any part of the key that differs: never the quarantined GUID. */
static void test_other_owner_never(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_owner a, o[5];
	uint64_t g, got;

	assert_int_equal(fx_open(f, &range, 1, 60), 0);
	owner(&a, "c1", "ns", "web-0", "ib-net", "net1");
	g = alloc_ok(f, &a);
	assert_int_equal(fx_release(f, g), 0);
	owner(&o[0], "c1", "ns2", "web-0", "ib-net", "net1");
	owner(&o[1], "c1", "ns", "web-1", "ib-net", "net1");
	owner(&o[2], "c1", "ns", "web-0", "ib-net2", "net1");
	owner(&o[3], "c1", "ns", "web-0", "ib-net", "net2");
	owner(&o[4], "c1", "", "", "", "net1"); /* no key at all */
	for (int i = 0; i < 5; i++) {
		got = alloc_ok(f, &o[i]);
		assert_int_not_equal(got, g);
		assert_int_equal(fx_release(f, got), 0);
	}
	/* nor by asking for it explicitly */
	assert_int_equal(alloc(f, &o[1], g, &got), -EBUSY);
	/* the owner itself may ask for it explicitly */
	assert_int_equal(alloc(f, &a, g, &got), 0);
	assert_int_equal(got, g);
}

/* Without a network (or pod name) there is no owner key: a new GUID. */
static void test_no_key_no_return(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_owner a;
	uint64_t g;

	assert_int_equal(fx_open(f, &range, 1, 60), 0);
	owner(&a, "c1", "ns", "web-0", "", "net1");
	g = alloc_ok(f, &a);
	assert_int_equal(fx_release(f, g), 0);
	assert_int_not_equal(alloc_ok(f, &a), g);
}

/* After the quarantine the GUID is free like any other: no special return. */
static void test_after_quarantine(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_owner a;
	uint64_t g, filler;

	assert_int_equal(fx_open(f, &range, 1, 60), 0);
	filler = fx_alloc_ok(f, "filler");
	owner(&a, "c1", "ns", "web-0", "ib-net", "net1");
	g = alloc_ok(f, &a);
	assert_int_equal(fx_release(f, filler), 0);
	assert_int_equal(fx_release(f, g), 0);
	f->now += 60 * 1000;
	assert_int_equal(alloc_ok(f, &a), filler); /* the lowest free one */
}

/* With the SM check on (released_ms negative until a listing), still found. */
static void test_sm_check_quarantine(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_owner a;
	uint64_t g;

	assert_int_equal(fx_open(f, &range, 1, 60), 0);
	ibvf_pool_set_sm_check(f->p, true);
	owner(&a, "c1", "", "podman-ctr", "ib-net", "net1");
	g = alloc_ok(f, &a);
	assert_int_equal(fx_release(f, g), 0);
	f->now += 10 * 1000;
	owner(&a, "c9", "", "podman-ctr", "ib-net", "net1");
	assert_int_equal(alloc_ok(f, &a), g);
}

/* A v2 store migrates to v3 with its quarantined records, and they return. */
static void test_v2_store_migrates(void **state)
{
	struct pool_fx *f = *state;
	struct ibvf_owner a;
	uint64_t g;

	assert_int_equal(fx_open(f, &range, 1, 60), 0);
	owner(&a, "c1", "ns", "web-0", "ib-net", "net1");
	g = alloc_ok(f, &a);
	assert_int_equal(fx_release(f, g), 0);
	ibvf_pool_close(f->p);
	f->p = NULL;
	fx_sql(f, "DROP INDEX alloc_owner_key; PRAGMA user_version = 2;");
	assert_int_equal(fx_open(f, &range, 1, 60), 0);
	assert_int_equal(fx_sql_int(f, "PRAGMA user_version"), 3);
	assert_int_equal(fx_sql_int(f, "SELECT count(*) FROM sqlite_master WHERE type = 'index'"
				       " AND name = 'alloc_owner_key'"),
			 1);
	owner(&a, "c2", "ns", "web-0", "ib-net", "net1");
	assert_int_equal(alloc_ok(f, &a), g);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_same_owner_gets_guid_back), T(test_other_owner_never),
		T(test_no_key_no_return),	   T(test_after_quarantine),
		T(test_sm_check_quarantine),	   T(test_v2_store_migrates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
