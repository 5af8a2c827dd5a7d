#!/bin/bash
# bench-fabric-audit.sh IBVFCTL FABRIC_AUDIT_STORE OPENSM_MODULE_DIR [LEAVES [PER_LEAF]]
# `ibvfctl fabric audit` on a generated ibsim fabric with the real OpenSM:
# a spine switch with sm and pf0, LEAVES leaf switches (default 16) with
# PER_LEAF CA ports each (default 32: 512 + 2 CA ports), every leaf CA a pool
# GUID held in the store (tenant PKeys 0x0a01 full / 0x0a02 limited in
# ibvf's section of partitions.conf). Prints the audit's wall time, SMPs
# sent, SMPs per CA port, at the default rate and unpaced, with the load
# average. Numbers only: no assertion on times. Exit 77: lab packages missing.
here=$(cd "$(dirname "$0")" && pwd)
FL=$here/../tests/lab/fabric/fabric-lab.sh
usage="usage: $0 IBVFCTL FABRIC_AUDIT_STORE OPENSM_MODULE_DIR [LEAVES [PER_LEAF]]"
CTL=$(realpath "${1:?$usage}")
STORE=$(realpath "${2:?$usage}")
SMDIR=$(realpath "${3:?$usage}")
LEAVES=${4:-16}
PER=${5:-32}
PY=/usr/bin/python3
D=$(mktemp -d /tmp/ibvf-bench-fabric-audit.XXXXXX)
trap '"$FL" down "$D"; rm -rf "$D"' EXIT
BASE=$((0x0002c90300100000))
N=$((LEAVES * PER))

# --- topology: spine sw1 [1] sm, [2] pf0, [2+L] leafL; leafL [1] spine, [1+i] cL_i
{
	echo "switchguid=0x0002c90300000100"
	echo "Switch	$((LEAVES + 2)) \"sw1\""
	echo "[1]	\"sm\"[1]"
	echo "[2]	\"pf0\"[1]"
	for l in $(seq 1 "$LEAVES"); do echo "[$((l + 2))]	\"leaf$l\"[1]"; done
	echo
	for l in $(seq 1 "$LEAVES"); do
		printf 'switchguid=0x%016x\n' $((0x0002c90300000200 + l))
		echo "Switch	$((PER + 1)) \"leaf$l\""
		echo "[1]	\"sw1\"[$((l + 2))]"
		for i in $(seq 1 "$PER"); do echo "[$((i + 1))]	\"c${l}_$i\"[1]"; done
		echo
	done
	printf 'caguid=0x0002c90300001000\nHca\t1 "sm"\n[1]\t"sw1"[1]\n\n'
	printf 'caguid=0x0002c90300002000\nHca\t1 "pf0"\n[1]\t"sw1"[2]\n\n'
	k=0
	for l in $(seq 1 "$LEAVES"); do
		for i in $(seq 1 "$PER"); do
			printf 'caguid=0x%016x\nHca\t1 "c%d_%d"\n[1]\t"leaf%d"[%d]\n\n' \
				$((BASE + 2 * k)) "$l" "$i" "$l" $((i + 1))
			k=$((k + 1))
		done
	done
} > "$D/gen.topo"

# --- partitions and the store: CA k is port GUID BASE + 2k + 1
guid() { printf '0x%016x' $((BASE + 2 * $1 + 1)); }
half=$((N / 2))
{
	echo 'Default=0x7fff, ipoib : ALL=full ;'
	echo '# BEGIN ibvf managed partitions: do not edit (ibvfd rewrites up to END)'
	echo 'ibvf_0x0a01=0x0a01 :'
	line=
	for k in $(seq 0 $((half - 1))); do
		line="$line${line:+, }$(guid "$k")=full"
		if [ $(((k + 1) % 4)) = 0 ] || [ "$k" = $((half - 1)) ]; then
			[ "$k" = $((half - 1)) ] && echo "	$line ;" || echo "	$line,"
			line=
		fi
	done
	echo 'ibvf_0x0a02=0x0a02 :'
	for k in $(seq "$half" $((N - 1))); do
		line="$line${line:+, }$(guid "$k")=limited"
		if [ $(((k + 1) % 4)) = 0 ] || [ "$k" = $((N - 1)) ]; then
			[ "$k" = $((N - 1)) ] && echo "	$line ;" || echo "	$line,"
			line=
		fi
	done
	echo '# END ibvf managed partitions'
} > "$D/p.conf"
recs=()
for k in $(seq 0 $((N - 1))); do
	if [ "$k" -lt "$half" ]; then recs+=("$(guid "$k")/0x8a01/pod$k/handed")
	else recs+=("$(guid "$k")/0x0a02/pod$k/handed"); fi
done

t0=$(date +%s%N)
FABRIC_LAB_SM_WAIT_S=${FABRIC_LAB_SM_WAIT_S:-180} "$FL" up "$D" --topology "$D/gen.topo" \
	--partitions "$D/p.conf" || exit $?
t1=$(date +%s%N)
. "$D/lab.env"
echo "fabric: $LEAVES leaves x $PER + sm + pf0 = $((N + 2)) CA ports, $((LEAVES + 1)) switches;" \
	"OpenSM's first SUBNET UP after $(((t1 - t0) / 1000000)) ms"
mkdir -m 700 "$D/state"
"$STORE" "$D/state" "$(printf '0x%016x' "$BASE")" "$(printf '0x%016x' $((BASE + 2 * N + 1)))" \
	"${recs[@]}" || exit 1
cat > "$D/ibvfd.json" <<EOF
{ "state_dir": "$D/state", "run_dir": "$D/run",
  "pool": { "ranges": [ { "start": "$(printf '0x%016x' "$BASE")",
                          "end": "$(printf '0x%016x' $((BASE + 2 * N + 1)))" } ] },
  "port_watch": { "source": "fabric", "mad_timeout_ms": 200, "mad_retries": 2 },
  "sm": { "backend": "opensm", "module_dir": "$SMDIR",
          "config": { "partition_file": "$PARTITIONS_FILE", "pid_file": "$OPENSM_PIDFILE" } } }
EOF
# OpenSM programs the P_Key tables in the sweeps after SUBNET UP: wait until the
# audit is clean (at most 120 s), unpaced so that the wait is short
for i in $(seq 120); do
	FABRIC_LAB_TIMEOUT=300 "$FL" run "$D" pf0 "$CTL" -c "$D/ibvfd.json" --json fabric audit \
		--smp-rate 100000 > "$D/warm.json" 2>/dev/null && break
	sleep 1
done
[ -s "$D/warm.json" ] || { echo "audit gave no output" >&2; exit 1; }
echo "audit clean after the SM's sweeps: $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("yes" if not d["problems"] else "no (%d problems)" % d["problems"])' "$D/warm.json")"

run() {	# run LABEL RATE
	local s e
	read -r la1 la5 _ < /proc/loadavg
	s=$(date +%s%N)
	FABRIC_LAB_TIMEOUT=600 "$FL" run "$D" pf0 "$CTL" -c "$D/ibvfd.json" --json fabric audit \
		--smp-rate "$2" > "$D/$1.json" 2>"$D/$1.err"
	rc=$?
	e=$(date +%s%N)
	"$PY" - "$D/$1.json" "$1" "$2" "$(((e - s) / 1000000))" "$rc" "$la1" "$la5" <<'PYEOF'
import json, sys
f, label, rate, wall, rc, la1, la5 = sys.argv[1:]
d = json.load(open(f))
s = d["scan"]
print("%-8s rate %6s SMP/s: %4d CA ports, %2d switches, %5d SMPs (%d failed), %.1f SMPs/port, "
      "scan %6d ms, ibvfctl wall %6s ms, %.0f SMP/s achieved, exit %s, %d findings; load avg %s %s"
      % (label, rate, s["ca_ports"], s["switches"], s["smps"], s["smp_errors"],
         s["smps"] / max(1, s["ca_ports"]), s["elapsed_ms"], wall,
         s["smps"] * 1000.0 / max(1, s["elapsed_ms"]), rc, len(d["findings"]), la1, la5))
PYEOF
}
run default 300
run unpaced 100000
FABRIC_LAB_TIMEOUT=600 "$FL" run "$D" pf0 "$CTL" -c "$D/ibvfd.json" fabric audit --smp-rate 100000 \
	--pkey 0x0a01 --matrix > "$D/matrix.txt" 2>&1
echo "table with --pkey 0x0a01 --matrix: $(grep -c '^0x0a01' "$D/matrix.txt") member rows;" \
	"$(grep '^P_Key 0x0a01' "$D/matrix.txt")"
