#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: the connection state machine and the JSON-RPC envelope
# (exec-server-reference.md 1.4-1.6 and Appendix A). TAP; every scenario
# runs under both event loops.

import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (DARWIN_LIKE, LOOPS, WAIT, Eof, Server, Tap, cordon_usable,  # noqa: E402
                       err_code, err_msg, uri)

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
# Params that decode, so only the connection state can make these fail.
VALID = {
    "process/start": {"processId": "x", "argv": ["true"], "cwd": "file:///tmp", "env": {},
                      "tty": False},
    "process/read": {"processId": "x"},
    "process/write": {"processId": "x", "chunk": "", "writeId": "1"},
    "process/signal": {"processId": "x", "signal": "interrupt"},
    "process/terminate": {"processId": "x"},
}
ENV_KEYS = {"shell", "executorVersion", "providerId", "cwd", "userHomeDir", "platformOs",
            "prependPathDirs", "temporaryDirectories", "tempDir", "capabilities"}
# environmentInfo.capabilities of the released Codex 0.169.0 exec-server, in its order.
CAPABILITY_KEYS = ["networkProxyLaunch", "networkProxyReviewDomains", "credentialMasking",
                   "credentialMaskingCustomProviders", "capabilityDiscoverySandbox",
                   "fsWatchMissing", "capabilityDiscoveryV2", "environmentConfigRead",
                   "httpHeaderEnvVars", "sandboxedFileStreaming", "fileWriteStreaming",
                   "shellSnapshotV2", "windowsMxc", "linuxRootWritePreservesDevices",
                   "linuxApprovedRootWritePreservesRestrictions"]
CAPABILITY_KEYS_TRUE = [(k, k in ("sandboxedFileStreaming", "capabilityDiscoverySandbox",
                                  "fileWriteStreaming", "fsWatchMissing",
                                  "environmentConfigRead", "networkProxyLaunch",
                                  "capabilityDiscoveryV2"))
                        for k in CAPABILITY_KEYS]
# The macOS build (CD_DARWIN_LIKE) has no fs helper, path watches or proxy of its own yet.
MACOS_FALSE = ("sandboxedFileStreaming", "capabilityDiscoverySandbox", "fsWatchMissing",
               "networkProxyLaunch")
if DARWIN_LIKE:
    CAPABILITY_KEYS_TRUE = [(k, v and k not in MACOS_FALSE) for k, v in CAPABILITY_KEYS_TRUE]


def closes(t, tag, lines, desc):
    """Send raw lines after a handshake state; the server must close without a reply."""
    s = Server(tag)
    try:
        for ln in lines:
            s.send_raw(ln)
        got_eof = s.expect_eof()
        # Only the initialize request (id 1) may be answered.
        replies = [m for m in s.pending if "id" in m and m["id"] != 1]
        t.ok(got_eof and not replies, "[%s] %s: connection closed without a reply" % (tag, desc),
             "eof=%s replies=%r" % (got_eof, replies))
        rc = s.wait(WAIT)
        t.eq(rc, 0, "[%s] %s: server exits 0" % (tag, desc))
    finally:
        s.stop()


def initialize_shape(tag, tmp):
    home = os.path.join(tmp, "home dir")
    os.makedirs(home, exist_ok=True)
    tmpdir = os.path.join(tmp, "tmp")
    os.makedirs(tmpdir, exist_ok=True)
    s = Server(tag, cwd=tmp, extra_env={"HOME": home, "TMPDIR": tmpdir, "SHELL": "/bin/bash"})
    try:
        r = s.request("initialize", {"clientName": "probe"})
        res = r.get("result", {})
        t.ok("result" in r and "error" not in r, "[%s] initialize succeeds" % tag, r)
        t.ok(isinstance(res.get("sessionId"), str) and UUID4.match(res["sessionId"]),
             "[%s] sessionId is a lower-case UUID v4" % tag, res.get("sessionId"))
        info = res.get("environmentInfo", {})
        t.ok(ENV_KEYS <= set(info), "[%s] environmentInfo has every key" % tag,
             "missing: %r" % (ENV_KEYS - set(info)))
        t.eq(info.get("shell"), {"name": "bash", "path": "/bin/bash"},
             "[%s] shell comes from $SHELL" % tag)
        t.ok(str(info.get("executorVersion", "")).startswith("cordon "),
             "[%s] executorVersion is 'cordon <version>'" % tag, info.get("executorVersion"))
        t.eq(info.get("providerId"), "cordon", "[%s] providerId" % tag)
        t.eq(info.get("cwd"), uri(os.path.realpath(tmp)), "[%s] cwd is the server's cwd as a URI" % tag)
        t.eq(info.get("userHomeDir"), uri(home), "[%s] userHomeDir is $HOME as a URI (%%20)" % tag)
        t.eq(info.get("platformOs"), "macos" if DARWIN_LIKE else "linux",
             "[%s] platformOs" % tag)
        t.eq(info.get("prependPathDirs"), [], "[%s] prependPathDirs is []" % tag)
        t.eq(info.get("tempDir"), uri(tmpdir), "[%s] tempDir is $TMPDIR as a URI" % tag)
        t.eq(info.get("temporaryDirectories"), [uri(tmpdir)], "[%s] temporaryDirectories" % tag)
        caps = info.get("capabilities", {})
        t.eq(list(caps), CAPABILITY_KEYS,
             "[%s] capabilities has exactly the released binary's 15 keys, in its order" % tag)
        t.eq(caps, dict(CAPABILITY_KEYS_TRUE),
             "[%s] capabilities: true only for %s" % (
                 tag, ", ".join(k for k, v in CAPABILITY_KEYS_TRUE if v)))
        s.notify("initialized", {})
        for desc, kw in (("missing", {"omit_params": True}), ("null", {}), ("{}", {})):
            p = {} if desc == "{}" else None
            r = s.request("environment/info", p, **kw)
            t.eq(r.get("result"), info, "[%s] environment/info with params %s = environmentInfo"
                 % (tag, desc))
            r = s.request("environment/status", p, **kw)
            t.eq(r.get("result"), {"status": "ready"}, "[%s] environment/status with params %s"
                 % (tag, desc))
        sid2 = None
        t.eq(s.stop(), 0, "[%s] server exits 0 at stdin EOF" % tag)
        # A second server gets a different session id.
        s2 = Server(tag, extra_env={"SHELL": ""})
        r2 = s2.request("initialize", {"clientName": "probe", "resumeSessionId": None})
        sid2 = r2.get("result", {}).get("sessionId")
        t.ok(sid2 and sid2 != res.get("sessionId"), "[%s] resumeSessionId null is fine; "
             "session ids differ between servers" % tag, r2)
        sh = r2.get("result", {}).get("environmentInfo", {}).get("shell")
        t.eq(sh, {"name": "sh", "path": "/bin/sh"}, "[%s] shell falls back to /bin/sh" % tag)
        s2.stop()
    finally:
        s.stop()


def state_machine(tag):
    s = Server(tag)
    try:
        cases = (("process/start", "exec"), ("process/read", "exec"), ("process/write", "exec"),
                 ("process/signal", "exec"), ("process/terminate", "exec"),
                 ("environment/info", "environment info"),
                 ("environment/status", "environment status"))
        for m, kind in cases:
            r = s.request(m, VALID.get(m))
            t.ok(err_code(r) == -32600 and err_msg(r) ==
                 "client must call initialize before using %s methods" % kind,
                 "[%s] %s before initialize: -32600 with the exact message" % (tag, m), r)
        r = s.request("initialize", None, omit_params=True)
        t.eq(err_code(r), -32602, "[%s] initialize without params: -32602" % tag)
        r = s.request("initialize", {})
        t.ok(err_code(r) == -32602 and err_msg(r) == "missing field `clientName`",
             "[%s] initialize without clientName: -32602 missing field" % tag, r)
        r = s.request("initialize", {"clientName": 7})
        t.eq(err_code(r), -32602, "[%s] initialize with a non-string clientName: -32602" % tag)
        r = s.request("initialize", {"clientName": "c", "resumeSessionId": "abc"})
        t.ok(err_code(r) == -32600 and err_msg(r) == "unknown session id abc",
             "[%s] resumeSessionId on stdio: -32600 unknown session id" % tag, r)
        r = s.request("initialize", {"clientName": "c"})
        t.ok("result" in r, "[%s] a failed initialize can be retried" % tag, r)
        for m, kind in cases:
            r = s.request(m, VALID.get(m))
            t.ok(err_code(r) == -32600 and err_msg(r) ==
                 "client must send initialized before using %s methods" % kind,
                 "[%s] %s before initialized: -32600 with the exact message" % (tag, m), r)
        r = s.request("initialize", {"clientName": "c"})
        t.ok(err_code(r) == -32600 and err_msg(r) == "initialize may only be sent once per connection",
             "[%s] second initialize (before initialized): -32600" % tag, r)
        s.notify("initialized", {"anything": [1, 2]})
        r = s.request("environment/status")
        t.eq(r.get("result"), {"status": "ready"}, "[%s] methods work after initialized" % tag)
        r = s.request("initialize", {"clientName": "c"})
        t.ok(err_code(r) == -32600 and err_msg(r) == "initialize may only be sent once per connection",
             "[%s] second initialize after initialized: -32600" % tag, r)
        r = s.request("no/such-method", {})
        t.ok(err_code(r) == -32601 and err_msg(r) ==
             "exec-server stub does not implement `no/such-method` yet",
             "[%s] unknown method: -32601 with the exact message" % tag, r)
        r = s.request("http/request", {})
        t.ok(err_code(r) == -32602 and err_msg(r) == "missing field `method`",
             "[%s] http/request is served (its params checked first): -32602" % tag, r)
        t.eq(s.stop(), 0, "[%s] server exits 0" % tag)
    finally:
        s.stop()


def envelope(tag):
    s = Server(tag)
    try:
        s.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"clientName": "c"}, "trace": {"traceparent": "00-x"}})
        r = s.read_response()
        t.ok(r.get("id") == 1 and "result" in r, "[%s] jsonrpc and trace members tolerated" % tag, r)
        s.send({"jsonrpc": "2.0", "method": "initialized"})
        ids = ["abc", "", "a\"b\\c\u00e9", 0, -5, 9223372036854775807, 12345678901]
        for i in ids:
            s.send({"id": i, "method": "environment/status", "jsonrpc": "2.0"})
        got = []
        for _ in ids:
            try:
                got.append(s.read_response())
            except Eof:
                break
        t.eq([g.get("id") for g in got], ids, "[%s] string and integer ids echoed, in order" % tag)
        t.ok(all(type(g.get("id")) is type(i) for g, i in zip(got, ids)),
             "[%s] id types preserved (string stays string)" % tag, got)
        t.ok(all(g.get("result") == {"status": "ready"} for g in got),
             "[%s] pipelined requests all answered" % tag, got)
        # Pipelining with mixed methods and errors: strict request order.
        batch = []
        for n in range(40):
            m = ("environment/status", "environment/info", "bogus/m", "process/read")[n % 4]
            p = {"processId": "nope"} if m == "process/read" else None
            batch.append((1000 + n, m))
            s.send({"id": 1000 + n, "method": m, "params": p})
        order = [s.read_response().get("id") for _ in batch]
        t.eq(order, [b[0] for b in batch], "[%s] 40 pipelined mixed requests answered in order" % tag)
        # Raw text of a big id is echoed exactly (no float conversion).
        s.send_raw('{"id":9007199254740993,"method":"environment/status"}\n')
        s.read_response()
        raw = s.lines[-1].decode()
        t.ok('"id":9007199254740993' in raw.replace(" ", ""),
             "[%s] integer id beyond 2^53 echoed digit for digit" % tag, raw)
        s.stop()
        bad = []
        for ln in s.lines:
            o = json.loads(ln)
            if "jsonrpc" in o:
                bad.append(ln)
        t.ok(not bad and s.lines, "[%s] no output line carries a jsonrpc member (%d lines)"
             % (tag, len(s.lines)), bad[:3])
        t.ok(all(ln.count(b"\n") == 0 and ln.startswith(b"{") for ln in s.lines),
             "[%s] one JSON object per output line" % tag)
    finally:
        s.stop()


def closers(tag):
    init = '{"id":1,"method":"initialize","params":{"clientName":"c"}}\n'
    closes(t, tag, ['{"method":"initialized","params":{}}\n'], "initialized before initialize")
    closes(t, tag, [init, '{"method":"initialized"}\n', '{"method":"bogus/notification"}\n'],
           "unknown notification after the handshake")
    closes(t, tag, [init, '{"method":"process/start","params":{}}\n'],
           "a known method sent as a notification before initialized")
    closes(t, tag, [init, '{"method":"initialized"}\n', '{"id":7,"result":{}}\n'],
           "a client response object")
    closes(t, tag, [init, '{"method":"initialized"}\n',
                    '{"id":7,"error":{"code":-32000,"message":"x"}}\n'], "a client error object")
    # Neither method, result nor error: the released binary (0.169.0) answers it
    # like unparsable JSON and keeps the connection.
    s = Server(tag)
    try:
        s.send_raw(init + '{"method":"initialized"}\n{"id":7}\n{"id":8,"method":"environment/status"}\n')
        got = {}
        for _ in range(3):
            try:
                m = s.read_response(5.0)
            except (Eof, Exception):
                break
            got[m["id"]] = m
        err = got.get(-1, {}).get("error", {})
        t.ok(err.get("code") == -32600 and "missing field `error`" in err.get("message", ""),
             "[%s] an object with neither method, result nor error: id -1, -32600" % tag, got)
        t.eq(got.get(8, {}).get("result"), {"status": "ready"},
             "[%s] ... and the connection keeps serving" % tag)
    finally:
        s.stop()
    # The close must not lose what came before: the initialize answer is sent.
    s = Server(tag)
    try:
        s.send_raw(init + '{"method":"initialized"}\n{"id":2,"method":"environment/status"}\n'
                   '{"method":"nope"}\n{"id":3,"method":"environment/status"}\n')
        s.expect_eof()
        ids = [m.get("id") for m in s.pending if "id" in m]
        t.eq(ids, [1, 2], "[%s] requests before a closing notification are answered, "
             "none after" % tag)
        t.eq(s.wait(WAIT), 0, "[%s] server exits 0 after closing" % tag)
    finally:
        s.stop()


with tempfile.TemporaryDirectory(prefix="cordon-serve-hs-") as tmp:
    for loop in LOOPS:
        t.guard("[%s] initialize shape" % loop, initialize_shape, loop, tmp)
        t.guard("[%s] state machine" % loop, state_machine, loop)
        t.guard("[%s] envelope" % loop, envelope, loop)
        t.guard("[%s] closing the connection" % loop, closers, loop)
t.done()
