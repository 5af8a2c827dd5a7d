// SPDX-License-Identifier: MIT
/* Start, drive and stop the UFM API simulator (see ufm_sim_harness.h). */
#include "ufm_sim_harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef UFM_SIM_SCRIPT
#error "UFM_SIM_SCRIPT must name ufm_sim.py"
#endif

const char *ufm_sim_script(void)
{
	const char *e = getenv("IBVF_UFM_SIM");

	return e && *e ? e : UFM_SIM_SCRIPT;
}

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog);
		if (n && access(buf, X_OK) == 0)
			return true;
		path += n;
		if (*path == ':')
			path++;
	}
	return false;
}

const char *ufm_sim_missing(void)
{
	if (!in_path("python3"))
		return "python3 not found in PATH (Debian package python3)";
	if (!in_path("openssl"))
		return "openssl not found in PATH (Debian package openssl)";
	if (access(ufm_sim_script(), R_OK))
		return "ufm_sim.py not readable (set IBVF_UFM_SIM)";
	return NULL;
}

int ufm_sim_skip(const char *reason)
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

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t n = strlen(text);
	bool ok;

	if (fd < 0)
		return -errno;
	ok = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
	close(fd);
	return ok ? 0 : -EIO;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void child_exec(const struct ufm_sim_opts *o, struct ufm_sim *s, const char *port_file,
		       const char *pki)
{
	const char *argv[32];
	int a = 0, fd;

	/* die with the test, even when it crashes */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	argv[a++] = "python3";
	argv[a++] = ufm_sim_script();
	argv[a++] = "--port-file";
	argv[a++] = port_file;
	if (o->tls) {
		argv[a++] = "--tls";
		argv[a++] = "--cert-dir";
		argv[a++] = pki;
		if (o->san) {
			argv[a++] = "--san";
			argv[a++] = o->san;
		}
		if (o->require_client_cert)
			argv[a++] = "--require-client-cert";
	}
	if (o->user) {
		argv[a++] = "--basic-user";
		argv[a++] = o->user;
		argv[a++] = "--basic-password-file";
		argv[a++] = s->password_file;
	}
	if (o->token) {
		argv[a++] = "--token-file";
		argv[a++] = s->token_file;
	}
	argv[a++] = "--max-lifetime";
	argv[a++] = "600";
	argv[a] = NULL;
	execvp("python3", (char *const *)argv);
	_exit(127);
}

static int wait_port(struct ufm_sim *s, const char *port_file, char *err, size_t errlen)
{
	for (int i = 0; i < 400; i++) {
		FILE *f = fopen(port_file, "r");
		int st;

		if (f) {
			int ok = fscanf(f, "%d", &s->port) == 1;

			fclose(f);
			if (ok && s->port > 0)
				return 0;
		}
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			s->pid = 0;
			snprintf(err, errlen, "ufm_sim.py exited early (status %d)", st);
			return -ECHILD;
		}
		sleep_ms(50);
	}
	snprintf(err, errlen, "ufm_sim.py did not report a port within 20 s");
	return -ETIMEDOUT;
}

int ufm_sim_start(const struct ufm_sim_opts *o, struct ufm_sim *s, char *err, size_t errlen)
{
	char port_file[PATH_MAX], pki[PATH_MAX];
	const char *tmp;
	int ret;

	memset(s, 0, sizeof(*s));
	tmp = getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 200 ? getenv("TMPDIR") : "/tmp";
	snprintf(s->dir, sizeof(s->dir), "%s/ibvf-ufm-sim.XXXXXX", tmp);
	if (!mkdtemp(s->dir)) {
		snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
		s->dir[0] = '\0';
		return -errno;
	}
	snprintf(port_file, sizeof(port_file), "%s/port", s->dir);
	snprintf(pki, sizeof(pki), "%s/pki", s->dir);
	snprintf(s->ca_file, sizeof(s->ca_file), "%s/pki/ca.pem", s->dir);
	snprintf(s->other_ca_file, sizeof(s->other_ca_file), "%s/pki/other-ca.pem", s->dir);
	snprintf(s->client_cert, sizeof(s->client_cert), "%s/pki/client.pem", s->dir);
	snprintf(s->client_key, sizeof(s->client_key), "%s/pki/client.key", s->dir);
	snprintf(s->password_file, sizeof(s->password_file), "%s/password", s->dir);
	snprintf(s->token_file, sizeof(s->token_file), "%s/token", s->dir);
	if ((o->user && (ret = write_file(s->password_file, o->password ? o->password : ""))) ||
	    (o->token && (ret = write_file(s->token_file, o->token)))) {
		snprintf(err, errlen, "cannot write the secrets: %s", strerror(-ret));
		ufm_sim_stop(s);
		return ret;
	}
	s->tls = o->tls;
	s->pid = fork();
	if (s->pid < 0) {
		ret = -errno;
		s->pid = 0;
		snprintf(err, errlen, "fork: %s", strerror(-ret));
		ufm_sim_stop(s);
		return ret;
	}
	if (s->pid == 0)
		child_exec(o, s, port_file, pki);
	ret = wait_port(s, port_file, err, errlen);
	if (ret) {
		ufm_sim_stop(s);
		return ret;
	}
	snprintf(s->base_url, sizeof(s->base_url), "%s://127.0.0.1:%d", o->tls ? "https" : "http",
		 s->port);
	return 0;
}

void ufm_sim_stop(struct ufm_sim *s)
{
	if (s->pid > 0) {
		int st;

		kill(s->pid, SIGTERM);
		for (int i = 0; i < 40; i++) {
			if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
				s->pid = 0;
				break;
			}
			sleep_ms(50);
		}
		if (s->pid > 0) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, &st, 0);
		}
		s->pid = 0;
	}
	if (s->dir[0])
		nftw(s->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	s->dir[0] = '\0';
}

struct buf {
	char *p;
	size_t n;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	char *q = realloc(b->p, b->n + size * n + 1);

	if (!q)
		return 0;
	memcpy(q + b->n, p, size * n);
	b->p = q;
	b->n += size * n;
	q[b->n] = '\0';
	return size * n;
}

int ufm_sim_ctl(struct ufm_sim *s, const char *method, const char *path, const char *body,
		json_t **reply)
{
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	CURL *c = curl_easy_init();
	struct buf b = {0};
	char url[PATH_MAX];
	long status = 0;
	CURLcode rc;

	if (reply)
		*reply = NULL;
	if (!c || !h) {
		curl_easy_cleanup(c);
		curl_slist_free_all(h);
		return -ENOMEM;
	}
	snprintf(url, sizeof(url), "%s%s", s->base_url, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (s->tls) {
		/* our own child: trust its CA, whatever host name its certificate names */
		curl_easy_setopt(c, CURLOPT_CAINFO, s->ca_file);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
		/* and show a client certificate, for when it requires one */
		curl_easy_setopt(c, CURLOPT_SSLCERT, s->client_cert);
		curl_easy_setopt(c, CURLOPT_SSLKEY, s->client_key);
	}
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		free(b.p);
		return -EIO;
	}
	if (reply && b.p)
		*reply = json_loadb(b.p, b.n, 0, NULL);
	free(b.p);
	return (int)status;
}

static int ctl_ok(struct ufm_sim *s, const char *method, const char *path, const char *body)
{
	return ufm_sim_ctl(s, method, path, body, NULL) == 200 ? 0 : -EIO;
}

int ufm_sim_reset(struct ufm_sim *s)
{
	return ctl_ok(s, "POST", "/_sim/reset", "{}");
}

int ufm_sim_fault(struct ufm_sim *s, const char *rule_json)
{
	char body[4096];

	snprintf(body, sizeof(body), "{\"faults\":[%s]}", rule_json);
	return ctl_ok(s, "POST", "/_sim/faults", body);
}

int ufm_sim_config(struct ufm_sim *s, const char *json)
{
	return ctl_ok(s, "POST", "/_sim/config", json);
}

long ufm_sim_calls(struct ufm_sim *s, const char *endpoint)
{
	json_t *r = NULL;
	long n = -1;

	if (ufm_sim_ctl(s, "GET", "/_sim/stats", NULL, &r) == 200)
		n = (long)json_integer_value(
			json_object_get(json_object_get(r, "calls"), endpoint));
	json_decref(r);
	return n;
}

json_t *ufm_sim_last_request(struct ufm_sim *s)
{
	json_t *r = NULL, *last = NULL, *a;

	if (ufm_sim_ctl(s, "GET", "/_sim/requests", NULL, &r) == 200) {
		a = json_object_get(r, "requests");
		if (json_array_size(a))
			last = json_incref(json_array_get(a, json_array_size(a) - 1));
	}
	json_decref(r);
	return last;
}
