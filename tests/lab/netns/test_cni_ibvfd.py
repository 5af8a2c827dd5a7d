#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ib-sriov with the real ibvfd (its API server, pool store, attach state
machine and SM batcher, with the noop SM backend and the daemon's "fake" VF
driver, whose port seam reports ACTIVE at once): ADD/CHECK/DEL, GC, STATUS,
rollback, 50 concurrent ADDs and DELs on 50 VFs, and a daemon that goes away.

Usage: test_cni_ibvfd.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs PATH/TO/ibvfd SM_MODULE_DIR
Root needed (netns, veth); exits 77 otherwise unless IBVF_REQUIRE_LABS=1.
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

RANGE = (0x0200000000100000, 0x02000000001fffff)


class Ibvfd:
    def __init__(self, lab, binary, moddir, vfs):
        self.lab, self.binary = lab, binary
        self.dir = os.path.join(lab.tmp, "ibvfd")
        self.fake = os.path.join(self.dir, "vfs")
        self.state = os.path.join(self.dir, "state")
        self.run = os.path.join(self.dir, "run")
        self.sock = os.path.join(self.run, "ibvfd.sock")
        for d in (self.fake, self.state, self.run):
            os.makedirs(d, mode=0o700)
        self.cfg = os.path.join(self.dir, "ibvfd.json")
        with open(self.cfg, "w") as f:
            json.dump({"state_dir": self.state, "run_dir": self.run, "log_level": "info",
                       "pool": {"ranges": [{"start": "0x%016x" % RANGE[0],
                                            "end": "0x%016x" % RANGE[1]}],
                                "quarantine_s": 1, "sync": "normal"},
                       "sm": {"backend": "noop", "module_dir": moddir, "config": {}},
                       "vf": {"driver": "fake", "fake_dir": self.fake},
                       "api": {"socket": self.sock}}, f)
        self.add_vfs(vfs)
        self.proc = None

    def add_vfs(self, vfs):
        for v in vfs:
            with open(os.path.join(self.fake, v.pci), "w") as f:
                f.write(f"pf={v.name[:-len(str(v.index)) - 1]}pf vf={v.index} "
                        "node=0000000000000000 port=0000000000000000 link=auto gen=0\n")

    def vf_guid(self, v):
        line = open(os.path.join(self.fake, v.pci)).read()
        return int(line.split("port=")[1].split()[0], 16)

    def start(self):
        self.log = open(os.path.join(self.dir, "ibvfd.log"), "a")
        self.proc = subprocess.Popen([self.binary, "-f", "-c", self.cfg], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(self.sock):
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        return False

    def stop(self, sig=15):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def rpc(self, method, params=None):
        old = self.lab.sock
        self.lab.sock = self.sock
        try:
            return self.lab.rpc(method, params)
        finally:
            self.lab.sock = old

    def owners(self):
        res = self.rpc("list", {"limit": 1000})["result"]
        return {f"{o['owner']['container_id']}/{o['owner']['ifname']}": o for o in res["owners"]}


def conf(lab, vf, net="ibd", **kw):
    c = {"cniVersion": "1.0.0", "name": net, "type": "ib-sriov", "deviceID": vf.pci,
         "pkey": "0x10", "link_state": "enable",
         "ipam": {"type": "host-local", "subnet": "10.88.0.0/16", "gateway": "10.88.0.1",
                  "dataDir": lab.ipamdir}}
    c.update(kw)
    return c


def tests(lab, t, d):
    t.ok(d.start(), "ibvfd starts (noop SM backend, fake VF driver)")
    lab.default_sock = d.sock
    st = {"cniVersion": "1.1.0", "name": "ibd", "type": "ib-sriov"}
    rc, out, err = lab.run("STATUS", st, None, ifname=None)
    t.ok(rc == 0, "STATUS against ibvfd: ready", f"{out}\n{err}")

    vf, ns, cid = lab.all_vfs[0], lab.ns(), "c-real"
    c = conf(lab, vf)
    rc, res, err = lab.run("ADD", c, cid, netns=ns)
    if not t.ok(rc == 0, "ADD through ibvfd", f"{res}\n{err}"):
        return
    own = d.owners().get(f"{cid}/net1")
    guid = int(own["guid"].replace(":", ""), 16) if own else 0
    t.ok(own and own["state"] == "handed" and RANGE[0] <= guid <= RANGE[1],
         "ibvfd holds the owner, handed, with a GUID from its pool", own)
    t.ok(d.vf_guid(vf) == guid, "the VF was programmed with that GUID (fake driver file)")
    cache = json.load(open(lab.cache_file(cid)))
    t.ok(cache["ibvf"]["guid"] == own["guid"], "the cache records the same GUID")
    rc, out, err = lab.run("CHECK", dict(c, prevResult=res), cid, netns=ns)
    t.ok(rc == 0, "CHECK against ibvfd's record", f"{out}\n{err}")
    rc, out, err = lab.run("DEL", c, cid, netns=ns)
    t.ok(rc == 0, "DEL through ibvfd", f"{out}\n{err}")
    t.ok(f"{cid}/net1" not in d.owners(), "ibvfd released the owner")
    t.ok(d.vf_guid(vf) != guid, "the VF no longer carries the tenant's GUID")
    host_ok(lab, t, vf, "DEL through ibvfd")
    nothing_held(lab, t, cid, "ibd", "DEL through ibvfd")

    # a failure after prepare: ibvfd must end up holding nothing
    rc, out, _ = lab.run("ADD", dict(c, ipam={"type": "no-such-ipam"}), "c-real-fail",
                         netns=ns)
    t.ok(rc == 1 and out["code"] == 101, "ADD failing at IPAM after prepare", out)
    t.ok("c-real-fail/net1" not in d.owners(), "ibvfd holds nothing for the failed ADD",
         d.owners())
    t.ok(d.rpc("status")["result"]["pool"]["allocated"] == 0,
         "ibvfd's pool: the failed ADD's GUID is not allocated any more")
    assert_rollback(lab, t, vf, ns, "c-real-fail", "ibd", "ADD failed after prepare")

    # GC: two attachments, one still valid
    va, vb = lab.all_vfs[1], lab.all_vfs[2]
    na, nb = lab.ns(), lab.ns()
    lab.run("ADD", conf(lab, va, net="ibdgc"), "c-gc-a", netns=na)
    lab.run("ADD", conf(lab, vb, net="ibdgc"), "c-gc-b", netns=nb)
    gc = {"cniVersion": "1.1.0", "name": "ibdgc", "type": "ib-sriov",
          "ipam": conf(lab, va)["ipam"],
          "cni.dev/valid-attachments": [{"containerID": "c-gc-a", "ifname": "net1"}]}
    rc, out, err = lab.run("GC", gc, None, ifname=None)
    o = d.owners()
    t.ok(rc == 0 and "c-gc-a/net1" in o and "c-gc-b/net1" not in o,
         "GC through ibvfd keeps A and releases B", f"{out}\n{err}\n{o}")
    t.ok(lab.link(vb.name) is not None, "GC moved B's VF back to the host")
    lab.run("DEL", conf(lab, va, net="ibdgc"), "c-gc-a", netns=na)
    for n in (na, nb):
        sh("ip", "netns", "del", n)
        lab.netns.remove(n)


def staged_release(lab, t, d):
    """DEL sends release.sm before the netdev move and release after it (issue 17):
    the plain release skips the SM half; a DEL killed between the two (the record
    releasing, the netdev still in the Pod) is left alone by reconciliation and
    ends released by the retried DEL."""
    vf, ns, cid = lab.all_vfs[4], lab.ns(), "c-stage"
    c = conf(lab, vf)
    rc, res, err = lab.run("ADD", c, cid, netns=ns)
    t.ok(rc == 0, "staged: ADD", f"{res}\n{err}")
    rc, out, err = lab.run("DEL", dict(c, logLevel="debug"), cid, netns=ns)
    t.ok(rc == 0 and f"{cid}/net1" not in d.owners(), "staged: DEL released the owner",
         f"{out}\n{err}")
    rel = [x for x in err.splitlines() if "ibvfd release timing" in x]
    t.ok("release.sm answered, SM seen without the GUID" in err and rel and
         "sm_remove" not in rel[0] and "vf_reset" in rel[0],
         "staged: release.sm removed the membership during the move, the release after it "
         "only reset the VF", rel or err)
    host_ok(lab, t, vf, "staged DEL")

    # the plugin killed after release.sm, before the move: what it left behind
    vf, cid = lab.all_vfs[5], "c-stage-kill"
    c = conf(lab, vf)
    rc, res, err = lab.run("ADD", c, cid, netns=ns)
    guid = d.vf_guid(vf)
    r = d.rpc("release.sm", {"owner": {"container_id": cid, "ifname": "net1",
                                       "network": "ibd"}, "pci": vf.pci}).get("result", {})
    t.ok(r.get("held") and r.get("sm_removed"), "killed DEL: release.sm answered", r)
    own = d.owners().get(f"{cid}/net1", {})
    t.ok(own.get("state") == "releasing" and d.vf_guid(vf) == guid and
         "net1" in lab.links(ns), "killed DEL: releasing, the VF keeps its GUID, netdev in "
         "the Pod", (own, lab.links(ns)))
    a = d.rpc("audit").get("result", {})
    kinds = [f["kind"] for f in a.get("findings", [])]
    own = d.owners().get(f"{cid}/net1", {})
    t.ok("releasing-in-pod" in kinds and own.get("state") == "releasing" and
         d.vf_guid(vf) == guid and "net1" in lab.links(ns),
         "killed DEL: a reconciliation pass leaves the VF in the Pod alone", (kinds, own))
    rc, out, err = lab.run("DEL", c, cid, netns=ns)
    t.ok(rc == 0 and f"{cid}/net1" not in d.owners() and d.vf_guid(vf) != guid,
         "killed DEL: the retried DEL ends released, the VF reset", f"{out}\n{err}")
    host_ok(lab, t, vf, "retried DEL")
    nothing_held(lab, t, cid, "ibd", "retried DEL")
    sh("ip", "netns", "del", ns)
    lab.netns.remove(ns)


def concurrent(lab, t, d, vfs, n):
    nss = [lab.ns() for _ in range(n)]
    confs = [conf(lab, v, net="ibdconc") for v in vfs[:n]]
    start = time.monotonic()
    procs = [lab.spawn("ADD", c, f"c-dc-{i}", netns=ns) for i, (c, ns) in
             enumerate(zip(confs, nss))]
    res = [(p.wait(300), p.stdout.read(), p.stderr.read()) for p in procs]
    t_add = time.monotonic() - start
    bad = [(i, r) for i, r in enumerate(res) if r[0] != 0]
    t.ok(not bad, f"{n} concurrent ADDs through ibvfd all succeed ({t_add:.2f} s)", bad[:3])
    o = d.owners()
    mine = [v for k, v in o.items() if k.startswith("c-dc-")]
    t.ok(len(mine) == n and all(v["state"] == "handed" for v in mine) and
         len({v["guid"] for v in mine}) == n,
         f"ibvfd holds {n} handed owners with {n} distinct GUIDs", len(mine))
    start = time.monotonic()
    procs = [lab.spawn("DEL", c, f"c-dc-{i}", netns=ns) for i, (c, ns) in
             enumerate(zip(confs, nss))]
    res = [(p.wait(300), p.stdout.read(), p.stderr.read()) for p in procs]
    t_del = time.monotonic() - start
    bad = [(i, r) for i, r in enumerate(res) if r[0] != 0]
    t.ok(not bad, f"{n} concurrent DELs through ibvfd all succeed ({t_del:.2f} s)", bad[:3])
    t.ok(not any(k.startswith("c-dc-") for k in d.owners()), "ibvfd holds no owner afterwards")
    t.ok(all(lab.link(v.name) is not None for v in vfs[:n]), "every VF netdev back in the host")
    t.ok(all(lab.links(ns) == ["lo"] for ns in nss), "every Pod netns empty")
    t.ok(lab.ipam_leases("ibdconc") == [], "no lease left")
    t.ok(not any(f.startswith("c-dc-") for f in os.listdir(lab.cache)), "no cache entry left")
    status = d.rpc("status")["result"]
    t.ok(status["pool"]["allocated"] == 0, "ibvfd's pool: nothing allocated", status["pool"])
    for ns in nss:
        sh("ip", "netns", "del", ns)
        lab.netns.remove(ns)


def daemon_gone(lab, t, d):
    vf, ns = lab.all_vfs[3], lab.ns()
    d.stop()
    st = {"cniVersion": "1.1.0", "name": "ibd", "type": "ib-sriov",
          "ibvfd": {"socket": d.sock}}
    rc, out, _ = lab.run("STATUS", st, None, ifname=None)
    t.ok(rc == 1 and out["code"] == 50, "ibvfd stopped: STATUS code 50", out)
    rc, out, _ = lab.run("ADD", conf(lab, vf, ibvfd={"socket": d.sock}), "c-gone", netns=ns)
    t.ok(rc == 1 and out["code"] == 11, "ibvfd stopped: ADD answers 11 (try again later)", out)
    assert_rollback(lab, t, vf, ns, "c-gone", "ibd", "ADD without ibvfd")


def main():
    need_lab()
    if len(sys.argv) < 5:
        print("usage: test_cni_ibvfd.py ib-sriov ibvf-fakesysfs ibvfd SM_MODULE_DIR",
              file=sys.stderr)
        return 2
    n = int(os.environ.get("IBVF_CNI_CONCURRENT", 50))
    t = Tap()
    lab = Lab(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), t)
    vfs = lab.vfs(n)
    d = Ibvfd(lab, os.path.abspath(sys.argv[3]), os.path.abspath(sys.argv[4]), vfs)
    try:
        tests(lab, t, d)
        staged_release(lab, t, d)
        concurrent(lab, t, d, vfs, n)
        daemon_gone(lab, t, d)
    except Exception as e:
        t.ok(False, f"raised {type(e).__name__}", e)
    finally:
        d.stop()
    if t.failed:
        sys.stdout.write("# ibvfd log (tail):\n")
        for line in open(os.path.join(d.dir, "ibvfd.log")).read().splitlines()[-30:]:
            print("#   " + line)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
