/* SPDX-License-Identifier: MIT */
/*
 * Client of the ibvfd local API (include/ibvf/api.h), used by the ib-sriov
 * CNI plugin and ibvfctl. ibvf_api_call(): one connection, one request, one
 * reply. A connection object (ibvf_api_conn_*) keeps one connection for
 * several calls in sequence (the plugin's ADD: prepare, then commit), and
 * can send a request and read its reply apart (ibvf_api_conn_send(),
 * ibvf_api_conn_recv()), so the caller works while ibvfd does (issue 17:
 * the plugin's DEL moves the netdev back while ibvfd removes the SM
 * membership).
 */
#ifndef IBVF_API_CLIENT_H
#define IBVF_API_CLIENT_H

#include <jansson.h>
#include <stddef.h>

/** A JSON-RPC error returned by ibvfd. */
struct ibvf_rpc_error {
	int code;      /* IBVF_RPC_* */
	int err_no;    /* data.errno, positive errno or 0 */
	char step[32]; /* data.step, "" when absent */
	char message[512];
};

/**
 * ibvf_api_call() - call @method with @params (borrowed; NULL = {}) on the
 * daemon at @socket_path, waiting at most @timeout_ms for the whole exchange.
 * A full listen backlog (daemon busy or stalled) is not an error: connect()
 * is retried with a short backoff until the deadline.
 * On success *@result is a new reference to the "result" member.
 *
 * Return: 0; -ENOENT / -ECONNREFUSED (no daemon listening: callers may fall
 * back), -EACCES (socket permissions), -ETIMEDOUT (no connection or no
 * reply before the deadline), -EPROTO (malformed reply),
 * -EREMOTEIO (the daemon answered with an error: @rerr is filled), -ENOMEM.
 * @err always gets a one-line reason on failure.
 */
int ibvf_api_call(const char *socket_path, const char *method, json_t *params, int timeout_ms,
		  json_t **result, struct ibvf_rpc_error *rerr, char *err, size_t errlen);

/** A connection to ibvfd kept for calls made one after another (not thread-safe). */
struct ibvf_api_conn;

/**
 * ibvf_api_conn_open() - a connection object for the daemon at @socket_path.
 * It connects at its first call, not here, so that call's timeout covers the
 * connect (and its backlog retries) as ibvf_api_call()'s does.
 *
 * Return: 0 with *@out set; -ENAMETOOLONG (path longer than sun_path), -ENOMEM.
 * @err gets the reason on failure.
 */
int ibvf_api_conn_open(const char *socket_path, struct ibvf_api_conn **out, char *err,
		       size_t errlen);

/**
 * ibvf_api_conn_call() - ibvf_api_call() over @c's connection: same
 * arguments, results and errors (ibvf_api_conn_send() then
 * ibvf_api_conn_recv()). The connection stays open after a reply
 * (also an error reply, -EREMOTEIO) and is closed on any other failure.
 * ibvfd closes idle connections (api.idle_timeout_ms, 60 s; sooner, at
 * least 1 s idle, when its connection limit is reached: daemon/engine/
 * api_server.c) and a restart closes them all, so a kept connection the
 * daemon has closed is replaced by a new one: without sending when the
 * close is already seen (EOF or hang-up before the request), and by sending
 * the request once more on a new connection when the kept one was closed
 * under it with no byte of reply (EPIPE, ECONNRESET). Only done for a kept
 * connection, and once: every method the plugin repeats this way is
 * idempotent per owner (docs/api.md, prepare, commit, release); a request
 * whose reply was partly read is never sent again.
 */
int ibvf_api_conn_call(struct ibvf_api_conn *c, const char *method, json_t *params, int timeout_ms,
		       json_t **result, struct ibvf_rpc_error *rerr, char *err, size_t errlen);

/**
 * ibvf_api_conn_send() - the first half of ibvf_api_conn_call(): connect
 * if needed and send @method with @params (borrowed; NULL = {}); its reply
 * is read by ibvf_api_conn_recv(), with nothing else sent on @c in between.
 * @timeout_ms starts here and covers the connect (and its backlog retries),
 * the send and the reply that ibvf_api_conn_recv() reads, as one call's
 * does. A kept connection closed before or under the send is replaced as
 * ibvf_api_conn_call() says.
 *
 * Return: 0 (the request is out); -EBUSY (a request sent earlier still
 * waits for its reply); the errors of ibvf_api_conn_call() that come before
 * a reply (-ENOENT, -ECONNREFUSED, -EACCES, -ETIMEDOUT, -EPIPE, -ENOMEM).
 * On failure nothing waits for a reply and @err says why.
 */
int ibvf_api_conn_send(struct ibvf_api_conn *c, const char *method, json_t *params, int timeout_ms,
		       char *err, size_t errlen);

/**
 * ibvf_api_conn_recv() - the second half: wait (until the deadline of the
 * send) for the reply of the request ibvf_api_conn_send() sent. A kept
 * connection closed under the request with no byte of reply is replaced and
 * the request sent once more, once (as ibvf_api_conn_call()). Called after
 * the deadline (the caller's work outlasted it), it still reads a reply that
 * is already there; only a missing one is -ETIMEDOUT. Results and
 * errors as ibvf_api_conn_call()'s; -EINVAL when no request was sent. The
 * request is answered or given up when this returns, either way.
 */
int ibvf_api_conn_recv(struct ibvf_api_conn *c, json_t **result, struct ibvf_rpc_error *rerr,
		       char *err, size_t errlen);

/** ibvf_api_conn_connects() - how many connections @c has made (tests, debug logs). */
unsigned ibvf_api_conn_connects(const struct ibvf_api_conn *c);

/** ibvf_api_conn_close() - close the connection if open and free @c; NULL is a no-op. */
void ibvf_api_conn_close(struct ibvf_api_conn *c);

#endif /* IBVF_API_CLIENT_H */
