// SPDX-License-Identifier: MIT
/*
 * Unit tests of the issue-19 config in daemon/config/config.c: the smd
 * section's defaults and checks, and sm.backend "cluster" filled from
 * pool.cluster (and refused without it).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "err.h"
#include "testutil.h"

struct fixture {
	char *dir, *file;
	struct ibvf_config cfg;
	bool loaded;
	char err[IBVF_ERR_LEN];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dir = tu_mkdtemp("config-smd");
	f->file = f->dir ? tu_path(f->dir, "ibvfd.json") : NULL;
	*state = f;
	return f->file ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->loaded)
		ibvf_config_free(&f->cfg);
	free(f->file);
	tu_rmrf(f->dir);
	free(f);
	return 0;
}

#define CLUSTER                                                                                    \
	"\"cluster\": {\"endpoints\": [\"http://127.0.0.1:2379\", \"http://127.0.0.1:2380\"], "    \
	"\"node\": \"n1\", \"prefix\": \"/fab\", \"user\": \"u\", \"password_file\": \"/etc/p\", " \
	"\"timeout_ms\": 1234}"

/* {"pool": {ranges, @cluster}, "sm": @sm, "smd": @smd} */
static int load(struct fixture *f, bool cluster, const char *sm, const char *smd)
{
	char json[4096];
	int ret;

	if (f->loaded)
		ibvf_config_free(&f->cfg);
	f->loaded = false;
	f->err[0] = 0;
	snprintf(json, sizeof(json),
		 "{\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:00:00:01\", \"end\": "
		 "\"02:00:00:00:00:00:ff:ff\"}]%s%s}%s%s%s%s}",
		 cluster ? ", " : "", cluster ? CLUSTER : "", sm ? ", \"sm\": " : "", sm ? sm : "",
		 smd ? ", \"smd\": " : "", smd ? smd : "");
	assert_int_equal(tu_write_str(f->file, json), 0);
	ret = ibvf_config_load(&f->cfg, f->file, true, NULL, f->err, sizeof(f->err));
	f->loaded = ret == 0;
	return ret;
}

static void test_smd_defaults(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(load(f, true, "{\"backend\": \"opensm\"}", NULL), 0);
	assert_string_equal(f->cfg.smd.id, "n1");
	assert_string_equal(f->cfg.smd.group, "n1"); /* opensm: each agent its own group */
	assert_false(f->cfg.smd.election);
	assert_int_equal(f->cfg.smd.lease_ttl_s, 3);
	assert_int_equal(f->cfg.smd.reconcile_s, 30);
	assert_int_equal(f->cfg.smd.batch_max, 4096);
	assert_int_equal(load(f, true, "{\"backend\": \"ufm\"}", NULL), 0);
	assert_true(f->cfg.smd.election); /* ufm: one leader per group */
	assert_string_equal(f->cfg.smd.group, "ufm");
	assert_int_equal(load(f, true, "{\"backend\": \"ufm\"}",
			      "{\"id\": \"a1\", \"group\": \"ufm-east\", \"election\": false, "
			      "\"lease_ttl_s\": 5, \"reconcile_s\": 7, \"batch_max\": 9}"),
			 0);
	assert_string_equal(f->cfg.smd.id, "a1");
	assert_string_equal(f->cfg.smd.group, "ufm-east");
	assert_false(f->cfg.smd.election);
	assert_int_equal(f->cfg.smd.lease_ttl_s, 5);
	assert_int_equal(f->cfg.smd.reconcile_s, 7);
	assert_int_equal(f->cfg.smd.batch_max, 9);
}

static void test_smd_errors(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(load(f, true, NULL, "{\"lease_ttl_s\": 1}"), -EINVAL);
	assert_non_null(strstr(f->err, "smd.lease_ttl_s"));
	assert_int_equal(load(f, true, NULL, "{\"id\": \"a b\"}"), -EINVAL);
	assert_non_null(strstr(f->err, "smd.id"));
	assert_int_equal(load(f, true, NULL, "{\"leader\": true}"), -EINVAL);
	assert_non_null(strstr(f->err, "leader"));
}

static void test_cluster_backend_fill(void **state)
{
	struct fixture *f = *state;
	json_t *j;

	assert_int_equal(load(f, true,
			      "{\"backend\": \"cluster\", \"config\": {\"apply_timeout_ms\": "
			      "900}}",
			      NULL),
			 0);
	j = json_loads(f->cfg.sm.backend_json, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "endpoints")), 2);
	assert_string_equal(json_string_value(json_object_get(j, "node")), "n1");
	assert_string_equal(json_string_value(json_object_get(j, "prefix")), "/fab/");
	assert_string_equal(json_string_value(json_object_get(j, "user")), "u");
	assert_string_equal(json_string_value(json_object_get(j, "password_file")), "/etc/p");
	assert_int_equal(json_integer_value(json_object_get(j, "etcd_timeout_ms")), 1234);
	assert_int_equal(json_integer_value(json_object_get(j, "apply_timeout_ms")), 900);
	json_decref(j);
	/* a key sm.config sets itself wins */
	assert_int_equal(
		load(f, true, "{\"backend\": \"cluster\", \"config\": {\"node\": \"x\"}}", NULL),
		0);
	j = json_loads(f->cfg.sm.backend_json, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(j, "node")), "x");
	json_decref(j);
	/* --print-config shows the filled keys, not masked (no secret among them) */
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&buf, &len);

		assert_int_equal(ibvf_config_print(&f->cfg, m), 0);
		fclose(m);
		assert_non_null(strstr(buf, "\"endpoints\""));
		assert_non_null(strstr(buf, "http://127.0.0.1:2379"));
		assert_non_null(strstr(buf, "\"smd\""));
		assert_null(strstr(buf, "********"));
		free(buf);
	}
	assert_int_equal(load(f, false, "{\"backend\": \"cluster\"}", NULL), -EINVAL);
	assert_non_null(strstr(f->err, "needs pool.cluster"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_smd_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_smd_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cluster_backend_fill, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
