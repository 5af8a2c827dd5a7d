// SPDX-License-Identifier: MIT
/*
 * The fake lab VF driver as a VF driver module (fake.so; vf_driver.h): it
 * programs no VF, it replaces ibvfd's VF and port seams (vf_seams.h).
 */
#include "vf_fake.h"
#include "vf_driver.h"
#include "vf_seams.h"

static const struct ibvf_engine_seams fake_seams = {
	.abi = IBVF_ENGINE_SEAMS_ABI,
	.init = ibvf_vf_fake_init,
	.fini = ibvf_vf_fake_fini,
};

extern const struct ibvf_vf_module ibvf_vf_module_v1;

const struct ibvf_vf_module ibvf_vf_module_v1 = {
	.abi = IBVF_VF_MODULE_ABI,
	.name = "fake",
	.banner = "TESTS ONLY: VF state lives in files, no VF is programmed",
	.engine_seams = &fake_seams,
};
