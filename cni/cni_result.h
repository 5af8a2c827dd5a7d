/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: result, error and version objects (CNI spec 1.1.0
 * section 5 "Result Types"), and conversion between the result layouts of
 * the spec versions a runtime may ask for:
 *   0.1.0 / 0.2.0  "ip4" / "ip6" objects with their own routes;
 *   0.3.x / 0.4.0  "interfaces", "ips" (with "version": "4"|"6"), "routes";
 *   1.0.0          as 0.4.0 without ips[].version;
 *   1.1.0          adds interfaces[].mtu/socketPath/pciID and
 *                  routes[].mtu/advmss/priority/table/scope.
 * Inside the plugin a result is always held in the 1.1.0 layout.
 */
#ifndef IBVF_CNI_RESULT_H
#define IBVF_CNI_RESULT_H

#include <jansson.h>
#include <stddef.h>

/** CNI error codes (spec section 5 "Error"); 100+ are ib-sriov's own. */
enum cni_error_code {
	CNI_ERR_INCOMPATIBLE_VERSION = 1,
	CNI_ERR_UNSUPPORTED_FIELD = 2,
	CNI_ERR_UNKNOWN_CONTAINER = 3,
	CNI_ERR_INVALID_ENV = 4,
	CNI_ERR_IO = 5,
	CNI_ERR_DECODE = 6,
	CNI_ERR_INVALID_CONFIG = 7,
	CNI_ERR_TRY_AGAIN = 11,
	CNI_ERR_NOT_AVAILABLE = 50,
	CNI_ERR_NOT_AVAILABLE_LIMITED = 51,
	CNI_ERR_VF = 100,	/* VF lookup, netlink, netns or RDMA device move failed */
	CNI_ERR_IPAM = 101,	/* the IPAM plugin failed or its result could not be applied */
	CNI_ERR_DAEMON = 102,	/* ibvfd refused or failed the request */
	CNI_ERR_RC_CHECK = 103, /* the RC QP check failed: the VF is not handed over */
	CNI_ERR_CHECK = 104,	/* CHECK found the attachment not as expected */
	CNI_ERR_STATE = 105,	/* the plugin's cache could not be read or written */
};

/**
 * cni_result_normalize() - copy a result of any supported version (an IPAM
 * plugin's output or a prevResult) into the 1.1.0 layout and validate it:
 * every ips[].address is an IP address in CIDR notation, gateways and route
 * destinations parse, ips[].interface indexes an existing interface.
 * @fallback_version: the version to assume when @in has no "cniVersion".
 *
 * Return: 0 and a new reference in *@out; -EINVAL (@err says what), -ENOMEM.
 */
int cni_result_normalize(json_t *in, const char *fallback_version, json_t **out, char *err,
			 size_t errlen);

/**
 * cni_result_convert() - a new result object for spec version @version
 * (a supported "X.Y.Z") from @res in the 1.1.0 layout; "cniVersion" set to
 * @version. Return: the new reference, NULL on allocation failure.
 */
json_t *cni_result_convert(json_t *res, const char *version);

/** cni_result_new() - an empty 1.1.0-layout result (no interfaces, ips, routes). */
json_t *cni_result_new(void);

/**
 * cni_result_add_interface() - append an interface; @mac, @sandbox, @pci_id
 * may be NULL, @mtu 0 means unknown. Return: its index, or -ENOMEM.
 */
int cni_result_add_interface(json_t *res, const char *name, const char *mac, unsigned mtu,
			     const char *sandbox, const char *pci_id);

/**
 * cni_result_merge_ipam() - append the ips (with "interface" = @iface),
 * routes and, when @res has none, the dns of the normalized IPAM result @ipam.
 * Return: 0 or -ENOMEM.
 */
int cni_result_merge_ipam(json_t *res, json_t *ipam, int iface);

/**
 * cni_error_new() - the error object {cniVersion, code, msg, details}
 * (spec section 5 "Error"); @details may be NULL.
 */
json_t *cni_error_new(const char *version, int code, const char *msg, const char *details);

/**
 * cni_version_result() - {cniVersion, supportedVersions} for VERSION
 * (spec section 5 "Version"); @version is the input's cniVersion or NULL.
 */
json_t *cni_version_result(const char *version);

/** cni_ip_family() - 4 or 6 for an address with or without "/prefix"; 0 if invalid. */
int cni_ip_family(const char *addr);

#endif /* IBVF_CNI_RESULT_H */
