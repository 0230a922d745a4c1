#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Planted git configuration that the user's own git, run later on the host,
# would obey: each case lets a command under `cordon run --profile
# workspace-write` try to plant a repository whose core.fsmonitor creates a
# marker file outside every writable root, then runs host git where the user
# would, and checks that no marker appeared (the planted command never ran
# outside the sandbox). A control case first shows that host git does run
# such a command when it is planted without the sandbox.
#
#   - a repository planted above a workspace nested in /tmp (/tmp/X/ws with
#     no .git of its own: git's discovery walks up to /tmp/X);
#   - a submodule's ".git" pointer file replaced by a repository;
#   - an uninitialized submodule given a repository, after a first run
#     removed it from .gitmodules (the index still names it);
#   - a submodule whose directory was removed, recreated with a repository;
#   - the configuration of a repository nested in the workspace edited.
. "$(dirname "$0")/../lib/libtest.sh"

command -v git >/dev/null 2>&1 || skip_all "git is not installed"
unset TMPDIR
# The user's and the system's git configuration stay out of it.
GIT_CONFIG_GLOBAL=/dev/null
GIT_CONFIG_NOSYSTEM=1
GIT_AUTHOR_NAME=cordon GIT_AUTHOR_EMAIL=cordon@example.invalid
GIT_COMMITTER_NAME=cordon GIT_COMMITTER_EMAIL=cordon@example.invalid
export GIT_CONFIG_GLOBAL GIT_CONFIG_NOSYSTEM GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL \
	GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL

# Markers go outside every writable root of workspace-write (the workspace, /tmp, $TMPDIR).
OUT=$(mktemp -d /var/tmp/cordon-gitmeta.XXXXXX) || skip_all "cannot create a directory in /var/tmp"
OUT=$(cd "$OUT" && pwd -P)
# The nested workspace of the first case lives in /tmp, which workspace-write makes writable.
NEST=$(mktemp -d /tmp/cordon-gitmeta.XXXXXX) || skip_all "cannot create a directory in /tmp"
NEST=$(cd "$NEST" && pwd -P)
trap 'chmod -R u+rwX "$OUT" "$NEST" 2>/dev/null; rm -rf "$OUT" "$NEST" "$CD_TMP"' EXIT

# sb WS CMD...: CMD in the sandbox, workspace WS.
sb() {
	sb_ws=$1
	shift
	"$CORDON" run --profile workspace-write --workspace-root "$sb_ws" --cwd "$sb_ws" -- "$@"
}

# plant DIR MARKER: the configuration of repository DIR runs `touch MARKER` (sh -c).
plant_cmd() {
	echo "git -C '$1' config core.fsmonitor 'touch $2; false'"
}

# no_marker DESC MARKER: the planted command did not run.
no_marker() {
	if [ -e "$2" ]; then
		not_ok "$1"
		diag "$2 exists: host git ran a command the sandbox planted"
	else
		ok "$1"
	fi
}

# ---- control: host git runs a planted fsmonitor ----
git init -q "$OUT/control" && git -C "$OUT/control" config core.fsmonitor "touch $OUT/control.marker; false" &&
	git -C "$OUT/control" status >/dev/null 2>&1
[ -e "$OUT/control.marker" ] || skip_all "host git does not run core.fsmonitor here ($(git --version))"
ok "control: host git runs the command a repository's core.fsmonitor names"

if ! out=$(sb "$OUT" true 2>&1); then
	skip_all "cordon run fails here: $out"
fi

# ---- a repository planted above a nested workspace ----
mkdir "$NEST/ws"
expect_fail "a repository cannot be made above a workspace nested in /tmp" \
	sb "$NEST/ws" sh -c "git init -q '$NEST' && $(plant_cmd "$NEST" "$OUT/above.marker")"
(cd "$NEST/ws" && git status >/dev/null 2>&1)
no_marker "host git status in the workspace runs nothing planted above it" "$OUT/above.marker"
check "work in the nested workspace goes on" sb "$NEST/ws" sh -c 'echo x >file && cat file'

# ---- submodules and nested repositories ----
git init -q "$OUT/upstream" && git -C "$OUT/upstream" commit -q --allow-empty -m upstream
WS=$OUT/ws
git init -q "$WS"
for s in sub unin gone; do
	git -C "$WS" -c protocol.file.allow=always submodule add -q "$OUT/upstream" "$s" ||
		skip_all "cannot add a submodule here"
done
git -C "$WS" commit -q -m top
# unin: registered but not checked out (an empty directory, no .git); gone: removed.
git -C "$WS" submodule deinit -q unin
git -C "$WS" submodule deinit -q gone
rm -rf "$WS/gone"
git init -q "$WS/vendor/nested"
assert "the workspace is set up (submodule pointer, empty directory, nested repository)" \
	test -f "$WS/sub/.git" -a -d "$WS/unin" -a ! -e "$WS/unin/.git" -a ! -e "$WS/gone" \
	-a -d "$WS/vendor/nested/.git"
# host_git DIR: what the user runs later, outside the sandbox.
host_git() {
	(cd "$1" && git status >/dev/null 2>&1)
}

expect_fail "a submodule's .git pointer cannot be replaced by a repository" \
	sb "$WS" sh -c "rm -f sub/.git && git init -q sub && $(plant_cmd "$WS/sub" "$OUT/sub.marker")"
host_git "$WS"
no_marker "host git status does not run a submodule repository planted in place of a pointer" \
	"$OUT/sub.marker"

# A first run drops the uninitialized submodule from .gitmodules (allowed: a work-tree file)...
check "a sandbox may edit .gitmodules" \
	sb "$WS" sh -c 'git config -f .gitmodules --remove-section submodule.unin'
# ...so the next run could take it for a plain directory; the index still names it.
expect_fail "an uninitialized submodule cannot be given a repository" \
	sb "$WS" sh -c "git init -q unin && $(plant_cmd "$WS/unin" "$OUT/unin.marker")"
host_git "$WS"
no_marker "nor does one planted in an uninitialized submodule run" "$OUT/unin.marker"

expect_fail "a removed submodule cannot be made anew with a repository" \
	sb "$WS" sh -c "mkdir gone && git init -q gone && $(plant_cmd "$WS/gone" "$OUT/gone.marker")"
host_git "$WS"
no_marker "nor one planted where a removed submodule was" "$OUT/gone.marker"

expect_fail "a nested repository's configuration cannot be edited" \
	sb "$WS" sh -c "$(plant_cmd "$WS/vendor/nested" "$OUT/nested.marker")"
host_git "$WS/vendor/nested"
no_marker "host git in a nested repository runs nothing planted" "$OUT/nested.marker"
expect_fail "nor its hooks" sb "$WS" sh -c 'echo "#!/bin/sh" >vendor/nested/.git/hooks/pre-commit'

# Last: on a build without the protection these change the tree.
expect_fail "a submodule directory cannot be moved away and made anew" \
	sb "$WS" sh -c "mv sub sub.old && git init -q sub && $(plant_cmd "$WS/sub" "$OUT/sub2.marker")"
expect_fail "nor the directory holding a nested repository" sb "$WS" mv vendor vendor.old
host_git "$WS"
no_marker "host git status runs nothing planted in a moved submodule's place" "$OUT/sub2.marker"

check "files in a submodule's and a nested repository's work tree stay writable" \
	sb "$WS" sh -c 'echo x >sub/new && echo y >vendor/nested/new && echo z >unin/new'
# (A whole `git status` would stop at "gone", masked by a symbolic link: see cordon-policy(5).)
check "git status works in the sandbox" sb "$WS" git status --short -- sub unin vendor
check "host git status works after the runs" git -C "$WS" status --short

done_testing
