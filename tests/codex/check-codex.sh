#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# make check-codex: the released Codex CLI drives `cordon serve` (and, as the
# control, the released `codex exec-server`) through check-codex.py.
#
# The CLI is npm @openai/codex at $CODEX_VERSION, installed once into
# $CODEX_NPM_DIR (a directory of the build tree; kept across runs, removed by
# make distclean). Without node and npm, or with the registry unreachable and
# nothing installed yet, the check is skipped with the reason (exit 0; with
# CD_CODEX_REQUIRED=1 a skip is a failure). CODEX_BIN=PATH uses that codex
# (the npm shim or the native binary) and no npm at all.
#
# As root it runs twice: as root, then as the system user cordon-test (when
# it exists) from a copy of cordon and of the scripts that user can read (and
# of the native codex binary, when the build tree is closed to that user).
# TAP from each run; the last line says PASS, FAIL or SKIP.
#
# Environment: CORDON (the binary), CODEX_NPM_DIR, CODEX_BIN,
# CD_CODEX_REQUIRED, CD_CODEX_TIMEOUT (s, a safety net only; default 300),
# CD_CODEX_TRANSCRIPT (a path prefix: each run's executor traffic is written to
# PREFIX.KIND.jsonl).

set -u
CODEX_VERSION=0.169.0
here=$(cd "$(dirname "$0")" && pwd)

# As root, the check runs in a mount namespace of its own with a fresh tmpfs
# on /tmp: the sandbox intent the CLI sends makes /tmp writable and its .git
# protected, so another program creating or removing /tmp/.git while a
# sandbox is set up fails that call in either executor (cordon: "it changed
# while the sandbox was set up"; codex: "bwrap: Can't mkdir /tmp/.git"). A
# shared host's /tmp is no part of what this check is about. A build tree in
# /tmp (CI's clone is there) stays where it is: its folder of /tmp is bound
# back onto the new tmpfs from a descriptor opened before the mount (mount(8)
# must not canonicalize /proc/self/fd/N: that path leads into the new tmpfs).
if [ "$(id -u)" -eq 0 ] && [ -z "${CD_CODEX_PRIVATE_TMP:-}" ] &&
	command -v unshare >/dev/null 2>&1 &&
	unshare --mount --propagation private true 2>/dev/null; then
	# The folders of /tmp to keep, one per line (a name may hold spaces), each
	# held open on a descriptor from 5 up (4 at most: one shell digit each).
	keep=
	for p in "$PWD" "$here" "$(dirname "${CORDON:-/}")" "${CODEX_NPM_DIR:-/}"; do
		p=$(readlink -f "$p" 2>/dev/null) || continue
		case $p in /tmp/?*) ;; *) continue ;; esac
		top=/tmp/$(printf '%s\n' "${p#/tmp/}" | cut -d/ -f1)
		case "
$keep
" in *"
$top
"*) ;; *) keep="$keep$top
" ;; esac
	done
	CD_CODEX_PRIVATE_TMP=no CD_CODEX_TMP_BINDS=$keep exec unshare --mount --propagation private \
		/bin/sh -c '
		IFS="
"
		n=5
		for d in $CD_CODEX_TMP_BINDS; do
			eval "exec $n<\"\$d\"" || exit 1
			n=$((n + 1))
		done
		if mount -t tmpfs -o mode=1777,nosuid,nodev cordon-check-codex /tmp; then
			CD_CODEX_PRIVATE_TMP=yes
			n=5
			for d in $CD_CODEX_TMP_BINDS; do
				mkdir -p "$d" &&
					mount --no-canonicalize --bind "/proc/self/fd/$n" "$d" || exit 1
				eval "exec $n<&-"
				n=$((n + 1))
			done
		fi
		unset IFS CD_CODEX_TMP_BINDS
		exec /bin/sh "$0"' "$0"
fi
: "${CORDON:?CORDON must name the cordon binary}"
: "${CODEX_NPM_DIR:=$PWD/tests/codex/npm}"

skip() {
	echo "1..0 # SKIP $*"
	if [ -n "${CD_CODEX_REQUIRED:-}" ]; then
		echo "check-codex: FAIL: skipped, and CD_CODEX_REQUIRED is set" >&2
		exit 1
	fi
	echo "check-codex: SKIP: $*"
	exit 0
}

# The installed version, or nothing.
installed_version() {
	sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' \
		"$CODEX_NPM_DIR/node_modules/@openai/codex/package.json" 2>/dev/null | head -n 1
}

if [ -n "${CODEX_BIN:-}" ]; then
	codex=$CODEX_BIN
	[ -x "$codex" ] || skip "CODEX_BIN=$codex is not an executable"
else
	command -v node >/dev/null 2>&1 || skip "node is missing (apt-get install nodejs npm)"
	command -v npm >/dev/null 2>&1 || skip "npm is missing (apt-get install npm)"
	codex=$CODEX_NPM_DIR/node_modules/.bin/codex
	if [ "$(installed_version)" != "$CODEX_VERSION" ] || [ ! -x "$codex" ]; then
		registry=$(npm config get registry 2>/dev/null)
		# One look-up of the package we install: is the registry there?
		if ! npm view "@openai/codex@$CODEX_VERSION" version --fetch-timeout=30000 \
			--fetch-retries=1 >/dev/null 2>&1; then
			skip "the npm registry ($registry) is unreachable:" \
				"cannot install @openai/codex@$CODEX_VERSION"
		fi
		echo "# installing @openai/codex@$CODEX_VERSION into $CODEX_NPM_DIR"
		rm -rf "$CODEX_NPM_DIR"
		mkdir -p "$CODEX_NPM_DIR" || exit 1
		echo '{ "private": true }' >"$CODEX_NPM_DIR/package.json"
		if ! npm install --prefix "$CODEX_NPM_DIR" --no-audit --no-fund --loglevel=error \
			"@openai/codex@$CODEX_VERSION" >"$CODEX_NPM_DIR/install.log" 2>&1; then
			sed 's/^/# /' "$CODEX_NPM_DIR/install.log"
			echo "check-codex: FAIL: npm install @openai/codex@$CODEX_VERSION failed"
			exit 1
		fi
		if [ "$(installed_version)" != "$CODEX_VERSION" ] || [ ! -x "$codex" ]; then
			echo "check-codex: FAIL: npm installed no codex $CODEX_VERSION at $codex"
			exit 1
		fi
	fi
fi
echo "# codex: $codex ($("$codex" --version 2>&1))"
case ${CD_CODEX_PRIVATE_TMP:-} in
yes) echo "# /tmp: a private tmpfs (in a mount namespace of this check's own)" ;;
no) echo "# /tmp: shared (mounting a private tmpfs failed)" ;;
esac

rc=0
summary=
echo "# ---- as $(id -un) ----"
python3 "$here/check-codex.py" "$CORDON" "$codex"
r=$?
[ $r -eq 0 ] || rc=1
summary="$(id -un): $([ $r -eq 0 ] && echo pass || echo FAIL)"

if [ "$(id -u)" -eq 0 ]; then
	if ! id cordon-test >/dev/null 2>&1; then
		echo "# ---- as cordon-test: SKIP: no such user (useradd -r cordon-test) ----"
		summary="$summary; cordon-test: skipped (no user)"
	else
		copy=$(mktemp -d /var/tmp/cordon-check-codex-copy.XXXXXX) || exit 1
		cp "$CORDON" "$here/check-codex.py" "$here/mock_model.py" "$here/ws_tap.py" "$copy/"
		# the helpers cordon runs from beside itself
		for p in cordon-ws cordon-init cordon-fs-helper; do
			if [ -e "$(dirname "$CORDON")/$p" ]; then
				cp "$(dirname "$CORDON")/$p" "$copy/"
			fi
		done
		ucodex=$codex
		if ! su -s /bin/sh cordon-test -c 'test -x "$1"' - "$codex"; then
			# A directory above the build tree is closed to that user (a
			# clone under /root): it runs a copy of the native binary the
			# npm shim would start.
			native=$(find -L "$CODEX_NPM_DIR/node_modules/@openai" -type f -name codex \
				-path '*/vendor/*/bin/codex' 2>/dev/null | head -n 1)
			[ -n "${CODEX_BIN:-}" ] && native=$CODEX_BIN
			if [ -z "$native" ] || ! cp "$native" "$copy/codex"; then
				rm -rf "$copy"
				echo "check-codex: FAIL: no native codex binary to copy for cordon-test"
				exit 1
			fi
			ucodex=$copy/codex
			echo "# cordon-test cannot reach $codex: it runs a copy of $native"
		fi
		chmod 755 "$copy" "$copy"/*
		echo "# ---- as cordon-test ----"
		tr_env=
		if [ -n "${CD_CODEX_TRANSCRIPT:-}" ]; then
			tr_env="CD_CODEX_TRANSCRIPT=$copy/transcript"
		fi
		su -s /bin/sh cordon-test -c 'cd / && exec env PYTHONDONTWRITEBYTECODE=1 '"$tr_env"' \
			CD_CODEX_TIMEOUT="$1" python3 "$2/check-codex.py" "$2/cordon" "$3"' \
			- "${CD_CODEX_TIMEOUT:-300}" "$copy" "$ucodex"
		r=$?
		[ $r -eq 0 ] || rc=1
		summary="$summary; cordon-test: $([ $r -eq 0 ] && echo pass || echo FAIL)"
		if [ -n "${CD_CODEX_TRANSCRIPT:-}" ]; then
			for f in "$copy"/transcript.*.jsonl; do
				[ -e "$f" ] && cp "$f" "$CD_CODEX_TRANSCRIPT.cordon-test.${f##*/transcript.}"
			done
		fi
		rm -rf "$copy"
	fi
fi
if [ $rc -eq 0 ]; then
	echo "check-codex: PASS ($summary)"
else
	echo "check-codex: FAIL ($summary)"
fi
exit $rc
