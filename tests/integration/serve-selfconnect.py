#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# A sandboxed process must not reach the server that sandboxes it. It runs
# as the server's uid, so the uid rules of the unix socket and of a loopback
# ws:// listener would admit it, and an unsandboxed process/start would then
# take it out of its sandbox. Here a sandboxed process whose network is
# enabled (and whose file system is read-only) tries exactly that: over the
# unix socket's own path (hidden from the sandbox: nothing to connect to),
# over a hard link to the socket made beforehand (not hidden: the server
# refuses the client), over loopback ws:// (refused: its socket is held by a
# process of a sandbox), and from a thread whose descriptors nobody else can
# see (refused: the holder cannot be told). It must never get to run
# `id > MARKER` outside; nor may a sandbox of another cordon server. An
# unsandboxed process/start of the same server still connects back, and
# ordinary clients connect (non-dumpable ones too, over the unix socket, or
# while no sandbox has network access), also while a sandbox with network
# access runs. The token file of a ws:// server is hidden from its
# sandboxes. Unprivileged, a server whose sandboxes have no pid namespace
# (--allow-degraded=pid-isolation) refuses them too. TAP.

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, WAIT, Eof, Server, Tap, Timeout, cordon_usable,  # noqa: E402
                       profile, special)
from netclient import HandshakeError, NetServer  # noqa: E402

LIB = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
ROOT = os.geteuid() == 0
# Read-only file system, open network: only the server could write a file for it.
NET_RO = profile([special("root", "read")], network="enabled")
SANDBOX = {"permissions": NET_RO, "windowsSandboxLevel": "disabled"}

# Run inside the sandbox: connect to the server, then ask it for an
# unsandboxed `id > MARKER`. Prints what happened as one JSON object.
ATTACK = r'''
import json, os, sys, threading
lib, mode, target, marker, how = sys.argv[1:6]
sys.path.insert(0, lib)
out = {}

def attack():
    try:
        if mode == "unix":
            from netclient import UnixConn
            conn = UnixConn(target, timeout=10)
        else:
            import netclient
            if mode == "proxy":
                # Through the networkProxy's relay: CONNECT, then the same WebSocket.
                direct = netclient.socket.create_connection

                def tunnel(addr, timeout=None):
                    s = direct(("127.0.0.1", 3128), timeout=timeout)
                    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (addr[0].encode(), addr[1]))
                    head = b""
                    while b"\r\n\r\n" not in head:
                        c = s.recv(1)
                        if not c:
                            raise OSError("the proxy closed the connection")
                        head += c
                    if b" 200 " not in head.split(b"\r\n")[0]:
                        raise OSError("the proxy said " + head.split(b"\r\n")[0].decode())
                    return s
                netclient.socket.create_connection = tunnel
            host, port = target.rsplit(":", 1)
            conn = netclient.WsConn(host, int(port), timeout=10)
    except Exception as e:
        out["connect"] = "%s: %s" % (type(e).__name__, e)
        return
    out["connect"] = "ok"
    try:
        conn.handshake("attacker")
        r = conn.start("escape", ["/bin/sh", "-c", "id > " + marker], cwd="/")
        if "error" in r:
            out["start"] = r["error"]
            return
        conn.wait_closed("escape")
        out["admitted"] = True
    except Exception as e:
        out["refused"] = "%s: %s" % (type(e).__name__, e)

if how == "thread":
    def run():
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        # CLONE_FILES: the descriptors this thread opens from now on are in
        # a table of its own, which /proc/PID/fd does not show.
        if libc.unshare(0x400) != 0:
            out["unshare"] = os.strerror(ctypes.get_errno())
            return
        attack()
    t = threading.Thread(target=run)
    t.start()
    t.join()
else:
    attack()
print(json.dumps(out))
'''

# An ordinary client that made itself non-dumpable, as the Codex CLI does: its
# /proc/PID/fd and namespace links are root's then, and the server must still
# tell where it is from what everyone may read.
NONDUMPABLE = r'''
import ctypes, json, sys
lib, mode, target = sys.argv[1:4]
sys.path.insert(0, lib)
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
try:
    if mode == "unix":
        from netclient import UnixConn
        conn = UnixConn(target, timeout=10)
    else:
        from netclient import WsConn
        host, port = target.rsplit(":", 1)
        conn = WsConn(host, int(port), timeout=10)
    conn.handshake("non-dumpable")
    print(json.dumps({"admitted": True}))
except Exception as e:
    print(json.dumps({"refused": "%s: %s" % (type(e).__name__, e)}))
'''

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
HAVE_WS = b"without the WebSocket transport" not in subprocess.run(
    [CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).stderr

work = tempfile.mkdtemp(prefix="cordon-selfconnect-")
os.chmod(work, 0o755)
attack_py = os.path.join(work, "attack.py")
with open(attack_py, "w") as f:
    f.write(ATTACK)
os.chmod(attack_py, 0o644)
nondumpable_py = os.path.join(work, "nondumpable.py")
with open(nondumpable_py, "w") as f:
    f.write(NONDUMPABLE)


def non_dumpable_client(mode, target):
    r = subprocess.run([sys.executable, nondumpable_py, LIB, mode, target],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=WAIT)
    try:
        return json.loads(r.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"output": r.stdout.decode(errors="replace")}


def attack(conn, name, mode, target, how="plain", sandbox=SANDBOX, **extra):
    """Run the attacker (sandboxed unless sandbox is None); (its report, marker written?)."""
    marker = os.path.join(work, name + ".marker")
    if sandbox:
        extra["sandbox"] = sandbox
    resp = conn.start(name, ["python3", attack_py, LIB, mode, target, marker, how], cwd=work,
                      env={"PATH": "/usr/bin:/bin"}, **extra)
    if "error" in resp:
        return {"start error": resp["error"]}, os.path.exists(marker)
    res = conn.wait_closed(name)
    try:
        report = json.loads(res.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = {"stdout": res.stdout.decode(errors="replace"),
                  "stderr": res.stderr.decode(errors="replace")}
    return report, os.path.exists(marker)


def escaped_not(report, written, desc, srv, log_has=None):
    t.ok(not written and not report.get("admitted"), desc + ": nothing ran outside the sandbox",
         "report %r, marker written: %r" % (report, written))
    if log_has is not None:
        t.ok(log_has in srv.stderr_text(), desc + ": the server says why",
             "report %r; server log:\n%s" % (report, srv.stderr_text()[-3000:]))


# ---- the unix socket ----
srv = NetServer("unix")
try:
    t.ok(srv.ready, "unix: the server listens", srv.stderr_text())
    c = srv.connect()
    c.handshake()
    t.ok(True, "unix: an ordinary client is admitted")

    report, written = attack(c, "unix-path", "unix", srv.path)
    escaped_not(report, written, "unix: a sandboxed process connecting to the socket's path", srv)
    t.ok(report.get("connect", "ok") != "ok",
         "unix: the socket's path is hidden from the sandbox (connect fails)", repr(report))

    # The socket's directory writable in the sandbox (/tmp): the mask is there all the same.
    tmp_writable = profile([special("root", "read"), special("slash_tmp", "write")],
                           network="enabled")
    report, written = attack(c, "unix-tmp", "unix", srv.path,
                             sandbox={"permissions": tmp_writable,
                                      "windowsSandboxLevel": "disabled"})
    escaped_not(report, written, "unix: with /tmp writable around the socket", srv)
    t.ok(report.get("connect", "ok") != "ok",
         "unix: ... its path is hidden there too (connect fails)", repr(report))

    alias_dir = tempfile.mkdtemp(prefix="cordon-selfconnect-alias-")
    os.chmod(alias_dir, 0o755)
    alias = os.path.join(alias_dir, "alias.sock")
    os.link(srv.path, alias)
    report, written = attack(c, "unix-link", "unix", alias)
    escaped_not(report, written, "unix: through a hard link made beforehand", srv,
                log_has="a sandboxed process")
    t.ok(report.get("connect") == "ok" and "refused" in report,
         "unix: the hard link connects, and the server closes the connection", repr(report))

    report, written = attack(c, "unix-unsandboxed", "unix", srv.path, sandbox=None)
    t.ok(written and report.get("admitted"),
         "unix: an unsandboxed process/start of the same server is admitted", repr(report))
    report = non_dumpable_client("unix", srv.path)
    t.ok(report.get("admitted"), "unix: a non-dumpable client (as the Codex CLI is) is admitted",
         "%r\n%s" % (report, srv.stderr_text()[-2000:]))

    # Another server's sandbox (a stdio one here, which knows nothing of this socket).
    other = Server()
    try:
        other.handshake()
        report, written = attack(other, "unix-other-server", "unix", srv.path)
        escaped_not(report, written, "unix: a sandbox of another cordon server", srv,
                    log_has="is in a cordon sandbox")
    finally:
        other.stop()
    shutil.rmtree(alias_dir, ignore_errors=True)
except (Eof, Timeout, AssertionError, OSError) as e:
    t.not_ok("unix: scenario failed: %s" % e, srv.stderr_text()[-3000:])
finally:
    srv.stop()

# ---- loopback ws:// ----
if not HAVE_WS:
    for d in ("ws: a sandboxed process", "ws: from a thread", "ws: unsandboxed",
              "ws: ordinary client while a sandbox has network access"):
        t.skip(d, "this cordon was built without the WebSocket transport")
else:
    srv = NetServer("ws")
    try:
        t.ok(srv.ready, "ws: the server listens", srv.stderr_text())
        c = srv.connect()
        c.handshake()
        target = "%s:%d" % (srv.host, srv.port)

        report, written = attack(c, "ws-plain", "ws", target)
        escaped_not(report, written, "ws: a sandboxed process on loopback", srv,
                    log_has="the client is a sandboxed process")
        t.ok("403" in report.get("connect", ""), "ws: it is answered 403", repr(report))

        report, written = attack(c, "ws-thread", "ws", target, how="thread")
        if "unshare" in report:
            t.skip("ws: from a thread with a descriptor table of its own",
                   "unshare(CLONE_FILES) failed in the sandbox: " + report["unshare"])
        else:
            escaped_not(report, written, "ws: from a thread with a descriptor table of its own",
                        srv, log_has="no process whose descriptors the server may read holds it")

        report, written = attack(c, "ws-unsandboxed", "ws", target, sandbox=None)
        t.ok(written and report.get("admitted"),
             "ws: an unsandboxed process/start of the same server is admitted", repr(report))
        report = non_dumpable_client("ws", target)
        t.ok(report.get("admitted"),
             "ws: a non-dumpable client is admitted while no sandbox has network access",
             "%r\n%s" % (report, srv.stderr_text()[-2000:]))

        # A sandbox with network access lives: new ordinary clients still get in.
        resp = c.start("net-sleeper", ["sleep", "60"], cwd="/", sandbox=SANDBOX)
        t.ok("error" not in resp, "ws: a sandboxed process with network access starts",
             repr(resp))
        try:
            c2 = srv.connect()
            c2.handshake()
            t.ok(True, "ws: an ordinary client is admitted while a sandbox has network access")
            c2.drop()
        except (HandshakeError, Eof, Timeout, OSError) as e:
            t.not_ok("ws: an ordinary client is admitted while a sandbox has network access",
                     "%s\n%s" % (e, srv.stderr_text()[-2000:]))
        c.request("process/terminate", {"processId": "net-sleeper"})
    except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
        t.not_ok("ws: scenario failed: %s" % e, srv.stderr_text()[-3000:])
    finally:
        srv.stop()

# ---- through a networkProxy's proxy ----
# A sandbox whose networkProxy lets it reach loopback (allowLocalBinding) asks the
# proxy to connect to the server. The proxy runs outside the sandbox (as nobody
# when root, which --allow-local-users admits), but what it connects is the
# sandbox's: refused all the same.
LOCAL_PROXY = {"proxy": {"enabled": True, "enableSocks5": False, "enableSocks5Udp": False,
                         "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False,
                         "mode": "full", "domains": {}, "unixSockets": None,
                         "allowLocalBinding": True}}
if not HAVE_WS:
    t.skip("ws: through the sandbox's networkProxy",
           "this cordon was built without the WebSocket transport")
else:
    srv = NetServer("ws", args=["--allow-local-users"] if ROOT else [])
    try:
        c = srv.connect()
        c.handshake()
        target = "%s:%d" % (srv.host, srv.port)
        restricted = {"permissions": profile([special("root", "read")]),
                      "windowsSandboxLevel": "disabled"}
        report, written = attack(c, "ws-proxy", "proxy", target, sandbox=restricted,
                                 networkProxy=LOCAL_PROXY)
        escaped_not(report, written, "ws: through the sandbox's networkProxy%s" %
                    (" (--allow-local-users)" if ROOT else ""), srv)
        t.ok("403" in report.get("connect", ""), "ws: ... it is answered 403", repr(report))
    except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
        t.not_ok("ws: networkProxy scenario failed: %s" % e, srv.stderr_text()[-3000:])
    finally:
        srv.stop()

# ---- the token file ----
if HAVE_WS:
    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write("selfconnect-test-token-0123456789\n")
    os.chmod(token_file, 0o600)
    srv = NetServer("ws", args=["--auth-token-file", token_file])
    try:
        t.ok(srv.ready, "token: the server listens", srv.stderr_text())
        c = srv.connect(token="selfconnect-test-token-0123456789")
        c.handshake()
        resp, res = c.run("read-token", ["cat", token_file], cwd="/",
                          sandbox={"permissions": NET_RO, "windowsSandboxLevel": "disabled"})
        t.ok(res is not None and b"selfconnect-test-token" not in res.stdout
             and res.exit_code != 0,
             "token: a sandboxed process cannot read the server's token file",
             repr(resp) if res is None else "exit %r, stdout %r" % (res.exit_code, res.stdout))
    except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
        t.not_ok("token: scenario failed: %s" % e, srv.stderr_text()[-3000:])
    finally:
        srv.stop()
else:
    t.skip("token: a sandboxed process cannot read the server's token file",
           "this cordon was built without the WebSocket transport")

# ---- sandboxes without a pid namespace of their own ----
DEGRADED = ["--allow-degraded=pid-isolation", "--allow-degraded=file-attributes"]
if ROOT:
    t.skip("degraded: a sandbox without a pid namespace is refused",
           "as root every sandbox has a pid namespace")
    t.skip("degraded: unsandboxed processes are still admitted", "as root")
else:
    srv = NetServer("unix", args=DEGRADED, extra_env={"CORDON_TEST_DISABLE": "userns"})
    try:
        t.ok(srv.ready, "degraded: the server listens", srv.stderr_text())
        c = srv.connect()
        c.handshake()
        report, written = attack(c, "deg-path", "unix", srv.path)
        if "start error" in report:
            t.not_ok("degraded: the sandboxed attacker starts", repr(report))
        escaped_not(report, written, "degraded: a sandbox without a pid namespace", srv,
                    log_has="in one of this server's sandboxes")
        report, written = attack(c, "deg-unsandboxed", "unix", srv.path, sandbox=None)
        t.ok(written and report.get("admitted"),
             "degraded: an unsandboxed process/start is still admitted", repr(report))
    except (Eof, Timeout, AssertionError, OSError) as e:
        t.not_ok("degraded: scenario failed: %s" % e, srv.stderr_text()[-3000:])
    finally:
        srv.stop()

shutil.rmtree(work, ignore_errors=True)
t.done()
