#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: file write streaming, as the released Codex exec-server
# (0.169.0) has it (environmentInfo.capabilities.fileWriteStreaming):
# fs/open with "mode": "replace" creates or truncates the file, fs/writeBlock
# writes one base64 chunk (1 byte to 1 MiB decoded) at the offset it names,
# fs/close closes the handle, as the end of the session does. Checked: a
# multi-block file written and read back, offsets (out of order, gaps),
# pipelined requests, the limits (block length, range, handle id, 128
# handles), bad params with the released binary's messages, handles of the
# other kind, and under a sandbox context the writes it must refuse (outside
# the writable roots, a protected .git, a symlink out, a file swapped for a
# symlink after the open, a hard link to a file outside, the server's own
# token file), and that a client that stops reading, or whose open hangs on
# a worker, holds up no other session. The messages were read off the
# released binary: serve-codex-parity.py runs this script against it too
# (CD_TEST_CONTROL=codex), where cordon's own checks are skipped. TAP;
# stdio (both loops) and WebSocket; as root and, from unprivileged.sh, as an
# ordinary user.

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (LOOPS, Hooks, Server, Tap, b64, cordon_usable, err_code,  # noqa: E402
                       err_msg, profile, special, uri, unb64)
from netclient import NetServer  # noqa: E402

CODEX = os.environ.get("CD_TEST_CONTROL") == "codex"
MIB = 1024 * 1024
LEN_MSG = "file write block length must be between 1 and 1048576"
RANGE_MSG = "file write range exceeds the signed 64-bit file offset limit"

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

T = os.path.realpath(tempfile.mkdtemp(prefix="cordon-wstream-"))
os.chmod(T, 0o755)
serial = [0]


def fresh(name):
    serial[0] += 1
    d = os.path.join(T, "%s-%d" % (name, serial[0]))
    os.mkdir(d)
    return d


def read(p):
    with open(p, "rb") as fh:
        return fh.read()


def write(p, data):
    with open(p, "wb") as fh:
        fh.write(data)


def wopen(s, hid, path, **extra):
    return s.request("fs/open", dict({"handleId": hid, "path": uri(path), "mode": "replace"},
                                     **extra))


def wblock(s, hid, off, data):
    return s.request("fs/writeBlock", {"handleId": hid, "offset": off, "chunk": b64(data)})


def is_err(r, code, msg):
    return err_code(r) == code and err_msg(r) == msg


def basics(s, tag):
    d = fresh("basics")
    info = s.request("environment/info", {})
    caps = info.get("result", {}).get("capabilities", {})
    t.ok(caps.get("fileWriteStreaming") is True,
         "[%s] environmentInfo.capabilities.fileWriteStreaming is true" % tag, caps)

    # A multi-block file, in order, then read back.
    f = os.path.join(d, "big")
    data = os.urandom(3 * MIB + 5)
    r = wopen(s, "w", f)
    t.ok(r.get("result") == {"handleId": "w"}, "[%s] fs/open replace answers its handle" % tag, r)
    t.ok(os.path.exists(f) and read(f) == b"", "[%s] ... and creates the file, empty" % tag)
    mode = os.stat(f).st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    t.eq(mode, 0o666 & ~umask, "[%s] a new file's mode is 0666 less the umask" % tag)
    oks = [wblock(s, "w", off, data[off:off + MIB]).get("result") for off in range(0, len(data),
                                                                                   MIB)]
    t.ok(oks == [{}] * 4, "[%s] four blocks (1 MiB, the last 5 bytes) written" % tag, oks)
    r = s.request("fs/close", {"handleId": "w"})
    t.ok(r.get("result") == {}, "[%s] fs/close answers {}" % tag, r)
    r = s.request("fs/readFile", {"path": uri(f)})
    t.ok("result" in r and unb64(r["result"]["dataBase64"]) == data,
         "[%s] the file reads back as written" % tag, "error" in r and r)
    r = wblock(s, "w", 0, b"x")
    t.ok(is_err(r, -32004, "unknown file handle `w`"), "[%s] closed: a write is -32004" % tag, r)
    r = s.request("fs/close", {"handleId": "w"})
    t.ok(r.get("result") == {}, "[%s] fs/close again answers {}" % tag, r)

    # Offsets: out of order, a gap (zeros), an overwrite inside.
    f = os.path.join(d, "offsets")
    wopen(s, "o", f)
    rs = [wblock(s, "o", 10, b"world"), wblock(s, "o", 0, b"hello"), wblock(s, "o", 2, b"XY"),
          wblock(s, "o", 20, b"!")]
    s.request("fs/close", {"handleId": "o"})
    t.ok([x.get("result") for x in rs] == [{}] * 4 and
         read(f) == b"heXYo\0\0\0\0\0world\0\0\0\0\0!",
         "[%s] blocks land at their offsets, a gap reads as zeros" % tag, (rs, read(f)))

    # An existing file is truncated; a read handle on it sees the new contents.
    write(f, b"old contents, longer than the new")
    os.chmod(f, 0o640)
    wopen(s, "o", f)
    t.ok(read(f) == b"", "[%s] replace truncates an existing file" % tag, read(f))
    t.eq(os.stat(f).st_mode & 0o777, 0o640, "[%s] ... and keeps its mode" % tag)
    wblock(s, "o", 0, b"new")
    r = s.request("fs/open", {"handleId": "r", "path": uri(f)})
    r2 = s.request("fs/readBlock", {"handleId": "r", "offset": 0, "len": 100})
    t.ok(unb64(r2.get("result", {}).get("chunk", "")) == b"new",
         "[%s] a read handle sees what the write handle wrote" % tag, (r, r2))
    # Handles of the other kind: the released binary's errors.
    r = s.request("fs/writeBlock", {"handleId": "r", "offset": 0, "chunk": b64(b"x")})
    t.ok(is_err(r, -32603, "Bad file descriptor (os error 9)"),
         "[%s] writeBlock on a read handle: -32603 EBADF" % tag, r)
    r = s.request("fs/readBlock", {"handleId": "r", "offset": 0, "len": 100})
    t.ok("result" in r, "[%s] ... and the read handle stays open" % tag, r)
    r = s.request("fs/readBlock", {"handleId": "o", "offset": 0, "len": 100})
    t.ok(is_err(r, -32603, "Bad file descriptor (os error 9)"),
         "[%s] readBlock on a write handle: -32603 EBADF" % tag, r)
    r = wblock(s, "o", 0, b"x")
    t.ok(is_err(r, -32004, "unknown file handle `o`"),
         "[%s] ... which closes it (a read error closes the handle)" % tag, r)
    r = s.request("fs/open", {"handleId": "r", "path": uri(f), "mode": "replace"})
    t.ok(is_err(r, -32600, "file handle `r` already exists"),
         "[%s] the ids are shared by both kinds" % tag, r)
    s.request("fs/close", {"handleId": "r"})
    for hid, mode in (("m1", "read"), ("m2", {"read": None}), ("m3", {"replace": None})):
        r = s.request("fs/open", {"handleId": hid, "path": uri(f), "mode": mode})
        t.ok(r.get("result") == {"handleId": hid}, "[%s] mode %r is accepted" % (tag, mode), r)
        s.request("fs/close", {"handleId": hid})

    # Open errors.
    r = wopen(s, "e", os.path.join(d, "no-dir", "f"))
    t.ok(err_code(r) == -32004 and "os error 2" in err_msg(r),
         "[%s] replace with no parent directory: -32004" % tag, r)
    r = wopen(s, "e", d)
    t.ok(is_err(r, -32603, "Is a directory (os error 21)"),
         "[%s] replace on a directory: -32603 EISDIR" % tag, r)
    if not CODEX:
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        r = wopen(s, "e", fifo)
        t.ok(err_code(r) == -32600 and "is not a file" in err_msg(r),
             "[%s] replace on a FIFO is refused, without blocking" % tag, r)

    # Pipelined: the open, its blocks and its close sent at once.
    f = os.path.join(d, "piped")
    data = os.urandom(MIB + 7)
    ids = [s.send_request("fs/open", {"handleId": "p", "path": uri(f), "mode": "replace"}),
           s.send_request("fs/writeBlock", {"handleId": "p", "offset": 0,
                                            "chunk": b64(data[:MIB])}),
           s.send_request("fs/writeBlock", {"handleId": "p", "offset": MIB,
                                            "chunk": b64(data[MIB:])}),
           s.send_request("fs/close", {"handleId": "p"})]
    rs = [s.wait_id(i) for i in ids]
    if CODEX:
        t.skip("[%s] pipelined open, blocks and close" % tag,
               "the released binary may answer blocks before their open")
    else:
        t.ok([x and x.get("result") for x in rs] == [{"handleId": "p"}, {}, {}, {}] and
             read(f) == data, "[%s] pipelined open, blocks and close: in order" % tag, rs)


def limits(s, tag):
    d = fresh("limits")
    f = os.path.join(d, "f")
    wopen(s, "l", f)
    r = wblock(s, "l", 0, b"x" * MIB)
    t.ok(r.get("result") == {} and os.path.getsize(f) == MIB,
         "[%s] a block of 1 MiB is written" % tag, r)
    r = wblock(s, "l", 0, b"x" * (MIB + 1))
    t.ok(is_err(r, -32600, LEN_MSG), "[%s] a block of 1 MiB + 1: -32600" % tag, r)
    r = s.request("fs/writeBlock", {"handleId": "l", "offset": 0, "chunk": ""})
    t.ok(is_err(r, -32600, LEN_MSG), "[%s] an empty block: -32600" % tag, r)
    r = s.request("fs/writeBlock", {"handleId": "l", "offset": 0, "chunk": "a" * (8 * MIB)})
    t.ok(is_err(r, -32600, LEN_MSG), "[%s] a chunk of 8 MiB of base64: -32600" % tag, r)
    for off, ok in ((2 ** 63 - 1, False), (2 ** 63, False), (2 ** 64 - 1, False)):
        r = wblock(s, "l", off, b"a")
        t.ok(is_err(r, -32600, RANGE_MSG), "[%s] offset %d: -32600, range" % (tag, off), r)
    r = wblock(s, "l", 2 ** 63 - 2, b"a")
    t.ok(err_code(r) == -32603 and "os error 27" in err_msg(r),
         "[%s] offset 2^63 - 2: the file system's EFBIG, -32603" % tag, r)
    r = wblock(s, "l", 3, b"z")
    t.ok(r.get("result") == {}, "[%s] ... and the handle stays open after a write error" % tag, r)
    r = wblock(s, "x" * 33, 0, b"a")
    t.ok(is_err(r, -32600, "file handle ID must not exceed 32 bytes"),
         "[%s] a handle id of 33 bytes: -32600" % tag, r)
    r = s.request("fs/writeBlock", {"handleId": "x" * 33, "offset": 2 ** 63, "chunk": ""})
    t.ok(is_err(r, -32600, "file handle ID must not exceed 32 bytes"),
         "[%s] ... checked before the length and range" % tag, r)
    r = s.request("fs/writeBlock", {"handleId": "zz", "offset": 2 ** 63, "chunk": ""})
    t.ok(is_err(r, -32600, LEN_MSG), "[%s] the length before the range and handle" % tag, r)
    r = wblock(s, "zz", 2 ** 63, b"a")
    t.ok(is_err(r, -32600, RANGE_MSG), "[%s] the range before the handle" % tag, r)
    r = wblock(s, "", 0, b"a")
    t.ok(is_err(r, -32004, "unknown file handle ``"), "[%s] an unknown handle: -32004" % tag, r)
    s.request("fs/close", {"handleId": "l"})
    # 128 handles per connection, both kinds.
    got = None
    for i in range(129):
        r = wopen(s, "h%d" % i, os.path.join(d, "h%d" % i))
        if "error" in r:
            got = (i, r)
            break
    t.ok(got and got[0] == 128 and
         is_err(got[1], -32600, "at most 128 file handles may be open per connection"),
         "[%s] the 129th handle is refused" % tag, got)
    r = s.request("fs/open", {"handleId": "rd", "path": uri(f)})
    t.ok(is_err(r, -32600, "at most 128 file handles may be open per connection"),
         "[%s] ... a read handle too" % tag, r)
    s.request("fs/close", {"handleId": "h0"})
    r = s.request("fs/open", {"handleId": "rd", "path": uri(f)})
    t.ok(r.get("result") == {"handleId": "rd"}, "[%s] ... until one is closed" % tag, r)
    for i in range(1, 128):
        s.request("fs/close", {"handleId": "h%d" % i})
    s.request("fs/close", {"handleId": "rd"})


# (params, code, message), read off the released binary.
BAD = [
    ({"handleId": "a", "offset": 0, "chunk": "!!"}, -32602, "Invalid symbol 33, offset 0."),
    ({"handleId": "a", "offset": 0, "chunk": "aa=="}, -32602, "Invalid last symbol 97, offset 1."),
    ({"handleId": "a", "offset": 0, "chunk": "YR=="}, -32602, "Invalid last symbol 82, offset 1."),
    ({"handleId": "a", "offset": 0, "chunk": "YWJ="}, -32602, "Invalid last symbol 74, offset 2."),
    ({"handleId": "a", "offset": 0, "chunk": "YQ"}, -32602, "Invalid padding"),
    ({"handleId": "a", "offset": 0, "chunk": "YQ="}, -32602, "Invalid padding"),
    ({"handleId": "a", "offset": 0, "chunk": "YWJjZA"}, -32602, "Invalid padding"),
    ({"handleId": "a", "offset": 0, "chunk": "Y"}, -32602, "Invalid input length: 1"),
    ({"handleId": "a", "offset": 0, "chunk": "YWJjZ"}, -32602, "Invalid input length: 5"),
    ({"handleId": "a", "offset": 0, "chunk": "Y Q=="}, -32602, "Invalid symbol 32, offset 1."),
    ({"handleId": "a", "offset": 0, "chunk": "YQ==YQ=="}, -32602, "Invalid symbol 61, offset 2."),
    ({"handleId": "a", "offset": 0, "chunk": "YQ==\n"}, -32602, "Invalid symbol 10, offset 4."),
    ({"handleId": "a", "offset": 0, "chunk": "_-8="}, -32602, "Invalid symbol 95, offset 0."),
    ({"handleId": "a", "offset": 0, "chunk": "Y==="}, -32602, "Invalid symbol 61, offset 1."),
    ({"handleId": "a", "offset": 0, "chunk": "===="}, -32602, "Invalid symbol 61, offset 0."),
    ({"handleId": "a", "offset": 0, "chunk": "YQ=a"}, -32602, "Invalid symbol 61, offset 2."),
    ({"handleId": "a", "offset": 0, "chunk": "YWJjZ==="}, -32602, "Invalid symbol 61, offset 5."),
    ({"handleId": "a", "offset": 0, "chunk": "YWJjZGVmZ2hp=A=="}, -32602,
     "Invalid symbol 61, offset 12."),
    ({"handleId": "a", "offset": 0, "chunk": "YWJj\u00e9"}, -32602,
     "Invalid symbol 195, offset 4."),
    ({"handleId": "a", "offset": 0, "chunk": "a" * (8 * MIB) + "!"}, -32602,
     "Invalid symbol 33, offset %d." % (8 * MIB)),
    ({"handleId": "a", "offset": 0}, -32602, "missing field `chunk`"),
    ({"chunk": "YQ==", "handleId": "a"}, -32602, "missing field `offset`"),
    ({"offset": 0, "chunk": "YQ=="}, -32602, "missing field `handleId`"),
    ({"chunk": "!", "handleId": "a"}, -32602, "Invalid symbol 33, offset 0."),
    ({"handleId": "a", "offset": -1, "chunk": "YQ=="}, -32602, "invalid number"),
    ({"handleId": "a", "offset": 1.5, "chunk": "YQ=="}, -32602, "invalid number"),
    ({"handleId": "a", "offset": 2 ** 64, "chunk": "YQ=="}, -32602, "invalid number"),
    ({"handleId": "a", "offset": "1", "chunk": "YQ=="}, -32602,
     "invalid type: string \"1\", expected u64"),
    ({"handleId": "a", "offset": None, "chunk": "YQ=="}, -32602,
     "invalid type: null, expected u64"),
    ({"chunk": "YQ=", "offset": -1, "handleId": "a"}, -32602, "Invalid padding"),
    ({"offset": -1, "chunk": "YQ=", "handleId": "a"}, -32602, "invalid number"),
    ({"handleId": 1, "offset": 0, "chunk": "YQ=="}, -32602,
     "invalid type: number, expected a string"),
    ({"handleId": None, "offset": 0, "chunk": "YQ=="}, -32602,
     "invalid type: null, expected a string"),
    ({"handleId": "a", "offset": 0, "chunk": 1}, -32602, "invalid type: number, expected a string"),
    (["a", 0], -32602, "invalid length 2, expected struct FsWriteBlockParams with 3 elements"),
    (["a", 0, "YQ==", 1], -32602, "invalid length 4, expected fewer elements in array"),
    (["a", 0, "!"], -32602, "Invalid symbol 33, offset 0."),
    (["a", 0, "YQ=="], -32004, "unknown file handle `a`"),
    ("x", -32602, "invalid type: string \"x\", expected struct FsWriteBlockParams"),
    (None, -32602, "invalid type: null, expected struct FsWriteBlockParams"),
]
BAD_OPEN = [
    ("Replace", "unknown variant `Replace`, expected `read` or `replace`"),
    ("write", "unknown variant `write`, expected `read` or `replace`"),
    (None, "invalid type: null, expected string or map"),
    (1, "invalid type: number, expected string or map"),
    (True, "invalid type: boolean `true`, expected string or map"),
    ([], "invalid type: sequence, expected string or map"),
    ({}, "invalid value: map, expected map with a single key"),
    ({"replace": None, "read": None}, "invalid value: map, expected map with a single key"),
    ({"bad": None}, "unknown variant `bad`, expected `read` or `replace`"),
    ({"replace": 1}, "invalid type: number, expected unit"),
    ({"replace": {}}, "invalid type: map, expected unit"),
    ({"replace": []}, "invalid type: sequence, expected unit"),
]


def bad_params(s, tag):
    d = fresh("bad")
    for p, code, msg in BAD:
        r = s.request("fs/writeBlock", p)
        t.ok(is_err(r, code, msg), "[%s] writeBlock %.60r: %d %s" % (tag, p, code, msg), r)
    for mode, msg in BAD_OPEN:
        r = s.request("fs/open", {"handleId": "b", "path": uri(os.path.join(d, "f")),
                                  "mode": mode})
        t.ok(is_err(r, -32602, msg), "[%s] open mode %r: -32602 %s" % (tag, mode, msg), r)
    t.ok(not os.path.exists(os.path.join(d, "f")), "[%s] no bad open made the file" % tag)
    # The session goes on.
    r = wopen(s, "b", os.path.join(d, "f"))
    r2 = wblock(s, "b", 0, b"still here")
    s.request("fs/close", {"handleId": "b"})
    t.ok(r2.get("result") == {} and read(os.path.join(d, "f")) == b"still here",
         "[%s] after the bad params the session writes on" % tag, (r, r2))


def ctx(ws):
    # Not workspace_write(): this directory is under /tmp, which that one lets write.
    ents = [special("root", "read"), special("project_roots", "write"),
            special("project_roots", "read", ".git")]
    return {"permissions": profile(ents), "windowsSandboxLevel": "disabled",
            "workspaceRoots": [uri(ws)], "cwd": uri(ws)}


def sandboxed(s, tag):
    base = fresh("sandbox")
    os.chmod(base, 0o755)
    ws = os.path.join(base, "ws")
    out = os.path.join(base, "out")
    for x in (ws, out, os.path.join(ws, ".git")):
        os.mkdir(x)
    sb = ctx(ws)
    r = wopen(s, "in", os.path.join(ws, "in"), sandbox=sb)
    if "error" in r and any(w in err_msg(r) for w in ("andlock", "namespace", "seccomp")):
        t.skip("[%s] sandboxed write streaming" % tag, err_msg(r))
        return
    r2 = wblock(s, "in", 0, b"inside")
    s.request("fs/close", {"handleId": "in"})
    t.ok(r.get("result") == {"handleId": "in"} and r2.get("result") == {} and
         read(os.path.join(ws, "in")) == b"inside",
         "[%s] sandbox: a write-open inside the workspace works" % tag, (r, r2))
    # Denied where fs/writeFile is denied, with the same error.
    write(os.path.join(out, "kept"), b"keep")
    os.symlink(os.path.join(out, "via-link"), os.path.join(ws, "link-out"))
    os.symlink(os.path.join(out, "kept"), os.path.join(ws, "link-kept"))
    for name, path in (("outside the writable roots", os.path.join(out, "x")),
                       ("in the protected .git", os.path.join(ws, ".git", "config")),
                       ("through a symlink out", os.path.join(ws, "link-out")),
                       ("through a symlink to a file outside", os.path.join(ws, "link-kept"))):
        r = wopen(s, "d", path, sandbox=sb)
        rf = s.request("fs/writeFile", {"path": uri(path), "dataBase64": b64(b"x"), "sandbox": sb})
        t.ok("error" in r and (CODEX or r.get("error") == rf.get("error")),
             "[%s] sandbox: a write-open %s is refused as fs/writeFile is" % (tag, name),
             (r, rf))
        s.request("fs/close", {"handleId": "d"})
    t.ok(sorted(os.listdir(out)) == ["kept"] and read(os.path.join(out, "kept")) == b"keep" and
         os.listdir(os.path.join(ws, ".git")) == [],
         "[%s] sandbox: nothing outside changed" % tag, os.listdir(out))
    # A symlink swapped in after the open: the handle writes the file it opened.
    f = os.path.join(ws, "swapped")
    r = wopen(s, "sw", f, sandbox=sb)
    os.unlink(f)
    os.symlink(os.path.join(out, "kept"), f)
    r2 = wblock(s, "sw", 0, b"swapped in")
    s.request("fs/close", {"handleId": "sw"})
    t.ok(r.get("result") and r2.get("result") == {} and
         read(os.path.join(out, "kept")) == b"keep",
         "[%s] sandbox: a symlink swapped in after the open does not redirect it" % tag, (r, r2))
    if CODEX:
        return
    # A hard link to a file outside: the outside name keeps its contents (the
    # released binary truncates it in place).
    os.link(os.path.join(out, "kept"), os.path.join(ws, "hard"))
    r = wopen(s, "hl", os.path.join(ws, "hard"), sandbox=sb)
    r2 = wblock(s, "hl", 0, b"new")
    s.request("fs/close", {"handleId": "hl"})
    t.ok(r.get("result") and r2.get("result") == {} and
         read(os.path.join(ws, "hard")) == b"new" and read(os.path.join(out, "kept")) == b"keep",
         "[%s] sandbox: a hard link to a file outside gets a new file, the other name "
         "keeps its contents" % tag, (r, r2))
    t.ok(not [n for n in os.listdir(ws) if ".cordon-" in n],
         "[%s] sandbox: no temporary file is left" % tag, os.listdir(ws))


TOKEN = "write-stream-test-token-0123456789abcdef"


def hidden():
    """The server's own token file, in a directory a sandbox context may write: never written."""
    if CODEX:
        t.skip("hidden token file", "cordon's --auth-token-file")
        return
    ws = fresh("hidden")
    os.chmod(ws, 0o755)
    token = os.path.join(ws, "token")
    write(token, (TOKEN + "\n").encode())
    os.chmod(token, 0o600)
    ns = NetServer("ws", args=["--auth-token-file", token])
    try:
        if not ns.ready:
            t.not_ok("hidden: the server listens", ns.stderr_text())
            return
        c = ns.connect(token=TOKEN)
        c.handshake()
        sb = ctx(ws)
        r = wopen(c, "tok", token, sandbox=sb)
        r2 = wblock(c, "tok", 0, b"overwritten") if "result" in r else None
        rf = c.request("fs/writeFile", {"path": uri(token), "dataBase64": b64(b"x"),
                                        "sandbox": sb})
        t.ok("error" in r and "error" in rf and read(token) == (TOKEN + "\n").encode(),
             "hidden: a sandboxed write-open of the server's token file is refused, as "
             "fs/writeFile is", (r, r2, rf))
        # Moved away by someone outside every sandbox: sandboxed opens fail closed.
        os.rename(token, token + ".away")
        try:
            r = wopen(c, "tok2", os.path.join(ws, "f"), sandbox=sb)
            t.ok(err_code(r) == -32602 and token in err_msg(r) and
                 not os.path.exists(os.path.join(ws, "f")),
                 "hidden: the token file moved away: a sandboxed write-open is refused, "
                 "naming it", r)
        finally:
            os.rename(token + ".away", token)
        c.drop()
    finally:
        ns.stop()


def run(s, tag):
    s.handshake()
    basics(s, tag)
    limits(s, tag)
    bad_params(s, tag)
    sandboxed(s, tag)


def fd_targets(pid):
    fds = "/proc/%d/fd" % pid
    out = []
    for n in os.listdir(fds):
        try:
            out.append(os.readlink(os.path.join(fds, n)))
        except OSError:
            pass
    return out


def session_end():
    """A write handle left open is closed when its session ends (cordon: the hooks say when)."""
    if CODEX:
        t.skip("session end closes the handles", "cordon's test hooks")
        return
    d = fresh("end")
    hooks = Hooks()
    ns = NetServer("ws", extra_env=hooks.env)
    try:
        c = ns.connect()
        c.handshake()
        f = os.path.join(d, "left-open")
        wopen(c, "e", f)
        wblock(c, "e", 0, b"abc")
        pid = ns.server_pid
        t.ok(f in fd_targets(pid), "session end: the server holds the file open", f)
        mark = hooks.mark()
        c.drop()
        hooks.wait("fs-fd-closed", since=mark)
        t.ok(f not in fd_targets(pid) and read(f) == b"abc",
             "session end: the handle is closed, what was written stays", fd_targets(pid))
    finally:
        ns.stop()


def held_open():
    """A session whose write-open hangs on a worker (a hung file system) holds no one else up."""
    if CODEX:
        t.skip("held open", "cordon's test hooks")
        return
    d = fresh("held")
    hooks = Hooks(hold=["fs/open"])
    ns = NetServer("ws", extra_env=hooks.env)
    try:
        a = ns.connect()
        a.handshake()
        b = ns.connect()
        b.handshake()
        mark = hooks.mark()
        ia = a.send_request("fs/open", {"handleId": "a", "path": uri(os.path.join(d, "a")),
                                        "mode": "replace"})
        held_a = hooks.wait("fs-held", since=mark)
        mark = hooks.mark()
        ib = b.send_request("fs/open", {"handleId": "b", "path": uri(os.path.join(d, "b")),
                                        "mode": "replace"})
        hooks.release(hooks.wait("fs-held", since=mark))
        rb = b.wait_id(ib)
        r2 = wblock(b, "b", 0, b"b's data")
        r3 = b.request("fs/close", {"handleId": "b"})
        t.ok(rb.get("result") and r2.get("result") == {} and r3.get("result") == {} and
             read(os.path.join(d, "b")) == b"b's data",
             "held open: a session writes while another's open hangs", (rb, r2, r3))
        hooks.release(held_a)
        ra = a.wait_id(ia)
        ra2 = wblock(a, "a", 0, b"a's data")
        t.ok(ra and ra.get("result") == {"handleId": "a"} and ra2.get("result") == {} and
             read(os.path.join(d, "a")) == b"a's data", "held open: ... which then completes",
             (ra, ra2))
        a.drop()
        b.drop()
    finally:
        ns.stop()


def stalled_reader():
    """A client that sends blocks and reads no answer holds no one else up."""
    d = fresh("stall")
    ns = NetServer("ws")
    try:
        a = ns.connect()
        a.handshake()
        b = ns.connect()
        b.handshake()
        a.request("fs/open", {"handleId": "a", "path": uri(os.path.join(d, "a")),
                              "mode": "replace"})
        # a sends 64 MiB of blocks and reads no answer.
        block = b64(b"a" * MIB)
        for i in range(64):
            a.send({"id": 10000 + i, "method": "fs/writeBlock",
                    "params": {"handleId": "a", "offset": i * MIB, "chunk": block}})
        f = os.path.join(d, "b")
        data = os.urandom(2 * MIB)
        r1 = wopen(b, "b", f)
        r2 = [wblock(b, "b", off, data[off:off + MIB]).get("result") for off in (0, MIB)]
        r3 = b.request("fs/close", {"handleId": "b"})
        t.ok(r1.get("result") and r2 == [{}, {}] and r3.get("result") == {} and read(f) == data,
             "stall: a session writes a file while another sends blocks and reads nothing",
             (r1, r2, r3))
        # a's blocks are all answered once it reads, in order.
        got = [a.wait_id(10000 + i) for i in range(64)]
        t.ok(all(g and g.get("result") == {} for g in got) and
             os.path.getsize(os.path.join(d, "a")) == 64 * MIB,
             "stall: ... and its 64 blocks are written once it reads", [g for g in got if not g or
                                                                        "error" in g][:3])
        a.drop()
        b.drop()
    finally:
        ns.stop()


try:
    for loop in LOOPS:
        s = Server(loop=loop)
        t.guard("[stdio %s]" % loop, run, s, "stdio %s" % loop)
        s.stop()
    ns = NetServer("ws")
    if ns.ready:
        c = ns.connect()
        t.guard("[ws]", run, c, "ws")
        c.drop()
    else:
        t.not_ok("[ws] server listening", ns.stderr_text())
    ns.stop()
    t.guard("hidden", hidden)
    t.guard("session end", session_end)
    t.guard("held open", held_open)
    t.guard("stall", stalled_reader)
finally:
    shutil.rmtree(T, ignore_errors=True)
t.done()
