#!/bin/bash
# ibvfctl vf list / set-guid end to end on a fake sysfs tree (built by
# ibvf-fakesysfs) with the ibsim VF driver talking to a stand-in console FIFO
# (a reader that records the commands). No lab and no root needed.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
: "${IBVFCTL:?}" "${IBVF_FAKESYSFS:?}"
D=$(mktemp -d /tmp/ibvf-ctl-vf.XXXXXX)
reader=
cleanup() {
	[ -n "$reader" ] && kill "$reader" 2>/dev/null && wait "$reader" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT
S=$D/sys
mkdir -p "$S" "$D/state" "$D/run" && chmod 700 "$D/state" "$D/run"
"$IBVF_FAKESYSFS" "$S" add-pf --pci 0000:03:00.0 --netdev ib0 --ifindex 4 --rdma mlx5_0 \
	--vfs 4 >/dev/null || { echo "ibvf-fakesysfs failed" >&2; exit 1; }
mkfifo "$D/console"
start_reader() { cat 0<>"$D/console" >>"$D/got" & reader=$!; }
start_reader
cat >"$D/ibvfd.json" <<EOF
{ "state_dir": "$D/state", "run_dir": "$D/run", "sysfs_root": "$S",
  "pool": { "ranges": [ { "start": "02:00:00:00:00:00:10:00", "end": "02:00:00:00:00:00:10:ff" } ] },
  "vf": { "driver": "ibsim", "rebind_timeout_ms": 2000,
          "ibsim": { "console": "$D/console", "node_prefix": "vf", "relink_delay_ms": 0 } } }
EOF
C=("$IBVFCTL" -c "$D/ibvfd.json")
G1=02:00:00:00:00:00:10:01

out=$("${C[@]}" vf list 2>"$D/err"); rc=$?
check "vf list exits 0" test "$rc" = 0
check "vf list shows 4 VFs" test "$(grep -c '^ib0 ' <<<"$out")" = 4
check "VF 0 row: PCI, netdev, RDMA device, zero GUIDs, link auto, free, no owner" \
	grep -qE '^ib0 +0 +0000:03:00.2 +ib0v0 +mlx5_2 +00:00:00:00:00:00:00:00 +00:00:00:00:00:00:00:00 +auto +free +-$' <<<"$out"
check "the ibsim driver is announced loudly on stderr" grep -q "LAB ONLY" "$D/err"
json=$("${C[@]}" --json vf list 2>/dev/null)
check "--json gives the same rows" python3 -c '
import json,sys; r=json.load(sys.stdin)
assert len(r)==4 and r[2]["pci"]=="0000:03:00.4" and r[2]["vf"]==2 and r[2]["owner"]=="-"
assert r[2]["port_guid"]=="00:00:00:00:00:00:00:00" and r[2]["link_state"]=="auto" and r[2]["driver"]=="mlx5_core"
' <<<"$json"
check "--pf by RDMA device" test "$("${C[@]}" vf list --pf mlx5_0 2>/dev/null | grep -c '^ib0 ')" = 4
check_fail "--pf of an unknown PF is a usage error" "no InfiniBand SR-IOV PF 'ib7'" "${C[@]}" vf list --pf ib7
"${C[@]}" vf list --pf ib7 >/dev/null 2>&1; check "... exit 2" test $? = 2

out=$("${C[@]}" vf set-guid 0000:03:00.3 $G1 2>"$D/err"); rc=$?
check "set-guid exits 0 ($(tr '\n' ' ' <"$D/err"))" test "$rc" = 0
check "set-guid reports the new netdev name" grep -qE '^Netdev: +ib0v1r1$' <<<"$out"
check "set-guid reports port GUID $G1" grep -qE "^Port GUID: +$G1\$" <<<"$out"
check "ibsim got Guid X-1, Unlink, ReLink" grep -qzF $'Guid "vf1" 0x0200000000001000\nUnlink "vf1"[1]\nReLink "vf1"[1]\n' "$D/got"
out=$("${C[@]}" vf list 2>/dev/null)
check "vf list shows VF 1's GUID and new netdev" \
	grep -qE "^ib0 +1 +0000:03:00.3 +ib0v1r1 +mlx5_3 +$G1 +$G1 +auto" <<<"$out"

for bad in "0000:03:00.3 00:00:00:00:00:00:00:00" "0000:03:00.3 0" "0000:03:00.3 ff:ff:ff:ff:ff:ff:ff:ff" "0000:03:00.3 xyz" \
	"0000:03:00.0 $G1" "03:00.3 $G1" "0000:03:09.0 $G1" "0000:03:00.3"; do
	# shellcheck disable=SC2086
	"${C[@]}" vf set-guid $bad >/dev/null 2>"$D/err"; rc=$?
	check "set-guid $bad: usage error ($(head -c 100 "$D/err"))" test "$rc" = 2
done
check_fail "set-guid on the PF says so" "is an SR-IOV PF, not a VF" "${C[@]}" vf set-guid 0000:03:00.0 $G1
check_fail "bad link state" "not a VF link state" "${C[@]}" vf set-guid --link-state up 0000:03:00.3 $G1

# owner column and the duplicate-GUID guard come from the GUID pool store
"${C[@]}" pool allocate --owner c0ffee1234567890abcdef --pod ns1/pod-a --guid $G1 >/dev/null 2>&1
check "owner of VF 1 from the pool store" \
	grep -qE "^ib0 +1 .* ns1/pod-a$" <<<"$("${C[@]}" vf list 2>/dev/null)"
check_fail "a GUID held by another owner is refused" "held by ns1/pod-a" \
	"${C[@]}" vf set-guid 0000:03:00.4 $G1
"${C[@]}" vf set-guid 0000:03:00.4 $G1 >/dev/null 2>&1; check "... exit 2" test $? = 2
out=$("${C[@]}" vf set-guid --force 0000:03:00.4 $G1 2>/dev/null)
check "--force programs it anyway" test $? = 0
check "... and shows who holds that GUID" grep -qE '^Owner: +ns1/pod-a$' <<<"$out"

: >"$D/got"
"${C[@]}" vf set-guid --link-state disable 0000:03:00.5 02:00:00:00:00:00:10:05 >/dev/null 2>&1
check "link state disable: port down, not relinked on rebind" \
	grep -qzF $'Guid "vf3" 0x0200000000001004\nUnlink "vf3"[1]\nUnlink "vf3"[1]\n' "$D/got"
check "vf list shows link disable" \
	grep -qE '^ib0 +3 .* +disable +free +-$' <<<"$("${C[@]}" vf list 2>/dev/null)"
# a warm VF's record (vf.warm, engine/warm_vf.c): no owner, state warming until port_ready
# (ibvfctl refuses the reserved owner, so a stand-in owner is renamed in the store)
"${C[@]}" pool allocate --owner ibvf-warm-0000-03-00.5 --ifname warm \
	--guid 02:00:00:00:00:00:10:05 >/dev/null 2>&1
check "pool allocate refuses the reserved warm owner: exit 2" test $? = 2
"${C[@]}" pool allocate --owner warm-stand-in --ifname warm \
	--guid 02:00:00:00:00:00:10:05 >/dev/null 2>&1
python3 -c '
import sqlite3,sys
db=sqlite3.connect(sys.argv[1])
n=db.execute("UPDATE alloc SET container_id=? WHERE container_id=?",
             ("ibvf-warm-0000-03-00.5","warm-stand-in")).rowcount
db.commit(); assert n==1, n' "$D/state/pool.db"
check "stand-in record renamed to the warm owner" test $? = 0
check "vf list shows a warm VF's record as warming, no owner" \
	grep -qE '^ib0 +3 .* +disable +warming +-$' <<<"$("${C[@]}" vf list 2>/dev/null)"
check "vf list --json: state of VF 3" python3 -c '
import json,sys
r=json.load(sys.stdin)
assert r[3]["state"]=="warming" and r[3]["owner"]=="-" and r[0]["state"]=="free", r' \
	<<<"$("${C[@]}" --json vf list 2>/dev/null)"

# ibsim gone: the port GUID step fails, the node GUID is rolled back, exit 3
kill "$reader"; wait "$reader" 2>/dev/null; reader=
out=$("${C[@]}" vf set-guid 0000:03:00.2 02:00:00:00:00:00:10:07 2>&1); rc=$?
check "console without ibsim: exit 3" test "$rc" = 3
check "... names the cause and the rollback" \
	grep -q "no ibsim reads its console.*rolled back: node GUID 00:00:00:00:00:00:00:00" <<<"$out"
check "... VF 0 keeps its old GUIDs" \
	grep -qE '^ib0 +0 +0000:03:00.2 +ib0v0 +mlx5_2 +00:00:00:00:00:00:00:00 +00:00:00:00:00:00:00:00 ' \
	<<<"$("${C[@]}" vf list 2>/dev/null)"
lab_done
