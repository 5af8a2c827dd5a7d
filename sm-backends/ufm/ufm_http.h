/* SPDX-License-Identifier: MIT */
/*
 * HTTP(S) client of the ufm SM backend: one libcurl easy handle per backend
 * instance, one connection per call (libcurl would silently re-send a
 * request whose kept-alive connection died; see ufm_http.c), JSON request
 * and reply bodies, and the mapping of transport failures and HTTP status
 * codes to negative errno values with a one-line reason.
 *
 * Rules from the UFM Enterprise REST API guide ("REST API Complementary
 * Information", "PKey GUIDs REST API"): Basic authentication on /ufmRest,
 * token authentication on /ufmRestV3 with "Authorization: Basic <token>",
 * JSON bodies, 200 OK on success.
 *
 * No call retries: the daemon core owns retries and backoff. Reasons never
 * contain the password or the token.
 */
#ifndef IBVF_UFM_HTTP_H
#define IBVF_UFM_HTTP_H

#include <stdbool.h>
#include <stddef.h>

/** Largest reply body accepted, bytes; a bigger one fails with -EMSGSIZE. */
#define UFM_HTTP_MAX_BODY (64u << 20)

/** Settings of a client; strings are copied by ufm_http_new(). */
struct ufm_http_opts {
	const char *base_url;	 /* "https://host:port", no trailing slash */
	const char *username;	 /* Basic auth user, or NULL */
	const char *password;	 /* Basic auth password (with @username) */
	const char *token;	 /* access token sent as "Authorization: Basic <token>", or NULL */
	const char *ca_file;	 /* CA bundle (PEM) path, or NULL for the system store */
	const char *ca_pem;	 /* CA bundle as PEM text, or NULL (exclusive with ca_file) */
	const char *client_cert; /* client certificate (PEM) path, or NULL */
	const char *client_key;	 /* its private key (PEM) path, or NULL */
	bool insecure;		 /* skip TLS peer and host name verification */
	long connect_timeout_ms; /* TCP + TLS connect timeout, ms */
	long timeout_ms;	 /* whole request timeout, ms */
};

struct ufm_http;

/** A reply body: NUL-terminated (the NUL is not counted in @len). */
struct ufm_reply {
	long status; /* HTTP status code */
	char *body;  /* malloc'd; free with ufm_reply_free() */
	size_t len;  /* bytes */
};

/**
 * ufm_http_new() - create a client (no network traffic yet).
 * Return: 0, -ENOMEM, or -EINVAL (libcurl rejected an option, e.g. a CA
 * blob with a TLS library that does not support blobs).
 */
int ufm_http_new(const struct ufm_http_opts *o, struct ufm_http **out, char *err, size_t errlen);

/** ufm_http_free() - close the connection and wipe the credentials; NULL is a no-op. */
void ufm_http_free(struct ufm_http *h);

/**
 * ufm_http_call() - one request, no retry.
 * @method: "GET", "POST" or "DELETE" (no body).
 * @path:   absolute path with query, e.g. "/ufmRest/app/ufm_version".
 * @body:   request body (JSON) for POST, or NULL; sent with
 *          "Content-Type: application/json".
 * @r:      the reply; filled on success and also when the server answered
 *          with a non-2xx status (then @r->status tells which).
 *
 * Return: 0 on a 2xx reply, else a negative errno with "UFM <method> <path>:
 * <reason>" in @err (the HTTP status and UFM's error text when there is a
 * reply):
 *   transport: -ETIMEDOUT (connect or total timeout), -ECONNREFUSED,
 *              -EHOSTUNREACH (name not resolved), -ECONNRESET (connection
 *              closed or reset before a full reply), -EKEYREJECTED (server
 *              certificate or host name not verified), -EPROTO (TLS
 *              handshake failed, e.g. client certificate refused),
 *              -EMSGSIZE (reply > UFM_HTTP_MAX_BODY), -EIO (other);
 *   status:    400 -EINVAL, 401 -EACCES, 403 -EPERM, 404 -ENOENT,
 *              408/504 -ETIMEDOUT, 409 -EEXIST, 413 -E2BIG, 429/503 -EAGAIN,
 *              500/502 -EREMOTEIO, other 5xx -EIO, anything else -EPROTO.
 * Transient (retried by the daemon, include/ibvf/sm_backend.h): -ETIMEDOUT,
 * -ECONNREFUSED, -EHOSTUNREACH, -ECONNRESET, -EAGAIN, -EREMOTEIO; the rest
 * is permanent.
 */
int ufm_http_call(struct ufm_http *h, const char *method, const char *path, const char *body,
		  struct ufm_reply *r, char *err, size_t errlen);

/** ufm_reply_free() - release a reply body (the struct itself is the caller's). */
void ufm_reply_free(struct ufm_reply *r);

/**
 * ufm_error_text() - a short printable reason from a UFM error body: the
 * "error", "message", "msg", "detail" or "description" string of a JSON
 * object, a JSON string, or the text itself; control characters become
 * spaces; truncated to @buflen - 1 bytes. Empty when @len is 0.
 */
void ufm_error_text(const char *body, size_t len, char *buf, size_t buflen);

#endif /* IBVF_UFM_HTTP_H */
