// SPDX-License-Identifier: MIT
/*
 * The engine's metric families and their hooks (engine_metrics.h). Names
 * follow prometheus.io "Metric and label naming": the ibvf_ prefix, base
 * units (seconds), _total on counters; docs/metrics.md is the reference.
 */
#include "engine_metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <ibvf/api.h>
#include <ibvf/sm_backend.h>

#include "attach.h"
#include "engine_int.h"
#include "guid_pool.h"
#include "metrics.h"

/* SM batch sizes: requests per backend call, 1 .. batch_max (1024 by default). */
static const double batch_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

static struct {
	struct ibvf_metric *requests, *attaches, *releases, *prepare_s, *port_wait_s;
	struct ibvf_metric *sm_call_s, *sm_batch, *sm_errors;
	struct ibvf_metric *findings, *reconcile_runs, *reconcile_s;
	struct ibvf_metric *warm, *pool_guids, *ready, *inflight;
	struct ibvf_engine *e; /* under e_lock: the engine of the scrape-time gauges */
	pthread_mutex_t e_lock;
} m = {.e_lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
	static const char *const l_req[] = {"method", "result", NULL};
	static const char *const l_rs[] = {"result", "step", NULL};
	static const char *const l_res[] = {"result", NULL};
	static const char *const l_call[] = {"call", NULL};
	static const char *const l_err[] = {"call", "class", NULL};
	static const char *const l_find[] = {"kind", "fixed", NULL};
	static const char *const l_pool[] = {"range", "state", NULL};
	struct ibvf_metrics *r = ibvf_metrics_default();
	const double *lb = ibvf_metric_latency_buckets;
	size_t nlb = ibvf_metric_latency_n_buckets;

	m.requests = ibvf_metric_register(
		r, IBVF_METRIC_COUNTER, "ibvf_api_requests_total",
		"API calls answered, by method and result (ok or the JSON-RPC error's name).",
		l_req, NULL, 0, 128);
	m.attaches = ibvf_metric_register(
		r, IBVF_METRIC_COUNTER, "ibvf_attaches_total",
		"prepare calls (CNI ADD) answered, by result and the step that failed (\"\" on ok).",
		l_rs, NULL, 0, 128);
	m.releases = ibvf_metric_register(
		r, IBVF_METRIC_COUNTER, "ibvf_releases_total",
		"release calls (CNI DEL) answered, by result and the step that failed (\"\" on ok).",
		l_rs, NULL, 0, 128);
	m.prepare_s = ibvf_metric_register(
		r, IBVF_METRIC_HISTOGRAM, "ibvf_prepare_duration_seconds",
		"Time from a prepare's arrival to its answer, by result.", l_res, lb, nlb, 32);
	m.port_wait_s = ibvf_metric_register(
		r, IBVF_METRIC_HISTOGRAM, "ibvf_port_wait_duration_seconds",
		"Time a prepare waited for the VF's port (ACTIVE, LID, PKeys), by result.", l_res,
		lb, nlb, 8);
	m.sm_call_s =
		ibvf_metric_register(r, IBVF_METRIC_HISTOGRAM, "ibvf_sm_call_duration_seconds",
				     "Time of one SM backend call, by call.", l_call, lb, nlb, 8);
	m.sm_batch = ibvf_metric_register(r, IBVF_METRIC_HISTOGRAM, "ibvf_sm_batch_size",
					  "Membership requests per SM add/remove call.", l_call,
					  batch_buckets,
					  sizeof(batch_buckets) / sizeof(batch_buckets[0]), 4);
	m.sm_errors = ibvf_metric_register(
		r, IBVF_METRIC_COUNTER, "ibvf_sm_errors_total",
		"Failed SM backend calls, by call and the SM ABI's error class "
		"(transient, member_fault, permanent).",
		l_err, NULL, 0, 16);
	m.findings = ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_reconcile_findings_total",
					  "Reconciliation findings, by kind and whether the pass "
					  "fixed them.",
					  l_find, NULL, 0, 64);
	m.reconcile_runs = ibvf_metric_register(
		r, IBVF_METRIC_COUNTER, "ibvf_reconcile_runs_total",
		"Reconciliation passes, by result (clean, problems, error).", l_res, NULL, 0, 4);
	m.reconcile_s =
		ibvf_metric_register(r, IBVF_METRIC_HISTOGRAM, "ibvf_reconcile_duration_seconds",
				     "Time of one reconciliation pass.", NULL, lb, nlb, 1);
	m.warm = ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ibvf_warm_vfs",
				      "Free VFs pre-programmed and ACTIVE, ready for an ADD "
				      "(vf.warm).",
				      NULL, NULL, 0, 1);
	m.pool_guids = ibvf_metric_register(
		r, IBVF_METRIC_GAUGE, "ibvf_pool_guids",
		"GUIDs of each pool range (0-based, the order of 'ibvfctl pool status') by state "
		"(allocated, free, quarantined).",
		l_pool, NULL, 0, 3 * 256);
	m.ready = ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ibvf_ready",
				       "1 when the API status says ready (and /readyz answers "
				       "200), else 0.",
				       NULL, NULL, 0, 1);
	m.inflight =
		ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ibvf_inflight_requests",
				     "API calls received and not yet answered.", NULL, NULL, 0, 1);
	ibvf_metric_set(m.warm, NULL, 0);
}

void eng_metrics_init(void)
{
	pthread_once(&once, init_once);
}

const char *eng_metrics_result_name(int code)
{
	switch (code) {
	case 0:
		return "ok";
	case IBVF_RPC_PARSE_ERROR:
	case IBVF_RPC_INVALID_REQUEST:
	case IBVF_RPC_METHOD_NOT_FOUND:
	case IBVF_RPC_INVALID_PARAMS:
		return "invalid_request";
	case IBVF_RPC_INTERNAL_ERROR:
		return "internal_error";
	case IBVF_RPC_POOL_EXHAUSTED:
		return "pool_exhausted";
	case IBVF_RPC_GUID_CONFLICT:
		return "guid_conflict";
	case IBVF_RPC_SM_ERROR:
		return "sm_error";
	case IBVF_RPC_VF_ERROR:
		return "vf_error";
	case IBVF_RPC_PORT_NOT_READY:
		return "port_not_ready";
	case IBVF_RPC_DEADLINE:
		return "deadline";
	case IBVF_RPC_DENIED:
		return "denied";
	case IBVF_RPC_BUSY:
		return "busy";
	case IBVF_RPC_NOT_READY:
		return "not_ready";
	case IBVF_RPC_VF_IN_USE:
		return "vf_in_use";
	default:
		return "other_error";
	}
}

void eng_metrics_request(const char *method, int code, const char *step, double seconds)
{
	const char *res = eng_metrics_result_name(code);

	eng_metrics_init();
	ibvf_metric_inc(m.requests, (const char *[]){method, res});
	step = code ? step : "";
	if (!strcmp(method, "prepare")) {
		ibvf_metric_inc(m.attaches, (const char *[]){res, step ? step : ""});
		ibvf_metric_observe(m.prepare_s, (const char *[]){res}, seconds);
	} else if (!strcmp(method, "release")) {
		ibvf_metric_inc(m.releases, (const char *[]){res, step ? step : ""});
	}
}

void eng_metrics_port_wait(double seconds, int ret)
{
	eng_metrics_init();
	ibvf_metric_observe(m.port_wait_s,
			    (const char *[]){!ret		 ? "ok"
					     : ret == -ETIMEDOUT ? "timeout"
								 : "error"},
			    seconds);
}

void eng_metrics_sm_call(const char *call, size_t n, double seconds, int ret)
{
	eng_metrics_init();
	ibvf_metric_observe(m.sm_call_s, (const char *[]){call}, seconds);
	if (n)
		ibvf_metric_observe(m.sm_batch, (const char *[]){call}, (double)n);
	if (ret < 0)
		ibvf_metric_inc(m.sm_errors,
				(const char *[]){call, ibvf_sm_err_is_transient(ret) ? "transient"
						       : ibvf_sm_err_is_member_fault(ret)
							       ? "member_fault"
							       : "permanent"});
}

void eng_metrics_finding(const char *kind, bool fixed)
{
	eng_metrics_init();
	ibvf_metric_inc(m.findings, (const char *[]){kind ? kind : "", fixed ? "true" : "false"});
}

void eng_metrics_reconcile(double seconds, int ret)
{
	eng_metrics_init();
	ibvf_metric_inc(m.reconcile_runs, (const char *[]){ret < 0   ? "error"
							   : ret > 0 ? "problems"
								     : "clean"});
	ibvf_metric_observe(m.reconcile_s, NULL, seconds);
}

void eng_metrics_set_warm_vfs(size_t n)
{
	eng_metrics_init();
	ibvf_metric_set(m.warm, NULL, (double)n);
}

/* Scrape time: pool GUIDs per range and state, readiness, requests in flight. */
static void collect(void *arg)
{
	struct ibvf_engine *e;

	(void)arg;
	pthread_mutex_lock(&m.e_lock);
	e = m.e;
	if (!e) {
		pthread_mutex_unlock(&m.e_lock);
		return;
	}
	ibvf_metric_set(m.ready, NULL, ibvf_engine_ready(e) ? 1 : 0);
	ibvf_metric_set(m.inflight, NULL, (double)ibvf_engine_inflight(e));
	ibvf_metric_clear(m.pool_guids); /* ranges come and go (cluster blocks) */
	for (size_t i = 0;; i++) {
		struct ibvf_pool_stats st;
		char err[IBVF_ERR_LEN], idx[24];

		if (ibvf_pool_range_stats(e->pool, i, &st, err, sizeof(err)))
			break;
		snprintf(idx, sizeof(idx), "%zu", i);
		ibvf_metric_set(m.pool_guids, (const char *[]){idx, "allocated"},
				(double)st.allocated);
		ibvf_metric_set(m.pool_guids, (const char *[]){idx, "free"}, (double)st.free);
		ibvf_metric_set(m.pool_guids, (const char *[]){idx, "quarantined"},
				(double)st.quarantined);
	}
	pthread_mutex_unlock(&m.e_lock);
}

void eng_metrics_attach_engine(struct ibvf_engine *e)
{
	eng_metrics_init();
	if (e)
		ibvf_metrics_add_collector(ibvf_metrics_default(), collect, NULL);
	pthread_mutex_lock(&m.e_lock);
	m.e = e;
	pthread_mutex_unlock(&m.e_lock);
	if (!e) /* a scrape holding the old engine has finished: e_lock */
		ibvf_metrics_remove_collector(ibvf_metrics_default(), collect, NULL);
}
