// SPDX-License-Identifier: MIT
/* cmocka tests of vf_inventory.c against fake sysfs trees built here. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "vf_driver.h"
#include "vf_inventory.h"
#include "vf_test_util.h"

static int setup(void **state)
{
	*state = vt_root_new();
	return 0;
}

static int teardown(void **state)
{
	vt_root_free(*state);
	return 0;
}

static void test_one_pf_four_vfs(void **state)
{
	const char *root = *state;
	struct ibvf_inventory *inv;
	const struct ibvf_pf_info *pf;
	const struct ibvf_vf_info *vf;
	struct ibvf_vf_info one;
	char err[IBVF_ERR_LEN];

	assert_int_equal(vt_add_pf(root, "0000:03:00.0", "ib0", 4, "mlx5_0", 4, NULL), 0);
	assert_int_equal(ibvf_inventory_scan(root, &inv, err, sizeof(err)), 0);
	assert_int_equal(inv->n_pfs, 1);
	pf = &inv->pfs[0];
	assert_string_equal(pf->pci, "0000:03:00.0");
	assert_string_equal(pf->netdev, "ib0");
	assert_int_equal(pf->ifindex, 4);
	assert_string_equal(pf->rdma_dev, "mlx5_0");
	assert_string_equal(pf->driver, "mlx5_core");
	assert_int_equal(pf->num_vfs, 4);
	assert_int_equal(pf->total_vfs, 16);
	assert_int_equal(pf->n_vfs, 4);
	for (int i = 0; i < 4; i++) {
		char pci[32], nd[16];

		snprintf(pci, sizeof(pci), "0000:03:00.%d", i + 2);
		snprintf(nd, sizeof(nd), "ib0v%d", i);
		assert_int_equal(pf->vfs[i].index, i);
		assert_string_equal(pf->vfs[i].pci, pci);
		assert_string_equal(pf->vfs[i].netdev, nd);
		assert_int_equal(pf->vfs[i].ifindex, 5 + i);
		assert_string_equal(pf->vfs[i].driver, "mlx5_core");
		assert_string_equal(pf->vfs[i].pf_netdev, "ib0");
		assert_int_equal(pf->vfs[i].pf_ifindex, 4);
	}
	/* lookups by PCI address (Multus deviceID), netdev and RDMA device */
	vf = ibvf_inventory_find_vf_pci(inv, "0000:03:00.4");
	assert_non_null(vf);
	assert_int_equal(vf->index, 2);
	assert_ptr_equal(ibvf_inventory_find_vf_pci(inv, "0000:03:00.4"),
			 ibvf_inventory_find_vf_netdev(inv, "ib0v2"));
	assert_ptr_equal(vf, ibvf_inventory_find_vf_rdma(inv, "mlx5_0_12"));
	assert_null(ibvf_inventory_find_vf_pci(inv, "0000:03:00.0")); /* the PF */
	assert_ptr_equal(ibvf_inventory_find_pf(inv, "ib0"), pf);
	assert_ptr_equal(ibvf_inventory_find_pf(inv, "mlx5_0"), pf);
	assert_ptr_equal(ibvf_inventory_find_pf(inv, "0000:03:00.0"), pf);
	assert_null(ibvf_inventory_find_pf(inv, "ib9"));
	ibvf_inventory_free(inv);

	/* direct lookup */
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.5", &one, err, sizeof(err)), 0);
	assert_int_equal(one.index, 3);
	assert_string_equal(one.netdev, "ib0v3");
	assert_string_equal(one.rdma_dev, "mlx5_0_13");
	assert_string_equal(one.pf_pci, "0000:03:00.0");
	assert_string_equal(one.pf_driver, "mlx5_core");
	/* by PF (netdev, RDMA device or PCI) + VF index */
	assert_int_equal(ibvf_vf_lookup_index(root, "ib0", 1, &one, err, sizeof(err)), 0);
	assert_string_equal(one.pci, "0000:03:00.3");
	assert_int_equal(ibvf_vf_lookup_index(root, "mlx5_0", 3, &one, err, sizeof(err)), 0);
	assert_string_equal(one.pci, "0000:03:00.5");
	assert_int_equal(ibvf_vf_lookup_index(root, "0000:03:00.0", 0, &one, err, sizeof(err)), 0);
	assert_string_equal(one.pci, "0000:03:00.2");
	assert_int_equal(ibvf_vf_lookup_index(root, "ib0", 4, &one, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "has no VF 4"));
	assert_int_equal(ibvf_vf_lookup_index(root, "ib7", 0, &one, err, sizeof(err)), -ENODEV);
	assert_int_equal(ibvf_vf_lookup_index(root, "../x", 0, &one, err, sizeof(err)), -EINVAL);
}

static void test_two_pfs(void **state)
{
	const char *root = *state;
	struct ibvf_inventory *inv;
	const struct ibvf_vf_info *vf;
	char err[IBVF_ERR_LEN];

	/* created in reverse order: the scan sorts PFs by PCI address */
	assert_int_equal(vt_add_pf(root, "0000:8a:00.0", "ib1", 20, "mlx5_1", 2, NULL), 0);
	assert_int_equal(vt_add_pf(root, "0000:03:00.0", "ib0", 4, "mlx5_0", 3, NULL), 0);
	assert_int_equal(ibvf_inventory_scan(root, &inv, err, sizeof(err)), 0);
	assert_int_equal(inv->n_pfs, 2);
	assert_string_equal(inv->pfs[0].netdev, "ib0");
	assert_int_equal(inv->pfs[0].n_vfs, 3);
	assert_string_equal(inv->pfs[1].netdev, "ib1");
	assert_int_equal(inv->pfs[1].n_vfs, 2);
	vf = ibvf_inventory_find_vf_pci(inv, "0000:8A:00.3"); /* hex case does not matter */
	assert_non_null(vf);
	assert_int_equal(vf->index, 1);
	assert_string_equal(vf->pf_netdev, "ib1");
	assert_int_equal(vf->pf_ifindex, 20);
	assert_string_equal(vf->netdev, "ib1v1");
	vf = ibvf_inventory_find_vf_netdev(inv, "ib0v2");
	assert_non_null(vf);
	assert_string_equal(vf->pf_pci, "0000:03:00.0");
	ibvf_inventory_free(inv);
	{
		struct ibvf_vf_info one;

		assert_int_equal(ibvf_vf_lookup(root, "0000:8A:00.2", &one, err, sizeof(err)), 0);
		assert_string_equal(one.pci, "0000:8a:00.2");
		assert_string_equal(one.pf_netdev, "ib1");
	}
}

static void test_vf_bound_to_vfio(void **state)
{
	const char *root = *state;
	struct ibvf_fake_vf vfs[2] = {
		{.driver = "mlx5_core", .netdev = "ib0v0", .ifindex = 11, .rdma_dev = "mlx5_2"},
		{.driver = "vfio-pci"},
	};
	struct ibvf_inventory *inv;
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN];

	assert_int_equal(vt_add_pf(root, "0000:03:00.0", "ib0", 4, "mlx5_0", 2, vfs), 0);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.3", &vf, err, sizeof(err)), 0);
	assert_string_equal(vf.driver, "vfio-pci");
	assert_string_equal(vf.netdev, "");
	assert_int_equal(vf.ifindex, 0);
	assert_string_equal(vf.rdma_dev, "");
	assert_int_equal(ibvf_inventory_scan(root, &inv, err, sizeof(err)), 0);
	assert_int_equal(inv->pfs[0].n_vfs, 2);
	assert_string_equal(inv->pfs[0].vfs[1].driver, "vfio-pci");
	ibvf_inventory_free(inv);
}

static unsigned int fake_resolver(const char *name)
{
	/* the kernel answers if_nametoindex() for an altname with the main ifindex */
	return !strcmp(name, "enp4s0f0v3alt") ? 41 : 0;
}

static void test_renamed_and_altnames(void **state)
{
	const char *root = *state;
	struct ibvf_fake_vf vfs[4] = {
		{.driver = "mlx5_core",
		 .netdev = "ibp4s0f0v0",
		 .ifindex = 38,
		 .rdma_dev = "mlx5_4"},
		{.driver = "mlx5_core",
		 .netdev = "ibp4s0f0v1",
		 .ifindex = 39,
		 .rdma_dev = "mlx5_5"},
		{.driver = "mlx5_core",
		 .netdev = "ibp4s0f0v2",
		 .ifindex = 40,
		 .rdma_dev = "mlx5_6"},
		{.driver = "mlx5_core",
		 .netdev = "ibp4s0f0v3",
		 .ifindex = 41,
		 .rdma_dev = "mlx5_7",
		 .altname = "enp4s0f0v3alt"},
	};
	struct ibvf_inventory *inv;
	const struct ibvf_vf_info *vf;
	char err[IBVF_ERR_LEN];

	assert_int_equal(vt_add_pf(root, "0000:04:00.0", "ibp4s0f0", 30, "mlx5_0", 4, vfs), 0);
	/* an IPoIB P_Key child interface of the PF must not be taken for the PF netdev */
	assert_int_equal(ibvf_fake_write(root,
					 "devices/pci0000:00/0000:04:00.0/net/ib0.8001/parent",
					 "ibp4s0f0\n"),
			 -ENOENT);
	{
		char p[512];

		snprintf(p, sizeof(p), "%s/devices/pci0000:00/0000:04:00.0/net/a.8001", root);
		assert_int_equal(mkdir(p, 0755), 0);
		assert_int_equal(
			ibvf_fake_write(root, "devices/pci0000:00/0000:04:00.0/net/a.8001/parent",
					"ibp4s0f0\n"),
			0);
		assert_int_equal(ibvf_fake_write(root,
						 "devices/pci0000:00/0000:04:00.0/net/a.8001/type",
						 "32\n"),
				 0);
		assert_int_equal(
			ibvf_fake_write(root, "devices/pci0000:00/0000:04:00.0/net/a.8001/ifindex",
					"2\n"),
			0);
	}
	assert_int_equal(ibvf_inventory_scan(root, &inv, err, sizeof(err)), 0);
	assert_string_equal(inv->pfs[0].netdev, "ibp4s0f0");
	inv->resolve = fake_resolver;
	vf = ibvf_inventory_find_vf_netdev(inv, "ibp4s0f0v3");
	assert_non_null(vf);
	assert_ptr_equal(ibvf_inventory_find_vf_netdev(inv, "enp4s0f0v3alt"), vf);
	assert_null(ibvf_inventory_find_vf_netdev(inv, "nosuchname"));
	assert_ptr_equal(ibvf_inventory_find_vf_rdma(inv, "mlx5_7"), vf);
	ibvf_inventory_free(inv);
}

static void test_non_hca_and_no_ipoib(void **state)
{
	const char *root = *state;
	struct ibvf_fake_pf eth = {.pci = "0000:05:00.0",
				   .netdev = "enp5s0f0",
				   .ifindex = 50,
				   .netdev_type = 1,
				   .driver = "ice",
				   .total_vfs = 8,
				   .num_vfs = 1};
	struct ibvf_inventory *inv;
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN];

	/* an Ethernet SR-IOV NIC is not an HCA: not listed */
	assert_int_equal(ibvf_fake_add_pf(root, &eth, NULL), 0);
	/* an HCA PF whose IPoIB netdev is absent (ib_ipoib not loaded) is listed */
	assert_int_equal(vt_add_pf(root, "0000:03:00.0", NULL, 0, "mlx5_0", 2, NULL), 0);
	assert_int_equal(ibvf_inventory_scan(root, &inv, err, sizeof(err)), 0);
	assert_int_equal(inv->n_pfs, 1);
	assert_string_equal(inv->pfs[0].pci, "0000:03:00.0");
	assert_string_equal(inv->pfs[0].netdev, "");
	ibvf_inventory_free(inv);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.2", &vf, err, sizeof(err)), 0);
	assert_string_equal(vf.pf_netdev, "");
	assert_int_equal(vf.pf_ifindex, 0);
}

static void test_bad_addresses(void **state)
{
	const char *root = *state;
	static const char *const bad[] = {"03:00.2",
					  "0000:03:00.8",
					  "0000:03:20.1",
					  "zzzz:03:00.2",
					  "0000:03:00.2x",
					  "0000-03-00.2",
					  "",
					  "0000:3:00.2",
					  NULL};
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN];

	assert_int_equal(vt_add_pf(root, "0000:03:00.0", "ib0", 4, "mlx5_0", 2, NULL), 0);
	for (const char *const *b = bad; *b; b++) {
		assert_int_equal(ibvf_vf_lookup(root, *b, &vf, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "is not a PCI address"));
	}
	assert_int_equal(ibvf_pci_addr_valid("10000:03:00.2", err, sizeof(err)), 0);
	/* no such device */
	assert_int_equal(ibvf_vf_lookup(root, "0000:09:00.2", &vf, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "no PCI device 0000:09:00.2"));
	/* the PF itself */
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.0", &vf, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is an SR-IOV PF, not a VF"));
}

static void test_not_a_vf_and_not_sriov(void **state)
{
	const char *root = *state;
	struct ibvf_fake_pf plain = {.pci = "0000:00:1f.0", .driver = "lpc_ich"};
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN], p[512];

	assert_int_equal(ibvf_fake_add_pf(root, &plain, NULL), 0);
	/* a device with neither physfn nor SR-IOV capability */
	snprintf(p, sizeof(p), "%s/devices/pci0000:00/0000:00:1f.0/sriov_totalvfs", root);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(ibvf_vf_lookup(root, "0000:00:1f.0", &vf, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is not an SR-IOV VF"));
	/* a PF whose sriov_numvfs went to 0 while a VF directory is still seen */
	assert_int_equal(vt_add_pf(root, "0000:03:00.0", "ib0", 4, "mlx5_0", 2, NULL), 0);
	assert_int_equal(ibvf_fake_set_numvfs(root, "0000:03:00.0", 0), 0);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.2", &vf, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "not in SR-IOV mode"));
	assert_int_equal(ibvf_vf_lookup_index(root, "ib0", 0, &vf, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "not in SR-IOV mode"));
}

/*
 * A hostile fake tree: FIFOs for attribute files (a scan used to block for
 * ever in fopen()), dangling and looping virtfn links, an absurd
 * sriov_numvfs. The scan finishes and reports what it can.
 */
static void test_hostile_tree(void **state)
{
	const char *root = *state;
	struct ibvf_inventory *inv;
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN], p[640], d[512];

	assert_int_equal(vt_add_pf(root, "0000:03:00.0", "ib0", 4, "mlx5_0", 2, NULL), 0);
	snprintf(d, sizeof(d), "%s/devices/pci0000:00/0000:03:00.0", root);
	snprintf(p, sizeof(p), "%s/sriov_totalvfs", d);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/net/ib0/type", d);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/devices/pci0000:00/0000:03:00.2/net/ib0v0/ifindex", root);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/virtfn7", d);
	assert_int_equal(symlink("../0000:03:09.9", p), 0); /* dangling */
	snprintf(p, sizeof(p), "%s/virtfn8", d);
	assert_int_equal(symlink("virtfn8", p), 0); /* a loop */
	snprintf(p, sizeof(p), "%s/sriov_numvfs", d);
	assert_int_equal(unlink(p), 0);
	{
		FILE *f = fopen(p, "w");

		assert_non_null(f);
		fputs("99999999999999999999\n", f);
		fclose(f);
	}
	alarm(20);
	assert_int_equal(ibvf_inventory_scan(root, &inv, err, sizeof(err)), 0);
	assert_int_equal(inv->n_pfs, 1);
	assert_int_equal(inv->pfs[0].num_vfs, 0); /* unreadable: not in SR-IOV mode */
	ibvf_inventory_free(inv);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.2", &vf, err, sizeof(err)), -ENODEV);
	alarm(0);
}

/*
 * The driver's unbind/bind files as FIFOs nobody reads (a fake tree whose
 * "kernel" is gone): writing them used to block for ever in open(2). Now
 * the rebind fails at once with ENXIO, naming the file.
 */
static void test_rebind_fifo(void **state)
{
	const char *root = *state;
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN], p[640];

	assert_int_equal(vt_add_pf(root, "0000:03:00.0", "ib0", 4, "mlx5_0", 2, NULL), 0);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.2", &vf, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/bus/pci/drivers/mlx5_core/unbind", root);
	unlink(p);
	assert_int_equal(mkfifo(p, 0600), 0);
	alarm(20);
	assert_int_equal(ibvf_vf_sysfs_rebind(root, &vf, NULL, 500, err, sizeof(err)), -ENXIO);
	assert_non_null(strstr(err, "unbinding VF 0000:03:00.2"));
	assert_int_equal(ibvf_fake_vf_unbind(root, "0000:03:00.2"), 0);
	snprintf(p, sizeof(p), "%s/bus/pci/drivers/mlx5_core/bind", root);
	unlink(p);
	assert_int_equal(mkfifo(p, 0600), 0);
	assert_int_equal(ibvf_vf_sysfs_rebind(root, &vf, "mlx5_core", 500, err, sizeof(err)),
			 -ENXIO);
	assert_non_null(strstr(err, "binding VF 0000:03:00.2 to mlx5_core"));
	alarm(0);
}

static void test_fake_unbind_bind_remove(void **state)
{
	const char *root = *state;
	struct ibvf_fake_vf nv = {
		.driver = "mlx5_core", .netdev = "ib0v0r1", .ifindex = 77, .rdma_dev = "mlx5_9"};
	struct ibvf_inventory *inv;
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN], p[512];

	assert_int_equal(vt_add_pf(root, "0000:03:00.0", "ib0", 4, "mlx5_0", 2, NULL), 0);
	assert_int_equal(ibvf_fake_vf_unbind(root, "0000:03:00.2"), 0);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.2", &vf, err, sizeof(err)), 0);
	assert_string_equal(vf.driver, "");
	assert_string_equal(vf.netdev, "");
	assert_string_equal(vf.rdma_dev, "");
	snprintf(p, sizeof(p), "%s/class/net/ib0v0", root);
	assert_int_not_equal(access(p, F_OK), 0);
	assert_int_equal(ibvf_fake_vf_bind(root, "0000:03:00.2", &nv), 0);
	assert_int_equal(ibvf_vf_lookup(root, "0000:03:00.2", &vf, err, sizeof(err)), 0);
	assert_string_equal(vf.netdev, "ib0v0r1");
	assert_int_equal(vf.ifindex, 77);
	assert_string_equal(vf.rdma_dev, "mlx5_9");
	snprintf(p, sizeof(p), "%s/class/net/ib0v0r1/device/physfn", root);
	assert_int_equal(access(p, F_OK), 0); /* relative links resolve */
	assert_int_equal(ibvf_fake_remove_dev(root, "0000:03:00.3"), 0);
	assert_false(ibvf_pci_dev_exists(root, "0000:03:00.3"));
	assert_int_equal(ibvf_inventory_scan(root, &inv, err, sizeof(err)), 0);
	assert_int_equal(inv->pfs[0].n_vfs, 1);
	ibvf_inventory_free(inv);
	assert_int_equal(ibvf_inventory_scan("/nonexistent-ibvf", &inv, err, sizeof(err)), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_pf_four_vfs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_pfs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vf_bound_to_vfio, setup, teardown),
		cmocka_unit_test_setup_teardown(test_renamed_and_altnames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_non_hca_and_no_ipoib, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_addresses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_vf_and_not_sriov, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fake_unbind_bind_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rebind_fifo, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
