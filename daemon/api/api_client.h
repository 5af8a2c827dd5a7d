/* SPDX-License-Identifier: MIT */
/*
 * Client of the ibvfd local API (include/ibvf/api.h), used by the ib-sriov
 * CNI plugin and ibvfctl. One call = one connection, one request, one reply.
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

#endif /* IBVF_API_CLIENT_H */
