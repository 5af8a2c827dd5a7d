/* SPDX-License-Identifier: MIT */
/*
 * A bounded pool of worker threads for blocking work (netlink, sysfs, SQLite,
 * MAD polling) so the event loop never blocks. Jobs run in FIFO order on one
 * of @n_threads threads; each job's optional completion runs afterwards on
 * the loop thread (through ibvf_loop_post()).
 */
#ifndef IBVF_WORKQ_H
#define IBVF_WORKQ_H

#include <stddef.h>

#include "evloop.h"

struct ibvf_workq;

/** Job body, runs on a worker thread. */
typedef void (*ibvf_job_fn)(void *arg);
/** Completion, runs on the loop thread after the job. */
typedef void (*ibvf_job_done)(void *arg);

/**
 * ibvf_workq_new() - start @n_threads workers (1..256). @loop may be NULL when
 * no job has a completion. Return: 0 or -errno.
 */
int ibvf_workq_new(struct ibvf_loop *loop, unsigned n_threads, struct ibvf_workq **out, char *err,
		   size_t errlen);

/**
 * ibvf_workq_submit() - queue a job. Return: 0, -ENOMEM, or -ESHUTDOWN once
 * ibvf_workq_free() has started.
 */
int ibvf_workq_submit(struct ibvf_workq *q, ibvf_job_fn fn, ibvf_job_done done, void *arg);

/** ibvf_workq_pending() - jobs queued or running (for status and tests). */
size_t ibvf_workq_pending(struct ibvf_workq *q);

/**
 * ibvf_workq_free() - run what is queued, join the threads, free. Completions
 * already posted run when the loop next dispatches. NULL is a no-op.
 */
void ibvf_workq_free(struct ibvf_workq *q);

#endif /* IBVF_WORKQ_H */
