#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# cordon's own proxy (cordon run --network managed) confines itself before
# it reads a client byte (sandbox/linux/confine.h): its /proc status shows
# no_new_privs, a seccomp filter, no capability and, as root, nobody's ids
# (or --proxy-user's); once confined, the test hook CORDON_TEST_PROXY_PROBE
# makes it try what a taken-over proxy would (exec, fork, ptrace, raw,
# packet and unix sockets, a TCP bind, files outside the resolver's, an
# executable mapping, setuid 0) and the kernel refuses each; names still
# resolve, through the test resolver and through /etc/hosts (localhost);
# a confinement step that cannot be taken refuses the run (125). And the
# audit trail of --json-audit / --audit-file: one JSON object per decision,
# parsed here. Root and unprivileged (unprivileged.sh runs it again as
# another user). TAP.

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from rpcclient import CORDON, Tap  # noqa: E402
from upstream import serve_upstream  # noqa: E402

t = Tap()
ROOT = os.geteuid() == 0
WHO = "root" if ROOT else "unprivileged"
BASE = tempfile.mkdtemp(prefix="cordon-pxconfine.", dir="/var/tmp")
atexit.register(shutil.rmtree, BASE, True)
os.chmod(BASE, 0o755)


HTTP = serve_upstream()
PORT = HTTP.server_address[1]

ENV = dict(os.environ)
ENV.pop("CORDON_TEST_DISABLE", None)
ENV.pop("TMPDIR", None)
if os.environ.get("CD_POLICYDIR"):
    ENV["CORDON_POLICY_PATH"] = os.environ["CD_POLICYDIR"]
HOOK = dict(ENV, CORDON_TEST_PROXY_RESOLVE="ok.test=127.0.0.1,denied.test=127.0.0.1")
RULES = ["--allow-domain", "ok.test", "--deny-domain", "denied.test",
         "--allow-cidr", "127.0.0.0/8"]
FETCH = ("import sys, urllib.request\n"
         "try:\n"
         "    r = urllib.request.urlopen(sys.argv[1], timeout=60)\n"
         "    print(r.status, r.read().decode())\n"
         "except urllib.error.HTTPError as e:\n"
         "    print(e.code, e.read().decode())\n")


def run(args, env=None, timeout=120):
    p = subprocess.run([CORDON] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env or HOOK, timeout=timeout, cwd=BASE)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def managed(extra, cmd, env=None):
    return run(["run", "--network", "managed"] + extra + ["--"] + cmd, env=env)


def landlock_abi():
    rc, out, _ = run(["probe"])
    m = re.search(r"landlock: ABI (\d+)", out)
    return int(m.group(1)) if m else 0


ABI = landlock_abi()


# A file cordon inherits (not close-on-exec), as from a careless caller.
INHERITED = os.path.join(BASE, "inherited")
with open(INHERITED, "w") as f:
    f.write("cordon's caller's")
INHERITED_FD = os.dup2(os.open(INHERITED, os.O_RDONLY), 100)


def status_of_proxy(extra):
    """/proc/PID/status of the proxy while a managed run waits on its stdin (and "fds":
    where its descriptors lead, when we may look)."""
    p = subprocess.Popen([CORDON, "run", "-v", "--network", "managed"] + RULES + extra +
                         ["--", sys.executable, "-c", "import sys; print('up', flush=True); "
                          "sys.stdin.read()"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=HOOK, cwd=BASE, pass_fds=(INHERITED_FD,))
    pid, st = None, {}
    for line in p.stderr:
        m = re.match(r"cordon: managed network: cordon's proxy, pid (\d+),",
                     line.decode(errors="replace"))
        if m:
            pid = int(m.group(1))
            break
    for line in p.stderr:
        m = re.match(r"cordon: managed network: cordon's proxy runs as uid (\d+) gid (\d+), ",
                     line.decode(errors="replace"))
        if m:
            st["said"] = [m.group(1), m.group(2)]
            break
    up = p.stdout.readline().strip() == b"up"
    if pid and up:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.split()
        try:
            st["fds"] = [os.readlink("/proc/%d/fd/%s" % (pid, fd))
                         for fd in os.listdir("/proc/%d/fd" % pid)]
        except PermissionError:
            pass
        # Its keeper (its parent, unconfined): holds nothing but /dev/null.
        try:
            with open("/proc/%d/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            st["keeper fds"] = sorted(os.readlink("/proc/%d/fd/%s" % (ppid, fd))
                                      for fd in os.listdir("/proc/%d/fd" % ppid))
        except (OSError, ValueError, IndexError):
            pass
    p.communicate(input=b"", timeout=120)
    return st


# ---- the proxy's process, seen from outside

st = status_of_proxy([])
t.ok(st.get("NoNewPrivs") == ["1"], "[%s] the proxy runs with no_new_privs" % WHO, repr(st))
t.ok(st.get("Seccomp") == ["2"] and int(st.get("Seccomp_filters", ["1"])[0]) >= 1,
     "[%s] the proxy runs under a seccomp filter" % WHO, repr(st))
if "fds" in st:
    t.ok(INHERITED not in st["fds"],
         "[%s] the proxy holds none of cordon's inherited files" % WHO, repr(st["fds"]))
else:
    t.skip("[%s] the proxy holds none of cordon's inherited files" % WHO,
           "the proxy is not dumpable: its user cannot list its descriptors")
t.eq(st.get("keeper fds"), ["/dev/null"] * 3,
     "[%s] its keeper holds no descriptor but /dev/null on 0, 1 and 2" % WHO)
t.ok(st.get("CapEff") == ["0000000000000000"] and st.get("CapPrm") == ["0000000000000000"] and
     st.get("CapAmb", ["0000000000000000"]) == ["0000000000000000"],
     "[%s] the proxy has no capability" % WHO, repr(st))
if ROOT:
    t.ok(st.get("Uid") == ["65534"] * 4 and st.get("Gid") == ["65534"] * 4 and
         st.get("said") == ["65534", "65534"] and
         st.get("Groups") == [] and st.get("CapBnd") == ["0000000000000000"],
         "[root] the proxy runs as nobody:nogroup, no groups, an empty bounding set", repr(st))
    st = status_of_proxy(["--proxy-user", "4242:4343"])
    t.ok(st.get("Uid") == ["4242"] * 4 and st.get("Gid") == ["4343"] * 4,
         "[root] --proxy-user 4242:4343 gives the proxy those ids", repr(st))
else:
    uid = str(os.getuid())
    t.ok(st.get("Uid") == [uid] * 4 and st.get("said", [""])[0] == uid,
         "[unprivileged] the proxy runs as the user", repr(st))
    t.skip("[unprivileged] --proxy-user", "needs root")

# ---- what a taken-over proxy would try


rc, out, err = managed(RULES, ["true"], env=dict(HOOK, CORDON_TEST_PROXY_PROBE="1"))
m = re.search(r"test hook CORDON_TEST_PROXY_PROBE: (.*)$", err, re.M)
got = dict(kv.split("=", 1) for kv in m.group(1).split()) if m else {}
want = {"execve": "EPERM", "fork": "EPERM", "ptrace": "EPERM", "setuid-0": "EPERM",
        "mmap-exec": "EPERM", "socket-raw": "EPERM", "socket-packet": "EPERM",
        "socket-unix": "EPERM", "socket-unix-dgram": "EPERM",
        "socket-tcp": "ok", "socket-udp": "ok", "open-hosts": "ok"}
t.ok(rc == 0 and all(got.get(k) == v for k, v in want.items()),
     "[%s] seccomp: no exec, fork, ptrace, setuid, executable mapping, raw, packet or unix "
     "socket; TCP and UDP sockets yes" % WHO, err)
if ABI >= 1:
    t.ok(got.get("open-passwd") == "EACCES" and got.get("create-tmp") == "EACCES",
         "[%s] Landlock: no file outside the resolver's (/etc/passwd, a new file in /tmp)" %
         WHO, err)
else:
    t.skip("[%s] Landlock file rules" % WHO, "no Landlock on this kernel")
if ABI >= 4:
    t.ok(got.get("bind-tcp") == "EACCES", "[%s] Landlock: no TCP bind" % WHO, err)
else:
    t.skip("[%s] Landlock: no TCP bind" % WHO, "Landlock ABI < 4: no network rules")

# ---- names still resolve

rc, out, err = managed(RULES, [sys.executable, "-c", FETCH, "http://ok.test:%d/" % PORT])
t.ok(rc == 0 and out.startswith("200 hello from upstream"),
     "[%s] confined, the proxy serves a name of the test resolver" % WHO, out + err)
ENV_NOHOOK = dict(ENV)
ENV_NOHOOK.pop("CORDON_TEST_PROXY_RESOLVE", None)
# localhost is in every /etc/hosts; NO_PROXY names it, so urllib is told to ask the proxy.
FETCH_ALL = "import os\nos.environ.pop('no_proxy', None)\nos.environ.pop('NO_PROXY', None)\n"
rc, out, err = managed(["--allow-domain", "localhost", "--allow-cidr", "127.0.0.0/8",
                        "--allow-cidr", "::1/128"],
                       [sys.executable, "-c", FETCH_ALL + FETCH, "http://localhost:%d/" % PORT],
                       env=ENV_NOHOOK)
t.ok(rc == 0 and out.startswith("200 hello from upstream") and
     re.search(r"proxy: allow GET localhost:%d address=(127\.0\.0\.1|::1) " % PORT, err),
     "[%s] confined, the proxy resolves a name of /etc/hosts with getaddrinfo" % WHO,
     out + err)

# A real DNS lookup (UDP to the nameserver of resolv.conf) from the confined proxy: as root, a
# mount namespace of the test's whose /etc/resolv.conf names a responder of the test's on
# 127.0.0.1:53, which answers dns.test with 127.0.0.1 and nothing else.


def dns_responder(sock):
    while True:
        try:
            q, peer = sock.recvfrom(512)
        except OSError:
            return
        if len(q) < 17:
            continue
        i, labels = 12, []
        while i < len(q) and q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace"))
            i += 1 + q[i]
        qtype = int.from_bytes(q[i + 1:i + 3], "big")
        question = q[12:i + 5]
        name = ".".join(labels).lower()
        ok = name == "dns.test"
        answer = b""
        if ok and qtype == 1:
            answer = (b"\xc0\x0c" + (1).to_bytes(2, "big") + (1).to_bytes(2, "big") +
                      (60).to_bytes(4, "big") + (4).to_bytes(2, "big") + bytes([127, 0, 0, 1]))
        flags = 0x8180 if ok else 0x8183  # a response, recursion; NXDOMAIN when not ours
        hdr = (q[:2] + flags.to_bytes(2, "big") + (1).to_bytes(2, "big") +
               (1 if answer else 0).to_bytes(2, "big") + bytes(4))
        sock.sendto(hdr + question + answer, peer)


UNSHARE = shutil.which("unshare")
if ROOT and UNSHARE:
    import socket
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        dns.bind(("127.0.0.1", 53))
    except OSError as e:
        dns.close()
        dns = None
        why = "127.0.0.1:53 is taken (%s)" % e
if ROOT and UNSHARE and dns:
    threading.Thread(target=dns_responder, args=(dns,), daemon=True).start()
    conf = os.path.join(BASE, "resolv.conf")
    with open(conf, "w") as f:
        f.write("nameserver 127.0.0.1\noptions attempts:1\n")
    os.chmod(conf, 0o644)
    script = ('mount --bind "$1" /etc/resolv.conf && shift && exec "$@"')
    p = subprocess.run([UNSHARE, "-m", "sh", "-c", script, "sh", conf, CORDON, "run",
                        "--network", "managed", "--allow-domain", "dns.test",
                        "--allow-domain", "nx.test", "--allow-cidr", "127.0.0.0/8", "--",
                        "sh", "-c", '"$0" -c "$1" http://dns.test:%d/ && '
                        '"$0" -c "$1" http://nx.test/' % PORT, sys.executable, FETCH],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV_NOHOOK,
                       cwd=BASE, timeout=120)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    t.ok(p.returncode == 0 and out.startswith("200 hello from upstream") and
         re.search(r"proxy: allow GET dns\.test:%d address=127\.0\.0\.1 " % PORT, err) and
         re.search(r"proxy: deny GET nx\.test:80 .*does not resolve", err),
         "[root] confined, the proxy asks the nameserver of resolv.conf over UDP (an answer, "
         "and NXDOMAIN)", out + err)
    dns.close()
else:
    t.skip("[%s] a lookup through a nameserver" % WHO,
           "needs root (a mount namespace, port 53)" if not ROOT else
           "no unshare" if not UNSHARE else why)

# ---- fail closed

for arg in ("0", "abc", "12:", ":12", "12:0", "-1", "99999999999"):
    rc, out, err = managed(RULES + ["--proxy-user", arg], ["true"])
    t.ok(rc == 2 and "--proxy-user" in err,
         "[%s] --proxy-user %s is a usage error" % (WHO, arg), err)
rc, out, err = run(["run", "--json-audit", "--", "true"])
t.ok(rc == 2 and "--json-audit is about cordon's own proxy" in err,
     "[%s] --json-audit without cordon's proxy is a usage error" % WHO, err)
rc, out, err = managed(RULES + ["--audit-file", BASE + "/no/such/dir/audit"], ["true"])
t.ok(rc == 125 and "--audit-file: cannot open" in err,
     "[%s] an --audit-file that cannot be opened refuses the run" % WHO, err)
# Root whose user namespace does not map nobody: the proxy cannot change to it.
ok_userns = UNSHARE and subprocess.run([UNSHARE, "-U", "-r", "true"],
                                       stderr=subprocess.DEVNULL).returncode == 0
if ok_userns:
    p = subprocess.run([UNSHARE, "-U", "-r", CORDON, "run", "--network", "managed"] + RULES +
                       ["--", "true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=HOOK, cwd=BASE, timeout=120)
    err = p.stderr.decode(errors="replace")
    t.ok(p.returncode == 125 and "cannot confine itself: changing to gid 65534" in err and
         "--proxy-user" in err,
         "[%s] root without nobody in its user namespace: the proxy refuses to start, the "
         "run is refused with the step and the fix" % WHO, err)
else:
    t.skip("[%s] root without nobody mapped" % WHO, "no user namespace for this user (unshare -U -r)")

# ---- the audit trail as JSON


def json_lines(text):
    objs = []
    for line in text.splitlines():
        if line.startswith("{"):
            objs.append(json.loads(line))
    return objs


rc, out, err = managed(RULES + ["--json-audit"],
                       ["sh", "-c", "%s -c \"$1\" http://ok.test:%d/ && %s -c \"$1\" "
                        "http://denied.test:%d/" % (sys.executable, PORT, sys.executable, PORT),
                        "sh", FETCH])
try:
    objs = json_lines(err)
except ValueError as e:
    objs = None
    err += "\n" + str(e)
allow = [o for o in objs or [] if o.get("decision") == "allow"]
deny = [o for o in objs or [] if o.get("decision") == "deny"]
t.ok(rc == 0 and objs is not None and len(objs) == 2,
     "[%s] --json-audit: one JSON object a decision on stderr" % WHO, err)
t.ok(len(allow) == 1 and allow[0]["event"] == "proxy" and allow[0]["host"] == "ok.test" and
     allow[0]["port"] == PORT and allow[0]["address"] == "127.0.0.1" and
     allow[0]["method"] == "GET" and "allow-domain ok.test" in allow[0]["rule"] and
     allow[0]["sent"] > 0 and allow[0]["received"] > len("hello from upstream"),
     "[%s] the allowed request: name, port, address, rule and bytes both ways" % WHO, err)
t.ok(len(deny) == 1 and deny[0]["host"] == "denied.test" and deny[0]["status"] == 403 and
     "deny-domain denied.test" in deny[0]["rule"] and deny[0]["sent"] == 0 and
     deny[0]["received"] == 0,
     "[%s] the denied request: its rule and status 403" % WHO, err)
t.ok("cordon: proxy:" not in err, "[%s] --json-audit: no text audit line" % WHO, err)

AUDIT = os.path.join(BASE, "audit.jsonl")
rc, out, err = managed(RULES + ["--json-audit", "--audit-file", AUDIT],
                       [sys.executable, "-c", FETCH, "http://ok.test:%d/" % PORT])
try:
    with open(AUDIT) as f:
        objs = json_lines(f.read())
except (OSError, ValueError) as e:
    objs = []
    err += "\n" + str(e)
t.ok(rc == 0 and len(objs) == 1 and objs[0]["decision"] == "allow" and
     objs[0]["host"] == "ok.test" and "{" not in err and "cordon: proxy:" not in err,
     "[%s] --audit-file: the JSON objects go to the file, none to stderr" % WHO, err)
t.ok((os.stat(AUDIT).st_mode & 0o777) == 0o600, "[%s] the audit file is made 0600" % WHO,
     oct(os.stat(AUDIT).st_mode))
rc, out, err = managed(RULES + ["--audit-file", AUDIT],
                       [sys.executable, "-c", FETCH, "http://ok.test:%d/" % PORT])
with open(AUDIT) as f:
    lines = f.read().splitlines()
t.ok(rc == 0 and len(lines) == 2 and lines[0].startswith("{") and
     re.search(r"proxy: allow GET ok\.test:%d address=127\.0\.0\.1 " % PORT, lines[1]) and
     "cordon: proxy:" not in err,
     "[%s] --audit-file without --json-audit: text lines, appended" % WHO, "\n".join(lines))
t.ok("writable inside the sandbox" not in err,
     "[%s] an --audit-file the profile does not let the command write: no warning" % WHO, err)
# One the command could rewrite is no record of what it did: cordon says so.
TMP_AUDIT = tempfile.mktemp(prefix="cordon-audit.", dir="/tmp")
try:
    rc, out, err = managed(["--profile", "workspace-write"] + RULES
                           + ["--audit-file", TMP_AUDIT], ["true"])
finally:
    if os.path.exists(TMP_AUDIT):
        os.unlink(TMP_AUDIT)
t.ok(rc == 0 and ("warning: --audit-file '%s' is writable inside the sandbox (entry 2 "
                  "(:slash_tmp, write))" % TMP_AUDIT) in err,
     "[%s] an --audit-file inside a writable root: a warning naming the rule" % WHO, err)
# -q silences cordon's messages, never its audit trail: on stderr, in the file.
rc, out, err = run(["run", "-q", "--network", "managed"] + RULES + ["--audit-file", AUDIT, "--"]
                   + [sys.executable, "-c", FETCH, "http://ok.test:%d/" % PORT])
with open(AUDIT) as f:
    lines = f.read().splitlines()
t.ok(rc == 0 and len(lines) == 3 and re.search(r"proxy: allow GET ok\.test:%d " % PORT, lines[2]),
     "[%s] -q: the text audit line still goes to the --audit-file" % WHO, "\n".join(lines) + err)
rc, out, err = run(["run", "-q", "--network", "managed"] + RULES + ["--"]
                   + [sys.executable, "-c", FETCH, "http://ok.test:%d/" % PORT])
t.ok(rc == 0 and re.search(r"cordon: proxy: allow GET ok\.test:%d " % PORT, err),
     "[%s] -q: and to stderr without one" % WHO, err)

t.done()
