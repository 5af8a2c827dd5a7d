// SPDX-License-Identifier: MIT
/* Unit tests of pool.cluster in daemon/config/config.c (issue 18). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "err.h"
#include "testutil.h"

struct fixture {
	char *dir;
	char *file;
	struct ibvf_config cfg;
	bool loaded;
	char err[IBVF_ERR_LEN];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dir = tu_mkdtemp("config-cluster");
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

static int load(struct fixture *f, const char *cluster, const char *const *envp)
{
	char json[4096];
	int ret;

	if (f->loaded) {
		ibvf_config_free(&f->cfg);
		f->loaded = false;
	}
	f->err[0] = 0;
	snprintf(json, sizeof(json),
		 "{\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:00:00:01\", "
		 "\"end\": \"02:00:00:00:00:00:ff:ff\"}]%s%s}}",
		 cluster ? ", \"cluster\": " : "", cluster ? cluster : "");
	assert_int_equal(tu_write_str(f->file, json), 0);
	ret = ibvf_config_load(&f->cfg, f->file, true, tu_strv(envp), f->err, sizeof(f->err));
	f->loaded = ret == 0;
	return ret;
}

static char *print_config(const struct ibvf_config *cfg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_non_null(m);
	assert_int_equal(ibvf_config_print(cfg, m), 0);
	fclose(m);
	return buf;
}

static void test_absent_is_single_node(void **state)
{
	struct fixture *f = *state;
	char *out;

	assert_int_equal(load(f, NULL, NULL), 0);
	assert_false(f->cfg.pool.cluster.enabled);
	out = print_config(&f->cfg);
	assert_null(strstr(out, "\"cluster\""));
	free(out);
}

static void test_defaults_and_node_name(void **state)
{
	struct fixture *f = *state;
	const char *env[] = {"NODE_NAME=worker-7.rack3", NULL};
	const struct ibvf_cluster_config *k = &f->cfg.pool.cluster;
	char host[256] = "";

	assert_int_equal(load(f,
			      "{\"endpoints\": [\"http://10.0.0.1:2379\", "
			      "\"https://etcd-1.example:2379\"]}",
			      env),
			 0);
	assert_true(k->enabled);
	assert_int_equal(k->n_endpoints, 2);
	assert_string_equal(k->endpoints[1], "https://etcd-1.example:2379");
	assert_string_equal(k->node, "worker-7.rack3"); /* the downward API's NODE_NAME */
	assert_string_equal(k->prefix, "/ibvf/");
	assert_int_equal(k->block_size, 256);
	assert_int_equal(k->low_watermark, 64);
	assert_int_equal(k->high_watermark, 0); /* low_watermark + 2 blocks */
	assert_int_equal(k->timeout_ms, 5000);

	/* config wins over NODE_NAME; a prefix gets its trailing slash */
	assert_int_equal(load(f,
			      "{\"endpoints\": [\"http://e:2379\"], \"node\": \"n1\", "
			      "\"prefix\": \"/ibvf/fabric-a\", \"block_size\": 16, "
			      "\"low_watermark\": 4, \"timeout_ms\": 800, \"high_watermark\": 20}",
			      env),
			 0);
	assert_int_equal(k->high_watermark, 20);
	assert_string_equal(k->node, "n1");
	assert_string_equal(k->prefix, "/ibvf/fabric-a/");
	assert_int_equal(k->block_size, 16);
	assert_int_equal(k->low_watermark, 4);
	assert_int_equal(k->timeout_ms, 800);

	/* neither: the hostname */
	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	assert_int_equal(load(f, "{\"endpoints\": [\"http://e:2379\"]}", NULL), 0);
	assert_string_equal(k->node, host);
}

static void test_bad_values(void **state)
{
	static const struct {
		const char *json, *want;
	} bad[] = {
		{"{\"endpoints\": [\"http://e:2379\"], \"pasword_file\": \"/x\"}", "pasword_file"},
		{"{}", "pool.cluster.endpoints"},
		{"{\"endpoints\": []}", "pool.cluster.endpoints"},
		{"{\"endpoints\": [\"e:2379\"]}", "pool.cluster.endpoints"},
		{"{\"endpoints\": [\"http://root:pw@e:2379\"]}", "without user info"},
		{"{\"endpoints\": [\"http://e:2379/v3\"]}", "pool.cluster.endpoints"},
		{"{\"endpoints\": [\"http://e:2379\", \"http://e:2379\"]}", "twice"},
		{"{\"endpoints\": [\"http://e:2379\"], \"block_size\": 0}", "block_size"},
		{"{\"endpoints\": [\"http://e:2379\"], \"block_size\": 8, \"low_watermark\": 8}",
		 "low_watermark"},
		/* a returned block must not bring the node below low_watermark */
		{"{\"endpoints\": [\"http://e:2379\"], \"block_size\": 16, \"low_watermark\": 4, "
		 "\"high_watermark\": 19}",
		 "high_watermark"},
		{"{\"endpoints\": [\"http://e:2379\"], \"cert_file\": \"/c.pem\"}", "key_file"},
		{"{\"endpoints\": [\"http://e:2379\"], \"user\": \"root\"}", "password_file"},
		{"{\"endpoints\": [\"http://e:2379\"], \"password_file\": \"/p\"}",
		 "password_file"},
		{"{\"endpoints\": [\"http://e:2379\"], \"user\": \"a\", \"user_file\": \"/u\", "
		 "\"password_file\": \"/p\"}",
		 "user_file"},
		{"{\"endpoints\": [\"http://e:2379\"], \"ca_file\": \"relative.pem\"}", "ca_file"},
		{"{\"endpoints\": [\"http://e:2379\"], \"prefix\": \"ibvf\"}", "prefix"},
		{"{\"endpoints\": [\"http://e:2379\"], \"node\": \"-bad_name\"}", "node"},
		{"{\"endpoints\": [\"http://e:2379\"], \"timeout_ms\": 5}", "timeout_ms"},
		{"[1]", "pool.cluster"},
	};
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = load(f, bad[i].json, NULL);

		if (ret != -EINVAL || !strstr(f->err, bad[i].want) || !strstr(f->err, f->file))
			fail_msg("%s: ret %d, err \"%s\" (want -EINVAL naming the file and \"%s\")",
				 bad[i].json, ret, f->err, bad[i].want);
	}
	{
		const char *env[] = {"NODE_NAME=bad name", NULL};

		assert_int_equal(load(f, "{\"endpoints\": [\"http://e:2379\"]}", env), -EINVAL);
		assert_non_null(strstr(f->err, "NODE_NAME"));
	}
}

static void test_print_config(void **state)
{
	struct fixture *f = *state;
	char *out;

	assert_int_equal(load(f,
			      "{\"endpoints\": [\"https://e:2379\"], \"ca_file\": \"/ca.pem\", "
			      "\"cert_file\": \"/c.pem\", \"key_file\": \"/k.pem\", "
			      "\"user\": \"ibvf\", \"password_file\": \"/run/secrets/pw\", "
			      "\"node\": \"n1\"}",
			      NULL),
			 0);
	out = print_config(&f->cfg);
	assert_non_null(strstr(out, "\"cluster\""));
	assert_non_null(strstr(out, "\"https://e:2379\""));
	assert_non_null(strstr(out, "\"password_file\": \"/run/secrets/pw\""));
	assert_non_null(strstr(out, "\"node\": \"n1\""));
	assert_non_null(strstr(out, "\"block_size\": 256"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_absent_is_single_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_defaults_and_node_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_config, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
