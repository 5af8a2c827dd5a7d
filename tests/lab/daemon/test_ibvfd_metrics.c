// SPDX-License-Identifier: MIT
/*
 * Whole-daemon test of ibvfd's HTTP endpoint (issue 20, observability): the
 * real ibvfd with the fake VF driver and the test-only "file" SM backend.
 *
 *   test_ibvfd_metrics IBVFD SM_MODULE_DIR PROMTOOL PROMETHEUS
 *
 *   0. A port that is taken at start-up does not stop ibvfd: it gets ready,
 *      logs the error, and serves once the port is free (retried).
 *   1. /healthz answers 200; unknown paths 404, POST 405.
 *   2. A known number of attaches and releases (and one that fails) show
 *      in /metrics: ibvf_attaches_total / ibvf_releases_total by result and
 *      step, the prepare histogram's count, the pool's allocated GUIDs.
 *   3. `promtool check metrics` (Debian's prometheus) accepts the live text.
 *   4. /readyz agrees with the API's status while the SM breaks and comes
 *      back: 503 with the same reason exactly when status says not ready;
 *      the failed validate() calls show in ibvf_sm_errors_total.
 *   5. A real Prometheus server (own temp dir, loopback, 1 s scrapes) scrapes
 *      ibvfd; its HTTP query API returns the counters of step 2.
 *
 * PROMTOOL / PROMETHEUS are paths ("" when meson did not find them): then
 * steps 3 and 5 SKIP loudly, exit 77 when nothing else failed, or fail with
 * IBVF_REQUIRE_LABS=1. Prometheus is stopped by its PID. Prints TAP lines.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "ibvfd_lab.h"
#include "log.h"

#define N_ATTACH 5

struct body {
	char *p;
	size_t n;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	char *q = realloc(b->p, b->n + size * n + 1);

	if (!q)
		return 0;
	memcpy(q + b->n, p, size * n);
	b->n += size * n;
	q[b->n] = 0;
	b->p = q;
	return size * n;
}

/* GET (or @method) http://127.0.0.1:@port@path: the HTTP status (0: no answer), *@out the body. */
static long http(int port, const char *path, const char *method, char **out)
{
	struct body b = {calloc(1, 1), 0};
	CURL *h = curl_easy_init();
	char url[1024];
	long code = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	if (method)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(h);
	if (out)
		*out = b.p;
	else
		free(b.p);
	return code;
}

/* The value of the series line "@series VALUE" in exposition @text, or -1. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, series, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

/* Does ibvfd's log hold @what? */
static bool logged(struct lab *l, const char *what)
{
	char buf[65536];
	int fd = open(l->log, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return strstr(buf, what) != NULL;
}

/* A listening socket on a free loopback port (*@port), or -1. */
static int hold_port(int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1) ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

/* The port ibvfd logged ("HTTP endpoint on 127.0.0.1 port N"), or -1. */
static int logged_port(struct lab *l)
{
	char buf[65536];
	int fd = open(l->log, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	const char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "HTTP endpoint on 127.0.0.1 port ");
	return p ? atoi(p + strlen("HTTP endpoint on 127.0.0.1 port ")) : -1;
}

static int status_ready(struct lab *l, char *why, size_t len)
{
	json_t *st = NULL, *it;
	size_t i, o = 0;
	int r;

	if (lab_api(l, "status", NULL, &st, NULL, 10000))
		return -1;
	r = json_is_true(json_object_get(st, "ready"));
	why[0] = 0;
	json_array_foreach(json_object_get(st, "not_ready"), i, it)
	{
		int k = snprintf(why + o, len - o, "%s%s: %s", i ? "; " : "",
				 json_string_value(json_object_get(it, "check")),
				 json_string_value(json_object_get(it, "reason")));

		if (k < 0 || (size_t)k >= len - o)
			break;
		o += (size_t)k;
	}
	json_decref(st);
	return r;
}

/*
 * Sample status, /readyz, status: when both status answers agree, /readyz
 * must agree too (200 "ok" vs 503 naming the same reasons). Return 1 agreed,
 * 0 disagreed, -1 status moved in between (no verdict).
 */
static int readyz_agrees(struct lab *l, int port, int *ready)
{
	char w1[2048], w2[2048], *body = NULL;
	int s1 = status_ready(l, w1, sizeof(w1));
	long code = http(port, "/readyz", NULL, &body);
	int s2 = status_ready(l, w2, sizeof(w2));
	int ok;

	if (s1 < 0 || s1 != s2 || strcmp(w1, w2)) {
		free(body);
		return -1;
	}
	*ready = s1;
	ok = s1 ? code == 200 && !strcmp(body, "ok\n") : code == 503 && strstr(body, w1) != NULL;
	if (!ok)
		fprintf(stderr, "# status ready=%d (%s) but /readyz %ld: %s", s1, w1, code, body);
	free(body);
	return ok;
}

static void readiness(struct lab *l, int port)
{
	int seen_not = 0, seen_ready = 0, bad = 0, ready = 0;
	int64_t end;

	close(open(l->failfile, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)); /* validate() fails */
	for (end = ibvf_mono_ms() + 10000; ibvf_mono_ms() < end && seen_not < 5;) {
		int r = readyz_agrees(l, port, &ready);

		bad += r == 0;
		seen_not += r == 1 && !ready;
		usleep(100000);
	}
	unlink(l->failfile);
	for (end = ibvf_mono_ms() + 10000; ibvf_mono_ms() < end && seen_ready < 5;) {
		int r = readyz_agrees(l, port, &ready);

		bad += r == 0;
		seen_ready += r == 1 && ready;
		usleep(100000);
	}
	lab_result(!bad && seen_not >= 5 && seen_ready >= 5,
		   "/readyz agrees with status through an SM outage (%d not-ready and %d ready "
		   "samples, %d disagreements)",
		   seen_not, seen_ready, bad);
}

/* Run @argv with @in on stdin; its exit status (-1: not run), output in *@out. */
static int run_with_input(char *const argv[], const char *in, char *out, size_t outlen)
{
	int pin[2], pout[2], st;
	size_t o = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(pout[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	if (write(pin[1], in, strlen(in)) < 0)
		perror("write");
	close(pin[1]);
	while (o + 1 < outlen && (n = read(pout[0], out + o, outlen - o - 1)) > 0)
		o += (size_t)n;
	out[o] = 0;
	close(pout[0]);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A free loopback TCP port (bound and closed: a small race, fine in a test). */
static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &sl))
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Prometheus instant query @q: the value of its only series, or -1. */
static double prom_query(int pport, const char *q)
{
	char *esc = curl_easy_escape(NULL, q, 0), path[1024], *body = NULL;
	json_t *j, *res;
	double v = -1;

	snprintf(path, sizeof(path), "/api/v1/query?query=%s", esc);
	curl_free(esc);
	if (http(pport, path, NULL, &body) == 200 && (j = json_loads(body, 0, NULL))) {
		res = json_object_get(json_object_get(j, "data"), "result");
		if (json_array_size(res) == 1) {
			const char *s = json_string_value(json_array_get(
				json_object_get(json_array_get(res, 0), "value"), 1));

			v = s ? strtod(s, NULL) : -1;
		}
		json_decref(j);
	}
	free(body);
	return v;
}

static void prometheus(struct lab *l, const char *bin, int port)
{
	char cfg[256], data[256], listen[64], log[256], a1[300], a2[300], a3[128];
	int pport = free_port(), st;
	double att = -1, rel = -1, up = -1;
	FILE *f;
	pid_t pid;

	snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", l->dir);
	snprintf(data, sizeof(data), "%s/prometheus-data", l->dir);
	snprintf(log, sizeof(log), "%s/prometheus.log", l->dir);
	f = fopen(cfg, "w");
	fprintf(f,
		"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
		"scrape_configs:\n  - job_name: ibvfd\n    static_configs:\n"
		"      - targets: ['127.0.0.1:%d']\n",
		port);
	fclose(f);
	snprintf(a1, sizeof(a1), "--config.file=%s", cfg);
	snprintf(a2, sizeof(a2), "--storage.tsdb.path=%s", data);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", pport);
	snprintf(a3, sizeof(a3), "--web.listen-address=%s", listen);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, "prometheus", a1, a2, a3, (char *)NULL);
		_exit(127);
	}
	for (int64_t end = ibvf_mono_ms() + 30000; ibvf_mono_ms() < end; usleep(250000)) {
		up = prom_query(pport, "up{job=\"ibvfd\"}");
		att = prom_query(pport, "sum(ibvf_attaches_total{result=\"ok\"})");
		rel = prom_query(pport, "sum(ibvf_releases_total{result=\"ok\"})");
		if (up == 1 && att == N_ATTACH && rel == N_ATTACH)
			break;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			pid = 0;
			break;
		}
	}
	lab_result(up == 1 && att == N_ATTACH && rel == N_ATTACH,
		   "a real Prometheus scraped ibvfd: up %g, attaches ok %g, releases ok %g "
		   "(want 1, %d, %d; log %s)",
		   up, att, rel, N_ATTACH, N_ATTACH, log);
	if (pid > 0) {
		kill(pid, SIGTERM);
		for (int i = 0; i < 200 && waitpid(pid, &st, WNOHANG) != pid; i++)
			usleep(50000);
		if (kill(pid, 0) == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
		}
	}
}

int main(int argc, char **argv)
{
	bool require = getenv("IBVF_REQUIRE_LABS") && !strcmp(getenv("IBVF_REQUIRE_LABS"), "1");
	char series[256], *text = NULL, out[16384];
	int port, skipped = 0;
	struct lab l;
	int ret;

	if (argc < 5) {
		fprintf(stderr, "usage: test_ibvfd_metrics IBVFD SM_MODULE_DIR PROMTOOL "
				"PROMETHEUS\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	ibvf_log_init("test_ibvfd_metrics", IBVF_LOG_STDERR, LOG_ERR);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	unsetenv("http_proxy");
	ret = lab_init(&l, argv[1], 8, "file", argv[2], NULL);
	if (ret) {
		fprintf(stderr, "lab_init: %s\n", strerror(-ret));
		return 1;
	}
	/* 0. the port is taken when ibvfd starts */
	{
		char p[16];
		int held = 0, fd = hold_port(&held);
		long code = 0;

		snprintf(p, sizeof(p), "%d", held);
		setenv("IBVF_HTTP_PORT", p, 1);
		if (fd < 0 || lab_start(&l, 20000) < 0) {
			lab_result(false, "ibvfd starts while its HTTP port is taken (see %s)",
				   l.log);
			goto out;
		}
		lab_result(logged(&l, "Address already in use") && logged(&l, "retrying"),
			   "a taken HTTP port: ibvfd is ready anyway and logs the error");
		close(fd);
		for (int64_t end = ibvf_mono_ms() + 8000; ibvf_mono_ms() < end && code != 200;
		     usleep(200000))
			code = http(held, "/healthz", NULL, NULL);
		port = logged_port(&l);
		lab_result(code == 200 && port == held,
			   "once the port is free ibvfd serves on it (port %d, logged %d)", held,
			   port);
		if (port != held)
			goto out;
	}
	lab_result(http(port, "/healthz", NULL, NULL) == 200, "/healthz: 200 (port %d)", port);
	lab_result(http(port, "/nope", NULL, NULL) == 404 &&
			   http(port, "/metrics", "POST", NULL) == 405,
		   "unknown path 404, POST 405");

	/* 2. known attaches and releases, one failing prepare */
	for (int i = 0; i < N_ATTACH; i++) {
		char cid[32];

		snprintf(cid, sizeof(cid), "metrics-%d", i);
		if (lab_prepare(&l, cid, i, NULL, NULL, NULL))
			lab_result(false, "prepare %s", cid);
	}
	if (!lab_api(&l, "prepare",
		     json_pack("{s:o,s:s,s:[{s:s,s:s}]}", "owner", lab_owner("metrics-bad"), "pci",
			       "0000:7f:1f.7", "pkeys", "pkey", "0x0012", "membership", "full"),
		     NULL, NULL, 30000))
		lab_result(false, "a prepare of a VF that does not exist fails");
	http(port, "/metrics", NULL, &text);
	lab_result(sample(text, "ibvf_attaches_total{result=\"ok\",step=\"\"}") == N_ATTACH &&
			   sample(text, "ibvf_prepare_duration_seconds_count{result=\"ok\"}") ==
				   N_ATTACH &&
			   sample(text, "ibvf_pool_guids{range=\"0\",state=\"allocated\"}") ==
				   N_ATTACH &&
			   sample(text, "ibvf_ready") == 1,
		   "/metrics after %d attaches: attaches ok, prepare histogram count, pool "
		   "allocated, ready",
		   N_ATTACH);
	{
		/* the failed prepare: counted once, with a result other than ok and its step */
		double failed = 0;

		for (const char *p = strstr(text, "\nibvf_attaches_total{result=\""); p;
		     p = strstr(p + 1, "\nibvf_attaches_total{result=\""))
			if (strncmp(p, "\nibvf_attaches_total{result=\"ok\"", 32) &&
			    !strstr(p, "step=\"\"}"))
				failed += strtod(strchr(strchr(p, '}'), ' '), NULL);
		lab_result(failed == 1, "the failing prepare counts once with its result and step");
	}
	free(text);
	for (int i = 0; i < N_ATTACH; i++) {
		char cid[32];

		snprintf(cid, sizeof(cid), "metrics-%d", i);
		lab_release(&l, cid);
	}
	http(port, "/metrics", NULL, &text);
	snprintf(series, sizeof(series), "ibvf_releases_total{result=\"ok\",step=\"\"}");
	lab_result(sample(text, series) == N_ATTACH &&
			   sample(text, "ibvf_pool_guids{range=\"0\",state=\"allocated\"}") == 0,
		   "/metrics after %d releases: releases ok, pool allocated 0", N_ATTACH);

	/* 3. promtool on the live text */
	if (argv[3][0]) {
		char chk[] = "check", met[] = "metrics";
		char *const pa[] = {argv[3], chk, met, NULL};
		int rc = run_with_input(pa, text, out, sizeof(out));

		lab_result(rc == 0, "promtool check metrics accepts /metrics (exit %d)%s%s", rc,
			   out[0] ? ": " : "", out);
	} else {
		fprintf(stderr, "# SKIP promtool: not installed (Debian package prometheus)\n");
		skipped++;
	}
	free(text);

	/* 4. readiness; the outage's failed validate() calls are SM errors */
	readiness(&l, port);
	http(port, "/metrics", NULL, &text);
	{
		const char *e = strstr(text, "\nibvf_sm_errors_total{call=\"validate\",class=\"");

		lab_result(
			e && strtod(strchr(strchr(e, '}'), ' '), NULL) >= 1 &&
				sample(text,
				       "ibvf_sm_call_duration_seconds_count{call=\"validate\"}") >
					1 &&
				sample(text, "ibvf_reconcile_runs_total{result=\"clean\"}") >= 1,
			"/metrics after the outage: validate() failures in ibvf_sm_errors_total, "
			"validate calls timed, clean reconciliation passes counted");
	}
	free(text);

	/* 5. a real Prometheus */
	if (argv[4][0]) {
		prometheus(&l, argv[4], port);
	} else {
		fprintf(stderr, "# SKIP prometheus: not installed (Debian package prometheus)\n");
		skipped++;
	}
	lab_result(WIFEXITED(lab_stop(&l, SIGTERM)), "ibvfd stops on SIGTERM");
out:
	lab_fini(&l);
	curl_global_cleanup();
	printf("1..%d\n", lab_n_ok + lab_n_fail);
	if (lab_n_fail)
		return 1;
	if (skipped && require) {
		fprintf(stderr, "IBVF_REQUIRE_LABS=1 but prometheus/promtool are missing\n");
		return 1;
	}
	return skipped ? 77 : 0;
}
