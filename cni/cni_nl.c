// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: netlink sockets per netns and request/ACK exchanges (libnl-3). */
#include "cni_nl.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <netlink/errno.h>

#include "err.h"
#include "file_read.h"

#define SELF_NETNS "/proc/thread-self/ns/net"

/*
 * The netns the plugin runs in, opened at the first need and kept (close on
 * exec) until exit: cni_ns_enter() returns to it and cni_ns_current() hands
 * out duplicates of it, where each opened /proc/thread-self/ns/net again (a
 * /proc walk and the type check, ~9 us each; issue 17). It is the current
 * netns only while no cni_ns_enter() is outstanding (@entered 0); nested, the
 * current one is opened as before. Forked children (the RC and port checks)
 * switch with setns(2) themselves.
 */
static int own_netns = -1;
static unsigned entered;

static int own_netns_fd(void)
{
	if (own_netns < 0) {
		int fd = ibvf_file_open_netns(SELF_NETNS, NULL, 0);

		if (fd < 0)
			return fd;
		own_netns = fd;
	}
	return own_netns;
}

int cni_ns_current(char *err, size_t errlen)
{
	int fd;

	if (entered)
		return ibvf_file_open_netns(SELF_NETNS, err, errlen);
	fd = own_netns_fd();
	if (fd >= 0)
		fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) /* the kept fd failed: open as before, for its message */
		return ibvf_file_open_netns(SELF_NETNS, err, errlen);
	return fd;
}

int cni_ns_enter(int fd, int *saved)
{
	int cur = entered ? ibvf_file_open_netns(SELF_NETNS, NULL, 0) : own_netns_fd();

	if (cur < 0)
		return cur;
	if (setns(fd, CLONE_NEWNET)) {
		int e = -errno;

		if (cur != own_netns)
			close(cur);
		return e;
	}
	entered++;
	*saved = cur;
	return 0;
}

int cni_ns_leave(int saved)
{
	int ret = setns(saved, CLONE_NEWNET) ? -errno : 0;

	if (!ret && entered)
		entered--; /* a failed return leaves every later enter "nested" */
	if (saved != own_netns)
		close(saved);
	return ret;
}

/*
 * The receive buffer of every socket here, one recvmsg(2) per message batch.
 * With no buffer size set, libnl peeks each message first (MSG_PEEK |
 * MSG_TRUNC) and reads it again: two system calls per reply and per ACK
 * (issue 17). The kernel builds a dump's batches up to 32 KiB (netlink_dump()
 * caps max_recvmsg_len at SKB_WITH_OVERHEAD(32768)), and the plugin's unicast
 * replies (one link without RTEXT_FILTER_VF, RDMA device commands) are a few
 * KiB; a larger message fails as NLE_MSG_TRUNC (-EMSGSIZE here), never cut.
 */
#define CNI_NL_RECV_BUF (64u << 10)

struct nl_sock *cni_nl_socket(int protocol, int netns_fd, char *err, size_t errlen)
{
	struct nl_sock *sk = nl_socket_alloc();
	int saved = -1, ret;

	if (!sk) {
		ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	if (netns_fd >= 0) {
		ret = cni_ns_enter(netns_fd, &saved);
		if (ret) {
			ibvf_errf(err, errlen, ret, "entering network namespace: %s",
				  strerror(-ret));
			nl_socket_free(sk);
			return NULL;
		}
	}
	ret = nl_connect(sk, protocol);
	if (saved >= 0 && cni_ns_leave(saved)) {
		/* Cannot return to our own netns: nothing after this is safe. */
		ibvf_errf(err, errlen, -EIO, "leaving network namespace: %s", strerror(errno));
		nl_socket_free(sk);
		return NULL;
	}
	if (ret < 0) {
		ibvf_errf(err, errlen, cni_nlerr_to_errno(ret), "netlink socket (protocol %d): %s",
			  protocol, nl_geterror(ret));
		nl_socket_free(sk);
		return NULL;
	}
	nl_socket_set_buffer_size(sk, 1 << 20, 0);
	nl_socket_disable_auto_ack(sk); /* cni_nl_talk() asks for ACKs itself */
	nl_socket_set_msg_buf_size(sk, CNI_NL_RECV_BUF);
	return sk;
}

int cni_nlerr_to_errno(int nlerr)
{
	static const struct {
		int nle, err;
	} map[] = {
		{NLE_EXIST, EEXIST},
		{NLE_NODEV, ENODEV},
		{NLE_OPNOTSUPP, EOPNOTSUPP},
		{NLE_PERM, EPERM},
		{NLE_BUSY, EBUSY},
		{NLE_INVAL, EINVAL},
		{NLE_OBJ_NOTFOUND, ENOENT},
		{NLE_NOADDR, EADDRNOTAVAIL},
		{NLE_AGAIN, EAGAIN},
		{NLE_RANGE, ERANGE},
		{NLE_MSGSIZE, EMSGSIZE},
		{NLE_MSG_TRUNC, EMSGSIZE},
		{NLE_NOMEM, ENOMEM},
		{NLE_NOACCESS, EACCES},
		{NLE_AF_NOSUPPORT, EAFNOSUPPORT},
		{NLE_PROTO_MISMATCH, EPROTO},
		{NLE_NOATTR, ENODATA},
	};
	int n = nlerr < 0 ? -nlerr : nlerr;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].nle == n)
			return -map[i].err;
	return -EIO;
}

struct talk {
	int err;
	bool done;
	int (*parse)(struct nl_msg *m, void *arg);
	void *arg;
};

static int on_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct talk *t = arg;

	(void)nla;
	t->err = e->error < 0 ? e->error : -EIO;
	t->done = true;
	return NL_STOP;
}

static int on_valid(struct nl_msg *m, void *arg)
{
	struct talk *t = arg;

	if (t->parse && !t->err) {
		int ret = t->parse(m, t->arg);

		if (ret < 0)
			t->err = ret;
	}
	return NL_OK;
}

static int on_done(struct nl_msg *m, void *arg)
{
	struct talk *t = arg;

	(void)m;
	t->done = true;
	return NL_STOP;
}

int cni_nl_talk(struct nl_sock *sk, struct nl_msg *msg, int (*parse)(struct nl_msg *m, void *arg),
		void *arg)
{
	struct talk t = {.parse = parse, .arg = arg};
	struct nlmsghdr *h = nlmsg_hdr(msg);
	struct nl_cb *cb;
	int ret;

	/* NLM_F_DUMP shares bits with NLM_F_EXCL/REPLACE of new-object requests */
	if ((h->nlmsg_flags & NLM_F_DUMP) != NLM_F_DUMP || (h->nlmsg_flags & NLM_F_CREATE))
		h->nlmsg_flags |= NLM_F_ACK;
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb)
		return -ENOMEM;
	nl_cb_err(cb, NL_CB_CUSTOM, on_error, &t);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, &t);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, on_done, &t);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, on_done, &t);
	ret = nl_send_auto(sk, msg);
	if (ret < 0) {
		nl_cb_put(cb);
		return cni_nlerr_to_errno(ret);
	}
	while (!t.done) {
		ret = nl_recvmsgs(sk, cb);
		if (ret < 0 && !t.err) {
			t.err = cni_nlerr_to_errno(ret);
			break;
		}
		if (ret < 0)
			break;
	}
	nl_cb_put(cb);
	return t.err;
}
