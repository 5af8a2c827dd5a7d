// SPDX-License-Identifier: MIT
/*
 * bench_vf - costs of the VF code paths that run on every attach and every
 * `ibvfctl vf list`: parsing a 64-VF RTM_NEWLINK read-back, scanning a fake
 * sysfs inventory (4 PFs x 64 VFs), and one VF lookup by PCI address.
 * Prints numbers and ratios; asserts nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "err.h"
#include "fakesysfs.h"
#include "vf_inventory.h"
#include "vf_netlink.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static struct nl_msg *newlink(int n)
{
	struct ifinfomsg ifi = {.ifi_index = 4};
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWLINK, 0);
	struct nlattr *list;

	nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO);
	nla_put_u32(m, IFLA_NUM_VF, (uint32_t)n);
	list = nla_nest_start(m, IFLA_VFINFO_LIST);
	for (int i = 0; i < n; i++) {
		struct ifla_vf_mac mac = {.vf = (uint32_t)i};
		struct ifla_vf_link_state ls = {.vf = (uint32_t)i};
		struct ifla_vf_guid g = {.vf = (uint32_t)i, .guid = 0x0002c90300000000ULL + i};
		struct nlattr *info = nla_nest_start(m, IFLA_VF_INFO);

		nla_put(m, IFLA_VF_MAC, sizeof(mac), &mac);
		nla_put(m, IFLA_VF_LINK_STATE, sizeof(ls), &ls);
		nla_put(m, IFLA_VF_IB_NODE_GUID, sizeof(g), &g);
		nla_put(m, IFLA_VF_IB_PORT_GUID, sizeof(g), &g);
		nla_nest_end(m, info);
	}
	nla_nest_end(m, list);
	return m;
}

int main(void)
{
	char err[IBVF_ERR_LEN], root[] = "/tmp/ibvf-bench-sysfs.XXXXXX";
	struct ibvf_inventory *inv;
	struct ibvf_vf_info vf;
	struct nl_msg *m;
	double t0, parse_us, scan_us, lookup_us;
	const int parse_n = 20000, scan_n = 50, lookup_n = 2000;

	nlmsg_set_default_size(64 * 1024);
	m = newlink(64);
	t0 = now_us();
	for (int i = 0; i < parse_n; i++) {
		struct ibvf_nl_link l;

		if (ibvf_nl_parse_link(nlmsg_hdr(m), &l, err, sizeof(err)))
			return fprintf(stderr, "parse: %s\n", err), 1;
		ibvf_nl_link_free(&l);
	}
	parse_us = (now_us() - t0) / parse_n;
	printf("parse RTM_NEWLINK, 64 VFs (%u bytes): %.2f us/msg, %.3f us/VF\n",
	       nlmsg_hdr(m)->nlmsg_len, parse_us, parse_us / 64);
	nlmsg_free(m);

	if (!mkdtemp(root))
		return 1;
	for (int p = 0; p < 4; p++) {
		struct ibvf_fake_vf vfs[64];
		char names[64][16], rdma[64][16], pci[16], nd[16], pr[16];
		struct ibvf_fake_pf pf = {.pci = pci,
					  .netdev = nd,
					  .ifindex = 10 + p * 100,
					  .rdma_dev = pr,
					  .driver = "mlx5_core",
					  .total_vfs = 64,
					  .num_vfs = 64};

		snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 * (p + 1));
		snprintf(nd, sizeof(nd), "ib%d", p);
		snprintf(pr, sizeof(pr), "mlx5_%d", p);
		for (int i = 0; i < 64; i++) {
			snprintf(names[i], sizeof(names[i]), "ib%dv%d", p, i);
			snprintf(rdma[i], sizeof(rdma[i]), "mlx5_%d", 4 + p * 64 + i);
			vfs[i] = (struct ibvf_fake_vf){.driver = "mlx5_core",
						       .netdev = names[i],
						       .ifindex = 11 + p * 100 + i,
						       .rdma_dev = rdma[i]};
		}
		if (ibvf_fake_add_pf(root, &pf, vfs))
			return fprintf(stderr, "fake tree failed\n"), 1;
	}
	t0 = now_us();
	for (int i = 0; i < scan_n; i++) {
		if (ibvf_inventory_scan(root, &inv, err, sizeof(err)))
			return fprintf(stderr, "scan: %s\n", err), 1;
		ibvf_inventory_free(inv);
	}
	scan_us = (now_us() - t0) / scan_n;
	t0 = now_us();
	for (int i = 0; i < lookup_n; i++)
		if (ibvf_vf_lookup(root, "0000:30:07.7", &vf, err, sizeof(err)))
			return fprintf(stderr, "lookup: %s\n", err), 1;
	lookup_us = (now_us() - t0) / lookup_n;
	printf("inventory scan, 4 PFs x 64 VFs (fake sysfs on tmpfs/disk): %.2f ms/scan, "
	       "%.1f us/VF\n",
	       scan_us / 1000, scan_us / 256);
	printf("VF lookup by PCI address (VF 61 of a 64-VF PF): %.1f us/lookup\n", lookup_us);
	printf("ratio full scan / single lookup: %.0fx\n", scan_us / lookup_us);
	ibvf_fake_rm_rf(root);
	return 0;
}
