/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: the commands (CNI spec 1.1.0 section 2 "CNI
 * operations"). Each takes the parsed environment and configuration and
 * either sets ctx->result (ADD) / succeeds, or fills ctx->fail with the CNI
 * error code, a short message and details naming the VF, GUID and PKey.
 */
#ifndef IBVF_CNI_CMD_H
#define IBVF_CNI_CMD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cni_cache.h"
#include "cni_config.h"
#include "err.h"

/** A command's failure: what goes into the CNI error object. */
struct cni_fail {
	int code;			/* enum cni_error_code */
	char msg[128];			/* short: "failed to move the VF netdev" */
	char details[4 * IBVF_ERR_LEN]; /* long: names VF, GUID, PKey and the cause */
};

/** Per-step wall times of one command (cni_steps_mark()), logged at debug level. */
#define CNI_STEPS_MAX 16
struct cni_steps {
	uint64_t t0, last; /* CLOCK_MONOTONIC ns: the command's start, the last mark */
	unsigned n;
	const char *name[CNI_STEPS_MAX];
	uint64_t ns[CNI_STEPS_MAX]; /* time since the mark before */
};

struct cni_ctx {
	struct cni_env env;
	struct cni_netconf nc;
	const char *conf_text; /* stdin, for delegated plugins */
	size_t conf_len;
	const char *cache_dir;
	json_t *result; /* ADD: the result in the 1.1.0 layout */
	struct cni_fail fail;
	struct cni_steps steps;
};

/**
 * cni_failf() - set @ctx->fail (code, msg, details) and return -1.
 * Details gain a prefix naming the attachment (container, ifname, VF PCI).
 */
int cni_failf(struct cni_ctx *ctx, int code, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/** cni_cmd_add() - ADD (docs/cni.md "ADD"). Return: 0 or -1 with ctx->fail set. */
int cni_cmd_add(struct cni_ctx *ctx);

/** cni_cmd_del() - DEL: idempotent, succeeds when state is missing. */
int cni_cmd_del(struct cni_ctx *ctx);

/** cni_cmd_check() - CHECK against prevResult, the cache, the daemon and the port. */
int cni_cmd_check(struct cni_ctx *ctx);

/** cni_cmd_gc() - GC: release every attachment of the network not in the valid list. */
int cni_cmd_gc(struct cni_ctx *ctx);

/** cni_cmd_status() - STATUS: ibvfd ready with its SM backend validated; IPAM's STATUS. */
int cni_cmd_status(struct cni_ctx *ctx);

/* ---- shared by the commands (cni_cmd.c) ---- */

/** cni_steps_start() - start @s's clock (CLOCK_MONOTONIC) with no steps. */
void cni_steps_start(struct cni_steps *s);

/**
 * cni_steps_mark() - end step @name (a string literal): the time since the
 * last mark (or the start) is charged to it; a name marked again adds up.
 * Beyond CNI_STEPS_MAX names the time goes to the last one.
 */
void cni_steps_mark(struct cni_steps *s, const char *name);

/**
 * cni_steps_log() - at debug level, one line "@what steps (ms): {"step": ms,
 * ..., "total": ms}" (JSON, the plugin's own wall time per step from
 * cni_steps_start(); docs/cni.md "Logging", bench/bench_cni.py parses it).
 */
void cni_steps_log(const struct cni_steps *s, const char *what);

/** Lock directory: $IBVF_CNI_LOCK_DIR or /var/run/cni/ib-sriov (ib-sriov-cni's). */
const char *cni_lock_dir(void);

/**
 * cni_lock() - take the plugin locks for VF @pci: the directory-wide
 * "cni.lock" that ib-sriov-cni takes exclusively (shared here in daemon mode,
 * so daemon-backed calls run in parallel but never beside a compatibility-mode
 * rebind), then an exclusive per-VF lock. Blocks. Return: 0 or -errno;
 * cni_unlock() releases.
 */
int cni_lock(const char *pci, bool exclusive_global, int fds[2], char *err, size_t errlen);
void cni_unlock(int fds[2]);

/**
 * cni_teardown() - undo an attachment described by @c: IPAM DEL (with
 * @conf_text, or the cached configuration when NULL), netdev back to the host
 * (when @netns_path is reachable and holds it), RDMA device back, the daemon's
 * release or the compatibility-mode GUID/link-state restore. Continues past
 * failures; the first one that leaves something held is reported.
 * @is_gc: the attachment is not the caller's own (GC): its ID and ifname are
 * passed to the IPAM plugin instead of the caller's.
 * Return: 0, or -1 with ctx->fail set.
 */
int cni_teardown(struct cni_ctx *ctx, struct cni_cache *c, const char *netns_path,
		 const char *conf_text, size_t conf_len, bool is_gc);

#endif /* IBVF_CNI_CMD_H */
