// SPDX-License-Identifier: MIT
/*
 * The HTTP endpoint (http_server.h) on libmicrohttpd: one internal polling
 * thread, a listen socket we bind ourselves (so a bind failure has its
 * errno and a port of 0 can be read back), at most 32 connections, 10 s
 * idle timeout. Each request is answered from the handler's second call
 * (libmicrohttpd's pattern: the first call only announces the request).
 */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "err.h"
#include "log.h"

#define HTTP_MAX_CONNECTIONS 32
#define HTTP_IDLE_TIMEOUT_S  10

struct ibvf_http {
	struct MHD_Daemon *mhd;
	struct ibvf_metrics *metrics;
	ibvf_http_probe_fn healthz, readyz;
	void *probe_arg;
	uint16_t port;
};

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = 0;
	log_warn("http: %s", line);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, char *body, size_t len,
			     const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned int status, const char *fmt,
				  ...) __attribute__((format(printf, 3, 4)));

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned int status, const char *fmt,
				  ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return MHD_NO;
	return reply(c, status, s, (size_t)n, "text/plain; charset=utf-8");
}

static enum MHD_Result probe(struct ibvf_http *h, struct MHD_Connection *c, ibvf_http_probe_fn fn)
{
	char why[IBVF_ERR_LEN + 512] = "";

	if (!fn || fn(h->probe_arg, why, sizeof(why)))
		return reply_text(c, MHD_HTTP_OK, "ok\n");
	return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "not ok: %s\n",
			  why[0] ? why : "no reason given");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **req_cls)
{
	static int announced;
	struct ibvf_http *h = cls;

	(void)version;
	(void)upload_data;
	if (!*req_cls) {
		*req_cls = &announced;
		return MHD_YES;
	}
	if (*upload_data_size) /* a body we do not want: drop it */
		*upload_data_size = 0;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (!strcmp(url, "/metrics")) {
		char *text;
		size_t len;

		if (ibvf_metrics_render(h->metrics, &text, &len))
			return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
		return reply(c, MHD_HTTP_OK, text, len, IBVF_METRICS_CONTENT_TYPE);
	}
	if (!strcmp(url, "/healthz"))
		return probe(h, c, h->healthz);
	if (!strcmp(url, "/readyz"))
		return probe(h, c, h->readyz);
	return reply_text(c, MHD_HTTP_NOT_FOUND, "not found; try /metrics, /healthz, /readyz\n");
}

/* A bound, listening, non-blocking TCP socket on @addr:@port; -errno. */
static int listen_on(const char *addr, uint16_t port, bool *v6, uint16_t *bound, char *err,
		     size_t errlen)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	int fd, one = 1, ret;

	if (addr && inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		sl = sizeof(*s4);
		*v6 = false;
	} else if (addr && inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		sl = sizeof(*s6);
		*v6 = true;
	} else {
		return ibvf_errf(err, errlen, -EINVAL,
				 "HTTP address '%s' is not a numeric IPv4 or IPv6 address",
				 addr ? addr : "(none)");
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "HTTP socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (*v6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 64)) {
		ret = -errno;
		close(fd);
		return ibvf_errf(err, errlen, ret, "HTTP endpoint %s%s%s:%u: %s", *v6 ? "[" : "",
				 addr, *v6 ? "]" : "", port, strerror(-ret));
	}
	sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*bound = ntohs(ss.ss_family == AF_INET6 ? s6->sin6_port : s4->sin_port);
	return fd;
}

int ibvf_http_start(const struct ibvf_http_opts *o, struct ibvf_http **out, char *err,
		    size_t errlen)
{
	struct ibvf_http *h;
	bool v6 = false;
	int fd;

	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	h->metrics = o->metrics;
	h->healthz = o->healthz;
	h->readyz = o->readyz;
	h->probe_arg = o->probe_arg;
	fd = listen_on(o->address, o->port, &v6, &h->port, err, errlen);
	if (fd < 0) {
		free(h);
		return fd;
	}
	/* the logger first: libmicrohttpd logs option errors with what it has so far */
	h->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
					  (v6 ? MHD_USE_IPv6 : 0),
				  0, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
				  NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
				  (unsigned int)HTTP_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
				  (unsigned int)HTTP_IDLE_TIMEOUT_S, MHD_OPTION_END);
	if (!h->mhd) {
		close(fd);
		free(h);
		return ibvf_errf(err, errlen, -ENOMEM,
				 "HTTP endpoint %s:%u: libmicrohttpd did not start", o->address,
				 o->port);
	}
	*out = h;
	return 0;
}

uint16_t ibvf_http_port(const struct ibvf_http *h)
{
	return h ? h->port : 0;
}

void ibvf_http_stop(struct ibvf_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->mhd); /* joins its thread and closes the listen socket */
	free(h);
}
