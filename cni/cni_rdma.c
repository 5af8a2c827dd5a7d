// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: RDMA netns mode and RDMA device moves over RDMA netlink. */
#include "cni_rdma.h"

#include <errno.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <netlink/attr.h>
#include <netlink/msg.h>

#include "cni_nl.h"
#include "err.h"

static struct nl_msg *rdma_msg(int cmd, int flags)
{
	return nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd), NLM_F_REQUEST | flags);
}

static int parse_mode(struct nl_msg *m, void *arg)
{
	static struct nla_policy policy[RDMA_NLDEV_ATTR_MAX] = {
		[RDMA_NLDEV_SYS_ATTR_NETNS_MODE] = {.type = NLA_U8},
	};
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	int *mode = arg, ret;

	ret = nlmsg_parse(nlmsg_hdr(m), 0, tb, RDMA_NLDEV_ATTR_MAX - 1, policy);
	if (ret < 0)
		return cni_nlerr_to_errno(ret);
	if (!tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE])
		return -EPROTO;
	*mode = nla_get_u8(tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]);
	return 0;
}

int cni_rdma_netns_exclusive(bool *exclusive, char *err, size_t errlen)
{
	struct nl_sock *sk = cni_nl_socket(NETLINK_RDMA, -1, err, errlen);
	struct nl_msg *msg;
	int mode = -1, ret;

	if (!sk)
		return -EPROTONOSUPPORT;
	msg = rdma_msg(RDMA_NLDEV_CMD_SYS_GET, 0);
	ret = msg ? cni_nl_talk(sk, msg, parse_mode, &mode) : -ENOMEM;
	nlmsg_free(msg);
	nl_socket_free(sk);
	if (!ret && mode < 0)
		ret = -EPROTO;
	if (ret)
		return ibvf_errf(err, errlen, ret, "reading the RDMA netns mode (rdma system): %s",
				 strerror(-ret));
	*exclusive = mode == 0;
	return 0;
}

struct find {
	const char *name;
	int64_t index;
};

static int parse_dev(struct nl_msg *m, void *arg)
{
	static struct nla_policy policy[RDMA_NLDEV_ATTR_MAX] = {
		[RDMA_NLDEV_ATTR_DEV_INDEX] = {.type = NLA_U32},
		[RDMA_NLDEV_ATTR_DEV_NAME] = {.type = NLA_STRING},
	};
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	struct find *f = arg;
	char name[64];
	int ret;

	ret = nlmsg_parse(nlmsg_hdr(m), 0, tb, RDMA_NLDEV_ATTR_MAX - 1, policy);
	if (ret < 0)
		return cni_nlerr_to_errno(ret);
	if (!tb[RDMA_NLDEV_ATTR_DEV_INDEX] || !tb[RDMA_NLDEV_ATTR_DEV_NAME])
		return -EPROTO; /* nldev_get_dumpit fills both for every device */
	nla_strlcpy(name, tb[RDMA_NLDEV_ATTR_DEV_NAME], sizeof(name));
	if (!strcmp(name, f->name))
		f->index = nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
	return 0;
}

/* The index of @dev among the devices @sk's netns sees, or -ENODEV. */
static int dev_index(struct nl_sock *sk, const char *dev, uint32_t *index)
{
	struct find f = {.name = dev, .index = -1};
	struct nl_msg *msg = rdma_msg(RDMA_NLDEV_CMD_GET, NLM_F_DUMP);
	int ret = msg ? cni_nl_talk(sk, msg, parse_dev, &f) : -ENOMEM;

	nlmsg_free(msg);
	if (ret)
		return ret;
	if (f.index < 0)
		return -ENODEV;
	*index = (uint32_t)f.index;
	return 0;
}

int cni_rdma_dev_visible(struct cni_ns *ns, const char *dev, char *err, size_t errlen)
{
	struct nl_sock *sk = cni_nl_socket(NETLINK_RDMA, ns->fd, err, errlen);
	uint32_t idx;
	int ret;

	if (!sk)
		return -EPROTONOSUPPORT;
	ret = dev_index(sk, dev, &idx);
	nl_socket_free(sk);
	if (ret == -ENODEV)
		return 0;
	if (ret)
		return ibvf_errf(err, errlen, ret, "listing RDMA devices in netns %s: %s", ns->path,
				 strerror(-ret));
	return 1;
}

int cni_rdma_dev_move(struct cni_ns *from, const char *dev, struct cni_ns *to, char *err,
		      size_t errlen)
{
	struct nl_sock *sk = cni_nl_socket(NETLINK_RDMA, from->fd, err, errlen);
	struct nl_msg *msg = NULL;
	uint32_t idx;
	int ret;

	if (!sk)
		return -EPROTONOSUPPORT;
	ret = dev_index(sk, dev, &idx);
	if (ret == -ENODEV) {
		nl_socket_free(sk);
		return ibvf_errf(err, errlen, ret, "RDMA device %s is not in netns %s", dev,
				 from->path);
	}
	if (!ret) {
		msg = rdma_msg(RDMA_NLDEV_CMD_SET, 0);
		if (!msg || nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX, idx) < 0 ||
		    nla_put_u32(msg, RDMA_NLDEV_NET_NS_FD, (uint32_t)to->fd) < 0)
			ret = -ENOMEM;
		else
			ret = cni_nl_talk(sk, msg, NULL, NULL);
	}
	nlmsg_free(msg);
	nl_socket_free(sk);
	if (ret == -EOPNOTSUPP)
		return ibvf_errf(err, errlen, ret,
				 "moving RDMA device %s to netns %s: not "
				 "supported (RDMA netns mode shared, or the driver cannot move "
				 "devices)",
				 dev, to->path);
	if (ret)
		return ibvf_errf(err, errlen, ret, "moving RDMA device %s from netns %s to %s: %s",
				 dev, from->path, to->path, strerror(-ret));
	return 0;
}
