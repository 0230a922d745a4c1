#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: file:// URIs read as the released Codex exec-server (0.169.0)
# reads them. Dot segments ("..", ".", "%2e%2e", ".%2E", at the start, at the
# end, beyond the root) are removed from the URI lexically before any lookup,
# so ".." after a symlink is the symlink's own directory; backslashes
# separate, "%2F" separates once decoded, doubled and trailing slashes go, a
# '%' without two hex digits stays; queries, fragments, hosts and %00 are
# refused. Checked where a URI is accepted: fs paths, process/start cwd,
# sandbox entries of process/start and of an fs sandbox context. Each
# expectation was read off the released binary. TAP; stdio (both loops) and
# WebSocket; runs as root and, from unprivileged.sh, as an ordinary user.

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (LOOPS, Server, Tap, b64, cordon_usable, err_code, err_msg,  # noqa: E402
                       profile, special, unb64)
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

T = os.path.realpath(tempfile.mkdtemp(prefix="cordon-pathuri-"))
os.chmod(T, 0o755)
for d in ("w/out", "t/s", "t/out"):
    os.makedirs(os.path.join(T, d))
for name in ("f", "w/f", "t/f", "w/x y", "w/a%b", "w/..x"):
    with open(os.path.join(T, name), "w") as fh:
        fh.write(name)
os.symlink(os.path.join(T, "t", "s"), os.path.join(T, "w", "l"))
U = "file://" + T  # T has no character a URI must escape (mkdtemp under /tmp)

# (URI, what fs/readFile reads on the released binary; None: refused with -32602)
READS = [
    (U + "/w/f", "w/f"),
    (U + "/w/l/../f", "w/f"),  # l is a symlink to t/s: physically t/f
    (U + "/w/./f", "w/f"),
    (U + "/w/%2e%2e/f", "f"),
    (U + "/w/%2E%2E/w/f", "w/f"),
    (U + "/w/.%2e/f", "f"),
    (U + "/w/%2e./f", "f"),
    (U + "/w/%2e/f", "w/f"),
    ("file:///.." + T + "/f", "f"),
    ("file:///../.." + T + "/f", "f"),
    (U + "/w/f/.", "w/f"),
    (U + "/w/f/", "w/f"),
    (U + "/w//f", "w/f"),
    ("file:///" + T + "/w/f", "w/f"),
    ("file://localhost" + T + "/w/../f", "f"),
    ("file://LOCALHOST" + T + "/w/f", "w/f"),
    (U + "/w%2ff", "w/f"),
    (U + "/w%2Ff", "w/f"),
    (U + "/w/%2e%2e%2ff", "f"),
    (U + "/w/x%2fb/../f", "w/f"),
    (U + "\\w\\f", "w/f"),
    (U + "/w\\..\\f", "f"),
    (U + "/w/x y", "w/x y"),
    (U + "/w/x%20y", "w/x y"),
    (U + "/w/\tf", "w/f"),
    ("FILE://" + T + "/w/f", "w/f"),
    ("file:" + T + "/w/f", "w/f"),
    (" " + U + "/w/f ", "w/f"),
    (U + "/w/a%b", "w/a%b"),
    (U + "/w/a%25b", "w/a%b"),
    (U + "/w/%2e%2ex", "w/..x"),
    (U + "/w/f?x=1", None),
    (U + "/w/f?", None),
    (U + "/w/../f?", None),
    (U + "/w/f#x", None),
    (U + "/w/f#", None),
    (U + "/w/f%00", None),
    ("file://user@localhost" + T + "/w/f", None),
    ("file://localhost:80" + T + "/w/f", None),
]
# Hosts: refused by both (Codex: -32600 "'...' is invalid on 'linux'" from fs
# methods, -32602 from process/start; cordon: -32602 from all).
HOSTS = ["file://host" + T + "/w/f", "file://127.0.0.1" + T + "/w/f",
         "file://[::1]" + T + "/w/f"]

# (cwd URI, the directory /bin/pwd prints there)
CWDS = [
    (U + "/w/l/..", T + "/w"),
    (U + "/w/l/%2e%2e", T + "/w"),
    (U + "/w/f/..", T + "/w"),
    (U + "/w/..", T),
    ("file:///..", "/"),
    ("file:///../" + T + "/w/.", T + "/w"),
    (U + "/w/l/../l", T + "/t/s"),
]


def reads(s, tag):
    for u, want in READS:
        r = s.request("fs/readFile", {"path": u})
        if want is None:
            t.ok(err_code(r) == -32602, "[%s] readFile %r: refused, -32602" % (tag, u), r)
        else:
            got = unb64(r["result"]["dataBase64"]).decode() if "result" in r else None
            t.ok(got == want, "[%s] readFile %r reads %s" % (tag, u, want), r)
    for u in HOSTS:
        r = s.request("fs/readFile", {"path": u})
        t.ok(err_code(r) in (-32600, -32602), "[%s] readFile %r: refused" % (tag, u), r)


def cwds(s, tag):
    for i, (u, want) in enumerate(CWDS):
        pid = "cwd-%d" % i
        r = s.request("process/start", {"processId": pid, "argv": ["/bin/pwd"], "cwd": u,
                                        "env": {"PATH": "/usr/bin:/bin"}, "tty": False})
        if "error" in r:
            t.not_ok("[%s] cwd %r: started" % (tag, u), r)
            continue
        s.wait_closed(pid)
        got = s.output_of(pid).decode().strip()
        t.eq(got, want, "[%s] cwd %r is %s, lexically" % (tag, u, want))
    for u, _ in [x for x in READS if x[1] is None] + [(h, None) for h in HOSTS]:
        r = s.request("process/start", {"processId": "bad", "argv": ["/bin/true"], "cwd": u,
                                        "env": {}, "tty": False})
        t.ok(err_code(r) == -32602, "[%s] cwd %r: refused, -32602" % (tag, u), r)


def sandboxed(s, tag):
    """A writable sandbox entry "w/l/../out" grants w/out, not t/out (l's physical parent)."""
    for d in ("w/out", "t/out"):
        for n in os.listdir(os.path.join(T, d)):
            os.unlink(os.path.join(T, d, n))
    perms = profile([special("root", "read"),
                     {"path": {"type": "path", "path": U + "/w/l/../out"}, "access": "write"}])
    pid = "sb-" + tag
    script = "echo a > %s/w/out/a && echo wrote-w; echo b > %s/t/out/b && echo wrote-t" % (T, T)
    r = s.request("process/start", {
        "processId": pid, "argv": ["/bin/sh", "-c", script], "cwd": U + "/w/./l/..",
        "env": {"PATH": "/usr/bin:/bin"}, "tty": False,
        "sandbox": {"permissions": perms, "windowsSandboxLevel": "disabled"}})
    if "error" in r and "andlock" in err_msg(r):
        t.skip("[%s] sandbox entry with '..'" % tag, err_msg(r))
        return
    t.ok("result" in r, "[%s] sandboxed start with a '..' entry and cwd" % tag, r)
    if "result" not in r:
        return
    s.wait_closed(pid)
    out = s.output_of(pid).decode()
    t.ok("wrote-w" in out and os.path.exists(os.path.join(T, "w/out/a")),
         "[%s] sandbox: w/l/../out grants w/out" % tag, out)
    t.ok("wrote-t" not in out and not os.path.exists(os.path.join(T, "t/out/b")),
         "[%s] sandbox: ... and not t/out, the symlink's parent" % tag, out)

    # The same entry in an fs sandbox context.
    ctx = {"permissions": perms, "windowsSandboxLevel": "disabled", "cwd": U + "/w/%2e",
           "workspaceRoots": [U + "/w/l/.."]}
    r = s.request("fs/writeFile", {"path": U + "/w/l/../out/c", "dataBase64": b64(b"c"),
                                   "sandbox": ctx})
    t.ok("result" in r and os.path.exists(os.path.join(T, "w/out/c")),
         "[%s] fs sandbox context: a write through w/l/../out lands in w/out" % tag, r)
    r = s.request("fs/writeFile", {"path": U + "/t/out/c", "dataBase64": b64(b"c"),
                                   "sandbox": ctx})
    t.ok("error" in r and not os.path.exists(os.path.join(T, "t/out/c")),
         "[%s] fs sandbox context: t/out stays unwritable" % tag, r)


def run(s, tag):
    s.handshake()
    reads(s, tag)
    cwds(s, tag)
    sandboxed(s, tag)


try:
    for loop in LOOPS:
        s = Server(loop=loop)
        t.guard("[stdio %s]" % loop, run, s, "stdio %s" % loop)
        s.stop()
    ns = NetServer("ws")
    if ns.ready:
        c = ns.connect()
        t.guard("[ws]", run, c, "ws")
        c.drop()
    else:
        t.not_ok("[ws] server listening", ns.stderr_text())
    ns.stop()
finally:
    shutil.rmtree(T, ignore_errors=True)
t.done()
