# tests/lab/lib.sh - shared helpers for ibvf's shell lab tests (source it).
# A test prints "ok N - what" / "not ok N - what" lines and ends with lab_done.
LAB_TESTS=0
LAB_FAILS=0

# lab_skip REASON: exit 77 (meson SKIP) loudly, or fail when IBVF_REQUIRE_LABS=1 (CI).
lab_skip() {
	if [ "${IBVF_REQUIRE_LABS:-0}" = 1 ]; then
		echo "FAIL: lab required (IBVF_REQUIRE_LABS=1) but unavailable: $*" >&2
		exit 1
	fi
	echo "SKIP: $*" >&2
	exit 77
}

# lab_need_root: most labs create namespaces or attach to ibsim as root.
lab_need_root() {
	[ "$(id -u)" = 0 ] || lab_skip "needs root"
}

ok() {
	LAB_TESTS=$((LAB_TESTS + 1))
	echo "ok $LAB_TESTS - $*"
}

not_ok() {
	LAB_TESTS=$((LAB_TESTS + 1))
	LAB_FAILS=$((LAB_FAILS + 1))
	echo "not ok $LAB_TESTS - $*"
}

# check WHAT CMD...: ok when CMD succeeds
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# check_fail WHAT PATTERN CMD...: ok when CMD fails and its output matches PATTERN
check_fail() {
	local what=$1 pat=$2 out
	shift 2
	if out=$("$@" 2>&1); then
		not_ok "$what (unexpected success: $out)"
	elif grep -qE -- "$pat" <<<"$out"; then
		ok "$what"
	else
		not_ok "$what (output did not match '$pat': $out)"
	fi
}

# wait_for TIMEOUT_S CMD...: poll CMD every 50 ms until it succeeds or
# TIMEOUT_S seconds of wall time have passed (however slow CMD is)
wait_for() {
	local t=$1 end
	shift
	end=$(($(date +%s%N) / 1000000 + t * 1000))
	while :; do
		"$@" && return 0
		[ $(($(date +%s%N) / 1000000)) -ge $end ] && return 1
		sleep 0.05
	done
}

lab_done() {
	echo "1..$LAB_TESTS"
	echo "# $((LAB_TESTS - LAB_FAILS)) passed, $LAB_FAILS failed"
	[ "$LAB_FAILS" = 0 ]
}
