// SPDX-License-Identifier: MIT
/*
 * Unit tests of the API client's kept connection (daemon/api/api_client.c,
 * ibvf_api_conn_*) against a fake server in a thread that follows a script:
 * per connection and request it answers and keeps the connection, answers
 * and closes, closes without answering, or sends half an answer and closes.
 * The rules: a kept connection is reused; one the server closed is replaced
 * (reconnect after close); a request the server dropped unanswered on a kept
 * connection is sent once more, never twice; a request with part of its
 * reply read is never sent again; the one-shot call never sends twice. The
 * split call (ibvf_api_conn_send(), then ibvf_api_conn_recv()) keeps them:
 * the request is out before the caller's work between the two, one request
 * waits at a time, the resend happens in the receive, the deadline runs from
 * the send.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "api_client.h"
#include "log.h"

enum act {
	ANSWER_KEEP,  /* answer, read the next request */
	ANSWER_CLOSE, /* answer, close */
	DROP,	      /* read the request, close without answering */
	PARTIAL,      /* read the request, send half an answer, close */
	HOLD,	      /* read the request, never answer, read the next */
	LATE,	      /* read the request, answer 100 ms later (the client may be gone) */
};

#define MAX_ACTS 8

struct fake {
	char dir[64], sock[108];
	int lfd;
	pthread_t th;
	/* script: acts[i] for the i-th request the server reads, in order */
	enum act acts[MAX_ACTS];
	size_t n_acts;
	/* what happened (read after the client's calls, under lock) */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int conns, requests, closes, answers;
};

static int read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, 1);

		if (r <= 0)
			return -1;
		if (buf[n] == '\n') {
			buf[n] = 0;
			return 0;
		}
		n++;
	}
	return -1;
}

static void answer(int fd, const char *line, int conn)
{
	json_t *req = json_loads(line, 0, NULL);
	char out[256];
	int n;

	n = snprintf(out, sizeof(out),
		     "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{\"conn\":%d}}\n",
		     (long long)json_integer_value(json_object_get(req, "id")), conn);
	json_decref(req);
	assert_int_equal(write(fd, out, (size_t)n), n);
}

static void note_close(struct fake *f, int fd)
{
	close(fd);
	pthread_mutex_lock(&f->lock);
	f->closes++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void *serve(void *arg)
{
	struct fake *f = arg;
	size_t next = 0;

	for (;;) {
		int fd = accept(f->lfd, NULL, NULL), conn;
		char line[4096];

		if (fd < 0)
			return NULL; /* listener shut down */
		pthread_mutex_lock(&f->lock);
		conn = ++f->conns;
		pthread_mutex_unlock(&f->lock);
		for (;;) {
			enum act a;

			if (read_line(fd, line, sizeof(line))) {
				note_close(f, fd); /* the client closed */
				break;
			}
			pthread_mutex_lock(&f->lock);
			f->requests++;
			pthread_mutex_unlock(&f->lock);
			a = next < f->n_acts ? f->acts[next] : ANSWER_KEEP;
			next++;
			if (a == ANSWER_KEEP || a == ANSWER_CLOSE) {
				answer(fd, line, conn);
				pthread_mutex_lock(&f->lock);
				f->answers++;
				pthread_mutex_unlock(&f->lock);
			}
			if (a == LATE) {
				static const char late[] =
					"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";

				usleep(100 * 1000);
				/* MSG_NOSIGNAL: the client timed out and closed, no SIGPIPE */
				(void)!send(fd, late, sizeof(late) - 1, MSG_NOSIGNAL);
			}
			if (a == PARTIAL)
				assert_int_equal(write(fd, "{\"jsonrpc\":", 11), 11);
			if (a != ANSWER_KEEP && a != HOLD && a != LATE) {
				note_close(f, fd);
				break;
			}
		}
	}
}

static struct fake *fake_start(const enum act *acts, size_t n)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/ibvf-apic-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->sock, sizeof(f->sock), "%s/s", f->dir);
	if (n)
		memcpy(f->acts, acts, n * sizeof(*acts));
	f->n_acts = n;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->sock);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(pthread_create(&f->th, NULL, serve, f), 0);
	return f;
}

/* Wait until the server has closed @n connections (no time limit: meson's timeout is one). */
static void fake_wait_closes(struct fake *f, int n)
{
	pthread_mutex_lock(&f->lock);
	while (f->closes < n)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static void fake_stop(struct fake *f)
{
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->th, NULL);
	close(f->lfd);
	unlink(f->sock);
	rmdir(f->dir);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
}

static int requests(struct fake *f)
{
	int n;

	pthread_mutex_lock(&f->lock);
	n = f->requests;
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* One call on @c; returns its errno result, *@conn the fake's connection number. */
static int call(struct ibvf_api_conn *c, int *conn)
{
	char err[256];
	json_t *r = NULL;
	int ret = ibvf_api_conn_call(c, "echo", NULL, 5000, &r, NULL, err, sizeof(err));

	if (ret)
		fprintf(stderr, "call: %s\n", err);
	*conn = ret ? 0 : (int)json_integer_value(json_object_get(r, "conn"));
	json_decref(r);
	return ret;
}

static struct ibvf_api_conn *open_conn(struct fake *f)
{
	struct ibvf_api_conn *c;
	char err[256];

	assert_int_equal(ibvf_api_conn_open(f->sock, &c, err, sizeof(err)), 0);
	return c;
}

/* A server that keeps the connection: three calls, one connection. */
static void test_reused(void **state)
{
	struct fake *f = fake_start(NULL, 0);
	struct ibvf_api_conn *c = open_conn(f);
	int conn;

	(void)state;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(call(c, &conn), 0);
		assert_int_equal(conn, 1);
	}
	assert_int_equal(ibvf_api_conn_connects(c), 1);
	ibvf_api_conn_close(c);
	fake_wait_closes(f, 1);
	assert_int_equal(requests(f), 3);
	fake_stop(f);
}

/* A server that closes after each answer (idle timeout, restart): reconnect, no resend. */
static void test_reconnect_after_close(void **state)
{
	static const enum act acts[] = {ANSWER_CLOSE, ANSWER_CLOSE, ANSWER_CLOSE};
	struct fake *f = fake_start(acts, 3);
	struct ibvf_api_conn *c = open_conn(f);
	int conn;

	(void)state;
	for (int i = 1; i <= 3; i++) {
		assert_int_equal(call(c, &conn), 0);
		assert_int_equal(conn, i);
		fake_wait_closes(f, i); /* the close is there before the next call */
	}
	assert_int_equal(ibvf_api_conn_connects(c), 3);
	assert_int_equal(requests(f), 3); /* each request sent once */
	ibvf_api_conn_close(c);
	fake_stop(f);
}

/* The kept connection closed under the request, unanswered: sent once more, answered. */
static void test_dropped_request_sent_again(void **state)
{
	static const enum act acts[] = {ANSWER_KEEP, DROP, ANSWER_KEEP};
	struct fake *f = fake_start(acts, 3);
	struct ibvf_api_conn *c = open_conn(f);
	int conn;

	(void)state;
	assert_int_equal(call(c, &conn), 0);
	assert_int_equal(conn, 1);
	assert_int_equal(call(c, &conn), 0);
	assert_int_equal(conn, 2);
	assert_int_equal(ibvf_api_conn_connects(c), 2);
	assert_int_equal(requests(f), 3);
	ibvf_api_conn_close(c);
	fake_stop(f);
}

/* Dropped again on the new connection: an error after exactly one resend, never a loop. */
static void test_resent_once_only(void **state)
{
	static const enum act acts[] = {ANSWER_KEEP, DROP, DROP, DROP, DROP};
	struct fake *f = fake_start(acts, 5);
	struct ibvf_api_conn *c = open_conn(f);
	int conn;

	(void)state;
	assert_int_equal(call(c, &conn), 0);
	assert_int_equal(call(c, &conn), -ECONNRESET);
	fake_wait_closes(f, 2);
	assert_int_equal(requests(f), 3);
	assert_int_equal(ibvf_api_conn_connects(c), 2);
	/* the next call makes a new connection (the failed one is not kept) */
	assert_int_equal(call(c, &conn), -ECONNRESET);
	assert_int_equal(ibvf_api_conn_connects(c), 3);
	assert_int_equal(requests(f), 4);
	ibvf_api_conn_close(c);
	fake_stop(f);
}

/* Part of the reply read, then the close: the request may have run; never sent again. */
static void test_partial_reply_not_sent_again(void **state)
{
	static const enum act acts[] = {ANSWER_KEEP, PARTIAL, ANSWER_KEEP};
	struct fake *f = fake_start(acts, 3);
	struct ibvf_api_conn *c = open_conn(f);
	int conn;

	(void)state;
	assert_int_equal(call(c, &conn), 0);
	assert_int_equal(call(c, &conn), -ECONNRESET);
	fake_wait_closes(f, 1);
	assert_int_equal(requests(f), 2);
	assert_int_equal(ibvf_api_conn_connects(c), 1);
	ibvf_api_conn_close(c);
	fake_stop(f);
}

/* The one-shot call: a fresh connection dropped unanswered is an error, not a resend. */
static void test_one_shot_never_resends(void **state)
{
	static const enum act acts[] = {DROP, DROP};
	struct fake *f = fake_start(acts, 2);
	char err[256];
	json_t *r = NULL;

	(void)state;
	assert_int_equal(ibvf_api_call(f->sock, "echo", NULL, 5000, &r, NULL, err, sizeof(err)),
			 -ECONNRESET);
	assert_null(r);
	fake_wait_closes(f, 1);
	assert_int_equal(requests(f), 1);
	/* the same for a connection object's first call: nothing was kept */
	{
		struct ibvf_api_conn *c = open_conn(f);
		int conn;

		assert_int_equal(call(c, &conn), -ECONNRESET);
		fake_wait_closes(f, 2);
		assert_int_equal(requests(f), 2);
		ibvf_api_conn_close(c);
	}
	fake_stop(f);
}

/* Wait until the server has read @n requests (meson's timeout bounds it). */
static void fake_wait_requests(struct fake *f, int n)
{
	pthread_mutex_lock(&f->lock);
	while (f->requests < n) {
		pthread_mutex_unlock(&f->lock);
		usleep(1000);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
}

/*
 * Send, work, receive: the request reaches the server before the receive
 * (the caller's work overlaps ibvfd's), one request waits at a time, a
 * receive with nothing sent is refused, and the connection is kept for the
 * next call as after ibvf_api_conn_call().
 */
static void test_split_send_recv(void **state)
{
	struct fake *f = fake_start(NULL, 0);
	struct ibvf_api_conn *c = open_conn(f);
	char err[256];
	json_t *r = NULL;
	int conn;

	(void)state;
	assert_int_equal(ibvf_api_conn_recv(c, &r, NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(ibvf_api_conn_send(c, "echo", NULL, 5000, err, sizeof(err)), 0);
	fake_wait_requests(f, 1); /* out before any receive: the caller's work overlaps */
	assert_int_equal(ibvf_api_conn_send(c, "echo", NULL, 5000, err, sizeof(err)), -EBUSY);
	assert_int_equal(ibvf_api_conn_recv(c, &r, NULL, err, sizeof(err)), 0);
	assert_int_equal(json_integer_value(json_object_get(r, "conn")), 1);
	json_decref(r);
	r = NULL;
	assert_int_equal(ibvf_api_conn_recv(c, &r, NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(call(c, &conn), 0);
	assert_int_equal(conn, 1);
	assert_int_equal(ibvf_api_conn_connects(c), 1);
	assert_int_equal(requests(f), 2);
	ibvf_api_conn_close(c);
	fake_stop(f);
}

/* Split over a kept connection closed under the request: the receive sends it once more. */
static void test_split_dropped_sent_again(void **state)
{
	static const enum act acts[] = {ANSWER_KEEP, DROP, ANSWER_KEEP, DROP, DROP};
	struct fake *f = fake_start(acts, 5);
	struct ibvf_api_conn *c = open_conn(f);
	char err[256];
	json_t *r = NULL;
	int conn;

	(void)state;
	assert_int_equal(call(c, &conn), 0);
	assert_int_equal(ibvf_api_conn_send(c, "echo", NULL, 5000, err, sizeof(err)), 0);
	fake_wait_closes(f, 1); /* dropped unanswered while the caller worked */
	assert_int_equal(ibvf_api_conn_recv(c, &r, NULL, err, sizeof(err)), 0);
	assert_int_equal(json_integer_value(json_object_get(r, "conn")), 2);
	json_decref(r);
	assert_int_equal(requests(f), 3);
	/* dropped twice: one resend only, then the error */
	assert_int_equal(ibvf_api_conn_send(c, "echo", NULL, 5000, err, sizeof(err)), 0);
	assert_int_equal(ibvf_api_conn_recv(c, &r, NULL, err, sizeof(err)), -ECONNRESET);
	assert_null(r);
	fake_wait_closes(f, 3);
	assert_int_equal(requests(f), 5);
	assert_int_equal(ibvf_api_conn_connects(c), 3);
	ibvf_api_conn_close(c);
	fake_stop(f);
}

/*
 * The deadline runs from the send: a reply that comes after it (the server
 * answers 100 ms after a 20 ms timeout, the receive starts 50 ms after the
 * send) is no reply in time, and the connection is given up; the next call
 * makes a new connection. No timing is asserted, only the outcome.
 */
static void test_split_deadline_from_send(void **state)
{
	static const enum act acts[] = {LATE, ANSWER_KEEP};
	struct fake *f = fake_start(acts, 2);
	struct ibvf_api_conn *c = open_conn(f);
	char err[256];
	json_t *r = NULL;
	int conn;

	(void)state;
	assert_int_equal(ibvf_api_conn_send(c, "echo", NULL, 20, err, sizeof(err)), 0);
	usleep(50 * 1000); /* the caller's work outlasts the timeout */
	assert_int_equal(ibvf_api_conn_recv(c, &r, NULL, err, sizeof(err)), -ETIMEDOUT);
	assert_non_null(strstr(err, "no reply in time"));
	assert_int_equal(call(c, &conn), 0);
	assert_int_equal(conn, 2);
	ibvf_api_conn_close(c);
	fake_stop(f);
}

/*
 * A reply that came in time but is read after the deadline (the caller's
 * work between the send and the receive outlasted the timeout: ADD's cache
 * write after the commit's send, DEL's netdev move after release.sm's) is
 * the reply: ibvfd did what was asked, and taking it for "no reply in time"
 * turns a done commit into a failed ADD that is rolled back. The receive
 * reads what is there once more before it gives up. Only the outcome is
 * asserted: the server's answer is written before the deadline is passed.
 */
static void test_split_reply_read_after_deadline(void **state)
{
	struct fake *f = fake_start(NULL, 0);
	struct ibvf_api_conn *c = open_conn(f);
	char err[256];
	json_t *r = NULL;

	(void)state;
	assert_int_equal(ibvf_api_conn_send(c, "echo", NULL, 20, err, sizeof(err)), 0);
	pthread_mutex_lock(&f->lock);
	while (f->answers < 1) {
		pthread_mutex_unlock(&f->lock);
		usleep(1000);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	usleep(50 * 1000); /* the caller's work outlasts the timeout; the reply waits */
	assert_int_equal(ibvf_api_conn_recv(c, &r, NULL, err, sizeof(err)), 0);
	assert_int_equal(json_integer_value(json_object_get(r, "conn")), 1);
	json_decref(r);
	ibvf_api_conn_close(c);
	fake_stop(f);
}

/* Closed with a request waiting for its reply: nothing leaks (valgrind/ASan builds). */
static void test_split_close_pending(void **state)
{
	static const enum act acts[] = {HOLD};
	struct fake *f = fake_start(acts, 1);
	struct ibvf_api_conn *c = open_conn(f);
	char err[256];

	(void)state;
	assert_int_equal(ibvf_api_conn_send(c, "echo", NULL, 5000, err, sizeof(err)), 0);
	ibvf_api_conn_close(c);
	fake_wait_closes(f, 1);
	fake_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reused),
		cmocka_unit_test(test_reconnect_after_close),
		cmocka_unit_test(test_dropped_request_sent_again),
		cmocka_unit_test(test_resent_once_only),
		cmocka_unit_test(test_partial_reply_not_sent_again),
		cmocka_unit_test(test_one_shot_never_resends),
		cmocka_unit_test(test_split_send_recv),
		cmocka_unit_test(test_split_dropped_sent_again),
		cmocka_unit_test(test_split_deadline_from_send),
		cmocka_unit_test(test_split_reply_read_after_deadline),
		cmocka_unit_test(test_split_close_pending),
	};

	signal(SIGPIPE, SIG_IGN);
	ibvf_log_init("test_api_client", IBVF_LOG_STDERR,
		      getenv("IBVF_TEST_DEBUG") ? LOG_DEBUG : LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
