#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ib-sriov against the simulated fabric (ibsim + the real OpenSM, tests/lab/fabric):
compatibility mode with a GUID from ib-kubernetes, programmed through the VF
module with the ibsim lab VF driver (docs/config.md "vf.ibsim"). The VFs are
HCA nodes vf0.. of the fabric and their netdevs real veths (ibvf-fakesysfs
--veth), so OpenSM's view (port ACTIVE, LID for the GUID) and the netns view
are both checked, for ADD, DEL and a failed ADD's rollback.

Usage: test_cni_fabric.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs
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
from cni_lab import Lab, Tap, skip  # noqa: E402

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

    def wait(self, fn, timeout=15):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if fn():
                return True
            time.sleep(0.2)
        return False


def main():
    if os.geteuid() != 0:
        skip("needs root")
    if len(sys.argv) < 3:
        print("usage: test_cni_fabric.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs", file=sys.stderr)
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
        env = fab.up(2)
        t.ok(True, "fabric lab up: OpenSM on ibsim, zero-GUID VFs vf0, vf1")
        vf0, vf1 = lab.vfs(2)
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
    except Exception as e:  # a crash is a failure; teardown still runs
        t.ok(False, f"raised {type(e).__name__}", e)
    finally:
        fab.down()
    left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    t.ok(fab.d not in left, "teardown leaves no lab process")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
