// SPDX-License-Identifier: MIT
/*
 * daemon/cluster/etcd_client.c against a real 3-member etcd cluster on
 * loopback (tests/lab/cluster/etcd_lab.c): every call, /v3beta, a timeout
 * on an endpoint that never answers, failover when a member and when the
 * leader is killed, TLS with client certificates, basic auth from files.
 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "metrics.h"

static int failures, checks;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (cond) {                                                                        \
			printf("ok %d - ", checks);                                                \
		} else {                                                                           \
			failures++;                                                                \
			printf("not ok %d - (%s:%d) ", checks, __FILE__, __LINE__);                \
		}                                                                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		err[0] = '\0';                                                                     \
		fflush(stdout);                                                                    \
	} while (0)

static struct etcd_lab lab;
static char err[IBVF_ERR_LEN];

static struct etcd_client *client(const char *const *eps, size_t n, uint32_t timeout_ms)
{
	struct etcd_client_opts o = {.endpoints = eps, .n_endpoints = n, .timeout_ms = timeout_ms};
	struct etcd_client *c = NULL;
	int ret = etcd_client_new(&o, &c, err, sizeof(err));

	if (ret)
		printf("# etcd_client_new: %s\n", err);
	return c;
}

static bool get_value(struct etcd_client *c, const char *key, const char *want)
{
	struct etcd_range_result r;
	bool ok;

	if (etcd_range(c, key, 0, NULL, 0, 0, false, &r, err, sizeof(err))) {
		printf("# range %s: %s\n", key, err);
		return false;
	}
	ok = want ? r.n_kvs == 1 && !strcmp(r.kvs[0].value, want) : r.n_kvs == 0;
	etcd_range_result_free(&r);
	return ok;
}

static void test_kv(struct etcd_client *c)
{
	struct etcd_range_result r;
	struct etcd_txn_result t;
	char end[64];
	int64_t rev = 0;
	int n;

	CHECK(!etcd_put(c, "/t/a", 0, "1", 0, 0, &rev, err, sizeof(err)) && rev > 0,
	      "put /t/a (revision %lld) %s", (long long)rev, err);
	CHECK(!etcd_put(c, "/t/b", 0, "two\0bytes", 9, 0, NULL, err, sizeof(err)), "put binary");
	CHECK(!etcd_put(c, "/t/c", 0, "3", 0, 0, NULL, err, sizeof(err)), "put /t/c");
	CHECK(get_value(c, "/t/a", "1"), "range one key");
	CHECK(get_value(c, "/t/none", NULL), "range of an absent key is empty");
	n = etcd_prefix_end("/t/", 3, end, sizeof(end));
	CHECK(n == 3 && !memcmp(end, "/t0", 3), "prefix end of /t/");
	CHECK(!etcd_range(c, "/t/", 0, end, (size_t)n, 0, false, &r, err, sizeof(err)) &&
		      r.n_kvs == 3 && r.count == 3 && r.kvs[1].value_len == 9 &&
		      !memcmp(r.kvs[1].value, "two\0bytes", 9) && r.kvs[0].create_revision == rev,
	      "prefix range: 3 keys in order, bytes kept, revisions as numbers");
	etcd_range_result_free(&r);
	CHECK(!etcd_range(c, "/t/", 0, end, (size_t)n, 2, true, &r, err, sizeof(err)) &&
		      r.n_kvs == 2 && r.more && r.count == 3 && r.kvs[0].value_len == 0,
	      "limit 2, keys only: more=true, count 3");
	etcd_range_result_free(&r);

	/* create-if-absent: the shape of a block claim */
	struct etcd_cmp absent = {.key = "/t/claim",
				  .target = ETCD_CMP_CREATE,
				  .result = ETCD_CMP_EQUAL,
				  .number = 0};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = "/t/claim", .value = "node-a"};
	struct etcd_op put_b = {.type = ETCD_OP_PUT, .key = "/t/claim", .value = "node-b"};
	struct etcd_op get = {.type = ETCD_OP_RANGE, .key = "/t/claim"};

	CHECK(!etcd_txn(c, &absent, 1, &put, 1, &get, 1, &t, err, sizeof(err)) && t.succeeded &&
		      t.n_responses == 1,
	      "txn create-if-absent succeeds on an absent key %s", err);
	etcd_txn_result_free(&t);
	CHECK(!etcd_txn(c, &absent, 1, &put_b, 1, &get, 1, &t, err, sizeof(err)) && !t.succeeded &&
		      t.n_responses == 1 && t.responses[0].n_kvs == 1 &&
		      !strcmp(t.responses[0].kvs[0].value, "node-a"),
	      "second create-if-absent fails (no \"succeeded\" in the answer) and reads the owner");
	etcd_txn_result_free(&t);
	CHECK(get_value(c, "/t/claim", "node-a"), "the loser wrote nothing");

	/* a compare over a range: "no key in [/t/a, /t/d)" is false, "[/u/, /u0)" true */
	struct etcd_cmp none_t = {.key = "/t/a",
				  .range_end = "/t/d",
				  .target = ETCD_CMP_CREATE,
				  .result = ETCD_CMP_EQUAL};
	struct etcd_cmp none_u = {.key = "/u/",
				  .range_end = "/u0",
				  .target = ETCD_CMP_CREATE,
				  .result = ETCD_CMP_EQUAL};

	CHECK(!etcd_txn(c, &none_t, 1, NULL, 0, NULL, 0, &t, err, sizeof(err)) && !t.succeeded,
	      "range compare over keys that exist fails");
	etcd_txn_result_free(&t);
	CHECK(!etcd_txn(c, &none_u, 1, NULL, 0, NULL, 0, &t, err, sizeof(err)) && t.succeeded,
	      "range compare over an empty range holds");
	etcd_txn_result_free(&t);

	struct etcd_cmp val = {.key = "/t/a",
			       .target = ETCD_CMP_VALUE,
			       .result = ETCD_CMP_EQUAL,
			       .value = "1",
			       .value_len = 1};
	struct etcd_op del = {
		.type = ETCD_OP_DELETE, .key = "/t/", .range_end = end, .range_end_len = (size_t)n};

	CHECK(!etcd_txn(c, &val, 1, &del, 1, NULL, 0, &t, err, sizeof(err)) && t.succeeded,
	      "value compare + delete of a range");
	etcd_txn_result_free(&t);
	CHECK(get_value(c, "/t/a", NULL) && get_value(c, "/t/claim", NULL), "range deleted");
}

static void test_lease(struct etcd_client *c)
{
	int64_t id = 0, ttl = 0;
	int ret;

	CHECK(!etcd_lease_grant(c, 30, 0, &id, &ttl, err, sizeof(err)) && id > 0 && ttl == 30,
	      "lease grant: id %lld ttl %lld %s", (long long)id, (long long)ttl, err);
	CHECK(!etcd_put(c, "/l/hb", 0, "alive", 0, id, NULL, err, sizeof(err)), "put with lease");
	ttl = 0;
	CHECK(!etcd_lease_keepalive(c, id, &ttl, err, sizeof(err)) && ttl == 30,
	      "keepalive renews to 30 s (%lld) %s", (long long)ttl, err);
	CHECK(!etcd_lease_revoke(c, id, err, sizeof(err)), "revoke %s", err);
	CHECK(get_value(c, "/l/hb", NULL), "the lease's key went with it");
	ret = etcd_lease_keepalive(c, id, NULL, err, sizeof(err));
	CHECK(ret == -ENOENT, "keepalive of a revoked lease: -ENOENT (%d: %s)", ret, err);
	ret = etcd_lease_revoke(c, id, err, sizeof(err));
	CHECK(ret == -ENOENT && strstr(err, "lease not found") && strstr(err, "http://127.0.0.1:"),
	      "revoke again: -ENOENT naming the endpoint (%s)", err);
	CHECK(!etcd_lease_grant(c, 1, 0, &id, NULL, err, sizeof(err)), "short lease");
	CHECK(!etcd_put(c, "/l/short", 0, "x", 0, id, NULL, err, sizeof(err)), "put on it");
	/* etcd expires leases on the leader's ticks: up to TTL + a few hundred ms */
	for (int i = 0; i < 60 && !get_value(c, "/l/short", NULL); i++)
		usleep(100000);
	CHECK(get_value(c, "/l/short", NULL), "the key of an expired lease is gone");
}

struct seen {
	int n, stop_at;
	char keys[8][32];
	enum etcd_event_type types[8];
	int64_t mod[8];
};

static int on_event(void *arg, const struct etcd_event *ev)
{
	struct seen *s = arg;

	if (s->n < 8) {
		snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s=%s", ev->kv->key, ev->kv->value);
		s->types[s->n] = ev->type;
		s->mod[s->n] = ev->kv->mod_revision;
	}
	return ++s->n >= s->stop_at;
}

static void test_watch(struct etcd_client *c)
{
	struct seen s = {.stop_at = 3};
	int64_t r1 = 0, next = 0, t0;
	struct etcd_txn_result t;
	struct etcd_op del = {.type = ETCD_OP_DELETE, .key = "/w/x"};
	int ret;

	etcd_put(c, "/w/x", 0, "1", 0, 0, &r1, err, sizeof(err));
	etcd_put(c, "/w/y", 0, "2", 0, 0, NULL, err, sizeof(err));
	etcd_txn(c, NULL, 0, &del, 1, NULL, 0, &t, err, sizeof(err));
	etcd_txn_result_free(&t);
	etcd_put(c, "/wz", 0, "outside", 0, 0, NULL, err, sizeof(err));
	ret = etcd_watch(c, "/w/", 0, "/w0", 0, r1, 5000, on_event, &s, &next, err, sizeof(err));
	CHECK(!ret && s.n == 3 && !strcmp(s.keys[0], "/w/x=1") && !strcmp(s.keys[1], "/w/y=2") &&
		      s.types[2] == ETCD_EVENT_DELETE && !strcmp(s.keys[2], "/w/x=") &&
		      next == s.mod[2] + 1,
	      "watch from a revision: PUT, PUT, DELETE in order, next revision %lld (%d: %s)",
	      (long long)next, ret, ret ? err : "");
	/* no event: the watch ends at its duration */
	s = (struct seen){.stop_at = 1};
	t0 = ibvf_mono_ms();
	ret = etcd_watch(c, "/w/", 0, "/w0", 0, next, 300, on_event, &s, NULL, err, sizeof(err));
	t0 = ibvf_mono_ms() - t0;
	CHECK(!ret && s.n == 0 && t0 >= 250 && t0 < 2000,
	      "watch with nothing new ends after its 300 ms (%lld ms)", (long long)t0);
}

/* A loopback port that accepts connections (kernel backlog) but never answers. */
static int silent_listener(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&a, &l))
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static void test_timeouts(void)
{
	char hang[64], refused[64];
	int port, fd = silent_listener(&port), ret;
	struct etcd_client *c;
	int64_t t0;

	snprintf(hang, sizeof(hang), "http://127.0.0.1:%d", port);
	snprintf(refused, sizeof(refused), "http://127.0.0.1:%d", lab.m[0].peer_port + 0);
	{
		const char *eps[] = {hang};

		c = client(eps, 1, 400);
		t0 = ibvf_mono_ms();
		ret = c ? etcd_put(c, "/x", 0, "1", 0, 0, NULL, err, sizeof(err)) : -1;
		t0 = ibvf_mono_ms() - t0;
		CHECK(ret == -ETIMEDOUT && t0 >= 350 && t0 < 1500 && strstr(err, hang),
		      "an endpoint that never answers: -ETIMEDOUT after the call's 400 ms "
		      "(%lld ms), naming it (%s)",
		      (long long)t0, err);
		etcd_client_free(c);
	}
	{
		const char *eps[] = {hang, lab.urls[1]};
		struct etcd_client_opts o = {.endpoints = eps,
					     .n_endpoints = 2,
					     .timeout_ms = 3000,
					     .attempt_timeout_ms = 300};

		c = NULL;
		etcd_client_new(&o, &c, err, sizeof(err));
		t0 = ibvf_mono_ms();
		ret = c ? etcd_put(c, "/x", 0, "1", 0, 0, NULL, err, sizeof(err)) : -1;
		t0 = ibvf_mono_ms() - t0;
		CHECK(!ret && t0 >= 250 && t0 < 1500 &&
			      !strcmp(etcd_client_endpoint(c), lab.urls[1]),
		      "failover past a silent endpoint after its 300 ms attempt (%lld ms)",
		      (long long)t0);
		t0 = ibvf_mono_ms();
		ret = c ? etcd_put(c, "/x", 0, "2", 0, 0, NULL, err, sizeof(err)) : -1;
		t0 = ibvf_mono_ms() - t0;
		CHECK(!ret && t0 < 250,
		      "the next call goes straight to the endpoint that answered "
		      "(%lld ms)",
		      (long long)t0);
		etcd_client_free(c);
	}
	close(fd);
	/* a port nobody listens on: refused at once */
	fd = silent_listener(&port);
	close(fd);
	snprintf(refused, sizeof(refused), "http://127.0.0.1:%d", port);
	{
		const char *eps[] = {refused};

		c = client(eps, 1, 300);
		ret = c ? etcd_put(c, "/x", 0, "1", 0, 0, NULL, err, sizeof(err)) : -1;
		CHECK(ret == -ECONNREFUSED && strstr(err, refused),
		      "a closed port: -ECONNREFUSED naming it (%d: %s)", ret, err);
		etcd_client_free(c);
	}
}

static void test_api_prefix(void)
{
	const char *eps[] = {lab.urls[2]};
	struct etcd_client_opts o = {.endpoints = eps, .n_endpoints = 1, .api = ETCD_API_V3BETA};
	struct etcd_client *c = NULL;

	etcd_client_new(&o, &c, err, sizeof(err));
	CHECK(c && !etcd_put(c, "/beta", 0, "yes", 0, 0, NULL, err, sizeof(err)) &&
		      get_value(c, "/beta", "yes"),
	      "/v3beta (etcd 3.3, 3.4) %s", err);
	etcd_client_free(c);
}

static void test_config_errors(void)
{
	const char *bad[][1] = {
		{"127.0.0.1:2379"}, {"http://u:p@127.0.0.1:2379"}, {"http://127.0.0.1:2379/v3"}};
	struct etcd_client *c = NULL;

	for (size_t i = 0; i < 3; i++) {
		struct etcd_client_opts o = {.endpoints = bad[i], .n_endpoints = 1};
		int ret = etcd_client_new(&o, &c, err, sizeof(err));

		CHECK(ret == -EINVAL && strstr(err, bad[i][0]), "endpoint \"%s\" refused: %s",
		      bad[i][0], err);
	}
}

static void test_tls(void)
{
	const char *eps[] = {lab.tls_urls[0], lab.tls_urls[1]};
	struct etcd_client_opts o = {.endpoints = eps,
				     .n_endpoints = 2,
				     .timeout_ms = 3000,
				     .ca_file = lab.ca_file,
				     .cert_file = lab.client_cert,
				     .key_file = lab.client_key};
	struct etcd_client *c = NULL;
	char loose[PATH_MAX];
	int ret;

	ret = etcd_client_new(&o, &c, err, sizeof(err));
	CHECK(!ret && !etcd_put(c, "/tls", 0, "ok", 0, 0, NULL, err, sizeof(err)) &&
		      get_value(c, "/tls", "ok"),
	      "https with the CA and a client certificate %s", err);
	etcd_client_free(c);

	o.cert_file = o.key_file = NULL;
	c = NULL;
	etcd_client_new(&o, &c, err, sizeof(err));
	ret = c ? etcd_put(c, "/tls", 0, "no", 0, 0, NULL, err, sizeof(err)) : 0;
	CHECK(ret < 0 && strstr(err, lab.tls_urls[0]) && strstr(err, lab.tls_urls[1]),
	      "no client certificate: refused, both endpoints named (%s)", err);
	etcd_client_free(c);

	o.cert_file = lab.client_cert;
	o.key_file = lab.client_key;
	o.ca_file = lab.other_ca_file;
	c = NULL;
	etcd_client_new(&o, &c, err, sizeof(err));
	ret = c ? etcd_put(c, "/tls", 0, "no", 0, 0, NULL, err, sizeof(err)) : 0;
	CHECK(ret < 0 && strstr(err, lab.tls_urls[0]),
	      "a CA that did not sign the server: "
	      "refused (%s)",
	      err);
	etcd_client_free(c);

	etcd_lab_write_file(&lab, "loose.key", "not a key", 0644, loose, sizeof(loose));
	o.ca_file = lab.ca_file;
	o.key_file = loose;
	c = NULL;
	ret = etcd_client_new(&o, &c, err, sizeof(err));
	CHECK(ret == -EPERM && strstr(err, loose), "a client key readable by others: -EPERM (%s)",
	      err);
	etcd_client_free(c);
}

static void test_failover(void)
{
	struct etcd_client *c = client(lab.urls, 3, 5000);
	int64_t t0;
	int ret, leader;

	etcd_lab_member_stop(&lab, 0, true);
	t0 = ibvf_mono_ms();
	ret = c ? etcd_put(c, "/f", 0, "1", 0, 0, NULL, err, sizeof(err)) : -1;
	CHECK(!ret && strcmp(etcd_client_endpoint(c), lab.urls[0]),
	      "member 0 killed: the call moves on (%lld ms) %s", (long long)(ibvf_mono_ms() - t0),
	      err);
	if (etcd_lab_member_start(&lab, 0, err, sizeof(err)) || etcd_lab_wait_writable(&lab, 10000))
		printf("# member 0 restart: %s\n", err);
	leader = etcd_lab_leader(&lab);
	CHECK(leader >= 0, "a leader: member %d", leader);
	if (leader < 0)
		goto out;
	etcd_lab_member_stop(&lab, leader, true);
	t0 = ibvf_mono_ms();
	ret = etcd_put(c, "/f", 0, "2", 0, 0, NULL, err, sizeof(err));
	t0 = ibvf_mono_ms() - t0;
	CHECK(!ret && get_value(c, "/f", "2"),
	      "leader (member %d) killed: a write succeeds after the election (%lld ms) %s", leader,
	      (long long)t0, err);
	etcd_lab_member_start(&lab, leader, err, sizeof(err));
	/* quorum lost: two members down; the call ends at its timeout naming every endpoint */
	{
		int a = (leader + 1) % 3, b = (leader + 2) % 3;
		struct etcd_client *q = client(lab.urls, 3, 1500);

		etcd_lab_wait_writable(&lab, 10000);
		etcd_lab_member_stop(&lab, a, true);
		etcd_lab_member_stop(&lab, b, true);
		t0 = ibvf_mono_ms();
		ret = q ? etcd_put(q, "/f", 0, "3", 0, 0, NULL, err, sizeof(err)) : -1;
		t0 = ibvf_mono_ms() - t0;
		CHECK(ret == -ETIMEDOUT && t0 < 3000 && strstr(err, lab.urls[a]) &&
			      strstr(err, lab.urls[b]),
		      "quorum lost: -ETIMEDOUT within the call's 1500 ms (%lld ms): %s",
		      (long long)t0, err);
		etcd_lab_member_start(&lab, a, err, sizeof(err));
		etcd_lab_member_start(&lab, b, err, sizeof(err));
		ret = etcd_lab_wait_writable(&lab, 15000);
		CHECK(!ret && !etcd_put(c, "/f", 0, "4", 0, 0, NULL, err, sizeof(err)),
		      "quorum back: the same client writes again, no restart %s", err);
		etcd_client_free(q);
	}
out:
	etcd_client_free(c);
}

static void test_auth(void)
{
	char pw[PATH_MAX], bad[PATH_MAX], loose[PATH_MAX], userf[PATH_MAX];
	struct etcd_client_opts o = {
		.endpoints = lab.urls, .n_endpoints = 3, .timeout_ms = 3000, .user = "root"};
	struct etcd_client *c = NULL;
	int ret;

	CHECK(!etcd_lab_enable_auth(&lab, "s3cret-pw"), "auth enabled (root)");
	etcd_lab_write_file(&lab, "pw", "s3cret-pw\n", 0600, pw, sizeof(pw));
	etcd_lab_write_file(&lab, "bad", "wrong", 0600, bad, sizeof(bad));
	etcd_lab_write_file(&lab, "loose", "s3cret-pw", 0644, loose, sizeof(loose));
	etcd_lab_write_file(&lab, "user", "root\n", 0644, userf, sizeof(userf));

	c = client(lab.urls, 3, 2000);
	ret = c ? etcd_put(c, "/a", 0, "1", 0, 0, NULL, err, sizeof(err)) : 0;
	CHECK(ret == -EACCES && strstr(err, "http://127.0.0.1:"),
	      "no credentials with auth on: -EACCES (%d: %s)", ret, err);
	etcd_client_free(c);

	o.password_file = pw;
	c = NULL;
	ret = etcd_client_new(&o, &c, err, sizeof(err));
	CHECK(!ret && !etcd_put(c, "/a", 0, "1", 0, 0, NULL, err, sizeof(err)) &&
		      get_value(c, "/a", "1"),
	      "user + password_file: authenticated calls %s", err);
	{
		struct seen s = {.stop_at = 1};
		int64_t rev = 0;

		etcd_put(c, "/a", 0, "2", 0, 0, &rev, err, sizeof(err));
		ret = etcd_watch(c, "/a", 0, NULL, 0, rev, 3000, on_event, &s, NULL, err,
				 sizeof(err));
		CHECK(!ret && s.n == 1, "watch with a token (%d: %s)", ret, ret ? err : "");
	}
	{
		/* the lab's tokens expire after 2 s idle (--auth-token-ttl 2) */
		uint64_t before = etcd_client_calls(c);

		sleep(3);
		ret = etcd_put(c, "/a", 0, "3", 0, 0, NULL, err, sizeof(err));
		CHECK(!ret && get_value(c, "/a", "3") && etcd_client_calls(c) - before >= 4,
		      "an expired token: refused once, authenticated again, the call succeeds "
		      "(%" PRIu64 " requests) %s",
		      etcd_client_calls(c) - before, err);
	}
	etcd_client_free(c);

	o.user = NULL;
	o.user_file = userf;
	c = NULL;
	ret = etcd_client_new(&o, &c, err, sizeof(err));
	CHECK(!ret && get_value(c, "/a", "3"), "user_file + password_file %s", err);
	etcd_client_free(c);

	o.password_file = bad;
	c = NULL;
	etcd_client_new(&o, &c, err, sizeof(err));
	ret = c ? etcd_put(c, "/a", 0, "x", 0, 0, NULL, err, sizeof(err)) : 0;
	CHECK(ret == -EACCES && strstr(err, "authentication failed") && strstr(err, "root") &&
		      strstr(err, "http://127.0.0.1:"),
	      "a wrong password: -EACCES naming user and endpoint (%s)", err);
	CHECK(!strstr(err, "wrong"), "the message does not carry the password");
	etcd_client_free(c);

	o.password_file = loose;
	c = NULL;
	ret = etcd_client_new(&o, &c, err, sizeof(err));
	CHECK(ret == -EPERM && strstr(err, loose),
	      "a password file readable by others: -EPERM (%s)", err);
	etcd_client_free(c);
}

/* The value of series line "@series VALUE" in @text, or -1. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, series, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

/* issue 20: every call above shows in the process's metrics, the timeout too. */
static void test_metrics(void)
{
	char *text = NULL;
	size_t len;
	double ranges, timeouts;

	ibvf_metrics_render(ibvf_metrics_default(), &text, &len);
	ranges = text ? sample(text, "ibvf_etcd_request_duration_seconds_count{op=\"kv/range\"}")
		      : -1;
	timeouts =
		text ? sample(text, "ibvf_etcd_errors_total{op=\"kv/put\",class=\"timeout\"}") : -1;
	CHECK(ranges >= 1 && timeouts >= 1,
	      "metrics: %g kv/range requests timed, %g kv/put timeouts counted", ranges, timeouts);
	free(text);
}

int main(void)
{
	const char *missing = etcd_lab_missing();
	struct etcd_client *c;
	int64_t t0 = ibvf_mono_ms();

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (missing)
		return etcd_lab_skip(missing);
	if (etcd_lab_start(&lab, 3, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&lab);
		return 1;
	}
	printf("# etcd lab: 3 members up in %lld ms (%s)\n", (long long)(ibvf_mono_ms() - t0),
	       lab.dir);
	c = client(lab.urls, 3, 5000);
	if (c) {
		test_kv(c);
		test_lease(c);
		test_watch(c);
	}
	etcd_client_free(c);
	test_config_errors();
	test_api_prefix();
	test_timeouts();
	test_tls();
	test_failover();
	test_auth();
	test_metrics();
	etcd_lab_stop(&lab);
	printf("1..%d\n# %d failure(s), %lld ms\n", checks, failures,
	       (long long)(ibvf_mono_ms() - t0));
	return failures ? 1 : 0;
}
