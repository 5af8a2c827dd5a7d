#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ib-sriov against the simulated fabric (ibsim + the real OpenSM, tests/lab/fabric).
The VFs are HCA nodes vf0.. of the fabric and their netdevs real veths
(ibvf-fakesysfs --veth), so OpenSM's view (port ACTIVE, LID for the GUID,
P_Key table by SMP) and the netns view are both checked.

1. Compatibility mode: the GUID from ib-kubernetes, programmed through the VF
   module with the ibsim lab VF driver (docs/config.md "vf.ibsim"): ADD, DEL,
   a failed ADD's rollback.
2. Daemon mode (when ibvfd and the SM module directory are given): the real
   ibvfd as fabric node pf0 with the ibsim VF driver, the opensm SM backend
   editing OpenSM's partition file and the fabric port watcher: ADD puts the
   pool's GUID into PKey 0x0012 (seen in the VF's P_Key table), DEL takes it
   out; then N concurrent ADDs and DELs ($IBVF_CNI_FABRIC_N, default 50).

Usage: test_cni_fabric.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs [PATH/TO/ibvfd SM_MODULE_DIR]
Runs in a private network namespace of its own (ibsim's abstract sockets and
the veths die with it). Root and the fabric lab's Debian packages needed.
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cni_lab import Lab, Tap, sh, skip  # noqa: E402

FL = os.path.join(HERE, "..", "fabric", "fabric-lab.sh")
X = "02:00:00:00:00:0a:00:01"
Y = "02:00:00:00:00:0b:00:01"


def hexguid(g):
    return "0x" + g.replace(":", "")


class Fabric:
    def __init__(self, d):
        self.d = d

    def up(self, vfs):
        p = subprocess.run([FL, "up", self.d, "--vfs", str(vfs), "--hosts", "1", "--zero-vfs"],
                           capture_output=True, text=True, timeout=120)
        if p.returncode == 77:
            skip("fabric lab packages missing (tools/install-deps)")
        if p.returncode:
            raise RuntimeError(f"fabric lab did not come up: {p.stderr}")
        env = {}
        for line in open(os.path.join(self.d, "lab.env")):
            if "=" in line:
                k, v = line.strip().split("=", 1)
                env[k] = v.strip("'\"")
        return env

    def down(self):
        subprocess.run([FL, "down", self.d], capture_output=True, timeout=60)

    def run(self, node, *cmd):
        p = subprocess.run([FL, "run", self.d, node] + list(cmd), capture_output=True, text=True,
                           timeout=60)
        return p.stdout

    def state(self, node):
        for line in self.run(node, "ibstat").splitlines():
            if line.strip().startswith("State:"):
                return line.split(":", 1)[1].strip()
        return ""

    def lid(self, guid):
        out = self.run("pf0", "ibaddr", "-G", hexguid(guid))
        return "LID start" in out

    def pkeys(self, guid):
        return self.run("pf0", "smpquery", "-G", "pkeys", hexguid(guid))

    def wait(self, fn, timeout=15):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if fn():
                return True
            time.sleep(0.2)
        return False


DAEMON = [None]


def policy_file(lab, vf):
    """The ibsim VF driver's link policy of @vf: <PF>/sriov/<index>/policy."""
    dev = os.path.join(lab.sysfs, "bus", "pci", "devices")
    pf = os.path.basename(os.readlink(os.path.join(dev, vf.pci, "physfn")))
    return os.path.join(dev, pf, "sriov", str(vf.index), "policy")


def daemon_phase(lab, t, fab, env, vfs, ibvfd, moddir):
    if not os.path.exists(os.path.join(moddir, "opensm", "opensm.so")):
        t.ok(False, f"opensm SM backend module in {moddir}/opensm")
        return
    d = os.path.join(lab.tmp, "ibvfd")
    for sub in ("state", "run"):
        os.makedirs(os.path.join(d, sub), mode=0o700)
    sock = os.path.join(d, "run", "ibvfd.sock")
    cfg = os.path.join(d, "ibvfd.json")
    with open(cfg, "w") as f:
        json.dump({"state_dir": os.path.join(d, "state"), "run_dir": os.path.join(d, "run"),
                   "sysfs_root": lab.sysfs, "log_level": "info",
                   "pool": {"ranges": [{"start": "02:00:00:00:00:08:00:01",
                                        "end": "02:00:00:00:00:08:0f:ff"}],
                            "quarantine_s": 1},
                   "sm": {"backend": "opensm", "module_dir": os.path.join(moddir, "opensm"),
                          "periodic_update_s": 2,
                          "config": {"partition_file": env["PARTITIONS_FILE"],
                                     "pid_file": env["OPENSM_PIDFILE"], "verify": "off"}},
                   "vf": {"driver": "ibsim", "rebind_timeout_ms": 10000,
                          "ibsim": {"console": env["IBSIM_CONSOLE"], "output": env["IBSIM_OUT"],
                                    "node_prefix": "vf", "real_netdevs": True,
                                    "relink_delay_ms": 100}},
                   "port_watch": {"source": "fabric", "poll_min_ms": 5, "poll_max_ms": 200},
                   "api": {"socket": sock},
                   "daemon": {"prepare_timeout_s": 240, "port_timeout_s": 180}}, f)
    log = open(os.path.join(d, "ibvfd.log"), "w")
    DAEMON[0] = subprocess.Popen([FL, "run", fab.d, "pf0", ibvfd, "-f", "-c", cfg],
                                 stdout=log, stderr=subprocess.STDOUT,
                                 env=dict(os.environ, FABRIC_LAB_TIMEOUT="1200"))
    lab.sock = sock
    ready = fab.wait(lambda: os.path.exists(sock) and
                     lab.rpc("status").get("result", {}).get("ready"), 60)
    if not t.ok(ready, "ibvfd up as fabric node pf0 and ready (opensm backend validated)",
                open(os.path.join(d, "ibvfd.log")).read()[-2000:]):
        return
    lab.default_sock = sock
    ns = lab.ns()
    v = vfs[0]
    conf = {"cniVersion": "1.0.0", "name": "ibfabd", "type": "ib-sriov", "deviceID": v.pci,
            "pkey": "0x12", "ibvfd": {"timeout": 300},
            "ipam": {"type": "host-local", "subnet": "10.91.0.0/16", "gateway": "10.91.0.1",
                     "dataDir": lab.ipamdir}}
    rc, res, err = lab.run("ADD", conf, "c-fabd", netns=ns)
    if not t.ok(rc == 0, "daemon mode ADD on the fabric", f"{res}\n{err}"):
        return
    guid = json.load(open(lab.cache_file("c-fabd")))["ibvf"]["guid"]
    t.ok(guid.startswith("02:00:00:00:00:08:"), f"ibvfd gave the VF a pool GUID ({guid})")
    t.ok(fab.wait(lambda: fab.lid(guid)), "OpenSM gave it a LID")
    t.ok(fab.wait(lambda: "0x8012" in fab.pkeys(guid)),
         "the VF port's P_Key table (SMP) holds 0x8012: the opensm backend added it")
    t.ok(guid.replace(":", "") in open(env["PARTITIONS_FILE"]).read().lower() or
         hexguid(guid) in open(env["PARTITIONS_FILE"]).read().lower(),
         "OpenSM's partition file lists the GUID")
    t.ok(lab.link("net1", ns) is not None, "the VF netdev is net1 in the Pod")
    rc, out, err = lab.run("DEL", conf, "c-fabd", netns=ns)
    t.ok(rc == 0, "daemon mode DEL on the fabric", f"{out}\n{err}")
    t.ok(fab.wait(lambda: not fab.lid(guid)), "the GUID left the fabric (VF reset)")
    part = open(env["PARTITIONS_FILE"]).read().lower()
    t.ok(guid.replace(":", "") not in part and hexguid(guid) not in part,
         "the partition file no longer lists the GUID")

    # issue 15 item 6: a VF that was "auto" (Follow) before its attach is
    # "auto" again after the release, also when it is reset to GUID 0
    v1 = vfs[1]
    pol = policy_file(lab, v1)
    os.makedirs(os.path.dirname(pol), exist_ok=True)
    with open(pol, "w") as f:
        f.write("Follow\n")
    conf6 = dict(conf, deviceID=v1.pci, link_state="enable")
    rc, res, err = lab.run("ADD", conf6, "c-fab6", netns=ns)
    if t.ok(rc == 0, "daemon mode ADD with link_state enable", f"{res}\n{err}"):
        t.ok(open(pol).read().strip() == "Up", "the VF's link policy is Up (enable) while attached",
             open(pol).read())
        rc, out, err = lab.run("DEL", conf6, "c-fab6", netns=ns)
        t.ok(rc == 0, "daemon mode DEL after link_state enable", f"{out}\n{err}")
        t.ok(open(pol).read().strip() == "Follow",
             "DEL put the pre-attach link state back (Follow = auto), with the GUID reset to 0",
             open(pol).read())

    # issue 15 item 1: a network without "pkey" (SriovIBNetwork's is optional)
    conf1 = {k: v for k, v in conf.items() if k != "pkey"}
    try:
        rc, res, err = lab.run("ADD", conf1, "c-fab1", netns=ns)
    except subprocess.TimeoutExpired as e:
        rc, res, err = -1, None, str(e)
        err += f"\nvf0 state {fab.state('vf0')!r}; ibstat vf0: {fab.run('vf0', 'ibstat')[-600:]}"
    if t.ok(rc == 0, "daemon mode ADD of a network without pkey",
            f"{res}\n{err}\n" + open(os.path.join(d, "ibvfd.log")).read()[-3000:]):
        g1 = json.load(open(lab.cache_file("c-fab1")))["ibvf"]["guid"]
        t.ok(g1.startswith("02:00:00:00:00:08:"), f"a pool GUID without a PKey ({g1})")
        t.ok(fab.wait(lambda: fab.lid(g1)), "port ACTIVE: OpenSM gave it a LID")
        pk = fab.pkeys(g1)
        t.ok("0x8012" not in pk and "0x0012" not in pk,
             "no tenant P_Key in the VF port's table", pk)
        part = open(env["PARTITIONS_FILE"]).read().lower()
        t.ok(g1.replace(":", "") not in part and hexguid(g1) not in part,
             "no membership pushed: the partition file does not list the GUID")
        t.ok("no tenant membership pushed" in open(os.path.join(d, "ibvfd.log")).read(),
             "ibvfd's log says no tenant membership was pushed")
        rc, out, err = lab.run("DEL", conf1, "c-fab1", netns=ns)
        t.ok(rc == 0, "DEL of the network without pkey", f"{out}\n{err}")
        t.ok(fab.wait(lambda: not fab.lid(g1)), "its GUID left the fabric")

    n = len(vfs)
    nss = [lab.ns() for _ in range(n)]
    confs = [dict(conf, deviceID=v.pci) for v in vfs]
    start = time.monotonic()
    procs = [lab.spawn("ADD", c, f"c-fabd-{i}", netns=nsx) for i, (c, nsx) in
             enumerate(zip(confs, nss))]
    res = [(p.wait(1200), p.stdout.read(), p.stderr.read()) for p in procs]
    t_add = time.monotonic() - start
    bad = [(i, r) for i, r in enumerate(res) if r[0] != 0]
    t.ok(not bad, f"{n} concurrent ADDs through ibvfd on the fabric succeed ({t_add:.1f} s)",
         bad[:2])
    guids = [json.load(open(lab.cache_file(f"c-fabd-{i}")))["ibvf"]["guid"]
             for i in range(n) if os.path.exists(lab.cache_file(f"c-fabd-{i}"))]
    t.ok(len(set(guids)) == n, f"{n} distinct GUIDs")
    t.ok(all(fab.lid(g) for g in guids), f"OpenSM has a LID for all {n} GUIDs")
    start = time.monotonic()
    procs = [lab.spawn("DEL", c, f"c-fabd-{i}", netns=nsx) for i, (c, nsx) in
             enumerate(zip(confs, nss))]
    res = [(p.wait(1200), p.stdout.read(), p.stderr.read()) for p in procs]
    t_del = time.monotonic() - start
    bad = [(i, r) for i, r in enumerate(res) if r[0] != 0]
    t.ok(not bad, f"{n} concurrent DELs through ibvfd on the fabric succeed ({t_del:.1f} s)",
         bad[:2])
    owners = lab.rpc("list", {"limit": 1000})["result"]["owners"]
    t.ok(owners == [], "ibvfd holds no owner afterwards", owners[:3])
    part = open(env["PARTITIONS_FILE"]).read().lower()
    t.ok(not any(g.replace(":", "") in part for g in guids), "no GUID left in the partition file")
    t.ok(all(lab.links(x) == ["lo"] for x in nss), "every Pod netns empty")
    t.ok(lab.ipam_leases("ibfabd") == [], "no lease left")


def main():
    if os.geteuid() != 0:
        skip("needs root")
    if len(sys.argv) < 3:
        print("usage: test_cni_fabric.py ib-sriov ibvf-fakesysfs [ibvfd SM_MODULE_DIR]",
              file=sys.stderr)
        return 2
    if not os.environ.get("IBVF_IN_PRIVATE_NETNS"):
        os.environ["IBVF_IN_PRIVATE_NETNS"] = "1"
        try:
            os.execvp("unshare", ["unshare", "--net", sys.executable] + sys.argv)
        except OSError as e:
            skip(f"cannot unshare a network namespace: {e}")
    t = Tap()
    lab = Lab(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), t)
    fab = Fabric(os.path.join(lab.tmp, "fabric"))
    os.makedirs(fab.d)
    try:
        n = int(os.environ.get("IBVF_CNI_FABRIC_N", 50)) if len(sys.argv) >= 5 else 2
        env = fab.up(max(n, 2))
        t.ok(True, f"fabric lab up: OpenSM on ibsim, {max(n, 2)} zero-GUID VF nodes")
        vfs = lab.vfs(max(n, 2))
        vf0, vf1 = vfs[0], vfs[1]
        state, run = os.path.join(lab.tmp, "state"), os.path.join(lab.tmp, "run")
        for d in (state, run):
            os.makedirs(d, mode=0o700)
        cfg = os.path.join(lab.tmp, "ibvfd.json")
        with open(cfg, "w") as f:
            json.dump({"state_dir": state, "run_dir": run, "sysfs_root": lab.sysfs,
                       "vf": {"driver": "ibsim", "rebind_timeout_ms": 3000,
                              "ibsim": {"console": env["IBSIM_CONSOLE"],
                                        "output": env["IBSIM_OUT"], "node_prefix": "vf",
                                        "real_netdevs": True, "relink_delay_ms": 100}}}, f)
        compat = {"IBVF_CNI_SOCKET": lab.no_sock, "IBVF_CONFIG": cfg}
        t.ok(fab.state("vf0") not in ("", "Active"), "zero-GUID vf0 is not Active",
             fab.state("vf0"))
        ns = lab.ns()

        # ADD: ib-kubernetes wrote the GUID and opened the gate
        conf = {"cniVersion": "1.0.0", "name": "ibfab", "type": "ib-sriov", "deviceID": vf0.pci,
                "pkey": "0x10", "ibKubernetesEnabled": True, "link_state": "enable",
                "args": {"cni": {"mellanox.infiniband.app": "configured", "guid": X}},
                "ipam": {"type": "host-local", "subnet": "10.90.0.0/24",
                         "dataDir": lab.ipamdir}}
        rc, res, err = lab.run("ADD", conf, "c-fab", netns=ns, extra=compat)
        t.ok(rc == 0, "compatibility mode ADD with the ib-kubernetes GUID", f"{res}\n{err}")
        t.ok(fab.wait(lambda: fab.state("vf0") == "Active"), "vf0's port goes Active")
        t.ok(fab.wait(lambda: fab.lid(X)), f"OpenSM gave port GUID {X} a LID")
        t.ok(lab.link("net1", ns) is not None, "the rebound VF netdev is net1 in the Pod")
        cache = json.load(open(lab.cache_file("c-fab")))
        t.ok(cache["HostIFGUID"] == "00:00:00:00:00:00:00:00" and cache["ibvf"]["guid"] == X and
             cache["ibvf"]["mode"] == "compat",
             "cache: previous GUID 0 and the new GUID recorded", cache)
        host_name = cache["HostIFNames"]
        t.ok(host_name.startswith(vf0.name), f"host name after the rebind: {host_name}")

        rc, out, err = lab.run("DEL", conf, "c-fab", netns=ns, extra=compat)
        t.ok(rc == 0, "compatibility mode DEL", f"{out}\n{err}")
        t.ok(fab.wait(lambda: not fab.lid(X)), f"{X} left the fabric (GUID reset)")
        t.ok(fab.wait(lambda: fab.state("vf0") not in ("", "Active")), "vf0 not Active again")
        t.ok(lab.link(host_name) is not None,
             f"the VF netdev is back in the host as {host_name} after the reset rebind",
             lab.links())
        t.ok(lab.ipam_leases("ibfab") == [], "lease released")

        # issue 15 item 5: no daemon, no GUID given, the VF's GUID reads back 0
        conf5 = {k: v for k, v in conf.items() if k not in ("ibKubernetesEnabled", "args")}
        rc, out, err = lab.run("ADD", conf5, "c-fab5", netns=ns, extra=compat)
        t.ok(rc == 1 and out.get("code") == 100 and "no valid GUID" in out.get("msg", ""),
             "compatibility mode refuses a VF whose GUID reads back 0 (no GUID given)", out)
        t.ok(lab.links(ns) == ["lo"], "the dead VF did not reach the Pod")
        t.ok(not os.path.exists(lab.cache_file("c-fab5")), "no cache entry for it")

        # a failed ADD after the GUID was programmed: the GUID comes off again
        conf1 = dict(conf, deviceID=vf1.pci,
                     args={"cni": {"mellanox.infiniband.app": "configured", "guid": Y}},
                     ipam={"type": "no-such-ipam"})
        rc, out, err = lab.run("ADD", conf1, "c-fab-fail", netns=ns, extra=compat)
        t.ok(rc == 1 and out["code"] == 101, "ADD with a missing IPAM plugin fails", out)
        t.ok(fab.wait(lambda: not fab.lid(Y)), f"rollback: {Y} is not on the fabric")
        t.ok(fab.state("vf1") != "Active", "rollback: vf1 back to GUID 0, not Active")
        t.ok(lab.links(ns) == ["lo"], "rollback: the Pod netns is empty")
        t.ok(not os.path.exists(lab.cache_file("c-fab-fail")), "rollback: no cache entry")
        for d in list(lab.netns):
            sh("ip", "netns", "del", d)
            lab.netns.remove(d)
        if len(sys.argv) >= 5:
            daemon_phase(lab, t, fab, env, vfs[:n], os.path.abspath(sys.argv[3]),
                         os.path.abspath(sys.argv[4]))
    except Exception as e:  # a crash is a failure; teardown still runs
        t.ok(False, f"raised {type(e).__name__}", e)
    finally:
        if DAEMON[0] and DAEMON[0].poll() is None:
            DAEMON[0].terminate()
            try:
                DAEMON[0].wait(20)
            except subprocess.TimeoutExpired:
                DAEMON[0].kill()
        fab.down()
    left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    t.ok(fab.d not in left, "teardown leaves no lab process")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
