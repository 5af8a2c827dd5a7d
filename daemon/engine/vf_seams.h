/* SPDX-License-Identifier: MIT */
/*
 * Engine seams from a VF driver module: a module whose struct ibvf_vf_module
 * (vf/vf_driver.h) sets engine_seams to a struct ibvf_engine_seams replaces
 * ibvfd's VF seam and port seam as a whole (the lab "fake" driver, which
 * keeps VF state in files and reports ports ACTIVE at once). Only ibvfd uses
 * it; ibvfctl and ib-sriov program VFs through VF drivers only.
 */
#ifndef IBVF_VF_SEAMS_H
#define IBVF_VF_SEAMS_H

#include <stddef.h>

#include "attach.h"

/** Version of struct ibvf_engine_seams; another version is refused. */
#define IBVF_ENGINE_SEAMS_ABI 1

/**
 * struct ibvf_engine_seams - the seams a module supplies.
 * @abi:  IBVF_ENGINE_SEAMS_ABI.
 * @init: fill @vf and @port from the driver's option @dir (vf.fake_dir).
 *        Return 0 or a negative errno with the reason in @err.
 * @fini: free what init() allocated (the seams' ctx).
 */
struct ibvf_engine_seams {
	unsigned int abi;
	int (*init)(const char *dir, struct ibvf_vf_ops *vf, struct ibvf_port_ops *port, char *err,
		    size_t errlen);
	void (*fini)(struct ibvf_vf_ops *vf);
};

#endif /* IBVF_VF_SEAMS_H */
