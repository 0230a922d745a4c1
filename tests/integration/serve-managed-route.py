#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: process/start with a sandbox and enforceManagedNetwork
# (no networkProxy), Codex's semantics (exec-server reference 4.5): the
# child's proxy variables name a loopback proxy of the host (here
# tests/data/connect-proxy.py on a TCP port, in front of an upstream HTTP
# server); the command reaches it, and only it, through the relay, and its
# variables name the relay. A name the proxy denies gets 403; a direct
# connect to the upstream or to the proxy's own port fails; with the proxy
# gone nothing gets out. No proxy variable, none naming a loopback proxy,
# or two naming different ones: -32602 with the reference's messages, and
# nothing runs. Root and unprivileged (unprivileged.sh). TAP.

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from rpcclient import (ROOT_READ, Server, Tap, cordon_usable, err_code,  # noqa: E402
                       err_msg)
from netclient import NetServer  # noqa: E402
from upstream import serve_upstream  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
WHO = "root" if os.geteuid() == 0 else "unprivileged"
PROXY_SCRIPT = os.path.join(HERE, "..", "data", "connect-proxy.py")
BASE = tempfile.mkdtemp(prefix="cordon-mroute.", dir="/var/tmp")
atexit.register(shutil.rmtree, BASE, True)
os.chmod(BASE, 0o755)
LOG = os.path.join(BASE, "proxy.log")
open(LOG, "w").close()


upstream = serve_upstream()
UPORT = upstream.server_address[1]

proxy = subprocess.Popen([sys.executable, PROXY_SCRIPT, "tcp", "127.0.0.1:%d" % UPORT, LOG],
                         stdout=subprocess.PIPE)
line = proxy.stdout.readline().split()
if len(line) != 2 or line[0] != b"port" or proxy.stdout.readline().strip() != b"ready":
    t.not_ok("the stand-in proxy starts on a TCP port")
    t.done()
PPORT = int(line[1])
atexit.register(lambda: (proxy.kill(), proxy.wait()))

PROBE = r'''
import errno, json, os, socket, sys, urllib.request
uport, pport = int(sys.argv[1]), int(sys.argv[2])
res = {}
def attempt(name, fn):
    try:
        res[name] = "ok: %s" % (fn(),)
    except Exception as e:
        code = getattr(e, "code", None) or errno.errorcode.get(getattr(e, "errno", None) or 0, e)
        res[name] = "%s: %s" % (type(e).__name__, code)
def get(url):
    return lambda: urllib.request.urlopen(url, timeout=30).read().decode()
def direct(port):
    def fn():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.close()
        return "connected"
    return fn
attempt("allowed", get("http://upstream.test:%d/" % uport))
attempt("denied", get("http://other.test:%d/" % uport))
attempt("direct upstream", direct(uport))
attempt("direct proxy", direct(pport))
attempt("public", lambda: socket.create_connection(("1.1.1.1", 443), timeout=10) and "connected")
res["env"] = dict(os.environ)
print(json.dumps(res))
'''
PROBE_PATH = os.path.join(BASE, "probe.py")
with open(PROBE_PATH, "w") as f:
    f.write(PROBE)
os.chmod(PROBE_PATH, 0o644)
ARGV = [sys.executable, PROBE_PATH, str(UPORT), str(PPORT)]
PURL = "http://127.0.0.1:%d" % PPORT


def sandbox(network="restricted"):
    return {"permissions": dict(ROOT_READ, network=network), "windowsSandboxLevel": "disabled"}


def env(**kw):
    e = {"PATH": "/usr/bin:/bin"}
    e.update(kw)
    return e


def probe(s, pid, e, network="restricted"):
    r, out = s.run(pid, ARGV, cwd=BASE, env=e, sandbox=sandbox(network),
                   enforceManagedNetwork=True)
    if out is None:
        return r, None
    try:
        return r, json.loads(out.stdout.decode())
    except ValueError:
        return r, {"raw": out.stdout.decode(errors="replace") + out.stderr.decode("replace")}


s = Server()
s.handshake()
try:
    e = env(HTTP_PROXY=PURL, http_proxy=PURL + "/", ALL_PROXY="socks5h://127.0.0.1:%d" % PPORT,
            HTTPS_PROXY=PURL, CODEX_NETWORK_PROXY_ATTRIBUTION="tok", NO_PROXY="",
            OTHER="kept")
    r, res = probe(s, "managed", e)
    ok = res is not None and "env" in res
    t.ok(ok, "[%s] a sandboxed process with enforceManagedNetwork runs" % WHO, (r, res))
    if ok:
        t.eq(res["allowed"], "ok: hello from upstream",
             "[%s] it reaches the allowed upstream through the host's proxy" % WHO)
        t.eq(res["denied"], "HTTPError: 403", "[%s] a name the proxy denies gets 403" % WHO)
        t.ok(res["direct upstream"].startswith(("ConnectionRefusedError", "OSError")),
             "[%s] a direct connect to the upstream fails" % WHO, res["direct upstream"])
        t.ok(res["direct proxy"].startswith(("ConnectionRefusedError", "OSError")),
             "[%s] a direct connect to the proxy's own port fails" % WHO, res["direct proxy"])
        t.ok(not res["public"].startswith("ok"), "[%s] a public address is unreachable" % WHO,
             res["public"])
        pe = res["env"]
        t.eq((pe.get("HTTP_PROXY"), pe.get("http_proxy"), pe.get("HTTPS_PROXY"),
              pe.get("ALL_PROXY")),
             ("http://127.0.0.1:3128", "http://127.0.0.1:3128/", "http://127.0.0.1:3128",
              "socks5h://127.0.0.1:3128"),
             "[%s] each proxy variable names the relay, scheme and path kept" % WHO)
        t.ok("CODEX_NETWORK_PROXY_ATTRIBUTION" not in pe and pe.get("OTHER") == "kept",
             "[%s] the attribution variable is dropped, the others kept" % WHO, pe)
    with open(LOG) as f:
        logged = f.read().split("\n")
    t.ok(("GET upstream.test:%d allowed" % UPORT) in logged and
         ("GET other.test:%d denied" % UPORT) in logged,
         "[%s] the host's proxy saw both requests" % WHO, logged)

    # Network "enabled" in the permissions: still proxy-only.
    r, res = probe(s, "enabled", env(HTTP_PROXY=PURL), network="enabled")
    t.ok(res is not None and res.get("allowed") == "ok: hello from upstream" and
         not res["direct upstream"].startswith("ok") and not res["public"].startswith("ok"),
         "[%s] with network enabled in the permissions, still only the proxy" % WHO, (r, res))

    # Refusals: -32602, nothing spawned.
    marker = os.path.join(BASE, "marker")
    touch = ["sh", "-c", "touch '%s'" % marker]
    cases = [
        ("no proxy variable", env(), "managed proxy mode requires proxy environment variables"),
        ("no loopback proxy", env(HTTP_PROXY="http://proxy.example:8080"),
         "managed proxy mode requires parseable loopback proxy endpoints"),
        ("a bad port", env(HTTPS_PROXY="http://127.0.0.1:0"),
         "managed proxy mode requires parseable loopback proxy endpoints"),
        ("IPv6 loopback", env(HTTP_PROXY="http://[::1]:%d" % PPORT),
         "managed proxy mode requires parseable loopback proxy endpoints"),
        ("two proxies", env(HTTP_PROXY=PURL, HTTPS_PROXY="http://127.0.0.1:1"),
         "managed proxy mode: the proxy environment variables name more than one loopback "
         "proxy (127.0.0.1:%d and 127.0.0.1:1); cordon relays to one: make them name the same "
         "proxy" % PPORT),
    ]
    for i, (desc, e, msg) in enumerate(cases):
        r = s.start("refuse%d" % i, touch, cwd=BASE, env=e, sandbox=sandbox(),
                    enforceManagedNetwork=True)
        t.ok(err_code(r) == -32602 and err_msg(r) == msg, "[%s] %s: -32602 %r" % (WHO, desc, msg),
             r)
    # A profile cordon builds no sandbox for would leave the network open: refused.
    r = s.start("refuse-disabled", touch, cwd=BASE, env=env(HTTP_PROXY=PURL),
                sandbox={"permissions": {"type": "disabled"}, "windowsSandboxLevel": "disabled"},
                enforceManagedNetwork=True)
    t.ok(err_code(r) == -32602 and err_msg(r) == (
        "managed network enforcement needs a sandbox, and this permission profile (type "
        "disabled) builds none: the command would run with an open network; send a managed or "
        "external profile"), "[%s] a disabled profile: -32602, not an open network" % WHO, r)
    t.ok(not os.path.exists(marker), "[%s] no refused start ran anything" % WHO)
    # An external profile (the file system is the caller's): the network is still routed.
    r, out = s.run("external", ARGV, cwd=BASE, env=env(HTTP_PROXY=PURL),
                   sandbox={"permissions": {"type": "external", "network": "enabled"},
                            "windowsSandboxLevel": "disabled"}, enforceManagedNetwork=True)
    try:
        res = json.loads(out.stdout.decode())
    except (AttributeError, ValueError):
        res = None
    t.ok(res is not None and res.get("allowed") == "ok: hello from upstream" and
         not res["direct upstream"].startswith("ok") and not res["public"].startswith("ok"),
         "[%s] an external profile with network enabled: only the proxy" % WHO, (r, out))

    # localhost names the proxy too.
    r, res = probe(s, "localhost", env(http_proxy="http://localhost:%d" % PPORT))
    t.ok(res is not None and res.get("allowed") == "ok: hello from upstream",
         "[%s] http_proxy=http://localhost:PORT is routed" % WHO, (r, res))

    # The loopback port the caller names may be this very server's: the
    # relay connects for the sandbox, and the server must take it for the
    # sandbox's client (403), never for an outside one that may start
    # unsandboxed processes.
    W = NetServer("ws")
    c = None
    try:
        c = W.connect()
        c.handshake()
        ask = ("import socket; s = socket.create_connection(('127.0.0.1', 3128), timeout=30); "
               "s.sendall(b'GET /status HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'); "
               "print(s.recv(200).split(b'\\r\\n')[0].decode())")
        r, out = c.run("to-self", [sys.executable, "-c", ask], cwd=BASE,
                       env=env(HTTP_PROXY="http://127.0.0.1:%d" % W.port),
                       sandbox=sandbox(), enforceManagedNetwork=True)
        got = out.stdout.decode().strip() if out else ""
        t.ok(got.startswith("HTTP/1.1 403"),
             "[%s] a proxy port that is the server's own: the relayed client is refused as "
             "the sandbox's (403)" % WHO, (got, r, out and out.stderr, W.stderr_text()[-600:]))
        # Root reads the relay's descriptors and names it; an unprivileged
        # server cannot (the relay is not dumpable) and refuses undecided.
        t.ok("is a sandbox's network relay (cordon-relay)" in W.stderr_text() or
             (WHO != "root" and "cannot tell whether the client is a sandboxed process" in
              W.stderr_text()),
             "[%s] and the server's log says why" % WHO, W.stderr_text()[-600:])
    finally:
        if c:
            c.close()
        W.stop()

    # The proxy gone: nothing gets out.
    proxy.kill()
    proxy.wait()
    r, res = probe(s, "gone", env(HTTP_PROXY=PURL))
    t.ok(res is not None and "allowed" in res and not res["allowed"].startswith("ok") and
         not res["direct upstream"].startswith("ok"),
         "[%s] with the host's proxy gone, nothing gets out" % WHO, (r, res))
finally:
    s.stop()
t.done()
