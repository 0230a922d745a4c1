#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Lint the generated manual pages with mandoc. TAP; standalone (no libtest.sh),
# so it also runs where only the man pages were built.

pages="cordon.1 cordon-policy.5 cordon-serve.1 cordon-protocol.7 cordon-sandbox.7"
mandir="${CD_BUILDDIR:-.}/man"

if [ -z "${MANDOC:-}" ]; then
	echo "1..0 # SKIP mandoc not found (configure did not set MANDOC)"
	exit 0
fi
for p in $pages; do
	if [ ! -f "$mandir/$p" ]; then
		echo "1..0 # SKIP $mandir/$p was not generated (scdoc missing?)"
		exit 0
	fi
done

# shellcheck disable=SC2086 # split the page list into words
set -- $pages
echo "1..$(($# * 2))"
n=0
for p in $pages; do
	n=$((n + 1))
	# Only errors fail: scdoc's roff always draws mandoc warnings about
	# the empty paragraph macros it emits, which say nothing about the page.
	if out=$("$MANDOC" -Tlint -Werror "$mandir/$p" 2>&1); then
		echo "ok $n - mandoc -Tlint $p"
	else
		echo "not ok $n - mandoc -Tlint $p"
		printf '%s\n' "$out" | sed 's/^/# /'
	fi

	# Every page needs these sections to be of use; a truncated or
	# mis-generated page fails here even if it lints cleanly.
	n=$((n + 1))
	missing=
	for s in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
		grep -q "^\.SH $s\$" "$mandir/$p" || missing="$missing '$s'"
	done
	if [ -z "$missing" ]; then
		echo "ok $n - $p has NAME, SYNOPSIS, DESCRIPTION, SEE ALSO"
	else
		echo "not ok $n - $p lacks section(s):$missing"
	fi
done
