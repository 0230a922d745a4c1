#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Golden files for the Seatbelt and Windows plans.

For a matrix of profiles (the built-ins, restricted read with denies, deny
globs, missing protected names, a `gitdir:` workspace, several roots, each
network mode), `cordon explain --backend seatbelt|windows --json` is run on a
fixed tree and its plan compared, exactly, with tests/data/golden/NAME.txt:
the SBPL text, the -D list and the argv; the token, SIDs by role, every ACE
and the environment. The tree's own directory is written @WS@ and the
stand-in SIDs @SIDn@ (both change from run to run). A change to a plan shows
up as a diff here and in review; after a deliberate one, regenerate with
CORDON_UPDATE_GOLDEN=1 and read the diff.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import CORDON, Tap  # noqa: E402

t = Tap()
GOLDEN = os.path.join(os.environ.get("CD_SRCDIR", os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", "..")), "tests", "data", "golden")
UPDATE = os.environ.get("CORDON_UPDATE_GOLDEN") == "1"


def special(kind, access, subpath=None):
    value = {"kind": kind}
    if subpath:
        value["subpath"] = subpath
    return {"path": {"type": "special", "value": value}, "access": access}


def tree(base):
    ws = os.path.join(base, "ws")
    for d in ("ws/.git", "ws/src", "ws/secret", "ws/keys", "ws2", "gd/proj", "other"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    with open(os.path.join(base, "ws", "keys", "a.pem"), "w") as f:
        f.write("k")
    # A workspace whose .git is a gitdir: pointer (a worktree or a separated repository).
    with open(os.path.join(base, "ws2", ".git"), "w") as f:
        f.write("gitdir: %s\n" % os.path.join(base, "gd", "proj"))
    with open(os.path.join(base, "restricted.json"), "w") as f:
        json.dump({"version": 1, "type": "managed", "network": "restricted",
                   "file_system": {"type": "restricted", "entries": [
                       special("minimal", "read"),
                       special("project_roots", "read"),
                       special("project_roots", "none", "secret"),
                       special("project_roots", "write", "src")]}}, f)
    return ws


def sbpl_escape(path):
    """path as the Seatbelt planner writes it inside a regex."""
    return "".join("\\" + c if c in ".^$|()[]{}*+?\\" else c for c in path)


def normalise(text, base):
    # In a regex the base's special characters are escaped (distcheck's
    # cordon-X.Y.Z has dots): those forms first.
    for b in ("/private" + base, base):
        text = text.replace(sbpl_escape(b), "@WS@")
    text = text.replace("/private" + base, "@WS@").replace(base, "@WS@")
    text = text.replace("C:" + base.replace("/", "\\"), "@WS@")
    text = text.replace("C:" + base.replace("/", "\\\\"), "@WS@")
    sids = {}

    def sid(m):
        return sids.setdefault(m.group(0), "@SID%d@" % (len(sids) + 1))
    return re.sub(r"S-1-5-21-\d+-\d+-\d+-\d+", sid, text)


def render(d):
    """The plan of the backend explained, as stable text."""
    if d["backend"] == "seatbelt":
        sb = d["seatbelt"]
        out = ["sandboxed: %s" % sb["sandboxed"]]
        out += ["argv:"] + ["  " + ("@POLICY@" if i == 2 else a)
                            for i, a in enumerate(sb["argv"] or [])]
        out += ["notes:"] + ["  " + n for n in sb["notes"]]
        out += ["policy:", sb["policy"] or ""]
        return "\n".join(out) + "\n"
    w = d["windows"]
    for a in w["aces"]:
        # Whether /tmp's protected names exist is this host's business (and other
        # tests'): the ACE is planned either way, made first only when missing.
        if a["path"].startswith("C:\\tmp\\"):
            a["createDir"] = "made first when missing"
    return json.dumps(w, indent=1, sort_keys=True) + "\n"


CASES = [
    ("seatbelt-read-only", ["--backend", "seatbelt", "--profile", "read-only"]),
    ("seatbelt-workspace-write", ["--backend", "seatbelt", "--profile", "workspace-write",
                                 "--workspace-root", "@WS@/ws"]),
    ("seatbelt-full-access", ["--backend", "seatbelt", "--profile", "full-access"]),
    ("seatbelt-denies-and-globs", ["--backend", "seatbelt", "--profile", "workspace-write",
                                  "--workspace-root", "@WS@/ws", "--deny", "@WS@/ws/secret",
                                  "--deny-glob", "**/*.pem", "--deny-glob",
                                  "codex-project-roots://.env"]),
    ("seatbelt-restricted-read", ["--backend", "seatbelt", "--profile", "@WS@/restricted.json",
                                  "--workspace-root", "@WS@/ws"]),
    ("seatbelt-network-enabled", ["--backend", "seatbelt", "--profile", "workspace-write",
                                  "--workspace-root", "@WS@/ws", "--network", "enabled"]),
    ("seatbelt-several-roots", ["--backend", "seatbelt", "--profile", "workspace-write",
                                "--workspace-root", "@WS@/ws", "--workspace-root", "@WS@/ws2",
                                "--allow-write", "@WS@/other"]),
    ("windows-workspace-write", ["--backend", "windows", "--profile", "workspace-write",
                                 "--workspace-root", "@WS@/ws", "--allow-degraded=network"]),
    ("windows-read-only-network", ["--backend", "windows", "--profile", "read-only",
                                   "--network", "enabled"]),
    ("windows-several-roots", ["--backend", "windows", "--profile", "workspace-write",
                               "--workspace-root", "@WS@/ws", "--workspace-root", "@WS@/ws2",
                               "--allow-write", "@WS@/other", "--network", "enabled"]),
    ("windows-full-access", ["--backend", "windows", "--profile", "full-access"]),
]



# The plans list roots in path order, /tmp's among them (workspace-write makes
# it a writable root), and a macOS plan notes paths below /var as /private/var:
# so the tree's place changes the plans. The golden files were made with the
# tree in /dev/shm (outside /tmp and /var, sorting before /tmp, writable by
# every user on Linux), wherever the build tree is: CI's clone is in /tmp.
# mkdtemp's names have no '.', which a regex would escape.
if not (os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK)
        and os.path.realpath("/dev/shm") == "/dev/shm"):
    t.skip_all("the golden files' tree goes in /dev/shm, which is not a writable folder here")
base = os.path.realpath(tempfile.mkdtemp(prefix="cordon-golden-", dir="/dev/shm"))
try:
    ws = tree(base)
    env = dict(os.environ)
    env.pop("TMPDIR", None)
    for name, args in CASES:
        argv = [CORDON, "explain", "--json", "--cwd", ws] + [a.replace("@WS@", base) for a in args]
        p = subprocess.run(argv, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            t.not_ok("%s: explain runs" % name, p.stderr)
            continue
        got = normalise(render(json.loads(p.stdout)), base)
        path = os.path.join(GOLDEN, name + ".txt")
        if UPDATE:
            with open(path, "w") as f:
                f.write(got)
        try:
            with open(path) as f:
                want = f.read()
        except FileNotFoundError:
            t.not_ok("%s: golden file exists" % name, path)
            continue
        if got == want:
            t.ok(True, "%s: the plan matches its golden file" % name)
        else:
            import difflib
            diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                "golden", "now"))
            t.not_ok("%s: the plan matches its golden file" % name, diff[:4000])
finally:
    subprocess.run(["rm", "-rf", base])
t.done()
