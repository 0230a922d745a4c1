#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# The server's own files (its --auth-token-file, its unix socket) stay
# hidden from its sandboxes even where a sandbox may write around them. A
# mask is a mount on a path: were a directory above the file renamed, the
# mask would go with it, and every sandbox made afterwards would find the
# file at its new path (a token read there lets a sandbox connect and run
# an unsandboxed process/start). So, with the files below a directory the
# sandbox may write (/tmp):
#   - a sandbox cannot rename a directory above either file, nor the file;
#   - a sandbox made after such a rename attempt does not find the file
#     where the rename would have taken it;
#   - when the files are moved or replaced by anyone else (a process
#     outside every sandbox here), every sandboxed request (process/start,
#     fs/* with a sandbox) is refused with -32602 naming the file and the
#     fix, the server logs it once, unsandboxed requests still run, and
#     sandboxed ones run again once the file is back (not a replacement);
#   - without user namespaces (unprivileged, degraded), where nothing can be
#     hidden, a sandbox that could read the token file is refused.
# TAP.

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, Eof, Tap, Timeout, cordon_usable, path_entry,  # noqa: E402
                       profile, special, uri, workspace_write)
from netclient import HandshakeError, NetServer  # noqa: E402

TOKEN = "hidden-test-token-0123456789abcdef"
# What a sandbox may do: write /tmp (and the workspace), read the rest.
WRITE_TMP = {"permissions": workspace_write(), "windowsSandboxLevel": "disabled"}
# The second sandbox, as in the red team's attack: network enabled, /tmp writable.
NET_TMP = {"permissions": profile([special("root", "read"), special("slash_tmp", "write")],
                                  network="enabled"),
           "windowsSandboxLevel": "disabled"}

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
HAVE_WS = b"without the WebSocket transport" not in subprocess.run(
    [CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).stderr

work = tempfile.mkdtemp(prefix="cordon-hidden-")
os.chmod(work, 0o755)
ws = os.path.join(work, "ws")
os.mkdir(ws)


serial = [0]


def sh(conn, name, script, sandbox):
    """Run script under sandbox; (start error or None, exit code, stdout+stderr text)."""
    serial[0] += 1
    resp, res = conn.run("%s-%d" % (name, serial[0]), ["/bin/sh", "-c", script], cwd=ws,
                         sandbox=sandbox, timeout=60)
    if res is None:
        return resp.get("error"), None, ""
    return None, res.exit_code, (res.stdout + res.stderr).decode(errors="replace")


def no_userns(err):
    return err is not None and "user namespaces" in err.get("message", "")


def moves(conn, tag, top, inner, name, reaches):
    """
    A sandbox tries to rename each directory above the file, and the file
    itself; then a later sandbox (network access, /tmp writable) looks for
    the file where the rename would have taken it: reaches(path) is true
    when it found it there.
    """
    path = os.path.join(inner, name)
    victims = [(inner, inner + ".moved", os.path.join(inner + ".moved", name)),
               (top, top + ".moved", os.path.join(top + ".moved", os.path.relpath(path, top))),
               (path, path + ".moved", path + ".moved")]
    for src, dst, now in victims:
        what = src[len(work):]
        err, code, out = sh(conn, "%s-mv-%s" % (tag, os.path.basename(src)),
                            "mv '%s' '%s'" % (src, dst), WRITE_TMP)
        moved = os.path.lexists(dst)
        t.ok(err is None and code != 0 and not moved and os.path.lexists(src),
             "%s: a sandbox that may write /tmp cannot rename %s" % (tag, what),
             "start error %r, exit %r, output %r, renamed: %r" % (err, code, out, moved))
        try:
            found, diag = reaches(now)
            t.ok(not found, "%s: ... and a later sandbox with network access does not find the "
                 "file where that would have taken it" % tag, diag)
        finally:
            if moved:  # the build before the fix: put it back for what follows
                os.rename(dst, src)


def refused(resp, path):
    e = resp.get("error") or {}
    return e.get("code") == -32602 and path in e.get("message", "") \
        and "move it back" in e.get("message", "")


def displaced(conn, srv, tag, path, move, restore):
    """The file is moved by someone outside every sandbox: sandboxed requests fail closed."""
    move()
    try:
        r1 = conn.start(tag + "-while-moved", ["true"], cwd=ws, sandbox=WRITE_TMP)
        t.ok(refused(r1, path), "%s moved away: a sandboxed process/start is refused, naming it"
             % tag, repr(r1))
        # A valid request: the check is made on the worker, after the context is bound.
        r2 = conn.request("fs/readFile", {"path": uri("/etc/hostname"),
                                          "sandbox": dict(WRITE_TMP, cwd=uri(ws))})
        t.ok(refused(r2, path), "%s moved away: a sandboxed fs/readFile is refused too" % tag,
             repr(r2))
        resp, res = conn.run(tag + "-unsandboxed", ["true"], cwd=ws)
        t.ok(res is not None and res.exit_code == 0,
             "%s moved away: an unsandboxed process/start still runs" % tag, repr(resp))
        n = srv.stderr_text().count("is no longer the file the server started with")
        t.ok(n == 1, "%s moved away: the server logs it once" % tag,
             "%d times; log:\n%s" % (n, srv.stderr_text()[-2000:]))
    finally:
        restore()
    err, code, out = sh(conn, tag + "-back", "true", WRITE_TMP)
    t.ok(err is None and code == 0, "%s back in place: sandboxed requests run again" % tag,
         "start error %r, exit %r, output %r" % (err, code, out))


# ---- the token file ----
if not HAVE_WS:
    t.skip("token: all", "this cordon was built without the WebSocket transport")
else:
    top = os.path.join(work, "tok")
    inner = os.path.join(top, "dir")
    os.makedirs(inner)
    token_file = os.path.join(inner, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    srv = NetServer("ws", args=["--auth-token-file", token_file])
    try:
        t.ok(srv.ready, "token: the server listens", srv.stderr_text())
        c = srv.connect(token=TOKEN)
        c.handshake()
        err, code, out = sh(c, "tok-probe", "cat '%s'" % token_file, WRITE_TMP)
        if no_userns(err):
            t.skip("token: sandboxes", "no user namespaces here: " + err["message"])
        else:
            t.ok(err is None and TOKEN not in out and code != 0,
                 "token: a sandbox cannot read the token file", repr((err, code, out)))
            def token_at(path):
                err, code, out = sh(c, "tok-read", "cat '%s'" % path, NET_TMP)
                return err is not None or TOKEN in out, repr((err, code, out))
            moves(c, "token", top, inner, "token", token_at)
            displaced(c, srv, "token", token_file,
                      lambda: os.rename(inner, inner + ".away"),
                      lambda: os.rename(inner + ".away", inner))
            # Replaced by another file (an editor's save): not the server's token.
            saved = token_file + ".saved"
            os.link(token_file, saved)
            with open(token_file + ".new", "w") as f:
                f.write("some-other-token-0123456789abcdef\n")
            os.rename(token_file + ".new", token_file)
            r = c.start("tok-replaced", ["true"], cwd=ws, sandbox=WRITE_TMP)
            t.ok(refused(r, token_file) and "replaced" in r["error"]["message"],
                 "token: replaced by another file: sandboxed requests are refused", repr(r))
            os.rename(saved, token_file)
            err, code, out = sh(c, "tok-restored", "cat '%s'" % token_file, WRITE_TMP)
            t.ok(err is None and TOKEN not in out,
                 "token: the original back: sandboxes run, and do not read it",
                 repr((err, code, out)))
    except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
        t.not_ok("token: scenario failed: %s" % e, srv.stderr_text()[-3000:])
    finally:
        srv.stop()

# ---- the unix socket ----
top = os.path.join(work, "sock")
inner = os.path.join(top, "dir")
os.makedirs(inner)
os.chmod(inner, 0o700)
srv = NetServer("unix", sockdir=inner)
try:
    t.ok(srv.ready, "unix: the server listens", srv.stderr_text())
    c = srv.connect()
    c.handshake()
    err, code, out = sh(c, "sock-probe", "test -S '%s'" % srv.path, WRITE_TMP)
    if no_userns(err):
        t.skip("unix: sandboxes", "no user namespaces here: " + err["message"])
    else:
        t.ok(err is None and code != 0, "unix: a sandbox does not see the socket",
             repr((err, code, out)))
        def socket_at(path):
            err, code, out = sh(c, "sock-look", "test -S '%s'" % path, NET_TMP)
            return err is not None or code == 0, repr((err, code, out))
        moves(c, "unix", top, inner, "serve.sock", socket_at)
        displaced(c, srv, "unix", srv.path,
                  lambda: os.rename(inner, inner + ".away"),
                  lambda: os.rename(inner + ".away", inner))
except (Eof, Timeout, AssertionError, OSError) as e:
    t.not_ok("unix: scenario failed: %s" % e, srv.stderr_text()[-3000:])
finally:
    srv.stop()

# ---- no user namespaces: nothing to hide the token in ----
# The token is all a client needs, and the server does not judge a token's
# bearer: a sandbox that could read it is not made. (The unix socket keeps
# its other wall: its sandboxed peers are refused, see serve-selfconnect.py.)
if not HAVE_WS:
    t.skip("degraded: all", "this cordon was built without the WebSocket transport")
elif os.geteuid() == 0:
    t.skip("degraded: all", "as root every sandbox has a mount namespace")
else:
    top = os.path.join(work, "degraded")
    os.makedirs(top)
    token_file = os.path.join(top, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    srv = NetServer("ws", args=["--auth-token-file", token_file,
                                "--allow-degraded=pid-isolation",
                                "--allow-degraded=file-attributes"],
                    extra_env={"CORDON_TEST_DISABLE": "userns"})
    try:
        t.ok(srv.ready, "degraded: the server listens", srv.stderr_text())
        c = srv.connect(token=TOKEN)
        c.handshake()
        net_ro = {"permissions": profile([special("root", "read")], network="enabled"),
                  "windowsSandboxLevel": "disabled"}
        r = c.start("deg-readable", ["cat", token_file], cwd="/", sandbox=net_ro)
        e = r.get("error") or {}
        t.ok(e.get("code") == -32602 and token_file in e.get("message", "")
             and "cannot be hidden" in e.get("message", ""),
             "degraded: a sandbox that could read the token file is refused", repr(r))
        # Out of every path the sandbox may read, Landlock keeps it from the file.
        entries = [path_entry(p, "read") for p in ("/usr", "/lib", "/lib64", "/bin")
                   if os.path.exists(p)]
        narrow = {"permissions": profile(entries, network="enabled"),
                  "windowsSandboxLevel": "disabled"}
        resp, res = c.run("deg-unreadable", ["/usr/bin/cat", token_file], cwd="/",
                          sandbox=narrow, timeout=60)
        said = any("Landlock keeps it unreadable" in d for d in
                   resp.get("result", {}).get("cordon", {}).get("degraded", []))
        t.ok(res is not None and TOKEN.encode() not in res.stdout and said,
             "degraded: one that cannot read it runs, and is told the file is not hidden",
             repr(resp) if res is None else "exit %r, stdout %r, %r" % (
                 res.exit_code, res.stdout, resp))
        t.ok("cannot be hidden from the sandboxes" in srv.stderr_text(),
             "degraded: the server says so at start", srv.stderr_text()[-2000:])
    except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
        t.not_ok("degraded: scenario failed: %s" % e, srv.stderr_text()[-3000:])
    finally:
        srv.stop()

shutil.rmtree(work, ignore_errors=True)
t.done()
