// SPDX-License-Identifier: MIT
/*
 * ufm SM backend against the UFM API simulator on loopback: per-call latency
 * (HTTP, HTTPS Basic, HTTPS token), the cost of one connection per call
 * against a kept-alive connection, and 10,000 GUIDs in one call against
 * 1-GUID calls. Prints numbers and ratios; asserts nothing about time.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sm_ufm.h"
#include "ufm_sim_harness.h"

#define USER	 "bench"
#define PASSWORD "bench-pw"
#define TOKEN	 "benchtoken123"
#define PK	 0x00a5

static const struct ibvf_sm_ops *ops;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct ibvf_sm_backend *open_backend(struct ufm_sim *s, const char *auth)
{
	struct ibvf_sm_backend *b = NULL;
	char cfg[4 * PATH_MAX], err[512];

	if (!strcmp(auth, "token"))
		snprintf(cfg, sizeof(cfg),
			 "{\"address\":\"127.0.0.1\",\"port\":%d,\"auth\":\"token\","
			 "\"token_file\":\"%s\",\"ca_file\":\"%s\"}",
			 s->port, s->token_file, s->ca_file);
	else if (s->tls)
		snprintf(cfg, sizeof(cfg),
			 "{\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"" USER "\","
			 "\"password_file\":\"%s\",\"ca_file\":\"%s\"}",
			 s->port, s->password_file, s->ca_file);
	else
		snprintf(cfg, sizeof(cfg),
			 "{\"address\":\"127.0.0.1\",\"port\":%d,\"scheme\":\"http\","
			 "\"username\":\"" USER "\",\"password_file\":\"%s\"}",
			 s->port, s->password_file);
	if (ops->init(cfg, &b, err, sizeof(err))) {
		fprintf(stderr, "init: %s\n", err);
		exit(1);
	}
	return b;
}

/* @n validate() calls; prints p50/p99/mean in ms; returns the mean. */
static double bench_validate(const char *label, struct ibvf_sm_backend *b, int n)
{
	double *t = calloc((size_t)n, sizeof(*t)), sum = 0, mean;
	char desc[256], err[512];

	for (int i = 0; i < n; i++) {
		double t0 = now_ms();

		if (ops->validate(b, desc, sizeof(desc), err, sizeof(err))) {
			fprintf(stderr, "validate: %s\n", err);
			exit(1);
		}
		t[i] = now_ms() - t0;
		sum += t[i];
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	mean = sum / n;
	printf("%-34s n=%-4d p50 %7.2f ms  p99 %7.2f ms  mean %7.2f ms\n", label, n, t[n / 2],
	       t[(n * 99) / 100], mean);
	free(t);
	return mean;
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* The same GET with plain libcurl on one kept-alive connection, for comparison. */
static double bench_keepalive(struct ufm_sim *s, int n)
{
	CURL *c = curl_easy_init();
	char url[128];
	double t0, mean;

	snprintf(url, sizeof(url), "%s/ufmRest/app/ufm_version", s->base_url);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_USERPWD, USER ":" PASSWORD);
	curl_easy_setopt(c, CURLOPT_CAINFO, s->ca_file);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_perform(c); /* connect once */
	t0 = now_ms();
	for (int i = 0; i < n; i++)
		curl_easy_perform(c);
	mean = (now_ms() - t0) / n;
	printf("%-34s n=%-4d                                 mean %7.2f ms\n",
	       "HTTPS, kept-alive (plain libcurl)", n, mean);
	curl_easy_cleanup(c);
	return mean;
}

static void bench_adds(struct ufm_sim *s)
{
	const size_t n = 10000, singles = 200;
	struct ibvf_sm_member *m = calloc(n, sizeof(*m));
	struct ibvf_sm_backend *b = open_backend(s, "basic");
	struct ibvf_sm_backend *chunked;
	char err[512], cfg[4 * PATH_MAX];
	double t0, t_single, t_bulk, t_chunk;

	for (size_t i = 0; i < n; i++) {
		m[i].guid = 0x0002c90300300000ull + i;
		m[i].membership = IBVF_MEMBER_FULL;
	}
	t0 = now_ms();
	for (size_t i = 0; i < singles; i++)
		if (ops->add_members(b, PK, m + i, 1, NULL, err, sizeof(err)))
			goto fail;
	t_single = (now_ms() - t0) / singles;
	ufm_sim_reset(s);
	t0 = now_ms();
	if (ops->add_members(b, PK, m, n, NULL, err, sizeof(err)))
		goto fail;
	t_bulk = now_ms() - t0;
	snprintf(cfg, sizeof(cfg),
		 "{\"address\":\"127.0.0.1\",\"port\":%d,\"username\":\"" USER "\","
		 "\"password_file\":\"%s\",\"ca_file\":\"%s\",\"max_guids_per_request\":1000}",
		 s->port, s->password_file, s->ca_file);
	if (ops->init(cfg, &chunked, err, sizeof(err)))
		goto fail;
	ufm_sim_reset(s);
	t0 = now_ms();
	if (ops->add_members(chunked, PK, m, n, NULL, err, sizeof(err)))
		goto fail;
	t_chunk = now_ms() - t0;
	ops->fini(chunked);
	printf("%-34s %7.2f ms per call (%zu calls)\n", "add 1 GUID per call, HTTPS", t_single,
	       singles);
	printf("%-34s %7.1f ms\n", "add 10,000 GUIDs in 1 call", t_bulk);
	printf("%-34s %7.1f ms (10 calls)\n", "add 10,000 GUIDs, 1,000 per call", t_chunk);
	printf("ratio: 10,000 single-GUID calls (extrapolated %.0f ms) / one 10,000-GUID call = "
	       "%.0fx\n",
	       t_single * n, t_single * n / t_bulk);
	ops->fini(b);
	free(m);
	return;
fail:
	fprintf(stderr, "bench: %s\n", err);
	exit(1);
}

static int count_cb(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	(void)pkey;
	(void)m;
	(void)managed;
	(*(size_t *)arg)++;
	return 0;
}

static void bench_list(struct ufm_sim *s)
{
	struct ibvf_sm_backend *b = open_backend(s, "basic");
	char err[512];
	size_t count = 0;
	double t0 = now_ms();

	if (ops->list_members(b, -1, count_cb, &count, err, sizeof(err))) {
		fprintf(stderr, "list: %s\n", err);
		exit(1);
	}
	printf("%-34s %7.1f ms (%zu members)\n", "list all members, HTTPS", now_ms() - t0, count);
	ops->fini(b);
}

int main(void)
{
	struct ufm_sim_opts tls = {.tls = true, .user = USER, .password = PASSWORD, .token = TOKEN};
	struct ufm_sim_opts plain = {.user = USER, .password = PASSWORD};
	struct ufm_sim s, p;
	const char *missing = ufm_sim_missing();
	struct ibvf_sm_backend *b;
	double per_call, kept;
	char e[256];

	if (missing)
		return ufm_sim_skip(missing);
	ops = &ufm_ops;
	if (ufm_sim_start(&tls, &s, e, sizeof(e)) || ufm_sim_start(&plain, &p, e, sizeof(e))) {
		fprintf(stderr, "ufm_sim: %s\n", e);
		ufm_sim_stop(&s);
		return 1;
	}
	printf("ufm SM backend against ufm_sim.py on loopback (one connection per call)\n");
	b = open_backend(&p, "basic");
	bench_validate("validate, HTTP, Basic", b, 200);
	ops->fini(b);
	b = open_backend(&s, "basic");
	per_call = bench_validate("validate, HTTPS, Basic", b, 200);
	ops->fini(b);
	b = open_backend(&s, "token");
	bench_validate("validate, HTTPS, token", b, 200);
	ops->fini(b);
	kept = bench_keepalive(&s, 200);
	printf("ratio: connection per call / kept-alive = %.1fx (%.2f ms more per call)\n",
	       per_call / kept, per_call - kept);
	ufm_sim_reset(&s);
	bench_adds(&s);
	bench_list(&s);
	ufm_sim_stop(&s);
	ufm_sim_stop(&p);
	return 0;
}
