#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Lossless resume and closed processes kept while their session can be
# resumed, over unix sockets and WebSocket:
# - a client that drops in the middle of a process's output (having read
#   some, or having stopped reading, or, over WebSocket, with megabytes its
#   kernel acknowledged and it never read) resumes and reads every byte, in
#   order and without a gap in the seqs: while detached, the process is held
#   (its output is not read) instead of losing what does not fit the 1 MiB
#   retention;
# - with --detached-output=drop the process runs on and the reader sees a gap
#   (the old behaviour, kept as an option);
# - a resumed client that does not ask for what it missed releases the
#   process after --session-ttl;
# - a process that closes while its session is detached is kept past
#   --retention until the session is resumed, then for --retention again.
# Waits are on the server's own reports (cordon/status, its -v log). TAP.

import fcntl
import os
import socket
import struct
import sys
import termios
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import netclient  # noqa: E402
from rpcclient import Eof, Tap, Timeout, cordon_usable, err_msg, unb64, wait_status  # noqa: E402
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

LINES = 400000  # 10.4 MB of output
WANT = b"".join(b"%08d abcdefghijklmnop\n" % i for i in range(LINES))
GEN = ["python3", "-c",
       "import sys\nw = sys.stdout.write\n"
       "for i in range(%d): w('%%08d abcdefghijklmnop\\n' %% i)" % LINES]


def have_ws():
    s = NetServer("ws")
    try:
        return s.ready
    finally:
        s.stop()


def wait_log(srv, text, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in srv.stderr_text():
            return True
        time.sleep(0.05)
    return False


def read_rest(c, pid, last, timeout=120.0):
    """process/read from after last until closed: (bytes, gaps, closed, exit code).
    One seq is the exit's: output read after the process exited (a held one
    exits with output still in its pipe) comes after it (reference: an output
    seq may exceed the exit seq). Any other seq missing is a gap."""
    got = bytearray()
    gaps = 0
    exit_seq_seen = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = c.call("process/read", {"processId": pid, "afterSeq": last, "waitMs": 2000},
                   timeout=30)
        for ch in r["chunks"]:
            if ch["seq"] == last + 2 and r["exited"] and not exit_seq_seen:
                exit_seq_seen = True
            elif ch["seq"] != last + 1:
                gaps += 1
            last = ch["seq"]
            got += unb64(ch["chunk"])
        if not r["chunks"] and r["nextSeq"] - 1 > last:
            # Nothing retained after last: the seqs in between may only be
            # the exit's and the close's.
            events = (r["exited"] and not exit_seq_seen) + bool(r["closed"])
            if r["nextSeq"] - 1 - last > events:
                gaps += 1
            exit_seq_seen = exit_seq_seen or r["exited"]
            last = r["nextSeq"] - 1
        if r["closed"]:
            return bytes(got), gaps, True, r["exitCode"]
    return bytes(got), gaps, False, None


def take_notifications(c, pid, upto):
    """Read process/output notifications of pid until upto bytes: (bytes, last seq, gaps)."""
    got = bytearray()
    last = 0
    gaps = 0
    while len(got) < upto:
        m = c.read_msg(30)
        if m.get("method") != "process/output" or m["params"]["processId"] != pid:
            continue
        p = m["params"]
        if p["seq"] != last + 1:
            gaps += 1
        last = p["seq"]
        got += unb64(p["chunk"])
    return got, last, gaps


def server_up(kind, tag, args=()):
    """A server on kind, or None (the failure reported)."""
    srv = NetServer(kind, args=list(args))
    if srv.ready:
        return srv
    t.not_ok("[%s] server up" % tag, srv.stderr_text())
    return None


def resume(srv, sid):
    c = srv.connect(timeout=10)
    r = c.request("initialize", {"clientName": "back", "resumeSessionId": sid})
    c.notify("initialized", {})
    return c, r


READ_SOME, NO_READ, DEEP = ("read some then dropped", "stopped reading",
                             "megabytes unread in the client's kernel")


def lossless(kind, how):
    """A client drops in the middle of the output and resumes. DEEP: one whose
    kernel holds what it never read when it drops: over TCP its kernel
    acknowledged it, which is not reading it."""
    tag = "%s, %s" % (kind, how)
    srv = server_up(kind, tag)
    if not srv:
        return
    try:
        obs = srv.connect(timeout=10)
        obs.handshake()
        a = srv.connect(timeout=10)
        sid = a.handshake()["sessionId"]
        # What the client has taken into its own buffers but not handled
        # when it drops is covered by the last 1 MiB the server keeps
        # (cordon-serve(1), SESSIONS): this one takes 64 KiB at a time. Its kernel's receive
        # buffer is left to autotuning, or made large.
        a.recv_size = 64 * 1024
        if how == DEEP and os.geteuid() == 0:
            # SO_RCVBUFFORCE: past net.core.rmem_max (unprivileged, autotuning may grow it).
            a.sock.setsockopt(socket.SOL_SOCKET, 33, 8 * 1024 * 1024)
        r = a.start("gen", GEN)
        got, last = bytearray(), 0
        if how != NO_READ:
            got, last, gaps = take_notifications(a, "gen", 1000000)
        if how != READ_SOME:
            # It reads nothing (more): the process is held once 4 MiB wait for it.
            st, ok = wait_status(obs, lambda s: s["heldProcesses"] >= 1)
            t.ok(ok, "[%s] a client that does not read holds its process back" % tag, st)
        if how == DEEP:
            unread = struct.unpack("i", fcntl.ioctl(a.sock, termios.FIONREAD, b"\0" * 4))[0]
            t.diag("[%s] %d bytes in the client's kernel when it drops" % (tag, unread))
        a.drop()
        st, ok = wait_status(obs, lambda s: s["heldProcesses"] >= 1)
        t.ok(ok, "[%s] while detached the process is held, not run on" % tag, st)
        b, r = resume(srv, sid)
        t.ok(r.get("result", {}).get("sessionId") == sid, "[%s] the session resumes" % tag, r)
        rest, gaps, closed, code = read_rest(b, "gen", last)
        got += rest
        t.ok(closed and code == 0 and gaps == 0 and bytes(got) == WANT,
             "[%s] every byte arrives, in order, no seq missing (%d of %d bytes)"
             % (tag, len(got), len(WANT)), "gaps %d closed %r code %r" % (gaps, closed, code))
        b.drop()
    finally:
        srv.stop()


def no_pong(kind):
    """A WebSocket client that reads every frame but answers no ping (RFC 6455
    says it must): what it read is never confirmed, so once its process is held
    it is dropped by the stall timer, with a log line that says why, and a
    resumed client still gets every byte."""
    tag = "%s, a client that answers no ping" % kind
    srv = server_up(kind, tag, ["--stall-timeout", "2s"])
    if not srv:
        return
    try:
        a = srv.connect(timeout=10)
        sid = a.handshake()["sessionId"]
        real = a.send_frame
        a.send_frame = lambda op, payload=b"", fin=True: (
            None if op == netclient.OP_PONG else real(op, payload, fin))
        a.start("gen", GEN)
        got, last = bytearray(), 0
        try:
            while True:
                m = a.read_msg(60)
                p = m.get("params", {})
                if m.get("method") == "process/output" and p.get("processId") == "gen":
                    last = p["seq"]
                    got += unb64(p["chunk"])
        except (Eof, Timeout, OSError):
            pass
        t.ok(a.out_eof and wait_log(srv, "answers no ping"),
             "[%s] is dropped once its process waits, and the log says why" % tag,
             srv.stderr_text()[-800:])
        b, r = resume(srv, sid)
        rest, gaps, closed, code = read_rest(b, "gen", last)
        got += rest
        t.ok(closed and code == 0 and gaps == 0 and bytes(got) == WANT,
             "[%s] the resumed client gets every byte (%d of %d)" % (tag, len(got), len(WANT)),
             "gaps %d closed %r code %r" % (gaps, closed, code))
        b.drop()
    finally:
        srv.stop()


def lossy(kind):
    tag = "%s, --detached-output=drop" % kind
    srv = server_up(kind, tag, ["--detached-output", "drop", "-v"])
    if not srv:
        return
    try:
        a = srv.connect(timeout=10)
        sid = a.handshake()["sessionId"]
        a.start("gen", GEN)
        got, last, _ = take_notifications(a, "gen", 1000000)
        a.drop()
        t.ok(wait_log(srv, "process gen exited with 0", 120),
             "[%s] detached, the process runs to its end" % tag)
        b, r = resume(srv, sid)
        # It ran on: far more than the 1 MiB kept came meanwhile.
        rest, gaps, closed, code = read_rest(b, "gen", last)
        t.ok(closed and code == 0 and gaps >= 1 and len(got) + len(rest) < len(WANT),
             "[%s] the process runs on and the reader sees a gap" % tag,
             "gaps %d, %d bytes" % (gaps, len(got) + len(rest)))
        b.drop()
    finally:
        srv.stop()


def released(kind):
    tag = "%s, resumed but not read" % kind
    srv = server_up(kind, tag, ["--session-ttl", "1s"])
    if not srv:
        return
    try:
        obs = srv.connect(timeout=10)
        obs.handshake()
        a = srv.connect(timeout=10)
        sid = a.handshake()["sessionId"]
        a.start("gen", GEN)
        a.drop()
        st, ok = wait_status(obs, lambda s: s["heldProcesses"] >= 1)
        t.ok(ok, "[%s] held while detached" % tag, st)
        b, r = resume(srv, sid)
        # Nothing read: after --session-ttl the process goes on; it closes.
        res = b.wait_closed("gen", timeout=120)
        t.ok(res.exit_code == 0, "[%s] released after --session-ttl, it runs to its end" % tag)
        b.drop()
    finally:
        srv.stop()


def kept_closed(kind):
    tag = "%s, closed while detached" % kind
    srv = server_up(kind, tag, ["-v", "--retention", "200ms", "--session-ttl", "60s"])
    if not srv:
        return
    try:
        a = srv.connect(timeout=10)
        sid = a.handshake()["sessionId"]
        a.run("echo", ["sh", "-c", "echo bye; exit 3"])
        a.drop()
        t.ok(wait_log(srv, "process echo: closed 200 ms ago, kept while its session can be "
                           "resumed"),
             "[%s] its retention ends while the session is detached: it is kept" % tag,
             srv.stderr_text()[-1500:])
        b, r = resume(srv, sid)
        r = b.request("process/read", {"processId": "echo", "afterSeq": 0})
        res = r.get("result", {})
        out = b"".join(unb64(ch["chunk"]) for ch in res.get("chunks", []))
        t.ok(res.get("closed") and res.get("exitCode") == 3 and out == b"bye\n",
             "[%s] the resumed client reads its output and exit status" % tag, r)
        t.ok(wait_log(srv, "forgetting process echo"),
             "[%s] then it is forgotten after --retention" % tag)
        r = b.request("process/read", {"processId": "echo", "afterSeq": 0})
        t.ok("unknown process id" in err_msg(r), "[%s] and is unknown then" % tag, r)
        b.drop()
    finally:
        srv.stop()


kinds = ["unix"] + (["ws"] if have_ws() else [])
if "ws" not in kinds:
    t.skip("[ws] lossless resume", "built without WebSocket support")
for kind in kinds:
    for how in (READ_SOME, NO_READ) + ((DEEP,) if kind == "ws" else ()):
        t.guard("lossless %s" % kind, lossless, kind, how)
    if kind == "ws":
        t.guard("no pong %s" % kind, no_pong, kind)
    t.guard("lossy %s" % kind, lossy, kind)
    t.guard("released %s" % kind, released, kind)
    t.guard("kept %s" % kind, kept_closed, kind)
t.done()
