#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
#   tests/darwin-serve.sh CORDON LOGDIR
#
# Drives `cordon serve` of a macOS build made on Linux by .ci/darwin-like.sh
# (CORDON, with the suite's stand-in for sandbox-exec compiled in) over stdio:
# tests/integration/macos-serve.py, and the serve tests of the Linux suite
# that hold on macOS too, on the poll loop, with CD_DARWIN_LIKE telling them
# what only Linux does. Each script's TAP output goes to LOGDIR; a failed one
# is printed. Exit status 0 when every check passed. `make check-darwin-serve`
# runs it, and CI's darwin stage as root and as cordon-test.
set -u
cordon=${1:?usage: darwin-serve.sh CORDON LOGDIR}
logs=${2:?usage: darwin-serve.sh CORDON LOGDIR}
src=$(cd "$(dirname "$0")/.." && pwd)
fail=0
total=0
for t in macos-serve serve-process serve-framing serve-handshake; do
	log=$logs/darwin-serve-$t.log
	CORDON=$cordon CD_DARWIN_LIKE=1 CORDON_TEST_SERVE_LOOPS=poll CD_SRCDIR=$src \
		PYTHONDONTWRITEBYTECODE=1 python3 "$src/tests/integration/$t.py" >"$log" 2>&1
	rc=$?
	n=$(grep -c '^ok' "$log")
	skipped=$(grep -c '^ok.*# SKIP' "$log")
	total=$((total + n))
	if [ "$rc" -ne 0 ] || grep -q '^not ok' "$log" || ! grep -q '^1\.\.[1-9]' "$log"; then
		cat "$log"
		echo "darwin-serve: $t.py FAILED (exit status $rc; $log)"
		fail=1
	else
		echo "darwin-serve: $t.py: $n checks passed ($skipped skipped)"
	fi
done
[ "$fail" -eq 0 ] || exit 1
echo "darwin-serve: $total checks passed"
