// SPDX-License-Identifier: MIT
/* Unit tests of the event loop, worker pool and sd_notify (daemon/engine). */
#include <errno.h>
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

#include "evloop.h"
#include "sd_notify.h"
#include "workq.h"

struct ctx {
	struct ibvf_loop *l;
	int ticks, posts, sig, jobs_done;
	int64_t t0, t_first;
	pthread_t loop_thread;
	bool on_loop;
};

static void tick(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct ctx *c = arg;

	(void)t;
	if (!c->ticks++)
		c->t_first = ibvf_mono_ms();
	if (c->ticks == 3)
		ibvf_loop_quit(l);
}

/* One-shot after 30 ms, then every 10 ms: three ticks, the first not early. */
static void test_timer(void **state)
{
	struct ctx c = {0};
	struct ibvf_timer *t;

	(void)state;
	assert_int_equal(ibvf_loop_new(&c.l, NULL, 0), 0);
	c.t0 = ibvf_mono_ms();
	t = ibvf_loop_timer(c.l, 30, 10, tick, &c);
	assert_non_null(t);
	assert_int_equal(ibvf_loop_run(c.l), 0);
	assert_int_equal(c.ticks, 3);
	assert_true(c.t_first - c.t0 >= 29);
	ibvf_timer_free(t);
	ibvf_loop_free(c.l);
}

static void posted(void *arg)
{
	struct ctx *c = arg;

	c->on_loop = pthread_equal(pthread_self(), c->loop_thread);
	if (++c->posts == 100)
		ibvf_loop_quit(c->l);
}

static void *poster(void *arg)
{
	struct ctx *c = arg;

	for (int i = 0; i < 50; i++)
		assert_int_equal(ibvf_loop_post(c->l, posted, c), 0);
	return NULL;
}

/* Posts from other threads run on the loop thread, none lost. */
static void test_post_from_threads(void **state)
{
	struct ctx c = {0};
	pthread_t a, b;

	(void)state;
	assert_int_equal(ibvf_loop_new(&c.l, NULL, 0), 0);
	c.loop_thread = pthread_self();
	pthread_create(&a, NULL, poster, &c);
	pthread_create(&b, NULL, poster, &c);
	assert_int_equal(ibvf_loop_run(c.l), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	assert_int_equal(c.posts, 100);
	assert_true(c.on_loop);
	ibvf_loop_free(c.l);
}

/* Ping-pong posts: each thread waits for its post to run before the next. */
struct pingpong {
	struct ibvf_loop *l;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int ran, total, want;
};

static void pp_posted(void *arg)
{
	struct pingpong *p = arg;

	pthread_mutex_lock(&p->mu);
	p->ran++;
	pthread_cond_broadcast(&p->cv);
	if (p->ran == p->want)
		ibvf_loop_quit(p->l);
	pthread_mutex_unlock(&p->mu);
}

static void *pp_poster(void *arg)
{
	struct pingpong *p = arg;

	for (int i = 0; i < 2000; i++) {
		int before;

		pthread_mutex_lock(&p->mu);
		before = p->ran;
		pthread_mutex_unlock(&p->mu);
		assert_int_equal(ibvf_loop_post(p->l, pp_posted, p), 0);
		pthread_mutex_lock(&p->mu);
		while (p->ran == before)
			pthread_cond_wait(&p->cv, &p->mu);
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

/*
 * Posts into an empty queue and into a queue the loop is taking, from 4
 * threads that each wait for their post to run (only the post that makes
 * the queue non-empty wakes the loop): none is left waiting for a wake-up
 * (a lost one hangs the test until meson's timeout).
 */
static void test_post_wakeups_not_lost(void **state)
{
	struct pingpong p = {.want = 4 * 2000};
	pthread_t t[4];

	(void)state;
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	assert_int_equal(ibvf_loop_new(&p.l, NULL, 0), 0);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, pp_poster, &p);
	assert_int_equal(ibvf_loop_run(p.l), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(p.ran, 4 * 2000);
	ibvf_loop_free(p.l);
}

static void on_sig(struct ibvf_loop *l, int signo, void *arg)
{
	struct ctx *c = arg;

	c->sig = signo;
	ibvf_loop_quit(l);
}

/* Signals arrive through the signalfd, no handler runs. */
/*
 * ibvf_watch_modify() skips the events a watch has already (no epoll_ctl),
 * so it must know them: a writable socket watched for EPOLLOUT, then for
 * nothing (must go quiet), then, from a post, EPOLLOUT (fires); then nothing
 * twice (quiet again) and EPOLLOUT from a post once more. An event while the
 * watch should be quiet is a failure (epoll's ready list delivers the socket
 * before the post's eventfd).
 */
struct modctx {
	struct ibvf_loop *l;
	struct ibvf_watch *w;
	int armed, fires, stray;
};

static void mod_arm(void *arg)
{
	struct modctx *m = arg;

	m->armed = 1;
	assert_int_equal(ibvf_watch_modify(m->w, EPOLLOUT), 0);
}

static void mod_event(struct ibvf_loop *l, int fd, uint32_t ev, void *arg)
{
	struct modctx *m = arg;

	(void)fd;
	assert_true(ev & EPOLLOUT);
	if (!m->armed) { /* still armed after modify(0): the skip was wrong */
		m->stray++;
		ibvf_loop_quit(l);
		return;
	}
	if (++m->fires == 2) {
		ibvf_loop_quit(l);
		return;
	}
	m->armed = 0;
	assert_int_equal(ibvf_watch_modify(m->w, 0), 0);
	assert_int_equal(ibvf_watch_modify(m->w, 0), 0);
	assert_int_equal(ibvf_loop_post(l, mod_arm, m), 0);
}

static void mod_stop(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	ibvf_loop_quit(l);
}

static void test_watch_modify_same_events(void **state)
{
	struct modctx m = {0};
	struct ibvf_timer *guard;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(ibvf_loop_new(&m.l, NULL, 0), 0);
	m.w = ibvf_loop_watch(m.l, sv[0], EPOLLOUT, mod_event, &m);
	assert_non_null(m.w);
	assert_int_equal(ibvf_watch_modify(m.w, 0), 0);
	assert_int_equal(ibvf_loop_post(m.l, mod_arm, &m), 0);
	guard = ibvf_loop_timer(m.l, 5000, 0, mod_stop, NULL); /* a hang is a failure, not a wait */
	assert_non_null(guard);
	assert_int_equal(ibvf_loop_run(m.l), 0);
	assert_int_equal(m.stray, 0);
	assert_int_equal(m.fires, 2);
	ibvf_timer_free(guard);
	ibvf_watch_remove(m.w);
	ibvf_loop_free(m.l);
	close(sv[0]);
	close(sv[1]);
}

static void test_signal(void **state)
{
	static const int sigs[] = {SIGUSR1};
	struct ctx c = {0};
	sigset_t set;

	(void)state;
	assert_int_equal(ibvf_loop_new(&c.l, NULL, 0), 0);
	assert_int_equal(ibvf_loop_signals(c.l, sigs, 1, on_sig, &c), 0);
	kill(getpid(), SIGUSR1);
	assert_int_equal(ibvf_loop_run(c.l), 0);
	assert_int_equal(c.sig, SIGUSR1);
	ibvf_loop_free(c.l);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void job(void *arg)
{
	(void)arg;
	usleep(1000);
}

static void job_done(void *arg)
{
	struct ctx *c = arg;

	if (++c->jobs_done == 64)
		ibvf_loop_quit(c->l);
}

/* 64 jobs on 4 workers, every completion on the loop. */
static void test_workq(void **state)
{
	struct ctx c = {0};
	struct ibvf_workq *q;

	(void)state;
	assert_int_equal(ibvf_loop_new(&c.l, NULL, 0), 0);
	assert_int_equal(ibvf_workq_new(c.l, 4, &q, NULL, 0), 0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(ibvf_workq_submit(q, job, job_done, &c), 0);
	assert_int_equal(ibvf_loop_run(c.l), 0);
	assert_int_equal(c.jobs_done, 64);
	ibvf_workq_free(q);
	assert_int_equal(ibvf_workq_new(c.l, 0, &q, NULL, 0), -EINVAL);
	ibvf_loop_free(c.l);
}

/* READY=1 reaches $NOTIFY_SOCKET (path and abstract); unset: nothing, 0. */
static void test_sd_notify(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char path[64], buf[64], env[80];
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	ssize_t n;

	(void)state;
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(ibvf_sd_notify("READY=1"), 0);
	snprintf(path, sizeof(path), "/tmp/ibvf-notify-%d", (int)getpid());
	unlink(path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_int_equal(ibvf_sd_notify("READY=1\nSTATUS=ok"), 1);
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = 0;
	assert_string_equal(buf, "READY=1\nSTATUS=ok");
	close(fd);
	unlink(path);
	/* abstract namespace: "@name" */
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(env, sizeof(env), "@ibvf-notify-%d", (int)getpid());
	memcpy(sa.sun_path + 1, env + 1, strlen(env) - 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(env))),
			 0);
	setenv("NOTIFY_SOCKET", env, 1);
	assert_int_equal(ibvf_sd_notify("STOPPING=1"), 1);
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = 0;
	assert_string_equal(buf, "STOPPING=1");
	close(fd);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	assert_int_equal(ibvf_sd_notify("READY=1"), -EINVAL);
	unsetenv("NOTIFY_SOCKET");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timer),
		cmocka_unit_test(test_post_from_threads),
		cmocka_unit_test(test_post_wakeups_not_lost),
		cmocka_unit_test(test_watch_modify_same_events),
		cmocka_unit_test(test_signal),
		cmocka_unit_test(test_workq),
		cmocka_unit_test(test_sd_notify),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
