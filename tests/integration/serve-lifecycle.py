#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: lifecycle. stdin EOF, SIGTERM, SIGINT and SIGHUP kill every
# child and exit 0; a SIGKILLed server takes every descendant with it (as
# root the server is the init of its own pid namespace; otherwise it and the
# process the client started are child subreapers); no zombies; an idle
# server uses no CPU; the
# CLI refuses the transports that are not there yet. TAP; both event loops.
# The test waits for what must happen (WAIT bounds only a failure); what must
# happen promptly gets PROMPT; a pending long poll is the server's read-wait
# event (CORDON_TEST_EVENTS), not a sleep.
#
# s.pid is the process the test spawned (signals go there); s.server_pid the
# one running the loop, the parent of the processes (its only child: the pid
# namespace's init as root, the inner subreaper otherwise).

import os
import pwd
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, LOOPS, PROMPT, ROOT_READ, WAIT, Hooks, Server,  # noqa: E402
                       Tap, children_of, cordon_usable, cpu_ticks, kill_quietly, pid_alive,
                       pids_by_cmdline, wait_asleep, wait_gone)

t = Tap()
# The server keeps a SIGHUP ignored by whoever started it (nohup); the
# servers started here must not inherit that from how the suite was run.
signal.signal(signal.SIGHUP, signal.SIG_DFL)
why = cordon_usable()
if why:
    t.skip_all(why)

ROOT = os.geteuid() == 0
# Descendants that leave the command's process group and session.
TREE = "sleep %s & (setsid sleep %s &) ; sleep %s"
_serial = [0]


def durations(n):
    """n sleep durations that no other process on the host uses."""
    _serial[0] += 1
    return ["%d.%d%03d" % (900 + i, os.getpid(), _serial[0]) for i in range(n)]


def find_sleepers(durs, timeout=WAIT):
    """Host pids of the `sleep D` processes for durations durs (waiting for all)."""
    want = {("sleep\0%s\0" % d).encode() for d in durs}
    deadline = time.monotonic() + timeout
    while True:
        found = pids_by_cmdline(lambda c: c in want)
        if len(found) >= len(durs) or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def with_sleepers(tag, n=2, sandboxed=False):
    """A server with n `sleep 100` children; returns (server, their pids)."""
    s = Server(tag)
    s.handshake()
    for i in range(n):
        kw = {}
        if sandboxed and i % 2:
            kw["sandbox"] = {"permissions": ROOT_READ, "windowsSandboxLevel": "disabled"}
        r = s.start("sleep%d" % i, ["sleep", "100"], **kw)
        if "error" in r:
            raise AssertionError("start failed: %r" % r)
    deadline = time.monotonic() + WAIT
    kids = []
    while time.monotonic() < deadline:
        kids = children_of(s.server_pid)
        if len(kids) >= n:
            break
        time.sleep(0.02)
    return s, kids


def ending(tag, how):
    s, kids = with_sleepers(tag, 2, sandboxed=True)
    try:
        t.eq(len(kids), 2, "[%s] %s: the server has 2 running children" % (tag, how))
        t0 = time.monotonic()
        if how == "stdin EOF":
            s.close_stdin()
        else:
            os.kill(s.pid, getattr(signal, how))
        rc = s.wait(WAIT)
        dt = time.monotonic() - t0
        t.ok(rc == 0 and dt < PROMPT, "[%s] %s: the server exits 0 at once (%.2f s)"
             % (tag, how, dt), rc)
        t.ok(wait_gone(kids), "[%s] %s: every child is gone" % (tag, how),
             [k for k in kids if pid_alive(k)])
    finally:
        for k in kids:
            kill_quietly(k)
        s.stop()


def busy_end(tag, how, busy):
    """The end must abandon a pending long poll (reference 1.5: a request in flight
    when the transport goes away is abandoned) and must not be starved by a
    process flooding output while the client still reads."""
    hooks = Hooks()
    s = Server(tag, extra_env=hooks.env)
    try:
        s.handshake()
        if busy == "flood":
            s.start("flood", ["yes"])
        s.start("sleeper", ["sleep", "100"])
        kids = children_of(s.server_pid)  # started: forked before the answer
        if busy == "long poll":
            # Past WAIT: an end that waits for the poll fails.
            s.send({"id": 77, "method": "process/read",
                    "params": {"processId": "sleeper", "afterSeq": 0,
                               "waitMs": int(WAIT * 2000)}})
            hooks.wait("read-wait", id=77)
        t0 = time.monotonic()
        if how == "stdin EOF":
            s.close_stdin()
        else:
            os.kill(s.pid, signal.SIGTERM)
        rc = s.wait(WAIT)
        dt = time.monotonic() - t0
        t.ok(rc == 0 and dt < PROMPT, "[%s] %s during %s: exit 0 at once (%.2f s)"
             % (tag, how, "a pending long poll" if busy == "long poll" else
                "an output flood the client reads", dt), rc)
        want = 2 if busy == "flood" else 1
        t.ok(len(kids) == want and wait_gone(kids),
             "[%s] %s during %s: the children are gone" % (tag, how, busy), kids)
    finally:
        s.stop()
        hooks.close()


def sigkill(tag):
    s, kids = with_sleepers(tag, 2, sandboxed=True)
    try:
        t.eq(len(kids), 2, "[%s] SIGKILL: 2 children running" % tag)
        os.kill(s.pid, signal.SIGKILL)
        s.p.wait()
        t.ok(wait_gone(kids), "[%s] server SIGKILLed: its direct children die (PDEATHSIG)"
             % tag, [k for k in kids if pid_alive(k)])
    finally:
        for k in kids:
            kill_quietly(k)
        s.stop()


def sigkill_descendants(tag, victim, args=()):
    """Nothing the server started survives it, even when it is SIGKILLed. As root the
    server is the init of its own pid namespace (the kernel kills everything in it);
    unprivileged, or with --pid-namespace=never, the server and the process the client
    started are child subreapers, and whichever survives kills the rest. victim:
    "server" is the process the client spawned, "init" the one that runs the loop."""
    mode = "pid namespace" if ROOT and not args else "subreapers"
    what = "[%s] server SIGKILLed (%s, %s): descendants that left the group die" % (
        tag, victim, mode)
    # "group": one SIGKILL to the started process's whole process group (a runner's
    # killpg on timeout), in a session of its own so the test is not in it.
    s = Server(tag, args=list(args), new_session=(victim == "group"))
    found = []
    try:
        s.handshake()
        d = durations(6)
        r1 = s.start("tree", ["sh", "-c", TREE % tuple(d[:3])])
        r2 = s.start("stree", ["sh", "-c", TREE % tuple(d[3:])],
                     sandbox={"permissions": ROOT_READ, "windowsSandboxLevel": "disabled"})
        t.ok("result" in r1 and r2.get("result", {}).get("sandboxType") == "linuxSeccomp",
             "[%s] %s: an unsandboxed and a sandboxed tree start" % (tag, victim), (r1, r2))
        found = find_sleepers(d)
        t.eq(len(found), 6, "[%s] %s: the trees run their 6 sleeps" % (tag, victim))
        init = s.server_pid
        t.ok(init != s.pid, "[%s] %s: the server loop runs in a child of the started process"
             " (%s)" % (tag, victim, mode))
        if victim == "group":
            os.killpg(s.pid, signal.SIGKILL)
        else:
            os.kill(s.pid if victim == "server" else init, signal.SIGKILL)
        t0 = time.monotonic()
        rc = s.p.wait(WAIT)
        gone = wait_gone(found + [init])
        t.ok(gone, "%s (%.2f s)" % (what, time.monotonic() - t0),
             [p for p in found + [init] if pid_alive(p)])
        t.eq(rc, -signal.SIGKILL if victim != "init" else 128 + signal.SIGKILL,
             "[%s] %s: the exit status says SIGKILL" % (tag, victim))
    finally:
        for p in found:
            kill_quietly(p)
        s.stop()


def pidns_cli():
    def run(*args):
        return subprocess.run(list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=WAIT)

    r = run(CORDON, "serve", "--pid-namespace=bogus")
    t.ok(r.returncode == 2 and b"--pid-namespace" in r.stderr,
         "--pid-namespace=bogus: usage error, exit 2", r.stderr)
    r = run(CORDON, "serve", "--help")
    t.ok(b"--pid-namespace" in r.stdout, "--help documents --pid-namespace")
    for mode in ("auto", "never") + (("always",) if ROOT else ()):
        r = run(CORDON, "serve", "--pid-namespace=" + mode)
        t.ok(r.returncode == 0 and r.stdout == b"" and r.stderr == b"",
             "--pid-namespace=%s: EOF at once, exit 0, silent" % mode, r.stderr)

    # Unprivileged, `always` must refuse rather than serve without the namespace.
    desc = "--pid-namespace=always unprivileged: exit 125, names the reason and the fix"
    argv = [CORDON, "serve", "--pid-namespace=always"]
    if ROOT:
        setpriv = shutil.which("setpriv")
        try:
            pw = pwd.getpwnam("cordon-test")
        except KeyError:
            pw = None
        if not setpriv or not pw:
            t.skip(desc, "needs setpriv and the user cordon-test to drop root")
            return
        argv = [setpriv, "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid,
                "--clear-groups"] + argv
    r = run(*argv)
    if ROOT and r.returncode in (126, 127):
        t.skip(desc, "cordon-test cannot run %s: %r" % (CORDON, r.stderr))
        return
    t.ok(r.returncode == 125 and b"cannot create a pid namespace" in r.stderr and
         b"CAP_SYS_ADMIN" in r.stderr and b"--pid-namespace=auto" in r.stderr, desc,
         (r.returncode, r.stderr))


def zombies_and_idle(tag):
    s = Server(tag)
    try:
        s.handshake()
        for i in range(5):
            s.start("z%d" % i, ["sh", "-c", "exit %d" % i])
        s.start("bg", ["sh", "-c", "sleep 0.2 & exit 0"])
        for i in range(5):
            s.wait_closed("z%d" % i)
        s.wait_closed("bg")
        # The orphaned background sleep is reaped once it exits: wait for that.
        deadline = time.monotonic() + WAIT
        while children_of(s.server_pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        t.eq(children_of(s.server_pid), [],
             "[%s] no zombies: the server has no children left" % tag)
        zombies = []
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open("/proc/%s/stat" % p) as f:
                        st = f.read()
                except OSError:
                    continue
                fields = st[st.rindex(")") + 2:].split()
                if fields[0] == "Z" and int(fields[1]) == s.server_pid:
                    zombies.append(int(p))
        t.eq(zombies, [], "[%s] no zombie process has the server as parent" % tag)

        # Idle: nothing running (but closed entries retained). Measured once the
        # server answered a request and sleeps: nothing of before is counted.
        settle(s)
        c0 = cpu_ticks(s.server_pid)
        time.sleep(1.0)
        c1 = cpu_ticks(s.server_pid)
        t.eq(c1 - c0, 0, "[%s] idle with retained entries: no CPU over 1 s" % tag)
        # Idle with a running child that prints nothing.
        s.start("idle", ["sleep", "100"])
        settle(s)
        c0 = cpu_ticks(s.server_pid)
        time.sleep(1.0)
        c1 = cpu_ticks(s.server_pid)
        t.eq(c1 - c0, 0, "[%s] idle with a silent running child: no CPU over 1 s" % tag)
        t.eq(s.stop(), 0, "[%s] exit 0" % tag)
    finally:
        s.stop()


def settle(s):
    """The server answered everything sent so far and sleeps."""
    s.request("environment/status")
    wait_asleep(s.server_pid)


def fresh_idle(tag):
    s = Server(tag)
    try:
        s.handshake()
        settle(s)
        c0 = cpu_ticks(s.server_pid)
        time.sleep(1.0)
        c1 = cpu_ticks(s.server_pid)
        t.eq(c1 - c0, 0, "[%s] idle after the handshake: no CPU over 1 s" % tag)
        hooks = Hooks()
        s2 = Server(tag, extra_env=hooks.env)
        hooks.wait("serve-ready")  # set up: its loop waits for the first input
        wait_asleep(s2.server_pid)
        c0 = cpu_ticks(s2.server_pid)
        time.sleep(0.5)
        t.eq(cpu_ticks(s2.server_pid) - c0, 0, "[%s] idle before any input: no CPU" % tag)
        t.eq(s2.stop(), 0, "[%s] EOF before initialize: exit 0" % tag)
        hooks.close()
        t.eq(s2.stderr_text(), "", "[%s] a silent EOF prints nothing on stderr" % tag)
    finally:
        s.stop()


def verbose(tag):
    s = Server(tag, args=["-v"])
    try:
        s.handshake()
        s.run("v", ["echo", "hi"])
        s.request("nope/x")
        t.eq(s.stop(), 0, "[%s] -v: exit 0" % tag)
        # Every stdout line was parsed as JSON by the client already.
        t.ok(s.lines and s.stderr_text(), "[%s] -v logs on stderr only; stdout stays JSON" % tag,
             s.stderr_text())
    finally:
        s.stop()


def cli():
    def run(*args, env=None):
        return subprocess.run([CORDON, "serve"] + list(args), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT,
                              env=env)

    r = run("--help")
    t.ok(r.returncode == 0 and b"--listen" in r.stdout and b"--max-processes" in r.stdout,
         "cordon serve --help: exit 0, lists the options", r.stdout + r.stderr)
    # The ws:// and unix: transports themselves are tested in serve-net.py.
    for bad in ("ws://127.0.0.1", "ws://127.0.0.1:65536", "ws://[::1]8080", "unix:"):
        r = run("--listen", bad)
        t.ok(r.returncode == 2 and b"--listen" in r.stderr,
             "--listen %s: usage error, exit 2" % bad, r.stderr)
    r = run("--listen", "http://127.0.0.1:1")
    t.eq(r.returncode, 2, "--listen with an unknown scheme: exit 2")
    for bad in (["--loop", "select"], ["--max-processes", "x"],
                ["--bogus"], ["extra-arg"]):
        r = run(*bad)
        t.ok(r.returncode == 2 and r.stderr, "%s: usage error, exit 2" % " ".join(bad), r.stderr)
    for loop in ("epoll", "poll"):
        r = subprocess.run([CORDON, "serve", "--loop", loop], input=b"", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=WAIT)
        t.ok(r.returncode == 0 and r.stdout == b"", "--loop %s: EOF at once, exit 0" % loop,
             r.stderr)
    r = subprocess.run([CORDON, "serve", "--listen", "stdio://"], input=b"", stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=WAIT)
    t.eq(r.returncode, 0, "--listen stdio:// is stdio")


cli()
t.guard("--pid-namespace", pidns_cli)
for loop in LOOPS:
    for how in ("stdin EOF", "SIGTERM", "SIGINT", "SIGHUP"):
        t.guard("[%s] %s" % (loop, how), ending, loop, how)
    for how in ("stdin EOF", "SIGTERM"):
        for busy in ("long poll", "flood"):
            t.guard("[%s] %s during %s" % (loop, how, busy), busy_end, loop, how, busy)
    t.guard("[%s] SIGKILL" % loop, sigkill, loop)
    for victim in ("server", "init", "group"):
        t.guard("[%s] SIGKILL %s: descendants" % (loop, victim), sigkill_descendants, loop, victim)
        if ROOT:
            t.guard("[%s] SIGKILL %s: descendants, --pid-namespace=never" % (loop, victim),
                    sigkill_descendants, loop, victim, ["--pid-namespace=never"])
    t.guard("[%s] zombies and idle" % loop, zombies_and_idle, loop)
    t.guard("[%s] fresh idle" % loop, fresh_idle, loop)
    t.guard("[%s] verbose" % loop, verbose, loop)
t.done()
