// SPDX-License-Identifier: MIT
/*
 * ibvf-fakesysfs - build a fake sysfs tree with an InfiniBand SR-IOV layout
 * for labs and end-to-end demos (README.md next to this file draws it).
 *
 *   ibvf-fakesysfs ROOT add-pf --pci PCI [--netdev NAME] [--ifindex N]
 *                  [--rdma NAME] [--driver NAME] [--vfs N] [--total N]
 *                  [--vf-netdev-prefix P] [--vf-rdma-prefix P] [--vf-rdma-base N]
 *                  [--veth PREFIX]
 *   ibvf-fakesysfs ROOT unbind PCI
 *   ibvf-fakesysfs ROOT bind PCI DRIVER [NETDEV IFINDEX [RDMA]]
 *   ibvf-fakesysfs ROOT remove PCI
 *   ibvf-fakesysfs ROOT veth-down
 *
 * --veth PREFIX makes the PF netdev and every VF netdev a REAL veth interface
 * in the caller's network namespace (PREFIX "pf" and PREFIX "v<i>", peers with
 * a "p" suffix), so a CNI can move them into Pods; their ifindexes go into
 * the tree and ROOT/veths lists them for 'veth-down' (which deletes them by
 * ifindex, so a rename by the ibsim VF driver does not matter).
 * VF i's RDMA device is named P<base+i> (--vf-rdma-prefix, default "mlx5_";
 * --vf-rdma-base, default 2): "--vf-rdma-prefix rxe --vf-rdma-base 0" names
 * them after soft-RoCE devices, so a verbs user finds a real device by them.
 * Exit codes: 0 ok, 1 failure, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/socket.h>

#include "fakesysfs.h"

static int usage(void)
{
	fprintf(stderr,
		"usage: ibvf-fakesysfs ROOT add-pf --pci PCI [--netdev NAME] [--ifindex N] "
		"[--rdma NAME]\n"
		"                      [--driver NAME] [--vfs N] [--total N] "
		"[--vf-netdev-prefix P]\n"
		"                      [--vf-rdma-prefix P] [--vf-rdma-base N] [--veth PREFIX]\n"
		"       ibvf-fakesysfs ROOT unbind PCI | remove PCI | veth-down\n"
		"       ibvf-fakesysfs ROOT bind PCI DRIVER [NETDEV IFINDEX [RDMA]]\n");
	return 2;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "ibvf-fakesysfs: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

/* Create veth @name (peer @name + "p") and record it; return its ifindex or <0. */
static int make_veth(struct nl_sock *sk, const char *root, const char *name)
{
	char peer[IF_NAMESIZE + 2], list[PATH_MAX];
	FILE *f;
	int ret, idx;

	snprintf(peer, sizeof(peer), "%sp", name);
	ret = rtnl_link_veth_add(sk, name, peer, getpid());
	if (ret < 0) {
		fprintf(stderr, "ibvf-fakesysfs: creating veth %s/%s: %s\n", name, peer,
			nl_geterror(ret));
		return -EIO;
	}
	idx = (int)if_nametoindex(name);
	snprintf(list, sizeof(list), "%s/veths", root);
	f = fopen(list, "a");
	if (!f) {
		fprintf(stderr, "ibvf-fakesysfs: %s: %s\n", list, strerror(errno));
		return -EIO;
	}
	fprintf(f, "%d %s\n", idx, name);
	fclose(f);
	return idx;
}

static int add_pf(const char *root, int argc, char **argv)
{
	static const struct option opts[] = {
		{"pci", required_argument, NULL, 'p'},
		{"netdev", required_argument, NULL, 'n'},
		{"ifindex", required_argument, NULL, 'i'},
		{"rdma", required_argument, NULL, 'r'},
		{"driver", required_argument, NULL, 'd'},
		{"vfs", required_argument, NULL, 'v'},
		{"total", required_argument, NULL, 't'},
		{"vf-netdev-prefix", required_argument, NULL, 'N'},
		{"vf-rdma-base", required_argument, NULL, 'R'},
		{"vf-rdma-prefix", required_argument, NULL, 'P'},
		{"veth", required_argument, NULL, 'e'},
		{0},
	};
	struct ibvf_fake_pf pf = {.driver = "mlx5_core", .num_vfs = 4};
	const char *vf_prefix = NULL, *veth = NULL, *rdma_prefix = "mlx5_";
	char names[256][IF_NAMESIZE + 8], rdma[256][32], pfname[IF_NAMESIZE + 8];
	struct ibvf_fake_vf vfs[256];
	struct nl_sock *sk = NULL;
	int c, rdma_base = 2, ret;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pf.pci = optarg;
			break;
		case 'n':
			pf.netdev = optarg;
			break;
		case 'i':
			pf.ifindex = atoi(optarg);
			break;
		case 'r':
			pf.rdma_dev = optarg;
			break;
		case 'd':
			pf.driver = optarg;
			break;
		case 'v':
			pf.num_vfs = atoi(optarg);
			break;
		case 't':
			pf.total_vfs = atoi(optarg);
			break;
		case 'N':
			vf_prefix = optarg;
			break;
		case 'R':
			rdma_base = atoi(optarg);
			break;
		case 'P':
			rdma_prefix = optarg;
			break;
		case 'e':
			veth = optarg;
			break;
		default:
			return usage();
		}
	}
	if (!pf.pci || optind != argc || pf.num_vfs < 0 || pf.num_vfs > 255 ||
	    strlen(rdma_prefix) > 20)
		return usage();
	if (veth && strlen(veth) > IF_NAMESIZE - 1 - 5) {
		fprintf(stderr, "ibvf-fakesysfs: --veth prefix '%s' longer than %d characters\n",
			veth, IF_NAMESIZE - 1 - 5);
		return 2;
	}
	if (pf.total_vfs < pf.num_vfs)
		pf.total_vfs = pf.num_vfs > 8 ? pf.num_vfs : 8;
	if (!pf.rdma_dev)
		pf.rdma_dev = "mlx5_0";
	ret = ibvf_fake_init(root);
	if (ret)
		return die(root, ret);
	if (veth) {
		sk = nl_socket_alloc();
		if (!sk || nl_connect(sk, NETLINK_ROUTE) < 0)
			return die("netlink socket", EIO);
		snprintf(pfname, sizeof(pfname), "%spf", veth);
		pf.netdev = pfname;
		if ((pf.ifindex = make_veth(sk, root, pfname)) <= 0)
			return 1;
	}
	if (!vf_prefix)
		vf_prefix = pf.netdev ? pf.netdev : "ib";
	for (int i = 0; i < pf.num_vfs; i++) {
		vfs[i] = (struct ibvf_fake_vf){.driver = pf.driver};
		if (veth)
			snprintf(names[i], sizeof(names[i]), "%sv%d", veth, i);
		else
			snprintf(names[i], sizeof(names[i]), "%sv%d", vf_prefix, i);
		snprintf(rdma[i], sizeof(rdma[i]), "%s%d", rdma_prefix, rdma_base + i);
		vfs[i].netdev = names[i];
		vfs[i].rdma_dev = rdma[i];
		vfs[i].ifindex = veth ? make_veth(sk, root, names[i]) : pf.ifindex + 1 + i;
		if (vfs[i].ifindex <= 0)
			return 1;
	}
	nl_socket_free(sk);
	ret = ibvf_fake_add_pf(root, &pf, vfs);
	if (ret)
		return die("add-pf", ret);
	for (int i = 0; i < pf.num_vfs; i++) {
		char vf[32];

		ibvf_fake_vf_pci(pf.pci, 0, i, vf, sizeof(vf));
		printf("%s %d %s %d %s\n", vf, i, names[i], vfs[i].ifindex, rdma[i]);
	}
	return 0;
}

static int veth_down(const char *root)
{
	char list[PATH_MAX], name[64];
	struct nl_sock *sk = nl_socket_alloc();
	int idx, fails = 0;
	FILE *f;

	snprintf(list, sizeof(list), "%s/veths", root);
	f = fopen(list, "r");
	if (!f)
		return 0; /* nothing was created */
	if (!sk || nl_connect(sk, NETLINK_ROUTE) < 0)
		return die("netlink socket", EIO);
	while (fscanf(f, "%d %63s", &idx, name) == 2) {
		struct rtnl_link *l = rtnl_link_alloc();
		int ret;

		rtnl_link_set_ifindex(l, idx);
		ret = rtnl_link_delete(sk, l);
		rtnl_link_put(l);
		/* the peer of an already deleted pair: gone with it */
		if (ret < 0 && ret != -NLE_NODEV && ret != -NLE_OBJ_NOTFOUND) {
			fprintf(stderr, "ibvf-fakesysfs: deleting %s (ifindex %d): %s\n", name, idx,
				nl_geterror(ret));
			fails++;
		}
	}
	fclose(f);
	nl_socket_free(sk);
	unlink(list);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *root, *cmd;
	int ret;

	if (argc < 3)
		return usage();
	root = argv[1];
	cmd = argv[2];
	if (!strcmp(cmd, "add-pf"))
		return add_pf(root, argc - 2, argv + 2);
	if (!strcmp(cmd, "veth-down"))
		return veth_down(root);
	if (!strcmp(cmd, "unbind") && argc == 4) {
		ret = ibvf_fake_vf_unbind(root, argv[3]);
		return ret ? die("unbind", ret) : 0;
	}
	if (!strcmp(cmd, "remove") && argc == 4) {
		ret = ibvf_fake_remove_dev(root, argv[3]);
		return ret ? die("remove", ret) : 0;
	}
	if (!strcmp(cmd, "bind") && argc >= 5 && argc <= 8 && argc != 6) {
		struct ibvf_fake_vf v = {.driver = argv[4]};

		if (argc >= 7) {
			v.netdev = argv[5];
			v.ifindex = atoi(argv[6]);
		}
		if (argc == 8)
			v.rdma_dev = argv[7];
		ret = ibvf_fake_vf_bind(root, argv[3], &v);
		return ret ? die("bind", ret) : 0;
	}
	return usage();
}
