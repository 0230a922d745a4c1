/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Sandboxed fs requests (fs.c): performed by the cordon-fs-helper program
 * (fs-helper-main.c), spawned by cd_spawn with the plan of the request's
 * sandbox context and executed by descriptor, pid 1 of its own pid
 * namespace, with an empty environment and nothing of the server's. It
 * gets the request and gives back the result over a socket (fs-ops.h).
 *
 * The helper is spawned from an intermediate process, a fork of the
 * worker thread that has the request, not from the worker itself:
 * cd_spawn is not reentrant (one static stack for its children), the
 * backends' host-side steps (the mask mount points) are made for one run
 * at a time, and a pid-1 server's orphan reaper would reap a child it does
 * not watch, while a worker's own child is one only the worker waits for
 * (through a pidfd). The intermediate waits for the helper at most
 * CD_FS_HELPER_TIMEOUT_S, then kills it.
 */

#include <stdatomic.h>
#include <sys/types.h>

#include "sandbox/linux/plan.h"
#include "serve/fs-ops.h"
#include "spawn.h"

#define CD_FS_HELPER_TIMEOUT_S 30

struct cd_fs_sandboxed {
	const struct cd_linux_plan *lp;	 /* borrowed */
	const struct cd_program *helper; /* borrowed: cordon-fs-helper */
	atomic_bool *cancel;		 /* borrowed: the job's cancel flag */
	/* The intermediate while it runs, under a lock shared with cd_fs_sandboxed_cancel. */
	pid_t pid;
	int pidfd;
};

/* Before anything else; borrows every argument for the life of sb. */
void cd_fs_sandboxed_init(struct cd_fs_sandboxed *sb, const struct cd_linux_plan *lp,
			  const struct cd_program *helper, atomic_bool *cancel);
/*
 * On a worker thread: perform q in the helper, sandboxed by sb->lp, and put
 * the result in r (r->fd -1 before). Errors of the helper itself are
 * -32603 results; a request cancelled meanwhile gives ECANCELED.
 */
void cd_fs_run_sandboxed(struct cd_fs_sandboxed *sb, const struct cd_fs_req *q,
			 struct cd_fs_res *r);
/*
 * Any thread, with *sb->cancel set first: the running helper is killed and
 * the intermediate exits; a request not begun yet is not performed.
 */
void cd_fs_sandboxed_cancel(struct cd_fs_sandboxed *sb);
