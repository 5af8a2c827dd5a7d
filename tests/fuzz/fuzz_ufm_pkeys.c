// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the UFM PKey list parser (sm-backends/ufm/sm_ufm.c
 * ufm_parse_pkeys()), which reads the reply of
 * GET /ufmRest/resources/pkeys?guids_data=true.
 *
 * Input: the HTTP body. The first byte picks the PKey filter (-1 or a key).
 * Invariants: a body that fails reports nothing to the callback (it is
 * validated whole first); every reported member has a 15-bit nonzero PKey
 * that matches the filter and a membership of full or limited.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sm_ufm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	int filter;
	size_t n;
};

static void must(int cond, const char *what, const char *err)
{
	if (!cond) {
		fprintf(stderr, "fuzz_ufm_pkeys: invariant broken: %s (%s)\n", what,
			err ? err : "");
		abort();
	}
}

static int on_member(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct seen *s = arg;

	(void)managed;
	must(pkey >= 1 && pkey <= 0x7fff, "PKey out of range", NULL);
	must(s->filter < 0 || pkey == s->filter, "PKey does not match the filter", NULL);
	must(m->membership == IBVF_MEMBER_FULL || m->membership == IBVF_MEMBER_LIMITED,
	     "bad membership", NULL);
	s->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[IBVF_ERR_LEN] = "";
	struct seen s = {-1, 0};
	int ret;

	if (size < 1 || size > (1u << 20))
		return 0;
	if (data[0] & 0x80)
		s.filter = data[0] & 0x7f ? data[0] & 0x7f : 0x7fff;
	ret = ufm_parse_pkeys((const char *)data + 1, size - 1, s.filter, on_member, &s, err,
			      sizeof(err));
	if (ret) {
		must(ret == -EBADMSG, "unexpected error code", err);
		must(err[0] != 0, "failure without a message", NULL);
		must(s.n == 0, "members reported from a body that fails", err);
	}
	return 0;
}
