/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: RDMA devices and network namespaces over RDMA netlink
 * (NETLINK_RDMA, RDMA_NL_NLDEV; uapi rdma/rdma_netlink.h; what iproute2's
 * `rdma system` and `rdma dev set DEV netns NS` send).
 *
 * A device can only change netns when the RDMA subsystem is in exclusive
 * mode (`rdma system set netns exclusive`, or ib_core netns_mode=0); the
 * kernel answers EOPNOTSUPP in shared mode or when the driver cannot move
 * (only mlx4/mlx5/irdma can). Moving a device resets its uverbs contexts and
 * re-creates its ULP netdevs (IPoIB) in the netns the device leaves.
 */
#ifndef IBVF_CNI_RDMA_H
#define IBVF_CNI_RDMA_H

#include <stdbool.h>
#include <stddef.h>

#include "cni_netns.h"

/**
 * cni_rdma_netns_exclusive() - read the RDMA netns mode (RDMA_NLDEV_CMD_SYS_GET,
 * RDMA_NLDEV_SYS_ATTR_NETNS_MODE: 0 exclusive, 1 shared).
 * Return: 0 with *@exclusive set, or -errno (e.g. -EPROTONOSUPPORT without
 * an RDMA core in the kernel).
 */
int cni_rdma_netns_exclusive(bool *exclusive, char *err, size_t errlen);

/**
 * cni_rdma_dev_move() - move the RDMA device @dev, visible in @from, into
 * @to (RDMA_NLDEV_CMD_SET with RDMA_NLDEV_ATTR_DEV_INDEX and
 * RDMA_NLDEV_NET_NS_FD). Return: 0; -ENODEV when @from has no @dev;
 * -EOPNOTSUPP (shared mode or driver cannot move); other -errno.
 */
int cni_rdma_dev_move(struct cni_ns *from, const char *dev, struct cni_ns *to, char *err,
		      size_t errlen);

/** cni_rdma_dev_visible() - 1 when @ns sees the RDMA device @dev, 0 when not, or -errno. */
int cni_rdma_dev_visible(struct cni_ns *ns, const char *dev, char *err, size_t errlen);

#endif /* IBVF_CNI_RDMA_H */
