#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ib-sriov with a real RDMA device: the RC QP check in ADD, CHECK's port and
P_Key table read from the kernel's sysfs, and rdmaIsolation against the real
RDMA netns modes. Meant for the kernel VM lab (tests/lab/vm/guest-cni.sh:
soft-RoCE rxe0 on lo); it runs on any host with an RDMA device DEV that no
one else uses.

Usage: test_cni_rdma.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs DEV

The VF is a veth of a fake sysfs PF whose RDMA device entry is DEV; the fake
tree's class/infiniband/DEV points at the real one, so the plugin reads the
real port state and P_Key table. Phase 1 runs in the RDMA "shared" netns mode,
phase 2 switches to "exclusive" (only possible while no other netns exists).
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cni_lab import Lab, Tap, need_lab, sh  # noqa: E402
from test_ib_sriov import assert_rollback, host_ok, nothing_held  # noqa: E402


def rdma_mode():
    out = sh("rdma", "system", "show")
    return "exclusive" if "netns exclusive" in out else "shared"


def setup_vf(lab, dev):
    vf = lab.vf()
    ifindex = lab.ifindex(vf.name)
    sh(lab.fakesysfs, lab.sysfs, "unbind", vf.pci)
    sh(lab.fakesysfs, lab.sysfs, "bind", vf.pci, "mlx5_core", vf.name, str(ifindex), dev)
    cls = os.path.join(lab.sysfs, "class", "infiniband", dev)
    if os.path.islink(cls) or os.path.exists(cls):
        os.unlink(cls)
    os.symlink(f"/sys/class/infiniband/{dev}", cls)
    vf.rdma = dev
    return vf


def conf(lab, vf, **kw):
    c = {"cniVersion": "1.0.0", "name": "ibrdma", "type": "ib-sriov", "deviceID": vf.pci,
         "ipam": {"type": "host-local", "subnet": "10.66.0.0/24", "dataDir": lab.ipamdir},
         "rcCheck": {"iterations": 200}}
    c.update(kw)
    return c


def phase_shared(lab, t, dev):
    vf, ns = setup_vf(lab, dev), lab.ns()
    net = "ibrdma"
    rc, out, err = lab.run("ADD", conf(lab, vf, rdmaIsolation=True), "c-iso-shared", netns=ns)
    t.ok(rc == 1 and out["code"] == 7 and "exclusive" in out["details"],
         "shared RDMA netns mode: rdmaIsolation refused, naming exclusive mode", out)
    assert_rollback(lab, t, vf, ns, "c-iso-shared", net, "rdmaIsolation refused")

    c = conf(lab, vf)
    rc, res, err = lab.run("ADD", c, "c-rc", netns=ns)
    t.ok(rc == 0 and f"RC check passed on {dev}" in err,
         f"ADD runs the RC check on {dev} (default: on when the device exists)", f"{res}\n{err}")
    for line in err.splitlines():
        if "RC check passed" in line:
            print("# " + line.split("info: ", 1)[-1], flush=True)
    rc, out, err = lab.run("CHECK", dict(c, prevResult=res), "c-rc", netns=ns)
    t.ok(rc == 0, "CHECK reads the real port state: ACTIVE", f"{out}\n{err}")
    rc, out, err = lab.run("DEL", c, "c-rc", netns=ns)
    t.ok(rc == 0, "DEL", f"{out}\n{err}")
    host_ok(lab, t, vf, "DEL after a checked ADD")

    c = conf(lab, vf, pkey="0x7fff")
    rc, res, err = lab.run("ADD", c, "c-rc-pkey", netns=ns)
    t.ok(rc == 0 and "P_Key index 0" in err,
         "RC check with PKey 0x7fff (full member: 0xffff at index 0)", f"{res}\n{err}")
    rc, out, err = lab.run("CHECK", dict(c, prevResult=res), "c-rc-pkey", netns=ns)
    t.ok(rc == 0, "CHECK finds 0xffff in the real P_Key table", f"{out}\n{err}")
    lab.run("DEL", c, "c-rc-pkey", netns=ns)

    c = conf(lab, vf, pkey="0x10")
    rc, out, err = lab.run("ADD", c, "c-rc-bad", netns=ns)
    t.ok(rc == 1 and out["code"] == 103 and "0x8010" in out["details"] and dev in
         out["details"], "RC check fails for a PKey the port lacks: code 103 naming it", out)
    assert_rollback(lab, t, vf, ns, "c-rc-bad", net, "RC check failed")

    c = conf(lab, vf, rcCheck={"p99MaxUs": 1, "iterations": 100})
    rc, out, err = lab.run("ADD", c, "c-rc-slow", netns=ns)
    t.ok(rc == 1 and out["code"] == 103 and "slow" in out["details"],
         "p99 above rcCheck.p99MaxUs fails the ADD (status slow)", out)
    assert_rollback(lab, t, vf, ns, "c-rc-slow", net, "RC check too slow")

    c = conf(lab, vf, pkey="0x10", rcCheck={"enabled": False})
    rc, res, err = lab.run("ADD", c, "c-rc-off", netns=ns)
    t.ok(rc == 0 and "RC check passed" not in err, "rcCheck.enabled false: no check", err)
    rc, out, err = lab.run("CHECK", dict(c, prevResult=res), "c-rc-off", netns=ns)
    t.ok(rc == 1 and out["code"] == 104 and "PKey 0x0010" in out["details"],
         "CHECK fails: the real P_Key table has no 0x8010", out)
    rc, out, err = lab.run("DEL", c, "c-rc-off", netns=ns)
    t.ok(rc == 0, "DEL after an unchecked ADD", f"{out}\n{err}")
    nothing_held(lab, t, "c-rc-off", net, "DEL after an unchecked ADD")
    return vf


def phase_exclusive(lab, t, dev, vf):
    net = "ibrdma"
    for ns in list(lab.netns):
        sh("ip", "netns", "del", ns)
        lab.netns.remove(ns)
    for _ in range(100):  # netns teardown is asynchronous
        if subprocess.run(["rdma", "system", "set", "netns", "exclusive"],
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.2)
    if not t.ok(rdma_mode() == "exclusive", "rdma system set netns exclusive"):
        return
    ns = lab.ns()
    c = conf(lab, vf, rdmaIsolation=True)
    rc, out, err = lab.run("ADD", c, "c-iso", netns=ns)
    t.ok(rc == 1 and out["code"] == 100 and f"moving RDMA device {dev}" in out["details"] and
         "not supported" in out["details"],
         "exclusive mode: the RDMA device move is tried; rxe cannot move (EOPNOTSUPP)", out)
    assert_rollback(lab, t, vf, ns, "c-iso", net, "RDMA move refused")
    t.ok(any(dev in (e.get("ifname"), e.get("dev")) for e in
             json.loads(sh("rdma", "-j", "dev", "show"))),
         f"{dev} still in the host netns")
    c = conf(lab, vf)
    rc, res, err = lab.run("ADD", c, "c-excl", netns=ns)
    t.ok(rc == 0 and f"RC check passed on {dev}" in err,
         "exclusive mode without isolation: RC check in the host netns passes", f"{res}\n{err}")
    rc, out, err = lab.run("DEL", c, "c-excl", netns=ns)
    t.ok(rc == 0, "DEL", f"{out}\n{err}")
    nothing_held(lab, t, "c-excl", net, "exclusive mode DEL")


def main():
    need_lab()
    if len(sys.argv) < 4:
        print("usage: test_cni_rdma.py ib-sriov ibvf-fakesysfs DEV", file=sys.stderr)
        return 2
    dev = sys.argv[3]
    t = Tap()
    if not os.path.exists(f"/sys/class/infiniband/{dev}"):
        t.ok(False, f"RDMA device {dev} exists")
        return t.done()
    lab = Lab(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), t)
    lab.start_daemon()
    try:
        t.ok(rdma_mode() == "shared", "the RDMA subsystem starts in shared netns mode")
        vf = phase_shared(lab, t, dev)
        phase_exclusive(lab, t, dev, vf)
    except Exception as e:
        t.ok(False, f"raised {type(e).__name__}", e)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
