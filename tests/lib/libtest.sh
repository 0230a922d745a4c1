# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared TAP helpers for the integration tests (POSIX sh). Source it:
#   . "$(dirname "$0")/../lib/libtest.sh"
#
# Environment (set by `make check`): CORDON (the binary), CD_TEST_HELPERS
# (directory with try-syscall), CD_POLICYDIR (the source policies/). The
# built-in profiles are found through CORDON_POLICY_PATH=$CD_POLICYDIR.
#
#   check "desc" CMD...          ok when CMD exits 0
#   assert "desc" CMD...         the same without capturing (tests on earlier results)
#   rc_is "desc" N               the last captured command exited with N
#   contains/not_contains "desc" STRING   on the last captured output
#   expect_fail "desc" CMD...    ok when CMD exits non-zero
#   expect_exit "desc" N CMD...  ok when CMD exits with status N
#   expect_errno "desc" ERRNO CMD...  ok when CMD exits with that errno
#                                (names like EPERM; "EPERM|EACCES" for any of them)
#   ok/not_ok "desc", skip "desc" "reason", diag "text", plan N,
#   done_testing, skip_all "reason", $CD_TMP (removed on exit)
#   wait_until CMD...            run CMD until it succeeds; 1 after CD_TEST_WAIT s
#
# Tests wait for events (a file, a line of output, a process gone), never for
# time: CD_TEST_WAIT (120) seconds bound a wait that only a failing test
# reaches; CD_TEST_PROMPT (5) seconds is what "at once" may take on a busy host.

: "${CORDON:=cordon}"
: "${CD_TEST_HELPERS:=.}"
TRY="$CD_TEST_HELPERS/try-syscall"
if [ -n "${CD_POLICYDIR:-}" ]; then
	CORDON_POLICY_PATH=$CD_POLICYDIR
	export CORDON_POLICY_PATH
fi
# What must happen is waited for this long at most (a failure); "at once" within PROMPT.
: "${CD_TEST_WAIT:=120}"
: "${CD_TEST_PROMPT:=5}"

# Keep the tests' view of the environment deterministic.
unset CORDON_TEST_DISABLE
LC_ALL=C
export LC_ALL

cd_test_num=0
cd_test_failed=0
cd_test_planned=

plan() {
	echo "1..$1"
	cd_test_planned=$1
}

diag() {
	printf '%s\n' "$*" | sed 's/^/# /'
}

ok() {
	cd_test_num=$((cd_test_num + 1))
	echo "ok $cd_test_num - $*"
}

not_ok() {
	cd_test_num=$((cd_test_num + 1))
	cd_test_failed=$((cd_test_failed + 1))
	echo "not ok $cd_test_num - $*"
}

# skip "desc" "reason"
skip() {
	cd_test_num=$((cd_test_num + 1))
	echo "ok $cd_test_num - $1 # SKIP ${2:-}"
}

skip_all() {
	echo "1..0 # SKIP $*"
	exit 0
}

done_testing() {
	if [ -z "$cd_test_planned" ]; then
		echo "1..$cd_test_num"
	fi
	exit 0
}

# Last command's captured output, for diagnostics.
cd_out=
cd_rc=0

cd_run_capture() {
	cd_out=$("$@" 2>&1)
	cd_rc=$?
}

check() {
	cd_desc=$1
	shift
	cd_run_capture "$@"
	if [ "$cd_rc" -eq 0 ]; then
		ok "$cd_desc"
	else
		not_ok "$cd_desc"
		diag "command: $*"
		diag "exit status $cd_rc; output:"
		diag "$cd_out"
	fi
}

# assert "desc" CMD...: like check, but CMD is a test on earlier results
# (e.g. `test "$cd_rc" -eq 2`): its output is not captured, so $cd_out,
# $cd_stdout and $cd_stderr keep describing the command run before.
assert() {
	cd_desc=$1
	shift
	if "$@"; then
		ok "$cd_desc"
	else
		not_ok "$cd_desc"
		diag "failed: $*"
		diag "last exit status $cd_rc; last output:"
		diag "$cd_out"
	fi
}

# rc_is "desc" N: the last run_split/expect command exited with N.
rc_is() {
	if [ "$cd_rc" -eq "$2" ]; then
		ok "$1"
	else
		not_ok "$1"
		diag "expected exit status $2, got $cd_rc; output:"
		diag "$cd_out"
	fi
}

expect_fail() {
	cd_desc=$1
	shift
	cd_run_capture "$@"
	if [ "$cd_rc" -ne 0 ]; then
		ok "$cd_desc"
	else
		not_ok "$cd_desc"
		diag "command unexpectedly succeeded: $*"
		diag "$cd_out"
	fi
}

expect_exit() {
	cd_desc=$1
	cd_want=$2
	shift 2
	cd_run_capture "$@"
	if [ "$cd_rc" -eq "$cd_want" ]; then
		ok "$cd_desc"
	else
		not_ok "$cd_desc"
		diag "command: $*"
		diag "expected exit status $cd_want, got $cd_rc; output:"
		diag "$cd_out"
	fi
}

errno_num() {
	case $1 in
	0 | OK) echo 0 ;;
	EPERM) echo 1 ;;
	ENOENT) echo 2 ;;
	ESRCH) echo 3 ;;
	EBADF) echo 9 ;;
	EACCES) echo 13 ;;
	EFAULT) echo 14 ;;
	EBUSY) echo 16 ;;
	EEXIST) echo 17 ;;
	EXDEV) echo 18 ;;
	ENOTDIR) echo 20 ;;
	EISDIR) echo 21 ;;
	EINVAL) echo 22 ;;
	ENOTTY) echo 25 ;;
	EROFS) echo 30 ;;
	ENOSYS) echo 38 ;;
	ENOTEMPTY) echo 39 ;;
	ELOOP) echo 40 ;;
	EAFNOSUPPORT) echo 97 ;;
	EOPNOTSUPP) echo 95 ;;
	ECONNREFUSED) echo 111 ;;
	*) echo "$1" ;;
	esac
}

errno_name() {
	for cd_n in EPERM ENOENT ESRCH EBADF EACCES EFAULT EBUSY EEXIST EXDEV ENOTDIR EISDIR \
		EINVAL ENOTTY EROFS ENOSYS ENOTEMPTY ELOOP EAFNOSUPPORT EOPNOTSUPP ECONNREFUSED; do
		if [ "$(errno_num $cd_n)" = "$1" ]; then
			echo "$cd_n"
			return
		fi
	done
	echo "$1"
}

# expect_errno "desc" EPERM[|EACCES...] CMD...: CMD (usually try-syscall, maybe under
# cordon run) must exit with one of the errno values.
expect_errno() {
	cd_desc=$1
	cd_want=$2
	shift 2
	cd_run_capture "$@"
	cd_match=
	cd_old_ifs=$IFS
	IFS='|'
	for cd_e in $cd_want; do
		if [ "$(errno_num "$cd_e")" = "$cd_rc" ]; then
			cd_match=1
		fi
	done
	IFS=$cd_old_ifs
	if [ -n "$cd_match" ]; then
		ok "$cd_desc"
	else
		not_ok "$cd_desc"
		diag "command: $*"
		diag "expected $cd_want, got exit status $cd_rc ($(errno_name "$cd_rc")); output:"
		diag "$cd_out"
	fi
}

# Output checks on the last captured output: contains "desc" STRING
contains() {
	case $cd_out in
	*"$2"*) ok "$1" ;;
	*)
		not_ok "$1"
		diag "expected output to contain: $2"
		diag "output was:"
		diag "$cd_out"
		;;
	esac
}

not_contains() {
	case $cd_out in
	*"$2"*)
		not_ok "$1"
		diag "expected output NOT to contain: $2"
		diag "output was:"
		diag "$cd_out"
		;;
	*) ok "$1" ;;
	esac
}

# wait_until CMD...: run CMD until it succeeds (0), or 1 once CD_TEST_WAIT seconds passed.
wait_until() {
	cd_wu_end=$(($(date +%s) + CD_TEST_WAIT))
	until "$@"; do
		[ "$(date +%s)" -ge "$cd_wu_end" ] && return 1
		sleep 0.01
	done
	return 0
}

# Run a command, keeping stdout and stderr apart: $cd_stdout, $cd_stderr, $cd_rc.
run_split() {
	"$@" >"$CD_TMP/.stdout" 2>"$CD_TMP/.stderr"
	cd_rc=$?
	cd_stdout=$(cat "$CD_TMP/.stdout")
	cd_stderr=$(cat "$CD_TMP/.stderr")
	cd_out="$cd_stdout
$cd_stderr"
}

# The probe's view of a feature: "ok" or "missing".
probe_has() {
	"$CORDON" probe 2>/dev/null | grep -q "^ok *$1"
}

CD_TMP=$(mktemp -d "${TMPDIR:-/tmp}/cordon-test.XXXXXX") || {
	echo "Bail out! cannot create a temporary directory"
	exit 1
}
cd_cleanup() {
	chmod -R u+rwX "$CD_TMP" 2>/dev/null
	rm -rf "$CD_TMP"
}
trap cd_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ ! -x "$CORDON" ] && ! command -v "$CORDON" >/dev/null 2>&1; then
	echo "Bail out! cordon binary not found: $CORDON"
	exit 1
fi
