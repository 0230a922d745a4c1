/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A small pool of worker threads for work that would block the event loop
 * (the fs/... methods: a copy of GiBs, a sandboxed helper's 30 s). A job
 * runs on a worker; its completion runs on the loop's thread, woken through
 * an eventfd, in the order the jobs finished. Threads are started on
 * demand, up to the pool's size, and block every signal (the loop reads
 * them from its signalfd).
 *
 * The job owns its memory; the pool only links it. A job must not touch
 * loop state (connections, the loop) from run: everything it needs is
 * copied into it before submit, and its results are published in done.
 */

#include <stdbool.h>

struct cd_loop;
struct cd_workq;

struct cd_work {
	void (*run)(struct cd_work *w);	 /* on a worker thread */
	void (*done)(struct cd_work *w); /* on the loop thread, after run (or instead of it) */
	bool ran;			 /* run was called (false: dropped at shutdown) */
	struct cd_work *next;		 /* the pool's lists */
};

/* NULL with errno set when the eventfd cannot be made or watched. */
struct cd_workq *cd_workq_new(struct cd_loop *l, unsigned max_threads);
/* Queue w; 0, or -errno when no worker exists and none could be started. */
int cd_workq_submit(struct cd_workq *q, struct cd_work *w);
/*
 * Whether a job submitted now would start at once: a worker is idle (and
 * not promised to a queued job), or another may be started.
 */
bool cd_workq_can_start(struct cd_workq *q);
/*
 * Take w back if no worker has started it: true, and it will neither run
 * nor complete (the caller owns it again); false when it runs or ran.
 */
bool cd_workq_cancel(struct cd_workq *q, struct cd_work *w);
/*
 * Jobs submitted and not yet completed (queued, running, or finished and
 * waiting for their done): the pool's queue depth. Loop thread only; no
 * lock (the count is the loop's own). 0 for NULL.
 */
unsigned cd_workq_pending(const struct cd_workq *q);
/*
 * Stop: jobs not started are not run; wait at most timeout_ms for the
 * running ones (the caller asked them to stop first), then call every
 * done on this thread and free the pool. 0, or -ETIMEDOUT after a warning
 * naming what the jobs are ("fs"): a worker is still running its job (a
 * system call on a hung file system cannot be interrupted); the pool is
 * then left to the process's exit, never freed (its jobs' done callbacks
 * are not called, their memory is not freed). The caller must then free
 * nothing a running job may read either, up to the process's exit: a
 * worker that the file system lets go of resumes at once (cd_serve).
 */
int cd_workq_free(struct cd_workq *q, unsigned timeout_ms, const char *what);
