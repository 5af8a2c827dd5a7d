#!/bin/bash
# ibvfctl fabric audit: argument checking that needs no RDMA device (exit 2 =
# usage), and exit 3 when there is no local port to walk from.
# Usage: test-fabric-cli.sh IBVFCTL
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lab/lib.sh"
CTL=$1
[ -x "$CTL" ] || { echo "usage: $0 IBVFCTL" >&2; exit 2; }
D=$(mktemp -d /tmp/ibvf-fabric-cli.XXXXXX)
trap 'rm -rf "$D"' EXIT
printf '{ "state_dir": "%s/state" }\n' "$D" > "$D/c.json"
usage() {	# usage WHAT PATTERN ARGS...: exit 2 and stderr matches
	local what=$1 pat=$2 rc
	shift 2
	"$CTL" -c "$D/c.json" "$@" >"$D/out" 2>"$D/err"
	rc=$?
	if [ $rc = 2 ] && grep -qE -- "$pat" "$D/err"; then ok "$what"
	else not_ok "$what (rc $rc: $(head -c 300 "$D/err"))"; fi
}
usage "bad pkey" "--pkey" fabric audit --pkey 0x1ffff
usage "bad pkey (text)" "--pkey" fabric audit --pkey tenant
for r in 0 -5 x 100001 1e3 " 5"; do
	usage "bad --smp-rate '$r'" "--smp-rate" fabric audit --smp-rate "$r"
done
usage "bad device port" "bad port number" fabric audit --device mlx5_0:0
usage "bad device port (text)" "bad port number" fabric audit --device mlx5_0:x
usage "unexpected argument" "unexpected argument 'x'" fabric audit x
usage "unknown option" "unknown option" fabric audit --frobnicate
usage "unknown command" "unknown command 'fabric frob'" fabric frob
"$CTL" -c "$D/c.json" fabric audit --help > "$D/out" 2>&1
check "--help prints the usage, exit 0" grep -q "Usage: ibvfctl fabric audit" "$D/out"
"$CTL" -c "$D/c.json" fabric audit --device no_such_dev9 >"$D/out" 2>"$D/err"
rc=$?
check "no such device: exit 3 and says so (rc $rc: $(head -c 200 "$D/err"))" \
	bash -c '[ "$1" = 3 ] && grep -q "no_such_dev9" "$2"' _ "$rc" "$D/err"
check "no local store is said, not an error" grep -q "no local store" "$D/err"
lab_done
