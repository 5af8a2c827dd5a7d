#!/bin/bash
# fabric-lab.sh - ibvf's simulated InfiniBand fabric: ibsim (ibsim-utils) with a
# generated topology + the real OpenSM, both through libumad2sim (LD_PRELOAD).
# No IB hardware; only abstract unix sockets (ibsim) and files under DIR.
#
#   fabric-lab.sh up DIR [options]    start ibsim (+ OpenSM), wait for SUBNET UP
#       --vfs N            VF HCA nodes vf0..vf{N-1}            (default 4)
#       --hosts N          peer HCA nodes h1..hN                (default 2)
#       --vf-guid-base G   node GUID of vf0 when not zero; vfK = G + 2K (port GUID = node + 1)
#       --zero-vfs         start every VF with port GUID 0 (as SR-IOV creates them): port INIT
#       --partitions FILE  initial OpenSM partition file (copied to DIR/partitions.conf)
#       --no-sm            do not start OpenSM
#       --topology FILE    an ibsim topology of your own instead of the generated one; it
#                          must hold HCAs "sm" (caguid 0x0002c90300001000) and "pf0"
#                          (0x0002c90300002000); lab.env then has GUID_sm and GUID_pf0 only
#   FABRIC_LAB_SM_WAIT_S   seconds 'up' waits for OpenSM's first SUBNET UP (default 15)
#   fabric-lab.sh down DIR            stop exactly the PIDs 'up' recorded (never by name)
#   fabric-lab.sh ibsim DIR 'CMD'     one ibsim console command, prints the answer
#   fabric-lab.sh run DIR NODE CMD... run a libibumad client attached to NODE (under timeout)
#   fabric-lab.sh hup DIR             SIGHUP OpenSM (re-read partitions, heavy sweep)
#   fabric-lab.sh reload DIR          SIGHUP OpenSM and wait (10 s) until that sweep ends
#                                     ("SUBNET UP"); prints the sweep's error lines;
#                                     exit 0 done, 1 timeout, 3 OpenSM died
#   fabric-lab.sh start-sm DIR / stop-sm DIR
#   fabric-lab.sh reap DIR            free ibsim client slots held by dead clients
#
# 'up' writes DIR/lab.env (shell-sourceable): LAB_DIR IBSIM_SOCKNAME UMAD2SIM
# LAB_CLIENT_DIR IBSIM_CONSOLE IBSIM_OUT OPENSM_PIDFILE OPENSM_LOG PARTITIONS_FILE
# and GUID_<node>=0x... (port GUID of port 1) for every HCA, and SWITCH_GUID.
# Topology: switch sw1; HCAs sm (OpenSM runs here), pf0 (the node's PF HCA, where
# ibvfd's umad clients attach), h1..hN, vf0..vf{M-1} (one HCA node per VF: ibsim
# and OpenSM 3.3.23 have no vports; see shared/labs/README.md).
# Exit codes: 0 ok, 1 failure, 77 a Debian package is missing (meson SKIP).
set -u
UMAD2SIM=${UMAD2SIM:-/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so}
T=${FABRIC_LAB_TIMEOUT:-20}	# default timeout for clients, seconds

die()  { echo "fabric-lab: $*" >&2; exit 1; }
need() {
	local miss=
	command -v ibsim >/dev/null || miss="$miss ibsim-utils"
	command -v opensm >/dev/null || miss="$miss opensm"
	[ -f "$UMAD2SIM" ] || miss="$miss libumad2sim0(ibsim-utils)"
	[ -z "$miss" ] && return 0
	echo "SKIP: fabric lab needs Debian packages:$miss (run tools/install-deps)" >&2
	exit 77
}
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# close_fds: in the subshell that execs a lab daemon, close every inherited
# file descriptor above stderr (bash's own script fd 255 is close-on-exec).
# ibsim and OpenSM outlive 'up'; without this they kept the open file of a
# caller's lock, e.g. 'flock /tmp/ibvf-lab.lock fabric-lab.sh up DIR' (flock(1)
# passes its locked fd to the command), and the lab lock stayed held until
# 'down', long after the command that took it had returned.
close_fds() {
	local f n
	for f in /proc/$BASHPID/fd/*; do
		n=${f##*/}
		[ "$n" -gt 2 ] && [ "$n" != 255 ] && [ -e "/proc/$BASHPID/fd/$n" ] && eval "exec $n>&-"
	done
	return 0
}
pid_of() { cat "$1/$2.pid" 2>/dev/null; }

stop_pid() {	# stop_pid DIR NAME: TERM, then KILL after 5 s, exactly the recorded PID
	local p; p=$(pid_of "$1" "$2")
	if alive "$p"; then
		kill -TERM "$p" 2>/dev/null
		for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
		alive "$p" && kill -KILL "$p" 2>/dev/null
	fi
	rm -f "$1/$2.pid"
}

gen_topology() {	# DIR VFS HOSTS VF_BASE ZERO
	local d=$1 vfs=$2 hosts=$3 vfbase=$4 zero=$5 ports i n
	ports=$((2 + hosts + vfs))
	{
		echo "switchguid=0x0002c90300000100"
		echo "Switch	$ports \"sw1\""
		n=1
		echo "[$n]	\"sm\"[1]"; n=$((n + 1))
		echo "[$n]	\"pf0\"[1]"; n=$((n + 1))
		for i in $(seq 1 "$hosts"); do echo "[$n]	\"h$i\"[1]"; n=$((n + 1)); done
		for i in $(seq 0 $((vfs - 1))); do echo "[$n]	\"vf$i\"[1]"; n=$((n + 1)); done
		echo
		n=1
		printf 'caguid=0x0002c90300001000\nHca\t1 "sm"\n[1]\t"sw1"[%d]\n\n' $n; n=$((n + 1))
		printf 'caguid=0x0002c90300002000\nHca\t1 "pf0"\n[1]\t"sw1"[%d]\n\n' $n; n=$((n + 1))
		for i in $(seq 1 "$hosts"); do
			printf 'caguid=0x%016x\nHca\t1 "h%d"\n[1]\t"sw1"[%d]\n\n' \
				$((0x0002c90300010000 + i * 0x100)) "$i" $n; n=$((n + 1))
		done
		for i in $(seq 0 $((vfs - 1))); do
			printf 'caguid=0x%016x\n' $((vfbase + 2 * i))
			printf 'Hca\t1 "vf%d"\n[1]\t"sw1"[%d]\n\n' "$i" $n; n=$((n + 1))
		done
	} > "$d/net.topo"
	{
		echo "SWITCH_GUID=0x0002c90300000100"
		echo "GUID_sm=0x0002c90300001001"
		echo "GUID_pf0=0x0002c90300002001"
		for i in $(seq 1 "$hosts"); do printf 'GUID_h%d=0x%016x\n' "$i" $((0x0002c90300010000 + i * 0x100 + 1)); done
		for i in $(seq 0 $((vfs - 1))); do
			if [ "$zero" = 1 ]; then echo "GUID_vf$i=0x0000000000000000"
			else printf 'GUID_vf%d=0x%016x\n' "$i" $((vfbase + 2 * i + 1)); fi
		done
		echo "LAB_VFS=$vfs"; echo "LAB_HOSTS=$hosts"
	} > "$d/guids.env"
}

write_opensm_conf() {
	local d=$1
	opensm -c "$d/opensm.conf.default" >/dev/null 2>&1 || die "opensm -c failed"
	sed -e "s|^guid .*|guid 0x0002c90300001001|" \
	    -e "s|^partition_config_file .*|partition_config_file $d/partitions.conf|" \
	    -e "s|^log_file .*|log_file $d/opensm.log|" \
	    -e "s|^accum_log_file .*|accum_log_file FALSE|" \
	    -e "s|^force_log_flush .*|force_log_flush TRUE|" \
	    -e "s|^dump_files_dir .*|dump_files_dir $d/|" \
	    -e "s|^console .*|console off|" \
	    -e "s|^sweep_interval .*|sweep_interval 2|" \
	    "$d/opensm.conf.default" > "$d/opensm.conf"
}

start_ibsim() {
	local d=$1
	# stdin opened read-write on the FIFO: ibsim never sees EOF (</dev/null spins a core)
	(close_fds; cd "$d" && exec env IBSIM_SOCKNAME="$IBSIM_SOCKNAME" ibsim -s net.topo 0<>ibsim.ctl >ibsim.out 2>&1) &
	echo $! > "$d/ibsim.pid"
	for _ in $(seq 200); do
		grep -qa "@$IBSIM_SOCKNAME:ctl" /proc/net/unix && return 0
		alive "$(pid_of "$d" ibsim)" || break
		sleep 0.05
	done
	cat "$d/ibsim.out" >&2; die "ibsim did not come up"
}

start_sm() {
	local d=$1 p
	. "$d/lab.env"
	alive "$(pid_of "$d" opensm)" && return 0
	rm -f "$d/opensm.log"
	(close_fds; cd "$d" && exec env LD_PRELOAD="$UMAD2SIM" SIM_HOST=sm IBSIM_SOCKNAME="$IBSIM_SOCKNAME" \
		OSM_CACHE_DIR="$d/cache" OSM_TMP_DIR="$d" opensm -F "$d/opensm.conf" \
		>"$d/opensm.stdout" 2>&1 </dev/null) &
	echo $! > "$d/opensm.pid"
	for _ in $(seq $((${FABRIC_LAB_SM_WAIT_S:-15} * 20))); do
		grep -q "SUBNET UP" "$d/opensm.log" 2>/dev/null && return 0
		p=$(pid_of "$d" opensm)
		alive "$p" || { tail "$d/opensm.stdout" >&2; die "opensm died"; }
		sleep 0.05
	done
	die "no SUBNET UP from opensm within ${FABRIC_LAB_SM_WAIT_S:-15} s (see $d/opensm.log)"
}

console_write() {	# DIR LINE: write one line to ibsim's console FIFO; fail (not hang) if
	# nobody reads it (ibsim died): the open of a FIFO blocks until a reader exists
	alive "$(pid_of "$1" ibsim)" || { echo "fabric-lab: ibsim is not running" >&2; return 1; }
	timeout 5 sh -c 'printf "%s\n" "$2" > "$1"' sh "$1/ibsim.ctl" "$2"
}

ibsim_cmd() {	# DIR CMD: send one console line, print the answer
	local d=$1 n; shift
	n=$(wc -l < "$d/ibsim.out")
	console_write "$d" "$*" || return 1
	sleep 0.2
	tail -n +$((n + 1)) "$d/ibsim.out" | sed -e 's/^sim> //' -e '/^$/d'
}

reap() {
	local d=$1 id pid
	ibsim_cmd "$d" Attached | sed -nE 's/^Client ([0-9]+): pid ([0-9]+) .*/\1 \2/p' |
	while read -r id pid; do
		alive "$pid" || console_write "$d" "X $id"
	done
	for c in "$d"/clients/sys-*; do [ -d "$c" ] && ! alive "${c##*sys-}" && rm -rf "$c"; done
	true
}

cmd_up() {
	local d=$1 vfs=4 hosts=2 vfbase=0x0002c90300100000 zero=0 parts= sm=1 topo=; shift
	while [ $# -gt 0 ]; do
		case $1 in
		--vfs) vfs=$2; shift ;;
		--hosts) hosts=$2; shift ;;
		--vf-guid-base) vfbase=$2; shift ;;
		--zero-vfs) zero=1 ;;
		--partitions) parts=$2; shift ;;
		--no-sm) sm=0 ;;
		--topology) topo=$2; shift ;;
		*) die "up: unknown option $1" ;;
		esac
		shift
	done
	need
	mkdir -p "$d/clients" "$d/cache" || die "cannot create $d"
	d=$(cd "$d" && pwd)
	[ -f "$d/ibsim.pid" ] && alive "$(pid_of "$d" ibsim)" && die "a lab already runs in $d"
	IBSIM_SOCKNAME=${IBSIM_SOCKNAME:-ibvf$$x$RANDOM}
	if [ -n "$topo" ]; then
		cp "$topo" "$d/net.topo" || die "cannot copy $topo"
		printf 'GUID_sm=0x0002c90300001001\nGUID_pf0=0x0002c90300002001\n' > "$d/guids.env"
		zero=0
	else
		gen_topology "$d" "$vfs" "$hosts" "$vfbase" "$zero"
	fi
	write_opensm_conf "$d"
	if [ -n "$parts" ]; then cp "$parts" "$d/partitions.conf" || die "cannot copy $parts"
	else printf 'Default=0x7fff, ipoib : ALL=full ;\n' > "$d/partitions.conf"; fi
	[ -p "$d/ibsim.ctl" ] || mkfifo "$d/ibsim.ctl"
	{
		echo "LAB_DIR=$d"
		echo "IBSIM_SOCKNAME=$IBSIM_SOCKNAME"
		echo "UMAD2SIM=$UMAD2SIM"
		echo "LAB_CLIENT_DIR=$d/clients"
		echo "IBSIM_CONSOLE=$d/ibsim.ctl"
		echo "IBSIM_OUT=$d/ibsim.out"
		echo "OPENSM_PIDFILE=$d/opensm.pid"
		echo "OPENSM_LOG=$d/opensm.log"
		echo "OPENSM_CONF=$d/opensm.conf"
		echo "PARTITIONS_FILE=$d/partitions.conf"
		cat "$d/guids.env"
	} > "$d/lab.env"
	export IBSIM_SOCKNAME
	start_ibsim "$d"
	if [ "$zero" = 1 ]; then
		# a fresh SR-IOV VF has port GUID 0: node GUID all-ones (port GUID = node + 1
		# wraps to 0). Set at run time: the topology file refuses duplicate GUIDs.
		for i in $(seq 0 $((vfs - 1))); do
			console_write "$d" "Guid \"vf$i\" 0xffffffffffffffff"
		done
		sleep 0.2
	fi
	[ "$sm" = 1 ] && start_sm "$d"
	return 0
}

cmd_down() {
	local d=$1 p
	[ -d "$d" ] || return 0
	for f in "$d"/bg-*.pid; do [ -f "$f" ] && stop_pid "$d" "$(basename "$f" .pid)"; done
	stop_pid "$d" opensm
	p=$(pid_of "$d" ibsim)
	if alive "$p"; then
		console_write "$d" Quit
		for _ in $(seq 30); do alive "$p" || break; sleep 0.1; done
	fi
	stop_pid "$d" ibsim
	rm -rf "$d"/clients/sys-* 2>/dev/null
	true
}

cmd_reload() {	# DIR: SIGHUP, then wait for the next "SUBNET UP" of that heavy sweep
	local d=$1 p n i
	. "$d/lab.env"
	p=$(pid_of "$d" opensm)
	alive "$p" || die "reload: OpenSM is not running"
	n=$(wc -l < "$OPENSM_LOG")
	kill -HUP "$p"
	for i in $(seq 200); do
		if tail -n +$((n + 1)) "$OPENSM_LOG" | grep -q "SUBNET UP"; then
			tail -n +$((n + 1)) "$OPENSM_LOG" | grep -E "ERR|ERROR|error" || true
			return 0
		fi
		if ! alive "$p"; then
			tail -n +$((n + 1)) "$OPENSM_LOG" | grep -E "ERR|ERROR|error"
			echo "fabric-lab: OpenSM (pid $p) died during the sweep" >&2
			return 3
		fi
		sleep 0.05
	done
	echo "fabric-lab: no SUBNET UP within 10 s of SIGHUP" >&2
	return 1
}

cmd_run() {	# DIR NODE CMD...
	local d=$1 node=$2 here asan; shift 2
	. "$d/lab.env"
	# ASan-built clients: ignore umad2sim's own heap over-read (see umad2sim.asan-supp)
	here=$(cd "$(dirname "$0")" && pwd)
	asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}suppressions=$here/umad2sim.asan-supp"
	cd "$LAB_CLIENT_DIR" && exec timeout -k 2 "$T" env LD_PRELOAD="$UMAD2SIM" SIM_HOST="$node" \
		IBSIM_SOCKNAME="$IBSIM_SOCKNAME" ASAN_OPTIONS="$asan" "$@"
}

[ $# -ge 2 ] || { sed -n '2,33p' "$0"; exit 2; }
cmd=$1; dir=$2; shift 2
case $cmd in
up) cmd_up "$dir" "$@" ;;
down) cmd_down "$dir" ;;
ibsim) ibsim_cmd "$dir" "$*" ;;
run) cmd_run "$dir" "$@" ;;
hup) kill -HUP "$(pid_of "$dir" opensm)" ;;
reload) cmd_reload "$dir" ;;
start-sm) start_sm "$dir" ;;
stop-sm) stop_pid "$dir" opensm ;;
reap) reap "$dir" ;;
*) die "unknown command $cmd" ;;
esac
