/* SPDX-License-Identifier: MIT */
/*
 * The ibsim lab VF driver (vf_ibsim.c): loaded by ibvfd, ibvfctl and
 * ib-sriov as the VF driver module ibsim.so (vf.driver "ibsim"); tests that
 * drive it directly link it. Never installed.
 */
#ifndef IBVF_LAB_VF_IBSIM_H
#define IBVF_LAB_VF_IBSIM_H

#include <jansson.h>
#include <stddef.h>

#include "json_util.h"
#include "vf_driver.h"

/**
 * ibvf_vf_driver_ibsim_create() - the lab driver; @ibsim_json is the text of
 * the vf.ibsim config object (keys: docs/config.md "vf.ibsim").
 */
int ibvf_vf_driver_ibsim_create(const char *sysfs_root, const char *ibsim_json,
				struct ibvf_vf_driver **out, char *err, size_t errlen);

/**
 * ibvf_vf_ibsim_config_check() - validate a vf.ibsim object (unknown keys,
 * types, node names); @path names it in errors ("vf.ibsim").
 * Return: 0 or -EINVAL with file and key path in the context's buffer.
 */
int ibvf_vf_ibsim_config_check(const struct ibvf_jctx *c, const char *path, json_t *obj);

#endif /* IBVF_LAB_VF_IBSIM_H */
