/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What src/spawn.c and src/spawn-posix.c share: see spawn-common.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn-common.h"

void cd_spawn_copy_stage(char *dst, size_t size, const char *a, const char *b)
{
	size_t i = 0;
	for (; a && *a && i + 1 < size; a++)
		dst[i++] = *a;
	if (b && *b) {
		for (const char *sep = ": "; *sep && i + 1 < size; sep++)
			dst[i++] = *sep;
		for (; *b && i + 1 < size; b++)
			dst[i++] = *b;
	}
	dst[i] = '\0';
}

/*
 * The signals a supervisor may catch. exec resets caught signals to the
 * default on its own; these are reset here only so that a signal arriving
 * between the unblock below and exec does not run the parent's handler in
 * the child. A caller that catches another signal must add it here. Ignored
 * signals the caller inherited are left alone (exec keeps them, as any
 * plain exec would), which is also why this is not a loop over every
 * signal: 60 more system calls on the hot path for nothing.
 */
static const int supervisor_signals[] = { SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGCHLD,
					  SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGWINCH };

void cd_spawn_child_reset_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (size_t i = 0; i < CD_ARRAY_SIZE(supervisor_signals); i++)
		(void)sigaction(supervisor_signals[i], &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
}

static int child_dup_stdio(int fd, int target)
{
	if (fd < 0)
		return 0;
	if (fd == target) {
		/* dup2 onto itself would keep a close-on-exec flag; clear it. */
		int fl = fcntl(fd, F_GETFD);
		if (fl < 0 || fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0)
			return -errno;
		return 0;
	}
	if (dup2(fd, target) < 0)
		return -errno;
	return 0;
}

int cd_spawn_child_stdio(const struct cd_spawn_opts *o, const char **ret_stage)
{
	int r;
	*ret_stage = "stdio";
	if ((r = child_dup_stdio(o->stdin_fd, 0)) < 0 ||
	    (r = child_dup_stdio(o->stdout_fd, 1)) < 0 ||
	    (r = child_dup_stdio(o->stderr_fd, 2)) < 0)
		return r;
	*ret_stage = "controlling terminal";
	if (o->tty && ioctl(0, TIOCSCTTY, 0) < 0)
		return -errno;
	return 0;
}

const char *cd_spawn_env_path(char *const *envp)
{
	for (char *const *e = envp; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			return *e + 5;
	return CD_SPAWN_DEFAULT_PATH;
}

void cd_spawn_format_error(struct cd_spawn_error *err, const char *cmd,
			   const struct cd_child_report *r)
{
	err->exit_code = r->exit_code;
	if (r->exit_code == CD_EXIT_NOT_FOUND)
		snprintf(err->msg, sizeof(err->msg), "%s: command not found", cmd);
	else if (r->exit_code == CD_EXIT_CANNOT_EXEC)
		snprintf(err->msg, sizeof(err->msg), "%s: cannot execute: %s", cmd,
			 strerror(r->err));
	else
		snprintf(err->msg, sizeof(err->msg), "%.*s: %s", (int)sizeof(r->stage), r->stage,
			 strerror(r->err));
	/*
	 * A path that vanished or changed between the parent's look and the
	 * child's mount (a concurrent process removed a mask, say) is a race,
	 * not a host that cannot make namespaces: no plan without them.
	 */
	bool path_race = r->err == ENOENT || r->err == ESTALE;
	err->namespaces = strncmp(r->stage, "namespaces", strlen("namespaces")) == 0 && !path_race;
	if (path_race && strncmp(r->stage, "namespaces", strlen("namespaces")) == 0) {
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof(err->msg) - n,
			 " (it changed while the sandbox was set up; run again)");
	}
}

void cd_spawn_set_error(struct cd_spawn_error *err, int code, const char *fmt, ...)
{
	if (!err)
		return;
	err->exit_code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

int cd_exit_code_from_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return CD_EXIT_SIGNAL_BASE + WTERMSIG(status);
	return CD_EXIT_SETUP;
}

pid_t cd_spawn_wait_pid(pid_t pid, int *status)
{
	pid_t r;
	do
		r = waitpid(pid, status, 0);
	while (r < 0 && errno == EINTR);
	return r;
}
