#!/usr/bin/env python3
"""The CNI plugin loads no library it does not use at every start.

    check_plugin_needed.py PLUGIN

The container runtime execs ib-sriov once per ADD, DEL, CHECK and waits for
the dynamic loader each time (docs/hacking.md "Libraries"). So the plugin
must not have libibverbs (dlopen'ed at the first RC check, rc_verbs.c),
libibumad or libibmad (the port watcher, which the plugin never runs) as
DT_NEEDED (`readelf -d`), and must not call into them by symbol either
(`nm -u`: no ibv_*, umad_*, mad_* reference, which static linking would
hide from DT_NEEDED). Prints TAP.
"""
import re
import subprocess
import sys

FORBIDDEN = ("libibverbs.so", "libibumad.so", "libibmad.so")
SYMBOL = re.compile(r"^(ibv_|_ibv_|umad_|mad_|ib_resolve_|smp_query)")


def run(*argv):
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"Bail out! {' '.join(argv)}: {out.stderr.strip()}")
    return out.stdout


def main():
    plugin = sys.argv[1]
    needed = [l.split("[")[1].rstrip("]") for l in run("readelf", "-d", plugin).splitlines()
              if "(NEEDED)" in l]
    undef = [l.split()[-1].split("@")[0] for l in run("nm", "-u", plugin).splitlines() if l.split()]
    checks = [(bool(needed), f"DT_NEEDED: {', '.join(needed) or 'none (not a dynamic ELF?)'}")]
    for lib in FORBIDDEN:
        hit = [n for n in needed if n.startswith(lib)]
        checks.append((not hit, f"{lib.split('.')[0]} is not DT_NEEDED"
                       + (f" (it is: {', '.join(hit)})" if hit else "")))
    hit = sorted({s for s in undef if SYMBOL.match(s)})
    checks.append((not hit, "no undefined verbs/umad/mad symbol"
                   + (f" (has {', '.join(hit[:8])}{' ...' if len(hit) > 8 else ''})" if hit else "")))
    print(f"1..{len(checks)}")
    for i, (ok, what) in enumerate(checks, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
