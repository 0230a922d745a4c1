#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Slow fs/... requests do not stall the server: while one client copies a
# big file (directly or in a sandboxed helper), other clients, and the
# other requests of the same client, are answered at once; a connection's
# fs requests still complete in order (a pipelined writeFile then readFile
# sees the write; an fs/readBlock waits for its queued fs/open); a client
# that leaves mid-copy leaves no descriptor behind; the per-connection
# queue is bounded; SIGTERM during a copy exits promptly. Unix sockets; both
# loops. Clients that leave while their requests wait or run (unix and ws):
# the server stays up, requests not started are never performed, and the
# session can be resumed at once. TAP.

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, LOOPS, Tap, b64, cordon_usable, err_code, fd_count,  # noqa: E402
                       profile, special, unb64, uri)
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

MIB = 1024 * 1024
# Big enough that a copy takes well over a second here (and much more than BOUND).
BIG_MB = int(os.environ.get("CD_TEST_BIG_MB", "1024"))
BOUND = 0.5  # seconds: an answer that does not wait for the copy
INVALID_REQ = -32600


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def ctx(ws):
    return {"permissions": profile([special("project_roots", "write")]),
            "windowsSandboxLevel": "disabled", "workspaceRoots": [uri(ws)], "cwd": uri(ws)}


def timed(fn, *a, **kw):
    t0 = time.monotonic()
    r = fn(*a, **kw)
    return r, time.monotonic() - t0


def make_big(path):
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for _ in range(BIG_MB):
            f.write(block)


def fresh(srv):
    c = srv.connect(timeout=10.0)
    c.handshake()
    return c


def threads_of(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def run(tag, base, big):
    ws = os.path.join(base, "ws-" + tag)
    os.makedirs(ws)
    small = os.path.join(ws, "small")
    write(small, b"x" * 100)
    dst = os.path.join(base, "copy-" + tag)
    srv = NetServer("unix", loop=tag)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        return
    try:
        a = fresh(srv)
        # A first offloaded request: the pool's eventfd and threads exist from here on.
        a.call("fs/writeFile", {"path": uri(os.path.join(ws, "warm")), "dataBase64": b64(b"w")})
        pid = srv.server_pid

        # 1. Another client while a copy runs: of three names of the big file
        # (3 x BIG_MB), so that it outlasts the measurements even on a fast disk.
        tree = os.path.join(base, "tree-" + tag)
        os.makedirs(tree)
        for k in range(3):
            os.link(big, os.path.join(tree, "f%d" % k))
        cid = a.send_request("fs/copy", {"sourcePath": uri(tree), "destinationPath": uri(dst),
                                         "recursive": True})
        time.sleep(0.2)
        b = srv.connect(timeout=10.0)
        r, dt_init = timed(b.request, "initialize", {"clientName": "b"})
        b.notify("initialized", {})
        t.ok("result" in r and dt_init < BOUND,
             "[%s] a second client's initialize is answered during a copy" % tag,
             "%.3f s" % dt_init)
        r, dt_meta = timed(b.request, "fs/getMetadata", {"path": uri(small)})
        t.ok("result" in r and dt_meta < BOUND,
             "[%s] its fs/getMetadata too" % tag, "%.3f s %r" % (dt_meta, r))
        r, dt_start = timed(b.start, "p1", ["true"])
        t.ok("result" in r and dt_start < BOUND, "[%s] its process/start too" % tag,
             "%.3f s %r" % (dt_start, r))
        r, dt_read = timed(b.request, "fs/readFile", {"path": uri(small)})
        t.ok("result" in r and unb64(r["result"]["dataBase64"]) == b"x" * 100 and dt_read < BOUND,
             "[%s] its fs/readFile too (another connection's queue)" % tag, "%.3f s" % dt_read)
        t.ok(not a.has_id(cid), "[%s] (the copy was still running meanwhile)" % tag)
        r = a.wait_id(cid, timeout=180.0)
        t.ok(r is not None and r.get("result") == {} and
             all(os.path.getsize(os.path.join(dst, "f%d" % k)) == BIG_MB * MIB for k in range(3)),
             "[%s] the copy completes" % tag, r)
        shutil.rmtree(dst)
        shutil.rmtree(tree)

        # 2. The same client: its process/* and an open stream's blocks are not held back.
        h = a.call("fs/open", {"handleId": "h1", "path": uri(small)})
        t.ok(h == {"handleId": "h1"}, "[%s] fs/open" % tag, h)
        cid = a.send_request("fs/copy", {"sourcePath": uri(big), "destinationPath": uri(dst),
                                         "recursive": False})
        time.sleep(0.2)
        r, dt = timed(a.start, "p2", ["true"])
        t.ok("result" in r and dt < BOUND, "[%s] the copying client's process/start" % tag,
             "%.3f s" % dt)
        r, dt = timed(a.request, "fs/readBlock", {"handleId": "h1", "offset": 0, "len": 10})
        t.ok("result" in r and unb64(r["result"]["chunk"]) == b"x" * 10 and dt < BOUND,
             "[%s] its fs/readBlock on an open handle" % tag, "%.3f s %r" % (dt, r))
        # An fs request behind the copy waits for it (same connection: in order).
        mid = a.send_request("fs/getMetadata", {"path": uri(dst)})
        r = a.wait_id(mid)
        t.ok(r is not None and r["result"]["size"] == BIG_MB * MIB and a.has_id(cid),
             "[%s] a getMetadata sent after the copy sees it complete" % tag, r)
        a.wait_id(cid)
        os.unlink(dst)

        # 3. A sandboxed copy (in a helper): the others are answered meanwhile.
        # Three names of the big file, so that it outlasts the checks.
        sbig = os.path.join(ws, "sbig")
        os.makedirs(sbig)
        for k in range(3):
            os.link(big, os.path.join(sbig, "f%d" % k))
        sb = ctx(ws)
        cid = a.send_request("fs/copy", {"sourcePath": uri(sbig),
                                         "destinationPath": uri(os.path.join(ws, "sbig.copy")),
                                         "recursive": True, "sandbox": sb})
        time.sleep(0.3)
        r, dt = timed(b.request, "fs/getMetadata", {"path": uri(small)})
        t.ok("result" in r and dt < BOUND,
             "[%s] another client is answered during a sandboxed copy" % tag, "%.3f s" % dt)
        r, dt = timed(b.request, "fs/getMetadata", {"path": uri(small), "sandbox": sb})
        t.ok("result" in r and dt < BOUND + 0.5,
             "[%s] and its own sandboxed fs request" % tag, "%.3f s %r" % (dt, r))
        t.ok(not a.has_id(cid), "[%s] (the sandboxed copy was still running)" % tag)
        r = a.wait_id(cid)
        t.ok(r is not None and r.get("result") == {} and
             os.path.getsize(os.path.join(ws, "sbig.copy", "f2")) == BIG_MB * MIB,
             "[%s] the sandboxed copy completes" % tag, r)
        shutil.rmtree(os.path.join(ws, "sbig.copy"))
        shutil.rmtree(sbig)

        # 4. Order: pipelined writes and reads of one file, and a read of a queued open.
        f = os.path.join(ws, "ordered")
        ids = []
        for k in range(5):
            ids.append(a.send_request("fs/writeFile", {"path": uri(f), "dataBase64": b64(b"v%d" % k * 1000)}))
            ids.append(a.send_request("fs/readFile", {"path": uri(f)}))
            ids.append(a.send_request("fs/getMetadata", {"path": uri(f)}))
        oid = a.send_request("fs/open", {"handleId": "h2", "path": uri(f), "sandbox": sb})
        bid = a.send_request("fs/readBlock", {"handleId": "h2", "offset": 0, "len": 2})
        got = [a.wait_id(i) for i in ids + [oid, bid]]
        good = all(g is not None and "result" in g for g in got)
        for k in range(5) if good else ():
            good = good and unb64(got[3 * k + 1]["result"]["dataBase64"]) == b"v%d" % k * 1000
            good = good and got[3 * k + 2]["result"]["size"] == 2000
        t.ok(good, "[%s] pipelined writeFile/readFile/getMetadata see each write" % tag,
             [g for g in got if g is None or "error" in g][:3])
        t.ok(good and unb64(got[-1]["result"]["chunk"]) == b"v4",
             "[%s] an fs/readBlock pipelined behind its sandboxed fs/open reads it" % tag,
             got[-2:])
        order = [m["id"] for m in a.lines and [__import__("json").loads(x) for x in a.lines]
                 if m.get("id") in ids]
        t.ok(order == ids, "[%s] their answers come in order" % tag)

        # 5. The queue is bounded.
        cid = a.send_request("fs/copy", {"sourcePath": uri(big), "destinationPath": uri(dst),
                                         "recursive": False})
        more = [a.send_request("fs/getMetadata", {"path": uri(small)}) for _ in range(70)]
        got = [a.wait_id(i) for i in more]
        refused = [g for g in got if g is not None and err_code(g) == INVALID_REQ]
        t.ok(len(refused) >= 6 and all("too many fs requests" in g["error"]["message"]
                                       for g in refused),
             "[%s] past 64 waiting fs requests, the next are refused (-32600)" % tag,
             (len(refused), refused[:1]))
        a.wait_id(cid)
        os.unlink(dst)

        # 6. A client that leaves mid-copy: the server goes on, and nothing stays open.
        fds0 = fd_count(pid)
        c = fresh(srv)
        c.send_request("fs/copy", {"sourcePath": uri(big), "destinationPath": uri(dst), "recursive": False})
        time.sleep(0.2)
        c.drop()
        r, dt = timed(b.request, "fs/getMetadata", {"path": uri(small)})
        t.ok("result" in r and dt < BOUND,
             "[%s] after a client left mid-copy, the others are answered" % tag,
             "%.3f s" % dt)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and fd_count(pid) > fds0:
            time.sleep(0.1)
        t.ok(fd_count(pid) <= fds0, "[%s] its copy's descriptors are closed" % tag,
             (fd_count(pid), fds0, os.listdir("/proc/%d/fd" % pid)))
        t.ok(threads_of(pid) <= 5, "[%s] at most 4 worker threads" % tag, threads_of(pid))
        r = b.request("fs/getMetadata", {"path": uri(small)})
        t.ok("result" in r, "[%s] the server still serves" % tag)
        if os.path.exists(dst):
            os.unlink(dst)

        # 7. SIGTERM during a copy: the copy is cancelled, the server exits at once.
        a.send_request("fs/copy", {"sourcePath": uri(big), "destinationPath": uri(dst), "recursive": False})
        b.send_request("fs/copy", {"sourcePath": uri(sbig if os.path.exists(sbig) else big),
                                   "destinationPath": uri(os.path.join(ws, "sdst")), "recursive": False,
                                   "sandbox": sb})
        time.sleep(0.3)
        t0 = time.monotonic()
        st = srv.stop(timeout=30.0)
        dt = time.monotonic() - t0
        t.ok(st == 0 and dt < 2.5, "[%s] SIGTERM during copies exits within 2.5 s" % tag,
             "status %r after %.2f s" % (st, dt))
    finally:
        srv.stop()
        err = srv.stderr_text()
        if "AddressSanitizer" in err or "LeakSanitizer" in err:
            t.not_ok("[%s] sanitizers are quiet" % tag, err[-3000:])


def have_ws():
    probe = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return b"without the WebSocket transport" not in probe.stderr


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def gone_clients(kind, base, big):
    """Clients that leave while their fs requests wait or run (review regressions)."""
    tag = kind
    d = os.path.join(base, "gone-" + kind)
    os.makedirs(d)
    data = os.path.join(d, "data")
    write(data, os.urandom(2 * MIB))
    old = time.time() - 10
    os.utime(data, (old, old))
    srv = NetServer(kind)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        return
    try:
        pid = srv.server_pid
        # 1. A deferred fs/readBlock (queued behind its fs/open, itself behind a
        # writeFile on a worker) is answered while the client is already gone:
        # the failed write closes the connection in the middle of the answer.
        for k in range(60):
            if srv.p.poll() is not None:
                break
            try:
                c = fresh(srv)
            except Exception:  # the server died: reported below
                break
            w = c.send_request("fs/writeFile", {"path": uri(os.path.join(d, "w")), "dataBase64": b64(b"x")})
            c.send_request("fs/open", {"handleId": "h", "path": uri(data)})
            c.send_request("fs/readBlock", {"handleId": "h", "offset": 0, "len": MIB})
            # Leave as soon as the writeFile's answer shows (raw bytes: no parsing delay).
            seen = b""
            c.sock.settimeout(10.0)
            while (b'"id":%d' % w) not in seen:
                chunk = c.sock.recv(65536)
                if not chunk:
                    break
                seen = seen[-64:] + chunk
            # A reset, not an orderly close: the server's next write fails.
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            c.drop()
        time.sleep(0.3)
        alive = srv.p.poll() is None
        try:
            r = fresh(srv).request("fs/getMetadata", {"path": uri(data)}) if alive else {}
        except Exception:
            alive, r = False, {}
        t.ok(alive and "result" in r,
             "[%s] clients that leave while a deferred fs/readBlock is answered: "
             "the server stays up" % tag, srv.stderr_text()[-2000:])
        if not alive:
            return

        # 2. Jobs of clients that left before a worker was free are never
        # performed, and their data is not kept: every worker busy copying
        # (three names of the big file each, so that the copies outlast the
        # clients below even on a fast disk), clients send 8 MiB writeFiles
        # and close.
        busy = []
        tree = os.path.join(d, "tree")
        os.makedirs(tree)
        for k in range(3):
            os.link(big, os.path.join(tree, "f%d" % k))
        for k in range(4):
            c = fresh(srv)
            i = c.send_request("fs/copy", {"sourcePath": uri(tree),
                                           "destinationPath": uri(os.path.join(d, "busy%d" % k)),
                                           "recursive": True})
            busy.append((c, i))
        time.sleep(0.3)
        rss0 = rss_kb(pid)
        payload = b64(os.urandom(8 * MIB))
        for k in range(6):
            c = fresh(srv)
            i = c.send_request("fs/writeFile", {"path": uri(os.path.join(d, "orphan%d" % k)),
                                                "dataBase64": payload})
            # The request is read (the getMetadata behind it in the same queue shows it).
            c.send_request("fs/getMetadata", {"path": uri(data)})
            time.sleep(0.1)
            c.drop()
        time.sleep(0.5)
        grew = (rss_kb(pid) - rss0) // 1024
        t.ok(grew < 24, "[%s] their writeFile data is not kept (RSS grew %d MiB for 48 MiB sent)"
             % (tag, grew))
        done = [c.wait_id(i, timeout=120.0) for c, i in busy]
        t.ok(all(x is not None and "result" in x for x in done), "[%s] the copies complete" % tag)
        time.sleep(0.3)
        orphans = [k for k in range(6) if os.path.exists(os.path.join(d, "orphan%d" % k))]
        t.ok(not orphans, "[%s] and their writes are never performed" % tag, orphans)
        for c, _ in busy:
            c.drop()
        for k in range(4):
            shutil.rmtree(os.path.join(d, "busy%d" % k), ignore_errors=True)
        shutil.rmtree(tree, ignore_errors=True)

        # 3. A client that leaves mid-copy: its session can be resumed at once,
        # not when the copy ends.
        c = srv.connect(timeout=10.0)
        sid = c.call("initialize", {"clientName": "leaver"})["sessionId"]
        c.notify("initialized")
        cid = c.send_request("fs/copy", {"sourcePath": uri(big),
                                         "destinationPath": uri(os.path.join(d, "cp")),
                                         "recursive": False})
        time.sleep(0.2)
        c.drop()
        time.sleep(0.2)
        n = srv.connect(timeout=10.0)
        r, dt = timed(n.request, "initialize", {"clientName": "back", "resumeSessionId": sid})
        t.ok("result" in r and r["result"].get("sessionId") == sid and dt < BOUND,
             "[%s] a session whose client left mid-copy is resumed at once" % tag,
             "%r after %.2f s" % (r.get("error"), dt))
        n.drop()
    finally:
        srv.stop()
        err = srv.stderr_text()
        if "AddressSanitizer" in err or "LeakSanitizer" in err or "runtime error" in err:
            t.not_ok("[%s] sanitizers are quiet" % tag, err[-3000:])


base = tempfile.mkdtemp(prefix="cordon-fs-async-", dir="/var/tmp")
os.chmod(base, 0o755)
try:
    big = os.path.join(base, "big")
    make_big(big)
    for tag in LOOPS:
        run(tag, base, big)
    for kind in ("unix", "ws"):
        if kind == "ws" and not have_ws():
            t.skip("[ws] clients that leave", "built without WebSocket support")
            continue
        gone_clients(kind, base, big)
finally:
    shutil.rmtree(base, ignore_errors=True)
t.done()
