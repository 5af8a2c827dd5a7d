// SPDX-License-Identifier: MIT
/*
 * ibvfctl - ibvf admin CLI. Objects and their commands come from tables;
 * `ibvfctl OBJECT` runs the object's default command; unknown → exit 2.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_pool.h"
#include "ctl.h"
#include "err.h"
#include "log.h"

static const struct ctl_object *const objects[] = {
	&ctl_pool_object,   &ctl_vf_object,	&ctl_port_object,
	&ctl_rc_object,	    &ctl_daemon_object, &ctl_cluster_object,
	&ctl_doctor_object, &ctl_fabric_object, NULL,
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ibvfctl [OPTIONS] OBJECT [COMMAND] [ARGS]\n\n"
		"ibvf admin CLI: GUID pool, VFs, ports and SM membership.\n\n"
		"Options:\n"
		"  -c, --config FILE     ibvfd config (default %s if present)\n"
		"  -s, --state-dir DIR   state directory (overrides the config)\n"
		"  -j, --json            JSON output instead of tables\n"
		"  -v, --verbose         log debug messages to stderr\n"
		"  -V, --version         print the version\n"
		"  -h, --help            this help\n\n"
		"Objects:\n",
		IBVF_DEFAULT_CONFIG);
	for (const struct ctl_object *const *o = objects; *o; o++) {
		fprintf(f, "  %-10s %s\n", (*o)->name, (*o)->help);
		for (const struct ctl_cmd *c = (*o)->cmds; c->name; c++)
			fprintf(f, "    %s %s %s\n", (*o)->name, c->name, c->usage ? c->usage : "");
	}
	fprintf(f, "\nExit codes: 0 ok, 1 problems found, 2 usage or config error, 3 operation "
		   "failed.\nSee ibvfctl(8).\n");
}

int ctl_load_config(struct ctl_ctx *ctx)
{
	char err[IBVF_ERR_LEN];

	if (ctx->cfg_loaded)
		return CTL_OK;
	if (ibvf_config_load(&ctx->cfg, ctx->config_path, ctx->config_path != NULL, environ, err,
			     sizeof(err)))
		return ctl_error(CTL_USAGE, "config: %s", err);
	if (ctx->state_dir) {
		char *s = strdup(ctx->state_dir);

		if (!s)
			return ctl_error(CTL_FAILED, "out of memory");
		free(ctx->cfg.state_dir);
		ctx->cfg.state_dir = s;
	}
	ctx->cfg_loaded = true;
	return CTL_OK;
}

int ctl_open_pool(struct ctl_ctx *ctx, bool write, struct ibvf_pool **out)
{
	struct ibvf_pool_opts o = {0};
	char err[IBVF_ERR_LEN];
	int ret = ctl_load_config(ctx);

	if (ret)
		return ret;
	o.state_dir = ctx->cfg.state_dir;
	o.ranges = ctx->cfg.pool.ranges;
	o.n_ranges = ctx->cfg.pool.n_ranges;
	if (ctx->cfg.pool.cluster.enabled) {
		/* cluster mode: the node's own blocks, never the whole ranges */
		struct ibvf_guid_range *r;
		size_t n;

		ret = ibvf_cluster_local_ranges(&ctx->cfg, &r, &n, err, sizeof(err));
		if (ret)
			return ctl_error(ret == -ENOMEM ? CTL_FAILED : CTL_USAGE, "%s", err);
		free(ctx->cfg.pool.ranges);
		ctx->cfg.pool.ranges = r;
		ctx->cfg.pool.n_ranges = n;
		o.ranges = r;
		o.n_ranges = n;
	}
	o.quarantine_s = ctx->cfg.pool.quarantine_s;
	o.sync_full = ctx->cfg.pool.sync_full;
	o.read_only = !write;
	ret = ibvf_pool_open(&o, out, err, sizeof(err));
	if (ret == -EINVAL)
		return ctl_error(CTL_USAGE, "%s", err);
	if (ret)
		return ctl_error(CTL_FAILED, "%s", err);
	/* a reader is told too, not shown a store that lost records as whole (issue 14) */
	if (!write && ibvf_pool_lost(*out, err, sizeof(err)))
		fprintf(stderr,
			"ibvfctl: WARNING: the GUID pool store lost records (%s): what follows may "
			"miss GUIDs in use; run 'ibvfctl pool rebuild'\n",
			err);
	return CTL_OK;
}

static int run_object(struct ctl_ctx *ctx, const struct ctl_object *obj, int argc, char **argv)
{
	const struct ctl_cmd *cmd = obj->cmds;
	char **args;
	int ret;

	if (argc > 0 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
		printf("%s: %s\n", obj->name, obj->help);
		for (cmd = obj->cmds; cmd->name; cmd++)
			ctl_cmd_usage(stdout, obj, cmd);
		return CTL_OK;
	}
	if (argc > 0 && argv[0][0] != '-') {
		for (cmd = obj->cmds; cmd->name; cmd++)
			if (!strcmp(cmd->name, argv[0]))
				break;
		if (cmd->name) {
			optind = 0;
			return cmd->fn(ctx, argc, argv);
		}
		if (!obj->args_to_default) {
			ctl_error(CTL_USAGE, "unknown command '%s %s'", obj->name, argv[0]);
			for (cmd = obj->cmds; cmd->name; cmd++)
				ctl_cmd_usage(stderr, obj, cmd);
			return CTL_USAGE;
		}
		cmd = obj->cmds;
	}
	/* the default command, with the options given after the object */
	args = calloc((size_t)argc + 2, sizeof(*args));
	if (!args)
		return ctl_error(CTL_FAILED, "out of memory");
	args[0] = (char *)cmd->name;
	memcpy(args + 1, argv, (size_t)argc * sizeof(*args));
	optind = 0;
	ret = cmd->fn(ctx, argc + 1, args);
	free(args);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"state-dir", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct ctl_ctx ctx = {.store_lock = -1};
	int c, ret, level = LOG_WARNING;

	while ((c = getopt_long(argc, argv, "+c:s:jvVh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			ctx.config_path = optarg;
			break;
		case 's':
			ctx.state_dir = optarg;
			break;
		case 'j':
			ctx.json = true;
			break;
		case 'v':
			level = LOG_DEBUG;
			break;
		case 'V':
			printf("ibvfctl %s\n", IBVF_VERSION);
			return CTL_OK;
		case 'h':
			usage(stdout);
			return CTL_OK;
		default:
			usage(stderr);
			return CTL_USAGE;
		}
	}
	ibvf_log_init("ibvfctl", IBVF_LOG_STDERR, level);
	if (optind >= argc) {
		usage(stderr);
		return CTL_USAGE;
	}
	ret = -1;
	for (const struct ctl_object *const *o = objects; *o; o++)
		if (!strcmp((*o)->name, argv[optind])) {
			int first = optind + 1;

			ret = run_object(&ctx, *o, argc - first, argv + first);
			break;
		}
	if (ret == -1) {
		ctl_error(CTL_USAGE, "unknown object '%s'", argv[optind]);
		usage(stderr);
		ret = CTL_USAGE;
	}
	if (ctx.cfg_loaded)
		ibvf_config_free(&ctx.cfg);
	if (ctx.store_lock >= 0)
		close(ctx.store_lock);
	return ret;
}
