// SPDX-License-Identifier: MIT
/*
 * ibvfd - ibvf node daemon: option parsing, start-up and shutdown. The
 * modules are started in the order of the modules[] table and stopped in
 * reverse; one epoll loop (evloop.c) runs everything else. Signals are read
 * from a signalfd, never handled asynchronously:
 *   SIGTERM, SIGINT  stop accepting, let requests in flight finish (at most
 *                    daemon.stop_timeout_s), then roll back what is left at
 *                    its next step; exit 0 (STOPPING=1 to systemd first)
 *   SIGHUP           re-read the config and apply what can change safely
 *                    (docs/operations.md lists what does and what does not)
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/sm_backend.h>

#include "api_server.h"
#include "attach.h"
#include "cluster_pool.h"
#include "config.h"
#include "engine_metrics.h"
#include "err.h"
#include "evloop.h"
#include "guid_pool.h"
#include "http_server.h"
#include "json_util.h"
#include "log.h"
#include "metrics.h"
#include "sd_notify.h"
#include "sm_loader.h"
#include "statedir.h"
#include "attach_port.h"
#include "attach_vf.h"
#include "vf_driver.h"
#include "vf_manager.h"
#include "vf_seams.h"

/* How long ibvfd waits at start-up for an offline ibvfctl to finish with the store. */
#define IBVFD_STORE_LOCK_WAIT_MS 30000

struct daemon {
	const char *config_path;
	char **envp; /* ibvf_config_env_take(): the environment, secrets included */
	bool foreground, verbose;
	struct ibvf_config cfg;
	struct ibvf_loop *loop;
	struct ibvf_pool *pool; /* until the engine takes it */
	int store_lock;		/* statedir.h: held while ibvfd runs, -1 = none */
	struct ibvf_sm smi;	/* sm_loader.h */
	const struct ibvf_sm_ops *sm_ops;
	struct ibvf_sm_backend *sm;
	struct ibvf_vf_manager *vfm;	       /* netlink or a VF driver module */
	const struct ibvf_engine_seams *seams; /* a module's own seams (lab "fake" driver) */
	void *seams_module;		       /* its dlopen() handle */
	struct ibvf_vf_ops vf;
	struct ibvf_port_ops port;
	struct ibvf_engine *eng;
	struct ibvf_api_server *api;
	struct ibvf_timer *periodic, *startup, *stop_timer;
	bool ready_sent, stopping, cancelled;
	int64_t stop_started;
	int exit_code;
	/* cluster mode: the node's heartbeat (cluster_pool.h) */
	struct ibvf_cluster_hb *cluster_hb;
	struct ibvf_http *http;	 /* /metrics, /healthz, /readyz (http.*) */
	struct ibvf_timer *tick; /* the loop's heartbeat for /healthz; HTTP start retries */
	_Atomic int64_t loop_alive_ms;
	int64_t http_tried_ms;
	bool http_failed;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ibvfd [OPTIONS]\n\n"
		"ibvf node daemon: GUID allocation, VF programming, SM membership and port\n"
		"readiness for InfiniBand SR-IOV VFs handed to Kubernetes Pods.\n\n"
		"Options:\n"
		"  -c, --config FILE    config file (default %s)\n"
		"  -f, --foreground     log to stderr instead of syslog (ibvfd never forks)\n"
		"  -p, --print-config   print the effective config (secrets masked) and exit\n"
		"  -v, --verbose        log level debug\n"
		"  -V, --version        print the version and exit\n"
		"  -h, --help           this help\n\n"
		"Signals: SIGTERM/SIGINT stop gracefully, SIGHUP reloads the config.\n"
		"Environment overrides (ib-kubernetes compatible): GUID_POOL_RANGE_START,\n"
		"GUID_POOL_RANGE_END, DAEMON_SM_PLUGIN, DAEMON_PERIODIC_UPDATE, UFM_USERNAME,\n"
		"UFM_PASSWORD, UFM_ADDRESS, UFM_HTTP_SCHEMA, UFM_PORT, UFM_CERTIFICATE;\n"
		"IBVF_HTTP_PORT (the /metrics, /healthz, /readyz endpoint, default 9479).\n"
		"See ibvfd(8), docs/config.md and docs/operations.md.\n",
		IBVF_DEFAULT_CONFIG);
}

/* ----------------------------------------------------------- modules -- */

static int mod_pool(struct daemon *d, char *err, size_t errlen)
{
	struct ibvf_pool_opts o = {
		.state_dir = d->cfg.state_dir,
		.ranges = d->cfg.pool.ranges,
		.n_ranges = d->cfg.pool.n_ranges,
		.quarantine_s = d->cfg.pool.quarantine_s,
		.sync_full = d->cfg.pool.sync_full,
	};
	int ret;

	/* the stores are ours from now on: an offline ibvfctl finishes first (statedir.h) */
	ret = ibvf_state_lock(d->cfg.state_dir, true, true, 0, &d->store_lock, NULL, err, errlen);
	if (ret == -EWOULDBLOCK) {
		log_notice("%s; waiting up to %d s for it", err, IBVFD_STORE_LOCK_WAIT_MS / 1000);
		ret = ibvf_state_lock(d->cfg.state_dir, true, true, IBVFD_STORE_LOCK_WAIT_MS,
				      &d->store_lock, NULL, err, errlen);
	}
	if (ret)
		return ibvf_err_prefix(err, errlen, ret,
				       "another ibvfd or ibvfctl works on state directory %s",
				       d->cfg.state_dir);
	if (d->cfg.pool.cluster.enabled) /* the node's etcd blocks become the ranges */
		return ibvf_cluster_pool_open(&d->cfg, &o, &d->pool, &d->cluster_hb, err, errlen);
	return ibvf_pool_open(&o, &d->pool, err, errlen);
}

static void mod_pool_fini(struct daemon *d)
{
	ibvf_cluster_hb_stop(d->cluster_hb);
	d->cluster_hb = NULL;
	ibvf_pool_close(d->pool);
	d->pool = NULL;
	if (d->store_lock >= 0)
		close(d->store_lock);
	d->store_lock = -1;
}

static int engine_add_range(void *arg, uint64_t first, uint64_t last)
{
	return ibvf_engine_add_range(arg, first, last);
}

static int engine_remove_range(void *arg, uint64_t first, uint64_t last)
{
	return ibvf_engine_remove_range(arg, first, last);
}

static int mod_sm(struct daemon *d, char *err, size_t errlen)
{
	int ret = ibvf_sm_open(d->cfg.sm.module_dir, d->cfg.sm.backend, d->cfg.sm.backend_json,
			       &d->smi, err, errlen);

	if (ret)
		return ret;
	d->sm_ops = d->smi.mod->ops;
	d->sm = d->smi.b;
	log_info("SM backend %s loaded from %s", d->sm_ops->name, d->smi.mod->path);
	return 0;
}

static void mod_sm_fini(struct daemon *d)
{
	if (d->sm_ops)
		ibvf_sm_close(&d->smi);
	d->sm = NULL;
	d->sm_ops = NULL;
}

/* The port seam: wait for ACTIVE + LID + PKeys (port_watch.h). */
static int mod_port(struct daemon *d, char *err, size_t errlen)
{
	int ret = ibvf_attach_port_ops(&d->cfg.port_watch, &d->port, err, errlen);

	if (!ret)
		log_info("port watcher: %s source",
			 d->cfg.port_watch.source ? "fabric (SMP/SA)" : "local (VF RDMA device)");
	return ret;
}

static void mod_port_fini(struct daemon *d)
{
	if (!d->seams)
		ibvf_attach_port_ops_free(&d->port);
}

/* A VF driver module that brings its own engine seams (the lab "fake"
 * driver): 1 when it does and they are set up, 0 when the driver is an
 * ordinary one, or a negative errno. */
static int mod_vf_seams(struct daemon *d, char *err, size_t errlen)
{
	const struct ibvf_vf_module *m;
	const struct ibvf_engine_seams *s;
	void *h;
	int ret;

	if (!strcmp(d->cfg.vf.driver, "netlink"))
		return 0;
	ret = ibvf_vf_module_load(d->cfg.vf.module_dir, d->cfg.vf.driver, &m, &h, err, errlen);
	if (ret)
		return ret;
	s = m->engine_seams;
	if (!s) {
		ibvf_vf_module_unload(h);
		return 0;
	}
	if (s->abi != IBVF_ENGINE_SEAMS_ABI || !s->init || !s->fini) {
		ibvf_vf_module_unload(h);
		return ibvf_errf(err, errlen, -EPROTO,
				 "VF driver module %s: engine seams of ABI "
				 "%u, this ibvfd needs %u",
				 d->cfg.vf.driver, s->abi, IBVF_ENGINE_SEAMS_ABI);
	}
	log_warn("VF driver \"%s\" (tests and benchmarks only): no VF is programmed, VF state "
		 "lives in files under %s",
		 d->cfg.vf.driver, d->cfg.vf.fake_dir ? d->cfg.vf.fake_dir : "(none)");
	ret = s->init(d->cfg.vf.fake_dir, &d->vf, &d->port, err, errlen);
	if (ret) {
		ibvf_vf_module_unload(h);
		return ret;
	}
	d->seams = s;
	d->seams_module = h;
	return 1;
}

static int mod_vf(struct daemon *d, char *err, size_t errlen)
{
	int ret;

	ret = mod_vf_seams(d, err, errlen);
	if (ret)
		return ret < 0 ? ret : 0;
	ret = ibvf_config_vf_manager_create(&d->cfg, NULL, &d->vfm, err, errlen);
	if (ret)
		return ret;
	ret = ibvf_attach_vf_ops(d->vfm, d->cfg.sysfs_root, &d->vf);
	if (ret)
		return ibvf_errf(err, errlen, ret, "out of memory");
	log_info("VF driver %s on %s", d->cfg.vf.driver, d->cfg.sysfs_root);
	return mod_port(d, err, errlen);
}

static void mod_vf_fini(struct daemon *d)
{
	if (d->vf.ctx && d->seams)
		d->seams->fini(&d->vf);
	else if (d->vf.ctx)
		ibvf_attach_vf_ops_free(&d->vf);
	mod_port_fini(d);
	ibvf_vf_manager_destroy(d->vfm);
	d->vfm = NULL;
	ibvf_vf_module_unload(d->seams_module);
	d->seams = NULL;
	d->seams_module = NULL;
}

static int mod_engine(struct daemon *d, char *err, size_t errlen)
{
	struct ibvf_engine_opts o = {
		.loop = d->loop,
		.pool = d->pool,
		.sm_ops = d->sm_ops,
		.sm = d->sm,
		.vf = d->vf,
		.port = d->port,
		.cfg = &d->cfg,
		.seed = (unsigned)time(NULL) ^ (unsigned)getpid(),
	};
	int ret = ibvf_engine_new(&o, &d->eng, err, errlen);

	if (!ret && d->cluster_hb) {
		/* cluster mode: blocks claimed while running, not-ready when out of them */
		ibvf_engine_set_ready_hook(d->eng, "cluster", ibvf_cluster_ready, d->cluster_hb);
		/* requested GUIDs outside the blocks reserved in etcd; conflicts in status */
		ibvf_engine_set_reserve_hook(d->eng, ibvf_cluster_reserve, d->cluster_hb);
		ibvf_engine_set_status_hook(d->eng, "cluster", ibvf_cluster_status, d->cluster_hb);
		ibvf_cluster_hb_attach(d->cluster_hb, d->pool, engine_add_range,
				       engine_remove_range, d->eng);
		/* before the API serves prepare: the GUIDs VFs carry become this node's (or
		 * conflicts); a failure leaves them outside the node's ranges, never handed out */
		if (ibvf_cluster_adopt_vfs(d->cluster_hb, &d->vf, err, errlen))
			log_err("cluster: the GUIDs the VFs carry were not adopted: %s", err);
	}
	if (!ret)
		d->pool = NULL; /* the engine owns it now */
	return ret;
}

static void mod_engine_fini(struct daemon *d)
{
	ibvf_cluster_hb_attach(d->cluster_hb, NULL, NULL, NULL, NULL);
	if (d->eng) {
		ibvf_engine_set_ready_hook(d->eng, NULL, NULL, NULL);
		ibvf_engine_set_reserve_hook(d->eng, NULL, NULL);
		ibvf_engine_set_status_hook(d->eng, NULL, NULL, NULL);
	}
	ibvf_engine_free(d->eng);
	d->eng = NULL;
}

static void dispatch(void *ctx, const char *method, json_t *params, ibvf_reply_fn reply, void *rctx)
{
	struct daemon *d = ctx;

	ibvf_engine_call(d->eng, method, params, reply, rctx);
}

static int mod_api(struct daemon *d, char *err, size_t errlen)
{
	struct ibvf_api_server_opts o = {
		.loop = d->loop,
		.socket_path = d->cfg.api.socket,
		.allowed_uids = d->cfg.api.allowed_uids,
		.n_allowed_uids = d->cfg.api.n_allowed_uids,
		.dispatch = dispatch,
		.dispatch_ctx = d,
		.idle_timeout_ms = d->cfg.api.idle_timeout_s * 1000,
		.line_timeout_ms = d->cfg.api.line_timeout_s * 1000,
	};
	int ret = ibvf_api_server_new(&o, &d->api, err, errlen);

	if (!ret)
		log_info("API listening on %s", d->cfg.api.socket);
	return ret;
}

static void mod_api_fini(struct daemon *d)
{
	ibvf_api_server_free(d->api);
	d->api = NULL;
}

/*
 * /healthz: the event loop turned within the last 10 s (its 1 s tick). A
 * loop stuck in a step is what a restart can cure; a daemon that is up but
 * not ready (SM down, store failed) is /readyz's business, not liveness.
 */
#define IBVFD_LIVENESS_MS 10000
/* An HTTP endpoint that could not bind is tried again this often. */
#define IBVFD_HTTP_RETRY_MS 2000

static bool healthz(void *arg, char *why, size_t len)
{
	struct daemon *d = arg;
	int64_t age = ibvf_mono_ms() - d->loop_alive_ms;

	if (age <= IBVFD_LIVENESS_MS)
		return true;
	snprintf(why, len, "the event loop has not run for %lld ms", (long long)age);
	return false;
}

/* /readyz: exactly the API status's "ready" (the same readiness computation). */
static bool readyz(void *arg, char *why, size_t len)
{
	struct daemon *d = arg;

	return ibvf_engine_readiness(d->eng, why, len);
}

/* Try to start the HTTP endpoint; the first failure is logged as an error, retries quietly. */
static void http_try_start(struct daemon *d)
{
	struct ibvf_http_opts o = {
		.address = d->cfg.http.address,
		.port = d->cfg.http.port,
		.metrics = ibvf_metrics_default(),
		.healthz = healthz,
		.readyz = readyz,
		.probe_arg = d,
	};
	char err[IBVF_ERR_LEN];

	if (ibvf_http_start(&o, &d->http, err, sizeof(err))) {
		if (!d->http_failed)
			log_err("%s; attaches go on without metrics and probes, retrying every %d s",
				err, IBVFD_HTTP_RETRY_MS / 1000);
		d->http_failed = true;
		return;
	}
	if (d->http_failed)
		log_notice("HTTP endpoint started after all");
	d->http_failed = false;
	log_info("HTTP endpoint on %s port %u: /metrics /healthz /readyz", d->cfg.http.address,
		 ibvf_http_port(d->http));
}

/* 1 s: the loop's heartbeat for /healthz; an endpoint that could not bind is retried. */
static void tick(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct daemon *d = arg;

	(void)l;
	(void)t;
	d->loop_alive_ms = ibvf_mono_ms();
	if (!d->http && ibvf_mono_ms() - d->http_tried_ms >= IBVFD_HTTP_RETRY_MS) {
		d->http_tried_ms = ibvf_mono_ms();
		http_try_start(d);
	}
}

/*
 * The HTTP endpoint, started last. A port that cannot be bound (another
 * exporter on it, say) does not stop ibvfd: observability must not take the
 * data path down. It is logged and retried; the probes fail meanwhile, so a
 * kubelet still notices.
 */
static int mod_http(struct daemon *d, char *err, size_t errlen)
{
	static const char *const info[] = {"version", "sm_backend", "vf_driver", NULL};
	struct ibvf_metrics *r = ibvf_metrics_default();

	ibvf_metric_set(
		ibvf_metric_register(r, IBVF_METRIC_GAUGE, "ibvf_build_info",
				     "Always 1: the version of ibvfd, its SM backend and VF "
				     "driver.",
				     info, NULL, 0, 1),
		(const char *[]){IBVF_VERSION, d->sm_ops->name, d->cfg.vf.driver}, 1);
	eng_metrics_attach_engine(d->eng);
	if (!d->cfg.http.enabled) {
		log_info("HTTP endpoint off (http.enabled false)");
		return 0;
	}
	d->loop_alive_ms = ibvf_mono_ms();
	d->tick = ibvf_loop_timer(d->loop, 1000, 1000, tick, d);
	if (!d->tick)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	d->http_tried_ms = ibvf_mono_ms();
	http_try_start(d);
	return 0;
}

static void mod_http_fini(struct daemon *d)
{
	ibvf_http_stop(d->http); /* no probe or scrape runs after this */
	d->http = NULL;
	eng_metrics_attach_engine(NULL);
	ibvf_timer_free(d->tick);
	d->tick = NULL;
}

static const struct module {
	const char *name;
	int (*init)(struct daemon *d, char *err, size_t errlen);
	void (*fini)(struct daemon *d);
} modules[] = {
	{"pool", mod_pool, mod_pool_fini}, {"sm", mod_sm, mod_sm_fini},
	{"vf", mod_vf, mod_vf_fini},	   {"engine", mod_engine, mod_engine_fini},
	{"api", mod_api, mod_api_fini},	   {"http", mod_http, mod_http_fini},
};

/* ------------------------------------------------------------ events -- */

static void periodic(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct daemon *d = arg;

	(void)l;
	(void)t;
	if (!d->stopping)
		ibvf_engine_reconcile_async(d->eng);
}

/* Until the start-up reconciliation is done: then READY=1. */
static void startup_poll(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct daemon *d = arg;
	char st[256];

	(void)l;
	if (d->ready_sent || !ibvf_engine_reconciled(d->eng))
		return;
	ibvf_timer_set(t, 0, 0);
	d->ready_sent = true;
	snprintf(st, sizeof(st), "READY=1\nSTATUS=%s\nMAINPID=%d",
		 ibvf_engine_ready(d->eng) ? "ready" : "running; SM backend not validated yet",
		 (int)getpid());
	ibvf_sd_notify(st);
	log_notice("ibvfd %s ready (SM backend %s: %s)", IBVF_VERSION, d->sm_ops->name,
		   ibvf_engine_ready(d->eng) ? "validated" : "NOT validated, retrying");
}

static void stop_poll(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct daemon *d = arg;
	int64_t waited = ibvf_mono_ms() - d->stop_started;
	size_t n = ibvf_engine_inflight(d->eng);

	(void)t;
	if (!n) {
		ibvf_loop_quit(l);
		return;
	}
	if (!d->cancelled && waited >= (int64_t)d->cfg.daemon.stop_timeout_s * 1000) {
		log_warn("%zu request(s) still running after %u s: rolling them back", n,
			 d->cfg.daemon.stop_timeout_s);
		d->cancelled = true;
		ibvf_engine_cancel(d->eng);
	}
	if (waited >= (int64_t)d->cfg.daemon.stop_timeout_s * 1000 + 15000) {
		log_err("%zu request(s) still running; exiting: start-up reconciliation of the "
			"next start finishes them",
			n);
		/*
		 * Worker threads are still inside those requests: tearing the
		 * modules down under them would be unsafe. Every step is in the
		 * store already, so leave without cleanup, like a crash would.
		 */
		_exit(0);
	}
}

static void begin_stop(struct daemon *d, int signo)
{
	if (d->stopping) {
		log_notice("signal %d: already stopping", signo);
		return;
	}
	d->stopping = true;
	d->stop_started = ibvf_mono_ms();
	ibvf_sd_notify("STOPPING=1");
	log_notice("signal %d: stopping (%zu request(s) in flight)", signo,
		   ibvf_engine_inflight(d->eng));
	ibvf_api_server_stop_accepting(d->api);
	ibvf_engine_stop(d->eng);
	d->stop_timer = ibvf_loop_timer(d->loop, 1, 50, stop_poll, d);
	if (!d->stop_timer)
		ibvf_loop_quit(d->loop);
}

static void reload(struct daemon *d)
{
	struct ibvf_config n;
	char err[IBVF_ERR_LEN];
	const char *restart = NULL;

	ibvf_sd_notify("RELOADING=1");
	if (ibvf_config_load(&n, d->config_path, d->config_path != NULL, d->envp, err,
			     sizeof(err))) {
		log_err("SIGHUP: config not reloaded: %s", err);
		ibvf_sd_notify("READY=1");
		return;
	}
	if (strcmp(n.state_dir, d->cfg.state_dir))
		restart = "state_dir";
	else if (strcmp(n.api.socket, d->cfg.api.socket))
		restart = "api.socket";
	else if (strcmp(n.sm.backend, d->cfg.sm.backend) ||
		 strcmp(n.sm.backend_json ? n.sm.backend_json : "",
			d->cfg.sm.backend_json ? d->cfg.sm.backend_json : ""))
		restart = "sm.backend / sm.config";
	else if (strcmp(n.vf.driver, d->cfg.vf.driver))
		restart = "vf.driver";
	else if (n.pool.cluster.enabled != d->cfg.pool.cluster.enabled)
		restart = "pool.cluster";
	else if ((!d->cfg.pool.cluster.enabled && /* cluster: the ranges are its blocks */
		  (n.pool.n_ranges != d->cfg.pool.n_ranges ||
		   memcmp(n.pool.ranges, d->cfg.pool.ranges,
			  n.pool.n_ranges * sizeof(*n.pool.ranges)))) ||
		 n.pool.quarantine_s != d->cfg.pool.quarantine_s)
		restart = "pool";
	else if (n.daemon.workers != d->cfg.daemon.workers)
		restart = "daemon.workers";
	else if (n.http.enabled != d->cfg.http.enabled || n.http.port != d->cfg.http.port ||
		 strcmp(n.http.address, d->cfg.http.address))
		restart = "http";
	if (restart)
		log_warn("SIGHUP: %s changed: it takes effect only after a restart", restart);
	if (!d->verbose)
		ibvf_log_set_level(n.log_level);
	ibvf_log_set_json(n.log_json);
	ibvf_engine_reload(d->eng, &n);
	ibvf_api_server_set_uids(d->api, n.api.allowed_uids, n.api.n_allowed_uids);
	ibvf_api_server_set_timeouts(d->api, n.api.idle_timeout_s * 1000,
				     n.api.line_timeout_s * 1000);
	if (n.sm.periodic_update_s != d->cfg.sm.periodic_update_s)
		ibvf_timer_set(d->periodic, (uint64_t)n.sm.periodic_update_s * 1000,
			       (uint64_t)n.sm.periodic_update_s * 1000);
	/* keep the values that need a restart as they are running */
	d->cfg.log_level = n.log_level;
	d->cfg.log_json = n.log_json;
	d->cfg.allow_default_pkey = n.allow_default_pkey;
	d->cfg.sm.batch_window_ms = n.sm.batch_window_ms;
	d->cfg.sm.batch_max = n.sm.batch_max;
	d->cfg.sm.periodic_update_s = n.sm.periodic_update_s;
	memcpy(d->cfg.api.allowed_uids, n.api.allowed_uids, sizeof(n.api.allowed_uids));
	d->cfg.api.n_allowed_uids = n.api.n_allowed_uids;
	d->cfg.api.idle_timeout_s = n.api.idle_timeout_s;
	d->cfg.api.line_timeout_s = n.api.line_timeout_s;
	d->cfg.daemon.prepare_timeout_s = n.daemon.prepare_timeout_s;
	d->cfg.daemon.port_timeout_s = n.daemon.port_timeout_s;
	d->cfg.daemon.stop_timeout_s = n.daemon.stop_timeout_s;
	d->cfg.daemon.reconcile = n.daemon.reconcile;
	d->cfg.daemon.parked_guid = n.daemon.parked_guid;
	ibvf_config_free(&n);
	log_notice("SIGHUP: configuration reloaded");
	ibvf_sd_notify("READY=1");
}

static void on_signal(struct ibvf_loop *l, int signo, void *arg)
{
	struct daemon *d = arg;

	(void)l;
	if (signo == SIGHUP)
		reload(d);
	else
		begin_stop(d, signo);
}

/* -------------------------------------------------------------- main -- */

static int run(struct daemon *d)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	char err[IBVF_ERR_LEN];
	size_t started = 0;
	int ret;

	signal(SIGPIPE, SIG_IGN);
	ret = ibvf_loop_new(&d->loop, err, sizeof(err));
	/* block the signals before any thread starts: they all inherit the mask */
	if (!ret)
		ret = ibvf_loop_signals(d->loop, sigs, 3, on_signal, d);
	if (ret) {
		ibvf_log_fatal("event loop: %s", err);
		ibvf_loop_free(d->loop);
		return 1;
	}
	for (; started < sizeof(modules) / sizeof(modules[0]); started++) {
		err[0] = 0;
		ret = modules[started].init(d, err, sizeof(err));
		if (ret) {
			ibvf_log_fatal("start-up: %s: %s", modules[started].name,
				       err[0] ? err : strerror(-ret));
			d->exit_code = 1;
			goto out;
		}
		log_debug("start-up: %s ready", modules[started].name);
	}
	d->periodic = ibvf_loop_timer(d->loop, (uint64_t)d->cfg.sm.periodic_update_s * 1000,
				      (uint64_t)d->cfg.sm.periodic_update_s * 1000, periodic, d);
	d->startup = ibvf_loop_timer(d->loop, 1, 20, startup_poll, d);
	if (!d->periodic || !d->startup) {
		ibvf_log_fatal("start-up: timers: %s", strerror(errno));
		d->exit_code = 1;
		goto out;
	}
	/* SM validation + reconciliation of what a previous run left, on a worker */
	ibvf_engine_reconcile_async(d->eng);
	ret = ibvf_loop_run(d->loop);
	if (ret) {
		log_err("event loop: %s", strerror(-ret));
		d->exit_code = 1;
	}
out:
	ibvf_timer_free(d->stop_timer);
	ibvf_timer_free(d->startup);
	ibvf_timer_free(d->periodic);
	while (started-- > 0)
		modules[started].fini(d);
	ibvf_loop_free(d->loop);
	log_notice("ibvfd stopped");
	return d->exit_code;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"foreground", no_argument, NULL, 'f'},
		{"print-config", no_argument, NULL, 'p'},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct daemon d = {0};
	bool print = false;
	char err[IBVF_ERR_LEN];
	int c, ret;

	d.store_lock = -1;
	while ((c = getopt_long(argc, argv, "c:fpvVh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			d.config_path = optarg;
			break;
		case 'f':
			d.foreground = true;
			break;
		case 'p':
			print = true;
			break;
		case 'v':
			d.verbose = true;
			break;
		case 'V':
			printf("ibvfd %s\n", IBVF_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ibvfd: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	ibvf_log_init("ibvfd", d.foreground || print ? IBVF_LOG_STDERR : IBVF_LOG_SYSLOG, LOG_INFO);
	/*
	 * Secrets (issue 14): no core dump and no ptrace by other users
	 * (this also makes /proc/PID/ root's); freed JSON wiped; the secret
	 * environment variables taken out of /proc/PID/environ before any
	 * thread or child exists, kept in one private copy for reloads.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		log_warn("prctl(PR_SET_DUMPABLE, 0): %s", strerror(errno));
	ibvf_json_wipe_on_free();
	d.envp = ibvf_config_env_take(environ);
	if (!d.envp) {
		ibvf_log_fatal("out of memory copying the environment");
		return 2;
	}
	ret = ibvf_config_load(&d.cfg, d.config_path, d.config_path != NULL, d.envp, err,
			       sizeof(err));
	if (ret) {
		ibvf_log_fatal("config: %s", err);
		ibvf_config_env_free(d.envp);
		return 2;
	}
	ibvf_log_set_level(d.verbose ? LOG_DEBUG : d.cfg.log_level);
	ibvf_log_set_json(d.cfg.log_json);
	if (strcmp(d.cfg.vf.driver, "netlink")) /* vf_driver.h: lab drivers never touch hardware */
		log_warn(
			"*** vf.driver is '%s' (LAB ONLY): VF GUIDs will not reach any hardware ***",
			d.cfg.vf.driver);
	if (print) {
		ret = ibvf_config_print(&d.cfg, stdout);
		ibvf_config_free(&d.cfg);
		ibvf_config_env_free(d.envp);
		return ret ? 1 : 0;
	}
	ret = run(&d);
	ibvf_config_free(&d.cfg);
	ibvf_config_env_free(d.envp);
	return ret;
}
