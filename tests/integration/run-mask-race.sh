#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The host side of masks against a concurrent sandbox that can write a mask's
# directory (or the directory above it) and swaps it for a symlink to a
# directory no sandbox may write: cordon must neither make nor remove anything
# there. The red team (issue 21) won this race by brute force (renameat2
# RENAME_EXCHANGE in a loop); here cordon is held in the window by its test
# hook (CORDON_TEST_PAUSE, which can only delay it) while the test swaps.
. "$(dirname "$0")/../lib/libtest.sh"

D=$CD_TMP/race
mkdir -p "$D/ws" "$D/victim" "$D/sync"
D=$(cd "$D" && pwd -P)
WS=$D/ws
V=$D/victim
R=$D/sync
printf 'gitdir: /nonexistent\n' >"$V/.git"
mkfifo "$R/paused" "$R/resume" || skip_all "mkfifo failed"
# Only the workspace is writable: the victim, beside it, is not.
cat >"$D/profile.json" <<'EOF'
{
  "version": 1,
  "type": "managed",
  "file_system": {
    "type": "restricted",
    "entries": [
      { "path": { "type": "special", "value": { "kind": "root" } }, "access": "read" },
      { "path": { "type": "special", "value": { "kind": "project_roots" } }, "access": "write" }
    ]
  },
  "network": "restricted"
}
EOF

sb() {
	"$CORDON" run --profile "$D/profile.json" --workspace-root "$WS" --cwd "$WS" -- "$@"
}

if ! out=$("$CORDON" explain --profile "$D/profile.json" --workspace-root "$WS" --cwd "$WS" 2>&1); then
	skip_all "this host cannot enforce the profile: $out"
fi
case $out in
*"mask      $WS/.git"*) ;;
*) skip_all "no mount namespace here: the missing protected names are not masked" ;;
esac
if ! sb true 2>"$CD_TMP/err"; then
	skip_all "cordon run fails here: $(cat "$CD_TMP/err")"
fi

victim_intact() {
	test "$(cat "$V/.git" 2>/dev/null)" = "gitdir: /nonexistent" &&
		test "$(ls -A "$V")" = ".git"
}
swap_in_symlink() {
	mv "$WS" "$WS.real" && ln -s "$V" "$WS"
}
swap_back() {
	if [ -L "$WS" ]; then
		rm "$WS" && mv "$WS.real" "$WS"
	fi
}

# race POINTS CMD...: `sb CMD...` in the background with the hook on POINTS
# (CORDON_TEST_PAUSE); at each stop, on_pause POINT runs before cordon goes
# on. Returns when cordon has exited, with its status in $cd_rc ($cd_out: its output). Everything
# waits on the FIFOs' rendezvous, nothing on time: when cordon exits, the
# subshell reports it through the same FIFO.
race() {
	race_points=$1
	shift
	(
		CORDON_TEST_PAUSE=$race_points CORDON_TEST_PAUSE_FIFOS=$R sb "$@" >"$D/out" 2>&1
		echo "exit $?" >"$R/paused"
	) &
	race_pid=$!
	race_rc=
	race_stops=
	while [ -z "$race_rc" ] && read -r race_what race_rest <"$R/paused"; do
		case $race_what in
		exit) race_rc=$race_rest ;;
		*)
			race_stops="$race_stops $race_what"
			on_pause "$race_what"
			: >"$R/resume"
			;;
		esac
	done
	wait "$race_pid"
	cd_rc=$race_rc
	cd_out=$(cat "$D/out")
}

first=$(printf '%s\n' "$out" | sed -n "s|^    mask      \\($WS/[^ ]*\\) .*|\\1|p" | head -n 1)
# Twice: cordon opens a mask's directory with openat2 (RESOLVE_NO_SYMLINKS),
# or one component at a time where openat2 is missing.
for how in openat2 components; do
	if [ "$how" = components ]; then
		CORDON_TEST_DISABLE=openat2
		export CORDON_TEST_DISABLE
	fi

	# ---- removal: the directory swapped between the check and the unlink ----
	on_pause() {
		swap_in_symlink
	}
	race "mask-unlink:$WS/.git" true
	swap_back
	assert "[$how] the run held at the unlink of its mask" test "$race_stops" = " mask-unlink"
	assert "[$how] a mask's directory swapped for a symlink before the unlink: nothing removed there" \
		victim_intact
	sb true >/dev/null 2>&1
	assert "[$how] and the next run leaves no mask behind in the workspace" test -z "$(ls -A "$WS")"

	# ---- creation: the directory swapped after the plan, before the mask is made ----
	seen_during=
	on_pause() {
		case $1 in
		mask-create) swap_in_symlink ;;
		mask-unlink)
			# The run got through: what the victim holds meanwhile.
			seen_during=$(ls -A "$V" | tr '\n' ' ')
			swap_back
			;;
		esac
	}
	race "mask-create:$first,mask-unlink:$first" true
	swap_back
	assert "[$how] a mask's directory swapped for a symlink before the mask is made: nothing made there" \
		test -z "$seen_during" -o "$seen_during" = ".git "
	assert "[$how] nor left there after the run" victim_intact
	rc_is "[$how] the run is refused (its mask's directory changed since the plan)" 125
	contains "[$how] the refusal names the mask" "$first"
	sb true >/dev/null 2>&1
	assert "[$how] and the next run leaves no mask behind in the workspace" test -z "$(ls -A "$WS")"
done
unset CORDON_TEST_DISABLE

done_testing
