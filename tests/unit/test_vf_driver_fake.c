// SPDX-License-Identifier: MIT
/*
 * cmocka tests of the lab "fake" VF driver (tests/lab/vf-drivers/vf_fake.c):
 * its file format (vf_fake.h) as the lab scripts and tests write and read it
 * with stdio, the names it derives, program()'s rewrite, and the listing
 * (one directory read, every VF once, malformed and temporary files skipped).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
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

#include "err.h"
#include "log.h"
#include "vf_fake.h"

struct fx {
	char dir[PATH_MAX];
	struct ibvf_vf_ops vf;
	struct ibvf_port_ops port;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char err[IBVF_ERR_LEN];

	snprintf(f->dir, sizeof(f->dir), "/tmp/ibvf-test-vf-fake-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	if (ibvf_vf_fake_init(f->dir, &f->vf, &f->port, err, sizeof(err)))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[PATH_MAX + 16];

	ibvf_vf_fake_fini(&f->vf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd))
		return -1;
	free(f);
	return 0;
}

static void put(struct fx *f, const char *name, const char *text)
{
	char path[PATH_MAX + 64];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* Created, looked up: the fields and the names the driver derives. */
static void test_lookup_fields(void **state)
{
	struct fx *f = *state;
	struct ibvf_attach_vf v;
	char err[IBVF_ERR_LEN];

	assert_int_equal(ibvf_vf_fake_create(f->dir, "0000:03:00.5", "ib0", 3,
					     0x0200000000001003ull, err, sizeof(err)),
			 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0000:03:00.5", &v, err, sizeof(err)), 0);
	assert_string_equal(v.pci, "0000:03:00.5");
	assert_string_equal(v.pf, "ib0");
	assert_int_equal(v.vf_index, 3);
	assert_true(v.guids_known);
	assert_true(v.port_guid == 0x0200000000001003ull);
	assert_true(v.node_guid == 0x0200000000001003ull);
	assert_string_equal(v.link_state, "auto");
	assert_string_equal(v.netdev, "ib0v3g0");
	assert_string_equal(v.rdma_dev, "fake_ib0_3");
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0000:03:00.6", &v, err, sizeof(err)), -ENODEV);
	assert_int_equal(f->vf.lookup(f->vf.ctx, "../x", &v, err, sizeof(err)), -EINVAL);
}

/* What the lab scripts write by hand (test_cni_ibvfd.py, test_cni_release.py). */
static void test_hand_written(void **state)
{
	struct fx *f = *state;
	struct ibvf_attach_vf v;
	char err[IBVF_ERR_LEN];

	put(f, "0000:04:00.2",
	    "pf=idemopfpf vf=12 node=0000000000000000 port=0x00000000000000ab link=enable "
	    "gen=123456 netdev=veth12\n");
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0000:04:00.2", &v, err, sizeof(err)), 0);
	assert_string_equal(v.pf, "idemopfpf");
	assert_int_equal(v.vf_index, 12);
	assert_true(v.port_guid == 0xab && v.node_guid == 0);
	assert_string_equal(v.link_state, "enable");
	assert_string_equal(v.netdev, "veth12"); /* reported as is */
	/* without netdev=: <pf, 12 chars>v<index>g<gen % 100000> */
	put(f, "0000:04:00.3", "pf=abcdefghijklmno vf=70000 node=1 port=2 link=auto gen=123456\n");
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0000:04:00.3", &v, err, sizeof(err)), 0);
	assert_string_equal(v.netdev, "abcdefghijklv4464g23456");
	assert_string_equal(v.rdma_dev, "fake_abcdefgh_70000");
}

/* Malformed files: lookup fails with -EIO, the listing skips them. */
static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"pf=ib0 vf=1 node=0 port=0 link=auto\n",		    /* no gen */
		"pf=ib0 vf=x node=0 port=0 link=auto gen=0\n",		    /* index */
		"pf=ib0 vf=1 node=zz port=0 link=auto gen=0\n",		    /* GUID */
		"pf=ib0 vf=1 port=0 node=0 link=auto gen=0\n",		    /* order */
		"pf=abcdefghijklmnop vf=1 node=0 port=0 link=auto gen=0\n", /* pf > 15 */
		"pf=ib0 vf=1 node=0 port=0 link=disabled gen=0\n",	    /* link > 7 */
	};
	struct fx *f = *state;
	struct ibvf_attach_vf v;
	char err[IBVF_ERR_LEN], name[32];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(name, sizeof(name), "0000:05:00.%zu", i);
		put(f, name, bad[i]);
		assert_int_equal(f->vf.lookup(f->vf.ctx, name, &v, err, sizeof(err)), -EIO);
	}
}

/* program(): GUIDs and link state written, gen bumped (the "rebind" renames the netdev). */
static void test_program(void **state)
{
	struct fx *f = *state;
	struct ibvf_attach_vf v;
	char err[IBVF_ERR_LEN], path[PATH_MAX + 32], pf[16], link[8];
	unsigned long long node, port;
	unsigned gen;
	int idx;
	FILE *fp;

	put(f, "0000:06:00.2",
	    "pf=ib1 vf=2 node=0000000000000000 port=0000000000000000 link=auto gen=7 "
	    "netdev=veth2\n");
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0000:06:00.2", &v, err, sizeof(err)), 0);
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 0x0200000000000011ull, 0x0200000000000012ull,
				       "enable", err, sizeof(err)),
			 0);
	assert_true(v.node_guid == 0x0200000000000011ull && v.port_guid == 0x0200000000000012ull);
	assert_string_equal(v.link_state, "enable");
	assert_string_equal(v.netdev, "veth2"); /* the lab's netdev= is kept */
	/* the text stays what stdio readers parse (tests/lab/cluster/test_cluster_node.c) */
	snprintf(path, sizeof(path), "%s/0000:06:00.2", f->dir);
	fp = fopen(path, "r");
	assert_non_null(fp);
	assert_int_equal(fscanf(fp, "pf=%15s vf=%d node=%llx port=%llx link=%7s gen=%u", pf, &idx,
				&node, &port, link, &gen),
			 6);
	fclose(fp);
	assert_string_equal(pf, "ib1");
	assert_int_equal(idx, 2);
	assert_true(node == 0x0200000000000011ull && port == 0x0200000000000012ull);
	assert_int_equal(gen, 8);
}

struct seen {
	char pci[64][32];
	int n;
};

static int list_cb(void *arg, const struct ibvf_attach_vf *v)
{
	struct seen *s = arg;

	assert_true(s->n < 64);
	snprintf(s->pci[s->n++], sizeof(s->pci[0]), "%s", v->pci);
	assert_true(v->guids_known);
	assert_true(v->port_guid == 0x0200000000000100ull + (unsigned)v->vf_index);
	return 0;
}

/* The listing: every VF once, temporary and malformed files and directories skipped. */
static void test_list(void **state)
{
	struct fx *f = *state;
	struct seen s = {.n = 0};
	char err[IBVF_ERR_LEN], pci[32], path[PATH_MAX + 16];

	for (int i = 0; i < 40; i++) {
		snprintf(pci, sizeof(pci), "0000:07:%02x.%d", i >> 3, i & 7);
		assert_int_equal(ibvf_vf_fake_create(f->dir, pci, "ib0", i,
						     0x0200000000000100ull + (unsigned)i, err,
						     sizeof(err)),
				 0);
	}
	put(f, ".0000:07:00.0.123.tmp", "pf=ib0 vf=99 node=0 port=0 link=auto gen=0\n");
	put(f, "0000:08:00.0", "garbage\n");
	snprintf(path, sizeof(path), "%s/0000:09:00.0", f->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(f->vf.list(f->vf.ctx, list_cb, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 40);
	for (int i = 0; i < 40; i++)
		for (int j = i + 1; j < 40; j++)
			assert_string_not_equal(s.pci[i], s.pci[j]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lookup_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hand_written, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_program, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list, setup, teardown),
	};

	ibvf_log_init("test_vf_driver_fake", IBVF_LOG_STDERR, LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
