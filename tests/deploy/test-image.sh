#!/bin/bash
# test-image.sh - build deploy/Containerfile and run the image, with no image download.
#
#   test-image.sh [SOURCE_ROOT]
#
# 1. The base images: a bookworm root made with `mmdebstrap --variant=minbase`
#    from Debian's packages (the .debs cached in $IBVF_CI_CACHE/archives, as
#    tests/fresh-root/ does), imported as the two tags deploy/Containerfile
#    names, debian:bookworm and debian:bookworm-slim (one root for both:
#    minbase is what Debian's slim image holds). The root is kept in
#    $IBVF_CI_CACHE/image for a day (IBVF_IMAGE_NEW_BASE=1: a new one).
# 2. `podman build` of deploy/Containerfile (the tag localhost/ibvf:<project
#    version> the manifests name), runc, the Podman settings of the Podman
#    lab (tests/lab/netns/test_podman.py: private containers.conf and
#    storage.conf, vfs storage, cgroupfs), apt's archive cache mounted.
# 3. The image runs: ibvfd with host network and the lab config (noop SM
#    backend, netlink VF driver on an empty sysfs tree: no VF, nothing on the
#    host changes), and serves its API from inside (`ibvfctl daemon status`
#    in the container) and to the host (the socket in the bind-mounted run
#    dir); its /healthz and /readyz once ibvfd has the HTTP endpoint (else a
#    "# pending:" line). The init step exactly as deploy/kubernetes/daemonset.yaml
#    runs it installs ib-sriov into a scratch "host CNI bin dir", and that
#    copy runs on the host (CNI_COMMAND=VERSION).
# Root. Exits 77 (SKIP, loudly) without podman, runc or mmdebstrap unless
# IBVF_REQUIRE_LABS=1; .ci/run runs it in the host run only, as its own step.
# Ends with "N passed, N failed, N skipped" (and IBVF_COUNTS_FILE, as .ci/run
# counts); IBVF_IMAGE_KEEP=1 keeps the work dir.
set -u
SRC=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
CACHE=${IBVF_CI_CACHE:-/var/cache/ibvf-ci}
T0=$(date +%s)
P=0 F=0 S=0
say() { printf '[test-image %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
pass() { P=$((P + 1)); say "ok: $*"; }
fail() { F=$((F + 1)); say "FAILED: $*"; }
finish() {
	[ -n "${IBVF_COUNTS_FILE:-}" ] && echo "$P $F $S" >"$IBVF_COUNTS_FILE"
	echo "$P passed, $F failed, $S skipped"
	[ "$F" = 0 ]
	exit
}
skip() {
	echo "SKIP: test-image: $*" >&2
	if [ "${IBVF_REQUIRE_LABS:-0}" = 1 ]; then fail "$* (IBVF_REQUIRE_LABS=1)"; finish; fi
	S=$((S + 1))
	[ -n "${IBVF_COUNTS_FILE:-}" ] && echo "$P $F $S" >"$IBVF_COUNTS_FILE"
	echo "$P passed, $F failed, $S skipped"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "not root (podman with runc, mmdebstrap)"
if ! command -v mmdebstrap >/dev/null && command -v podman >/dev/null; then
	say "installing mmdebstrap (apt-get; as tests/fresh-root/ does)"
	{ apt-get -o DPkg::Lock::Timeout=600 update -q &&
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
			--no-install-recommends mmdebstrap
	} >/tmp/ibvf-test-image-apt.log 2>&1 || tail -20 /tmp/ibvf-test-image-apt.log
fi
for t in podman runc mmdebstrap python3; do
	command -v $t >/dev/null || skip "$t is not installed (tools/install-deps)"
done
VERSION=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$SRC/meson.build" | head -1)
IMAGE=localhost/ibvf:$VERSION

W=$(mktemp -d /var/tmp/ibvf-image.XXXXXX) || { fail mktemp; finish; }
PM=()
cleanup() {
	if [ ${#PM[@]} -gt 0 ]; then
		"${PM[@]}" rm -f -t 0 ibvf-image-test >/dev/null 2>&1
		"${PM[@]}" rm -a -f >/dev/null 2>&1
	fi
	if [ "${IBVF_IMAGE_KEEP:-0}" = 1 ]; then say "work dir kept: $W"; else rm -rf --one-file-system "$W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# the Podman lab's settings (tests/lab/netns/test_podman.py), private to $W
mkdir -p "$W/tmp" "$CACHE/archives/partial"
cat >"$W/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$W/events.log"
tmp_dir = "$W/tmp"
CONF
cat >"$W/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$W/root"
runroot = "$W/runroot"
CONF
export CONTAINERS_CONF=$W/containers.conf CONTAINERS_STORAGE_CONF=$W/storage.conf TMPDIR=$W/tmp
PM=(podman)

# ------------------------------------------------------- 1. base images ---
mirror=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /-security\/?$/) { print $i; exit } }' \
	/etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $0 !~ /-security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
	/etc/apt/sources.list 2>/dev/null | head -1)
mirror=${IBVF_CI_MIRROR:-$mirror}
[ -n "$mirror" ] || { fail "no Debian mirror in this host's apt sources: set IBVF_CI_MIRROR"; finish; }
# the root is kept in the cache for a day (IBVF_IMAGE_NEW_BASE=1: always
# make a new one); the build's apt-get update reads current package lists
BASE=$CACHE/image/bookworm-minbase.tar
mkdir -p "$CACHE/image"
if [ "${IBVF_IMAGE_NEW_BASE:-0}" != 1 ] && [ -n "$(find "$BASE" -mmin -1440 2>/dev/null)" ]; then
	pass "bookworm root from Debian's packages: $BASE (made by mmdebstrap $(( ($(date +%s) - $(stat -c %Y "$BASE")) / 60 )) min ago)"
else
	say "mmdebstrap --variant=minbase bookworm ($mirror; .deb cache $CACHE/archives)"
	t=$(date +%s)
	if mmdebstrap --variant=minbase --dpkgopt=force-unsafe-io \
		--setup-hook='mkdir -p "$1/var/cache/apt/archives" && mount --bind '"$CACHE"'/archives "$1/var/cache/apt/archives"' \
		--customize-hook='umount "$1/var/cache/apt/archives"' \
		bookworm "$CACHE/image/new.$$.tar" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
		"deb ${mirror%/}-security bookworm-security main" >"$W/mmdebstrap.log" 2>&1 &&
		mv -f "$CACHE/image/new.$$.tar" "$BASE"; then
		pass "bookworm root from Debian's packages ($(du -h "$BASE" | cut -f1), $(($(date +%s) - t)) s)"
	else
		tail -20 "$W/mmdebstrap.log"
		rm -f "$CACHE/image/new.$$.tar"
		fail "mmdebstrap bookworm"
		finish
	fi
fi
bases=$(sed -n 's/^FROM \([^ ]*\).*/\1/p' "$SRC/deploy/Containerfile" | sort -u)
for b in $bases; do
	if podman import -q "$BASE" "$b" >/dev/null 2>"$W/import.log"; then
		pass "imported the root as $b (the Containerfile's FROM)"
	else
		cat "$W/import.log"; fail "podman import $b"; finish
	fi
done

# ----------------------------------------------------------- 2. build ---
say "podman build -f deploy/Containerfile -t $IMAGE (log $W/build.log)"
t=$(date +%s)
if podman build --network host --pull=never -v "$CACHE/archives:/var/cache/apt/archives" \
	-f "$SRC/deploy/Containerfile" -t "$IMAGE" "$SRC" >"$W/build.log" 2>&1; then
	pass "podman build $IMAGE ($(($(date +%s) - t)) s)"
else
	tail -40 "$W/build.log"
	fail "podman build"
	finish
fi
size=$(podman image inspect -f '{{.Size}}' "$IMAGE" 2>/dev/null)
say "image size: $((size / 1048576)) MiB"
# runtime stage: no compiler, no -dev package, no lab code
out=$(podman run --rm --network none "$IMAGE" sh -c \
	'command -v cc gcc meson; dpkg -l | awk "/^ii/ && \$2 ~ /-dev(:|\$)/ {print \$2}"; find / -xdev \( -name "fake.so" -o -name "ibsim.so" -o -name "test_*" \) -print 2>/dev/null' 2>&1)
if [ -z "$out" ]; then pass "the image holds no compiler, -dev package or lab code"; else fail "runtime image has build or lab files: $out"; fi

# ------------------------------------------------------------- 3. run ---
L=$W/lab
mkdir -p "$L/sys/bus/pci/devices" "$L/cnibin" && mkdir -m 0700 "$L/state" "$L/run"
cat >"$L/ibvfd.json" <<CONF
{ "state_dir": "/lab/state", "run_dir": "/lab/run", "sysfs_root": "/lab/sys",
  "pool": { "ranges": [ { "start": "02:00:00:00:00:00:10:01", "end": "02:00:00:00:00:00:10:ff" } ] },
  "sm": { "backend": "noop" } }
CONF
# read-only root and a /tmp of its own, as deploy/kubernetes/daemonset.yaml runs it
if podman run -d --name ibvf-image-test --network host --read-only --tmpfs /tmp -v "$L:/lab" "$IMAGE" \
	/usr/sbin/ibvfd --foreground --config /lab/ibvfd.json >"$W/run.log" 2>&1; then
	pass "podman run --network host --read-only $IMAGE ibvfd (lab config)"
else
	cat "$W/run.log"; fail "podman run"; finish
fi
for _ in $(seq 100); do [ -S "$L/run/ibvfd.sock" ] && break; sleep 0.1; done
st=$(podman exec ibvf-image-test ibvfctl -c /lab/ibvfd.json daemon status 2>&1)
if grep -q '^Ready: *yes' <<<"$st" && grep -q "^Version: *$VERSION" <<<"$st"; then
	pass "ibvfd serves its API inside the container (ibvfctl daemon status: ready, version $VERSION)"
else
	echo "$st"; podman logs ibvf-image-test 2>&1 | tail -20; fail "ibvfctl daemon status inside the image"
fi
reply=$(python3 - "$L/run/ibvfd.sock" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
buf = b""
while not buf.endswith(b"\n"):
    buf += s.recv(65536)
print(json.dumps(json.loads(buf)["result"].get("ready")))
PY
)
if [ "$reply" = true ]; then
	pass "the host reaches ibvfd's API through the run dir (JSON-RPC status: ready)"
else
	fail "JSON-RPC status from the host: $reply"
fi
# the health endpoints, once ibvfd has them (issue 20, metrics)
pc=$(podman exec ibvf-image-test ibvfd --print-config --config /lab/ibvfd.json 2>/dev/null)
port=$(python3 -c '
import json, re, sys
c = json.load(sys.stdin)
for k, v in c.items():
    if re.search("http|metric|health", k) and isinstance(v, dict):
        for kk, vv in v.items():
            if isinstance(vv, int) and "port" in kk: print(vv); sys.exit()
            if isinstance(vv, str) and re.search(r":(\d+)$", vv) and re.search("addr|listen", kk):
                print(re.search(r":(\d+)$", vv).group(1)); sys.exit()
' <<<"$pc" 2>/dev/null)
if [ -z "$port" ]; then
	echo "# pending: ibvfd has no HTTP endpoint yet (issue 20, metrics): /healthz and /readyz not checked"
else
	for p in /healthz /readyz; do
		code=$(python3 -c 'import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=5).status)' \
			"http://127.0.0.1:$port$p" 2>&1 | tail -1)
		if [ "$code" = 200 ]; then pass "GET $p on 127.0.0.1:$port: 200"; else fail "GET $p on 127.0.0.1:$port: $code"; fi
	done
fi
podman stop -t 20 ibvf-image-test >/dev/null 2>&1
rc=$(podman inspect -f '{{.State.ExitCode}}' ibvf-image-test 2>/dev/null)
if [ "$rc" = 0 ]; then pass "ibvfd stops on SIGTERM with status 0"; else fail "ibvfd's exit status on stop: $rc"; fi

# the init step, as deploy/kubernetes/daemonset.yaml runs it
init=$(python3 - "$SRC/deploy/kubernetes/daemonset.yaml" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "DaemonSet":
        ic = d["spec"]["template"]["spec"]["initContainers"][0]
        m = next(m for m in ic["volumeMounts"] if m["mountPath"] == ic["command"][1])
        print(ic["command"][1], *ic["command"])
PY
)
read -r mnt cmd <<<"$init"
if [ -n "$mnt" ] && podman run --rm --network none --read-only -v "$L/cnibin:$mnt" "$IMAGE" $cmd >"$W/init.log" 2>&1; then
	pass "the init step ($cmd) installs ib-sriov into the host CNI bin dir: $(cat "$W/init.log")"
else
	cat "$W/init.log"; fail "init step: $cmd"
fi
v=$(CNI_COMMAND=VERSION "$L/cnibin/ib-sriov" </dev/null 2>&1)
if grep -q '"supportedVersions"' <<<"$v"; then
	pass "the installed ib-sriov runs on the host: $v"
else
	fail "ib-sriov from the image on the host: $v"
fi
say "total $(($(date +%s) - T0)) s"
finish
