/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The last steps of a sandboxed spawn, after the backends have applied:
 * the exec of the command (a PATH search like execvp's, in the command's
 * own PATH), and the init of the sandbox's pid namespace (pid 1: it starts
 * the command, forwards the supervisor's signals to it, reaps orphans, and
 * when the command exits kills what is left and exits with its status).
 *
 * This code is built twice from the same source: into cordon (the init of
 * `cordon run` is a fork of cordon that calls cd_init_run once sandboxed),
 * and into the cordon-init program, which `cordon serve` executes as the
 * init instead: a fork of the server would keep the server's memory (other
 * sessions' output, its environment, tokens) in a process inside the
 * sandbox, and copy the page tables of a server with hundreds of processes
 * at every start. cordon-init is built without a C library where the
 * architecture allows (init-sys.h), so that it starts in a few dozen
 * microseconds; everything here therefore uses only the system calls of
 * init-sys.h, and no allocation.
 *
 * Failures before the command runs are reported to the supervisor on the
 * spawner's report socket (SOCK_SEQPACKET: one message per write) as a
 * struct cd_child_report, then the process exits with the report's code.
 */

#include <errno.h>
#include <stdbool.h>

/* Exit codes (the public convention: bwrap, podman, minijail). */
enum cd_exit {
	CD_EXIT_SETUP = 125,	   /* supervisor failed before exec */
	CD_EXIT_CANNOT_EXEC = 126, /* found but could not be executed */
	CD_EXIT_NOT_FOUND = 127,   /* command not found */
	CD_EXIT_SIGNAL_BASE = 128, /* 128+N: killed by signal N */
};

/* The messages on the report socket. */
enum cd_child_msg {
	CD_CHILD_MNT_NS = 1, /* with the child's mount namespace (SCM_RIGHTS) */
	CD_CHILD_FAILED = 2, /* it cannot exec the command: why, just before it exits */
	/* The managed network's relay port, listening in the sandbox's namespace (SCM_RIGHTS). */
	CD_CHILD_RELAY = 3,
};

struct cd_child_report {
	int kind; /* enum cd_child_msg */
	int exit_code;
	int err; /* errno */
	char stage[64];
};

struct cd_init_args {
	char *const *argv; /* the command's, as it sees it (argv[0] possibly substituted) */
	char *const *envp; /* its exact environment */
	const char *file;  /* what to execute, or to search for in path */
	const char *path;  /* PATH for the search; NULL when file contains a '/' */
	int report_fd;	   /* close-on-exec */
	/*
	 * fd 0 is the session's controlling terminal (a cordon serve tty
	 * process): the command's process group becomes its foreground group,
	 * so that job control and ^C reach the command.
	 */
	bool tty;
};

/*
 * The arguments of the cordon-init program (after its name):
 *   CD_INIT_MAGIC REPORT-FD FLAGS FILE PATH ARGV0 [ARG...]
 * FLAGS is "-" or letters: 't' for tty, 'p' when PATH is searched (else
 * PATH is "-" and ignored). The environment is the command's.
 */
#define CD_INIT_MAGIC	"cordon-init/1"
#define CD_INIT_ARGS	6 /* argv entries before the command's argv[0] */
#define CD_INIT_PROGRAM "cordon-init"

/*
 * Report a failure on fd (stage and step joined by ": ", either may be
 * NULL) and _exit(code). Async-signal-safe; never returns.
 */
_Noreturn void cd_init_fail(int fd, int code, int err, const char *stage, const char *step);

/*
 * Exec the command: a->file itself when a->path is NULL, else the first
 * match in a->path (an empty element is the current directory), skipping
 * the errors execvp skips. When nothing could be executed: reports 127
 * (not found) or 126 (found, not executable; EACCES on the way counts as
 * found) and exits with it. Never returns.
 */
_Noreturn void cd_init_exec(const struct cd_init_args *a);

/*
 * How a PATH search counts a failed execve of one candidate (cd_init_exec,
 * and src/spawn-posix.c's search on macOS): nothing runnable by that name
 * there (look on), one there that may not be executed (look on; EACCES if
 * nothing else is found), or one there that cannot be executed (the first
 * such error is reported).
 */
enum cd_exec_miss {
	CD_EXEC_ABSENT,
	CD_EXEC_DENIED,
	CD_EXEC_UNRUNNABLE, /* ENOEXEC, ETXTBSY, E2BIG, ... */
};

static inline enum cd_exec_miss cd_exec_miss_of(long e)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
	case ENAMETOOLONG:
	case ELOOP:
	case ESTALE:
	case ENODEV:
	case ETIMEDOUT:
		return CD_EXEC_ABSENT;
	case EACCES:
		return CD_EXEC_DENIED;
	default:
		return CD_EXEC_UNRUNNABLE;
	}
}

/*
 * Run as the init of a new pid namespace, already sandboxed like the
 * command (everything below happens under the same Landlock domain and
 * seccomp filter). The command becomes pid 2, leading a process group of
 * its own in our session; we are made non-dumpable (the command, same uid
 * and domain, cannot read or write our memory through /proc/1/mem), keep
 * only a signalfd open, and:
 *  - SIGINT, SIGTERM, SIGHUP and SIGQUIT (the signals a supervisor
 *    forwards; an init only receives signals it handles or blocks) are
 *    passed on to the command's group, or to the command alone when it
 *    left the group (timeout(1) and setsid tools do);
 *  - every child is reaped, orphans included;
 *  - when the command exits, everything else in the namespace is killed,
 *    and we exit with the command's status (128+N for signal N: an init
 *    cannot die of a signal it sends itself).
 * If we die first (the supervisor died: PR_SET_PDEATHSIG), the kernel kills
 * the whole namespace. Never returns.
 */
_Noreturn void cd_init_run(const struct cd_init_args *a);
