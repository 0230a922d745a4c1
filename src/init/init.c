/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The command's exec and the pid namespace's init (see init.h). Only the
 * system calls of init-sys.h, no allocation, no C library functions (this
 * file is also cordon-init, built without one): the few string helpers
 * are written out below.
 */
#ifndef CD_INIT_NOLIBC
#include "config.h"
#endif

#include "init/init-sys.h"
#include "init/init.h"

static size_t slen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

static void scopy(char *dst, const char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

_Noreturn void cd_init_fail(int fd, int code, int err, const char *stage, const char *step)
{
	struct cd_child_report r;
	char *p = r.stage;
	size_t room = sizeof(r.stage) - 1;

	for (size_t i = 0; i < sizeof(r); i++)
		((char *)&r)[i] = 0;
	r.kind = CD_CHILD_FAILED;
	r.exit_code = code;
	r.err = err;
	for (; stage && *stage && room; room--)
		*p++ = *stage++;
	if (step && *step) {
		for (const char *sep = ": "; *sep && room; room--)
			*p++ = *sep++;
		for (; *step && room; room--)
			*p++ = *step++;
	}
	/* One message (SOCK_SEQPACKET): all of it or nothing. */
	(void)cd_isys3(__NR_write, fd, &r, sizeof(r));
	for (;;)
		(void)cd_isys1(__NR_exit_group, code);
}

_Noreturn void cd_init_exec(const struct cd_init_args *a)
{
	long e;

	if (!a->path) {
		e = -cd_isys3(__NR_execve, a->file, a->argv, a->envp);
		cd_init_fail(a->report_fd,
			     e == ENOENT || e == ENOTDIR ? CD_EXIT_NOT_FOUND : CD_EXIT_CANNOT_EXEC,
			     (int)e, "exec", NULL);
	}

	char buf[4096];
	size_t flen = slen(a->file);
	bool eacces = false;
	long other = 0;
	for (const char *p = a->path;;) {
		const char *end = p;
		while (*end && *end != ':')
			end++;
		size_t dlen = (size_t)(end - p);
		/* An empty PATH element means the current directory (POSIX). */
		const char *dir = dlen ? p : ".";
		size_t dl = dlen ? dlen : 1;
		if (flen > 0 && dl + 1 + flen + 1 <= sizeof(buf)) {
			scopy(buf, dir, dl);
			buf[dl] = '/';
			scopy(buf + dl + 1, a->file, flen + 1);
			e = -cd_isys3(__NR_execve, buf, a->argv, a->envp);
			enum cd_exec_miss m = cd_exec_miss_of(e);
			if (m == CD_EXEC_DENIED)
				eacces = true;
			else if (m == CD_EXEC_UNRUNNABLE && !other)
				other = e;
		}
		if (!*end)
			break;
		p = end + 1;
	}
	if (other)
		cd_init_fail(a->report_fd, CD_EXIT_CANNOT_EXEC, (int)other, "exec", NULL);
	if (eacces)
		cd_init_fail(a->report_fd, CD_EXIT_CANNOT_EXEC, EACCES, "exec", NULL);
	cd_init_fail(a->report_fd, CD_EXIT_NOT_FOUND, ENOENT, "exec", NULL);
}

/*
 * The command, in the child of the init (vfork-safe: locals of its own
 * frame only, then exec or _exit). Its own process group, so that what the
 * init forwards to it cannot come back to the init; the foreground of the
 * terminal when there is one (SIGTTOU is blocked: we start in the
 * background); then the signal mask it was born with, all unblocked.
 */
static _Noreturn void init_child(const struct cd_init_args *a)
{
	long r = cd_isys2(__NR_setpgid, 0, 0);
	if (r < 0)
		cd_init_fail(a->report_fd, CD_EXIT_SETUP, (int)-r, "setpgid", NULL);
	if (a->tty) {
		int self = (int)cd_isys0(__NR_getpid);
		r = cd_isys3(__NR_ioctl, 0, TIOCSPGRP, &self);
		if (r < 0)
			cd_init_fail(a->report_fd, CD_EXIT_SETUP, (int)-r,
				     "the terminal's foreground process group", NULL);
	}
	cd_isigset none;
	cd_isig_empty(&none);
	r = cd_isys4(__NR_rt_sigprocmask, SIG_SETMASK, &none, NULL, CD_ISIGSET_SIZE);
	if (r < 0)
		cd_init_fail(a->report_fd, CD_EXIT_SETUP, (int)-r, "signal mask", NULL);
	cd_init_exec(a);
}

/* Everything but keep: fds 0..keep-1 and keep+1..; close_range where the kernel has it. */
static void close_all_but(int keep)
{
	if (keep > 0 && cd_isys3(__NR_close_range, 0, keep - 1, 0) < 0)
		for (int fd = 0; fd < keep; fd++)
			(void)cd_isys1(__NR_close, fd);
	if (cd_isys3(__NR_close_range, keep + 1, ~0U, 0) < 0)
		for (int fd = keep + 1; fd < 65536; fd++)
			(void)cd_isys1(__NR_close, fd);
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

/* The status word of the command as cordon reports it (128+N for signal N). */
static int exit_code_of(int st)
{
	return CD_WIFSIGNALED(st) ? CD_EXIT_SIGNAL_BASE + CD_WTERMSIG(st) : CD_WEXITSTATUS(st);
}

/* The init's loop without its signalfd: reap, kill the rest when cmd exits, exit. */
static _Noreturn void reap_blocking(int cmd, bool running, int code)
{
	for (;;) {
		int st = 0;
		long w = cd_isys4(__NR_wait4, -1, &st, 0, NULL);
		if (w == -EINTR)
			continue;
		if (w < 0)
			for (;;)
				(void)cd_isys1(__NR_exit_group, code);
		if (w == cmd && running) {
			code = exit_code_of(st);
			running = false;
			(void)cd_isys2(__NR_kill, -1, SIGKILL);
		}
	}
}

_Noreturn void cd_init_run(const struct cd_init_args *a)
{
	int fd = a->report_fd;
	long r;

	/* Not dumpable: the command cannot open our /proc/1/mem (see init.h). */
	r = cd_isys2(__NR_prctl, PR_SET_DUMPABLE, 0);
	if (r < 0)
		cd_init_fail(fd, CD_EXIT_SETUP, (int)-r, "pid namespace init", "PR_SET_DUMPABLE");
	/*
	 * The name that tells a cordon server its client is in a sandbox
	 * (serve/sandboxes.h): the sandboxed command cannot rename us. Best
	 * effort: the exec'ed cordon-init has it already on most kernels.
	 */
	(void)cd_isys2(__NR_prctl, PR_SET_NAME, (long)CD_INIT_PROGRAM);

	/*
	 * The forwarded signals and SIGCHLD are blocked and read from a
	 * signalfd: no handlers (nothing to write in C without a C library),
	 * and a blocked signal is never ignored, so a pid 1 receives them.
	 * SIGTTOU is blocked for the child's TIOCSPGRP.
	 */
	cd_isigset set, all;
	cd_isig_empty(&set);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		cd_isig_add(&set, forwarded[i]);
	cd_isig_add(&set, SIGCHLD);
	all = set;
	cd_isig_add(&all, SIGTTOU);
	r = cd_isys4(__NR_rt_sigprocmask, SIG_BLOCK, &all, NULL, CD_ISIGSET_SIZE);
	if (r < 0)
		cd_init_fail(fd, CD_EXIT_SETUP, (int)-r, "pid namespace init", "signal mask");
	int sfd = (int)cd_isys4(__NR_signalfd4, -1, &set, CD_ISIGSET_SIZE, SFD_CLOEXEC);
	if (sfd < 0)
		cd_init_fail(fd, CD_EXIT_SETUP, -sfd, "pid namespace init", "signalfd");

	int cmd = cd_init_spawn();
	if (cmd == 0)
		init_child(a);
	if (cmd < 0)
		cd_init_fail(fd, CD_EXIT_SETUP, cd_init_spawn_errno(cmd), "fork",
			     "the command, from the pid namespace's init");

	/*
	 * Nothing of ours stays open: the supervisor reads the report socket
	 * to its end (the command's copy closes at its exec), its client the
	 * pipes, and the rest has no use here.
	 */
	close_all_but(sfd);

	int code = CD_EXIT_SETUP;
	bool running = true;
	for (;;) {
		struct signalfd_siginfo si;
		r = cd_isys3(__NR_read, sfd, &si, sizeof(si));
		if (r == -EINTR)
			continue;
		if (r != (long)sizeof(si))
			/* Cannot happen; if it did, reap without forwarding rather than give up. */
			reap_blocking(cmd, running, code);
		if ((int)si.ssi_signo != SIGCHLD) {
			if (running && cd_isys2(__NR_kill, -cmd, si.ssi_signo) < 0)
				(void)cd_isys2(__NR_kill, cmd, si.ssi_signo);
			continue;
		}
		for (;;) {
			int st = 0;
			long w = cd_isys4(__NR_wait4, -1, &st, WNOHANG, NULL);
			if (w == -EINTR)
				continue;
			if (w == 0)
				break;
			if (w < 0) {
				/* ECHILD: nobody is left. */
				if (!running)
					for (;;)
						(void)cd_isys1(__NR_exit_group, code);
				break;
			}
			if (w == cmd && running) {
				code = exit_code_of(st);
				running = false;
				/* Everyone else in the namespace; not us. */
				(void)cd_isys2(__NR_kill, -1, SIGKILL);
			}
		}
	}
}
