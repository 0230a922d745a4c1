#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# While one of a loopback ws:// server's sandboxes has network access, a new
# client of the server's uid is admitted only once its socket is found in a
# process outside every sandbox, a look through /proc/PID/fd whose cost a
# sandbox sets (a million descriptors took seconds). That look must not
# stall the event loop: it runs on a thread of its own while the new
# connection waits in its handshake, and has a time budget past which the
# client is refused as undecided. A test hook (CORDON_TEST_JUDGE_HOLD, a
# FIFO) makes the look wait for the test: while it waits, an admitted
# client is served and the new client gets no answer; released, the new
# client is admitted; expired, refused with the reason. Synchronised on
# events: the FIFO's opening by the server, the answers. TAP.

import errno
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, Eof, Tap, Timeout, cordon_usable, profile,  # noqa: E402
                       special)
from netclient import HandshakeError, NetServer, WsConn  # noqa: E402

NET = {"permissions": profile([special("root", "read")], network="enabled"),
       "windowsSandboxLevel": "disabled"}
UPGRADE = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
if b"without the WebSocket transport" in subprocess.run(
        [CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).stderr:
    t.skip_all("this cordon was built without the WebSocket transport")

work = tempfile.mkdtemp(prefix="cordon-admit-")
fifo = os.path.join(work, "hold")
os.mkfifo(fifo, 0o600)


def held(timeout=60.0):
    """Wait until the server's look opens the FIFO (it is judging); the write end, or None."""
    box = {}

    def opener():
        box["fd"] = os.open(fifo, os.O_WRONLY)  # returns once the reader is there

    th = threading.Thread(target=opener, daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        # Nobody reads: unblock the opener with a reader of our own, and give up.
        r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        th.join()
        os.close(box["fd"])
        os.close(r)
        return None
    return box["fd"]


def wait_log(srv, text, count, timeout=60.0):
    """Wait until the server's log holds text count times (polling the log for the event)."""
    deadline = time.monotonic() + timeout
    while srv.stderr_text().count(text) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return srv.stderr_text().count(text) >= count


def release(fd, word):
    os.write(fd, word + b"\n")
    os.close(fd)


def raw_client(srv):
    """A client that has connected and sent its upgrade request."""
    s = socket.create_connection((srv.host, srv.port), timeout=30)
    s.sendall(UPGRADE)
    return s


def answer(s):
    """The status line of the server's answer (blocking)."""
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n")[0].decode(errors="replace"), data


srv = NetServer("ws", args=["--verbose"], extra_env={"CORDON_TEST_JUDGE_HOLD": fifo})
hold_fd = None
try:
    t.ok(srv.ready, "the server listens", srv.stderr_text())
    a = srv.connect()
    a.handshake()
    t.ok(True, "a client is admitted while no sandbox has network access (no look)")
    resp = a.start("net", ["sleep", "600"], cwd="/", sandbox=NET)
    t.ok("error" not in resp, "a sandboxed process with network access starts", repr(resp))

    b = raw_client(srv)
    hold_fd = held()
    t.ok(hold_fd is not None, "a new client's socket is looked for off the event loop",
         srv.stderr_text()[-2000:])
    if hold_fd is not None:
        # The look is held: the loop must go on serving the admitted client.
        info = a.call("environment/info", timeout=30)
        t.ok("executorVersion" in info, "meanwhile an admitted client's request is answered",
             repr(info))
        resp, res = a.run("echo", ["echo", "served"], cwd="/", timeout=30)
        t.ok(res is not None and res.stdout == b"served\n",
             "meanwhile an admitted client starts a process and gets its output", repr(resp))
        b.setblocking(False)
        try:
            early = b.recv(4096)
        except BlockingIOError:
            early = None
        b.setblocking(True)
        t.ok(early is None, "meanwhile the new client waits in its handshake", repr(early))
        release(hold_fd, b"go")
        hold_fd = None
        status, data = answer(b)
        t.ok(" 101 " in status + " ", "released, the new client (outside every sandbox) is "
             "admitted", repr(data))
    b.close()

    # Past the time budget: refused as undecided, with the reason.
    c = raw_client(srv)
    hold_fd = held()
    if hold_fd is None:
        t.not_ok("a client whose look runs out of time is refused", "the look never started")
    else:
        release(hold_fd, b"expire")
        hold_fd = None
        status, data = answer(c)
        t.ok(" 403 " in status + " " and b"was not found within" in data,
             "a client whose look runs out of time is refused (403) and told why", repr(data))
    c.close()
    t.ok("was not found within" in srv.stderr_text(), "the refusal is logged",
         srv.stderr_text()[-2000:])

    # The batch: clients that arrive while a look is held are judged together next.
    d = raw_client(srv)
    hold_fd = held()
    if hold_fd is None:
        t.not_ok("clients that arrive during a look are judged together", "no look")
    else:
        accepted = srv.stderr_text().count("from 127.0.0.1")
        e1, e2 = raw_client(srv), raw_client(srv)
        if not wait_log(srv, "from 127.0.0.1", accepted + 2):
            t.diag("e1 and e2 were not seen accepted:\n" + srv.stderr_text()[-2000:])
        release(hold_fd, b"go")
        hold_fd = None
        status, _ = answer(d)
        ok_d = " 101 " in status + " "
        hold_fd = held()
        if hold_fd is not None:
            release(hold_fd, b"go")
            hold_fd = None
        s1, _ = answer(e1)
        s2, _ = answer(e2)
        t.ok(ok_d and " 101 " in s1 + " " and " 101 " in s2 + " ",
             "clients that arrive during a look are judged together by the next one",
             "%r %r %r" % (status, s1, s2))
        e1.close()
        e2.close()
    d.close()
    a.request("process/terminate", {"processId": "net"})
except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
    t.not_ok("scenario failed: %s" % e, srv.stderr_text()[-3000:])
finally:
    if hold_fd is not None:
        release(hold_fd, b"go")
    srv.stop()

# Without the hook, a client outside every sandbox still gets in (the look is real).
srv = NetServer("ws")
try:
    a = srv.connect()
    a.handshake()
    resp = a.start("net", ["sleep", "600"], cwd="/", sandbox=NET)
    c = WsConn(srv.host, srv.port, timeout=30)
    c.handshake()
    t.ok(True, "a real look admits a client outside every sandbox")
    c.drop()
    a.request("process/terminate", {"processId": "net"})
except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
    t.not_ok("a real look admits a client outside every sandbox: %s" % e,
             srv.stderr_text()[-3000:])
finally:
    srv.stop()

shutil.rmtree(work, ignore_errors=True)
t.done()
