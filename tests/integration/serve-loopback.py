#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Who may use `cordon serve --listen ws://` on a loopback address. Loopback
# is no boundary between the users of a host: without a token, only peers
# whose socket the kernel says is owned by the server's uid get in (or the
# users --allow-local-users / --allow-local-group admit); others, and peers
# whose owner cannot be told (gone before the lookup), are answered 403 and
# nothing runs; /readyz stays open; the server and its other sessions carry
# on. As root the other user is "cordon-test" (tests/integration/
# unprivileged.sh creates it), and a server run as that user is tried with
# a root client. TAP.

import base64
import grp
import json
import os
import pwd
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, WAIT, Tap, b64, cordon_usable, server_env,  # noqa: E402
                       server_pid_of, unb64)
from netclient import HandshakeError, WsConn, http  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
probe = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if b"without the WebSocket transport" in probe.stderr:
    t.skip_all("this cordon was built without the WebSocket transport")

ROOT = os.geteuid() == 0
try:
    OTHER = pwd.getpwnam("cordon-test")
except KeyError:
    OTHER = None
NO_OTHER = ("needs root" if not ROOT else
            "the user cordon-test does not exist (tests/integration/unprivileged.sh creates it)")


def have_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sk:
            sk.bind(("::1", 0))
        return True
    except OSError:
        return False


class Srv:
    """A `cordon serve --listen ws://...`, run as user (a pwd entry; root only) if given."""

    def __init__(self, args=(), listen="ws://127.0.0.1:0", user=None, cordon=CORDON,
                 extra_env=None, wrap=()):
        self.errf = tempfile.TemporaryFile()
        kw = {}
        if user is not None:
            kw = dict(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
        self.p = subprocess.Popen(list(wrap) + [cordon, "serve", "--listen", listen] + list(args),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=self.errf, env=server_env(extra_env=extra_env), cwd="/",
                                  start_new_session=True, **kw)
        self.pid = self.p.pid
        self.host = self.port = None
        buf = b""
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + WAIT
        while b"\n" not in buf and time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 4096) if r else b""
            if not chunk:
                break
            buf += chunk
        self.ready = b"\n" in buf
        if self.ready:
            host, port = buf.split(b"\n")[0].decode()[len("ws://"):].rsplit(":", 1)
            self.host, self.port = host.strip("[]"), int(port)

    def log(self):
        self.errf.seek(0)
        return self.errf.read().decode(errors="replace")

    def wait_log(self, text, timeout=WAIT):
        """Wait for text in the log (the deadline only bounds a failure)."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() >= deadline or self.p.poll() is not None:
                return False
            time.sleep(0.02)
        return True

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.p.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                return self.p.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                return None
        return self.p.returncode


def as_user(user, fn, *args):
    """fn(*args) in a child running as user (None: as we are); its JSON-able result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            if user is not None:
                os.setgroups(os.getgrouplist(user.pw_name, user.pw_gid))
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
            res = fn(*args)
        except Exception as e:  # noqa: BLE001 - reported to the parent
            res = {"error": "%s: %s" % (type(e).__name__, e)}
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data) if data else {"error": "the client child said nothing"}


def attempt(host, port, marker, token=None):
    """Upgrade, initialize, run `id -u` that also creates marker: what happened."""
    try:
        c = WsConn(host, port, token=token)
    except HandshakeError as e:
        return {"status": e.status, "body": e.body.decode(errors="replace")}
    c.handshake()
    resp, res = c.run("p", ["sh", "-c", 'id -u; touch "$1"', "sh", marker])
    c.drop()
    return {"status": 101, "out": res.stdout.decode() if res else None, "resp": resp}


def ws_frame(payload):
    """A masked text frame (client to server)."""
    mask = os.urandom(4)
    n = len(payload)
    hdr = struct.pack("!BB", 0x81, 0x80 | n) if n < 126 else struct.pack("!BBH", 0x81, 0xfe, n)
    return hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def pipelined(host, port, marker):
    """The upgrade and, without waiting for its answer, the frames that would start a process."""
    key = base64.b64encode(os.urandom(16))
    data = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + b"\r\n\r\n")
    for m in ({"id": 1, "method": "initialize", "params": {"clientName": "x"}},
              {"method": "initialized", "params": {}},
              {"id": 2, "method": "process/start",
               "params": {"processId": "p", "argv": ["touch", marker], "cwd": "file:///",
                          "env": {"PATH": "/usr/bin:/bin"}, "tty": False}}):
        data += ws_frame(json.dumps(m).encode())
    s = socket.create_connection((host, port), timeout=WAIT)
    s.sendall(data)
    buf = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except ConnectionResetError:
        pass
    s.close()
    return {"head": buf.split(b"\r\n", 1)[0].decode(errors="replace")}


def readyz(host, port):
    st, _, _, sock = http(host, port, "/readyz")
    sock.close()
    return {"status": st}


def fresh_dir(mode=0o755):
    d = tempfile.mkdtemp(prefix="cordon-loopback-")
    os.chmod(d, mode)
    return d


# ---------------------------------------------------------------- the owner rule

def owner_rule(listen, tag):
    """Root server, cordon-test client: refused, nothing runs, everyone else unharmed."""
    d = fresh_dir()
    s = Srv(listen=listen)
    try:
        t.ok(s.ready and s.wait_log("(our uid only)"),
             "[%s] a loopback listener without a token admits our uid only" % tag, s.log())
        a = WsConn(s.host, s.port)
        a.handshake()
        r = a.start("cat", ["cat"], pipeStdin=True)
        t.ok("error" not in r, "[%s] the server's own uid gets in and starts a process" % tag, r)

        res = as_user(OTHER, attempt, s.host, s.port, os.path.join(d, "other"))
        t.ok(res.get("status") == 403 and "uid %d is not the server's uid (0)" % OTHER.pw_uid
             in res.get("body", ""),
             "[%s] another user (cordon-test) is refused: 403 with the reason" % tag, res)
        t.ok(not os.path.exists(os.path.join(d, "other")), "[%s] ... and nothing ran" % tag)
        res = as_user(OTHER, pipelined, s.host, s.port, os.path.join(d, "pipelined"))
        t.ok(res.get("head", "").startswith("HTTP/1.1 403"),
             "[%s] an upgrade with frames right behind it is refused too" % tag, res)
        t.ok(not os.path.exists(os.path.join(d, "pipelined")),
             "[%s] ... and its process/start never ran" % tag)
        t.eq(as_user(OTHER, readyz, s.host, s.port), {"status": 200},
             "[%s] GET /readyz answers another user (a probe learns nothing a connect "
             "does not)" % tag)
        t.ok("refused: uid %d is not the server's uid (0)" % OTHER.pw_uid in s.log() and
             "uid %d): refused" % OTHER.pw_uid in s.log(),
             "[%s] the refusal is logged with the peer's uid" % tag, s.log())

        res = attempt(s.host, s.port, os.path.join(d, "own"))
        t.ok(res.get("status") == 101 and res.get("out") == "0\n" and
             os.path.exists(os.path.join(d, "own")),
             "[%s] after the refusals our uid still gets in and runs commands" % tag, res)
        r = a.request("process/write", {"processId": "cat", "chunk": b64("still here\n"),
                                        "writeId": "w1"})
        got = b""
        deadline = time.monotonic() + WAIT
        while b"still here" not in got and time.monotonic() < deadline:
            rr = a.call("process/read", {"processId": "cat", "waitMs": 500})
            got = b"".join(unb64(ch["chunk"]) for ch in rr["chunks"])
        t.ok(s.alive() and got == b"still here\n",
             "[%s] the server stays up and the first session is untouched" % tag, (r, got))
        a.drop()
    finally:
        t.eq(s.stop(), 0, "[%s] SIGTERM: exit 0" % tag)
        shutil.rmtree(d, ignore_errors=True)


def admitted_by(args, tag, want_log):
    """Root server with args: cordon-test gets in (and its commands run as root)."""
    d = fresh_dir()
    s = Srv(args=args)
    try:
        t.ok(s.ready and s.wait_log(want_log), "[%s] the server says who it admits" % tag,
             s.log())
        res = as_user(OTHER, attempt, s.host, s.port, os.path.join(d, "m"))
        t.ok(res.get("status") == 101 and res.get("out") == "0\n",
             "[%s] cordon-test gets in" % tag, res)
    finally:
        s.stop()
        shutil.rmtree(d, ignore_errors=True)


def crowding():
    """Another user's idle handshakes (more than the 64 that may wait) cannot push out ours."""
    s = Srv()
    mine = None
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    pid = -1
    try:
        mine = socket.create_connection((s.host, s.port), timeout=WAIT)
        pid = os.fork()
        if pid == 0:
            os.close(r1)
            os.close(w2)
            socks = []
            try:
                os.setgroups([])
                os.setgid(OTHER.pw_gid)
                os.setuid(OTHER.pw_uid)
                for _ in range(80):
                    socks.append(socket.create_connection((s.host, s.port), timeout=WAIT))
                os.write(w1, b"k")
            except Exception:  # noqa: BLE001 - the parent sees no "k"
                pass
            os.read(r2, 1)  # held open until the parent is done
            os._exit(0)
        os.close(w1)
        os.close(r2)
        ready = os.read(r1, 1) == b"k"
        # Accepted in order: once this is answered, the 80 were all accepted.
        st = readyz(s.host, s.port)["status"]
        mine.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        try:
            head = mine.recv(4096).split(b"\r\n", 1)[0]
        except OSError as e:
            head = str(e).encode()
        t.ok(ready and st == 200 and head == b"HTTP/1.1 101 Switching Protocols",
             "80 idle handshakes of another user do not push out one of our uid", (ready, st, head))
    finally:
        if mine:
            mine.close()
        if pid > 0:
            os.close(w2)
            os.waitpid(pid, 0)
            os.close(r1)
        s.stop()


def other_admissions():
    d = tempfile.mkdtemp(prefix="cordon-token-")
    token = "t0k3n-" + os.urandom(12).hex()
    tf = os.path.join(d, "token")
    with open(tf, "w") as f:
        f.write(token + "\n")
    os.chmod(tf, 0o600)
    s = Srv(args=["--auth-token-file", tf])
    try:
        res = as_user(OTHER, attempt, s.host, s.port, os.path.join(d, "m"), token)
        t.ok(res.get("status") == 101 and res.get("out") == "0\n",
             "token: another user presenting the token gets in", res)
        res = as_user(OTHER, attempt, s.host, s.port, os.path.join(d, "m"))
        t.eq(res.get("status"), 401, "token: without it, 401")
        res = attempt(s.host, s.port, os.path.join(d, "m"))
        t.eq(res.get("status"), 401, "token: our own uid needs it too (the token is the rule)")
    finally:
        s.stop()
        shutil.rmtree(d, ignore_errors=True)

    admitted_by(["--allow-local-users"], "--allow-local-users",
                "--allow-local-users: every user of this host can run commands as uid 0")
    gname = grp.getgrgid(OTHER.pw_gid).gr_name
    admitted_by(["--allow-local-group", gname], "--allow-local-group " + gname,
                    "(our uid and --allow-local-group only)")
    # A user outside the group: nobody (65534), if it is not in it.
    try:
        nobody = pwd.getpwuid(65534)
    except KeyError:
        nobody = None
    if nobody is None or nobody.pw_gid == OTHER.pw_gid:
        t.skip("--allow-local-group: a non-member is refused", "no user nobody outside the group")
    else:
        s = Srv(args=["--allow-local-group", gname])
        try:
            res = as_user(nobody, attempt, s.host, s.port, "/nonexistent/m")
            t.ok(res.get("status") == 403 and
                 "nor in its --allow-local-group" in res.get("body", ""),
                 "--allow-local-group: a non-member (uid 65534) is refused", res)
        finally:
            s.stop()
    # A supplementary member (listed in /etc/group), named by number.
    member = None
    for g in grp.getgrall():
        for name in g.gr_mem:
            try:
                pw = pwd.getpwnam(name)
            except KeyError:
                continue
            if pw.pw_gid != g.gr_gid and pw.pw_uid != 0:
                member = (g, pw)
                break
        if member:
            break
    if member is None:
        t.skip("--allow-local-group: a member listed in the group database gets in",
               "no group lists a member whose primary group differs")
    else:
        g, pw = member
        s = Srv(args=["--allow-local-group", str(g.gr_gid)])
        try:
            res = as_user(pw, attempt, s.host, s.port, "/nonexistent/m")
            t.ok(res.get("status") == 101,
                 "--allow-local-group %d: %s, listed as a member, gets in" % (g.gr_gid,
                                                                              pw.pw_name), res)
        finally:
            s.stop()


def copied_binaries():
    """A directory anyone can read holding cordon and the programs it executes."""
    bindir = fresh_dir()
    for name in ("cordon", "cordon-ws", "cordon-init", "cordon-fs-helper"):
        src = os.path.join(os.path.dirname(os.path.realpath(CORDON)), name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(bindir, name))
            os.chmod(os.path.join(bindir, name), 0o755)
    return bindir


def userns_server():
    """A server in a user namespace of its own sees outsiders as the overflow uid: refused."""
    wrap = ["unshare", "--user", "--map-root-user"]
    probe = subprocess.run(wrap + ["true"], user=OTHER.pw_uid, group=OTHER.pw_gid,
                           extra_groups=[], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        t.skip("user namespace: an unmapped owner is refused", "no unshare --user here")
        return
    bindir = copied_binaries()
    s = Srv(user=OTHER, cordon=os.path.join(bindir, "cordon"), wrap=wrap,
            args=["--pid-namespace=never"])
    try:
        res = attempt(s.host, s.port, "/nonexistent/m")
        t.ok(res.get("status") == 403 and "not mapped in the server's user namespace" in
             res.get("body", ""),
             "user namespace: root, unmapped there, reads as the overflow uid: refused", res)
        res = as_user(OTHER, attempt, s.host, s.port, "/nonexistent/m")
        t.ok(res.get("status") == 101 and res.get("out") == "0\n",
             "user namespace: the user mapped to its root gets in", res)
    finally:
        s.stop()
        shutil.rmtree(bindir, ignore_errors=True)


def unprivileged_server():
    """A server run as cordon-test: root is refused like anyone else; cordon-test gets in."""
    bindir = copied_binaries()
    d = fresh_dir(0o777)
    s = Srv(user=OTHER, cordon=os.path.join(bindir, "cordon"))
    try:
        t.ok(s.ready, "unprivileged server: listening as cordon-test", s.log())
        res = attempt(s.host, s.port, os.path.join(d, "root"))
        t.ok(res.get("status") == 403 and "uid 0 is not the server's uid (%d)" % OTHER.pw_uid
             in res.get("body", ""), "unprivileged server: a root client is refused (403)", res)
        t.ok(not os.path.exists(os.path.join(d, "root")), "unprivileged server: ... nothing ran")
        res = as_user(OTHER, attempt, s.host, s.port, os.path.join(d, "own"))
        t.ok(res.get("status") == 101 and res.get("out") == "%d\n" % OTHER.pw_uid,
             "unprivileged server: its own user gets in", res)
    finally:
        t.eq(s.stop(), 0, "unprivileged server: SIGTERM: exit 0")
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(bindir, ignore_errors=True)


# ---------------------------------------------------------------- as any user

def same_uid():
    d = fresh_dir()
    s = Srv()
    try:
        res = attempt(s.host, s.port, os.path.join(d, "m"))
        t.ok(res.get("status") == 101 and res.get("out") == "%d\n" % os.geteuid(),
             "the server's own uid gets in", res)
        t.eq(readyz(s.host, s.port), {"status": 200}, "GET /readyz is 200")
    finally:
        t.eq(s.stop(), 0, "SIGTERM: exit 0")
        shutil.rmtree(d, ignore_errors=True)


def gone_before_lookup():
    """A peer that closed before the server accepted it has no owner left to ask: refused."""
    s = Srv()
    try:
        pid = server_pid_of(s.pid)
        os.kill(pid, signal.SIGSTOP)
        try:
            sk = socket.create_connection((s.host, s.port), timeout=WAIT)
            sk.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                       b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                       b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            sk.close()
        finally:
            os.kill(pid, signal.SIGCONT)
        t.ok(s.wait_log("refused: the owner of the connecting socket cannot be determined"),
             "a peer gone before the owner lookup is refused (fail closed) and logged", s.log())
        res = attempt(s.host, s.port, "/nonexistent/m")
        t.eq(res.get("status"), 101, "... and the next client of our uid gets in")
    finally:
        t.eq(s.stop(), 0, "gone peer: SIGTERM: exit 0")


def no_sock_diag():
    """Where the kernel cannot be asked (no sock_diag, AF_NETLINK filtered), refuse to start."""
    r = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:0"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=WAIT,
                       env=dict(os.environ, CORDON_TEST_DISABLE="sock_diag"))
    err = r.stderr.decode()
    t.ok(r.returncode == 1 and r.stdout == b"" and "NETLINK_SOCK_DIAG" in err and
         "--auth-token-file" in err,
         "without socket diagnostics a loopback listener refuses to start, naming the "
         "mechanism and the fix", (r.returncode, r.stdout, err))
    s = Srv(args=["--allow-local-users"], extra_env={"CORDON_TEST_DISABLE": "sock_diag"})
    try:
        t.ok(s.ready, "... unless --allow-local-users asks for no lookup", s.log())
    finally:
        s.stop()


def usage():
    d = tempfile.mkdtemp(prefix="cordon-usage-")
    tf = os.path.join(d, "token")
    with open(tf, "w") as f:
        f.write("0123456789abcdef0123\n")
    os.chmod(tf, 0o600)
    for args, want, desc in (
            (["--listen", "ws://127.0.0.1:0", "--insecure-no-auth"],
             "--insecure-no-auth is for an address that is not loopback",
             "--insecure-no-auth on loopback is refused (it would not admit other users)"),
            (["--listen", "ws://0.0.0.0:0", "--insecure-no-auth", "--allow-local-users"],
             "--allow-local-users is for --listen ws:// on a loopback address",
             "--allow-local-users on a non-loopback address is refused"),
            (["--listen", "unix:" + os.path.join(d, "s"), "--allow-local-group", "0"],
             "--allow-local-group is for --listen ws:// on a loopback address",
             "--allow-local-group on a unix socket is refused"),
            (["--listen", "ws://127.0.0.1:0", "--allow-local-users", "--auth-token-file", tf],
             "contradict each other", "--allow-local-users with a token is refused"),
            (["--listen", "ws://127.0.0.1:0", "--allow-local-users", "--allow-local-group", "0"],
             "would add nothing", "--allow-local-users with --allow-local-group is refused"),
            (["--listen", "ws://127.0.0.1:0", "--allow-local-group", "no-such-group-cordon"],
             "--allow-local-group: no group 'no-such-group-cordon'",
             "an unknown --allow-local-group is refused")):
        try:
            r = subprocess.run([CORDON, "serve"] + args, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=WAIT)
        except subprocess.TimeoutExpired:
            t.not_ok(desc, "the server started")
            continue
        t.ok(r.returncode == 2 and want in r.stderr.decode(), desc, r.stderr.decode())
    shutil.rmtree(d, ignore_errors=True)


t.guard("same uid", same_uid)
t.guard("gone before lookup", gone_before_lookup)
t.guard("usage", usage)
t.guard("no sock_diag", no_sock_diag)
if ROOT and OTHER is not None:
    t.guard("owner rule", owner_rule, "ws://127.0.0.1:0", "127.0.0.1")
    if have_ipv6_loopback():
        t.guard("owner rule ::1", owner_rule, "ws://[::1]:0", "::1")
    else:
        t.skip("[::1] the owner rule over IPv6", "no IPv6 loopback")
    t.guard("crowding", crowding)
    t.guard("other admissions", other_admissions)
    t.guard("unprivileged server", unprivileged_server)
    t.guard("user namespace", userns_server)
else:
    t.skip("another user on a root server's loopback listener is refused", NO_OTHER)
    t.skip("tokens, --allow-local-users and --allow-local-group admit another user", NO_OTHER)
    t.skip("a root client of an unprivileged server is refused", NO_OTHER)
    t.skip("another user's idle handshakes cannot push out ours", NO_OTHER)
    t.skip("user namespace: an unmapped owner is refused", NO_OTHER)
t.done()
