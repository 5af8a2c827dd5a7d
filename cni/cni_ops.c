// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: the production tables behind the commands' seams (cni_ops.h). */
#include "cni_ops.h"

#include "cni_rdma.h"
#include "rc_check.h"

const struct cni_ibvfd_ops cni_ibvfd_real = {
	.prepare = cni_daemon_prepare,
	.commit = cni_daemon_commit,
	.release = cni_daemon_release,
	.release_at = cni_daemon_release_at,
	.owner = cni_daemon_owner,
	.gc = cni_daemon_gc,
	.status = cni_daemon_status,
	.release_sm_send = cni_daemon_release_sm_send,
	.release_sm_recv = cni_daemon_release_sm_recv,
	.commit_send = cni_daemon_commit_send,
	.commit_recv = cni_daemon_commit_recv,
};

const struct cni_host_ops cni_host_real = {
	.ns_open = cni_ns_open,
	.ns_close = cni_ns_close,
	.link_get = cni_link_get,
	.netdev_to_pod = cni_netdev_to_pod,
	.netdev_to_host = cni_netdev_to_host,
	.rdma_netns_exclusive = cni_rdma_netns_exclusive,
	.rdma_dev_move = cni_rdma_dev_move,
	.rdma_dev_visible = cni_rdma_dev_visible,
	.vf_lookup = cni_vf_lookup,
	.vf_netdev = cni_vf_netdev,
	.vf_rdma_dev = cni_vf_rdma_dev,
	.vf_port_check = cni_vf_port_check,
	.vf_compat_apply = cni_vf_compat_apply,
	.vf_guid = cni_vf_guid,
	.vf_restore = cni_vf_restore,
	.ipam_exec = cni_ipam_exec,
	.ipam_max_version = cni_ipam_max_version,
	.ipam_apply = cni_ipam_apply,
	.ipam_check = cni_ipam_check,
	.rc_check = ibvf_rc_check,
};

const struct cni_ibvfd_ops *cni_ibvfd = &cni_ibvfd_real;
const struct cni_host_ops *cni_host = &cni_host_real;
