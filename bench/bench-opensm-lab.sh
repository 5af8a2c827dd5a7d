#!/bin/bash
# bench-opensm-lab.sh BENCH_OPENSM MODULE_DIR [ROUNDS]: the lab part of
# bench_opensm - time from add_members() to the P_Key confirmed in the port's
# P_Key table (real OpenSM on ibsim, SMPs from pf0 under umad2sim).
# Prints numbers; exits 77 when the fabric lab's packages are missing.
here=$(cd "$(dirname "$0")" && pwd)
FL=$here/../tests/lab/fabric/fabric-lab.sh
BENCH=$(realpath "${1:?usage: $0 BENCH_OPENSM MODULE_DIR [ROUNDS]}")
MODDIR=$(realpath "${2:?usage: $0 BENCH_OPENSM MODULE_DIR [ROUNDS]}")
D=$(mktemp -d /tmp/ibvf-bench-opensm-lab.XXXXXX)
trap '"$FL" down "$D"; rm -rf "$D"' EXIT
printf 'Default=0x7fff, ipoib : ALL=full ;\n' > "$D/p.conf"
"$FL" up "$D" --vfs 1 --hosts 1 --partitions "$D/p.conf" || exit $?
. "$D/lab.env"
printf '{ "partition_file": "%s", "pid_file": "%s", "verify": "fabric" }\n' \
	"$PARTITIONS_FILE" "$OPENSM_PIDFILE" > "$D/sm.json"
FABRIC_LAB_TIMEOUT=600 "$FL" run "$D" pf0 "$BENCH" --lab "$MODDIR" "$(cat "$D/sm.json")" \
	"$GUID_vf0" "${3:-10}"
