/* SPDX-License-Identifier: MIT */
/*
 * The HTTP endpoint of a daemon (ibvfd, later the SM agent): GET /metrics
 * (a metrics.h registry in the Prometheus text format), /healthz and
 * /readyz (200 "ok" or 503 with the reason), served by libmicrohttpd on its
 * own thread so that no scrape or probe ever waits on the daemon's loop or
 * holds up an attach. Only GET and HEAD; other paths are 404, other methods
 * 405. docs/metrics.md lists the metrics; docs/config.md the "http" keys.
 */
#ifndef IBVF_HTTP_SERVER_H
#define IBVF_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

/**
 * A probe: true when healthy / ready, else false with the reason in @why
 * (NUL-terminated, at most @len bytes). Called on the HTTP thread: it must
 * only take short locks.
 */
typedef bool (*ibvf_http_probe_fn)(void *arg, char *why, size_t len);

struct ibvf_http_opts {
	const char *address; /* numeric IPv4 or IPv6 literal */
	uint16_t port;	     /* 0: any free port (tests; ibvf_http_port() tells) */
	struct ibvf_metrics *metrics;
	ibvf_http_probe_fn healthz, readyz; /* NULL: always 200 */
	void *probe_arg;
};

struct ibvf_http;

/**
 * ibvf_http_start() - listen on @o->address:@o->port and serve.
 * Return: 0, -EINVAL (address), -EADDRINUSE / another errno of bind(),
 * -ENOMEM; @err says which address failed.
 */
int ibvf_http_start(const struct ibvf_http_opts *o, struct ibvf_http **out, char *err,
		    size_t errlen);

/** ibvf_http_port() - the port listened on (host order). */
uint16_t ibvf_http_port(const struct ibvf_http *h);

/**
 * ibvf_http_stop() - close the socket and join the thread; after it no
 * probe or collector runs. NULL is a no-op.
 */
void ibvf_http_stop(struct ibvf_http *h);

#endif /* IBVF_HTTP_SERVER_H */
