#!/bin/bash
# The opensm SM backend against the real OpenSM 3.3.23 on the simulated
# fabric. The backend module is loaded by ibvfd's loader (sm_lab_client) and
# runs under umad2sim on pf0, so its SMP verification is real; every P_Key
# is also checked independently with smpquery (infiniband-diags):
#   - a GUID added as full member shows 0x8xxx, as limited 0x0xxx; removed: gone;
#   - the admin's own partitions keep their P_Keys throughout;
#   - a PKey the admin defines is refused unless admin_pkeys opts in to it;
#     then it is merged, with the opt-in's membership (the admin's defmember
#     by default: limited, seen as 0x0xxx in the port), a GUID the admin
#     lists is refused;
#   - a base file that does not parse is refused and OpenSM's state is untouched;
#   - a symlinked partitions.conf stays a link, its target gets the changes;
#   - OpenSM not running, or a pid file naming another process: refused;
#   - 1,000 members in one PKey (timed; printed).
# usage: test-sm-opensm.sh SM_LAB_CLIENT MODULE_DIR
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
FL=$here/fabric-lab.sh
CLIENT=$(realpath "${1:?usage: $0 SM_LAB_CLIENT MODULE_DIR}")
MODDIR=$(realpath "${2:?usage: $0 SM_LAB_CLIENT MODULE_DIR}")
D=$(mktemp -d /tmp/ibvf-smopensm-lab.XXXXXX)
trap '"$FL" down "$D"; rm -rf "$D"' EXIT

# the admin's file: Default, and a storage partition with h1 full, h2 limited
printf '# admin partitions of the lab fabric\nDefault=0x7fff, ipoib : ALL=full ;\n' > "$D/p.conf"
printf 'storage=0x0a01, ipoib : 0x0002c90300010101=full, 0x0002c90300010201=limited ;\n' \
	>> "$D/p.conf"
printf 'scratch=0x0a03, defmember=limited : SELF=full ;\nbackup=0x0a04, defmember=limited : SELF ;\n' \
	>> "$D/p.conf"
"$FL" up "$D" --vfs 2 --hosts 2 --partitions "$D/p.conf"
rc=$?
[ $rc = 77 ] && lab_skip "fabric lab packages missing"
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab.env"
[ "$GUID_h1" = 0x0002c90300010101 ] && [ "$GUID_h2" = 0x0002c90300010201 ] ||
	{ echo "unexpected lab GUIDs" >&2; exit 1; }

cat > "$D/sm.json" <<EOF2
{ "partition_file": "$PARTITIONS_FILE", "pid_file": "$OPENSM_PIDFILE",
  "reload_timeout_ms": 10000, "verify": "fabric",
  "admin_pkeys": { "0x0a01": "request", "0x0a03": "defmember", "0x0a04": "full" } }
EOF2
sed '/admin_pkeys/d; s/"fabric",$/"fabric" }/' "$D/sm.json" > "$D/sm-plain.json"
sm() {	# sm ARGS...: the backend on pf0 (SMPs leave from pf0's port)
	"$FL" run "$D" pf0 "$CLIENT" "$MODDIR" opensm "@$D/sm.json" "$@"
}
sm_plain() {	# the same without admin_pkeys
	"$FL" run "$D" pf0 "$CLIENT" "$MODDIR" opensm "@$D/sm-plain.json" "$@"
}
pkeys() {	# pkeys GUID: the port's P_Key table as smpquery sees it
	"$FL" run "$D" pf0 smpquery pkeys -G "$1" 2>/dev/null | sed -n 's/^ *[0-9]*: //p' | tr '\n' ' '
}
has() { [[ " $(pkeys "$1") " == *" $2 "* ]]; }	# has GUID P_KEY
hasnt() { ! has "$@"; }
admin_intact() {
	has "$GUID_h1" 0x8a01 && has "$GUID_h2" 0x0a01 && hasnt "$GUID_h2" 0x8a01 &&
		has "$GUID_vf0" 0xffff
}
timed() {	# the "in N ms" of the last OK line
	sed -n 's/^OK .* in \([0-9.]*\) ms$/\1/p' <<<"$1" | tail -1
}

check "admin partitions in effect before ibvf: h1 0x8a01, h2 0x0a01" admin_intact
out=$(sm validate 2>&1)
check "validate: $out" grep -q "OK validate: OpenSM pid .* verification SMPs from" <<<"$out"

out=$(sm add 0x0a10 "$GUID_vf0=full" 2>&1)
check "add vf0 to 0x0a10 as full member ($out)" grep -q "^OK add 1 members" <<<"$out"
echo "# lab time add_members -> P_Key confirmed by SMP: $(timed "$out") ms"
check "vf0's P_Key table holds 0x8a10" has "$GUID_vf0" 0x8a10
out=$(sm add 0x0a10 "$GUID_vf1=limited" 2>&1)
check "add vf1 to 0x0a10 as limited member ($out)" grep -q "^OK add 1 members" <<<"$out"
check "vf1's P_Key table holds 0x0a10, not 0x8a10" \
	eval 'has "$GUID_vf1" 0x0a10 && hasnt "$GUID_vf1" 0x8a10'
check "admin partitions still in effect" admin_intact
check "the admin's text is unchanged at the top of the file" \
	cmp -s "$D/p.conf" <(head -c "$(stat -c %s "$D/p.conf")" "$PARTITIONS_FILE")
check "the previous file is kept as the backup" test -s "$PARTITIONS_FILE.ibvf-prev"

out=$(sm list 2>&1)
check "list shows ibvf's members" grep -q "0x0a10 00:02:c9:03:00:10:00:01 full managed" <<<"$out"
check "list shows the admin's members read-only" \
	grep -q "0x0a01 00:02:c9:03:00:01:02:01 limited admin" <<<"$out"

check_fail "without admin_pkeys the admin's PKey 0x0a01 is refused, naming the partition" \
	"PKey 0x0a01 is the administrator's partition 'storage' \\(line 3" \
	sm_plain add 0x0a01 "$GUID_vf0=full"
check "vf0 holds no 0x0a01 then" eval 'hasnt "$GUID_vf0" 0x8a01 && hasnt "$GUID_vf0" 0x0a01'
out=$(sm add 0x0a01 "$GUID_vf0=full" 2>&1)
check "add vf0 to the admin's PKey 0x0a01 (opted in): merged ($out)" grep -q "^OK add" <<<"$out"
check "vf0 holds 0x8a01" has "$GUID_vf0" 0x8a01
check "ibvf's definition of 0x0a01 carries no partition flags" \
	grep -qx "ibvf_0x0a01=0x0a01 :" "$PARTITIONS_FILE"
check "admin partitions still in effect" admin_intact
check_fail "a GUID the admin lists in 0x0a01 is refused" "already a limited member" \
	sm add 0x0a01 "$GUID_h2=full"
check "h2 stays a limited member of 0x0a01" eval 'has "$GUID_h2" 0x0a01 && hasnt "$GUID_h2" 0x8a01'

# scratch (defmember=limited, opted in with "defmember"): only limited members
check_fail "full membership of 'scratch' (defmember=limited) is refused" \
	"allows only limited members" sm add 0x0a03 "$GUID_vf1=full"
check "vf1 holds no 0x8a03" hasnt "$GUID_vf1" 0x8a03
out=$(sm add 0x0a03 "$GUID_vf1=limited" 2>&1)
check "add vf1 to 'scratch' as limited member ($out)" grep -q "^OK add 1 members" <<<"$out"
check "vf1's P_Key table holds 0x0a03 (limited), not 0x8a03" \
	eval 'has "$GUID_vf1" 0x0a03 && hasnt "$GUID_vf1" 0x8a03'
# backup (defmember=limited, opted in with "full"): the opt-in overrides
check_fail "limited membership of 'backup' (opt-in full) is refused" \
	"allows only full members" sm add 0x0a04 "$GUID_vf1=limited"
out=$(sm add 0x0a04 "$GUID_vf1=full" 2>&1)
check "add vf1 to 'backup' as full member ($out)" grep -q "^OK add 1 members" <<<"$out"
check "vf1's P_Key table holds 0x8a04 (full)" has "$GUID_vf1" 0x8a04

out=$(sm remove 0x0a10 "$GUID_vf0" 2>&1)
check "remove vf0 from 0x0a10 ($out)" grep -q "^OK remove 1 members" <<<"$out"
echo "# lab time remove_members -> P_Key gone, confirmed by SMP: $(timed "$out") ms"
check "vf0's P_Key table no longer holds 0x8a10 or 0x0a10" \
	eval 'hasnt "$GUID_vf0" 0x8a10 && hasnt "$GUID_vf0" 0x0a10'
check "vf1 keeps 0x0a10" has "$GUID_vf1" 0x0a10
out=$(sm remove 0x0a10 "$GUID_vf0" 2>&1)
check "removing it again succeeds (idempotent)" grep -q "^OK remove" <<<"$out"

# An admin edit that breaks the file (not yet read by OpenSM: only heavy
# sweeps read it). ibvf must refuse and leave the file and OpenSM alone.
cp "$PARTITIONS_FILE" "$D/good.conf"
{ cat "$D/good.conf"; printf 'tenant9=0x0a09 : 0x0002c90300010101=full, 0xZZZZ=full ;\n'; } \
	> "$D/broken.conf"
cp "$D/broken.conf" "$PARTITIONS_FILE"
lines=$(grep -c "SUBNET UP" "$OPENSM_LOG")
check_fail "an unparsable base file is refused with line and column" \
	"nothing was changed: .*partitions.conf:[0-9]+:43: bad port GUID '0xZZZZ'" \
	sm add 0x0a11 "$GUID_vf1=full"
check "the broken file is left as it was" cmp -s "$D/broken.conf" "$PARTITIONS_FILE"
check "OpenSM was not made to re-read it" test "$(grep -c "SUBNET UP" "$OPENSM_LOG")" = "$lines"
check "OpenSM's state is untouched: vf0 0x8a01, vf1 0x0a10, admin P_Keys" \
	eval 'has "$GUID_vf0" 0x8a01 && has "$GUID_vf1" 0x0a10 && hasnt "$GUID_vf1" 0x8a11 && admin_intact'
cp "$D/good.conf" "$PARTITIONS_FILE"

# 1,000 members in one PKey: vf1 plus 999 GUIDs that are not on the fabric
out=$(sm add 0x0b00 "$GUID_vf1=full" 0x0002c90300500000+999=limited 2>&1)
check "add 1,000 members to 0x0b00 ($out)" grep -q "^OK add 1000 members" <<<"$out"
echo "# lab time add_members of 1,000 members (1 on the fabric, SMP-confirmed): $(timed "$out") ms"
check "vf1 holds 0x8b00" has "$GUID_vf1" 0x8b00
check "the file holds the 1,000 members" \
	test "$(sed -n '/^ibvf_0x0b00=/,/;$/p' "$PARTITIONS_FILE" | grep -o '0x[0-9a-f]\{16\}=' | wc -l)" = 1000
check "admin partitions still in effect" admin_intact
out=$(sm remove 0x0b00 "$GUID_vf1" 0x0002c90300500000+999 2>&1)
check "remove the 1,000 members ($out)" grep -q "^OK remove 1000 members" <<<"$out"
echo "# lab time remove_members of 1,000 members: $(timed "$out") ms"
check "vf1 no longer holds 0x8b00" hasnt "$GUID_vf1" 0x8b00

# partitions.conf as a symbolic link into a config-managed directory: the
# link stays, its target gets the change, and OpenSM reads it
mkdir -p "$D/cfg"
mv "$PARTITIONS_FILE" "$D/cfg/real-partitions.conf"
ln -s cfg/real-partitions.conf "$PARTITIONS_FILE"
out=$(sm add 0x0a13 "$GUID_vf1=full" 2>&1)
check "add through a symlinked partitions.conf ($out)" grep -q "^OK add 1 members" <<<"$out"
check "partitions.conf is still the symlink" test -L "$PARTITIONS_FILE"
check "the link's target got ibvf's definition" \
	grep -q "^ibvf_0x0a13=0x0a13" "$D/cfg/real-partitions.conf"
check "OpenSM programmed it: vf1 holds 0x8a13" has "$GUID_vf1" 0x8a13
out=$(sm remove 0x0a13 "$GUID_vf1" 2>&1)
check "remove through the link ($out)" grep -q "^OK remove 1 members" <<<"$out"
check "still the symlink, vf1 without 0x8a13" \
	eval 'test -L "$PARTITIONS_FILE" && hasnt "$GUID_vf1" 0x8a13'
rm "$PARTITIONS_FILE" && mv "$D/cfg/real-partitions.conf" "$PARTITIONS_FILE"

# OpenSM not running / a pid file that names another process
cp "$OPENSM_PIDFILE" "$D/opensm.pid.saved"
pidof_ibsim=$(cat "$D/ibsim.pid")
echo "$pidof_ibsim" > "$OPENSM_PIDFILE"
check_fail "a pid file naming another process is refused" "is 'ibsim', not opensm" \
	sm add 0x0a12 "$GUID_vf1=full"
cp "$D/opensm.pid.saved" "$OPENSM_PIDFILE"
cp "$PARTITIONS_FILE" "$D/before-stop.conf"
"$FL" stop-sm "$D"
check_fail "OpenSM not running is refused" "OpenSM pid file .* does not exist|not running" \
	sm add 0x0a12 "$GUID_vf1=full"
check "the file was not changed while OpenSM was down" cmp -s "$D/before-stop.conf" "$PARTITIONS_FILE"
lab_done
