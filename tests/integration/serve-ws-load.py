#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# WebSocket under load:
# - a burst of simultaneous connects up to --max-connections is served whole
#   (a new handshake no longer pushes out the oldest), and past it each
#   client is answered 503 with the reason;
# - sockets that never complete their handshake hold their place for the
#   handshake time only (slowloris bounded by time): new clients are
#   answered 503 meanwhile, and admitted once those are closed;
# - fs/readFile answers are streamed by a worker in frames of one
#   fragmented message: the server's peak RSS does not grow by the answer,
#   the answer is whole, clients that read slowly hold no worker, and one
#   that reads nothing is dropped after --stall-timeout.
# TAP.

import os
import select
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import Tap, cordon_usable, unb64, uri  # noqa: E402
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

MIB = 1024 * 1024
REQ = ("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
       "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode()


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def burst(srv, n):
    """n connects at once, then each sends its upgrade: {status: count}, and the 503 bodies."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((srv.host, srv.port))
        except BlockingIOError:
            pass
        socks.append(s)
    res, bodies = {}, set()
    for s in socks:
        select.select([], [s], [], 10)
        s.setblocking(True)
        s.settimeout(10)
        try:
            s.sendall(REQ)
        except OSError:
            pass
    for s in socks:
        try:
            d = b""
            while b"\r\n\r\n" not in d:
                c = s.recv(4096)
                if not c:
                    break
                d += c
            st = d.split(b" ")[1].decode() if d.startswith(b"HTTP/1.1 ") else "no answer"
            if st == "503":
                bodies.add(d.partition(b"\r\n\r\n")[2][:200])
        except OSError as e:
            st = type(e).__name__
        res[st] = res.get(st, 0) + 1
    for s in socks:
        s.close()
    return res, bodies


def bursts():
    srv = NetServer("ws")
    try:
        res, _ = burst(srv, 200)
        t.eq(res, {"101": 200}, "200 simultaneous connects (--max-connections 256) all get in")
    finally:
        srv.stop()
    srv = NetServer("ws", args=["--max-connections", "50"])
    try:
        res, bodies = burst(srv, 120)
        t.eq(res, {"101": 50, "503": 70},
             "120 at once with --max-connections 50: 50 get in, 70 are answered 503")
        t.ok(bodies and all(b"too many connections" in b for b in bodies),
             "and the 503 says why", bodies)
    finally:
        srv.stop()


def slowloris():
    """Idle sockets hold their place for the handshake time, not longer."""
    srv = NetServer("ws", args=["--max-connections", "2"])
    try:
        # --max-connections + 64 handshakes may wait: fill them with sockets that say nothing.
        idle = [socket.create_connection((srv.host, srv.port)) for _ in range(66)]
        s = socket.create_connection((srv.host, srv.port), timeout=10)
        s.sendall(REQ)
        d = s.recv(4096)
        s.close()
        t.ok(d.startswith(b"HTTP/1.1 503"), "with every handshake place taken, a client gets 503",
             d[:100])
        # The server closes them after its handshake time (10 s): wait for that.
        deadline = time.monotonic() + 30
        closed = 0
        for sk in idle:
            sk.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                if sk.recv(1) == b"":
                    closed += 1
            except OSError:
                closed += 1
        t.eq(closed, len(idle), "sockets that never complete their handshake are closed in time")
        c = srv.connect(timeout=10)
        t.ok("sessionId" in c.handshake(), "then a new client gets in")
        c.drop()
        for sk in idle:
            sk.close()
    finally:
        srv.stop()


def read_file(base):
    data = os.urandom(64 * MIB)
    path = os.path.join(base, "big")
    with open(path, "wb") as f:
        f.write(data)
    srv = NetServer("ws", args=["--stall-timeout", "1s"])
    try:
        pid = srv.server_pid
        a = srv.connect(timeout=30)
        a.handshake()
        b = srv.connect(timeout=10)
        b.handshake()
        hwm0 = status_kb(pid, "VmHWM")
        i = a.send_request("fs/readFile", {"path": uri(path)})
        worst = 0.0
        while not a.has_id(i):
            t0 = time.monotonic()
            b.call("environment/status")
            worst = max(worst, time.monotonic() - t0)
        r = a.wait_id(i, 60)
        grew = status_kb(pid, "VmHWM") - hwm0
        got = unb64(r["result"]["dataBase64"]) if r and "result" in r else None
        t.ok(got == data, "a 64 MiB readFile over WebSocket is whole",
             repr(r)[:200] if got is None else "")
        t.ok(a.fragmented >= 1, "it came as one message in fragments")
        t.ok(grew < 24 * 1024,
             "the server's peak RSS grew by %d kB for a 85 MB answer (under 24 MiB)" % grew)
        t.diag("another client's environment/status waited at most %.3f s meanwhile" % worst)

        # Clients that read their answers slowly hold no worker.
        slow = []
        for _ in range(4):
            c = srv.connect(timeout=10)
            c.handshake()
            c.send_request("fs/readFile", {"path": uri(path)})
            slow.append(c)
        t0 = time.monotonic()
        i = b.send_request("fs/readFile", {"path": uri(path)})
        r = None
        while r is None and time.monotonic() - t0 < 30:
            for c in slow:
                try:
                    c.sock.recv(1 << 16)
                except (BlockingIOError, OSError):
                    pass
            r = b.wait_id(i, 0.2)
        dt = time.monotonic() - t0
        t.ok(r is not None and "result" in r and len(unb64(r["result"]["dataBase64"])) == len(data),
             "4 WebSocket clients reading slowly hold no worker: another readFile took %.2f s"
             % dt)
        for c in slow:
            c.drop()
        # A client that reads nothing is dropped after --stall-timeout.
        c = srv.connect(timeout=10)
        c.handshake()
        c.send_request("fs/readFile", {"path": uri(path)})
        # Without reading: the server's end closing shows as RDHUP (TCP).
        p = select.poll()
        p.register(c.sock, select.POLLRDHUP)
        gone = False
        deadline = time.monotonic() + 20
        while not gone and time.monotonic() < deadline:
            gone = any(ev & (select.POLLHUP | select.POLLRDHUP) for _, ev in p.poll(100))
        t.ok(gone and "read nothing for 1000 ms" in srv.stderr_text(),
             "a client that reads nothing of its answer is dropped after --stall-timeout",
             srv.stderr_text()[-800:])
        c.drop()
        r = b.request("fs/getMetadata", {"path": uri(path)})
        t.ok("result" in r, "and the server answers the others")
    finally:
        srv.stop()


s = NetServer("ws")
ws_ok = s.ready
s.stop()
if not ws_ok:
    t.skip_all("built without WebSocket support")
t.guard("bursts", bursts)
t.guard("slowloris", slowloris)
base = tempfile.mkdtemp(prefix="cordon-ws-load-", dir="/var/tmp")
try:
    t.guard("readFile", read_file, base)
finally:
    shutil.rmtree(base, ignore_errors=True)
t.done()
