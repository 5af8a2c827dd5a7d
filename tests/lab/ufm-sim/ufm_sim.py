#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""UFM REST API simulator: a test double for ibvf's ufm SM backend.

Written from NVIDIA's public UFM Enterprise REST API guide (PKey GUIDs REST
API, REST API Complementary Information). Python 3 standard library only.
It serves, on 127.0.0.1 only, over HTTP or HTTPS (with a test CA it makes
with the openssl CLI):

  GET    {prefix}/app/ufm_version
  GET    {prefix}/resources/pkeys[?guids_data=true]
  GET    {prefix}/resources/pkeys/{pkey}[?guids_data=true]
  GET    {prefix}/resources/pkeys/last_updated          (profiles that have it)
  POST   {prefix}/resources/pkeys[/]
  POST   {prefix}/resources/pkeys/add                   (profiles that have it)
  DELETE {prefix}/resources/pkeys/{pkey}/guids/{g,...}
  POST   {prefix}/actions/remove_guids_from_pkey         (deprecated)

It behaves like one UFM version (--profile 6.12, 6.19 or 6.22; PROFILES
below says what differs, each behaviour with its source).

with {prefix} = /ufmRest (HTTP Basic) or /ufmRestV3 ("Authorization: Basic
<token>"), keeps PKey -> members state, and has a control API under /_sim/
(no auth) for fault injection, latency, call counters and a request log.
README.md next to this file documents the control API.
"""

import argparse
import base64
import hmac
import json
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ENDPOINTS = ("version", "list", "add", "remove", "get_pkey", "delete", "create", "last_updated",
             "other")
FAULT_KINDS = ("pass", "status", "reset", "malformed", "empty", "body", "slow_body", "latency")
REQUEST_LOG_MAX = 256
# UFM guide, "Add GUIDs to PKey": "Each GUID is a hexadecimal string with a
# minimum length of 16 characters and maximum length of 20 characters"; UFM
# prints GUIDs as 16 lower-case digits (bare-metal-manager ufmclient), and
# an upper-case GUID is not matched against its lower-case port GUID
# (issue 16's field comparison): lower case only, "0x" allowed.
GUID_RE = re.compile(r"^(0x)?[0-9a-f]{16,18}$")
PKEY_RE = re.compile(r"^0[xX][0-9a-fA-F]{1,4}$")
MGMT_PKEY = "0x7fff"

# What differs between UFM versions, each with its source. Everything not
# listed here is the same in all profiles (see Handler: content type, GUID
# and PKey rules, add ignoring "memberships", partitions removed with their
# last member, 404 for a removal from a missing PKey, the 0x7fff management
# partition).
PROFILES = {
    "6.12": {
        "version": "6.12.1-4",
        # POST /resources/pkeys/add ("Allows creating a PKey without GUIDs")
        # is not in the 6.12 guide; the 6.16 and later guides have it
        "create": False,
        # "partition_name" in /pkeys/add: 6.22 guide only
        "partition_name": False,
        # top-level "membership" of the default PKey with guids_data=true:
        # "only available ... UFM version is 6.19 or newer" (ufmclient)
        "default_membership": False,
        # a missing PKey: "UFM in some cases does not return a 404 ... but a
        # 200 ... with a body containing {}" (ufmclient; the versions are not
        # named, so the oldest profile answers {} and the others 404)
        "missing_pkey": "empty",
        # GET .../pkeys/last_updated (ib-kubernetes PR #210): not assumed on
        # the oldest profile, so the backend's "absent" path is exercised
        "last_updated": None,
    },
    "6.19": {
        "version": "6.19.0-7",
        "create": True,
        "partition_name": False,
        "default_membership": True,
        "missing_pkey": "404",
        # "Thu Sep 13 11:42:39 UTC 2020": the older format in the PR #210 tests
        "last_updated": "%a %b %d %H:%M:%S UTC %Y",
    },
    "6.22": {
        "version": "6.22.1-2",
        "create": True,
        "partition_name": True,
        "default_membership": True,
        "missing_pkey": "404",
        # "19-01-2026, 20:34:50": "DD-MM-YYYY format (newer UFM)", PR #210 tests
        "last_updated": "%d-%m-%Y, %H:%M:%S",
    },
}
DEFAULT_PROFILE = "6.22"
ADD_KEYS = {"pkey", "guids", "membership", "memberships", "index0", "ip_over_ib"}
CREATE_KEYS = {"pkey", "index0", "ip_over_ib", "mtu_limit", "service_level", "rate_limit"}
REMOVE_KEYS = {"pkey", "guids"}


def version_reply(profile):
    return {"ufm_release_version": PROFILES[profile]["version"], "opensm": "5.20.0_MLNX",
            "sharp": "3.6.0", "plugins": {}}


def mgmt_partition():
    """UFM's always-present default partition (bare-metal-manager ufmclient sample reply)."""
    return {"partition": "management", "ip_over_ib": True, "guids": {}}


class BadRequest(Exception):
    """A request UFM would refuse with 400."""


class SimState:
    """Everything the simulator knows; guarded by one lock."""

    def __init__(self, basic_user, basic_password, token, profile=DEFAULT_PROFILE):
        self.lock = threading.Lock()
        self.profile = profile
        self.basic_user = basic_user
        self.basic_password = basic_password
        self.token = token
        self.require_client_cert = False
        self.require_client_cert_at_start = False
        self.reset(keep_state=False)

    def reset(self, keep_state):
        if not keep_state:
            self.pkeys = {MGMT_PKEY: mgmt_partition()}
            self.changes = []  # times (time.time()) at which changes take effect
        self.calls = {e: 0 for e in ENDPOINTS}
        self.by_path = {}
        self.total = 0
        self.in_flight = 0
        self.max_concurrent = 0
        self.requests = []
        self.faults = []
        self.latency_ms = 0
        self.max_guids = 0
        self.apply_ms = 0  # a change shows in last_updated this much later
        self.cert_users = []
        self.version = version_reply(self.profile)

    def p(self, key):
        return PROFILES[self.profile][key]

    def changed(self):
        """Record a change for last_updated (under the lock)."""
        self.changes.append(time.time() + self.apply_ms / 1000.0)
        del self.changes[:-64]

    def last_updated(self):
        now = time.time()
        done = [t for t in self.changes if t <= now]
        if not done:
            return None  # "SM returns null for last_updated when no PKey updates" (PR #210)
        return time.strftime(self.p("last_updated"), time.gmtime(max(done)))

    def take_fault(self, endpoint):
        """The first rule that matches this request (used up by one), or None."""
        for rule in self.faults:
            if rule["endpoint"] not in ("*", endpoint):
                continue
            fired = dict(rule)
            if rule["count"] > 0:
                rule["count"] -= 1
                if rule["count"] == 0:
                    self.faults.remove(rule)
            return fired
        return None


def pkey_value(s, writable=False):
    if not isinstance(s, str) or not PKEY_RE.match(s):
        raise BadRequest("pkey must be a hex string such as \"0x7fff\"")
    v = int(s, 16)
    if v < 1 or v > 0x7FFF:
        raise BadRequest("pkey %s is out of range 0x1..0x7fff" % s)
    # guide: pkey is a 'Hexadecimal string between "0x0"-"0x7fff" exclusive'
    if writable and v == 0x7FFF:
        raise BadRequest("pkey %s: the range is 0x0-0x7fff exclusive" % s)
    return v


def guid_key(g):
    return g[2:] if g.startswith("0x") else g


def check_guids(body):
    guids = body.get("guids")
    if not isinstance(guids, list) or not guids:
        raise BadRequest("guids must be a non-empty list")
    return [check_guid(g) for g in guids]


def check_guid(g):
    if not isinstance(g, str) or not GUID_RE.match(g) or len(guid_key(g)) != 16:
        raise BadRequest("invalid GUID %r: 16 lower-case hex digits (\"0x\" allowed) "
                         "expected" % (g,))
    return guid_key(g)


def check_keys(body, allowed):
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    extra = sorted(set(body) - allowed)
    if extra:
        raise BadRequest("unknown field(s): %s" % ", ".join(extra))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ufm-sim/1.0"
    sys_version = ""
    timeout = 60

    # ------------------------------------------------------------ plumbing --
    def setup(self):
        self.tls_failed = False
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                self.tls_failed = True
        super().setup()

    def handle(self):
        if self.tls_failed:
            self.close_connection = True
            return
        try:
            super().handle()
        except (ConnectionError, ssl.SSLError, socket.timeout, OSError):
            self.close_connection = True

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("ufm-sim: " + (fmt % args) + "\n")

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def read_body(self):
        if self.headers.get("Transfer-Encoding"):
            raise BadRequest("chunked bodies are not supported")
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, body=b"", ctype="application/json", slow_ms=0):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="UFM"')
        self.end_headers()
        if slow_ms and body:
            pieces = min(10, len(body))
            step = (len(body) + pieces - 1) // pieces
            for i in range(0, len(body), step):
                self.wfile.write(body[i:i + step])
                self.wfile.flush()
                time.sleep(slow_ms / 1000.0 / pieces)
        else:
            self.wfile.write(body)

    def reset_connection(self):
        """Drop the connection with a TCP RST and no reply."""
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            sock = self.connection
            if isinstance(sock, ssl.SSLSocket):
                sock = socket.socket(fileno=os.dup(sock.fileno()))
                self.connection.close()
            sock.close()
        except OSError:
            pass
        self.close_connection = True
        self.wfile = _Sink()

    # ------------------------------------------------------------ dispatch --
    def dispatch(self, method):
        url = urlsplit(self.path)
        try:
            body = self.read_body()
        except (BadRequest, ValueError) as e:
            self.send(400, {"error": str(e)})
            return
        if url.path.startswith("/_sim/"):
            self.control(method, url.path, body)
            return
        self.ufm(method, url, body)

    def endpoint_of(self, method, url):
        m = re.match(r"^(/ufmRestV3|/ufmRest)(/.*)$", url.path)
        if not m:
            return None, None
        prefix, rest = m.group(1), m.group(2)
        st = self.server.state
        if method == "GET" and rest == "/app/ufm_version":
            return prefix, "version"
        if method == "GET" and rest in ("/resources/pkeys", "/resources/pkeys/"):
            return prefix, "list"
        if method == "GET" and rest == "/resources/pkeys/last_updated":
            return prefix, "last_updated" if st.p("last_updated") else "other"
        if method == "GET" and re.match(r"^/resources/pkeys/[^/]+$", rest):
            return prefix, "get_pkey"
        if method == "POST" and rest in ("/resources/pkeys", "/resources/pkeys/"):
            return prefix, "add"
        if method == "POST" and rest == "/resources/pkeys/add":
            return prefix, "create" if st.p("create") else "other"
        if method == "DELETE" and re.match(r"^/resources/pkeys/[^/]+/guids/[^/]+$", rest):
            return prefix, "delete"
        if method == "POST" and rest == "/actions/remove_guids_from_pkey":
            return prefix, "remove"
        return prefix, "other"

    def authorized(self, st, prefix):
        got = self.headers.get("Authorization") or ""
        # UFM maps a client certificate's subject to a user, no password
        # (issue 16, item 6; bare-metal-manager ufmclient: certificate auth
        # on /ufmRest); here: the CNs in cert_users
        if not got and prefix == "/ufmRest" and self.peer_cert_cn() in st.cert_users:
            return True
        if prefix == "/ufmRestV3":
            want = "Basic " + st.token if st.token else None
        elif st.basic_user is not None:
            cred = "%s:%s" % (st.basic_user, st.basic_password or "")
            want = "Basic " + base64.b64encode(cred.encode()).decode()
        else:
            want = None
        return want is not None and hmac.compare_digest(got.encode(), want.encode())

    def ufm(self, method, url, body):
        st = self.server.state
        prefix, ep = self.endpoint_of(method, url)
        with st.lock:
            st.total += 1
            key = "%s %s" % (method, url.path)
            st.by_path[key] = st.by_path.get(key, 0) + 1
            if ep:
                st.calls[ep] += 1
            st.in_flight += 1
            st.max_concurrent = max(st.max_concurrent, st.in_flight)
            rec = {
                "method": method, "path": self.path, "endpoint": ep or "other",
                "headers": {k: v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
                "client_cert": self.peer_cert_cn(),
                # CLOCK_MONOTONIC, the clock of the C harness and ibvfd: when
                # the request arrived and, once answered, when its reply went
                # ("t_ms"/"done_ms" in ms; "t_start"/"t_end" in seconds)
                "t_ms": round(time.monotonic() * 1000.0, 3),
                "t_start": time.monotonic(), "t_end": None,
            }
            st.requests.append(rec)
            del st.requests[:-REQUEST_LOG_MAX]
            f = st.take_fault(ep or "other")
            latency = st.latency_ms
        try:
            self.ufm_reply(st, method, url, body, prefix, ep, f, latency)
        finally:
            with st.lock:
                st.in_flight -= 1
                rec["done_ms"] = round(time.monotonic() * 1000.0, 3)
                rec["t_end"] = time.monotonic()

    def peer_cert_cn(self):
        if not isinstance(self.connection, ssl.SSLSocket):
            return None
        cert = self.connection.getpeercert()
        if not cert:
            return None
        for rdn in cert.get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    return v
        return None

    def ufm_reply(self, st, method, url, body, prefix, ep, f, latency):
        kind = f["kind"] if f else "pass"
        if kind == "latency":
            latency += f.get("latency_ms", 0)
        if latency:
            time.sleep(latency / 1000.0)
        slow_ms = 0
        if kind != "pass":
            if kind == "reset":
                self.reset_connection()
                return
            if kind == "status":
                code = f.get("status", 500)
                text = f.get("body")
                if text is None:
                    text = {"error": "simulated HTTP %d" % code}
                self.send(code, text)
                return
            if kind == "malformed":
                self.send(200, '{"0x2fb": {"guids": [{"guid": "946dae03005975c8", ')
                return
            if kind == "empty":
                self.send(200, "{}")
                return
            if kind == "body":
                self.send(f.get("status", 200), f.get("body", ""),
                          ctype=f.get("content_type", "application/json"))
                return
            if kind == "slow_body":
                slow_ms = f.get("slow_ms", 1000)
        if ep is None:
            self.send(404, {"error": "no such resource: %s" % url.path})
            return
        if not self.authorized(st, prefix):
            self.send(401, "Unauthorized: bad credentials", ctype="text/plain")
            return
        try:
            status, reply = self.ufm_call(st, ep, url, body)
        except BadRequest as e:
            status, reply = 400, {"error": str(e)}
        self.send(status, reply, slow_ms=slow_ms)

    # ----------------------------------------------------------- UFM calls --
    def ufm_call(self, st, ep, url, body):
        if ep == "version":
            with st.lock:
                return 200, dict(st.version)
        if ep == "list":
            q = parse_qs(url.query)
            guids_data = q.get("guids_data", ["false"])[0].lower() == "true"
            qos = q.get("qos_conf", ["false"])[0].lower() == "true"
            if guids_data and qos:
                raise BadRequest("guids_data and qos_conf together are not supported")
            with st.lock:
                if not guids_data:
                    return 200, sorted(st.pkeys)
                return 200, self.render_pkeys(st)
        if ep == "other":
            return 404, {"error": "no such resource: %s" % url.path}
        if ep == "last_updated":
            with st.lock:
                return 200, {"last_updated": st.last_updated()}
        if ep == "get_pkey":
            return self.get_pkey(st, url)
        if ep == "delete":
            return self.delete(st, url)
        # guide: "Request Content Type – Application/json"
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise BadRequest("Content-Type must be application/json, not %r" % ctype)
        try:
            req = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise BadRequest("body is not JSON: %s" % e)
        if ep == "add":
            return self.add(st, req)
        if ep == "create":
            return self.create(st, req)
        return self.remove(st, req)

    @staticmethod
    def render_one(st, key, p):
        out = {
            "partition": p["partition"],
            "ip_over_ib": p["ip_over_ib"],
            "guids": [{"guid": g, "membership": m["membership"], "index0": m["index0"]}
                      for g, m in p["guids"].items()],
        }
        if key == MGMT_PKEY:
            out["index0"] = False
            if st.p("default_membership"):
                out["membership"] = "limited"  # ufmclient: default PKey, >= 6.19
        return out

    @staticmethod
    def render_pkeys(st):
        return {key: Handler.render_one(st, key, p) for key, p in st.pkeys.items()}

    @staticmethod
    def pkey_of(url, part):
        """The PKey in a path such as /resources/pkeys/0xa5[/guids/...]."""
        seg = url.path.split("/resources/pkeys/", 1)[1].split("/")
        return pkey_value(seg[part])

    def missing(self, st, key):
        if st.p("missing_pkey") == "empty":
            return 200, {}
        return 404, {"error": "PKey %s not found" % key}

    def get_pkey(self, st, url):
        key = "0x%x" % self.pkey_of(url, 0)
        guids_data = parse_qs(url.query).get("guids_data", ["false"])[0].lower() == "true"
        with st.lock:
            p = st.pkeys.get(key)
            if p is None:
                return self.missing(st, key)
            out = self.render_one(st, key, p)
        if not guids_data:
            del out["guids"]
        return 200, out

    def delete(self, st, url):
        """DELETE .../pkeys/{pkey}/guids/{g,g}: no body (NVIDIA's UFM mock, issue 16)."""
        pk = self.pkey_of(url, 0)
        if pk == 0x7FFF:
            raise BadRequest("pkey 0x7fff: the range is 0x0-0x7fff exclusive")
        guids = [check_guid(g) for g in url.path.rsplit("/", 1)[1].split(",") if g]
        if not guids:
            raise BadRequest("no GUIDs in the path")
        return self.remove_guids(st, pk, guids)

    @staticmethod
    def remove_guids(st, pk, guids):
        key = "0x%x" % pk
        with st.lock:
            if st.max_guids and len(guids) > st.max_guids:
                raise BadRequest("too many GUIDs in one request: %d > %d"
                                 % (len(guids), st.max_guids))
            p = st.pkeys.get(key)
            # a removal from a missing PKey is 404 (NVIDIA's UFM mock)
            if p is None:
                return 404, {"error": "PKey %s not found" % key}
            removed = 0
            for g in guids:
                removed += p["guids"].pop(g, None) is not None
            # "like real UFM, a partition is auto-removed once its last member
            # is removed" (NVIDIA's UFM mock); a no-op removal keeps it
            if removed and not p["guids"] and key != MGMT_PKEY:
                del st.pkeys[key]
            if removed:
                st.changed()
        return 200, b""

    @staticmethod
    def create(st, req):
        """POST /resources/pkeys/add: a PKey without GUIDs (guide 6.16+)."""
        allowed = CREATE_KEYS | ({"partition_name"} if st.p("partition_name") else set())
        check_keys(req, allowed)
        pk = pkey_value(req.get("pkey"), writable=True)
        key = "0x%x" % pk
        with st.lock:
            if key in st.pkeys:
                return 400, {"error": "PKey %s already exists" % key}
            st.pkeys[key] = {"partition": req.get("partition_name") or "api_pkey_%s" % key,
                             "ip_over_ib": req.get("ip_over_ib", True), "guids": {}}
            st.changed()
        return 200, b""

    @staticmethod
    def add(st, req):
        check_keys(req, ADD_KEYS)
        pk = pkey_value(req.get("pkey"), writable=True)
        guids = check_guids(req)
        if "memberships" in req:
            ms = req["memberships"]
            if not isinstance(ms, list) or len(ms) != len(guids):
                raise BadRequest("memberships must list one membership per GUID")
            for m in ms:
                if m not in ("full", "limited"):
                    raise BadRequest("membership %r is not full or limited" % (m,))
        # "POST/Add: UFM ignores the plural memberships; the single membership
        # applies to all" (NVIDIA's UFM mock, issue 16 item 1)
        ms = [req.get("membership", "full")] * len(guids)
        for m in ms:
            if m not in ("full", "limited"):
                raise BadRequest("membership %r is not full or limited" % (m,))
        for k in ("index0", "ip_over_ib"):
            if k in req and not isinstance(req[k], bool):
                raise BadRequest("%s must be true or false" % k)
        index0 = req.get("index0", False)
        with st.lock:
            if st.max_guids and len(guids) > st.max_guids:
                raise BadRequest("too many GUIDs in one request: %d > %d"
                                 % (len(guids), st.max_guids))
            key = "0x%x" % pk
            p = st.pkeys.setdefault(key, {
                "partition": "api_pkey_%s" % key,
                "ip_over_ib": req.get("ip_over_ib", True),
                "guids": {},
            })
            # an add to an existing PKey sets its ip_over_ib too (issue 16,
            # item 7: why ibvf sends the partition's own value)
            if "ip_over_ib" in req:
                p["ip_over_ib"] = req["ip_over_ib"]
            for g, m in zip(guids, ms):
                p["guids"][g] = {"membership": m, "index0": index0}
            st.changed()
        return 200, b""

    @staticmethod
    def remove(st, req):
        check_keys(req, REMOVE_KEYS)
        pk = pkey_value(req.get("pkey"), writable=True)
        guids = check_guids(req)
        return Handler.remove_guids(st, pk, guids)

    # --------------------------------------------------------- control API --
    def control(self, method, path, body):
        st = self.server.state
        try:
            req = json.loads(body.decode("utf-8")) if body else {}
        except (UnicodeDecodeError, ValueError) as e:
            self.send(400, {"error": "control body is not JSON: %s" % e})
            return
        try:
            status, reply = self.control_call(st, method, path, req)
        except (BadRequest, KeyError, TypeError, ValueError) as e:
            status, reply = 400, {"error": str(e)}
        self.send(status, reply)

    def control_call(self, st, method, path, req):
        srv = self.server
        if method == "GET" and path == "/_sim/health":
            return 200, {"ok": True, "port": srv.server_address[1], "tls": srv.tls,
                         "pid": os.getpid()}
        if method == "GET" and path == "/_sim/stats":
            with st.lock:
                return 200, {"calls": dict(st.calls), "by_path": dict(st.by_path),
                             "total": st.total, "in_flight": st.in_flight,
                             "max_concurrent": st.max_concurrent}
        if method == "GET" and path == "/_sim/requests":
            with st.lock:
                return 200, {"requests": list(st.requests)}
        if method == "POST" and path == "/_sim/reset":
            with st.lock:
                st.reset(keep_state=bool(req.get("keep_state", False)))
                st.require_client_cert = st.require_client_cert_at_start
                if srv.tls:
                    srv.apply_client_cert_mode(st.require_client_cert)
            return 200, {"ok": True}
        if method == "GET" and path == "/_sim/faults":
            with st.lock:
                return 200, {"faults": list(st.faults)}
        if method == "POST" and path == "/_sim/faults":
            rules = [self.fault_rule(r) for r in req.get("faults", [])]
            with st.lock:
                if req.get("replace", False):
                    st.faults = []
                st.faults.extend(rules)
            return 200, {"ok": True, "faults": len(rules)}
        if method == "DELETE" and path == "/_sim/faults":
            with st.lock:
                st.faults = []
            return 200, {"ok": True}
        if method == "GET" and path == "/_sim/config":
            with st.lock:
                return 200, self.config_view(st)
        if method == "POST" and path == "/_sim/config":
            self.set_config(st, req)
            with st.lock:
                return 200, self.config_view(st)
        if method == "GET" and path == "/_sim/state":
            with st.lock:
                return 200, self.render_pkeys(st)
        if method == "POST" and path == "/_sim/state":
            self.set_state(st, req)
            return 200, {"ok": True}
        if method == "POST" and path == "/_sim/shutdown":
            threading.Thread(target=srv.shutdown, daemon=True).start()
            return 200, {"ok": True}
        return 404, {"error": "no such control endpoint: %s %s" % (method, path)}

    @staticmethod
    def fault_rule(r):
        if not isinstance(r, dict):
            raise BadRequest("a fault rule is a JSON object")
        unknown = set(r) - {"endpoint", "kind", "status", "body", "content_type",
                            "latency_ms", "slow_ms", "count"}
        if unknown:
            raise BadRequest("unknown fault field(s): %s" % ", ".join(sorted(unknown)))
        ep = r.get("endpoint", "*")
        if ep != "*" and ep not in ENDPOINTS:
            raise BadRequest("endpoint %r is not one of * %s" % (ep, " ".join(ENDPOINTS)))
        kind = r.get("kind")
        if kind not in FAULT_KINDS:
            raise BadRequest("kind %r is not one of %s" % (kind, " ".join(FAULT_KINDS)))
        count = int(r.get("count", 1))
        rule = dict(r, endpoint=ep, kind=kind, count=-1 if count <= 0 else count)
        return rule

    @staticmethod
    def config_view(st):
        return {"latency_ms": st.latency_ms, "max_guids_per_request": st.max_guids,
                "basic_user": st.basic_user, "token_set": bool(st.token),
                "require_client_cert": st.require_client_cert, "version": st.version,
                "profile": st.profile, "cert_users": st.cert_users, "apply_ms": st.apply_ms}

    def set_config(self, st, req):
        allowed = {"latency_ms", "max_guids_per_request", "basic_user", "basic_password",
                   "token", "require_client_cert", "version", "cert_users", "apply_ms"}
        unknown = set(req) - allowed
        if unknown:
            raise BadRequest("unknown config field(s): %s" % ", ".join(sorted(unknown)))
        with st.lock:
            if "latency_ms" in req:
                st.latency_ms = int(req["latency_ms"])
            if "max_guids_per_request" in req:
                st.max_guids = int(req["max_guids_per_request"])
            if "basic_user" in req:
                st.basic_user = req["basic_user"]
            if "basic_password" in req:
                st.basic_password = req["basic_password"]
            if "token" in req:
                st.token = req["token"]
            if "version" in req:
                st.version = req["version"]
            if "cert_users" in req:
                st.cert_users = list(req["cert_users"])
            if "apply_ms" in req:
                st.apply_ms = int(req["apply_ms"])
            if "require_client_cert" in req:
                st.require_client_cert = bool(req["require_client_cert"])
                if self.server.tls:
                    self.server.apply_client_cert_mode(st.require_client_cert)

    @staticmethod
    def set_state(st, req):
        if not isinstance(req, dict):
            raise BadRequest("state is an object keyed by pkey")
        pkeys = {}
        for key, p in req.items():
            pk = pkey_value(key)
            members = {}
            for m in p.get("guids", []):
                members[m["guid"].lower()] = {"membership": m.get("membership", "full"),
                                              "index0": m.get("index0", False)}
            pkeys["0x%x" % pk] = {"partition": p.get("partition", "api_pkey_0x%x" % pk),
                                  "ip_over_ib": p.get("ip_over_ib", True),
                                  "guids": members}
        pkeys.setdefault(MGMT_PKEY, mgmt_partition())  # UFM always has it
        with st.lock:
            st.pkeys = pkeys


class _Sink:
    """Stands in for wfile after a reset: swallows writes."""

    def write(self, b):
        return len(b)

    def flush(self):
        pass

    def close(self):
        pass


class SimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 256  # listen backlog: bursts of concurrent clients

    def __init__(self, addr, state, tls_ctx, verbose):
        self.state = state
        self.tls_ctx = tls_ctx
        self.tls = tls_ctx is not None
        self.verbose = verbose
        super().__init__(addr, Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        # headers and body go out in separate writes: without this, Nagle plus
        # the client's delayed ACK add ~40 ms to every TLS reply
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls_ctx is not None:
            # the handshake runs in the handler thread (Handler.setup)
            sock = self.tls_ctx.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False)
        return sock, addr

    def apply_client_cert_mode(self, required):
        # not required: still ask, and verify a certificate the client offers
        self.tls_ctx.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL

    def handle_error(self, request, client_address):
        if self.verbose:
            super().handle_error(request, client_address)


# ------------------------------------------------------------ certificates --
def openssl(*args, cwd):
    subprocess.run(("openssl",) + args, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_ca(d, name, cn):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", name + ".key", "-out", name + ".pem", "-days", "3",
            "-subj", "/CN=" + cn,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def make_leaf(d, name, cn, ext):
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write(ext)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn,
            cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "3",
            "-extfile", name + ".ext", "-out", name + ".pem", cwd=d)


def make_certs(d, san):
    """Test PKI in @d: ca, other-ca (a CA nobody uses), server, client."""
    os.makedirs(d, exist_ok=True)
    if not os.path.exists(os.path.join(d, "ca.pem")):
        make_ca(d, "ca", "ibvf ufm-sim test CA")
    if not os.path.exists(os.path.join(d, "other-ca.pem")):
        make_ca(d, "other-ca", "ibvf ufm-sim unrelated CA")
    make_leaf(d, "server", "ufm-sim",
              "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
              "extendedKeyUsage=serverAuth\nsubjectAltName=%s\n" % san)
    if not os.path.exists(os.path.join(d, "client.pem")):
        make_leaf(d, "client", "ibvf-client",
                  "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                  "extendedKeyUsage=clientAuth\n")


def read_secret(path):
    if not path:
        return None
    with open(path) as f:
        return f.read().rstrip("\r\n")


def parent_watch(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (loopback only: 127.0.0.0/8 or ::1)")
    ap.add_argument("--port", type=int, default=0, help="TCP port, 0 = a free one")
    ap.add_argument("--port-file", help="write the port here (atomically) once listening")
    ap.add_argument("--tls", action="store_true", help="serve HTTPS")
    ap.add_argument("--cert-dir", help="where the test PKI lives (made if absent)")
    ap.add_argument("--san", default="DNS:localhost,IP:127.0.0.1",
                    help="subjectAltName of the server certificate")
    ap.add_argument("--require-client-cert", action="store_true")
    ap.add_argument("--basic-user", help="user name accepted on /ufmRest")
    ap.add_argument("--basic-password-file", help="file holding that user's password")
    ap.add_argument("--token-file", help="file holding the access token for /ufmRestV3")
    ap.add_argument("--max-lifetime", type=float, default=900,
                    help="exit after this many seconds (0 = never)")
    ap.add_argument("--no-parent-watch", action="store_true",
                    help="keep running when the parent process exits")
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    ap.add_argument("--profile", choices=sorted(PROFILES),
                    default=os.environ.get("IBVF_UFM_SIM_PROFILE") or DEFAULT_PROFILE,
                    help="UFM version to behave like (default $IBVF_UFM_SIM_PROFILE or %s)"
                    % DEFAULT_PROFILE)
    a = ap.parse_args()

    if not (a.host.startswith("127.") or a.host == "::1"):
        ap.error("--host must be a loopback address")
    state = SimState(a.basic_user, read_secret(a.basic_password_file),
                     read_secret(a.token_file), a.profile)
    ctx = None
    if a.tls:
        if not a.cert_dir:
            ap.error("--tls needs --cert-dir")
        try:
            make_certs(a.cert_dir, a.san)
        except subprocess.CalledProcessError as e:
            sys.stderr.write("ufm-sim: openssl failed: %s\n" % e.stderr.decode(errors="replace"))
            return 1
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(a.cert_dir, "server.pem"),
                            os.path.join(a.cert_dir, "server.key"))
        ctx.load_verify_locations(os.path.join(a.cert_dir, "ca.pem"))
        state.require_client_cert = a.require_client_cert
        state.require_client_cert_at_start = a.require_client_cert

    if ":" in a.host:
        SimServer.address_family = socket.AF_INET6
    srv = SimServer((a.host, a.port), state, ctx, a.verbose)
    if ctx is not None:
        srv.apply_client_cert_mode(a.require_client_cert)
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, a.port_file)
    print("PORT %d" % port, flush=True)
    if not a.no_parent_watch:
        threading.Thread(target=parent_watch, args=(os.getppid(),), daemon=True).start()
    if a.max_lifetime > 0:
        t = threading.Timer(a.max_lifetime, lambda: os._exit(2))
        t.daemon = True
        t.start()
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
