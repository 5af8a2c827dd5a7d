/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: netlink plumbing shared by the rtnetlink (cni_netns.c,
 * cni_ipam.c) and RDMA netlink (cni_rdma.c) modules, on top of libnl-3:
 * sockets opened inside a given network namespace, one request/response
 * exchange that returns the kernel's errno, and entering/leaving a netns.
 *
 * The plugin is single-threaded; setns(2) switches the whole process.
 */
#ifndef IBVF_CNI_NL_H
#define IBVF_CNI_NL_H

#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <stddef.h>

/**
 * cni_ns_enter() - switch to the network namespace @fd; *@saved gets an fd of
 * the current one for cni_ns_leave() (outside any other enter: the plugin's
 * own netns fd, kept open until exit). Return: 0 or -errno.
 */
int cni_ns_enter(int fd, int *saved);

/**
 * cni_ns_leave() - switch back to @saved and close it (unless it is the kept
 * fd of the plugin's own netns). Return: 0 or -errno.
 */
int cni_ns_leave(int saved);

/**
 * cni_ns_current() - a new fd (close-on-exec) of the current network
 * namespace, as opening /proc/thread-self/ns/net gives one, the message in
 * @err naming that path. Return: the fd (close it) or -errno.
 */
int cni_ns_current(char *err, size_t errlen);

/**
 * cni_nl_socket() - a connected netlink socket of @protocol (NETLINK_ROUTE,
 * NETLINK_RDMA) created inside the network namespace @netns_fd (-1: the
 * current one); netlink sockets stay bound to the netns they were made in.
 * Return: the socket, or NULL with the reason in @err.
 */
struct nl_sock *cni_nl_socket(int protocol, int netns_fd, char *err, size_t errlen);

/**
 * cni_nl_talk() - send @msg (not freed) and read replies until the kernel's
 * ACK, the end of a dump, or an error. @parse (may be NULL) is called for
 * every data message and may return a negative errno to fail the call.
 * Non-dump requests get NLM_F_ACK added.
 *
 * Return: 0, or the negative errno from the kernel's NLMSG_ERROR (e.g.
 * -EEXIST, -EOPNOTSUPP), from @parse, or from the socket.
 */
int cni_nl_talk(struct nl_sock *sk, struct nl_msg *msg, int (*parse)(struct nl_msg *m, void *arg),
		void *arg);

/** cni_nlerr_to_errno() - a libnl -NLE_* code as the closest negative errno. */
int cni_nlerr_to_errno(int nlerr);

#endif /* IBVF_CNI_NL_H */
