// SPDX-License-Identifier: MIT
/*
 * cmocka tests of the lab "fake" VF driver (tests/lab/vf-drivers/vf_fake.c):
 * its file format (vf_fake.h) as the lab scripts and tests write and read it
 * with stdio, the names it derives, program()'s rewrite, the listing (one
 * directory read, every VF once, malformed and temporary files skipped), bus
 * tables, and the in-place rewrite under concurrent readers and writers
 * (no torn record; a lab's own shorter or longer file taken over).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
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
/* No directory (NULL or ""): a clear error, nothing opened. */
static void test_no_dir(void **state)
{
	struct ibvf_vf_ops vf;
	struct ibvf_port_ops port;
	char err[IBVF_ERR_LEN] = "";

	(void)state;
	assert_int_equal(ibvf_vf_fake_init(NULL, &vf, &port, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no fake VF directory"));
	assert_int_equal(ibvf_vf_fake_init("", &vf, &port, err, sizeof(err)), -EINVAL);
}

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

static int count_cb(void *arg, const struct ibvf_attach_vf *v)
{
	int *seen = arg;

	assert_true(v->vf_index >= 0 && v->vf_index < 600);
	seen[v->vf_index]++;
	assert_true(v->port_guid == 0x0200000000001000ull + (unsigned)v->vf_index);
	return 0;
}

static int count_any(void *arg, const struct ibvf_attach_vf *v)
{
	(void)v;
	(*(int *)arg)++;
	return 0;
}

static const char *tpci(int i, char buf[32])
{
	snprintf(buf, 32, "0001:%02x:%02x.%d", i >> 8, (i >> 3) & 0x1f, i & 7);
	return buf;
}

/* Bus tables: created in batches that split a bus, listed once each, looked up. */
static void test_table_list(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_fake_entry e[600];
	char pcis[600][32], err[IBVF_ERR_LEN], path[PATH_MAX + 32];
	struct ibvf_attach_vf v;
	int seen[600] = {0};

	for (int i = 0; i < 600; i++)
		e[i] = (struct ibvf_vf_fake_entry){tpci(i, pcis[i]), "ib0", i,
						   0x0200000000001000ull + (unsigned)i};
	/* 3 buses (256, 256, 88 VFs); batches of 200 and 400 split bus 0 */
	assert_int_equal(ibvf_vf_fake_create_table(f->dir, e, 200, err, sizeof(err)), 0);
	assert_int_equal(ibvf_vf_fake_create_table(f->dir, e + 200, 400, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/0001:00.vfs", f->dir);
	assert_int_equal(access(path, R_OK), 0);
	assert_int_equal(f->vf.list(f->vf.ctx, count_cb, seen, err, sizeof(err)), 0);
	for (int i = 0; i < 600; i++)
		assert_int_equal(seen[i], 1);
	assert_int_equal(f->vf.lookup(f->vf.ctx, pcis[300], &v, err, sizeof(err)), 0);
	assert_int_equal(v.vf_index, 300);
	assert_string_equal(v.netdev, "ib0v300g0");
	assert_true(v.port_guid == 0x0200000000001000ull + 300);
	/* a PCI address of a table's bus that the table has not */
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0001:02:1f.7", &v, err, sizeof(err)), -ENODEV);
	/* a VF file of its own next to the tables */
	assert_int_equal(ibvf_vf_fake_create(f->dir, "0002:00:00.1", "ib1", 1, 7, err, sizeof(err)),
			 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0002:00:00.1", &v, err, sizeof(err)), 0);
	assert_string_equal(v.pf, "ib1");
}

/* program() of a table's VF rewrites its line only; the lab's netdev= is kept. */
static void test_table_program(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_fake_entry e[3] = {{"0003:01:00.1", "ib2", 1, 0x11},
					  {"0003:01:00.2", "ib2", 2, 0x12},
					  {"0003:01:00.3", "ib2", 3, 0x13}};
	struct ibvf_attach_vf v;
	char err[IBVF_ERR_LEN], *nl;
	int seen = 0;

	assert_int_equal(ibvf_vf_fake_create_table(f->dir, e, 3, err, sizeof(err)), 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0003:01:00.2", &v, err, sizeof(err)), 0);
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 0x0200000000000021ull, 0x0200000000000022ull,
				       "disable", err, sizeof(err)),
			 0);
	assert_true(v.port_guid == 0x0200000000000022ull && v.node_guid == 0x0200000000000021ull);
	assert_string_equal(v.link_state, "disable");
	assert_string_equal(v.netdev, "ib2v2g1");
	for (int i = 1; i <= 3; i += 2) {
		char pci[16];

		snprintf(pci, sizeof(pci), "0003:01:00.%d", i);
		assert_int_equal(f->vf.lookup(f->vf.ctx, pci, &v, err, sizeof(err)), 0);
		assert_true(v.port_guid == 0x10u + (unsigned)i);
		assert_string_equal(v.netdev, i == 1 ? "ib2v1g0" : "ib2v3g0");
	}
	/* a table line with the lab's netdev= */
	{
		char path[PATH_MAX + 32], buf[1024];
		FILE *fp;
		size_t n;

		snprintf(path, sizeof(path), "%s/0003:01.vfs", f->dir);
		fp = fopen(path, "r");
		assert_non_null(fp);
		n = fread(buf, 1, sizeof(buf) - 1, fp);
		fclose(fp);
		buf[n] = 0;
		nl = strstr(buf, "0003:01:00.3");
		assert_non_null(nl);
		nl = strchr(nl, '\n');
		assert_non_null(nl);
		memmove(nl + 13, nl, strlen(nl) + 1);
		memcpy(nl, " netdev=veth3", 13);
		fp = fopen(path, "w");
		assert_non_null(fp);
		fputs(buf, fp);
		fclose(fp);
	}
	assert_int_equal(f->vf.lookup(f->vf.ctx, "0003:01:00.3", &v, err, sizeof(err)), 0);
	assert_string_equal(v.netdev, "veth3");
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 5, 6, NULL, err, sizeof(err)), 0);
	assert_string_equal(v.netdev, "veth3");
	assert_true(v.port_guid == 6);
	assert_int_equal(f->vf.list(f->vf.ctx, count_any, &seen, err, sizeof(err)), 0);
	assert_int_equal(seen, 3);
}

struct prog_arg {
	struct fx *f;
	const char *pci;
	int n, fails;
};

static void *prog_thread(void *arg)
{
	struct prog_arg *a = arg;
	char err[IBVF_ERR_LEN];

	for (int i = 0; i < a->n; i++) {
		struct ibvf_attach_vf v;

		if (a->f->vf.lookup(a->f->vf.ctx, a->pci, &v, err, sizeof(err)) ||
		    a->f->vf.program(a->f->vf.ctx, &v, (uint64_t)i + 1, (uint64_t)i + 1, NULL, err,
				     sizeof(err)))
			a->fails++;
	}
	return NULL;
}

/* Two VFs of one table programmed at once from two threads: no update is lost. */
static void test_table_concurrent(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_fake_entry e[2] = {{"0004:01:00.1", "ib3", 1, 0},
					  {"0004:01:00.2", "ib3", 2, 0}};
	struct prog_arg a[2] = {{f, e[0].pci, 300, 0}, {f, e[1].pci, 300, 0}};
	pthread_t t[2];
	char err[IBVF_ERR_LEN];

	assert_int_equal(ibvf_vf_fake_create_table(f->dir, e, 2, err, sizeof(err)), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, prog_thread, &a[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++) {
		struct ibvf_attach_vf v;

		assert_int_equal(a[i].fails, 0);
		assert_int_equal(f->vf.lookup(f->vf.ctx, e[i].pci, &v, err, sizeof(err)), 0);
		assert_true(v.port_guid == 300);
		assert_string_equal(v.netdev, i ? "ib3v2g300" : "ib3v1g300");
	}
}

/*
 * A VF file rewritten in place (issue 17) is never seen half written by a
 * concurrent reader, keeps the lab's netdev=, and a lab's own shorter or
 * longer file is taken over (these cases were tests/unit/test_vf_fake.c).
 */
#define TORN_PCI "0000:05:00.1"

/* A lab's own file (shorter, with netdev=; or longer): programmed, read back whole. */
static void test_lab_file_taken_over(void **state)
{
	struct fx *f = *state;
	struct ibvf_attach_vf v;
	char err[256];

	put(f, TORN_PCI,
	    "pf=ib0 vf=1 node=0000000000000000 port=0000000000000000 link=auto gen=0 "
	    "netdev=veth7\n");
	assert_int_equal(f->vf.lookup(f->vf.ctx, TORN_PCI, &v, err, sizeof(err)), 0);
	assert_string_equal(v.netdev, "veth7");
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 0x11, 0x22, "enable", err, sizeof(err)), 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, TORN_PCI, &v, err, sizeof(err)), 0);
	assert_int_equal(v.port_guid, 0x22);
	assert_string_equal(v.netdev, "veth7");
	assert_string_equal(v.link_state, "enable");
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 0x33, 0x44, NULL, err, sizeof(err)), 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, TORN_PCI, &v, err, sizeof(err)), 0);
	assert_int_equal(v.port_guid, 0x44);
	assert_string_equal(v.netdev, "veth7");

	/* longer than a record: the tail does not survive the rewrite */
	char big[512];

	snprintf(big, sizeof(big),
		 "pf=ib0 vf=1 node=0000000000000000 port=0000000000000000 link=auto gen=0%300s\n",
		 " ");
	put(f, TORN_PCI, big);
	assert_int_equal(f->vf.lookup(f->vf.ctx, TORN_PCI, &v, err, sizeof(err)), 0);
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 0x55, 0x66, NULL, err, sizeof(err)), 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, TORN_PCI, &v, err, sizeof(err)), 0);
	assert_int_equal(v.port_guid, 0x66);
	assert_string_equal(v.netdev, "ib0v1g1"); /* the driver's own name: no netdev= */
}

#define N_WRITERS 3
#define N_READERS 3
#define N_WRITES  2000

struct rw {
	struct fx *f;
	int id;
	int bad; /* reads that failed or saw a GUID pair nobody wrote */
	volatile int *stop;
};

/* node and port GUID are written as a pair (port = node + 1): a torn record breaks it */
static void *writer(void *arg)
{
	struct rw *w = arg;
	char err[256];

	for (int i = 1; i <= N_WRITES; i++) {
		struct ibvf_attach_vf v;
		uint64_t g = ((uint64_t)(w->id + 1) << 40) | ((uint64_t)i << 1);

		if (w->f->vf.lookup(w->f->vf.ctx, TORN_PCI, &v, err, sizeof(err)) ||
		    w->f->vf.program(w->f->vf.ctx, &v, g, g + 1, NULL, err, sizeof(err)))
			w->bad++;
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct rw *r = arg;
	char err[256];

	while (!*r->stop) {
		struct ibvf_attach_vf v;

		if (r->f->vf.lookup(r->f->vf.ctx, TORN_PCI, &v, err, sizeof(err)) ||
		    (v.node_guid && v.port_guid != v.node_guid + 1)) {
			r->bad++;
			fprintf(stderr, "torn read: %s node %llx port %llx\n", err,
				(unsigned long long)v.node_guid, (unsigned long long)v.port_guid);
		}
	}
	return NULL;
}

/* Writers rewrite one VF while readers read it: no reader ever sees a torn record. */
static void test_no_torn_reads(void **state)
{
	struct fx *f = *state;
	struct rw w[N_WRITERS], r[N_READERS];
	pthread_t tw[N_WRITERS], tr[N_READERS];
	volatile int stop = 0;
	char err[256];
	int bad = 0;

	assert_int_equal(ibvf_vf_fake_create(f->dir, TORN_PCI, "ib0", 1, 0, err, sizeof(err)), 0);
	for (int i = 0; i < N_READERS; i++) {
		r[i] = (struct rw){f, i, 0, &stop};
		assert_int_equal(pthread_create(&tr[i], NULL, reader, &r[i]), 0);
	}
	for (int i = 0; i < N_WRITERS; i++) {
		w[i] = (struct rw){f, i, 0, &stop};
		assert_int_equal(pthread_create(&tw[i], NULL, writer, &w[i]), 0);
	}
	for (int i = 0; i < N_WRITERS; i++) {
		pthread_join(tw[i], NULL);
		bad += w[i].bad;
	}
	stop = 1;
	for (int i = 0; i < N_READERS; i++) {
		pthread_join(tr[i], NULL);
		bad += r[i].bad;
	}
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_dir),
		cmocka_unit_test_setup_teardown(test_lookup_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hand_written, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_program, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_program, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lab_file_taken_over, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_torn_reads, setup, teardown),
	};

	ibvf_log_init("test_vf_driver_fake", IBVF_LOG_STDERR, LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
