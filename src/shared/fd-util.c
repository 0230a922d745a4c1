/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h> /* macOS: SOL_LOCAL, LOCAL_PEERPID */
#include <unistd.h>

#include "core/util.h"
#include "shared/fd-util.h"

union fd_cmsg {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

int cd_send_fd(int sock, const void *buf, size_t len, int fd)
{
	union fd_cmsg ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

ssize_t cd_recv_fd(int sock, void *buf, size_t len, int flags, int *ret_fd, int *ret_msg_flags)
{
	union fd_cmsg ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	ssize_t n;
	*ret_fd = -1;
#ifdef MSG_CMSG_CLOEXEC
	flags |= MSG_CMSG_CLOEXEC;
#endif
	do
		n = recvmsg(sock, &mh, flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
#ifndef MSG_CMSG_CLOEXEC
			/* Not atomic where MSG_CMSG_CLOEXEC is missing (macOS). */
			(void)fcntl(f, F_SETFD, FD_CLOEXEC);
#endif
			if (*ret_fd < 0)
				*ret_fd = f;
			else
				close(f);
		}
	}
	if (ret_msg_flags)
		*ret_msg_flags = mh.msg_flags;
	return n;
}

int cd_read_fd(int fd, size_t size_hint, size_t max, char **ret, size_t *ret_len)
{
	/* Sized from the hint so a regular file is read in one call; up to
	 * max + 1 bytes to tell "too large" apart. */
	size_t cap = size_hint && size_hint <= max ? size_hint + 1 : 4096;
	char *buf = cd_xmalloc(cap + 1);
	size_t len = 0;
	for (;;) {
		if (len == cap) {
			if (cap > max)
				break;
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			buf = cd_xrealloc(buf, cap + 1);
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(buf);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		/* A short read of a file of known size is its end: spare a read(). */
		if (size_hint && len < cap)
			break;
	}
	if (len > max) {
		free(buf);
		return -EFBIG;
	}
	buf[len] = '\0';
	*ret = buf;
	if (ret_len)
		*ret_len = len;
	return 0;
}

int cd_std_fds_ensure(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* The lowest free descriptor: fd itself, as those below it are open. */
		int n = open("/dev/null", O_RDWR);
		if (n < 0)
			return -errno;
		if (n != fd) {
			(void)close(n);
			return -EBADF;
		}
	}
	return 0;
}

/* Close lo..hi (hi may be ~0U): close_range, else one by one up to the descriptor limit. */
static int close_span(unsigned lo, unsigned hi)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, lo, hi, 0U) == 0)
		return 0;
	if (errno != ENOSYS && errno != EPERM)
		return -errno;
#endif
	struct rlimit rl;
	unsigned max = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		max = (unsigned)rl.rlim_cur;
	for (unsigned fd = lo; fd <= hi && fd < max; fd++)
		(void)close((int)fd);
	return 0;
}

int cd_close_fds_except(const int *keep, size_t n)
{
	int k[CD_CLOSE_KEEP_MAX];
	size_t m = 0;

	/* The ones worth keeping, sorted (insertion: a handful), without duplicates. */
	for (size_t i = 0; i < n && m < CD_CLOSE_KEEP_MAX; i++) {
		if (keep[i] < 3)
			continue;
		size_t j = m;
		while (j > 0 && k[j - 1] > keep[i])
			j--;
		if (j > 0 && k[j - 1] == keep[i])
			continue;
		memmove(k + j + 1, k + j, (m - j) * sizeof(*k));
		k[j] = keep[i];
		m++;
	}
	unsigned lo = 3;
	for (size_t i = 0; i < m; i++) {
		if ((unsigned)k[i] > lo) {
			int r = close_span(lo, (unsigned)k[i] - 1);
			if (r < 0)
				return r;
		}
		lo = (unsigned)k[i] + 1;
	}
	return close_span(lo, ~0U);
}

/* Open path with flags and fstat it: a regular file's descriptor, -EINVAL (st set), or -errno. */
static int open_checked(const char *path, int flags, struct stat *st)
{
	int fd = open(path, flags);
	if (fd < 0)
		return -errno;
	int r = fstat(fd, st) < 0 ? -errno : S_ISREG(st->st_mode) ? 0 : -EINVAL;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

int cd_open_regular(const char *path, struct stat *st)
{
	const int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
#ifdef O_PATH
	int h = open_checked(path, O_PATH | O_CLOEXEC, st);
	if (h < 0)
		return h;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", h);
	int fd = open(proc, flags);
	int e = errno;
	close(h);
	/* Without /proc (a sandbox that has none): the check after the open below. */
	if (fd >= 0 || (e != ENOENT && e != ENOTDIR))
		return fd >= 0 ? fd : -e;
#endif
	return open_checked(path, flags, st);
}

#ifndef __linux__
static int set_fd_flags(int fd, int flags)
{
	int fl;
	if ((flags & O_NONBLOCK) &&
	    ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
		return -errno;
	if ((flags & O_CLOEXEC) && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/* fd (or -1) with flags set: closed, -1 and errno set when they cannot be. */
static int with_fd_flags(int fd, int flags)
{
	int r = fd < 0 ? 0 : set_fd_flags(fd, flags);
	if (r < 0) {
		close(fd);
		errno = -r;
		return -1;
	}
	return fd;
}
#endif

int cd_pipe2(int fds[2], int flags)
{
#ifdef __linux__
	return pipe2(fds, flags) < 0 ? -errno : 0;
#else
	if (pipe(fds) < 0)
		return -errno;
	int r = set_fd_flags(fds[0], flags);
	if (r == 0)
		r = set_fd_flags(fds[1], flags);
	if (r < 0) {
		close(fds[0]);
		close(fds[1]);
	}
	return r;
#endif
}

int cd_accept_nonblock(int fd, struct sockaddr *addr, socklen_t *len)
{
#ifdef __linux__
	return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
	return with_fd_flags(accept(fd, addr, len), O_NONBLOCK | O_CLOEXEC);
#endif
}

int cd_socket(int domain, int type, int protocol, bool nonblock)
{
#ifdef __linux__
	return socket(domain, type | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), protocol);
#else
	return with_fd_flags(socket(domain, type, protocol),
			     O_CLOEXEC | (nonblock ? O_NONBLOCK : 0));
#endif
}

int cd_socketpair(int domain, int type, int protocol, bool nonblock, int sv[2])
{
#ifdef __linux__
	return socketpair(domain, type | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), protocol,
			  sv);
#else
	if (socketpair(domain, type, protocol, sv) < 0)
		return -1;
	int flags = O_CLOEXEC | (nonblock ? O_NONBLOCK : 0), r = set_fd_flags(sv[0], flags);
	if (r == 0)
		r = set_fd_flags(sv[1], flags);
	if (r < 0) {
		close(sv[0]);
		close(sv[1]);
		errno = -r;
		return -1;
	}
	return 0;
#endif
}

int cd_peer_cred(int fd, struct cd_peer_cred *ret)
{
#ifdef __linux__
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	*ret = (struct cd_peer_cred){ .pid = cr.pid, .uid = cr.uid, .gid = cr.gid };
#else
	*ret = (struct cd_peer_cred){ 0 };
	if (getpeereid(fd, &ret->uid, &ret->gid) < 0)
		return -errno;
	socklen_t len = sizeof(ret->pid);
	if (getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &ret->pid, &len) < 0)
		return -errno;
#endif
	return 0;
}
