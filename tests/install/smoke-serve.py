#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Smoke test of an installed `cordon serve` on stdio: initialize, start echo
# in a read-only sandbox, read its output and exit code, end the session.
# It needs the programs cordon serve executes (cordon-init ...), found in
# the configured libexec directory or beside cordon. Run by `make
# installcheck` and by the Debian package's autopkgtest (debian/tests).
# TAP on stdout; exit 0 passed, 1 failed, 77 skipped (cordon refused the
# sandbox: this host lacks a mechanism, and cordon names it).
#
#   CORDON=/usr/bin/cordon python3 smoke-serve.py

import base64
import json
import os
import select
import subprocess
import sys
import time

CORDON = os.environ.get("CORDON", "/usr/bin/cordon")
# Bounds a wait that only a failing test reaches; a busy host answers in far less.
WAIT = float(os.environ.get("CD_TEST_WAIT", "120"))
n = 0
failed = False


def ok(cond, desc, detail=None):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, desc))
    if not cond:
        failed = True
        if detail is not None:
            print("# " + repr(detail))
    sys.stdout.flush()
    return cond


env = dict(os.environ)
# A host without a mechanism the sandbox needs: cordon refuses (exit 125)
# and names it; that is a skip, not a failure.
pre = subprocess.run([CORDON, "run", "--profile", "read-only", "--", "true"],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
if pre.returncode == 125:
    print("# " + pre.stdout.decode(errors="replace").strip().replace("\n", "\n# "))
    print("1..0 # SKIP cordon refused the sandbox: this host lacks a mechanism")
    sys.exit(77)
env.pop("CORDON_POLICY_PATH", None)
srv = subprocess.Popen([CORDON, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env)
buf = b""
deadline = time.monotonic() + WAIT


def send(msg):
    # A server that exited early shows as EOF at the next receive().
    try:
        srv.stdin.write((json.dumps(msg) + "\n").encode())
        srv.stdin.flush()
    except BrokenPipeError:
        pass


def receive():
    """The next message from the server (newline-delimited JSON), or None at EOF."""
    global buf
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([srv.stdout], [], [], left)[0]:
            raise TimeoutError("no message from cordon serve within %.0f s" % WAIT)
        chunk = os.read(srv.stdout.fileno(), 65536)
        if not chunk:
            return None
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    return json.loads(line)


def response(i, notes):
    """The response with id i; notifications read meanwhile go to notes."""
    while True:
        m = receive()
        if m is None:
            return None
        if m.get("id") == i:
            return m
        notes.append(m)


try:
    notes = []
    send({"id": 1, "method": "initialize", "params": {"clientName": "cordon-smoke"}})
    r = response(1, notes)
    ok(r is not None and "result" in r, "initialize", r)
    send({"method": "initialized", "params": {}})
    root_read = {"type": "managed", "network": "restricted",
                 "file_system": {"type": "restricted", "entries": [
                     {"path": {"type": "special", "value": {"kind": "root"}},
                      "access": "read"}]}}
    send({"id": 2, "method": "process/start", "params": {
        "processId": "p1", "argv": ["echo", "hello from the sandbox"], "cwd": "file:///",
        "env": {"PATH": "/usr/bin:/bin"}, "tty": False,
        "sandbox": {"permissions": root_read, "windowsSandboxLevel": "disabled"}}})
    r = response(2, notes)
    res = (r or {}).get("result", {})
    started = ok(res.get("processId") == "p1" and res.get("sandboxType") == "linuxSeccomp",
       "process/start of echo in a read-only sandbox (sandboxType linuxSeccomp)", r)
    while started and not any(m.get("method") == "process/closed" for m in notes):
        m = receive()
        if m is None:
            break
        notes.append(m)
    out = b"".join(base64.b64decode(m["params"]["chunk"]) for m in notes
                   if m.get("method") == "process/output")
    ok(out == b"hello from the sandbox\n", "its output arrives in process/output", out)
    ex = [m["params"] for m in notes if m.get("method") == "process/exited"]
    ok(len(ex) == 1 and ex[0].get("exitCode") == 0, "process/exited with exit code 0", ex)
    ok(any(m.get("method") == "process/closed" for m in notes), "process/closed", notes)
finally:
    try:
        srv.stdin.close()
    except BrokenPipeError:
        pass
    try:
        rc = srv.wait(WAIT)
    except subprocess.TimeoutExpired:
        srv.kill()
        rc = srv.wait()
    err = srv.stderr.read().decode(errors="replace")
ok(rc == 0, "cordon serve exits 0 at the end of its input", (rc, err))
if failed and err:
    print("# stderr of cordon serve:\n" + "\n".join("# " + x for x in err.splitlines()))
print("1..%d" % n)
sys.exit(1 if failed else 0)
