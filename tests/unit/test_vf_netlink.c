// SPDX-License-Identifier: MIT
/*
 * cmocka tests of vf_netlink.c without a kernel: our own messages parsed back
 * attribute by attribute, and the read-back parser fed RTM_NEWLINK payloads
 * built here with libnl (0, 1 and 64 VFs, GUIDs present and absent,
 * malformed nests), including the EMSGSIZE retry through the transport seam.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "err.h"
#include "vf_netlink.h"

/* -------------------------------------------------- own messages back -- */

/* The single attribute inside @nest, asserting there is exactly one. */
static struct nlattr *only_child(struct nlattr *nest, int type)
{
	struct nlattr *pos, *found = NULL;
	int rem, n = 0;

	nla_for_each_nested(pos, nest, rem)
	{
		found = pos;
		n++;
	}
	assert_int_equal(rem, 0);
	assert_int_equal(n, 1);
	assert_int_equal(nla_type(found), type);
	return found;
}

/* Check header + ifinfomsg and return the only top-level attribute. */
static struct nlattr *check_setlink(struct nl_msg *m, int ifindex)
{
	struct nlmsghdr *nlh = nlmsg_hdr(m);
	struct ifinfomsg *ifi = nlmsg_data(nlh);
	struct nlattr *attrs = nlmsg_attrdata(nlh, sizeof(*ifi)), *pos, *found = NULL;
	int rem, n = 0;

	assert_int_equal(nlh->nlmsg_type, RTM_SETLINK);
	assert_true(nlh->nlmsg_flags & NLM_F_ACK);
	assert_false(nlh->nlmsg_flags & (NLM_F_CREATE | NLM_F_EXCL | NLM_F_REPLACE));
	assert_int_equal(ifi->ifi_family, AF_UNSPEC);
	assert_int_equal(ifi->ifi_index, ifindex);
	assert_int_equal(ifi->ifi_flags, 0);
	assert_int_equal(ifi->ifi_change, 0);
	nla_for_each_attr(pos, attrs, nlmsg_attrlen(nlh, sizeof(*ifi)), rem)
	{
		found = pos;
		n++;
	}
	assert_int_equal(rem, 0);
	assert_int_equal(n, 1); /* nothing but IFLA_VFINFO_LIST */
	assert_int_equal(nla_type(found), IFLA_VFINFO_LIST);
	return found;
}

static void check_guid_msg(int attr)
{
	const uint64_t guid = 0x0011223344556677ULL;
	struct nlattr *list, *info, *g;
	const uint8_t *raw;
	struct nl_msg *m;
	uint32_t vf;
	uint64_t v;

	assert_int_equal(ibvf_nl_build_vf_guid(7, 3, attr, guid, &m), 0);
	list = check_setlink(m, 7);
	info = only_child(list, IFLA_VF_INFO); /* one nest ... */
	g = only_child(info, attr);	       /* ... with ONE GUID attribute */
	assert_int_equal(nla_len(g), 16);      /* struct ifla_vf_guid, padded */
	raw = nla_data(g);
	memcpy(&vf, raw, 4);
	memcpy(&v, raw + 8, 8);
	assert_int_equal(vf, 3);
	assert_true(v == guid); /* host order, value reads like the GUID string */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	assert_int_equal(raw[8], 0x77);
	assert_int_equal(raw[15], 0x00);
	assert_int_equal(raw[0], 3);
#else
	assert_int_equal(raw[8], 0x00);
	assert_int_equal(raw[15], 0x77);
#endif
	nlmsg_free(m);
}

static void test_build_node_guid(void **state)
{
	(void)state;
	check_guid_msg(IFLA_VF_IB_NODE_GUID);
}

static void test_build_port_guid(void **state)
{
	(void)state;
	check_guid_msg(IFLA_VF_IB_PORT_GUID);
}

static void test_build_link_state(void **state)
{
	struct ifla_vf_link_state ls;
	struct nlattr *info, *a;
	struct nl_msg *m;

	(void)state;
	for (uint32_t s = IFLA_VF_LINK_STATE_AUTO; s <= IFLA_VF_LINK_STATE_DISABLE; s++) {
		assert_int_equal(ibvf_nl_build_vf_link_state(12, 63, s, &m), 0);
		info = only_child(check_setlink(m, 12), IFLA_VF_INFO);
		a = only_child(info, IFLA_VF_LINK_STATE);
		assert_int_equal(nla_len(a), sizeof(ls));
		memcpy(&ls, nla_data(a), sizeof(ls));
		assert_int_equal(ls.vf, 63);
		assert_int_equal(ls.link_state, s);
		nlmsg_free(m);
	}
	assert_int_equal(ibvf_nl_build_vf_link_state(12, 0, 3, &m), -EINVAL);
	assert_null(m);
}

static void test_build_getlink(void **state)
{
	struct nlmsghdr *nlh;
	struct nlattr *tb[IFLA_MAX + 1];
	struct nl_msg *m;

	(void)state;
	for (int dump = 0; dump < 2; dump++) {
		assert_int_equal(ibvf_nl_build_getlink(9, dump, &m), 0);
		nlh = nlmsg_hdr(m);
		assert_int_equal(nlh->nlmsg_type, RTM_GETLINK);
		assert_int_equal(!!(nlh->nlmsg_flags & NLM_F_DUMP), dump);
		assert_int_equal(((struct ifinfomsg *)nlmsg_data(nlh))->ifi_index, dump ? 0 : 9);
		assert_int_equal(nlmsg_parse(nlh, sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL), 0);
		assert_non_null(tb[IFLA_EXT_MASK]);
		assert_int_equal(nla_get_u32(tb[IFLA_EXT_MASK]),
				 RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS);
		nlmsg_free(m);
	}
}

static void test_build_rejects(void **state)
{
	struct nl_msg *m;

	(void)state;
	assert_int_equal(ibvf_nl_build_vf_guid(0, 0, IFLA_VF_IB_NODE_GUID, 1, &m), -EINVAL);
	assert_int_equal(ibvf_nl_build_vf_guid(1, 0, IFLA_VF_MAC, 1, &m), -EINVAL);
	assert_int_equal(ibvf_nl_build_vf_guid(1, 0x7fffffff, IFLA_VF_IB_PORT_GUID, 1, &m),
			 -EINVAL);
	assert_null(m);
	assert_int_equal(ibvf_nl_build_getlink(0, false, &m), -EINVAL);
}

/* ------------------------------------------ RTM_NEWLINK built with libnl -- */

enum { F_NO_MAC = 1, F_NO_LINK_STATE = 2, F_SHORT_GUID = 4, F_WRONG_VF = 8, F_WRONG_NEST = 16 };

static uint64_t node_of(int i)
{
	return 0x0002c90300a00000ULL + (uint64_t)i * 2;
}

/* An RTM_NEWLINK as the kernel's rtnl_fill_ifinfo() lays it out. */
static struct nl_msg *newlink(int ifindex, int n, bool guids, int num_vf, int flags)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWLINK, 0);
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_type = 32, .ifi_index = ifindex};
	struct nlattr *list;

	assert_non_null(m);
	assert_int_equal(nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO), 0);
	assert_int_equal(nla_put_string(m, IFLA_IFNAME, "ib0"), 0);
	assert_int_equal(nla_put_u32(m, IFLA_MTU, 2044), 0);
	if (num_vf >= 0)
		assert_int_equal(nla_put_u32(m, IFLA_NUM_VF, (uint32_t)num_vf), 0);
	if (!n)
		return m;
	list = nla_nest_start(m, IFLA_VFINFO_LIST);
	for (int i = 0; i < n; i++) {
		struct ifla_vf_mac mac = {.vf = (uint32_t)i};
		struct ifla_vf_vlan vlan = {.vf = (uint32_t)i};
		struct ifla_vf_link_state ls = {.vf = (uint32_t)i, .link_state = (uint32_t)(i % 3)};
		struct ifla_vf_trust tr = {.vf = (uint32_t)i};
		struct ifla_vf_guid ng = {.vf = (uint32_t)i, .guid = node_of(i)};
		struct ifla_vf_guid pg = {.vf = (uint32_t)i, .guid = node_of(i) + 1};
		struct nlattr *info = nla_nest_start(
			m, (flags & F_WRONG_NEST) && i == n - 1 ? IFLA_VF_PORTS : IFLA_VF_INFO);

		if ((flags & F_WRONG_VF) && i == n - 1)
			pg.vf = (uint32_t)i + 1;
		if (!(flags & F_NO_MAC))
			assert_int_equal(nla_put(m, IFLA_VF_MAC, sizeof(mac), &mac), 0);
		assert_int_equal(nla_put(m, IFLA_VF_VLAN, sizeof(vlan), &vlan), 0);
		if (!(flags & F_NO_LINK_STATE))
			assert_int_equal(nla_put(m, IFLA_VF_LINK_STATE, sizeof(ls), &ls), 0);
		assert_int_equal(nla_put(m, IFLA_VF_TRUST, sizeof(tr), &tr), 0);
		if (guids) {
			assert_int_equal(nla_put(m, IFLA_VF_IB_NODE_GUID,
						 (flags & F_SHORT_GUID) ? 8 : (int)sizeof(ng), &ng),
					 0);
			assert_int_equal(nla_put(m, IFLA_VF_IB_PORT_GUID, sizeof(pg), &pg), 0);
		}
		nla_nest_end(m, info);
	}
	nla_nest_end(m, list);
	return m;
}

static void test_parse_counts(void **state)
{
	static const int counts[] = {0, 1, 64};
	char err[IBVF_ERR_LEN];

	(void)state;
	for (size_t c = 0; c < 3; c++)
		for (int guids = 0; guids < 2; guids++) {
			struct nl_msg *m = newlink(5, counts[c], guids, counts[c], 0);
			struct ibvf_nl_link l;

			assert_int_equal(ibvf_nl_parse_link(nlmsg_hdr(m), &l, err, sizeof(err)), 0);
			assert_int_equal(l.ifindex, 5);
			assert_int_equal(l.num_vf, counts[c]);
			assert_int_equal(l.n_vfs, (size_t)counts[c]);
			for (int i = 0; i < counts[c]; i++) {
				assert_int_equal(l.vfs[i].vf, i);
				assert_int_equal(l.vfs[i].link_state, i % 3);
				assert_int_equal(l.vfs[i].has_node_guid, guids);
				assert_int_equal(l.vfs[i].has_port_guid, guids);
				if (guids) {
					assert_true(l.vfs[i].node_guid == node_of(i));
					assert_true(l.vfs[i].port_guid == node_of(i) + 1);
				}
			}
			if (counts[c] == 64)
				assert_true(nlmsg_hdr(m)->nlmsg_len > 4096); /* > NLMSG_GOODSIZE */
			ibvf_nl_link_free(&l);
			nlmsg_free(m);
		}
	/* a link without IFLA_NUM_VF (no parent device, e.g. veth) */
	{
		struct nl_msg *m = newlink(6, 0, false, -1, 0);
		struct ibvf_nl_link l;

		assert_int_equal(ibvf_nl_parse_link(nlmsg_hdr(m), &l, err, sizeof(err)), 0);
		assert_int_equal(l.num_vf, -1);
		assert_int_equal(l.n_vfs, 0);
		nlmsg_free(m);
	}
}

static void expect_bad(struct nl_msg *m, const char *what)
{
	char err[IBVF_ERR_LEN] = "";
	struct ibvf_nl_link l;

	assert_int_equal(ibvf_nl_parse_link(nlmsg_hdr(m), &l, err, sizeof(err)), -EBADMSG);
	if (!strstr(err, what))
		fail_msg("error '%s' does not mention '%s'", err, what);
	assert_null(l.vfs);
	nlmsg_free(m);
}

static void test_parse_rejects(void **state)
{
	struct nl_msg *m;

	(void)state;
	expect_bad(newlink(5, 3, true, 3, F_NO_MAC), "lacks required IFLA_VF_MAC");
	expect_bad(newlink(5, 3, true, 3, F_NO_LINK_STATE), "lacks required IFLA_VF_LINK_STATE");
	expect_bad(newlink(5, 2, true, 2, F_SHORT_GUID), "shorter than its struct");
	expect_bad(newlink(5, 4, true, 4, F_WRONG_VF), "IFLA_VF_IB_PORT_GUID is for VF 4");
	expect_bad(newlink(5, 2, false, 2, F_WRONG_NEST), "not IFLA_VF_INFO");
	expect_bad(newlink(5, 2, false, 3, 0), "IFLA_NUM_VF says 3");
	m = nlmsg_alloc_simple(RTM_NEWADDR, 0);
	expect_bad(m, "not an RTM_NEWLINK");
}

/* ------------------------------------------------ transport seam tests -- */

struct seam {
	int calls;
	bool dump[4];
	size_t bufsize[4];
	int fail_first;	     /* errno to answer the first call with */
	int fail_all;	     /* errno to answer every call with */
	int deliver_ifindex; /* link to deliver on success */
	int deliver_vfs;
	int sent_type[4];
};

static int seam_xfer(void *arg, struct nl_msg *req, size_t bufsize, ibvf_nl_msg_cb cb, void *cb_arg,
		     char *err, size_t errlen)
{
	struct seam *s = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(req);
	int i = s->calls++, ret;

	if (i < 4) {
		s->dump[i] = nlh->nlmsg_flags & NLM_F_DUMP;
		s->bufsize[i] = bufsize;
		s->sent_type[i] = nlh->nlmsg_type;
	}
	if (s->fail_all)
		return ibvf_errf(err, errlen, -s->fail_all, "kernel: %s", strerror(s->fail_all));
	if (i == 0 && s->fail_first)
		return ibvf_errf(err, errlen, -s->fail_first, "kernel: %s",
				 strerror(s->fail_first));
	if (!cb)
		return 0;
	if (nlh->nlmsg_flags & NLM_F_DUMP) { /* a dump: other links first */
		struct nl_msg *o = newlink(1, 0, false, -1, 0);

		ret = cb(nlmsg_hdr(o), cb_arg);
		nlmsg_free(o);
		if (ret < 0)
			return ret;
	}
	{
		struct nl_msg *m =
			newlink(s->deliver_ifindex, s->deliver_vfs, true, s->deliver_vfs, 0);

		ret = cb(nlmsg_hdr(m), cb_arg);
		nlmsg_free(m);
	}
	return ret < 0 ? ret : 0;
}

static void test_read_emsgsize_retry(void **state)
{
	struct seam s = {.fail_first = EMSGSIZE, .deliver_ifindex = 4, .deliver_vfs = 64};
	char err[IBVF_ERR_LEN];
	struct ibvf_nl_link l;
	struct ibvf_nl *nl;

	(void)state;
	assert_int_equal(ibvf_nl_open(&nl, err, sizeof(err)), 0);
	ibvf_nl_set_xfer(nl, seam_xfer, &s);
	assert_int_equal(ibvf_nl_read_link(nl, 4, &l, err, sizeof(err)), 0);
	assert_int_equal(s.calls, 2);
	assert_false(s.dump[0]);
	assert_int_equal(s.bufsize[0], IBVF_NL_BUF_FIRST);
	assert_true(s.dump[1]);			  /* the retry is a dump ... */
	assert_true(s.bufsize[1] > s.bufsize[0]); /* ... into a larger buffer */
	assert_int_equal(l.ifindex, 4);
	assert_int_equal(l.n_vfs, 64);
	assert_true(l.vfs[63].port_guid == node_of(63) + 1);
	ibvf_nl_link_free(&l);

	/* without EMSGSIZE: one request, no retry */
	s = (struct seam){.deliver_ifindex = 4, .deliver_vfs = 1};
	assert_int_equal(ibvf_nl_read_link(nl, 4, &l, err, sizeof(err)), 0);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.sent_type[0], RTM_GETLINK);
	ibvf_nl_link_free(&l);

	/* still too large: a clear error naming the kernel fix */
	s = (struct seam){.fail_all = EMSGSIZE};
	assert_int_equal(ibvf_nl_read_link(nl, 4, &l, err, sizeof(err)), -EMSGSIZE);
	assert_int_equal(s.calls, 2);
	assert_non_null(strstr(err, "Allocate vfinfo size for VF GUIDs"));

	/* another kernel error is not retried */
	s = (struct seam){.fail_all = ENODEV};
	assert_int_equal(ibvf_nl_read_link(nl, 4, &l, err, sizeof(err)), -ENODEV);
	assert_int_equal(s.calls, 1);

	/* the reply is about another link */
	s = (struct seam){.deliver_ifindex = 99, .deliver_vfs = 2};
	assert_int_equal(ibvf_nl_read_link(nl, 4, &l, err, sizeof(err)), -ENODEV);

	/* a malformed reply is an error, not silently "no VFs" */
	ibvf_nl_close(nl);
}

static int bad_xfer(void *arg, struct nl_msg *req, size_t bufsize, ibvf_nl_msg_cb cb, void *cb_arg,
		    char *err, size_t errlen)
{
	struct nl_msg *m = newlink(4, 3, true, 3, F_NO_MAC);
	int ret;

	(void)arg;
	(void)req;
	(void)bufsize;
	(void)err;
	(void)errlen;
	ret = cb(nlmsg_hdr(m), cb_arg);
	nlmsg_free(m);
	return ret < 0 ? ret : 0;
}

static void test_read_malformed(void **state)
{
	char err[IBVF_ERR_LEN];
	struct ibvf_nl_link l;
	struct ibvf_nl *nl;

	(void)state;
	assert_int_equal(ibvf_nl_open(&nl, err, sizeof(err)), 0);
	ibvf_nl_set_xfer(nl, bad_xfer, NULL);
	assert_int_equal(ibvf_nl_read_link(nl, 4, &l, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "IFLA_VF_MAC"));
	ibvf_nl_close(nl);
}

static void test_set_through_seam(void **state)
{
	struct seam s = {.fail_all = EOPNOTSUPP};
	char err[IBVF_ERR_LEN];
	struct ibvf_nl *nl;

	(void)state;
	assert_int_equal(ibvf_nl_open(&nl, err, sizeof(err)), 0);
	ibvf_nl_set_xfer(nl, seam_xfer, &s);
	assert_int_equal(ibvf_nl_set_vf_guid(nl, 3, 1, IFLA_VF_IB_NODE_GUID, 5, err, sizeof(err)),
			 -EOPNOTSUPP);
	assert_int_equal(s.calls, 1); /* one message per GUID */
	assert_int_equal(s.sent_type[0], RTM_SETLINK);
	assert_int_equal(ibvf_nl_set_vf_link_state(nl, 3, 1, 9, err, sizeof(err)), -EINVAL);
	assert_int_equal(s.calls, 1); /* rejected before sending */
	ibvf_nl_close(nl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_node_guid),	 cmocka_unit_test(test_build_port_guid),
		cmocka_unit_test(test_build_link_state), cmocka_unit_test(test_build_getlink),
		cmocka_unit_test(test_build_rejects),	 cmocka_unit_test(test_parse_counts),
		cmocka_unit_test(test_parse_rejects),	 cmocka_unit_test(test_read_emsgsize_retry),
		cmocka_unit_test(test_read_malformed),	 cmocka_unit_test(test_set_through_seam),
	};

	nlmsg_set_default_size(64 * 1024); /* room for 64 VFs */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
