#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ib-sriov under a real container runtime: Podman 4.3 (Debian) with its CNI
backend, which runs ADD/DEL through libcni, runc, a busybox root file system
(--rootfs, no image download), the real ibvfd (noop SM backend, the daemon's
fake VF driver) and the netns lab's fake sysfs with veth VF netdevs.

Covers `run`, `restart` (the same GUID back: issue 15 item 8), `stop`,
`kill`, `rm -f`, 4 containers started and removed in parallel, and ibvfd
down during a `stop` (issue 15 item 7: Podman never retries the DEL).
Everything Podman keeps is private (containers.conf, storage.conf, root,
runroot, network config dir); only libcni's result cache is the host's
/var/lib/cni (entries of this run's random network names).

Usage: test_podman.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs PATH/TO/ibvfd SM_MODULE_DIR
Root needed; exits 77 without podman/runc/busybox unless IBVF_REQUIRE_LABS=1.
"""
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cni_lab import Lab, Tap, need_lab, skip  # noqa: E402
from test_cni_ibvfd import Ibvfd  # noqa: E402

N = 4  # containers in parallel (and networks: one VF per network, as one deviceID per NAD)


class Podman:
    def __init__(self, lab, d):
        self.lab, self.d = lab, d
        self.dir = os.path.join(lab.tmp, "podman")
        self.rootfs = os.path.join(self.dir, "rootfs")
        self.netd = os.path.join(self.dir, "net.d")
        self.bin = os.path.join(self.dir, "cni-bin")
        self.plugin_log = os.path.join(self.dir, "ib-sriov.log")
        for p in (self.netd, self.bin, os.path.join(self.rootfs, "bin"),
                  os.path.join(self.dir, "tmp")):
            os.makedirs(p)
        for p in ("proc", "sys", "dev", "etc", "tmp"):
            os.makedirs(os.path.join(self.rootfs, p))
        shutil.copy(shutil.which("busybox"), os.path.join(self.rootfs, "bin", "busybox"))
        for c in ("sh", "sleep", "ip"):
            os.symlink("busybox", os.path.join(self.rootfs, "bin", c))
        os.symlink(lab.plugin, os.path.join(self.bin, "ib-sriov"))
        self.conf = os.path.join(self.dir, "containers.conf")
        self.storage = os.path.join(self.dir, "storage.conf")
        # conmon runs `podman container cleanup` (the DEL of stop, kill, exit) with
        # only conmon_env_vars: the lab's settings must be there too
        conmon_env = ", ".join(json.dumps(f"{k}={v}") for k, v in sorted(self.env().items())
                               if k == "PATH" or k.startswith(("IBVF_", "CONTAINERS_")))
        with open(self.conf, "w") as f:
            f.write(f"""[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[network]
network_backend = "cni"
network_config_dir = "{self.netd}"
cni_plugin_dirs = ["{self.bin}", "/usr/lib/cni"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{self.dir}/events.log"
tmp_dir = "{self.dir}/tmp"
conmon_env_vars = [{conmon_env}]
""")
        with open(self.storage, "w") as f:
            f.write(f"""[storage]
driver = "vfs"
graphroot = "{self.dir}/root"
runroot = "{self.dir}/runroot"
""")
        self.nets = []

    def network(self, i, vf):
        name = f"{self.lab.prefix}n{i}"
        conflist = {"cniVersion": "1.0.0", "name": name, "plugins": [{
            "type": "ib-sriov", "deviceID": vf.pci, "pkey": "0x10", "link_state": "enable",
            "ibvfd": {"socket": self.d.sock}, "logFile": self.plugin_log,
            "ipam": {"type": "host-local", "subnet": f"10.89.{i}.0/24",
                     "dataDir": self.lab.ipamdir}}]}
        with open(os.path.join(self.netd, name + ".conflist"), "w") as f:
            json.dump(conflist, f)
        self.nets.append(name)
        return name

    def env(self):
        e = self.lab.env("ADD")
        for k in ("CNI_COMMAND", "CNI_PATH", "CNI_IFNAME", "CNI_CONTAINERID", "CNI_ARGS",
                  "CNI_NETNS"):
            e.pop(k, None)
        e.update(CONTAINERS_CONF=self.conf, CONTAINERS_STORAGE_CONF=self.storage)
        return e

    def __call__(self, *args, timeout=60):
        p = subprocess.run(["podman"] + list(args), capture_output=True, text=True,
                           env=self.env(), timeout=timeout)
        return p.returncode, p.stdout.strip(), p.stderr.strip()

    def spawn(self, *args):
        return subprocess.Popen(["podman"] + list(args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env())

    def run(self, name, net):
        return self("run", "-d", "--name", name, "--network", net, "--rootfs", self.rootfs,
                    "/bin/sleep", "600")

    def cleanup(self):
        try:
            self("rm", "-f", "-a", "-t", "0", timeout=120)
        except Exception:
            pass
        for n in self.nets:
            for d in ("/var/lib/cni/results",):
                for f in os.listdir(d) if os.path.isdir(d) else []:
                    if f.startswith(n + "-"):
                        os.unlink(os.path.join(d, f))


def owner_of(d, cid):
    for k, o in d.owners().items():
        if k.startswith(cid):
            return o
    return None


def guid(o):
    return int(o["guid"].replace(":", ""), 16) if o else 0


def wait_for(cond, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.2)
    return cond()


def results_left(pm, cid):
    d = "/var/lib/cni/results"
    return [f for f in (os.listdir(d) if os.path.isdir(d) else []) if cid in f]


def released(lab, t, pm, d, vf, cid, what, timeout=30.0):
    t.ok(wait_for(lambda: owner_of(d, cid) is None, timeout), f"{what}: ibvfd released the owner",
         d.owners())
    t.ok(wait_for(lambda: lab.link(vf.name) is not None, 10), f"{what}: VF netdev back in the host")
    t.ok(wait_for(lambda: not [f for f in os.listdir(lab.cache) if f.startswith(cid)], 10),
         f"{what}: plugin cache entry removed", os.listdir(lab.cache))
    t.ok(wait_for(lambda: not results_left(pm, cid), 10), f"{what}: libcni result cache removed",
         results_left(pm, cid))


def lifecycle(lab, t, pm, d, vfs, nets):
    vf, net = vfs[0], nets[0]
    rc, cid, err = pm.run("pm-a", net)
    if not t.ok(rc == 0, "podman run: ADD through libcni and ibvfd", err):
        return
    o = owner_of(d, cid)
    t.ok(o and o["state"] == "handed", "ibvfd holds the container's owner, handed", d.owners())
    t.ok(lab.link(vf.name) is None, "the VF netdev left the host netns")
    rc, out, err = pm("exec", "pm-a", "/bin/ip", "-o", "link", "show", "eth0")
    t.ok(rc == 0 and "eth0" in out, "the container sees the VF as eth0", f"{out}\n{err}")
    g = guid(o)
    rc, _, err = pm("restart", "-t", "0", "pm-a")
    o2 = owner_of(d, cid)
    t.ok(rc == 0 and o2 and o2["state"] == "handed", "podman restart: DEL + ADD", err)
    t.ok(guid(o2) == g, "podman restart: the same GUID (same owner, within the quarantine)",
         f"{g:x} {guid(o2):x}")
    rc, _, err = pm("stop", "-t", "0", "pm-a")
    t.ok(rc == 0, "podman stop", err)
    released(lab, t, pm, d, vf, cid, "stop")
    rc, _, err = pm("start", "pm-a")
    t.ok(rc == 0 and owner_of(d, cid), "podman start: attached again", err)
    rc, _, err = pm("kill", "pm-a")
    t.ok(rc == 0, "podman kill", err)
    released(lab, t, pm, d, vf, cid, "kill (conmon's cleanup)")
    rc, _, err = pm("start", "pm-a")
    t.ok(rc == 0 and owner_of(d, cid), "podman start after kill: attached again", err)
    rc, _, err = pm("rm", "-f", "-t", "0", "pm-a")
    t.ok(rc == 0, "podman rm -f of a running container", err)
    released(lab, t, pm, d, vf, cid, "rm -f")


def parallel(lab, t, pm, d, vfs, nets):
    start = time.monotonic()
    procs = [pm.spawn("run", "-d", "--name", f"pm-p{i}", "--network", nets[i], "--rootfs",
                      pm.rootfs, "/bin/sleep", "600") for i in range(N)]
    res = [(p.wait(120), p.stdout.read().strip(), p.stderr.read()) for p in procs]
    took = time.monotonic() - start
    bad = [r for r in res if r[0]]
    t.ok(not bad, f"{N} parallel podman run all succeed ({took:.1f} s)", bad[:2])
    owners = [owner_of(d, r[1]) for r in res if not r[0]]
    t.ok(len(owners) == N and all(o and o["state"] == "handed" for o in owners) and
         len({o["guid"] for o in owners if o}) == N, f"{N} handed owners, {N} distinct GUIDs",
         owners)
    procs = [pm.spawn("rm", "-f", "-t", "0", f"pm-p{i}") for i in range(N)]
    bad = [p.stderr.read() for p in procs if p.wait(120)]
    t.ok(not bad, f"{N} parallel podman rm -f all succeed", bad[:2])
    t.ok(wait_for(lambda: not any(owner_of(d, r[1]) for r in res if not r[0])),
         "ibvfd released all of them", d.owners())
    t.ok(all(lab.link(v.name) is not None for v in vfs[:N]), "every VF netdev back in the host")
    t.ok(d.rpc("status")["result"]["pool"]["allocated"] == 0, "nothing allocated in the pool")


def daemon_down_at_stop(lab, t, pm, d, vfs, nets):
    vf, net = vfs[1], nets[1]
    rc, cid, err = pm.run("pm-down", net)
    if not t.ok(rc == 0 and owner_of(d, cid), "podman run", err):
        return
    d.stop()
    rc, _, err = pm("stop", "-t", "0", "pm-down")
    t.ok(rc == 0, "ibvfd down: podman stop succeeds (and will never retry the DEL)", err)
    spool = os.path.join(d.run, "release.d")
    # the DEL runs in Podman's container cleanup, which may finish after `stop` returns
    t.ok(wait_for(lambda: os.path.isdir(spool) and
                  any(f.startswith(cid) for f in os.listdir(spool)), 20),
         "the plugin's DEL left a release request in ibvfd's spool",
         os.listdir(spool) if os.path.isdir(spool) else "no spool")
    t.ok(wait_for(lambda: not results_left(pm, cid), 10),
         "Podman dropped its libcni result: the DEL succeeded", results_left(pm, cid))
    t.ok(not os.path.exists(d.sock), "ibvfd is still down")
    t.ok(d.start(), "ibvfd starts again")
    released(lab, t, pm, d, vf, cid, "stop while ibvfd was down")
    t.ok(wait_for(lambda: not os.listdir(spool), 10), "the request was applied and removed")
    t.ok(d.rpc("status")["result"]["pool"]["allocated"] == 0, "nothing allocated in the pool")
    pm("rm", "-f", "-t", "0", "pm-down")


def main():
    need_lab()
    for b in ("podman", "runc", "conmon", "busybox"):
        if shutil.which(b) is None and not os.path.exists(f"/usr/libexec/podman/{b}"):
            skip(f"{b} missing (Debian packages podman, runc, conmon, busybox-static)")
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    t = Tap()
    lab = Lab(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), t)
    vfs = lab.vfs(N)
    d = Ibvfd(lab, os.path.abspath(sys.argv[3]), os.path.abspath(sys.argv[4]), vfs)
    cfg = json.load(open(d.cfg))
    cfg["pool"]["quarantine_s"] = 120
    cfg["sm"]["periodic_update_s"] = 1
    json.dump(cfg, open(d.cfg, "w"))
    lab.default_sock = d.sock
    pm = Podman(lab, d)
    nets = [pm.network(i, v) for i, v in enumerate(vfs)]
    try:
        t.ok(d.start(), "ibvfd starts (noop SM backend, fake VF driver)")
        lifecycle(lab, t, pm, d, vfs, nets)
        parallel(lab, t, pm, d, vfs, nets)
        daemon_down_at_stop(lab, t, pm, d, vfs, nets)
    except Exception as e:
        t.ok(False, f"raised {type(e).__name__}", e)
    finally:
        pm.cleanup()
        d.stop()
    if t.failed:
        for name, path in (("ibvfd", os.path.join(d.dir, "ibvfd.log")),
                           ("ib-sriov", pm.plugin_log)):
            if os.path.exists(path):
                print(f"# {name} log (tail):")
                for line in open(path).read().splitlines()[-25:]:
                    print("#   " + line)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
