// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: netns handles and the VF netdev's moves (libnl-route-3). */
#include "cni_netns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/link.h>

#include "clock.h"
#include "cni_nl.h"
#include "err.h"
#include "file_read.h"
#include "log.h"

int cni_ns_open(struct cni_ns *ns, const char *path, char *err, size_t errlen)
{
	memset(ns, 0, sizeof(*ns));
	ns->fd = -1;
	snprintf(ns->path, sizeof(ns->path), "%s", path ? path : "host");
	/* non-blocking, and it must be a network namespace (file_read.h) */
	ns->fd = path ? ibvf_file_open_netns(path, err, errlen) : cni_ns_current(err, errlen);
	if (ns->fd < 0) {
		int ret = ns->fd;

		ns->fd = -1;
		return ret;
	}
	ns->sk = cni_nl_socket(NETLINK_ROUTE, path ? ns->fd : -1, err, errlen);
	if (!ns->sk) {
		cni_ns_close(ns);
		return -EIO;
	}
	return 0;
}

void cni_ns_close(struct cni_ns *ns)
{
	if (ns->sk)
		nl_socket_free(ns->sk);
	ns->sk = NULL;
	if (ns->fd >= 0)
		close(ns->fd);
	ns->fd = -1;
}

/* --------------------------------------------------------------- links -- */

static int parse_link(struct nl_msg *m, void *arg)
{
	static struct nla_policy policy[IFLA_MAX + 1] = {
		[IFLA_IFNAME] = {.type = NLA_STRING, .maxlen = IFNAMSIZ},
		[IFLA_MTU] = {.type = NLA_U32},
		[IFLA_IFALIAS] = {.type = NLA_STRING, .maxlen = 256},
		[IFLA_PROP_LIST] = {.type = NLA_NESTED},
	};
	struct nlmsghdr *h = nlmsg_hdr(m);
	struct nlattr *tb[IFLA_MAX + 1], *a;
	struct cni_link *l = arg;
	struct ifinfomsg *ifi;
	int ret, rem;

	if (h->nlmsg_type != RTM_NEWLINK)
		return 0;
	ret = nlmsg_parse(h, sizeof(*ifi), tb, IFLA_MAX, policy);
	if (ret < 0)
		return cni_nlerr_to_errno(ret);
	if (!tb[IFLA_IFNAME])
		return -EPROTO; /* every RTM_NEWLINK names its device */
	ifi = nlmsg_data(h);
	memset(l, 0, sizeof(*l));
	l->ifindex = ifi->ifi_index;
	l->flags = ifi->ifi_flags;
	nla_strlcpy(l->name, tb[IFLA_IFNAME], sizeof(l->name));
	if (tb[IFLA_MTU])
		l->mtu = nla_get_u32(tb[IFLA_MTU]);
	if (tb[IFLA_ADDRESS] && (size_t)nla_len(tb[IFLA_ADDRESS]) <= sizeof(l->addr)) {
		l->addr_len = (unsigned)nla_len(tb[IFLA_ADDRESS]);
		memcpy(l->addr, nla_data(tb[IFLA_ADDRESS]), l->addr_len);
	}
	if (tb[IFLA_IFALIAS])
		nla_strlcpy(l->alias, tb[IFLA_IFALIAS], sizeof(l->alias));
	if (tb[IFLA_PROP_LIST]) {
		nla_for_each_nested(a, tb[IFLA_PROP_LIST], rem)
		{
			if (nla_type(a) != IFLA_ALT_IFNAME || l->n_altnames >= CNI_MAX_ALTNAMES)
				continue;
			nla_strlcpy(l->altnames[l->n_altnames++], a, CNI_ALTNAME_LEN);
		}
	}
	return 0;
}

int cni_link_get(struct cni_ns *ns, const char *name, int ifindex, struct cni_link *l, char *err,
		 size_t errlen)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = name ? 0 : ifindex};
	uint32_t mask = RTEXT_FILTER_SKIP_STATS;
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETLINK, NLM_F_REQUEST);
	int ret;

	if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    (name && nla_put_string(msg, IFLA_IFNAME, name) < 0) ||
	    nla_put_u32(msg, IFLA_EXT_MASK, mask) < 0) {
		nlmsg_free(msg);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	l->ifindex = 0;
	ret = cni_nl_talk(ns->sk, msg, parse_link, l);
	nlmsg_free(msg);
	if (!ret && !l->ifindex)
		ret = -ENODEV;
	if (ret == -ENODEV || ret == -ENOENT)
		return ibvf_errf(err, errlen, -ENODEV, "no netdev %s%.0d in netns %s",
				 name ? name : "with ifindex ", name ? 0 : ifindex, ns->path);
	if (ret)
		return ibvf_errf(err, errlen, ret, "reading netdev %s in netns %s: %s",
				 name ? name : "?", ns->path, strerror(-ret));
	return 0;
}

/* Send the change request libnl builds for @changes against a link known only by index. */
static int link_change(struct cni_ns *ns, int ifindex, struct rtnl_link *changes, bool clear_alias)
{
	struct rtnl_link *orig = rtnl_link_alloc();
	struct nl_msg *msg = NULL;
	int ret;

	if (!orig)
		return -ENOMEM;
	rtnl_link_set_ifindex(orig, ifindex);
	ret = rtnl_link_build_change_request(orig, changes, 0, &msg);
	rtnl_link_put(orig);
	if (ret < 0)
		return cni_nlerr_to_errno(ret);
	/* A zero-length IFLA_IFALIAS clears the alias (rtnetlink do_setlink -> dev_set_alias). */
	if (clear_alias && nla_put(msg, IFLA_IFALIAS, 0, NULL) < 0)
		ret = -ENOMEM;
	if (!ret)
		ret = cni_nl_talk(ns->sk, msg, NULL, NULL);
	if (ret == -EOPNOTSUPP && nlmsg_hdr(msg)->nlmsg_type == RTM_NEWLINK) {
		/* what rtnl_link_change() does for old kernels */
		nlmsg_hdr(msg)->nlmsg_type = RTM_SETLINK;
		nlmsg_hdr(msg)->nlmsg_seq = NL_AUTO_SEQ;
		ret = cni_nl_talk(ns->sk, msg, NULL, NULL);
	}
	nlmsg_free(msg);
	return ret;
}

int cni_link_set(struct cni_ns *ns, int ifindex, const char *name, int up, const char *alias,
		 char *err, size_t errlen)
{
	struct rtnl_link *chg = rtnl_link_alloc();
	int ret;

	if (!chg)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (name)
		rtnl_link_set_name(chg, name);
	if (up == 1)
		rtnl_link_set_flags(chg, IFF_UP);
	else if (up == 0)
		rtnl_link_unset_flags(chg, IFF_UP);
	if (alias && *alias)
		rtnl_link_set_ifalias(chg, alias);
	ret = link_change(ns, ifindex, chg, alias && !*alias);
	rtnl_link_put(chg);
	if (ret)
		return ibvf_errf(err, errlen, ret, "changing netdev %d in netns %s%s%s%s: %s",
				 ifindex, ns->path, name ? " (rename to " : "", name ? name : "",
				 name ? ")" : "", strerror(-ret));
	return 0;
}

/*
 * One RTM_NEWLINK for the whole move: into @to (IFLA_NET_NS_FD), renamed
 * @name there (NULL keeps its name), ifalias @alias ("" clears it, NULL leaves it), and up when
 * @up is 1 (-1 leaves the flags). rtnetlink's do_setlink() changes the netns
 * first (__dev_change_net_namespace() closes a running netdev, and uses
 * @name at once when the netdev's own name is taken in @to), then renames
 * it (down by then, so kernels before 6.2, which refuse to rename a running
 * netdev, accept it too), sets the alias, and last applies the flags. A
 * separate down and temporary rename before the move, as ip(8) or
 * host-device do it, cost each a synchronize_net() (docs/benchmarks.md,
 * "kernel operations per ADD and DEL"). When the move succeeds and a later
 * part fails, the netdev is in @to under some name: the callers look for it.
 */
static int link_move_as(struct cni_ns *ns, int ifindex, const struct cni_ns *to, const char *name,
			int up, const char *alias, char *err, size_t errlen)
{
	struct rtnl_link *chg = rtnl_link_alloc();
	uint64_t t0;
	int ret;

	if (!chg)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	rtnl_link_set_ns_fd(chg, to->fd);
	if (name)
		rtnl_link_set_name(chg, name);
	if (up == 1)
		rtnl_link_set_flags(chg, IFF_UP);
	if (alias && *alias)
		rtnl_link_set_ifalias(chg, alias);
	t0 = ibvf_mono_ns();
	ret = link_change(ns, ifindex, chg, alias && !*alias);
	rtnl_link_put(chg);
	/* the kernel's part of an ADD/DEL (rcu_barrier() in the move): docs/benchmarks.md */
	log_debug("netdev %d: netns move %s -> %s%s%s took %.3f ms (kernel)", ifindex, ns->path,
		  to->path, name ? " as " : "", name ? name : "",
		  (double)(ibvf_mono_ns() - t0) / 1e6);
	if (ret)
		return ibvf_errf(err, errlen, ret, "moving netdev %d from netns %s to %s%s%s: %s",
				 ifindex, ns->path, to->path, name ? " as " : "", name ? name : "",
				 strerror(-ret));
	return 0;
}

/* The move alone (the stepwise path): link_move_as() keeping name, alias and flags. */
static int link_move(struct cni_ns *ns, int ifindex, const struct cni_ns *to, char *err,
		     size_t errlen)
{
	return link_move_as(ns, ifindex, to, NULL, -1, NULL, err, errlen);
}

int cni_link_del_altname(struct cni_ns *ns, int ifindex, const char *altname, char *err,
			 size_t errlen)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = ifindex};
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_DELLINKPROP, NLM_F_REQUEST);
	struct nlattr *nest;
	int ret = -ENOMEM;

	if (msg && nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) >= 0 &&
	    (nest = nla_nest_start(msg, IFLA_PROP_LIST)) &&
	    nla_put_string(msg, IFLA_ALT_IFNAME, altname) >= 0) {
		nla_nest_end(msg, nest);
		ret = cni_nl_talk(ns->sk, msg, NULL, NULL);
	}
	nlmsg_free(msg);
	if (ret)
		return ibvf_errf(err, errlen, ret,
				 "removing altname %s of netdev %d in netns %s: %s", altname,
				 ifindex, ns->path, strerror(-ret));
	return 0;
}

char *cni_link_hwaddr(const struct cni_link *l, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < l->addr_len && off + 3 < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%02x", i ? ":" : "", l->addr[i]);
	return buf;
}

int cni_link_guid(const struct cni_link *l, unsigned long long *guid)
{
	if (l->addr_len != 20)
		return -EINVAL;
	*guid = 0;
	for (int i = 12; i < 20; i++)
		*guid = (*guid << 8) | l->addr[i];
	return 0;
}

/* Drop the altnames of @l equal to one of @names (NULL-terminated). */
static int drop_altnames(struct cni_ns *ns, const struct cni_link *l, const char *const *names,
			 char *err, size_t errlen)
{
	for (int i = 0; i < l->n_altnames; i++) {
		for (const char *const *n = names; *n; n++) {
			int ret;

			if (!**n || strcmp(l->altnames[i], *n))
				continue;
			ret = cni_link_del_altname(ns, l->ifindex, l->altnames[i], err, errlen);
			if (ret)
				return ret;
			log_debug("netdev %s: removed stale altname %s", l->name, l->altnames[i]);
			break;
		}
	}
	return 0;
}

/*
 * Set the netdev down, then rename it to a fresh temporary name
 * "<prefix><hex>" (and set @alias). Two messages: before Linux 6.2 a netdev
 * that is up cannot be renamed (dev_change_name() answers EBUSY), and
 * do_setlink() renames before it applies IFF_UP changes.
 */
static int temp_rename(struct cni_ns *ns, int ifindex, const char *prefix, const char *alias,
		       char name[CNI_IFNAME_LEN], char *err, size_t errlen)
{
	int ret = cni_link_set(ns, ifindex, NULL, 0, NULL, err, errlen);

	if (ret)
		return ret;
	ret = -EEXIST;

	for (int tries = 0; tries < 4 && ret == -EEXIST; tries++) {
		unsigned r = (unsigned)ifindex;

		if (tries && getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = (unsigned)getpid() * 2654435761u + (unsigned)tries;
		snprintf(name, CNI_IFNAME_LEN, "%s%x", prefix, r);
		ret = cni_link_set(ns, ifindex, name, -1, alias, err, errlen);
	}
	return ret;
}

/*
 * The checks before a move to the Pod: @pod has no netdev @pod_name yet
 * (-EEXIST) and @host has @host_name (its link into @l); @out zeroed, with
 * the netdev's IFF_UP in was_up. Return 0 or a negative errno with @err.
 */
static int to_pod_check(struct cni_ns *host, struct cni_ns *pod, const char *host_name,
			const char *pod_name, struct cni_link *l, struct cni_moved *out, char *err,
			size_t errlen)
{
	int ret;

	memset(out, 0, sizeof(*out));
	if (!cni_link_get(pod, pod_name, 0, l, NULL, 0))
		return ibvf_errf(err, errlen, -EEXIST, "netns %s already has a netdev %s",
				 pod->path, pod_name);
	ret = cni_link_get(host, host_name, 0, l, err, errlen);
	if (ret)
		return ret;
	out->was_up = l->flags & IFF_UP;
	return 0;
}

/*
 * The stepwise move: down, temporary name and alias, move, then the Pod name
 * and up in the Pod. The fallback of cni_netdev_to_pod() when the one-message
 * move leaves the netdev untouched in the host.
 */
static int to_pod_stepwise(struct cni_ns *host, struct cni_ns *pod, const char *host_name,
			   const char *pod_name, const char *alias, struct cni_moved *out,
			   char *err, size_t errlen)
{
	const char *stale[] = {host_name, pod_name, NULL};
	char e2[IBVF_ERR_LEN];
	struct cni_link l;
	int ret, idx;

	ret = to_pod_check(host, pod, host_name, pod_name, &l, out, err, errlen);
	if (ret)
		return ret;
	idx = l.ifindex;

	/* 1. down, temporary name, alias */
	ret = temp_rename(host, idx, "ibvf", alias, out->temp_name, err, errlen);
	if (ret)
		goto undo_up;
	/* 2. stale altnames that would collide in the host later or in the Pod */
	ret = cni_link_get(host, NULL, idx, &l, err, errlen);
	if (!ret)
		ret = drop_altnames(host, &l, stale, err, errlen);
	/* 3. move */
	if (!ret)
		ret = link_move(host, idx, pod, err, errlen);
	if (ret)
		goto undo_name;
	/* 4. in the Pod: its ifindex may differ when the old one is taken there */
	ret = cni_link_get(pod, out->temp_name, 0, &l, err, errlen);
	if (!ret)
		ret = cni_link_set(pod, l.ifindex, pod_name, 1, NULL, err, errlen);
	if (!ret)
		ret = cni_link_get(pod, NULL, l.ifindex, &out->link, err, errlen);
	if (!ret) {
		out->pod_ifindex = l.ifindex;
		return 0;
	}
	/* undo: back to the host under the temporary name, then as below */
	if (!cni_link_get(pod, NULL, l.ifindex, &l, e2, sizeof(e2))) {
		if (cni_link_set(pod, l.ifindex, NULL, 0, NULL, e2, sizeof(e2)) ||
		    cni_link_set(pod, l.ifindex, out->temp_name, -1, NULL, e2, sizeof(e2)) ||
		    link_move(pod, l.ifindex, host, e2, sizeof(e2)))
			goto undo_failed;
		if (cni_link_get(host, out->temp_name, 0, &l, e2, sizeof(e2)))
			goto undo_failed;
		idx = l.ifindex;
	}
undo_name:
	if (cni_link_set(host, idx, host_name, -1, "", e2, sizeof(e2)))
		goto undo_failed;
undo_up:
	if (out->was_up && cni_link_set(host, idx, NULL, 1, NULL, e2, sizeof(e2)))
		goto undo_failed;
	return ret;
undo_failed:
	log_err("undoing the move of netdev %s failed: %s", host_name, e2);
	if (err && strlen(err) + 1 < errlen)
		snprintf(err + strlen(err), errlen - strlen(err), "; undoing it failed too: %s",
			 e2);
	return ret;
}

/* Same hardware address: the netdev @want, wherever a move took it (the ifindex may change). */
static bool same_netdev(const struct cni_link *a, const struct cni_link *want)
{
	return a->addr_len == want->addr_len && !memcmp(a->addr, want->addr, a->addr_len);
}

/*
 * The netdev @want after a move into @ns whose rename or flags failed: under
 * @name1 or @name2 there, told apart from another netdev of that name by its
 * hardware address. 0 (@out filled) or -ENODEV.
 */
static int find_moved(struct cni_ns *ns, const char *name1, const char *name2,
		      const struct cni_link *want, struct cni_link *out)
{
	const char *names[] = {name1, name2};

	for (int i = 0; i < 2; i++)
		if (names[i] && *names[i] && !cni_link_get(ns, names[i], 0, out, NULL, 0) &&
		    same_netdev(out, want))
			return 0;
	return -ENODEV;
}

int cni_netdev_to_pod(struct cni_ns *host, struct cni_ns *pod, const char *host_name,
		      const char *pod_name, const char *alias, struct cni_moved *out, char *err,
		      size_t errlen)
{
	const char *stale[] = {host_name, pod_name, NULL};
	char e2[IBVF_ERR_LEN];
	struct cni_link l, m;
	int ret;

	ret = to_pod_check(host, pod, host_name, pod_name, &l, out, err, errlen);
	if (ret)
		return ret;
	/* stale altnames that would collide in the host later or in the Pod */
	ret = drop_altnames(host, &l, stale, err, errlen);
	if (ret)
		return ret;
	/* move, Pod name, alias, up: one message (link_move_as()) */
	ret = link_move_as(host, l.ifindex, pod, pod_name, 1, alias, err, errlen);
	if (!ret && !cni_link_get(pod, pod_name, 0, &out->link, err, errlen) &&
	    same_netdev(&out->link, &l)) {
		out->pod_ifindex = out->link.ifindex;
		return 0;
	}
	if (!ret)
		ret = ibvf_errf(err, errlen, -ENODEV,
				"netdev %s is not in netns %s as %s after "
				"its move",
				host_name, pod->path, pod_name);
	if (!cni_link_get(host, host_name, 0, &m, e2, sizeof(e2)) && same_netdev(&m, &l))
		/* the move did not happen: the stepwise way, with its own errors and undo */
		return to_pod_stepwise(host, pod, host_name, pod_name, alias, out, err, errlen);
	/* moved, but its rename, alias or up failed: back under its host name */
	e2[0] = 0;
	if (find_moved(pod, host_name, pod_name, &l, &m))
		snprintf(e2, sizeof(e2), "no netdev %s or %s with its address in netns %.256s",
			 host_name, pod_name, pod->path);
	else if (link_move_as(pod, m.ifindex, host, host_name, out->was_up ? 1 : -1, "", e2,
			      sizeof(e2)) == 0)
		e2[0] = 0;
	if (e2[0]) {
		log_err("undoing the move of netdev %s failed: %s", host_name, e2);
		if (err && strlen(err) + 1 < errlen)
			snprintf(err + strlen(err), errlen - strlen(err),
				 "; undoing it failed too: %s", e2);
	}
	return ret;
}

/*
 * The stepwise move back: down, temporary name, move, the host name. The
 * fallback of cni_netdev_to_host() when the one-message move leaves the
 * netdev in the Pod, and the way when its host name is unknown.
 */
static int to_host_stepwise(struct cni_ns *pod, struct cni_ns *host, const char *pod_name,
			    const char *host_name, char *final_name, char *err, size_t errlen)
{
	char temp[CNI_IFNAME_LEN], e2[IBVF_ERR_LEN];
	const char *stale[] = {pod_name, host_name, NULL};
	struct cni_link l;
	int ret;

	ret = cni_link_get(pod, pod_name, 0, &l, err, errlen);
	if (ret)
		return ret;
	ret = temp_rename(pod, l.ifindex, "ibvr", NULL, temp, err, errlen);
	if (!ret)
		ret = cni_link_get(pod, NULL, l.ifindex, &l, err, errlen);
	if (!ret)
		ret = drop_altnames(pod, &l, stale, err, errlen);
	if (!ret)
		ret = link_move(pod, l.ifindex, host, err, errlen);
	if (ret)
		return ret;
	ret = cni_link_get(host, temp, 0, &l, err, errlen);
	if (ret)
		return ret;
	if (final_name)
		snprintf(final_name, CNI_IFNAME_LEN, "%s", temp);
	ret = host_name && *host_name
		      ? cni_link_set(host, l.ifindex, host_name, -1, "", e2, sizeof(e2))
		      : -ENOENT;
	if (ret) {
		log_warn("netdev %s is back in the host netns as %s: %s", pod_name, temp,
			 ret == -ENOENT ? "its host name is unknown" : e2);
		if (cni_link_set(host, l.ifindex, NULL, -1, "", e2, sizeof(e2)))
			log_warn("clearing the ifalias of %s: %s", temp, e2);
		return 0;
	}
	if (final_name)
		snprintf(final_name, CNI_IFNAME_LEN, "%s", host_name);
	return 0;
}

int cni_netdev_to_host(struct cni_ns *pod, struct cni_ns *host, const char *pod_name,
		       const char *host_name, char *final_name, char *err, size_t errlen)
{
	const char *stale[] = {pod_name, host_name, NULL};
	char temp[CNI_IFNAME_LEN], e2[IBVF_ERR_LEN];
	struct cni_link l, m;
	int ret;

	if (!host_name || !*host_name)
		return to_host_stepwise(pod, host, pod_name, host_name, final_name, err, errlen);
	ret = cni_link_get(pod, pod_name, 0, &l, err, errlen);
	if (ret)
		return ret;
	ret = drop_altnames(pod, &l, stale, err, errlen);
	if (ret)
		return ret;
	/* move (which sets it down), host name, alias cleared: one message (link_move_as()) */
	ret = link_move_as(pod, l.ifindex, host, host_name, -1, "", e2, sizeof(e2));
	if (!ret) {
		if (final_name)
			snprintf(final_name, CNI_IFNAME_LEN, "%s", host_name);
		return 0;
	}
	if (!cni_link_get(pod, pod_name, 0, &m, NULL, 0) && same_netdev(&m, &l))
		/* not moved (both names taken in the host?): the stepwise way */
		return to_host_stepwise(pod, host, pod_name, host_name, final_name, err, errlen);
	/* moved, but the rename (its host name taken meanwhile) or the alias failed */
	ret = find_moved(host, host_name, pod_name, &l, &m);
	if (ret)
		return ibvf_errf(err, errlen, ret,
				 "netdev %s left netns %s but is not in netns %s "
				 "as %s or %s: %s",
				 pod_name, pod->path, host->path, host_name, pod_name, e2);
	if (strcmp(m.name, host_name)) {
		ret = temp_rename(host, m.ifindex, "ibvr", NULL, temp, err, errlen);
		if (ret)
			return ret;
		snprintf(m.name, sizeof(m.name), "%s", temp);
	}
	log_warn("netdev %s is back in the host netns as %s: %s", pod_name, m.name, e2);
	if (cni_link_set(host, m.ifindex, NULL, -1, "", e2, sizeof(e2)))
		log_warn("clearing the ifalias of %s: %s", m.name, e2);
	if (final_name)
		snprintf(final_name, CNI_IFNAME_LEN, "%s", m.name);
	return 0;
}
