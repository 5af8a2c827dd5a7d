// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: CDI (Container Device Interface) in containerd. Device
 * plugins that hand out devices by CDI name (the RDMA shared device plugin
 * and NVIDIA's GPU plugin can) need enable_cdi in containerd's CRI plugin:
 * off by default in containerd 1.7 (config version 2, plugin
 * "io.containerd.grpc.v1.cri"), on by default in 2.x (version 3, plugin
 * "io.containerd.cri.v1.runtime"). Specs live in /etc/cdi and /var/run/cdi.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor_int.h"
#include "toml_scan.h"

#define SRC_CDI                                                                                    \
	"CDI specification (github.com/cncf-tags/container-device-interface); containerd "         \
	"docs/cri/config.md (enable_cdi)"

struct cdi_conf {
	int version;
	int enable; /* -1 not set, 0, 1 */
};

static int cdi_cb(void *arg, const char *table, const char *key, const char *value)
{
	struct cdi_conf *c = arg;

	if (!table[0] && !strcmp(key, "version"))
		c->version = atoi(value);
	if (!strcmp(key, "enable_cdi") && (!strcmp(table, "plugins.io.containerd.grpc.v1.cri") ||
					   !strcmp(table, "plugins.io.containerd.cri.v1.runtime")))
		c->enable = !strcmp(value, "true");
	return 0;
}

static int count_specs(struct dr *d, char *where, size_t len)
{
	static const char *const dirs[] = {"/etc/cdi", "/var/run/cdi"};
	char path[DR_PATH];
	size_t n = 0;
	int count = 0;

	where[0] = '\0';
	for (size_t i = 0; i < 2; i++) {
		struct dirent *e;
		int here = 0;
		DIR *dir;

		dr_path(d, path, "%s", dirs[i]);
		dir = opendir(path);
		while (dir && (e = readdir(dir)))
			here += strstr(e->d_name, ".json") || strstr(e->d_name, ".yaml");
		if (dir)
			closedir(dir);
		if (here)
			n += (size_t)snprintf(where + n, n < len ? len - n : 0, "%s%d in %s",
					      n ? ", " : "", here, dirs[i]);
		count += here;
	}
	return count;
}

void dr_check_cdi(struct dr *d)
{
	struct cdi_conf c = {.version = 1, .enable = -1};
	char *toml = dr_read_alloc(d, "/etc/containerd/config.toml"), where[256];
	int specs = count_specs(d, where, sizeof(where));
	bool on;

	if (!toml) {
		dr_add(d, "containerd.cdi", IBVF_DOCTOR_NA, NULL, SRC_CDI,
		       "no /etc/containerd/config.toml");
		return;
	}
	dr_toml_each(toml, cdi_cb, &c);
	free(toml);
	on = c.enable == 1 || (c.enable == -1 && c.version >= 3);
	if (!specs)
		dr_add(d, "containerd.cdi", IBVF_DOCTOR_NA, NULL, SRC_CDI,
		       "no CDI spec in /etc/cdi or /var/run/cdi (enable_cdi %s)",
		       on ? "on" : "off");
	else if (on)
		dr_add(d, "containerd.cdi", IBVF_DOCTOR_OK, NULL, SRC_CDI,
		       "enable_cdi on (config version %d); CDI specs: %s", c.version, where);
	else
		dr_add(d, "containerd.cdi", IBVF_DOCTOR_FAIL,
		       "set enable_cdi = true under [plugins.\"io.containerd.grpc.v1.cri\"] in "
		       "/etc/containerd/config.toml and restart containerd",
		       SRC_CDI,
		       "CDI specs (%s) but enable_cdi is off (config version %d%s): devices "
		       "requested by CDI name never reach the container",
		       where, c.version, c.enable == -1 ? ", key not set" : "");
}
