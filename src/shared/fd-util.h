/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Descriptor helpers shared by the spawner and the server (POSIX only).
 * cd_send_fd and cd_recv_fd do not allocate: a forked child may use them.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * sendmsg of buf with fd attached (SCM_RIGHTS; none when fd < 0), retried
 * on EINTR, never raising SIGPIPE. 0, -EMSGSIZE when not all of buf went,
 * or -errno.
 */
int cd_send_fd(int sock, const void *buf, size_t len, int fd);

/*
 * recvmsg into buf (flags: MSG_WAITALL and the like; MSG_CMSG_CLOEXEC is
 * always added), retried on EINTR. *ret_fd: the passed descriptor or -1;
 * any further ones are closed. *ret_msg_flags (optional): msg_flags, for
 * MSG_TRUNC and MSG_CTRUNC. Returns the bytes received or -errno.
 */
ssize_t cd_recv_fd(int sock, void *buf, size_t len, int flags, int *ret_fd, int *ret_msg_flags);

/*
 * Read fd to its end into a NUL-terminated malloc'ed buffer. size_hint:
 * the expected size (a regular file's st_size; a short read then ends it),
 * or 0 when unknown. -EFBIG past max bytes, or -errno.
 */
int cd_read_fd(int fd, size_t size_hint, size_t max, char **ret, size_t *ret_len);

/*
 * Open path (symbolic links followed) for reading only if it is a regular
 * file, without opening anything else first: opening a device can act
 * (a tape rewinds, a modem hangs up) and a FIFO can block, and a check
 * before the open races with a rename onto the path. Where the system has
 * O_PATH and /proc (Linux), the object is looked at through a handle that
 * opens nothing, then reopened through /proc/self/fd; elsewhere it is
 * opened non-blocking and checked after. *st: what it is. The descriptor
 * (close-on-exec, non-blocking), -EINVAL with *st set when it is not a
 * regular file, or -errno.
 */
int cd_open_regular(const char *path, struct stat *st);

/*
 * Open /dev/null on whichever of descriptors 0, 1 and 2 is closed, so that
 * no socket or file cordon opens later takes a standard descriptor's place
 * (and is then handed to the command as its stdin, or replaced by a dup2).
 * 0, or -errno when /dev/null cannot be opened.
 */
int cd_std_fds_ensure(void);

/*
 * Close every descriptor from 3 up but those of keep[] (at most
 * CD_CLOSE_KEEP_MAX; others are ignored): what a process that is about
 * to be confined must not hold of whoever started it. No allocation: a
 * forked child may use it. 0, or -errno.
 */
#define CD_CLOSE_KEEP_MAX 8
int cd_close_fds_except(const int *keep, size_t n);

/*
 * pipe2(2), flags among O_CLOEXEC and O_NONBLOCK (for both ends). macOS
 * has no pipe2: there the flags are set just after, not atomically, so a
 * spawner must close what a child is not given (spawn.h). 0 or -errno.
 */
int cd_pipe2(int fds[2], int flags);

/*
 * accept(2) of a connection that is non-blocking and close-on-exec
 * (accept4 on Linux; accept, then fcntl, on macOS). The descriptor, or -1
 * with errno set.
 */
int cd_accept_nonblock(int fd, struct sockaddr *addr, socklen_t *len);

/*
 * socket(2) and socketpair(2), close-on-exec, and non-blocking with
 * nonblock (SOCK_CLOEXEC and SOCK_NONBLOCK on Linux; macOS has neither,
 * so there fcntl follows). The descriptor (0 for the pair), or -1 with
 * errno set.
 */
int cd_socket(int domain, int type, int protocol, bool nonblock);
int cd_socketpair(int domain, int type, int protocol, bool nonblock, int sv[2]);

struct cd_peer_cred {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

/*
 * Who is at the other end of a unix socket. Linux (SO_PEERCRED): the
 * process that connected, as of connect(2). macOS: the uid and gid as of
 * connect(2) (getpeereid), but the pid of the last process that used the
 * peer's socket (LOCAL_PEERPID), which a passed or inherited socket
 * changes: there the pid is for logs, never for a judgement. 0 or -errno.
 */
int cd_peer_cred(int fd, struct cd_peer_cred *ret);
