#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Resource limits under `cordon serve`: --default-limits and --max-limits
# (checked at start), the cordon extension of process/start asking for
# less but never more, the result saying how each limit is enforced, and
# process/exited saying which limit a command ran into (cordon.limit,
# cordon.reason), for sandboxed and unsandboxed processes; a fork bomb, a
# memory hog and disk fillers stopped at their limits while the server's
# other processes carry on; inotify limits in the sandboxes' own user
# namespaces (refused for root's). Root and unprivileged (unprivileged.sh).
# TAP.

import atexit
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, INOTIFY_PROBE as INOTIFY, ROOT_READ, Server, Tap,  # noqa: E402
                       cordon_usable, err_code, err_msg, pids_by_cmdline, workspace_write)

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
WHO = "root" if os.geteuid() == 0 else "unprivileged"
BASE = tempfile.mkdtemp(prefix="cordon-serve-limits.", dir="/var/tmp")
atexit.register(shutil.rmtree, BASE, True)
os.chmod(BASE, 0o755)
WS = os.path.join(BASE, "ws")
os.mkdir(WS)
NO_CGROUP = {"CORDON_TEST_DISABLE": "cgroup"}


def sandbox(perm=None, roots=()):
    s = {"permissions": perm or ROOT_READ, "windowsSandboxLevel": "disabled"}
    if roots:
        from rpcclient import uri
        s["workspaceRoots"] = [uri(r) for r in roots]
    return s


def serve_status(args, extra_env=None):
    """cordon serve ARGS with stdin closed at once: (status, stderr)."""
    env = dict(os.environ)
    env.pop("CORDON_TEST_DISABLE", None)
    env.update(extra_env or {})
    p = subprocess.run([CORDON, "serve", "--listen", "stdio"] + args, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
    return p.returncode, p.stderr.decode(errors="replace")


def exited(res):
    ex = [n for n in res.notes if n["method"] == "process/exited"]
    return ex[0]["params"] if ex else {}


def limits_of(r):
    return r.get("result", {}).get("cordon", {}).get("limits")


# ---- the server's options

rc, err = serve_status(["--default-limits", "open-files=300", "--max-limits", "open-files=200"])
t.ok(rc == 2 and "more than --max-limits allows" in err,
     "[%s] defaults above the maximums: a usage error" % WHO, (rc, err))
rc, err = serve_status(["--max-limits", "memroy=1G"])
t.ok(rc == 2 and "unknown limit 'memroy'" in err, "[%s] an unknown limit: a usage error" % WHO,
     (rc, err))
rc, err = serve_status(["--max-limits", "memory=1G"], NO_CGROUP)
t.ok(rc == 125 and "cannot be enforced here" in err and "--allow-degraded=memory" in err,
     "[%s] a maximum the host cannot enforce: the server does not start" % WHO, (rc, err))
rc, err = serve_status(["--max-limits", "memory=1G", "--allow-degraded=memory"], NO_CGROUP)
t.eq(rc, 0, "[%s] ... unless --allow-degraded names it" % WHO)

# ---- asking, defaults, maximums

s = Server("epoll", args=["--default-limits", "open-files=100,cpu-time=60",
                          "--max-limits", "open-files=200,file-size=8M"], cwd=WS)
try:
    s.handshake()
    r = s.start("p1", ["sh", "-c", "ulimit -n; ulimit -t; ulimit -f"], cwd=WS)
    lim = limits_of(r)
    t.ok(lim and lim["open_files"] == {"value": 100, "by": "rlimit"} and
         lim["cpu_time"]["value"] == 60 and lim["file_size"]["value"] == 8 << 20,
         "[%s] nothing asked: the defaults, and the maximum of what has none" % WHO, r)
    res = s.wait_closed("p1")
    t.eq(res.stdout.split(), [b"100", b"60", b"16384"],
         "[%s] ... and the command has them (ulimit -f counts 512-byte blocks)" % WHO)
    t.ok("cordon" not in exited(res), "[%s] no limit reached: process/exited as before" % WHO,
         exited(res))
    r = s.start("p2", ["sh", "-c", "ulimit -n"], cwd=WS, cordon={"limits": {"open_files": 50}})
    t.eq(limits_of(r)["open_files"]["value"], 50, "[%s] a request may ask for less" % WHO)
    t.eq(s.wait_closed("p2").stdout, b"50\n", "[%s] ... and gets it" % WHO)
    r = s.start("p3", ["true"], cwd=WS, cordon={"limits": {"open_files": 500}})
    t.ok(err_code(r) == -32602 and
         "open_files: 500 asked, but this server allows at most 200" in err_msg(r),
         "[%s] a request asking more than the maximum is refused" % WHO, r)
    r = s.start("p4", ["true"], cwd=WS, cordon={"limits": {"file_size": "16M"}})
    t.ok(err_code(r) == -32602, "[%s] ... in the limit's own spelling too" % WHO, r)
    perm = dict(ROOT_READ, limits={"open_files": 40})
    r = s.start("p5", ["sh", "-c", "ulimit -n"], cwd=WS, sandbox=sandbox(perm))
    t.eq(limits_of(r)["open_files"]["value"], 40,
         "[%s] a permission profile's own limits count as asked" % WHO)
    t.eq(s.wait_closed("p5").stdout, b"40\n", "[%s] ... and hold in the sandbox" % WHO)
    perm = dict(ROOT_READ, limits={"open_files": 400})
    r = s.start("p6", ["true"], cwd=WS, sandbox=sandbox(perm))
    t.ok(err_code(r) == -32602 and "allows at most 200" in err_msg(r),
         "[%s] ... within the same maximums" % WHO, r)
    for pid, ext, want in (
            ("b1", {"limitz": {}}, "unknown field `limitz`, expected `limits` for `cordon`"),
            ("b2", {"limits": {"open_file": 5}}, "invalid `cordon.limits.open_file`"),
            ("b3", {"limits": {"tasks": "many"}}, "tasks: 'many' is not a whole number"),
            ("b4", [1], "expected cordon's extension")):
        r = s.start(pid, ["true"], cwd=WS, cordon=ext)
        t.ok(err_code(r) == -32602 and want in err_msg(r),
             "[%s] the cordon extension is strict: %s" % (WHO, want), r)
finally:
    s.stop()

# ---- limits reached, told in process/exited

s = Server("epoll", cwd=WS)
try:
    s.handshake()
    r = s.start("cpu", ["sh", "-c", "while :; do :; done"], cwd=WS,
                cordon={"limits": {"cpu_time": 1}}, sandbox=sandbox())
    res = s.wait_closed("cpu", 60)
    ex = exited(res)
    t.ok(ex.get("exitCode") == 128 + signal.SIGXCPU and
         ex.get("cordon") == {"limit": "cpu_time", "reason": "killed: CPU time limit 1 s reached"},
         "[%s] a busy loop: process/exited says the CPU time limit killed it" % WHO, ex)
    r = s.start("fill", ["sh", "-c", "exec cat /dev/zero > big"], cwd=WS,
                cordon={"limits": {"file_size": "1M"}},
                sandbox=sandbox(workspace_write(), roots=[WS]))
    res = s.wait_closed("fill", 60)
    ex = exited(res)
    t.ok(ex.get("cordon", {}).get("reason") == "killed: file size limit 1 MiB reached" and
         os.path.getsize(os.path.join(WS, "big")) == 1 << 20,
         "[%s] a disk filler: stopped at 1 MiB, and told" % WHO, ex)
    # A name of this run's own: the host's /tmp is shared with every other test.
    filler = "/tmp/cordon-limits-filler-%d-%s" % (os.getpid(), os.urandom(4).hex())
    r = s.start("tmp", ["sh", "-c", "df -k /tmp | tail -n 1; cat /dev/zero > %s; "
                        "wc -c < %s" % (filler, filler)], cwd=WS,
                cordon={"limits": {"private_tmp": "4M"}},
                sandbox=sandbox(workspace_write(), roots=[WS]))
    t.eq(r.get("result", {}).get("cordon", {}).get("privateTmp"), 4 << 20,
         "[%s] a private /tmp: its size in the result" % WHO)
    res = s.wait_closed("tmp", 60)
    out = res.stdout.split()
    t.ok(out[1:2] == [b"4096"] and int(out[-1]) <= 4 << 20 and
         b"No space left" in res.stderr and not os.path.exists(filler),
         "[%s] a filler of the private /tmp stops at its size; the host's /tmp untouched" % WHO,
         (res.stdout, res.stderr))
    r = s.start("tmpnosb", ["true"], cwd=WS, cordon={"limits": {"private_tmp": "4M"}})
    t.ok(err_code(r) == -32602 and "needs a sandbox" in err_msg(r),
         "[%s] a private /tmp without a sandbox is refused" % WHO, r)
finally:
    s.stop()

# ---- a fork bomb beside the server's other processes

BOMB = r"""
import os, signal
while True:
    try:
        pid = os.fork()
    except BlockingIOError:
        os.write(1, b"!")
        signal.pause()
        continue
    if pid:
        os.write(1, b"+")
"""

s = Server("epoll", cwd=WS)
try:
    s.handshake()
    r = s.start("bomb", ["python3", "-c", BOMB], cwd=WS, cordon={"limits": {"tasks": 16}},
                sandbox=sandbox())
    if "error" in r:
        t.ok(err_code(r) == -32602 and "task limit 16 cannot be enforced" in err_msg(r),
             "[%s] a task limit this host cannot enforce is refused" % WHO, r)
        t.skip("[%s] a fork bomb stopped at its task limit" % WHO, err_msg(r)[:300])
    else:
        t.diag("tasks by %s" % limits_of(r)["tasks"]["by"])
        deadline = time.monotonic() + 120
        out = b""
        while b"!" not in out and time.monotonic() < deadline:
            res = s.call("process/read", {"processId": "bomb", "waitMs": 1000})
            out = b"".join(base64.b64decode(c["chunk"]) for c in res["chunks"])
        t.ok(b"!" in out, "[%s] the bomb hits its task limit" % WHO, out[-200:])
        res2 = s.run("other", ["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sh -c : & done; wait; "
                               "echo other"], cwd=WS, sandbox=sandbox())[1]
        t.eq((res2.exit_code, res2.stdout), (0, b"other\n"),
             "[%s] meanwhile another process of the server forks and ends" % WHO)
        s.call("process/terminate", {"processId": "bomb"})
        res = s.wait_closed("bomb", 60)
        n = res.stdout.count(b"+")
        # Its init and the first python are two of the 16.
        t.ok(0 < n <= 14, "[%s] the bomb made %d processes, within 16 tasks" % (WHO, n),
             res.stdout)
        ex = exited(res)
        if limits_of(r)["tasks"]["by"] == "cgroup":
            t.ok(re.match(r"task limit 16 reached: \d+ forks? refused",
                          ex.get("cordon", {}).get("reason", "")),
                 "[%s] process/exited says the task limit was reached" % WHO, ex)
finally:
    s.stop()

# ---- a memory hog

HOG = r"""
import sys
chunks = []
try:
    for i in range(1024):
        chunks.append(b"x" * (1 << 20))
except MemoryError:
    print("stopped at", i, "MiB", flush=True)
    sys.exit(3)
"""
s = Server("epoll", args=["--allow-degraded=memory"], cwd=WS)
try:
    s.handshake()
    r = s.start("hog", ["python3", "-c", HOG], cwd=WS, cordon={"limits": {"memory": "64M"}},
                sandbox=sandbox())
    by = limits_of(r)["memory"]["by"]
    res2 = s.run("other", ["python3", "-c", "x = b'x' * (128 << 20); print('ok')"], cwd=WS,
                 sandbox=sandbox())[1]
    t.eq((res2.exit_code, res2.stdout), (0, b"ok\n"),
         "[%s] another process of the server takes 128 MiB meanwhile" % WHO)
    res = s.wait_closed("hog", 120)
    ex = exited(res)
    if by == "cgroup":
        t.ok(ex.get("exitCode") == 137 and
             ex.get("cordon", {}).get("reason") == "killed: memory limit 64 MiB reached",
             "[%s] the hog is killed at its memory limit, and told" % WHO, ex)
    else:
        t.ok(ex.get("exitCode") == 3 and b"stopped at" in res.stdout and
             any("NOT enforced for the sandbox as a whole" in d
                 for d in r["result"]["cordon"]["degraded"]),
             "[%s] the hog is stopped by RLIMIT_AS (degraded, and said so)" % WHO, (ex, r))
finally:
    s.stop()

# ---- an unsandboxed process's leftovers, where there is a cgroup

s = Server("epoll", cwd=WS)
try:
    s.handshake()
    # A name of its own, to find it from here (a root server's pids are its namespace's).
    mark = "600.%d" % os.getpid()
    r = s.start("left", ["sh", "-c", "setsid sleep %s >/dev/null 2>&1 & echo started" % mark],
                cwd=WS, cordon={"limits": {"open_files": 64}})
    res = s.wait_closed("left")
    left = pids_by_cmdline(lambda c: c == b"sleep\0" + mark.encode() + b"\0")
    probe = subprocess.run([CORDON, "probe"], stdout=subprocess.PIPE).stdout.decode()
    if re.search(r"^ok +cgroup v2", probe, re.M):
        t.ok(res.stdout == b"started\n" and not left,
             "[%s] cgroup.kill ends what an unsandboxed process left" % WHO, (left, res.stdout))
        # cordon-init, pid 1 of a sandboxed process's namespace, is in its cgroup too.
        res = s.run("init", ["sh", "-c", "tail -n 1 /proc/self/cgroup; tail -n 1 /proc/1/cgroup"],
                    cwd=WS, cordon={"limits": {"open_files": 64}}, sandbox=sandbox())[1]
        lines = res.stdout.decode().split()
        t.ok(len(lines) == 2 and "/sandbox-" in lines[0] and lines[0] == lines[1],
             "[%s] a sandboxed process and its init share the sandbox's cgroup" % WHO,
             res.stdout)
    else:
        t.skip("[%s] cgroup.kill ends what an unsandboxed process left" % WHO,
               "no cgroup for the sandboxes here")
    for pid in left:
        os.kill(pid, signal.SIGKILL)
finally:
    s.stop()

# ---- inotify limits: the sandboxes' own user namespaces

WATCHED = os.path.join(WS, "watched")
os.mkdir(WATCHED)
for i in range(10):
    open(os.path.join(WATCHED, "f%d" % i), "w").close()

# Unprivileged, the sandboxes have user namespaces of their own where the host makes them.
probe = subprocess.run([CORDON, "probe", "--json"], stdout=subprocess.PIPE).stdout.decode()
OWN_USERNS = os.geteuid() != 0 and json.loads(probe)["host"]["userns"]
rc, err = serve_status(["--default-limits", "inotify-instances=4"])
if not OWN_USERNS:
    t.ok(rc == 125 and "inotify instance limit 4 cannot be enforced" in err and
         "no user namespace" in err,
         "[%s] an inotify default the server cannot enforce: it does not start" % WHO,
         (rc, err))
    rc, err = serve_status(["--default-limits", "inotify-instances=4",
                            "--allow-degraded=inotify-instances"])
    t.eq(rc, 0, "[%s] ... unless --allow-degraded names it" % WHO)
else:
    t.eq(rc, 0, "[%s] an inotify default: the server starts" % WHO)

s = Server("epoll", args=["--max-limits", "inotify-instances=8"] +
           ([] if OWN_USERNS else ["--allow-degraded=inotify-instances"]), cwd=WS)
try:
    s.handshake()
    r = s.start("ino", ["python3", "-c", INOTIFY, "instances", "1000", "hold"], cwd=WS,
                cordon={"limits": {"inotify_instances": 4}}, sandbox=sandbox())
    lim = limits_of(r) or {}
    if OWN_USERNS:
        t.eq(lim["inotify_instances"], {"value": 4, "by": "userns"},
             "[%s] the result: 4 inotify instances, by the sandbox's user namespace" % WHO)
        t.ok(s.wait_output("ino", b"\n") and s.output_of("ino") == b"4 EMFILE\n",
             "[%s] the sandbox gets EMFILE at its 5th inotify instance" % WHO, s.output_of("ino"))
        res2 = s.run("other", ["python3", "-c", INOTIFY, "instances", "100", "exit"], cwd=WS,
                     sandbox=sandbox())[1]
        t.eq((res2.exit_code, res2.stdout), (0, b"8 EMFILE\n"),
             "[%s] meanwhile another process, asking nothing, gets 8 of its own (the "
             "maximum)" % WHO)
        res2 = s.run("w", ["python3", "-c", INOTIFY, "watches", "10", "exit", WATCHED], cwd=WS,
                     cordon={"limits": {"inotify_watches": 3}}, sandbox=sandbox())[1]
        t.eq(res2.stdout, b"3 ENOSPC\n", "[%s] inotify_watches 3: ENOSPC at the 4th" % WHO)
        s.call("process/terminate", {"processId": "ino"})
        ex = exited(s.wait_closed("ino", 60))
        t.ok("cordon" not in ex, "[%s] no limit reason on exit: nothing is killed" % WHO, ex)
    else:
        t.ok(lim.get("inotify_instances") == {"value": 4, "by": "not-enforced"} and
             any("inotify instance limit 4 NOT enforced" in d
                 for d in r["result"]["cordon"]["degraded"]),
             "[%s] a server opted down: not enforced, and said so" % WHO, r)
        s.call("process/terminate", {"processId": "ino"})
        s.wait_closed("ino", 60)
    r = s.start("more", ["true"], cwd=WS, cordon={"limits": {"inotify_instances": 9}},
                sandbox=sandbox())
    t.ok(err_code(r) == -32602 and "inotify_instances: 9 asked, but this server allows at "
         "most 8" in err_msg(r), "[%s] more inotify instances than the maximum: refused" % WHO,
         r)
finally:
    s.stop()

if not OWN_USERNS:
    s = Server("epoll", cwd=WS)
    try:
        s.handshake()
        r = s.start("ino", ["true"], cwd=WS, cordon={"limits": {"inotify_watches": 16}},
                    sandbox=sandbox())
        t.ok(err_code(r) == -32602 and "inotify watch limit 16 cannot be enforced" in err_msg(r)
             and "--allow-degraded=inotify-watches" in err_msg(r),
             "[%s] a server refuses an inotify limit it cannot enforce" % WHO, r)
    finally:
        s.stop()

shutil.rmtree(BASE, ignore_errors=True)
t.done()
