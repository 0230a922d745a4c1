/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cordon run's own filtering proxy: see own-proxy.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "net/proxy.h"
#include "own-proxy.h"
#include "serve/loop.h"
#include "serve/workq.h"
#include "shared/log.h"

/* How long cordon waits for the proxy to write its last audit lines (a fallback only). */
#define STOP_WAIT_MS 10000

static void on_ctl(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	char buf[64];
	(void)ev;
	(void)data;
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	/* End of the pair (or anything written on it): cordon is done. */
	cd_loop_quit(l);
}

/* The proxy process: serve lfd until the pair ends. Never returns. */
static _Noreturn void proxy_main(const struct cd_netpolicy *pol, int lfd, int ctl, const char *dir,
				 const char *sock)
{
	struct cd_proxy_opts o;
	sigset_t all;

	/* Out of the terminal's process group: ^C reaches the command, not us. */
	(void)setsid();
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			(void)signal(s, SIG_DFL);
	(void)signal(SIGPIPE, SIG_IGN);
	sigemptyset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, NULL);
	(void)prctl(PR_SET_NAME, "cordon-proxy", 0, 0, 0);
	/* Only stderr (the audit lines): holding cordon's stdin or stdout open is not ours. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		(void)dup2(null, STDIN_FILENO);
		(void)dup2(null, STDOUT_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}

	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	cd_proxy_opts_init(&o);
	o.policy = pol;
	o.socks5 = pol->socks5;
	o.resolve_map = getenv("CORDON_TEST_PROXY_RESOLVE");
	struct cd_loop *l = cd_loop_new(CD_LOOP_EPOLL);
	struct cd_workq *q = l ? cd_workq_new(l, 8) : NULL;
	struct cd_proxy *p = q ? cd_proxy_new(l, q, lfd, &o) : NULL;
	struct cd_watch *w = p ? cd_loop_add_fd(l, ctl, CD_LOOP_IN, on_ctl, NULL) : NULL;
	if (!w) {
		cd_log_error("managed network: cordon's proxy cannot start: %s", strerror(errno));
		_exit(1);
	}
	/* Ready: our pid tells cordon so. */
	pid_t me = getpid();
	if (write(ctl, &me, sizeof(me)) != (ssize_t)sizeof(me))
		_exit(1);
	(void)cd_loop_run(l);
	cd_loop_del_fd(l, w);
	cd_proxy_free(p);
	cd_workq_free(q, 1000, "proxy lookups");
	cd_loop_free(l);
	/* Ours to remove too: cordon may have died without a word. */
	(void)unlink(sock);
	(void)rmdir(dir);
	fflush(stdout);
	fflush(stderr);
	_exit(0);
}

static int fail(char **reterr, int e, const char *what)
{
	*reterr = cd_xasprintf("managed network: cordon's proxy: %s: %s", what, strerror(e));
	return -e;
}

int cd_own_proxy_start(const struct cd_netpolicy *pol, struct cd_own_proxy *ret, char **reterr)
{
	struct cd_own_proxy p = { .pid = 0, .ctl = -1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int pair[2] = { -1, -1 };
	int lfd = -1, e;
	const char *tmp = getenv("TMPDIR");

	*reterr = NULL;
	/* A short, absolute TMPDIR, else /tmp: the socket path must fit sun_path. */
	if (!tmp || tmp[0] != '/' || strlen(tmp) > 40)
		tmp = "/tmp";
	snprintf(p.dir, sizeof(p.dir), "%s/cordon-proxy-XXXXXX", tmp);
	if (!mkdtemp(p.dir))
		return fail(reterr, errno, "cannot make its directory");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/proxy.sock", p.dir);
	snprintf(p.endpoint, sizeof(p.endpoint), "unix:%s", sa.sun_path);

	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0) {
		e = errno;
		fail(reterr, e, "cannot listen on its socket");
		goto err;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
		e = errno;
		fail(reterr, e, "socketpair");
		goto err;
	}
	/*
	 * Twice forked, so the proxy is not our child: the sandbox's end
	 * kills every child of ours (we are its subreaper), and the proxy
	 * must outlive that long enough to write its audit lines.
	 */
	pid_t mid = fork();
	if (mid < 0) {
		e = errno;
		fail(reterr, e, "fork");
		goto err;
	}
	if (mid == 0) {
		close(pair[0]);
		pid_t pid = fork();
		if (pid == 0)
			proxy_main(pol, lfd, pair[1], p.dir, sa.sun_path);
		_exit(pid < 0 ? 1 : 0);
	}
	close(pair[1]);
	pair[1] = -1;
	close(lfd);
	lfd = -1;
	int st;
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	pid_t pid;
	ssize_t n;
	do
		n = read(pair[0], &pid, sizeof(pid));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(pid)) {
		e = n < 0 ? errno : ECHILD;
		*reterr = cd_xstrdup("managed network: cordon's proxy did not start (see above)");
		goto err;
	}
	p.pid = pid;
	p.ctl = pair[0];
	*ret = p;
	return 0;
err:
	if (lfd >= 0)
		close(lfd);
	if (pair[0] >= 0)
		close(pair[0]);
	if (pair[1] >= 0)
		close(pair[1]);
	(void)unlink(sa.sun_path);
	(void)rmdir(p.dir);
	return -e;
}

bool cd_own_proxy_stop(struct cd_own_proxy *p)
{
	bool alive = true;
	char buf[64];

	if (p->ctl < 0)
		return false;
	/* Gone already? Its end of the pair closed with it. */
	struct pollfd pf = { .fd = p->ctl, .events = POLLIN };
	if (poll(&pf, 1, 0) > 0)
		alive = false;
	(void)shutdown(p->ctl, SHUT_WR);
	/* Its end closes when it exits, audit lines written. */
	for (;;) {
		pf.revents = 0;
		int r = poll(&pf, 1, STOP_WAIT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			cd_log_warn("managed network: cordon's proxy did not stop; killing it");
			(void)kill(p->pid, SIGKILL);
			break;
		}
		ssize_t n = read(p->ctl, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
	}
	close(p->ctl);
	p->ctl = -1;
	char path[sizeof(p->dir) + 16];
	snprintf(path, sizeof(path), "%s/proxy.sock", p->dir);
	(void)unlink(path);
	(void)rmdir(p->dir);
	return alive;
}
