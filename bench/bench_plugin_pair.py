#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The plugin's own cost per invocation: exec to exit of a full ADD+DEL pair in
compatibility mode and of the trivial start, for two or more ib-sriov binaries,
interleaved.

  bench_plugin_pair.py [--runs N] [--seed S] [--log-level L] FAKESYSFS LABEL=PATH [LABEL=PATH ...]

IBVF_BENCH_PLUGIN_B=PATH adds PATH as "B" (the meson benchmark plugin_pair
passes only this build's binary); IBVF_BENCH_N is the default of --runs.

The set-up is bench_cni.py's compatibility-mode one (tests/lab/netns: a fake
sysfs with one PF and one VF whose netdev is a veth, a netns of our own, the
ibvfd socket absent, RC check off, no IPAM, IBVF_CNI_LOG_LEVEL "info" as the
lab runs it; --log-level changes that), with no ibvfd needed. Each round runs,
for every binary in a random order (--seed): CNI_COMMAND=VERSION (the loader,
constructors and exit: bench_plugin_start.py's figure), then ADD and DEL of
one attachment. Each run is spawned with posix_spawn(), its configuration
already in a pipe on stdin (the child never waits for us), stdout and stderr
to a file, timed with CLOCK_MONOTONIC from before the spawn to after
waitpid(); the CPU time is the child's user + system (wait4). Prints per
binary and per command the median, p10 and p90 wall ms and the median CPU
ms, and for each binary after the first the median of the per-round
differences to the first (paired: the same round, the same machine noise).
The pair's wall time is mostly the kernel's two netns moves (~40 ms, noisy);
the paired difference and the CPU time show the plugin's own share. Prints
the load average before and after. Needs root (netns, veth); prints "SKIP:
..." and exits 77 without it. Numbers, not assertions; run it under the lab
lock (flock /tmp/ibvf-lab.lock).
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lab",
                                "netns"))
from cni_lab import Lab, Tap, need_lab  # noqa: E402
from bench_plugin_start import load, pct  # noqa: E402  (this directory: sys.path[0])


def spawn(path, env, data, out):
    """One run: (wall ms, CPU ms); raises on a non-zero exit."""
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    os.lseek(out, 0, os.SEEK_SET)
    os.ftruncate(out, 0)
    t0 = time.monotonic_ns()
    pid = os.posix_spawn(path, [path], env,
                         file_actions=[(os.POSIX_SPAWN_DUP2, r, 0),
                                       (os.POSIX_SPAWN_DUP2, out, 1),
                                       (os.POSIX_SPAWN_DUP2, out, 2)])
    _, st, ru = os.wait4(pid, 0)
    t1 = time.monotonic_ns()
    os.close(r)
    if os.waitstatus_to_exitcode(st) != 0:
        os.lseek(out, 0, os.SEEK_SET)
        raise SystemExit(f"{path} {env['CNI_COMMAND']}: exit {os.waitstatus_to_exitcode(st)}: "
                         f"{os.read(out, 65536).decode(errors='replace')}")
    return (t1 - t0) / 1e6, (ru.ru_utime + ru.ru_stime) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=int(os.environ.get("IBVF_BENCH_N", 100)))
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--log-level", default="info")
    ap.add_argument("fakesysfs")
    ap.add_argument("bins", nargs="+", metavar="LABEL=PATH")
    a = ap.parse_args()
    bins = []
    if os.environ.get("IBVF_BENCH_PLUGIN_B"):
        a.bins.append("B=" + os.environ["IBVF_BENCH_PLUGIN_B"])
    for b in a.bins:
        label, _, path = b.partition("=")
        if not path or not os.access(path, os.X_OK):
            raise SystemExit(f"{b}: want LABEL=PATH of an executable")
        bins.append((label, os.path.abspath(path)))
    need_lab()
    lab = Lab(bins[0][1], os.path.abspath(a.fakesysfs), Tap())
    vf = lab.vf()
    ns = lab.ns()
    conf = json.dumps({"cniVersion": "1.0.0", "name": "bench", "type": "ib-sriov",
                       "deviceID": vf.pci, "pkey": "0x10",
                       "rcCheck": {"enabled": False}}).encode()
    extra = {"IBVF_CNI_SOCKET": lab.no_sock, "IBVF_CNI_LOG_LEVEL": a.log_level}
    version_env = {"CNI_COMMAND": "VERSION", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    out = os.open(tempfile.mkdtemp(prefix="ibvf-bench-pair.", dir=lab.tmp), os.O_TMPFILE |
                  os.O_RDWR, 0o600)
    cmds = ("VERSION", "ADD", "DEL", "ADD+DEL")
    wall = {label: {c: [] for c in cmds} for label, _ in bins}
    cpu = {label: {c: [] for c in cmds} for label, _ in bins}
    rnd = random.Random(a.seed)
    n = [0]

    def round_of(label, path, keep):
        cid = f"p{n[0]}"
        n[0] += 1
        res = {"VERSION": spawn(path, version_env, b"", out)}
        for cmd in ("ADD", "DEL"):
            res[cmd] = spawn(path, lab.env(cmd, cid, "net1", ns, extra), conf, out)
        res["ADD+DEL"] = tuple(res["ADD"][i] + res["DEL"][i] for i in (0, 1))
        if keep:
            for c in cmds:
                wall[label][c].append(res[c][0])
                cpu[label][c].append(res[c][1])

    for label, path in bins:  # warm the page cache, not timed
        for _ in range(3):
            round_of(label, path, False)
    load0 = load()
    for _ in range(a.runs):
        order = list(bins)
        rnd.shuffle(order)
        for label, path in order:
            round_of(label, path, True)
    load1 = load()
    print(f"ib-sriov exec to exit, compatibility mode (log level {a.log_level}), {a.runs} rounds "
          f"interleaved (seed {a.seed}); load average {load0} -> {load1}")
    base = bins[0][0]
    w = max(len(label) for label, _ in bins)
    for c in cmds:
        print(f" {c}:")
        for label, path in bins:
            t = wall[label][c]
            line = (f"  {label:<{w}}  median {statistics.median(t):7.3f} ms  p10 "
                    f"{pct(t, 10):7.3f}  p90 {pct(t, 90):7.3f}  CPU median "
                    f"{statistics.median(cpu[label][c]):6.3f} ms")
            if label != base:
                d = [x - y for x, y in zip(t, wall[base][c])]
                dc = [x - y for x, y in zip(cpu[label][c], cpu[base][c])]
                line += (f"  paired diff to {base}: wall {statistics.median(d):+7.3f} ms, CPU "
                         f"{statistics.median(dc):+6.3f} ms")
            print(line)
    print("  (" + ", ".join(f"{label} = {path}" for label, path in bins) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
