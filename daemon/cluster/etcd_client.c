// SPDX-License-Identifier: MIT
/* etcd v3 over the JSON gateway (see etcd_client.h). */
#include "etcd_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "file_read.h"
#include "log.h"
#include "metrics.h"

#define ETCD_USER_AGENT	     "ibvf/" IBVF_VERSION " etcd"
#define ETCD_MAX_BODY	     (64u << 20) /* one answer; a range of every block key fits */
#define ETCD_SECRET_MAX	     4096
#define ETCD_DEFAULT_TIMEOUT 5000

/* gRPC status codes (google.golang.org/grpc/codes) as the gateway sends them */
enum {
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_ALREADY_EXISTS = 6,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNAVAILABLE = 14,
	GRPC_UNAUTHENTICATED = 16,
};

struct endpoint {
	char *url;
	const char *api; /* "/v3" or "/v3beta" */
};

struct etcd_client {
	struct endpoint eps[ETCD_MAX_ENDPOINTS];
	size_t n_eps;
	atomic_size_t cur;
	enum etcd_api api;
	char *ca_file, *cert_file, *key_file;
	char *user;
	char *password;
	size_t password_len;
	char *token; /* "Authorization: <token>" header line, under mu */
	uint32_t timeout_ms, attempt_timeout_ms;
	atomic_uint_fast64_t calls;
	pthread_mutex_t mu; /* curl and token */
	CURL *curl;
};

/* One HTTP answer being received. */
struct body {
	char *buf;
	size_t len;
	bool too_big;
};

/* ---- base64 (RFC 4648 with padding, as protobuf's JSON mapping writes bytes) ---- */

static const char b64tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const char *in, size_t n)
{
	const unsigned char *u = (const unsigned char *)in;
	char *out = malloc((n + 2) / 3 * 4 + 1);
	size_t o = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)u[i] << 16 | (i + 1 < n ? (uint32_t)u[i + 1] << 8 : 0) |
			     (i + 2 < n ? u[i + 2] : 0);

		out[o++] = b64tbl[v >> 18 & 63];
		out[o++] = b64tbl[v >> 12 & 63];
		out[o++] = i + 1 < n ? b64tbl[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? b64tbl[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

static int b64_val(char ch)
{
	const char *p = ch ? strchr(b64tbl, ch) : NULL;

	if (ch == '-')
		return 62; /* URL-safe alphabet, accepted on input */
	if (ch == '_')
		return 63;
	return p ? (int)(p - b64tbl) : -1;
}

/* Decode @in into a new NUL-terminated buffer; -EPROTO on a bad character. */
static int b64_decode(const char *in, char **out, size_t *out_len)
{
	size_t n = strlen(in), o = 0;
	uint32_t acc = 0;
	int bits = 0;
	char *buf = malloc(n / 4 * 3 + 4);

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n && in[i] != '='; i++) {
		int v = b64_val(in[i]);

		if (v < 0) {
			free(buf);
			return -EPROTO;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (char)(acc >> bits & 0xff);
		}
	}
	buf[o] = '\0';
	*out = buf;
	*out_len = o;
	return 0;
}

/* ---- JSON helpers for the gateway's proto3 mapping ---- */

/* An int64 field: a JSON string of digits (or a number); absent: 0. */
static int64_t jint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return 0;
}

static int set_bytes(json_t *o, const char *key, const char *p, size_t n)
{
	char *b = b64_encode(p, n);

	if (!b || json_object_set_new(o, key, json_string(b))) {
		free(b);
		return -ENOMEM;
	}
	free(b);
	return 0;
}

static int set_i64(json_t *o, const char *key, int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, v);
	return json_object_set_new(o, key, json_string(s)) ? -ENOMEM : 0;
}

static int kv_from_json(json_t *j, struct etcd_kv *kv)
{
	const char *k = json_string_value(json_object_get(j, "key"));
	const char *v = json_string_value(json_object_get(j, "value"));
	int ret;

	memset(kv, 0, sizeof(*kv));
	ret = b64_decode(k ? k : "", &kv->key, &kv->key_len);
	if (!ret)
		ret = b64_decode(v ? v : "", &kv->value, &kv->value_len);
	if (ret) {
		free(kv->key);
		free(kv->value);
		memset(kv, 0, sizeof(*kv));
		return ret;
	}
	kv->create_revision = jint(j, "create_revision");
	kv->mod_revision = jint(j, "mod_revision");
	kv->version = jint(j, "version");
	kv->lease = jint(j, "lease");
	return 0;
}

static void kv_free(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
}

void etcd_range_result_free(struct etcd_range_result *r)
{
	for (size_t i = 0; r && i < r->n_kvs; i++)
		kv_free(&r->kvs[i]);
	if (r) {
		free(r->kvs);
		memset(r, 0, sizeof(*r));
	}
}

/* A RangeResponse object (also the response_range of a txn). */
static int range_from_json(json_t *j, struct etcd_range_result *out)
{
	json_t *kvs = json_object_get(j, "kvs");
	size_t n = json_array_size(kvs);

	memset(out, 0, sizeof(*out));
	out->count = jint(j, "count");
	out->more = json_is_true(json_object_get(j, "more"));
	out->revision = jint(json_object_get(j, "header"), "revision");
	if (!n)
		return 0;
	out->kvs = calloc(n, sizeof(*out->kvs));
	if (!out->kvs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int ret = kv_from_json(json_array_get(kvs, i), &out->kvs[i]);

		if (ret) {
			etcd_range_result_free(out);
			return ret;
		}
		out->n_kvs++;
	}
	return 0;
}

/* ---- client ---- */

static int check_endpoint(const char *url, char *err, size_t errlen)
{
	const char *host;

	if (!strncmp(url, "http://", 7))
		host = url + 7;
	else if (!strncmp(url, "https://", 8))
		host = url + 8;
	else
		return ibvf_errf(
			err, errlen, -EINVAL,
			"etcd endpoint \"%s\": expected http://host:port or https://host:port",
			url);
	if (!*host || strchr(host, '@'))
		return ibvf_errf(
			err, errlen, -EINVAL, "etcd endpoint \"%s\": %s", url,
			*host ? "user info in the URL is refused (use user and password_file)"
			      : "no host");
	if (strchr(host, '/') && strcmp(strchr(host, '/'), "/"))
		return ibvf_errf(err, errlen, -EINVAL,
				 "etcd endpoint \"%s\": no path allowed (the client adds /v3)",
				 url);
	if (strlen(url) > 256)
		return ibvf_errf(err, errlen, -EINVAL, "etcd endpoint \"%.40s...\": too long", url);
	return 0;
}

/* Read a one-line credential file (the user name or the password). */
static int read_cred(const char *path, unsigned flags, char **out, size_t *len, char *err,
		     size_t errlen)
{
	int ret = ibvf_file_read_regular(path, ETCD_SECRET_MAX, flags, out, len, NULL, err, errlen);

	if (ret)
		return ret;
	while (*len && ((*out)[*len - 1] == '\n' || (*out)[*len - 1] == '\r'))
		(*out)[--*len] = '\0';
	if (!*len || memchr(*out, '\0', *len) || memchr(*out, '\n', *len)) {
		ibvf_file_wipe_free(*out, *len);
		*out = NULL;
		return ibvf_errf(err, errlen, -EINVAL, "%s: expected one non-empty line", path);
	}
	return 0;
}

static int dup_opt(const char *s, char **out)
{
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

int etcd_client_new(const struct etcd_client_opts *o, struct etcd_client **out, char *err,
		    size_t errlen)
{
	struct etcd_client *c;
	int ret = 0;

	*out = NULL;
	if (!o->n_endpoints || o->n_endpoints > ETCD_MAX_ENDPOINTS)
		return ibvf_errf(err, errlen, -EINVAL, "etcd: %zu endpoints (expected 1 to %d)",
				 o->n_endpoints, ETCD_MAX_ENDPOINTS);
	for (size_t i = 0; i < o->n_endpoints; i++)
		if ((ret = check_endpoint(o->endpoints[i], err, errlen)))
			return ret;
	if (!o->cert_file != !o->key_file)
		return ibvf_errf(err, errlen, -EINVAL,
				 "etcd: a client certificate needs both cert_file and key_file");
	if ((o->user || o->user_file) && !o->password_file)
		return ibvf_errf(err, errlen, -EINVAL, "etcd: a user needs password_file");
	if (o->user && o->user_file)
		return ibvf_errf(err, errlen, -EINVAL,
				 "etcd: user and user_file exclude each other");
	if (o->password_file && !o->user && !o->user_file)
		return ibvf_errf(err, errlen, -EINVAL,
				 "etcd: password_file needs user or user_file");
	if (o->key_file) {
		int fd = ibvf_file_open_regular(o->key_file, IBVF_FILE_SECRET, NULL, err, errlen);

		if (fd < 0)
			return ibvf_err_prefix(err, errlen, fd, "etcd key_file");
		close(fd);
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return ibvf_errf(err, errlen, -ENOMEM, "libcurl initialisation failed");
	c = calloc(1, sizeof(*c));
	if (!c) {
		curl_global_cleanup();
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	pthread_mutex_init(&c->mu, NULL);
	c->api = o->api;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : ETCD_DEFAULT_TIMEOUT;
	c->attempt_timeout_ms = o->attempt_timeout_ms;
	if (!c->attempt_timeout_ms)
		c->attempt_timeout_ms = c->timeout_ms / (uint32_t)o->n_endpoints;
	if (c->attempt_timeout_ms < 100)
		c->attempt_timeout_ms = 100;
	for (size_t i = 0; !ret && i < o->n_endpoints; i++) {
		size_t l = strlen(o->endpoints[i]);

		c->eps[i].url = strdup(o->endpoints[i]);
		if (!c->eps[i].url) {
			ret = -ENOMEM;
			break;
		}
		if (l && c->eps[i].url[l - 1] == '/')
			c->eps[i].url[l - 1] = '\0';
		c->eps[i].api = o->api == ETCD_API_V3BETA ? "/v3beta" : "/v3";
		c->n_eps++;
	}
	if (!ret)
		ret = dup_opt(o->ca_file, &c->ca_file);
	if (!ret)
		ret = dup_opt(o->cert_file, &c->cert_file);
	if (!ret)
		ret = dup_opt(o->key_file, &c->key_file);
	if (!ret)
		ret = dup_opt(o->user, &c->user);
	if (ret) {
		etcd_client_free(c);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	if (o->user_file) {
		size_t l;

		ret = read_cred(o->user_file, 0, &c->user, &l, err, errlen);
		if (ret) {
			etcd_client_free(c);
			return ibvf_err_prefix(err, errlen, ret, "etcd user_file");
		}
	}
	if (o->password_file) {
		ret = read_cred(o->password_file, IBVF_FILE_SECRET, &c->password, &c->password_len,
				err, errlen);
		if (ret) {
			etcd_client_free(c);
			return ibvf_err_prefix(err, errlen, ret, "etcd password_file");
		}
	}
	c->curl = curl_easy_init();
	if (!c->curl) {
		etcd_client_free(c);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	*out = c;
	return 0;
}

static void wipe_token(struct etcd_client *c)
{
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
		c->token = NULL;
	}
}

void etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	for (size_t i = 0; i < c->n_eps; i++)
		free(c->eps[i].url);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->user);
	if (c->password)
		ibvf_file_wipe_free(c->password, c->password_len);
	wipe_token(c);
	pthread_mutex_destroy(&c->mu);
	free(c);
	curl_global_cleanup();
}

const char *etcd_client_endpoint(const struct etcd_client *c)
{
	return c->eps[atomic_load(&c->cur) % c->n_eps].url;
}

uint64_t etcd_client_calls(const struct etcd_client *c)
{
	return atomic_load(&c->calls);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = size * n;
	char *nb;

	if (add > ETCD_MAX_BODY - b->len) {
		b->too_big = true;
		return 0;
	}
	nb = realloc(b->buf, b->len + add + 1);
	if (!nb)
		return 0;
	memcpy(nb + b->len, p, add);
	b->buf = nb;
	b->len += add;
	b->buf[b->len] = '\0';
	return add;
}

/* The options every request of @c sets on @h: TLS, timeouts, no redirects. */
static CURLcode common_opts(struct etcd_client *c, CURL *h, const char *url, struct curl_slist *hdr,
			    long timeout_ms, char *curl_err)
{
	CURLcode rc = CURLE_OK;

	rc |= curl_easy_setopt(h, CURLOPT_URL, url);
	rc |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	rc |= curl_easy_setopt(h, CURLOPT_USERAGENT, ETCD_USER_AGENT);
	rc |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
	rc |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			       timeout_ms < 1000 ? timeout_ms : 1000L);
	rc |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	rc |= curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	rc |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	rc |= curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	rc |= curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (c->ca_file)
		rc |= curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->cert_file) {
		rc |= curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
		rc |= curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		rc |= curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
		rc |= curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
	return rc;
}

/* What one attempt at one endpoint came to. */
enum outcome {
	OUT_OK,	       /* *reply holds the answer */
	OUT_NEXT,      /* transport or availability failure: try another endpoint */
	OUT_NOT_FOUND, /* HTTP 404 without an etcd error: no such gateway path */
	OUT_AUTH,      /* the token was refused: authenticate again */
	OUT_FAIL,      /* an etcd answer that is final; ret holds the errno */
};

static int grpc_errno(int code)
{
	switch (code) {
	case GRPC_NOT_FOUND:
		return -ENOENT;
	case GRPC_ALREADY_EXISTS:
		return -EEXIST;
	case GRPC_PERMISSION_DENIED:
	case GRPC_UNAUTHENTICATED:
		return -EACCES;
	case GRPC_OUT_OF_RANGE:
		return -ERANGE;
	case GRPC_DEADLINE_EXCEEDED:
		return -ETIMEDOUT;
	case GRPC_UNAVAILABLE:
		return -EAGAIN;
	case GRPC_FAILED_PRECONDITION:
	case GRPC_INVALID_ARGUMENT:
	default:
		return -EINVAL;
	}
}

static int curl_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	default:
		return -EIO;
	}
}

/*
 * POST @body to @ep's @path once. *@ret gets the errno of a failure and
 * @why its reason (without the endpoint, which the caller adds).
 */
static enum outcome post_once(struct etcd_client *c, struct endpoint *ep, const char *path,
			      const char *body, const char *token, long timeout_ms, json_t **reply,
			      int *ret, char *why, size_t whylen)
{
	char url[512], curl_err[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdr = NULL, *t;
	struct body b = {0};
	CURLcode rc;
	long status = 0;
	json_t *j, *e;
	enum outcome res;

	*reply = NULL;
	snprintf(url, sizeof(url), "%s%s%s", ep->url, ep->api, path);
	hdr = curl_slist_append(NULL, "Content-Type: application/json");
	if (hdr && (t = curl_slist_append(hdr, "Expect:")))
		hdr = t;
	if (hdr && token) {
		size_t n = strlen(token) + sizeof("Authorization: ");
		char *line = malloc(n);

		t = NULL;
		if (line) {
			snprintf(line, n, "Authorization: %s", token);
			t = curl_slist_append(hdr, line);
			explicit_bzero(line, n);
			free(line);
		}
		if (t) {
			hdr = t;
		} else {
			curl_slist_free_all(hdr);
			hdr = NULL;
		}
	}
	if (!hdr) {
		*ret = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		return OUT_FAIL;
	}
	curl_easy_reset(c->curl);
	rc = common_opts(c, c->curl, url, hdr, timeout_ms, curl_err);
	rc |= curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
	rc |= curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	rc |= curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	rc |= curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	rc |= curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &b);
	if (rc != CURLE_OK) {
		*ret = -EINVAL;
		snprintf(why, whylen, "libcurl refused an option");
		res = OUT_FAIL;
		goto out;
	}
	atomic_fetch_add(&c->calls, 1);
	rc = curl_easy_perform(c->curl);
	if (rc != CURLE_OK) {
		*ret = b.too_big ? -EFBIG : curl_errno(rc);
		if (rc == CURLE_OPERATION_TIMEDOUT)
			snprintf(why, whylen, "no answer within %ld ms", timeout_ms);
		else
			snprintf(why, whylen, "%s", *curl_err ? curl_err : curl_easy_strerror(rc));
		res = OUT_NEXT;
		goto out;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	j = b.buf ? json_loadb(b.buf, b.len, 0, NULL) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		*ret = status >= 500 ? -EIO : status == 404 ? -ENOENT : -EPROTO;
		snprintf(why, whylen, "HTTP %ld, %s", status,
			 b.len ? "an answer that is not JSON" : "an empty answer");
		res = status >= 500 ? OUT_NEXT : status == 404 ? OUT_NOT_FOUND : OUT_FAIL;
		goto out;
	}
	e = json_object_get(j, "error");
	if (e) {
		int code = (int)json_integer_value(json_object_get(j, "code"));
		const char *msg = json_string_value(json_object_get(j, "message"));

		if (!msg)
			msg = json_is_string(e) ? json_string_value(e) : "error";
		*ret = grpc_errno(code);
		/* etcd answers a request without a token with InvalidArgument */
		if (strstr(msg, "user name is empty") || strstr(msg, "authentication failed"))
			*ret = -EACCES;
		snprintf(why, whylen, "%s (gRPC code %d)", msg, code);
		json_decref(j);
		if (code == GRPC_UNAVAILABLE || code == GRPC_DEADLINE_EXCEEDED)
			res = OUT_NEXT;
		else if (token &&
			 (code == GRPC_UNAUTHENTICATED || strstr(msg, "invalid auth token")))
			res = OUT_AUTH;
		else
			res = OUT_FAIL;
		goto out;
	}
	if (status >= 300) {
		*ret = status >= 500 ? -EIO : -EPROTO;
		snprintf(why, whylen, "HTTP %ld", status);
		json_decref(j);
		res = status >= 500 ? OUT_NEXT : OUT_FAIL;
		goto out;
	}
	*reply = j;
	res = OUT_OK;
out:
	for (t = hdr; t; t = t->next)
		explicit_bzero(t->data, strlen(t->data));
	curl_slist_free_all(hdr);
	free(b.buf);
	return res;
}

/* The latest failure at each endpoint of one call, for its message. */
struct failures {
	char why[ETCD_MAX_ENDPOINTS][200];
};

static void note_failure(struct failures *f, size_t i, const struct endpoint *ep, const char *path,
			 const char *why)
{
	snprintf(f->why[i], sizeof(f->why[i]), "%s%s%s: %s", ep->url, ep->api, path, why);
}

/* "; "-joined failures of the endpoints that failed, in endpoint order */
static const char *failure_list(const struct failures *f, size_t n, char *out, size_t len)
{
	size_t l = 0;

	out[0] = '\0';
	for (size_t i = 0; i < n && l < len; i++) {
		if (!f->why[i][0])
			continue;
		snprintf(out + l, len - l, "%s%s", l ? "; " : "", f->why[i]);
		l = strlen(out);
	}
	return out[0] ? out : "(no attempt)";
}

static int sleep_ms(int64_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000};

	return nanosleep(&ts, NULL);
}

/*
 * Get a token from @ep with the client's user and password (Auth.Authenticate).
 * Called with mu held.
 */
static enum outcome authenticate(struct etcd_client *c, struct endpoint *ep, long timeout_ms,
				 int *ret, char *why, size_t whylen)
{
	json_t *body = json_object(), *reply = NULL;
	char *text;
	enum outcome res;
	const char *tok;

	if (!body || json_object_set_new(body, "name", json_string(c->user)) ||
	    json_object_set_new(body, "password", json_stringn(c->password, c->password_len))) {
		json_decref(body);
		*ret = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		return OUT_FAIL;
	}
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body); /* jansson's own copy: ibvf_json_wipe_on_free() wipes it when set */
	if (!text) {
		*ret = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		return OUT_FAIL;
	}
	res = post_once(c, ep, "/auth/authenticate", text, NULL, timeout_ms, &reply, ret, why,
			whylen);
	explicit_bzero(text, strlen(text));
	free(text);
	if (res != OUT_OK) {
		if (res == OUT_FAIL && (*ret == -EINVAL || *ret == -EACCES)) {
			*ret = -EACCES;
			snprintf(why + strlen(why), whylen - strlen(why), " as user \"%s\"",
				 c->user);
		}
		return res;
	}
	tok = json_string_value(json_object_get(reply, "token"));
	if (!tok || !*tok) {
		json_decref(reply);
		*ret = -EPROTO;
		snprintf(why, whylen, "authenticate answered no token");
		return OUT_FAIL;
	}
	wipe_token(c);
	c->token = strdup(tok);
	json_decref(reply);
	if (!c->token) {
		*ret = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		return OUT_FAIL;
	}
	return OUT_OK;
}

/*
 * One gateway call: @path ("/kv/range") with @body, over the endpoints with
 * failover and the call's deadline. *@reply gets the answer object.
 */
static int call_endpoints(struct etcd_client *c, const char *path, json_t *body, json_t **reply,
			  char *err, size_t errlen)
{
	struct failures f = {0};
	char fails[IBVF_ERR_LEN - 64], why[160];
	int64_t deadline = ibvf_mono_ms() + c->timeout_ms, backoff = 50;
	char *text = json_dumps(body, JSON_COMPACT);
	int ret = -ETIMEDOUT;
	bool reauthed = false;

	*reply = NULL;
	if (!text)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	pthread_mutex_lock(&c->mu);
	for (;;) {
		size_t start = atomic_load(&c->cur);

		for (size_t k = 0; k < c->n_eps; k++) {
			size_t i = (start + k) % c->n_eps;
			struct endpoint *ep = &c->eps[i];
			int64_t left = deadline - ibvf_mono_ms();
			long t = left < c->attempt_timeout_ms ? (long)left
							      : (long)c->attempt_timeout_ms;
			enum outcome res;

			if (t <= 0)
				goto timeout;
			if (c->password && !c->token) {
				res = authenticate(c, ep, t, &ret, why, sizeof(why));
				if (res == OUT_NOT_FOUND && c->api == ETCD_API_AUTO &&
				    !strcmp(ep->api, "/v3")) {
					ep->api = "/v3beta";
					k--;
					continue;
				}
				if (res != OUT_OK) {
					note_failure(&f, i, ep, "/auth/authenticate", why);
					if (res == OUT_NEXT)
						continue;
					goto fail;
				}
				t = deadline - ibvf_mono_ms();
				if (t > c->attempt_timeout_ms)
					t = c->attempt_timeout_ms;
				if (t <= 0)
					goto timeout;
			}
			res = post_once(c, ep, path, text, c->token, t, reply, &ret, why,
					sizeof(why));
			switch (res) {
			case OUT_OK:
				atomic_store(&c->cur, i);
				pthread_mutex_unlock(&c->mu);
				free(text);
				return 0;
			case OUT_NOT_FOUND:
				if (c->api == ETCD_API_AUTO && !strcmp(ep->api, "/v3")) {
					ep->api = "/v3beta"; /* etcd 3.3: ask this endpoint there */
					k--;
					continue;
				}
				note_failure(&f, i, ep, path, why);
				goto fail;
			case OUT_AUTH:
				wipe_token(c);
				if (!reauthed) {
					reauthed = true;
					k--;
					continue;
				}
				note_failure(&f, i, ep, path, why);
				goto fail;
			case OUT_NEXT:
				note_failure(&f, i, ep, path, why);
				continue;
			case OUT_FAIL:
				note_failure(&f, i, ep, path, why);
				goto fail;
			}
		}
		if (ibvf_mono_ms() + backoff >= deadline)
			goto timeout;
		pthread_mutex_unlock(&c->mu);
		sleep_ms(backoff);
		backoff = backoff < 400 ? backoff * 2 : 400;
		pthread_mutex_lock(&c->mu);
	}
timeout:
	pthread_mutex_unlock(&c->mu);
	free(text);
	if (ret == -EAGAIN)
		ret = -ETIMEDOUT;
	return ibvf_errf(err, errlen, ret, "etcd %s: no endpoint answered within %u ms: %s", path,
			 c->timeout_ms, failure_list(&f, c->n_eps, fails, sizeof(fails)));
fail:
	pthread_mutex_unlock(&c->mu);
	free(text);
	return ibvf_errf(err, errlen, ret, "etcd %s",
			 failure_list(&f, c->n_eps, fails, sizeof(fails)));
}

/* ibvf_etcd_errors_total's class of a failed call's errno. */
static const char *error_class(int ret)
{
	switch (-ret) {
	case ETIMEDOUT:
		return "timeout";
	case ECONNREFUSED:
	case ECONNRESET:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENOTCONN:
	case EAGAIN:
		return "unavailable";
	case EACCES:
	case EPERM:
	case EKEYREJECTED:
		return "auth";
	default:
		return "other";
	}
}

/*
 * call_endpoints() timed: ibvf_etcd_request_duration_seconds{op} and
 * ibvf_etcd_errors_total{op,class} (docs/metrics.md); @op is the gateway
 * path without its slash ("kv/range"), a fixed set.
 */
static struct ibvf_metric *etcd_lat, *etcd_errs;
static pthread_once_t etcd_metrics_once = PTHREAD_ONCE_INIT;

static void etcd_metrics_init(void)
{
	static const char *const l_op[] = {"op", NULL};
	static const char *const l_err[] = {"op", "class", NULL};
	struct ibvf_metrics *r = ibvf_metrics_default();

	etcd_lat = ibvf_metric_register(
		r, IBVF_METRIC_HISTOGRAM, "ibvf_etcd_request_duration_seconds",
		"Time of one etcd request (cluster mode), failover and retries included, by op.",
		l_op, ibvf_metric_latency_buckets, ibvf_metric_latency_n_buckets, 16);
	etcd_errs = ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_etcd_errors_total",
					 "Failed etcd requests (cluster mode), by op and class "
					 "(timeout, unavailable, auth, other).",
					 l_err, NULL, 0, 64);
}

static int call(struct etcd_client *c, const char *path, json_t *body, json_t **reply, char *err,
		size_t errlen)
{
	const char *op = path[0] == '/' ? path + 1 : path;
	uint64_t t0 = ibvf_mono_ns();
	int ret = call_endpoints(c, path, body, reply, err, errlen);

	pthread_once(&etcd_metrics_once, etcd_metrics_init);
	ibvf_metric_observe(etcd_lat, (const char *[]){op}, (double)(ibvf_mono_ns() - t0) / 1e9);
	if (ret < 0)
		ibvf_metric_inc(etcd_errs, (const char *[]){op, error_class(ret)});
	return ret;
}

int etcd_prefix_end(const char *prefix, size_t len, char *end, size_t end_size)
{
	size_t n = len;

	while (n && (unsigned char)prefix[n - 1] == 0xff)
		n--;
	if (!n) {
		if (end_size < 1)
			return -ENOSPC;
		end[0] = '\0'; /* every key: etcd's "\0" range end */
		return 1;
	}
	if (n > end_size)
		return -ENOSPC;
	memcpy(end, prefix, n);
	end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
	return (int)n;
}

static size_t len_or_strlen(const char *s, size_t n)
{
	return n || !s ? n : strlen(s);
}

/* key (+ range_end) of a RangeRequest, DeleteRangeRequest or Compare */
static int set_key_range(json_t *o, const char *key, size_t key_len, const char *range_end,
			 size_t range_end_len)
{
	int ret = set_bytes(o, "key", key, len_or_strlen(key, key_len));

	if (!ret && range_end)
		ret = set_bytes(o, "range_end", range_end, len_or_strlen(range_end, range_end_len));
	return ret;
}

static json_t *range_body(const char *key, size_t key_len, const char *range_end,
			  size_t range_end_len, int64_t limit, bool keys_only)
{
	json_t *b = json_object();

	if (!b || set_key_range(b, key, key_len, range_end, range_end_len) ||
	    (limit && set_i64(b, "limit", limit)) ||
	    (keys_only && json_object_set_new(b, "keys_only", json_true()))) {
		json_decref(b);
		return NULL;
	}
	return b;
}

int etcd_range(struct etcd_client *c, const char *key, size_t key_len, const char *range_end,
	       size_t range_end_len, int64_t limit, bool keys_only, struct etcd_range_result *out,
	       char *err, size_t errlen)
{
	json_t *b = range_body(key, key_len, range_end, range_end_len, limit, keys_only), *r;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!b)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = call(c, "/kv/range", b, &r, err, errlen);
	json_decref(b);
	if (ret)
		return ret;
	ret = range_from_json(r, out);
	json_decref(r);
	if (ret)
		return ibvf_errf(err, errlen, ret, "etcd /kv/range: %s",
				 ret == -EPROTO ? "a key or value that is not base64"
						: "out of memory");
	return 0;
}

static json_t *put_body(const char *key, size_t key_len, const char *value, size_t value_len,
			int64_t lease)
{
	json_t *b = json_object();

	if (!b || set_bytes(b, "key", key, len_or_strlen(key, key_len)) ||
	    set_bytes(b, "value", value, len_or_strlen(value, value_len)) ||
	    (lease && set_i64(b, "lease", lease))) {
		json_decref(b);
		return NULL;
	}
	return b;
}

int etcd_put(struct etcd_client *c, const char *key, size_t key_len, const char *value,
	     size_t value_len, int64_t lease, int64_t *revision, char *err, size_t errlen)
{
	json_t *b = put_body(key, key_len, value, value_len, lease), *r;
	int ret;

	if (!b)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = call(c, "/kv/put", b, &r, err, errlen);
	json_decref(b);
	if (ret)
		return ret;
	if (revision)
		*revision = jint(json_object_get(r, "header"), "revision");
	json_decref(r);
	return 0;
}

static const char *const cmp_target[] = {"VERSION", "CREATE", "MOD", "VALUE"};
static const char *const cmp_result[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
static const char *const cmp_field[] = {"version", "create_revision", "mod_revision", "value"};

static json_t *cmp_json(const struct etcd_cmp *m)
{
	json_t *o = json_object();
	int ret;

	if (!o)
		return NULL;
	ret = set_key_range(o, m->key, m->key_len, m->range_end, m->range_end_len);
	if (!ret && (json_object_set_new(o, "target", json_string(cmp_target[m->target])) ||
		     json_object_set_new(o, "result", json_string(cmp_result[m->result]))))
		ret = -ENOMEM;
	if (!ret && m->target == ETCD_CMP_VALUE)
		ret = set_bytes(o, "value", m->value ? m->value : "", m->value_len);
	else if (!ret)
		ret = set_i64(o, cmp_field[m->target], m->number);
	if (ret) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *op_json(const struct etcd_op *op)
{
	json_t *inner = NULL;
	const char *name = NULL;

	switch (op->type) {
	case ETCD_OP_RANGE:
		inner = range_body(op->key, op->key_len, op->range_end, op->range_end_len, 0,
				   false);
		name = "request_range";
		break;
	case ETCD_OP_PUT:
		inner = put_body(op->key, op->key_len, op->value, op->value_len, op->lease);
		name = "request_put";
		break;
	case ETCD_OP_DELETE:
		inner = json_object();
		if (inner &&
		    set_key_range(inner, op->key, op->key_len, op->range_end, op->range_end_len)) {
			json_decref(inner);
			inner = NULL;
		}
		name = "request_delete_range";
		break;
	}
	return inner ? json_pack("{s:o}", name, inner) : NULL;
}

void etcd_txn_result_free(struct etcd_txn_result *r)
{
	for (size_t i = 0; r && i < r->n_responses; i++)
		etcd_range_result_free(&r->responses[i]);
	if (r) {
		free(r->responses);
		memset(r, 0, sizeof(*r));
	}
}

int etcd_txn(struct etcd_client *c, const struct etcd_cmp *cmp, size_t n_cmp,
	     const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
	     size_t n_failure, struct etcd_txn_result *out, char *err, size_t errlen)
{
	json_t *b = json_object(), *ca = json_array(), *sa = json_array(), *fa = json_array();
	json_t *r = NULL, *resp;
	int ret = (b && ca && sa && fa) ? 0 : -ENOMEM;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; !ret && i < n_cmp; i++)
		ret = json_array_append_new(ca, cmp_json(&cmp[i])) ? -ENOMEM : 0;
	for (size_t i = 0; !ret && i < n_success; i++)
		ret = json_array_append_new(sa, op_json(&success[i])) ? -ENOMEM : 0;
	for (size_t i = 0; !ret && i < n_failure; i++)
		ret = json_array_append_new(fa, op_json(&failure[i])) ? -ENOMEM : 0;
	if (!ret && (json_object_set(b, "compare", ca) || json_object_set(b, "success", sa) ||
		     json_object_set(b, "failure", fa)))
		ret = -ENOMEM;
	json_decref(ca);
	json_decref(sa);
	json_decref(fa);
	if (ret) {
		json_decref(b);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = call(c, "/kv/txn", b, &r, err, errlen);
	json_decref(b);
	if (ret)
		return ret;
	out->succeeded = json_is_true(json_object_get(r, "succeeded")); /* omitted: false */
	out->revision = jint(json_object_get(r, "header"), "revision");
	resp = json_object_get(r, "responses");
	if (json_array_size(resp)) {
		out->responses = calloc(json_array_size(resp), sizeof(*out->responses));
		if (!out->responses)
			ret = -ENOMEM;
	}
	for (size_t i = 0; !ret && i < json_array_size(resp); i++) {
		json_t *rr = json_object_get(json_array_get(resp, i), "response_range");

		if (rr)
			ret = range_from_json(rr, &out->responses[i]);
		if (!ret)
			out->n_responses++;
	}
	json_decref(r);
	if (ret) {
		etcd_txn_result_free(out);
		return ibvf_errf(err, errlen, ret, "etcd /kv/txn: %s",
				 ret == -EPROTO ? "a key or value that is not base64"
						: "out of memory");
	}
	return 0;
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t id, int64_t *id_out,
		     int64_t *ttl_out, char *err, size_t errlen)
{
	json_t *b = json_object(), *r;
	int ret;

	if (!b || set_i64(b, "TTL", ttl_s) || (id && set_i64(b, "ID", id))) {
		json_decref(b);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = call(c, "/lease/grant", b, &r, err, errlen);
	json_decref(b);
	if (ret)
		return ret;
	if (json_object_get(r, "error") && json_string_value(json_object_get(r, "error"))[0]) {
		/* LeaseGrantResponse.error: a refusal carried in the answer */
		ret = ibvf_errf(err, errlen, -EEXIST, "etcd /lease/grant: %s",
				json_string_value(json_object_get(r, "error")));
		json_decref(r);
		return ret;
	}
	if (id_out)
		*id_out = jint(r, "ID");
	if (ttl_out)
		*ttl_out = jint(r, "TTL");
	json_decref(r);
	return 0;
}

int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl_out, char *err,
			 size_t errlen)
{
	json_t *b = json_object(), *r, *res;
	int64_t ttl;
	int ret;

	if (!b || set_i64(b, "ID", id)) {
		json_decref(b);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = call(c, "/lease/keepalive", b, &r, err, errlen);
	json_decref(b);
	if (ret)
		return ret;
	/* a streaming RPC: the gateway wraps the one answer in "result" */
	res = json_object_get(r, "result");
	ttl = jint(res ? res : r, "TTL");
	json_decref(r);
	if (ttl <= 0)
		return ibvf_errf(err, errlen, -ENOENT,
				 "etcd /lease/keepalive: lease %" PRId64 " expired or revoked", id);
	if (ttl_out)
		*ttl_out = ttl;
	return 0;
}

int etcd_lease_revoke(struct etcd_client *c, int64_t id, char *err, size_t errlen)
{
	json_t *b = json_object(), *r;
	int ret;

	if (!b || set_i64(b, "ID", id)) {
		json_decref(b);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = call(c, "/lease/revoke", b, &r, err, errlen);
	json_decref(b);
	if (!ret)
		json_decref(r);
	return ret;
}

/* ---- watch ---- */

struct watch_state {
	etcd_watch_cb cb;
	void *arg;
	char *line; /* partial line carried between writes */
	size_t len;
	int64_t next_rev;
	int64_t compact_rev;
	bool created, stopped, canceled;
	int err;
	char why[256];
};

/* One {"result":...} or {"error":...} object of the stream. */
static void watch_message(struct watch_state *w, const char *text, size_t len)
{
	json_t *j = json_loadb(text, len, 0, NULL), *res, *evs;
	int64_t rev;

	if (!j) {
		w->err = -EPROTO;
		snprintf(w->why, sizeof(w->why), "a watch message that is not JSON");
		w->stopped = true;
		return;
	}
	if (json_object_get(j, "error")) {
		const char *msg =
			json_string_value(json_object_get(json_object_get(j, "error"), "message"));

		w->err = -EIO;
		snprintf(w->why, sizeof(w->why), "%s", msg ? msg : "watch stream error");
		json_decref(j);
		w->stopped = true;
		return;
	}
	res = json_object_get(j, "result");
	rev = jint(json_object_get(res, "header"), "revision");
	if (json_is_true(json_object_get(res, "created")))
		w->created = true;
	if (jint(res, "compact_revision")) {
		w->compact_rev = jint(res, "compact_revision");
		w->canceled = true;
	}
	if (json_is_true(json_object_get(res, "canceled")))
		w->canceled = true;
	evs = json_object_get(res, "events");
	for (size_t i = 0; !w->stopped && i < json_array_size(evs); i++) {
		json_t *ev = json_array_get(evs, i);
		const char *type = json_string_value(json_object_get(ev, "type"));
		struct etcd_kv kv;
		struct etcd_event e = {
			.type = type && !strcmp(type, "DELETE") ? ETCD_EVENT_DELETE
								: ETCD_EVENT_PUT,
			.kv = &kv,
			.revision = rev,
		};

		if (kv_from_json(json_object_get(ev, "kv"), &kv)) {
			w->err = -EPROTO;
			snprintf(w->why, sizeof(w->why), "a watch event that is not base64");
			w->stopped = true;
			break;
		}
		if (kv.mod_revision >= w->next_rev) {
			w->next_rev = kv.mod_revision + 1;
			if (w->cb(w->arg, &e))
				w->stopped = true;
		}
		kv_free(&kv);
	}
	if (w->canceled)
		w->stopped = true;
	json_decref(j);
}

static size_t on_watch(char *p, size_t size, size_t n, void *arg)
{
	struct watch_state *w = arg;
	size_t add = size * n;
	char *nb, *nl, *start;

	if (add > ETCD_MAX_BODY - w->len)
		return 0;
	nb = realloc(w->line, w->len + add + 1);
	if (!nb)
		return 0;
	memcpy(nb + w->len, p, add);
	w->line = nb;
	w->len += add;
	w->line[w->len] = '\0';
	start = w->line;
	while (!w->stopped && (nl = memchr(start, '\n', w->len - (size_t)(start - w->line)))) {
		if (nl > start)
			watch_message(w, start, (size_t)(nl - start));
		start = nl + 1;
	}
	w->len -= (size_t)(start - w->line);
	memmove(w->line, start, w->len);
	return w->stopped ? 0 : add;
}

int etcd_watch(struct etcd_client *c, const char *key, size_t key_len, const char *range_end,
	       size_t range_end_len, int64_t start_rev, uint32_t duration_ms, etcd_watch_cb cb,
	       void *arg, int64_t *next_rev, char *err, size_t errlen)
{
	struct watch_state w = {.cb = cb, .arg = arg, .next_rev = start_rev};
	int64_t end = duration_ms ? ibvf_mono_ms() + duration_ms : INT64_MAX;
	struct failures f = {0};
	char fails[IBVF_ERR_LEN - 64];
	CURL *h = curl_easy_init();
	int ret = 0, backoff = 50;
	size_t i = atomic_load(&c->cur);
	bool progressed = true;

	if (!h)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (c->password) {
		/* make sure a token exists: a cheap authenticated call */
		struct etcd_range_result rr;

		ret = etcd_range(c, "\0", 1, NULL, 0, 1, true, &rr, err, errlen);
		etcd_range_result_free(&rr);
		if (ret) {
			curl_easy_cleanup(h);
			return ret;
		}
	}
	while (!w.stopped) {
		struct endpoint *ep = &c->eps[i % c->n_eps];
		char url[512], curl_err[CURL_ERROR_SIZE] = "", *text = NULL, *auth = NULL;
		json_t *b = json_object(), *cr = json_object();
		struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
		int64_t left = end - ibvf_mono_ms();
		CURLcode rc;

		if (left <= 0)
			break;
		if (!b || !cr || !hdr ||
		    set_key_range(cr, key, key_len, range_end, range_end_len) ||
		    (w.next_rev && set_i64(cr, "start_revision", w.next_rev)) ||
		    json_object_set(b, "create_request", cr) ||
		    !(text = json_dumps(b, JSON_COMPACT))) {
			json_decref(b);
			json_decref(cr);
			curl_slist_free_all(hdr);
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			break;
		}
		json_decref(b);
		json_decref(cr);
		pthread_mutex_lock(&c->mu);
		if (c->token) {
			size_t n = strlen(c->token) + sizeof("Authorization: ");
			struct curl_slist *t;

			auth = malloc(n);
			if (auth) {
				snprintf(auth, n, "Authorization: %s", c->token);
				if ((t = curl_slist_append(hdr, auth)))
					hdr = t;
				explicit_bzero(auth, n);
				free(auth);
			}
		}
		pthread_mutex_unlock(&c->mu);
		snprintf(url, sizeof(url), "%s%s/watch", ep->url, ep->api);
		curl_easy_reset(h);
		w.created = false;
		rc = common_opts(c, h, url, hdr, left > LONG_MAX ? LONG_MAX : (long)left, curl_err);
		rc |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->attempt_timeout_ms);
		rc |= curl_easy_setopt(h, CURLOPT_POST, 1L);
		rc |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
		rc |= curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
		rc |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch);
		rc |= curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
		atomic_fetch_add(&c->calls, 1);
		rc = rc == CURLE_OK ? curl_easy_perform(h) : rc;
		free(text);
		for (struct curl_slist *t = hdr; t; t = t->next)
			explicit_bzero(t->data, strlen(t->data));
		curl_slist_free_all(hdr);
		w.len = 0;
		/* the duration is curl's timeout: a stream that was set up and then
		 * timed out ended on time (curl may fire a millisecond early) */
		if (w.stopped ||
		    (rc == CURLE_OPERATION_TIMEDOUT && (w.created || ibvf_mono_ms() >= end)))
			break;
		/* the stream broke: resume at the next endpoint after a short wait */
		note_failure(&f, i % c->n_eps, ep, "/watch",
			     rc != CURLE_OK ? (*curl_err ? curl_err : curl_easy_strerror(rc))
					    : "stream ended");
		ret = rc != CURLE_OK ? curl_errno(rc) : -EIO;
		if (w.created)
			progressed = true;
		i++;
		if (i % c->n_eps == atomic_load(&c->cur) % c->n_eps) {
			if (!progressed)
				break; /* a whole pass with no stream set up */
			progressed = false;
		}
		if (ibvf_mono_ms() + backoff >= end)
			break;
		sleep_ms(backoff);
		backoff = backoff < 400 ? backoff * 2 : 400;
		ret = 0;
	}
	curl_easy_cleanup(h);
	free(w.line);
	if (next_rev)
		*next_rev = w.compact_rev ? w.compact_rev : w.next_rev;
	if (w.compact_rev)
		return ibvf_errf(err, errlen, -ERANGE,
				 "etcd /watch: revision %" PRId64 " is compacted (oldest %" PRId64
				 ")",
				 start_rev, w.compact_rev);
	if (w.err)
		return ibvf_errf(err, errlen, w.err, "etcd %s/watch: %s", etcd_client_endpoint(c),
				 w.why);
	if (ret)
		return ibvf_errf(err, errlen, ret, "etcd /watch: no endpoint held the stream: %s",
				 failure_list(&f, c->n_eps, fails, sizeof(fails)));
	return 0;
}
