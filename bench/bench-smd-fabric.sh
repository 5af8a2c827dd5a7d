#!/bin/bash
# bench-smd-fabric.sh - issue 19's benchmarks on the simulated fabric (ibsim +
# the real OpenSM, a real 3-member etcd on loopback, a private netns):
#  1. one Pod's prepare (the ibvfd call of a CNI ADD: VF GUID, rebind, SM,
#     port wait) on node-a (HCA pf0) through its local `opensm` backend
#     against the same prepare through the `cluster` backend and the agent
#     ibvf-smd (opensm backend, HCA sm): medians of BENCH_SMD_RUNS (default
#     4) per variant in BENCH_SMD_ROUNDS (default 2) alternated rounds, ratio
#     cluster/local (target <= 1.3x);
#  2. a burst of 4 prepares at once on two nodes (node-a, node-b on HCA h1)
#     through the agent: the agent's SM calls (each is one partitions.conf
#     render + one SIGHUP) and OpenSM's heavy sweeps ("SUBNET UP" lines in its
#     log) during the burst (target <= 4), and the wall.
# Prints numbers and the load average, asserts nothing.
#   bench-smd-fabric.sh IBVFD IBVFCTL IBVF_SMD IBVF_FAKESYSFS SM_MODULE_DIR
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../tests/lab/lib.sh"
[ $# = 5 ] || { echo "usage: $0 IBVFD IBVFCTL IBVF_SMD IBVF_FAKESYSFS SM_MODULE_DIR" >&2; exit 2; }
IBVFD=$1 IBVFCTL=$2 IBVF_SMD=$3 IBVF_FAKESYSFS=$4 SMD_MODULES=$5
lab_need_root
command -v etcd >/dev/null || lab_skip "etcd not installed (Debian etcd-server; tools/install-deps)"
command -v curl >/dev/null || lab_skip "curl not installed"
if [ -z "${IBVF_IN_PRIVATE_NETNS:-}" ]; then
	IBVF_IN_PRIVATE_NETNS=1 exec unshare --net "$0" "$@"
	lab_skip "cannot unshare a network namespace"
fi
ip link set lo up || lab_skip "no loopback in the private netns"
RUNS=${BENCH_SMD_RUNS:-4} ROUNDS=${BENCH_SMD_ROUNDS:-2}
FL=$here/../tests/lab/fabric/fabric-lab.sh
D=$(mktemp -d /tmp/bench-smd-fabric.XXXXXX)
PIDS=()
APID= BPID= SPID=
kill_run() {	# SIG PID: the client under fabric-lab's timeout PID, then the timeout
	[ -n "$2" ] || return 0
	kill -"$1" $(pgrep -P "$2") "$2" 2>/dev/null
}
cleanup() {
	for p in $APID $BPID $SPID; do kill_run KILL "$p"; done
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	"$FL" down "$D/lab" >/dev/null 2>&1
	for n in a b; do "$IBVF_FAKESYSFS" "$D/sys-$n" veth-down >/dev/null 2>&1; done
	[ -n "${IBVF_KEEP_LAB:-}" ] && echo "lab kept in $D" >&2 || rm -rf "$D"
}
trap cleanup EXIT
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }'; }

# --- etcd: 3 members (the netns is ours: fixed ports are free)
IC=m0=http://127.0.0.1:23800,m1=http://127.0.0.1:23801,m2=http://127.0.0.1:23802
for i in 0 1 2; do
	etcd --name m$i --data-dir "$D/etcd$i" --listen-peer-urls http://127.0.0.1:2380$i \
		--initial-advertise-peer-urls http://127.0.0.1:2380$i \
		--listen-client-urls http://127.0.0.1:2379$i --advertise-client-urls http://127.0.0.1:2379$i \
		--initial-cluster "$IC" --initial-cluster-state new --initial-cluster-token bsmd \
		--heartbeat-interval 50 --election-timeout 500 --log-level warn >"$D/etcd$i.log" 2>&1 &
	PIDS+=($!)
done
EPS='"http://127.0.0.1:23790", "http://127.0.0.1:23791", "http://127.0.0.1:23792"'
etcd_up() { ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:23790 put /probe 1 >/dev/null 2>&1; }
wait_for 20 etcd_up || { echo "etcd did not come up" >&2; exit 1; }

mkdir -p "$D/lab"
"$FL" up "$D/lab" --vfs 4 --hosts 1 --zero-vfs
rc=$?
[ $rc = 77 ] && lab_skip "fabric lab packages missing (tools/install-deps)"
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab/lab.env"
OSM_CFG="\"partition_file\": \"$PARTITIONS_FILE\", \"pid_file\": \"$OPENSM_PIDFILE\", \"verify\": \"off\""

V=bs$(printf '%04x' $(($$ % 0xffff)))
node_json() {	# NAME PCI VFNODE0 VFNODE1 local|cluster: writes $D/node-NAME-VARIANT.json
	mkdir -p "$D/state-$1" "$D/run-$1" && chmod 700 "$D/state-$1" "$D/run-$1"
	[ -d "$D/sys-$1" ] || "$IBVF_FAKESYSFS" "$D/sys-$1" add-pf --pci "$2" --vfs 2 --veth "$V$1" >/dev/null ||
		{ echo "fake sysfs PF for node $1 failed" >&2; exit 1; }
	local vf0=${2%.0}.2 vf1=${2%.0}.3 sm
	if [ "$5" = local ]; then
		sm="\"backend\": \"opensm\", \"module_dir\": \"$SMD_MODULES/opensm\", \"config\": { $OSM_CFG }"
	else
		sm="\"backend\": \"cluster\", \"module_dir\": \"$SMD_MODULES/cluster\", \"config\": { \"apply_timeout_ms\": 15000 }"
	fi
	cat >"$D/node-$1-$5.json" <<JSON
{ "state_dir": "$D/state-$1", "run_dir": "$D/run-$1", "sysfs_root": "$D/sys-$1",
  "pool": { "ranges": [ { "start": "02:00:00:00:00:19:00:01", "end": "02:00:00:00:00:19:00:ff" } ],
            "quarantine_s": 1,
            "cluster": { "endpoints": [ $EPS ], "prefix": "/bench/", "node": "node-$1",
                         "block_size": 16, "low_watermark": 4 } },
  "sm": { $sm },
  "vf": { "driver": "ibsim", "rebind_timeout_ms": 3000,
          "ibsim": { "console": "$IBSIM_CONSOLE", "output": "$IBSIM_OUT",
                     "nodes": { "$vf0": "$3", "$vf1": "$4" },
                     "real_netdevs": true, "relink_delay_ms": 100 } },
  "port_watch": { "source": "fabric", "poll_min_ms": 5, "poll_max_ms": 100 },
  "api": { "socket": "$D/run-$1/ibvfd.sock" },
  "http": { "enabled": false },
  "daemon": { "prepare_timeout_s": 60, "port_timeout_s": 30 } }
JSON
}
for v in local cluster; do
	node_json a 0000:03:00.0 vf0 vf1 $v
	node_json b 0000:04:00.0 vf2 vf3 $v
done
cat >"$D/smd.json" <<JSON
{ "state_dir": "$D", "run_dir": "$D", "log_level": "info",
  "pool": { "ranges": [ { "start": "02:00:00:00:00:19:00:01", "end": "02:00:00:00:00:19:00:ff" } ],
            "cluster": { "endpoints": [ $EPS ], "prefix": "/bench/", "node": "sm-host" } },
  "sm": { "backend": "opensm", "module_dir": "$SMD_MODULES/opensm", "config": { $OSM_CFG } },
  "smd": { "lease_ttl_s": 2 },
  "http": { "address": "127.0.0.1", "port": 9480 } }
JSON

ready() { "$IBVFCTL" -c "$1" --json daemon status 2>/dev/null | grep -q '"ready": true'; }
start_node() {	# a|b VARIANT: sets APID/BPID
	local hca=pf0
	[ "$1" = b ] && hca=h1
	FABRIC_LAB_TIMEOUT=900 "$FL" run "$D/lab" $hca "$IBVFD" -f -c "$D/node-$1-$2.json" \
		>>"$D/ibvfd-$1.log" 2>&1 &
	if [ "$1" = a ]; then APID=$!; else BPID=$!; fi
	wait_for 60 ready "$D/node-$1-$2.json" || { echo "node-$1 ($2) not ready" >&2; exit 1; }
}
stop_node() {	# a|b
	local p=$APID
	[ "$1" = b ] && p=$BPID
	kill_run TERM "$p"; wait "$p" 2>/dev/null
	if [ "$1" = a ]; then APID=; else BPID=; fi
}
smd_up() { curl -sf http://127.0.0.1:9480/readyz >/dev/null; }
start_smd() {
	FABRIC_LAB_TIMEOUT=900 "$FL" run "$D/lab" sm "$IBVF_SMD" -f -c "$D/smd.json" >>"$D/smd.log" 2>&1 &
	SPID=$!
	wait_for 30 smd_up || { echo "ibvf-smd not ready" >&2; exit 1; }
}
stop_smd() { kill_run TERM "$SPID"; wait "$SPID" 2>/dev/null; SPID=; }
prep() {	# CFG OWNER PCI PKEY
	"$IBVFCTL" -c "$1" daemon prepare --owner "$2" --pod "bench/$2" --pci "$3" --pkey "$4" \
		>/dev/null 2>>"$D/prep.err"
}
rel() { "$IBVFCTL" -c "$1" daemon release --owner "$2" >/dev/null 2>>"$D/prep.err"; }
metric() { curl -sf http://127.0.0.1:9480/metrics | awk -v m="$1" '$1 == m { s += $2 } END { print s + 0 }'; }
# the SM backend calls that change a PKey (each an opensm commit: one file install + one
# SIGHUP), from the agent's "pass over N desired membership(s): M PKey(s) to change" lines
# after line $1 of its log
changes_since() { tail -n +$(($1 + 1)) "$D/smd.log" | sed -nE 's/.*: ([0-9]+) PKey\(s\) to change.*/\1/p' | awk '{ s += $1 } END { print s + 0 }'; }
sweeps() { grep -c "SUBNET UP" "$OPENSM_LOG"; }

echo "bench-smd-fabric: ibsim + OpenSM $(opensm --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -1), 3-member etcd, load average $(loadavg)"
# --- 1. one prepare: local opensm backend vs the cluster backend + the agent
: >"$D/local.ms"
: >"$D/cluster.ms"
fails=0 k=0
for _ in $(seq "$ROUNDS"); do
	for v in local cluster; do
		[ $v = cluster ] && start_smd
		start_node a $v
		for i in $(seq "$RUNS"); do
			k=$((k + 1))
			t0=$(now_ms)
			if prep "$D/node-a-$v.json" p$k 0000:03:00.2 0x0012; then
				echo $(($(now_ms) - t0)) >>"$D/$v.ms"
			else
				fails=$((fails + 1))
			fi
			rel "$D/node-a-$v.json" p$k || fails=$((fails + 1))
			sleep 0.3
		done
		stop_node a
		[ $v = cluster ] && stop_smd
	done
done
ml=$(median <"$D/local.ms") mc=$(median <"$D/cluster.ms")
echo "one prepare on node-a (vf0, PKey 0x0012; ibvfctl daemon prepare, VF rebind and port wait included), medians of $(wc -l <"$D/local.ms") and $(wc -l <"$D/cluster.ms") in $ROUNDS alternated rounds: local opensm backend $ml ms (all: $(tr '\n' ' ' <"$D/local.ms")), cluster backend + ibvf-smd $mc ms (all: $(tr '\n' ' ' <"$D/cluster.ms")): ratio $(awk -v a="$mc" -v b="$ml" 'BEGIN { printf "%.2f", b ? a / b : 0 }')x (target <= 1.3x); $fails failed"
echo "  (load average after: $(loadavg))"

# --- 2. a burst of 4 prepares on 2 nodes through the agent
start_smd
start_node a cluster
start_node b cluster
sleep 1
n0=$(wc -l <"$D/smd.log") c0=$(metric ibvf_smd_sm_calls_total) q0=$(metric ibvf_smd_passes_total)
s0=$(sweeps) t0=$(now_ms)
prep "$D/node-a-cluster.json" b1 0000:03:00.2 0x0012 & p1=$!
prep "$D/node-a-cluster.json" b2 0000:03:00.3 0x0012 & p2=$!
prep "$D/node-b-cluster.json" b3 0000:04:00.2 0x0012 & p3=$!
prep "$D/node-b-cluster.json" b4 0000:04:00.3 0x0013 & p4=$!
bf=0
for p in $p1 $p2 $p3 $p4; do wait $p || bf=$((bf + 1)); done
wall=$(($(now_ms) - t0))
sleep 1	# a sweep the last SIGHUP started ends
c1=$(metric ibvf_smd_sm_calls_total) q1=$(metric ibvf_smd_passes_total) s1=$(sweeps)
echo "burst: 4 prepares at once on 2 nodes (PKeys 0x0012 x3, 0x0013) through ibvf-smd (opensm backend): wall $wall ms; $((q1 - q0)) agent passes, $((c1 - c0)) SM backend calls (adds, removes, lists), $(changes_since "$n0") of them changes = partitions.conf installs + SIGHUPs; $((s1 - s0)) OpenSM heavy sweeps (SUBNET UP lines) (target <= 4 per burst); $bf failed"
echo "  (load average after: $(loadavg))"
for o in b1 b2; do rel "$D/node-a-cluster.json" $o; done
for o in b3 b4; do rel "$D/node-b-cluster.json" $o; done
stop_node a
stop_node b
stop_smd
if [ "$fails" != 0 ] || [ "$bf" != 0 ]; then
	for f in smd.log ibvfd-a.log ibvfd-b.log prep.err; do
		echo "# --- $f (tail)"; tail -15 "$D/$f" 2>/dev/null | sed 's/^/# /'
	done
fi
exit 0
