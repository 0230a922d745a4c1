#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Smoke test of an installed cordon: the program starts, its built-in and
# installed profiles check, explain answers, and a sandboxed command may
# write its workspace but not a directory outside it. Run by `make
# installcheck` (CORDON=$(DESTDIR)$(bindir)/cordon) and by the Debian
# package's autopkgtest (debian/tests/control: CORDON=/usr/bin/cordon).
# TAP on stdout; exit 0 passed, 1 failed, 77 skipped: cordon refused the
# sandbox because this host lacks a mechanism (it says which, and probe
# says the fix), which is its correct, fail-closed behaviour.
#
#   CORDON=/usr/bin/cordon [POLICYDIR=/usr/share/cordon/policies] sh smoke-run.sh
#
# POLICYDIR: the installed profile files, each checked; when cordon's
# configured profile directory is that very directory (no DESTDIR), explain
# must name a file there as the profile's origin, not the built-in copy.

set -u
: "${CORDON:=/usr/bin/cordon}"
LC_ALL=C
export LC_ALL
# Only the installed profiles and the built-ins: never a developer's.
unset CORDON_POLICY_PATH

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
diag() { printf '%s\n' "$*" | sed 's/^/# /'; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cordon-smoke.XXXXXX") || exit 1
out=
trap 'rm -rf "$tmp" ${out:+"$out"}' EXIT
trap 'exit 130' INT TERM

# "Outside": a directory the workspace-write profile does not make
# writable: not under /tmp, nor $TMPDIR, nor the workspace.
for d in /var/tmp "${HOME:-}" "$PWD"; do
	[ -n "$d" ] && [ -d "$d" ] && [ -w "$d" ] || continue
	real=$(cd "$d" && pwd -P)
	case "$real/" in /tmp/* | "$(cd "$tmp" && pwd -P)"/*) continue ;; esac
	out=$(mktemp -d "$real/cordon-smoke-outside.XXXXXX") && break
done
if [ -z "$out" ]; then
	echo "1..0 # SKIP no writable directory outside /tmp and \$TMPDIR for the denied write"
	exit 77
fi
ws=$tmp/ws
mkdir "$ws"

v=$("$CORDON" --version 2>&1)
case "$v" in
cordon\ [0-9]*) ok "cordon --version: $v" ;;
*) not_ok "cordon --version printed '$v'" ;;
esac

if msg=$("$CORDON" check --builtin 2>&1); then
	ok "cordon check --builtin: $(printf '%s\n' "$msg" | grep -c ': ok$') built-in profiles"
else
	not_ok "cordon check --builtin"
	diag "$msg"
fi
if [ -n "${POLICYDIR:-}" ]; then
	for f in "$POLICYDIR"/*.json; do
		if msg=$("$CORDON" check "$f" 2>&1); then
			ok "cordon check $f"
		else
			not_ok "cordon check $f"
			diag "$msg"
		fi
	done
fi

# A host without a mechanism the profiles need: cordon refuses (exit 125)
# and names it. That is a skip, not a failure; everything after needs it.
rc=0
msg=$("$CORDON" run --profile read-only -- true 2>&1) || rc=$?
if [ "$rc" -eq 125 ]; then
	diag "$msg"
	n=$((n + 1))
	echo "ok $n # SKIP cordon refused the sandbox: this host lacks a mechanism ($CORDON probe says which)"
	echo "1..$n"
	exit 77
fi

if msg=$("$CORDON" explain --profile workspace-write --workspace-root "$ws" 2>&1) &&
	printf '%s\n' "$msg" | grep -q "$ws"; then
	ok "cordon explain --profile workspace-write names the workspace"
else
	not_ok "cordon explain --profile workspace-write"
	diag "$msg"
fi

if [ -n "${POLICYDIR:-}" ] && [ -z "${DESTDIR:-}" ]; then
	msg=$("$CORDON" explain --profile read-only 2>&1)
	if printf '%s\n' "$msg" | grep -q "^  origin: *$POLICYDIR/read-only.json"; then
		ok "cordon explain finds the installed $POLICYDIR/read-only.json"
	else
		not_ok "cordon explain does not name $POLICYDIR/read-only.json as the origin"
		diag "$msg"
	fi
fi

# Allowed: write in the workspace. TMPDIR is the workspace too, so that
# the profile's $TMPDIR entry cannot cover the outside directory.
rc=0
msg=$(TMPDIR=$ws "$CORDON" run --profile workspace-write --workspace-root "$ws" --cwd "$ws" -- \
	sh -c 'echo inside > inside.txt && cat inside.txt' 2>&1) || rc=$?
if [ "$rc" -eq 0 ] && [ "$msg" = inside ] && [ "$(cat "$ws/inside.txt" 2>/dev/null)" = inside ]; then
	ok "cordon run: a write in the workspace is allowed"
else
	not_ok "cordon run: a write in the workspace (exit $rc)"
	diag "$msg"
fi

# Denied: write outside it. The command itself must fail (not cordon,
# which exits 125 when it refuses), and nothing may appear.
rc=0
msg=$(TMPDIR=$ws "$CORDON" run --profile workspace-write --workspace-root "$ws" --cwd "$ws" -- \
	sh -c 'echo escaped > "$1/outside.txt"' sh "$out" 2>&1) || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 125 ] && [ ! -e "$out/outside.txt" ]; then
	ok "cordon run: a write outside the workspace is denied (exit $rc)"
else
	not_ok "cordon run: a write outside the workspace was not denied (exit $rc)"
	diag "$msg"
fi

# The read-only profile: reading works, writing even /tmp does not.
rc=0
msg=$(TMPDIR=$ws "$CORDON" run --profile read-only -- \
	sh -c 'cat /etc/passwd >/dev/null || exit 3; if (: >"$1/ro.txt") 2>/dev/null; then exit 4; fi' \
	sh "$ws" 2>&1) || rc=$?
if [ "$rc" -eq 0 ] && [ ! -e "$ws/ro.txt" ]; then
	ok "cordon run --profile read-only: reads, cannot write"
else
	not_ok "cordon run --profile read-only (exit $rc)"
	diag "$msg"
fi

echo "1..$n"
exit "$failed"
