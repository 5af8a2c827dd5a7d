// SPDX-License-Identifier: MIT
/*
 * ibvfd - ibvf node daemon. This file holds option parsing and start-up;
 * the event loop and local API live in their own modules.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "err.h"
#include "log.h"

extern char **environ;

static void usage(FILE *f)
{
	fprintf(f, "Usage: ibvfd [OPTIONS]\n\n"
		   "ibvf node daemon: GUID allocation, VF programming, SM membership and port\n"
		   "readiness for InfiniBand SR-IOV VFs handed to Kubernetes Pods.\n\n"
		   "Options:\n"
		   "  -c, --config FILE    config file (default %s)\n"
		   "  -f, --foreground     stay in the foreground, log to stderr\n"
		   "  -p, --print-config   print the effective config (secrets masked) and exit\n"
		   "  -v, --verbose        log level debug\n"
		   "  -V, --version        print the version and exit\n"
		   "  -h, --help           this help\n\n"
		   "Environment overrides (ib-kubernetes compatible): GUID_POOL_RANGE_START,\n"
		   "GUID_POOL_RANGE_END, DAEMON_SM_PLUGIN, DAEMON_PERIODIC_UPDATE, UFM_USERNAME,\n"
		   "UFM_PASSWORD, UFM_ADDRESS, UFM_HTTP_SCHEMA, UFM_PORT, UFM_CERTIFICATE.\n"
		   "See ibvfd(8) and docs/config.md.\n",
		IBVF_DEFAULT_CONFIG);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "print-config", no_argument, NULL, 'p' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *config = NULL;
	bool print = false, verbose = false, foreground = false;
	struct ibvf_config cfg;
	char err[IBVF_ERR_LEN];
	int c, ret;

	while ((c = getopt_long(argc, argv, "c:fpvVh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'f':
			foreground = true;
			break;
		case 'p':
			print = true;
			break;
		case 'v':
			verbose = true;
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
	ibvf_log_init("ibvfd", foreground || print ? IBVF_LOG_STDERR : IBVF_LOG_SYSLOG, LOG_INFO);
	ret = ibvf_config_load(&cfg, config, config != NULL, environ, err, sizeof(err));
	if (ret) {
		log_err("config: %s", err);
		return 2;
	}
	ibvf_log_set_level(verbose ? LOG_DEBUG : cfg.log_level);
	if (strcmp(cfg.vf.driver, "netlink"))	/* vf_driver.h: lab drivers never touch hardware */
		log_warn("*** vf.driver is '%s' (LAB ONLY): VF GUIDs will not reach any hardware ***",
			 cfg.vf.driver);
	if (print) {
		ret = ibvf_config_print(&cfg, stdout);
		ibvf_config_free(&cfg);
		return ret ? 1 : 0;
	}
	log_err("the daemon loop is not built yet (slice 7); only --print-config works");
	ibvf_config_free(&cfg);
	return 1;
}
