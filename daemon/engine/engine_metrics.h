/* SPDX-License-Identifier: MIT */
/*
 * The engine's metrics (docs/metrics.md), in the process's registry
 * (metrics.h ibvf_metrics_default()). The engine's files call these hooks
 * at the points they describe; each is a few string compares under a
 * family's lock, never I/O. Label values are bounded: method, result (the
 * JSON-RPC error's short name), step, SM call kind, error class, finding
 * kind, range index.
 */
#ifndef IBVF_ENGINE_METRICS_H
#define IBVF_ENGINE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ibvf_engine;
struct ibvf_pool;

/** eng_metrics_init() - register the engine's families (once per process; idempotent). */
void eng_metrics_init(void);

/**
 * eng_metrics_request() - one API call answered (or refused).
 * @method: "prepare", "release", ...; @code: its JSON-RPC error code, 0 on
 * success; @step: the failing step ("" on success); @seconds: from its
 * arrival at the engine to its answer (monotonic clock).
 * prepare counts in ibvf_attaches_total and ibvf_prepare_duration_seconds,
 * release in ibvf_releases_total; every method in ibvf_api_requests_total.
 */
void eng_metrics_request(const char *method, int code, const char *step, double seconds);

/** eng_metrics_result_name() - "ok", "sm_error", "port_not_ready", ... for a JSON-RPC code. */
const char *eng_metrics_result_name(int code);

/** eng_metrics_port_wait() - one port wait of a prepare: @ret 0 ok, else its -errno. */
void eng_metrics_port_wait(double seconds, int ret);

/**
 * eng_metrics_sm_call() - one SM backend call.
 * @call: "add", "remove", "list", "validate"; @n: requests in it (batch
 * size; 0 for list and validate, not observed); @ret: the backend's
 * return, < 0 counted in ibvf_sm_errors_total by the SM ABI's error class
 * (sm_backend.h: transient, member_fault, permanent).
 */
void eng_metrics_sm_call(const char *call, size_t n, double seconds, int ret);

/** eng_metrics_finding() - one reconciliation finding of @kind (fixed or not). */
void eng_metrics_finding(const char *kind, bool fixed);

/** eng_metrics_reconcile() - one reconciliation pass done: @ret >= 0 problems left, or -errno. */
void eng_metrics_reconcile(double seconds, int ret);

/**
 * eng_metrics_set_warm_vfs() - the warm VFs ready for an ADD (vf.warm,
 * issue 17 item 3): the gauge ibvf_warm_vfs. It stays 0 until the warm-VF
 * code calls this.
 */
void eng_metrics_set_warm_vfs(size_t n);

/**
 * eng_metrics_attach_engine() - compute the gauges that come from @e at
 * every scrape (pool GUIDs per range and state, readiness, requests in
 * flight); NULL detaches (returns after a scrape using @e has finished).
 */
void eng_metrics_attach_engine(struct ibvf_engine *e);

#endif /* IBVF_ENGINE_METRICS_H */
