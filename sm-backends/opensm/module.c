// SPDX-License-Identifier: MIT
/* The one symbol the opensm module exports (include/ibvf/sm_backend.h). */
#include "sm_opensm.h"

const struct ibvf_sm_ops *ibvf_sm_backend_v1(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v1(void)
{
	return &opensm_ops;
}
