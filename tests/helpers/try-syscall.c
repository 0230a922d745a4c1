/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * try-syscall NAME [ARGS]: perform one operation and exit with the
 * resulting errno (0 = it succeeded), so shell tests can tell "denied by
 * the sandbox" (EPERM/EACCES/EROFS/ENOSYS) from "reached the kernel"
 * (EFAULT, EBADF, EINVAL, ENOTTY: the call got past the filter and failed
 * only on its deliberately bad arguments).
 *
 * Notes on individual operations:
 *  - tiocsti: ioctl(0, TIOCSTI, "x"). Unfiltered and with stdin not a
 *    terminal it gives ENOTTY; the seccomp filter gives EPERM first.
 *  - tiocsti-high: the same request with bit 32 set, through syscall(2),
 *    to check the filter compares only the low 32 bits like the kernel.
 *  - ptrace-attach-parent: PTRACE_ATTACH to getppid().
 *  - clone-newuser/clone3: raw syscalls; a child that gets created exits
 *    at once and is reaped.
 *  - personality-bad: personality(0x0040000) (ADDR_COMPAT_LAYOUT).
 *  - tiocexcl, tiocsetd: ioctl(0, TIOCEXCL) and ioctl(0, TIOCSETD, N_TTY),
 *    ENOTTY unfiltered on a stdin that is not a terminal (run with </dev/null).
 *  - syslog: syslog(SYSLOG_ACTION_SIZE_BUFFER), which reads no message.
 *  - chmod PATH: chmod(PATH, 0755); chmod-setuid PATH: chmod(PATH, 04755),
 *    which the seccomp filter refuses wherever PATH is; chown PATH:
 *    chown to the caller's own uid and gid (allowed to an owner without
 *    capabilities); utimes PATH: both times set to 2001-01-01; setxattr
 *    PATH: user.cordon-test = "1"; setflags PATH: FS_IOC_SETFLAGS with
 *    FS_NODUMP_FL added (chattr +d, allowed to an owner).
 *  - shmget: a private System V shared memory segment, removed at once.
 * Prints nothing on success; "try-syscall: NAME: strerror" on failure.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/fs.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

static const char *name;

static int result(long r)
{
	return r < 0 ? errno : 0;
}

/* A freshly created child (clone) exits immediately; the parent reaps it. */
static int reap(long r)
{
	if (r < 0)
		return errno;
	if (r == 0)
		_exit(0);
	waitpid((pid_t)r, NULL, __WALL);
	return 0;
}

static void need(int argc, int n)
{
	if (argc < n + 2) {
		fprintf(stderr, "try-syscall: %s needs %d argument(s)\n", name, n);
		exit(255);
	}
}

static int do_socket(int domain, int type)
{
	int fd = socket(domain, type, 0);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int do_socketpair(int domain, int type)
{
	int sv[2];
	if (socketpair(domain, type, 0, sv) < 0)
		return errno;
	close(sv[0]);
	close(sv[1]);
	return 0;
}

static int do_connect(const char *host, const char *port)
{
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		return EINVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ? errno : 0;
	close(fd);
	return r;
}

static int do_write_file(const char *path, int flags)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0644);
	if (fd < 0)
		return errno;
	int r = 0;
	if (write(fd, "x\n", 2) != 2)
		r = errno ? errno : EIO;
	if (close(fd) < 0 && !r)
		r = errno;
	return r;
}

static int do_read_file(const char *path)
{
	char buf[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int r = read(fd, buf, sizeof(buf)) < 0 ? errno : 0;
	close(fd);
	return r;
}

int main(int argc, char **argv)
{
	int r;

	if (argc < 2) {
		fputs("usage: try-syscall NAME [ARGS]\n", stderr);
		return 255;
	}
	name = argv[1];
	const char *n = name;

	if (!strcmp(n, "ptrace-traceme")) {
		r = result(ptrace(PTRACE_TRACEME, 0, NULL, NULL));
	} else if (!strcmp(n, "ptrace-attach-parent")) {
		r = result(ptrace(PTRACE_ATTACH, getppid(), NULL, NULL));
		if (!r)
			ptrace(PTRACE_DETACH, getppid(), NULL, NULL);
	} else if (!strcmp(n, "process_vm_readv")) {
		char buf[8], src[8] = "abcdefg";
		struct iovec l = { buf, sizeof(buf) }, rv = { src, sizeof(src) };
		r = result(process_vm_readv(getpid(), &l, 1, &rv, 1, 0));
	} else if (!strcmp(n, "io_uring_setup")) {
		/* NULL params: EFAULT when the call reaches the kernel. */
		r = result(syscall(SYS_io_uring_setup, 1, NULL));
	} else if (!strcmp(n, "unshare-user")) {
		r = result(unshare(CLONE_NEWUSER));
	} else if (!strcmp(n, "unshare-mount")) {
		r = result(unshare(CLONE_NEWNS));
	} else if (!strcmp(n, "clone-newuser")) {
		r = reap(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL));
	} else if (!strcmp(n, "clone3")) {
		/* A zero-sized struct: EINVAL from the kernel, ENOSYS from the filter. */
		r = reap(syscall(SYS_clone3, NULL, 0));
	} else if (!strcmp(n, "mount")) {
		r = result(mount("none", "/", "tmpfs", MS_RDONLY | MS_REMOUNT | MS_BIND, NULL));
	} else if (!strcmp(n, "umount2")) {
		r = result(umount2("/nonexistent-cordon-test", 0));
	} else if (!strcmp(n, "pivot_root")) {
		r = result(syscall(SYS_pivot_root, "/nonexistent-a", "/nonexistent-b"));
	} else if (!strcmp(n, "chroot")) {
		r = result(chroot("/nonexistent-cordon-test"));
	} else if (!strcmp(n, "setns")) {
		r = result(setns(-1, 0));
	} else if (!strcmp(n, "keyctl")) {
		/* KEYCTL_GET_KEYRING_ID (0) of an invalid keyring id. */
		r = result(syscall(SYS_keyctl, 0, 0x7fffffff, 0));
	} else if (!strcmp(n, "add_key")) {
		r = result(syscall(SYS_add_key, NULL, NULL, NULL, 0, 0));
	} else if (!strcmp(n, "bpf")) {
		r = result(syscall(SYS_bpf, BPF_PROG_LOAD, NULL, 0));
	} else if (!strcmp(n, "perf_event_open")) {
		r = result(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	} else if (!strcmp(n, "userfaultfd")) {
		long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
		r = result(fd);
		if (fd >= 0)
			close((int)fd);
	} else if (!strcmp(n, "tiocsti")) {
		char c = 'x';
		r = result(ioctl(0, TIOCSTI, &c));
	} else if (!strcmp(n, "tiocsti-high")) {
		char c = 'x';
		r = result(syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI | (1UL << 32), &c));
	} else if (!strcmp(n, "tioclinux")) {
		char c = 0;
		r = result(ioctl(0, TIOCLINUX, &c));
	} else if (!strcmp(n, "tiocexcl")) {
		r = result(ioctl(0, TIOCEXCL));
	} else if (!strcmp(n, "tiocsetd")) {
		int ldisc = 0;
		r = result(ioctl(0, TIOCSETD, &ldisc));
	} else if (!strcmp(n, "syslog")) {
		r = result(syscall(SYS_syslog, 10, NULL, 0));
	} else if (!strcmp(n, "personality-bad")) {
		r = result(personality(0x0040000));
	} else if (!strcmp(n, "socket-inet")) {
		r = do_socket(AF_INET, SOCK_STREAM);
	} else if (!strcmp(n, "socket-inet6")) {
		r = do_socket(AF_INET6, SOCK_STREAM);
	} else if (!strcmp(n, "socket-unix")) {
		r = do_socket(AF_UNIX, SOCK_STREAM);
	} else if (!strcmp(n, "socketpair-inet")) {
		/* The kernel refuses AF_INET pairs with EOPNOTSUPP; the filter with EPERM. */
		r = do_socketpair(AF_INET, SOCK_STREAM);
	} else if (!strcmp(n, "socketpair-unix")) {
		r = do_socketpair(AF_UNIX, SOCK_STREAM);
	} else if (!strcmp(n, "socket-netlink")) {
		r = do_socket(AF_NETLINK, SOCK_RAW);
	} else if (!strcmp(n, "socket-packet")) {
		r = do_socket(AF_PACKET, SOCK_RAW);
	} else if (!strcmp(n, "socket-vsock")) {
		r = do_socket(AF_VSOCK, SOCK_STREAM);
	} else if (!strcmp(n, "connect-tcp")) {
		need(argc, 2);
		r = do_connect(argv[2], argv[3]);
	} else if (!strcmp(n, "write-file")) {
		need(argc, 1);
		r = do_write_file(argv[2], O_CREAT | O_TRUNC);
	} else if (!strcmp(n, "create-file")) {
		need(argc, 1);
		r = do_write_file(argv[2], O_CREAT | O_EXCL);
	} else if (!strcmp(n, "mkdir")) {
		need(argc, 1);
		r = result(mkdir(argv[2], 0755));
	} else if (!strcmp(n, "unlink")) {
		need(argc, 1);
		r = result(unlink(argv[2]));
	} else if (!strcmp(n, "rename")) {
		need(argc, 2);
		r = result(rename(argv[2], argv[3]));
	} else if (!strcmp(n, "symlink")) {
		need(argc, 2);
		r = result(symlink(argv[2], argv[3]));
	} else if (!strcmp(n, "link")) {
		need(argc, 2);
		r = result(link(argv[2], argv[3]));
	} else if (!strcmp(n, "truncate")) {
		need(argc, 1);
		r = result(truncate(argv[2], 0));
	} else if (!strcmp(n, "chmod")) {
		need(argc, 1);
		r = result(chmod(argv[2], 0755));
	} else if (!strcmp(n, "chmod-setuid")) {
		need(argc, 1);
		r = result(chmod(argv[2], 04755));
	} else if (!strcmp(n, "chown")) {
		need(argc, 1);
		r = result(chown(argv[2], geteuid(), getegid()));
	} else if (!strcmp(n, "utimes")) {
		const struct timespec ts[2] = { { .tv_sec = 978307200 }, { .tv_sec = 978307200 } };
		need(argc, 1);
		r = result(utimensat(AT_FDCWD, argv[2], ts, 0));
	} else if (!strcmp(n, "setxattr")) {
		need(argc, 1);
		r = result(setxattr(argv[2], "user.cordon-test", "1", 1, 0));
	} else if (!strcmp(n, "setflags")) {
		int fd, fl = 0;
		need(argc, 1);
		fd = open(argv[2], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			r = errno;
		} else {
			r = ioctl(fd, FS_IOC_GETFLAGS, &fl) < 0 ? errno : 0;
			fl |= FS_NODUMP_FL;
			if (!r)
				r = result(ioctl(fd, FS_IOC_SETFLAGS, &fl));
			close(fd);
		}
	} else if (!strcmp(n, "shmget")) {
		int id = shmget(IPC_PRIVATE, 64, IPC_CREAT | 0600);
		r = id < 0 ? errno : 0;
		if (id >= 0)
			(void)shmctl(id, IPC_RMID, NULL);
	} else if (!strcmp(n, "read-file")) {
		need(argc, 1);
		r = do_read_file(argv[2]);
	} else if (!strcmp(n, "kill")) {
		need(argc, 1);
		r = result(kill((pid_t)atoi(argv[2]), SIGTERM));
	} else {
		fprintf(stderr, "try-syscall: unknown operation '%s'\n", n);
		return 255;
	}

	if (r)
		fprintf(stderr, "try-syscall: %s: %s\n", n, strerror(r));
	return r > 254 ? 254 : r;
}
