// SPDX-License-Identifier: MIT
/* Unit tests: the ib-sriov cache, ours and ib-sriov-cni's format (cni/cni_cache.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cmocka.h>

#include "cni_cache.h"
#include "err.h"
#include "log.h"

static char err[IBVF_ERR_LEN];

static int setup(void **state)
{
	char *d = strdup("/tmp/ibvf-cni-cache-test.XXXXXX");

	if (!d || !mkdtemp(d))
		return -1;
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", (char *)*state);
	free(*state);
	return system(cmd) ? -1 : 0;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void round_trip(void **state)
{
	char dir[512], path[600];
	json_t *conf =
		json_loads("{\"cniVersion\":\"1.0.0\",\"name\":\"ibnet\",\"type\":\"ib-sriov\","
			   "\"pkey\":\"0x10\",\"link_state\":\"enable\",\"rdmaIsolation\":true,"
			   "\"ipam\":{\"type\":\"host-local\"},\"prevResult\":{},"
			   "\"cni.dev/valid-attachments\":[]}",
			   0, NULL);
	struct cni_cache c, r;
	struct stat st;
	json_t *root;

	snprintf(dir, sizeof(dir), "%s/sub/cache", (char *)*state);
	cni_cache_init(&c);
	c.mode = CNI_MODE_DAEMON;
	strcpy(c.container_id, "0123abcd-with-dash");
	strcpy(c.ifname, "net1");
	strcpy(c.netns, "/var/run/netns/p1");
	strcpy(c.network, "ibnet");
	strcpy(c.device_id, "0000:03:00.2");
	strcpy(c.pf, "ib0");
	c.vf_index = 2;
	strcpy(c.host_ifname, "ib0v2");
	strcpy(c.temp_ifname, "ibvf1c");
	c.guid = 0x0200000000000abcULL;
	strcpy(c.mac, "80:00:00:48");
	c.rdma_isolation = true;
	strcpy(c.rdma_dev, "mlx5_4");
	c.ipam = true;
	assert_int_equal(cni_cache_write(dir, &c, conf, err, sizeof(err)), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/0123abcd-with-dash-net1", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	root = json_load_file(path, 0, NULL);
	assert_non_null(root);
	/* ib-sriov-cni's NetConf keys, so its DEL could still clean up after us */
	assert_string_equal(json_string_value(json_object_get(root, "Master")), "ib0");
	assert_int_equal(json_integer_value(json_object_get(root, "VFID")), 2);
	assert_string_equal(json_string_value(json_object_get(root, "HostIFNames")), "ib0v2");
	assert_string_equal(json_string_value(json_object_get(root, "ContIFNames")), "net1");
	assert_string_equal(json_string_value(json_object_get(root, "deviceID")), "0000:03:00.2");
	assert_string_equal(json_string_value(json_object_get(json_object_get(root, "RdmaNetState"),
							      "containerRdmaDevName")),
			    "mlx5_4");
	assert_null(json_object_get(root, "prevResult"));
	assert_null(json_object_get(root, "cni.dev/valid-attachments"));
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(root, "ibvf"), "version")),
		CNI_CACHE_VERSION);
	json_decref(root);

	assert_int_equal(cni_cache_read(dir, "0123abcd-with-dash", "net1", &r, err, sizeof(err)),
			 0);
	assert_int_equal(r.format, CNI_CACHE_VERSION);
	assert_int_equal(r.mode, CNI_MODE_DAEMON);
	assert_string_equal(r.container_id, "0123abcd-with-dash");
	assert_string_equal(r.netns, "/var/run/netns/p1");
	assert_string_equal(r.host_ifname, "ib0v2");
	assert_string_equal(r.temp_ifname, "ibvf1c");
	assert_int_equal(r.guid, 0x0200000000000abcULL);
	assert_int_equal(r.vf_index, 2);
	assert_true(r.rdma_isolation);
	assert_string_equal(r.rdma_dev, "mlx5_4");
	assert_int_equal(r.link_state, CNI_LINK_STATE_ENABLE);
	assert_true(r.ipam);
	assert_string_equal(r.network, "ibnet");
	cni_cache_free(&r);

	assert_int_equal(cni_cache_remove(dir, "0123abcd-with-dash", "net1", err, sizeof(err)), 0);
	assert_int_equal(cni_cache_remove(dir, "0123abcd-with-dash", "net1", err, sizeof(err)), 0);
	assert_int_equal(cni_cache_read(dir, "0123abcd-with-dash", "net1", &r, err, sizeof(err)),
			 -ENOENT);
	json_decref(conf);
}

/* What ib-sriov-cni writes (its pkg/types NetConf marshalled by encoding/json). */
static const char legacy[] =
	"{\"cniVersion\":\"0.3.1\",\"name\":\"ibnet\",\"type\":\"ib-sriov\","
	"\"ipam\":{\"type\":\"host-local\",\"subnet\":\"10.1.0.0/16\"},\"dns\":{},"
	"\"Master\":\"ib0\",\"deviceID\":\"0000:03:00.3\",\"VFID\":3,\"HostIFNames\":\"ib0v3\","
	"\"HostIFGUID\":\"00:00:00:00:00:00:00:00\",\"ContIFNames\":\"net-x\",\"pkey\":\"0x6\","
	"\"link_state\":\"disable\",\"rdmaIsolation\":false,\"ibKubernetesEnabled\":true,"
	"\"vfioPciMode\":false,\"RdmaNetState\":{\"version\":\"\",\"deviceID\":\"\","
	"\"sandboxRdmaDevName\":\"\",\"containerRdmaDevName\":\"\"},"
	"\"runtimeConfig\":{\"infinibandGUID\":\"\"},\"args\":{\"cni\":{\"guid\":"
	"\"02:00:00:00:00:00:00:07\"}}}";

static void legacy_format(void **state)
{
	struct cni_cache r;

	write_file(*state, "a-b-c-net-x", legacy);
	assert_int_equal(cni_cache_read(*state, "a-b-c", "net-x", &r, err, sizeof(err)), 0);
	assert_int_equal(r.format, 0);
	assert_int_equal(r.mode, CNI_MODE_COMPAT);
	assert_string_equal(r.container_id, "a-b-c");
	assert_string_equal(r.ifname, "net-x");
	assert_string_equal(r.pf, "ib0");
	assert_int_equal(r.vf_index, 3);
	assert_string_equal(r.host_ifname, "ib0v3");
	assert_string_equal(r.prev_guid, "00:00:00:00:00:00:00:00");
	assert_string_equal(r.device_id, "0000:03:00.3");
	assert_int_equal(r.link_state, CNI_LINK_STATE_DISABLE);
	assert_true(r.ib_kubernetes_enabled);
	assert_true(r.ipam);
	assert_false(r.rdma_isolation);
	cni_cache_free(&r);
}

static int count(struct cni_cache *c, void *arg)
{
	int *n = arg;

	if (!strcmp(c->container_id, "a-b-c") && !strcmp(c->ifname, "net-x"))
		n[0]++;
	else if (!strcmp(c->container_id, "ours"))
		n[1]++;
	else
		n[2]++;
	return 0;
}

static void foreach_and_bad_files(void **state)
{
	struct cni_cache c, r;
	int n[3] = {0};

	write_file(*state, "a-b-c-net-x", legacy);
	write_file(*state, "broken-net1", "{\"cniVersion\":");
	write_file(*state, "x-net1.tmp.123", legacy);
	write_file(*state, "newer-net1",
		   "{\"name\":\"n\",\"ibvf\":{\"version\":99,\"mode\":"
		   "\"daemon\",\"containerID\":\"newer\",\"ifname\":\"net1\"}}");
	write_file(*state, "noversion-net1", "{\"ibvf\":{\"mode\":\"daemon\"}}");
	cni_cache_init(&c);
	strcpy(c.container_id, "ours");
	strcpy(c.ifname, "net1");
	assert_int_equal(cni_cache_write(*state, &c, NULL, err, sizeof(err)), 0);
	assert_int_equal(cni_cache_foreach(*state, count, n, err, sizeof(err)), 0);
	assert_int_equal(n[0], 1);
	assert_int_equal(n[1], 1);
	assert_int_equal(n[2], 1); /* "newer": read what is known; broken/noversion/tmp skipped */
	assert_int_equal(cni_cache_read(*state, "broken", "net1", &r, err, sizeof(err)), -EINVAL);
	assert_int_equal(cni_cache_read(*state, "noversion", "net1", &r, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(cni_cache_read(*state, "newer", "net1", &r, err, sizeof(err)), 0);
	assert_int_equal(r.mode, CNI_MODE_DAEMON);
	cni_cache_free(&r);
	assert_int_equal(cni_cache_foreach("/nonexistent/ibvf", count, n, err, sizeof(err)), 0);
	assert_int_equal(cni_cache_read(*state, "../x", "net1", &r, err, sizeof(err)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(legacy_format, setup, teardown),
		cmocka_unit_test_setup_teardown(foreach_and_bad_files, setup, teardown),
	};

	ibvf_log_init("test", IBVF_LOG_NONE, LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
