// SPDX-License-Identifier: MIT
/*
 * IPAM delegation (cni/cni_ipam.c): the cniVersion the IPAM plugin is given
 * (issue 15 item 10). A script plugin that, like Debian's host-local 1.1.1,
 * lists versions up to 1.0.0 and refuses a 1.1.0 configuration; and the real
 * host-local when containernetworking-plugins is installed (it writes only
 * under its dataDir: no root needed).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cni_ipam.h"
#include "testutil.h"

static const char script[] =
	"#!/bin/sh\n"
	"conf=$(cat)\n"
	"printf '%s %s\\n' \"$CNI_COMMAND\" \"$conf\" >>\"$0.log\"\n"
	"case \"$CNI_COMMAND\" in\n"
	"VERSION) echo '{\"cniVersion\":\"1.0.0\",\"supportedVersions\":"
	"[\"0.3.1\",\"0.4.0\",\"1.0.0\"]}' ;;\n"
	"*) case \"$conf\" in\n"
	"   *'\"cniVersion\":\"1.0.0\"'*|*'\"cniVersion\":\"0.4.0\"'*) ;;\n"
	"   *) echo '{\"code\":1,\"msg\":\"incompatible CNI versions\"}'; exit 1 ;;\n"
	"   esac\n"
	"   [ \"$CNI_COMMAND\" = ADD ] && echo '{\"cniVersion\":\"1.0.0\",\"ips\":"
	"[{\"address\":\"10.9.0.2/24\"}]}' ;;\n"
	"esac\n"
	"exit 0\n";

struct fx {
	char *dir, *plugin, *log;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->dir = tu_mkdtemp("cni-ipam");
	f->plugin = tu_path(f->dir, "old-ipam");
	f->log = tu_path(f->dir, "old-ipam.log");
	if (tu_write_str(f->plugin, script) || chmod(f->plugin, 0755))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tu_rmrf(f->dir);
	free(f->plugin);
	free(f->log);
	free(f);
	return 0;
}

static int run(struct cni_ipam_call *c, const char *conf, json_t **out, char *err, size_t len)
{
	c->conf = conf;
	c->conf_len = strlen(conf);
	return cni_ipam_exec(c, out, err, len);
}

/* A 1.1.0 configuration reaches a plugin that lists up to 1.0.0 as 1.0.0; 1.0.0 as is. */
static void test_delegates_highest_common(void **state)
{
	struct fx *f = *state;
	static const char conf[] = "{\"cniVersion\":\"1.1.0\",\"name\":\"ibnet\",\"type\":"
				   "\"ib-sriov\",\"ipam\":{\"type\":\"old-ipam\"}}";
	struct cni_ipam_call c = {.type = "old-ipam",
				  .cni_path = f->dir,
				  .command = "ADD",
				  .container_id = "c1",
				  .ifname = "net1",
				  .netns = ""};
	char err[512] = "", *log;
	json_t *out = NULL;

	if (run(&c, conf, &out, err, sizeof(err)))
		fail_msg("ADD: %s", err);
	assert_non_null(out);
	assert_string_equal(json_string_value(json_object_get(out, "cniVersion")), "1.0.0");
	json_decref(out);
	c.command = "DEL";
	if (run(&c, conf, NULL, err, sizeof(err)))
		fail_msg("DEL: %s", err);
	log = tu_read_file(f->log, NULL);
	assert_non_null(log);
	assert_non_null(strstr(log, "ADD {\"cniVersion\":\"1.0.0\",\"name\":\"ibnet\""));
	assert_non_null(strstr(log, "DEL {\"cniVersion\":\"1.0.0\""));
	assert_null(strstr(log, "ADD {\"cniVersion\":\"1.1.0\""));
	free(log);
	unlink(f->log);
	/* a version the plugin lists goes unchanged */
	c.command = "ADD";
	assert_int_equal(
		run(&c, "{\"cniVersion\":\"0.4.0\",\"name\":\"ibnet\"}", &out, err, sizeof(err)),
		0);
	json_decref(out);
	log = tu_read_file(f->log, NULL);
	assert_non_null(strstr(log, "ADD {\"cniVersion\":\"0.4.0\",\"name\":\"ibnet\"}"));
	free(log);
}

/*
 * A plugin that exits without reading stdin (as a VERSION answer may): the
 * write fails with EPIPE instead of killing the caller with SIGPIPE (seen as
 * DELs killed by signal 13 under load).
 */
static void test_plugin_ignores_stdin(void **state)
{
	struct fx *f = *state;
	char *p = tu_path(f->dir, "deaf-ipam"), err[512] = "", *big = malloc(1 << 20);
	struct cni_ipam_call c = {.type = "deaf-ipam",
				  .cni_path = f->dir,
				  .command = "DEL",
				  .container_id = "c1",
				  .ifname = "net1",
				  .netns = ""};

	assert_int_equal(tu_write_str(p, "#!/bin/sh\nexit 0\n"), 0);
	assert_int_equal(chmod(p, 0755), 0);
	memset(big, ' ', 1 << 20);
	memcpy(big, "{\"cniVersion\":\"1.0.0\"}", 23);
	big[(1 << 20) - 1] = 0;
	c.conf = big;
	c.conf_len = strlen(big);
	(void)cni_ipam_exec(&c, NULL, err, sizeof(err)); /* any answer, as long as we live */
	free(big);
	free(p);
}

/* Debian's host-local (containernetworking-plugins 1.1.1) with a 1.1.0 configuration. */
static void test_host_local(void **state)
{
	struct fx *f = *state;
	const char *dirs[] = {"/usr/lib/cni", "/opt/cni/bin"}, *path = NULL;
	char conf[1024], err[512] = "", *data = tu_path(f->dir, "hl-data");
	struct cni_ipam_call c = {.type = "host-local",
				  .command = "ADD",
				  .container_id = "c1",
				  .ifname = "net1",
				  .netns = "/proc/self/ns/net"};
	json_t *out = NULL;

	for (size_t i = 0; i < 2 && !path; i++) {
		char *p = tu_path(dirs[i], "host-local");

		if (!access(p, X_OK))
			path = dirs[i];
		free(p);
	}
	if (!path) {
		free(data);
		if (getenv("IBVF_REQUIRE_LABS") && !strcmp(getenv("IBVF_REQUIRE_LABS"), "1"))
			fail_msg("host-local not installed (containernetworking-plugins)");
		print_message("SKIP: host-local not installed (containernetworking-plugins)\n");
		skip();
	}
	c.cni_path = path;
	setenv("CNI_PATH", path, 1); /* what the runtime gives ib-sriov, passed on */
	snprintf(conf, sizeof(conf),
		 "{\"cniVersion\":\"1.1.0\",\"name\":\"ibnet\",\"type\":\"ib-sriov\",\"ipam\":"
		 "{\"type\":\"host-local\",\"subnet\":\"10.56.217.0/24\",\"dataDir\":\"%s\"}}",
		 data);
	if (run(&c, conf, &out, err, sizeof(err)))
		fail_msg("host-local ADD with cniVersion 1.1.0: %s", err);
	assert_non_null(strstr(json_string_value(json_object_get(
				       json_array_get(json_object_get(out, "ips"), 0), "address")),
			       "10.56.217."));
	json_decref(out);
	c.command = "DEL";
	if (run(&c, conf, NULL, err, sizeof(err)))
		fail_msg("host-local DEL with cniVersion 1.1.0: %s", err);
	free(data);
	/* a version the plugin speaks goes as is (Debian's static plugin, 1.0.0) */
	c.type = "static";
	c.command = "ADD";
	assert_int_equal(
		run(&c,
		    "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"x\",\"ipam\":"
		    "{\"type\":\"static\",\"addresses\":[{\"address\":\"10.78.0.5/24\"}]}}",
		    &out, err, sizeof(err)),
		0);
	assert_string_equal(json_string_value(json_object_get(out, "cniVersion")), "1.0.0");
	json_decref(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_delegates_highest_common, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_local, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plugin_ignores_stdin, setup, teardown),
	};

	return cmocka_run_group_tests_name("cni_ipam", tests, NULL, NULL);
}
