#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: capabilities/discoverV2, on fixture CODEX_HOME and HOME
# trees, as the released Codex 0.169.0 exec-server answers (probed side by
# side; serve-codex-parity.py runs this script against it): the standalone
# skill roots and their order, the SKILL.md front matter read, invalid
# skills left out with one warning per root, the cwd unused, the 2,048-skill
# and 4 MiB limits, bad params with the binary's messages, a sandbox context
# (its cwd required; a restricting one scans in the sandbox), cordon's
# refusals of what it does not read, hidden files, and a held scan that
# holds no other session up. TAP.

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import (CORDON, Hooks, Server, Tap, cordon_usable, path_entry,  # noqa: E402
                       profile, special, uri)
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
CONTROL = os.environ.get("CD_TEST_CONTROL") == "codex"
HAVE_WS = b"without the WebSocket transport" not in subprocess.run(
    [CORDON, "serve", "--listen", "ws://127.0.0.1:1", "--max-sessions", "0"],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).stderr
M = "capabilities/discoverV2"
W_META = "some capability metadata could not be loaded; discovery may be incomplete"
W_SIZE = "capability discovery size limit reached"
SYSTEM = "/etc/codex/skills"

# Not under /tmp: the released binary refuses a CODEX_HOME there.
work = os.path.realpath(tempfile.mkdtemp(prefix="cordon-discover2-", dir="/var/tmp"))
os.chmod(work, 0o755)


def put(rel, data, mode="w"):
    p = os.path.join(work, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, mode) as f:
        f.write(data)
    return p


def fm(name, desc, extra=""):
    return "---\nname: %s\ndescription: %s\n%s---\nbody\n" % (name, desc, extra)


def skill(root_rel, root_id, rel, name, desc, short=None):
    return {"name": name, "description": desc, "shortDescription": short,
            "path": uri(os.path.join(work, root_rel, rel, "SKILL.md")),
            "discoveryRoot": {"id": root_id, "path": uri(os.path.join(work, root_rel))},
            "dependencies": None, "policy": None}


# The main fixture: CODEX_HOME h1, HOME u1, a project the cwd names (unused).
put("h1/skills/a/SKILL.md", fm("alpha", "The alpha skill"))
put("h1/skills/b/SKILL.md", "no front matter\n")
put("h1/skills/c/SKILL.md", fm("c", '"quoted: yes"', "metadata:\n  short-description: short c\n"))
put("h1/skills/d/SKILL.md", "---\ndescription: d desc\n---\n")
put("h1/skills/d/agents/openai.yaml", "interface:\n  display_name: D\n")
put("h1/skills/my  sk/SKILL.md", "---\ndescription: spaced\n---\n")
put("h1/skills/blk/SKILL.md", "---\nname: blk\ndescription: |\n  line1\n  line2\n---\n")
put("h1/skills/col/SKILL.md", fm("col", "Build for AWS: ECS # a comment"))
put("h1/skills/n/deep/SKILL.md", fm("123", "yes"))
put("h1/skills/dup/SKILL.md", "---\nname: a\nname: b\ndescription: d\n---\n")
put("h1/skills/long/SKILL.md", fm("x" * 65, "d"))
put("h1/skills/SKILL.md", fm("top", "d"))
put("u1/.agents/skills/e/SKILL.md", fm("e", "from the user's home"))
put("u1/.agents/skills/e2/SKILL.md", fm("alpha", "same name, not deduplicated"))
put("proj/.codex/skills/p/SKILL.md", fm("p", "project skills are not looked for"))
put("proj/.agents/skills/q/SKILL.md", fm("q", "nor here"))
H1 = [skill("h1/skills", "codex-home-skills", ".", "top", "d"),
      skill("h1/skills", "codex-home-skills", "a", "alpha", "The alpha skill"),
      skill("h1/skills", "codex-home-skills", "blk", "blk", "line1 line2"),
      skill("h1/skills", "codex-home-skills", "c", "c", "quoted: yes", "short c"),
      skill("h1/skills", "codex-home-skills", "col", "col", "Build for AWS: ECS"),
      skill("h1/skills", "codex-home-skills", "d", "d", "d desc"),
      skill("h1/skills", "codex-home-skills", "my  sk", "my sk", "spaced"),
      skill("h1/skills", "codex-home-skills", "n/deep", "123", "yes")]
for s in H1:
    s["path"] = s["path"].replace("/./", "/")
U1 = [skill("u1/.agents/skills", "user-agent-skills", "e", "e", "from the user's home"),
      skill("u1/.agents/skills", "user-agent-skills", "e2", "alpha",
            "same name, not deduplicated")]

# Limits: 2,100 skills over two roots (2,000 directories per root); five of 0.9 MiB.
for i in range(1500):
    put("h2/skills/s%04d/SKILL.md" % i, fm("s%04d" % i, "d"))
for i in range(600):
    put("u2/.agents/skills/t%04d/SKILL.md" % i, fm("t%04d" % i, "d"))
for i in range(5):
    put("h3/skills/b%d/SKILL.md" % i, fm("b%d" % i, "x" * (900 * 1024)))
put("h3/skills/c/SKILL.md", fm("small", "fits after a refused one"))

# What cordon refuses rather than answer differently: plugins, openai.yaml
# dependencies or policy, YAML outside its subset, plugin manifests in a skill root.
put("h4/plugins/cache/mkt/plug/1.0.0/.codex-plugin/plugin.json", '["plug"]')
put("h11/plugins/cache/mkt/plug/1.0.0/.codex-plugin/plugin.json", '{"name":"a","name":"b"}')
put("h5/skills/a/SKILL.md", fm("a", "d"))
put("h5/skills/a/agents/openai.yaml", "policy: &p\n  products: [codex]\n")
# Plugin manifests in a skill root qualify the names of the skills below them
# (the nearest one the binary reads; one whose name is not a string is skipped).
PM = ".codex-plugin/plugin.json"
for rel, data in (("h9/" + PM, '{"name":"up"}'),
                  ("h9/skills/" + PM, '{"version":5}'),
                  ("h9/skills/n/" + PM, '{"name":"inner","description":5}'),
                  ("h9/skills/n/deep/" + PM, '{"name":null}'),
                  ("h9/skills/s/" + PM, '{"name":"me"}'),
                  ("h9/skills/w/.claude-plugin/plugin.json", '{"name":" \\u3000"}'),
                  ("h9/skills/x/" + PM, '{"name":" p q\\t"}')):
    put(rel, data)
put("h10/" + PM, '{"name":"up"}')
put("h10/skills/" + PM, '{"name":null}')
put("h10/skills/a/SKILL.md", fm("a", "d"))
H9 = [("a", "skills:a"), ("n/b", "inner:b"), ("n/deep/c", "inner:c"), ("s", "me:s"),
      ("w/d", "w:d"), ("x/e", " p q\t:e")]
for rel, _ in H9:
    put("h9/skills/%s/SKILL.md" % rel, fm(rel.split("/")[-1], "d"))
# An agents/openai.yaml policy in the form cordon reads (the binary answers the same).
for name, yaml in (("f", "policy:\n  allow_implicit_invocation: false\n"),
                   ("t", "# c\n\npolicy:\n    allow_implicit_invocation: true\n"),
                   ("u", "policy:\n  allow_implicit_invocation: False\n  # c\n"),
                   ("v", "interface:\n  display_name: V\n"),
                   ("w", "interface:\n  display_name: W\ndependencies:\n  tools:\n"
                         "  - type: mcp\n    value: ' github '\n    description: GitHub # c\n"
                         "    transport: streamable_http\n    url: https://x/mcp\n"
                         "  - type: env_var\n    value: TOKEN\n  - type: no-value\n"
                         "policy:\n  allow_implicit_invocation: TRUE\n  products:\n"
                         "    - codex\n    - atlas\n"),
                   ("x", "dependencies:\n  tools:\n    - type: mcp\n      value: a\n"
                         "      type: b\npolicy:\n  allow_implicit_invocation: true\n"),
                   ("y", "policy:\n  products: [chatgpt, bogus]\n"),
                   ("z", "dependencies:\n  tools: []\npolicy: {}\n")):
    put("h8/skills/%s/SKILL.md" % name, fm(name, "d"))
    put("h8/skills/%s/agents/openai.yaml" % name, yaml)
put("h6/skills/a/SKILL.md", "---\nname: &x a\ndescription: *x\n---\n")
put("h7/skills/.codex-plugin/plugin.json", '[1]')
put("h7/skills/a/SKILL.md", fm("a", "d"))
os.makedirs(os.path.join(work, "empty"))

# Installed plugins: $CODEX_HOME/plugins/cache/MARKETPLACE/NAME/VERSION.
PC = "hp/plugins/cache/"
for rel, data in (
        ("mkt/sem/1.9.0/" + PM, '{"name":"sem"}'),
        ("mkt/sem/1.10.0/" + PM, '{"name":"sem","interface":{"displayName":"  Sem Ten "}}'),
        ("mkt/sem/1.10.0/skills/s1/SKILL.md", fm("s1", "d1")),
        ("mkt/sem/1.10.0/skills/bad/SKILL.md", "no front matter\n"),
        ("mkt/loc/local/" + PM, '{"name":"  "}'),
        ("mkt/loc/9.0.0/" + PM, '{"name":"loc"}'),
        ("mkt/loc/.codex-remote-plugin-install.json",
         '{"schema_version":1,"remote_plugin_id":" rid-1 ","other":2}'),
        ("mkt/str/abc/" + PM, '{"name":" s t ","apps":"./apps.json"}'),
        ("mkt/str/abc/apps.json", '{"apps":{}}'),
        ("mkt/str/1.0.0/" + PM, '{"name":"old"}'),
        ("mkt/str/.codex-remote-plugin-install.json",
         '{"schema_version":2,"remote_plugin_id":"r"}'),
        ("mkt/nomf/1.0.0/README", "no manifest"),
        ("mkt/badname/1/" + PM, '{"name":5}'),
        ("mkt/miss/1/.claude-plugin/plugin.json", '{"name":"m","mcpServers":"./m.json"}'),
        ("mkt/a b/1/" + PM, '{"name":"x"}'),
        ("mkt/.hid/1/" + PM, '{"name":"x"}'),
        ("a-mkt/zz/1.0.0+b/" + PM, '{}'),
        ("a-mkt/zz/1.0.0+a/" + PM, '{}')):
    put(PC + rel, data)
put("hp/skills/x/SKILL.md", fm("x", "dx"))
# A plugin, no CODEX_HOME/skills, and the user's skills.
put("hq/plugins/cache/mkt/one/1/" + PM, '{"name":"one"}')
put("uq/.agents/skills/e/SKILL.md", fm("e", "de"))


def plugin(mkt, name, version, display, files, skills=(), remote=None):
    root = os.path.join(work, PC, mkt, name, version)
    f = {"manifest": None, "mcpConfig": None, "appsConfig": None}
    for k, rel in files.items():
        with open(os.path.join(root, rel)) as fh:
            f[k] = {"path": uri(os.path.join(root, rel)), "contents": fh.read()}
    return {"id": "%s@%s" % (name, mkt), "displayName": display, "remotePluginId": remote,
            "version": version, "root": uri(root), "files": f,
            "skills": [{"name": n, "description": d, "shortDescription": None,
                        "path": uri(os.path.join(root, rel, "SKILL.md")),
                        "dependencies": None, "policy": None} for rel, n, d in skills]}


HP = [plugin("mkt", "loc", "local", "local", {"manifest": PM}, remote="rid-1"),
      plugin("mkt", "miss", "1", "m", {"manifest": ".claude-plugin/plugin.json"}),
      plugin("mkt", "sem", "1.10.0", "Sem Ten", {"manifest": PM},
             [("skills/s1", "sem:s1", "d1")]),
      plugin("mkt", "str", "abc", " s t ", {"manifest": PM, "appsConfig": "apps.json"}),
      plugin("a-mkt", "zz", "1.0.0+b", "1.0.0+b", {"manifest": PM})]
HP.sort(key=lambda p: p["id"])


def server(home, user, **kw):
    return Server(extra_env={"CODEX_HOME": os.path.join(work, home),
                             "HOME": os.path.join(work, user)}, **kw)


def system_skills(r):
    """The host's own /etc/codex/skills entries (both servers list them): set aside."""
    res = r.get("result")
    if res:
        res["skills"] = [s for s in res["skills"]
                         if s["discoveryRoot"]["path"] != uri(SYSTEM)]
    return r


cwd = uri(os.path.join(work, "proj"))
s = server("h1", "u1")
try:
    s.handshake()
    r = system_skills(s.request(M, {"cwd": cwd}))
    res = r.get("result", {})
    t.eq(res.get("plugins"), [], "no plugins installed: none")
    t.eq(res.get("skills"), H1 + U1,
         "CODEX_HOME/skills then HOME/.agents/skills, each in its scan's order, front matter "
         "read, the invalid ones left out, project skills not looked for, no deduplication")
    t.eq(res.get("warnings"), [W_META], "a root with invalid skills: one warning")
    r2 = system_skills(s.request(M, {"cwd": uri("/"), "sandbox": None}))
    t.eq(r2, dict(r, id=r2.get("id")), "the cwd changes nothing; a null sandbox neither")
    r2 = system_skills(s.request(M, [uri("/")]))
    t.eq(r2.get("result"), res, "params as a sequence: [cwd]")
    sb_off = {"cwd": uri(work), "permissions": {"type": "disabled"},
              "windowsSandboxLevel": "disabled"}
    r2 = system_skills(s.request(M, {"cwd": cwd, "sandbox": sb_off}))
    t.eq(r2.get("result"), res, "a disabled sandbox context: the same answer")
    deny_c = {"cwd": uri(work), "windowsSandboxLevel": "disabled",
              "permissions": profile([special("root", "read"),
                                      path_entry(os.path.join(work, "h1/skills/c"), "none")])}
    r2 = system_skills(s.request(M, {"cwd": cwd, "sandbox": deny_c}))
    err = json.dumps(r2.get("error") or "")
    if "user namespaces" in err or "Landlock" in err:
        t.skip("a restricting sandbox context", err)
    else:
        want = [k for k in H1 + U1 if "/skills/c/" not in k["path"]]
        t.eq(r2.get("result", {}).get("skills"), want,
             "a restricting sandbox context: what it cannot read is left out")
    for params, code, msg in (
            (None, -32602, "invalid type: null, expected struct DiscoverV2CapabilitiesRequest"),
            ({}, -32602, "missing field `cwd`"),
            ([], -32602, "invalid length 0, expected struct DiscoverV2CapabilitiesRequest "
                         "with 2 elements"),
            ([uri("/"), None, 1], -32602, "invalid length 3, expected fewer elements in array"),
            (5, -32602, "invalid type: number, expected struct DiscoverV2CapabilitiesRequest"),
            ({"cwd": 5}, -32602, "invalid type: number, expected a string"),
            ({"cwd": "/tmp"}, -32602, "invalid URI: relative URL without a base"),
            ({"cwd": "http://x/"}, -32602, "unsupported path URI scheme `http`"),
            ({"cwd": cwd, "sandbox": 5}, -32602,
             "invalid type: number, expected struct FileSystemSandboxContext"),
            ({"cwd": cwd, "sandbox": []}, -32602,
             "invalid length 0, expected struct FileSystemSandboxContext with 9 elements"),
            ({"cwd": cwd, "sandbox": {}}, -32602, "missing field `permissions`"),
            ({"cwd": cwd, "sandbox": {"permissions": {"type": "disabled"}}}, -32602,
             "missing field `cwd`"),
            ({"cwd": cwd, "sandbox": {"permissions": {"type": "disabled"},
                                      "windowsSandboxLevel": "disabled"}}, -32602,
             "missing field `cwd`")):
        r = s.request(M, params)
        t.eq(r.get("error"), {"code": code, "message": msg}, "bad params %s: %s"
             % (json.dumps(params)[:60], msg))
finally:
    s.stop()

s = server("h2", "u2")
try:
    s.handshake()
    r = system_skills(s.request(M, {"cwd": cwd}))
    res = r.get("result", {})
    names = [k["name"] for k in res.get("skills", [])]
    t.ok(len(names) == 2048 and
         names[:1500] == ["s%04d" % i for i in range(1500)] and
         names[1500:] == ["t%04d" % i for i in range(548)] and
         res.get("warnings") == [W_SIZE],
         "2,048 skills at most, in order, and the limit warning", (len(names), res.get("warnings")))
finally:
    s.stop()

s = server("h3", "empty")
try:
    s.handshake()
    r = system_skills(s.request(M, {"cwd": cwd}))
    res = r.get("result", {})
    names = [k["name"] for k in res.get("skills", [])]
    t.ok(names == ["b0", "b1", "b2", "b3", "small"] and res.get("warnings") == [W_SIZE]
         and len(json.dumps(res, separators=(",", ":")).encode()) <= 4 * 1024 * 1024,
         "4 MiB at most: a skill that does not fit is left out, a smaller one after it fits",
         (names, res.get("warnings")))
finally:
    s.stop()

# Over 4 MiB only once the limit warning is in: the last skill is dropped,
# and its text (",{" in a description) must not decide where it began.
MAX = 4 * 1024 * 1024
for i in range(4):
    put("h12/skills/s%d/SKILL.md" % i, fm("s%d" % i, '"%s,{x"' % ("a" * 1000000)))


def compact(v):
    return len(json.dumps(v, separators=(",", ":")).encode())


s = server("h12", "empty")
try:
    s.handshake()
    put("h12/skills/z9/SKILL.md", fm("z9", '"q"'))
    res = system_skills(s.request(M, {"cwd": cwd})).get("result", {})
    sizes = [compact(k) for k in res.get("skills", [])]
    # Every skill admitted (their bytes at most 4 MiB), the answer 5 bytes short of it
    # without the warning: one byte over once it is in.
    d = 1 + MAX - 5 - sum(sizes)
    put("h12/skills/z9/SKILL.md", fm("z9", '"%s,{x"' % ("b" * (d - 3))))
    try:
        r = system_skills(s.request(M, {"cwd": cwd}))
    except Exception as e:  # an answer that is not JSON
        r = {"error": repr(e)}
    res = r.get("result", {})
    t.ok(len(sizes) == 5 and [k["name"] for k in res.get("skills", [])] ==
         ["s0", "s1", "s2", "s3"] and res.get("warnings") == [W_SIZE] and
         compact(res) <= MAX,
         "the last skill dropped to fit the limit warning: valid JSON, the other four kept",
         (sizes, str(r)[:300]))
finally:
    s.stop()

s = server("h8", "empty")
try:
    s.handshake()
    r = system_skills(s.request(M, {"cwd": cwd}))
    res = r.get("result", {})
    want = []
    def tool(ty, value, desc=None, transport=None, url=None):
        return {"type": ty, "value": value, "description": desc, "transport": transport,
                "command": None, "url": url, "oauthCallbackPort": None}
    W_DEPS = {"tools": [tool("mcp", "github", "GitHub", "streamable_http", "https://x/mcp"),
                        tool("env_var", "TOKEN")]}
    for name, allow, products, deps in (
            ("f", False, [], None), ("t", True, [], None), ("u", False, [], None),
            ("v", "-", [], None), ("w", True, ["codex", "atlas"], W_DEPS),
            ("x", "-", [], None), ("y", "-", [], None), ("z", None, [], None)):
        k = skill("h8/skills", "codex-home-skills", name, name, "d")
        if allow != "-":
            k["policy"] = {"allowImplicitInvocation": allow, "products": products}
        k["dependencies"] = deps
        want.append(k)
    t.eq(res.get("skills"), want,
         "agents/openai.yaml: dependencies (tools with a type and a value, trimmed) and "
         "policy read; a repeated key or an unknown product: null for both")
    t.eq(res.get("warnings"), [], "agents/openai.yaml with a policy: no warning")
finally:
    s.stop()

s = server("h9", "empty")
try:
    s.handshake()
    r = system_skills(s.request(M, {"cwd": cwd}))
    res = r.get("result", {})
    t.eq(res.get("skills"), [skill("h9/skills", "codex-home-skills", rel, name, "d")
                             for rel, name in H9],
         "plugin manifests in a skill root: skill names qualified by the nearest readable one")
    t.eq(res.get("warnings"), [], "plugin manifests in a skill root: no warning")
finally:
    s.stop()
s = server("h10", "empty")
try:
    s.handshake()
    r = system_skills(s.request(M, {"cwd": cwd}))
    t.eq(r.get("result", {}).get("skills"), [skill("h10/skills", "codex-home-skills", "a", "a",
                                                   "d")],
         "a root's manifest passed over: not the one above it, the name not qualified")
finally:
    s.stop()

# Installed plugins, as the binary lists them.
s = server("hp", "empty")
try:
    s.handshake()
    r = system_skills(s.request(M, {"cwd": cwd}))
    res = r.get("result", {})
    t.eq(res.get("plugins"), HP,
         "installed plugins: sorted by id, the active version (local; semver; bytes), the "
         "display name, the remote id, the files, the skills qualified by the plugin's name")
    t.eq(res.get("skills"), [skill("hp/skills", "codex-home-skills", "x", "x", "dx")],
         "the standalone skills beside the plugins")
    W_LOC = "some capability locations could not be resolved; discovery may be incomplete"
    t.eq(res.get("warnings"), [W_LOC] + [W_META] * 4,
         "an unreadable remote id: one warning first; then one per plugin with an invalid "
         "skill, no manifest, an invalid manifest or a declared file missing")
    deny = {"cwd": uri(work), "windowsSandboxLevel": "disabled",
            "permissions": profile([special("root", "read"),
                                    path_entry(os.path.join(work, PC, "mkt/sem/1.10.0/skills"),
                                               "none")])}
    r2 = system_skills(s.request(M, {"cwd": cwd, "sandbox": deny}))
    got = {p["id"]: [k["name"] for k in p["skills"]]
           for p in r2.get("result", {}).get("plugins", [])}
    t.ok(got.get("sem@mkt") == [] and got.get("loc@mkt") == [],
         "a restricting sandbox context: a plugin's root is scanned in it", r2)
    deny["permissions"] = profile([special("root", "read"),
                                   path_entry(os.path.join(work, PC, "mkt/sem"), "none")])
    r2 = system_skills(s.request(M, {"cwd": cwd, "sandbox": deny}))
    res2 = r2.get("result", {})
    t.ok([p["id"] for p in res2.get("plugins", [])] ==
         [p["id"] for p in HP if p["id"] != "sem@mkt"] and
         res2.get("warnings") == [W_LOC] + [W_META] * 3,
         "a plugin the sandbox context cannot read: left out, no warning of its own", r2)
finally:
    s.stop()

s = server("hq", "uq")
try:
    s.handshake()
    res = system_skills(s.request(M, {"cwd": cwd})).get("result", {})
    t.ok([p["id"] for p in res.get("plugins", [])] == ["one@mkt"] and
         res.get("skills") == [skill("uq/.agents/skills", "user-agent-skills", "e", "e", "de")],
         "a plugin, no CODEX_HOME/skills: HOME/.agents/skills still read", res)
finally:
    s.stop()

# cordon's bound (the binary has none): a package directory of more than 20,000
# entries is not read to its end; the package is left out, with the warning.
put("hz/plugins/cache/mkt/small/1.0.0/" + PM, '{"name":"small"}')
put("hz/plugins/cache/mkt/wide/1.0.0/" + PM, '{"name":"wide"}')
for i in range(20001):
    open(os.path.join(work, "hz/plugins/cache/mkt/wide/f%05d" % i), "w").close()
if CONTROL:
    t.skip("a package of more than 20,000 entries: left out", "cordon's bound")
else:
    s = server("hz", "uq")
    try:
        s.handshake()
        res = system_skills(s.request(M, {"cwd": cwd})).get("result", {})
        t.ok([p["id"] for p in res.get("plugins", [])] == ["small@mkt"] and
             res.get("warnings") == ["some capability locations could not be resolved; "
                                     "discovery may be incomplete"],
             "a package of more than 20,000 entries: left out, with the warning",
             {k: res.get(k) for k in ("plugins", "warnings")})
    finally:
        s.stop()

# cordon's refusals (the binary answers these; cordon does not read them yet).
for home, what, frag in (("h4", "an installed plugin's manifest that is an array",
                          "manifest of the installed plugin"),
                         ("h11", "an installed plugin's manifest with a repeated key",
                          "manifest of the installed plugin"),
                         ("h5", "agents/openai.yaml outside the YAML subset",
                          "cannot read the agents/openai.yaml"),
                         ("h6", "front matter outside the YAML subset", "front matter of"),
                         ("h7", "a plugin manifest in a skill root", "cannot read the plugin manifest")):
    if CONTROL:
        t.skip("refused: %s" % what, "cordon's refusal")
        continue
    s = server(home, "empty")
    try:
        s.handshake()
        r = s.request(M, {"cwd": cwd})
        e = r.get("error") or {}
        t.ok(e.get("code") == -32603 and frag in e.get("message", "") and
             "refused rather than answered differently" in e.get("message", ""),
             "refused, not approximated: %s" % what, r)
    finally:
        s.stop()

# A held scan holds no other session up, nor discoverV1's scans.
if CONTROL:
    t.skip("held scan", "cordon's test hooks")
elif not HAVE_WS:
    t.skip("held scan", "this cordon was built without the WebSocket transport")
else:
    hooks = Hooks(hold=[M])
    srv = NetServer("ws", extra_env=dict(hooks.env, CODEX_HOME=os.path.join(work, "h2"),
                                         HOME=os.path.join(work, "u2")))
    try:
        t.ok(srv.ready, "held scan: the server listens", srv.stderr_text())
        a = srv.connect()
        a.next_id = 1000
        a.handshake()
        b = srv.connect()
        b.next_id = 2000
        b.handshake()
        ids = [a.send_request(M, {"cwd": cwd}) for _ in range(2)]
        held = hooks.wait("fs-held", id=ids[0])
        r = b.request("fs/getMetadata", {"path": uri(work)})
        t.ok("result" in r, "held scan: another session's fs/getMetadata is answered", r)
        r = b.request("capabilityRoots/discoverV1",
                      {"roots": [{"id": "x", "path": uri(os.path.join(work, "h1/skills"))}]})
        t.ok("result" in r, "held scan: and a discoverV1 scan", r)
        t.ok(not any(a.has_id(i) for i in ids) and not hooks.seen("fs-held", id=ids[1]),
             "held scan: (the second waited for the worker)")
        hooks.release(held)
        hooks.release(hooks.wait("fs-held", id=ids[1]))
        got = [a.wait_id(i) for i in ids]
        t.ok(all(len(g.get("result", {}).get("skills", [])) >= 2048 - 1 for g in got),
             "held scan: both complete once released", [str(g)[:200] for g in got])
    finally:
        srv.stop()
        hooks.close()

# The server's token file is never read, whatever name leads to it.
if CONTROL:
    t.skip("token: hidden", "cordon's --auth-token-file")
elif not HAVE_WS:
    t.skip("token: hidden", "this cordon was built without the WebSocket transport")
else:
    tok = put("tok/SKILL.md", "secret-token-0123456789abcdef\n")
    os.chmod(tok, 0o600)
    put("ht/skills/a/SKILL.md", fm("a", "d"))
    os.symlink(os.path.join(work, "tok"), os.path.join(work, "ht/skills/tk"))
    srv = NetServer("ws", args=["--auth-token-file", tok],
                    extra_env={"CODEX_HOME": os.path.join(work, "ht"),
                               "HOME": os.path.join(work, "empty")})
    try:
        t.ok(srv.ready, "token: the server listens", srv.stderr_text())
        c = srv.connect(token="secret-token-0123456789abcdef")
        c.handshake()
        r = system_skills(c.request(M, {"cwd": cwd}))
        t.ok("secret-token" not in json.dumps(r) and
             [k["name"] for k in r.get("result", {}).get("skills", [])] == ["a"] and
             r["result"]["warnings"] == [W_META],
             "the server's token file is not read through a directory symlink", r)
        sb = {"cwd": uri(work), "permissions": profile([special("root", "read")]),
              "windowsSandboxLevel": "disabled"}
        r = c.request(M, {"cwd": cwd, "sandbox": sb})
        err = json.dumps(r.get("error") or "")
        if "user namespaces" in err or "Landlock" in err:
            t.skip("the token file under a sandbox", err)
        else:
            t.ok("result" in r and "secret-token" not in json.dumps(r),
                 "nor in a sandbox (the helper's)", r)
    finally:
        srv.stop()

shutil.rmtree(work, ignore_errors=True)
t.done()
