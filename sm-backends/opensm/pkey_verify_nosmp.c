// SPDX-License-Identifier: MIT
/* Stand-in for pkey_verify_smp.c while the core has no port watcher. */
#include "pkey_verify.h"

#include <errno.h>

#include "err.h"

int pv_open_smp(const char *ca, int port, struct pkey_verifier *out, char *err, size_t errlen)
{
	(void)ca;
	(void)port;
	out->ops = NULL;
	return ibvf_errf(err, errlen, -EOPNOTSUPP, "this build has no SMP support "
			 "(daemon/core/port_watch.c is missing): set \"verify\": \"off\"");
}
