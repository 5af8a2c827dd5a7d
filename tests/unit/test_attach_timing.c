// SPDX-License-Identifier: MIT
/*
 * attach_timing.c: more distinct step names than IBVF_TIMING_MAX_STEPS go to
 * "other" and never past the array (a failed prepare's undo marks more
 * steps than a good one: with the bug the 17th name was written past s[],
 * over the op's next fields, and ibvfd crashed freeing one of them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "attach_timing.h"

static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k",
				    "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v"};

static void test_many_steps_stay_in_bounds(void **state)
{
	struct {
		struct ibvf_attach_timing t;
		uint64_t guard[8];
	} x;
	json_t *j;

	(void)state;
	memset(x.guard, 0x5a, sizeof(x.guard));
	ibvf_timing_start(&x.t);
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			ibvf_timing_mark(&x.t, names[i]);
	ibvf_timing_mark_split(&x.t, "w", "x", 1);
	for (size_t i = 0; i < sizeof(x.guard) / sizeof(x.guard[0]); i++)
		assert_int_equal(x.guard[i], 0x5a5a5a5a5a5a5a5aULL);
	assert_true(x.t.n <= IBVF_TIMING_MAX_STEPS);
	assert_string_equal(x.t.s[x.t.n - 1].name, "other");
	j = ibvf_timing_json(&x.t);
	assert_non_null(j);
	assert_non_null(json_object_get(j, "a"));
	assert_non_null(json_object_get(j, "other"));
	assert_null(json_object_get(j, "v"));
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_steps_stay_in_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
