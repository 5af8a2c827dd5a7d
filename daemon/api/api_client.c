// SPDX-License-Identifier: MIT
/* Client of the ibvfd JSON-RPC API over a Unix stream socket. */
#include "api_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/api.h>

#include "clock.h"
#include "err.h"

/* Wait for @events on @fd until @deadline (monotonic ms). */
static int wait_fd(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - ibvf_mono_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/*
 * Connect to @path before @deadline. On Linux a non-blocking AF_UNIX
 * connect() either completes at once or fails with EAGAIN when the
 * listener's backlog is full (the daemon is stalled, or a burst of clients
 * outran accept()); that attempt is over, it does not complete later
 * (net/unix/af_unix.c, unix_stream_connect()). So EAGAIN is retried with a
 * short backoff (1 ms doubling to 50 ms) until @deadline, then -ETIMEDOUT.
 * EINPROGRESS (not used by AF_UNIX) is waited for and checked with SO_ERROR.
 */
static int connect_socket(const char *path, long long deadline, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	long long backoff = 1;
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "socket path %s too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "socket: %s", strerror(errno));
	for (;;) {
		long long left;

		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		ret = -errno;
		if (ret == -EINTR)
			continue;
		if (ret == -EINPROGRESS) {
			int soerr = 0;
			socklen_t len = sizeof(soerr);

			ret = wait_fd(fd, POLLOUT, deadline);
			if (!ret && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 &&
			    !soerr)
				return fd;
			ret = ret ? ret : -(soerr ? soerr : EIO);
			break;
		}
		if (ret != -EAGAIN)
			break;
		/* listen backlog full: nothing is pending, try again shortly */
		left = deadline - ibvf_mono_ms();
		if (left <= 0) {
			close(fd);
			return ibvf_errf(err, errlen, -ETIMEDOUT,
					 "connecting to ibvfd at %s: its listen backlog stayed "
					 "full until the deadline (daemon not accepting)",
					 path);
		}
		if (backoff > left)
			backoff = left;
		{
			struct timespec ts = {(time_t)(backoff / 1000),
					      (long)(backoff % 1000) * 1000000L};

			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
		backoff = backoff * 2 > 50 ? 50 : backoff * 2;
	}
	close(fd);
	return ibvf_errf(err, errlen, ret, "connecting to ibvfd at %s: %s", path, strerror(-ret));
}

static int send_all(int fd, const char *buf, size_t len, long long deadline)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		n = wait_fd(fd, POLLOUT, deadline);
		if (n)
			return (int)n;
	}
	return 0;
}

/* Read one '\n'-terminated line into a malloc'd buffer. */
static int recv_line(int fd, char **out, long long deadline)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	int ret;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;
		char *nl;

		if (len + 1 >= cap) {
			char *nb;

			if (cap >= IBVF_API_MAX_LINE) {
				free(buf);
				return -EMSGSIZE;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n > 0) {
			len += (size_t)n;
			buf[len] = 0;
			nl = memchr(buf, '\n', len);
			if (nl) {
				*nl = 0;
				*out = buf;
				return 0;
			}
			continue;
		}
		if (n == 0) {
			free(buf);
			return -ECONNRESET;
		}
		if (errno != EAGAIN && errno != EINTR) {
			ret = -errno;
			free(buf);
			return ret;
		}
		ret = wait_fd(fd, POLLIN, deadline);
		if (ret) {
			free(buf);
			return ret;
		}
	}
}

static int parse_reply(const char *line, json_t **result, struct ibvf_rpc_error *rerr, char *err,
		       size_t errlen)
{
	json_t *reply = json_loads(line, 0, NULL), *e, *data;
	int ret = 0;

	if (!reply || !json_is_object(reply)) {
		json_decref(reply);
		return ibvf_errf(err, errlen, -EPROTO, "ibvfd sent a malformed reply");
	}
	e = json_object_get(reply, "error");
	if (e) {
		struct ibvf_rpc_error tmp = {0};
		const char *m = json_string_value(json_object_get(e, "message"));

		tmp.code = (int)json_integer_value(json_object_get(e, "code"));
		snprintf(tmp.message, sizeof(tmp.message), "%s", m ? m : "(no message)");
		data = json_object_get(e, "data");
		if (json_is_object(data)) {
			const char *s = json_string_value(json_object_get(data, "step"));

			tmp.err_no = (int)json_integer_value(json_object_get(data, "errno"));
			snprintf(tmp.step, sizeof(tmp.step), "%s", s ? s : "");
		}
		if (rerr)
			*rerr = tmp;
		ret = ibvf_errf(err, errlen, -EREMOTEIO, "ibvfd: %s", tmp.message);
	} else if (!json_object_get(reply, "result")) {
		ret = ibvf_errf(err, errlen, -EPROTO, "ibvfd reply has neither result nor error");
	} else {
		*result = json_incref(json_object_get(reply, "result"));
	}
	json_decref(reply);
	return ret;
}

int ibvf_api_call(const char *socket_path, const char *method, json_t *params, int timeout_ms,
		  json_t **result, struct ibvf_rpc_error *rerr, char *err, size_t errlen)
{
	long long deadline = ibvf_mono_ms() + (timeout_ms > 0 ? timeout_ms : 1);
	json_t *req;
	char *text = NULL, *line = NULL;
	int fd, ret;

	*result = NULL;
	req = json_pack("{s:s,s:s,s:O,s:i}", "jsonrpc", "2.0", "method", method, "params",
			params ? params : json_object(), "id", 1);
	if (!params && req)
		json_decref(json_object_get(req, "params")); /* drop the extra reference */
	if (!req || !(text = json_dumps(req, JSON_COMPACT))) {
		json_decref(req);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	json_decref(req);
	fd = connect_socket(socket_path, deadline, err, errlen);
	if (fd < 0) {
		free(text);
		return fd;
	}
	ret = send_all(fd, text, strlen(text), deadline);
	if (!ret)
		ret = send_all(fd, "\n", 1, deadline);
	free(text);
	if (!ret)
		ret = recv_line(fd, &line, deadline);
	close(fd);
	if (ret)
		return ibvf_errf(err, errlen, ret, "ibvfd at %s, method %s: %s", socket_path,
				 method, ret == -ETIMEDOUT ? "no reply in time" : strerror(-ret));
	ret = parse_reply(line, result, rerr, err, errlen);
	free(line);
	return ret;
}
