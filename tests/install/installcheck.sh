#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# `make installcheck`: smoke test of the installed tree, under DESTDIR if
# set. tests/install/local.mk passes where configure said each file goes
# (the variables below); every file `make install` puts there must be
# there, then smoke-run.sh and smoke-serve.py run the installed cordon.
#
# With DESTDIR the installed cordon does not find its helpers (cordon-init,
# cordon-fs-helper, cordon-ws): it looks beside itself, then in the
# configured libexec directory, compiled in without DESTDIR, and it has no
# environment override (none should choose what runs as the sandboxes'
# init). So the serve smoke test runs copies of the installed cordon and
# of the installed helpers, put side by side in a temporary directory:
# their contents are tested, the compiled-in path is not. Without DESTDIR
# (distcheck's installcheck) the installed files run where they are.

set -u
: "${srcdir:=.}"
D=${DESTDIR:-}
status=0
fail() {
	echo "installcheck: FAIL: $*"
	status=1
}
have() {
	if [ -e "$D$1" ]; then
		echo "installcheck: ok: $D$1"
	else
		fail "missing $D$1"
	fi
}
# have_in DIR FILE... (DIR "no": configured not to install them)
have_in() {
	dir=$1
	shift
	[ "$dir" = no ] && return 0
	for f in "$@"; do
		have "$dir/${f##*/}"
	done
}

for p in $bin_programs; do
	have "$bindir/$p"
done
for p in $pkglibexec_programs; do
	have "$pkglibexecdir/$p"
done
have_in "$policydir" $policies
if [ -d "$D$sysconfdir/cordon/policies" ]; then
	echo "installcheck: ok: $D$sysconfdir/cordon/policies/"
else
	fail "missing directory $D$sysconfdir/cordon/policies/"
fi
for m in $man_pages; do
	sect=${m##*.}
	have "$mandir/man$sect/${m##*/}"
done
have_in "$bashcompletiondir" $bash_completion
have_in "$zshcompletiondir" $zsh_completion
have_in "$fishcompletiondir" $fish_completion
have_in "$systemdsystemunitdir" $system_units
have_in "$systemduserunitdir" $user_units
# The services name the installed cordon.
for u in $system_units $user_units; do
	case "$u" in
	*.service) ;;
	*) continue ;;
	esac
	case "$u" in
	*/user/*) dir=$systemduserunitdir ;;
	*) dir=$systemdsystemunitdir ;;
	esac
	[ "$dir" = no ] && continue
	if grep -q "^ExecStart=$bindir/cordon serve" "$D$dir/${u##*/}" 2>/dev/null; then
		echo "installcheck: ok: $D$dir/${u##*/} starts $bindir/cordon"
	else
		fail "$D$dir/${u##*/} does not start $bindir/cordon serve"
	fi
done

# smoke: run SCRIPT... and report; 77 is a skip (the host lacks a mechanism).
smoke() {
	rc=0
	"$@" || rc=$?
	case $rc in
	0) echo "installcheck: ok: $*" ;;
	77) echo "installcheck: SKIP: $* (see its output)" ;;
	*) fail "$* (exit $rc)" ;;
	esac
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cordon-installcheck.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

CORDON=$D$bindir/cordon DESTDIR=$D POLICYDIR=$D$policydir smoke sh "$srcdir/tests/install/smoke-run.sh"

if [ -n "$D" ]; then
	cp "$D$bindir/cordon" "$tmp/"
	for p in $pkglibexec_programs; do
		cp "$D$pkglibexecdir/$p" "$tmp/"
	done
	cordon=$tmp/cordon
else
	cordon=$bindir/cordon
fi
if command -v "${PYTHON:-python3}" >/dev/null 2>&1; then
	CORDON=$cordon smoke "${PYTHON:-python3}" "$srcdir/tests/install/smoke-serve.py"
else
	echo "installcheck: SKIP: the cordon serve smoke test needs ${PYTHON:-python3}"
fi

[ "$status" -eq 0 ] && echo "installcheck: the installed tree passed"
exit "$status"
