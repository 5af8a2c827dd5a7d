// SPDX-License-Identifier: MIT
/*
 * ibvf-smd - the SM agent of cluster mode (issue 19, ibvf-smd(8),
 * docs/cluster.md): options, config (the ibvfd.json format: pool.cluster,
 * sm, smd, log_level), signals, sd_notify, and the loop of agent passes with
 * backoff after a failure.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "cluster_pool.h"
#include "config.h"
#include "err.h"
#include "json_util.h"
#include "log.h"
#include "sd_notify.h"
#include "sm_loader.h"
#include "smd_agent.h"
#include "smd_http.h"

#define SMD_DEFAULT_CONFIG "/etc/ibvf/ibvf-smd.json"
#define SMD_WAIT_MS	   500 /* longest wait of one step: the stop latency */
#define SMD_BACKOFF_MIN_MS 100
#define SMD_BACKOFF_MAX_MS 5000

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ibvf-smd [OPTIONS]\n\n"
		"ibvf SM agent: applies the PKey memberships every node of the cluster wrote to\n"
		"etcd through one SM backend (opensm on each SM host, or ufm with one elected\n"
		"leader), and reports the applied revision back.\n\n"
		"Options:\n"
		"  -c, --config FILE    config file (default %s; the ibvfd.json format:\n"
		"                       pool.cluster, pool.ranges, sm, smd, log_level)\n"
		"  -f, --foreground     log to stderr instead of syslog (ibvf-smd never forks)\n"
		"  -p, --print-config   print the effective config (secrets masked) and exit\n"
		"  -v, --verbose        log level debug\n"
		"  -V, --version        print the version and exit\n"
		"  -h, --help           this help\n\n"
		"Signals: SIGTERM/SIGINT stop (the lease is revoked: a standby takes over at\n"
		"once). See ibvf-smd(8) and docs/cluster.md.\n",
		SMD_DEFAULT_CONFIG);
}

static void sleep_ms(uint32_t ms)
{
	while (ms && !stop_sig) {
		uint32_t s = ms > 100 ? 100 : ms;

		nanosleep(&(struct timespec){0, (long)s * 1000000L}, NULL);
		ms -= s;
	}
}

static int run(struct ibvf_config *cfg)
{
	struct etcd_client *etcd = NULL, *etcd_ka = NULL;
	struct cluster_range *ranges = NULL;
	struct smd_agent *a = NULL;
	struct smd_http *http = NULL;
	struct ibvf_sm sm = {0};
	char err[IBVF_ERR_LEN] = "", last[IBVF_ERR_LEN] = "", desc[256] = "";
	uint32_t backoff = SMD_BACKOFF_MIN_MS;
	bool ready = false;
	int ret;

	ret = ibvf_cluster_etcd_new(&cfg->pool.cluster, &etcd, err, sizeof(err));
	if (!ret)
		ret = ibvf_cluster_etcd_new(&cfg->pool.cluster, &etcd_ka, err, sizeof(err));
	if (ret) {
		ibvf_log_fatal("etcd: %s", err);
		goto out;
	}
	if (cfg->http.enabled &&
	    smd_http_new(cfg->http.address, cfg->http.port, cfg->sm.backend, &http)) {
		ret = -ENOMEM;
		ibvf_log_fatal("out of memory");
		goto out;
	}
	ret = ibvf_sm_open(cfg->sm.module_dir, cfg->sm.backend, cfg->sm.backend_json, &sm, err,
			   sizeof(err));
	if (ret) {
		ibvf_log_fatal("SM backend: %s", err);
		goto out;
	}
	ret = sm.mod->ops->validate(sm.b, desc, sizeof(desc), err, sizeof(err));
	if (ret)
		log_warn("SM backend %s not valid yet (passes retry): %s", cfg->sm.backend, err);
	else
		log_notice("SM backend %s: %s", cfg->sm.backend, desc);
	ranges = calloc(cfg->pool.n_ranges + 1, sizeof(*ranges));
	if (!ranges) {
		ret = -ENOMEM;
		ibvf_log_fatal("out of memory");
		goto out;
	}
	for (size_t i = 0; i < cfg->pool.n_ranges; i++)
		ranges[i] =
			(struct cluster_range){cfg->pool.ranges[i].start, cfg->pool.ranges[i].end};
	{
		struct smd_agent_opts o = {
			.etcd = etcd,
			.etcd_ka = etcd_ka,
			.prefix = cfg->pool.cluster.prefix,
			.id = cfg->smd.id,
			.group = cfg->smd.group,
			.election = cfg->smd.election,
			.lease_ttl_s = cfg->smd.lease_ttl_s,
			.reconcile_s = cfg->smd.reconcile_s,
			.batch_max = cfg->smd.batch_max,
			.ranges = ranges,
			.n_ranges = cfg->pool.n_ranges,
			.ops = sm.mod->ops,
			.b = sm.b,
		};

		ret = smd_agent_new(&o, &a, err, sizeof(err));
	}
	if (ret) {
		ibvf_log_fatal("SM agent: %s", err);
		goto out;
	}
	if (!cfg->pool.n_ranges)
		log_warn("pool.ranges is empty: memberships nobody desires are only reported, "
			 "never removed");
	while (!stop_sig && (ret = smd_agent_start(a, err, sizeof(err)))) {
		struct smd_agent_stats st0;

		smd_agent_get_stats(a, &st0);
		smd_http_tick(http, &st0, ret, false);
		log_err("%s; retrying in %u ms", err, backoff);
		sleep_ms(backoff);
		backoff = backoff * 2 > SMD_BACKOFF_MAX_MS ? SMD_BACKOFF_MAX_MS : backoff * 2;
	}
	backoff = SMD_BACKOFF_MIN_MS;
	while (!stop_sig) {
		struct smd_agent_stats st;

		err[0] = 0;
		ret = smd_agent_step(a, SMD_WAIT_MS, err, sizeof(err));
		smd_agent_get_stats(a, &st);
		smd_http_tick(http, &st, ret, true);
		if (!ready) {
			ibvf_sd_notify("READY=1");
			ready = true;
		}
		if (ret) {
			if (strcmp(err, last))
				log_err("pass failed (retrying with backoff): %s", err);
			snprintf(last, sizeof(last), "%s", err);
			sleep_ms(backoff);
			backoff =
				backoff * 2 > SMD_BACKOFF_MAX_MS ? SMD_BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		if (last[0])
			log_notice("passes succeed again (applied revision %lld)",
				   st.applied_revision);
		last[0] = 0;
		backoff = SMD_BACKOFF_MIN_MS;
	}
	ret = 0;
	ibvf_sd_notify("STOPPING=1");
	log_notice("stopping on signal %d", (int)stop_sig);
out:
	smd_http_free(http);
	smd_agent_free(a);
	if (sm.mod)
		ibvf_sm_close(&sm);
	etcd_client_free(etcd_ka);
	etcd_client_free(etcd);
	free(ranges);
	return ret ? 1 : 0;
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
	struct sigaction sa = {.sa_handler = on_stop};
	const char *path = NULL;
	bool fg = false, print = false, verbose = false;
	struct ibvf_config cfg = {0};
	char err[IBVF_ERR_LEN];
	char **envp;
	int c, ret;

	while ((c = getopt_long(argc, argv, "c:fpvVh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 'f':
			fg = true;
			break;
		case 'p':
			print = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'V':
			printf("ibvf-smd %s\n", IBVF_VERSION);
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
		fprintf(stderr, "ibvf-smd: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	ibvf_log_init("ibvf-smd", fg || print ? IBVF_LOG_STDERR : IBVF_LOG_SYSLOG, LOG_INFO);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		log_warn("prctl(PR_SET_DUMPABLE, 0): %s", strerror(errno));
	ibvf_json_wipe_on_free();
	envp = ibvf_config_env_take(environ);
	if (!envp) {
		ibvf_log_fatal("out of memory copying the environment");
		return 2;
	}
	ret = ibvf_config_load(&cfg, path ? path : SMD_DEFAULT_CONFIG, true, envp, err,
			       sizeof(err));
	if (!ret && !cfg.pool.cluster.enabled)
		ret = ibvf_errf(err, sizeof(err), -EINVAL,
				"%s: pool.cluster: missing (the agent reads the desired "
				"memberships from that etcd)",
				cfg.path ? cfg.path : SMD_DEFAULT_CONFIG);
	if (!ret && !strcmp(cfg.sm.backend, "cluster"))
		ret = ibvf_errf(err, sizeof(err), -EINVAL,
				"%s: sm.backend: the agent calls the SM itself: opensm or ufm, "
				"not cluster",
				cfg.path);
	if (ret) {
		ibvf_log_fatal("config: %s", err);
		if (cfg.path || cfg.state_dir)
			ibvf_config_free(&cfg);
		ibvf_config_env_free(envp);
		return 2;
	}
	ibvf_log_set_level(verbose ? LOG_DEBUG : cfg.log_level);
	/* the agent's own default port, so that it can share a host with ibvfd */
	if (!cfg.http.port_set)
		cfg.http.port = IBVF_SMD_HTTP_DEFAULT_PORT;
	if (print) {
		ret = ibvf_config_print(&cfg, stdout);
		ibvf_config_free(&cfg);
		ibvf_config_env_free(envp);
		return ret ? 1 : 0;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN); /* config changes need a restart (ibvf-smd(8)) */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	log_notice("ibvf-smd %s: agent %s, group %s, %s backend, etcd prefix %s", IBVF_VERSION,
		   cfg.smd.id, cfg.smd.group, cfg.sm.backend, cfg.pool.cluster.prefix);
	ret = run(&cfg);
	ibvf_config_free(&cfg);
	ibvf_config_env_free(envp);
	return ret;
}
