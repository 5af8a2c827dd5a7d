// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/port/port_watch.c: P_Key lookup (full vs limited),
 * conditions, descriptions, directed-route and target checks, adaptive
 * polling, and the wait and watch loops driven by a scripted local source
 * (umad_get_port() replaced below), plus the port_watch config keys.
 * The module's .c is included to reach its static helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/umad.h>

/* Scripted sysfs: each umad_get_port() call returns the next step (the last repeats). */
int fake_umad_get_port(const char *ca_name, int portnum, umad_port_t *port);
int fake_umad_release_port(umad_port_t *port);
struct ibmad_port *fake_mad_rpc_open_port(char *dev_name, int dev_port, int *mgmt_classes,
					  int num_classes);
int fake_umad_get_ca(const char *ca_name, umad_ca_t *ca);
int fake_umad_release_ca(umad_ca_t *ca);
#define umad_get_ca	  fake_umad_get_ca
#define umad_release_ca	  fake_umad_release_ca
#define umad_get_port	  fake_umad_get_port
#define umad_release_port fake_umad_release_port
#define mad_rpc_open_port fake_mad_rpc_open_port
#include "../../daemon/port/port_watch.c"
#undef umad_get_port
#undef umad_release_port
#undef mad_rpc_open_port
#undef umad_get_ca
#undef umad_release_ca

#include "config.h"

struct step {
	int state, phys, lid, sm_lid;
	uint16_t pkeys[8];
	const char *link_layer; /* NULL: "InfiniBand" */
};

static const struct step *script;
static size_t script_len, script_pos, get_port_calls;

int fake_umad_get_port(const char *ca_name, int portnum, umad_port_t *port)
{
	const struct step *s;

	(void)ca_name;
	get_port_calls++;
	if (!script_len)
		return -ENODEV;
	s = &script[script_pos < script_len ? script_pos : script_len - 1];
	if (script_pos < script_len)
		script_pos++;
	memset(port, 0, sizeof(*port));
	port->portnum = portnum;
	port->state = (unsigned)s->state;
	port->phys_state = (unsigned)s->phys;
	port->base_lid = (unsigned)s->lid;
	port->sm_lid = (unsigned)s->sm_lid;
	port->port_guid = htobe64(0x0002c90300100001ull);
	snprintf(port->link_layer, sizeof(port->link_layer), "%s",
		 s->link_layer ? s->link_layer : "InfiniBand");
	port->pkeys_size = 8;
	port->pkeys = calloc(8, sizeof(uint16_t));
	if (!port->pkeys)
		return -ENOMEM;
	memcpy(port->pkeys, s->pkeys, sizeof(s->pkeys));
	return 0;
}

int fake_umad_release_port(umad_port_t *port)
{
	free(port->pkeys);
	port->pkeys = NULL;
	return 0;
}

/* One fake CA, "mlx5_9", with one port; NULL names the default CA. */
int fake_umad_get_ca(const char *ca_name, umad_ca_t *ca)
{
	if (ca_name && strcmp(ca_name, "mlx5_9"))
		return -ENODEV;
	memset(ca, 0, sizeof(*ca));
	snprintf(ca->ca_name, sizeof(ca->ca_name), "mlx5_9");
	ca->numports = 1;
	return 0;
}

int fake_umad_release_ca(umad_ca_t *ca)
{
	(void)ca;
	return 0;
}

/* libibmad could not open the umad port: errno as open(2) of the device left it */
static int open_port_errno;

struct ibmad_port *fake_mad_rpc_open_port(char *dev_name, int dev_port, int *mgmt_classes,
					  int num_classes)
{
	(void)dev_name;
	(void)dev_port;
	(void)mgmt_classes;
	(void)num_classes;
	errno = open_port_errno;
	return NULL;
}

static void set_script(const struct step *s, size_t n)
{
	script = s;
	script_len = n;
	script_pos = 0;
	get_port_calls = 0;
}

/* A local source without a device: the struct is filled by hand. */
static struct ibvf_port_src *fake_src(uint32_t pmin, uint32_t pmax)
{
	struct ibvf_port_src *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->kind = IBVF_PORT_SRC_LOCAL;
	snprintf(s->ca, sizeof(s->ca), "mlx5_9");
	s->port = 1;
	snprintf(s->name, sizeof(s->name), "mlx5_9:1");
	ibvf_port_watch_config_defaults(&s->cfg);
	s->cfg.poll_min_ms = pmin;
	s->cfg.poll_max_ms = pmax;
	s->umad_fd = -1;
	return s;
}

/* ------------------------------------------------------- P_Key lookup -- */

static void test_pkey_find(void **state)
{
	/* index: 0 default full, 1 empty, 2 limited 0x0001, 3 invalid-full 0x8000, 33 full 0x8a02
	 */
	uint16_t t[40] = {0xffff, 0x0000, 0x0001, 0x8000};
	uint16_t e = 0;

	(void)state;
	t[33] = 0x8a02;
	assert_int_equal(ibvf_pkey_find(t, 40, 0x0001, IBVF_PKEY_MATCH_LIMITED, &e), 2);
	assert_int_equal(e, 0x0001);
	/* the membership bit of the argument does not matter, @match does */
	assert_int_equal(ibvf_pkey_find(t, 40, 0x8001, IBVF_PKEY_MATCH_LIMITED, NULL), 2);
	assert_int_equal(ibvf_pkey_find(t, 40, 0x8001, IBVF_PKEY_MATCH_FULL, NULL), -ENOENT);
	assert_int_equal(ibvf_pkey_find(t, 40, 0x0001, IBVF_PKEY_MATCH_ANY, &e), 2);
	/* beyond the first 32-entry block */
	assert_int_equal(ibvf_pkey_find(t, 40, 0x0a02, IBVF_PKEY_MATCH_FULL, &e), 33);
	assert_int_equal(e, 0x8a02);
	assert_int_equal(ibvf_pkey_find(t, 40, 0x0a02, IBVF_PKEY_MATCH_LIMITED, NULL), -ENOENT);
	assert_int_equal(ibvf_pkey_find(t, 33, 0x0a02, IBVF_PKEY_MATCH_ANY, NULL), -ENOENT);
	/* default partition: full 0xffff */
	assert_int_equal(ibvf_pkey_find(t, 40, 0x7fff, IBVF_PKEY_MATCH_FULL, NULL), 0);
	/* key 0 (0x0000 and 0x8000 are empty slots) never matches: invalid argument */
	assert_int_equal(ibvf_pkey_find(t, 40, 0x8000, IBVF_PKEY_MATCH_ANY, NULL), -EINVAL);
	assert_int_equal(ibvf_pkey_find(t, 40, 0x0000, IBVF_PKEY_MATCH_ANY, NULL), -EINVAL);
	assert_int_equal(ibvf_pkey_find(t, 0, 0x0001, IBVF_PKEY_MATCH_ANY, NULL), -ENOENT);
}

static void test_pkey_find_both_memberships(void **state)
{
	uint16_t t[4] = {0xffff, 0x0005, 0x8005, 0};
	uint16_t e = 0;

	(void)state;
	/* ANY prefers the full entry even when the limited one comes first */
	assert_int_equal(ibvf_pkey_find(t, 4, 0x0005, IBVF_PKEY_MATCH_ANY, &e), 2);
	assert_int_equal(e, 0x8005);
	assert_int_equal(ibvf_pkey_find(t, 4, 0x0005, IBVF_PKEY_MATCH_LIMITED, &e), 1);
	assert_int_equal(e, 0x0005);
}

/* ------------------------------------------------ conditions, describe -- */

static struct ibvf_port_info *mkinfo(uint8_t st, uint16_t lid, const uint16_t *pk, size_t n)
{
	struct ibvf_port_info *i = calloc(1, sizeof(*i));

	assert_non_null(i);
	i->reachable = true;
	i->state = st;
	i->phys_state = st == IBVF_PORT_DOWN ? 2 : 5;
	i->lid = lid;
	i->sm_lid = 1;
	i->n_pkeys = (uint16_t)n;
	memcpy(i->pkeys, pk, n * sizeof(*pk));
	return i;
}

static void test_cond_met(void **state)
{
	const uint16_t pk[] = {0xffff, 0x7fff, 0x8001, 0x0002};
	struct ibvf_port_info *i = mkinfo(IBVF_PORT_ACTIVE, 7, pk, 4);
	struct ibvf_port_cond c = ibvf_port_cond_ready(0x8001, IBVF_PKEY_MATCH_FULL);
	int idx;

	(void)state;
	assert_true(ibvf_port_cond_met(i, &c, &idx));
	assert_int_equal(idx, 2);
	c = ibvf_port_cond_ready(0x0002, IBVF_PKEY_MATCH_FULL);
	assert_false(ibvf_port_cond_met(i, &c, &idx));
	assert_int_equal(idx, -1);
	c.match = IBVF_PKEY_MATCH_LIMITED;
	assert_true(ibvf_port_cond_met(i, &c, &idx));
	assert_int_equal(idx, 3);
	c.pkey_want = IBVF_PKEY_WANT_ABSENT;
	assert_false(ibvf_port_cond_met(i, &c, NULL));
	c.pkey = 0x0003;
	assert_true(ibvf_port_cond_met(i, &c, &idx));
	assert_int_equal(idx, -1); /* no index for an absent P_Key */
	/* state and LID */
	i->lid = 0;
	c = ibvf_port_cond_ready(0x8001, IBVF_PKEY_MATCH_ANY);
	assert_false(ibvf_port_cond_met(i, &c, NULL));
	c.need_lid = false;
	assert_true(ibvf_port_cond_met(i, &c, NULL));
	i->state = IBVF_PORT_INIT;
	assert_false(ibvf_port_cond_met(i, &c, NULL));
	c.state = 0;
	assert_true(ibvf_port_cond_met(i, &c, NULL));
	/* an unreachable port satisfies only the unreachable condition */
	i->reachable = false;
	assert_false(ibvf_port_cond_met(i, &c, NULL));
	c.unreachable = true;
	assert_true(ibvf_port_cond_met(i, &c, NULL));
	i->reachable = true;
	assert_false(ibvf_port_cond_met(i, &c, NULL));
	free(i);
}

static void test_describe(void **state)
{
	const uint16_t pk[] = {0xffff, 0x7fff};
	const uint16_t pk2[] = {0xffff, 0x0000, 0x0001};
	struct ibvf_port_info *i = mkinfo(IBVF_PORT_ACTIVE, 7, pk, 2);
	struct ibvf_port_cond c = ibvf_port_cond_ready(0x8001, IBVF_PKEY_MATCH_FULL);
	char buf[IBVF_PORT_DESC_LEN], small[24];

	(void)state;
	assert_string_equal(
		ibvf_port_describe(i, &c, buf, sizeof(buf)),
		"port ACTIVE (LinkUp), LID 7, SM LID 1, but P_Key 0x8001 absent; table: "
		"0xffff 0x7fff");
	free(i);
	i = mkinfo(IBVF_PORT_INIT, 0, pk2, 3);
	i->sm_lid = 0;
	assert_string_equal(ibvf_port_describe(i, &c, buf, sizeof(buf)),
			    "port INIT (LinkUp), LID 0, no SM LID, but state is not ACTIVE, no LID "
			    "assigned, P_Key 0x8001 absent: index 2 holds 0x0001 (limited member); "
			    "table: 0xffff 0x0001");
	c.match = IBVF_PKEY_MATCH_LIMITED;
	c.state = 0;
	c.need_lid = false;
	assert_string_equal(ibvf_port_describe(i, &c, buf, sizeof(buf)),
			    "port INIT (LinkUp), LID 0, no SM LID: condition met; table: 0xffff "
			    "0x0001");
	c.pkey_want = IBVF_PKEY_WANT_ABSENT;
	assert_string_equal(
		ibvf_port_describe(i, &c, buf, sizeof(buf)),
		"port INIT (LinkUp), LID 0, no SM LID, but P_Key 0x0001 (limited) still "
		"present at index 2; table: 0xffff 0x0001");
	assert_string_equal(ibvf_port_describe(i, NULL, buf, sizeof(buf)),
			    "port INIT (LinkUp), LID 0, no SM LID; table: 0xffff 0x0001");
	/* truncation is safe and NUL-terminated */
	ibvf_port_describe(i, &c, small, sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	i->reachable = false;
	snprintf(i->error, sizeof(i->error), "no SMP reply (PortInfo of LID 7, 3 x 200 ms)");
	assert_string_equal(ibvf_port_describe(i, &c, buf, sizeof(buf)),
			    "port unreachable: no SMP reply (PortInfo of LID 7, 3 x 200 ms)");
	free(i);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(ibvf_port_state_name(IBVF_PORT_ACTIVE), "ACTIVE");
	assert_string_equal(ibvf_port_state_name(IBVF_PORT_INIT), "INIT");
	assert_string_equal(ibvf_port_state_name(77), "?");
	assert_string_equal(ibvf_port_phys_state_name(5), "LinkUp");
	assert_string_equal(ibvf_port_phys_state_name(2), "Polling");
	assert_string_equal(ibvf_port_phys_state_name(8), "?");
}

/* ------------------------------------------------- targets and routes -- */

static void test_parse_dr(void **state)
{
	char big[300];
	size_t o = 0;

	(void)state;
	assert_int_equal(parse_dr("0", NULL, 0), 0);
	assert_int_equal(parse_dr("0,1,4", NULL, 0), 0);
	assert_int_equal(parse_dr("0,254", NULL, 0), 0);
	assert_int_equal(parse_dr("1,2", NULL, 0), -EINVAL);
	assert_int_equal(parse_dr("01", NULL, 0), -EINVAL);
	assert_int_equal(parse_dr("0,", NULL, 0), -EINVAL);
	assert_int_equal(parse_dr("0,0", NULL, 0), -EINVAL);
	assert_int_equal(parse_dr("0,255", NULL, 0), -EINVAL);
	assert_int_equal(parse_dr("0,a", NULL, 0), -EINVAL);
	assert_int_equal(parse_dr("0,,1", NULL, 0), -EINVAL);
	assert_int_equal(parse_dr("", NULL, 0), -EINVAL);
	o += (size_t)snprintf(big, sizeof(big), "0");
	for (int i = 0; i < IBVF_DR_MAX_HOPS; i++)
		o += (size_t)snprintf(big + o, sizeof(big) - o, ",1");
	assert_int_equal(parse_dr(big, NULL, 0), 0);
	snprintf(big + o, sizeof(big) - o, ",1");
	assert_int_equal(parse_dr(big, NULL, 0), -EINVAL);
}

static void test_target_check(void **state)
{
	struct ibvf_port_src *s = fake_src(1, 2);
	struct ibvf_port_target t = {0};
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(target_check(s, &t, err, sizeof(err)), 0);
	t.kind = IBVF_TARGET_LID;
	t.lid = 7;
	assert_int_equal(target_check(s, &t, err, sizeof(err)), -EOPNOTSUPP);
	assert_non_null(strstr(err, "fabric source"));
	s->kind = IBVF_PORT_SRC_FABRIC;
	assert_int_equal(target_check(s, &t, err, sizeof(err)), 0);
	t.lid = 0;
	assert_int_equal(target_check(s, &t, err, sizeof(err)), -EINVAL);
	t.lid = 0xc000; /* multicast */
	assert_int_equal(target_check(s, &t, err, sizeof(err)), -EINVAL);
	t.kind = IBVF_TARGET_GUID;
	t.guid = 0;
	assert_int_equal(target_check(s, &t, err, sizeof(err)), -EINVAL);
	t.kind = IBVF_TARGET_DR;
	snprintf(t.dr, sizeof(t.dr), "0,1,x");
	assert_int_equal(target_check(s, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "0,1,x"));
	/* resolving a GUID needs the fabric source */
	s->kind = IBVF_PORT_SRC_LOCAL;
	assert_int_equal(ibvf_port_resolve_guid(s, 1, &t.lid, err, sizeof(err)), -EOPNOTSUPP);
	free(s);
}

static void test_src_open(void **state)
{
	static const struct step ib[] = {{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff}, NULL}};
	static const struct step eth[] = {{IBVF_PORT_ACTIVE, 5, 0, 0, {0}, "Ethernet"}};
	struct ibvf_port_src *s = (void *)1;
	struct ibvf_port_info *i = calloc(1, sizeof(*i));
	char err[IBVF_ERR_LEN];

	(void)state;
	set_script(ib, 1);
	assert_int_equal(ibvf_port_src_open("ibvf_no_such_dev", 1, IBVF_PORT_SRC_LOCAL, NULL, &s,
					    err, sizeof(err)),
			 -ENODEV);
	assert_null(s);
	assert_non_null(strstr(err, "no RDMA device 'ibvf_no_such_dev'"));
	assert_int_equal(
		ibvf_port_src_open("mlx5_9", 2, IBVF_PORT_SRC_LOCAL, NULL, &s, err, sizeof(err)),
		-ENODEV);
	assert_non_null(strstr(err, "mlx5_9 has 1 port(s), no port 2"));
	assert_int_equal(
		ibvf_port_src_open("x", 300, IBVF_PORT_SRC_LOCAL, NULL, &s, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(ibvf_port_src_open("x", 1, 7, NULL, &s, err, sizeof(err)), -EINVAL);
	/* a RoCE port has no IB port state or P_Key table */
	set_script(eth, 1);
	assert_int_equal(
		ibvf_port_src_open("mlx5_9", 1, IBVF_PORT_SRC_LOCAL, NULL, &s, err, sizeof(err)),
		-EPROTONOSUPPORT);
	assert_non_null(strstr(err, "mlx5_9:1: link layer is not InfiniBand"));
	assert_null(s);
	/* the local source opens without any umad device and reads sysfs on each query */
	set_script(ib, 1);
	assert_int_equal(
		ibvf_port_src_open(NULL, 1, IBVF_PORT_SRC_LOCAL, NULL, &s, err, sizeof(err)), 0);
	assert_string_equal(ibvf_port_src_name(s), "mlx5_9:1");
	assert_int_equal(ibvf_port_src_kind(s), IBVF_PORT_SRC_LOCAL);
	get_port_calls = 0;
	assert_int_equal(ibvf_port_query(s, &(struct ibvf_port_target){0}, i, err, sizeof(err)), 0);
	assert_int_equal(get_port_calls, 1);
	assert_int_equal(i->state, IBVF_PORT_ACTIVE);
	assert_int_equal(i->lid, 7);
	assert_int_equal(i->port_guid, 0x0002c90300100001ull);
	assert_int_equal(i->n_pkeys, 8);
	assert_int_equal(i->pkeys[0], 0xffff);
	ibvf_port_src_close(s);
	/* the fabric source fails cleanly when libibmad cannot open the port */
	open_port_errno = EACCES;
	assert_int_equal(
		ibvf_port_src_open("mlx5_9", 1, IBVF_PORT_SRC_FABRIC, NULL, &s, err, sizeof(err)),
		-EACCES);
	assert_null(s);
	free(i);
}

static void test_fabric_open_errors(void **state)
{
	struct ibvf_port_src *s = fake_src(1, 2);
	char err[IBVF_ERR_LEN];

	(void)state;
	open_port_errno = EACCES;
	assert_int_equal(fabric_open(s, err, sizeof(err)), -EACCES);
	/* names the device file (or its pattern when sysfs has no umad class) and the privilege */
	assert_non_null(strstr(err, "/dev/infiniband/umad"));
	assert_non_null(strstr(err, "mlx5_9"));
	assert_non_null(strstr(err, "root"));
	open_port_errno = ENOENT;
	assert_int_equal(fabric_open(s, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "ib_umad"));
	open_port_errno = EINVAL;
	assert_int_equal(fabric_open(s, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "libibmad could not open"));
	free(s);
}

static void test_lid_cache(void **state)
{
	struct ibvf_port_src *s = fake_src(1, 2);
	struct ibvf_port_target t = {.kind = IBVF_TARGET_GUID, .guid = 0x100};
	struct ibvf_port_target lid = {.kind = IBVF_TARGET_LID, .lid = 5};

	(void)state;
	assert_int_equal(lid_cache_get(s, &t), 0);
	lid_cache_put(s, 0x100, 7);
	assert_int_equal(lid_cache_get(s, &t), 7);
	assert_int_equal(lid_cache_get(s, &lid), 0); /* only GUID targets are cached */
	lid_cache_drop(s, &t);
	assert_int_equal(lid_cache_get(s, &t), 0);
	/* LID_CACHE_SIZE entries are kept; the oldest is replaced */
	for (unsigned i = 0; i <= LID_CACHE_SIZE; i++)
		lid_cache_put(s, 0x1000 + i, (uint16_t)(10 + i));
	t.guid = 0x1000;
	assert_int_equal(lid_cache_get(s, &t), 0);
	t.guid = 0x1001;
	assert_int_equal(lid_cache_get(s, &t), 11);
	t.guid = 0x1000 + LID_CACHE_SIZE;
	assert_int_equal(lid_cache_get(s, &t), 10 + LID_CACHE_SIZE);
	free(s);
}

/* ----------------------------------------------------------- polling -- */

static void test_next_interval(void **state)
{
	struct ibvf_port_watch_config c;

	(void)state;
	ibvf_port_watch_config_defaults(&c);
	c.poll_min_ms = 10;
	c.poll_max_ms = 70;
	assert_int_equal(next_interval(&c, 0, false), 10);
	assert_int_equal(next_interval(&c, 10, false), 20);
	assert_int_equal(next_interval(&c, 20, false), 40);
	assert_int_equal(next_interval(&c, 40, false), 70);
	assert_int_equal(next_interval(&c, 70, false), 70);
	assert_int_equal(next_interval(&c, 70, true), 10);
}

static void test_info_diff(void **state)
{
	const uint16_t pk[] = {0xffff};
	struct ibvf_port_info *a = mkinfo(IBVF_PORT_INIT, 0, pk, 1);
	struct ibvf_port_info *b = mkinfo(IBVF_PORT_INIT, 0, pk, 1);

	(void)state;
	assert_int_equal(info_diff(a, b), 0);
	b->state = IBVF_PORT_ACTIVE;
	b->lid = 3;
	assert_int_equal(info_diff(a, b), IBVF_PORT_CHG_STATE | IBVF_PORT_CHG_LID);
	b->pkeys[1] = 0x8001;
	b->n_pkeys = 2;
	assert_true(info_diff(a, b) & IBVF_PORT_CHG_PKEYS);
	b->reachable = false;
	assert_int_equal(info_diff(a, b), IBVF_PORT_CHG_REACHABLE);
	a->reachable = false;
	snprintf(a->error, sizeof(a->error), "x");
	snprintf(b->error, sizeof(b->error), "x");
	assert_int_equal(info_diff(a, b), 0);
	snprintf(b->error, sizeof(b->error), "y");
	assert_int_equal(info_diff(a, b), IBVF_PORT_CHG_REACHABLE);
	free(a);
	free(b);
}

/* -------------------------------------------------------------- wait -- */

static const struct step bring_up[] = {
	{IBVF_PORT_INIT, 5, 0, 0, {0xffff}},
	{IBVF_PORT_INIT, 5, 0, 0, {0xffff}},
	{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff}},
	{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff, 0x0001}}, /* limited first ... */
	{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff, 0x8001}}, /* ... then full */
};

static void test_wait_ready(void **state)
{
	struct ibvf_port_src *s = fake_src(1, 4);
	struct ibvf_port_target t = {0};
	struct ibvf_port_cond c = ibvf_port_cond_ready(0x8001, IBVF_PKEY_MATCH_FULL);
	struct ibvf_port_info *o = calloc(1, sizeof(*o));
	char err[IBVF_ERR_LEN];
	int idx;

	(void)state;
	set_script(bring_up, 5);
	assert_int_equal(ibvf_port_wait(s, &t, &c, 5000, -1, o, &idx, err, sizeof(err)), 0);
	assert_int_equal(idx, 1);
	assert_int_equal(o->pkeys[idx], 0x8001);
	assert_int_equal(o->lid, 7);
	assert_int_equal(get_port_calls, 5); /* stopped at the first satisfying poll */
	/* a limited member is enough for ANY, found one poll earlier */
	set_script(bring_up, 5);
	c.match = IBVF_PKEY_MATCH_ANY;
	assert_int_equal(ibvf_port_wait(s, &t, &c, 5000, -1, o, &idx, err, sizeof(err)), 0);
	assert_int_equal(get_port_calls, 4);
	assert_int_equal(o->pkeys[idx], 0x0001);
	free(o);
	free(s);
}

static void test_wait_timeout_reports_observed(void **state)
{
	static const struct step stuck[] = {{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff, 0x7fff}}};
	struct ibvf_port_src *s = fake_src(1, 8);
	struct ibvf_port_target t = {0};
	struct ibvf_port_cond c = ibvf_port_cond_ready(0x8001, IBVF_PKEY_MATCH_FULL);
	struct ibvf_port_info *o = calloc(1, sizeof(*o));
	char err[IBVF_ERR_LEN];
	int idx;

	(void)state;
	set_script(stuck, 1);
	assert_int_equal(ibvf_port_wait(s, &t, &c, 60, -1, o, &idx, err, sizeof(err)), -ETIMEDOUT);
	assert_non_null(strstr(err, "mlx5_9:1: timed out after "));
	assert_non_null(strstr(err, "port ACTIVE (LinkUp), LID 7, SM LID 1, but P_Key 0x8001 "
				    "absent; table: 0xffff 0x7fff"));
	assert_int_equal(idx, -1);
	assert_true(o->reachable);
	/* adaptive: 60 ms with 1,2,4,8,8... ms naps is far fewer than 60 polls */
	assert_true(get_port_calls >= 3 && get_port_calls < 30);
	/* timeout 0: exactly one query */
	set_script(stuck, 1);
	assert_int_equal(ibvf_port_wait(s, &t, &c, 0, -1, o, NULL, err, sizeof(err)), -ETIMEDOUT);
	assert_int_equal(get_port_calls, 1);
	free(o);
	free(s);
}

static void test_wait_unreachable_and_bad_input(void **state)
{
	struct ibvf_port_src *s = fake_src(1, 4);
	struct ibvf_port_target t = {0};
	struct ibvf_port_cond c = ibvf_port_cond_ready(0x8001, IBVF_PKEY_MATCH_FULL);
	char err[IBVF_ERR_LEN];

	(void)state;
	set_script(NULL, 0); /* umad_get_port fails: the device went away */
	assert_int_equal(ibvf_port_wait(s, &t, &c, 20, -1, NULL, NULL, err, sizeof(err)),
			 -ETIMEDOUT);
	assert_non_null(strstr(err, "port unreachable: mlx5_9 port 1: not found"));
	c.pkey = 0x8000; /* key 0 */
	assert_int_equal(ibvf_port_wait(s, &t, &c, 20, -1, NULL, NULL, err, sizeof(err)), -EINVAL);
	c = ibvf_port_cond_ready(0x8001, IBVF_PKEY_MATCH_FULL);
	c.state = 9;
	assert_int_equal(ibvf_port_wait(s, &t, &c, 20, -1, NULL, NULL, err, sizeof(err)), -EINVAL);
	c.state = IBVF_PORT_ACTIVE;
	t.kind = IBVF_TARGET_LID;
	t.lid = 3;
	assert_int_equal(ibvf_port_wait(s, &t, &c, 20, -1, NULL, NULL, err, sizeof(err)),
			 -EOPNOTSUPP);
	free(s);
}

static void test_wait_cancel(void **state)
{
	static const struct step init[] = {{IBVF_PORT_INIT, 5, 0, 0, {0xffff}}};
	struct ibvf_port_src *s = fake_src(5, 20);
	struct ibvf_port_target t = {0};
	struct ibvf_port_cond c = ibvf_port_cond_ready(0x8001, IBVF_PKEY_MATCH_FULL);
	char err[IBVF_ERR_LEN];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	set_script(init, 1);
	assert_int_equal(ibvf_port_wait(s, &t, &c, 10000, p[0], NULL, NULL, err, sizeof(err)),
			 -ECANCELED);
	assert_non_null(strstr(err, "wait cancelled"));
	assert_non_null(strstr(err, "port INIT"));
	close(p[0]);
	close(p[1]);
	free(s);
}

/* ------------------------------------------------------------- watch -- */

struct events {
	int n;
	unsigned changed[16];
	uint8_t state[16];
	bool had_prev[16];
};

static void on_change(const struct ibvf_port_info *prev, const struct ibvf_port_info *now,
		      unsigned changed, void *arg)
{
	struct events *e = arg;

	if (e->n < 16) {
		e->changed[e->n] = changed;
		e->state[e->n] = now->state;
		e->had_prev[e->n] = prev != NULL;
	}
	e->n++;
}

static void test_watch_timerfd(void **state)
{
	static const struct step flap[] = {
		{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff}},
		{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff}},
		{IBVF_PORT_DOWN, 2, 7, 1, {0xffff}},
		{IBVF_PORT_DOWN, 2, 7, 1, {0xffff}},
		{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff}},
		{IBVF_PORT_ACTIVE, 5, 7, 1, {0xffff, 0x8001}},
	};
	struct ibvf_port_src *s = fake_src(1, 2);
	struct ibvf_port_target t = {0};
	struct ibvf_port_watch *w;
	struct events ev = {0};
	char err[IBVF_ERR_LEN];
	int polls = 0;

	(void)state;
	set_script(flap, 6);
	assert_int_equal(ibvf_port_watch_new(s, &t, on_change, &ev, &w, err, sizeof(err)), 0);
	assert_null(ibvf_port_watch_last(w));
	while (polls < 6) {
		struct pollfd p = {.fd = ibvf_port_watch_fd(w), .events = POLLIN};

		assert_int_equal(poll(&p, 1, 1000), 1);
		assert_true(ibvf_port_watch_dispatch(w, err, sizeof(err)) >= 0);
		polls++;
	}
	/* a dispatch whether or not the timer fired yet: harmless, no new event */
	assert_true(ibvf_port_watch_dispatch(w, err, sizeof(err)) >= 0);
	assert_int_equal(ev.n, 4); /* first, DOWN, ACTIVE, P_Key */
	assert_false(ev.had_prev[0]);
	assert_int_equal(ev.changed[0], ~0u);
	assert_int_equal(ev.state[1], IBVF_PORT_DOWN);
	assert_int_equal(ev.changed[1], IBVF_PORT_CHG_STATE | IBVF_PORT_CHG_PHYS);
	assert_int_equal(ev.state[2], IBVF_PORT_ACTIVE);
	assert_int_equal(ev.changed[3], IBVF_PORT_CHG_PKEYS);
	assert_int_equal(ibvf_port_watch_last(w)->pkeys[1], 0x8001);
	ibvf_port_watch_free(w);
	/* a LID target on the local source is refused up front */
	t.kind = IBVF_TARGET_LID;
	t.lid = 5;
	assert_int_equal(ibvf_port_watch_new(s, &t, on_change, &ev, &w, err, sizeof(err)),
			 -EOPNOTSUPP);
	assert_null(w);
	free(s);
}

/* ------------------------------------------------------------ config -- */

static int load_cfg(const char *json, struct ibvf_config *cfg, char *err, size_t errlen)
{
	char path[] = "/tmp/ibvf-test-pw-XXXXXX";
	int fd = mkstemp(path), ret;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	close(fd);
	ret = ibvf_config_load(cfg, path, true, NULL, err, errlen);
	unlink(path);
	return ret;
}

static void test_config(void **state)
{
	struct ibvf_config cfg;
	char err[IBVF_ERR_LEN];
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(load_cfg("{}", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.port_watch.source, IBVF_PORT_SRC_LOCAL);
	assert_int_equal(cfg.port_watch.poll_min_ms, 10);
	assert_int_equal(cfg.port_watch.poll_max_ms, 500);
	assert_int_equal(cfg.port_watch.mad_timeout_ms, 200);
	assert_int_equal(cfg.port_watch.mad_retries, 2);
	ibvf_config_free(&cfg);
	assert_int_equal(load_cfg("{\"port_watch\": {\"source\": \"fabric\", \"poll_min_ms\": 5, "
				  "\"poll_max_ms\": 50, \"mad_timeout_ms\": 100, "
				  "\"mad_retries\": 0}}",
				  &cfg, err, sizeof(err)),
			 0);
	assert_int_equal(cfg.port_watch.source, IBVF_PORT_SRC_FABRIC);
	assert_int_equal(cfg.port_watch.poll_max_ms, 50);
	assert_int_equal(cfg.port_watch.mad_retries, 0);
	f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(ibvf_config_print(&cfg, f), 0);
	fclose(f);
	assert_non_null(strstr(text, "\"port_watch\""));
	assert_non_null(strstr(text, "\"source\": \"fabric\""));
	assert_non_null(strstr(text, "\"poll_max_ms\": 50"));
	free(text);
	ibvf_config_free(&cfg);

	assert_int_equal(
		load_cfg("{\"port_watch\": {\"sourse\": \"fabric\"}}", &cfg, err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "sourse"));
	assert_int_equal(
		load_cfg("{\"port_watch\": {\"source\": \"sysfs\"}}", &cfg, err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "port_watch"));
	assert_non_null(strstr(err, "source"));
	assert_int_equal(load_cfg("{\"port_watch\": {\"poll_min_ms\": 100, \"poll_max_ms\": 50}}",
				  &cfg, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "poll_max_ms"));
	assert_int_equal(
		load_cfg("{\"port_watch\": {\"mad_timeout_ms\": 0}}", &cfg, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(
		load_cfg("{\"port_watch\": {\"mad_retries\": 21}}", &cfg, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(load_cfg("{\"port_watch\": 3}", &cfg, err, sizeof(err)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pkey_find),
		cmocka_unit_test(test_pkey_find_both_memberships),
		cmocka_unit_test(test_cond_met),
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_parse_dr),
		cmocka_unit_test(test_target_check),
		cmocka_unit_test(test_src_open),
		cmocka_unit_test(test_fabric_open_errors),
		cmocka_unit_test(test_lid_cache),
		cmocka_unit_test(test_next_interval),
		cmocka_unit_test(test_info_diff),
		cmocka_unit_test(test_wait_ready),
		cmocka_unit_test(test_wait_timeout_reports_observed),
		cmocka_unit_test(test_wait_unreachable_and_bad_input),
		cmocka_unit_test(test_wait_cancel),
		cmocka_unit_test(test_watch_timerfd),
		cmocka_unit_test(test_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
