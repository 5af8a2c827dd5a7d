/* SPDX-License-Identifier: MIT */
/*
 * Error-buffer helper shared by every module: functions return a negative
 * errno and describe the failure in a caller-supplied buffer (see
 * include/ibvf/types.h for the convention).
 */
#ifndef IBVF_ERR_H
#define IBVF_ERR_H

#include <stddef.h>

/** Size of an error buffer that holds any ibvf message without truncation. */
#define IBVF_ERR_LEN 512

/**
 * ibvf_errf() - format a reason into @err (if not NULL) and return @code.
 * Use as `return ibvf_errf(err, errlen, -EINVAL, "bad %s", x);`.
 */
int ibvf_errf(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/**
 * ibvf_err_prefix() - prepend "@prefix: " to the message already in @err.
 * Return: @code.
 */
int ibvf_err_prefix(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* IBVF_ERR_H */
