/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "serve/peer.h"

#ifdef __linux__
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/linux/linux-util.h"

/*
 * The owner of a loopback TCP peer, through one exact inet_diag request
 * (SOCK_DIAG_BY_FAMILY without NLM_F_DUMP): the kernel looks the socket up
 * by its 4-tuple, as the stack does for an arriving segment, and answers
 * with one inet_diag_msg whose idiag_uid is the owner, translated into the
 * user namespace of whoever opened the netlink socket (us). No privilege
 * is needed. The kernel answers inside sendto(), so the reply is read
 * without waiting; nothing here can block the event loop.
 *
 * The netlink socket is kept open between lookups (opening and closing one
 * costs more than the lookup itself: 6 of 10 us) and is used by the event
 * loop's thread only. Each request carries a new sequence number and only
 * an answer from the kernel with that number counts, so an answer left
 * over from an earlier question can never be taken for this one's. The
 * socket is close-on-exec; after any failure it is closed and the next
 * lookup opens a fresh one.
 */

static int diag_fd = -1;
static uint32_t diag_seq;

/* One end of a TCP connection, as inet_diag's id spells it (network order). */
struct tcp_end {
	int family;
	uint32_t addr[4];
	uint16_t port;
};

static int end_of(const struct sockaddr_storage *ss, struct tcp_end *e)
{
	memset(e, 0, sizeof(*e));
	e->family = ss->ss_family;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		memcpy(e->addr, &in->sin_addr, sizeof(in->sin_addr));
		e->port = in->sin_port;
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		/* v4-mapped addresses are fine: the kernel looks them up among IPv4 sockets. */
		memcpy(e->addr, &in6->sin6_addr, sizeof(in6->sin6_addr));
		e->port = in6->sin6_port;
	} else {
		return -EAFNOSUPPORT;
	}
	return 0;
}

/*
 * The answer to request seq in one datagram of len bytes: 0 with *ret
 * filled, a negative errno the kernel answered, or 1 when the datagram
 * holds no answer to seq.
 */
static int diag_parse(const struct nlmsghdr *first, size_t len, uint32_t seq,
		      struct inet_diag_msg *ret)
{
	unsigned int left = (unsigned int)len;

	for (const struct nlmsghdr *h = first; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
		if (h->nlmsg_seq != seq)
			continue;
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return -EPROTO;
			if (e->error < 0)
				return e->error;
			continue; /* an acknowledgement */
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
			continue;
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ret)))
			return -EPROTO;
		memcpy(ret, NLMSG_DATA(h), sizeof(*ret));
		return 0;
	}
	return 1;
}

/* Read the answer to request seq from nl; 0 with *ret filled, or -errno. */
static int diag_answer(int nl, uint32_t seq, struct inet_diag_msg *ret)
{
	union {
		struct nlmsghdr h;
		char buf[8192];
	} ans;

	/* The kernel answers inside sendto(): whatever the queue holds is all there is. */
	for (;;) {
		struct sockaddr_nl from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(nl, ans.buf, sizeof(ans.buf), MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &fl);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -EPROTO : -errno;
		/* Only the kernel (port 0) answers; an answer cut short is no answer. */
		if (fl < sizeof(from) || from.nl_family != AF_NETLINK || from.nl_pid != 0 ||
		    (size_t)n > sizeof(ans.buf))
			return -EPROTO;
		int r = diag_parse(&ans.h, (size_t)n, seq, ret);
		if (r <= 0)
			return r;
		/* A datagram left from an earlier question: read on. */
	}
}

/* The TCP socket whose own end is src and whose remote end is dst (port 0: none). */
static int diag_lookup(const struct tcp_end *src, const struct tcp_end *dst,
		       struct inet_diag_msg *ret)
{
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} req;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	ssize_t n;

	/* Test hook: as if AF_NETLINK were filtered out (RestrictAddressFamilies=). */
	if (cd_linux_test_disabled("sock_diag"))
		return -EAFNOSUPPORT;
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = sizeof(req);
	req.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.h.nlmsg_flags = NLM_F_REQUEST; /* no NLM_F_DUMP: the exact lookup */
	req.h.nlmsg_seq = ++diag_seq;
	req.r.sdiag_family = (uint8_t)src->family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	req.r.id.idiag_sport = src->port;
	req.r.id.idiag_dport = dst->port;
	memcpy(req.r.id.idiag_src, src->addr, sizeof(src->addr));
	memcpy(req.r.id.idiag_dst, dst->addr, sizeof(dst->addr));
	req.r.id.idiag_if = 0;
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

	if (diag_fd < 0) {
		diag_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		if (diag_fd < 0)
			return -errno;
	}
	do
		n = sendto(diag_fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel,
			   sizeof(kernel));
	while (n < 0 && errno == EINTR);
	int r = n < 0			   ? -errno
		: (size_t)n != sizeof(req) ? -EPROTO
					   : diag_answer(diag_fd, req.h.nlmsg_seq, ret);
	/* Not found is an answer; anything else may have left the socket in doubt. */
	if (r < 0 && r != -ENOENT)
		cd_peer_done();
	if (r == 0 && (ret->id.idiag_sport != src->port || ret->id.idiag_dport != dst->port))
		r = -EPROTO;
	return r;
}

void cd_peer_done(void)
{
	if (diag_fd >= 0)
		close(diag_fd);
	diag_fd = -1;
}

/*
 * The kernel reports an owner that has no mapping in our user namespace as
 * the overflow uid (65534 unless /proc/sys/kernel/overflowuid says
 * otherwise): then that number could be anybody. -1 when every uid is
 * mapped (the initial user namespace), so that no report is ambiguous.
 * Unreadable files count as a partial map: the overflow uid then means
 * "unknown", never someone in particular.
 */
static long ambiguous_uid(void)
{
	static long cached = -2;
	unsigned long long total = 0, first, lower, count;
	long overflow = 65534;

	if (cached != -2)
		return cached;
	FILE *f = fopen("/proc/self/uid_map", "re");
	if (f) {
		while (fscanf(f, "%llu %llu %llu", &first, &lower, &count) == 3)
			total += count;
		fclose(f);
	}
	if (total >= 4294967295ULL) {
		cached = -1;
		return cached;
	}
	f = fopen("/proc/sys/kernel/overflowuid", "re");
	if (f) {
		if (fscanf(f, "%ld", &overflow) != 1)
			overflow = 65534;
		fclose(f);
	}
	cached = overflow;
	return cached;
}

static int owner_of(const struct inet_diag_msg *m, uid_t *ret_uid)
{
	long amb = ambiguous_uid();
	if (amb >= 0 && (long)m->idiag_uid == amb)
		return -EOVERFLOW;
	*ret_uid = (uid_t)m->idiag_uid;
	return 0;
}

int cd_peer_tcp_owner(int fd, uid_t *ret_uid, uint64_t *ret_inode)
{
	struct sockaddr_storage ours, theirs;
	socklen_t ol = sizeof(ours), tl = sizeof(theirs);
	struct tcp_end src, dst;
	struct inet_diag_msg m;

	/* ENOTCONN: the peer reset the connection already. */
	if (getsockname(fd, (struct sockaddr *)&ours, &ol) < 0 ||
	    getpeername(fd, (struct sockaddr *)&theirs, &tl) < 0)
		return errno == ENOTCONN ? -ENOENT : -errno;
	if (end_of(&theirs, &src) < 0 || end_of(&ours, &dst) < 0 || src.family != dst.family)
		return -EAFNOSUPPORT;
	int r = diag_lookup(&src, &dst, &m);
	if (r < 0)
		return r;
	/*
	 * Only a socket some process still holds has an owner that means
	 * anything: one that was closed is an orphan or a time-wait entry (no
	 * inode), for which the kernel reports uid 0. A held client socket is
	 * established, or half-closed by its own side while ours is open.
	 */
	if (m.idiag_inode == 0)
		return -ESTALE;
	switch (m.idiag_state) {
	case TCP_ESTABLISHED:
	case TCP_FIN_WAIT1:
	case TCP_FIN_WAIT2:
		break;
	default:
		return -ESTALE;
	}
	/*
	 * Our end must still be connected after the answer: had the peer reset
	 * it meanwhile, its 4-tuple would have been free for another socket to
	 * take, and the answer might name that one's owner.
	 */
	tl = sizeof(theirs);
	if (getpeername(fd, (struct sockaddr *)&theirs, &tl) < 0)
		return errno == ENOTCONN ? -ENOENT : -errno;
	if (ret_inode)
		*ret_inode = m.idiag_inode;
	return owner_of(&m, ret_uid);
}

int cd_peer_tcp_listener_owner(int fd, uid_t *ret_uid)
{
	struct sockaddr_storage ours;
	socklen_t ol = sizeof(ours);
	struct tcp_end src, dst;
	struct inet_diag_msg m;

	if (getsockname(fd, (struct sockaddr *)&ours, &ol) < 0)
		return -errno;
	if (end_of(&ours, &src) < 0)
		return -EAFNOSUPPORT;
	/* No remote end: the lookup falls through to the listening sockets. */
	memset(&dst, 0, sizeof(dst));
	dst.family = src.family;
	int r = diag_lookup(&src, &dst, &m);
	if (r < 0)
		return r;
	if (m.idiag_inode == 0 || m.idiag_state != TCP_LISTEN)
		return -EPROTO;
	return owner_of(&m, ret_uid);
}

#else /* !__linux__ */

/*
 * macOS has no NETLINK_SOCK_DIAG, and nothing else that names the owner of
 * the other end of a loopback TCP connection without a look through every
 * process's descriptors (libproc), which is not built: a ws:// listener
 * there needs --auth-token-file (or --allow-local-users), and says so.
 */
int cd_peer_tcp_owner(int fd, uid_t *ret_uid, uint64_t *ret_inode)
{
	(void)fd, (void)ret_uid, (void)ret_inode;
	return -ENOTSUP;
}

int cd_peer_tcp_listener_owner(int fd, uid_t *ret_uid)
{
	(void)fd, (void)ret_uid;
	return -ENOTSUP;
}

void cd_peer_done(void)
{
}
#endif

const char *cd_peer_strerror(int r)
{
	switch (-r) {
	case ENOENT:
		return "no socket of this host is the other end (the client is gone)";
	case ESTALE:
		return "the client closed its socket (its owner is no longer known)";
	case EOVERFLOW:
		return "the owner's uid is not mapped in the server's user namespace";
	case EPROTO:
		return "the kernel's socket diagnostics gave an unexpected answer";
#ifndef __linux__
	case ENOTSUP:
		return "this host has no socket diagnostics to ask (they are Linux's)";
#endif
	default:
		return strerror(-r);
	}
}
