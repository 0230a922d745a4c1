# SPDX-License-Identifier: LGPL-2.1-or-later
"""Clients for `cordon serve --listen ws://... | unix:...` (standard library only).

NetServer spawns the server and finds where it listens (the ws URL is the
first line of its stdout; a unix socket appears at its path). connect()
gives a WsConn (a small RFC 6455 client: masked frames out, unmasked in,
pings answered) or a UnixConn (newline-delimited JSON), both with the
message-level API of rpcclient.Server (request, call, handshake, start,
wait_closed...). http() sends one raw HTTP request and returns the status.
"""

import atexit
import base64
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import shutil
import tempfile
import time

from rpcclient import CORDON, WAIT, Eof, RpcMixin, Timeout, server_env, server_pid_of

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


class NetServer:
    def __init__(self, listen="ws", args=(), loop="epoll", extra_env=None, sockdir=None,
                 user=None):
        env = server_env(loop, extra_env=extra_env)
        self.kind = listen
        self.sockdir = sockdir
        self.path = None
        if listen == "ws":
            where = "ws://127.0.0.1:0"
        elif listen.startswith("ws://"):
            where = listen
            self.kind = "ws"
        else:
            if self.sockdir is None:
                self.sockdir = tempfile.mkdtemp(prefix="cordon-sock-")
                # Gone when the test ends (a test may restart a server in it).
                atexit.register(shutil.rmtree, self.sockdir, True)
            self.path = os.path.join(self.sockdir, "serve.sock")
            where = "unix:" + self.path
            self.kind = "unix"
        self.errf = tempfile.TemporaryFile()
        self.argv = [CORDON, "serve", "--listen", where] + list(args)
        self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=self.errf, env=env, start_new_session=True)
        self.pid = self.p.pid
        self._server_pid = None
        self.url = None
        self.host = self.port = None
        self.ready = self._wait_ready(WAIT)

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        if self.kind == "ws":
            buf = b""
            fd = self.p.stdout.fileno()
            while b"\n" not in buf and time.monotonic() < deadline:
                r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
                if not r:
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
            if b"\n" not in buf:
                return False
            self.url = buf.split(b"\n")[0].decode()
            hostport = self.url[len("ws://"):]
            host, port = hostport.rsplit(":", 1)
            self.host, self.port = host.strip("[]"), int(port)
            return True
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                return False
            # Connectable, not just there: a stale socket file may be replaced first.
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.path)
                return True
            except OSError:
                pass
            finally:
                probe.close()
            time.sleep(0.01)
        return False

    @property
    def server_pid(self):
        if self._server_pid is None:
            self._server_pid = server_pid_of(self.pid)
        return self._server_pid

    def connect(self, **kw):
        if self.kind == "ws":
            return WsConn(self.host, self.port, **kw)
        return UnixConn(self.path, **kw)

    def stderr_text(self):
        self.errf.seek(0)
        return self.errf.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=None):
        """Signal the server and reap it; the exit status (None if it had to be killed
        after timeout, WAIT by default)."""
        if timeout is None:
            timeout = WAIT
        if self.p.poll() is None:
            try:
                os.kill(self.pid, sig)
            except OSError:
                pass
            try:
                return self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                return None
        return self.p.returncode


class _SockConn(RpcMixin):
    # How much one read takes from the socket (a test may lower it: what a
    # client has read but not yet handled is lost if its connection drops).
    recv_size = 1 << 20

    def _init_common(self):
        self.pending = []
        self.awaited = set()
        self.notes = []
        self.lines = []
        self.next_id = 1
        self.out_eof = False

    def _deliver(self, raw):
        self.lines.append(raw)
        msg = json.loads(raw)
        if "id" not in msg and "method" in msg:
            self.notes.append(msg)
        self.pending.append(msg)

    def _pump(self, deadline):
        """Read what arrives until deadline (messages go to self.pending); False at EOF."""
        if self.out_eof:
            return False
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return True
        try:
            data = self.sock.recv(self.recv_size)
        except BlockingIOError:
            return True
        except ConnectionResetError:
            data = b""
        if not data:
            self.out_eof = True
            return False
        self._feed(data)
        return True

    def _send_all(self, data):
        """Write all of data, blocking; the socket is non-blocking otherwise (for _pump)."""
        self.sock.setblocking(True)
        try:
            self.sock.sendall(data)
        finally:
            self.sock.setblocking(False)

    def drop(self):
        """Close the socket abruptly (no close frame, no goodbye)."""
        try:
            self.sock.close()
        except OSError:
            pass
        self.out_eof = True

    def expect_eof(self, timeout=None):
        deadline = time.monotonic() + (WAIT if timeout is None else timeout)
        while not self.out_eof and time.monotonic() < deadline:
            try:
                self._pump(deadline)
            except OSError:
                self.out_eof = True
        return self.out_eof


class UnixConn(_SockConn):
    def __init__(self, path, timeout=WAIT):
        self._init_common()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.sock.setblocking(False)
        self.buf = bytearray()
        self.scanned = 0  # buf[:scanned] holds no newline

    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode()
        self._send_all(data)

    def _feed(self, data):
        self.buf += data
        while True:
            # From where the last search ended: a long line arrives in many reads.
            i = self.buf.find(b"\n", self.scanned)
            if i < 0:
                self.scanned = len(self.buf)
                break
            line = bytes(self.buf[:i])
            del self.buf[: i + 1]
            self.scanned = 0
            self._deliver(line)

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)


def http(host, port, path="/", method="GET", headers=None, timeout=WAIT):
    """One HTTP request on a fresh connection: (status, {lowercase name: value}, body, sock).
    The socket stays open (a 101 continues as WebSocket)."""
    s = socket.create_connection((host, port), timeout=timeout)
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s:%d" % (host, port)]
    for k, v in (headers or {}).items():
        lines.append("%s: %s" % (k, v))
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    first, *hl = head.decode(errors="replace").split("\r\n")
    status = int(first.split()[1]) if len(first.split()) > 1 else 0
    hdrs = {}
    for h in hl:
        k, _, v = h.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    body = rest
    if status != 101:
        n = int(hdrs.get("content-length", "0"))
        while len(body) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    return status, hdrs, body, s


class HandshakeError(Exception):
    def __init__(self, status, body):
        super().__init__("websocket upgrade refused: HTTP %d %r" % (status, body))
        self.status = status
        self.body = body


class WsConn(_SockConn):
    def __init__(self, host, port, headers=None, token=None, binary=False, timeout=WAIT):
        self._init_common()
        key = base64.b64encode(os.urandom(16)).decode()
        h = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
             "Sec-WebSocket-Key": key}
        if token is not None:
            h["Authorization"] = "Bearer " + token
        h.update(headers or {})
        status, hdrs, rest, s = http(host, port, "/", headers=h, timeout=timeout)
        if status != 101:
            s.close()
            raise HandshakeError(status, rest)
        want = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()
        if hdrs.get("sec-websocket-accept") != want:
            s.close()
            raise HandshakeError(status, b"bad sec-websocket-accept " +
                                 hdrs.get("sec-websocket-accept", "").encode())
        self.sock = s
        self.sock.setblocking(False)
        self.rbuf = bytearray(rest)
        self.binary = binary
        self.pings = 0
        self.pongs = 0
        self.close_code = None
        self.frag = None
        self.fragmented = 0  # messages that came in more than one frame
        self._parse()  # frames that came with the handshake's answer

    # -- frames
    def send_frame(self, opcode, payload=b"", fin=True):
        if isinstance(payload, str):
            payload = payload.encode()
        b0 = (0x80 if fin else 0) | opcode
        n = len(payload)
        if n < 126:
            hdr = struct.pack("!BB", b0, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", b0, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", b0, 0x80 | 127, n)
        mask = os.urandom(4)
        # Mask in big slices: XOR with a repeated key via int arithmetic.
        rep = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(rep, "big")).to_bytes(n, "big") \
            if n else b""
        self._send_all(hdr + mask + masked)

    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode()
        # The line framing of the shared API: one message per frame, without the '\n'.
        if data.endswith(b"\n"):
            data = data[:-1]
        self.send_frame(OP_BINARY if self.binary else OP_TEXT, data)

    def close(self, code=1000):
        try:
            self.send_frame(OP_CLOSE, struct.pack("!H", code))
        except OSError:
            pass

    def _parse(self):
        while True:
            b = self.rbuf
            if len(b) < 2:
                return
            fin, op = b[0] & 0x80, b[0] & 0x0F
            masked, n = b[1] & 0x80, b[1] & 0x7F
            off = 2
            if n == 126:
                if len(b) < 4:
                    return
                n = struct.unpack("!H", bytes(b[2:4]))[0]
                off = 4
            elif n == 127:
                if len(b) < 10:
                    return
                n = struct.unpack("!Q", bytes(b[2:10]))[0]
                off = 10
            if masked:
                raise AssertionError("the server sent a masked frame")
            if len(b) < off + n:
                return
            payload = bytes(b[off:off + n])
            del b[:off + n]
            if op == OP_PING:
                self.pings += 1
                self.send_frame(OP_PONG, payload)
            elif op == OP_PONG:
                self.pongs += 1
            elif op == OP_CLOSE:
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 0
                self.out_eof = True
                return
            elif op in (OP_TEXT, OP_BINARY):
                if fin:
                    self._deliver(payload)
                else:
                    self.frag = bytearray(payload)
                    self.fragmented += 1
            elif op == OP_CONT and self.frag is not None:
                self.frag += payload
                if fin:
                    self._deliver(bytes(self.frag))
                    self.frag = None

    def _feed(self, data):
        self.rbuf += data
        self._parse()


__all__ = ["NetServer", "WsConn", "UnixConn", "HandshakeError", "http", "Eof", "Timeout",
           "OP_TEXT", "OP_BINARY", "OP_CLOSE", "OP_PING", "OP_PONG", "OP_CONT"]
