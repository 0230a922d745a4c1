#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: the sandbox intent of process/start (exec-server-reference.md
# 3.1-3.5, 8.4 and Appendix A). Writes inside the workspace work, writes
# outside and the network are denied, :workspace_roots binds only to
# workspaceRoots, and intent that cannot be enforced is refused before
# anything is spawned. TAP; both event loops.

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (HELPERS, LOOPS, ROOT_READ, WAIT, Gate, Server, Tap,  # noqa: E402
                       children_of, cordon_usable, err_code, err_msg, kill_quietly, path_entry,
                       pid_alive, pids_by_cmdline, profile, special, uri, workspace_write)

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

TRY = os.path.join(HELPERS, "try-syscall")
EPERM = 1


WS_ONLY = profile([special("root", "read"), special("project_roots", "write"),
                   special("project_roots", "read", ".git"),
                   special("project_roots", "read", ".codex"),
                   special("project_roots", "read", ".agents")])


def sandbox(perms, **kw):
    sb = {"permissions": perms, "windowsSandboxLevel": "disabled"}
    sb.update(kw)
    return sb


def appendix_a(tag):
    s = Server(tag)
    try:
        s.handshake()
        s.send_raw('{"id":10,"method":"process/start","params":{"processId":"proc-0",'
                   '"argv":["echo","hello"],"cwd":"file:///tmp","env":{"PATH":"/usr/bin:/bin"},'
                   '"tty":false,"pipeStdin":false,"arg0":null,"sandbox":{"permissions":'
                   '{"type":"managed","file_system":{"type":"restricted","entries":[{"path":'
                   '{"type":"special","value":{"kind":"root"}},"access":"read"}]},"network":'
                   '"restricted"},"windowsSandboxLevel":"disabled"}}}\n')
        r = s.read_response()
        res = r.get("result", {})
        t.ok(r.get("id") == 10 and res.get("processId") == "proc-0" and
             res.get("sandboxType") == "linuxSeccomp",
             "[%s] Appendix A: sandboxType linuxSeccomp" % tag, r)
        c = res.get("cordon", {})
        t.ok(c.get("sandboxed") is True and c.get("seccomp") is True and
             c.get("network") == "restricted" and isinstance(c.get("landlockAbi"), int) and
             c.get("landlockAbi") >= 1 and isinstance(c.get("landlockRules"), int) and
             isinstance(c.get("namespaces"), list) and isinstance(c.get("mounts"), int) and
             isinstance(c.get("degraded"), list),
             "[%s] the cordon object describes the sandbox" % tag, c)
        out = s.wait_closed("proc-0")
        t.eq(out.stdout, b"hello\n", "[%s] Appendix A: output hello" % tag)
        t.ok(out.exit_code == 0 and out.sandbox_denied is False,
             "[%s] Appendix A: exit 0, sandboxDenied false" % tag, out.notes)
        t.eq(sorted(out.seqs), [1, 2, 3], "[%s] Appendix A: seqs 1, 2, 3" % tag)
        # arg0 is kept under a sandbox, as the released binary (0.169.0) does.
        out = s.run("a0", ["/bin/sh", "-c", "tr '\\000' '\\n' < /proc/$$/cmdline | head -n 1"],
                    arg0="custom", sandbox=sandbox(ROOT_READ))[1]
        t.eq(out and out.stdout, b"custom\n", "[%s] arg0 is kept under a sandbox" % tag)
        # The env is still exactly `env` under a sandbox.
        out = s.run("env", ["/usr/bin/env"], env={"A": "1"}, sandbox=sandbox(ROOT_READ))[1]
        t.eq(out and out.stdout, b"A=1\n", "[%s] sandboxed env is exactly `env`" % tag)
        out = s.run("ro", ["sh", "-c", "echo x > /tmp/cordon-serve-ro-$$"],
                    sandbox=sandbox(ROOT_READ))[1]
        t.ok(out and out.exit_code != 0 and out.sandbox_denied is True,
             "[%s] root-read profile: a write fails, sandboxDenied true" % tag,
             out and (out.exit_code, out.stderr))
        rd = s.call("process/read", {"processId": "ro"})
        t.ok(rd["sandboxDenied"] is True, "[%s] process/read reports sandboxDenied too" % tag, rd)
        out = s.run("nnp", ["sh", "-c", "grep NoNewPrivs /proc/self/status"],
                    sandbox=sandbox(ROOT_READ))[1]
        t.ok(out and b"NoNewPrivs:\t1" in out.stdout, "[%s] no_new_privs is set" % tag,
             out and out.stdout)
        # Its terminal is the server's, on the host's /dev/pts, which the sandbox's
        # private one hides: usable through its descriptors and by /dev/tty,
        # /dev/stderr; new terminals come from the private instance.
        out = s.run("stty", ["sh", "-c", "test -t 0 && test -t 1 && stty size && "
                             "echo via-tty > /dev/tty && echo via-stderr > /dev/stderr && "
                             "python3 -c 'import os; m, s = os.openpty(); "
                             "os.write(s, b\"inner\\n\"); print(os.read(m, 64))'"],
                    tty=True, sandbox=sandbox(ROOT_READ))[1]
        t.ok(out and out.exit_code == 0 and b"24 80" in out.pty and b"via-tty" in out.pty and
             b"via-stderr" in out.pty and b"inner" in out.pty,
             "[%s] a sandboxed tty process gets its PTY, reopens it by name, makes new ones"
             % tag, out and (out.exit_code, out.pty))
        # Another terminal of the host (another of the user's shells): not there.
        m, sl = os.openpty()
        try:
            other = os.ttyname(sl)
            os.write(m, b"typed\n")
            out = s.run("other-tty", ["sh", "-c", "head -c 6 < %s" % other], tty=True,
                        sandbox=sandbox(ROOT_READ))[1]
            t.ok(out and out.exit_code != 0 and b"typed" not in out.pty,
                 "[%s] another terminal of the host (%s) cannot be opened" % (tag, other),
                 out and (out.exit_code, out.pty))
        finally:
            os.close(m)
            os.close(sl)
        r = s.start("scat", ["head", "-n", "1"], pipeStdin=True, sandbox=sandbox(ROOT_READ))
        w = s.request("process/write", {"processId": "scat", "chunk": "aGkK", "writeId": "1"})
        out = s.wait_closed("scat") if "result" in r else None
        t.ok(w.get("result") == {"status": "accepted"} and out and out.stdout == b"hi\n",
             "[%s] stdin writes reach a sandboxed process" % tag, (r, w, out and out.stdout))
        out = s.run("quiet-fail", ["sh", "-c", "exit 2"], sandbox=sandbox(ROOT_READ))[1]
        t.ok(out and out.exit_code == 2 and out.sandbox_denied is False,
             "[%s] a plain non-zero exit is not a denial" % tag, out and out.notes)
    finally:
        s.stop()


def workspace(tag, base):
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    other = tempfile.mkdtemp(prefix="other-", dir=base)
    home = os.path.expanduser("~")
    s = Server(tag)
    try:
        s.handshake()
        # The test directories live under /tmp: leave the temporary directories out
        # of the profile so that "outside the workspace" is really outside.
        ww = sandbox(WS_ONLY, workspaceRoots=[uri(ws)])
        r, out = s.run("in", ["sh", "-c", "echo data > inside && cat inside"], cwd=ws, sandbox=ww)
        t.ok(r.get("result", {}).get("sandboxType") == "linuxSeccomp" and out and
             out.exit_code == 0 and out.stdout == b"data\n",
             "[%s] workspace-write: a write inside the workspace works" % tag,
             (r, out and out.stderr))
        t.ok(os.path.exists(os.path.join(ws, "inside")), "[%s] and the file is there" % tag)
        for pid, target in (("etc", "/etc/cordon-serve-test"), ("home", os.path.join(
                home, "cordon-serve-test")), ("other", os.path.join(other, "f"))):
            r, out = s.run(pid, ["sh", "-c", "echo x > '%s'" % target], cwd=ws, sandbox=ww)
            t.ok(out and out.exit_code != 0 and out.sandbox_denied is True and
                 not os.path.exists(target),
                 "[%s] a write outside (%s) fails, sandboxDenied true" % (tag, target),
                 out and (out.exit_code, out.sandbox_denied, out.stderr))
            if os.path.exists(target):
                os.unlink(target)
        os.makedirs(os.path.join(ws, ".git"), exist_ok=True)
        r, out = s.run("git", ["sh", "-c", "echo x > .git/config"], cwd=ws, sandbox=ww)
        t.ok(out and out.exit_code != 0 and not os.path.exists(os.path.join(ws, ".git", "config")),
             "[%s] .git inside the workspace stays read-only" % tag, out and out.stderr)
        r, out = s.run("tmp", ["sh", "-c", "echo x > /tmp/cordon-serve-$$ && rm /tmp/cordon-serve-$$"],
                       cwd=ws, sandbox=sandbox(workspace_write(), workspaceRoots=[uri(ws)]))
        t.eq(out and out.exit_code, 0, "[%s] :slash_tmp write is allowed" % tag)
        # sandbox.cwd is the policy cwd; params.cwd only where the command runs.
        r, out = s.run("pcwd", ["sh", "-c", "echo x > '%s/pc'" % ws], cwd="/",
                       sandbox=dict(ww, cwd=uri(ws)))
        t.eq(out and out.exit_code, 0, "[%s] sandbox.cwd with workspaceRoots: write works" % tag)

        # Network.
        for pid, net, want in (("net-r", "restricted", EPERM), ("net-e", "enabled", 0)):
            perms = workspace_write()
            perms["network"] = net
            r, out = s.run(pid, [TRY, "socket-inet"], cwd=ws,
                           sandbox=sandbox(perms, workspaceRoots=[uri(ws)]))
            t.ok(out and out.exit_code == want,
                 "[%s] network %s: socket(AF_INET) gives %s" % (tag, net, want),
                 (r, out and (out.exit_code, out.stderr)))
            if pid == "net-e":
                c = r.get("result", {}).get("cordon", {})
                t.eq(c.get("network"), "enabled", "[%s] cordon.network enabled" % tag)
        r, out = s.run("unix", [TRY, "socket-unix"], cwd=ws,
                       sandbox=sandbox(workspace_write(), workspaceRoots=[uri(ws)]))
        t.eq(out and out.exit_code, 0, "[%s] AF_UNIX sockets stay allowed" % tag)

        # :workspace_roots with an empty workspaceRoots binds to nothing, never the cwd.
        with open(os.path.join(ws, "secret"), "w") as f:
            f.write("s3cret\n")
        r, out = s.run("empty-w", ["sh", "-c", "echo x > '%s/new'" % ws], cwd=ws,
                       sandbox=sandbox(WS_ONLY, workspaceRoots=[]))
        t.ok(out and out.exit_code != 0 and not os.path.exists(os.path.join(ws, "new")),
             "[%s] empty workspaceRoots: a file in cwd is not writable" % tag,
             out and (out.exit_code, out.stderr))
        ro = profile([special("minimal", "read"), special("project_roots", "write")])
        r, out = s.run("empty-r", ["cat", os.path.join(ws, "secret")], cwd="/",
                       sandbox=sandbox(ro, cwd=uri(ws), workspaceRoots=[]))
        t.ok(out and out.exit_code != 0 and b"s3cret" not in out.stdout,
             "[%s] empty workspaceRoots, no root read: a file in cwd is not readable" % tag,
             (r, out and (out.exit_code, out.stdout, out.stderr)))
        r, out = s.run("full-r", ["cat", os.path.join(ws, "secret")], cwd="/",
                       sandbox=sandbox(ro, cwd=uri(ws), workspaceRoots=[uri(ws)]))
        t.ok(out and out.exit_code == 0 and out.stdout == b"s3cret\n",
             "[%s] the same with workspaceRoots [ws]: readable (control)" % tag,
             (r, out and (out.exit_code, out.stderr)))
        os.makedirs(os.path.join(ws, "sub"), exist_ok=True)
        r, out = s.run("sub2", ["sh", "-c", "echo x > '%s/sub/f' && ! echo y > '%s/g'" % (ws, ws)],
                       cwd="/", sandbox=sandbox(profile([special("root", "read"),
                                                        special("project_roots", "write", "sub")]),
                                                workspaceRoots=[uri(ws)]))
        t.eq(out and out.exit_code, 0, "[%s] project_roots with a subpath binds root/subpath"
             % tag)
        r, out = s.run("path", ["sh", "-c", "echo x > '%s/p'" % other], cwd="/",
                       sandbox=sandbox(profile([special("root", "read"),
                                                path_entry(other, "write")])))
        t.eq(out and out.exit_code, 0, "[%s] an explicit path entry (URI) grants write" % tag)

        # Refusals: -32602 before anything is spawned.
        marker = os.path.join(ws, "marker")
        touch = ["sh", "-c", "touch '%s'" % marker]
        cases = [
            ("enforceManagedNetwork without proxy variables",
             dict(sandbox=ww, enforceManagedNetwork=True),
             "managed proxy mode requires proxy environment variables"),
            ("unknown access", dict(sandbox=sandbox(profile([dict(special("root", "read"),
                                                                  access="bogus")]))), None),
            ("unknown profile type", dict(sandbox=sandbox({"type": "bogus"})), None),
            ("unknown entry path type", dict(sandbox=sandbox(profile(
                [{"path": {"type": "nope"}, "access": "read"}]))), None),
            ("native path in a path entry", dict(sandbox=sandbox(profile(
                [{"path": {"type": "path", "path": "/tmp"}, "access": "read"}]))), None),
            ("missing windowsSandboxLevel", dict(sandbox={"permissions": ROOT_READ}), None),
            ("bad windowsSandboxLevel", dict(sandbox=sandbox(ROOT_READ,
                                                             windowsSandboxLevel="max")), None),
            ("missing permissions", dict(sandbox={"windowsSandboxLevel": "disabled"}), None),
            ("Windows workspace root", dict(sandbox=sandbox(workspace_write(), workspaceRoots=[
                "file:///C:/repo"])), None),
            ("native workspace root", dict(sandbox=sandbox(workspace_write(),
                                                           workspaceRoots=[ws])), None),
            ("Windows sandbox cwd", dict(sandbox=sandbox(ROOT_READ, cwd="file:///C:/x")), None),
            ("unknown network mode", dict(sandbox=sandbox(dict(ROOT_READ, network="maybe"))),
             None),
        ]
        for i, (desc, extra, msg) in enumerate(cases):
            pid = "refuse%d" % i
            r = s.start(pid, touch, cwd=ws, **extra)
            good = err_code(r) == -32602 and (msg is None or err_msg(r) == msg)
            t.ok(good, "[%s] %s: -32602%s" % (tag, desc, " with the message" if msg else ""), r)
        s.drain(0.3)
        t.ok(not os.path.exists(marker) and not any(
            n["params"]["processId"].startswith("refuse") for n in s.notes),
            "[%s] no refused start ran anything" % tag)
        r, out = s.run("emn-nosb", touch, cwd=ws, enforceManagedNetwork=True)
        t.ok(out and out.exit_code == 0 and r["result"].get("sandboxType") == "none",
             "[%s] enforceManagedNetwork without a sandbox is ignored" % tag, r)
        if os.path.exists(marker):
            os.unlink(marker)
        r, out = s.run("disabled", ["true"], sandbox=sandbox({"type": "disabled"}))
        t.ok("result" in r or err_code(r) == -32602,
             "[%s] a disabled profile is either run or refused, never an internal error" % tag, r)
    finally:
        s.stop()
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


def masked(tag, base):
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    marker = os.path.join(ws, "marker")
    s = Server(tag, extra_env={"CORDON_TEST_DISABLE": "landlock"})
    try:
        s.handshake()
        r = s.start("nl", ["sh", "-c", "touch '%s'" % marker], cwd=ws,
                    sandbox=sandbox(workspace_write(), workspaceRoots=[uri(ws)]))
        t.ok(err_code(r) == -32602 and "landlock" in err_msg(r).lower(),
             "[%s] Landlock unavailable: -32602 naming the mechanism" % tag, r)
        t.ok("\n" not in err_msg(r), "[%s] the refusal is one line" % tag, err_msg(r))
        s.drain(0.3)
        t.ok(not os.path.exists(marker) and not s.notes_for("nl"),
             "[%s] nothing was spawned" % tag)
        r, out = s.run("plain", ["sh", "-c", "touch '%s'" % marker], cwd=ws)
        t.ok(out and out.exit_code == 0, "[%s] unsandboxed starts still work" % tag, r)
    finally:
        s.stop()
        shutil.rmtree(ws, ignore_errors=True)
    s = Server(tag, extra_env={"CORDON_TEST_DISABLE": "seccomp"})
    try:
        s.handshake()
        r = s.start("ns", ["true"], sandbox=sandbox(ROOT_READ))
        t.ok(err_code(r) == -32602 and "seccomp" in err_msg(r).lower(),
             "[%s] seccomp unavailable: -32602 naming it" % tag, r)
    finally:
        s.stop()


def globs(tag, base):
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    os.makedirs(os.path.join(ws, "src", "deep"))
    for name, data in ((".env", "e1"), ("src/deep/prod.env", "e2"), ("src/main.c", "code"),
                       ("id.key", "k")):
        with open(os.path.join(ws, name), "w") as f:
            f.write(data)
    glob = {"path": {"type": "glob_pattern", "pattern": "codex-project-roots://**/*.env"},
            "access": "deny"}
    rel = {"path": {"type": "glob_pattern", "pattern": "*.key"}, "access": "deny"}
    perms = profile(WS_ONLY["file_system"]["entries"] + [glob, rel])
    sb = sandbox(perms, workspaceRoots=[uri(ws)], cwd=uri(ws))
    s = Server(tag)
    try:
        s.handshake()
        for pid, name in (("top", ".env"), ("deep", "src/deep/prod.env"), ("rel", "id.key")):
            r, out = s.run("g-" + pid, ["cat", name], cwd=ws, sandbox=sb)
            t.ok(out and out.exit_code != 0 and out.stdout == b"" and out.sandbox_denied is True,
                 "[%s] glob deny: %s cannot be read" % (tag, name),
                 (r, out and (out.exit_code, out.stdout, out.stderr)))
        r, out = s.run("g-ok", ["sh", "-c", "cat src/main.c && echo more >> src/main.c"],
                       cwd=ws, sandbox=sb)
        t.ok(out and out.exit_code == 0 and out.stdout == b"code",
             "[%s] glob deny: other files stay readable and writable" % tag,
             (r, out and out.stderr))
        # No workspace roots: the codex-project-roots:// pattern binds to nothing.
        nb = sandbox(profile([special("root", "read"), glob]), workspaceRoots=[], cwd=uri(ws))
        r, out = s.run("g-none", ["cat", ".env"], cwd=ws, sandbox=nb)
        t.ok(out and out.exit_code == 0 and out.stdout == b"e1",
             "[%s] glob deny: empty workspaceRoots binds the pattern to nothing" % tag,
             (r, out and out.stderr))
        bad = {"path": {"type": "glob_pattern", "pattern": "/**/*.env"}, "access": "deny"}
        r = s.start("g-bad", ["true"], cwd=ws,
                    sandbox=sandbox(profile([special("root", "read"), bad])))
        t.ok("error" in r and "whole file system" in err_msg(r),
             "[%s] glob deny: a pattern that would scan / is refused before spawning" % tag, r)
        t.ok(open(os.path.join(ws, ".env")).read() == "e1",
             "[%s] glob deny: the matched file is intact" % tag)
    finally:
        s.stop()
        shutil.rmtree(ws, ignore_errors=True)


def setsid_survivor(tag, base):
    """A daemon that leaves the command's process group must not outlive the
    sandbox: once the mask mount points are removed on the host, the read-only
    masks are gone in its mount namespace too, and it could create .codex or
    .git/hooks in the workspace. No pid namespace for the server here (the root
    server's own would kill the daemon when the server exits, hiding the bug).
    The daemon is found by a unique sleep duration: inside the sandbox's pid
    namespace its $$ is not its host pid."""
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    token = "30.%d%03d" % (os.getpid(), len(tag))
    daemon_cmd = ("sleep\0%s" % token).encode()
    targets = [os.path.join(ws, p) for p in (".codex", ".git", ".agents")]
    daemon = ("echo $$ > daemon.pid; sleep 1; mkdir .codex .git .agents .git/hooks; "
              "echo hacked > .codex/config.toml; echo hacked > .git/hooks/pre-commit; "
              "echo hacked > .agents/a; exec sleep %s" % token)
    script = ("setsid sh -c '%s' </dev/null >/dev/null 2>&1 & "
              "while [ ! -s daemon.pid ]; do sleep 0.05; done; echo started; sleep 0.3" % daemon)
    s = Server(tag, args=["--pid-namespace=never"])
    try:
        s.handshake()
        r, out = s.run("survivor", ["sh", "-c", script], cwd=ws,
                       sandbox=sandbox(workspace_write(), workspaceRoots=[uri(ws)]))
        t.ok(out and out.exit_code == 0 and out.stdout == b"started\n",
             "[%s] setsid daemon: the command ran, its output was delivered" % tag,
             (r, out and (out.exit_code, out.stdout, out.stderr)))
        s.drain(1.5)
        t.ok(not any(os.path.lexists(p) for p in targets),
             "[%s] setsid daemon: no .codex, .git or .agents appeared after closed" % tag,
             [p for p in targets if os.path.lexists(p)])
        left = pids_by_cmdline(lambda c: daemon_cmd in c)
        t.ok(not left, "[%s] setsid daemon: the daemon is gone" % tag, left)
    finally:
        for p in pids_by_cmdline(lambda c: daemon_cmd in c):
            kill_quietly(p)
        s.stop()
        shutil.rmtree(ws, ignore_errors=True)


def ns_reuse(tag, base):
    """The kernel hands a freed mount namespace's inode number to the next
    namespace at once. When a sandboxed command exits, the server kills what
    is left in its namespace by that number: unless the server pins the
    namespace until then, a namespace created in between (here the next
    sandbox) can get the number and be killed instead."""
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    s = Server(tag)
    ww = sandbox(workspace_write(), workspaceRoots=[uri(ws)])
    bad = []
    try:
        s.handshake()
        for i in range(40):
            ra = s.start("a%d" % i, ["true"], cwd=ws, sandbox=ww)
            rb = s.start("b%d" % i, ["sh", "-c", "sleep 1; echo survived"], cwd=ws, sandbox=ww)
            if "result" not in ra or "result" not in rb:
                bad.append((i, ra, rb))
        for i in range(40):
            out = s.wait_closed("b%d" % i)
            if out.exit_code != 0 or out.stdout != b"survived\n":
                bad.append((i, out.exit_code, out.stdout, out.stderr))
        t.ok(not bad, "[%s] namespace reuse: no later sandbox is killed with an earlier one" % tag,
             bad)
    finally:
        s.stop()
        shutil.rmtree(ws, ignore_errors=True)


def ns_number(pid):
    try:
        return os.readlink("/proc/%d/ns/mnt" % pid)
    except OSError:
        return None


def ns_reuse_host(tag, base):
    """The same with host processes: a namespace the host creates after the
    sandboxed command exited, but before the server reaped it, must not be
    killed. The server is stopped over the window to make it certain."""
    if os.geteuid() != 0:
        t.skip("[%s] namespace reuse by host processes" % tag, "needs root for unshare -m")
        return
    unshare = shutil.which("unshare")
    if not unshare:
        t.skip("[%s] namespace reuse by host processes" % tag, "no unshare")
        return
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    gate = Gate(ws)
    s = Server(tag, args=["--pid-namespace=never"])
    hosts = []
    stopped = None
    try:
        s.handshake()
        r = s.start("short", ["sh", "-c", "readlink /proc/self/ns/mnt; read x < gate"], cwd=ws,
                    sandbox=sandbox(workspace_write(), workspaceRoots=[uri(ws)]))
        s.wait_output("short", b"\n")
        ns = s.output_of("short").decode().strip()
        # The server stops; then the command exits, and its namespace is freed
        # (its init is a zombie the stopped server cannot reap).
        server = s.server_pid
        os.kill(server, signal.SIGSTOP)
        stopped = server
        init = children_of(server)
        gate.open()
        deadline = time.monotonic() + WAIT
        while not all(proc_state(p) == "Z" for p in init) and time.monotonic() < deadline:
            time.sleep(0.01)
        # The lowest free number goes first: a few are enough to reach the
        # sandbox's, if it is free. Each is in its namespace once it runs sleep.
        for _ in range(8):
            hosts.append(subprocess.Popen([unshare, "-m", "sleep", "%d" % (WAIT * 10)]))
        want = ("sleep\0%d\0" % (WAIT * 10)).encode()
        for h in hosts:
            while cmdline_of(h.pid) != want and time.monotonic() < deadline:
                time.sleep(0.01)
        same = [h.pid for h in hosts if ns_number(h.pid) == ns]
        os.kill(server, signal.SIGCONT)
        stopped = None
        out = s.wait_closed("short")
        s.request("environment/status")  # what the exit made the server do is done
        dead = [(h.pid, h.poll()) for h in hosts if not pid_alive(h.pid)]
        t.ok("result" in r and out.exit_code == 0 and not dead and init and
             all(proc_state(p) in ("Z", None) for p in init),
             "[%s] namespace reuse: host processes in a new namespace survive" % tag,
             (r, out.exit_code, ns, same, dead))
        if same:
            t.diag("a host process got the sandbox's namespace number %s" % ns)
    finally:
        if stopped:
            os.kill(stopped, signal.SIGCONT)
        for h in hosts:
            kill_quietly(h.pid)
            h.wait()
        s.stop()
        shutil.rmtree(ws, ignore_errors=True)


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    return st[st.rindex(")") + 2]


def cmdline_of(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


with tempfile.TemporaryDirectory(prefix="cordon-serve-sb-") as base:
    base = os.path.realpath(base)
    for loop in LOOPS:
        t.guard("[%s] Appendix A" % loop, appendix_a, loop)
        t.guard("[%s] workspace" % loop, workspace, loop, base)
        t.guard("[%s] masked features" % loop, masked, loop, base)
        t.guard("[%s] glob deny entries" % loop, globs, loop, base)
        t.guard("[%s] setsid survivor" % loop, setsid_survivor, loop, base)
        t.guard("[%s] namespace reuse" % loop, ns_reuse, loop, base)
        t.guard("[%s] namespace reuse by the host" % loop, ns_reuse_host, loop, base)
t.done()
