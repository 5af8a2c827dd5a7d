// SPDX-License-Identifier: MIT
/* The ibsim lab VF driver as a VF driver module (ibsim.so; vf_driver.h). */
#include "vf_ibsim.h"

extern const struct ibvf_vf_module ibvf_vf_module_v1;

const struct ibvf_vf_module ibvf_vf_module_v1 = {
	.abi = IBVF_VF_MODULE_ABI,
	.name = "ibsim",
	.banner = "LAB ONLY: VF GUIDs go to an ibsim simulated fabric and a fake sysfs tree, "
		  "never to hardware",
	.config_check = ibvf_vf_ibsim_config_check,
	.create = ibvf_vf_driver_ibsim_create,
};
