#!/bin/bash
# test-install.sh - `meson install` into a DESTDIR installs what a node needs.
#
#   test-install.sh SOURCE_ROOT BUILD_DIR MESON
#
# 1. DESTDIR install of BUILD_DIR (--no-rebuild: the build is done): ibvfd,
#    ibvfctl, ib-sriov in the configured CNI bin dir, the SM modules under
#    <libdir>/ibvf/sm, the systemd unit (ExecStart = the installed ibvfd),
#    install-cni, one man page per docs/man/*.md that `man -l` renders with its
#    NAME section, and nothing from the labs; the installed binaries run, and
#    install-cni installs ib-sriov into a scratch CNI bin dir.
# 2. The install options: a product-only configure (-Dtests=false, not built:
#    `meson introspect --installed` gives the plan) with -Dcni_bin_dir,
#    -Dsystemd_unit_dir, -Dprefix=/usr puts each file where docs/deploy.md says.
# The SM agent ibvf-smd (issue 19) is checked once the build has it; until
# then its absence is printed as pending. TAP output.
set -u
SRC=$1 BUILD=$2 MESON=$3
T=$(mktemp -d /tmp/ibvf-install-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0 bad=0
ok() {	# ok COND-STATUS DESCRIPTION [DETAIL]
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		bad=$((bad + 1))
		[ -n "${3:-}" ] && printf '%s\n' "$3" | sed 's/^/# /'
	fi
}
check() { local d=$1; shift; "$@" >/dev/null 2>&1; ok $? "$d"; }

# the install plan of BUILD_DIR: installed path -> destination
plan=$("$MESON" introspect --installed "$BUILD") || { echo "Bail out! meson introspect"; exit 1; }
dest_of() {	# dest_of NAME: where BUILD_DIR installs the file whose name is NAME
	python3 -c 'import json,sys; d=json.load(sys.stdin); print(next((v for k,v in d.items() if k.rsplit("/",1)[-1]==sys.argv[1]), ""))' "$1" <<<"$plan"
}

D=$T/dest
out=$("$MESON" install -C "$BUILD" --no-rebuild --destdir "$D" 2>&1)
ok $? "meson install --destdir" "$out"

for f in ibvfd ibvfctl ib-sriov noop.so opensm.so ufm.so ibvfd.service install-cni; do
	p=$(dest_of "$f")
	[ -n "$p" ] && [ -f "$D$p" ]
	ok $? "$f installed ($p)"
done
libdir_ibvf=$(dirname "$(dirname "$(dest_of noop.so)")")
case $libdir_ibvf in */ibvf) ok 0 "SM modules under <libdir>/ibvf/sm" ;; *) ok 1 "SM modules under <libdir>/ibvf/sm" "$libdir_ibvf" ;; esac
ibvfd=$(dest_of ibvfd)
grep -qx "ExecStart=$ibvfd --foreground" "$D$(dest_of ibvfd.service)"
ok $? "the systemd unit starts the installed ibvfd ($ibvfd)" "$(grep ExecStart "$D$(dest_of ibvfd.service)")"

# the installed binaries run (no lab code or build-tree path needed)
check "installed ibvfd -V runs" "$D$ibvfd" -V
check "installed ibvfctl --help runs" "$D$(dest_of ibvfctl)" --help
v=$(CNI_COMMAND=VERSION "$D$(dest_of ib-sriov)" </dev/null 2>&1)
grep -q '"supportedVersions"' <<<"$v"
ok $? "installed ib-sriov answers CNI_COMMAND=VERSION" "$v"
mkdir -p "$T/cnibin"
out=$(IBVF_CNI_PLUGIN=$D$(dest_of ib-sriov) "$D$(dest_of install-cni)" "$T/cnibin" 2>&1)
[ $? = 0 ] && [ -x "$T/cnibin/ib-sriov" ] && [ -z "$(ls -A "$T/cnibin" | grep -v '^ib-sriov$')" ]
ok $? "install-cni installs ib-sriov into a CNI bin dir, no temporary left" "$out"

# one rendered man page per docs/man/*.md
for md in "$SRC"/docs/man/*.md; do
	page=$(basename "$md" .md)
	p=$(dest_of "$page")
	if [ -z "$p" ] || [ ! -f "$D$p" ]; then
		ok 1 "man page $page installed (docs/man/$page.md; listed in docs/meson.build?)"
		continue
	fi
	case $p in */man/man${page##*.}/$page) r=0 ;; *) r=1 ;; esac
	ok $r "man page $page in <mandir>/man${page##*.} ($p)"
	txt=$(MANWIDTH=80 man -l "$D$p" 2>/dev/null)
	grep -q '^NAME' <<<"$txt" && grep -q "^ *${page%.*} " <<<"$(sed -n '/^NAME/{n;p}' <<<"$txt")"
	ok $? "man -l $page renders, NAME names ${page%.*}" "$(head -8 <<<"$txt")"
	grep -q "^${page%.*}(${page##*.}) " <<<"$txt"
	ok $? "man -l $page: its title line is ${page%.*}(${page##*.}) (first line '# ${page%.*}(${page##*.})')" "$(head -1 <<<"$txt")"
done

# nothing from the labs or tests is installed
lab=$(cd "$D" && find . -type f | grep -E '/(fake|ibsim|file)\.so$|/test_|/vf-lab-tool|fakesysfs|bench_' || true)
[ -z "$lab" ]
ok $? "no lab, test or benchmark file installed" "$lab"

# the SM agent (issue 19): checked once it is built
if grep -q '"ibvf-smd"' <<<"$("$MESON" introspect --targets "$BUILD")"; then
	p=$(dest_of ibvf-smd)
	[ -n "$p" ] && [ -x "$D$p" ]
	ok $? "ibvf-smd installed ($p)"
else
	echo "# pending: ibvf-smd (issue 19) is not in this build yet; its install is not checked"
fi

# 2. the options, on a product-only configure (not built)
B2=$T/b2
out=$("$MESON" setup "$B2" "$SRC" -Dtests=false -Dprefix=/usr -Dcni_bin_dir=/opt/cni/bin \
	-Dsystemd_unit_dir=/lib/systemd/system 2>&1)
ok $? "meson setup -Dtests=false -Dcni_bin_dir=/opt/cni/bin -Dsystemd_unit_dir=/lib/systemd/system" "$(tail -5 <<<"$out")"
plan=$("$MESON" introspect --installed "$B2" 2>/dev/null)
[ "$(dest_of ib-sriov)" = /opt/cni/bin/ib-sriov ]
ok $? "-Dcni_bin_dir: ib-sriov -> /opt/cni/bin/ib-sriov" "$(dest_of ib-sriov)"
[ "$(dest_of ibvfd.service)" = /lib/systemd/system/ibvfd.service ]
ok $? "-Dsystemd_unit_dir: the unit -> /lib/systemd/system" "$(dest_of ibvfd.service)"
[ "$(dest_of ibvfd)" = /usr/sbin/ibvfd ] && [ "$(dest_of ibvfctl)" = /usr/bin/ibvfctl ]
ok $? "-Dprefix=/usr: /usr/sbin/ibvfd, /usr/bin/ibvfctl" "$(dest_of ibvfd) $(dest_of ibvfctl)"
case $(dest_of noop.so) in /usr/lib/*ibvf/sm/noop.so) r=0 ;; *) r=1 ;; esac
ok $r "-Dprefix=/usr: SM modules in /usr/<libdir>/ibvf/sm" "$(dest_of noop.so)"
grep -q "install-cni" <<<"$plan" && ! grep -qE 'test_|bench_|fake\.so' <<<"$plan"
ok $? "-Dtests=false: the plan has the product and no test or benchmark"
grep -q "/opt/cni/bin/ib-sriov" "$B2/deploy/install-cni"
ok $? "install-cni copies from the configured CNI bin dir"

echo "1..$n"
[ $bad = 0 ]
