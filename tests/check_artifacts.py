#!/usr/bin/env python3
"""The installed artefacts hold no lab code, and SM modules no foreign layer.

    check_artifacts.py BUILD_DIR

Reads meson's list of installed files (meson-info/intro-installed.json) and,
for every installed ELF file, `nm`'s defined symbols (static ones too: the
build keeps its symbol tables). Fails when
  - any installed binary or module defines a symbol that the lab code defines
    (the global symbols of tests/lab's static library: the ibsim and fake VF
    drivers and the fake-sysfs writer);
  - an SM module (installed under .../ibvf/sm/) defines a global symbol of
    the VF layer or the config layer (libibvf_vf.a, libibvf_config.a), or
    needs libnl-route-3 (`readelf -d` NEEDED);
  - no installed ELF file was found (nothing was checked).
Prints TAP.
"""
import json
import os
import subprocess
import sys


def defined(path, only_global=False):
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"Bail out! nm {path}: {out.stderr.strip()}")
    syms = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        kind, name = parts[1], parts[2]
        if only_global and not kind.isupper():
            continue
        syms.add(name.split("@")[0])
    return syms


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return [l.split("[")[1].rstrip("]") for l in out.splitlines() if "(NEEDED)" in l]


def lib(build, sub, name):
    path = os.path.join(build, sub, name)
    if not os.path.exists(path):
        raise SystemExit(f"Bail out! {path} not built")
    return defined(path, only_global=True)


def main():
    build = sys.argv[1]
    installed = json.load(open(os.path.join(build, "meson-info", "intro-installed.json")))
    lab = lib(build, "tests/lab/vf-drivers", "libibvf_lab_vf.a")
    foreign = lib(build, "daemon", "libibvf_vf.a") | lib(build, "daemon", "libibvf_config.a")
    checks = []
    for src, dst in sorted(installed.items()):
        if not os.path.isfile(src) or not is_elf(src):
            continue
        syms = defined(src)
        hit = sorted(syms & lab)
        checks.append((not hit, f"{os.path.basename(dst)} has no lab symbol"
                       + (f" (has {', '.join(hit[:8])})" if hit else "")))
        if "/ibvf/sm/" in dst:
            hit = sorted(syms & foreign)
            checks.append((not hit, f"{os.path.basename(dst)} has no VF-layer or config code"
                           + (f" (has {', '.join(hit[:8])})" if hit else "")))
            libs = [n for n in needed(src) if n.startswith("libnl-route")]
            checks.append((not libs, f"{os.path.basename(dst)} does not need libnl-route"
                           + (f" (needs {libs})" if libs else "")))
    if not checks:
        checks.append((False, "found installed ELF files to check"))
    if not lab:
        checks.append((False, "the lab library defines symbols (else nothing is compared)"))
    print(f"1..{len(checks)}")
    for i, (ok, what) in enumerate(checks, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
