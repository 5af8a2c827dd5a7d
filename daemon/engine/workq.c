// SPDX-License-Identifier: MIT
/* Fixed-size worker thread pool with loop-thread completions. */
#include "workq.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"

struct job {
	ibvf_job_fn fn;
	ibvf_job_done done;
	void *arg;
	struct job *next;
};

struct ibvf_workq {
	struct ibvf_loop *loop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail;
	size_t pending;
	bool stopping;
	unsigned n_threads;
	pthread_t *threads;
};

static void *worker(void *arg)
{
	struct ibvf_workq *q = arg;

	for (;;) {
		struct job *j;

		pthread_mutex_lock(&q->lock);
		while (!q->head && !q->stopping)
			pthread_cond_wait(&q->cond, &q->lock);
		j = q->head;
		if (!j) {
			pthread_mutex_unlock(&q->lock);
			return NULL;
		}
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		pthread_mutex_unlock(&q->lock);
		j->fn(j->arg);
		if (j->done && q->loop && ibvf_loop_post(q->loop, j->done, j->arg))
			log_err("worker: cannot post a completion (out of memory)");
		pthread_mutex_lock(&q->lock);
		q->pending--;
		pthread_mutex_unlock(&q->lock);
		free(j);
	}
}

int ibvf_workq_new(struct ibvf_loop *loop, unsigned n_threads, struct ibvf_workq **out, char *err,
		   size_t errlen)
{
	struct ibvf_workq *q;
	pthread_attr_t attr;
	int ret = 0;

	*out = NULL;
	if (n_threads < 1 || n_threads > 256)
		return ibvf_errf(err, errlen, -EINVAL, "worker threads: %u not in 1..256",
				 n_threads);
	q = calloc(1, sizeof(*q));
	if (!q || !(q->threads = calloc(n_threads, sizeof(pthread_t)))) {
		free(q);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	q->loop = loop;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 512 * 1024);
	for (; q->n_threads < n_threads; q->n_threads++) {
		ret = -pthread_create(&q->threads[q->n_threads], &attr, worker, q);
		if (ret)
			break;
	}
	pthread_attr_destroy(&attr);
	if (ret) {
		ibvf_workq_free(q);
		return ibvf_errf(err, errlen, ret, "pthread_create: %s", strerror(-ret));
	}
	*out = q;
	return 0;
}

int ibvf_workq_submit(struct ibvf_workq *q, ibvf_job_fn fn, ibvf_job_done done, void *arg)
{
	struct job *j = malloc(sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->done = done;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->stopping) {
		pthread_mutex_unlock(&q->lock);
		free(j);
		return -ESHUTDOWN;
	}
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->pending++;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

size_t ibvf_workq_pending(struct ibvf_workq *q)
{
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->pending;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void ibvf_workq_free(struct ibvf_workq *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stopping = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 0; i < q->n_threads; i++)
		pthread_join(q->threads[i], NULL);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q->threads);
	free(q);
}
