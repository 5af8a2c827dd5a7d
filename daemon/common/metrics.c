// SPDX-License-Identifier: MIT
/*
 * The metrics registry (metrics.h). Each family keeps its series in a list
 * under its own mutex; an update finds its series and changes it under that
 * lock (a few string compares), a render holds it while it prints the
 * family. The text format follows prometheus.io "Exposition formats" (text
 * format 0.0.4): # HELP / # TYPE lines, label values escaped (\\, \", \n),
 * histograms as cumulative _bucket{le=...} series plus _sum and _count.
 */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_SERIES 64

const double ibvf_metric_latency_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
					      0.5,   1,	     2.5,   5,	  10,	 30,   60};
const size_t ibvf_metric_latency_n_buckets =
	sizeof(ibvf_metric_latency_buckets) / sizeof(ibvf_metric_latency_buckets[0]);

struct series {
	char *values[IBVF_METRIC_MAX_LABELS];
	double val;	  /* counter, gauge */
	uint64_t count;	  /* histogram */
	double sum;	  /* histogram */
	uint64_t *counts; /* histogram: per bucket, not cumulative; [n_buckets] is +Inf */
	struct series *next;
};

struct ibvf_metric {
	struct ibvf_metrics *r;
	enum ibvf_metric_type type;
	char *name, *help;
	char *labels[IBVF_METRIC_MAX_LABELS];
	size_t n_labels;
	double buckets[IBVF_METRIC_MAX_BUCKETS];
	size_t n_buckets;
	size_t max_series, n_series;
	pthread_mutex_t lock; /* the series */
	struct series *head, **tail;
	struct ibvf_metric *next;
};

struct collector {
	void (*fn)(void *arg);
	void *arg;
	struct collector *next;
};

struct ibvf_metrics {
	pthread_mutex_t lock; /* the family list */
	struct ibvf_metric *head, **tail;
	pthread_mutex_t collect_lock; /* the collectors; held while they run */
	struct collector *collectors;
	atomic_uint_fast64_t dropped; /* updates of a series past a family's cap */
};

struct ibvf_metrics *ibvf_metrics_new(void)
{
	struct ibvf_metrics *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->collect_lock, NULL);
	r->tail = &r->head;
	atomic_init(&r->dropped, 0);
	return r;
}

static void series_free(struct series *s)
{
	for (size_t i = 0; i < IBVF_METRIC_MAX_LABELS; i++)
		free(s->values[i]);
	free(s->counts);
	free(s);
}

static void family_clear_locked(struct ibvf_metric *m)
{
	while (m->head) {
		struct series *s = m->head;

		m->head = s->next;
		series_free(s);
	}
	m->tail = &m->head;
	m->n_series = 0;
}

static void family_free(struct ibvf_metric *m)
{
	family_clear_locked(m);
	pthread_mutex_destroy(&m->lock);
	for (size_t i = 0; i < m->n_labels; i++)
		free(m->labels[i]);
	free(m->name);
	free(m->help);
	free(m);
}

void ibvf_metrics_free(struct ibvf_metrics *r)
{
	if (!r)
		return;
	while (r->head) {
		struct ibvf_metric *m = r->head;

		r->head = m->next;
		family_free(m);
	}
	while (r->collectors) {
		struct collector *c = r->collectors;

		r->collectors = c->next;
		free(c);
	}
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->collect_lock);
	free(r);
}

static struct ibvf_metrics *default_registry;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
	default_registry = ibvf_metrics_new();
}

struct ibvf_metrics *ibvf_metrics_default(void)
{
	pthread_once(&default_once, default_init);
	return default_registry;
}

/* prometheus.io "Metric names and labels": [a-zA-Z_:][a-zA-Z0-9_:]* (labels: no ':'). */
static bool valid_name(const char *s, bool label)
{
	if (!s || !*s)
		return false;
	for (const char *p = s; *p; p++) {
		bool alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
			     (!label && *p == ':');

		if (!alpha && (p == s || *p < '0' || *p > '9'))
			return false;
	}
	/* names starting with "__" are reserved; "le" is the histogram bucket label */
	return !label || (strncmp(s, "__", 2) && strcmp(s, "le"));
}

static bool same_shape(const struct ibvf_metric *m, enum ibvf_metric_type type,
		       const char *const *labels, size_t n_labels)
{
	if (m->type != type || m->n_labels != n_labels)
		return false;
	for (size_t i = 0; i < n_labels; i++)
		if (strcmp(m->labels[i], labels[i]))
			return false;
	return true;
}

struct ibvf_metric *ibvf_metric_register(struct ibvf_metrics *r, enum ibvf_metric_type type,
					 const char *name, const char *help,
					 const char *const *labels, const double *buckets,
					 size_t n_buckets, size_t max_series)
{
	struct ibvf_metric *m;
	size_t n_labels = 0;

	if (!r || !valid_name(name, false) || type > IBVF_METRIC_HISTOGRAM)
		return NULL;
	while (labels && labels[n_labels]) {
		if (n_labels == IBVF_METRIC_MAX_LABELS || !valid_name(labels[n_labels], true))
			return NULL;
		n_labels++;
	}
	if (type == IBVF_METRIC_HISTOGRAM) {
		if (!buckets || !n_buckets || n_buckets > IBVF_METRIC_MAX_BUCKETS)
			return NULL;
		for (size_t i = 0; i < n_buckets; i++)
			if (!isfinite(buckets[i]) || (i && buckets[i] <= buckets[i - 1]))
				return NULL;
	} else {
		n_buckets = 0;
	}
	pthread_mutex_lock(&r->lock);
	for (m = r->head; m; m = m->next)
		if (!strcmp(m->name, name))
			break;
	if (m) {
		if (!same_shape(m, type, labels, n_labels))
			m = NULL;
		pthread_mutex_unlock(&r->lock);
		return m;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		goto out;
	m->r = r;
	m->type = type;
	m->name = strdup(name);
	m->help = strdup(help ? help : "");
	m->n_labels = n_labels;
	bool ok = m->name && m->help;

	for (size_t i = 0; i < n_labels; i++)
		ok = (m->labels[i] = strdup(labels[i])) && ok;
	if (!ok) {
		for (size_t i = 0; i < n_labels; i++)
			free(m->labels[i]);
		free(m->name);
		free(m->help);
		free(m);
		m = NULL;
		goto out;
	}
	if (n_buckets)
		memcpy(m->buckets, buckets, n_buckets * sizeof(*buckets));
	m->n_buckets = n_buckets;
	m->max_series = max_series ? max_series : DEFAULT_MAX_SERIES;
	pthread_mutex_init(&m->lock, NULL);
	m->tail = &m->head;
	*r->tail = m;
	r->tail = &m->next;
out:
	pthread_mutex_unlock(&r->lock);
	return m;
}

/* Under m->lock: the series of @values, created when new; NULL past the cap / no memory. */
static struct series *series_get(struct ibvf_metric *m, const char *const *values, bool create)
{
	struct series *s;

	for (s = m->head; s; s = s->next) {
		size_t i = 0;

		while (i < m->n_labels && !strcmp(s->values[i], values[i] ? values[i] : ""))
			i++;
		if (i == m->n_labels)
			return s;
	}
	if (!create)
		return NULL;
	if (m->n_series >= m->max_series)
		goto drop;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto drop;
	for (size_t i = 0; i < m->n_labels; i++)
		if (!(s->values[i] = strdup(values[i] ? values[i] : "")))
			goto drop_s;
	if (m->type == IBVF_METRIC_HISTOGRAM && !(s->counts = calloc(m->n_buckets + 1, 8)))
		goto drop_s;
	*m->tail = s;
	m->tail = &s->next;
	m->n_series++;
	return s;
drop_s:
	series_free(s);
drop:
	atomic_fetch_add(&m->r->dropped, 1);
	return NULL;
}

static const char *const no_values[IBVF_METRIC_MAX_LABELS];

void ibvf_metric_add(struct ibvf_metric *m, const char *const *values, double v)
{
	struct series *s;

	if (!m || m->type == IBVF_METRIC_HISTOGRAM || (m->type == IBVF_METRIC_COUNTER && !(v >= 0)))
		return;
	pthread_mutex_lock(&m->lock);
	s = series_get(m, values ? values : no_values, true);
	if (s)
		s->val += v;
	pthread_mutex_unlock(&m->lock);
}

void ibvf_metric_inc(struct ibvf_metric *m, const char *const *values)
{
	ibvf_metric_add(m, values, 1);
}

void ibvf_metric_set(struct ibvf_metric *m, const char *const *values, double v)
{
	struct series *s;

	if (!m || m->type != IBVF_METRIC_GAUGE)
		return;
	pthread_mutex_lock(&m->lock);
	s = series_get(m, values ? values : no_values, true);
	if (s)
		s->val = v;
	pthread_mutex_unlock(&m->lock);
}

void ibvf_metric_observe(struct ibvf_metric *m, const char *const *values, double v)
{
	struct series *s;
	size_t b = 0;

	if (!m || m->type != IBVF_METRIC_HISTOGRAM || isnan(v))
		return;
	while (b < m->n_buckets && v > m->buckets[b])
		b++;
	pthread_mutex_lock(&m->lock);
	s = series_get(m, values ? values : no_values, true);
	if (s) {
		s->counts[b]++;
		s->count++;
		s->sum += v;
	}
	pthread_mutex_unlock(&m->lock);
}

double ibvf_metric_get(struct ibvf_metric *m, const char *const *values)
{
	struct series *s;
	double v = 0;

	if (!m)
		return 0;
	pthread_mutex_lock(&m->lock);
	s = series_get(m, values ? values : no_values, false);
	if (s)
		v = m->type == IBVF_METRIC_HISTOGRAM ? (double)s->count : s->val;
	pthread_mutex_unlock(&m->lock);
	return v;
}

void ibvf_metric_clear(struct ibvf_metric *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	family_clear_locked(m);
	pthread_mutex_unlock(&m->lock);
}

int ibvf_metrics_add_collector(struct ibvf_metrics *r, void (*fn)(void *arg), void *arg)
{
	struct collector *c;
	int ret = 0;

	if (!r || !fn)
		return -EINVAL;
	pthread_mutex_lock(&r->collect_lock);
	for (c = r->collectors; c; c = c->next)
		if (c->fn == fn && c->arg == arg)
			break;
	if (c) {
		ret = -EEXIST;
	} else if (!(c = calloc(1, sizeof(*c)))) {
		ret = -ENOMEM;
	} else {
		c->fn = fn;
		c->arg = arg;
		c->next = r->collectors;
		r->collectors = c;
	}
	pthread_mutex_unlock(&r->collect_lock);
	return ret;
}

void ibvf_metrics_remove_collector(struct ibvf_metrics *r, void (*fn)(void *arg), void *arg)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->collect_lock);
	for (struct collector **p = &r->collectors; *p; p = &(*p)->next) {
		if ((*p)->fn == fn && (*p)->arg == arg) {
			struct collector *c = *p;

			*p = c->next;
			free(c);
			break;
		}
	}
	pthread_mutex_unlock(&r->collect_lock);
}

/* ------------------------------------------------------------ render -- */

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < b->cap - b->len)
			break;
		size_t cap = (b->cap + (size_t)n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	b->len += (size_t)n;
}

/* HELP text: \ and newline escaped; label values: also ". */
static void put_escaped(struct buf *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			put(b, "\\\\");
		else if (*s == '\n')
			put(b, "\\n");
		else if (quote && *s == '"')
			put(b, "\\\"");
		else
			put(b, "%c", *s);
	}
}

/* A sample value: the shortest of %.15g / %.17g that reads back exactly; +Inf, -Inf, NaN. */
static const char *fmt_value(double v, char out[32])
{
	if (isnan(v))
		return "NaN";
	if (isinf(v))
		return v > 0 ? "+Inf" : "-Inf";
	snprintf(out, 32, "%.15g", v);
	if (strtod(out, NULL) != v)
		snprintf(out, 32, "%.17g", v);
	return out;
}

/* {a="x",b="y"[,le="0.5"]}; nothing when there are no labels. */
static void put_labels(struct buf *b, const struct ibvf_metric *m, const struct series *s,
		       const char *le)
{
	if (!m->n_labels && !le)
		return;
	put(b, "{");
	for (size_t i = 0; i < m->n_labels; i++) {
		put(b, "%s%s=\"", i ? "," : "", m->labels[i]);
		put_escaped(b, s->values[i], true);
		put(b, "\"");
	}
	if (le)
		put(b, "%sle=\"%s\"", m->n_labels ? "," : "", le);
	put(b, "}");
}

static const char *const type_names[] = {"counter", "gauge", "histogram"};

static void render_family(struct buf *b, struct ibvf_metric *m)
{
	char v[32], le[32];

	put(b, "# HELP %s ", m->name);
	put_escaped(b, m->help, false);
	put(b, "\n# TYPE %s %s\n", m->name, type_names[m->type]);
	pthread_mutex_lock(&m->lock);
	for (struct series *s = m->head; s; s = s->next) {
		if (m->type != IBVF_METRIC_HISTOGRAM) {
			put(b, "%s", m->name);
			put_labels(b, m, s, NULL);
			put(b, " %s\n", fmt_value(s->val, v));
			continue;
		}
		uint64_t cum = 0;

		for (size_t i = 0; i <= m->n_buckets; i++) {
			cum += s->counts[i];
			put(b, "%s_bucket", m->name);
			put_labels(b, m, s,
				   i < m->n_buckets ? fmt_value(m->buckets[i], le) : "+Inf");
			put(b, " %llu\n", (unsigned long long)cum);
		}
		put(b, "%s_sum", m->name);
		put_labels(b, m, s, NULL);
		put(b, " %s\n%s_count", fmt_value(s->sum, v), m->name);
		put_labels(b, m, s, NULL);
		put(b, " %llu\n", (unsigned long long)s->count);
	}
	pthread_mutex_unlock(&m->lock);
}

int ibvf_metrics_render(struct ibvf_metrics *r, char **out, size_t *len)
{
	struct buf b = {0};

	*out = NULL;
	*len = 0;
	if (!r)
		return -EINVAL;
	pthread_mutex_lock(&r->collect_lock);
	for (struct collector *c = r->collectors; c; c = c->next)
		c->fn(c->arg);
	pthread_mutex_unlock(&r->collect_lock);

	b.cap = 4096;
	b.p = malloc(b.cap);
	if (!b.p)
		return -ENOMEM;
	b.p[0] = 0;
	pthread_mutex_lock(&r->lock);
	for (struct ibvf_metric *m = r->head; m; m = m->next)
		render_family(&b, m);
	pthread_mutex_unlock(&r->lock);
	put(&b,
	    "# HELP ibvf_metrics_series_dropped_total Metric updates dropped because their "
	    "family reached its cap on label sets.\n"
	    "# TYPE ibvf_metrics_series_dropped_total counter\n"
	    "ibvf_metrics_series_dropped_total %llu\n",
	    (unsigned long long)atomic_load(&r->dropped));
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}
