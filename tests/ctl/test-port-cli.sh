#!/bin/bash
# ibvfctl port: argument checking that needs no RDMA device (exit 2 = usage).
# Usage: test-port-cli.sh IBVFCTL
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lab/lib.sh"
CTL=$1
[ -x "$CTL" ] || { echo "usage: $0 IBVFCTL" >&2; exit 2; }
D=$(mktemp -d /tmp/ibvf-port-cli.XXXXXX)
trap 'rm -rf "$D"' EXIT
echo '{}' > "$D/empty.json"
echo '{"port_watch": {"source": "sysfs"}}' > "$D/bad.json"
usage() {	# usage WHAT PATTERN ARGS...: exit 2 and stderr matches
	local what=$1 pat=$2 rc
	shift 2
	"$CTL" -c "$D/empty.json" "$@" >"$D/out" 2>"$D/err"
	rc=$?
	if [ $rc = 2 ] && grep -qE -- "$pat" "$D/err"; then ok "$what"
	else not_ok "$what (rc $rc: $(head -c 300 "$D/err"))"; fi
}
usage "missing device" "missing device" port show
usage "bad port number" "bad port number" port show mlx5_0:0
usage "bad port number (text)" "bad port number" port show mlx5_0:x
usage "two devices" "unexpected argument 'b'" port show a b
usage "bad LID" "unicast LID" port show a --lid 0xc000
usage "bad GUID" "--guid" port show a --guid 12:34
usage "bad source" "expected local or fabric" port show a --source sysfs
usage "target with local source" "need --source fabric" port show a --guid 0x0002c90300100001 --source local
usage "bad target port" "--target-port" port show a --target-port 255
usage "unknown option" "unknown option" port show a --frobnicate
usage "limited with full bit" "full-membership bit set" port wait a --pkey 0x8001 --limited
usage "full and limited" "exclude each other" port wait a --pkey 0x0001 --full --limited
usage "membership without pkey" "need --pkey" port wait a --full
usage "absent without pkey" "need --pkey" port wait a --absent
usage "pkey key 0" "partition key 0 is reserved" port wait a --pkey 0x8000
usage "bad pkey" "--pkey" port wait a --pkey 0x1ffff
usage "bad timeout" "--timeout" port wait a --timeout 10parsecs
# strtod() took these: "nan" was then cast to an integer (undefined behaviour)
for t in nan NaN -nan inf 1e3 0x1p3s -1s +5s " 5s" 5.s .5s 1e400 99999999999999999999999s 25h; do
	usage "bad timeout '$t'" "--timeout" port wait a --timeout "$t"
done
usage "bad duration nan" "--duration" port watch a --duration nan
usage "bad state" "--state" port wait a --state sleeping
usage "bad duration" "--duration" port watch a --duration soon
usage "bad count" "--count" port watch a --count 0
usage "unknown command" "unknown command .port frob." port frob
"$CTL" -c "$D/bad.json" port show a >"$D/out" 2>"$D/err"
rc=$?
check "bad port_watch.source in the config: exit 2 naming the key (rc $rc)" \
	grep -q "port_watch.source" "$D/err"
"$CTL" port --help >"$D/out" 2>&1
check "port --help lists show, wait, watch" grep -qzE "port show.*port wait.*port watch" "$D/out"
"$CTL" port wait --help >"$D/out" 2>&1
check "port wait --help shows its options" grep -q -- "--pkey PKEY" "$D/out"
lab_done
