// SPDX-License-Identifier: MIT
/*
 * GUID, P_Key, PCI address and VF link state parsing/formatting
 * (include/ibvf/types.h): the one validator of each rule.
 */
#include <ibvf/types.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "err.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Parse exactly @n hex digits of @s into *v (appending). */
static int parse_hex_digits(const char *s, size_t n, uint64_t *v)
{
	for (size_t i = 0; i < n; i++) {
		int h = hexval((unsigned char)s[i]);

		if (h < 0)
			return -EINVAL;
		*v = (*v << 4) | (uint64_t)h;
	}
	return 0;
}

static int parse_colon_form(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	/* "xx:xx:xx:xx:xx:xx:xx:xx" is 23 characters, as iproute2 requires */
	if (strlen(s) != 23)
		return -EINVAL;
	for (int i = 0; i < 8; i++) {
		const char *p = s + i * 3;

		if (parse_hex_digits(p, 2, &v))
			return -EINVAL;
		if (i < 7 && p[2] != ':')
			return -EINVAL;
	}
	*out = v;
	return 0;
}

int ibvf_guid_parse(const char *s, uint64_t *out, char *err, size_t errlen)
{
	const char *p;
	uint64_t v = 0;

	if (!s || !*s)
		return ibvf_errf(err, errlen, -EINVAL, "empty GUID");
	if (strchr(s, ':')) {
		if (parse_colon_form(s, out))
			goto bad;
		return 0;
	}
	p = s;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	if (strlen(p) != 16 || parse_hex_digits(p, 16, &v))
		goto bad;
	*out = v;
	return 0;
bad:
	return ibvf_errf(err, errlen, -EINVAL,
			 "invalid GUID '%.64s': expected xx:xx:xx:xx:xx:xx:xx:xx, 0x + 16 hex "
			 "digits, or 16 hex digits",
			 s);
}

/*
 * The GUID formats by table, not snprintf(): a prepare's reply and log lines
 * format its GUID several times, and snprintf() with eight arguments was
 * ~2% of ibvfd's CPU in a 1,024-prepare burst (issue 17).
 */
static const char hex_digit[] = "0123456789abcdef";

char *ibvf_guid_format(uint64_t g, char buf[IBVF_GUID_STR_LEN])
{
	for (int i = 0; i < 8; i++) {
		unsigned b = (unsigned)(g >> (56 - 8 * i)) & 0xff;

		buf[3 * i] = hex_digit[b >> 4];
		buf[3 * i + 1] = hex_digit[b & 0xf];
		buf[3 * i + 2] = i < 7 ? ':' : 0;
	}
	return buf;
}

char *ibvf_guid_format_hex(uint64_t g, char buf[IBVF_GUID_HEX_LEN])
{
	for (int i = 0; i < 16; i++)
		buf[i] = hex_digit[(g >> (60 - 4 * i)) & 0xf];
	buf[16] = 0;
	return buf;
}

bool ibvf_guid_is_assignable(uint64_t g)
{
	return g != 0 && g != IBVF_GUID_ALL_ONES;
}

int ibvf_pkey_parse(const char *s, uint16_t *out, char *err, size_t errlen)
{
	uint64_t v = 0;
	const char *p;

	if (!s || !*s)
		return ibvf_errf(err, errlen, -EINVAL, "empty PKey");
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		p = s + 2;
		if (!*p || strlen(p) > 4 || parse_hex_digits(p, strlen(p), &v))
			goto bad;
	} else {
		if (strlen(s) > 5)
			goto bad;
		for (p = s; *p; p++) {
			if (!isdigit((unsigned char)*p))
				goto bad;
			v = v * 10 + (uint64_t)(*p - '0');
		}
		if (v > 0xffff)
			goto bad;
	}
	*out = (uint16_t)v;
	return 0;
bad:
	return ibvf_errf(err, errlen, -EINVAL,
			 "invalid PKey '%.64s': expected 0x0000..0xffff (hex) or 0..65535 "
			 "(decimal)",
			 s);
}

int ibvf_pkey_check_tenant(uint16_t pkey, bool allow_default, char *err, size_t errlen)
{
	uint16_t k = ibvf_pkey_key(pkey);

	if (k == 0)
		return ibvf_errf(err, errlen, -EINVAL,
				 "PKey 0x%04x: partition key 0x0000 is reserved (IBTA 10.9.1.1)",
				 pkey);
	if (k == IBVF_PKEY_DEFAULT && !allow_default)
		return ibvf_errf(err, errlen, -EINVAL,
				 "PKey 0x%04x is the default partition (0x7fff), which every "
				 "port is in; refused for tenant use (set allow_default_pkey to "
				 "permit it)",
				 pkey);
	return 0;
}

int ibvf_pkey_member(uint16_t pkey, const char *membership, bool allow_default, uint16_t *out,
		     char *err, size_t errlen)
{
	enum ibvf_membership m = IBVF_MEMBER_FULL;
	int ret;

	if (membership) {
		ret = ibvf_membership_parse(membership, &m, err, errlen);
		if (ret)
			return ret;
	}
	if (ibvf_pkey_is_full(pkey) && m == IBVF_MEMBER_LIMITED)
		return ibvf_errf(err, errlen, -EINVAL,
				 "P_Key 0x%04x has the full-member bit 0x8000 but membership is "
				 "\"limited\" (use 0x%04x)",
				 pkey, ibvf_pkey_key(pkey));
	ret = ibvf_pkey_check_tenant(pkey, allow_default, err, errlen);
	if (ret)
		return ret;
	*out = ibvf_pkey_key(pkey) | (m == IBVF_MEMBER_FULL ? IBVF_PKEY_FULL_BIT : 0);
	return 0;
}

int ibvf_pkey_member_parse(const char *pkey, const char *membership, bool allow_default,
			   uint16_t *out, char *err, size_t errlen)
{
	uint16_t v;
	int ret = ibvf_pkey_parse(pkey, &v, err, errlen);

	return ret ? ret : ibvf_pkey_member(v, membership, allow_default, out, err, errlen);
}

/* ------------------------------------------------------- PCI addresses -- */

static bool hex_run(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (hexval((unsigned char)s[i]) < 0)
			return false;
	return true;
}

int ibvf_pci_addr_parse(const char *s, char *out, char *err, size_t errlen)
{
	const char *c1 = s ? strchr(s, ':') : NULL;
	size_t dom = c1 ? (size_t)(c1 - s) : 0;

	/* domain ':' bus ':' device '.' function; c1 points at the first ':' */
	if (!c1 || dom < 4 || dom > 8 || (dom > 4 && s[0] == '0') || !hex_run(s, dom) ||
	    strlen(c1) != 8 || !hex_run(c1 + 1, 2) || c1[3] != ':' || !hex_run(c1 + 4, 2) ||
	    c1[6] != '.' || c1[7] < '0' || c1[7] > '7' ||
	    hexval((unsigned char)c1[4]) * 16 + hexval((unsigned char)c1[5]) > 0x1f)
		return ibvf_errf(err, errlen, -EINVAL,
				 "'%.40s' is not a PCI address (expected DDDD:BB:DD.F, e.g. "
				 "0000:03:00.2: domain 4-8 hex digits, bus 2, device 2 (<= 1f), "
				 "function 0-7)",
				 s ? s : "");
	if (out) {
		size_t i;

		for (i = 0; s[i]; i++)
			out[i] = (char)tolower((unsigned char)s[i]);
		out[i] = 0;
	}
	return 0;
}

/* ------------------------------------------------------ VF link state -- */

const char *ibvf_vf_link_state_name(enum ibvf_vf_link_state s)
{
	switch (s) {
	case IBVF_VF_LINK_AUTO:
		return "auto";
	case IBVF_VF_LINK_ENABLE:
		return "enable";
	case IBVF_VF_LINK_DISABLE:
		return "disable";
	}
	return "?";
}

int ibvf_vf_link_state_parse(const char *s, enum ibvf_vf_link_state *out, char *err, size_t errlen)
{
	for (int i = IBVF_VF_LINK_AUTO; i <= IBVF_VF_LINK_DISABLE; i++)
		if (s && !strcasecmp(s, ibvf_vf_link_state_name((enum ibvf_vf_link_state)i))) {
			*out = (enum ibvf_vf_link_state)i;
			return 0;
		}
	return ibvf_errf(err, errlen, -EINVAL,
			 "'%.32s' is not a VF link state (expected auto, enable or disable)",
			 s ? s : "");
}

/* ---------------------------------------------------------- membership -- */

const char *ibvf_membership_name(enum ibvf_membership m)
{
	return m == IBVF_MEMBER_FULL ? "full" : "limited";
}

int ibvf_membership_parse(const char *s, enum ibvf_membership *out, char *err, size_t errlen)
{
	if (s && !strcasecmp(s, "full")) {
		*out = IBVF_MEMBER_FULL;
		return 0;
	}
	if (s && !strcasecmp(s, "limited")) {
		*out = IBVF_MEMBER_LIMITED;
		return 0;
	}
	return ibvf_errf(err, errlen, -EINVAL,
			 "invalid membership '%.32s': expected full or limited", s ? s : "");
}
