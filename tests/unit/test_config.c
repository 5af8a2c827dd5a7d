// SPDX-License-Identifier: MIT
/* Unit tests of daemon/config/config.c (and json_util.c through it). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "config.h"
#include "err.h"
#include "json_util.h"
#include "log.h"
#include "testutil.h"

struct fixture {
	char *dir;
	char *file; /* <dir>/ibvfd.json */
	struct ibvf_config cfg;
	bool loaded;
	char err[IBVF_ERR_LEN];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dir = tu_mkdtemp("config");
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

/* Write @json to the fixture file and load it with @envp; returns the errno. */
static int load(struct fixture *f, const char *json, const char *const *envp)
{
	int ret;

	if (f->loaded) {
		ibvf_config_free(&f->cfg);
		f->loaded = false;
	}
	f->err[0] = 0;
	if (json)
		assert_int_equal(tu_write_str(f->file, json), 0);
	ret = ibvf_config_load(&f->cfg, f->file, true, tu_strv(envp), f->err, sizeof(f->err));
	f->loaded = ret == 0;
	return ret;
}

/* The config printed by ibvf_config_print() as a string (caller frees). */
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

#define RANGE1                                                                                     \
	"\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:00:00:01\", "                        \
	"\"end\": \"02:00:00:00:00:00:ff:ff\"}]}"

/* ----------------------------------------------------------- defaults -- */

static void test_defaults_without_file(void **state)
{
	struct fixture *f = *state;
	struct ibvf_config c;
	char err[IBVF_ERR_LEN] = "";
	char *missing = tu_path(f->dir, "absent.json");

	/* an absent file that was not asked for explicitly: defaults */
	assert_int_equal(ibvf_config_load(&c, missing, false, NULL, err, sizeof(err)), 0);
	assert_null(c.path);
	assert_string_equal(c.state_dir, IBVF_DEFAULT_STATE_DIR);
	assert_string_equal(c.run_dir, IBVF_DEFAULT_RUN_DIR);
	assert_string_equal(c.sysfs_root, "/sys");
	assert_int_equal(c.log_level, LOG_INFO);
	assert_false(c.allow_default_pkey);
	assert_int_equal(c.pool.n_ranges, 0);
	assert_int_equal(c.pool.quarantine_s, 60);
	assert_true(c.pool.sync_full);
	assert_string_equal(c.sm.backend, "noop");
	assert_null(c.sm.backend_json);
	assert_int_equal(c.sm.periodic_update_s, 5);
	assert_int_equal(c.sm.batch_window_ms, 0);
	assert_int_equal(c.sm.batch_max, 1024);
	assert_string_equal(c.vf.driver, "netlink");
	assert_int_equal(c.vf.rebind_timeout_ms, 5000);
	assert_null(c.vf.ibsim_json);
	assert_string_equal(c.api.socket, IBVF_DEFAULT_RUN_DIR "/ibvfd.sock");
	assert_int_equal(c.api.n_allowed_uids, 1);
	assert_int_equal(c.api.allowed_uids[0], 0);
	assert_int_equal(c.api.idle_timeout_s, 60);
	assert_int_equal(c.api.line_timeout_s, 10);
	ibvf_config_free(&c);

	/* an explicit --config that does not exist is an error naming it */
	assert_int_equal(ibvf_config_load(&c, missing, true, NULL, err, sizeof(err)), -ENOENT);
	assert_contains(err, missing);
	assert_contains(err, "No such file");
	free(missing);
}

static void test_full_config(void **state)
{
	struct fixture *f = *state;
	static const char json[] =
		"{\n"
		"  \"state_dir\": \"/srv/ibvf/state\",\n"
		"  \"run_dir\": \"/srv/ibvf/run\",\n"
		"  \"sysfs_root\": \"/tmp/fakesys\",\n"
		"  \"log_level\": \"debug\",\n"
		"  \"allow_default_pkey\": true,\n"
		"  \"pool\": {\n"
		"    \"ranges\": [\n"
		"      {\"start\": \"0x0200000000001000\", \"end\": \"0x0200000000001fff\"},\n"
		"      {\"start\": \"02:00:00:00:00:00:00:01\", \"end\": \"02:00:00:00:00:00:00:ff\"}\n"
		"    ],\n"
		"    \"quarantine_s\": 300,\n"
		"    \"sync\": \"normal\"\n"
		"  },\n"
		"  \"sm\": {\n"
		"    \"backend\": \"ufm\",\n"
		"    \"module_dir\": \"/opt/ibvf/sm\",\n"
		"    \"config\": {\"address\": \"ufm.example\", \"port\": 443},\n"
		"    \"periodic_update_s\": 30,\n"
		"    \"batch_window_ms\": 50,\n"
		"    \"batch_max\": 256\n"
		"  },\n"
		"  \"vf\": {\"driver\": \"ibsim\", \"rebind_timeout_ms\": 1500,\n"
		"         \"ibsim\": {\"console\": \"/run/lab/ibsim.ctl\", \"node_prefix\": \"vf\"}},\n"
		"  \"api\": {\"socket\": \"/srv/ibvf/run/api.sock\", \"allowed_uids\": [0, 1000],\n"
		"          \"idle_timeout_s\": 120, \"line_timeout_s\": 5}\n"
		"}\n";
	struct ibvf_config *c = &f->cfg;

	assert_int_equal(load(f, json, NULL), 0);
	assert_string_equal(c->path, f->file);
	assert_string_equal(c->state_dir, "/srv/ibvf/state");
	assert_string_equal(c->run_dir, "/srv/ibvf/run");
	assert_string_equal(c->sysfs_root, "/tmp/fakesys");
	assert_int_equal(c->log_level, LOG_DEBUG);
	assert_true(c->allow_default_pkey);
	/* ranges come back sorted by start */
	assert_int_equal(c->pool.n_ranges, 2);
	assert_true(c->pool.ranges[0].start == 0x0200000000000001ull);
	assert_true(c->pool.ranges[0].end == 0x02000000000000ffull);
	assert_true(c->pool.ranges[1].start == 0x0200000000001000ull);
	assert_true(c->pool.ranges[1].end == 0x0200000000001fffull);
	assert_int_equal(c->pool.quarantine_s, 300);
	assert_false(c->pool.sync_full);
	assert_string_equal(c->sm.backend, "ufm");
	assert_string_equal(c->sm.module_dir, "/opt/ibvf/sm");
	assert_string_equal(c->sm.backend_json, "{\"address\":\"ufm.example\",\"port\":443}");
	assert_int_equal(c->sm.periodic_update_s, 30);
	assert_int_equal(c->sm.batch_window_ms, 50);
	assert_int_equal(c->sm.batch_max, 256);
	assert_string_equal(c->vf.driver, "ibsim");
	assert_int_equal(c->vf.rebind_timeout_ms, 1500);
	assert_string_equal(c->vf.ibsim_json,
			    "{\"console\":\"/run/lab/ibsim.ctl\",\"node_prefix\":\"vf\"}");
	assert_string_equal(c->api.socket, "/srv/ibvf/run/api.sock");
	assert_int_equal(c->api.n_allowed_uids, 2);
	assert_int_equal(c->api.allowed_uids[1], 1000);
	assert_int_equal(c->api.idle_timeout_s, 120);
	assert_int_equal(c->api.line_timeout_s, 5);
}

static void test_socket_follows_run_dir(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(load(f, "{\"run_dir\": \"/srv/run\"}", NULL), 0);
	assert_string_equal(f->cfg.api.socket, "/srv/run/ibvfd.sock");
}

static void test_edge_values_accepted(void **state)
{
	struct fixture *f = *state;

	/* the ends of every numeric range are accepted */
	assert_int_equal(load(f,
			      "{\"pool\": {\"quarantine_s\": 0, \"sync\": \"full\"},"
			      " \"sm\": {\"periodic_update_s\": 1, \"batch_window_ms\": 0,"
			      " \"batch_max\": 1}, \"vf\": {\"rebind_timeout_ms\": 1},"
			      " \"api\": {\"idle_timeout_s\": 1, \"line_timeout_s\": 1}}",
			      NULL),
			 0);
	assert_int_equal(f->cfg.pool.quarantine_s, 0);
	assert_true(f->cfg.pool.sync_full);
	assert_int_equal(f->cfg.sm.batch_window_ms, 0);
	assert_int_equal(load(f,
			      "{\"pool\": {\"quarantine_s\": 2592000},"
			      " \"sm\": {\"periodic_update_s\": 86400, \"batch_window_ms\": 10000,"
			      " \"batch_max\": 1000000}, \"vf\": {\"rebind_timeout_ms\": 600000},"
			      " \"api\": {\"allowed_uids\": [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,"
			      "2147483647], \"idle_timeout_s\": 86400, \"line_timeout_s\": 3600}}",
			      NULL),
			 0);
	assert_int_equal(f->cfg.pool.quarantine_s, 2592000);
	assert_int_equal(f->cfg.sm.periodic_update_s, 86400);
	assert_int_equal(f->cfg.sm.batch_max, 1000000);
	assert_int_equal(f->cfg.vf.rebind_timeout_ms, 600000);
	assert_int_equal(f->cfg.api.n_allowed_uids, IBVF_MAX_ALLOWED_UIDS);
	assert_int_equal(f->cfg.api.idle_timeout_s, 86400);
	assert_int_equal(f->cfg.api.line_timeout_s, 3600);
	for (const char *const *l = (const char *const[]){"error", "err", "warning", "warn",
							  "notice", "info", "debug", NULL};
	     *l; l++) {
		char json[64];

		snprintf(json, sizeof(json), "{\"log_level\": \"%s\"}", *l);
		assert_int_equal(load(f, json, NULL), 0);
		assert_int_equal(f->cfg.log_level, ibvf_log_level_parse(*l));
	}
}

/* ------------------------------------------------------- bad values -- */

/*
 * Every key with a wrong type or an out-of-range value: the error must name
 * the file and the key path. "%F" in the fragment stands for the file name.
 */
static const struct {
	const char *json;
	const char *frag;
} bad[] = {
	/* http and log_format (issue 20) */
	{"{\"http\": {\"address\": \"localhost\"}}",
	 "%F: http.address: expected a numeric IPv4 or IPv6 address"},
	{"{\"http\": {\"address\": \"1.2.3.4:80\"}}", "%F: http.address: expected a numeric"},
	{"{\"http\": {\"port\": 65536}}", "%F: http.port:"},
	{"{\"http\": {\"port\": -1}}", "%F: http.port:"},
	{"{\"http\": {\"enabled\": 1}}", "%F: http.enabled:"},
	{"{\"http\": {\"listen\": \"x\"}}", "%F: http.listen: unknown key"},
	{"{\"log_format\": \"logfmt\"}", "%F: log_format: expected text or json"},
	/* not an object / syntax */
	{"[]", "expected a JSON object"},
	{"42", "%F:1:"},
	{"{\"state_dir\": \"/x\",}", "%F:1:"},
	{"{\"state_dir\": \"/x\", \"state_dir\": \"/y\"}", "duplicate object key"},
	{"", "%F:"},
	/* top-level keys */
	{"{\"state_dir\": 5}", "%F: state_dir: expected a string"},
	{"{\"state_dir\": null}", "%F: state_dir: expected a string"},
	{"{\"state_dir\": \"a\\u0000b\"}", "%F:"},
	{"{\"run_dir\": []}", "%F: run_dir: expected a string"},
	{"{\"sysfs_root\": true}", "%F: sysfs_root: expected a string"},
	/* relative paths: ibvfd and ibvfctl would use different stores, sockets, trees */
	{"{\"state_dir\": \"var/lib/ibvf\"}",
	 "%F: state_dir: 'var/lib/ibvf' is not an absolute path"},
	{"{\"state_dir\": \"\"}", "%F: state_dir: '' is not an absolute path"},
	{"{\"run_dir\": \"./run\"}", "%F: run_dir: './run' is not an absolute path"},
	{"{\"sysfs_root\": \"sys\"}", "%F: sysfs_root: 'sys' is not an absolute path"},
	{"{\"sm\": {\"module_dir\": \"lib/sm\"}}",
	 "%F: sm.module_dir: 'lib/sm' is not an absolute path"},
	{"{\"api\": {\"socket\": \"ibvfd.sock\"}}",
	 "%F: api.socket: 'ibvfd.sock' is not an absolute path"},
	{"{\"log_level\": 7}", "%F: log_level: expected a string"},
	{"{\"log_level\": \"verbose\"}", "%F: log_level: expected error, warning"},
	{"{\"allow_default_pkey\": \"yes\"}", "%F: allow_default_pkey: expected true or false"},
	{"{\"allow_default_pkey\": 1}", "%F: allow_default_pkey: expected true or false"},
	/* pool */
	{"{\"pool\": []}", "%F: pool: expected an object"},
	{"{\"pool\": {\"ranges\": {}}}", "%F: pool.ranges: expected a non-empty array"},
	{"{\"pool\": {\"ranges\": []}}", "%F: pool.ranges: expected a non-empty array"},
	{"{\"pool\": {\"ranges\": [\"02:00:00:00:00:00:00:01\"]}}",
	 "%F: pool.ranges[0]: expected a JSON object"},
	{"{\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:00:00:01\"}]}}",
	 "%F: pool.ranges[0].end: required GUID string"},
	{"{\"pool\": {\"ranges\": [{\"end\": \"02:00:00:00:00:00:00:01\"}]}}",
	 "%F: pool.ranges[0].start: required GUID string"},
	{"{\"pool\": {\"ranges\": [{\"start\": 1, \"end\": \"02:00:00:00:00:00:00:01\"}]}}",
	 "%F: pool.ranges[0].start: required GUID string"},
	{"{\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:00:00:01\", "
	 "\"end\": \"02:00:00:00:00:00:00:0x\"}]}}",
	 "%F: pool.ranges[0].end: invalid GUID '02:00:00:00:00:00:00:0x'"},
	{"{\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:00:00:01\", "
	 "\"end\": \"02:00:00:00:00:00:00:05\"}, {\"start\": \"bogus\", "
	 "\"end\": \"02:00:00:00:00:00:00:09\"}]}}",
	 "%F: pool.ranges[1].start: invalid GUID 'bogus'"},
	{"{\"pool\": {\"quarantine_s\": \"60\"}}",
	 "%F: pool.quarantine_s: expected an integer in 0..2592000"},
	{"{\"pool\": {\"quarantine_s\": 1.5}}", "%F: pool.quarantine_s: expected an integer"},
	{"{\"pool\": {\"quarantine_s\": -1}}",
	 "%F: pool.quarantine_s: -1 is out of range 0..2592000"},
	{"{\"pool\": {\"quarantine_s\": 2592001}}",
	 "%F: pool.quarantine_s: 2592001 is out of range"},
	{"{\"pool\": {\"sync\": true}}", "%F: pool.sync: expected a string"},
	{"{\"pool\": {\"sync\": \"off\"}}", "%F: pool.sync: expected \"full\" or \"normal\""},
	{"{\"pool\": {\"sync\": \"FULL\"}}", "%F: pool.sync: expected \"full\" or \"normal\""},
	/* sm */
	{"{\"sm\": \"ufm\"}", "%F: sm: expected an object"},
	{"{\"sm\": {\"backend\": 1}}", "%F: sm.backend: expected a string"},
	{"{\"sm\": {\"module_dir\": false}}", "%F: sm.module_dir: expected a string"},
	{"{\"sm\": {\"config\": \"x\"}}", "%F: sm.config: expected an object"},
	{"{\"sm\": {\"config\": []}}", "%F: sm.config: expected an object"},
	{"{\"sm\": {\"periodic_update_s\": 0}}",
	 "%F: sm.periodic_update_s: 0 is out of range 1..86400"},
	{"{\"sm\": {\"periodic_update_s\": 86401}}",
	 "%F: sm.periodic_update_s: 86401 is out of range 1..86400"},
	{"{\"sm\": {\"periodic_update_s\": \"5\"}}",
	 "%F: sm.periodic_update_s: expected an integer in 1..86400"},
	{"{\"sm\": {\"batch_window_ms\": 10001}}",
	 "%F: sm.batch_window_ms: 10001 is out of range 0..10000"},
	{"{\"sm\": {\"batch_window_ms\": -5}}",
	 "%F: sm.batch_window_ms: -5 is out of range 0..10000"},
	{"{\"sm\": {\"batch_max\": 0}}", "%F: sm.batch_max: 0 is out of range 1..1000000"},
	{"{\"sm\": {\"batch_max\": 1000001}}",
	 "%F: sm.batch_max: 1000001 is out of range 1..1000000"},
	{"{\"sm\": {\"batch_max\": null}}", "%F: sm.batch_max: expected an integer"},
	/* vf */
	{"{\"vf\": 1}", "%F: vf: expected an object"},
	{"{\"vf\": {\"driver\": 1}}", "%F: vf.driver: expected a string"},
	{"{\"vf\": {\"driver\": \"sysfs\"}}",
	 "%F: vf.driver: expected \"netlink\", \"ibsim\" (labs) or \"fake\" (tests)"},
	{"{\"vf\": {\"rebind_timeout_ms\": 0}}",
	 "%F: vf.rebind_timeout_ms: 0 is out of range 1..600000"},
	{"{\"vf\": {\"rebind_timeout_ms\": 600001}}",
	 "%F: vf.rebind_timeout_ms: 600001 is out of range 1..600000"},
	{"{\"vf\": {\"ibsim\": true}}", "%F: vf.ibsim: expected an object"},
	/* api */
	{"{\"api\": []}", "%F: api: expected an object"},
	{"{\"api\": {\"socket\": 1}}", "%F: api.socket: expected a string"},
	{"{\"api\": {\"allowed_uids\": 0}}", "%F: api.allowed_uids: expected 1..16 user IDs"},
	{"{\"api\": {\"allowed_uids\": []}}", "%F: api.allowed_uids: expected 1..16 user IDs"},
	{"{\"api\": {\"allowed_uids\": [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}}",
	 "%F: api.allowed_uids: expected 1..16 user IDs"},
	{"{\"api\": {\"allowed_uids\": [0, -1]}}", "%F: api.allowed_uids: entry 1 is not a uid"},
	{"{\"api\": {\"idle_timeout_s\": 0}}",
	 "%F: api.idle_timeout_s: 0 is out of range 1..86400"},
	{"{\"api\": {\"idle_timeout_s\": 86401}}",
	 "%F: api.idle_timeout_s: 86401 is out of range 1..86400"},
	{"{\"api\": {\"idle_timeout_s\": \"60\"}}", "%F: api.idle_timeout_s: expected an integer"},
	{"{\"api\": {\"line_timeout_s\": 0}}", "%F: api.line_timeout_s: 0 is out of range 1..3600"},
	{"{\"api\": {\"line_timeout_s\": 3601}}",
	 "%F: api.line_timeout_s: 3601 is out of range 1..3600"},
	{"{\"api\": {\"allowed_uids\": [\"root\"]}}", "%F: api.allowed_uids: entry 0 is not a uid"},
	{"{\"api\": {\"allowed_uids\": [2147483648]}}",
	 "%F: api.allowed_uids: entry 0 is not a uid"},
};

/* Replace "%F" in @frag by @file. */
static void expand(char *out, size_t len, const char *frag, const char *file)
{
	const char *p = strstr(frag, "%F");

	if (!p)
		snprintf(out, len, "%s", frag);
	else
		snprintf(out, len, "%.*s%s%s", (int)(p - frag), frag, file, p + 2);
}

static void test_bad_values(void **state)
{
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[1024];
		int ret = load(f, bad[i].json, NULL);

		expand(want, sizeof(want), bad[i].frag, f->file);
		if (ret != -EINVAL)
			print_error("config '%s' gave %d (%s)\n", bad[i].json, ret, f->err);
		assert_int_equal(ret, -EINVAL);
		assert_contains(f->err, want);
		/* every error names the file */
		assert_contains(f->err, f->file);
	}
}

/* Unknown keys at every level are errors naming the key path. */
static const struct {
	const char *json;
	const char *frag;
} unknown[] = {
	{"{\"state_directory\": \"/x\"}", "%F: state_directory: unknown key"},
	{"{\"pool\": {\"range\": []}}", "%F: pool.range: unknown key"},
	{"{\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:00:00:01\", "
	 "\"end\": \"02:00:00:00:00:00:00:05\", \"step\": 1}]}}",
	 "%F: pool.ranges[0].step: unknown key"},
	{"{\"pool\": {\"quarantine\": 60}}", "%F: pool.quarantine: unknown key"},
	{"{\"sm\": {\"plugin\": \"ufm\"}}", "%F: sm.plugin: unknown key"},
	{"{\"vf\": {\"rebind_timeout\": 5}}", "%F: vf.rebind_timeout: unknown key"},
	{"{\"api\": {\"sock\": \"/x\"}}", "%F: api.sock: unknown key"},
	{"{\"Pool\": {}}", "%F: Pool: unknown key"},
};

static void test_unknown_keys(void **state)
{
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		char want[1024];

		expand(want, sizeof(want), unknown[i].frag, f->file);
		assert_int_equal(load(f, unknown[i].json, NULL), -EINVAL);
		assert_contains(f->err, want);
	}
}

/* ----------------------------------------------------------- ranges -- */

static const struct {
	const char *ranges; /* JSON array text */
	const char *frag;   /* NULL: accepted */
} ranges[] = {
	/* start > end */
	{"[{\"start\": \"02:00:00:00:00:00:00:10\", \"end\": \"02:00:00:00:00:00:00:0f\"}]",
	 "pool.ranges[0]: start is greater than end"},
	/* containing 0 or all-ones as a member */
	{"[{\"start\": \"00:00:00:00:00:00:00:00\", \"end\": \"00:00:00:00:00:00:00:ff\"}]",
	 "pool.ranges[0]: range contains the invalid GUID 00:00:00:00:00:00:00:00"},
	{"[{\"start\": \"00:00:00:00:00:00:00:00\", \"end\": \"00:00:00:00:00:00:00:00\"}]",
	 "range contains the invalid GUID 00:00:00:00:00:00:00:00"},
	{"[{\"start\": \"ff:ff:ff:ff:ff:ff:ff:00\", \"end\": \"ff:ff:ff:ff:ff:ff:ff:ff\"}]",
	 "pool.ranges[0]: range contains the invalid GUID ff:ff:ff:ff:ff:ff:ff:ff"},
	{"[{\"start\": \"ff:ff:ff:ff:ff:ff:ff:ff\", \"end\": \"ff:ff:ff:ff:ff:ff:ff:ff\"}]",
	 "range contains the invalid GUID ff:ff:ff:ff:ff:ff:ff:ff"},
	{"[{\"start\": \"02:00:00:00:00:00:00:01\", \"end\": \"02:00:00:00:00:00:00:05\"},"
	 " {\"start\": \"00:00:00:00:00:00:00:00\", \"end\": \"00:00:00:00:00:00:00:01\"}]",
	 "pool.ranges[1]: range contains the invalid GUID 00:00:00:00:00:00:00:00"},
	/* overlap: identical, nested, touching one GUID, given out of order */
	{"[{\"start\": \"02:00:00:00:00:00:00:01\", \"end\": \"02:00:00:00:00:00:00:05\"},"
	 " {\"start\": \"02:00:00:00:00:00:00:01\", \"end\": \"02:00:00:00:00:00:00:05\"}]",
	 "pool.ranges: ranges overlap at 02:00:00:00:00:00:00:01"},
	{"[{\"start\": \"02:00:00:00:00:00:00:01\", \"end\": \"02:00:00:00:00:00:00:ff\"},"
	 " {\"start\": \"02:00:00:00:00:00:00:10\", \"end\": \"02:00:00:00:00:00:00:20\"}]",
	 "ranges overlap at 02:00:00:00:00:00:00:10..02:00:00:00:00:00:00:20 (range "
	 "02:00:00:00:00:00:00:01..02:00:00:00:00:00:00:ff holds them too)"},
	{"[{\"start\": \"02:00:00:00:00:00:00:05\", \"end\": \"02:00:00:00:00:00:00:09\"},"
	 " {\"start\": \"02:00:00:00:00:00:00:01\", \"end\": \"02:00:00:00:00:00:00:05\"}]",
	 "ranges overlap at 02:00:00:00:00:00:00:05"},
	{"[{\"start\": \"02:00:00:00:00:00:00:01\", \"end\": \"02:00:00:00:00:00:00:03\"},"
	 " {\"start\": \"02:00:00:00:00:00:01:00\", \"end\": \"02:00:00:00:00:00:02:00\"},"
	 " {\"start\": \"02:00:00:00:00:00:01:ff\", \"end\": \"02:00:00:00:00:00:03:00\"}]",
	 "ranges overlap at 02:00:00:00:00:00:01:ff"},
	/* accepted: adjacent, single GUID, the assignable extremes */
	{"[{\"start\": \"02:00:00:00:00:00:00:01\", \"end\": \"02:00:00:00:00:00:00:05\"},"
	 " {\"start\": \"02:00:00:00:00:00:00:06\", \"end\": \"02:00:00:00:00:00:00:06\"}]",
	 NULL},
	{"[{\"start\": \"00:00:00:00:00:00:00:01\", \"end\": \"ff:ff:ff:ff:ff:ff:ff:fe\"}]", NULL},
	{"[{\"start\": \"ff:ff:ff:ff:ff:ff:ff:fe\", \"end\": \"ff:ff:ff:ff:ff:ff:ff:fe\"},"
	 " {\"start\": \"00:00:00:00:00:00:00:01\", \"end\": \"00:00:00:00:00:00:00:01\"}]",
	 NULL},
};

static void test_ranges(void **state)
{
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		char json[1024];
		int ret;

		snprintf(json, sizeof(json), "{\"pool\": {\"ranges\": %s}}", ranges[i].ranges);
		ret = load(f, json, NULL);
		if ((ret == 0) != (ranges[i].frag == NULL))
			print_error("ranges %s: ret %d '%s'\n", ranges[i].ranges, ret, f->err);
		if (!ranges[i].frag) {
			assert_int_equal(ret, 0);
			for (size_t k = 1; k < f->cfg.pool.n_ranges; k++)
				assert_true(f->cfg.pool.ranges[k - 1].end <
					    f->cfg.pool.ranges[k].start);
			continue;
		}
		assert_int_equal(ret, -EINVAL);
		assert_contains(f->err, f->file);
		assert_contains(f->err, ranges[i].frag);
	}
}

static void test_parse_ranges_direct(void **state)
{
	char err[IBVF_ERR_LEN];
	struct ibvf_guid_range *r = NULL;
	size_t n = 0;
	json_t *arr =
		json_loads("[{\"start\": \"0x0000000000000010\", \"end\": \"0x20\"}]", 0, NULL);

	(void)state;
	assert_non_null(arr);
	assert_int_equal(
		ibvf_parse_guid_ranges("f.json", "x.ranges", arr, &r, &n, err, sizeof(err)),
		-EINVAL);
	assert_contains(err, "f.json: x.ranges[0].end: invalid GUID '0x20'");
	assert_null(r);
	json_decref(arr);
	arr = json_loads("[{\"start\": \"0x0000000000000010\", \"end\": \"0x0000000000000020\"}]",
			 0, NULL);
	assert_int_equal(
		ibvf_parse_guid_ranges("f.json", "x.ranges", arr, &r, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_true(r[0].start == 0x10 && r[0].end == 0x20);
	free(r);
	json_decref(arr);
}

/* -------------------------------------------------------------- env -- */

static void test_env_overrides(void **state)
{
	struct fixture *f = *state;
	const char *env[] = {
		"GUID_POOL_RANGE_START=02:00:00:00:00:00:10:00",
		"GUID_POOL_RANGE_END=02:00:00:00:00:00:1f:ff",
		"DAEMON_SM_PLUGIN=ufm",
		"DAEMON_PERIODIC_UPDATE=17",
		"UFM_USERNAME=admin",
		"UFM_PASSWORD=s3cr3t-pa55",
		"UFM_ADDRESS=ufm.example.org",
		"UFM_HTTP_SCHEMA=https",
		"UFM_PORT=8443",
		"UFM_CERTIFICATE=-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"UNRELATED=1",
		NULL,
	};
	json_t *bc;

	/* the environment overrides the file; keys the env does not set stay */
	assert_int_equal(load(f,
			      "{" RANGE1
			      ", \"sm\": {\"backend\": \"noop\", \"periodic_update_s\": 9,"
			      " \"config\": {\"address\": \"file.example\", \"timeout_ms\": 700}}}",
			      env),
			 0);
	assert_int_equal(f->cfg.pool.n_ranges, 1);
	assert_true(f->cfg.pool.ranges[0].start == 0x0200000000001000ull);
	assert_true(f->cfg.pool.ranges[0].end == 0x0200000000001fffull);
	assert_string_equal(f->cfg.sm.backend, "ufm");
	assert_int_equal(f->cfg.sm.periodic_update_s, 17);
	bc = json_loads(f->cfg.sm.backend_json, 0, NULL);
	assert_non_null(bc);
	assert_string_equal(json_string_value(json_object_get(bc, "username")), "admin");
	assert_string_equal(json_string_value(json_object_get(bc, "password")), "s3cr3t-pa55");
	assert_string_equal(json_string_value(json_object_get(bc, "address")), "ufm.example.org");
	assert_string_equal(json_string_value(json_object_get(bc, "scheme")), "https");
	assert_int_equal(json_integer_value(json_object_get(bc, "port")), 8443);
	assert_contains(json_string_value(json_object_get(bc, "ca_pem")), "BEGIN CERTIFICATE");
	assert_int_equal(json_integer_value(json_object_get(bc, "timeout_ms")), 700);
	json_decref(bc);
}

static void test_env_without_file(void **state)
{
	struct fixture *f = *state;
	const char *env[] = {"GUID_POOL_RANGE_START=0x0200000000000001",
			     "GUID_POOL_RANGE_END=0x02000000000000ff", "UFM_PORT=443", NULL, NULL};
	struct ibvf_config c;
	char err[IBVF_ERR_LEN];
	char *missing = tu_path(f->dir, "absent.json");

	assert_int_equal(ibvf_config_load(&c, missing, false, tu_strv(env), err, sizeof(err)), 0);
	assert_int_equal(c.pool.n_ranges, 1);
	assert_true(c.pool.ranges[0].end == 0x02000000000000ffull);
	/* UFM_* reach sm.config only when the backend is ufm (default: noop) */
	assert_null(c.sm.backend_json);
	ibvf_config_free(&c);
	env[3] = "DAEMON_SM_PLUGIN=ufm";
	env[4] = NULL;
	assert_int_equal(ibvf_config_load(&c, missing, false, tu_strv(env), err, sizeof(err)), 0);
	assert_string_equal(c.sm.backend_json, "{\"port\":443}");
	ibvf_config_free(&c);
	free(missing);
}

static const struct {
	const char *env[3];
	const char *frag;
} bad_env[] = {
	{{"IBVF_HTTP_PORT=65536"}, "<environment>: IBVF_HTTP_PORT: '65536' is not a TCP port"},
	{{"IBVF_HTTP_PORT=80x"}, "<environment>: IBVF_HTTP_PORT: '80x' is not a TCP port"},
	{{"GUID_POOL_RANGE_START=02:00:00:00:00:00:00:01"},
	 "<environment>: GUID_POOL_RANGE_END: both GUID_POOL_RANGE_START and "
	 "GUID_POOL_RANGE_END must be set"},
	{{"GUID_POOL_RANGE_END=02:00:00:00:00:00:00:01"},
	 "<environment>: GUID_POOL_RANGE_START: both"},
	{{"GUID_POOL_RANGE_START=02:00:00:00:00:00:00:10",
	  "GUID_POOL_RANGE_END=02:00:00:00:00:00:00:01"},
	 "GUID_POOL_RANGE_START..END[0]: start is greater than end"},
	{{"GUID_POOL_RANGE_START=00:00:00:00:00:00:00:00",
	  "GUID_POOL_RANGE_END=02:00:00:00:00:00:00:01"},
	 "range contains the invalid GUID 00:00:00:00:00:00:00:00"},
	{{"GUID_POOL_RANGE_START=02:00:00:00:00:00:00:01",
	  "GUID_POOL_RANGE_END=FF:FF:FF:FF:FF:FF:FF:FF"},
	 "range contains the invalid GUID ff:ff:ff:ff:ff:ff:ff:ff"},
	{{"GUID_POOL_RANGE_START=02:00", "GUID_POOL_RANGE_END=02:00:00:00:00:00:00:01"},
	 "GUID_POOL_RANGE_START..END[0].start: invalid GUID '02:00'"},
	{{"DAEMON_PERIODIC_UPDATE=0"},
	 "<environment>: DAEMON_PERIODIC_UPDATE: '0' is not a number of seconds in 1..86400"},
	{{"DAEMON_PERIODIC_UPDATE=5s"}, "DAEMON_PERIODIC_UPDATE: '5s' is not a number"},
	{{"DAEMON_PERIODIC_UPDATE=86401"}, "DAEMON_PERIODIC_UPDATE: '86401' is not"},
	{{"DAEMON_PERIODIC_UPDATE=-5"}, "DAEMON_PERIODIC_UPDATE: '-5' is not"},
	{{"DAEMON_PERIODIC_UPDATE=99999999999999999999999"},
	 "DAEMON_PERIODIC_UPDATE: '99999999999999999999999' is not"},
	{{"GUID_POOL_RANGE_START=", "GUID_POOL_RANGE_END=02:00:00:00:00:00:00:01"},
	 "GUID_POOL_RANGE_START..END[0].start: empty GUID"},
	{{"UFM_PORT=0"}, "<environment>: UFM_PORT: '0' is not a TCP port"},
	{{"UFM_PORT=65536"}, "UFM_PORT: '65536' is not a TCP port"},
	{{"UFM_PORT=https"}, "UFM_PORT: 'https' is not a TCP port"},
};

/* http and log_format: defaults, file values, IBVF_HTTP_PORT over the file, print-config. */
static void test_http_and_log_format(void **state)
{
	struct fixture *f = *state;
	const char *env[] = {"IBVF_HTTP_PORT=0", NULL};
	char *out;

	assert_int_equal(load(f, "{" RANGE1 "}", NULL), 0);
	assert_true(f->cfg.http.enabled);
	assert_string_equal(f->cfg.http.address, "127.0.0.1");
	assert_int_equal(f->cfg.http.port, 9479);
	assert_false(f->cfg.log_json);
	assert_int_equal(load(f,
			      "{" RANGE1
			      ", \"log_format\": \"json\", \"http\": {\"enabled\": false, "
			      "\"address\": \"::1\", \"port\": 8080}}",
			      NULL),
			 0);
	assert_false(f->cfg.http.enabled);
	assert_string_equal(f->cfg.http.address, "::1");
	assert_int_equal(f->cfg.http.port, 8080);
	assert_true(f->cfg.log_json);
	out = print_config(&f->cfg);
	assert_contains(out, "\"log_format\": \"json\"");
	assert_contains(out, "\"address\": \"::1\"");
	assert_contains(out, "\"port\": 8080");
	free(out);
	assert_int_equal(load(f, "{" RANGE1 ", \"http\": {\"port\": 8080}}", env), 0);
	assert_int_equal(f->cfg.http.port, 0);
}

static void test_env_bad(void **state)
{
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(bad_env) / sizeof(bad_env[0]); i++) {
		const char *env[4] = {bad_env[i].env[0], bad_env[i].env[1], bad_env[i].env[2],
				      NULL};
		int ret = load(f, "{" RANGE1 "}", env);

		if (ret != -EINVAL)
			print_error("env %s %s: ret %d\n", bad_env[i].env[0],
				    bad_env[i].env[1] ? bad_env[i].env[1] : "", ret);
		assert_int_equal(ret, -EINVAL);
		assert_contains(f->err, bad_env[i].frag);
	}
}

/* Empty UFM_* values (the ib-kubernetes secret ships UFM_PORT: "") are unset. */
static void test_env_empty_ufm_ignored(void **state)
{
	struct fixture *f = *state;
	const char *env[] = {"UFM_PORT=",	  "UFM_HTTP_SCHEMA=",	     "UFM_ADDRESS=",
			     "DAEMON_SM_PLUGIN=", "DAEMON_PERIODIC_UPDATE=", NULL};

	assert_int_equal(load(f, "{" RANGE1 "}", env), 0);
	assert_null(f->cfg.sm.backend_json);
	assert_string_equal(f->cfg.sm.backend, "noop");
	assert_int_equal(f->cfg.sm.periodic_update_s, 5);
}

/* ---------------------------------------------------------- secrets -- */

static void test_print_masks_secrets(void **state)
{
	struct fixture *f = *state;
	const char *env[] = {"UFM_PASSWORD=pw-from-env-9137", "UFM_USERNAME=admin", NULL};
	char *out;
	json_t *root, *sm;

	assert_int_equal(load(f,
			      "{" RANGE1 ", \"sm\": {\"backend\": \"ufm\", \"config\": {"
			      "\"token\": \"tok-4242-abcdef\", \"client\": {\"key_pem\": "
			      "\"-----BEGIN PRIVATE KEY-----xyzzy\", \"cert_pem\": \"CERTDATA\"},"
			      " \"password_file\": \"/etc/ibvf/ufm.pw\", \"secret\": \"zz-77\"}}}",
			      env),
			 0);
	out = print_config(&f->cfg);
	assert_not_contains(out, "pw-from-env-9137");
	assert_not_contains(out, "tok-4242-abcdef");
	assert_not_contains(out, "xyzzy");
	assert_not_contains(out, "zz-77");
	assert_contains(out, "********");
	/* paths to secret files and known non-secret values are shown */
	assert_contains(out, "/etc/ibvf/ufm.pw");
	assert_contains(out, "admin");
	/* a key not on the list of known non-secret keys is masked, whatever its name */
	assert_not_contains(out, "CERTDATA");
	/* the output is JSON with the effective values */
	root = json_loads(out, 0, NULL);
	assert_non_null(root);
	sm = json_object_get(root, "sm");
	assert_string_equal(json_string_value(json_object_get(sm, "backend")), "ufm");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(sm, "config"), "password")),
		"********");
	assert_string_equal(json_string_value(json_object_get(root, "config_file")), f->file);
	assert_string_equal(
		json_string_value(json_object_get(
			json_array_get(json_object_get(json_object_get(root, "pool"), "ranges"), 0),
			"start")),
		"02:00:00:00:00:00:00:01");
	json_decref(root);
	/* printing does not change the config itself */
	assert_contains(f->cfg.sm.backend_json, "pw-from-env-9137");
	free(out);
}

static void test_print_roundtrip_fields(void **state)
{
	struct fixture *f = *state;
	char *out;
	json_t *root;

	assert_int_equal(load(f,
			      "{\"log_level\": \"warning\", \"pool\": {\"sync\": \"normal\","
			      " \"quarantine_s\": 5}, \"api\": {\"allowed_uids\": [0, 42]}}",
			      NULL),
			 0);
	out = print_config(&f->cfg);
	root = json_loads(out, 0, NULL);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "log_level")), "warning");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(root, "pool"), "sync")),
		"normal");
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(root, "pool"), "quarantine_s")),
		5);
	assert_int_equal(json_integer_value(json_array_get(
				 json_object_get(json_object_get(root, "api"), "allowed_uids"), 1)),
			 42);
	json_decref(root);
	free(out);
}

/* A syntax error must not quote the offending token: it may be a secret. */
static void test_syntax_error_hides_secret(void **state)
{
	struct fixture *f = *state;
	static const char *const json[] = {
		"{\"sm\": {\"config\": {\"password\": hunter2}}}",
		"{\"sm\": {\"config\": {\"password\": \"hunter2\" \"user\": \"x\"}}}",
		"{\"sm\": {\"config\": {\"password\": \"hunter2\", \"password\": \"hunter2\"}}}",
		"{\"sm\": {\"config\": {\"password\": \"hun\\u0000ter2\"}}}",
		"{\"sm\": {\"config\": {\"password\": \"hunter2",
	};

	for (size_t i = 0; i < sizeof(json) / sizeof(json[0]); i++) {
		char where[512];

		assert_int_equal(load(f, json[i], NULL), -EINVAL);
		snprintf(where, sizeof(where), "%s:1:", f->file);
		assert_contains(f->err, where);
		assert_not_contains(f->err, "hunter2");
		assert_not_contains(f->err, "ter2");
	}
}

/* An error about the top level itself has no empty key path ("file: : ..."). */
static void test_top_level_error_format(void **state)
{
	struct fixture *f = *state;
	char want[512];

	assert_int_equal(load(f, "[]", NULL), -EINVAL);
	snprintf(want, sizeof(want), "%s: expected a JSON object", f->file);
	assert_string_equal(f->err, want);
	assert_not_contains(f->err, ": :");
}

/* Secrets inside arrays, and secret keys whose value is not a string, are masked. */
static void test_print_masks_nested_secrets(void **state)
{
	struct fixture *f = *state;
	char *out;

	assert_int_equal(load(f,
			      "{\"sm\": {\"config\": {\"servers\": [{\"host\": \"a\","
			      " \"password\": \"arr-pw-5150\"}, [{\"token\": \"deep-tok-8086\"}]],"
			      " \"secret\": {\"value\": \"obj-secret-6502\"},"
			      " \"api_token\": [\"list-tok-6809\"]}}}",
			      NULL),
			 0);
	out = print_config(&f->cfg);
	assert_not_contains(out, "arr-pw-5150");
	assert_not_contains(out, "deep-tok-8086");
	assert_not_contains(out, "obj-secret-6502");
	assert_not_contains(out, "list-tok-6809");
	/* unknown keys ("host") are masked too: only known non-secret keys are shown */
	assert_not_contains(out, "\"host\": \"a\"");
	free(out);
}

/*
 * A misspelled secret key ("pasword") used to be printed in clear: every
 * value under sm.config whose key is not a known non-secret key is masked,
 * strings, numbers and booleans alike; known keys are shown.
 */
static void test_print_masks_unknown_keys(void **state)
{
	struct fixture *f = *state;
	char *out;

	assert_int_equal(load(f,
			      "{\"sm\": {\"backend\": \"ufm\", \"config\": {"
			      "\"address\": \"ufm.example.com\", \"username\": \"admin\","
			      " \"pasword\": \"hunter2-typo-31337\", \"port\": 8443,"
			      " \"pin\": 271828, \"Password\": \"Upper-1618\","
			      " \"ca_pem\": \"PUBLICCERT\", \"timeout_ms\": 1234,"
			      " \"extra\": [\"arr-9973\", {\"sl\": 3, \"cred\": \"obj-4099\"}]}}}",
			      NULL),
			 0);
	out = print_config(&f->cfg);
	assert_not_contains(out, "hunter2-typo-31337");
	assert_not_contains(out, "271828");
	assert_not_contains(out, "Upper-1618");
	assert_not_contains(out, "arr-9973");
	assert_not_contains(out, "obj-4099");
	assert_contains(out, "\"pasword\": \"********\"");
	assert_contains(out, "\"pin\": \"********\"");
	assert_contains(out, "ufm.example.com");
	assert_contains(out, "\"username\": \"admin\"");
	assert_contains(out, "\"port\": 8443");
	assert_contains(out, "PUBLICCERT");
	assert_contains(out, "\"timeout_ms\": 1234");
	assert_contains(out, "\"sl\": 3");
	free(out);
}

/* Load the fixture file with stderr sent to a temporary file; returns what was written (caller
 * frees). */
static char *capture_stderr(struct fixture *f, const char *json)
{
	char *path = tu_path(f->dir, "stderr.txt"), *text;
	int saved = dup(2), fd;
	FILE *in;
	long n;

	fflush(stderr);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && saved >= 0);
	dup2(fd, 2);
	close(fd);
	ibvf_log_init("test_config", IBVF_LOG_STDERR, LOG_INFO);
	assert_int_equal(load(f, json, NULL), 0);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	in = fopen(path, "r");
	assert_non_null(in);
	fseek(in, 0, SEEK_END);
	n = ftell(in);
	rewind(in);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)n, in), (size_t)n);
	fclose(in);
	free(path);
	return text;
}

/*
 * An inline secret in a config file that group or others may read is
 * warned about, naming the file and its mode; not when the file is 0600 or
 * when sm.config holds only known non-secret keys.
 */
static void test_inline_secret_world_readable_warned(void **state)
{
	struct fixture *f = *state;
	const char *json =
		"{\"sm\": {\"backend\": \"ufm\", \"config\": {"
		"\"address\": \"u\", \"username\": \"a\", \"password\": \"inline-pw-42\"}}}";
	char want[512], *log;

	assert_int_equal(tu_write_str(f->file, json), 0);
	assert_int_equal(chmod(f->file, 0644), 0);
	log = capture_stderr(f, NULL);
	snprintf(want, sizeof(want), "%s: sm.config holds 1 inline secret value(s)", f->file);
	assert_contains(log, want);
	assert_contains(log, "mode 0644");
	assert_not_contains(log, "inline-pw-42");
	free(log);
	assert_int_equal(chmod(f->file, 0640), 0);
	log = capture_stderr(f, NULL);
	assert_contains(log, "mode 0640, readable by its group");
	free(log);
	assert_int_equal(chmod(f->file, 0600), 0);
	log = capture_stderr(f, NULL);
	assert_not_contains(log, "inline secret");
	free(log);
	assert_int_equal(tu_write_str(f->file, "{\"sm\": {\"backend\": \"ufm\", \"config\": {"
					       "\"address\": \"u\", \"username\": \"a\","
					       " \"password_file\": \"/etc/pw\"}}}"),
			 0);
	assert_int_equal(chmod(f->file, 0644), 0);
	log = capture_stderr(f, NULL);
	assert_not_contains(log, "inline secret");
	free(log);
}

/*
 * A FIFO (or any other non-regular file) as the config file is refused at
 * once with a clear error: json_load_file() used to block in open(2) for
 * ever (issue 14). alarm() bounds the test if it regresses.
 */
static void test_config_fifo_refused(void **state)
{
	struct fixture *f = *state;

	unlink(f->file);
	assert_int_equal(mkfifo(f->file, 0600), 0);
	alarm(10);
	assert_int_equal(load(f, NULL, NULL), -EINVAL);
	alarm(0);
	assert_contains(f->err, f->file);
	assert_contains(f->err, "is not a regular file (a FIFO)");
	unlink(f->file);
	/* a directory and a character device likewise */
	assert_int_equal(mkdir(f->file, 0700), 0);
	assert_int_equal(load(f, NULL, NULL), -EINVAL);
	assert_contains(f->err, "is not a regular file (a directory)");
	rmdir(f->file);
	f->err[0] = 0;
	assert_int_equal(ibvf_config_load(&f->cfg, "/dev/null", true, NULL, f->err, sizeof(f->err)),
			 -EINVAL);
	assert_contains(f->err, "/dev/null is not a regular file (a character device)");
}

/* A config file above IBVF_JSON_FILE_MAX is refused (-EFBIG), not read. */
static void test_config_too_large(void **state)
{
	struct fixture *f = *state;
	FILE *o = fopen(f->file, "w");

	assert_non_null(o);
	fputs("{\"log_level\": \"info\"", o);
	for (size_t i = 0; i < IBVF_JSON_FILE_MAX / 8; i++)
		fputs("        ", o);
	fputs("}", o);
	fclose(o);
	assert_int_equal(load(f, NULL, NULL), -EFBIG);
	assert_contains(f->err, "is larger than 4194304 bytes");
}

/*
 * ibvf_config_env_take(): the copy keeps UFM_PASSWORD for loads (and
 * reloads), the process environment loses it, and the bytes where it was
 * are overwritten (what /proc/PID/environ would show).
 */
static void test_env_take_scrubs_secret(void **state)
{
	struct fixture *f = *state;
	char *where, **copy;
	bool found = false;

	assert_int_equal(setenv("UFM_PASSWORD", "env-secret-8128", 1), 0);
	assert_int_equal(setenv("IBVF_TEST_KEEP", "kept", 1), 0);
	where = getenv("UFM_PASSWORD");
	assert_non_null(where);
	copy = ibvf_config_env_take(environ);
	assert_non_null(copy);
	assert_null(getenv("UFM_PASSWORD"));
	assert_string_equal(getenv("IBVF_TEST_KEEP"), "kept");
	/* setenv()'s string is not freed by unsetenv(): it must be wiped */
	for (size_t i = 0; i < strlen("env-secret-8128"); i++)
		assert_int_equal(where[i], 0);
	for (char **e = copy; *e; e++)
		found |= !strcmp(*e, "UFM_PASSWORD=env-secret-8128");
	assert_true(found);
	for (char *const *e = environ; *e; e++)
		assert_null(strstr(*e, "env-secret-8128"));
	assert_int_equal(tu_write_str(f->file, "{\"sm\": {\"backend\": \"ufm\"}}"), 0);
	f->err[0] = 0;
	assert_int_equal(ibvf_config_load(&f->cfg, f->file, true, copy, f->err, sizeof(f->err)), 0);
	f->loaded = true;
	assert_contains(f->cfg.sm.backend_json, "env-secret-8128");
	ibvf_config_env_free(copy);
	unsetenv("IBVF_TEST_KEEP");
}

/* A backend name becomes a module path: it must be a plain name, from file or env. */
static void test_backend_name_checked(void **state)
{
	struct fixture *f = *state;
	static const char *const bad_names[] = {"../../tmp/evil",
						"/usr/lib/x",
						"ufm.so",
						"a b",
						"",
						"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
	static const char *const good_names[] = {"ufm", "opensm", "noop", "my_sm-2"};

	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		char json[256], env_s[256];
		const char *env[] = {env_s, NULL};

		snprintf(json, sizeof(json), "{\"sm\": {\"backend\": \"%s\"}}", bad_names[i]);
		assert_int_equal(load(f, json, NULL), -EINVAL);
		assert_contains(f->err, f->file);
		assert_contains(f->err, "sm.backend: '");
		assert_contains(f->err, "is not a backend name");
		if (!bad_names[i][0])
			continue; /* an empty variable means unset */
		snprintf(env_s, sizeof(env_s), "DAEMON_SM_PLUGIN=%s", bad_names[i]);
		assert_int_equal(load(f, "{}", env), -EINVAL);
		assert_contains(f->err, "<environment>: DAEMON_SM_PLUGIN: '");
		assert_contains(f->err, "is not a backend name");
	}
	for (size_t i = 0; i < sizeof(good_names) / sizeof(good_names[0]); i++) {
		char env_s[256];
		const char *env[] = {env_s, NULL};

		snprintf(env_s, sizeof(env_s), "DAEMON_SM_PLUGIN=%s", good_names[i]);
		assert_int_equal(load(f, "{\"sm\": {\"backend\": \"noop\"}}", env), 0);
		assert_string_equal(f->cfg.sm.backend, good_names[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults_without_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_config, setup, teardown),
		cmocka_unit_test_setup_teardown(test_socket_follows_run_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_edge_values_accepted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ranges, setup, teardown),
		cmocka_unit_test(test_parse_ranges_direct),
		cmocka_unit_test_setup_teardown(test_env_overrides, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_without_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_bad, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_empty_ufm_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_masks_secrets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_roundtrip_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syntax_error_hides_secret, setup, teardown),
		cmocka_unit_test_setup_teardown(test_top_level_error_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_masks_nested_secrets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backend_name_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_masks_unknown_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inline_secret_world_readable_warned, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_config_fifo_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_too_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_take_scrubs_secret, setup, teardown),
		cmocka_unit_test_setup_teardown(test_http_and_log_format, setup, teardown),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
