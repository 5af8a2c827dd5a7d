#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ib-sriov in the host netns lab, driven exactly like a runtime drives it.

Usage: test_ib_sriov.py PATH/TO/ib-sriov [test-name ...]
Needs root and Debian's containernetworking-plugins (host-local, static,
tuning); exits 77 (SKIP) without them unless IBVF_REQUIRE_LABS=1.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cni_lab import Lab, Tap, need_lab, sh  # noqa: E402

GUID = "02:00:00:00:00:00:a0:01"


def base(lab, vf, version="1.0.0", ipam=True, net="ibnet", **kw):
    c = {"cniVersion": version, "name": net, "type": "ib-sriov", "deviceID": vf.pci,
         "pkey": "0x10", "link_state": "enable"}
    if ipam:
        c["ipam"] = {"type": "host-local", "subnet": "10.77.0.0/24", "dataDir": lab.ipamdir,
                     "routes": [{"dst": "10.99.0.0/16"}], "gateway": "10.77.0.1"}
    c.update(kw)
    return c


def host_ok(lab, t, vf, what):
    """The VF netdev is back in the host under its own name, down, unmarked."""
    l = lab.link(vf.name)
    t.ok(l is not None, f"{what}: {vf.name} back in the host netns", lab.links())
    if l:
        t.ok("UP" not in l.get("flags", []), f"{what}: {vf.name} left down")
        t.ok(not l.get("ifalias"), f"{what}: ifalias cleared", l.get("ifalias"))
        t.ok(not l.get("altnames"), f"{what}: no stale altnames", l.get("altnames"))


def nothing_held(lab, t, cid, net, what):
    t.ok(not os.path.exists(lab.cache_file(cid)), f"{what}: cache entry removed")
    t.ok(lab.ipam_leases(net) == [], f"{what}: host-local lease released", lab.ipam_leases(net))
    if lab.daemon:
        owners = lab.store()["owners"]
        t.ok(not any(k.startswith(cid + "/") for k in owners), f"{what}: ibvfd holds no owner",
             owners)


# ------------------------------------------------------------------ tests --

def t_version(lab, t):
    rc, out, _ = lab.run("VERSION", {"cniVersion": "0.4.0"})
    t.ok(rc == 0 and out["cniVersion"] == "0.4.0" and
         {"0.3.1", "0.4.0", "1.0.0", "1.1.0"} <= set(out["supportedVersions"]),
         "VERSION lists 0.3.1 .. 1.1.0", out)


def t_add_check_del(lab, t):
    vf, ns, cid = lab.vf(), lab.ns(), "c-basic"
    conf = base(lab, vf, runtimeConfig={"infinibandGUID": GUID})
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    if not t.ok(rc == 0, "daemon mode ADD succeeds", f"{res}\n{err}"):
        return
    iface = res["interfaces"][0]
    t.ok(iface["name"] == "net1" and iface["sandbox"] == f"/var/run/netns/{ns}" and
         iface.get("pciID") is None, "ADD 1.0.0 result: interface net1 in the sandbox", res)
    t.ok(res["ips"][0]["address"].startswith("10.77.0.") and res["ips"][0]["interface"] == 0 and
         "version" not in res["ips"][0], "ADD result: host-local address on interface 0", res)
    t.ok(res["cniVersion"] == "1.0.0", "result carries the requested cniVersion")
    l = lab.link("net1", ns)
    t.ok(l is not None and "UP" in l["flags"], "net1 is up in the Pod netns")
    t.ok(l is not None and iface.get("mac") == l.get("address"), "result mac is the netdev's")
    t.ok(lab.link(vf.name) is None, "the VF netdev left the host netns")
    t.ok(res["ips"][0]["address"] in lab.addrs("net1", ns), "IPAM address configured in the Pod")
    routes = sh("ip", "-n", ns, "route", "show")
    t.ok("10.99.0.0/16 via 10.77.0.1" in routes, "IPAM route configured in the Pod", routes)
    st = lab.store()["owners"].get(f"{cid}/net1")
    t.ok(st and st["state"] == "handed" and st["guid"] == GUID, "ibvfd: owner handed with the "
         "runtimeConfig GUID", st)
    t.ok(st and st["owner"].get("pod_name") == f"pod-{cid}" and st["owner"]["network"] == "ibnet"
         and st["link_state"] == "enable" and st["pkeys"] == [{"pkey": "0x0010",
                                                               "membership": "full"}],
         "ibvfd: owner names the Pod, network, link_state and PKey", st)
    cache = json.load(open(lab.cache_file(cid)))
    t.ok(cache["ibvf"]["version"] == 1 and cache["ibvf"]["mode"] == "daemon" and
         cache["HostIFNames"] == vf.name and cache["ContIFNames"] == "net1" and
         cache["deviceID"] == vf.pci and cache["ibvf"]["guid"] == GUID,
         "cache entry in ib-sriov-cni's layout plus ibvf.version", cache)

    chk = dict(conf, prevResult=res)
    rc, out, err = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 0 and out is None, "CHECK passes right after ADD", f"{out}\n{err}")
    sh("ip", "-n", ns, "link", "set", "net1", "down")
    rc, out, _ = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104 and "down" in out["msg"], "CHECK fails when net1 is down",
         out)
    sh("ip", "-n", ns, "link", "set", "net1", "up")
    sh("ip", "-n", ns, "addr", "flush", "dev", "net1")
    rc, out, _ = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104 and "address" in out["msg"],
         "CHECK fails when the IPAM address is gone", out)

    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0 and out is None, "DEL succeeds", f"{out}\n{err}")
    host_ok(lab, t, vf, "DEL")
    nothing_held(lab, t, cid, "ibnet", "DEL")
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "second DEL of the same attachment succeeds", f"{out}\n{err}")
    rc, out, _ = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104, "CHECK after DEL fails", out)


TESTS = [t_version, t_add_check_del]


def main():
    need_lab()
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("usage: test_ib_sriov.py PATH/TO/ib-sriov [test ...]", file=sys.stderr)
        return 2
    t = Tap()
    lab = Lab(os.path.abspath(sys.argv[1]), t)
    lab.start_daemon()
    only = set(sys.argv[2:])
    for fn in TESTS:
        if only and fn.__name__ not in only:
            continue
        print(f"# {fn.__name__}", flush=True)
        start = time.monotonic()
        try:
            fn(lab, t)
        except Exception as e:  # a crashed test is a failed test, the rest still run
            t.ok(False, f"{fn.__name__} raised {type(e).__name__}", e)
        print(f"# {fn.__name__}: {time.monotonic() - start:.2f} s", flush=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
