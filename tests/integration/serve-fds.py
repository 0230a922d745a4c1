#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# A server out of file descriptors (RLIMIT_NOFILE 64), over unix sockets and
# WebSocket:
# - new connections are refused once fewer than a few descriptors are left;
# - a process/start that runs out says what ran out and the way out;
# - with the table full to its last slot (accept() itself fails), a burst of
#   connects is answered at once (ws: 503 "out of file descriptors"; unix:
#   closed) instead of left hanging, the loop does not spin (next to no CPU)
#   and it is logged once;
# - the clients it has are still answered, and cordon/status says it is short;
# - descriptors freed make room: the next client is admitted.
# TAP.

import os
import resource
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import Tap, cordon_usable, cpu_ticks, err_msg, uri  # noqa: E402
import netclient  # noqa: E402
from netclient import NetServer, http  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

NOFILE = 64
BURST = 20
UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def limited_server(kind):
    """A server whose RLIMIT_NOFILE is NOFILE (set in the child before exec)."""
    def lim():
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    real = subprocess.Popen

    class Popen(real):
        def __init__(self, *a, **kw):
            kw["preexec_fn"] = lim
            super().__init__(*a, **kw)
    netclient.subprocess.Popen = Popen
    try:
        return NetServer(kind)
    finally:
        netclient.subprocess.Popen = real


def attempt(srv, kind):
    """One more connect: ('admitted', socket kept open), ('refused: ...', None) or ('hung', None)."""
    try:
        if kind == "ws":
            st, _, body, s = http(srv.host, srv.port, "/", headers=UPGRADE, timeout=5)
            if st == 101:
                return "admitted", s
            s.close()
            return "refused: %d %s" % (st, body.decode(errors="replace").strip()), None
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(srv.path)
        s.sendall(b'{"id":1,"method":"initialize","params":{"clientName":"x"}}\n')
        d = s.recv(65536)
        if d:
            return "admitted", s
        s.close()
        return "refused: closed", None
    except socket.timeout:
        return "hung", None
    except OSError as e:
        return "refused: %s" % e, None


def scenario(kind):
    tag = kind
    srv = limited_server(kind)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        return
    conns = []
    kept = []
    try:
        pid = srv.server_pid
        # Fill the table with clients until one is refused...
        refused = None
        for _ in range(NOFILE):
            try:
                c = srv.connect(timeout=5)
                c.handshake()
                conns.append(c)
            except Exception as e:  # noqa: BLE001 - the refusal, whatever its form
                refused = repr(e)
                break
        t.ok(refused is not None and len(conns) >= 8,
             "[%s] clients are admitted until descriptors run short (%d), then refused"
             % (tag, len(conns)), refused)
        # ...and the rest with processes, until a start runs out: it says so.
        err_start = None
        n_started = 0
        for k in range(NOFILE):
            r = conns[0].start("sleep%d" % k, ["sleep", "600"])
            if "error" in r:
                err_start = err_msg(r)
                break
            n_started += 1
        t.ok(err_start is not None and "out of file descriptors" in err_start and
             "RLIMIT_NOFILE" in err_start,
             "[%s] a process/start that runs out says what ran out" % tag, err_start)
        # The last slots: files held open (fs/open) until one cannot be.
        handles = []
        for k in range(16):
            r = conns[0].request("fs/open", {"handleId": "h%d" % k,
                                             "path": uri(os.path.abspath(__file__))})
            if "error" in r:
                break
            handles.append("h%d" % k)
        # Now accept() itself finds no descriptor. A burst of connects: each
        # answered at once, the loop does not spin, one log line.
        ticks0 = cpu_ticks(pid)
        results = []
        for _ in range(BURST):
            res, sk = attempt(srv, kind)
            results.append(res)
            if sk:
                kept.append(sk)
            if res == "hung":
                break
        ticks = cpu_ticks(pid) - ticks0
        answered = [r for r in results if r.startswith("refused")]
        t.ok(len(results) == BURST and len(answered) >= BURST - 2,
             "[%s] connects while out of descriptors: %d of %d answered at once, none left "
             "hanging" % (tag, len(answered), len(results)), results)
        if kind == "ws":
            t.ok(answered and all("503" in r and "out of file descriptors" in r
                                  for r in answered),
                 "[%s] with 503 \"out of file descriptors\"" % tag, answered[:3])
        t.ok(ticks < 50, "[%s] and cost the server %d ticks of CPU (no spinning)" % (tag, ticks))
        err = srv.stderr_text()
        n = err.count("out of file descriptors (limit %d)" % NOFILE)
        # At most once per 10 s: each connect waits for the listener's next look (250 ms).
        t.ok(1 <= n <= 2 and len(err) < 4096,
             "[%s] said once per 10 s (%d times, %d bytes of log)" % (tag, n, len(err)),
             err[-1500:])
        # The clients it has are answered, and it reports the shortage.
        st = conns[1].call("cordon/status")
        d = st["descriptors"]
        t.ok(d["limit"] == NOFILE and d["shortages"] >= 1,
             "[%s] cordon/status reports the shortage" % tag, st)
        # Freed descriptors make room again: all that the requests above took
        # (however many descriptors the server itself holds), and 3 clients.
        for k in range(n_started):
            conns[0].request("process/terminate", {"processId": "sleep%d" % k})
        for h in handles:
            conns[0].request("fs/close", {"handleId": h})
        for sk in kept:
            sk.close()
        kept = []
        for c in conns[-3:]:
            c.drop()
        del conns[-3:]
        ok = False
        deadline = time.monotonic() + 10
        while not ok and time.monotonic() < deadline:
            res, sk = attempt(srv, kind)
            ok = res == "admitted"
            if sk:
                sk.close()
            if not ok:
                time.sleep(0.05)
        t.ok(ok, "[%s] once they are freed, a new client is admitted" % tag)
    finally:
        for sk in kept:
            sk.close()
        for c in conns:
            c.drop()
        srv.stop()


def have_ws():
    s = NetServer("ws")
    try:
        return s.ready
    finally:
        s.stop()


t.guard("unix", scenario, "unix")
if have_ws():
    t.guard("ws", scenario, "ws")
else:
    t.skip("[ws] out of descriptors", "built without WebSocket support")
t.done()
