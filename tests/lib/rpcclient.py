# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small JSON-RPC client for the `cordon serve` integration tests.

Standard library only. It spawns `$CORDON serve --listen stdio`, writes
requests and notifications as newline-delimited JSON, reads the server's
lines with timeouts (selectors, non-blocking reads of stdout and stderr so
the server can never block on a full stderr pipe), keeps notifications apart
from responses, and offers TAP helpers (ok/not_ok/skip/done, flushed at
once so a hang still shows how far a script got).

Environment: CORDON (the binary; default "cordon"), CD_TEST_HELPERS
(try-syscall), CORDON_TEST_SERVE_LOOPS ("epoll poll" by default: the loops
each scenario runs under), CD_TEST_WAIT (see WAIT).

Tests wait for events, not for time: what must happen is waited for with
WAIT as the bound, which a passing test never reaches (it only ends a test
that fails, or hangs, instead of hanging the suite). Hooks gives a test the
server's own events (src/serve/testhook.h) to wait for.
"""

import atexit
import base64
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

# A runner may start the tests with stdin closed (CI does): the first descriptor
# a test opens would then be 0, and a later dup2 onto 0 in a child would replace
# it. The tests hold /dev/null there; cordon's own handling of a closed stdin is
# tested by passing one explicitly.
for _fd in (0, 1, 2):
    try:
        os.fstat(_fd)
    except OSError:
        if os.open("/dev/null", os.O_RDWR) != _fd:
            raise SystemExit("cannot open /dev/null on descriptor %d" % _fd)

CORDON = os.environ.get("CORDON", "cordon")
# $CORDON is the macOS program built on Linux by .ci/darwin-like.sh (make
# check-darwin-serve): what only Linux does is not asked of it.
DARWIN_LIKE = bool(os.environ.get("CD_DARWIN_LIKE"))
HELPERS = os.environ.get("CD_TEST_HELPERS", ".")
LOOPS = os.environ.get("CORDON_TEST_SERVE_LOOPS", "epoll poll").split()
# Seconds to wait for something that must happen: only a failing test waits that long.
WAIT = float(os.environ.get("CD_TEST_WAIT", "120"))
# Seconds within which an answer that must not wait for something slow (a held copy,
# a flood, a client that stopped reading) comes: far above what the server takes on
# a loaded host, far below the stall such a check guards against.
PROMPT = float(os.environ.get("CD_TEST_PROMPT", "5"))

# A root-read, network-restricted wire profile (the Appendix A example).
ROOT_READ = {
    "type": "managed",
    "file_system": {
        "type": "restricted",
        "entries": [{"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}],
    },
    "network": "restricted",
}


def special(kind, access, subpath=None):
    value = {"kind": kind}
    if subpath is not None:
        value["subpath"] = subpath
    return {"path": {"type": "special", "value": value}, "access": access}


def path_entry(path, access):
    return {"path": {"type": "path", "path": uri(path)}, "access": access}


def profile(entries, network="restricted"):
    return {
        "type": "managed",
        "file_system": {"type": "restricted", "entries": entries},
        "network": network,
    }


def workspace_write(extra=()):
    """The built-in workspace-write profile on the wire, plus extra entries."""
    return profile(
        [
            special("root", "read"),
            special("project_roots", "write"),
            special("slash_tmp", "write"),
            special("tmpdir", "write"),
            special("project_roots", "read", ".git"),
            special("project_roots", "read", ".agents"),
            special("project_roots", "read", ".codex"),
        ]
        + list(extra)
    )


def uri(path):
    """A POSIX path as a file:// URI (percent-encoding what needs it)."""
    out = []
    for b in os.fsencode(path):
        c = chr(b)
        if c.isascii() and (c.isalnum() or c in "/-._~!$&'()*+,;=:@"):
            out.append(c)
        else:
            out.append("%%%02X" % b)
    return "file://" + "".join(out)


def b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode("ascii")


def unb64(s):
    return base64.b64decode(s.encode("ascii"), validate=True)


class Timeout(Exception):
    pass


class Eof(Exception):
    pass


# ---------------------------------------------------------------- TAP

class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, desc, diag=None):
        self.n += 1
        if cond:
            print("ok %d - %s" % (self.n, desc))
        else:
            self.failed += 1
            print("not ok %d - %s" % (self.n, desc))
            if diag is not None:
                self.diag(diag)
        sys.stdout.flush()
        return bool(cond)

    def not_ok(self, desc, diag=None):
        return self.ok(False, desc, diag)

    def eq(self, got, want, desc):
        return self.ok(got == want, desc, "got:  %r\nwant: %r" % (got, want))

    def skip(self, desc, reason):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, desc, reason))
        sys.stdout.flush()

    def diag(self, text):
        for line in str(text).splitlines() or [""]:
            print("# " + line[:2000])
        sys.stdout.flush()

    def done(self):
        print("1..%d" % self.n)
        sys.stdout.flush()
        sys.exit(0)

    def skip_all(self, reason):
        print("1..0 # SKIP %s" % reason)
        sys.stdout.flush()
        sys.exit(0)

    def guard(self, desc, fn, *args):
        """Run fn(*args); an exception becomes one failed test, not a dead script."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - report anything
            import traceback

            self.not_ok(desc + ": raised " + type(e).__name__, traceback.format_exc())
            return None


def cordon_usable():
    """None when $CORDON exists and knows `serve`, else the reason to skip."""
    try:
        r = subprocess.run([CORDON, "serve", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "cannot run %s: %s" % (CORDON, e)
    if r.returncode != 0:
        return "%s has no working `serve` subcommand (status %d)" % (CORDON, r.returncode)
    return None


# ---------------------------------------------------------------- server

class RpcMixin:
    """The message level, shared by every transport: needs self.pending, self.notes,
    self.awaited, self.out_eof, self.next_id, self._pump(deadline) and self.send_raw(bytes)."""

    def read_msg(self, timeout=None):
        """The next message (response or notification). Eof at end of stdout."""
        if timeout is None:
            timeout = WAIT
        deadline = time.monotonic() + timeout
        while not self.pending:
            if self.out_eof:
                raise Eof("server closed stdout" + self.eof_detail())
            if time.monotonic() >= deadline:
                raise Timeout("no message within %.1f s" % timeout)
            self._pump(deadline)
        return self.pending.pop(0)

    def read_response(self, timeout=None):
        """The next response; notifications in between stay in self.notes. Responses to
        requests sent with send_request and not yet collected are passed over: they
        may arrive at any time, and stay pending for wait_id."""
        if timeout is None:
            timeout = WAIT
        deadline = time.monotonic() + timeout
        while True:
            k = 0
            while k < len(self.pending):
                m = self.pending[k]
                if "id" not in m:
                    del self.pending[k]
                elif m["id"] in self.awaited:
                    k += 1
                else:
                    return self.pending.pop(k)
            if self.out_eof:
                raise Eof("server closed stdout" + self.eof_detail())
            if time.monotonic() >= deadline:
                raise Timeout("no response within %.1f s" % timeout)
            self._pump(deadline)

    def send(self, obj):
        self.send_raw(json.dumps(obj, separators=(",", ":")) + "\n")

    def eof_detail(self):
        """What the transport knows of why the server went: nothing by default."""
        return ""

    def notify(self, method, params=None):
        msg = {"method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def new_id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def request(self, method, params=None, timeout=None, id=None, omit_params=False):
        """Send a request and return its response (the whole {id, result|error} object)."""
        if id is None:
            id = self.new_id()
        msg = {"id": id, "method": method}
        if not omit_params:
            msg["params"] = params
        self.send(msg)
        resp = self.read_response(timeout)
        if resp.get("id") != id:
            raise AssertionError("response id %r, expected %r: %r" % (resp.get("id"), id, resp))
        return resp

    def send_request(self, method, params):
        """Send a request without waiting for its response; its id."""
        i = self.new_id()
        self.awaited.add(i)
        self.send({"id": i, "method": method, "params": params})
        return i

    def wait_id(self, i, timeout=None):
        """The response with id i, or None after timeout or at EOF; other messages stay pending."""
        if timeout is None:
            timeout = WAIT
        deadline = time.monotonic() + timeout
        while True:
            for k, m in enumerate(self.pending):
                if m.get("id") == i:
                    self.awaited.discard(i)
                    return self.pending.pop(k)
            if time.monotonic() >= deadline or self.out_eof:
                return None
            self._pump(deadline)

    def has_id(self, i):
        """Whether the response with id i has arrived (it stays pending)."""
        self._pump(time.monotonic())
        return any(m.get("id") == i for m in self.pending)

    def call(self, method, params=None, timeout=None):
        """request() that returns the result and raises on an error response."""
        resp = self.request(method, params, timeout)
        if "error" in resp:
            raise AssertionError("%s failed: %r" % (method, resp["error"]))
        return resp["result"]

    def handshake(self, client="cordon-tests"):
        res = self.call("initialize", {"clientName": client})
        self.notify("initialized", {})
        return res

    # -- process helpers

    def start(self, pid, argv, cwd="/tmp", env=None, tty=False, **extra):
        """process/start; returns the whole response. cwd is a native path turned into a URI."""
        params = {
            "processId": pid,
            "argv": argv,
            "cwd": uri(cwd) if cwd.startswith("/") else cwd,
            "env": {"PATH": "/usr/bin:/bin"} if env is None else env,
            "tty": tty,
        }
        params.update(extra)
        return self.request("process/start", params)

    def notes_for(self, pid):
        return [n for n in self.notes if n.get("params", {}).get("processId") == pid]

    def wait_closed(self, pid, timeout=None):
        """Wait for process/closed of pid; return a Result built from the notifications."""
        if timeout is None:
            timeout = WAIT
        deadline = time.monotonic() + timeout
        while not any(n["method"] == "process/closed" for n in self.notes_for(pid)):
            if self.out_eof:
                raise Eof("server closed stdout before process/closed of %s" % pid)
            if time.monotonic() >= deadline:
                raise Timeout("no process/closed for %s within %.1f s" % (pid, timeout))
            self._pump(deadline)
        # Notifications consumed here must not be mistaken for responses later.
        self.pending = [m for m in self.pending if "id" in m]
        return Result(self.notes_for(pid))

    def output_of(self, pid):
        """Everything process pid wrote so far (all streams), from its notifications."""
        return b"".join(unb64(n["params"]["chunk"]) for n in self.notes_for(pid)
                        if n["method"] == "process/output")

    def wait_output(self, pid, text, timeout=None):
        """Wait until process pid has written text (bytes); True, or False at timeout/EOF."""
        deadline = time.monotonic() + (WAIT if timeout is None else timeout)
        while text not in self.output_of(pid):
            if self.out_eof or time.monotonic() >= deadline:
                return False
            self._pump(deadline)
        return True

    def run(self, pid, argv, timeout=None, **kw):
        """start + wait_closed; returns (start response, Result or None)."""
        resp = self.start(pid, argv, **kw)
        if "error" in resp:
            return resp, None
        return resp, self.wait_closed(pid, timeout)


def server_env(loop="epoll", env=None, extra_env=None):
    """The environment of a `cordon serve` under test: the given loop, no feature masking."""
    e = dict(os.environ if env is None else env)
    # Keep the tests deterministic: feature masking only when asked for.
    e.pop("CORDON_TEST_DISABLE", None)
    if loop == "poll":
        e["CORDON_LOOP"] = "poll"
    else:
        e.pop("CORDON_LOOP", None)
    if extra_env:
        e.update(extra_env)
    return e


class Server(RpcMixin):
    """One `cordon serve --listen stdio` child and its line streams."""

    def __init__(self, loop="epoll", args=(), env=None, extra_env=None, cwd=None,
                 new_session=False, cordon=None, pass_fds=()):
        e = server_env(loop, env, extra_env)
        self.loop = loop
        self.argv = [cordon or CORDON, "serve", "--listen", "stdio"] + list(args)
        self.p = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=e, cwd=cwd, bufsize=0,
                                  start_new_session=new_session, pass_fds=pass_fds)
        self.pid = self.p.pid    # the process spawned (signals go here)
        self._server_pid = None
        os.set_blocking(self.p.stdout.fileno(), False)
        os.set_blocking(self.p.stderr.fileno(), False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.p.stdout, selectors.EVENT_READ, "out")
        self.sel.register(self.p.stderr, selectors.EVENT_READ, "err")
        self.outbuf = bytearray()
        self.scanned = 0         # outbuf[:scanned] holds no newline
        self.err = bytearray()
        self.out_eof = False
        self.err_eof = False
        self.lines = []          # every raw stdout line, in order
        self.pending = []        # decoded messages not yet consumed
        self.awaited = set()     # ids sent by send_request, not yet collected by wait_id
        self.notes = []          # every notification seen, in order
        self.next_id = 1
        self.stdin_open = True
        self.stopped = None

    # -- output side

    def _pump(self, deadline):
        """Read whatever is available (waiting until deadline); False at EOF of stdout."""
        if self.out_eof:
            return False
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        events = self.sel.select(timeout)
        for key, _ in events:
            try:
                data = os.read(key.fileobj.fileno(), 1 << 20)
            except BlockingIOError:
                continue
            if key.data == "err":
                if not data:
                    self.err_eof = True
                    self.sel.unregister(key.fileobj)
                else:
                    self.err += data
                continue
            if not data:
                self.out_eof = True
                self.sel.unregister(key.fileobj)
                continue
            self.outbuf += data
            while True:
                # From where the last search ended: a long line arrives in many reads.
                i = self.outbuf.find(b"\n", self.scanned)
                if i < 0:
                    self.scanned = len(self.outbuf)
                    break
                line = bytes(self.outbuf[:i])
                del self.outbuf[: i + 1]
                self.scanned = 0
                self.lines.append(line)
                msg = json.loads(line)
                if "id" not in msg and "method" in msg:
                    self.notes.append(msg)
                self.pending.append(msg)
        return True

    def expect_eof(self, timeout=None):
        """True when stdout reaches EOF within timeout (messages before it are dropped)."""
        if timeout is None:
            timeout = WAIT
        deadline = time.monotonic() + timeout
        while not self.out_eof and time.monotonic() < deadline:
            self._pump(deadline)
        return self.out_eof

    def drain(self, timeout=0.0):
        """Read everything that arrives within timeout."""
        deadline = time.monotonic() + timeout
        while not self.out_eof:
            if time.monotonic() >= deadline:
                self._pump(time.monotonic())
                break
            self._pump(deadline)

    def wait_stderr(self, *texts, timeout=None):
        """Until each of texts has come on the server's stderr (what the server and its
        children write there arrives when it is read, not when it is written); whether
        they all came (bounded by WAIT: a failing test only)."""
        deadline = time.monotonic() + (WAIT if timeout is None else timeout)
        want = [x.encode() if isinstance(x, str) else x for x in texts]
        while not all(w in self.err for w in want) and not self.err_eof:
            if time.monotonic() >= deadline:
                break
            step = min(deadline, time.monotonic() + 0.1)
            if self.out_eof:
                self._pump_err(step)
            else:
                self._pump(step)
        return all(w in self.err for w in want)

    # -- input side

    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.p.stdin.write(data)

    @property
    def server_pid(self):
        """The pid of the process that runs the server loop and is the parent of the
        processes: the only child of self.pid (the init of the server's pid namespace
        as root, the inner child subreaper otherwise; see src/serve/pidns.c)."""
        if self._server_pid is None:
            self._server_pid = server_pid_of(self.pid)
        return self._server_pid

    def close_stdin(self):
        if self.stdin_open:
            self.stdin_open = False
            try:
                self.p.stdin.close()
            except OSError:
                pass

    def wait(self, timeout=5.0):
        """Exit status (negative: signal), or None if still running after timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # Keep draining so the server never blocks writing.
            if not (self.out_eof and self.err_eof):
                try:
                    sel_deadline = min(deadline, time.monotonic() + 0.05)
                    if self.out_eof:
                        self._pump_err(sel_deadline)
                    else:
                        self._pump(sel_deadline)
                except ValueError:
                    pass
            r = self.p.poll()
            if r is not None:
                return r
            if self.out_eof and self.err_eof:
                time.sleep(0.01)
        return self.p.poll()

    def _pump_err(self, deadline):
        if self.err_eof:
            time.sleep(max(0.0, min(0.01, deadline - time.monotonic())))
            return
        events = self.sel.select(max(0.0, deadline - time.monotonic()))
        for key, _ in events:
            data = os.read(key.fileobj.fileno(), 1 << 20)
            if key.data == "err":
                if not data:
                    self.err_eof = True
                    self.sel.unregister(key.fileobj)
                else:
                    self.err += data

    def stop(self):
        """Close stdin and reap (SIGKILL after WAIT). Returns the exit status."""
        if self.stopped is not None:
            return self.stopped
        self.close_stdin()
        r = self.wait(WAIT)
        if r is None:
            self.p.kill()
            r = self.p.wait()
        for f in (self.p.stdout, self.p.stderr):
            try:
                f.close()
            except OSError:
                pass
        self.sel.close()
        self.stopped = r
        return r

    def stderr_text(self):
        return self.err.decode(errors="replace")

    def eof_detail(self):
        """The server's stderr to its end and its exit status, for an Eof."""
        try:
            text = self.output_to_eof()
            code = self.p.wait(timeout=WAIT)
        except Exception as e:  # noqa: BLE001 - a detail for a message, never a failure
            return " (and its stderr and status cannot be read: %r)" % e
        return " (status %s; stderr: %r)" % (code, text[-1500:])

    def output_to_eof(self):
        """Read stdout and stderr to their ends (the server exited); stderr's text."""
        deadline = time.monotonic() + WAIT
        while not (self.out_eof and self.err_eof) and time.monotonic() < deadline:
            if self.out_eof:
                self._pump_err(deadline)
            else:
                self._pump(deadline)
        return self.stderr_text()


class Gate:
    """A FIFO a process waits on (`read x < PATH` in its script) until the test opens
    it: the process takes its next step when the test says, not after a sleep."""

    def __init__(self, directory, name="gate"):
        self.path = os.path.join(directory, name)
        os.mkfifo(self.path)
        os.chmod(self.path, 0o666)

    def open(self, line=b"go\n"):
        """Let the waiting process go: once it has opened the FIFO, write it a line."""
        deadline = time.monotonic() + WAIT
        while True:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:  # ENXIO: no reader yet
                if time.monotonic() >= deadline:
                    raise Timeout("nobody opened %s within %.0f s: %s" % (self.path, WAIT, e))
                time.sleep(0.01)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


class Hooks:
    """The server's test hooks (src/serve/testhook.h): a unix socket the server connects
    to at start (CORDON_TEST_EVENTS) and writes its events to, one line each, which a
    thread collects here; hold names fs methods (fs/copy...) the server performs only
    once the test releases them (CORDON_TEST_HOLD). Give the server env (extra_env=).
    Events are dicts: {"event": "fs-held", "conn": "3", "id": "7", "method": "fs/copy"}."""

    def __init__(self, hold=()):
        self.dir = tempfile.mkdtemp(prefix="cordon-hooks-")
        atexit.register(shutil.rmtree, self.dir, True)
        self.path = os.path.join(self.dir, "events")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(16)
        self.env = {"CORDON_TEST_EVENTS": self.path}
        if hold:
            self.env["CORDON_TEST_HOLD"] = ",".join(hold)
        self.events = []
        self.socks = []
        self.cond = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                sk, _ = self.listener.accept()
            except OSError:
                return
            with self.cond:
                self.socks.append(sk)
            threading.Thread(target=self._read, args=(sk,), daemon=True).start()

    def _read(self, sk):
        buf = b""
        while True:
            try:
                data = sk.recv(65536)
            except OSError:
                data = b""
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\n")
            with self.cond:
                for line in lines:
                    name, *fields = line.decode(errors="replace").split(" ")
                    ev = {"event": name}
                    for f in fields:
                        k, _, v = f.partition("=")
                        ev[k] = v
                    self.events.append(ev)
                self.cond.notify_all()

    def _matches(self, since, name, fields):
        return [e for e in self.events[since:] if e["event"] == name and
                all(e.get(k) == str(v) for k, v in fields.items())]

    def mark(self):
        """A position in the events: wait(..., since=mark) looks at the later ones only."""
        with self.cond:
            return len(self.events)

    def wait(self, name, n=1, since=0, timeout=None, **fields):
        """The first n events called name with these fields (a list when n > 1); raises
        Timeout after timeout (WAIT) seconds."""
        deadline = time.monotonic() + (WAIT if timeout is None else timeout)
        with self.cond:
            while True:
                found = self._matches(since, name, fields)
                if len(found) >= n:
                    return found[0] if n == 1 else found[:n]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout("no %d event(s) %s %r within %.0f s; events: %r" % (
                        n, name, fields, WAIT if timeout is None else timeout,
                        self.events[-20:]))
                self.cond.wait(left)

    def wait_any(self, *wanted, since=0, timeout=None):
        """The first event (since mark) matching one of wanted, each a (name, fields) pair;
        raises Timeout after timeout (WAIT) seconds."""
        deadline = time.monotonic() + (WAIT if timeout is None else timeout)
        with self.cond:
            while True:
                for e in self.events[since:]:
                    if any(e["event"] == name and all(e.get(k) == str(v) for k, v in
                                                      fields.items()) for name, fields in wanted):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout("none of the events %r within %.0f s; events: %r" % (
                        wanted, WAIT if timeout is None else timeout, self.events[-20:]))
                self.cond.wait(left)

    def seen(self, name, since=0, **fields):
        """The events called name with these fields that came so far."""
        with self.cond:
            return self._matches(since, name, fields)

    def release(self, ev):
        """Let a held request go (an fs-held event, or any with its conn and id)."""
        line = ("release conn=%s id=%s\n" % (ev["conn"], ev["id"])).encode()
        with self.cond:
            socks = list(self.socks)
        for sk in socks:
            try:
                sk.sendall(line)
            except OSError:
                pass

    def close(self):
        try:
            self.listener.close()
        except OSError:
            pass
        with self.cond:
            for sk in self.socks:
                try:
                    sk.close()
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Result:
    """What the notifications of one process say."""

    def __init__(self, notes):
        self.notes = notes
        self.out = {"stdout": bytearray(), "stderr": bytearray(), "pty": bytearray()}
        self.seqs = []
        self.exit_code = None
        self.sandbox_denied = None
        self.exited_seq = None
        self.closed_seq = None
        for n in notes:
            p = n["params"]
            self.seqs.append(p.get("seq"))
            if n["method"] == "process/output":
                self.out[p["stream"]] += unb64(p["chunk"])
            elif n["method"] == "process/exited":
                self.exit_code = p.get("exitCode")
                self.sandbox_denied = p.get("sandboxDenied")
                self.exited_seq = p.get("seq")
            elif n["method"] == "process/closed":
                self.closed_seq = p.get("seq")

    @property
    def stdout(self):
        return bytes(self.out["stdout"])

    @property
    def stderr(self):
        return bytes(self.out["stderr"])

    @property
    def pty(self):
        return bytes(self.out["pty"])


def err_code(resp):
    return resp.get("error", {}).get("code") if isinstance(resp, dict) else None


def err_msg(resp):
    return resp.get("error", {}).get("message", "") if isinstance(resp, dict) else ""


def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


def wait_gone(pids, timeout=None):
    if timeout is None:
        timeout = WAIT
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids):
            return True
        time.sleep(0.02)
    return not any(pid_alive(p) for p in pids)


# The start time (in clock ticks since boot) of every process a helper here
# found by its number: kill_quietly signals such a pid only while it is still
# that process. Tests run in parallel (make -j), and on a host with a pid_max
# of 32768 a number freed by a test's process is soon another test's: a late
# cleanup SIGKILLed another test's server that way.
_found_start = {}


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return int(st[st.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _found(pid):
    born = _start_time(pid)
    if born is not None:
        _found_start[pid] = born
    return pid


def children_of(pid):
    """Direct children of pid, from /proc/<pid>/task/*/children."""
    out = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [_found(int(x)) for x in f.read().split()]
        except OSError:
            pass
    return out


def ns_init_child(pid):
    """The child of pid that is pid 1 of a pid namespace of its own, or None."""
    for c in children_of(pid):
        try:
            with open("/proc/%d/status" % c) as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        ns = line.split()[1:]
                        if len(ns) >= 2 and ns[-1] == "1":
                            return c
        except OSError:
            pass
    return None


def standin_argv(stderr):
    """The argv the suite's sandbox-exec stand-in (tests/data/seatbelt-stand-in.sh) recorded
    on stderr (bytes), without the program itself; None when it did not run."""
    a = stderr.find(b"STANDIN<<")
    b = stderr.find(b">>STANDIN", a)
    if a < 0 or b < 0:
        return None
    return [x.decode() for x in stderr[a + 9:b].split(b"\0")[:-1]]


def server_pid_of(pid, timeout=None):
    """The server loop's pid for a spawned `cordon serve` (see Server.server_pid): the
    only child of the started process, which is the init of a pid namespace as root
    and a child subreaper otherwise (src/serve/pidns.c)."""
    if DARWIN_LIKE:
        return pid  # macOS: no pid namespace, no subreaper child (src/serve/pidns.c)
    if timeout is None:
        timeout = WAIT
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        c = ns_init_child(pid)
        if c is None:
            kids = children_of(pid)
            c = kids[0] if len(kids) == 1 else None
        if c is not None:
            return c
        time.sleep(0.01)
    return pid


def pids_by_cmdline(match):
    """Host pids whose /proc/PID/cmdline (NUL-separated bytes) satisfies match."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                if match(f.read()):
                    found.append(_found(int(p)))
        except OSError:
            pass
    return found


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def vm_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime is field 14, stime field 15.
    return int(fields[11]) + int(fields[12])


def wait_asleep(pid, timeout=None):
    """Wait until every thread of pid sleeps (state S: the loop waits for an event, the
    workers for a job): a process that answered a request and sleeps has nothing left
    to do. True, or False after timeout (WAIT)."""
    deadline = time.monotonic() + (WAIT if timeout is None else timeout)
    while True:
        states = []
        try:
            for task in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/stat" % (pid, task)) as f:
                    st = f.read()
                states.append(st[st.rindex(")") + 2])
        except OSError:
            return False
        if states and all(x == "S" for x in states):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def kill_quietly(pid, sig=signal.SIGKILL):
    """Signal pid, ignoring errors. A pid found by children_of or pids_by_cmdline
    is signalled only while it is still the process found (through a pidfd, so
    that the number cannot change hands between the check and the signal); any
    other (a child of ours not yet waited for) as it is."""
    born = _found_start.get(pid)
    if born is None:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
        return
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        if _start_time(pid) == born:
            signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- a hung file system: FUSE with nobody answering (root) ----------------

def threads_in_fuse(pid):
    """How many threads of pid wait on a FUSE request (their wchan says so)."""
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/wchan" % (pid, tid)) as f:
                n += "fuse" in f.read()
        except OSError:
            pass
    return n


def wait_threads_in_fuse(pid, n=1, timeout=10.0):
    """Until n threads of pid wait on a FUSE request: how many do (timeout is a
    bound only, for a server that never gets there)."""
    deadline = time.monotonic() + timeout
    while threads_in_fuse(pid) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return threads_in_fuse(pid)


class Hung:
    """A FUSE mount whose requests are never answered until release(): a hung
    network file system. Root only (fuse_why says why not)."""

    def __init__(self, prefix="cordon-hung-"):
        import ctypes
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self._led = []  # (path, aside): lead_into
        self.fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        opts = "fd=%d,rootmode=40000,user_id=0,group_id=0" % self.fd
        if self._libc.mount(b"cordon-hung", self.dir.encode(), b"fuse", 0,
                            opts.encode()) != 0:
            e = ctypes.get_errno()
            os.close(self.fd)
            os.rmdir(self.dir)
            raise OSError(e, os.strerror(e))

    def release(self):
        """Let go of the device: every request waiting on the mount fails (ENOTCONN)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def lead_into(self, path):
        """Make path lead into the mount: it is renamed aside (to path + ".away",
        returned) and a symlink to the mount takes its place; close() puts it back."""
        aside = path + ".away"
        os.rename(path, aside)
        os.symlink(self.dir, path)
        self._led.append((path, aside))
        return aside

    def close(self):
        self.release()
        for path, aside in reversed(self._led):
            os.unlink(path)
            os.rename(aside, path)
        self._led = []
        self._libc.umount2(self.dir.encode(), 2)  # MNT_DETACH
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


class FuseStall:
    """A FUSE mount holding one regular file, FILE_NAME (FILE_SIZE bytes), that answers
    INIT, LOOKUP, GETATTR and OPEN (in direct I/O: every read is a request) but never
    the opcodes in `hang` (say READ, or FLUSH: a close then waits for ever) until
    release(), which lets go of the device: the waiting requests fail (ENOTCONN). Other
    opcodes are answered ENOSYS. seen(op) waits until the kernel sent one of op: the
    moment a reader is stuck. Root only (fuse_why says why not). Standard library only:
    the kernel's structs (include/uapi/linux/fuse.h), little-endian."""

    LOOKUP, GETATTR, OPEN, READ, RELEASE, FLUSH, INIT, INTERRUPT = 1, 3, 14, 15, 18, 25, 26, 36
    FILE_NAME, FILE_SIZE, FILE_NODE = "f", 4096, 2

    def __init__(self, hang=(), prefix="cordon-fuse-"):
        import ctypes
        import threading
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.hang = set(hang)
        self._seen = {}
        self._cond = threading.Condition()
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.path = os.path.join(self.dir, self.FILE_NAME)
        self.fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
        opts = "fd=%d,rootmode=40000,user_id=0,group_id=0" % self.fd
        if self._libc.mount(b"cordon-fuse", self.dir.encode(), b"fuse", 0,
                            opts.encode()) != 0:
            e = ctypes.get_errno()
            os.close(self.fd)
            os.rmdir(self.dir)
            raise OSError(e, os.strerror(e))
        # A pipe wakes the reader: closing a descriptor another thread reads does not abort.
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @staticmethod
    def _attr(node):
        now = int(time.time()) - 3600  # an hour old: a file left alone
        if node == 1:
            mode, size, nlink = 0o40755, 0, 2
        else:
            mode, size, nlink = 0o100644, FuseStall.FILE_SIZE, 1
        # fuse_attr: ino size blocks atime mtime ctime, their nsecs, mode nlink uid gid
        # rdev blksize flags
        return struct.pack("<QQQQQQIIIIIIIIII", node, size, (size + 511) // 512, now, now,
                           now, 0, 0, 0, mode, nlink, 0, 0, 0, 4096, 0)

    def _reply(self, unique, error=0, body=b""):
        try:
            os.write(self.fd, struct.pack("<IiQ", 16 + len(body), error, unique) + body)
        except OSError:
            pass  # the request was interrupted, or the mount is going

    def _serve(self):
        import errno
        import select
        while True:
            r, _, _ = select.select([self.fd, self._wake_r], [], [])
            if self._wake_r in r:
                return
            try:
                msg = os.read(self.fd, 1 << 20 | 1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                return  # ENODEV: unmounted
            # fuse_in_header: len opcode unique nodeid uid gid pid total_extlen padding
            _, op, unique, node = struct.unpack_from("<IIQQ", msg)
            arg = msg[40:]
            with self._cond:
                self._seen[op] = self._seen.get(op, 0) + 1
                self._cond.notify_all()
            if op in self.hang or op == self.INTERRUPT:
                continue  # never answered (an INTERRUPT is not answered either)
            if op == self.INIT:
                major, minor = struct.unpack_from("<II", arg)
                # fuse_init_out (64 bytes): major minor max_readahead flags max_background
                # congestion_threshold max_write time_gran max_pages map_alignment flags2
                # max_stack_depth unused[6]
                body = struct.pack("<IIIIHHIIHHII24x", 7, min(minor, 31), 65536, 0, 16, 12,
                                   65536, 1, 0, 0, 0, 0)
                self._reply(unique, 0, body)
            elif op == self.LOOKUP:
                name = arg.split(b"\0", 1)[0].decode()
                if node != 1 or name != self.FILE_NAME:
                    self._reply(unique, -errno.ENOENT)
                    continue
                # fuse_entry_out: nodeid generation entry_valid attr_valid, their nsecs, attr
                self._reply(unique, 0, struct.pack("<QQQQII", self.FILE_NODE, 1, 3600, 3600,
                                                   0, 0) + self._attr(self.FILE_NODE))
            elif op == self.GETATTR:
                # fuse_attr_out: attr_valid attr_valid_nsec dummy attr
                self._reply(unique, 0, struct.pack("<QII", 3600, 0, 0) + self._attr(node))
            elif op == self.OPEN:
                # fuse_open_out: fh open_flags (FOPEN_DIRECT_IO) padding
                self._reply(unique, 0, struct.pack("<QII", 1, 1, 0))
            elif op == self.READ:
                fh, off, size = struct.unpack_from("<QQI", arg)
                n = max(0, min(size, self.FILE_SIZE - off))
                self._reply(unique, 0, b"x" * n)
            elif op in (self.FLUSH, self.RELEASE):
                self._reply(unique, 0)
            else:
                self._reply(unique, -errno.ENOSYS)

    def seen(self, op, timeout=60.0):
        """Wait until the kernel sent a request of opcode op; whether it did."""
        with self._cond:
            return self._cond.wait_for(lambda: self._seen.get(op, 0) > 0, timeout)

    def release(self):
        """Let go of the device: every request waiting on the mount fails (ENOTCONN)."""
        if self.fd >= 0:
            os.write(self._wake_w, b"x")
            self._thread.join()
            os.close(self.fd)
            self.fd = -1

    def close(self):
        self.release()
        self._libc.umount2(self.dir.encode(), 2)  # MNT_DETACH
        os.close(self._wake_r)
        os.close(self._wake_w)
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def fuse_why():
    """None when a hung FUSE mount can be made here, else why not."""
    if os.geteuid() != 0:
        return "mounting a FUSE file system needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        h = Hung()
    except OSError as e:
        return "cannot mount FUSE here: %s" % e
    h.close()
    return None


# ---- inotify (the limits tests) -------------------------------------------

# Takes inotify instances (or watches on the files of a directory, with one
# instance) until the kernel refuses or MOST are taken; prints how many and
# the refusal's errno ("ok" for none); with "hold", keeps them until killed.
INOTIFY_PROBE = r"""
import ctypes, errno, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
mode, most, hold = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "hold"
got, why = 0, "ok"
if mode == "instances":
    while got < most and why == "ok":
        if libc.inotify_init1(0) < 0:
            why = errno.errorcode[ctypes.get_errno()]
        else:
            got += 1
else:
    fd = libc.inotify_init1(0)
    for name in sorted(os.listdir(sys.argv[4]))[:most]:
        if libc.inotify_add_watch(fd, os.path.join(sys.argv[4], name).encode(), 2) < 0:
            why = errno.errorcode[ctypes.get_errno()]
            break
        got += 1
print(got, why, flush=True)
if hold:
    signal.pause()
"""


# ---- cordon/status -------------------------------------------------------

def wait_status(obs, cond, timeout=60.0):
    """Ask cordon/status (on connection obs) until cond(status) holds: the last status
    and whether it did. timeout is a bound only, for a server that never gets there."""
    deadline = time.monotonic() + timeout
    st = None
    while time.monotonic() < deadline:
        st = obs.call("cordon/status")
        if cond(st):
            return st, True
        time.sleep(0.05)
    return st, False
