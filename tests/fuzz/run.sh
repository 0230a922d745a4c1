#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Run libFuzzer targets one after the other (`make fuzz` calls this).
#
#   run.sh --seconds N [--only 'json glob'] --srcdir DIR --workdir DIR \
#          -- TARGET... -- [LIBFUZZER-FLAGS...]
#
# Each target fuzz-NAME runs for N seconds on the working corpus
# WORKDIR/work/NAME (where libFuzzer adds what it finds), seeded from
# SRCDIR/corpus/NAME, with SRCDIR/dict/NAME.dict when there is one. Its
# output goes to WORKDIR/work/NAME.log; one summary line per target is
# printed (runs, execs/s, coverage). A crash, a leak, a timeout or a broken
# property stops that target: the input is saved as
# WORKDIR/artifacts/NAME-crash-..., and the script fails at the end.

set -u

seconds=60 only='' srcdir='' workdir=''
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) seconds=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--srcdir) srcdir=$2; shift 2 ;;
	--workdir) workdir=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
targets=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	targets="$targets $1"
	shift
done
[ $# -gt 0 ] && shift
case $seconds in
'' | *[!0-9]*) echo "run.sh: FUZZ_SECONDS must be a number of seconds, not '$seconds'" >&2; exit 2 ;;
esac

mkdir -p "$workdir/work" "$workdir/artifacts" || exit 1
failed=
for t in $targets; do
	name=${t##*/fuzz-}
	if [ -n "$only" ]; then
		case " $only " in
		*" $name "*) ;;
		*) continue ;;
		esac
	fi
	corpus=$workdir/work/$name
	log=$workdir/work/$name.log
	mkdir -p "$corpus"
	dict=
	[ -f "$srcdir/dict/$name.dict" ] && dict=-dict=$srcdir/dict/$name.dict
	# -timeout: one input taking 10 s is a hang (the inputs are small).
	# -max_len: the serve targets need room for a few messages, ws for
	# an HTTP head over its 16 KiB limit, gitindex more than its reads'
	# first window (4 KiB).
	max_len=4096
	case $name in
	conn) max_len=16384 ;;
	ws) max_len=20000 ;;
	gitindex) max_len=32768 ;;
	esac
	# shellcheck disable=SC2086 # $dict is one word or none
	"$t" -max_total_time="$seconds" -timeout=10 -max_len=$max_len -print_final_stats=1 \
		-artifact_prefix="$workdir/artifacts/$name-" $dict "$@" \
		"$corpus" "$srcdir/corpus/$name" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed -n 's/.*cov: \([0-9]*\).*ft: \([0-9]*\).*corp: \([0-9]*\).*/\1 edges, \2 features, corpus \3/p')
	if [ "$rc" -eq 0 ]; then
		printf 'fuzz-%s: ok: %s runs in %s s (%s/s), %s\n' "$name" "${runs:-?}" \
			"$seconds" "${rate:-?}" "${cov:-?}"
	else
		printf 'fuzz-%s: FAILED (exit %s) after %s runs; the end of %s:\n' "$name" "$rc" \
			"${runs:-?}" "$log"
		grep -v -E '^#[0-9]+' "$log" | tail -n 40
		failed="$failed $name"
	fi
done
if [ -n "$failed" ]; then
	echo "fuzz: failed:$failed (inputs in $workdir/artifacts; rerun one with tests/fuzz/fuzz-NAME FILE)"
	exit 1
fi
