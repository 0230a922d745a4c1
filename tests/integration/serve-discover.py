#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: capabilityRoots/discoverV1 (exec-server-reference.md 2.12),
# results on a fixture tree as the released Codex 0.169.0 exec-server gives
# them (probed side by side), its limits and messages, the server's hidden
# files never read, and a big scan that does not hold another session up.
# TAP.

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, Hooks, Server, Tap, cordon_usable, err_code, err_msg,  # noqa: E402
                       path_entry, profile, special, uri)
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
HAVE_WS = b"without the WebSocket transport" not in subprocess.run(
    [CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).stderr

work = os.path.realpath(tempfile.mkdtemp(prefix="cordon-discover-"))
os.chmod(work, 0o755)
M = "capabilityRoots/discoverV1"


def put(rel, data, mode="w"):
    p = os.path.join(work, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, mode) as f:
        f.write(data)
    return p


def tf(rel, contents):
    return {"path": uri(os.path.join(work, rel)), "contents": contents}


def root(rel, plugin=None, skills=(), ns=(), warnings=(), error=None):
    return {"id": rel, "path": uri(os.path.join(work, rel)), "plugin": plugin,
            "skills": list(skills), "namespaceManifests": list(ns), "warnings": list(warnings),
            "error": error}


# A plugin with two manifests (the .codex one wins), .mcp.json, two skills (one with
# agents/openai.yaml), a SKILL.md as deep as the walk goes and one deeper, a nested
# plugin, a directory symlink leading out of the root (followed, as the binary does),
# a SKILL.md that is a symlink (not taken, as the binary does).
MAN = '{"name":"p1","version":"1.0"}\n'
put("p1/.codex-plugin/plugin.json", MAN)
put("p1/.claude-plugin/plugin.json", '{"name":"other"}\n')
put("p1/.mcp.json", '{"mcpServers":{}}\n')
put("p1/skills/s1/SKILL.md", "---\nname: s1\n---\nbody \"q\" \u00e9\t\n")
put("p1/skills/s1/agents/openai.yaml", "interface: {}\n")
put("p1/skills/s2/SKILL.md", "s2")
put("p1/deep/a/b/c/d/SKILL.md", "y")
put("p1/deep/a/b/c/d/e/f/SKILL.md", "too deep")
put("p1/sub/.cursor-plugin/plugin.json", '{"name":"n"}')
put("outside/sk/SKILL.md", "outside\n")
os.symlink(os.path.join(work, "outside"), os.path.join(work, "p1/skills/outlink"))
os.makedirs(os.path.join(work, "p1/skills/s3"))
os.symlink(os.path.join(work, "outside/sk/SKILL.md"), os.path.join(work, "p1/skills/s3/SKILL.md"))
# Run against the released binary as the control (serve-codex-parity.py)?
CONTROL = os.environ.get("CD_TEST_CONTROL") == "codex"
# A skill reached through a directory symlink that leaves the root: the binary reads
# it; cordon does not (a sandboxed command may have planted the link to make the
# server read a file it was denied) and says so in a warning.
OUTLINK = {"instructions": tf("p1/skills/outlink/sk/SKILL.md", "outside\n"), "metadata": None}
P1 = root("p1",
          plugin={"manifest": tf("p1/.codex-plugin/plugin.json", MAN),
                  "mcpConfig": tf("p1/.mcp.json", '{"mcpServers":{}}\n'), "appsConfig": None},
          skills=[{"instructions": tf("p1/deep/a/b/c/d/SKILL.md", "y"), "metadata": None},
                  OUTLINK,
                  {"instructions": tf("p1/skills/s1/SKILL.md",
                                      "---\nname: s1\n---\nbody \"q\" \u00e9\t\n"),
                   "metadata": tf("p1/skills/s1/agents/openai.yaml", "interface: {}\n")},
                  {"instructions": tf("p1/skills/s2/SKILL.md", "s2"), "metadata": None}],
          ns=[tf("p1/.codex-plugin/plugin.json", MAN),
              tf("p1/sub/.cursor-plugin/plugin.json", '{"name":"n"}')])
if not CONTROL:
    P1 = dict(P1, skills=[k for k in P1["skills"] if k is not OUTLINK],
              warnings=P1["warnings"] + [
                  "capability file %s leads out of %s through a symbolic link: not read"
                  % (uri(os.path.join(work, "p1/skills/outlink/sk/SKILL.md")),
                     os.path.realpath(os.path.join(work, "p1")))])
# A child of a plugin: the plugin's manifest comes from above.
os.makedirs(os.path.join(work, "p1/child"))
CHILD = root("p1/child", ns=[tf("p1/.codex-plugin/plugin.json", MAN)])
# Declared files: one through "./", one climbing out, one without "./"; inline MCP.
DECL = '{"mcpServers":"./cfg/m.json","apps":"./../x"}'
put("d1/.codex-plugin/plugin.json", DECL)
put("d1/cfg/m.json", "{}")
D1 = root("d1", plugin={"manifest": tf("d1/.codex-plugin/plugin.json", DECL),
                        "mcpConfig": tf("d1/cfg/m.json", "{}"), "appsConfig": None},
          ns=[tf("d1/.codex-plugin/plugin.json", DECL)],
          warnings=["ignoring apps in %s: path must remain below the capability root"
                    % uri(os.path.join(work, "d1/.codex-plugin/plugin.json"))])
DECL2 = '{"mcpServers":{"a":{}},"apps":"m.json"}'
put("d2/.codex-plugin/plugin.json", DECL2)
put("d2/.mcp.json", "{}")
D2 = root("d2", plugin={"manifest": tf("d2/.codex-plugin/plugin.json", DECL2),
                        "mcpConfig": None, "appsConfig": None},
          ns=[tf("d2/.codex-plugin/plugin.json", DECL2)],
          warnings=["ignoring apps in %s: path must start with `./`"
                    % uri(os.path.join(work, "d2/.codex-plugin/plugin.json"))])
# Limits and bad files: over 1 MiB, not UTF-8.
put("lim/big/SKILL.md", "x" * (1024 * 1024 + 1))
put("lim/bad/SKILL.md", b"ok\xff", "wb")
put("lim/ok/SKILL.md", "x" * (1024 * 1024))
LIM = root("lim", skills=[{"instructions": tf("lim/ok/SKILL.md", "x" * (1024 * 1024)),
                           "metadata": None}],
           warnings=["capability file %s is not UTF-8: invalid utf-8 sequence of 1 bytes "
                     "from index 2" % uri(os.path.join(work, "lim/bad/SKILL.md")),
                     "capability file %s exceeds the 1048576-byte limit"
                     % uri(os.path.join(work, "lim/big/SKILL.md"))])
# 16 MiB per root: seventeen files of 1 MiB, the seventeenth is refused.
for i in range(17):
    put("bundle/s%02d/SKILL.md" % i, "b" * (1024 * 1024))
# 2,000 directories per root.
for i in range(2100):
    os.makedirs(os.path.join(work, "wide/d%04d" % i))
put("notdir", "x")


def check_all(s, tag):
    r = s.request(M, {"roots": [{"id": "p1", "path": uri(os.path.join(work, "p1"))},
                               {"id": "p1/child", "path": uri(os.path.join(work, "p1/child"))},
                               {"id": "d1", "path": uri(os.path.join(work, "d1"))},
                               {"id": "d2", "path": uri(os.path.join(work, "d2"))},
                               {"id": "lim", "path": uri(os.path.join(work, "lim"))}]})
    got = r.get("result", {}).get("roots", [])
    for want, g in zip([P1, CHILD, D1, D2, LIM], got + [None] * 5):
        t.eq(g, want, "[%s] root %s as the released binary gives it" % (tag, want["id"]))
    r = s.request(M, {"roots": [{"id": "b", "path": uri(os.path.join(work, "bundle"))}]})
    g = r.get("result", {}).get("roots", [{}])[0]
    t.ok(len(g.get("skills", [])) == 16 and g.get("warnings") ==
         ["capability root bundle exceeds the 16777216-byte limit"],
         "[%s] 16 MiB per root: the 17th MiB is refused with a warning" % tag,
         (len(g.get("skills", [])), g.get("warnings")))
    r = s.request(M, {"roots": [{"id": "w", "path": uri(os.path.join(work, "wide"))}]})
    g = r.get("result", {}).get("roots", [{}])[0]
    t.eq(g.get("warnings"), ["capability scan reached its traversal limit (root: %s)"
                             % uri(os.path.join(work, "wide"))],
         "[%s] 2,000 directories per root, then a warning" % tag)
    r = s.request(M, {"roots": [{"id": "x", "path": uri(os.path.join(work, "none"))},
                               {"id": "y", "path": uri(os.path.join(work, "notdir"))}]})
    got = [g.get("error") for g in r.get("result", {}).get("roots", [])]
    t.eq(got, ["failed to inspect capability root %s: No such file or directory (os error 2)"
               % uri(os.path.join(work, "none")),
               "capability root %s is not a directory" % uri(os.path.join(work, "notdir"))],
         "[%s] per-root errors: missing, not a directory" % tag)
    # A sandbox context: disabled, the scan is the same; restricted, what the sandbox
    # cannot read is not read (the directory symlink leading out of the root fails
    # to list, with a warning), as the binary gives it.
    sb_disabled = {"permissions": {"type": "disabled"}, "windowsSandboxLevel": "disabled"}
    sb_outside = {"permissions": profile([special("root", "read"),
                                          path_entry(os.path.join(work, "outside"), "none")]),
                  "windowsSandboxLevel": "disabled"}
    p1 = uri(os.path.join(work, "p1"))
    r = s.request(M, {"roots": [{"id": "p1", "path": p1, "sandbox": sb_disabled},
                               {"id": "p1", "path": p1, "sandbox": sb_outside}]})
    got = r.get("result", {}).get("roots", [{}, {}])
    t.eq(got[0], P1, "[%s] a root with a disabled sandbox context: the same scan" % tag)
    err = got[1].get("error") or ""
    if "user namespaces" in err:
        t.skip("[%s] a root with a restricted sandbox context" % tag, err)
    else:
        want = dict(P1, skills=[k for k in P1["skills"]
                                if "outlink" not in k["instructions"]["path"]],
                    warnings=["failed to scan capability path %s: Permission denied (os error 13)"
                              % uri(os.path.join(work, "p1/skills/outlink"))])
        t.eq(got[1], want, "[%s] a root with a restricted sandbox context: what it cannot read "
             "is not read" % tag)
    one = {"id": "a", "path": uri(os.path.join(work, "none"))}
    for params, code, msg in (
            ({"roots": [one] * 129}, -32600, "capability root discovery accepts at most 128 roots"),
            (None, -32602, "invalid type: null, expected struct WireCapabilityRootsDiscoverParams"),
            ({}, -32602, "missing field `roots`"),
            ({"roots": {}}, -32602, "invalid type: map, expected a sequence"),
            ({"roots": [{"path": one["path"]}]}, -32602, "missing field `id`"),
            ({"roots": [{"id": "a"}]}, -32602, "missing field `path`"),
            ({"roots": [{"id": 1, "path": one["path"]}]}, -32602,
             "invalid type: number, expected a string")):
        r = s.request(M, params)
        t.eq((err_code(r), err_msg(r)), (code, msg),
             "[%s] %s gives the binary's error" % (tag, json.dumps(params)[:60]))
    r = s.request(M, {"roots": [one] * 128})
    t.eq(len(r.get("result", {}).get("roots", [])), 128, "[%s] 128 roots are accepted" % tag)
    r = s.request(M, {"roots": [{"id": "a\u0000\"", "path": one["path"], "x": 1}], "y": 1})
    t.eq(r.get("result", {}).get("roots", [{}])[0].get("id"), "a\u0000\"",
         "[%s] the id comes back as sent; unknown fields are ignored" % tag)


s = Server()
try:
    s.handshake()
    check_all(s, "stdio")
finally:
    s.stop()

# `printf ... | cordon serve`: the end of input waits for the scan's answer, as it
# does for fs requests (the released binary drops it).
if CONTROL:
    t.skip("end of input", "cordon waits for the answer; Codex does not")
else:
    msgs = [{"id": 1, "method": "initialize", "params": {"clientName": "eof"}},
            {"method": "initialized", "params": {}},
            {"id": 2, "method": M, "params": {"roots": [{"id": "p1",
                                                          "path": uri(os.path.join(work, "p1"))}]}}]
    p = subprocess.run([CORDON, "serve", "--listen", "stdio"],
                       input="".join(json.dumps(m) + "\n" for m in msgs).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    got = [json.loads(ln) for ln in p.stdout.splitlines()]
    t.ok(p.returncode == 0 and len(got) == 2 and got[1].get("result", {}).get("roots") == [P1],
         "stdio: the end of input waits for the scan's answer", (p.returncode, p.stderr[-300:]))

# The result counts against the memory budget: eight roots of 16 MiB are past 64 MiB.
if CONTROL:
    t.skip("memory budget", "cordon's --max-memory")
else:
    s = Server(args=["--max-memory", "64M"])
    try:
        s.handshake()
        b = uri(os.path.join(work, "bundle"))
        r = s.request(M, {"roots": [{"id": str(k), "path": b} for k in range(8)]}, timeout=120)
        t.eq((err_code(r), err_msg(r)),
             (-32603, "capability discovery result exceeds the server's memory budget "
              "(--max-memory)"), "a result past the memory budget is an error")
        r = s.request(M, {"roots": [{"id": "0", "path": b}]}, timeout=120)
        t.eq(len(r.get("result", {}).get("roots", [{}])[0].get("skills", [])), 16,
             "one root of 16 MiB still fits; the budget was given back")
    finally:
        s.stop()

# Scans hold no other session up: two scans held on the pool's two workers
# (CORDON_TEST_HOLD), a third queued behind them, and meanwhile another session's
# requests, the fs ones too, are answered.
if CONTROL:
    t.skip("held scans", "cordon's test hooks")
elif not HAVE_WS:
    t.skip("held scans", "this cordon was built without the WebSocket transport")
else:
    hooks = Hooks(hold=[M])
    srv = NetServer("ws", extra_env=hooks.env)
    try:
        t.ok(srv.ready, "held scans: the server listens", srv.stderr_text())
        a = srv.connect()
        a.next_id = 1000
        a.handshake()
        b = srv.connect()
        b.next_id = 2000
        b.handshake()
        one = {"roots": [{"id": "p1", "path": uri(os.path.join(work, "p1"))}]}
        ids = [a.send_request(M, one) for _ in range(3)]
        held = [hooks.wait("fs-held", id=i) for i in ids[:2]]
        # At most 16 waiting on one connection: the 17th is refused at once.
        more = [a.send_request(M, one) for _ in range(13)]
        extra = a.send_request(M, one)
        r = a.wait_id(extra)
        t.ok(r.get("error", {}).get("code") == -32600 and "at most 16" in
             r.get("error", {}).get("message", ""),
             "held scans: a 17th waiting on one connection is refused", r)
        r = b.request("fs/getMetadata", {"path": uri(work)})
        t.ok("result" in r, "held scans: another session's fs/getMetadata is answered", r)
        r = b.request("environment/status", {})
        t.ok("result" in r, "held scans: and its other requests", r)
        t.ok(not any(a.has_id(i) for i in ids) and not hooks.seen("fs-held", id=ids[2]),
             "held scans: (the two scans were held, the third waited for a worker)")
        for h in held:
            hooks.release(h)
        for i in ids[2:] + more:
            hooks.release(hooks.wait("fs-held", id=i))
        got = [a.wait_id(i) for i in ids + more]
        t.ok(all(g.get("result", {}).get("roots") == [P1] for g in got),
             "held scans: all sixteen complete once released", got)
    finally:
        srv.stop()
        hooks.close()

# The server's token file is never read, whatever name leads to it.
if CONTROL:
    t.skip("token: hidden", "cordon's --auth-token-file")
elif not HAVE_WS:
    t.skip("token: hidden", "this cordon was built without the WebSocket transport")
else:
    tok = put("tok/token", "secret-token-0123456789abcdef\n")
    os.chmod(tok, 0o600)
    put("tp/.codex-plugin/plugin.json", '{"mcpServers":"./m.json"}')
    os.symlink(tok, os.path.join(work, "tp/m.json"))
    os.makedirs(os.path.join(work, "tp/skills/x"))
    os.symlink(tok, os.path.join(work, "tp/.mcp.json"))
    srv = NetServer("ws", args=["--auth-token-file", tok])
    try:
        t.ok(srv.ready, "token: the server listens", srv.stderr_text())
        c = srv.connect(token="secret-token-0123456789abcdef")
        c.handshake()
        r = c.request(M, {"roots": [{"id": "tp", "path": uri(os.path.join(work, "tp"))}]})
        g = r.get("result", {}).get("roots", [{}])[0]
        t.ok("secret-token" not in json.dumps(r) and g.get("plugin", {}).get("mcpConfig") is None
             and g.get("warnings") == ["failed to read capability file %s: Permission denied "
                                       "(os error 13)" % uri(os.path.join(work, "tp/m.json"))],
             "the server's token file is not read through a declared path", r)
        sb = {"permissions": profile([special("root", "read")]), "windowsSandboxLevel": "disabled"}
        r = c.request(M, {"roots": [{"id": "tp", "path": uri(os.path.join(work, "tp")),
                                     "sandbox": sb}]})
        err = r.get("result", {}).get("roots", [{}])[0].get("error") or ""
        if "user namespaces" in err:
            t.skip("the token file under a sandbox", err)
        else:
            t.ok("result" in r and "secret-token" not in json.dumps(r),
                 "nor when the root is scanned in a sandbox (the helper's)", r)
    finally:
        srv.stop()

shutil.rmtree(work, ignore_errors=True)
# A file a sandboxed command was denied, behind a symlink it planted in the workspace
# (the red team's case): the server, which reads with its own rights, does not follow it
# out of the root. The binary reads it.
if CONTROL:
    t.skip("a symlink out of the root", "cordon's difference: the binary follows it")
else:
    put("denied/secret.txt", "TOPSECRET-%d\n" % os.getpid())
    put("planted/.codex-plugin/plugin.json", MAN)
    os.symlink(os.path.join(work, "denied/secret.txt"), os.path.join(work, "planted/.mcp.json"))
    os.makedirs(os.path.join(work, "planted/.agents"))
    os.symlink(os.path.join(work, "denied"), os.path.join(work, "planted/skills"))
    put("denied/SKILL.md", "TOPSECRET skill")
    s = Server()
    try:
        s.handshake()
        r = s.request(M, {"roots": [{"id": "p", "path": uri(os.path.join(work, "planted"))}]})
        text = json.dumps(r)
        g = r.get("result", {}).get("roots", [{}])[0]
        t.ok("TOPSECRET" not in text and g.get("plugin", {}).get("mcpConfig") is None and
             any("leads out of" in w for w in g.get("warnings", [])),
             "a file behind a symlink out of the root is not read, and a warning says so",
             text[:600])
    finally:
        s.stop()
t.done()
