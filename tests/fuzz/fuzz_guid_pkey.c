// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the GUID and PKey parsers and formatters
 * (daemon/common/types.c), which take operator input (ibvfctl, config, CNI
 * args) and UFM replies.
 *
 * Input: a string (made NUL-terminated). Invariants: a parsed GUID formats
 * to a string that parses back to the same value, in both forms; a parsed
 * PKey is what the string says in hex or decimal; failures say why.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/types.h>

#include "err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what, const char *in)
{
	if (!cond) {
		fprintf(stderr, "fuzz_guid_pkey: invariant broken: %s (input '%s')\n", what, in);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[IBVF_ERR_LEN] = "", a[IBVF_GUID_STR_LEN], h[IBVF_GUID_HEX_LEN];
	enum ibvf_membership m;
	uint64_t g, g2;
	uint16_t pk;
	char *s;

	if (size > 256)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	if (ibvf_guid_parse(s, &g, err, sizeof(err)) == 0) {
		must(ibvf_guid_parse(ibvf_guid_format(g, a), &g2, NULL, 0) == 0 && g2 == g,
		     "colon form does not round-trip", s);
		must(ibvf_guid_parse(ibvf_guid_format_hex(g, h), &g2, NULL, 0) == 0 && g2 == g,
		     "hex form does not round-trip", s);
		must(strlen(s) == 16 || strlen(s) == 18 || strlen(s) == 23, "odd GUID length", s);
	} else {
		must(err[0] != 0, "GUID failure without a message", s);
	}
	err[0] = 0;
	if (ibvf_pkey_parse(s, &pk, err, sizeof(err)) == 0) {
		char *end;
		unsigned long v = strtoul(s, &end, (s[0] == '0' && (s[1] | 0x20) == 'x') ? 16 : 10);

		must(!*end && v == pk && isxdigit((unsigned char)s[0]), "PKey value differs", s);
		ibvf_pkey_check_tenant(pk, s[0] & 1, NULL, 0);
	} else {
		must(err[0] != 0, "PKey failure without a message", s);
	}
	ibvf_membership_parse(s, &m, NULL, 0);
	free(s);
	return 0;
}
