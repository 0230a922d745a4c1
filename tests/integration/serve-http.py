#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: http/request, executor-side HTTP (exec-server reference
# 2.11), against a local HTTP server this script runs on loopback. The
# answers, the streamed http/request/bodyDelta notifications and the
# messages of bad params were read off the released Codex exec-server
# (0.169.0), which serve-codex-parity.py runs this script against
# (CD_TEST_CONTROL=codex: the cordon-only part is left out). Then cordon's
# own policy: refused unless --allow-http-request; loopback only with
# --http-allow-loopback; private, link-local and metadata addresses refused
# after name resolution and on redirects; http and https only; the server's
# own listener refused; and a client that stops reading a streamed body holds
# the transfer (it is paused) rather than the server's memory, without
# stalling another client. TAP.

import base64
import http.server
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, Hooks, Server, Tap, b64, cordon_usable, err_code,  # noqa: E402
                       err_msg)
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
CONTROL = os.environ.get("CD_TEST_CONTROL", "")

ALLOW = ["--allow-http-request", "--http-allow-loopback"]
BIG = 5 * 1024 * 1024 + 12345          # streamed in several deltas of at most 1 MiB
HUGE = 48 * 1024 * 1024                # a body the client stops reading


def pattern(n):
    block = bytes(range(256)) * 4096
    return (block * (n // len(block) + 1))[:n]


BIG_BODY = pattern(BIG)


class Origin:
    """The HTTP server requests go to: counts the requests it saw, holds /slow until
    released, streams /chunks a chunk per gate, counts what /huge could send."""

    def __init__(self):
        self.requests = 0
        self.release = threading.Event()
        self.hold = threading.Event()
        self.held = 0
        self.gates = [threading.Event() for _ in range(3)]
        self.huge_sent = 0
        self.lock = threading.Lock()
        origin = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reply(self, status, body, headers=()):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def any(self):
                with origin.lock:
                    origin.requests += 1
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                p = self.path
                if p == "/echo":
                    out = json.dumps({"method": self.command, "headers": self.headers.items(),
                                      "body": body.decode("latin1")}).encode()
                    self.reply(201, out, [("X-Rep", "a"), ("X-Rep", "b")])
                elif p == "/mixed":
                    self.reply(200, b"", [("X-A", "1"), ("X-B", "2"), ("X-A", "3"),
                                          ("X-Latin", "caf\xe9")])
                elif p == "/redir":
                    self.reply(302, b"", [("Location", "/echo")])
                elif p.startswith("/redir-to?"):
                    self.reply(302, b"", [("Location", p[len("/redir-to?"):])])
                elif p.startswith("/redir-code?"):
                    # /redir-code?CODE[&LOCATION]: that status, a Location, a body of its own
                    code, _, loc = p[len("/redir-code?"):].partition("&")
                    self.reply(int(code), b"hop!!", [("Location", loc or "/echo"),
                                                     ("X-Hop", "1")])
                elif p == "/slow":
                    origin.release.wait(120)
                    self.reply(200, b"late")
                elif p == "/chunks":
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for i, word in enumerate([b"one", b"two", b"three"]):
                        if i and not origin.gates[i].wait(120):
                            return
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(word), word))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                elif p == "/hold":
                    with origin.lock:
                        origin.held += 1
                    origin.hold.wait(120)
                    self.reply(200, b"held")
                elif p == "/over":
                    self.reply(200, b"o" * (16 * 1024 * 1024 + 1))
                elif p in ("/ten", "/ten-then-hold"):
                    # 10 MiB; /ten-then-hold sends 9 MiB, then waits for origin.hold.
                    self.send_response(200)
                    self.send_header("Content-Length", str(10 << 20))
                    self.end_headers()
                    try:
                        if p == "/ten":
                            self.wfile.write(b"t" * (10 << 20))
                        else:
                            self.wfile.write(b"t" * (9 << 20))
                            origin.hold.wait(120)
                            self.wfile.write(b"t" * (1 << 20))
                    except OSError:
                        pass
                elif p == "/big":
                    self.reply(200, BIG_BODY)
                elif p == "/huge":
                    self.send_response(200)
                    self.send_header("Content-Length", str(HUGE))
                    self.end_headers()
                    chunk = b"h" * 65536
                    try:
                        for _ in range(HUGE // len(chunk)):
                            self.wfile.write(chunk)
                            with origin.lock:
                                origin.huge_sent += len(chunk)
                    except OSError:
                        pass
                else:
                    self.reply(404, b"")

            do_GET = do_POST = do_PUT = do_HEAD = any

        class Quiet(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass    # a client that went away (a timeout, a refusal) is expected

        self.srv = Quiet(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.port = self.srv.server_address[1]
        self.base = "http://127.0.0.1:%d" % self.port

    def seen(self):
        with self.lock:
            return self.requests


origin = Origin()
BASE = origin.base


def tls_origin():
    """An HTTPS server on loopback with a self-signed certificate (None without the
    openssl command): the certificate must be refused."""
    import shutil
    import ssl
    import subprocess
    import tempfile
    if not shutil.which("openssl"):
        return None
    import atexit
    d = tempfile.mkdtemp(prefix="cordon-tls-")
    atexit.register(shutil.rmtree, d, True)
    key, crt = os.path.join(d, "k.pem"), os.path.join(d, "c.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", crt],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)

    def serve():
        while True:
            c, _ = lsock.accept()
            try:
                with ctx.wrap_socket(c, server_side=True) as tc:
                    tc.recv(65536)
                    tc.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            except (OSError, ssl.SSLError):
                pass
    threading.Thread(target=serve, daemon=True).start()
    return "https://127.0.0.1:%d/" % lsock.getsockname()[1]


TLS = tls_origin()


def req(conn, url, **kw):
    p = {"method": "GET", "url": url, "requestId": kw.pop("rid", "r")}
    p.update(kw)
    return conn.request("http/request", p)


def header_values(result, name):
    return [h["value"] for h in result["headers"] if h["name"] == name]


def echo_of(result):
    return json.loads(base64.b64decode(result["bodyBase64"]))


def deltas(conn, rid, until_done=True):
    """The bodyDelta notifications of rid, in order, until the one with done (read
    from the connection as they come)."""
    got = []
    while True:
        for n in list(conn.notes):
            if n.get("method") == "http/request/bodyDelta" and \
                    n["params"]["requestId"] == rid and n not in got:
                got.append(n)
        if got and got[-1]["params"]["done"] or not until_done:
            return [n["params"] for n in got]
        conn.read_msg()


def parity(s, tag):
    """What the released binary does too."""
    r = req(s, BASE + "/echo")
    res = r.get("result") or {}
    t.ok(res.get("status") == 201 and header_values(res, "x-rep") == ["a", "b"] and
         echo_of(res)["method"] == "GET",
         "[%s] buffered GET: status, repeated response headers in order, body" % tag, r)
    r = req(s, BASE + "/echo", method="POST", bodyBase64=b64(b"hello"),
             headers=[{"name": "X-A", "value": "1"}, {"name": "X-A", "value": "2"}])
    res = r.get("result") or {}
    e = echo_of(res) if res else {}
    t.ok(e.get("method") == "POST" and e.get("body") == "hello" and
         [v for k, v in e.get("headers", []) if k.lower() == "x-a"] == ["1", "2"],
         "[%s] POST with a body and a repeated request header" % tag, r)
    r = req(s, BASE + "/mixed")
    hs = [(h["name"], h["value"]) for h in (r.get("result") or {}).get("headers", [])
          if h["name"].startswith("x-")]
    t.ok(hs == [("x-a", "1"), ("x-a", "3"), ("x-b", "2")],
         "[%s] response headers: lower-case, grouped by name in first-seen order, "
         "values not UTF-8 left out" % tag, hs)
    r = req(s, BASE + "/redir")
    res = r.get("result") or {}
    t.ok(res.get("status") == 201 and echo_of(res)["method"] == "GET",
         "[%s] redirectPolicy follow (the default) follows" % tag, r)
    r = req(s, BASE + "/redir", redirectPolicy="stop")
    res = r.get("result") or {}
    t.ok(res.get("status") == 302 and header_values(res, "location") == ["/echo"] and
         res.get("bodyBase64") == "", "[%s] redirectPolicy stop returns the 302" % tag, r)
    # The client's redirects: 301, 302, 303, 307 and 308, as reqwest; others are the answer.
    for code in (300, 305, 306, 399):
        r = req(s, BASE + "/redir-code?%d" % code)
        res = r.get("result") or {}
        t.ok(res.get("status") == code and header_values(res, "x-hop") == ["1"] and
             base64.b64decode(res.get("bodyBase64", "")) == b"hop!!",
             "[%s] a %d with a Location is the answer, its body its own" % (tag, code), r)
    for code, method, want in ((301, "PUT", "GET"), (303, "POST", "GET"),
                               (307, "POST", "POST"), (308, "PUT", "PUT")):
        r = req(s, BASE + "/redir-code?%d" % code, method=method, bodyBase64=b64(b"data"),
                headers=[{"name": "Content-Type", "value": "text/x-test"}])
        res = r.get("result") or {}
        e = echo_of(res) if res.get("status") == 201 else {}
        ctype = [v for k, v in e.get("headers", []) if k.lower() == "content-type"]
        kept = want == method
        t.ok(e.get("method") == want and e.get("body") == ("data" if kept else "") and
             ctype == (["text/x-test"] if kept else []),
             "[%s] %d after %s: %s%s" % (tag, code, method, want,
                                         ", body kept" if kept else ", no body"), r)
    # Another origin (localhost for 127.0.0.1) gets no credentials; the Referer says
    # where the request came from.
    creds = [{"name": "Authorization", "value": "Bearer t"}, {"name": "Cookie", "value": "c=1"},
             {"name": "X-Other", "value": "o"}]
    for where, same in (("/echo", True), ("http://localhost:%d/echo" % origin.port, False)):
        r = req(s, BASE + "/redir-code?307&" + where, headers=creds)
        res = r.get("result") or {}
        hs = dict((k.lower(), v) for k, v in echo_of(res).get("headers", [])) \
            if res.get("status") == 201 else {}
        t.ok(hs.get("x-other") == "o" and
             (hs.get("authorization"), hs.get("cookie")) == (("Bearer t", "c=1") if same
                                                              else (None, None)) and
             hs.get("referer") == BASE + "/redir-code?307&" + where,
             "[%s] a redirect to %s origin: credentials %s, a Referer" %
             (tag, "the same" if same else "another", "kept" if same else "left out"), r)
    r = req(s, BASE + "/slow", timeoutMs=300)
    # The released binary says either, as one of its two timers fires first.
    t.ok(err_code(r) == -32603 and err_msg(r) in (
         "http/request failed: error sending request for url (%s/slow)" % BASE,
         "http/request failed: route-aware request timed out"),
         "[%s] timeoutMs: the request fails with -32603 once it passes" % tag, r)
    r = req(s, BASE + "/slow", timeoutMs=0)
    t.ok(err_code(r) == -32603 and
         err_msg(r) == "http/request failed: route-aware request timed out",
         "[%s] timeoutMs 0: timed out at once" % tag, r)
    r = req(s, BASE + "/nothing-here", method="HEAD")
    t.ok((r.get("result") or {}).get("status") == 404, "[%s] HEAD" % tag, r)

    # Streamed: the response first, then the deltas as the body comes, in order.
    for g in origin.gates:
        g.clear()
    n0 = len(s.lines)
    r = req(s, BASE + "/chunks", rid="c1", streamResponse=True)
    res = r.get("result") or {}
    t.ok(res.get("status") == 200 and res.get("bodyBase64") == "",
         "[%s] streamed: the response carries the status and an empty body" % tag, r)
    first = deltas(s, "c1", until_done=False)
    while not first:
        s.read_msg()
        first = deltas(s, "c1", until_done=False)
    t.ok(first[0] == {"requestId": "c1", "seq": 1, "deltaBase64": b64(b"one"),
                      "done": False, "error": None},
         "[%s] streamed: the first chunk comes before the body ends" % tag, first)
    lines = [json.loads(x) for x in s.lines[n0:]]
    order = [("id" in m) for m in lines if "id" in m or
             m.get("params", {}).get("requestId") == "c1"]
    t.ok(order[:1] == [True], "[%s] streamed: the response is sent before the first delta"
         % tag, order)
    origin.gates[1].set()
    origin.gates[2].set()
    got = deltas(s, "c1")
    body = b"".join(base64.b64decode(d["deltaBase64"]) for d in got)
    t.ok(body == b"onetwothree" and [d["seq"] for d in got] == list(range(1, len(got) + 1))
         and got[-1] == {"requestId": "c1", "seq": len(got), "deltaBase64": "",
                         "done": True, "error": None} and
         not any(d["done"] for d in got[:-1]),
         "[%s] streamed: seq from 1, in order, then an empty delta with done" % tag, got)
    s.notes.clear()
    r = req(s, BASE + "/big", rid="big", streamResponse=True)
    got = deltas(s, "big")
    sizes = [len(base64.b64decode(d["deltaBase64"])) for d in got]
    body = b"".join(base64.b64decode(d["deltaBase64"]) for d in got)
    t.ok(body == BIG_BODY and max(sizes) <= 1024 * 1024 and got[-1]["done"] and
         [d["seq"] for d in got] == list(range(1, len(got) + 1)),
         "[%s] streamed %d bytes: deltas of at most 1 MiB, the whole body" % (tag, BIG),
         sizes)
    s.notes.clear()

    # A duplicate requestId of a stream still going: -32602; once done, it is free.
    for g in origin.gates:
        g.clear()
    r = req(s, BASE + "/chunks", rid="dup", streamResponse=True)
    r2 = req(s, BASE + "/echo", rid="dup", streamResponse=True)
    t.ok("result" in r and err_code(r2) == -32602 and
         err_msg(r2) == "http/request streamResponse requestId `dup` is already active",
         "[%s] a duplicate active streamed requestId: -32602" % tag, r2)
    r3 = req(s, BASE + "/echo", rid="dup")
    t.ok("result" in r3, "[%s] a buffered request may reuse it" % tag, r3)
    origin.gates[1].set()
    origin.gates[2].set()
    deltas(s, "dup")
    s.notes.clear()
    r4 = req(s, BASE + "/echo", rid="dup", streamResponse=True)
    t.ok("result" in r4, "[%s] once the stream is done, its requestId is free" % tag, r4)
    deltas(s, "dup")
    s.notes.clear()

    # Bad params: the released binary's messages (-32602).
    U = BASE + "/echo"
    bad = [
        (None, "invalid type: null, expected struct HttpRequestParams"),
        ({"url": U, "requestId": "x"}, "missing field `method`"),
        ({"method": "GET", "requestId": "x"}, "missing field `url`"),
        ({"method": "GET", "url": U}, "missing field `requestId`"),
        ({"method": 5, "url": U, "requestId": "x"}, "invalid type: number, expected a string"),
        ({"method": "GET", "url": U, "requestId": 5},
         "invalid type: number, expected a string"),
        ({"method": "G ET", "url": U, "requestId": "x"},
         "http/request method is invalid: invalid HTTP method"),
        ({"method": "", "url": U, "requestId": "x"},
         "http/request method is invalid: invalid HTTP method"),
        ({"method": "GET", "url": "not a url", "requestId": "x"},
         "http/request url is invalid: relative URL without a base"),
        ({"method": "GET", "url": "http://", "requestId": "x"},
         "http/request url is invalid: empty host"),
        ({"method": "GET", "url": "http://[::1", "requestId": "x"},
         "http/request url is invalid: invalid IPv6 address"),
        ({"method": "GET", "url": "file:///etc/passwd", "requestId": "x"},
         "http/request only supports http and https URLs, got file"),
        ({"method": "GET", "url": "gopher://127.0.0.1/", "requestId": "x"},
         "http/request only supports http and https URLs, got gopher"),
        ({"method": "GET", "url": U, "requestId": "x", "headers": {}},
         "invalid type: map, expected a sequence"),
        ({"method": "GET", "url": U, "requestId": "x", "headers": None},
         "invalid type: null, expected a sequence"),
        ({"method": "GET", "url": U, "requestId": "x", "headers": [5]},
         "invalid type: number, expected struct HttpHeader"),
        ({"method": "GET", "url": U, "requestId": "x", "headers": [{"name": "X"}]},
         "missing field `value`"),
        ({"method": "GET", "url": U, "requestId": "x",
          "headers": [{"name": "Bad Name", "value": "1"}]},
         "http/request header name is invalid: invalid HTTP header name"),
        ({"method": "GET", "url": U, "requestId": "x",
          "headers": [{"name": "X", "value": "a\nb"}]},
         "http/request header value is invalid for X: failed to parse header value"),
        ({"method": "GET", "url": U, "requestId": "x", "bodyBase64": "!!"},
         "Invalid symbol 33, offset 0."),
        ({"method": "GET", "url": U, "requestId": "x", "bodyBase64": "aGVsbG8"},
         "Invalid padding"),
        ({"method": "GET", "url": U, "requestId": "x", "bodyBase64": "aGVsbG8=x"},
         "Invalid symbol 61, offset 7."),
        ({"method": "GET", "url": U, "requestId": "x", "timeoutMs": -1}, "invalid number"),
        ({"method": "GET", "url": U, "requestId": "x", "timeoutMs": "5"},
         'invalid type: string "5", expected u64'),
        ({"method": "GET", "url": U, "requestId": "x", "streamResponse": "yes"},
         'invalid type: string "yes", expected a boolean'),
        ({"method": "GET", "url": U, "requestId": "x", "redirectPolicy": "bogus"},
         "unknown variant `bogus`, expected `follow` or `stop`"),
        ({"method": "GET", "url": U, "requestId": "x", "redirectPolicy": None},
         "invalid type: null, expected string or map"),
    ]
    before = origin.seen()
    for params, msg in bad:
        r = s.request("http/request", params)
        t.ok(err_code(r) == -32602 and err_msg(r) == msg,
             "[%s] %s: -32602 %r" % (tag, json.dumps(params), msg), r)
    t.ok(origin.seen() == before, "[%s] no bad request reached the network" % tag)
    r = req(s, "http://127.0.0.1:1/")
    t.ok(err_code(r) == -32603 and err_msg(r) ==
         "http/request failed: error sending request for url (http://127.0.0.1:1/)",
         "[%s] a connection refused: -32603 'http/request failed: ...'" % tag, r)
    if TLS:
        r = req(s, TLS)
        t.ok(err_code(r) == -32603 and err_msg(r) ==
             "http/request failed: error sending request for url (%s)" % TLS,
             "[%s] https: a self-signed certificate is refused" % tag, r)
    else:
        t.skip("[%s] https: a self-signed certificate is refused" % tag,
               "no openssl command to make one")


def refused(r, what):
    return err_code(r) == -32603 and err_msg(r).startswith(
        "http/request failed: error sending request for url (") and \
        "refused by cordon serve's network policy" in err_msg(r) and what in err_msg(r)


def policy():
    # Off by default: refused after the params are checked, nothing sent.
    s = Server()
    s.handshake()
    before = origin.seen()
    r = req(s, BASE + "/echo")
    t.ok(err_code(r) == -32603 and "--allow-http-request" in err_msg(r) and
         origin.seen() == before, "off by default: -32603 naming --allow-http-request", r)
    r = req(s, "file:///etc/passwd")
    t.ok(err_code(r) == -32602, "off: bad params are still -32602", r)
    s.stop()

    # Allowed, loopback not: the address is judged after the name is resolved.
    s = Server(args=["--allow-http-request"])
    s.handshake()
    before = origin.seen()
    r = req(s, BASE + "/echo")
    t.ok(refused(r, "127.0.0.1 is a loopback address"), "loopback refused without the opt-in",
         r)
    r = req(s, "http://localhost:%d/echo" % origin.port)
    t.ok(refused(r, "loopback address"), "a name that resolves to loopback is refused", r)
    for url, what in [("http://10.1.2.3/", "private address (10.0.0.0/8)"),
                      ("http://192.168.1.1/", "private address (192.168.0.0/16)"),
                      ("http://172.16.0.1/", "private address (172.16.0.0/12)"),
                      ("http://169.254.169.254/latest/meta-data/", "link-local"),
                      ("http://100.64.0.1/", "carrier-grade NAT"),
                      ("http://0.0.0.0:%d/" % origin.port, "this network"),
                      ("http://[fd00:ec2::254]/", "unique local address"),
                      ("http://[fe80::1]/", "link-local address (fe80::/10)"),
                      ("http://[::ffff:127.0.0.1]:%d/" % origin.port, "loopback"),
                      ("http://[::ffff:169.254.169.254]/", "link-local"),
                      ("http://224.0.0.1/", "multicast")]:
        r = req(s, url, timeoutMs=60000)
        t.ok(refused(r, what), "%s refused (%s)" % (url, what), r)
    t.ok(origin.seen() == before, "nothing reached the local server")
    s.stop()

    # Loopback allowed: redirects are judged again, and the protocols stay http(s).
    s = Server(args=ALLOW)
    s.handshake()
    for target, what in [("http://10.0.0.1/", "private address"),
                         ("http://169.254.169.254/latest/meta-data/", "link-local"),
                         ("http://[fd00:ec2::254]/", "unique local address")]:
        r = req(s, BASE + "/redir-to?" + target, timeoutMs=60000)
        t.ok(refused(r, what), "a redirect to %s is refused" % target, r)
    for target in ["file:///etc/passwd", "gopher://127.0.0.1:%d/" % origin.port,
                   "cordon-nothing://127.0.0.1:%d/" % origin.port]:
        r = req(s, BASE + "/redir-to?" + target)
        t.ok(err_code(r) == -32603 and err_msg(r).startswith("http/request failed:") and
             "root:" not in json.dumps(r),
             "a redirect to %s fails (http and https only)" % target.split(":")[0], r)
    r = req(s, BASE + "/redir-to?" + target, redirectPolicy="stop")
    t.ok((r.get("result") or {}).get("status") == 302,
         "with redirectPolicy stop the redirect itself is the answer", r)
    s.stop()

    # The server's own WebSocket listener is refused even with loopback allowed.
    ns = NetServer("ws", args=ALLOW)
    c = ns.connect()
    c.handshake()
    r = req(c, "http://127.0.0.1:%d/readyz" % ns.port)
    t.ok(refused(r, "this server's own listening address"),
         "a request to the server's own listener is refused", r)
    # Its other spellings too: the IPv4-mapped form of the address it is bound to.
    r = req(c, "http://[::ffff:127.0.0.1]:%d/readyz" % ns.port)
    t.ok(refused(r, "this server's own listening address"),
         "a request to the own listener's IPv4-mapped address is refused", r)
    r = req(c, BASE + "/echo")
    t.ok((r.get("result") or {}).get("status") == 201, "another loopback port is reached", r)
    c.drop()
    ns.stop()

    # A wildcard listener is reached through any loopback address, not only lo's own.
    tokdir = tempfile.mkdtemp(prefix="cordon-http-tok-")
    tok = os.path.join(tokdir, "token")
    with open(tok, "w") as f:
        f.write("http-self-token-0123456789abcdef\n")
    os.chmod(tok, 0o600)
    ns = NetServer("ws://0.0.0.0:0", args=ALLOW + ["--auth-token-file", tok])
    c = ns.connect(token="http-self-token-0123456789abcdef")
    c.handshake()
    for host in ["127.0.0.1", "127.0.0.2", "[::ffff:127.0.0.3]"]:
        r = req(c, "http://%s:%d/readyz" % (host, ns.port))
        t.ok(refused(r, "this server's own listening address"),
             "a wildcard listener is refused through %s" % host, r)
    c.drop()
    ns.stop()
    shutil.rmtree(tokdir)


def host_address():
    """An address of this host that is in no special range (the review's case): in a
    network namespace of the test's own, 11.22.33.44 on lo, a local server bound to
    0.0.0.0 beside the server; and 11.23.5.5, which no interface has but a local
    route over 11.23.0.0/16 delivers there (AnyIP). Needs root (unshare -n) and ip."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        t.skip("an address of this host is refused", "needs root, unshare and ip")
        return
    d = tempfile.mkdtemp(prefix="cordon-http-netns-")
    os.chmod(d, 0o755)
    wrap = os.path.join(d, "in-netns.sh")
    with open(wrap, "w") as f:
        f.write("#!/bin/sh\n"
                "exec unshare -n sh -c 'ip link set lo up && ip addr add 11.22.33.44/32 "
                "dev lo && ip route add local 11.23.0.0/16 dev lo table local && "
                "{ python3 -m http.server 18080 --bind 0.0.0.0 >/dev/null 2>&1 & "
                "echo $! >%s/http.pid; } && exec \"$0\" \"$@\"' %s \"$@\"\n"
                % (d, CORDON))
    os.chmod(wrap, 0o755)
    s = Server(args=["--allow-http-request"], cordon=wrap)
    try:
        s.handshake()
        r = req(s, "http://11.22.33.44:18080/", timeoutMs=60000)
        t.ok(refused(r, "an address of this host"),
             "an address of this host is refused (its local services answer there)", r)
        r = req(s, "http://11.23.5.5:18080/", timeoutMs=60000)
        t.ok(refused(r, "an address of this host"),
             "an address only a local route delivers here (AnyIP) is refused too", r)
    finally:
        s.stop()
        # The local server lives in the namespace past the server: ended here.
        try:
            with open(os.path.join(d, "http.pid")) as f:
                os.kill(int(f.read()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        shutil.rmtree(d, ignore_errors=True)


def limits():
    """16 requests in flight per connection; a buffered body of at most 16 MiB."""
    s = Server(args=ALLOW)
    s.handshake()
    ids = [s.send_request("http/request", {"method": "GET", "url": BASE + "/hold",
                                           "requestId": "h%d" % i}) for i in range(16)]
    r = req(s, BASE + "/echo")
    t.ok(err_code(r) == -32603 and err_msg(r) == "http/request failed: this connection has "
         "16 requests in flight, cordon serve's limit", "a 17th request in flight: -32603", r)
    origin.hold.set()
    answers = [s.wait_id(i) for i in ids]
    t.ok(all((a or {}).get("result", {}).get("status") == 200 for a in answers),
         "the 16 are answered once the origin lets them go")
    r = req(s, BASE + "/echo")
    t.ok((r.get("result") or {}).get("status") == 201, "then the next one goes", r)
    r = req(s, BASE + "/over")
    t.ok(err_code(r) == -32603 and err_msg(r).startswith(
         "failed to read http/request response body: the body is over cordon serve's 16 MiB"),
         "a buffered body over 16 MiB fails the request", r)
    r = req(s, BASE + "/over", rid="o", streamResponse=True)
    got = deltas(s, "o")
    t.ok(sum(len(base64.b64decode(d["deltaBase64"])) for d in got) == 16 * 1024 * 1024 + 1,
         "streamed, the same body comes whole")
    s.stop()
    # A buffered body counts against the server's memory budget: past it, the request
    # fails. 9 MiB of one body are held by the server (a 16 MiB buffer, its status says)
    # when a second of 10 MiB comes, under a budget of 24 MiB.
    origin.hold.clear()
    s = Server(args=ALLOW + ["--max-memory", "24M"])
    s.handshake()
    first = s.send_request("http/request", {"method": "GET", "url": BASE + "/ten-then-hold",
                                            "requestId": "first"})
    used = 0
    for _ in range(6000):
        st = s.request("cordon/status", {})
        used = st.get("result", {}).get("memory", {}).get("files", 0)
        if used >= 16 << 20:
            break
        s.request("cordon/status", {})  # another round trip: the server reads meanwhile
    r = req(s, BASE + "/ten", rid="second")
    t.ok(used >= 16 << 20 and err_code(r) == -32603 and "memory budget" in err_msg(r),
         "a buffered body past --max-memory fails the request", (used, r))
    origin.hold.set()
    a = s.wait_id(first) or {}
    t.ok(a.get("result", {}).get("status") == 200, "the first, within the budget, is whole", a)
    s.stop()
    # A request body is held until the upstream has read it, which one that never
    # reads never does: it counts against the budget too (the red team held 500 MB
    # under a budget of 128 MiB this way).
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen(4)  # never accepted, never read
    url = "http://127.0.0.1:%d/" % sink.getsockname()[1]
    s = Server(args=ALLOW + ["--max-memory", "24M"])
    s.handshake()
    held = s.send_request("http/request", {
        "method": "POST", "url": url, "requestId": "held",
        "bodyBase64": base64.b64encode(b"h" * (6 << 20)).decode()})
    st = s.request("cordon/status", {})
    files = st.get("result", {}).get("memory", {}).get("files", 0)
    t.ok(files >= 6 << 20, "a request body the upstream does not read is charged to the budget",
         (files, st))
    r = s.request("http/request", {"method": "POST", "url": url, "requestId": "more",
                                   "bodyBase64": base64.b64encode(b"m" * (20 << 20)).decode()})
    t.ok(err_code(r) == -32603 and err_msg(r) == (
         "http/request failed: the request body (20971520 bytes) exceeds what is left of the "
         "server's memory budget (--max-memory)"),
         "a body past what is left of --max-memory is refused", r)
    s.stop()
    sink.close()


def vm_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def back_pressure():
    """A client that stops reading a streamed body: the transfer is paused, what the
    origin could send stays bounded, the server's memory too, and another client is
    served meanwhile; then the reader comes back and gets the whole body."""
    hooks = Hooks()
    ns = NetServer("unix", args=ALLOW + ["--max-queued-bytes", "1M"], extra_env=hooks.env)
    a = ns.connect()
    a.handshake()
    rss0 = vm_rss_kib(ns.server_pid)
    a.send_request("http/request", {"method": "GET", "url": BASE + "/huge",
                                    "requestId": "huge", "streamResponse": True})
    hooks.wait("http-paused")
    b = ns.connect()
    b.handshake()
    r = req(b, BASE + "/echo")
    t.ok((r.get("result") or {}).get("status") == 201,
         "another client's request is answered while the first is held", r)
    r = b.start("p", ["/bin/echo", "hi"])
    t.ok("result" in r, "and it can start a process", r)
    with origin.lock:
        sent = origin.huge_sent
    rss = vm_rss_kib(ns.server_pid)
    t.ok(sent < HUGE // 2, "the origin could send %d of %d bytes: the transfer is held"
         % (sent, HUGE))
    t.ok(rss - rss0 < 64 * 1024, "the server's memory grew by %d KiB only" % (rss - rss0))
    b.drop()
    # The reader comes back: the transfer resumes, everything arrives, in order.
    total, seq, done = 0, 0, False
    while not done:
        m = a.read_msg()
        if m.get("method") != "http/request/bodyDelta":
            continue
        d = m["params"]
        seq += 1
        if d["seq"] != seq:
            break
        total += len(base64.b64decode(d["deltaBase64"]))
        done = d["done"]
        a.notes.clear()
    t.ok(done and total == HUGE and hooks.seen("http-resumed"),
         "resumed: all %d bytes in order (%d deltas)" % (total, seq))
    a.drop()
    ns.stop()


if CONTROL:
    s = Server()
    s.handshake()
    parity(s, "stdio")
    s.stop()
    origin.release.set()
    t.done()
    sys.exit(0)

for loop in ("epoll", "poll"):
    s = Server(loop=loop, args=ALLOW)
    s.handshake()
    if loop == "epoll":
        r = Server(args=ALLOW)
        r2 = req(r, BASE + "/echo")
        t.ok(err_code(r2) == -32600 and
             err_msg(r2) == "client must call initialize before using http methods",
             "before initialize: -32600", r2)
        r.stop()
    parity(s, loop)
    s.stop()
policy()
host_address()
limits()
back_pressure()
origin.release.set()
t.done()
