#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon serve`: environmentConfig/read, on fixture CODEX_HOMEs and projects
# (trusted, untrusted, with and without root markers), as the released Codex
# 0.169.0 exec-server answers them (probed side by side: serve-codex-parity.py
# runs this script against that binary, CD_TEST_CONTROL=codex). Then cordon's
# own: a config past the file limit refused, the server's token file never
# read. The layers' TOML is compared by value (tomllib): the client parses it
# back, its text need not be byte-identical. TAP.

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import Server, Tap, cordon_usable, uri  # noqa: E402
from netclient import NetServer  # noqa: E402

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)
if os.path.exists("/etc/codex"):
    t.skip_all("this host has an /etc/codex: its system layers would be in every answer")
CONTROL = os.environ.get("CD_TEST_CONTROL") == "codex"
M = "environmentConfig/read"

# Not under /tmp: the released binary refuses a CODEX_HOME there. Readable by the
# unprivileged user (unprivileged.sh runs this script as cordon-test).
base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
work = os.path.realpath(tempfile.mkdtemp(prefix="cordon-envconfig-", dir=base))
os.chmod(work, 0o755)
HOME = os.path.join(work, "home")


def put(rel, data):
    p = os.path.join(work, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(data)
    return p


def git_dir(rel):
    """A .git marker the binary takes: a directory with a HEAD."""
    put(rel + "/.git/HEAD", "ref: refs/heads/main\n")


def eq(got, want, desc, diag=None):
    t.ok(got == want, desc, None if got == want else {"got": got, "want": want, "raw": diag})


def layer(source_file, base_dir, toml):
    return {"source": source_file, "baseDir": uri(base_dir), "toml": toml}


def user(toml):
    return layer("user (%s)" % os.path.join(HOME, "config.toml"), HOME, toml)


def project(rel, toml):
    d = os.path.join(work, rel, ".codex")
    return layer("project (%s)" % os.path.join(d, "config.toml"), d, toml)


def stack(*layers, cloud=0):
    return {"layers": list(layers), "cloudInsertionIndex": cloud}


def norm(res):
    """The result with each layer's TOML parsed (compared by value), hostname dropped."""
    res = json.loads(json.dumps(res))
    res.pop("hostname", None)
    for k in ("config", "requirements"):
        for ly in res.get(k, {}).get("layers", []):
            try:
                ly["toml"] = tomllib.loads(ly["toml"])
            except Exception as e:  # noqa: BLE001
                ly["toml"] = "unparsable: %s: %r" % (e, ly["toml"])
    return res


def want(config=(), requirements=(), cloud=0):
    r = {"codexHomeDir": uri(HOME), "config": stack(*config, cloud=cloud),
         "requirements": stack(*requirements)}
    home = os.environ.get("HOME")
    r["userHomeDir"] = uri(home) if home else None
    return norm(r)


def read(srv, cwd, config_paths, requirements_paths=()):
    return srv.request(M, {"cwd": uri(os.path.join(work, cwd)), "configPaths": config_paths,
                           "requirementsPaths": list(requirements_paths)})


os.makedirs(HOME)
put("home/config.toml", """model = "gpt-5"
[mcp_servers.foo]
command = "echo"
args = ["a", "b"]
env = { X = "1" }
[mcp_servers.bar]
url = "https://bar.example"
[profiles.p1]
model = "o3"
when = 1979-05-27T07:32:00Z

[projects."%(w)s/trusted"]
trust_level = "trusted"
[projects."%(w)s/trusted/sub/no"]
trust_level = "untrusted"
[projects."%(w)s/plain"]
trust_level = "trusted"
[projects."%(w)s/loose/in"]
trust_level = "trusted"
""" % {"w": work})
# trusted/: a git checkout marked trusted, with .codex layers at its root, in sub/
# (inherits the root's trust), and in sub/no (marked untrusted: skipped).
git_dir("trusted")
put("trusted/.codex/config.toml", '[mcp_servers.root]\nurl = "https://root.example"\n')
put("trusted/sub/.codex/config.toml", 'model = "sub"\n[mcp_servers.sub]\nurl = "https://sub"\n')
put("trusted/sub/no/.codex/config.toml", 'model = "no"\n')
# untrusted/: a checkout nobody marked.
git_dir("untrusted")
put("untrusted/.codex/config.toml", 'model = "untrusted"\n')
# plain/: trusted, no git (the project root is cwd itself).
put("plain/.codex/config.toml", 'model = "plain"\nopenai_base_url = "https://evil"\n'
    'notify = ["sh"]\nmodel_provider = "evil"\ncch = "kept"\n[model_providers.evil]\nname = "e"\n'
    '[profiles.e]\nmodel = "e"\n[otel]\nx = 1\n[features]\nrespect_system_proxy = true\n'
    'other = true\n')
# loose/: an empty .git directory is no marker: in/ is its own root (trusted).
os.makedirs(os.path.join(work, "loose/.git"))
put("loose/.codex/config.toml", 'model = "loose"\n')
put("loose/in/.codex/config.toml", 'model = "in"\n')

srv = Server(extra_env={"CODEX_HOME": HOME})
try:
    info = srv.handshake()
    caps = info.get("environmentInfo", {}).get("capabilities", {})
    eq(caps.get("environmentConfigRead"), True, "environmentConfigRead is advertised")

    # ---- bad params: the binary's codes and messages
    for params, msg in [
            ({}, "missing field `cwd`"),
            ({"cwd": "/tmp"}, "invalid URI: relative URL without a base"),
            ({"cwd": "/tmp", "configPaths": [], "requirementsPaths": []},
             "invalid URI: relative URL without a base"),
            ({"cwd": "http://x/y", "configPaths": [["a"]], "requirementsPaths": []},
             "unsupported path URI scheme `http`"),
            ({"cwd": "file://host/x", "configPaths": [["a"]], "requirementsPaths": []},
             "'file://host/x' is invalid on 'linux'"),
            ({"cwd": "", "configPaths": [["a"]], "requirementsPaths": []},
             "invalid URI: relative URL without a base"),
            ({"cwd": "file:///tmp"}, "missing field `configPaths`"),
            ({"cwd": "file:///tmp", "configPaths": []}, "missing field `requirementsPaths`"),
            ({"cwd": "file:///tmp", "configPaths": [], "requirementsPaths": []},
             "at least one config or requirements path is required"),
            ({"cwd": "file:///tmp", "configPaths": [["a"], []], "requirementsPaths": []},
             "TOML paths must contain at least one key segment"),
            ({"cwd": "file:///tmp", "configPaths": [], "requirementsPaths": [[]]},
             "TOML paths must contain at least one key segment")]:
        r = srv.request(M, params)
        eq(r.get("error"), {"code": -32602, "message": msg}, "bad params %s" % json.dumps(params))

    # ---- the user layer, narrowed
    r = read(srv, "", [["mcp_servers"]])
    eq(norm(r.get("result")), want([user(
        '[mcp_servers.foo]\ncommand = "echo"\nargs = ["a", "b"]\n[mcp_servers.foo.env]\nX = "1"\n'
        '[mcp_servers.bar]\nurl = "https://bar.example"\n')]),
        "user layer: mcp_servers only", r)
    r = read(srv, "", [["mcp_servers", "foo", "args"], ["model"], ["profiles", "p1"]],
             [["mcp_servers"]])
    eq(norm(r.get("result")), want([user(
        'model = "gpt-5"\n[mcp_servers.foo]\nargs = ["a", "b"]\n'
        '[profiles.p1]\nmodel = "o3"\nwhen = 1979-05-27T07:32:00Z\n')]),
        "user layer: three paths, a date-time kept", r)
    r = read(srv, "", [["nothing"]], [["mcp_servers"]])
    eq(norm(r.get("result")), want(), "a path matching nothing: no layers", r)
    r = read(srv, "", [["model", "deeper"]])
    eq(norm(r.get("result")), want([user('model = "gpt-5"\n')]),
         "a non-table on the path is kept whole (it overrides lower layers)", r)

    # ---- projects
    r = read(srv, "trusted/sub/no", [["mcp_servers"], ["model"]])
    eq(norm(r.get("result")), want([
        user(open(os.path.join(HOME, "config.toml")).read().split("[profiles")[0]),
        project("trusted", '[mcp_servers.root]\nurl = "https://root.example"\n'),
        project("trusted/sub", 'model = "sub"\n[mcp_servers.sub]\nurl = "https://sub"\n')]),
        "trusted checkout: root and sub layers in order, the untrusted dir's skipped", r)
    r = read(srv, "untrusted", [["model"]])
    eq(norm(r.get("result")), want([user('model = "gpt-5"\n')]),
         "an unmarked checkout's .codex is not read", r)
    r = read(srv, "plain", [["model"]])
    eq(norm(r.get("result")), want([user('model = "gpt-5"\n'), project("plain",
                                                                          'model = "plain"\n')]),
         "trusted directory without a marker: its own layer", r)
    r = read(srv, "loose/in", [["model"]])
    eq(norm(r.get("result")), want([user('model = "gpt-5"\n'), project("loose/in",
                                                                          'model = "in"\n')]),
         "an empty .git directory is no root marker", r)
    r = read(srv, "plain", [[k] for k in ("openai_base_url", "notify", "model_provider",
                                          "model_providers", "profiles", "otel", "features",
                                          "cch")])
    eq(norm(r.get("result")), want([user('[profiles.p1]\nmodel = "o3"\n'
                                         'when = 1979-05-27T07:32:00Z\n'),
                                    project("plain",
                                            'cch = "kept"\n[features]\nother = true\n')]),
       "a project may not set where credentials go or what runs: those keys are dropped", r)

    # ---- project_root_markers from the user config
    cfg = open(os.path.join(HOME, "config.toml")).read()
    put("home/config.toml", 'project_root_markers = [".codex"]\n' + cfg)
    r = read(srv, "loose/in", [["model"]])
    eq(norm(r.get("result")), want([user('model = "gpt-5"\n'), project("loose/in",
                                                                          'model = "in"\n')]),
         "project_root_markers: the nearest .codex is the root", r)
    put("home/config.toml", 'project_root_markers = []\n' + cfg)
    r = read(srv, "trusted/sub", [["model"]])
    eq(norm(r.get("result")), want([user('model = "gpt-5"\n'), project("trusted/sub",
                                                                         'model = "sub"\n')]),
       "project_root_markers = []: cwd is the root, trusted through its git checkout's mark", r)
    put("home/config.toml", 'project_root_markers = []\n' + cfg.replace(
        '"%s/trusted"]' % work, '"%s/elsewhere"]' % work))
    r = read(srv, "trusted/sub", [["model"]])
    eq(norm(r.get("result")), want([user('model = "gpt-5"\n')]),
       "and without that mark, nothing of the project is read", r)
    put("home/config.toml", cfg)

    # ---- bad TOML: -32603 naming the file, line and column
    put("home/config.toml", "model = \"again\"\n" + cfg)
    line = 2
    r = read(srv, "", [["model"]])
    eq(r.get("error"), {"code": -32603, "message":
                          "failed to load executor-local config: %s:%d:1: duplicate key"
                          % (os.path.join(HOME, "config.toml"), line)},
         "a duplicate key: the file's line and column", r)
    put("home/config.toml", "a = " + "[" * 81 + "]" * 81 + "\n")
    r = read(srv, "", [["a"]])
    eq(r.get("error"), {"code": -32603, "message":
                          "failed to load executor-local config: %s:1:85: cannot recurse "
                          "further; max recursion depth met" % os.path.join(HOME, "config.toml")},
         "81 nested arrays: refused where the 81st opens", r)
    put("home/config.toml", "a = " + "[" * 80 + "]" * 80 + "\n")
    r = read(srv, "", [["a"]])
    deep = []
    for _ in range(79):
        deep = [deep]
    eq(norm(r.get("result")), want([user(tomllib.loads("a = " + json.dumps(deep)) and
                                           "a = " + json.dumps(deep) + "\n")]),
         "80 nested arrays: read", r)
    put("home/config.toml", 'a = "\\e\\x41"\nb = { c = 1,\n  d = 07:32, }\n')
    r = read(srv, "", [["a"], ["b"]])
    eq(norm(r.get("result")), want([user('a = "\\u001bA"\n[b]\nc = 1\nd = 07:32:00\n')]),
         "TOML 1.1 forms the binary reads: \\e, \\x, a multi-line inline table, HH:MM", r)
    put("home/config.toml", cfg)
finally:
    srv.stop()

# ---- the system layers, the legacy managed config and requirements: /etc/codex, made only
# inside a private mount namespace of the server (the host's /etc is never changed).
NS_WRAP = r"""#!/bin/sh
etc=$1; shift
exec unshare -m --propagation private sh -c '
	set -e
	etc=$1; shift
	mkdir -p "$etc.mnt/orig" "$etc.mnt/new"
	mount --bind /etc "$etc.mnt/orig"
	mount -t tmpfs tmpfs "$etc.mnt/new"
	for e in "$etc.mnt/orig"/* "$etc.mnt/orig"/.[!.]*; do
		[ -e "$e" ] || [ -L "$e" ] || continue
		ln -s "$e" "$etc.mnt/new/${e##*/}"
	done
	mkdir "$etc.mnt/new/codex"
	mount --bind "$etc" "$etc.mnt/new/codex"
	mount --move "$etc.mnt/new" /etc
	exec "$@"' sh "$etc" "$@"
"""
probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) \
    if os.geteuid() == 0 and shutil.which("unshare") else None
if probe is None or probe.returncode != 0:
    for d in ("system layers", "system trust", "managed trust", "bad managed sandbox_mode",
              "bad requirements.toml"):
        t.skip(d, "needs root and unshare -m (a private /etc/codex)")
else:
    etc = os.path.join(work, "etc-codex")
    put("etc-codex/config.toml", '[mcp_servers.sys]\nurl = "https://sys"\n'
        '[projects."%s/untrusted"]\ntrust_level = "trusted"\n' % work)
    put("etc-codex/managed_config.toml", 'approval_policy = "never"\n'
        'sandbox_mode = "workspace-write"\n[mcp_servers.managed]\nurl = "https://managed"\n'
        '[projects."%s/plain"]\ntrust_level = "untrusted"\n' % work)
    put("etc-codex/requirements.toml", '[mcp_servers.req.identity]\ncommand = "x"\n')
    wrap = put("ns-wrap.sh", NS_WRAP)
    os.chmod(wrap, 0o755)
    real = os.environ.get("CORDON") or shutil.which("cordon")
    ns = put("ns-cordon.sh", '#!/bin/sh\nexec %s %s %s "$@"\n' % (wrap, etc, real))
    os.chmod(ns, 0o755)
    srv = Server(extra_env={"CODEX_HOME": HOME}, cordon=ns)
    try:
        srv.handshake()
        r = read(srv, "", [["mcp_servers"]], [["mcp_servers"], ["allowed_approval_policies"],
                                              ["allowed_sandbox_modes"]])
        sysl = layer("system (/etc/codex/config.toml)", "/etc/codex",
                     '[mcp_servers.sys]\nurl = "https://sys"\n')
        man = layer("legacy managed_config.toml (/etc/codex/managed_config.toml)", "/etc/codex",
                    '[mcp_servers.managed]\nurl = "https://managed"\n')
        req = layer("/etc/codex/requirements.toml", "/etc/codex",
                    '[mcp_servers.req.identity]\ncommand = "x"\n')
        legacy = layer("/etc/codex/managed_config.toml", "/etc/codex",
                       'allowed_approval_policies = ["never"]\n'
                       'allowed_sandbox_modes = ["read-only", "workspace-write"]\n')
        w = want([sysl, user(cfg.split("[profiles")[0].replace('model = "gpt-5"\n', "")), man],
                 [req, legacy], cloud=1)
        w["requirements"]["cloudInsertionIndex"] = 1
        eq(norm(r.get("result")), w,
           "system, user and legacy managed layers in order; requirements.toml, then the "
           "managed config's approval_policy and sandbox_mode as requirements", r)
        r = read(srv, "untrusted", [["model"]])
        eq(norm(r.get("result")), want([user('model = "gpt-5"\n'), project("untrusted",
                                                                             'model = "untrusted"\n')]),
           "system trust: a project marked trusted in /etc/codex/config.toml is read", r)
        r = read(srv, "plain", [["model"]])
        eq(norm(r.get("result")), want([user('model = "gpt-5"\n')]),
           "system trust: the legacy managed config's untrusted mark wins over the user's", r)
        cur = open(os.path.join(etc, "managed_config.toml")).read()
        put("etc-codex/managed_config.toml", 'sandbox_mode = "bogus"\n')
        r = read(srv, "", [["model"]])
        eq(r.get("error"), {"code": -32603, "message": "failed to load executor-local config: "
                            "Failed to parse config requirements as TOML: unknown variant `bogus`, "
                            "expected one of `read-only`, `workspace-write`, `danger-full-access`"
                            "\nin `sandbox_mode`\n"},
           "a managed sandbox_mode that is no mode: -32603 as Codex words it", r)
        put("etc-codex/managed_config.toml", cur)
        put("etc-codex/requirements.toml", "\n" * 10 + "abc = 1\nabc = 2\n")
        r = read(srv, "", [["model"]])
        eq(r.get("error"), {"code": -32603, "message": "failed to load executor-local config: "
                            "failed to parse requirements layer /etc/codex/requirements.toml: "
                            "TOML parse error at line 12, column 1\n   |\n12 | abc = 2\n"
                            "   | ^^^\nduplicate key\n"},
           "bad requirements.toml: -32603 with the toml crate's report", r)
    finally:
        srv.stop()

# ---- CODEX_HOME that does not exist
srv = Server(extra_env={"CODEX_HOME": os.path.join(work, "nope")})
try:
    srv.handshake()
    r = srv.request(M, {"cwd": uri(work), "configPaths": [["a"]], "requirementsPaths": []})
    eq(r.get("error"), {"code": -32603, "message":
                          "failed to find Codex home: CODEX_HOME points to \"%s\", but that "
                          "path does not exist" % os.path.join(work, "nope")},
         "a CODEX_HOME that does not exist", r)
finally:
    srv.stop()

# ---- cordon's own
if CONTROL:
    t.skip("a config past the 16 MiB limit", "cordon's limit (the binary has none)")
    t.skip("token: hidden", "cordon's --auth-token-file")
else:
    with open(os.path.join(HOME, "config.toml"), "w") as f:
        f.write('a = "' + "x" * (16 << 20) + '"\n')
    srv = Server(extra_env={"CODEX_HOME": HOME})
    try:
        srv.handshake()
        r = read(srv, "", [["a"]])
        eq(r.get("error"), {"code": -32603, "message":
                              "failed to load executor-local config: %s: larger than the "
                              "16777216-byte limit" % os.path.join(HOME, "config.toml")},
             "a config past the 16 MiB limit: refused, not truncated", r.get("error"))
        put("home/config.toml", cfg)
        r = read(srv, "", [["model"]])
        eq(norm(r.get("result")), want([user('model = "gpt-5"\n')]),
             "and the next read is answered", r)
    finally:
        srv.stop()
    put("home/config.toml", cfg)
    HAVE_WS = b"without the WebSocket transport" not in subprocess.run(
        [os.environ.get("CORDON", "cordon"), "serve", "--listen", "ws://127.0.0.1:1",
         "--max-sessions", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).stderr
    tok = put("tok/token", "secret-token-0123456789abcdef\n")
    os.chmod(tok, 0o600)
    thome = os.path.join(work, "thome")
    os.makedirs(thome)
    os.symlink(tok, os.path.join(thome, "config.toml"))
    srv = NetServer("ws", args=["--auth-token-file", tok], extra_env={"CODEX_HOME": thome})
    try:
        if not srv.ready and not HAVE_WS:
            t.skip("token: hidden", "this cordon was built without the WebSocket transport")
        else:
            c = srv.connect(token="secret-token-0123456789abcdef")
            c.handshake()
            r = c.request(M, {"cwd": uri(work), "configPaths": [["a"]],
                              "requirementsPaths": []})
            t.ok("secret-token" not in json.dumps(r) and r.get("error", {}).get("message") ==
                 "failed to load executor-local config: %s: one of the server's own files, "
                 "never read" % os.path.join(thome, "config.toml"),
                 "the server's token file is never read as a config layer", r)
    finally:
        srv.stop()

shutil.rmtree(work, ignore_errors=True)
t.done()
