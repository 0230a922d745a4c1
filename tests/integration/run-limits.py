#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Resource limits under `cordon run`: the options, what explain shows, and
# real commands stopped at their limits while the host and other sandboxes
# carry on: a fork bomb (tasks), a memory hog (memory), disk fillers
# (file-size, a private /tmp), a busy loop (cpu-time), a taker of inotify
# instances and watches (inotify-*). Where this host
# cannot enforce a limit (no cgroup v2 controller; RLIMIT_NPROC does not
# apply to root), the refusal is checked instead, and the limit runs again
# with --allow-degraded. Root and unprivileged (unprivileged.sh runs it
# again as another user). TAP.

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rpcclient import CORDON, INOTIFY_PROBE as INOTIFY, Tap, pids_by_cmdline  # noqa: E402

t = Tap()
ENV = dict(os.environ)
ENV.pop("CORDON_TEST_DISABLE", None)
if os.environ.get("CD_POLICYDIR"):
    ENV["CORDON_POLICY_PATH"] = os.environ["CD_POLICYDIR"]
ROOT = os.geteuid() == 0
WHO = "root" if ROOT else "unprivileged"
# Outside /tmp: the private /tmp tests need a workspace it does not hide.
BASE = tempfile.mkdtemp(prefix="cordon-limits.", dir="/var/tmp")
atexit.register(shutil.rmtree, BASE, True)
os.chmod(BASE, 0o755)
WS = os.path.join(BASE, "ws")
os.mkdir(WS)


def run(args, env=None, timeout=120, **kw):
    """cordon ARGS...; (status, stdout, stderr) as text."""
    p = subprocess.run([CORDON] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env or ENV, timeout=timeout, cwd=WS, **kw)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def wsrun(limits, argv, profile="workspace-write", env=None, timeout=120):
    return run(["run", "--profile", profile, "--workspace-root", WS, "--cwd", WS] + limits +
               ["--"] + argv, env=env, timeout=timeout)


def explain(limits, profile="workspace-write", env=None):
    """explain --json; (status, the JSON or None, stderr)."""
    rc, out, err = run(["explain", "--json", "--profile", profile, "--workspace-root", WS] +
                       limits, env=env)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, err + out


def by(limits, name):
    """How explain says a limit would be enforced here ("cgroup", "rlimit", ...), or None."""
    rc, j, err = explain(limits)
    if rc != 0 or not j or not j["linux"]["limits"]:
        return None
    return j["linux"]["limits"].get(name, {}).get("by")


# ---- options and explain

rc, out, err = run(["run", "--limit-memory", "lots", "--", "true"])
t.ok(rc == 2 and "memory: 'lots' is not a size" in err, "[%s] a bad size is a usage error" % WHO,
     err)
rc, out, err = run(["run", "--limit-tasks", "0", "--", "true"])
t.ok(rc == 2 and "tasks must be from 1" in err, "[%s] a value out of range is a usage error" % WHO,
     err)
rc, out, err = run(["run", "--private-tmp=8Q", "--", "true"])
t.ok(rc == 2 and "private-tmp" in err, "[%s] --private-tmp=SIZE is checked" % WHO, err)
rc, out, err = run(["run", "--allow-degraded=memroy", "--", "true"])
t.ok(rc == 2 and "tasks, memory, swap, cpu, inotify-instances or inotify-watches" in err,
     "[%s] --allow-degraded names the limits it knows" % WHO, err)

rc, j, err = explain(["--limit-open-files", "64", "--limit-cpu-time", "2m",
                      "--limit-file-size", "1M", "--limit-core", "0"])
lim = j["linux"]["limits"] if j else None
t.ok(rc == 0 and lim and lim["open_files"] == {"value": 64, "by": "rlimit",
                                               "detail": lim["open_files"]["detail"]},
     "[%s] explain --json: each limit with its value and how it is enforced" % WHO, (rc, j, err))
t.ok(lim and lim["cpu_time"]["value"] == 120 and "RLIMIT_CPU" in lim["cpu_time"]["detail"],
     "[%s] explain: cpu-time is RLIMIT_CPU, per process" % WHO, lim)
rc, out, err = run(["explain", "--limit-open-files", "64", "--private-tmp=32M", "--profile",
                    "workspace-write", "--workspace-root", WS])
t.ok(rc == 0 and "limits:" in out and "open-files  64" in out and "private-tmp 32 MiB" in out,
     "[%s] explain: the limits in its text" % WHO, out + err)
# A profile's limits, with the command line's over them.
pol = os.path.join(BASE, "limited.json")
with open(pol, "w") as f:
    json.dump({"version": 1, "type": "read-only", "limits": {"open_files": 32,
                                                            "file_size": "2M"}}, f)
rc, j, err = explain(["--limit-open-files", "48"], profile=pol)
lim = j["linux"]["limits"] if j else {}
t.ok(rc == 0 and lim.get("open_files", {}).get("value") == 48 and
     lim.get("file_size", {}).get("value") == 2 << 20,
     "[%s] a profile's limits, the command line's over them" % WHO, (j, err))
with open(pol, "w") as f:
    json.dump({"version": 1, "type": "read-only", "limits": {"open_file": 32}}, f)
rc, out, err = run(["check", pol])
t.ok(rc == 1 and "unknown key \"open_file\"" in err + out,
     "[%s] cordon check: a misspelled limit is an error" % WHO, err + out)

# ---- rlimits, exact for what they say

rc, out, err = wsrun(["--limit-open-files", "64", "--limit-core", "0"],
                     ["sh", "-c", "ulimit -n; ulimit -c"])
t.eq((rc, out.split()), (0, ["64", "0"]), "[%s] open-files and core reach the command" % WHO)
rc, out, err = wsrun(["--limit-cpu-time", "1"], ["sh", "-c", "while :; do :; done"])
t.ok(rc == 128 + signal.SIGXCPU and "killed: CPU time limit 1 s reached" in err,
     "[%s] a busy loop is stopped at its CPU time (SIGXCPU), and run says why" % WHO, (rc, err))

# Disk filler: the file stops at the limit; the workspace and other sandboxes carry on.
big = os.path.join(WS, "big")
rc, out, err = wsrun(["--limit-file-size", "1M"], ["sh", "-c", "exec cat /dev/zero > big"])
t.ok(rc == 128 + signal.SIGXFSZ and "killed: file size limit 1 MiB reached" in err,
     "[%s] a disk filler is killed at its file size limit, and run says why" % WHO, (rc, err))
t.eq(os.path.getsize(big) if os.path.exists(big) else -1, 1 << 20,
     "[%s] the file it wrote stopped at 1 MiB" % WHO)
rc, out, err = wsrun([], ["sh", "-c", "head -c 3145728 /dev/zero > other && wc -c < other"])
t.eq((rc, out.strip()), (0, "3145728"), "[%s] another sandbox writes more than that" % WHO)

# The private /tmp: a tmpfs of its own size, the host's /tmp out of sight.
marker = tempfile.NamedTemporaryFile(prefix="cordon-limits-host.", dir="/tmp", delete=False)
marker.close()
rc, out, err = wsrun(["--private-tmp=4M"],
                     ["sh", "-c", "ls -A /tmp | wc -l; cat /dev/zero > /tmp/fill; echo $?; "
                      "wc -c < /tmp/fill"])
lines = out.split()
t.ok(rc == 0 and lines[:1] == ["0"], "[%s] a private /tmp starts empty (the host's is hidden)" %
     WHO, (rc, out, err))
t.ok(len(lines) == 3 and lines[1] != "0" and int(lines[2]) <= 4 << 20 and
     "No space left" in err, "[%s] a filler of the private /tmp stops at its size" % WHO,
     (out, err))
t.ok(os.path.exists(marker.name) and not os.path.exists("/tmp/fill"),
     "[%s] the host's /tmp is untouched" % WHO)
os.unlink(marker.name)
rc, out, err = wsrun(["--private-tmp"], ["sh", "-c", "df -k /tmp | tail -n 1"])
t.ok(rc == 0 and out.split()[1:2] == ["1048576"], "[%s] --private-tmp alone: 1 GiB" % WHO,
     (out, err))
rc, out, err = wsrun(["--private-tmp"], ["sh", "-c", "echo x > /tmp/f"], profile="read-only")
t.ok(rc != 0 and "denied" in err.lower(),
     "[%s] the private /tmp has the policy's access to /tmp (read-only here)" % WHO, (rc, err))
tmpws = tempfile.mkdtemp(prefix="cordon-limits-ws.", dir="/tmp")
rc, out, err = run(["run", "--profile", "workspace-write", "--workspace-root", tmpws,
                    "--private-tmp", "--", "true"])
t.ok(rc == 125 and "is under /tmp" in err,
     "[%s] a workspace under /tmp is refused with a private /tmp (it would be hidden)" % WHO,
     (rc, err))
shutil.rmtree(tmpws)
rc, out, err = run(["run", "--profile", "full-access", "--private-tmp", "--", "true"])
t.ok(rc == 125 and "needs a sandbox" in err, "[%s] a private /tmp needs a sandbox" % WHO,
     (rc, err))

# ---- a fork bomb

BOMB = r"""
import os, signal, sys
# Every process forks until the kernel says no; each success is a "+",
# each refusal a "!" (then it waits to be killed). Nothing else is written.
def say(b):
    os.write(1, b)
while True:
    try:
        pid = os.fork()
    except BlockingIOError:
        say(b"!")
        signal.pause()
        continue
    if pid:
        say(b"+")
"""


def fork_bomb(limits, desc, other_limits=()):
    """Run the bomb under limits; check it is stopped while the rest carries on."""
    p = subprocess.Popen([CORDON, "run", "--profile", "read-only"] + limits +
                         ["--", "python3", "-c", BOMB], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV, cwd=WS)
    got = b""
    try:
        # Until the first refusal: the bomb is at its limit, and stays there.
        while b"!" not in got:
            b = p.stdout.read1(4096) if hasattr(p.stdout, "read1") else os.read(
                p.stdout.fileno(), 4096)
            if not b:
                break
            got += b
        t.ok(b"!" in got, "[%s] %s: the bomb hits its limit" % (WHO, desc),
             p.stderr.read().decode() if p.poll() is not None else got)
        # Meanwhile: the host forks, another sandbox starts and forks.
        h = subprocess.run(["sh", "-c", "sh -c 'echo host' & wait"], stdout=subprocess.PIPE,
                           timeout=60)
        t.eq(h.stdout, b"host\n", "[%s] %s: the host still forks" % (WHO, desc))
        rc, out, err = run(["run", "--profile", "read-only"] + list(other_limits) +
                           ["--", "sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sh -c : & done; "
                            "wait; echo other"])
        t.eq((rc, out), (0, "other\n"), "[%s] %s: another sandbox still forks" % (WHO, desc))
    finally:
        # SIGTERM reaches the bomb's process group; its init takes the rest.
        p.send_signal(signal.SIGTERM)
        rest, err = p.communicate(timeout=60)
    got += rest
    n = got.count(b"+")
    limit = int(limits[limits.index("--limit-tasks") + 1])
    # The init and the first python are two of the tasks.
    t.ok(0 < n <= limit - 2, "[%s] %s: %d forks succeeded, within %d tasks" % (WHO, desc, n,
                                                                              limit), err)


how = by(["--limit-tasks", "24"], "tasks")
env_nocg = dict(ENV, CORDON_TEST_DISABLE="cgroup")
if how in ("cgroup", "rlimit"):
    t.diag("tasks are enforced here by %s" % how)
    t.guard("fork bomb", fork_bomb, ["--limit-tasks", "24"], "tasks (%s)" % how)
    if how == "cgroup":
        # The same bomb without cgroups (the kernel says why, or RLIMIT_NPROC is exact).
        how2 = None
        rc, j, err = explain(["--limit-tasks", "24"], env=env_nocg)
        if j and j["linux"]["limits"]:
            how2 = j["linux"]["limits"]["tasks"]["by"]
        if how2 == "rlimit":
            e = ENV
            ENV = env_nocg
            t.guard("fork bomb", fork_bomb, ["--limit-tasks", "24"], "tasks (rlimit)")
            ENV = e
else:
    rc, out, err = run(["run", "--limit-tasks", "24", "--", "true"])
    t.ok(rc == 125 and "task limit 24 cannot be enforced" in err and
         "--allow-degraded=tasks" in err,
         "[%s] without a pids controller, a task limit is refused here" % WHO, (rc, err))
    t.skip("[%s] a fork bomb stopped at its task limit" % WHO,
           "this host cannot enforce a task limit for %s: %s" % (WHO, err.strip()[:300]))
    rc, out, err = run(["run", "--limit-tasks", "24", "--allow-degraded=tasks", "--", "true"])
    t.ok(rc == 0 and "task limit 24 NOT enforced" in err,
         "[%s] --allow-degraded=tasks runs without it, and says so" % WHO, (rc, err))

# ---- the refusal when cgroups are unavailable and the limit was required

rc, out, err = run(["run", "--limit-memory", "64M", "--", "true"], env=env_nocg)
t.ok(rc == 125 and "memory limit 64 MiB cannot be enforced" in err and
     "--allow-degraded=memory" in err and "CORDON_TEST_DISABLE" in err,
     "[%s] no cgroup: a memory limit is refused before anything runs" % WHO, (rc, err))
rc, out, err = run(["run", "--limit-cpu", "0.5", "--", "true"], env=env_nocg)
t.ok(rc == 125 and "CPU limit 0.5 CPUs cannot be enforced" in err,
     "[%s] no cgroup: a CPU quota is refused" % WHO, (rc, err))
rc, out, err = run(["run", "--limit-swap", "0", "--", "true"], env=env_nocg)
t.ok(rc == 125 and "swap limit" in err, "[%s] no cgroup: a swap limit is refused" % WHO,
     (rc, err))
rc, out, err = run(["run", "--limit-open-files", "64", "--", "sh", "-c", "ulimit -n"],
                   env=env_nocg)
t.eq((rc, out), (0, "64\n"), "[%s] no cgroup: the rlimits still hold" % WHO)

# ---- a memory hog

HOG = r"""
import sys
chunks = []
try:
    for i in range(int(sys.argv[1])):
        chunks.append(b"x" * (1 << 20))
except MemoryError:
    print("stopped at", i, "MiB", flush=True)
    sys.exit(3)
print("allocated", len(chunks), "MiB", flush=True)
"""


def memory_hog(limits, expect_rc, expect_err, desc):
    hog = subprocess.Popen([CORDON, "run", "--profile", "read-only"] + limits +
                           ["--", "python3", "-c", HOG, "1024"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=ENV, cwd=WS)
    # Meanwhile another sandbox takes more than the hog's limit.
    rc, out, err = run(["run", "--profile", "read-only", "--", "python3", "-c", HOG, "128"])
    t.eq((rc, out), (0, "allocated 128 MiB\n"),
         "[%s] %s: another sandbox allocates 128 MiB meanwhile" % (WHO, desc))
    out, err = hog.communicate(timeout=120)
    t.ok(hog.returncode == expect_rc and expect_err in err.decode(),
         "[%s] %s: the hog is stopped at its limit" % (WHO, desc),
         (hog.returncode, out.decode(), err.decode()))


how = by(["--limit-memory", "64M"], "memory")
if how == "cgroup":
    t.guard("memory hog", memory_hog, ["--limit-memory", "64M"], 128 + signal.SIGKILL,
            "killed: memory limit 64 MiB reached", "memory (cgroup)")
else:
    rc, out, err = run(["run", "--limit-memory", "64M", "--", "true"])
    t.ok(rc == 125 and "memory limit 64 MiB cannot be enforced" in err,
         "[%s] without a memory controller, a memory limit is refused here" % WHO, (rc, err))
if how != "cgroup":
    t.guard("memory hog", memory_hog, ["--limit-memory", "64M", "--allow-degraded=memory"],
            3, "NOT enforced for the sandbox as a whole",
            "memory as RLIMIT_AS (--allow-degraded=memory)")

# ---- the sandbox's cgroup

rc, j, err = explain(["--limit-open-files", "64"])
has_cg = bool(j and j["linux"]["limits"] and j["linux"]["limits"]["cgroup"])
if has_cg:
    rc, out, err = wsrun(["--limit-open-files", "64"],
                         ["sh", "-c", "tail -n 1 /proc/self/cgroup"])
    cg = out.strip()[3:]
    t.ok(rc == 0 and "/sandbox-" in cg, "[%s] the sandbox runs in a cgroup of its own" % WHO,
         (out, err))
    rc, out, err = wsrun(["--limit-open-files", "64"],
                         ["sh", "-c", "tail -n 1 /proc/self/cgroup; tail -n 1 /proc/1/cgroup"])
    both = out.split()
    t.ok(rc == 0 and len(both) == 2 and both[0] == both[1] and "/sandbox-" in both[0],
         "[%s] ... the init of its pid namespace too (pid 1)" % WHO, (out, err))
    # Where the hierarchy is mounted here (hybrid hosts: /sys/fs/cgroup/unified).
    mnt = None
    for line in open("/proc/self/mountinfo"):
        f = line.split(" - ")
        if len(f) == 2 and f[1].startswith("cgroup2 "):
            m = f[0].split()[4]
            if mnt is None or m == "/sys/fs/cgroup":
                mnt = m
    t.ok(mnt and not os.path.exists(mnt + cg), "[%s] and it is removed afterwards" % WHO,
         (mnt, cg))
    # Whatever the command leaves, even out of its process group, dies with it.
    mark = "600.%d" % os.getpid()
    rc, out, err = run(["run", "--profile", "full-access", "--limit-open-files", "64", "--",
                        "sh", "-c", "setsid sleep %s >/dev/null 2>&1 & echo started" % mark])
    left = pids_by_cmdline(lambda c: c == b"sleep\0" + mark.encode() + b"\0")
    t.ok(rc == 0 and out == "started\n" and not left,
         "[%s] cgroup.kill ends what an unsandboxed command left behind" % WHO, (out, err, left))
    for pid in left:
        os.kill(pid, signal.SIGKILL)
else:
    t.skip("[%s] the sandbox's cgroup" % WHO, "no cgroup for the sandboxes here: %s" %
           (j["linux"]["limits"] if j else err))

# ---- inotify instances and watches: the sandbox's own user namespace



def host_inotify():
    """Whether this process (the sandboxes' user, on the host) can get an inotify instance."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd < 0:
        return os.strerror(ctypes.get_errno())
    os.close(fd)
    return True


UNRESTRICTED = os.path.join(BASE, "unrestricted.json")
with open(UNRESTRICTED, "w") as f:
    json.dump({"version": 1, "type": "managed", "file_system": {"type": "unrestricted"},
               "network": "restricted"}, f)
WATCHED = os.path.join(WS, "watched")
os.mkdir(WATCHED)
for i in range(10):
    open(os.path.join(WATCHED, "f%d" % i), "w").close()

rc, out, err = run(["run", "--limit-inotify-instances", "lots", "--", "true"])
t.ok(rc == 2 and "inotify-instances: 'lots' is not a whole number" in err,
     "[%s] --limit-inotify-instances takes a number" % WHO, err)
rc, out, err = run(["run", "--limit-inotify-watches", "2147483648", "--", "true"])
t.ok(rc == 2 and "inotify-watches must be from 0 to 2147483647" in err,
     "[%s] --limit-inotify-watches: at most what the kernel's sysctl takes" % WHO, err)
# In a policy file, strictly.
with open(pol, "w") as f:
    json.dump({"version": 1, "type": "read-only", "limits": {"inotify_watches": 100}}, f)
rc, out, err = run(["check", pol])
t.eq(rc, 0, "[%s] cordon check: a policy's inotify_watches" % WHO)
with open(pol, "w") as f:
    json.dump({"version": 1, "type": "read-only", "limits": {"inotify_watch": 100}}, f)
rc, out, err = run(["check", pol])
t.ok(rc == 1 and "unknown key \"inotify_watch\"" in err + out and
     "inotify_instances, inotify_watches" in err + out,
     "[%s] cordon check: a misspelled inotify limit is an error" % WHO, err + out)
# No sandbox, no user namespace of its own: refused, as root and not.
rc, out, err = run(["run", "--profile", "full-access", "--limit-inotify-instances", "4", "--",
                    "true"])
t.ok(rc == 125 and "inotify instance limit 4 cannot be enforced" in err and
     "runs without a sandbox" in err and "--allow-degraded=inotify-instances" in err,
     "[%s] an inotify limit without a sandbox is refused" % WHO, (rc, err))

# Unprivileged, a sandbox has a user namespace of its own where the host makes them.
OWN_USERNS = not ROOT and json.loads(subprocess.run(
    [CORDON, "probe", "--json"], stdout=subprocess.PIPE, env=ENV).stdout)["host"]["userns"]
if OWN_USERNS:
    t.eq(by(["--limit-inotify-instances", "4"], "inotify_instances"), "userns",
         "[%s] explain: inotify-instances by the sandbox's user namespace" % WHO)
    with open(pol, "w") as f:
        json.dump({"version": 1, "type": "read-only", "limits": {"inotify_watches": 3}}, f)
    rc, j, err = explain(["--limit-inotify-instances", "4"], profile=pol)
    lim = j["linux"]["limits"] if j else {}
    t.ok(lim.get("inotify_watches", {}).get("by") == "userns" and
         lim["inotify_watches"]["value"] == 3 and
         "max_inotify_instances 4 in the sandbox's own user namespace" in
         lim["inotify_instances"]["detail"],
         "[%s] explain: the inotify limits are the sandbox's user namespace's" % WHO, (j, err))
    # A sandbox takes what it may and holds it; the host and another sandbox carry on.
    holder = subprocess.Popen([CORDON, "run", "--profile", "read-only",
                               "--limit-inotify-instances", "4", "--", "python3", "-c", INOTIFY,
                               "instances", "1000", "hold"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=WS)
    try:
        line = holder.stdout.readline().decode()
        t.eq(line, "4 EMFILE\n",
             "[%s] a sandbox limited to 4 inotify instances gets EMFILE at the 5th" % WHO)
        t.eq(host_inotify(), True,
             "[%s] ... while it holds them, its user still gets one on the host" % WHO)
        rc, out, err = run(["run", "--profile", "read-only", "--limit-inotify-instances", "6",
                            "--", "python3", "-c", INOTIFY, "instances", "1000", "exit"],
                           stdin=subprocess.DEVNULL)
        t.eq((rc, out), (0, "6 EMFILE\n"),
             "[%s] ... and another sandbox gets its own 6, as its limit says" % WHO)
        rc, out, err = run(["run", "--profile", "read-only", "--", "python3", "-c", INOTIFY,
                            "instances", "16", "exit"], stdin=subprocess.DEVNULL)
        t.eq((rc, out), (0, "16 ok\n"),
             "[%s] ... and one without a limit more than 4" % WHO)
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.communicate(timeout=60)
    rc, out, err = wsrun(["--limit-inotify-watches", "3"],
                         ["python3", "-c", INOTIFY, "watches", "10", "exit", WATCHED])
    t.eq((rc, out), (0, "3 ENOSPC\n"),
         "[%s] a sandbox limited to 3 inotify watches gets ENOSPC at the 4th" % WHO)
    rc, out, err = wsrun(["--limit-inotify-instances", "0"],
                         ["python3", "-c", INOTIFY, "instances", "1", "exit"])
    t.eq((rc, out), (0, "0 EMFILE\n"), "[%s] inotify-instances 0: none at all" % WHO)
    # Not even where the file system is unrestricted (no Landlock): the kernel says no.
    rc, out, err = run(["run", "--profile", UNRESTRICTED, "--limit-inotify-instances", "4", "--",
                        "sh", "-c", "cat /proc/sys/user/max_inotify_instances; "
                        "echo 1000 > /proc/sys/user/max_inotify_instances || echo refused"],
                       stdin=subprocess.DEVNULL)
    t.ok(rc == 0 and out == "4\nrefused\n" and "Permission denied" in err,
         "[%s] the sandbox sees its maximum and cannot raise it" % WHO, (rc, out, err))
    # A write the host refuses (a read-only /proc/sys) stops the sandbox before the command.
    rc, out, err = run(["run", "--profile", "read-only", "--limit-inotify-instances", "4", "--",
                        "sh", "-c", "echo ran"],
                       env=dict(ENV, CORDON_TEST_DISABLE="userns-limits"))
    t.ok(rc == 125 and out == "" and
         "limits: max_inotify_instances 4 in the sandbox's user namespace: Read-only file system"
         in err, "[%s] a maximum that cannot be written: refused before exec, step named" % WHO,
         (rc, out, err))
else:
    rc, out, err = run(["run", "--profile", "read-only", "--limit-inotify-instances", "4", "--",
                        "true"])
    t.ok(rc == 125 and "inotify instance limit 4 cannot be enforced" in err and
         ("a sandbox of root's has no user namespace" in err if ROOT else
          "user namespaces are unavailable" in err) and
         "--allow-degraded=inotify-instances" in err,
         "[%s] without a user namespace of the sandbox's own, an inotify limit is refused" % WHO,
         (rc, err))
    rc, out, err = run(["run", "--profile", "read-only", "--limit-inotify-watches", "3", "--",
                        "true"])
    t.ok(rc == 125 and "inotify watch limit 3 cannot be enforced" in err and
         "--allow-degraded=inotify-watches" in err, "[%s] ... and so is a watch limit" % WHO,
         (rc, err))
    rc, out, err = run(["run", "--profile", "read-only", "--limit-inotify-instances", "4",
                        "--allow-degraded=inotify-instances", "--", "python3", "-c", INOTIFY,
                        "instances", "8", "exit"], stdin=subprocess.DEVNULL)
    t.ok(rc == 0 and out == "8 ok\n" and "inotify instance limit 4 NOT enforced" in err,
         "[%s] --allow-degraded=inotify-instances runs without it, and says so" % WHO,
         (rc, out, err))
    t.skip("[%s] a sandbox's inotify instances and watches stopped at its limits" % WHO,
           "no user namespace of the sandbox's own here")

shutil.rmtree(BASE, ignore_errors=True)
t.done()
