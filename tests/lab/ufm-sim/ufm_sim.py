#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""UFM REST API simulator: a test double for ibvf's ufm SM backend.

Written from NVIDIA's public UFM Enterprise REST API guide (PKey GUIDs REST
API, REST API Complementary Information). Python 3 standard library only.
It serves, on 127.0.0.1 only, over HTTP or HTTPS (with a test CA it makes
with the openssl CLI):

  GET  {prefix}/app/ufm_version
  GET  {prefix}/resources/pkeys[?guids_data=true]
  POST {prefix}/resources/pkeys[/]
  POST {prefix}/actions/remove_guids_from_pkey

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

ENDPOINTS = ("version", "list", "add", "remove", "other")
FAULT_KINDS = ("pass", "status", "reset", "malformed", "empty", "body", "slow_body", "latency")
REQUEST_LOG_MAX = 256
GUID_RE = re.compile(r"^[0-9a-fA-F]{16}$")
PKEY_RE = re.compile(r"^0[xX][0-9a-fA-F]{1,4}$")
ADD_KEYS = {"pkey", "guids", "membership", "memberships", "index0", "ip_over_ib",
            "partition_name"}
REMOVE_KEYS = {"pkey", "guids"}
DEFAULT_VERSION = {"ufm_release_version": "6.18.0-5", "opensm": "5.20.0_MLNX",
                   "sharp": "3.6.0", "plugins": {}}


class BadRequest(Exception):
    """A request UFM would refuse with 400."""


class SimState:
    """Everything the simulator knows; guarded by one lock."""

    def __init__(self, basic_user, basic_password, token):
        self.lock = threading.Lock()
        self.basic_user = basic_user
        self.basic_password = basic_password
        self.token = token
        self.require_client_cert = False
        self.require_client_cert_at_start = False
        self.reset(keep_state=False)

    def reset(self, keep_state):
        if not keep_state:
            self.pkeys = {}
        self.calls = {e: 0 for e in ENDPOINTS}
        self.by_path = {}
        self.total = 0
        self.in_flight = 0
        self.max_concurrent = 0
        self.requests = []
        self.faults = []
        self.latency_ms = 0
        self.max_guids = 0
        self.version = dict(DEFAULT_VERSION)

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


def pkey_value(s):
    if not isinstance(s, str) or not PKEY_RE.match(s):
        raise BadRequest("pkey must be a hex string such as \"0x7fff\"")
    v = int(s, 16)
    if v < 1 or v > 0x7FFF:
        raise BadRequest("pkey %s is out of range 0x1..0x7fff" % s)
    return v


def check_guids(body):
    guids = body.get("guids")
    if not isinstance(guids, list) or not guids:
        raise BadRequest("guids must be a non-empty list")
    for g in guids:
        if not isinstance(g, str) or not GUID_RE.match(g):
            raise BadRequest("invalid GUID %r: 16 hex digits expected" % (g,))
    return [g.lower() for g in guids]


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
        if method == "GET" and rest == "/app/ufm_version":
            return prefix, "version"
        if method == "GET" and rest in ("/resources/pkeys", "/resources/pkeys/"):
            return prefix, "list"
        if method == "POST" and rest in ("/resources/pkeys", "/resources/pkeys/"):
            return prefix, "add"
        if method == "POST" and rest == "/actions/remove_guids_from_pkey":
            return prefix, "remove"
        return prefix, "other"

    def authorized(self, st, prefix):
        got = self.headers.get("Authorization") or ""
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
            st.requests.append({
                "method": method, "path": self.path, "endpoint": ep or "other",
                "headers": {k: v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
                "client_cert": self.peer_cert_cn(),
            })
            del st.requests[:-REQUEST_LOG_MAX]
            f = st.take_fault(ep or "other")
            latency = st.latency_ms
        try:
            self.ufm_reply(st, method, url, body, prefix, ep, f, latency)
        finally:
            with st.lock:
                st.in_flight -= 1

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
        try:
            req = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise BadRequest("body is not JSON: %s" % e)
        if ep == "add":
            return self.add(st, req)
        return self.remove(st, req)

    @staticmethod
    def render_pkeys(st):
        out = {}
        for key, p in st.pkeys.items():
            out[key] = {
                "partition": p["partition"],
                "ip_over_ib": p["ip_over_ib"],
                "guids": [{"guid": g, "membership": m["membership"], "index0": m["index0"]}
                          for g, m in p["guids"].items()],
            }
        return out

    @staticmethod
    def add(st, req):
        check_keys(req, ADD_KEYS)
        pk = pkey_value(req.get("pkey"))
        guids = check_guids(req)
        if "membership" in req and "memberships" in req:
            raise BadRequest("give membership or memberships, not both")
        if "memberships" in req:
            ms = req["memberships"]
            if not isinstance(ms, list) or len(ms) != len(guids):
                raise BadRequest("memberships must list one membership per GUID")
        else:
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
                "partition": req.get("partition_name") or "api_pkey_%s" % key,
                "ip_over_ib": req.get("ip_over_ib", True),
                "guids": {},
            })
            for g, m in zip(guids, ms):
                p["guids"][g] = {"membership": m, "index0": index0}
        return 200, b""

    @staticmethod
    def remove(st, req):
        check_keys(req, REMOVE_KEYS)
        pk = pkey_value(req.get("pkey"))
        guids = check_guids(req)
        with st.lock:
            if st.max_guids and len(guids) > st.max_guids:
                raise BadRequest("too many GUIDs in one request: %d > %d"
                                 % (len(guids), st.max_guids))
            p = st.pkeys.get("0x%x" % pk)
            # assumption: removing absent GUIDs (or from an absent PKey) is not an error
            if p:
                for g in guids:
                    p["guids"].pop(g, None)
        return 200, b""

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
                "require_client_cert": st.require_client_cert, "version": st.version}

    def set_config(self, st, req):
        allowed = {"latency_ms", "max_guids_per_request", "basic_user", "basic_password",
                   "token", "require_client_cert", "version"}
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
    a = ap.parse_args()

    if not (a.host.startswith("127.") or a.host == "::1"):
        ap.error("--host must be a loopback address")
    state = SimState(a.basic_user, read_secret(a.basic_password_file),
                     read_secret(a.token_file))
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
