#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# The man pages and --help document the same options, and those are the
# options cordon parses. For cordon itself and each command, three sets of
# option names must be equal:
#
#   - the options listed by `cordon [COMMAND] --help` (its lines "  -x, --y");
#   - the options the man page documents: the entries (a term line starting
#     with "-", its description indented below it) of the sections that hold
#     that command's options, as mandoc renders the page;
#   - the parser's option table (`cordon --list-options [COMMAND]`).
#
# Where the options live in the pages:
#   cordon          cordon(1) OPTIONS
#   cordon run      cordon(1) POLICY OPTIONS, RUN OPTIONS, the entries under
#                   "run" in COMMANDS, and -h/--help from OPTIONS
#   cordon explain  cordon(1) POLICY OPTIONS, the entries under "explain" in
#                   COMMANDS, and -h/--help from OPTIONS
#   cordon probe    the entries under "probe" in COMMANDS, -h/--help
#   cordon check    the entries under "check" in COMMANDS, -h/--help
#   cordon serve    cordon-serve(1) OPTIONS
# -h and --help are documented once, in cordon(1) OPTIONS, which says that
# every command takes them.
#
# `cordon --list-options [COMMAND]` is internal (the completions' test reads
# the tables through it): it is in no option table, in no --help and in no
# option entry of a page; cordon(1) only mentions it in prose.
#
# Skips when mandoc is missing (configure's MANDOC) or the pages were not
# generated (scdoc missing). TAP, Python standard library only.

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import CORDON, Tap  # noqa: E402

t = Tap()
MANDOC = os.environ.get("MANDOC", "")
MANDIR = os.path.join(os.environ.get("CD_BUILDDIR", "."), "man")
if not MANDOC:
    t.skip_all("mandoc not found (configure did not set MANDOC)")
for page in ("cordon.1", "cordon-serve.1"):
    if not os.path.isfile(os.path.join(MANDIR, page)):
        t.skip_all("%s/%s was not generated (scdoc missing?)" % (MANDIR, page))

COMMANDS = ("run", "explain", "probe", "check", "serve")
# command -> (page, [(section, COMMANDS item or None)])
SCOPES = {
    "": ("cordon.1", [("OPTIONS", None)]),
    "run": ("cordon.1", [("POLICY OPTIONS", None), ("RUN OPTIONS", None), ("COMMANDS", "run")]),
    "explain": ("cordon.1", [("POLICY OPTIONS", None), ("COMMANDS", "explain")]),
    "probe": ("cordon.1", [("COMMANDS", "probe")]),
    "check": ("cordon.1", [("COMMANDS", "check")]),
    "serve": ("cordon-serve.1", [("OPTIONS", None)]),
}
HELP_OPTS = {"-h", "--help"}
INTERNAL = {"--list-options"}
NAME = re.compile(r"^(--?[A-Za-z0-9][A-Za-z0-9-]*)")


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def names(spec):
    """The option names of "-v, --verbose" or "--x=ARG, --y ARG"."""
    out = set()
    for part in spec.split(", "):
        m = NAME.match(part.strip())
        if m:
            out.add(m.group(1))
    return out


def help_options(cmd):
    argv = [CORDON] + ([cmd] if cmd else []) + ["--help"]
    rc, out, err = run(argv)
    if rc != 0:
        t.diag("%s: exit %d: %s" % (" ".join(argv), rc, err))
        return None
    opts = set()
    for line in out.splitlines():
        # "  --opt ARG   text": two spaces, the option(s), two spaces or more
        if re.match(r"^  -", line):
            opts |= names(re.split(r"\s{2,}", line.strip())[0])
    return opts


def table_options(cmd):
    rc, out, err = run([CORDON, "--list-options"] + ([cmd] if cmd else []))
    if rc != 0:
        t.diag("cordon --list-options %s: exit %d: %s" % (cmd, rc, err))
        return None
    return {re.sub(r"(\[=\]|=)$", "", w) for w in out.split() if w.startswith("-")}


rendered = {}


def render(page):
    """The page as mandoc renders it, one line per paragraph (no filling)."""
    if page not in rendered:
        rc, out, err = run([MANDOC, "-Tascii", "-O", "width=1000",
                            os.path.join(MANDIR, page)])
        if rc != 0:
            t.diag("mandoc %s: exit %d: %s" % (page, rc, err))
        rendered[page] = re.sub(".\b", "", out).splitlines()
    return rendered[page]


def indent(line):
    return len(line) - len(line.lstrip(" "))


def entries(lines):
    """The option names of the entries in LINES: a line starting with "-"
    whose next line is indented deeper (its description)."""
    opts = set()
    for i, line in enumerate(lines[:-1]):
        nxt = lines[i + 1]
        if line.lstrip().startswith("-") and nxt.strip() and indent(nxt) > indent(line):
            opts |= names(line.strip())
    return opts


def section(page, name):
    lines, body, on = render(page), [], False
    for line in lines:
        if line and not line[0].isspace():
            on = line.strip() == name
            continue
        if on:
            body.append(line)
    return body


def item(body, word):
    """The lines of the COMMANDS item that starts with WORD (the item's own
    term line excluded)."""
    top = min((indent(x) for x in body if x.strip()), default=0)
    out, on = [], False
    for line in body:
        if line.strip() and indent(line) == top:
            on = line.split()[0] == word
            continue
        if on:
            out.append(line)
    return out


def man_options(cmd):
    page, scopes = SCOPES[cmd]
    opts = set()
    for sec, word in scopes:
        body = section(page, sec)
        if not body:
            t.diag("%s has no section %s" % (page, sec))
            return None
        if word is not None:
            body = item(body, word)
            if not body:
                t.diag("%s: %s has no item %s" % (page, sec, word))
                return None
        opts |= entries(body)
    if cmd:
        opts |= entries(section("cordon.1", "OPTIONS")) & HELP_OPTS
    return opts


def compare(got, want, what, gotname):
    if got is None or want is None:
        return t.not_ok(what)
    return t.ok(got == want, what,
                "only in %s: %s\nonly in the option table: %s"
                % (gotname, " ".join(sorted(got - want)) or "-",
                   " ".join(sorted(want - got)) or "-"))


for cmd in ("",) + COMMANDS:
    label = "cordon" + (" " + cmd if cmd else "")
    table = table_options(cmd)
    helped = help_options(cmd)
    man = man_options(cmd)
    page = SCOPES[cmd][0]
    compare(helped, table, "%s --help lists the options %s parses" % (label, label),
            "--help")
    compare(man, table, "%s documents the options %s parses" % (page, label), page)
    if table is not None:
        t.ok(not (table & INTERNAL), "%s: no internal option in its table" % label)

allman = set()
for page in ("cordon.1", "cordon-serve.1"):
    allman |= entries(render(page))
top = help_options("")
t.ok(top is not None and not (top & INTERNAL) and not (allman & INTERNAL),
     "internal options (%s) are in no --help and no option entry" % " ".join(sorted(INTERNAL)))
rc, out, _ = run([CORDON, "--list-options"])
t.ok(rc == 0 and "run" in out.split(), "cordon --list-options still prints the tables")
t.done()
