#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# What `cordon serve` tells operators: GET /metrics (the Prometheus text
# exposition format 0.0.4) and GET /status (JSON) on the WebSocket listener,
# behind the same bearer token as the upgrade; cordon/metrics and
# cordon/status on a unix socket. Checked:
# - every scrape parses strictly (each sample belongs to a declared TYPE,
#   counters end in _total, labels are escaped, histogram buckets are
#   monotone and +Inf equals _count);
# - the counters move by exactly what the test did: two processes started
#   (one sandboxed), one refused (--max-processes), bytes in and out, an fs
#   request, connections;
# - a missing or wrong token gets the upgrade's 401, another path 404,
#   another method 405;
# - a client that sends half a request, one that sends garbage and one that
#   reads nothing hold up neither a WebSocket session beside them nor
#   another scrape.
# Waits are on the server's answers, never on sleeps. TAP.

import atexit
import json
import math
import os
import re
import socket
import sys
import shutil
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, WAIT, Tap, b64, cordon_usable, err_msg,  # noqa: E402
                       workspace_write)
from netclient import NetServer, WsConn, http  # noqa: E402
import subprocess  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
probe = subprocess.run([CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if b"without the WebSocket transport" in probe.stderr:
    t.skip_all("this cordon was built without the WebSocket transport")

TOKEN = "metrics-test-token-0123456789"
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class ParseError(Exception):
    pass


def parse_labels(s):
    """The inside of {...}: a dict; strict (escapes \\\\, \\", \\n only, no duplicates)."""
    out = {}
    pos = 0
    while pos < len(s):
        m = LABEL.match(s, pos)
        if not m:
            raise ParseError("bad label at %r" % s[pos:])
        k = m.group(1)
        if k in out:
            raise ParseError("duplicate label %s" % k)
        out[k] = re.sub(r"\\(.)", lambda e: {"n": "\n"}.get(e.group(1), e.group(1)), m.group(2))
        pos = m.end()
        if pos < len(s):
            if s[pos] != ",":
                raise ParseError("expected ',' in labels at %r" % s[pos:])
            pos += 1
    return out


def parse_exposition(text):
    """Parse the text format strictly: {family: {"type", "help", "samples": [(name, labels,
    value)]}}. Raises ParseError."""
    if not text.endswith("\n"):
        raise ParseError("the text does not end with a newline")
    fams = {}
    seen = set()
    for ln in text[:-1].split("\n"):
        if ln.startswith("# HELP "):
            name, _, hlp = ln[7:].partition(" ")
            if not NAME.match(name) or "help" in fams.get(name, {}):
                raise ParseError("bad or repeated HELP: %r" % ln)
            fams.setdefault(name, {"samples": []})["help"] = hlp
            continue
        if ln.startswith("# TYPE "):
            parts = ln[7:].split(" ")
            if len(parts) != 2 or not NAME.match(parts[0]) or parts[1] not in TYPES:
                raise ParseError("bad TYPE: %r" % ln)
            f = fams.setdefault(parts[0], {"samples": []})
            if "type" in f or f["samples"]:
                raise ParseError("TYPE repeated or after samples: %r" % ln)
            f["type"] = parts[1]
            continue
        if ln.startswith("#") or not ln:
            raise ParseError("unexpected line %r" % ln)
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", ln)
        if not m:
            raise ParseError("bad sample line %r" % ln)
        name, labels, value = m.group(1), parse_labels(m.group(3) or ""), m.group(4)
        try:
            v = float(value)
        except ValueError:
            raise ParseError("bad value in %r" % ln) from None
        # The family it belongs to: declared by a TYPE before it.
        fam = None
        for cand, suffixes in ((name, ("",)),
                               (re.sub(r"_(bucket|sum|count)$", "", name), ("_bucket", "_sum",
                                                                           "_count"))):
            if cand in fams and "type" in fams[cand] and name[len(cand):] in suffixes:
                if fams[cand]["type"] == "histogram" and name == cand:
                    continue
                if fams[cand]["type"] != "histogram" and name != cand:
                    continue
                fam = cand
                break
        if fam is None:
            raise ParseError("sample %r belongs to no declared TYPE" % ln)
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ParseError("duplicate series %r" % ln)
        seen.add(key)
        if fams[fam]["type"] == "counter" and (not name.endswith("_total") or v < 0):
            raise ParseError("counter sample %r: not _total or negative" % ln)
        fams[fam]["samples"].append((name, labels, v))
    for name, f in fams.items():
        if "type" not in f or "help" not in f:
            raise ParseError("family %s lacks its TYPE or HELP" % name)
        if f["type"] == "histogram":
            check_histogram(name, f["samples"])
    return fams


def check_histogram(name, samples):
    buckets = [(s[1].get("le"), s[2]) for s in samples if s[0] == name + "_bucket"]
    counts = [s[2] for s in samples if s[0] == name + "_count"]
    sums = [s[2] for s in samples if s[0] == name + "_sum"]
    if not buckets or len(counts) != 1 or len(sums) != 1:
        raise ParseError("histogram %s: buckets, one _count and one _sum wanted" % name)
    if buckets[-1][0] != "+Inf":
        raise ParseError("histogram %s: the last bucket is not +Inf" % name)
    bounds = [float(le) for le, _ in buckets]
    if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
        raise ParseError("histogram %s: le bounds not increasing" % name)
    vals = [v for _, v in buckets]
    if vals != sorted(vals):
        raise ParseError("histogram %s: bucket counts not monotone: %r" % (name, vals))
    if vals[-1] != counts[0]:
        raise ParseError("histogram %s: +Inf (%g) != _count (%g)" % (name, vals[-1], counts[0]))
    if sums[0] < 0 or math.isnan(sums[0]):
        raise ParseError("histogram %s: bad _sum" % name)


def value(fams, name, **labels):
    """The value of one series (0 when absent: a counter not yet moved)."""
    fam = re.sub(r"_(bucket|sum|count)$", "", name) if name not in fams else name
    for n, lb, v in fams.get(fam, {}).get("samples", []):
        if n == name and lb == labels:
            return v
    raise KeyError("%s%r not in the scrape" % (name, labels))


def auth(token=TOKEN):
    return {"Authorization": "Bearer " + token}


def get(srv, path, headers=None, method="GET"):
    st, hdrs, body, s = http(srv.host, srv.port, path, method=method, headers=headers)
    s.close()
    return st, hdrs, body


def scrape(srv, desc):
    st, hdrs, body = get(srv, "/metrics", auth())
    t.eq(st, 200, "%s: GET /metrics is 200" % desc)
    t.ok(hdrs.get("content-type", "").startswith("text/plain; version=0.0.4"),
         "%s: the content type is the text format 0.0.4" % desc, hdrs)
    try:
        fams = parse_exposition(body.decode())
        t.ok(True, "%s: the exposition parses strictly" % desc)
    except (ParseError, UnicodeDecodeError) as e:
        t.not_ok("%s: the exposition parses strictly" % desc, "%s\n%s" % (e, body[:4000]))
        fams = {}
    return fams


def deltas(before, after, series):
    return {k: value(after, *k[:1], **dict(k[1:])) - value(before, *k[:1], **dict(k[1:]))
            for k in series}


def counts_move(tag):
    base = tempfile.mkdtemp(prefix="cordon-metrics-")
    atexit.register(shutil.rmtree, base, True)
    os.chmod(base, 0o755)
    srv = NetServer("ws", args=["--auth-token-file", token_file(base), "--max-processes", "2"])
    try:
        t.ok(srv.ready, "[%s] the server listens" % tag, srv.stderr_text())
        m0 = scrape(srv, "[%s] first scrape" % tag)
        c = WsConn(srv.host, srv.port, token=TOKEN)
        c.handshake()
        # 1: unsandboxed, fed through process/write (head exits after 14 bytes).
        r1 = c.start("cat", ["head", "-c", "14"], cwd=base, pipeStdin=True)
        t.ok("result" in r1, "[%s] cat starts" % tag, r1)
        w = c.request("process/write", {"processId": "cat", "chunk": b64("hello metrics\n"),
                                        "writeId": "1"})
        t.ok("result" in w, "[%s] process/write accepted" % tag, w)
        t.ok(c.wait_output("cat", b"hello metrics\n"), "[%s] cat echoes" % tag)
        c.wait_closed("cat")
        # 2: sandboxed, writing to stderr.
        r2 = c.start("sbx", ["sh", "-c", "printf oops >&2"], cwd=base,
                     sandbox={"permissions": workspace_write(), "windowsSandboxLevel": "disabled"})
        sandboxed = r2.get("result", {}).get("sandboxType") == "linuxSeccomp"
        t.diag("[%s] the second process's sandboxType: %s" %
               (tag, r2.get("result", {}).get("sandboxType")))
        t.ok("result" in r2, "[%s] the sandboxed process starts" % tag, r2)
        if "result" in r2:
            c.wait_closed("sbx")
        # 3: refused, the table holds two (closed ones are retained).
        r3 = c.start("third", ["true"], cwd=base)
        t.ok("error" in r3 and "too many processes" in err_msg(r3),
             "[%s] a third process is refused (--max-processes 2)" % tag, r3)
        md = c.request("fs/getMetadata", {"path": "file://" + base})
        t.ok("result" in md, "[%s] fs/getMetadata answers" % tag, md)

        m1 = scrape(srv, "[%s] second scrape" % tag)
        if not m0 or not m1:
            return
        sb = "linuxSeccomp" if sandboxed else "none"
        want = {
            ("cordon_processes_started_total", ("sandbox", "none")): 1 + (not sandboxed),
            ("cordon_processes_started_total", ("sandbox", "linuxSeccomp")): int(sandboxed),
            ("cordon_processes_exited_total", ("sandbox", "none")): 1 + (not sandboxed),
            ("cordon_processes_exited_total", ("sandbox", "linuxSeccomp")): int(sandboxed),
            ("cordon_processes_running", ("sandbox", "none")): 0,
            ("cordon_processes_running", ("sandbox", sb)): 0,
            ("cordon_refusals_total", ("reason", "max_processes")): 1,
            ("cordon_refusals_total", ("reason", "auth")): 0,
            ("cordon_refusals_total", ("reason", "sandbox")): 0,
            ("cordon_stdin_bytes_total",): len(b"hello metrics\n"),
            ("cordon_output_bytes_total", ("stream", "stdout")): len(b"hello metrics\n"),
            ("cordon_output_bytes_total", ("stream", "stderr")): len(b"oops"),
            ("cordon_fs_requests_total", ("method", "fs/getMetadata")): 1,
            ("cordon_fs_requests_total", ("method", "fs/readFile")): 0,
            # The session's connection and the second scrape's.
            ("cordon_connections_accepted_total", ("transport", "websocket")): 2,
            ("cordon_process_start_seconds_count",): 2,
            ("cordon_process_start_seconds_bucket", ("le", "+Inf")): 2,
        }
        got = deltas(m0, m1, want)
        t.eq(got, want, "[%s] the counters moved by exactly what the test did" % tag)
        t.eq(value(m1, "cordon_sessions_attached"), 1, "[%s] one session attached" % tag)
        t.eq(value(m1, "cordon_sessions_detached"), 0, "[%s] none detached" % tag)
        t.eq(value(m1, "cordon_connections_open", transport="websocket"), 2,
             "[%s] two WebSocket connections open (the session, the scrape)" % tag)
        t.ok(value(m1, "cordon_process_start_seconds_sum") > 0,
             "[%s] the start latency sum grew" % tag)

        # /status: the same numbers, as JSON.
        st, hdrs, body = get(srv, "/status", auth())
        t.eq(st, 200, "[%s] GET /status is 200" % tag)
        t.ok(hdrs.get("content-type") == "application/json", "[%s] /status is JSON" % tag, hdrs)
        try:
            js = json.loads(body)
        except ValueError:
            js = {}
        t.ok(js.get("listen") == ["ws://%s:%d" % (srv.host, srv.port)] and
             isinstance(js.get("version"), str) and js.get("uptimeSeconds", -1) >= 0,
             "[%s] /status has the version, the uptime and the address" % tag, js)
        t.eq((js.get("processesStarted"), js.get("refusals", {}).get("max_processes"),
              js.get("attachedSessions"), js.get("processes")),
             ({"none": value(m1, "cordon_processes_started_total", sandbox="none"),
               "linuxSeccomp": value(m1, "cordon_processes_started_total",
                                     sandbox="linuxSeccomp")}, 1, 1, 2),
             "[%s] /status counts what /metrics counts" % tag)
        cs = c.call("cordon/status")
        t.eq(cs.get("processesStarted"), js.get("processesStarted"),
             "[%s] cordon/status is the same source" % tag)
        c.drop()
    finally:
        srv.stop()


def token_file(base):
    p = os.path.join(base, "token")
    with open(p, "w") as f:
        f.write(TOKEN)
    os.chmod(p, 0o600)
    return p


def refusals(tag):
    base = tempfile.mkdtemp(prefix="cordon-metrics-")
    atexit.register(shutil.rmtree, base, True)
    srv = NetServer("ws", args=["--auth-token-file", token_file(base)])
    try:
        t.ok(srv.ready, "[%s] the server listens" % tag, srv.stderr_text())
        for path in ("/metrics", "/status"):
            st, hdrs, body = get(srv, path)
            t.ok(st == 401 and "bearer" in hdrs.get("www-authenticate", "").lower() and
                 not body, "[%s] %s without a token: 401, nothing told" % (tag, path),
                 (st, hdrs, body))
            st, _, body = get(srv, path, auth("metrics-test-token-wrong-wrong"))
            t.ok(st == 401 and not body, "[%s] %s with a wrong token: 401" % (tag, path),
                 (st, body))
            st, _, body = get(srv, path, auth(), method="POST")
            t.eq(st, 405, "[%s] POST %s: 405" % (tag, path))
            st, _, _ = get(srv, path, method="POST")
            t.eq(st, 401, "[%s] POST %s without a token: 401 (the token comes first)" % (tag, path))
        st, _, _ = get(srv, "/metricsx", auth())
        t.eq(st, 404, "[%s] another path: 404" % tag)
        st, _, _ = get(srv, "/metrics/", auth())
        t.eq(st, 404, "[%s] /metrics/: 404" % tag)
        st, _, body = get(srv, "/metrics?x=1", auth())
        t.eq(st, 200, "[%s] a query string is ignored" % tag)
        m = scrape(srv, "[%s] scrape after the refusals" % tag)
        if m:
            # 2 paths x (none, wrong, POST without) = 6
            t.eq(value(m, "cordon_refusals_total", reason="auth"), 6,
                 "[%s] every 401 counted as an auth refusal" % tag)
    finally:
        srv.stop()


def raw(srv, data):
    s = socket.create_connection((srv.host, srv.port), timeout=WAIT)
    if data:
        s.sendall(data)
    return s


def read_all(s):
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return buf
        buf += chunk


def slow_clients(tag):
    base = tempfile.mkdtemp(prefix="cordon-metrics-")
    atexit.register(shutil.rmtree, base, True)
    os.chmod(base, 0o755)
    srv = NetServer("ws", args=["--auth-token-file", token_file(base)])
    try:
        t.ok(srv.ready, "[%s] the server listens" % tag, srv.stderr_text())
        c = WsConn(srv.host, srv.port, token=TOKEN)
        c.handshake()
        # Half a request; garbage; a full request whose answer is never read.
        half = raw(srv, b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode())
        junk = raw(srv, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n")
        unread = raw(srv, ("GET /metrics HTTP/1.1\r\nAuthorization: Bearer %s\r\n\r\n" %
                           TOKEN).encode())
        unread.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        # The session beside them runs a process and gets its output.
        resp, res = c.run("beside", ["sh", "-c", "echo still-served"], cwd=base)
        t.ok(res is not None and b"still-served" in res.stdout,
             "[%s] a WebSocket session is served beside a half, a garbage and an unread "
             "request" % tag, (resp, res and res.stdout))
        t.ok(read_all(junk).startswith(b"HTTP/1.1 400 "), "[%s] garbage gets 400" % tag)
        m = scrape(srv, "[%s] another scrape meanwhile" % tag)
        if m:
            t.ok(value(m, "cordon_connections_open", transport="websocket") >= 3,
                 "[%s] the held connections show as open" % tag)
        half.sendall(b"\r\n\r\n")
        ans = read_all(half)
        head, _, body = ans.partition(b"\r\n\r\n")
        n = re.search(rb"content-length: (\d+)", head)
        t.ok(head.startswith(b"HTTP/1.1 200 ") and n and int(n.group(1)) == len(body),
             "[%s] the half request, completed, gets the whole scrape" % tag, head)
        try:
            parse_exposition(body.decode())
            t.ok(True, "[%s] and it parses" % tag)
        except (ParseError, UnicodeDecodeError) as e:
            t.not_ok("[%s] and it parses" % tag, str(e))
        ans = read_all(unread)
        t.ok(ans.startswith(b"HTTP/1.1 200 "), "[%s] the unread answer waited for its reader"
             % tag, ans[:100])
        for s in (half, junk, unread):
            s.close()
        c.drop()
    finally:
        srv.stop()


def unix_socket(tag):
    srv = NetServer("unix", args=["--max-processes", "1"])
    try:
        t.ok(srv.ready, "[%s] the server listens" % tag, srv.stderr_text())
        c = srv.connect()
        c.handshake()
        resp, res = c.run("u", ["sh", "-c", "printf abc"])
        t.ok(res is not None and res.stdout == b"abc", "[%s] a process runs" % tag, resp)
        r = c.call("cordon/metrics")
        t.eq(r.get("contentType"), "text/plain; version=0.0.4; charset=utf-8",
             "[%s] cordon/metrics names the format" % tag)
        try:
            m = parse_exposition(r.get("text", ""))
            t.ok(True, "[%s] cordon/metrics' text parses strictly" % tag)
        except ParseError as e:
            t.not_ok("[%s] cordon/metrics' text parses strictly" % tag, str(e))
            m = {}
        if m:
            t.eq((value(m, "cordon_connections_open", transport="unix"),
                  value(m, "cordon_processes_started_total", sandbox="none"),
                  value(m, "cordon_processes_exited_total", sandbox="none"),
                  value(m, "cordon_output_bytes_total", stream="stdout"),
                  value(m, "cordon_sessions_attached")),
                 (1, 1, 1, 3, 1), "[%s] its counts are this connection's" % tag)
        st = c.call("cordon/status")
        t.ok(st.get("listen") == ["unix:" + srv.path] and
             st.get("connectionsOpen", {}).get("unix") == 1,
             "[%s] cordon/status names the socket and counts the connection" % tag, st)
        # Before initialize: refused like cordon/status.
        c2 = srv.connect()
        r = c2.request("cordon/metrics")
        t.ok("error" in r and "initialize" in err_msg(r),
             "[%s] cordon/metrics before initialize is refused" % tag, r)
        m2 = parse_exposition(c.call("cordon/metrics")["text"])
        if m:
            t.eq((value(m2, "cordon_connections_accepted_total", transport="unix") -
                  value(m, "cordon_connections_accepted_total", transport="unix"),
                  value(m2, "cordon_connections_open", transport="unix")),
                 (1, 2), "[%s] a second connection is counted" % tag)
        c2.drop()
        c.drop()
    finally:
        srv.stop()


t.guard("counts", counts_move, "ws")
t.guard("refusals", refusals, "ws")
t.guard("slow clients", slow_clients, "ws")
t.guard("unix", unix_socket, "unix")
t.done()
