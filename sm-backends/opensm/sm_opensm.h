/* SPDX-License-Identifier: MIT */
/*
 * The opensm SM backend (sm-backends/opensm/): ibvf's members live in a
 * marked section of OpenSM's partition file (partition_conf.h), installed
 * atomically (partition_file.h), applied with SIGHUP (opensm_reload.h) and
 * verified through SMPs (pkey_verify.h). docs/opensm.md describes it and
 * docs/config.md its config object.
 *
 * This header is private to the backend and its tests; ibvfd sees only the
 * ops table the module exports (include/ibvf/sm_backend.h).
 */
#ifndef IBVF_SM_OPENSM_H
#define IBVF_SM_OPENSM_H

#include <ibvf/sm_backend.h>

#include "partition_conf.h"
#include "pkey_verify.h"

/**
 * How ibvf joins a partition the administrator defines (config key
 * "admin_pkeys"): only PKeys listed there can be joined at all.
 */
enum opensm_admin_join {
	OJ_DEFMEMBER = 0, /* "defmember": the admin's defmember, nothing else */
	OJ_FULL,	  /* "full": full members only */
	OJ_LIMITED,	  /* "limited": limited members only */
	OJ_REQUEST,	  /* "request": as each request asks */
};

struct opensm_admin_pkey {
	uint16_t pkey; /* 15-bit */
	enum opensm_admin_join join;
};

/** The backend's config (JSON object "sm.config"). */
struct opensm_cfg {
	char *partition_file;	    /* default /etc/opensm/partitions.conf */
	char *backup_file;	    /* default <partition_file>.ibvf-prev */
	char *lock_file;	    /* default <partition_file>.ibvf-lock */
	char *pid_file;		    /* required */
	uint32_t reload_timeout_ms; /* SIGHUP → P_Keys confirmed; default 10000 */
	uint32_t lock_timeout_ms;   /* wait for another ibvf writer; default 5000 */
	enum pv_policy verify;	    /* default PV_FABRIC */
	char *umad_ca;		    /* NULL: libibumad's first CA */
	int umad_port;		    /* 0: libibumad's default port */
	uint32_t poll_min_ms;	    /* first SMP poll interval; default 5 */
	uint32_t poll_max_ms;	    /* poll backoff cap; default 50 */
	struct pc_props props;	    /* properties of partitions ibvf creates */
	bool index0;		    /* default when add_members() gets no flags */
	/* opt-ins to the administrator's partitions ("admin_pkeys") */
	struct opensm_admin_pkey *admin_pkeys;
	size_t n_admin_pkeys;
};

/** opensm_cfg_parse() - parse @json (NULL = "{}") into @cfg; errors name the key. */
int opensm_cfg_parse(const char *json, struct opensm_cfg *cfg, char *err, size_t errlen);

/** opensm_cfg_free() - free the strings of @cfg. */
void opensm_cfg_free(struct opensm_cfg *cfg);

/**
 * opensm_set_verifier() - test seam: use @v instead of opening the SMP
 * verifier (the backend takes ownership and closes it in fini()).
 */
void opensm_set_verifier(struct ibvf_sm_backend *b, const struct pkey_verifier *v);

/** The ops table (also what ibvf_sm_backend_v2() returns). */
extern const struct ibvf_sm_ops opensm_ops;

#endif /* IBVF_SM_OPENSM_H */
