#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The macOS front end (src/mac/main.c), built on Linux as tests/mac/cordon-macos.

Its wrapper is the stand-in tests/data/seatbelt-stand-in.sh, fixed at compile
time, which records its argv on stderr and runs the command. Checked, as root
and again as the user cordon-test (when root and the tree is readable to it):
- `explain --json` plans what the Linux cordon's `explain --backend seatbelt
  --json` plans (the whole seatbelt object: argv, policy, -D list, notes; the
  bound paths) for the built-in profiles and a few options;
- `run` executes the stand-in with exactly that argv plus the command, in the
  --cwd; the command's output, exit status and signal come back; a profile
  that disables the sandbox runs the command without the wrapper;
- refusals (a managed network, a missing --cwd) happen before anything runs;
- `check` validates profiles; bad options get precise usage errors (status 2).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import CORDON, Tap, standin_argv  # noqa: E402

t = Tap()
BUILD = os.environ.get("CD_BUILDDIR", os.getcwd())
SRC = os.environ.get("CD_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MAC = os.environ.get("CORDON_MACOS", os.path.join(BUILD, "tests", "mac", "cordon-macos"))
USER = "cordon-test"


def user_prefix():
    """The command prefix that runs as cordon-test, or (None, reason)."""
    if os.geteuid() != 0:
        return None, "not root: the cases above ran unprivileged already"
    try:
        subprocess.run(["id", USER], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None, "no user %s" % USER
    if shutil.which("setpriv"):
        pre = ["setpriv", "--reuid=" + USER, "--regid=" + USER, "--init-groups"]
    elif shutil.which("runuser"):
        pre = ["runuser", "-u", USER, "--"]
    else:
        return None, "neither setpriv nor runuser"
    # The stand-in's path is compiled in: the tree must be readable to the user.
    for prog in (MAC, CORDON):
        p = subprocess.run(pre + [prog, "--version"], capture_output=True)
        if p.returncode != 0:
            return None, "%s cannot run %s (an unreadable build tree?)" % (USER, prog)
    p = subprocess.run(pre + [MAC, "run", "--", "true"], capture_output=True)
    if p.returncode != 0:
        return None, "%s cannot execute the stand-in: %s" % (USER, p.stderr[-300:])
    return pre, None


def cases(who, pre, base):
    def mac(args, **kw):
        return subprocess.run(pre + [MAC] + args, capture_output=True, **kw)

    def linux(args):
        return subprocess.run(pre + [CORDON] + args, capture_output=True)

    ws = os.path.join(base, "ws")
    w = "[%s] " % who
    # ---- explain --json: the same plan as the Linux cordon's --backend seatbelt ----
    restricted = os.path.join(base, "restricted.json")
    plans = [
        ["--profile", "read-only"],
        ["--profile", "read-only", "--network", "enabled"],
        ["--profile", "workspace-write", "--workspace-root", ws, "--cwd", ws],
        ["--profile", "workspace-write", "--workspace-root", ws, "--network", "enabled"],
        ["--profile", "workspace-write", "--workspace-root", "ws", "--deny", ws + "/secret",
         "--deny-glob", "**/*.pem", "--deny-glob", "codex-project-roots://.env",
         "--allow-read", ws + "/../other", "--allow-write", base + "/other"],
        ["--profile", restricted, "--workspace-root", ws],
        ["--profile", "full-access"],
        ["--profile", "read-only", "--network", "managed", "--network-proxy",
         "tcp:127.0.0.1:8080"],
    ]
    for args in plans:
        m = mac(["explain", "--json"] + args, cwd=base)
        l_ = subprocess.run(pre + [CORDON, "explain", "--backend", "seatbelt", "--json"] + args,
                            capture_output=True, cwd=base)
        name = " ".join(a.replace(base, "@") for a in args)
        if m.returncode != 0 or l_.returncode != 0:
            t.not_ok(w + "explain %s: both plan it" % name,
                     "macos %d: %s\nlinux %d: %s" % (m.returncode, m.stderr[-500:],
                                                     l_.returncode, l_.stderr[-500:]))
            continue
        mj, lj = json.loads(m.stdout), json.loads(l_.stdout)
        # /tmp is the host's: a sandboxed run beside this test (make -j2) holds mask
        # points for .git, .codex and .agents there while it runs, so between the two
        # bindings such a name may come or go. Its type is the host's moment, not the plan.
        for j in (mj, lj):
            for e in j["paths"]:
                if e.get("origin") == "protected" and os.path.dirname(e["path"]) == "/tmp":
                    e.pop("type", None)
        t.eq(mj["seatbelt"]["argv"], lj["seatbelt"]["argv"],
             w + "explain %s: the argv is the Linux cordon's" % name)
        same = [k for k in ("seatbelt", "paths", "cwd", "notes", "refusal") if mj[k] == lj[k]]
        if not t.eq(same, ["seatbelt", "paths", "cwd", "notes", "refusal"],
                    w + "explain %s: the policy, -D list, notes and bound paths too" % name):
            t.diag("paths only the macOS front end has: %r\nonly the Linux cordon: %r" % (
                [p for p in mj["paths"] if p not in lj["paths"]],
                [p for p in lj["paths"] if p not in mj["paths"]]))
    m = mac(["explain", "--profile", "workspace-write", "--workspace-root", ws])
    t.ok(m.returncode == 0 and b"macOS Seatbelt wrapper" in m.stdout
         and b"-DWRITABLE_ROOT_0=" in m.stdout, w + "explain: the text form shows the wrapper",
         m.stdout[-500:] + m.stderr[-500:])

    # ---- run ----
    opts = ["--profile", "workspace-write", "--workspace-root", ws, "--cwd", ws]
    cmd = ["sh", "-c", "pwd; echo from-the-command; echo err-line >&2; exit 7"]
    want = json.loads(mac(["explain", "--json"] + opts).stdout)["seatbelt"]["argv"]
    p = mac(["run"] + opts + ["--"] + cmd)
    t.eq(standin_argv(p.stderr), want[1:] + cmd,
         w + "run: the stand-in gets exactly the planned -p POLICY -D... -- CMD")
    t.eq(p.stdout.decode(), ws + "\nfrom-the-command\n",
         w + "run: the command's output arrives, from the --cwd")
    t.ok(b"err-line" in p.stderr, w + "run: its stderr too")
    t.eq(p.returncode, 7, w + "run: its exit status is cordon's")
    # A managed network through a proxy given on loopback: the policy lets the
    # command reach that port only, and the proxy variables name it (over the
    # caller's).
    mopts = ["--profile", "read-only", "--network", "managed", "--network-proxy",
             "tcp:127.0.0.1:8080"]
    mwant = json.loads(mac(["explain", "--json"] + mopts).stdout)["seatbelt"]
    env = dict(os.environ, HTTPS_PROXY="http://elsewhere.test:1")
    p = mac(["run"] + mopts + ["--", "sh", "-c", 'echo "$HTTPS_PROXY $all_proxy $NO_PROXY"'],
            env=env)
    t.ok(p.returncode == 0 and standin_argv(p.stderr) == mwant["argv"][1:] + [
        "sh", "-c", 'echo "$HTTPS_PROXY $all_proxy $NO_PROXY"'] and
         '(allow network-outbound (remote ip "localhost:8080"))' in mwant["policy"],
         w + "run --network managed --network-proxy: the proxy-restricted policy",
         p.stderr[-500:])
    t.eq(p.stdout.decode().split(" ")[:2], ["http://127.0.0.1:8080", "http://127.0.0.1:8080"],
         w + "run --network managed: the proxy variables name the proxy, over the caller's")
    p = mac(["run", "--profile", "read-only", "sh", "-c", "kill -TERM $$"])
    t.eq(p.returncode, -15, w + "run: a command killed by SIGTERM kills cordon with it (exec)")
    p = mac(["run", "--profile", "full-access", "--", "sh", "-c", "echo plain; exit 4"])
    t.ok(p.returncode == 4 and p.stdout == b"plain\n" and standin_argv(p.stderr) is None,
         w + "run: a disabled profile runs the command without the wrapper",
         "%d %r %r" % (p.returncode, p.stdout, p.stderr))
    p = mac(["run", "--profile", "full-access", "--", "/nonexistent/cmd"])
    t.ok(p.returncode == 127 and b"/nonexistent/cmd" in p.stderr,
         w + "run: a command not found (no wrapper) is status 127", p.stderr)

    # ---- refusals, before anything runs ----
    marker = os.path.join(base, "ran")
    touch = ["sh", "-c", "touch %s" % marker]
    p = mac(["run", "--network", "managed", "--"] + touch)
    t.ok(p.returncode == 125 and standin_argv(p.stderr) is None and not os.path.exists(marker),
         w + "run: a managed network is refused (125) and nothing runs", p.stderr)
    t.ok(b"a managed network needs a filtering proxy on a loopback port, which cordon on "
         b"macOS does not start yet: give one with --network-proxy" in p.stderr,
         w + "run: the refusal says a proxy is needed and none is started", p.stderr)
    for bad, why in ((["--network", "managed", "--network-proxy", "unix:/run/p.sock"],
                      b"only at a loopback TCP port"),
                     (["--network", "managed", "--network-proxy", "tcp:10.0.0.1:3128"],
                      b"only at a loopback TCP port"),
                     (["--network", "managed", "--network-proxy", "tcp:127.0.0.1:0"],
                      b"port"),
                     (["--network-proxy", "tcp:127.0.0.1:8080"],
                      b"--network-proxy needs a managed network")):
        p = mac(["run"] + bad + ["--"] + touch)
        t.ok(p.returncode == 2 and why in p.stderr and not os.path.exists(marker),
             w + "run %s: a usage error, nothing runs" % " ".join(bad), p.stderr)
    p = mac(["run", "--profile", os.path.join(base, "netrules.json"), "--network-proxy",
             "tcp:127.0.0.1:3128", "--"] + touch)
    l_ = linux(["run", "--profile", os.path.join(base, "netrules.json"), "--network-proxy",
                "tcp:127.0.0.1:3128", "--"] + touch)
    why = (b"the network rules of profile '%s' are for cordon's own proxy: the proxy given "
           b"with --network-proxy has its own" % os.path.join(base, "netrules.json").encode())
    t.ok(p.returncode == 2 and why in p.stderr and l_.returncode == 2 and why in l_.stderr
         and not os.path.exists(marker),
         w + "run: a profile's domain rules with a proxy of one's own are refused, as on Linux",
         p.stderr + l_.stderr)
    e = mac(["explain", "--json", "--network", "managed"])
    ej = json.loads(e.stdout) if e.stdout else {}
    t.ok(e.returncode == 125 and ej.get("seatbelt") is None and ej.get("refusal"),
         w + "explain --json: the refusal is in the JSON, status 125", e.stdout[-300:])
    p = mac(["run", "--cwd", base + "/missing", "--"] + touch)
    t.ok(p.returncode == 125 and b"--cwd '%s/missing': No such file or directory"
         % base.encode() in p.stderr and not os.path.exists(marker),
         w + "run: a missing --cwd is refused and nothing runs", p.stderr)
    p = mac(["run", "--workspace-root", base + "/missing", "--"] + touch)
    t.ok(p.returncode == 125 and b"--workspace-root" in p.stderr and not os.path.exists(marker),
         w + "run: a missing --workspace-root is refused and nothing runs", p.stderr)

    # ---- limits: rlimits the command inherits; what macOS cannot bound, refused ----
    lim = ["--limit-open-files", "64", "--limit-file-size", "1M", "--limit-core", "0"]
    show = ["sh", "-c", "ulimit -n; ulimit -f; ulimit -c; ulimit -Hn"]
    if who == "root":
        # Root may raise a hard limit again, and macOS has no capability to drop.
        for args in (lim, ["--profile", "full-access", "--limit-core", "0"],
                     ["--profile", os.path.join(base, "limited.json")]):
            p = mac(["run"] + args + ["--"] + touch)
            t.ok(p.returncode == 125 and b"resource limits cannot be kept from a command run "
                 b"as root on macOS" in p.stderr and not os.path.exists(marker)
                 and standin_argv(p.stderr) is None,
                 w + "run %s: refused for root (125), nothing runs" % " ".join(args[:2]),
                 p.stderr)
    else:
        p = mac(["run"] + lim + ["--"] + show)
        t.ok(p.returncode == 0 and p.stdout.split() == [b"64", b"2048", b"0", b"64"]
             and standin_argv(p.stderr) is not None,
             w + "run --limit-*: the command under the wrapper has the rlimits, soft and hard",
             p.stdout + p.stderr[-300:])
        p = mac(["run", "--profile", "full-access", "--limit-open-files", "33", "--", "sh", "-c",
                 "ulimit -n; ulimit -Hn 40 2>/dev/null && echo raised; exit 0"])
        t.ok(p.returncode == 0 and p.stdout.split() == [b"33"],
             w + "run: a disabled profile's command has them too, and cannot raise them",
             p.stdout + p.stderr)
        p = mac(["run", "--profile", os.path.join(base, "limited.json"), "--"] + show)
        t.ok(p.returncode == 0 and p.stdout.split()[:1] == [b"48"],
             w + "run: the profile's limits.open_files", p.stdout + p.stderr[-300:])
        p = mac(["run", "--limit-open-files", "99999999", "--"] + touch)
        t.ok(p.returncode == 125 and b"cannot set the open-files limit to 99999999 "
             b"(RLIMIT_NOFILE)" in p.stderr and not os.path.exists(marker),
             w + "run: an rlimit that cannot be set is refused, nothing runs", p.stderr)
    m = mac(["explain", "--json"] + lim)
    l_ = linux(["explain", "--json", "--backend", "seatbelt"] + lim)
    mj = json.loads(m.stdout) if m.returncode == 0 else {}
    t.ok(mj.get("seatbelt", {}).get("limits") == {"open_files": 64, "file_size": 1048576,
                                                  "core": 0}
         and l_.returncode == 0 and json.loads(l_.stdout)["seatbelt"] == mj["seatbelt"],
         w + "explain --json: seatbelt.limits, as the Linux cordon's", m.stdout[-300:])
    m = mac(["explain", "--json", "--limit-open-files=64", "--limit-core=0"])
    t.ok(m.returncode == 0 and json.loads(m.stdout)["seatbelt"]["limits"]
         == {"open_files": 64, "core": 0},
         w + "explain: --limit-NAME=VALUE too, as the Linux build takes it", m.stdout[-300:])
    m = mac(["explain"] + lim)
    t.ok(b"    open-files  64         RLIMIT_NOFILE\n" in m.stdout,
         w + "explain: the text lists each rlimit", m.stdout[-800:])
    for opt, val, why in (("tasks", "10", b"RLIMIT_NPROC counts all of the user's processes"),
                          ("memory", "1G", b"no cgroups to bound a sandbox's memory"),
                          ("swap", "0", b"no cgroups to bound a sandbox's memory"),
                          ("cpu", "0.5", b"CPU quota"),
                          ("cpu-time", "1m", b"sends SIGXCPU once at the limit and never kills"),
                          ("inotify-watches", "100", b"macOS has no inotify")):
        for prof in ("read-only", "full-access"):
            p = mac(["run", "--profile", prof, "--limit-" + opt, val, "--"] + touch)
            t.ok(p.returncode == 125 and b"cannot enforce the %s limit: " % opt.encode()
                 in p.stderr and why in p.stderr and not os.path.exists(marker)
                 and standin_argv(p.stderr) is None,
                 w + "run --profile %s --limit-%s: refused (125), nothing runs" % (prof, opt),
                 p.stderr)
    p = mac(["run", "--profile", os.path.join(base, "limited-memory.json"), "--"] + touch)
    t.ok(p.returncode == 125 and b"cannot enforce the memory limit" in p.stderr
         and not os.path.exists(marker),
         w + "run: a profile's limits.memory is refused too", p.stderr)
    for bad in (["--limit-open-files", "x"], ["--limit-open-files=x"]):
        p = mac(["run"] + bad + ["--"] + touch)
        t.ok(p.returncode == 2 and b"--limit-open-files: open-files: 'x'" in p.stderr
             and not os.path.exists(marker),
             w + "run %s: a bad limit value is a usage error" % bad[0], p.stderr)

    # ---- check ----
    p = mac(["check", "--builtin"])
    t.ok(p.returncode == 0 and p.stdout.count(b": ok\n") == 3,
         w + "check --builtin: the three built-in profiles parse", p.stdout + p.stderr)
    p = mac(["check", restricted])
    t.ok(p.returncode == 0 and p.stdout == restricted.encode() + b": ok\n",
         w + "check FILE: a valid profile", p.stdout + p.stderr)
    bad = os.path.join(base, "bad.json")
    p = mac(["check", bad])
    t.ok(p.returncode == 1 and p.stderr.startswith(bad.encode() + b":3:"),
         w + "check FILE: an invalid one is named with its line", p.stderr)
    p = mac(["check", base + "/none.json"])
    t.ok(p.returncode == 1 and b"No such file or directory" in p.stderr,
         w + "check FILE: a missing file", p.stderr)

    # ---- usage errors: status 2, the reason named ----
    usage = [
        (["explain", "--bogus"], "unknown option: --bogus"),
        (["explain", "--network", "sometimes"],
         "--network: unknown mode 'sometimes' (restricted, managed or enabled)"),
        (["run", "--profile"], "--profile needs a value"),
        (["explain", "--profile", ""], "--profile needs a name or a file"),
        (["run", "--profile", "read-only"], "run: no command given"),
        (["explain", "extra"], "explain: unexpected argument 'extra'"),
        (["explain", "--deny-glob", "a["], None),
        (["explain", "--deny", "relative"], None),
        (["explain", "--profile", "full-access", "--network", "restricted"],
         "--network restricted needs a managed or external profile ('full-access' disables "
         "the sandbox)"),
        (["explain", "--profile", "full-access", "--allow-write", "/x"], None),
        (["check"], "check: give FILE... or --builtin"),
        (["check", "--bogus"], "check: unknown option: --bogus"),
        (["serve"], "serve is not in this build (built without jansson)"),
        (["frobnicate"], "unknown command 'frobnicate' (check, explain, run or probe)"),
        (["probe", "--frob"], "probe: unknown option '--frob'"),
        ([], None),
    ]
    for args, msg in usage:
        p = mac(args)
        err = p.stderr.decode()
        if msg is None and args:
            # The Linux cordon's wording for the same mistake.
            line = (linux(args).stderr.decode().splitlines() or ["?"])[0]
            msg = line.split(": ", 2)[-1].rsplit(" (see ", 1)[0]
        t.ok(p.returncode == 2 and (msg is None or msg in err),
             w + "usage: %s: status 2, %r" % (" ".join(args) or "(nothing)", msg),
             "%d %s" % (p.returncode, err))

    # ---- probe: Seatbelt tried, not assumed (the stand-in plays its failures) ----
    def probe(env=None, json_=False):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run(pre + [MAC, "probe"] + (["--json"] if json_ else []),
                              capture_output=True, env=e)

    p = probe()
    lines = p.stdout.decode().splitlines()
    t.ok(p.returncode == 0 and len(lines) == 4
         and lines[0].startswith("ok   backend: seatbelt (sandboxType macosSeatbelt)")
         and all(x.startswith("ok   ") for x in lines)
         and "seatbelt denial: a read the policy denies failed" in lines[3],
         w + "probe: the backend, the wrapper, a policy applied and a denial enforced",
         p.stdout + p.stderr)
    p = probe(json_=True)
    j = json.loads(p.stdout) if p.returncode == 0 else {}
    t.ok(j.get("backend") == {"name": "seatbelt", "sandboxType": "macosSeatbelt"}
         and [(i["name"], i["ok"], i["fix"]) for i in j.get("items", [])]
         == [("sandbox-exec", True, None), ("seatbelt policy", True, None),
             ("seatbelt denial", True, None)]
         and j["host"]["sandbox_exec"].endswith("seatbelt-stand-in.sh")
         and j["host"]["is_root"] == (who == "root"),
         w + "probe --json: host, items and backend, as the Linux probe's", p.stdout + p.stderr)
    p = probe({"CORDON_STANDIN_NESTED": "1"})
    out = p.stdout.decode()
    t.ok(p.returncode == 0
         and "MISSING seatbelt policy: sandbox-exec could not run /usr/bin/true under a policy "
             "that allows everything: exit status 71: sandbox-exec: sandbox_apply: Operation "
             "not permitted \u2014 fix: macOS applies no sandbox inside another" in out
         and "MISSING seatbelt denial: not tried: no policy applies" in out,
         w + "probe: inside another sandbox, no policy applies, with sandbox-exec's reason",
         out + p.stderr.decode())
    p = probe({"CORDON_STANDIN_NO_ENFORCE": "1"}, json_=True)
    items = json.loads(p.stdout)["items"] if p.returncode == 0 else []
    t.ok(len(items) == 3 and items[1]["ok"] and not items[2]["ok"]
         and "a read the policy denies succeeded" in items[2]["detail"]
         and items[2]["fix"].startswith("the wrapper must be macOS's own sandbox-exec"),
         w + "probe: a wrapper that does not enforce is caught", p.stdout + p.stderr)
    # The stand-in's descriptors when started with 0-2 alone (the shell's own
    # among them), then under the probe: the same, nothing of cordon's.
    e = dict(os.environ, CORDON_STANDIN_FDS="1")
    alone = subprocess.run(pre + [os.path.join(SRC, "tests", "data", "seatbelt-stand-in.sh"),
                                  "-p", "x", "--", "true"], capture_output=True, env=e,
                           stdin=subprocess.DEVNULL)  # as the probe gives it
    alone = alone.stderr.decode().strip().splitlines()[-1:]
    p = probe({"CORDON_STANDIN_FDS": "1"}, json_=True)
    items = json.loads(p.stdout)["items"] if p.returncode == 0 else []
    t.ok(len(items) == 3 and alone and alone[0].startswith("fds: 0 1 2 ")
         and items[1]["detail"].rstrip().endswith("exit status 70: " + alone[0]),
         w + "probe: the wrapper gets stdin, stdout and stderr, nothing else of cordon's",
         "%s\n%s" % (alone, p.stdout + p.stderr))
    bg = os.path.join(base, "standin-bg.pid")
    with open(bg, "w"):
        pass
    os.chmod(bg, 0o666)  # the wrapper may run as cordon-test
    p = probe({"CORDON_STANDIN_BACKGROUND": bg})
    # One per run of the wrapper: none is left behind. Found by the variable each
    # carries, since a pid the wrapper writes down may not be one of this
    # machine's (or may not be written at all).
    mark = ("CORDON_STANDIN_BACKGROUND=" + bg).encode()
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if f.read() != b"sleep\x00600\x00":
                    continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                if mark not in f.read().split(b"\x00"):
                    continue
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    t.ok(p.returncode == 0 and p.stdout.count(b"\nok   ") == 3,
         w + "probe: a child of the wrapper left holding its stderr does not hold the probe",
         p.stdout + p.stderr)
    p = subprocess.run(pre + ["python3", "-c", "import os, signal, sys; "
                              "signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
                              "os.execv(sys.argv[1], sys.argv[1:])", MAC, "probe"],
                       capture_output=True)
    t.ok(p.returncode == 0 and p.stdout.count(b"\nok   ") == 3,
         w + "probe: started with SIGCHLD ignored, it still tells the wrapper's status",
         p.stdout + p.stderr)
    p = subprocess.run(pre + [MAC, "probe", "--help"], capture_output=True)
    t.ok(p.returncode == 0 and p.stdout.startswith(b"Usage: cordon probe [--json]"),
         w + "probe --help", p.stdout + p.stderr)

    # ---- the profile lookup: the Linux cordon's, directory by directory ----
    def both(args, env=None):
        e = dict(os.environ)
        e.pop("CORDON_POLICY_PATH", None)
        e.update(env or {})
        return (subprocess.run(pre + [MAC] + args, capture_output=True, env=e),
                subprocess.run(pre + [CORDON] + args + ["--backend", "seatbelt"],
                               capture_output=True, env=e))

    lk = os.path.join(base, "lookup")
    m, l_ = both(["explain", "--profile", "no-such-profile"])
    t.ok(m.returncode == 125 and b"no such profile 'no-such-profile' (searched " in m.stderr
         and m.stderr.splitlines()[:1] == l_.stderr.splitlines()[:1],
         w + "lookup: an unknown name lists what was searched, as the Linux cordon does",
         m.stderr + b"\n" + l_.stderr)
    env = {"CORDON_POLICY_PATH": "%s/empty:%s/a" % (lk, lk)}
    m, l_ = both(["explain", "--json", "--profile", "read-only"], env)
    mj = json.loads(m.stdout) if m.returncode == 0 else {}
    t.ok(mj.get("profile", {}).get("origin") == lk + "/a/read-only.json"
         and mj["profile"].get("network") == "enabled",
         w + "lookup: CORDON_POLICY_PATH's read-only.json wins over the built-in",
         m.stdout[-400:] + m.stderr[-400:])
    t.ok(m.returncode == 0 and l_.returncode == 0
         and mj.get("profile") == json.loads(l_.stdout).get("profile")
         and mj.get("seatbelt") == json.loads(l_.stdout).get("seatbelt"),
         w + "lookup: the same profile and plan as the Linux cordon's",
         m.stderr[-300:] + l_.stderr[-300:])
    m, _ = both(["explain", "--json", "--profile", "mine"], env)
    t.ok(m.returncode == 0 and json.loads(m.stdout)["profile"]["origin"] == lk + "/a/mine.json",
         w + "lookup: a name no built-in has is found there", m.stderr[-300:])
    m, l_ = both(["explain", "--profile", "read-only"],
                 {"CORDON_POLICY_PATH": "%s/b:%s/a" % (lk, lk)})
    t.ok(m.returncode == 125 and b"/b/read-only.json' is a directory, not a regular file"
         in m.stderr and m.stderr.splitlines()[:1] == l_.stderr.splitlines()[:1],
         w + "lookup: a directory where the profile would be is refused, never passed over",
         m.stderr + l_.stderr)
    # A link's target reaches the message with its control characters escaped.
    m, l_ = both(["explain", "--profile", "read-only"], {"CORDON_POLICY_PATH": lk + "/esc"})
    t.ok(m.returncode == 125 and l_.returncode == 125
         and b"is a dangling symbolic link (to '/x\\x1b]0;pwned\\x07')" in m.stderr
         and b"is a dangling symbolic link (to '/x\\x1b]0;pwned\\x07')" in l_.stderr
         and b"\x1b" not in m.stderr + l_.stderr,
         w + "lookup: a dangling link's target is shown escaped, never raw", m.stderr + l_.stderr)
    m, l_ = both(["explain", "--profile", "read-only"], {"CORDON_POLICY_PATH": "rel/dir"})
    t.ok(m.returncode == 125 and b"'rel/dir' is not an absolute directory" in m.stderr
         and m.stderr.splitlines()[:1] == l_.stderr.splitlines()[:1],
         w + "lookup: a relative CORDON_POLICY_PATH is refused", m.stderr)
    m, _ = both(["explain", "--json", "--profile", "read-only"], {"CORDON_POLICY_PATH": ""})
    t.ok(m.returncode == 0 and json.loads(m.stdout)["profile"]["origin"].startswith("built-in"),
         w + "lookup: with nothing installed, the built-in", m.stderr[-300:])
    m, _ = both(["explain", "--profile", "x.json"], env)
    t.ok(m.returncode == 125 and b"'x.json'" in m.stderr,
         w + "lookup: NAME.json is a file, not looked up", m.stderr[-300:])


if not os.access(MAC, os.X_OK):
    t.not_ok("the macOS front end is built: %s" % MAC)
    t.done()
base = tempfile.mkdtemp(prefix="cordon-macos-", dir="/var/tmp")
try:
    for d in ("ws/.git", "ws/secret", "ws/keys", "other"):
        os.makedirs(os.path.join(base, d))
    with open(os.path.join(base, "restricted.json"), "w") as f:
        json.dump({"version": 1, "type": "managed", "network": "restricted",
                   "file_system": {"type": "restricted", "entries": [
                       {"path": {"type": "special", "value": {"kind": "minimal"}},
                        "access": "read"},
                       {"path": {"type": "special", "value": {"kind": "project_roots"}},
                        "access": "read"},
                       {"path": {"type": "special",
                                 "value": {"kind": "project_roots", "subpath": "secret"}},
                        "access": "none"}]}}, f)
    for d in ("lookup/a", "lookup/empty", "lookup/b/read-only.json", "lookup/esc"):
        os.makedirs(os.path.join(base, d))
    enabled = {"version": 1, "type": "managed", "network": "enabled",
               "file_system": {"type": "unrestricted"}}
    for n in ("read-only", "mine"):
        with open(os.path.join(base, "lookup", "a", n + ".json"), "w") as f:
            json.dump(enabled, f)
    with open(os.path.join(base, "netrules.json"), "w") as f:
        json.dump({"version": 1, "type": "managed", "file_system": {"type": "unrestricted"},
                   "network": {"mode": "managed", "allow_domains": ["example.com"]}}, f)
    for name, limits in (("limited", {"open_files": 48}), ("limited-memory", {"memory": "1G"})):
        with open(os.path.join(base, name + ".json"), "w") as f:
            json.dump({"version": 1, "type": "managed", "network": "restricted",
                       "file_system": {"type": "unrestricted"}, "limits": limits}, f)
    with open(os.path.join(base, "bad.json"), "w") as f:
        f.write('{\n  "version": 1,\n  "type": "sideways"\n}\n')
    for root, dirs, files in os.walk(base):
        os.chmod(root, 0o755)
        for n in files:
            os.chmod(os.path.join(root, n), 0o644)
    # After the walk, which would follow it.
    os.symlink("/x\x1b]0;pwned\x07", os.path.join(base, "lookup", "esc", "read-only.json"))
    cases("root" if os.geteuid() == 0 else "user", [], base)
    pre, why = user_prefix()
    if pre is None:
        t.skip("the cases as %s" % USER, why)
    else:
        shutil.chown(os.path.join(base, "ws"), USER)
        cases(USER, pre, base)
finally:
    shutil.rmtree(base, ignore_errors=True)
t.done()
