/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#ifdef __APPLE__
#include <sys/ucred.h> /* struct xucred */
#endif
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "own-proxy.h"
#include "serve/metrics.h"
#include "serve/peer.h"
#include "serve/sandboxes.h"
#include "serve/server.h"
#include "shared/fd-util.h"
#include "shared/log.h"

/*
 * The listeners of `cordon serve --listen ws://IP:PORT | unix:PATH`.
 *
 * ws: a TCP socket; the bound URL (port 0 picks one) is the first line on
 * stdout, which is how harnesses find the server (reference 1.2). On a
 * loopback address without a token every local user could connect, and
 * loopback is no boundary between users: there the owner of each peer's
 * socket is looked up as soon as it is accepted (peer.c), and a peer that
 * is not our uid (nor admitted by --allow-local-group) or whose owner
 * cannot be told is answered 403 when its request comes (ws.c), whatever
 * it asked but /readyz. --allow-local-users admits every uid (and looks
 * peers up only for the rule that follows). Our own uid is what our
 * sandboxed processes run as: while one of them could open a TCP socket, a
 * peer of our uid is admitted only once the process holding its socket is
 * found outside every sandbox (sandboxes.h), a look that runs off the loop
 * while the connection waits in its handshake (admit.c).
 *
 * unix: the socket is created mode 0600 (0660 with --unix-group) in a
 * directory that belongs to us and that nobody else can write to, so that
 * nobody can swap the socket for their own or create it first. The file
 * mode is only the first gate: every accepted peer's credentials
 * (SO_PEERCRED) must be our uid, or a member of the configured group, and
 * a peer of our uid must not be a process inside a sandbox (sandboxes.h).
 * Our sandboxes do not even see the socket: their plans mask its path
 * (cd_server_hidden_check). A socket file left behind by a server that died is
 * replaced; one that a live server still answers on is not.
 */

/* The kernel caps it at net.core.somaxconn (4096 by default). */
#define BACKLOG_MIN 128
#define BACKLOG_MAX 65535
/* Out of descriptors: listen again after this long (or when a connection ends). */
#define FD_RETRY_MS 250
/* ... and say so at most this often. */
#define FD_LOG_MS 10000

static struct stat unix_st; /* the socket we bound: removed at exit only if still it */

/* "IP:PORT", or "[IPv6]:PORT", of an inet address. */
static void format_addr(const struct sockaddr_storage *ss, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, size, "?");
	}
}

static bool in_group(int fd, gid_t want, gid_t primary)
{
	bool found = false;

	if (primary == want)
		return true;
		/* The peer's supplementary groups, as they were when it connected. */
#ifdef __linux__
	socklen_t len = NGROUPS_MAX * sizeof(gid_t);
	gid_t *groups = cd_xmalloc(len);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
		for (size_t i = 0; i < len / sizeof(gid_t) && !found; i++)
			found = groups[i] == want;
	free(groups);
#else /* macOS: the first 16 of them (struct xucred) */
	struct xucred xc;
	socklen_t len = sizeof(xc);
	if (getsockopt(fd, SOL_LOCAL, LOCAL_PEERCRED, &xc, &len) == 0 &&
	    xc.cr_version == XUCRED_VERSION)
		for (int i = 0; i < xc.cr_ngroups && i < (int)CD_ARRAY_SIZE(xc.cr_groups) && !found;
		     i++)
			found = xc.cr_groups[i] == want;
#endif
	return found;
}

/*
 * Whether the peer of an accepted unix connection may talk to us; peer set
 * for logs, and why (why_size bytes) when not. Our uid is admitted, or a
 * member of --unix-group, unless the process is inside a sandbox (ours,
 * or another cordon's): it runs as our uid, and admitted it could start
 * an unsandboxed process (sandboxes.h).
 */
static bool unix_peer_allowed(struct cd_server *s, int fd, char *peer, size_t size, char *why,
			      size_t why_size)
{
	struct cd_peer_cred cr;
	int r = cd_peer_cred(fd, &cr);

	if (r < 0) {
		snprintf(peer, size, "unknown peer");
		snprintf(why, why_size, "its credentials cannot be read: %s", strerror(-r));
		return false;
	}
	snprintf(peer, size, "pid %d uid %u", (int)cr.pid, (unsigned)cr.uid);
	if (cr.uid != geteuid()) {
		if (s->opts.unix_group_set && in_group(fd, s->opts.unix_group, cr.gid))
			return true; /* not our uid: no sandbox of ours */
		snprintf(why, why_size, "not our uid%s",
			 s->opts.unix_group_set ? " nor in --unix-group" : "");
		return false;
	}
	char where[256];
	enum cd_peer_verdict v = cd_sandboxes_judge_unix(fd, where, sizeof(where));
	if (v == CD_PEER_OUTSIDE)
		return true;
	snprintf(why, why_size, "%s: %s",
		 v == CD_PEER_SANDBOXED ? "a sandboxed process"
					: "cannot tell whether it is a sandboxed process",
		 where);
	return false;
}

/*
 * Whether a loopback TCP peer whose owner may talk to us (r, uid: what
 * cd_peer_tcp_owner returned) must be looked for inside the sandboxes
 * (cd_admit_tcp, off the loop), or why not, into refused. Only while a
 * sandbox of ours can open a TCP socket (sandboxes.h), and only for our
 * uid (a sandbox runs as us).
 */
static bool judge_sandbox(int r, uid_t uid, char *refused, size_t size)
{
	if (!cd_sandboxes_tcp_exposed())
		return false;
	if (r < 0) {
		snprintf(refused, size,
			 "cannot tell whether the client is a sandboxed process: the owner of the "
			 "connecting socket cannot be determined: %s",
			 cd_peer_strerror(r));
		return false;
	}
	/*
	 * A sandbox runs as us; so does its networkProxy's proxy, but as
	 * nobody when we are root (cmd-proxy.c): what it connects is the
	 * sandbox's too (sandboxes.c tells it by its name).
	 */
	return uid == geteuid() || (geteuid() == 0 && uid == CD_OWN_PROXY_UID);
}

/*
 * Whether the owner of a loopback TCP peer may talk to us (r: what
 * cd_peer_tcp_owner returned); if not, why, into refused (empty: it may),
 * for the 403 its request gets (ws.c). Our uid is admitted (the unix
 * socket's SO_PEERCRED rule), and so are the members of
 * --allow-local-group. Root is not special: it can become our user anyway,
 * but a root-owned service steered into connecting here must not run
 * commands as us.
 */
static void judge_owner(struct cd_server *s, int r, uid_t uid, char *refused, size_t size)
{
	refused[0] = '\0';
	if (r < 0) {
		snprintf(refused, size,
			 "the owner of the connecting socket cannot be determined: %s",
			 cd_peer_strerror(r));
		return;
	}
	if (uid == geteuid())
		return;
	if (s->opts.allow_local_group_set) {
		int g = cd_peer_uid_in_group(uid, s->opts.allow_local_group);
		if (g > 0)
			return;
		if (g < 0)
			snprintf(refused, size,
				 "cannot tell whether uid %u is in --allow-local-group: %s",
				 (unsigned)uid, strerror(-g));
		else
			snprintf(refused, size,
				 "uid %u is neither the server's uid (%u) nor in its "
				 "--allow-local-group",
				 (unsigned)uid, (unsigned)geteuid());
		return;
	}
	snprintf(refused, size,
		 "uid %u is not the server's uid (%u): on loopback only the server's own user is "
		 "admitted (see --allow-local-users, --allow-local-group)",
		 (unsigned)uid, (unsigned)geteuid());
}

/* Read and drop what the peer has sent so far (a close with unread data resets the connection). */
static void drain(int fd)
{
	char buf[4096];
	for (int i = 0; i < 4 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; i++)
		;
}

/*
 * Answer a connection that will not be served, at once, and close it.
 * ws: a plain HTTP answer that a client library can show (status, and why
 * in the body); what the request sent so far is read first, so that the
 * close does not reset the connection before the answer is read (a request
 * that comes later still may). unix: just the close.
 */
static void refuse_now(struct cd_server *s, int fd, const char *status, const char *why)
{
	char buf[1024];
	if (s->opts.listen == CD_LISTEN_WS) {
		drain(fd);
		int n = snprintf(buf, sizeof(buf),
				 "HTTP/1.1 %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
				 "content-length: %zu\r\nconnection: close\r\n\r\n%s",
				 status, strlen(why), why);
		if (n > 0 && (size_t)n < sizeof(buf))
			(void)send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)shutdown(fd, SHUT_WR);
		drain(fd);
	}
	close(fd);
}

/*
 * Whether n more descriptors can be had now (each is tried and given
 * back): a connection is admitted only with room for its own, the lookups
 * that judge its peer and its first requests.
 */
static bool fds_to_spare(int lfd, int n)
{
	int fds[16];
	int k = 0;
	bool ok = true;
	for (; k < n && k < (int)CD_ARRAY_SIZE(fds); k++) {
		fds[k] = fcntl(lfd, F_DUPFD_CLOEXEC, 3);
		if (fds[k] < 0) {
			ok = false;
			break;
		}
	}
	while (k-- > 0)
		close(fds[k]);
	return ok;
}

/* A connection refused for --max-connections: said at most once per FD_LOG_MS, with a count. */
static void note_busy(struct cd_server *s)
{
	uint64_t now = cd_loop_now_ms();
	s->busy_refused++;
	cd_metric_refusal(CD_REFUSAL_MAX_CONNECTIONS);
	if (s->busy_logged_at && now - s->busy_logged_at < FD_LOG_MS)
		return;
	s->busy_logged_at = now;
	cd_log_warn("serve: refusing connections: %u connections already (raise "
		    "--max-connections); %lu refused so far",
		    s->opts.max_connections, s->busy_refused);
}

/*
 * WebSocket connections still in their HTTP handshake do not count against
 * --max-connections (who never authenticates must not take the slots of
 * those who do), but at most --max-connections + SPARE_HANDSHAKES of them
 * wait at once: a burst of up to --max-connections connects is served
 * whole, and past the limit a client is answered 503 (when it upgrades,
 * ws.c, or at once when even the handshakes are full). Nobody's handshake
 * is pushed out for a newcomer: one that is not complete within
 * CD_SERVE_HANDSHAKE_MS is closed (ws.c), so what idle sockets can hold up
 * is bounded by time. Peers known at accept to be refused (past the
 * limits: 503; their owner, listen_ws: 403) wait apart: at most
 * MAX_REFUSED of them wait for their request to be answered, and past
 * that a new one is answered at once (its request possibly unread: the
 * client may see the connection reset instead). So other local users
 * cannot crowd out the server's own.
 */
#define SPARE_HANDSHAKES 64
#define MAX_REFUSED	 256
/* Descriptors a new connection must leave free (fds_to_spare). */
#define FD_HEADROOM 8

void cd_listen_handshake_done(struct cd_conn *c)
{
	struct cd_server *s = c->server;
	if (c->handshake == CD_HANDSHAKE_ADMITTED)
		s->n_handshakes--;
	else if (c->handshake == CD_HANDSHAKE_REFUSED)
		s->n_refused_handshakes--;
	c->handshake = CD_HANDSHAKE_NONE;
}

unsigned cd_listen_established(const struct cd_server *s)
{
	return s->n_live - s->n_handshakes - s->n_refused_handshakes;
}

static void on_fd_retry(struct cd_loop *l, void *data);

/* Listen again (a descriptor was freed, or FD_RETRY_MS passed). */
void cd_listen_resume(struct cd_server *s)
{
	if (!s->accept_paused || s->listen_fd < 0 || s->stopping)
		return;
	if (s->fd_retry) {
		cd_loop_cancel_timer(s->loop, s->fd_retry);
		s->fd_retry = NULL;
	}
	s->accept_paused = false;
	(void)cd_loop_mod_fd(s->loop, s->listen_watch, CD_LOOP_IN);
}

static void on_fd_retry(struct cd_loop *l, void *data)
{
	struct cd_server *s = data;
	s->fd_retry = NULL;
	cd_listen_resume(s);
}

static int open_reserve(void)
{
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/*
 * accept() failed for want of a descriptor (EMFILE, ENFILE). Left alone
 * the listener stays readable and the loop would spin on it. Instead the
 * connections waiting are answered: the reserve descriptor is given up for
 * each in turn, so that it can be accepted and told why it is refused
 * (ws: 503, "out of file descriptors"; unix: closed at once). Then the
 * listener is not watched until a connection of ours ends or FD_RETRY_MS
 * passed. Logged at most once per FD_LOG_MS, with a count.
 */
static void out_of_descriptors(struct cd_server *s, int lfd, int e)
{
	char why[256];
	snprintf(why, sizeof(why),
		 "out of file descriptors: %s (the server's limit: %llu open files)\n",
		 e == ENFILE ? "the system's file table is full" : "the server is near its limit",
		 (unsigned long long)s->nofile_limit);
	for (;;) {
		if (s->reserve_fd < 0 && (s->reserve_fd = open_reserve()) < 0)
			break;
		close(s->reserve_fd);
		int fd = cd_accept_nonblock(lfd, NULL, NULL);
		int ae = errno;
		/* Taken back at once: its slot is what answers the next one. */
		s->reserve_fd = fd < 0 ? open_reserve() : -1;
		if (fd < 0) {
			if (ae == EINTR || ae == ECONNABORTED)
				continue;
			break;
		}
		refuse_now(s, fd, "503 Service Unavailable", why);
		s->fd_refused++;
		cd_metric_refusal(CD_REFUSAL_DESCRIPTORS);
	}
	s->fd_shortages++;
	uint64_t now = cd_loop_now_ms();
	if (!s->fd_logged_at || now - s->fd_logged_at >= FD_LOG_MS) {
		cd_log_warn("serve: accept: %s: %s (limit %llu): not accepting until one is freed; "
			    "%lu connection(s) refused so far. Raise the limit (ulimit -n, "
			    "LimitNOFILE=) or lower --max-connections",
			    strerror(e),
			    e == ENFILE ? "the system's file table is full"
					: "out of file descriptors",
			    (unsigned long long)s->nofile_limit, s->fd_refused);
		s->fd_logged_at = now;
	}
	if (!s->accept_paused) {
		s->accept_paused = true;
		(void)cd_loop_mod_fd(s->loop, s->listen_watch, 0);
	}
	if (!s->fd_retry)
		s->fd_retry = cd_loop_add_timer(s->loop, FD_RETRY_MS, on_fd_retry, s);
}

static void on_accept(struct cd_loop *l, int lfd, cd_loop_events ev, void *data)
{
	struct cd_server *s = data;
	bool ws = s->opts.listen == CD_LISTEN_WS;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = cd_accept_nonblock(lfd, (struct sockaddr *)&ss, &sl);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				out_of_descriptors(s, lfd, errno);
				return;
			}
			if (errno != EAGAIN)
				cd_log_warn("serve: accept: %s", strerror(errno));
			return;
		}
		if (s->stopping) {
			close(fd);
			continue;
		}
		if (!fds_to_spare(lfd, FD_HEADROOM)) {
			/* This one is answered; the rest wait until descriptors are freed. */
			char why[200];
			snprintf(why, sizeof(why),
				 "out of file descriptors: the server is near its limit (%llu open "
				 "files)\n",
				 (unsigned long long)s->nofile_limit);
			refuse_now(s, fd, "503 Service Unavailable", why);
			s->fd_refused++;
			cd_metric_refusal(CD_REFUSAL_DESCRIPTORS);
			out_of_descriptors(s, lfd, EMFILE);
			return;
		}
		bool busy = cd_listen_established(s) >= s->opts.max_connections ||
			    s->n_handshakes >= s->opts.max_connections + SPARE_HANDSHAKES;
		if (busy && (!ws || s->n_refused_handshakes >= MAX_REFUSED)) {
			note_busy(s);
			refuse_now(s, fd, "503 Service Unavailable",
				   "too many connections: raise --max-connections\n");
			continue;
		}
		char peer[80], why[400];
		if (!ws && !unix_peer_allowed(s, fd, peer, sizeof(peer), why, sizeof(why))) {
			cd_log_warn("serve: refusing a unix socket connection from %s: %s", peer,
				    why);
			cd_metric_refusal(CD_REFUSAL_PEER);
			close(fd);
			continue;
		}
		/* At once: the longer we wait, the likelier the peer is gone (then: refused). */
		char refused[sizeof(((struct cd_conn *)NULL)->refused)] = "";
		uid_t owner = 0;
		uint64_t inode = 0;
		int owner_r = 1;
		bool look = false;
		if (busy) {
			note_busy(s);
			snprintf(refused, sizeof(refused),
				 "too many connections (%u): raise --max-connections",
				 s->opts.max_connections);
		} else if (ws && s->opts.check_peer_sandbox &&
			   (s->opts.check_peer_owner || cd_sandboxes_tcp_exposed())) {
			owner_r = cd_peer_tcp_owner(fd, &owner, &inode);
			if (s->opts.check_peer_owner)
				judge_owner(s, owner_r, owner, refused, sizeof(refused));
			if (!refused[0])
				look = judge_sandbox(owner_r, owner, refused, sizeof(refused));
		}
		if (refused[0] && s->n_refused_handshakes >= MAX_REFUSED) {
			cd_log_warn("serve: refusing a connection at once: %s", refused);
			cd_metric_refusal(CD_REFUSAL_PEER);
			char body[sizeof(refused) + 1];
			snprintf(body, sizeof(body), "%s\n", refused);
			refuse_now(s, fd, "403 Forbidden", body);
			continue;
		}
		int out = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (out < 0) {
			int e = errno;
			if (e == EMFILE || e == ENFILE) {
				refuse_now(s, fd, "503 Service Unavailable",
					   "out of file descriptors\n");
				s->fd_refused++;
				cd_metric_refusal(CD_REFUSAL_DESCRIPTORS);
				out_of_descriptors(s, lfd, e);
				return;
			}
			cd_log_warn("serve: refusing a connection: %s", strerror(e));
			close(fd);
			continue;
		}
		if (ws) {
			int one = 1;
			/* Small messages (a reply, one notification) must not wait for Nagle. */
			(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		}
		struct cd_conn *c = cd_conn_new(s, ws ? CD_CONN_WS : CD_CONN_UNIX, fd, out);
		if (ws) {
			format_addr(&ss, c->ws_addr, sizeof(c->ws_addr));
			snprintf(c->peer, sizeof(c->peer), "%s", c->ws_addr);
		} else
			snprintf(c->peer, sizeof(c->peer), "%s", peer);
		if (owner_r == 0) {
			size_t n = strlen(c->peer);
			snprintf(c->peer + n, sizeof(c->peer) - n, " uid %u", (unsigned)owner);
		}
		memcpy(c->refused, refused, sizeof(refused));
		c->refused_busy = busy;
		if (ws) {
			c->handshake = refused[0] ? CD_HANDSHAKE_REFUSED : CD_HANDSHAKE_ADMITTED;
			if (refused[0])
				s->n_refused_handshakes++;
			else
				s->n_handshakes++;
		}
		cd_log_debug("serve: connection %lu from %s", c->serial, c->peer);
		if (look)
			cd_admit_tcp(c, inode); /* held in its handshake until judged */
	}
}

static struct stat pid_st; /* the pid file we wrote: removed at exit only if still it */
static int pid_fd = -1;	   /* held open with its lock while we run */

/*
 * The pid file: a regular file (a FIFO planted there must not hang us: no
 * blocking open), locked so that two servers cannot share one, and
 * removed at exit only if it is still the file we wrote.
 */
static int write_pid_file(struct cd_server *s)
{
	const char *path = s->opts.pid_file;
	struct stat st;
	char buf[32];

	if (!path)
		return 0;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
	if (fd < 0) {
		cd_log_error("serve: --pid-file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		cd_log_error("serve: --pid-file %s: not a regular file", path);
		close(fd);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		cd_log_error("serve: --pid-file %s: %s", path,
			     errno == EWOULDBLOCK ? "another running server holds it"
						  : strerror(errno));
		close(fd);
		return -1;
	}
	int n = snprintf(buf, sizeof(buf), "%d\n",
			 (int)(s->opts.pid_file_pid > 0 ? s->opts.pid_file_pid : getpid()));
	if (ftruncate(fd, 0) < 0 || write(fd, buf, (size_t)n) != n) {
		cd_log_error("serve: --pid-file %s: %s", path, strerror(errno ? errno : EIO));
		close(fd);
		return -1;
	}
	pid_st = st;
	pid_fd = fd;
	s->pid_file_written = true;
	return 0;
}

/* Room for a burst of --max-connections connects (the kernel caps it at somaxconn). */
static int backlog(const struct cd_server *s)
{
	unsigned n = s->opts.max_connections + 64;
	return n < BACKLOG_MIN ? BACKLOG_MIN : n > BACKLOG_MAX ? BACKLOG_MAX : (int)n;
}

/*
 * Fail closed before serving: if the kernel cannot name the owner of our
 * own listening socket, it will not name a peer's either, and every client
 * would be refused; say what is missing instead. (With --allow-local-users
 * the lookup is needed only while a sandbox of ours has network access:
 * then a client whose socket cannot be looked up is refused.)
 */
static int check_owner_lookup(int fd, const char *where)
{
	uid_t uid;
	int r = cd_peer_tcp_listener_owner(fd, &uid);

	if (r == 0 && uid == geteuid())
		return 0;
	if (r == 0 || r == -EOVERFLOW)
		cd_log_error("serve: ws://%s: the kernel reports the listening socket as uid %u's, "
			     "not ours (uid %u): peers' owners cannot be told apart in this user "
			     "namespace. Pass --auth-token-file FILE",
			     where, r == 0 ? (unsigned)uid : (unsigned)geteuid(),
			     (unsigned)geteuid());
#ifndef __linux__
	else if (r == -ENOTSUP)
		cd_log_error("serve: ws://%s: cannot tell which user a loopback client is: %s. "
			     "Pass --auth-token-file FILE (or --allow-local-users to admit every "
			     "local user)",
			     where, cd_peer_strerror(r));
#endif
	else
		cd_log_error("serve: ws://%s: cannot tell which user a loopback client is: the "
			     "kernel's socket diagnostics (NETLINK_SOCK_DIAG) answered: %s. Hint: "
			     "the kernel needs CONFIG_INET_DIAG and the tcp_diag module, and a "
			     "systemd unit's RestrictAddressFamilies= must allow AF_NETLINK; or "
			     "pass --auth-token-file FILE (or --allow-local-users to admit every "
			     "local user)",
			     where, cd_peer_strerror(r));
	return -1;
}

/* Who a ws:// listener admits, for its log line. */
static const char *ws_admits(const struct cd_server *s)
{
	if (s->opts.auth_token)
		return " (bearer token required)";
	if (s->opts.allow_local_users)
		return " (every local user admitted)";
	if (s->opts.allow_local_group_set)
		return " (our uid and --allow-local-group only)";
	return s->opts.check_peer_owner ? " (our uid only)" : "";
}

static int listen_ws(struct cd_server *s)
{
	const struct sockaddr_storage *ss = &s->opts.ws_addr;
	int fd = cd_socket(ss->ss_family, SOCK_STREAM, 0, true);
	int one = 1;

	if (fd < 0) {
		cd_log_error("serve: socket: %s", strerror(errno));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, s->opts.ws_addr_len) < 0 ||
	    listen(fd, backlog(s)) < 0) {
		cd_log_error("serve: cannot listen on the --listen address: %s", strerror(errno));
		close(fd);
		return -1;
	}
	struct sockaddr_storage b;
	socklen_t bl = sizeof(b);
	char where[INET6_ADDRSTRLEN + 16];
	if (getsockname(fd, (struct sockaddr *)&b, &bl) < 0)
		b.ss_family = AF_UNSPEC;
	format_addr(&b, where, sizeof(where));
	if (s->opts.check_peer_owner && check_owner_lookup(fd, where) < 0) {
		close(fd);
		return -1;
	}
	s->listen_fd = fd;
	snprintf(s->where, sizeof(s->where), "ws://%s", where);
	/* The harness reads this first line of stdout (reference 1.2). */
	printf("ws://%s\n", where);
	fflush(stdout);
	cd_log_info("serve: listening on ws://%s%s", where, ws_admits(s));
	return 0;
}

/* The parent directory of path must be ours and closed to others. */
static int check_socket_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) < 0) {
		cd_log_error("serve: --listen unix:%s: directory %s: %s", path, dir,
			     strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		cd_log_error("serve: --listen unix:%s: %s is not a directory", path, dir);
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		cd_log_error("serve: --listen unix:%s: the directory %s must belong to uid %u and "
			     "be writable by nobody else (it is uid %u, mode %04o): anyone who "
			     "can write there can replace the socket; use a directory of your own, "
			     "e.g. $XDG_RUNTIME_DIR",
			     path, dir, (unsigned)geteuid(), (unsigned)st.st_uid,
			     (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

static int listen_unix(struct cd_server *s)
{
	const char *path = s->opts.unix_path;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		cd_log_error("serve: --listen unix:%s: the path is longer than %zu bytes", path,
			     sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (check_socket_dir(path) < 0)
		return -1;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			cd_log_error("serve: --listen unix:%s: the path exists and is not a socket",
				     path);
			return -1;
		}
		/* Stale (a server that died) or live: only a live one answers. */
		int probe = cd_socket(AF_UNIX, SOCK_STREAM, 0, false);
		int r = probe < 0 ? -1 : connect(probe, (struct sockaddr *)&sun, sizeof(sun));
		int e = errno;
		if (probe >= 0)
			close(probe);
		if (r == 0 || (e != ECONNREFUSED && e != ENOENT)) {
			cd_log_error("serve: --listen unix:%s: %s", path,
				     r == 0 ? "another server is listening there" : strerror(e));
			return -1;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			cd_log_error("serve: --listen unix:%s: cannot remove the stale socket: %s",
				     path, strerror(errno));
			return -1;
		}
	}
	int fd = cd_socket(AF_UNIX, SOCK_STREAM, 0, true);
	if (fd < 0) {
		cd_log_error("serve: socket: %s", strerror(errno));
		return -1;
	}
	mode_t mode = s->opts.unix_group_set ? 0660 : 0600;
	/* Created with its final mode: no moment where others could connect. */
	mode_t old = umask(0777 & ~mode);
	int r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	int e = errno;
	umask(old);
	if (r < 0) {
		cd_log_error("serve: --listen unix:%s: %s", path, strerror(e));
		close(fd);
		return -1;
	}
	if (lstat(path, &unix_st) < 0 ||
	    (s->opts.unix_group_set && chown(path, (uid_t)-1, s->opts.unix_group) < 0) ||
	    chmod(path, mode) < 0 || listen(fd, backlog(s)) < 0) {
		cd_log_error("serve: --listen unix:%s: %s", path, strerror(errno));
		(void)unlink(path);
		close(fd);
		return -1;
	}
	s->unix_bound = cd_xstrdup(path);
	s->listen_fd = fd;
	snprintf(s->where, sizeof(s->where), "unix:%s", path);
	cd_log_info("serve: listening on unix:%s (mode %04o)", path, (unsigned)mode);
	return 0;
}

/*
 * The listening socket systemd passed (cmd-serve.c checked it and chose the
 * transport by its family): bound, listening, its mode and owner set by
 * the socket unit, and left where it is at exit. The same rules as on a
 * socket of our own: a unix socket's peers by their credentials, a TCP
 * one's by the token or, on loopback, by the owner of their socket.
 */
static int listen_activated(struct cd_server *s)
{
	int fd = s->opts.activated_fd;
	const char *name = s->opts.activated_name;
	char named[300] = "";

	if (name[0])
		snprintf(named, sizeof(named), " ('%s')", name);
	if (s->opts.listen == CD_LISTEN_WS) {
		char where[INET6_ADDRSTRLEN + 16];
		format_addr(&s->opts.ws_addr, where, sizeof(where));
		if (s->opts.check_peer_owner && check_owner_lookup(fd, where) < 0)
			return -1;
		s->listen_fd = fd;
		snprintf(s->where, sizeof(s->where), "ws://%s", where);
		printf("ws://%s\n", where);
		fflush(stdout);
		cd_log_info("serve: listening on ws://%s, a socket passed by systemd%s%s", where,
			    named, ws_admits(s));
		return 0;
	}
	struct sockaddr_un sun;
	socklen_t len = sizeof(sun);
	memset(&sun, 0, sizeof(sun));
	if (getsockname(fd, (struct sockaddr *)&sun, &len) < 0) {
		cd_log_error("serve: the unix socket passed by systemd%s: %s", named,
			     strerror(errno));
		return -1;
	}
	size_t plen = len > offsetof(struct sockaddr_un, sun_path)
			      ? len - offsetof(struct sockaddr_un, sun_path)
			      : 0;
	if (plen > 0 && sun.sun_path[0] == '\0') {
		/* Abstract: "@name" as systemd writes it (NUL bytes inside shown as '@'). */
		char abs[sizeof(sun.sun_path) + 1];
		for (size_t i = 0; i < plen; i++)
			abs[i] = sun.sun_path[i] ? sun.sun_path[i] : '@';
		abs[plen] = '\0';
		snprintf(s->where, sizeof(s->where), "unix:%s", abs);
	} else if (plen > 0) {
		sun.sun_path[sizeof(sun.sun_path) - 1] = '\0';
		s->unix_activated = cd_xstrdup(sun.sun_path);
		snprintf(s->where, sizeof(s->where), "unix:%s", sun.sun_path);
	} else {
		snprintf(s->where, sizeof(s->where), "an unnamed unix socket");
	}
	s->listen_fd = fd;
	cd_log_info("serve: listening on %s, a socket passed by systemd%s (peers: our uid%s)",
		    s->where, named, s->opts.unix_group_set ? " and --unix-group" : "");
	return 0;
}

int cd_listen_start(struct cd_server *s)
{
	/*
	 * The pid file first: once the socket is there (a unix socket's path,
	 * the ws:// URL printed), so is the pid file, for whoever waits for
	 * either. A failure below removes it again (cd_listen_stop).
	 */
	if (write_pid_file(s) < 0)
		return -1;
	/* The descriptor given up to answer a connection when there are none left. */
	s->reserve_fd = open_reserve();
	int r = s->opts.activated_fd >= 0	 ? listen_activated(s)
		: s->opts.listen == CD_LISTEN_WS ? listen_ws(s)
						 : listen_unix(s);
	if (r < 0)
		return -1;
	s->listen_watch = cd_loop_add_fd(s->loop, s->listen_fd, CD_LOOP_IN, on_accept, s);
	if (!s->listen_watch) {
		cd_log_error("serve: cannot watch the listening socket: %s", strerror(errno));
		return -1;
	}
	return 0;
}

void cd_listen_stop(struct cd_server *s)
{
	if (s->listen_watch)
		cd_loop_del_fd(s->loop, s->listen_watch);
	s->listen_watch = NULL;
	if (s->fd_retry)
		cd_loop_cancel_timer(s->loop, s->fd_retry);
	s->fd_retry = NULL;
	if (s->reserve_fd >= 0)
		close(s->reserve_fd);
	s->reserve_fd = -1;
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	s->listen_fd = -1;
	cd_peer_done();
	if (s->unix_bound) {
		struct stat st;
		/* Only our own socket: a later server may have replaced it already. */
		if (lstat(s->unix_bound, &st) == 0 && st.st_dev == unix_st.st_dev &&
		    st.st_ino == unix_st.st_ino)
			(void)unlink(s->unix_bound);
		free(s->unix_bound);
		s->unix_bound = NULL;
	}
	free(s->unix_activated);
	s->unix_activated = NULL;
	if (s->pid_file_written) {
		struct stat st;
		if (lstat(s->opts.pid_file, &st) == 0 && st.st_dev == pid_st.st_dev &&
		    st.st_ino == pid_st.st_ino)
			(void)unlink(s->opts.pid_file);
		close(pid_fd);
		pid_fd = -1;
		s->pid_file_written = false;
	}
}
