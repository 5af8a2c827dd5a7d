// SPDX-License-Identifier: MIT
/*
 * cmocka tests of vf_manager.c: a mock VF driver (records GUIDs and link
 * state, injects failures at any call through its ops table) whose rebind is
 * the real sysfs unbind/bind code, and a "kernel" thread that plays the
 * driver on a fake sysfs tree: it honours unbind, and on bind re-creates the
 * netdev under a NEW name after a delay (or never, or lets the VF vanish).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "log.h"
#include "attach_vf.h"
#include "vf_driver.h"
#include "vf_manager.h"
#include "vf_test_util.h"

#define PF_PCI "0000:03:00.0"
#define NVF    4

enum op { OP_NODE, OP_PORT, OP_LINK, OP_REBIND, OP_READ, OP_COUNT };

struct mock {
	pthread_mutex_t mu;
	struct ibvf_vf_state st[NVF]; /* what the "hardware" holds */
	int calls[OP_COUNT];
	int fail_op[2], fail_call[2], fail_err[2]; /* fail call #N (1-based) of op */
	bool read_unknown;
	int sleep_ms;
	int inflight[NVF], max_inflight[NVF], inflight_all, max_all;
};

struct kernel {
	char *root;
	pthread_t thr;
	volatile bool stop;
	int ignore_binds; /* bind requests to ignore (the VF never comes back) */
	bool vanish;	  /* the VF disappears on unbind */
	bool no_rdma;	  /* netdev comes back, RDMA device never does */
	int delay_ms;
	int gen;
};

struct fx {
	char *root;
	struct mock mock;
	struct kernel k;
	struct ibvf_vf_manager *m;
};

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------- mock driver -- */

static int mock_enter(struct ibvf_vf_driver *d, enum op op, const struct ibvf_vf_info *vf,
		      char *err, size_t errlen)
{
	struct mock *mk = d->priv;
	int n, ret = 0;

	pthread_mutex_lock(&mk->mu);
	n = ++mk->calls[op];
	for (int i = 0; i < 2; i++)
		if (mk->fail_call[i] && mk->fail_op[i] == (int)op && mk->fail_call[i] == n)
			ret = ibvf_errf(err, errlen, -mk->fail_err[i],
					"injected failure of op %d call %d", op, n);
	if (!ret && op != OP_READ) {
		mk->inflight[vf->index]++;
		mk->inflight_all++;
		if (mk->inflight[vf->index] > mk->max_inflight[vf->index])
			mk->max_inflight[vf->index] = mk->inflight[vf->index];
		if (mk->inflight_all > mk->max_all)
			mk->max_all = mk->inflight_all;
	}
	pthread_mutex_unlock(&mk->mu);
	if (!ret && mk->sleep_ms && op != OP_READ)
		msleep(mk->sleep_ms);
	return ret;
}

static void mock_leave(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf)
{
	struct mock *mk = d->priv;

	pthread_mutex_lock(&mk->mu);
	mk->inflight[vf->index]--;
	mk->inflight_all--;
	pthread_mutex_unlock(&mk->mu);
}

static int mock_set_guid(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
			 enum ibvf_guid_kind kind, uint64_t guid, char *err, size_t errlen)
{
	struct mock *mk = d->priv;
	int ret = mock_enter(d, kind == IBVF_GUID_NODE ? OP_NODE : OP_PORT, vf, err, errlen);

	if (ret)
		return ret;
	pthread_mutex_lock(&mk->mu);
	if (kind == IBVF_GUID_NODE)
		mk->st[vf->index].node_guid = guid;
	else
		mk->st[vf->index].port_guid = guid;
	pthread_mutex_unlock(&mk->mu);
	mock_leave(d, vf);
	return 0;
}

static int mock_set_link(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
			 enum ibvf_vf_link_state s, char *err, size_t errlen)
{
	struct mock *mk = d->priv;
	int ret = mock_enter(d, OP_LINK, vf, err, errlen);

	if (ret)
		return ret;
	mk->st[vf->index].link_state = s;
	mock_leave(d, vf);
	return 0;
}

static int mock_rebind(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf, const char *drv,
		       uint32_t timeout_ms, char *err, size_t errlen)
{
	int ret = mock_enter(d, OP_REBIND, vf, err, errlen);

	if (ret)
		return ret;
	ret = ibvf_vf_sysfs_rebind(d->sysfs_root, vf, drv, timeout_ms, err, errlen);
	mock_leave(d, vf);
	return ret;
}

static int mock_read(struct ibvf_vf_driver *d, const struct ibvf_vf_info *const *vfs, size_t n,
		     struct ibvf_vf_state *out, char *err, size_t errlen)
{
	struct mock *mk = d->priv;
	int ret = mock_enter(d, OP_READ, vfs[0], err, errlen);

	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_lock(&mk->mu);
		out[i] = mk->st[vfs[i]->index];
		pthread_mutex_unlock(&mk->mu);
		if (mk->read_unknown)
			memset(&out[i], 0, sizeof(out[i]));
	}
	return 0;
}

static void mock_destroy(struct ibvf_vf_driver *d)
{
	(void)d; /* the mock lives in the fixture */
}

static const struct ibvf_vf_driver_ops mock_ops = {
	.name = "mock",
	.set_guid = mock_set_guid,
	.set_link_state = mock_set_link,
	.rebind = mock_rebind,
	.read_back = mock_read,
	.destroy = mock_destroy,
};

/* ------------------------------------------------------ kernel player -- */

static bool take_request(const char *root, const char *file, char *pci, size_t len)
{
	char p[PATH_MAX];
	FILE *f;
	size_t n;

	snprintf(p, sizeof(p), "%s/bus/pci/drivers/mlx5_core/%s", root, file);
	f = fopen(p, "r+");
	if (!f)
		return false;
	n = fread(pci, 1, len - 1, f);
	fclose(f);
	pci[n] = 0;
	if (!n)
		return false;
	truncate(p, 0);
	return true;
}

static void *kernel_main(void *arg)
{
	struct kernel *k = arg;
	char pci[64];

	while (!k->stop) {
		if (take_request(k->root, "unbind", pci, sizeof(pci))) {
			if (k->vanish)
				ibvf_fake_remove_dev(k->root, pci);
			else
				ibvf_fake_vf_unbind(k->root, pci);
		}
		if (take_request(k->root, "bind", pci, sizeof(pci))) {
			char name[32], rdma[32];
			int idx = pci[strlen(pci) - 1] - '2';
			struct ibvf_fake_vf v = {
				.driver = "mlx5_core", .netdev = name, .ifindex = 100 + ++k->gen};

			if (k->ignore_binds > 0) {
				k->ignore_binds--;
				continue;
			}
			msleep(k->delay_ms);
			/* like udev: the netdev comes back under another name */
			snprintf(name, sizeof(name), "ibp3s0f0v%dn%d", idx, k->gen);
			snprintf(rdma, sizeof(rdma), "mlx5_%d", 20 + k->gen);
			v.rdma_dev = k->no_rdma ? NULL : rdma;
			ibvf_fake_vf_bind(k->root, pci, &v);
		}
		msleep(2);
	}
	return NULL;
}

/* ------------------------------------------------------------ fixture -- */

static struct ibvf_vf_manager *make_manager(struct fx *f, uint32_t timeout_ms, uint32_t lock_ms)
{
	struct ibvf_vf_manager_opts o = {.sysfs_root = f->root,
					 .rebind_timeout_ms = timeout_ms,
					 .lock_timeout_ms = lock_ms,
					 .poll_ms = 5};
	struct ibvf_vf_driver *d = calloc(1, sizeof(*d));
	struct ibvf_vf_manager *m;
	char locks[PATH_MAX], err[IBVF_ERR_LEN];

	snprintf(locks, sizeof(locks), "%s/run/vf-locks", f->root);
	o.lock_dir = locks;
	d->ops = &mock_ops;
	d->sysfs_root = strdup(f->root);
	d->priv = &f->mock;
	assert_int_equal(ibvf_vf_manager_create(&o, d, &m, err, sizeof(err)), 0);
	return m;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->root = vt_root_new();
	pthread_mutex_init(&f->mock.mu, NULL);
	for (int i = 0; i < NVF; i++)
		f->mock.st[i] = (struct ibvf_vf_state){.node_guid_known = true,
						       .port_guid_known = true,
						       .link_state_known = true,
						       .node_guid = 0xa0 + (uint64_t)i,
						       .port_guid = 0xa0 + (uint64_t)i,
						       .link_state = IBVF_VF_LINK_AUTO};
	if (vt_add_pf(f->root, PF_PCI, "ib0", 4, "mlx5_0", NVF, NULL))
		return -1;
	f->k.root = f->root;
	f->k.delay_ms = 50;
	pthread_create(&f->k.thr, NULL, kernel_main, &f->k);
	f->m = make_manager(f, 1000, 2000);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	f->k.stop = true;
	pthread_join(f->k.thr, NULL);
	ibvf_vf_manager_destroy(f->m);
	vt_root_free(f->root);
	free(f);
	return 0;
}

static struct ibvf_vf_request req_of(uint64_t g, int link)
{
	return (struct ibvf_vf_request){
		.node_guid = g, .port_guid = g, .link_state = link, .rebind = true};
}

static void expect_hw(struct fx *f, int vf, uint64_t node, uint64_t port, int link)
{
	assert_true(f->mock.st[vf].node_guid == node);
	assert_true(f->mock.st[vf].port_guid == port);
	assert_int_equal(f->mock.st[vf].link_state, link);
}

static void expect_text(const char *err, const char *a, const char *b)
{
	if (!strstr(err, a) || (b && !strstr(err, b)))
		fail_msg("error text '%s' lacks '%s'%s%s", err, a, b ? " or " : "", b ? b : "");
}

/* -------------------------------------------------------------- tests -- */

static void test_program_rebind_finds_renamed_netdev(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_request r = req_of(0x0002c90300001001ULL, IBVF_VF_LINK_ENABLE);
	struct ibvf_vf_info out, now;
	char err[IBVF_ERR_LEN];

	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.3", &r, &out, err, sizeof(err)), 0);
	expect_hw(f, 1, 0x0002c90300001001ULL, 0x0002c90300001001ULL, IBVF_VF_LINK_ENABLE);
	/* found again by PCI address under the name the "kernel" chose */
	assert_string_equal(out.pci, "0000:03:00.3");
	assert_string_equal(out.netdev, "ibp3s0f0v1n1");
	assert_string_equal(out.rdma_dev, "mlx5_21");
	assert_int_equal(out.ifindex, 101);
	assert_string_equal(out.driver, "mlx5_core");
	assert_int_equal(f->mock.calls[OP_REBIND], 1);
	assert_int_equal(ibvf_vf_lookup(f->root, "0000:03:00.3", &now, err, sizeof(err)), 0);
	assert_string_equal(now.netdev, "ibp3s0f0v1n1");
	/* no rebind requested: nothing but the GUIDs */
	r = req_of(0x0002c90300001003ULL, -1);
	r.rebind = false;
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.3", &r, &out, err, sizeof(err)), 0);
	assert_int_equal(f->mock.calls[OP_REBIND], 1);
	assert_int_equal(f->mock.calls[OP_LINK], 1);
	assert_string_equal(out.netdev, "ibp3s0f0v1n1");
}

static void test_timeout_then_rollback(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_request r = req_of(0x0002c90300001001ULL, IBVF_VF_LINK_DISABLE);
	struct ibvf_vf_info out;
	char err[IBVF_ERR_LEN];

	ibvf_vf_manager_destroy(f->m);
	f->m = make_manager(f, 300, 2000);
	f->k.ignore_binds = 1; /* the first bind never brings the VF back */
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)),
			 -ETIMEDOUT);
	expect_text(err, "timed out after 300 ms", "driver none, netdev none, RDMA device none");
	expect_text(err, "rolled back: link state auto, port GUID 00:00:00:00:00:00:00:a0",
		    "node GUID 00:00:00:00:00:00:00:a0, rebound (netdev ibp3s0f0v0n2)");
	expect_hw(f, 0, 0xa0, 0xa0, IBVF_VF_LINK_AUTO);
	assert_int_equal(f->mock.calls[OP_REBIND], 2);
}

static void test_timeout_rdma_never_back(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_request r = req_of(0x0002c90300001001ULL, -1);
	struct ibvf_vf_info out;
	char err[IBVF_ERR_LEN];

	ibvf_vf_manager_destroy(f->m);
	f->m = make_manager(f, 200, 2000);
	f->k.no_rdma = true;
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)),
			 -ETIMEDOUT);
	expect_text(err, "netdev ibp3s0f0v0n1, RDMA device none", "ROLLBACK FAILED: rebind");
	/* the GUIDs are back even though the second rebind did not finish either */
	expect_text(err, "restored: port GUID 00:00:00:00:00:00:00:a0", NULL);
	expect_hw(f, 0, 0xa0, 0xa0, IBVF_VF_LINK_AUTO);
}

static void test_vf_vanishes(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_request r = req_of(0x0002c90300001001ULL, -1);
	struct ibvf_vf_info out;
	char err[IBVF_ERR_LEN];

	f->k.vanish = true;
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.4", &r, &out, err, sizeof(err)),
			 -ENODEV);
	expect_text(err, "vanished", "ROLLBACK FAILED");
	expect_hw(f, 2, 0xa2, 0xa2, IBVF_VF_LINK_AUTO); /* GUIDs restored all the same */
}

static void test_rollback_each_step(void **state)
{
	static const struct {
		enum op op;
		const char *rolled;
	} cases[] = {
		{OP_NODE, "nothing was changed"},
		{OP_PORT, "rolled back: node GUID 00:00:00:00:00:00:00:a3"},
		{OP_LINK, "rolled back: port GUID 00:00:00:00:00:00:00:a3, node GUID"},
		{OP_REBIND, "rolled back: link state auto, port GUID 00:00:00:00:00:00:00:a3, "
			    "node GUID 00:00:00:00:00:00:00:a3, rebound"},
	};
	struct fx *f = *state;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct ibvf_vf_request r = req_of(0x0002c90300002000ULL + c, IBVF_VF_LINK_DISABLE);
		struct ibvf_vf_info out;
		char err[IBVF_ERR_LEN];

		memset(f->mock.calls, 0, sizeof(f->mock.calls));
		f->mock.fail_op[0] = (int)cases[c].op;
		f->mock.fail_call[0] = 1;
		f->mock.fail_err[0] = EIO;
		assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.5", &r, &out, err, sizeof(err)),
				 -EIO);
		expect_text(err, "injected failure", cases[c].rolled);
		expect_hw(f, 3, 0xa3, 0xa3, IBVF_VF_LINK_AUTO);
	}
	f->mock.fail_call[0] = 0;
}

static void test_rollback_failure_reported(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_request r = req_of(0x0002c90300003000ULL, -1);
	struct ibvf_vf_info out;
	char err[IBVF_ERR_LEN];

	/* port GUID fails with EOPNOTSUPP, then restoring the node GUID fails too */
	f->mock.fail_op[0] = OP_PORT;
	f->mock.fail_call[0] = 1;
	f->mock.fail_err[0] = EOPNOTSUPP;
	f->mock.fail_op[1] = OP_NODE;
	f->mock.fail_call[1] = 2;
	f->mock.fail_err[1] = EBUSY;
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)),
			 -EOPNOTSUPP);
	expect_text(
		err,
		"injected failure of op 1 call 1; ROLLBACK FAILED: injected failure of op 0 call 2",
		NULL);
	/* the hardware keeps the new node GUID: the report says so, nothing hides it */
	assert_true(f->mock.st[0].node_guid == 0x0002c90300003000ULL);
}

static void test_prev_from_caller_record(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_state rec = {.node_guid_known = true,
				    .port_guid_known = true,
				    .node_guid = 0x77,
				    .port_guid = 0x78};
	struct ibvf_vf_request r = req_of(0x0002c90300004000ULL, -1);
	struct ibvf_vf_info out;
	char err[IBVF_ERR_LEN];

	f->mock.read_unknown = true; /* like a kernel without ndo_get_vf_guid */
	f->mock.fail_op[0] = OP_REBIND;
	f->mock.fail_call[0] = 1;
	f->mock.fail_err[0] = EIO;
	r.prev = &rec;
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)), -EIO);
	expect_text(err, "rolled back: port GUID 00:00:00:00:00:00:00:78",
		    "node GUID 00:00:00:00:00:00:00:77");
	expect_hw(f, 0, 0x77, 0x78, IBVF_VF_LINK_AUTO);
	/* without a record the report says what could not be restored */
	f->mock.fail_call[0] = 3; /* the next program's rebind (2 was the rollback's) */
	r.prev = NULL;
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)), -EIO);
	expect_text(err, "ROLLBACK FAILED: port GUID before is unknown, not restored",
		    "node GUID before is unknown");
	f->mock.fail_call[0] = 0;
	f->mock.read_unknown = false;
}

static void test_bad_input(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_request r;
	struct ibvf_vf_info out;
	char err[IBVF_ERR_LEN];
	struct ibvf_fake_vf vfio = {.driver = "vfio-pci"}, unbound = {0};

	r = req_of(0, -1);
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)),
			 -EINVAL);
	expect_text(err, "node GUID 00:00:00:00:00:00:00:00 is not assignable", NULL);
	r = req_of(0x10, -1);
	r.port_guid = UINT64_MAX;
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)),
			 -EINVAL);
	expect_text(err, "port GUID ff:ff:ff:ff:ff:ff:ff:ff is not assignable", NULL);
	r = req_of(0x10, 7);
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)),
			 -EINVAL);
	r = req_of(0x10, -1);
	assert_int_equal(ibvf_vf_program(f->m, "03:00.2", &r, &out, err, sizeof(err)), -EINVAL);
	assert_int_equal(ibvf_vf_program(f->m, PF_PCI, &r, &out, err, sizeof(err)), -EINVAL);
	expect_text(err, "is an SR-IOV PF, not a VF", NULL);
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:07.0", &r, &out, err, sizeof(err)),
			 -ENODEV);
	/* VF bound to vfio-pci, and an unbound VF */
	assert_int_equal(ibvf_fake_vf_unbind(f->root, "0000:03:00.4"), 0);
	assert_int_equal(ibvf_fake_vf_bind(f->root, "0000:03:00.4", &vfio), 0);
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.4", &r, &out, err, sizeof(err)),
			 -EINVAL);
	expect_text(err, "bound to vfio-pci", "bind it to mlx5_core");
	assert_int_equal(ibvf_fake_vf_unbind(f->root, "0000:03:00.5"), 0);
	assert_int_equal(ibvf_fake_vf_bind(f->root, "0000:03:00.5", &unbound), 0);
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.5", &r, &out, err, sizeof(err)),
			 -EINVAL);
	expect_text(err, "is not bound to a driver", NULL);
	/* PF not in SR-IOV mode */
	assert_int_equal(ibvf_fake_set_numvfs(f->root, PF_PCI, 0), 0);
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.2", &r, &out, err, sizeof(err)),
			 -ENODEV);
	expect_text(err, "not in SR-IOV mode", NULL);
	/* nothing reached the driver */
	for (int op = OP_NODE; op <= OP_REBIND; op++)
		assert_int_equal(f->mock.calls[op], 0);
	expect_hw(f, 0, 0xa0, 0xa0, IBVF_VF_LINK_AUTO);
}

struct worker {
	struct fx *f;
	const char *pci;
	uint64_t guid;
	int ret;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct ibvf_vf_request r = req_of(w->guid, -1);
	struct ibvf_vf_info out;
	char err[IBVF_ERR_LEN];

	r.rebind = false;
	w->ret = ibvf_vf_program(w->f->m, w->pci, &r, &out, err, sizeof(err));
	return NULL;
}

static void run_pair(struct fx *f, const char *a, const char *b)
{
	struct worker w[2] = {{f, a, 0x1001, -1}, {f, b, 0x2001, -1}};
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, work, &w[i]);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].ret, 0);
	}
}

static void test_per_vf_locking(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX], err[IBVF_ERR_LEN];
	struct ibvf_vf_request r = req_of(0x3001, -1);
	struct ibvf_vf_info out;
	int fd;

	f->mock.sleep_ms = 60;
	/* the same VF twice: never two driver calls on it at once */
	run_pair(f, "0000:03:00.2", "0000:03:00.2");
	assert_int_equal(f->mock.max_inflight[0], 1);
	assert_int_equal(f->mock.max_all, 1);
	/* two VFs: they run in parallel */
	run_pair(f, "0000:03:00.3", "0000:03:00.4");
	assert_int_equal(f->mock.max_inflight[1], 1);
	assert_int_equal(f->mock.max_inflight[2], 1);
	assert_int_equal(f->mock.max_all, 2);
	f->mock.sleep_ms = 0;
	/* another process holds the VF: -EBUSY after the lock timeout */
	ibvf_vf_manager_destroy(f->m);
	f->m = make_manager(f, 1000, 100);
	snprintf(p, sizeof(p), "%s/run/vf-locks/vf-0000:03:00.5.lock", f->root);
	fd = open(p, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.5", &r, &out, err, sizeof(err)), -EBUSY);
	expect_text(err, "being programmed by another operation", NULL);
	close(fd);
	r.rebind = false;
	assert_int_equal(ibvf_vf_program(f->m, "0000:03:00.5", &r, &out, err, sizeof(err)), 0);
}

static void test_reset_and_query(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_info out, vf;
	struct ibvf_vf_state st;
	char err[IBVF_ERR_LEN];

	assert_int_equal(ibvf_vf_reset(f->m, "0000:03:00.3", &out, err, sizeof(err)), 0);
	expect_hw(f, 1, 0, 0, IBVF_VF_LINK_AUTO);
	assert_string_equal(out.netdev, "ibp3s0f0v1n1");
	assert_int_equal(ibvf_vf_reset(f->m, "0000:03:00.3", &out, err, sizeof(err)), 0);
	assert_int_equal(ibvf_vf_query(f->m, "0000:03:00.3", &vf, &st, err, sizeof(err)), 0);
	assert_true(st.port_guid_known && st.port_guid == 0);
	assert_string_equal(vf.netdev, "ibp3s0f0v1n2");
	assert_int_equal(ibvf_vf_query(f->m, PF_PCI, &vf, &st, err, sizeof(err)), -EINVAL);
}

/*
 * The engine's VF seam (attach_vf.c) over the VF manager: a release that
 * resets a VF to GUID 0 puts back the link state it is given, as a reset
 * to a pre-attach GUID does (issue 15 item 6: GUID-0 resets left "enable").
 */
static void test_attach_vf_reset_restores_link(void **state)
{
	struct fx *f = *state;
	struct ibvf_attach_vf vf;
	struct ibvf_vf_ops ops;
	char err[IBVF_ERR_LEN];

	assert_int_equal(ibvf_attach_vf_ops(f->m, f->root, &ops), 0);
	assert_int_equal(ops.lookup(ops.ctx, "0000:03:00.3", &vf, err, sizeof(err)), 0);
	assert_string_equal(vf.link_state, "auto");
	/* attach: GUID and link state enable */
	assert_int_equal(ops.program(ops.ctx, &vf, 0x0002c90300001001ULL, 0x0002c90300001001ULL,
				     "enable", err, sizeof(err)),
			 0);
	expect_hw(f, 1, 0x0002c90300001001ULL, 0x0002c90300001001ULL, IBVF_VF_LINK_ENABLE);
	/* release of a VF that had GUID 0: reset, link state back to auto */
	assert_int_equal(ops.program(ops.ctx, &vf, 0, 0, "auto", err, sizeof(err)), 0);
	expect_hw(f, 1, 0, 0, IBVF_VF_LINK_AUTO);
	assert_string_equal(vf.link_state, "auto");
	/* a pre-attach GUID: same */
	assert_int_equal(ops.program(ops.ctx, &vf, 0x0002c90300001001ULL, 0x0002c90300001001ULL,
				     "disable", err, sizeof(err)),
			 0);
	assert_int_equal(ops.program(ops.ctx, &vf, 0xa1, 0xa1, "auto", err, sizeof(err)), 0);
	expect_hw(f, 1, 0xa1, 0xa1, IBVF_VF_LINK_AUTO);
	/* no link state given: left as it is */
	assert_int_equal(ops.program(ops.ctx, &vf, 0x0002c90300001001ULL, 0x0002c90300001001ULL,
				     "enable", err, sizeof(err)),
			 0);
	assert_int_equal(ops.program(ops.ctx, &vf, 0, 0, NULL, err, sizeof(err)), 0);
	expect_hw(f, 1, 0, 0, IBVF_VF_LINK_ENABLE);
	ibvf_attach_vf_ops_free(&ops);
}

static void test_netlink_pf_without_ipoib(void **state)
{
	struct ibvf_vf_manager_opts o = {.rebind_timeout_ms = 200};
	struct ibvf_vf_request r = req_of(0x0002c90300005000ULL, -1);
	char err[IBVF_ERR_LEN], locks[PATH_MAX], *root = vt_root_new();
	struct ibvf_vf_manager *m;
	struct ibvf_vf_driver *d;
	struct ibvf_vf_info out;

	(void)state;
	/* the production driver on a PF whose IPoIB netdev is missing */
	assert_int_equal(vt_add_pf(root, "0000:05:00.0", NULL, 0, "mlx5_1", 2, NULL), 0);
	snprintf(locks, sizeof(locks), "%s/locks", root);
	o.sysfs_root = root;
	o.lock_dir = locks;
	assert_int_equal(ibvf_vf_driver_netlink_create(root, &d, err, sizeof(err)), 0);
	assert_int_equal(ibvf_vf_manager_create(&o, d, &m, err, sizeof(err)), 0);
	assert_int_equal(ibvf_vf_program(m, "0000:05:00.2", &r, &out, err, sizeof(err)), -ENODEV);
	expect_text(err, "PF 0000:05:00.0 of VF 0 (0000:05:00.2) has no IPoIB netdev",
		    "nothing was changed");
	ibvf_vf_manager_destroy(m);
	vt_root_free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_program_rebind_finds_renamed_netdev, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_timeout_then_rollback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attach_vf_reset_restores_link, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_timeout_rdma_never_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vf_vanishes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback_each_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback_failure_reported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prev_from_caller_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_per_vf_locking, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_and_query, setup, teardown),
		cmocka_unit_test(test_netlink_pf_without_ipoib),
	};

	ibvf_log_init("test_vf_manager", IBVF_LOG_NONE, LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
