#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Start-up time of CNI plugin binaries: CNI_COMMAND=VERSION, exec to exit.

  bench_plugin_start.py [--runs N] [--seed S] LABEL=PATH [LABEL=PATH ...]

A runtime execs the plugin once per ADD, DEL, CHECK; VERSION does no work
of its own (it prints the supported versions), so its wall time is the
loader, the constructors and exit: what each start costs before a command
runs (docs/hacking.md "Libraries"). Each round runs every binary once, in a
random order (--seed), spawned with posix_spawn(), stdin and stdout
/dev/null, timed with CLOCK_MONOTONIC from before the spawn to after
waitpid(). Prints per binary the median, p10 and p90 in ms, and for each
binary after the first the median of the per-round differences to the
first (paired: the same round, the same machine noise) and the ratio of the
medians, with the load average from `uptime` before and after. Numbers, not
assertions; run it under the lab lock (flock /tmp/ibvf-lab.lock).
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import time


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def load():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split(
        "load average:")[-1].strip()


def spawn_ms(path, env, devnull):
    t0 = time.monotonic_ns()
    pid = os.posix_spawn(path, [path], env,
                         file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                                       (os.POSIX_SPAWN_DUP2, devnull, 1)])
    _, st = os.waitpid(pid, 0)
    t1 = time.monotonic_ns()
    if os.waitstatus_to_exitcode(st) != 0:
        raise SystemExit(f"{path}: CNI_COMMAND=VERSION exited {os.waitstatus_to_exitcode(st)}")
    return (t1 - t0) / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("bins", nargs="+", metavar="LABEL=PATH")
    a = ap.parse_args()
    bins = []
    for b in a.bins:
        label, _, path = b.partition("=")
        if not path or not os.access(path, os.X_OK):
            raise SystemExit(f"{b}: want LABEL=PATH of an executable")
        bins.append((label, os.path.abspath(path)))
    env = {"CNI_COMMAND": "VERSION", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    devnull = os.open(os.devnull, os.O_RDWR)
    rnd = random.Random(a.seed)
    times = {label: [] for label, _ in bins}
    for label, path in bins:  # warm the page cache, not timed
        for _ in range(5):
            spawn_ms(path, env, devnull)
    load0 = load()
    for _ in range(a.runs):
        order = list(bins)
        rnd.shuffle(order)
        for label, path in order:
            times[label].append(spawn_ms(path, env, devnull))
    load1 = load()
    print(f"plugin start-up, CNI_COMMAND=VERSION exec to exit, {a.runs} rounds interleaved "
          f"(seed {a.seed}); load average {load0} -> {load1}")
    base_label = bins[0][0]
    base = times[base_label]
    w = max(len(label) for label, _ in bins)
    for label, path in bins:
        t = times[label]
        line = (f"  {label:<{w}}  median {statistics.median(t):6.3f} ms  p10 {pct(t, 10):6.3f}  "
                f"p90 {pct(t, 90):6.3f}")
        if label != base_label:
            d = [x - y for x, y in zip(t, base)]
            line += (f"  paired diff to {base_label} median {statistics.median(d):+6.3f} ms, "
                     f"ratio of medians {statistics.median(t) / statistics.median(base):.3f}")
        print(line + f"  ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
