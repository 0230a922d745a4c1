#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The shell completions (completions/): their option lists are cordon's
# option tables (`cordon --list-options`), the bash function completes
# subcommands, options, profile names from the lookup path (the built-ins
# included) and the values of --network, --backend and the like; zsh's
# file parses (zsh -n) and fish's completes (complete -C) where those shells
# are installed.
. "$(dirname "$0")/../lib/libtest.sh"

SRC=${CD_SRCDIR:?CD_SRCDIR is not set}
BASH_COMP=$SRC/completions/bash/cordon
ZSH_COMP=$SRC/completions/zsh/_cordon
FISH_COMP=$SRC/completions/fish/cordon.fish
unset CORDON_POLICY_PATH
cd "$CD_TMP" || exit 1

if ! command -v bash >/dev/null 2>&1; then
	skip_all "bash is not installed"
fi

# ---- the option lists are the option tables ----
# bash_list VAR: the words of the completion's list VAR, one a line, sorted.
bash_list() {
	bash -c '. "$1" && printf "%s\n" ${!2}' sh "$BASH_COMP" "$1" | LC_ALL=C sort
}
# zsh_list ARRAY: the options of zsh's ARRAY (policy_opts spliced in), in
# the --list-options spelling: --x= takes a value, --x[=] an optional one.
zsh_list() {
	awk -v want="$1" '
	function emit(line,   o) {
		sub(/^[ \t]*\x27/, "", line); sub(/^\*/, "", line)
		if (!match(line, /^--?[A-Za-z][A-Za-z0-9-]*(=-?)?/))
			return
		o = substr(line, 1, RLENGTH)
		if (o ~ /=-$/)
			sub(/=-$/, "[=]", o)
		print o
	}
	$0 ~ "^[ \t]*" want "=\\($" { on = 1; next }
	on && /^[ \t]*\)$/ { on = 0; next }
	on && /^[ \t]*\$policy_opts$/ { splice = 1; next }
	on { emit($0) }
	/^[ \t]*policy_opts=\($/ { pol = 1; next }
	pol && /^[ \t]*\)$/ { pol = 0; next }
	pol { p[++np] = $0 }
	END { if (splice) for (i = 1; i <= np; i++) emit(p[i]) }
	' "$ZSH_COMP" | LC_ALL=C sort
}

# fish_list COMMAND: the options fish offers for COMMAND ("" for cordon's
# own), from the lines whose condition names it: -r or -x takes a value,
# "# [=]" marks an optional one.
fish_list() {
	awk -v want="$1" '
	/^complete -c cordon / {
		line = $0
		if (!match(line, /-n (\x27[^\x27]*\x27|[^ ]+)/))
			next
		cond = substr(line, RSTART + 3, RLENGTH - 3)
		gsub(/\x27/, "", cond)
		n = split(cond, parts, /; (and|or) /)
		hit = 0
		for (i = 1; i <= n; i++) {
			k = split(parts[i], w, " ")
			if (w[1] == "__cordon_run_options" && want == "run")
				hit = 1
			if (w[1] == "__cordon_cmd" && k == 1 && want == "")
				hit = 1
			if (w[1] == "__cordon_cmd")
				for (j = 2; j <= k; j++)
					if (w[j] == want)
						hit = 1
		}
		if (!hit)
			next
		arg = ""
		if (line ~ / -[rx]( |$)/)
			arg = "="
		if (line ~ /# \[=\]$/)
			arg = "[=]"
		if (match(line, / -l [A-Za-z0-9-]+/))
			print "--" substr(line, RSTART + 4, RLENGTH - 4) arg
		if (match(line, / -s [A-Za-z]/))
			print "-" substr(line, RSTART + 4, 1) arg
	}' "$FISH_COMP" | LC_ALL=C sort
}

"$CORDON" --list-options | grep '^-' | LC_ALL=C sort >"$CD_TMP/want"
fish_list "" >"$CD_TMP/got"
check "fish: cordon's own options are the table's" diff "$CD_TMP/want" "$CD_TMP/got"
bash_list _cordon_options_main >"$CD_TMP/got"
check "bash: cordon's own options are the table's" diff "$CD_TMP/want" "$CD_TMP/got"
zsh_list main_opts >"$CD_TMP/got"
check "zsh: cordon's own options are the table's" diff "$CD_TMP/want" "$CD_TMP/got"
"$CORDON" --list-options | grep -v '^-' | LC_ALL=C sort >"$CD_TMP/want"
bash_list _cordon_commands >"$CD_TMP/got"
check "bash: the subcommands are cordon's" diff "$CD_TMP/want" "$CD_TMP/got"
sed -n 's/.*1:command:((\(.*\)))..*/\1/p' "$ZSH_COMP" | tr ' ' '\n' |
	sed -n 's/^\([a-z][a-z]*\)\\:.*/\1/p' | LC_ALL=C sort >"$CD_TMP/got"
check "zsh: the subcommands are cordon's" diff "$CD_TMP/want" "$CD_TMP/got"
for cmd in run explain probe check serve; do
	"$CORDON" --list-options "$cmd" | LC_ALL=C sort >"$CD_TMP/want"
	assert "cordon --list-options $cmd lists options" test -s "$CD_TMP/want"
	bash_list "_cordon_options_$cmd" >"$CD_TMP/got"
	check "bash: the options of $cmd are its table's" diff "$CD_TMP/want" "$CD_TMP/got"
	zsh_list "${cmd}_opts" >"$CD_TMP/got"
	check "zsh: the options of $cmd are its table's" diff "$CD_TMP/want" "$CD_TMP/got"
	fish_list "$cmd" >"$CD_TMP/got"
	check "fish: the options of $cmd are its table's" diff "$CD_TMP/want" "$CD_TMP/got"
done
"$CORDON" --list-options run | sed -n 's/^--\(.*\)=$/\1/p' | LC_ALL=C sort >"$CD_TMP/want"
sed -n 's/^set -g __cordon_run_value_options //p' "$FISH_COMP" | tr ' ' '\n' | LC_ALL=C sort >"$CD_TMP/got"
check "fish: the run options that take a value are the table's" diff "$CD_TMP/want" "$CD_TMP/got"
for c in $("$CORDON" --list-options | grep -v '^-'); do
	grep -q "^complete -c cordon -n __cordon_cmd -a $c " "$FISH_COMP" ||
		echo "$c" >>"$CD_TMP/fishcmds"
done
assert "fish: every subcommand is offered" test ! -s "$CD_TMP/fishcmds"
expect_exit "cordon --list-options with an unknown command: 2" 2 "$CORDON" --list-options nope

# ---- the bash function ----
# complete LINE: COMPREPLY of _cordon for LINE (the cursor at its end), sorted, one a line;
# COMP_WORDS split as bash splits them (COMP_WORDBREAKS), as bash hands them over.
cat >"$CD_TMP/drive.bash" <<'BASH'
. "$1" || exit 1
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
COMP_WORDS=()
w=
for ((i = 0; i < ${#COMP_LINE}; i++)); do
	c=${COMP_LINE:i:1}
	case $c in
	' ') [[ -n $w ]] && COMP_WORDS+=("$w"); w= ;;
	[=:]) [[ -n $w ]] && COMP_WORDS+=("$w"); COMP_WORDS+=("$c"); w= ;;
	*) w+=$c ;;
	esac
done
COMP_WORDS+=("$w")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_cordon cordon "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" || exit 1
printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort
BASH
complete() {
	cd_out=$(bash "$CD_TMP/drive.bash" "$BASH_COMP" "$1" 2>&1)
	cd_rc=$?
}
# completes "desc" LINE WORD...: the completion of LINE is exactly WORD... (sorted).
completes() {
	cd_desc=$1
	cd_line=$2
	shift 2
	complete "$cd_line"
	cd_want=$(printf '%s\n' "$@" | LC_ALL=C sort)
	if [ "$cd_rc" -eq 0 ] && [ "$cd_out" = "$cd_want" ]; then
		ok "$cd_desc"
	else
		not_ok "$cd_desc"
		diag "line: '$cd_line'"
		diag "expected: $(echo $cd_want)"
		diag "got (exit $cd_rc): $(echo $cd_out)"
	fi
}

C=$CORDON
completes "subcommands" "$C " check explain probe run serve
completes "a subcommand from its start" "$C ex" explain
completes "cordon's own options" "$C --" --help --version
completes "a long option of run" "$C run --prof" --profile=
completes "check --builtin" "$C check --bu" --builtin
completes "explain --list-profiles" "$C explain --list" --list-profiles
completes "an optional value: no '=' offered" "$C run --private" --private-tmp
completes "--network values" "$C explain --network " enabled managed restricted
completes "--network=VALUE" "$C run --network=re" restricted
completes "--backend values" "$C explain --backend " linux seatbelt windows
completes "--allow-degraded=VALUE" "$C run --allow-degraded=pid" pid-isolation
completes "serve --listen values" "$C serve --listen " stdio unix: ws://
completes "serve --pid-namespace=VALUE" "$C serve --pid-namespace=" always auto never
completes "a symbolic path after ':' (bash's word)" "$C run --allow-read :work" workspace_roots
# Profile names: the built-ins, without CORDON_POLICY_PATH.
names=$("$CORDON" explain --list-profiles | cut -f1)
assert "the built-in profiles are listed" test -n "$names"
# shellcheck disable=SC2086 # one name a line
completes "--profile: the names the lookup finds (built-ins)" "$C run --profile " $names
completes "--profile=NAME" "$C explain --profile=workspace" workspace-write
mkdir "$CD_TMP/p"
printf '{"version": 1, "type": "disabled"}\n' >"$CD_TMP/p/mine.json"
cd_line="$C run --profile mi"
cd_out=$(CORDON_POLICY_PATH=$CD_TMP/p bash "$CD_TMP/drive.bash" "$BASH_COMP" "$cd_line" 2>&1)
assert "--profile: a profile of CORDON_POLICY_PATH" test "$cd_out" = mine
completes "--profile: a path completes files" "$C run --profile ./p/" ./p/mine.json
# run: options before the command, then the command, then its arguments.
completes "run: options of run before the command" "$C run -q" -q
completes "run: the value of --cwd is a directory" "$C run --cwd ./" ./p
touch "$CD_TMP/zzfile"
completes "run: after CMD, files (not cordon's options)" "$C run ls --profile zz" zzfile
mkdir "$CD_TMP/bin"
printf '#!/bin/sh\n' >"$CD_TMP/bin/cdtestcmd"
chmod +x "$CD_TMP/bin/cdtestcmd"
cd_out=$(PATH=$CD_TMP/bin:$PATH bash "$CD_TMP/drive.bash" "$BASH_COMP" "$C run -- cdtest" 2>&1)
assert "run: after --, a command of \$PATH, once" test "$cd_out" = cdtestcmd
cd_out=$(PATH=$CD_TMP/bin:$PATH bash "$CD_TMP/drive.bash" "$BASH_COMP" "$C run -q cdtest" 2>&1)
assert "run: the first operand is the command" test "$cd_out" = cdtestcmd
completes "run: an option's value is skipped" "$C run --profile read-only ls zz" zzfile

# ---- zsh ----
if command -v zsh >/dev/null 2>&1; then
	check "zsh -n parses completions/zsh/_cordon" zsh -n "$ZSH_COMP"
	assert "completions/zsh/_cordon starts with #compdef cordon" \
		test "$(head -n 1 "$ZSH_COMP")" = "#compdef cordon"
else
	skip "zsh -n parses completions/zsh/_cordon" "zsh is not installed (apt-get install zsh)"
	skip "completions/zsh/_cordon starts with #compdef cordon" "zsh is not installed"
fi

# ---- fish ----
if command -v fish >/dev/null 2>&1; then
	check "fish -n parses completions/fish/cordon.fish" fish -n "$FISH_COMP"
	# fish_completes "desc" LINE WORD...: fish's candidates for LINE, without descriptions.
	fish_completes() {
		cd_desc=$1
		cd_line=$2
		shift 2
		cd_out=$(PATH=$(dirname "$CORDON"):$PATH fish --no-config -c \
			'source $argv[1]; complete -C $argv[2]' "$FISH_COMP" "$cd_line" 2>&1 |
			cut -f1 | LC_ALL=C sort)
		cd_want=$(printf '%s\n' "$@" | LC_ALL=C sort)
		if [ "$cd_out" = "$cd_want" ]; then
			ok "$cd_desc"
		else
			not_ok "$cd_desc"
			diag "line: '$cd_line'"
			diag "expected: $(echo $cd_want)"
			diag "got: $(echo $cd_out)"
		fi
	}
	fish_completes "fish: subcommands" "cordon " check explain probe run serve
	fish_completes "fish: --network values" "cordon explain --network " enabled managed restricted
	# shellcheck disable=SC2086 # one name a line
	fish_completes "fish: --profile names (built-ins)" "cordon run --profile r" \
		$(printf '%s\n' $names | grep '^r')
	fish_completes "fish: run's options before the command" "cordon run -q --cl" --clear-env
	fish_completes "fish: none of cordon's options after the command" "cordon run ls --cl"
	fish_completes "fish: check --builtin" "cordon check --bu" --builtin
else
	skip "fish -n parses completions/fish/cordon.fish" "fish is not installed (apt-get install fish)"
fi

done_testing
