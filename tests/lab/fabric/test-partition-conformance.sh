#!/bin/bash
# The partition file parser against the real OpenSM 3.3.23: every case of the
# unit test's tables (test_partition_conf --dump) is given to a running
# OpenSM through a heavy sweep (SIGHUP). Files ibvf's parser accepts must be
# accepted by OpenSM; files it refuses must be ones OpenSM rejects (falling
# back to Default=0x7fff : ALL=full) or crashes on, except the few recorded
# as "accepts" where ibvf is stricter on purpose.
# usage: test-partition-conformance.sh PATH/TO/test_partition_conf
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab_need_root
FL=$here/fabric-lab.sh
DUMPER=${1:?usage: $0 test_partition_conf}
D=$(mktemp -d /tmp/ibvf-conformance.XXXXXX)
trap '"$FL" down "$D"; rm -rf "$D"' EXIT

mkdir -p "$D/cases"
"$DUMPER" --dump "$D/cases" || { echo "cannot dump the cases" >&2; exit 1; }
good='Default=0x7fff, ipoib : ALL=full ;\n'
printf "$good" > "$D/good.conf"
"$FL" up "$D" --vfs 0 --hosts 1 --partitions "$D/good.conf"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "fabric lab did not come up" >&2; exit 1; }
. "$D/lab.env"

install_file() {	# atomically, as OpenSM may read it at any time
	cp "$1" "$PARTITIONS_FILE.tmp" && mv "$PARTITIONS_FILE.tmp" "$PARTITIONS_FILE"
}

for f in "$D"/cases/*.conf; do
	name=$(basename "$f" .conf)
	install_file "$f"
	out=$("$FL" reload "$D" 2>&1)
	rc=$?
	case $name in
	valid-* | invalid-accepts-*)
		if [ $rc = 0 ] && ! grep -q "Partition configuration in error" <<<"$out"; then
			ok "$name: OpenSM accepts it"
		else
			not_ok "$name: OpenSM should accept it (rc $rc): $out"
		fi ;;
	invalid-rejects-*)
		if [ $rc = 0 ] && grep -q "Partition configuration in error" <<<"$out"; then
			ok "$name: OpenSM rejects it too ($(grep -o 'PARSE ERROR.*' <<<"$out" | head -1))"
		else
			not_ok "$name: OpenSM should reject it (rc $rc): $out"
		fi ;;
	invalid-crashes-*)
		if [ $rc = 3 ]; then
			ok "$name: OpenSM crashes on it"
		else
			not_ok "$name: OpenSM should crash on it (rc $rc): $out"
		fi
		install_file "$D/good.conf"
		"$FL" reap "$D"
		"$FL" start-sm "$D" || { not_ok "OpenSM restarts"; break; } ;;
	esac
done
lab_done
