#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: process/start, read, write, signal, terminate and the
# process notifications (exec-server-reference.md 2.3-2.9, 8.1-8.3), without
# a sandbox. TAP; the scenarios run under both event loops. Processes take
# their steps when the test opens a FIFO (Gate), and the test waits for the
# server's events (CORDON_TEST_EVENTS: a long poll waiting), not for sleeps.

import fcntl
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (DARWIN_LIKE, LOOPS, PROMPT, WAIT, Gate, Hooks, Server, Tap, b64,  # noqa: E402
                       cordon_usable, err_code, err_msg, fd_count, unb64, vm_rss_kb)

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

PATH = {"PATH": "/usr/bin:/bin"}


def start_ok(s, tag, pid, argv, desc=None, **kw):
    r = s.start(pid, argv, **kw)
    good = "result" in r and r["result"].get("processId") == pid
    if desc or not good:
        t.ok(good, "[%s] %s" % (tag, desc or "start %s" % pid), r)
    return r


def run(s, tag, pid, argv, timeout=None, **kw):
    start_ok(s, tag, pid, argv, **kw)
    return s.wait_closed(pid, timeout)


def basics(tag):
    s = Server(tag)
    try:
        s.handshake()
        r = start_ok(s, tag, "p1", ["sh", "-c", "echo out; echo err >&2"],
                     "start sh (minimal params: pipeStdin, arg0, envPolicy, sandbox omitted)")
        t.eq(r.get("result", {}).get("sandboxType"), "none", "[%s] sandboxType none" % tag)
        c = r.get("result", {}).get("cordon", {})
        t.ok(c.get("sandboxed") is False, "[%s] cordon.sandboxed false" % tag, c)
        res = s.wait_closed("p1")
        t.eq(res.stdout, b"out\n", "[%s] stdout chunk(s)" % tag)
        t.eq(res.stderr, b"err\n", "[%s] stderr kept apart" % tag)
        t.eq(res.pty, b"", "[%s] no pty stream in pipe mode" % tag)
        t.eq(res.exit_code, 0, "[%s] exit code 0" % tag)
        t.ok(res.sandbox_denied is False, "[%s] process/exited has sandboxDenied false" % tag,
             res.notes)
        seqs = res.seqs
        t.eq(sorted(seqs), list(range(1, len(seqs) + 1)),
             "[%s] seqs are 1..N without gaps across output, exit, close" % tag)
        t.ok(res.closed_seq == max(seqs) and res.notes[-1]["method"] == "process/closed",
             "[%s] process/closed is last with the highest seq" % tag, res.notes)
        outs = [n["params"]["seq"] for n in res.notes if n["method"] == "process/output"]
        t.ok(outs and min(outs) == 1 and res.exited_seq > max(outs),
             "[%s] output from seq 1, exit after the output here" % tag, res.notes)
        t.ok(all(set(n["params"]) == {"processId", "seq", "stream", "chunk"}
                 for n in res.notes if n["method"] == "process/output"),
             "[%s] process/output params are {processId, seq, stream, chunk}" % tag)
        ex = [n["params"] for n in res.notes if n["method"] == "process/exited"]
        t.ok(len(ex) == 1 and set(ex[0]) == {"processId", "seq", "exitCode", "sandboxDenied"},
             "[%s] one process/exited {processId, seq, exitCode, sandboxDenied}" % tag, ex)
        cl = [n["params"] for n in res.notes if n["method"] == "process/closed"]
        t.ok(len(cl) == 1 and set(cl[0]) == {"processId", "seq"},
             "[%s] one process/closed {processId, seq}" % tag, cl)
        # process/read after closed: everything is retained.
        rd = s.call("process/read", {"processId": "p1"})
        t.eq(set(rd), {"chunks", "nextSeq", "exited", "exitCode", "closed", "failure",
                       "sandboxDenied"}, "[%s] process/read result keys" % tag)
        t.ok(rd["exited"] is True and rd["exitCode"] == 0 and rd["closed"] is True
             and rd["failure"] is None and rd["sandboxDenied"] is False,
             "[%s] read after close: exited, exitCode 0, closed, failure null" % tag, rd)
        t.eq(rd["nextSeq"], res.closed_seq + 1, "[%s] nextSeq = closed seq + 1" % tag)
        got = b"".join(unb64(c["chunk"]) for c in rd["chunks"] if c["stream"] == "stdout")
        t.eq(got, b"out\n", "[%s] read replays the stdout chunks" % tag)
        t.eq([c["seq"] for c in rd["chunks"]], sorted(outs), "[%s] read chunk seqs = output seqs"
             % tag)
        rd = s.call("process/read", {"processId": "p1", "afterSeq": rd["nextSeq"] - 1})
        t.eq(rd["chunks"], [], "[%s] afterSeq past the end: no chunks" % tag)
        rd = s.call("process/read", {"processId": "p1", "afterSeq": None, "maxBytes": None,
                                     "waitMs": None})
        t.eq(len(rd["chunks"]), len(outs), "[%s] null afterSeq/maxBytes/waitMs = defaults" % tag)

        # Exit codes.
        for pid, argv, code in (("e0", ["true"], 0), ("e3", ["sh", "-c", "exit 3"], 3),
                                ("e127", ["sh", "-c", "no-such-command-cordon"], 127),
                                ("e143", ["sh", "-c", "kill -TERM $$"], 143),
                                ("e139", ["sh", "-c", "kill -SEGV $$"], 139)):
            res = run(s, tag, pid, argv)
            t.eq(res.exit_code, code, "[%s] exit code %d (%s)" % (tag, code, " ".join(argv)))
        r = s.start("enoent", ["/nonexistent/cordon-no-such-program"])
        if "error" in r:
            t.eq(err_code(r), -32603, "[%s] a missing program: -32603 spawn failure" % tag)
        else:
            res = s.wait_closed("enoent")
            t.eq(res.exit_code, 127, "[%s] a missing program: exit 127" % tag)

        # Terminate and interrupt.
        start_ok(s, tag, "k", ["sleep", "100"])
        r = s.call("process/terminate", {"processId": "k"})
        t.eq(r, {"running": True}, "[%s] terminate a running process: running true" % tag)
        res = s.wait_closed("k")
        t.eq(res.exit_code, 137, "[%s] terminated: exit code 137" % tag)
        r = s.call("process/terminate", {"processId": "k"})
        t.eq(r, {"running": False}, "[%s] terminate again: running false" % tag)
        r = s.call("process/terminate", {"processId": "nobody"})
        t.eq(r, {"running": False}, "[%s] terminate unknown: running false" % tag)
        start_ok(s, tag, "i", ["sleep", "100"])
        r = s.call("process/signal", {"processId": "i", "signal": "interrupt"})
        t.eq(r, {}, "[%s] signal interrupt: {}" % tag)
        res = s.wait_closed("i")
        t.eq(res.exit_code, 130, "[%s] interrupted: exit code 130 (SIGINT)" % tag)
        t.eq(s.call("process/signal", {"processId": "i", "signal": "interrupt"}), {},
             "[%s] signal an exited process: {}" % tag)
        t.eq(s.call("process/signal", {"processId": "nobody", "signal": "interrupt"}), {},
             "[%s] signal unknown: {}" % tag)
        # The group gets the signal: a shell's background child dies too.
        start_ok(s, tag, "grp", ["sh", "-c", "sleep 100 & echo started; sleep 100; wait"])
        s.wait_output("grp", b"started")
        s.call("process/terminate", {"processId": "grp"})
        res = s.wait_closed("grp")
        t.eq(res.exit_code, 137, "[%s] terminate kills the whole group (closed: pipes released)"
             % tag)

        # Errors.
        r = s.request("process/read", {"processId": "nobody"})
        t.ok(err_code(r) == -32600 and err_msg(r) == "unknown process id nobody",
             "[%s] read unknown: -32600 unknown process id" % tag, r)
        r = s.request("process/write", {"processId": "nobody", "chunk": "", "writeId": "1"})
        t.eq(r.get("result"), {"status": "unknownProcess"}, "[%s] write unknown: unknownProcess"
             % tag)
        r = s.start("x", [])
        t.ok(err_code(r) == -32602 and err_msg(r) == "argv must not be empty",
             "[%s] empty argv: -32602 argv must not be empty" % tag, r)
        r = s.request("process/start", {"processId": "x", "argv": ["true"], "cwd": "/tmp",
                                        "env": PATH, "tty": False})
        t.ok(err_code(r) == -32602, "[%s] native cwd path: -32602" % tag, r)
        r = s.start("x", ["true"], cwd="tmp")
        t.ok(err_code(r) == -32602, "[%s] relative cwd: -32602" % tag, r)
        r = s.start("x", ["true"], cwd="file:///C:/Users/dev")
        t.ok(err_code(r) == -32602 and err_msg(r).startswith(
            "cwd URI `file:///C:/Users/dev` is not valid on this exec-server host"),
            "[%s] Windows cwd URI: -32602 not valid on this host" % tag, r)
        r = s.start("x", ["true"], cwd="file://server/share/dir")
        t.eq(err_code(r), -32602, "[%s] UNC cwd URI: -32602" % tag)
        r = s.start("x", ["true"], cwd="file:///a%00b")
        t.ok("error" in r, "[%s] NUL in the cwd URI: refused" % tag, r)
        r = s.start("x", ["true"], cwd="http://example.com/tmp")
        t.eq(err_code(r), -32602, "[%s] non-file URI scheme: -32602" % tag)
        r = s.start("nocwd", ["true"], cwd="file:///nonexistent/cordon-dir")
        t.ok("error" in r or s.wait_closed("nocwd").exit_code != 0,
             "[%s] a missing cwd does not run the command" % tag, r)
        t.eq([n for n in s.notes_for("x") if n["method"] == "process/output"], [],
             "[%s] refused starts produced no output" % tag)
        start_ok(s, tag, "dup", ["sleep", "100"])
        r = s.start("dup", ["true"])
        t.ok(err_code(r) == -32600 and err_msg(r) == "process dup already exists",
             "[%s] duplicate processId: -32600 already exists" % tag, r)
        s.call("process/terminate", {"processId": "dup"})
        s.wait_closed("dup")
        r = s.start("dup", ["true"])
        t.ok(err_code(r) == -32600, "[%s] a closed id is still taken (kept ~30 s)" % tag, r)
        r = s.start("", ["true"])
        t.ok("result" in r or err_code(r) == -32602, "[%s] empty processId: handled" % tag, r)
        if "result" in r:
            s.wait_closed("")
        t.eq(s.stop(), 0, "[%s] server exits 0" % tag)
    finally:
        s.stop()


def stdin_and_pty(tag):
    s = Server(tag)
    try:
        s.handshake()
        start_ok(s, tag, "nostdin", ["sleep", "100"])
        r = s.request("process/write", {"processId": "nostdin", "chunk": b64("x"), "writeId": "1"})
        t.eq(r.get("result"), {"status": "stdinClosed"},
             "[%s] pipeStdin omitted: write gives stdinClosed" % tag)
        s.call("process/terminate", {"processId": "nostdin"})
        res = run(s, tag, "devnull", ["sh", "-c", "cat; echo rc=$?"])
        t.eq(res.stdout, b"rc=0\n", "[%s] without pipeStdin stdin is /dev/null (EOF at once)"
             % tag)
        # Dedup: head -n 2 prints exactly what reached it.
        start_ok(s, tag, "w", ["head", "-n", "2"], pipeStdin=True)
        for wid, data in (("1", "a\n"), ("1", "a\n"), ("2", "b\n")):
            r = s.request("process/write", {"processId": "w", "chunk": b64(data), "writeId": wid})
            t.eq(r.get("result"), {"status": "accepted"}, "[%s] write id %s accepted" % (tag, wid))
        res = s.wait_closed("w")
        t.eq(res.stdout, b"a\nb\n", "[%s] a repeated writeId is written once" % tag)
        r = s.request("process/write", {"processId": "w", "chunk": b64("z"), "writeId": "3"})
        # The released binary accepts it (its writer outlives the pipe) and drops it.
        t.eq(r.get("result"), {"status": "accepted"},
             "[%s] write after the process closed: accepted and dropped, as in Codex" % tag)
        start_ok(s, tag, "cat", ["cat"], pipeStdin=True)
        r = s.request("process/write", {"processId": "cat", "chunk": b64("x"), "writeId": ""})
        t.ok(err_code(r) == -32602 and err_msg(r) == "writeId must not be empty",
             "[%s] empty writeId: -32602 writeId must not be empty" % tag, r)
        for bad in ("%%%%", "YWJj\n", "YWJ", "Y W=", "YQ", "YWJjZA=x"):
            r = s.request("process/write", {"processId": "cat", "chunk": bad, "writeId": "b"})
            t.eq(err_code(r), -32602, "[%s] invalid base64 %r: -32602" % (tag, bad))
        r = s.request("process/write", {"processId": "cat", "chunk": b64("hello\n"),
                                        "writeId": "ok"})
        t.eq(r.get("result"), {"status": "accepted"}, "[%s] write to cat accepted" % tag)
        r = s.request("process/write", {"processId": "cat", "chunk": "", "writeId": "empty"})
        t.eq(r.get("result"), {"status": "accepted"}, "[%s] an empty chunk is accepted" % tag)
        rd = s.call("process/read", {"processId": "cat", "waitMs": 3000})
        got = b"".join(unb64(c["chunk"]) for c in rd["chunks"])
        t.eq(got, b"hello\n", "[%s] cat echoes the write (read with waitMs)" % tag)
        s.call("process/terminate", {"processId": "cat"})
        s.wait_closed("cat")

        # PTY.
        res = run(s, tag, "tty", ["tty"], tty=True)
        streams = {n["params"]["stream"] for n in res.notes if n["method"] == "process/output"}
        t.eq(streams, {"pty"}, "[%s] tty mode: a single pty stream" % tag)
        t.ok(re.match(rb"^/dev/pts/\d+\r?\n$", res.pty), "[%s] tty prints /dev/pts/N" % tag,
             res.pty)
        t.eq(res.exit_code, 0, "[%s] tty exits 0" % tag)
        res = run(s, tag, "size", ["stty", "size"], tty=True)
        t.eq(res.pty.strip(), b"24 80", "[%s] the PTY is 24x80" % tag)
        res = run(s, tag, "sess", ["sh", "-c", "echo $$ $(cut -d' ' -f5,6 /proc/$$/stat)"],
                  tty=True)
        f = res.pty.split()
        t.ok(len(f) == 3 and f[0] == f[1] == f[2], "[%s] tty child leads its session" % tag,
             res.pty)
        start_ok(s, tag, "ttyin", ["sh", "-c", "read x; echo got:$x"], tty=True)
        r = s.request("process/write", {"processId": "ttyin", "chunk": b64("abc\n"),
                                        "writeId": "1"})
        t.eq(r.get("result"), {"status": "accepted"}, "[%s] write to a tty process" % tag)
        res = s.wait_closed("ttyin")
        t.ok(b"got:abc" in res.pty, "[%s] stdin writes reach the tty program" % tag, res.pty)
        start_ok(s, tag, "ttyint", ["sh", "-c", "trap 'echo caught; exit 7' INT; echo ready; "
                                    "while :; do sleep 0.05; done"], tty=True)
        s.wait_output("ttyint", b"ready")  # the trap is set
        s.call("process/signal", {"processId": "ttyint", "signal": "interrupt"})
        res = s.wait_closed("ttyint")
        t.ok(b"caught" in res.pty and res.exit_code == 7,
             "[%s] interrupt reaches a tty process group" % tag, (res.pty, res.exit_code))
        start_ok(s, tag, "ttyk", ["sleep", "100"], tty=True)
        s.call("process/terminate", {"processId": "ttyk"})
        res = s.wait_closed("ttyk")
        t.ok(res.exit_code is not None and res.exit_code != 0,
             "[%s] terminate a tty process: non-zero exit (%s)" % (tag, res.exit_code))
    finally:
        s.stop()


def env_and_arg0(tag):
    server_env = dict(os.environ)
    server_env.update({"PLAIN": "1", "MY_TOKEN": "t", "DB_SECRET": "s", "APIKEY": "k",
                       "MixedCase_Token_x": "m", "LANG": "C.UTF-8", "HOME": "/root-home",
                       "PATH": "/usr/bin:/bin"})
    s = Server(tag, env=server_env)

    def env_of(pid, env, policy=None):
        kw = {} if policy is None else {"envPolicy": policy}
        res = run(s, tag, pid, ["/usr/bin/env"], env=env, **kw)
        d = {}
        for line in res.stdout.decode().splitlines():
            k, _, v = line.partition("=")
            d[k] = v
        return d

    def pol(inherit, **kw):
        p = {"inherit": inherit, "ignoreDefaultExcludes": False, "exclude": [], "set": {},
             "includeOnly": []}
        p.update(kw)
        return p

    try:
        s.handshake()
        t.eq(env_of("env1", {"A": "1", "B": "two words", "C": ""}), {"A": "1", "B": "two words",
                                                                     "C": ""},
             "[%s] envPolicy omitted: the env is exactly `env`" % tag)
        t.eq(env_of("env2", {}), {}, "[%s] env {} gives an empty environment" % tag)
        t.eq(env_of("env3", {"X": "1"}, None), {"X": "1"}, "[%s] envPolicy null = exact env" % tag)
        d = env_of("all", {"O": "v"}, pol("all"))
        t.ok(d.get("PLAIN") == "1" and d.get("O") == "v" and d.get("PATH") == "/usr/bin:/bin",
             "[%s] inherit all: the server's env plus the overlay" % tag, d)
        t.ok(not ({"MY_TOKEN", "DB_SECRET", "APIKEY", "MixedCase_Token_x"} & set(d)),
             "[%s] default excludes drop *KEY*, *SECRET*, *TOKEN* (any case)" % tag, sorted(d))
        d = env_of("ign", {}, pol("all", ignoreDefaultExcludes=True))
        t.ok({"MY_TOKEN", "DB_SECRET", "APIKEY"} <= set(d),
             "[%s] ignoreDefaultExcludes keeps them" % tag, sorted(d))
        d = env_of("core", {}, pol("core"))
        t.ok(d.get("PATH") == "/usr/bin:/bin" and d.get("HOME") == "/root-home"
             and d.get("LANG") == "C.UTF-8" and "PLAIN" not in d,
             "[%s] inherit core keeps PATH/HOME/LANG, drops the rest" % tag, d)
        t.ok(set(d) <= {"PATH", "SHELL", "TMPDIR", "TEMP", "TMP", "HOME", "LANG", "LC_ALL",
                        "LC_CTYPE", "LOGNAME", "USER"},
             "[%s] inherit core: only the core names" % tag, sorted(d))
        d = env_of("none", {"O": "1"}, pol("none", set={"S": "2"}))
        t.eq(d, {"O": "1", "S": "2"}, "[%s] inherit none: only set + env" % tag)
        d = env_of("excl", {}, pol("all", exclude=["pla*", "LAN?"]))
        t.ok("PLAIN" not in d and "LANG" not in d and "PATH" in d,
             "[%s] exclude patterns (wildcards, case-insensitive)" % tag, sorted(d))
        d = env_of("inc", {"PLAIN": "over"}, pol("all", set={"S": "1"}, includeOnly=["PATH", "s"]))
        t.eq(d, {"PATH": "/usr/bin:/bin", "S": "1", "PLAIN": "over"},
             "[%s] includeOnly after set; env overlays last" % tag)
        d = env_of("setx", {}, pol("none", set={"MY_TOKEN": "kept"}))
        t.eq(d, {"MY_TOKEN": "kept"}, "[%s] set is applied after the default excludes" % tag)
        res = run(s, tag, "path", ["env"], env={"PATH": "/nonexistent:/usr/bin"})
        t.eq(res.exit_code, 0, "[%s] a bare program name is looked up in the child's PATH" % tag)
        res = run(s, tag, "a0", ["/bin/sh", "-c", "tr '\\000' '\\n' < /proc/$$/cmdline | head -n 1"],
                  arg0="custom-arg0")
        t.eq(res.stdout, b"custom-arg0\n", "[%s] arg0 replaces argv[0] (unsandboxed)" % tag)
        res = run(s, tag, "a0n", ["/bin/sh", "-c", "tr '\\000' '\\n' < /proc/$$/cmdline | head -n 1"],
                  arg0=None)
        t.eq(res.stdout, b"/bin/sh\n", "[%s] arg0 null keeps argv[0]" % tag)
        res = run(s, tag, "cwd", ["pwd"], cwd="/usr/share")
        t.eq(res.stdout, b"/usr/share\n", "[%s] the process runs in cwd" % tag)
        with tempfile.TemporaryDirectory(prefix="cordon serve %") as d:
            res = run(s, tag, "cwd2", ["pwd"], cwd=d)
            t.eq(res.stdout, d.encode() + b"\n", "[%s] percent-encoded cwd URI decoded" % tag)
        res = run(s, tag, "fds", ["sh", "-c", "ls /proc/$$/fd; true"])
        fds = sorted(int(x) for x in res.stdout.split())
        t.eq(fds, [0, 1, 2], "[%s] the child inherits no server fds beyond stdio" % tag)
    finally:
        s.stop()


def reads(tag):
    hooks = Hooks()
    s = Server(tag, extra_env=hooks.env)
    d = tempfile.mkdtemp(prefix="cordon-reads-")
    try:
        s.handshake()
        # A pipe the server never filled keeps its size: pipe buffers count against
        # the user's pipe-user-pages-soft.
        t.eq(fcntl.fcntl(s.p.stdout.fileno(), getattr(fcntl, "F_GETPIPE_SZ", 1032)), 64 << 10,
             "[%s] an idle server leaves its stdout pipe at 64 KiB" % tag)
        # The process prints once the test lets it, after the poll waits.
        g = Gate(d, "lp")
        start_ok(s, tag, "lp", ["sh", "-c", "read x < %s; echo hi" % g.path])
        i = s.send_request("process/read", {"processId": "lp", "afterSeq": 0,
                                            "waitMs": int(WAIT * 1000)})
        hooks.wait("read-wait", id=i)
        g.open()
        rd = s.wait_id(i)
        rd = rd.get("result", {}) if rd else {}
        got = b"".join(unb64(c["chunk"]) for c in rd.get("chunks", []))
        t.ok(got == b"hi\n", "[%s] a long-poll read waits, and wakes on output" % tag, rd)
        s.wait_closed("lp")
        start_ok(s, tag, "quiet", ["sleep", "100"])
        t0 = time.monotonic()
        rd = s.call("process/read", {"processId": "quiet", "waitMs": 300})
        dt = time.monotonic() - t0
        t.ok(rd["chunks"] == [] and rd["exited"] is False and rd["closed"] is False and
             rd["exitCode"] is None and 0.3 <= dt < 0.3 + PROMPT,
             "[%s] waitMs expiry returns empty (%.2f s)" % (tag, dt), rd)
        t.eq(rd["nextSeq"], 1, "[%s] nextSeq 1 before any event" % tag)
        t0 = time.monotonic()
        rd = s.call("process/read", {"processId": "quiet"})
        dt = time.monotonic() - t0
        t.ok(dt < PROMPT, "[%s] waitMs omitted: returns at once (%.2f s)" % (tag, dt))
        # A long poll blocks later requests on the connection: stdio has one, so
        # the read returns at its deadline, then 502 runs (a state change it makes
        # cannot wake the poll it waits behind).
        t0 = time.monotonic()
        s.send({"id": 501, "method": "process/read", "params": {"processId": "quiet",
                                                                "waitMs": 1500}})
        s.send({"id": 502, "method": "process/terminate", "params": {"processId": "quiet"}})
        r1 = s.read_response()
        dt = time.monotonic() - t0
        r2 = s.read_response()
        t.ok(r1.get("id") == 501 and r1.get("result", {}).get("chunks") == [] and dt >= 1.5,
             "[%s] nothing is answered while the long poll waits: it ends at its deadline "
             "(%.2f s)" % (tag, dt), r1)
        t.ok(r2.get("id") == 502 and r2.get("result") == {"running": True},
             "[%s] the request after a long poll is answered after it, in order" % tag, (r1, r2))
        s.wait_closed("quiet")
        g = Gate(d, "lpx")
        start_ok(s, tag, "lpx", ["sh", "-c", "read x < %s" % g.path])
        i = s.send_request("process/read", {"processId": "lpx", "waitMs": int(WAIT * 1000)})
        hooks.wait("read-wait", id=i)
        g.open()
        rd = s.wait_id(i)
        rd = rd.get("result", {}) if rd else {}
        t.ok(rd.get("exited") is True and rd.get("exitCode") == 0,
             "[%s] a long poll wakes on exit without output" % tag, rd)
        s.wait_closed("lpx")
        # Exited-but-not-closed wakes the poll: a grandchild holds stdout open.
        g = Gate(d, "held")
        start_ok(s, tag, "held", ["sh", "-c", "(read x < %s; echo late) & echo early" % g.path])
        rd = s.call("process/read", {"processId": "held", "waitMs": int(WAIT * 1000)})
        rd2 = s.call("process/read", {"processId": "held", "afterSeq": rd["nextSeq"] - 1,
                                      "waitMs": int(WAIT * 1000)})
        t.ok(rd2["exited"] is True and rd2["exitCode"] == 0 and rd2["closed"] is False,
             "[%s] exited while a grandchild holds the pipe: exited, not closed" % tag, rd2)
        g.open()
        res = s.wait_closed("held")
        t.ok(b"early\n" in res.stdout and b"late\n" in res.stdout,
             "[%s] late output after exit is still relayed" % tag, res.stdout)
        outs = [n["params"]["seq"] for n in res.notes if n["method"] == "process/output"
                if unb64(n["params"]["chunk"]) == b"late\n"]
        t.ok(outs and outs[0] > res.exited_seq and res.closed_seq > outs[0],
             "[%s] late output seq > exit seq; close last" % tag, res.notes)

        # maxBytes: three separate 4-byte chunks (each printed once the last arrived).
        g1, g2 = Gate(d, "mb1"), Gate(d, "mb2")
        start_ok(s, tag, "mb", ["sh", "-c", "printf aaaa; read x < %s; printf bbbb; "
                                "read x < %s; printf cccc" % (g1.path, g2.path)])
        s.wait_output("mb", b"aaaa")
        g1.open()
        s.wait_output("mb", b"aaaabbbb")
        g2.open()
        res = s.wait_closed("mb")
        outs = [n["params"] for n in res.notes if n["method"] == "process/output"]
        t.eq(len(outs), 3, "[%s] three writes far apart: three chunks" % tag)
        if len(outs) == 3:
            rd = s.call("process/read", {"processId": "mb"})
            t.eq(len(rd["chunks"]), 3, "[%s] read without maxBytes: all 3 chunks" % tag)
            t.eq(rd["nextSeq"], 6, "[%s] nextSeq counts exit and close (3 out + 2 = 6)" % tag)
            rd = s.call("process/read", {"processId": "mb", "maxBytes": 1})
            t.ok(len(rd["chunks"]) == 1 and rd["nextSeq"] == rd["chunks"][0]["seq"] + 1,
                 "[%s] maxBytes 1: one chunk anyway, nextSeq = its seq + 1" % tag, rd)
            rd = s.call("process/read", {"processId": "mb", "maxBytes": 0})
            t.eq(len(rd["chunks"]), 1, "[%s] maxBytes 0: still one chunk" % tag)
            rd = s.call("process/read", {"processId": "mb", "maxBytes": 8})
            t.ok(len(rd["chunks"]) == 2 and rd["nextSeq"] == 3,
                 "[%s] maxBytes 8: two 4-byte chunks, nextSeq 3" % tag, rd)
            rd = s.call("process/read", {"processId": "mb", "maxBytes": 7})
            t.eq(len(rd["chunks"]), 1, "[%s] maxBytes 7: stops before the chunk that would "
                 "exceed it" % tag)
            rd = s.call("process/read", {"processId": "mb", "afterSeq": 2, "maxBytes": 100})
            t.ok([c["seq"] for c in rd["chunks"]] == [3] and rd["nextSeq"] == 4,
                 "[%s] afterSeq 2, maxBytes 100: chunk 3, nextSeq 4" % tag, rd)
            rd = s.call("process/read", {"processId": "mb", "afterSeq": 3, "maxBytes": 100})
            t.ok(rd["chunks"] == [] and rd["nextSeq"] == 6,
                 "[%s] no chunk with maxBytes: nextSeq is the process's next seq" % tag, rd)

        # 5 MB completeness.
        with tempfile.NamedTemporaryFile(prefix="cordon-serve-") as f:
            data = os.urandom(5 * 1000 * 1000)
            f.write(data)
            f.flush()
            res = run(s, tag, "big", ["cat", f.name])
            t.eq(hashlib.sha256(res.stdout).hexdigest(), hashlib.sha256(data).hexdigest(),
                 "[%s] 5 MB of output relayed complete and in order (%d bytes)"
                 % (tag, len(res.stdout)))
            sizes = [len(unb64(n["params"]["chunk"])) for n in res.notes
                     if n["method"] == "process/output"]
            t.ok(max(sizes) <= 8192, "[%s] chunks are at most 8192 bytes" % tag, max(sizes))
            if DARWIN_LIKE:
                t.skip("[%s] a relaying server grows its stdout pipe to 1 MiB" % tag,
                       "macOS has no F_SETPIPE_SZ")
            else:
                t.eq(fcntl.fcntl(s.p.stdout.fileno(), getattr(fcntl, "F_GETPIPE_SZ", 1032)),
                     1 << 20, "[%s] a relaying server grows its stdout pipe to 1 MiB" % tag)
            # Read 64 KiB at a time, cut like the reference's 8192-byte reads: a
            # short chunk only where the pipe ran dry, never two in a row.
            full = sum(1 for n in sizes if n == 8192)
            t.ok(full * 8192 >= len(data) // 2,
                 "[%s] bulk output comes in full 8192-byte chunks (%d of %d)"
                 % (tag, full, len(sizes)))
            rd = s.call("process/read", {"processId": "big"})
            kept = sum(len(unb64(c["chunk"])) for c in rd["chunks"])
            t.ok(0 < kept <= 1024 * 1024 and data.endswith(
                b"".join(unb64(c["chunk"]) for c in rd["chunks"])),
                "[%s] retention keeps the last <= 1 MiB (%d bytes)" % (tag, kept))
            t.eq(rd["nextSeq"], res.closed_seq + 1, "[%s] nextSeq after eviction" % tag)
    finally:
        s.stop()
        hooks.close()
        shutil.rmtree(d, ignore_errors=True)
    # A closed process is removed after --retention (30 s by default; shortened here).
    s = Server(tag, args=["--retention", "300ms"])
    try:
        s.handshake()
        run(s, tag, "short", ["true"])
        first = s.request("process/read", {"processId": "short"})
        gone = None
        deadline = time.monotonic() + WAIT  # a bound only: removal comes after 300 ms
        while gone is None and time.monotonic() < deadline:
            r = s.request("process/read", {"processId": "short"})
            if "error" in r:
                gone = r
            else:
                time.sleep(0.05)
        t.ok("result" in first and gone is not None and
             "unknown process id" in err_msg(gone),
             "[%s] a closed process is readable, then removed after --retention" % tag,
             "first %r, then %r" % (first, gone))
    finally:
        s.stop()


def concurrent(tag):
    # 20 processes writing 200 KB each to stdout and stderr at the same time.
    s = Server(tag)
    try:
        s.handshake()
        n = 20
        script = ("i=0; while [ $i -lt 40 ]; do head -c 5000 /dev/zero | tr '\\0' %s; "
                  "head -c 5000 /dev/zero | tr '\\0' %s >&2; i=$((i+1)); done")
        for i in range(n):
            a, b = chr(ord("a") + i), chr(ord("A") + i)
            start_ok(s, tag, "cc%d" % i, ["sh", "-c", script % (a, b)])
        bad = []
        for i in range(n):
            res = s.wait_closed("cc%d" % i)
            a, b = chr(ord("a") + i).encode(), chr(ord("A") + i).encode()
            if res.stdout != a * 200000 or res.stderr != b * 200000 or res.exit_code != 0:
                bad.append((i, len(res.stdout), len(res.stderr), res.exit_code))
            seqs = sorted(res.seqs)
            if seqs != list(range(1, len(seqs) + 1)):
                bad.append((i, "seqs", seqs[:5]))
        t.ok(not bad, "[%s] %d concurrent processes: every stream complete and apart" % (tag, n),
             bad)
    finally:
        s.stop()


def backpressure(tag):
    # A client that stops reading must not make the server buffer without bound.
    s = Server(tag)
    try:
        s.handshake()
        start_ok(s, tag, "flood", ["yes"])
        time.sleep(2.0)  # the flood fills what it may: the bound holds whenever it is read
        rss = vm_rss_kb(s.server_pid)
        t.ok(rss < 128 * 1024, "[%s] flood with a client that does not read: RSS bounded "
             "(%d kB after 2 s)" % (tag, rss))
        n0 = len(s.notes_for("flood"))
        deadline = time.monotonic() + WAIT
        while len(s.notes_for("flood")) <= n0 and time.monotonic() < deadline:
            s._pump(deadline)
        t.ok(len(s.notes_for("flood")) > n0, "[%s] output resumes once the client reads" % tag)
        r = s.call("process/terminate", {"processId": "flood"})
        t.eq(r, {"running": True}, "[%s] the flooding process is still running" % tag)
        res = s.wait_closed("flood")
        t.eq(res.exit_code, 137, "[%s] and it is terminated" % tag)
        t.ok(set(res.stdout[:100000]) <= {ord("y"), ord("\n")}, "[%s] the output is intact" % tag)
    finally:
        s.stop()


def bad_params(tag):
    base = {
        "process/start": {"processId": "bp", "argv": ["true"], "cwd": "file:///tmp",
                          "env": {}, "tty": False},
        "process/read": {"processId": "bp"},
        "process/write": {"processId": "bp", "chunk": "", "writeId": "1"},
        "process/signal": {"processId": "bp", "signal": "interrupt"},
        "process/terminate": {"processId": "bp"},
    }
    pol = {"inherit": "all", "ignoreDefaultExcludes": False, "exclude": [], "set": {},
           "includeOnly": []}
    sb = {"permissions": {"type": "disabled"}, "windowsSandboxLevel": "disabled"}
    table = [
        ("process/start", "processId", 1), ("process/start", "processId", None),
        ("process/start", "argv", "true"), ("process/start", "argv", [1]),
        ("process/start", "argv", None), ("process/start", "cwd", 5),
        ("process/start", "cwd", None), ("process/start", "env", []),
        ("process/start", "env", {"A": 1}), ("process/start", "env", None),
        ("process/start", "tty", "false"), ("process/start", "tty", None),
        ("process/start", "tty", 0), ("process/start", "pipeStdin", "yes"),
        ("process/start", "arg0", 5), ("process/start", "envPolicy", "all"),
        ("process/start", "envPolicy", dict(pol, inherit="most")),
        ("process/start", "envPolicy", dict(pol, exclude="X")),
        ("process/start", "envPolicy", dict(pol, set={"A": 1})),
        ("process/start", "envPolicy", dict(pol, includeOnly=[3])),
        ("process/start", "envPolicy", dict(pol, ignoreDefaultExcludes="no")),
        ("process/start", "envPolicy", {k: v for k, v in pol.items() if k != "set"}),
        ("process/start", "sandbox", "none"), ("process/start", "sandbox", []),
        ("process/start", "sandbox", dict(sb, windowsSandboxLevel=1)),
        ("process/start", "sandbox", dict(sb, workspaceRoots="file:///tmp")),
        ("process/start", "sandbox", dict(sb, useLegacyLandlock="x")),
        ("process/start", "enforceManagedNetwork", "true"),
        ("process/start", "managedNetwork", "x"),
        ("process/start", "managedNetwork", {"loopbackPorts": ["80"]}),
        ("process/start", "managedNetwork", {"loopbackPorts": [70000]}),
        ("process/start", "networkProxy", {}),
        ("process/read", "processId", 5), ("process/read", "processId", None),
        ("process/read", "afterSeq", "1"), ("process/read", "afterSeq", -1),
        ("process/read", "afterSeq", 1.5), ("process/read", "maxBytes", "10"),
        ("process/read", "maxBytes", -1), ("process/read", "waitMs", "10"),
        ("process/read", "waitMs", -5),
        ("process/write", "processId", 5), ("process/write", "chunk", 5),
        ("process/write", "chunk", None), ("process/write", "writeId", 1),
        ("process/write", "writeId", None),
        ("process/signal", "processId", 5), ("process/signal", "signal", 2),
        ("process/signal", "signal", "kill"), ("process/signal", "signal", None),
        ("process/terminate", "processId", 5), ("process/terminate", "processId", None),
    ]
    s = Server(tag)
    try:
        s.handshake()
        failures = []
        unnamed = []
        n = 0
        for method, field, value in table:
            p = dict(base[method])
            if value is None:
                p.pop(field, None)
                what = "missing %s" % field
            else:
                p[field] = value
                what = "%s=%s" % (field, value)
            if field != "processId":
                p["processId"] = "bp%d" % n
            n += 1
            r = s.request(method, p)
            if err_code(r) != -32602:
                failures.append((method, what, r))
            elif value is None and "`%s`" % field not in err_msg(r):
                # A missing member is named; a wrong type has the released
                # binary's message, which names no field (serve-parity-sweep.py).
                unnamed.append((method, what, err_msg(r)))
        t.ok(not failures, "[%s] %d wrong-type/missing params: every one -32602" % (tag, len(table)),
             "\n".join(repr(f) for f in failures))
        t.ok(not unnamed, "[%s] each missing member is named" % tag,
             "\n".join(repr(f) for f in unnamed))
        failures = []
        for method in base:
            for params in ([], "x", 5, None):
                r = s.request(method, params)
                if err_code(r) != -32602:
                    failures.append((method, params, r))
        t.ok(not failures, "[%s] params that are not an object: -32602 for every method" % tag,
             "\n".join(repr(f) for f in failures))
        r = s.request("process/start", dict(base["process/start"], networkProxy={"proxy": {}}))
        t.ok(err_code(r) == -32602 and err_msg(r) == "missing field `enabled`",
             "[%s] networkProxy without its fields: -32602 as the released binary says "
             "(serve-netproxy.py has the rest)" % tag, r)
        r = s.request("process/start", dict(base["process/start"], processId="extra",
                                            unknownField=1, managedNetwork={"loopbackPorts": [1],
                                                                            "allowLocalBinding": True}))
        t.ok("result" in r, "[%s] unknown fields ignored; managedNetwork accepted" % tag, r)
        if "result" in r:
            s.wait_closed("extra")
        t.eq(s.request("environment/status").get("result"), {"status": "ready"},
             "[%s] the server keeps serving after the bad params" % tag)
        spawned = [n for n in s.notes if n["params"]["processId"].startswith("bp")]
        t.eq(spawned, [], "[%s] no process was started by a refused request" % tag)
    finally:
        s.stop()


def limits(tag):
    s = Server(tag, args=["--max-processes", "3"])
    try:
        s.handshake()
        for i in range(3):
            start_ok(s, tag, "c%d" % i, ["sleep", "100"])
        r = s.start("c3", ["sleep", "100"])
        t.ok(err_code(r) == -32600 and err_msg(r) ==
             "too many processes (limit 3); wait for some to close or raise --max-processes",
             "[%s] --max-processes 3: the 4th start is refused with -32600" % tag, r)
        for i in range(3):
            s.call("process/terminate", {"processId": "c%d" % i})
            s.wait_closed("c%d" % i)
        r = s.start("c4", ["true"])
        t.eq(err_code(r), -32600, "[%s] closed entries still count until they are removed "
             "(30 s)" % tag)
    finally:
        s.stop()

    n = 1000
    s = Server(tag, args=["--max-processes", str(n + 50)])
    try:
        s.handshake()
        for i in range(20):
            run(s, tag, "warm%d" % i, ["true"])
        fd0, rss0 = fd_count(s.server_pid), vm_rss_kb(s.server_pid)
        t0 = time.monotonic()
        codes = set()
        for i in range(n):
            codes.add(run(s, tag, "many%d" % i, ["true"]).exit_code)
        dt = time.monotonic() - t0
        fd1, rss1 = fd_count(s.server_pid), vm_rss_kb(s.server_pid)
        t.eq(codes, {0}, "[%s] %d short processes in a row all exit 0 (%.2f s, %.2f ms each)"
             % (tag, n, dt, dt * 1000 / n))
        t.eq(fd1, fd0, "[%s] no fd growth over %d processes (%d fds)" % (tag, n, fd0))
        t.ok(rss1 - rss0 < 16 * 1024, "[%s] RSS bounded: %d kB -> %d kB" % (tag, rss0, rss1))
    finally:
        s.stop()


for loop in LOOPS:
    t.guard("[%s] basics" % loop, basics, loop)
    t.guard("[%s] stdin and pty" % loop, stdin_and_pty, loop)
    t.guard("[%s] env and arg0" % loop, env_and_arg0, loop)
    t.guard("[%s] reads" % loop, reads, loop)
    t.guard("[%s] bad params" % loop, bad_params, loop)
    t.guard("[%s] concurrent" % loop, concurrent, loop)
    t.guard("[%s] backpressure" % loop, backpressure, loop)
    t.guard("[%s] limits" % loop, limits, loop)
t.done()
