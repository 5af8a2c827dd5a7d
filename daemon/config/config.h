/* SPDX-License-Identifier: MIT */
/*
 * ibvfd configuration: one JSON file (default /etc/ibvf/ibvfd.json) plus the
 * environment variables of ib-kubernetes as overrides (docs/config.md lists
 * every key, type, default and override). Unknown keys are errors.
 */
#ifndef IBVF_CONFIG_H
#define IBVF_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "port_watch.h"
#include "vf_manager.h"

#define IBVF_DEFAULT_CONFIG    "/etc/ibvf/ibvfd.json"
#define IBVF_DEFAULT_STATE_DIR "/var/lib/ibvf"
#define IBVF_DEFAULT_RUN_DIR   "/run/ibvf"
#define IBVF_MAX_ALLOWED_UIDS  16

/* the ib-sriov CNI plugin's default cache directory (cni/cni_cache.h) */
#define IBVF_DEFAULT_CNI_CACHE_DIR "/var/lib/cni/ib-sriov"

/** An inclusive GUID range [start, end], host-order u64s. */
struct ibvf_guid_range {
	uint64_t start;
	uint64_t end;
};

#define IBVF_CLUSTER_MAX_ENDPOINTS 16
#define IBVF_CLUSTER_NODE_MAX	   253 /* a Kubernetes node name (DNS subdomain) */

/**
 * pool.cluster (docs/config.md, docs/cluster.md): GUIDs unique across every
 * node through GUID blocks owned by nodes in etcd (issue 18). Absent: the
 * node-local pool alone, as before.
 */
struct ibvf_cluster_config {
	bool enabled;	  /* pool.cluster is present */
	char **endpoints; /* http(s)://host:port, 1..16 */
	size_t n_endpoints;
	char *ca_file; /* TLS: CA bundle, client certificate and key (a secret file) */
	char *cert_file;
	char *key_file;
	char *user; /* etcd basic auth: user or user_file, and password_file */
	char *user_file;
	char *password_file;
	char *prefix; /* etcd key prefix, default "/ibvf/" (several fabrics may share etcd) */
	char *node;   /* this node's name: config, else NODE_NAME, else the hostname */
	uint32_t block_size;	 /* GUIDs per block; default 256 */
	uint32_t low_watermark;	 /* claim the next block when this few free GUIDs are left; 64 */
	uint32_t high_watermark; /* return an idle block above this many free GUIDs; 0 = low
				  * + 2 blocks */
	uint32_t timeout_ms;	 /* one etcd call, every endpoint included; default 5000 */
};

struct ibvf_pool_config {
	struct ibvf_guid_range *ranges; /* sorted by start, non-overlapping */
	size_t n_ranges;
	uint32_t quarantine_s; /* seconds a released GUID waits; default 60 */
	bool sync_full;	       /* SQLite synchronous=FULL (default) or NORMAL */
	struct ibvf_cluster_config cluster;
};

struct ibvf_sm_config {
	char *backend;		    /* "noop" (default), "opensm", "ufm" */
	char *module_dir;	    /* where <backend>.so modules live */
	char *backend_json;	    /* text of the backend's own config object */
	uint32_t periodic_update_s; /* reconciliation period, s (DAEMON_PERIODIC_UPDATE) */
	uint32_t batch_window_ms;   /* minimum SM batch age, ms; default 0 (issue 17) */
	uint32_t batch_max;	    /* flush a batch at this many GUIDs; default 1024 */
};

/**
 * smd: the SM agent ibvf-smd (issue 19, docs/cluster.md); ibvfd ignores it.
 * Defaults depend on sm.backend: ufm elects one leader per group (etcd
 * lease), every other backend renders its own SM (one group per agent).
 */
struct ibvf_smd_config {
	char *id;	      /* this agent's name; default pool.cluster.node */
	char *group;	      /* the SM it feeds; default "ufm" (election) or the id */
	bool election;	      /* one leader per group calls the SM; default backend == ufm */
	bool election_set;    /* smd.election was in the file */
	uint32_t lease_ttl_s; /* agent and leader lease TTL, s; default 3 */
	uint32_t reconcile_s; /* full desired-vs-SM pass at least this often, s; default 30 */
	uint32_t batch_max;   /* at most this many member changes per backend call; 4096 */
};

struct ibvf_vf_config {
	char *driver;		    /* "netlink" (built in, default) or a lab module */
	char *module_dir;	    /* where VF driver modules (<driver>.so) live */
	uint32_t rebind_timeout_ms; /* wait for netdev/RDMA device after rebind; 5000 */
	char *ibsim_json;	    /* text of the "ibsim" lab driver object, or NULL */
	char *fake_dir;		    /* "fake" driver (tests, benchmarks): VF files */
	/* warm VFs (issue 17 item 3, engine/warm_vf.c): free VFs programmed ahead
	 * of time; default on for the netlink driver, off for the lab drivers */
	bool warm;
	bool warm_set; /* "warm" was in the file (else the driver's default) */
};

struct ibvf_api_config {
	char *socket; /* default <run_dir>/ibvfd.sock */
	uid_t allowed_uids[IBVF_MAX_ALLOWED_UIDS];
	size_t n_allowed_uids;	 /* default: {0} */
	uint32_t idle_timeout_s; /* close a connection idle this long; 60 */
	uint32_t line_timeout_s; /* close one whose request line is incomplete this long; 10 */
};

/*
 * The HTTP endpoint of /metrics, /healthz, /readyz (docs/metrics.md). The
 * address is a numeric IPv4 or IPv6 literal; loopback by default so that
 * nothing off the node reaches it unless the admin says so.
 */
#define IBVF_HTTP_DEFAULT_PORT 9479
/* ibvf-smd's default when http.port is not set: it may share a host with ibvfd */
#define IBVF_SMD_HTTP_DEFAULT_PORT 9480
struct ibvf_http_config {
	bool enabled;	  /* default true */
	char address[64]; /* default "127.0.0.1" */
	uint16_t port;	  /* default IBVF_HTTP_DEFAULT_PORT; 0: any free port (logged) */
	bool port_set; /* http.port or IBVF_HTTP_PORT given (else ibvf-smd uses its own default) */
};

/** How reconciliation treats what nobody owns (docs/operations.md). */
enum ibvf_reconcile_mode {
	IBVF_RECONCILE_REPORT = 0, /* log and report only */
	IBVF_RECONCILE_FIX,	   /* remove unowned SM memberships, reset unowned VFs */
};

struct ibvf_daemon_config {
	uint32_t prepare_timeout_s; /* overall deadline of one prepare; default 60 */
	uint32_t port_timeout_s;    /* of those, at most this long waiting for the port; 30 */
	uint32_t stop_timeout_s;    /* SIGTERM: wait this long for in-flight requests; 20 */
	uint32_t workers;	    /* worker threads; default 16 */
	enum ibvf_reconcile_mode reconcile; /* default report */
	uint64_t parked_guid; /* GUID given to a released VF; 0 = its pre-attach GUID */
	/* the ib-sriov CNI plugin's cache, one more in-use view; "" = not read */
	char cni_cache_dir[PATH_MAX];
};

struct ibvf_config {
	char *path; /* file it was read from; NULL when defaults only */
	char *state_dir;
	char *run_dir;
	char *sysfs_root;	 /* default "/sys" */
	int log_level;		 /* syslog level; default LOG_INFO */
	bool log_json;		 /* log_format "json": JSON lines on stderr (log.h) */
	bool allow_default_pkey; /* permit PKey 0x7fff for tenants; default false */
	struct ibvf_pool_config pool;
	struct ibvf_sm_config sm;
	struct ibvf_vf_config vf;
	struct ibvf_api_config api;
	struct ibvf_port_watch_config port_watch;
	struct ibvf_daemon_config daemon;
	struct ibvf_http_config http;
	struct ibvf_smd_config smd;
};

/**
 * ibvf_config_load() - defaults, then the file at @path (when @path is NULL
 * the default file is read if it exists), then environment overrides from
 * @envp (NULL: none). On error nothing is allocated in @cfg.
 * @must_exist: an explicit --config path that does not exist is an error.
 *
 * Return: 0, -ENOENT, -EINVAL (bad value; @err names file and key path),
 * -ENOMEM.
 */
int ibvf_config_load(struct ibvf_config *cfg, const char *path, bool must_exist, char *const *envp,
		     char *err, size_t errlen);

/**
 * ibvf_config_env_take() - take the environment's secrets out of the
 * process (issue 14, "Secrets"): return a private copy of @env (a
 * NULL-terminated array of strdup()'d "NAME=value" strings, for
 * ibvf_config_load() now and on every reload), then remove each secret
 * variable (UFM_PASSWORD) from the process: unsetenv(), and its original
 * bytes overwritten, so that /proc/PID/environ no longer shows it. Call in
 * main() before any thread or child exists. @env is normally environ.
 * Return: the copy (free it with ibvf_config_env_free()), or NULL (-ENOMEM;
 * the process environment is then unchanged).
 */
char **ibvf_config_env_take(char **env);

/** ibvf_config_env_free() - wipe and free a copy made by ibvf_config_env_take(). */
void ibvf_config_env_free(char **envp);

/** ibvf_config_free() - release everything ibvf_config_load() allocated. */
void ibvf_config_free(struct ibvf_config *cfg);

/**
 * ibvf_config_print() - the effective config as JSON on @f. Under sm.config
 * every value (string, number, boolean; at any depth of objects and arrays)
 * whose key is not a known non-secret key of the noop, opensm or ufm backend
 * is replaced by "********": a misspelled "pasword" is masked too. If the
 * config file carried such values and group or others may read it,
 * ibvf_config_load() warns.
 */
int ibvf_config_print(const struct ibvf_config *cfg, FILE *f);

/**
 * ibvf_parse_ranges() - parse a JSON array of {"start": GUID, "end": GUID}
 * into sorted ranges; rejects start > end, a range that contains 0 or
 * all-ones as a member, and overlaps. *@out is malloc'd.
 */
int ibvf_parse_guid_ranges(const char *file, const char *path, void *json_array,
			   struct ibvf_guid_range **out, size_t *n, char *err, size_t errlen);

/**
 * ibvf_config_vf_driver_create() - the VF driver @cfg->vf names
 * (ibvf_vf_driver_open(): netlink built in, else a lab module from
 * @cfg->vf.module_dir) on @cfg->sysfs_root.
 * Return: ibvf_vf_driver_open()'s.
 */
int ibvf_config_vf_driver_create(const struct ibvf_config *cfg, struct ibvf_vf_driver **out,
				 char *err, size_t errlen);

/**
 * ibvf_config_vf_manager_create() - a VF manager with the driver of
 * ibvf_config_vf_driver_create(), locks under <run_dir>/vf-locks (or
 * @lock_dir when not NULL), @cfg->vf.rebind_timeout_ms.
 * Return: 0, -ENAMETOOLONG, the driver's or the manager's errors.
 */
int ibvf_config_vf_manager_create(const struct ibvf_config *cfg, const char *lock_dir,
				  struct ibvf_vf_manager **out, char *err, size_t errlen);

#endif /* IBVF_CONFIG_H */
