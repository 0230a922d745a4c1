#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# cordon explain: the bound policy and the Linux wrapper, as text and JSON.
. "$(dirname "$0")/../lib/libtest.sh"

WS=$CD_TMP/ws
mkdir -p "$WS"
WS=$(cd "$WS" && pwd -P)
mkdir -p "$WS/.git"

run_split "$CORDON" explain --profile workspace-write --workspace-root "$WS" --cwd "$WS"
rc_is "workspace-write explain: exit 0" 0
line_matches() {
	# line_matches "desc" REGEX: some stdout line matches the extended regex
	if printf '%s\n' "$cd_stdout" | grep -Eq -- "$2"; then
		ok "$1"
	else
		not_ok "$1"
		diag "no line matches: $2"
		diag "$cd_stdout"
	fi
}
no_line_matches() {
	if printf '%s\n' "$cd_stdout" | grep -Eq -- "$2"; then
		not_ok "$1"
		diag "a line matches: $2"
		diag "$cd_stdout"
	else
		ok "$1"
	fi
}
line_matches "the workspace is writable" "^ +write +directory +$WS +"
line_matches "the workspace's .git is read-only (a carve-out)" \
	"^ +read +directory +$WS/\\.git +.*\\[carve-out\\]"
line_matches "a missing .codex is protected too" "^ +read +missing +$WS/\\.codex +"
line_matches "a missing .agents is protected too" "^ +read +missing +$WS/\\.agents +"
line_matches "the root is readable" "^ +read +directory +/ +"
line_matches "/dev/null is writable" "^ +write +[a-z]+ +/dev/null +"
line_matches "the profile's origin" "origin: .*workspace-write\\.json"
line_matches "network restricted" "network: restricted"
line_matches "Landlock section with the ABI" "Landlock ABI [0-9]+"
line_matches "a Landlock rule for the workspace" "^ +$WS: .*write_file"
line_matches "a Landlock rule for /" "^ +/: .*read_file"
line_matches "seccomp rules: ptrace" "^ +ptrace +EPERM"
line_matches "seccomp rules: socket" "^ +socket +EPERM"
line_matches "seccomp rules: ioctl TIOCSTI" "^ +ioctl +EPERM .*0x5412"
line_matches "the mount plan protects .git" "^ +ro-bind +$WS/\\.git"
line_matches "carve-outs are marked" "\\[carve-out\\]"
no_line_matches "no refusal" "^Refused"

# Without explicit .git entries the protection comes from the rule itself.
cat >"$CD_TMP/plain-write.json" <<'JSON'
{"version": 1, "type": "managed", "network": "restricted",
 "file_system": {"type": "restricted", "entries": [
  {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"},
  {"path": {"type": "special", "value": {"kind": "project_roots"}}, "access": "write"}]}}
JSON
run_split "$CORDON" explain --profile "$CD_TMP/plain-write.json" --workspace-root "$WS" --cwd "$WS"
rc_is "a profile without .git entries: exit 0" 0
line_matches "its .git is read-only protected metadata" \
	"^ +read +directory +$WS/\\.git +protected metadata.*\\[carve-out\\]"
line_matches "its missing .agents is protected metadata" \
	"^ +read +missing +$WS/\\.agents +protected metadata"

if command -v python3 >/dev/null 2>&1; then
	json_check() {
		# json_check "desc" PYTHON-ASSERTIONS ARGS...: explain --json ARGS, then run the
		# assertions with d = the parsed object and ws = $WS.
		desc=$1
		code=$2
		shift 2
		"$CORDON" explain --json "$@" >"$CD_TMP/explain.json" 2>"$CD_TMP/explain.err"
		check "$desc" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
ws = sys.argv[2]
$code
" "$CD_TMP/explain.json" "$WS"
	}
	json_check "--json: one object with the documented keys" '
for k in ("profile", "paths", "notes", "linux", "refusal"):
    assert k in d, k
for k in ("origin", "type", "network"):
    assert k in d["profile"], k
l = d["linux"]
for k in ("sandboxed", "landlock", "seccomp", "namespaces", "read_only_root", "private_pts",
          "mounts", "degraded"):
    assert k in l, k
for k in ("abi", "handled_fs", "handled_net", "scoped", "rules"):
    assert k in l["landlock"], k
for k in ("enabled", "rules"):
    assert k in l["seccomp"], k
for k in ("user", "mount"):
    assert k in l["namespaces"], k
for p in d["paths"]:
    for k in ("path", "access", "type", "why", "carve_out", "origin"):
        assert k in p, (k, p)
for r in l["seccomp"]["rules"]:
    for k in ("syscall", "action", "condition", "why"):
        assert k in r, (k, r)
for m in l["mounts"]:
    for k in ("op", "path", "why"):
        assert k in m, (k, m)
assert d["refusal"] is None
' --profile workspace-write --workspace-root "$WS" --cwd "$WS"
	json_check "--json: workspace write, .git read carve-out, rules present" '
paths = {p["path"]: p for p in d["paths"]}
assert paths[ws]["access"] == "write", paths[ws]
g = paths[ws + "/.git"]
assert g["access"] == "read" and g["carve_out"] and g["origin"] in ("protected", "entry"), g
assert d["profile"]["type"] == "managed" and d["profile"]["network"] == "restricted"
l = d["linux"]
assert l["sandboxed"] and l["seccomp"]["enabled"]
sc = {r["syscall"] for r in l["seccomp"]["rules"]}
assert {"ptrace", "socket", "mount", "bpf", "keyctl", "io_uring_setup"} <= sc, sc
rules = {r["path"]: r["rights"] for r in l["landlock"]["rules"]}
assert "write_file" in rules[ws] and "read_file" in rules["/"], rules
assert "write_file" not in rules["/"], rules["/"]
assert l["landlock"]["abi"] >= 1 and "write_file" in l["landlock"]["handled_fs"]
assert any(m["path"] == ws + "/.git" for m in l["mounts"]), l["mounts"]
assert l["namespaces"]["mount"]
assert l["private_pts"] is True and l["read_only_root"] is True
' --profile workspace-write --workspace-root "$WS" --cwd "$WS"
	json_check "--json: a writable /dev/pts stays the host one, not private" '
assert d["linux"]["private_pts"] is False, d["linux"]
' --profile read-only --cwd "$WS" --allow-write /dev/pts
	json_check "--json: a path below /dev/pts is refused (the private one would hide it)" '
assert "/dev/pts/77 is under /dev/pts" in d["refusal"], d["refusal"]
' --profile read-only --cwd "$WS" --allow-write /dev/pts/77
	json_check "--json: read-only has no writable path but /dev/null" '
w = [p["path"] for p in d["paths"] if p["access"] == "write"]
assert w == ["/dev/null"], w
assert not d["linux"]["mounts"], d["linux"]["mounts"]
' --profile read-only --cwd "$WS"
	json_check "--json: full-access is not sandboxed" '
assert d["profile"]["type"] == "disabled"
assert d["linux"]["sandboxed"] is False
' --profile full-access
	json_check "--json: no workspace root gives a note and no workspace path" '
assert d["notes"], d["notes"]
assert not any(p["path"] == ws for p in d["paths"])
' --profile workspace-write --cwd "$WS"
	json_check "--json: --allow-write adds a writable path" '
paths = {p["path"]: p for p in d["paths"]}
assert paths[ws + "/extra"]["access"] == "write", paths
' --profile read-only --allow-write "$WS/extra" --cwd "$WS"
	json_check "--json: network enabled drops the socket rules" '
sc = {r["syscall"] for r in d["linux"]["seccomp"]["rules"]}
assert "socket" not in sc and "ptrace" in sc, sc
assert d["profile"]["network"] == "enabled"
' --profile workspace-write --network enabled --workspace-root "$WS"
	# Issue 21: the seccomp audit, both halves. With a pid namespace the
	# pid-targeting calls are left to it (and said so); without one they are
	# kept to the caller.
	json_check "--json: setuid, lease and terminal rules; pid calls left to the pid namespace" '
rules = d["linux"]["seccomp"]["rules"]
sc = {r["syscall"] for r in rules}
assert {"chmod", "fchmodat2", "openat", "mknod", "openat2", "fcntl", "pidfd_getfd"} <= sc, sc
assert "prlimit64" not in sc and "pidfd_open" not in sc, sc
conds = {r["condition"] for r in rules if r["syscall"] == "ioctl"}
assert "(arg1 & 0xffffffff) == 0x540c" in conds, conds
allowed = d["linux"]["seccomp"]["allowed"]
assert all(a["syscalls"] and a["why"] for a in allowed), allowed
calls = {c for a in allowed for c in a["syscalls"]}
assert {"prlimit64", "setpriority", "kill", "mkdir"} <= calls, calls
assert d["linux"]["namespaces"]["pid"]
' --profile workspace-write --workspace-root "$WS" --cwd "$WS"
	CORDON_TEST_DISABLE=namespace-setup
	export CORDON_TEST_DISABLE
	json_check "--json: without a pid namespace, the pid calls are kept to the caller" '
rules = d["linux"]["seccomp"]["rules"]
conds = {(r["syscall"], r["condition"], r["action"]) for r in rules}
assert ("prlimit64", "arg0 != 0", "EPERM") in conds, conds
assert ("setpriority", "arg1 != 0", "EPERM") in conds, conds
assert ("ioprio_set", "arg0 != 1", "EPERM") in conds, conds
assert ("kill", "(arg0 & 0xffffffff) == 0xffffffff", "EPERM") in conds, conds
assert ("pidfd_open", "always", "ENOSYS") in conds, conds
calls = {c for a in d["linux"]["seccomp"]["allowed"] for c in a["syscalls"]}
assert "prlimit64" not in calls and "kill" in calls, calls
assert not d["linux"]["namespaces"]["pid"]
' --profile workspace-write --workspace-root "$WS" --cwd "$WS" \
		--allow-degraded=pid-isolation --allow-degraded=protected-metadata \
		--allow-degraded=file-attributes
	unset CORDON_TEST_DISABLE
	json_check "--json: a refusal is reported in the object" '
assert isinstance(d["refusal"], str) and "Landlock" in d["refusal"], d["refusal"]
assert d["linux"] is None
' --profile read-only --min-landlock-abi 99
	# Paths are bytes; JSON is UTF-8. A key must not vanish because its
	# path is not UTF-8 (jansson refuses such strings): here the refusal.
	json_check "--json: a refusal naming a non-UTF-8 path is still reported" '
assert isinstance(d["refusal"], str) and "\ufffd" in d["refusal"], d
assert "\ufffd" in d["cwd"], d
' --profile read-only --cwd "$(printf '%s/no\377such' "$CD_TMP")"
	mkdir -p "$CD_TMP/odd"
	: >"$CD_TMP/odd/$(printf 'a\377b')"
	json_check "--json: a matched non-UTF-8 path keeps its path and why" '
odd = [p for p in d["paths"] if p["origin"] == "entry" and "odd/" in p.get("path", "")]
assert len(odd) == 1 and odd[0]["path"].endswith("/odd/a\ufffdb") and odd[0]["why"], odd
' --profile read-only --cwd "$WS" --deny-glob "$CD_TMP/odd/*"
else
	skip "--json checks" "python3 not installed"
fi

run_split "$CORDON" explain --profile read-only --cwd "$WS"
rc_is "read-only explain: exit 0" 0
writable=$(printf '%s\n' "$cd_stdout" | grep -E '^ +write +' | awk '{print $3}')
assert "read-only: the only writable path is /dev/null" test "$writable" = "/dev/null"

run_split "$CORDON" explain --profile workspace-write --cwd "$WS"
line_matches "no workspace root: a note says :workspace_roots bound to nothing" "workspace"
no_line_matches "no workspace root: the cwd is not made writable" "^ +write +directory +$WS +"

run_split "$CORDON" explain --profile read-only --min-landlock-abi 99
rc_is "refusal: exit 125" 125
case $cd_stderr in
"cordon: "*Landlock*) ok "refusal: one-line reason naming Landlock on stderr" ;;
*)
	not_ok "refusal: one-line reason naming Landlock on stderr"
	diag "$cd_stderr"
	;;
esac
line_matches "refusal: the report still shows the bound paths" "^ +read +directory +/ +"
line_matches "refusal: the reason in the report" "^Refused: "

run_split "$CORDON" explain --profile workspace-write --network managed --workspace-root "$WS"
rc_is "--network managed: exit 0 (cordon's own proxy)" 0
contains "--network managed: the report shows cordon's proxy" "proxy: cordon's own"
contains "--network managed: no allowed domain, no network, said" "the command has no network"

# ".." after a symlink is resolved as the kernel resolves it: from the
# link's target. A deny on D/lnk/../secret must cover the file that
# `cat D/lnk/../secret` reads (D/d1/secret), not D/secret.
D=$CD_TMP/dotdot
mkdir -p "$D/d1/d2"
echo inner >"$D/d1/secret"
echo outer >"$D/secret"
ln -s "$D/d1/d2" "$D/lnk"
run_split "$CORDON" explain --profile read-only --cwd "$WS" --deny "$D/lnk/../secret"
rc_is "a deny through lnk/..: explain exits 0" 0
line_matches "a deny through lnk/.. names the file next to the link's target" \
	"^ +deny +file +$D/d1/secret +"
no_line_matches "a deny through lnk/.. does not name the file next to the link" \
	"^ +deny +file +$D/secret +"
cd_run_capture "$CORDON" run --profile read-only --cwd "$WS" --deny "$D/lnk/../secret" \
	-- cat "$D/lnk/../secret"
assert "a deny through lnk/..: the file reached through the link is unreadable ($cd_out)" \
	test "$cd_rc" != 0 -a "$cd_out" != inner
cd_run_capture "$CORDON" run --profile read-only --cwd "$WS" --deny "$D/lnk/../secret" \
	-- cat "$D/secret"
assert "a deny through lnk/..: the file next to the link stays readable" test "$cd_out" = outer

# A control character in a path is escaped in the text report: one entry,
# one line, and nothing reaches the terminal as a command.
mkdir -p "$CD_TMP/nl"
: >"$CD_TMP/nl/$(printf 'n\nl')"
run_split "$CORDON" explain --profile read-only --cwd "$WS" --deny-glob "$CD_TMP/nl/*"
line_matches "a newline in a path is shown as \\n" "^ +deny +file +$CD_TMP/nl/n\\\\nl +"

# A workspace root that is not a directory is refused, like --cwd.
run_split "$CORDON" explain --profile workspace-write --workspace-root "$CD_TMP/no-such-ws"
rc_is "a missing --workspace-root is refused (125)" 125
contains "a missing --workspace-root: the reason names it" "--workspace-root '$CD_TMP/no-such-ws': No such file"

# A relative --workspace-root is taken relative to --cwd (cordon(1)).
(cd / && "$CORDON" explain --profile workspace-write --cwd "$WS" --workspace-root . \
	>"$CD_TMP/rel.out" 2>&1)
cd_stdout=$(cat "$CD_TMP/rel.out")
line_matches "a relative --workspace-root is relative to --cwd" "^ +write +directory +$WS +"

run_split "$CORDON" explain --profile no-such-profile-here
rc_is "unknown profile: exit 125" 125
contains "unknown profile: 'no such profile'" "no such profile"

done_testing
