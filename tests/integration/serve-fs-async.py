#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Slow fs/... requests do not stall the server: while one client copies a
# file (directly or in a sandboxed helper), other clients, and the other
# requests of the same client, are answered; a connection's fs requests
# still complete in order (a pipelined writeFile then readFile sees the
# write; an fs/readBlock waits for its queued fs/open); a client that
# leaves mid-copy leaves no descriptor behind; the per-connection queue is
# bounded; SIGTERM during a copy cancels it and exits. Unix sockets; both
# loops. Clients that leave while their requests wait or run (unix and ws):
# the server stays up, requests not started are never performed, and the
# session can be resumed at once. TAP.
#
# Every copy here is held by the server's test hook (CORDON_TEST_HOLD=fs/copy)
# until the test releases it: "while a copy runs" is a fact, not a race
# against the disk, and the test waits for the server's events (a request
# queued, waiting for a worker, dropped...) instead of sleeping.

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, LOOPS, Hooks, Tap, b64, cordon_usable, err_code,  # noqa: E402
                       fd_count, profile, special, unb64, uri, vm_rss_kb)
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

MIB = 1024 * 1024
BIG_MB = 16  # copies are held, not slow: the size does not matter
INVALID_REQ = -32600


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def ctx(ws):
    return {"permissions": profile([special("project_roots", "write")]),
            "windowsSandboxLevel": "disabled", "workspaceRoots": [uri(ws)], "cwd": uri(ws)}


def make_big(path):
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for _ in range(BIG_MB):
            f.write(block)


_ids = [0]


def fresh(srv, handshake=True):
    """A connection whose request ids no other connection uses (events name them)."""
    c = srv.connect()
    _ids[0] += 1000
    c.next_id = _ids[0]
    if handshake:
        c.handshake()
    return c


def threads_of(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def size_of(path):
    return os.path.getsize(path) if os.path.exists(path) else -1


def run(tag, base, big):
    ws = os.path.join(base, "ws-" + tag)
    os.makedirs(ws)
    small = os.path.join(ws, "small")
    write(small, b"x" * 100)
    dst = os.path.join(base, "copy-" + tag)
    hooks = Hooks(hold=["fs/copy"])
    srv = NetServer("unix", loop=tag, extra_env=hooks.env)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        hooks.close()
        return
    try:
        a = fresh(srv)
        # A first offloaded request: the pool's eventfd and threads exist from here on.
        a.call("fs/writeFile", {"path": uri(os.path.join(ws, "warm")), "dataBase64": b64(b"w")})
        pid = srv.server_pid

        # 1. Another client while a copy runs (a tree: three names of the big file).
        tree = os.path.join(base, "tree-" + tag)
        os.makedirs(tree)
        for k in range(3):
            os.link(big, os.path.join(tree, "f%d" % k))
        cid = a.send_request("fs/copy", {"sourcePath": uri(tree), "destinationPath": uri(dst),
                                         "recursive": True})
        held = hooks.wait("fs-held", id=cid)
        b = fresh(srv, handshake=False)
        r = b.request("initialize", {"clientName": "b"})
        b.notify("initialized", {})
        t.ok("result" in r, "[%s] a second client's initialize is answered during a copy" % tag, r)
        r = b.request("fs/getMetadata", {"path": uri(small)})
        t.ok("result" in r, "[%s] its fs/getMetadata too" % tag, r)
        r = b.start("p1", ["true"])
        t.ok("result" in r, "[%s] its process/start too" % tag, r)
        r = b.request("fs/readFile", {"path": uri(small)})
        t.ok("result" in r and unb64(r["result"]["dataBase64"]) == b"x" * 100,
             "[%s] its fs/readFile too (another connection's queue, another worker)" % tag, r)
        t.ok(not a.has_id(cid) and not hooks.seen("fs-run", id=cid),
             "[%s] (the copy was still held meanwhile)" % tag)
        hooks.release(held)
        r = a.wait_id(cid)
        t.ok(r is not None and r.get("result") == {} and
             all(os.path.getsize(os.path.join(dst, "f%d" % k)) == BIG_MB * MIB for k in range(3)),
             "[%s] the copy completes once released" % tag, r)
        shutil.rmtree(dst)
        shutil.rmtree(tree)

        # 2. The same client: its process/* and an open stream's blocks are not held back.
        h = a.call("fs/open", {"handleId": "h1", "path": uri(small)})
        t.ok(h == {"handleId": "h1"}, "[%s] fs/open" % tag, h)
        cid = a.send_request("fs/copy", {"sourcePath": uri(big), "destinationPath": uri(dst),
                                         "recursive": False})
        held = hooks.wait("fs-held", id=cid)
        r = a.start("p2", ["true"])
        t.ok("result" in r, "[%s] the copying client's process/start" % tag, r)
        r = a.request("fs/readBlock", {"handleId": "h1", "offset": 0, "len": 10})
        t.ok("result" in r and unb64(r["result"]["chunk"]) == b"x" * 10,
             "[%s] its fs/readBlock on an open handle" % tag, r)
        # An fs request behind the copy waits for it (same connection: in order).
        mid = a.send_request("fs/getMetadata", {"path": uri(dst)})
        q = hooks.wait("fs-queued", id=mid)
        t.ok(q["ahead"] == "1" and not a.has_id(mid),
             "[%s] a getMetadata sent after the copy waits behind it" % tag, q)
        hooks.release(held)
        r = a.wait_id(mid)
        t.ok(r is not None and r["result"]["size"] == BIG_MB * MIB and a.has_id(cid),
             "[%s] and sees it complete" % tag, r)
        a.wait_id(cid)
        os.unlink(dst)

        # 3. A sandboxed copy (in a helper): the others are answered meanwhile.
        sbig = os.path.join(ws, "sbig")
        os.link(big, sbig)
        sb = ctx(ws)
        cid = a.send_request("fs/copy", {"sourcePath": uri(sbig),
                                         "destinationPath": uri(os.path.join(ws, "sbig.copy")),
                                         "recursive": False, "sandbox": sb})
        held = hooks.wait("fs-held", id=cid)
        r = b.request("fs/getMetadata", {"path": uri(small)})
        t.ok("result" in r, "[%s] another client is answered during a sandboxed copy" % tag, r)
        r = b.request("fs/getMetadata", {"path": uri(small), "sandbox": sb})
        t.ok("result" in r, "[%s] and its own sandboxed fs request" % tag, r)
        t.ok(not a.has_id(cid), "[%s] (the sandboxed copy was still held)" % tag)
        hooks.release(held)
        r = a.wait_id(cid)
        t.ok(r is not None and r.get("result") == {} and
             os.path.getsize(os.path.join(ws, "sbig.copy")) == BIG_MB * MIB,
             "[%s] the sandboxed copy completes" % tag, r)
        os.unlink(os.path.join(ws, "sbig.copy"))

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
        order = [m["id"] for m in [json.loads(x) for x in a.lines] if m.get("id") in ids]
        t.ok(order == ids, "[%s] their answers come in order" % tag)

        # 5. The queue is bounded: behind a held copy, past 64 waiting requests.
        cid = a.send_request("fs/copy", {"sourcePath": uri(big), "destinationPath": uri(dst),
                                         "recursive": False})
        held = hooks.wait("fs-held", id=cid)
        more = [a.send_request("fs/getMetadata", {"path": uri(small)}) for _ in range(70)]
        # The last one is refused at once; the accepted ones wait for the copy.
        last = a.wait_id(more[-1])
        early = [i for i in more[:-1] if a.has_id(i)] + [more[-1]]
        hooks.release(held)
        got = [a.wait_id(i) for i in more[:-1]] + [last]
        refused = [g for g in got if g is not None and err_code(g) == INVALID_REQ]
        t.ok(err_code(last) == INVALID_REQ and len(refused) >= 6 and
             all("too many fs requests" in g["error"]["message"] for g in refused) and
             len(early) == len(refused),
             "[%s] past 64 waiting fs requests, the next are refused (-32600) at once" % tag,
             (len(refused), len(early), refused[:1]))
        t.ok(all(g is not None and "result" in g for g in got if g not in refused),
             "[%s] and the others are answered after the copy" % tag,
             [g for g in got if g not in refused and (g is None or "result" not in g)][:3])
        a.wait_id(cid)
        os.unlink(dst)

        # 6. A client that leaves mid-copy: the server goes on, and nothing stays open.
        fds0 = fd_count(pid)
        c = fresh(srv)
        cid = c.send_request("fs/copy", {"sourcePath": uri(big), "destinationPath": uri(dst),
                                         "recursive": False})
        held = hooks.wait("fs-held", id=cid)
        c.drop()
        hooks.wait("fs-orphaned", id=cid)
        r = b.request("fs/getMetadata", {"path": uri(small)})
        t.ok("result" in r, "[%s] after a client left mid-copy, the others are answered" % tag, r)
        hooks.release(held)
        hooks.wait("fs-done", id=cid)
        hooks.wait("conn-freed", conn=held["conn"])
        t.ok(size_of(dst) == BIG_MB * MIB, "[%s] its copy is completed, not left half done" % tag,
             size_of(dst))
        t.ok(fd_count(pid) <= fds0, "[%s] its copy's and its connection's descriptors are closed"
             % tag, (fd_count(pid), fds0, os.listdir("/proc/%d/fd" % pid)))
        t.ok(threads_of(pid) <= 5, "[%s] at most 4 worker threads" % tag, threads_of(pid))
        r = b.request("fs/getMetadata", {"path": uri(small)})
        t.ok("result" in r, "[%s] the server still serves" % tag)
        os.unlink(dst)

        # 7. SIGTERM during copies: they are cancelled, the server exits at once.
        sdst = os.path.join(ws, "sdst")
        i1 = a.send_request("fs/copy", {"sourcePath": uri(big), "destinationPath": uri(dst),
                                        "recursive": False})
        i2 = b.send_request("fs/copy", {"sourcePath": uri(sbig), "destinationPath": uri(sdst),
                                        "recursive": False, "sandbox": sb})
        hooks.wait("fs-held", id=i1)
        hooks.wait("fs-held", id=i2)
        st = srv.stop()
        err = srv.stderr_text()
        t.ok(st == 0 and "did not stop" not in err and
             size_of(dst) < BIG_MB * MIB and size_of(sdst) < BIG_MB * MIB,
             "[%s] SIGTERM during copies: they are cancelled, the server exits 0 at once" % tag,
             (st, size_of(dst), size_of(sdst), err[-1000:]))
    finally:
        srv.stop()
        hooks.close()
        err = srv.stderr_text()
        if "AddressSanitizer" in err or "LeakSanitizer" in err:
            t.not_ok("[%s] sanitizers are quiet" % tag, err[-3000:])


def have_ws():
    probe = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return b"without the WebSocket transport" not in probe.stderr


def gone_clients(kind, base, big):
    """Clients that leave while their fs requests wait or run (review regressions)."""
    tag = kind
    d = os.path.join(base, "gone-" + kind)
    os.makedirs(d)
    data = os.path.join(d, "data")
    write(data, os.urandom(2 * MIB))
    hooks = Hooks(hold=["fs/copy"])
    srv = NetServer(kind, extra_env=hooks.env)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        hooks.close()
        return
    try:
        pid = srv.server_pid
        # 1. A deferred fs/readBlock (queued behind its fs/open, itself behind a
        # writeFile on a worker) is answered while the client is already gone:
        # the failed write closes the connection in the middle of the answer.
        mark = hooks.mark()
        n = 0
        for k in range(60):
            if srv.p.poll() is not None:
                break
            try:
                c = fresh(srv)
            except Exception:  # the server died: reported below
                break
            n += 1
            w = c.send_request("fs/writeFile", {"path": uri(os.path.join(d, "w")), "dataBase64": b64(b"x")})
            c.send_request("fs/open", {"handleId": "h", "path": uri(data)})
            c.send_request("fs/readBlock", {"handleId": "h", "offset": 0, "len": MIB})
            # Leave as soon as the writeFile's answer shows (raw bytes: no parsing delay).
            seen = b""
            c.sock.settimeout(60.0)
            while (b'"id":%d' % w) not in seen:
                chunk = c.sock.recv(65536)
                if not chunk:
                    break
                seen = seen[-64:] + chunk
            # A reset, not an orderly close: the server's next write fails.
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            c.drop()
        # Every one of them has ended (closed by the server, or its reset seen).
        alive = False
        r = {}
        try:
            hooks.wait("conn-freed", n=n, since=mark)
            r = fresh(srv).request("fs/getMetadata", {"path": uri(data)})
            alive = srv.p.poll() is None
        except Exception as e:  # noqa: BLE001 - the server died
            r = {"exception": repr(e)}
        t.ok(alive and "result" in r,
             "[%s] clients that leave while a deferred fs/readBlock is answered: "
             "the server stays up" % tag, (r, srv.stderr_text()[-2000:]))
        if not alive:
            return

        # 2. Jobs of clients that left before a worker was free are never
        # performed, and their data is not kept: every worker busy (held
        # copies), clients send 8 MiB writeFiles and leave.
        busy = []
        for k in range(4):
            c = fresh(srv)
            i = c.send_request("fs/copy", {"sourcePath": uri(big),
                                           "destinationPath": uri(os.path.join(d, "busy%d" % k)),
                                           "recursive": False})
            busy.append((c, i))
        helds = [hooks.wait("fs-held", id=i) for _, i in busy]
        rss0 = vm_rss_kb(pid)
        payload = b64(os.urandom(8 * MIB))
        waited = []
        orphan_ids = []
        for k in range(6):
            c = fresh(srv)
            i = c.send_request("fs/writeFile", {"path": uri(os.path.join(d, "orphan%d" % k)),
                                                "dataBase64": payload})
            # Read, decoded, and waiting for a worker: then the client leaves.
            pool = hooks.wait("fs-pool", id=i)
            waited.append(pool["worker"])
            orphan_ids.append(i)
            c.drop()
            hooks.wait("fs-dropped", id=i)
            hooks.wait("conn-freed", conn=pool["conn"])
        grew = (vm_rss_kb(pid) - rss0) // 1024
        t.ok(waited == ["wait"] * 6 and grew < 24,
             "[%s] their writeFile data is not kept (RSS grew %d MiB for 48 MiB sent)"
             % (tag, grew), waited)
        for h in helds:
            hooks.release(h)
        done = [c.wait_id(i) for c, i in busy]
        t.ok(all(x is not None and "result" in x for x in done), "[%s] the copies complete" % tag)
        orphans = [k for k in range(6) if os.path.exists(os.path.join(d, "orphan%d" % k))]
        ran = [i for i in orphan_ids if hooks.seen("fs-run", id=i)]
        t.ok(not orphans and not ran, "[%s] and their writes are never performed" % tag,
             (orphans, ran))
        for c, _ in busy:
            c.drop()
        for k in range(4):
            os.unlink(os.path.join(d, "busy%d" % k))

        # 3. A client that leaves mid-copy: its session can be resumed at once,
        # not when the copy ends.
        c = fresh(srv, handshake=False)
        sid = c.call("initialize", {"clientName": "leaver"})["sessionId"]
        c.notify("initialized")
        cid = c.send_request("fs/copy", {"sourcePath": uri(big),
                                         "destinationPath": uri(os.path.join(d, "cp")),
                                         "recursive": False})
        held = hooks.wait("fs-held", id=cid)
        c.drop()
        hooks.wait("session-detached", session=sid)
        n = fresh(srv, handshake=False)
        r = n.request("initialize", {"clientName": "back", "resumeSessionId": sid})
        t.ok("result" in r and r["result"].get("sessionId") == sid and
             not hooks.seen("fs-run", id=cid),
             "[%s] a session whose client left mid-copy is resumed while the copy is held" % tag,
             r.get("error"))
        hooks.release(held)
        hooks.wait("fs-done", id=cid)
        n.drop()
    finally:
        srv.stop()
        hooks.close()
        err = srv.stderr_text()
        if "AddressSanitizer" in err or "LeakSanitizer" in err or "runtime error" in err:
            t.not_ok("[%s] sanitizers are quiet" % tag, err[-3000:])


def hook_refusals():
    """The test hooks fail closed: misconfigured, the server does not start."""
    r = subprocess.run([CORDON, "serve"], input=b"", stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=dict(os.environ, CORDON_TEST_HOLD="fs/copy"))
    t.ok(r.returncode != 0 and b"CORDON_TEST_HOLD needs CORDON_TEST_EVENTS" in r.stderr,
         "CORDON_TEST_HOLD without CORDON_TEST_EVENTS: the server refuses to start", r.stderr)
    r = subprocess.run([CORDON, "serve"], input=b"", stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE,
                       env=dict(os.environ, CORDON_TEST_EVENTS="/nonexistent/cordon-events"))
    t.ok(r.returncode != 0 and b"CORDON_TEST_EVENTS: cannot connect" in r.stderr,
         "CORDON_TEST_EVENTS naming no socket: the server refuses to start", r.stderr)


hook_refusals()
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
