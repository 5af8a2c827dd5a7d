// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the daemon config loader (daemon/config/config.c,
 * json_util.c) and the opensm backend's config parser
 * (sm-backends/opensm/sm_opensm.c opensm_cfg_parse()).
 *
 * Input: the text of ibvfd.json (given to the loader as a memfd path) and of
 * an sm.config object. Invariants: a config that loads prints
 * (--print-config) and has sorted, non-overlapping, assignable GUID
 * ranges; a failure says why.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "config.h"
#include "err.h"
#include "sm_opensm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what, const char *err)
{
	if (!cond) {
		fprintf(stderr, "fuzz_config: invariant broken: %s (%s)\n", what, err ? err : "");
		abort();
	}
}

static void check_ranges(const struct ibvf_config *cfg)
{
	for (size_t i = 0; i < cfg->pool.n_ranges; i++) {
		const struct ibvf_guid_range *r = &cfg->pool.ranges[i];

		must(r->start && r->end != IBVF_GUID_ALL_ONES && r->start <= r->end, "bad range",
		     NULL);
		must(!i || cfg->pool.ranges[i - 1].end < r->start, "ranges overlap or unsorted",
		     NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const env[] = {"UFM_PASSWORD=hunter2", "DAEMON_PERIODIC_UPDATE=7", NULL};
	char err[IBVF_ERR_LEN] = "", path[64], *text;
	struct ibvf_config cfg;
	struct opensm_cfg ocfg;
	FILE *devnull;
	int fd, ret;

	if (size > 65536)
		return 0;
	fd = memfd_create("ibvfd.json", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* environ-typed parameter; ibvf_config_load only reads the strings */
	ret = ibvf_config_load(&cfg, path, true, (data[0] & 1) ? (char *const *)env : NULL, err,
			       sizeof(err));
	close(fd);
	if (ret) {
		must(err[0] != 0, "config failure without a message", NULL);
	} else {
		check_ranges(&cfg);
		devnull = fopen("/dev/null", "w");
		if (devnull) {
			must(ibvf_config_print(&cfg, devnull) == 0, "--print-config failed", NULL);
			fclose(devnull);
		}
		ibvf_config_free(&cfg);
	}
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	err[0] = 0;
	if (opensm_cfg_parse(text, &ocfg, err, sizeof(err)) == 0)
		opensm_cfg_free(&ocfg);
	else
		must(err[0] != 0, "sm.config failure without a message", NULL);
	free(text);
	return 0;
}
