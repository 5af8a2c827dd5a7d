#!/bin/bash
# Issue 14's two SM leaks replayed against the opensm backend and the real
# OpenSM on the simulated fabric (the UFM simulator's are ibvfd-ufm-leaks).
# OpenSM's equivalents of "an add applied late" and "a remove answered
# success without removing": a membership line in ibvf's managed section that
# stays or comes back after the release (a late writer, an older copy of the
# file put back, a removal OpenSM never got). daemon.reconcile is "report"
# (the default) and periodic passes are off: the test runs the pass. After
# each leak, the next tenant's GUID is in no PKey but its own, and after a
# pass no GUID of the pool is in a PKey its owner did not ask for.
# Root, the fabric lab packages and the opensm backend; like ibvfd-fabric-lab.
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
D=$(mktemp -d /tmp/ibvfd-osmleaks.XXXXXX)
DPID=
cleanup() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && sleep 1 && kill -KILL "$DPID" 2>/dev/null
	"$FL" down "$D/lab" >/dev/null 2>&1
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
            "quarantine_s": 1 },
  "sm": { "backend": "opensm", "module_dir": "$IBVF_SM_MODULE_DIR/opensm", "periodic_update_s": 3600,
          "config": { "partition_file": "$PARTITIONS_FILE", "pid_file": "$OPENSM_PIDFILE",
                      "verify": "off" } },
  "vf": { "driver": "ibsim", "rebind_timeout_ms": 3000,
          "ibsim": { "console": "$IBSIM_CONSOLE", "output": "$IBSIM_OUT", "node_prefix": "vf",
                     "real_netdevs": true, "relink_delay_ms": 100 } },
  "port_watch": { "source": "fabric", "poll_min_ms": 5, "poll_max_ms": 100 },
  "api": { "socket": "$D/run/ibvfd.sock" },
  "daemon": { "prepare_timeout_s": 60, "port_timeout_s": 30, "reconcile": "report" } }
JSON
C=("$IBVFCTL" -c "$D/ibvfd.json")
# the daemon runs as node pf0 of the fabric (its umad clients: SA, SMPs)
FABRIC_LAB_TIMEOUT=300 "$FL" run "$D/lab" pf0 "$IBVFD" -f -c "$D/ibvfd.json" >"$D/ibvfd.log" 2>&1 &
DPID=$!
ready() { "${C[@]}" --json daemon status 2>/dev/null | grep -q '"ready": true'; }
check "ibvfd starts and is ready (SM backend validated, reconciled)" wait_for 30 ready

# "PKEY GUID" per member of ibvf's managed section of the partition file
members() {
	python3 - "$PARTITIONS_FILE" <<'PY'
import re, sys
sec = False
pk = None
for line in open(sys.argv[1]):
    if "BEGIN ibvf managed partitions" in line:
        sec = True
        continue
    if "END ibvf managed partitions" in line:
        sec = False
    if not sec:
        continue
    m = re.search(r"=(0x[0-9a-fA-F]+)", line)
    if m and not re.search(r"0x[0-9a-fA-F]{16}", line[:m.end()]):
        pk = int(m.group(1), 16) & 0x7fff
    for g in re.findall(r"0x[0-9a-fA-F]{16}", line):
        print("0x%04x %s" % (pk, g.lower()))
PY
}
# members no live owner asked for (ibvfd's list): "PKEY GUID" lines, none when clean
foreign() {
	local owned
	owned=$("${C[@]}" --json daemon list 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
for o in (d if isinstance(d, list) else d.get("owners", [])):
    g = "0x" + o["guid"].replace(":", "").lower()
    for p in o.get("pkeys", []):
        print("0x%04x" % (int(p["pkey"] if isinstance(p, dict) else p, 16) & 0x7fff), g)')
	members | while read -r pk g; do
		grep -qx "$pk $g" <<<"$owned" || echo "$pk $g"
	done
}
# GUID $2 is in a PKey of ibvf's section other than $1 (string compares: awk would take
# 0x... for numbers and 64-bit GUIDs for equal doubles)
in_other() { members | awk -v g="$2" -v pk="$1" '($2 "") == (g "") && ($1 "") != (pk "") { f = 1 } END { exit !f }'; }
guid_of() { sed -nE 's/^GUID: +//p' <<<"$1" | tr -d : | sed 's/^/0x/' | tr A-F a-f; }
# put "PKEY GUID" back into ibvf's section, as a late or lost write would leave it
put_back() {
	python3 - "$PARTITIONS_FILE" "$1" "$2" <<'PY'
import sys
path, pk, g = sys.argv[1], int(sys.argv[2], 16), sys.argv[3]
text = open(path).read()
end = text.index("# END ibvf managed partitions")
line = "ibvf_0x%04x=0x%04x :\n\t%s=full ;\n" % (pk, pk, g)
open(path, "w").write(text[:end] + line + text[end:])
PY
	kill -HUP "$(cat "$OPENSM_PIDFILE")" 2>/dev/null
}
pass() { "${C[@]}" daemon audit >"$D/audit.out" 2>&1; }
# GUID $1 is not $2 and in no PKey of ibvf's section but $3
alone() { [ "$1" != "$2" ] && ! in_other "$3" "$1"; }

# 1. the late add: A's membership comes back after A's release
out=$("${C[@]}" daemon prepare --owner osm-a --pci 0000:03:00.2 --pkey 0x0012 2>"$D/err")
check "tenant A attached in 0x0012 ($(tr '\n' ' ' <"$D/err"))" test $? = 0
GA=$(guid_of "$out")
"${C[@]}" daemon commit --owner osm-a >/dev/null 2>&1
check "tenant A released" "${C[@]}" daemon release --owner osm-a
check "A's GUID $GA left the partition file" bash -c "! grep -qi '$GA' '$PARTITIONS_FILE'"
put_back 0x0012 "$GA"
check "late add: A's GUID is back in 0x0012 with no owner" grep -qi "$GA" "$PARTITIONS_FILE"
sleep 1.2 # A's quarantine (1 s) is over: only the SM view keeps A's GUID from B
out=$("${C[@]}" daemon prepare --owner osm-b --pci 0000:03:00.3 --pkey 0x0034 2>"$D/err")
check "tenant B attached in 0x0034 ($(tr '\n' ' ' <"$D/err"))" test $? = 0
GB=$(guid_of "$out")
check "the section lists B in 0x0034 and B is its owner's" \
	bash -c '[ -n "$1" ] && [ -z "$2" ]' _ "$(members | grep -x "0x0034 $GB")" "$(foreign | grep "$GB")"
check "late add: A's GUID is seen as in no owner's PKey ($(foreign | tr '\n' ' '))" \
	bash -c 'grep -q "0x0012 $1" <<<"$2"' _ "$GA" "$(foreign)"
check "late add: B's GUID $GB is not A's and in no PKey but 0x0034" alone "$GB" "$GA" 0x0034
pass
check "late add: after a pass no GUID is in a PKey its owner did not ask for ($(foreign | tr '\n' ' '))" \
	test -z "$(foreign)"

# 2. the faked removal: B's release "succeeds" but the line stays (OpenSM never saw the removal)
"${C[@]}" daemon commit --owner osm-b >/dev/null 2>&1
cp "$PARTITIONS_FILE" "$D/partitions.before"
check "tenant B released" "${C[@]}" daemon release --owner osm-b
cp "$D/partitions.before" "$PARTITIONS_FILE" # the older copy, B still in 0x0034
kill -HUP "$(cat "$OPENSM_PIDFILE")" 2>/dev/null
check "faked remove: B's GUID is still in 0x0034 with no owner" grep -qi "$GB" "$PARTITIONS_FILE"
sleep 1.2
out=$("${C[@]}" daemon prepare --owner osm-c --pci 0000:03:00.2 --pkey 0x0056 2>"$D/err")
check "tenant C attached in 0x0056 ($(tr '\n' ' ' <"$D/err"))" test $? = 0
GC=$(guid_of "$out")
check "faked remove: C's GUID $GC is not B's and in no PKey but 0x0056" alone "$GC" "$GB" 0x0056
pass
check "faked remove: after a pass B's GUID left 0x0034" bash -c "! grep -qi '$GB' '$PARTITIONS_FILE'"
check "faked remove: no GUID is in a PKey its owner did not ask for ($(foreign | tr '\n' ' '))" \
	test -z "$(foreign)"
"${C[@]}" daemon release --owner osm-c >/dev/null 2>&1

kill -TERM "$DPID"; wait "$DPID"; rc=$?
DPID=
check "SIGTERM: ibvfd exits 0 ($rc)" test "$rc" = 0
"$FL" down "$D/lab"
lab_done
