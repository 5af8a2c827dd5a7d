#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ADD+DEL wall time of ib-sriov versus Debian's Go host-device plugin moving
the same veth into a network namespace and back, in one run.

  bench_cni.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs [--iterations N]
               [--ibvfd PATH/TO/ibvfd --sm-module-dir DIR]

ib-sriov runs daemon-backed (against the fake ibvfd of tests/lab/netns, and
against the real ibvfd with the noop SM backend and its fake VF driver when
--ibvfd is given) and in compatibility mode, with the RC check off and no IPAM; host-device gets
{"device": <veth>}. Each iteration runs one ADD+DEL pair of each, in turn,
timed from process start to exit, as a runtime sees it. Prints per-pair
medians, p90s and the ratio ib-sriov / host-device. Needs root; prints
"SKIP: ..." and exits 77 without it. Numbers, not assertions.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lab",
                                "netns"))
from cni_lab import Lab, Tap, need_lab  # noqa: E402
from test_cni_ibvfd import Ibvfd  # noqa: E402


def timed(lab, cmd, conf, cid, ns, binary, extra):
    """One plugin run: (wall ms, CPU ms = user + system of the child)."""
    p = subprocess.Popen([binary or lab.plugin], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=lab.env(cmd, cid, "net1", ns, extra))
    t0 = time.perf_counter()
    p.stdin.write(json.dumps(conf).encode())
    p.stdin.close()
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise RuntimeError(f"{binary or 'ib-sriov'} {cmd} failed: {out} {err}")
    return wall, (ru.ru_utime + ru.ru_stime) * 1000


def pair(lab, conf, cid, ns, binary=None, extra=None):
    a = timed(lab, "ADD", conf, cid, ns, binary, extra)
    d = timed(lab, "DEL", conf, cid, ns, binary, extra)
    return a[0] + d[0], a[1] + d[1], a[0], d[0]


def summary(name, samples):
    wall = [s[0] for s in samples]
    cpu = [s[1] for s in samples]
    q = statistics.quantiles(wall, n=10)
    print(f"{name:31s} wall median {statistics.median(wall):7.2f} ms p90 {q[8]:7.2f} ms "
          f"(ADD {statistics.median(s[2] for s in samples):6.2f}, DEL "
          f"{statistics.median(s[3] for s in samples):6.2f}); CPU median "
          f"{statistics.median(cpu):6.2f} ms")
    return statistics.median(wall), statistics.median(cpu)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plugin")
    ap.add_argument("fakesysfs")
    ap.add_argument("--iterations", type=int, default=int(os.environ.get("IBVF_BENCH_N", 200)))
    ap.add_argument("--ibvfd")
    ap.add_argument("--sm-module-dir")
    args = ap.parse_args()
    need_lab()
    lab = Lab(os.path.abspath(args.plugin), os.path.abspath(args.fakesysfs), Tap())
    lab.start_daemon()
    vf = lab.vf()
    ns = lab.ns()
    ib = {"cniVersion": "1.0.0", "name": "bench", "type": "ib-sriov", "deviceID": vf.pci,
          "pkey": "0x10", "rcCheck": {"enabled": False}}
    hd = {"cniVersion": "1.0.0", "name": "bench", "type": "host-device", "device": vf.name}
    compat = {"IBVF_CNI_SOCKET": lab.no_sock}
    runs = {"ib-sriov (daemon, fake ibvfd)": [], "ib-sriov (compatibility mode)": [],
            "host-device (Go, Debian)": []}
    real = None
    if args.ibvfd:
        real = Ibvfd(lab, os.path.abspath(args.ibvfd), os.path.abspath(args.sm_module_dir), [vf])
        if not real.start():
            print("ibvfd did not start", file=sys.stderr)
            return 1
        runs = {"ib-sriov (daemon, ibvfd noop)": [], **runs}
        ibr = dict(ib, ibvfd={"socket": real.sock})
    for i in range(5):  # warm caches (binaries, page cache) before timing
        pair(lab, ib, f"warm{i}", ns)
        pair(lab, hd, f"warm{i}", ns, binary="/usr/lib/cni/host-device")
        if real:
            pair(lab, ibr, f"warmr{i}", ns)
    for i in range(args.iterations):
        if real:
            runs["ib-sriov (daemon, ibvfd noop)"].append(pair(lab, ibr, f"r{i}", ns))
        runs["ib-sriov (daemon, fake ibvfd)"].append(pair(lab, ib, f"b{i}", ns))
        runs["ib-sriov (compatibility mode)"].append(pair(lab, ib, f"c{i}", ns, extra=compat))
        runs["host-device (Go, Debian)"].append(pair(lab, hd, f"h{i}", ns,
                                                     binary="/usr/lib/cni/host-device"))
    print(f"# {args.iterations} ADD+DEL pairs each, same veth, same netns, interleaved")
    med = {k: summary(k, v) for k, v in runs.items()}
    base = med["host-device (Go, Debian)"]
    for k in [k for k in runs if k.startswith("ib-sriov")]:
        print(f"ratio {k} / host-device: wall {med[k][0] / base[0]:.3f} (target <= 0.25), "
              f"CPU {med[k][1] / base[1]:.3f}")
    if real:
        real.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
