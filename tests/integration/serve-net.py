#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve --listen ws://... | unix:...` over real sockets: the HTTP side
# of the WebSocket listener (readyz, Origin 403, bearer token 401), framing
# (text, binary, fragmented, pings, close), sessions shared by many
# connections (detach, resume, -32010, TTL, eviction, replay with a
# byte-exact checksum, writeId de-duplication), isolation between 100
# concurrent clients running sandboxed processes, limits (connections,
# sessions, a client that stops reading), unix socket permissions and peer
# credentials, the pid file, journal logging and SIGTERM. The test waits
# for the server's events (CORDON_TEST_EVENTS: a session detached, a long
# poll waiting, a connection freed) rather than for time. TAP.

import grp
import hashlib
import os
import random
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, LOOPS, PROMPT, WAIT, Hooks, Tap, b64,  # noqa: E402
                       cordon_usable, err_code, err_msg, fd_count, pid_alive, pids_by_cmdline,
                       special, unb64, uri, vm_rss_kb, wait_gone, workspace_write)
from netclient import (OP_BINARY, OP_CONT, OP_PING, OP_TEXT, HandshakeError,  # noqa: E402
                       NetServer, http)

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
probe = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if b"without the WebSocket transport" in probe.stderr:
    t.skip_all("this cordon was built without the WebSocket transport")

ROOT = os.geteuid() == 0
INVALID_REQ = -32600

# The transport runs in cordon-ws, which cordon executes from its own
# directory (or the installed one): a cordon copied alone says so.
_lone = tempfile.mkdtemp(prefix="cordon-lone-")
try:
    shutil.copy(os.path.realpath(CORDON), os.path.join(_lone, "cordon"))
    _p = subprocess.run([os.path.join(_lone, "cordon"), "serve", "--listen", "ws://127.0.0.1:0",
                         "--max-sessions", "0"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, timeout=WAIT)
    _err = _p.stderr.decode(errors="replace")
    if "max-sessions" in _err:  # an installed cordon-ws ran, and refused the 0
        t.skip("without cordon-ws beside it, ws:// fails naming the program",
               "an installed cordon-ws ran instead")
    else:
        t.ok(_p.returncode == 1 and "cordon-ws, which serves the WebSocket transport" in _err,
             "without cordon-ws beside it (nor installed), ws:// fails naming the program",
             (_p.returncode, _err))
finally:
    shutil.rmtree(_lone, ignore_errors=True)
_serial = [0]


def sleeper(n=1):
    """argv of a `sleep` no other process on the host runs, and its cmdline match."""
    _serial[0] += 1
    d = "%d.%d%03d" % (700 + n, os.getpid() % 100000, _serial[0])
    return ["sleep", d], ("sleep\0%s\0" % d).encode()


def find(match, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pids_by_cmdline(lambda c: c == match)
        if found:
            return found
        time.sleep(0.02)
    return []


def gen_output(seed, n):
    """The deterministic bytes the replay test's process writes."""
    rnd = random.Random(seed)
    return bytes(rnd.getrandbits(8) for _ in range(n))


def tokenfile(d, token):
    p = os.path.join(d, "token")
    with open(p, "w") as f:
        f.write(token + "\n")
    os.chmod(p, 0o600)
    return p


def started(c, pid, argv, **kw):
    r = c.start(pid, argv, **kw)
    if "error" in r:
        raise AssertionError("process/start %s: %r" % (pid, r))
    return r


# ---------------------------------------------------------------- ws: HTTP side

def http_side(loop):
    tag = "ws/" + loop
    s = NetServer("ws", loop=loop)
    try:
        t.ok(s.ready and s.port > 0, "[%s] the bound URL is the first line of stdout (%s)"
             % (tag, s.url))
        st, _, body, sock = http(s.host, s.port, "/readyz")
        sock.close()
        t.eq(st, 200, "[%s] GET /readyz is 200" % tag)
        st, h, _, sock = http(s.host, s.port, "/readyz", method="POST")
        sock.close()
        t.ok(st == 405 and h.get("allow") == "GET,HEAD", "[%s] POST /readyz is 405" % tag)
        st, _, _, sock = http(s.host, s.port, "/nope")
        sock.close()
        t.eq(st, 404, "[%s] another path is 404" % tag)
        st, _, _, sock = http(s.host, s.port, "/readyz", headers={"Origin": "http://evil"})
        sock.close()
        t.eq(st, 403, "[%s] a request with Origin is 403" % tag)
        try:
            s.connect(headers={"Origin": "https://example.com"})
            t.not_ok("[%s] an upgrade with Origin is refused" % tag)
        except HandshakeError as e:
            t.eq(e.status, 403, "[%s] an upgrade with Origin is 403" % tag)
        st, _, body, sock = http(s.host, s.port, "/")
        sock.close()
        t.ok(st == 400 and b"upgrade" in body, "[%s] GET / without an upgrade is 400" % tag,
             body)
        try:
            s.connect(headers={"Sec-WebSocket-Version": "8"})
            t.not_ok("[%s] version 8 is refused" % tag)
        except HandshakeError as e:
            t.eq(e.status, 400, "[%s] Sec-WebSocket-Version 8 is 400" % tag)
        # A head that never ends must not hold the server: other clients go on.
        slow = socket.create_connection((s.host, s.port))
        slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        big = socket.create_connection((s.host, s.port))
        big.sendall(b"GET / HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 20000 + b"\r\n\r\n")
        data = big.recv(4096)
        big.close()
        t.ok(data.startswith(b"HTTP/1.1 431"), "[%s] a head over 16 KiB is 431" % tag, data)
        c = s.connect()
        r = c.handshake()
        t.ok("sessionId" in r, "[%s] initialize over ws while a slow head waits" % tag)
        slow.close()

        # Framing.
        c.send_raw("not-json")
        m = c.read_msg()
        t.ok(m.get("id") == -1 and err_code(m) == INVALID_REQ and
             err_msg(m).startswith("failed to parse websocket JSON-RPC message"),
             "[%s] a frame that is not JSON gives id -1, -32600" % tag, m)
        r = c.request("environment/status")
        t.eq(r.get("result"), {"status": "ready"}, "[%s] and the connection stays" % tag)
        c.send_frame(OP_BINARY, b'{"id":"b1","method":"environment/status"}')
        t.eq(c.read_response().get("result"), {"status": "ready"},
             "[%s] a binary frame is a message too" % tag)
        msg = b'{"id":"f1","method":"environment/status"}'
        c.send_frame(OP_TEXT, msg[:10], fin=False)
        c.send_frame(OP_PING, b"hi")
        c.send_frame(OP_CONT, msg[10:20], fin=False)
        c.send_frame(OP_CONT, msg[20:], fin=True)
        r = c.read_response()
        t.ok(r.get("id") == "f1" and r.get("result") == {"status": "ready"},
             "[%s] a fragmented message with a ping in between" % tag, r)
        deadline = time.monotonic() + WAIT
        while c.pongs == 0 and time.monotonic() < deadline:
            c._pump(deadline)
        t.ok(c.pongs >= 1, "[%s] the client's ping is answered with a pong" % tag)
        resp, res = c.run("echo", ["/bin/echo", "over ws"])
        t.ok(res and res.stdout == b"over ws\n" and res.exit_code == 0,
             "[%s] a process runs and its output arrives as notifications" % tag)
        c.close()
        t.ok(c.expect_eof() and c.close_code is not None,
             "[%s] a close frame is answered with a close frame" % tag)
    finally:
        t.eq(s.stop(), 0, "[%s] SIGTERM: exit 0" % tag)


def hostile_ws():
    """Review findings, kept as regressions."""
    hooks = Hooks()
    s = NetServer("ws", args=["--max-connections", "2"], extra_env=hooks.env)
    try:
        # The first frame in the same packet as the head, with NUL bytes in it.
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        msg = b'{"id":1,"method":"initialize","params":{"clientName":"x"}}'
        mask = b"\0\x01\0\x02"
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(msg))
        sk = socket.create_connection((s.host, s.port))
        sk.sendall(("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade"
                    "\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n" % key)
                   .encode() + bytes([0x81, 0x80 | len(msg)]) + mask + masked)
        data = b""
        sk.settimeout(WAIT)
        while b"sessionId" not in data:
            chunk = sk.recv(65536)
            if not chunk:
                break
            data += chunk
        sk.close()
        t.ok(data.startswith(b"HTTP/1.1 101") and b"sessionId" in data,
             "a first frame holding NUL bytes may come with the upgrade request", data[:200])
        # Idle sockets that never send a head do not take the connection slots.
        idle = [socket.create_connection((s.host, s.port)) for _ in range(10)]
        c = s.connect()
        t.ok("sessionId" in c.handshake(),
             "10 idle unauthenticated sockets do not take --max-connections 2 slots")
        for sk in idle:
            sk.close()
        # A client that sends pings and reads nothing: the pongs do not pile up.
        flood = s.connect()
        ping = bytes([0x89, 0x80]) + b"\0\0\0\0"
        flood.sock.setblocking(True)
        flood.sock.settimeout(0.2)
        sent = 0
        deadline = time.monotonic() + 2
        try:
            while time.monotonic() < deadline:
                flood.sock.sendall(ping * 4096)
                sent += 4096
        except (socket.timeout, OSError):
            pass
        rss = vm_rss_kb(s.server_pid)
        t.ok(rss < 40 * 1024, "a ping flood without reading: RSS %d kB after %d pings"
             % (rss, sent))
        t0 = time.monotonic()
        r = c.request("environment/status")
        dt = time.monotonic() - t0
        t.ok(r.get("result") == {"status": "ready"} and dt < PROMPT,
             "and the other client is answered at once (%.2f s)" % dt)
        flood.drop()
        # A close frame with a long poll in flight: the connection ends now, not at waitMs.
        c.close()
        c.expect_eof()
        c2 = s.connect()
        c2.handshake()
        argv, _ = sleeper()
        started(c2, "sl", argv)
        # The poll's waitMs is past WAIT: an end that waits for it fails.
        c2.send({"id": 7007, "method": "process/read",
                 "params": {"processId": "sl", "afterSeq": 0, "waitMs": int(WAIT * 2000)}})
        hooks.wait("read-wait", id=7007)
        t0 = time.monotonic()
        c2.close()
        t.ok(c2.expect_eof() and c2.out_eof,
             "a close frame with a long poll in flight ends the connection at once (%.2f s)"
             % (time.monotonic() - t0))
    finally:
        s.stop()
        hooks.close()
    d = tempfile.mkdtemp(prefix="cordon-pidf-")
    fifo = os.path.join(d, "pid")
    os.mkfifo(fifo)
    try:
        r = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:0", "--pid-file", fifo],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=WAIT)
        t.ok(r.returncode != 0 and b"not a regular file" in r.stderr,
             "--pid-file on a FIFO is refused, without hanging", r.stderr)
    except subprocess.TimeoutExpired:
        t.not_ok("--pid-file on a FIFO is refused, without hanging")
    pidfile = os.path.join(d, "serve.pid")
    a = NetServer("ws", args=["--pid-file", pidfile])
    try:
        r = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:0", "--pid-file",
                            pidfile], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=WAIT)
        t.ok(r.returncode != 0 and b"another running server holds it" in r.stderr,
             "a second server cannot take a pid file in use", r.stderr)
        with open(pidfile) as f:
            t.eq(int(f.read()), a.pid, "and the first server's pid file is intact")
    finally:
        a.stop()
    shutil.rmtree(d, ignore_errors=True)


def pings():
    """Pings keep coming, and never more often than --ping-interval (a timer fires late
    on a busy host, never early)."""
    s = NetServer("ws", args=["--ping-interval", "150ms"])
    try:
        t0 = time.monotonic()
        c = s.connect()
        c.handshake()
        deadline = time.monotonic() + WAIT
        while c.pings < 4 and time.monotonic() < deadline:
            c._pump(deadline)
        dt = time.monotonic() - t0
        t.ok(c.pings >= 4 and dt >= 4 * 0.150,
             "the server pings every --ping-interval (4 pings %.2f s after connecting)" % dt)
    finally:
        s.stop()


def auth():
    d = tempfile.mkdtemp(prefix="cordon-auth-")
    token = "s3cr3t-" + os.urandom(12).hex()
    s = NetServer("ws", args=["--auth-token-file", tokenfile(d, token)])
    try:
        for hdrs, desc in (({}, "no token"), ({"Authorization": "Bearer wrong-token-123456"},
                                               "a wrong token"),
                           ({"Authorization": "Bearer " + token[:-1]}, "a token cut short"),
                           ({"Authorization": "Basic " + token}, "another scheme")):
            try:
                s.connect(headers=hdrs)
                t.not_ok("auth: %s is refused" % desc)
            except HandshakeError as e:
                t.eq(e.status, 401, "auth: %s is 401" % desc)
        c = s.connect(token=token)
        t.ok("sessionId" in c.handshake(), "auth: the right bearer token gets in")
        st, _, _, sock = http(s.host, s.port, "/readyz")
        sock.close()
        t.eq(st, 200, "auth: /readyz needs no token")
    finally:
        s.stop()
    err = s.stderr_text()
    t.ok(token not in err, "auth: the token never appears in the log")
    os.chmod(os.path.join(d, "token"), 0o644)
    with open(os.path.join(d, "short"), "w") as f:
        f.write("abc\n")
    for args, want, desc in (
            (["--listen", "ws://0.0.0.0:0"], "refusing to listen on a non-loopback",
             "a non-loopback address without a token is refused"),
            (["--listen", "ws://localhost:0"], "literal IPv4",
             "a host name is refused (literal addresses only)"),
            (["--listen", "ws://127.0.0.1:0", "--auth-token-file", os.path.join(d, "short")],
             "at least 16", "a short token is refused"),
            (["--listen", "unix:/tmp/x.sock", "--auth-token-file", os.path.join(d, "token")],
             "is for --listen ws://", "--auth-token-file on a unix socket is refused"),
            (["--listen", "http://127.0.0.1:1"], "unsupported --listen URL",
             "another scheme is refused"),
            (["--listen", "unix:/tmp/x.sock", "--insecure-no-auth"],
             "--insecure-no-auth is for --listen ws://", "--insecure-no-auth on unix is refused"),
            (["--listen", "ws://127.0.0.1:0", "--unix-group", "0"],
             "--unix-group is for --listen unix:PATH", "--unix-group on ws is refused"),
            (["--listen", "unix:/tmp/x.sock", "--unix-group", "no-such-group-cordon"],
             "--unix-group: no group 'no-such-group-cordon'", "an unknown group is refused"),
            (["--listen", "ws://127.0.0.1:0", "--auth-token-file", os.path.join(d, "token"),
              "--insecure-no-auth"], "contradict each other",
             "a token and --insecure-no-auth together are refused"),
            (["--listen", "ws://127.0.0.1:0", "--max-connections", "0"],
             "--max-connections: '0' is not a number from 1 to 65536",
             "--max-connections 0 is refused"),
            (["--listen", "ws://127.0.0.1:0", "--max-sessions", "70000"],
             "--max-sessions: '70000' is not a number from 1 to 65536",
             "--max-sessions over 65536 is refused"),
            (["--listen", "ws://127.0.0.1:0", "--max-queued-bytes", "1K"],
             "--max-queued-bytes: '1K' is not a size from 64K to 16G",
             "--max-queued-bytes below 64K is refused"),
            (["--listen", "ws://127.0.0.1:0", "--session-ttl", "0"],
             "--session-ttl: '0' is not a duration", "--session-ttl 0 is refused"),
            (["--listen", "ws://127.0.0.1:0", "--stall-timeout", "5m"],
             "--stall-timeout: '5m' is not a duration", "an unknown time unit is refused")):
        r = subprocess.run([CORDON, "serve"] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=WAIT)
        t.ok(r.returncode != 0 and want in r.stderr.decode(), desc,
             r.stderr.decode())
    s = NetServer("ws://0.0.0.0:0", args=["--insecure-no-auth"])
    try:
        t.ok(s.ready and "--insecure-no-auth" in s.stderr_text(),
             "--insecure-no-auth listens on 0.0.0.0 and warns")
    finally:
        s.stop()
    s = NetServer("ws://0.0.0.0:0", args=["--auth-token-file", os.path.join(d, "token")])
    try:
        t.ok(s.ready and "readable by others" in s.stderr_text(),
             "a token on 0.0.0.0 is enough; a token file others can read is warned about")
    finally:
        s.stop()
    shutil.rmtree(d)


# ---------------------------------------------------------------- sessions

def sessions(kind, loop):
    # A TTL no busy host reaches between a drop and the resume; the expiry is
    # tested with a short one (session_ttl).
    tag = "%s/%s" % (kind, loop)
    hooks = Hooks()
    s = NetServer(kind, loop=loop, args=["--session-ttl", "%ds" % WAIT], extra_env=hooks.env)
    try:
        a = s.connect()
        sid = a.handshake()["sessionId"]
        argv, match = sleeper()
        started(a, "sl", argv)
        pids = find(match)
        started(a, "cat", ["cat"], pipeStdin=True)
        r = a.request("process/write", {"processId": "cat", "chunk": b64("once\n"),
                                        "writeId": "w-1"})
        t.eq(r.get("result"), {"status": "accepted"}, "[%s] write w-1 accepted" % tag)
        b = s.connect()
        r = b.request("initialize", {"clientName": "b", "resumeSessionId": sid})
        t.ok(err_code(r) == -32010 and "already attached" in err_msg(r),
             "[%s] resuming a session still attached is -32010" % tag, r)
        r = b.request("initialize", {"clientName": "b", "resumeSessionId": "nope"})
        t.ok(err_code(r) == INVALID_REQ and err_msg(r) == "unknown session id nope",
             "[%s] an unknown session id is -32600" % tag, r)
        # A failed initialize may be retried; b gets a session of its own.
        sid_b = b.handshake()["sessionId"]
        t.ok(sid_b != sid, "[%s] b has a session of its own" % tag)
        r = b.request("process/read", {"processId": "sl"})
        t.ok(err_code(r) == INVALID_REQ and "unknown process id" in err_msg(r),
             "[%s] b cannot read a's process" % tag, r)
        r = b.request("process/write", {"processId": "cat", "chunk": b64("x"),
                                        "writeId": "zz"})
        t.eq(r.get("result"), {"status": "unknownProcess"}, "[%s] nor write to it" % tag)
        r = b.request("process/terminate", {"processId": "sl"})
        t.eq(r.get("result"), {"running": False}, "[%s] nor terminate it" % tag)
        t.ok(pids and all(pid_alive(p) for p in pids), "[%s] a's process still runs" % tag)

        a.drop()
        hooks.wait("session-detached", session=sid)
        t.ok(all(pid_alive(p) for p in pids),
             "[%s] a dropped connection leaves its session's processes running" % tag)
        a2 = s.connect()
        r = a2.call("initialize", {"clientName": "a2", "resumeSessionId": sid})
        a2.notify("initialized", {})
        t.eq(r.get("sessionId"), sid, "[%s] resume re-attaches the same session id" % tag)
        r = a2.request("process/write", {"processId": "cat", "chunk": b64("once\n"),
                                         "writeId": "w-1"})
        t.eq(r.get("result"), {"status": "accepted"},
             "[%s] the retried write w-1 is accepted after resume" % tag)
        a2.request("process/write", {"processId": "cat", "chunk": b64("twice\n"),
                                     "writeId": "w-2"})
        got = b""
        deadline = time.monotonic() + WAIT
        after = 0
        while b"twice" not in got and time.monotonic() < deadline:
            r = a2.call("process/read", {"processId": "cat", "afterSeq": after, "waitMs": 500})
            for ch in r["chunks"]:
                got += unb64(ch["chunk"])
            after = r["nextSeq"] - 1
        t.eq(got, b"once\ntwice\n", "[%s] ... and written once (retries are de-duplicated)"
             % tag)

        r = b.request("environment/status")
        t.eq(r.get("result"), {"status": "ready"}, "[%s] b was never disturbed" % tag)
    finally:
        t.eq(s.stop(), 0, "[%s] SIGTERM: exit 0" % tag)
        hooks.close()


def session_ttl(kind, loop):
    """A detached session is ended when its TTL passes, not before."""
    tag = "%s/%s" % (kind, loop)
    hooks = Hooks()
    s = NetServer(kind, loop=loop, args=["--session-ttl", "1s"], extra_env=hooks.env)
    try:
        a = s.connect()
        sid = a.handshake()["sessionId"]
        argv, match = sleeper()
        started(a, "sl", argv)
        pids = find(match)
        t0 = time.monotonic()
        a.drop()
        hooks.wait("session-expired", session=sid)
        dt = time.monotonic() - t0
        t.ok(pids and wait_gone(pids) and dt >= 1.0,
             "[%s] the TTL (1 s) kills a detached session's processes (after %.2f s)"
             % (tag, dt))
        c = s.connect()
        r = c.request("initialize", {"clientName": "c", "resumeSessionId": sid})
        t.ok(err_code(r) == INVALID_REQ and "unknown session id" in err_msg(r),
             "[%s] and its id is unknown afterwards" % tag, r)
    finally:
        t.eq(s.stop(), 0, "[%s] SIGTERM: exit 0" % tag)
        hooks.close()


def replay(kind):
    """Disconnect mid-stream, resume, replay with afterSeq: byte-exact."""
    tag = kind
    n = 700 * 1024
    seed = os.getpid()
    prog = ("import random,sys,time\n"
            "r=random.Random(%d);d=bytes(r.getrandbits(8) for _ in range(%d))\n"
            "o=sys.stdout.buffer\n"
            "for i in range(0,len(d),7000):\n"
            "  o.write(d[i:i+7000]);o.flush();time.sleep(0.004)\n" % (seed, n))
    want = hashlib.sha256(gen_output(seed, n)).hexdigest()
    hooks = Hooks()
    s = NetServer(kind, extra_env=hooks.env)
    try:
        a = s.connect()
        sid = a.handshake()["sessionId"]
        started(a, "gen", ["python3", "-c", prog])
        got = bytearray()
        last = 0
        while len(got) < n // 4:
            m = a.read_msg()
            if m.get("method") == "process/output":
                p = m["params"]
                if p["seq"] == last + 1:
                    got += unb64(p["chunk"])
                    last = p["seq"]
        a.drop()
        hooks.wait("session-detached", session=sid)
        b = s.connect()
        b.call("initialize", {"clientName": "b", "resumeSessionId": sid})
        b.notify("initialized", {})
        closed = False
        deadline = time.monotonic() + WAIT
        while not closed and time.monotonic() < deadline:
            r = b.call("process/read", {"processId": "gen", "afterSeq": last, "waitMs": 2000})
            for ch in r["chunks"]:
                if ch["seq"] == last + 1:
                    got += unb64(ch["chunk"])
                    last = ch["seq"]
            last = max(last, r["nextSeq"] - 1)
            closed = r["closed"]
        t.ok(closed and hashlib.sha256(got).hexdigest() == want and len(got) == n,
             "[%s] disconnect mid-stream, resume, replay: %d bytes, sha256 matches" %
             (tag, len(got)))
    finally:
        s.stop()
        hooks.close()


def eviction():
    """A long poll on a connection that only shut its sending side; resumed elsewhere."""
    hooks = Hooks()
    s = NetServer("unix", extra_env=hooks.env)
    try:
        a = s.connect()
        sid = a.handshake()["sessionId"]
        argv, match = sleeper()
        started(a, "sl", argv)
        a.send({"id": 99, "method": "process/read",
                "params": {"processId": "sl", "afterSeq": 0, "waitMs": int(WAIT * 2000)}})
        hooks.wait("read-wait", id=99)
        a.shutdown_write()
        hooks.wait("session-detached", session=sid)
        b = s.connect()
        r = b.request("initialize", {"clientName": "b", "resumeSessionId": sid})
        t.eq(r.get("result", {}).get("sessionId"), sid,
             "eviction: a half-closed connection's session can be resumed")
        m = a.read_response()
        t.ok(m.get("id") == 99 and err_code(m) == INVALID_REQ and
             err_msg(m) == "session has been resumed by another connection",
             "eviction: the old connection's long poll fails with the documented message", m)
        t.ok(a.expect_eof(), "eviction: and the old connection is closed")
    finally:
        s.stop()
        hooks.close()


# ---------------------------------------------------------------- many clients

def many_clients():
    """100 concurrent clients, each running sandboxed processes in its own workspace."""
    N = 100
    base = tempfile.mkdtemp(prefix="cordon-many-", dir="/var/tmp")
    s = NetServer("ws", args=["--max-connections", "200", "--max-sessions", "200"])
    conns = []
    try:
        for i in range(N):
            os.mkdir(os.path.join(base, "w%d" % i))
            with open(os.path.join(base, "w%d" % i, "secret"), "w") as f:
                f.write("secret of %d\n" % i)
        for i in range(N):
            c = s.connect()
            c.handshake("client-%d" % i)
            conns.append(c)
        t.eq(len(conns), N, "many: %d clients connected at once" % N)
        rss = vm_rss_kb(s.server_pid)
        t.ok(rss < 64 * 1024, "many: server RSS with %d clients is %d kB" % (N, rss))
        for i, c in enumerate(conns):
            ws = os.path.join(base, "w%d" % i)
            other = os.path.join(base, "w%d" % ((i + 1) % N))
            sb = {"permissions": workspace_write(), "windowsSandboxLevel": "disabled",
                  "workspaceRoots": [uri(ws)], "cwd": uri(ws)}
            script = ("echo mine > out; cat secret; echo x > %s/out 2>/dev/null || "
                      "echo denied" % other)
            r = c.start("p", ["/bin/sh", "-c", script], cwd=ws, sandbox=sb)
            if "error" in r:
                t.not_ok("many: sandboxed start %d" % i, r)
                return
        bad = []
        for i, c in enumerate(conns):
            res = c.wait_closed("p")
            if res.stdout != b"secret of %d\ndenied\n" % i or res.exit_code != 0:
                bad.append((i, res.stdout, res.exit_code))
        t.ok(not bad, "many: every client's sandboxed process wrote its own workspace, "
             "and writing the next client's was denied", bad[:3])
        leaked = [i for i in range(N)
                  if open(os.path.join(base, "w%d" % i, "out")).read() != "mine\n"]
        t.ok(not leaked, "many: no workspace was written by another client", leaked[:5])
        # Every client has a process "p": each sees exactly its own.
        r = conns[0].request("process/terminate", {"processId": "p"})
        r2 = conns[1].request("process/read", {"processId": "p"})
        t.ok("result" in r and "result" in r2 and r2["result"]["closed"],
             "many: the same process id in two sessions is two processes")
    finally:
        for c in conns:
            c.drop()
        s.stop()
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- limits

def limits():
    hooks = Hooks()
    s = NetServer("ws", args=["--max-connections", "2", "--max-sessions", "1"],
                  extra_env=hooks.env)
    try:
        a = s.connect()
        a.handshake()
        b = s.connect()
        r = b.request("initialize", {"clientName": "b"})
        t.ok(err_code(r) == INVALID_REQ and "too many sessions" in err_msg(r),
             "--max-sessions 1: a second session is refused", r)
        try:
            s.connect()
            t.not_ok("--max-connections 2: a third connection is refused")
        except HandshakeError as e:
            t.eq(e.status, 503, "--max-connections 2: a third connection gets 503")
        mark = hooks.mark()
        b.drop()
        hooks.wait("conn-freed", since=mark)
        c = s.connect()
        t.ok(c.request("environment/status", None).get("error") is not None,
             "a closed connection frees its slot")
    finally:
        s.stop()
        hooks.close()


def flooded(kind, hooks):
    """A server with a 1M queue cap and a 2 s stall timeout, and a client whose process
    floods it with output: (server, client, session id, the client's connection serial)."""
    s = NetServer(kind, args=["--max-queued-bytes", "1M", "--stall-timeout", "2s",
                              "--session-ttl", "%ds" % WAIT], extra_env=hooks.env)
    try:
        a = s.connect()
        sid = a.handshake()["sessionId"]
        started(a, "yes", ["sh", "-c", "exec yes 0123456789abcdefghijklmnopqrstuvwxyz"])
    except BaseException:
        s.stop()
        raise
    return s, a, sid, hooks.wait("session-attached", session=sid)["conn"]


def resumes(s, sid, tag):
    """The session of a dropped connection was detached, not lost."""
    b = s.connect()
    r = b.request("initialize", {"clientName": "b", "resumeSessionId": sid})
    t.eq(r.get("result", {}).get("sessionId"), sid,
         "[%s] its session was detached, not lost: it resumes" % tag)


def slow_reader(kind):
    """A client that stops reading: bounded memory, other clients unaffected, dropped later."""
    tag = kind
    hooks = Hooks()
    s, a, sid, aconn = flooded(kind, hooks)
    try:
        other = s.connect()
        other.handshake()
        peak = 0
        slow_ok = True
        worst = 0.0
        for _ in range(6):
            time.sleep(0.25)  # sampling: the verdicts do not depend on it
            peak = max(peak, vm_rss_kb(s.server_pid))
            t0 = time.monotonic()
            r = other.request("environment/status")
            worst = max(worst, time.monotonic() - t0)
            slow_ok = slow_ok and r.get("result") == {"status": "ready"} and worst < PROMPT
        t.ok(peak < 40 * 1024, "[%s] a client that does not read: server RSS stays at %d kB"
             % (tag, peak))
        t.ok(slow_ok, "[%s] and another client is answered promptly meanwhile (at worst %.2f s)"
             % (tag, worst))
        # Still reading nothing: the server drops it once --stall-timeout passed.
        hooks.wait("conn-closed", conn=aconn)
        dropped = False
        deadline = time.monotonic() + WAIT
        try:
            while not a.out_eof and time.monotonic() < deadline:
                a._pump(deadline)
            dropped = a.out_eof
        except OSError:
            dropped = True
        t.ok(dropped, "[%s] after --stall-timeout the connection is dropped" % tag)
        t.ok("read nothing for" in s.stderr_text(), "[%s] and the log says why" % tag)
        resumes(s, sid, tag)
    finally:
        s.stop()
        hooks.close()


def half_drained(kind):
    """A client that takes a little of its backlog and then stops is dropped too: its
    queue is back under the cap, but its output stays held back until half the cap."""
    tag = kind
    hooks = Hooks()
    s, a, sid, aconn = flooded(kind, hooks)
    try:
        time.sleep(0.6)  # over the cap within milliseconds: held back (coverage only)
        # 320 KB: from the cap plus at most one notification (88 KB) to between
        # half the cap and the cap.
        want, got = 320 * 1024, 0
        deadline = time.monotonic() + WAIT
        while got < want and time.monotonic() < deadline:
            if select.select([a.sock], [], [], 0.5)[0]:
                chunk = a.sock.recv(min(65536, want - got))
                if not chunk:
                    break
                got += len(chunk)
        t.eq(got, want, "[%s] the client took 320 KB of its backlog" % tag)
        hooks.wait("conn-closed", conn=aconn)
        t.ok("read nothing for 2000 ms" in s.stderr_text(),
             "[%s] then nothing: it is dropped after --stall-timeout" % tag, s.stderr_text())
        eof = False
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if select.select([a.sock], [], [], 0.5)[0]:
                try:
                    if not a.sock.recv(1 << 20):
                        eof = True
                        break
                except OSError:
                    eof = True
                    break
        t.ok(eof, "[%s] and its socket is closed" % tag)
        resumes(s, sid, tag)
    finally:
        s.stop()
        hooks.close()


def streaming(kind):
    """fs/readBlock answers go out while they are encoded: whole messages, exact bytes,
    and a client that does not read holds up nobody."""
    tag = kind
    mib = 1024 * 1024
    d = tempfile.mkdtemp(prefix="cordon-stream-")
    s = NetServer(kind)
    try:
        f = os.path.join(d, "f")
        data = os.urandom(5 * mib + 12345)
        with open(f, "wb") as fh:
            fh.write(data)
        time.sleep(0.1)  # a file left alone is read ahead
        a = s.connect()
        a.handshake()
        a.call("fs/open", {"handleId": "s", "path": uri(f)})
        h, off = hashlib.sha256(), 0
        while True:
            res = a.call("fs/readBlock", {"handleId": "s", "offset": off, "len": mib})
            chunk = unb64(res["chunk"])
            h.update(chunk)
            off += len(chunk)
            if res["eof"]:
                break
        t.ok(off == len(data) and h.digest() == hashlib.sha256(data).digest(),
             "[%s] a 5 MiB stream in 1 MiB blocks arrives exact (sha256)" % tag)
        if kind == "ws":
            t.eq(a.fragmented, 0, "[%s] each answer is one whole frame" % tag)

        ids = [a.new_id() for _ in range(3)]
        for i, rid in enumerate(ids):
            a.send({"id": rid, "method": "fs/readBlock",
                    "params": {"handleId": "s", "offset": i * mib, "len": mib}})
        resps = [a.read_response() for _ in ids]
        t.ok([r.get("id") for r in resps] == ids and
             all(unb64(r["result"]["chunk"]) == data[i * mib:(i + 1) * mib]
                 for i, r in enumerate(resps)),
             "[%s] three blocks asked at once: answered whole and in order" % tag)

        b = s.connect()
        b.handshake()
        rid = a.new_id()
        a.send({"id": rid, "method": "fs/readBlock",
                "params": {"handleId": "s", "offset": mib, "len": mib}})
        time.sleep(0.3)  # a reads nothing: 1.4 MB does not fit in the socket
        t0 = time.monotonic()
        r = b.request("environment/status")
        dt = time.monotonic() - t0
        t.ok(r.get("result") == {"status": "ready"} and dt < PROMPT,
             "[%s] a client that does not read its block holds up no other (%.2f s)"
             % (tag, dt), r)
        # Then it reads the answer slowly, a little at a time.
        for _ in range(20):
            time.sleep(0.02)
            try:
                a._feed(a.sock.recv(16384))
            except BlockingIOError:
                pass
        r = a.read_response()
        t.ok(r.get("id") == rid and unb64(r["result"]["chunk"]) == data[mib:2 * mib],
             "[%s] and when it reads slowly it gets the exact bytes" % tag)
        if kind == "ws":
            t.eq(a.fragmented, 0, "[%s] still one whole frame per answer" % tag)
    finally:
        s.stop()
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- unix socket

def unix_socket():
    d = tempfile.mkdtemp(prefix="cordon-unix-")
    os.chmod(d, 0o755)
    pidfile = os.path.join(d, "serve.pid")
    s = NetServer("unix", sockdir=d, args=["--pid-file", pidfile])
    try:
        st = os.lstat(s.path)
        t.ok(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
             "unix: the socket is mode 0600 (%o)" % stat.S_IMODE(st.st_mode))
        with open(pidfile) as f:
            t.eq(int(f.read()), s.pid, "--pid-file holds the server's pid")
        c = s.connect()
        t.ok("sessionId" in c.handshake(), "unix: initialize over the socket")
        c.send_raw("{oops}\n")
        m = c.read_msg()
        t.ok(m.get("id") == -1 and err_code(m) == INVALID_REQ,
             "unix: a bad line gives id -1, -32600 and the connection stays", m)
        r = subprocess.run([CORDON, "serve", "--listen", "unix:" + s.path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)
        t.ok(r.returncode != 0 and b"another server is listening" in r.stderr,
             "unix: a second server on a live socket is refused", r.stderr)
        if ROOT:
            os.chmod(s.path, 0o666)  # only the peer credential check is left
            t.ok(not other_uid_gets_in(s.path, []),
                 "unix: a peer with another uid is refused (SO_PEERCRED)")
    finally:
        t.eq(s.stop(), 0, "unix: SIGTERM: exit 0")
    t.ok(not os.path.exists(s.path) and not os.path.exists(pidfile),
         "unix: the socket and the pid file are removed at exit")
    # A socket left by a server that died is replaced.
    s = NetServer("unix", sockdir=d)
    inner = s.server_pid
    s.stop(signal.SIGKILL)
    wait_gone([inner])  # the loop's process dies with the one killed (PDEATHSIG)
    s2 = NetServer("unix", sockdir=d)
    try:
        t.ok(s2.ready and "sessionId" in s2.connect().handshake(),
             "unix: a stale socket is replaced")
    finally:
        s2.stop()
    os.chmod(d, 0o777)
    r = subprocess.run([CORDON, "serve", "--listen", "unix:" + os.path.join(d, "x.sock")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)
    t.ok(r.returncode != 0 and b"writable by nobody else" in r.stderr,
         "unix: a directory others can write to is refused", r.stderr)
    os.chmod(d, 0o755)
    if ROOT:
        s = NetServer("unix", sockdir=d, args=["--unix-group", "54321"])
        try:
            st = os.lstat(s.path)
            t.ok(stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == 54321,
                 "--unix-group: the socket is 0660 and of that group")
            t.ok(other_uid_gets_in(s.path, [54321]),
                 "--unix-group: a member of the group gets in")
            t.ok(not other_uid_gets_in(s.path, [54322]),
                 "--unix-group: a non-member does not (file mode)")
            os.chmod(s.path, 0o666)
            t.ok(not other_uid_gets_in(s.path, [54322]),
                 "--unix-group: nor with the file mode opened up (SO_PEERCRED)")
        finally:
            s.stop()
        # By name: looked up in /etc/group (a static cordon has no NSS).
        name = grp.getgrgid(0).gr_name
        s = NetServer("unix", sockdir=d, args=["--unix-group", name])
        try:
            st = os.lstat(s.path) if s.ready else None
            t.ok(st is not None and stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == 0,
                 "--unix-group %s: a group named, not numbered" % name, s.stderr_text())
        finally:
            s.stop()
    shutil.rmtree(d, ignore_errors=True)


def other_uid_gets_in(path, groups):
    """Connect as uid 65534 with the given supplementary groups; True if initialize works."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups(groups)
            os.setgid(65534)
            os.setuid(65534)
            sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sk.settimeout(3)
            sk.connect(path)
            sk.sendall(b'{"id":1,"method":"initialize","params":{"clientName":"x"}}\n')
            data = sk.recv(65536)
            code = 0 if b"sessionId" in data else 1
        except Exception:  # noqa: BLE001
            code = 1
        os._exit(code)
    _, st = os.waitpid(pid, 0)
    return os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0


# ---------------------------------------------------------------- shutdown, logs

def shutdown(kind):
    tag = kind
    # A workspace of its own: /tmp as one would be scanned for the nested
    # repositories other tests create and remove there meanwhile.
    ws = tempfile.mkdtemp(prefix="cordon-shutdown-", dir="/var/tmp")
    s = NetServer(kind)
    matches = []
    try:
        conns = []
        for i in range(3):
            c = s.connect()
            c.handshake()
            argv, match = sleeper()
            started(c, "sl", argv, sandbox={"permissions": workspace_write(),
                                            "windowsSandboxLevel": "disabled",
                                            "workspaceRoots": [uri(ws)]}
                    if i == 1 else None)
            matches.append(match)
            conns.append(c)
        conns[2].drop()  # one session detached
        pids = [p for m in matches for p in find(m)]
        t.eq(len(pids), 3, "[%s] three sessions' processes run" % tag)
        st = s.stop(signal.SIGTERM)
        t.eq(st, 0, "[%s] SIGTERM: exit 0" % tag)
        t.ok(wait_gone(pids), "[%s] SIGTERM leaves no process behind" % tag)
        t.ok(all(c.expect_eof() for c in conns[:2]),
             "[%s] and closes every connection" % tag)
    finally:
        s.stop(signal.SIGKILL)
        shutil.rmtree(ws, ignore_errors=True)


def journal():
    d = tempfile.mkdtemp(prefix="cordon-journal-")
    # A JOURNAL_STREAM that names another file: plain lines.
    s = NetServer("unix", sockdir=d, extra_env={"JOURNAL_STREAM": "1:1"})
    s.stop()
    plain = s.stderr_text()
    errf = tempfile.TemporaryFile()
    st = os.fstat(errf.fileno())
    env = dict(os.environ, JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    p = subprocess.Popen([CORDON, "serve", "--listen", "unix:" + os.path.join(d, "j.sock")],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf,
                         env=env)
    deadline = time.monotonic() + WAIT
    while not os.path.exists(os.path.join(d, "j.sock")) and time.monotonic() < deadline:
        time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    p.wait(WAIT)
    errf.seek(0)
    text = errf.read().decode()
    t.ok(plain.startswith("cordon: ") and text.startswith("<6>serve: listening on unix:"),
         "logs carry syslog priorities when stderr is the journal (JOURNAL_STREAM)",
         "plain: %r\njournal: %r" % (plain[:80], text[:80]))
    shutil.rmtree(d, ignore_errors=True)


def fs_handles_released():
    hooks = Hooks()
    s = NetServer("ws", extra_env=hooks.env)
    try:
        d = tempfile.mkdtemp(prefix="cordon-fsh-")
        f = os.path.join(d, "f")
        with open(f, "wb") as fh:
            fh.write(b"x" * 4096)
        a = s.connect()
        sid = a.handshake()["sessionId"]
        # The fs workers (and their eventfd) start with the first fs request.
        a.request("fs/getMetadata", {"path": uri(f)})
        base = fd_count(s.server_pid)
        for i in range(128):
            r = a.request("fs/open", {"path": uri(f), "handleId": "h%d" % i})
            if "error" in r:
                t.not_ok("fs/open %d" % i, r)
                return
        opened = fd_count(s.server_pid)
        mark = hooks.mark()
        a.drop()
        hooks.wait("conn-freed", since=mark)
        hooks.wait("session-detached", session=sid)
        # The handles' files are closed by the fs workers (a close can hang).
        hooks.wait("fs-fd-closed", n=128, since=mark)
        t.ok(opened >= base + 128 and fd_count(s.server_pid) <= base - 2,
             "fs/open handles are released on disconnect (fds %d -> %d -> %d)"
             % (base, opened, fd_count(s.server_pid)))
        b = s.connect()
        b.call("initialize", {"clientName": "b", "resumeSessionId": sid})
        b.notify("initialized", {})
        r = b.request("fs/readBlock", {"handleId": "h0", "offset": 0, "length": 10})
        t.ok("error" in r, "they are connection-scoped: not there after resume", r)
        shutil.rmtree(d)
    finally:
        s.stop()
        hooks.close()


for loop in LOOPS:
    t.guard("http side " + loop, http_side, loop)
    for kind in ("ws", "unix"):
        t.guard("sessions %s %s" % (kind, loop), sessions, kind, loop)
        t.guard("session TTL %s %s" % (kind, loop), session_ttl, kind, loop)
t.guard("pings", pings)
t.guard("hostile ws", hostile_ws)
t.guard("auth", auth)
for kind in ("ws", "unix"):
    t.guard("replay " + kind, replay, kind)
    t.guard("slow reader " + kind, slow_reader, kind)
    t.guard("half-drained reader " + kind, half_drained, kind)
    t.guard("streaming " + kind, streaming, kind)
    t.guard("shutdown " + kind, shutdown, kind)
t.guard("eviction", eviction)
t.guard("limits", limits)
t.guard("fs handles", fs_handles_released)
t.guard("unix socket", unix_socket)
t.guard("journal", journal)
t.guard("many clients", many_clients)
t.done()
