#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Lint the generated manual pages with mandoc: no error, no warning and no
# style note, but those listed in ALLOWED below (each where scdoc forces
# it, with the reason). TAP; standalone (no libtest.sh), so it also runs
# where only the man pages were built.

pages="cordon.1 cordon-policy.5 cordon-serve.1 cordon-protocol.7 cordon-sandbox.7"
mandir="${CD_BUILDDIR:-.}/man"

# The notes scdoc forces on the pages, one extended regular expression a
# line, matched against mandoc's message with the "mandoc: PAGE:LINE:COL: "
# prefix removed. Each with its reason; none today: scdoc 1.11.2 emits an
# empty paragraph macro only for a blank line the source can avoid (see the
# comment at the top of each man/*.scd), and the title, the line lengths
# and everything else are the source's.
ALLOWED=''

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
echo "1..$(($# * 3))"
n=0
for p in $pages; do
	n=$((n + 1))
	# -Tlint reports every level (errors, warnings, style notes).
	out=$("$MANDOC" -Tlint "$mandir/$p" 2>&1)
	rc=$?
	if [ -n "$ALLOWED" ]; then
		out=$(printf '%s\n' "$out" | sed 's/^mandoc: [^:]*:[0-9]*:[0-9]*: //' |
			grep -Ev "$ALLOWED")
	fi
	if [ -z "$out" ] && [ "$rc" -le 1 ]; then
		echo "ok $n - mandoc -Tlint $p: nothing to report"
	else
		echo "not ok $n - mandoc -Tlint $p (exit $rc)"
		printf '%s\n' "$out" | sed 's/^/# /'
		echo "# (see the comment at the top of man/$p.scd for how the source avoids these)"
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

	# The NAME line as apropos/whatis (man-db's lexgrog, and lintian's
	# bad-whatis-entry) read it: "PAGE - description", the page's own
	# name as one word (cordon-serve, not "cordon serve").
	n=$((n + 1))
	name=$(sed -n '/^\.SH NAME$/{n;p;q}' "$mandir/$p")
	case "$name" in
	"${p%.*} - "?*) echo "ok $n - $p: whatis entry '$name'" ;;
	*) echo "not ok $n - $p: NAME line '$name' is not '${p%.*} - DESCRIPTION'" ;;
	esac
done
