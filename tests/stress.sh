#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# make check-stress: the test suite ROUNDS times in a row (3) with BUSY
# CPU-bound loops beside it (2), the way a busy CI host or a developer's
# laptop runs it. A test that decides its verdict by a sleep or a deadline
# fails here sooner or later; one that waits for events does not.
#
#   tests/stress.sh MAKE [ROUNDS [BUSY]]
#
# MAKE is the make to run "check" with (TESTS= and the other variables of
# the calling make reach it through MAKEFLAGS). Each round's test-suite.log
# is kept as test-suite-stress-N.log. Exit status 0 when every round passed.
set -u

make_cmd=${1:?usage: stress.sh MAKE [ROUNDS [BUSY]]}
rounds=${2:-3}
busy=${3:-2}

pids=
stop_busy() {
	for p in $pids; do
		kill "$p" 2>/dev/null
	done
	for p in $pids; do
		wait "$p" 2>/dev/null
	done
	pids=
}
# The busy loops never outlive the script, however it ends.
trap 'stop_busy' EXIT
trap 'stop_busy; exit 129' HUP
trap 'stop_busy; exit 130' INT
trap 'stop_busy; exit 141' PIPE
trap 'stop_busy; exit 143' TERM

i=0
while [ "$i" -lt "$busy" ]; do
	(while :; do :; done) &
	pids="$pids $!"
	i=$((i + 1))
done
echo "check-stress: $rounds round(s) of make check beside $busy busy loop(s) (pids$pids)"

failed=0
summary=
r=1
while [ "$r" -le "$rounds" ]; do
	t0=$(date +%s)
	$make_cmd check
	rc=$?
	t1=$(date +%s)
	if [ -f test-suite.log ]; then
		cp test-suite.log "test-suite-stress-$r.log"
		counts=$(awk '/^# (TOTAL|PASS|SKIP|FAIL|XPASS|ERROR):/ { printf "%s %s ", $2, $3 }' \
			test-suite.log)
	else
		counts="(no test-suite.log)"
	fi
	line="round $r: exit $rc in $((t1 - t0)) s: $counts"
	echo "check-stress: $line"
	summary="$summary
  $line"
	[ "$rc" -eq 0 ] || failed=$((failed + 1))
	r=$((r + 1))
done
stop_busy
echo "check-stress: summary ($busy busy loops):$summary"
if [ "$failed" -ne 0 ]; then
	echo "check-stress: $failed of $rounds round(s) failed; see test-suite-stress-N.log"
	exit 1
fi
echo "check-stress: all $rounds rounds passed"
