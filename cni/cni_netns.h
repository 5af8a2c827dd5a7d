/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: network namespaces and the VF netdev's trip into the
 * Pod netns and back, over rtnetlink (libnl-route-3; uapi linux/rtnetlink.h,
 * linux/if_link.h).
 *
 * Into the Pod (ADD): in the host, set the netdev down, give it a temporary
 * unique name and an ifalias that marks it as this plugin's ("ibvf <PCI>
 * <host name>", so DEL finds it even without the cache), remove altnames
 * equal to its old name or to CNI_IFNAME (a stale altname makes a rename or
 * a netns move fail with EEXIST); move it; in the Pod, rename it to CNI_IFNAME
 * and set it up. Back (DEL / rollback): in the Pod set it down, give it a
 * temporary name, drop altnames that would collide, move it to the host,
 * rename it to its host name, clear the ifalias. Each direction undoes its
 * own partial work when a step fails.
 */
#ifndef IBVF_CNI_NETNS_H
#define IBVF_CNI_NETNS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "cni_config.h"

struct nl_sock;

/** A network namespace: an fd of it and an rtnetlink socket inside it. */
struct cni_ns {
	int fd;
	struct nl_sock *sk;
	char path[PATH_MAX]; /* as given; "host" for the plugin's own netns */
};

/**
 * cni_ns_open() - open the netns at @path (NULL: the plugin's own, i.e. the
 * runtime's / host netns) and an rtnetlink socket in it.
 * Return: 0; -ENOENT (no such path: the netns is gone); -EINVAL (@path is
 * not a network namespace); other negative errno. @err names @path.
 */
int cni_ns_open(struct cni_ns *ns, const char *path, char *err, size_t errlen);

/** cni_ns_close() - close what cni_ns_open() opened (safe on a zeroed struct with fd -1). */
void cni_ns_close(struct cni_ns *ns);

#define CNI_MAX_ALTNAMES 8
#define CNI_ALTNAME_LEN	 128 /* ALTIFNAMSIZ */

/** What the plugin needs to know about a netdev (RTM_NEWLINK attributes). */
struct cni_link {
	int ifindex;
	char name[CNI_IFNAME_LEN];
	unsigned flags; /* IFF_* */
	unsigned mtu;
	unsigned char addr[32]; /* IFLA_ADDRESS; IPoIB: 20 bytes */
	unsigned addr_len;
	char alias[256]; /* IFLA_IFALIAS */
	char altnames[CNI_MAX_ALTNAMES][CNI_ALTNAME_LEN];
	int n_altnames;
};

/**
 * cni_link_get() - look a netdev up in @ns by @name (or by @ifindex when
 * @name is NULL). Return: 0; -ENODEV when there is none; other -errno.
 */
int cni_link_get(struct cni_ns *ns, const char *name, int ifindex, struct cni_link *l, char *err,
		 size_t errlen);

/**
 * cni_link_set() - change a netdev in one RTM_NEWLINK: @name (NULL: keep),
 * @up (1 up, 0 down, -1 keep), @alias (NULL keep, "" clear).
 */
int cni_link_set(struct cni_ns *ns, int ifindex, const char *name, int up, const char *alias,
		 char *err, size_t errlen);

/** cni_link_del_altname() - RTM_DELLINKPROP of one IFLA_ALT_IFNAME. */
int cni_link_del_altname(struct cni_ns *ns, int ifindex, const char *altname, char *err,
			 size_t errlen);

/**
 * cni_link_hwaddr() - the hardware address as lowercase "xx:xx:..." (an
 * IPoIB address has 20 bytes: 4 of flags/QPN, then the 16-byte port GID
 * whose last 8 bytes are the port GUID). @buf needs 3 * 32 bytes.
 */
char *cni_link_hwaddr(const struct cni_link *l, char *buf, size_t len);

/**
 * cni_link_guid() - the port GUID inside a 20-byte IPoIB hardware address
 * (bytes 12..19, network order), as a host-order u64. Return: 0, or
 * -EINVAL when the address is not 20 bytes long.
 */
int cni_link_guid(const struct cni_link *l, unsigned long long *guid);

/** The ifalias this plugin puts on a VF netdev it moved: "ibvf <PCI> <host name>". */
#define CNI_ALIAS_PREFIX "ibvf "

/** Result of cni_netdev_to_pod(). */
struct cni_moved {
	char temp_name[CNI_IFNAME_LEN];
	int pod_ifindex;
	bool was_up;
	struct cni_link link; /* the netdev in the Pod netns, after the move */
};

/**
 * cni_netdev_to_pod() - move the netdev @host_name from @host into @pod as
 * @pod_name, up, marked with @alias. On failure the netdev is back in @host
 * under @host_name (best effort; a failed undo is logged and named in @err).
 * Return: 0; -ENODEV (no @host_name in the host); -EEXIST (@pod_name
 * exists in the Pod); other -errno.
 */
int cni_netdev_to_pod(struct cni_ns *host, struct cni_ns *pod, const char *host_name,
		      const char *pod_name, const char *alias, struct cni_moved *out, char *err,
		      size_t errlen);

/**
 * cni_netdev_to_host() - move the netdev @pod_name out of @pod into @host
 * and rename it @host_name there (when that name is taken, it keeps a
 * temporary name and a warning is logged); the ifalias is cleared, the
 * netdev left down. *@final_name (CNI_IFNAME_LEN bytes, may be NULL) gets
 * its name in the host. Return: 0; -ENODEV when @pod has no @pod_name;
 * other -errno (the netdev is then left where the failing step found it).
 */
int cni_netdev_to_host(struct cni_ns *pod, struct cni_ns *host, const char *pod_name,
		       const char *host_name, char *final_name, char *err, size_t errlen);

#endif /* IBVF_CNI_NETNS_H */
