// SPDX-License-Identifier: MIT
/* The one symbol the ufm module exports (include/ibvf/sm_backend.h). */
#include "sm_ufm.h"

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void)
{
	return &ufm_ops;
}
