#!/bin/bash
# The partition file parser against the real OpenSM 3.3.23, both directions:
# every file of the corpus (tests/data/partitions/*.conf, made by its
# generate.py from opensm(8)'s grammar and OpenSM's reader) and every case of
# the unit test's tables (test_partition_conf --dump) is given to a running
# OpenSM through a heavy sweep (SIGHUP). OpenSM's verdict comes from its log
# ("Partition configuration in error": rejected; the process died: crashed),
# its partitions from the P_Key tables of the fabric's five ports (smpquery).
# ibvf's verdict and the P_Key tables it predicts come from the same parser
# the daemon uses (test_partition_conf --expect). They must be equal:
# accepted by OpenSM <=> accepted by ibvf, with the same P_Key tables.
#
# usage: test-partition-conformance.sh PATH/TO/test_partition_conf CORPUS_DIR [--record]
#   --record  rewrite CORPUS_DIR/opensm-3.3.23.txt with what OpenSM did (the
#             unit test test_corpus replays it without a lab)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
FL=$here/fabric-lab.sh
TPC=${1:?usage: $0 test_partition_conf CORPUS_DIR [--record]}
CORPUS=${2:?usage: $0 test_partition_conf CORPUS_DIR [--record]}
RECORD=${3:-}
D=$(mktemp -d /tmp/ibvf-conformance.XXXXXX)
trap '"$FL" down "$D"; rm -rf "$D"' EXIT

mkdir -p "$D/cases"
"$TPC" --dump "$D/cases" || { echo "cannot dump the cases" >&2; exit 1; }
cp "$CORPUS"/*.conf "$D/cases/" || { echo "no corpus in $CORPUS" >&2; exit 1; }
good='Default=0x7fff, ipoib : ALL=full ;\n'
printf "$good" > "$D/good.conf"
"$FL" up "$D" --vfs 0 --hosts 2 --partitions "$D/good.conf"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab.env"

install_file() {	# atomically, as OpenSM may read it at any time
	cp "$1" "$PARTITIONS_FILE.tmp" && mv "$PARTITIONS_FILE.tmp" "$PARTITIONS_FILE"
}

# The node names test_partition_conf's prediction uses, and their directed
# routes from the SM's port (switch ports: sm 1, pf0 2, h1 3, h2 4; see
# fabric-lab.sh): SMPs by directed route need neither the SA nor a P_Key
# shared with the SM (a file that makes every port a limited member leaves
# the SA unable to resolve any GUID).
NODES="sw1=0,1 sm=0 pf0=0,1,2 h1=0,1,3 h2=0,1,4"

tables() {	# one "NODE=PKEY,PKEY" word per port, entries sorted, 0x0000 dropped
	local n r t
	for nr in $NODES; do
		n=${nr%%=*} r=${nr#*=}
		t=$("$FL" run "$D" sm smpquery -D pkeys "$r" 2>/dev/null | sed -n 's/^ *[0-9]*: //p' |
			grep -oE '0x[0-9a-f]{4}' | grep -v '^0x0000$' | sort -u | paste -sd, -)
		printf ' %s=%s' "$n" "${t:-?}"
	done
}

start=$(date +%s)
: > "$D/opensm.txt"
for f in "$D"/cases/*.conf; do
	name=$(basename "$f")
	install_file "$f"
	out=$("$FL" reload "$D" 2>&1)
	rc=$?
	if [ $rc = 3 ]; then
		echo "$name crashes" >> "$D/opensm.txt"
		install_file "$D/good.conf"
		"$FL" reap "$D"
		"$FL" start-sm "$D" || { not_ok "OpenSM restarts after $name"; break; }
	elif [ $rc != 0 ]; then
		not_ok "$name: no heavy sweep after SIGHUP (rc $rc): $out"
		echo "$name unknown" >> "$D/opensm.txt"
	elif grep -q "Partition configuration in error" <<<"$out"; then
		echo "$name rejects" >> "$D/opensm.txt"
	else
		echo "$name accepts$(tables)" >> "$D/opensm.txt"
	fi
done
echo "# $(ls "$D"/cases/*.conf | wc -l) files through OpenSM in $(($(date +%s) - start)) s"

"$TPC" --expect "$D"/cases/*.conf > "$D/ibvf.txt" 2> "$D/ibvf.msgs"
while read -r name verdict rest; do
	want=$(grep -F "$name " "$D/opensm.txt" | head -1)
	got=$(grep -F "$name " "$D/ibvf.txt" | head -1)
	# ibvf refuses what OpenSM rejects or crashes on; OpenSM's generated
	# PKeys cannot be predicted, only the verdict
	w=${want/ crashes/ rejects}
	if [ "$w" = "$got" ] ||
		{ [ "${got#* accepts generated}" != "$got" ] && [ "${w%% accepts*}" != "$w" ]; }; then
		ok "$name: OpenSM and ibvf agree (${verdict})"
	else
		not_ok "$name: OpenSM: $want / ibvf: $got $(grep -F "$name:" "$D/ibvf.msgs" | head -2)"
	fi
done < "$D/opensm.txt"

if [ "$RECORD" = --record ]; then
	{
		echo "# What OpenSM 3.3.23 did with each corpus file in the fabric lab"
		echo "# (tests/lab/fabric/test-partition-conformance.sh --record): NAME accepts"
		echo "# NODE=P_KEY-TABLE..., NAME rejects, NAME crashes. Replayed by test_partition_conf."
		grep -E '^[0-9]{2}-' "$D/opensm.txt"
	} > "$CORPUS/opensm-3.3.23.txt"
	echo "# recorded $CORPUS/opensm-3.3.23.txt"
fi
lab_done
