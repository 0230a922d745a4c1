#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: messages whose "id" is no RequestId (neither a string nor an
# integer that fits i64), whose "method" is not a string, or that are not
# objects. The released Codex exec-server (0.169.0) answers each with id -1,
# -32600 and its decoder's exact words, and carries on; cordon used to take a
# request with a bad id for a notification and end the stream. Each detail
# below was read off the released binary on stdio and WebSocket. TAP; stdio,
# WebSocket and unix socket, both event loops.

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import LOOPS, Server, Tap, cordon_usable, err_code, err_msg  # noqa: E402
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

NOMATCH = "data did not match any variant of untagged enum RequestId"
U128 = "invalid type: integer `%s` as u128, expected any value"
I128 = "invalid type: integer `%s` as i128, expected any value"

# (raw message, the released binary's detail after the transport prefix)
CASES = [
    ('{"id":1.5,"method":"foo","params":{}}', NOMATCH),
    ('{"id":null,"method":"foo","params":{}}', NOMATCH),
    ('{"id":true,"method":"foo","params":{}}', NOMATCH),
    ('{"id":{},"method":"foo","params":{}}', NOMATCH),
    ('{"id":[1],"method":"foo","params":{}}', NOMATCH),
    ('{"id":1.0,"method":"foo"}', NOMATCH),
    ('{"id":1e3,"method":"foo"}', NOMATCH),
    ('{"id":-0.0,"method":"foo"}', NOMATCH),
    ('{"id":1e400,"method":"foo"}', NOMATCH),
    # integers beyond i64: u64 range, u128 range, i128 range, wider
    ('{"id":9223372036854775808,"method":"foo"}', NOMATCH),
    ('{"id":18446744073709551615,"method":"foo"}', NOMATCH),
    ('{"id":18446744073709551616,"method":"foo"}', U128 % "18446744073709551616"),
    ('{"id":340282366920938463463374607431768211455,"method":"foo"}',
     U128 % "340282366920938463463374607431768211455"),
    ('{"id":340282366920938463463374607431768211456,"method":"foo"}', NOMATCH),
    ('{"id":-9223372036854775809,"method":"foo"}', I128 % "-9223372036854775809"),
    ('{"id":-170141183460469231731687303715884105728,"method":"foo"}',
     I128 % "-170141183460469231731687303715884105728"),
    ('{"id":-170141183460469231731687303715884105729,"method":"foo"}', NOMATCH),
    # the id is checked first, whatever else the message holds
    ('{"method":"foo","id":1.5}', NOMATCH),
    ('{"id":1.5}', NOMATCH),
    ('{"id":1.5,"method":5}', NOMATCH),
    ('{"id":null,"method":"initialized","params":{}}', NOMATCH),
    ('{"id":1.5,"result":{}}', NOMATCH),
    ('{"id":null,"result":{}}', NOMATCH),
    ('{"id":1.5,"error":{"code":1,"message":"x"}}', NOMATCH),
    ('{"id":{},"error":{"code":1,"message":"x"}}', NOMATCH),
    ('{"id":1.5,"error":5}', NOMATCH),
    # members are decoded in the order they were sent: the first bad one answers
    ('{"result":1,"id":1.5}', NOMATCH),
    ('{"error":5,"id":1.5}', "invalid type: number, expected struct JSONRPCErrorError"),
    ('{"error":{},"id":1.5}', "missing field `code`"),
    ('{"method":5,"id":1.5}', "invalid type: number, expected a string"),
    ('{"id":1,"result":1,"method":5}', "invalid type: number, expected a string"),
    # a response or error object without an id
    ('{"result":5}', "missing field `id`"),
    ('{"result":null}', "missing field `id`"),
    ('{"error":{"code":1,"message":"x","data":5}}', "missing field `id`"),
    ('{"error":{"code":1,"message":"m"},"result":1}', "missing field `id`"),
    # an error object's error member: {code: i64, data, message: string}
    ('{"error":5}', "invalid type: number, expected struct JSONRPCErrorError"),
    ('{"error":"x"}', 'invalid type: string "x", expected struct JSONRPCErrorError'),
    ('{"error":true}', "invalid type: boolean `true`, expected struct JSONRPCErrorError"),
    ('{"error":{}}', "missing field `code`"),
    ('{"error":{"code":1}}', "missing field `message`"),
    ('{"error":{"message":"m"},"id":1}', "missing field `code`"),
    ('{"error":{"message":5,"code":"x"}}', "invalid type: number, expected a string"),
    ('{"x":5,"error":5}', "invalid type: number, expected struct JSONRPCErrorError"),
    ('{"id":1,"error":{"code":null,"message":"m"}}', "invalid type: null, expected i64"),
    ('{"id":1,"error":{"code":{},"message":"m"}}', "invalid type: map, expected i64"),
    ('{"id":1,"error":{"code":[],"message":"m"}}', "invalid type: sequence, expected i64"),
    ('{"id":1,"error":{"code":"a\\"b\\n\\u00e9\\u0001\\\\\\t","message":"m"}}',
     'invalid type: string "a\\"b\\n\u00e9\\u{1}\\\\\\t", expected i64'),
    ('{"id":1,"error":{"code":-1e2,"message":"m"}}', "invalid number"),
    ('{"id":1,"error":{"code":1.5,"message":"m"}}', "invalid number"),
    ('{"id":1,"error":{"code":9223372036854775808,"message":"x"}}', "invalid number"),
    ('{"id":1,"error":{"code":1,"message":null}}', "invalid type: null, expected a string"),
    ('{"error":[]}', "invalid length 0, expected struct JSONRPCErrorError with 3 elements"),
    ('{"error":[1]}', "invalid length 2, expected struct JSONRPCErrorError with 3 elements"),
    ('{"error":[1,"m"]}', "invalid length 2, expected struct JSONRPCErrorError with 3 elements"),
    ('{"error":[1,"m",null]}', "invalid type: null, expected a string"),
    ('{"error":["x"]}', 'invalid type: string "x", expected i64'),
    ('{"error":[1,"m","s",4]}', "invalid length 4, expected fewer elements in array"),
    ('{"error":[1,"m","s"]}', "missing field `id`"),
    ('{"x":1}', "missing field `error`"),
    ('{"id":"x"}', "missing field `error`"),
    # then the method's type
    ('{"id":1,"method":5}', "invalid type: number, expected a string"),
    ('{"id":1,"method":1.5}', "invalid type: number, expected a string"),
    ('{"id":1,"method":null}', "invalid type: null, expected a string"),
    ('{"id":1,"method":true}', "invalid type: boolean `true`, expected a string"),
    ('{"id":1,"method":false}', "invalid type: boolean `false`, expected a string"),
    ('{"id":1,"method":{}}', "invalid type: map, expected a string"),
    ('{"id":1,"method":[]}', "invalid type: sequence, expected a string"),
    ('{"method":5}', "invalid type: number, expected a string"),
    ('{"id":"x","result":5,"method":4}', "invalid type: number, expected a string"),
    # not an object
    ('[]', "expected a JSON-RPC object"),
    ('5', "expected a JSON-RPC object"),
    ('"s"', "expected a JSON-RPC object"),
    ('null', "expected a JSON-RPC object"),
]

# Valid ids at the edges: answered under their own id (-0 is the integer 0).
GOOD = [
    ('9223372036854775807', 9223372036854775807),
    ('-9223372036854775808', -9223372036854775808),
    ('-0', 0),
    ('""', ""),
]


def prefix(kind, conn):
    if kind == "ws":
        host, port = conn.sock.getsockname()[:2]
        return ("failed to parse websocket JSON-RPC message from exec-server websocket "
                "%s:%d: " % (host, port))
    return "failed to parse JSON-RPC message from exec-server %s: " % (
        "stdio" if kind == "stdio" else "unix socket")


def run(kind, conn, tag):
    conn.handshake()
    pre = prefix(kind, conn)
    for raw, detail in CASES:
        conn.send_raw(raw + "\n")
        r = conn.read_response()
        t.ok(r.get("id") == -1 and err_code(r) == -32600 and err_msg(r) == pre + detail,
             "[%s] %s: id -1, -32600, '...: %s'" % (tag, raw, detail), r)
        # The connection carries on: a plain request is answered.
        r = conn.request("environment/status")
        t.eq(r.get("result"), {"status": "ready"}, "[%s] %s: the session continues" % (tag, raw))
    for raw, want in GOOD:
        conn.send_raw('{"id":%s,"method":"nope","params":{}}\n' % raw)
        r = conn.read_response()
        t.ok(r.get("id") == want and type(r.get("id")) is type(want) and err_code(r) == -32601,
             "[%s] id %s is a RequestId: -32601 under id %r" % (tag, raw, want), r)


for loop in LOOPS:
    s = Server(loop=loop)
    t.guard("[stdio %s]" % loop, run, "stdio", s, "stdio %s" % loop)
    s.stop()
    # Against the released binary (serve-codex-parity.py) there is no unix socket.
    for kind in ("ws",) if os.environ.get("CD_TEST_CONTROL") == "codex" else ("ws", "unix"):
        ns = NetServer(kind, loop=loop)
        if not ns.ready:
            t.not_ok("[%s %s] server listening" % (kind, loop), ns.stderr_text())
            ns.stop()
            continue
        c = ns.connect()
        t.guard("[%s %s]" % (kind, loop), run, kind, c, "%s %s" % (kind, loop))
        c.drop()
        ns.stop()
t.done()
