// SPDX-License-Identifier: MIT
/* The VF driver and VF manager a configuration names (config.h). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "err.h"

int ibvf_config_vf_driver_create(const struct ibvf_config *cfg, struct ibvf_vf_driver **out,
				 char *err, size_t errlen)
{
	struct ibvf_vf_driver_params p = {
		.name = cfg->vf.driver,
		.sysfs_root = cfg->sysfs_root,
		.options_json = cfg->vf.ibsim_json,
		.module_dir = cfg->vf.module_dir,
	};

	return ibvf_vf_driver_open(&p, out, err, errlen);
}

int ibvf_config_vf_manager_create(const struct ibvf_config *cfg, const char *lock_dir,
				  struct ibvf_vf_manager **out, char *err, size_t errlen)
{
	struct ibvf_vf_manager_opts o = {
		.sysfs_root = cfg->sysfs_root,
		.rebind_timeout_ms = cfg->vf.rebind_timeout_ms,
	};
	struct ibvf_vf_driver *drv;
	char dir[PATH_MAX];
	int ret;

	if (!lock_dir) {
		if (snprintf(dir, sizeof(dir), "%s/vf-locks", cfg->run_dir) >= (int)sizeof(dir))
			return ibvf_errf(err, errlen, -ENAMETOOLONG, "run_dir too long");
		lock_dir = dir;
	}
	o.lock_dir = lock_dir;
	ret = ibvf_config_vf_driver_create(cfg, &drv, err, errlen);
	if (ret)
		return ret;
	return ibvf_vf_manager_create(&o, drv, out, err, errlen);
}
