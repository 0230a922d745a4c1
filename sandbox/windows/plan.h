/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The Windows restricted-token planner: from a bound plan (core/plan.h) to
 * what the non-elevated restricted-token backend does on a Windows host
 * (reference section 6), as data:
 *
 *  - the token: CreateRestrictedToken on the caller's token with
 *    DISABLE_MAX_PRIVILEGE | LUA_TOKEN | WRITE_RESTRICTED, and the
 *    restricting SIDs in order: the capability SIDs, the logon SID, then
 *    Everyone. WRITE_RESTRICTED checks the restricting SIDs on writes
 *    only: a write succeeds where the user may write AND an ACE grants it
 *    to a restricting SID; reads are the user's own. The token's default
 *    DACL grants GENERIC_ALL to the logon SID, Everyone and the capability
 *    SIDs (so the command's own pipes and objects work);
 *  - the capability SIDs: "readonly" when nothing is writable; otherwise
 *    one keyed by the workspace (the canonical cwd) and one per writable
 *    root. They are S-1-5-21-a-b-c-d strings that only cordon's tokens
 *    carry, persisted by the caller so that they are the same run after
 *    run (the ACEs below then stay valid and need not be rewritten);
 *  - the ACEs: per writable root an inheritable allow of read, write,
 *    execute and DELETE (not FILE_DELETE_CHILD: a protected child can then
 *    be neither removed nor renamed through its parent) to the root's SID;
 *    per narrower path under it (.git, .codex, .agents, gitdir targets,
 *    read-only and deny entries) an inheritable deny-write (the
 *    reference's rights) to every capability SID of the token; a missing
 *    protected name is created as an empty directory first (and removed
 *    after the run if still empty) so that it can carry the deny; NUL gets
 *    an allow to the capability SIDs. ACEs stay after the run: they name
 *    only SIDs no other token has, and re-applying inheritance over a big
 *    tree on every run would cost seconds;
 *  - the network: this backend has no network fence. A restricted network
 *    is refused unless the caller accepts an environment-only restriction
 *    (allow_env_network: proxy variables to a dead port, offline flags for
 *    pip, npm, cargo and git, ssh/scp stubs first on PATH, PATHEXT with
 *    .BAT and .CMD first), which is then reported as degraded;
 *  - refusals (before anything runs): reads narrower than the whole disk
 *    (deny paths, deny globs, restricted read: "Restricted read-only access
 *    requires the elevated Windows sandbox backend"), a writable "/" or
 *    unrestricted file system, the managed network, an external profile
 *    (the restriction is the caller's, and this backend has none for the
 *    network), a missing protected name whose directory is missing too.
 *
 * Pure: no OS headers (check-core-portable); the launch part
 * (CreateProcessAsUserW, the job object, the handle list) lives apart and
 * compiles only on Windows. Paths are Windows paths: planned elsewhere, a
 * POSIX path /a/b is shown as DRIVE\a\b (drive, default "C:").
 */

#include <stdbool.h>
#include <stddef.h>

#include "core/limits.h"
#include "core/plan.h"
#include "core/profile.h"

enum cd_win_sid_role {
	CD_WIN_SID_READONLY,
	CD_WIN_SID_WORKSPACE,
	CD_WIN_SID_ROOT,
	CD_WIN_SID_LOGON,
	CD_WIN_SID_EVERYONE,
};

struct cd_win_sid {
	enum cd_win_sid_role role;
	char *sid; /* "S-1-5-21-...", "S-1-1-0", or "logon" (the token's own, known at launch) */
	char *key; /* what it is keyed by (a path), or NULL */
};

enum cd_win_ace_kind {
	CD_WIN_ACE_ALLOW,
	CD_WIN_ACE_DENY_WRITE,
};

#define CD_WIN_RIGHTS_ALLOW "FILE_GENERIC_READ|FILE_GENERIC_WRITE|FILE_GENERIC_EXECUTE|DELETE"
#define CD_WIN_RIGHTS_DENY_WRITE                                             \
	"FILE_GENERIC_WRITE|FILE_WRITE_DATA|FILE_APPEND_DATA|FILE_WRITE_EA|" \
	"FILE_WRITE_ATTRIBUTES|GENERIC_WRITE|DELETE|FILE_DELETE_CHILD"

struct cd_win_ace {
	char *path; /* Windows path */
	enum cd_win_ace_kind kind;
	char *sid;
	bool create_dir; /* missing: made (empty) before the run, removed after if still empty */
	char *why;
};

struct cd_win_env {
	char *name;
	char *value;
};

struct cd_windows_plan {
	bool sandboxed; /* false: a DISABLED profile, plain CreateProcess */
	const char *token_flags;
	struct cd_win_sid *sids; /* the restricting SIDs, in token order */
	size_t n_sids;
	struct cd_win_ace *aces;
	size_t n_aces;
	struct cd_win_env *env; /* set for the command (environment-only network) */
	size_t n_env;
	char *path_prepend; /* the ssh/scp stub directory put first on PATH, or NULL */
	char **notes;	    /* NULL-terminated */
	char **degraded;    /* NULL-terminated: what the caller accepted less of */
};

/* Where capability SIDs come from: key is "readonly", "workspace:PATH" or "root:PATH". */
struct cd_win_sid_source {
	/* A malloc'ed SID string for key, the same for the same key every time; NULL on failure. */
	char *(*sid_for)(void *ctx, const char *key);
	void *ctx;
};

struct cd_windows_input {
	const struct cd_profile *profile; /* required */
	const struct cd_plan *plan;	  /* required: bound from profile */
	/* Planned off Windows: the drive POSIX paths are put on ("C:"); NULL on Windows. */
	const char *drive;
	/* %USERPROFILE% (a Windows path), for the ssh/scp stub directory. */
	const char *home;
	/* Accept a network restriction by environment only (--allow-degraded=network). */
	bool allow_env_network;
	struct cd_win_sid_source sids; /* required */
	/*
	 * The limits asked (the profile's with the command line's over them),
	 * or NULL: none. Any one is refused: this backend enforces none yet.
	 */
	const struct cd_limits *limits;
};

/*
 * Build the plan. 0, or -EINVAL / -EOPNOTSUPP (refusal) with *reterr a
 * malloc'ed one-line reason naming the fix.
 */
int cd_windows_plan_build(const struct cd_windows_input *in, struct cd_windows_plan **ret,
			  char **reterr);
struct cd_windows_plan *cd_windows_plan_free(struct cd_windows_plan *wp);

/*
 * A POSIX absolute path on drive ("C:"): "/a/b" -> "C:\a\b", "/" -> "C:\".
 * With no drive (bound on Windows), cordon's form "/C:/a/b" -> "C:\a\b".
 */
char *cd_windows_path(const char *posix, const char *drive);

/*
 * A stable stand-in SID for key when planning off Windows (explain):
 * S-1-5-21-a-b-c-d from a hash of seed and key. On Windows the SIDs are
 * random and persisted instead.
 */
char *cd_windows_sid_derive(const char *seed, const char *key);

/*
 * The command line for argv (UTF-8) that CommandLineToArgvW (and the C
 * runtime's parser) split back into exactly argv: arguments with spaces,
 * tabs or quotes, and empty ones, are quoted; backslashes are doubled only
 * before a quote. NULL when the program name holds a double quote or is
 * a batch file (.bat, .cmd: cmd.exe parses its arguments by other rules,
 * so no quoting is safe).
 */
char *cd_windows_cmdline(char *const *argv);

/*
 * Split a command line as CommandLineToArgvW does (the rules of the
 * Microsoft C runtime since 2008, for the arguments after the program
 * name, and the program name's own rule for the first). NULL-terminated,
 * malloc'ed. For tests and for checking a command line before launch.
 */
char **cd_windows_split_cmdline(const char *cmdline);

/*
 * The environment block for CreateProcessW with CREATE_UNICODE_ENVIRONMENT:
 * env (NAME=VALUE, UTF-8) sorted by name without regard to case (by the
 * upper-cased UTF-16 code units, as Windows expects), each entry UTF-16LE
 * and NUL-terminated, the block ended by one more NUL. NULL with *reterr
 * when an entry is not valid UTF-8, has no '=' or an empty name, or two
 * names differ only in case.
 */
unsigned char *cd_windows_env_block(char *const *env, size_t *ret_len, char **reterr);
