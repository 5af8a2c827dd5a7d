// SPDX-License-Identifier: MIT
/* Client of the ibvfd JSON-RPC API over a Unix stream socket. */
#include "api_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
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
#include "log.h"

/* Wait for @events on @fd until @deadline (monotonic ms); past it, one look: -ETIMEDOUT if not
 * ready. */
static int wait_fd(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - ibvf_mono_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int n;

		/*
		 * past the deadline, one look without waiting: a reply that came
		 * in time is read even when the caller's work between the send and
		 * the receive (ibvf_api_conn_recv()) outlasted the timeout
		 */
		n = poll(&p, 1, left > 0 ? (int)left : 0);
		if (n > 0)
			return 0;
		if (left <= 0 && n >= 0)
			return -ETIMEDOUT;
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

/*
 * Read one '\n'-terminated line into a malloc'd buffer. *@got tells whether
 * any byte of it arrived (a kept connection's request is sent again only when
 * none did); *@extra whether bytes followed the line (the connection is then
 * out of step with its requests and must not be reused). It waits for the
 * socket before its first recv(): called right after the request went out,
 * a recv() first would nearly always be EAGAIN (a system call for nothing).
 */
static int recv_line(int fd, char **out, long long deadline, bool *got, bool *extra)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	int ret;

	*got = *extra = false;
	if (!buf)
		return -ENOMEM;
	ret = wait_fd(fd, POLLIN, deadline);
	if (ret) {
		free(buf);
		return ret;
	}
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
			*got = true;
			len += (size_t)n;
			buf[len] = 0;
			nl = memchr(buf, '\n', len);
			if (nl) {
				*extra = (size_t)(nl - buf) + 1 < len;
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

struct ibvf_api_conn {
	int fd;		   /* -1: not connected */
	unsigned connects; /* connections made */
	unsigned next_id;  /* JSON-RPC id of the next request */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	/* the request ibvf_api_conn_send() sent and ibvf_api_conn_recv() has not read */
	char *pending;	    /* its '\n'-terminated line; NULL: none */
	char method[64];    /* its method, for messages */
	long long deadline; /* monotonic ms: the send's timeout, covering connect and reply */
	bool kept;	    /* sent on a connection kept from an earlier call (may be resent) */
};

static int conn_init(struct ibvf_api_conn *c, const char *path, char *err, size_t errlen)
{
	if (strlen(path) >= sizeof(c->path))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "socket path %s too long", path);
	memcpy(c->path, path, strlen(path) + 1);
	c->fd = -1;
	c->connects = 0;
	c->next_id = 1;
	c->pending = NULL;
	c->method[0] = 0;
	c->deadline = 0;
	c->kept = false;
	return 0;
}

static void conn_forget(struct ibvf_api_conn *c)
{
	free(c->pending);
	c->pending = NULL;
}

static void conn_drop(struct ibvf_api_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/*
 * A kept connection the daemon has closed (idle timeout, eviction at the
 * connection limit, restart) reads as EOF or hang-up; a connection in step
 * with its requests has nothing to read between them. Either way a readable
 * or hung-up kept connection is not used again.
 */
static bool conn_closed_by_peer(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) != 0;
}

/* The request as one '\n'-terminated line, to send in one write. */
static char *request_line(const char *method, json_t *params, unsigned id)
{
	json_t *req = json_pack("{s:s,s:s,s:O,s:I}", "jsonrpc", "2.0", "method", method, "params",
				params ? params : json_object(), "id", (json_int_t)id);
	char *text, *line;
	size_t n;

	if (!params && req)
		json_decref(json_object_get(req, "params")); /* drop the extra reference */
	text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!text)
		return NULL;
	n = strlen(text);
	line = realloc(text, n + 2);
	if (!line) {
		free(text);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = 0;
	return line;
}

/* The request was dropped unanswered (@ret, @got): send it once more? */
static bool resend_once(struct ibvf_api_conn *c, int ret, bool got)
{
	if (!c->kept || got || (ret != -EPIPE && ret != -ECONNRESET))
		return false;
	/* closed under the request before any reply: once more, new connection */
	log_debug("ibvfd at %s closed the kept connection under %s: sending it again on a new "
		  "one",
		  c->path, c->method);
	c->kept = false;
	return true;
}

static int conn_fail(struct ibvf_api_conn *c, int ret, char *err, size_t errlen)
{
	conn_forget(c);
	return ibvf_errf(err, errlen, ret, "ibvfd at %s, method %s: %s", c->path, c->method,
			 ret == -ETIMEDOUT ? "no reply in time" : strerror(-ret));
}

/*
 * Send @c's pending request, connecting first when @c is not connected; a
 * kept connection closed under it is replaced and the request sent once more
 * (resend_once()). On failure the request is forgotten, @c is closed, @err
 * says why. Return: 0 or -errno.
 */
static int transmit(struct ibvf_api_conn *c, char *err, size_t errlen)
{
	int ret;

	for (;;) {
		if (c->fd < 0) {
			ret = connect_socket(c->path, c->deadline, err, errlen);
			if (ret < 0) {
				conn_forget(c);
				return ret;
			}
			c->fd = ret;
			c->connects++;
		}
		ret = send_all(c->fd, c->pending, strlen(c->pending), c->deadline);
		if (!ret)
			return 0;
		conn_drop(c);
		if (!resend_once(c, ret, false))
			return conn_fail(c, ret, err, errlen);
	}
}

int ibvf_api_conn_send(struct ibvf_api_conn *c, const char *method, json_t *params, int timeout_ms,
		       char *err, size_t errlen)
{
	if (c->pending)
		return ibvf_errf(err, errlen, -EBUSY,
				 "ibvfd at %s: method %s sent while %s waits for its reply",
				 c->path, method, c->method);
	c->deadline = ibvf_mono_ms() + (timeout_ms > 0 ? timeout_ms : 1);
	snprintf(c->method, sizeof(c->method), "%s", method);
	c->pending = request_line(method, params, c->next_id++);
	if (!c->pending)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	c->kept = false;
	if (c->fd >= 0) {
		c->kept = !conn_closed_by_peer(c->fd);
		if (!c->kept) {
			log_debug("ibvfd at %s closed the kept connection: connecting again",
				  c->path);
			conn_drop(c);
		}
	}
	return transmit(c, err, errlen);
}

int ibvf_api_conn_recv(struct ibvf_api_conn *c, json_t **result, struct ibvf_rpc_error *rerr,
		       char *err, size_t errlen)
{
	char *line = NULL;
	bool got, extra = false;
	int ret;

	*result = NULL;
	if (!c->pending)
		return ibvf_errf(err, errlen, -EINVAL, "ibvfd at %s: no request waits for a reply",
				 c->path);
	for (;;) {
		got = false;
		ret = c->fd >= 0 ? recv_line(c->fd, &line, c->deadline, &got, &extra) : -EPIPE;
		if (!ret)
			break;
		conn_drop(c);
		if (!resend_once(c, ret, got))
			return conn_fail(c, ret, err, errlen);
		ret = transmit(c, err, errlen);
		if (ret)
			return ret;
	}
	conn_forget(c);
	if (extra)
		conn_drop(c);
	ret = parse_reply(line, result, rerr, err, errlen);
	if (ret && ret != -EREMOTEIO)
		conn_drop(c);
	free(line);
	return ret;
}

int ibvf_api_conn_call(struct ibvf_api_conn *c, const char *method, json_t *params, int timeout_ms,
		       json_t **result, struct ibvf_rpc_error *rerr, char *err, size_t errlen)
{
	int ret;

	*result = NULL;
	ret = ibvf_api_conn_send(c, method, params, timeout_ms, err, errlen);
	if (!ret)
		ret = ibvf_api_conn_recv(c, result, rerr, err, errlen);
	return ret;
}

int ibvf_api_conn_open(const char *socket_path, struct ibvf_api_conn **out, char *err,
		       size_t errlen)
{
	struct ibvf_api_conn *c = malloc(sizeof(*c));
	int ret;

	*out = NULL;
	if (!c)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = conn_init(c, socket_path, err, errlen);
	if (ret) {
		free(c);
		return ret;
	}
	*out = c;
	return 0;
}

unsigned ibvf_api_conn_connects(const struct ibvf_api_conn *c)
{
	return c->connects;
}

void ibvf_api_conn_close(struct ibvf_api_conn *c)
{
	if (!c)
		return;
	conn_drop(c);
	conn_forget(c);
	free(c);
}

int ibvf_api_call(const char *socket_path, const char *method, json_t *params, int timeout_ms,
		  json_t **result, struct ibvf_rpc_error *rerr, char *err, size_t errlen)
{
	struct ibvf_api_conn c;
	int ret;

	*result = NULL;
	ret = conn_init(&c, socket_path, err, errlen);
	if (ret)
		return ret;
	ret = ibvf_api_conn_call(&c, method, params, timeout_ms, result, rerr, err, errlen);
	conn_drop(&c);
	conn_forget(&c);
	return ret;
}
