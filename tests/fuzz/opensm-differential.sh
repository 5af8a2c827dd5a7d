#!/bin/bash
# opensm-differential.sh - ibvf's partition parser against the real OpenSM
# 3.3.23 on every file of fuzz corpus directories (not in the default suite:
# about 0.2 s per file). For each file it asks pc_verdict, installs the file
# in the fabric lab, SIGHUPs OpenSM and reads its verdict from the log.
#
#   opensm-differential.sh PC_VERDICT DIR...
#
# Prints one line per disagreement and a summary. Exit 1 on any: ibvf
# accepts a file OpenSM rejects or crashes on (ibvf would call such a file
# good), or ibvf refuses a file OpenSM reads (an admin's working file would
# be refused). Only verdicts are compared here; the corpus test
# (tests/lab/fabric/test-partition-conformance.sh) also compares P_Key tables.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lab/lib.sh"
lab_need_root
FL=$here/../lab/fabric/fabric-lab.sh
verbose=0
[ "${1:-}" = -v ] && { verbose=1; shift; }
VERDICT=${1:?usage: $0 [-v] PC_VERDICT DIR...}
shift
D=$(mktemp -d /tmp/ibvf-osmdiff.XXXXXX)
trap '"$FL" down "$D" >/dev/null 2>&1; rm -rf "$D"' EXIT
good='Default=0x7fff, ipoib : ALL=full ;\n'
printf "$good" > "$D/good.conf"
"$FL" up "$D" --vfs 0 --hosts 1 --partitions "$D/good.conf" >/dev/null
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab.env"
files=0 same=0 stricter=0 danger=0
for dir in "$@"; do
	for f in "$dir"/*; do
		[ -f "$f" ] || continue
		files=$((files + 1))
		v=$("$VERDICT" "$f")
		cp "$f" "$PARTITIONS_FILE.tmp" && mv "$PARTITIONS_FILE.tmp" "$PARTITIONS_FILE"
		out=$("$FL" reload "$D" 2>&1)
		rc=$?
		if [ $rc = 3 ]; then
			osm=crash
			"$FL" reap "$D" >/dev/null 2>&1
			cp "$D/good.conf" "$PARTITIONS_FILE"
			"$FL" start-sm "$D" >/dev/null || { echo "OpenSM does not restart" >&2; exit 1; }
		elif [ $rc != 0 ]; then
			osm=timeout
		elif grep -q "Partition configuration in error" <<<"$out"; then
			osm=reject
		else
			osm=accept
		fi
		case "${v%% *}/$osm" in
		accept/accept | reject/reject | reject/crash) same=$((same + 1)) ;;
		reject/accept)
			stricter=$((stricter + 1))
			echo "STRICTER: ibvf refuses what OpenSM reads: $f"
			[ $verbose = 1 ] && echo "    $v"
			;;
		*)
			danger=$((danger + 1))
			echo "DISAGREE: ibvf ${v%% *}, OpenSM $osm: $f"
			grep -o "PARSE ERROR.*" <<<"$out" | head -2 | sed 's/^/    /'
			;;
		esac
	done
done
echo "files $files: agree $same, ibvf stricter $stricter, ibvf accepts what OpenSM does not $danger"
[ $danger = 0 ] && [ $stricter = 0 ]
