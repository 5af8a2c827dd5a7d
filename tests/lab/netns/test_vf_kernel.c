// SPDX-License-Identifier: MIT
/*
 * VF netlink messages against the real kernel. The test runs in a private
 * network namespace of its own (unshare(CLONE_NEWNET): unique by construction
 * and gone when the test exits, even on a crash) with a veth pair standing in
 * for the PF's IPoIB netdev and a VF netdev.
 *
 * The kernel must answer our GUID and link-state messages with EOPNOTSUPP:
 * it parsed them (policy, nest layout, struct sizes) and found no driver
 * support. Deliberately malformed twins must get EINVAL/ERANGE instead, which
 * proves the kernel really looked at the content. Needs root (CAP_NET_ADMIN
 * + CAP_SYS_ADMIN for unshare): exits 77 otherwise, or fails when
 * IBVF_REQUIRE_LABS=1.
 */
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/socket.h>

#include "err.h"
#include "fakesysfs.h"
#include "log.h"
#include "vf_driver.h"
#include "vf_ibsim.h"
#include "vf_inventory.h"
#include "vf_manager.h"
#include "vf_netlink.h"

#define PF_IF	"ibvfk0"
#define VF_IF	"ibvfk1"
#define ALTNAME "ibvf-kernel-test-altname"

static int pf_ifindex, vf_ifindex;
static char *trees[8]; /* fake sysfs roots, removed at exit even after a failed assert */
static size_t n_trees;

static void remove_trees(void)
{
	for (size_t i = 0; i < n_trees; i++) {
		ibvf_fake_rm_rf(trees[i]);
		free(trees[i]);
	}
}

static int skip_or_fail(const char *why)
{
	const char *req = getenv("IBVF_REQUIRE_LABS");

	if (req && !strcmp(req, "1")) {
		fprintf(stderr, "FAIL: IBVF_REQUIRE_LABS=1 but %s\n", why);
		return 1;
	}
	fprintf(stderr, "SKIP: %s\n", why);
	return 77;
}

static struct ibvf_nl *open_nl(void)
{
	char err[IBVF_ERR_LEN];
	struct ibvf_nl *nl;

	assert_int_equal(ibvf_nl_open(&nl, err, sizeof(err)), 0);
	return nl;
}

static void test_guid_eopnotsupp(void **state)
{
	static const int attrs[] = {IFLA_VF_IB_NODE_GUID, IFLA_VF_IB_PORT_GUID};
	static const uint32_t vfs[] = {0, 3, 63};
	struct ibvf_nl *nl = open_nl();
	char err[IBVF_ERR_LEN];

	(void)state;
	for (size_t a = 0; a < 2; a++)
		for (size_t v = 0; v < 3; v++) {
			int ret = ibvf_nl_set_vf_guid(nl, pf_ifindex, vfs[v], attrs[a],
						      0x0002c90300001234ULL, err, sizeof(err));

			if (ret != -EOPNOTSUPP)
				fail_msg("attr %d vf %u: kernel answered %d (%s), want EOPNOTSUPP",
					 attrs[a], vfs[v], ret, err);
			assert_non_null(strstr(err, "kernel: "));
		}
	ibvf_nl_close(nl);
}

static void test_link_state_eopnotsupp(void **state)
{
	struct ibvf_nl *nl = open_nl();
	char err[IBVF_ERR_LEN];

	(void)state;
	for (uint32_t s = IFLA_VF_LINK_STATE_AUTO; s <= IFLA_VF_LINK_STATE_DISABLE; s++)
		assert_int_equal(ibvf_nl_set_vf_link_state(nl, pf_ifindex, 2, s, err, sizeof(err)),
				 -EOPNOTSUPP);
	ibvf_nl_close(nl);
}

/* SETLINK with one IFLA_VF_INFO nest holding @attr with @len bytes of @data. */
static struct nl_msg *raw_vf_msg(int attr, const void *data, int len)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = pf_ifindex};
	struct nl_msg *m = nlmsg_alloc_simple(RTM_SETLINK, NLM_F_ACK);
	struct nlattr *list, *info;

	assert_non_null(m);
	assert_int_equal(nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO), 0);
	list = nla_nest_start(m, IFLA_VFINFO_LIST);
	info = nla_nest_start(m, IFLA_VF_INFO);
	assert_int_equal(nla_put(m, attr, len, data), 0);
	nla_nest_end(m, info);
	nla_nest_end(m, list);
	return m;
}

static void test_kernel_checks_content(void **state)
{
	struct ifla_vf_guid g = {.vf = 0, .guid = 0x0002c90300001234ULL};
	struct ibvf_nl *nl = open_nl();
	char err[IBVF_ERR_LEN];
	struct nl_msg *m;
	int ret;

	(void)state;
	/* the well-formed raw twin of our message: EOPNOTSUPP like ours */
	m = raw_vf_msg(IFLA_VF_IB_NODE_GUID, &g, sizeof(g));
	assert_int_equal(ibvf_nl_request(nl, m, err, sizeof(err)), -EOPNOTSUPP);
	nlmsg_free(m);
	/* a GUID attribute shorter than struct ifla_vf_guid: rejected by policy */
	m = raw_vf_msg(IFLA_VF_IB_NODE_GUID, &g, 8);
	ret = ibvf_nl_request(nl, m, err, sizeof(err));
	nlmsg_free(m);
	if (ret != -EINVAL && ret != -ERANGE)
		fail_msg("short GUID attribute: kernel answered %d (%s)", ret, err);
	/* VF index INT_MAX: do_setvfinfo() rejects it before asking the driver */
	g.vf = INT_MAX;
	m = raw_vf_msg(IFLA_VF_IB_PORT_GUID, &g, sizeof(g));
	assert_int_equal(ibvf_nl_request(nl, m, err, sizeof(err)), -EINVAL);
	nlmsg_free(m);
	ibvf_nl_close(nl);
}

static void test_ext_ack_text(void **state)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = pf_ifindex};
	struct nl_msg *m = nlmsg_alloc_simple(RTM_SETLINK, NLM_F_ACK);
	struct ibvf_nl *nl = open_nl();
	char err[IBVF_ERR_LEN];
	uint16_t mtu = 9000; /* IFLA_MTU is a u32: a 2-byte one fails policy */
	int ret;

	(void)state;
	assert_int_equal(nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO), 0);
	assert_int_equal(nla_put(m, IFLA_MTU, sizeof(mtu), &mtu), 0);
	ret = ibvf_nl_request(nl, m, err, sizeof(err));
	nlmsg_free(m);
	assert_true(ret == -EINVAL || ret == -ERANGE);
	/* "kernel: <strerror>: <extended ACK message>" */
	if (!strstr(err, "kernel: ") || !strchr(strstr(err, "kernel: ") + 8, ':'))
		fail_msg("no extended-ACK text in '%s'", err);
	ibvf_nl_close(nl);
}

static void test_read_back_veth(void **state)
{
	struct ibvf_nl *nl = open_nl();
	char err[IBVF_ERR_LEN];
	struct ibvf_nl_link l;

	(void)state;
	assert_int_equal(ibvf_nl_read_link(nl, pf_ifindex, &l, err, sizeof(err)), 0);
	assert_int_equal(l.ifindex, pf_ifindex);
	assert_int_equal(l.n_vfs, 0); /* a veth has no VFs (and no IFLA_NUM_VF) */
	ibvf_nl_link_free(&l);
	assert_int_equal(ibvf_nl_read_link(nl, 999999, &l, err, sizeof(err)), -ENODEV);
	/* the socket stays usable after errors (sequence numbers) */
	assert_int_equal(ibvf_nl_read_link(nl, vf_ifindex, &l, err, sizeof(err)), 0);
	ibvf_nl_link_free(&l);
	ibvf_nl_close(nl);
}

/* A fake PF whose IPoIB netdev is the real veth PF_IF and whose VF 0 netdev is VF_IF. */
static char *fake_tree(void)
{
	char *root = strdup("/tmp/ibvf-kt-sysfs.XXXXXX");
	struct ibvf_fake_pf pf = {.pci = "0000:03:00.0",
				  .netdev = PF_IF,
				  .ifindex = pf_ifindex,
				  .rdma_dev = "mlx5_0",
				  .driver = "mlx5_core",
				  .total_vfs = 4,
				  .num_vfs = 2};
	struct ibvf_fake_vf vfs[2] = {
		{.driver = "mlx5_core",
		 .netdev = VF_IF,
		 .ifindex = vf_ifindex,
		 .rdma_dev = "mlx5_2"},
		{.driver = "mlx5_core", .netdev = "ibvfkx", .ifindex = 0, .rdma_dev = "mlx5_3"},
	};

	assert_non_null(root);
	assert_non_null(mkdtemp(root));
	assert_true(n_trees < 8);
	trees[n_trees++] = root;
	assert_int_equal(ibvf_fake_add_pf(root, &pf, vfs), 0);
	return root;
}

static void test_altname_lookup(void **state)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = vf_ifindex};
	struct nl_msg *m =
		nlmsg_alloc_simple(RTM_NEWLINKPROP, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
	struct ibvf_nl *nl = open_nl();
	const struct ibvf_vf_info *vf;
	struct ibvf_inventory *inv;
	char err[IBVF_ERR_LEN], *root = fake_tree();
	struct nlattr *props;

	(void)state;
	assert_int_equal(nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO), 0);
	props = nla_nest_start(m, IFLA_PROP_LIST);
	assert_int_equal(nla_put_string(m, IFLA_ALT_IFNAME, ALTNAME), 0);
	nla_nest_end(m, props);
	if (ibvf_nl_request(nl, m, err, sizeof(err)))
		fail_msg("adding altname: %s", err);
	nlmsg_free(m);
	/* 24 characters: longer than IFNAMSIZ, so if_nametoindex() cannot find it */
	assert_int_equal(ibvf_nl_ifindex_by_name(nl, ALTNAME, err, sizeof(err)), vf_ifindex);
	assert_int_equal(ibvf_nl_ifindex_by_name(nl, VF_IF, err, sizeof(err)), vf_ifindex);
	assert_int_equal(ibvf_nl_ifindex_by_name(nl, "ibvf-none", err, sizeof(err)), -ENODEV);
	assert_int_equal(ibvf_inventory_scan(root, &inv, err, sizeof(err)), 0);
	vf = ibvf_inventory_find_vf_netdev(inv, ALTNAME); /* default resolver: the kernel */
	assert_non_null(vf);
	assert_string_equal(vf->netdev, VF_IF);
	assert_string_equal(vf->pci, "0000:03:00.2");
	ibvf_inventory_free(inv);
	ibvf_nl_close(nl);
}

static void test_manager_names_driver(void **state)
{
	struct ibvf_vf_manager_opts o = {.rebind_timeout_ms = 500};
	struct ibvf_vf_request req = {.node_guid = 0x0002c90300001234ULL,
				      .port_guid = 0x0002c90300001234ULL,
				      .link_state = -1,
				      .rebind = true};
	char err[IBVF_ERR_LEN], *root = fake_tree(), locks[PATH_MAX];
	struct ibvf_vf_manager *mgr;
	struct ibvf_vf_driver *drv;
	struct ibvf_vf_info out;

	(void)state;
	snprintf(locks, sizeof(locks), "%s/locks", root);
	o.sysfs_root = root;
	o.lock_dir = locks;
	assert_int_equal(ibvf_vf_driver_netlink_create(root, &drv, err, sizeof(err)), 0);
	assert_int_equal(ibvf_vf_manager_create(&o, drv, &mgr, err, sizeof(err)), 0);
	assert_int_equal(ibvf_vf_program(mgr, "0000:03:00.2", &req, &out, err, sizeof(err)),
			 -EOPNOTSUPP);
	if (!strstr(err, "driver mlx5_core does not support VF GUIDs") ||
	    !strstr(err, "PF " PF_IF " VF 0") || !strstr(err, "nothing was changed"))
		fail_msg("unexpected error text: %s", err);
	ibvf_vf_manager_destroy(mgr);
}

static void test_ibsim_renames_real_netdev(void **state)
{
	char err[IBVF_ERR_LEN], *root = fake_tree(), console[PATH_MAX], json[PATH_MAX + 128];
	struct ibvf_vf_driver *drv;
	struct ibvf_vf_info vf, after;
	FILE *f;
	char buf[512] = "";

	(void)state;
	snprintf(console, sizeof(console), "%s/console", root);
	f = fopen(console, "w"); /* a plain file stands in for the FIFO */
	assert_non_null(f);
	fclose(f);
	snprintf(json, sizeof(json),
		 "{\"console\":\"%s\",\"node_prefix\":\"vf\",\"real_netdevs\":true,"
		 "\"relink_delay_ms\":0}",
		 console);
	assert_int_equal(ibvf_vf_driver_ibsim_create(root, json, &drv, err, sizeof(err)), 0);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.2", &vf, err, sizeof(err)), 0);
	if (drv->ops->rebind(drv, &vf, NULL, 1000, err, sizeof(err)))
		fail_msg("rebind: %s", err);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.2", &after, err, sizeof(err)), 0);
	assert_string_equal(after.netdev, VF_IF "r1");
	assert_int_equal(after.ifindex, vf_ifindex);
	assert_int_equal(if_nametoindex(VF_IF "r1"), (unsigned int)vf_ifindex);
	assert_int_equal(if_nametoindex(VF_IF), 0);
	f = fopen(console, "r");
	assert_non_null(f);
	assert_true(fread(buf, 1, sizeof(buf) - 1, f) > 0);
	fclose(f);
	assert_non_null(strstr(buf, "Unlink \"vf0\"[1]\nReLink \"vf0\"[1]\n"));
	ibvf_vf_driver_destroy(drv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_guid_eopnotsupp),
		cmocka_unit_test(test_link_state_eopnotsupp),
		cmocka_unit_test(test_kernel_checks_content),
		cmocka_unit_test(test_ext_ack_text),
		cmocka_unit_test(test_read_back_veth),
		cmocka_unit_test(test_altname_lookup),
		cmocka_unit_test(test_manager_names_driver),
		cmocka_unit_test(test_ibsim_renames_real_netdev),
	};
	struct nl_sock *sk;

	if (geteuid() != 0)
		return skip_or_fail("the VF kernel test needs root (network namespace, veth)");
	if (unshare(CLONE_NEWNET))
		return skip_or_fail(
			"cannot create a network namespace (unshare: no CAP_SYS_ADMIN?)");
	ibvf_log_init("test_vf_kernel", IBVF_LOG_STDERR, LOG_WARNING);
	atexit(remove_trees);
	sk = nl_socket_alloc();
	if (!sk || nl_connect(sk, NETLINK_ROUTE) < 0 ||
	    rtnl_link_veth_add(sk, PF_IF, VF_IF, getpid()) < 0)
		return skip_or_fail("cannot create a veth pair (veth module?)");
	nl_socket_free(sk);
	pf_ifindex = (int)if_nametoindex(PF_IF);
	vf_ifindex = (int)if_nametoindex(VF_IF);
	if (!pf_ifindex || !vf_ifindex)
		return skip_or_fail("veth pair not visible after creation");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
