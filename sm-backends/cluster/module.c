// SPDX-License-Identifier: MIT
/* The one symbol the cluster module exports (include/ibvf/sm_backend.h). */
#include "sm_cluster.h"

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void)
{
	return &cluster_ops;
}
