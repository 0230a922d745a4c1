#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The built-in profiles: policies/*.json compiled into cordon, found after
# $CORDON_POLICY_PATH, $(sysconfdir)/cordon/policies and
# $(datadir)/cordon/policies; `cordon explain` names the origin, `cordon
# check --builtin` validates them, `cordon explain --list-profiles` lists
# what --profile NAME finds. Runs as root and (unprivileged.sh) as a user.
. "$(dirname "$0")/../lib/libtest.sh"

P=${CD_POLICYDIR:?CD_POLICYDIR is not set}
# libtest.sh points CORDON_POLICY_PATH at policies/: here the built-ins are the point.
unset CORDON_POLICY_PATH
# From a directory with no policies/ in it, as a user straight after the build.
cd "$CD_TMP" || exit 1

names=
for f in "$P"/*.json; do
	names="$names $(basename "$f" .json)"
done

# ---- cordon check --builtin: every policy file is built in, and valid ----
run_split "$CORDON" check --builtin
rc_is "check --builtin: exit 0" 0
want=
for n in $names; do
	want="$want
built-in:$n: ok"
done
got=$(printf '%s\n' "$cd_stdout" | sort)
want=$(printf '%s\n' "$want" | sed '/^$/d' | sort)
assert "check --builtin: one 'built-in:NAME: ok' per file of policies/" test "$got" = "$want"
run_split "$CORDON" check --builtin "$P/read-only.json"
rc_is "check --builtin FILE: both checked, exit 0" 0
contains "check --builtin FILE: the file too" "$P/read-only.json: ok"
printf '{"version": 1, "type": "bogus"}\n' >"$CD_TMP/bad.json"
run_split "$CORDON" check --builtin "$CD_TMP/bad.json"
rc_is "check --builtin BAD: exit 1" 1

# ---- what --profile NAME finds without any directory ----
run_split "$CORDON" explain --list-profiles
rc_is "explain --list-profiles: exit 0" 0
# A copy installed in $(sysconfdir) or $(datadir) shadows a built-in: it
# is the one a run takes, so those names are skipped below, with the reason.
for n in $names; do
	line=$(printf '%s\n' "$cd_stdout" | grep "^$n	")
	case $line in
	"$n	built-in") ;;
	"")
		not_ok "explain --list-profiles lists $n"
		diag "$cd_stdout"
		;;
	*) eval "shadow_$(echo "$n" | tr -c 'a-z0-9\n' _)=\${line#*	}" ;;
	esac
done
shadowed() {
	eval "echo \${shadow_$(echo "$1" | tr -c 'a-z0-9\n' _):-}"
}

for n in $names; do
	s=$(shadowed "$n")
	if [ -n "$s" ]; then
		skip "$n: the built-in is what a run takes" "an installed copy at $s comes first"
		continue
	fi
	run_split "$CORDON" explain --profile "$n"
	rc_is "explain --profile $n: exit 0 without CORDON_POLICY_PATH" 0
	contains "explain --profile $n: origin built-in" "  origin:  built-in"
	# The compiled-in text is the file's: the same plan as from the file.
	"$CORDON" explain --json --profile "$n" 2>&1 | grep -v '"origin": "' >"$CD_TMP/builtin.out"
	CORDON_POLICY_PATH=$P "$CORDON" explain --json --profile "$n" 2>&1 |
		grep -v '"origin": "' >"$CD_TMP/file.out"
	check "explain --json --profile $n: the built-in binds as policies/$n.json does" \
		cmp "$CD_TMP/builtin.out" "$CD_TMP/file.out"
	run_split "$CORDON" explain --json --profile "$n"
	contains "explain --json --profile $n: \"origin\": \"built-in\"" '"origin": "built-in"'
done

if [ -n "$(shadowed read-only)" ]; then
	skip "run with the default profile from the built-ins" \
		"an installed copy at $(shadowed read-only) comes first"
else
	# The default profile (read-only): the sandbox really applies.
	echo data >"$CD_TMP/file"
	check "cordon run -- cat works straight after the build, from any directory" \
		"$CORDON" run -- cat "$CD_TMP/file"
	contains "cordon run -- cat: the file's content" "data"
	expect_errno "the built-in read-only really denies a write" "EACCES|EROFS|EPERM" \
		"$CORDON" run -- "$TRY" write-file "$CD_TMP/new"
	assert "nothing written" test ! -e "$CD_TMP/new"
fi

# ---- lookup order: $CORDON_POLICY_PATH before the built-ins ----
mkdir -p "$CD_TMP/a" "$CD_TMP/b"
cat >"$CD_TMP/a/read-only.json" <<'JSON'
{"version": 1, "description": "from a", "type": "disabled"}
JSON
cat >"$CD_TMP/b/read-only.json" <<'JSON'
{"version": 1, "description": "from b", "type": "disabled"}
JSON
cat >"$CD_TMP/b/mine.json" <<'JSON'
{"version": 1, "description": "mine", "type": "disabled"}
JSON
CORDON_POLICY_PATH=$CD_TMP/a:$CD_TMP/b run_split "$CORDON" explain
rc_is "CORDON_POLICY_PATH=a:b explain: exit 0" 0
contains "the first directory of CORDON_POLICY_PATH wins over the built-in" \
	"origin:  $CD_TMP/a/read-only.json"
contains "... and its profile is the one bound" "about:   from a"
CORDON_POLICY_PATH=:$CD_TMP/b: run_split "$CORDON" explain --json
contains "CORDON_POLICY_PATH with empty elements: b's file, in the JSON" \
	"\"origin\": \"$CD_TMP/b/read-only.json\""
CORDON_POLICY_PATH=$CD_TMP/a:$CD_TMP/b run_split "$CORDON" explain --list-profiles
rc_is "explain --list-profiles with CORDON_POLICY_PATH: exit 0" 0
contains "list: the winning file for a shadowed name" "read-only	$CD_TMP/a/read-only.json"
not_contains "list: a shadowed name once" "read-only	$CD_TMP/b/read-only.json"
contains "list: a profile of the second directory" "mine	$CD_TMP/b/mine.json"
sorted=$(printf '%s\n' "$cd_stdout" | LC_ALL=C sort)
assert "list: sorted by name" test "$cd_stdout" = "$sorted"

# Fail closed: a NAME.json that is there but broken is refused, never
# passed over for the built-in of the same name.
mkdir -p "$CD_TMP/broken"
printf '{"version": 1, "type": "managed",,}\n' >"$CD_TMP/broken/read-only.json"
CORDON_POLICY_PATH=$CD_TMP/broken run_split "$CORDON" run -- true
rc_is "a broken read-only.json in CORDON_POLICY_PATH: refused (125)" 125
contains "... naming the file" "$CD_TMP/broken/read-only.json:1:"
mkdir -p "$CD_TMP/dir/read-only.json"
CORDON_POLICY_PATH=$CD_TMP/dir run_split "$CORDON" run -- true
rc_is "a directory named read-only.json: refused (125), no built-in instead" 125

# Whatever is at DIR/NAME.json (lstat) and cannot be used is refused, never
# passed over: the list names it as the origin, and --profile stops there.
# A dangling symbolic link (a target on a mount not there yet).
mkdir -p "$CD_TMP/dangling"
ln -s "$CD_TMP/no-such-dir/read-only.json" "$CD_TMP/dangling/read-only.json"
CORDON_POLICY_PATH=$CD_TMP/dangling run_split "$CORDON" run -- true
rc_is "a dangling read-only.json symlink: refused (125), no built-in instead" 125
contains "... naming the link and its target" \
	"'$CD_TMP/dangling/read-only.json' is a dangling symbolic link (to '$CD_TMP/no-such-dir/"
CORDON_POLICY_PATH=$CD_TMP/dangling run_split "$CORDON" explain
rc_is "explain with a dangling read-only.json: 125" 125
not_contains "explain with a dangling read-only.json: not the built-in" "origin:  built-in"
CORDON_POLICY_PATH=$CD_TMP/dangling run_split "$CORDON" explain --list-profiles
contains "list: the dangling link is where read-only stops, as in a run" \
	"read-only	$CD_TMP/dangling/read-only.json"
# A symbolic link to a profile file is a profile (an admin's way to deploy one).
mkdir -p "$CD_TMP/link"
ln -s "$P/full-access.json" "$CD_TMP/link/read-only.json"
CORDON_POLICY_PATH=$CD_TMP/link run_split "$CORDON" explain
rc_is "a read-only.json symlink to a profile file: explain exits 0" 0
contains "... and binds the file it points to" "origin:  $CD_TMP/link/read-only.json"
contains "... whose profile it is" "type:    disabled"

# A FIFO: the lookup opens it without blocking and refuses it (before, it
# hung in open(2) until a writer came; CD_TEST_WAIT bounds only a failure).
mkdir -p "$CD_TMP/fifo"
mkfifo "$CD_TMP/fifo/read-only.json"
CORDON_POLICY_PATH=$CD_TMP/fifo run_split timeout "$CD_TEST_WAIT" "$CORDON" run -- true
rc_is "a FIFO read-only.json: refused (125) at once, not waited on" 125
contains "... saying what it is" "'$CD_TMP/fifo/read-only.json' is a FIFO, not a regular file"
CORDON_POLICY_PATH=$CD_TMP/fifo run_split timeout "$CD_TEST_WAIT" "$CORDON" explain
rc_is "explain with a FIFO read-only.json: 125" 125

# A relative element of $CORDON_POLICY_PATH would be looked up from the
# current directory (an untrusted checkout's pol/read-only.json): refused.
mkdir -p "$CD_TMP/repo/pol"
cp "$P/full-access.json" "$CD_TMP/repo/pol/read-only.json"
cd "$CD_TMP/repo" || exit 1
CORDON_POLICY_PATH=pol run_split "$CORDON" explain
rc_is "a relative CORDON_POLICY_PATH element: explain refused (125)" 125
not_contains "... the checkout's file is not taken" "origin:  pol/read-only.json"
contains "... naming the element" "CORDON_POLICY_PATH: 'pol' is not an absolute directory"
CORDON_POLICY_PATH=$CD_TMP/a:pol run_split "$CORDON" run -- true
rc_is "a relative element after an absolute one: run refused (125)" 125
CORDON_POLICY_PATH=pol run_split "$CORDON" explain --list-profiles
rc_is "a relative element: --list-profiles refused (125) as the lookup is" 125
not_contains "... listing nothing from the checkout" "read-only	pol/read-only.json"
cd "$CD_TMP" || exit 1

# The list takes each name's origin from the lookup itself: a directory that
# can be searched but not read (only an unprivileged user sees the difference)
# and a NAME.json.json, which --profile NAME.json would take as a file.
mkdir -p "$CD_TMP/noread"
cp "$P/full-access.json" "$CD_TMP/noread/read-only.json"
cp "$P/full-access.json" "$CD_TMP/b/mine.json.json"
chmod 311 "$CD_TMP/noread"
CORDON_POLICY_PATH=$CD_TMP/noread:$CD_TMP/b run_split "$CORDON" explain --list-profiles
contains "list: a profile in a directory that cannot be read is the one a run takes" \
	"read-only	$CD_TMP/noread/read-only.json"
not_contains "list: no NAME.json.json as 'NAME.json' (that is a file argument)" "mine.json	"
CORDON_POLICY_PATH=$CD_TMP/noread:$CD_TMP/b run_split "$CORDON" explain
contains "... and explain takes that one" "origin:  $CD_TMP/noread/read-only.json"
chmod 755 "$CD_TMP/noread"

# ---- errors ----
run_split "$CORDON" run --profile no-such-profile -- true
rc_is "an unknown profile: 125" 125
contains "the refusal names the built-in profiles" "then the built-in profiles: "
run_split "$CORDON" explain --list-profiles --json
rc_is "explain --list-profiles with another option: usage error (2)" 2

done_testing
