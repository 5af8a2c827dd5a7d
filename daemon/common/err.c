// SPDX-License-Identifier: MIT
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ibvf_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return code;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

int ibvf_err_prefix(char *err, size_t errlen, int code, const char *fmt, ...)
{
	char prefix[256], old[1024];
	va_list ap;

	if (!err || !errlen)
		return code;
	snprintf(old, sizeof(old), "%s", err);
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s: %s", prefix, old);
	return code;
}
