#!/bin/bash
# Cluster mode's SM path end to end (issue 19) on the simulated fabric: a real
# 3-member etcd on loopback, the real OpenSM (ibsim through umad2sim), three
# ibvfd nodes (node-a as HCA pf0 with VFs vf0/vf1, node-b as HCA h1 with VFs
# vf2/vf3, node-c as HCA h2 with VFs vf4/vf5, each with its own fake sysfs PF
# and the ibsim VF driver) whose SM backend is `cluster`, and the SM agent
# ibvf-smd on HCA sm (opensm backend on OpenSM's own partition file). Pods on
# all three nodes in a shared PKey and in separate ones: the partition file
# holds members from every node, the admin
# part stays byte for byte, OpenSM's log has no PARSE error, and every VF's
# P_Key table (SMP) holds its PKey; ibvfctl cluster members shows them
# applied. Then the agent is SIGKILLed while a prepare waits on it (and once
# more just after a restart, mid-pass) and restarted: the prepare finishes,
# the admin part is intact. Release: the sections empty again. (More faults on
# a lab of their own: test-smd-fabric-faults.sh.)
# Runs in a private network namespace; root, the fabric lab and etcd needed.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
: "${IBVFD:?}" "${IBVFCTL:?}" "${IBVF_SMD:?}" "${IBVF_FAKESYSFS:?}" "${IBVF_SM_MODULE_DIR:?}"
command -v etcd >/dev/null || lab_skip "etcd not installed (Debian etcd-server; tools/install-deps)"
if [ -z "${IBVF_IN_PRIVATE_NETNS:-}" ]; then
	IBVF_IN_PRIVATE_NETNS=1 exec unshare --net "$0" "$@"
	lab_skip "cannot unshare a network namespace"
fi
ip link set lo up || lab_skip "no loopback in the private netns"
FL=$here/../fabric/fabric-lab.sh
D=$(mktemp -d /tmp/ibvf-smd-fabric.XXXXXX)
PIDS=()
APID= BPID= CPID= SPID=
# 'fabric-lab.sh run' execs timeout, whose child is the client: kill both by PID
kill_run() {	# SIG PID: the client under the timeout PID, then the timeout
	[ -n "$2" ] || return 0
	kill -"$1" $(pgrep -P "$2") "$2" 2>/dev/null
}
cleanup() {
	for p in $APID $BPID $CPID $SPID; do kill_run KILL "$p"; done
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	"$FL" down "$D/lab" >/dev/null 2>&1
	for n in a b c; do "$IBVF_FAKESYSFS" "$D/sys-$n" veth-down >/dev/null 2>&1; done
	[ -n "${IBVF_KEEP_LAB:-}" ] && echo "lab kept in $D" >&2 || rm -rf "$D"
}
trap cleanup EXIT

# --- etcd: 3 members on loopback (the netns is ours: fixed ports are free)
IC=m0=http://127.0.0.1:23800,m1=http://127.0.0.1:23801,m2=http://127.0.0.1:23802
for i in 0 1 2; do
	etcd --name m$i --data-dir "$D/etcd$i" --listen-peer-urls http://127.0.0.1:2380$i \
		--initial-advertise-peer-urls http://127.0.0.1:2380$i \
		--listen-client-urls http://127.0.0.1:2379$i --advertise-client-urls http://127.0.0.1:2379$i \
		--initial-cluster "$IC" --initial-cluster-state new --initial-cluster-token smd \
		--heartbeat-interval 50 --election-timeout 500 --log-level warn >"$D/etcd$i.log" 2>&1 &
	PIDS+=($!)
done
EPS='"http://127.0.0.1:23790", "http://127.0.0.1:23791", "http://127.0.0.1:23792"'
etcd_up() { ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:23790 put /probe 1 >/dev/null 2>&1; }
check "3-member etcd answers writes" wait_for 20 etcd_up

# --- the fabric: OpenSM on sm, node-a on pf0 (vf0, vf1), node-b on h1 (vf2, vf3),
# node-c on h2 (vf4, vf5)
mkdir -p "$D/lab"
"$FL" up "$D/lab" --vfs 6 --hosts 2 --zero-vfs
rc=$?
[ $rc = 77 ] && lab_skip "fabric lab packages missing (tools/install-deps)"
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab/lab.env"
ok "fabric lab up with zero-GUID VFs vf0..vf5"
admin_part() { sed '/^# BEGIN ibvf managed partitions/,/^# END ibvf managed partitions/d' "$PARTITIONS_FILE"; }
admin_part >"$D/admin.before"

V=sd$(printf '%04x' $(($$ % 0xffff)))
node_json() {	# NAME PCI HCA VFNODE0 VFNODE1
	mkdir -p "$D/state-$1" "$D/run-$1" && chmod 700 "$D/state-$1" "$D/run-$1"
	"$IBVF_FAKESYSFS" "$D/sys-$1" add-pf --pci "$2" --vfs 2 --veth "$V$1" >/dev/null ||
		{ echo "fake sysfs PF for node $1 failed" >&2; exit 1; }
	local vf0=${2%.0}.2 vf1=${2%.0}.3
	cat >"$D/node-$1.json" <<JSON
{ "state_dir": "$D/state-$1", "run_dir": "$D/run-$1", "sysfs_root": "$D/sys-$1", "log_level": "debug",
  "pool": { "ranges": [ { "start": "02:00:00:00:00:19:00:01", "end": "02:00:00:00:00:19:00:ff" } ],
            "quarantine_s": 60,
            "cluster": { "endpoints": [ $EPS ], "prefix": "/lab/", "node": "node-$1",
                         "block_size": 16, "low_watermark": 4 } },
  "sm": { "backend": "cluster", "module_dir": "$IBVF_SM_MODULE_DIR/cluster", "periodic_update_s": 2,
          "config": { "apply_timeout_ms": 15000 } },
  "vf": { "driver": "ibsim", "rebind_timeout_ms": 3000,
          "ibsim": { "console": "$IBSIM_CONSOLE", "output": "$IBSIM_OUT",
                     "nodes": { "$vf0": "$3", "$vf1": "$4" },
                     "real_netdevs": true, "relink_delay_ms": 100 } },
  "port_watch": { "source": "fabric", "poll_min_ms": 5, "poll_max_ms": 100 },
  "api": { "socket": "$D/run-$1/ibvfd.sock" },
  "daemon": { "prepare_timeout_s": 60, "port_timeout_s": 30 } }
JSON
}
node_json a 0000:03:00.0 vf0 vf1
node_json b 0000:04:00.0 vf2 vf3
node_json c 0000:05:00.0 vf4 vf5
cat >"$D/smd.json" <<JSON
{ "state_dir": "$D", "run_dir": "$D", "log_level": "debug",
  "pool": { "ranges": [ { "start": "02:00:00:00:00:19:00:01", "end": "02:00:00:00:00:19:00:ff" } ],
            "cluster": { "endpoints": [ $EPS ], "prefix": "/lab/", "node": "sm-host" } },
  "sm": { "backend": "opensm", "module_dir": "$IBVF_SM_MODULE_DIR/opensm",
          "config": { "partition_file": "$PARTITIONS_FILE", "pid_file": "$OPENSM_PIDFILE",
                      "verify": "off" } },
  "smd": { "lease_ttl_s": 2, "reconcile_s": 5 } }
JSON
out=$("$IBVF_SMD" -c "$D/smd.json" --print-config 2>&1)
check "ibvf-smd --print-config: agent sm-host, its own group, no election" \
	grep -qE '"group": "sm-host"' <<<"$out"
start_smd() {
	FABRIC_LAB_TIMEOUT=600 "$FL" run "$D/lab" sm "$IBVF_SMD" -f -c "$D/smd.json" >>"$D/smd.log" 2>&1 &
	SPID=$!
}
start_smd
FABRIC_LAB_TIMEOUT=600 "$FL" run "$D/lab" pf0 "$IBVFD" -f -c "$D/node-a.json" >"$D/ibvfd-a.log" 2>&1 &
APID=$!
FABRIC_LAB_TIMEOUT=600 "$FL" run "$D/lab" h1 "$IBVFD" -f -c "$D/node-b.json" >"$D/ibvfd-b.log" 2>&1 &
BPID=$!
FABRIC_LAB_TIMEOUT=600 "$FL" run "$D/lab" h2 "$IBVFD" -f -c "$D/node-c.json" >"$D/ibvfd-c.log" 2>&1 &
CPID=$!
CA=("$IBVFCTL" -c "$D/node-a.json")
CB=("$IBVFCTL" -c "$D/node-b.json")
CC=("$IBVFCTL" -c "$D/node-c.json")
ready() { "$@" --json daemon status 2>/dev/null | grep -q '"ready": true'; }
check "node-a is ready (cluster backend validated: the agent is live)" wait_for 40 ready "${CA[@]}"
check "node-b is ready" wait_for 40 ready "${CB[@]}"
check "node-c is ready" wait_for 40 ready "${CC[@]}"

prep() {	# CTL... -- OWNER PCI PKEY: prints the GUID (hex, no colons)
	local out
	out=$("${@:1:$#-3}" daemon prepare --owner "${@: -3:1}" --pod "lab/${@: -3:1}" \
		--pci "${@: -2:1}" --pkey "${@: -1}" 2>>"$D/prep.err") || return 1
	sed -nE 's/^GUID: +//p' <<<"$out" | tr -d :
}
t0=$(date +%s%N)
GA=$(prep "${CA[@]}" c1 0000:03:00.2 0x0012)
t1=$(date +%s%N)
check "node-a: Pod c1 on vf0 in PKey 0x0012 (GUID $GA)" test -n "$GA"
echo "# one prepare through etcd, the agent and OpenSM: $(((t1 - t0) / 1000000)) ms (VF rebind and port wait included)"
GB=$(prep "${CB[@]}" c2 0000:04:00.2 0x0012)
check "node-b: Pod c2 on vf2 in the same PKey 0x0012 (GUID $GB)" test -n "$GB"
GC=$(prep "${CB[@]}" c3 0000:04:00.3 0x0013)
check "node-b: Pod c3 on vf3 in its own PKey 0x0013 (GUID $GC)" test -n "$GC"
GF=$(prep "${CC[@]}" c6 0000:05:00.2 0x0012)
check "node-c: Pod c6 on vf4 in the same PKey 0x0012 (GUID $GF)" test -n "$GF"
check "the three nodes got different GUIDs (cluster blocks)" bash -c \
	"[ \$(printf '%s\n' $GA $GB $GC $GF | sort -u | wc -l) = 4 ]"
check "the partition file lists node-a's, node-b's and node-c's GUIDs" bash -c \
	"[ -n '$GA' ] && [ -n '$GB' ] && [ -n '$GC' ] && [ -n '$GF' ] && grep -qi 0x$GA '$PARTITIONS_FILE' && grep -qi 0x$GB '$PARTITIONS_FILE' && grep -qi 0x$GC '$PARTITIONS_FILE' && grep -qi 0x$GF '$PARTITIONS_FILE'"
check "the admin part of the partition file is byte for byte as before" \
	cmp -s "$D/admin.before" <(admin_part)
check "OpenSM's log has no PARSE error and no duplicate GUID" bash -c "! grep -qiE 'PARSE ERROR|duplicat' '$OPENSM_LOG'"
pkeys() { "$FL" run "$D/lab" sm smpquery -G pkeys "0x$1" 2>/dev/null; }
has_pkey() { pkeys "$1" | grep -q "$2"; }
check "vf0's P_Key table (SMP) holds 0x8012" wait_for 10 has_pkey "$GA" 0x8012
check "vf2's P_Key table holds 0x8012" wait_for 10 has_pkey "$GB" 0x8012
check "vf4's P_Key table (node-c) holds 0x8012" wait_for 10 has_pkey "$GF" 0x8012
check "vf3's P_Key table holds 0x8013, not 0x8012" bash -c \
	"'$FL' run '$D/lab' sm smpquery -G pkeys 0x$GC | grep -q 0x8013 && ! '$FL' run '$D/lab' sm smpquery -G pkeys 0x$GC | grep -q 0x8012"
out=$("${CA[@]}" --json cluster members --pkey 0x12 2>/dev/null)
check "ibvfctl cluster members --pkey 0x12: the three nodes' GUIDs, applied" bash -c \
	'[ "$(grep -c "\"applied\"" <<<"$0")" = 3 ] && grep -q node-a <<<"$0" && grep -q node-b <<<"$0" && grep -q node-c <<<"$0"' "$out"

# --- the agent SIGKILLed while a prepare waits on it, then mid-pass, then back
kill_run KILL "$SPID"; wait "$SPID" 2>/dev/null; SPID=
"$FL" reap "$D/lab"	# a SIGKILLed client keeps its ibsim slot
( prep "${CA[@]}" c4 0000:03:00.3 0x0014 >"$D/c4.guid" ) &
P4=$!
sleep 1
start_smd
sleep 0.3
kill_run KILL "$SPID"; wait "$SPID" 2>/dev/null; SPID=
"$FL" reap "$D/lab"
check "the admin part is intact after the agent died mid-pass" cmp -s "$D/admin.before" <(admin_part)
start_smd
wait "$P4"; rc=$?
GD=$(cat "$D/c4.guid")
check "the waiting prepare (c4, PKey 0x0014) finishes once the agent is back (rc $rc, $GD)" \
	test "$rc" = 0 -a -n "$GD"
check "the partition file lists it and still every earlier GUID" bash -c \
	"[ -n '$GD' ] && [ -n '$GA' ] && grep -qi 0x$GD '$PARTITIONS_FILE' && grep -qi 0x$GA '$PARTITIONS_FILE' && grep -qi 0x$GC '$PARTITIONS_FILE'"
check "vf1's P_Key table holds 0x8014" wait_for 10 has_pkey "$GD" 0x8014
check "the admin part is byte for byte as before" cmp -s "$D/admin.before" <(admin_part)
check "OpenSM's log still has no PARSE error" bash -c "! grep -q 'PARSE ERROR' '$OPENSM_LOG'"

# --- OpenSM stopped and started again while a prepare waits on the agent
"${CB[@]}" daemon release --owner c2 >/dev/null 2>&1	# frees vf2
"$FL" stop-sm "$D/lab"
( prep "${CB[@]}" c5 0000:04:00.2 0x0015 >"$D/c5.guid" ) &
P5=$!
sleep 2
"$FL" start-sm "$D/lab" >/dev/null 2>&1 || echo "# start-sm failed" >&2
. "$D/lab/lab.env"	# OpenSM's PID file may be new
wait "$P5"; rc=$?
GE=$(cat "$D/c5.guid")
check "OpenSM restarted: the waiting prepare (c5, 0x0015) finishes (rc $rc, $GE)" \
	test "$rc" = 0 -a -n "$GE"
check "vf2's P_Key table holds 0x8015" wait_for 15 has_pkey "$GE" 0x8015
check "the admin part is byte for byte as before" cmp -s "$D/admin.before" <(admin_part)

# --- release everything: the sections empty
for o in c1 c4; do "${CA[@]}" daemon release --owner $o >/dev/null 2>&1; done
for o in c3 c5; do "${CB[@]}" daemon release --owner $o >/dev/null 2>&1; done
"${CC[@]}" daemon release --owner c6 >/dev/null 2>&1
none_left() { [ -n "$GA$GB$GC$GD$GF" ] && ! grep -qiE "0x($GA|$GB|$GC|$GD|$GF|${GE:-none})" "$PARTITIONS_FILE"; }
check "after the releases no Pod GUID is left in the partition file" wait_for 10 none_left
check "the admin part is byte for byte as before" cmp -s "$D/admin.before" <(admin_part)
out=$("${CA[@]}" --json cluster members 2>/dev/null)
check "ibvfctl cluster members: nothing desired any more" bash -c '! grep -q "\"applied\"" <<<"$0"' "$out"
for p in $APID $BPID $CPID $SPID; do kill -TERM "$p" 2>/dev/null; done	# timeout forwards it
wait $APID $BPID $CPID $SPID 2>/dev/null
APID= BPID= CPID= SPID=
if [ "$LAB_FAILS" != 0 ]; then
	for f in smd.log ibvfd-a.log ibvfd-b.log ibvfd-c.log prep.err; do
		echo "# --- $f (tail)"; tail -25 "$D/$f" | sed 's/^/# /'
	done
fi
lab_done
