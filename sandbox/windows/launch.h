/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The Windows restricted-token backend's launch (Windows-only, mingw-w64):
 * it carries out a struct cd_windows_plan (plan.h) and runs one command.
 *
 *   1. capability SIDs: random S-1-5-21-a-b-c-d strings, one per key,
 *      kept in %LOCALAPPDATA%\cordon\cap-sids (a line "key<TAB>SID"),
 *      read and extended under a file lock, so that a key keeps its SID
 *      from run to run and the ACEs stay valid (cd_win_sid_source_store);
 *   2. the ACEs: missing protected names are made (empty directories) and
 *      remembered; each ACE is added to the path's DACL unless an equal
 *      one is there (inheritable to files and directories below);
 *   3. the token: CreateRestrictedToken on this process's token with
 *      DISABLE_MAX_PRIVILEGE | LUA_TOKEN | WRITE_RESTRICTED and the plan's
 *      restricting SIDs (the logon SID taken from the token), and a default
 *      DACL granting GENERIC_ALL to the logon SID, Everyone and the
 *      capability SIDs;
 *   4. the environment: this process's, the plan's variables over it, its
 *      stub directory first on PATH (with ssh/scp stubs written there),
 *      values "/dev/null" as NUL, PAGER and GIT_PAGER more.com; sorted
 *      UTF-16 block (plan.h);
 *   5. the launch: CreateProcessAsUserW, suspended, with an explicit
 *      handle list (the three standard handles only), in a job object
 *      with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, then resumed; the command
 *      line from cd_windows_cmdline;
 *   6. after it exits: the job is closed (whatever the command started
 *      dies with it), the directories made in step 2 are removed if still
 *      empty. The ACEs stay (see plan.h).
 *
 * Any failure before the command runs refuses it (fail closed), naming
 * the call that failed.
 */

#include "sandbox/windows/plan.h"

/* The persistent capability SID store, for struct cd_windows_input.sids. */
struct cd_win_sid_source cd_win_sid_source_store(void);

/*
 * Run argv (UTF-8) in cwd (a Windows path, or NULL for ours) under wp.
 * 0 with *ret_exit the command's exit code, or -1 with *reterr (malloc'ed).
 */
int cd_windows_launch(const struct cd_windows_plan *wp, char *const *argv, const char *cwd,
		      int *ret_exit, char **reterr);
