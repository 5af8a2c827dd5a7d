# SPDX-License-Identifier: MIT
"""The ib-sriov netns lab: network namespaces, veth pairs standing in for VF
netdevs, a fake sysfs tree for the PCI/SR-IOV layout, a fake (or real) ibvfd,
and a runtime-like driver for the plugin (CNI_* environment + config on stdin,
result on stdout). Everything it creates carries a per-run random prefix and
is removed by name / PID at exit, even when a test fails.
"""
import atexit
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CNI_BIN = "/usr/lib/cni"


def skip(reason):
    if os.environ.get("IBVF_REQUIRE_LABS") == "1":
        print(f"FAIL: lab required (IBVF_REQUIRE_LABS=1) but unavailable: {reason}", file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: {reason}", file=sys.stderr)
    sys.exit(77)


def need_lab():
    if os.geteuid() != 0:
        skip("needs root (network namespaces, veth)")
    for p in ("host-local", "static", "tuning", "host-device"):
        if not os.access(os.path.join(CNI_BIN, p), os.X_OK):
            skip(f"{CNI_BIN}/{p} missing (Debian package containernetworking-plugins)")
    if shutil.which("ip") is None:
        skip("ip (iproute2) missing")


def sh(*args, check=True, ns=None):
    cmd = list(args)
    if ns:
        cmd = ["ip", "-n", ns] + cmd[1:] if cmd[0] == "ip" else ["ip", "netns", "exec", ns] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and p.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p.stdout


class VF:
    """A veth standing in for a VF netdev (ibvf-fakesysfs --veth made it)."""

    def __init__(self, pci, index, name, rdma):
        self.pci, self.index, self.name, self.rdma = pci, index, name, rdma
        self.peer = name + "p"


class Lab:
    def __init__(self, plugin, fakesysfs, tap):
        self.plugin = plugin
        self.fakesysfs = fakesysfs
        self.n_pfs = 0
        self.tap = tap
        self.prefix = "i8" + secrets.token_hex(2)
        self.bus = 0x81
        self.tmp = tempfile.mkdtemp(prefix="ibvf-cni-lab.")
        self.sysfs = os.path.join(self.tmp, "sys")
        self.cache = os.path.join(self.tmp, "cache")
        self.lockdir = os.path.join(self.tmp, "lock")
        self.ipamdir = os.path.join(self.tmp, "ipam")
        self.bindir = os.path.join(self.tmp, "bin")
        os.makedirs(self.bindir)
        self.cni_path = f"{self.bindir}:{CNI_BIN}"
        self.sock = os.path.join(self.tmp, "ibvfd.sock")
        self.state = os.path.join(self.tmp, "ibvfd.state")
        self.control = os.path.join(self.tmp, "ibvfd.control")
        self.no_sock = os.path.join(self.tmp, "absent.sock")
        self.default_sock = self.sock
        self.netns = []
        self.all_vfs = []
        self.daemon = None
        atexit.register(self.cleanup)
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, lambda *_: sys.exit(1))

    # ---------------------------------------------------------------- setup
    def vfs(self, n):
        """A new PF with @n VFs in the fake sysfs tree; their netdevs are real veths."""
        k = self.n_pfs
        self.n_pfs += 1
        out = sh(self.fakesysfs, self.sysfs, "add-pf", "--pci", "0000:%02x:00.0" % (self.bus + k),
                 "--vfs", str(n), "--veth", f"{self.prefix}{k:x}")
        new = []
        for line in out.splitlines():
            pci, index, name, _ifindex, rdma = line.split()
            new.append(VF(pci, int(index), name, rdma))
            self.port(new[-1])
        self.all_vfs += new
        return new

    def vf(self):
        return self.vfs(1)[0]

    def port(self, vf, state="4: ACTIVE", pkeys=("0xffff", "0x8010")):
        """Port 1 of the VF's (fake) RDMA device as sysfs shows it: state and P_Key table."""
        d = os.path.join(self.sysfs, "class", "infiniband", vf.rdma, "ports", "1")
        shutil.rmtree(os.path.join(d, "pkeys"), ignore_errors=True)
        os.makedirs(os.path.join(d, "pkeys"))
        with open(os.path.join(d, "state"), "w") as f:
            f.write(state + "\n")
        for i, k in enumerate(pkeys):
            with open(os.path.join(d, "pkeys", str(i)), "w") as f:
                f.write(k + "\n")

    def ns(self):
        name = f"ibvf-{self.prefix}-{len(self.netns)}"
        sh("ip", "netns", "add", name)
        self.netns.append(name)
        return name

    def placeholder(self, ns, name):
        """A netdev called @name in @ns (a veth with both ends there: no dummy module needed)."""
        peer = f"{self.prefix}q{secrets.token_hex(2)}"
        sh("ip", "-n", ns, "link", "add", name, "type", "veth", "peer", "name", peer)
        return peer

    def start_daemon(self, control=None):
        self.set_control(control or {})
        log = open(os.path.join(self.tmp, "fake-ibvfd.log"), "w")
        self.daemon = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_ibvfd.py"),
                                        self.sock, self.state, self.control],
                                       stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.daemon.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError("fake ibvfd did not start")

    def set_control(self, control):
        with open(self.control, "w") as f:
            json.dump(control, f)

    def rpc(self, method, params=None):
        """Call the daemon directly, as another client would."""
        import socket
        with socket.socket(socket.AF_UNIX) as c:
            c.settimeout(10)
            c.connect(self.sock)
            c.sendall((json.dumps({"jsonrpc": "2.0", "id": 7, "method": method,
                                   "params": params or {}}) + "\n").encode())
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = c.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return json.loads(buf)

    def ifindex(self, name, ns=None):
        return self.link(name, ns)["ifindex"]

    def store(self):
        with open(self.state) as f:
            return json.load(f)

    def fake_ipam(self, name, script):
        path = os.path.join(self.bindir, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + script)
        os.chmod(path, 0o755)
        return path

    # -------------------------------------------------------------- running
    def env(self, cmd, cid=None, ifname="net1", netns=None, extra=None):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": cmd,
               "CNI_PATH": self.cni_path, "IBVF_CNI_CACHE_DIR": self.cache,
               "IBVF_CNI_LOCK_DIR": self.lockdir, "IBVF_SYSFS_ROOT": self.sysfs,
               "IBVF_CNI_SOCKET": self.default_sock, "IBVF_CNI_LOG_LEVEL": "info"}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "IBVF_VF_MODULE_DIR"):
            if k in os.environ:
                env[k] = os.environ[k]
        if cid:
            env["CNI_CONTAINERID"] = cid
            env["CNI_ARGS"] = (f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;"
                               f"K8S_POD_NAME=pod-{cid};K8S_POD_UID=uid-{cid}")
        if ifname:
            env["CNI_IFNAME"] = ifname
        if netns:
            env["CNI_NETNS"] = netns if netns.startswith("/") else f"/var/run/netns/{netns}"
        env.update(extra or {})
        return env

    def run(self, cmd, conf, cid=None, ifname="net1", netns=None, extra=None, binary=None):
        """Run a plugin like a runtime; return (exit status, stdout JSON or None, stderr)."""
        data = conf if isinstance(conf, (bytes, str)) else json.dumps(conf)
        if isinstance(data, str):
            data = data.encode()
        p = subprocess.run([binary or self.plugin], input=data, capture_output=True,
                           env=self.env(cmd, cid, ifname, netns, extra), timeout=120)
        out = None
        if p.stdout.strip():
            try:
                out = json.loads(p.stdout)
            except ValueError:
                out = {"unparsable": p.stdout.decode(errors="replace")}
        err = p.stderr.decode(errors="replace")
        if err and os.environ.get("IBVF_LAB_VERBOSE"):
            sys.stderr.write(err)
        return p.returncode, out, err

    def spawn(self, cmd, conf, cid, ifname="net1", netns=None, extra=None):
        """Start a plugin without waiting (concurrency tests)."""
        p = subprocess.Popen([self.plugin], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.env(cmd, cid, ifname, netns, extra))
        p.stdin.write(json.dumps(conf).encode())
        p.stdin.close()
        return p

    # ------------------------------------------------------------ inspecting
    def link(self, name, ns=None):
        """`ip -j -d link show` of @name in @ns (None: host), or None."""
        cmd = ["ip", "-j", "-d"] + (["-n", ns] if ns else []) + ["link", "show", "dev", name]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            return None
        return json.loads(p.stdout)[0]

    def links(self, ns=None):
        cmd = ["ip", "-j"] + (["-n", ns] if ns else []) + ["link", "show"]
        return [l["ifname"] for l in json.loads(sh(*cmd))]

    def addrs(self, name, ns):
        out = json.loads(sh("ip", "-j", "-n", ns, "addr", "show", "dev", name))
        return [f"{a['local']}/{a['prefixlen']}" for a in out[0].get("addr_info", [])
                if a.get("scope") != "link"]

    def ipam_leases(self, network):
        d = os.path.join(self.ipamdir, network)
        if not os.path.isdir(d):
            return []
        return sorted(f for f in os.listdir(d) if f[0].isdigit() or ":" in f)

    def cache_file(self, cid, ifname="net1"):
        return os.path.join(self.cache, f"{cid}-{ifname}")

    # -------------------------------------------------------------- cleanup
    def cleanup(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(5)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
        for ns in self.netns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        # a VF netdev renamed to a temporary name by a failed move
        for l in json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                           text=True).stdout or "[]"):
            if f" {self.prefix}" in l.get("ifalias", "") or \
               l["ifname"].startswith(self.prefix):
                subprocess.run(["ip", "link", "del", l["ifname"]], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


class Tap:
    """TAP-style output: "ok N - what" / "not ok N - what"."""

    def __init__(self):
        self.n = self.failed = 0

    def ok(self, cond, what, detail=""):
        self.n += 1
        if cond:
            print(f"ok {self.n} - {what}", flush=True)
        else:
            self.failed += 1
            print(f"not ok {self.n} - {what}", flush=True)
            if detail:
                for line in str(detail).splitlines()[:40]:
                    print(f"#   {line}", flush=True)
        return cond

    def done(self):
        print(f"1..{self.n}")
        print(f"# {self.n - self.failed} passed, {self.failed} failed")
        return 0 if self.failed == 0 else 1
