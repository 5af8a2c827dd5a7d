// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: the node checks behind "the Pod has no RDMA" (issue 21,
 * docs/doctor.md). The checks live in daemon/doctor/; this file parses the
 * options, reads what ibvf's store says the VFs in use should carry, and
 * prints the results.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl.h"
#include "doctor.h"
#include "err.h"

struct expect_list {
	struct ibvf_doctor_expect *v;
	size_t n, cap;
};

static int expect_cb(void *arg, const struct ibvf_alloc *a)
{
	struct expect_list *l = arg;
	struct ibvf_doctor_expect *x;

	/* past the port wait, the P_Key is in the VF's table */
	if ((a->state != IBVF_ALLOC_PORT_READY && a->state != IBVF_ALLOC_HANDED) || !a->pci[0] ||
	    !a->n_pkeys)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		void *v = realloc(l->v, cap * sizeof(*l->v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	x = &l->v[l->n++];
	memset(x, 0, sizeof(*x));
	snprintf(x->pci, sizeof(x->pci), "%s", a->pci);
	x->guid = a->guid;
	for (size_t i = 0; i < a->n_pkeys && i < 16; i++)
		x->pkeys[x->n_pkeys++] = a->pkeys[i];
	return 0;
}

/* The store's VFs in use; false (said on stderr) when there is no store to read. */
static bool read_store(struct ctl_ctx *ctx, struct expect_list *l)
{
	struct ibvf_pool_filter f = {.pkey = -1};
	char err[IBVF_ERR_LEN] = "", db[4096];
	struct ibvf_pool *p;
	struct stat st;

	if (ctl_load_config(ctx))
		return false;
	snprintf(db, sizeof(db), "%s/pool.db", ctx->cfg.state_dir);
	if (stat(db, &st)) {
		fprintf(stderr,
			"ibvfctl: doctor: no GUID pool store at %s: P_Key tables not "
			"checked\n",
			db);
		return false;
	}
	if (ctl_open_pool(ctx, false, &p))
		return false;
	if (ibvf_pool_list(p, &f, expect_cb, l, err, sizeof(err)) < 0) {
		fprintf(stderr, "ibvfctl: doctor: reading the store: %s\n", err);
		ibvf_pool_close(p);
		return false;
	}
	ibvf_pool_close(p);
	return true;
}

static int doctor_run(struct ctl_ctx *ctx, int argc, char **argv)
{
	enum { OPT_CNI = 1000, OPT_NO_STORE, OPT_STRICT };
	static const struct option opts[] = {
		{"root", required_argument, NULL, 'r'},
		{"cni-conf-dir", required_argument, NULL, OPT_CNI},
		{"no-store", no_argument, NULL, OPT_NO_STORE},
		{"strict", no_argument, NULL, OPT_STRICT},
		{0},
	};
	struct ibvf_doctor_opts o = {.root = "/"};
	struct expect_list l = {0};
	static const struct ctl_col cols[] = {
		{"id", "CHECK"},
		{"verdict", "VERDICT"},
		{"evidence", "EVIDENCE"},
		{"fix", "FIX"},
		{0},
	};
	bool no_store = false, strict = false;
	char err[IBVF_ERR_LEN] = "";
	json_t *checks, *c;
	int ret, fails = 0, warns = 0;
	size_t i;

	while ((ret = ctl_getopt(ctx, argc, argv, "r:", opts)) != -1) {
		switch (ret) {
		case 'r':
			o.root = optarg;
			break;
		case OPT_CNI:
			o.cni_conf_dir = optarg;
			break;
		case OPT_NO_STORE:
			no_store = true;
			break;
		case OPT_STRICT:
			strict = true;
			break;
		case 'h':
			ctl_cmd_usage(stdout, &ctl_doctor_object, &ctl_doctor_object.cmds[0]);
			return CTL_OK;
		default:
			ctl_cmd_usage(stderr, &ctl_doctor_object, &ctl_doctor_object.cmds[0]);
			return CTL_USAGE;
		}
	}
	if (optind != argc)
		return ctl_error(CTL_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!no_store) {
		o.have_store = read_store(ctx, &l);
		o.expect = l.v;
		o.n_expect = l.n;
	}
	ret = ibvf_doctor_run(&o, &checks, err, sizeof(err));
	free(l.v);
	if (ret)
		return ctl_error(ret == -ENOENT ? CTL_USAGE : CTL_FAILED, "doctor: %s", err);
	json_array_foreach(checks, i, c)
	{
		const char *v = json_string_value(json_object_get(c, "verdict"));

		fails += !strcmp(v, "fail");
		warns += !strcmp(v, "warn");
	}
	ctl_emit_table(ctx, checks, cols);
	if (!ctx->json)
		printf("%d failed, %d warnings\n", fails, warns);
	return fails || (strict && warns) ? CTL_PROBLEMS : CTL_OK;
}

static const struct ctl_cmd doctor_cmds[] = {
	{"run", doctor_run, "[--root DIR] [--cni-conf-dir DIR] [--no-store] [--strict]",
	 "the node checks behind \"the Pod has no RDMA\"; exit 1 when a check fails (--strict: "
	 "or warns)"},
	{0},
};

const struct ctl_object ctl_doctor_object = {
	.name = "doctor",
	.help = "diagnose this node: modules, RDMA netns mode, memlock, SR-IOV, SM, PCIe, RoCE, CDI",
	.cmds = doctor_cmds,
};
