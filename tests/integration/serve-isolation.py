#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: what a sandboxed process or a sandboxed fs request can reach
# of other processes and of the server itself.
#
#  - A sandboxed process/start runs in a pid namespace of its own, under
#    cordon-init: it cannot name, let alone change, the server, another
#    session's processes or any other host process (prlimit, renice by pid and
#    by user, ionice, taskset), and a limit it sets on "pid 1" is its init's.
#  - A sandboxed fs request runs in cordon-fs-helper, executed afresh: through
#    /proc/self it finds nothing of the server (environment, command line,
#    auxiliary vector, memory map, descriptors), and in its own pid namespace
#    no other process.
#
# TAP; both event loops; run as root and (through unprivileged.sh) as an
# ordinary user.

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, LOOPS, WAIT, Server, Tap, cordon_usable,  # noqa: E402
                       kill_quietly, pids_by_cmdline, unb64, uri, workspace_write)

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
for tool in ("prlimit", "renice", "ionice", "taskset"):
    if not shutil.which(tool):
        t.skip_all("%s is not installed (util-linux)" % tool)

SECRET = "cordon-isolation-%d-%s" % (os.getpid(), os.urandom(6).hex())
PATH_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def sandbox(ws):
    return {"permissions": workspace_write(), "windowsSandboxLevel": "disabled",
            "workspaceRoots": [uri(ws)], "cwd": uri(ws)}


def limits(pid, name):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith(name):
                return line.split()[len(name.split()):][:2]
    return None


def nice(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def ionice_of(pid):
    return subprocess.run(["ionice", "-p", str(pid)], capture_output=True, text=True).stdout


def victim():
    """A host process of the same user, outside every sandbox."""
    return subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL)


def pids_of(argv_marker):
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if f.read() == argv_marker:
                        found.append(int(d))
            except OSError:
                pass
    return found


def processes(tag, base):
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    v = victim()
    s = Server(tag, extra_env={"CORDON_ISOLATION_SECRET": SECRET})
    try:
        s.handshake()
        srv = s.server_pid
        sb = sandbox(ws)
        before = {"nofile": limits(srv, "Max open files"), "cpu": limits(srv, "Max cpu time"),
                  "nice": nice(srv), "affinity": os.sched_getaffinity(srv)}
        v_before = {"nofile": limits(v.pid, "Max open files"), "nice": nice(v.pid),
                    "io": ionice_of(v.pid), "affinity": os.sched_getaffinity(v.pid)}

        # Its own pid namespace, with cordon-init as pid 1.
        r, out = s.run("ns", ["sh", "-c", "echo $$; tr '\\0' ' ' < /proc/1/cmdline; echo; "
                              "ls /proc | grep -c '^[0-9]'"], cwd=ws, env=PATH_ENV, sandbox=sb)
        lines = out.stdout.decode(errors="replace").split("\n") if out else []
        t.ok(out and out.exit_code == 0 and lines[0] == "2" and
             lines[1].startswith("cordon-init cordon-init/1 "),
             "[%s] a sandboxed process is pid 2 of its own namespace, under cordon-init" % tag,
             (r, out and (out.stdout, out.stderr)))
        t.ok(len(lines) > 2 and lines[2].isdigit() and int(lines[2]) <= 4,
             "[%s] and sees no process but its own sandbox's in /proc" % tag, lines)

        # Another sandboxed process of the server (of this session: in another
        # session of the same server it would be just as far).
        marker = ("sleep\0%s\0" % ("60.%d%d" % (os.getpid(), len(tag)))).encode()
        r2 = s.start("other", ["sleep", marker.split(b"\0")[1].decode()], cwd=ws, env=PATH_ENV,
                      sandbox=sb)
        other = []
        deadline = time.monotonic() + WAIT
        while not other and time.monotonic() < deadline:
            other = pids_of(marker)
            s.drain(0.01)
        t.ok("result" in r2 and len(other) == 1, "[%s] another sandboxed process runs" % tag,
             (r2, other))
        o_before = other and (nice(other[0]), limits(other[0], "Max open files"),
                              ionice_of(other[0]), os.sched_getaffinity(other[0]))

        # The server, by its pid.
        # (The server's open files last: where that works, nothing starts after it.)
        attacks = [
            ("prlimit a host process", "prlimit --pid %d --nofile=3:" % v.pid),
            ("renice a host process", "renice -n 19 -p %d" % v.pid),
            ("ionice a host process", "ionice -c 3 -p %d" % v.pid),
            ("taskset a host process", "taskset -p 1 %d" % v.pid),
            ("prlimit the server's CPU time", "prlimit --pid %d --cpu=4321:4321" % srv),
            ("renice the server", "renice -n 19 -p %d" % srv),
            ("taskset the server", "taskset -p 1 %d" % srv),
            ("prlimit the server's open files", "prlimit --pid %d --nofile=3:" % srv),
        ]
        for i, (desc, cmd) in enumerate(attacks):
            r, out = s.run("a%d" % i, ["sh", "-c", cmd], cwd=ws, env=PATH_ENV, sandbox=sb)
            t.ok(out and out.exit_code != 0, "[%s] %s fails" % (tag, desc),
                 (r, out and (out.exit_code, out.stdout, out.stderr)))
        # Every process it can see, and every process of its user: what it can
        # name is its own sandbox. (Before cordon-init, pid 1 was the root
        # server itself, and an unprivileged server's sandbox saw every host
        # process of the user.) Values that show, without breaking anything.
        sweep = ("for p in $(ls /proc | grep '^[0-9]*$'); do [ $p = $$ ] && continue; "
                 "prlimit --pid $p --nofile=333: --cpu=4321:4321; renice -n 19 -p $p; "
                 "ionice -c 3 -p $p; taskset -p 1 $p; done; renice -n 19 -u $(id -u); "
                 "ionice -c 3 -u $(id -u); true")
        r, out = s.run("sweep", ["sh", "-c", sweep], cwd=ws, env=PATH_ENV, sandbox=sb)
        t.ok(out is not None, "[%s] a sweep over every visible pid and the user ran" % tag, r)
        after = {"nofile": limits(srv, "Max open files"), "cpu": limits(srv, "Max cpu time"),
                 "nice": nice(srv), "affinity": os.sched_getaffinity(srv)}
        t.eq(after, before, "[%s] the server's limits, priority and CPUs are unchanged" % tag)
        v_after = {"nofile": limits(v.pid, "Max open files"), "nice": nice(v.pid),
                   "io": ionice_of(v.pid), "affinity": os.sched_getaffinity(v.pid)}
        t.eq(v_after, v_before,
             "[%s] the host process's limits, priority, I/O class and CPUs are unchanged" % tag)
        if other:
            r, out = s.run("cross", ["sh", "-c", "renice -n 19 -p %d || prlimit --pid %d "
                                     "--nofile=3: || exit 0; exit 1" % (other[0], other[0])],
                           cwd=ws, env=PATH_ENV, sandbox=sb)
            t.ok(out and out.exit_code == 0, "[%s] another sandboxed process cannot be named "
                 "by its pid" % tag, (r, out and (out.exit_code, out.stderr)))
            o_after = (nice(other[0]), limits(other[0], "Max open files"), ionice_of(other[0]),
                       os.sched_getaffinity(other[0]))
            t.eq(o_after, o_before, "[%s] another sandboxed process is unchanged" % tag)

        # An empty command name is refused as unsandboxed, not run as a bad init.
        r = s.start("empty", [""], cwd=ws, env=PATH_ENV, sandbox=sb)
        r2 = s.start("empty2", [""], cwd=ws, env=PATH_ENV)
        t.ok("error" in r and r.get("error") == r2.get("error"),
             "[%s] an empty argv[0] is refused as it is unsandboxed" % tag, (r, r2))

        # Still serving.
        r, out = s.run("after", ["echo", "still here"], cwd=ws, env=PATH_ENV, sandbox=sb)
        t.ok(out and out.stdout == b"still here\n", "[%s] later sandboxed starts work" % tag,
             (r, out and out.stderr))
    finally:
        s.stop()
        kill_quietly(v.pid)
        v.wait()
        shutil.rmtree(ws, ignore_errors=True)


def fs_helper(tag, base):
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    s = Server(tag, extra_env={"CORDON_ISOLATION_SECRET": SECRET})
    try:
        s.handshake()
        srv = s.server_pid
        sb = sandbox(ws)
        with open("/proc/%d/exe" % srv, "rb"):
            pass
        server_exe = os.readlink("/proc/%d/exe" % srv)
        with open("/proc/%d/auxv" % srv, "rb") as f:
            server_auxv = f.read()
        got = {}
        for name in ("environ", "cmdline", "auxv", "maps", "status"):
            dest = os.path.join(ws, "copy-" + name)
            r = s.request("fs/copy", {"sourcePath": uri("/proc/self/" + name),
                                      "destinationPath": uri(dest), "recursive": False,
                                      "sandbox": sb})
            data = None
            if "result" in r:
                with open(dest, "rb") as f:
                    data = f.read()
            got[name] = data
            t.ok(data is not None, "[%s] fs/copy of /proc/self/%s in a sandbox works" %
                 (tag, name), r)
        t.ok(got["environ"] == b"", "[%s] the helper's environment is empty" % tag,
             got["environ"])
        everything = b"".join(v for v in got.values() if v)
        t.ok(SECRET.encode() not in everything,
             "[%s] nothing of the server's environment shows through /proc/self" % tag)
        t.eq(got["cmdline"], b"cordon-fs-helper\0cordon-fs-helper/1\0",
             "[%s] its command line is the helper's, not the server's" % tag)
        t.ok(got["auxv"] is not None and got["auxv"] != server_auxv,
             "[%s] its auxiliary vector is its own (a fresh exec)" % tag)
        maps = got["maps"] or b""
        t.ok(b"cordon-fs-helper" in maps and
             not any(line.endswith(b" " + server_exe.encode()) for line in maps.split(b"\n")),
             "[%s] its memory is its own: the server's program is not mapped" % tag, maps[:400])
        status = dict(line.split(b":\t", 1) for line in (got["status"] or b"").split(b"\n")
                      if b":\t" in line)
        t.ok(status.get(b"Pid", b"").strip() == b"1" and status.get(b"NSpid") and
             status.get(b"NoNewPrivs", b"").strip() == b"1",
             "[%s] it is pid 1 of its own pid namespace, with no_new_privs" % tag, status)
        r = s.request("fs/readDirectory", {"path": uri("/proc/self/fd"), "sandbox": sb})
        names = sorted(e["fileName"] for e in r.get("result", {}).get("entries", []))
        t.ok("result" in r and set(names) <= {"0", "1", "2", "3"},
             "[%s] it holds no descriptor of the server's" % tag, r)
        r = s.request("fs/readDirectory", {"path": uri("/proc"), "sandbox": sb})
        pids = sorted(e["fileName"] for e in r.get("result", {}).get("entries", [])
                      if e["fileName"].isdigit())
        t.ok("result" in r and pids == ["1"], "[%s] it sees no other process" % tag, pids)
        r = s.request("fs/copy", {"sourcePath": uri("/proc/%d/environ" % srv),
                                  "destinationPath": uri(os.path.join(ws, "srv-env")),
                                  "recursive": False, "sandbox": sb})
        leaked = os.path.exists(os.path.join(ws, "srv-env")) and \
            SECRET.encode() in open(os.path.join(ws, "srv-env"), "rb").read()
        t.ok("error" in r and not leaked, "[%s] the server's /proc entry is out of reach" % tag, r)
        r = s.request("fs/readFile", {"path": uri(os.path.join(ws, "copy-environ")),
                                      "sandbox": sb})
        t.ok("result" in r and unb64(r["result"]["dataBase64"]) == b"",
             "[%s] sandboxed reads still work" % tag, r)
    finally:
        s.stop()
        shutil.rmtree(ws, ignore_errors=True)


def lost_report(tag, base):
    """A setup failure whose report cannot be read is a refusal with that reason,
    never a command that seems to have run (or a bare status)."""
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    marker = os.path.join(ws, "ran")
    s = Server(tag, extra_env={"CORDON_TEST_DISABLE": "spawn-report"})
    try:
        s.handshake()
        # It would touch its marker only after a while; and the server reaps it
        # before it answers, so no process of it may be left once it did.
        mark = "lost-%d-%s" % (os.getpid(), tag)
        r = s.start("lost", ["sh", "-c", "sleep 30; touch ran; : %s" % mark], cwd=ws,
                    env=PATH_ENV, sandbox=sandbox(ws))
        left = pids_by_cmdline(lambda c: c.endswith(b"; : " + mark.encode() + b"\0"))
        msg = r.get("error", {}).get("message", "")
        t.ok("error" in r and "reading its report" in msg,
             "[%s] a lost setup report refuses the start, saying so" % tag, r)
        r = s.request("fs/writeFile", {"path": uri(os.path.join(ws, "w")), "dataBase64": "eA==",
                                       "sandbox": sandbox(ws)})
        msg = r.get("error", {}).get("message", "")
        t.ok("error" in r and "reading its report" in msg and
             not os.path.exists(os.path.join(ws, "w")),
             "[%s] and a sandboxed fs request likewise" % tag, r)
        t.ok(not left and not os.path.exists(marker), "[%s] the command was stopped" % tag, left)
    finally:
        s.stop()
        shutil.rmtree(ws, ignore_errors=True)


def programs(base):
    """cordon-init and cordon-fs-helper run by hand refuse; a server without them
    refuses to start."""
    here = os.path.dirname(os.path.realpath(CORDON))
    for name, want in (("cordon-init", 125), ("cordon-fs-helper", 2)):
        p = subprocess.run([os.path.join(here, name)], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
        t.ok(p.returncode == want and "not for direct use" in p.stderr,
             "%s run by hand refuses (status %d)" % (name, want), (p.returncode, p.stderr))
    d = tempfile.mkdtemp(prefix="bin-", dir=base)
    try:
        lone = os.path.join(d, "cordon")
        shutil.copy(CORDON, lone)
        p = subprocess.run([lone, "serve"], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=30)
        if p.returncode == 0:
            t.skip("a server whose cordon-init cannot be found refuses to start",
                   "an installed cordon-init was found (make install)")
        else:
            t.ok(p.returncode == 1 and "cannot find cordon-init" in p.stderr,
                 "a server whose cordon-init cannot be found refuses to start, saying why",
                 (p.returncode, p.stderr))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def unsealed(base):
    """Without a sealed copy (CORDON_TEST_DISABLE=seal stands for a host
    without executable memfds), a program is executed from its file only if
    the server's user can neither write it nor make it writable: one it owns
    refuses the start, even read-only, and so does any as root."""
    here = os.path.dirname(os.path.realpath(CORDON))
    env = dict(os.environ, CORDON_TEST_DISABLE="seal")
    env.pop("CORDON_TEST_SEATBELT_EXEC", None)
    p = subprocess.run([CORDON, "serve"], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=60)
    owned = os.stat(os.path.join(here, "cordon-init")).st_uid == os.geteuid()
    if os.geteuid() == 0 or owned:
        t.ok(p.returncode == 1 and "can be changed by this server's user" in p.stderr,
             "unsealed: programs this user can change refuse the start", (p.returncode, p.stderr))
    else:
        t.ok(p.returncode == 0 and "executing it from its file" in p.stderr,
             "unsealed: programs of another user, not writable, run from their files (a warning)",
             (p.returncode, p.stderr))
    d = tempfile.mkdtemp(prefix="bin-", dir=base)
    try:
        for name in ("cordon", "cordon-init", "cordon-fs-helper"):
            shutil.copy(os.path.join(here, name), os.path.join(d, name))
            os.chmod(os.path.join(d, name), 0o555)
        p = subprocess.run([os.path.join(d, "cordon"), "serve"], capture_output=True, text=True,
                           env=env, stdin=subprocess.DEVNULL, timeout=60)
        t.ok(p.returncode == 1 and "can be changed by this server's user (it may write it, or "
             "owns it)" in p.stderr,
             "unsealed: a read-only program this user owns refuses the start (chmod would do)",
             (p.returncode, p.stderr))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def sealed(tag, base):
    """The programs the server executes in its sandboxes are copies sealed in
    memory: a sandbox (or anyone) that rewrites the files afterwards changes
    nothing the server runs. Both files here are rewritten in place (same
    inode) with /bin/false, which would fail every start and request."""
    here = os.path.dirname(os.path.realpath(CORDON))
    d = tempfile.mkdtemp(prefix="bin-", dir=base)
    ws = tempfile.mkdtemp(prefix="ws-", dir=base)
    for name in ("cordon", "cordon-ws", "cordon-init", "cordon-fs-helper"):
        if os.path.exists(os.path.join(here, name)):
            shutil.copy(os.path.join(here, name), os.path.join(d, name))
    os.chmod(d, 0o755)
    s = Server(tag, cordon=os.path.join(d, "cordon"))
    try:
        s.handshake()
        with open("/bin/false", "rb") as f:
            false = f.read()
        for name in ("cordon-init", "cordon-fs-helper"):
            with open(os.path.join(d, name), "r+b") as f:
                f.truncate(0)
                f.write(false)
        r, out = s.run("sealed", ["echo", "hello"], cwd=ws, env=PATH_ENV, sandbox=sandbox(ws))
        t.ok(out and out.exit_code == 0 and out.stdout == b"hello\n",
             "[%s] a rewritten cordon-init file does not change what sandboxes run" % tag,
             (r, out and (out.exit_code, out.stdout, out.stderr)))
        r = s.request("fs/writeFile", {"path": uri(os.path.join(ws, "w")), "dataBase64": "eA==",
                                       "sandbox": sandbox(ws)})
        t.ok("result" in r and os.path.exists(os.path.join(ws, "w")),
             "[%s] nor does a rewritten cordon-fs-helper" % tag, r)
    finally:
        s.stop()
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


with tempfile.TemporaryDirectory(prefix="cordon-serve-iso-") as base:
    base = os.path.realpath(base)
    os.chmod(base, 0o755)
    for loop in LOOPS:
        t.guard("[%s] processes" % loop, processes, loop, base)
        t.guard("[%s] fs helper" % loop, fs_helper, loop, base)
        t.guard("[%s] lost report" % loop, lost_report, loop, base)
        t.guard("[%s] sealed programs" % loop, sealed, loop, base)
    t.guard("programs", programs, base)
    t.guard("unsealed programs", unsealed, base)
t.done()
