#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `make check-codex`: the released Codex CLI (`codex exec`) drives an executor
# over WebSocket, its model being the local mock of mock_model.py, which asks
# for three tool calls in turn:
#   1. exec_command: a shell command that prints a marker and its own
#      sandbox state (/proc/self/status: NoNewPrivs, Seccomp);
#   2. apply_patch: an edit of a file of the workspace;
#   3. exec_command: a write outside the workspace.
# The executor's own CODEX_HOME configures an HTTP MCP server
# (EXECUTOR_MCP); with environmentConfigRead the CLI reads it through
# environmentConfig/read (the relay sees the request and the server in the
# answer).
# It passes when the command ran on the executor under the sandbox intent the
# CLI sent (the relay between them saw process/start with the intent, cordon's
# log and its replies say sandboxed, the process reports seccomp and
# no_new_privs), its output reached the mock, the edit landed, and the outside
# write was refused (no file; the mock saw the denial). The executors: `cordon
# serve`, reached the two ways the CLI selects one (CODEX_EXEC_SERVER_URL, and
# environments.toml with a bearer token; a wrong token must run nothing), and,
# as the control, the released `codex exec-server`. See SCENARIOS.
#
# Usage: check-codex.py CORDON CODEX [SCENARIO...]   (default: all)
# TAP on stdout. Synchronised on the mock's requests and on the CLI's exit;
# CD_CODEX_TIMEOUT (s, default 300) only bounds a hang.

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mock_model import MockModel  # noqa: E402
from ws_tap import WsTap  # noqa: E402

TIMEOUT = float(os.environ.get("CD_CODEX_TIMEOUT", "300"))
MARKER = "cordon-check-codex-marker"
MODEL = "gpt-5.5"  # a model the CLI knows: it offers apply_patch (freeform) for it
# An MCP server configured only on the executor's host (nothing listens there:
# the CLI's attempt to start it fails fast, which does not stop the turn).
EXECUTOR_MCP = "cordon_check_executor_mcp"
EXECUTOR_CONFIG = ('[mcp_servers.%s]\nurl = "http://127.0.0.1:9/mcp"\n' % EXECUTOR_MCP)

n = 0
failed = 0


def ok(cond, what, detail=""):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what))
    if not cond:
        failed += 1
        for line in str(detail).splitlines()[-40:]:
            print("#   " + line)
    sys.stdout.flush()
    return cond


def diag(text):
    for line in str(text).splitlines():
        print("# " + line)
    sys.stdout.flush()


class Executor:
    """An executor listening on ws://127.0.0.1:0; its stderr kept in a file."""

    def __init__(self, argv, env, logpath):
        self.logpath = logpath
        self.errf = open(logpath, "wb")
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=self.errf, env=env, cwd="/", start_new_session=True)
        self.url = None
        buf = b""
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in buf and time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 4096) if r else b""
            if not chunk:
                break
            buf += chunk
        if b"\n" in buf:
            self.url = buf.split(b"\n")[0].decode().strip()

    def log(self):
        with open(self.logpath, "rb") as fh:
            return fh.read().decode(errors="replace")

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.errf.close()


class StdioExecutor:
    """A cordon the CLI starts itself (environments.toml `program`): only its log."""

    def __init__(self, logpath):
        self.logpath = logpath
        open(logpath, "wb").close()

    def log(self):
        with open(self.logpath, "rb") as fh:
            return fh.read().decode(errors="replace")

    def stop(self):
        pass


def steps(outside):
    return [
        lambda body: {"type": "function_call", "name": "exec_command",
                      "arguments": json.dumps({
                          "cmd": "echo %s; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status"
                                 % MARKER,
                          "yield_time_ms": 30000})},
        lambda body: {"type": "custom_tool_call", "name": "apply_patch",
                      "input": "*** Begin Patch\n*** Update File: notes.txt\n"
                               "@@\n-before\n+after the patch\n*** End Patch\n"},
        lambda body: {"type": "function_call", "name": "exec_command",
                      "arguments": json.dumps({
                          "cmd": "echo escaped > %s; echo status=$?" % outside,
                          "yield_time_ms": 30000})},
    ]


calls = {}


def trim(v):
    """v with long strings and lists cut, for a readable transcript."""
    if isinstance(v, str):
        return v if len(v) <= 160 else v[:160] + "...(%d chars)" % len(v)
    if isinstance(v, list):
        return [trim(x) for x in v[:12]] + (["..."] if len(v) > 12 else [])
    if isinstance(v, dict):
        return {k: trim(x) for k, x in v.items()}
    return v


def save_transcript(kind, msgs, work):
    """The executor traffic, one JSON line a message, to CD_CODEX_TRANSCRIPT.KIND.jsonl
    when set (kept beside the work directory otherwise)."""
    dest = os.environ.get("CD_CODEX_TRANSCRIPT")
    path = "%s.%s.jsonl" % (dest, kind) if dest else os.path.join(work, "transcript.jsonl")
    with open(path, "w") as fh:
        for d, m in msgs:
            fh.write("%s %s\n" % (d, json.dumps(trim(m))))


TOKEN = "cordon-check-codex-token-0123456789abcdef"

# The scenarios: how the executor runs and how the CLI is pointed at it.
#   cordon          CODEX_EXEC_SERVER_URL, no token: cordon's loopback rule
#                   (only our own uid gets in) is what admits the CLI
#   cordon-token    $CODEX_HOME/environments.toml with auth_bearer_token and
#                   include_local = false; cordon serve --auth-token-file
#   cordon-refused  the same with a wrong token: cordon refuses the upgrade,
#                   and the CLI, with no local environment to fall back on,
#                   runs nothing (the mock is told so)
#   cordon-stdio    environments.toml with program = cordon serve: the CLI
#                   starts cordon itself and speaks over its stdin/stdout (no
#                   relay: the traffic is checked through cordon's log)
#   codex           the control: the released codex exec-server, as `cordon`
SCENARIOS = ("cordon", "cordon-token", "cordon-refused", "cordon-stdio", "codex")


def write_stdio_environment(home, cordon, log):
    with open(os.path.join(home, "environments.toml"), "w") as fh:
        fh.write('default = "cordon"\ninclude_local = false\n\n[[environments]]\n'
                 'id = "cordon"\nprogram = "/bin/sh"\n'
                 'args = ["-c", "exec \\"$0\\" serve -v 2>>\\"$1\\"", %s, %s]\n'
                 % (json.dumps(cordon), json.dumps(log)))


def write_environments(home, url, token):
    with open(os.path.join(home, "environments.toml"), "w") as fh:
        fh.write('default = "cordon"\ninclude_local = false\n\n[[environments]]\n'
                 'id = "cordon"\nurl = "%s"\nauth_bearer_token = "%s"\n' % (url, token))


def run_one(kind, cordon, codex, work):
    os.makedirs(work)
    home = os.path.join(work, "home")
    ws = os.path.join(work, "workspace")
    outdir = os.path.join(work, "outside")
    for d in (home, ws, outdir):
        os.mkdir(d)
    outside = os.path.join(outdir, "escaped.txt")
    with open(os.path.join(ws, "notes.txt"), "w") as fh:
        fh.write("before\n")
    refused = kind == "cordon-refused"
    if refused:
        # One call, which must not run anywhere.
        mock = MockModel([lambda body: {
            "type": "function_call", "name": "exec_command",
            "arguments": json.dumps({"cmd": "echo ran > ran.txt", "yield_time_ms": 30000})}])
    else:
        mock = MockModel(steps(outside))
    with open(os.path.join(home, "config.toml"), "w") as fh:
        fh.write('model = "%s"\nmodel_provider = "mock"\n\n[model_providers.mock]\n'
                 'name = "mock"\nbase_url = "http://127.0.0.1:%d/v1"\nwire_api = "responses"\n'
                 'env_key = "CD_MOCK_API_KEY"\nrequest_max_retries = 0\n'
                 'stream_max_retries = 0\n' % (MODEL, mock.port))
    base = {k: v for k, v in os.environ.items()
            if k in ("PATH", "LANG", "LC_ALL", "USER", "LOGNAME", "HOME", "SHELL")}
    base.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    if kind == "codex":
        argv = [codex, "exec-server", "--listen", "ws://127.0.0.1:0"]
        senv = dict(base, CODEX_HOME=os.path.join(work, "server-home"), RUST_LOG="debug")
        os.mkdir(senv["CODEX_HOME"])
        with open(os.path.join(senv["CODEX_HOME"], "config.toml"), "w") as fh:
            fh.write(EXECUTOR_CONFIG)
    else:
        argv = [cordon, "serve", "--listen", "ws://127.0.0.1:0", "-v"]
        if kind != "cordon":
            tokfile = os.path.join(work, "token")
            fd = os.open(tokfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, (TOKEN + "\n").encode())
            os.close(fd)
            argv += ["--auth-token-file", tokfile]
        senv = dict(base, CODEX_HOME=os.path.join(work, "server-home"))
        os.mkdir(senv["CODEX_HOME"])
        with open(os.path.join(senv["CODEX_HOME"], "config.toml"), "w") as fh:
            fh.write(EXECUTOR_CONFIG)
    stdio = kind == "cordon-stdio"
    logpath = os.path.join(work, "executor.log")
    ex = StdioExecutor(logpath) if stdio else Executor(argv, senv, logpath)
    tap = None
    try:
        cenv = dict(base, CODEX_HOME=home, CD_MOCK_API_KEY="mock-key",
                    TMPDIR=os.path.join(work, "tmp"))
        os.mkdir(cenv["TMPDIR"])
        if stdio:
            write_stdio_environment(home, cordon, logpath)
        else:
            if not ok(ex.url is not None and ex.url.startswith("ws://"),
                      "[%s] the executor listens (%s)" % (kind, ex.url), ex.log()):
                return
            host, port = ex.url[len("ws://"):].rsplit(":", 1)
            tap = WsTap(host.strip("[]"), int(port))
            url = "ws://127.0.0.1:%d" % tap.port
            if kind in ("cordon", "codex"):
                cenv["CODEX_EXEC_SERVER_URL"] = url
            else:
                write_environments(home, url, "wrong-" + TOKEN if refused else TOKEN)
        cli_out = open(os.path.join(work, "cli.log"), "wb")
        cli = subprocess.Popen([codex, "exec", "--skip-git-repo-check", "--sandbox",
                                "workspace-write", "-C", ws, "-m", MODEL,
                                "Run the steps you are given."],
                               stdin=subprocess.DEVNULL, stdout=cli_out,
                               stderr=subprocess.STDOUT, env=cenv, cwd=ws,
                               start_new_session=True)

        def reap():
            cli.wait()
            with mock.cond:
                mock.cond.notify_all()

        waiter = threading.Thread(target=reap, daemon=True)
        waiter.start()
        want = 2 if refused else 4
        got = mock.wait_requests(want, TIMEOUT, alive=lambda: cli.poll() is None)
        # The closing message has been streamed: the CLI now exits on its own.
        waiter.join(TIMEOUT)
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait()
        cli_out.close()
        with open(os.path.join(work, "cli.log"), "rb") as fh:
            cli_text = fh.read().decode(errors="replace")
        ok(got, "[%s] the CLI came back to the mock after each tool call (%d requests)"
           % (kind, len(mock.requests)), cli_text)
        ok(cli.returncode == 0, "[%s] codex exec exits 0 (%s)" % (kind, cli.returncode), cli_text)
        msgs = tap.messages() if tap is not None else []
        log = ex.log()
        if refused:
            out = mock.output_of(0) or ""
            ok(not os.path.exists(os.path.join(ws, "ran.txt")),
               "[%s] the command ran nowhere (no file)" % kind, out)
            ok("No usable execution environment" in out,
               "[%s] the mock was told there is no execution environment" % kind, out)
            ok("wrong bearer token" in log and "process/start" not in log,
               "[%s] cordon refused the upgrade and started nothing" % kind, log)
            save_transcript(kind, msgs, work)
            return
        out1 = mock.output_of(0) or ""
        ok(MARKER in out1, "[%s] the command's output reached the mock" % kind, out1)
        ok("NoNewPrivs:\t1" in out1 and "Seccomp:\t2" in out1,
           "[%s] the command ran sandboxed (no_new_privs, seccomp filter)" % kind, out1)
        with open(os.path.join(ws, "notes.txt")) as fh:
            notes = fh.read()
        ok(notes == "after the patch\n", "[%s] the apply_patch edit landed in the workspace"
           % kind, "notes.txt: %r\nmock saw: %s" % (notes, mock.output_of(1)))
        out3 = mock.output_of(2) or ""
        ok(not os.path.exists(outside), "[%s] the write outside the workspace made no file"
           % kind, out3)
        ok("status=0" not in out3 and ("denied" in out3.lower() or "read-only" in out3.lower()),
           "[%s] the mock saw the outside write denied" % kind, out3)
        if stdio:
            ok(log.count("process/start") == 2 and log.count("sandboxed)") == 2,
               "[%s] cordon, started by the CLI, ran both commands sandboxed (its log)" % kind,
               log)
            return
        starts = [m for d, m in msgs if d == "c>s" and isinstance(m, dict)
                  and m.get("method") == "process/start"]
        replies = {m.get("id"): m for d, m in msgs if d == "s>c" and isinstance(m, dict)
                   and "id" in m and "method" not in m}
        sandboxed = [m for m in starts if isinstance(m.get("params"), dict)
                     and m["params"].get("sandbox")]
        ok(len(starts) == 2 and len(sandboxed) == len(starts)
           and all("result" in replies.get(m.get("id"), {}) for m in starts),
           "[%s] both commands went to the executor as process/start with a sandbox intent, "
           "and it started them" % kind, json.dumps(starts)[:3000])
        if kind != "codex":
            ok(log.count("sandboxed)") >= 2 and len(starts) == 2
               and all(replies.get(m.get("id"), {}).get("result", {}).get("cordon", {})
                       .get("sandboxed") is True for m in starts),
               "[%s] cordon started both sandboxed (its log, and \"cordon\" in the replies)"
               % kind, log + json.dumps([replies.get(m.get("id")) for m in starts]))
        reads = [m for d, m in msgs if d == "c>s" and isinstance(m, dict)
                 and m.get("method") == "environmentConfig/read"]
        layers = [ly for m in reads
                  for ly in replies.get(m.get("id"), {}).get("result", {})
                  .get("config", {}).get("layers", [])]
        ok(reads and any(EXECUTOR_MCP in ly.get("toml", "") for ly in layers),
           "[%s] the CLI read the executor's MCP server through environmentConfig/read" % kind,
           json.dumps([reads, [replies.get(m.get("id")) for m in reads]])[:3000])
        save_transcript(kind, msgs, work)
        calls.setdefault(kind, [m.get("method") for d, m in msgs
                                if d == "c>s" and isinstance(m, dict) and "method" in m])
        diag("[%s] tool outputs the mock received:" % kind)
        for i in range(3):
            diag("  step %d: %r" % (i + 1, (mock.output_of(i) or "")[:400]))
        if mock.other:
            diag("[%s] other requests to the mock: %s" % (kind, ", ".join(mock.other)))
    finally:
        if tap is not None:
            tap.close()
        ex.stop()
        mock.close()


def main():
    if len(sys.argv) < 3:
        print("usage: check-codex.py CORDON CODEX [SCENARIO...]", file=sys.stderr)
        return 2
    cordon, codex = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    kinds = sys.argv[3:] or list(SCENARIOS)
    for k in kinds:
        if k not in SCENARIOS:
            print("check-codex.py: unknown scenario %s (%s)" % (k, " ".join(SCENARIOS)),
                  file=sys.stderr)
            return 2
    # The CLI's state directory must not be under /tmp (it refuses that).
    top = tempfile.mkdtemp(prefix="cordon-check-codex-", dir="/var/tmp")
    keep = os.environ.get("CD_CODEX_KEEP")
    try:
        for kind in kinds:
            run_one(kind, cordon, codex, os.path.join(top, kind))
        if "cordon" in calls and "codex" in calls:
            a, b = calls["cordon"], calls["codex"]
            diag("methods the CLI called, cordon: %s" % " ".join(dict.fromkeys(a)))
            diag("methods the CLI called, codex:  %s" % " ".join(dict.fromkeys(b)))
    finally:
        if keep:
            diag("kept: " + top)
        else:
            shutil.rmtree(top, ignore_errors=True)
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
