// SPDX-License-Identifier: MIT
/*
 * The ufm SM backend against the UFM API simulator (ufm_sim.py), over real
 * HTTP(S) on loopback: request paths and bodies byte for byte, both auth
 * modes, TLS verification (wrong CA, host name, insecure mode, client
 * certificates, certificate-only auth), timeouts, every injected fault, "{}"
 * replies, list parsing, GUID caps, a 10,000-GUID add, and UFM's own rules
 * (issue 16): one add per membership, index0, ip_over_ib of existing
 * partitions, removals of gone GUIDs/partitions, an administrator's last
 * member, DELETE removal by version, the last_updated wait, 0x7fff.
 *
 * Run once per simulator profile (IBVF_UFM_SIM_PROFILE: 6.12, 6.19, 6.22;
 * meson.build registers one test each).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>

#include "sm_ufm.h"
#include "ufm_sim_harness.h"

#define USER	 "ibvf-admin"
#define PASSWORD "s3cret-Pw_9!"
#define TOKEN	 "TOKx4f9a2c7e01d3b5a8"
/* base64("ibvf-admin:s3cret-Pw_9!") */
#define BASIC_B64 "aWJ2Zi1hZG1pbjpzM2NyZXQtUHdfOSE="
#define PK	  0x00a5

static struct ufm_sim sim;	   /* HTTPS, Basic + token */
static struct ufm_sim sim_plain;   /* HTTP */
static struct ufm_sim sim_badname; /* HTTPS, certificate for "ufm.invalid" only */
static const struct ibvf_sm_ops *ops;
static char err[512];
static char ufm_version[64];  /* the profile's ufm_release_version */
static bool has_last_updated; /* the profile has GET .../pkeys/last_updated */

/* ------------------------------------------------------------- helpers -- */

/* Backend config for @s: the defaults below, then @extra (a JSON object; a null value deletes). */
static char *config_for(struct ufm_sim *s, const char *extra)
{
	json_t *c =
		json_pack("{s:s,s:i,s:s,s:s,s:i}", "address", "127.0.0.1", "port", s->port,
			  "username", USER, "password_file", s->password_file, "change_wait_ms", 0);
	json_t *x;
	const char *k;
	json_t *v;
	char *out;

	if (s->tls)
		json_object_set_new(c, "ca_file", json_string(s->ca_file));
	else
		json_object_set_new(c, "scheme", json_string("http"));
	if (extra) {
		x = json_loads(extra, 0, NULL);
		assert_non_null(x);
		json_object_foreach(x, k, v)
		{
			if (json_is_null(v))
				json_object_del(c, k);
			else
				json_object_set(c, k, v);
		}
		json_decref(x);
	}
	out = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	return out;
}

static int open_backend(struct ufm_sim *s, const char *extra, struct ibvf_sm_backend **b)
{
	char *cfg = config_for(s, extra);
	int ret;

	err[0] = '\0';
	ret = ops->init(cfg, b, err, sizeof(err));
	free(cfg);
	return ret;
}

static struct ibvf_sm_backend *backend(struct ufm_sim *s, const char *extra)
{
	struct ibvf_sm_backend *b = NULL;
	int ret = open_backend(s, extra, &b);

	if (ret)
		fail_msg("init: %d %s", ret, err);
	return b;
}

/* An error text must never carry a credential. */
static void assert_no_secret(const char *e)
{
	assert_null(strstr(e, PASSWORD));
	assert_null(strstr(e, TOKEN));
	assert_null(strstr(e, BASIC_B64));
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("'%s' does not contain '%s'", hay, needle);
}

static const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

/* The newest request must be @method @path, with @body byte for byte (unless NULL). */
static json_t *expect_request(const char *method, const char *path, const char *body)
{
	json_t *r = ufm_sim_last_request(&sim);

	assert_non_null(r);
	assert_string_equal(jstr(r, "method"), method);
	assert_string_equal(jstr(r, "path"), path);
	if (body)
		assert_string_equal(jstr(r, "body"), body);
	return r;
}

/* The newest logged request @method @path (caller decrefs), failing the test when none. */
static json_t *find_request(const char *method, const char *path)
{
	json_t *r = NULL, *a, *e, *hit = NULL;

	assert_int_equal(ufm_sim_ctl(&sim, "GET", "/_sim/requests", NULL, &r), 200);
	a = json_object_get(r, "requests");
	for (size_t i = json_array_size(a); !hit && i-- > 0;) {
		e = json_array_get(a, i);
		if (!strcmp(jstr(e, "method"), method) && !strcmp(jstr(e, "path"), path))
			hit = json_incref(e);
	}
	json_decref(r);
	if (!hit)
		fail_msg("no %s %s in the simulator's request log", method, path);
	return hit;
}

/* How many logged requests have @method and a path starting with @prefix. */
static size_t count_requests(const char *method, const char *prefix)
{
	json_t *r = NULL, *a, *e;
	size_t n = 0, i;

	assert_int_equal(ufm_sim_ctl(&sim, "GET", "/_sim/requests", NULL, &r), 200);
	a = json_object_get(r, "requests");
	json_array_foreach(a, i, e) n += !strcmp(jstr(e, "method"), method) &&
					 !strncmp(jstr(e, "path"), prefix, strlen(prefix));
	json_decref(r);
	return n;
}

/* A member's field ("membership", "index0") or a PKey's ("ip_over_ib") in the simulator. */
static json_t *sim_get(const char *key, const char *guid, const char *field)
{
	json_t *st = NULL, *p, *g, *e, *v = NULL;
	size_t i;

	assert_int_equal(ufm_sim_ctl(&sim, "GET", "/_sim/state", NULL, &st), 200);
	p = json_object_get(st, key);
	if (p && !guid)
		v = json_object_get(p, field);
	g = json_object_get(p, "guids");
	json_array_foreach(g, i, e) if (guid && !strcmp(jstr(e, "guid"), guid)) v =
		json_object_get(e, field);
	v = json_deep_copy(v);
	json_decref(st);
	return v;
}

static void set_state(const char *json)
{
	assert_int_equal(ufm_sim_ctl(&sim, "POST", "/_sim/state", json, NULL), 200);
}

static const char *header(json_t *req, const char *name)
{
	json_t *h = json_object_get(req, "headers");
	const char *k;
	json_t *v;

	json_object_foreach(h, k, v) if (!strcasecmp(k, name)) return json_string_value(v);
	return NULL;
}

static void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fault(const char *fmt, ...)
{
	char rule[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	assert_int_equal(ufm_sim_fault(&sim, rule), 0);
}

/* A fault that answers @endpoint once with @body (status 200). */
static void fault_body(const char *endpoint, const char *body)
{
	json_t *r = json_pack("{s:s,s:s,s:s}", "endpoint", endpoint, "kind", "body", "body", body);
	char *s = json_dumps(r, JSON_COMPACT);

	assert_int_equal(ufm_sim_fault(&sim, s), 0);
	free(s);
	json_decref(r);
}

struct coll {
	size_t n;
	size_t stop_at; /* 0: never stop */
	uint16_t pk[16];
	struct ibvf_sm_member m[16];
	bool all_managed;
};

static int collect(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct coll *c = arg;

	if (c->n < 16) {
		c->pk[c->n] = pkey;
		c->m[c->n] = *m;
	}
	c->n++;
	c->all_managed &= managed;
	return c->stop_at && c->n == c->stop_at ? 42 : 0;
}

static long sim_pkey_size(const char *key)
{
	json_t *st = NULL;
	long n = -1;

	if (ufm_sim_ctl(&sim, "GET", "/_sim/state", NULL, &st) == 200) {
		json_t *p = json_object_get(st, key);

		n = p ? (long)json_array_size(json_object_get(p, "guids")) : 0;
	}
	json_decref(st);
	return n;
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* --------------------------------------------------------- setup/teardown -- */

static int group_setup(void **state)
{
	struct ufm_sim_opts tls = {.tls = true, .user = USER, .password = PASSWORD, .token = TOKEN};
	struct ufm_sim_opts plain = {.user = USER, .password = PASSWORD};
	struct ufm_sim_opts badname = {
		.tls = true, .san = "DNS:ufm.invalid", .user = USER, .password = PASSWORD};
	char e[256];

	(void)state;
	if (ufm_sim_start(&tls, &sim, e, sizeof(e)) ||
	    ufm_sim_start(&plain, &sim_plain, e, sizeof(e)) ||
	    ufm_sim_start(&badname, &sim_badname, e, sizeof(e))) {
		fprintf(stderr, "cannot start ufm_sim.py: %s\n", e);
		return -1;
	}
	{
		json_t *c = NULL;
		const char *v;

		if (ufm_sim_ctl(&sim, "GET", "/_sim/config", NULL, &c) != 200)
			return -1;
		v = json_string_value(
			json_object_get(json_object_get(c, "version"), "ufm_release_version"));
		snprintf(ufm_version, sizeof(ufm_version), "%s", v ? v : "?");
		has_last_updated = strcmp(json_string_value(json_object_get(c, "profile")), "6.12");
		printf("# simulator profile %s (%s)\n",
		       json_string_value(json_object_get(c, "profile")), ufm_version);
		json_decref(c);
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	ufm_sim_stop(&sim);
	ufm_sim_stop(&sim_plain);
	ufm_sim_stop(&sim_badname);
	return 0;
}

static int reset_sim(void **state)
{
	(void)state;
	return ufm_sim_reset(&sim) || ufm_sim_reset(&sim_plain) || ufm_sim_reset(&sim_badname);
}

/* ------------------------------------------------------------------ auth -- */

static void test_validate_basic(void **state)
{
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	char desc[256];
	json_t *r;

	(void)state;
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	assert_contains(desc, ufm_version);
	assert_contains(desc, "auth basic");
	assert_null(strstr(desc, "WARNING"));
	r = find_request("GET", "/ufmRest/app/ufm_version");
	assert_string_equal(header(r, "Authorization"), "Basic " BASIC_B64);
	assert_string_equal(header(r, "Accept"), "application/json");
	json_decref(r);
	/* and the PKey resource the writes change, with the same credentials */
	r = expect_request("GET", "/ufmRest/resources/pkeys/0x7fff", "");
	assert_string_equal(header(r, "Authorization"), "Basic " BASIC_B64);
	json_decref(r);
	ops->fini(b);
}

static void test_validate_token(void **state)
{
	struct ibvf_sm_backend *b;
	char extra[2 * PATH_MAX], desc[256];
	json_t *r;

	(void)state;
	snprintf(extra, sizeof(extra),
		 "{\"auth\":\"token\",\"token_file\":\"%s\",\"username\":null,"
		 "\"password_file\":null}",
		 sim.token_file);
	b = backend(&sim, extra);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	assert_contains(desc, "auth token");
	json_decref(find_request("GET", "/ufmRestV3/app/ufm_version"));
	r = expect_request("GET", "/ufmRestV3/resources/pkeys/0x7fff", "");
	/* the token goes raw after "Basic ", not base64 of user:password */
	assert_string_equal(header(r, "Authorization"), "Basic " TOKEN);
	json_decref(r);
	ops->fini(b);
}

static void test_password_inline(void **state)
{
	struct ibvf_sm_backend *b;
	char desc[256];

	(void)state;
	/* what UFM_PASSWORD maps to (daemon/config/config.c apply_env) */
	b = backend(&sim, "{\"password_file\":null,\"password\":\"" PASSWORD "\"}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	ops->fini(b);
}

static void test_wrong_password(void **state)
{
	struct ibvf_sm_backend *b;
	char desc[64];

	(void)state;
	b = backend(&sim, "{\"password_file\":null,\"password\":\"not-" PASSWORD "\"}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EACCES);
	assert_contains(err, "HTTP 401");
	assert_contains(err, "GET /ufmRest/app/ufm_version");
	assert_contains(err, "Unauthorized");
	assert_no_secret(err);
	assert_null(strstr(err, "not-"));
	/* one request: no second attempt with other credentials or schemes */
	assert_int_equal(ufm_sim_calls(&sim, "version"), 1);
	ops->fini(b);
}

static void test_wrong_token(void **state)
{
	struct ibvf_sm_backend *b;
	char path[512], extra[2 * PATH_MAX], desc[64];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/token.bad", sim.dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(TOKEN "x\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0600),
			 0); /* a secret file: 0600, the backend refuses others */
	snprintf(extra, sizeof(extra),
		 "{\"auth\":\"token\",\"token_file\":\"%s\",\"username\":null,"
		 "\"password_file\":null}",
		 path);
	b = backend(&sim, extra);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EACCES);
	assert_contains(err, "GET /ufmRestV3/app/ufm_version: HTTP 401");
	assert_no_secret(err);
	ops->fini(b);
	unlink(path);
}

/* ----------------------------------------------------------- add/remove -- */

static const struct ibvf_sm_pkey_flags flags_on = {.index0 = true, .ipoib = true};

static void test_add_body_full(void **state)
{
	const struct ibvf_sm_member m[] = {
		{0x0002c90300001001ull, IBVF_MEMBER_FULL},
		{0x0002C9030000ABCDull, IBVF_MEMBER_FULL},
	};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	json_t *r;

	(void)state;
	assert_int_equal(ops->add_members(b, PK, m, 2, &flags_on, err, sizeof(err)), 0);
	r = expect_request("POST", "/ufmRest/resources/pkeys",
			   "{\"pkey\":\"0x00A5\",\"guids\":[\"0002c90300001001\","
			   "\"0002c9030000abcd\"],\"membership\":\"full\",\"index0\":true,"
			   "\"ip_over_ib\":true}");
	assert_string_equal(header(r, "Content-Type"), "application/json");
	assert_null(header(r, "Expect"));
	json_decref(r);
	assert_int_equal(sim_pkey_size("0xa5"), 2);
	/* idempotent: the same add again succeeds and changes nothing */
	assert_int_equal(ops->add_members(b, PK, m, 2, &flags_on, err, sizeof(err)), 0);
	assert_int_equal(sim_pkey_size("0xa5"), 2);
	ops->fini(b);
}

static void test_add_body_limited_and_mixed(void **state)
{
	const struct ibvf_sm_member lim[] = {{0x0002c90300001001ull, IBVF_MEMBER_LIMITED}};
	const struct ibvf_sm_member mix[] = {
		{0x0002c90300001002ull, IBVF_MEMBER_FULL},
		{0x0002c90300001003ull, IBVF_MEMBER_LIMITED},
		{0x0002c90300001004ull, IBVF_MEMBER_FULL},
	};
	const struct ibvf_sm_pkey_flags off = {0};
	struct ibvf_sm_backend *b = backend(&sim, NULL);

	(void)state;
	assert_int_equal(ops->add_members(b, 0x7ff0, lim, 1, &off, err, sizeof(err)), 0);
	json_decref(expect_request("POST", "/ufmRest/resources/pkeys",
				   "{\"pkey\":\"0x7FF0\",\"guids\":[\"0002c90300001001\"],"
				   "\"membership\":\"limited\",\"index0\":false,"
				   "\"ip_over_ib\":false}"));
	/*
	 * Full and limited members of one PKey in one call: one POST per
	 * membership, never "memberships", which UFM's add ignores (everyone
	 * full: an isolation breach). No flags: index0 true (the backend's
	 * default, as the field clients), ip_over_ib true.
	 */
	assert_int_equal(ops->add_members(b, 0x1, mix, 3, NULL, err, sizeof(err)), 0);
	assert_int_equal(ufm_sim_calls(&sim, "add"), 3);
	assert_int_equal(count_requests("POST", "/ufmRest/resources/pkeys"), 3);
	json_decref(
		expect_request("POST", "/ufmRest/resources/pkeys",
			       "{\"pkey\":\"0x0001\",\"guids\":[\"0002c90300001003\"],"
			       "\"membership\":\"limited\",\"index0\":true,\"ip_over_ib\":true}"));
	assert_int_equal(sim_pkey_size("0x1"), 3);
	{
		json_t *v = sim_get("0x1", "0002c90300001003", "membership");

		assert_string_equal(json_string_value(v), "limited");
		json_decref(v);
		v = sim_get("0x1", "0002c90300001002", "membership");
		assert_string_equal(json_string_value(v), "full");
		json_decref(v);
		v = sim_get("0x1", "0002c90300001002", "index0");
		assert_true(json_is_true(v));
		json_decref(v);
	}
	ops->fini(b);
}

static void test_remove_body(void **state)
{
	const struct ibvf_sm_member m[] = {
		{0x0002c90300001001ull, IBVF_MEMBER_FULL},
		{0x0002c90300001002ull, IBVF_MEMBER_FULL},
	};
	const uint64_t g[] = {0x0002c90300001001ull};
	struct ibvf_sm_backend *b = backend(&sim, NULL);

	(void)state;
	assert_int_equal(ops->add_members(b, PK, m, 2, &flags_on, err, sizeof(err)), 0);
	assert_int_equal(ops->remove_members(b, PK, g, 1, err, sizeof(err)), 0);
	/* UFM >= 6.10: DELETE .../pkeys/{pkey}/guids/{g,...}, no body */
	json_decref(expect_request("DELETE", "/ufmRest/resources/pkeys/0xa5/guids/0002c90300001001",
				   ""));
	assert_int_equal(ufm_sim_calls(&sim, "remove"), 0);
	assert_int_equal(sim_pkey_size("0xa5"), 1);
	/* idempotent: removing a GUID that is not a member succeeds, sends nothing */
	assert_int_equal(ops->remove_members(b, PK, g, 1, err, sizeof(err)), 0);
	assert_int_equal(ufm_sim_calls(&sim, "delete"), 1);
	assert_int_equal(sim_pkey_size("0xa5"), 1);
	ops->fini(b);
	/* a UFM older than 6.10: the deprecated POST .../actions/remove_guids_from_pkey */
	assert_int_equal(
		ufm_sim_config(&sim, "{\"version\":{\"ufm_release_version\":\"6.9.0-3\"}}"), 0);
	b = backend(&sim, NULL);
	assert_int_equal(ops->remove_members(b, PK, &m[1].guid, 1, err, sizeof(err)), 0);
	json_decref(expect_request("POST", "/ufmRest/actions/remove_guids_from_pkey",
				   "{\"pkey\":\"0x00A5\",\"guids\":[\"0002c90300001002\"]}"));
	/* the last member of an API-made partition: UFM removes the partition too */
	assert_int_equal(sim_pkey_size("0xa5"), 0);
	ops->fini(b);
}

static void test_token_paths(void **state)
{
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	const uint64_t g[] = {0x0002c90300001001ull};
	struct ibvf_sm_backend *b;
	struct coll c = {.all_managed = true};
	char extra[2 * PATH_MAX];
	json_t *r;

	(void)state;
	snprintf(extra, sizeof(extra),
		 "{\"auth\":\"token\",\"token_file\":\"%s\",\"username\":null,"
		 "\"password_file\":null}",
		 sim.token_file);
	b = backend(&sim, extra);
	assert_int_equal(ops->add_members(b, PK, m, 1, &flags_on, err, sizeof(err)), 0);
	r = expect_request("POST", "/ufmRestV3/resources/pkeys", NULL);
	assert_string_equal(header(r, "Authorization"), "Basic " TOKEN);
	json_decref(r);
	assert_int_equal(ops->list_members(b, -1, collect, &c, err, sizeof(err)), 0);
	json_decref(expect_request("GET", "/ufmRestV3/resources/pkeys?guids_data=true", ""));
	assert_int_equal(c.n, 1);
	assert_int_equal(ops->remove_members(b, PK, g, 1, err, sizeof(err)), 0);
	json_decref(expect_request("DELETE",
				   "/ufmRestV3/resources/pkeys/0xa5/guids/0002c90300001001", ""));
	ops->fini(b);
}

static void test_bad_input_sends_nothing(void **state)
{
	const struct ibvf_sm_member zero[] = {{0, IBVF_MEMBER_FULL}};
	const struct ibvf_sm_member ones[] = {{UINT64_MAX, IBVF_MEMBER_FULL}};
	const struct ibvf_sm_member conflict[] = {
		{0x0002c90300001001ull, IBVF_MEMBER_FULL},
		{0x0002c90300001001ull, IBVF_MEMBER_LIMITED},
	};
	const struct ibvf_sm_member ok[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	const uint64_t g0[] = {0};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	struct coll c = {0};

	(void)state;
	assert_int_equal(ops->add_members(b, 0, ok, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_contains(err, "0x0000");
	assert_int_equal(ops->add_members(b, 0x8001, ok, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(ops->add_members(b, PK, zero, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_contains(err, "00:00:00:00:00:00:00:00");
	assert_int_equal(ops->add_members(b, PK, ones, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(ops->add_members(b, PK, conflict, 2, NULL, err, sizeof(err)), -EINVAL);
	assert_contains(err, "00:02:c9:03:00:00:10:01");
	assert_int_equal(ops->remove_members(b, PK, g0, 1, err, sizeof(err)), -EINVAL);
	assert_int_equal(ops->remove_members(b, 0x8000, g0, 1, err, sizeof(err)), -EINVAL);
	assert_int_equal(ops->list_members(b, 0x8000, collect, &c, err, sizeof(err)), -EINVAL);
	/* nothing to do: no call */
	assert_int_equal(ops->add_members(b, PK, ok, 0, NULL, err, sizeof(err)), 0);
	assert_int_equal(ops->remove_members(b, PK, g0, 0, err, sizeof(err)), 0);
	assert_int_equal(ufm_sim_calls(&sim, "add"), 0);
	assert_int_equal(ufm_sim_calls(&sim, "remove"), 0);
	assert_int_equal(ufm_sim_calls(&sim, "list"), 0);
	ops->fini(b);
}

static void test_duplicates_sent_once(void **state)
{
	const struct ibvf_sm_member m[] = {
		{0x0002c90300001002ull, IBVF_MEMBER_FULL},
		{0x0002c90300001001ull, IBVF_MEMBER_FULL},
		{0x0002c90300001002ull, IBVF_MEMBER_FULL},
	};
	struct ibvf_sm_backend *b = backend(&sim, NULL);

	(void)state;
	assert_int_equal(ops->add_members(b, PK, m, 3, &flags_on, err, sizeof(err)), 0);
	json_decref(expect_request("POST", "/ufmRest/resources/pkeys",
				   "{\"pkey\":\"0x00A5\",\"guids\":[\"0002c90300001002\","
				   "\"0002c90300001001\"],\"membership\":\"full\",\"index0\":true,"
				   "\"ip_over_ib\":true}"));
	ops->fini(b);
}

/* ------------------------------------------------------------------ list -- */

static void test_list_roundtrip(void **state)
{
	const struct ibvf_sm_member a[] = {
		{0x0002c90300001001ull, IBVF_MEMBER_FULL},
		{0x0002c90300001002ull, IBVF_MEMBER_LIMITED},
	};
	const struct ibvf_sm_member z[] = {{0x0002c90300002001ull, IBVF_MEMBER_FULL}};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	struct coll c = {.all_managed = true}, d = {0}, e = {.stop_at = 2};

	(void)state;
	assert_int_equal(ops->add_members(b, PK, a, 2, &flags_on, err, sizeof(err)), 0);
	assert_int_equal(ops->add_members(b, 0x2fb, z, 1, &flags_on, err, sizeof(err)), 0);
	assert_int_equal(ops->list_members(b, -1, collect, &c, err, sizeof(err)), 0);
	json_decref(expect_request("GET", "/ufmRest/resources/pkeys?guids_data=true", ""));
	assert_int_equal(c.n, 3);
	assert_true(c.all_managed);
	assert_int_equal(c.pk[0], PK);
	assert_true(c.m[0].guid == 0x0002c90300001001ull);
	assert_int_equal(c.m[0].membership, IBVF_MEMBER_FULL);
	assert_true(c.m[1].guid == 0x0002c90300001002ull);
	assert_int_equal(c.m[1].membership, IBVF_MEMBER_LIMITED);
	assert_int_equal(c.pk[2], 0x2fb);
	/* one PKey */
	assert_int_equal(ops->list_members(b, 0x2fb, collect, &d, err, sizeof(err)), 0);
	assert_int_equal(d.n, 1);
	assert_true(d.m[0].guid == 0x0002c90300002001ull);
	/* a callback's non-zero value stops the listing and is returned */
	assert_int_equal(ops->list_members(b, -1, collect, &e, err, sizeof(err)), 42);
	assert_int_equal(e.n, 2);
	ops->fini(b);
}

static void test_list_mixed_case(void **state)
{
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	struct coll c = {0};

	(void)state;
	fault_body("list", "{\"0x2FB\":{\"guids\":[{\"guid\":\"946DAE03005975C8\","
			   "\"membership\":\"Full\",\"index0\":true},{\"guid\":"
			   "\"946dae03005975C9\"}],\"ip_over_ib\":true,\"partition\":"
			   "\"api_pkey_0x2fb\"},\"0X7fff\":{\"guids\":[{\"guid\":"
			   "\"0x0002C90300000001\"}],\"index0\":false,\"ip_over_ib\":true,"
			   "\"membership\":\"limited\",\"partition\":\"management\"},"
			   "\"0xa\":{\"guids\":[{\"guid\":\"0002c90300000002\",\"membership\":"
			   "\"LIMITED\"}]},\"0x0B\":{\"partition\":\"empty\"}}");
	assert_int_equal(ops->list_members(b, -1, collect, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 4);
	assert_int_equal(c.pk[0], 0x2fb);
	assert_true(c.m[0].guid == 0x946dae03005975c8ull);
	assert_int_equal(c.m[0].membership, IBVF_MEMBER_FULL);
	assert_true(c.m[1].guid == 0x946dae03005975c9ull);
	assert_int_equal(c.m[1].membership, IBVF_MEMBER_FULL); /* missing: UFM's default */
	assert_int_equal(c.pk[2], 0x7fff);
	assert_true(c.m[2].guid == 0x0002c90300000001ull);
	assert_int_equal(c.m[2].membership, IBVF_MEMBER_LIMITED); /* the PKey's own */
	assert_int_equal(c.pk[3], 0xa);
	assert_int_equal(c.m[3].membership, IBVF_MEMBER_LIMITED);
	ops->fini(b);
}

/* ---------------------------------------------------------- "{}" replies -- */

static void test_empty_object(void **state)
{
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	struct coll c = {0};
	char desc[64];

	(void)state;
	fault("{\"endpoint\":\"version\",\"kind\":\"empty\"}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -ENOENT);
	assert_contains(err, "GET /ufmRest/app/ufm_version");
	assert_contains(err, "{}");
	/* for the list, {} is a fabric without partitions */
	fault("{\"endpoint\":\"list\",\"kind\":\"empty\"}");
	assert_int_equal(ops->list_members(b, -1, collect, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 0);
	/* an add answered with {} is a success (UFM's add reply carries nothing we use) */
	fault("{\"endpoint\":\"add\",\"kind\":\"empty\"}");
	{
		const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};

		assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), 0);
	}
	ops->fini(b);
}

/* --------------------------------------------------------------- faults -- */

static void test_fault_status(void **state)
{
	/* transient: what the SM ABI's error contract retries (include/ibvf/sm_backend.h) */
	static const struct {
		int status;
		int want;
		bool transient;
	} t[] = {{401, -EACCES, false},	  {403, -EPERM, false},	   {500, -EREMOTEIO, true},
		 {503, -EAGAIN, true},	  {404, -ENOENT, false},   {400, -EINVAL, false},
		 {502, -EREMOTEIO, true}, {504, -ETIMEDOUT, true}, {429, -EAGAIN, true},
		 {408, -ETIMEDOUT, true}, {409, -EEXIST, false},   {413, -E2BIG, false},
		 {418, -EPROTO, false},	  {501, -EIO, false}};
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	const struct ibvf_sm_member fresh[] = {{0x0002c90300001009ull, IBVF_MEMBER_FULL}};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	char want[64];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		fault("{\"endpoint\":\"add\",\"kind\":\"status\",\"status\":%d}", t[i].status);
		assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), t[i].want);
		if (ibvf_sm_err_is_transient(t[i].want) != t[i].transient)
			fail_msg("HTTP %d: errno %d transient should be %d", t[i].status, t[i].want,
				 t[i].transient);
		snprintf(want, sizeof(want),
			 "UFM POST /ufmRest/resources/pkeys: HTTP %d: "
			 "simulated HTTP %d",
			 t[i].status, t[i].status);
		assert_string_equal(err, want);
		assert_no_secret(err);
	}
	/* an error body in plain text is passed on, control characters blanked */
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), 0);
	fault("{\"endpoint\":\"delete\",\"kind\":\"status\",\"status\":500,"
	      "\"body\":\"Internal error:\\n pkey lock busy\"}");
	{
		const uint64_t g[] = {0x0002c90300001001ull};

		assert_int_equal(ops->remove_members(b, PK, g, 1, err, sizeof(err)), -EREMOTEIO);
	}
	assert_string_equal(err, "UFM DELETE /ufmRest/resources/pkeys/0xa5/guids/0002c90300001001: "
				 "HTTP 500: Internal error:  pkey lock busy");
	/* (a GUID not yet a member: one already there is not sent again) */
	/* a server that echoes the password back does not get it into the reason */
	fault("{\"endpoint\":\"add\",\"kind\":\"status\",\"status\":400,"
	      "\"body\":{\"error\":\"bad password " PASSWORD " for " USER "\"}}");
	assert_int_equal(ops->add_members(b, PK, fresh, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_contains(err, "HTTP 400: bad password ************ for " USER);
	assert_no_secret(err);
	/*
	 * Echoed where the reason is cut (256 bytes of reply text): the first
	 * characters of the password used to stay; and the Basic header as sent.
	 */
	for (int pad = 244; pad <= 254; pad++) {
		char rule[1024];

		snprintf(rule, sizeof(rule),
			 "{\"endpoint\":\"add\",\"kind\":\"status\","
			 "\"status\":400,\"body\":\"%0*d%s\"}",
			 pad, 0, PASSWORD);
		fault("%s", rule);
		assert_int_equal(ops->add_members(b, PK, fresh, 1, NULL, err, sizeof(err)),
				 -EINVAL);
		assert_null(strstr(err, "s3c"));
		assert_no_secret(err);
	}
	fault("{\"endpoint\":\"add\",\"kind\":\"status\",\"status\":401,"
	      "\"body\":\"rejected: Authorization: Basic " BASIC_B64 "\"}");
	assert_int_equal(ops->add_members(b, PK, fresh, 1, NULL, err, sizeof(err)), -EACCES);
	assert_contains(err, "rejected: Authorization: Basic ****");
	assert_no_secret(err);
	/* the next call goes through again: no state is left behind */
	assert_int_equal(ops->add_members(b, PK, fresh, 1, NULL, err, sizeof(err)), 0);
	ops->fini(b);
}

static void test_fault_reset(void **state)
{
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	char desc[128];

	(void)state;
	/* a good call first, then a reset: reported, never re-sent on a new connection */
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	fault("{\"endpoint\":\"add\",\"kind\":\"reset\"}");
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), -ECONNRESET);
	assert_contains(err, "UFM POST /ufmRest/resources/pkeys: ");
	assert_no_secret(err);
	/* no retry inside the backend: exactly one add reached the simulator */
	assert_int_equal(ufm_sim_calls(&sim, "add"), 1);
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), 0);
	assert_int_equal(ufm_sim_calls(&sim, "add"), 2);
	ops->fini(b);
}

static void test_fault_malformed(void **state)
{
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	struct coll c = {0};
	char desc[64];

	(void)state;
	fault("{\"endpoint\":\"list\",\"kind\":\"malformed\"}");
	assert_int_equal(ops->list_members(b, -1, collect, &c, err, sizeof(err)), -EBADMSG);
	assert_contains(err, "UFM GET /ufmRest/resources/pkeys?guids_data=true: malformed");
	assert_int_equal(c.n, 0); /* nothing reported from a bad body */
	fault("{\"endpoint\":\"version\",\"kind\":\"malformed\"}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EBADMSG);
	assert_contains(err, "malformed JSON");
	/* well-formed JSON of the wrong shape */
	fault_body("list", "[\"0x2fb\"]");
	assert_int_equal(ops->list_members(b, -1, collect, &c, err, sizeof(err)), -EBADMSG);
	assert_contains(err, "keyed by PKey");
	fault_body("list", "{\"0x2fb\":{\"guids\":[{\"guid\":\"946dae03005975c8\"},"
			   "{\"guid\":\"xyz\"}]}}");
	assert_int_equal(ops->list_members(b, -1, collect, &c, err, sizeof(err)), -EBADMSG);
	assert_contains(err, "\"0x2fb\".guids[1].guid 'xyz' is not a GUID");
	assert_int_equal(c.n, 0);
	fault_body("version", "{\"opensm\":\"5.20\"}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EBADMSG);
	assert_contains(err, "ufm_release_version");
	ops->fini(b);
}

static void test_timeout_latency(void **state)
{
	struct ibvf_sm_backend *b, *patient;
	char desc[64];
	double t0;

	(void)state;
	b = backend(&sim, "{\"timeout_ms\":500,\"connect_timeout_ms\":500}");
	fault("{\"endpoint\":\"version\",\"kind\":\"latency\",\"latency_ms\":3000}");
	t0 = now_ms();
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -ETIMEDOUT);
	printf("# timeout_ms 500 against 3000 ms latency: failed after %.0f ms\n", now_ms() - t0);
	assert_contains(err, "UFM GET /ufmRest/app/ufm_version: timed out (timeout_ms 500)");
	/* global latency from the config call applies too */
	assert_int_equal(ufm_sim_config(&sim, "{\"latency_ms\":3000}"), 0);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -ETIMEDOUT);
	assert_int_equal(ufm_sim_config(&sim, "{\"latency_ms\":0}"), 0);
	/* latency well below the (default 30 s) timeout is fine */
	patient = backend(&sim, NULL);
	fault("{\"endpoint\":\"version\",\"kind\":\"latency\",\"latency_ms\":300}");
	assert_int_equal(ops->validate(patient, desc, sizeof(desc), err, sizeof(err)), 0);
	ops->fini(patient);
	ops->fini(b);
}

static void test_timeout_slow_body(void **state)
{
	struct ibvf_sm_backend *b, *patient;
	struct coll c = {0};
	char desc[64];

	(void)state;
	b = backend(&sim, "{\"timeout_ms\":500}");
	fault("{\"endpoint\":\"version\",\"kind\":\"slow_body\",\"slow_ms\":3000}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -ETIMEDOUT);
	assert_contains(err, "timed out");
	ops->fini(b);
	/* a slow body that ends in time is read whole */
	assert_int_equal(ufm_sim_ctl(&sim, "POST", "/_sim/state",
				     "{\"0xa5\":{\"guids\":[{\"guid\":\"0002c90300001001\"},"
				     "{\"guid\":\"0002c90300001002\"},{\"guid\":"
				     "\"0002c90300001003\",\"membership\":\"limited\"}]}}",
				     NULL),
			 200);
	patient = backend(&sim, NULL);
	fault("{\"endpoint\":\"list\",\"kind\":\"slow_body\",\"slow_ms\":500}");
	assert_int_equal(ops->list_members(patient, -1, collect, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.m[2].membership, IBVF_MEMBER_LIMITED);
	ops->fini(patient);
}

static void test_connection_refused(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	struct ibvf_sm_backend *b;
	char extra[64], desc[64];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)state;
	/* a port that was free a moment ago and has no listener */
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	snprintf(extra, sizeof(extra), "{\"port\":%d}", ntohs(a.sin_port));
	b = backend(&sim, extra);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -ECONNREFUSED);
	assert_contains(err, "UFM GET /ufmRest/app/ufm_version: ");
	ops->fini(b);
}

/* --------------------------------------------------------- GUID caps -- */

static struct ibvf_sm_member *many(size_t n, uint64_t base)
{
	struct ibvf_sm_member *m = calloc(n, sizeof(*m));

	assert_non_null(m);
	for (size_t i = 0; i < n; i++) {
		m[i].guid = base + i;
		m[i].membership = IBVF_MEMBER_FULL;
	}
	return m;
}

static void test_guid_cap(void **state)
{
	struct ibvf_sm_member *m = many(250, 0x0002c90300100000ull);
	uint64_t g[250];
	struct ibvf_sm_backend *b = backend(&sim, NULL), *chunked;

	(void)state;
	for (size_t i = 0; i < 250; i++)
		g[i] = m[i].guid;
	assert_int_equal(ufm_sim_config(&sim, "{\"max_guids_per_request\":100}"), 0);
	assert_int_equal(ops->add_members(b, PK, m, 250, NULL, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "UFM POST /ufmRest/resources/pkeys: HTTP 400: "
				 "too many GUIDs in one request: 250 > 100");
	assert_int_equal(sim_pkey_size("0xa5"), 0);
	/* with the backend's own cap the same add goes through in 3 calls */
	chunked = backend(&sim, "{\"max_guids_per_request\":100}");
	assert_int_equal(ops->add_members(chunked, PK, m, 250, NULL, err, sizeof(err)), 0);
	assert_int_equal(ufm_sim_calls(&sim, "add"), 4);
	assert_int_equal(sim_pkey_size("0xa5"), 250);
	assert_int_equal(ops->remove_members(chunked, PK, g, 250, err, sizeof(err)), 0);
	/* at most 64 GUIDs in one DELETE path */
	assert_int_equal(ufm_sim_calls(&sim, "delete"), 4);
	assert_int_equal(sim_pkey_size("0xa5"), 0);
	/* a failure after the first chunk says how far it got */
	fault("{\"endpoint\":\"add\",\"kind\":\"pass\",\"count\":1}");
	fault("{\"endpoint\":\"add\",\"kind\":\"status\",\"status\":503,\"count\":1}");
	assert_int_equal(ops->add_members(chunked, PK, m, 250, NULL, err, sizeof(err)), -EAGAIN);
	assert_contains(err, "100 of 250 GUIDs were sent before");
	assert_contains(err, "HTTP 503");
	ops->fini(chunked);
	ops->fini(b);
	free(m);
}

/* A 10,000-GUID add: one call, body checked byte for byte. */
static void test_add_10000(void **state)
{
	const size_t n = 10000;
	struct ibvf_sm_member *m = many(n, 0x0002c90300200000ull);
	size_t cap = 128 + n * (19 + 10), off = 0;
	char *want = malloc(cap);
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	struct coll c = {0};
	double t0, t_add, t_list;

	(void)state;
	assert_non_null(want);
	for (size_t i = 0; i < n; i += 2)
		m[i].membership = IBVF_MEMBER_LIMITED;
	/* one POST per membership: the limited half goes last */
	off += snprintf(want + off, cap - off, "{\"pkey\":\"0x00A5\",\"guids\":[");
	for (size_t i = 0; i < n; i += 2)
		off += snprintf(want + off, cap - off, "%s\"%016llx\"", i ? "," : "",
				(unsigned long long)m[i].guid);
	off += snprintf(want + off, cap - off,
			"],\"membership\":\"limited\",\"index0\":true,\"ip_over_ib\":true}");
	assert_true(off < cap);

	t0 = now_ms();
	assert_int_equal(ops->add_members(b, PK, m, n, &flags_on, err, sizeof(err)), 0);
	t_add = now_ms() - t0;
	assert_int_equal(ufm_sim_calls(&sim, "add"), 2);
	json_decref(expect_request("POST", "/ufmRest/resources/pkeys", want));
	assert_int_equal(sim_pkey_size("0xa5"), (long)n);
	t0 = now_ms();
	assert_int_equal(ops->list_members(b, PK, collect, &c, err, sizeof(err)), 0);
	t_list = now_ms() - t0;
	assert_int_equal(c.n, n);
	printf("# 10,000-GUID add over HTTPS: %.1f ms (body %zu bytes); list back: %.1f ms\n",
	       t_add, strlen(want), t_list);
	ops->fini(b);
	free(want);
	free(m);
}

/* ------------------------------------------------------------------- TLS -- */

static void test_tls_wrong_ca(void **state)
{
	struct ibvf_sm_backend *b;
	char extra[2 * PATH_MAX], desc[64];

	(void)state;
	snprintf(extra, sizeof(extra), "{\"ca_file\":\"%s\"}", sim.other_ca_file);
	b = backend(&sim, extra);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EKEYREJECTED);
	assert_contains(err, "UFM GET /ufmRest/app/ufm_version: ");
	assert_contains(err, "certificate");
	ops->fini(b);
	/* no CA configured: the system store does not know the test CA either */
	b = backend(&sim, "{\"ca_file\":null}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EKEYREJECTED);
	ops->fini(b);
	assert_int_equal(ufm_sim_calls(&sim, "version"), 0);
}

static void test_tls_ca_pem(void **state)
{
	struct ibvf_sm_backend *b;
	char pem[8192], desc[128], *extra;
	FILE *f = fopen(sim.ca_file, "r");
	size_t n;
	json_t *x;

	(void)state;
	assert_non_null(f);
	n = fread(pem, 1, sizeof(pem) - 1, f);
	fclose(f);
	pem[n] = '\0';
	/* what UFM_CERTIFICATE maps to (daemon/config/config.c apply_env) */
	x = json_pack("{s:s,s:n}", "ca_pem", pem, "ca_file");
	extra = json_dumps(x, JSON_COMPACT);
	json_decref(x);
	b = backend(&sim, extra);
	free(extra);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	ops->fini(b);
}

static void test_tls_host_name(void **state)
{
	struct ibvf_sm_backend *b;
	char desc[256];

	(void)state;
	/* the server certificate names only ufm.invalid; we connect to 127.0.0.1 */
	b = backend(&sim_badname, NULL);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EKEYREJECTED);
	assert_contains(err, "127.0.0.1");
	ops->fini(b);
	/* insecure mode: accepted, with a warning in the description */
	b = backend(&sim_badname, "{\"ca_file\":null,\"insecure_skip_verify\":true}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	assert_contains(desc, "WARNING: TLS peer verification is off (insecure_skip_verify)");
	ops->fini(b);
}

static void test_tls_insecure_wrong_ca(void **state)
{
	struct ibvf_sm_backend *b;
	char desc[256];

	(void)state;
	b = backend(&sim, "{\"ca_file\":null,\"insecure_skip_verify\":true}");
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	assert_contains(desc, ufm_version);
	assert_contains(desc, " at https://127.0.0.1:");
	assert_contains(desc, "WARNING");
	ops->fini(b);
}

static void test_tls_client_cert(void **state)
{
	struct ibvf_sm_backend *b;
	char extra[3 * PATH_MAX], desc[128];
	json_t *r;
	int ret;

	(void)state;
	assert_int_equal(ufm_sim_config(&sim, "{\"require_client_cert\":true}"), 0);
	b = backend(&sim, NULL);
	ret = ops->validate(b, desc, sizeof(desc), err, sizeof(err));
	/* TLS 1.3 reports the refused handshake on the first read: -ECONNRESET */
	if (ret != -EPROTO && ret != -ECONNRESET)
		fail_msg("without a client certificate: %d %s", ret, err);
	assert_contains(err, "UFM GET /ufmRest/app/ufm_version: ");
	ops->fini(b);
	snprintf(extra, sizeof(extra), "{\"client_cert\":\"%s\",\"client_key\":\"%s\"}",
		 sim.client_cert, sim.client_key);
	b = backend(&sim, extra);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	r = find_request("GET", "/ufmRest/app/ufm_version");
	assert_string_equal(jstr(r, "client_cert"), "ibvf-client");
	json_decref(r);
	ops->fini(b);
}

static void test_plain_http(void **state)
{
	struct ibvf_sm_backend *b = backend(&sim_plain, NULL);
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	char desc[256];

	(void)state;
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	assert_contains(desc, "at http://127.0.0.1:");
	assert_contains(desc, "WARNING: plain HTTP");
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), 0);
	ops->fini(b);
	/* https against a plain HTTP server fails cleanly */
	b = backend(&sim_plain, "{\"scheme\":\"https\"}");
	assert_true(ops->validate(b, desc, sizeof(desc), err, sizeof(err)) < 0);
	assert_contains(err, "UFM GET /ufmRest/app/ufm_version: ");
	ops->fini(b);
}

/*
 * The simulator itself: latency is per request and requests run in parallel
 * (the daemon's batching tests rely on it); counted per endpoint.
 */
static void test_sim_parallel_latency(void **state)
{
	enum { N = 8 };
	CURLM *multi = curl_multi_init();
	CURL *e[N];
	char url[128];
	json_t *st = NULL;
	int running = 1;

	(void)state;
	assert_non_null(multi);
	assert_int_equal(ufm_sim_config(&sim_plain, "{\"latency_ms\":500}"), 0);
	snprintf(url, sizeof(url), "%s/ufmRest/app/ufm_version", sim_plain.base_url);
	for (int i = 0; i < N; i++) {
		e[i] = curl_easy_init();
		assert_non_null(e[i]);
		curl_easy_setopt(e[i], CURLOPT_URL, url);
		curl_easy_setopt(e[i], CURLOPT_USERPWD, USER ":" PASSWORD);
		curl_easy_setopt(e[i], CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(e[i], CURLOPT_TIMEOUT_MS, 20000L);
		curl_multi_add_handle(multi, e[i]);
	}
	while (running) {
		assert_int_equal(curl_multi_perform(multi, &running), CURLM_OK);
		if (running)
			curl_multi_poll(multi, NULL, 0, 100, NULL);
	}
	for (int i = 0; i < N; i++) {
		long code = 0;

		curl_easy_getinfo(e[i], CURLINFO_RESPONSE_CODE, &code);
		assert_int_equal(code, 200);
		curl_multi_remove_handle(multi, e[i]);
		curl_easy_cleanup(e[i]);
	}
	curl_multi_cleanup(multi);
	assert_int_equal(ufm_sim_ctl(&sim_plain, "GET", "/_sim/stats", NULL, &st), 200);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(st, "calls"), "version")), N);
	/* all N were inside the simulator at once (each sleeps 500 ms) */
	assert_int_equal(json_integer_value(json_object_get(st, "max_concurrent")), N);
	/* the simulator counts a request out after its reply is written, so the
	 * client may see the last reply first: poll (bounded) until it drains */
	for (int i = 0; i < 100 && json_integer_value(json_object_get(st, "in_flight")); i++) {
		json_decref(st);
		usleep(50 * 1000);
		assert_int_equal(ufm_sim_ctl(&sim_plain, "GET", "/_sim/stats", NULL, &st), 200);
	}
	assert_int_equal(json_integer_value(json_object_get(st, "in_flight")), 0);
	json_decref(st);
}

/* ------------------------------------------------ UFM's own rules (issue 16) -- */

/* Item 2: index0 true unless the backend's config (or the caller's flags) say otherwise. */
static void test_index0_default(void **state)
{
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	json_t *v;

	(void)state;
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), 0);
	v = sim_get("0xa5", "0002c90300001001", "index0");
	assert_true(json_is_true(v));
	json_decref(v);
	ops->fini(b);
	b = backend(&sim, "{\"index0\":false,\"ip_over_ib\":false}");
	assert_int_equal(ops->add_members(b, 0xa6, m, 1, NULL, err, sizeof(err)), 0);
	json_decref(
		expect_request("POST", "/ufmRest/resources/pkeys",
			       "{\"pkey\":\"0x00A6\",\"guids\":[\"0002c90300001001\"],"
			       "\"membership\":\"full\",\"index0\":false,\"ip_over_ib\":false}"));
	ops->fini(b);
}

/* Item 7: an existing partition keeps its ip_over_ib; ibvf's flag only creates. */
static void test_ip_over_ib_kept(void **state)
{
	const struct ibvf_sm_member m[] = {{0x0002c90300001002ull, IBVF_MEMBER_FULL}};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	json_t *v;

	(void)state;
	set_state("{\"0xa5\":{\"partition\":\"tenant_a\",\"ip_over_ib\":false,"
		  "\"guids\":[{\"guid\":\"0002c90300001001\"}]}}");
	assert_int_equal(ops->add_members(b, PK, m, 1, &flags_on, err, sizeof(err)), 0);
	json_decref(
		expect_request("POST", "/ufmRest/resources/pkeys",
			       "{\"pkey\":\"0x00A5\",\"guids\":[\"0002c90300001002\"],"
			       "\"membership\":\"full\",\"index0\":true,\"ip_over_ib\":false}"));
	v = sim_get("0xa5", NULL, "ip_over_ib");
	assert_true(json_is_false(v));
	json_decref(v);
	ops->fini(b);
}

/* Item 1 (repair): a member that is full but should be limited is re-added limited. */
static void test_membership_repaired(void **state)
{
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_LIMITED}};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	json_t *v;

	(void)state;
	set_state("{\"0xa5\":{\"guids\":[{\"guid\":\"0002c90300001001\",\"membership\":\"full\","
		  "\"index0\":true}]}}");
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), 0);
	v = sim_get("0xa5", "0002c90300001001", "membership");
	assert_string_equal(json_string_value(v), "limited");
	json_decref(v);
	/* already so: nothing sent again */
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), 0);
	assert_int_equal(ufm_sim_calls(&sim, "add"), 1);
	ops->fini(b);
}

/* Item 3: GUIDs or partitions already gone are removed; an admin's last member is kept. */
static void test_remove_gone_and_admin_partition(void **state)
{
	const uint64_t g1 = 0x0002c90300001001ull, g2 = 0x0002c90300001002ull;
	const uint64_t both[] = {g1, g2};
	struct ibvf_sm_backend *b = backend(&sim, NULL);

	(void)state;
	/* no such partition (UFM removed it with its last member): success, nothing sent */
	assert_int_equal(ops->remove_members(b, 0xb1, &g1, 1, err, sizeof(err)), 0);
	/* the partition goes between our read and the DELETE: 404 is success too */
	set_state("{\"0xb1\":{\"guids\":[{\"guid\":\"0002c90300001001\"},"
		  "{\"guid\":\"0002c90300001003\"}]}}");
	fault_body("get_pkey", "{\"partition\":\"api_pkey_0xb1\",\"ip_over_ib\":true,"
			       "\"guids\":[{\"guid\":\"0002c90300001001\"},"
			       "{\"guid\":\"0002c90300001003\"}]}");
	set_state("{}");
	assert_int_equal(ops->remove_members(b, 0xb1, &g1, 1, err, sizeof(err)), 0);
	assert_int_equal(ufm_sim_calls(&sim, "delete"), 1);
	/* an administrator's partition: its last members are not removed */
	set_state("{\"0xb2\":{\"partition\":\"tenant_a\",\"guids\":[{\"guid\":"
		  "\"0002c90300001001\"},{\"guid\":\"0002c90300001002\"}]}}");
	assert_int_equal(ops->remove_members(b, 0xb2, both, 2, err, sizeof(err)), -EPERM);
	assert_contains(err, "PKey 0x00b2");
	assert_contains(err, "'tenant_a'");
	assert_int_equal(sim_pkey_size("0xb2"), 2);
	assert_int_equal(ufm_sim_calls(&sim, "delete"), 1);
	/* one of two is fine */
	assert_int_equal(ops->remove_members(b, 0xb2, &g1, 1, err, sizeof(err)), 0);
	assert_int_equal(sim_pkey_size("0xb2"), 1);
	ops->fini(b);
}

/* Item 8: 0x7fff is refused before anything is sent. */
static void test_pkey_7fff_refused(void **state)
{
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	struct ibvf_sm_backend *b = backend(&sim, NULL);

	(void)state;
	assert_int_equal(ops->add_members(b, 0x7fff, m, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_contains(err, "0x7fff is UFM's management");
	assert_int_equal(ops->remove_members(b, 0x7fff, &m[0].guid, 1, err, sizeof(err)), -EINVAL);
	assert_int_equal(ufm_sim_calls(&sim, "add") + ufm_sim_calls(&sim, "get_pkey") +
				 ufm_sim_calls(&sim, "delete"),
			 0);
	ops->fini(b);
}

/* Item 6: a client certificate mapped to a user, no password, no token. */
static void test_certificate_only(void **state)
{
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	struct ibvf_sm_backend *b;
	char extra[3 * PATH_MAX], desc[256];
	json_t *r;

	(void)state;
	assert_int_equal(ufm_sim_config(&sim, "{\"cert_users\":[\"ibvf-client\"]}"), 0);
	snprintf(extra, sizeof(extra),
		 "{\"auth\":\"certificate\",\"client_cert\":\"%s\",\"client_key\":\"%s\","
		 "\"username\":null,\"password_file\":null}",
		 sim.client_cert, sim.client_key);
	b = backend(&sim, extra);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), 0);
	assert_contains(desc, "auth certificate");
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), 0);
	r = expect_request("POST", "/ufmRest/resources/pkeys", NULL);
	assert_null(header(r, "Authorization"));
	assert_string_equal(jstr(r, "client_cert"), "ibvf-client");
	json_decref(r);
	ops->fini(b);
	/* the same certificate, not mapped to a user: 401 */
	assert_int_equal(ufm_sim_config(&sim, "{\"cert_users\":[]}"), 0);
	b = backend(&sim, extra);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EACCES);
	ops->fini(b);
}

/* Issue 14: validate reads what the writes change, so "ready" does not flap. */
static void test_validate_as_strong_as_writes(void **state)
{
	const struct ibvf_sm_member m[] = {{0x0002c90300001001ull, IBVF_MEMBER_FULL}};
	struct ibvf_sm_backend *b = backend(&sim, NULL);
	char desc[256];

	(void)state;
	/* UFM's PKey service fails while ufm_version still answers */
	fault("{\"endpoint\":\"get_pkey\",\"kind\":\"status\",\"status\":503,\"count\":0}");
	assert_int_equal(ops->add_members(b, PK, m, 1, NULL, err, sizeof(err)), -EAGAIN);
	assert_int_equal(ops->validate(b, desc, sizeof(desc), err, sizeof(err)), -EAGAIN);
	assert_contains(err, "UFM GET /ufmRest/resources/pkeys/0x7fff: HTTP 503");
	ops->fini(b);
}

/*
 * Item 4: with last_updated, a change waits (bounded) until UFM shows the
 * previous one applied. Prints what it costs for back-to-back changes.
 */
static void test_last_updated_wait(void **state)
{
	struct ibvf_sm_member m[4];
	struct ibvf_sm_backend *b;
	double t0, t_wait, t_nowait, t_bound;

	(void)state;
	for (size_t i = 0; i < 4; i++)
		m[i] = (struct ibvf_sm_member){0x0002c90300001001ull + i, IBVF_MEMBER_FULL};
	/* UFM applies a change 300 ms after answering */
	assert_int_equal(ufm_sim_config(&sim, "{\"apply_ms\":300}"), 0);
	b = backend(&sim, "{\"change_wait_ms\":2000}");
	t0 = now_ms();
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(
			ops->add_members(b, (uint16_t)(PK + i), &m[i], 1, NULL, err, sizeof(err)),
			0);
	t_wait = now_ms() - t0;
	ops->fini(b);
	if (!has_last_updated) {
		/* this UFM has no last_updated: one probe, then no waiting */
		assert_int_equal(ufm_sim_calls(&sim, "last_updated"), 0);
		assert_int_equal(count_requests("GET", "/ufmRest/resources/pkeys/last_updated"), 1);
		assert_true(t_wait < 600);
		printf("# last_updated: absent on this profile; 4 adds %.0f ms\n", t_wait);
		return;
	}
	/* changes 2..4 each waited for the previous one (>= 3 x ~300 ms) */
	assert_true(t_wait >= 800);
	assert_true(ufm_sim_calls(&sim, "last_updated") >= 7);
	/* off: no wait, no last_updated calls */
	assert_int_equal(ufm_sim_reset(&sim), 0);
	assert_int_equal(ufm_sim_config(&sim, "{\"apply_ms\":300}"), 0);
	b = backend(&sim, "{\"change_wait_ms\":0}");
	t0 = now_ms();
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(
			ops->add_members(b, (uint16_t)(PK + i), &m[i], 1, NULL, err, sizeof(err)),
			0);
	t_nowait = now_ms() - t0;
	ops->fini(b);
	assert_int_equal(ufm_sim_calls(&sim, "last_updated"), 0);
	/* bounded: a UFM that never shows the change costs change_wait_ms per change */
	assert_int_equal(ufm_sim_reset(&sim), 0);
	assert_int_equal(ufm_sim_config(&sim, "{\"apply_ms\":60000}"), 0);
	b = backend(&sim, "{\"change_wait_ms\":300}");
	t0 = now_ms();
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(
			ops->add_members(b, (uint16_t)(PK + i), &m[i], 1, NULL, err, sizeof(err)),
			0);
	t_bound = now_ms() - t0;
	ops->fini(b);
	assert_true(t_bound >= 300 && t_bound < 1500);
	printf("# last_updated wait, 4 back-to-back adds, UFM applying in 300 ms: %.0f ms "
	       "(off: %.0f ms); never applied, bound 300 ms, 2 adds: %.0f ms\n",
	       t_wait, t_nowait, t_bound);
}

/*
 * A change with no previous one to wait for reads last_updated beside its
 * POST, not before it (issue 17: one UFM round trip less for a burst from
 * idle); that read is the next change's baseline, so a change right after
 * still waits until UFM shows the first applied. Counts and overlaps of the
 * simulator's request log, not times.
 */
static void test_last_updated_beside(void **state)
{
	struct ibvf_sm_member m1 = {0x0002c90300002001ull, IBVF_MEMBER_FULL},
			      m2 = {0x0002c90300002002ull, IBVF_MEMBER_FULL},
			      m3 = {0x0002c90300002003ull, IBVF_MEMBER_FULL};
	struct ibvf_sm_backend *b;
	struct coll c = {0};
	json_t *lu, *post;
	double lu0, lu1, p0, p1;

	(void)state;
	if (!has_last_updated) {
		printf("# SKIP last_updated beside a change: this profile has no last_updated\n");
		skip();
	}
	/* the partition exists; a fresh backend has no change pending */
	b = backend(&sim, "{\"change_wait_ms\":0}");
	assert_int_equal(ops->add_members(b, PK, &m1, 1, NULL, err, sizeof(err)), 0);
	ops->fini(b);
	assert_int_equal(ufm_sim_ctl(&sim, "POST", "/_sim/reset", "{\"keep_state\":true}", NULL),
			 200);
	assert_int_equal(ufm_sim_config(&sim, "{\"apply_ms\":300,\"latency_ms\":150}"), 0);
	b = backend(&sim, "{\"change_wait_ms\":2000}");
	/* the list stands for the add's partition read (docs/ufm.md) */
	assert_int_equal(ops->list_members(b, -1, collect, &c, err, sizeof(err)), 0);
	assert_int_equal(ops->add_members(b, PK, &m2, 1, NULL, err, sizeof(err)), 0);
	if (ufm_sim_calls(&sim, "get_pkey")) {
		printf("# last_updated beside a change: not reached on this profile (its list "
		       "does not stand for the partition read)\n");
	} else {
		assert_int_equal(ufm_sim_calls(&sim, "last_updated"), 1);
		lu = find_request("GET", "/ufmRest/resources/pkeys/last_updated");
		post = find_request("POST", "/ufmRest/resources/pkeys");
		lu0 = json_real_value(json_object_get(lu, "t_start"));
		lu1 = json_real_value(json_object_get(lu, "t_end"));
		p0 = json_real_value(json_object_get(post, "t_start"));
		p1 = json_real_value(json_object_get(post, "t_end"));
		json_decref(lu);
		json_decref(post);
		/* in flight together: the read did not hold the POST back */
		assert_true(lu0 < p1 && p0 < lu1);
		printf("# last_updated beside the POST: read %.0f-%.0f ms, POST %.0f-%.0f ms\n",
		       0.0, (lu1 - lu0) * 1000, (p0 - lu0) * 1000, (p1 - lu0) * 1000);
	}
	/* the next change, at once: its baseline is the value before m2's change */
	assert_int_equal(ops->add_members(b, (uint16_t)(PK + 1), &m3, 1, NULL, err, sizeof(err)),
			 0);
	ops->fini(b);
	/* the beside/side reads, then at least one poll while UFM had not applied */
	assert_true(ufm_sim_calls(&sim, "last_updated") >= 3);
}

/* The simulator itself is as strict as UFM (issue 16, "The simulator must behave like UFM"). */
static long raw_post(const char *path, const char *ctype, const char *body)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char url[256], hdr[128];
	long code = 0;

	snprintf(url, sizeof(url), "%s%s", sim_plain.base_url, path);
	snprintf(hdr, sizeof(hdr), "Content-Type: %s", ctype);
	h = curl_slist_append(h, hdr);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_USERPWD, USER ":" PASSWORD);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return code;
}

static void test_sim_strict(void **state)
{
	const char *add = "/ufmRest/resources/pkeys";

	(void)state;
	assert_int_equal(raw_post(add, "text/plain",
				  "{\"pkey\":\"0xa5\",\"guids\":"
				  "[\"0002c90300001001\"]}"),
			 400);
	assert_int_equal(raw_post(add, "application/json",
				  "{\"pkey\":\"0xa5\",\"guids\":"
				  "[\"0002C90300001001\"]}"),
			 400);
	assert_int_equal(raw_post(add, "application/json",
				  "{\"pkey\":\"0x7fff\",\"guids\":"
				  "[\"0002c90300001001\"]}"),
			 400);
	assert_int_equal(raw_post(add, "application/json",
				  "{\"pkey\":\"0xa5\",\"guids\":"
				  "[\"0x0002c90300001001\"]}"),
			 200);
	/* removal from a missing PKey: 404 */
	assert_int_equal(raw_post("/ufmRest/actions/remove_guids_from_pkey", "application/json",
				  "{\"pkey\":\"0xa6\",\"guids\":[\"0002c90300001001\"]}"),
			 404);
}

int main(void)
{
	const char *missing = ufm_sim_missing();
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup(f, reset_sim)
		T(test_validate_basic),
		T(test_validate_token),
		T(test_password_inline),
		T(test_wrong_password),
		T(test_wrong_token),
		T(test_add_body_full),
		T(test_add_body_limited_and_mixed),
		T(test_remove_body),
		T(test_token_paths),
		T(test_bad_input_sends_nothing),
		T(test_duplicates_sent_once),
		T(test_list_roundtrip),
		T(test_list_mixed_case),
		T(test_empty_object),
		T(test_fault_status),
		T(test_fault_reset),
		T(test_fault_malformed),
		T(test_timeout_latency),
		T(test_timeout_slow_body),
		T(test_connection_refused),
		T(test_guid_cap),
		T(test_add_10000),
		T(test_tls_wrong_ca),
		T(test_tls_ca_pem),
		T(test_tls_host_name),
		T(test_tls_insecure_wrong_ca),
		T(test_tls_client_cert),
		T(test_plain_http),
		T(test_sim_parallel_latency),
		T(test_index0_default),
		T(test_ip_over_ib_kept),
		T(test_membership_repaired),
		T(test_remove_gone_and_admin_partition),
		T(test_pkey_7fff_refused),
		T(test_certificate_only),
		T(test_validate_as_strong_as_writes),
		T(test_last_updated_wait),
		T(test_last_updated_beside),
		T(test_sim_strict),
#undef T
	};

	if (missing)
		return ufm_sim_skip(missing);
	ops = &ufm_ops;
	return cmocka_run_group_tests_name("sm_ufm_sim", tests, group_setup, group_teardown);
}
