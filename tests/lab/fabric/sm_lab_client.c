// SPDX-License-Identifier: MIT
/*
 * sm_lab_client - drive one SM backend module through ibvfd's loader
 * (daemon/engine/sm_loader.c), for the fabric lab tests and the benchmark.
 * A backend that sends SMPs (opensm with "verify") must run under umad2sim:
 * `fabric-lab.sh run DIR pf0 sm_lab_client ...`.
 *
 *   sm_lab_client MODULE_DIR NAME CONFIG validate
 *   sm_lab_client MODULE_DIR NAME CONFIG add PKEY [--index0] [--no-ipoib] MEMBER...
 *   sm_lab_client MODULE_DIR NAME CONFIG remove PKEY GUID|FIRST+COUNT...
 *   sm_lab_client MODULE_DIR NAME CONFIG list [PKEY]
 *
 * CONFIG is the backend's JSON config object, or @FILE holding it. PKEY is
 * the 15-bit key (0x0a10). MEMBER is GUID=full|limited, or FIRST+COUNT=...
 * for COUNT consecutive GUIDs from FIRST.
 *
 * Output: "OK <op> <n> members in <ms> ms" (list: one "PKEY GUID membership
 * managed|admin" line per member). Exit 0 ok, 1 the backend refused or
 * failed (its message on stderr, prefixed with the errno name), 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "sm_loader.h"

static int usage(void)
{
	fprintf(stderr, "usage: sm_lab_client MODULE_DIR NAME CONFIG validate | add PKEY "
			"[--index0] [--no-ipoib] MEMBER... | remove PKEY GUID... | list [PKEY]\n");
	return 2;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *read_config(const char *arg)
{
	FILE *f;
	char *buf;
	long n;

	if (arg[0] != '@')
		return strdup(arg);
	f = fopen(arg + 1, "r");
	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(arg + 1);
		return NULL;
	}
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* "GUID" or "FIRST+COUNT" → first GUID and count. */
static int parse_guids(const char *s, uint64_t *first, size_t *count)
{
	char buf[64], *plus, err[IBVF_ERR_LEN], *end;

	snprintf(buf, sizeof(buf), "%s", s);
	plus = strchr(buf, '+');
	*count = 1;
	if (plus) {
		*plus = '\0';
		*count = strtoul(plus + 1, &end, 10);
		if (*end || !*count || *count > 1000000)
			return -EINVAL;
	}
	if (ibvf_guid_parse(buf, first, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -EINVAL;
	}
	return 0;
}

/* Append the members named by @spec ("GUID=full", "FIRST+COUNT=limited"). */
static int add_spec(const char *spec, struct ibvf_sm_member **m, size_t *n)
{
	char buf[96], *eq, err[IBVF_ERR_LEN];
	enum ibvf_membership ms;
	struct ibvf_sm_member *nm;
	uint64_t first;
	size_t count;

	snprintf(buf, sizeof(buf), "%s", spec);
	eq = strchr(buf, '=');
	if (!eq)
		return -EINVAL;
	*eq = '\0';
	if (parse_guids(buf, &first, &count) ||
	    ibvf_membership_parse(eq + 1, &ms, err, sizeof(err)))
		return -EINVAL;
	nm = realloc(*m, (*n + count) * sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++)
		nm[*n + i] = (struct ibvf_sm_member){first + i, ms};
	*m = nm;
	*n += count;
	return 0;
}

static int print_member(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	char g[IBVF_GUID_STR_LEN];

	(void)arg;
	printf("0x%04x %s %s %s\n", pkey, ibvf_guid_format(m->guid, g),
	       ibvf_membership_name(m->membership), managed ? "managed" : "admin");
	return 0;
}

static int fail(int ret, const char *err)
{
	fprintf(stderr, "sm_lab_client: %s (%s)\n", err, strerror(-ret));
	return 1;
}

static int do_add(struct ibvf_sm *sm, uint16_t pkey, int argc, char **argv)
{
	struct ibvf_sm_pkey_flags flags = {.index0 = false, .ipoib = true};
	struct ibvf_sm_member *m = NULL;
	char err[IBVF_ERR_LEN] = "";
	bool have_flags = false;
	size_t n = 0;
	double t0;
	int ret;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--index0")) {
			flags.index0 = have_flags = true;
		} else if (!strcmp(argv[i], "--no-ipoib")) {
			flags.ipoib = false;
			have_flags = true;
		} else if (add_spec(argv[i], &m, &n)) {
			free(m);
			return usage();
		}
	}
	t0 = now_ms();
	ret = sm->mod->ops->add_members(sm->b, pkey, m, n, have_flags ? &flags : NULL, err,
					sizeof(err));
	free(m);
	if (ret)
		return fail(ret, err);
	printf("OK add %zu members in %.1f ms\n", n, now_ms() - t0);
	return 0;
}

static int do_remove(struct ibvf_sm *sm, uint16_t pkey, int argc, char **argv)
{
	char err[IBVF_ERR_LEN] = "";
	uint64_t *g = NULL;
	size_t n = 0;
	double t0;
	int ret;

	for (int i = 0; i < argc; i++) {
		uint64_t first;
		size_t count;
		uint64_t *ng;

		if (parse_guids(argv[i], &first, &count) ||
		    !(ng = realloc(g, (n + count) * sizeof(*g)))) {
			free(g);
			return usage();
		}
		g = ng;
		for (size_t k = 0; k < count; k++)
			g[n++] = first + k;
	}
	t0 = now_ms();
	ret = sm->mod->ops->remove_members(sm->b, pkey, g, n, err, sizeof(err));
	free(g);
	if (ret)
		return fail(ret, err);
	printf("OK remove %zu members in %.1f ms\n", n, now_ms() - t0);
	return 0;
}

static int run(struct ibvf_sm *sm, int argc, char **argv)
{
	char err[IBVF_ERR_LEN] = "", desc[1024] = "";
	uint16_t pkey = 0;
	int ret;

	if (argc >= 2 && ibvf_pkey_parse(argv[1], &pkey, err, sizeof(err)))
		return usage();
	if (!strcmp(argv[0], "validate")) {
		ret = sm->mod->ops->validate(sm->b, desc, sizeof(desc), err, sizeof(err));
		if (ret)
			return fail(ret, err);
		printf("OK validate: %s\n", desc);
		return 0;
	}
	if (!strcmp(argv[0], "list")) {
		ret = sm->mod->ops->list_members(sm->b, argc >= 2 ? pkey : -1, print_member, NULL,
						 err, sizeof(err));
		return ret ? fail(ret, err) : 0;
	}
	if (argc < 2)
		return usage();
	if (!strcmp(argv[0], "add"))
		return do_add(sm, pkey, argc - 2, argv + 2);
	if (!strcmp(argv[0], "remove"))
		return do_remove(sm, pkey, argc - 2, argv + 2);
	return usage();
}

int main(int argc, char **argv)
{
	char err[IBVF_ERR_LEN] = "", *cfg;
	struct ibvf_sm sm;
	int ret;

	if (argc < 5)
		return usage();
	cfg = read_config(argv[3]);
	if (!cfg)
		return 2;
	ret = ibvf_sm_open(argv[1], argv[2], cfg, &sm, err, sizeof(err));
	free(cfg);
	if (ret)
		return fail(ret, err);
	ret = run(&sm, argc - 4, argv + 4);
	ibvf_sm_close(&sm);
	return ret;
}
