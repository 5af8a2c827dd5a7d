#!/bin/bash
# fresh-root.sh - the README's two commands on a truly fresh Debian 12 root.
#
#   tests/fresh-root/fresh-root.sh [--keep] [--demo-only]
#
# Builds a Debian 12 (bookworm) root with `mmdebstrap --variant=important`
# plus git, clones the committed HEAD of this checkout into /root/ibvf in it,
# and runs there, as root, exactly what the README tells a new user to run:
# `tools/demo`, `tools/demo --cluster --no-install` (after tools/demo, which
# installed the packages and built), then `tools/run-tests` (tools/demo and
# tools/run-tests each install their Debian packages with tools/install-deps
# first). The commands run under chroot in private
# mount and PID namespaces with a fresh /proc, the host's /sys and /dev
# (rbind: /dev/pts, /dev/shm, /dev/kvm), a tmpfs on /run; the kernel is the
# host's, so kernel modules must be built in or loadable on the host.
#
# Ends with the closing line "N passed, N failed, N skipped": tools/demo
# and tools/demo --cluster count as one test each, tools/run-tests adds its
# own counts, and every step
# that could not be done (mmdebstrap, clone, a missing counts file) is one
# named failure. Exit status 0 exactly when that line has 0 failed.
#
#   --keep        keep the root (its path is printed) instead of deleting it
#   --demo-only   run tools/demo and tools/demo --cluster only (no tools/run-tests)
#   IBVF_CI_CACHE     cache directory (default /var/cache/ibvf-ci): the .deb
#                     files of every run (mmdebstrap's and tools/install-deps')
#                     and the VM lab's kernel, kept between runs
#   IBVF_CI_MIRROR    Debian mirror (default: the one this host's apt uses,
#                     from /etc/apt/sources.list.d/*.sources or sources.list;
#                     security updates from ${mirror}-security)
#   IBVF_COUNTS_FILE  also write "PASSED FAILED SKIPPED" to this file
#   IBVF_REQUIRE_LABS passed into the root (CI sets 1: a lab SKIP fails)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
KEEP=0 DEMO_ONLY=0
for a in "$@"; do
	case $a in
	--keep) KEEP=1 ;;
	--demo-only) DEMO_ONLY=1 ;;
	-h|--help) sed -n '2,32p' "$0"; exit 0 ;;
	*) echo "fresh-root: unknown option $a" >&2; exit 2 ;;
	esac
done
CACHE=${IBVF_CI_CACHE:-/var/cache/ibvf-ci}
# The Debian mirror this host's apt already uses (deb822 .sources first, then
# one-line sources.list), so the root is built from the same place.
host_mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /-security\/?$/) { print $i; exit } }' "$f"
	done | head -1 | grep . && return
	awk '$1 == "deb" && $0 !~ /-security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
		/etc/apt/sources.list 2>/dev/null | head -1
}
MIRROR=${IBVF_CI_MIRROR:-$(host_mirror)}

T0=$(date +%s%N)
since() { awk -v ns=$(($(date +%s%N) - $1)) 'BEGIN { printf "%.1f", ns / 1e9 }'; }
say() { printf '[fresh-root %6ss] %s\n' "$(since "$T0")" "$*"; }
PASSED=0 FAILED=0 SKIPPED=0 FAILURES=() TIMES=()
fail() { FAILED=$((FAILED + 1)); FAILURES+=("$*"); say "FAILED: $*"; }
finish() {
	local f
	for f in "${FAILURES[@]}"; do echo "fresh-root: failed: $f"; done
	say "times: ${TIMES[*]} total $(since "$T0") s"
	[ -n "${IBVF_COUNTS_FILE:-}" ] && echo "$PASSED $FAILED $SKIPPED" >"$IBVF_COUNTS_FILE"
	echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	[ "$FAILED" = 0 ]
	exit
}

[ "$(id -u)" = 0 ] || { fail "not root: mmdebstrap and chroot need root"; finish; }
if ! command -v mmdebstrap >/dev/null; then
	say "installing mmdebstrap (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	{ apt-get -o DPkg::Lock::Timeout=600 update -q &&
		apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends mmdebstrap
	} >/tmp/ibvf-fresh-root-apt.log 2>&1 ||
		{ tail -20 /tmp/ibvf-fresh-root-apt.log; fail "apt-get install mmdebstrap"; finish; }
fi
[ -n "$MIRROR" ] || { fail "no Debian mirror in this host's apt sources: set IBVF_CI_MIRROR"; finish; }
mkdir -p "$CACHE/archives/partial" "$CACHE/vmlab" || { fail "cache $CACHE"; finish; }

ROOT=$(mktemp -d /var/tmp/ibvf-fresh-root.XXXXXX) || { fail "mktemp"; finish; }
cleanup() {
	# every mount lived in the namespaces that died with the chroot's
	# processes; refuse to delete anything still mounted below the root
	if [ $KEEP = 1 ]; then
		say "root kept in $ROOT"
	elif findmnt -rn -o TARGET | grep -q "^$ROOT/"; then
		say "WARNING: mounts left below $ROOT; not deleting it"
	else
		rm -rf --one-file-system "$ROOT"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- root ----
# the .deb cache is bind-mounted over the root's apt archive while mmdebstrap
# works (and unmounted before its final `apt-get clean`)
say "mmdebstrap --variant=important bookworm (+ git) into $ROOT (cache $CACHE/archives: $(ls "$CACHE/archives" | grep -c '\.deb$') .debs)"
t=$(date +%s%N)
if ! mmdebstrap --variant=important --include=git,ca-certificates \
	--dpkgopt=force-unsafe-io --skip=download/empty --skip=essential/unlink \
	--setup-hook='mkdir -p "$1/var/cache/apt/archives" &&
		mount --bind '"$CACHE"'/archives "$1/var/cache/apt/archives"' \
	--customize-hook='umount "$1/var/cache/apt/archives"' \
	bookworm "$ROOT" "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
	"deb $MIRROR-security bookworm-security main" >"$ROOT.mmdebstrap.log" 2>&1; then
	tail -30 "$ROOT.mmdebstrap.log"
	fail "mmdebstrap --variant=important bookworm"
	finish
fi
TIMES+=("mmdebstrap $(since "$t") s")
say "root ready: $(du -sh --one-file-system "$ROOT" | cut -f1)"
rm -f "$ROOT.mmdebstrap.log"

# ---------------------------------------------------------------- clone ---
head=$(git -C "$TOP" rev-parse HEAD) || { fail "git rev-parse HEAD in $TOP"; finish; }
say "cloning the committed HEAD $head of $TOP into /root/ibvf"
git -C "$TOP" bundle create "$ROOT/root/ibvf.bundle" HEAD >/dev/null 2>&1 &&
	chroot "$ROOT" git -c advice.detachedHead=false clone -q /root/ibvf.bundle /root/ibvf &&
	[ "$(chroot "$ROOT" git -C /root/ibvf rev-parse HEAD)" = "$head" ] ||
	{ fail "git clone of HEAD into the root"; finish; }
rm -f "$ROOT/root/ibvf.bundle"

# ---------------------------------------------------------------- run -----
# inroot NAME CMD...: run CMD in /root/ibvf inside the root, in new mount and
# PID namespaces (everything it starts dies with it, every mount with them)
inroot() {
	local name=$1
	shift
	unshare --mount --pid --fork --propagation private -- /bin/bash -c '
		set -e
		R=$1; shift
		# the root must be a mount point: `ip netns exec` and `ip -n` make "/"
		# rslave in their own mount namespace (EINVAL on a plain directory)
		mount --bind "$R" "$R"
		mount -t proc proc "$R/proc"
		mount --rbind /sys "$R/sys"
		mount --rbind /dev "$R/dev"
		mount -t tmpfs -o mode=755 tmpfs "$R/run"
		mkdir -p "$R/run/lock" "$R/var/cache/ibvf-vmlab"
		mount --bind "$CACHE/archives" "$R/var/cache/apt/archives"
		mount --bind "$CACHE/vmlab" "$R/var/cache/ibvf-vmlab"
		set +e
		exec chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 TERM=dumb CI="${CI:-}" \
			IBVF_REQUIRE_LABS="${IBVF_REQUIRE_LABS:-0}" IBVF_COUNTS_FILE=/root/counts \
			/bin/bash -c "cd /root/ibvf && exec \"\$@\"" inner "$@"
	' fresh-root "$ROOT" "$@" 2>&1 |
		sed -E "s|^([0-9]+ passed, [0-9]+ failed.*)\$|fresh root, $name: \1|"
	return "${PIPESTATUS[0]}"
}
export CACHE

say "tools/demo (the README's first command) in the root"
t=$(date +%s%N)
inroot tools/demo tools/demo
rc=$?
TIMES+=("demo $(since "$t") s")
if [ $rc = 0 ]; then PASSED=$((PASSED + 1)); else fail "tools/demo exited $rc"; fi

# cluster mode on a simulated 3-node fabric (the README's mention next to the
# two commands), on what tools/demo installed and built (_build-demo)
say "tools/demo --cluster --no-install in the root"
t=$(date +%s%N)
inroot "tools/demo --cluster" tools/demo --cluster --no-install
rc=$?
TIMES+=("demo-cluster $(since "$t") s")
if [ $rc = 0 ]; then PASSED=$((PASSED + 1)); else fail "tools/demo --cluster exited $rc"; fi

if [ $DEMO_ONLY = 0 ]; then
	say "tools/run-tests (the README's second command) in the root"
	t=$(date +%s%N)
	rm -f "$ROOT/root/counts"
	inroot tools/run-tests tools/run-tests
	rc=$?
	TIMES+=("run-tests $(since "$t") s")
	if read -r p f s <"$ROOT/root/counts" 2>/dev/null; then
		PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + s))
		[ "$f" = 0 ] || FAILURES+=("tools/run-tests: $f failed (see above)")
		[ $rc = 0 ] || [ "$f" != 0 ] || fail "tools/run-tests exited $rc with 0 failed counted"
	else
		fail "tools/run-tests exited $rc and wrote no counts"
	fi
fi
finish
