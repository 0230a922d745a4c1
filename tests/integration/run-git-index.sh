#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The git indexes a plan reads to protect submodules, against what a sandboxed
# command can plant for the next run (red-team finding, issue 21): repositories
# of its own whose index is a sparse 256 MiB file with a valid header and one
# extension git does not know. Read whole, each took 0.7 s and 256 MiB of
# memory. Now only the entries and the extensions' headers are read, out of a
# budget per run, and an index whose header alone asks for more is refused.
. "$(dirname "$0")/../lib/libtest.sh"

WS=$CD_TMP/ws
mkdir -p "$WS"
WS=$(cd "$WS" && pwd -P)

sb() {
	"$CORDON" run --profile workspace-write --workspace-root "$WS" --cwd "$WS" -- "$@"
}

if ! out=$("$CORDON" explain --profile workspace-write --workspace-root "$WS" --cwd "$WS" 2>&1 >/dev/null); then
	skip_all "this host cannot enforce workspace-write: $out"
fi
if ! sb true 2>"$CD_TMP/err"; then
	skip_all "cordon run fails here: $(cat "$CD_TMP/err")"
fi
command -v python3 >/dev/null 2>&1 || skip_all "python3 is needed to measure the memory a run uses"

# plant DIR N SIZE: in the sandbox, a repository DIR whose index is a sparse
# file of SIZE bytes (truncate(1) suffixes) with a header for N entries and,
# when N is 0, one unknown extension over the rest (its size, for 256 MiB, in
# the header's last four bytes).
plant() {
	sb sh -c 'mkdir -p "$1/.git" && printf "$2" >"$1/.git/index" && truncate -s "$3" "$1/.git/index"' \
		sh "$1" "$2" "$3"
}
# DIRC, version 2, no entries, "ZZZZ" of 256 MiB - 12 - 8 - 20 bytes.
EXT='DIRC\000\000\000\002\000\000\000\000ZZZZ\017\377\377\330'
i=0
while [ $i -lt 8 ]; do
	plant "r$i" "$EXT" 256M || break
	i=$((i + 1))
done
assert "a sandboxed command plants 8 repositories with sparse 256 MiB indexes" test $i -eq 8
assert "which are sparse here" test "$(du -sk "$WS" | cut -f1)" -lt 65536

# The exit status of a command and the largest resident set of it and its
# children, in KiB: no timing, the memory says how much was read.
rss() {
	python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
res=$(rss "$CORDON" run --profile workspace-write --workspace-root "$WS" --cwd "$WS" -- true)
assert "the next run starts (exit status ${res% *})" test "${res% *}" = 0
assert "reading their indexes in little memory (at most ${res#* } KiB, under 64 MiB)" \
	test "${res#* }" -lt 65536
check "and each is protected as a nested repository" \
	"$CORDON" explain --profile workspace-write --workspace-root "$WS" --cwd "$WS"
contains "r7/.git is read-only" "ro-bind   $WS/r7/.git  (nested repository below workspace root"

# A header counting 3,145,728 entries (192 MiB at 64 bytes each, the least an
# entry takes): more than the budget, refused before any entry is read.
check "a sandboxed command plants an index whose header counts 3 million entries" \
	plant big 'DIRC\000\000\000\002\000\060\000\000' 256M
res=$(rss "$CORDON" run --profile workspace-write --workspace-root "$WS" --cwd "$WS" -- true)
expect_exit "the next run is refused" 125 sb true
contains "naming the bound" "takes more than 128 MiB, the most cordon reads for one run"
contains "and the index" "(reached at $WS/big/.git/index)"
contains "and the fix" "remove the repositories that should not be there"
assert "refused in little memory too (at most ${res#* } KiB)" test "${res#* }" -lt 65536
rm -rf "$WS/big"
check "once it is gone, runs start again" sb true

done_testing
