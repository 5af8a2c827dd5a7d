#!/bin/bash
# ibvfctl port show / wait / watch (daemon/port/port_watch.c) against real
# OpenSM on ibsim, through umad2sim:
#   - ports INIT before OpenSM sweeps; `port wait` returns ACTIVE once it does
#     (self view on the VF node, and from pf0 by port GUID through the SA);
#   - the local (umad sysfs) source next to the fabric (SMP) source;
#   - ibsim Unlink -> DOWN, ReLink -> ACTIVE, with observed transition times;
#   - a PKey added by editing the partition file + SIGHUP shows up with the
#     right membership bit (full 0x8000|k, limited k) and its index; removal
#     is detected;
#   - the timeout path reports what it observed; an SM that is gone;
#   - bad input: unknown device/port, contradictory options;
#   - every client exits cleanly on SIGTERM and frees its ibsim slot.
# Usage: test-port-watch.sh [IBVFCTL]  (meson passes the built ibvfctl)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
# Debian's python3 (tools/install-deps) parses the JSON output; prefer it over
# wrappers found first in PATH (a pyenv shim costs a second per call).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || lab_skip "python3 missing (tools/install-deps)"
CTL=${1:-${IBVFCTL:-}}
[ -x "$CTL" ] || { echo "usage: $0 IBVFCTL (built ibvfctl)" >&2; exit 2; }
CTL=$(realpath "$CTL")	# clients run in the lab's client directory
FL=$here/fabric-lab.sh
D=$(mktemp -d /tmp/ibvf-portwatch-test.XXXXXX)
BG_PIDS=()
cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	"$FL" down "$D"
	rm -rf "$D"
}
trap cleanup EXIT

printf 'Default=0x7fff, ipoib : ALL=full ;\n' > "$D/p.conf"
"$FL" up "$D" --vfs 2 --hosts 1 --no-sm --partitions "$D/p.conf"
rc=$?
[ $rc = 77 ] && lab_skip "fabric lab packages missing"
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab.env"
ok "ibsim up without OpenSM"

# Fast polling so observed times mean something; fabric source (umad2sim's sysfs is a snapshot).
cat > "$D/ibvfd.json" <<EOF
{ "state_dir": "$D/state", "run_dir": "$D/run",
  "port_watch": { "source": "fabric", "poll_min_ms": 5, "poll_max_ms": 20,
                  "mad_timeout_ms": 100, "mad_retries": 1 } }
EOF
ctl() {	# ctl NODE ARGS...: ibvfctl on NODE under umad2sim + timeout
	local node=$1
	shift
	"$FL" run "$D" "$node" "$CTL" -c "$D/ibvfd.json" "$@"
}
bg() {	# bg NAME NODE ARGS...: ibvfctl in the background; pid in $D/bg-NAME.pid
	local name=$1 node=$2
	shift 2
	# fabric-lab.sh execs timeout(1), so $! is the process that SIGTERM must reach
	FABRIC_LAB_TIMEOUT=60 "$FL" run "$D" "$node" "$CTL" -c "$D/ibvfd.json" "$@" \
		>"$D/$name.out" 2>"$D/$name.err" &
	echo $! > "$D/bg-$name.pid"
	BG_PIDS+=("$!")
}
bg_pid() { cat "$D/bg-$1.pid"; }
# bg_ready NAME: wait (max 10 s) until the ibvfctl under timeout(1) has its
# SIGTERM handler installed (SigCgt bit 15 in /proc), i.e. it is past start-up
# and a SIGTERM makes it exit cleanly.
bg_ready() {
	local t=$(bg_pid "$1") c mask i
	for ((i = 0; i < 200; i++)); do
		for c in $(pgrep -P "$t" 2>/dev/null); do
			mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$c/status" 2>/dev/null)
			[ -n "$mask" ] && (( (16#$mask >> 14) & 1 )) && return 0
		done
		kill -0 "$t" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# first_line NAME: wait (max 10 s) for the first line of a background watch
first_line() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ -s "$D/$1.out" ] && return 0
		sleep 0.05
	done
	return 1
}
jget() {	# jget FILE KEY: one top-level value of a JSON document (strings bare)
	"$PY" -c 'import json,sys
v = json.load(open(sys.argv[1])).get(sys.argv[2])
print("" if v is None else (str(v).lower() if isinstance(v, bool) else v))' "$1" "$2" 2>/dev/null
}
now_ms() { date +%s%3N; }
# event_wait FILE KEY VALUE T TIMEOUT_S: wait (in one process, bounded by
# TIMEOUT_S) for the first JSON line of a watch stream with KEY == VALUE and
# unix_ms >= T; print its unix_ms, or exit 1.
event_wait() {
	"$PY" -c 'import json, sys, time
f, key, val, t0, end = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), time.time() + float(sys.argv[5])
while True:
    for l in open(f):
        try: e = json.loads(l)
        except ValueError: continue
        if str(e.get(key)) == val and e.get("unix_ms", 0) >= t0:
            print(e["unix_ms"]); sys.exit(0)
    if time.time() > end: sys.exit(1)
    time.sleep(0.02)' "$@"
}

# ---------------------------------------------------------------- INIT --
ctl vf0 --json port show ibsim0 > "$D/init.json"
check "vf0 is INIT with no LID before OpenSM (fabric source)" \
	test "$(jget "$D/init.json" state)/$(jget "$D/init.json" lid)" = "INIT/0"
ctl vf0 --json port show ibsim0 --source local > "$D/init-local.json"
check "local source (umad sysfs) agrees: INIT, LID 0, port GUID $GUID_vf0" \
	test "$(jget "$D/init-local.json" state)/$(jget "$D/init-local.json" lid)/$(jget "$D/init-local.json" port_guid | tr -d :)" = "INIT/0/${GUID_vf0#0x}"
check "P_Key table before any SM holds only the default 0xffff" \
	test "$(jget "$D/init.json" pkeys)" = "['0:0xffff']"
check_fail "wait with --timeout 300ms before the SM times out and says INIT" \
	"timed out after .*port INIT .*LID 0, no SM LID, but state is not ACTIVE, no LID assigned" \
	ctl vf0 port wait ibsim0 --timeout 300ms

bg init-self vf0 --json port wait ibsim0 --timeout 20s
bg init-guid pf0 --json port wait ibsim0 --guid "$GUID_vf0" --timeout 20s
sleep 1
check "both waits still waiting while no SM runs" \
	kill -0 "$(bg_pid init-self)" "$(bg_pid init-guid)"
t_sm=$(now_ms)
"$FL" start-sm "$D" || { not_ok "OpenSM start"; lab_done; exit 1; }
wait "$(bg_pid init-self)"; rc_self=$?
wait "$(bg_pid init-guid)"; rc_guid=$?
t_done=$(now_ms)
check "self wait returns 0 once OpenSM swept (rc $rc_self)" test "$rc_self" = 0
check "self wait saw ACTIVE with a LID" \
	test "$(jget "$D/init-self.out" state)" = ACTIVE -a "$(jget "$D/init-self.out" lid)" -gt 0
check "wait by port GUID from pf0 (SA PathRecord) returns 0 (rc $rc_guid)" test "$rc_guid" = 0
check "both views agree on vf0's LID" \
	test "$(jget "$D/init-self.out" lid)" = "$(jget "$D/init-guid.out" lid)"
echo "# observed: OpenSM start -> vf0 ACTIVE seen: self $(($(jget "$D/init-self.out" unix_ms) - t_sm)) ms," \
	"by GUID from pf0 $(($(jget "$D/init-guid.out" unix_ms) - t_sm)) ms; both waits done after $((t_done - t_sm)) ms"
LID_vf0=$(jget "$D/init-guid.out" lid)
ctl vf0 --json port show ibsim0 --source local > "$D/active-local.json"
check "a new process's local source snapshot shows ACTIVE and LID $LID_vf0" \
	test "$(jget "$D/active-local.json" state)/$(jget "$D/active-local.json" lid)" = "ACTIVE/$LID_vf0"
ctl pf0 --json port show ibsim0 --lid "$LID_vf0" > "$D/bylid.json"
check "show by LID from pf0 reports vf0's port GUID" \
	test "$(jget "$D/bylid.json" port_guid | tr -d :)" = "${GUID_vf0#0x}"
ctl pf0 --json port show ibsim0 --dr 0,1 --target-port 4 > "$D/swport.json"
check "show by directed route: switch port 4 (to vf0) is ACTIVE" \
	test "$(jget "$D/swport.json" state)" = ACTIVE

# ---------------------------------------------------- Unlink / ReLink --
bg watch-self vf0 --json port watch ibsim0
bg watch-guid pf0 --json port watch ibsim0 --guid "$GUID_vf0"
check "both watchers print their first observation" first_line watch-self
first_line watch-guid
t_unlink=$(now_ms)
"$FL" ibsim "$D" 'Unlink "vf0"[1]' >/dev/null
t_down=$(event_wait "$D/watch-self.out" state DOWN "$t_unlink" 5)
check "watcher on vf0 reports DOWN after Unlink" test -n "$t_down"
t_unreach=$(event_wait "$D/watch-guid.out" reachable False "$t_unlink" 5)
check "watcher from pf0 by GUID reports the port unreachable" test -n "$t_unreach"
check "wait --state down agrees" ctl vf0 port wait ibsim0 --state down --timeout 2s
t_relink=$(now_ms)
"$FL" ibsim "$D" 'ReLink "vf0"[1]' >/dev/null
t_up=$(event_wait "$D/watch-self.out" state ACTIVE "$t_relink" 5)
check "watcher on vf0 reports ACTIVE after ReLink" test -n "$t_up"
t_back=$(event_wait "$D/watch-guid.out" state ACTIVE "$t_relink" 5)
check "watcher from pf0 by GUID sees ACTIVE again" test -n "$t_back"
ms() { [ -n "$1" ] && echo "$(($1 - $2)) ms" || echo "not seen"; }
echo "# observed: Unlink -> DOWN (vf0 self, SMP) $(ms "$t_down" "$t_unlink");" \
	"Unlink -> unreachable (pf0 by GUID) $(ms "$t_unreach" "$t_unlink")"
echo "# observed: ReLink -> ACTIVE (vf0 self) $(ms "$t_up" "$t_relink");" \
	"ReLink -> ACTIVE (pf0 by GUID, SA re-resolve) $(ms "$t_back" "$t_relink")"
echo "# (console commands take ~200 ms in fabric-lab.sh; poll interval 5..20 ms)"
kill -TERM "$(bg_pid watch-self)" "$(bg_pid watch-guid)"
wait "$(bg_pid watch-self)"; rc1=$?
wait "$(bg_pid watch-guid)"; rc2=$?
check "watchers exit 0 on SIGTERM ($rc1, $rc2)" test "$rc1/$rc2" = 0/0

# ------------------------------------------------------------ P_Keys --
{
	cat "$D/p.conf"
	echo "t_full=0x0a01 : $GUID_vf0=full ;"
	echo "t_lim=0x0a02 : $GUID_vf0=limited ;"
} > "$PARTITIONS_FILE.new" && mv "$PARTITIONS_FILE.new" "$PARTITIONS_FILE"
bg pk-full pf0 --json port wait ibsim0 --guid "$GUID_vf0" --pkey 0x8a01 --timeout 10s
sleep 0.3
t_hup=$(now_ms)
"$FL" hup "$D"
wait "$(bg_pid pk-full)"; rc=$?
check "full member: wait for 0x8a01 after SIGHUP succeeds (rc $rc)" test "$rc" = 0
check "0x8a01 reported as full with its index" \
	test "$(jget "$D/pk-full.out" membership)/$(jget "$D/pk-full.out" pkey_entry)" = "full/0x8a01" \
	-a -n "$(jget "$D/pk-full.out" pkey_index)"
echo "# observed: SIGHUP -> P_Key 0x8a01 seen $(ms "$(jget "$D/pk-full.out" unix_ms)" "$t_hup")"
ctl pf0 --json port wait ibsim0 --guid "$GUID_vf0" --pkey 0x0a02 --limited --timeout 5s > "$D/pk-lim.json"
check "limited member: 0x0a02 --limited present, membership limited" \
	test "$(jget "$D/pk-lim.json" membership)/$(jget "$D/pk-lim.json" pkey_entry)" = "limited/0x0a02"
idx=$(jget "$D/pk-lim.json" pkey_index)
ctl vf0 --json port show ibsim0 > "$D/pk-self.json"
check "vf0's own P_Key table holds 0x0a02 at the same index $idx" \
	grep -q "\"$idx:0x0a02\"" "$D/pk-self.json"
check_fail "--full for a limited member times out and names the limited entry" \
	"P_Key 0x8a02 absent: index $idx holds 0x0a02 \\(limited member\\)" \
	ctl pf0 port wait ibsim0 --guid "$GUID_vf0" --pkey 0x0a02 --full --timeout 500ms
check_fail "--limited for a full member times out" "P_Key 0x0a01 \\(limited\\) absent" \
	ctl pf0 port wait ibsim0 --guid "$GUID_vf0" --pkey 0x0a01 --limited --timeout 500ms
check "--pkey 0x0a01 --any matches the full entry" \
	ctl pf0 port wait ibsim0 --lid "$LID_vf0" --pkey 0x0a01 --any --timeout 2s
ctl pf0 --json port show ibsim0 --guid "$GUID_h1" > "$D/h1.json"
check "h1 (not in t_full) does not get 0x8a01" \
	test -z "$(grep -o '0x8a01' "$D/h1.json")" -a "$(jget "$D/h1.json" state)" = ACTIVE

cp "$D/p.conf" "$PARTITIONS_FILE.new" && echo "t_lim=0x0a02 : $GUID_vf0=limited ;" >> "$PARTITIONS_FILE.new"
mv "$PARTITIONS_FILE.new" "$PARTITIONS_FILE"
bg pk-gone pf0 --json port wait ibsim0 --guid "$GUID_vf0" --pkey 0x0a01 --absent --timeout 10s
sleep 0.3
t_hup=$(now_ms)
"$FL" hup "$D"
wait "$(bg_pid pk-gone)"; rc=$?
check "removal: wait --absent for 0x0a01 after SIGHUP succeeds (rc $rc)" test "$rc" = 0
echo "# observed: SIGHUP -> P_Key 0x8a01 gone $(ms "$(jget "$D/pk-gone.out" unix_ms)" "$t_hup")"
ctl pf0 --json port show ibsim0 --guid "$GUID_vf0" > "$D/pk-after.json"
check "after removal 0x8a01 is gone and 0x0a02 stays" \
	test -z "$(grep -o '0x8a01' "$D/pk-after.json")" -a -n "$(grep -o '0x0a02' "$D/pk-after.json")"

# ----------------------------------------------------- timeouts, faults --
ctl pf0 --json port wait ibsim0 --guid "$GUID_vf0" --pkey 0x8bbb --timeout 500ms \
	> "$D/to.json" 2> "$D/to.err"; rc=$?
check "timeout exits 1 (rc $rc)" test "$rc" = 1
check "timeout message names what was missing and the table" \
	grep -qE "timed out after [0-9]+ ms .*port ACTIVE \\(LinkUp\\), LID $LID_vf0, SM LID [0-9]+, but P_Key 0x8bbb absent; table: 0xffff" "$D/to.err"
check "timeout --json output carries met=false and the observed state" \
	test "$(jget "$D/to.json" met)/$(jget "$D/to.json" state)" = "false/ACTIVE"
check_fail "unknown port GUID: the SA knows no path" "the SA knows no path to port GUID 0x0002c9030fffffff" \
	ctl pf0 port wait ibsim0 --guid 0x0002c9030fffffff --timeout 300ms
check_fail "unknown device exits 3 and names it" "no RDMA device 'mlx9_9'" \
	ctl pf0 port show mlx9_9
check_fail "unknown port exits 3" "has 1 port\\(s\\), no port 2" ctl pf0 port show ibsim0:2
check_fail "--limited with a full-bit P_Key is a usage error" "full-membership bit set" \
	ctl pf0 port wait ibsim0 --pkey 0x8a01 --limited
check_fail "--lid with --source local is a usage error" "need --source fabric" \
	ctl pf0 port show ibsim0 --lid 3 --source local
check_fail "a LID nobody has: no SMP reply" "no SMP reply" \
	ctl pf0 port show ibsim0 --lid 0x0bff
"$FL" stop-sm "$D"
check_fail "SM gone: the SA does not answer, and the wait says so" \
	"the SA \\(SM LID [0-9]+\\) did not answer" \
	ctl pf0 port wait ibsim0 --guid "$GUID_vf0" --timeout 600ms

# ------------------------------------------------------ clean clients --
bg term vf0 port watch ibsim0
bg_ready term
kill -TERM "$(bg_pid term)"
wait "$(bg_pid term)"; rc=$?
check "port watch exits 0 on SIGTERM (rc $rc)" test "$rc" = 0
bg termw pf0 port wait ibsim0 --pkey 0x8bbb --timeout 30s
bg_ready termw
kill -INT "$(bg_pid termw)"
wait "$(bg_pid termw)"; rc=$?
check "port wait exits 3 (cancelled) on SIGINT (rc $rc)" test "$rc" = 3
check "cancel is reported as such" grep -q "wait cancelled" "$D/termw.err"
sleep 0.3
att=$("$FL" ibsim "$D" Attached)
left=$(sed -nE 's/^Client [0-9]+: pid ([0-9]+) .*/\1/p' <<<"$att" | while read -r p; do
	kill -0 "$p" 2>/dev/null || echo "$p"; done)
check "no ibsim slot held by an exited client (stale: ${left:-none})" test -z "$left"
lab_done
