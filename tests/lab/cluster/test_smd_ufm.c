// SPDX-License-Identifier: MIT
/*
 * UFM mode of the SM agent (issue 19): two real ibvf-smd processes with the
 * ufm backend in front of the UFM simulator (tests/lab/ufm-sim), a real
 * 3-member etcd, and a node's `cluster` backend in this process. One agent
 * leads; the leader is SIGKILLed while its UFM call of a batch is in flight
 * (the simulator holds every request 1.5 s); the standby leads once the
 * lease expires and finishes the batch: the node's add returns 0 and UFM
 * holds every GUID. The failover time (SIGKILL to the new leader's first UFM
 * call) is printed. Then a removal through the new leader.
 *   test_smd_ufm IBVF_SMD UFM_MODULE_DIR
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "clock.h"
#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "sm_cluster.h"
#include "ufm_sim_harness.h"

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
		fflush(stdout);                                                                    \
	} while (0)

#define USER	 "ibvf-admin"
#define PASSWORD "s3cret-Pw_9!"
#define PKEY	 0x40
#define FIRST	 0x0200000000190100ull

static struct etcd_lab lab;
static struct ufm_sim sim;
static const char *smd_bin, *ufm_dir;
static struct etcd_client *etcd;

/* A free TCP port on loopback (bound once, then closed) for an agent's HTTP endpoint. */
static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &len))
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

struct body {
	char buf[65536];
	size_t n;
};

static size_t body_cb(char *p, size_t sz, size_t nm, void *arg)
{
	struct body *b = arg;
	size_t len = sz * nm, room = sizeof(b->buf) - 1 - b->n;

	memcpy(b->buf + b->n, p, len < room ? len : room);
	b->n += len < room ? len : room;
	b->buf[b->n] = 0;
	return len;
}

/* GET http://127.0.0.1:@port@path: the HTTP status (0: no answer) and the body. */
static long http_get(int port, const char *path, struct body *b)
{
	char url[128];
	long code = 0;
	CURL *c = curl_easy_init();

	b->n = 0;
	b->buf[0] = 0;
	if (!c)
		return 0;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	return code;
}

/* The value of the series @series (its exact text, labels included) in @text, or -1. */
static double metric(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, series, n) && l[n] == ' ')
			return strtod(l + n + 1, NULL);
	return -1;
}

static int http_port_a, http_port_b;

static pid_t smd_start(const char *id)
{
	char text[16384], path[PATH_MAX], log[PATH_MAX];
	int port = !strcmp(id, "smd-a") ? http_port_a : http_port_b;
	pid_t pid;

	snprintf(
		text, sizeof(text),
		"{\"state_dir\": \"%s\", \"run_dir\": \"%s\", \"log_level\": \"info\", "
		"\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:19:01:00\", \"end\": "
		"\"02:00:00:00:00:19:01:ff\"}], \"cluster\": {\"endpoints\": [\"%s\", \"%s\", "
		"\"%s\"], \"prefix\": \"/u/\", \"node\": \"%s\"}}, \"sm\": {\"backend\": \"ufm\", "
		"\"module_dir\": \"%s\", \"config\": {\"address\": \"127.0.0.1\", \"port\": %d, "
		"\"scheme\": \"http\", \"username\": \"%s\", \"password_file\": \"%s\", "
		"\"change_wait_ms\": 0}}, \"smd\": {\"lease_ttl_s\": 2}, \"http\": {\"port\": %d}}",
		lab.dir, lab.dir, lab.urls[0], lab.urls[1], lab.urls[2], id, ufm_dir, sim.port,
		USER, sim.password_file, port);
	snprintf(log, sizeof(log), "%s.json", id);
	etcd_lab_write_file(&lab, log, text, 0600, path, sizeof(path));
	snprintf(log, sizeof(log), "%s/%s.log", lab.dir, id);
	pid = fork();
	if (!pid) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		unsetenv("IBVF_HTTP_PORT"); /* meson's test env: the config's port counts here */
		dup2(fd, 1);
		dup2(fd, 2);
		execl(smd_bin, smd_bin, "-f", "-c", path, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The id in /u/smd/leader/ufm, or "" */
static void leader(char *out, size_t len)
{
	struct etcd_range_result r = {0};
	char err[IBVF_ERR_LEN];

	out[0] = 0;
	if (etcd_range(etcd, "/u/smd/leader/ufm", 0, NULL, 0, 0, false, &r, err, sizeof(err)))
		return;
	if (r.n_kvs) {
		json_t *o = json_loadb(r.kvs[0].value, r.kvs[0].value_len, 0, NULL);
		const char *id = json_string_value(json_object_get(o, "id"));

		snprintf(out, len, "%s", id ? id : "");
		json_decref(o);
	}
	etcd_range_result_free(&r);
}

static bool wait_leader(const char *id, int ms)
{
	char who[256];

	for (int64_t end = ibvf_mono_ms() + ms; ibvf_mono_ms() < end; usleep(20000)) {
		leader(who, sizeof(who));
		if (!strcmp(who, id))
			return true;
	}
	return false;
}

static long stat_of(const char *key)
{
	json_t *j = NULL;
	long v = -1;

	if (ufm_sim_ctl(&sim, "GET", "/_sim/stats", NULL, &j) == 200)
		v = (long)json_integer_value(json_object_get(j, key));
	json_decref(j);
	return v;
}

/* How many of GUIDs FIRST..FIRST+n-1 UFM's PKEY holds. */
static int in_ufm(int n)
{
	json_t *j = NULL;
	char *s, hex[32];
	int found = 0;

	if (ufm_sim_ctl(&sim, "GET", "/_sim/state", NULL, &j) != 200) {
		json_decref(j);
		return -1;
	}
	s = json_dumps(j, 0);
	json_decref(j);
	for (int i = 0; s && i < n; i++) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, (uint64_t)(FIRST + (uint64_t)i));
		found += strcasestr(s, hex) != NULL;
	}
	free(s);
	return found;
}

struct adder {
	struct ibvf_sm_backend *n;
	int from, count, ret;
	char err[IBVF_ERR_LEN];
};

static void *add_main(void *arg)
{
	struct adder *a = arg;
	struct ibvf_sm_member m[16];

	for (int i = 0; i < a->count; i++)
		m[i] = (struct ibvf_sm_member){FIRST + (uint64_t)(a->from + i), IBVF_MEMBER_FULL};
	a->ret = cluster_ops.add_members(a->n, PKEY, m, (size_t)a->count, NULL, a->err,
					 sizeof(a->err));
	return NULL;
}

int main(int argc, char **argv)
{
	struct ufm_sim_opts so = {.user = USER, .password = PASSWORD};
	struct etcd_client_opts eo = {.n_endpoints = 3, .timeout_ms = 8000};
	const char *missing = etcd_lab_missing();
	struct ibvf_sm_backend *n1 = NULL;
	char err[IBVF_ERR_LEN] = "", cfg[1024];
	struct adder ad = {0};
	pthread_t th;
	pid_t a, b;
	int st, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: test_smd_ufm IBVF_SMD UFM_MODULE_DIR\n");
		return 2;
	}
	smd_bin = argv[1];
	ufm_dir = argv[2];
	if (missing)
		return etcd_lab_skip(missing);
	if ((missing = ufm_sim_missing()))
		return ufm_sim_skip(missing);
	if (etcd_lab_start(&lab, 3, err, sizeof(err)) ||
	    ufm_sim_start(&so, &sim, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&lab);
		return 1;
	}
	eo.endpoints = lab.urls;
	if (etcd_client_new(&eo, &etcd, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		return 1;
	}
	snprintf(cfg, sizeof(cfg),
		 "{\"endpoints\":[\"%s\",\"%s\",\"%s\"],\"prefix\":\"/u/\",\"node\":\"n1\","
		 "\"apply_timeout_ms\":30000,\"etcd_timeout_ms\":8000}",
		 lab.urls[0], lab.urls[1], lab.urls[2]);
	CHECK(cluster_ops.init(cfg, &n1, err, sizeof(err)) == 0, "node n1's cluster backend (%s)",
	      err);
	http_port_a = free_port();
	do
		http_port_b = free_port();
	while (http_port_b == http_port_a);
	a = smd_start("smd-a");
	CHECK(wait_leader("smd-a", 10000), "ibvf-smd smd-a leads group ufm");
	b = smd_start("smd-b");
	usleep(500000);
	ad = (struct adder){.n = n1, .from = 0, .count = 4};
	add_main(&ad);
	CHECK(ad.ret == 0 && in_ufm(4) == 4,
	      "n1 adds 4 GUIDs to 0x%04x: in UFM when it returns (%s)", PKEY, ad.err);
	{
		char who[256];

		leader(who, sizeof(who));
		CHECK(!strcmp(who, "smd-a"), "the standby smd-b did not take over (leader %s)",
		      who);
	}
	/* the agents' HTTP endpoint (issue 20): metrics, liveness, readiness */
	{
		static struct body ma, mb, r;
		long ca = 0, cb = 0, ha = 0, ra = 0, rb = 0;
		double adds = -1, la = -1, lb = -1;

		/* the counters follow each pass (the node's add returns inside it): poll */
		for (int64_t end = ibvf_mono_ms() + 5000; ibvf_mono_ms() < end; usleep(50000)) {
			ca = http_get(http_port_a, "/metrics", &ma);
			cb = http_get(http_port_b, "/metrics", &mb);
			adds = metric(ma.buf, "ibvf_smd_members_sent_total{op=\"add\"}");
			la = metric(ma.buf, "ibvf_smd_leader");
			lb = metric(mb.buf, "ibvf_smd_leader");
			ha = http_get(http_port_a, "/healthz", &r);
			ra = http_get(http_port_a, "/readyz", &r);
			rb = http_get(http_port_b, "/readyz", &r);
			if (ca == 200 && cb == 200 && adds >= 4 && la == 1 && lb == 0 &&
			    ha == 200 && ra == 200 && rb == 200)
				break;
		}
		if (adds < 4 || lb != 0 || rb != 200) {
			printf("# smd-b /readyz %ld: %s\n", rb, r.buf);
			for (char *l = strtok(mb.buf, "\n"); l; l = strtok(NULL, "\n"))
				if (!strncmp(l, "ibvf_smd", 8))
					printf("# smd-b: %s\n", l);
		}
		CHECK(ca == 200 && la == 1 && adds >= 4 &&
			      metric(ma.buf, "ibvf_smd_applied_revision") > 0 &&
			      strstr(ma.buf, "ibvf_smd_build_info{version=\"") &&
			      strstr(ma.buf, "sm_backend=\"ufm\"} 1"),
		      "smd-a /metrics (port %d): leader 1, %g adds sent, an applied revision, build "
		      "info (HTTP %ld)",
		      http_port_a, adds, ca);
		CHECK(cb == 200 && lb == 0 &&
			      metric(mb.buf, "ibvf_smd_members_sent_total{op=\"add\"}") <= 0,
		      "smd-b /metrics (port %d): a standby, leader 0, nothing sent (HTTP %ld)",
		      http_port_b, cb);
		CHECK(ha == 200 && ra == 200 && rb == 200,
		      "/healthz and /readyz: 200 from both agents (%ld %ld %ld)", ha, ra, rb);
	}

	/* the leader dies with its UFM call of the next batch in flight */
	ufm_sim_config(&sim, "{\"latency_ms\": 1500}");
	ad = (struct adder){.n = n1, .from = 4, .count = 8};
	pthread_create(&th, NULL, add_main, &ad);
	for (int64_t end = ibvf_mono_ms() + 10000;
	     stat_of("in_flight") < 1 && ibvf_mono_ms() < end;)
		usleep(5000);
	{
		long list0 = ufm_sim_calls(&sim, "list"), in_flight = stat_of("in_flight");
		int64_t t_kill = ibvf_mono_ms(), t_call = 0;

		kill(a, SIGKILL);
		waitpid(a, &st, 0);
		CHECK(in_flight >= 1, "smd-a SIGKILLed with %ld UFM request(s) in flight",
		      in_flight);
		for (int64_t end = t_kill + 15000; ibvf_mono_ms() < end; usleep(10000))
			if (ufm_sim_calls(&sim, "list") > list0) {
				t_call = ibvf_mono_ms();
				break;
			}
		CHECK(t_call && wait_leader("smd-b", 1000),
		      "smd-b leads and calls UFM %lld ms after the leader's death (lease TTL 2 s; "
		      "target < 5000 ms)",
		      (long long)(t_call - t_kill));
		printf("# failover: %lld ms from SIGKILL of the UFM leader to the new leader's first "
		       "UFM call\n",
		       (long long)(t_call - t_kill));
	}
	pthread_join(th, NULL);
	ufm_sim_config(&sim, "{\"latency_ms\": 0}");
	CHECK(ad.ret == 0 && in_ufm(12) == 12,
	      "the node's add of the interrupted batch returns 0; UFM holds all 12 GUIDs (%d: %s)",
	      ad.ret, ad.err);
	{
		uint64_t g[12];

		for (int i = 0; i < 12; i++)
			g[i] = FIRST + (uint64_t)i;
		rc = cluster_ops.remove_members(n1, PKEY, g, 12, err, sizeof(err));
		CHECK(rc == 0 && in_ufm(12) == 0,
		      "n1 removes them through the new leader: none left in UFM (%d %s)", rc, err);
	}
	kill(b, SIGTERM);
	waitpid(b, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: smd-b exits 0");
	cluster_ops.fini(n1);
	etcd_client_free(etcd);
	ufm_sim_stop(&sim);
	etcd_lab_stop(&lab);
	printf("1..%d\n# %d failure(s)\n", checks, failures);
	return failures ? 1 : 0;
}
