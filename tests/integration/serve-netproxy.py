#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: process/start with networkProxy (exec-server reference
# 3.4, 3.5 step 1, 4.6) starts cordon's own proxy for that process
# (`cordon proxy`, a child of the server) and fences the sandbox to it. An
# allowed name reaches the loopback upstream (the proxy's test resolver,
# CORDON_TEST_PROXY_RESOLVE, and allowLocalBinding, which lets names lead to
# loopback); a name not allowed and a denied one get 403 with the rule; a
# direct connect fails; the variables name the relay; the server's log has
# the audit lines. The proxy is gone once the process is closed; a proxy
# killed mid-run leaves the process with no network. Bad params: -32602
# with the released binary's messages, or cordon's reason for what it
# cannot enforce, and nothing runs. Root and unprivileged (unprivileged.sh).
# TAP.

import atexit
import json
import os
import select
import shutil
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from rpcclient import (LOOPS, ROOT_READ, WAIT, Server, Tap, b64, children_of,  # noqa: E402
                       cordon_usable, err_code, err_msg, path_entry, pid_alive, wait_gone)
from upstream import serve_upstream  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
if not hasattr(os, "pidfd_open"):
    t.skip_all("Python has no os.pidfd_open (3.9+)")
WHO = "root" if os.geteuid() == 0 else "unprivileged"
BASE = tempfile.mkdtemp(prefix="cordon-netproxy.", dir="/var/tmp")
atexit.register(shutil.rmtree, BASE, True)
os.chmod(BASE, 0o755)


upstream = serve_upstream()
UPORT = upstream.server_address[1]

# Waits for a line on stdin (the test's go), then tries the network.
PROBE = r'''
import errno, json, os, socket, sys, urllib.request
uport = int(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
res = {}
def attempt(name, fn):
    try:
        res[name] = "ok: %s" % (fn(),)
    except Exception as e:
        code = getattr(e, "code", None) or errno.errorcode.get(getattr(e, "errno", None) or 0, e)
        body = ""
        if hasattr(e, "read"):
            body = e.read().decode(errors="replace")
        res[name] = "%s: %s" % (type(e).__name__, code)
        res[name + " body"] = body
def get(url):
    return lambda: urllib.request.urlopen(url, timeout=30).read().decode()
def direct(port):
    def fn():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.close()
        return "connected"
    return fn
attempt("allowed", get("http://ok.test:%d/" % uport))
attempt("not allowed", get("http://other.test:%d/" % uport))
attempt("denied", get("http://bad.test:%d/" % uport))
attempt("direct upstream", direct(uport))
def recv_n(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise OSError("closed after %d bytes" % len(b))
        b += c
    return b
def socks(name, port):
    def fn():
        host, p = os.environ["ALL_PROXY"][len("socks5h://"):].rsplit(":", 1)
        s = socket.create_connection((host, int(p)), timeout=30)
        s.sendall(b"\x05\x01\x00")
        if recv_n(s, 2) != b"\x05\x00":
            raise OSError("greeting refused")
        n = name.encode()
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(n)]) + n + port.to_bytes(2, "big"))
        rep = recv_n(s, 4)
        if rep[1] != 0:
            raise OSError("reply %d" % rep[1])
        recv_n(s, {1: 6, 4: 18}[rep[3]])
        s.sendall(b"GET / HTTP/1.0\r\nHost: %s\r\n\r\n" % n)
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
        return data.split(b"\r\n\r\n", 1)[1].decode()
    return fn
if os.environ.get("ALL_PROXY", "").startswith("socks5h://"):
    attempt("socks allowed", socks("ok.test", uport))
    attempt("socks denied", socks("bad.test", uport))
res["env"] = dict(os.environ)
print(json.dumps(res), flush=True)
'''
PROBE_PATH = os.path.join(BASE, "probe.py")
with open(PROBE_PATH, "w") as f:
    f.write(PROBE)
os.chmod(PROBE_PATH, 0o644)
ARGV = [sys.executable, PROBE_PATH, str(UPORT)]
SANDBOX = {"permissions": ROOT_READ, "windowsSandboxLevel": "disabled"}

# The server's TMPDIR, where the proxies' sockets are: writable by the swap check's sandbox.
TMP = os.path.join(BASE, "tmp")
os.mkdir(TMP)
# Told its own proxy's directory, renames every other proxy's socket onto it, then fetches.
SWAP = r'''
import glob, os, sys, urllib.request
print("ready", flush=True)
mine = sys.stdin.readline().strip()
for d in glob.glob(os.path.join(os.path.dirname(mine), "cordon-netproxy-*")):
    if d != mine:
        os.rename(os.path.join(d, "proxy.sock"), os.path.join(mine, "proxy.sock"))
        print("swapped", flush=True)
try:
    print("ok:", urllib.request.urlopen("http://ok.test:%s/" % sys.argv[1], timeout=30).read())
except Exception as e:
    print("refused:", getattr(e, "code", e))
'''
SWAP_PATH = os.path.join(BASE, "swap.py")
with open(SWAP_PATH, "w") as f:
    f.write(SWAP)
os.chmod(SWAP_PATH, 0o644)


def proxy_config(**kw):
    p = {"enabled": True, "enableSocks5": False, "enableSocks5Udp": False,
         "allowUpstreamProxy": True, "dangerouslyAllowAllUnixSockets": False, "mode": "full",
         "domains": {"ok.test": "allow", "**.bad.test": "deny", "x.test": "none"},
         "unixSockets": None, "allowLocalBinding": True}
    p.update(kw)
    return {"proxy": p, "auditMetadata": {"model": "m"}, "environmentId": "e"}


def proxies_of(server_pid):
    """The server's children that are `cordon proxy --listen-fd` processes."""
    found = []
    for c in children_of(server_pid):
        try:
            with open("/proc/%d/cmdline" % c, "rb") as f:
                if f.read().startswith(b"cordon\0proxy\0--listen-fd\0"):
                    found.append(c)
        except OSError:
            pass
    return found


def wait_exit(pidfd):
    """Wait for the process of pidfd to end (bounded by WAIT: a failing test only)."""
    r, _, _ = select.select([pidfd], [], [], WAIT)
    return bool(r)


def result_of(s, pid):
    out = s.wait_closed(pid)
    try:
        return json.loads(out.stdout.decode().split("\n", 1)[1])
    except (IndexError, ValueError):
        return {"raw": out.stdout.decode(errors="replace") + out.stderr.decode("replace")}


def start_probe(s, pid, sandbox=SANDBOX, np=None):
    r = s.start(pid, ARGV, cwd=BASE, env={"PATH": "/usr/bin:/bin", "HTTP_PROXY": "x"},
                sandbox=sandbox, pipeStdin=True, networkProxy=np or proxy_config())
    return r, ("result" in r and s.wait_output(pid, b"ready\n"))


# A file the server inherits (not close-on-exec), as from a careless caller.
INHERITED = os.path.join(BASE, "inherited")
with open(INHERITED, "w") as f:
    f.write("the server's caller's")
INHERITED_FD = os.dup2(os.open(INHERITED, os.O_RDONLY), 100)


def fds_of(pid):
    """What /proc says pid's descriptors are; None when we may not look (not dumpable)."""
    try:
        return [os.readlink("/proc/%d/fd/%s" % (pid, fd))
                for fd in os.listdir("/proc/%d/fd" % pid)]
    except PermissionError:
        return None


def scenario(loop):
    tag = "%s %s" % (WHO, loop)
    s = Server(loop=loop, pass_fds=(INHERITED_FD,), extra_env={
        "TMPDIR": TMP,
        "CORDON_TEST_PROXY_RESOLVE": "ok.test=127.0.0.1,other.test=127.0.0.1,bad.test=127.0.0.1"})
    s.handshake()
    try:
        # ---- the proxy at work, and gone at closed ----
        r, ready = start_probe(s, "np")
        t.ok(ready, "[%s] a sandboxed process with networkProxy starts" % tag, r)
        proxies = proxies_of(s.server_pid) if ready else []
        t.eq(len(proxies), 1, "[%s] the server runs one `cordon proxy` for it" % tag)
        pidfd = os.pidfd_open(proxies[0]) if proxies else None
        st = {}
        if proxies:
            with open("/proc/%d/status" % proxies[0]) as f:
                st = dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)
        t.ok(st.get("NoNewPrivs") == "1" and st.get("Seccomp") == "2" and
             st.get("CapEff") == "0000000000000000" and
             (WHO != "root" or st.get("Uid", "").split()[:1] == ["65534"]),
             "[%s] the proxy is confined: no_new_privs, seccomp, no capabilities%s" %
             (tag, ", nobody's uid" if WHO == "root" else ""), st)
        fds = fds_of(proxies[0]) if proxies else []
        if fds is None:
            t.skip("[%s] the proxy holds none of the server's inherited files" % tag,
                   "the proxy is not dumpable: its user cannot list its descriptors")
        else:
            t.ok(proxies and INHERITED not in fds,
                 "[%s] the proxy holds none of the server's inherited files" % tag, fds)
        s.request("process/write", {"processId": "np", "chunk": b64("go\n"), "writeId": "1"})
        res = result_of(s, "np") if ready else {}
        t.eq(res.get("allowed"), "ok: hello from upstream",
             "[%s] an allowed name reaches the upstream through the proxy" % tag)
        t.ok(res.get("not allowed") == "HTTPError: 403" and
             "other.test" in res.get("not allowed body", ""),
             "[%s] a name not allowed gets 403 with the reason" % tag, res)
        t.ok(res.get("denied") == "HTTPError: 403" and "bad.test" in res.get("denied body", ""),
             "[%s] a denied name gets 403 with the reason" % tag, res)
        t.ok(res.get("direct upstream", "ok").startswith(("ConnectionRefusedError", "OSError")),
             "[%s] a direct connect to the upstream fails" % tag, res.get("direct upstream"))
        pe = res.get("env", {})
        t.eq((pe.get("HTTP_PROXY"), pe.get("https_proxy"), pe.get("ALL_PROXY"),
              pe.get("CODEX_NETWORK_PROXY_ACTIVE"), pe.get("CODEX_NETWORK_ALLOW_LOCAL_BINDING")),
             ("http://127.0.0.1:3128", "http://127.0.0.1:3128", "http://127.0.0.1:3128", "1", "1"),
             "[%s] the proxy variables name the relay (the client's HTTP_PROXY replaced)" % tag)
        if pidfd is not None:
            t.ok(wait_exit(pidfd), "[%s] the proxy exits once the process is closed" % tag)
            os.close(pidfd)
            t.ok(wait_gone(proxies), "[%s] and is reaped by the server" % tag)
        else:
            t.not_ok("[%s] the proxy exits once the process is closed" % tag)
            t.not_ok("[%s] and is reaped by the server" % tag)
        # The proxy writes a line as each connection ends (at its stop for one still
        # open): wait for them to be read, not for time.
        t.ok(s.wait_stderr("proxy (process np): allow GET ok.test:%d" % UPORT,
                           "proxy (process np): deny GET other.test:%d" % UPORT,
                           "proxy (process np): deny GET bad.test:%d" % UPORT),
             "[%s] the server's log has the proxy's audit lines, naming the process" % tag,
             s.stderr_text()[-3000:])

        # ---- a proxy killed mid-run: no network, never another way out ----
        r, ready = start_probe(s, "kill")
        proxies = proxies_of(s.server_pid) if ready else []
        t.eq(len(proxies), 1, "[%s] a second process gets a proxy of its own" % tag)
        if proxies:
            pidfd = os.pidfd_open(proxies[0])
            os.kill(proxies[0], signal.SIGKILL)
            t.ok(wait_exit(pidfd), "[%s] its proxy is killed" % tag)
            os.close(pidfd)
        s.request("process/write", {"processId": "kill", "chunk": b64("go\n"), "writeId": "1"})
        res = result_of(s, "kill") if ready else {}
        t.ok("allowed" in res and not res["allowed"].startswith("ok") and
             not res["direct upstream"].startswith("ok"),
             "[%s] with its proxy killed, the process has no network" % tag, res)
        t.ok(s.wait_stderr("its network proxy (pid", "the process has no network from now on"),
             "[%s] the server logs the proxy's end" % tag, s.stderr_text()[-2000:])

        # ---- network enabled in the permissions: still only the proxy ----
        # (Its ID has a newline, "): allow" and 100 two-byte characters: the audit
        # lines name it escaped and cut, and the proxy still starts.)
        weird = "en\nabled): allow-" + "\u00e9" * 100
        sb = {"permissions": dict(ROOT_READ, network="enabled"), "windowsSandboxLevel": "disabled"}
        r, ready = start_probe(s, weird, sandbox=sb)
        proxies = proxies_of(s.server_pid) if ready else []
        s.request("process/write", {"processId": weird, "chunk": b64("go\n"), "writeId": "1"})
        res = result_of(s, weird) if ready else {}
        wait_gone(proxies)
        t.ok(res.get("allowed") == "ok: hello from upstream" and
             res.get("direct upstream", "ok").startswith(("ConnectionRefusedError", "OSError")),
             "[%s] with network enabled in the permissions, still only the proxy" % tag, res)
        # 8 + 26 bytes (":" is kept), then 40 bytes of the ID escaped (4 each) reach
        # 194 > 190: cut.
        t.ok(s.wait_stderr("proxy (process en\\x0aabled\\x29:\\x20allow-"
                           + "\\xc3\\xa9" * 20 + "...): allow GET ok.test:%d" % UPORT),
             "[%s] a process ID is escaped and cut in the audit lines (no second decision)"
             % tag, s.stderr_text()[-2000:])

        # ---- enableSocks5 (Codex's default): SOCKS5 on the same relay port ----
        r, ready = start_probe(s, "socks", np=proxy_config(enableSocks5=True,
                                                           enableSocks5Udp=True))
        t.ok(ready, "[%s] enableSocks5 (and enableSocks5Udp) is taken" % tag, r)
        proxies = proxies_of(s.server_pid) if ready else []
        s.request("process/write", {"processId": "socks", "chunk": b64("go\n"), "writeId": "1"})
        res = result_of(s, "socks") if ready else {}
        wait_gone(proxies)
        pe = res.get("env", {})
        t.eq((pe.get("ALL_PROXY"), pe.get("all_proxy"), pe.get("HTTP_PROXY")),
             ("socks5h://127.0.0.1:3128", "socks5h://127.0.0.1:3128", "http://127.0.0.1:3128"),
             "[%s] with SOCKS5, ALL_PROXY names socks5h:// at the relay, HTTP_PROXY http://" % tag)
        t.eq(res.get("socks allowed"), "ok: hello from upstream",
             "[%s] an allowed name reaches the upstream through SOCKS5" % tag)
        t.eq(res.get("socks denied"), "OSError: reply 2",
             "[%s] a denied name is refused by SOCKS5 (reply 2: not allowed by the rules)" % tag)
        t.eq(res.get("allowed"), "ok: hello from upstream",
             "[%s] and HTTP through the same relay still works" % tag)

        # ---- a sandbox that can write the sockets' directory: its own proxy, still ----
        # Process "lender" has a proxy allowing ok.test; process "swap", allowed nothing and
        # able to write TMP, renames the lender's socket onto its own proxy's name.
        r = s.start("lender", ["sleep", "1000"], cwd=BASE, sandbox=SANDBOX,
                    networkProxy=proxy_config(domains={"ok.test": "allow"}))
        before = set(os.listdir(TMP))
        wsb = {"permissions": dict(ROOT_READ, file_system={
            "type": "restricted",
            "entries": ROOT_READ["file_system"]["entries"] + [path_entry(TMP, "write")]}),
            "windowsSandboxLevel": "disabled"}
        r2 = s.start("swap", [sys.executable, SWAP_PATH, str(UPORT)], cwd=BASE, sandbox=wsb,
                     pipeStdin=True, env={"PATH": "/usr/bin:/bin"},
                     networkProxy=proxy_config(domains={}))
        ready = "result" in r and "result" in r2 and s.wait_output("swap", b"ready\n")
        mine = sorted(d for d in set(os.listdir(TMP)) - before
                      if d.startswith("cordon-netproxy-"))
        t.ok(ready and len(mine) == 1, "[%s] two processes with proxies start" % tag, (r, r2))
        if ready and mine:
            s.request("process/write", {"processId": "swap", "writeId": "1",
                                        "chunk": b64(os.path.join(TMP, mine[0]) + "\n")})
        out = s.wait_closed("swap").stdout.decode(errors="replace") if ready else ""
        t.ok("swapped" in out and "refused: 403" in out,
             "[%s] another proxy's socket renamed onto its own name is not reached" % tag, out)
        s.request("process/terminate", {"processId": "lender"})
        s.wait_closed("lender")
        t.ok(wait_gone(proxies_of(s.server_pid)), "[%s] both proxies stop at closed" % tag)

        # ---- bad params: -32602, nothing runs ----
        marker = os.path.join(BASE, "marker")
        touch = ["sh", "-c", "touch '%s'" % marker]
        p = proxy_config()["proxy"]
        no_enabled = dict(p)
        del no_enabled["enabled"]
        cases = [
            ("not an object", 5,
             "invalid type: number, expected struct RemoteNetworkProxyLaunchConfig"),
            ("no proxy", {}, "missing field `proxy`"),
            ("proxy not an object", {"proxy": []},
             "invalid type: sequence, expected struct RemoteNetworkProxyConfig"),
            ("no enabled", {"proxy": no_enabled}, "missing field `enabled`"),
            ("enabled a string", proxy_config(enabled="yes"),
             "invalid type: string \"yes\", expected a boolean"),
            ("a bad mode", proxy_config(mode="open"),
             "unknown variant `open`, expected `limited` or `full`"),
            ("domains a list", proxy_config(domains=[]), "invalid type: sequence, expected a map"),
            ("a bad permission", proxy_config(domains={"a.test": "yes"}),
             "unknown variant `yes`, expected one of `none`, `allow`, `deny`"),
            ("a bad socket permission", proxy_config(unixSockets={"/s": "yes"}),
             "unknown variant `yes`, expected `allow` or `deny`"),
            ("a relative socket", proxy_config(unixSockets={"s": "allow"}),
             "invalid network proxy config: invalid network.allow_unix_sockets[0]: expected a "
             "NUL-free absolute path for Linux, got \"s\""),
            ("a disabled proxy", proxy_config(enabled=False),
             "invalid network proxy config: executor-local network proxy launch requires an "
             "enabled proxy"),
            ("a bad executionId", dict(proxy_config(), executionId=5),
             "invalid type: number, expected a string"),
            ("a bad pattern", proxy_config(domains={"a.*.test": "allow"}), None),
            ("a unix socket allowed", proxy_config(unixSockets={"/run/x.sock": "allow"}), None),
            ("all unix sockets", proxy_config(dangerouslyAllowAllUnixSockets=True), None),
        ]
        for i, (desc, np, msg) in enumerate(cases):
            r = s.start("refuse%d" % i, touch, cwd=BASE, sandbox=SANDBOX, networkProxy=np)
            if msg is None:
                good = err_code(r) == -32602 and err_msg(r).startswith(
                    ("invalid network proxy config: domain pattern \"a.*.test\": ",
                     "networkProxy: unix sockets cannot be allowed by this executor"))
            else:
                good = err_code(r) == -32602 and err_msg(r) == msg
            t.ok(good, "[%s] %s: -32602 %r" % (tag, desc, msg or err_msg(r)), r)
        r = s.start("refuse-nosandbox", touch, cwd=BASE, networkProxy=proxy_config())
        t.ok(err_code(r) == -32602 and err_msg(r).startswith("networkProxy requires `sandbox`"),
             "[%s] no sandbox: -32602, the proxy could be gone around" % tag, r)
        t.ok(not os.path.exists(marker), "[%s] no refused start ran anything" % tag)
        t.eq(proxies_of(s.server_pid), [], "[%s] no proxy is left running" % tag)
        r = s.start("null", touch, cwd=BASE, sandbox=SANDBOX, networkProxy=None)
        t.ok("result" in r, "[%s] networkProxy null is no proxy" % tag, r)
        s.wait_closed("null")
    finally:
        s.stop()


for loop in LOOPS:
    scenario(loop)
t.done()
