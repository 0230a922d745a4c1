# SPDX-License-Identifier: LGPL-2.1-or-later
"""How long can one client's request hold up another client of `cordon serve`?

usage: bench-stall.py CORDON [SCENARIO...]

Starts `CORDON serve --listen unix:...` and, in a process of its own, a
prober: a second client that sends `environment/status`, waits for the
answer, and sends the next one, for as long as the bench runs. For each
scenario the load client sends large or slow requests on its own connection,
and the bench prints the worst (and the median) round trip the prober saw
while they were in flight, beside the worst seen while the server was idle
just before (the same machine, the same moment). A delay of one request is
at most that request's worst round trip.

BENCH_STALL_SCALE (default 1) multiplies the sizes; BENCH_STALL_TIMEOUT
(default 300 s) bounds each scenario. Standard library only.
"""

import base64
import json
import os
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SCALE = float(os.environ.get("BENCH_STALL_SCALE", "1"))
TIMEOUT = float(os.environ.get("BENCH_STALL_TIMEOUT", "300"))


def n(x):
    return max(1, int(x * SCALE))


def uri(path):
    return "file://" + path


class Conn:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1

    def send_raw(self, data):
        self.sock.sendall(data)

    def line(self, obj):
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()

    def read_line(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                return None
            d = self.sock.recv(1 << 20)
            if not d:
                return None
            self.buf += d
        i = self.buf.index(b"\n")
        line, self.buf = self.buf[:i], self.buf[i + 1:]
        return line

    def wait_ids(self, ids, timeout):
        """Read until every id in ids was answered; the answers by id (None on timeout)."""
        got = {}
        deadline = time.monotonic() + timeout
        while len(got) < len(ids):
            line = self.read_line(max(0.0, deadline - time.monotonic()))
            if line is None:
                return None
            m = json.loads(line)
            if "id" in m and m["id"] in ids:
                got[m["id"]] = m
        return got

    def call(self, method, params, timeout=30.0):
        i = self.next_id
        self.next_id += 1
        self.send_raw(self.line({"id": i, "method": method, "params": params}))
        return self.wait_ids({i}, timeout)[i]

    def handshake(self):
        self.call("initialize", {"clientName": "bench-stall"})
        self.send_raw(self.line({"method": "initialized"}))


def prober(path):
    """The second client: status round trips; "mark" on stdin prints the window's figures."""
    c = Conn(path)
    c.handshake()
    rtts = []
    req = b'{"id":1,"method":"environment/status","params":{}}\n'
    while True:
        r, _, _ = select.select([sys.stdin], [], [], 0)
        if r:
            cmd = sys.stdin.readline().strip()
            if cmd != "mark":
                return
            worst = max(rtts) if rtts else 0.0
            med = statistics.median(rtts) if rtts else 0.0
            print("%.3f %.3f %d" % (worst, med, len(rtts)), flush=True)
            rtts = []
        t0 = time.monotonic()
        c.send_raw(req)
        if c.read_line(600) is None:
            return
        rtts.append((time.monotonic() - t0) * 1000.0)


def more_files():
    """10,000 processes take three descriptors each: raise the limit where allowed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (65536, hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
            return
        except (ValueError, OSError):
            continue


class Bench:
    def __init__(self, cordon):
        self.dir = tempfile.mkdtemp(prefix="bench-stall-")
        self.sock = os.path.join(self.dir, "serve.sock")
        self.errf = open(os.path.join(self.dir, "serve.err"), "w+b")
        self.srv = subprocess.Popen(
            [cordon, "serve", "--listen", "unix:" + self.sock, "--max-processes", "20000"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errf,
            start_new_session=True, preexec_fn=more_files)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.sock):
            if time.monotonic() > deadline or self.srv.poll() is not None:
                raise SystemExit("bench-stall: the server did not start")
            time.sleep(0.01)
        self.probe = subprocess.Popen([sys.executable, __file__, "--probe", self.sock],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, bufsize=1)
        self.load = Conn(self.sock)
        self.load.handshake()
        self.serial = 0

    def mark(self):
        self.probe.stdin.write("mark\n")
        self.probe.stdin.flush()
        worst, med, count = self.probe.stdout.readline().split()
        return float(worst), float(med), int(count)

    def close(self):
        try:
            self.probe.stdin.close()
        except OSError:
            pass
        self.probe.wait(10)
        self.srv.send_signal(signal.SIGTERM)
        try:
            self.srv.wait(20)
        except subprocess.TimeoutExpired:
            self.srv.kill()
            self.srv.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def pid(self, prefix):
        self.serial += 1
        return "%s-%d" % (prefix, self.serial)

    def run(self, name, build):
        """build() returns (bytes to send, ids awaited); prints one line."""
        data, ids = build()
        time.sleep(0.2)
        idle = self.mark()
        t0 = time.monotonic()
        self.load.send_raw(data)
        got = self.load.wait_ids(set(ids), TIMEOUT)
        took = (time.monotonic() - t0) * 1000.0
        busy = self.mark()
        errs = ""
        if got is None:
            errs = " (no answer within %.0f s)" % TIMEOUT
        else:
            bad = [m["error"]["message"] for m in got.values() if "error" in m]
            if bad:
                errs = " (%d error(s): %.60s)" % (len(bad), bad[0])
        print("%-34s %10.1f %11.1f %9.2f %12.2f %7d%s" %
              (name, took, busy[0], busy[1], idle[0], busy[2], errs), flush=True)
        return got

    def req(self, method, params):
        i = self.load.next_id
        self.load.next_id += 1
        return self.load.line({"id": i, "method": method, "params": params}), i

    def start(self, params):
        p = {"processId": self.pid("p"), "argv": ["/bin/true"], "cwd": uri("/"),
             "env": {"PATH": "/usr/bin:/bin"}, "tty": False}
        p.update(params)
        data, i = self.req("process/start", p)
        return data, [i]


def make_tree(root, dirs, fanout=20):
    """dirs directories below root, fanout per level."""
    made = 0
    level = [root]
    while made < dirs:
        nxt = []
        for d in level:
            for k in range(fanout):
                if made >= dirs:
                    break
                p = os.path.join(d, "d%d" % k)
                os.mkdir(p)
                nxt.append(p)
                made += 1
        level = nxt


def workspace_write():
    def sp(kind, access, sub=None):
        v = {"kind": kind}
        if sub:
            v["subpath"] = sub
        return {"path": {"type": "special", "value": v}, "access": access}
    return [sp("root", "read"), sp("project_roots", "write"), sp("slash_tmp", "write"),
            sp("project_roots", "read", ".git")]


def sandbox(entries, roots, cwd):
    return {"permissions": {"type": "managed", "network": "restricted",
                            "file_system": {"type": "restricted", "entries": entries}},
            "workspaceRoots": [uri(r) for r in roots], "cwd": uri(cwd),
            "windowsSandboxLevel": "disabled"}


def scenarios(b):
    ws = os.path.join(b.dir, "ws")
    os.mkdir(ws)
    tree = os.path.join(b.dir, "tree")
    os.mkdir(tree)
    make_tree(tree, n(20000))
    big = os.path.join(b.dir, "big")
    os.mkdir(big)
    for k in range(n(20000)):
        open(os.path.join(big, "f%06d" % k), "w").close()

    def env(count):
        return lambda: b.start({"env": {"V%07d" % k: "x" for k in range(n(count))}})

    def argv(count):
        return lambda: b.start({"argv": ["/bin/true"] + ["a%d" % k for k in range(n(count))]})

    def include_only(count):
        return lambda: b.start({"envPolicy": {
            "inherit": "none", "ignoreDefaultExcludes": True, "exclude": [],
            "set": {"S%06d" % k: "x" for k in range(n(count))},
            "includeOnly": ["S*%d?" % k for k in range(n(count))]}})

    def sandboxed(root, extra=()):
        return lambda: b.start({"sandbox": sandbox(workspace_write() + list(extra), [root],
                                                   root), "cwd": uri(root)})

    def entries(count):
        extra = [{"path": {"type": "path", "path": uri("/nonexistent/e%d" % k)},
                  "access": "read"} for k in range(n(count))]
        return sandboxed(ws, extra)

    def globs(count):
        extra = [{"path": {"type": "glob_pattern", "pattern": ws + "/g%d*" % k},
                  "access": "none"} for k in range(n(count))]
        return sandboxed(ws, extra)

    def flood(count):
        def build():
            lines, ids = [], []
            for _ in range(n(count)):
                d, i = b.req("environment/status", {})
                lines.append(d)
                ids.append(i)
            return b"".join(lines), ids
        return build

    def procs(count):
        def build():
            lines, ids = [], []
            for _ in range(n(count)):
                d, i = b.start({"argv": ["/bin/sleep", "1000"]})
                lines.append(d)
                ids.extend(i)
            return b"".join(lines), ids
        return build

    def terminate_all():
        def build():
            lines, ids = [], []
            for k in range(1, b.serial + 1):
                d, i = b.req("process/terminate", {"processId": "p-%d" % k})
                lines.append(d)
                ids.append(i)
            return b"".join(lines), ids
        return build

    def write_file(mb):
        data = base64.b64encode(os.urandom(int(mb * SCALE * 1024 * 1024))).decode()
        return lambda: (lambda d: (d[0], [d[1]]))(
            b.req("fs/writeFile", {"path": uri(os.path.join(b.dir, "w.bin")),
                                   "dataBase64": data}))

    def fs(method, params):
        return lambda: (lambda d: (d[0], [d[1]]))(b.req(method, params))

    all_ = [
        ("env 100k entries", env(100000)),
        ("argv 100k entries", argv(100000)),
        ("includeOnly 5k x set 5k", include_only(5000)),
        ("sandbox 20k path entries", entries(20000)),
        ("sandbox 2k deny globs", globs(2000)),
        ("sandbox nested scan 20k dirs", sandboxed(tree)),
        ("fs/writeFile 40 MiB", write_file(40)),
        ("fs/readDirectory 20k files", fs("fs/readDirectory", {"path": uri(big)})),
        ("fs/walk 20k dirs", fs("fs/walk", {"path": uri(tree), "options": {
            "maxDepth": 64, "maxDirectories": 10000, "maxEntries": 50000,
            "followDirectorySymlinks": False}})),
        ("fs/getMetadata sandboxed 20k dirs", fs("fs/getMetadata", {
            "path": uri(tree), "sandbox": sandbox(workspace_write(), [tree], tree)})),
        ("200k pipelined status", flood(200000)),
        ("6k processes started", procs(6000)),
        ("6k processes terminated", terminate_all()),
    ]
    return all_


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--probe":
        prober(sys.argv[2])
        return
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    b = Bench(sys.argv[1])
    try:
        want = sys.argv[2:]
        print("# the other client's environment/status round trip (ms) while each ran")
        print("%-34s %10s %11s %9s %12s %7s" %
              ("scenario", "took ms", "worst", "median", "idle worst", "probes"))
        for name, build in scenarios(b):
            if want and not any(w in name for w in want):
                continue
            b.run(name, build)
    finally:
        b.close()


if __name__ == "__main__":
    main()
