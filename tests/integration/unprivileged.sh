#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The run tests again as an ordinary user: Landlock and seccomp without
# privileges, the mount-namespace carve-outs through a user namespace, and
# the user-namespace refusal (CORDON_TEST_DISABLE=userns) that root never
# hits. As root, the binary, the helpers, the policies and the scripts are
# copied to a fresh directory the system user "cordon-test" can read, and
# the scripts run as that user; otherwise they run as the current user.
# The sub-scripts' TAP lines are passed through, renumbered.
. "$(dirname "$0")/../lib/libtest.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPTS="run-workspace-write.sh run-profiles.sh run-mask-race.sh run-git-index.sh refusals.sh \
	builtin-profiles.sh"
# The server's guarantees that differ without root (subreapers instead of a pid
# namespace, a user namespace for sandboxed processes).
PYSCRIPTS="run-terminal.py serve-lifecycle.py serve-sandbox.py serve-isolation.py serve-fs.py \
	serve-fs-readfile.py serve-net.py serve-loopback.py serve-selfconnect.py serve-hidden.py \
	serve-admit.py run-limits.py serve-limits.py serve-stall.py serve-memory.py \
	serve-resume.py serve-fds.py serve-fs-full.py serve-ws-load.py serve-hidden-race.py \
	serve-pathuri.py serve-activation.py seatbelt-standin.py serve-metrics.py \
	serve-fs-write-stream.py serve-http.py serve-discover.py serve-fs-watch.py run-managed-net.py \
	run-own-proxy.py run-socks.py serve-parity-sweep.py proxy.py serve-envconfig.py \
	serve-discover-v2.py serve-managed-route.py serve-netproxy.py run-proxy-confine.py"

# relay NAME CMD...: run a TAP script, pass its results through renumbered.
relay() {
	rname=$1
	shift
	"$@" >"$CD_TMP/sub.tap" 2>"$CD_TMP/sub.err"
	rrc=$?
	seen=0
	planned=
	while IFS= read -r line; do
		case $line in
		"ok "* | "not ok "*)
			seen=$((seen + 1))
			case $line in
			"ok "*) verdict=ok rest=${line#ok } ;;
			*) verdict="not ok" rest=${line#not ok } ;;
			esac
			# drop the sub-script's number
			rest=${rest#"${rest%%[!0-9]*}"}
			rest=${rest# }
			rest=${rest#- }
			if [ "$verdict" = ok ]; then
				ok "[$rname] $rest"
			else
				not_ok "[$rname] $rest"
			fi
			;;
		"1..0 # SKIP"*)
			planned=0
			skip "[$rname] all tests" "${line#1..0 # SKIP }"
			;;
		1..*) planned=${line#1..} ;;
		"Bail out!"*) not_ok "[$rname] $line" ;;
		"#"*) echo "$line" ;;
		*) diag "[$rname] $line" ;;
		esac
	done <"$CD_TMP/sub.tap"
	if [ -s "$CD_TMP/sub.err" ]; then
		diag "[$rname] stderr:"
		diag "$(cat "$CD_TMP/sub.err")"
	fi
	if [ "$rrc" -ne 0 ]; then
		not_ok "[$rname] exited with status $rrc"
	fi
	if [ -z "$planned" ]; then
		not_ok "[$rname] printed no plan (crashed?)"
	elif [ "$planned" -ne 0 ] && [ "$planned" -ne "$seen" ]; then
		not_ok "[$rname] planned $planned tests but ran $seen"
	fi
}

if [ "$(id -u)" -ne 0 ]; then
	for s in $SCRIPTS; do
		relay "$s" sh "$HERE/$s"
	done
	for s in $PYSCRIPTS; do
		relay "$s" env PYTHONDONTWRITEBYTECODE=1 python3 "$HERE/$s"
	done
	relay escape.sh sh "$HERE/../escape/escape.sh"
	relay git-metadata.sh sh "$HERE/../escape/git-metadata.sh"
	done_testing
fi

# ---- as root: prepare an ordinary user ----
USER_NAME=cordon-test
if ! id "$USER_NAME" >/dev/null 2>&1; then
	if ! command -v useradd >/dev/null 2>&1; then
		skip_all "useradd is not available to create the user $USER_NAME"
	fi
	if ! useradd --system --no-create-home --shell /bin/sh "$USER_NAME" 2>"$CD_TMP/useradd.err"; then
		# A parallel run may have created it meanwhile.
		id "$USER_NAME" >/dev/null 2>&1 || skip_all "useradd failed: $(cat "$CD_TMP/useradd.err")"
	fi
fi
if command -v setpriv >/dev/null 2>&1; then
	as_user() {
		setpriv --reuid="$USER_NAME" --regid="$USER_NAME" --init-groups "$@"
	}
elif command -v runuser >/dev/null 2>&1; then
	as_user() {
		runuser -u "$USER_NAME" -- "$@"
	}
else
	skip_all "neither setpriv nor runuser is available"
fi

# Outside /tmp: workspace-write makes /tmp writable, and $HOME must not be.
BASE=$(mktemp -d /var/tmp/cordon-unpriv.XXXXXX) || skip_all "cannot create a directory in /var/tmp"
trap 'chmod -R u+rwX "$BASE" "$CD_TMP" 2>/dev/null; rm -rf "$BASE" "$CD_TMP"' EXIT
mkdir -p "$BASE/helpers" "$BASE/policies" "$BASE/tests/lib" "$BASE/tests/integration" \
	"$BASE/tests/escape" "$BASE/tests/data" "$BASE/home"
cp "$CORDON" "$BASE/cordon"
# The programs cordon executes from its own directory: the WebSocket transport's,
# the init of serve's sandboxes and its fs helper.
for p in cordon-ws cordon-init cordon-fs-helper; do
	if [ -x "$(dirname "$CORDON")/$p" ]; then
		cp "$(dirname "$CORDON")/$p" "$BASE/$p"
	fi
done
cp "$TRY" "$BASE/helpers/try-syscall"
cp "$CD_BUILDDIR/tests/escape/escape-probe" "$BASE/helpers/escape-probe"
cp "$HERE/../escape/escape.sh" "$HERE/../escape/git-metadata.sh" "$BASE/tests/escape/"
cp "$CD_POLICYDIR"/*.json "$BASE/policies/"
cp "$HERE/../data/seatbelt-stand-in.sh" "$HERE/../data/connect-proxy.py" "$BASE/tests/data/"
cp "$HERE/../lib/libtest.sh" "$HERE/../lib/rpcclient.py" "$HERE/../lib/netclient.py" \
	"$HERE/../lib/upstream.py" "$BASE/tests/lib/"
for s in $SCRIPTS $PYSCRIPTS; do
	cp "$HERE/$s" "$BASE/tests/integration/"
done
chmod -R a+rX "$BASE"
chmod 755 "$BASE"
chown "$USER_NAME" "$BASE/home"
chmod 700 "$BASE/home"

check "the user $USER_NAME can run the copied cordon" \
	as_user env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$BASE/home" "$BASE/cordon" --version
uid=$(as_user id -u)
assert "the scripts run as a non-root uid" test -n "$uid" -a "$uid" != 0

for s in $SCRIPTS; do
	relay "$s" as_user env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$BASE/home" \
		LOGNAME="$USER_NAME" USER="$USER_NAME" \
		CORDON="$BASE/cordon" CD_TEST_HELPERS="$BASE/helpers" CD_POLICYDIR="$BASE/policies" \
		sh "$BASE/tests/integration/$s"
done
relay escape.sh as_user env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$BASE/home" \
	LOGNAME="$USER_NAME" USER="$USER_NAME" CORDON="$BASE/cordon" \
	CD_TEST_HELPERS="$BASE/helpers" CD_ESCAPE_PROBE="$BASE/helpers/escape-probe" \
	CD_POLICYDIR="$BASE/policies" sh "$BASE/tests/escape/escape.sh"
relay git-metadata.sh as_user env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$BASE/home" \
	LOGNAME="$USER_NAME" USER="$USER_NAME" CORDON="$BASE/cordon" \
	CD_POLICYDIR="$BASE/policies" sh "$BASE/tests/escape/git-metadata.sh"
for s in $PYSCRIPTS; do
	relay "$s" as_user env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$BASE/home" \
		LOGNAME="$USER_NAME" USER="$USER_NAME" \
		CORDON="$BASE/cordon" CD_TEST_HELPERS="$BASE/helpers" CD_POLICYDIR="$BASE/policies" \
		PYTHONDONTWRITEBYTECODE=1 python3 "$BASE/tests/integration/$s"
done

done_testing
