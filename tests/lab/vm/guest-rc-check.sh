#!/bin/bash
# SPDX-License-Identifier: MIT
#
# guest-rc-check.sh - the RC QP check tests, run as root INSIDE the VM lab
# (tests/lab/vm/vmlab.sh) against soft-RoCE (rdma_rxe) devices.
# $1 = run directory; $1/env sets IBVFCTL, VMTEST (binaries of the build
# under test) and VALGRIND_OK (1 = the build is not sanitized). With
# IBVF_VMLAB_VALGRIND=1 (from the host's environment) one check also runs
# under valgrind memcheck: 20-60 s more under TCG, so it is opt-in; the
# ASan build's run leak-checks every process with LeakSanitizer instead.
# Prints one "ok"/"not ok" line per check and "LATENCY" lines; exits 0 only
# when every check passed.
set -u
. "$1/env"
: "${IBVFCTL:?}" "${VMTEST:?}" "${VALGRIND_OK:=0}" "${IBVF_VMLAB_VALGRIND:=0}"

for c in jq setpriv prlimit; do
	command -v $c >/dev/null && continue
	if [ "${IBVF_REQUIRE_LABS:-0}" = 1 ]; then
		echo "not ok 1 - '$c' is missing (IBVF_REQUIRE_LABS=1)"
		exit 1
	fi
	echo "SKIP: the VM lab tests need '$c' (Debian: jq, util-linux)"
	exit 77
done

T0=$(cut -d' ' -f1 /proc/uptime)
up() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN { printf "%.1f", b - a }'; }
N=0 FAILS=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
bad() { N=$((N + 1)); FAILS=$((FAILS + 1)); echo "not ok $N - $*"; }
sec() { echo; echo "# [$(since "$T0")s] $*"; }
OUT=$(mktemp -d /tmp/rc-check.XXXXXX)
BGPIDS=() # background processes of this script, killed on exit
trap 'for p in "${BGPIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$OUT"' EXIT

# expect RC REGEX DESC -- CMD...: CMD exits RC and its output matches REGEX
expect() {
	local want=$1 re=$2 desc=$3 rc t
	shift 4
	t=$(up)
	timeout 120 "$@" >"$OUT/out" 2>&1
	rc=$?
	sed 's/^/    /' "$OUT/out"
	if [ $rc -eq "$want" ] && grep -Eq -- "$re" "$OUT/out"; then
		ok "$desc ($(since "$t")s)"
	else
		bad "$desc: exit $rc (want $want), output must match /$re/"
	fi
}

# pass_json LABEL JQ_CONDITION -- ibvfctl args...: a passing check whose JSON
# result satisfies the jq condition
pass_json() {
	local label=$1 cond=$2 rc t
	shift 3
	t=$(up)
	timeout 120 "$IBVFCTL" --json rc-check "$@" >"$OUT/j" 2>"$OUT/e"
	rc=$?
	sed 's/^/    /' "$OUT/e"
	if [ $rc -ne 0 ]; then
		bad "$label: exit $rc"
		sed 's/^/    /' "$OUT/j"
		return
	fi
	jq -r --arg l "$label" '"    \(.device) port \(.port) gid \(.gid_index) (\(.gid)) pkey \(.pkey)/\(.pkey_index) mtu \(.mtu): \(.iterations) round trips",
		"LATENCY \($l): min \(.min_us*10|round/10) p50 \(.p50_us*10|round/10) p99 \(.p99_us*10|round/10) max \(.max_us*10|round/10) us"' "$OUT/j"
	if jq -e "$cond" "$OUT/j" >/dev/null; then
		ok "$label ($(since "$t")s)"
	else
		bad "$label: JSON does not satisfy: $cond"
		sed 's/^/    /' "$OUT/j"
	fi
}

# gid_index DEV IPV4: index of the RoCE GID ::ffff:IPV4 (one grep over the table)
gid_index() {
	local want f
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${2//./ })
	f=$(grep -lx "$want" /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null |
		sort -t/ -k9 -n | head -n1)
	echo "${f##*/}"
}

# rdma_qps DEV: QPs the kernel holds for DEV ("0: rxe0: pd 1 cq 1 qp 1 ...")
rdma_qps() {
	rdma resource show | awk -v d="$1:" '$2 == d { for (i = 3; i < NF; i++) if ($i == "qp") print $(i + 1) }'
}

# removal_mid_run LABEL DEV REGEX CMD...: start a long check on DEV, run CMD
# when its QPs exist; the check must fail fast with an error matching REGEX,
# CMD must finish and DEV must be gone
removal_mid_run() {
	local label=$1 dev=$2 re=$3 pid qps i t rc crc
	shift 3
	timeout 120 "$IBVFCTL" rc-check "$dev" --iterations 1000000 --timeout 90000 \
		>"$OUT/rm.out" 2>&1 &
	pid=$!
	BGPIDS+=($pid)
	for i in $(seq 1 100); do
		qps=$(rdma_qps "$dev")
		[ "${qps:-0}" -ge 3 ] && break # QP1 of the kernel + our two
		sleep 0.1
	done
	t=$(up)
	timeout 60 "$@"
	crc=$?
	local took_cmd
	took_cmd=$(since "$t")
	for i in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	if kill -0 $pid 2>/dev/null; then
		kill $pid # timeout(1) passes SIGTERM on to the check
		wait $pid
		bad "$label: the check still ran 10 s after '$*' (hang)"
		return
	fi
	wait $pid
	rc=$?
	sed 's/^/    /' "$OUT/rm.out"
	echo "    '$*' exit $crc after ${took_cmd}s; check exit $rc after $(since "$t")s"
	if [ $rc -eq 1 ] && [ $crc -eq 0 ] && grep -Eq "$re" "$OUT/rm.out" &&
		! rdma dev show | grep -qw "$dev"; then
		ok "$label: check failed fast, device gone"
	else
		bad "$label: check exit $rc, '$*' exit $crc"
	fi
}

sec "kernel $(uname -r), $(nproc) vCPU; ibvfctl = $IBVFCTL"
ip link set lo up
modprobe -a ib_uverbs rdma_rxe veth dummy || bad "modprobe ib_uverbs rdma_rxe veth dummy"
echo "# modules loaded at $(since "$T0")s"
rdma link add rxe0 type rxe netdev lo || bad "rdma link add rxe0 (lo)"
echo "# rxe0 at $(since "$T0")s"
ip link add vA type veth peer name vB
ip addr add 10.77.0.1/24 dev vA
ip addr add 10.77.0.2/24 dev vB
ip link set vA up
ip link set vB up
rdma link add rxe_vA type rxe netdev vA || bad "rdma link add rxe_vA (veth)"
rdma link show
G_LO=$(gid_index rxe0 127.0.0.1)
G_VA=$(gid_index rxe_vA 10.77.0.1)
echo "# GID index of 127.0.0.1 on rxe0: $G_LO; of 10.77.0.1 on rxe_vA: $G_VA"

# valgrind is slow under TCG (20-60 s): run it alongside the other checks, on
# a device of its own so their kernel object counts stay undisturbed
VGPID=
if [ "$IBVF_VMLAB_VALGRIND" = 1 ] && [ "$VALGRIND_OK" != 1 ]; then
	echo "# IBVF_VMLAB_VALGRIND=1 ignored: valgrind cannot run sanitizer builds"
elif [ "$IBVF_VMLAB_VALGRIND" = 1 ] && ! command -v valgrind >/dev/null; then
	bad "IBVF_VMLAB_VALGRIND=1 but valgrind is missing (Debian: valgrind)"
elif [ "$IBVF_VMLAB_VALGRIND" = 1 ]; then
	ip link add dvg type dummy
	ip addr add 10.79.0.1/24 dev dvg
	ip link set dvg up
	rdma link add rxe_vg type rxe netdev dvg
	(
		t=$(up)
		timeout 300 valgrind -q --error-exitcode=99 --leak-check=full \
			--errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
			"$IBVFCTL" rc-check rxe_vg --iterations 50 --timeout 120000
		rc=$?
		since "$t" >"$OUT/vg.time"
		exit $rc
	) >"$OUT/vg.out" 2>&1 &
	VGPID=$!
	BGPIDS+=($VGPID)
	echo "# valgrind started on rxe_vg (pid $VGPID)"
fi

sec "passing checks"
FIRST='.status == "pass" and .gid == "::ffff:127.0.0.1" and .pkey == "0xffff"
	and .pkey_index == 0 and .iterations == 1000 and .link_layer == "Ethernet"
	and .msg_size == 64 and .mr_bytes == 65536 and .verb == "" and .errno == 0
	and 0 < .min_us and .min_us <= .p50_us and .p50_us <= .p99_us and .p99_us <= .max_us'
pass_json "rxe0 with the GID index of 127.0.0.1" "$FIRST and .gid_index == $G_LO" \
	-- rxe0 --gid-index "$G_LO"
pass_json "rxe0 picks the IPv4 GID by itself" \
	".status == \"pass\" and .gid_index == $G_LO" -- rxe0:1
pass_json "rxe_vA with the GID index of the veth address 10.77.0.1" \
	".status == \"pass\" and .gid == \"::ffff:10.77.0.1\" and .gid_netdev == \"vA\"" \
	-- rxe_vA:1 --gid-index "$G_VA"
pass_json "rxe0 --pkey 0xffff (default partition, full)" \
	".pkey == \"0xffff\" and .pkey_index == 0 and .peer_pkey_index == 0" -- rxe0 --pkey 0xffff
pass_json "rxe0 --pkey 0x7fff --full, 4 KiB messages" \
	".pkey == \"0xffff\" and .msg_size == 4096" -- rxe0 --pkey 0x7fff --full --size 4096 --iterations 300
pass_json "rxe0 --pkey 0x8005 --roce-default-pkey: RoCE port, default P_Key checked and said" \
	".pkey == \"0xffff\" and .pkey_index == 0 and .pkey_roce_default == true" -- \
	rxe0 --pkey 0x8005 --roce-default-pkey --iterations 200
pass_json "rxe0 --pkey 0xffff --roce-default-pkey: present, so not the RoCE rule" \
	".pkey_roce_default == false" -- rxe0 --pkey 0xffff --roce-default-pkey --iterations 200

sec "checks that must fail with a clear error"
expect 1 'PKey 0x8005 \(full member of partition 0x0005\) is not in the P_Key table \(\[0\]=0xffff\)' \
	"wrong pkey names the PKey and the table" -- "$IBVFCTL" rc-check rxe0 --pkey 0x8005
expect 1 'PKey 0x7fff \(limited member.*full member \(0xffff at index 0\), not limited' \
	"limited pkey on a full-member port is reported" -- "$IBVFCTL" rc-check rxe0 --pkey 0x7fff
expect 1 '"status": "slow"' "p99 above --p99-max fails (status slow)" -- \
	"$IBVFCTL" --json rc-check rxe0 --p99-max 0.001 --iterations 100
expect 1 'GID index 1000 is not a valid entry.*valid indexes: 0 1' "bad GID index lists the valid ones" -- \
	"$IBVFCTL" rc-check rxe0 --gid-index 1000
expect 1 'RDMA device not found in this netns \(visible: .*rxe0' "unknown device lists the visible ones" -- \
	"$IBVFCTL" rc-check nosuchdev
expect 1 'no such port: the device has 1 port' "port 2 of a 1-port device" -- "$IBVFCTL" rc-check rxe0:2
expect 2 "PKey 0x0000 is invalid|'0x0'" "pkey 0 is a usage error" -- "$IBVFCTL" rc-check rxe0 --pkey 0x0
expect 1 'ibv_reg_mr failed: .*RLIMIT_MEMLOCK \(memlock\) is 4096 bytes' \
	"RLIMIT_MEMLOCK 4 KiB without CAP_IPC_LOCK: memlock named" -- \
	setpriv --bounding-set=-ipc_lock prlimit --memlock=4096:4096 "$IBVFCTL" rc-check rxe0

sec "API tests (rc_check_vmtest): fault injection, memlock release, wait paths"
expect 0 'PASSED.*1 test' "every failing step releases every kernel object" -- "$VMTEST" faults rxe0
expect 0 'PASSED.*4 test' "completion channel, busy poll, 1 B and 1 MiB messages, overall timeout" -- \
	"$VMTEST" paths rxe0
expect 0 'PASSED.*1 test' "memlock failure releases everything; one page still fits" -- \
	setpriv --bounding-set=-ipc_lock prlimit --memlock=4096:4096 "$VMTEST" memlock rxe0

sec "ibvfctl doctor on the real kernel (modules, RDMA netns mode, uverbs, memlock)"
# doctor CHECK VERDICT REGEX DESC [doctor args...]: one check's verdict and evidence
doctor() {
	local id=$1 want=$2 re=$3 desc=$4 got
	shift 4
	"$IBVFCTL" --json doctor --no-store "$@" >"$OUT/doc" 2>"$OUT/doc.err"
	got=$(jq -r --arg id "$id" '.[] | select(.id == $id) | "\(.verdict) \(.evidence)"' "$OUT/doc")
	echo "    $id: $got"
	if [ "${got%% *}" = "$want" ] && grep -Eq -- "$re" <<<"$got"; then
		ok "doctor: $desc"
	else
		bad "doctor: $desc: want $want /$re/"
	fi
}
mkdir -p "$OUT/cni-none" "$OUT/cni-iso"
echo '{"cniVersion":"1.0.0","name":"ib","type":"ib-sriov","rdmaIsolation":true}' >"$OUT/cni-iso/10-ib.conf"
doctor kmod.ib_core ok 'ib_core is loaded' "ib_core loaded (modprobe'd above)"
doctor kmod.ib_uverbs ok 'ib_uverbs is loaded' "ib_uverbs loaded"
doctor kmod.hca ok 'rxe0' "rxe0 is an RDMA device (no PCI parent)"
doctor rdma.uverbs ok 'rxe0: uverbs[0-9]+' "rxe0 has a uverbs device and /dev/infiniband node"
if rdma system show | grep -q 'netns shared'; then
	doctor rdma.netns_mode warn '^warn shared' "shared mode, as rdma system (RDMA netlink) shows" \
		--cni-conf-dir "$OUT/cni-none"
	doctor rdma.netns_mode fail 'ask rdmaIsolation \(10-ib.conf\)' \
		"shared mode with an rdmaIsolation network" --cni-conf-dir "$OUT/cni-iso"
else
	bad "doctor: the VM should boot in shared mode: $(rdma system show)"
fi
cp "$(command -v sleep)" "$OUT/containerd"
prlimit --memlock=65536:65536 "$OUT/containerd" 60 &
BGPIDS+=($!)
sleep 0.2
doctor memlock.containerd fail "65536 bytes, from /proc/$!/limits \(running containerd\)" \
	"a running containerd with a 64 KiB memlock limit"
kill "$!" 2>/dev/null

sec "netns (shared mode: every netns sees rxe0)"
rdma system show
ip netns add ibvf-rc-shared
pass_json "rc-check --netns NAME runs inside the netns" ".status == \"pass\" and .netns == \"ibvf-rc-shared\"" \
	-- rxe0 --netns ibvf-rc-shared --iterations 300
expect 0 'PASSED.*1 test' "API in netns given by path" -- \
	"$VMTEST" netns rxe0 /run/netns/ibvf-rc-shared pass
expect 3 'netns ibvf-rc-none: cannot open /run/netns/ibvf-rc-none' "missing netns" -- \
	"$IBVFCTL" rc-check rxe0 --netns ibvf-rc-none
ip netns del ibvf-rc-shared

sec "device removed mid-run: error, no hang"
ip link add dum0 type dummy
ip addr add 10.78.0.1/24 dev dum0
ip link set dum0 up
rdma link add rxe_del type rxe netdev dum0
removal_mid_run "rdma link delete during a check" rxe_del "the device is being removed" \
	rdma link delete rxe_del
# rxe fails the QPs' sends when its netdev goes (or the removal is seen first)
removal_mid_run "netdev under the device deleted during a check" rxe_vA \
	"completed with status local QP operation error|being removed|PORT_ERR" ip link del vA

sec "netns exclusive mode: a netns without a device"
for i in $(seq 1 50); do # only possible while no other netns exists (teardown is async)
	rdma system set netns exclusive 2>/dev/null && break
	sleep 0.2
done
rdma system show | grep -q exclusive && ok "rdma system set netns exclusive" || bad "exclusive mode"
doctor rdma.netns_mode ok '^ok exclusive' "exclusive mode, as rdma system shows" \
	--cni-conf-dir "$OUT/cni-iso"
ip netns add ibvf-rc-excl
expect 1 'no RDMA device visible in this netns \(ibvf-rc-excl\)' "exclusive netns without a device" -- \
	"$IBVFCTL" rc-check rxe0 --netns ibvf-rc-excl
expect 0 'PASSED.*1 test' "API: exclusive netns without a device" -- \
	"$VMTEST" netns rxe0 ibvf-rc-excl absent
pass_json "init netns still passes in exclusive mode" '.status == "pass"' -- rxe0 --iterations 300
ip netns del ibvf-rc-excl

if [ -n "$VGPID" ]; then
	sec "valgrind (memcheck) on ibvfctl rc-check (started at the beginning)"
	wait $VGPID
	rc=$?
	sed 's/^/    /' "$OUT/vg.out"
	if [ $rc -eq 0 ] && grep -Eq 'Status: +pass' "$OUT/vg.out"; then
		ok "valgrind: passing check on rxe_vg, no memory errors or leaks ($(cat "$OUT/vg.time")s)"
	else
		bad "valgrind: exit $rc (99 = memcheck found errors or leaks)"
	fi
fi

sec "cleanup"
for d in $(rdma link show | awk '{ print $2 }' | cut -d/ -f1); do rdma link delete "$d"; done
echo
echo "# guest: $((N - FAILS)) passed, $FAILS failed in $(since "$T0")s"
[ $FAILS -eq 0 ]
