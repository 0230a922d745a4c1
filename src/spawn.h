/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Spawning one command, sandboxed or not (the supervisor's core: `cordon
 * run`, and `cordon serve`'s processes and fs helpers).
 *
 * The child, in order: new session (setsid), PR_SET_PDEATHSIG(SIGKILL) with
 * a check that the parent is still the one that forked it, stdio set up,
 * every other fd closed on exec, each backend's apply (namespaces, caps,
 * no_new_privs, Landlock, seccomp), chdir, then exec with exactly the given
 * environment (PATH search in the child's own PATH when argv[0] has no '/').
 * With a pid namespace, the child is its init (init/init.h) and starts the
 * command itself, or executes the init program that does.
 * Any failure before exec travels to the parent over a close-on-exec
 * socket (AF_UNIX, SOCK_SEQPACKET) as {stage, errno}; the parent then
 * reports it and the exit code is CD_EXIT_SETUP (125), or CD_EXIT_NOT_FOUND
 * (127) / CD_EXIT_CANNOT_EXEC (126) when exec itself failed. When the plan
 * has a mount namespace, the child also sends an fd of it over the socket
 * right after the namespaces backend's apply (see cd_child_kill_namespace);
 * without it the spawn fails with 125.
 */

#include <stdbool.h>
#include <sys/types.h>

#include "init/init.h" /* enum cd_exit */
#include "sandbox/linux/plan.h"

/*
 * A program of cordon's own (cordon-init, cordon-fs-helper), executed by
 * descriptor: whatever the sandbox's mounts hide or replace, it is the
 * program found when the supervisor started. Sealed (cd_program_seal), the
 * descriptor is a copy in memory that nobody can change, which Landlock
 * does not govern (an internal file system); otherwise it is the file, and
 * the plan must let the sandbox read and execute it (cd_linux_opts).
 */
struct cd_program {
	int fd;	     /* O_PATH | O_CLOEXEC of the file, or a sealed memfd; -1 when none */
	char *path;  /* owned: where it was found */
	bool sealed; /* fd is a sealed copy in memory */
};

/*
 * Find the program NAME of this installation: next to the running program
 * first (a build tree, whose tests must run the programs they built;
 * cordon-ws, which lives beside them in libexec), then in CD_PKGLIBEXECDIR.
 * 0, or -errno with *reterr (malloc'ed, one line naming both places and the
 * fix). *ret is filled on success only.
 */
int cd_program_open(const char *name, struct cd_program *ret, char **reterr);
/*
 * Replace p's descriptor by a sealed copy of the program in memory (a memfd
 * that can no longer be written, grown or shrunk): a sandbox that can write
 * the file (a build tree in a workspace, a copy in /tmp) cannot change what
 * later sandboxes execute. 0, or -errno with *reterr (malloc'ed) when no
 * executable memfd can be had (vm.memfd_noexec=2, say): p is then unchanged.
 */
int cd_program_seal(struct cd_program *p, char **reterr);
/* Close and free; leaves fd -1. NULL-safe. */
void cd_program_done(struct cd_program *p);

struct cd_spawn_opts {
	char *const *argv; /* non-empty */
	const char *arg0;  /* argv[0] as the program sees it; NULL = argv[0] */
	char *const *envp; /* the exact environment */
	const char *cwd;   /* NULL = inherit */
	int stdin_fd;	   /* fd to become 0, or -1 to keep the parent's 0 */
	int stdout_fd;
	int stderr_fd;
	const struct cd_linux_plan *lp; /* NULL or !lp->sandboxed: no sandbox */
	/*
	 * When the command exits, kill its process group and every other
	 * remaining descendant before the backends' finish hooks run. Requires
	 * the caller to be a child subreaper (PR_SET_CHILD_SUBREAPER) with no
	 * children of its own besides this one: cd_child_wait reaps them all.
	 */
	bool kill_tree;
	/*
	 * stdin_fd is a terminal (a PTY slave): make it the controlling
	 * terminal of the new session (TIOCSCTTY) so the command gets job
	 * control and ^C from the terminal.
	 */
	bool tty;
	/*
	 * Execute this program (by descriptor) instead of searching for
	 * argv[0], which stays the name the program sees and messages use.
	 */
	const struct cd_program *program;
	/*
	 * With a pid namespace: the init program (cordon-init) to execute as
	 * its pid 1, which then starts the command. NULL: the child runs the
	 * init itself, as a fork of the caller. A fork keeps the caller's
	 * memory inside the sandbox (non-dumpable, but there) and copies its
	 * page tables: fine for `cordon run`, a process of the command's own;
	 * not for a server holding other sessions' data.
	 */
	const struct cd_program *init;
	/*
	 * With a pid namespace: the command is its pid 1 itself, with no init
	 * (a command that starts no other: the fs helper). It then receives
	 * no signal it does not handle, but SIGKILL from the caller.
	 */
	bool pid1;
	/*
	 * Resource limits set as the command's rlimits (soft and hard) right
	 * before its exec: only those that are rlimits exactly (open_files,
	 * file_size, core; cd_limit_rlimit). spawn-posix.c only, for the
	 * Seatbelt wrapper, which the command inherits them through; the
	 * Linux spawn takes its limits from lp and refuses these. NULL: none.
	 */
	const struct cd_limits *rlimits;
};

struct cd_child;

struct cd_spawn_error {
	int exit_code; /* 125, 126 or 127 */
	char msg[512]; /* one line: "cannot execute foo: Permission denied",
			  "landlock: restrict_self failed: Operation not permitted" */
	/*
	 * The sandbox's namespaces could not be created or set up (clone with
	 * namespace flags, or the namespaces backend in the child), although
	 * the host looked able: a container's seccomp profile, systemd's
	 * RestrictNamespaces=, user.max_*_namespaces, a /proc with masked paths.
	 */
	bool namespaces;
};

/*
 * Prepare the backends (parent), fork, apply in the child, exec. On success
 * returns 0 and *ret is the running child. On failure before or at exec,
 * returns a negative errno, fills *err, and the child (if any) has been
 * reaped. Blocks until exec succeeded or failed (the error pipe closes).
 */
int cd_spawn(const struct cd_spawn_opts *o, struct cd_child **ret, struct cd_spawn_error *err);

pid_t cd_child_pid(const struct cd_child *c);
/*
 * A pidfd for the child (pidfd_open), or -1 when unsupported. Owned by c.
 * Opened on the first call, which must come before cd_child_wait.
 */
int cd_child_pidfd(struct cd_child *c);

/*
 * Wait for the child (retrying on EINTR), run the backends' finish hooks
 * and return the exit code as cordon reports it: the status, or 128+N for
 * signal N.
 */
int cd_child_wait(struct cd_child *c);
/* Convert a waitpid status to the exit code convention. */
int cd_exit_code_from_status(int status);
/*
 * SIGKILL every process left in the sandbox's mount namespace, wherever it
 * was re-parented (a daemon that called setsid is out of the command's
 * process group and session). The child passes an fd of its namespace
 * right after the namespaces backend set it up, and the cd_child holds it
 * until the finish hooks have run: the kernel reuses a freed namespace's
 * inode number at once, so only a namespace kept alive can be named by it.
 * The sandbox cannot leave it (seccomp forbids setns, unshare and new
 * namespaces) and nothing else enters it, so the processes in it are
 * exactly what is left of the command. Scans /proc until a pass finds
 * nobody (bounded; -EBUSY then). Returns 0 at once when the child has no
 * mount namespace of its own. The run's pipes stay open: output already
 * written is still there to read.
 *
 * cd_child_wait and cd_child_free call it before the finish hooks remove
 * the mask mount points, unless kill_tree already killed the whole tree.
 * When it fails, the backends are told to abandon their host-side effects
 * (the mask directories stay, see cd_backend.abandon) and a warning is
 * logged.
 */
int cd_child_kill_namespace(struct cd_child *c);
/*
 * SIGKILL and reap every child of this process until none is left. In a
 * child subreaper that is every descendant: orphans come back to it, and a
 * killed process cannot fork any more. Blocks until then. spawn-posix.c
 * (macOS, no subreaper, no list of a process's children): the children it
 * started and not yet freed, and their process groups; each is reaped.
 */
void cd_kill_children(void);
/*
 * The limits the sandbox reached, for the caller ("killed: memory limit
 * 512 MiB reached"; limits.h: cd_limits_reason), given its exit code.
 * Ends the sandbox's cgroup first when that is not done yet (cgroup.kill,
 * then its counters are final). Returns the limit (enum cd_limit) or -1
 * with buf "" when none (or the plan had no limits).
 */
int cd_child_limit_reason(struct cd_child *c, int exit_code, char *buf, size_t size);
/* Runs finish hooks if not done yet, frees. NULL-safe. */
struct cd_child *cd_child_free(struct cd_child *c);
