/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The server as the init of its own pid namespace.
 *
 * PR_SET_PDEATHSIG only reaches a server's direct children: a command's
 * descendants that leave its process group (`sh -c 'sleep 100 &'`, a daemon
 * that calls setsid) would outlive a SIGKILLed server. As pid 1 of a new pid
 * namespace, the server takes everything it started with it: when a
 * namespace's init dies, for whatever reason, the kernel SIGKILLs every
 * other process in it.
 *
 * The process that was started (the "outer") unshares the namespace and
 * forks the server (the "inner", pid 1 inside), then only forwards SIGTERM,
 * SIGINT and SIGHUP to it and exits with its status. The inner dies with
 * the outer through PR_SET_PDEATHSIG. getppid() cannot tell whether the
 * outer died before that was armed (it is 0 in a new pid namespace, bubblewrap
 * #633), so a pipe does: the outer holds its write end until it exits.
 *
 * getpid() in the namespace answers namespace pids, so the inner mounts a
 * /proc of the namespace over /proc, in a mount namespace of its own (host
 * mounts still propagate in, nothing propagates out): `cat /proc/$$/stat` in
 * a command must describe that command, not the host process with its
 * number. Without that mount (it failed: a warning) /proc stays the host's,
 * where only /proc/self is right.
 *
 * Without a pid namespace (an unprivileged server, which would need a user
 * namespace for one and so change what every unsandboxed command sees; or
 * --pid-namespace=never), the same pair of processes keeps the promise
 * with child subreapers instead:
 *  - the inner server is a subreaper, so every descendant that leaves its
 *    command's process group or session comes back to it; it reaps them,
 *    and when it ends, however (stdin EOF, a signal, the outer's death,
 *    which PR_SET_PDEATHSIG turns into a SIGTERM), it kills them all;
 *  - the outer is a subreaper too: if the inner is SIGKILLed, what it
 *    started comes to the outer, which kills it all before exiting.
 * Both SIGKILLed at once is the remaining hole.
 *
 * One fork at startup; nothing per process.
 */
#include "config.h"

#include <stdio.h>

#include "init/init.h"
#include "serve/server.h"
#include "shared/log.h"

#ifdef __linux__
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve/sd-daemon.h"
#include "spawn.h"

int cd_serve_host_proc = -1;
int cd_serve_notify_fd = -1;

/* The signals that end a server gracefully (server.c), forwarded by the outer. */
static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP };

static const char *unshare_reason(int e)
{
	if (e == EPERM)
		return "it needs CAP_SYS_ADMIN, which this process does not have";
	if (e == EINVAL)
		return "this kernel has no pid namespaces (CONFIG_PID_NS)";
	if (e == ENOSPC)
		return "the pid namespace nesting limit or user.max_pid_namespaces is reached";
	return "unexpected failure";
}

/* The inner: a /proc that matches its pids (see the top). */
static void mount_proc(void)
{
	const char *what = "unshare(CLONE_NEWNS)";
	if (unshare(CLONE_NEWNS) < 0)
		goto fail;
	what = "making / a slave mount";
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		goto fail;
	what = "mounting proc on /proc";
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		goto fail;
	return;
fail:
	cd_log_warn("serve: pid namespace: %s failed: %s; processes see the host's /proc, "
		    "where /proc/PID does not match their pids",
		    what, strerror(errno));
}

/* The outer's end of the notification relay (cd_serve_notify_fd), -1: none. */
struct relay {
	int sig_fd;	  /* the forwarded signals and SIGCHLD */
	int pipe_fd;	  /* the server's messages, one per packet */
	const char *addr; /* NOTIFY_SOCKET */
	bool warned;	  /* a failed send was logged */
};

/*
 * Send one message of the server's on to systemd, as the main process: 1,
 * or 0 when none waits, or -1 once the server closed its end.
 */
static int relay_one(struct relay *r)
{
	char buf[PIPE_BUF + 1];
	ssize_t n = read(r->pipe_fd, buf, sizeof(buf) - 1);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		close(r->pipe_fd);
		r->pipe_fd = -1;
		return -1;
	}
	buf[n] = '\0';
	int e = cd_sd_notify(r->addr, buf);
	if (e < 0 && !r->warned) {
		cd_log_warn("serve: cannot notify systemd (NOTIFY_SOCKET=%s): %s", r->addr,
			    strerror(-e));
		r->warned = true;
	}
	return 1;
}

/* The next signal of wait_set; with a relay, the server's messages are sent meanwhile. */
static int next_signal(const sigset_t *wait_set, struct relay *r)
{
	if (r->sig_fd < 0) {
		siginfo_t si;
		return sigwaitinfo(wait_set, &si);
	}
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = r->sig_fd, .events = POLLIN },
			{ .fd = r->pipe_fd, .events = POLLIN },
		};
		if (poll(p, r->pipe_fd >= 0 ? 2 : 1, -1) < 0)
			return -1; /* EINTR: a stop/continue */
		if (r->pipe_fd >= 0 && p[1].revents)
			(void)relay_one(r);
		if (p[0].revents) {
			struct signalfd_siginfo si;
			if (read(r->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				return (int)si.ssi_signo;
		}
	}
}

/* The outer: wait for the inner, forwarding the signals; its exit code. */
static int supervise(pid_t inner, const sigset_t *wait_set, struct relay *relay)
{
	for (;;) {
		int sig = next_signal(wait_set, relay);
		if (sig < 0)
			continue; /* EINTR: a stop/continue */
		if (sig != SIGCHLD) {
			(void)kill(inner, sig);
			continue;
		}
		int status;
		pid_t r = waitpid(inner, &status, WNOHANG);
		if (r == inner) {
			if (WIFSIGNALED(status))
				return CD_EXIT_SIGNAL_BASE + WTERMSIG(status);
			return WEXITSTATUS(status);
		}
		if (r < 0 && errno == ECHILD)
			return CD_EXIT_SETUP; /* cannot happen: nobody else reaps it */
	}
}

int cd_serve_pidns(enum cd_pidns_mode mode, const char *notify_socket, int *exit_code)
{
	bool ns = false;
	struct relay relay = { .sig_fd = -1, .pipe_fd = -1, .addr = notify_socket };
	int notify[2] = { -1, -1 };

	/* auto: root only; unprivileged servers use subreapers (see the top). */
	if (mode == CD_PIDNS_ALWAYS || (mode == CD_PIDNS_AUTO && geteuid() == 0)) {
		if (unshare(CLONE_NEWPID) == 0) {
			ns = true;
		} else {
			int e = errno;
			if (mode == CD_PIDNS_ALWAYS) {
				fprintf(stderr,
					"cordon: serve: --pid-namespace=always: cannot create a "
					"pid "
					"namespace: %s (%s); run the server as root (with "
					"CAP_SYS_ADMIN), or use --pid-namespace=auto to serve "
					"without it\n",
					strerror(e), unshare_reason(e));
				*exit_code = CD_EXIT_SETUP;
				return -1;
			}
			/* Root without CAP_SYS_ADMIN (a container), or no pid namespaces. */
			cd_log_debug("serve: no pid namespace (%s): subreapers instead",
				     strerror(e));
		}
	}
	/* Before the fork: orphans of a SIGKILLed inner must come to the outer. */
	if (!ns && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
		int e = errno;
		fprintf(stderr, "cordon: serve: cannot become a child subreaper: %s\n",
			strerror(e));
		*exit_code = CD_EXIT_SETUP;
		return -1;
	}

	/*
	 * Block the forwarded signals (and SIGCHLD for the outer's wait) before
	 * the fork: the inner keeps them blocked, so one forwarded before the
	 * server watches them stays pending instead of being dropped (pid 1
	 * drops signals it has no handler for). A SIGHUP inherited as ignored
	 * (nohup) stays ignored: not forwarded, and not handled by the server.
	 */
	sigset_t wait_set, old;
	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIGCHLD);
	for (size_t i = 0; i < CD_ARRAY_SIZE(forwarded); i++)
		if (forwarded[i] != SIGHUP || !cd_serve_sighup_ignored())
			sigaddset(&wait_set, forwarded[i]);
	sigprocmask(SIG_BLOCK, &wait_set, &old);
	/* An inherited SIGCHLD SIG_IGN would auto-reap the inner. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	(void)sigaction(SIGCHLD, &dfl, NULL);

	int alive[2];
	if (pipe2(alive, O_CLOEXEC) < 0) {
		int e = errno;
		fprintf(stderr, "cordon: serve: cannot create a pipe: %s\n", strerror(e));
		*exit_code = CD_EXIT_SETUP;
		return -1;
	}
	/*
	 * The server's sd_notify messages go through us: systemd accepts them
	 * from its main process, which is us (and a command of the server's
	 * cannot notify in our name). A packet pipe keeps them apart.
	 */
	if (notify_socket) {
		relay.sig_fd = signalfd(-1, &wait_set, SFD_CLOEXEC);
		if (relay.sig_fd < 0 || pipe2(notify, O_CLOEXEC | O_DIRECT) < 0) {
			int e = errno;
			fprintf(stderr,
				"cordon: serve: cannot relay notifications to systemd: %s\n",
				strerror(e));
			if (relay.sig_fd >= 0)
				close(relay.sig_fd);
			close(alive[0]);
			close(alive[1]);
			*exit_code = CD_EXIT_SETUP;
			return -1;
		}
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		/* The namespace is ours for children now: serving without it is not possible. */
		int e = errno;
		fprintf(stderr, "cordon: serve: cannot start the server: %s\n", strerror(e));
		close(alive[0]);
		close(alive[1]);
		*exit_code = CD_EXIT_SETUP;
		return -1;
	}
	if (pid == 0) {
		close(alive[1]);
		if (relay.sig_fd >= 0) {
			close(relay.sig_fd);
			close(notify[0]);
			cd_serve_notify_fd = notify[1];
		}
		/*
		 * In a namespace the kernel kills what we started when we die;
		 * without one we must live to kill it ourselves: SIGTERM, which
		 * the server handles by ending everything.
		 */
		if (prctl(PR_SET_PDEATHSIG, ns ? SIGKILL : SIGTERM, 0, 0, 0) < 0)
			_exit(CD_EXIT_SETUP);
		/* The outer may have died before PDEATHSIG was armed: its write end is gone. */
		struct pollfd p = { .fd = alive[0], .events = POLLIN };
		int n;
		do
			n = poll(&p, 1, 0);
		while (n < 0 && errno == EINTR);
		if (n != 0)
			_exit(CD_EXIT_SETUP);
		close(alive[0]);
		if (!ns && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
			_exit(CD_EXIT_SETUP);
		/*
		 * Out of the outer's process group, so that one SIGKILL to that
		 * group (a runner's killpg on timeout) does not take both
		 * subreapers at once: the outer dies, we get SIGTERM and end
		 * everything. Not when stdin is a terminal: a background group
		 * reading it would be stopped (SIGTTIN); a human at a terminal
		 * sends ^C to the outer, which forwards it.
		 */
		if (!ns && !isatty(STDIN_FILENO))
			(void)setpgid(0, 0);
		/* SIGCHLD back as it was; the forwarded signals stay blocked until watched. */
		sigset_t keep = old;
		for (size_t i = 0; i < CD_ARRAY_SIZE(forwarded); i++)
			if (sigismember(&wait_set, forwarded[i]))
				sigaddset(&keep, forwarded[i]);
		sigprocmask(SIG_SETMASK, &keep, NULL);
		if (ns) {
			/*
			 * The host's /proc, before ours hides it: clients of the
			 * server live out there, and whether one is a sandboxed
			 * process is read from it (sandboxes.h). Close-on-exec.
			 */
			cd_serve_host_proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
			mount_proc();
			cd_log_debug("serve: running as pid 1 of a new pid namespace");
		} else {
			cd_log_debug("serve: running as a child subreaper under a subreaper");
		}
		return 0;
	}
	close(alive[0]);
	if (relay.sig_fd >= 0) {
		close(notify[1]);
		relay.pipe_fd = notify[0];
	}
	/* alive[1] stays open (close-on-exec) until this process exits. */
	int code = supervise(pid, &wait_set, &relay);
	/* What the server said before it ended (STOPPING=1) may still wait in the pipe. */
	if (relay.pipe_fd >= 0 && fcntl(relay.pipe_fd, F_SETFL, O_NONBLOCK) == 0)
		while (relay_one(&relay) > 0)
			;
	if (relay.pipe_fd >= 0)
		close(relay.pipe_fd);
	/* Whatever the inner left (it was SIGKILLed, say) came to us: it goes too. */
	if (!ns)
		cd_kill_children();
	/*
	 * No atexit work here: it would belong to the server, and some cannot
	 * work (a sanitizer's leak check forks, and a fork after unshare() lands
	 * in the namespace whose init is gone: ENOMEM).
	 */
	fflush(NULL);
	_exit(code);
}

#else /* !__linux__ */

/*
 * macOS has neither pid namespaces nor child subreapers: a descendant of a
 * command that leaves its process group (a daemon that called setsid) is
 * out of the server's reach and outlives it. auto and never serve as they
 * are; always is refused.
 */
int cd_serve_host_proc = -1;
int cd_serve_notify_fd = -1;

int cd_serve_pidns(enum cd_pidns_mode mode, const char *notify_socket, int *exit_code)
{
	(void)notify_socket;
	if (mode != CD_PIDNS_ALWAYS) {
		cd_log_debug("serve: no pid namespace on this host: what leaves a command's "
			     "process group is not ended with the server");
		return 0;
	}
	fprintf(stderr, "cordon: serve: --pid-namespace=always: this host has no pid namespaces "
			"(they are Linux's); use --pid-namespace=auto or never\n");
	*exit_code = CD_EXIT_SETUP;
	return -1;
}
#endif
