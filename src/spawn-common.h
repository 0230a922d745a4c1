/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the two implementations of spawn.h share: src/spawn.c (Linux: the
 * stacked backends, clone3, a pid namespace's init) and src/spawn-posix.c
 * (a host whose sandbox is a wrapper in the argv: macOS's sandbox-exec).
 * The child-side helpers are async-signal-safe: they run between fork and
 * exec, where nothing may allocate.
 */

#include <stdarg.h>

#include "core/util.h"
#include "init/init.h"
#include "spawn.h"

/* The search path when the command's environment has no PATH. */
#define CD_SPAWN_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* The PATH of envp (what a command name is searched in), or the default. */
const char *cd_spawn_env_path(char *const *envp);

/*
 * In the child: put back the default action of every signal a supervisor
 * may catch, then unblock all signals (the caller blocked them across the
 * fork).
 */
void cd_spawn_child_reset_signals(void);
/*
 * In the child: o's descriptors become 0, 1 and 2 (each one that is >= 0),
 * and with o->tty, 0 becomes the controlling terminal. 0, or -errno with
 * *ret_stage naming the step ("stdio", "controlling terminal").
 */
int cd_spawn_child_stdio(const struct cd_spawn_opts *o, const char **ret_stage);

/* waitpid(pid, status, 0), again after EINTR: the pid, or -1 with errno. */
pid_t cd_spawn_wait_pid(pid_t pid, int *status);

/* dst = "a: b" (or "a" without b), truncated to size. */
void cd_spawn_copy_stage(char *dst, size_t size, const char *a, const char *b);
/* err (NULL-safe) = {code, the formatted message}. */
void cd_spawn_set_error(struct cd_spawn_error *err, int code, const char *fmt, ...) CD_PRINTF(3, 4);
/* err = what the child reported before exec, worded for the caller about command cmd. */
void cd_spawn_format_error(struct cd_spawn_error *err, const char *cmd,
			   const struct cd_child_report *r);
