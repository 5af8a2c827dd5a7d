#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ADD+DEL wall time of ib-sriov versus Debian's Go host-device plugin moving
the same veth into a network namespace and back, in one run.

  bench_cni.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs [--iterations N]
               [--ibvfd PATH/TO/ibvfd --sm-module-dir DIR]
               [--netns-floor PATH/TO/cni_netns_floor --exec-floor PATH/TO/cni_exec_floor]

ib-sriov runs daemon-backed (against the fake ibvfd of tests/lab/netns, and,
when --ibvfd is given, against the real ibvfd with its fake VF driver and
the noop SM backend, and with the opensm backend writing a partition file
and signalling a stand-in "opensm" process: no fabric, verify "off", so
OpenSM's own re-read and the SMP check are not in the figure) and in
compatibility mode, with the RC check off and no IPAM; host-device gets
{"device": <veth>}. --ibvfd-b OTHER adds the real ibvfd OTHER (noop), e.g.
main's, for an A/B in the same run; --plugin-b OTHER another ib-sriov (against
the real noop ibvfd and in compatibility mode). With --ibvfd the noop daemon runs twice,
cold (vf.warm off: every ADD programs and rebinds the VF, every DEL resets
it) and warm (vf.warm on: ADD takes the VF programmed ahead, DEL's re-GUID
is off its path; issue 17 item 3); --rebind-ms N makes the fake VF driver's
program step (GUID set + rebind) take N ms in both (IBVF_FAKE_VF_DELAY_MS),
as a real mlx5 VF rebind does (~500 ms). The kernel floor is measured in the
same run: `ip link set netns` into the namespace and back (two process
starts and the two moves, which a plugin cannot avoid), and the CNI floor:
the same two ip(8) runs doing what a CNI ADD and DEL need of the kernel, each
one netlink message (into the namespace renamed net1 and up; back, which sets
it down, under its own name). With --netns-floor (default: bench/ of the
plugin's build, when there) the kernel's own floor in-process: one
long-lived cni_netns_floor fed a line per pair through a pipe does the same
kernel work (netns files, netlink sockets, the lookups, one RTM_NEWLINK each
way) with no exec, timing only those calls. With --exec-floor the process
floor: a minimal C binary (static when it was built so) run twice per pair as
the plugin is run, and the plugin itself with CNI_COMMAND=VERSION twice per
pair; "any plugin's floor" = the in-process floor + 2 minimal execs. Every
ratio to host-device gets a 95% bootstrap interval (iterations resampled,
paired) and the median of the per-iteration ratios. Each iteration runs one ADD+DEL pair of
each, in a random order (--seed), timed from process start to exit, as a
runtime sees it. Prints per-pair medians, p90s, the load average, and the
ratios to host-device and to the floor. After the timed runs, --steps N more
pairs per real ibvfd run with ib-sriov at debug level into a log file (not
timed with the others: the logging costs a little), also for the fake ibvfd,
compatibility mode and --plugin-b's binary (real noop ibvfd, compatibility
mode), interleaved in a random order per round: the medians
of the kernel's netns moves (ib-sriov's debug line), of the plugin's own
steps (its "ADD/DEL steps" line) and of ibvfd's per-step "timing" of
prepare, commit and release (docs/api.md "Per-step timing"), and each
variant's moves minus compatibility mode's, paired by round. --sync full|normal is the real ibvfd's
pool.sync (default "full", ibvfd's default). With --ibvfd it also prints the
durability floor from the same run: the median fdatasync() of a WAL-sized
append in the real ibvfd's state directory (sampled between the pairs) times
the synced store writes a pair needs (SYNCED_WRITES: 2 cold, 2 warm), and the
CNI floor plus that as a ratio to host-device. Needs root; prints "SKIP: ..."
and exits 77 without it. Numbers, not assertions.
"""
import argparse
import collections
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lab",
                                "netns"))
from cni_lab import Lab, Tap, need_lab  # noqa: E402
from test_cni_ibvfd import Ibvfd  # noqa: E402


def timed(lab, cmd, conf, cid, ns, binary, extra, errs=None):
    """One plugin run: (wall ms, CPU ms = user + system of the child); its stderr appended
    to @errs when given."""
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
    if errs is not None:
        errs.append(err.decode(errors="replace"))
    return wall, (ru.ru_utime + ru.ru_stime) * 1000


def pair(lab, conf, cid, ns, binary=None, extra=None, errs=None):
    a = timed(lab, "ADD", conf, cid, ns, binary, extra, errs)
    d = timed(lab, "DEL", conf, cid, ns, binary, extra, errs)
    return a[0] + d[0], a[1] + d[1], a[0], d[0]


def floor_pair(lab, vf, ns, cni=False):
    """The kernel floor: the veth into @ns and back with ip(8), as timed() times a plugin.
    @cni: what a CNI ADD and DEL must have the kernel do, each in one ip(8) message: into
    @ns renamed net1 and up, and back (the move sets it down) under its own name."""
    cmds = ([["ip", "link", "set", "dev", vf.name, "netns", ns, "name", "net1", "up"],
             ["ip", "-n", ns, "link", "set", "dev", "net1", "netns", str(os.getpid()), "name",
              vf.name]] if cni else
            [["ip", "link", "set", "dev", vf.name, "netns", ns],
             ["ip", "-n", ns, "link", "set", "dev", vf.name, "netns", str(os.getpid())]])
    out = []
    for cmd in cmds:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status):
            raise RuntimeError(f"{' '.join(cmd)} failed: {err}")
        out.append(((time.perf_counter() - t0) * 1000, (ru.ru_utime + ru.ru_stime) * 1000))
    return out[0][0] + out[1][0], out[0][1] + out[1][1], out[0][0], out[1][0]


class NetnsFloor:
    """The kernel's own floor in one process: a long-lived cni_netns_floor (bench/) doing a
    CNI ADD's and DEL's kernel work for a line per pair on its stdin, no exec counted."""

    def __init__(self, binary):
        self.proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.moves = []  # (ADD's RTM_NEWLINK, DEL's), ms

    def pair(self, vf, ns):
        """(wall ms, CPU ms, ADD ms, DEL ms) as floor_pair() answers, timed by the helper."""
        self.proc.stdin.write(f"{vf.name} /var/run/netns/{ns} net1\n")
        self.proc.stdin.flush()
        out = self.proc.stdout.readline().split()
        if not out or out[0] != "ok":
            raise RuntimeError(f"cni_netns_floor: {' '.join(out) or 'no answer'}")
        add, dl, madd, mdl, cpu = map(float, out[1:6])
        self.moves.append((madd, mdl))
        return add + dl, cpu, add, dl

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def version_pair(lab, conf, cid, ns, binary=None):
    """The plugin started twice as for an ADD+DEL but with CNI_COMMAND=VERSION: its start-up
    and exit alone, as timed() times a run."""
    a = timed(lab, "VERSION", conf, cid, ns, binary, None)
    d = timed(lab, "VERSION", conf, cid, ns, binary, None)
    return a[0] + d[0], a[1] + d[1], a[0], d[0]


def is_static(path):
    """True when ELF @path has no PT_INTERP (no dynamic loader: statically linked)."""
    with open(path, "rb") as f:
        hdr = f.read(64)
        if hdr[:4] != b"\x7fELF" or hdr[4] != 2:  # 64-bit ELF only
            return None
        phoff = int.from_bytes(hdr[32:40], "little")
        phentsize = int.from_bytes(hdr[54:56], "little")
        phnum = int.from_bytes(hdr[56:58], "little")
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    return not any(int.from_bytes(ph[i * phentsize:i * phentsize + 4], "little") == 3
                   for i in range(phnum))


def boot_ratio(a, b, rng, n=1000):
    """Ratio of the medians of per-iteration samples @a and @b (same iterations, same order):
    (the ratio, 95% bootstrap interval low, high, median of the per-iteration ratios a_i/b_i).
    The bootstrap resamples iterations, keeping each iteration's pair together."""
    k = len(a)
    idx = range(k)
    rs = []
    for _ in range(n):
        pick = rng.choices(idx, k=k)
        rs.append(statistics.median(a[i] for i in pick) / statistics.median(b[i] for i in pick))
    rs.sort()
    return (statistics.median(a) / statistics.median(b), rs[int(0.025 * n)],
            rs[int(0.975 * n) - 1], statistics.median(x / y for x, y in zip(a, b)))


def opensm_ibvfd(lab, binary, moddir, vf):
    """A real ibvfd with the opensm backend against a stand-in OpenSM process."""
    shim = types.SimpleNamespace(tmp=os.path.join(lab.tmp, "osm"), rpc=lab.rpc, sock=lab.sock)
    os.makedirs(shim.tmp)
    pfile = os.path.join(shim.tmp, "partitions.conf")
    with open(pfile, "w") as f:
        f.write("Default=0x7fff, ipoib : ALL=full;\n")
    stand_in = os.path.join(shim.tmp, "opensm")  # /proc/PID/comm must say "opensm"
    with open(stand_in, "w") as f:
        f.write("#!/bin/sh\ntrap '' HUP\nwhile :; do sleep 1; done\n")
    os.chmod(stand_in, 0o755)
    proc = subprocess.Popen([stand_in, "-P", pfile])
    pid_file = os.path.join(shim.tmp, "opensm.pid")
    with open(pid_file, "w") as f:
        f.write(f"{proc.pid}\n")
    d = Ibvfd(shim, binary, os.path.join(os.path.dirname(moddir), "opensm"), [vf])
    with open(d.cfg) as f:
        cfg = json.load(f)
    cfg["sm"] = {"backend": "opensm", "module_dir": os.path.join(os.path.dirname(moddir), "opensm"),
                 "config": {"partition_file": pfile, "pid_file": pid_file, "verify": "off"}}
    with open(d.cfg, "w") as f:
        json.dump(cfg, f)
    d.stand_in = proc
    return d


TIMING_RE = re.compile(r"ibvfd (prepare|commit|release) timing \(ms\): (\{.*\})")
MOVE_RE = re.compile(r"netns move .* took ([0-9.]+) ms \(kernel\)")
STEPS_RE = re.compile(r"ib-sriov debug: (ADD|DEL) steps \(ms\): (\{.*\})")


def step_breakdowns(lab, variants, ns, n, rng):
    """@n ADD+DEL pairs of each variant (label -> (conf, extra env, binary or None)) at debug
    level (IBVF_CNI_LOG_LEVEL: to its stderr, a pipe; a logFile on disk would add its own
    journal waits to the steps), interleaved in a random order per round (a variant's moves
    then see the same moments' kernel as the others'); print per variant the medians of the
    kernel's netns moves, of the plugin's own steps ("ADD/DEL steps" lines: docs/cni.md
    "Logging") and of ibvfd's per-step timing (when it is a real ibvfd) with what each call
    cost the plugin beyond ibvfd's total, then each variant's moves against compatibility
    mode's, paired by round."""
    res = {}
    for k, (conf, extra, binary) in variants.items():
        res[k] = types.SimpleNamespace(conf=conf, extra=dict(extra or {},
                                                             IBVF_CNI_LOG_LEVEL="debug"),
                                       binary=binary, walls=[], errs=[], tag=len(res))
    for i in range(n):
        order = list(res)
        rng.shuffle(order)
        for k in order:
            r = res[k]
            r.walls.append(pair(lab, r.conf, f"s{r.tag}-{i}", ns, binary=r.binary, extra=r.extra,
                                errs=r.errs))
    for k, r in res.items():
        steps = collections.defaultdict(lambda: collections.defaultdict(list))
        own = {"ADD": collections.defaultdict(list), "DEL": collections.defaultdict(list)}
        r.moves = []
        for line in "".join(r.errs).splitlines():
            m = TIMING_RE.search(line)
            if m:
                for s, v in json.loads(m.group(2)).items():
                    steps[m.group(1)][s].append(v)
            m = MOVE_RE.search(line)
            if m:
                r.moves.append(float(m.group(1)))
            m = STEPS_RE.search(line)
            if m:
                for s, v in json.loads(m.group(2)).items():
                    own[m.group(1)][s].append(v)
        # exec to exit minus the steps' total, per run: the dynamic loader and the
        # libraries' start-up, main()'s parsing, the result and the exit (one line per run)
        for cmd, j in (("ADD", 2), ("DEL", 3)):
            tot = own[cmd].get("total", [])
            if len(tot) == n:
                own[cmd]["outside the steps"] = [w[j] - t for w, t in zip(r.walls, tot)]
        if len(r.moves) == 2 * n:
            add, dl = r.moves[0::2], r.moves[1::2]
            print(f"# {k}: over {n} pairs at debug level (interleaved): ADD "
                  f"{statistics.median(w[2] for w in r.walls):.2f} ms of which the kernel's "
                  f"netns move {statistics.median(add):.2f}; DEL "
                  f"{statistics.median(w[3] for w in r.walls):.2f} ms of which the move back "
                  f"{statistics.median(dl):.2f}")
        else:
            print(f"# {k}: {len(r.moves)} netns move lines for {n} pairs: moves not broken down")
            r.moves = None
        for cmd, st in own.items():
            if st.get("total"):
                parts = " ".join(f"{s} {statistics.median(v):.3f}" for s, v in st.items()
                                 if s != "total" and s != "outside the steps")
                if st.get("outside the steps"):
                    parts += (f"; outside the steps (loader, parsing, exit) "
                              f"{statistics.median(st['outside the steps']):.3f}")
                print(f"  plugin {cmd} steps, medians in ms: total "
                      f"{statistics.median(st['total']):.3f} (exec to exit "
                      f"{statistics.median(w[2 if cmd == 'ADD' else 3] for w in r.walls):.3f}):"
                      f" {parts}")
        if not steps:
            continue
        print(f"  ibvfd per-step medians over {n} pairs, ms (docs/api.md)")
        for method, cmd in (("prepare", "ADD"), ("commit", "ADD"), ("release", "DEL")):
            st = steps.get(method)
            if not st:
                print(f"  {method}: no timing in the plugin's stderr")
                continue
            parts = " ".join(f"{s} {statistics.median(v):.3f}" for s, v in st.items()
                             if s != "total")
            call = own[cmd].get(method)
            # the call as the plugin waits for it (its step) minus ibvfd's own total:
            # connect, the request and reply through the socket, both sides' wake-ups
            extra = (f"; the plugin's call {statistics.median(call):.3f}, beyond ibvfd's total "
                     f"{statistics.median(a - b for a, b in zip(call, st['total'])):.3f}"
                     if call and len(call) == len(st["total"]) else "")
            print(f"  {method:8s} total {statistics.median(st['total']):7.3f}: {parts}{extra}")
    base = res.get("ib-sriov (compatibility mode)")
    if not base or not base.moves:
        return
    for k, r in res.items():
        if r is base or not r.moves:
            continue
        for j, what in ((0, "ADD move"), (1, "DEL move back")):
            d = sorted(x - y for x, y in zip(r.moves[j::2], base.moves[j::2]))
            print(f"# paired {what}, {k} - compatibility mode: median "
                  f"{statistics.median(d):+.2f} ms, middle half {d[len(d) // 4]:+.2f} .. "
                  f"{d[3 * len(d) // 4]:+.2f} ms")


def wait_warm(d, timeout=5.0):
    """Wait (untimed) until ibvfd @d's warm pass has the VF warm: status "warm" ready 1,
    warming 0 (a release's new warm GUID is set after the DEL answers). ms waited, or -1."""
    import socket
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        # d.sock itself: an Ibvfd made on a shim's rpc asks the lab's (fake) daemon
        with socket.socket(socket.AF_UNIX) as c:
            c.settimeout(5)
            c.connect(d.sock)
            c.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status","params":{}}\n')
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = c.recv(65536)
                if not chunk:
                    break
                buf += chunk
        w = json.loads(buf).get("result", {}).get("warm", {})
        if w.get("ready", 0) >= 1 and not w.get("warming", 0):
            return (time.perf_counter() - t0) * 1000
        time.sleep(0.002)
    return -1.0


def warm_takes(d):
    with open(os.path.join(d.dir, "ibvfd.log"), errors="replace") as f:
        return sum("warm GUID" in line and "no rebind" in line for line in f)


# Synced store writes (pool.sync "full": one fdatasync() of the WAL each) on an ADD+DEL
# pair's path with this tree's ibvfd (docs/pool.md, "Durability classes"): cold prepare
# the allocation (stored at sm_requested); warm prepare the take (sm_requested); release
# releasing. port_ready, handed, the release's quarantine and the warm release's new row
# are lazy (their fdatasync() is off the path).
SYNCED_WRITES = {"cold": 2, "warm": 2}  # docs/pool.md "Durability classes"
WAL_APPEND = 3 * (4096 + 24)  # a state write: ~3 WAL frames (row, index, generation)


class FsyncProbe:
    """fdatasync() of a WAL-sized append to a file in @directory (the real ibvfd's state
    dir: the store's filesystem), as group commit's leader does after a COMMIT."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "bench-fdatasync.tmp")
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.buf = os.urandom(WAL_APPEND)
        self.size = 0
        self.samples = []
        fs = subprocess.run(["stat", "-f", "-c", "%T", directory], capture_output=True,
                            text=True)
        self.fs = fs.stdout.strip() or "?"

    def sample(self, n=4):
        for _ in range(n):
            if self.size > (4 << 20):  # a checkpoint truncates the WAL now and then too
                os.ftruncate(self.fd, 0)
                os.fsync(self.fd)
                self.size = 0
            os.write(self.fd, self.buf)
            self.size += len(self.buf)
            t0 = time.perf_counter()
            os.fdatasync(self.fd)
            self.samples.append((time.perf_counter() - t0) * 1000)
        return None

    def close(self):
        os.close(self.fd)
        os.unlink(self.path)


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def summary(name, samples):
    wall = [s[0] for s in samples]
    cpu = [s[1] for s in samples]
    q = statistics.quantiles(wall, n=10)
    print(f"{name:31s} wall median {statistics.median(wall):7.2f} ms p90 {q[8]:7.2f} ms "
          f"(ADD {statistics.median(s[2] for s in samples):6.2f}, DEL "
          f"{statistics.median(s[3] for s in samples):6.2f}); CPU median "
          f"{statistics.median(cpu):6.2f} ms")
    return statistics.median(wall), statistics.median(cpu)


INPROC = "the kernel's own floor (in-process)"
EXEC = "minimal exec x2 (cni_exec_floor)"
VERSION = "plugin VERSION x2 (ib-sriov start+exit)"


def process_floors(args, runs, med, inproc):
    """Print the in-process floor, the process floor (minimal exec, the plugin's VERSION),
    any plugin's floor, and every ratio to host-device with its bootstrap interval."""
    hd = runs["host-device (Go, Debian)"]
    base = med["host-device (Go, Debian)"][0]
    one = {k: statistics.median([s[2] for s in runs[k]] + [s[3] for s in runs[k]])
           for k in (EXEC, VERSION) if runs.get(k)}
    if inproc:
        m = inproc.moves
        print(f"{INPROC} / host-device: wall {med[INPROC][0] / base:.3f} (its RTM_NEWLINK "
              f"moves alone: ADD {statistics.median(x[0] for x in m):.2f}, DEL "
              f"{statistics.median(x[1] for x in m):.2f} ms)")
    if EXEC in one:
        st = is_static(args.exec_floor)
        kind = "static" if st else "DYNAMIC (no static libc)"
        print(f"process floor: minimal exec to exit ({kind} C binary, stdin config, CNI env) "
              f"median {one[EXEC]:.3f} ms per run; ib-sriov "
              f"VERSION median {one[VERSION]:.3f} ms per run (its start-up and exit: "
              f"{one[VERSION] - one[EXEC]:+.3f} ms over the minimal one)")
    elif VERSION in one:
        print(f"process floor: ib-sriov VERSION median {one[VERSION]:.3f} ms per run "
              f"(no minimal binary)")
    derived = {}
    if inproc and EXEC in one:
        tot = med[INPROC][0] + 2 * one[EXEC]
        r = tot / base
        verdict = ("lies BELOW this floor (unreachable in this run)" if r > 0.9 else
                   f"is above it by {(0.9 - r) * base:.2f} ms (reachable in this run)")
        print(f"any plugin's floor = kernel in-process {med[INPROC][0]:.2f} + 2 x minimal exec "
              f"{one[EXEC]:.3f} = {tot:.2f} ms = {r:.3f} of host-device: 0.9x {verdict}")
        derived["any plugin's floor (in-process + 2 minimal execs)"] = [
            x[0] + y[0] for x, y in zip(runs[INPROC], runs[EXEC])]
    if inproc:
        tot = med[INPROC][0] + 2 * one[VERSION]
        print(f"ib-sriov's start floor = kernel in-process + 2 x ib-sriov VERSION = {tot:.2f} ms"
              f" = {tot / base:.3f} of host-device")
        derived["ib-sriov's start floor (in-process + 2 VERSION)"] = [
            x[0] + y[0] for x, y in zip(runs[INPROC], runs[VERSION])]
    rng = random.Random(args.seed)
    hw = [s[0] for s in hd]
    print(f"# ratios to host-device: median ratio [95% bootstrap interval over the "
          f"{len(hw)} iterations, paired] (median of the per-iteration ratios)")
    series = {k: [s[0] for s in v] for k, v in runs.items()
              if v and k != "host-device (Go, Debian)" and k not in (EXEC, VERSION)}
    series.update(derived)
    for k, v in series.items():
        r, lo, hi, per = boot_ratio(v, hw, rng)
        print(f"  {k:50s} {r:.3f} [{lo:.3f} .. {hi:.3f}] ({per:.3f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plugin")
    ap.add_argument("fakesysfs")
    ap.add_argument("--iterations", type=int, default=int(os.environ.get("IBVF_BENCH_N", 200)))
    ap.add_argument("--sync", choices=("full", "normal"), default="full",
                    help="the real ibvfd's pool.sync")
    ap.add_argument("--steps", type=int, default=int(os.environ.get("IBVF_BENCH_STEPS", 20)),
                    help="pairs per variant for the per-step breakdown (0: none)")
    ap.add_argument("--ibvfd")
    ap.add_argument("--sm-module-dir")
    ap.add_argument("--ibvfd-b", help="another ibvfd binary (noop backend), e.g. main's")
    ap.add_argument("--plugin-b", help="another ib-sriov binary, e.g. main's: run against the "
                    "real noop ibvfd (cold) and in compatibility mode, interleaved with the others")
    ap.add_argument("--seed", type=int, default=17,
                    help="seed of the per-iteration order of the variants")
    ap.add_argument("--rebind-ms", type=int, default=0,
                    help="the fake VF driver's program step takes this long (real ibvfd)")
    ap.add_argument("--netns-floor", help="bench/cni_netns_floor: the kernel's own floor "
                    "in-process (default: bench/ of the plugin's build, when there)")
    ap.add_argument("--exec-floor", help="bench/cni_exec_floor: a minimal plugin's exec to "
                    "exit (default: bench/ of the plugin's build, when there)")
    args = ap.parse_args()
    build = os.path.dirname(os.path.dirname(os.path.abspath(args.plugin)))
    for opt, name in (("netns_floor", "cni_netns_floor"), ("exec_floor", "cni_exec_floor")):
        path = getattr(args, opt) or os.path.join(build, "bench", name)
        if os.access(path, os.X_OK):
            setattr(args, opt, os.path.abspath(path))
        else:
            print(f"# {name}: not built ({path}; --{opt.replace('_', '-')}), not measured")
            setattr(args, opt, None)
    if args.rebind_ms:
        os.environ["IBVF_FAKE_VF_DELAY_MS"] = str(args.rebind_ms)
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
    daemons = {}  # label -> (Ibvfd, conf)
    if args.ibvfd:
        real = Ibvfd(lab, os.path.abspath(args.ibvfd), os.path.abspath(args.sm_module_dir), [vf])
        daemons["ib-sriov (daemon, ibvfd noop)"] = real
        shim = types.SimpleNamespace(tmp=os.path.join(lab.tmp, "warm"), rpc=lab.rpc, sock=lab.sock)
        os.makedirs(shim.tmp)
        warm = Ibvfd(shim, os.path.abspath(args.ibvfd), os.path.abspath(args.sm_module_dir), [vf])
        with open(warm.cfg) as f:
            cfg = json.load(f)
        cfg["vf"]["warm"] = True
        with open(warm.cfg, "w") as f:
            json.dump(cfg, f)
        daemons["ib-sriov (daemon, ibvfd noop, warm)"] = warm
        osm = os.path.join(os.path.dirname(os.path.abspath(args.sm_module_dir)), "opensm")
        if os.path.exists(os.path.join(osm, "opensm.so")):
            daemons["ib-sriov (daemon, ibvfd opensm)"] = opensm_ibvfd(
                lab, os.path.abspath(args.ibvfd), os.path.abspath(args.sm_module_dir), vf)
        else:
            print(f"# opensm backend: not built ({osm}/opensm.so), not measured")
    if args.ibvfd_b:
        shim = types.SimpleNamespace(tmp=os.path.join(lab.tmp, "b"), rpc=lab.rpc, sock=lab.sock)
        os.makedirs(shim.tmp)
        daemons["ib-sriov (daemon, ibvfd B noop)"] = Ibvfd(
            shim, os.path.abspath(args.ibvfd_b), os.path.abspath(args.sm_module_dir), [vf])
    confs = {}
    for k, d in daemons.items():
        with open(d.cfg) as f:
            cfg = json.load(f)
        cfg["pool"]["sync"] = args.sync
        # vf.warm explicit (its default depends on the VF driver); the plugin's cache
        # of this lab, not the host's (a stale entry naming the VF keeps it unwarmed)
        cfg["vf"]["warm"] = "warm" in k
        cfg.setdefault("daemon", {})["cni_cache_dir"] = lab.cache
        with open(d.cfg, "w") as f:
            json.dump(cfg, f)
        if not d.start():
            print(f"{k}: ibvfd did not start (see {d.dir}/ibvfd.log)", file=sys.stderr)
            return 1
        confs[k] = dict(ib, ibvfd={"socket": d.sock})
    runs = {**{k: [] for k in daemons}, **runs,
            "kernel floor (ip link set netns, there and back)": [],
            "CNI floor (ip: netns+name+up, back+name)": []}
    inproc = NetnsFloor(args.netns_floor) if args.netns_floor else None
    if inproc:
        runs[INPROC] = []
    if args.exec_floor:
        runs[EXEC] = []
    runs[VERSION] = []
    for i in range(5):  # warm caches (binaries, page cache) before timing
        pair(lab, ib, f"warm{i}", ns)
        pair(lab, hd, f"warm{i}", ns, binary="/usr/lib/cni/host-device")
        floor_pair(lab, vf, ns)
        floor_pair(lab, vf, ns, True)
        if inproc:
            inproc.pair(vf, ns)
        if args.exec_floor:
            pair(lab, ib, f"warmx{i}", ns, binary=args.exec_floor)
        version_pair(lab, ib, f"warmv{i}", ns)
        for n, c in enumerate(confs.values()):
            pair(lab, c, f"warm{n}-{i}", ns)
    probe = None
    if "ib-sriov (daemon, ibvfd noop)" in daemons:
        probe = FsyncProbe(daemons["ib-sriov (daemon, ibvfd noop)"].state)
        probe.sample(8)  # untimed warm-up
        probe.samples = []
    warm_waits = []
    load0 = loadavg()
    plugin_b = os.path.abspath(args.plugin_b) if args.plugin_b else None
    noop_b = "ib-sriov B (daemon, ibvfd noop)"
    if plugin_b:
        for k in ([noop_b] if "ib-sriov (daemon, ibvfd noop)" in confs else []) + [
                "ib-sriov B (compatibility mode)"]:
            runs[k] = []
        for i in range(5):
            pair(lab, ib, f"warmb{i}", ns, binary=plugin_b, extra=compat)
    # each iteration runs every variant once, in a new random order: a move's rcu_barrier()
    # waits on the RCU work the run before it left, so a fixed order biases some variants
    rng = random.Random(args.seed)
    for i in range(args.iterations):
        steps = []
        for n, (k, c) in enumerate(confs.items()):
            steps.append((k, lambda k=k, c=c, n=n: pair(lab, c, f"r{n}-{i}", ns)))
            if plugin_b and k == "ib-sriov (daemon, ibvfd noop)":
                steps.append((noop_b, lambda c=c, n=n: pair(lab, c, f"rb{n}-{i}", ns,
                                                            binary=plugin_b)))
        if plugin_b:
            steps.append(("ib-sriov B (compatibility mode)",
                          lambda: pair(lab, ib, f"cb{i}", ns, binary=plugin_b, extra=compat)))
        steps += [
            ("ib-sriov (daemon, fake ibvfd)", lambda: pair(lab, ib, f"b{i}", ns)),
            ("ib-sriov (compatibility mode)", lambda: pair(lab, ib, f"c{i}", ns, extra=compat)),
            ("host-device (Go, Debian)",
             lambda: pair(lab, hd, f"h{i}", ns, binary="/usr/lib/cni/host-device")),
            ("kernel floor (ip link set netns, there and back)", lambda: floor_pair(lab, vf, ns)),
            ("CNI floor (ip: netns+name+up, back+name)", lambda: floor_pair(lab, vf, ns, True)),
            (VERSION, lambda: version_pair(lab, ib, f"v{i}", ns)),
        ]
        if inproc:
            steps.append((INPROC, lambda: inproc.pair(vf, ns)))
        if args.exec_floor:
            steps.append((EXEC, lambda: pair(lab, ib, f"x{i}", ns, binary=args.exec_floor)))
        if probe:
            steps.append(("fdatasync", probe.sample))
        rng.shuffle(steps)
        for k, run in steps:
            if k == "fdatasync":
                run()
                continue
            if "warm" in k:
                warm_waits.append(wait_warm(daemons[k]))
            runs[k].append(run())
    print(f"# {args.iterations} ADD+DEL pairs each, same veth, same netns, interleaved; "
          f"load average (1 min) {load0} before, {loadavg()} after; fake VF program step "
          f"{args.rebind_ms} ms; variants in a random order per iteration (seed {args.seed})")
    print(f"# real ibvfd: pool.sync \"{args.sync}\"")
    for k, d in daemons.items():
        if "warm" in k:
            print(f"# {k}: {warm_takes(d)} ADDs took the warm VF (ibvfd log: no rebind) of "
                  f"{args.iterations} timed + 5 untimed; before each timed pair the warm pass "
                  f"had finished (untimed wait: median {statistics.median(warm_waits):.1f} ms, "
                  f"max {max(warm_waits):.1f} ms; -1: not warm within 5 s)")
    med = {k: summary(k, v) for k, v in runs.items()}
    base = med["host-device (Go, Debian)"]
    floor = med["kernel floor (ip link set netns, there and back)"]
    cni_floor = med["CNI floor (ip: netns+name+up, back+name)"]
    print(f"kernel floor / host-device: wall {floor[0] / base[0]:.3f}; CNI floor / host-device: "
          f"wall {cni_floor[0] / base[0]:.3f}")
    process_floors(args, runs, med, inproc)
    if probe:
        # what pool.sync "full" costs a pair at least: its synced writes, one fdatasync() each
        fs = statistics.median(probe.samples)
        q = statistics.quantiles(probe.samples, n=10)
        print(f"durability floor: fdatasync() of a {WAL_APPEND} B append in the state dir "
              f"({probe.fs}): median {fs:.3f} ms, p90 {q[8]:.3f} ms over {len(probe.samples)}, "
              f"sampled between the pairs")
        # on the lowest floor measured: any plugin's (in-process moves + 2 minimal execs), else
        # the ip(8) CNI floor, which sits ms above it (its execs and netns set-up)
        lowest, lname = cni_floor[0], "CNI floor"
        if INPROC in med and EXEC in med:
            lowest, lname = med[INPROC][0] + med[EXEC][0], "any plugin's floor"
        for kind, n in SYNCED_WRITES.items():
            tot = lowest + n * fs
            print(f"{lname} + durability floor ({kind}: {n} synced writes x {fs:.3f} = "
                  f"{n * fs:.2f} ms) = {tot:.2f} ms = {tot / base[0]:.3f} of host-device "
                  f"(target 0.9 {'reachable' if tot / base[0] <= 0.9 else 'below this floor'})")
        probe.close()
    for k in [k for k in runs if k.startswith("ib-sriov")]:
        target = "<= 0.86" if "compatibility" in k else "<= 0.9"
        print(f"ratio {k} / host-device: wall {med[k][0] / base[0]:.3f} (target {target}), "
              f"CPU {med[k][1] / base[1]:.3f}; / kernel floor: wall {med[k][0] / floor[0]:.3f}; "
              f"/ CNI floor: wall {med[k][0] / cni_floor[0]:.3f}")
    for a, b in (("ib-sriov (daemon, ibvfd noop)", noop_b),
                 ("ib-sriov (daemon, ibvfd noop)", "ib-sriov (daemon, ibvfd B noop)"),
                 ("ib-sriov (compatibility mode)", "ib-sriov B (compatibility mode)")):
        if a in runs and runs.get(b):
            # paired by iteration: the same moment's kernel (RCU backlog, load) for both
            d = sorted(x[0] - y[0] for x, y in zip(runs[a], runs[b]))
            print(f"paired {a} - {'ibvfd B' if 'ibvfd B' in b else 'B'}: median {statistics.median(d):+.2f} ms, middle half "
                  f"{d[len(d) // 4]:+.2f} .. {d[3 * len(d) // 4]:+.2f} ms; A faster in "
                  f"{sum(x < 0 for x in d)} of {len(d)} iterations")
    if args.steps > 0:
        variants = {k: (c, None, None) for k, c in confs.items()}
        if plugin_b and noop_b in runs:
            variants[noop_b] = (confs["ib-sriov (daemon, ibvfd noop)"], None, plugin_b)
        variants["ib-sriov (daemon, fake ibvfd)"] = (ib, None, None)
        variants["ib-sriov (compatibility mode)"] = (ib, compat, None)
        if plugin_b:
            variants["ib-sriov B (compatibility mode)"] = (ib, compat, plugin_b)
        step_breakdowns(lab, variants, ns, args.steps, rng)
    if inproc:
        inproc.close()
    for d in daemons.values():
        d.stop()
        if getattr(d, "stand_in", None):
            d.stand_in.kill()
            d.stand_in.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
