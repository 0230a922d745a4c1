#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# fs/writeFile and fs/copy on a full file system lose nothing: on a 1 MiB
# tmpfs a write or copy that does not fit fails and leaves the old file as
# it was and no partial or temporary file, unsandboxed and in a sandbox;
# one that fits replaces the file whole, keeping its mode, through a
# symlink keeping the link; a file with another hard link is written in
# place (both names see it); a recursive copy that breaks midway says
# where it stopped and what it left, and each file it left is whole.
# Sparse copies keep their holes (on the host's file system).
#
# As root the tmpfs is mounted here, for a root server and one run as the
# user cordon-test; otherwise the server runs in a user and mount
# namespace of its own that mounts it (unshare -Urm), or the tmpfs checks
# are skipped. Files on the tmpfs are seen through the server itself (its
# fs/ methods, and commands it runs), so the same checks work in every case.
# TAP.

import os
import pwd
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import rpcclient  # noqa: E402
from rpcclient import (CORDON, Server, Tap, b64, cordon_usable, err_msg, path_entry,  # noqa: E402
                       profile, special, unb64, uri)

t = Tap()
why = cordon_usable()
if why:
    t.skip_all(why)

KIB = 1024
MIB = 1024 * KIB
ROOT = os.geteuid() == 0
OLD = b"old contents\n" * 800  # 10 KB


def wrapper(d, argv_prefix):
    """A script that runs `cordon ...` as argv_prefix + [CORDON] + args."""
    path = os.path.join(d, "cordon-wrapper")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec %s \"$@\"\n" % " ".join("'%s'" % a for a in argv_prefix + [CORDON]))
    os.chmod(path, 0o755)
    return path


class Fs:
    """The server's view of the file system, through its methods."""

    def __init__(self, s):
        self.s = s

    def put(self, path, data, **kw):
        p = {"path": uri(path), "dataBase64": b64(data)}
        p.update(kw)
        return self.s.request("fs/writeFile", p, timeout=30)

    def get(self, path):
        r = self.s.request("fs/readFile", {"path": uri(path)}, timeout=30)
        return unb64(r["result"]["dataBase64"]) if "result" in r else None

    def ls(self, d):
        r = self.s.request("fs/readDirectory", {"path": uri(d)})
        return sorted(e["fileName"] for e in r.get("result", {}).get("entries", []))

    def sh(self, script):
        """Run a shell script as the server runs commands: (exit code, stdout)."""
        self.s.nsh = getattr(self.s, "nsh", 0) + 1
        pid = "sh%d" % self.s.nsh
        resp, res = self.s.run(pid, ["sh", "-c", script], timeout=30)
        if res is None:
            return None, resp
        return res.exit_code, res.stdout.decode(errors="replace")


def checks(tag, fs, d, src):
    """The tmpfs checks; d is an empty directory on a 1 MiB tmpfs, src one on the host."""
    f = os.path.join(d, "f")
    r = fs.put(f, OLD)
    t.ok(r.get("result") == {}, "[%s] a small file is written" % tag, r)
    big = os.urandom(1536 * KIB)
    r = fs.put(f, big)
    t.ok("No space left on device" in err_msg(r),
         "[%s] overwriting it with more than fits fails: no space" % tag, r)
    t.ok(fs.get(f) == OLD, "[%s] and the old contents are intact" % tag)
    t.eq(fs.ls(d), ["f"], "[%s] and no partial or temporary file is left" % tag)

    g = os.path.join(d, "g")
    r = fs.put(g, big)
    t.ok("No space left on device" in err_msg(r) and fs.ls(d) == ["f"],
         "[%s] a new file that does not fit leaves nothing" % tag, (r, fs.ls(d)))

    code, _ = fs.sh("chmod 640 '%s'" % f)
    new = b"new contents\n" * 100
    r = fs.put(f, new)
    code, out = fs.sh("stat -c %%a '%s'" % f)
    t.ok(r.get("result") == {} and fs.get(f) == new and out.strip() == "640",
         "[%s] a write that fits replaces the file whole and keeps its mode" % tag, (r, out))

    code, _ = fs.sh("cd '%s' && ln -s f link" % d)
    r = fs.put(os.path.join(d, "link"), b"via the link\n")
    code, _ = fs.sh("test -L '%s/link'" % d)
    t.ok(r.get("result") == {} and code == 0 and fs.get(f) == b"via the link\n",
         "[%s] a write through a symlink replaces its target, the link stays" % tag, r)
    fs.sh("rm -f '%s/link'" % d)

    code, _ = fs.sh("cd '%s' && ln f hard" % d)
    r = fs.put(f, b"shared\n")
    t.ok(r.get("result") == {} and fs.get(os.path.join(d, "hard")) == b"shared\n",
         "[%s] a file with another hard link is written in place: both names see it" % tag, r)
    fs.sh("rm -f '%s/hard'" % d)

    big_src = os.path.join(src, "big")
    r = fs.s.request("fs/copy", {"sourcePath": uri(big_src), "destinationPath": uri(f),
                                 "recursive": False}, timeout=30)
    t.ok("No space left on device" in err_msg(r) and fs.get(f) == b"shared\n" and
         fs.ls(d) == ["f"],
         "[%s] a copy onto it that does not fit leaves it intact, and nothing else" % tag, r)

    tree = os.path.join(src, "tree")
    cp = os.path.join(d, "cp")
    r = fs.s.request("fs/copy", {"sourcePath": uri(tree), "destinationPath": uri(cp),
                                 "recursive": True}, timeout=30)
    msg = err_msg(r)
    t.ok("No space left on device" in msg and "the copy stopped at `%s/sub/" % tree in msg and
         "is left in `%s`" % cp in msg,
         "[%s] a recursive copy that breaks midway says where, and what it left" % tag, msg)
    left = fs.ls(os.path.join(cp, "sub"))
    whole = all(fs.get(os.path.join(cp, "sub", n)) ==
                open(os.path.join(tree, "sub", n), "rb").read() for n in left)
    t.ok(left and whole and "files" in msg,
         "[%s] every file it left is whole (%d of 5)" % (tag, len(left)), left)
    fs.sh("rm -rf '%s'" % cp)
    return f


def sandboxed(tag, fs, d, f):
    sb = {"permissions": profile([special("root", "read"), path_entry(d, "write")]),
          "windowsSandboxLevel": "disabled", "cwd": uri(d)}
    r = fs.put(f, os.urandom(1536 * KIB), sandbox=sb)
    if r.get("error", {}).get("code") == -32602:
        t.skip("[%s] sandbox: a write that does not fit" % tag,
               "the sandbox cannot be enforced here: %s" % err_msg(r)[:200])
        return
    t.ok("No space left on device" in err_msg(r) and fs.get(f) == b"shared\n" and
         fs.ls(d) == ["f"],
         "[%s] sandbox: a write that does not fit leaves the old file, and nothing else" % tag,
         (r, fs.ls(d)))
    r = fs.put(f, b"from the sandbox\n", sandbox=sb)
    t.ok(r.get("result") == {} and fs.get(f) == b"from the sandbox\n",
         "[%s] sandbox: one that fits replaces it" % tag, r)


def run_mode(tag, d, src, prefix=None, args=()):
    saved = rpcclient.CORDON
    if prefix is not None:
        rpcclient.CORDON = wrapper(src, prefix)
    try:
        s = Server(args=list(args))
    finally:
        rpcclient.CORDON = saved
    try:
        s.handshake()
        fs = Fs(s)
        f = checks(tag, fs, d, src)
        sandboxed(tag, fs, d, f)
        fs.sh("rm -f '%s'/* '%s'/.[!.]*" % (d, d))
    finally:
        s.stop()


def sparse(base):
    sp = os.path.join(base, "sparse")
    with open(sp, "wb") as fh:
        fh.seek(1 << 30)
        fh.write(b"middle")
        fh.truncate(2 << 30)
    dst = sp + ".copy"
    s = Server()
    try:
        s.handshake()
        r = s.request("fs/copy", {"sourcePath": uri(sp), "destinationPath": uri(dst),
                                  "recursive": False}, timeout=120)
        st = os.stat(dst) if os.path.exists(dst) else None
        same = False
        if st:
            with open(dst, "rb") as fh:
                fh.seek((1 << 30) - 4)
                same = fh.read(10) == b"\0\0\0\0middle" and st.st_size == 2 << 30
        t.ok(r.get("result") == {} and same and st.st_blocks * 512 < MIB,
             "a 2 GiB sparse file is copied with its holes (%s bytes on disk)"
             % (st.st_blocks * 512 if st else "?"), r)
    finally:
        s.stop()
        for p in (sp, dst):
            if os.path.exists(p):
                os.unlink(p)


def main():
    base = tempfile.mkdtemp(prefix="cordon-fs-full-", dir="/var/tmp")
    os.chmod(base, 0o755)
    mounted = None
    try:
        src = os.path.join(base, "src")
        os.makedirs(os.path.join(src, "tree", "sub"))
        with open(os.path.join(src, "big"), "wb") as fh:
            fh.write(os.urandom(1536 * KIB))
        for k in range(5):
            with open(os.path.join(src, "tree", "sub", "f%d" % k), "wb") as fh:
                fh.write(os.urandom(300 * KIB))
        os.chmod(src, 0o755)
        d = os.path.join(base, "tmpfs")
        os.makedirs(d)
        t.guard("sparse", sparse, base)
        if ROOT:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", d],
                               capture_output=True)
            if r.returncode != 0:
                t.skip("full file system", "cannot mount a tmpfs: %r" % r.stderr)
                return
            mounted = d
            t.guard("root", run_mode, "root", d, src)
            setpriv = shutil.which("setpriv")
            try:
                pw = pwd.getpwnam("cordon-test")
            except KeyError:
                pw = None
            r = None
            if setpriv and pw:
                prefix = [setpriv, "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid,
                          "--clear-groups"]
                r = subprocess.run(prefix + [CORDON, "--version"], capture_output=True)
            if not r or r.returncode != 0:
                t.skip("[cordon-test] full file system",
                       "needs setpriv, the user cordon-test and a cordon it can run "
                       "(unprivileged.sh runs this script as that user)")
            else:
                t.guard("cordon-test", run_mode, "cordon-test", d, src, prefix)
        else:
            unshare = shutil.which("unshare")
            prefix = [unshare, "-Urm", "sh", "-c",
                      'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"', d] if unshare else None
            r = subprocess.run(prefix + ["true"], capture_output=True) if prefix else None
            if not r or r.returncode != 0:
                t.skip("full file system", "not root, and no user namespace to mount a tmpfs in: "
                       "%r" % (r.stderr if r else "no unshare"))
                return
            t.guard("user namespace", run_mode, "uid %d, own user namespace" % os.geteuid(),
                    d, src, prefix)
    finally:
        if mounted:
            subprocess.run(["umount", mounted])
        shutil.rmtree(base, ignore_errors=True)


main()
t.done()
