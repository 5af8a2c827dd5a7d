// SPDX-License-Identifier: MIT
/*
 * ib-sriov: the CNI plugin of ibvf (docs/man/ib-sriov.8.md).
 *
 * Protocol (CNI spec 1.1.0 section 2): the command and attachment come in
 * CNI_* environment variables, the network configuration on stdin; the
 * result, or an error object, goes to stdout; logs go to stderr (or the
 * configured logFile) and never to stdout. Exit status 0 on success, 1 on
 * any error. Without CNI_COMMAND (unset or empty: run by hand) it prints
 * its name, version and supported CNI versions on stderr and exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>
#include <unistd.h>

#include "cni_cache.h"
#include "cni_cmd.h"
#include "cni_config.h"
#include "cni_result.h"
#include "err.h"
#include "file_read.h"
#include "log.h"

#define STDIN_MAX (16u << 20)

static int emit(json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	int ret = 0;

	if (!text)
		return -ENOMEM;
	if (fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout))
		ret = -EIO;
	free(text);
	return ret;
}

static int emit_error(const char *version, int code, const char *msg, const char *details)
{
	json_t *e = cni_error_new(version, code, msg, details);

	log_debug("error %d: %s: %s", code, msg, details ? details : "");
	emit(e);
	json_decref(e);
	return 1;
}

static int read_stdin(char **out, size_t *len)
{
	size_t cap = 8192, n = 0;
	char *buf = malloc(cap + 1);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap >= STDIN_MAX) {
				free(buf);
				return -EFBIG;
			}
			nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(STDIN_FILENO, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = -errno;

			free(buf);
			return e;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

/*
 * jansson's hash seed from one getrandom(2) call. Without a seed, jansson's
 * first object opens, reads and closes /dev/urandom (hashtable_seed.c): three
 * system calls and a device lookup on every invocation (issue 17; about
 * 0.007 ms per start here). The seed only randomises the hash tables (the
 * key order in output is insertion order whatever the seed); when getrandom()
 * has nothing yet (early boot, GRND_NONBLOCK) jansson seeds itself as before.
 */
static void json_seed(void)
{
	size_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
		json_object_seed(seed); /* 0 also means "seed yourself" */
}

/* VERSION: answer with the input's cniVersion (when it parses) and what we support. */
static int do_version(const char *text, size_t len)
{
	json_t *in = json_loadb(text, len, 0, NULL), *out;
	const char *v = json_string_value(json_object_get(in, "cniVersion"));
	int ret;

	out = cni_version_result(v);
	ret = emit(out) ? 1 : 0;
	json_decref(out);
	json_decref(in);
	return ret;
}

/*
 * No CNI_COMMAND (run by hand): name, version and the CNI versions spoken, on
 * stderr, exit 0, as the reference plugins' "about" text (containernetworking
 * plugins pkg/skel: an empty CNI_COMMAND prints the about string).
 */
static int do_about(void)
{
	fprintf(stderr, "CNI ib-sriov plugin (ibvf) version %s\nCNI protocol versions supported:",
		IBVF_VERSION);
	for (const char *const *p = cni_supported_versions; *p; p++)
		fprintf(stderr, "%s %s", p == cni_supported_versions ? "" : ",", *p);
	fputc('\n', stderr);
	return 0;
}

/* The configuration's cniVersion for an error object, when it is one we speak. */
static const char *error_version(const char *text, size_t len, char *buf, size_t blen)
{
	json_t *j = json_loadb(text, len, 0, NULL);
	const char *v = json_string_value(json_object_get(j, "cniVersion"));
	unsigned n;

	buf[0] = 0;
	if (v && !cni_version_parse(v, &n) && cni_version_supported(n))
		snprintf(buf, blen, "%s", v);
	json_decref(j);
	return buf[0] ? buf : NULL;
}

/* logLevel / logFile of the configuration; logFile takes over stderr. */
static void apply_logging(const struct cni_netconf *nc)
{
	if (nc->log_level >= 0)
		ibvf_log_set_level(nc->log_level);
	if (nc->log_file) {
		char err[IBVF_ERR_LEN];
		/* non-blocking, regular files only: a FIFO there must not hang the plugin */
		int fd = ibvf_file_open_append(nc->log_file, 0600, err, sizeof(err));

		if (fd < 0) {
			log_warn("logFile: %s; logging to stderr", err);
			return;
		}
		if (dup2(fd, STDERR_FILENO) < 0)
			log_warn("logFile %s: %s; logging to stderr", nc->log_file,
				 strerror(errno));
		close(fd);
	}
}

static int run(struct cni_ctx *ctx)
{
	switch (ctx->env.cmd) {
	case CNI_CMD_ADD:
		return cni_cmd_add(ctx);
	case CNI_CMD_DEL:
		return cni_cmd_del(ctx);
	case CNI_CMD_CHECK:
		return cni_cmd_check(ctx);
	case CNI_CMD_GC:
		return cni_cmd_gc(ctx);
	case CNI_CMD_STATUS:
		return cni_cmd_status(ctx);
	default:
		return cni_failf(ctx, CNI_ERR_INVALID_ENV, "unknown command", "%s",
				 ctx->env.command);
	}
}

int main(int argc, char **argv)
{
	static const int codes[] = {
		[CNI_CONF_DECODE] = CNI_ERR_DECODE,
		[CNI_CONF_VERSION] = CNI_ERR_INCOMPATIBLE_VERSION,
		[CNI_CONF_INVALID] = CNI_ERR_INVALID_CONFIG,
	};
	struct cni_ctx ctx = {0};
	const char *lvl = getenv("IBVF_CNI_LOG_LEVEL"), *cmd;
	enum cni_conf_error kind;
	char err[IBVF_ERR_LEN], *text = NULL;
	size_t len = 0;
	int ret, level;

	if (argc > 1 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-version") ||
			 !strcmp(argv[1], "-v"))) {
		printf("ib-sriov CNI plugin (ibvf) version %s\n", IBVF_VERSION);
		return 0;
	}
	cmd = getenv("CNI_COMMAND");
	if (!cmd || !*cmd)
		return do_about();
	json_seed();
	level = lvl ? ibvf_log_level_parse(lvl) : LOG_WARNING;
	ibvf_log_init("ib-sriov", IBVF_LOG_STDERR, level < 0 ? LOG_WARNING : level);

	if (cni_env_load(&ctx.env, environ, err, sizeof(err)))
		return emit_error(NULL, CNI_ERR_INVALID_ENV, "invalid environment variables", err);
	ret = read_stdin(&text, &len);
	if (ret) {
		cni_env_free(&ctx.env);
		return emit_error(NULL, CNI_ERR_IO, "cannot read the network configuration",
				  strerror(-ret));
	}
	if (ctx.env.cmd == CNI_CMD_VERSION) {
		ret = do_version(text, len);
		goto out;
	}
	if (cni_netconf_parse(&ctx.nc, text, len, ctx.env.cmd, &kind, err, sizeof(err))) {
		char ver[16];

		ret = emit_error(error_version(text, len, ver, sizeof(ver)), codes[kind],
				 "invalid network configuration", err);
		goto out;
	}
	apply_logging(&ctx.nc);
	ctx.conf_text = text;
	ctx.conf_len = len;
	ctx.cache_dir = cni_cache_dir();
	log_debug("%s container %s ifname %s netns %s", ctx.env.command,
		  ctx.env.container_id ? ctx.env.container_id : "-",
		  ctx.env.ifname ? ctx.env.ifname : "-", ctx.env.netns ? ctx.env.netns : "-");
	if (run(&ctx)) {
		ret = emit_error(ctx.nc.cni_version, ctx.fail.code, ctx.fail.msg, ctx.fail.details);
	} else if (ctx.result) {
		json_t *out = cni_result_convert(ctx.result, ctx.nc.cni_version);

		ret = emit(out) ? 1 : 0;
		json_decref(out);
	} else {
		ret = 0;
	}
out:
	json_decref(ctx.result);
	cni_netconf_free(&ctx.nc);
	cni_env_free(&ctx.env);
	free(text);
	return ret;
}
