// SPDX-License-Identifier: MIT
/* rtnetlink for VF GUIDs and link state (see vf_netlink.h). */
#include "vf_netlink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>
#include <netlink/socket.h>

#include "err.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

_Static_assert(sizeof(struct ifla_vf_guid) == 16, "struct ifla_vf_guid is 16 bytes (uapi)");

struct ibvf_nl {
	struct nl_sock *sk;
	ibvf_nl_xfer_fn xfer;
	void *xfer_arg;
};

/* ------------------------------------------------------- transport -- */

struct xfer_state {
	ibvf_nl_msg_cb cb;
	void *cb_arg;
	uint32_t seq;
	int error;
	bool done;
	char *err;
	size_t errlen;
};

static int on_seq(struct nl_msg *msg, void *arg)
{
	const struct xfer_state *st = arg;

	return nlmsg_hdr(msg)->nlmsg_seq == st->seq ? NL_OK : NL_SKIP;
}

static int on_valid(struct nl_msg *msg, void *arg)
{
	struct xfer_state *st = arg;
	int r = st->cb ? st->cb(nlmsg_hdr(msg), st->cb_arg) : 0;

	if (r < 0) {
		st->error = r;
		st->done = true;
		return NL_STOP;
	}
	return NL_OK;
}

static int on_finish(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct xfer_state *st = arg;
	int e;

	/* Since Linux 4.x a dump's NLMSG_DONE carries the dump's errno. */
	if (nlmsg_datalen(nlh) >= (int)sizeof(int)) {
		memcpy(&e, nlmsg_data(nlh), sizeof(e));
		if (e < 0 && !st->error) {
			st->error = e;
			ibvf_errf(st->err, st->errlen, e, "kernel: %s", strerror(-e));
		}
	}
	st->done = true;
	return NL_STOP;
}

static int on_ack(struct nl_msg *msg, void *arg)
{
	struct xfer_state *st = arg;

	(void)msg;
	st->done = true;
	return NL_STOP;
}

/* The NETLINK_EXT_ACK message (NLMSGERR_ATTR_MSG) of an error reply, or NULL. */
static const char *ext_ack_msg(const struct nlmsgerr *e)
{
	const struct nlmsghdr *nlh = (const void *)((const char *)e - NLMSG_HDRLEN);
	struct nlattr *tb[NLMSGERR_ATTR_MAX + 1];
	size_t off = NLMSG_HDRLEN + sizeof(*e);
	struct nlattr *a;

	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return NULL;
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		off += NLMSG_ALIGN(e->msg.nlmsg_len) - NLMSG_HDRLEN;
	if (off >= nlh->nlmsg_len)
		return NULL;
	if (nla_parse(tb, NLMSGERR_ATTR_MAX, (struct nlattr *)((char *)nlh + off),
		      (int)(nlh->nlmsg_len - off), NULL) < 0)
		return NULL;
	a = tb[NLMSGERR_ATTR_MSG];
	if (!a || nla_len(a) < 1 || ((const char *)nla_data(a))[nla_len(a) - 1])
		return NULL;
	return nla_data(a);
}

static int on_error(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
	struct xfer_state *st = arg;
	const char *msg = ext_ack_msg(e);

	(void)who;
	if (e->msg.nlmsg_seq != st->seq)
		return NL_SKIP;
	st->error = e->error < 0 ? e->error : -EPROTO;
	st->done = true;
	ibvf_errf(st->err, st->errlen, st->error, "kernel: %s%s%s", strerror(-st->error),
		  msg ? ": " : "", msg ? msg : "");
	return NL_STOP;
}

static int sock_xfer(void *arg, struct nl_msg *req, size_t bufsize, ibvf_nl_msg_cb cb, void *cb_arg,
		     char *err, size_t errlen)
{
	struct ibvf_nl *nl = arg;
	struct xfer_state st = {.cb = cb, .cb_arg = cb_arg, .err = err, .errlen = errlen};
	struct nl_cb *ncb;
	int ret;

	ncb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!ncb)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	nl_cb_set(ncb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, on_seq, &st);
	nl_cb_set(ncb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, &st);
	nl_cb_set(ncb, NL_CB_FINISH, NL_CB_CUSTOM, on_finish, &st);
	nl_cb_set(ncb, NL_CB_ACK, NL_CB_CUSTOM, on_ack, &st);
	nl_cb_err(ncb, NL_CB_CUSTOM, on_error, &st);
	nl_socket_set_msg_buf_size(nl->sk, bufsize);
	ret = nl_send_auto(nl->sk, req);
	if (ret < 0) {
		nl_cb_put(ncb);
		return ibvf_errf(err, errlen, -EIO, "netlink send: %s", nl_geterror(ret));
	}
	st.seq = nlmsg_hdr(req)->nlmsg_seq;
	while (!st.done) {
		ret = nl_recvmsgs(nl->sk, ncb);
		if (st.done)
			break;
		if (ret < 0) {
			nl_cb_put(ncb);
			return ibvf_errf(err, errlen, -EIO, "netlink receive: %s",
					 nl_geterror(ret));
		}
	}
	nl_cb_put(ncb);
	return st.error;
}

int ibvf_nl_open(struct ibvf_nl **out, char *err, size_t errlen)
{
	struct ibvf_nl *nl = calloc(1, sizeof(*nl));
	int one = 1, ret;

	if (!nl || !(nl->sk = nl_socket_alloc())) {
		free(nl);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = nl_connect(nl->sk, NETLINK_ROUTE);
	if (ret < 0) {
		nl_socket_free(nl->sk);
		free(nl);
		return ibvf_errf(err, errlen, -EIO, "netlink socket: %s", nl_geterror(ret));
	}
	/* The kernel's reason text (extended ACK); the echoed request is not needed. */
	setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	nl_socket_disable_auto_ack(nl->sk);
	nl_socket_enable_msg_peek(nl->sk);
	nl->xfer = sock_xfer;
	nl->xfer_arg = nl;
	*out = nl;
	return 0;
}

void ibvf_nl_close(struct ibvf_nl *nl)
{
	if (!nl)
		return;
	nl_socket_free(nl->sk);
	free(nl);
}

void ibvf_nl_set_xfer(struct ibvf_nl *nl, ibvf_nl_xfer_fn fn, void *arg)
{
	nl->xfer = fn ? fn : sock_xfer;
	nl->xfer_arg = fn ? arg : nl;
}

/* -------------------------------------------------------- builders -- */

/* RTM_SETLINK on @ifindex whose only change is the VF object @vf (libnl). */
static int build_vf_change(int ifindex, struct rtnl_link_vf *vf, struct nl_msg **out)
{
	struct rtnl_link *orig = rtnl_link_alloc(), *chg = rtnl_link_alloc();
	int ret = -ENOMEM;

	*out = NULL;
	if (!orig || !chg)
		goto out;
	rtnl_link_set_ifindex(orig, ifindex);
	if (rtnl_link_vf_add(chg, vf) < 0)
		goto out;
	/* libnl builds RTM_NEWLINK; the kernel's VF path is do_setlink either way,
	 * RTM_SETLINK is the request `ip link set ... vf N` semantics ask for. */
	if (rtnl_link_build_change_request(orig, chg, NLM_F_ACK, out) < 0) {
		*out = NULL;
		goto out;
	}
	nlmsg_hdr(*out)->nlmsg_type = RTM_SETLINK;
	ret = 0;
out:
	rtnl_link_put(orig);
	rtnl_link_put(chg);
	return ret;
}

int ibvf_nl_build_vf_guid(int ifindex, uint32_t vf, int attr, uint64_t guid, struct nl_msg **out)
{
	struct rtnl_link_vf *v;
	int ret;

	*out = NULL;
	if (ifindex <= 0 || vf >= 0x7fffffff ||
	    (attr != IFLA_VF_IB_NODE_GUID && attr != IFLA_VF_IB_PORT_GUID))
		return -EINVAL;
	v = rtnl_link_vf_alloc();
	if (!v)
		return -ENOMEM;
	rtnl_link_vf_set_index(v, vf);
	if (attr == IFLA_VF_IB_NODE_GUID)
		rtnl_link_vf_set_ib_node_guid(v, guid);
	else
		rtnl_link_vf_set_ib_port_guid(v, guid);
	ret = build_vf_change(ifindex, v, out);
	rtnl_link_vf_put(v);
	return ret;
}

int ibvf_nl_build_vf_link_state(int ifindex, uint32_t vf, uint32_t state, struct nl_msg **out)
{
	struct rtnl_link_vf *v;
	int ret;

	*out = NULL;
	if (ifindex <= 0 || vf >= 0x7fffffff || state > IFLA_VF_LINK_STATE_DISABLE)
		return -EINVAL;
	v = rtnl_link_vf_alloc();
	if (!v)
		return -ENOMEM;
	rtnl_link_vf_set_index(v, vf);
	rtnl_link_vf_set_linkstate(v, state);
	ret = build_vf_change(ifindex, v, out);
	rtnl_link_vf_put(v);
	return ret;
}

int ibvf_nl_build_getlink(int ifindex, bool dump, struct nl_msg **out)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = dump ? 0 : ifindex};
	struct nl_msg *m;

	*out = NULL;
	if (!dump && ifindex <= 0)
		return -EINVAL;
	m = nlmsg_alloc_simple(RTM_GETLINK, dump ? NLM_F_DUMP : NLM_F_ACK);
	if (!m)
		return -ENOMEM;
	if (nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(m, IFLA_EXT_MASK, RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS) < 0) {
		nlmsg_free(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

/* --------------------------------------------------------- setters -- */

int ibvf_nl_request(struct ibvf_nl *nl, struct nl_msg *req, char *err, size_t errlen)
{
	return nl->xfer(nl->xfer_arg, req, IBVF_NL_BUF_FIRST, NULL, NULL, err, errlen);
}

static int send_change(struct ibvf_nl *nl, struct nl_msg *m, int built, char *err, size_t errlen)
{
	int ret;

	if (built)
		return ibvf_errf(err, errlen, built,
				 built == -EINVAL ? "invalid ifindex, VF index or value"
						  : "out of memory");
	ret = ibvf_nl_request(nl, m, err, errlen);
	nlmsg_free(m);
	return ret;
}

int ibvf_nl_set_vf_guid(struct ibvf_nl *nl, int ifindex, uint32_t vf, int attr, uint64_t guid,
			char *err, size_t errlen)
{
	struct nl_msg *m;
	int b = ibvf_nl_build_vf_guid(ifindex, vf, attr, guid, &m);

	return send_change(nl, m, b, err, errlen);
}

int ibvf_nl_set_vf_link_state(struct ibvf_nl *nl, int ifindex, uint32_t vf, uint32_t state,
			      char *err, size_t errlen)
{
	struct nl_msg *m;
	int b = ibvf_nl_build_vf_link_state(ifindex, vf, state, &m);

	return send_change(nl, m, b, err, errlen);
}

/* ---------------------------------------------------------- parser -- */

static struct nla_policy link_policy[IFLA_MAX + 1] = {
	[IFLA_NUM_VF] = {.type = NLA_U32},
	[IFLA_VFINFO_LIST] = {.type = NLA_NESTED},
};

static struct nla_policy vf_policy[IFLA_VF_MAX + 1] = {
	[IFLA_VF_MAC] = {.minlen = sizeof(struct ifla_vf_mac)},
	[IFLA_VF_LINK_STATE] = {.minlen = sizeof(struct ifla_vf_link_state)},
	[IFLA_VF_IB_NODE_GUID] = {.minlen = sizeof(struct ifla_vf_guid)},
	[IFLA_VF_IB_PORT_GUID] = {.minlen = sizeof(struct ifla_vf_guid)},
};

static int parse_guid(struct nlattr *a, uint32_t vf, const char *name, bool *has, uint64_t *out,
		      size_t i, char *err, size_t errlen)
{
	struct ifla_vf_guid g;

	if (!a)
		return 0;
	memcpy(&g, nla_data(a), sizeof(g)); /* the attribute is only 4-byte aligned */
	if (g.vf != vf)
		return ibvf_errf(err, errlen, -EBADMSG,
				 "IFLA_VF_INFO #%zu: %s is for VF %u, the nest for VF %u", i, name,
				 g.vf, vf);
	*has = true;
	*out = g.guid;
	return 0;
}

static int parse_vfinfo(struct nlattr *nest, size_t i, struct ibvf_nl_vf *vf, char *err,
			size_t errlen)
{
	struct nlattr *tb[IFLA_VF_MAX + 1];
	struct ifla_vf_link_state ls;
	struct ifla_vf_mac mac;
	int ret;

	if (nla_type(nest) != IFLA_VF_INFO)
		return ibvf_errf(err, errlen, -EBADMSG,
				 "IFLA_VFINFO_LIST entry #%zu has type %d, not IFLA_VF_INFO", i,
				 nla_type(nest));
	if (nla_parse_nested(tb, IFLA_VF_MAX, nest, vf_policy) < 0)
		return ibvf_errf(err, errlen, -EBADMSG,
				 "IFLA_VF_INFO #%zu: an attribute is shorter than its struct", i);
	if (!tb[IFLA_VF_MAC] || !tb[IFLA_VF_LINK_STATE])
		return ibvf_errf(err, errlen, -EBADMSG, "IFLA_VF_INFO #%zu lacks required %s", i,
				 !tb[IFLA_VF_MAC] ? "IFLA_VF_MAC" : "IFLA_VF_LINK_STATE");
	memcpy(&mac, nla_data(tb[IFLA_VF_MAC]), sizeof(mac));
	memcpy(&ls, nla_data(tb[IFLA_VF_LINK_STATE]), sizeof(ls));
	if (ls.vf != mac.vf)
		return ibvf_errf(err, errlen, -EBADMSG,
				 "IFLA_VF_INFO #%zu: IFLA_VF_LINK_STATE is for VF %u, IFLA_VF_MAC "
				 "for VF %u",
				 i, ls.vf, mac.vf);
	memset(vf, 0, sizeof(*vf));
	vf->vf = mac.vf;
	vf->link_state = ls.link_state;
	ret = parse_guid(tb[IFLA_VF_IB_NODE_GUID], vf->vf, "IFLA_VF_IB_NODE_GUID",
			 &vf->has_node_guid, &vf->node_guid, i, err, errlen);
	if (!ret)
		ret = parse_guid(tb[IFLA_VF_IB_PORT_GUID], vf->vf, "IFLA_VF_IB_PORT_GUID",
				 &vf->has_port_guid, &vf->port_guid, i, err, errlen);
	return ret;
}

int ibvf_nl_parse_link(const struct nlmsghdr *cnlh, struct ibvf_nl_link *out, char *err,
		       size_t errlen)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)cnlh;
	struct nlattr *tb[IFLA_MAX + 1], *pos;
	const struct ifinfomsg *ifi;
	size_t cap = 0;
	int rem, ret;

	memset(out, 0, sizeof(*out));
	out->num_vf = -1;
	if (nlh->nlmsg_type != RTM_NEWLINK || !nlmsg_valid_hdr(nlh, sizeof(*ifi)))
		return ibvf_errf(err, errlen, -EBADMSG, "not an RTM_NEWLINK message (type %u)",
				 nlh->nlmsg_type);
	ifi = nlmsg_data(nlh);
	out->ifindex = ifi->ifi_index;
	if (nlmsg_parse(nlh, sizeof(*ifi), tb, IFLA_MAX, link_policy) < 0)
		return ibvf_errf(err, errlen, -EBADMSG,
				 "RTM_NEWLINK of ifindex %d: malformed attributes", ifi->ifi_index);
	if (tb[IFLA_NUM_VF])
		out->num_vf = (int)nla_get_u32(tb[IFLA_NUM_VF]);
	if (!tb[IFLA_VFINFO_LIST])
		return 0;
	nla_for_each_nested(pos, tb[IFLA_VFINFO_LIST], rem)
	{
		if (out->n_vfs == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			void *nv = realloc(out->vfs, ncap * sizeof(*out->vfs));

			if (!nv) {
				ibvf_nl_link_free(out);
				return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			}
			out->vfs = nv;
			cap = ncap;
		}
		ret = parse_vfinfo(pos, out->n_vfs, &out->vfs[out->n_vfs], err, errlen);
		if (ret) {
			ibvf_nl_link_free(out);
			return ret;
		}
		out->n_vfs++;
	}
	if (rem > 0 && rem >= NLA_HDRLEN) {
		ibvf_nl_link_free(out);
		return ibvf_errf(err, errlen, -EBADMSG, "IFLA_VFINFO_LIST: truncated attribute");
	}
	if (out->num_vf >= 0 && (size_t)out->num_vf != out->n_vfs) {
		size_t n = out->n_vfs;

		ibvf_nl_link_free(out);
		return ibvf_errf(err, errlen, -EBADMSG,
				 "IFLA_NUM_VF says %d VFs but IFLA_VFINFO_LIST has %zu",
				 (int)nla_get_u32(tb[IFLA_NUM_VF]), n);
	}
	return 0;
}

void ibvf_nl_link_free(struct ibvf_nl_link *l)
{
	free(l->vfs);
	l->vfs = NULL;
	l->n_vfs = 0;
}

/* ------------------------------------------------------- read back -- */

struct read_state {
	int ifindex;
	struct ibvf_nl_link *out;
	bool found;
	char *err;
	size_t errlen;
};

static int on_link(const struct nlmsghdr *nlh, void *arg)
{
	struct read_state *rs = arg;
	const struct ifinfomsg *ifi;

	if (nlh->nlmsg_type != RTM_NEWLINK || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
		return 0;
	ifi = NLMSG_DATA(nlh);
	if (ifi->ifi_index != rs->ifindex || rs->found)
		return 0;
	rs->found = true;
	return ibvf_nl_parse_link(nlh, rs->out, rs->err, rs->errlen);
}

int ibvf_nl_read_link(struct ibvf_nl *nl, int ifindex, struct ibvf_nl_link *out, char *err,
		      size_t errlen)
{
	struct read_state rs = {.ifindex = ifindex, .out = out, .err = err, .errlen = errlen};
	struct nl_msg *m;
	int ret;

	memset(out, 0, sizeof(*out));
	out->num_vf = -1;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (ibvf_nl_build_getlink(ifindex, attempt == 1, &m))
			return ibvf_errf(err, errlen, ifindex <= 0 ? -EINVAL : -ENOMEM,
					 ifindex <= 0 ? "invalid ifindex %d" : "out of memory",
					 ifindex);
		rs.found = false;
		ret = nl->xfer(nl->xfer_arg, m, attempt ? IBVF_NL_BUF_RETRY : IBVF_NL_BUF_FIRST,
			       on_link, &rs, err, errlen);
		nlmsg_free(m);
		if (ret != -EMSGSIZE)
			break;
		ibvf_nl_link_free(out);
	}
	if (ret == -EMSGSIZE)
		return ibvf_errf(err, errlen, ret,
				 "the kernel cannot fit the VF list of ifindex %d into a reply "
				 "(EMSGSIZE, also with a %u-byte dump buffer; kernels without the "
				 "fix 'rtnetlink: Allocate vfinfo size for VF GUIDs' under-size it "
				 "for many VFs)",
				 ifindex, IBVF_NL_BUF_RETRY);
	if (ret)
		return ret;
	if (!rs.found)
		return ibvf_errf(err, errlen, -ENODEV, "no link with ifindex %d in the reply",
				 ifindex);
	return 0;
}

static int on_ifindex(const struct nlmsghdr *nlh, void *arg)
{
	if (nlh->nlmsg_type == RTM_NEWLINK &&
	    nlh->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifinfomsg)))
		*(int *)arg = ((const struct ifinfomsg *)NLMSG_DATA(nlh))->ifi_index;
	return 0;
}

int ibvf_nl_ifindex_by_name(struct ibvf_nl *nl, const char *name, char *err, size_t errlen)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	struct nl_msg *m;
	int ifindex = 0, ret;

	if (!name || !*name || strlen(name) >= 128)
		return ibvf_errf(err, errlen, -EINVAL, "'%.40s' is not an interface name",
				 name ? name : "");
	m = nlmsg_alloc_simple(RTM_GETLINK, NLM_F_ACK);
	if (!m || nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_string(m, IFLA_ALT_IFNAME, name) < 0 ||
	    nla_put_u32(m, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS) < 0) {
		nlmsg_free(m);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = nl->xfer(nl->xfer_arg, m, IBVF_NL_BUF_FIRST, on_ifindex, &ifindex, err, errlen);
	nlmsg_free(m);
	if (ret)
		return ret;
	return ifindex > 0 ? ifindex
			   : ibvf_errf(err, errlen, -ENODEV, "no interface named %s", name);
}
