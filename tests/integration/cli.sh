#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The command-line surface: help, version, usage errors and their exit codes.
. "$(dirname "$0")/../lib/libtest.sh"

# Every subcommand's --help exits 0 on stdout and names its options.
help_mentions() {
	sub=$1
	shift
	run_split "$CORDON" "$sub" --help
	if [ "$cd_rc" -eq 0 ]; then
		ok "cordon $sub --help exits 0"
	else
		not_ok "cordon $sub --help exits 0 (got $cd_rc)"
	fi
	missing=
	for opt in "$@"; do
		case $cd_stdout in
		*"$opt"*) ;;
		*) missing="$missing $opt" ;;
		esac
	done
	if [ -z "$missing" ]; then
		ok "cordon $sub --help mentions its options"
	else
		not_ok "cordon $sub --help mentions its options (missing:$missing)"
		diag "$cd_stdout"
	fi
}

help_mentions run --profile --workspace-root --cwd --allow-read --allow-write --deny --deny-glob \
	--network --allow-degraded --min-landlock-abi --clear-env --setenv --unsetenv \
	--verbose --quiet
help_mentions explain --profile --workspace-root --cwd --allow-read --allow-write --deny --deny-glob \
	--network --allow-degraded --min-landlock-abi --backend --json
help_mentions probe --json
help_mentions check FILE

run_split "$CORDON" run -h
assert "-h is --help" test "$cd_rc" -eq 0 -a -n "$cd_stdout"

run_split "$CORDON" --help
rc_is "cordon --help exits 0" 0
contains "cordon --help lists the subcommands" "explain"

run_split "$CORDON" --version
rc_is "cordon --version exits 0" 0
case $cd_stdout in
"cordon "[0-9]*) ok "--version prints 'cordon VERSION'" ;;
*) not_ok "--version prints 'cordon VERSION' (got '$cd_stdout')" ;;
esac

run_split "$CORDON"
rc_is "no subcommand: exit 2" 2
assert "no subcommand: usage on stderr, nothing on stdout" \
	test -n "$cd_stderr" -a -z "$cd_stdout"

run_split "$CORDON" frobnicate
rc_is "unknown subcommand: exit 2" 2

run_split "$CORDON" run --foo -- true
rc_is "unknown option: exit 2" 2
if [ "$cd_stderr" = "cordon: run: unknown option --foo (see cordon run --help)" ]; then
	ok "unknown option: the one-line message"
else
	not_ok "unknown option: the one-line message"
	diag "got: $cd_stderr"
fi

for sub in explain probe check; do
	expect_exit "$sub: unknown option gives exit 2" 2 "$CORDON" $sub --no-such-option
done

run_split "$CORDON" run --profile
rc_is "missing option argument: exit 2" 2
contains "missing option argument: names the option" "--profile"

expect_exit "run without CMD: exit 2" 2 "$CORDON" run --profile read-only
expect_exit "run with only --: exit 2" 2 "$CORDON" run --
expect_exit "check without files: exit 2" 2 "$CORDON" check
expect_exit "explain takes no operands" 2 "$CORDON" explain extra
expect_exit "--network with an unknown mode: exit 2" 2 "$CORDON" explain --network sideways
expect_exit "--allow-degraded with an unknown feature: exit 2" 2 \
	"$CORDON" explain --allow-degraded=everything
expect_exit "--min-landlock-abi needs a number: exit 2" 2 "$CORDON" explain --min-landlock-abi x
expect_exit "--setenv needs NAME=VALUE: exit 2" 2 "$CORDON" run --setenv FOO -- true
expect_exit "--allow-write with a relative path: exit 2" 2 \
	"$CORDON" explain --profile workspace-write --allow-write relative/path
expect_exit "--allow-read on a disabled profile: exit 2" 2 \
	"$CORDON" explain --profile full-access --allow-read /etc

run_split "$CORDON" explain --backend solaris
rc_is "explain --backend solaris: exit 2" 2
contains "explain --backend solaris: the known ones are named" "(linux, seatbelt or windows)"
expect_exit "explain --backend linux works" 0 "$CORDON" explain --backend linux --profile read-only

# Options are read up to CMD only: the command's own options pass through.
run_split "$CORDON" run --profile full-access echo --profile -v
assert "options after CMD belong to the command" test "$cd_rc" -eq 0 -a "$cd_stdout" = "--profile -v"
run_split "$CORDON" run --profile=full-access -- echo ok
assert "--name=value spelling" test "$cd_rc" -eq 0 -a "$cd_stdout" = "ok"

probe_out=$("$CORDON" probe 2>&1)
assert "probe exits 0" test $? -eq 0
case $probe_out in
*"landlock"*) ok "probe reports landlock" ;;
*) not_ok "probe reports landlock" ;;
esac
if printf '%s\n' "$probe_out" | grep -qvE '^(ok   |MISSING )'; then
	not_ok "probe lines start with 'ok   ' or 'MISSING '"
	diag "$probe_out"
else
	ok "probe lines start with 'ok   ' or 'MISSING '"
fi
if command -v python3 >/dev/null 2>&1; then
	check "probe --json has host and items" sh -c "'$CORDON' probe --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
h = d[\"host\"]
for k in (\"landlock_abi\", \"seccomp\", \"userns\", \"is_root\"):
    assert k in h, k
assert isinstance(d[\"items\"], list) and d[\"items\"]
for it in d[\"items\"]:
    assert set((\"name\", \"ok\", \"detail\", \"fix\")) <= set(it), it
'"
else
	skip "probe --json has host and items" "python3 not installed"
fi

done_testing
