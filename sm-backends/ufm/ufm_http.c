// SPDX-License-Identifier: MIT
/* libcurl client of the ufm SM backend (see ufm_http.h). */
#include "ufm_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define UFM_USER_AGENT "ibvf/" IBVF_VERSION " sm-ufm"

struct ufm_http {
	CURL *curl;
	char *base_url;
	struct curl_slist *hdr_get;  /* Accept (+ Authorization for tokens) */
	struct curl_slist *hdr_post; /* the same + Content-Type, no Expect */
	struct ufm_reply *reply;     /* reply being received */
	bool too_big;
	long timeout_ms;
	char *secret;	    /* password or token, only to mask it in reasons */
	char *secret_basic; /* base64 of "user:password", as sent in the header */
	char curl_err[CURL_ERROR_SIZE];
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct ufm_http *h = arg;
	struct ufm_reply *r = h->reply;
	size_t add = size * n;
	char *nb;

	if (add > UFM_HTTP_MAX_BODY - r->len) {
		h->too_big = true;
		return 0;
	}
	nb = realloc(r->body, r->len + add + 1);
	if (!nb)
		return 0;
	memcpy(nb + r->len, p, add);
	r->body = nb;
	r->len += add;
	r->body[r->len] = '\0';
	return add;
}

/* Wipe and free a header list that may hold the token. */
static void free_headers(struct curl_slist *l)
{
	for (struct curl_slist *i = l; i; i = i->next)
		explicit_bzero(i->data, strlen(i->data));
	curl_slist_free_all(l);
}

static int build_headers(struct ufm_http *h, const char *token)
{
	struct curl_slist *g = NULL, *p = NULL;
	char *auth = NULL;
	int ok = 1;

	if (token) {
		size_t n = strlen(token) + sizeof("Authorization: Basic ");

		auth = malloc(n);
		if (!auth)
			return -ENOMEM;
		snprintf(auth, n, "Authorization: Basic %s", token);
	}
	/* curl_slist_append() copies; a NULL result means out of memory */
#define APPEND(l, s)                                                                               \
	do {                                                                                       \
		struct curl_slist *t_ = curl_slist_append(l, s);                                   \
		if (!t_)                                                                           \
			ok = 0;                                                                    \
		else                                                                               \
			l = t_;                                                                    \
	} while (0)
	APPEND(g, "Accept: application/json");
	APPEND(p, "Accept: application/json");
	APPEND(p, "Content-Type: application/json");
	/* curl would send "Expect: 100-continue" for big bodies and wait for it */
	APPEND(p, "Expect:");
	if (auth) {
		APPEND(g, auth);
		APPEND(p, auth);
		explicit_bzero(auth, strlen(auth));
		free(auth);
	}
#undef APPEND
	h->hdr_get = g;
	h->hdr_post = p;
	return ok ? 0 : -ENOMEM;
}

static int set_tls(struct ufm_http *h, const struct ufm_http_opts *o)
{
	CURL *c = h->curl;
	CURLcode rc = CURLE_OK;

	if (o->insecure) {
		rc |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		rc |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	} else {
		rc |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
		rc |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	}
	if (o->ca_file || o->ca_pem) {
		/* only the configured CA: do not add the system directory */
		rc |= curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
	}
	if (o->ca_file)
		rc |= curl_easy_setopt(c, CURLOPT_CAINFO, o->ca_file);
	if (o->ca_pem) {
		struct curl_blob blob = {
			.data = (void *)o->ca_pem,
			.len = strlen(o->ca_pem),
			.flags = CURL_BLOB_COPY,
		};

		if (curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob) != CURLE_OK)
			return -ENOTSUP;
	}
	if (o->client_cert) {
		rc |= curl_easy_setopt(c, CURLOPT_SSLCERT, o->client_cert);
		rc |= curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
	}
	if (o->client_key) {
		rc |= curl_easy_setopt(c, CURLOPT_SSLKEY, o->client_key);
		rc |= curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
	}
	return rc == CURLE_OK ? 0 : -EINVAL;
}

static int set_options(struct ufm_http *h, const struct ufm_http_opts *o)
{
	CURL *c = h->curl;
	CURLcode rc = CURLE_OK;

	rc |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	rc |= curl_easy_setopt(c, CURLOPT_USERAGENT, UFM_USER_AGENT);
	rc |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->curl_err);
	rc |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	rc |= curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
	rc |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
	rc |= curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	rc |= curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	/*
	 * One connection per call: on a reused connection that dies before the
	 * reply, libcurl silently sends the request again on a new one. The
	 * daemon core owns retries, so a call must be exactly one request.
	 */
	rc |= curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	if (o->username) {
		rc |= curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		rc |= curl_easy_setopt(c, CURLOPT_USERNAME, o->username);
		rc |= curl_easy_setopt(c, CURLOPT_PASSWORD, o->password ? o->password : "");
	}
	return rc == CURLE_OK ? 0 : -EINVAL;
}

/*
 * RFC 4648 base64 of @s (malloc'd), the form libcurl puts "user:password"
 * in for Basic auth (RFC 7617). Written here because libcurl does not export
 * its encoder; it only serves to recognise an echoed header in replies.
 */
static char *base64(const char *s)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s), o = 0;
	char *out = malloc(4 * ((n + 2) / 3) + 1);

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)u[i] << 16 | (i + 1 < n ? (uint32_t)u[i + 1] << 8 : 0) |
			     (i + 2 < n ? u[i + 2] : 0);

		out[o++] = tbl[v >> 18 & 63];
		out[o++] = tbl[v >> 12 & 63];
		out[o++] = i + 1 < n ? tbl[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tbl[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

int ufm_http_new(const struct ufm_http_opts *o, struct ufm_http **out, char *err, size_t errlen)
{
	struct ufm_http *h;
	int ret;

	*out = NULL;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return ibvf_errf(err, errlen, -ENOMEM, "libcurl initialisation failed");
	h = calloc(1, sizeof(*h));
	if (!h) {
		curl_global_cleanup();
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	h->timeout_ms = o->timeout_ms;
	h->base_url = strdup(o->base_url);
	h->curl = curl_easy_init();
	if (o->token || (o->password && *o->password))
		h->secret = strdup(o->token ? o->token : o->password);
	if (o->username && o->password && *o->password) {
		size_t n = strlen(o->username) + strlen(o->password) + 2;
		char *up = malloc(n);

		if (up) {
			snprintf(up, n, "%s:%s", o->username, o->password);
			h->secret_basic = base64(up);
			explicit_bzero(up, n);
			free(up);
		}
	}
	if (!h->base_url || !h->curl ||
	    ((o->token || (o->password && *o->password)) && !h->secret) ||
	    (o->username && o->password && *o->password && !h->secret_basic)) {
		ufm_http_free(h);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = build_headers(h, o->token);
	if (ret) {
		ufm_http_free(h);
		return ibvf_errf(err, errlen, ret, "out of memory");
	}
	ret = set_options(h, o);
	if (ret) {
		ufm_http_free(h);
		return ibvf_errf(err, errlen, ret, "libcurl rejected an HTTP option");
	}
	ret = set_tls(h, o);
	if (ret) {
		ufm_http_free(h);
		return ibvf_errf(err, errlen, ret == -ENOTSUP ? -EINVAL : ret,
				 ret == -ENOTSUP
					 ? "ca_pem: libcurl's TLS library does not take a CA "
					   "as PEM text; use ca_file"
					 : "libcurl rejected a TLS option");
	}
	*out = h;
	return 0;
}

void ufm_http_free(struct ufm_http *h)
{
	if (!h)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	free_headers(h->hdr_get);
	free_headers(h->hdr_post);
	free(h->base_url);
	if (h->secret) {
		explicit_bzero(h->secret, strlen(h->secret));
		free(h->secret);
	}
	if (h->secret_basic) {
		explicit_bzero(h->secret_basic, strlen(h->secret_basic));
		free(h->secret_basic);
	}
	free(h);
	curl_global_cleanup();
}

void ufm_reply_free(struct ufm_reply *r)
{
	if (!r)
		return;
	free(r->body);
	r->body = NULL;
	r->len = 0;
}

static void printable(const char *s, size_t len, char *buf, size_t buflen)
{
	size_t o = 0;

	if (!buflen)
		return;
	/* skip leading white space */
	while (len && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')) {
		s++;
		len--;
	}
	for (size_t i = 0; i < len && o + 1 < buflen; i++) {
		unsigned char ch = (unsigned char)s[i];

		buf[o++] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;
	}
	while (o && buf[o - 1] == ' ')
		o--;
	buf[o] = '\0';
}

void ufm_error_text(const char *body, size_t len, char *buf, size_t buflen)
{
	static const char *const keys[] = {"error",  "message",	    "msg",
					   "detail", "description", NULL};
	json_t *j;

	if (!buflen)
		return;
	buf[0] = '\0';
	if (!body || !len)
		return;
	j = json_loadb(body, len, JSON_DECODE_ANY, NULL);
	if (json_is_string(j)) {
		printable(json_string_value(j), json_string_length(j), buf, buflen);
		json_decref(j);
		return;
	}
	if (json_is_object(j)) {
		for (const char *const *k = keys; *k; k++) {
			json_t *v = json_object_get(j, *k);

			if (json_is_string(v)) {
				printable(json_string_value(v), json_string_length(v), buf, buflen);
				json_decref(j);
				return;
			}
		}
	}
	json_decref(j);
	printable(body, len, buf, buflen);
}

/*
 * Overwrite @secret in @err with '*': every whole copy, and a copy cut off
 * at the end of @err (the reply text is shortened to fit, which may cut an
 * echoed secret in the middle and leave its first characters).
 */
static void mask_one(char *err, const char *secret)
{
	size_t n = secret ? strlen(secret) : 0, len;
	char *p;

	if (!n)
		return;
	while ((p = strstr(err, secret)))
		memset(p, '*', n);
	len = strlen(err);
	for (size_t k = n - 1 < len ? n - 1 : len; k > 0; k--) {
		if (!memcmp(err + len - k, secret, k)) {
			memset(err + len - k, '*', k);
			break;
		}
	}
}

/* Mask the credentials in @err (a server may echo them back); returns @code. */
static int mask_secret(const struct ufm_http *h, char *err, size_t errlen, int code)
{
	if (!err || !errlen)
		return code;
	mask_one(err, h->secret);
	mask_one(err, h->secret_basic);
	return code;
}

/*
 * The errno of a non-2xx reply, under the SM ABI's error contract
 * (include/ibvf/sm_backend.h): transient only where the same request may
 * succeed later - 408 and 429 (RFC 9110 15.5.9, RFC 6585 4), 500, 502, 503,
 * 504; every other 4xx, 501, 505 and the rest of 5xx are permanent.
 */
static int status_errno(long status)
{
	switch (status) {
	case 400:
		return -EINVAL;
	case 401:
		return -EACCES;
	case 403:
		return -EPERM;
	case 404:
		return -ENOENT;
	case 408:
	case 504:
		return -ETIMEDOUT;
	case 409:
		return -EEXIST;
	case 413:
		return -E2BIG;
	case 429:
	case 503:
		return -EAGAIN;
	case 500:
	case 502:
		return -EREMOTEIO;
	default:
		return status >= 500 && status <= 599 ? -EIO : -EPROTO;
	}
}

static int curl_errno(struct ufm_http *h, CURLcode rc)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_PEER_FAILED_VERIFICATION:
		return -EKEYREJECTED;
	case CURLE_SSL_CONNECT_ERROR:
		return -EPROTO;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
		return -ECONNRESET;
	case CURLE_WRITE_ERROR:
		return h->too_big ? -EMSGSIZE : -ENOMEM;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		return -EINVAL;
	default:
		return -EIO;
	}
}

static int prepare(struct ufm_http *h, const char *method, const char *path, const char *body)
{
	CURL *c = h->curl;
	size_t n = strlen(h->base_url) + strlen(path) + 1;
	CURLcode rc = CURLE_OK;
	char *url = malloc(n);

	if (!url)
		return -ENOMEM;
	snprintf(url, n, "%s%s", h->base_url, path);
	rc |= curl_easy_setopt(c, CURLOPT_URL, url);
	free(url);
	/* the handle is reused: clear a DELETE of the previous call */
	rc |= curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
	if (!strcmp(method, "GET") || !strcmp(method, "DELETE")) {
		rc |= curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
		rc |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->hdr_get);
		/* DELETE without a body (UFM guide, "Remove GUIDs from PKey") */
		if (method[0] == 'D')
			rc |= curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	} else {
		rc |= curl_easy_setopt(c, CURLOPT_POST, 1L);
		rc |= curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
				       (curl_off_t)(body ? strlen(body) : 0));
		rc |= curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		rc |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->hdr_post);
	}
	return rc == CURLE_OK ? 0 : -EINVAL;
}

int ufm_http_call(struct ufm_http *h, const char *method, const char *path, const char *body,
		  struct ufm_reply *r, char *err, size_t errlen)
{
	char text[256];
	CURLcode rc;
	int ret;

	memset(r, 0, sizeof(*r));
	if (strcmp(method, "GET") && strcmp(method, "POST") && strcmp(method, "DELETE"))
		return ibvf_errf(err, errlen, -EINVAL, "UFM %s %s: unsupported method", method,
				 path);
	ret = prepare(h, method, path, body);
	if (ret)
		return ibvf_errf(err, errlen, ret, "UFM %s %s: cannot set up the request", method,
				 path);
	h->reply = r;
	h->too_big = false;
	h->curl_err[0] = '\0';
	rc = curl_easy_perform(h->curl);
	h->reply = NULL;
	if (rc != CURLE_OK) {
		ret = curl_errno(h, rc);
		ufm_reply_free(r);
		if (ret == -EMSGSIZE)
			return ibvf_errf(err, errlen, ret, "UFM %s %s: reply larger than %u bytes",
					 method, path, UFM_HTTP_MAX_BODY);
		if (rc == CURLE_OPERATION_TIMEDOUT)
			return ibvf_errf(err, errlen, ret,
					 "UFM %s %s: timed out (timeout_ms %ld): %s", method, path,
					 h->timeout_ms,
					 h->curl_err[0] ? h->curl_err : curl_easy_strerror(rc));
		return ibvf_errf(err, errlen, ret, "UFM %s %s: %s", method, path,
				 h->curl_err[0] ? h->curl_err : curl_easy_strerror(rc));
	}
	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &r->status);
	if (!r->body) {
		/* an empty body: keep the "NUL-terminated" promise */
		r->body = calloc(1, 1);
		if (!r->body)
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	if (r->status >= 200 && r->status <= 299)
		return 0;
	ufm_error_text(r->body, r->len, text, sizeof(text));
	ret = ibvf_errf(err, errlen, status_errno(r->status), "UFM %s %s: HTTP %ld%s%s", method,
			path, r->status, text[0] ? ": " : "", text);
	return mask_secret(h, err, errlen, ret);
}
