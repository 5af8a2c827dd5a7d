#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vmlab.sh - run a script as root inside a throw-away qemu VM that boots
# Debian's own kernel with the real Linux RDMA stack (ib_core, ib_uverbs,
# rdma_rxe soft-RoCE), and return the script's exit status.
#
#   tests/lab/vm/vmlab.sh [-e NAME=VALUE]... GUEST_SCRIPT [ARG]...
#
# The VM's root file system is this machine's "/" (read-only virtio-9p plus a
# tmpfs overlay), so binaries just built on the host run unchanged inside it
# and nothing on the host is written. The VM has no network card: all RDMA
# traffic stays in the guest kernel. The guest script gets a run directory as
# its first argument ($1); "$1/env" holds the -e variables (source it).
#
# The kernel package (Debian's current linux-image-amd64 dependency) is
# fetched with `apt-get download` and unpacked with dpkg-deb -- never
# installed -- into a cache that survives across runs:
#   IBVF_VMLAB_CACHE  cache directory (default /var/cache/ibvf-vmlab, or
#                     ~/.cache/ibvf-vmlab when that is not writable)
#   IBVF_VMLAB_KPKG   kernel package (default: the cached one while it is less
#                     than 7 days old, else what linux-image-amd64 depends on;
#                     without apt lists, the newest cached one)
#   IBVF_VMLAB_TIMEOUT  seconds for the whole VM run (default 300)
#   IBVF_VMLAB_MEM / IBVF_VMLAB_SMP  guest RAM (default 1G) and vCPUs (2)
#   IBVF_VMLAB_KEEP   keep the run directory (console log) after the run
#   IBVF_REQUIRE_LABS=1  a missing prerequisite is a failure, not a skip
# ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS, IBVF_REQUIRE_LABS and
# IBVF_VMLAB_VALGRIND are passed to the guest (a guest script may exit 77
# itself when a tool is missing).
#
# Exit: the guest script's status; 77 = prerequisite missing (skip);
# 124 = timeout; 125 = the guest died without reporting a status.
set -euo pipefail

T0=$(date +%s%N)
HERE=$(cd "$(dirname "$0")" && pwd)
TIMEOUT=${IBVF_VMLAB_TIMEOUT:-300}
MEM=${IBVF_VMLAB_MEM:-1G}
SMP=${IBVF_VMLAB_SMP:-2}

elapsed() { awk -v ns=$(($(date +%s%N) - T0)) 'BEGIN { printf "%.1f", ns / 1e9 }'; }
say() { printf '[vmlab %7ss] %s\n' "$(elapsed)" "$*" >&2; }
die() { say "ERROR: $*"; exit 2; }
# a missing prerequisite: skip (77), or fail when labs are required (CI)
missing() {
	if [ "${IBVF_REQUIRE_LABS:-0}" = 1 ]; then
		say "FAIL: $* (IBVF_REQUIRE_LABS=1: labs must not be skipped)"
		exit 1
	fi
	echo "SKIP: $*" >&2
	exit 77
}

ENVS=()
while getopts "e:" opt; do
	case $opt in
	e) ENVS+=("$OPTARG") ;;
	*) die "usage: $0 [-e NAME=VALUE]... GUEST_SCRIPT [ARG]..." ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || die "usage: $0 [-e NAME=VALUE]... GUEST_SCRIPT [ARG]..."
GUEST=$(readlink -f "$1")
shift
[ -r "$GUEST" ] || die "guest script $GUEST not readable"

# ---------------------------------------------------------- prerequisites --
for c in qemu-system-x86_64 cpio depmod modprobe dpkg-deb timeout flock; do
	command -v "$c" >/dev/null ||
		missing "VM lab needs '$c' (Debian: qemu-system-x86 cpio kmod dpkg; see tools/install-deps)"
done
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! ldd "$BUSYBOX" >/dev/null 2>&1 ||
	missing "VM lab needs a static /bin/busybox (Debian: busybox-static)"
command -v rdma >/dev/null || missing "VM lab needs 'rdma' in the guest (Debian: iproute2)"
[ -e /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so ] ||
	ls /usr/lib/*/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 ||
	missing "VM lab needs the rxe verbs provider (Debian: ibverbs-providers)"

# ------------------------------------------------------------------ cache --
CACHE=${IBVF_VMLAB_CACHE:-/var/cache/ibvf-vmlab}
if ! mkdir -p "$CACHE" 2>/dev/null || [ ! -w "$CACHE" ]; then
	[ -n "${IBVF_VMLAB_CACHE:-}" ] && die "cache $CACHE is not writable"
	CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ibvf-vmlab
	mkdir -p "$CACHE"
fi
exec 9>"$CACHE/.lock"
flock 9 # one preparer at a time; released before the VM boots

KPKG=${IBVF_VMLAB_KPKG:-}
# a cached kernel younger than a week is used as is (apt-cache costs seconds)
if [ -z "$KPKG" ] && [ -n "$(find "$CACHE" -maxdepth 2 -name .complete -mtime -7 2>/dev/null)" ]; then
	KPKG=$(cd "$CACHE" && ls -d linux-image-*/ 2>/dev/null | sort -V | tail -n1 | tr -d /)
fi
if [ -z "$KPKG" ] && command -v apt-cache >/dev/null; then
	KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }') || true
fi
if [ -z "$KPKG" ]; then
	KPKG=$(cd "$CACHE" && ls -d linux-image-*/ 2>/dev/null | sort -V | tail -n1 | tr -d /)
	[ -n "$KPKG" ] || missing "no kernel: apt-cache cannot resolve linux-image-amd64 (run apt-get update) and $CACHE holds none"
fi
KROOT=$CACHE/$KPKG

if [ ! -e "$KROOT/.complete" ]; then
	command -v apt-get >/dev/null || missing "no cached kernel and no apt-get to fetch $KPKG"
	say "fetching $KPKG into $CACHE (apt-get download + dpkg-deb -x; not installed)"
	W=$(mktemp -d "$CACHE/.fetch.XXXXXX")
	trap 'rm -rf "$W"' EXIT
	if ! (cd "$W" && apt-get download "$KPKG" 2>&1 | grep -v unsandboxed >&2); then
		missing "apt-get download $KPKG failed (no network or apt lists?)"
	fi
	dpkg-deb -x "$W"/"$KPKG"_*.deb "$W/root"
	rm -f "$W"/*.deb
	KV=$(ls "$W/root/lib/modules")
	depmod -b "$W/root" "$KV" # the .deb ships no modules.dep (its postinst makes it)
	# qemu boots the uncompressed ELF vmlinux through its PVH entry (Debian
	# kernels: CONFIG_PVH=y) faster than the bzImage: find the payload.
	VZ=$(ls "$W"/root/boot/vmlinuz-*)
	for fmt in 'fd377a585a00:xz -dc' '28b52ffd:zstd -dcq' '1f8b0800:gzip -dc'; do
		magic=${fmt%%:*} unpack=${fmt#*:}
		pat=$(echo "$magic" | sed 's/../\\x&/g')
		for off in $(LC_ALL=C grep -abo -P "$pat" "$VZ" | cut -d: -f1); do
			tail -c +$((off + 1)) "$VZ" | $unpack >"$W/vmlinux" 2>/dev/null || true
			if [ "$(head -c4 "$W/vmlinux" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
				mv "$W/vmlinux" "$W/root/boot/vmlinux-$KV"
				break 2
			fi
		done
	done
	rm -f "$W/vmlinux"
	rm -rf "$KROOT"
	mv "$W/root" "$KROOT"
	touch "$KROOT/.complete"
	rm -rf "$W"
	trap - EXIT
	# keep the cache bounded: only this kernel stays
	for old in "$CACHE"/linux-image-*; do
		[ "$old" = "$KROOT" ] || rm -rf "$old"
	done
	say "cached $KPKG"
fi
KVER=$(ls "$KROOT/lib/modules")
MODDIR=$KROOT/lib/modules/$KVER
KERNEL=$KROOT/boot/vmlinux-$KVER
[ -s "$KERNEL" ] || KERNEL=$(ls "$KROOT"/boot/vmlinuz-*)

# -------------------------------------------------------------- initramfs --
# static busybox, the modules that mount the host root (virtio 9p + overlay),
# and /init. Rebuilt when this script changes (the name carries its hash).
IRD_ID=$(cat "$0" "$BUSYBOX" | sha256sum | cut -c1-16)
IRD=$KROOT/initramfs-$IRD_ID.cpio
if [ ! -s "$IRD" ]; then
	say "building initramfs for $KVER"
	W=$(mktemp -d "$CACHE/.ird.XXXXXX")
	trap 'rm -rf "$W" "$W.cpio"' EXIT
	mkdir -p "$W"/{bin,mods,proc,sys,dev,host,rw,root}
	cp "$BUSYBOX" "$W/bin/busybox"
	n=0
	for ko in $(for m in virtio_pci 9pnet_virtio 9p overlay; do
		modprobe -d "$KROOT" -S "$KVER" --show-depends "$m"
	done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }'); do
		n=$((n + 1))
		name=$(basename "$ko")
		name=${name%.xz} name=${name%.zst} name=${name%.gz}
		dst=$W/mods/$(printf %02d $n)-$name # busybox insmod wants plain .ko
		case $ko in
		*.xz) xz -dc "$ko" >"$dst" ;;
		*.zst) zstd -dcq "$ko" >"$dst" ;;
		*.gz) gzip -dc "$ko" >"$dst" ;;
		*) cp "$ko" "$dst" ;;
		esac
	done
	cat >"$W/init" <<'INIT'
#!/bin/busybox sh
# stage 1: mount the host root read-only with a tmpfs overlay, switch to it
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
fail() { echo "IBVF_VMLAB: $*"; echo IBVF_VMLAB_EXIT=125; poweroff -f; }
for m in /mods/*.ko; do insmod "$m" || fail "insmod $m"; done
for a in $(cat /proc/cmdline); do
	case $a in
	ibvf.script=*) SCRIPT=${a#*=} ;;
	ibvf.run=*) RUN=${a#*=} ;;
	ibvf.moddir=*) MODDIR=${a#*=} ;;
	esac
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /host ||
	fail "9p mount of the host root"
mount -t tmpfs -o mode=755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /root ||
	fail "overlay mount"
R=/root
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
mount -t tmpfs -o mode=755 tmpfs $R/run # the host's /run stays hidden
mkdir -p $R/run/lock $R/run/netns $R/lib/modules/$(uname -r)
mount --bind $R$MODDIR $R/lib/modules/$(uname -r)
cat >$R/run/ibvf-vmlab-stage2 <<EOS
#!/bin/busybox sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C
cd /
echo "IBVF_VMLAB: guest ready at \$(cut -d' ' -f1 /proc/uptime)s"
/bin/bash $SCRIPT $RUN </dev/console >/dev/console 2>&1
echo "IBVF_VMLAB_EXIT=\$?"
/bin/busybox poweroff -f
EOS
chmod 755 $R/run/ibvf-vmlab-stage2
umount /proc /sys /dev
# switch_root, not chroot: the kernel's usermode helpers (modprobe on
# request_module) resolve paths from init's root
exec switch_root /root /bin/busybox sh /run/ibvf-vmlab-stage2
fail "switch_root"
INIT
	chmod 755 "$W/init"
	(cd "$W" && find . | cpio -o -H newc --quiet) >"$W.cpio"
	rm -f "$KROOT"/initramfs-*.cpio
	mv "$W.cpio" "$IRD"
	rm -rf "$W"
	trap - EXIT
fi
flock -u 9

# --------------------------------------------------------------------- run --
RUN=$(mktemp -d "${TMPDIR:-/tmp}/ibvf-vmlab.XXXXXX")
chmod 755 "$RUN"
QPID=
cleanup() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null && wait "$QPID" 2>/dev/null
	[ -n "${IBVF_VMLAB_KEEP:-}" ] && say "run directory kept: $RUN" || rm -rf "$RUN"
}
trap cleanup EXIT
{
	for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS IBVF_REQUIRE_LABS IBVF_VMLAB_VALGRIND; do
		[ -n "${!v:-}" ] && printf 'export %s=%q\n' "$v" "${!v}"
	done
	for kv in "${ENVS[@]}"; do
		printf 'export %s=%q\n' "${kv%%=*}" "${kv#*=}"
	done
	printf 'IBVF_VMLAB_ARGS=('
	[ $# -gt 0 ] && printf '%q ' "$@"
	echo ')'
} >"$RUN/env"
LOG=$RUN/console.log
QEMU=(qemu-system-x86_64 -accel tcg -cpu max -m "$MEM" -smp "$SMP"
	-nodefaults -no-user-config -display none -no-reboot -serial "file:$LOG"
	-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
	-kernel "$KERNEL" -initrd "$IRD"
	-append "console=ttyS0 panic=-1 quiet loglevel=3 ibvf.script=$GUEST ibvf.run=$RUN ibvf.moddir=$MODDIR")
[ -r /usr/share/qemu/qboot.rom ] && QEMU+=(-bios /usr/share/qemu/qboot.rom)
say "booting $KPKG (TCG, $SMP vCPU, $MEM) running $(basename "$GUEST")"
: >"$LOG"
"${QEMU[@]}" </dev/null >"$RUN/qemu.out" 2>&1 &
QPID=$!
tail -n +1 -f --pid=$QPID "$LOG" | sed -u 's/\r$//' &
TPID=$!
deadline=$(($(date +%s) + TIMEOUT))
while kill -0 "$QPID" 2>/dev/null && [ "$(date +%s)" -lt $deadline ]; do
	sleep 0.2
done
if kill -0 "$QPID" 2>/dev/null; then
	kill "$QPID"
	wait "$QPID" 2>/dev/null || true
	QPID=
	wait "$TPID" 2>/dev/null || true
	say "TIMEOUT: the VM ran longer than ${TIMEOUT}s"
	exit 124
fi
wait "$QPID" || true
QPID=
wait "$TPID" 2>/dev/null || true
cat "$RUN/qemu.out" >&2
RC=$(grep -a -o 'IBVF_VMLAB_EXIT=[0-9]*' "$LOG" | tail -n1 | cut -d= -f2)
if [ -z "$RC" ]; then
	say "the guest died without reporting an exit status"
	exit 125
fi
say "guest exit status $RC; wall time $(elapsed)s"
exit "$RC"
