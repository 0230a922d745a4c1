#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# cordon run with the read-only and full-access profiles.
. "$(dirname "$0")/../lib/libtest.sh"

WS=$CD_TMP/ws
mkdir -p "$WS"
WS=$(cd "$WS" && pwd -P)
tag=cordon-test-$$
denied="EACCES|EPERM|EROFS"

# ---- read-only ----
ro() {
	"$CORDON" run --profile read-only --workspace-root "$WS" --cwd "$WS" -- "$@"
}
if ! out=$(ro true 2>&1); then
	skip "read-only profile" "this host cannot enforce it: $out"
else
	expect_errno "read-only: write in the workspace root is denied" "$denied" \
		ro "$TRY" write-file "$WS/$tag"
	assert "read-only: nothing appeared in the workspace" test ! -e "$WS/$tag"
	expect_errno "read-only: write in /tmp is denied" "$denied" ro "$TRY" write-file "/tmp/$tag"
	assert "read-only: nothing appeared in /tmp" test ! -e "/tmp/$tag"
	if [ -n "${TMPDIR:-}" ] && [ -d "$TMPDIR" ]; then
		expect_errno "read-only: write in \$TMPDIR is denied" "$denied" \
			ro "$TRY" write-file "$TMPDIR/$tag"
	fi
	if [ -n "${HOME:-}" ] && [ -d "$HOME" ]; then
		expect_errno "read-only: write in \$HOME is denied" "$denied" \
			ro "$TRY" write-file "$HOME/.$tag"
		assert "read-only: nothing appeared in \$HOME" test ! -e "$HOME/.$tag"
	else
		skip "read-only: write in \$HOME is denied" "no HOME"
	fi
	expect_errno "read-only: mkdir in the workspace is denied" "$denied" ro "$TRY" mkdir "$WS/d"
	echo keep >"$WS/existing"
	expect_errno "read-only: overwrite an existing file is denied" "$denied" \
		ro "$TRY" write-file "$WS/existing"
	expect_errno "read-only: delete an existing file is denied" "$denied" \
		ro "$TRY" unlink "$WS/existing"
	assert "read-only: the existing file is intact" test "$(cat "$WS/existing")" = keep
	# Landlock does not govern a file's attributes: read-only mounts do.
	chmod 644 "$WS/existing"
	before=$(stat -c '%a %Y' "$WS/existing")
	expect_errno "read-only: chmod of an own file is refused" EROFS \
		ro "$TRY" chmod "$WS/existing"
	expect_errno "read-only: setting its times is refused" EROFS ro "$TRY" utimes "$WS/existing"
	assert "read-only: its mode and time are unchanged" \
		test "$(stat -c '%a %Y' "$WS/existing")" = "$before"
	check "read-only: >/dev/null works" ro sh -c 'echo x >/dev/null'
	check "read-only: reading works" ro "$TRY" read-file "$WS/existing"
	out=$(ro cat "$WS/existing")
	assert "read-only: cat shows the content" test "$out" = keep
	check "read-only: commands run (ls /)" ro ls /
	expect_errno "read-only: network restricted (AF_INET denied)" EPERM ro "$TRY" socket-inet
	expect_errno "read-only: ptrace denied" EPERM ro "$TRY" ptrace-traceme
	# --allow-write widens a managed profile.
	check "read-only + --allow-write DIR: writing there works" \
		"$CORDON" run --profile read-only --allow-write "$WS" --cwd "$WS" -- "$TRY" write-file "$WS/allowed"
	assert "read-only + --allow-write: the file is there" test -f "$WS/allowed"
	expect_errno "read-only + --allow-write: elsewhere still denied" "$denied" \
		"$CORDON" run --profile read-only --allow-write "$WS" -- "$TRY" write-file "/tmp/$tag"
	# --network enabled lifts the socket rules, nothing else.
	check "read-only --network enabled: AF_INET allowed" \
		"$CORDON" run --profile read-only --network enabled -- "$TRY" socket-inet
	expect_errno "read-only --network enabled: still read-only" "$denied" \
		"$CORDON" run --profile read-only --network enabled -- "$TRY" write-file "$WS/$tag"
	# The default profile is read-only.
	expect_errno "no --profile means read-only" "$denied" \
		"$CORDON" run --cwd "$WS" -- "$TRY" write-file "$WS/$tag"
fi

# ---- full-access ----
fa() {
	"$CORDON" run --profile full-access -- "$@"
}
OUT=$CD_TMP/outside
mkdir -p "$OUT"
check "full-access: write to a directory outside any workspace" fa "$TRY" write-file "$OUT/f"
assert "full-access: the file is there" test -f "$OUT/f"
check "full-access: AF_INET socket works" fa "$TRY" socket-inet
check "full-access: AF_INET6 socket works (or is unsupported by the host)" \
	sh -c "'$CORDON' run --profile full-access -- '$TRY' socket-inet6; r=\$?; test \$r -eq 0 -o \$r -eq 97"
check "full-access: ptrace(TRACEME) works" fa "$TRY" ptrace-traceme
check "full-access: personality works" fa "$TRY" personality-bad
expect_errno "full-access: TIOCSTI reaches the kernel (ENOTTY on /dev/null)" ENOTTY \
	fa "$TRY" tiocsti </dev/null
cd_run_capture fa cat /proc/self/status
nnp=$(printf '%s\n' "$cd_out" | awk '/^NoNewPrivs:/ {print $2}')
assert "full-access: no_new_privs is not set" test "$nnp" = 0
expect_exit "full-access: exit status passes through" 5 fa sh -c 'exit 5'
expect_exit "full-access: command not found is 127" 127 fa cordon-no-such-command-here
out=$(echo in | fa cat)
assert "full-access: stdio passes through" test "$out" = in

# ---- restricted reads and the sandbox's own /proc ----
# Landlock does not see through a mount that hides another: a read rule on
# /proc must cover the /proc of the pid namespace, not the host's one under it.
printf '%s\n' '{"version": 1, "type": "managed", "network": "restricted",' \
	' "file_system": {"type": "restricted", "entries": [' \
	'  {"path": {"type": "special", "value": {"kind": "minimal"}}, "access": "read"}]}}' \
	>"$CD_TMP/minimal.json"
check "minimal + --allow-read /proc: the sandbox's /proc is readable" \
	"$CORDON" run --profile "$CD_TMP/minimal.json" --allow-read /proc -- head -1 /proc/self/status
expect_fail "minimal without /proc: /proc is not readable" \
	"$CORDON" run --profile "$CD_TMP/minimal.json" -- head -1 /proc/self/status

# ---- deny masks: denied paths inside readable and writable regions ----
D=$CD_TMP/deny
mkdir -p "$D/secretdir" "$D/ws"
echo s1 >"$D/secretdir/key"
echo s2 >"$D/secret.txt"
echo pub >"$D/public"
echo tok >"$D/ws/.env"
dn() {
	"$CORDON" run --profile workspace-write --workspace-root "$D/ws" --cwd "$D/ws" \
		--deny "$D/secretdir" --deny "$D/secret.txt" --deny "$D/ws/.env" \
		--deny "$D/ws/keys" -- "$@"
}
check "deny: the rest of a readable region stays readable" dn cat "$D/public"
expect_errno "deny: a denied file cannot be read" "EACCES|EPERM" dn "$TRY" read-file "$D/secret.txt"
expect_fail "deny: a denied directory cannot be listed" dn ls "$D/secretdir"
expect_errno "deny: a file inside a denied directory cannot be read" "EACCES|EPERM|ENOENT" \
	dn "$TRY" read-file "$D/secretdir/key"
expect_errno "deny: a denied file in the workspace cannot be read" "EACCES|EPERM" \
	dn "$TRY" read-file "$D/ws/.env"
expect_fail "deny: nor overwritten" dn sh -c "echo x > '$D/ws/.env'"
expect_fail "deny: nor removed" dn rm -f "$D/ws/.env"
expect_fail "deny: a missing denied path in the workspace cannot be created" \
	dn mkdir "$D/ws/keys"
check "deny: the workspace stays writable" dn sh -c "echo ok > '$D/ws/fine'"
assert "deny: the denied files are intact and nothing is left behind" \
	test "$(cat "$D/ws/.env")" = tok -a "$(cat "$D/secret.txt")" = s2 -a ! -e "$D/ws/keys" \
	-a ! -L "$D/ws/keys"
run_split "$CORDON" run --profile read-only --deny "$D" --allow-read "$D/public" -- true
rc_is "deny: a path allowed inside a denied directory is refused (125)" 125
run_split "$CORDON" run --profile read-only --deny /proc/cpuinfo -- true
rc_is "deny: an entry under /proc is refused (the sandbox has its own /proc)" 125
# Two runs share the mask of a missing denied path: the second still cannot
# create it after the first has ended. Each run waits on a FIFO until the test
# opens it: the second starts while the first runs, and tries once it ended.
mkfifo "$CD_TMP/first" "$CD_TMP/second"
dn sh -c "read x < '$CD_TMP/first'" &
first=$!
(dn sh -c ": > '$CD_TMP/second.ready'; read x < '$CD_TMP/second'; echo x > '$D/ws/keys'" \
	>"$CD_TMP/second.out" 2>&1
echo "rc=$?" >>"$CD_TMP/second.out") &
second=$!
wait_until test -e "$CD_TMP/second.ready"
echo go >"$CD_TMP/first"
wait "$first"
echo go >"$CD_TMP/second"
wait "$second"
assert "deny: a concurrent run shares the mask of a missing denied path" \
	sh -c "! grep -qx 'rc=0' '$CD_TMP/second.out'"
grep -qx 'rc=0' "$CD_TMP/second.out" && diag "second run: $(cat "$CD_TMP/second.out")"
assert "deny: the shared mask is gone after both runs" test ! -e "$D/ws/keys" -a ! -L "$D/ws/keys"
# ---- glob_pattern deny entries: expanded to the matches before launch ----
G=$CD_TMP/glob
mkdir -p "$G/ws/src/deep" "$G/ws/.git" "$G/other"
echo e1 >"$G/ws/.env"
echo e2 >"$G/ws/src/deep/prod.env"
echo code >"$G/ws/src/main.c"
echo o1 >"$G/other/x.env"
gl() {
	"$CORDON" run --profile workspace-write --workspace-root "$G/ws" --cwd "$G/ws" \
		--deny-glob '**/*.env' --deny-glob "$G/other/*.env" --deny-glob 'keys' -- "$@"
}
expect_errno "glob: a match at the top of the workspace cannot be read" "EACCES|EPERM" \
	gl "$TRY" read-file "$G/ws/.env"
expect_errno "glob: a match deep in the workspace cannot be read" "EACCES|EPERM" \
	gl "$TRY" read-file "$G/ws/src/deep/prod.env"
expect_fail "glob: nor overwritten" gl sh -c "echo x > '$G/ws/src/deep/prod.env'"
expect_errno "glob: an absolute pattern denies outside the workspace too" "EACCES|EPERM" \
	gl "$TRY" read-file "$G/other/x.env"
check "glob: a file that does not match stays readable and writable" \
	gl sh -c "cat '$G/ws/src/main.c' && echo more >> '$G/ws/src/main.c'"
expect_errno "glob: a pattern without wildcards masks a missing path" "EACCES|EPERM|EROFS|EEXIST" \
	gl "$TRY" mkdir "$G/ws/keys"
assert "glob: the matched files are intact" \
	test "$(cat "$G/ws/src/deep/prod.env")" = e2 -a ! -e "$G/ws/keys" -a ! -L "$G/ws/keys"
# A directory the walk cannot list (as a non-root user) is denied whole, so a
# chmod from inside cannot reach a match below it.
mkdir -p "$G/ws/locked"
echo K >"$G/ws/locked/id.key"
chmod 000 "$G/ws/locked"
expect_fail "glob: a match in a directory cordon cannot list stays unreadable" \
	"$CORDON" run --profile workspace-write --workspace-root "$G/ws" --cwd "$G/ws" \
	--deny-glob 'locked/*.key' -- sh -c 'chmod 700 locked; cat locked/id.key'
chmod 700 "$G/ws/locked"
# A symlink that matches is no match: planted in the workspace, it neither
# refuses the run nor redirects the deny.
ln -s "$G/other/x.env" "$G/ws/planted.pem"
check "glob: a matching symlink is skipped, the run goes ahead" \
	"$CORDON" run --profile workspace-write --workspace-root "$G/ws" --cwd "$G/ws" \
	--deny-glob '*.pem' -- cat "$G/other/x.env"
rm -f "$G/ws/planted.pem"
run_split "$CORDON" explain --profile workspace-write --workspace-root "$G/ws" --cwd "$G/ws" \
	--deny-glob '**/*.env'
assert "glob: explain lists each match with its entry" \
	sh -c 'printf "%s\n" "$1" | grep -q "^  deny .*/glob/ws/src/deep/prod.env  *entry 7 (\*\*/\*.env, deny)"' \
	sh "$cd_stdout"
run_split "$CORDON" run --profile read-only --deny-glob '/**/*.env' -- true
rc_is "glob: a pattern that would scan / is refused (125)" 125
contains "glob: the refusal says why" "would scan the whole file system"
mkdir -p "$G/many"
(cd "$G/many" && seq 1 8193 | sed 's/$/.key/' | xargs touch)
run_split "$CORDON" run --profile read-only --cwd "$G/many" --deny-glob '*.key' -- true
rc_is "glob: more than 8192 matches is refused (125)" 125
contains "glob: the refusal names the limit" "matches more than 8192 paths"
deep=$G/deep
i=0
while [ $i -lt 66 ]; do deep=$deep/d; i=$((i + 1)); done
mkdir -p "$deep"
run_split "$CORDON" run --profile read-only --cwd "$G/deep" --deny-glob '**/*.pem' -- true
rc_is "glob: a tree deeper than the default bound is refused (125)" 125
contains "glob: the refusal points at glob_scan_max_depth" "glob_scan_max_depth"
run_split "$CORDON" run --profile read-only --deny-glob "$G/ws/[oops" -- true
rc_is "glob: a malformed pattern is a usage error (2)" 2
contains "glob: the usage error says what is wrong" "unterminated"

# A mount the host makes during the run must not reach the sandbox (its /
# is private, not a slave): here the directory holding a denied one bound
# over itself, which would cover the deny mask, made in a mount namespace
# with shared propagation, as systemd sets up /.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null 2>&1; then
	# The sandboxed command reads the key once the host mounted (it waits on a
	# FIFO the host opens after the mount).
	mkfifo "$CD_TMP/prop.gate"
	unshare -m --propagation shared sh -c '
		"$1" run --profile read-only --deny "$2/secretdir" -- \
			sh -c "echo ready; read x < \"$3\"; cat \"$2/secretdir/key\"" >"$2/../prop.out" 2>&1 &
		run=$! i=0
		until grep -q ready "$2/../prop.out" 2>/dev/null || ! kill -0 $run 2>/dev/null ||
			[ $i -ge $(($4 * 100)) ]; do
			sleep 0.01
			i=$((i + 1))
		done
		mount --bind "$2" "$2"
		kill -0 $run 2>/dev/null && echo go >"$3"
		wait' sh "$CORDON" "$D" "$CD_TMP/prop.gate" "$CD_TEST_WAIT"
	assert "deny: a host mount made during the run does not reach the sandbox" \
		sh -c "! grep -q s1 '$D/../prop.out'"
else
	skip "deny: a host mount made during the run does not reach the sandbox" "needs root and unshare"
fi

done_testing
