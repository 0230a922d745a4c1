#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# fs/watchMissing and fs/missingChanged, as the released Codex exec-server
# (0.169.0) has them (each expectation was read off that binary; run against
# it by serve-codex-parity.py): one watch per session, replaced by a larger
# watchId, a stale one answered {"watching":false}; it fires once, when a
# missing path's nearest existing ancestor gets its next component (created,
# renamed into place, a dangling symlink) or goes, or when present goes;
# {"watching":false} for a path already there, an ancestor that is a file,
# more than 64 paths; bad params get -32602 with the binary's words. Also
# cordon's own: the kernel watches are released once a watch fires, is
# replaced, or its session ends; a watch that fires while its session is
# detached is delivered on resume. Where a notification must NOT come, the
# test waits for one that must come after it from a second session of the
# same server (same inotify queue, read in order), then for the answer of a
# request on the first: anything the first event fired would be before it.
# No sleeps. TAP; stdio (both loops), unix socket; root and unprivileged.

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (LOOPS, Hooks, Hung, Server, Tap, cordon_usable, err_code,  # noqa: E402
                       err_msg, fuse_why, uri, wait_threads_in_fuse)
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

CODEX = os.environ.get("CD_TEST_CONTROL") == "codex"
T = os.path.realpath(tempfile.mkdtemp(prefix="cordon-watch-", dir=os.environ.get("TMPDIR")))


def fresh(name):
    d = os.path.join(T, name)
    os.mkdir(d)
    return d


def watch(c, wid, missing, present=None):
    p = {"watchId": wid, "missing": [uri(m) for m in missing]}
    if present is not None:
        p["present"] = uri(present)
    return c.request("fs/watchMissing", p)


def watching(r):
    return r.get("result", {}).get("watching")


def next_note(c, pump=True):
    """The next notification not looked at yet (read as it comes); None if none came yet and
    not pump."""
    i = getattr(c, "seen_notes", 0)
    while len(c.notes) <= i:
        if not pump:
            return None
        c.read_msg()
    c.seen_notes = i + 1
    return c.notes[i]


def changed(c, wid, tag, what):
    """The next notification is fs/missingChanged for wid."""
    try:
        m = next_note(c)
    except Exception as e:  # noqa: BLE001
        return t.not_ok("[%s] %s: fs/missingChanged %d" % (tag, what, wid), repr(e))
    return t.eq(m, {"method": "fs/missingChanged", "params": {"watchId": wid}},
                "[%s] %s: fs/missingChanged %d" % (tag, what, wid))


def quiet(c, tag, what):
    """No notification came before the answer to a request sent now."""
    r = c.request("environment/status", {})
    extra = next_note(c, pump=False)
    return t.ok(r.get("result") is not None and extra is None,
                "[%s] %s: no notification" % (tag, what), repr(extra))


def inotify_wds(pid):
    """Kernel watches held by process pid's inotify descriptors; None if it cannot be read."""
    n = 0
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) != "anon_inode:inotify":
                    continue
                with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                    n += sum(1 for line in f if line.startswith("inotify wd:"))
            except OSError:
                continue
    except OSError:
        return None
    return n


def basics(c, tag, pid):
    d = fresh("basic-" + tag)
    a = os.path.join(d, "a")
    r = watch(c, 1, [a])
    t.eq(r.get("result"), {"watching": True}, "[%s] a missing path is watched" % tag)
    if pid and not CODEX:
        t.ok((inotify_wds(pid) or 0) >= 1, "[%s] a kernel watch is held" % tag)
    open(a, "w").close()
    changed(c, 1, tag, "created after the watch")
    os.unlink(a)
    open(a, "w").close()
    quiet(c, tag, "once fired, the watch is over")
    if pid and not CODEX:
        t.eq(inotify_wds(pid), 0, "[%s] a fired watch holds no kernel watch" % tag)

    r = watch(c, 2, [a])
    t.eq(r.get("result"), {"watching": False}, "[%s] a path already there: not watched" % tag)
    r = watch(c, 2, [os.path.join(d, "b")])
    t.eq(r.get("result"), {"watching": False}, "[%s] a watchId used before is stale" % tag)
    r = watch(c, 3, [os.path.join(d, "b")])
    t.eq(r.get("result"), {"watching": True}, "[%s] a larger watchId is watched" % tag)
    r = watch(c, 3, [os.path.join(d, "c")])
    t.eq(r.get("result"), {"watching": False}, "[%s] the same watchId again is stale" % tag)
    open(os.path.join(d, "b"), "w").close()
    changed(c, 3, tag, "a stale request left the watch as it was")

    # Parents appearing one by one: each fires, the client watches again.
    deep = os.path.join(d, "x", "y", "z")
    wid = 10
    for step, make in (("x", lambda: os.mkdir(os.path.join(d, "x"))),
                       ("y", lambda: os.mkdir(os.path.join(d, "x", "y"))),
                       ("z", lambda: open(deep, "w").close())):
        t.eq(watching(watch(c, wid, [deep])), True, "[%s] %s watched before %s" % (tag, deep, step))
        make()
        changed(c, wid, tag, "deep path, %s appears" % step)
        wid += 1
    t.eq(watching(watch(c, wid, [deep])), False, "[%s] the deep path is there now" % tag)
    wid += 1

    # Renamed into place; a dangling symlink; a directory.
    for what, make in (("renamed into place", lambda p: (open(p + ".tmp", "w").close(),
                                                         os.rename(p + ".tmp", p))),
                       ("a dangling symlink", lambda p: os.symlink("/nonexistent", p)),
                       ("a directory", lambda p: os.mkdir(p))):
        p = os.path.join(d, "r%d" % wid)
        t.eq(watching(watch(c, wid, [p])), True, "[%s] watched for %s" % (tag, what))
        make(p)
        changed(c, wid, tag, what)
        wid += 1

    # A replaced watch is silent; the new one fires.
    t.eq(watching(watch(c, wid, [os.path.join(d, "old")])), True, "[%s] old watch" % tag)
    t.eq(watching(watch(c, wid + 1, [os.path.join(d, "new")])), True, "[%s] new watch" % tag)
    open(os.path.join(d, "old"), "w").close()
    open(os.path.join(d, "new"), "w").close()
    changed(c, wid + 1, tag, "the replacing watch fires, the replaced one does not")
    quiet(c, tag, "nothing from the replaced watch")
    wid += 2

    # present: removed (or renamed away) fires; a change inside it does not.
    p = os.path.join(d, "present")
    os.mkdir(p)
    t.eq(watching(watch(c, wid, [os.path.join(d, "never")], p)), True,
         "[%s] present and missing watched" % tag)
    os.rename(p, p + ".gone")
    changed(c, wid, tag, "present renamed away")
    wid += 1
    t.eq(watching(watch(c, wid, [os.path.join(d, "never")], os.path.join(d, "nope"))), False,
         "[%s] present not there: not watched" % tag)
    wid += 1

    # The nearest existing ancestor removed fires too.
    os.mkdir(os.path.join(d, "anc"))
    t.eq(watching(watch(c, wid, [os.path.join(d, "anc", "a")])), True, "[%s] in anc" % tag)
    os.rmdir(os.path.join(d, "anc"))
    changed(c, wid, tag, "the watched ancestor removed")
    wid += 1

    # Not watchable: an ancestor that is a file, or a symlink; empty; 65 paths.
    open(os.path.join(d, "file"), "w").close()
    os.symlink(d, os.path.join(d, "link"))
    for what, paths in (("an ancestor that is a file", [os.path.join(d, "file", "a")]),
                        ("an ancestor that is a symlink", [os.path.join(d, "link", "q")]),
                        ("no path", []),
                        ("65 paths", [os.path.join(d, "m%d" % i) for i in range(65)])):
        t.eq(watching(watch(c, wid, paths)), False, "[%s] %s: not watched" % (tag, what))
        wid += 1
    t.eq(watching(watch(c, wid, [os.path.join(d, "m%d" % i) for i in range(64)])), True,
         "[%s] 64 paths: watched" % tag)
    open(os.path.join(d, "m63"), "w").close()
    changed(c, wid, tag, "the 64th path appears")
    wid += 1
    r = c.request("fs/watchMissing", {"watchId": wid, "missing": ["file://host" + d + "/h"]})
    t.eq(r.get("result"), {"watching": False}, "[%s] a URI with a host: not watched" % tag)
    wid += 1
    if pid and not CODEX:
        t.eq(inotify_wds(pid), 0, "[%s] no kernel watch left once every watch ended" % tag)
    return wid


BAD = [
    (None, "invalid type: null, expected struct FsWatchMissingParams"),
    ({}, "missing field `watchId`"),
    ({"watchId": "1", "missing": []}, 'invalid type: string "1", expected u64'),
    ({"watchId": True, "missing": []}, "invalid type: boolean `true`, expected u64"),
    ({"watchId": None, "missing": []}, "invalid type: null, expected u64"),
    ({"watchId": -1, "missing": []}, "invalid number"),
    ({"watchId": 1.5, "missing": []}, "invalid number"),
    ({"watchId": 18446744073709551616, "missing": []}, "invalid number"),
    ({"watchId": 1}, "missing field `missing`"),
    ({"watchId": 1, "missing": None}, "invalid type: null, expected a sequence"),
    ({"watchId": 1, "missing": "file:///a"}, 'invalid type: string "file:///a", expected a '
     "sequence"),
    ({"watchId": 1, "missing": [5]}, "invalid type: "),
    ({"watchId": 1, "missing": [], "present": 5}, "invalid type: "),
    ({"watchId": 1, "missing": ["relative"]}, None),
    ({"watchId": 1, "missing": ["http://x/a"]}, None),
    ({"watchId": 1, "missing": ["file:///a%00b"]}, None),
    ({"watchId": 1, "missing": [], "present": "rel"}, None),
]


def bad_params(c, tag):
    for params, want in BAD:
        r = c.request("fs/watchMissing", params)
        ok = err_code(r) == -32602 and (want is None or err_msg(r).startswith(want))
        t.ok(ok, "[%s] %r: -32602 %s" % (tag, params, want or ""), r)
    # None of them took a watchId: 1 is still new.
    t.eq(watching(watch(c, 1, [os.path.join(T, "bad-never")])), True,
         "[%s] refused requests leave the session's ids alone" % tag)


def pipelined(c, tag, wid):
    """Requests sent without waiting: each is answered, only the last one's watch stays."""
    d = fresh("pipe-" + tag.replace(", ", "-"))
    ids = [c.send_request("fs/watchMissing", {"watchId": wid + i,
                                              "missing": [uri(os.path.join(d, "p%d" % i))]})
           for i in range(6)]
    answers = [c.wait_id(i) for i in ids]
    t.ok(all(a and a.get("result", {}).get("watching") in (True, False) for a in answers),
         "[%s] six pipelined requests: each answered" % tag, answers)
    t.eq(answers[-1].get("result"), {"watching": True}, "[%s] the last one watches" % tag)
    for i in range(6):
        open(os.path.join(d, "p%d" % i), "w").close()
    changed(c, wid + 5, tag, "only the last pipelined watch fires")
    quiet(c, tag, "the others do not")


def hung(loop):
    """A walk that a hung mount holds keeps a worker, not the loop: the connection's other
    requests and another session's watches are answered meanwhile."""
    tag = "hung mount, " + loop
    why = fuse_why()
    if why:
        t.skip("[%s] a watch under a hung mount" % tag, why)
        return
    h = Hung()
    srv = NetServer("unix", loop=loop)
    try:
        if not srv.ready:
            t.not_ok("[%s] server up" % tag, srv.stderr_text())
            return
        a = srv.connect()
        a.handshake()
        b = srv.connect()
        b.handshake()
        rid = a.send_request("fs/watchMissing", {"watchId": 1,
                                                 "missing": [uri(os.path.join(h.dir, "x"))]})
        t.ok(wait_threads_in_fuse(srv.server_pid, 1), "[%s] the walk waits on the mount" % tag)
        r = a.request("environment/status", {})
        t.ok("result" in r, "[%s] the same connection is answered meanwhile" % tag, r)
        d = fresh("hung-" + loop)
        t.eq(watching(watch(b, 1, [os.path.join(d, "a")])), True,
             "[%s] another session's watch is walked meanwhile" % tag)
        open(os.path.join(d, "a"), "w").close()
        changed(b, 1, tag, "and fires")
        h.release()
        r = a.wait_id(rid)
        t.eq(r and r.get("result"), {"watching": False},
             "[%s] once the mount fails, the walk answers: not watched" % tag)
    finally:
        h.release()
        srv.stop()
        h.close()


def during_walk(loop):
    """A change made after the walk looked but before the watch is armed (the walk held
    there by the test hook) is not missed: the events the loop read meanwhile are applied."""
    tag = "during the walk, " + loop
    hooks = Hooks(hold=["fs/watchMissing"])
    srv = NetServer("unix", loop=loop, extra_env=hooks.env)
    try:
        if not srv.ready:
            t.not_ok("[%s] server up" % tag, srv.stderr_text())
            return
        d = fresh("walk-" + loop)
        a = srv.connect()
        a.handshake()
        b = srv.connect()
        b.handshake()
        rid = a.send_request("fs/watchMissing", {"watchId": 1,
                                                 "missing": [uri(os.path.join(d, "a"))]})
        held = hooks.wait("fs-held", method="fs/watchMissing")
        # B's walk is held too: let it go at once. The mark comes before B's request: its
        # event may be read before the request call returns.
        mark = hooks.mark()
        bid = b.send_request("fs/watchMissing", {"watchId": 1,
                                                 "missing": [uri(os.path.join(d, "b"))]})
        hb = hooks.wait("fs-held", since=mark, method="fs/watchMissing")
        hooks.release(hb)
        t.eq((b.wait_id(bid) or {}).get("result"), {"watching": True}, "[%s] B watches" % tag)
        open(os.path.join(d, "a"), "w").close()
        open(os.path.join(d, "b"), "w").close()
        changed(b, 1, tag, "B: b created after a: the loop has read a's event")
        hooks.release(held)
        t.eq((a.wait_id(rid) or {}).get("result"), {"watching": True},
             "[%s] A's walk ends: watching" % tag)
        changed(a, 1, tag, "A: a, created while its walk was held, fires")
        a.drop()
        b.drop()
    finally:
        srv.stop()
        hooks.close()


def server_limit(kind):
    """4096 paths watched over the whole server: past that, {"watching":false} (logged once);
    a watch that ends makes room again."""
    tag = kind + ", server limit"
    srv = NetServer(kind)
    conns = []
    try:
        if not srv.ready:
            t.not_ok("[%s] server up" % tag, srv.stderr_text())
            return
        d = fresh("limit-" + kind)
        paths = [os.path.join(d, "p%d" % i) for i in range(64)]
        answers = []
        for i in range(65):
            c = srv.connect()
            c.handshake()
            conns.append(c)
            answers.append(watching(watch(c, 1, paths)))
        t.eq(answers[:64], [True] * 64, "[%s] 64 sessions watch 64 paths each" % tag)
        t.eq(answers[64], False, "[%s] the 65th is not watched" % tag)
        t.ok("the server watches 4096 paths, its limit" in srv.stderr_text(),
             "[%s] the limit is logged" % tag, srv.stderr_text()[-2000:])
        t.eq(watching(watch(conns[0], 2, [os.path.join(d, "q")])), True,
             "[%s] one replaced by a smaller watch makes room" % tag)
        t.eq(watching(watch(conns[64], 2, [os.path.join(d, "r")])), True,
             "[%s] for another session's" % tag)
    finally:
        for c in conns:
            c.drop()
        srv.stop()


def stdio(loop):
    tag = "stdio, " + loop
    s = Server(loop)
    try:
        s.handshake()
        caps = s.call("environment/info", {}).get("capabilities", {})
        t.eq(caps.get("fsWatchMissing"), True, "[%s] fsWatchMissing is true" % tag)
        pid = None if CODEX else s.server_pid
        wid = basics(s, tag, pid)
        pipelined(s, tag, wid)
    finally:
        s.stop()
    s = Server(loop)
    try:
        s.handshake()
        bad_params(s, tag)
    finally:
        s.stop()


def sessions(kind):
    """Two sessions: their watches are their own; a detached one gets what fired on resume;
    the end of a session releases its kernel watches."""
    tag = kind
    hooks = Hooks()
    srv = NetServer(kind, args=["--session-ttl", "60s"], extra_env=hooks.env)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        return
    try:
        d = fresh("sessions-" + kind)
        a = srv.connect()
        sid = a.handshake()["sessionId"]
        b = srv.connect()
        b.handshake()
        t.eq(watching(watch(a, 1, [os.path.join(d, "a")])), True, "[%s] A watches a" % tag)
        t.eq(watching(watch(b, 1, [os.path.join(d, "b")])), True,
             "[%s] B watches b with the same watchId: sessions are apart" % tag)
        open(os.path.join(d, "x"), "w").close()
        open(os.path.join(d, "b"), "w").close()
        changed(b, 1, tag, "B: b created")
        quiet(a, tag, "A: neither x nor b is its path")

        # A detaches; its path appears; B's barrier shows the server saw it; A resumes.
        t.eq(watching(watch(b, 2, [os.path.join(d, "c")])), True, "[%s] B watches c" % tag)
        mark = hooks.mark()
        a.drop()
        hooks.wait("session-detached", since=mark, session=sid)
        open(os.path.join(d, "a"), "w").close()
        open(os.path.join(d, "c"), "w").close()
        changed(b, 2, tag, "B: c created (after a)")
        a2 = srv.connect()
        r = a2.request("initialize", {"clientName": "back", "resumeSessionId": sid})
        a2.notify("initialized", {})
        t.ok("result" in r, "[%s] A resumes" % tag, r)
        changed(a2, 1, tag, "A: what fired while detached comes on resume")
        quiet(a2, tag, "A: once only")

        a2.drop()
        b.drop()
    finally:
        srv.stop()
        hooks.close()


def session_end(kind):
    """The end of a session (its TTL ran out while detached) releases its kernel watches."""
    tag = kind + ", session end"
    hooks = Hooks()
    srv = NetServer(kind, args=["--session-ttl", "50ms"], extra_env=hooks.env)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        return
    try:
        d = fresh("end-" + kind)
        pid = srv.server_pid
        a = srv.connect()
        sid = a.handshake()["sessionId"]
        t.eq(watching(watch(a, 1, [os.path.join(d, "d%d" % i, "z") for i in range(8)])),
             True, "[%s] 8 paths watched" % tag)
        t.ok((inotify_wds(pid) or 0) >= 1, "[%s] kernel watches held" % tag)
        mark = hooks.mark()
        a.drop()
        hooks.wait("session-expired", since=mark, session=sid)
        # The event comes right before the session is freed, in the same loop callback: an
        # answer to a later request comes after it.
        b = srv.connect()
        b.handshake()
        t.eq(inotify_wds(pid), 0, "[%s] the session's end releases every kernel watch" % tag)
        b.drop()
    finally:
        srv.stop()
        hooks.close()


stdio_loops = LOOPS
for loop in stdio_loops:
    t.guard("stdio " + loop, stdio, loop)
if not CODEX:
    t.guard("unix sessions", sessions, "unix")
    t.guard("unix session end", session_end, "unix")
    t.guard("unix server limit", server_limit, "unix")
    for loop in LOOPS:
        t.guard("hung mount " + loop, hung, loop)
        t.guard("during the walk " + loop, during_walk, loop)
shutil.rmtree(T, ignore_errors=True)
t.done()
