#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Stands in for /usr/bin/sandbox-exec in the test suite (CORDON_TEST_SEATBELT_EXEC):
# writes its arguments to stderr, NUL-separated between markers, checks that
# they have sandbox-exec's shape (-p POLICY, then -DKEY=VALUE..., then --), and
# runs the command after "--" with CORDON_STANDIN_SANDBOXED=1 in its environment,
# the mark by which the darwin-like build's sandbox_check knows a process it
# ran (.ci/darwin-like.sh). It runs inside cordon's Linux sandbox, or under the
# darwin-like build's cordon serve, in none (tests/integration/macos-serve.py).
printf 'STANDIN<<' >&2
printf '%s\0' "$@" >&2
printf '>>STANDIN\n' >&2
[ "$1" = "-p" ] && [ $# -ge 3 ] || { echo "stand-in: expected -p POLICY" >&2; exit 97; }
# For cordon probe on macOS (src/mac/probe.c): CORDON_STANDIN_NESTED=1 fails as
# sandbox-exec does inside another sandbox; CORDON_STANDIN_NO_ENFORCE=1 leaves
# out the one rule the stand-in enforces, the probe's denied read, which it
# refuses as Seatbelt would (cat's own message).
# CORDON_STANDIN_FDS=1 fails listing its open descriptors (what cordon leaked
# into it); CORDON_STANDIN_BACKGROUND=FILE leaves a child holding its stderr
# (its pid in FILE) and goes on.
if [ "${CORDON_STANDIN_NESTED-}" = 1 ]; then
	echo "sandbox-exec: sandbox_apply: Operation not permitted" >&2
	exit 71
fi
if [ "${CORDON_STANDIN_FDS-}" = 1 ]; then
	# ls lists its own descriptors: what this shell passes on at exec, as
	# the command would get them, and ls's handle on the folder. A listing of
	# the shell's own through $(...) raced with the shell closing its end of
	# that substitution's pipe (an fd 4 seen now and then on a busy host).
	printf 'fds: ' >&2
	ls /proc/self/fd | sort -n | tr '\n' ' ' >&2
	echo >&2
	exit 70
fi
if [ -n "${CORDON_STANDIN_BACKGROUND-}" ]; then
	sleep 600 &
	echo $! >>"$CORDON_STANDIN_BACKGROUND"
fi
case $2 in
*'(deny file-read* (literal (param "CORDON_PROBE_FILE")))'*)
	if [ "${CORDON_STANDIN_NO_ENFORCE-}" != 1 ] && [ "$3" = "-DCORDON_PROBE_FILE=$6" ] &&
		[ "$5" = /bin/cat ]; then
		echo "cat: $6: Operation not permitted" >&2
		exit 1
	fi ;;
esac
shift 2
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	case $1 in
	-D?*=*) shift ;;
	*) echo "stand-in: not a -DKEY=VALUE: $1" >&2; exit 97 ;;
	esac
done
[ "$1" = "--" ] && [ $# -ge 2 ] || { echo "stand-in: no -- CMD" >&2; exit 97; }
shift
CORDON_STANDIN_SANDBOXED=1
export CORDON_STANDIN_SANDBOXED
exec "$@"
