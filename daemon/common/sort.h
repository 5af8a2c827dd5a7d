/* SPDX-License-Identifier: MIT */
/*
 * The one qsort() call: qsort(3)'s base must not be NULL even for zero
 * elements (C11 7.22.5: pointer arguments are valid even when the count is
 * zero; glibc declares it nonnull), and an empty list often has no array.
 */
#ifndef IBVF_SORT_H
#define IBVF_SORT_H

#include <stdlib.h>

/** ibvf_sort() - qsort(@base, @n, @size, @cmp) when there is something to sort (@n > 1). */
static inline void ibvf_sort(void *base, size_t n, size_t size,
			     int (*cmp)(const void *, const void *))
{
	if (base && n > 1)
		qsort(base, n, size, cmp);
}

#endif /* IBVF_SORT_H */
