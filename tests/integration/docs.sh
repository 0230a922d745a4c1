#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The README stays a five-minute read that points at every manual page, and
# the pages point at each other. TAP; standalone (no libtest.sh, no build
# needed): it reads only the sources.

src="${CD_SRCDIR:-.}"
readme="$src/README.md"
n=0

check() { # check DESCRIPTION STATUS [DETAIL...]
	n=$((n + 1))
	desc=$1
	st=$2
	shift 2
	if [ "$st" -eq 0 ]; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		for d in "$@"; do
			printf '%s\n' "$d" | sed 's/^/# /'
		done
	fi
}

# The pages the build makes, from man/local.mk's *_MANS lines: cordon.1 ...
pages=$(sed -n 's/^man[0-9]_MANS *= *//p' "$src/man/local.mk" | tr ' ' '\n' |
	sed -n 's|^man/||p')

echo "1..$((5 + $(echo "$pages" | wc -l) * 2))"

size=$(wc -c <"$readme")
[ "$size" -lt 10240 ]
check "README.md is well under 10 KB ($size bytes)" $? \
	"move the details into a manual page or HACKING.md"

st=0
for c in './bootstrap --demo' './bootstrap --check'; do
	grep -q "^$c " "$readme" || st=1
done
check "README.md keeps the two quick-start commands" $st

grep -q '^## Install$' "$readme"
check "README.md has an Install section" $?

[ -n "$pages" ]
st=$?
check "man/local.mk lists the pages ($(echo "$pages" | tr '\n' ' '))" $st

# A text line of a paragraph or of an indented entry that starts with
# ".." loses its first dot on the page (scdoc 1.11 escapes the line's
# start by eating it); inside a "- " list item such a line is fine.
tab=$(printf '\t')
bad=$(grep -nE "^$tab*\.\." "$src"/man/*.scd)
[ -z "$bad" ]
check "no paragraph line of man/*.scd starts with '..'" $? "$bad"

for p in $pages; do
	name=${p%.*}
	sec=${p##*.}
	grep -q "^| \`$name($sec)\` |" "$readme"
	check "README.md's table names $name($sec)" $?

	if [ "$name" = cordon-sandbox ]; then
		# The page itself: it names the others.
		st=0
		for q in $pages; do
			[ "$q" = "$p" ] && continue
			sed -n '/^# SEE ALSO/,$p' "$src/man/$p.scd" |
				grep -qF "*${q%.*}*(${q##*.})" || st=1
		done
		check "$name($sec) SEE ALSO names every other page" $st
	else
		sed -n '/^# SEE ALSO/,$p' "$src/man/$p.scd" | grep -qF '*cordon-sandbox*(7)'
		check "$name($sec) SEE ALSO names cordon-sandbox(7)" $?
	fi
done
