#!/bin/bash
# ibvfctl fabric audit (daemon/port/fabric_scan.c, daemon/port/fabric_audit.c)
# on ibsim with the real OpenSM, through umad2sim, run from pf0:
#   - a clean fabric: exit 0, no findings, the per-PKey matrix;
#   - each finding made on purpose: an administrator's ALL=full on a tenant
#     PKey (foreign members, isolation breaches; --pkey filters them), a
#     stale membership in ibvf's section, a PKey an owner asked for that the
#     SM never got (missing), the wrong membership, an owner's GUID on no
#     port, a pool GUID no store knows, a VF at port GUID 0 (INIT), two ports
#     with one port GUID;
#   - cluster mode (a one-member etcd on loopback): another node's blocks make
#     its GUIDs known and the SM's memberships its Pods' requests, with no
#     local store; GUIDs of no block are unknown; a breach names the node;
#   - exit codes (0 clean, 1 findings, 2 usage) and the table output.
# Usage: test-fabric-audit.sh IBVFCTL FABRIC_AUDIT_STORE OPENSM_MODULE_DIR
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || lab_skip "python3 missing (tools/install-deps)"
[ $# = 3 ] || { echo "usage: $0 IBVFCTL FABRIC_AUDIT_STORE OPENSM_MODULE_DIR" >&2; exit 2; }
CTL=$(realpath "$1")
STORE=$(realpath "$2")
SMDIR=$(realpath "$3")
FL=$here/fabric-lab.sh
D=$(mktemp -d /tmp/ibvf-fabric-audit.XXXXXX)
ETCD_PID=
trap '[ -n "$ETCD_PID" ] && kill "$ETCD_PID" 2>/dev/null; "$FL" down "$D"; rm -rf "$D"' EXIT

G0=0x0002c90300100001 G1=0x0002c90300100003 G2=0x0002c90300100005 G3=0x0002c90300100007
G4=0x0002c90300100009
RANGE_FIRST=0x0002c90300100000

admin='Default=0x7fff, ipoib : ALL=full ;'
section() {	# section LINES...: ibvf's managed section of partitions.conf
	echo '# BEGIN ibvf managed partitions: do not edit (ibvfd rewrites up to END)'
	printf '%s\n' "$@"
	echo '# END ibvf managed partitions'
}
CLEAN_SECTION=("ibvf_0x0a01=0x0a01 :" "	$G0=full, $G1=full ;"
	"ibvf_0x0a02=0x0a02 :" "	$G2=full, $G3=limited ;")
{ echo "$admin"; section "${CLEAN_SECTION[@]}"; } > "$D/p.conf"
"$FL" up "$D" --vfs 5 --hosts 1 --partitions "$D/p.conf"
rc=$?
[ $rc = 77 ] && lab_skip "fabric lab packages missing"
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab.env"
ok "ibsim + OpenSM up: 5 VF HCAs, pf0, h1, sm"

config() {	# config FILE LAST: pool range RANGE_FIRST..LAST
	cat > "$1" <<EOF
{ "state_dir": "$D/state", "run_dir": "$D/run",
  "pool": { "ranges": [ { "start": "$RANGE_FIRST", "end": "$2" } ] },
  "port_watch": { "source": "fabric", "mad_timeout_ms": 100, "mad_retries": 1 },
  "sm": { "backend": "opensm", "module_dir": "$SMDIR",
          "config": { "partition_file": "$PARTITIONS_FILE", "pid_file": "$OPENSM_PIDFILE" } } }
EOF
}
config "$D/ibvfd.json" "$G3"
config "$D/wide.cfg" "$G4"
store() {	# store RECORD...: a fresh local store (fabric_audit_store's records)
	rm -rf "$D/state"
	mkdir -m 700 "$D/state"
	"$STORE" "$D/state" "$RANGE_FIRST" "$G4" "$@"
}
CLEAN_STORE=("$G0/0x8a01/tenant-a/handed" "$G1/0x8a01/tenant-a2/handed"
	"$G2/0x8a02/tenant-b/handed" "$G3/0x0a02/tenant-b2/handed")
audit() {	# audit OUT [CONFIG] [ARGS...]: --json audit from pf0; exit code in $D/rc
	local out=$1 cfg=${2:-$D/ibvfd.json}
	shift 2 2>/dev/null || shift
	"$FL" run "$D" pf0 "$CTL" -c "$cfg" --json fabric audit "$@" > "$out" 2>"$out.err"
	echo $? > "$D/rc"
}
rc() { cat "$D/rc"; }
# has FILE KIND [GUID [PKEY [TEXT]]]: a finding of KIND (for GUID, PKEY entry, detail TEXT)
has() {
	"$PY" - "$@" <<'EOF'
import json, sys
a = sys.argv[1:]
doc = json.load(open(a[0]))
def guid(s): return int(s.replace(":", ""), 16)
for f in doc["findings"]:
    if f["kind"] != a[1]: continue
    if len(a) > 2 and a[2] != "-" and guid(f["guid"]) != int(a[2], 16): continue
    if len(a) > 3 and a[3] != "-" and (f["pkey"] is None or int(f["pkey"], 16) != int(a[3], 16)): continue
    if len(a) > 4 and a[4] not in f["detail"]: continue
    sys.exit(0)
sys.exit(1)
EOF
}
hasnt() { ! has "$@"; }
kinds() {	# kinds FILE: sorted, unique finding kinds
	"$PY" -c 'import json,sys; print(" ".join(sorted({f["kind"] for f in json.load(open(sys.argv[1]))["findings"]})))' "$1"
}
jq_() {	# jq_ FILE EXPR: a Python expression over the document d
	"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
members() {	# members FILE PKEY full|limited: the GUIDs, sorted
	jq_ "$1" "' '.join(sorted(m['port_guid'].replace(':','') for k in d['pkeys'] if int(k['pkey'],16)==$2 for m in k['$3']))"
}
partitions() {	# partitions LINE...: write the file, SIGHUP OpenSM, wait for its sweep
	printf '%s\n' "$@" > "$PARTITIONS_FILE"
	"$FL" reload "$D" >/dev/null
}
# audit_until OUT CONFIG COND...: re-run the audit (max 10 s) until COND holds on OUT
audit_until() {
	local out=$1 cfg=$2
	shift 2
	wait_for 10 eval "audit '$out' '$cfg'; $*"
}
hex() { printf '%016x' "$1"; }

# --------------------------------------------------------------- clean --
store "${CLEAN_STORE[@]}" || { echo "store failed" >&2; exit 1; }
audit "$D/clean.json"
check "clean fabric: exit 0" test "$(rc)" = 0
check "clean fabric: no findings, problems 0" \
	test "$(jq_ "$D/clean.json" "len(d['findings']), d['problems']")" = "(0, 0)"
check "compared with the store and the SM (opensm backend)" \
	test "$(jq_ "$D/clean.json" "d['compared']['store'], d['compared']['sm']")" = "(True, True)"
check "scan found 8 CA ports (sm, pf0, h1, vf0..vf4) and 1 switch" \
	test "$(jq_ "$D/clean.json" "d['scan']['ca_ports'], d['scan']['switches']")" = "(8, 1)"
check "SMPs counted (> one per port)" test "$(jq_ "$D/clean.json" "d['scan']['smps'] > 8")" = True
check "matrix 0x0a01: full vf0, vf1; no limited" \
	test "$(members "$D/clean.json" 0x0a01 full)/$(members "$D/clean.json" 0x0a01 limited)" \
	= "$(hex $G0) $(hex $G1)/"
check "matrix 0x0a02: full vf2, limited vf3; 1 full-limited pair, 0 full-full" \
	test "$(members "$D/clean.json" 0x0a02 full)/$(members "$D/clean.json" 0x0a02 limited)/$(jq_ "$D/clean.json" "[(k['full_full_pairs'], k['full_limited_pairs']) for k in d['pkeys'] if k['pkey']=='0x0a02'][0]")" \
	= "$(hex $G2)/$(hex $G3)/(0, 1)"
out=$("$FL" run "$D" pf0 "$CTL" -c "$D/ibvfd.json" fabric audit --matrix 2>&1)
check "table: clean line and matrix rows" \
	grep -q "fabric audit clean" <<<"$out"
check "table: limited member talks to full members only" \
	grep -qE "0x0a02 .*limited +1 full member" <<<"$out"
out=$("$FL" run "$D" pf0 "$CTL" -c "$D/ibvfd.json" fabric audit --pkey 0x0a02 2>&1)
check "table --pkey 0x0a02: grid row of vf2 (full): talks to vf3 (L)" grep -qE "^a vf2 full +-L$" <<<"$out"
check "table --pkey 0x0a02: grid row of vf3 (limited): talks to vf2 (L)" grep -qE "^b vf3 lim +L-$" <<<"$out"

# ------------------------------------------- admin ALL=full on a tenant --
partitions "$admin" "evil=0x0a01 : ALL=full ;" "$(section "${CLEAN_SECTION[@]}")"
audit_until "$D/all.json" "$D/ibvfd.json" 'has "$D/all.json" foreign-member $GUID_pf0'
check "ALL=full on 0x0a01: exit 1" test "$(rc)" = 1
check "foreign member: pf0 holds 0x8a01 (full)" has "$D/all.json" foreign-member "$GUID_pf0" 0x8a01
check "foreign member: h1 holds 0x8a01, cause: not listed by GUID" \
	has "$D/all.json" foreign-member "$GUID_h1" 0x8a01 "does not list it by GUID"
check "foreign member: vf4 (outside the pool) holds 0x8a01" \
	has "$D/all.json" foreign-member "$G4" 0x8a01
check "isolation breach: vf2 (tenant-b) holds tenant-a's 0x8a01" \
	has "$D/all.json" isolation-breach "$G2" 0x8a01
check "isolation breach: vf3 holds 0x8a01" has "$D/all.json" isolation-breach "$G3" 0x8a01
check "no breach for vf0, vf1 (their owners asked for 0x8a01)" \
	hasnt "$D/all.json" isolation-breach "$G0" - && hasnt "$D/all.json" isolation-breach "$G1"
out=$("$FL" run "$D" pf0 "$CTL" -c "$D/ibvfd.json" fabric audit --pkey 0x0a01 2>&1)
check "table --pkey 0x0a01 with ALL=full: every pair talks full-full (no . in the grid)" \
	bash -c 'g=$(sed -n "/who can talk/,\$p" <<<"$1" | tail -n +3); [ "$(wc -l <<<"$g")" -ge 6 ] && ! grep -q "\." <<<"$g" && grep -q "F" <<<"$g"' _ "$out"
check "the SM's own port (ALL) is in the 0x0a01 matrix with role sm" \
	test "$(jq_ "$D/all.json" "any(m['role']=='sm' for k in d['pkeys'] if k['pkey']=='0x0a01' for m in k['full'])")" = True
check "... and is not a foreign member" hasnt "$D/all.json" foreign-member "$GUID_sm"
audit "$D/all-0a02.json" "$D/ibvfd.json" --pkey 0x0a02
check "--pkey 0x0a02: only that key; exit 0 (its members are as asked)" \
	test "$(rc)/$(jq_ "$D/all-0a02.json" "len(d['findings']), [k['pkey'] for k in d['pkeys']]")" = "0/(0, ['0x0a02'])"
audit "$D/all-0a01.json" "$D/ibvfd.json" --pkey 0x8a01
check "--pkey 0x8a01 (membership bit ignored): the 0x0a01 findings, exit 1" \
	test "$(rc)/$(kinds "$D/all-0a01.json")" = "1/foreign-member isolation-breach"

# ------------------- stale membership, missing PKey, wrong membership --
store "$G0/0x8a01+0x8a03/tenant-a/handed" "$G1/0x0a01/tenant-a2/handed" \
	"$G2/0x8a02/tenant-b/handed" "$G3/0x0a02/tenant-b2/handed" \
	"$RANGE_FIRST/0x8a02/tenant-gone/handed" || { echo "store failed" >&2; exit 1; }
partitions "$admin" "$(section "ibvf_0x0a01=0x0a01 :" "	$G0=full, $G1=full, $G2=full ;" \
	"ibvf_0x0a02=0x0a02 :" "	$G2=full, $G3=limited ;")"
audit_until "$D/stale.json" "$D/ibvfd.json" 'has "$D/stale.json" isolation-breach $G2'
check "stale membership: vf2 holds 0x8a01, cause: ibvf's section still lists it" \
	has "$D/stale.json" isolation-breach "$G2" 0x8a01 "stale membership"
check "missing PKey: vf0's owner asked for 0x8a03, its port lacks it" \
	has "$D/stale.json" missing-pkey "$G0" 0x8a03
check "wrong membership: vf1 asked for limited 0x0a01, port holds 0x8a01" \
	has "$D/stale.json" wrong-membership "$G1" 0x8a01
check "not on fabric: a handed GUID on no port" has "$D/stale.json" not-on-fabric "$RANGE_FIRST"
check "no foreign member without the admin's ALL" hasnt "$D/stale.json" foreign-member

# ------------------------------------------------- unknown pool GUID --
store "${CLEAN_STORE[@]}"
partitions "$admin" "$(section "${CLEAN_SECTION[@]}")"
audit_until "$D/back.json" "$D/ibvfd.json" 'test "$(rc)" = 0'
audit "$D/wide.json" "$D/wide.cfg"
check "pool range widened over vf4: unknown pool GUID (no store knows it), only that" \
	test "$(rc)/$(kinds "$D/wide.json")" = "1/unknown-pool-guid"
check "the unknown GUID is vf4's" has "$D/wide.json" unknown-pool-guid "$G4"
store "${CLEAN_STORE[@]}" "$G4/-/released-pod/quarantined"
audit "$D/wide-q.json" "$D/wide.cfg"
check "a quarantined record knows vf4: clean again" test "$(rc)/$(kinds "$D/wide-q.json")" = "0/"

# -------------------------------------------------------- cluster mode --
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
if ! command -v etcd >/dev/null; then
	if [ "${IBVF_REQUIRE_LABS:-0}" = 1 ]; then not_ok "cluster mode: etcd missing (tools/install-deps)"
	else echo "# SKIP cluster mode: etcd missing (tools/install-deps)" >&2; fi
else
	CP=$(free_port) PP=$(free_port)
	etcd --name fa --data-dir "$D/etcd" --listen-client-urls "http://127.0.0.1:$CP" \
		--advertise-client-urls "http://127.0.0.1:$CP" --listen-peer-urls "http://127.0.0.1:$PP" \
		--initial-advertise-peer-urls "http://127.0.0.1:$PP" \
		--initial-cluster "fa=http://127.0.0.1:$PP" --log-level warn >"$D/etcd.log" 2>&1 &
	ETCD_PID=$!
	wait_for 20 etcdctl --endpoints "http://127.0.0.1:$CP" endpoint health >/dev/null 2>&1
	check "etcd up on loopback" kill -0 "$ETCD_PID"
	# 3 blocks of 4 GUIDs: [vf0 vf1] [vf2 vf3] [vf4]; node-b claims two of them
	cat > "$D/cluster.cfg" <<EOF
{ "state_dir": "$D/cstate", "run_dir": "$D/run",
  "pool": { "ranges": [ { "start": "$RANGE_FIRST", "end": "0x0002c9030010000b" } ],
            "cluster": { "endpoints": [ "http://127.0.0.1:$CP" ], "node": "node-a",
                         "prefix": "/ibvf/lab/", "block_size": 4, "low_watermark": 1 } },
  "port_watch": { "source": "fabric", "mad_timeout_ms": 100, "mad_retries": 1 },
  "sm": { "backend": "opensm", "module_dir": "$SMDIR",
          "config": { "partition_file": "$PARTITIONS_FILE", "pid_file": "$OPENSM_PIDFILE" } } }
EOF
	"$STORE" --claim "$D/cluster.cfg" node-b 2 > "$D/claims" 2>"$D/claims.err"
	check "node-b claimed two blocks" test "$(wc -l < "$D/claims")" = 2
	unclaimed=$("$PY" -c 'import sys
blocks = [tuple(int(x, 16) for x in l.split()[:2]) for l in open(sys.argv[1])]
print(" ".join("%016x" % int(g, 16) for g in sys.argv[2:]
               if not any(a <= int(g, 16) <= b for a, b in blocks)))' "$D/claims" "$G0" "$G1" "$G2" "$G3" "$G4")
	audit "$D/cl.json" "$D/cluster.cfg"
	check "cluster: compared with cluster and SM, no local store" \
		test "$(jq_ "$D/cl.json" "d['compared']['cluster'], d['compared']['sm'], d['compared']['store']")" = "(True, True, False)"
	# a VF in no block is unknown; if ibvf's section lists it, that is a stale membership
	stale=$(for g in $unclaimed; do [ "$g" != "$(hex "$G4")" ] && echo "$g"; done | sort | tr '\n' ' ')
	findings_of() { jq_ "$1" "' '.join(sorted(f['guid'].replace(':','') for f in d['findings'] if f['kind']=='$2' and '$3' in f['detail']))"; }
	check "cluster: unknown pool GUIDs are exactly the VFs in no block ($unclaimed)" \
		test "$(findings_of "$D/cl.json" unknown-pool-guid '')" = "$unclaimed"
	check "cluster: ... those ibvf's section lists are stale memberships (${stale:-none})" \
		test "$(findings_of "$D/cl.json" isolation-breach 'stale membership') " = "${stale:- }"
	check "cluster: no other finding" test "$(jq_ "$D/cl.json" "sorted({f['kind'] for f in d['findings']} - {'unknown-pool-guid', 'isolation-breach'})")" = "[]"
	check "cluster: node-b's GUIDs carry its name as owner in the matrix" \
		test "$(jq_ "$D/cl.json" "any(m['owner']=='node node-b (cluster block)' for k in d['pkeys'] for m in k['full']+k['limited'])")" = True
	partitions "$admin" "evil=0x0a01 : ALL=full ;" "$(section "${CLEAN_SECTION[@]}")"
	audit_until "$D/cl-all.json" "$D/cluster.cfg" 'has "$D/cl-all.json" foreign-member $GUID_pf0'
	check "cluster + ALL=full: a breach of a node-b Pod's VF names node-b" \
		test "$(jq_ "$D/cl-all.json" "any(f['kind']=='isolation-breach' and 'node-b' in (f['owner'] or '') for f in d['findings'])")" = True
	partitions "$admin" "$(section "${CLEAN_SECTION[@]}")"
fi

# ------------------------------------------- VF at GUID 0, duplicates --
store "${CLEAN_STORE[@]}"
"$FL" ibsim "$D" 'Guid "vf4" 0xffffffffffffffff' >/dev/null
"$FL" ibsim "$D" "Guid \"h1\" $RANGE_FIRST" >/dev/null	# node GUID of vf0: port GUID vf0's
"$FL" ibsim "$D" 'Unlink "vf4" 1' >/dev/null
"$FL" ibsim "$D" 'ReLink "vf4" 1' >/dev/null
audit_until "$D/guid.json" "$D/ibvfd.json" 'has "$D/guid.json" vf-guid-zero && has "$D/guid.json" duplicate-guid'
check "VF at port GUID 0: found" has "$D/guid.json" vf-guid-zero
check "the GUID-0 VF is vf4, stuck in INIT after a relink" \
	test "$(jq_ "$D/guid.json" "[(f['port']['desc'], f['port']['state']) for f in d['findings'] if f['kind']=='vf-guid-zero'][0]")" = "('vf4', 'INIT')"
check "duplicate port GUID: vf0's GUID on two ports (vf0, h1)" \
	test "$(jq_ "$D/guid.json" "sorted(x for f in d['findings'] if f['kind']=='duplicate-guid' for x in (f['port']['desc'], f['port2']['desc']))")" = "['h1', 'vf0']"
check "exit 1" test "$(rc)" = 1

# ------------------------------------------------------------- usage --
check_fail "bad --pkey: usage error" "pkey" "$FL" run "$D" pf0 "$CTL" -c "$D/ibvfd.json" fabric audit --pkey 0x1ffff
"$FL" run "$D" pf0 "$CTL" -c "$D/ibvfd.json" fabric audit --smp-rate 0 >/dev/null 2>&1
check "--smp-rate 0: exit 2" test $? = 2
lab_done
