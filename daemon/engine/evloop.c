// SPDX-License-Identifier: MIT
/* One epoll loop with timerfd timers, a signalfd and a cross-thread post queue. */
#include "evloop.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"

struct ibvf_watch {
	struct ibvf_loop *loop;
	int fd;
	ibvf_fd_cb cb;
	void *arg;
	uint32_t events; /* as epoll has them */
	bool dead;
	struct ibvf_watch *next_dead;
};

struct ibvf_timer {
	struct ibvf_watch *w;
	int fd;
	ibvf_timer_cb cb;
	void *arg;
};

struct post_item {
	ibvf_post_fn fn;
	void *arg;
	struct post_item *next;
};

struct ibvf_loop {
	int epfd;
	int evfd; /* post queue wake-up */
	int sigfd;
	struct ibvf_watch *ev_watch, *sig_watch;
	ibvf_signal_cb sig_cb;
	void *sig_arg;
	pthread_mutex_t lock; /* protects the post queue */
	struct post_item *head, *tail;
	struct ibvf_watch *dead; /* freed after each dispatch round */
	bool quit;
};

static void drain_posts(struct ibvf_loop *l, int fd, uint32_t events, void *arg)
{
	uint64_t v;
	struct post_item *it;

	(void)events;
	(void)arg;
	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("event loop: eventfd read: %s", strerror(errno));
	pthread_mutex_lock(&l->lock);
	it = l->head;
	l->head = l->tail = NULL;
	pthread_mutex_unlock(&l->lock);
	while (it) {
		struct post_item *next = it->next;

		it->fn(it->arg);
		free(it);
		it = next;
	}
}

int ibvf_loop_new(struct ibvf_loop **out, char *err, size_t errlen)
{
	struct ibvf_loop *l = calloc(1, sizeof(*l));
	int ret;

	*out = NULL;
	if (!l)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	l->sigfd = -1;
	l->evfd = -1;
	pthread_mutex_init(&l->lock, NULL);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		ret = ibvf_errf(err, errlen, -errno, "epoll_create1: %s", strerror(errno));
		goto fail;
	}
	l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->evfd < 0) {
		ret = ibvf_errf(err, errlen, -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	l->ev_watch = ibvf_loop_watch(l, l->evfd, EPOLLIN, drain_posts, NULL);
	if (!l->ev_watch) {
		ret = ibvf_errf(err, errlen, -errno, "epoll_ctl: %s", strerror(errno));
		goto fail;
	}
	*out = l;
	return 0;
fail:
	ibvf_loop_free(l);
	return ret;
}

static void reap_dead(struct ibvf_loop *l)
{
	while (l->dead) {
		struct ibvf_watch *w = l->dead;

		l->dead = w->next_dead;
		free(w);
	}
}

void ibvf_loop_free(struct ibvf_loop *l)
{
	struct post_item *it;

	if (!l)
		return;
	ibvf_watch_remove(l->ev_watch);
	ibvf_watch_remove(l->sig_watch);
	reap_dead(l);
	for (it = l->head; it;) {
		struct post_item *next = it->next;

		free(it);
		it = next;
	}
	if (l->sigfd >= 0)
		close(l->sigfd);
	if (l->evfd >= 0)
		close(l->evfd);
	if (l->epfd >= 0)
		close(l->epfd);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

struct ibvf_watch *ibvf_loop_watch(struct ibvf_loop *l, int fd, uint32_t events, ibvf_fd_cb cb,
				   void *arg)
{
	struct ibvf_watch *w = calloc(1, sizeof(*w));
	struct epoll_event ev = {.events = events};

	if (!w)
		return NULL;
	w->loop = l;
	w->fd = fd;
	w->cb = cb;
	w->arg = arg;
	w->events = events;
	ev.data.ptr = w;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int e = errno;

		free(w);
		errno = e;
		return NULL;
	}
	return w;
}

int ibvf_watch_modify(struct ibvf_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};

	/*
	 * Level-triggered: the same events again change nothing, so no system
	 * call (the API server re-evaluates a connection after every read and
	 * reply: two epoll_ctl() per request, issue 17).
	 */
	if (events == w->events)
		return 0;
	if (epoll_ctl(w->loop->epfd, EPOLL_CTL_MOD, w->fd, &ev))
		return -errno;
	w->events = events;
	return 0;
}

void ibvf_watch_remove(struct ibvf_watch *w)
{
	if (!w || w->dead)
		return;
	epoll_ctl(w->loop->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->dead = true;
	/* freed after the current dispatch round: its event may still be pending */
	w->next_dead = w->loop->dead;
	w->loop->dead = w;
}

static void timer_fired(struct ibvf_loop *l, int fd, uint32_t events, void *arg)
{
	struct ibvf_timer *t = arg;
	uint64_t n;

	(void)events;
	if (read(fd, &n, sizeof(n)) != sizeof(n))
		return; /* re-armed or disarmed since it fired */
	t->cb(l, t, t->arg);
}

int ibvf_timer_set(struct ibvf_timer *t, uint64_t first_ms, uint64_t period_ms)
{
	struct itimerspec its = {
		.it_value = {(time_t)(first_ms / 1000), (long)(first_ms % 1000) * 1000000},
		.it_interval = {(time_t)(period_ms / 1000), (long)(period_ms % 1000) * 1000000},
	};

	return timerfd_settime(t->fd, 0, &its, NULL) ? -errno : 0;
}

struct ibvf_timer *ibvf_loop_timer(struct ibvf_loop *l, uint64_t first_ms, uint64_t period_ms,
				   ibvf_timer_cb cb, void *arg)
{
	struct ibvf_timer *t = calloc(1, sizeof(*t));
	int e;

	if (!t)
		return NULL;
	t->cb = cb;
	t->arg = arg;
	t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (t->fd < 0)
		goto fail;
	t->w = ibvf_loop_watch(l, t->fd, EPOLLIN, timer_fired, t);
	if (!t->w)
		goto fail;
	if (first_ms && ibvf_timer_set(t, first_ms, period_ms) < 0)
		goto fail;
	return t;
fail:
	e = errno;
	ibvf_timer_free(t);
	errno = e;
	return NULL;
}

void ibvf_timer_free(struct ibvf_timer *t)
{
	if (!t)
		return;
	ibvf_watch_remove(t->w);
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

static void signal_ready(struct ibvf_loop *l, int fd, uint32_t events, void *arg)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)arg;
	while (read(fd, &si, sizeof(si)) == sizeof(si))
		l->sig_cb(l, (int)si.ssi_signo, l->sig_arg);
}

int ibvf_loop_signals(struct ibvf_loop *l, const int *signos, int n, ibvf_signal_cb cb, void *arg)
{
	sigset_t set;

	sigemptyset(&set);
	for (int i = 0; i < n; i++)
		sigaddset(&set, signos[i]);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))
		return -EINVAL;
	l->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (l->sigfd < 0)
		return -errno;
	l->sig_cb = cb;
	l->sig_arg = arg;
	l->sig_watch = ibvf_loop_watch(l, l->sigfd, EPOLLIN, signal_ready, NULL);
	return l->sig_watch ? 0 : -errno;
}

int ibvf_loop_post(struct ibvf_loop *l, ibvf_post_fn fn, void *arg)
{
	struct post_item *it = malloc(sizeof(*it));
	uint64_t one = 1;

	if (!it)
		return -ENOMEM;
	it->fn = fn;
	it->arg = arg;
	it->next = NULL;
	bool first;

	pthread_mutex_lock(&l->lock);
	first = !l->head;
	if (l->tail)
		l->tail->next = it;
	else
		l->head = it;
	l->tail = it;
	pthread_mutex_unlock(&l->lock);
	/*
	 * Only the post that made the queue non-empty wakes the loop: the loop
	 * takes the whole queue after reading the eventfd (drain_posts()), so a
	 * later post either joins a queue whose wake-up is pending, or finds it
	 * taken (empty) and wakes the loop itself. A burst of 1,024 completions
	 * costs a few writes, not one each (issue 17).
	 */
	if (first && write(l->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

void ibvf_loop_quit(struct ibvf_loop *l)
{
	l->quit = true;
}

int ibvf_loop_run(struct ibvf_loop *l)
{
	struct epoll_event evs[64];

	l->quit = false;
	while (!l->quit) {
		int n = epoll_wait(l->epfd, evs, 64, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			struct ibvf_watch *w = evs[i].data.ptr;

			if (!w->dead)
				w->cb(l, w->fd, evs[i].events, w->arg);
		}
		reap_dead(l);
	}
	return 0;
}
