// SPDX-License-Identifier: MIT
/*
 * The SM backend loader (daemon/engine/sm_loader.c) and the noop backend, with
 * the modules as built: env IBVF_TEST_NOOP_DIR, IBVF_TEST_OPENSM_DIR,
 * IBVF_TEST_UFM_DIR and IBVF_TEST_BROKEN_DIR name their build directories
 * (tests/unit/meson.build).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "err.h"
#include "sm_loader.h"

static const char *dir_of(const char *env)
{
	const char *d = getenv(env);

	if (!d) {
		print_error("%s is not set (run through meson test)\n", env);
		fail();
	}
	return d;
}

static void assert_has(const char *hay, const char *needle)
{
	if (!strstr(hay, needle)) {
		print_error("expected \"%s\" in \"%s\"\n", needle, hay);
		fail();
	}
}

static void expect_load_error(const char *dir, const char *name, int code, const char *msg)
{
	char err[IBVF_ERR_LEN] = "";
	struct ibvf_sm_module *m = (void *)1;

	assert_int_equal(ibvf_sm_module_load(dir, name, &m, err, sizeof(err)), code);
	assert_null(m);
	assert_has(err, msg);
}

static void test_broken_modules(void **state)
{
	const char *d = dir_of("IBVF_TEST_BROKEN_DIR");
	struct ibvf_sm_module *m = NULL;
	char err[IBVF_ERR_LEN] = "", want[128];

	(void)state;
	snprintf(want, sizeof(want), "implements SM ABI version %u; this ibvfd needs version %u",
		 IBVF_SM_ABI_VERSION + 98, IBVF_SM_ABI_VERSION);
	expect_load_error(d, "badabi", -EPROTO, want);
	expect_load_error(d, "badabi", -EPROTO, "badabi.so");
	expect_load_error(d, "badsize", -EPROTO, "ops table of 16 bytes");
	expect_load_error(d, "badname", -EPROTO,
			  "calls itself 'somebodyelse', expected "
			  "'badname'");
	expect_load_error(d, "missingop", -EPROTO, "lacks an operation");
	expect_load_error(d, "nosymbol", -ENOEXEC,
			  "has no symbol ibvf_sm_backend_v2 (not an "
			  "ibvf SM backend)");
	expect_load_error(d, "nullops", -EPROTO, "ibvf_sm_backend_v2() returned NULL");
	expect_load_error(d, "absent", -ENOENT, "(sm.module_dir is ");
	expect_load_error(d, "../unit/fine", -EINVAL, "expected letters, digits");
	expect_load_error(d, "", -EINVAL, "SM backend name ''");
	assert_int_equal(ibvf_sm_module_load(d, "fine", &m, err, sizeof(err)), 0);
	assert_string_equal(m->ops->name, "fine");
	assert_true(IBVF_SM_OPS_HAS(m->ops, add_members_owned));
	ibvf_sm_module_unload(m);
	/* built before the optional entries (smaller table): loads, has none of them */
	assert_int_equal(ibvf_sm_module_load(d, "v2base", &m, err, sizeof(err)), 0);
	assert_int_equal(m->ops->struct_size, IBVF_SM_OPS_V2_BASE_SIZE);
	assert_false(IBVF_SM_OPS_HAS(m->ops, add_members_owned));
	ibvf_sm_module_unload(m);
}

/* The owner text that crosses the ABI: bounded, printable ASCII only. */
static void test_owner_clean(void **state)
{
	char big[600], out[IBVF_SM_OWNER_MAX + 64];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(strlen(ibvf_sm_owner_clean(out, sizeof(out), big)), IBVF_SM_OWNER_MAX);
	assert_string_equal(ibvf_sm_owner_clean(out, sizeof(out), "ns/p\"o\n\xc3\xa9 net1"),
			    "ns/p\"o??? net1");
	assert_string_equal(ibvf_sm_owner_clean(out, 4, "abcdef"), "abc");
	assert_string_equal(ibvf_sm_owner_clean(out, sizeof(out), NULL), "");
}

/*
 * A module of SM ABI version 1 (retry deny-list) or of a later version is
 * refused by its entry point's name, before any of its code runs, with both
 * versions named.
 */
static void test_other_abi_refused(void **state)
{
	const char *d = dir_of("IBVF_TEST_BROKEN_DIR");

	(void)state;
	assert_int_equal(IBVF_SM_ABI_VERSION, 2);
	assert_string_equal(IBVF_SM_ENTRY_SYMBOL, "ibvf_sm_backend_v2");
	expect_load_error(d, "oldabi", -EPROTO,
			  "oldabi.so implements SM ABI version 1 (it "
			  "exports ibvf_sm_backend_v1, not ibvf_sm_backend_v2); this ibvfd needs "
			  "version 2: rebuild the module");
	expect_load_error(d, "newabi", -EPROTO,
			  "newabi.so implements SM ABI version 3 (it "
			  "exports ibvf_sm_backend_v3, not ibvf_sm_backend_v2); this ibvfd needs "
			  "version 2");
}

/* A module anyone could replace is refused before dlopen() runs its code. */
static void test_module_permissions(void **state)
{
	char tmp[] = "/tmp/ibvf-loader-XXXXXX", path[4096], cmd[8192], err[IBVF_ERR_LEN] = "";
	const char *noop_dir = dir_of("IBVF_TEST_NOOP_DIR");
	struct ibvf_sm_module *m = NULL;

	(void)state;
	assert_non_null(mkdtemp(tmp));
	snprintf(path, sizeof(path), "%s/noop.so", tmp);
	snprintf(cmd, sizeof(cmd), "cp '%s/noop.so' '%s'", noop_dir, path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(ibvf_sm_module_load(tmp, "noop", &m, err, sizeof(err)), -EPERM);
	assert_has(err, "not writable by group or others");
	assert_int_equal(chmod(path, 0755), 0);
	assert_int_equal(ibvf_sm_module_load(tmp, "noop", &m, err, sizeof(err)), 0);
	ibvf_sm_module_unload(m);
	unlink(path);
	snprintf(path, sizeof(path), "%s/dir.so", tmp);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(ibvf_sm_module_load(tmp, "dir", &m, err, sizeof(err)), -EPERM);
	assert_has(err, "not a regular file");
	rmdir(path);
	rmdir(tmp);
}

/*
 * The one linker map (sm-backends/sm_backend.map) leaves exactly the entry
 * point visible in each real module, under version node IBVF_SM_2.
 */
static void test_only_entry_exported(void **state)
{
	const char *dirs[] = {"IBVF_TEST_NOOP_DIR", "IBVF_TEST_OPENSM_DIR", "IBVF_TEST_UFM_DIR"};
	const char *names[] = {"noop", "opensm", "ufm"};
	const char *hidden[] = {"ibvf_errf",	 "ibvf_json_load",    "ibvf_log",      "pc_parse",
				"pf_install",	 "opensm_ops",	      "opensm_reload", "ufm_ops",
				"ufm_http_call", "ibvf_sm_backend_v1"};

	(void)state;
	for (int i = 0; i < 3; i++) {
		char path[4096];
		void *h;

		snprintf(path, sizeof(path), "%s/%s.so", dir_of(dirs[i]), names[i]);
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			print_error("%s\n", dlerror());
			fail();
		}
		assert_non_null(dlsym(h, IBVF_SM_ENTRY_SYMBOL));
		if (!dlvsym(h, IBVF_SM_ENTRY_SYMBOL, IBVF_SM_SYMBOL_VERSION)) {
			print_error("%s: no %s@%s\n", path, IBVF_SM_ENTRY_SYMBOL,
				    IBVF_SM_SYMBOL_VERSION);
			fail();
		}
		for (size_t k = 0; k < sizeof(hidden) / sizeof(hidden[0]); k++) {
			if (dlsym(h, hidden[k])) {
				print_error("%s exports %s\n", path, hidden[k]);
				fail();
			}
		}
		dlclose(h);
	}
}

struct seen {
	int n;
	uint16_t pkey[8];
	struct ibvf_sm_member m[8];
	bool managed[8];
	int stop_after;
};

static int collect(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct seen *s = arg;

	if (s->n < 8) {
		s->pkey[s->n] = pkey;
		s->m[s->n] = *m;
		s->managed[s->n] = managed;
	}
	s->n++;
	return s->stop_after && s->n == s->stop_after ? 42 : 0;
}

static void test_noop_backend(void **state)
{
	const struct ibvf_sm_member add[] = {
		{0x0002c90300100003, IBVF_MEMBER_FULL},
		{0x0002c90300100001, IBVF_MEMBER_LIMITED},
	};
	const struct ibvf_sm_member zero = {0, IBVF_MEMBER_FULL};
	const uint64_t rm[] = {0x0002c90300100001, 0x0002c903001000ff};
	char err[IBVF_ERR_LEN] = "", desc[256] = "";
	struct ibvf_sm sm;
	struct seen s = {0};
	const struct ibvf_sm_ops *o;

	(void)state;
	assert_int_equal(ibvf_sm_open(dir_of("IBVF_TEST_NOOP_DIR"), "noop", "{\"x\": 1}", &sm, err,
				      sizeof(err)),
			 -EINVAL);
	assert_has(err, "SM backend noop: sm.config (noop backend): x: unknown key");
	assert_null(sm.mod);
	assert_int_equal(
		ibvf_sm_open(dir_of("IBVF_TEST_NOOP_DIR"), "noop", NULL, &sm, err, sizeof(err)), 0);
	o = sm.mod->ops;
	assert_int_equal(o->add_members(sm.b, 0x0a10, add, 2, NULL, err, sizeof(err)), 0);
	assert_int_equal(o->add_members(sm.b, 0x0a10, add, 2, NULL, err, sizeof(err)), 0);
	assert_int_equal(o->add_members(sm.b, 0x0a01, add, 1, NULL, err, sizeof(err)), 0);
	assert_int_equal(o->add_members(sm.b, 0x8a10, add, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_has(err, "PKey 0x8a10");
	assert_int_equal(o->add_members(sm.b, 0x0a10, &zero, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(o->list_members(sm.b, -1, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.pkey[0], 0x0a01);
	assert_int_equal(s.pkey[1], 0x0a10);
	assert_true(s.m[1].guid == 0x0002c90300100001); /* sorted by GUID */
	assert_int_equal(s.m[1].membership, IBVF_MEMBER_LIMITED);
	assert_true(s.managed[2]);
	assert_int_equal(o->remove_members(sm.b, 0x0a10, rm, 2, err, sizeof(err)), 0);
	assert_int_equal(o->remove_members(sm.b, 0x0a10, rm, 2, err, sizeof(err)), 0);
	assert_int_equal(o->remove_members(sm.b, 0x0333, rm, 2, err, sizeof(err)), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(o->list_members(sm.b, 0x0a10, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 1);
	assert_true(s.m[0].guid == 0x0002c90300100003);
	memset(&s, 0, sizeof(s));
	s.stop_after = 1;
	assert_int_equal(o->list_members(sm.b, -1, collect, &s, err, sizeof(err)), 42);
	assert_int_equal(o->validate(sm.b, desc, sizeof(desc), err, sizeof(err)), 0);
	assert_has(desc, "noop: no SM is changed; 2 PKeys with 2 members");
	ibvf_sm_close(&sm);
	assert_null(sm.mod);
}

static void test_opensm_init_errors(void **state)
{
	const char *d = dir_of("IBVF_TEST_OPENSM_DIR");
	char err[IBVF_ERR_LEN] = "";
	struct ibvf_sm sm;

	(void)state;
	assert_int_equal(ibvf_sm_open(d, "opensm", NULL, &sm, err, sizeof(err)), -EINVAL);
	assert_has(err, "SM backend opensm: sm.config (opensm backend): pid_file: required");
	assert_int_equal(ibvf_sm_open(d, "opensm",
				      "{\"pid_file\": \"/run/x\", \"verify\": "
				      "\"maybe\"}",
				      &sm, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "verify: expected \"fabric\", \"all\" or \"off\"");
	assert_int_equal(ibvf_sm_open(d, "opensm",
				      "{\"pid_file\": \"/run/x\", \"defaults\": "
				      "{\"mtu\": 9}}",
				      &sm, err, sizeof(err)),
			 -EINVAL);
	assert_has(err, "defaults.mtu: 9 is out of range 1..5");
	assert_int_equal(
		ibvf_sm_open(d, "opensm", "{\"pid_file\": \"/run/x\"", &sm, err, sizeof(err)),
		-EINVAL);
	assert_has(err, "sm.config (opensm backend):1:");
	assert_int_equal(
		ibvf_sm_open(d, "opensm", "{\"pid_file\": \"/run/x\"}", &sm, err, sizeof(err)), 0);
	ibvf_sm_close(&sm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_broken_modules),
		cmocka_unit_test(test_owner_clean),
		cmocka_unit_test(test_other_abi_refused),
		cmocka_unit_test(test_module_permissions),
		cmocka_unit_test(test_only_entry_exported),
		cmocka_unit_test(test_noop_backend),
		cmocka_unit_test(test_opensm_init_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
