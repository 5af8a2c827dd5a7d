/* SPDX-License-Identifier: MIT */
/*
 * The daemon's one event loop: epoll(7) over file descriptors, timerfd(2)
 * timers and signalfd(2) signals, plus a thread-safe "post" queue (an
 * eventfd(2)) through which worker threads hand results back to the loop.
 * Everything registered here runs on the loop thread; nothing runs in a
 * signal handler (signals are blocked and read from the signalfd).
 * Pattern: rdma-core rdma-ndd/rdma-ndd.c and chrony main.c/sched.c.
 */
#ifndef IBVF_EVLOOP_H
#define IBVF_EVLOOP_H

#include "clock.h" /* ibvf_mono_ms(): the loop's clock */

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct ibvf_loop;
struct ibvf_watch;
struct ibvf_timer;

/** Called on the loop thread with the epoll events (EPOLLIN, EPOLLOUT, EPOLLHUP...). */
typedef void (*ibvf_fd_cb)(struct ibvf_loop *l, int fd, uint32_t events, void *arg);
typedef void (*ibvf_timer_cb)(struct ibvf_loop *l, struct ibvf_timer *t, void *arg);
typedef void (*ibvf_signal_cb)(struct ibvf_loop *l, int signo, void *arg);
/** Work handed to the loop thread by ibvf_loop_post(). */
typedef void (*ibvf_post_fn)(void *arg);

/** ibvf_loop_new() - create a loop. Return: 0 or -errno (epoll/eventfd failures). */
int ibvf_loop_new(struct ibvf_loop **out, char *err, size_t errlen);

/** ibvf_loop_free() - close every fd the loop created; watched fds stay open. NULL is a no-op. */
void ibvf_loop_free(struct ibvf_loop *l);

/**
 * ibvf_loop_watch() - call @cb when @fd has any of @events (EPOLLIN/EPOLLOUT).
 * Return: a watch handle, or NULL with errno set.
 */
struct ibvf_watch *ibvf_loop_watch(struct ibvf_loop *l, int fd, uint32_t events, ibvf_fd_cb cb,
				   void *arg);
/**
 * ibvf_watch_modify() - change the events of a watch (e.g. add EPOLLOUT); the
 * events it has already are no epoll_ctl(2) (watches are level-triggered).
 * Return: 0 or -errno of epoll_ctl(2).
 */
int ibvf_watch_modify(struct ibvf_watch *w, uint32_t events);
/** ibvf_watch_remove() - stop watching (the fd is not closed); NULL is a no-op. */
void ibvf_watch_remove(struct ibvf_watch *w);

/**
 * ibvf_loop_timer() - a timer on CLOCK_MONOTONIC: first expiry after
 * @first_ms, then every @period_ms (0: one-shot). Return NULL + errno on failure.
 */
struct ibvf_timer *ibvf_loop_timer(struct ibvf_loop *l, uint64_t first_ms, uint64_t period_ms,
				   ibvf_timer_cb cb, void *arg);
/** ibvf_timer_set() - re-arm (@first_ms 0 disarms). */
int ibvf_timer_set(struct ibvf_timer *t, uint64_t first_ms, uint64_t period_ms);
/** ibvf_timer_free() - disarm and free; NULL is a no-op. */
void ibvf_timer_free(struct ibvf_timer *t);

/**
 * ibvf_loop_signals() - block @signos (n entries) in the calling thread (call
 * before starting threads so they inherit the mask) and deliver them to @cb
 * through a signalfd. Return: 0 or -errno.
 */
int ibvf_loop_signals(struct ibvf_loop *l, const int *signos, int n, ibvf_signal_cb cb, void *arg);

/**
 * ibvf_loop_post() - run @fn(@arg) on the loop thread soon. Safe from any
 * thread. Return: 0 or -ENOMEM.
 */
int ibvf_loop_post(struct ibvf_loop *l, ibvf_post_fn fn, void *arg);

/** ibvf_loop_run() - dispatch events until ibvf_loop_quit(). Return 0 or -errno. */
int ibvf_loop_run(struct ibvf_loop *l);
/** ibvf_loop_quit() - make ibvf_loop_run() return after the current dispatch (loop thread). */
void ibvf_loop_quit(struct ibvf_loop *l);

#endif /* IBVF_EVLOOP_H */
