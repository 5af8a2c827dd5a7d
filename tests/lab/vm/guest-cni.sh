#!/bin/bash
# SPDX-License-Identifier: MIT
#
# guest-cni.sh - the ib-sriov plugin with a real RDMA device, run as root
# INSIDE the VM lab (tests/lab/vm/vmlab.sh): soft-RoCE rxe0 on lo stands in
# for the VF's RDMA device, a veth for its netdev (test_cni_rdma.py).
# $1 = run directory; $1/env sets IB_SRIOV, FAKESYSFS and TESTDIR.
set -u
. "$1/env"
: "${IB_SRIOV:?}" "${FAKESYSFS:?}" "${TESTDIR:?}"
ip link set lo up
modprobe -a ib_uverbs rdma_rxe veth || { echo "not ok 1 - modprobe ib_uverbs rdma_rxe veth"; exit 1; }
rdma link add rxe0 type rxe netdev lo || { echo "not ok 1 - rdma link add rxe0"; exit 1; }
mkdir -p /run/netns
exec timeout 400 python3 "$TESTDIR/test_cni_rdma.py" "$IB_SRIOV" "$FAKESYSFS" rxe0
