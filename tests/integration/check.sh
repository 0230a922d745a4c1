#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# cordon check: strict validation of policy files with FILE:LINE:COL errors.
. "$(dirname "$0")/../lib/libtest.sh"

P=${CD_POLICYDIR:?CD_POLICYDIR is not set}

for name in read-only workspace-write full-access; do
	run_split "$CORDON" check "$P/$name.json"
	rc_is "built-in $name passes" 0
	assert "built-in $name: '$P/$name.json: ok' on stdout" \
		test "$cd_stdout" = "$P/$name.json: ok"
done

D=$CD_TMP
printf '{"version": 1, "type": "disabled"}\n' >"$D/good.json"
# Each bad file: the error must carry FILE:LINE:COL and the point of the mistake.
printf '{"version": 1, "type": "managed", "network": "restricted",\n  "bogus": 1,\n  "file_system": {"type": "restricted", "entries": []}}\n' >"$D/unknown-key.json"
printf '{"version": 1, "type": "managed",\n  "network": true,\n  "file_system": {"type": "restricted", "entries": []}}\n' >"$D/wrong-type.json"
printf '{"version": 1, "type": "managed", "network": "restricted",\n  "file_system": {"type": "restricted", "entries": [\n    {"path": {"type": "path", "path": "http://example.com/etc"}, "access": "read"}]}}\n' >"$D/bad-uri.json"
printf '{"version": 1,\n  "type": "managed",,\n}\n' >"$D/invalid.json"
printf '{"version": 1,\n  "type": "managed",\n  "type": "disabled"}\n' >"$D/duplicate.json"
printf '{"type": "disabled"}\n' >"$D/no-version.json"
printf '{"version": 2, "type": "disabled"}\n' >"$D/bad-version.json"
printf '{"version": 1, "type": "managed", "network": "restricted",\n  "file_system": {"type": "restricted", "entries": [\n    {"path": {"type": "special", "value": {"kind": "root"}}, "access": "rw"}]}}\n' >"$D/bad-access.json"

# bad_file NAME LINE WHAT: "FILE:LINE:COL: error: ...WHAT..." on stderr, exit 1, nothing on stdout.
bad_file() {
	f=$D/$1.json
	run_split "$CORDON" check "$f"
	rc_is "$1: exit 1" 1
	assert "$1: nothing on stdout" test -z "$cd_stdout"
	case $cd_stderr in
	"$f:$2:"[0-9]*": error: "*"$3"*) ok "$1: $f:$2:COL: error: ...$3..." ;;
	*)
		not_ok "$1: $f:$2:COL: error: ...$3..."
		diag "got: $cd_stderr"
		;;
	esac
}

bad_file unknown-key 2 '"bogus"'
bad_file wrong-type 2 'network'
bad_file bad-uri 3 'file://'
bad_file invalid 2 ''
bad_file duplicate 3 'duplicate'
bad_file no-version 1 'version'
bad_file bad-version 1 'version'
bad_file bad-access 3 'rw'

run_split "$CORDON" check "$D/unknown-key.json"
contains "unknown key: names the location" "(at "

run_split "$CORDON" check "$D/good.json" "$D/unknown-key.json" "$P/read-only.json" "$D/invalid.json"
rc_is "mixed good and bad files: exit 1" 1
assert "mixed: each good file reported ok" \
	test "$cd_stdout" = "$D/good.json: ok
$P/read-only.json: ok"
assert "mixed: one error line per bad file" test "$(printf '%s\n' "$cd_stderr" | grep -c ': error: ')" -eq 2

run_split "$CORDON" check "$D/good.json" "$P/full-access.json"
rc_is "all good: exit 0" 0

run_split "$CORDON" check "$D/does-not-exist.json"
rc_is "missing file: exit 1" 1
contains "missing file: says why" "No such file or directory"

: >"$D/empty.json"
expect_exit "empty file: exit 1" 1 "$CORDON" check "$D/empty.json"

# 1 MiB + 1 byte of whitespace after a valid document.
if command -v head >/dev/null 2>&1; then
	{
		printf '{"version": 1, "type": "disabled"}'
		head -c 1048577 /dev/zero | tr '\0' ' '
	} >"$D/huge.json"
	run_split "$CORDON" check "$D/huge.json"
	rc_is "file over 1 MiB: exit 1" 1
	contains "file over 1 MiB: says so" "larger than 1 MiB"
fi

expect_exit "no files: exit 2" 2 "$CORDON" check

done_testing
