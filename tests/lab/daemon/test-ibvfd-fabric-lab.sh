#!/bin/bash
# ibvfd end to end on the simulated fabric: the real ibvfd (under umad2sim, as
# node pf0) with the ibsim VF driver on a fake-sysfs PF whose VFs are zero-GUID
# HCA nodes vf0/vf1, the opensm SM backend editing the real OpenSM's partition
# file, and the port watcher's fabric source. 'ibvfctl daemon prepare' must
# give vf0 a GUID, make OpenSM put it in PKey 0x0012 (visible in vf0's P_Key
# table via SMP) and report the port ACTIVE with the P_Key index; 'release'
# must undo all of it (partition file, P_Key table, VF back to GUID 0).
# Runs in a private network namespace; root and the fabric lab packages needed.
#
# The opensm backend's own SMP verification is off here ("verify": "off"): under
# umad2sim a second libibmad port opened in the same process (the port watcher
# already has one) gets no SMP replies (seen: "no SMP reply (NodeInfo of the
# local port)", "LID 0 and SM LID 8192"), which real umad devices do not do.
# The daemon's own port wait checks the same thing: the P_Key in the VF port's
# table, read by SMP.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
: "${IBVFD:?}" "${IBVFCTL:?}" "${IBVF_FAKESYSFS:?}" "${IBVF_SM_MODULE_DIR:?}"
if [ -z "${IBVF_IN_PRIVATE_NETNS:-}" ]; then
	IBVF_IN_PRIVATE_NETNS=1 exec unshare --net "$0" "$@"
	lab_skip "cannot unshare a network namespace"
fi
[ -f "$IBVF_SM_MODULE_DIR/opensm/opensm.so" ] || lab_skip "opensm SM backend module not built"
FL=$here/../fabric/fabric-lab.sh
D=$(mktemp -d /tmp/ibvfd-fabric.XXXXXX)
DPID=
cleanup() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && sleep 1 && kill -KILL "$DPID" 2>/dev/null
	"$FL" down "$D/lab" >/dev/null 2>&1
	[ -n "${NS:-}" ] && ip netns del "$NS" 2>/dev/null
	"$IBVF_FAKESYSFS" "$D/sys" veth-down >/dev/null 2>&1
	[ -n "${IBVF_KEEP_LAB:-}" ] && echo "lab kept in $D" >&2 || rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D/lab" "$D/state" "$D/run" && chmod 700 "$D/state" "$D/run"
"$FL" up "$D/lab" --vfs 2 --hosts 1 --zero-vfs
rc=$?
[ $rc = 77 ] && lab_skip "fabric lab packages missing (tools/install-deps)"
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab/lab.env"
ok "fabric lab up with zero-GUID VFs vf0, vf1"
V=id$(printf '%05x' $(($$ % 0xfffff)))
"$IBVF_FAKESYSFS" "$D/sys" add-pf --pci 0000:03:00.0 --vfs 2 --veth "$V" >/dev/null ||
	{ echo "fake sysfs PF with veth VFs failed" >&2; exit 1; }
cat >"$D/ibvfd.json" <<JSON
{ "state_dir": "$D/state", "run_dir": "$D/run", "sysfs_root": "$D/sys", "log_level": "debug",
  "pool": { "ranges": [ { "start": "02:00:00:00:00:07:00:01", "end": "02:00:00:00:00:07:00:ff" } ],
            "quarantine_s": 60 },
  "sm": { "backend": "opensm", "module_dir": "$IBVF_SM_MODULE_DIR/opensm", "periodic_update_s": 2,
          "config": { "partition_file": "$PARTITIONS_FILE", "pid_file": "$OPENSM_PIDFILE",
                      "verify": "off" } },
  "vf": { "driver": "ibsim", "rebind_timeout_ms": 3000, "warm": ${IBVF_LAB_WARM:-false},
          "ibsim": { "console": "$IBSIM_CONSOLE", "output": "$IBSIM_OUT", "node_prefix": "vf",
                     "real_netdevs": true, "relink_delay_ms": 100 } },
  "port_watch": { "source": "fabric", "poll_min_ms": 5, "poll_max_ms": 100 },
  "api": { "socket": "$D/run/ibvfd.sock" },
  "daemon": { "prepare_timeout_s": 60, "port_timeout_s": 30 } }
JSON
C=("$IBVFCTL" -c "$D/ibvfd.json")
# the daemon runs as node pf0 of the fabric (its umad clients: SA, SMPs)
FABRIC_LAB_TIMEOUT=300 "$FL" run "$D/lab" pf0 "$IBVFD" -f -c "$D/ibvfd.json" >"$D/ibvfd.log" 2>&1 &
DPID=$!
ready() { "${C[@]}" --json daemon status 2>/dev/null | grep -q '"ready": true'; }
check "ibvfd starts and is ready (SM backend validated, reconciled)" wait_for 30 ready
state() { "$FL" run "$D/lab" "$1" ibstat 2>/dev/null | sed -n 's/^[[:space:]]*State: //p' | head -1; }
not_active() { [ -n "$(state "$1")" ] && [ "$(state "$1")" != Active ]; }
active() { [ "$(state "$1")" = Active ]; }
if [ "${IBVF_LAB_WARM:-false}" = true ]; then
	# vf.warm (issue 17 item 3): the free VFs get a pool GUID, rebind, ACTIVE before any Pod
	warm2() { "${C[@]}" --json daemon status 2>/dev/null | grep -qE '"ready": 2,'; }
	check "warm: both VFs warm (status)" wait_for 30 warm2
	check "warm: vf0 is Active before the attach" active vf0
	WG=$("${C[@]}" --json vf list 2>/dev/null | python3 -c '
import json,sys; print([r["port_guid"] for r in json.load(sys.stdin) if r["pci"]=="0000:03:00.2"][0])')
	check "warm: vf list shows vf0 warm with a pool GUID ($WG)" \
		grep -qE "^${V}pf +0 +0000:03:00.2 .*02:00:00:00:00:07:00:.. +auto +warm +-$" \
		<<<"$("${C[@]}" vf list 2>/dev/null)"
else
	check "zero-GUID vf0 is not Active before the attach" not_active vf0
fi

out=$("${C[@]}" daemon prepare --owner lab-c1 --pod lab/pod1 --pci 0000:03:00.2 --pkey 0x0012 2>"$D/err")
rc=$?
check "daemon prepare exits 0 ($(tr '\n' ' ' <"$D/err"))" test "$rc" = 0
G=$(sed -nE 's/^GUID: +//p' <<<"$out")
GH=0x$(tr -d : <<<"$G")
check "a GUID of the pool was allocated ($G)" grep -q "^02:00:00:00:00:07:00:" <<<"$G"
if [ "${IBVF_LAB_WARM:-false}" = true ]; then
	check "warm: the ADD took vf0's warm GUID" test "$G" = "$WG"
	check "warm: no GUID set, no rebind on the ADD (ibvfd log)" \
		grep -q "warm GUID $G taken by container lab-c1.*no rebind" "$D/ibvfd.log"
fi
check "prepare reports the port ACTIVE" grep -qE "^Port: +ACTIVE" <<<"$out"
check "prepare reports PKey 0x0012 full with its P_Key index" \
	grep -qE "^PKeys \(index\): +0x0012 full \([0-9]+\)" <<<"$out"
check "prepare reports the new netdev found by PCI address" grep -qE "^Netdev: +${V}v0r1" <<<"$out"
check "the partition file lists $G in 0x0012" grep -qi "$(tr -d : <<<"$G")\|$GH" "$PARTITIONS_FILE"
pkeys() { "$FL" run "$D/lab" pf0 smpquery -G pkeys "$GH" 2>/dev/null; }
has_pkey() { pkeys | grep -q "0x8012"; }
check "vf0's P_Key table (SMP) holds 0x8012" wait_for 10 has_pkey
check "daemon list shows it port_ready" grep -q "port_ready" <<<"$("${C[@]}" daemon list 2>/dev/null)"
# as the CNI plugin does: the netdev moves into the Pod's netns before the
# commit and back before the release (a handed VF whose netdev is in the host
# netns is a Pod that is gone: reconciliation releases it)
NS=ibvf-fl-$V
ip netns add "$NS" && ip link set dev "${V}v0r1" netns "$NS" ||
	{ echo "moving ${V}v0r1 into netns $NS failed" >&2; exit 1; }
"${C[@]}" daemon commit --owner lab-c1 >/dev/null 2>&1
check "commit: handed" grep -q "handed" <<<"$("${C[@]}" daemon list 2>/dev/null)"
out=$("${C[@]}" pool audit 2>&1)
check "pool audit through the daemon is clean" grep -q "audit clean" <<<"$out"
grep -q "audit clean" <<<"$out" || sed "s/^/# /" <<<"$out"
ip -n "$NS" link set dev "${V}v0r1" netns $$ ||
	{ echo "moving ${V}v0r1 back from netns $NS failed" >&2; exit 1; }

out=$("${C[@]}" daemon release --owner lab-c1 2>&1); rc=$?
check "daemon release exits 0" test "$rc" = 0
[ "$rc" = 0 ] || sed "s/^/# /" <<<"$out"
check "the partition file no longer lists $G" bash -c "! grep -qi '$(tr -d : <<<"$G")' '$PARTITIONS_FILE'"
if [ "${IBVF_LAB_WARM:-false}" = true ]; then
	newg() {
		"${C[@]}" vf list 2>/dev/null |
			grep -E "^${V}pf +0 +0000:03:00.2 .* +warm +-$" | grep -qv "$G"
	}
	check "warm: after the DEL vf0 gets a NEW warm GUID (not $G)" wait_for 20 newg
	check "warm: ... and is Active again" wait_for 20 active vf0
else
	check "vf0 is back to port GUID 0: not Active" wait_for 10 not_active vf0
	check "ibsim says vf0's node GUID is all-ones (port GUID 0)" \
		grep -q 'nodeguid ffffffffffffffff' <<<"$("$FL" ibsim "$D/lab" 'Dump "vf0"')"
fi
check "the GUID is in quarantine" grep -q '"quarantined": 1' <<<"$("${C[@]}" --json daemon status 2>/dev/null)"
check "release again: nothing held, still exit 0" "${C[@]}" daemon release --owner lab-c1

kill -TERM "$DPID"; wait "$DPID"; rc=$?
DPID=
check "SIGTERM: ibvfd exits 0 ($rc)" test "$rc" = 0
out=$("${C[@]}" pool audit 2>&1); rc=$?
check "pool audit without the daemon checks store, VFs and SM from ibvfctl (rc $rc)" \
	bash -c '[ "$0" = 0 ] && grep -q "checked store, VFs and SM" <<<"$1"' "$rc" "$out"
"$FL" down "$D/lab"
left=$(ps -eo pid,args | grep -F "$D" | grep -vE "grep|test-ibvfd-fabric" | wc -l)
check "teardown leaves no lab process ($left left)" test "$left" = 0
lab_done
