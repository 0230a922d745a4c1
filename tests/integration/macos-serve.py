#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""`cordon serve` of the macOS build, driven over stdio.

$CORDON is a macOS build of cordon made on Linux with gcc and glibc made to
look like a Mac (.ci/darwin-like.sh), its wrapper fixed at compile time to the
suite's stand-in for /usr/bin/sandbox-exec (tests/data/seatbelt-stand-in.sh):
the code that runs is the macOS code (spawn-posix.c, sandboxes-mac.c, the
Seatbelt binding of every process/start), on Linux. The stand-in confines
nothing: what is checked is the way from the wire intent to the wrapper's
argv, the process layer, and what the build refuses. `make
check-darwin-serve` in such a build runs it; CI's darwin stage does, as root
and as the user cordon-test.

Checked: the loop macOS has (poll) and a usage error for epoll; server limits
macOS cannot enforce refused at startup; initialize says platformOs macos; a
sandboxed start runs through the wrapper with exactly the policy `cordon
explain` plans for the same intent, reports sandboxType macosSeatbelt, and
streams its output; unsandboxed and disabled starts are not wrapped; limits
become rlimits the command has (refused for root and for what macOS cannot
bound); a managed network lets the command reach its loopback proxy's port
only, and networkProxy is refused; a file-system request under a restricting sandbox is refused and
does nothing (the fs helper does not run under Seatbelt yet) while one
without a sandbox is done; process/terminate ends a sandboxed command and
its group; a server that stops kills what it started; over ws:// (its cordon-ws), the
token file is denied by the policy of every sandbox.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, WAIT, Eof, Server, Tap, Timeout, profile, special,  # noqa: E402
                       standin_argv, unb64, uri, workspace_write)
from netclient import HandshakeError, NetServer  # noqa: E402

t = Tap()
if not os.environ.get("CD_DARWIN_LIKE"):
    t.skip_all("needs cordon built by .ci/darwin-like.sh with the stand-in wrapper "
               "(make check-darwin-serve in such a build; CI's darwin stage)")
ROOT = os.geteuid() == 0


def planned(args):
    """cordon explain --json's wrapper argv, without the wrapper itself."""
    p = subprocess.run([CORDON, "explain", "--json"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)["seatbelt"]["argv"][1:]


def alive(pid):
    """pid runs (a zombie does not count)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone(pids, timeout=WAIT):
    """Wait until none of pids runs: True, or False at the timeout."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def started_pids(srv, pid):
    """The pids a command printed on its first line of stdout (the stand-in writes to
    stderr), once it did; [] if it ended first."""
    def line():
        return b"".join(unb64(n["params"]["chunk"]) for n in srv.notes_for(pid)
                        if n["method"] == "process/output" and
                        n["params"].get("stream") == "stdout")
    deadline = time.monotonic() + WAIT
    while b"\n" not in line() and not srv.out_eof and time.monotonic() < deadline:
        srv._pump(deadline)
    return [int(x) for x in line().split(b"\n")[0].split() if x.isdigit()]


# ---- the command line ----
p = subprocess.run([CORDON, "serve", "--loop", "epoll"], capture_output=True, text=True,
                   stdin=subprocess.DEVNULL)
t.ok(p.returncode == 2 and "macOS has no epoll" in p.stderr,
     "--loop epoll is a usage error that says macOS has none", p.stderr)
p = subprocess.run([CORDON, "serve", "--default-limits", "tasks=10"], capture_output=True,
                   text=True, stdin=subprocess.DEVNULL)
t.ok(p.returncode == 125 and "cannot enforce the tasks limit" in p.stderr,
     "--default-limits tasks: refused at startup (125), macOS cannot bound it", p.stderr)
p = subprocess.run([CORDON, "serve", "--default-limits", "open-files=100"],
                   capture_output=True, text=True, stdin=subprocess.DEVNULL)
if ROOT:
    t.ok(p.returncode == 125 and "root" in p.stderr,
         "--default-limits open-files as root: refused (root may raise its rlimits)",
         p.stderr)
else:
    t.ok(p.returncode == 0, "--default-limits open-files: the server starts and stops at EOF",
         p.stderr)
    p = subprocess.run([CORDON, "serve", "--default-limits", "open-files=20000"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    t.ok(p.returncode == 125 and "kern.maxfilesperproc 10240" in p.stderr,
         "--default-limits open-files above kern.maxfilesperproc: refused at startup (125)",
         p.stderr)

base = tempfile.mkdtemp(prefix="cordon-macserve-", dir="/var/tmp")
os.chmod(base, 0o755)
ws = os.path.join(base, "ws")
os.makedirs(os.path.join(ws, ".git"))
secret = os.path.join(base, "secret")
with open(secret, "w") as f:
    f.write("not for sandboxes\n")

left = []
srv = Server(loop="poll")
try:
    info = srv.handshake()["environmentInfo"]
    t.eq(info.get("platformOs"), "macos", "initialize: platformOs macos")
    caps = info.get("capabilities", {})
    t.ok(not caps.get("sandboxedFileStreaming") and not caps.get("fsWatchMissing") and
         not caps.get("networkProxyLaunch"),
         "initialize: no sandboxed file streaming, path watches or proxy launch", repr(caps))

    # ---- a sandboxed start ----
    sb = {"permissions": workspace_write(), "windowsSandboxLevel": "disabled",
          "workspaceRoots": [uri(ws)], "cwd": uri(ws)}
    cmd = ["sh", "-c", "echo from-the-command; exit 3"]
    resp, res = srv.run("sb", cmd, cwd=ws, sandbox=sb)
    r = resp.get("result", {})
    t.eq(r.get("sandboxType"), "macosSeatbelt", "a sandboxed start: sandboxType macosSeatbelt")
    t.ok(r.get("cordon", {}).get("sandboxed") is True and
         r.get("cordon", {}).get("network") == "restricted",
         "... cordon says sandboxed, network restricted", repr(r))
    got = standin_argv(res.stderr) if res else None
    want = planned(["--profile", "workspace-write", "--workspace-root", ws, "--cwd", ws])
    t.ok(got is not None and want is not None and got == want + cmd,
         "... the wrapper gets exactly the policy cordon explain plans, then -- CMD",
         "got %r\nwant %r" % (got and got[2:], want and want[1:]))
    t.ok(res is not None and res.stdout == b"from-the-command\n" and res.exit_code == 3,
         "... its output streams back and its exit code is reported",
         repr(res and (res.stdout, res.exit_code)))

    ro = {"permissions": profile([special("root", "read")]),
          "windowsSandboxLevel": "disabled", "cwd": uri(ws)}
    resp, res = srv.run("ro", ["cat", secret], cwd=ws, sandbox=ro)
    t.ok(resp.get("result", {}).get("sandboxType") == "macosSeatbelt" and res is not None and
         standin_argv(res.stderr) is not None and "(allow file-read*)" in standin_argv(res.stderr)[1],
         "a read-only profile is wrapped, with a policy that allows reads",
         repr(resp)[:300])

    # ---- a managed network: the proxy of the command's variables, and nothing else ----
    penv = {"PATH": "/usr/bin:/bin", "HTTP_PROXY": "http://127.0.0.1:3128"}
    resp, res = srv.run("mn", ["sh", "-c", "echo $HTTP_PROXY"],
                        cwd=ws, sandbox=sb, env=penv, enforceManagedNetwork=True)
    got = standin_argv(res.stderr) if res else None
    policy = got[1] if got and len(got) > 1 else ""
    t.ok(resp.get("result", {}).get("sandboxType") == "macosSeatbelt" and
         '(allow network-outbound (remote ip "localhost:3128"))' in policy and
         policy.count("(allow network-outbound") == 1,
         "enforceManagedNetwork: the policy lets the command reach the proxy's port only",
         repr(resp)[:300] + policy[-800:])
    t.ok(res is not None and res.stdout == b"http://127.0.0.1:3128\n",
         "... and its proxy variables are the client's", repr(res and res.stdout))
    penv = {"PATH": "/usr/bin:/bin", "ALL_PROXY": "socks5h://127.0.0.1:1080",
            "NO_PROXY": "corp.example"}
    resp, res = srv.run("mn3", ["sh", "-c", "echo $ALL_PROXY $NO_PROXY"], cwd=ws, sandbox=sb,
                        env=penv, enforceManagedNetwork=True)
    got = standin_argv(res.stderr) if res else None
    policy = got[1] if got and len(got) > 1 else ""
    t.ok('(allow network-outbound (remote ip "localhost:1080"))' in policy and res is not None
         and res.stdout == b"socks5h://127.0.0.1:1080 corp.example\n",
         "... a SOCKS proxy too: its port is allowed, its scheme and NO_PROXY kept",
         repr((resp, res and res.stdout)))
    resp = srv.start("mn2", ["true"], cwd=ws, sandbox=sb, enforceManagedNetwork=True,
                     env={"PATH": "/usr/bin:/bin", "HTTP_PROXY": "http://192.0.2.7:3128"})
    t.ok(resp.get("error", {}).get("code") == -32602,
         "enforceManagedNetwork with a proxy off loopback: refused (-32602)", repr(resp))
    np = {"proxy": {"enabled": True, "enableSocks5": False, "enableSocks5Udp": False,
                    "allowUpstreamProxy": True, "dangerouslyAllowAllUnixSockets": False,
                    "mode": "full", "domains": {"ok.test": "allow"}, "unixSockets": None,
                    "allowLocalBinding": False},
          "auditMetadata": {"model": "m"}, "environmentId": "e"}
    resp = srv.start("np", ["true"], cwd=ws, sandbox=sb, networkProxy=np)
    t.ok(resp.get("error", {}).get("code") == -32602 and
         "networkProxyLaunch is false" in resp["error"].get("message", ""),
         "networkProxy: refused (-32602) before any proxy starts", repr(resp))

    # ---- not wrapped ----
    resp, res = srv.run("plain", ["sh", "-c", "echo plain"], cwd=ws)
    t.ok(resp.get("result", {}).get("sandboxType") == "none" and res is not None and
         standin_argv(res.stderr) is None and res.stdout == b"plain\n",
         "without a sandbox: sandboxType none, run as asked", repr(resp)[:300])
    off = {"permissions": {"type": "disabled"}, "windowsSandboxLevel": "disabled",
           "cwd": uri(ws)}
    resp, res = srv.run("off", ["sh", "-c", "echo off"], cwd=ws, sandbox=off)
    t.ok(resp.get("result", {}).get("sandboxType") == "none" and res is not None and
         standin_argv(res.stderr) is None and res.stdout == b"off\n",
         "a disabled profile: sandboxType none, not wrapped", repr(resp)[:300])

    # ---- limits: rlimits, or refused ----
    lim = {"limits": {"open_files": 64}}
    resp, res = srv.run("lim", ["sh", "-c", "ulimit -n; ulimit -Hn"], cwd=ws, sandbox=sb,
                        cordon=lim)
    resp2, res2 = srv.run("lim2", ["sh", "-c", "ulimit -n"], cwd=ws, cordon=lim)
    if ROOT:
        t.ok(resp.get("error", {}).get("code") == -32602 and
             "run as root" in resp["error"].get("message", ""),
             "limits as root: refused (-32602), root may raise its rlimits", repr(resp))
        t.ok(resp2.get("error", {}).get("code") == -32602,
             "... without a sandbox too", repr(resp2))
    else:
        t.ok(res is not None and res.stdout == b"64\n64\n" and
             resp["result"]["cordon"].get("limits") ==
             {"open_files": {"value": 64, "by": "rlimit"}},
             "open_files: the sandboxed command has RLIMIT_NOFILE 64, soft and hard",
             repr((resp, res and res.stdout)))
        t.ok(res2 is not None and res2.stdout == b"64\n" and
             resp2["result"]["sandboxType"] == "none",
             "... and so has one without a sandbox", repr((resp2, res2 and res2.stdout)))
    if not ROOT:
        resp, res = srv.run("nofile", ["true"], cwd=ws, sandbox=sb,
                            cordon={"limits": {"open_files": 20000}})
        t.ok(resp.get("error", {}).get("code") == -32602 and
             "kern.maxfilesperproc 10240" in resp["error"].get("message", ""),
             "open_files above kern.maxfilesperproc: refused (-32602) before the spawn",
             repr(resp))
    resp, res = srv.run("tasks", ["true"], cwd=ws, sandbox=sb,
                        cordon={"limits": {"tasks": 5}})
    t.ok(resp.get("error", {}).get("code") == -32602 and
         "cannot enforce the tasks limit" in resp["error"].get("message", ""),
         "a tasks limit: refused (-32602), macOS cannot bound it", repr(resp))

    # ---- file-system requests ----
    resp = srv.request("fs/readFile", {"path": uri(secret), "sandbox": sb})
    t.ok(resp.get("error", {}).get("code") == -32602 and
         "does not run under Seatbelt" in resp["error"].get("message", ""),
         "fs/readFile under a restricting sandbox: refused (-32602), never read by the server",
         repr(resp))
    made = os.path.join(ws, "made")
    resp = srv.request("fs/writeFile", {"path": uri(made), "dataBase64": "aGk=", "sandbox": sb})
    t.ok(resp.get("error", {}).get("code") == -32602 and not os.path.exists(made),
         "fs/writeFile under a restricting sandbox: refused, nothing written", repr(resp))
    resp = srv.request("fs/readFile", {"path": uri(secret)})
    t.ok(resp.get("result", {}).get("dataBase64") == "bm90IGZvciBzYW5kYm94ZXMK",
         "fs/readFile without a sandbox: done", repr(resp)[:300])

    # ---- ending processes ----
    resp = srv.start("k", ["sh", "-c", "sleep 600 & echo $$ $!; wait"], cwd=ws, sandbox=sb)
    pids = started_pids(srv, "k") if "result" in resp else []
    t.ok(len(pids) == 2 and all(alive(p) for p in pids),
         "a sandboxed command and a child of its own run", repr(resp)[:300])
    srv.call("process/terminate", {"processId": "k"})
    res = srv.wait_closed("k")
    t.ok(res.exit_code is not None and gone(pids),
         "process/terminate: it is reaped, and its group is gone with it",
         repr((res.exit_code, [p for p in pids if alive(p)])))

    # A sandbox ends with its command: what it leaves in its group is killed then.
    resp = srv.start("bg", ["sh", "-c", "sleep 600 & echo $$ $!"], cwd=ws, sandbox=sb)
    pids = started_pids(srv, "bg") if "result" in resp else []
    srv.wait_closed("bg")
    t.ok(len(pids) == 2 and gone(pids),
         "a sandboxed command that exits: the child it left in its group is killed",
         repr((pids, [p for p in pids if alive(p)])))
    resp = srv.start("bg2", ["sh", "-c", "sleep 600 & echo $$ $!"], cwd=ws)
    pids = started_pids(srv, "bg2") if "result" in resp else []
    deadline = time.monotonic() + WAIT
    while (not any(n["method"] == "process/exited" for n in srv.notes_for("bg2")) and
           not srv.out_eof and time.monotonic() < deadline):
        srv._pump(deadline)
    t.ok(len(pids) == 2 and alive(pids[1]),
         "an unsandboxed one: its child is left to run (late output is allowed)", repr(pids))
    for p in pids[1:]:
        os.kill(p, signal.SIGKILL)
    srv.wait_closed("bg2")

    resp = srv.start("left", ["sh", "-c", "sleep 600 & echo $$ $!; wait"], cwd=ws, sandbox=sb)
    left = started_pids(srv, "left") if "result" in resp else []
finally:
    srv.stop()
t.ok(len(left) == 2 and gone(left),
     "a server that stops kills what it started, and its group",
     repr([p for p in left if alive(p)]))
for p in left:
    if alive(p):
        os.kill(p, signal.SIGKILL)

# ---- ws:// (cordon-ws of this build): the token file is denied in every policy ----
token = "macserve-token-0123456789abcdef"
token_file = os.path.join(base, "tok", "token")
os.makedirs(os.path.dirname(token_file))
with open(token_file, "w") as f:
    f.write(token + "\n")
os.chmod(token_file, 0o600)
srv = NetServer("ws", args=["--auth-token-file", token_file], loop="poll")
try:
    c = srv.connect(token=token)
    c.handshake()
    resp, res = c.run("hid", ["cat", token_file], cwd=ws, sandbox=sb)
    got = standin_argv(res.stderr) if res else None
    hid = [a for a in (got or []) if a.startswith("-DHIDDEN_")]
    t.ok(resp.get("result", {}).get("sandboxType") == "macosSeatbelt" and
         hid == ["-DHIDDEN_0=" + token_file],
         "ws://: the token file goes to the wrapper as HIDDEN_0", repr((resp, got))[:2000])
    policy = got[got.index("-p") + 1] if got and "-p" in got else ""
    t.ok(policy.endswith('(deny file-read* file-write* (literal (param "HIDDEN_0")))\n'
                         '(deny network-outbound (literal (param "HIDDEN_0")))\n') and
         token not in policy,
         "ws://: the policy denies it last, reads, writes and connects, and holds no token",
         policy[-600:])
except (Eof, Timeout, AssertionError, OSError, HandshakeError) as e:
    t.not_ok("ws://: the token scenario failed: %s" % e, srv.stderr_text()[-3000:])
finally:
    srv.stop()
subprocess.run(["rm", "-rf", base])
t.done()
