// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/common/log.c's JSON lines (log_format "json"): one
 * object per line with the text line's fields, a newline in a message kept
 * inside its line, bytes that are not UTF-8 replaced, levels filtered as
 * for text; and the text format unchanged.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "testutil.h"

/* Run @fn with stderr in a temp file; return what it wrote (caller frees). */
static char *capture(void (*fn)(void))
{
	char path[] = "/tmp/ibvf-test-log-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	char *buf = calloc(1, 65536);
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0 && buf);
	fflush(stderr);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, 65535, 0);
	assert_true(n >= 0);
	close(fd);
	unlink(path);
	return buf;
}

static void emit_json(void)
{
	ibvf_log_init("ibvfd", IBVF_LOG_STDERR, LOG_INFO);
	ibvf_log_set_json(true);
	log_info("PF %s VF %d: \"quoted\" and a\nsecond line", "ib0", 3);
	log_debug("not shown at info");
	log_err("bad byte \xff here");
	ibvf_log_set_json(false);
	log_warn("a text line");
}

static void test_json_lines(void **state)
{
	char *out = capture(emit_json), *save = NULL, *line;
	int n = 0;

	(void)state;
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
		json_error_t je;
		json_t *o;

		if (n == 2) { /* back to text */
			assert_non_null(strstr(line, " ibvfd warning: a text line"));
			continue;
		}
		o = json_loads(line, 0, &je);
		if (!o)
			fail_msg("line %d is not JSON (%s): %s", n, je.text, line);
		assert_int_equal(json_object_size(o), 4);
		assert_string_equal(json_string_value(json_object_get(o, "ident")), "ibvfd");
		/* RFC 3339 UTC with milliseconds: 2026-12-01T16:53:00.873Z */
		assert_int_equal(strlen(json_string_value(json_object_get(o, "time"))), 24);
		assert_int_equal(json_string_value(json_object_get(o, "time"))[23], 'Z');
		if (n == 0) {
			assert_string_equal(json_string_value(json_object_get(o, "level")), "info");
			assert_string_equal(json_string_value(json_object_get(o, "message")),
					    "PF ib0 VF 3: \"quoted\" and a\nsecond line");
		} else {
			assert_string_equal(json_string_value(json_object_get(o, "level")),
					    "error");
			assert_string_equal(json_string_value(json_object_get(o, "message")),
					    "bad byte ? here");
		}
		json_decref(o);
	}
	assert_int_equal(n, 3); /* the debug line is filtered, the newline did not split */
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_lines),
	};

	return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
