#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# A stand-in for the managed network's proxy, for the tests of the fence:
# listens on the unix socket ARGV[1] (or, for "tcp", on an ephemeral port of
# 127.0.0.1, printed as "port N" before "ready") and speaks just enough HTTP/1.1 proxy:
# CONNECT host:port (a tunnel) and absolute-form requests (forwarded with
# Connection: close). Only the name "upstream.test" is served, to the
# address ARGV[2] (host:port); anything else gets 403. Each request is one
# line of ARGV[3] (the log). Prints "ready" once listening.
import os
import socket
import sys
import threading

path, upstream, log = sys.argv[1], sys.argv[2], sys.argv[3]
up_host, up_port = upstream.rsplit(":", 1)
lock = threading.Lock()


def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def target_of(hostport):
    host, _, port = hostport.rpartition(":")
    if host != "upstream.test" or port != up_port:
        return None
    return (up_host, int(up_port))


def handle(c):
    f = c.makefile("rb")
    line = f.readline().decode("latin-1").strip()
    headers = []
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        headers.append(h.decode("latin-1").strip())
    try:
        method, target, _ = line.split(" ", 2)
    except ValueError:
        c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        return
    if method == "CONNECT":
        hostport = target
        rest = None
    elif target.startswith("http://"):
        hostport, _, rest = target[len("http://"):].partition("/")
        rest = "/" + rest
        if ":" not in hostport:
            hostport += ":80"
    else:
        c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        return
    addr = target_of(hostport)
    note("%s %s %s" % (method, hostport, "allowed" if addr else "denied"))
    if not addr:
        c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return
    u = socket.create_connection(addr)
    if method == "CONNECT":
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    else:
        keep = [h for h in headers if not h.lower().startswith(("connection:", "proxy-"))]
        req = "%s %s HTTP/1.1\r\n%s\r\nConnection: close\r\n\r\n" % (method, rest,
                                                                     "\r\n".join(keep))
        u.sendall(req.encode("latin-1"))
    # What the client sent past the headers was buffered by f: nothing, for these tests.
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    pipe(u, c)


def serve(c):
    try:
        handle(c)
    except OSError:
        pass
    finally:
        c.close()


if path == "tcp":
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    print("port %d" % srv.getsockname()[1], flush=True)
else:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
srv.listen(64)
print("ready", flush=True)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
