#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# The managed network's kernel fence under `cordon run --network managed
# --network-proxy unix:PATH`, against a stand-in proxy (tests/data/
# connect-proxy.py, outside the sandbox) and an upstream HTTP server on the
# host's loopback: through the relay the command reaches the proxy (curl,
# urllib, a raw CONNECT) and the upstream behind it; every other way out
# fails at the kernel: --noproxy, a direct connect to the upstream, to other
# loopback ports and to the host's addresses, UDP and TCP DNS, ICMP, unix,
# netlink, packet, vsock and raw sockets, datagram socket pairs, io_uring.
# The proxy variables are exactly Codex's set, all naming the relay. With
# the proxy gone (before the run, or killed mid-run) nothing gets out.
# Root and unprivileged (unprivileged.sh runs it again as another user). TAP.

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from rpcclient import CORDON, Tap, pids_by_cmdline  # noqa: E402
from upstream import serve_upstream  # noqa: E402

t = Tap()
ENV = dict(os.environ)
ENV.pop("CORDON_TEST_DISABLE", None)
if os.environ.get("CD_POLICYDIR"):
    ENV["CORDON_POLICY_PATH"] = os.environ["CD_POLICYDIR"]
WHO = "root" if os.geteuid() == 0 else "unprivileged"
PROXY_SCRIPT = os.path.join(HERE, "..", "data", "connect-proxy.py")
BASE = tempfile.mkdtemp(prefix="cordon-managed.", dir="/var/tmp")
atexit.register(shutil.rmtree, BASE, True)
os.chmod(BASE, 0o755)
SOCK = os.path.join(BASE, "proxy.sock")
LOG = os.path.join(BASE, "proxy.log")
RELAY = "http://127.0.0.1:3128"

# The exact contract (exec-server reference 4.6, Codex's network-proxy crate).
NO_PROXY = "localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"
WANT_ENV = {"CODEX_NETWORK_PROXY_ACTIVE": "1", "CODEX_NETWORK_ALLOW_LOCAL_BINDING": "0",
            "ELECTRON_GET_USE_PROXY": "true", "NODE_USE_ENV_PROXY": "1"}
for k in ("HTTP_PROXY HTTPS_PROXY http_proxy https_proxy YARN_HTTP_PROXY YARN_HTTPS_PROXY "
          "npm_config_http_proxy npm_config_https_proxy npm_config_proxy NPM_CONFIG_HTTP_PROXY "
          "NPM_CONFIG_HTTPS_PROXY NPM_CONFIG_PROXY BUNDLE_HTTP_PROXY BUNDLE_HTTPS_PROXY PIP_PROXY "
          "DOCKER_HTTP_PROXY DOCKER_HTTPS_PROXY WS_PROXY WSS_PROXY ws_proxy wss_proxy ALL_PROXY "
          "all_proxy FTP_PROXY ftp_proxy").split():
    WANT_ENV[k] = RELAY
for k in "NO_PROXY no_proxy npm_config_noproxy NPM_CONFIG_NOPROXY YARN_NO_PROXY BUNDLE_NO_PROXY".split():
    WANT_ENV[k] = NO_PROXY


upstream = serve_upstream()
UPORT = upstream.server_address[1]
URL = "http://upstream.test:%d/" % UPORT


def start_proxy():
    p = subprocess.Popen([sys.executable, PROXY_SCRIPT, SOCK, "127.0.0.1:%d" % UPORT, LOG],
                         stdout=subprocess.PIPE)
    if p.stdout.readline().strip() != b"ready":
        t.not_ok("the stand-in proxy starts")
        t.done()
    return p


def stop_proxy(p):
    p.kill()
    p.wait()


def host_address():
    """A non-loopback address of this host, or None."""
    try:
        out = subprocess.run(["hostname", "-I"], stdout=subprocess.PIPE, timeout=10).stdout
        for a in out.decode().split():
            if "." in a and not a.startswith("127."):
                return a
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def run(args, env=None, timeout=120, **kw):
    p = subprocess.run([CORDON] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env or ENV, timeout=timeout, cwd=BASE, **kw)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


MANAGED = ["run", "--network", "managed", "--network-proxy", "unix:" + SOCK, "--"]

# The probe, run inside the sandbox: one JSON object of what each attempt gave.
PROBE = r'''
import ctypes, errno, json, os, socket, sys, urllib.request
url, uport, hostaddr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
res = {}
def attempt(name, fn):
    try:
        res[name] = "ok: %s" % (fn(),)
    except Exception as e:
        res[name] = "%s: %s" % (type(e).__name__, errno.errorcode.get(getattr(e, "errno", None) or 0, e))
def get_env_proxy():
    return urllib.request.urlopen(url, timeout=30).read().decode()
def connect_relay():
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.sendall(b"CONNECT upstream.test:%d HTTP/1.1\r\nHost: upstream.test\r\n\r\n" % uport)
    f = s.makefile("rb")
    status = f.readline()
    while f.readline() not in (b"\r\n", b""):
        pass
    if b" 200 " not in status:
        return "status " + status.decode().strip()
    s.sendall(b"GET / HTTP/1.0\r\nHost: upstream.test\r\n\r\n")
    return f.read().split(b"\r\n\r\n", 1)[-1].decode()
def direct(addr, kind=socket.SOCK_STREAM):
    def fn():
        s = socket.socket(socket.AF_INET, kind)
        s.settimeout(10)
        s.connect(addr)
        if kind == socket.SOCK_DGRAM:
            s.send(b"\0" * 12)
            return s.recv(512)
        return "connected"
    return fn
def sock(fam, kind=socket.SOCK_STREAM, proto=0):
    return lambda: socket.socket(fam, kind, proto).close() or "made"
def pair(kind):
    return lambda: [s.close() for s in socket.socketpair(socket.AF_UNIX, kind)] and "made"
def unix_connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[4])
    return "connected"
def io_uring():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    r = libc.syscall(425, 8, params)
    if r < 0:
        raise OSError(ctypes.get_errno(), "io_uring_setup")
    return "made"
def icmp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.settimeout(10)
    s.sendto(b"\x08\0\xf7\xff\0\0\0\0", ("8.8.8.8", 0))
    return s.recv(64)
attempt("urllib via the proxy variables", get_env_proxy)
attempt("CONNECT through the relay", connect_relay)
attempt("direct connect to the upstream", direct(("127.0.0.1", uport)))
attempt("connect to another loopback port", direct(("127.0.0.1", 22)))
attempt("connect to the host's address", direct((hostaddr, uport)))
attempt("connect to a public address", direct(("1.1.1.1", 443)))
attempt("UDP DNS", direct(("8.8.8.8", 53), socket.SOCK_DGRAM))
attempt("TCP DNS", direct(("8.8.8.8", 53)))
attempt("ICMP echo (ping socket)", icmp)
attempt("raw ICMP socket", sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("unix socket", sock(socket.AF_UNIX))
attempt("unix connect to the proxy", unix_connect)
attempt("netlink socket", sock(socket.AF_NETLINK, socket.SOCK_RAW))
attempt("packet socket", sock(socket.AF_PACKET, socket.SOCK_RAW))
attempt("vsock socket", sock(40))
attempt("datagram socket pair", pair(socket.SOCK_DGRAM))
attempt("stream socket pair", pair(socket.SOCK_STREAM))
attempt("io_uring_setup", io_uring)
res["interfaces"] = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
res["env"] = dict(os.environ)
print(json.dumps(res))
'''
PROBE_PATH = os.path.join(BASE, "probe.py")
with open(PROBE_PATH, "w") as f:
    f.write(PROBE)
os.chmod(PROBE_PATH, 0o644)
HOSTADDR = host_address() or "192.0.2.1"


def probe(env=None):
    rc, out, err = run(MANAGED + [sys.executable, PROBE_PATH, URL, str(UPORT), HOSTADDR, SOCK],
                       env=env)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, err + out


# ---- options and refusals

rc, out, err = run(["run", "--network", "managed", "--", "true"])
t.ok(rc == 0 and "no domain is allowed" in err,
     "[%s] --network managed without a proxy runs cordon's own, which allows nothing" % WHO, err)
# With stdin closed (CI runners start programs so): the proxy's socket must not
# take descriptor 0's place (it did, and a dup2 of /dev/null then replaced it).
rc, out, err = run(["run", "--network", "managed", "--", "true"], preexec_fn=lambda: os.close(0))
t.ok(rc == 0 and "no domain is allowed" in err and "cannot start" not in err,
     "[%s] ... and so it does when cordon starts with stdin closed" % WHO, err)
rc, out, err = run(["run", "--network", "managed", "--network-proxy", "unix:rel/p.sock", "--",
                    "true"])
t.ok(rc == 2 and "must be absolute" in err, "[%s] a relative unix endpoint is a usage error" % WHO,
     err)
rc, out, err = run(["run", "--network", "managed", "--network-proxy", "tcp:localhost:80", "--",
                    "true"])
t.ok(rc == 2 and "IPv4" in err, "[%s] a tcp endpoint must be an IPv4 address" % WHO, err)
rc, out, err = run(["run", "--network", "managed", "--network-proxy", "tcp:127.0.0.1:70000",
                    "--", "true"])
t.ok(rc == 2 and "port" in err, "[%s] a port out of range is a usage error" % WHO, err)
rc, out, err = run(["run", "--network-proxy", "unix:" + SOCK, "--", "true"])
t.ok(rc == 2 and "needs a managed network" in err,
     "[%s] --network-proxy without a managed network is a usage error" % WHO, err)
if WHO == "unprivileged":
    env = dict(ENV, CORDON_TEST_DISABLE="userns")
    # Every opt-down there is: none lets a managed network run without its namespace.
    degraded = ["--allow-degraded=" + f for f in ("protected-metadata", "pid-isolation",
                                                 "deny-masks", "file-attributes")]
    rc, out, err = run(MANAGED[:-1] + degraded + ["--", "true"], env=env)
    t.ok(rc == 125 and "needs a network namespace" in err and "user namespaces" in err,
         "[%s] without user namespaces a managed network is refused, with the reason" % WHO, err)

rc, out, err = run(["explain", "--json", "--network", "managed", "--network-proxy", "unix:" + SOCK])
try:
    j = json.loads(out)["linux"]
except (ValueError, KeyError):
    j = None
t.ok(rc == 0 and j and j["namespaces"]["network"] and j["managed_network"] ==
     {"relay": "127.0.0.1:3128", "proxy": "unix:" + SOCK, "env": WANT_ENV},
     "[%s] explain --json shows the relay, the proxy and the variables" % WHO, err + out[:2000])

# ---- through the relay, and nothing else

proxy = start_proxy()
atexit.register(stop_proxy, proxy)
env = dict(ENV, HTTP_PROXY="http://192.0.2.9:8080", https_proxy="http://192.0.2.9:8080",
           no_proxy="*", MY_PROXY_NOTE="kept")
rc, res, err = probe(env)
if not t.ok(rc == 0 and res is not None, "[%s] the probe runs under the fence" % WHO, err):
    t.done()
t.eq(res["urllib via the proxy variables"], "ok: hello from upstream",
     "[%s] urllib reaches the upstream through the proxy variables and the relay" % WHO)
t.eq(res["CONNECT through the relay"], "ok: hello from upstream",
     "[%s] a raw CONNECT to the relay tunnels to the upstream" % WHO)
want_env = dict(WANT_ENV, MY_PROXY_NOTE="kept")
got_env = {k: v for k, v in res["env"].items() if "proxy" in k.lower() or k in WANT_ENV}
t.eq(got_env, want_env,
     "[%s] the proxy variables are exactly Codex's, naming the relay, over the caller's" % WHO)
t.eq(res["interfaces"], ["lo"], "[%s] the network namespace has only lo" % WHO)
for name, want in (("direct connect to the upstream", "ECONNREFUSED"),
                   ("connect to another loopback port", "ECONNREFUSED"),
                   ("connect to the host's address", "ENETUNREACH"),
                   ("connect to a public address", "ENETUNREACH"),
                   ("UDP DNS", "ENETUNREACH"),
                   ("TCP DNS", "ENETUNREACH"),
                   ("raw ICMP socket", "EPERM"),
                   ("unix socket", "EPERM"),
                   ("unix connect to the proxy", "EPERM"),
                   ("netlink socket", "EPERM"),
                   ("packet socket", "EPERM"),
                   ("vsock socket", "EPERM"),
                   ("datagram socket pair", "EPERM"),
                   ("io_uring_setup", "EPERM")):
    t.ok(res[name].endswith(": " + want), "[%s] %s fails with %s" % (WHO, name, want),
         res[name])
# A ping socket is refused by the namespace's ping_group_range, or has no route.
t.ok(res["ICMP echo (ping socket)"].split(": ")[-1] in ("EACCES", "EPERM", "ENETUNREACH"),
     "[%s] ICMP echo fails" % WHO, res["ICMP echo (ping socket)"])
t.eq(res["stream socket pair"], "ok: made", "[%s] a stream socket pair is still allowed" % WHO)
with open(LOG) as f:
    log = f.read()
t.ok(("GET upstream.test:%d allowed" % UPORT) in log and
     ("CONNECT upstream.test:%d allowed" % UPORT) in log,
     "[%s] both requests went through the proxy" % WHO, log)

CURL = shutil.which("curl")
if CURL:
    rc, out, err = run(MANAGED + [CURL, "-sS", "--max-time", "60", URL])
    t.ok(rc == 0 and out == "hello from upstream",
         "[%s] curl reaches the upstream through the proxy variables" % WHO, err + out)
    rc, out, err = run(MANAGED + [CURL, "-sS", "-p", "--max-time", "60", URL])
    t.ok(rc == 0 and out == "hello from upstream", "[%s] curl -p tunnels with CONNECT" % WHO,
         err + out)
    rc, out, err = run(MANAGED + [CURL, "-sS", "--max-time", "60", "http://denied.test/"])
    t.ok(rc == 0 and "denied.test:80 denied" in open(LOG).read(),
         "[%s] the proxy's refusal reaches curl (the proxy decides, not the relay)" % WHO,
         err + out)
    rc, out, err = run(MANAGED + [CURL, "-sS", "--noproxy", "*", "--max-time", "60", URL])
    t.ok(rc != 0 and out == "", "[%s] curl --noproxy '*' gets nowhere (no DNS)" % WHO, err)
    rc, out, err = run(MANAGED + [CURL, "-sS", "--noproxy", "*", "--max-time", "60",
                                  "http://127.0.0.1:%d/" % UPORT])
    t.ok(rc == 7 and out == "", "[%s] curl --noproxy '*' to the upstream's address fails" % WHO,
         err)
else:
    t.skip("[%s] curl through the relay" % WHO, "curl is not installed")

# ---- a proxy on a TCP port of the host

tp = subprocess.Popen([sys.executable, PROXY_SCRIPT, "tcp", "127.0.0.1:%d" % UPORT, LOG],
                      stdout=subprocess.PIPE)
tport = tp.stdout.readline().decode().split()[-1]
t.ok(tp.stdout.readline().strip() == b"ready", "[%s] the TCP stand-in proxy starts" % WHO)
rc, out, err = run(["run", "--network", "managed", "--network-proxy", "tcp:127.0.0.1:" + tport,
                    "--", sys.executable, "-c",
                    "import urllib.request, sys; "
                    "print(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())",
                    URL])
t.ok(rc == 0 and out.strip() == "hello from upstream",
     "[%s] a tcp: endpoint: the relay connects to the proxy's port on the host" % WHO, err + out)
stop_proxy(tp)

# ---- the relay lives as long as cordon, no longer


def relays(cordon_pid):
    key = b"\0--network-proxy\0unix:" + SOCK.encode() + b"\0"
    return [p for p in pids_by_cmdline(lambda c: key in c and c.startswith(CORDON.encode()))
            if p != cordon_pid]


rc, out, err = run(MANAGED + ["true"])
t.ok(rc == 0 and relays(-1) == [], "[%s] the relay is gone once cordon run returns" % WHO,
     err + repr(relays(-1)))
p = subprocess.Popen([CORDON] + MANAGED + [sys.executable, "-c",
                                           "import sys; print('up', flush=True); sys.stdin.read()"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     env=ENV, cwd=BASE)
t.eq(p.stdout.readline().strip(), b"up", "[%s] a managed run is up" % WHO)
before = relays(p.pid)
p.kill()
p.wait()
deadline = time.monotonic() + 120
while relays(p.pid) and time.monotonic() < deadline:
    time.sleep(0.05)
t.ok(before and not relays(p.pid),
     "[%s] a SIGKILLed cordon run takes its relay with it" % WHO, repr((before, relays(p.pid))))

# ---- the proxy killed mid-run: no network left

MIDRUN = r'''
import socket, sys, urllib.request
url = sys.argv[1]
print(urllib.request.urlopen(url, timeout=30).read().decode(), flush=True)
sys.stdin.readline()
try:
    print("after:", urllib.request.urlopen(url, timeout=30).read().decode(), flush=True)
except Exception as e:
    print("after: failed", type(e).__name__, flush=True)
try:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.sendall(b"CONNECT upstream.test:%s HTTP/1.1\r\n\r\n" % sys.argv[2].encode())
    print("relay:", repr(s.recv(100)), flush=True)
except Exception as e:
    print("relay: failed", type(e).__name__, flush=True)
'''
p = subprocess.Popen([CORDON] + MANAGED + [sys.executable, "-c", MIDRUN, URL, str(UPORT)],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     env=ENV, cwd=BASE)
first = p.stdout.readline().decode().strip()
t.eq(first, "hello from upstream", "[%s] mid-run: the first request gets through" % WHO)
stop_proxy(proxy)
p.stdin.write(b"go\n")
p.stdin.flush()
rest, err = p.communicate(timeout=120)
rest = rest.decode()
t.ok(p.returncode == 0 and "after: failed" in rest and
     ("relay: b''" in rest or "relay: failed ConnectionResetError" in rest),
     "[%s] mid-run: once the proxy is killed, requests fail and the relay only closes" % WHO,
     rest + err.decode())

rc, res, err = probe()
t.ok(rc == 0 and res and not res["urllib via the proxy variables"].startswith("ok") and
     "hello" not in res["CONNECT through the relay"] and
     res["direct connect to the upstream"].endswith("ECONNREFUSED"),
     "[%s] with no proxy running, nothing gets out" % WHO,
     json.dumps(dict(res, env=None)) if res else err)

t.done()
