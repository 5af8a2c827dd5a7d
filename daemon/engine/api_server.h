/* SPDX-License-Identifier: MIT */
/*
 * Server side of the ibvfd local API (include/ibvf/api.h): a Unix stream
 * socket, mode 0600 in a 0700 directory, every peer checked with SO_PEERCRED
 * against the allowed UIDs; JSON-RPC 2.0 (https://www.jsonrpc.org/specification)
 * one object per '\n'-terminated line of at most IBVF_API_MAX_LINE bytes.
 *
 * Framing and abuse rules: a line that is too long, not JSON, not a request
 * object, or names an unknown method gets a JSON-RPC error and the connection
 * stays usable. Requests may be pipelined (at most max_inflight per
 * connection are executed at once, and reading pauses while more than max_out
 * answer bytes wait for the client to read them). A client that
 * half-closes (shutdown(SHUT_WR)) still gets every answer. A client that goes
 * away before its answer makes the reply callback return false, so the
 * executor can roll back (see ibvf_reply_fn in attach.h). Runs entirely on
 * the event loop thread.
 *
 * Connection pressure (docs/api.md "Connection limits and timeouts"): a
 * connection with no request executing is closed after idle_timeout_ms
 * without a complete request line or a sent byte; an incomplete request line
 * is given line_timeout_ms from its first byte; at max_conns (or when out of
 * file descriptors) the longest-idle connection, idle at least
 * min(1 s, idle_timeout_ms), is closed to admit the new one; -32008 only when
 * every connection has work executing.
 */
#ifndef IBVF_API_SERVER_H
#define IBVF_API_SERVER_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "attach.h"
#include "evloop.h"

/** Executes one method; @reply must be called exactly once (see attach.h). */
typedef void (*ibvf_api_dispatch_fn)(void *ctx, const char *method, json_t *params,
				     ibvf_reply_fn reply, void *reply_ctx);

struct ibvf_api_server_opts {
	struct ibvf_loop *loop;
	const char *socket_path;
	const uid_t *allowed_uids;
	size_t n_allowed_uids;
	ibvf_api_dispatch_fn dispatch;
	void *dispatch_ctx;
	size_t max_conns;    /* 0: 1024 */
	size_t max_inflight; /* per connection; 0: 64 */
	size_t max_line;     /* 0: IBVF_API_MAX_LINE (tests use less) */
	size_t max_out; /* per connection, bytes of queued answers that pause reading; 0: 256 KiB */
	unsigned idle_timeout_ms; /* 0: 60000 (api.idle_timeout_s) */
	unsigned line_timeout_ms; /* 0: 10000 (api.line_timeout_s) */
};

/** Counters of one server (for tests and status). */
struct ibvf_api_server_stats {
	size_t conns;	   /* open connections now */
	size_t out_queued; /* answer bytes queued, all connections, now */
	size_t out_peak;   /* largest queue one connection ever had, bytes */
	unsigned long long closed_idle, closed_line, evicted, refused_busy;
};

struct ibvf_api_server;

/**
 * ibvf_api_server_new() - create the socket directory (0700, checked) and
 * the listening socket (0600; a stale socket file is replaced, anything else
 * at that path is an error) and start accepting.
 * Return: 0, -EADDRINUSE (another ibvfd answers there), -EPERM (directory
 * owner/mode), or the errno of socket/bind/listen.
 */
int ibvf_api_server_new(const struct ibvf_api_server_opts *o, struct ibvf_api_server **out,
			char *err, size_t errlen);

/** ibvf_api_server_stop_accepting() - close and unlink the listening socket. */
void ibvf_api_server_stop_accepting(struct ibvf_api_server *s);

/** ibvf_api_server_conns() - open connections. */
size_t ibvf_api_server_conns(struct ibvf_api_server *s);

/** ibvf_api_server_stats() - fill @st (loop thread). */
void ibvf_api_server_stats(struct ibvf_api_server *s, struct ibvf_api_server_stats *st);

/**
 * ibvf_api_server_set_timeouts() - replace the idle and incomplete-line
 * timeouts, in ms (SIGHUP reload); 0 keeps a value.
 */
void ibvf_api_server_set_timeouts(struct ibvf_api_server *s, unsigned idle_timeout_ms,
				  unsigned line_timeout_ms);

/** ibvf_api_server_set_uids() - replace the allowed UIDs (SIGHUP reload). */
void ibvf_api_server_set_uids(struct ibvf_api_server *s, const uid_t *uids, size_t n);

/**
 * ibvf_api_server_free() - close everything; requests still executing keep
 * their context until their reply (which then reports "not delivered").
 */
void ibvf_api_server_free(struct ibvf_api_server *s);

#endif /* IBVF_API_SERVER_H */
