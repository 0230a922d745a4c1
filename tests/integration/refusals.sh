#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Fail closed: whatever cannot be enforced is refused before the command runs
# (exit 125, one line naming the mechanism and the fix).
. "$(dirname "$0")/../lib/libtest.sh"

WS=$CD_TMP/ws
mkdir -p "$WS"
WS=$(cd "$WS" && pwd -P)
M=$CD_TMP/marker

# refused "desc" WANT-IN-MESSAGE cordon-run-args... : exit 125, "cordon: ..." on stderr
# mentioning WANT, and the command (touch $M) never ran.
refused() {
	desc=$1
	want=$2
	shift 2
	rm -f "$M"
	run_split "$CORDON" run "$@" -- touch "$M"
	rc_is "$desc: exit 125" 125
	case $cd_stderr in
	"cordon: "*"$want"*) ok "$desc: the reason mentions '$want'" ;;
	*)
		not_ok "$desc: the reason mentions '$want'"
		diag "stderr: $cd_stderr"
		;;
	esac
	assert "$desc: the command did not run" test ! -e "$M"
	n=$(printf '%s\n' "$cd_stderr" | grep -c .)
	assert "$desc: one line on stderr" test "$n" -eq 1
}

printf '{"version": 1, "type": "managed", "netwrok": "restricted"}\n' >"$CD_TMP/bad.json"
refused "bad profile file" "bad.json:1:" --profile "$CD_TMP/bad.json"
refused "nonexistent profile name" "no such profile" --profile cordon-no-such-profile
refused "missing profile file" "No such file" --profile "$CD_TMP/missing.json"
refused "--min-landlock-abi 99" "Landlock" --profile read-only --min-landlock-abi 99
refused "nonexistent --cwd" "--cwd" --profile read-only --cwd "$CD_TMP/no-such-dir"

CORDON_TEST_DISABLE=landlock
export CORDON_TEST_DISABLE
refused "no Landlock (CORDON_TEST_DISABLE=landlock)" "Landlock" --profile read-only
refused "a refusal caused by the hook says so" "CORDON_TEST_DISABLE=landlock is set" \
	--profile read-only
CORDON_TEST_DISABLE=seccomp
refused "no seccomp (CORDON_TEST_DISABLE=seccomp)" "seccomp" --profile workspace-write --workspace-root "$WS"
CORDON_TEST_DISABLE=landlock,seccomp,userns
rm -f "$M"
check "the test hook never weakens full-access (it has nothing to enforce)" \
	"$CORDON" run --profile full-access -- touch "$M"
assert "full-access ran under the hook" test -e "$M"
unset CORDON_TEST_DISABLE

# The child's report on the error socket cannot be read (the hook fails the
# read): whether the child failed or exec'ed is unknown, so it is killed and
# the run refused with the reason, never a silent 125. The command sleeps
# first, so that having run would show even when the kill lands after exec;
# and cordon reaps it before it returns, so no process of it may be left then.
no_process() {
	! pgrep -f "$1" >/dev/null
}
for profile in workspace-write full-access; do
	rm -f "$M"
	run_split env CORDON_TEST_DISABLE=spawn-report "$CORDON" run --profile $profile \
		--workspace-root "$WS" -- sh -c "sleep 30; touch '$M'; : report-$$-$profile"
	rc_is "unreadable report ($profile): exit 125" 125
	contains "unreadable report ($profile): the reason is given" \
		"cordon: child setup: reading its report: "
	assert "unreadable report ($profile): the command was stopped" \
		no_process "^sh -c sleep 30; touch .*: report-$$-$profile\$"
	assert "unreadable report ($profile): it did not run on" test ! -e "$M"
done

if [ "$(id -u)" -ne 0 ]; then
	CORDON_TEST_DISABLE=userns
	export CORDON_TEST_DISABLE
	refused "no user namespaces (CORDON_TEST_DISABLE=userns)" "user namespaces" \
		--profile workspace-write --workspace-root "$WS"
	contains "no user namespaces: the fix names --allow-degraded" "--allow-degraded"
	# The read-only mounts and pid isolation need one too: opting down one
	# feature is not enough.
	refused "no user namespaces: protected-metadata alone still refuses (file attributes)" \
		"flags changed" --profile workspace-write --workspace-root "$WS" \
		--allow-degraded=protected-metadata
	contains "the file attributes refusal names its opt-down" "--allow-degraded=file-attributes"
	refused "no user namespaces: and with file-attributes (pid isolation)" \
		"pid isolation" --profile workspace-write --workspace-root "$WS" \
		--allow-degraded=protected-metadata --allow-degraded=file-attributes
	contains "the pid isolation refusal names its opt-down" "--allow-degraded=pid-isolation"
	refused "no user namespaces: read-only refuses too (file attributes)" "flags changed" \
		--profile read-only
	refused "no user namespaces: read-only refuses too (pid isolation)" "pid isolation" \
		--profile read-only --allow-degraded=file-attributes
	rm -f "$M"
	run_split "$CORDON" run --profile workspace-write --workspace-root "$WS" \
		--allow-degraded=protected-metadata --allow-degraded=pid-isolation \
		--allow-degraded=file-attributes -- touch "$M"
	rc_is "--allow-degraded=protected-metadata: runs" 0
	assert "--allow-degraded=protected-metadata: the command ran" test -e "$M"
	case $cd_stderr in
	*"cordon: warning: "*) ok "--allow-degraded=protected-metadata: a warning on stderr" ;;
	*)
		not_ok "--allow-degraded=protected-metadata: a warning on stderr"
		diag "stderr: $cd_stderr"
		;;
	esac
	run_split "$CORDON" run -q --profile workspace-write --workspace-root "$WS" \
		--allow-degraded=protected-metadata --allow-degraded=pid-isolation \
		--allow-degraded=file-attributes -- true
	assert "-q silences the degradation warning" test "$cd_rc" -eq 0 -a -z "$cd_stderr"
	# Still sandboxed: only the carve-outs are gone.
	expect_errno "degraded: Landlock still applies" "EACCES|EPERM|EROFS" \
		"$CORDON" run -q --profile workspace-write --workspace-root "$WS" \
		--allow-degraded=protected-metadata --allow-degraded=pid-isolation \
		--allow-degraded=file-attributes -- \
		"$TRY" write-file /etc/cordon-test-$$
	expect_errno "degraded: no IPC namespace, so System V IPC is denied" EPERM \
		"$CORDON" run -q --profile workspace-write --workspace-root "$WS" \
		--allow-degraded=protected-metadata --allow-degraded=pid-isolation \
		--allow-degraded=file-attributes -- "$TRY" shmget
	expect_errno "degraded: seccomp still applies" EPERM \
		"$CORDON" run -q --profile workspace-write --workspace-root "$WS" \
		--allow-degraded=protected-metadata --allow-degraded=pid-isolation \
		--allow-degraded=file-attributes -- \
		"$TRY" socket-inet
	unset CORDON_TEST_DISABLE
else
	# root mounts without a user namespace, so the hook changes nothing here;
	# unprivileged.sh runs this script again as an ordinary user.
	CORDON_TEST_DISABLE=userns
	export CORDON_TEST_DISABLE
	rm -f "$M"
	check "as root, workspace-write needs no user namespace" \
		"$CORDON" run --profile workspace-write --workspace-root "$WS" -- touch "$M"
	unset CORDON_TEST_DISABLE
	skip "no user namespaces as an ordinary user" "running as root; see unprivileged.sh"
fi

# A host that looks able to make namespaces but will not (a container's seccomp
# profile): refused with the opt-down named, or run without them when opted down.
CORDON_TEST_DISABLE=namespace-setup
export CORDON_TEST_DISABLE
refused "namespaces blocked at setup: read-only refuses (file attributes)" \
	"cannot create the sandbox's namespaces after all" --profile read-only
contains "namespaces blocked at setup: the fix names --allow-degraded=file-attributes" \
	"--allow-degraded=file-attributes"
refused "namespaces blocked at setup: read-only refuses (pid isolation)" \
	"cannot create the sandbox's namespaces after all" --profile read-only \
	--allow-degraded=file-attributes
contains "namespaces blocked at setup: the fix names --allow-degraded=pid-isolation" \
	"--allow-degraded=pid-isolation"
refused "namespaces blocked at setup: pid-isolation alone is not enough for workspace-write" \
	"--allow-degraded=protected-metadata" --profile workspace-write --workspace-root "$WS" \
	--allow-degraded=pid-isolation --allow-degraded=file-attributes
rm -f "$M"
run_split "$CORDON" run --profile workspace-write --workspace-root "$WS" \
	--allow-degraded=pid-isolation --allow-degraded=protected-metadata \
	--allow-degraded=file-attributes -- touch "$M"
rc_is "namespaces blocked at setup, both opt-downs: runs" 0
assert "namespaces blocked at setup, both opt-downs: the command ran" test -e "$M"
contains "namespaces blocked at setup: the degradation is reported" "pid isolation NOT enforced"
run_split "$CORDON" explain --profile read-only --allow-degraded=file-attributes
rc_is "namespaces blocked at setup: explain tries them and refuses too" 125
contains "namespaces blocked at setup: explain names the opt-down" "--allow-degraded=pid-isolation"
expect_errno "namespaces blocked at setup: Landlock still applies" "EACCES|EPERM|EROFS" \
	"$CORDON" run -q --profile workspace-write --workspace-root "$WS" \
	--allow-degraded=protected-metadata --allow-degraded=pid-isolation \
		--allow-degraded=file-attributes -- \
	"$TRY" write-file /etc/cordon-test-$$
unset CORDON_TEST_DISABLE

# A mount path that vanished between the parent's look and the child's
# mount (CORDON_TEST_DISABLE=mount-path) is a race: refused with the
# reason, never taken for a host without namespaces (which, with the
# opt-downs given, would run without the carve-outs).
rm -f "$M"
run_split env CORDON_TEST_DISABLE=mount-path "$CORDON" run --profile workspace-write \
	--workspace-root "$WS" --allow-degraded=protected-metadata \
	--allow-degraded=pid-isolation --allow-degraded=file-attributes -- touch "$M"
rc_is "a vanished mount path: exit 125" 125
contains "a vanished mount path: says it changed, and to run again" \
	"it changed while the sandbox was set up; run again"
not_contains "a vanished mount path: not taken for a host without namespaces" \
	"cannot create the sandbox's namespaces after all"
assert "a vanished mount path: the command did not run" test ! -e "$M"

# explain shows the same refusals without running anything.
CORDON_TEST_DISABLE=landlock
export CORDON_TEST_DISABLE
run_split "$CORDON" explain --profile read-only
rc_is "explain under the refusal: exit 125" 125
contains "explain under the refusal: the reason" "Landlock"
unset CORDON_TEST_DISABLE

done_testing
