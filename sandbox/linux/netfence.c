/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The managed network's relay: see netfence.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/linux/netfence.h"

int cd_netfence_listen(const char **step)
{
	struct ifreq ifr;
	struct sockaddr_in a;
	int s, one = 1;

	*step = "bring lo up";
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr) < 0)) {
		int e = errno;
		close(s);
		return -e;
	}
	close(s);

	*step = "listen on the relay port";
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(CD_RELAY_PORT);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, SOMAXCONN) < 0) {
		int e = errno;
		close(s);
		return -e;
	}
	return s;
}

/* The relay's pin of a unix proxy socket (cd_relay_start): this fd, reached through /proc. */
#define PIN_FD	 4
#define PIN_PATH "/proc/self/fd/4"

int cd_relay_pin(const struct cd_proxy_endpoint *e)
{
	struct stat st, via;
	char path[32];
	int fd = open(e->path, O_PATH | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* The relay reaches it by /proc/self/fd: that must lead to this very file. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int r = 0;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISSOCK(st.st_mode))
		r = -ENOTSOCK;
	else if (stat(path, &via) < 0)
		r = -errno;
	else if (via.st_dev != st.st_dev || via.st_ino != st.st_ino)
		r = -ENOENT;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* A new socket connected to the proxy, or -1. */
static int proxy_connect(const struct cd_proxy_endpoint *e)
{
	int s, r;

	if (e->is_unix) {
		/*
		 * By the pinned inode, never the name: the sandbox may be able
		 * to rename another socket onto the name meanwhile.
		 */
		struct sockaddr_un u;
		memset(&u, 0, sizeof(u));
		u.sun_family = AF_UNIX;
		memcpy(u.sun_path, PIN_PATH, sizeof(PIN_PATH));
		s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return -1;
		do
			r = connect(s, (struct sockaddr *)&u, sizeof(u));
		while (r < 0 && errno == EINTR);
	} else {
		struct sockaddr_in a;
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_port = htons(e->port);
		memcpy(&a.sin_addr, e->addr, 4);
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return -1;
		do
			r = connect(s, (struct sockaddr *)&a, sizeof(a));
		while (r < 0 && errno == EINTR);
	}
	if (r < 0) {
		close(s);
		return -1;
	}
	return s;
}

/* Copy what one side has to the other: false when it is done (end of file or error). */
static bool pump(int from, int to, char *buf, size_t size)
{
	ssize_t n;

	do
		n = read(from, buf, size);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return false;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		off += w;
	}
	return true;
}

/* One connection: the sandbox's end c and the proxy's p, both ways until both are done. */
static void splice_both(int c, int p)
{
	static char buf[64 * 1024];
	struct pollfd fds[2] = { { .fd = c, .events = POLLIN }, { .fd = p, .events = POLLIN } };
	int open_dirs = 2;

	while (open_dirs > 0) {
		int n = poll(fds, 2, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int from = i == 0 ? c : p, to = i == 0 ? p : c;
			if (!pump(from, to, buf, sizeof(buf))) {
				if (fds[i].revents & POLLERR)
					return;
				/* Half close: the other side may still answer. */
				shutdown(to, SHUT_WR);
				fds[i].fd = -1;
				open_dirs--;
			}
		}
	}
}

static void relay_child_setup(pid_t parent)
{
	sigset_t none;

	/* Gone with its parent (the supervisor, or the relay for a connection). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(1);
	/* Not the caller's signal forwarders: a signal for the command is not for us. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/*
 * Connections relayed at once. Each is a process of the caller's, outside
 * the sandbox's cgroup and task limit: the sandbox must not be able to
 * make cordon fork without bound. Past it, connections wait in the
 * listening socket's queue until one ends.
 */
#define RELAY_MAX_CONNECTIONS 256

static __attribute__((noreturn)) void relay_main(int l, const struct cd_proxy_endpoint *e)
{
	pid_t self = getpid();
	unsigned live = 0;

	for (;;) {
		/* Reap what ended; at the cap, wait for one to. */
		for (;;) {
			int st;
			pid_t w = waitpid(-1, &st, live >= RELAY_MAX_CONNECTIONS ? 0 : WNOHANG);
			if (w > 0 && live > 0) {
				live--;
				continue;
			}
			if (w < 0 && errno == EINTR)
				continue;
			break;
		}
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				continue;
			_exit(1);
		}
		pid_t pid = fork();
		if (pid == 0) {
			relay_child_setup(self);
			close(l);
			int p = proxy_connect(e);
			/* No proxy: the sandbox's connection is closed, and that is all. */
			if (p < 0)
				_exit(0);
			splice_both(c, p);
			_exit(0);
		}
		if (pid > 0)
			live++;
		close(c);
	}
}

pid_t cd_relay_start(int listen_fd, const struct cd_proxy_endpoint *e, int pin_fd)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid != 0) {
		int err = errno;
		close(listen_fd);
		if (pin_fd >= 0)
			close(pin_fd);
		return pid < 0 ? -err : pid;
	}
	relay_child_setup(parent);
	/*
	 * Out of the terminal's process group: ^C is for the command, and
	 * the relay ends when cordon stops it (or dies).
	 */
	(void)setsid();
	/* No core dump, no ptrace by the sandbox's uid (it runs as the caller). */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* Before anything connects: a server must never see a relayed client unnamed. */
	if (prctl(PR_SET_NAME, CD_RELAY_NAME, 0, 0, 0) < 0)
		_exit(1);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	/*
	 * Only the listening socket stays open (on 3) and a unix proxy's pin
	 * (on PIN_FD): nothing of the caller's. The pin goes out of the way
	 * first, as either fd may be on 3 or 4.
	 */
	if (e->is_unix) {
		if (pin_fd < 0)
			_exit(1);
		int tmp = fcntl(pin_fd, F_DUPFD_CLOEXEC, 10);
		if (tmp < 0 || (listen_fd != 3 && dup3(listen_fd, 3, O_CLOEXEC) < 0) ||
		    dup3(tmp, PIN_FD, O_CLOEXEC) < 0)
			_exit(1);
	} else if (listen_fd != 3 && dup3(listen_fd, 3, O_CLOEXEC) < 0) {
		_exit(1);
	}
	if (syscall(SYS_close_range, PIN_FD + 1U, ~0U, 0U) < 0)
		for (int fd = PIN_FD + 1; fd < 1024; fd++)
			close(fd);
	if (!e->is_unix)
		close(PIN_FD);
	relay_main(3, e);
}

void cd_relay_stop(pid_t pid)
{
	int st;

	if (pid <= 0)
		return;
	(void)kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}
