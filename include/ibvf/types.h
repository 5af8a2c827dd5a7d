/* SPDX-License-Identifier: MIT */
/*
 * ibvf core types: InfiniBand GUIDs and partition keys (PKeys).
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

#ifdef __cplusplus
}
#endif
#endif /* IBVF_TYPES_H */
