#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve` under systemd's protocols, driven the way the service
# manager drives it but without systemd: the test binds and listens itself,
# starts cordon with the socket on descriptor 3 and LISTEN_FDS=1, LISTEN_PID
# set to the server's own pid (computed in the forked child, right before
# execve), and receives the sd_notify datagrams on a NOTIFY_SOCKET of its
# own (a path, or an abstract @name). Checked: READY=1 (with MAINPID and
# STATUS) comes once the passed socket serves (initialize and a
# process/start answered right after it); an AF_UNIX socket is served with
# the unix transport's peer rules, a TCP one with WebSocket and the token
# and loopback rules of --listen ws://; the variables reach no command; a
# LISTEN_PID of another process is ignored; --listen beside a passed socket,
# two sockets, and a descriptor that is not a listening stream socket are
# refused before anything is served (and READY=1 never comes); SIGTERM
# brings STOPPING=1 and exit 0. Root and unprivileged (unprivileged.sh). TAP.

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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, WAIT, Tap, cordon_usable, server_env,  # noqa: E402
                       workspace_write)
from netclient import HandshakeError, UnixConn, WsConn  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
ROOT = os.geteuid() == 0
SD_VARS = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET")
probe = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
HAVE_WS = b"without the WebSocket transport" not in probe.stderr

# A python the other user can run (sys.executable may live in root's home).
SYS_PYTHON = "/usr/bin/python3"
TMP = tempfile.mkdtemp(prefix="cordon-activation-")
os.chmod(TMP, 0o700)


class Notify:
    """The service manager's end of NOTIFY_SOCKET: a datagram socket of ours."""

    def __init__(self, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "cordon-test-notify-%d-%s" % (os.getpid(), os.urandom(4).hex())
            self.sock.bind("\0" + name)
            self.addr = "@" + name
        else:
            self.addr = os.path.join(TMP, "notify-%s" % os.urandom(4).hex())
            self.sock.bind(self.addr)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

    def recv(self, timeout=WAIT):
        """The next message as a dict, or None when none came within timeout."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return None
        data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(12))
        msg = dict(line.partition("=")[::2] for line in data.decode().split("\n") if line)
        # Who sent it, as systemd sees it (SO_PASSCRED): "_pid".
        for level, kind, cred in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                msg["_pid"] = str(struct.unpack("iII", cred[:12])[0])
        return msg

    def pending(self):
        return self.recv(timeout=0)

    def close(self):
        self.sock.close()


class Activated:
    """cordon serve ARGS started as systemd would: sock on fd 3 (None: not passed)."""

    def __init__(self, args=(), sock=None, notify=None, pid="self", names=None, nfds=1,
                 extra_env=None):
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        env = server_env()
        for k in SD_VARS:
            env.pop(k, None)
        env.update(extra_env or {})
        if notify is not None:
            env["NOTIFY_SOCKET"] = notify.addr
        argv = [CORDON, "serve"] + list(args)
        fd = sock if isinstance(sock, int) or sock is None else sock.fileno()
        pid_ = os.fork()
        if pid_ == 0:
            try:
                os.setsid()
                null = os.open("/dev/null", os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(self.out.fileno(), 1)
                os.dup2(self.err.fileno(), 2)
                if fd is not None:
                    if fd == 3:
                        os.set_inheritable(3, True)  # dup2(3, 3) would leave it close-on-exec
                    else:
                        os.dup2(fd, 3)  # inheritable
                    if nfds > 1:
                        os.dup2(fd, 4)
                    env["LISTEN_FDS"] = str(nfds)
                    # The child's own pid, known only here: what the manager does.
                    env["LISTEN_PID"] = str(os.getpid() if pid == "self" else os.getppid())
                    if names is not None:
                        env["LISTEN_FDNAMES"] = names
                os.execve(CORDON, argv, env)
            finally:
                os._exit(127)
        self.pid = pid_
        self.pidfd = os.pidfd_open(pid_)
        self.status = None

    def wait(self, timeout=WAIT):
        """The exit code (128+N for signal N), or None if still running after timeout."""
        if self.status is None:
            r, _, _ = select.select([self.pidfd], [], [], timeout)
            if not r:
                return None
            _, st = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(st)
            if self.status < 0:
                self.status = 128 - self.status
            os.close(self.pidfd)
        return self.status

    def stderr_text(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def stdout_text(self):
        self.out.seek(0)
        return self.out.read().decode(errors="replace")

    def kill(self):
        if self.status is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait()


def unix_listener(name="serve.sock"):
    path = os.path.join(TMP, name)
    if os.path.lexists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)
    return s, path


def tcp_listener(addr="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 0))
    s.listen(16)
    return s


def env_dump(conn, pid):
    """process/start of env with the server's whole environment; its variables."""
    resp = conn.start(pid, ["/usr/bin/env"], env={"PATH": "/usr/bin:/bin"},
                      envPolicy={"inherit": "all", "ignoreDefaultExcludes": True, "exclude": [],
                                 "set": {}, "includeOnly": []})
    if "error" in resp:
        raise AssertionError("process/start failed: %r" % resp)
    res = conn.wait_closed(pid)
    return dict(line.partition("=")[::2] for line in res.stdout.decode().splitlines())


def fd3_of_command(conn, pid):
    """Whether a command started by the server has a descriptor 3: "open" or "closed"."""
    resp = conn.start(pid, ["/bin/sh", "-c", "[ -e /proc/self/fd/3 ] && echo open || echo closed"])
    if "error" in resp:
        raise AssertionError("process/start failed: %r" % resp)
    return conn.wait_closed(pid).stdout.decode().strip()


def stop_and_check(srv, n, tag):
    os.kill(srv.pid, signal.SIGTERM)
    msg = n.recv()
    t.ok(msg is not None and msg.get("STOPPING") == "1" and msg.get("_pid") == str(srv.pid),
         "[%s] SIGTERM: STOPPING=1 is sent (by the main process)" % tag, msg)
    t.eq(srv.wait(), 0, "[%s] and the server exits 0" % tag)


# ---------------------------------------------------------------- unix

def test_unix(abstract_notify):
    tag = "unix, NOTIFY_SOCKET %s" % ("@abstract" if abstract_notify else "path")
    n = Notify(abstract=abstract_notify)
    ls, path = unix_listener()
    srv = Activated(sock=ls, notify=n, names="cordon")
    try:
        msg = n.recv()
        t.ok(msg is not None and msg.get("READY") == "1", "[%s] READY=1 arrives" % tag,
             "%r\n%s" % (msg, srv.stderr_text()))
        if msg is None:
            return
        t.eq(msg.get("MAINPID"), str(srv.pid), "[%s] with MAINPID, the pid started" % tag)
        t.eq(msg.get("_pid"), str(srv.pid), "[%s] sent by that process itself (the units "
             "need no NotifyAccess=all)" % tag)
        t.eq(msg.get("STATUS"), "Serving on unix:" + path,
             "[%s] and a STATUS= line naming the passed socket" % tag)
        # Served at once: READY=1 came only once the listener was up.
        c = UnixConn(path)
        t.ok(c.handshake() is not None, "[%s] initialize on the passed socket, right after "
             "READY=1" % tag)
        resp, res = c.run("p1", ["/bin/echo", "activated"])
        t.ok(res is not None and res.stdout == b"activated\n",
             "[%s] a process/start runs and its output comes back" % tag, resp)
        env = env_dump(c, "env")
        t.eq([k for k in SD_VARS if k in env], [],
             "[%s] LISTEN_*, NOTIFY_SOCKET are not in the server's environment any more" % tag)
        t.eq(fd3_of_command(c, "fd3"), "closed",
             "[%s] the passed socket (descriptor 3) is not inherited by a command" % tag)
        resp, res = c.run("hide", ["/bin/sh", "-c", "test -S '%s'" % path], cwd=TMP,
                          sandbox={"permissions": workspace_write(),
                                   "windowsSandboxLevel": "disabled"})
        if res is None and "user namespaces" in str(resp.get("error")):
            t.skip("[%s] the passed socket is hidden from sandboxes" % tag,
                   "no user namespaces here")
        else:
            t.ok(res is not None and res.exit_code != 0,
                 "[%s] the passed socket is hidden from sandboxes, as a --listen one" % tag,
                 resp)
        t.ok(os.path.exists(path), "[%s] the socket file stays (the socket unit's)" % tag)
        t.eq(n.pending(), None, "[%s] nothing else was notified while serving" % tag)
        stop_and_check(srv, n, tag)
        t.ok(os.path.exists(path), "[%s] the socket file is left at exit (systemd's)" % tag)
        t.ok("a socket passed by systemd ('cordon')" in srv.stderr_text(),
             "[%s] the log names the passed socket by its LISTEN_FDNAMES" % tag,
             srv.stderr_text())
    finally:
        srv.kill()
        ls.close()
        n.close()


def test_unix_other_user():
    tag = "unix, another uid"
    if not ROOT:
        t.skip("[%s] refused by the peer rules" % tag, "needs root")
        return
    try:
        other = pwd.getpwnam("cordon-test")
    except KeyError:
        t.skip("[%s] refused by the peer rules" % tag, "the user cordon-test does not exist")
        return
    if not os.access(SYS_PYTHON, os.X_OK):
        t.skip("[%s] refused by the peer rules" % tag, "no " + SYS_PYTHON)
        return
    d = tempfile.mkdtemp(prefix="cordon-activation-o-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "serve.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    os.chmod(path, 0o777)
    ls.listen(4)
    n = Notify()
    srv = Activated(sock=ls, notify=n)
    try:
        msg = n.recv()
        t.ok(msg is not None and msg.get("READY") == "1", "[%s] READY=1" % tag, srv.stderr_text())
        # The server may close before the request is written or read: all the same.
        code = ("import socket, sys\n"
                "s = socket.socket(socket.AF_UNIX)\n"
                "s.connect(sys.argv[1])\n"
                "try:\n"
                "    s.sendall(b'{\"id\":1,\"method\":\"initialize\",\"params\":{}}\\n')\n"
                "    d = s.recv(4096)\n"
                "except (ConnectionResetError, BrokenPipeError):\n"
                "    d = b''\n"
                "sys.stdout.write(repr(d))\n")
        r = subprocess.run([SYS_PYTHON, "-c", code, path], user=other.pw_uid,
                           group=other.pw_gid, extra_groups=[], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=WAIT)
        t.eq(r.stdout.decode(), "b''",
             "[%s] a client of another uid is closed without an answer (SO_PEERCRED)" % tag)
        t.ok("refusing a unix socket connection" in srv.stderr_text(),
             "[%s] and the refusal is logged" % tag, srv.stderr_text())
        stop_and_check(srv, n, tag)
    finally:
        srv.kill()
        ls.close()
        n.close()
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- tcp

def test_tcp():
    tag = "tcp"
    if not HAVE_WS:
        t.skip("[%s] a TCP socket is served with WebSocket" % tag,
               "this cordon was built without the WebSocket transport")
        return
    n = Notify(abstract=True)
    ls = tcp_listener()
    host, port = ls.getsockname()
    srv = Activated(sock=ls, notify=n)
    try:
        msg = n.recv()
        if msg is None and "NETLINK_SOCK_DIAG" in srv.stderr_text():
            t.skip("[%s] loopback without a token" % tag,
                   "the kernel cannot name a loopback peer's owner here")
            return
        t.ok(msg is not None and msg.get("READY") == "1", "[%s] READY=1 arrives" % tag,
             "%r\n%s" % (msg, srv.stderr_text()))
        if msg is None:
            return
        want = "ws://%s:%d" % (host, port)
        t.eq(msg.get("STATUS"), "Serving on " + want, "[%s] STATUS names the URL" % tag)
        t.eq(srv.stdout_text(), want + "\n", "[%s] the URL is the first line of stdout, as with "
             "--listen ws://" % tag)
        c = WsConn(host, port)
        t.ok(c.handshake() is not None,
             "[%s] our own uid is admitted on loopback without a token" % tag)
        resp, res = c.run("p1", ["/bin/echo", "over-ws"])
        t.ok(res is not None and res.stdout == b"over-ws\n",
             "[%s] a process/start runs over WebSocket" % tag, resp)
        stop_and_check(srv, n, tag)
    finally:
        srv.kill()
        ls.close()
        n.close()

    tag = "tcp, token"
    tok = os.path.join(TMP, "token")
    with open(tok, "w") as f:
        f.write("s3cr3t-t0ken-0123456789\n")
    os.chmod(tok, 0o600)
    n = Notify()
    ls = tcp_listener()
    host, port = ls.getsockname()
    srv = Activated(["--auth-token-file", tok], sock=ls, notify=n)
    try:
        msg = n.recv()
        t.ok(msg is not None and msg.get("READY") == "1", "[%s] READY=1" % tag,
             srv.stderr_text())
        try:
            WsConn(host, port)
            status = 101
        except HandshakeError as e:
            status = e.status
        t.eq(status, 401, "[%s] without the token: 401" % tag)
        c = WsConn(host, port, token="s3cr3t-t0ken-0123456789")
        t.ok(c.handshake() is not None, "[%s] with it: served" % tag)
        stop_and_check(srv, n, tag)
    finally:
        srv.kill()
        ls.close()
        n.close()

    tag = "tcp, not loopback"
    n = Notify()
    ls = tcp_listener("0.0.0.0")
    srv = Activated(sock=ls, notify=n)
    try:
        t.eq(srv.wait(), 2, "[%s] refused without a token (usage error)" % tag)
        t.ok("non-loopback address without authentication" in srv.stderr_text(),
             "[%s] saying why, as --listen ws://0.0.0.0 does" % tag, srv.stderr_text())
        t.eq(n.pending(), None, "[%s] and READY=1 never came" % tag)
    finally:
        srv.kill()
        ls.close()
        n.close()


# ---------------------------------------------------------------- refusals

def refused(tag, sock, want_text, args=(), want_code=1, **kw):
    n = Notify()
    srv = Activated(args, sock=sock, notify=n, **kw)
    try:
        t.eq(srv.wait(), want_code, "[%s] refused (exit %d)" % (tag, want_code))
        t.ok(want_text in srv.stderr_text(), "[%s] saying so" % tag, srv.stderr_text())
        t.eq(n.pending(), None, "[%s] and READY=1 never came" % tag)
    finally:
        srv.kill()
        n.close()


def test_refusals():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    refused("a connected stream socket", a, "is not listening")
    a.close()
    b.close()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    refused("a datagram socket", u, "a datagram socket, not a stream socket")
    u.close()
    r, w = os.pipe()
    refused("a pipe", r, "is not a socket")
    os.close(r)
    os.close(w)
    ls, path = unix_listener("two.sock")
    refused("two sockets", ls, "passed 2 sockets", nfds=2)
    refused("LISTEN_FDNAMES with two names", ls, "does not name exactly one socket",
            names="a:b")
    refused("--listen beside a passed socket", ls, "exclude each other",
            args=["--listen", "unix:" + os.path.join(TMP, "other.sock")], want_code=2)
    bad = Notify()
    bad.addr = "relative/notify"
    srv = Activated(sock=ls, notify=bad)
    try:
        t.eq(srv.wait(), 1, "[a relative NOTIFY_SOCKET] refused")
        t.ok("neither an absolute path nor an abstract socket name" in srv.stderr_text(),
             "[a relative NOTIFY_SOCKET] saying so", srv.stderr_text())
    finally:
        srv.kill()
        bad.close()
    ls.close()


def test_wrong_pid():
    tag = "LISTEN_PID of another process"
    n = Notify()
    ls, passed = unix_listener("passed.sock")
    own = os.path.join(TMP, "own.sock")
    srv = Activated(["--listen", "unix:" + own], sock=ls, notify=n, pid="parent")
    try:
        msg = n.recv()
        t.ok(msg is not None and msg.get("READY") == "1", "[%s] READY=1" % tag,
             srv.stderr_text())
        t.eq(msg and msg.get("STATUS"), "Serving on unix:" + own,
             "[%s] ignored: the server listens on --listen, not on the passed socket" % tag)
        c = UnixConn(own)
        t.ok(c.handshake() is not None, "[%s] and serves there" % tag)
        env = env_dump(c, "env")
        t.eq([k for k in SD_VARS if k in env], [],
             "[%s] the variables, not ours, are removed all the same" % tag)
        t.ok("passed by systemd" not in srv.stderr_text(), "[%s] nothing says activated" % tag,
             srv.stderr_text())
        stop_and_check(srv, n, tag)
    finally:
        srv.kill()
        ls.close()
        n.close()


def test_no_notify():
    tag = "without NOTIFY_SOCKET"
    ls, path = unix_listener("quiet.sock")
    srv = Activated(sock=ls)
    try:
        c = UnixConn(path)
        t.ok(c.handshake() is not None, "[%s] the passed socket serves all the same" % tag)
        os.kill(srv.pid, signal.SIGTERM)
        t.eq(srv.wait(), 0, "[%s] SIGTERM: exit 0" % tag)
    finally:
        srv.kill()
        ls.close()


try:
    t.guard("unix (path)", test_unix, False)
    t.guard("unix (abstract)", test_unix, True)
    t.guard("unix, another uid", test_unix_other_user)
    t.guard("tcp", test_tcp)
    t.guard("refusals", test_refusals)
    t.guard("wrong LISTEN_PID", test_wrong_pid)
    t.guard("no NOTIFY_SOCKET", test_no_notify)
finally:
    shutil.rmtree(TMP, ignore_errors=True)
t.done()
