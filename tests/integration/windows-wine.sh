#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# cordon.exe, the Windows build (mingw-w64), under wine64: its own tests
# (tests/windows/test-win.c: command lines through the real
# CommandLineToArgvW, the environment block as a child sees it, the file-system
# shim, the launch under a restricted token in a job object), then check,
# explain and run from its command line, and its plan against the one the
# Linux build makes for the same profile (explain --backend windows).
# Skipped without mingw-w64 (nothing is built) or without wine64.
. "$(dirname "$0")/../lib/libtest.sh"

[ -n "${MINGW_CC:-}" ] || skip_all "mingw-w64 is not installed (gcc-mingw-w64-x86-64): cordon.exe is not built"
EXE=$CD_BUILDDIR/cordon.exe
TEST_EXE=$CD_BUILDDIR/tests/windows/test-win.exe
assert "cordon.exe is built" test -f "$EXE"
case $(head -c 2 "$EXE") in
MZ) ok "cordon.exe is a Windows executable (MZ)" ;;
*) not_ok "cordon.exe is a Windows executable (MZ)" ;;
esac
if [ -z "${WINE:-}" ]; then
	skip "cordon.exe under wine" "wine64 is not installed"
	done_testing
	exit 0
fi

# One wine prefix for the build tree: making one takes seconds.
export WINEPREFIX="$CD_BUILDDIR/tests/windows/wineprefix" WINEDEBUG=-all
mkdir -p "$WINEPREFIX"
w() {
	"$WINE" "$@"
}

# ---- its own tests ----
out=$(w "$TEST_EXE" 2>&1)
rc=$?
n_ok=$(printf '%s\n' "$out" | grep -c '^ok ')
n_bad=$(printf '%s\n' "$out" | grep -c '^not ok ')
if [ "$rc" -eq 0 ] && [ "$n_bad" -eq 0 ] && [ "$n_ok" -ge 15 ]; then
	ok "test-win.exe: $n_ok checks pass under wine"
else
	not_ok "test-win.exe under wine (exit $rc, $n_bad failed)"
	diag "$out"
fi
printf '%s\n' "$out" | grep '# SKIP' | while IFS= read -r l; do diag "test-win.exe: $l"; done

# ---- check ----
run_split w "$EXE" check --builtin
rc_is "cordon.exe check --builtin: exit 0" 0
contains "cordon.exe check --builtin: the three built-ins" "built-in:workspace-write: ok"

# ---- explain: the same plan as the Linux build's --backend windows ----
WS="$CD_TMP/ws"
mkdir -p "$WS/.git" "$WS/src"
# A drive path for wine: Z: is /.
WWS="Z:$(printf '%s' "$WS" | tr / '\\')"
cat >"$CD_TMP/p.json" <<'JSON'
{ "version": 1, "type": "managed", "network": "enabled",
  "file_system": { "type": "restricted", "entries": [
    { "path": { "type": "special", "value": { "kind": "root" } }, "access": "read" },
    { "path": { "type": "special", "value": { "kind": "project_roots" } }, "access": "write" },
    { "path": { "type": "special", "value": { "kind": "project_roots", "subpath": ".codex" } },
      "access": "read" } ] } }
JSON
WP="Z:$(printf '%s' "$CD_TMP/p.json" | tr / '\\')"
run_split w "$EXE" explain --json --profile "$WP" --workspace-root "$WWS" --cwd "$WWS"
rc_is "cordon.exe explain --json: exit 0" 0
printf '%s' "$cd_stdout" >"$CD_TMP/win.json"
run_split "$CORDON" explain --backend windows --json --profile "$CD_TMP/p.json" \
	--workspace-root "$WS" --cwd "$WS"
printf '%s' "$cd_stdout" >"$CD_TMP/lin.json"
if out=$(python3 - "$CD_TMP/win.json" "$CD_TMP/lin.json" <<'PY' 2>&1
import json, re, sys
win = json.load(open(sys.argv[1]))["windows"]
lin = json.load(open(sys.argv[2]))["windows"]
def norm(w, drive):
    sids = {}
    def sid(s):
        if s.startswith("S-1-5-21-"):
            return sids.setdefault(s, "SID%d" % (len(sids) + 1))
        return s
    return {
        "sids": [(s["role"], (s["key"] or "").replace(drive, "D:")) for s in w["restrictingSids"]],
        "aces": [(a["path"].replace(drive, "D:"), a["kind"], sid(a["sid"]), a["createDir"])
                 for a in w["aces"]],
        "env": w["env"],
    }
a, b = norm(win, "Z:"), norm(lin, "C:")
assert a == b, "windows build:\n%r\nlinux build:\n%r" % (a, b)
PY
); then
	ok "cordon.exe's plan on Windows is the Linux build's --backend windows plan"
else
	not_ok "cordon.exe's plan on Windows is the Linux build's --backend windows plan"
	diag "$out"
fi

# ---- run ----
run_split w "$EXE" run --profile "$WP" --workspace-root "$WWS" --cwd "$WWS" -- \
	cmd /c "echo from-windows& echo x> made.txt& exit 7"
rc_is "cordon.exe run: the command's exit status comes back" 7
contains "cordon.exe run: its output arrives" "from-windows"
assert "cordon.exe run: its write in the workspace lands" test -f "$WS/made.txt"
assert "cordon.exe run: the .codex made for the run is gone" test ! -e "$WS/.codex"

run_split w "$EXE" run --profile read-only -- cmd /c "exit 0"
rc_is "cordon.exe run, restricted network: refused with 125" 125
contains "cordon.exe run, restricted network: the way out is named" "--allow-degraded=network"
run_split w "$EXE" run --profile read-only --allow-degraded=network -- cmd /c "echo %HTTPS_PROXY%"
rc_is "cordon.exe run --allow-degraded=network: runs" 0
contains "cordon.exe run --allow-degraded=network: the proxy variables point nowhere" "http://127.0.0.1:9"
contains "cordon.exe run --allow-degraded=network: and it says what it degraded" "warning: network"
run_split w "$EXE" run --profile read-only --network enabled --bogus "$WWS" -- cmd /c "exit 0"
rc_is "cordon.exe run: unknown options are usage errors" 2
# The command line shared with the macOS front end (src/front/): entries as Windows paths.
mkdir -p "$CD_TMP/other"
WOTHER="Z:$(printf '%s' "$CD_TMP/other" | tr / '\\')"
run_split w "$EXE" explain --json --profile read-only --network enabled --allow-write "$WOTHER"
rc_is "cordon.exe explain --allow-write DIR: exit 0" 0
contains "cordon.exe explain --allow-write DIR: an allow ACE on it" "$(printf '%s' "$WOTHER" |
	sed 's/\\/\\\\/g')\",\"kind\":\"allow\""
run_split w "$EXE" run --profile read-only --network enabled --deny "$WWS" -- cmd /c "exit 0"
rc_is "cordon.exe run --deny DIR: a deny-read, which the backend refuses (125)" 125
# Resource limits: none enforced by this backend yet, so any one is refused, even for a
# profile that disables the sandbox (its command would run unbounded).
for prof in read-only full-access; do
	run_split w "$EXE" run --profile "$prof" --network enabled --limit-open-files 64 -- \
		cmd /c "echo x> $WWS\\limited.txt"
	rc_is "cordon.exe run --profile $prof --limit-open-files: refused (125)" 125
	contains "cordon.exe run --profile $prof --limit-open-files: the reason" \
		"enforces no resource limits yet (asked: open-files)"
done
assert "cordon.exe run --limit-*: nothing ran" test ! -e "$WS/limited.txt"

done_testing
