// SPDX-License-Identifier: MIT
/*
 * Unit tests of the lab's fake VF driver (tests/lab/vf-drivers/vf_fake.c),
 * which whole-daemon tests, crash tests and benchmarks stand on: a VF file
 * rewritten in place (issue 17) is never seen half written by a concurrent
 * reader, keeps the lab's netdev=, and a lab's own shorter or longer file is
 * taken over.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "vf_fake.h"

#define PCI "0000:05:00.1"

struct fx {
	char dir[64];
	struct ibvf_vf_ops vf;
	struct ibvf_port_ops port;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char err[256];

	snprintf(f->dir, sizeof(f->dir), "/tmp/ibvf-vffake-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	if (ibvf_vf_fake_init(f->dir, &f->vf, &f->port, err, sizeof(err)))
		fail_msg("%s", err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	ibvf_vf_fake_fini(&f->vf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void write_file(struct fx *f, const char *text)
{
	char path[128];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", f->dir, PCI);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* A lab's own file (shorter, with netdev=; or longer): programmed, read back whole. */
static void test_lab_file_taken_over(void **state)
{
	struct fx *f = *state;
	struct ibvf_attach_vf v;
	char err[256];

	write_file(f, "pf=ib0 vf=1 node=0000000000000000 port=0000000000000000 link=auto gen=0 "
		      "netdev=veth7\n");
	assert_int_equal(f->vf.lookup(f->vf.ctx, PCI, &v, err, sizeof(err)), 0);
	assert_string_equal(v.netdev, "veth7");
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 0x11, 0x22, "enable", err, sizeof(err)), 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, PCI, &v, err, sizeof(err)), 0);
	assert_int_equal(v.port_guid, 0x22);
	assert_string_equal(v.netdev, "veth7");
	assert_string_equal(v.link_state, "enable");
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 0x33, 0x44, NULL, err, sizeof(err)), 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, PCI, &v, err, sizeof(err)), 0);
	assert_int_equal(v.port_guid, 0x44);
	assert_string_equal(v.netdev, "veth7");

	/* longer than a record: the tail does not survive the rewrite */
	char big[512];

	snprintf(big, sizeof(big),
		 "pf=ib0 vf=1 node=0000000000000000 port=0000000000000000 link=auto gen=0%300s\n",
		 " ");
	write_file(f, big);
	assert_int_equal(f->vf.lookup(f->vf.ctx, PCI, &v, err, sizeof(err)), 0);
	assert_int_equal(f->vf.program(f->vf.ctx, &v, 0x55, 0x66, NULL, err, sizeof(err)), 0);
	assert_int_equal(f->vf.lookup(f->vf.ctx, PCI, &v, err, sizeof(err)), 0);
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

		if (w->f->vf.lookup(w->f->vf.ctx, PCI, &v, err, sizeof(err)) ||
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

		if (r->f->vf.lookup(r->f->vf.ctx, PCI, &v, err, sizeof(err)) ||
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

	assert_int_equal(ibvf_vf_fake_create(f->dir, PCI, "ib0", 1, 0, err, sizeof(err)), 0);
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
		cmocka_unit_test_setup_teardown(test_lab_file_taken_over, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_torn_reads, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
