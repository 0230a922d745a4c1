#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# SIGTERM while workers are stuck on a hung file system: the server waits
# its bound for them (the pools' stop timeouts), warns that they did not
# stop, and exits. A worker stuck in a system call cannot be interrupted,
# and resumes the instant the file system lets go: from the moment the
# server gives up on them, it must free nothing they may read (their jobs,
# the connections, the hidden files' paths, the options, the server
# itself), or a worker that resumes then reads freed memory.
#
# Root only (a FUSE mount whose requests are never answered, rpcclient's
# Hung). Three workers are stuck: an fs/getMetadata below the mount, a
# sandboxed fs/getMetadata whose workspace root is on it (once the binding
# returns, it checks the server's hidden files: the server's own state),
# and a sandboxed process/start while the token's directory leads into the
# mount (its preparation's check of the hidden files). Synchronised on the
# server's test hooks: the mount lets go as soon as the server reports that
# it left its workers (server-workers-left), so the workers resume while
# the server finishes. Checks: it exits within the bound, with the warning,
# status 0, and nothing a sanitizer says (run with CORDON set to an
# --enable-sanitizers build to make that part bite). TAP.

import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (Hooks, Hung, Tap, Timeout, cordon_usable, fuse_why, profile,  # noqa: E402
                       special, uri, wait_threads_in_fuse)
from netclient import NetServer  # noqa: E402

TOKEN = "stop-stuck-token-0123456789"
# The pools' stop timeouts (fs.c FS_STOP_MS, methods.c START_STOP_MS: 2 s each) and a
# margin for a busy host; a server that waits for its workers waits as long as the hang.
BOUND = 15.0

t = Tap()
why = cordon_usable() or fuse_why()
if why:
    t.skip_all(why)

work = tempfile.mkdtemp(prefix="cordon-stop-stuck-")
os.chmod(work, 0o755)
tokdir = os.path.join(work, "tok")
os.mkdir(tokdir)
token_file = os.path.join(tokdir, "token")
with open(token_file, "w") as f:
    f.write(TOKEN + "\n")


def main():
    h = Hung(prefix="cordon-stop-stuck-hung-")
    hooks = Hooks()
    srv = NetServer("ws", args=["--auth-token-file", token_file], extra_env=hooks.env)
    rc, elapsed, left = None, None, False
    try:
        conns = [srv.connect(token=TOKEN) for _ in range(3)]
        for c in conns:
            c.handshake()
        ctx = {"permissions": profile([special("root", "read"),
                                       special("project_roots", "write")]),
               "windowsSandboxLevel": "disabled", "workspaceRoots": [uri(h.dir)],
               "cwd": uri("/")}
        conns[0].send_request("fs/getMetadata", {"path": uri(os.path.join(h.dir, "x"))})
        conns[1].send_request("fs/getMetadata", {"path": uri("/"), "sandbox": ctx})
        h.lead_into(tokdir)
        conns[2].send_request("process/start", {
            "processId": "p", "argv": ["true"], "cwd": uri("/"),
            "env": {"PATH": "/usr/bin:/bin"}, "tty": False,
            "sandbox": {"permissions": profile([special("root", "read")]),
                        "windowsSandboxLevel": "disabled"}})
        stuck = wait_threads_in_fuse(srv.server_pid, 3, timeout=30)
        t.ok(stuck >= 3, "three workers wait on the hung mount", "%d do" % stuck)
        t0 = time.monotonic()
        os.kill(srv.pid, signal.SIGTERM)
        try:
            hooks.wait("server-workers-left", timeout=BOUND)
            left = True
        except Timeout:
            pass
        # The workers resume now, while the server ends.
        h.release()
        try:
            rc = srv.p.wait(BOUND + 30)
        except Exception:
            rc = None
        elapsed = time.monotonic() - t0
    finally:
        h.release()
        srv.stop(timeout=30)
        h.close()
        hooks.close()
    err = srv.stderr_text()
    t.ok(left, "SIGTERM: the server reports that it leaves its stuck workers",
         "stderr tail:\n%s" % err[-2000:])
    t.ok(rc is not None and elapsed <= BOUND,
         "SIGTERM: it exits within %.0f s" % BOUND, "exit %r after %s s" % (
             rc, "%.1f" % elapsed if elapsed is not None else "?"))
    t.ok("did not stop within" in err, "SIGTERM: with a warning that jobs did not stop",
         "stderr tail:\n%s" % err[-2000:])
    bad = [w for w in ("Sanitizer", "runtime error", "Segmentation", "double free", "corrupted")
           if w in err]
    t.ok(rc == 0 and not bad, "SIGTERM: it exits cleanly (status 0, no sanitizer report)",
         "exit %r, found %r; stderr tail:\n%s" % (rc, bad, err[-3000:]))
    t.done()


try:
    main()
finally:
    shutil.rmtree(work, ignore_errors=True)
