#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# The managed network's filtering proxy alone (`cordon proxy`, internal),
# with real sockets on loopback: upstream servers started here (HTTP, a
# TCP echo, HTTPS with a self-signed certificate when openssl is there),
# the proxy's DNS replaced by the test hook CORDON_TEST_PROXY_RESOLVE
# (which only says where a name leads: the policy still judges the name
# and every address, so loopback needs --allow-cidr 127.0.0.1 here).
# Synchronised on events: the proxy's answers and its audit lines (JSON on
# stdout, one per connection at its close). TAP.

import http.server
import json
import os
import queue
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import CORDON, Tap  # noqa: E402

t = Tap()
if not os.access(CORDON, os.X_OK):
    t.skip_all("no cordon at %s" % CORDON)

work = tempfile.mkdtemp(prefix="cordon-proxy-")
WAIT = 60.0


# ---------------------------------------------------------------- upstreams

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        out = json.dumps({"method": self.command, "path": self.path,
                          "host": self.headers.get("Host"),
                          "connection": self.headers.get("Connection"),
                          "proxy": self.headers.get("Proxy-Connection"),
                          "secret": self.headers.get("X-Secret"),
                          "kept": self.headers.get("X-Kept"),
                          "body": body.decode()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_HEAD = do_OPTIONS = do_PUT = reply

    def log_message(self, *a):
        pass


def http_server(tls_ctx=None):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls_ctx:
        srv.socket = tls_ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def echo_server():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(256)

    def serve(c):
        with c:
            while True:
                d = c.recv(65536)
                if not d:
                    return
                c.sendall(d)

    def loop():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return ls


HTTP = http_server()
HPORT = HTTP.server_address[1]
ECHO = echo_server()
EPORT = ECHO.getsockname()[1]

TLS = None
if shutil.which("openssl"):
    crt, key = os.path.join(work, "crt.pem"), os.path.join(work, "key.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=ok.test",
                        "-addext", "subjectAltName=DNS:ok.test"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode == 0:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        TLS = http_server(ctx)
        TLS_PORT = TLS.server_address[1]

RESOLVE = ",".join([
    "ok.test=127.0.0.1", "www.ok.test=127.0.0.1", "deep.sub.ok.test=127.0.0.1",
    "denied.test=127.0.0.1", "evil.ok.test=127.0.0.1", "unlisted.test=127.0.0.1",
    "lo.test=127.0.0.2", "private.test=10.0.0.1", "meta.test=169.254.169.254",
    "meta6.test=fd00:ec2::254", "mapped.test=::ffff:127.0.0.2",
    "mixed.test=169.254.169.254+127.0.0.1", "cgnat.test=100.64.0.1",
    "self.test=127.0.0.1",
])


# ---------------------------------------------------------------- the proxy

class Proxy:
    def __init__(self, *args, text=False):
        env = dict(os.environ, CORDON_TEST_PROXY_RESOLVE=RESOLVE)
        env.pop("JOURNAL_STREAM", None)
        self.args = list(args)
        cmd = [CORDON, "proxy", "--listen", "127.0.0.1:0"] + self.args
        if not text:
            cmd.append("--json-audit")
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE if text else subprocess.DEVNULL, env=env)
        line = self.p.stdout.readline().decode().strip()
        if not line:
            print("Bail out! `cordon proxy %s` did not start (status %s)"
                  % (" ".join(self.args), self.p.wait()))
            sys.exit(1)
        host, _, port = line.rpartition(":")
        self.port = int(port)
        self.audit = queue.Queue()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            self.audit.put(json.loads(line))

    def next_audit(self):
        return self.audit.get(timeout=WAIT)

    def stop(self):
        self.p.kill()
        self.p.wait()

    def url(self):
        return "http://127.0.0.1:%d" % self.port


def connect(p):
    s = socket.create_connection(("127.0.0.1", p.port), timeout=WAIT)
    return s


def read_head(s):
    """Read up to the blank line of an HTTP head (the proxy's answer), return it as text."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(1)
        if not d:
            break
        buf += d
    return buf.decode(errors="replace")


def read_all(s):
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            break
        if not d:
            break
        out += d
    return out.decode(errors="replace")


def ask(p, raw):
    """Send raw bytes, return the whole answer (the proxy closes after it)."""
    with connect(p) as s:
        s.sendall(raw)
        return read_all(s)


def status_of(text):
    try:
        return int(text.split(" ", 2)[1])
    except (IndexError, ValueError):
        return None


def body_of(text):
    return text.split("\r\n\r\n", 1)[1] if "\r\n\r\n" in text else ""


P = Proxy("--allow-domain", "ok.test", "--allow-domain", "*.ok.test",
          "--deny-domain", "evil.ok.test", "--allow-domain", "lo.test",
          "--allow-domain", "private.test", "--allow-domain", "meta.test",
          "--allow-domain", "meta6.test", "--allow-domain", "mapped.test",
          "--allow-domain", "mixed.test", "--allow-domain", "cgnat.test",
          "--allow-domain", "self.test", "--allow-domain", "nowhere.test",
          "--allow-cidr", "127.0.0.1", "--socks5", "--header-timeout-ms", "1500")
RULE_OK = "allow-domain ok.test, allow-cidr 127.0.0.1/32"

# ---- CONNECT to an allowed name: a tunnel, exact audit line ----
with connect(P) as s:
    s.sendall(b"CONNECT ok.test:%d HTTP/1.1\r\nHost: ok.test:%d\r\n\r\n" % (EPORT, EPORT))
    head = read_head(s)
    t.eq(head, "HTTP/1.1 200 Connection established\r\n\r\n", "CONNECT ok.test: 200")
    s.sendall(b"ping" * 1000)
    got = b""
    while len(got) < 4000:
        got += s.recv(65536)
    t.eq(got, b"ping" * 1000, "the tunnel carries bytes both ways")
a = P.next_audit()
t.eq(a, {"event": "proxy", "decision": "allow", "protocol": "http", "method": "CONNECT",
         "host": "ok.test", "port": EPORT, "address": "127.0.0.1", "rule": RULE_OK,
         "status": 200, "sent": 4000, "received": 4000},
     "audit: the tunnel's line, with the bytes both ways")

# ---- plain HTTP, absolute-form ----
ans = ask(P, b"GET http://ok.test:%d/a/b?c=d HTTP/1.1\r\nHost: ok.test:%d\r\n"
          b"Proxy-Connection: keep-alive\r\n\r\n" % (HPORT, HPORT))
t.eq(status_of(ans), 200, "plain GET through the proxy: 200")
got = json.loads(body_of(ans) or "{}")
t.eq((got.get("path"), got.get("host"), got.get("connection"), got.get("proxy")),
     ("/a/b?c=d", "ok.test:%d" % HPORT, "close", None),
     "the upstream gets the origin form, the Host, Connection: close, no Proxy-Connection")
a = P.next_audit()
t.eq((a["decision"], a["method"], a["host"], a["port"], a["rule"], a["status"]),
     ("allow", "GET", "ok.test", HPORT, RULE_OK, None), "audit: the plain request's line")
t.ok(a["received"] == len(ans) and a["sent"] > 0, "audit: bytes of the plain request", a)
# A field the client's Connection field lists is hop-by-hop: not forwarded (RFC 9110, 7.6.1).
ans = ask(P, b"GET http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test:%d\r\nX-Secret: 1\r\n"
          b"Connection: keep-alive, x-secret\r\nX-Kept: 2\r\n\r\n" % (HPORT, HPORT))
got = json.loads(body_of(ans) or "{}")
t.eq((status_of(ans), got.get("secret"), got.get("kept"), got.get("connection")),
     (200, None, "2", "close"), "a field listed in Connection is not forwarded, the others are")
P.next_audit()

ans = ask(P, b"POST http://www.ok.test:%d/p HTTP/1.1\r\nHost: www.ok.test:%d\r\n"
          b"Content-Length: 5\r\n\r\nhello" % (HPORT, HPORT))
got = json.loads(body_of(ans) or "{}")
t.eq((status_of(ans), got.get("method"), got.get("body")), (200, "POST", "hello"),
     "a POST body of Content-Length bytes is forwarded (*.ok.test)")
P.next_audit()

# curl and urllib through HTTP_PROXY / HTTPS_PROXY
env = dict(os.environ, http_proxy=P.url(), https_proxy=P.url(), HTTP_PROXY=P.url(),
           HTTPS_PROXY=P.url(), no_proxy="", NO_PROXY="")
if shutil.which("curl"):
    r = subprocess.run(["curl", "-sS", "http://deep.sub.ok.test:%d/curl" % HPORT],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)
    t.ok(r.returncode == 0 and b'"/curl"' in r.stdout, "curl with HTTP_PROXY", r)
    P.next_audit()
    if TLS:
        r = subprocess.run(["curl", "-sS", "--cacert", crt, "https://ok.test:%d/tls" % TLS_PORT],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=WAIT)
        t.ok(r.returncode == 0 and b'"/tls"' in r.stdout,
             "curl with HTTPS_PROXY: TLS through CONNECT, the certificate checked", r)
        a = P.next_audit()
        t.eq((a["method"], a["host"], a["port"], a["status"]), ("CONNECT", "ok.test", TLS_PORT,
                                                               200), "audit: curl's tunnel")
    else:
        t.skip("curl with HTTPS_PROXY", "no openssl for a certificate")
        t.skip("audit: curl's tunnel", "no openssl")
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                        "http://denied.test:%d/" % HPORT], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=WAIT)
    t.eq(r.stdout, b"403", "curl: a name not allowed gets 403")
    P.next_audit()
    r = subprocess.run(["curl", "-sS", "-x", "socks5h://127.0.0.1:%d" % P.port,
                        "http://ok.test:%d/socks" % HPORT], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=WAIT)
    t.ok(r.returncode == 0 and b'"/socks"' in r.stdout, "curl through socks5h", r)
    P.next_audit()
else:
    for d in ("curl with HTTP_PROXY", "curl with HTTPS_PROXY", "audit: curl's tunnel",
              "curl: 403", "curl through socks5h"):
        t.skip(d, "no curl")

opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": P.url()}))
with opener.open("http://ok.test:%d/urllib" % HPORT, timeout=WAIT) as resp:
    t.ok(resp.status == 200 and json.loads(resp.read())["path"] == "/urllib",
         "Python urllib through the proxy")
P.next_audit()
try:
    opener.open("http://denied.test:%d/" % HPORT, timeout=WAIT)
    t.not_ok("urllib: a name not allowed is refused")
except urllib.error.HTTPError as e:
    t.eq((e.code, e.read().decode()),
         (403, "cordon proxy: denied.test is not allowed: no allow-domain pattern matches\n"),
         "urllib: a name not allowed gets 403 with the rule")
P.next_audit()

# ---- refusals by the policy: 403 with the rule ----
ans = ask(P, b"CONNECT evil.ok.test:443 HTTP/1.1\r\n\r\n")
t.eq((status_of(ans), body_of(ans)),
     (403, "cordon proxy: evil.ok.test is not allowed: deny-domain evil.ok.test\n"),
     "deny wins over *.ok.test: 403 naming the rule")
a = P.next_audit()
t.eq(a, {"event": "proxy", "decision": "deny", "protocol": "http", "method": "CONNECT",
         "host": "evil.ok.test", "port": 443, "address": None,
         "rule": "deny-domain evil.ok.test", "status": 403, "sent": 0, "received": 0},
     "audit: the denial's line")

ans = ask(P, b"CONNECT unlisted.test:443 HTTP/1.1\r\n\r\n")
t.eq(status_of(ans), 403, "the resolver hook narrows only: a mapped name still needs a rule")
P.next_audit()
ans = ask(P, b"CONNECT nowhere.test:443 HTTP/1.1\r\n\r\n")
t.ok(status_of(ans) == 502 and "does not resolve" in ans, "an allowed name that does not "
     "resolve: 502", ans)
P.next_audit()

with connect(P) as s:
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % EPORT)
    t.eq(read_head(s), "HTTP/1.1 200 Connection established\r\n\r\n",
         "an IP literal inside an allow-cidr: allowed")
t.eq(P.next_audit()["rule"], "allow-cidr 127.0.0.1/32", "audit: the CIDR that allowed it")
for target, want in [("127.0.0.2:80", "127.0.0.2: an IP address is refused unless an "
                      "allow-cidr covers it"),
                     ("[::1]:80", "::1: an IP address is refused"),
                     ("169.254.169.254:80", "169.254.169.254: an IP address is refused"),
                     ("8.8.8.8:443", "8.8.8.8: an IP address is refused")]:
    ans = ask(P, b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
    t.ok(status_of(ans) == 403 and want in ans, "IP literal %s refused" % target, ans)
    a = P.next_audit()
    t.eq(a["rule"], "ip-literal (no allow-cidr)", "audit: the IP literal's rule")

for name, want in [("lo.test", "lo.test resolves to 127.0.0.2, a loopback address"),
                   ("private.test", "resolves to 10.0.0.1, a private address"),
                   ("meta.test", "resolves to 169.254.169.254, a link-local address "
                    "(169.254.0.0/16, where cloud metadata services are)"),
                   ("meta6.test", "resolves to fd00:ec2::254, a unique local address"),
                   ("mapped.test", "resolves to ::ffff:7f00:2, a loopback address"),
                   ("cgnat.test", "carrier-grade NAT")]:
    ans = ask(P, b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (name.encode(), EPORT))
    t.ok(status_of(ans) == 403 and want in ans, "%s: refused after the lookup" % name, ans)
    a = P.next_audit()
    t.ok(a["rule"].startswith("address ") and a["address"], "audit names the address", a)

# a name with a refused and an allowed address: the allowed one, checked, is used
with connect(P) as s:
    s.sendall(b"CONNECT mixed.test:%d HTTP/1.1\r\n\r\n" % EPORT)
    t.eq(read_head(s), "HTTP/1.1 200 Connection established\r\n\r\n",
         "of a name's addresses, only a checked one is connected to")
a = P.next_audit()
t.eq(a["address"], "127.0.0.1", "audit: the address connected to")

ans = ask(P, b"CONNECT self.test:%d HTTP/1.1\r\n\r\n" % P.port)
t.ok(status_of(ans) == 403 and "the proxy's own listening address" in ans,
     "CONNECT to the proxy itself is refused (even inside an allowed CIDR)", ans)
P.next_audit()

# ---- malformed and ambiguous requests: 400 ----
bad = [
    ("forged Host", b"GET http://ok.test:%d/ HTTP/1.1\r\nHost: denied.test\r\n\r\n" % HPORT,
     "a Host field that does not name the request target"),
    ("Host with another port", b"GET http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test:1\r\n\r\n"
     % HPORT, "a Host field that does not name"),
    ("CONNECT with a forged Host", b"CONNECT ok.test:%d HTTP/1.1\r\nHost: denied.test:%d\r\n\r\n"
     % (EPORT, EPORT), "a Host field that does not name"),
    ("two Host fields", b"GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nHost: ok.test\r\n\r\n",
     "more than one Host field"),
    ("no Host field", b"GET http://ok.test/ HTTP/1.1\r\n\r\n", "no Host field"),
    ("Content-Length and Transfer-Encoding", b"POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n"
     b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     "both Content-Length and Transfer-Encoding"),
    ("Content-Lengths that differ", b"POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n"
     b"Content-Length: 4\r\nContent-Length: 5\r\n\r\nhello", "Content-Length fields that differ"),
    ("a malformed Content-Length", b"POST http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n"
     b"Content-Length: +4\r\n\r\nabcd", "a malformed Content-Length"),
    ("obs-fold", b"GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\nX-A: a\r\n b\r\n\r\n",
     "obs-fold"),
    ("whitespace before the colon", b"GET http://ok.test/ HTTP/1.1\r\nHost : ok.test\r\n\r\n",
     "a malformed header name"),
    ("a bare LF", b"GET http://ok.test/ HTTP/1.1\nHost: ok.test\n\n", "CR or LF"),
    ("origin-form", b"GET / HTTP/1.1\r\nHost: ok.test\r\n\r\n", "not a proxy request"),
    ("https:// absolute-form", b"GET https://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n\r\n",
     "TLS goes through CONNECT"),
    ("user information", b"GET http://u@ok.test/ HTTP/1.1\r\nHost: ok.test\r\n\r\n",
     "user information"),
    ("HTTP/2.0", b"GET http://ok.test/ HTTP/2.0\r\nHost: ok.test\r\n\r\n", "not HTTP/1.1"),
    ("CONNECT without a port", b"CONNECT ok.test HTTP/1.1\r\n\r\n", "HOST:PORT"),
    ("a non-ASCII target", b"CONNECT b\xc3\xbccher.test:443 HTTP/1.1\r\n\r\n",
     "a malformed request target"),
    ("a legacy IPv4 form", b"CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", "numeric host name"),
    ("a hex IPv4 form", b"CONNECT 0x7f000001:443 HTTP/1.1\r\n\r\n", "legacy form"),
]
for desc, raw, want in bad:
    ans = ask(P, raw)
    t.ok(status_of(ans) == 400 and want in ans, "400: %s" % desc, ans)
    a = P.next_audit()
    t.ok(a["decision"] == "deny" and a["status"] == 400, "audit: %s" % desc, a)

ans = ask(P, b"POST http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test:%d\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % (HPORT, HPORT))
t.eq(status_of(ans), 411, "a chunked request body: 411 (Content-Length required)")
P.next_audit()

# A method of 33 bytes would crowd the host and rule out of the audit line.
ans = ask(P, b"%s http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test:%d\r\n\r\n"
          % (b"G" * 33, HPORT, HPORT))
a = P.next_audit()
t.ok(status_of(ans) == 501 and "a method longer than 32 bytes" in ans and a["decision"] == "deny",
     "a method of 33 bytes: 501, denied", (ans, a))
ans = ask(P, b"%s http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test:%d\r\n\r\n"
          % (b"G" * 32, HPORT, HPORT))
a = P.next_audit()
t.ok(a["decision"] == "allow" and a["host"] == "ok.test" and "Unsupported method" in ans,
     "a method of 32 bytes goes on to the rules (and the upstream refuses it)", (ans, a))

# ---- 1 MB of head: 431, and the proxy keeps serving ----
with connect(P) as s:
    s.sendall(b"GET http://ok.test/ HTTP/1.1\r\nHost: ok.test\r\n")
    try:
        s.sendall(b"X-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    ans = read_all(s)
t.ok(status_of(ans) == 431 and "larger than 32768 bytes" in ans, "1 MB head: 431", ans[:200])
P.next_audit()
ans = ask(P, b"GET http://ok.test:%d/after HTTP/1.1\r\nHost: ok.test:%d\r\n\r\n" % (HPORT, HPORT))
t.eq(status_of(ans), 200, "served after the 431")
P.next_audit()

# ---- garbage: random heads (seeded), each answered or dropped; the proxy keeps serving ----
import random  # noqa: E402
rnd = random.Random(18)
pieces = [b"GET ", b"CONNECT ", b"http://", b"ok.test", b":", b"%d" % HPORT, b"/", b" HTTP/1.1",
          b"\r\n", b"\n", b"\r", b"Host: ok.test", b"Content-Length: 3", b"Transfer-Encoding: x",
          b" ", b"\t", b"\x00", b"\xff", b"\x05", b"[::1]", b"@", b"*", b"..", b"\r\n\r\n"]
answered, odd = 0, []
for i in range(300):
    raw = b"".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 20))) + b"\r\n\r\n"
    with connect(P) as s:
        s.sendall(raw)
        ans = read_all(s)
    # an HTTP answer; a tunnel's (200, then what the upstream says); a SOCKS5 refusal
    if status_of(ans) is not None or (raw[0] == 5 and ans[:1] == "\x05"):
        answered += 1
    else:
        odd.append((raw, ans))
t.eq((answered, odd[:3]), (300, []), "300 random heads: each answered")
# one audit line per connection: exactly 300 (in the order the connections closed)
audits = [P.next_audit() for i in range(300)]
t.ok(all(a["decision"] in ("allow", "deny") for a in audits), "audit: a line for each")
ans = ask(P, b"GET http://ok.test:%d/marker HTTP/1.1\r\nHost: ok.test:%d\r\n\r\n" % (HPORT, HPORT))
t.eq(status_of(ans), 200, "served after the garbage")
P.next_audit()

# ---- slowloris: a head that never ends times out; the others are served meanwhile ----
slow = connect(P)
slow.sendall(b"GET http://ok.test/ HTTP/1.1\r\nHo")
ans = ask(P, b"GET http://ok.test:%d/fast HTTP/1.1\r\nHost: ok.test:%d\r\n\r\n" % (HPORT, HPORT))
t.eq(status_of(ans), 200, "served while a slow head waits")
a1 = P.next_audit()
ans = read_all(slow)
slow.close()
t.ok(status_of(ans) == 408 and "not complete in time" in ans, "the slow head: 408", ans)
a2 = P.next_audit()
t.eq((a1["status"], a2["status"], a2["rule"]), (None, 408, "header timeout"),
     "audit: the fast request, then the timeout")

# ---- SOCKS5 ----


def socks(p, host, port, atyp=3):
    s = connect(p)
    s.sendall(b"\x05\x01\x00")
    greet = s.recv(2)
    if atyp == 3:
        req = b"\x05\x01\x00\x03" + bytes([len(host.encode())]) + host.encode()
    else:
        req = b"\x05\x01\x00\x01" + socket.inet_aton(host)
    s.sendall(req + struct.pack(">H", port))
    rep = b""
    while len(rep) < 10:
        d = s.recv(10 - len(rep))
        if not d:
            break
        rep += d
    return s, greet, rep


s, greet, rep = socks(P, "ok.test", EPORT)
t.eq((greet, rep[:2]), (b"\x05\x00", b"\x05\x00"), "SOCKS5 to an allowed name: success")
s.sendall(b"socks!")
t.eq(s.recv(100), b"socks!", "SOCKS5 tunnel carries bytes")
s.close()
a = P.next_audit()
t.eq((a["protocol"], a["decision"], a["host"], a["status"], a["sent"], a["received"]),
     ("socks5", "allow", "ok.test", 0, 6, 6), "audit: the SOCKS5 line")
s, greet, rep = socks(P, "denied.test", EPORT)
s.close()
t.eq(rep[:2], b"\x05\x02", "SOCKS5 to a name not allowed: not allowed by ruleset")
t.eq(P.next_audit()["rule"], "no allow-domain pattern matches", "audit: the SOCKS5 denial")
s, greet, rep = socks(P, "127.0.0.2", EPORT, atyp=1)
s.close()
t.eq(rep[:2], b"\x05\x02", "SOCKS5 to an IP literal outside every CIDR: refused")
P.next_audit()

s, greet, rep = socks(P, "b\u00fccher.test", EPORT)
s.close()
t.eq(rep[:2], b"\x05\x02", "SOCKS5 to a name that is not ASCII: refused")
a = P.next_audit()
t.ok("punycode" in a["rule"], "audit: punycode asked for", a)

# ---- hostile SOCKS5 clients: exact reply codes, an audit line each, the proxy serves on ----


def ask_bytes(p, raw):
    """Send raw bytes, return every byte of the answer (the proxy closes after it)."""
    with connect(p) as s:
        s.sendall(raw)
        out = b""
        while True:
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                break
            if not d:
                break
            out += d
        return out


GREET = b"\x05\x01\x00"
REQ_OK = b"\x05\x01\x00\x03\x07ok.test" + struct.pack(">H", EPORT)
for raw, want, rule, what in (
        (GREET + b"\x05\x02\x00\x03\x07ok.test\x00\x15", b"\x05\x07",
         "SOCKS5: BIND is not supported (CONNECT only)", "BIND: command not supported"),
        (GREET + b"\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00", b"\x05\x07",
         "SOCKS5: UDP ASSOCIATE is not supported (CONNECT only)",
         "UDP ASSOCIATE: command not supported"),
        (GREET + b"\x05\x01\x00\x02\x00\x00", b"\x05\x08",
         "SOCKS5: an unknown address type", "an unknown address type: not supported"),
        (GREET + b"\x04\x01\x00\x03", b"\x05\x01",
         "SOCKS5: a request that is not version 5", "a request of version 4: general failure"),
        (GREET + b"\x05\x01\x07\x03", b"\x05\x01",
         "SOCKS5: a request whose reserved byte is not 0", "a reserved byte set: general failure"),
        (GREET + b"\x05\x01\x00\x03\x00\x00\x50", b"\x05\x01",
         "SOCKS5: an empty domain name", "an empty name: general failure"),
        (GREET + b"\x05\x01\x00\x03\x07ok.test\x00\x00", b"\x05\x01", "port 0",
         "port 0: general failure"),
        (GREET + b"\x05\x01\x00\x04" + socket.inet_pton(socket.AF_INET6, "::1") +
         struct.pack(">H", EPORT), b"\x05\x02", "ip-literal (no allow-cidr)",
         "an IPv6 literal outside every CIDR: not allowed"),
        (GREET + b"\x05\x01\x00\x03\x09127.0.0.2" + struct.pack(">H", EPORT), b"\x05\x02",
         "ip-literal (no allow-cidr)", "an IP literal sent as a name: not allowed"),
        (GREET + b"\x05\x01\x00\x03\x0f127.0.0.2\x00x.com" + struct.pack(">H", EPORT),
         b"\x05\x02", "SOCKS5: the target is a name with a NUL byte",
         "a name with a NUL byte (an address before it): not allowed"),
        (GREET + b"\x05\x01\x00\x03\x09ok.test\x00x" + struct.pack(">H", EPORT),
         b"\x05\x02", "SOCKS5: the target is a name with a NUL byte",
         "a name with a NUL byte (an allowed name before it): not allowed"),
        (b"\x05\x02\x01\x02", b"\x05\xff",
         "no method cordon accepts (only 0x00, no authentication)",
         "no acceptable method: 0xff"),
        (b"\x05\x00", b"\x05\xff", "no method cordon accepts (only 0x00, no authentication)",
         "a greeting with no method: 0xff")):
    ans = ask_bytes(P, raw)
    a = P.next_audit()
    # a refused greeting gets the method reply alone; a refused request, after "05 00",
    # the 10-byte reply with the code
    exp = want if want == b"\x05\xff" else b"\x05\x00" + want + b"\x00\x01" + bytes(6)
    t.ok(ans == exp and a["decision"] == "deny" and a["protocol"] == "socks5" and
         a["rule"] == rule and a["status"] == want[1], "SOCKS5 %s" % what, (ans, a))
ans = ask_bytes(P, GREET + b"\x05\x02\x00\x03\x07ok.test\x00\x15")
a_bind = P.next_audit()
t.eq((a_bind["method"], a_bind["host"], a_bind["port"]), ("BIND", "ok.test", 21),
     "audit: a refused BIND names its command and target")

# greeting and request in one write, and the request one byte at a time
def recv_n(s, n):
    out = b""
    while len(out) < n:
        d = s.recv(n - len(out))
        if not d:
            break
        out += d
    return out


s = connect(P)
s.sendall(GREET + REQ_OK)
t.eq(recv_n(s, 12), b"\x05\x00" + b"\x05\x00\x00\x01" + bytes(6),
     "greeting and request in one write")
s.close()
P.next_audit()
s = connect(P)
s.sendall(GREET)
t.eq(s.recv(2), b"\x05\x00", "greeting answered")
for i in range(len(REQ_OK)):
    s.sendall(REQ_OK[i:i + 1])
t.eq(s.recv(10)[:2], b"\x05\x00", "a request sent byte by byte")
s.close()
P.next_audit()

# truncated greetings and requests: the client goes away, nothing is decided, nothing breaks
for raw in (b"\x05", b"\x05\x03\x00", GREET + b"\x05\x01", GREET + REQ_OK[:9]):
    with connect(P) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        read_all(s)
# a greeting that never ends: refused at the header timeout, others served meanwhile
slow = connect(P)
slow.sendall(b"\x05\x02\x00")
s, greet, rep = socks(P, "ok.test", EPORT)
t.eq(rep[:2], b"\x05\x00", "served while a SOCKS5 greeting stalls and after truncated ones")
s.close()
t.eq(P.next_audit()["decision"], "allow", "audit: only the served one so far")
t.eq(recv_n(slow, 3), b"\x05\xff", "the stalled greeting: refused at the header timeout")
slow.close()
t.eq(P.next_audit()["rule"], "header timeout", "audit: the stalled greeting's timeout")

# 10k SOCKS5 clients past the cap while 49 stalled greetings and a tunnel hold it: each
# refused (the cap answers before reading, in HTTP), the tunnel still carries bytes
CS = Proxy("--allow-domain", "ok.test", "--allow-cidr", "127.0.0.1", "--max-connections", "50",
           "--header-timeout-ms", "600000", "--socks5")
stalled = []
for i in range(49):
    st = connect(CS)
    st.sendall(b"\x05\x01")
    stalled.append(st)
tun, greet, rep = socks(CS, "ok.test", EPORT)
t.eq(rep[:2], b"\x05\x00", "a SOCKS5 tunnel beside 49 stalled greetings: at the cap")
refused = other = 0
for i in range(10000):
    try:
        with socket.create_connection(("127.0.0.1", CS.port), timeout=WAIT) as s:
            s.sendall(GREET + REQ_OK)
            ans = read_all(s)
    except OSError:
        ans = ""
    if status_of(ans) == 503:
        refused += 1
    else:
        other += 1
t.eq((refused, other), (10000, 0), "10000 SOCKS5 clients past the cap: each refused")
n503 = sum(1 for i in range(10000) if CS.next_audit()["status"] == 503)
t.eq(n503, 10000, "audit: a line per refusal")
tun.sendall(b"still")
t.eq(tun.recv(100), b"still", "the SOCKS5 tunnel held through it all still works")
tun.close()
t.eq(CS.next_audit()["sent"], 5, "its close is audited")
for st in stalled:
    st.close()
s, greet, rep = socks(CS, "ok.test", EPORT)
t.eq(rep[:2], b"\x05\x00", "once the stalled clients left, SOCKS5 is served again")
s.close()
CS.stop()

P2 = Proxy("--allow-domain", "ok.test", "--allow-cidr", "127.0.0.1")
ans = ask(P2, b"\x05\x01\x00")
t.ok(status_of(ans) == 400 and "SOCKS5 is not enabled" in ans, "SOCKS5 off: refused", ans)
P2.next_audit()

# ---- limited mode ----
L = Proxy("--allow-domain", "ok.test", "--allow-cidr", "127.0.0.1", "--mode", "limited",
          "--socks5")
for m in (b"GET", b"HEAD", b"OPTIONS"):
    ans = ask(L, m + b" http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test:%d\r\n\r\n" % (HPORT, HPORT))
    t.eq(status_of(ans), 200, "limited: %s allowed" % m.decode())
    L.next_audit()
ans = ask(L, b"POST http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test:%d\r\nContent-Length: 0\r\n\r\n"
          % (HPORT, HPORT))
t.ok(status_of(ans) == 403 and "mode limited: method POST is refused" in ans,
     "limited: POST refused", ans)
t.eq(L.next_audit()["rule"], "mode limited", "audit: limited mode's rule")
for field in (b"X-HTTP-Method-Override", b"x-http-method", b"X-Method-Override"):
    ans = ask(L, b"GET http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test:%d\r\n%s: DELETE\r\n\r\n"
              % (HPORT, HPORT, field))
    t.ok(status_of(ans) == 403 and "a method-override field" in ans,
         "limited: GET with %s refused (the server may act on that method)" % field.decode(),
         ans)
    L.next_audit()
ans = ask(L, b"CONNECT ok.test:%d HTTP/1.1\r\n\r\n" % EPORT)
t.ok(status_of(ans) == 403 and "tunnels (CONNECT, SOCKS5) are refused" in ans,
     "limited: CONNECT refused (the proxy cannot see inside TLS)", ans)
L.next_audit()
s, greet, rep = socks(L, "ok.test", EPORT)
s.close()
t.eq(rep[:2], b"\x05\x02", "limited: SOCKS5 refused")
L.next_audit()

# ---- the text audit line (journald-friendly, as the server's logs) ----
T = Proxy("--allow-domain", "ok.test", "--allow-cidr", "127.0.0.1", text=True)
ans = ask(T, b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
line = T.p.stderr.readline().decode()
T.stop()
t.eq(line, 'cordon: proxy: deny CONNECT denied.test:443 address=- rule="no '
     'allow-domain pattern matches" status=403 sent=0 received=0\n', "the text audit line")

# ---- in the journal: denied decisions past 100 in 10 s are counted, not logged ----
# The proxy takes a pipe whose device and inode JOURNAL_STREAM names for the
# journal, as it does under systemd.
jr, jw = os.pipe()
jst = os.fstat(jw)
J = subprocess.Popen([CORDON, "proxy", "--listen", "127.0.0.1:0", "--allow-domain", "ok.test",
                      "--allow-cidr", "127.0.0.1"], stdout=subprocess.PIPE, stderr=jw,
                     stdin=subprocess.DEVNULL,
                     env=dict(os.environ, CORDON_TEST_PROXY_RESOLVE=RESOLVE,
                              JOURNAL_STREAM="%d:%d" % (jst.st_dev, jst.st_ino)))
os.close(jw)
J.port = int(J.stdout.readline().decode().strip().rpartition(":")[2])
jlines = queue.Queue()
threading.Thread(target=lambda: [jlines.put(x.decode()) for x in os.fdopen(jr, "rb")],
                 daemon=True).start()
t0 = time.monotonic()
for i in range(130):
    ask(J, b"CONNECT denied%d.test:443 HTTP/1.1\r\n\r\n" % i)
elapsed = time.monotonic() - t0
with connect(J) as s:
    s.sendall(b"CONNECT ok.test:%d HTTP/1.1\r\n\r\n" % EPORT)
    read_head(s)
got = []
while not any("proxy: allow CONNECT ok.test" in x for x in got):
    got.append(jlines.get(timeout=WAIT))
J.kill()
J.wait()
denied = [x for x in got if "proxy: deny CONNECT" in x]
notice = [x for x in got if "denied decisions in 10 s: the rest of them are counted" in x]
if elapsed >= 10:
    t.skip("the journal's denied lines", "130 requests took %.1f s here: the 10 s window "
           "rolled over" % elapsed)
else:
    t.ok(len(denied) == 100 and len(notice) == 1 and notice[0].startswith("<6>proxy: more than "
         "100 denied decisions in 10 s") and got.index(notice[0]) == 100,
         "journal: 100 denied lines in 10 s, then one saying the rest are counted",
         (len(denied), notice, got[-3:]))
t.ok(got[-1].startswith("<6>proxy: allow CONNECT ok.test:%d " % EPORT),
     "journal: an allowed decision is still logged past the limit", got[-3:])

# ---- the connection cap: 10k attempts, refusals, and still serving ----
C = Proxy("--allow-domain", "ok.test", "--allow-cidr", "127.0.0.1", "--max-connections", "50",
          "--header-timeout-ms", "600000")
held = []
for i in range(50):
    s = connect(C)
    s.sendall(b"CONNECT ok.test:%d HTTP/1.1\r\n\r\n" % EPORT)
    if read_head(s).startswith("HTTP/1.1 200"):
        held.append(s)
t.eq(len(held), 50, "50 tunnels open at the cap")
refused = other = 0
for i in range(10000):
    try:
        with socket.create_connection(("127.0.0.1", C.port), timeout=WAIT) as s:
            ans = read_all(s)
    except OSError:
        other += 1
        continue
    if status_of(ans) == 503:
        refused += 1
    else:
        other += 1
t.eq((refused, other), (10000, 0), "10000 attempts past the cap: each 503")
n503 = 0
for i in range(10000):
    if C.next_audit()["status"] == 503:
        n503 += 1
t.eq(n503, 10000, "audit: a line per refusal")
s = held.pop()
s.sendall(b"still")
t.eq(s.recv(100), b"still", "a tunnel held through it all still works")
s.close()
t.eq(C.next_audit()["sent"], 5, "its close is audited")
with connect(C) as s:
    s.sendall(b"CONNECT ok.test:%d HTTP/1.1\r\n\r\n" % EPORT)
    t.eq(read_head(s), "HTTP/1.1 200 Connection established\r\n\r\n",
         "below the cap again: served")
C.next_audit()
for s in held:
    s.close()

# ---- a CIDR of everything still keeps the proxy from itself ----
W = Proxy("--allow-cidr", "0.0.0.0/0", "--allow-cidr", "::/0")
for target in ("127.0.0.1:%d" % W.port, "0.0.0.0:%d" % W.port, "[::ffff:127.0.0.1]:%d" % W.port,
               "[::]:%d" % W.port, "[::ffff:0.0.0.0]:%d" % W.port, "0.0.0.5:%d" % W.port,
               "[::ffff:0.0.0.5]:%d" % W.port):
    ans = ask(W, b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
    t.ok(status_of(ans) == 403 and ("own listening address" in ans or "unspecified" in ans),
         "allow-cidr 0.0.0.0/0: CONNECT %s (the proxy itself) refused" % target, ans)
    W.next_audit()
with connect(W) as s:
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % EPORT)
    t.eq(read_head(s), "HTTP/1.1 200 Connection established\r\n\r\n",
         "allow-cidr 0.0.0.0/0: loopback allowed, as asked")
W.next_audit()
W.stop()

# ---- an IPv6 range does not reopen IPv4 through its mapped or NAT64 forms ----
V6 = Proxy("--allow-cidr", "::/0")
for target in ("[::ffff:127.0.0.1]:%d" % EPORT, "[64:ff9b::7f00:1]:%d" % EPORT,
               "[::ffff:169.254.169.254]:80", "[::ffff:10.0.0.1]:80"):
    ans = ask(V6, b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
    a = V6.next_audit()
    t.ok(status_of(ans) == 403 and a.get("decision") == "deny",
         "allow-cidr ::/0: CONNECT %s (IPv4 inside) refused" % target, ans)
V6.stop()

# ---- --audit-tag: whose proxy, in every line (cordon serve names the process) ----
T = Proxy("--allow-domain", "ok.test", "--audit-tag", "process a\\x0a b")
ans = ask(T, b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n")
a = T.next_audit()
t.ok(status_of(ans) == 403 and a.get("tag") == "process a\\x0a b" and a["host"] == "evil.test",
     "--audit-tag: the JSON line carries the tag", a)
T.stop()

# ---- an address no interface has, that a local route delivers here (AnyIP) ----
# In a network namespace of its own (root or not), where lo gets
# `ip route add local 11.23.0.0/16`: 11.23.5.5 is this host's there, though
# no interface lists it. The proxy and its client both run inside.
ANYIP = r"""
import json, socket, subprocess, sys
cordon = sys.argv[1]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "route", "add", "local", "11.23.0.0/16", "dev", "lo", "table", "local"],
               check=True)
subprocess.run(["ip", "addr", "add", "11.22.33.44/32", "dev", "lo"], check=True)
p = subprocess.Popen([cordon, "proxy", "--listen", "127.0.0.1:0", "--allow-domain", "*.test",
                      "--json-audit"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
port = int(p.stdout.readline().decode().rpartition(":")[2])
out = {}
for name in ("anyip.test", "iface.test", "elsewhere.test"):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"CONNECT %s:80 HTTP/1.1\r\n\r\n" % name.encode())
    out[name] = [s.recv(4096).split(b"\r\n")[0].decode(), json.loads(p.stdout.readline())]
    s.close()
p.kill()
print(json.dumps(out))
"""
UNSHARE, IP = shutil.which("unshare"), shutil.which("ip")
if not UNSHARE or not IP:
    t.skip("AnyIP", "needs unshare and ip (iproute2) for a network namespace of the test's own")
else:
    # Root: a network namespace alone (the proxy changes to nobody, which only
    # the host maps). Others: a user namespace mapping their own ids, the
    # capabilities kept for ip.
    ns = [UNSHARE, "-n"] if os.geteuid() == 0 else [
        UNSHARE, "-n", "--map-user=%d" % os.geteuid(), "--map-group=%d" % os.getegid(),
        "--keep-caps"]
    r = subprocess.run(ns + [sys.executable, "-c", ANYIP, CORDON],
                       env=dict(os.environ, CORDON_TEST_PROXY_RESOLVE=(
                           "anyip.test=11.23.5.5,iface.test=11.22.33.44,"
                           "elsewhere.test=11.24.5.5")),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)
    if r.returncode != 0 and b"unshare failed" in r.stderr:
        t.skip("AnyIP", "no user namespace for the test's own network namespace: %s"
               % r.stderr.decode().strip())
    else:
        try:
            got = json.loads(r.stdout)
        except ValueError:
            got = {}
        a = got.get("anyip.test", ["", {}])
        f = got.get("iface.test", ["", {}])
        e = got.get("elsewhere.test", ["", {}])
        t.ok(a[0].startswith("HTTP/1.1 403") and
             a[1].get("rule") == "address 11.23.5.5: an address of this host",
             "an address a local route delivers here (no interface has it) is this host's: 403",
             (r.stdout, r.stderr))
        t.ok(f[0].startswith("HTTP/1.1 403") and
             f[1].get("rule") == "address 11.22.33.44: an address of this host",
             "an address of one of its interfaces is this host's: 403", (r.stdout, r.stderr))
        t.ok(e[0].startswith("HTTP/1.1 502") and e[1].get("address") == "11.24.5.5" and
             "this host" not in (e[1].get("rule") or ""),
             "one with no local route is not (the connect fails: 502)", (r.stdout, r.stderr))

# ---- bad options ----
for args, want in [(["--allow-domain", "foo*.test"], "--allow-domain 'foo*.test': a '*'"),
                   (["--allow-domain", "1.2.3.4"], "use a CIDR"),
                   (["--allow-cidr", "10.0.0.1/8"], "host bits"),
                   (["--allow-cidr", "::ffff:0:0/96"], "write that IPv4 range"),
                   (["--mode", "open"], "full or limited"),
                   (["--max-connections", "0"], "--max-connections"),
                   (["--listen", "localhost:1"], "IP:PORT expected"),
                   (["--audit-tag", "a\nb"], "--audit-tag: 1 to 200 bytes of printable ASCII"),
                   (["--audit-tag", "x" * 201], "--audit-tag: 1 to 200 bytes"),
                   (["--audit-tag", ""], "--audit-tag: 1 to 200 bytes")]:
    r = subprocess.run([CORDON, "proxy"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=WAIT)
    t.ok(r.returncode == 2 and want in r.stderr.decode(), "bad option %s refused" % args,
         r.stderr)

for p in (P, P2, L, C):
    p.stop()
shutil.rmtree(work, ignore_errors=True)
t.done()
