#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Where the sandboxes' cgroups go, on a cgroup v2 hierarchy this test
# mounts itself (the host may have none at /sys/fs/cgroup, or a hybrid
# one): in a private mount namespace, cgroup2 on /sys/fs/cgroup. As root:
# the sandbox's cgroup under "cordon" at the top, removed afterwards, the
# child born in it (or, without clone3, moving in itself); a cgroup
# delegated to an ordinary user, with cordon alone in it, which cordon
# restructures (itself into "supervisor", the sandboxes beside it); the
# same cgroup shared with another process, which cordon refuses to use and
# says why. Needs root (mounts, the delegation); skips otherwise.
. "$(dirname "$0")/../lib/libtest.sh"

if [ "$(id -u)" -ne 0 ]; then
	skip_all "needs root to mount a cgroup v2 hierarchy and delegate a cgroup"
fi
for tool in unshare setpriv; do
	command -v "$tool" >/dev/null 2>&1 || skip_all "$tool is not available"
done
USER_NAME=cordon-test
id "$USER_NAME" >/dev/null 2>&1 || skip_all "no user $USER_NAME (unprivileged.sh makes it)"
if ! unshare -m sh -c 'mount --make-rprivate / && mount -t cgroup2 none /sys/fs/cgroup' \
	2>"$CD_TMP/mount.err"; then
	skip_all "the kernel refuses a cgroup2 mount here: $(cat "$CD_TMP/mount.err")"
fi

# A copy the other user can read and run (the build tree may be private).
BASE=$(mktemp -d /var/tmp/cordon-cgroup.XXXXXX) || skip_all "cannot create a directory in /var/tmp"
T=cordon-test.$$
trap 'unshare -m sh -c "mount --make-rprivate / && mount -t cgroup2 none /sys/fs/cgroup && \
	rmdir /sys/fs/cgroup/$T/sandbox-* /sys/fs/cgroup/$T/supervisor /sys/fs/cgroup/$T" \
	2>/dev/null; rm -rf "$BASE" "$CD_TMP"' EXIT
cp "$CORDON" "$BASE/cordon"
for p in cordon-init cordon-fs-helper; do
	[ -x "$(dirname "$CORDON")/$p" ] && cp "$(dirname "$CORDON")/$p" "$BASE/$p"
done
cp -r "$CD_POLICYDIR" "$BASE/policies"
chmod -R a+rX "$BASE"
C=$BASE/cordon

# cg SCRIPT: run SCRIPT in a mount namespace of its own with cgroup2 on /sys/fs/cgroup
# ($C, $T and $CORDON_POLICY_PATH set for it).
cg() {
	unshare -m env C="$C" T="$T" U="$USER_NAME" CORDON_POLICY_PATH="$BASE/policies" sh -c \
		"mount --make-rprivate / && mount -t cgroup2 none /sys/fs/cgroup && $1"
}

# ---- root: "cordon" at the top of the hierarchy

check "root: the sandbox runs in a cgroup under /cordon" \
	cg '"$C" run --limit-open-files 64 -- sh -c "tail -n 1 /proc/self/cgroup"'
contains "root: ... named sandbox-PID-N" "0::/cordon/sandbox-"
sb=${cd_out#0::}
check "root: the sandbox's cgroup is gone afterwards" \
	cg "test ! -e /sys/fs/cgroup$sb"
check "root: explain names where the sandboxes' cgroups go" \
	cg '"$C" explain --limit-open-files 64'
contains "root: ... /sys/fs/cgroup/cordon (root)" "/sys/fs/cgroup/cordon (root)"
check "root: without clone3, the child moves into its cgroup itself" \
	cg 'CORDON_TEST_DISABLE=clone3 "$C" run --limit-open-files 64 -- sh -c "tail -n 1 /proc/self/cgroup"'
contains "root: ... and lands there" "0::/cordon/sandbox-"
check "root: ... an unsandboxed one too" \
	cg 'CORDON_TEST_DISABLE=clone3 "$C" run --profile full-access --limit-open-files 64 -- sh -c "tail -n 1 /proc/self/cgroup"'
contains "root: ... and lands there" "0::/cordon/sandbox-"

# ---- a cgroup delegated to an ordinary user

check "a cgroup delegated to $USER_NAME" \
	cg 'mkdir /sys/fs/cgroup/$T && cd /sys/fs/cgroup/$T &&
	    chown $U . cgroup.procs cgroup.subtree_control cgroup.threads'
check "unprivileged, alone in it: the sandbox's cgroup is made beside cordon's" \
	cg 'echo $$ >/sys/fs/cgroup/$T/cgroup.procs && exec setpriv --reuid=$U --regid=$U --clear-groups \
	    "$C" run --limit-open-files 64 -- sh -c "tail -n 1 /proc/self/cgroup; ulimit -n"'
contains "unprivileged: ... in the delegated cgroup" "0::/$T/sandbox-"
contains "unprivileged: ... with its rlimit" "64"
check "unprivileged: cordon moved itself into supervisor, and the sandbox's cgroup is gone" \
	cg 'test -d /sys/fs/cgroup/$T/supervisor && ! ls -d /sys/fs/cgroup/$T/sandbox-* 2>/dev/null'
check "unprivileged, sharing it with another process: probe says why it cannot be used" \
	cg 'echo $$ >/sys/fs/cgroup/$T/cgroup.procs && setpriv --reuid=$U --regid=$U --clear-groups "$C" probe'
contains "unprivileged: ... other processes share it" "other processes share it"
contains "unprivileged: ... and the fix" "systemd-run --user --scope -p Delegate=yes"
expect_exit "unprivileged, sharing it: a limit that needs nothing of a cgroup still runs" 0 \
	cg 'echo $$ >/sys/fs/cgroup/$T/cgroup.procs && setpriv --reuid=$U --regid=$U --clear-groups \
	    "$C" run --limit-open-files 64 -- true'

done_testing
