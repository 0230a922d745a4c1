#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve` side by side with the released Codex exec-server (0.169.0):
# every method, with good params and with bad ones (missing fields, wrong
# types, extra fields, nulls, huge, negative and fractional numbers, bad
# base64, bad URIs, relative paths, unknown enum values, arrays for objects),
# sent in the same order over stdio and WebSocket. Each answer is normalised
# (the scratch directory, session ids, timestamps, pids) and compared, code,
# message and result, with the answer the released binary gave, recorded
# below (EXPECT). serve-codex-parity.py runs this script against the binary
# itself (CD_TEST_CONTROL=codex), which checks the recording. Where cordon
# differs on purpose (cordon-protocol(7), DIFFERENCES FROM CODEX), KEPT holds
# cordon's answer and the reason; those are compared with cordon's answer.
# CD_PARITY_RECORD=FILE writes the answers seen to FILE (JSON), to re-record.
# TAP; runs as root and, from unprivileged.sh, as an ordinary user.

import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import Server, Tap, b64, cordon_usable, unb64  # noqa: E402
from netclient import NetServer  # noqa: E402

CONTROL = os.environ.get("CD_TEST_CONTROL", "")
RECORD = os.environ.get("CD_PARITY_RECORD", "")
ARGS = [] if CONTROL else ["--allow-http-request"]

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

T = os.path.realpath(tempfile.mkdtemp(prefix="cordon-sweep-"))
os.chmod(T, 0o755)
U = "file://" + T
OMIT = object()  # no params member at all


def populate():
    for n in os.listdir(T):
        p = os.path.join(T, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    os.makedirs(os.path.join(T, "d/sub"))
    for name, data in (("f", "hello\n"), ("d/a", "a"), ("d/sub/b", "bb")):
        with open(os.path.join(T, name), "w") as fh:
            fh.write(data)
    os.symlink("f", os.path.join(T, "lnk"))


def sub(v):
    """@T and @U in strings stand for the scratch directory and its URI."""
    if isinstance(v, str):
        return v.replace("@U", U).replace("@T", T)
    if isinstance(v, list):
        return [sub(x) for x in v]
    if isinstance(v, dict):
        return {k: sub(x) for k, x in v.items()}
    return v


# ------------------------------------------------------------- scenarios

def variants(name, method, good, ints=(), skip=()):
    """Bad variants of the good params: each field missing, null, of another type;
    an extra field; integer fields negative, fractional, huge; the params as an
    array, a string, null, missing; then the good params themselves."""
    out = []
    out.append((name + " params missing", method, OMIT))
    out.append((name + " params null", method, None))
    out.append((name + " params string", method, "x"))
    out.append((name + " params {}", method, {}))
    out.append((name + " params array", method, list(good.values())))
    for k, v in good.items():
        if k in skip:
            continue
        rest = {x: y for x, y in good.items() if x != k}
        out.append((name + " no " + k, method, rest))
        out.append((name + " " + k + " null", method, dict(good, **{k: None})))
        if isinstance(v, bool):
            wrong = "true"
        elif isinstance(v, int):
            wrong = str(v)
        elif isinstance(v, str):
            wrong = 1
        elif isinstance(v, list):
            wrong = {}
        else:
            wrong = []
        out.append((name + " " + k + " wrong type", method, dict(good, **{k: wrong})))
    for k in ints:
        for label, v in (("negative", -1), ("float", 1.5), ("2^64", 2 ** 64),
                         ("1e30", 1e30)):
            out.append((name + " " + k + " " + label, method, dict(good, **{k: v})))
    out.append((name + " extra field", method, dict(good, bogus=1)))
    return out


SCENARIOS = []
S = SCENARIOS.extend
S([("environment/info", "environment/info", OMIT),
   ("environment/info params {}", "environment/info", {}),
   ("environment/info params array", "environment/info", []),
   ("environment/status", "environment/status", OMIT),
   ("environment/status params array", "environment/status", [1]),
   ("environment/status params null", "environment/status", None),
   ("environment/status params string", "environment/status", "x"),
   ("environment/info params number", "environment/info", 1),
   ("environment/info params map", "environment/info", {"a": 1})])

# file system, read only first
S(variants("readFile", "fs/readFile", {"path": "@U/f"}))
S([("readFile relative", "fs/readFile", {"path": "f"}),
   ("readFile absolute path", "fs/readFile", {"path": "@T/f"}),
   ("readFile http uri", "fs/readFile", {"path": "http://x/f"}),
   ("readFile empty", "fs/readFile", {"path": ""}),
   ("readFile missing file", "fs/readFile", {"path": "@U/nope"}),
   ("readFile directory", "fs/readFile", {"path": "@U/d"}),
   ("readFile sandbox null", "fs/readFile", {"path": "@U/f", "sandbox": None}),
   ("readFile sandbox array", "fs/readFile", {"path": "@U/f", "sandbox": []}),
   ("readFile sandbox {}", "fs/readFile", {"path": "@U/f", "sandbox": {}}),
   ("readFile sandbox level", "fs/readFile", {"path": "@U/f", "sandbox": {
       "permissions": {"type": "disabled"}, "windowsSandboxLevel": "x"}}),
   ("readFile sandbox no level", "fs/readFile", {"path": "@U/f", "sandbox": {
       "permissions": {"type": "disabled"}}}),
   ("readFile sandbox desktop null", "fs/readFile", {"path": "@U/f", "sandbox": {
       "permissions": {"type": "disabled"}, "windowsSandboxLevel": "disabled",
       "windowsSandboxPrivateDesktop": None}}),
   ("readFile sandbox legacy null", "fs/readFile", {"path": "@U/f", "sandbox": {
       "permissions": {"type": "disabled"}, "windowsSandboxLevel": "disabled",
       "useLegacyLandlock": None}}),
   ("readFile sandbox mxc", "fs/readFile", {"path": "@U/f", "sandbox": {
       "permissions": {"type": "disabled"}, "windowsSandboxLevel": "mxc"}}),
   ("readFile file scheme upper", "fs/readFile", {"path": "FILE://@T/f"}),
   ("readFile mailto", "fs/readFile", {"path": "mailto:x"}),
   ("readFile scheme digits", "fs/readFile", {"path": "a1+b://x"})])
S(variants("getMetadata", "fs/getMetadata", {"path": "@U/d"}))
S([("getMetadata file", "fs/getMetadata", {"path": "@U/f"}),
   ("getMetadata symlink", "fs/getMetadata", {"path": "@U/lnk"}),
   ("getMetadata missing", "fs/getMetadata", {"path": "@U/nope"}),
   ("getMetadata relative", "fs/getMetadata", {"path": "d"})])
S(variants("canonicalize", "fs/canonicalize", {"path": "@U/lnk"}))
S([("canonicalize missing", "fs/canonicalize", {"path": "@U/nope"}),
   ("canonicalize relative", "fs/canonicalize", {"path": "./f"})])
S(variants("readDirectory", "fs/readDirectory", {"path": "@U/d"}))
S([("readDirectory file", "fs/readDirectory", {"path": "@U/f"}),
   ("readDirectory missing", "fs/readDirectory", {"path": "@U/nope"})])
WALK = {"maxDepth": 4, "maxDirectories": 10, "maxEntries": 100,
        "followDirectorySymlinks": False}
S(variants("walk", "fs/walk", {"path": "@U", "options": WALK}))
for k in ("maxDepth", "maxDirectories", "maxEntries"):
    for label, v in (("missing", OMIT), ("null", None), ("0", 0), ("negative", -1),
                     ("float", 2.5), ("string", "1"), ("huge", 2 ** 64), ("too big", 100000)):
        o = {x: y for x, y in WALK.items() if x != k}
        if v is not OMIT:
            o[k] = v
        S([("walk options.%s %s" % (k, label), "fs/walk", {"path": "@U", "options": o})])
S([("walk follow string", "fs/walk",
    {"path": "@U", "options": dict(WALK, followDirectorySymlinks="yes")}),
   ("walk prune", "fs/walk", {"path": "@U", "options": dict(WALK, pruneHiddenDirectories=True)}),
   ("walk prune null", "fs/walk", {"path": "@U", "options": dict(WALK,
                                                               pruneHiddenDirectories=None)}),
   ("walk options extra", "fs/walk", {"path": "@U", "options": dict(WALK, bogus=1)}),
   ("walk file root", "fs/walk", {"path": "@U/f", "options": WALK}),
   ("walk missing root", "fs/walk", {"path": "@U/nope", "options": WALK})])

# file system, writes
S(variants("writeFile", "fs/writeFile", {"path": "@U/w", "dataBase64": b64(b"w")}))
S([("writeFile bad base64", "fs/writeFile", {"path": "@U/w2", "dataBase64": "!!"}),
   ("writeFile base64 no padding", "fs/writeFile", {"path": "@U/w2", "dataBase64": "YQ"}),
   ("writeFile base64 length", "fs/writeFile", {"path": "@U/w2", "dataBase64": "YWJjZ"}),
   ("writeFile empty data", "fs/writeFile", {"path": "@U/w2", "dataBase64": ""}),
   ("writeFile relative", "fs/writeFile", {"path": "w2", "dataBase64": "YQ=="}),
   ("writeFile missing parent", "fs/writeFile", {"path": "@U/no/w", "dataBase64": "YQ=="}),
   ("writeFile onto dir", "fs/writeFile", {"path": "@U/d", "dataBase64": "YQ=="})])
S(variants("createDirectory", "fs/createDirectory", {"path": "@U/c/e", "recursive": True}))
S([("createDirectory not recursive", "fs/createDirectory", {"path": "@U/c2/e",
                                                              "recursive": False}),
   ("createDirectory exists", "fs/createDirectory", {"path": "@U/d", "recursive": False}),
   ("createDirectory on file", "fs/createDirectory", {"path": "@U/f/x"}),
   ("createDirectory relative", "fs/createDirectory", {"path": "c3"})])
S(variants("copy", "fs/copy", {"sourcePath": "@U/f", "destinationPath": "@U/f2",
                               "recursive": False}))
S([("copy dir not recursive", "fs/copy", {"sourcePath": "@U/d", "destinationPath": "@U/d2",
                                          "recursive": False}),
   ("copy dir recursive", "fs/copy", {"sourcePath": "@U/d", "destinationPath": "@U/d2",
                                      "recursive": True}),
   ("copy into itself", "fs/copy", {"sourcePath": "@U/d", "destinationPath": "@U/d/sub/x",
                                    "recursive": True}),
   ("copy missing source", "fs/copy", {"sourcePath": "@U/nope", "destinationPath": "@U/x",
                                       "recursive": False}),
   ("copy relative", "fs/copy", {"sourcePath": "f", "destinationPath": "@U/x",
                                 "recursive": False})])
S(variants("remove", "fs/remove", {"path": "@U/f2", "recursive": False, "force": False}))
S([("remove missing no force", "fs/remove", {"path": "@U/nope", "force": False}),
   ("remove missing force", "fs/remove", {"path": "@U/nope"}),
   ("remove dir not recursive", "fs/remove", {"path": "@U/d2", "recursive": False}),
   ("remove dir", "fs/remove", {"path": "@U/d2"}),
   ("remove relative", "fs/remove", {"path": "x"})])

# streams
S(variants("open", "fs/open", {"handleId": "h1", "path": "@U/f", "mode": "read"}))
S([("open dup", "fs/open", {"handleId": "h1", "path": "@U/f"}),
   ("open mode bogus", "fs/open", {"handleId": "h2", "path": "@U/f", "mode": "bogus"}),
   ("open mode map", "fs/open", {"handleId": "h2", "path": "@U/f", "mode": {"a": 1, "b": 2}}),
   ("open mode replace num", "fs/open", {"handleId": "h2", "path": "@U/f",
                                         "mode": {"replace": 1}}),
   ("open id 33", "fs/open", {"handleId": "x" * 33, "path": "@U/f"}),
   ("open id empty", "fs/open", {"handleId": "", "path": "@U/f"}),
   ("open relative", "fs/open", {"handleId": "h3", "path": "f"}),
   ("open missing", "fs/open", {"handleId": "h3", "path": "@U/nope"}),
   ("open directory", "fs/open", {"handleId": "h3", "path": "@U/d"}),
   ("open replace", "fs/open", {"handleId": "w1", "path": "@U/out", "mode": "replace"}),
   ("open replace map", "fs/open", {"handleId": "w2", "path": "@U/out2",
                                    "mode": {"replace": None}})])
S(variants("readBlock", "fs/readBlock", {"handleId": "h1", "offset": 0, "len": 3},
           ints=("offset", "len")))
S([("readBlock len 0", "fs/readBlock", {"handleId": "h1", "offset": 0, "len": 0}),
   ("readBlock len big", "fs/readBlock", {"handleId": "h1", "offset": 0, "len": 1048577}),
   ("readBlock id 33", "fs/readBlock", {"handleId": "x" * 33, "offset": 0, "len": 1}),
   ("readBlock unknown", "fs/readBlock", {"handleId": "zz", "offset": 0, "len": 1}),
   ("readBlock offset 2^63", "fs/readBlock", {"handleId": "h1", "offset": 2 ** 63, "len": 1}),
   ("readBlock eof", "fs/readBlock", {"handleId": "h1", "offset": 3, "len": 100}),
   ("readBlock write handle", "fs/readBlock", {"handleId": "w2", "offset": 0, "len": 1})])
S(variants("writeBlock", "fs/writeBlock", {"handleId": "w1", "offset": 0, "chunk": "YWI="},
           ints=("offset",)))
S([("writeBlock bad base64", "fs/writeBlock", {"handleId": "w1", "offset": 0, "chunk": "!!"}),
   ("writeBlock empty", "fs/writeBlock", {"handleId": "w1", "offset": 0, "chunk": ""}),
   ("writeBlock id 33", "fs/writeBlock", {"handleId": "x" * 33, "offset": 0, "chunk": "YQ=="}),
   ("writeBlock unknown", "fs/writeBlock", {"handleId": "zz", "offset": 0, "chunk": "YQ=="}),
   ("writeBlock read handle", "fs/writeBlock", {"handleId": "h1", "offset": 0,
                                                "chunk": "YQ=="}),
   ("writeBlock past 2^63", "fs/writeBlock", {"handleId": "w1", "offset": 2 ** 63 - 1,
                                              "chunk": "YQ=="})])
S(variants("close", "fs/close", {"handleId": "h1"}))
S([("close again", "fs/close", {"handleId": "h1"}),
   ("close w1", "fs/close", {"handleId": "w1"}),
   ("close id 33", "fs/close", {"handleId": "x" * 33}),
   ("readFile after writeBlock", "fs/readFile", {"path": "@U/out"})])

# processes
ENV = {"PATH": "/usr/bin:/bin"}
S(variants("start", "process/start", {"processId": "p1", "argv": ["/bin/true"], "cwd": "@U",
                                      "env": ENV, "tty": False},
           skip=("processId",)))
S([("start argv empty", "process/start", {"processId": "p2", "argv": [], "cwd": "@U",
                                          "env": ENV, "tty": False}),
   ("start argv number", "process/start", {"processId": "p2", "argv": [1], "cwd": "@U",
                                           "env": ENV, "tty": False}),
   ("start cwd relative", "process/start", {"processId": "p2", "argv": ["/bin/true"],
                                            "cwd": "w", "env": ENV, "tty": False}),
   ("start cwd missing", "process/start", {"processId": "p2", "argv": ["/bin/true"],
                                           "cwd": "@U/nope", "env": ENV, "tty": False}),
   ("start env number", "process/start", {"processId": "p2", "argv": ["/bin/true"],
                                          "cwd": "@U", "env": {"A": 1}, "tty": False}),
   ("start not found", "process/start", {"processId": "p3", "argv": ["/nonexistent"],
                                         "cwd": "@U", "env": ENV, "tty": False}),
   ("start envPolicy inherit", "process/start", {
       "processId": "p2", "argv": ["/bin/true"], "cwd": "@U", "env": ENV, "tty": False,
       "envPolicy": {"inherit": "most"}}),
   ("start envPolicy no excludes", "process/start", {
       "processId": "p2", "argv": ["/bin/true"], "cwd": "@U", "env": ENV, "tty": False,
       "envPolicy": {"inherit": "all"}}),
   ("start envPolicy exclude string", "process/start", {
       "processId": "p2", "argv": ["/bin/true"], "cwd": "@U", "env": ENV, "tty": False,
       "envPolicy": {"inherit": "all", "ignoreDefaultExcludes": False, "exclude": "X",
                     "set": {}, "includeOnly": []}}),
   ("start env bad name", "process/start", {
       "processId": "p2", "argv": ["/bin/true"], "cwd": "@U", "env": {"A=B": "1"},
       "tty": False}),
   ("start sandbox string", "process/start", {
       "processId": "p2", "argv": ["/bin/true"], "cwd": "@U", "env": ENV, "tty": False,
       "sandbox": "x"}),
   ("start pipeStdin null", "process/start", {
       "processId": "p4", "argv": ["/bin/true"], "cwd": "@U", "env": ENV, "tty": False,
       "pipeStdin": None}),
   ("start cwd http", "process/start", {"processId": "p2", "argv": ["/bin/true"],
                                        "cwd": "http://x/", "env": ENV, "tty": False}),
   ("start id long", "process/start", {"processId": "p" * 1025, "argv": ["/bin/true"],
                                       "cwd": "@U", "env": ENV, "tty": False})])
S(variants("read", "process/read", {"processId": "nope", "afterSeq": 0, "maxBytes": 10,
                                    "waitMs": 0}, ints=("afterSeq", "maxBytes", "waitMs")))
S(variants("write", "process/write", {"processId": "nope", "chunk": "YQ==", "writeId": "x"}))
S([("write bad base64", "process/write", {"processId": "nope", "chunk": "!",
                                          "writeId": "x"}),
   ("write empty id", "process/write", {"processId": "nope", "chunk": "YQ==",
                                        "writeId": ""})])
S(variants("signal", "process/signal", {"processId": "nope", "signal": "interrupt"}))
S([("signal bogus", "process/signal", {"processId": "nope", "signal": "kill"}),
   ("signal map", "process/signal", {"processId": "nope", "signal": {"interrupt": None}}),
   ("signal bool", "process/signal", {"processId": "nope", "signal": True})])
S(variants("terminate", "process/terminate", {"processId": "nope"}))

# discovery
S(variants("discover", "capabilityRoots/discoverV1", {"roots": [{"id": "r", "path": "@U/d"}]}))
S([("discover root no id", "capabilityRoots/discoverV1", {"roots": [{"path": "@U/d"}]}),
   ("discover root relative", "capabilityRoots/discoverV1",
    {"roots": [{"id": "r", "path": "d"}]}),
   ("discover root http", "capabilityRoots/discoverV1",
    {"roots": [{"id": "r", "path": "http://x/d"}]}),
   ("discover root extra", "capabilityRoots/discoverV1",
    {"roots": [{"id": "r", "path": "@U/d", "x": 1}]})])

# http/request params only (nothing is fetched: every one is refused before)
S(variants("http", "http/request", {"method": "GET", "url": "bogus://x", "requestId": "q",
                                   "timeoutMs": 1000},
           ints=("timeoutMs",)))
S([("http bad url", "http/request", {"method": "GET", "url": "not a url", "requestId": "q"}),
   ("http headers object", "http/request", {"method": "GET", "url": "bogus://x",
                                            "requestId": "q", "headers": {"a": "b"}}),
   ("http bad base64", "http/request", {"method": "POST", "url": "bogus://x",
                                        "requestId": "q", "bodyBase64": "!"}),
   ("http bad base64 no id", "http/request", {"method": "POST", "url": "bogus://x",
                                              "bodyBase64": "!"})])

# file system requests under a sandbox context
RO = {"permissions": {"type": "managed", "network": "restricted", "file_system": {
    "type": "restricted", "entries": [
        {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"},
        {"path": {"type": "path", "path": "@U/d"}, "access": "write"}]}},
    "windowsSandboxLevel": "disabled", "cwd": "@U"}
S([("sandboxed readFile", "fs/readFile", {"path": "@U/f", "sandbox": RO}),
   ("sandboxed writeFile inside", "fs/writeFile", {"path": "@U/d/sbw", "dataBase64": "YQ==",
                                                   "sandbox": RO}),
   ("sandboxed writeFile outside", "fs/writeFile", {"path": "@U/sbw", "dataBase64": "YQ==",
                                                    "sandbox": RO}),
   ("sandboxed createDirectory outside", "fs/createDirectory", {"path": "@U/sbd",
                                                                "sandbox": RO}),
   ("sandboxed remove outside", "fs/remove", {"path": "@U/f", "sandbox": RO}),
   ("sandboxed getMetadata", "fs/getMetadata", {"path": "@U/d/a", "sandbox": RO}),
   ("sandboxed readDirectory", "fs/readDirectory", {"path": "@U/d", "sandbox": RO}),
   ("sandboxed copy into", "fs/copy", {"sourcePath": "@U/f", "destinationPath": "@U/d/cp",
                                       "recursive": False, "sandbox": RO}),
   ("sandboxed copy out", "fs/copy", {"sourcePath": "@U/d/a", "destinationPath": "@U/cp",
                                      "recursive": False, "sandbox": RO}),
   ("sandboxed bad entry", "fs/readFile", {"path": "@U/f", "sandbox": dict(
       RO, permissions={"type": "managed", "network": "restricted",
                        "file_system": {"type": "restricted", "entries": [{"path": 1}]}})}),
   ("sandboxed permissions type", "fs/readFile", {"path": "@U/f", "sandbox": dict(
       RO, permissions={"type": "bogus"})})])

S([("unknown method", "fs/bogus", {}),
   ("unknown method 2", "bogus", OMIT)])

# initialize variants: each on a fresh connection (name, params)
INITS = [
    ("init ok", {"clientName": "c"}),
    ("init params missing", OMIT),
    ("init params null", None),
    ("init params array", ["c"]),
    ("init params string", "c"),
    ("init no clientName", {}),
    ("init clientName null", {"clientName": None}),
    ("init clientName number", {"clientName": 1}),
    ("init extra", {"clientName": "c", "bogus": 1}),
    ("init resume null", {"clientName": "c", "resumeSessionId": None}),
    ("init resume number", {"clientName": "c", "resumeSessionId": 1}),
    ("init resume unknown", {"clientName": "c", "resumeSessionId": "nope"}),
]

# ------------------------------------------------------------ comparison

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def norm(v, key=""):
    if isinstance(v, str):
        v = v.replace(T, "$T")
        return UUID.sub("$UUID", v)
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x, k) for k, x in v.items()}
    if isinstance(v, int) and not isinstance(v, bool) and (key.endswith("Ms") or key == "pid"):
        return "$N"
    return v


def answer(resp, method):
    """The part compared: error code and message, or the normalised result."""
    if "error" in resp:
        e = resp["error"]
        return {"code": e.get("code"), "message": norm(e.get("message"))}
    r = norm(resp.get("result"))
    if isinstance(r, dict):
        if method == "process/start":
            r.pop("cordon", None)  # cordon's documented extra
        if method in ("initialize", "environment/info"):
            # executorVersion, providerId, shell, cwd, home: each server's own
            # capabilities: the same 15 names, each a boolean; which are true is
            # cordon's choice (cordon-protocol(7), CAPABILITIES), checked elsewhere.
            info = r.get("environmentInfo", r) if method == "initialize" else r
            for k in list(info):
                if k != "capabilities":
                    info[k] = type(info[k]).__name__
                else:
                    info[k] = {f: type(b).__name__ for f, b in info[k].items()}
    return {"result": r}


def send(c, method, params, i):
    msg = {"id": i, "method": method}
    if params is not OMIT:
        msg["params"] = sub(params)
    c.send(msg)
    resp = c.read_response()
    assert resp.get("id") == i, resp
    return resp


seen = {}


def check(tag, name, got):
    if RECORD:
        seen[tag + ":" + name] = got
    kept = KEPT.get(tag + ":" + name, KEPT.get(name))
    if kept and not CONTROL:
        want = kept[0]
    else:
        want = EXPECT.get(tag + ":" + name, EXPECT.get(name))
    t.ok(got == want, "[%s] %s" % (tag, name),
         None if got == want else "got  %s\nwant %s" % (json.dumps(got), json.dumps(want)))


def process_flow(c, tag):
    """A process run to its end: its output and state as process/read gives them
    (chunks joined: how output splits into chunks is timing), then what write,
    signal, terminate and a second start of the same id answer once it exited."""
    pid = "flow"
    r = send(c, "process/start", {"processId": pid, "argv": ["/bin/sh", "-c", "echo out; "
                                  "echo err >&2; read x; echo got $x; exit 3"],
                                  "cwd": "@U", "env": ENV, "tty": False, "pipeStdin": True},
             1)
    check(tag, "flow start", answer(r, "process/start"))
    r = send(c, "process/write", {"processId": pid, "chunk": b64(b"in\n"), "writeId": "w1"}, 2)
    check(tag, "flow write", answer(r, "process/write"))
    r = send(c, "process/write", {"processId": pid, "chunk": b64(b"in\n"), "writeId": "w1"}, 3)
    check(tag, "flow write repeated id", answer(r, "process/write"))
    out, seq, last, n = {}, 0, None, 10
    while True:
        n += 1
        r = send(c, "process/read", {"processId": pid, "afterSeq": seq, "waitMs": 5000}, n)
        if "error" in r:
            last = r
            break
        res = r["result"]
        for ch in res["chunks"]:
            out[ch["stream"]] = out.get(ch["stream"], b"") + unb64(ch["chunk"])
        seq = res["nextSeq"] - 1 if res["chunks"] else seq
        last = {k: v for k, v in res.items() if k not in ("chunks", "nextSeq")}
        if res["closed"]:
            break
    check(tag, "flow output", {k: v.decode() for k, v in out.items()})
    check(tag, "flow final read", last)
    for i, (name, method, params) in enumerate([
            ("flow write after exit", "process/write",
             {"processId": pid, "chunk": "YQ==", "writeId": "w2"}),
            ("flow signal after exit", "process/signal", {"processId": pid, "signal": "interrupt"}),
            ("flow terminate after exit", "process/terminate", {"processId": pid}),
            ("flow start same id", "process/start",
             {"processId": pid, "argv": ["/bin/true"], "cwd": "@U", "env": ENV, "tty": False})]):
        check(tag, name, answer(send(c, method, params, 900 + i), method))


def sweep(c, tag):
    populate()
    c.handshake()
    for i, (name, method, params) in enumerate(SCENARIOS):
        check(tag, name, answer(send(c, method, params, 1000 + i), method))
    process_flow(c, tag)


def inits(connect, tag):
    for name, params in INITS:
        c = connect()
        try:
            check(tag, name, answer(send(c, "initialize", params, 1), "initialize"))
        finally:
            c.stop() if hasattr(c, "stop") else c.drop()


# The released binary's answers (CD_PARITY_RECORD against it).
EXPECT = {
    'canonicalize extra field': {'result': {'path': 'file://$T/f'}},
    'canonicalize missing': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'canonicalize no path': {'code': -32602, 'message': 'missing field `path`'},
    'canonicalize params array':
        {'code': -32602,
         'message': 'invalid length 1, expected struct WireFsCanonicalizeParams with 2 elements'},
    'canonicalize params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsCanonicalizeParams'},
    'canonicalize params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsCanonicalizeParams'},
    'canonicalize params string':
        {'code': -32602,
         'message': 'invalid type: string "x", expected struct WireFsCanonicalizeParams'},
    'canonicalize params {}': {'code': -32602, 'message': 'missing field `path`'},
    'canonicalize path null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'canonicalize path wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'canonicalize relative':
        {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'close again': {'result': {}},
    'close extra field': {'result': {}},
    'close handleId null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'close handleId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'close id 33': {'code': -32600, 'message': 'file handle ID must not exceed 32 bytes'},
    'close no handleId': {'code': -32602, 'message': 'missing field `handleId`'},
    'close params array': {'result': {}},
    'close params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct FsCloseParams'},
    'close params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct FsCloseParams'},
    'close params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct FsCloseParams'},
    'close params {}': {'code': -32602, 'message': 'missing field `handleId`'},
    'close w1': {'result': {}},
    'copy destinationPath null':
        {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'copy destinationPath wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'copy dir not recursive':
        {'code': -32600,
         'message': 'fs/copy requires recursive: true when sourcePath is a directory'},
    'copy dir recursive': {'result': {}},
    'copy extra field': {'result': {}},
    'copy into itself':
        {'code': -32600,
         'message': 'fs/copy cannot copy a directory to itself or one of its descendants'},
    'copy missing source': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'copy no destinationPath': {'code': -32602, 'message': 'missing field `destinationPath`'},
    'copy no recursive': {'code': -32602, 'message': 'missing field `recursive`'},
    'copy no sourcePath': {'code': -32602, 'message': 'missing field `sourcePath`'},
    'copy params array':
        {'code': -32602,
         'message': 'invalid length 3, expected struct WireFsCopyParams with 4 elements'},
    'copy params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsCopyParams'},
    'copy params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsCopyParams'},
    'copy params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct WireFsCopyParams'},
    'copy params {}': {'code': -32602, 'message': 'missing field `sourcePath`'},
    'copy recursive null': {'code': -32602, 'message': 'invalid type: null, expected a boolean'},
    'copy recursive wrong type':
        {'code': -32602, 'message': 'invalid type: string "true", expected a boolean'},
    'copy relative': {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'copy sourcePath null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'copy sourcePath wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'createDirectory exists': {'code': -32603, 'message': 'File exists (os error 17)'},
    'createDirectory extra field': {'result': {}},
    'createDirectory no path': {'code': -32602, 'message': 'missing field `path`'},
    'createDirectory no recursive': {'result': {}},
    'createDirectory not recursive':
        {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'createDirectory on file': {'code': -32603, 'message': 'Not a directory (os error 20)'},
    'createDirectory params array':
        {'code': -32602,
         'message': 'invalid length 3, expected struct WireFsCreateDirectoryParams with 4 elements'},
    'createDirectory params missing':
        {'code': -32602,
         'message': 'invalid type: null, expected struct WireFsCreateDirectoryParams'},
    'createDirectory params null':
        {'code': -32602,
         'message': 'invalid type: null, expected struct WireFsCreateDirectoryParams'},
    'createDirectory params string':
        {'code': -32602,
         'message': 'invalid type: string "x", expected struct WireFsCreateDirectoryParams'},
    'createDirectory params {}': {'code': -32602, 'message': 'missing field `path`'},
    'createDirectory path null':
        {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'createDirectory path wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'createDirectory recursive null': {'result': {}},
    'createDirectory recursive wrong type':
        {'code': -32602, 'message': 'invalid type: string "true", expected a boolean'},
    'createDirectory relative':
        {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'discover extra field':
        {'result': {'roots': [{'error': None,
                               'id': 'r',
                               'namespaceManifests': [],
                               'path': 'file://$T/d',
                               'plugin': None,
                               'skills': [],
                               'warnings': []}]}},
    'discover no roots': {'code': -32602, 'message': 'missing field `roots`'},
    'discover params array':
        {'result': {'roots': [{'error': None,
                               'id': 'r',
                               'namespaceManifests': [],
                               'path': 'file://$T/d',
                               'plugin': None,
                               'skills': [],
                               'warnings': []}]}},
    'discover params missing':
        {'code': -32602,
         'message': 'invalid type: null, expected struct WireCapabilityRootsDiscoverParams'},
    'discover params null':
        {'code': -32602,
         'message': 'invalid type: null, expected struct WireCapabilityRootsDiscoverParams'},
    'discover params string':
        {'code': -32602,
         'message': 'invalid type: string "x", expected struct WireCapabilityRootsDiscoverParams'},
    'discover params {}': {'code': -32602, 'message': 'missing field `roots`'},
    'discover root extra':
        {'result': {'roots': [{'error': None,
                               'id': 'r',
                               'namespaceManifests': [],
                               'path': 'file://$T/d',
                               'plugin': None,
                               'skills': [],
                               'warnings': []}]}},
    'discover root http': {'code': -32602, 'message': 'unsupported path URI scheme `http`'},
    'discover root no id': {'code': -32602, 'message': 'missing field `id`'},
    'discover root relative':
        {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'discover roots null': {'code': -32602, 'message': 'invalid type: null, expected a sequence'},
    'discover roots wrong type':
        {'code': -32602, 'message': 'invalid type: map, expected a sequence'},
    'environment/info':
        {'result': {'capabilities': {'capabilityDiscoverySandbox': 'bool',
                                     'capabilityDiscoveryV2': 'bool',
                                     'credentialMasking': 'bool',
                                     'credentialMaskingCustomProviders': 'bool',
                                     'environmentConfigRead': 'bool',
                                     'fileWriteStreaming': 'bool',
                                     'fsWatchMissing': 'bool',
                                     'httpHeaderEnvVars': 'bool',
                                     'linuxApprovedRootWritePreservesRestrictions': 'bool',
                                     'linuxRootWritePreservesDevices': 'bool',
                                     'networkProxyLaunch': 'bool',
                                     'networkProxyReviewDomains': 'bool',
                                     'sandboxedFileStreaming': 'bool',
                                     'shellSnapshotV2': 'bool',
                                     'windowsMxc': 'bool'},
                    'cwd': 'str',
                    'executorVersion': 'str',
                    'platformOs': 'str',
                    'prependPathDirs': 'list',
                    'providerId': 'str',
                    'shell': 'dict',
                    'tempDir': 'str',
                    'temporaryDirectories': 'list',
                    'userHomeDir': 'str'}},
    'environment/info params array':
        {'code': -32602, 'message': 'invalid type: sequence, expected unit'},
    'environment/info params map': {'code': -32602, 'message': 'invalid type: map, expected unit'},
    'environment/info params number':
        {'code': -32602, 'message': 'invalid type: number, expected unit'},
    'environment/info params {}':
        {'result': {'capabilities': {'capabilityDiscoverySandbox': 'bool',
                                     'capabilityDiscoveryV2': 'bool',
                                     'credentialMasking': 'bool',
                                     'credentialMaskingCustomProviders': 'bool',
                                     'environmentConfigRead': 'bool',
                                     'fileWriteStreaming': 'bool',
                                     'fsWatchMissing': 'bool',
                                     'httpHeaderEnvVars': 'bool',
                                     'linuxApprovedRootWritePreservesRestrictions': 'bool',
                                     'linuxRootWritePreservesDevices': 'bool',
                                     'networkProxyLaunch': 'bool',
                                     'networkProxyReviewDomains': 'bool',
                                     'sandboxedFileStreaming': 'bool',
                                     'shellSnapshotV2': 'bool',
                                     'windowsMxc': 'bool'},
                    'cwd': 'str',
                    'executorVersion': 'str',
                    'platformOs': 'str',
                    'prependPathDirs': 'list',
                    'providerId': 'str',
                    'shell': 'dict',
                    'tempDir': 'str',
                    'temporaryDirectories': 'list',
                    'userHomeDir': 'str'}},
    'environment/status': {'result': {'status': 'ready'}},
    'environment/status params array':
        {'code': -32602, 'message': 'invalid type: sequence, expected unit'},
    'environment/status params null': {'result': {'status': 'ready'}},
    'environment/status params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected unit'},
    'flow final read':
        {'closed': True, 'exitCode': 3, 'exited': True, 'failure': None, 'sandboxDenied': False},
    'flow output': {'stderr': 'err\n', 'stdout': 'out\ngot in\n'},
    'flow signal after exit': {'result': {}},
    'flow start': {'result': {'processId': 'flow', 'sandboxType': 'none'}},
    'flow start same id': {'code': -32600, 'message': 'process flow already exists'},
    'flow terminate after exit': {'result': {'running': False}},
    'flow write': {'result': {'status': 'accepted'}},
    'flow write after exit': {'result': {'status': 'accepted'}},
    'flow write repeated id': {'result': {'status': 'accepted'}},
    'getMetadata extra field':
        {'result': {'createdAtMs': '$N',
                    'isDirectory': True,
                    'isFile': False,
                    'isSymlink': False,
                    'modifiedAtMs': '$N',
                    'size': 4096}},
    'getMetadata file':
        {'result': {'createdAtMs': '$N',
                    'isDirectory': False,
                    'isFile': True,
                    'isSymlink': False,
                    'modifiedAtMs': '$N',
                    'size': 6}},
    'getMetadata missing': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'getMetadata no path': {'code': -32602, 'message': 'missing field `path`'},
    'getMetadata params array':
        {'code': -32602,
         'message': 'invalid length 2, expected struct WireFsGetMetadataParams with 3 elements'},
    'getMetadata params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsGetMetadataParams'},
    'getMetadata params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsGetMetadataParams'},
    'getMetadata params string':
        {'code': -32602,
         'message': 'invalid type: string "x", expected struct WireFsGetMetadataParams'},
    'getMetadata params {}': {'code': -32602, 'message': 'missing field `path`'},
    'getMetadata path null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'getMetadata path wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'getMetadata relative': {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'getMetadata symlink':
        {'result': {'createdAtMs': '$N',
                    'isDirectory': False,
                    'isFile': True,
                    'isSymlink': True,
                    'modifiedAtMs': '$N',
                    'size': 6}},
    'http bad base64': {'code': -32602, 'message': 'Invalid symbol 33, offset 0.'},
    'http bad base64 no id': {'code': -32602, 'message': 'Invalid symbol 33, offset 0.'},
    'http bad url':
        {'code': -32602, 'message': 'http/request url is invalid: relative URL without a base'},
    'http extra field':
        {'code': -32602, 'message': 'http/request only supports http and https URLs, got bogus'},
    'http headers object': {'code': -32602, 'message': 'invalid type: map, expected a sequence'},
    'http method null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'http method wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'http no method': {'code': -32602, 'message': 'missing field `method`'},
    'http no requestId': {'code': -32602, 'message': 'missing field `requestId`'},
    'http no timeoutMs':
        {'code': -32602, 'message': 'http/request only supports http and https URLs, got bogus'},
    'http no url': {'code': -32602, 'message': 'missing field `url`'},
    'http params array':
        {'code': -32602, 'message': 'invalid type: string "q", expected a sequence'},
    'http params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct HttpRequestParams'},
    'http params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct HttpRequestParams'},
    'http params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct HttpRequestParams'},
    'http params {}': {'code': -32602, 'message': 'missing field `method`'},
    'http requestId null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'http requestId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'http timeoutMs 1e30': {'code': -32602, 'message': 'invalid number'},
    'http timeoutMs 2^64': {'code': -32602, 'message': 'invalid number'},
    'http timeoutMs float': {'code': -32602, 'message': 'invalid number'},
    'http timeoutMs negative': {'code': -32602, 'message': 'invalid number'},
    'http timeoutMs null':
        {'code': -32602, 'message': 'http/request only supports http and https URLs, got bogus'},
    'http timeoutMs wrong type':
        {'code': -32602, 'message': 'invalid type: string "1000", expected u64'},
    'http url null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'http url wrong type': {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'init clientName null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'init clientName number':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'init extra':
        {'result': {'environmentInfo': {'capabilities': {'capabilityDiscoverySandbox': 'bool',
                                                         'capabilityDiscoveryV2': 'bool',
                                                         'credentialMasking': 'bool',
                                                         'credentialMaskingCustomProviders': 'bool',
                                                         'environmentConfigRead': 'bool',
                                                         'fileWriteStreaming': 'bool',
                                                         'fsWatchMissing': 'bool',
                                                         'httpHeaderEnvVars': 'bool',
                                                         'linuxApprovedRootWritePreservesRestrictions': 'bool',
                                                         'linuxRootWritePreservesDevices': 'bool',
                                                         'networkProxyLaunch': 'bool',
                                                         'networkProxyReviewDomains': 'bool',
                                                         'sandboxedFileStreaming': 'bool',
                                                         'shellSnapshotV2': 'bool',
                                                         'windowsMxc': 'bool'},
                                        'cwd': 'str',
                                        'executorVersion': 'str',
                                        'platformOs': 'str',
                                        'prependPathDirs': 'list',
                                        'providerId': 'str',
                                        'shell': 'dict',
                                        'tempDir': 'str',
                                        'temporaryDirectories': 'list',
                                        'userHomeDir': 'str'},
                    'sessionId': '$UUID'}},
    'init no clientName': {'code': -32602, 'message': 'missing field `clientName`'},
    'init ok':
        {'result': {'environmentInfo': {'capabilities': {'capabilityDiscoverySandbox': 'bool',
                                                         'capabilityDiscoveryV2': 'bool',
                                                         'credentialMasking': 'bool',
                                                         'credentialMaskingCustomProviders': 'bool',
                                                         'environmentConfigRead': 'bool',
                                                         'fileWriteStreaming': 'bool',
                                                         'fsWatchMissing': 'bool',
                                                         'httpHeaderEnvVars': 'bool',
                                                         'linuxApprovedRootWritePreservesRestrictions': 'bool',
                                                         'linuxRootWritePreservesDevices': 'bool',
                                                         'networkProxyLaunch': 'bool',
                                                         'networkProxyReviewDomains': 'bool',
                                                         'sandboxedFileStreaming': 'bool',
                                                         'shellSnapshotV2': 'bool',
                                                         'windowsMxc': 'bool'},
                                        'cwd': 'str',
                                        'executorVersion': 'str',
                                        'platformOs': 'str',
                                        'prependPathDirs': 'list',
                                        'providerId': 'str',
                                        'shell': 'dict',
                                        'tempDir': 'str',
                                        'temporaryDirectories': 'list',
                                        'userHomeDir': 'str'},
                    'sessionId': '$UUID'}},
    'init params array':
        {'result': {'environmentInfo': {'capabilities': {'capabilityDiscoverySandbox': 'bool',
                                                         'capabilityDiscoveryV2': 'bool',
                                                         'credentialMasking': 'bool',
                                                         'credentialMaskingCustomProviders': 'bool',
                                                         'environmentConfigRead': 'bool',
                                                         'fileWriteStreaming': 'bool',
                                                         'fsWatchMissing': 'bool',
                                                         'httpHeaderEnvVars': 'bool',
                                                         'linuxApprovedRootWritePreservesRestrictions': 'bool',
                                                         'linuxRootWritePreservesDevices': 'bool',
                                                         'networkProxyLaunch': 'bool',
                                                         'networkProxyReviewDomains': 'bool',
                                                         'sandboxedFileStreaming': 'bool',
                                                         'shellSnapshotV2': 'bool',
                                                         'windowsMxc': 'bool'},
                                        'cwd': 'str',
                                        'executorVersion': 'str',
                                        'platformOs': 'str',
                                        'prependPathDirs': 'list',
                                        'providerId': 'str',
                                        'shell': 'dict',
                                        'tempDir': 'str',
                                        'temporaryDirectories': 'list',
                                        'userHomeDir': 'str'},
                    'sessionId': '$UUID'}},
    'init params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct InitializeParams'},
    'init params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct InitializeParams'},
    'init params string':
        {'code': -32602, 'message': 'invalid type: string "c", expected struct InitializeParams'},
    'init resume null':
        {'result': {'environmentInfo': {'capabilities': {'capabilityDiscoverySandbox': 'bool',
                                                         'capabilityDiscoveryV2': 'bool',
                                                         'credentialMasking': 'bool',
                                                         'credentialMaskingCustomProviders': 'bool',
                                                         'environmentConfigRead': 'bool',
                                                         'fileWriteStreaming': 'bool',
                                                         'fsWatchMissing': 'bool',
                                                         'httpHeaderEnvVars': 'bool',
                                                         'linuxApprovedRootWritePreservesRestrictions': 'bool',
                                                         'linuxRootWritePreservesDevices': 'bool',
                                                         'networkProxyLaunch': 'bool',
                                                         'networkProxyReviewDomains': 'bool',
                                                         'sandboxedFileStreaming': 'bool',
                                                         'shellSnapshotV2': 'bool',
                                                         'windowsMxc': 'bool'},
                                        'cwd': 'str',
                                        'executorVersion': 'str',
                                        'platformOs': 'str',
                                        'prependPathDirs': 'list',
                                        'providerId': 'str',
                                        'shell': 'dict',
                                        'tempDir': 'str',
                                        'temporaryDirectories': 'list',
                                        'userHomeDir': 'str'},
                    'sessionId': '$UUID'}},
    'init resume number': {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'init resume unknown': {'code': -32600, 'message': 'unknown session id nope'},
    'open directory': {'code': -32600, 'message': 'path `$T/d` is not a file'},
    'open dup': {'code': -32600, 'message': 'file handle `h1` already exists'},
    'open extra field': {'code': -32600, 'message': 'file handle `h1` already exists'},
    'open handleId null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'open handleId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'open id 33': {'code': -32600, 'message': 'file handle ID must not exceed 32 bytes'},
    'open id empty': {'result': {'handleId': ''}},
    'open missing': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'open mode bogus':
        {'code': -32602, 'message': 'unknown variant `bogus`, expected `read` or `replace`'},
    'open mode map':
        {'code': -32602, 'message': 'invalid value: map, expected map with a single key'},
    'open mode null': {'code': -32602, 'message': 'invalid type: null, expected string or map'},
    'open mode replace num': {'code': -32602, 'message': 'invalid type: number, expected unit'},
    'open mode wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected string or map'},
    'open no handleId': {'code': -32602, 'message': 'missing field `handleId`'},
    'open no mode': {'result': {'handleId': 'h1'}},
    'open no path': {'code': -32602, 'message': 'missing field `path`'},
    'open params array':
        {'code': -32602,
         'message': 'invalid length 3, expected struct WireFsOpenParams with 4 elements'},
    'open params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsOpenParams'},
    'open params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsOpenParams'},
    'open params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct WireFsOpenParams'},
    'open params {}': {'code': -32602, 'message': 'missing field `handleId`'},
    'open path null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'open path wrong type': {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'open relative': {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'open replace': {'result': {'handleId': 'w1'}},
    'open replace map': {'result': {'handleId': 'w2'}},
    'read afterSeq 1e30': {'code': -32602, 'message': 'invalid number'},
    'read afterSeq 2^64': {'code': -32602, 'message': 'invalid number'},
    'read afterSeq float': {'code': -32602, 'message': 'invalid number'},
    'read afterSeq negative': {'code': -32602, 'message': 'invalid number'},
    'read afterSeq null': {'code': -32600, 'message': 'unknown process id nope'},
    'read afterSeq wrong type':
        {'code': -32602, 'message': 'invalid type: string "0", expected u64'},
    'read extra field': {'code': -32600, 'message': 'unknown process id nope'},
    'read maxBytes 1e30': {'code': -32602, 'message': 'invalid number'},
    'read maxBytes 2^64': {'code': -32602, 'message': 'invalid number'},
    'read maxBytes float': {'code': -32602, 'message': 'invalid number'},
    'read maxBytes negative': {'code': -32602, 'message': 'invalid number'},
    'read maxBytes null': {'code': -32600, 'message': 'unknown process id nope'},
    'read maxBytes wrong type':
        {'code': -32602, 'message': 'invalid type: string "10", expected usize'},
    'read no afterSeq': {'code': -32600, 'message': 'unknown process id nope'},
    'read no maxBytes': {'code': -32600, 'message': 'unknown process id nope'},
    'read no processId': {'code': -32602, 'message': 'missing field `processId`'},
    'read no waitMs': {'code': -32600, 'message': 'unknown process id nope'},
    'read params array': {'code': -32600, 'message': 'unknown process id nope'},
    'read params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct ReadParams'},
    'read params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct ReadParams'},
    'read params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct ReadParams'},
    'read params {}': {'code': -32602, 'message': 'missing field `processId`'},
    'read processId null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'read processId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'read waitMs 1e30': {'code': -32602, 'message': 'invalid number'},
    'read waitMs 2^64': {'code': -32602, 'message': 'invalid number'},
    'read waitMs float': {'code': -32602, 'message': 'invalid number'},
    'read waitMs negative': {'code': -32602, 'message': 'invalid number'},
    'read waitMs null': {'code': -32600, 'message': 'unknown process id nope'},
    'read waitMs wrong type': {'code': -32602, 'message': 'invalid type: string "0", expected u64'},
    'readBlock eof': {'code': -32004, 'message': 'unknown file handle `h1`'},
    'readBlock extra field': {'result': {'chunk': 'aGVs', 'eof': False}},
    'readBlock handleId null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'readBlock handleId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'readBlock id 33': {'code': -32600, 'message': 'file handle ID must not exceed 32 bytes'},
    'readBlock len 0':
        {'code': -32600, 'message': 'file read block length must be between 1 and 1048576'},
    'readBlock len 1e30': {'code': -32602, 'message': 'invalid number'},
    'readBlock len 2^64': {'code': -32602, 'message': 'invalid number'},
    'readBlock len big':
        {'code': -32600, 'message': 'file read block length must be between 1 and 1048576'},
    'readBlock len float': {'code': -32602, 'message': 'invalid number'},
    'readBlock len negative': {'code': -32602, 'message': 'invalid number'},
    'readBlock len null': {'code': -32602, 'message': 'invalid type: null, expected usize'},
    'readBlock len wrong type':
        {'code': -32602, 'message': 'invalid type: string "3", expected usize'},
    'readBlock no handleId': {'code': -32602, 'message': 'missing field `handleId`'},
    'readBlock no len': {'code': -32602, 'message': 'missing field `len`'},
    'readBlock no offset': {'code': -32602, 'message': 'missing field `offset`'},
    'readBlock offset 1e30': {'code': -32602, 'message': 'invalid number'},
    'readBlock offset 2^63': {'code': -32600, 'message': 'Invalid argument (os error 22)'},
    'readBlock offset 2^64': {'code': -32602, 'message': 'invalid number'},
    'readBlock offset float': {'code': -32602, 'message': 'invalid number'},
    'readBlock offset negative': {'code': -32602, 'message': 'invalid number'},
    'readBlock offset null': {'code': -32602, 'message': 'invalid type: null, expected u64'},
    'readBlock offset wrong type':
        {'code': -32602, 'message': 'invalid type: string "0", expected u64'},
    'readBlock params array': {'result': {'chunk': 'aGVs', 'eof': False}},
    'readBlock params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct FsReadBlockParams'},
    'readBlock params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct FsReadBlockParams'},
    'readBlock params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct FsReadBlockParams'},
    'readBlock params {}': {'code': -32602, 'message': 'missing field `handleId`'},
    'readBlock unknown': {'code': -32004, 'message': 'unknown file handle `zz`'},
    'readBlock write handle': {'code': -32603, 'message': 'Bad file descriptor (os error 9)'},
    'readDirectory extra field':
        {'result': {'entries': [{'fileName': 'sub', 'isDirectory': True, 'isFile': False},
                                {'fileName': 'a', 'isDirectory': False, 'isFile': True}]}},
    'readDirectory file': {'code': -32603, 'message': 'Not a directory (os error 20)'},
    'readDirectory missing': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'readDirectory no path': {'code': -32602, 'message': 'missing field `path`'},
    'readDirectory params array':
        {'code': -32602,
         'message': 'invalid length 1, expected struct WireFsReadDirectoryParams with 2 elements'},
    'readDirectory params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsReadDirectoryParams'},
    'readDirectory params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsReadDirectoryParams'},
    'readDirectory params string':
        {'code': -32602,
         'message': 'invalid type: string "x", expected struct WireFsReadDirectoryParams'},
    'readDirectory params {}': {'code': -32602, 'message': 'missing field `path`'},
    'readDirectory path null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'readDirectory path wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'readFile absolute path':
        {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'readFile after writeBlock': {'result': {'dataBase64': 'YWI='}},
    'readFile directory': {'code': -32600, 'message': 'path `$T/d` is not a file'},
    'readFile empty': {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'readFile extra field': {'result': {'dataBase64': 'aGVsbG8K'}},
    'readFile file scheme upper': {'result': {'dataBase64': 'aGVsbG8K'}},
    'readFile http uri': {'code': -32602, 'message': 'unsupported path URI scheme `http`'},
    'readFile mailto': {'code': -32602, 'message': 'unsupported path URI scheme `mailto`'},
    'readFile missing file': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'readFile no path': {'code': -32602, 'message': 'missing field `path`'},
    'readFile params array':
        {'code': -32602,
         'message': 'invalid length 2, expected struct WireFsReadFileParams with 3 elements'},
    'readFile params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsReadFileParams'},
    'readFile params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsReadFileParams'},
    'readFile params string':
        {'code': -32602,
         'message': 'invalid type: string "x", expected struct WireFsReadFileParams'},
    'readFile params {}': {'code': -32602, 'message': 'missing field `path`'},
    'readFile path null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'readFile path wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'readFile relative': {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'readFile sandbox array':
        {'code': -32602,
         'message': 'invalid length 0, expected struct WireFileSystemSandboxContext with 10 '
                    'elements'},
    'readFile sandbox desktop null': {'result': {'dataBase64': 'aGVsbG8K'}},
    'readFile sandbox legacy null':
        {'code': -32602, 'message': 'invalid type: null, expected a boolean'},
    'readFile sandbox level':
        {'code': -32602,
         'message': 'unknown variant `x`, expected one of `disabled`, `restricted-token`, '
                    '`elevated`, `mxc`'},
    'readFile sandbox mxc': {'result': {'dataBase64': 'aGVsbG8K'}},
    'readFile sandbox no level': {'code': -32602, 'message': 'missing field `windowsSandboxLevel`'},
    'readFile sandbox null': {'result': {'dataBase64': 'aGVsbG8K'}},
    'readFile sandbox {}': {'code': -32602, 'message': 'missing field `permissions`'},
    'readFile scheme digits': {'code': -32602, 'message': 'unsupported path URI scheme `a1+b`'},
    'remove dir': {'result': {}},
    'remove dir not recursive': {'code': -32603, 'message': 'Directory not empty (os error 39)'},
    'remove extra field': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'remove force null': {'result': {}},
    'remove force wrong type':
        {'code': -32602, 'message': 'invalid type: string "true", expected a boolean'},
    'remove missing force': {'result': {}},
    'remove missing no force':
        {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'remove no force': {'result': {}},
    'remove no path': {'code': -32602, 'message': 'missing field `path`'},
    'remove no recursive': {'result': {}},
    'remove params array':
        {'code': -32602,
         'message': 'invalid length 4, expected struct WireFsRemoveParams with 5 elements'},
    'remove params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsRemoveParams'},
    'remove params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsRemoveParams'},
    'remove params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct WireFsRemoveParams'},
    'remove params {}': {'code': -32602, 'message': 'missing field `path`'},
    'remove path null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'remove path wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'remove recursive null': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'remove recursive wrong type':
        {'code': -32602, 'message': 'invalid type: string "true", expected a boolean'},
    'remove relative': {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'sandboxed bad entry':
        {'code': -32602,
         'message': 'invalid type: integer `1`, expected internally tagged enum ExecFileSystemPath'},
    'sandboxed copy into': {'result': {}},
    'sandboxed copy out': {'code': -32603, 'message': 'Read-only file system (os error 30)'},
    'sandboxed createDirectory outside':
        {'code': -32603, 'message': 'Read-only file system (os error 30)'},
    'sandboxed getMetadata':
        {'result': {'createdAtMs': '$N',
                    'isDirectory': False,
                    'isFile': True,
                    'isSymlink': False,
                    'modifiedAtMs': '$N',
                    'size': 1}},
    'sandboxed permissions type':
        {'code': -32602,
         'message': 'unknown variant `bogus`, expected one of `managed`, `disabled`, `external`'},
    'sandboxed readDirectory':
        {'result': {'entries': [{'fileName': 'sub', 'isDirectory': True, 'isFile': False},
                                {'fileName': 'a', 'isDirectory': False, 'isFile': True},
                                {'fileName': 'sbw', 'isDirectory': False, 'isFile': True}]}},
    'sandboxed readFile': {'result': {'dataBase64': 'aGVsbG8K'}},
    'sandboxed remove outside': {'code': -32603, 'message': 'Read-only file system (os error 30)'},
    'sandboxed writeFile inside': {'result': {}},
    'sandboxed writeFile outside':
        {'code': -32603, 'message': 'Read-only file system (os error 30)'},
    'signal bogus': {'code': -32602, 'message': 'unknown variant `kill`, expected `interrupt`'},
    'signal bool':
        {'code': -32602, 'message': 'invalid type: boolean `true`, expected string or map'},
    'signal extra field': {'result': {}},
    'signal map': {'result': {}},
    'signal no processId': {'code': -32602, 'message': 'missing field `processId`'},
    'signal no signal': {'code': -32602, 'message': 'missing field `signal`'},
    'signal params array': {'result': {}},
    'signal params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct SignalParams'},
    'signal params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct SignalParams'},
    'signal params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct SignalParams'},
    'signal params {}': {'code': -32602, 'message': 'missing field `processId`'},
    'signal processId null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'signal processId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'signal signal null': {'code': -32602, 'message': 'invalid type: null, expected string or map'},
    'signal signal wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected string or map'},
    'start argv empty': {'code': -32602, 'message': 'argv must not be empty'},
    'start argv null': {'code': -32602, 'message': 'invalid type: null, expected a sequence'},
    'start argv number': {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'start argv wrong type': {'code': -32602, 'message': 'invalid type: map, expected a sequence'},
    'start cwd http': {'code': -32602, 'message': 'unsupported path URI scheme `http`'},
    'start cwd missing': {'code': -32603, 'message': 'No such file or directory (os error 2)'},
    'start cwd null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'start cwd relative': {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
    'start cwd wrong type': {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'start env bad name': {'result': {'processId': 'p2', 'sandboxType': 'none'}},
    'start env null': {'code': -32602, 'message': 'invalid type: null, expected a map'},
    'start env number': {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'start env wrong type': {'code': -32602, 'message': 'invalid type: sequence, expected a map'},
    'start envPolicy exclude string':
        {'code': -32602, 'message': 'invalid type: string "X", expected a sequence'},
    'start envPolicy inherit':
        {'code': -32602, 'message': 'unknown variant `most`, expected one of `core`, `all`, `none`'},
    'start envPolicy no excludes':
        {'code': -32602, 'message': 'missing field `ignoreDefaultExcludes`'},
    'start extra field': {'result': {'processId': 'p1', 'sandboxType': 'none'}},
    'start id long':
        {'result': {'processId': 'ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp',
                    'sandboxType': 'none'}},
    'start no argv': {'code': -32602, 'message': 'missing field `argv`'},
    'start no cwd': {'code': -32602, 'message': 'missing field `cwd`'},
    'start no env': {'code': -32602, 'message': 'missing field `env`'},
    'start no tty': {'code': -32602, 'message': 'missing field `tty`'},
    'start not found': {'code': -32603, 'message': 'No such file or directory (os error 2)'},
    'start params array':
        {'code': -32602,
         'message': 'invalid character: expected an optional prefix of `urn:uuid:` followed by '
                    '[0-9a-fA-F-], found `/` at 1'},
    'start params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireExecParams'},
    'start params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireExecParams'},
    'start params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct WireExecParams'},
    'start params {}': {'code': -32602, 'message': 'missing field `processId`'},
    'start pipeStdin null': {'code': -32602, 'message': 'invalid type: null, expected a boolean'},
    'start sandbox string':
        {'code': -32602,
         'message': 'invalid type: string "x", expected struct WireFileSystemSandboxContext'},
    'start tty null': {'code': -32602, 'message': 'invalid type: null, expected a boolean'},
    'start tty wrong type':
        {'code': -32602, 'message': 'invalid type: string "true", expected a boolean'},
    'terminate extra field': {'result': {'running': False}},
    'terminate no processId': {'code': -32602, 'message': 'missing field `processId`'},
    'terminate params array': {'result': {'running': False}},
    'terminate params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct TerminateParams'},
    'terminate params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct TerminateParams'},
    'terminate params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct TerminateParams'},
    'terminate params {}': {'code': -32602, 'message': 'missing field `processId`'},
    'terminate processId null':
        {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'terminate processId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'unknown method':
        {'code': -32601, 'message': 'exec-server stub does not implement `fs/bogus` yet'},
    'unknown method 2':
        {'code': -32601, 'message': 'exec-server stub does not implement `bogus` yet'},
    'walk extra field':
        {'result': {'entries': [{'kind': 'directory', 'path': 'file://$T/d'},
                                {'kind': 'file', 'path': 'file://$T/f'},
                                {'kind': 'file', 'path': 'file://$T/d/a'},
                                {'kind': 'directory', 'path': 'file://$T/d/sub'},
                                {'kind': 'file', 'path': 'file://$T/d/sub/b'}],
                    'errors': [],
                    'truncated': False}},
    'walk file root': {'result': {'entries': [], 'errors': [], 'truncated': False}},
    'walk follow string':
        {'code': -32602, 'message': 'invalid type: string "yes", expected a boolean'},
    'walk missing root': {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'walk no options': {'code': -32602, 'message': 'missing field `options`'},
    'walk no path': {'code': -32602, 'message': 'missing field `path`'},
    'walk options extra':
        {'result': {'entries': [{'kind': 'directory', 'path': 'file://$T/d'},
                                {'kind': 'file', 'path': 'file://$T/f'},
                                {'kind': 'file', 'path': 'file://$T/d/a'},
                                {'kind': 'directory', 'path': 'file://$T/d/sub'},
                                {'kind': 'file', 'path': 'file://$T/d/sub/b'}],
                    'errors': [],
                    'truncated': False}},
    'walk options null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WalkOptions'},
    'walk options wrong type':
        {'code': -32602, 'message': 'invalid length 0, expected struct WalkOptions with 5 elements'},
    'walk options.maxDepth 0':
        {'result': {'entries': [{'kind': 'directory', 'path': 'file://$T/d'},
                                {'kind': 'file', 'path': 'file://$T/f'}],
                    'errors': [],
                    'truncated': False}},
    'walk options.maxDepth float': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxDepth huge': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxDepth missing': {'code': -32602, 'message': 'missing field `maxDepth`'},
    'walk options.maxDepth negative': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxDepth null': {'code': -32602, 'message': 'invalid type: null, expected usize'},
    'walk options.maxDepth string':
        {'code': -32602, 'message': 'invalid type: string "1", expected usize'},
    'walk options.maxDepth too big':
        {'code': -32600,
         'message': 'filesystem walk limits exceed maximums: depth=64, directories=10000, '
                    'entries=50000'},
    'walk options.maxDirectories 0':
        {'code': -32600, 'message': 'filesystem walk limits must be greater than zero'},
    'walk options.maxDirectories float': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxDirectories huge': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxDirectories missing':
        {'code': -32602, 'message': 'missing field `maxDirectories`'},
    'walk options.maxDirectories negative': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxDirectories null':
        {'code': -32602, 'message': 'invalid type: null, expected usize'},
    'walk options.maxDirectories string':
        {'code': -32602, 'message': 'invalid type: string "1", expected usize'},
    'walk options.maxDirectories too big':
        {'code': -32600,
         'message': 'filesystem walk limits exceed maximums: depth=64, directories=10000, '
                    'entries=50000'},
    'walk options.maxEntries 0':
        {'code': -32600, 'message': 'filesystem walk limits must be greater than zero'},
    'walk options.maxEntries float': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxEntries huge': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxEntries missing': {'code': -32602, 'message': 'missing field `maxEntries`'},
    'walk options.maxEntries negative': {'code': -32602, 'message': 'invalid number'},
    'walk options.maxEntries null':
        {'code': -32602, 'message': 'invalid type: null, expected usize'},
    'walk options.maxEntries string':
        {'code': -32602, 'message': 'invalid type: string "1", expected usize'},
    'walk options.maxEntries too big':
        {'code': -32600,
         'message': 'filesystem walk limits exceed maximums: depth=64, directories=10000, '
                    'entries=50000'},
    'walk params array':
        {'code': -32602,
         'message': 'invalid length 2, expected struct WireFsWalkParams with 3 elements'},
    'walk params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsWalkParams'},
    'walk params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsWalkParams'},
    'walk params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct WireFsWalkParams'},
    'walk params {}': {'code': -32602, 'message': 'missing field `path`'},
    'walk path null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'walk path wrong type': {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'walk prune':
        {'result': {'entries': [{'kind': 'directory', 'path': 'file://$T/d'},
                                {'kind': 'file', 'path': 'file://$T/f'},
                                {'kind': 'file', 'path': 'file://$T/d/a'},
                                {'kind': 'directory', 'path': 'file://$T/d/sub'},
                                {'kind': 'file', 'path': 'file://$T/d/sub/b'}],
                    'errors': [],
                    'truncated': False}},
    'walk prune null': {'code': -32602, 'message': 'invalid type: null, expected a boolean'},
    'write bad base64': {'code': -32602, 'message': 'Invalid symbol 33, offset 0.'},
    'write chunk null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'write chunk wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'write empty id': {'code': -32602, 'message': 'writeId must not be empty'},
    'write extra field': {'result': {'status': 'unknownProcess'}},
    'write no chunk': {'code': -32602, 'message': 'missing field `chunk`'},
    'write no processId': {'code': -32602, 'message': 'missing field `processId`'},
    'write no writeId': {'code': -32602, 'message': 'missing field `writeId`'},
    'write params array': {'result': {'status': 'unknownProcess'}},
    'write params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WriteParams'},
    'write params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WriteParams'},
    'write params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct WriteParams'},
    'write params {}': {'code': -32602, 'message': 'missing field `processId`'},
    'write processId null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'write processId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'write writeId null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'write writeId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'writeBlock bad base64': {'code': -32602, 'message': 'Invalid symbol 33, offset 0.'},
    'writeBlock chunk null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'writeBlock chunk wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'writeBlock empty':
        {'code': -32600, 'message': 'file write block length must be between 1 and 1048576'},
    'writeBlock extra field': {'result': {}},
    'writeBlock handleId null':
        {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'writeBlock handleId wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'writeBlock id 33': {'code': -32600, 'message': 'file handle ID must not exceed 32 bytes'},
    'writeBlock no chunk': {'code': -32602, 'message': 'missing field `chunk`'},
    'writeBlock no handleId': {'code': -32602, 'message': 'missing field `handleId`'},
    'writeBlock no offset': {'code': -32602, 'message': 'missing field `offset`'},
    'writeBlock offset 1e30': {'code': -32602, 'message': 'invalid number'},
    'writeBlock offset 2^64': {'code': -32602, 'message': 'invalid number'},
    'writeBlock offset float': {'code': -32602, 'message': 'invalid number'},
    'writeBlock offset negative': {'code': -32602, 'message': 'invalid number'},
    'writeBlock offset null': {'code': -32602, 'message': 'invalid type: null, expected u64'},
    'writeBlock offset wrong type':
        {'code': -32602, 'message': 'invalid type: string "0", expected u64'},
    'writeBlock params array': {'result': {}},
    'writeBlock params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct FsWriteBlockParams'},
    'writeBlock params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct FsWriteBlockParams'},
    'writeBlock params string':
        {'code': -32602, 'message': 'invalid type: string "x", expected struct FsWriteBlockParams'},
    'writeBlock params {}': {'code': -32602, 'message': 'missing field `handleId`'},
    'writeBlock past 2^63':
        {'code': -32600, 'message': 'file write range exceeds the signed 64-bit file offset limit'},
    'writeBlock read handle': {'code': -32004, 'message': 'unknown file handle `h1`'},
    'writeBlock unknown': {'code': -32004, 'message': 'unknown file handle `zz`'},
    'writeFile bad base64':
        {'code': -32600,
         'message': 'fs/writeFile requires valid base64 dataBase64: Invalid symbol 33, offset 0.'},
    'writeFile base64 length':
        {'code': -32600,
         'message': 'fs/writeFile requires valid base64 dataBase64: Invalid input length: 5'},
    'writeFile base64 no padding':
        {'code': -32600,
         'message': 'fs/writeFile requires valid base64 dataBase64: Invalid padding'},
    'writeFile dataBase64 null':
        {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'writeFile dataBase64 wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'writeFile empty data': {'result': {}},
    'writeFile extra field': {'result': {}},
    'writeFile missing parent':
        {'code': -32004, 'message': 'No such file or directory (os error 2)'},
    'writeFile no dataBase64': {'code': -32602, 'message': 'missing field `dataBase64`'},
    'writeFile no path': {'code': -32602, 'message': 'missing field `path`'},
    'writeFile onto dir': {'code': -32603, 'message': 'Is a directory (os error 21)'},
    'writeFile params array':
        {'code': -32602,
         'message': 'invalid length 3, expected struct WireFsWriteFileParams with 4 elements'},
    'writeFile params missing':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsWriteFileParams'},
    'writeFile params null':
        {'code': -32602, 'message': 'invalid type: null, expected struct WireFsWriteFileParams'},
    'writeFile params string':
        {'code': -32602,
         'message': 'invalid type: string "x", expected struct WireFsWriteFileParams'},
    'writeFile params {}': {'code': -32602, 'message': 'missing field `path`'},
    'writeFile path null': {'code': -32602, 'message': 'invalid type: null, expected a string'},
    'writeFile path wrong type':
        {'code': -32602, 'message': 'invalid type: number, expected a string'},
    'writeFile relative': {'code': -32602, 'message': 'invalid URI: relative URL without a base'},
}

POS = ("params by position (a JSON array) are refused; Codex reads an array as "
       "the struct's fields in declaration order, members the protocol does not "
       "name included")
SPAWN = "the spawn failure names its stage and path (cordon spawns in-process)"
PROFILE = "a bad permission profile is described by cordon's policy parser, with its path"
# Deliberate differences: cordon's answer and why (cordon-protocol(7)).
KEPT = {
    'canonicalize params array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireFsCanonicalizeParams'},
         POS),
    'close params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct FsCloseParams'},
         POS),
    'copy params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct WireFsCopyParams'},
         POS),
    'createDirectory params array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireFsCreateDirectoryParams'},
         POS),
    'discover params array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireCapabilityRootsDiscoverParams'},
         POS),
    'getMetadata params array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireFsGetMetadataParams'},
         POS),
    'http params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct HttpRequestParams'},
         POS),
    'init params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct InitializeParams'},
         POS),
    'open params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct WireFsOpenParams'},
         POS),
    'read params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct ReadParams'},
         POS),
    'readBlock params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct FsReadBlockParams'},
         POS),
    'readDirectory params array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireFsReadDirectoryParams'},
         POS),
    'readFile params array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireFsReadFileParams'},
         POS),
    'readFile sandbox array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireFileSystemSandboxContext'},
         POS),
    'remove params array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireFsRemoveParams'},
         POS),
    'sandboxed bad entry':
        ({'code': -32602,
          'message': 'invalid sandbox permissions: missing required key "access" (at '
                     'sandbox.permissions.file_system.entries[0].access)'},
         PROFILE),
    'sandboxed permissions type':
        ({'code': -32602,
          'message': 'invalid sandbox permissions: unknown profile type "bogus" (expected '
                     'managed, disabled or external) (at sandbox.permissions.type)'},
         PROFILE),
    'signal params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct SignalParams'},
         POS),
    'start cwd missing':
        ({'code': -32603, 'message': 'chdir: $T/nope: No such file or directory'},
         SPAWN),
    'start env bad name':
        ({'code': -32602, 'message': 'invalid environment variable name "A=B" in `env`'},
         "an env name with '=' is refused: execve would set another variable"),
    'start id long':
        ({'code': -32600, 'message': 'processId must not exceed 1024 bytes (it has 1025)'},
         'processId is at most 1024 bytes (a limit on client input)'),
    'start not found':
        ({'code': -32603, 'message': '/nonexistent: command not found'},
         SPAWN),
    'start params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct WireExecParams'},
         POS),
    'terminate params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct TerminateParams'},
         POS),
    'walk options wrong type':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct WalkOptions'},
         POS),
    'walk params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct WireFsWalkParams'},
         POS),
    'write params array':
        ({'code': -32602, 'message': 'invalid type: sequence, expected struct WriteParams'},
         POS),
    'writeFile params array':
        ({'code': -32602,
          'message': 'invalid type: sequence, expected struct WireFsWriteFileParams'},
         POS),
}

try:
    s = Server(args=ARGS)
    t.guard("[stdio]", sweep, s, "stdio")
    s.stop()
    inits(lambda: Server(args=ARGS), "stdio")
    ns = NetServer("ws", args=ARGS)
    if ns.ready:
        c = ns.connect()
        t.guard("[ws]", sweep, c, "ws")
        c.drop()
        inits(ns.connect, "ws")
    else:
        t.not_ok("[ws] server listening", ns.stderr_text())
    ns.stop()
finally:
    shutil.rmtree(T, ignore_errors=True)
    if RECORD:
        rec = {}
        for k, v in seen.items():
            tag, name = k.split(":", 1)
            if tag == "stdio" or seen.get("stdio:" + name) != v:
                rec[k if tag != "stdio" else name] = v
        with open(RECORD, "w") as fh:
            json.dump(rec, fh, indent=1, sort_keys=True)
t.done()
