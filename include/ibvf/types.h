/* SPDX-License-Identifier: MIT */
/*
 * ibvf core types: InfiniBand GUIDs, partition keys (PKeys), PCI addresses
 * and VF link states. These are the ONE validator of each rule: the CNI
 * plugin, the daemon's API, the VF inventory and ibvfctl all call them.
 *
 * Conventions used by every ibvf function that takes an error buffer:
 *   - the return value is 0 (or a non-negative count) on success and a
 *     negative errno on failure;
 *   - when @err is not NULL, a one-line human-readable reason is written to
 *     it (NUL-terminated, truncated to @errlen bytes). It never contains
 *     credentials.
 */
#ifndef IBVF_TYPES_H
#define IBVF_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Buffer size for the canonical colon form "00:02:c9:03:00:00:10:01" + NUL. */
#define IBVF_GUID_STR_LEN 24
/** Buffer size for the UFM form "0002c90300001001" (16 lowercase hex) + NUL. */
#define IBVF_GUID_HEX_LEN 17

/** The all-ones GUID. IBTA reserves it; ibvf never assigns it. */
#define IBVF_GUID_ALL_ONES UINT64_MAX

/**
 * ibvf_guid_parse() - parse an EUI-64 GUID.
 * @s:      "00:02:c9:03:00:00:10:01" (exactly 8 colon-separated byte pairs),
 *          "0x0002c90300001001" or "0002c90300001001" (exactly 16 hex digits,
 *          optional 0x); hex is case-insensitive; no surrounding white space.
 * @out:    the GUID as a host-order u64 whose value reads like the string, i.e.
 *          "00:11:22:33:44:55:66:77" gives 0x0011223344556677 (iproute2
 *          lib/utils.c get_guid() does the same; netlink struct ifla_vf_guid
 *          carries this host-order value).
 *
 * Zero and all-ones parse successfully: use ibvf_guid_is_assignable() to
 * decide whether a GUID may be handed to a VF.
 *
 * Return: 0, or -EINVAL with a message that quotes the input.
 */
int ibvf_guid_parse(const char *s, uint64_t *out, char *err, size_t errlen);

/** ibvf_guid_format() - canonical colon form, lowercase; @buf has IBVF_GUID_STR_LEN bytes. */
char *ibvf_guid_format(uint64_t guid, char buf[IBVF_GUID_STR_LEN]);

/**
 * ibvf_guid_format_hex() - 16 lowercase hex digits without 0x or colons, the
 * form UFM REST returns and accepts (UFM REST API guide, PKey GUIDs API).
 */
char *ibvf_guid_format_hex(uint64_t guid, char buf[IBVF_GUID_HEX_LEN]);

/**
 * ibvf_guid_is_assignable() - false for 0 and all-ones.
 *
 * A port GUID of 0 is invalid (an SM refuses to assign a LID to it: OpenSM
 * logs "ERR 0D17: Got Zero Port GUID!"); all-ones is reserved (IBTA vol. 1,
 * 4.1.1 EUI-64 GUIDs).
 */
bool ibvf_guid_is_assignable(uint64_t guid);

/* ---------------------------------------------------------------- PKeys -- */

/** P_Key membership bit (IBTA vol. 1, 10.9.1.2): set = full member, clear = limited. */
#define IBVF_PKEY_FULL_BIT 0x8000u
/** The 15-bit partition key without the membership bit. */
#define IBVF_PKEY_KEY_MASK 0x7fffu
/** The default partition key (IBTA 10.9.1.1); every port holds 0x7fff or 0xffff. */
#define IBVF_PKEY_DEFAULT 0x7fffu

/** Membership of a port in a partition (IBTA 10.9.1.2). */
enum ibvf_membership {
	IBVF_MEMBER_LIMITED = 0,
	IBVF_MEMBER_FULL = 1,
};

/**
 * ibvf_pkey_parse() - parse a P_Key: "0x8001", "0X0001", "32769" (decimal).
 * @out: host-order u16; bit 15 (0x8000) is the membership bit (full when set),
 *       bits 0..14 the partition key.
 *
 * Return: 0, or -EINVAL (junk, negative, > 0xffff) with the input quoted.
 */
int ibvf_pkey_parse(const char *s, uint16_t *out, char *err, size_t errlen);

/** ibvf_pkey_key() - the 15-bit partition key of a P_Key value. */
static inline uint16_t ibvf_pkey_key(uint16_t pkey)
{
	return pkey & IBVF_PKEY_KEY_MASK;
}

/** ibvf_pkey_is_full() - true when the membership bit is set. */
static inline bool ibvf_pkey_is_full(uint16_t pkey)
{
	return (pkey & IBVF_PKEY_FULL_BIT) != 0;
}

/**
 * ibvf_pkey_check_tenant() - may this partition key be given to a tenant?
 * @pkey: a P_Key; the membership bit is ignored.
 * @allow_default: accept 0x7fff (the default partition) too.
 *
 * Key 0x0000 is invalid (IBTA 10.9.1.1 reserves it; OpenSM auto-generates a
 * key for it); 0x7fff is the default partition that every port is in.
 *
 * Return: 0, or -EINVAL with a reason.
 */
int ibvf_pkey_check_tenant(uint16_t pkey, bool allow_default, char *err, size_t errlen);

/** ibvf_membership_name() - "full" or "limited". */
const char *ibvf_membership_name(enum ibvf_membership m);

/** ibvf_membership_parse() - "full" | "limited" (case-insensitive); -EINVAL otherwise. */
int ibvf_membership_parse(const char *s, enum ibvf_membership *out, char *err, size_t errlen);

/**
 * ibvf_pkey_member() - a tenant's membership in a partition, from a P_Key and
 * an optional membership word (the ib-sriov-cni / ib-kubernetes "pkey" +
 * "membership" pair, as the CNI network configuration and the daemon API's
 * prepare "pkeys" carry it).
 * @pkey:          a P_Key; bit 15 set means full member (IBTA vol. 1, 10.9.1.2).
 * @membership:    "full" | "limited" (case-insensitive), or NULL when not given.
 * @allow_default: accept partition key 0x7fff (the default partition) too.
 * @out:           the 15-bit key with bit 15 set for full membership.
 *
 * Rules: without a word the membership is full (ib-kubernetes always asks UFM
 * for "full"); a P_Key with bit 15 set and the word "limited" contradicts
 * itself (IBTA: bit 15 IS the membership) and is refused; then
 * ibvf_pkey_check_tenant() (key 0x0000 never; 0x7fff only if @allow_default).
 *
 * Return: 0, or -EINVAL with a reason that quotes the input.
 */
int ibvf_pkey_member(uint16_t pkey, const char *membership, bool allow_default, uint16_t *out,
		     char *err, size_t errlen);

/** ibvf_pkey_member_parse() - ibvf_pkey_parse() of @pkey, then ibvf_pkey_member(). */
int ibvf_pkey_member_parse(const char *pkey, const char *membership, bool allow_default,
			   uint16_t *out, char *err, size_t errlen);

/* ------------------------------------------------------- PCI addresses -- */

/** Buffer size for the longest PCI address "ffffffff:ff:1f.7" + NUL. */
#define IBVF_PCI_ADDR_LEN 17

/**
 * ibvf_pci_addr_parse() - a PCI device address as the kernel names it.
 * @s:   "DDDD:BB:dd.f": domain of 4 to 8 hex digits, bus 2 hex digits, device
 *       2 hex digits <= 0x1f, function 1 digit <= 7; hex in either case; no
 *       white space. The kernel names a device with pci_name(),
 *       "%04x:%02x:%02x.%d" of (domain, bus, PCI_SLOT(devfn), PCI_FUNC(devfn))
 *       (drivers/pci/probe.c, pci_setup_device()); the domain is an int, so
 *       at most 8 digits (VMD domains start at 0x10000: "10000:01:00.2").
 *       A domain longer than 4 digits with a leading 0 is refused: %04x never
 *       writes it, so no device has that name.
 * @out: NULL, or IBVF_PCI_ADDR_LEN bytes for the name in lower case (the
 *       sysfs name of the device).
 *
 * Return: 0, or -EINVAL with the input quoted and the expected form.
 */
int ibvf_pci_addr_parse(const char *s, char *out, char *err, size_t errlen);

/** ibvf_pci_addr_valid() - ibvf_pci_addr_parse() without the normalised name. */
static inline int ibvf_pci_addr_valid(const char *s, char *err, size_t errlen)
{
	return ibvf_pci_addr_parse(s, NULL, err, errlen);
}

/* ------------------------------------------------------ VF link state -- */

/** VF link state (values of IFLA_VF_LINK_STATE_*, uapi linux/if_link.h). */
enum ibvf_vf_link_state {
	IBVF_VF_LINK_AUTO = 0,	  /* follow the PF port (mlx5 policy Follow) */
	IBVF_VF_LINK_ENABLE = 1,  /* always up (Up) */
	IBVF_VF_LINK_DISABLE = 2, /* always down (Down) */
};

/** ibvf_vf_link_state_name() - "auto", "enable", "disable" (the normalised spelling). */
const char *ibvf_vf_link_state_name(enum ibvf_vf_link_state s);

/**
 * ibvf_vf_link_state_parse() - "auto" | "enable" | "disable", in any case.
 *
 * The words are those of ib-sriov-cni's "link_state" and of
 * `ip link set DEV vf N state auto|enable|disable` (iproute2). Case rule,
 * decided once for every caller: case-insensitive (as ibvf reads every other
 * keyword: membership, hex digits), so each configuration ib-sriov-cni accepts
 * is accepted; the normalised spelling is ibvf_vf_link_state_name().
 *
 * Return: 0, or -EINVAL naming the three words.
 */
int ibvf_vf_link_state_parse(const char *s, enum ibvf_vf_link_state *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* IBVF_TYPES_H */
