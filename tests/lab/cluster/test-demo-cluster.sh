#!/bin/bash
# `tools/demo --cluster --no-install` against this build dir (issue 19's
# done-when, on the host run too): a 3-member etcd, OpenSM + ibvf-smd on the
# SM host, three ibvfd nodes with the cluster SM backend on one ibsim
# topology, Pods on all three through ib-sriov, then DEL. The demo checks
# every step itself (partition file with every node's GUID, admin part's
# checksum, each VF's P_Key table by SMP, cluster members applied) and exits
# non-zero naming the failed step; this test passes exactly when it ends with
# "demo finished OK". Root, the fabric lab packages and etcd needed (SKIP
# otherwise, a failure with IBVF_REQUIRE_LABS=1).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
: "${IBVF_BUILD_ROOT:?}"
command -v etcd >/dev/null || lab_skip "etcd not installed (Debian etcd-server; tools/install-deps)"
command -v etcdctl >/dev/null || lab_skip "etcdctl not installed (Debian etcd-client; tools/install-deps)"
for c in ibsim opensm smpquery; do
	command -v $c >/dev/null || lab_skip "$c not installed (fabric lab; tools/install-deps)"
done
[ -x /usr/lib/cni/host-local ] || lab_skip "no /usr/lib/cni/host-local (containernetworking-plugins)"
unshare --net true 2>/dev/null || lab_skip "cannot unshare a network namespace"
out=$("$here/../../../tools/demo" --cluster --no-install --build-dir "$IBVF_BUILD_ROOT" 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
check "tools/demo --cluster exits 0 (exit $rc)" test "$rc" = 0
check "it ends with 'demo finished OK'" grep -q "^demo finished OK in" <<<"$out"
lab_done
