#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Issue 15 items 7 and 8 with the real plugin and the real ibvfd (noop SM
backend, the daemon's fake VF driver):

- 7: ibvfd stopped between ADD and DEL, and the runtime never retries: DEL
  succeeds and leaves a release request; once ibvfd runs again the GUID is
  released, the VF free, the plugin's cache gone, the request applied. And a
  handed VF whose netdev is back in the host netns (a release that never
  reached ibvfd) is released by reconciliation, a Pod's never.
- 8: the same owner (pod namespace/name, network, ifname) attached again with
  a new container ID within the quarantine gets its GUID back; another Pod
  never does.

Usage: test_cni_release.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs PATH/TO/ibvfd SM_MODULE_DIR
Root needed (netns, veth); exits 77 otherwise unless IBVF_REQUIRE_LABS=1.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cni_lab import Lab, Tap, need_lab, sh  # noqa: E402
from test_cni_ibvfd import Ibvfd, conf  # noqa: E402
from test_ib_sriov import host_ok  # noqa: E402


def guid_of(own):
    return int(own["guid"].replace(":", ""), 16) if own else 0


def pod_args(ns, name):
    return {"CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={name}"}


def wait_for(cond, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.2)
    return cond()


def daemon_down_at_del(lab, t, d):
    vf, ns, cid = lab.all_vfs[0], lab.ns(), "c-outage"
    c = conf(lab, vf, ibvfd={"socket": d.sock})
    rc, res, err = lab.run("ADD", c, cid, netns=ns)
    if not t.ok(rc == 0, "ADD through ibvfd", f"{res}\n{err}"):
        return
    guid = guid_of(d.owners().get(f"{cid}/net1"))
    d.stop()
    rc, out, err = lab.run("DEL", c, cid, netns=ns)
    t.ok(rc == 0, "ibvfd stopped: DEL succeeds (the runtime would not retry)", f"{out}\n{err}")
    t.ok("release of owner" in err and "left in" in err, "DEL says it left a release request",
         err)
    spool = os.path.join(d.run, "release.d")
    req = os.path.join(spool, f"{cid}.net1.json")
    t.ok(os.path.exists(req), "the request is in ibvfd's spool next to its socket",
         os.listdir(d.run))
    if os.path.exists(req):
        r = json.load(open(req))
        t.ok(r["container_id"] == cid and r["ifname"] == "net1" and
             int(r["guid"], 16) == guid and oct(os.stat(req).st_mode & 0o777) == "0o600",
             "the request names the owner and its GUID, mode 0600, nothing else", r)
    t.ok(not os.path.exists(lab.cache_file(cid)), "the plugin's cache entry is gone")
    t.ok(lab.ipam_leases("ibd") == [], "the IP is released")
    host_ok(lab, t, vf, "DEL with ibvfd stopped")
    t.ok(d.vf_guid(vf) == guid, "while ibvfd is down the VF still carries the GUID")
    # the runtime never calls DEL again; ibvfd comes back
    t.ok(d.start(), "ibvfd restarts")
    t.ok(wait_for(lambda: f"{cid}/net1" not in d.owners()),
         "after the restart ibvfd released the owner", d.owners())
    t.ok(wait_for(lambda: not os.listdir(spool)), "the request is applied and removed",
         os.listdir(spool))
    t.ok(d.vf_guid(vf) != guid, "the VF no longer carries the GUID")
    t.ok(d.rpc("status")["result"]["pool"]["allocated"] == 0, "nothing allocated in the pool")
    # the VF is free: another Pod gets it
    ns2 = lab.ns()
    rc, res, err = lab.run("ADD", c, "c-after", netns=ns2)
    t.ok(rc == 0, "the VF attaches to the next Pod", f"{res}\n{err}")
    lab.run("DEL", c, "c-after", netns=ns2)
    log = open(os.path.join(d.dir, "ibvfd.log")).read()
    t.ok("release request of the CNI plugin applied" in log, "ibvfd logged the applied request")


def handed_back_in_host(lab, t, d):
    """The DEL moved the netdev back but its release never reached ibvfd (and no
    request either): reconciliation sees the handed VF's netdev in the host."""
    vf, ns, cid = lab.all_vfs[2], lab.ns(), "c-lost"
    path = os.path.join(d.fake, vf.pci)
    with open(path) as f:
        line = f.read().strip()
    with open(path, "w") as f:  # the fake VF driver reports this real netdev
        f.write(f"{line} netdev={vf.name}\n")
    c = conf(lab, vf, net="ibdlost", ibvfd={"socket": d.sock})
    rc, res, err = lab.run("ADD", c, cid, netns=ns)
    if not t.ok(rc == 0, "ADD through ibvfd", f"{res}\n{err}"):
        return
    guid = guid_of(d.owners().get(f"{cid}/net1"))
    time.sleep(2.5)  # two reconciliation passes
    t.ok(f"{cid}/net1" in d.owners(), "a Pod's VF (netdev in the Pod) is left alone by passes")
    sh("ip", "-n", ns, "link", "set", "dev", "net1", "netns", "1")
    sh("ip", "link", "set", "dev", "net1", "name", vf.name)
    t.ok(wait_for(lambda: f"{cid}/net1" not in d.owners()),
         "its netdev back in the host: a pass released the handed owner", d.owners())
    t.ok(d.vf_guid(vf) != guid, "the VF no longer carries the GUID")
    log = open(os.path.join(d.dir, "ibvfd.log")).read()
    t.ok("handed-in-host" in log, "ibvfd logged the finding (handed-in-host)")
    rc, out, err = lab.run("DEL", c, cid, netns=ns)
    t.ok(rc == 0, "a late DEL still succeeds", f"{out}\n{err}")


def same_owner_back(lab, t, d):
    vf, ns = lab.all_vfs[1], lab.ns()
    c = conf(lab, vf, net="ibdsame", ibvfd={"socket": d.sock})
    rc, res, err = lab.run("ADD", c, "c-run-1", netns=ns, extra=pod_args("prod", "web-0"))
    if not t.ok(rc == 0, "ADD of pod prod/web-0", f"{res}\n{err}"):
        return
    g1 = guid_of(d.owners().get("c-run-1/net1"))
    lab.run("DEL", c, "c-run-1", netns=ns)
    # a new container of the same Pod (restart, network reload) within the quarantine
    rc, res, err = lab.run("ADD", c, "c-run-2", netns=ns, extra=pod_args("prod", "web-0"))
    t.ok(rc == 0, "ADD of the same Pod with a new container ID", f"{res}\n{err}")
    g2 = guid_of(d.owners().get("c-run-2/net1"))
    t.ok(g1 and g2 == g1, "it gets its GUID back", f"{g1:x} {g2:x}")
    t.ok(d.vf_guid(vf) == g1, "and the VF carries it again")
    lab.run("DEL", c, "c-run-2", netns=ns)
    # another Pod, same network and ifname: never that GUID
    rc, res, err = lab.run("ADD", c, "c-other", netns=ns, extra=pod_args("prod", "web-1"))
    g3 = guid_of(d.owners().get("c-other/net1"))
    t.ok(rc == 0 and g3 and g3 != g1, "another Pod gets another GUID", f"{g1:x} {g3:x}")
    lab.run("DEL", c, "c-other", netns=ns)
    # another namespace, same Pod name: never either
    rc, res, err = lab.run("ADD", c, "c-other-ns", netns=ns, extra=pod_args("dev", "web-0"))
    g4 = guid_of(d.owners().get("c-other-ns/net1"))
    t.ok(rc == 0 and g4 and g4 != g1, "the same Pod name in another namespace: another GUID",
         f"{g1:x} {g4:x}")
    lab.run("DEL", c, "c-other-ns", netns=ns)


def main():
    need_lab()
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    t = Tap()
    lab = Lab(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), t)
    vfs = lab.vfs(4)
    d = Ibvfd(lab, os.path.abspath(sys.argv[3]), os.path.abspath(sys.argv[4]), vfs)
    cfg = json.load(open(d.cfg))
    cfg["pool"]["quarantine_s"] = 120  # item 8 needs a quarantine longer than the test
    cfg["sm"]["periodic_update_s"] = 1  # reconciliation (and the spool) every second
    json.dump(cfg, open(d.cfg, "w"))
    lab.default_sock = d.sock
    try:
        t.ok(d.start(), "ibvfd starts (noop SM backend, fake VF driver)")
        daemon_down_at_del(lab, t, d)
        handed_back_in_host(lab, t, d)
        same_owner_back(lab, t, d)
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
