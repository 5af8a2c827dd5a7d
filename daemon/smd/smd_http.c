// SPDX-License-Identifier: MIT
/* ibvf-smd's HTTP endpoint: metrics from the agent's counters, probes (smd_http.h). */
#include "smd_http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "http_server.h"
#include "log.h"
#include "metrics.h"

/* liveness: the main loop stepped within this (a step waits 500 ms, a failing one backs
 * off 5 s at most) */
#define SMD_LIVENESS_MS	  15000
#define SMD_HTTP_RETRY_MS 2000

struct smd_http {
	char address[64];
	uint16_t port;
	struct ibvf_http *srv;
	int64_t tried_ms;
	bool failed;
	pthread_mutex_t lock; /* the fields below: main loop writes, HTTP thread reads */
	int64_t alive_ms;
	bool started, ok;
	char why[160];
	struct smd_agent_stats last; /* for the counters' deltas (main loop only) */
	struct ibvf_metric *passes, *failures, *calls, *members, *tombstones, *applied, *leader,
		*build;
};

static bool healthz(void *arg, char *why, size_t len)
{
	struct smd_http *h = arg;
	int64_t age;

	pthread_mutex_lock(&h->lock);
	age = ibvf_mono_ms() - h->alive_ms;
	pthread_mutex_unlock(&h->lock);
	if (age <= SMD_LIVENESS_MS)
		return true;
	snprintf(why, len, "the agent's loop has not stepped for %lld ms", (long long)age);
	return false;
}

static bool readyz(void *arg, char *why, size_t len)
{
	struct smd_http *h = arg;
	bool ok;

	pthread_mutex_lock(&h->lock);
	ok = h->started && h->ok;
	if (!ok)
		snprintf(why, len, "%s", h->started ? h->why : "not registered in etcd yet");
	pthread_mutex_unlock(&h->lock);
	return ok;
}

static void try_listen(struct smd_http *h)
{
	struct ibvf_http_opts o = {
		.address = h->address,
		.port = h->port,
		.metrics = ibvf_metrics_default(),
		.healthz = healthz,
		.readyz = readyz,
		.probe_arg = h,
	};
	char err[256];

	h->tried_ms = ibvf_mono_ms();
	if (ibvf_http_start(&o, &h->srv, err, sizeof(err))) {
		if (!h->failed)
			log_err("%s; the agent runs on without metrics and probes, retrying every "
				"%d s",
				err, SMD_HTTP_RETRY_MS / 1000);
		h->failed = true;
		return;
	}
	if (h->failed)
		log_notice("HTTP endpoint started after all");
	h->failed = false;
	log_info("HTTP endpoint on %s port %u: /metrics /healthz /readyz", h->address,
		 ibvf_http_port(h->srv));
}

static struct ibvf_metric *counter(const char *name, const char *help, const char *const *labels)
{
	return ibvf_metric_register(ibvf_metrics_default(), IBVF_METRIC_COUNTER, name, help, labels,
				    NULL, 0, 0);
}

static struct ibvf_metric *gauge(const char *name, const char *help, const char *const *labels)
{
	return ibvf_metric_register(ibvf_metrics_default(), IBVF_METRIC_GAUGE, name, help, labels,
				    NULL, 0, 0);
}

int smd_http_new(const char *address, uint16_t port, const char *sm_backend, struct smd_http **out)
{
	static const char *const op[] = {"op", NULL}, *const bi[] = {"version", "sm_backend", NULL};
	struct smd_http *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	snprintf(h->address, sizeof(h->address), "%s", address);
	h->port = port;
	h->alive_ms = ibvf_mono_ms();
	h->passes = counter("ibvf_smd_passes_total", "SM agent passes that called the SM backend",
			    NULL);
	h->failures = counter("ibvf_smd_pass_failures_total", "SM agent passes that failed", NULL);
	h->calls = counter("ibvf_smd_sm_calls_total",
			   "add, remove and list calls of the SM backend by the agent", NULL);
	h->members = counter("ibvf_smd_members_sent_total",
			     "PKey memberships the agent sent to the SM backend, by operation", op);
	h->tombstones =
		counter("ibvf_smd_tombstones_deleted_total",
			"removal tombstones the agent deleted once every agent applied them", NULL);
	h->applied =
		gauge("ibvf_smd_applied_revision",
		      "the etcd revision of desired memberships this agent last applied", NULL);
	h->leader =
		gauge("ibvf_smd_leader",
		      "1 while this agent holds its group's leader key (election), else 0", NULL);
	h->build = gauge("ibvf_smd_build_info", "Always 1: what this agent is and calls", bi);
	ibvf_metric_set(h->build, (const char *const[]){IBVF_VERSION, sm_backend}, 1);
	try_listen(h);
	*out = h;
	return 0;
}

static void add_delta(struct ibvf_metric *m, const char *const *v, unsigned long long now,
		      unsigned long long before)
{
	if (now > before)
		ibvf_metric_add(m, v, (double)(now - before));
}

void smd_http_tick(struct smd_http *h, const struct smd_agent_stats *st, int pass_ret, bool started)
{
	if (!h)
		return;
	add_delta(h->passes, NULL, st->passes, h->last.passes);
	add_delta(h->failures, NULL, st->failures, h->last.failures);
	add_delta(h->calls, NULL, st->sm_calls, h->last.sm_calls);
	add_delta(h->members, (const char *const[]){"add"}, st->adds, h->last.adds);
	add_delta(h->members, (const char *const[]){"remove"}, st->removes, h->last.removes);
	add_delta(h->tombstones, NULL, st->tombstones, h->last.tombstones);
	ibvf_metric_set(h->applied, NULL, (double)st->applied_revision);
	ibvf_metric_set(h->leader, NULL, st->leader ? 1 : 0);
	h->last = *st;
	pthread_mutex_lock(&h->lock);
	h->alive_ms = ibvf_mono_ms();
	h->started = started;
	h->ok = pass_ret == 0;
	snprintf(h->why, sizeof(h->why), "the last pass failed: %s", strerror(-pass_ret));
	pthread_mutex_unlock(&h->lock);
	if (!h->srv && ibvf_mono_ms() - h->tried_ms >= SMD_HTTP_RETRY_MS)
		try_listen(h);
}

void smd_http_free(struct smd_http *h)
{
	if (!h)
		return;
	ibvf_http_stop(h->srv);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
