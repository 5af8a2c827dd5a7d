// SPDX-License-Identifier: MIT
/*
 * IPAM delegation (cni/cni_ipam.c): the cniVersion the IPAM plugin is given
 * (issue 15 item 10). A script plugin that, like Debian's host-local 1.1.1,
 * lists versions up to 1.0.0 and refuses a 1.1.0 configuration; and the real
 * host-local when containernetworking-plugins is installed (it writes only
 * under its dataDir: no root needed).
 */
#include <errno.h>
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

/* The commands the plugin was run with, in order ("ADD VERSION ADD"); the log is removed. */
static char *commands(const char *log_path)
{
	char *log = tu_read_file(log_path, NULL), *out = calloc(1, log ? strlen(log) + 1 : 1);
	size_t n = 0;

	for (char *l = log; l && *l;) {
		char *nl = strchr(l, '\n');
		size_t w = strcspn(l, " \n");

		n += (size_t)sprintf(out + n, "%s%.*s", n ? " " : "", (int)w, l);
		l = nl ? nl + 1 : l + strlen(l);
	}
	free(log);
	unlink(log_path);
	return out;
}

/*
 * A 1.1.0 configuration reaches a plugin that lists up to 1.0.0 as 1.0.0,
 * after its refusal and its VERSION answer (the fallback); 1.0.0 as is.
 */
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
	assert_int_equal(c.remote_code, 0);
	json_decref(out);
	c.command = "DEL";
	if (run(&c, conf, NULL, err, sizeof(err)))
		fail_msg("DEL: %s", err);
	log = tu_read_file(f->log, NULL);
	assert_non_null(log);
	assert_non_null(strstr(log, "ADD {\"cniVersion\":\"1.0.0\",\"name\":\"ibnet\""));
	assert_non_null(strstr(log, "DEL {\"cniVersion\":\"1.0.0\""));
	free(log);
	log = commands(f->log);
	assert_string_equal(log, "ADD VERSION ADD DEL VERSION DEL");
	free(log);
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
 * Issue 17: a plugin that takes the configuration's version is run once per
 * ADD, DEL and CHECK, without a VERSION call first (Go's libcni does the
 * same); its failures come back once, with their code.
 */
static void test_one_exec(void **state)
{
	struct fx *f = *state;
	static const char conf[] = "{\"cniVersion\":\"1.0.0\",\"name\":\"ibnet\",\"type\":"
				   "\"ib-sriov\",\"ipam\":{\"type\":\"old-ipam\"}}";
	struct cni_ipam_call c = {.type = "old-ipam",
				  .cni_path = f->dir,
				  .command = "ADD",
				  .container_id = "c1",
				  .ifname = "net1",
				  .netns = ""};
	char err[512] = "", *log, *busy = tu_path(f->dir, "busy-ipam");
	json_t *out = NULL;

	if (run(&c, conf, &out, err, sizeof(err)))
		fail_msg("ADD: %s", err);
	assert_string_equal(json_string_value(json_object_get(out, "cniVersion")), "1.0.0");
	json_decref(out);
	c.command = "CHECK";
	assert_int_equal(run(&c, conf, NULL, err, sizeof(err)), 0);
	c.command = "DEL";
	assert_int_equal(run(&c, conf, NULL, err, sizeof(err)), 0);
	log = commands(f->log);
	assert_string_equal(log, "ADD CHECK DEL");
	free(log);

	/* a failure that is not about the version: once, code and message kept */
	assert_int_equal(tu_write_str(busy, "#!/bin/sh\n"
					    "echo \"$CNI_COMMAND\" >>\"$0.log\"\n"
					    "cat >/dev/null\n"
					    "echo '{\"code\":11,\"msg\":\"store busy\"}'\n"
					    "exit 1\n"),
			 0);
	assert_int_equal(chmod(busy, 0755), 0);
	c.type = "busy-ipam";
	c.command = "ADD";
	assert_int_equal(run(&c, conf, &out, err, sizeof(err)), -EREMOTEIO);
	assert_null(out);
	assert_int_equal(c.remote_code, 11);
	assert_non_null(strstr(err, "store busy"));
	free(busy);
	busy = tu_path(f->dir, "busy-ipam.log");
	log = commands(busy);
	assert_string_equal(log, "ADD");
	free(log);
	free(busy);
}

/*
 * A refusal with code 1 when the plugin lists the version (the Go skel's
 * "config version does not allow CHECK" below 0.4.0), or from a plugin whose
 * VERSION answer is unusable: no second call, the refusal is the error.
 */
static void test_refusal_kept(void **state)
{
	struct fx *f = *state;
	char *p = tu_path(f->dir, "picky-ipam"), *plog = tu_path(f->dir, "picky-ipam.log");
	struct cni_ipam_call c = {.type = "picky-ipam",
				  .cni_path = f->dir,
				  .command = "CHECK",
				  .container_id = "c1",
				  .ifname = "net1",
				  .netns = ""};
	char err[512] = "", *log;

	assert_int_equal(tu_write_str(p,
				      "#!/bin/sh\n"
				      "echo \"$CNI_COMMAND\" >>\"$0.log\"\n"
				      "cat >/dev/null\n"
				      "[ \"$CNI_COMMAND\" = VERSION ] && echo \"$VER\" && exit 0\n"
				      "echo '{\"code\":1,\"msg\":\"config version does not allow "
				      "CHECK\"}'\n"
				      "exit 1\n"),
			 0);
	assert_int_equal(chmod(p, 0755), 0);
	setenv("VER", "{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.1\",\"1.0.0\"]}", 1);
	assert_int_equal(run(&c, "{\"cniVersion\":\"0.3.1\"}", NULL, err, sizeof(err)), -EREMOTEIO);
	assert_int_equal(c.remote_code, 1);
	assert_non_null(strstr(err, "does not allow CHECK"));
	log = commands(plog);
	assert_string_equal(log, "CHECK VERSION");
	free(log);
	setenv("VER", "not json", 1);
	assert_int_equal(run(&c, "{\"cniVersion\":\"1.1.0\"}", NULL, err, sizeof(err)), -EREMOTEIO);
	assert_int_equal(c.remote_code, 1);
	assert_non_null(strstr(err, "does not allow CHECK"));
	log = commands(plog);
	assert_string_equal(log, "CHECK VERSION");
	free(log);
	unsetenv("VER");
	free(plog);
	free(p);
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
		cmocka_unit_test_setup_teardown(test_one_exec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusal_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_local, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plugin_ignores_stdin, setup, teardown),
	};

	return cmocka_run_group_tests_name("cni_ipam", tests, NULL, NULL);
}
