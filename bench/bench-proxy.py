# SPDX-License-Identifier: LGPL-2.1-or-later
"""The managed network's proxy beside a direct loopback connection, same run.

usage: bench-proxy.py CORDON

Starts `CORDON proxy` (the policy allows the name bench.test, which the
resolver test hook maps to 127.0.0.1, and the CIDR 127.0.0.1) and, in a
process of its own, the upstreams: a source (sends the number of bytes asked
for, then closes) and an echo. Prints medians, interleaving direct and
proxied rounds so that both see the same machine:
  - throughput of one connection reading BENCH_PROXY_MIB (default 256) MiB,
    direct and through a CONNECT tunnel;
  - the time to open a connection and get one byte echoed, direct (connect)
    and proxied (connect, CONNECT, 200, the byte);
  - the same two through a SOCKS5 tunnel (greeting, CONNECT with the name,
    reply), the proxy running with --socks5.
Standard library only.
"""

import os
import socket
import statistics
import subprocess
import sys
import time

MIB = int(os.environ.get("BENCH_PROXY_MIB", "256"))
ROUNDS = int(os.environ.get("BENCH_PROXY_ROUNDS", "5"))
OPENS = int(os.environ.get("BENCH_PROXY_OPENS", "300"))

UPSTREAM = r'''
import socket, struct, sys, threading
def source(c):
    with c:
        n = struct.unpack(">Q", c.recv(8, socket.MSG_WAITALL))[0]
        buf = bytes(1 << 20)
        while n > 0:
            k = min(n, len(buf))
            c.sendall(memoryview(buf)[:k])
            n -= k
def echo(c):
    with c:
        while True:
            d = c.recv(65536)
            if not d:
                return
            c.sendall(d)
def serve(ls, fn):
    while True:
        c, _ = ls.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=fn, args=(c,), daemon=True).start()
a = socket.create_server(("127.0.0.1", 0), backlog=1024)
b = socket.create_server(("127.0.0.1", 0), backlog=1024)
print(a.getsockname()[1], b.getsockname()[1], flush=True)
threading.Thread(target=serve, args=(a, source), daemon=True).start()
serve(b, echo)
'''


def tunnel(pport, port):
    s = socket.create_connection(("127.0.0.1", pport))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"CONNECT bench.test:%d HTTP/1.1\r\nHost: bench.test:%d\r\n\r\n" % (port, port))
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        d = s.recv(1)
        if not d:
            raise SystemExit("the proxy closed the tunnel: %r" % head)
        head += d
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit("the proxy refused: %r" % head)
    return s


def socks(pport, port):
    s = socket.create_connection(("127.0.0.1", pport))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    name = b"bench.test"
    # greeting and request in one write, as curl and most clients pipeline them
    s.sendall(b"\x05\x01\x00" + b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
              port.to_bytes(2, "big"))
    rep = b""
    while len(rep) < 12:
        d = s.recv(12 - len(rep))
        if not d:
            break
        rep += d
    if rep[:4] != b"\x05\x00\x05\x00":
        raise SystemExit("the proxy refused the SOCKS5 tunnel: %r" % rep)
    return s


def direct(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def transfer(s):
    n = MIB << 20
    buf = bytearray(1 << 20)
    t0 = time.perf_counter()
    s.sendall(n.to_bytes(8, "big"))
    got = 0
    while got < n:
        k = s.recv_into(buf)
        if not k:
            break
        got += k
    dt = time.perf_counter() - t0
    s.close()
    if got != n:
        raise SystemExit("short transfer: %d of %d" % (got, n))
    return n / dt / 1e6


def open_echo(connect):
    t0 = time.perf_counter()
    s = connect()
    s.sendall(b"x")
    s.recv(1)
    dt = time.perf_counter() - t0
    s.close()
    return dt * 1e6


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    up = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE)
    sport, eport = map(int, up.stdout.readline().split())
    env = dict(os.environ, CORDON_TEST_PROXY_RESOLVE="bench.test=127.0.0.1")
    px = subprocess.Popen([sys.argv[1], "proxy", "--listen", "127.0.0.1:0", "--allow-domain",
                           "bench.test", "--allow-cidr", "127.0.0.1", "--json-audit",
                           "--max-connections", "4096", "--socks5"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    pport = int(px.stdout.readline().split(b":")[-1])
    # the audit lines: read and dropped by a thread, so the proxy never blocks on them
    import threading
    threading.Thread(target=lambda: [None for _ in px.stdout], daemon=True).start()
    try:
        d_tp, p_tp, s_tp, d_open, p_open, s_open = [], [], [], [], [], []
        for _ in range(ROUNDS):
            d_tp.append(transfer(direct(sport)))
            p_tp.append(transfer(tunnel(pport, sport)))
            s_tp.append(transfer(socks(pport, sport)))
        for _ in range(OPENS):
            d_open.append(open_echo(lambda: direct(eport)))
            p_open.append(open_echo(lambda: tunnel(pport, eport)))
            s_open.append(open_echo(lambda: socks(pport, eport)))
        md, mp = statistics.median(d_tp), statistics.median(p_tp)
        od, op = statistics.median(d_open), statistics.median(p_open)
        ms, os_ = statistics.median(s_tp), statistics.median(s_open)
        print("proxy throughput, one connection, %d MiB, median of %d:" % (MIB, ROUNDS))
        print("  direct loopback   %8.0f MB/s" % md)
        print("  CONNECT tunnel    %8.0f MB/s  (%.2f of direct; goal >= 0.5)" % (mp, mp / md))
        print("  SOCKS5 tunnel     %8.0f MB/s  (%.2f of direct; goal >= 0.5)" % (ms, ms / md))
        print("connection open + 1-byte echo, median of %d:" % OPENS)
        print("  direct loopback   %8.0f us" % od)
        print("  CONNECT tunnel    %8.0f us  (%.2fx direct; goal < 2x)" % (op, op / od))
        print("  SOCKS5 tunnel     %8.0f us  (%.2fx direct; goal < 2x)" % (os_, os_ / od))
    finally:
        px.kill()
        up.kill()


main()
