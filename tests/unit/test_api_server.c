// SPDX-License-Identifier: MIT
/*
 * Unit tests of the ibvfd API server (daemon/engine/api_server.c): socket
 * permissions, SO_PEERCRED (a child that drops to uid 65534), framing abuse
 * (garbage, over-long lines, invalid requests), pipelining, half-closed and
 * vanishing clients, the in-flight limit; plus the client library against it.
 * The server's loop runs in its own thread; the test thread is the client.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include <ibvf/api.h>

#include "api_client.h"
#include "api_server.h"
#include "clock.h"
#include "evloop.h"
#include "log.h"

#define MAX_LINE 65536

struct fx {
	char dir[64];
	char sock[128];
	struct ibvf_loop *loop;
	struct ibvf_api_server *srv; /* set before the loop thread starts */
	pthread_t th;
	pthread_mutex_t lock;
	int undelivered, delivered;
	int gate[2]; /* "block": the loop thread waits for a byte on gate[0] */
};

struct slow {
	struct fx *f;
	ibvf_reply_fn reply;
	void *ctx;
	json_t *result;
	struct ibvf_timer *t;
};

static void slow_fire(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct slow *s = arg;
	bool ok;

	(void)l;
	(void)t;
	ok = s->reply(s->ctx, s->result, 0, NULL, 0, NULL);
	pthread_mutex_lock(&s->f->lock);
	if (ok)
		s->f->delivered++;
	else
		s->f->undelivered++;
	pthread_mutex_unlock(&s->f->lock);
	ibvf_timer_free(s->t);
	free(s);
}

/* echo: answer at once; slow: after params.ms; stop: quit the loop */
static void dispatch(void *ctx, const char *method, json_t *params, ibvf_reply_fn reply, void *rctx)
{
	struct fx *f = ctx;

	if (!strcmp(method, "echo")) {
		reply(rctx, json_pack("{s:O?}", "params", params), 0, NULL, 0, NULL);
	} else if (!strcmp(method, "slow")) {
		struct slow *s = calloc(1, sizeof(*s));
		json_int_t ms = json_integer_value(json_object_get(params, "ms"));

		s->f = f;
		s->reply = reply;
		s->ctx = rctx;
		s->result = json_pack("{s:I}", "slept", ms);
		s->t = ibvf_loop_timer(f->loop, ms > 0 ? (uint64_t)ms : 1, 0, slow_fire, s);
	} else if (!strcmp(method, "stats")) { /* on the loop thread: no race */
		struct ibvf_api_server_stats st;

		ibvf_api_server_stats(f->srv, &st);
		reply(rctx,
		      json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "conns", (json_int_t)st.conns,
				"out_queued", (json_int_t)st.out_queued, "out_peak",
				(json_int_t)st.out_peak, "closed_idle", (json_int_t)st.closed_idle,
				"closed_line", (json_int_t)st.closed_line, "evicted",
				(json_int_t)st.evicted, "refused_busy",
				(json_int_t)st.refused_busy),
		      0, NULL, 0, NULL);
	} else if (!strcmp(method, "block")) { /* stall the loop until the test writes */
		char c;

		reply(rctx, json_object(), 0, NULL, 0, NULL);
		while (read(f->gate[0], &c, 1) < 0 && errno == EINTR)
			;
	} else if (!strcmp(method, "stop")) {
		reply(rctx, json_object(), 0, NULL, 0, NULL);
		ibvf_loop_quit(f->loop);
	} else {
		reply(rctx, NULL, IBVF_RPC_METHOD_NOT_FOUND, "method not found", 0, "");
	}
}

static void *loop_thread(void *arg)
{
	struct fx *f = arg;

	ibvf_loop_run(f->loop);
	return NULL;
}

/* Server options of a test (cmocka prestate); NULL: the defaults below. */
struct params {
	size_t max_out;
	unsigned idle_ms, line_ms;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	const struct params *pp = *state;
	uid_t root = 0;
	struct ibvf_api_server_opts o = {
		.allowed_uids = &root,
		.n_allowed_uids = 1,
		.dispatch = dispatch,
		.max_inflight = 4,
		.max_line = MAX_LINE,
		.max_out = pp ? pp->max_out : 0,
		.idle_timeout_ms = pp ? pp->idle_ms : 0,
		.line_timeout_ms = pp ? pp->line_ms : 0,
	};
	char err[256];

	snprintf(f->dir, sizeof(f->dir), "/tmp/ibvf-api-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->sock, sizeof(f->sock), "%s/run/ibvfd.sock", f->dir);
	pthread_mutex_init(&f->lock, NULL);
	assert_int_equal(pipe(f->gate), 0);
	assert_int_equal(ibvf_loop_new(&f->loop, err, sizeof(err)), 0);
	o.loop = f->loop;
	o.socket_path = f->sock;
	o.dispatch_ctx = f;
	if (ibvf_api_server_new(&o, &f->srv, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(pthread_create(&f->th, NULL, loop_thread, f), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	json_t *r = NULL;
	char cmd[128], err[256];

	/* ask the loop thread to stop itself */
	assert_int_equal(ibvf_api_call(f->sock, "stop", NULL, 5000, &r, NULL, err, sizeof(err)), 0);
	json_decref(r);
	pthread_join(f->th, NULL);
	ibvf_api_server_free(f->srv);
	ibvf_loop_free(f->loop);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	pthread_mutex_destroy(&f->lock);
	close(f->gate[0]);
	close(f->gate[1]);
	free(f);
	return 0;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {10, 0};

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void send_str(int fd, const char *s)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		assert_true(n > 0);
		s += n;
		len -= (size_t)n;
	}
}

/* One reply line (parsed); NULL on EOF. */
static json_t *read_reply(int fd)
{
	char buf[8192];
	size_t len = 0;

	while (len < sizeof(buf) - 1) {
		ssize_t n = recv(fd, buf + len, 1, 0);

		if (n <= 0)
			return NULL;
		if (buf[len] == '\n') {
			buf[len] = 0;
			return json_loads(buf, 0, NULL);
		}
		len++;
	}
	return NULL;
}

static int err_code(json_t *r)
{
	return (int)json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

static void test_socket_modes(void **state)
{
	struct fx *f = *state;
	struct stat st;
	char dir[128];

	assert_int_equal(stat(f->sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(dir, sizeof(dir), "%s/run", f->dir);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
}

static void test_client_library(void **state)
{
	struct fx *f = *state;
	struct ibvf_rpc_error re;
	json_t *r = NULL, *p = json_pack("{s:s}", "x", "y");
	char err[256];

	assert_int_equal(ibvf_api_call(f->sock, "echo", p, 5000, &r, &re, err, sizeof(err)), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "params"), "x")),
			    "y");
	json_decref(r);
	assert_int_equal(ibvf_api_call(f->sock, "nope", p, 5000, &r, &re, err, sizeof(err)),
			 -EREMOTEIO);
	assert_int_equal(re.code, IBVF_RPC_METHOD_NOT_FOUND);
	json_decref(p);
	/* no daemon: a clear error callers can fall back on */
	assert_int_equal(ibvf_api_call("/nonexistent/ibvfd.sock", "echo", NULL, 1000, &r, NULL, err,
				       sizeof(err)),
			 -ENOENT);
}

static void test_garbage_keeps_connection(void **state)
{
	struct fx *f = *state;
	int fd = connect_to(f->sock);
	json_t *r;

	send_str(fd, "this is not json\n");
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_PARSE_ERROR);
	assert_true(json_is_null(json_object_get(r, "id")));
	json_decref(r);
	send_str(fd,
		 "\x01\xff\xfe{{{\n[1,2]\n{\"jsonrpc\":\"1.0\",\"method\":\"echo\",\"id\":3}\n");
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_PARSE_ERROR);
	json_decref(r);
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_INVALID_REQUEST);
	json_decref(r);
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_INVALID_REQUEST);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 3);
	json_decref(r);
	/* duplicate keys, wrong params type, unknown method, blank line, CRLF */
	send_str(fd,
		 "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"method\":\"x\",\"id\":4}\n"
		 "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1],\"id\":5}\n"
		 "\n\n"
		 "{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"id\":6}\r\n"
		 "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{},\"id\":\"seven\"}\r\n");
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_PARSE_ERROR);
	json_decref(r);
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_INVALID_REQUEST);
	json_decref(r);
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_METHOD_NOT_FOUND);
	json_decref(r);
	r = read_reply(fd);
	assert_non_null(json_object_get(r, "result"));
	assert_string_equal(json_string_value(json_object_get(r, "id")), "seven");
	json_decref(r);
	close(fd);
}

static void test_huge_line(void **state)
{
	struct fx *f = *state;
	int fd = connect_to(f->sock);
	size_t n = MAX_LINE * 3;
	char *big = malloc(n + 2);
	json_t *r;

	memset(big, 'A', n);
	big[n] = '\n';
	big[n + 1] = 0;
	send_str(fd, big);
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_INVALID_REQUEST);
	assert_non_null(
		strstr(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
		       "longer than"));
	json_decref(r);
	/* a line just over the limit, in a JSON string */
	memcpy(big, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"s\":\"", 48);
	big[MAX_LINE + 10] = 0;
	big[MAX_LINE + 9] = '\n';
	send_str(fd, big);
	r = read_reply(fd);
	assert_int_equal(err_code(r), IBVF_RPC_INVALID_REQUEST);
	json_decref(r);
	free(big);
	/* still usable */
	send_str(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":9}\n");
	r = read_reply(fd);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 9);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	close(fd);
}

/*
 * A reply longer than the line limit is replaced by an error, nothing of it
 * sent: 10,000 reals "1e8" (4 bytes each in the request, under MAX_LINE)
 * echo back as "100000000.0" (12 each, over it). The connection stays
 * usable.
 */
static void test_reply_over_line_limit(void **state)
{
	struct fx *f = *state;
	int fd = connect_to(f->sock);
	size_t n = 10000, off;
	char *req = malloc(n * 4 + 128);
	json_t *r;

	off = (size_t)sprintf(req, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"a\":[");
	for (size_t i = 0; i < n; i++)
		off += (size_t)sprintf(req + off, i ? ",1e8" : "1e8");
	sprintf(req + off, "]},\"id\":8}\n");
	assert_true(strlen(req) < MAX_LINE);
	send_str(fd, req);
	free(req);
	r = read_reply(fd); /* NULL if any part of the long reply came first */
	assert_non_null(r);
	assert_int_equal(err_code(r), IBVF_RPC_INTERNAL_ERROR);
	assert_non_null(
		strstr(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
		       "larger than the line limit"));
	json_decref(r);
	send_str(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":9}\n");
	r = read_reply(fd);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 9);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	close(fd);
}

/* 10 pipelined requests (more than max_inflight 4), slow ones answered later. */
static void test_pipelining(void **state)
{
	struct fx *f = *state;
	int fd = connect_to(f->sock), seen = 0;
	char buf[4096] = "";

	for (int i = 1; i <= 10; i++) {
		size_t l = strlen(buf);

		snprintf(
			buf + l, sizeof(buf) - l,
			"{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":{\"ms\":%d},\"id\":%d}\n",
			i % 2 ? "slow" : "echo", 50 - 4 * i, i);
	}
	send_str(fd, buf);
	for (int i = 0; i < 10; i++) {
		json_t *r = read_reply(fd);
		int id = (int)json_integer_value(json_object_get(r, "id"));

		assert_non_null(json_object_get(r, "result"));
		assert_true(id >= 1 && id <= 10);
		seen |= 1 << id;
		json_decref(r);
	}
	assert_int_equal(seen, 0x7fe);
	close(fd);
}

/* The client shuts down its write side: every answer still arrives, then EOF. */
static void test_half_closed(void **state)
{
	struct fx *f = *state;
	int fd = connect_to(f->sock);
	json_t *r;

	send_str(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"params\":{\"ms\":100},\"id\":1}\n"
		     "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":2}\n"
		     "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":3}");
	shutdown(fd, SHUT_WR);
	for (int i = 0; i < 3; i++) {
		r = read_reply(fd);
		assert_non_null(r);
		assert_non_null(json_object_get(r, "result"));
		json_decref(r);
	}
	assert_null(read_reply(fd)); /* EOF */
	close(fd);
}

/* The client leaves mid-request: the reply reports "not delivered". */
static void test_disconnect_mid_request(void **state)
{
	struct fx *f = *state;
	int fd = connect_to(f->sock);

	send_str(fd,
		 "{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"params\":{\"ms\":200},\"id\":1}\n");
	usleep(50000);
	close(fd);
	for (int i = 0; i < 100; i++) {
		int n;

		pthread_mutex_lock(&f->lock);
		n = f->undelivered;
		pthread_mutex_unlock(&f->lock);
		if (n)
			break;
		usleep(20000);
	}
	pthread_mutex_lock(&f->lock);
	assert_int_equal(f->undelivered, 1);
	pthread_mutex_unlock(&f->lock);
}

/* A peer whose uid is not allowed gets IBVF_RPC_DENIED and EOF. */
static void test_wrong_uid(void **state)
{
	struct fx *f = *state;
	char dir[128];
	pid_t pid;
	int st;

	if (geteuid() != 0) {
		fprintf(stderr, "SKIP part: not root, cannot drop privileges\n");
		skip();
	}
	/* open the way (the file modes are the first defence; SO_PEERCRED the second) */
	snprintf(dir, sizeof(dir), "%s/run", f->dir);
	assert_int_equal(chmod(f->dir, 0711), 0);
	assert_int_equal(chmod(dir, 0711), 0);
	assert_int_equal(chmod(f->sock, 0666), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		json_t *r;
		int fd, code;

		if (setgroups(0, NULL) || setgid(65534) || setuid(65534) || getuid() != 65534)
			_exit(10);
		fd = connect_to(f->sock);
		if (fd < 0)
			_exit(11);
		/* no cmocka asserts in the child; the server may have closed already */
		if (send(fd, "{}\n", 3, MSG_NOSIGNAL) < 0 && errno != EPIPE && errno != ECONNRESET)
			_exit(14);
		r = read_reply(fd);
		code = err_code(r);
		json_decref(r);
		if (code != IBVF_RPC_DENIED)
			_exit(12);
		r = read_reply(fd);
		_exit(r ? 13 : 0); /* closed after the refusal */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_listener_rules(void **state)
{
	struct fx *f = *state;
	struct ibvf_api_server *s2 = NULL;
	uid_t root = 0;
	struct ibvf_api_server_opts o = {
		.loop = f->loop,
		.socket_path = f->sock,
		.allowed_uids = &root,
		.n_allowed_uids = 1,
		.dispatch = dispatch,
		.dispatch_ctx = f,
	};
	char err[256], path[160];
	int fd;

	/* a live daemon answers there: refuse to steal its socket */
	assert_int_equal(ibvf_api_server_new(&o, &s2, err, sizeof(err)), -EADDRINUSE);
	/* a regular file where the socket should be */
	snprintf(path, sizeof(path), "%s/run/file.sock", f->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	o.socket_path = path;
	assert_int_equal(ibvf_api_server_new(&o, &s2, err, sizeof(err)), -EEXIST);
}

/* ------------------------------------------------ connection pressure -- */

static json_int_t stat_of(struct fx *f, const char *key)
{
	json_t *r = NULL;
	char err[256];
	json_int_t v;

	if (ibvf_api_call(f->sock, "stats", NULL, 5000, &r, NULL, err, sizeof(err)))
		fail_msg("stats: %s", err);
	v = json_integer_value(json_object_get(r, key));
	json_decref(r);
	return v;
}

/* ms until @fd reports EOF (or an error), -1 if not within @max_ms; data is read and dropped. */
static long long ms_to_eof(int fd, int max_ms)
{
	long long t0 = ibvf_mono_ms();

	for (;;) {
		long long left = t0 + max_ms - ibvf_mono_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char buf[4096];

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			return ibvf_mono_ms() - t0;
	}
}

#define PIPE_MAX_OUT (64 * 1024)
static const struct params pipe_params = {.max_out = PIPE_MAX_OUT};

/*
 * A client pipelines requests and never reads: the server stops reading once
 * PIPE_MAX_OUT bytes of answers are queued, so the client's sends stall and
 * the queue stays bounded; when the client reads, every answer arrives.
 */
static void test_pipelining_without_reading(void **state)
{
	struct fx *f = *state;
	int fd = connect_to(f->sock);
	char req[1200], pad[1001];
	size_t total = 0, complete = 0, reqlen, off = 0;
	int id = 0, results = 0, errors = 0;
	json_int_t peak, queued;
	json_t *r;

	memset(pad, 'p', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = 0;
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	reqlen = (size_t)snprintf(
		req, sizeof(req),
		"{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"pad\":\"%s\"},\"id\":%6d}\n",
		pad, id);
	/* up to 16 MiB, or until the server has not read for 500 ms */
	while (total < 16u << 20) {
		ssize_t n;

		if (!off)
			snprintf(
				req, sizeof(req),
				"{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"pad\":\"%s\"},"
				"\"id\":%6d}\n",
				pad, ++id);
		n = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
		if (n > 0) {
			total += (size_t)n;
			off += (size_t)n;
			if (off == reqlen) {
				off = 0;
				complete++;
			}
			continue;
		}
		assert_true(n < 0 && errno == EAGAIN);
		{
			struct pollfd p = {.fd = fd, .events = POLLOUT};

			if (poll(&p, 1, 500) == 0)
				break; /* stalled: the server paused reading */
		}
	}
	peak = stat_of(f, "out_peak");
	queued = stat_of(f, "out_queued");
	fprintf(stderr, "sent %zu bytes (%zu requests); server queue %lld, peak %lld bytes\n",
		total, complete, (long long)queued, (long long)peak);
	/* the bound: max_out, plus the answers of the requests executing (4 x ~1.1 KiB) */
	assert_true(peak <= PIPE_MAX_OUT + 4 * 1200);
	assert_true(queued <= peak);
	assert_true(total < 16u << 20); /* the client was stopped */
	/* now read: every request is answered (a cut last line is one error at EOF) */
	assert_int_equal(fcntl(fd, F_SETFL, 0), 0);
	shutdown(fd, SHUT_WR);
	while ((r = read_reply(fd))) {
		if (json_object_get(r, "result"))
			results++;
		else
			errors++;
		json_decref(r);
	}
	assert_int_equal(results, (int)complete);
	assert_int_equal(errors, off ? 1 : 0);
	close(fd);
}

/*
 * 1,100 idle connections (more than max_conns, 1024): once they have been
 * idle a second, a new client is served; the longest-idle one made room.
 */
static void test_idle_connections_do_not_lock_out(void **state)
{
	struct fx *f = *state;
	enum { N = 1100 };
	static int fds[N];
	struct rlimit rl;
	json_t *r = NULL;
	char err[256];
	int ret;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * N + 200) {
		rl.rlim_cur =
			rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 4096 ? 4096 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < 2 * N + 200) {
		fprintf(stderr, "SKIP: RLIMIT_NOFILE %llu is too low for %d connections\n",
			(unsigned long long)rl.rlim_cur, N);
		skip();
	}
	for (int i = 0; i < N; i++) {
		fds[i] = connect_to(f->sock);
		assert_true(fds[i] >= 0);
	}
	usleep(1200 * 1000); /* evictable after min(1 s, idle timeout) */
	ret = ibvf_api_call(f->sock, "echo", NULL, 5000, &r, NULL, err, sizeof(err));
	if (ret)
		fail_msg("a new client is not served: %s", err);
	json_decref(r);
	/* the oldest connection was closed to make room */
	assert_true(ms_to_eof(fds[0], 2000) >= 0);
	assert_true(stat_of(f, "conns") <= 1024);
	assert_true(stat_of(f, "evicted") >= 1);
	for (int i = 0; i < N; i++)
		close(fds[i]);
}

/*
 * A burst of 1,000 clients connecting while the loop is busy (issue 17: a
 * burst of CNI ADDs): every connect() finds room in the listen backlog (a
 * full AF_UNIX backlog fails it with EAGAIN, and the real client then
 * sleeps before it retries), and every client gets its reply.
 */
static void test_burst_of_clients_all_answered(void **state)
{
	struct fx *f = *state;
	enum { N = 1000 };
	static int fds[N];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int blocker, refused = 0, answered = 0;
	struct rlimit rl;
	json_t *r;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * N + 200) {
		rl.rlim_cur =
			rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 4096 ? 4096 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < 2 * N + 200) {
		fprintf(stderr, "SKIP: RLIMIT_NOFILE %llu is too low for %d connections\n",
			(unsigned long long)rl.rlim_cur, N);
		skip();
	}
	/* the loop thread stalls inside "block" (after answering it): nobody accepts */
	blocker = connect_to(f->sock);
	assert_true(blocker >= 0);
	send_str(blocker, "{\"jsonrpc\":\"2.0\",\"method\":\"block\",\"id\":1}\n");
	r = read_reply(blocker);
	assert_non_null(r);
	json_decref(r);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", f->sock);
	for (int i = 0; i < N; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		assert_true(fds[i] >= 0);
		if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa))) {
			assert_int_equal(errno, EAGAIN); /* the backlog is full */
			refused++;
			close(fds[i]);
			fds[i] = -1;
			continue;
		}
		assert_int_equal(fcntl(fds[i], F_SETFL, 0), 0);
		send_str(fds[i], "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":7}\n");
	}
	assert_int_equal(write(f->gate[1], "x", 1), 1); /* the loop goes on */
	if (refused)
		fail_msg("%d of %d connects at once found the listen backlog full", refused, N);
	for (int i = 0; i < N; i++) {
		struct timeval tv = {10, 0};

		setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		r = read_reply(fds[i]);
		answered += r && json_integer_value(json_object_get(r, "id")) == 7 &&
			    json_is_object(json_object_get(r, "result"));
		json_decref(r);
		close(fds[i]);
	}
	close(blocker);
	assert_int_equal(answered, N);
}

static const struct params idle_params = {.idle_ms = 300, .line_ms = 10000};

/*
 * A connection that pipelined echo requests until the server stopped reading:
 * its socket stayed full for 100 ms and the server holds at least max_out of
 * answers for it (a server that was only slow, e.g. under ASan on a loaded
 * machine, is sent more: the 100 ms alone failed test_idle_connection_closed
 * now and then).
 */
static int stuffer(struct fx *f)
{
	static const char req[] =
		"{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"pad\":"
		"\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"},\"id\":1}\n";
	int fd = connect_to(f->sock);
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	for (size_t total = 0; total < 64u << 20;) {
		ssize_t n = send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);

		if (n > 0)
			total += (size_t)n;
		else if (n < 0 && errno == EAGAIN && poll(&p, 1, 100) == 0 &&
			 stat_of(f, "out_queued") >= 256 * 1024)
			return fd;
	}
	fail_msg("the server never stopped reading");
	return -1;
}

/* An idle connection is closed after the idle timeout, not before; one with work is not. */
static void test_idle_connection_closed(void **state)
{
	struct fx *f = *state;
	int idle = connect_to(f->sock), busy = connect_to(f->sock), chatty;
	long long t0 = ibvf_mono_ms(), dt;
	json_t *r;

	/* a request executing longer than the idle timeout */
	send_str(busy,
		 "{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"params\":{\"ms\":800},\"id\":1}\n");
	dt = ms_to_eof(idle, 3000);
	if (dt >= 0)
		dt = ibvf_mono_ms() - t0;
	fprintf(stderr, "idle connection closed after %lld ms\n", dt);
	assert_true(dt >= 290);
	assert_true(dt < 2000);
	r = read_reply(busy);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	close(busy);
	/* a client with a request every 100 ms for 3 idle timeouts stays connected */
	chatty = connect_to(f->sock);
	for (int i = 0; i < 10; i++) {
		send_str(chatty, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":2}\n");
		r = read_reply(chatty);
		assert_non_null(json_object_get(r, "result"));
		json_decref(r);
		usleep(100 * 1000);
	}
	assert_int_equal(stat_of(f, "closed_idle"), 1);
	close(idle);
	close(chatty);
	/* a client that sends but never reads its answers is closed as well */
	{
		int fd = stuffer(f);
		struct pollfd p = {.fd = fd, .events = POLLRDHUP};

		assert_true(stat_of(f, "out_queued") >= 256 * 1024); /* paused on its answers */
		/* wait for the close without reading (reading would un-pause it) */
		assert_int_equal(poll(&p, 1, 3000), 1);
		assert_true(p.revents & (POLLHUP | POLLRDHUP));
		close(fd);
	}
	assert_int_equal(stat_of(f, "closed_idle"), 2);
}

/*
 * The client's kept connection (ibvf_api_conn_*) across the server's idle
 * close: the CNI plugin's prepare, then its commit after the netns move,
 * with the connection closed in between; the commit gets through on a new
 * connection (issue 17).
 */
static void test_kept_connection_after_idle_close(void **state)
{
	struct fx *f = *state;
	struct ibvf_api_conn *c;
	json_t *r = NULL;
	char err[256];

	assert_int_equal(ibvf_api_conn_open(f->sock, &c, err, sizeof(err)), 0);
	assert_int_equal(ibvf_api_conn_call(c, "echo", NULL, 5000, &r, NULL, err, sizeof(err)), 0);
	json_decref(r);
	assert_int_equal(ibvf_api_conn_call(c, "echo", NULL, 5000, &r, NULL, err, sizeof(err)), 0);
	json_decref(r);
	assert_int_equal(ibvf_api_conn_connects(c), 1);
	while (stat_of(f, "closed_idle") < 1)
		usleep(50 * 1000); /* no time limit here: meson's timeout is the bound */
	if (ibvf_api_conn_call(c, "echo", NULL, 5000, &r, NULL, err, sizeof(err)))
		fail_msg("call after the idle close: %s", err);
	json_decref(r);
	assert_int_equal(ibvf_api_conn_connects(c), 2);
	ibvf_api_conn_close(c);
}

static const struct params line_params = {.idle_ms = 10000, .line_ms = 300};

/* Slowloris: a request line dribbled a byte every 50 ms is closed after the line timeout. */
static void test_slowloris_closed(void **state)
{
	struct fx *f = *state;
	int fd = connect_to(f->sock), ok = connect_to(f->sock);
	long long t0, dt = -1;
	json_t *r;

	/* a request in pieces, within the timeout, is fine */
	send_str(ok, "{\"jsonrpc\":\"2.0\",");
	usleep(100 * 1000);
	send_str(ok, "\"method\":\"echo\",\"id\":1}\n");
	r = read_reply(ok);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);

	t0 = ibvf_mono_ms();
	while (ibvf_mono_ms() - t0 < 3000) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (send(fd, "{", 1, MSG_NOSIGNAL) < 0 || poll(&p, 1, 50) > 0) {
			dt = ibvf_mono_ms() - t0;
			break;
		}
	}
	fprintf(stderr, "slowloris connection closed after %lld ms\n", dt);
	assert_true(dt >= 290);
	assert_true(dt < 2000);
	r = read_reply(fd); /* the reason, then EOF */
	assert_int_equal(err_code(r), IBVF_RPC_INVALID_REQUEST);
	assert_non_null(
		strstr(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
		       "not completed"));
	json_decref(r);
	assert_int_equal(ms_to_eof(fd, 2000) >= 0, 1);
	assert_true(stat_of(f, "closed_line") >= 1);
	close(fd);
	close(ok);
}

/* ------------------------------------------------ full listen backlog -- */

struct bl {
	char dir[64], sock[96];
	int lfd;
	int accept_after_ms; /* <0: never accept */
	pthread_t th;
};

/* A listener with backlog 0 (one queued connection) whose queue is then filled. */
static void backlog_setup(struct bl *b)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = 0;

	snprintf(b->dir, sizeof(b->dir), "/tmp/ibvf-bl-XXXXXX");
	assert_non_null(mkdtemp(b->dir));
	snprintf(b->sock, sizeof(b->sock), "%s/s", b->dir);
	memcpy(sa.sun_path, b->sock, strlen(b->sock) + 1);
	b->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(b->lfd >= 0);
	assert_int_equal(bind(b->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(b->lfd, 0), 0);
	/* fill the queue; the fillers are closed but stay queued until accepted */
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		int e = errno;

		close(fd);
		if (r) {
			assert_int_equal(e, EAGAIN);
			break;
		}
		assert_true(++n < 100);
	}
	assert_true(n >= 1);
}

/* After accept_after_ms: accept everything, answer any request line. */
static void *backlog_server(void *arg)
{
	struct bl *b = arg;

	usleep((useconds_t)b->accept_after_ms * 1000);
	for (;;) {
		int fd = accept(b->lfd, NULL, NULL);
		char buf[4096];
		size_t len = 0;

		if (fd < 0)
			return NULL;
		for (;;) {
			ssize_t n = recv(fd, buf + len, sizeof(buf) - len - 1, 0);

			if (n <= 0)
				break; /* a filler: EOF */
			len += (size_t)n;
			if (memchr(buf, '\n', len)) {
				static const char ok[] =
					"{\"jsonrpc\":\"2.0\",\"result\":{},\"id\":1}\n";

				send(fd, ok, sizeof(ok) - 1, MSG_NOSIGNAL);
				close(fd);
				return NULL;
			}
		}
		close(fd);
	}
}

static void backlog_teardown(struct bl *b)
{
	char cmd[128];

	close(b->lfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", b->dir);
	assert_int_equal(system(cmd), 0);
}

/* Nobody accepts: the client keeps trying until its deadline, not less. */
static void test_backlog_full_times_out(void **state)
{
	struct bl b;
	json_t *r = NULL;
	char err[256];
	long long t0, dt;
	int ret;

	(void)state;
	backlog_setup(&b);
	t0 = ibvf_mono_ms();
	ret = ibvf_api_call(b.sock, "echo", NULL, 400, &r, NULL, err, sizeof(err));
	dt = ibvf_mono_ms() - t0;
	if (ret != -ETIMEDOUT)
		fail_msg("expected -ETIMEDOUT, got %d (%s) after %lld ms", ret, err, dt);
	assert_true(dt >= 390);
	assert_true(dt < 2000);
	assert_null(r);
	backlog_teardown(&b);
}

/* The server starts accepting after 300 ms: the client gets through. */
static void test_backlog_full_then_accepted(void **state)
{
	struct bl b;
	json_t *r = NULL;
	char err[256];
	long long t0, dt;
	int ret;

	(void)state;
	backlog_setup(&b);
	b.accept_after_ms = 300;
	assert_int_equal(pthread_create(&b.th, NULL, backlog_server, &b), 0);
	t0 = ibvf_mono_ms();
	ret = ibvf_api_call(b.sock, "echo", NULL, 5000, &r, NULL, err, sizeof(err));
	dt = ibvf_mono_ms() - t0;
	if (ret)
		fail_msg("call failed after %lld ms: %d %s", dt, ret, err);
	assert_true(dt >= 250);
	assert_true(json_is_object(r));
	json_decref(r);
	shutdown(b.lfd, SHUT_RDWR); /* ends the server thread's accept() */
	pthread_join(b.th, NULL);
	backlog_teardown(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_socket_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_library, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage_keeps_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_huge_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reply_over_line_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pipelining, setup, teardown),
		cmocka_unit_test_setup_teardown(test_half_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disconnect_mid_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_uid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_listener_rules, setup, teardown),
		cmocka_unit_test_prestate_setup_teardown(test_pipelining_without_reading, setup,
							 teardown, (void *)&pipe_params),
		cmocka_unit_test_setup_teardown(test_idle_connections_do_not_lock_out, setup,
						teardown),
		cmocka_unit_test_prestate_setup_teardown(test_idle_connection_closed, setup,
							 teardown, (void *)&idle_params),
		cmocka_unit_test_prestate_setup_teardown(test_kept_connection_after_idle_close,
							 setup, teardown, (void *)&idle_params),
		cmocka_unit_test_prestate_setup_teardown(test_slowloris_closed, setup, teardown,
							 (void *)&line_params),
		cmocka_unit_test_setup_teardown(test_burst_of_clients_all_answered, setup,
						teardown),
		cmocka_unit_test(test_backlog_full_times_out),
		cmocka_unit_test(test_backlog_full_then_accepted),
	};

	signal(SIGPIPE, SIG_IGN);
	ibvf_log_init("test_api_server", IBVF_LOG_STDERR,
		      getenv("IBVF_TEST_DEBUG") ? LOG_DEBUG : LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
