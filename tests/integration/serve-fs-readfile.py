#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# fs/readFile answers that a worker writes to the client itself (stdio and
# unix sockets; the connection lends it the stream), on both loops:
# - the stream stays whole: output queued before the answer, the answer,
#   and process output and other answers that come while it is written
#   arrive intact and complete (the client reads nothing until the server
#   says it stopped reading the output and took the requests in; on a unix
#   socket its --stall-timeout is the test's patience, since the client
#   rightly reads nothing while it decodes the answer);
# - memory stays small: the server's peak RSS over a 64 MiB readFile is
#   far below the size of the answer (what the server reports it built in
#   memory, for a client too slow for the worker, is all it may add);
# - a client that reads nothing is dropped after --stall-timeout, the
#   workers it held are free again and its session can be resumed;
# - clients that read slowly do not hold the workers (the loop writes the
#   rest of their answers);
# - a connection the server ends in the middle of an answer gets nothing
#   written into it;
# - a client that leaves in the middle of an answer leaves no descriptor
#   or thread stuck, and the server answers the next one;
# - a unix client that shuts its sending side and reads on gets its whole
#   answer, then the end of the connection;
# - SIGTERM during an answer nobody reads exits promptly.
# WebSocket answers are built whole (a frame holds one message): serve-net
# and serve-fs cover those. The test waits for the server's events
# (CORDON_TEST_EVENTS: a worker runs the readFile, hands back what the
# client was too slow for) rather than for time. TAP.

import hashlib
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, LOOPS, WAIT, Hooks, Server, Tap, cordon_usable,  # noqa: E402
                       fd_count, unb64, uri)
from netclient import NetServer, UnixConn  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

MIB = 1024 * 1024


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def seq_output(n):
    return subprocess.run(["seq", "1", str(n)], check=True, capture_output=True).stdout


def whole_stream(tag, conn, base, data_path, data, hooks):
    """Process output before, during and after a large answer: all of it arrives intact.

    The client reads nothing until the generator's output has piled up (the
    server reports that it stopped reading it: output-paused, the connection's
    queue is over its cap, or output-held, a network session's lossless hold)
    and its requests are in (fs-queued of the last one) or wait for it to read
    (its queue is over its cap): the answer starts with output queued, and
    more comes while it is written. hooks: the server's (Hooks)."""
    n = 1500000  # about 10 MB of output
    want = seq_output(n)
    mark = hooks.mark()
    r = conn.start("gen", ["seq", "1", str(n)])
    t.ok("result" in r, "[%s] generator started" % tag, repr(r))
    paused = ("output-paused", {"on": 1})
    hooks.wait_any(paused, ("output-held", {"proc": "gen", "on": 1}), since=mark)
    small = os.path.join(base, "small")
    with open(small, "wb") as f:
        f.write(b"tiny")
    rid = conn.send_request("fs/readFile", {"path": uri(data_path)})
    sid = conn.send_request("fs/getMetadata", {"path": uri(small)})
    rid2 = conn.send_request("fs/readFile", {"path": uri(small)})
    hooks.wait_any(("fs-queued", {"id": rid2}), paused, since=mark)
    try:
        resp = conn.wait_id(rid)
        meta = conn.wait_id(sid)
        resp2 = conn.wait_id(rid2)
        res = conn.wait_closed("gen")
    except Exception as e:  # a torn line fails to parse here
        t.not_ok("[%s] the stream stays whole" % tag, repr(e))
        return
    got = unb64(resp["result"]["dataBase64"]) if resp and "result" in resp else None
    t.ok(got is not None and hashlib.sha256(got).digest() == hashlib.sha256(data).digest(),
         "[%s] a %d MiB readFile answer is intact amid process output" % (tag, len(data) >> 20),
         repr(resp)[:300] if got is None else "length %d" % len(got))
    t.ok(meta is not None and "result" in meta, "[%s] an answer sent meanwhile arrives" % tag)
    t.ok(resp2 is not None and unb64(resp2["result"]["dataBase64"]) == b"tiny",
         "[%s] the next readFile is answered" % tag, repr(resp2)[:300])
    t.ok(res.stdout == want, "[%s] all %d bytes of process output arrive in order" % (tag, len(want)),
         "got %d bytes" % len(res.stdout))
    t.ok(res.exit_code == 0, "[%s] the generator exited 0" % tag)


def peak_rss(tag, loop, kind, data_path, size):
    """The server's peak RSS over a large readFile read at once by its client.

    The worker writes the answer to the client itself, a slice at a time; a
    client that leaves it waiting gets the rest later, from a worker again
    (the worker gives its turn up): the answer is never built in memory, so
    the bound holds whatever the host's load.
    """
    hooks = Hooks()
    if kind == "stdio":
        srv = Server(loop=loop, extra_env=hooks.env)
        conn = srv
    else:
        srv = NetServer("unix", loop=loop, extra_env=hooks.env)
        conn = srv.connect()
    try:
        conn.handshake()
        pid = srv.server_pid
        before = status_kb(pid, "VmHWM")
        r = conn.request("fs/readFile", {"path": uri(data_path)})
        ok = "result" in r and len(unb64(r["result"]["dataBase64"])) == size
        grew = status_kb(pid, "VmHWM") - before
        ev = hooks.wait("fs-answer", id=r.get("id"))
    finally:
        srv.stop()
        hooks.close()
    # Built whole, the answer alone is 1.33x the file (85 MiB here).
    t.ok(ok and ev["lent"] == "1" and ev["cut"] == "0" and grew < 24 * 1024,
         "[%s] peak RSS over a %d MiB readFile grows by %d kB (under 24 MiB)"
         % (tag, size >> 20, grew), "answer ok %r, event %r" % (ok, ev))


def slow_readers(tag, srv, hooks, data_path, size):
    """Clients that read their answers slowly do not hold the workers: each
    worker gives its turn up while a slow client's stream is full (the loop
    waits for the stream, then a worker goes on), and another client's
    readFile is answered while they are far from done."""
    slow = []
    for k in range(4):
        c = srv.connect()
        c.handshake()
        c.next_id = 1000 * (k + 1)
        c.send_request("fs/readFile", {"path": uri(data_path)})
        c.got = 0
        slow.append(c)
    b = srv.connect()
    b.handshake()
    b.next_id = 9000
    i = b.send_request("fs/readFile", {"path": uri(data_path)})
    r = None
    deadline = time.monotonic() + WAIT  # a bound only: a failing server gets here
    # The slow ones take 64 KiB each every round: never stalled, never done.
    while r is None and time.monotonic() < deadline:
        for c in slow:
            try:
                c.got += len(c.sock.recv(1 << 16))
            except (BlockingIOError, OSError):
                pass
        r = b.wait_id(i, 0.2)
    # Each worker gives its turn up once its client leaves it waiting (they all do, sooner or later).
    handed = [hooks.wait("fs-yield", id=c.next_id - 1) for c in slow]
    t.ok(r is not None and "result" in r and len(unb64(r["result"]["dataBase64"])) == size and
         all(c.got < size for c in slow),
         "[%s] 4 clients reading slowly hold no worker: another readFile is answered "
         "while they read" % tag, [c.got for c in slow])
    t.ok(len(handed) == len(slow) and all(h["method"] == "fs/readFile" for h in handed),
         "[%s] their workers gave their turns up, the answers unfinished" % tag, handed)
    for c in slow:
        c.drop()
    b.drop()


def closed_mid_answer(tag, srv, data_path):
    """A connection the server ends while a worker writes its answer (here a
    notification it does not know) gets nothing written into that answer.
    Whether the server's last write would land inside the answer is a race
    (the socket must have room at that instant): a build without the guard
    spoiled one answer in five to ten here, so five tries catch it about
    half the time; a build with it never writes there."""
    foreign = 0
    for _ in range(5):
        c = srv.connect()
        c.handshake()
        c.send_request("fs/readFile", {"path": uri(data_path)})
        c.sock.setblocking(True)
        c.sock.settimeout(WAIT)
        raw = bytearray()
        while len(raw) < 4 * MIB:
            raw += c.sock.recv(1 << 20)
        # Its answer queues behind the readFile; then the end of the connection.
        c.send({"id": 99, "method": "process/start",
                "params": {"processId": "p", "argv": ["true"], "cwd": uri("/tmp"),
                           "env": {"PATH": "/usr/bin:/bin"}, "tty": False}})
        c.send({"method": "bogus/notification", "params": {}})
        while True:
            try:
                d = c.sock.recv(1 << 20)
            except OSError:
                break
            if not d:
                break
            raw += d
        c.drop()
        at = raw.find(b'"dataBase64":"')
        body = raw[at + 14:] if at >= 0 else b""
        end = body.find(b'"')
        if re.search(rb"[^A-Za-z0-9+/=]", body if end < 0 else body[:end]):
            foreign += 1
    t.ok(foreign == 0, "[%s] a connection ended mid-answer gets nothing inside the answer" % tag,
         "%d of 5 answers had foreign bytes" % foreign)


def half_closed(tag, loop, data_path, data):
    """A client that shuts its sending side after its requests (nc -N) and
    reads on gets its whole answer, even with a chatty process and a small
    --max-queued-bytes, and then the end of the connection."""
    srv = NetServer("unix", loop=loop, args=["--max-queued-bytes", "64K"])
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        return
    try:
        c = srv.connect()
        c.handshake()
        c.start("chatty", ["seq", "1", "3000000"])
        rid = c.send_request("fs/readFile", {"path": uri(data_path)})
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            c._pump(end)
        c.sock.shutdown(socket.SHUT_WR)
        resp = c.wait_id(rid)
        eof = c.expect_eof()
        got = unb64(resp["result"]["dataBase64"]) if resp and "result" in resp else None
        t.ok(got == data, "[%s] a half-closed client that reads gets its whole answer" % tag,
             repr(resp)[:300] if got is None else "length %d" % len(got))
        t.ok(eof, "[%s] and then the end of the connection" % tag)
        c.drop()
    finally:
        srv.stop()


def stdio_scenarios(loop, base, data_path, data):
    tag = "stdio %s" % loop
    hooks = Hooks()
    # A queue cap below the generator's output, so that the server stops
    # reading it while the client reads nothing (output-paused) and reads it
    # again while the answer is written.
    s = Server(loop=loop, args=["--max-queued-bytes", "1M"], extra_env=hooks.env)
    try:
        s.handshake()
        whole_stream(tag, s, base, data_path, data, hooks)
    finally:
        s.stop()
        hooks.close()
    # SIGTERM while an answer waits for a client that reads nothing: the
    # server does not wait for it (its final flush and its workers' stop are
    # bounded: no job is left running, which it would log).
    hooks = Hooks()
    s = Server(loop=loop, extra_env=hooks.env)
    try:
        s.handshake()
        pid = s.server_pid
        i = s.send_request("fs/readFile", {"path": uri(data_path)})
        hooks.wait("fs-run", id=i)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        try:
            rc = s.p.wait(WAIT)
        except subprocess.TimeoutExpired:
            rc = None
        dt = time.monotonic() - t0
        t.ok(rc is not None and "did not stop" not in s.output_to_eof(),
             "[%s] SIGTERM during an unread readFile answer exits (%.2f s), its worker "
             "stopped" % (tag, dt), "exit %r: %s" % (rc, s.stderr_text()[-500:]))
    finally:
        s.stop()
        hooks.close()


def unix_whole_stream(loop, base, data_path, data):
    """whole_stream on a server of its own, whose --stall-timeout is the test's
    own patience (WAIT): in whole_stream the client rightly reads nothing while
    it decodes the 85 MiB answer line, which takes over a second on a loaded
    host, and a network client that takes nothing for --stall-timeout while its
    session's processes wait for it is dropped, as it should be (what
    unix_scenarios checks with a 1 s timeout)."""
    tag = "unix %s" % loop
    hooks = Hooks()
    srv = NetServer("unix", loop=loop, args=["--stall-timeout", "%ds" % int(WAIT)],
                    extra_env=hooks.env)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        hooks.close()
        return
    try:
        a = srv.connect()
        a.handshake()
        whole_stream(tag, a, base, data_path, data, hooks)
        a.drop()
    finally:
        srv.stop()
        hooks.close()


def unix_scenarios(loop, base, data_path, data):
    tag = "unix %s" % loop
    hooks = Hooks()
    srv = NetServer("unix", loop=loop, args=["--stall-timeout", "1s"], extra_env=hooks.env)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        hooks.close()
        return
    try:
        pid = srv.server_pid
        slow_readers(tag, srv, hooks, data_path, len(data))
        closed_mid_answer(tag, srv, data_path)

        # Five clients ask for the big file and read nothing: more than the
        # four workers. Each is dropped after the stall timeout, and the
        # workers come back.
        idle = []
        for k in range(5):
            c = srv.connect()
            c.session_id = c.handshake()["sessionId"]
            c.send_request("fs/readFile", {"path": uri(data_path)})
            idle.append(c)
        b = srv.connect()
        b.handshake()
        r = b.request("fs/getMetadata", {"path": uri(data_path)})
        t.ok("result" in r, "[%s] other clients are answered while readers stall" % tag)
        t0 = time.monotonic()
        gone = 0
        for c in idle:
            # Without reading: the server's end closing shows as POLLHUP.
            p = select.poll()
            p.register(c.sock, 0)
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                if any(ev & select.POLLHUP for _, ev in p.poll(100)):
                    gone += 1
                    break
        t.ok(gone == 5, "[%s] the 5 clients that read nothing are dropped (%.1f s)"
             % (tag, time.monotonic() - t0), "%d of 5" % gone)
        for c in idle:
            c.drop()
        for c in idle:
            hooks.wait("session-detached", session=c.session_id)
        c = srv.connect()
        r = c.request("initialize", {"clientName": "again", "resumeSessionId": idle[0].session_id})
        t.ok("result" in r, "[%s] a dropped client's session can be resumed" % tag, repr(r))
        c.drop()
        t0 = time.monotonic()
        r = b.request("fs/readFile", {"path": uri(data_path)})
        dt = time.monotonic() - t0
        t.ok("result" in r and len(unb64(r["result"]["dataBase64"])) == len(data),
             "[%s] the workers are free again: a readFile is answered in %.2f s" % (tag, dt))
        errs = srv.stderr_text()
        t.ok("read nothing for 1000 ms" in errs,
             "[%s] the drop is logged with its reason" % tag, errs[-600:])

        # A client that leaves in the middle of an answer.
        fds0 = fd_count(pid)
        for _ in range(3):
            c = srv.connect()
            c.handshake()
            c.send_request("fs/readFile", {"path": uri(data_path)})
            c.sock.settimeout(WAIT)
            got = 0
            while got < MIB:
                d = c.sock.recv(1 << 16)
                if not d:
                    break
                got += len(d)
            c.drop()
        r = b.request("fs/getMetadata", {"path": uri(data_path)})
        t.ok("result" in r, "[%s] the server is up after clients left mid-answer" % tag)
        # Their workers stop writing and their connections are freed: a bound only.
        deadline = time.monotonic() + WAIT
        while fd_count(pid) > fds0 and time.monotonic() < deadline:
            time.sleep(0.1)
        t.ok(fd_count(pid) <= fds0,
             "[%s] no descriptor stays behind (%d, was %d)" % (tag, fd_count(pid), fds0))
        r = b.request("fs/readFile", {"path": uri(data_path)})
        t.ok("result" in r and len(unb64(r["result"]["dataBase64"])) == len(data),
             "[%s] a readFile after they left is whole" % tag)
        b.drop()

        # SIGTERM while an unread answer is being written.
        c = srv.connect()
        c.handshake()
        c.next_id = 7000
        i = c.send_request("fs/readFile", {"path": uri(data_path)})
        hooks.wait("fs-run", id=i)
        t0 = time.monotonic()
        rc = srv.stop(signal.SIGTERM)
        dt = time.monotonic() - t0
        t.ok(rc == 0 and "did not stop" not in srv.stderr_text(),
             "[%s] SIGTERM during an unread answer exits 0 (%.2f s), its worker stopped"
             % (tag, dt), "exit %r: %s" % (rc, srv.stderr_text()[-500:]))
        c.drop()
    finally:
        srv.stop()
        hooks.close()


def main():
    base = tempfile.mkdtemp(prefix="cordon-readfile-")
    try:
        data = os.urandom(64 * MIB)
        data_path = os.path.join(base, "big")
        with open(data_path, "wb") as f:
            f.write(data)
        for loop in LOOPS:
            for kind in ("stdio", "unix"):
                t.guard("%s %s peak RSS" % (kind, loop), peak_rss, "%s %s" % (kind, loop), loop,
                        kind, data_path, len(data))
            t.guard("stdio %s" % loop, stdio_scenarios, loop, base, data_path, data)
            t.guard("unix %s half-closed" % loop, half_closed, "unix %s" % loop, loop, data_path,
                    data)
            t.guard("unix %s stream" % loop, unix_whole_stream, loop, base, data_path, data)
            t.guard("unix %s" % loop, unix_scenarios, loop, base, data_path, data)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    t.done()


main()
