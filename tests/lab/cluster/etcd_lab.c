// SPDX-License-Identifier: MIT
/* The etcd lab (see etcd_lab.h). Lab code: never linked into a product binary. */
#include "etcd_lab.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog);
		if (!access(buf, X_OK))
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

const char *etcd_lab_missing(void)
{
	if (!in_path("etcd"))
		return "etcd not found in PATH (Debian package etcd-server; tools/install-deps)";
	if (!in_path("openssl"))
		return "openssl not found in PATH";
	return NULL;
}

int etcd_lab_skip(const char *reason)
{
	const char *req = getenv("IBVF_REQUIRE_LABS");

	if (req && !strcmp(req, "1")) {
		fprintf(stderr, "FAIL: lab required (IBVF_REQUIRE_LABS=1) but missing: %s\n",
			reason);
		return 1;
	}
	fprintf(stderr, "SKIP: %s\n", reason);
	return 77;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* A free loopback TCP port (bound then released: a short race, fine for a lab). */
static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd < 0)
		return -1;
	if (!bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &l))
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* Run a program (fixed argv, no shell) quietly; 0 when it exits 0. */
static int run(const char *const argv[])
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -errno;
	if (!pid) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -EIO;
}

static int make_ca(const char *dir, const char *name)
{
	char key[PATH_MAX], crt[PATH_MAX], subj[64];

	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name);
	snprintf(subj, sizeof(subj), "/CN=ibvf-lab-%s", name);
	const char *argv[] = {"openssl",
			      "req",
			      "-x509",
			      "-newkey",
			      "ec",
			      "-pkeyopt",
			      "ec_paramgen_curve:prime256v1",
			      "-nodes",
			      "-keyout",
			      key,
			      "-out",
			      crt,
			      "-days",
			      "2",
			      "-subj",
			      subj,
			      NULL};
	return run(argv);
}

/* A certificate for @name signed by ca.crt; @san NULL: a client certificate. */
static int make_cert(const char *dir, const char *name, const char *san)
{
	char key[PATH_MAX], csr[PATH_MAX], crt[PATH_MAX], ca[PATH_MAX], cakey[PATH_MAX],
		ext[PATH_MAX], subj[64];
	FILE *f;
	int ret;

	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	snprintf(csr, sizeof(csr), "%s/%s.csr", dir, name);
	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name);
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	snprintf(cakey, sizeof(cakey), "%s/ca.key", dir);
	snprintf(ext, sizeof(ext), "%s/%s.ext", dir, name);
	snprintf(subj, sizeof(subj), "/CN=%s", name);
	f = fopen(ext, "w");
	if (!f)
		return -errno;
	fprintf(f, "%s%s\nextendedKeyUsage=%s\n", san ? "subjectAltName=" : "", san ? san : "",
		san ? "serverAuth,clientAuth" : "clientAuth");
	fclose(f);
	const char *req[] = {
		"openssl", "req",     "-newkey", "ec",	 "-pkeyopt", "ec_paramgen_curve:prime256v1",
		"-nodes",  "-keyout", key,	 "-out", csr,	     "-subj",
		subj,	   NULL};
	const char *sign[] = {
		"openssl",	   "x509", "-req", "-in",   csr, "-CA",	     ca,  "-CAkey", cakey,
		"-CAcreateserial", "-out", crt,	   "-days", "2", "-extfile", ext, NULL};
	ret = run(req);
	if (!ret)
		ret = run(sign);
	if (!ret)
		ret = chmod(key, 0600) ? -errno : 0;
	return ret;
}

static void member_exec(struct etcd_lab *lab, int i, bool existing)
{
	struct etcd_lab_member *m = &lab->m[i];
	char name[16], data[PATH_MAX], peer[64], clients[160], cluster[512] = "", log[PATH_MAX],
							       crt[PATH_MAX], key[PATH_MAX];
	int fd;

	snprintf(name, sizeof(name), "m%d", i);
	snprintf(data, sizeof(data), "%s/data-%d", lab->dir, i);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", m->peer_port);
	snprintf(clients, sizeof(clients), "%s,%s", m->url, m->tls_url);
	snprintf(log, sizeof(log), "%s/m%d.log", lab->dir, i);
	snprintf(crt, sizeof(crt), "%s/server.crt", lab->dir);
	snprintf(key, sizeof(key), "%s/server.key", lab->dir);
	for (int k = 0; k < lab->n; k++) {
		size_t l = strlen(cluster);

		snprintf(cluster + l, sizeof(cluster) - l, "%sm%d=http://127.0.0.1:%d",
			 k ? "," : "", k, lab->m[k].peer_port);
	}
	const char *argv[] = {
		"etcd", "--name", name, "--data-dir", data, "--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer, "--listen-client-urls", clients,
		"--advertise-client-urls", m->url, "--initial-cluster", cluster,
		"--initial-cluster-state", existing ? "existing" : "new", "--initial-cluster-token",
		"ibvf-lab",
		/* fast elections: the lab runs on loopback */
		"--heartbeat-interval", "50", "--election-timeout", "500", "--cert-file", crt,
		"--key-file", key, "--trusted-ca-file", lab->ca_file, "--client-cert-auth",
		/* simple auth tokens expire after 2 s idle: the re-authentication test */
		"--auth-token-ttl", "2", "--log-level", "warn", NULL};

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execvp("etcd", (char *const *)argv);
	_exit(127);
}

int etcd_lab_member_start(struct etcd_lab *lab, int i, char *err, size_t errlen)
{
	struct stat st;
	char data[PATH_MAX];
	pid_t pid;

	snprintf(data, sizeof(data), "%s/data-%d", lab->dir, i);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -errno;
	}
	if (!pid)
		member_exec(lab, i, !stat(data, &st));
	lab->m[i].pid = pid;
	return 0;
}

void etcd_lab_member_stop(struct etcd_lab *lab, int i, bool kill9)
{
	pid_t pid = lab->m[i].pid;
	int st;

	if (pid <= 0)
		return;
	kill(pid, kill9 ? SIGKILL : SIGTERM);
	for (int t = 0; !kill9 && t < 40; t++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			lab->m[i].pid = 0;
			return;
		}
		nap_ms(50);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	lab->m[i].pid = 0;
}

struct buf {
	char *p;
	size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	char *nb = realloc(b->p, b->len + size * n + 1);

	if (!nb)
		return 0;
	memcpy(nb + b->len, p, size * n);
	b->p = nb;
	b->len += size * n;
	b->p[b->len] = '\0';
	return size * n;
}

/* POST @body to @url; the answer (caller frees) or NULL. */
static char *post(const char *url, const char *body, const char *token, long timeout_ms)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = NULL;
	struct buf b = {0};
	char auth[512];
	long status = 0;

	if (!h)
		return NULL;
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: %s", token);
		hdr = curl_slist_append(hdr, auth);
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	if (curl_easy_perform(h) != CURLE_OK ||
	    (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status), status != 200)) {
		free(b.p);
		b.p = NULL;
	}
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	return b.p;
}

int etcd_lab_wait_writable(struct etcd_lab *lab, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	char url[128];

	while (now_ms() < end) {
		for (int i = 0; i < lab->n; i++) {
			char *r;

			if (!lab->m[i].pid)
				continue;
			snprintf(url, sizeof(url), "%s/v3/kv/put", lab->m[i].url);
			/* key "_lab", value "up" (base64) */
			r = post(url, "{\"key\":\"X2xhYg==\",\"value\":\"dXA=\"}", NULL, 1000);
			if (r && strstr(r, "\"header\"") && !strstr(r, "\"error\"")) {
				free(r);
				return 0;
			}
			free(r);
		}
		nap_ms(50);
	}
	return -ETIMEDOUT;
}

int etcd_lab_leader(struct etcd_lab *lab)
{
	char url[128];

	for (int i = 0; i < lab->n; i++) {
		char *r, *mid, *lead;
		int found = -1;

		if (!lab->m[i].pid)
			continue;
		snprintf(url, sizeof(url), "%s/v3/maintenance/status", lab->m[i].url);
		r = post(url, "{}", NULL, 1000);
		if (!r)
			continue;
		mid = strstr(r, "\"member_id\":\"");
		lead = strstr(r, "\"leader\":\"");
		if (mid && lead && !strncmp(mid + 13, lead + 10, strcspn(lead + 10, "\"")))
			found = i;
		free(r);
		if (found >= 0)
			return found;
	}
	return -1;
}

int etcd_lab_enable_auth(struct etcd_lab *lab, const char *password)
{
	static const char *const steps[][2] = {
		{"/v3/auth/role/add", "{\"name\":\"root\"}"},
		{"/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}"},
		{"/v3/auth/enable", "{}"},
	};
	char url[128], body[256];
	char *r;

	snprintf(url, sizeof(url), "%s/v3/auth/user/add", lab->m[0].url);
	snprintf(body, sizeof(body), "{\"name\":\"root\",\"password\":\"%s\"}", password);
	r = post(url, body, NULL, 5000);
	if (!r || strstr(r, "\"error\"")) {
		free(r);
		return -EIO;
	}
	free(r);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		snprintf(url, sizeof(url), "%s%s", lab->m[0].url, steps[i][0]);
		r = post(url, steps[i][1], NULL, 5000);
		if (!r || strstr(r, "\"error\"")) {
			free(r);
			return -EIO;
		}
		free(r);
	}
	return 0;
}

int etcd_lab_write_file(struct etcd_lab *lab, const char *name, const char *text, int mode,
			char *path, size_t len)
{
	int fd;

	snprintf(path, len, "%s/%s", lab->dir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text) || fchmod(fd, (mode_t)mode)) {
		close(fd);
		return -EIO;
	}
	close(fd);
	return 0;
}

int etcd_lab_start(struct etcd_lab *lab, int n, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	char path[PATH_MAX];
	int ret;

	memset(lab, 0, sizeof(*lab));
	if (n < 1 || n > ETCD_LAB_MAX) {
		snprintf(err, errlen, "etcd lab: %d members", n);
		return -EINVAL;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(lab->dir, sizeof(lab->dir), "%s/ibvf-etcd-lab.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(lab->dir)) {
		snprintf(err, errlen, "mkdtemp %s: %s", lab->dir, strerror(errno));
		return -errno;
	}
	lab->n = n;
	snprintf(lab->ca_file, sizeof(lab->ca_file), "%s/ca.crt", lab->dir);
	snprintf(lab->other_ca_file, sizeof(lab->other_ca_file), "%s/other.crt", lab->dir);
	snprintf(lab->client_cert, sizeof(lab->client_cert), "%s/client.crt", lab->dir);
	snprintf(lab->client_key, sizeof(lab->client_key), "%s/client.key", lab->dir);
	ret = make_ca(lab->dir, "ca");
	if (!ret)
		ret = make_ca(lab->dir, "other");
	if (!ret)
		ret = make_cert(lab->dir, "server", "IP:127.0.0.1,DNS:localhost");
	if (!ret)
		ret = make_cert(lab->dir, "client", NULL);
	if (ret) {
		snprintf(err, errlen, "etcd lab: openssl could not make the test certificates");
		return ret;
	}
	for (int i = 0; i < n; i++) {
		struct etcd_lab_member *m = &lab->m[i];

		m->client_port = free_port();
		m->tls_port = free_port();
		m->peer_port = free_port();
		if (m->client_port < 0 || m->tls_port < 0 || m->peer_port < 0) {
			snprintf(err, errlen, "etcd lab: no free loopback port");
			return -EADDRINUSE;
		}
		snprintf(m->url, sizeof(m->url), "http://127.0.0.1:%d", m->client_port);
		snprintf(m->tls_url, sizeof(m->tls_url), "https://127.0.0.1:%d", m->tls_port);
		lab->urls[i] = m->url;
		lab->tls_urls[i] = m->tls_url;
	}
	for (int i = 0; i < n; i++)
		if ((ret = etcd_lab_member_start(lab, i, err, errlen)))
			return ret;
	if (etcd_lab_wait_writable(lab, 20000)) {
		snprintf(path, sizeof(path), "%s/m0.log", lab->dir);
		snprintf(err, errlen,
			 "etcd lab: the cluster took writes on no member within 20 s "
			 "(see %s)",
			 path);
		return -ETIMEDOUT;
	}
	return 0;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

void etcd_lab_stop(struct etcd_lab *lab)
{
	for (int i = 0; i < lab->n; i++)
		etcd_lab_member_stop(lab, i, true);
	if (lab->dir[0] && !getenv("IBVF_LAB_KEEP"))
		nftw(lab->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	lab->dir[0] = '\0';
}
