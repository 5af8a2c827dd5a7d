/* SPDX-License-Identifier: MIT */
/*
 * A small metrics registry: counters, gauges and histograms with a fixed set
 * of label names per family, rendered in the Prometheus text exposition
 * format (version 0.0.4, prometheus.io/docs/instrumenting/exposition_formats).
 *
 * Any thread may update a metric: values are C11 atomics, a family's label
 * sets are found under a short per-family lock, so an update never waits for
 * a render. A family caps its label sets (max_series): updates of a new set
 * past the cap go to no series and count in ibvf_metrics_series_dropped_total,
 * so a label with unbounded values cannot grow memory (label values must be
 * bounded anyway: result, step, kind; never GUIDs or pod names).
 *
 * ibvf_metrics_default() is the process's registry: the layers register
 * their families in it (re-registering a name returns the same family) and
 * ibvfd (or the SM agent) serves it. Every function accepts a NULL family
 * and then does nothing, so code runs the same with metrics left out.
 */
#ifndef IBVF_METRICS_H
#define IBVF_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum ibvf_metric_type {
	IBVF_METRIC_COUNTER,
	IBVF_METRIC_GAUGE,
	IBVF_METRIC_HISTOGRAM,
};

#define IBVF_METRIC_MAX_LABELS	4
#define IBVF_METRIC_MAX_BUCKETS 24

struct ibvf_metrics;
struct ibvf_metric;

/** ibvf_metrics_new() - an empty registry; NULL when out of memory. */
struct ibvf_metrics *ibvf_metrics_new(void);

/** ibvf_metrics_free() - free @r and its families (no update may run). NULL is a no-op. */
void ibvf_metrics_free(struct ibvf_metrics *r);

/** ibvf_metrics_default() - the process's registry (created on first use, never freed). */
struct ibvf_metrics *ibvf_metrics_default(void);

/**
 * ibvf_metric_register() - find or create family @name in @r.
 * @name:    a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*); counters
 *           end in _total, durations in _seconds (base units).
 * @help:    one line of text (escaped on output).
 * @labels:  NULL-terminated label names (at most IBVF_METRIC_MAX_LABELS;
 *           "le" is reserved), or NULL for none.
 * @buckets: histogram upper bounds, strictly increasing, finite (+Inf is
 *           implicit); at most IBVF_METRIC_MAX_BUCKETS. NULL for others.
 * @max_series: cap on label sets (0: 64).
 * Return: the family; the existing one when @name is registered with the
 * same type and label names; NULL on a bad name, a clash or out of memory.
 */
struct ibvf_metric *ibvf_metric_register(struct ibvf_metrics *r, enum ibvf_metric_type type,
					 const char *name, const char *help,
					 const char *const *labels, const double *buckets,
					 size_t n_buckets, size_t max_series);

/*
 * Updates. @values: one string per label name of the family, in order
 * (NULL for a family without labels). Values are any UTF-8 text; they are
 * escaped on output.
 */

/** ibvf_metric_add() - counter: add @v (>= 0; negative is ignored); gauge: add @v. */
void ibvf_metric_add(struct ibvf_metric *m, const char *const *values, double v);

/** ibvf_metric_inc() - ibvf_metric_add(@m, @values, 1). */
void ibvf_metric_inc(struct ibvf_metric *m, const char *const *values);

/** ibvf_metric_set() - gauge: set to @v (ignored on other types). */
void ibvf_metric_set(struct ibvf_metric *m, const char *const *values, double v);

/** ibvf_metric_observe() - histogram: one observation of @v (seconds, bytes, ...). */
void ibvf_metric_observe(struct ibvf_metric *m, const char *const *values, double v);

/**
 * ibvf_metric_get() - the value of a counter or gauge series, the
 * observation count of a histogram series; 0 when the series does not exist.
 */
double ibvf_metric_get(struct ibvf_metric *m, const char *const *values);

/** ibvf_metric_clear() - drop every series of @m (gauges computed at scrape time). */
void ibvf_metric_clear(struct ibvf_metric *m);

/**
 * Collectors: functions called at the start of every render to set gauges
 * computed from state (pool counts, readiness). Called on the rendering
 * thread with no registry lock held; they must be quick.
 * ibvf_metrics_add_collector() returns 0 or -ENOMEM (-EEXIST when @fn/@arg
 * is registered already); ibvf_metrics_remove_collector() returns after a
 * render that is running it has finished, so @arg may be freed then.
 */
int ibvf_metrics_add_collector(struct ibvf_metrics *r, void (*fn)(void *arg), void *arg);
void ibvf_metrics_remove_collector(struct ibvf_metrics *r, void (*fn)(void *arg), void *arg);

/**
 * ibvf_metrics_render() - @r in the text exposition format, families in
 * registration order, series in creation order.
 * @out: gets a malloc'ed NUL-terminated text (free() it); @len its length.
 * Return: 0 or -ENOMEM.
 */
int ibvf_metrics_render(struct ibvf_metrics *r, char **out, size_t *len);

/** The content type of ibvf_metrics_render()'s text. */
#define IBVF_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/** Buckets (seconds) for latencies from 1 ms to 60 s. */
extern const double ibvf_metric_latency_buckets[];
extern const size_t ibvf_metric_latency_n_buckets;

#endif /* IBVF_METRICS_H */
