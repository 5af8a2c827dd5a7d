#!/bin/bash
# The ibsim VF driver against the real simulated fabric (ibsim + OpenSM 3.3.23):
# a fake-sysfs PF whose 2 VFs are HCA nodes vf0/vf1 of the fabric, created
# with port GUID 0 (as SR-IOV does) and real veth netdevs. 'ibvfctl vf
# set-guid' gives vf0 GUID X: OpenSM assigns a LID and the port goes ACTIVE.
# A failed attach (fault injected after the rebind) rolls back: vf1 returns to
# GUID 0 (port not ACTIVE, ERR 0D17 path) and vf0 back to X.
# Runs in a private network namespace (ibsim's abstract sockets and the veths
# live and die with it). Root and the fabric lab's Debian packages needed.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
: "${IBVFCTL:?}" "${IBVF_FAKESYSFS:?}" "${VF_LAB_TOOL:?}"
if [ -z "${IBVF_IN_PRIVATE_NETNS:-}" ]; then
	IBVF_IN_PRIVATE_NETNS=1 exec unshare --net "$0" "$@"
	lab_skip "cannot unshare a network namespace"
fi
FL=$here/../fabric/fabric-lab.sh
D=$(mktemp -d /tmp/ibvf-vf-lab.XXXXXX)
trap '"$FL" down "$D/lab" >/dev/null 2>&1; "$IBVF_FAKESYSFS" "$D/sys" veth-down; rm -rf "$D"' EXIT
mkdir -p "$D/lab" "$D/state" "$D/run" && chmod 700 "$D/state" "$D/run"
"$FL" up "$D/lab" --vfs 2 --hosts 1 --zero-vfs
rc=$?
[ $rc = 77 ] && lab_skip "fabric lab packages missing (tools/install-deps)"
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab/lab.env"
ok "fabric lab up with zero-GUID VFs vf0, vf1"
V=iv$(printf '%05x' $(($$ % 0xfffff)))
"$IBVF_FAKESYSFS" "$D/sys" add-pf --pci 0000:03:00.0 --vfs 2 --veth "$V" >/dev/null ||
	{ echo "fake sysfs PF with veth VFs failed" >&2; exit 1; }
cat >"$D/ibvfd.json" <<EOF
{ "state_dir": "$D/state", "run_dir": "$D/run", "sysfs_root": "$D/sys",
  "vf": { "driver": "ibsim", "rebind_timeout_ms": 1500,
          "ibsim": { "console": "$IBSIM_CONSOLE", "output": "$IBSIM_OUT", "node_prefix": "vf",
                     "real_netdevs": true, "relink_delay_ms": 100 } } }
EOF
C=("$IBVFCTL" -c "$D/ibvfd.json")
state() { "$FL" run "$D/lab" "$1" ibstat 2>/dev/null | sed -n 's/^[[:space:]]*State: //p' | head -1; }
active() { [ "$(state "$1")" = Active ]; }
not_active() { [ -n "$(state "$1")" ] && [ "$(state "$1")" != Active ]; }
lid_of() { "$FL" run "$D/lab" pf0 ibaddr -G "$1" 2>/dev/null | sed -nE 's/.*LID start (0x[0-9a-f]+).*/\1/p'; }
has_lid() { [ -n "$(lid_of "$1")" ]; }
no_lid() { [ -z "$(lid_of "$1")" ]; }
X=0x0200000000010001 XC=02:00:00:00:00:01:00:01
Y=0x0200000000020001 YC=02:00:00:00:00:02:00:01
Z=0x0200000000030001 ZC=02:00:00:00:00:03:00:01

check "OpenSM refuses the zero port GUID (ERR 0D17)" grep -q "ERR 0D17: Got Zero Port GUID" "$OPENSM_LOG"
check "zero-GUID vf0 is not Active" not_active vf0
check "vf list shows vf0 with port GUID 0" \
	grep -qE "^${V}pf +0 +0000:03:00.2 +${V}v0 +mlx5_2 +00:00:00:00:00:00:00:00 +00:00:00:00:00:00:00:00 " \
	<<<"$("${C[@]}" vf list 2>/dev/null)"

out=$("${C[@]}" vf set-guid 0000:03:00.2 $XC 2>"$D/err"); rc=$?
check "vf set-guid vf0 $XC exits 0 ($(grep -v 'LAB ONLY' "$D/err" | tr '\n' ' '))" test "$rc" = 0
check "the VF's real netdev came back under a new name" grep -qE "^Netdev: +${V}v0r1$" <<<"$out"
check "... and exists in the kernel as ${V}v0r1" ip link show "${V}v0r1"
check "vf0 goes Active" wait_for 10 active vf0
check "the SA resolves port GUID $X to a LID ($(lid_of $X))" wait_for 10 has_lid $X

out=$("$VF_LAB_TOOL" "$D/ibvfd.json" program 0000:03:00.3 $YC --fail-rdma-once 2>"$D/err"); rc=$?
check "attach of zero-GUID vf1 with a fault after rebind fails (exit $rc)" test "$rc" = 3
check "... the error names the timeout and the rollback" \
	grep -q "timed out after 1500 ms.*rolled back: port GUID 00:00:00:00:00:00:00:00, node GUID 00:00:00:00:00:00:00:00, rebound" <<<"$out"
check "... $Y never stays on the fabric" wait_for 10 no_lid $Y
check "... vf1 is back to port GUID 0, not Active" not_active vf1
check "... ibsim says vf1's node GUID is all-ones again" \
	grep -q 'nodeguid ffffffffffffffff' <<<"$("$FL" ibsim "$D/lab" 'Dump "vf1"')"

out=$("$VF_LAB_TOOL" "$D/ibvfd.json" program 0000:03:00.2 $ZC --fail-rdma-once 2>"$D/err"); rc=$?
check "re-attach of vf0 as $ZC with a fault fails (exit $rc)" test "$rc" = 3
check "... rolled back to $XC" grep -q "rolled back: port GUID $XC, node GUID $XC, rebound" <<<"$out"
check "... $X has a LID again" wait_for 10 has_lid $X
check "... $Z is not on the fabric" no_lid $Z
check "... vf0 is Active" wait_for 10 active vf0
check "vf list shows vf0 with $XC after three rebinds" \
	grep -qE "^${V}pf +0 +0000:03:00.2 +${V}v0r3 +mlx5_2 +$XC +$XC +auto" <<<"$("${C[@]}" vf list 2>/dev/null)"

out=$("$VF_LAB_TOOL" "$D/ibvfd.json" reset 0000:03:00.2 2>&1); rc=$?
check "reset of vf0 to GUID 0 exits 0" test "$rc" = 0
check "... $X leaves the fabric" wait_for 10 no_lid $X
check "... vf0 is not Active" wait_for 10 not_active vf0
"$FL" down "$D/lab"
left=$(ps -eo pid,args | grep -F "$D" | grep -vE "grep|test-vf-ibsim-lab" | wc -l)
check "teardown leaves no lab process ($left left)" test "$left" = 0
lab_done
