/* SPDX-License-Identifier: MIT */
/*
 * ibvfctl internals: object/command tables (like iproute2's rdma tool) and
 * one print path for tables and --json.
 */
#ifndef IBVF_CTL_H
#define IBVF_CTL_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "guid_pool.h"

/* Exit codes of ibvfctl (docs/man/ibvfctl.8.md). */
enum ctl_exit {
	CTL_OK = 0,
	CTL_PROBLEMS = 1, /* audit/check found problems */
	CTL_USAGE = 2,	  /* usage or config error */
	CTL_FAILED = 3,	  /* the operation failed (store, kernel, SM) */
};

struct ctl_ctx {
	const char *config_path; /* --config; NULL = default if present */
	const char *state_dir;	 /* --state-dir override */
	bool json;
	bool cfg_loaded;
	struct ibvf_config cfg;
	int store_lock; /* ctl_offline_begin(): the state dir's lock, -1 = none */
};

struct ctl_cmd {
	const char *name;
	int (*fn)(struct ctl_ctx *ctx, int argc, char **argv);
	const char *usage; /* arguments, e.g. "GUID" */
	const char *help;  /* one line */
};

struct ctl_object {
	const char *name;
	const char *help;
	const struct ctl_cmd *cmds; /* NULL-name terminated; first is the default */
	/* a first word that is not a command is an argument of the default
	 * command (`ibvfctl rc-check rxe0`) instead of an unknown command */
	bool args_to_default;
};

/** One column of a table: JSON key of each row object and its title. */
struct ctl_col {
	const char *key;
	const char *title;
};

/* Objects (one file each). */
extern const struct ctl_object ctl_pool_object;
extern const struct ctl_object ctl_vf_object;
extern const struct ctl_object ctl_port_object;
extern const struct ctl_object ctl_rc_object;

extern const struct ctl_object ctl_daemon_object;
extern const struct ctl_object ctl_cluster_object;
extern const struct ctl_object ctl_doctor_object;
extern const struct ctl_object ctl_fabric_object;

struct cluster_block;

/**
 * ctl_cluster_blocks_all() - every claimed cluster GUID block in etcd (all
 * nodes; pool.cluster of the config, docs/cluster.md), for `fabric audit`.
 * *@out: malloc'ed array of *@n blocks (free()). Return: CTL_OK or a CTL_*
 * error (printed).
 */
int ctl_cluster_blocks_all(struct ctl_ctx *ctx, struct cluster_block **out, size_t *n);

/**
 * ctl_daemon_call() - one JSON-RPC call to ibvfd at api.socket (params
 * borrowed). Errors are printed; with @quiet_if_down a daemon that is not
 * running (no socket file, or a stale one nobody listens on) returns
 * -ENOTCONN silently: the caller takes its offline path (ctl_offline.c).
 * Return: CTL_OK, a CTL_* code, or -ENOTCONN.
 */
int ctl_daemon_call(struct ctl_ctx *ctx, const char *method, json_t *params, json_t **result,
		    bool quiet_if_down);

/**
 * ctl_daemon_call_code() - ctl_daemon_call(), and the JSON-RPC error code
 * of a refused call in *@rpc_code (0 otherwise), so that a caller can tell
 * a bad argument (IBVF_RPC_INVALID_PARAMS: exit 2) from a failure (exit 3).
 */
int ctl_daemon_call_code(struct ctl_ctx *ctx, const char *method, json_t *params, json_t **result,
			 bool quiet_if_down, int *rpc_code);

/**
 * ctl_offline_begin() - start working on the stores directly, ibvfd being
 * down: take the state directory's lock (statedir.h; exclusive and created
 * when @write, else shared when it exists), held until ibvfctl exits, and say
 * "ibvfd is not running ...: working on the store directly" on stderr. A lock
 * held by someone else (ibvfd starting, or not answering) is refused.
 * Return: CTL_OK or a CTL_* error (printed).
 */
int ctl_offline_begin(struct ctl_ctx *ctx, bool write);

/** ctl_offline_allocate() - `pool allocate` on the store (ibvfd down). Return CTL_*. */
int ctl_offline_allocate(struct ctl_ctx *ctx, const struct ibvf_alloc_request *req,
			 struct ibvf_alloc *out);

/** ctl_offline_release() - `pool release` on the store (ibvfd down). Return CTL_*. */
int ctl_offline_release(struct ctl_ctx *ctx, uint64_t guid, bool *released);

/**
 * ctl_offline_audit() - with no daemon running, no engine: the store's own
 * checks, and read only, the store against the VFs (VF layer: inventory and
 * the configured driver's read-back) and the SM (the configured backend's
 * list_members); what cannot be read is skipped and said on stderr. @fix
 * frees expired quarantine (the store only; ibvfd repairs VFs and SM at its
 * start). *@findings: JSON array of {kind, severity, guid, count, detail,
 * pkey?, pci?}. Return: CTL_OK (then *@problems is set) or a CTL_* error.
 */
int ctl_offline_audit(struct ctl_ctx *ctx, bool fix, json_t **findings, int *problems);

/**
 * ctl_offline_rebuild() - `pool rebuild` (ibvfd down): adopt every GUID of the
 * ranges that a VF carries (read back) or the SM lists (any PKey) and that no
 * live record holds, as a "handed" record owned by IBVF_POOL_ADOPTED_PREFIX
 * + GUID with the VF's PCI address and the SM's PKeys; then clear the store's
 * lost mark (ibvf_pool_rebuilt()). Source: issue 14. *@adopted: JSON array
 * of {guid, pci, pkeys, owner}. Return: CTL_OK or a CTL_* error (the mark
 * stays when a GUID could not be adopted).
 */
int ctl_offline_rebuild(struct ctl_ctx *ctx, json_t **adopted);

/** ctl_emit_findings() - print reconciliation findings (steals @findings). */
int ctl_emit_findings(struct ctl_ctx *ctx, json_t *findings);

/** ctl_load_config() - load the config once (errors printed). Return CTL_* code. */
int ctl_load_config(struct ctl_ctx *ctx);

/** ctl_open_pool() - open the GUID pool store, read-only unless @write. */
int ctl_open_pool(struct ctl_ctx *ctx, bool write, struct ibvf_pool **out);

/** ctl_emit_table() - print @rows (array of objects) as a table or JSON; steals @rows. */
void ctl_emit_table(struct ctl_ctx *ctx, json_t *rows, const struct ctl_col *cols);

/** ctl_emit_object() - print @obj as "Key: value" lines or JSON; steals @obj. */
void ctl_emit_object(struct ctl_ctx *ctx, json_t *obj, const struct ctl_col *cols);

/**
 * ctl_emit_stream() - print one record of a stream (e.g. `port watch` events)
 * as it happens: a table row (the header before the first row, *@header
 * tracks it) or, with --json, one compact JSON object per line (JSON Lines).
 * Flushes stdout. Steals @obj.
 */
void ctl_emit_stream(struct ctl_ctx *ctx, json_t *obj, const struct ctl_col *cols, bool *header);

/**
 * ctl_json_text() - a JSON string of @s (NULL: JSON null) that never fails
 * on bad input: bytes that are not UTF-8 (a store written by other tools, a
 * fake sysfs) become U+FFFD instead of making json_pack() drop the whole row.
 * Return: a new reference, NULL only when out of memory.
 */
json_t *ctl_json_text(const char *s);

/**
 * ctl_count_json() - a count as a JSON integer; above INT64_MAX (jansson's
 * integers are signed), as its exact decimal string. Ranges may hold up to
 * 2^64 - 2 GUIDs: a cast printed "Total: -2".
 * Return: a new reference, NULL only when out of memory.
 */
json_t *ctl_count_json(uint64_t v);

/** ctl_error() - print "ibvfctl: <msg>" on stderr; returns @code. */
int ctl_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** ctl_cmd_usage() - print the usage of one command to @f. */
void ctl_cmd_usage(FILE *f, const struct ctl_object *obj, const struct ctl_cmd *cmd);

/**
 * ctl_getopt() - getopt_long over a command's own options, adding --json
 * and --help. Returns like getopt_long; 'h' means help was asked.
 */
int ctl_getopt(struct ctl_ctx *ctx, int argc, char **argv, const char *shortopts,
	       const struct option *longopts);

#endif /* IBVF_CTL_H */
