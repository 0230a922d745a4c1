#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon run` on a terminal. The command can open its own terminal again by
# name (/dev/stderr, /dev/stdout) with the access it was handed, and make
# new terminals (a private /dev/pts); the host's other terminals, which a
# readable /dev used to expose (another shell's keystrokes), cannot be
# opened; writes outside the workspace stay denied. TAP.

import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import CORDON, WAIT, Tap  # noqa: E402

t = Tap()
ENV = dict(os.environ)
ENV.pop("CORDON_TEST_DISABLE", None)
if os.environ.get("CD_POLICYDIR"):
    ENV["CORDON_POLICY_PATH"] = os.environ["CD_POLICYDIR"]
try:
    _m, _s = os.openpty()
    os.close(_m)
    os.close(_s)
except OSError as e:
    t.skip_all("no pseudo-terminals here: %s" % e)


def drain(m, p, timeout=WAIT):
    """Everything written to the terminal whose master is m, until p is done with it."""
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([m], [], [], 0.1)[0]:
            try:
                data = os.read(m, 65536)
            except OSError:  # EIO: no slave left open
                break
            if not data:
                break
            out += data
        elif p.poll() is not None:
            break
    return out


def run(script, ws, profile="workspace-write", stdin_ro=False, args=()):
    """`sh -c script` under cordon run on a fresh terminal: (status, terminal output).
    stdin_ro: standard input is another terminal, opened read-only."""
    m, s = os.openpty()
    m2, s2 = os.openpty() if stdin_ro else (-1, -1)
    fin = os.open(os.ttyname(s2), os.O_RDONLY | os.O_NOCTTY) if stdin_ro else s
    try:
        p = subprocess.Popen([CORDON, "run", "--profile", profile, "--workspace-root", ws,
                              "--cwd", ws] + list(args) + ["--", "sh", "-c", script], stdin=fin, stdout=s,
                             stderr=s, env=ENV, start_new_session=True)
    finally:
        for fd in {fin, s, s2} - {-1}:
            os.close(fd)
    try:
        out = drain(m, p)
        rc = p.wait(timeout=WAIT)
    finally:
        for fd in (m, m2):
            if fd >= 0:
                os.close(fd)
        if p.poll() is None:
            p.kill()
    return rc, out


base = tempfile.mkdtemp(prefix="cordon-term-", dir="/var/tmp")
try:
    ws = os.path.join(base, "ws")
    os.mkdir(ws)

    rc, out = run("echo via-stderr > /dev/stderr && echo via-stdout > /dev/stdout", ws)
    t.ok(rc == 0 and b"via-stderr" in out and b"via-stdout" in out,
         "its own terminal can be opened again by name (/dev/stderr, /dev/stdout)", (rc, out))
    rc, out = run("echo x > /dev/stderr", ws, profile="read-only")
    t.ok(rc == 0 and b"x" in out, "also under read-only", (rc, out))

    outside = os.path.join(base, "outside")
    rc, out = run("echo x > '%s'" % outside, ws)
    t.ok(rc != 0 and not os.path.exists(outside),
         "a write outside the workspace is still denied on a terminal", (rc, out))

    rc, out = run("python3 -c 'import os; m, s = os.openpty(); os.write(s, b\"inner\\n\"); "
                     "print(os.read(m, 64))'", ws)
    t.ok(rc == 0 and b"inner" in out, "a new terminal can be made inside (openpty)", (rc, out))
    if shutil.which("script"):
        rc, out = run("script -qc 'echo under-script' /dev/null", ws)
        t.ok(rc == 0 and b"under-script" in out, "script(1) runs inside", (rc, out))
    else:
        t.skip("script(1) runs inside", "script is not installed")

    # Another terminal of the user's, with something typed into it.
    om, osl = os.openpty()
    try:
        other = os.ttyname(osl)
        os.write(om, b"typed\n")
        rc, out = run("head -c 6 < %s" % other, ws)
        t.ok(rc != 0 and b"typed" not in out,
             "another terminal (%s) cannot be opened for reading" % other, (rc, out))
        rc, out = run("echo intruder > %s" % other, ws)
        os.set_blocking(om, False)
        try:
            seen = os.read(om, 4096)
        except BlockingIOError:
            seen = b""
        t.ok(rc != 0 and b"intruder" not in seen,
             "nor for writing (%s)" % other, (rc, out, seen))
    finally:
        os.close(om)
        os.close(osl)

    # The access it was handed, no more: stdin is another terminal, opened read-only.
    rc, out = run("exec 3</dev/stdin && echo read-ok", ws, stdin_ro=True)
    t.ok(rc == 0 and b"read-ok" in out, "stdin opened read-only: /dev/stdin opens for reading",
         (rc, out))
    rc, out = run("true 3>/dev/stdin; echo rc=$?", ws, stdin_ro=True)
    t.ok(b"rc=0" not in out and b"rc=" in out, "but not for writing", (rc, out))
    # Nor through /dev/tty, after making it the controlling terminal of a new session.
    rc, out = run("python3 -c 'import os, sys\n"
                  "os.setsid()\n"
                  "os.close(os.open(\"/proc/self/fd/0\", os.O_RDONLY))\n"
                  "try:\n"
                  "    os.open(\"/dev/tty\", os.O_WRONLY)\n"
                  "    print(\"tty-writable\")\n"
                  "except OSError as e:\n"
                  "    print(\"tty-refused\", e.errno)\n'", ws, stdin_ro=True)
    t.ok(b"tty-refused 13" in out,
         "nor through /dev/tty once it is the controlling terminal", (rc, out))

    # /dev/ptmx denied: no terminal is made, by that name or the private instance's.
    rc, out = run("python3 -c 'import os\n"
                  "for p in (\"/dev/ptmx\", \"/dev/pts/ptmx\"):\n"
                  "    try:\n"
                  "        os.open(p, os.O_RDWR | os.O_NOCTTY)\n"
                  "        print(p, \"opened\")\n"
                  "    except OSError as e:\n"
                  "        print(p, \"refused\")\n'", ws, args=["--deny", "/dev/ptmx"])
    t.ok(b"/dev/ptmx refused" in out and b"/dev/pts/ptmx refused" in out,
         "--deny /dev/ptmx: neither /dev/ptmx nor /dev/pts/ptmx makes a terminal", (rc, out))

    # One sandbox cannot take the kernel's whole pool of terminals.
    rc, out = run("python3 -c 'import os\n"
                  "n = 0\n"
                  "try:\n"
                  "    while n < 400:\n"
                  "        os.open(\"/dev/ptmx\", os.O_RDWR | os.O_NOCTTY)\n"
                  "        n += 1\n"
                  "except OSError as e:\n"
                  "    print(\"made\", n, e.errno)\n'", ws)
    t.ok(b"made 256 28" in out, "at most 256 terminals in the private /dev/pts", (rc, out))
finally:
    shutil.rmtree(base, ignore_errors=True)
t.done()
