/* SPDX-License-Identifier: MIT */
/*
 * Per-step timestamps of one API operation (issue 17): how long a prepare,
 * commit or release spent in each step (store writes, SM batch + call, VF
 * GUID set + rebind, port wait, ...), measured on CLOCK_MONOTONIC, and
 * answered as the reply's "timing" object (docs/api.md). The state machine
 * (attach.c) marks the end of each step; the time since the previous mark is
 * the step's. A step marked twice accumulates.
 *
 * Threads: an op is run by one thread at a time (loop, worker, SM thread in
 * turn), so a timing needs no lock. The worker running an op makes it the
 * thread's current timing (ibvf_timing_set_current()), so shared helpers
 * (undo, VF reset) mark the op they work for without an extra parameter.
 */
#ifndef IBVF_ATTACH_TIMING_H
#define IBVF_ATTACH_TIMING_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define IBVF_TIMING_MAX_STEPS 16

struct ibvf_attach_timing {
	uint64_t t0_ns;	  /* ibvf_timing_start(); 0: not timed (marks are ignored) */
	uint64_t last_ns; /* the previous mark */
	size_t n;
	struct ibvf_timing_step {
		const char *name; /* a string literal */
		uint64_t ns;
	} s[IBVF_TIMING_MAX_STEPS];
};

/** ibvf_timing_start() - start @t now (CLOCK_MONOTONIC): clears its steps. */
void ibvf_timing_start(struct ibvf_attach_timing *t);

/**
 * ibvf_timing_mark() - the time since the previous mark (or the start) was
 * step @name (a string literal; compared by content). A name seen before
 * accumulates; a new name past IBVF_TIMING_MAX_STEPS goes to "other".
 * NULL @t or an unstarted @t: nothing.
 */
void ibvf_timing_mark(struct ibvf_attach_timing *t, const char *name);

/**
 * ibvf_timing_mark_split() - like ibvf_timing_mark(), the time since the
 * previous mark split in two steps: its last @tail_ns (at most all of it)
 * was @tail, the rest @head (e.g. the SM batch's wait, then its call).
 */
void ibvf_timing_mark_split(struct ibvf_attach_timing *t, const char *head, const char *tail,
			    uint64_t tail_ns);

/**
 * ibvf_timing_set_current() - make @t (NULL: none) the calling thread's
 * current timing, for ibvf_timing_mark_current(). Return: the previous one.
 */
struct ibvf_attach_timing *ibvf_timing_set_current(struct ibvf_attach_timing *t);

/** ibvf_timing_mark_current() - ibvf_timing_mark() on the thread's current timing, if any. */
void ibvf_timing_mark_current(const char *name);

/**
 * ibvf_timing_json() - @t as the API's "timing" object: one member per step
 * in the order first marked, in milliseconds (a real, microsecond
 * resolution), then "total", the time from the start to now.
 * Return: a new reference, NULL when @t was not started or on ENOMEM.
 */
json_t *ibvf_timing_json(const struct ibvf_attach_timing *t);

#endif /* IBVF_ATTACH_TIMING_H */
