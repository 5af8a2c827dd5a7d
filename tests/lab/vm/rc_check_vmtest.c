// SPDX-License-Identifier: MIT
/*
 * rc_check_vmtest - API-level tests of the RC QP check against a real RDMA
 * device (rdma_rxe in the VM lab; run by guest-rc-check.sh, not on the host).
 *
 *   rc_check_vmtest faults  DEV   every resource step fails once (fault
 *                                 injection); each failure names its verb and
 *                                 errno and leaves no kernel object behind
 *   rc_check_vmtest memlock DEV   run with RLIMIT_MEMLOCK 4 KiB and without
 *                                 CAP_IPC_LOCK: ibv_reg_mr fails, the error
 *                                 says memlock, nothing is left behind
 *   rc_check_vmtest paths   DEV   completion-channel path (no spinning), pure
 *                                 busy-poll, 1-byte and multi-packet messages,
 *                                 no warm-up, timeouts that cannot be met
 *   rc_check_vmtest netns   DEV NETNS pass|absent   the check inside a netns
 *
 * Kernel objects are counted with `rdma -j resource show` (pd, cq, qp, mr,
 * ctx per device) before and after each check, within this process: a check
 * that leaks a QP or a device context is caught before process exit would
 * hide it.
 */
#define IBVF_RC_FAULT_INJECT 1
#include "../../../daemon/rdma/rc_check.c"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *dev_name, *netns_name, *netns_expect;

struct res_count {
	long pd, cq, qp, mr, ctx;
};

static long jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

/* Kernel objects of @dev from `rdma -j resource show` (fixed command, no input). */
static struct res_count res_count(const char *dev)
{
	struct res_count c = {-1, -1, -1, -1, -1};
	char buf[8192];
	size_t n;
	FILE *f = popen("rdma -j resource show", "r");
	json_error_t je;
	json_t *arr, *e;
	size_t i;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	assert_int_equal(pclose(f), 0);
	arr = json_loads(buf, 0, &je);
	assert_non_null(arr);
	json_array_foreach(arr, i, e)
	{
		const char *name = json_string_value(json_object_get(e, "ifname"));

		if (!name || strcmp(name, dev))
			continue;
		c = (struct res_count){jint(e, "pd"), jint(e, "cq"), jint(e, "qp"), jint(e, "mr"),
				       jint(e, "ctx")};
	}
	json_decref(arr);
	assert_true(c.pd >= 0);
	return c;
}

static void assert_same_count(const struct res_count *a, const struct res_count *b,
			      const char *when)
{
	if (a->pd != b->pd || a->cq != b->cq || a->qp != b->qp || a->mr != b->mr ||
	    a->ctx != b->ctx)
		fail_msg("%s: kernel objects before pd %ld cq %ld qp %ld mr %ld ctx %ld, after "
			 "pd %ld cq %ld qp %ld mr %ld ctx %ld",
			 when, a->pd, a->cq, a->qp, a->mr, a->ctx, b->pd, b->cq, b->qp, b->mr,
			 b->ctx);
}

static void opts_for(struct ibvf_rc_opts *o, unsigned int iterations)
{
	ibvf_rc_opts_init(o);
	o->dev = dev_name;
	o->iterations = iterations;
	o->warmup = 1;
	o->timeout_ms = 20000;
}

/* -------------------------------------------------------------- faults -- */

static void test_every_fault_releases(void **state)
{
	struct res_count base = res_count(dev_name), after;
	struct ibvf_rc_opts o;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN], when[64];
	unsigned int k;
	int ret;

	(void)state;
	opts_for(&o, 1);
	o.warmup = 0;
	for (k = 1; k < 200; k++) {
		rc_fault_at = k;
		rc_fault_count = 0;
		ret = ibvf_rc_check(&o, &r, err, sizeof(err));
		snprintf(when, sizeof(when), "fault at step %u", k);
		after = res_count(dev_name);
		assert_same_count(&base, &after, when);
		if (rc_fault_count < k) /* no step left to fail: the check ran clean */
			break;
		if (ret == 0)
			fail_msg("%s: the check passed although a step failed", when);
		assert_int_equal(r.error_errno, EIO);
		assert_true(r.verb[0] != 0);
		if (!strstr(err, r.verb))
			fail_msg("%s: error does not name the verb %s: %s", when, r.verb, err);
		print_message("  fault %2u: %-24s %s\n", k, r.verb, ibvf_rc_status_name(r.status));
	}
	rc_fault_at = 0;
	assert_int_equal(ret, 0);
	assert_int_equal(r.status, IBVF_RC_PASS);
	/* list, open, 7 resources, 2 x (INIT + post recv), 2 RTR, 2 RTS, one round
	 * trip (2 sends, 2 receive reposts) */
	assert_int_equal(k - 1, 21);
	print_message("  %u fault points, each released everything\n", k - 1);
}

/* ------------------------------------------------------------- memlock -- */

static void test_memlock(void **state)
{
	struct res_count base = res_count(dev_name), after;
	struct ibvf_rc_opts o;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN];
	struct rlimit rl;
	int ret;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	if (rl.rlim_cur > 4096)
		fail_msg("run this test with RLIMIT_MEMLOCK 4 KiB (prlimit --memlock=4096)");
	opts_for(&o, 10);
	ret = ibvf_rc_check(&o, &r, err, sizeof(err));
	print_message("  %s\n", err);
	assert_int_not_equal(ret, 0);
	assert_int_equal(r.status, IBVF_RC_FAIL);
	assert_string_equal(r.verb, "ibv_reg_mr");
	assert_true(r.error_errno == ENOMEM || r.error_errno == EPERM);
	assert_non_null(strstr(err, "memlock"));
	assert_non_null(strstr(err, "RLIMIT_MEMLOCK"));
	after = res_count(dev_name);
	assert_same_count(&base, &after, "after the memlock failure");
	/* a registration that fits in one page still works under the same limit */
	o.mr_bytes = 0;
	o.msg_size = 64;
	ret = ibvf_rc_check(&o, &r, err, sizeof(err));
	if (ret)
		fail_msg("one page should fit in 4 KiB of memlock: %s", err);
	after = res_count(dev_name);
	assert_same_count(&base, &after, "after the one-page check");
}

/* --------------------------------------------------------------- paths -- */

static void run_pass(struct ibvf_rc_opts *o, const char *what)
{
	struct res_count base = res_count(dev_name), after;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN];
	int ret = ibvf_rc_check(o, &r, err, sizeof(err));

	if (ret)
		fail_msg("%s: %s", what, err);
	assert_int_equal(r.status, IBVF_RC_PASS);
	assert_int_equal(r.iterations, o->iterations);
	assert_true(r.min_us > 0 && r.min_us <= r.p50_us && r.p50_us <= r.p99_us &&
		    r.p99_us <= r.max_us);
	assert_true(r.avg_us >= r.min_us && r.avg_us <= r.max_us);
	print_message("  %-28s min %.1f p50 %.1f p99 %.1f max %.1f us\n", what, r.min_us, r.p50_us,
		      r.p99_us, r.max_us);
	after = res_count(dev_name);
	assert_same_count(&base, &after, what);
}

static void test_completion_channel_only(void **state)
{
	struct ibvf_rc_opts o;

	(void)state;
	opts_for(&o, 200);
	o.spin_us = 0; /* every wait arms the CQ and sleeps on the channel */
	run_pass(&o, "completion channel (spin 0)");
}

static void test_busy_poll_only(void **state)
{
	struct ibvf_rc_opts o;

	(void)state;
	opts_for(&o, 200);
	o.spin_us = 1000000; /* never sleeps within one wait */
	run_pass(&o, "busy poll (spin 1 s)");
}

static void test_message_sizes(void **state)
{
	struct ibvf_rc_opts o;

	(void)state;
	opts_for(&o, 50);
	o.msg_size = 1;
	o.warmup = 0;
	run_pass(&o, "1-byte messages, no warm-up");
	opts_for(&o, 20);
	o.msg_size = 1u << 20; /* 256 packets of 4 KiB MTU per message */
	run_pass(&o, "1 MiB messages");
}

static void test_overall_timeout(void **state)
{
	struct res_count base = res_count(dev_name), after;
	struct ibvf_rc_opts o;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN];
	int ret;

	(void)state;
	opts_for(&o, IBVF_RC_MAX_ITERATIONS);
	o.timeout_ms = 300;
	ret = ibvf_rc_check(&o, &r, err, sizeof(err));
	print_message("  %s (%.0f ms)\n", err, r.elapsed_ms);
	assert_int_equal(ret, -ETIMEDOUT);
	assert_int_equal(r.status, IBVF_RC_FAIL);
	assert_non_null(strstr(err, "timeout of 300 ms"));
	assert_true(r.elapsed_ms < 300 + 1000); /* bounded: no hang past the timeout */
	after = res_count(dev_name);
	assert_same_count(&base, &after, "after the timeout");
}

/* --------------------------------------------------------------- netns -- */

static void test_netns(void **state)
{
	struct ibvf_rc_opts o;
	struct ibvf_rc_result r;
	char err[IBVF_ERR_LEN];
	int ret;

	(void)state;
	opts_for(&o, 100);
	o.netns = netns_name;
	ret = ibvf_rc_check(&o, &r, err, sizeof(err));
	print_message("  netns %s: %s %s\n", netns_name, ibvf_rc_status_name(r.status), err);
	if (!strcmp(netns_expect, "pass")) {
		if (ret)
			fail_msg("expected a pass in netns %s: %s", netns_name, err);
		assert_int_equal(r.iterations, 100);
		assert_true(r.p50_us > 0);
	} else {
		assert_int_equal(ret, -ENODEV);
		assert_int_equal(r.status, IBVF_RC_FAIL);
		assert_non_null(strstr(err, "no RDMA device visible in this netns"));
	}
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest faults[] = {
		cmocka_unit_test(test_every_fault_releases),
	};
	static const struct CMUnitTest memlock[] = {
		cmocka_unit_test(test_memlock),
	};
	static const struct CMUnitTest paths[] = {
		cmocka_unit_test(test_completion_channel_only),
		cmocka_unit_test(test_busy_poll_only),
		cmocka_unit_test(test_message_sizes),
		cmocka_unit_test(test_overall_timeout),
	};
	static const struct CMUnitTest netns[] = {
		cmocka_unit_test(test_netns),
	};

	if (argc < 3)
		goto usage;
	dev_name = argv[2];
	ibvf_log_init("rc_check_vmtest", IBVF_LOG_STDERR, LOG_WARNING);
	if (!strcmp(argv[1], "faults"))
		return cmocka_run_group_tests_name("rc_check faults", faults, NULL, NULL);
	if (!strcmp(argv[1], "memlock"))
		return cmocka_run_group_tests_name("rc_check memlock", memlock, NULL, NULL);
	if (!strcmp(argv[1], "paths"))
		return cmocka_run_group_tests_name("rc_check paths", paths, NULL, NULL);
	if (!strcmp(argv[1], "netns") && argc == 5) {
		netns_name = argv[3];
		netns_expect = argv[4];
		return cmocka_run_group_tests_name("rc_check netns", netns, NULL, NULL);
	}
usage:
	fprintf(stderr, "usage: %s faults|memlock|paths DEV | netns DEV NETNS pass|absent\n",
		argv[0]);
	return 2;
}
