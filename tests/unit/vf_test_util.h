/* SPDX-License-Identifier: MIT */
/* Shared helpers of the VF unit tests: fake sysfs trees built in the test. */
#ifndef IBVF_VF_TEST_UTIL_H
#define IBVF_VF_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakesysfs.h"

/* A fresh temporary sysfs root; the caller frees it with vt_root_free(). */
static inline char *vt_root_new(void)
{
	char *d = strdup("/tmp/ibvf-ut-sysfs.XXXXXX");

	if (!d || !mkdtemp(d)) {
		perror("mkdtemp");
		abort();
	}
	return d;
}

static inline void vt_root_free(char *root)
{
	if (root)
		ibvf_fake_rm_rf(root);
	free(root);
}

/*
 * PF @pci with IPoIB netdev @netdev (ifindex @ifindex) and RDMA device
 * @rdma, driver mlx5_core, and @n VFs named "<netdev>v<i>" (ifindex
 * @ifindex + 1 + i) with RDMA devices "<rdma>v<i>" ... unless @vfs is given.
 */
static inline int vt_add_pf(const char *root, const char *pci, const char *netdev, int ifindex,
			    const char *rdma, int n, const struct ibvf_fake_vf *vfs)
{
	struct ibvf_fake_pf pf = {.pci = pci,
				  .netdev = netdev,
				  .ifindex = ifindex,
				  .rdma_dev = rdma,
				  .driver = "mlx5_core",
				  .total_vfs = 16,
				  .num_vfs = n};
	struct ibvf_fake_vf def[64];
	char names[64][2][64];

	if (!vfs) {
		for (int i = 0; i < n && i < 64; i++) {
			snprintf(names[i][0], sizeof(names[i][0]), "%sv%d", netdev ? netdev : "ib",
				 i);
			snprintf(names[i][1], sizeof(names[i][1]), "%s_%d", rdma ? rdma : "mlx5",
				 i + 10);
			def[i] = (struct ibvf_fake_vf){.driver = "mlx5_core",
						       .netdev = names[i][0],
						       .ifindex = ifindex + 1 + i,
						       .rdma_dev = names[i][1]};
		}
		vfs = def;
	}
	return ibvf_fake_add_pf(root, &pf, vfs);
}

#endif /* IBVF_VF_TEST_UTIL_H */
