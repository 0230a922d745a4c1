#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# `cordon explain --backend seatbelt|windows`: the macOS policy and
# sandbox-exec argv, and the Windows restricted token, SIDs and ACEs, planned
# on this (Linux) host from the same bound policy as the Linux backend.
# Nothing here runs on macOS or Windows: the checks read the plans (roots,
# exclusions, parameters, ACEs, network rules, refusals) and the argv's shape.
. "$(dirname "$0")/../lib/libtest.sh"

WS="$CD_TMP/ws"
mkdir -p "$WS/.git" "$WS/src" "$WS/secret"
# The workspace lives under $TMPDIR or /tmp here: on macOS /tmp is /private/tmp.
MWS=$(printf '%s' "$WS" | sed 's#^/tmp/#/private/tmp/#; s#^/var/#/private/var/#; s#^/etc/#/private/etc/#')

# explain_json NAME CHECK [ARGS...]: run explain --backend seatbelt --json, run
# CHECK (python, with d the JSON object and sb its "seatbelt" part).
explain_json() {
	name=$1
	code=$2
	shift 2
	run_split "$CORDON" explain --backend seatbelt --json --cwd "$WS" "$@"
	printf '%s' "$cd_stdout" >"$CD_TMP/sb.json"
	if out=$(python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
sb = d['seatbelt']
ws = sys.argv[2]
params = {p['key']: p['value'] for p in (sb['params'] if sb else [])}
$code
" "$CD_TMP/sb.json" "$WS" "$MWS" 2>&1) && [ "$cd_rc" -eq 0 ]; then
		ok "$name"
	else
		not_ok "$name (exit $cd_rc)"
		diag "$out"
		diag "$cd_stderr"
	fi
}

ARGV_SHAPE='
a = sb["argv"]
assert a[0] == "/usr/bin/sandbox-exec" and a[1] == "-p" and a[2] == sb["policy"], a[:2]
assert a[-1] == "--", a[-1]
assert a[3:-1] == ["-D%s=%s" % (p["key"], p["value"]) for p in sb["params"]], a[3:-1]
assert d["backend"] == "seatbelt" and d["linux"] is None
assert sb["sandboxType"] == "macosSeatbelt"
assert sb["policy"].count("(") == sb["policy"].count(")")
'

explain_json "workspace-write: the argv is sandbox-exec -p POLICY -D... --" "$ARGV_SHAPE" \
	--profile workspace-write --workspace-root "$WS"

explain_json "workspace-write: the workspace is writable, its .git .codex .agents excluded" '
mws = sys.argv[3]
roots = {k: v for k, v in params.items() if k.startswith("WRITABLE_ROOT_") and "EXCLUDED" not in k}
holding = [k for k, v in roots.items() if mws == v or mws.startswith(v.rstrip("/") + "/")]
assert holding, (mws, roots)
key = max(holding, key=lambda k: len(roots[k]))
ex = sorted(v for k, v in params.items() if k.startswith(key + "_EXCLUDED_"))
for name in (".agents", ".codex", ".git"):
    assert mws + "/" + name in ex, (name, ex)
assert "(allow file-read*)\n" in sb["policy"]
assert "network-outbound" not in sb["policy"]
' --profile workspace-write --workspace-root "$WS"

explain_json "read-only: full read, no writable root, no network" '
assert not [k for k in params if k.startswith("WRITABLE_ROOT")], params
assert "(allow file-read*)\n" in sb["policy"]
assert "(allow file-write*" not in sb["policy"]
assert "network-outbound" not in sb["policy"]
' --profile read-only

explain_json "a deny path under full read: READABLE_ROOT_0 is / with it excluded" '
assert params["READABLE_ROOT_0"] == "/", params
ex = [v for k, v in params.items() if k.startswith("READABLE_ROOT_0_EXCLUDED_")]
assert any(v.endswith("/ws/secret") for v in ex), ex
' --profile read-only --deny "$WS/secret"

explain_json "a deny glob becomes a regex that also covers later matches" '
assert "(deny file-read* file-write* (regex #\"^" in sb["policy"], sb["policy"][-400:]
assert r"[^/]*\.pem(/[^/]*)*$" in sb["policy"], sb["policy"][-400:]
' --profile read-only --deny-glob '**/*.pem'

explain_json "--network enabled: outbound and inbound allowed" '
assert "(allow network-outbound)\n" in sb["policy"] and "(allow network-inbound)\n" in sb["policy"]
' --profile read-only --network enabled

explain_json "full-access: no wrapper (plain exec)" '
assert sb["sandboxed"] is False and sb["argv"] is None and sb["policy"] is None
' --profile full-access

# Planning for macOS needs nothing of this host's kernel.
CORDON_TEST_DISABLE=landlock,userns,seccomp \
	explain_json "planned without Landlock, seccomp or user namespaces on this host" \
	"$ARGV_SHAPE" --profile workspace-write --workspace-root "$WS"

# A managed network under Seatbelt: outbound only to the proxy's loopback port.
run_split "$CORDON" explain --backend seatbelt --profile read-only --network managed
rc_is "--network managed without a proxy port: refused with exit 125" 125
contains "--network managed: the refusal asks for the proxy's loopback port" \
	"give it with --network-proxy tcp:127.0.0.1:PORT"
run_split "$CORDON" explain --backend seatbelt --profile read-only --network managed \
	--network-proxy unix:/run/proxy.sock
rc_is "--network managed with a unix socket proxy: refused with exit 125" 125
contains "--network managed: Seatbelt takes only a loopback TCP port" "only at a loopback TCP port"
run_split "$CORDON" explain --backend seatbelt --profile read-only --network managed \
	--network-proxy tcp:10.1.2.3:3128
rc_is "--network managed with a proxy off loopback: refused with exit 125" 125
explain_json "--network managed: outbound only to the proxy's port, the variables name it" '
import re
pol = sb["policy"]
assert "(allow network-outbound (remote ip \"localhost:8080\"))" in pol, pol[-800:]
assert len(re.findall(r"network-outbound", pol)) == 1, pol[-800:]
assert "network-inbound" not in pol and "network-bind" not in pol
env = sb["env"]
assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://127.0.0.1:8080", env
assert env["CODEX_NETWORK_PROXY_ACTIVE"] == "1" and "NO_PROXY" in env, env
' --profile read-only --network managed --network-proxy tcp:127.0.0.1:8080
explain_json "--network restricted: no proxy variables" '
assert sb["env"] == {}, sb["env"]
' --profile read-only

run_split "$CORDON" explain --backend seatbelt --profile workspace-write --workspace-root "$WS"
rc_is "text output: exit 0" 0
case $cd_stdout in
*"exec: /usr/bin/sandbox-exec -p POLICY -DKEY=VALUE... -- COMMAND..."*"(deny default)"*)
	ok "text output: the wrapper and the policy" ;;
*)
	not_ok "text output: the wrapper and the policy"
	diag "$cd_stdout" ;;
esac
case $cd_stdout in
*"Linux wrapper"*) not_ok "text output: no Linux wrapper for the seatbelt backend" ;;
*) ok "text output: no Linux wrapper for the seatbelt backend" ;;
esac

# ---- windows ----

# windows_json NAME CHECK [ARGS...]: as explain_json, for --backend windows (w: its part).
windows_json() {
	name=$1
	code=$2
	shift 2
	run_split "$CORDON" explain --backend windows --json --cwd "$WS" "$@"
	printf '%s' "$cd_stdout" >"$CD_TMP/w.json"
	if out=$(python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
w = d['windows']
ws = 'C:' + sys.argv[2].replace('/', '\\\\')
$code
" "$CD_TMP/w.json" "$WS" 2>&1) && [ "$cd_rc" -eq 0 ]; then
		ok "$name"
	else
		not_ok "$name (exit $cd_rc)"
		diag "$out"
		diag "$cd_stderr"
	fi
}

windows_json "windows workspace-write: token, SIDs in order, ACEs on the workspace" '
assert d["backend"] == "windows" and d["linux"] is None
assert w["sandboxType"] == "windowsRestrictedToken"
assert w["tokenFlags"] == "DISABLE_MAX_PRIVILEGE|LUA_TOKEN|WRITE_RESTRICTED"
roles = [s["role"] for s in w["restrictingSids"]]
assert roles[0] == "workspace" and roles[-2:] == ["logon", "everyone"], roles
assert set(roles[1:-2]) == {"writable root"}, roles
deny = {a["path"] for a in w["aces"] if a["kind"] == "deny-write"}
for name in (".git", ".codex", ".agents"):
    assert ws + "\\" + name in deny, (name, sorted(deny))
made = {a["path"] for a in w["aces"] if a["createDir"]}
assert ws + "\\.codex" in made and ws + "\\.git" not in made, made
assert any(a["path"] == "\\\\.\\NUL" for a in w["aces"])
assert w["env"]["HTTPS_PROXY"] == "http://127.0.0.1:9" and w["degraded"], w["env"]
' --profile workspace-write --workspace-root "$WS" --allow-degraded=network

windows_json "windows --network enabled: no environment, nothing degraded" '
assert w["env"] == {} and w["degraded"] == [] and w["pathPrepend"] is None
assert [s["role"] for s in w["restrictingSids"]] == ["readonly", "logon", "everyone"]
' --profile read-only --network enabled

windows_json "windows full-access: no token (plain CreateProcess)" '
assert w["sandboxed"] is False and w["restrictingSids"] == []
' --profile full-access

# What a restricted token cannot enforce is refused before anything, with the reason.
windows_refuses() {
	name=$1
	want=$2
	shift 2
	run_split "$CORDON" explain --backend windows --cwd "$WS" "$@"
	rc_is "windows refuses $name: exit 125" 125
	contains "windows refuses $name: the reason" "$want"
}
windows_refuses "a restricted network without the opt-down" "--allow-degraded=network" \
	--profile read-only
windows_refuses "a deny path" "Restricted read-only access requires the elevated" \
	--profile read-only --network enabled --deny "$WS/secret"
windows_refuses "a deny glob" "Restricted read-only access requires the elevated" \
	--profile read-only --network enabled --deny-glob '*.pem'
windows_refuses "the managed network" "managed network needs" \
	--profile read-only --network managed

run_split "$CORDON" explain --backend windows --profile workspace-write --workspace-root "$WS" \
	--allow-degraded=network
case $cd_stdout in
*"CreateRestrictedToken(DISABLE_MAX_PRIVILEGE|LUA_TOKEN|WRITE_RESTRICTED)"*"deny-write"*)
	ok "windows text output: the token and the ACEs" ;;
*)
	not_ok "windows text output: the token and the ACEs"
	diag "$cd_stdout" ;;
esac

run_split "$CORDON" explain --backend linux --json --profile read-only
case $cd_stdout in
*'"backend": "linux"'*) ok "--backend linux --json says backend linux" ;;
*) not_ok "--backend linux --json says backend linux" ;;
esac

# Resource limits: Seatbelt takes the four rlimits and refuses the rest; the
# restricted-token backend refuses them all (it enforces none yet). A profile's
# limits and the command line's alike; never dropped in silence.
run_split "$CORDON" explain --backend seatbelt --json --limit-open-files 64 --limit-core 0
rc_is "seatbelt --limit-open-files --limit-core: planned" 0
contains "seatbelt: the rlimits are in the plan" '"open_files": 64'
run_split "$CORDON" explain --backend seatbelt --limit-tasks 10
rc_is "seatbelt --limit-tasks: refused (125)" 125
contains "seatbelt --limit-tasks: the reason" "cannot enforce the tasks limit"
printf '{"version":1,"type":"disabled","limits":{"memory":"1G"}}\n' >"$CD_TMP/lim-mem.json"
run_split "$CORDON" explain --backend seatbelt --profile "$CD_TMP/lim-mem.json"
rc_is "seatbelt, a disabled profile's limits.memory: refused (125)" 125
run_split "$CORDON" explain --backend windows --profile workspace-write --allow-degraded=network \
	--limit-open-files 64
rc_is "windows --limit-open-files: refused (125)" 125
contains "windows --limit-open-files: the reason" "enforces no resource limits yet (asked: open-files)"
run_split "$CORDON" explain --backend windows --profile "$CD_TMP/lim-mem.json"
rc_is "windows, a disabled profile's limits.memory: refused (125)" 125

# probe names the backend this host runs sandboxes under.
run_split "$CORDON" probe
case $cd_stdout in
"ok   backend: linux (sandboxType linuxSeccomp)"*) ok "probe: the first line names the linux backend" ;;
*) not_ok "probe: the first line names the linux backend"; diag "$cd_stdout" ;;
esac
run_split "$CORDON" probe --json
case $cd_stdout in
*'"backend": {'*'"name": "linux"'*'"sandboxType": "linuxSeccomp"'*) ok "probe --json: backend" ;;
*) not_ok "probe --json: backend"; diag "$cd_stdout" ;;
esac

done_testing
