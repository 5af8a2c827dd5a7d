#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Single ADD and a multi-rail Pod (8 sequential ADDs, as Multus calls them) on
the SIMULATED FABRIC: ib-sriov with the real ibvfd as fabric node pf0 (ibsim VF
driver, opensm SM backend editing the real OpenSM's partition file, fabric
port watcher), VFs that are ibsim HCA nodes with real veth netdevs
(tests/lab/fabric, tests/lab/netns/test_cni_fabric.py's set-up).

  bench_fabric_attach.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs PATH/TO/ibvfd SM_MODULE_DIR
      [--rounds N] [--multi-rounds N] [--rails 8] [--warm] [--relink-delay-ms 100]
      [--ibvfd-log-level info] [--keep-logs DIR] [--rail-gap-ms 500] [--strace DIR]

For each ADD it prints the wall time (process start to exit, as a runtime sees
it) and ibvfd's per-step "timing" of the prepare and the commit (docs/api.md,
logged by ib-sriov at debug), and subtracts the lab artefacts ibvfd's log shows
for the ADD's VF: the ibsim driver's console round trips for the GUIDs (the
lab's stand-in for RTM_SETLINK: a FIFO write and polling ibsim's output file)
and its whole emulated rebind (fake sysfs unbind/bind, Unlink, the relink
delay `vf.ibsim.relink_delay_ms` so OpenSM sees the port go down, ReLink, the
veth's rename; on hardware the mlx5 unbind/bind is there instead, which warm
VFs take off the ADD path).
The kernel netns move is measured in the same run (`ip link set netns` of a
spare veth, one way). Product time = ADD wall - lab artefacts; the targets
(issue 17): one cold ADD <= 30 ms + the kernel move; 8 ADDs <= 3x one cold
ADD. --warm sets `vf.warm: true` (free VFs programmed ahead of time) and is
skipped with a message when this ibvfd does not know the key. Numbers, never
assertions. Root and the fabric lab's Debian packages needed; exits 77 (SKIP)
without them.
"""
import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS = os.path.join(HERE, "..", "tests", "lab", "netns")
sys.path.insert(0, NETNS)
from cni_lab import Lab, Tap, skip  # noqa: E402
from test_cni_fabric import Fabric  # noqa: E402

TIMING_RE = re.compile(r"ibvfd (prepare|commit|release) timing \(ms\): (\{.*\})")
# ib-sriov's stderr at debug: "HH:MM:SS.mmm ib-sriov LEVEL: message" (daemon/common/log.c)
LOGLINE_RE = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) ib-sriov \S+: (.*)$", re.M)
MOVE_RE = re.compile(r"netns move .* took ([0-9.]+) ms \(kernel\)")
LAB_RE = re.compile(r"ibsim lab: node (\S+): (console|rebind) ([0-9.]+) ms"
                    r"(?: \(relink delay ([0-9.]+) ms)?")


def loadavg():
    return open("/proc/loadavg").read().split()[0]


class Bench:
    def __init__(self, lab, fab, env, args):
        self.lab, self.fab, self.env, self.args = lab, fab, env, args
        self.daemon = None

    def config(self, warm):
        d = os.path.join(self.lab.tmp, "ibvfd-warm" if warm else "ibvfd-cold")
        for sub in ("state", "run"):
            os.makedirs(os.path.join(d, sub), mode=0o700)
        self.dir = d
        self.sock = os.path.join(d, "run", "ibvfd.sock")
        self.log = os.path.join(d, "ibvfd.log")
        cfg = {"state_dir": os.path.join(d, "state"), "run_dir": os.path.join(d, "run"),
               "sysfs_root": self.lab.sysfs, "log_level": self.args.ibvfd_log_level,
               "pool": {"ranges": [{"start": "02:00:00:00:00:09:00:01",
                                    "end": "02:00:00:00:00:09:0f:ff"}], "quarantine_s": 1},
               "sm": {"backend": "opensm", "module_dir": os.path.join(self.args.sm, "opensm"),
                      "periodic_update_s": 60,
                      "config": {"partition_file": self.env["PARTITIONS_FILE"],
                                 "pid_file": self.env["OPENSM_PIDFILE"], "verify": "off"}},
               "vf": {"driver": "ibsim", "rebind_timeout_ms": 10000,
                      "ibsim": {"console": self.env["IBSIM_CONSOLE"],
                                "output": self.env["IBSIM_OUT"], "node_prefix": "vf",
                                "real_netdevs": True,
                                "relink_delay_ms": self.args.relink_delay_ms}},
               "port_watch": {"source": "fabric", "poll_min_ms": 5, "poll_max_ms": 100},
               "api": {"socket": self.sock},
               "daemon": {"prepare_timeout_s": 120, "port_timeout_s": 60,
                          # the plugin's cache of this lab, not the host's: a stale
                          # entry naming one of these PCI addresses keeps a VF unwarmed
                          "cni_cache_dir": self.lab.cache}}
        # explicit both ways: vf.warm's default depends on the VF driver (on for
        # netlink, off for the ibsim lab driver)
        cfg["vf"]["warm"] = bool(warm)
        self.cfg = os.path.join(d, "ibvfd.json")
        with open(self.cfg, "w") as f:
            json.dump(cfg, f)
        p = subprocess.run([self.args.ibvfd, "--print-config", "-c", self.cfg],
                           capture_output=True, text=True)
        return p.returncode == 0, (p.stderr or p.stdout).strip()

    def start(self):
        log = open(self.log, "w")
        self.daemon = subprocess.Popen([self.fab_lab(), "run", self.fab.d, "pf0", self.args.ibvfd,
                                        "-f", "-c", self.cfg], stdout=log,
                                       stderr=subprocess.STDOUT,
                                       env=dict(os.environ, FABRIC_LAB_TIMEOUT="1200"))
        self.lab.sock = self.lab.default_sock = self.sock
        return self.fab.wait(lambda: os.path.exists(self.sock) and
                             self.lab.rpc("status").get("result", {}).get("ready"), 60)

    @staticmethod
    def fab_lab():
        return os.path.join(HERE, "..", "tests", "lab", "fabric", "fabric-lab.sh")

    def stop(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
        if self.daemon and self.args.keep_logs:
            os.makedirs(self.args.keep_logs, exist_ok=True)
            shutil.copy(self.log, os.path.join(self.args.keep_logs,
                                               os.path.basename(self.dir) + ".log"))
        self.daemon = None

    def warm_counts(self):
        try:
            w = self.lab.rpc("status").get("result", {}).get("warm", {})
        except OSError:
            return 0, 0
        return w.get("ready", 0), w.get("warming", 0)

    def settle(self, vfs, warm, n_warm=None):
        """Cold: wait until no VF is Active (all reset). Warm: until ibvfd's warm pass has
        finished with @n_warm VFs warm (status "warm": ready, warming 0; a release's new
        warm GUID is set by the pass after the DEL) and every VF's port is Active."""
        if not warm:
            return self.fab.wait(lambda: all(self.fab.state(f"vf{v.index}") != "Active"
                                             for v in vfs), 60)
        n = len(vfs) if n_warm is None else n_warm

        def done():
            ready, warming = self.warm_counts()
            return ready >= n and not warming
        return (self.fab.wait(done, 60) and
                self.fab.wait(lambda: all(self.fab.state(f"vf{v.index}") == "Active"
                                          for v in vfs), 60))

    def warm_takes(self, off):
        """How many ADDs since @off took a warm VF (ibvfd logs "... taken ...: no rebind")."""
        with open(self.log, errors="replace") as f:
            f.seek(off)
            return sum("no rebind" in line and "warm GUID" in line for line in f)

    def add(self, conf, cid, ifname, ns, vf):
        """One ADD: (wall ms, {method: timing}, lab ms by kind) or raises."""
        off = os.path.getsize(self.log)
        w0 = time.time()
        t0 = time.perf_counter()
        rc, out, err = self.lab.run("ADD", conf, cid, ifname=ifname, netns=ns,
                                    extra={"IBVF_CNI_LOG_LEVEL": "debug"},
                                    binary=self.strace_wrapper(f"{cid}-{ifname}"))
        wall = (time.perf_counter() - t0) * 1000
        if rc:
            raise RuntimeError(f"ADD {cid}/{ifname} on {vf.pci} failed: {out} {err[-800:]}")
        lab = self.lab_time(off, f"vf{vf.index}")
        lab["warm"] = self.warm_takes(off)
        lab["phases"] = phases(err, w0, wall)
        return wall, self.timings(err), lab

    def strace_wrapper(self, tag):
        """--strace DIR: the plugin under `strace -f -T -tt` (its own run, not timed)."""
        if not self.args.strace or not getattr(self, "tracing", False):
            return None
        os.makedirs(self.args.strace, exist_ok=True)
        w = os.path.join(self.lab.tmp, "strace-plugin.sh")
        out = os.path.join(os.path.abspath(self.args.strace), f"ib-sriov-{tag}.strace")
        with open(w, "w") as f:  # the runtime's environment is the plugin's: path baked in
            f.write(f"#!/bin/sh\nexec strace -f -T -tt -o '{out}' '{self.lab.plugin}' \"$@\"\n")
        os.chmod(w, 0o755)
        return w

    def delete(self, conf, cid, ifname, ns):
        t0 = time.perf_counter()
        rc, out, err = self.lab.run("DEL", conf, cid, ifname=ifname, netns=ns,
                                    extra={"IBVF_CNI_LOG_LEVEL": "debug"})
        if rc:
            raise RuntimeError(f"DEL {cid}/{ifname} failed: {out} {err[-800:]}")
        return (time.perf_counter() - t0) * 1000, self.timings(err)

    @staticmethod
    def timings(err):
        t = {}
        for m in TIMING_RE.finditer(err):
            t[m.group(1)] = json.loads(m.group(2))
        return t

    def lab_time(self, off, node):
        """ibsim lab time logged for @node since @off, ms: console commands outside a
        rebind ("console", "n" of them), emulated rebinds ("rebind", of it "relink")."""
        out = {"console": 0.0, "n": 0, "rebind": 0.0, "relink": 0.0}
        with open(self.log, errors="replace") as f:
            f.seek(off)
            for line in f:
                m = LAB_RE.search(line)
                if not m or m.group(1) != node:
                    continue
                if m.group(2) == "console":
                    out["console"] += float(m.group(3))
                    out["n"] += 1
                else:
                    out["rebind"] += float(m.group(3))
                    out["relink"] += float(m.group(4) or 0)
        return out


def kernel_move(lab, ns, n):
    """`ip link set netns` of a spare veth into @ns, one way (median of @n), ms."""
    peer = f"{lab.prefix}k"
    subprocess.run(["ip", "link", "add", peer + "a", "type", "veth", "peer", "name", peer + "b"],
                   check=True)
    one = []
    for _ in range(n):
        for cmd in (["ip", "link", "set", "dev", peer + "a", "netns", ns],
                    ["ip", "-n", ns, "link", "set", "dev", peer + "a", "netns", str(os.getpid())]):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True)
            one.append((time.perf_counter() - t0) * 1000)
    subprocess.run(["ip", "link", "del", peer + "a"], capture_output=True)
    return statistics.median(one)


def phases(err, w0, wall):
    """Where one ADD's wall time went, from the plugin's debug lines (ms clock):
    exec (spawn to its first line), prepare (to ibvfd's prepare answer), pre_move
    (RDMA, netdev checks, down + temporary name), move (the kernel's, from its
    own line), post_move (rename, up, IPAM, cache), commit (to ibvfd's commit
    answer), exit (to the process's end)."""
    marks = {}
    move = None
    day = time.localtime(w0)
    base = time.mktime(day[:3] + (0, 0, 0) + day[6:])
    for m in LOGLINE_RE.finditer(err):
        t = base + int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) + \
            int(m.group(4)) / 1000.0
        t = (t - w0) * 1000.0
        msg = m.group(5)
        marks.setdefault("first", t)
        if "ibvfd prepare timing" in msg:
            marks["prepared"] = t
        elif MOVE_RE.search(msg) and "prepared" in marks and "moved" not in marks:
            marks["moved"] = t
            move = float(MOVE_RE.search(msg).group(1))
        elif "ibvfd commit timing" in msg:
            marks["committed"] = t
    need = ("first", "prepared", "moved", "committed")
    if not all(k in marks for k in need) or move is None:
        return None
    return {"exec": marks["first"], "prepare": marks["prepared"] - marks["first"],
            "pre_move": marks["moved"] - marks["prepared"] - move, "move": move,
            "post_move": marks["committed"] - marks["moved"], "exit": wall - marks["committed"]}


PHASES = ("exec", "prepare", "pre_move", "move", "post_move", "exit")


def phases_line(samples):
    ph = [s[2].get("phases") for s in samples if s[2].get("phases")]
    if not ph:
        return "plugin phases: none parsed"
    return ("plugin phases (ms, medians of %d, 1 ms log clock; move from its own line): " %
            len(ph)) + " ".join(f"{k} {med([p[k] for p in ph]):.1f}" for k in PHASES)


def kernel_move_k(lab, ks, n):
    """`ip link set netns` of a spare veth into a netns that already holds k veths
    (their peers in the host, as the VFs'), one way, median of @n per k: {k: ms}."""
    out = {}
    for k in ks:
        ns = lab.ns()
        for i in range(k):
            a, b = f"{lab.prefix}f{k:x}{i:x}", f"{lab.prefix}g{k:x}{i:x}"
            subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b],
                           check=True)
            subprocess.run(["ip", "link", "set", "dev", a, "netns", ns], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "dev", a, "up"], check=True)
        peer = f"{lab.prefix}h{k:x}"
        subprocess.run(["ip", "link", "add", peer + "a", "type", "veth", "peer", "name",
                        peer + "b"], check=True)
        one = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run(["ip", "link", "set", "dev", peer + "a", "netns", ns], check=True)
            one.append((time.perf_counter() - t0) * 1000)
            subprocess.run(["ip", "-n", ns, "link", "set", "dev", peer + "a", "netns",
                            str(os.getpid())], check=True)
        subprocess.run(["ip", "link", "del", peer + "a"], capture_output=True)
        for i in range(k):
            subprocess.run(["ip", "link", "del", f"{lab.prefix}g{k:x}{i:x}"],
                           capture_output=True)
        out[k] = statistics.median(one)
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def steps_line(timings, method):
    st = collections.defaultdict(list)
    for t in timings:
        for k, v in t.get(method, {}).items():
            st[k].append(v)
    if not st:
        return f"{method}: no timing"
    parts = " ".join(f"{k} {med(v):.2f}" for k, v in st.items() if k != "total")
    return f"{method} total {med(st['total']):.2f}: {parts}"


def report(label, samples, move):
    """samples: [(wall, timings, lab)]; prints and returns (wall, product) medians."""
    wall = [s[0] for s in samples]
    lab = [s[2]["console"] + s[2]["rebind"] for s in samples]
    prod = [w - l for w, l in zip(wall, lab)]
    print(f"{label}: ADD wall median {med(wall):.1f} ms (min {min(wall):.1f}, max "
          f"{max(wall):.1f}); lab artefacts {med(lab):.1f} ms (ibsim console "
          f"{med([s[2]['console'] for s in samples]):.1f} ms over "
          f"{med([s[2]['n'] for s in samples]):.0f} GUID commands, emulated rebind "
          f"{med([s[2]['rebind'] for s in samples]):.1f} ms of which relink delay "
          f"{med([s[2]['relink'] for s in samples]):.1f} ms); product {med(prod):.1f} ms = "
          f"{med(prod) - move:.1f} ms + the kernel move {move:.1f} ms")
    print(f"  {sum(s[2].get('warm', 0) for s in samples)} of {len(samples)} ADDs took a warm VF"
          " (ibvfd log: warm GUID taken, no rebind)")
    print(f"  ibvfd {steps_line([s[1] for s in samples], 'prepare')}")
    print(f"  ibvfd {steps_line([s[1] for s in samples], 'commit')}")
    print(f"  {phases_line(samples)}")
    return med(wall), med(prod)


def rails_line(multi, rails):
    """Per rail position (1..rails) in the Pod: median wall and kernel move, ms."""
    parts = []
    for k in range(rails):
        xs = [multi[i] for i in range(k, len(multi), rails)]
        mv = [x[2]["phases"]["move"] for x in xs if x[2].get("phases")]
        parts.append(f"net{k + 1} {med([x[0] for x in xs]):.1f}/{med(mv):.1f}")
    return "by rail (wall/kernel move ms): " + " ".join(parts)


def run_mode(b, warm, vfs, ns_pool):
    args = b.args
    ok, why = b.config(warm)
    if not ok:
        if warm and "warm" in why:
            print(f"# warm: SKIPPED: this ibvfd does not accept vf.warm ({why[:200]})")
        elif warm:
            print(f"# warm: ibvfd refused the config: {why[:400]}")
        else:
            print(f"# cold: ibvfd refused the config: {why[:400]}")
        return None
    if not b.start():
        print(f"# {'warm' if warm else 'cold'}: ibvfd not ready; log tail:\n" +
              open(b.log).read()[-1500:])
        b.stop()
        return None
    mode = "warm" if warm else "cold"
    try:
        t0 = time.perf_counter()
        if not b.settle(vfs, warm):
            want = "warm pass done, all Active" if warm else "none Active"
            print(f"# {mode}: VF ports did not settle ({want})"
                  f" within 60 s (warm ready/warming {b.warm_counts()}); measuring anyway")
        elif warm:
            print(f"# warm: ibvfd's first warm pass: {len(vfs)} VFs warm and Active "
                  f"{(time.perf_counter() - t0) * 1000:.0f} ms after ready (not on any ADD)")
        base = {"cniVersion": "1.0.0", "type": "ib-sriov", "pkey": "0x12",
                "rcCheck": {"enabled": False}, "ibvfd": {"timeout": 120}}
        single = []
        for r in range(args.rounds):
            v = vfs[0]
            conf = dict(base, name="rail0", deviceID=v.pci)
            single.append(b.add(conf, f"s{mode}{r}", "net1", ns_pool[0], v))
            b.delete(conf, f"s{mode}{r}", "net1", ns_pool[0])
            b.settle(vfs[:1], warm, len(vfs))
        multi, multi_wall, dels = [], [], []
        for r in range(args.multi_rounds):
            cid = f"m{mode}{r}"
            t0 = time.perf_counter()
            got = []
            for i, v in enumerate(vfs[:args.rails]):
                conf = dict(base, name=f"rail{i}", deviceID=v.pci)
                got.append(b.add(conf, cid, f"net{i + 1}", ns_pool[1], v))
            multi_wall.append((time.perf_counter() - t0) * 1000)
            multi += got
            t0 = time.perf_counter()
            for i, v in reversed(list(enumerate(vfs[:args.rails]))):
                b.delete(dict(base, name=f"rail{i}", deviceID=v.pci), cid, f"net{i + 1}",
                         ns_pool[1])
            dels.append((time.perf_counter() - t0) * 1000)
            b.settle(vfs[:args.rails], warm, len(vfs))
        gap = []
        for r in range(args.multi_rounds if args.rail_gap_ms else 0):
            # the same Pod, an idle pause before each rail (not timed): back-to-back
            # activity (OpenSM's sweep after the previous SIGHUP, ibsim, the kernel's
            # RCU work) apart from the number of netdevs in the Pod's netns
            cid = f"g{mode}{r}"
            for i, v in enumerate(vfs[:args.rails]):
                time.sleep(args.rail_gap_ms / 1000.0)
                conf = dict(base, name=f"rail{i}", deviceID=v.pci)
                gap.append(b.add(conf, cid, f"net{i + 1}", ns_pool[1], v))
            for i, v in reversed(list(enumerate(vfs[:args.rails]))):
                b.delete(dict(base, name=f"rail{i}", deviceID=v.pci), cid, f"net{i + 1}",
                         ns_pool[1])
            b.settle(vfs[:args.rails], warm, len(vfs))
        if args.strace and warm:
            # one traced single ADD and one traced 8-rail Pod, after the timed runs
            b.tracing = True
            v = vfs[0]
            conf = dict(base, name="rail0", deviceID=v.pci)
            b.add(conf, "tsingle", "net1", ns_pool[0], v)
            b.delete(conf, "tsingle", "net1", ns_pool[0])
            b.settle(vfs[:1], warm, len(vfs))
            for i, v in enumerate(vfs[:args.rails]):
                b.add(dict(base, name=f"rail{i}", deviceID=v.pci), "trail", f"net{i + 1}",
                      ns_pool[1], v)
            for i, v in reversed(list(enumerate(vfs[:args.rails]))):
                b.delete(dict(base, name=f"rail{i}", deviceID=v.pci), "trail", f"net{i + 1}",
                         ns_pool[1])
            b.tracing = False
        return single, multi, multi_wall, dels, gap
    finally:
        b.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plugin")
    ap.add_argument("fakesysfs")
    ap.add_argument("ibvfd")
    ap.add_argument("sm", help="the build's sm-backends directory (opensm/opensm.so)")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("IBVF_BENCH_ROUNDS", 5)))
    ap.add_argument("--multi-rounds", type=int,
                    default=int(os.environ.get("IBVF_BENCH_MULTI_ROUNDS", 2)))
    ap.add_argument("--rails", type=int, default=8)
    ap.add_argument("--warm", action="store_true", default=bool(os.environ.get("IBVF_BENCH_WARM")),
                    help="also measure with vf.warm (skipped when ibvfd does not know it)")
    ap.add_argument("--relink-delay-ms", type=int, default=100)
    ap.add_argument("--ibvfd-log-level", default="info")
    ap.add_argument("--keep-logs", help="copy ibvfd's logs into this directory")
    ap.add_argument("--rail-gap-ms", type=int,
                    default=int(os.environ.get("IBVF_BENCH_RAIL_GAP_MS", 500)),
                    help="also ADD the rails of a Pod with this idle pause before each (0: not)")
    ap.add_argument("--strace", metavar="DIR",
                    help="warm mode: one more single ADD and 8-rail Pod with the plugin under "
                    "strace -f -T -tt, traces in DIR (not timed)")
    args = ap.parse_args()
    args.ibvfd, args.sm = os.path.abspath(args.ibvfd), os.path.abspath(args.sm)
    if os.geteuid() != 0:
        skip("needs root (network namespaces, veth, the fabric lab)")
    if not os.path.exists(os.path.join(args.sm, "opensm", "opensm.so")):
        skip(f"opensm SM backend module not built ({args.sm}/opensm/opensm.so)")
    if not os.environ.get("IBVF_IN_PRIVATE_NETNS"):
        os.environ["IBVF_IN_PRIVATE_NETNS"] = "1"
        try:
            os.execvp("unshare", ["unshare", "--net", sys.executable] + sys.argv)
        except OSError as e:
            skip(f"cannot unshare a network namespace: {e}")
    lab = Lab(os.path.abspath(args.plugin), os.path.abspath(args.fakesysfs), Tap())
    fab = Fabric(os.path.join(lab.tmp, "fabric"))
    os.makedirs(fab.d)
    b = None
    try:
        env = fab.up(args.rails)
        vfs = lab.vfs(args.rails)
        ns_pool = [lab.ns(), lab.ns()]
        move = kernel_move(lab, ns_pool[0], 10)
        move_k = kernel_move_k(lab, (0, 1, 7, 15), 10)
        b = Bench(lab, fab, env, args)
        load0 = loadavg()
        res = {"cold": run_mode(b, False, vfs, ns_pool)}
        if args.warm:
            res["warm"] = run_mode(b, True, vfs, ns_pool)
        print(f"# simulated fabric (ibsim + OpenSM), opensm backend, {args.rails} VFs; "
              f"{args.rounds} single ADDs, {args.multi_rounds} x {args.rails}-rail Pods per mode;"
              f" ibsim relink delay {args.relink_delay_ms} ms; load average (1 min) {load0} "
              f"before, {loadavg()} after")
        print(f"kernel netns move (ip link set netns, one way, median of 20): {move:.1f} ms")
        print("kernel netns move into a netns already holding k veths (one way, median of 10):"
              " " + ", ".join(f"k={k} {v:.1f} ms" for k, v in move_k.items()))
        cold_one = None
        for mode, r in res.items():
            if not r:
                continue
            single, multi, multi_wall, dels, gap = r
            one_wall, one_prod = report(f"{mode} single ADD", single, move)
            if mode == "cold":
                cold_one = (one_wall, one_prod)
            report(f"{mode} multi-rail, each of the {args.rails} ADDs", multi, move)
            print(f"  {rails_line(multi, args.rails)}")
            if gap:
                report(f"{mode} multi-rail with {args.rail_gap_ms} ms idle before each ADD "
                       f"(same Pod netns)", gap, move)
                print(f"  {rails_line(gap, args.rails)}")
            per = [sum(s[0] for s in multi[i:i + args.rails])
                   for i in range(0, len(multi), args.rails)]
            lab_per = [sum(s[2]["console"] + s[2]["rebind"] for s in multi[i:i + args.rails])
                       for i in range(0, len(multi), args.rails)]
            prod_per = [p - l for p, l in zip(per, lab_per)]
            print(f"{mode} multi-rail Pod: {args.rails} sequential ADDs {med(multi_wall):.1f} ms "
                  f"wall ({med(per):.1f} ms in the plugins), lab artefacts {med(lab_per):.1f} ms,"
                  f" product {med(prod_per):.1f} ms; its {args.rails} DELs {med(dels):.1f} ms")
            if cold_one:
                print(f"ratio {mode} {args.rails} ADDs / one cold ADD: wall "
                      f"{med(per) / cold_one[0]:.2f}, product {med(prod_per) / cold_one[1]:.2f}"
                      f" (target <= 3)")
            print(f"{mode} one ADD product time - kernel move: {one_prod - move:.1f} ms "
                  f"(target <= 30)")
    finally:
        if b:
            b.stop()
        fab.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
