/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: delegation to the IPAM plugin (CNI spec 1.1.0
 * section 4 "Plugin Delegation"): find ipam.type in CNI_PATH, run it with the
 * runtime's environment and the complete network configuration on stdin,
 * its stderr going to ours; and applying its result in the Pod netns
 * (addresses and routes over rtnetlink, libnl-route-3).
 */
#ifndef IBVF_CNI_IPAM_H
#define IBVF_CNI_IPAM_H

#include <jansson.h>
#include <stddef.h>

#include "cni_netns.h"

/** Longest an IPAM plugin may run before it is killed, ms. */
#define CNI_IPAM_TIMEOUT_MS 120000

/** One delegated call. NULL overrides inherit the plugin's own environment. */
struct cni_ipam_call {
	const char *type;	  /* ipam.type: the plugin's file name */
	const char *cni_path;	  /* CNI_PATH */
	const char *command;	  /* CNI_COMMAND to pass */
	const char *container_id; /* CNI_CONTAINERID override (GC of another attachment) */
	const char *ifname;	  /* CNI_IFNAME override */
	const char *netns;	  /* CNI_NETNS override; "" removes it */
	const char *conf;	  /* configuration text for stdin */
	size_t conf_len;
	unsigned timeout_ms; /* 0: CNI_IPAM_TIMEOUT_MS */
	int remote_code;     /* out: the plugin's CNI error code, 0 if none */
};

/**
 * cni_ipam_exec() - run the call. *@out (may be NULL) gets the plugin's JSON
 * output (NULL when it printed nothing). The plugin is run once with the
 * configuration as given, as Go's libcni delegates. Only when an ADD, DEL or
 * CHECK is refused for its cniVersion (CNI error code 1, or a message naming
 * the CNI version) is the plugin's VERSION answer asked and, when it lists
 * a version both it and ib-sriov support other than the configuration's,
 * the call made once more with the highest such version (the result is
 * converted back by the caller, cni_result_normalize()); else the refusal is
 * returned.
 * Return: 0; -ENOENT (not found in CNI_PATH); -ETIMEDOUT (killed);
 * -EREMOTEIO (it failed: c->remote_code and @err carry its code, msg and
 * details); -EPROTO (output not JSON); other -errno.
 */
int cni_ipam_exec(struct cni_ipam_call *c, json_t **out, char *err, size_t errlen);

/**
 * cni_ipam_max_version() - the highest spec version the plugin reports for
 * VERSION (major*10000+minor*100+patch), to decide whether it knows GC and
 * STATUS (1.1.0). Return: 0 or -errno.
 */
int cni_ipam_max_version(const char *type, const char *cni_path, unsigned *version, char *err,
			 size_t errlen);

/**
 * cni_ipam_apply() - configure the ips and routes of the normalized result
 * @res on netdev @ifindex in @ns: addresses (IPv6 with IFA_F_NODAD, IPv4
 * with broadcast), then routes (a route without "gw" uses the gateway of
 * the first address of its family, as the reference plugins do).
 * Return: 0 or -errno with the address/route in @err.
 */
int cni_ipam_apply(struct cni_ns *ns, int ifindex, json_t *res, char *err, size_t errlen);

/**
 * cni_ipam_check() - every ips[] entry of @res whose "interface" is @iface
 * (or that has none) is configured on @ifindex in @ns.
 * Return: 0; -ENOENT naming the missing address; other -errno.
 */
int cni_ipam_check(struct cni_ns *ns, int ifindex, json_t *res, int iface, char *err,
		   size_t errlen);

#endif /* IBVF_CNI_IPAM_H */
