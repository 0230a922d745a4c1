#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# The server's memory budget (--max-memory) and the state cordon/status
# reports, on unix sockets:
# - the options are parsed strictly (a size out of range is a usage error
#   naming the option);
# - cordon/status reports the budget (by default 1 GiB, or an eighth of the
#   RAM when that is less) and what holds it, while environment/status stays
#   {"status":"ready"};
# - a dozen clients whose processes flood them and who read nothing: the
#   server's memory stays within the budget (its own account, its peak, and
#   the process's VmHWM), each of them is held back at its share (queues,
#   --detached-output=drop; processes held, the default), and a client that
#   reads still gets all of its output meanwhile (past the limit a connection
#   may still queue 256 KiB and one burst of output: the bound is the limit
#   plus that per connection);
# - a processId is at most 1024 bytes (it is repeated in every notification).
# Every wait is on the server's own report (cordon/status), never on a sleep. TAP.

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import CORDON, Tap, cordon_usable, err_code, err_msg, wait_status  # noqa: E402
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

MIB = 1024 * 1024
CLIENTS = 12
LIMIT = 32 * MIB


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def ram_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def options():
    for args, what in ((["--max-memory", "1K"], "a budget under 16 MiB"),
                       (["--max-memory", "2000G"], "a budget over 1 TiB"),
                       (["--max-memory", "12X"], "a size with an unknown suffix"),
                       (["--detached-output", "keep"], "an unknown --detached-output"),
                       (["--retention", "0"], "a zero --retention")):
        r = subprocess.run([CORDON, "serve"] + args, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=10)
        err = r.stderr.decode(errors="replace")
        t.ok(r.returncode == 2 and args[0] in err,
             "%s is a usage error naming the option" % what, "status %d: %s" % (r.returncode, err))


def defaults():
    srv = NetServer("unix")
    try:
        c = srv.connect()
        c.handshake()
        st = c.call("cordon/status")
        want = min(1 << 30, ram_bytes() // 8)
        want = max(want, 64 * MIB)
        mem = st.get("memory", {})
        t.eq(mem.get("limit"), want, "the default budget is 1 GiB or an eighth of the RAM")
        t.ok(all(k in mem for k in ("used", "peak", "queued", "retained", "files", "inbound")),
             "cordon/status shows what holds the budget", st)
        t.eq(c.call("environment/status"), {"status": "ready"},
             "environment/status stays as the reference has it")
        t.eq(st.get("detachedOutput"), "pause", "lossless resume is the default")
    finally:
        srv.stop()


def flood(mode):
    """CLIENTS clients whose processes write 64 MiB each and who read nothing."""
    tag = mode
    args = ["--max-memory", "%dM" % (LIMIT // MIB)]
    if mode == "drop":
        args += ["--detached-output", "drop"]
    srv = NetServer("unix", args=args)
    if not srv.ready:
        t.not_ok("[%s] server up" % tag, srv.stderr_text())
        return
    clients = []
    try:
        obs = srv.connect(timeout=10)
        obs.handshake()
        pid = srv.server_pid
        hwm0 = status_kb(pid, "VmHWM")
        for k in range(CLIENTS):
            c = srv.connect(timeout=10)
            c.handshake()
            r = c.start("flood", ["head", "-c", str(64 * MIB), "/dev/zero"])
            if "error" in r:
                t.not_ok("[%s] flood %d started" % (tag, k), r)
                return
            clients.append(c)
        # Every flooding client held back: its connection paused at its share
        # (drop), or its process held until the client takes what was sent (pause).
        if mode == "drop":
            st, ok = wait_status(obs, lambda s: s["pausedConnections"] >= CLIENTS, 120.0)
        else:
            st, ok = wait_status(obs, lambda s: s["heldProcesses"] >= CLIENTS, 120.0)
        t.ok(ok, "[%s] all %d clients that read nothing are held back" % (tag, CLIENTS), st)
        mem = st["memory"]
        # Past the limit each connection may still queue 256 KiB, and one burst
        # of output (four reads of 64 KiB, base64'd) comes before a pause.
        slack = CLIENTS * 640 * 1024
        t.ok(mem["used"] <= LIMIT + slack and mem["peak"] <= LIMIT + slack,
             "[%s] the server's account stays within %d MiB: %d in use, %d at peak"
             % (tag, LIMIT // MIB, mem["used"], mem["peak"]), mem)
        grew = status_kb(pid, "VmHWM") - hwm0
        t.ok(grew < (LIMIT + 24 * MIB) // 1024,
             "[%s] the server's peak RSS grew by %d kB (64 MiB queued per client before)"
             % (tag, grew))
        # A client that reads gets all of its output meanwhile.
        r = obs.start("reader", ["head", "-c", str(8 * MIB), "/dev/zero"])
        res = obs.wait_closed("reader", timeout=120)
        t.ok(res.stdout == b"\0" * (8 * MIB) and res.exit_code == 0,
             "[%s] a client that reads gets all 8 MiB of its output meanwhile" % tag,
             "%d bytes" % len(res.stdout))
        st = obs.call("cordon/status")
        held = st["pausedConnections"] if mode == "drop" else st["heldProcesses"]
        t.ok(held >= CLIENTS, "[%s] and the others are still held back" % tag, st)
    finally:
        for c in clients:
            c.drop()
        srv.stop()


def process_ids():
    srv = NetServer("unix")
    try:
        c = srv.connect()
        c.handshake()
        big = "p" * MIB
        r = c.start(big, ["true"])
        t.ok(err_code(r) == -32600 and "processId must not exceed 1024 bytes" in err_msg(r)
             and len(err_msg(r)) < 200,
             "a 1 MiB processId is refused (-32600)", repr(r)[:300])
        r = c.request("process/read", {"processId": big, "afterSeq": 0})
        t.ok(err_code(r) == -32600 and len(err_msg(r)) < 1200,
             "and an unknown one is quoted at most 1024 bytes long", repr(r)[:300])
        ok_id = "q" * 1024
        r, res = c.run(ok_id, ["echo", "hi"])
        t.ok("result" in r and res is not None and res.stdout == b"hi\n",
             "a 1024-byte processId works", repr(r)[:300])
    finally:
        srv.stop()


options()
t.guard("defaults", defaults)
for mode in ("drop", "pause"):
    t.guard("flood %s" % mode, flood, mode)
t.guard("process ids", process_ids)
t.done()
