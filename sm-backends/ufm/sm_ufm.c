// SPDX-License-Identifier: MIT
/*
 * ufm SM backend (see sm_ufm.h and docs/ufm.md): configuration, request
 * bodies, reply parsing and the ibvf_sm_ops table. HTTP lives in ufm_http.c.
 */
#include "sm_ufm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "sort.h"
#include "file_read.h"
#include "json_util.h"
#include "ufm_http.h"

#define UFM_DEFAULT_CONNECT_TIMEOUT_MS 5000
#define UFM_DEFAULT_TIMEOUT_MS	       30000
#define UFM_SECRET_MAX		       4096 /* bytes of a password or token file */
#define UFM_CFG_NAME		       "sm.config (ufm)"
#define UFM_DEFAULT_CHANGE_WAIT_MS     1000
#define UFM_CHANGE_POLL_MS	       100
#define UFM_DELETE_GUIDS_MAX	       64   /* GUIDs per DELETE URL (~1.1 KB of path) */
#define UFM_LIST_FRESH_MS	       1000 /* a list's partition stands for the pre-add read */

/* The backend's JSON config (docs/config.md, "sm.config for the ufm backend"). */
struct ufm_config {
	char *address;
	char *scheme;  /* "https" (default) | "http" */
	uint64_t port; /* 0: 443 for https, 80 for http */
	char *auth;    /* "basic" (default) | "token" | "certificate" */
	char *username;
	char *password; /* inline (UFM_PASSWORD); prefer password_file */
	char *password_file;
	char *token_file;
	char *ca_file;
	char *ca_pem; /* PEM text (UFM_CERTIFICATE) */
	char *client_cert;
	char *client_key;
	bool insecure_skip_verify;
	uint64_t connect_timeout_ms; /* 0: min(5000, timeout_ms) */
	uint64_t timeout_ms;
	uint64_t max_guids_per_request; /* 0: no limit */
	bool index0;			/* default true (ib-kubernetes, bare-metal-manager) */
	bool ip_over_ib;		/* default true (UFM's own default) */
	uint64_t change_wait_ms;	/* bound of the last_updated wait; 0: off */
};

struct ibvf_sm_backend {
	struct ufm_http *http;
	const char *prefix;    /* "/ufmRest" or "/ufmRestV3" */
	char where[320];       /* "https://host:443" for descriptions */
	const char *auth_name; /* "basic" | "token" | "certificate" */
	bool insecure;
	bool plain_http;
	size_t max_guids;		    /* 0: no limit */
	struct ibvf_sm_pkey_flags defaults; /* index0, ip_over_ib when the daemon gives none */
	unsigned ver_major, ver_minor;	    /* from ufm_version; 0.0: unparsable */
	bool ver_read;			    /* ufm_version was read */
	/* back-to-back changes (GET .../pkeys/last_updated, docs/ufm.md) */
	uint64_t change_wait_ms;
	bool lu_absent;	    /* this UFM has no last_updated resource */
	bool lu_pending;    /* a change was sent; last_updated should move past lu_before */
	char lu_before[64]; /* last_updated as read before that change ("" for null) */
	int64_t lu_sent_ms; /* CLOCK_MONOTONIC ms when that change was answered */
	unsigned long long lu_waits, lu_waited_ms, lu_timeouts; /* for tests and docs */
	/*
	 * Fewer serial round trips (issue 19): a second connection for the
	 * read that runs beside another (last_updated beside the PKey read or
	 * the list), the value it read, and the partitions of the last list,
	 * which stand for an add's PKey read while fresh (UFM_LIST_FRESH_MS, no
	 * change of that PKey sent since).
	 */
	struct ufm_http *http2;
	bool lu_pre_valid; /* lu_pre was read after the previous change was answered */
	char lu_pre[64];
	int64_t lu_pre_ms;    /* when that read started */
	struct pk_cached *lc; /* the last list's partitions (sorted by PKey) */
	size_t n_lc;
	bool lc_valid;
	int64_t lc_ms; /* when that list started */
};

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static void config_free(struct ufm_config *c)
{
	free(c->address);
	free(c->scheme);
	free(c->auth);
	free(c->username);
	wipe_free(c->password);
	free(c->password_file);
	free(c->token_file);
	free(c->ca_file);
	free(c->ca_pem);
	free(c->client_cert);
	free(c->client_key);
	memset(c, 0, sizeof(*c));
}

static int config_read(struct ibvf_jctx *jc, json_t *o, struct ufm_config *c)
{
	static const char *const keys[] = {
		"address",
		"scheme",
		"port",
		"auth",
		"username",
		"password",
		"password_file",
		"token_file",
		"ca_file",
		"ca_pem",
		"client_cert",
		"client_key",
		"insecure_skip_verify",
		"connect_timeout_ms",
		"timeout_ms",
		"max_guids_per_request",
		"index0",
		"ip_over_ib",
		"change_wait_ms",
		NULL,
	};
	static const struct {
		const char *key;
		size_t off;
	} strs[] = {
#define S(k) {#k, offsetof(struct ufm_config, k)}
		S(address),  S(scheme),	       S(auth),	      S(username),
		S(password), S(password_file), S(token_file), S(ca_file),
		S(ca_pem),   S(client_cert),   S(client_key),
#undef S
	};
	int ret = ibvf_json_check_keys(jc, o, "", keys);

	for (size_t i = 0; !ret && i < sizeof(strs) / sizeof(strs[0]); i++)
		ret = ibvf_json_string(jc, o, "", strs[i].key, (char **)((char *)c + strs[i].off));
	if (!ret)
		ret = ibvf_json_uint(jc, o, "", "port", 1, 65535, &c->port);
	if (!ret)
		ret = ibvf_json_bool(jc, o, "", "insecure_skip_verify", &c->insecure_skip_verify);
	if (!ret)
		ret = ibvf_json_uint(jc, o, "", "connect_timeout_ms", 1, 600000,
				     &c->connect_timeout_ms);
	if (!ret)
		ret = ibvf_json_uint(jc, o, "", "timeout_ms", 1, 3600000, &c->timeout_ms);
	if (!ret)
		ret = ibvf_json_uint(jc, o, "", "max_guids_per_request", 0, 1000000,
				     &c->max_guids_per_request);
	if (!ret)
		ret = ibvf_json_bool(jc, o, "", "index0", &c->index0);
	if (!ret)
		ret = ibvf_json_bool(jc, o, "", "ip_over_ib", &c->ip_over_ib);
	if (!ret)
		ret = ibvf_json_uint(jc, o, "", "change_wait_ms", 0, 60000, &c->change_wait_ms);
	return ret;
}

/* A host name, IPv4 address or IPv6 literal (bare or in brackets); not a URL. */
static int check_address(struct ibvf_jctx *jc, const char *a)
{
	size_t n = strlen(a);

	if (!n)
		return ibvf_json_err(jc, "", "address", "is empty");
	if (strstr(a, "://") || strchr(a, '/'))
		return ibvf_json_err(jc, "", "address",
				     "'%.64s' is a URL; give the host name or IP address only "
				     "(scheme and port are separate keys)",
				     a);
	if (n > 255)
		return ibvf_json_err(jc, "", "address", "longer than 255 characters");
	/* one colon is host:port; an IPv6 literal has at least two */
	if (strchr(a, ':') && strchr(a, ':') == strrchr(a, ':'))
		return ibvf_json_err(jc, "", "address",
				     "'%.64s' looks like host:port; give the port in \"port\"", a);
	for (size_t i = 0; i < n; i++) {
		char ch = a[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr(".-_:[]", ch)))
			return ibvf_json_err(jc, "", "address",
					     "'%.64s' is not a host name or IP address", a);
	}
	return 0;
}

/*
 * A PEM file libcurl reads later: a regular file (a FIFO would block the TLS
 * setup) that we can open; with @secret (client_key) also owned by ibvfd's
 * uid and of no group/other access (ibvf_file_open_regular()).
 */
static int check_pem_file(struct ibvf_jctx *jc, const char *key, const char *path, bool secret)
{
	char msg[IBVF_ERR_LEN];
	int fd =
		ibvf_file_open_regular(path, secret ? IBVF_FILE_SECRET : 0, NULL, msg, sizeof(msg));

	if (fd < 0)
		return ibvf_json_err(jc, "", key, "%s", msg);
	close(fd);
	return 0;
}

/*
 * Read a secret (password or token) from @path: a regular file owned by
 * ibvfd's uid with no group/other access (ibvf_file_read_regular(),
 * IBVF_FILE_SECRET), at most UFM_SECRET_MAX bytes, trailing newlines
 * removed, no NUL or line breaks inside; @token also forbids white space and
 * control characters (it goes into an HTTP header). Errors name the key and
 * file, never the content.
 */
static int read_secret(struct ibvf_jctx *jc, const char *key, const char *path, bool token,
		       char **out)
{
	char msg[IBVF_ERR_LEN], *buf = NULL;
	size_t len = 0, cap = UFM_SECRET_MAX + 2; /* what IBVF_FILE_SECRET allocates */
	int ret = 0;

	ret = ibvf_file_read_regular(path, UFM_SECRET_MAX, IBVF_FILE_SECRET, &buf, &len, NULL, msg,
				     sizeof(msg));
	if (ret)
		return ret == -ENOMEM ? ibvf_errf(jc->err, jc->errlen, -ENOMEM, "out of memory")
				      : ibvf_json_err(jc, "", key, "%s", msg);
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	if (!len)
		ret = ibvf_json_err(jc, "", key, "'%s' is empty", path);
	for (size_t i = 0; !ret && i < len; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch == '\0' || ch == '\n' || ch == '\r' || (token && (ch <= ' ' || ch == 0x7f)))
			ret = ibvf_json_err(jc, "", key,
					    "'%s' holds a NUL, a line break%s inside the %s", path,
					    token ? ", white space or a control character" : "",
					    token ? "token" : "password");
	}
	if (ret) {
		ibvf_file_wipe_free(buf, cap);
		return ret;
	}
	*out = buf;
	return 0;
}

/* Cross-key rules, then the secrets; fills @o (pointing into @c and *@secret). */
static int config_check(struct ibvf_jctx *jc, struct ufm_config *c, struct ufm_http_opts *o,
			char **secret, const char **auth, bool *https)
{
	int ret;

	*secret = NULL;
	if (!c->address)
		return ibvf_json_err(jc, "", "address",
				     "is required (UFM host name or IP address)");
	ret = check_address(jc, c->address);
	if (ret)
		return ret;
	if (c->scheme && strcasecmp(c->scheme, "https") && strcasecmp(c->scheme, "http"))
		return ibvf_json_err(jc, "", "scheme", "'%.16s' is not \"https\" or \"http\"",
				     c->scheme);
	*https = !c->scheme || !strcasecmp(c->scheme, "https");
	if (c->auth && strcmp(c->auth, "basic") && strcmp(c->auth, "token") &&
	    strcmp(c->auth, "certificate"))
		return ibvf_json_err(jc, "", "auth",
				     "'%.16s' is not \"basic\", \"token\" or \"certificate\"",
				     c->auth);
	*auth = c->auth ? c->auth : "basic";
	if (!*https &&
	    (c->ca_file || c->ca_pem || c->client_cert || c->client_key || c->insecure_skip_verify))
		return ibvf_json_err(jc, "", "scheme",
				     "is \"http\" but TLS keys (ca_file, ca_pem, client_cert, "
				     "client_key, insecure_skip_verify) are set");
	if (c->ca_file && c->ca_pem)
		return ibvf_json_err(jc, "", "ca_pem", "set either ca_file or ca_pem, not both");
	if (c->insecure_skip_verify && (c->ca_file || c->ca_pem))
		return ibvf_json_err(jc, "", "insecure_skip_verify",
				     "is true but a CA (ca_file/ca_pem) is set; choose one");
	if (c->ca_pem && !strstr(c->ca_pem, "-----BEGIN CERTIFICATE-----"))
		return ibvf_json_err(jc, "", "ca_pem", "holds no PEM certificate");
	if (!c->client_cert != !c->client_key)
		return ibvf_json_err(jc, "", c->client_cert ? "client_key" : "client_cert",
				     "client_cert and client_key go together");
	if ((c->ca_file && (ret = check_pem_file(jc, "ca_file", c->ca_file, false))) ||
	    (c->client_cert && (ret = check_pem_file(jc, "client_cert", c->client_cert, false))) ||
	    (c->client_key && (ret = check_pem_file(jc, "client_key", c->client_key, true))))
		return ret;
	/* the default connect timeout never exceeds a shorter total timeout */
	if (!c->connect_timeout_ms)
		c->connect_timeout_ms = c->timeout_ms < UFM_DEFAULT_CONNECT_TIMEOUT_MS
						? c->timeout_ms
						: UFM_DEFAULT_CONNECT_TIMEOUT_MS;
	if (c->connect_timeout_ms > c->timeout_ms)
		return ibvf_json_err(jc, "", "connect_timeout_ms",
				     "%llu is more than timeout_ms %llu",
				     (unsigned long long)c->connect_timeout_ms,
				     (unsigned long long)c->timeout_ms);
	if (!strcmp(*auth, "certificate")) {
		/*
		 * UFM maps the client certificate's subject to a user: no
		 * password, no token, the /ufmRest prefix (NVIDIA
		 * bare-metal-manager ufmclient connect(): certificate without a
		 * token selects /ufmRest).
		 */
		if (!*https)
			return ibvf_json_err(jc, "", "auth",
					     "is \"certificate\" but scheme is \"http\"");
		if (!c->client_cert)
			return ibvf_json_err(jc, "", "client_cert",
					     "is required with auth \"certificate\" (with "
					     "client_key)");
		if (c->username || c->password || c->password_file || c->token_file)
			return ibvf_json_err(jc, "",
					     c->username     ? "username"
					     : c->token_file ? "token_file"
							     : "password",
					     "is not used with auth \"certificate\"; remove it");
	} else if (!strcmp(*auth, "token")) {
		if (c->username || c->password || c->password_file)
			return ibvf_json_err(jc, "", c->username ? "username" : "password",
					     "is not used with auth \"token\"; remove it");
		if (!c->token_file)
			return ibvf_json_err(jc, "", "token_file",
					     "is required with auth \"token\"");
		ret = read_secret(jc, "token_file", c->token_file, true, secret);
		if (ret)
			return ret;
		o->token = *secret;
	} else {
		if (c->token_file)
			return ibvf_json_err(jc, "", "token_file",
					     "is only used with auth \"token\"");
		if (!c->username || !*c->username)
			return ibvf_json_err(jc, "", "username", "is required with auth \"basic\"");
		if (strchr(c->username, ':') || strpbrk(c->username, "\r\n"))
			return ibvf_json_err(jc, "", "username",
					     "must not contain ':' or line breaks (RFC 7617)");
		if (c->password && c->password_file)
			return ibvf_json_err(jc, "", "password",
					     "set either password or password_file, not both");
		if (c->password_file) {
			ret = read_secret(jc, "password_file", c->password_file, false, secret);
			if (ret)
				return ret;
			o->password = *secret;
		} else if (c->password && *c->password) {
			o->password = c->password;
		} else {
			return ibvf_json_err(jc, "", "password_file",
					     "is required with auth \"basic\" (or password)");
		}
		o->username = c->username;
	}
	o->ca_file = c->ca_file;
	o->ca_pem = c->ca_pem;
	o->client_cert = c->client_cert;
	o->client_key = c->client_key;
	o->insecure = c->insecure_skip_verify;
	o->connect_timeout_ms = (long)c->connect_timeout_ms;
	o->timeout_ms = (long)c->timeout_ms;
	return 0;
}

static int ufm_init(const char *json_config, struct ibvf_sm_backend **out, char *err, size_t errlen)
{
	struct ufm_config c = {
		.connect_timeout_ms = 0, /* default: see config_check() */
		.timeout_ms = UFM_DEFAULT_TIMEOUT_MS,
		.index0 = true,
		.ip_over_ib = true,
		.change_wait_ms = UFM_DEFAULT_CHANGE_WAIT_MS,
	};
	struct ibvf_jctx jc = {UFM_CFG_NAME, err, errlen};
	struct ufm_http_opts o = {0};
	struct ibvf_sm_backend *b = NULL;
	const char *auth = "basic";
	bool https = true;
	char *secret = NULL, *host = NULL;
	json_t *root;
	int ret;

	*out = NULL;
	root = ibvf_json_load(UFM_CFG_NAME, json_config && *json_config ? json_config : "{}", err,
			      errlen);
	if (!root)
		return -EINVAL;
	ret = config_read(&jc, root, &c);
	json_decref(root);
	if (!ret)
		ret = config_check(&jc, &c, &o, &secret, &auth, &https);
	if (ret)
		goto out;
	b = calloc(1, sizeof(*b));
	/* an IPv6 literal goes into brackets in a URL (RFC 3986, 3.2.2) */
	if (strchr(c.address, ':') && c.address[0] != '[') {
		if (asprintf(&host, "[%s]", c.address) < 0)
			host = NULL;
	} else {
		host = strdup(c.address);
	}
	if (!b || !host) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	if (!c.port)
		c.port = https ? 443 : 80;
	snprintf(b->where, sizeof(b->where), "%s://%s:%u", https ? "https" : "http", host,
		 (unsigned)c.port);
	b->prefix = !strcmp(auth, "token") ? "/ufmRestV3" : "/ufmRest";
	b->auth_name = !strcmp(auth, "token")	      ? "token"
		       : !strcmp(auth, "certificate") ? "certificate"
						      : "basic";
	b->defaults.index0 = c.index0;
	b->defaults.ipoib = c.ip_over_ib;
	b->change_wait_ms = c.change_wait_ms;
	b->insecure = c.insecure_skip_verify;
	b->plain_http = !https;
	b->max_guids = (size_t)c.max_guids_per_request;
	o.base_url = b->where;
	ret = ufm_http_new(&o, &b->http, err, errlen);
	if (!ret)
		ret = ufm_http_new(&o, &b->http2, err, errlen);
	if (ret)
		ibvf_err_prefix(err, errlen, ret, "%s", UFM_CFG_NAME);
out:
	free(host);
	wipe_free(secret);
	config_free(&c);
	if (ret) {
		if (b) {
			ufm_http_free(b->http);
			ufm_http_free(b->http2);
		}
		free(b);
		return ret;
	}
	*out = b;
	return 0;
}

static void lc_drop(struct ibvf_sm_backend *b);

static void ufm_fini(struct ibvf_sm_backend *b)
{
	if (!b)
		return;
	lc_drop(b);
	ufm_http_free(b->http);
	ufm_http_free(b->http2);
	free(b);
}

/*
 * GET @path and parse its JSON reply into *@out. With @missing_ok, HTTP 404
 * and UFM's "200 {}" for a missing resource (bare-metal-manager ufmclient:
 * "UFM in some cases does not return a 404 ... but a 200 ... {}") return
 * -ENOENT with *@out NULL and no message.
 */
static int get_json_on(struct ufm_http *h, const char *path, bool missing_ok, json_t **out,
		       char *err, size_t errlen)
{
	struct ufm_reply r;
	json_error_t je;
	int ret;

	*out = NULL;
	ret = ufm_http_call(h, "GET", path, NULL, &r, err, errlen);
	if (ret == -ENOENT && missing_ok && r.status == 404) {
		ufm_reply_free(&r);
		if (err && errlen)
			err[0] = '\0';
		return -ENOENT;
	}
	if (ret) {
		ufm_reply_free(&r);
		return ret;
	}
	*out = json_loadb(r.body, r.len, 0, &je);
	ufm_reply_free(&r);
	if (!*out)
		return ibvf_errf(err, errlen, -EBADMSG, "UFM GET %s: malformed JSON reply: %s",
				 path, je.text);
	if (json_is_object(*out) && json_object_size(*out) == 0) {
		json_decref(*out);
		*out = NULL;
		if (missing_ok)
			return -ENOENT;
		return ibvf_errf(err, errlen, -ENOENT,
				 "UFM GET %s: UFM answered {} (resource not found)", path);
	}
	return 0;
}

static int get_json(struct ibvf_sm_backend *b, const char *path, bool missing_ok, json_t **out,
		    char *err, size_t errlen)
{
	return get_json_on(b->http, path, missing_ok, out, err, errlen);
}

/* GET ufm_version: the release string into @ver, major.minor into @b. */
static int read_version(struct ibvf_sm_backend *b, char *ver, size_t verlen, char *err,
			size_t errlen)
{
	char path[64];
	json_t *j, *v;
	unsigned maj = 0, min = 0;
	int ret;

	snprintf(path, sizeof(path), "%s/app/ufm_version", b->prefix);
	ret = get_json(b, path, false, &j, err, errlen);
	if (ret)
		return ret;
	v = json_object_get(j, "ufm_release_version");
	if (!json_is_string(v) || !json_string_length(v)) {
		json_decref(j);
		return ibvf_errf(err, errlen, -EBADMSG,
				 "UFM GET %s: reply has no \"ufm_release_version\" string", path);
	}
	snprintf(ver, verlen, "%s", json_string_value(v));
	b->ver_read = true;
	if (sscanf(ver, "%u.%u", &maj, &min) == 2) {
		b->ver_major = maj;
		b->ver_minor = min;
	}
	json_decref(j);
	return 0;
}

/* Read the version once, before the first change that depends on it. */
static int need_version(struct ibvf_sm_backend *b, char *err, size_t errlen)
{
	char ver[72];

	return b->ver_read ? 0 : read_version(b, ver, sizeof(ver), err, errlen);
}

/*
 * DELETE {prefix}/resources/pkeys/{pkey}/guids/{g,...}: in the "/resources/"
 * PKey API that the guide has listed since 6.10 ("the previous PKey GUIDs
 * APIs based on /ufmRest/actions/ are deprecated"). An unparsable version
 * (0.0) counts as new.
 */
static bool has_delete(const struct ibvf_sm_backend *b)
{
	return b->ver_major == 0 || b->ver_major > 6 || (b->ver_major == 6 && b->ver_minor >= 10);
}

static int ufm_validate(struct ibvf_sm_backend *b, char *desc, size_t desclen, char *err,
			size_t errlen)
{
	char ver[72], path[80];
	json_t *j = NULL;
	int ret = read_version(b, ver, sizeof(ver), err, errlen);

	if (ret)
		return ret;
	/*
	 * The version call alone is weaker than the writes (issue 14: "ready"
	 * flapped while every add failed). Read the resource the writes change,
	 * through the same prefix, authentication and TLS: the management
	 * partition 0x7fff, which UFM always has, without its GUIDs (small).
	 */
	snprintf(path, sizeof(path), "%s/resources/pkeys/0x7fff", b->prefix);
	ret = get_json(b, path, true, &j, err, errlen);
	json_decref(j);
	if (ret == -ENOENT)
		ret = ibvf_errf(err, errlen, -ENOENT,
				"UFM GET %s: the management partition 0x7fff is missing; "
				"is this a UFM PKey API?",
				path);
	if (ret)
		return ret;
	if (desc && desclen)
		snprintf(desc, desclen, "UFM %.64s at %s (auth %s)%s%s", ver, b->where,
			 b->auth_name,
			 b->insecure ? "; WARNING: TLS peer verification is off "
				       "(insecure_skip_verify)"
				     : "",
			 b->plain_http ? "; WARNING: plain HTTP, credentials travel unencrypted"
				       : "");
	return 0;
}

/* --------------------------------------------------------- request bodies -- */

static void pkey_str(uint16_t pkey, char buf[8])
{
	snprintf(buf, 8, "0x%04X", pkey & IBVF_PKEY_KEY_MASK);
}

static json_t *guid_array(const struct ibvf_sm_member *m, const uint64_t *g, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++) {
		char hex[IBVF_GUID_HEX_LEN];

		if (json_array_append_new(
			    a, json_string(ibvf_guid_format_hex(m ? m[i].guid : g[i], hex)))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static int dump_body(json_t *o, int fail, char **out)
{
	*out = (o && !fail) ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return *out ? 0 : -ENOMEM;
}

int ufm_add_body(uint16_t pkey, const struct ibvf_sm_member *m, size_t n,
		 const struct ibvf_sm_pkey_flags *flags, char **out)
{
	json_t *o;
	char pk[8];
	int fail = 0;

	*out = NULL;
	/* UFM's add ignores "memberships" and makes everyone full (issue 16) */
	for (size_t i = 1; i < n; i++)
		if (m[i].membership != m[0].membership)
			return -EINVAL;
	o = json_object();
	pkey_str(pkey, pk);
	fail |= json_object_set_new(o, "pkey", json_string(pk));
	fail |= json_object_set_new(o, "guids", guid_array(m, NULL, n));
	fail |= json_object_set_new(
		o, "membership",
		json_string(ibvf_membership_name(n ? m[0].membership : IBVF_MEMBER_FULL)));
	/* no flags: the field clients' index0 true and UFM's ip_over_ib true */
	fail |= json_object_set_new(o, "index0", json_boolean(flags ? flags->index0 : true));
	fail |= json_object_set_new(o, "ip_over_ib", json_boolean(flags ? flags->ipoib : true));
	return dump_body(o, fail, out);
}

int ufm_remove_body(uint16_t pkey, const uint64_t *guids, size_t n, char **out)
{
	json_t *o = json_object();
	char pk[8];
	int fail = 0;

	pkey_str(pkey, pk);
	fail |= json_object_set_new(o, "pkey", json_string(pk));
	fail |= json_object_set_new(o, "guids", guid_array(NULL, guids, n));
	return dump_body(o, fail, out);
}

/* ------------------------------------------------------- add and remove -- */

static int check_pkey(uint16_t pkey, char *err, size_t errlen)
{
	if (pkey == 0 || pkey > IBVF_PKEY_KEY_MASK)
		return ibvf_errf(err, errlen, -EINVAL,
				 "PKey 0x%04x is not a 15-bit partition key in 0x0001..0x7fff",
				 pkey);
	/* the guide: pkey is a "Hexadecimal string between "0x0"-"0x7fff" exclusive" */
	if (pkey == IBVF_PKEY_KEY_MASK)
		return ibvf_errf(err, errlen, -EINVAL,
				 "PKey 0x7fff is UFM's management (default) partition; UFM's "
				 "PKey API takes 0x0001..0x7ffe only");
	return 0;
}

struct gref {
	uint64_t guid;
	size_t idx;
};

static int gref_cmp(const void *a, const void *b)
{
	const struct gref *x = a, *y = b;

	if (x->guid != y->guid)
		return x->guid < y->guid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Mark in @dup[] the later copies of GUIDs given more than once. With
 * @m, copies with a different membership are an error.
 */
static int find_duplicates(const struct ibvf_sm_member *m, const uint64_t *g, size_t n, bool *dup,
			   char *err, size_t errlen)
{
	struct gref *r = malloc(n * sizeof(*r));

	if (!r)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		r[i].guid = m ? m[i].guid : g[i];
		r[i].idx = i;
		dup[i] = false;
	}
	ibvf_sort(r, n, sizeof(*r), gref_cmp);
	for (size_t i = 1; i < n; i++) {
		if (r[i].guid != r[i - 1].guid)
			continue;
		if (m && m[r[i].idx].membership != m[r[i - 1].idx].membership) {
			char s[IBVF_GUID_STR_LEN];
			uint64_t guid = r[i].guid;

			free(r);
			return ibvf_errf(err, errlen, -EINVAL,
					 "GUID %s is listed twice, once full and once limited",
					 ibvf_guid_format(guid, s));
		}
		dup[r[i].idx] = true;
	}
	free(r);
	return 0;
}

static int check_guid(uint64_t guid, size_t i, char *err, size_t errlen)
{
	char s[IBVF_GUID_STR_LEN];

	if (!ibvf_guid_is_assignable(guid))
		return ibvf_errf(err, errlen, -EINVAL,
				 "member %zu: GUID %s is not a valid port GUID (0 or all-ones)", i,
				 ibvf_guid_format(guid, s));
	return 0;
}

/* -------------------------------------------------- partitions as UFM has them -- */

static int parse_member(const char *key, size_t i, json_t *e, enum ibvf_membership def,
			struct ibvf_sm_member *m, char *err, size_t errlen);
static int parse_pkey_key(const char *s, uint16_t *out);

/* One partition: GET {prefix}/resources/pkeys/{pkey}?guids_data=true. */
struct pk_state {
	bool exists;
	bool ipoib;	/* its ip_over_ib */
	bool api_named; /* UFM's name for a partition made by an add: "api_pkey_0x..." */
	char name[128];
	size_t n;
	struct ibvf_sm_member *m;
	bool *index0;
};

static void pk_state_free(struct pk_state *p)
{
	free(p->m);
	free(p->index0);
	memset(p, 0, sizeof(*p));
}

/*
 * One partition's object as GET .../pkeys/{pkey}?guids_data=true and the
 * list (GET .../pkeys?guids_data=true) give it: {"partition", "ip_over_ib",
 * "guids": [{"guid","membership","index0"}]} into @p (exists). @key and
 * @path name it in errors.
 */
static int pk_state_from_json(const char *key, const char *path, json_t *j, struct pk_state *p,
			      char *err, size_t errlen)
{
	json_t *g, *e, *v;
	size_t i;
	int ret;

	memset(p, 0, sizeof(*p));
	if (!json_is_object(j))
		return ibvf_errf(err, errlen, -EBADMSG, "UFM GET %s: %s is not an object", path,
				 key);
	p->exists = true;
	p->ipoib = !json_is_false(json_object_get(j, "ip_over_ib"));
	v = json_object_get(j, "partition");
	snprintf(p->name, sizeof(p->name), "%s", json_is_string(v) ? json_string_value(v) : "");
	p->api_named = !strncmp(p->name, "api_pkey_", 9);
	g = json_object_get(j, "guids");
	if (json_is_array(g) && json_array_size(g)) {
		p->m = calloc(json_array_size(g), sizeof(*p->m));
		p->index0 = calloc(json_array_size(g), sizeof(*p->index0));
		if (!p->m || !p->index0) {
			pk_state_free(p);
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		}
		json_array_foreach(g, i, e)
		{
			ret = parse_member(key, i, e, IBVF_MEMBER_FULL, &p->m[i], err, errlen);
			if (ret) {
				pk_state_free(p);
				return ibvf_err_prefix(err, errlen, ret, "UFM GET %s", path);
			}
			p->index0[i] =
				json_is_object(e) && json_is_true(json_object_get(e, "index0"));
			p->n++;
		}
	}
	return 0;
}

static void pk_path(const struct ibvf_sm_backend *b, uint16_t pkey, char *path, size_t len)
{
	snprintf(path, len, "%s/resources/pkeys/0x%x?guids_data=true", b->prefix, pkey);
}

/* The reply of GET .../pkeys/{pkey}?guids_data=true (@ret, @j) into @p; taken @j. */
static int pk_state_from_reply(uint16_t pkey, const char *path, int ret, json_t *j,
			       struct pk_state *p, char *err, size_t errlen)
{
	char key[8];

	memset(p, 0, sizeof(*p));
	if (ret == -ENOENT)
		return 0; /* 404 or {}: no such partition */
	if (ret)
		return ret;
	snprintf(key, sizeof(key), "0x%x", pkey);
	if (!json_is_object(j)) {
		json_decref(j);
		return ibvf_errf(err, errlen, -EBADMSG, "UFM GET %s: reply is not an object", path);
	}
	ret = pk_state_from_json(key, path, j, p, err, errlen);
	json_decref(j);
	return ret;
}

static int read_pkey(struct ibvf_sm_backend *b, uint16_t pkey, struct pk_state *p, char *err,
		     size_t errlen)
{
	char path[96];
	json_t *j = NULL;
	int ret;

	pk_path(b, pkey, path, sizeof(path));
	ret = get_json(b, path, true, &j, err, errlen);
	return pk_state_from_reply(pkey, path, ret, j, p, err, errlen);
}

static ssize_t pk_find(const struct pk_state *p, uint64_t guid)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->m[i].guid == guid)
			return (ssize_t)i;
	return -1;
}

/* A partition of the last list; @stale: a change of it was sent since. */
struct pk_cached {
	uint16_t pkey;
	bool stale;
	struct pk_state s;
};

static void lc_drop(struct ibvf_sm_backend *b)
{
	for (size_t i = 0; i < b->n_lc; i++)
		pk_state_free(&b->lc[i].s);
	free(b->lc);
	b->lc = NULL;
	b->n_lc = 0;
	b->lc_valid = false;
}

static struct pk_cached *lc_find(struct ibvf_sm_backend *b, uint16_t pkey)
{
	for (size_t i = 0; i < b->n_lc; i++)
		if (b->lc[i].pkey == pkey)
			return &b->lc[i];
	return NULL;
}

/*
 * The last list's view of @pkey in *@out (borrowed until the next list or
 * lc_stale()) when it may stand for the PKey read before an add: the list
 * started at most UFM_LIST_FRESH_MS ago, every listed partition carried its
 * name and ip_over_ib, and no change of @pkey was sent since. A PKey the
 * list did not have does not exist. Return: whether it may.
 */
static bool lc_get(struct ibvf_sm_backend *b, uint16_t pkey, const struct pk_state **out)
{
	static const struct pk_state absent;
	struct pk_cached *c;

	if (!b->lc_valid || ibvf_mono_ms() - b->lc_ms > UFM_LIST_FRESH_MS)
		return false;
	c = lc_find(b, pkey);
	if (c && c->stale)
		return false;
	*out = c ? &c->s : &absent;
	return true;
}

/* A change of @pkey is being sent: the list no longer stands for its read. */
static void lc_stale(struct ibvf_sm_backend *b, uint16_t pkey)
{
	struct pk_cached *c, *v;

	if (!b->lc_valid)
		return;
	c = lc_find(b, pkey);
	if (c) {
		c->stale = true;
		return;
	}
	v = realloc(b->lc, (b->n_lc + 1) * sizeof(*v));
	if (!v) {
		lc_drop(b); /* no room to remember: nothing stands for a read */
		return;
	}
	b->lc = v;
	b->lc[b->n_lc++] = (struct pk_cached){.pkey = pkey, .stale = true};
}

/*
 * Keep the partitions of a list reply (@body, already validated by
 * ufm_parse_pkeys()) started at @t0 for lc_get(). A partition without its
 * "partition" name or "ip_over_ib" (a UFM whose list leaves them out) makes
 * the whole list unusable for that: the adds read their PKey as before.
 */
static void lc_fill(struct ibvf_sm_backend *b, const char *body, size_t len, int64_t t0)
{
	char e[IBVF_ERR_LEN];
	const char *key;
	json_t *root = json_loadb(body, len, 0, NULL), *v;
	size_t i = 0;

	lc_drop(b);
	if (!json_is_object(root))
		goto out;
	b->lc = calloc(json_object_size(root) + 1, sizeof(*b->lc));
	if (!b->lc)
		goto out;
	json_object_foreach(root, key, v)
	{
		uint16_t pk;

		if (parse_pkey_key(key, &pk) || !json_is_string(json_object_get(v, "partition")) ||
		    !json_is_boolean(json_object_get(v, "ip_over_ib")) ||
		    pk_state_from_json(key, "list", v, &b->lc[i].s, e, sizeof(e))) {
			b->n_lc = i;
			lc_drop(b);
			goto out;
		}
		b->lc[i++].pkey = pk;
	}
	b->n_lc = i;
	b->lc_valid = true;
	b->lc_ms = t0;
out:
	json_decref(root);
}

/* One GET on the second connection, in its own thread, beside a request of the caller. */
struct side_read {
	struct ufm_http *h;
	char path[96];
	json_t *j;
	int ret;
	int64_t t0;
	bool thread;
	pthread_t th;
	char err[IBVF_ERR_LEN];
};

static void *side_main(void *arg)
{
	struct side_read *s = arg;

	s->ret = get_json_on(s->h, s->path, true, &s->j, s->err, sizeof(s->err));
	return NULL;
}

static void side_start(struct side_read *s, struct ufm_http *h, const char *path)
{
	memset(s, 0, sizeof(*s));
	s->h = h;
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->t0 = ibvf_mono_ms();
	s->thread = !pthread_create(&s->th, NULL, side_main, s);
}

static void side_join(struct side_read *s)
{
	if (s->thread)
		pthread_join(s->th, NULL);
	else
		side_main(s); /* no thread: the same read, after the caller's */
}

/* ------------------------------------------------- back-to-back changes -- */

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * GET {prefix}/resources/pkeys/last_updated: {"last_updated": "<time>"} or
 * {"last_updated": null} before the first change (ib-kubernetes PR #210;
 * the time's format differs between UFM versions, so it is compared as an
 * opaque string). -ENOENT: this UFM has no such resource.
 */
static int lu_from_json(const char *path, json_t *j, char *out, size_t outlen, char *err,
			size_t errlen)
{
	json_t *v = json_object_get(j, "last_updated");

	if (!json_is_object(j) || !v || (!json_is_null(v) && !json_is_string(v))) {
		json_decref(j);
		return ibvf_errf(err, errlen, -EBADMSG,
				 "UFM GET %s: reply has no \"last_updated\" string or null", path);
	}
	snprintf(out, outlen, "%s", json_is_string(v) ? json_string_value(v) : "");
	json_decref(j);
	return 0;
}

static void lu_path(const struct ibvf_sm_backend *b, char *path, size_t len)
{
	snprintf(path, len, "%s/resources/pkeys/last_updated", b->prefix);
}

static int read_last_updated(struct ibvf_sm_backend *b, char *out, size_t outlen, char *err,
			     size_t errlen)
{
	char path[80];
	json_t *j;
	int ret;

	lu_path(b, path, sizeof(path));
	ret = get_json(b, path, true, &j, err, errlen);
	if (ret)
		return ret;
	return lu_from_json(path, j, out, outlen, err, errlen);
}

/* Will the next change read last_updated? */
static bool lu_wanted(const struct ibvf_sm_backend *b)
{
	return b->change_wait_ms && !b->lu_absent;
}

/* Start the last_updated read of the next change beside another read. */
static void lu_side_start(struct ibvf_sm_backend *b, struct side_read *s)
{
	char path[80];

	lu_path(b, path, sizeof(path));
	side_start(s, b->http2, path);
}

/*
 * Its result: the value before_change() takes instead of reading again (a
 * read that failed is only dropped: before_change() reads itself).
 */
static void lu_side_end(struct ibvf_sm_backend *b, struct side_read *s)
{
	side_join(s);
	b->lu_pre_valid = false;
	if (s->ret == -ENOENT) {
		b->lu_absent = true;
		return;
	}
	if (!s->ret &&
	    !lu_from_json(s->path, s->j, b->lu_pre, sizeof(b->lu_pre), s->err, sizeof(s->err))) {
		b->lu_pre_valid = true;
		b->lu_pre_ms = s->t0;
	}
}

/*
 * Before a change: wait until UFM's last_updated has moved past the value
 * read before our previous change, so UFM is not handed a change while the
 * previous one may still be in progress (the production fork in
 * ib-kubernetes PR #210 skips its call in that case), but at most until
 * change_wait_ms after the previous change was answered: then the change
 * goes out anyway. Off with change_wait_ms 0 or when UFM has no
 * last_updated resource.
 */
static int before_change(struct ibvf_sm_backend *b, bool *beside, char *err, size_t errlen)
{
	char now[sizeof(b->lu_before)];
	int64_t t0;
	int ret;

	*beside = false;
	if (!b->change_wait_ms || b->lu_absent)
		return 0;
	/*
	 * A value read beside the PKey read or the list just before stands for
	 * this read when it started after the previous change was answered.
	 */
	if (b->lu_pre_valid && (!b->lu_pending || b->lu_pre_ms >= b->lu_sent_ms) &&
	    ibvf_mono_ms() - b->lu_pre_ms <= UFM_LIST_FRESH_MS) {
		snprintf(now, sizeof(now), "%s", b->lu_pre);
		ret = 0;
	} else if (!b->lu_pending || ibvf_mono_ms() - b->lu_sent_ms >= (int64_t)b->change_wait_ms) {
		/*
		 * No previous change to wait for (none, or its bound is past):
		 * the read would only give the next change its baseline, so it
		 * goes beside this change (send_change(), issue 17: one UFM round
		 * trip less for a change from idle).
		 */
		b->lu_pre_valid = false;
		b->lu_pending = false;
		*beside = true;
		return 0;
	} else {
		ret = read_last_updated(b, now, sizeof(now), err, errlen);
	}
	b->lu_pre_valid = false;
	if (ret == -ENOENT) {
		b->lu_absent = true;
		return 0;
	}
	if (ret)
		return ret;
	if (b->lu_pending && !strcmp(now, b->lu_before) &&
	    ibvf_mono_ms() - b->lu_sent_ms < (int64_t)b->change_wait_ms) {
		t0 = ibvf_mono_ms();
		b->lu_waits++;
		for (;;) {
			if (ibvf_mono_ms() - b->lu_sent_ms >= (int64_t)b->change_wait_ms) {
				b->lu_timeouts++;
				break;
			}
			sleep_ms(UFM_CHANGE_POLL_MS);
			ret = read_last_updated(b, now, sizeof(now), err, errlen);
			if (ret)
				return ret;
			if (strcmp(now, b->lu_before))
				break;
		}
		b->lu_waited_ms += (unsigned long long)(ibvf_mono_ms() - t0);
	}
	snprintf(b->lu_before, sizeof(b->lu_before), "%s", now);
	b->lu_pending = false;
	return 0;
}

/*
 * The baseline read made beside a change (before_change()'s @beside): its
 * value is the next change's lu_before. A read that UFM answers after it
 * applied the change gives the changed value: the next change then waits
 * its whole bound, as when UFM's one-second resolution hides a change. A
 * failed read keeps the old baseline (the next change does not wait); no
 * such resource: last_updated is off, as in before_change().
 */
static void lu_baseline_end(struct ibvf_sm_backend *b, struct side_read *s)
{
	char v[sizeof(b->lu_before)];

	side_join(s);
	if (s->ret == -ENOENT) {
		b->lu_absent = true;
		return;
	}
	if (!s->ret && !lu_from_json(s->path, s->j, v, sizeof(v), s->err, sizeof(s->err)))
		snprintf(b->lu_before, sizeof(b->lu_before), "%s", v);
}

static void after_change(struct ibvf_sm_backend *b)
{
	if (b->change_wait_ms && !b->lu_absent) {
		b->lu_pending = true;
		b->lu_sent_ms = ibvf_mono_ms();
	}
}

/* ------------------------------------------------------- add and remove -- */

/* Send one change; @path and @body as for ufm_http_call(). */
static int send_change(struct ibvf_sm_backend *b, const char *method, const char *path,
		       const char *body, bool missing_ok, char *err, size_t errlen)
{
	struct side_read lu;
	struct ufm_reply r;
	bool beside;
	int ret = before_change(b, &beside, err, errlen);

	if (ret)
		return ret;
	if (beside)
		lu_side_start(b, &lu);
	ret = ufm_http_call(b->http, method, path, body, &r, err, errlen);
	if (beside)
		lu_baseline_end(b, &lu);
	/* a removal that finds the partition gone is done (issue 16, item 3) */
	if (ret == -ENOENT && missing_ok && r.status == 404) {
		ret = 0;
		if (err && errlen)
			err[0] = '\0';
	}
	ufm_reply_free(&r);
	if (!ret)
		after_change(b);
	return ret;
}

/* POST adds of @n members (one membership) in requests of at most b->max_guids. */
static int send_adds(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m,
		     size_t n, const struct ibvf_sm_pkey_flags *flags, char *err, size_t errlen)
{
	size_t step = b->max_guids ? b->max_guids : n;
	char path[64];

	snprintf(path, sizeof(path), "%s/resources/pkeys", b->prefix);
	for (size_t i = 0; i < n; i += step) {
		size_t k = n - i < step ? n - i : step;
		char *body;
		int ret = ufm_add_body(pkey, m + i, k, flags, &body);

		if (ret)
			return ibvf_errf(err, errlen, ret, "out of memory");
		ret = send_change(b, "POST", path, body, false, err, errlen);
		free(body);
		if (ret && i)
			return ibvf_err_prefix(err, errlen, ret,
					       "PKey 0x%04x: %zu of %zu GUIDs were sent before",
					       pkey, i, n);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Remove @n GUIDs: DELETE {prefix}/resources/pkeys/{pkey}/guids/{g,...}
 * (no body) where the UFM version has it, else the deprecated POST
 * {prefix}/actions/remove_guids_from_pkey.
 */
static int send_removes(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *g, size_t n,
			char *err, size_t errlen)
{
	bool del = has_delete(b);
	size_t step = b->max_guids ? b->max_guids : n;

	if (del && step > UFM_DELETE_GUIDS_MAX)
		step = UFM_DELETE_GUIDS_MAX;
	for (size_t i = 0; i < n; i += step) {
		size_t k = n - i < step ? n - i : step;
		char *body = NULL, *path = NULL;
		int ret = 0;

		if (del) {
			size_t cap = 64 + k * IBVF_GUID_HEX_LEN, off;

			path = malloc(cap);
			if (path) {
				off = (size_t)snprintf(path, cap, "%s/resources/pkeys/0x%x/guids/",
						       b->prefix, pkey);
				for (size_t j = 0; j < k; j++) {
					char hex[IBVF_GUID_HEX_LEN];

					off += (size_t)snprintf(
						path + off, cap - off, "%s%s", j ? "," : "",
						ibvf_guid_format_hex(g[i + j], hex));
				}
			}
		} else {
			if (asprintf(&path, "%s/actions/remove_guids_from_pkey", b->prefix) < 0)
				path = NULL;
			ret = path ? ufm_remove_body(pkey, g + i, k, &body) : -ENOMEM;
		}
		if (!path || ret) {
			free(path);
			free(body);
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		}
		ret = send_change(b, del ? "DELETE" : "POST", path, body, true, err, errlen);
		free(path);
		free(body);
		if (ret && i)
			return ibvf_err_prefix(err, errlen, ret,
					       "PKey 0x%04x: %zu of %zu GUIDs were removed before",
					       pkey, i, n);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Validate the PKey and the GUIDs of @m (add) or @g (remove) and mark the
 * later copies of a repeated GUID in a new *@dup (sent once). Return: 0 with
 * *@dup set (NULL when n == 0), or a negative errno.
 */
static int prepare_members(uint16_t pkey, const struct ibvf_sm_member *m, const uint64_t *g,
			   size_t n, const char *what, bool **dup, char *err, size_t errlen)
{
	int ret = check_pkey(pkey, err, errlen);

	*dup = NULL;
	if (ret || !n)
		return ret;
	if (!m && !g)
		return ibvf_errf(err, errlen, -EINVAL, "no %s given", what);
	for (size_t i = 0; i < n; i++)
		if ((ret = check_guid(m ? m[i].guid : g[i], i, err, errlen)))
			return ret;
	*dup = malloc(n * sizeof(**dup));
	if (!*dup)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = find_duplicates(m, g, n, *dup, err, errlen);
	if (ret) {
		free(*dup);
		*dup = NULL;
	}
	return ret;
}

/*
 * The partition as UFM has it before a change of @pkey, in *@ps: the last
 * list's when it stands for the read (lc_get(), adds only: @may_cache),
 * else read into @own, with the change's last_updated read beside it (two
 * connections: one round trip for both; issue 19).
 */
static int pkey_before_change(struct ibvf_sm_backend *b, uint16_t pkey, bool may_cache,
			      struct pk_state *own, const struct pk_state **ps, char *err,
			      size_t errlen)
{
	struct side_read lu;
	bool side = lu_wanted(b);
	int ret;

	memset(own, 0, sizeof(*own));
	if (may_cache && lc_get(b, pkey, ps))
		return 0;
	if (side)
		lu_side_start(b, &lu);
	ret = read_pkey(b, pkey, own, err, errlen);
	if (side)
		lu_side_end(b, &lu);
	*ps = own;
	return ret;
}

/*
 * Add: the partition as UFM has it (read first, or the list just made).
 * Members already there with the same membership and index0 are not sent
 * again; the others go in one POST per membership (UFM's add ignores
 * "memberships": issue 16, item 1). An existing partition keeps its
 * ip_over_ib (item 7): ibvf's flag is sent only when the add creates the
 * partition, else the partition's own value.
 */
static int ufm_add_members(struct ibvf_sm_backend *b, uint16_t pkey,
			   const struct ibvf_sm_member *members, size_t n,
			   const struct ibvf_sm_pkey_flags *flags, char *err, size_t errlen)
{
	static const enum ibvf_membership order[] = {IBVF_MEMBER_FULL, IBVF_MEMBER_LIMITED};
	struct ibvf_sm_pkey_flags fl = flags ? *flags : b->defaults;
	struct ibvf_sm_member *todo;
	const struct pk_state *ps = NULL;
	struct pk_state own;
	bool *dup, sent = false;
	int ret = prepare_members(pkey, members, NULL, n, "members", &dup, err, errlen);

	if (ret || !n)
		return ret;
	ret = pkey_before_change(b, pkey, true, &own, &ps, err, errlen);
	if (ret) {
		free(dup);
		return ret;
	}
	if (ps->exists)
		fl.ipoib = ps->ipoib;
	todo = malloc(n * sizeof(*todo));
	if (!todo)
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	for (size_t o = 0; !ret && o < sizeof(order) / sizeof(order[0]); o++) {
		size_t k = 0;

		for (size_t i = 0; i < n; i++) {
			ssize_t at = dup[i] || members[i].membership != order[o]
					     ? -2
					     : pk_find(ps, members[i].guid);

			if (at == -2)
				continue;
			if (at >= 0 && ps->m[at].membership == order[o] &&
			    ps->index0[at] == fl.index0)
				continue; /* already so */
			todo[k++] = members[i];
		}
		if (k) {
			sent = true;
			ret = send_adds(b, pkey, todo, k, &fl, err, errlen);
		}
	}
	if (sent)
		lc_stale(b, pkey);
	free(todo);
	free(dup);
	pk_state_free(&own);
	return ret;
}

static int read_pkey_with_lu(struct ibvf_sm_backend *b, uint16_t pkey, struct pk_state *p,
			     char *err, size_t errlen)
{
	const struct pk_state *ps;

	return pkey_before_change(b, pkey, false, p, &ps, err, errlen);
}

/*
 * Remove: GUIDs that are not members, or a partition that is gone, are done
 * already (item 3). UFM deletes a partition with its last member (NVIDIA's
 * UFM mock: "like real UFM, a partition is auto-removed once its last member
 * is removed"), losing its name, ip_over_ib and QoS: a removal that would
 * empty a partition UFM did not name as API-made ("api_pkey_...") is an
 * administrator's and is refused with -EPERM, nothing removed.
 */
static int ufm_remove_members(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *guids,
			      size_t n, char *err, size_t errlen)
{
	struct pk_state p;
	uint64_t *todo;
	size_t k = 0;
	bool *dup;
	int ret = prepare_members(pkey, NULL, guids, n, "GUIDs", &dup, err, errlen);

	if (ret || !n)
		return ret;
	ret = need_version(b, err, errlen);
	/* never the list's copy: the last-member rule below reads UFM now */
	if (!ret)
		ret = read_pkey_with_lu(b, pkey, &p, err, errlen);
	if (ret) {
		free(dup);
		return ret;
	}
	todo = malloc(n * sizeof(*todo));
	if (!todo) {
		free(dup);
		pk_state_free(&p);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		if (!dup[i] && pk_find(&p, guids[i]) >= 0)
			todo[k++] = guids[i];
	free(dup);
	if (k && k == p.n && !p.api_named)
		ret = ibvf_errf(err, errlen, -EPERM,
				"PKey 0x%04x: removing its last %zu member(s) would make UFM "
				"delete partition '%.64s', which ibvf did not create (its name, "
				"ip_over_ib and QoS would be lost); add another member to it in "
				"UFM, then the removal goes through",
				pkey, k, p.name);
	else if (k) {
		lc_stale(b, pkey);
		ret = send_removes(b, pkey, todo, k, err, errlen);
	}
	free(todo);
	pk_state_free(&p);
	return ret;
}

/* ------------------------------------------------------------------ list -- */

/* "0x2fb", "0x7FFF": 1..4 hex digits after 0x; the membership bit is dropped. */
static int parse_pkey_key(const char *s, uint16_t *out)
{
	unsigned v = 0;
	size_t n;

	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return -EINVAL;
	s += 2;
	n = strlen(s);
	if (n < 1 || n > 4 || strspn(s, "0123456789abcdefABCDEF") != n)
		return -EINVAL;
	sscanf(s, "%x", &v);
	v &= IBVF_PKEY_KEY_MASK;
	if (!v)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

static int bad_body(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad_body(char *err, size_t errlen, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ibvf_errf(err, errlen, -EBADMSG, "malformed PKey list: %s", msg);
}

static int parse_membership(json_t *v, enum ibvf_membership *out)
{
	if (!json_is_string(v))
		return -EINVAL;
	return ibvf_membership_parse(json_string_value(v), out, NULL, 0);
}

/* One element of a PKey's "guids": {"guid":..,"membership":..} or a bare GUID string. */
static int parse_member(const char *key, size_t i, json_t *e, enum ibvf_membership def,
			struct ibvf_sm_member *m, char *err, size_t errlen)
{
	json_t *g = json_is_string(e) ? e : json_object_get(e, "guid");
	json_t *ms = json_is_object(e) ? json_object_get(e, "membership") : NULL;

	if (!json_is_object(e) && !json_is_string(e))
		return bad_body(err, errlen, "\"%s\".guids[%zu] is not an object", key, i);
	if (!json_is_string(g))
		return bad_body(err, errlen, "\"%s\".guids[%zu].guid is missing or not a string",
				key, i);
	if (ibvf_guid_parse(json_string_value(g), &m->guid, NULL, 0))
		return bad_body(err, errlen, "\"%s\".guids[%zu].guid '%.40s' is not a GUID", key, i,
				json_string_value(g));
	m->membership = def;
	if (ms && !json_is_null(ms) && parse_membership(ms, &m->membership))
		return bad_body(err, errlen,
				"\"%s\".guids[%zu].membership is not \"full\" or \"limited\"", key,
				i);
	return 0;
}

static int parse_one_pkey(const char *key, uint16_t pk, json_t *v, ibvf_sm_list_cb cb, void *arg,
			  char *err, size_t errlen)
{
	enum ibvf_membership def = IBVF_MEMBER_FULL;
	json_t *guids, *ms, *e;
	size_t i;

	if (!json_is_object(v))
		return bad_body(err, errlen, "\"%s\" is not an object", key);
	ms = json_object_get(v, "membership");
	if (ms && !json_is_null(ms) && parse_membership(ms, &def))
		return bad_body(err, errlen, "\"%s\".membership is not \"full\" or \"limited\"",
				key);
	guids = json_object_get(v, "guids");
	if (!guids || json_is_null(guids))
		return 0;
	if (!json_is_array(guids))
		return bad_body(err, errlen, "\"%s\".guids is not an array", key);
	json_array_foreach(guids, i, e)
	{
		struct ibvf_sm_member m;
		int ret = parse_member(key, i, e, def, &m, err, errlen);

		if (ret)
			return ret;
		/* UFM keeps no owner mark: every membership is reported as managed */
		if (cb && (ret = cb(arg, pk, &m, true)))
			return ret;
	}
	return 0;
}

int ufm_parse_pkeys(const char *body, size_t len, int pkey, ibvf_sm_list_cb cb, void *arg,
		    char *err, size_t errlen)
{
	json_error_t je;
	const char *key;
	json_t *root, *v;
	int ret = 0;

	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return bad_body(err, errlen, "not JSON (line %d, column %d: %s)", je.line,
				je.column, je.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return bad_body(err, errlen, "expected an object keyed by PKey");
	}
	/* validate everything first, so a bad body reports nothing half-way */
	for (int pass = 0; pass < 2 && !ret; pass++) {
		json_object_foreach(root, key, v)
		{
			uint16_t pk;

			if (parse_pkey_key(key, &pk)) {
				ret = bad_body(err, errlen,
					       "key \"%.16s\" is not a PKey (0x1..0x7fff)", key);
				break;
			}
			if (pkey >= 0 && pk != pkey)
				continue;
			ret = parse_one_pkey(key, pk, v, pass ? cb : NULL, arg, err, errlen);
			if (ret)
				break;
		}
	}
	json_decref(root);
	return ret;
}

static int ufm_list_members(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg,
			    char *err, size_t errlen)
{
	struct side_read lu;
	struct ufm_reply r;
	char path[80];
	bool side;
	int64_t t0;
	int ret;

	if (pkey != -1 && (pkey < 1 || pkey > (int)IBVF_PKEY_KEY_MASK))
		return ibvf_errf(err, errlen, -EINVAL,
				 "PKey %d is not -1 (all) or a 15-bit key 0x0001..0x7fff", pkey);
	if (!cb)
		return ibvf_errf(err, errlen, -EINVAL, "no callback given");
	snprintf(path, sizeof(path), "%s/resources/pkeys?guids_data=true", b->prefix);
	/*
	 * Right after a change, the list is usually the agent's verification
	 * with the next change to follow: that change's last_updated read goes
	 * beside the list (issue 19). Only while it could make the change wait.
	 */
	side = lu_wanted(b) && b->lu_pending &&
	       ibvf_mono_ms() - b->lu_sent_ms < (int64_t)b->change_wait_ms;
	if (side)
		lu_side_start(b, &lu);
	t0 = ibvf_mono_ms();
	ret = ufm_http_call(b->http, "GET", path, NULL, &r, err, errlen);
	if (side)
		lu_side_end(b, &lu);
	if (ret)
		lc_drop(b);
	if (!ret) {
		if (err && errlen)
			err[0] = '\0';
		ret = ufm_parse_pkeys(r.body, r.len, pkey, cb, arg, err, errlen);
		if (pkey == -1 && !ret)
			lc_fill(b, r.body, r.len, t0);
		else
			lc_drop(b);
		/* a parse error fills @err; a value from @cb is passed on as it is */
		if (ret < 0 && err && errlen && err[0])
			ibvf_err_prefix(err, errlen, ret, "UFM GET %s", path);
	}
	ufm_reply_free(&r);
	return ret;
}

const struct ibvf_sm_ops ufm_ops = {
	.abi_version = IBVF_SM_ABI_VERSION,
	.struct_size = sizeof(struct ibvf_sm_ops),
	.name = "ufm",
	.init = ufm_init,
	.fini = ufm_fini,
	.validate = ufm_validate,
	.add_members = ufm_add_members,
	.remove_members = ufm_remove_members,
	.list_members = ufm_list_members,
};
