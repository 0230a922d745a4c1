# SPDX-License-Identifier: LGPL-2.1-or-later
"""A TCP relay between a WebSocket client and server that records the text
frames going each way (the bytes are passed on unchanged).

It listens on 127.0.0.1:0; the client connects to ws://127.0.0.1:PORT and
the relay connects to the real server. After the HTTP upgrade (passed on as
is), frames are parsed only to be recorded: client frames are masked, server
frames not; fragmented messages are joined. Each record is
(direction, parsed JSON or the text), direction "c>s" or "s>c", in the
order the relay read them.
"""

import json
import socket
import struct
import threading


class _Frames:
    """Incremental WebSocket frame parser: feed bytes, get whole text messages."""

    def __init__(self):
        self.buf = b""
        self.parts = []
        self.in_http = True

    def feed(self, data):
        self.buf += data
        out = []
        if self.in_http:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return out
            self.buf = self.buf[end + 4:]
            self.in_http = False
        while True:
            b = self.buf
            if len(b) < 2:
                return out
            fin, op = b[0] & 0x80, b[0] & 0x0F
            masked, ln = b[1] & 0x80, b[1] & 0x7F
            pos = 2
            if ln == 126:
                if len(b) < 4:
                    return out
                ln = struct.unpack(">H", b[2:4])[0]
                pos = 4
            elif ln == 127:
                if len(b) < 10:
                    return out
                ln = struct.unpack(">Q", b[2:10])[0]
                pos = 10
            key = b""
            if masked:
                if len(b) < pos + 4:
                    return out
                key = b[pos:pos + 4]
                pos += 4
            if len(b) < pos + ln:
                return out
            payload = b[pos:pos + ln]
            self.buf = b[pos + ln:]
            if masked:
                payload = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
            if op in (0x1, 0x2, 0x0):
                self.parts.append(payload)
                if fin:
                    msg = b"".join(self.parts)
                    self.parts = []
                    out.append(msg.decode(errors="replace"))
            elif op == 0x8:
                out.append("<close>")


class WsTap:
    def __init__(self, upstream_host, upstream_port):
        self.upstream = (upstream_host, upstream_port)
        self.records = []
        self.lock = threading.Lock()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(self.upstream)
            except OSError:
                c.close()
                continue
            for src, dst, d in ((c, s, "c>s"), (s, c, "s>c")):
                threading.Thread(target=self._pump, args=(src, dst, d), daemon=True).start()

    def _pump(self, src, dst, direction):
        frames = _Frames()
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                for sk in (dst, src):
                    try:
                        sk.shutdown(socket.SHUT_WR if sk is dst else socket.SHUT_RD)
                    except OSError:
                        pass
                return
            for msg in frames.feed(data):
                try:
                    rec = json.loads(msg)
                except ValueError:
                    rec = msg
                with self.lock:
                    self.records.append((direction, rec))
            try:
                dst.sendall(data)
            except OSError:
                return

    def messages(self):
        with self.lock:
            return list(self.records)

    def close(self):
        self.lsock.close()
