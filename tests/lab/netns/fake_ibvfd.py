#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A stand-in for ibvfd speaking include/ibvf/api.h (JSON-RPC 2.0, one object
per line, over a Unix stream socket), for the ib-sriov plugin's netns lab.

It keeps owners in memory, hands out GUIDs from a counter, and writes its
store to STATE (JSON) after every change so tests can assert what it holds.
Faults come from CONTROL (JSON, re-read on every request):
  {"fail": {"prepare": {"code": -32003, "message": "..."}, "commit": ...},
   "status": {"ready": false, "backend_ok": false, "error": "..."},
   "delay_ms": {"prepare": 50},
   "close_after": ["prepare"],   # answer, then close the connection (idle close)
   "drop_once": "commit"}        # read the next such request, close unanswered
STATE's "conns" holds each call's connection number (parallel to "calls").
Usage: fake_ibvfd.py SOCKET STATE CONTROL [--netdev-map PCI=NAME,...]
"""
import json
import os
import socket
import socketserver
import sys
import threading
import time

SOCK, STATE, CONTROL = sys.argv[1:4]
NETDEV = {}
for arg in sys.argv[4:]:
    if arg.startswith("--netdev-map="):
        for kv in arg.split("=", 1)[1].split(","):
            if kv:
                k, v = kv.split("=", 1)
                NETDEV[k] = v

lock = threading.Lock()
owners = {}          # "cid/ifname" -> record
calls = []           # method names, in order
conns = []           # the connection number of each call
n_conns = [0]
dropped = set()      # drop_once methods already dropped
next_guid = [0x0200000000000001]


def fmt_guid(g):
    b = g.to_bytes(8, "big")
    return ":".join(f"{x:02x}" for x in b)


def save():
    tmp = STATE + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"owners": owners, "calls": calls, "conns": conns}, f)
    os.replace(tmp, STATE)


def control():
    try:
        with open(CONTROL) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def key(owner):
    return f"{owner['container_id']}/{owner['ifname']}"


class RpcError(Exception):
    def __init__(self, code, message, step=""):
        super().__init__(message)
        self.code, self.message, self.step = code, message, step


def m_prepare(p):
    o = p["owner"]
    k = key(o)
    if k in owners:
        return owners[k]["result"]
    if "guid" in p:
        g = int(p["guid"].replace(":", ""), 16)
        for r in owners.values():
            if r["guid"] == p["guid"]:
                raise RpcError(-32002, f"GUID {p['guid']} is held by {r['owner']['container_id']}")
    else:
        g = next_guid[0]
        next_guid[0] += 1
    pkeys = [{"pkey": "0x%04x" % (int(x["pkey"], 16) | (0x8000 if x["membership"] == "full" else 0)),
              "membership": x["membership"], "index": i + 1} for i, x in enumerate(p.get("pkeys", []))]
    res = {"guid": fmt_guid(g), "pf": "ibpf0", "vf_index": 0, "pci": p["pci"],
           "netdev": NETDEV.get(p["pci"], ""), "rdma_dev": "", "node_guid": fmt_guid(g),
           "port_guid": fmt_guid(g), "lid": 5, "sm_lid": 1, "port_state": "ACTIVE",
           "pkeys": pkeys, "state": "port_ready"}
    owners[k] = {"owner": o, "guid": res["guid"], "state": "port_ready", "pci": p["pci"],
                 "link_state": p.get("link_state"), "pkeys": p.get("pkeys", []), "result": res}
    return res


def m_commit(p):
    k = key(p["owner"])
    if k not in owners:
        raise RpcError(-32602, f"no owner {k}")
    owners[k]["state"] = "handed"
    return {"guid": owners[k]["guid"], "state": "handed"}


def m_release(p):
    r = owners.pop(key(p["owner"]), None)
    return {"released": r is not None, **({"guid": r["guid"]} if r else {})}


def m_status(p):
    st = control().get("status", {})
    return {"ready": st.get("ready", True), "version": "fake",
            "backend": {"name": "noop", "ok": st.get("backend_ok", True),
                        "description": "fake", **({"error": st["error"]} if "error" in st else {})},
            "pool": {"total": 1000, "allocated": len(owners), "quarantined": 0, "free": 1000 - len(owners)}}


def m_list(p):
    net = p.get("network")
    sel = [{"owner": r["owner"], "guid": r["guid"], "state": r["state"], "pf": "ibpf0",
            "vf_index": 0, "pci": r["pci"], "pkeys": r["pkeys"]}
           for _, r in sorted(owners.items(), reverse=True)
           if not net or r["owner"].get("network") == net]
    off, lim = p.get("offset", 0), p.get("limit", len(sel))
    page = int(control().get("list_page", 0)) or lim  # tests force small pages
    return {"owners": sel[off:off + min(lim, page)], "total": len(sel)}


def m_gc(p):
    net = p.get("network")
    valid = {f"{v['container_id']}/{v['ifname']}" for v in p.get("valid", [])}
    gone = [k for k, r in owners.items()
            if k not in valid and (not net or r["owner"].get("network") == net)]
    return {"released": [owners.pop(k)["guid"] for k in gone], "skipped_busy": []}


METHODS = {"prepare": m_prepare, "commit": m_commit, "release": m_release,
           "status": m_status, "list": m_list, "gc": m_gc}


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        with lock:
            n_conns[0] += 1
            conn = n_conns[0]
        for line in self.rfile:
            try:
                req = json.loads(line)
            except ValueError:
                self.reply({"jsonrpc": "2.0", "id": None,
                            "error": {"code": -32700, "message": "parse error"}})
                continue
            method, rid = req.get("method"), req.get("id")
            ctl = control()
            delay = ctl.get("delay_ms", {}).get(method, 0)
            if delay:
                time.sleep(delay / 1000)
            with lock:
                drop = ctl.get("drop_once") == method and method not in dropped
                if drop:
                    dropped.add(method)
            if drop:
                return  # closed under the request, as a restarting ibvfd does
            with lock:
                calls.append(method)
                conns.append(conn)
                fault = ctl.get("fail", {}).get(method)
                try:
                    if fault:
                        raise RpcError(fault.get("code", -32003), fault.get("message", "injected"),
                                       fault.get("step", ""))
                    if method not in METHODS:
                        raise RpcError(-32601, f"no method {method}")
                    out = {"jsonrpc": "2.0", "id": rid, "result": METHODS[method](req.get("params") or {})}
                except RpcError as e:
                    out = {"jsonrpc": "2.0", "id": rid,
                           "error": {"code": e.code, "message": e.message,
                                     "data": {"errno": 5, "step": e.step}}}
                save()
            self.reply(out)
            if method in ctl.get("close_after", []):
                return

    def reply(self, obj):
        self.wfile.write((json.dumps(obj) + "\n").encode())
        self.wfile.flush()


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 128


if __name__ == "__main__":
    try:
        os.unlink(SOCK)
    except FileNotFoundError:
        pass
    srv = Server(SOCK, Handler)
    os.chmod(SOCK, 0o600)
    save()
    print("ready", flush=True)
    srv.serve_forever()
