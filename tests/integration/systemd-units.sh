#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The systemd units of systemd/ pass `systemd-analyze verify` with no word
# of complaint: the system pair (unix socket), the WebSocket pair and the
# user pair, each service made from its .in with the built cordon as
# ExecStart= (verify checks that the program exists and is executable), and
# Documentation= not looked up (the man pages are not installed yet).
# Skipped without systemd-analyze (Debian: the systemd package). TAP.
. "$(dirname "$0")/../lib/libtest.sh"

SRC=${CD_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
ANALYZE=${SYSTEMD_ANALYZE:-$(command -v systemd-analyze || true)}
[ -n "$ANALYZE" ] && [ -x "$ANALYZE" ] ||
	skip_all "systemd-analyze is not installed (Debian: apt-get install systemd)"
BINDIR=$(cd "$(dirname "$CORDON")" && pwd)

# unit DIR SRCNAME: the unit as installed, with the built cordon's directory as bindir.
unit() {
	case $2 in
	*.in) sed -e "s|@bindir@|$BINDIR|g" "$SRC/systemd/$2" >"$1/$(basename "$2" .in)" ;;
	*) cp "$SRC/systemd/$2" "$1/" ;;
	esac
}

# verify DESC [--user] UNIT...: verify prints nothing and exits 0.
verify() {
	vdesc=$1
	shift
	cd_run_capture "$ANALYZE" "$@"
	if [ "$cd_rc" -eq 0 ] && [ -z "$cd_out" ]; then
		ok "$vdesc"
	else
		not_ok "$vdesc"
		diag "$ANALYZE $*: exit status $cd_rc"
		diag "$cd_out"
	fi
}

mkdir -p "$CD_TMP/system" "$CD_TMP/user"
for u in cordon.socket cordon.service.in cordon-ws.socket cordon-ws.service.in; do
	unit "$CD_TMP/system" "$u"
done
unit "$CD_TMP/user" user/cordon.socket
unit "$CD_TMP/user" user/cordon.service.in

# Whether verify can run here at all (it needs no running systemd, but a
# container may lack what it loads): a trivial unit first.
printf '[Service]\nType=oneshot\nExecStart=/bin/true\n' >"$CD_TMP/probe.service"
if ! out=$("$ANALYZE" verify --man=no "$CD_TMP/probe.service" 2>&1) || [ -n "$out" ]; then
	skip_all "systemd-analyze verify does not work here: $out"
fi

verify "the system units verify (unix socket)" verify --man=no \
	"$CD_TMP/system/cordon.socket" "$CD_TMP/system/cordon.service"
verify "the system units verify (WebSocket)" verify --man=no \
	"$CD_TMP/system/cordon-ws.socket" "$CD_TMP/system/cordon-ws.service"
if XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$CD_TMP} "$ANALYZE" --user verify --man=no \
	"$CD_TMP/probe.service" >/dev/null 2>&1; then
	XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$CD_TMP}
	export XDG_RUNTIME_DIR
	verify "the user units verify" --user verify --man=no \
		"$CD_TMP/user/cordon.socket" "$CD_TMP/user/cordon.service"
else
	skip "the user units verify" "systemd-analyze --user verify does not work here"
fi

# What the units promise, checked where systemd-analyze cannot.
for s in cordon.service cordon-ws.service; do
	f=$CD_TMP/system/$s
	assert "$s: Type=notify, no NotifyAccess= (the main process notifies)" \
		sh -c "grep -qx 'Type=notify' '$f' && ! grep -q '^NotifyAccess=' '$f'"
	assert "$s: activated (no --listen)" sh -c "! grep -q -- '^ExecStart=.*--listen' '$f'"
	assert "$s: RestrictNamespaces=, PrivateUsers=, SystemCallFilter= stay out" \
		sh -c "! grep -Eq '^(RestrictNamespaces|PrivateUsers|SystemCallFilter)=' '$f'"
done
assert "cordon-ws.service requires a token" \
	grep -q -- '--auth-token-file /etc/cordon/ws-token' "$CD_TMP/system/cordon-ws.service"
assert "the user socket is under \$XDG_RUNTIME_DIR (%t)" \
	grep -qx 'ListenStream=%t/cordon/cordon.sock' "$CD_TMP/user/cordon.socket"

done_testing
