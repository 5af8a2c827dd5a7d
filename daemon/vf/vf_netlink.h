/* SPDX-License-Identifier: MIT */
/*
 * rtnetlink for SR-IOV VFs of an IB PF: set a VF's node or port GUID and its
 * link state through the PF's IPoIB netdev, and read them back.
 *
 * Messages (uapi linux/if_link.h, linux/rtnetlink.h):
 *   RTM_SETLINK ifinfomsg{AF_UNSPEC, ifi_index = PF} +
 *     IFLA_VFINFO_LIST { IFLA_VF_INFO { IFLA_VF_IB_NODE_GUID  struct ifla_vf_guid } }
 *   and a SEPARATE message for IFLA_VF_IB_PORT_GUID: the kernel's do_setvfinfo()
 *   (net/core/rtnetlink.c) returns after the first GUID attribute of a nest,
 *   so a nest carrying both silently drops the port GUID. One message per
 *   GUID also tells the caller exactly which of the two the kernel applied.
 *   struct ifla_vf_guid { __u32 vf; __u64 guid; } is 16 bytes (padding after
 *   vf); guid is a HOST-order u64 whose value reads like the GUID string
 *   ("00:11:..:77" = 0x0011..77), as iproute2's get_guid() builds it.
 *   RTM_GETLINK ifinfomsg{ifi_index} + IFLA_EXT_MASK = RTEXT_FILTER_VF |
 *   RTEXT_FILTER_SKIP_STATS: the reply carries IFLA_NUM_VF and (when VFs
 *   exist) IFLA_VFINFO_LIST; the kernel adds both GUID attributes only when
 *   the driver's ndo_get_vf_guid succeeds (Linux >= 5.5).
 *
 * Messages are built with libnl-route-3; replies are parsed here with a
 * policy because libnl (3.7 .. 3.12) ignores the GUID attributes. The socket
 * has NETLINK_EXT_ACK on: the kernel's reason text is put into @err.
 */
#ifndef IBVF_VF_NETLINK_H
#define IBVF_VF_NETLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nl_msg;
struct nlmsghdr;

/** Receive buffer of the first read-back attempt and of the retry, bytes. */
#define IBVF_NL_BUF_FIRST (32u * 1024u)
#define IBVF_NL_BUF_RETRY (256u * 1024u)

/** One VF of a parsed RTM_NEWLINK. GUIDs are host-order u64s. */
struct ibvf_nl_vf {
	uint32_t vf;	     /* VF index */
	uint32_t link_state; /* IFLA_VF_LINK_STATE_AUTO/ENABLE/DISABLE */
	bool has_node_guid, has_port_guid;
	uint64_t node_guid, port_guid;
};

/** A parsed RTM_NEWLINK (only what VF programming needs). */
struct ibvf_nl_link {
	int ifindex;
	int num_vf;		/* IFLA_NUM_VF, -1 when absent */
	struct ibvf_nl_vf *vfs; /* malloc'd, in message order */
	size_t n_vfs;
};

/** Called for each reply message; a negative return aborts the exchange. */
typedef int (*ibvf_nl_msg_cb)(const struct nlmsghdr *nlh, void *arg);

/**
 * Transport seam: send @req and pass each reply to @cb until the exchange
 * ends (ACK, NLMSG_DONE, or the single reply of a non-dump request).
 * @bufsize: receive buffer size in bytes (the kernel sizes dump replies by
 * the largest buffer the socket has received into).
 * Return: 0, or the negative errno of the kernel's NLMSG_ERROR with its
 * extended-ACK text (if any) in @err.
 */
typedef int (*ibvf_nl_xfer_fn)(void *arg, struct nl_msg *req, size_t bufsize, ibvf_nl_msg_cb cb,
			       void *cb_arg, char *err, size_t errlen);

struct ibvf_nl;

/**
 * ibvf_nl_open() - a NETLINK_ROUTE socket (libnl) with NETLINK_EXT_ACK and
 * NETLINK_CAP_ACK on, auto-ACK off (each request asks for what it needs).
 * Return: 0, -ENOMEM, or the socket's errno.
 */
int ibvf_nl_open(struct ibvf_nl **out, char *err, size_t errlen);

/** ibvf_nl_close() - NULL is a no-op. */
void ibvf_nl_close(struct ibvf_nl *nl);

/** ibvf_nl_set_xfer() - replace the transport (tests); @fn NULL restores the socket. */
void ibvf_nl_set_xfer(struct ibvf_nl *nl, ibvf_nl_xfer_fn fn, void *arg);

/**
 * ibvf_nl_build_vf_guid() - RTM_SETLINK (NLM_F_REQUEST|NLM_F_ACK) on PF
 * @ifindex with one IFLA_VF_INFO nest holding one GUID attribute.
 * @attr: IFLA_VF_IB_NODE_GUID or IFLA_VF_IB_PORT_GUID.
 * Return: 0, -EINVAL (bad attr / ifindex / vf), -ENOMEM.
 */
int ibvf_nl_build_vf_guid(int ifindex, uint32_t vf, int attr, uint64_t guid, struct nl_msg **out);

/** ibvf_nl_build_vf_link_state() - as above with IFLA_VF_LINK_STATE (0 auto, 1 enable, 2 disable).
 */
int ibvf_nl_build_vf_link_state(int ifindex, uint32_t vf, uint32_t state, struct nl_msg **out);

/**
 * ibvf_nl_build_getlink() - RTM_GETLINK for @ifindex with IFLA_EXT_MASK
 * RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS; @dump adds NLM_F_DUMP (all links).
 */
int ibvf_nl_build_getlink(int ifindex, bool dump, struct nl_msg **out);

/**
 * ibvf_nl_set_vf_guid() - send ibvf_nl_build_vf_guid() and wait for the ACK.
 * Return: 0 or the kernel's negative errno (-EOPNOTSUPP: the PF's driver has
 * no ndo_set_vf_guid or the netdev is not ARPHRD_INFINIBAND), with the
 * extended-ACK text when the kernel gave one.
 */
int ibvf_nl_set_vf_guid(struct ibvf_nl *nl, int ifindex, uint32_t vf, int attr, uint64_t guid,
			char *err, size_t errlen);

/** ibvf_nl_set_vf_link_state() - as ibvf_nl_set_vf_guid() for IFLA_VF_LINK_STATE. */
int ibvf_nl_set_vf_link_state(struct ibvf_nl *nl, int ifindex, uint32_t vf, uint32_t state,
			      char *err, size_t errlen);

/**
 * ibvf_nl_request() - send any request @req (not freed) and wait for its ACK
 * or error: the path the setters use, for messages built elsewhere (tests,
 * lab tools). Return: 0 or the kernel's negative errno with its text in @err.
 */
int ibvf_nl_request(struct ibvf_nl *nl, struct nl_msg *req, char *err, size_t errlen);

/**
 * ibvf_nl_ifindex_by_name() - RTM_GETLINK with IFLA_ALT_IFNAME @name: the
 * kernel matches main names and alternative names (Linux >= 5.5), which may
 * be up to 127 characters (ALTIFNAMSIZ) and so do not fit if_nametoindex(3).
 * Return: the ifindex (> 0), -ENODEV, -EINVAL (empty or too long name).
 */
int ibvf_nl_ifindex_by_name(struct ibvf_nl *nl, const char *name, char *err, size_t errlen);

/**
 * ibvf_nl_parse_link() - parse one RTM_NEWLINK with policies: every
 * IFLA_VFINFO_LIST entry must be an IFLA_VF_INFO nest carrying IFLA_VF_MAC
 * and IFLA_VF_LINK_STATE (the kernel always sends both) whose vf indexes
 * agree; GUID attributes are optional but, when present, must be a full
 * struct ifla_vf_guid for the same VF.
 * Return: 0, -EBADMSG (malformed; @err says where), -ENOMEM.
 */
int ibvf_nl_parse_link(const struct nlmsghdr *nlh, struct ibvf_nl_link *out, char *err,
		       size_t errlen);

/** ibvf_nl_link_free() - free what ibvf_nl_parse_link() allocated. */
void ibvf_nl_link_free(struct ibvf_nl_link *l);

/**
 * ibvf_nl_read_link() - RTM_GETLINK of PF @ifindex and parse its VFs.
 * A kernel that cannot fit the reply (-EMSGSIZE: before the 2025 fix
 * "rtnetlink: Allocate vfinfo size for VF GUIDs when supported", a PF with
 * many VFs under-sizes it) is asked again with a dump into a larger buffer,
 * which the kernel sizes by the receive buffer instead.
 * Return: 0, -ENODEV (no such ifindex), -EMSGSIZE (still too large), other
 * kernel errnos, -EBADMSG.
 */
int ibvf_nl_read_link(struct ibvf_nl *nl, int ifindex, struct ibvf_nl_link *out, char *err,
		      size_t errlen);

#endif /* IBVF_VF_NETLINK_H */
