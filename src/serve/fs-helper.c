/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sandboxed fs requests in the cordon-fs-helper program (fs-helper.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(HAVE_SYS_PIDFD_H) && defined(__linux__)
#include <sys/pidfd.h>
#endif

#include "serve/fs-helper.h"
#include "serve/server.h"
#include "shared/fd-util.h"

/* Guards cd_fs_sandboxed.pidfd and .pid between their worker and a cancel. */
static pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * In the intermediate (see run_sandboxed): the helper to kill when the
 * server cancels the job (SIGTERM), and whether it did. Process-wide, but
 * only the intermediate, a single-threaded fork, sets them.
 */
static volatile sig_atomic_t helper_pid, helper_cancelled;

static void on_cancel(int sig)
{
	int e = errno;
	helper_cancelled = 1;
	if (helper_pid > 0)
		(void)kill(helper_pid, SIGKILL);
	errno = e;
}

/*
 * Perform q in the helper program, sandboxed by lp, and wait for its
 * result (at most CD_FS_HELPER_TIMEOUT_S: a file lease or a stuck file system
 * must not hold a worker and the connection's fs requests). Its socket is
 * its stdin and stdout, /dev/null its stderr, its environment empty.
 */
static void run_in_helper(const struct cd_linux_plan *lp, const struct cd_program *helper,
			  const struct cd_fs_req *q, struct cd_fs_res *r)
{
	int sv[2] = { -1, -1 };
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0 || cd_socketpair(AF_UNIX, SOCK_STREAM, 0, false, sv) < 0) {
		cd_fs_res_error(r, CD_RPC_INTERNAL, "fs sandbox helper: %s", strerror(errno));
		if (devnull >= 0)
			close(devnull);
		return;
	}
	static char *const helper_argv[] = { (char *)CD_FS_HELPER_PROGRAM,
					     (char *)CD_FS_HELPER_MAGIC, NULL };
	static char *const no_env[] = { NULL };
	struct cd_spawn_opts o = {
		.argv = helper_argv,
		.envp = no_env,
		.stdin_fd = sv[1],
		.stdout_fd = sv[1],
		.stderr_fd = devnull,
		.lp = lp,
		.program = helper,
		.pid1 = true,
	};
	struct cd_child *child = NULL;
	struct cd_spawn_error err;
	memset(&err, 0, sizeof(err));
	int rr = cd_spawn(&o, &child, &err);
	close(sv[1]);
	close(devnull);
	if (rr < 0) {
		close(sv[0]);
		/* The sandbox could not be set up: nothing was done. */
		cd_fs_res_error(r, CD_RPC_INTERNAL, "fs sandbox helper failed: %s", err.msg);
		return;
	}
	helper_pid = cd_child_pid(child);
	/*
	 * Not recorded in the server's registry of sandboxes (sandboxes.h):
	 * this is a fork of the server, whose registry is a copy. None is
	 * needed: the helper opens no socket, and as the first process of its
	 * pid namespace, named cordon-fs-helper, it is known for a sandbox.
	 */
	if (helper_cancelled)
		(void)kill(helper_pid, SIGKILL);
	struct timeval tv = { .tv_sec = CD_FS_HELPER_TIMEOUT_S };
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	bool timed_out = false;
	int e = cd_fs_req_send(sv[0], q);
	if (e == -EAGAIN || e == -EWOULDBLOCK)
		timed_out = true;
	bool ok = e == 0 && cd_fs_res_recv(sv[0], r, &timed_out) == 0;
	close(sv[0]);
	if (timed_out)
		(void)kill(cd_child_pid(child), SIGKILL);
	int status = cd_child_wait(child);
	helper_pid = 0;
	cd_child_free(child);
	const char *bad = ok && status == 0 ? cd_fs_res_flaw(q, r) : NULL;
	if (!ok || status != 0 || bad) {
		if (r->fd >= 0)
			close(r->fd);
		r->fd = -1;
		if (timed_out)
			cd_fs_res_error(r, CD_RPC_INTERNAL,
					"fs sandbox helper timed out after %d s",
					CD_FS_HELPER_TIMEOUT_S);
		else if (bad)
			cd_fs_res_error(r, CD_RPC_INTERNAL,
					"fs sandbox helper gave a malformed answer (%s)", bad);
		else
			cd_fs_res_error(r, CD_RPC_INTERNAL,
					"fs sandbox helper failed with status %d", status);
	}
}

/* Signal sb's intermediate, if one runs (helper_lock held). */
static void signal_intermediate(struct cd_fs_sandboxed *sb, int sig)
{
#ifdef SYS_pidfd_send_signal
	/*
	 * With a pidfd, only through it: when it fails, the intermediate is
	 * gone (and may have been reaped by the orphan reaper, its pid free
	 * for another process).
	 */
	if (sb->pidfd >= 0) {
		(void)syscall(SYS_pidfd_send_signal, sb->pidfd, sig, NULL, 0);
		return;
	}
#endif
	if (sb->pid > 0)
		(void)kill(sb->pid, sig);
}

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* Close every descriptor above lo and below hi. */
static void close_between(int lo, int hi)
{
	if (hi - lo < 2)
		return;
#if defined(HAVE_CLOSE_RANGE) && defined(__linux__)
	if (close_range((unsigned)lo + 1, hi == INT_MAX ? ~0U : (unsigned)hi - 1, 0) == 0)
		return;
#endif
	for (int fd = lo + 1; fd < hi && fd < 65536; fd++)
		(void)close(fd);
}

/*
 * The intermediate (see fs-helper.h): it runs run_in_helper and sends back
 * its result. SIGTERM (a cancel) kills the helper; the intermediate then
 * reaps it, runs the backends' finish hooks (mask mount points) and exits.
 */
static CD_NORETURN void intermediate_main(struct cd_fs_sandboxed *sb, const struct cd_fs_req *q,
					  int sock, pid_t parent)
{
	/*
	 * Nothing of the server's stays open here (a client would not see its
	 * socket end) but our socket and the helper program's descriptor.
	 */
	if (sock <= STDERR_FILENO)
		sock = fcntl(sock, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (sock < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
	    sb->helper->fd <= STDERR_FILENO)
		_exit(3);
	int lo = sock < sb->helper->fd ? sock : sb->helper->fd;
	int hi = sock < sb->helper->fd ? sb->helper->fd : sock;
	close_between(STDERR_FILENO, lo);
	close_between(lo, hi);
	close_between(hi, INT_MAX);
	/*
	 * macOS has no PR_SET_PDEATHSIG: there a server that dies leaves the
	 * intermediate to its helper's timeout (CD_FS_HELPER_TIMEOUT_S).
	 */
#ifdef __linux__
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(3);
#endif
	if (getppid() != parent)
		_exit(3);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_cancel;
	sigemptyset(&sa.sa_mask);
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigprocmask(SIG_UNBLOCK, &term, NULL) < 0)
		_exit(3);
	/* Go: the worker holds a pidfd for us now (see run_sandboxed). */
	char go = 0;
	if (read(sock, &go, 1) != 1 || !go || helper_cancelled)
		_exit(0);
	struct cd_fs_res r = { .fd = -1 };
	run_in_helper(sb->lp, sb->helper, q, &r);
	_exit(cd_fs_res_send(sock, &r) < 0 ? 3 : 0);
}

void cd_fs_sandboxed_init(struct cd_fs_sandboxed *sb, const struct cd_linux_plan *lp,
			  const struct cd_program *helper, atomic_bool *cancel)
{
	*sb = (struct cd_fs_sandboxed){
		.lp = lp,
		.helper = helper,
		.cancel = cancel,
		.pidfd = -1,
	};
}

void cd_fs_sandboxed_cancel(struct cd_fs_sandboxed *sb)
{
	pthread_mutex_lock(&helper_lock);
	signal_intermediate(sb, SIGTERM);
	pthread_mutex_unlock(&helper_lock);
}

void cd_fs_run_sandboxed(struct cd_fs_sandboxed *sb, const struct cd_fs_req *q, struct cd_fs_res *r)
{
	int sv[2];
	if (cd_socketpair(AF_UNIX, SOCK_STREAM, 0, false, sv) < 0) {
		cd_fs_res_error(r, CD_RPC_INTERNAL, "fs sandbox helper: %s", strerror(errno));
		return;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		intermediate_main(sb, q, sv[1], parent);
	int e = errno;
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		cd_fs_res_error(r, CD_RPC_INTERNAL, "fs sandbox helper: fork: %s", strerror(e));
		return;
	}
	/*
	 * Reaped through a pidfd taken before it may exit (it waits for the
	 * go byte): a pid-1 server reaps exited children it does not watch,
	 * so by pid this one might have been reaped and the pid reused.
	 */
	int pidfd = -1;
#if defined(HAVE_PIDFD_OPEN) && defined(__linux__)
	pidfd = pidfd_open(pid, 0);
#endif
	pthread_mutex_lock(&helper_lock);
	sb->pid = pid;
	sb->pidfd = pidfd;
	char go = !atomic_load(sb->cancel);
	pthread_mutex_unlock(&helper_lock);
	(void)!write(sv[0], &go, 1);
	/* A backstop over the intermediate's own timeout for its helper. */
	struct timeval tv = { .tv_sec = CD_FS_HELPER_TIMEOUT_S + 10 };
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	bool timed_out;
	int rr = cd_fs_res_recv(sv[0], r, &timed_out);
	close(sv[0]);
	pthread_mutex_lock(&helper_lock);
	if (rr < 0)
		signal_intermediate(sb, SIGKILL);
	sb->pid = 0;
	sb->pidfd = -1;
	pthread_mutex_unlock(&helper_lock);
	if (pidfd >= 0) {
		siginfo_t si;
		/* ECHILD: reaped by the loop's orphan reaper already. */
		while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
		close(pidfd);
	} else {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (rr < 0 && atomic_load(sb->cancel))
		cd_fs_res_errno(r, ECANCELED);
	else if (rr < 0 && timed_out)
		cd_fs_res_error(r, CD_RPC_INTERNAL, "fs sandbox helper timed out after %d s",
				CD_FS_HELPER_TIMEOUT_S);
	else if (rr < 0)
		cd_fs_res_error(r, CD_RPC_INTERNAL, "fs sandbox helper failed: %s", strerror(-rr));
}
