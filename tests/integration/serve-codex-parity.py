#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Side by side: serve-request-id.py, serve-pathuri.py, serve-fs-write-stream.py,
# serve-http.py, serve-discover.py, serve-discover-v2.py and serve-parity-sweep.py, whose
# expectations were read off the released Codex exec-server, run against that binary as their control (stdio
# and WebSocket; no unix socket there). Skipped unless
# CODEX_BIN names the native binary of npm @openai/codex@0.169.0
# (node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex).
# TAP: the sub-scripts' lines, renumbered and tagged.

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = ["serve-request-id.py", "serve-pathuri.py", "serve-fs-write-stream.py", "serve-http.py",
           "serve-discover.py", "serve-fs-watch.py", "serve-parity-sweep.py",
           "serve-envconfig.py", "serve-discover-v2.py"]

binary = os.environ.get("CODEX_BIN", "")
if not binary or not os.access(binary, os.X_OK):
    print("1..0 # SKIP CODEX_BIN does not name the released codex binary "
          "(npm i @openai/codex@0.169.0; its vendor/.../bin/codex)")
    sys.exit(0)

# Its state directory must not be under /tmp (the binary refuses that).
work = tempfile.mkdtemp(prefix="cordon-codex-", dir="/var/tmp")
try:
    home = os.path.join(work, "home")
    os.mkdir(home)
    wrapper = os.path.join(work, "codex-serve")
    with open(wrapper, "w") as fh:
        # Stands in for `cordon serve ARGS`: `codex exec-server ARGS`.
        fh.write('#!/bin/sh\nshift\nCODEX_HOME=${CODEX_HOME:-%s} exec %s exec-server "$@"\n' % (home, binary))
    os.chmod(wrapper, 0o755)
    env = dict(os.environ, CORDON=wrapper, CORDON_TEST_SERVE_LOOPS="epoll",
               CD_TEST_CONTROL="codex", PYTHONDONTWRITEBYTECODE="1")
    n = 0
    for s in SCRIPTS:
        p = subprocess.run([sys.executable, os.path.join(HERE, s)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen = 0
        for line in p.stdout.splitlines():
            for verdict in ("ok ", "not ok "):
                if line.startswith(verdict):
                    rest = line[len(verdict):].lstrip("0123456789").lstrip(" -")
                    n += 1
                    seen += 1
                    print("%s%d - [codex %s] %s" % (verdict, n, s, rest))
                    break
            else:
                if line.startswith("1..0 # SKIP"):
                    n += 1
                    print("ok %d - [codex %s] # SKIP%s" % (n, s, line[len("1..0 # SKIP"):]))
                elif not line.startswith("1.."):
                    print("# " + line)
        if p.returncode != 0 or seen == 0:
            n += 1
            print("not ok %d - [codex %s] exited with status %d after %d results"
                  % (n, s, p.returncode, seen))
    print("1..%d" % n)
finally:
    shutil.rmtree(work, ignore_errors=True)
