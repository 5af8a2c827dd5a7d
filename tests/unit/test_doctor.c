// SPDX-License-Identifier: MIT
/*
 * doctor: the P_Key table check against the store's expectations (what
 * ibvfctl reads from the GUID pool store), and the TOML subset reader.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "doctor.h"
#include "toml_scan.h"

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", root, rel);
	for (slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void link_to(const char *rel, const char *target)
{
	char path[512];

	put(rel, "");
	snprintf(path, sizeof(path), "%s%s", root, rel);
	unlink(path);
	assert_int_equal(symlink(target, path), 0);
}

/* a PF and one VF (mlx5_1 at 0000:03:00.1) with P_Key table {0xffff, @entry} */
static void tree(const char *entry)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(mkdir(root, 0755), 0);
	put("/sys/bus/pci/devices/0000:03:00.1/vendor", "0x15b3\n");
	link_to("/sys/bus/pci/devices/0000:03:00.1/physfn", "../0000:03:00.0");
	link_to("/sys/class/infiniband/mlx5_1/device", "../../../bus/pci/devices/0000:03:00.1");
	put("/sys/class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE\n");
	put("/sys/class/infiniband/mlx5_1/ports/1/pkeys/0", "0xffff\n");
	put("/sys/class/infiniband/mlx5_1/ports/1/pkeys/1", entry);
}

static const char *verdict(const struct ibvf_doctor_expect *x, size_t n, int have_store,
			   char *evidence, size_t len)
{
	struct ibvf_doctor_opts o = {
		.root = root, .expect = x, .n_expect = n, .have_store = have_store};
	static char v[32];
	json_t *checks, *c;
	char err[256];
	size_t i;

	assert_int_equal(ibvf_doctor_run(&o, &checks, err, sizeof(err)), 0);
	v[0] = '\0';
	json_array_foreach(checks, i, c) if (!strcmp(json_string_value(json_object_get(c, "id")),
						     "sriov.vf_pkey"))
	{
		snprintf(v, sizeof(v), "%s", json_string_value(json_object_get(c, "verdict")));
		snprintf(evidence, len, "%s", json_string_value(json_object_get(c, "evidence")));
	}
	json_decref(checks);
	return v;
}

static void test_vf_pkey(void **state)
{
	struct ibvf_doctor_expect x = {
		.pci = "0000:03:00.1", .guid = 0x0002c90300ff0001, .pkeys = {0x8001}, .n_pkeys = 1};
	char ev[2048];

	(void)state;
	tree("0x8001\n");
	assert_string_equal(verdict(&x, 1, 1, ev, sizeof(ev)), "ok");
	tree("0x0001\n"); /* limited where the owner asked full */
	assert_string_equal(verdict(&x, 1, 1, ev, sizeof(ev)), "fail");
	assert_non_null(strstr(ev, "only as a limited member"));
	x.pkeys[0] = 0x0001; /* limited asked, limited present */
	assert_string_equal(verdict(&x, 1, 1, ev, sizeof(ev)), "ok");
	tree("0x8002\n");
	assert_string_equal(verdict(&x, 1, 1, ev, sizeof(ev)), "fail");
	assert_non_null(strstr(ev, "PKey 0x0001 missing from the P_Key table"));
	assert_non_null(strstr(ev, "0x0002c90300ff0001"));
	snprintf(x.pci, sizeof(x.pci), "0000:03:00.7"); /* the store's VF is gone */
	assert_string_equal(verdict(&x, 1, 1, ev, sizeof(ev)), "fail");
	assert_non_null(strstr(ev, "no RDMA device here"));
	assert_string_equal(verdict(NULL, 0, 1, ev, sizeof(ev)), "not-applicable");
	assert_string_equal(verdict(NULL, 0, 0, ev, sizeof(ev)), "not-applicable");
}

struct kv {
	char got[8][3][128];
	int n;
};

static int collect(void *arg, const char *table, const char *key, const char *value)
{
	struct kv *k = arg;

	if (k->n < 8) {
		snprintf(k->got[k->n][0], 128, "%s", table);
		snprintf(k->got[k->n][1], 128, "%s", key);
		snprintf(k->got[k->n][2], 128, "%s", value);
		k->n++;
	}
	return 0;
}

static void test_toml(void **state)
{
	const char *text = "version = 2 # top\n"
			   "[plugins.\"io.containerd.grpc.v1.cri\"]\n"
			   "  enable_cdi = true\n"
			   "  # enable_cdi = false\n"
			   "  [plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.runc]\n"
			   "    base_runtime_spec = \"/etc/a \\\"b\\\".json\"\n"
			   "[[crio.runtime.workloads]]\n"
			   "default_ulimits = [\n  \"memlock=-1:-1\", # c ]\n  'x'\n]\n"
			   "after = 'lit\\n'\n";
	struct kv k = {0};

	(void)state;
	assert_int_equal(dr_toml_each(text, collect, &k), 0);
	assert_int_equal(k.n, 5);
	assert_string_equal(k.got[0][0], "");
	assert_string_equal(k.got[0][2], "2");
	assert_string_equal(k.got[1][0], "plugins.io.containerd.grpc.v1.cri");
	assert_string_equal(k.got[1][2], "true");
	assert_string_equal(k.got[2][0],
			    "plugins.io.containerd.grpc.v1.cri.containerd.runtimes.runc");
	assert_string_equal(k.got[2][2], "/etc/a \"b\".json");
	assert_string_equal(k.got[3][0], "crio.runtime.workloads");
	assert_non_null(strstr(k.got[3][2], "memlock=-1:-1"));
	assert_non_null(strstr(k.got[3][2], "'x'"));
	assert_string_equal(k.got[4][1], "after");
	assert_string_equal(k.got[4][2], "lit\\n"); /* a literal string keeps its backslash */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vf_pkey),
		cmocka_unit_test(test_toml),
	};
	char cmd[128];
	int ret;

	snprintf(root, sizeof(root), "/tmp/ibvf-doctor-unit.%d", (int)getpid());
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd))
		ret = 1;
	return ret;
}
