#!/bin/bash
# Two ibvfd nodes on ONE simulated fabric (ibsim + the real OpenSM): node A's
# PF is HCA pf0 with VF HCAs vf0, vf1; node B's PF is HCA h1 with VF HCAs
# vf2, vf3 (each node its own fake-sysfs PF, state dir, socket, umad2sim
# SIM_HOST). Both have the SAME pool.ranges, as a DaemonSet's one config.
#   baseline (cluster off): each node's pool hands out its lowest free GUID,
#     so vf0 and vf2 carry the same port GUID: SMP NodeInfo of both says so and
#     OpenSM logs the duplicate. This is the test's own check that it can fail.
#   cluster mode (a 1-member etcd on this netns' loopback; same config plus
#     pool.cluster, the node name from NODE_NAME): prepares on all four VFs at
#     once give four different GUIDs, every port ACTIVE with them (SMP),
#     no duplicate in OpenSM's log.
# SM membership: the admin partition gives 0x0012 to ALL ports (SM backend
# noop on both nodes): the shared-SM path of several nodes is issue 19's.
# Runs in a private network namespace; root, the fabric lab packages and
# etcd-server needed.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
: "${IBVFD:?}" "${IBVFCTL:?}" "${IBVF_FAKESYSFS:?}" "${IBVF_SM_MODULE_DIR:?}"
command -v etcd >/dev/null || lab_skip "etcd not installed (Debian etcd-server; tools/install-deps)"
if [ -z "${IBVF_IN_PRIVATE_NETNS:-}" ]; then
	IBVF_IN_PRIVATE_NETNS=1 exec unshare --net "$0" "$@"
	lab_skip "cannot unshare a network namespace"
fi
[ -f "$IBVF_SM_MODULE_DIR/noop/noop.so" ] || lab_skip "noop SM backend module not built"
ip link set lo up || { echo "no loopback in the private netns" >&2; exit 1; }
FL=$here/../fabric/fabric-lab.sh
D=$(mktemp -d /tmp/ibvf-cfabric.XXXXXX)
PA= PB= EPID=
stop() {	# stop PID: TERM, 5 s, KILL; exactly that PID
	local p=$1
	[ -n "$p" ] || return 0
	kill -TERM "$p" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$p" 2>/dev/null
	wait "$p" 2>/dev/null
}
cleanup() {
	stop "$PA"; stop "$PB"; stop "$EPID"
	"$FL" down "$D/lab" >/dev/null 2>&1
	"$IBVF_FAKESYSFS" "$D/sysA" veth-down >/dev/null 2>&1
	"$IBVF_FAKESYSFS" "$D/sysB" veth-down >/dev/null 2>&1
	[ -n "${IBVF_KEEP_LAB:-}" ] && echo "lab kept in $D" >&2 || rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D/lab"
printf 'Default=0x7fff, ipoib : ALL=full ;\ntenant=0x0012 : ALL=full ;\n' >"$D/parts"
"$FL" up "$D/lab" --vfs 4 --hosts 1 --zero-vfs --partitions "$D/parts"
rc=$?
[ $rc = 77 ] && lab_skip "fabric lab packages missing (tools/install-deps)"
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab/lab.env"
ok "fabric lab up: pf0 + vf0, vf1 (node A), h1 + vf2, vf3 (node B), zero-GUID VFs"
V=$(printf '%04x' $(($$ % 0xffff)))
"$IBVF_FAKESYSFS" "$D/sysA" add-pf --pci 0000:03:00.0 --vfs 2 --veth "ca$V" >/dev/null &&
	"$IBVF_FAKESYSFS" "$D/sysB" add-pf --pci 0000:03:00.0 --vfs 2 --veth "cb$V" >/dev/null ||
	{ echo "fake sysfs PFs failed" >&2; exit 1; }

# cfg NODE VF_FIRST CLUSTER: one node's config; pool (and pool.cluster) the same on both
cfg() {
	local n=$1 v=$2 cl=$3 c=
	[ "$cl" = 1 ] && c=', "cluster": { "endpoints": [ "http://127.0.0.1:23790" ], "prefix": "/fabric/",
	  "block_size": 16, "low_watermark": 4, "timeout_ms": 2000 }'
	mkdir -p "$D/$n/state" "$D/$n/run" && chmod 700 "$D/$n/state" "$D/$n/run"
	cat >"$D/$n/ibvfd.json" <<JSON
{ "state_dir": "$D/$n/state", "run_dir": "$D/$n/run", "sysfs_root": "$D/sys$n", "log_level": "info",
  "pool": { "ranges": [ { "start": "02:00:00:00:00:08:00:01", "end": "02:00:00:00:00:08:ff:ff" } ],
            "quarantine_s": 60 $c },
  "sm": { "backend": "noop", "module_dir": "$IBVF_SM_MODULE_DIR/noop" },
  "vf": { "driver": "ibsim", "rebind_timeout_ms": 3000,
          "ibsim": { "console": "$IBSIM_CONSOLE", "output": "$IBSIM_OUT", "real_netdevs": true,
                     "relink_delay_ms": 100,
                     "nodes": { "0000:03:00.2": "vf$v", "0000:03:00.3": "vf$((v + 1))" } } },
  "port_watch": { "source": "fabric", "poll_min_ms": 5, "poll_max_ms": 100 },
  "api": { "socket": "$D/$n/run/ibvfd.sock" },
  "daemon": { "prepare_timeout_s": 30, "port_timeout_s": 8 } }
JSON
}
# start NODE SIM_HOST: ibvfd as that fabric node, NODE_NAME node-<n>; PID in P<n>
start() {
	: >"$D/$1/ibvfd.log"
	NODE_NAME=node-$1 FABRIC_LAB_TIMEOUT=300 "$FL" run "$D/lab" "$2" "$IBVFD" -f \
		-c "$D/$1/ibvfd.json" >>"$D/$1/ibvfd.log" 2>&1 &
	eval "P$1=$!"
}
ready() { "$IBVFCTL" -c "$D/$1/ibvfd.json" --json daemon status 2>/dev/null | grep -q '"ready": true'; }
both_ready() { ready A && ready B; }
# prepare NODE VF OWNER: the GUID into $D/NODE/OWNER.guid, exit code of ibvfctl
prepare() {
	local out rc
	out=$("$IBVFCTL" -c "$D/$1/ibvfd.json" daemon prepare --owner "$3" --pod "lab/$3" \
		--pci "0000:03:00.$((2 + $2))" --pkey 0x0012 2>&1)
	rc=$?
	sed -nE 's/^GUID: +//p' <<<"$out" | tr -d : >"$D/$1/$3.guid"
	[ $rc = 0 ] || sed "s/^/# $1 $3: /" <<<"$out" | head -5
	return $rc
}
release() { "$IBVFCTL" -c "$D/$1/ibvfd.json" daemon release --owner "$2" >/dev/null 2>&1; }
# port GUID of VF HCA vfN by SMP (NodeInfo over the directed route pf0 -> switch port 4+N)
smp_guid() {
	"$FL" run "$D/lab" pf0 smpquery -D nodeinfo "0,1,$((4 + $1))" 2>/dev/null |
		sed -nE 's/^PortGuid:\.*0x0*([0-9a-f]+)$/\1/p'
}
smp_state() {
	"$FL" run "$D/lab" pf0 smpquery -D portinfo "0,1,$((4 + $1))" 1 2>/dev/null |
		sed -nE 's/^LinkState:\.*(.*)$/\1/p'
}
dup_in_log() { grep -E "Duplicate Port GUID|duplicated node GUID" "$OPENSM_LOG" 2>/dev/null | head -3; }

# ---- baseline: per-node pools with the same ranges
cfg A 0 0
cfg B 2 0
start A pf0
start B h1
check "baseline: node A (pf0) and node B (h1) ready without cluster mode" \
	wait_for 30 both_ready
prepare A 0 a0
prepare B 0 b0
ga=$(cat "$D/A/a0.guid") gb=$(cat "$D/B/b0.guid")
check "baseline: both nodes hand out the same first GUID ($ga, $gb)" test -n "$ga" -a "$ga" = "$gb"
sa=$(smp_guid 0) sb=$(smp_guid 2)
check "baseline: SMP NodeInfo of vf0 and vf2 shows one port GUID on both (0x$sa, 0x$sb)" \
	test -n "$sa" -a "$sa" = "$sb"
wait_for 10 bash -c "grep -qE 'Duplicate Port GUID|duplicated node GUID' '$OPENSM_LOG'"
d=$(dup_in_log)
check "baseline: OpenSM logs the duplicate ($(head -1 <<<"$d" | sed 's/.*ERR/ERR/'))" test -n "$d"
release A a0
release B b0
stop "$PA"; stop "$PB"; PA= PB=
"$FL" reap "$D/lab"

# ---- cluster mode: etcd, fresh state dirs, a fresh OpenSM log
mkdir -p "$D/etcd"
etcd --name m0 --data-dir "$D/etcd/m0" --listen-client-urls http://127.0.0.1:23790 \
	--advertise-client-urls http://127.0.0.1:23790 --listen-peer-urls http://127.0.0.1:23800 \
	--initial-advertise-peer-urls http://127.0.0.1:23800 \
	--initial-cluster m0=http://127.0.0.1:23800 --log-level warn >"$D/etcd/log" 2>&1 &
EPID=$!
etcd_up() { curl -sf -m 1 -X POST -d '{"key":"aQ=="}' http://127.0.0.1:23790/v3/kv/range >/dev/null; }
check "etcd (1 member) answers on this netns' loopback" wait_for 20 etcd_up
rm -rf "$D/A" "$D/B"
cfg A 0 1
cfg B 2 1
"$FL" stop-sm "$D/lab"
"$FL" start-sm "$D/lab" || { echo "OpenSM did not restart" >&2; exit 1; }
start A pf0
start B h1
check "cluster mode: both nodes ready (one pool and pool.cluster config, NODE_NAME)" \
	wait_for 30 both_ready
prepare A 0 a0 & j1=$!
prepare A 1 a1 & j2=$!
prepare B 0 b0 & j3=$!
prepare B 1 b1 & j4=$!
okp=0
for j in $j1 $j2 $j3 $j4; do wait "$j" && okp=$((okp + 1)); done
check "cluster mode: 4 concurrent prepares (2 per node) succeed ($okp/4)" test "$okp" = 4
gs=$(cat "$D/A/a0.guid" "$D/A/a1.guid" "$D/B/b0.guid" "$D/B/b1.guid" | sed 's/^0*//')
nd=$(sort -u <<<"$gs" | grep -c .)
check "cluster mode: 4 different GUIDs ($(tr '\n' ' ' <<<"$gs"))" test "$nd" = 4
smp=
for v in 0 1 2 3; do smp="$smp$(smp_guid $v)"$'\n'; done
check "cluster mode: SMP port GUIDs of vf0..vf3 are the 4 allocated GUIDs ($(tr '\n' ' ' <<<"$smp"))" \
	test "$(sort <<<"$smp" | grep .)" = "$(sort <<<"$gs")"
act=0
for v in 0 1 2 3; do [ "$(smp_state $v)" = Active ] && act=$((act + 1)); done
check "cluster mode: every VF port ACTIVE by SMP ($act/4)" test "$act" = 4
d=$(dup_in_log)
check "cluster mode: no duplicate GUID in OpenSM's log${d:+ ($d)}" test -z "$d"
out=$("$IBVFCTL" -c "$D/A/ibvfd.json" cluster blocks 2>&1)
check "ibvfctl cluster blocks: a block of each node" \
	bash -c 'grep -q node-A <<<"$0" && grep -q node-B <<<"$0"' "$out"
for o in a0 a1; do release A $o; done
for o in b0 b1; do release B $o; done
stop "$PA"; stop "$PB"; PA= PB=
lab_done
