// SPDX-License-Identifier: MIT
/*
 * End-to-end tests of the built ibvfd binary (path in $IBVFD, set by meson):
 * options, exit codes, and --print-config with secrets masked whether they
 * come from the file or from the ib-kubernetes environment variables.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

struct fx {
	const char *bin;
	char *dir, *cfg;
	struct tu_result r;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->bin = tu_binary("IBVFD");
	if (!f->bin) {
		print_error("IBVFD is not set to the built ibvfd\n");
		return -1;
	}
	f->dir = tu_mkdtemp("ibvfd");
	if (!f->dir)
		return -1;
	f->cfg = tu_path(f->dir, "ibvfd.json");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tu_result_free(&f->r);
	free(f->cfg);
	tu_rmrf(f->dir);
	free(f);
	return 0;
}

static int run(struct fx *f, const char *const *env, const char *const *args)
{
	const char *argv[16];
	int n = 0;

	argv[n++] = f->bin;
	for (; args && *args && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	tu_result_free(&f->r);
	assert_int_equal(tu_run(&f->r, env, 30, argv), 0);
	return f->r.status;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_print_config_masks_secrets(void **state)
{
	struct fx *f = *state;
	const char *env[] = {"UFM_PASSWORD=env-pass-31337",
			     "UFM_USERNAME=admin",
			     "UFM_ADDRESS=ufm.example",
			     "UFM_PORT=8443",
			     "DAEMON_SM_PLUGIN=ufm",
			     "DAEMON_PERIODIC_UPDATE=12",
			     "GUID_POOL_RANGE_START=02:00:00:00:00:00:00:01",
			     "GUID_POOL_RANGE_END=02:00:00:00:00:00:00:ff",
			     NULL};
	json_t *j, *sm, *bc;

	assert_int_equal(tu_write_str(f->cfg, "{\"log_level\": \"debug\", \"sm\": {\"config\": "
					      "{\"token\": \"file-token-4711\"}}}"),
			 0);
	assert_int_equal(run(f, env, ARGS("--config", f->cfg, "--print-config")), 0);
	assert_not_contains(f->r.out, "env-pass-31337");
	assert_not_contains(f->r.err, "env-pass-31337");
	assert_not_contains(f->r.out, "file-token-4711");
	assert_not_contains(f->r.err, "file-token-4711");
	j = json_loads(f->r.out, 0, NULL);
	if (!j)
		print_error("not JSON:\n%s\n", f->r.out);
	assert_non_null(j);
	sm = json_object_get(j, "sm");
	bc = json_object_get(sm, "config");
	assert_string_equal(json_string_value(json_object_get(bc, "password")), "********");
	assert_string_equal(json_string_value(json_object_get(bc, "token")), "********");
	assert_string_equal(json_string_value(json_object_get(bc, "username")), "admin");
	assert_string_equal(json_string_value(json_object_get(bc, "address")), "ufm.example");
	assert_int_equal(json_integer_value(json_object_get(bc, "port")), 8443);
	assert_string_equal(json_string_value(json_object_get(sm, "backend")), "ufm");
	assert_int_equal(json_integer_value(json_object_get(sm, "periodic_update_s")), 12);
	assert_string_equal(json_string_value(json_object_get(j, "log_level")), "debug");
	assert_string_equal(json_string_value(json_object_get(j, "config_file")), f->cfg);
	assert_string_equal(
		json_string_value(json_object_get(
			json_array_get(json_object_get(json_object_get(j, "pool"), "ranges"), 0),
			"end")),
		"02:00:00:00:00:00:00:ff");
	json_decref(j);
	/* the short option is the same */
	assert_int_equal(run(f, env, ARGS("-c", f->cfg, "-p")), 0);
	assert_not_contains(f->r.out, "env-pass-31337");
}

static void test_config_errors(void **state)
{
	struct fx *f = *state;
	char *missing = tu_path(f->dir, "absent.json");

	assert_int_equal(run(f, NULL, ARGS("--config", missing, "--print-config")), 2);
	assert_contains(f->r.err, missing);
	free(missing);
	assert_int_equal(tu_write_str(f->cfg, "{\"vf\": {\"driver\": \"sysfs\"}}"), 0);
	assert_int_equal(run(f, NULL, ARGS("-c", f->cfg, "-p")), 2);
	assert_contains(f->r.err, f->cfg);
	assert_contains(f->r.err, "vf.driver");
	/* a secret in a broken config line is not echoed */
	assert_int_equal(tu_write_str(f->cfg, "{\"sm\": {\"config\": {\"password\": s3cr3t}}}"), 0);
	assert_int_equal(run(f, NULL, ARGS("-c", f->cfg, "-p")), 2);
	assert_contains(f->r.err, f->cfg);
	assert_not_contains(f->r.err, "s3cr3t");
	assert_int_equal(tu_write_str(f->cfg, "{}"), 0);
	assert_int_equal(run(f, (const char *[]){"DAEMON_PERIODIC_UPDATE=soon", NULL},
			     ARGS("-c", f->cfg, "-p")),
			 2);
	assert_contains(f->r.err, "DAEMON_PERIODIC_UPDATE: 'soon' is not a number of seconds");
}

/* Without -f ibvfd logs to syslog; a fatal start-up error reaches stderr too (issue 15). */
static void test_fatal_on_stderr(void **state)
{
	struct fx *f = *state;
	char *missing = tu_path(f->dir, "absent.json");

	assert_int_equal(run(f, NULL, ARGS("-c", missing)), 2);
	assert_contains(f->r.err, "ibvfd: fatal: config:");
	assert_contains(f->r.err, missing);
	assert_int_equal(tu_write_str(f->cfg, "{\"vf\": {\"driver\": \"sysfs\"}}"), 0);
	assert_int_equal(run(f, NULL, ARGS("-c", f->cfg)), 2);
	assert_contains(f->r.err, "vf.driver");
	free(missing);
}

static void test_options(void **state)
{
	struct fx *f = *state;

	assert_int_equal(run(f, NULL, ARGS("--bogus")), 2);
	assert_contains(f->r.err, "Usage: ibvfd");
	assert_int_equal(run(f, NULL, ARGS("-c", "/x", "extra")), 2);
	assert_contains(f->r.err, "unexpected argument 'extra'");
	assert_int_equal(run(f, NULL, ARGS("-h")), 0);
	assert_contains(f->r.out, "Usage: ibvfd");
	assert_contains(f->r.out, "--print-config");
	assert_contains(f->r.out, "GUID_POOL_RANGE_START");
	assert_int_equal(run(f, NULL, ARGS("--version")), 0);
	assert_contains(f->r.out, "ibvfd ");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_print_config_masks_secrets),
		T(test_config_errors),
		T(test_options),
		T(test_fatal_on_stderr),
	};

	return cmocka_run_group_tests_name("ibvfd", tests, NULL, NULL);
}
