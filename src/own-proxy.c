/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cordon run's own filtering proxy: see own-proxy.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "net/proxy.h"
#include "own-proxy.h"
#include "sandbox/linux/confine.h"
#include "serve/loop.h"
#include "serve/workq.h"
#include "shared/fd-util.h"
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

void cd_own_proxy_opts_init(struct cd_own_proxy_opts *o)
{
	*o = (struct cd_own_proxy_opts){
		.json_audit = false,
		.audit_fd = -1,
		.uid = CD_OWN_PROXY_UID,
		.gid = CD_OWN_PROXY_GID,
	};
}

static const char *outcome(int r)
{
	const char *name = r < 0 ? strerrorname_np(errno) : NULL;
	return r >= 0 ? "ok" : name ? name : "error";
}

/*
 * Test hook (CORDON_TEST_PROXY_PROBE): once confined, try what a proxy
 * taken over would try, and say what the kernel answered, in one line.
 */
static void probe_confinement(void)
{
	struct sockaddr_in lo = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char line[512];
	int fd, r;
	size_t n = 0;

#define SAY(what, res) n += (size_t)snprintf(line + n, sizeof(line) - n, " %s=%s", what, res)
	char *const argv[] = { (char *)"/bin/true", NULL };
	r = execve(argv[0], argv, argv + 1);
	SAY("execve", outcome(r));
	r = fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	SAY("open-passwd", outcome(r));
	if (fd >= 0)
		close(fd);
	r = fd = open("/etc/hosts", O_RDONLY | O_CLOEXEC);
	SAY("open-hosts", outcome(r));
	if (fd >= 0)
		close(fd);
	r = fd = open("/tmp/cordon-proxy-probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	SAY("create-tmp", outcome(r));
	if (fd >= 0)
		close(fd);
	static const struct {
		const char *what;
		int domain, type;
	} socks[] = {
		{ "socket-tcp", AF_INET, SOCK_STREAM },
		{ "socket-udp", AF_INET6, SOCK_DGRAM },
		{ "socket-raw", AF_INET, SOCK_RAW },
		{ "socket-packet", AF_PACKET, SOCK_RAW },
		{ "socket-unix", AF_UNIX, SOCK_STREAM },
		{ "socket-unix-dgram", AF_UNIX, SOCK_DGRAM },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(socks); i++) {
		r = fd = socket(socks[i].domain, socks[i].type | SOCK_CLOEXEC, 0);
		SAY(socks[i].what, outcome(r));
		if (fd >= 0)
			close(fd);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	r = fd < 0 ? fd : bind(fd, (struct sockaddr *)&lo, sizeof(lo));
	SAY("bind-tcp", outcome(r));
	if (fd >= 0)
		close(fd);
	r = (int)ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	SAY("ptrace", outcome(r));
	r = setuid(0);
	SAY("setuid-0", outcome(r));
	void *m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	SAY("mmap-exec", outcome(m == MAP_FAILED ? -1 : 0));
	if (m != MAP_FAILED)
		munmap(m, 4096);
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	SAY("fork", outcome(pid < 0 ? -1 : 0));
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
#undef SAY
	cd_log_warn("test hook CORDON_TEST_PROXY_PROBE:%s", line);
}

/*
 * The proxy's keeper, outside the confinement: it waits for the proxy to
 * exit and removes the socket and the directory (cordon may have died
 * without a word), which the proxy can no longer do (Landlock, and as root
 * another uid). It reads nothing from anyone. Never returns.
 */
static _Noreturn void keeper_main(pid_t proxy, const char *dir, const char *sock)
{
	(void)prctl(PR_SET_NAME, "cordon-pxkeeper", 0, 0, 0);
	/*
	 * It needs no descriptor: none of the caller's is held (as root, it
	 * runs unconfined), and cordon's stdout closes when cordon exits.
	 */
	(void)cd_close_fds_except(NULL, 0);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		(void)dup2(null, STDIN_FILENO);
		(void)dup2(null, STDOUT_FILENO);
		(void)dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	while (waitpid(proxy, NULL, 0) < 0 && errno == EINTR)
		;
	(void)unlink(sock);
	(void)rmdir(dir);
	_exit(0);
}

/* The proxy process: serve lfd until the pair ends. Never returns. */
static _Noreturn void proxy_main(const struct cd_netpolicy *pol, const struct cd_own_proxy_opts *po,
				 bool root, int lfd, int ctl, const char *dir, const char *sock)
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
	pid_t pid = fork();
	if (pid < 0) {
		cd_log_error("managed network: cordon's proxy cannot start: fork: %s",
			     strerror(errno));
		_exit(1);
	}
	if (pid > 0) {
		close(ctl); /* the proxy's end alone tells cordon it is gone */
		close(lfd);
		keeper_main(pid, dir, sock);
	}
	(void)prctl(PR_SET_NAME, "cordon-proxy", 0, 0, 0);
	/*
	 * Nothing of cordon's but what it serves with: the files cordon
	 * inherited from its caller are not for a process that parses what
	 * the sandbox sends, even confined.
	 */
	int keep[] = { lfd, ctl, po->audit_fd };
	int r = cd_close_fds_except(keep, CD_ARRAY_SIZE(keep));
	if (r < 0) {
		cd_log_error(
			"managed network: cordon's proxy cannot start: closing descriptors: %s",
			strerror(-r));
		_exit(1);
	}
	/* Only stderr (the audit lines): holding cordon's stdin or stdout open is not ours. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		(void)dup2(null, STDIN_FILENO);
		(void)dup2(null, STDOUT_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}

	cd_proxy_opts_init(&o);
	o.policy = pol;
	o.socks5 = pol->socks5;
	o.json_audit = po->json_audit;
	o.resolve_map = getenv("CORDON_TEST_PROXY_RESOLVE");
	struct cd_loop *l = cd_loop_new(CD_LOOP_EPOLL);
	struct cd_workq *q = l ? cd_workq_new(l, 8) : NULL;
	struct cd_proxy *p = q ? cd_proxy_new(l, q, lfd, &o) : NULL;
	struct cd_watch *w = p ? cd_loop_add_fd(l, ctl, CD_LOOP_IN, on_ctl, NULL) : NULL;
	if (!w) {
		cd_log_error("managed network: cordon's proxy cannot start: %s", strerror(errno));
		_exit(1);
	}
	/*
	 * Every socket it listens on is open and no thread runs yet (the
	 * lookups' workers start with the first lookup, and inherit this).
	 */
	struct cd_confine_opts co = {
		.drop_user = root,
		.uid = po->uid,
		.gid = po->gid,
		.read_files = cd_confine_resolver_files,
	};
	char *why = NULL;
	unsigned abi;
	if (cd_confine_self(&co, &abi, &why) < 0) {
		cd_log_error("managed network: cordon's proxy cannot confine itself: %s", why);
		_exit(1);
	}
	if (abi == 0)
		cd_log_debug("managed network: no Landlock here: cordon's proxy keeps the "
			     "file access of its user");
	if (getenv("CORDON_TEST_PROXY_PROBE"))
		probe_confinement();
	/*
	 * The audit lines' place: JSON goes to stdout (net/audit.h), text to
	 * stderr. Messages of the proxy's own follow them from here on.
	 */
	int afd = po->audit_fd >= 0 ? po->audit_fd : STDERR_FILENO;
	int to = po->json_audit ? STDOUT_FILENO : STDERR_FILENO;
	if (afd != to && dup2(afd, to) < 0) {
		cd_log_error("managed network: cordon's proxy: the audit's fd: %s",
			     strerror(errno));
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
	fflush(stdout);
	fflush(stderr);
	_exit(0);
}

static int fail(char **reterr, int e, const char *what)
{
	*reterr = cd_xasprintf("managed network: cordon's proxy: %s: %s", what, strerror(e));
	return -e;
}

int cd_own_proxy_start(const struct cd_netpolicy *pol, const struct cd_own_proxy_opts *opts,
		       struct cd_own_proxy *ret, char **reterr)
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
			proxy_main(pol, opts, geteuid() == 0, lfd, pair[1], p.dir, sa.sun_path);
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
