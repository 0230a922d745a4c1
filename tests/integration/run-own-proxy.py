#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon run --network managed` with no --network-proxy: cordon starts its
# own filtering proxy for the run (src/own-proxy.c) with the rules of
# --allow-domain, --deny-domain, --allow-cidr and --proxy-mode, and the
# kernel fence's relay goes to it. Upstreams (HTTP, HTTPS with a self-signed
# certificate when openssl is there) listen on the host's loopback, named
# through the proxy's test resolver (CORDON_TEST_PROXY_RESOLVE, which only
# replaces DNS: the policy still judges every name and address), reachable
# because --allow-cidr 127.0.0.0/8 says so. An allowed name works with curl
# (HTTP_PROXY, HTTPS_PROXY, a CONNECT tunnel), urllib and git clone over HTTP;
# a denied name gets
# 403 with the rule; an IP literal outside the CIDRs is refused; --noproxy
# and a raw connect fail; each decision has an audit line on cordon's
# stderr; no allowed domain means no network; limited mode refuses CONNECT;
# killing the proxy mid-run leaves no network. Root and unprivileged
# (unprivileged.sh runs it again as another user). TAP.

import atexit
import http.server
import json
import os
import re
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from rpcclient import CORDON, Tap  # noqa: E402
from upstream import serve_upstream  # noqa: E402

t = Tap()
WHO = "root" if os.geteuid() == 0 else "unprivileged"
BASE = tempfile.mkdtemp(prefix="cordon-ownproxy.", dir="/var/tmp")
atexit.register(shutil.rmtree, BASE, True)
os.chmod(BASE, 0o755)


HTTP = serve_upstream()
PORT = HTTP.server_address[1]
CRT = None
if shutil.which("openssl"):
    crt, key = os.path.join(BASE, "crt.pem"), os.path.join(BASE, "key.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=ok.test",
                        "-addext", "subjectAltName=DNS:ok.test"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode == 0:
        os.chmod(crt, 0o644)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        TLS = serve_upstream(ctx)
        TLS_PORT = TLS.server_address[1]
        CRT = crt

ENV = dict(os.environ)
ENV.pop("CORDON_TEST_DISABLE", None)
ENV.pop("TMPDIR", None)
if os.environ.get("CD_POLICYDIR"):
    ENV["CORDON_POLICY_PATH"] = os.environ["CD_POLICYDIR"]
ENV["CORDON_TEST_PROXY_RESOLVE"] = "ok.test=127.0.0.1,www.ok.test=127.0.0.1,denied.test=127.0.0.1"
URL = "http://ok.test:%d/" % PORT
RULES = ["--allow-domain", "**.ok.test", "--deny-domain", "www.ok.test",
         "--allow-cidr", "127.0.0.0/8"]
MANAGED = ["run", "--network", "managed"] + RULES + ["--"]
CURL = shutil.which("curl")


def run(args, env=None, timeout=120):
    p = subprocess.run([CORDON] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env or ENV, timeout=timeout, cwd=BASE)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def audit(err, decision, method, target):
    return re.search(r"^cordon: proxy: %s %s %s " % (decision, method, re.escape(target)), err,
                     re.M) is not None


# ---- options and refusals

for args, want in ((["--allow-domain", "bad..name"], "--allow-domain 'bad..name'"),
                   (["--deny-domain", ""], "--deny-domain ''"),
                   (["--allow-cidr", "127.0.0.1/8"], "--allow-cidr '127.0.0.1/8'"),
                   (["--proxy-mode", "open"], "--proxy-mode: unknown mode 'open'")):
    rc, out, err = run(["run", "--network", "managed"] + args + ["--", "true"])
    t.ok(rc == 2 and want in err, "[%s] %s is a usage error naming it" % (WHO, " ".join(args)),
         err)
rc, out, err = run(["run", "--allow-domain", "ok.test", "--", "true"])
t.ok(rc == 2 and "need a managed network" in err,
     "[%s] --allow-domain without a managed network is a usage error" % WHO, err)
rc, out, err = run(["run", "--network", "managed", "--network-proxy", "unix:/nonexistent/p.sock",
                    "--allow-domain", "ok.test", "--", "true"])
t.ok(rc == 2 and "--network-proxy has its own" in err,
     "[%s] the rules of cordon's proxy do not go with an external proxy" % WHO, err)

rc, out, err = run(["explain", "--network", "managed"] + RULES + ["--proxy-mode", "limited"])
t.ok(rc == 0 and "proxy: cordon's own" in out and "allow: **.ok.test" in out and
     "deny:  www.ok.test" in out and "allow addresses: 127.0.0.0/8" in out and
     "mode: limited" in out,
     "[%s] explain shows cordon's proxy, its rules and its mode" % WHO, err + out)
rc, out, err = run(["explain", "--network", "managed"])
t.ok(rc == 0 and "no domain is allowed, so the command has no network" in out,
     "[%s] explain says plainly that no allowed domain means no network" % WHO, err + out)
rc, out, err = run(["explain", "--json", "--network", "managed"] + RULES)
try:
    mn = json.loads(out)["linux"]["managed_network"]
except (ValueError, KeyError, TypeError):
    mn = None
t.ok(mn and mn["proxy"] is None and mn["own_proxy"] ==
     {"mode": "full", "allow_domains": ["**.ok.test"], "deny_domains": ["www.ok.test"],
      "allow_cidrs": ["127.0.0.0/8"], "network": True, "socks5": False},
     "[%s] explain --json shows cordon's proxy and its rules" % WHO, err + out[:3000])

# ---- git clone over HTTP (git's own libcurl, through http_proxy) ----

GIT = shutil.which("git")
if GIT:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_):
            pass

    genv = dict(ENV, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t.test", GIT_COMMITTER_NAME="t",
                GIT_COMMITTER_EMAIL="t@t.test", GIT_CONFIG_NOSYSTEM="1", HOME=BASE)
    src, srv = os.path.join(BASE, "git-src"), os.path.join(BASE, "git-srv")
    os.mkdir(srv)
    for argv in (["init", "-q", src], ["-C", src, "commit", "-q", "--allow-empty", "-m", "one"],
                 ["clone", "-q", "--bare", src, os.path.join(srv, "repo.git")],
                 ["-C", os.path.join(srv, "repo.git"), "update-server-info"]):
        subprocess.run([GIT] + argv, check=True, env=genv, stdout=subprocess.DEVNULL)
    gsrv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: Quiet(*a, directory=srv))
    threading.Thread(target=gsrv.serve_forever, daemon=True).start()
    gport = gsrv.server_address[1]
    ws = os.path.join(BASE, "git-ws")
    os.mkdir(ws)
    clone = os.path.join(ws, "c")
    rc, out, err = run(["run", "--profile", "workspace-write", "--workspace-root", ws,
                        "--network", "managed"] + RULES +
                       ["--", GIT, "clone", "-q", "http://ok.test:%d/repo.git" % gport, clone],
                       env=genv)
    got = subprocess.run([GIT, "-C", clone, "log", "--format=%s"], env=genv,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    t.ok(rc == 0 and got == "one\n" and audit(err, "allow", "GET", "ok.test:%d" % gport),
         "[%s] git clone over HTTP through cordon's proxy, audited" % WHO, err + out + got)
    rc, out, err = run(["run", "--profile", "workspace-write", "--workspace-root", ws,
                        "--network", "managed"] + RULES +
                       ["--", GIT, "clone", "-q", "http://www.ok.test:%d/repo.git" % gport,
                        os.path.join(ws, "d")], env=genv)
    t.ok(rc != 0 and "403" in err and not os.path.exists(os.path.join(ws, "d", ".git")) and
         audit(err, "deny", "GET", "www.ok.test:%d" % gport),
         "[%s] git clone of a denied name: 403, nothing cloned" % WHO, err + out)
else:
    t.skip("[%s] git clone over HTTP" % WHO, "git is not installed")
    t.skip("[%s] git clone of a denied name" % WHO, "git is not installed")

# ---- no domain allowed: no network, said

rc, out, err = run(["run", "--network", "managed", "--", sys.executable, "-c",
                    "import urllib.request, sys\n"
                    "try:\n"
                    "    urllib.request.urlopen(sys.argv[1], timeout=60)\n"
                    "except Exception as e:\n"
                    "    print('refused', getattr(e, 'code', e))\n", URL])
t.ok(rc == 0 and out.strip() == "refused 403" and "no domain is allowed" in err,
     "[%s] with no domain allowed the run warns and every request is refused" % WHO, err + out)

# ---- through cordon's proxy

rc, out, err = run(MANAGED + [sys.executable, "-c",
                              "import urllib.request, sys; "
                              "print(urllib.request.urlopen(sys.argv[1], timeout=60)"
                              ".read().decode())", URL])
t.ok(rc == 0 and out.strip() == "hello from upstream",
     "[%s] urllib reaches an allowed name through cordon's proxy" % WHO, err + out)
t.ok(audit(err, "allow", "GET", "ok.test:%d" % PORT),
     "[%s] an audit line on stderr records the allowed request" % WHO, err)

if CURL:
    rc, out, err = run(MANAGED + [CURL, "-sS", "--max-time", "60", URL])
    t.ok(rc == 0 and out == "hello from upstream",
         "[%s] curl: plain HTTP through HTTP_PROXY" % WHO, err + out)
    rc, out, err = run(MANAGED + [CURL, "-sS", "-p", "--max-time", "60", URL])
    t.ok(rc == 0 and out == "hello from upstream" and
         audit(err, "allow", "CONNECT", "ok.test:%d" % PORT),
         "[%s] curl -p: a CONNECT tunnel, audited" % WHO, err + out)
    if CRT:
        rc, out, err = run(MANAGED + [CURL, "-sS", "--cacert", CRT, "--max-time", "60",
                                      "https://ok.test:%d/" % TLS_PORT])
        t.ok(rc == 0 and out == "hello from upstream",
             "[%s] curl: HTTPS through HTTPS_PROXY (a tunnel to the name)" % WHO, err + out)
    else:
        t.skip("[%s] curl: HTTPS through HTTPS_PROXY" % WHO, "no openssl for a certificate")
    rc, out, err = run(MANAGED + [CURL, "-sS", "--max-time", "60",
                                  "http://www.ok.test:%d/" % PORT])
    t.ok(rc == 0 and "www.ok.test" in out and "deny-domain www.ok.test" in out and
         audit(err, "deny", "GET", "www.ok.test:%d" % PORT),
         "[%s] a denied name gets 403 naming the rule, audited" % WHO, err + out)
    rc, out, err = run(MANAGED + [CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                  "--max-time", "60", "http://denied.test:%d/" % PORT])
    t.ok(rc == 0 and out == "403", "[%s] a name that no rule allows gets 403" % WHO, err + out)
    rc, out, err = run(MANAGED + [CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                  "--max-time", "60", "http://192.0.2.7/"])
    t.ok(rc == 0 and out == "403" and audit(err, "deny", "GET", "192.0.2.7:80"),
         "[%s] an IP literal outside the CIDRs is refused" % WHO, err + out)
    rc, out, err = run(MANAGED + [CURL, "-sS", "--noproxy", "*", "--max-time", "60",
                                  "http://127.0.0.1:%d/" % PORT])
    t.ok(rc == 7 and out == "", "[%s] curl --noproxy '*' to the upstream fails" % WHO, err)
    rc, out, err = run(["run", "--network", "managed"] + RULES + ["--proxy-mode", "limited", "--",
                       CURL, "-sS", "-p", "--max-time", "60", URL])
    t.ok(rc != 0 and out == "", "[%s] limited mode: a CONNECT tunnel is refused" % WHO,
         err + out)
    rc, out, err = run(["run", "--network", "managed"] + RULES + ["--proxy-mode", "limited", "--",
                       CURL, "-sS", "--max-time", "60", URL])
    t.ok(rc == 0 and out == "hello from upstream", "[%s] limited mode: GET goes through" % WHO,
         err + out)
else:
    for what in ("curl: plain HTTP", "curl -p", "curl: HTTPS", "a denied name", "a name no rule "
                 "allows", "an IP literal", "curl --noproxy", "limited: CONNECT", "limited: GET"):
        t.skip("[%s] %s" % (WHO, what), "curl is not installed")

rc, out, err = run(MANAGED + [sys.executable, "-c",
                              "import socket, sys\n"
                              "try:\n"
                              "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), 10)\n"
                              "    print('connected')\n"
                              "except OSError as e:\n"
                              "    print(e.__class__.__name__)\n", str(PORT)])
t.ok(rc == 0 and out.strip() == "ConnectionRefusedError",
     "[%s] a raw connect to the upstream fails" % WHO, err + out)

# ---- the rules from a policy file's network object

PROFILE = os.path.join(BASE, "managed.json")
with open(PROFILE, "w") as f:
    f.write('{\n  "version": 1,\n  "type": "managed",\n'
            '  "file_system": {"type": "unrestricted"},\n'
            '  "network": {\n    "mode": "managed",\n'
            '    "allow_domains": ["**.ok.test"],\n'
            '    "deny_domains": ["www.ok.test"],\n'
            '    "allow_cidrs": ["127.0.0.0/8"]\n  }\n}\n')
os.chmod(PROFILE, 0o644)
FETCH = ("import urllib.request, sys\n"
         "for u in sys.argv[1:]:\n"
         "    try:\n"
         "        print(urllib.request.urlopen(u, timeout=60).read().decode())\n"
         "    except Exception as e:\n"
         "        print('refused', getattr(e, 'code', e))\n")
rc, out, err = run(["run", "--profile", PROFILE, "--", sys.executable, "-c", FETCH, URL,
                    "http://www.ok.test:%d/" % PORT])
t.ok(rc == 0 and out.split("\n")[:2] == ["hello from upstream", "refused 403"],
     "[%s] a profile's network object gives cordon's proxy its rules" % WHO, err + out)
rc, out, err = run(["run", "--profile", PROFILE, "--deny-domain", "ok.test", "--",
                    sys.executable, "-c", FETCH, URL])
t.ok(rc == 0 and out.strip() == "refused 403",
     "[%s] the command line's rules add to the profile's" % WHO, err + out)
with open(PROFILE, "w") as f:
    f.write('{\n  "version": 1,\n  "type": "managed",\n'
            '  "file_system": {"type": "unrestricted"},\n'
            '  "network": {\n    "mode": "managed",\n'
            '    "allow_domains": ["ok.test", "bad..name"]\n  }\n}\n')
rc, out, err = run(["run", "--profile", PROFILE, "--", "true"])
t.ok(rc == 125 and (PROFILE + ":7:34: error: domain pattern \"bad..name\"") in err and
     "network.allow_domains[1]" in err,
     "[%s] a bad pattern in the profile is refused at its file:line:col" % WHO, err)

# ---- the proxy killed mid-run: no network left

MIDRUN = r'''
import socket, sys, urllib.request
url = sys.argv[1]
print(urllib.request.urlopen(url, timeout=60).read().decode(), flush=True)
sys.stdin.readline()
try:
    print("after:", urllib.request.urlopen(url, timeout=60).read().decode(), flush=True)
except Exception as e:
    print("after: failed", type(e).__name__, flush=True)
try:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=60)
    s.sendall(b"CONNECT ok.test:%s HTTP/1.1\r\n\r\n" % sys.argv[2].encode())
    print("relay:", repr(s.recv(100)), flush=True)
except Exception as e:
    print("relay: failed", type(e).__name__, flush=True)
'''
p = subprocess.Popen([CORDON, "run", "-v", "--network", "managed"] + RULES +
                     ["--", sys.executable, "-c", MIDRUN, URL, str(PORT)],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     env=ENV, cwd=BASE)
pid, sockpath, head = None, None, ""
for line in p.stderr:
    line = line.decode(errors="replace")
    head += line
    m = re.match(r"cordon: managed network: cordon's proxy, pid (\d+), on unix:(\S+)$", line)
    if m:
        pid, sockpath = int(m.group(1)), m.group(2)
        break
if not t.ok(pid is not None, "[%s] cordon run -v names its proxy's pid and socket" % WHO, head):
    p.kill()
    t.done()
first = p.stdout.readline().decode().strip()
t.eq(first, "hello from upstream", "[%s] mid-run: the first request gets through" % WHO)
st = os.stat(os.path.dirname(sockpath))
t.ok(stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid(),
     "[%s] the proxy's socket is in a 0700 directory of the caller's" % WHO, oct(st.st_mode))
with open("/proc/%d/comm" % pid) as f:
    comm = f.read().strip()
t.eq(comm, "cordon-proxy", "[%s] the named pid is cordon's proxy" % WHO)
os.kill(pid, signal.SIGKILL)
p.stdin.write(b"go\n")
p.stdin.flush()
rest, err = p.communicate(timeout=120)
rest, err = rest.decode(), err.decode(errors="replace")
t.ok(p.returncode == 0 and "after: failed" in rest and
     ("relay: b''" in rest or "relay: failed ConnectionResetError" in rest),
     "[%s] mid-run: once the proxy is killed, requests fail and the relay only closes" % WHO,
     rest + err)
t.ok("cordon's proxy stopped during the run" in err,
     "[%s] cordon says the proxy stopped during the run" % WHO, err)
t.ok(not os.path.exists(os.path.dirname(sockpath)),
     "[%s] the proxy's directory is removed at the end" % WHO, sockpath)

# ---- cordon killed: its proxy goes too


def gone(pid):
    """The process has exited (a zombie that nobody reaped yet counts)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


p = subprocess.Popen([CORDON, "run", "-v", "--network", "managed"] + RULES +
                     ["--", sys.executable, "-c", "import sys; print('up', flush=True); "
                      "sys.stdin.read()"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     env=ENV, cwd=BASE)
pid, sockpath = None, None
for line in p.stderr:
    m = re.match(r"cordon: managed network: cordon's proxy, pid (\d+), on unix:(\S+)$",
                 line.decode(errors="replace"))
    if m:
        pid, sockpath = int(m.group(1)), m.group(2)
        break
t.eq(p.stdout.readline().strip(), b"up", "[%s] a managed run with cordon's proxy is up" % WHO)
p.kill()
p.wait()
# The proxy sees its end of the pair close and exits; then its keeper (the
# unconfined parent) removes the directory: wait for both events, bounded
# only as a safeguard.
deadline = time.monotonic() + 120
while pid and (not gone(pid) or os.path.exists(os.path.dirname(sockpath))) and \
        time.monotonic() < deadline:
    time.sleep(0.05)
t.ok(pid and gone(pid) and not os.path.exists(os.path.dirname(sockpath)),
     "[%s] a SIGKILLed cordon run takes its proxy and its directory with it" % WHO,
     repr((pid, sockpath)))

t.done()
