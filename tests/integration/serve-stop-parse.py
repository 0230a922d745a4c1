#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# A large message (over 256 KiB: parsed on a worker) whose parse ends while
# the server stops is not handled: at SIGTERM the server frees its worker
# pools, which run the completions left, and a parsed process/start or
# fs/writeFile used to be dispatched then, on a stopping server (a start
# submitted to the pool being freed: a use after free; a write performed
# after the stop began, through a new pool nobody freed).
#
# Synchronised on the server's test hooks: the parse is held on its worker
# (CORDON_TEST_HOLD=parse) until the server reports server-stopping, then
# let go, so that it ends while the pools are freed, on any host. Checks:
# the server ends cleanly, and the request is neither handled (its -v log)
# nor performed. TAP.

import atexit
import json
import os
import signal
import subprocess
import sys
import shutil
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import CORDON, Hooks, Tap, b64, cordon_usable, server_env, uri  # noqa: E402
from netclient import UnixConn  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

work = tempfile.mkdtemp(prefix="cordon-stop-parse-")
atexit.register(shutil.rmtree, work, True)
BIG = 3 << 20  # payload bytes: well over the 256 KiB parsed on a worker


def one(tag, msg, performed):
    hooks = Hooks(hold=("parse",))
    path = os.path.join(work, tag.replace("/", "-") + ".sock")
    env = server_env("epoll")
    env.update(hooks.env)
    errf = tempfile.TemporaryFile()
    p = subprocess.Popen([CORDON, "serve", "--listen", "unix:" + path, "-v"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf,
                         env=env)
    try:
        hooks.wait("serve-ready")
        c = UnixConn(path)
        c.handshake()
        c.send_raw(msg)
        held = hooks.wait("fs-held", id="parse")
        p.send_signal(signal.SIGTERM)
        hooks.wait("server-stopping")
        hooks.release(held)
        rc = p.wait(120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        hooks.close()
    errf.seek(0)
    err = errf.read().decode(errors="replace")
    t.ok(rc in (0, -signal.SIGTERM, 128 + signal.SIGTERM) and "Sanitizer" not in err,
         "[%s] parsed while the server stops: it ends cleanly" % tag,
         "exit %r; stderr tail:\n%s" % (rc, err[-3000:]))
    # -v logs each request handled: the parsed one must not be, once the stop began.
    handled = [ln for ln in err.splitlines() if "serve: request 2 " in ln]
    t.ok(not handled and not performed(),
         "[%s] and the request is neither handled nor performed" % tag,
         "handled %r, performed %r" % (handled, performed()))


def start_msg():
    env = {"PATH": "/usr/bin:/bin", "BIG": "x" * BIG}
    return (json.dumps({"id": 2, "method": "process/start", "params": {
        "processId": "late", "argv": ["/bin/sh", "-c", "touch '%s/started'" % work],
        "cwd": uri("/"), "env": env, "tty": False}}) + "\n").encode()


def write_msg():
    return (json.dumps({"id": 2, "method": "fs/writeFile", "params": {
        "path": uri(os.path.join(work, "written")), "dataBase64": b64(b"y" * BIG)}})
        + "\n").encode()


one("process/start", start_msg(), lambda: os.path.exists(os.path.join(work, "started")))
one("fs/writeFile", write_msg(), lambda: os.path.exists(os.path.join(work, "written")))
t.done()
