#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ib-sriov in the host netns lab, driven exactly like a runtime drives it.

Usage: test_ib_sriov.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs [test-name ...]
Needs root and Debian's containernetworking-plugins (host-local, static,
tuning); exits 77 (SKIP) without them unless IBVF_REQUIRE_LABS=1.
"""
import json
import os
import secrets
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
    for i in range(7):  # other owners of the network, and pages of 2: CHECK walks the pages
        lab.rpc("prepare", {"owner": {"container_id": f"c-page-{i}", "ifname": "net1",
                                      "network": "ibnet"}, "pci": "0000:99:00.1", "pkeys": []})
    lab.set_control({"list_page": 2})
    rc, out, err = lab.run("CHECK", chk, cid, netns=ns)
    lab.set_control({})
    t.ok(rc == 0, "CHECK finds the owner through a paged ibvfd list", f"{out}\n{err}")
    for i in range(7):
        lab.rpc("release", {"owner": {"container_id": f"c-page-{i}", "ifname": "net1"}})
    sh("ip", "-n", ns, "link", "set", "net1", "down")
    rc, out, _ = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104 and "down" in out["msg"], "CHECK fails when net1 is down",
         out)
    sh("ip", "-n", ns, "link", "set", "net1", "up")
    sh("ip", "-n", ns, "addr", "flush", "dev", "net1")
    rc, out, _ = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104 and "address" in out["msg"],
         "CHECK fails when the IPAM address is gone", out)
    lab.run("DEL", conf, cid, netns=ns)
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    chk = dict(conf, prevResult=res)
    lab.port(vf, state="1: DOWN")
    rc, out, _ = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104 and "DOWN" in out["details"] and vf.rdma in out["details"],
         "CHECK fails when the VF port is not ACTIVE", out)
    lab.port(vf, pkeys=("0xffff", "0x0010"))
    rc, out, _ = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104 and "full member entry for PKey 0x0010" in out["details"],
         "CHECK fails when the P_Key table has only a limited 0x0010", out)
    lab.port(vf)
    rc, out, err = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 0, "CHECK passes again with the port ACTIVE and 0x8010 in the table",
         f"{out}\n{err}")

    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0 and out is None, "DEL succeeds", f"{out}\n{err}")
    host_ok(lab, t, vf, "DEL")
    nothing_held(lab, t, cid, "ibnet", "DEL")
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "second DEL of the same attachment succeeds", f"{out}\n{err}")
    rc, out, _ = lab.run("CHECK", chk, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104, "CHECK after DEL fails", out)


def t_one_connection(lab, t):
    """ADD's prepare and commit over one ibvfd connection; a closed one is replaced (issue 17)."""
    vf = lab.vf()
    conf = base(lab, vf, runtimeConfig={"infinibandGUID": GUID})
    for ctl, what in (({}, "kept connection"),
                      ({"close_after": ["prepare"]}, "ibvfd closed the connection after prepare"),
                      ({"drop_once": "commit"}, "ibvfd closed the connection under commit")):
        ns, cid = lab.ns(), "c-conn"
        lab.set_control(ctl)
        n = len(lab.store()["calls"])
        rc, res, err = lab.run("ADD", conf, cid, netns=ns)
        lab.set_control({})
        st = lab.store()
        calls, conns = st["calls"][n:], st["conns"][n:]
        t.ok(rc == 0 and st["owners"].get(f"{cid}/net1", {}).get("state") == "handed",
             f"{what}: ADD succeeds, owner handed", f"{res}\n{err}")
        t.ok(calls == ["prepare", "commit"], f"{what}: ibvfd got prepare and commit once each",
             calls)
        if not ctl:
            t.ok(len(conns) == 2 and conns[0] == conns[1],
                 "prepare and commit came over one connection", conns)
        else:
            t.ok(len(conns) == 2 and conns[0] != conns[1],
                 f"{what}: commit came over a new connection", conns)
        rc, out, err = lab.run("DEL", conf, cid, netns=ns)
        t.ok(rc == 0, f"{what}: DEL succeeds", f"{out}\n{err}")
        # this fake is an ibvfd without release.sm (-32601, changes nothing): the DEL
        # asked for it before the move and released after it all the same
        st = lab.store()
        dcalls = st["calls"][n + len(calls):]
        t.ok(dcalls == ["release.sm", "release"] and f"{cid}/net1" not in st["owners"],
             f"{what}: DEL against an ibvfd that refuses release.sm still releases",
             dcalls)


def pod_clean(lab, t, ns, what, keep=()):
    left = [n for n in lab.links(ns) if n != "lo" and n not in keep]
    t.ok(left == [], f"{what}: Pod netns holds no VF netdev", left)


def t_rendered_sriovibnetwork(lab, t):
    """The NetworkAttachmentDefinition config sriov-network-operator renders for a
    SriovIBNetwork, unchanged; Multus adds deviceID and runtimeConfig."""
    vf, ns, cid = lab.vf(), lab.ns(), "c-rendered"
    log = os.path.join(lab.tmp, "ib-sriov.log")
    rendered = ('{"cniVersion":"1.0.0","name":"ib-rendered","type":"ib-sriov",'
                '"capabilities":{"infinibandGUID":true},"link_state":"enable",'
                '"logLevel":"debug","logFile":"%s",'
                '"ipam":{"type":"host-local","subnet":"10.56.217.0/24","dataDir":"%s"}}'
                % (log, lab.ipamdir))
    conf = json.loads(rendered)
    conf["deviceID"] = vf.pci
    conf["runtimeConfig"] = {"infinibandGUID": "02:00:00:00:00:00:b0:01"}
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 0 and res["ips"][0]["address"].startswith("10.56.217."),
         "rendered SriovIBNetwork config: ADD", f"{res}\n{err}")
    t.ok(lab.store()["owners"].get(f"{cid}/net1", {}).get("guid") == "02:00:00:00:00:00:b0:01",
         "rendered config: runtimeConfig.infinibandGUID reaches ibvfd")
    t.ok(os.path.exists(log) and "ADD container c-rendered" in open(log).read(),
         "logFile/logLevel honoured (debug lines in the file, none on stdout)")
    t.ok(err == "", "nothing on stderr when logFile is set", err)
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "rendered config: DEL", f"{out}\n{err}")
    host_ok(lab, t, vf, "rendered DEL")
    nothing_held(lab, t, cid, "ib-rendered", "rendered DEL")
    # ipam {} is what the operator renders when the SriovIBNetwork has no IPAM
    vf2, cid2 = lab.vf(), "c-rendered-noipam"
    conf2 = json.loads('{"cniVersion":"1.0.0","name":"ib-rendered","type":"ib-sriov",'
                       '"link_state":"auto","ipam":{}}')
    conf2["deviceID"] = vf2.pci
    rc, res, err = lab.run("ADD", conf2, cid2, netns=ns)
    t.ok(rc == 0 and res["ips"] == [], "\"ipam\": {} means no IPAM", f"{res}\n{err}")
    rc, _, err = lab.run("DEL", conf2, cid2, netns=ns)
    t.ok(rc == 0 and lab.link(vf2.name) is not None, "no-IPAM attachment DEL", err)


def run_chain(lab, conflist, cmd, cid, ns, prev=None):
    """What a runtime does with a conflist (CNI spec section 3)."""
    plugins = conflist["plugins"]
    order = list(reversed(plugins)) if cmd == "DEL" else plugins
    result = prev
    for pl in order:
        conf = dict(pl, cniVersion=conflist["cniVersion"], name=conflist["name"])
        if result is not None:
            conf["prevResult"] = result
        binary = None if pl["type"] == "ib-sriov" else f"/usr/lib/cni/{pl['type']}"
        rc, out, err = lab.run(cmd, conf, cid, netns=ns, binary=binary)
        if rc:
            return rc, out, err
        if cmd == "ADD":
            result = out
    return 0, result, ""


def t_metaplugins_conflist(lab, t):
    """The metaPlugins form: ib-sriov followed by tuning in one conflist."""
    vf, ns, cid = lab.vf(), lab.ns(), "c-chain"
    text = ('{"cniVersion":"1.0.0","name":"ib-chain","plugins":[{"type":"ib-sriov",'
            '"capabilities":{"infinibandGUID":true},"link_state":"enable",'
            '"ipam":{"type":"host-local","subnet":"10.57.0.0/24","dataDir":"%s"}}'
            ',{"type":"tuning","mtu":1400,"promisc":true}]}' % lab.ipamdir)
    conflist = json.loads(text)
    conflist["plugins"][0]["deviceID"] = vf.pci
    rc, res, err = run_chain(lab, conflist, "ADD", cid, ns)
    if not t.ok(rc == 0, "conflist ib-sriov + tuning: ADD", f"{res}\n{err}"):
        return
    l = lab.link("net1", ns)
    t.ok(l["mtu"] == 1400 and "PROMISC" in l["flags"], "tuning applied on top of ib-sriov", l)
    rc, out, err = run_chain(lab, conflist, "CHECK", cid, ns, prev=res)
    t.ok(rc == 0, "conflist CHECK (ib-sriov then tuning)", f"{out}\n{err}")
    rc, out, err = run_chain(lab, conflist, "DEL", cid, ns, prev=res)
    t.ok(rc == 0, "conflist DEL (tuning then ib-sriov)", f"{out}\n{err}")
    host_ok(lab, t, vf, "conflist DEL")
    t.ok(lab.link(vf.name)["mtu"] == 1500, "tuning's DEL restored the MTU before the move back")
    nothing_held(lab, t, cid, "ib-chain", "conflist DEL")


def t_versions(lab, t):
    ns = lab.ns()
    for ver, check in (("0.2.0", lambda r: r["ip4"]["ip"].startswith("10.77.")),
                       ("0.3.1", lambda r: r["ips"][0]["version"] == "4" and
                        r["interfaces"][0]["name"] == "net1"),
                       ("0.4.0", lambda r: r["ips"][0]["version"] == "4" and
                        "pciID" not in r["interfaces"][0]),
                       ("1.0.0", lambda r: "version" not in r["ips"][0])):
        vf, cid = lab.vf(), f"c-ver-{ver}"
        conf = base(lab, vf, version=ver, net=f"ibver{ver.replace('.', '')}")
        rc, res, err = lab.run("ADD", conf, cid, netns=ns)
        t.ok(rc == 0 and res.get("cniVersion") == ver and check(res),
             f"ADD with cniVersion {ver}: result in {ver} layout", f"{res}\n{err}")
        rc, out, err = lab.run("DEL", conf, cid, netns=ns)
        t.ok(rc == 0 and lab.link(vf.name) is not None, f"DEL with cniVersion {ver}", err)
    vf, cid = lab.vf(), "c-ver-110"
    conf = base(lab, vf, version="1.1.0", ipam=False)
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 0 and res["interfaces"][0].get("pciID") == vf.pci and
         res["interfaces"][0].get("mtu") == 1500, "ADD 1.1.0: pciID and mtu in the result",
         f"{res}\n{err}")
    rc, out, err = lab.run("CHECK", dict(conf, prevResult=res), cid, netns=ns)
    t.ok(rc == 0, "CHECK 1.1.0", f"{out}\n{err}")
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "DEL 1.1.0", err)
    rc, out, _ = lab.run("CHECK", dict(base(lab, vf, version="0.3.1"), prevResult={}), cid,
                         netns=ns)
    t.ok(rc == 1 and out["code"] == 1, "CHECK refused for cniVersion 0.3.1 (code 1)", out)


def t_ipam_execs(lab, t):
    """Issue 17: the IPAM plugin is exec'd once per ADD and DEL (no VERSION call first, as Go's
    libcni); a plugin that refuses the configuration's version gets the highest one both support
    after its VERSION answer, and its result comes back in the configuration's version."""
    ns = lab.ns()
    calls = os.path.join(lab.tmp, "count-ipam.calls")
    lab.fake_ipam("count-ipam", f'echo "$CNI_COMMAND" >> {calls}\ncat >/dev/null\n'
                  '[ "$CNI_COMMAND" = VERSION ] && echo \'{"cniVersion":"1.1.0",'
                  '"supportedVersions":["1.0.0","1.1.0"]}\'\n'
                  '[ "$CNI_COMMAND" = ADD ] && echo \'{"cniVersion":"1.0.0",'
                  '"ips":[{"address":"10.79.0.5/24"}]}\'\nexit 0\n')
    vf, cid = lab.vf(), "c-ipam-once"
    conf = base(lab, vf, net="ibonce")
    conf["ipam"] = {"type": "count-ipam"}
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 0 and res["ips"][0]["address"] == "10.79.0.5/24", "ADD with a counting IPAM",
         f"{res}\n{err}")
    t.ok(open(calls).read().split() == ["ADD"], "ADD: the IPAM plugin exec'd once",
         open(calls).read())
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "DEL with a counting IPAM", f"{out}\n{err}")
    t.ok(open(calls).read().split() == ["ADD", "DEL"], "DEL: the IPAM plugin exec'd once",
         open(calls).read())

    # a plugin of CNI 0.4.0 (lists 0.3.1, 0.4.0; refuses others with code 1) under 1.1.0
    calls = os.path.join(lab.tmp, "old-ipam.calls")
    lab.fake_ipam("old04-ipam", 'conf=$(cat)\nv=other\n'
                  'echo "$conf" | grep -q \'"cniVersion": *"0.4.0"\' && v=0.4.0\n'
                  f'echo "$CNI_COMMAND/$v" >> {calls}\n'
                  '[ "$CNI_COMMAND" = VERSION ] && echo \'{"cniVersion":"0.4.0",'
                  '"supportedVersions":["0.3.1","0.4.0"]}\' && exit 0\n'
                  '[ $v = other ] && echo \'{"code":1,"msg":"incompatible CNI versions"}\' && '
                  'exit 1\n'
                  '[ "$CNI_COMMAND" = ADD ] && echo \'{"cniVersion":"0.4.0","ips":[{"version":"4",'
                  '"address":"10.79.1.5/24","gateway":"10.79.1.1"}],'
                  '"routes":[{"dst":"10.98.0.0/16"}]}\'\nexit 0\n')
    vf, cid = lab.vf(), "c-ipam-old"
    conf = base(lab, vf, version="1.1.0", net="ibold")
    conf["ipam"] = {"type": "old04-ipam"}
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 0 and res["cniVersion"] == "1.1.0" and
         res["ips"][0] == {"address": "10.79.1.5/24", "gateway": "10.79.1.1", "interface": 0},
         "ADD 1.1.0 through a 0.4.0 IPAM plugin: its result in the 1.1.0 layout", f"{res}\n{err}")
    t.ok(rc == 0 and "10.79.1.5/24" in lab.addrs("net1", ns) and
         "10.98.0.0/16 via 10.79.1.1" in sh("ip", "-n", ns, "route", "show"),
         "ADD 1.1.0 through a 0.4.0 IPAM plugin: address and route in the Pod")
    t.ok(open(calls).read().split() == ["ADD/other", "VERSION/other", "ADD/0.4.0"],
         "ADD: refused, VERSION, then ADD with 0.4.0", open(calls).read())
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0 and open(calls).read().split()[3:] == ["DEL/other", "VERSION/other",
                                                        "DEL/0.4.0"],
         "DEL 1.1.0 through a 0.4.0 IPAM plugin: refused, VERSION, DEL with 0.4.0",
         f"{out}\n{err}\n{open(calls).read()}")
    host_ok(lab, t, vf, "DEL through a 0.4.0 IPAM plugin")


def t_gc(lab, t):
    ns_a, ns_b = lab.ns(), lab.ns()
    va, vb = lab.vf(), lab.vf()
    net = "ibgc"
    ca, cb = base(lab, va, net=net), base(lab, vb, net=net)
    ra = lab.run("ADD", ca, "c-gc-a", netns=ns_a)
    rb = lab.run("ADD", cb, "c-gc-b", netns=ns_b)
    if not t.ok(ra[0] == 0 and rb[0] == 0, "GC setup: two attachments", f"{ra}\n{rb}"):
        return
    t.ok(len(lab.ipam_leases(net)) == 2, "two host-local leases before GC")
    gc = {"cniVersion": "1.1.0", "name": net, "type": "ib-sriov",
          "ipam": ca["ipam"], "cni.dev/valid-attachments": [{"containerID": "c-gc-a",
                                                             "ifname": "net1"}]}
    rc, out, err = lab.run("GC", gc, None, ifname=None)
    t.ok(rc == 0 and out is None, "GC succeeds", f"{out}\n{err}")
    t.ok(lab.ipam_leases(net) == [ra[1]["ips"][0]["address"].split("/")[0]],
         "GC released B's lease and kept A's", lab.ipam_leases(net))
    t.ok(not os.path.exists(lab.cache_file("c-gc-b")) and os.path.exists(lab.cache_file("c-gc-a")),
         "GC removed B's cache entry only")
    owners = lab.store()["owners"]
    t.ok("c-gc-a/net1" in owners and "c-gc-b/net1" not in owners, "GC released B in ibvfd",
         owners)
    t.ok(lab.link(vb.name) is not None and lab.link("net1", ns_b) is None,
         "GC moved B's VF back from its (still existing) netns")
    t.ok(lab.link("net1", ns_a) is not None, "A's interface untouched")
    t.ok("gc" in lab.store()["calls"], "GC forwarded to ibvfd")
    # an owner ibvfd holds without any cache entry is released by ibvfd's gc
    lab.rpc("prepare", {"owner": {"container_id": "c-gc-orphan", "ifname": "net1",
                                  "network": net}, "pci": "0000:99:00.1", "pkeys": []})
    rc, out, err = lab.run("GC", gc, None, ifname=None)
    t.ok(rc == 0 and "c-gc-orphan/net1" not in lab.store()["owners"],
         "GC releases a daemon owner the cache does not know", f"{out}\n{err}")
    nogc = {k: v for k, v in gc.items() if k != "cni.dev/valid-attachments"}
    rc, out, _ = lab.run("GC", nogc, None, ifname=None)
    t.ok(rc == 1 and out["code"] == 7 and os.path.exists(lab.cache_file("c-gc-a")) and
         "c-gc-a/net1" in lab.store()["owners"],
         "GC without cni.dev/valid-attachments is refused and releases nothing", out)
    rc, out, _ = lab.run("GC", dict(gc, cniVersion="1.0.0"), None, ifname=None)
    t.ok(rc == 1 and out["code"] == 1, "GC refused for cniVersion 1.0.0 (code 1)", out)
    lab.run("DEL", ca, "c-gc-a", netns=ns_a)
    nothing_held(lab, t, "c-gc-a", net, "GC then DEL of A")


def t_status(lab, t):
    conf = {"cniVersion": "1.1.0", "name": "ibst", "type": "ib-sriov"}
    rc, out, err = lab.run("STATUS", conf, None, ifname=None)
    t.ok(rc == 0 and out is None, "STATUS: ibvfd ready", f"{out}\n{err}")
    lab.set_control({"status": {"ready": False, "backend_ok": False,
                                "error": "UFM at ufm.example unreachable"}})
    rc, out, _ = lab.run("STATUS", conf, None, ifname=None)
    t.ok(rc == 1 and out["code"] == 50 and "unreachable" in out["details"],
         "STATUS: SM backend not validated -> code 50 with the reason", out)
    lab.set_control({})
    rc, out, _ = lab.run("STATUS", dict(conf, ibvfd={"socket": lab.no_sock}), None, ifname=None)
    t.ok(rc == 1 and out["code"] == 50, "STATUS: configured ibvfd socket absent -> code 50", out)
    rc, out, _ = lab.run("STATUS", dict(conf, cniVersion="1.0.0"), None, ifname=None)
    t.ok(rc == 1 and out["code"] == 1, "STATUS refused for cniVersion 1.0.0 (code 1)", out)
    rc, out, err = lab.run("STATUS", conf, None, ifname=None, extra={"IBVF_CNI_SOCKET": lab.no_sock})
    t.ok(rc == 0, "STATUS in compatibility mode (no daemon): ready", f"{out}\n{err}")
    rc, out, _ = lab.run("STATUS", dict(conf, ipam={"type": "no-such-ipam"}), None, ifname=None)
    t.ok(rc == 1 and out["code"] == 50 and "no-such-ipam" in out["details"],
         "STATUS: IPAM plugin missing -> code 50", out)


def t_del_missing_state(lab, t):
    # the netns is gone (node reboot, runtime deleted it first)
    vf, ns, cid = lab.vf(), lab.ns(), "c-gone-ns"
    conf = base(lab, vf, net="ibmiss")
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 0, "missing netns: ADD", err)
    sh("ip", "netns", "del", ns)
    lab.netns.remove(ns)
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "DEL with the netns gone succeeds", f"{out}\n{err}")
    nothing_held(lab, t, cid, "ibmiss", "DEL with the netns gone")

    # the cache is gone: the ifalias mark finds the VF
    vf, ns, cid = lab.vf(), lab.ns(), "c-gone-cache"
    conf = base(lab, vf, net="ibmiss")
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    os.unlink(lab.cache_file(cid))
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "DEL with the cache gone succeeds", f"{out}\n{err}")
    host_ok(lab, t, vf, "DEL with the cache gone")
    nothing_held(lab, t, cid, "ibmiss", "DEL with the cache gone")

    # a netdev called CNI_IFNAME that is not ours is left alone
    vf, ns, cid = lab.vf(), lab.ns(), "c-foreign"
    lab.placeholder(ns, "net1")
    rc, out, err = lab.run("DEL", base(lab, vf, net="ibmiss"), cid, netns=ns)
    t.ok(rc == 0 and lab.link("net1", ns) is not None and lab.link(vf.name) is not None,
         "DEL without cache leaves a foreign net1 alone", f"{out}\n{err}")

    # ibvfd has no record any more
    vf, ns, cid = lab.vf(), lab.ns(), "c-gone-owner"
    conf = base(lab, vf, net="ibmiss")
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    lab.rpc("release", {"owner": {"container_id": cid, "ifname": "net1"}})
    rc, out, _ = lab.run("CHECK", dict(conf, prevResult=res), cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 104 and "ibvfd" in out["msg"],
         "CHECK fails when ibvfd no longer holds the owner", out)
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "DEL when ibvfd has no record succeeds", f"{out}\n{err}")
    host_ok(lab, t, vf, "DEL without daemon record")
    nothing_held(lab, t, cid, "ibmiss", "DEL without daemon record")

    # CNI_NETNS empty (kubelet sends DEL without it after a restart)
    vf, ns, cid = lab.vf(), lab.ns(), "c-no-netns"
    conf = base(lab, vf, net="ibmiss")
    lab.run("ADD", conf, cid, netns=ns)
    rc, out, err = lab.run("DEL", conf, cid, netns=None)
    t.ok(rc == 0, "DEL without CNI_NETNS succeeds", f"{out}\n{err}")
    host_ok(lab, t, vf, "DEL without CNI_NETNS (cached netns used)")
    nothing_held(lab, t, cid, "ibmiss", "DEL without CNI_NETNS")

    # ibvfd unreachable while it holds the attachment: a release request is left next
    # to the socket for ibvfd (issue 15 item 7), DEL succeeds, cache removed
    vf, ns, cid = lab.vf(), lab.ns(), "c-daemon-down"
    conf = base(lab, vf, net="ibmiss")
    lab.run("ADD", conf, cid, netns=ns)
    rc, out, _ = lab.run("DEL", dict(conf, ibvfd={"socket": lab.no_sock}), cid, netns=ns)
    req = os.path.join(os.path.dirname(lab.no_sock), "release.d", f"{cid}.net1.json")
    t.ok(rc == 0 and os.path.exists(req) and not os.path.exists(lab.cache_file(cid)),
         "DEL with ibvfd unreachable: release request left, cache removed", out)
    # a runtime that retries anyway (kubelet): still fine
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0, "retried DEL succeeds", f"{out}\n{err}")
    nothing_held(lab, t, cid, "ibmiss", "retried DEL")


def t_legacy_cache(lab, t):
    """A Pod attached by ib-sriov-cni before the switch: its cache file (written from
    ib-sriov-cni's documented NetConf keys), its VF in the Pod as net1, its lease."""
    vf, ns, cid = lab.vf(), lab.ns(), "c-legacy"
    ipam = {"type": "host-local", "subnet": "10.58.0.0/24", "dataDir": lab.ipamdir}
    netconf = {"cniVersion": "0.3.1", "name": "iblegacy", "type": "ib-sriov",
               "deviceID": vf.pci, "pkey": "0x6", "ipam": ipam}
    # the lease host-local gave ib-sriov-cni
    p = lab.run("ADD", netconf, cid, netns=ns, binary="/usr/lib/cni/host-local")
    t.ok(p[0] == 0 and lab.ipam_leases("iblegacy"), "legacy setup: host-local lease", p)
    sh("ip", "link", "set", vf.name, "netns", ns)
    sh("ip", "-n", ns, "link", "set", vf.name, "name", "net1")
    sh("ip", "-n", ns, "link", "set", "net1", "up")
    legacy = dict(netconf, Master=vf.name[:-2] + "pf", VFID=0, HostIFNames=vf.name,
                  HostIFGUID="", ContIFNames="net1",
                  RdmaNetState={"version": "", "deviceID": "", "sandboxRdmaDevName": "",
                                "containerRdmaDevName": ""},
                  runtimeConfig={"infinibandGUID": ""}, args={"cni": None},
                  ibKubernetesEnabled=False, vfioPciMode=False)
    os.makedirs(lab.cache, mode=0o700, exist_ok=True)
    with open(lab.cache_file(cid), "w") as f:
        json.dump(legacy, f)
    rc, out, err = lab.run("DEL", netconf, cid, netns=ns, extra={"IBVF_CNI_SOCKET": lab.no_sock})
    t.ok(rc == 0, "DEL of an ib-sriov-cni attachment succeeds", f"{out}\n{err}")
    host_ok(lab, t, vf, "legacy DEL")
    t.ok(not os.path.exists(lab.cache_file(cid)), "legacy DEL removed ib-sriov-cni's cache file")
    t.ok(lab.ipam_leases("iblegacy") == [], "legacy DEL released the lease")


def assert_rollback(lab, t, vf, ns, cid, net, what, keep=()):
    host_ok(lab, t, vf, what)
    pod_clean(lab, t, ns, what, keep)
    nothing_held(lab, t, cid, net, what)


def t_add_failures(lab, t):
    net = "ibfail"
    # 1. prepare refused
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-prepare"
    lab.set_control({"fail": {"prepare": {"code": -32003, "message": "SM refused PKey 0x10",
                                          "step": "sm_requested"}}})
    rc, out, _ = lab.run("ADD", base(lab, vf, net=net), cid, netns=ns)
    lab.set_control({})
    t.ok(rc == 1 and out["code"] == 102 and "SM refused" in out["details"] and vf.pci in
         out["details"] and "PKey 0x8010" in out["details"],
         "prepare refused: code 102, message names VF and PKey", out)
    assert_rollback(lab, t, vf, ns, cid, net, "prepare refused")

    # 2. the move into the Pod fails: an altname of the VF netdev is a netdev's name
    # there (the kernel refuses the one-message move, and the stepwise fallback's)
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-move"
    taken = f"{lab.prefix}alt"
    peer = lab.placeholder(ns, taken)
    sh("ip", "link", "property", "add", "dev", vf.name, "altname", taken)
    rc, out, _ = lab.run("ADD", base(lab, vf, net=net), cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 100 and "GUID 02:" in out["details"],
         "netdev move fails: code 100, message names the GUID", out)
    sh("ip", "link", "property", "del", "dev", vf.name, "altname", taken)
    assert_rollback(lab, t, vf, ns, cid, net, "netdev move failed", keep=(taken, peer))

    # 3. IPAM plugin not in CNI_PATH
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-ipam-missing"
    conf = base(lab, vf, net=net)
    conf["ipam"] = {"type": "no-such-ipam"}
    rc, out, _ = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 101 and "no-such-ipam" in out["details"],
         "IPAM plugin missing: code 101", out)
    assert_rollback(lab, t, vf, ns, cid, net, "IPAM missing")

    # 4. IPAM plugin fails
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-ipam-error"
    conf = base(lab, vf, net=net)
    conf["ipam"]["subnet"] = "10.77.0.0/33"
    rc, out, _ = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 101 and "host-local" in out["details"],
         "IPAM error: code 101 with host-local's message", out)
    assert_rollback(lab, t, vf, ns, cid, net, "IPAM error")

    # 5. IPAM returns no IP (and is called again with DEL)
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-ipam-noip"
    calls = os.path.join(lab.tmp, "noip.calls")
    lab.fake_ipam("noip-ipam", f'echo "$CNI_COMMAND $CNI_CONTAINERID" >> {calls}\n'
                  'cat >/dev/null\n[ "$CNI_COMMAND" = ADD ] && '
                  'echo \'{"cniVersion":"1.0.0","ips":[]}\'\nexit 0\n')
    conf = base(lab, vf, net=net)
    conf["ipam"] = {"type": "noip-ipam"}
    rc, out, _ = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 101 and "no IP" in out["msg"], "IPAM without IP: code 101",
         out)
    t.ok(open(calls).read().split("\n")[:2] == [f"ADD {cid}", f"DEL {cid}"],
         "IPAM without IP: the plugin got DEL after ADD", open(calls).read())
    assert_rollback(lab, t, vf, ns, cid, net, "IPAM without IP")

    # 6. the IPAM result cannot be applied (route via an unreachable gateway)
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-apply"
    conf = base(lab, vf, net=net)
    conf["ipam"] = {"type": "static", "addresses": [{"address": "10.78.0.5/24"}],
                    "routes": [{"dst": "10.200.0.0/16", "gw": "10.201.9.9"}]}
    rc, out, _ = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 101 and "10.200.0.0/16" in out["details"],
         "IPAM route not applicable: code 101 naming the route", out)
    assert_rollback(lab, t, vf, ns, cid, net, "IPAM apply failed")

    # 7. the cache cannot be written
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-cache"
    blocker = os.path.join(lab.tmp, "not-a-dir")
    open(blocker, "w").close()
    n = len(lab.store()["calls"])
    rc, out, _ = lab.run("ADD", base(lab, vf, net=net), cid, netns=ns,
                         extra={"IBVF_CNI_CACHE_DIR": os.path.join(blocker, "cache")})
    t.ok(rc == 1 and out["code"] == 105, "cache not writable: code 105", out)
    # the commit went out before the cache write (issue 17); the rollback released it
    t.ok(lab.store()["calls"][n:] == ["prepare", "commit", "release"],
         "cache not writable: the commit sent before the cache write is walked back",
         lab.store()["calls"][n:])
    assert_rollback(lab, t, vf, ns, cid, net, "cache write failed")

    # 8. ibvfd refuses the commit
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-commit"
    lab.set_control({"fail": {"commit": {"code": -32008, "message": "daemon stopping"}}})
    rc, out, _ = lab.run("ADD", base(lab, vf, net=net), cid, netns=ns)
    lab.set_control({})
    t.ok(rc == 1 and out["code"] == 11, "commit refused (busy): code 11 try again later", out)
    assert_rollback(lab, t, vf, ns, cid, net, "commit refused")

    # 8b. issue 15 item 9: permanent refusals get permanent codes, retryable ones 11
    for code, step, want, what in ((-32010, "allocate", 100, "VF held by another owner"),
                                   (-32003, "validate", 102, "SM backend unusable"),
                                   (-32009, "validate", 11, "not ready yet"),
                                   (-32008, "allocate", 11, "busy")):
        vf, ns, cid = lab.vf(), lab.ns(), f"c-f-perm{-code}"
        lab.set_control({"fail": {"prepare": {"code": code, "message": what, "step": step}}})
        rc, out, _ = lab.run("ADD", base(lab, vf, net=net), cid, netns=ns)
        lab.set_control({})
        t.ok(rc == 1 and out["code"] == want, f"prepare {code} ({what}): code {want}", out)
        assert_rollback(lab, t, vf, ns, cid, net, f"prepare {code}")

    # 8c. a netns path that is a regular file: 3 (container unknown), not 100
    vf, cid = lab.vf(), "c-f-nsfile"
    nsfile = os.path.join(lab.tmp, "netns-is-a-file")
    open(nsfile, "w").close()
    rc, out, _ = lab.run("ADD", base(lab, vf, net=net), cid, netns=nsfile)
    t.ok(rc == 1 and out["code"] == 3, "CNI_NETNS a regular file: code 3", out)

    # 9. the daemon is down (configured socket absent): nothing touched
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-nodaemon"
    rc, out, _ = lab.run("ADD", base(lab, vf, net=net, ibvfd={"socket": lab.no_sock}), cid,
                         netns=ns)
    t.ok(rc == 1 and out["code"] == 11, "ibvfd socket absent: code 11", out)
    assert_rollback(lab, t, vf, ns, cid, net, "no daemon")

    # 9b. ibvfd does not answer prepare in time: code 11, and the plugin asks for a
    # release (ibvfd may still finish the prepare after the client gave up)
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-slow"
    lab.set_control({"delay_ms": {"prepare": 1500}})
    n_calls = len(lab.store()["calls"])
    rc, out, _ = lab.run("ADD", base(lab, vf, net=net, ibvfd={"timeout": 0.3}), cid, netns=ns)
    lab.set_control({})
    t.ok(rc == 1 and out["code"] == 11 and "no reply in time" in out["details"],
         "prepare without answer in ibvfd.timeout: code 11", out)
    time.sleep(1.5)
    t.ok("release" in lab.store()["calls"][n_calls:],
         "prepare without answer: the plugin asked ibvfd to release the owner",
         lab.store()["calls"][n_calls:])
    lab.rpc("release", {"owner": {"container_id": cid, "ifname": "net1"}})
    assert_rollback(lab, t, vf, ns, cid, net, "prepare timed out")

    # 10. rdmaIsolation without an RDMA core in this kernel: refused before any change
    vf, ns, cid = lab.vf(), lab.ns(), "c-f-rdma"
    calls_before = len(lab.store()["calls"])
    rc, out, _ = lab.run("ADD", base(lab, vf, net=net, rdmaIsolation=True), cid, netns=ns)
    t.ok(rc == 1 and out["code"] in (7, 100) and "RDMA" in out["msg"] + out["details"],
         "rdmaIsolation without exclusive RDMA netns mode: clear error", out)
    t.ok(len(lab.store()["calls"]) == calls_before, "rdmaIsolation refusal: ibvfd not called")
    assert_rollback(lab, t, vf, ns, cid, net, "rdmaIsolation refused")


def t_move_names(lab, t):
    """The one-message moves (cni_netns.c link_move_as()) when names are taken."""
    net = "ibnames"
    # the Pod netns has a netdev with the VF's host name: the kernel names the
    # VF by its Pod name in the move itself
    vf, ns, cid = lab.vf(), lab.ns(), "c-names-pod"
    peer = lab.placeholder(ns, vf.name)
    rc, out, err = lab.run("ADD", base(lab, vf, net=net), cid, netns=ns)
    l = lab.link("net1", ns)
    t.ok(rc == 0 and l and "UP" in l.get("flags", []) and lab.link(vf.name, ns) and
         lab.link(vf.name, ns)["ifindex"] != l["ifindex"],
         "ADD with the VF's host name taken in the Pod: net1 up, the other netdev kept",
         f"{out}\n{err}\n{lab.links(ns)}")
    rc, out, err = lab.run("DEL", base(lab, vf, net=net), cid, netns=ns)
    t.ok(rc == 0, "DEL with the VF's host name taken in the Pod", f"{out}\n{err}")
    host_ok(lab, t, vf, "host name taken in the Pod")
    t.ok(lab.link(vf.name, ns) is not None and lab.link(peer, ns) is not None,
         "the Pod's own netdev of that name is untouched", lab.links(ns))
    # at DEL the VF's host name is taken in the host: the netdev moves back as
    # net1, the rename fails, and it is left under a temporary name (warning)
    vf, ns, cid = lab.vf(), lab.ns(), "c-names-host"
    rc, out, err = lab.run("ADD", base(lab, vf, net=net), cid, netns=ns)
    t.ok(rc == 0, "ADD (host name to be taken)", f"{out}\n{err}")
    mac = lab.link("net1", ns)["address"]
    other = f"{lab.prefix}o{secrets.token_hex(2)}"
    sh("ip", "link", "add", vf.name, "type", "veth", "peer", "name", other)
    rc, out, err = lab.run("DEL", base(lab, vf, net=net), cid, netns=ns)
    back = [n for n in lab.links() if n.startswith("ibvr") and lab.link(n)["address"] == mac]
    t.ok(rc == 0 and back and "net1" not in lab.links() and lab.link("net1", ns) is None and
         "back in the host netns as ibvr" in err,
         "DEL with the VF's host name taken in the host: back under a temporary name, "
         "warned", f"{out}\n{err}\n{lab.links()}")
    t.ok(lab.link(vf.name)["address"] != mac and lab.link(other) is not None,
         "the host's own netdev of that name is untouched")
    sh("ip", "link", "del", vf.name)
    if back:
        t.ok(not lab.link(back[0]).get("ifalias"), "the temporary-named VF has no ifalias")
        sh("ip", "link", "set", "dev", back[0], "name", vf.name)
    host_ok(lab, t, vf, "host name taken in the host, renamed back")
    nothing_held(lab, t, cid, net, "host name taken in the host")


def t_bad_input(lab, t):
    vf, ns = lab.vf(), lab.ns()
    conf = base(lab, vf, ipam=False, net="ibbad")
    rc, out, _ = lab.run("ADD", conf, "c-bad", netns=None)
    t.ok(rc == 1 and out["code"] == 4 and "CNI_NETNS" in out["details"],
         "ADD without CNI_NETNS: code 4 naming the variable", out)
    rc, out, _ = lab.run("ADD", conf, "bad id!", netns=ns)
    t.ok(rc == 1 and out["code"] == 4 and "CNI_CONTAINERID" in out["details"],
         "ADD with an invalid container ID: code 4", out)
    rc, out, _ = lab.run("ADD", '{"cniVersion": "1.0.0", ', "c-bad", netns=ns)
    t.ok(rc == 1 and out["code"] == 6, "truncated JSON: code 6", out)
    rc, out, _ = lab.run("ADD", dict(conf, cniVersion="2.0.0"), "c-bad", netns=ns)
    t.ok(rc == 1 and out["code"] == 1, "unknown cniVersion: code 1", out)
    for key, val, name in (("link_state", "up", "link_state"), ("pkey", "0x0", "pkey"),
                           ("pkey", "junk", "pkey"), ("rcCheck", {"enable": True}, "rcCheck"),
                           ("ipam", {"type": "dhcp"}, "dhcp"), ("deviceID", "81:00.1", "deviceID"),
                           ("pkeys", [{"pkey": "0x10", "membership": "half"}], "pkeys")):
        rc, out, _ = lab.run("ADD", dict(conf, **{key: val}), "c-bad", netns=ns)
        t.ok(rc == 1 and out["code"] == 7 and name in out["details"] and
             out["cniVersion"] == "1.0.0",
             f"bad {key}={json.dumps(val)}: code 7 naming it, in the request's version", out)
    rc, out, err = lab.run("ADD", dict(conf, args={"cni": {"labels": {"a": 1}, "count": 3,
                                                          "guid": "02:00:00:00:00:00:c0:01"}}),
                           "c-args", netns=ns)
    t.ok(rc == 0 and lab.store()["owners"]["c-args/net1"]["guid"] == "02:00:00:00:00:00:c0:01",
         "non-string args.cni values ignored; args.cni.guid used", f"{out}\n{err}")
    t.ok("not a string; ignored" in err, "the ignored args.cni values are logged", err)
    lab.run("DEL", conf, "c-args", netns=ns)
    lab.placeholder(ns, "net1")
    calls_before = len(lab.store()["calls"])
    rc, out, _ = lab.run("ADD", conf, "c-exists", netns=ns)
    t.ok(rc == 1 and "already has an interface net1" in out["details"] and
         len(lab.store()["calls"]) == calls_before,
         "CNI_IFNAME already in the Pod: error before anything is prepared", out)
    rc, out, _ = lab.run("ADD", dict(conf, deviceID="0000:99:1f.7"), "c-novf", netns=ns)
    t.ok(rc == 1 and out["code"] == 100 and "0000:99:1f.7" in out["details"],
         "deviceID not in sysfs: code 100 naming it", out)


def t_compat_mode(lab, t):
    no_daemon = {"IBVF_CNI_SOCKET": lab.no_sock}
    vf, ns, cid = lab.vf(), lab.ns(), "c-compat"
    conf = base(lab, vf, net="ibcompat")
    del conf["link_state"]
    rc, res, err = lab.run("ADD", conf, cid, netns=ns, extra=no_daemon)
    t.ok(rc == 0 and res["ips"], "compatibility mode (no ibvfd): ADD", f"{res}\n{err}")
    cache = json.load(open(lab.cache_file(cid)))
    t.ok(cache["ibvf"]["mode"] == "compat", "compatibility mode recorded in the cache")
    rc, out, err = lab.run("CHECK", dict(conf, prevResult=res), cid, netns=ns, extra=no_daemon)
    t.ok(rc == 0, "compatibility mode CHECK", f"{out}\n{err}")
    rc, out, err = lab.run("DEL", conf, cid, netns=ns, extra=no_daemon)
    t.ok(rc == 0, "compatibility mode DEL", f"{out}\n{err}")
    host_ok(lab, t, vf, "compat DEL")
    t.ok(lab.ipam_leases("ibcompat") == [], "compat DEL released the lease")
    # ibKubernetesEnabled: the "configured" gate (even with ibvfd running)
    vf, cid = lab.vf(), "c-ibk8s"
    conf = base(lab, vf, net="ibcompat", ibKubernetesEnabled=True,
                args={"cni": {"mellanox.infiniband.app": "pending", "guid": GUID}})
    rc, out, _ = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 11 and "configured" in out["details"],
         "ibKubernetesEnabled and not \"configured\": code 11 try again later", out)
    conf["args"]["cni"] = {"mellanox.infiniband.app": "configured"}
    rc, out, _ = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 7 and "GUID" in out["msg"],
         "ibKubernetesEnabled without a GUID: code 7", out)
    assert_rollback(lab, t, vf, ns, cid, "ibcompat", "ib-kubernetes gate")
    # configured + GUID: the VF module programs it through the PF with the netlink
    # driver; the fake PF netdev is a veth, so the kernel refuses (EOPNOTSUPP)
    conf["args"]["cni"] = {"mellanox.infiniband.app": "configured", "guid": GUID}
    rc, out, _ = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 100 and GUID in out["details"] and
         "not supported" in out["details"].lower(),
         "compatibility mode GUID on a PF without VF GUID support: clear error", out)
    assert_rollback(lab, t, vf, ns, cid, "ibcompat", "compat GUID refused by the kernel")


def t_concurrent(lab, t, n=50):
    """50 ADDs at once on 50 VFs into 50 Pods, then 50 DELs at once: all succeed,
    nothing leaks (netdevs, leases, owners, cache)."""
    vfs = lab.vfs(n)
    nss = [lab.ns() for _ in range(n)]
    net = "ibconc"
    confs = [base(lab, v, net=net) for v in vfs]
    for c in confs:
        c["ipam"].update(subnet="10.80.0.0/16", gateway="10.80.0.1")
    start = time.monotonic()
    procs = [lab.spawn("ADD", c, f"c-conc-{i}", netns=ns) for i, (c, ns) in
             enumerate(zip(confs, nss))]
    res = [(p.wait(120), p.stdout.read(), p.stderr.read()) for p in procs]
    t_add = time.monotonic() - start
    bad = [(i, r) for i, r in enumerate(res) if r[0] != 0]
    t.ok(not bad, f"{n} concurrent ADDs all succeed ({t_add:.2f} s)", bad[:3])
    addrs = {json.loads(r[1])["ips"][0]["address"] for r in res if r[0] == 0}
    t.ok(len(addrs) == n, f"{n} distinct addresses")
    owners = lab.store()["owners"]
    t.ok(sum(1 for k, o in owners.items() if k.startswith("c-conc-") and o["state"] == "handed")
         == n and len({o["guid"] for o in owners.values()}) == len(owners),
         f"ibvfd holds {n} handed owners with distinct GUIDs")
    start = time.monotonic()
    procs = [lab.spawn("DEL", c, f"c-conc-{i}", netns=ns) for i, (c, ns) in
             enumerate(zip(confs, nss))]
    res = [(p.wait(120), p.stdout.read(), p.stderr.read()) for p in procs]
    t_del = time.monotonic() - start
    bad = [(i, r) for i, r in enumerate(res) if r[0] != 0]
    t.ok(not bad, f"{n} concurrent DELs all succeed ({t_del:.2f} s)", bad[:3])
    t.ok(all(lab.link(v.name) is not None for v in vfs), "every VF netdev back in the host")
    t.ok(all(lab.links(ns) == ["lo"] for ns in nss), "every Pod netns empty")
    t.ok(lab.ipam_leases(net) == [], "no lease left", lab.ipam_leases(net))
    t.ok(not any(k.startswith("c-conc-") for k in lab.store()["owners"]), "no owner left")
    t.ok(not any(f.startswith("c-conc-") for f in os.listdir(lab.cache)), "no cache entry left")
    for ns in nss:
        sh("ip", "netns", "del", ns)
        lab.netns.remove(ns)


def t_vfio(lab, t):
    """A VF bound to vfio-pci (KubeVirt): GUID through ibvfd, no netdev, no IPAM."""
    vf, ns, cid = lab.vf(), lab.ns(), "c-vfio"
    rc, out, _ = lab.run("ADD", base(lab, vf, net="ibvfio", vfioPciMode=True), cid, netns=ns)
    t.ok(rc == 1 and out["code"] == 7 and "vfio-pci" in out["details"],
         "vfioPciMode on a VF bound to mlx5_core: code 7", out)
    sh(lab.fakesysfs, lab.sysfs, "unbind", vf.pci)
    sh(lab.fakesysfs, lab.sysfs, "bind", vf.pci, "vfio-pci")
    conf = base(lab, vf, net="ibvfio")
    rc, res, err = lab.run("ADD", conf, cid, netns=ns)
    t.ok(rc == 0 and res["interfaces"][0]["name"] == "net1" and "mac" not in
         res["interfaces"][0] and res["ips"] == [],
         "vfio-pci detected: ADD hands the GUID over without netdev or IPAM", f"{res}\n{err}")
    t.ok(lab.store()["owners"].get(f"{cid}/net1", {}).get("state") == "handed",
         "vfio: ibvfd holds the owner")
    t.ok(json.load(open(lab.cache_file(cid)))["ibvf"]["vfio"], "vfio recorded in the cache")
    rc, out, err = lab.run("DEL", conf, cid, netns=ns)
    t.ok(rc == 0 and f"{cid}/net1" not in lab.store()["owners"], "vfio: DEL releases the owner",
         f"{out}\n{err}")
    nothing_held(lab, t, cid, "ibvfio", "vfio DEL")


TESTS = [t_version, t_add_check_del, t_one_connection, t_rendered_sriovibnetwork, t_metaplugins_conflist,
         t_versions, t_ipam_execs, t_gc, t_status, t_del_missing_state, t_legacy_cache, t_add_failures,
         t_move_names, t_bad_input, t_compat_mode, t_vfio, t_concurrent]


def main():
    need_lab()
    if len(sys.argv) < 3 or not all(os.access(a, os.X_OK) for a in sys.argv[1:3]):
        print("usage: test_ib_sriov.py PATH/TO/ib-sriov PATH/TO/ibvf-fakesysfs [test ...]",
              file=sys.stderr)
        return 2
    t = Tap()
    lab = Lab(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), t)
    lab.start_daemon()
    only = set(sys.argv[3:])
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
