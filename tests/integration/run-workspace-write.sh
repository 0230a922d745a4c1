#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# cordon run --profile workspace-write: what the command may and may not do.
. "$(dirname "$0")/../lib/libtest.sh"

WS=$CD_TMP/ws
mkdir -p "$WS"
WS=$(cd "$WS" && pwd -P)
if command -v git >/dev/null 2>&1 && git init -q "$WS" 2>/dev/null; then
	:
else
	mkdir -p "$WS/.git/hooks"
	printf '[core]\n\trepositoryformatversion = 0\n' >"$WS/.git/config"
fi
mkdir -p "$WS/.git/hooks"
cp "$WS/.git/config" "$CD_TMP/config.orig"

sb() {
	"$CORDON" run --profile workspace-write --workspace-root "$WS" --cwd "$WS" -- "$@"
}

if ! out=$("$CORDON" explain --profile workspace-write --workspace-root "$WS" --cwd "$WS" 2>&1 >/dev/null); then
	skip_all "this host cannot enforce workspace-write: $out"
fi
if ! sb true 2>"$CD_TMP/err"; then
	skip_all "cordon run fails here: $(cat "$CD_TMP/err")"
fi

# Paths outside every writable root (the profile makes / readable, the
# workspace, /tmp and $TMPDIR writable).
in_writable() {
	case $1 in
	/tmp | /tmp/* | "$WS" | "$WS"/*) return 0 ;;
	esac
	if [ -n "${TMPDIR:-}" ]; then
		case $1 in
		"$TMPDIR" | "$TMPDIR"/*) return 0 ;;
		esac
	fi
	return 1
}
denied="EACCES|EPERM|EROFS"

# ---- the workspace is writable ----
check "write a new file in the workspace" sb "$TRY" write-file "$WS/new-file"
assert "the new file is there afterwards" test -f "$WS/new-file"
check "mkdir, write, rename and delete inside the workspace" \
	sb sh -c 'mkdir -p sub/dir && echo hi >sub/dir/f && mv sub/dir/f sub/g && rm sub/g'
check "write through the shell in the workspace" sb sh -c 'echo data >shell-file'
assert "the shell's file has its content" test "$(cat "$WS/shell-file")" = data
check "/dev/null is writable" sb sh -c 'echo x >/dev/null'

# ---- outside the workspace ----
tag=cordon-test-$$
expect_errno "write to /etc is denied" "$denied" sb "$TRY" write-file "/etc/$tag"
assert "no file appeared in /etc" test ! -e "/etc/$tag"
if [ -n "${HOME:-}" ] && [ -d "$HOME" ] && ! in_writable "$HOME"; then
	expect_errno "write to \$HOME is denied" "$denied" sb "$TRY" write-file "$HOME/.$tag"
	assert "no file appeared in \$HOME" test ! -e "$HOME/.$tag"
else
	skip "write to \$HOME is denied" "HOME is unset or inside a writable root"
	skip "no file appeared in \$HOME" "HOME is unset or inside a writable root"
fi
if [ -d /var/tmp ] && ! in_writable /var/tmp; then
	expect_errno "write to /var/tmp is denied" "$denied" sb "$TRY" write-file "/var/tmp/$tag"
	assert "no file appeared in /var/tmp" test ! -e "/var/tmp/$tag"
else
	skip "write to /var/tmp is denied" "no /var/tmp"
	skip "no file appeared in /var/tmp" "no /var/tmp"
fi

# ---- attributes of files outside the writable paths ----
# Landlock does not govern chmod, chown, utimensat, setxattr or file flags,
# which need only ownership: the mount namespace makes everything but the
# writable paths read-only. A file of our own, outside them (as root, this
# is how /etc/shadow or a setuid copy of a shell would be reached).
attr_ops="chmod chown utimes setxattr setflags"
if AT=$(mktemp -d /var/tmp/cordon-attr.XXXXXX 2>/dev/null) && ! in_writable "$AT"; then
	for op in $attr_ops; do
		echo v >"$AT/$op"
		chmod 644 "$AT/$op"
		# Only what this file system and user can do at all outside the sandbox.
		echo v >"$AT/$op.control"
		if ! "$TRY" "$op" "$AT/$op.control" 2>/dev/null; then
			skip "$op on a file outside the writable paths is refused" \
				"$op is not possible here even outside the sandbox"
			continue
		fi
		before=$(stat -c '%a %Y %u:%g' "$AT/$op")
		expect_errno "$op on a file outside the writable paths is refused" EROFS \
			sb "$TRY" "$op" "$AT/$op"
		assert "and the file is unchanged ($op)" test "$(stat -c '%a %Y %u:%g' "$AT/$op")" = "$before"
		echo v >"$WS/attr-$op"
		check "$op on a file in the workspace still works" sb "$TRY" "$op" "$WS/attr-$op"
	done
	if command -v getfattr >/dev/null 2>&1; then
		assert "no extended attribute was set outside" \
			test -z "$(getfattr -d "$AT/setxattr" 2>/dev/null)"
	fi
	check "writing /dev/null still works under the read-only mounts" sb sh -c 'echo x >/dev/null'
	rm -rf "$AT"
else
	skip "attributes outside the writable paths" "no place outside them for a file of ours"
fi
expect_errno "mkdir in /etc is denied" "$denied" sb "$TRY" mkdir "/etc/$tag"
check "reading /etc/passwd is allowed" sb "$TRY" read-file /etc/passwd

# A symlink in the workspace that points outside does not make the outside writable.
ln -s /etc "$WS/etc-link"
ln -s "/etc/$tag-target" "$WS/file-link"
expect_errno "write through a symlinked directory to /etc is denied" "$denied" \
	sb "$TRY" write-file "$WS/etc-link/$tag"
expect_errno "write through a dangling symlink to /etc is denied" "$denied" \
	sb "$TRY" write-file "$WS/file-link"
assert "nothing was created in /etc through the links" \
	test ! -e "/etc/$tag" -a ! -e "/etc/$tag-target"
# A symlink planted from inside and then used to write outside.
expect_errno "a symlink created inside cannot be used to write /etc" "$denied" \
	sb sh -c "ln -s /etc planted && exec '$TRY' write-file planted/$tag"
assert "still nothing in /etc" test ! -e "/etc/$tag"

# ---- protected metadata: .git ----
expect_errno "modify .git/config is denied" "$denied" sb "$TRY" write-file "$WS/.git/config"
expect_errno "truncate .git/config is denied" "$denied" sb "$TRY" truncate "$WS/.git/config"
expect_errno "delete .git/config is denied" "$denied|EBUSY" sb "$TRY" unlink "$WS/.git/config"
expect_errno "rename .git/config away is denied" "$denied|EBUSY|EXDEV" \
	sb "$TRY" rename "$WS/.git/config" "$WS/config-stolen"
expect_errno "create .git/hooks/x is denied" "$denied" sb "$TRY" create-file "$WS/.git/hooks/x"
expect_errno "create .git/new-file is denied" "$denied" sb "$TRY" create-file "$WS/.git/new-file"
expect_errno "rename .git itself is denied" "$denied|EBUSY|EXDEV" \
	sb "$TRY" rename "$WS/.git" "$WS/git-moved"
expect_fail "rm -rf .git fails" sb rm -rf "$WS/.git"
assert ".git/config is unchanged afterwards" cmp -s "$WS/.git/config" "$CD_TMP/config.orig"
assert ".git/hooks/x does not exist afterwards" test ! -e "$WS/.git/hooks/x"
assert ".git is still a directory" test -d "$WS/.git" -a ! -L "$WS/.git"
assert "nothing was renamed" test ! -e "$WS/config-stolen" -a ! -e "$WS/git-moved"
check "reading .git/config is allowed" sb "$TRY" read-file "$WS/.git/config"

# ---- protected metadata: a missing .codex ----
rm -rf "$WS/.codex"
expect_fail "creating a missing .codex directory is denied" sb "$TRY" mkdir "$WS/.codex/sub"
expect_fail "creating a file in a missing .codex is denied" sb "$TRY" create-file "$WS/.codex/config.toml"
expect_fail "creating .codex as a file is denied" sb sh -c "rmdir .codex 2>/dev/null; echo x > .codex"
expect_fail "replacing a missing .codex with a symlink is denied" \
	sb sh -c "rmdir .codex 2>/dev/null; ln -s /tmp .codex"
assert "no .codex is left behind in the workspace" test ! -e "$WS/.codex" -a ! -L "$WS/.codex"
# The mask is a dangling symlink: the name looks missing, nothing below it exists.
check "a masked .codex looks missing to the command" sb sh -c 'test ! -e .codex && test -L .codex'
expect_errno "reading below a masked .codex says ENOENT" ENOENT \
	sb "$TRY" read-file "$WS/.codex/config.toml"
expect_fail "removing a masked .codex is denied" sb sh -c "rm -f .codex && test ! -L .codex"
expect_fail "writing through a masked .codex is denied" sb sh -c "echo x >>.codex"
assert "nothing was created where the mask points" test ! -e /proc/.cordon-masked

# A workspace inside a repository: the masked .git must not stop git's discovery of it.
if command -v git >/dev/null 2>&1; then
	REPO=$CD_TMP/repo
	mkdir -p "$REPO/sub"
	REPO=$(cd "$REPO" && pwd -P)
	if git init -q "$REPO" 2>/dev/null; then
		top=$("$CORDON" run --profile workspace-write --workspace-root "$REPO/sub" \
			--cwd "$REPO/sub" -- git -c safe.directory='*' rev-parse --show-toplevel 2>&1)
		assert "git inside a masked .git finds the enclosing repository ($top)" \
			test "$top" = "$REPO"
		assert "the masked .git is gone from the host afterwards" \
			test ! -e "$REPO/sub/.git" -a ! -L "$REPO/sub/.git"
		# Meanwhile on the host: the mask's mount point must not stop git either.
		# The run lasts until the test opens the FIFO.
		mkdir -p "$REPO/sub/deeper"
		mkfifo "$CD_TMP/gate-git"
		"$CORDON" run --profile workspace-write --workspace-root "$REPO/sub" \
			--cwd "$REPO/sub" -- sh -c "read x < '$CD_TMP/gate-git'" &
		run=$!
		wait_until test -p "$REPO/sub/.git"
		masked=$?
		host_top=$(cd "$REPO/sub/deeper" && git -c safe.directory='*' rev-parse --show-toplevel 2>&1)
		echo go >"$CD_TMP/gate-git"
		wait "$run"
		assert "during a run, git on the host walks past the mask's mount point ($host_top)" \
			test "$masked" -eq 0 -a "$host_top" = "$REPO"
	else
		skip "git discovery through a masked .git" "git init failed"
	fi
else
	skip "git discovery through a masked .git" "git is not installed"
fi

# ---- protected metadata: an existing .codex ----
mkdir -p "$WS/.codex"
echo keep >"$WS/.codex/config.toml"
expect_fail "replacing an existing .codex with a symlink is denied" \
	sb sh -c "mv .codex .codex-old || rm -rf .codex; ln -s /tmp .codex"
expect_errno "writing into an existing .codex is denied" "$denied" \
	sb "$TRY" write-file "$WS/.codex/config.toml"
assert "the existing .codex is intact (not a symlink, same content)" \
	test -d "$WS/.codex" -a ! -L "$WS/.codex" -a "$(cat "$WS/.codex/config.toml")" = keep
assert "no .codex-old was made" test ! -e "$WS/.codex-old"

# ---- network ----
expect_errno "AF_INET socket is denied" EPERM sb "$TRY" socket-inet
expect_errno "AF_INET6 socket is denied" EPERM sb "$TRY" socket-inet6
expect_errno "AF_INET socketpair is denied" EPERM sb "$TRY" socketpair-inet
expect_errno "AF_NETLINK socket is denied" EPERM sb "$TRY" socket-netlink
expect_errno "AF_PACKET socket is denied" EPERM sb "$TRY" socket-packet
check "AF_UNIX socket is allowed" sb "$TRY" socket-unix
check "AF_UNIX socketpair is allowed" sb "$TRY" socketpair-unix

# ---- the seccomp baseline ----
expect_errno "ptrace(TRACEME) is denied" EPERM sb "$TRY" ptrace-traceme
expect_errno "process_vm_readv is denied" EPERM sb "$TRY" process_vm_readv
expect_errno "io_uring_setup is denied" EPERM sb "$TRY" io_uring_setup
expect_errno "unshare(CLONE_NEWUSER) is denied" EPERM sb "$TRY" unshare-user
expect_errno "unshare(CLONE_NEWNS) is denied" EPERM sb "$TRY" unshare-mount
expect_errno "clone(CLONE_NEWUSER) is denied" EPERM sb "$TRY" clone-newuser
expect_errno "clone3 gives ENOSYS (libc falls back to clone)" ENOSYS sb "$TRY" clone3
expect_errno "mount is denied" EPERM sb "$TRY" mount
expect_errno "umount2 is denied" EPERM sb "$TRY" umount2
expect_errno "pivot_root is denied" EPERM sb "$TRY" pivot_root
expect_errno "chroot is denied" EPERM sb "$TRY" chroot
expect_errno "setns is denied" EPERM sb "$TRY" setns
expect_errno "keyctl is denied" EPERM sb "$TRY" keyctl
expect_errno "add_key is denied" EPERM sb "$TRY" add_key
expect_errno "bpf is denied" EPERM sb "$TRY" bpf
expect_errno "perf_event_open is denied" EPERM sb "$TRY" perf_event_open
expect_errno "userfaultfd is denied" EPERM sb "$TRY" userfaultfd
expect_errno "ioctl TIOCSTI is denied (EPERM, not ENOTTY)" EPERM sb "$TRY" tiocsti </dev/null
expect_errno "TIOCSTI with high bits set is denied too" EPERM sb "$TRY" tiocsti-high </dev/null
expect_errno "ioctl TIOCLINUX is denied" EPERM sb "$TRY" tioclinux </dev/null
expect_errno "personality(ADDR_COMPAT_LAYOUT) is denied" EPERM sb "$TRY" personality-bad
check "an ordinary fork+exec still works" sb sh -c '/bin/true && echo ok | cat >/dev/null'

# ---- credentials ----
cd_run_capture sb cat /proc/self/status
caps=$(printf '%s\n' "$cd_out" | awk '/^CapEff:/ {print $2}')
nnp=$(printf '%s\n' "$cd_out" | awk '/^NoNewPrivs:/ {print $2}')
assert "CapEff is 0000000000000000 inside" test "$caps" = 0000000000000000
assert "NoNewPrivs is 1 inside" test "$nnp" = 1
cd_run_capture sb cat /proc/self/stat
# Leads its own process group, in a new session: led by itself, or (pid
# namespace) by the namespace's init, pid 1, which forked it.
sid_ok=$(printf '%s\n' "$cd_out" | awk '{ print ($5 == $1 && ($6 == $1 || $6 == 1)) ? "yes" : "no" }')
assert "the command runs in a session and process group of its own" test "$sid_ok" = yes
cd_run_capture sb sh -c 'echo $$; cat /proc/$$/stat'
pid_ok=$(printf '%s\n' "$cd_out" | awk 'NR == 1 { p = $1 } NR == 2 { print ($1 == p && p == 2) ? "yes" : "no" }')
assert "pid isolation: the command is pid 2 of its own namespace, and /proc agrees" \
	test "$pid_ok" = yes

# ---- an IPC namespace of its own ----
# System V IPC objects are not files: the host's (and other sandboxes')
# shared memory must be out of reach, not merely read-only.
if command -v ipcmk >/dev/null 2>&1 && command -v ipcs >/dev/null 2>&1 &&
	shm=$(ipcmk -M 64 2>/dev/null | awk '{ print $NF }') && [ -n "$shm" ]; then
	cd_run_capture sb ipcs -m
	case $cd_out in
	*" $shm "*)
		not_ok "a host System V shared memory segment is not visible inside"
		diag "$cd_out"
		;;
	*) ok "a host System V shared memory segment is not visible inside" ;;
	esac
	expect_errno "nor can it be attached by its id" "EINVAL|EIDRM|ENOENT|$denied" \
		sb python3 -c 'import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
r = libc.shmat(int(sys.argv[1]), None, 0)
sys.exit(0 if r not in (None, ctypes.c_void_p(-1).value) else ctypes.get_errno())' "$shm"
	ipcrm -m "$shm" 2>/dev/null
	check "System V IPC still works inside, privately" sb sh -c 'id=$(ipcmk -M 64 | awk "{ print \$NF }") && ipcrm -m "$id"'
else
	skip "a host System V shared memory segment is not visible inside" "no ipcmk"
	skip "nor can it be attached by its id" "no ipcmk"
	skip "System V IPC still works inside, privately" "no ipcmk"
fi

# ---- network namespace (restricted network) ----
cd_run_capture sb sh -c 'tail -n +3 /proc/net/dev'
ifaces=$(printf '%s\n' "$cd_out" | awk -F: '{ gsub(/ /, "", $1); print $1 }' | tr '\n' ' ')
assert "restricted network: an empty network namespace, only lo ($ifaces)" test "$ifaces" = "lo "
# lo is left down: no socket that could use it can be made. Its flags
# through an AF_UNIX socket, the one family the command may open.
cd_run_capture sb python3 -c 'import fcntl, socket, struct
s = socket.socket(socket.AF_UNIX)
r = fcntl.ioctl(s, 0x8913, struct.pack("16sH14x", b"lo", 0))  # SIOCGIFFLAGS
print("up" if struct.unpack("16sH14x", r)[1] & 1 else "down")'
assert "restricted network: its loopback is down ($cd_out)" test "$cd_out" = down
cd_run_capture "$CORDON" run --profile workspace-write --workspace-root "$WS" --network enabled \
	-- sh -c 'tail -n +3 /proc/net/dev'
n_host=$(printf '%s\n' "$cd_out" | grep -c .)
n_here=$(tail -n +3 /proc/net/dev | grep -c .)
assert "enabled network: the host's interfaces ($n_here)" test "$n_host" = "$n_here"

# ---- exit status ----
expect_exit "exit status 0" 0 sb true
expect_exit "exit status 3" 3 sb sh -c 'exit 3'
expect_exit "command not found: 127" 127 sb cordon-no-such-command-here
expect_exit "killed by SIGTERM: 143" 143 sb sh -c 'kill -TERM $$'
# A SIGTERM to cordon reaches a command that made a process group of its own
# (timeout(1) does): the pid namespace's init forwards it.
if command -v timeout >/dev/null 2>&1; then
	# Signalled once the command runs (it says so), in its own group (timeout's).
	(exec "$CORDON" run --profile workspace-write --workspace-root "$WS" --cwd "$WS" -- \
		timeout 100 sh -c 'echo ready; exec sleep 100' >"$CD_TMP/tmo.out") &
	run=$!
	wait_until grep -q ready "$CD_TMP/tmo.out"
	kill -TERM "$run"
	run_gone() { ! kill -0 "$run" 2>/dev/null; }
	wait_until run_gone
	if kill -0 "$run" 2>/dev/null; then
		kill -KILL "$run"
		not_ok "SIGTERM reaches a command in its own process group (timeout sleep)"
	else
		wait "$run"
		cd_rc=$?
		rc_is "SIGTERM reaches a command in its own process group (timeout sleep): 143" 143
	fi
else
	skip "SIGTERM reaches a command in its own process group" "no timeout(1)"
fi
printf 'echo should-not-run\n' >"$WS/not-executable"
chmod 644 "$WS/not-executable"
expect_exit "not executable: 126" 126 sb "$WS/not-executable"
run_split sb cordon-no-such-command-here
contains "not found: the message names the command" "cordon-no-such-command-here: command not found"

# ---- stdio, fds and the environment ----
out=$(echo hi | sb cat)
assert "stdin and stdout pass through" test "$out" = hi
err=$(sb sh -c 'echo oops >&2' 2>&1 >/dev/null)
assert "stderr passes through" test "$err" = oops
fds=$( (exec 7>"$CD_TMP/fd7" 8<"$CD_TMP/fd7"; sb ls /proc/self/fd) | tr '\n' ' ')
assert "only fds 0-2 (and ls's own 3) reach the command" test "$fds" = "0 1 2 3 "
# Started with stdin closed (as CI runners and some daemons start programs):
# /dev/null takes its place, so that nothing cordon opens becomes the
# command's stdin.
fd0=$(sb readlink /proc/self/fd/0 <&-)
assert "stdin closed: the command's stdin is /dev/null" test "$fd0" = /dev/null
fds=$(sb ls /proc/self/fd <&- | tr '\n' ' ')
assert "stdin closed: fds 0-2 (and ls's own 3) reach the command" test "$fds" = "0 1 2 3 "
[ "$fds" = "0 1 2 3 " ] || diag "fds seen: $fds"
P=$CD_POLICYDIR/workspace-write.json
envout=$(env -i FOO=bar "$CORDON" run --profile "$P" --workspace-root "$WS" --cwd "$WS" -- env)
assert "the environment is passed exactly (env -i FOO=bar)" test "$envout" = "FOO=bar"
[ "$envout" = "FOO=bar" ] || diag "env inside: $envout"
envout=$(env -i FOO=bar BAZ=1 "$CORDON" run --profile "$P" --setenv X=y --unsetenv BAZ -- env | sort | tr '\n' ' ')
assert "--setenv and --unsetenv" test "$envout" = "FOO=bar X=y "
envout=$(env -i FOO=bar "$CORDON" run --profile "$P" --clear-env --setenv A=1 -- /usr/bin/env)
assert "--clear-env" test "$envout" = "A=1"
cwd=$(sb pwd -P)
assert "--cwd sets the working directory" test "$cwd" = "$WS"

# ---- signals are forwarded to the command ----
"$CORDON" run --profile workspace-write --workspace-root "$WS" --cwd "$WS" -- \
	sh -c 'trap "echo got-term; exit 7" TERM; echo ready; while :; do sleep 0.05; done' \
	>"$CD_TMP/sig.out" 2>&1 &
cpid=$!
wait_until grep -q ready "$CD_TMP/sig.out"
kill -TERM "$cpid"
wait "$cpid"
rc=$?
assert "SIGTERM to cordon reaches the command (its handler ran, exit 7)" \
	sh -c "test $rc -eq 7 && grep -qx got-term '$CD_TMP/sig.out'"
[ "$rc" -eq 7 ] || diag "exit $rc; output: $(cat "$CD_TMP/sig.out")"

# ---- the sandbox ends with its command: nothing it left behind survives ----
# A daemon that escaped the process group (setsid) and waits for the masks
# to go away must be killed before they are removed, or it could create a
# protected name afterwards.
rm -f "$CD_TMP/escaped"
rm -rf "$WS/.codex"
sb sh -c 'setsid sh -c "sleep 0.4; mkdir .codex && touch '"$CD_TMP"'/escaped" </dev/null >/dev/null 2>&1 &
	(sleep 30.'"$$"' </dev/null >/dev/null 2>&1 &); exit 0'
rc=$?
assert "a command that leaves background processes still exits 0" test "$rc" -eq 0
sleep 0.7
assert "a lingering setsid daemon cannot create .codex after the command exits" \
	test ! -e "$WS/.codex" -a ! -e "$CD_TMP/escaped"
# The duration is unique to this run: the root and the unprivileged copies of
# this suite run at the same time.
assert "no process of the sandbox survives the command (a double-forked sleep)" \
	sh -c "! pgrep -f '^sleep 30\\.$$\$' >/dev/null"

# ---- concurrent runs in one workspace share the masks and all succeed ----
rm -f "$CD_TMP"/conc.*
for i in 1 2 3 4 5 6; do
	(sb sh -c "sleep 0.0$i; mkdir .codex 2>/dev/null && echo created" >"$CD_TMP/conc.$i" 2>&1
	 echo "rc=$?" >>"$CD_TMP/conc.$i") &
done
wait
bad=$(cat "$CD_TMP"/conc.* | grep -v '^rc=1$' || true)
assert "6 concurrent runs: each ran, none could create .codex" test -z "$bad"
[ -z "$bad" ] || diag "concurrent output: $bad"
assert "concurrent runs leave no mask directory behind" \
	test ! -e "$WS/.codex" -a ! -e "$WS/.agents"

# ---- a workspace whose parent is writable stays in place (pins) ----
# /tmp (and $TMPDIR) are writable, so a workspace below them could be renamed
# away, taking its read-only .git along, and replaced by a fresh directory
# with hooks. Its directories are bound on themselves in the sandbox: EBUSY.
PW=$CD_TMP/pin/a/w
mkdir -p "$PW/.git/hooks"
PW=$(cd "$PW" && pwd -P)
PA=$(dirname "$PW")
psb() {
	pr=$1
	shift
	"$CORDON" run --profile workspace-write --workspace-root "$pr" --cwd "$pr" -- "$@"
}
pins() {
	"$CORDON" explain --profile workspace-write --workspace-root "$1" --cwd "$1" |
		awk '$1 == "pin" { print $2 }' | tr '\n' ' '
}
if in_writable "$PA"; then
	# Put things back after an attack that worked, so each check stands alone.
	pin_restore() {
		if [ -e "$PA/moved" ]; then
			rm -rf "$PW" && mv "$PA/moved" "$PW"
		fi
		if [ -e "$PA-moved" ]; then
			rm -rf "$PA" && mv "$PA-moved" "$PA"
		fi
	}
	p=$(pins "$PW")
	assert "explain pins the workspace and its parents below the writable top" \
		sh -c "case '$p' in *' $PA $PW ') exit 0 ;; *) exit 1 ;; esac"
	assert "/tmp itself is not pinned (its parent is read-only)" \
		sh -c "case ' $p' in *' /tmp '*) exit 1 ;; esac"
	expect_fail "renaming the workspace away to plant .git/hooks fails" psb "$PW" sh -c \
		"mv '$PW' '$PA/moved' && mkdir -p '$PW/.git/hooks' && echo x >'$PW/.git/hooks/post-checkout'"
	assert "no hook was planted, the workspace was not moved" \
		test ! -e "$PW/.git/hooks/post-checkout" -a ! -e "$PA/moved"
	pin_restore
	expect_fail "renaming its parent away to plant .git/hooks fails" psb "$PW" sh -c \
		"mv '$PA' '$PA-moved' && mkdir -p '$PW/.git/hooks' && echo x >'$PW/.git/hooks/post-checkout'"
	assert "no hook was planted, the parent was not moved" \
		test ! -e "$PW/.git/hooks/post-checkout" -a ! -e "$PA-moved"
	pin_restore
	expect_errno "rename(workspace) gives EBUSY" EBUSY psb "$PW" "$TRY" rename "$PW" "$PA/moved"
	pin_restore
	expect_errno "rename(its parent) gives EBUSY" EBUSY psb "$PW" "$TRY" rename "$PA" "$PA-moved"
	pin_restore
	check "work inside the pinned workspace is unaffected" psb "$PW" sh -c \
		'mkdir -p d && echo x >d/f && mv d/f g && rm -r d g'
	check "the pins stay in the sandbox: the host can rename the workspace" \
		sh -c "mv '$PW' '$PA/moved' && mv '$PA/moved' '$PW'"
else
	skip "a workspace inside a writable region cannot be renamed away" "$PA is not writable here"
fi
# A workspace whose parent is read-only: nothing to pin, renaming is denied anyway.
if NB=$(mktemp -d /var/tmp/cordon-pin.XXXXXX 2>/dev/null) && ! in_writable "$NB"; then
	mkdir -p "$NB/w/.git"
	check "a workspace in a read-only parent still works" psb "$NB/w" sh -c 'echo x >f'
	expect_errno "and cannot be renamed (read-only parent)" "$denied" \
		psb "$NB/w" "$TRY" rename "$NB/w" "$NB/moved"
	assert "no pin is planned for it" test -z "$(pins "$NB/w")"
else
	skip "a workspace in a read-only parent still works" "no read-only place for it"
fi
if [ -n "${NB:-}" ]; then
	rm -rf "$NB"
fi

# ---- a missing masked name keeps its directory (gitdir: target, deny) ----
# The mask is a mount on a name in an existing directory. That directory and
# those above it, inside a writable region, are pinned too: renaming it away
# and making a fresh one would let the command plant the masked name, a
# repository the host's git then uses (its hooks and config run on the host).
GD=$CD_TMP/gd
GW=$CD_TMP/gw
mkdir -p "$GD" "$GW"
GD=$(cd "$GD" && pwd -P)
GW=$(cd "$GW" && pwd -P)
printf 'gitdir: %s/repo.git\n' "$GD" >"$GW/.git"
if in_writable "$GD"; then
	expect_errno "a missing gitdir: target cannot be created" "EEXIST|$denied" \
		psb "$GW" "$TRY" mkdir "$GD/repo.git"
	expect_errno "nor its directory renamed away to plant it in a new one" "EBUSY|$denied" \
		psb "$GW" "$TRY" rename "$GD" "$CD_TMP/gd-moved"
	assert "the gitdir: target's directory is still in place" test -d "$GD" -a ! -e "$CD_TMP/gd-moved"
	assert "and no mask is left behind" test ! -e "$GD/repo.git"
	mkdir -p "$GW/sub"
	expect_errno "a missing denied name's directory cannot be renamed away" "EBUSY|$denied" \
		"$CORDON" run --profile workspace-write --workspace-root "$GW" --cwd "$GW" \
		--deny "$GW/sub/.env" -- "$TRY" rename "$GW/sub" "$GW/sub2"
	assert "the denied name was not planted" test ! -e "$GW/sub/.env" -a ! -e "$GW/sub2"
else
	skip "a missing gitdir: target cannot be created" "$GD is not writable here"
fi
# git's own reading of the pointer: only CRs and LFs are trimmed, so a
# trailing space is part of the path that must be protected.
mkdir -p "$CD_TMP/store "
printf 'gitdir: %s/store \n' "$CD_TMP" >"$GW/.git"
if command -v python3 >/dev/null 2>&1; then
	"$CORDON" explain --json --profile workspace-write --workspace-root "$GW" --cwd "$GW" \
		>"$CD_TMP/gitdir.json"
	check "a gitdir: target with a trailing space is protected as git reads it" \
		python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
want = sys.argv[2] + "/store "
assert [p for p in d["paths"] if p["path"] == want and p["access"] == "read"], d["paths"]' \
		"$CD_TMP/gitdir.json" "$(cd "$CD_TMP" && pwd -P)"
else
	skip "a gitdir: target with a trailing space is protected as git reads it" "no python3"
fi
rm -rf "$GW" "$GD" "$CD_TMP/store "

# explain refuses what run would: a mask with nowhere to be made, a cwd
# under a deny mask.
run_split "$CORDON" explain --profile workspace-write --workspace-root "$WS" --cwd "$WS" \
	--deny "$WS/no-such-dir/x"
rc_is "explain: a missing denied name in a missing directory is refused (125)" 125
contains "explain: it says why" "nor does the directory it would be in"
run_split "$CORDON" run --profile workspace-write --workspace-root "$WS" --cwd "$WS" \
	--deny "$WS/no-such-dir/x" -- true
rc_is "run refuses it alike (125)" 125
assert "and the command cannot make that directory meanwhile" test ! -e "$WS/no-such-dir"
mkdir -p "$WS/private"
run_split "$CORDON" explain --profile workspace-write --workspace-root "$WS" \
	--cwd "$WS/private" --deny "$WS/private"
rc_is "explain: a cwd inside a denied directory is refused (125)" 125
contains "explain: it names the working directory" "the working directory"
rmdir "$WS/private"

# ---- many children: the tree kill is linear, and nothing survives ----
# The kill phase is timed from the command's last step to cordon's exit, so
# forking the children does not count. With strace, count cordon's kill()s.
many='i=0; while [ $i -lt 300 ]; do sleep 100.'"$$"' </dev/null >/dev/null 2>&1 & i=$((i + 1)); done
	date +%s%N >"'"$CD_TMP"'/many.t"; exit 0'
sb sh -c "$many"
rc=$?
end=$(date +%s%N)
assert "300 background children: the command still exits 0" test "$rc" -eq 0
ms=$(((end - $(cat "$CD_TMP/many.t" 2>/dev/null || echo 0)) / 1000000))
# Well under a second here; PROMPT on a busy host (the kill count below is exact).
assert "300 background children are killed at once ($ms ms)" \
	test "$ms" -lt $((CD_TEST_PROMPT * 1000))
assert "no child of the 300 survives" sh -c "! pgrep -f '^sleep 100\\.$$\$' >/dev/null"
if command -v strace >/dev/null 2>&1 && strace -o /dev/null true 2>/dev/null; then
	# (LeakSanitizer fails under ptrace: its exit status does not count here.)
	ASAN_OPTIONS=detect_leaks=0 strace -o "$CD_TMP/many.trace" -e trace=kill -e signal=none \
		"$CORDON" run --profile workspace-write --workspace-root "$WS" --cwd "$WS" \
		-- sh -c "$many"
	kills=$(grep -c '^kill(' "$CD_TMP/many.trace")
	assert "300 background children: cordon kills each once ($kills kill calls)" \
		test "$kills" -le 400
else
	skip "300 background children: cordon kills each once" "no usable strace"
fi

# ---- after all the runs: no leftovers on the host ----
assert "no protected-metadata mount points left in the workspace" \
	test ! -e "$WS/.agents" -a ! -e "$WS/.codex-old"

done_testing
