// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the RTM_NEWLINK read-back parser (daemon/vf/vf_netlink.c
 * ibvf_nl_parse_link()), which decodes IFLA_VFINFO_LIST / IFLA_VF_INFO
 * nests with the VF GUIDs the kernel reports.
 *
 * Input: one netlink message; its nlmsg_len is forced to the input size, as
 * libnl hands the parser only messages whose length fits the datagram.
 * Invariants: success gives as many VFs as IFLA_NUM_VF says (when both are
 * present);
 * failure frees everything and says why. ASan/UBSan catch reads outside
 * the message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "err.h"
#include "vf_netlink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what, const char *err)
{
	if (!cond) {
		fprintf(stderr, "fuzz_nl_link: invariant broken: %s (%s)\n", what, err ? err : "");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[IBVF_ERR_LEN] = "";
	struct ibvf_nl_link l;
	struct nlmsghdr *nlh;
	int ret;

	if (size < sizeof(*nlh) || size > 65536)
		return 0;
	/* exactly @size bytes, 4-byte aligned as netlink messages are */
	nlh = malloc(size);
	if (!nlh)
		return 0;
	memcpy(nlh, data, size);
	nlh->nlmsg_len = (uint32_t)size;
	ret = ibvf_nl_parse_link(nlh, &l, err, sizeof(err));
	if (ret) {
		must(err[0] != 0, "failure without a message", NULL);
		must(l.vfs == NULL && l.n_vfs == 0, "failure left VFs behind", err);
	} else {
		/* NUM_VF without a list is fine: a driver without ndo_get_vf_config */
		must(l.num_vf < 0 || !l.n_vfs || (size_t)l.num_vf == l.n_vfs,
		     "IFLA_NUM_VF mismatch", NULL);
		must(l.n_vfs == 0 || l.vfs != NULL, "VFs without an array", NULL);
	}
	ibvf_nl_link_free(&l);
	free(nlh);
	return 0;
}
