#!/bin/bash
# SPDX-License-Identifier: MIT
#
# guest-demo.sh - `tools/demo --vm` INSIDE the VM lab (tests/lab/vm/vmlab.sh):
# two soft-RoCE devices stand in for the RDMA devices of VFs 0 and 1 -- rxe0
# on lo and rxe1 on a veth -- then the demo runs unchanged (its fake VFs'
# RDMA devices are named rxe0, rxe1, ..., so the CNI's RC check opens them).
# $1 = run directory; $1/env sets IBVF_DEMO_TOP and the demo's IBVF_DEMO_*.
set -u
. "$1/env"
: "${IBVF_DEMO_TOP:?}"
fail() { echo "guest-demo: $*" >&2; exit 1; }
# devtmpfs has no /dev/fd; bash's process substitution needs it
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
ip link set lo up
modprobe -a ib_uverbs rdma_rxe veth || fail "modprobe ib_uverbs rdma_rxe veth"
rdma link add rxe0 type rxe netdev lo || fail "rdma link add rxe0 (netdev lo)"
ip link add idemorxe type veth peer name idemorxep &&
	ip addr add 10.77.0.1/24 dev idemorxe &&
	ip link set idemorxep up && ip link set idemorxe up || fail "veth for rxe1"
rdma link add rxe1 type rxe netdev idemorxe || fail "rdma link add rxe1 (netdev idemorxe)"
mkdir -p /run/netns
rdma link show | sed 's/^/guest-demo: /'
exec /bin/bash "$IBVF_DEMO_TOP/tools/demo"
