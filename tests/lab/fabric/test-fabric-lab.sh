#!/bin/bash
# The fabric lab itself: zero-GUID VFs stay INIT with OpenSM's ERR 0D17; a VF
# given GUID X (ibsim console Guid + Unlink/ReLink, what the ibsim VF driver
# does) gets a LID and goes ACTIVE; partitions reach P_Key tables; the
# daemons 'up' starts do not hold a lock its caller took (flock(1)); teardown
# leaves no process behind.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
FL=$here/fabric-lab.sh
D=$(mktemp -d /tmp/ibvf-fabric-test.XXXXXX)
trap '"$FL" down "$D"; rm -rf "$D"' EXIT

printf 'Default=0x7fff, ipoib : ALL=full ;\nadmin=0x0a01 : 0x0002c90300010101=full ;\n' > "$D/p.conf"
# under a lock of its own (not the shared lab lock: a run under that lock
# would wait for itself), as 'flock /tmp/ibvf-lab.lock fabric-lab.sh up' takes it
flock "$D/lock" "$FL" up "$D" --vfs 2 --hosts 1 --zero-vfs --partitions "$D/p.conf"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab.env"
ok "ibsim + OpenSM up, SUBNET UP"
holders() { for p in $(cat "$D/ibsim.pid" "$D/opensm.pid"); do ls -l /proc/$p/fd 2>/dev/null; done | grep -c " $D/lock\$"; }
check "the lock 'up' ran under is free once it returned, ibsim and OpenSM up ($(holders) lab daemon fds on it)" \
	flock -n "$D/lock" true
check "zero-GUID VF logged by OpenSM (ERR 0D17)" grep -q "ERR 0D17: Got Zero Port GUID" "$OPENSM_LOG"
state() { "$FL" run "$D" "$1" ibstat 2>/dev/null | sed -n 's/^[[:space:]]*State: //p' | head -1; }
check "zero-GUID VF port is not Active" test "$(state vf0)" != Active

"$FL" ibsim "$D" 'Guid "vf0" 0x0200000000000000' >/dev/null
"$FL" ibsim "$D" 'Unlink "vf0"[1]' >/dev/null
"$FL" ibsim "$D" 'ReLink "vf0"[1]' >/dev/null
active() { [ "$(state vf0)" = Active ]; }
check "VF with GUID 02:..:01 goes Active after relink" wait_for 10 active
lid=$("$FL" run "$D" pf0 ibaddr -G 0x0200000000000001 2>/dev/null | sed -nE 's/.*LID start (0x[0-9a-f]+).*/\1/p')
check "SA resolves the new port GUID to a LID ($lid)" test -n "$lid"
pk=$("$FL" run "$D" pf0 smpquery pkeys -G "$GUID_h1" 2>/dev/null | tr -s ' .' ' ')
check "admin partition 0x0a01 programmed on h1 as full member" grep -q "0x8a01" <<<"$pk"
"$FL" down "$D"
left=$(ps -eo pid,args | grep -F "$D" | grep -vE "grep|test-fabric-lab" | wc -l)
check "teardown leaves no lab process ($left left)" test "$left" = 0
lab_done
