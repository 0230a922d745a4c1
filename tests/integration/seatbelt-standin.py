#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Seatbelt backend end to end, on Linux, through a stand-in for sandbox-exec.

With CORDON_TEST_SEATBELT_EXEC, `cordon run` and `cordon serve` launch every
sandboxed command through the Seatbelt wrapper, the stand-in
(tests/data/seatbelt-stand-in.sh) in place of /usr/bin/sandbox-exec, inside
the Linux sandbox still. The stand-in records its argv on stderr and runs the
command. Checked: the argv is exactly what `explain --backend seatbelt` plans
for the same intent (policy, -D list, --, the command), the command's output
arrives, its allowed write lands and its denied one is denied, and
process/start reports sandboxType macosSeatbelt. Unsandboxed starts are not
wrapped.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, Eof, Server, Tap, Timeout, cordon_usable,  # noqa: E402
                       standin_argv, uri, workspace_write)
from netclient import HandshakeError, NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
SRC = os.environ.get("CD_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "..", ".."))
STAND_IN = os.path.realpath(os.path.join(SRC, "tests", "data", "seatbelt-stand-in.sh"))
HOOK = {"CORDON_TEST_SEATBELT_EXEC": STAND_IN}


def planned(args, env):
    """explain --backend seatbelt's wrapper argv (without sandbox-exec itself)."""
    p = subprocess.run([CORDON, "explain", "--backend", "seatbelt", "--json"] + args,
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return None, p.stderr
    return json.loads(p.stdout)["seatbelt"]["argv"][1:], None


# Outside /tmp: workspace-write makes /tmp writable, and "outside" must not be.
# Not below the build tree either, which may be in /tmp (CI's clone is).
base = tempfile.mkdtemp(prefix="cordon-standin-", dir="/var/tmp")
ws = os.path.join(base, "ws")
os.makedirs(os.path.join(ws, ".git"))
outside = os.path.join(base, "outside")
os.makedirs(outside)
os.chmod(base, 0o755)
cmd = ["sh", "-c", "echo from-the-command; echo in > ok; echo out > %s/no 2>/dev/null "
       "|| echo write-denied" % outside]
env = dict(os.environ)
env.update(HOOK)
env.pop("CORDON_TEST_DISABLE", None)
try:
    # ---- cordon run ----
    opts = ["--profile", "workspace-write", "--workspace-root", ws, "--cwd", ws]
    p = subprocess.run([CORDON, "run"] + opts + ["--"] + cmd, capture_output=True, env=env)
    got = standin_argv(p.stderr)
    want, err = planned(opts, env)
    t.ok(p.returncode == 0, "run: the command exits 0 through the stand-in",
         p.stderr.decode(errors="replace")[-2000:])
    t.ok(got is not None and want is not None and got == want + cmd,
         "run: the stand-in gets exactly the planned -p POLICY -D... -- CMD",
         "got %r\nwant %r %s" % (got and got[3:], want and want[2:], err or ""))
    t.ok(b"from-the-command" in p.stdout, "run: the command's output arrives")
    t.ok(os.path.exists(os.path.join(ws, "ok")), "run: the write inside the workspace lands")
    t.ok(b"write-denied" in p.stdout and not os.path.exists(os.path.join(outside, "no")),
         "run: the write outside is denied (the Linux sandbox still confines it)")
    t.ok(b"CORDON_TEST_SEATBELT_EXEC" in p.stderr, "run: the hook says so in a warning")
    os.unlink(os.path.join(ws, "ok"))

    # Unsandboxed: no wrapper.
    p = subprocess.run([CORDON, "run", "--profile", "full-access", "--", "true"],
                       capture_output=True, env=env)
    t.ok(p.returncode == 0 and standin_argv(p.stderr) is None,
         "run: a disabled profile is not wrapped", p.stderr.decode(errors="replace"))

    # ---- cordon serve ----
    srv = Server(extra_env=HOOK)
    try:
        srv.handshake()
        sb = {"permissions": workspace_write(), "windowsSandboxLevel": "disabled",
              "workspaceRoots": [uri(ws)], "cwd": uri(ws)}
        resp, res = srv.run("sb", cmd, cwd=ws, sandbox=sb)
        r = resp.get("result", {})
        t.eq(r.get("sandboxType"), "macosSeatbelt", "serve: process/start says macosSeatbelt")
        got = standin_argv(res.stderr) if res else None
        want, err = planned(opts, env)
        t.ok(got is not None and want is not None and got == want + cmd,
             "serve: the stand-in gets exactly the planned argv for the wire intent",
             "got %r\nwant %r %s" % (got and got[3:], want and want[2:], err or ""))
        t.ok(res is not None and b"from-the-command" in res.stdout and res.exit_code == 0,
             "serve: the command's output streams back and it exits 0", repr(resp)[:300])
        t.ok(os.path.exists(os.path.join(ws, "ok")), "serve: the write inside lands")
        t.ok(res is not None and b"write-denied" in res.stdout,
             "serve: the write outside is denied")
        resp, res = srv.run("plain", ["sh", "-c", "echo plain"], cwd=ws)
        t.eq(resp.get("result", {}).get("sandboxType"), "none",
             "serve: an unsandboxed start is not wrapped (sandboxType none)")
        t.ok(res is not None and standin_argv(res.stderr) is None and res.stdout == b"plain\n",
             "serve: ... and runs without the stand-in")
    finally:
        srv.stop()

    # ---- cordon serve with a token file: the server's own files are denied ----
    token = "standin-token-0123456789abcdef"
    token_file = os.path.join(base, "tok", "token")
    os.makedirs(os.path.dirname(token_file))
    with open(token_file, "w") as f:
        f.write(token + "\n")
    os.chmod(token_file, 0o600)
    srv = NetServer("ws", args=["--auth-token-file", token_file], extra_env=HOOK)
    try:
        c = srv.connect(token=token)
        c.handshake()
        resp, res = c.run("hid", ["true"], cwd=ws, sandbox=sb, timeout=60)
        got = standin_argv(res.stderr) if res else None
        # Planned for macOS: /var is /private/var there.
        mac_token = ("/private" + token_file if token_file.startswith(("/var/", "/tmp/"))
                     else token_file)
        hid = [a for a in (got or []) if a.startswith("-DHIDDEN_")]
        t.ok(hid == ["-DHIDDEN_0=" + mac_token],
             "serve: the token file goes to the wrapper as HIDDEN_0", repr(got)[:2000])
        policy = got[got.index("-p") + 1] if got and "-p" in got else ""
        rules = ('(deny file-read* file-write* (literal (param "HIDDEN_0")))\n'
                 '(deny network-outbound (literal (param "HIDDEN_0")))\n')
        t.ok(policy.endswith(rules),
             "serve: the policy denies it last: reads, writes and connects", policy[-600:])
        t.ok(token not in policy, "serve: the token is nowhere in the policy")
    except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
        t.not_ok("serve: token scenario failed: %s" % e, srv.stderr_text()[-3000:])
    finally:
        srv.stop()
finally:
    subprocess.run(["rm", "-rf", base])
t.done()
