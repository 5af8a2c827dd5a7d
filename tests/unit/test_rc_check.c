// SPDX-License-Identifier: MIT
/*
 * Unit tests of the RC QP check (daemon/rdma/rc_check.c) that need no RDMA device:
 * P_Key index choice (membership rule), GID choice, statistics, option
 * checks, netns argument handling and the netns child's result pipe. The
 * verbs path itself runs in the VM lab (tests/lab/vm/).
 *
 * The module's .c is included to reach its static helpers.
 */
#define IBVF_RC_FAULT_INJECT 1
#include "../../daemon/rdma/rc_check.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h>

/* --------------------------------------------------------- pkey pick -- */

static int pick(const uint16_t *t, size_t n, uint16_t pkey, struct ibvf_rc_pkey_pick *p, char *err)
{
	err[0] = 0;
	return ibvf_rc_pkey_pick(t, n, pkey, p, err, IBVF_ERR_LEN);
}

static void test_pkey_full_found(void **state)
{
	/* index 0 default partition, tenant at index 2, empty slots around */
	const uint16_t t[] = {0xffff, 0x0000, 0x8001, 0x8002, 0x0000};
	struct ibvf_rc_pkey_pick p;
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(pick(t, 5, 0x8001, &p, err), 0);
	assert_int_equal(p.index, 2);
	assert_int_equal(p.peer_index, 2);
	assert_int_equal(p.pkey, 0x8001);
	assert_int_equal(p.peer_pkey, 0x8001);
	assert_int_equal(pick(t, 5, 0xffff, &p, err), 0);
	assert_int_equal(p.index, 0);
	/* the lowest index wins when an entry repeats */
	{
		const uint16_t d[] = {0xffff, 0x8003, 0x8003};

		assert_int_equal(pick(d, 3, 0x8003, &p, err), 0);
		assert_int_equal(p.index, 1);
	}
}

static void test_pkey_not_in_table(void **state)
{
	const uint16_t t[] = {0xffff, 0x8001, 0x0000};
	struct ibvf_rc_pkey_pick p;
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(pick(t, 3, 0x8005, &p, err), -ENOENT);
	assert_non_null(strstr(err, "PKey 0x8005"));
	assert_non_null(strstr(err, "full member of partition 0x0005"));
	assert_non_null(strstr(err, "P_Key table ([0]=0xffff [1]=0x8001)"));
	assert_int_equal(pick(t, 3, 0x0005, &p, err), -ENOENT);
	assert_non_null(strstr(err, "PKey 0x0005 (limited member"));
	/* an empty table is named as such */
	{
		const uint16_t z[] = {0, 0x8000, 0};

		assert_int_equal(pick(z, 3, 0x8001, &p, err), -ENOENT);
		assert_non_null(strstr(err, "no valid entry among 3"));
	}
}

static void test_pkey_full_wanted_port_limited(void **state)
{
	const uint16_t t[] = {0xffff, 0x0001};
	struct ibvf_rc_pkey_pick p;
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(pick(t, 2, 0x8001, &p, err), -ENOENT);
	assert_non_null(strstr(err, "only a limited member (0x0001 at index 1)"));
}

static void test_pkey_limited_wanted_port_full(void **state)
{
	const uint16_t t[] = {0xffff, 0x8001};
	struct ibvf_rc_pkey_pick p;
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(pick(t, 2, 0x0001, &p, err), -ENOENT);
	assert_non_null(strstr(err, "full member (0x8001 at index 1), not limited"));
}

static void test_pkey_limited_only_not_checkable(void **state)
{
	/* IBTA 10.9.3: two limited members cannot talk */
	const uint16_t t[] = {0x7fff, 0x0001};
	struct ibvf_rc_pkey_pick p;
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(pick(t, 2, 0x0001, &p, err), -EOPNOTSUPP);
	assert_non_null(strstr(err, "not checkable"));
	assert_non_null(strstr(err, "two limited members cannot talk"));
	assert_non_null(strstr(err, "[1]=0x0001"));
}

static void test_pkey_limited_with_full_peer(void **state)
{
	/* both memberships present: QP A limited, QP B full (limited <-> full) */
	const uint16_t t[] = {0xffff, 0x8001, 0x0000, 0x0001};
	struct ibvf_rc_pkey_pick p;
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(pick(t, 4, 0x0001, &p, err), 0);
	assert_int_equal(p.index, 3);
	assert_int_equal(p.pkey, 0x0001);
	assert_int_equal(p.peer_index, 1);
	assert_int_equal(p.peer_pkey, 0x8001);
	/* asking for full in the same table uses the full entry on both sides */
	assert_int_equal(pick(t, 4, 0x8001, &p, err), 0);
	assert_int_equal(p.index, 1);
	assert_int_equal(p.peer_index, 1);
}

static void test_pkey_key_zero_invalid(void **state)
{
	/* 0x0000 and 0x8000 are invalid P_Keys (IBTA 10.9.1.1), never matched */
	const uint16_t t[] = {0x8000, 0x0000};
	struct ibvf_rc_pkey_pick p;
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(pick(t, 2, 0x8000, &p, err), -EINVAL);
	assert_int_equal(pick(t, 2, 0x0000, &p, err), -EINVAL);
	assert_non_null(strstr(err, "reserved"));
}

/*
 * RoCE rule (ibvf_rc_pkey_pick_port): a table holding only the default P_Key
 * (soft-RoCE: [0]=0xffff) checks with it when the requested P_Key is absent,
 * and says so; an InfiniBand port with the same table keeps the strict rule,
 * and so does a RoCE port whose table holds anything else.
 */
static void test_pkey_roce_default(void **state)
{
	const uint16_t rxe[] = {0xffff};
	const uint16_t sparse[] = {0x0000, 0xffff, 0x0000};
	const uint16_t admin[] = {0xffff, 0x8002};
	const uint16_t lim[] = {0xffff, 0x0001};
	const uint16_t empty[] = {0x0000, 0x8000};
	struct ibvf_rc_pkey_pick p;
	char err[IBVF_ERR_LEN];

	(void)state;
	/* full and limited tenant keys: not in the table, default checked */
	for (int i = 0; i < 2; i++) {
		uint16_t want = i ? 0x0001 : 0x8001;

		memset(&p, 0xa5, sizeof(p));
		assert_int_equal(ibvf_rc_pkey_pick_port(rxe, 1, want, true, &p, err, sizeof(err)),
				 0);
		assert_true(p.roce_default);
		assert_int_equal(p.index, 0);
		assert_int_equal(p.peer_index, 0);
		assert_int_equal(p.pkey, 0xffff);
		assert_int_equal(p.peer_pkey, 0xffff);
	}
	assert_int_equal(ibvf_rc_pkey_pick_port(sparse, 3, 0x8001, true, &p, err, sizeof(err)), 0);
	assert_true(p.roce_default);
	assert_int_equal(p.index, 1);
	/* the requested key present: the normal rule, no fallback */
	assert_int_equal(ibvf_rc_pkey_pick_port(rxe, 1, 0xffff, true, &p, err, sizeof(err)), 0);
	assert_false(p.roce_default);
	/* InfiniBand: strict, whatever the table */
	assert_int_equal(ibvf_rc_pkey_pick_port(rxe, 1, 0x8001, false, &p, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "PKey 0x8001"));
	/* RoCE with configured P_Keys: strict */
	assert_int_equal(ibvf_rc_pkey_pick_port(admin, 2, 0x8001, true, &p, err, sizeof(err)),
			 -ENOENT);
	/* limited-only stays not checkable, key 0 stays invalid, empty table a miss */
	assert_int_equal(ibvf_rc_pkey_pick_port(lim, 2, 0x0001, true, &p, err, sizeof(err)),
			 -EOPNOTSUPP);
	assert_int_equal(ibvf_rc_pkey_pick_port(rxe, 1, 0x8000, true, &p, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(ibvf_rc_pkey_pick_port(empty, 2, 0x8001, true, &p, err, sizeof(err)),
			 -ENOENT);
}

static void test_pkey_table_format_long(void **state)
{
	uint16_t t[128] = {0};
	char buf[400];

	(void)state;
	for (int i = 0; i < 20; i++)
		t[i * 3] = (uint16_t)(0x8001 + i);
	ibvf_rc_pkey_table_format(t, 128, buf, sizeof(buf));
	assert_non_null(strstr(buf, "[0]=0x8001 [3]=0x8002"));
	assert_non_null(strstr(buf, "[45]=0x8010 ... and 4 more"));
	/* a small buffer is truncated, never overrun */
	ibvf_rc_pkey_table_format(t, 128, buf, 12);
	assert_true(strlen(buf) < 12);
}

/* ---------------------------------------------------------- gid pick -- */

static struct ibv_gid_entry gent(uint32_t idx, uint32_t port, uint32_t type, const char *addr)
{
	struct ibv_gid_entry e = {.gid_index = idx, .port_num = port, .gid_type = type};

	assert_int_equal(inet_pton(AF_INET6, addr, e.gid.raw), 1);
	return e;
}

static void test_gid_prefers_ipv4_roce_v2(void **state)
{
	struct ibv_gid_entry t[] = {
		gent(0, 1, IBV_GID_TYPE_ROCE_V1, "fe80::1"),
		gent(1, 1, IBV_GID_TYPE_ROCE_V2, "fe80::1"),
		gent(2, 1, IBV_GID_TYPE_ROCE_V1, "::ffff:10.0.0.1"),
		gent(3, 1, IBV_GID_TYPE_ROCE_V2, "2001:db8::1"),
		gent(4, 2, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.9"), /* other port */
		gent(5, 1, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.1"),
	};
	char err[IBVF_ERR_LEN];
	int idx = -2;

	(void)state;
	assert_int_equal(ibvf_rc_gid_pick(t, 6, 1, true, -1, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, 5);
	/* without IPv4: global IPv6 RoCE v2, then link-local v2, then v1 */
	assert_int_equal(ibvf_rc_gid_pick(t, 4, 1, true, -1, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, 3);
	assert_int_equal(ibvf_rc_gid_pick(t, 2, 1, true, -1, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, 1);
	assert_int_equal(ibvf_rc_gid_pick(t, 1, 1, true, -1, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, 0);
	/* port 2 sees only its own entry */
	assert_int_equal(ibvf_rc_gid_pick(t, 6, 2, true, -1, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, 4);
}

static void test_gid_explicit(void **state)
{
	struct ibv_gid_entry t[] = {
		gent(0, 1, IBV_GID_TYPE_ROCE_V2, "fe80::1"),
		gent(1, 1, IBV_GID_TYPE_ROCE_V2, "::ffff:127.0.0.1"),
		gent(7, 2, IBV_GID_TYPE_ROCE_V2, "::ffff:127.0.0.2"),
	};
	char err[IBVF_ERR_LEN];
	int idx = -2;

	(void)state;
	assert_int_equal(ibvf_rc_gid_pick(t, 3, 1, true, 0, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, 0);
	assert_int_equal(ibvf_rc_gid_pick(t, 3, 1, true, 7, &idx, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "GID index 7 is not a valid entry"));
	assert_non_null(strstr(err, "valid indexes: 0 1)"));
}

static void test_gid_infiniband(void **state)
{
	struct ibv_gid_entry t[] = {gent(0, 1, IBV_GID_TYPE_IB, "fe80::2:c903:0:1001")};
	char err[IBVF_ERR_LEN];
	int idx = -2;

	(void)state;
	/* IB between two QPs of one port: routed by LID, no GRH */
	assert_int_equal(ibvf_rc_gid_pick(t, 1, 1, false, -1, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, -1);
	assert_int_equal(ibvf_rc_gid_pick(t, 1, 1, false, 0, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, 0);
}

static void test_gid_roce_empty(void **state)
{
	struct ibv_gid_entry t[] = {gent(0, 1, IBV_GID_TYPE_ROCE_V2, "::")};
	char err[IBVF_ERR_LEN];
	int idx = -2;

	(void)state;
	assert_int_equal(ibvf_rc_gid_pick(t, 1, 1, true, -1, &idx, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no valid entry"));
	assert_int_equal(ibvf_rc_gid_pick(NULL, 0, 1, true, -1, &idx, err, sizeof(err)), -ENOENT);
}

/* ------------------------------------------------------------- stats -- */

static void test_stats_nearest_rank(void **state)
{
	uint64_t ns[1000];
	struct ibvf_rc_result r = {0};

	(void)state;
	for (int i = 0; i < 1000; i++) /* 1..1000 us, shuffled */
		ns[(i * 7919) % 1000] = (uint64_t)(i + 1) * 1000;
	rc_stats(ns, 1000, &r);
	assert_true(r.min_us == 1.0);
	assert_true(r.p50_us == 500.0);
	assert_true(r.p99_us == 990.0);
	assert_true(r.max_us == 1000.0);
	assert_true(r.avg_us == 500.5);
}

static void test_stats_small(void **state)
{
	uint64_t one[1] = {42000}, three[3] = {3000, 1000, 2000};
	struct ibvf_rc_result r = {0};

	(void)state;
	rc_stats(one, 1, &r);
	assert_true(r.min_us == 42.0 && r.p50_us == 42.0 && r.p99_us == 42.0 && r.max_us == 42.0);
	rc_stats(three, 3, &r);
	assert_true(r.p50_us == 2.0); /* ceil(1.5) = 2nd */
	assert_true(r.p99_us == 3.0);
	memset(&r, 0, sizeof(r));
	rc_stats(NULL, 0, &r); /* nothing measured: figures stay 0 */
	assert_true(r.max_us == 0);
}

/* ----------------------------------------------------------- options -- */

static void expect_invalid(struct ibvf_rc_opts *o, const char *needle)
{
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN] = "";

	assert_int_equal(ibvf_rc_check(o, &r, err, sizeof(err)), -EINVAL);
	assert_int_equal(r.status, IBVF_RC_INVALID);
	assert_string_equal(r.verb, "options");
	if (!strstr(err, needle))
		fail_msg("error '%s' lacks '%s'", err, needle);
}

static void test_options_rejected(void **state)
{
	struct ibvf_rc_opts o;

	(void)state;
	ibvf_rc_opts_init(&o);
	expect_invalid(&o, "RDMA device name");
	o.dev = "";
	expect_invalid(&o, "RDMA device name");
	o.dev = "../uverbs0";
	expect_invalid(&o, "contains '/'");
	o.dev = "rxe0";
	o.port = 0;
	expect_invalid(&o, "port 0");
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.iterations = 0;
	expect_invalid(&o, "iterations 0");
	o.iterations = IBVF_RC_MAX_ITERATIONS + 1;
	expect_invalid(&o, "iterations");
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.msg_size = 0;
	expect_invalid(&o, "message size 0");
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.timeout_ms = 0;
	expect_invalid(&o, "timeouts");
	o.timeout_ms = IBVF_RC_MAX_TIMEOUT_MS + 1;
	expect_invalid(&o, "timeouts");
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.spin_us = IBVF_RC_MAX_SPIN_US + 1;
	expect_invalid(&o, "spin");
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.gid_index = -5;
	expect_invalid(&o, "GID index -5");
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.p99_max_us = -1;
	expect_invalid(&o, "p99 bound");
	o.p99_max_us = NAN;
	expect_invalid(&o, "p99 bound");
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.use_pkey = true;
	o.pkey = 0x8000;
	expect_invalid(&o, "PKey 0x8000 is invalid");
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.netns = "..";
	expect_invalid(&o, "netns '..'");
}

static void test_opts_defaults(void **state)
{
	struct ibvf_rc_opts o;

	(void)state;
	ibvf_rc_opts_init(&o);
	assert_int_equal(o.port, 1);
	assert_int_equal(o.iterations, 1000);
	assert_int_equal(o.msg_size, 64);
	assert_int_equal(o.gid_index, -1);
	assert_false(o.use_pkey);
	assert_true(o.p99_max_us == 0); /* threshold off by default: report only */
	assert_null(o.netns);
}

static void test_status_names(void **state)
{
	(void)state;
	assert_string_equal(ibvf_rc_status_name(IBVF_RC_PASS), "pass");
	assert_string_equal(ibvf_rc_status_name(IBVF_RC_NOT_CHECKABLE), "not-checkable");
	assert_string_equal(ibvf_rc_status_name((enum ibvf_rc_status)99), "?");
}

/* ------------------------------------------------------------- netns -- */

static void test_netns_path(void **state)
{
	char buf[64], err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(ibvf_rc_netns_path("blue", buf, sizeof(buf), err, sizeof(err)), 0);
	assert_string_equal(buf, "/run/netns/blue");
	assert_int_equal(ibvf_rc_netns_path("/proc/1/ns/net", buf, sizeof(buf), err, sizeof(err)),
			 0);
	assert_string_equal(buf, "/proc/1/ns/net");
	assert_int_equal(ibvf_rc_netns_path("", buf, sizeof(buf), err, sizeof(err)), -EINVAL);
	assert_int_equal(ibvf_rc_netns_path(NULL, buf, sizeof(buf), err, sizeof(err)), -EINVAL);
	assert_int_equal(
		ibvf_rc_netns_path("a-name-that-is-far-too-long-for-this-small-buffer-of-64", buf,
				   sizeof(buf), err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "too long"));
}

static void test_netns_missing(void **state)
{
	struct ibvf_rc_opts o;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN], name[64];

	(void)state;
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	snprintf(name, sizeof(name), "ibvf-test-absent-%d", (int)getpid());
	o.netns = name;
	assert_int_equal(ibvf_rc_check(&o, &r, err, sizeof(err)), -ENOENT);
	assert_int_equal(r.status, IBVF_RC_ERROR);
	assert_string_equal(r.verb, "open(netns)");
	assert_non_null(strstr(err, "cannot open /run/netns/ibvf-test-absent-"));
}

/*
 * libibverbs is loaded at the first check (rc_verbs.h). Where it is absent,
 * the check says which library and which Debian package it needs, with
 * dlerror()'s text, instead of a loader error at the plugin's start; a
 * library without the verbs is refused by the symbol it lacks; a failed
 * load is not kept. Runs first: the first successful load is kept for the
 * process, later calls do not look at verbs_lib.
 */
static void test_verbs_lib_absent(void **state)
{
	const struct ibvf_verbs *v = NULL;
	struct ibvf_rc_opts o;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN];

	(void)state;
	ibvf_rc_opts_init(&o);
	o.dev = "rxe0";
	o.verbs_lib = "/nonexistent/libibverbs.so.1";
	assert_int_equal(ibvf_rc_check(&o, &r, err, sizeof(err)), -ELIBACC);
	assert_int_equal(r.status, IBVF_RC_ERROR);
	assert_string_equal(r.verb, "dlopen");
	assert_int_equal(r.error_errno, ELIBACC);
	assert_non_null(strstr(err, "rxe0 port 1: rcCheck needs /nonexistent/libibverbs.so.1 "
				    "(Debian: libibverbs1): /nonexistent/libibverbs.so.1: "));
	assert_non_null(strstr(err, "No such file"));

	/* a library that loads but is not libibverbs: the missing symbol is named */
	assert_int_equal(ibvf_verbs_load("libc.so.6", &v, err, sizeof(err)), -ELIBACC);
	assert_null(v);
	assert_non_null(strstr(err, "rcCheck needs libc.so.6 (Debian: libibverbs1): libc.so.6 has "
				    "no ibv_get_device_list"));

	/* nothing was kept: the real library loads now, every entry filled */
	assert_int_equal(ibvf_verbs_load(NULL, &v, err, sizeof(err)), 0);
	assert_non_null(v);
	for (size_t i = 0; i < sizeof(*v) / sizeof(void (*)(void)); i++) {
		void (*f)(void);

		memcpy(&f, (const char *)v + i * sizeof(f), sizeof(f));
		assert_non_null(f);
	}
}

static ino_t ns_inode(const char *which)
{
	struct stat st;
	char p[64];

	snprintf(p, sizeof(p), "/proc/self/ns/%s", which);
	assert_int_equal(stat(p, &st), 0);
	return st.st_ino;
}

/*
 * The check in a netns runs in a child; its result crosses a pipe and the
 * caller's own network and mount namespaces stay as they were. Entering our
 * own netns needs no set-up; whatever the child meets on this host (no RDMA,
 * or no right to remount sysfs), a complete result must come back.
 */
static void test_netns_child_result(void **state)
{
	ino_t net = ns_inode("net"), mnt = ns_inode("mnt");
	struct ibvf_rc_opts o;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN] = "";
	int ret;

	(void)state;
	ibvf_rc_opts_init(&o);
	o.dev = "ibvf-test-nodev";
	o.netns = "/proc/self/ns/net";
	o.msg_size = 77;
	ret = ibvf_rc_check(&o, &r, err, sizeof(err));
	print_message("  child said: %d %s [%s] %s\n", ret, ibvf_rc_status_name(r.status), r.verb,
		      err);
	assert_true(ret < 0);
	assert_true(r.status == IBVF_RC_FAIL || r.status == IBVF_RC_ERROR);
	assert_int_equal(-ret, r.error_errno);
	assert_true(r.verb[0] != 0 && err[0] != 0);
	assert_string_equal(r.dev, "ibvf-test-nodev");
	assert_int_equal(r.msg_size, 77);
	assert_int_equal(ns_inode("net"), net);
	assert_int_equal(ns_inode("mnt"), mnt);
}

/* A child that does not answer in time is killed: no unbounded wait. */
static void test_netns_child_killed_on_timeout(void **state)
{
	struct ibvf_rc_opts o;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN] = "";
	uint64_t t0 = ibvf_mono_ns();
	int ret;

	(void)state;
	ibvf_rc_opts_init(&o);
	o.dev = "ibvf-test-nodev";
	o.netns = "/proc/self/ns/net";
	o.timeout_ms = 100;
	rc_fault_child_delay_ms = 60000;
	ret = ibvf_rc_check(&o, &r, err, sizeof(err));
	rc_fault_child_delay_ms = 0;
	assert_int_equal(ret, -ETIMEDOUT);
	assert_int_equal(r.status, IBVF_RC_FAIL);
	assert_non_null(strstr(err, "did not finish within 100 ms"));
	assert_true(ibvf_mono_ns() - t0 < 10000000000ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verbs_lib_absent), /* first: see its comment */
		cmocka_unit_test(test_pkey_full_found),
		cmocka_unit_test(test_pkey_not_in_table),
		cmocka_unit_test(test_pkey_full_wanted_port_limited),
		cmocka_unit_test(test_pkey_limited_wanted_port_full),
		cmocka_unit_test(test_pkey_limited_only_not_checkable),
		cmocka_unit_test(test_pkey_limited_with_full_peer),
		cmocka_unit_test(test_pkey_key_zero_invalid),
		cmocka_unit_test(test_pkey_table_format_long),
		cmocka_unit_test(test_pkey_roce_default),
		cmocka_unit_test(test_gid_prefers_ipv4_roce_v2),
		cmocka_unit_test(test_gid_explicit),
		cmocka_unit_test(test_gid_infiniband),
		cmocka_unit_test(test_gid_roce_empty),
		cmocka_unit_test(test_stats_nearest_rank),
		cmocka_unit_test(test_stats_small),
		cmocka_unit_test(test_options_rejected),
		cmocka_unit_test(test_opts_defaults),
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_netns_path),
		cmocka_unit_test(test_netns_missing),
		cmocka_unit_test(test_netns_child_result),
		cmocka_unit_test(test_netns_child_killed_on_timeout),
	};

	return cmocka_run_group_tests_name("rc_check", tests, NULL, NULL);
}
