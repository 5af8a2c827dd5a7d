// SPDX-License-Identifier: MIT
/*
 * The CNI plugin's VF reads (cni/cni_vf.c) on a fake sysfs: ADD looks the
 * VF up once (cni_vf_lookup(), in validate) and later re-reads only the
 * names a rebind or an RDMA device move re-creates, from the VF's own
 * directory (issue 17), still seeing every change of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cni_vf.h"
#include "testutil.h"
#include "vf_test_util.h"

static const char *PF = "0000:03:00.0", *VF = "0000:03:00.3";

static int setup(void **state)
{
	char *root = vt_root_new();

	if (ibvf_fake_init(root) || vt_add_pf(root, PF, "ib0", 10, "mlx5_0", 4, NULL))
		return -1;
	setenv("IBVF_SYSFS_ROOT", root, 1);
	*state = root;
	return 0;
}

static int teardown(void **state)
{
	vt_root_free(*state);
	unsetenv("IBVF_SYSFS_ROOT");
	return 0;
}

/* The lookup, then a rebind under other names: the re-reads give the new ones. */
static void test_reread_sees_rebind(void **state)
{
	const char *root = *state;
	struct ibvf_fake_vf v = {
		.driver = "mlx5_core", .netdev = "ib0v1x", .ifindex = 40, .rdma_dev = "mlx5_20"};
	char err[256] = "", name[CNI_IFNAME_LEN], rdma[64];
	struct cni_vf vf;

	assert_int_equal(cni_vf_lookup(VF, &vf, err, sizeof(err)), 0);
	assert_true(vf.is_vf);
	assert_int_equal(vf.vf_index, 1);
	assert_string_equal(vf.pf_netdev, "ib0");
	assert_string_equal(vf.netdev, "ib0v1");
	assert_string_equal(vf.rdma_dev, "mlx5_0_11");
	assert_int_equal(cni_vf_netdev(VF, name, err, sizeof(err)), 0);
	assert_string_equal(name, "ib0v1");
	assert_int_equal(ibvf_fake_vf_unbind(root, VF), 0);
	assert_int_equal(cni_vf_netdev(VF, name, err, sizeof(err)), -ENODEV);
	assert_int_equal(cni_vf_rdma_dev(VF, rdma, sizeof(rdma), err, sizeof(err)), -ENODEV);
	assert_int_equal(ibvf_fake_vf_bind(root, VF, &v), 0);
	assert_int_equal(cni_vf_netdev(VF, name, err, sizeof(err)), 0);
	assert_string_equal(name, "ib0v1x");
	assert_int_equal(cni_vf_rdma_dev(VF, rdma, sizeof(rdma), err, sizeof(err)), 0);
	assert_string_equal(rdma, "mlx5_20");
	assert_int_equal(ibvf_fake_remove_dev(root, VF), 0);
	assert_int_equal(cni_vf_netdev(VF, name, err, sizeof(err)), -ENODEV);
	/* a PF has no VF netdev, as the lookup says */
	assert_int_equal(cni_vf_netdev(PF, name, err, sizeof(err)), -ENODEV);
	assert_int_equal(cni_vf_rdma_dev(PF, rdma, sizeof(rdma), err, sizeof(err)), -ENODEV);
}

/*
 * The re-reads do not read the PF again (issue 17: that is most of a
 * lookup): with the PF's virtfn links gone and sriov_numvfs 0, which a
 * lookup refuses, they still name the VF's netdev and RDMA device.
 */
static void test_reread_without_pf(void **state)
{
	const char *root = *state;
	char err[256] = "", name[CNI_IFNAME_LEN], rdma[64], rel[128];
	struct cni_vf vf;

	assert_int_equal(ibvf_fake_set_numvfs(root, PF, 0), 0);
	for (int i = 0; i < 4; i++) {
		char *p;

		snprintf(rel, sizeof(rel), "bus/pci/devices/%s/virtfn%d", PF, i);
		p = tu_path(root, rel);
		assert_int_equal(unlink(p), 0);
		free(p);
	}
	assert_int_equal(cni_vf_lookup(VF, &vf, err, sizeof(err)), -ENODEV);
	assert_int_equal(cni_vf_netdev(VF, name, err, sizeof(err)), 0);
	assert_string_equal(name, "ib0v1");
	assert_int_equal(cni_vf_rdma_dev(VF, rdma, sizeof(rdma), err, sizeof(err)), 0);
	assert_string_equal(rdma, "mlx5_0_11");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reread_sees_rebind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reread_without_pf, setup, teardown),
	};

	return cmocka_run_group_tests_name("cni_vf", tests, NULL, NULL);
}
