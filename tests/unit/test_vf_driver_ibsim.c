// SPDX-License-Identifier: MIT
/*
 * cmocka tests of the ibsim lab VF driver without ibsim: the console is a
 * FIFO read by a thread that answers like ibsim's console (prompt "sim> ",
 * '# nodeid "X" (X) not found' for unknown nodes), and the commands it got
 * are checked line by line. Also the vf.ibsim config keys, directly and
 * through ibvf_config_load().
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "err.h"
#include "log.h"
#include "vf_driver.h"
#include "vf_ibsim.h"
#include "vf_test_util.h"

struct fx {
	char *root;
	char fifo[PATH_MAX], out[PATH_MAX];
	pthread_t thr;
	int rfd;
	char got[8192]; /* commands received, one per line */
	pthread_mutex_t mu;
	struct ibvf_vf_driver *d;
};

static bool known_node(const char *line)
{
	static const char *const nodes[] = {"\"vf0\"",	"\"vf1\"",  "\"vf2\"", "\"vf3\"",
					    "\"hcaB\"", "\"hcaC\"", NULL};

	for (const char *const *n = nodes; *n; n++)
		if (strstr(line, *n))
			return true;
	return false;
}

/* A stand-in for ibsim's console loop. */
static void *fake_ibsim(void *arg)
{
	struct fx *f = arg;
	char buf[512];
	size_t have = 0;
	ssize_t n;

	while ((n = read(f->rfd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		char *nl;

		have += (size_t)n;
		buf[have] = 0;
		while ((nl = strchr(buf, '\n'))) {
			FILE *o = fopen(f->out, "a");

			*nl = 0;
			if (!strcmp(buf, "Quit")) {
				fclose(o);
				return NULL;
			}
			pthread_mutex_lock(&f->mu);
			strncat(f->got, buf, sizeof(f->got) - strlen(f->got) - 2);
			strcat(f->got, "\n");
			pthread_mutex_unlock(&f->mu);
			if (!known_node(buf)) {
				char *q = strchr(buf, '"'), *e = q ? strchr(q + 1, '"') : NULL;

				if (q && e)
					fprintf(o, "# nodeid %.*s (%.*s) not found\n",
						(int)(e - q + 1), q, (int)(e - q - 1), q + 1);
			}
			fputs("sim> ", o);
			fclose(o);
			memmove(buf, nl + 1, strlen(nl + 1) + 1);
			have = strlen(buf);
		}
	}
	return NULL;
}

static struct ibvf_vf_driver *make_driver(struct fx *f, const char *extra)
{
	char json[3 * PATH_MAX], err[IBVF_ERR_LEN];
	struct ibvf_vf_driver *d;

	snprintf(json, sizeof(json),
		 "{\"console\":\"%s\",\"output\":\"%s\",\"relink_delay_ms\":0%s%s}", f->fifo,
		 f->out, extra ? "," : "", extra ? extra : "");
	if (ibvf_vf_driver_ibsim_create(f->root, json, &d, err, sizeof(err)))
		fail_msg("create: %s", err);
	return d;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	FILE *o;

	f->root = vt_root_new();
	pthread_mutex_init(&f->mu, NULL);
	snprintf(f->fifo, sizeof(f->fifo), "%s/ibsim.ctl", f->root);
	snprintf(f->out, sizeof(f->out), "%s/ibsim.out", f->root);
	if (mkfifo(f->fifo, 0600))
		return -1;
	f->rfd = open(f->fifo, O_RDWR); /* as the lab opens it: never EOF */
	o = fopen(f->out, "w");
	fputs("Network simulator ready.\nsim> ", o);
	fclose(o);
	pthread_create(&f->thr, NULL, fake_ibsim, f);
	if (vt_add_pf(f->root, "0000:03:00.0", "ib0", 4, "mlx5_0", 4, NULL))
		return -1;
	f->d = make_driver(f, "\"node_prefix\":\"vf\"");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	int w = open(f->fifo, O_WRONLY);

	ibvf_vf_driver_destroy(f->d);
	if (write(w, "Quit\n", 5) != 5)
		abort();
	close(w);
	pthread_join(f->thr, NULL);
	close(f->rfd);
	vt_root_free(f->root);
	free(f);
	return 0;
}

static void vf_of(struct fx *f, int idx, struct ibvf_vf_info *vf)
{
	char err[IBVF_ERR_LEN];

	assert_int_equal(ibvf_vf_lookup_index(f->root, "ib0", idx, vf, err, sizeof(err)), 0);
}

static void expect_got(struct fx *f, const char *want)
{
	pthread_mutex_lock(&f->mu);
	if (strcmp(f->got, want))
		fail_msg("ibsim got:\n%s\nwanted:\n%s", f->got, want);
	f->got[0] = 0;
	pthread_mutex_unlock(&f->mu);
}

static void expect_file(struct fx *f, const char *rel, const char *want)
{
	char p[PATH_MAX], b[128] = "";
	FILE *fp;

	snprintf(p, sizeof(p), "%s/devices/pci0000:00/0000:03:00.0/%s", f->root, rel);
	fp = fopen(p, "r");
	assert_non_null(fp);
	assert_non_null(fgets(b, sizeof(b), fp));
	fclose(fp);
	assert_string_equal(b, want);
}

static void test_port_guid_is_node_plus_one(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN];

	vf_of(f, 0, &vf);
	assert_int_equal(f->d->ops->set_guid(f->d, &vf, IBVF_GUID_NODE, 0x0200000000001000ULL, err,
					     sizeof(err)),
			 0);
	expect_got(f, ""); /* ibsim cannot set a node GUID on its own */
	expect_file(f, "sriov/0/node", "02:00:00:00:00:00:10:00\n");
	assert_int_equal(f->d->ops->set_guid(f->d, &vf, IBVF_GUID_PORT, 0x0200000000001001ULL, err,
					     sizeof(err)),
			 0);
	expect_got(f, "Guid \"vf0\" 0x0200000000001000\n");
	expect_file(f, "sriov/0/port", "02:00:00:00:00:00:10:01\n");
	/* the zero GUID of a fresh VF: node GUID all-ones, port GUID wraps to 0 */
	assert_int_equal(f->d->ops->set_guid(f->d, &vf, IBVF_GUID_PORT, 0, err, sizeof(err)), 0);
	expect_got(f, "Guid \"vf0\" 0xffffffffffffffff\n");
	expect_file(f, "sriov/0/port", "00:00:00:00:00:00:00:00\n");
}

static void test_node_map(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_driver *d =
		make_driver(f, "\"nodes\":{\"0000:03:00.3\":\"hcaB\",\"ib0/2\":\"hcaC\"}");
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN];

	vf_of(f, 1, &vf);
	assert_int_equal(d->ops->set_guid(d, &vf, IBVF_GUID_PORT, 0x11, err, sizeof(err)), 0);
	vf_of(f, 2, &vf);
	assert_int_equal(d->ops->set_guid(d, &vf, IBVF_GUID_PORT, 0x21, err, sizeof(err)), 0);
	expect_got(f, "Guid \"hcaB\" 0x0000000000000010\nGuid \"hcaC\" 0x0000000000000020\n");
	vf_of(f, 3, &vf); /* neither in the map nor a prefix */
	assert_int_equal(d->ops->set_guid(d, &vf, IBVF_GUID_PORT, 0x31, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no ibsim node for VF 3 (0000:03:00.5) of PF ib0"));
	ibvf_vf_driver_destroy(d);
}

static void test_unknown_node_reported(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_driver *d = make_driver(f, "\"nodes\":{\"0000:03:00.2\":\"vf9\"}");
	struct ibvf_vf_info vf;
	char err[IBVF_ERR_LEN];

	vf_of(f, 0, &vf);
	assert_int_equal(d->ops->set_guid(d, &vf, IBVF_GUID_PORT, 0x11, err, sizeof(err)), -ENOENT);
	if (!strstr(err, "ibsim has no node \"vf9\"") || !strstr(err, "PF ib0 VF 0"))
		fail_msg("error: %s", err);
	ibvf_vf_driver_destroy(d);
}

static void test_link_state_and_rebind(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_info vf, now;
	struct ibvf_vf_state st[2];
	const struct ibvf_vf_info *vfs[2];
	char err[IBVF_ERR_LEN];

	vf_of(f, 1, &vf);
	assert_string_equal(vf.netdev, "ib0v1");
	assert_int_equal(f->d->ops->rebind(f->d, &vf, NULL, 1000, err, sizeof(err)), 0);
	expect_got(f, "Unlink \"vf1\"[1]\nReLink \"vf1\"[1]\n");
	assert_int_equal(ibvf_vf_lookup(f->root, vf.pci, &now, err, sizeof(err)), 0);
	assert_string_equal(now.netdev, "ib0v1r1"); /* back under a new name */
	assert_int_equal(now.ifindex, vf.ifindex);
	assert_string_equal(now.rdma_dev, vf.rdma_dev);
	assert_string_equal(now.driver, "mlx5_core");
	/* disable: policy Down and the port goes down now ... */
	assert_int_equal(
		f->d->ops->set_link_state(f->d, &now, IBVF_VF_LINK_DISABLE, err, sizeof(err)), 0);
	expect_got(f, "Unlink \"vf1\"[1]\n");
	expect_file(f, "sriov/1/policy", "Down\n");
	/* ... and stays down across a rebind */
	assert_int_equal(f->d->ops->rebind(f->d, &now, NULL, 1000, err, sizeof(err)), 0);
	expect_got(f, "Unlink \"vf1\"[1]\n");
	assert_int_equal(ibvf_vf_lookup(f->root, vf.pci, &now, err, sizeof(err)), 0);
	assert_string_equal(now.netdev, "ib0v1r2");
	assert_int_equal(
		f->d->ops->set_link_state(f->d, &now, IBVF_VF_LINK_ENABLE, err, sizeof(err)), 0);
	expect_got(f, "ReLink \"vf1\"[1]\n");
	expect_file(f, "sriov/1/policy", "Up\n");
	/* read back from the legacy sriov/<vf>/{node,port,policy} files */
	assert_int_equal(f->d->ops->set_guid(f->d, &now, IBVF_GUID_PORT, 0x0200000000000005ULL, err,
					     sizeof(err)),
			 0);
	vfs[0] = &now;
	vf_of(f, 2, &vf);
	vfs[1] = &vf;
	assert_int_equal(f->d->ops->read_back(f->d, vfs, 2, st, err, sizeof(err)), 0);
	assert_true(st[0].port_guid_known && st[0].port_guid == 0x0200000000000005ULL);
	assert_true(st[0].node_guid_known && st[0].node_guid == 0);
	assert_true(st[0].link_state_known && st[0].link_state == IBVF_VF_LINK_ENABLE);
	assert_true(st[1].port_guid_known && st[1].port_guid == 0);
	assert_true(st[1].link_state_known && st[1].link_state == IBVF_VF_LINK_AUTO);
}

static void test_rebind_same_name_and_vanish(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_driver *d =
		make_driver(f, "\"node_prefix\":\"vf\",\"rebind_netdev\":\"same\"");
	struct ibvf_vf_info vf, now;
	char err[IBVF_ERR_LEN];

	vf_of(f, 2, &vf);
	assert_int_equal(d->ops->rebind(d, &vf, NULL, 1000, err, sizeof(err)), 0);
	assert_int_equal(ibvf_vf_lookup(f->root, vf.pci, &now, err, sizeof(err)), 0);
	assert_string_equal(now.netdev, "ib0v2");
	expect_got(f, "Unlink \"vf2\"[1]\nReLink \"vf2\"[1]\n");
	assert_int_equal(ibvf_fake_remove_dev(f->root, vf.pci), 0);
	assert_int_equal(d->ops->rebind(d, &vf, NULL, 1000, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "vanished"));
	ibvf_vf_driver_destroy(d);
}

static void test_console_not_read(void **state)
{
	struct fx *f = *state;
	char fifo[PATH_MAX], json[PATH_MAX + 64], err[IBVF_ERR_LEN];
	struct ibvf_vf_driver *d;
	struct ibvf_vf_info vf;

	snprintf(fifo, sizeof(fifo), "%s/nobody.ctl", f->root);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	snprintf(json, sizeof(json), "{\"console\":\"%s\",\"node_prefix\":\"vf\"}", fifo);
	assert_int_equal(ibvf_vf_driver_ibsim_create(f->root, json, &d, err, sizeof(err)), 0);
	vf_of(f, 0, &vf);
	assert_int_equal(d->ops->set_guid(d, &vf, IBVF_GUID_PORT, 5, err, sizeof(err)), -ENXIO);
	assert_non_null(strstr(err, "no ibsim reads its console"));
	ibvf_vf_driver_destroy(d);
}

/*
 * "output" (ibsim's stdout, read for its answers) named a FIFO: the driver
 * used to block for ever in open(2) with its console lock held. It must
 * say what is wrong at once; alarm() turns a regression into a failure.
 */
static void test_output_fifo(void **state)
{
	struct fx *f = *state;
	char con[PATH_MAX], out[PATH_MAX], json[2 * PATH_MAX + 64], err[IBVF_ERR_LEN];
	struct ibvf_vf_driver *d;
	struct ibvf_vf_info vf;
	int keep;

	snprintf(con, sizeof(con), "%s/console.ctl", f->root);
	snprintf(out, sizeof(out), "%s/output.fifo", f->root);
	assert_int_equal(mkfifo(con, 0600), 0);
	assert_int_equal(mkfifo(out, 0600), 0);
	keep = open(con, O_RDWR | O_CLOEXEC); /* a "reader" so the command is written */
	assert_true(keep >= 0);
	snprintf(json, sizeof(json),
		 "{\"console\":\"%s\",\"output\":\"%s\",\"node_prefix\":\"vf\"}", con, out);
	assert_int_equal(ibvf_vf_driver_ibsim_create(f->root, json, &d, err, sizeof(err)), 0);
	vf_of(f, 0, &vf);
	alarm(20);
	assert_int_equal(d->ops->set_guid(d, &vf, IBVF_GUID_PORT, 5, err, sizeof(err)), -EINVAL);
	alarm(0);
	assert_non_null(strstr(err, "is not a regular file"));
	ibvf_vf_driver_destroy(d);
	close(keep);
}

/*
 * The legacy per-VF GUID files (<pf>/sriov/N/node) as a FIFO in the fake
 * tree: writing one used to block for ever in fopen(); now ENXIO at once.
 */
static void test_sriov_file_fifo(void **state)
{
	struct fx *f = *state;
	struct ibvf_vf_info vf;
	char p[PATH_MAX + 64], err[IBVF_ERR_LEN];

	vf_of(f, 2, &vf);
	snprintf(p, sizeof(p), "%s/devices/pci0000:00/0000:03:00.0/sriov/2", f->root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/devices/pci0000:00/0000:03:00.0/sriov/2/node", f->root);
	unlink(p);
	assert_int_equal(mkfifo(p, 0600), 0);
	alarm(20);
	assert_int_equal(f->d->ops->set_guid(f->d, &vf, IBVF_GUID_NODE, 0x0002c90300001001ull, err,
					     sizeof(err)),
			 -ENXIO);
	alarm(0);
	assert_non_null(strstr(err, "sriov/2/node"));
}

/* ------------------------------------------------------------- config -- */

static int check_cfg(const char *text, char *err, size_t errlen)
{
	struct ibvf_jctx c = {"t.json", err, errlen};
	json_t *o = json_loads(text, 0, NULL);
	int ret;

	assert_non_null(o);
	ret = ibvf_vf_ibsim_config_check(&c, "vf.ibsim", o);
	json_decref(o);
	return ret;
}

static void test_config_keys(void **state)
{
	static const struct {
		const char *json, *msg;
	} bad[] = {
		{"{\"console\":\"/x\",\"node_prefix\":\"vf\",\"bogus\":1}",
		 "t.json: vf.ibsim.bogus: unknown key"},
		{"{\"node_prefix\":\"vf\"}", "vf.ibsim.console: required"},
		{"{\"console\":\"/x\"}", "give \"nodes\""},
		{"{\"console\":\"/x\",\"nodes\":{\"0000:03:00.2\":\"vf\\\"0\"}}",
		 "ibsim node name must be"},
		{"{\"console\":\"/x\",\"nodes\":{\"0000:03:00.2\":\"a b\"}}",
		 "ibsim node name must be"},
		{"{\"console\":\"/x\",\"nodes\":{\"ib0\":\"vf0\"}}", "key 'ib0' is neither"},
		{"{\"console\":\"/x\",\"nodes\":[\"vf0\"]}", "expected an object"},
		{"{\"console\":\"/x\",\"node_prefix\":\"v f\"}", "vf.ibsim.node_prefix"},
		{"{\"console\":\"/x\",\"node_prefix\":\"vf\",\"rebind_netdev\":\"new\"}",
		 "expected \"rename\" or \"same\""},
		{"{\"console\":\"/x\",\"node_prefix\":\"vf\",\"relink_delay_ms\":20000}",
		 "vf.ibsim.relink_delay_ms"},
		{"{\"console\":3,\"node_prefix\":\"vf\"}", "vf.ibsim.console: expected a string"},
	};
	char err[IBVF_ERR_LEN];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		assert_int_equal(check_cfg(bad[i].json, err, sizeof(err)), -EINVAL);
		if (!strstr(err, bad[i].msg))
			fail_msg("%s: error '%s' lacks '%s'", bad[i].json, err, bad[i].msg);
	}
	assert_int_equal(
		check_cfg("{\"console\":\"/x\",\"output\":\"/y\",\"nodes\":{\"0000:03:00.2\":"
			  "\"vf0\",\"ib0/1\":\"h-1.a_b\"},\"rebind_netdev\":\"same\","
			  "\"real_netdevs\":true,\"relink_delay_ms\":0}",
			  err, sizeof(err)),
		0);
}

static void test_config_file(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX], err[IBVF_ERR_LEN];
	struct ibvf_config cfg;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/ibvfd.json", f->root);
	fp = fopen(path, "w");
	fputs("{\"vf\":{\"driver\":\"ibsim\"}}", fp);
	fclose(fp);
	assert_int_equal(ibvf_config_load(&cfg, path, true, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "vf.ibsim: required when vf.driver is \"ibsim\""));
	fp = fopen(path, "w");
	fputs("{\"vf\":{\"driver\":\"ibsim\",\"ibsim\":{\"console\":\"/c\",\"node_prefx\":\"v\"}}}",
	      fp);
	fclose(fp);
	assert_int_equal(ibvf_config_load(&cfg, path, true, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "ibvfd.json: vf.ibsim.node_prefx: unknown key"));
	fp = fopen(path, "w");
	fputs("{\"vf\":{\"driver\":\"ibsim\",\"ibsim\":{\"console\":\"/c\",\"node_prefix\":\"vf\"}}}",
	      fp);
	fclose(fp);
	assert_int_equal(ibvf_config_load(&cfg, path, true, NULL, err, sizeof(err)), 0);
	assert_string_equal(cfg.vf.driver, "ibsim");
	assert_non_null(strstr(cfg.vf.ibsim_json, "\"node_prefix\":\"vf\""));
	ibvf_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_port_guid_is_node_plus_one, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_map, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_node_reported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_state_and_rebind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rebind_same_name_and_vanish, setup, teardown),
		cmocka_unit_test_setup_teardown(test_console_not_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_output_fifo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sriov_file_fifo, setup, teardown),
		cmocka_unit_test(test_config_keys),
		cmocka_unit_test_setup_teardown(test_config_file, setup, teardown),
	};

	ibvf_log_init("test_vf_driver_ibsim", IBVF_LOG_NONE, LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
