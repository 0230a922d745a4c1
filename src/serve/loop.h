/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A single-threaded event loop: file descriptors, one-shot timers and
 * child processes. Two implementations behind one API: epoll + timerfd +
 * pidfd on Linux (the default), and a portable poll() loop (timers from a
 * sorted list, children from SIGCHLD through a self-pipe + waitpid) that
 * the tests also exercise (--loop=poll, or CORDON_LOOP=poll).
 *
 * Callbacks run on the loop's thread; a callback may add and remove any
 * watch, including its own. An idle loop sleeps in the kernel: no polling.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cd_loop;
struct cd_watch; /* an fd watch */
struct cd_timer;
struct cd_child_watch;

typedef enum cd_loop_events {
	CD_LOOP_IN = 1u << 0,
	CD_LOOP_OUT = 1u << 1,
	CD_LOOP_HUP = 1u << 2, /* reported only: hang-up or error on the fd */
	/*
	 * Given to cd_loop_add_fd: a bulk watch (a process's pipes, its exit).
	 * Bulk watches are served after the others, at most CD_LOOP_BULK_BATCH
	 * of their events per round, in turn: thousands of processes ending at
	 * once keep the loop busy, but a client's request waits for one batch
	 * of them, not for all.
	 */
	CD_LOOP_BULK = 1u << 3,
} cd_loop_events;

#define CD_LOOP_BULK_BATCH 64

typedef void (*cd_loop_io_fn)(struct cd_loop *l, int fd, cd_loop_events ev, void *data);
typedef void (*cd_loop_timer_fn)(struct cd_loop *l, void *data);
/* status as from waitpid; the child has been reaped. */
typedef void (*cd_loop_child_fn)(struct cd_loop *l, pid_t pid, int status, void *data);
typedef void (*cd_loop_signal_fn)(struct cd_loop *l, int signo, void *data);

enum cd_loop_kind {
	CD_LOOP_EPOLL,
	CD_LOOP_POLL,
};

/* NULL on failure (errno set). */
struct cd_loop *cd_loop_new(enum cd_loop_kind kind);
void cd_loop_free(struct cd_loop *l);
enum cd_loop_kind cd_loop_kind(const struct cd_loop *l);

/*
 * Watch fd for events (IN and/or OUT, and CD_LOOP_BULK for a bulk watch,
 * which it stays). The fd stays owned by the caller.
 */
struct cd_watch *cd_loop_add_fd(struct cd_loop *l, int fd, cd_loop_events ev, cd_loop_io_fn fn,
				void *data);
int cd_loop_mod_fd(struct cd_loop *l, struct cd_watch *w, cd_loop_events ev);
/* Safe inside any callback; the watch's callback will not be called again. */
void cd_loop_del_fd(struct cd_loop *l, struct cd_watch *w);

/* One-shot timer after ms milliseconds (monotonic). */
struct cd_timer *cd_loop_add_timer(struct cd_loop *l, uint64_t ms, cd_loop_timer_fn fn, void *data);
void cd_loop_cancel_timer(struct cd_loop *l, struct cd_timer *t);

/*
 * Call fn once when child pid exits, after reaping it. pidfd: a pidfd for
 * it, or -1 (epoll: uses it when given, else falls back to the SIGCHLD
 * path; poll: always the SIGCHLD path). The loop never reaps a pid nobody
 * watches... except that the SIGCHLD path reaps with waitpid(pid) per watch.
 */
struct cd_child_watch *cd_loop_watch_child(struct cd_loop *l, pid_t pid, int pidfd,
					   cd_loop_child_fn fn, void *data);
void cd_loop_unwatch_child(struct cd_loop *l, struct cd_child_watch *w);

/*
 * Also reap exited children that nobody watches (on SIGCHLD): what a pid-1
 * server inherits when descendants are orphaned. A watched child is still
 * reaped by its watch only, so its callback always gets its status. 0 or
 * -errno (SIGCHLD could not be watched).
 */
int cd_loop_reap_orphans(struct cd_loop *l, bool on);

#define CD_LOOP_MAX_SIGNALS 8

/*
 * Deliver these signals (at most CD_LOOP_MAX_SIGNALS; not SIGCHLD, SIGKILL
 * or SIGSTOP) to fn on the loop's thread. epoll: blocked and read from a
 * signalfd; poll: a handler writes each to a self-pipe (nothing
 * Linux-specific), except in a forked child of this process. Either way
 * each has a handler while it is watched, so the init of a pid namespace
 * is sent it at all. Other threads must keep them blocked (workq's do).
 * One loop of the process watches signals at a time (-EBUSY for another).
 * 0 or -errno, with nothing changed.
 * cd_loop_unwatch_signals, or cd_loop_free, restores the mask and the
 * handlers.
 */
int cd_loop_watch_signals(struct cd_loop *l, const int *signals, size_t n, cd_loop_signal_fn fn,
			  void *data);
void cd_loop_unwatch_signals(struct cd_loop *l);

/* Run until cd_loop_quit; returns 0 or -errno. */
int cd_loop_run(struct cd_loop *l);
void cd_loop_quit(struct cd_loop *l);
/* Monotonic milliseconds. */
uint64_t cd_loop_now_ms(void);
