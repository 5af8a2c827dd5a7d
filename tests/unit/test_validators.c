// SPDX-License-Identifier: MIT
/*
 * One table of PCI addresses, VF link states, GUIDs and PKeys, run through
 * the three places that take them from a user:
 *
 *   cni     cni_netconf_parse() of an ADD configuration (the CNI plugin; its
 *           compatibility path uses nothing else)
 *   ibvfd   ibvf_prepare_params_parse(), the checks of the API's "prepare"
 *   ibvfctl the built binary's `daemon prepare`, against a fake ibvfd socket
 *           that records what ibvfctl sends (a refused argument: exit 2 and
 *           nothing sent)
 *
 * Every row must get the same accept/refuse answer and the same normalised
 * value from all three. The default partition (0x7fff) is a policy of ibvfd
 * (allow_default_pkey): the comparison runs with it on, and the rows marked
 * .dflt must then be refused by ibvfd with it off.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include <ibvf/types.h>

#include "attach.h"
#include "cni_config.h"
#include "err.h"
#include "testutil.h"

enum field { F_PCI, F_LINK, F_GUID, F_PKEY };

struct row {
	enum field f;
	const char *in;
	const char *membership; /* F_PKEY: NULL, "full" or "limited" */
	bool ok;
	const char *norm; /* F_PCI, F_LINK: the normalised spelling */
	uint64_t val;	  /* F_GUID: the GUID; F_PKEY: 15-bit key | 0x8000 when full */
	bool dflt;	  /* F_PKEY: the default partition (ibvfd's allow_default_pkey) */
};

#define PCI_OK(s, n)                                                                               \
	{                                                                                          \
		F_PCI, s, NULL, true, n, 0, false                                                  \
	}
#define PCI_BAD(s)                                                                                 \
	{                                                                                          \
		F_PCI, s, NULL, false, NULL, 0, false                                              \
	}
#define LINK_OK(s, n)                                                                              \
	{                                                                                          \
		F_LINK, s, NULL, true, n, 0, false                                                 \
	}
#define LINK_BAD(s)                                                                                \
	{                                                                                          \
		F_LINK, s, NULL, false, NULL, 0, false                                             \
	}
#define GUID_OK(s, v)                                                                              \
	{                                                                                          \
		F_GUID, s, NULL, true, NULL, v, false                                              \
	}
#define GUID_BAD(s)                                                                                \
	{                                                                                          \
		F_GUID, s, NULL, false, NULL, 0, false                                             \
	}
#define PKEY_OK(s, m, v)                                                                           \
	{                                                                                          \
		F_PKEY, s, m, true, NULL, v, false                                                 \
	}
#define PKEY_DFLT(s, m, v)                                                                         \
	{                                                                                          \
		F_PKEY, s, m, true, NULL, v, true                                                  \
	}
#define PKEY_BAD(s, m)                                                                             \
	{                                                                                          \
		F_PKEY, s, m, false, NULL, 0, false                                                \
	}

static const struct row rows[] = {
	PCI_OK("0000:03:00.2", "0000:03:00.2"),
	PCI_OK("0000:0A:00.2", "0000:0a:00.2"),
	PCI_OK("10000:01:00.2", "10000:01:00.2"), /* VMD domain */
	PCI_OK("1000A:E1:1F.7", "1000a:e1:1f.7"),
	PCI_OK("ABCDEF01:ff:1f.0", "abcdef01:ff:1f.0"),
	PCI_BAD("0000:03:20.0"), /* device > 0x1f */
	PCI_BAD("0000:03:00.8"), /* function > 7 */
	PCI_BAD("0000:03:00.a"),
	PCI_BAD("000:03:00.2"),	      /* domain of 3 digits */
	PCI_BAD("123456789:03:00.2"), /* domain of 9 digits */
	PCI_BAD("00000:03:00.2"),     /* %04x never pads to 5 */
	PCI_BAD("0000:3:00.2"),
	PCI_BAD("0000:03:0.2"),
	PCI_BAD("0000:03:00"),
	PCI_BAD("03:00.2"),
	PCI_BAD("0000:0g:00.2"),
	PCI_BAD("0000-03:00.2"),
	PCI_BAD("0000:03:00.2 "),
	PCI_BAD(" 0000:03:00.2"),
	PCI_BAD(""),

	LINK_OK("auto", "auto"),
	LINK_OK("enable", "enable"),
	LINK_OK("disable", "disable"),
	LINK_OK("Enable", "enable"),
	LINK_OK("DISABLE", "disable"),
	LINK_OK("AuTo", "auto"),
	LINK_BAD("up"),
	LINK_BAD("enabled"),
	LINK_BAD("auto "),
	LINK_BAD("0"),

	GUID_OK("02:00:00:00:00:00:00:17", 0x0200000000000017ull),
	GUID_OK("02:00:00:00:00:00:00:AB", 0x02000000000000abull),
	GUID_OK("0x0200000000000017", 0x0200000000000017ull),
	GUID_OK("0X02000000000000AB", 0x02000000000000abull),
	GUID_OK("02000000000000ab", 0x02000000000000abull),
	GUID_BAD("00:00:00:00:00:00:00:00"), /* no LID for a zero port GUID */
	GUID_BAD("ff:ff:ff:ff:ff:ff:ff:ff"), /* reserved */
	GUID_BAD("0x0000000000000000"),
	GUID_BAD("0x0"),
	GUID_BAD("02:00:00:00:00:00:17"),
	GUID_BAD("2:0:0:0:0:0:0:17"),
	GUID_BAD("02-00-00-00-00-00-00-17"),
	GUID_BAD("0x02000000000000171"),
	GUID_BAD("zz"),

	PKEY_OK("0x12", NULL, 0x8012), /* no membership word: full */
	PKEY_OK("18", NULL, 0x8012),
	PKEY_OK("0x8012", NULL, 0x8012),
	PKEY_OK("0X0ABC", NULL, 0x8abc),
	PKEY_OK("0x0012", "limited", 0x0012),
	PKEY_OK("0x8001", NULL, 0x8001),
	PKEY_OK("0x8001", "full", 0x8001),
	PKEY_OK("0x7ffe", NULL, 0xfffe),
	PKEY_BAD("0x8001", "limited"), /* bit 15 says full */
	PKEY_DFLT("0x7fff", NULL, 0xffff),
	PKEY_DFLT("0xffff", NULL, 0xffff),
	PKEY_DFLT("0x7fff", "limited", 0x7fff),
	PKEY_DFLT("65535", NULL, 0xffff),
	PKEY_BAD("0", NULL), /* key 0 is reserved */
	PKEY_BAD("0x0", NULL),
	PKEY_BAD("0x8000", NULL),
	PKEY_BAD("0x10000", NULL),
	PKEY_BAD("65536", NULL),
	PKEY_BAD("-1", NULL),
	PKEY_BAD("0x", NULL),
	PKEY_BAD("0x12 ", NULL),
	PKEY_BAD("junk", NULL),
};

/* What one entry point made of a row. */
struct answer {
	bool ok;
	char str[64]; /* F_PCI, F_LINK */
	uint64_t val; /* F_GUID, F_PKEY */
	char why[IBVF_ERR_LEN];
};

#define BASE_PCI  "0000:03:00.2"
#define BASE_PKEY "0x12"

static const char *pci_of(const struct row *r)
{
	return r->f == F_PCI ? r->in : BASE_PCI;
}

static const char *pkey_of(const struct row *r)
{
	return r->f == F_PKEY ? r->in : BASE_PKEY;
}

static const char *member_of(const struct row *r)
{
	return r->f == F_PKEY ? r->membership : NULL;
}

static void take(const struct row *r, struct answer *a, const char *pci, const char *link,
		 uint64_t guid, uint16_t pkey)
{
	a->ok = true;
	if (r->f == F_PCI)
		snprintf(a->str, sizeof(a->str), "%s", pci);
	else if (r->f == F_LINK)
		snprintf(a->str, sizeof(a->str), "%s", link);
	else
		a->val = r->f == F_GUID ? guid : pkey;
}

/* ------------------------------------------------------------ the CNI -- */

static void via_cni(const struct row *r, struct answer *a)
{
	json_t *conf = json_pack("{s:s,s:s,s:s,s:s,s:s}", "cniVersion", "1.0.0", "name", "n",
				 "type", "ib-sriov", "deviceID", pci_of(r), "pkey", pkey_of(r));
	struct cni_netconf nc;
	enum cni_conf_error kind;
	char *text;
	int ret;

	assert_non_null(conf);
	if (member_of(r))
		json_object_set_new(conf, "membership", json_string(member_of(r)));
	if (r->f == F_LINK)
		json_object_set_new(conf, "link_state", json_string(r->in));
	if (r->f == F_GUID)
		json_object_set_new(conf, "runtimeConfig",
				    json_pack("{s:s}", "infinibandGUID", r->in));
	text = json_dumps(conf, JSON_COMPACT);
	json_decref(conf);
	assert_non_null(text);
	memset(a, 0, sizeof(*a));
	ret = cni_netconf_parse(&nc, text, strlen(text), CNI_CMD_ADD, &kind, a->why,
				sizeof(a->why));
	free(text);
	if (ret) {
		assert_int_equal(ret, -EINVAL);
		return;
	}
	assert_int_equal(nc.n_pkeys, 1);
	take(r, a, nc.device_id, cni_link_state_name(nc.link_state), nc.guid,
	     (uint16_t)(nc.pkeys[0].key |
			(nc.pkeys[0].membership == IBVF_MEMBER_FULL ? IBVF_PKEY_FULL_BIT : 0)));
	cni_netconf_free(&nc);
}

/* ------------------------------------------------- the ibvfd API params -- */

static json_t *prepare_params(const struct row *r)
{
	json_t *pk = json_pack("{s:s}", "pkey", pkey_of(r));
	json_t *p = json_pack("{s:{s:s,s:s},s:s,s:[o]}", "owner", "container_id", "c1", "ifname",
			      "net1", "pci", pci_of(r), "pkeys", pk);

	assert_non_null(p);
	if (member_of(r))
		json_object_set_new(pk, "membership", json_string(member_of(r)));
	if (r->f == F_LINK)
		json_object_set_new(p, "link_state", json_string(r->in));
	if (r->f == F_GUID)
		json_object_set_new(p, "guid", json_string(r->in));
	return p;
}

static void via_ibvfd(const struct row *r, bool allow_default, struct answer *a)
{
	json_t *p = prepare_params(r);
	struct ibvf_prepare_params out;
	int ret;

	memset(a, 0, sizeof(*a));
	ret = ibvf_prepare_params_parse(p, allow_default, &out, a->why, sizeof(a->why));
	json_decref(p);
	if (ret) {
		assert_int_equal(ret, -EINVAL);
		return;
	}
	assert_int_equal(out.n_pkeys, 1);
	take(r, a, out.pci, out.link_state, out.req_guid, out.pkeys[0]);
}

/* ------------------------------------ ibvfctl against a recording socket -- */

struct fake_ibvfd {
	int lfd;
	pthread_t th;
	pthread_mutex_t mu;
	json_t *params; /* of the last request */
	char *dir, *sock, *cfg;
	const char *bin;
};

static void serve_one(struct fake_ibvfd *s, int fd)
{
	static const char reply[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,"
				    "\"message\":\"recorded by test_validators\"}}\n";
	char buf[8192];
	size_t n = 0;
	json_t *req;

	while (n < sizeof(buf) - 1 && !memchr(buf, '\n', n)) {
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);

		if (k <= 0)
			return;
		n += (size_t)k;
	}
	buf[n] = 0;
	req = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	pthread_mutex_lock(&s->mu);
	json_decref(s->params);
	s->params = req ? json_incref(json_object_get(req, "params")) : json_null();
	pthread_mutex_unlock(&s->mu);
	json_decref(req);
	if (write(fd, reply, sizeof(reply) - 1) < 0)
		return;
}

static void *serve(void *arg)
{
	struct fake_ibvfd *s = arg;
	int fd;

	while ((fd = accept(s->lfd, NULL, NULL)) >= 0) {
		serve_one(s, fd);
		close(fd);
	}
	return NULL;
}

static int setup(void **state)
{
	struct fake_ibvfd *s = calloc(1, sizeof(*s));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char json[1024], *st;

	if (!s)
		return -1;
	s->bin = tu_binary("IBVFCTL");
	if (!s->bin) {
		print_error("IBVFCTL is not set to the built ibvfctl\n");
		return -1;
	}
	s->dir = tu_mkdtemp("validators");
	if (!s->dir)
		return -1;
	s->sock = tu_path(s->dir, "api.sock");
	s->cfg = tu_path(s->dir, "ibvfd.json");
	st = tu_path(s->dir, "state");
	snprintf(json, sizeof(json),
		 "{\"state_dir\": \"%s\", \"api\": {\"socket\": \"%s\"}, \"pool\": {\"ranges\": "
		 "[{\"start\": \"02:00:00:00:00:00:00:01\", \"end\": "
		 "\"02:00:00:00:00:00:00:ff\"}]}}",
		 st, s->sock);
	free(st);
	if (tu_write_str(s->cfg, json) || strlen(s->sock) >= sizeof(sa.sun_path))
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->sock);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(s->lfd, 8))
		return -1;
	pthread_mutex_init(&s->mu, NULL);
	if (pthread_create(&s->th, NULL, serve, s))
		return -1;
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct fake_ibvfd *s = *state;

	shutdown(s->lfd, SHUT_RDWR); /* accept() returns: the thread ends */
	pthread_join(s->th, NULL);
	close(s->lfd);
	json_decref(s->params);
	pthread_mutex_destroy(&s->mu);
	tu_rmrf(s->dir);
	free(s->sock);
	free(s->cfg);
	free(s);
	return 0;
}

static json_t *take_params(struct fake_ibvfd *s)
{
	json_t *p;

	pthread_mutex_lock(&s->mu);
	p = s->params;
	s->params = NULL;
	pthread_mutex_unlock(&s->mu);
	return p;
}

static void via_ibvfctl(struct fake_ibvfd *s, const struct row *r, struct answer *a)
{
	const char *argv[24];
	struct tu_result res;
	const char *m;
	json_t *p, *pk;
	uint64_t g = 0;
	uint16_t v = 0;
	int n = 0;

	argv[n++] = s->bin;
	argv[n++] = "-c";
	argv[n++] = s->cfg;
	argv[n++] = "daemon";
	argv[n++] = "prepare";
	argv[n++] = "--owner";
	argv[n++] = "c1";
	argv[n++] = "--pci";
	argv[n++] = pci_of(r);
	argv[n++] = "--pkey";
	argv[n++] = pkey_of(r);
	if (member_of(r) && !strcasecmp(member_of(r), "limited"))
		argv[n++] = "--limited";
	if (r->f == F_LINK) {
		argv[n++] = "--link-state";
		argv[n++] = r->in;
	}
	if (r->f == F_GUID) {
		argv[n++] = "--guid";
		argv[n++] = r->in;
	}
	argv[n] = NULL;
	memset(a, 0, sizeof(*a));
	json_decref(take_params(s));
	assert_int_equal(tu_run(&res, NULL, 60, argv), 0);
	p = take_params(s);
	snprintf(a->why, sizeof(a->why), "exit %d: %s", res.status, res.err);
	tu_result_free(&res);
	if (res.status == 2) { /* usage: refused before anything was sent */
		assert_null(p);
		return;
	}
	if (!p)
		fail_msg("ibvfctl sent nothing and did not refuse: %s", a->why);
	assert_int_equal(res.status, 3); /* the fake's error reply */
	pk = json_array_get(json_object_get(p, "pkeys"), 0);
	assert_int_equal(json_array_size(json_object_get(p, "pkeys")), 1);
	if (json_object_get(p, "guid"))
		assert_int_equal(
			ibvf_guid_parse(json_string_value(json_object_get(p, "guid")), &g, NULL, 0),
			0);
	m = json_string_value(json_object_get(pk, "membership"));
	assert_int_equal(ibvf_pkey_member_parse(json_string_value(json_object_get(pk, "pkey")), m,
						true, &v, NULL, 0),
			 0);
	take(r, a, json_string_value(json_object_get(p, "pci")),
	     json_string_value(json_object_get(p, "link_state")), g, v);
	json_decref(p);
}

/* ----------------------------------------------------------------- test -- */

static const char *const field_name[] = {"PCI", "link state", "GUID", "PKey"};

static void check(const struct row *r, const char *who, const struct answer *a)
{
	if (a->ok != r->ok)
		fail_msg("%s '%s'%s%s: %s %s, want %s (%s)", field_name[r->f], r->in,
			 r->membership ? " membership " : "", r->membership ? r->membership : "",
			 who, a->ok ? "accepts" : "refuses", r->ok ? "accept" : "refuse", a->why);
	if (!r->ok)
		return;
	if (r->f == F_PCI || r->f == F_LINK) {
		if (strcmp(a->str, r->norm))
			fail_msg("%s '%s': %s gives '%s', want '%s'", field_name[r->f], r->in, who,
				 a->str, r->norm);
	} else if (a->val != r->val) {
		fail_msg("%s '%s': %s gives 0x%llx, want 0x%llx", field_name[r->f], r->in, who,
			 (unsigned long long)a->val, (unsigned long long)r->val);
	}
}

static void same_answer_everywhere(void **state)
{
	struct fake_ibvfd *s = *state;
	size_t n_ok = 0, n_bad = 0;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct answer a;

		via_cni(r, &a);
		check(r, "the CNI", &a);
		via_ibvfd(r, true, &a);
		check(r, "ibvfd (allow_default_pkey)", &a);
		via_ibvfctl(s, r, &a);
		check(r, "ibvfctl", &a);

		/* ibvfd's own policy: the default partition only when allowed */
		via_ibvfd(r, false, &a);
		if (a.ok != (r->ok && !r->dflt))
			fail_msg("PKey '%s': ibvfd without allow_default_pkey %s it (%s)", r->in,
				 a.ok ? "accepts" : "refuses", a.why);
		if (r->dflt && !strstr(a.why, "default partition"))
			fail_msg("PKey '%s': refusal does not say why: %s", r->in, a.why);
		if (r->ok)
			n_ok++;
		else
			n_bad++;
	}
	/* the table really holds both kinds */
	assert_true(n_ok >= 20 && n_bad >= 30);
}

/*
 * The owner "ibvf-warm-<pci>" is ibvfd's own record of a warm VF (warm_vf.c):
 * a caller using it would be answered with the warm VF as its attachment (and
 * the warm pass would re-GUID a VF in its Pod); "ibvf-adopted-<guid>" is a
 * record `ibvfctl pool rebuild` adopted, which another owner's release naming
 * its VF releases. Any container_id with either prefix is refused, with any
 * ifname; a look-alike without the '-' is not.
 */
static void warm_owner_reserved(void **state)
{
	static const struct {
		const char *cid, *ifname;
		bool ok;
	} owners[] = {
		{"ibvf-warm-0000-05-00.2", "warm", false},
		{"ibvf-warm-0000-05-00.2", "net1", false},
		{"ibvf-warm-", "net1", false},
		{"ibvf-warmer", "net1", true},
		{"xibvf-warm-0000-05-00.2", "warm", true},
		{"ibvf-adopted-0200000000000001", "adopted", false},
		{"ibvf-adopted-x", "net1", false},
		{"ibvf-adoptedx", "net1", true},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
		json_t *p = json_pack("{s:{s:s,s:s},s:s,s:[{s:s}]}", "owner", "container_id",
				      owners[i].cid, "ifname", owners[i].ifname, "pci",
				      "0000:05:00.2", "pkeys", "pkey", "0x0012");
		struct ibvf_prepare_params out;
		char why[256] = "";
		int ret;

		assert_non_null(p);
		ret = ibvf_prepare_params_parse(p, false, &out, why, sizeof(why));
		json_decref(p);
		if (owners[i].ok && ret)
			fail_msg("owner %s/%s refused: %s", owners[i].cid, owners[i].ifname, why);
		if (!owners[i].ok && ret != -EINVAL)
			fail_msg("owner %s/%s: want -EINVAL, got %d", owners[i].cid,
				 owners[i].ifname, ret);
		if (!owners[i].ok && !strstr(why, "reserves"))
			fail_msg("owner %s/%s: refusal does not say why: %s", owners[i].cid,
				 owners[i].ifname, why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(same_answer_everywhere, setup, teardown),
		cmocka_unit_test(warm_owner_reserved),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
