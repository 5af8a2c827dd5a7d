// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/common/metrics.c: families, series, the text
 * exposition format (escaping, histogram buckets, value formatting), the
 * cap on label sets, collectors, and updates from several threads.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "testutil.h"

static char *render(struct ibvf_metrics *r)
{
	char *out;
	size_t len;

	assert_int_equal(ibvf_metrics_render(r, &out, &len), 0);
	assert_int_equal(strlen(out), len);
	return out;
}

static void assert_has(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("missing:\n%s\nin:\n%s", needle, hay);
}

static void test_counter_gauge_text(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	static const char *const lab[] = {"result", "step", NULL};
	struct ibvf_metric *c, *g;
	char *t;

	(void)state;
	c = ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_x_total", "Things done.", lab, NULL,
				 0, 0);
	g = ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ibvf_y", "A level.", NULL, NULL, 0, 0);
	assert_non_null(c);
	assert_non_null(g);
	ibvf_metric_inc(c, (const char *[]){"ok", ""});
	ibvf_metric_inc(c, (const char *[]){"ok", ""});
	ibvf_metric_add(c, (const char *[]){"error", "sm"}, 3);
	ibvf_metric_add(c, (const char *[]){"error", "sm"}, -5); /* counters never go down */
	ibvf_metric_set(g, NULL, 2.5);
	ibvf_metric_add(g, NULL, -1);
	assert_true(ibvf_metric_get(c, (const char *[]){"ok", ""}) == 2);
	assert_true(ibvf_metric_get(c, (const char *[]){"error", "sm"}) == 3);
	assert_true(ibvf_metric_get(c, (const char *[]){"error", "vf"}) == 0);
	t = render(r);
	assert_has(t, "# HELP ibvf_x_total Things done.\n# TYPE ibvf_x_total counter\n"
		      "ibvf_x_total{result=\"ok\",step=\"\"} 2\n"
		      "ibvf_x_total{result=\"error\",step=\"sm\"} 3\n");
	assert_has(t, "# TYPE ibvf_y gauge\nibvf_y 1.5\n");
	assert_has(t, "ibvf_metrics_series_dropped_total 0\n");
	free(t);
	ibvf_metrics_free(r);
}

static void test_register_rules(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	static const char *const lab[] = {"kind", NULL};
	static const char *const lab2[] = {"other", NULL};
	static const char *const bad_le[] = {"le", NULL};
	static const char *const bad_res[] = {"__x", NULL};
	static const char *const bad_ch[] = {"a-b", NULL};
	static const double b_bad[] = {1, 1};
	static const double b_ok[] = {0.1, 1};
	struct ibvf_metric *a;

	(void)state;
	a = ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_a_total", "", lab, NULL, 0, 0);
	assert_non_null(a);
	/* same name and shape: the same family; another shape: refused */
	assert_ptr_equal(
		ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_a_total", "", lab, NULL, 0, 0),
		a);
	assert_null(
		ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ibvf_a_total", "", lab, NULL, 0, 0));
	assert_null(
		ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_a_total", "", lab2, NULL, 0, 0));
	/* names and label names */
	assert_null(ibvf_metric_register(r, IBVF_METRIC_GAUGE, "1abc", "", NULL, NULL, 0, 0));
	assert_null(ibvf_metric_register(r, IBVF_METRIC_GAUGE, "a b", "", NULL, NULL, 0, 0));
	assert_null(ibvf_metric_register(r, IBVF_METRIC_GAUGE, "", "", NULL, NULL, 0, 0));
	assert_non_null(
		ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ns:sub_x", "", NULL, NULL, 0, 0));
	assert_null(ibvf_metric_register(r, IBVF_METRIC_GAUGE, "g1", "", bad_le, NULL, 0, 0));
	assert_null(ibvf_metric_register(r, IBVF_METRIC_GAUGE, "g2", "", bad_res, NULL, 0, 0));
	assert_null(ibvf_metric_register(r, IBVF_METRIC_GAUGE, "g3", "", bad_ch, NULL, 0, 0));
	/* histogram buckets strictly increasing and present */
	assert_null(ibvf_metric_register(r, IBVF_METRIC_HISTOGRAM, "h1", "", NULL, b_bad, 2, 0));
	assert_null(ibvf_metric_register(r, IBVF_METRIC_HISTOGRAM, "h2", "", NULL, NULL, 0, 0));
	assert_non_null(ibvf_metric_register(r, IBVF_METRIC_HISTOGRAM, "h3", "", NULL, b_ok, 2, 0));
	/* NULL family: every call is a no-op */
	ibvf_metric_inc(NULL, NULL);
	ibvf_metric_observe(NULL, NULL, 1);
	assert_true(ibvf_metric_get(NULL, NULL) == 0);
	ibvf_metrics_free(r);
}

static void test_escaping(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	static const char *const lab[] = {"detail", NULL};
	struct ibvf_metric *c;
	char *t;

	(void)state;
	c = ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_e_total",
				 "Help with a \\ backslash\nand a newline \"quoted\".", lab, NULL,
				 0, 0);
	ibvf_metric_inc(c, (const char *[]){"a\"b\\c\nd"});
	t = render(r);
	/* HELP: \ and newline escaped, quotes kept; label values: all three escaped */
	assert_has(t, "# HELP ibvf_e_total Help with a \\\\ backslash\\nand a newline "
		      "\"quoted\".\n");
	assert_has(t, "ibvf_e_total{detail=\"a\\\"b\\\\c\\nd\"} 1\n");
	free(t);
	ibvf_metrics_free(r);
}

static void test_histogram(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	static const char *const lab[] = {"op", NULL};
	static const double b[] = {0.1, 0.5, 1};
	struct ibvf_metric *h;
	char *t;

	(void)state;
	h = ibvf_metric_register(r, IBVF_METRIC_HISTOGRAM, "ibvf_lat_seconds", "Latency.", lab, b,
				 3, 0);
	assert_non_null(h);
	ibvf_metric_observe(h, (const char *[]){"add"}, 0.05);
	ibvf_metric_observe(h, (const char *[]){"add"}, 0.1); /* le is inclusive */
	ibvf_metric_observe(h, (const char *[]){"add"}, 0.7);
	ibvf_metric_observe(h, (const char *[]){"add"}, 9);
	ibvf_metric_observe(h, (const char *[]){"add"}, NAN); /* ignored */
	assert_true(ibvf_metric_get(h, (const char *[]){"add"}) == 4);
	t = render(r);
	assert_has(t, "# TYPE ibvf_lat_seconds histogram\n"
		      "ibvf_lat_seconds_bucket{op=\"add\",le=\"0.1\"} 2\n"
		      "ibvf_lat_seconds_bucket{op=\"add\",le=\"0.5\"} 2\n"
		      "ibvf_lat_seconds_bucket{op=\"add\",le=\"1\"} 3\n"
		      "ibvf_lat_seconds_bucket{op=\"add\",le=\"+Inf\"} 4\n"
		      "ibvf_lat_seconds_sum{op=\"add\"} 9.85\n"
		      "ibvf_lat_seconds_count{op=\"add\"} 4\n");
	free(t);
	ibvf_metrics_free(r);
}

static void test_values_format(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	static const char *const lab[] = {"v", NULL};
	struct ibvf_metric *g;
	char *t;

	(void)state;
	g = ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ibvf_v", "", lab, NULL, 0, 0);
	ibvf_metric_set(g, (const char *[]){"big"}, 18446744073709551616.0);
	ibvf_metric_set(g, (const char *[]){"inf"}, INFINITY);
	ibvf_metric_set(g, (const char *[]){"ninf"}, -INFINITY);
	ibvf_metric_set(g, (const char *[]){"nan"}, NAN);
	ibvf_metric_set(g, (const char *[]){"third"}, 1.0 / 3);
	ibvf_metric_set(g, (const char *[]){"int"}, 1234567);
	t = render(r);
	assert_has(t, "ibvf_v{v=\"big\"} 1.8446744073709552e+19\n");
	assert_has(t, "ibvf_v{v=\"inf\"} +Inf\n");
	assert_has(t, "ibvf_v{v=\"ninf\"} -Inf\n");
	assert_has(t, "ibvf_v{v=\"nan\"} NaN\n");
	assert_has(t, "ibvf_v{v=\"third\"} 0.33333333333333331\n"); /* reads back exactly */
	assert_has(t, "ibvf_v{v=\"int\"} 1234567\n");
	free(t);
	ibvf_metrics_free(r);
}

static void test_series_cap(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	static const char *const lab[] = {"id", NULL};
	struct ibvf_metric *c;
	char v[16], *t;

	(void)state;
	c = ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_c_total", "", lab, NULL, 0, 3);
	for (int i = 0; i < 10; i++) {
		snprintf(v, sizeof(v), "%d", i);
		ibvf_metric_inc(c, (const char *[]){v});
	}
	ibvf_metric_inc(c, (const char *[]){"0"}); /* an existing series still counts */
	t = render(r);
	assert_has(t, "ibvf_c_total{id=\"0\"} 2\n");
	assert_has(t, "ibvf_c_total{id=\"2\"} 1\n");
	assert_null(strstr(t, "id=\"3\""));
	assert_has(t, "ibvf_metrics_series_dropped_total 7\n");
	free(t);
	/* clear: the series go, the family stays */
	ibvf_metric_clear(c);
	ibvf_metric_inc(c, (const char *[]){"9"});
	t = render(r);
	assert_has(t, "ibvf_c_total{id=\"9\"} 1\n");
	assert_null(strstr(t, "id=\"0\""));
	free(t);
	ibvf_metrics_free(r);
}

static void collect(void *arg)
{
	struct ibvf_metric *g = arg;

	ibvf_metric_add(g, NULL, 1);
}

static void test_collectors(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	struct ibvf_metric *g;
	char *t;

	(void)state;
	g = ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ibvf_renders", "", NULL, NULL, 0, 0);
	assert_int_equal(ibvf_metrics_add_collector(r, collect, g), 0);
	assert_int_equal(ibvf_metrics_add_collector(r, collect, g), -EEXIST);
	free(render(r));
	t = render(r);
	assert_has(t, "ibvf_renders 2\n");
	free(t);
	ibvf_metrics_remove_collector(r, collect, g);
	t = render(r);
	assert_has(t, "ibvf_renders 2\n");
	free(t);
	ibvf_metrics_free(r);
}

#define THREADS 4
#define ROUNDS	20000

static void *hammer(void *arg)
{
	struct ibvf_metrics *r = arg;
	static const char *const lab[] = {"t", NULL};
	struct ibvf_metric *c, *h;

	c = ibvf_metric_register(r, IBVF_METRIC_COUNTER, "ibvf_n_total", "", lab, NULL, 0, 0);
	h = ibvf_metric_register(r, IBVF_METRIC_HISTOGRAM, "ibvf_h_seconds", "", NULL,
				 ibvf_metric_latency_buckets, ibvf_metric_latency_n_buckets, 0);
	for (int i = 0; i < ROUNDS; i++) {
		ibvf_metric_inc(c, (const char *[]){i % 2 ? "odd" : "even"});
		ibvf_metric_observe(h, NULL, 0.002);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct ibvf_metrics *r = ibvf_metrics_new();
	pthread_t th[THREADS];
	char *t, want[128];

	(void)state;
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, hammer, r), 0);
	for (int i = 0; i < 50; i++) /* renders while updates run */
		free(render(r));
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	t = render(r);
	snprintf(want, sizeof(want), "ibvf_n_total{t=\"even\"} %d\n", THREADS * ROUNDS / 2);
	assert_has(t, want);
	snprintf(want, sizeof(want), "ibvf_h_seconds_count %d\n", THREADS * ROUNDS);
	assert_has(t, want);
	snprintf(want, sizeof(want), "ibvf_h_seconds_bucket{le=\"0.001\"} 0\n");
	assert_has(t, want);
	snprintf(want, sizeof(want), "ibvf_h_seconds_bucket{le=\"0.0025\"} %d\n", THREADS * ROUNDS);
	assert_has(t, want);
	free(t);
	ibvf_metrics_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counter_gauge_text), cmocka_unit_test(test_register_rules),
		cmocka_unit_test(test_escaping),	   cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_values_format),	   cmocka_unit_test(test_series_cap),
		cmocka_unit_test(test_collectors),	   cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
