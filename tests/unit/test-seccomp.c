/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * never run with CK_FORK=no: these tests load seccomp filters, drop
 * capabilities and unshare namespaces in the test process itself, which is
 * safe only because Check forks every test.
 *
 * Covers the seccomp, capabilities and namespaces backends.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/linux-util.h"
#include "sandbox/linux/seccomp.h"

#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}
#endif

/*
 * The whole parent side: prepare, then prepare_host (backend.h), which no
 * spawner defers here. A failure leaves no state, as a failed prepare does.
 */
static int prepare_all(const struct cd_backend *b, const struct cd_linux_plan *lp,
		       struct cd_backend_state **ret, char **err)
{
	int r = b->prepare(lp, ret, err);

	if (r < 0 || !b->prepare_host)
		return r;
	r = b->prepare_host(*ret, -1, err);
	if (r < 0) {
		b->destroy(*ret);
		*ret = NULL;
	}
	return r;
}

static struct cd_backend_state *prepare_ok(const struct cd_backend *b,
					   const struct cd_linux_plan *lp)
{
	struct cd_backend_state *s = NULL;
	char *err = NULL;
	int r;

	r = prepare_all(b, lp, &s, &err);
	ck_assert_msg(r == 0, "%s prepare: %d %s", b->name, r, err ? err : "");
	free(err);
	return s;
}

/* Make prepare compile at run time (the fallback) instead of taking the built-in program. */
static void force_runtime_compile(void)
{
	ck_assert_int_eq(setenv("CORDON_TEST_DISABLE", "seccomp-precompiled", 1), 0);
}

/* Load the filter for `when`; runtime: through the run-time compiler, else the default path. */
static void apply_seccomp(cd_sc_when when, bool runtime)
{
	struct cd_linux_plan lp = { .sandboxed = true, .seccomp = true, .sc_when = when };
	struct cd_backend_state *s;

	if (runtime)
		force_runtime_compile();
	s = prepare_ok(&cd_backend_seccomp, &lp);
	ck_assert_ptr_nonnull(s);
	/* The group sets of the table below are the ones a plan uses: all precompiled. */
	ck_assert_int_eq(cd_seccomp_state_precompiled(s), !runtime);
	ck_assert_int_eq(cd_backend_seccomp.apply(s), 0);
	cd_backend_seccomp.destroy(s);
}

/* ---- seccomp: one denied (or allowed) call per row ---- */

#define TIOCSTI_NR   0x5412UL
#define TIOCLINUX_NR 0x541CUL

static long call_ptrace(void)
{
	return ptrace(PTRACE_TRACEME, 0, NULL, NULL);
}
static long call_pvm_readv(void)
{
	char a[4], b[4];
	struct iovec l = { a, 4 }, r = { b, 4 };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0);
}
static long call_io_uring_setup(void)
{
	char params[120] = { 0 };

	return syscall(SYS_io_uring_setup, 1, params);
}
static long call_keyctl(void)
{
	return syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0);
}
static long call_bpf(void)
{
	char attr[64] = { 0 };

	return syscall(SYS_bpf, 0, attr, sizeof(attr));
}
static long call_perf(void)
{
	char attr[128] = { 0 };

	return syscall(SYS_perf_event_open, attr, 0, -1, -1, 0);
}
static long call_userfaultfd(void)
{
	return syscall(SYS_userfaultfd, 0);
}
static long call_mount(void)
{
	return syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL);
}
static long call_umount2(void)
{
	return syscall(SYS_umount2, "/nonexistent-cordon", 0);
}
static long call_pivot_root(void)
{
	return syscall(SYS_pivot_root, "/", "/");
}
static long call_chroot(void)
{
	return syscall(SYS_chroot, "/");
}
static long call_setns(void)
{
	return syscall(SYS_setns, -1, 0);
}
static long call_unshare_user(void)
{
	return syscall(SYS_unshare, CLONE_NEWUSER);
}
static long call_unshare_net(void)
{
	return syscall(SYS_unshare, CLONE_NEWNET);
}
static long call_unshare_files(void)
{
	return syscall(SYS_unshare, CLONE_FILES);
}
static long call_clone3(void)
{
	char args[88] = { 0 };

	return syscall(SYS_clone3, args, sizeof(args));
}
static long call_clone_newuser(void)
{
	long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);

	if (r == 0)
		_exit(0);
	return r;
}
static long call_fork(void)
{
	int status;
	pid_t p = fork();

	if (p == 0)
		_exit(7);
	if (p < 0)
		return -1;
	if (waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 7)
		return -1;
	return 0;
}
static long call_pers_query(void)
{
	return syscall(SYS_personality, 0xffffffffUL);
}
static long call_pers_linux(void)
{
	return syscall(SYS_personality, 0UL);
}
static long call_pers_norandom(void)
{
	return syscall(SYS_personality, 0x0040000UL);
}
static long call_pers_hi(void)
{
	/* Same low half as the allowed PER_LINUX: the compare must be 64-bit. */
	return syscall(SYS_personality, 1UL << 32);
}
static long call_tiocsti(void)
{
	char c = 'x';

	return syscall(SYS_ioctl, 0, TIOCSTI_NR, &c);
}
static long call_tiocsti_hi(void)
{
	char c = 'x';

	return syscall(SYS_ioctl, 0, TIOCSTI_NR | (1UL << 32), &c);
}
static long call_tioclinux(void)
{
	char c = 0;

	return syscall(SYS_ioctl, 0, TIOCLINUX_NR, &c);
}
static long call_socket_inet(void)
{
	return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}
static long call_socket_inet6(void)
{
	return socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}
static long call_socket_netlink(void)
{
	return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
}
static long call_socket_unix(void)
{
	return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}
static long call_socketpair_unix(void)
{
	int sv[2];

	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
}
static long call_socketpair_inet(void)
{
	int sv[2];

	return socketpair(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
}

/* Keep the failing call's errno across the close(). */
static long close_keep_errno(int fd, long r)
{
	int e = errno;

	close(fd);
	errno = e;
	return r;
}
static long call_socket_unix_dgram(void)
{
	return socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}
static long call_socket_unix_seqpacket(void)
{
	return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}
/*
 * The kernel takes the type as an int: bits above 31 are dropped, so the
 * filter must judge the low half only (a datagram socket is still denied,
 * a stream socket still allowed).
 */
static long call_socket_unix_dgram_hi(void)
{
	return syscall(SYS_socket, AF_UNIX, (1UL << 32) | SOCK_DGRAM, 0);
}
static long call_socket_unix_stream_hi(void)
{
	return syscall(SYS_socket, AF_UNIX, (1UL << 32) | SOCK_STREAM, 0);
}
static long call_socketpair_unix_dgram(void)
{
	int sv[2];

	return socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv);
}
static long call_socketpair_unix_seqpacket(void)
{
	int sv[2];

	return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
}
static struct sockaddr_un nowhere = { .sun_family = AF_UNIX, .sun_path = "/nonexistent-cordon/s" };
static long call_connect_unix(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -2;
	return close_keep_errno(fd, connect(fd, (struct sockaddr *)&nowhere, sizeof(nowhere)));
}
/* Autobind (an abstract name the kernel picks): no file is made either way. */
static long call_bind_unix(void)
{
	sa_family_t fam = AF_UNIX;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -2;
	return close_keep_errno(fd, bind(fd, (struct sockaddr *)&fam, sizeof(fam)));
}
/* On an unbound, unconnected socket: EINVAL once past the filter. */
static long call_listen_unix(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -2;
	return close_keep_errno(fd, listen(fd, 1));
}
static long call_accept_unix(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -2;
	return close_keep_errno(fd, syscall(SYS_accept, fd, NULL, NULL));
}
static long call_accept4_unix(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -2;
	return close_keep_errno(fd, accept4(fd, NULL, NULL, SOCK_CLOEXEC));
}
/* sendto with an address on a stream socketpair: EISCONN once past the filter. */
static long call_sendto_addr(void)
{
	int sv[2];
	long r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -2;
	r = sendto(sv[0], "x", 1, MSG_DONTWAIT, (struct sockaddr *)&nowhere, sizeof(nowhere));
	close(sv[1]);
	return close_keep_errno(sv[0], r);
}
/* send() and recv() on a socketpair (glibc's send() is sendto with no address). */
static long call_send_pair(void)
{
	int sv[2];
	char c = 0;
	long r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -2;
	r = send(sv[0], "y", 1, MSG_DONTWAIT);
	if (r == 1)
		r = recv(sv[1], &c, 1, MSG_DONTWAIT);
	if (r == 1 && c != 'y')
		r = -3;
	close(sv[1]);
	return close_keep_errno(sv[0], r);
}
/* An fd over a seqpacket socketpair (SCM_RIGHTS), as cordon's own helpers pass them. */
static long call_scm_rights_pair(void)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = "z", .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	int sv[2], fd = STDERR_FILENO;
	long r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -2;
	memset(&ctl, 0, sizeof(ctl));
	mh.msg_control = ctl.buf;
	mh.msg_controllen = sizeof(ctl.buf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	r = sendmsg(sv[0], &mh, MSG_DONTWAIT);
	if (r == 1) {
		char c;

		iov = (struct iovec){ .iov_base = &c, .iov_len = 1 };
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		r = recvmsg(sv[1], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		cm = CMSG_FIRSTHDR(&mh);
		if (r == 1 && !(cm && cm->cmsg_type == SCM_RIGHTS))
			r = -3;
		if (r == 1) {
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
			close(fd);
		}
	}
	close(sv[1]);
	return close_keep_errno(sv[0], r);
}

/* ---- issue 21: calls that name another process or user (kept to the caller without a pid
 * namespace), setuid and setgid modes, leases, terminal ioctls, kernel-global state. Every call
 * is harmless: it names the caller itself by its pid (the filter cannot tell), a uid with no
 * process, or an argument the kernel refuses after the filter let it through. ---- */

#define NO_ONE_UID 0x7ffffff0L /* a uid that owns no process */

static long call_prlimit_pid(void)
{
	struct rlimit old;

	return syscall(SYS_prlimit64, getpid(), RLIMIT_CORE, NULL, &old);
}
static long call_prlimit_self(void)
{
	struct rlimit old;

	return syscall(SYS_prlimit64, 0, RLIMIT_CORE, NULL, &old);
}
static long call_prlimit_hi(void)
{
	struct rlimit old;

	/* The kernel reads pid 0 (the caller); the 64-bit compare refuses it: fail closed. */
	return syscall(SYS_prlimit64, 1UL << 32, RLIMIT_CORE, NULL, &old);
}
static long call_setpriority_pid(void)
{
	return syscall(SYS_setpriority, PRIO_PROCESS, getpid(), getpriority(PRIO_PROCESS, 0));
}
static long call_setpriority_self(void)
{
	return syscall(SYS_setpriority, PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0));
}
static long call_setpriority_user(void)
{
	return syscall(SYS_setpriority, PRIO_USER, NO_ONE_UID, 0);
}
/* PRIO_PGRP with who 0 (the caller's group, which only the caller is in): `which` alone. */
static long call_setpriority_pgrp(void)
{
	if (setpgid(0, 0) < 0)
		return -2;
	return syscall(SYS_setpriority, PRIO_PGRP, 0, getpriority(PRIO_PROCESS, 0));
}
#define IOPRIO_WHO_PROCESS_NR 1
#define IOPRIO_WHO_USER_NR    3
#define IOPRIO_BE_4	      ((2 << 13) | 4)
static long call_ioprio_pid(void)
{
	long cur = syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS_NR, 0);

	return cur < 0 ? -2 : syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS_NR, getpid(), cur);
}
static long call_ioprio_self(void)
{
	long cur = syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS_NR, 0);

	return cur < 0 ? -2 : syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS_NR, 0, cur);
}
static long call_ioprio_user(void)
{
	return syscall(SYS_ioprio_set, IOPRIO_WHO_USER_NR, NO_ONE_UID, IOPRIO_BE_4);
}
static long call_affinity(pid_t pid)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return -2;
	return syscall(SYS_sched_setaffinity, pid, sizeof(set), &set);
}
static long call_affinity_pid(void)
{
	return call_affinity(getpid());
}
static long call_affinity_self(void)
{
	return call_affinity(0);
}
static long call_setscheduler_pid(void)
{
	struct sched_param sp = { 0 };

	return syscall(SYS_sched_setscheduler, getpid(), SCHED_OTHER, &sp);
}
static long call_setparam_pid(void)
{
	struct sched_param sp = { 0 };

	return syscall(SYS_sched_setparam, getpid(), &sp);
}
static long call_setparam_self(void)
{
	struct sched_param sp = { 0 };

	return syscall(SYS_sched_setparam, 0, &sp);
}
static long call_setattr_pid(void)
{
	/* No attributes: EINVAL once past the filter. */
	return syscall(SYS_sched_setattr, getpid(), NULL, 0);
}
static long call_migrate_pages_pid(void)
{
	return syscall(SYS_migrate_pages, getpid(), 0, NULL, NULL);
}
static long call_move_pages_pid(void)
{
	return syscall(SYS_move_pages, getpid(), 0, NULL, NULL, NULL, 0);
}
static long call_robust_list_pid(void)
{
	return syscall(SYS_get_robust_list, getpid(), NULL, NULL);
}
static long call_robust_list_self(void)
{
	return syscall(SYS_get_robust_list, 0, NULL, NULL);
}
/* Signal 0: only the permission check. */
static long call_kill_all(void)
{
	return syscall(SYS_kill, -1L, 0);
}
static long call_kill_all_lo32(void)
{
	/* -1 as an int, zero-extended: the kernel reads -1 all the same. */
	return syscall(SYS_kill, 0xffffffffUL, 0);
}
static long call_kill_self(void)
{
	return syscall(SYS_kill, getpid(), 0);
}
static long call_pidfd_open_self(void)
{
	long fd = syscall(SYS_pidfd_open, getpid(), 0);

	return fd < 0 ? fd : close_keep_errno((int)fd, 0);
}
static long call_process_madvise(void)
{
	return syscall(SYS_process_madvise, -1, NULL, 0, 0, 0);
}
static long call_process_mrelease(void)
{
	return syscall(SYS_process_mrelease, -1, 0);
}
static long call_kcmp_self(void)
{
	return syscall(SYS_kcmp, getpid(), getpid(), 1 /* KCMP_VM */, 0, 0);
}
static long call_pidfd_getfd(void)
{
	return syscall(SYS_pidfd_getfd, -1, 0, 0);
}

/* A file of our own in a fresh directory, removed with it after fn. */
static long with_temp(long (*fn)(const char *dir, const char *file, int fd))
{
	char dir[] = "/tmp/cordon-sc-XXXXXX", file[64], made[64];
	long r;
	int fd, e;

	if (!mkdtemp(dir))
		return -2;
	snprintf(file, sizeof(file), "%s/f", dir);
	snprintf(made, sizeof(made), "%s/new", dir);
	fd = open(file, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -2;
	r = fn(made, file, fd);
	e = errno;
	close(fd);
	unlink(file);
	unlink(made);
	rmdir(dir);
	errno = e;
	return r;
}
static long do_chmod_suid(const char *made, const char *file, int fd)
{
	return syscall(SYS_chmod, file, 04755);
}
static long do_chmod_sgid(const char *made, const char *file, int fd)
{
	return syscall(SYS_chmod, file, 02755);
}
static long do_chmod_plain(const char *made, const char *file, int fd)
{
	return syscall(SYS_chmod, file, 0755);
}
static long do_chmod_hi(const char *made, const char *file, int fd)
{
	/* The kernel reads a 16-bit mode: 0755, allowed. */
	return syscall(SYS_chmod, file, (1UL << 32) | 0755);
}
static long do_fchmod_suid(const char *made, const char *file, int fd)
{
	return syscall(SYS_fchmod, fd, 04700);
}
static long do_fchmodat_sgid(const char *made, const char *file, int fd)
{
	return syscall(SYS_fchmodat, AT_FDCWD, file, 02700);
}
#define SYS_fchmodat2_NR 452
static long do_fchmodat2_suid(const char *made, const char *file, int fd)
{
	return syscall(SYS_fchmodat2_NR, AT_FDCWD, file, 04755, 0);
}
static long do_fchmodat2_plain(const char *made, const char *file, int fd)
{
	return syscall(SYS_fchmodat2_NR, AT_FDCWD, file, 0700, 0);
}
static long created(long fd)
{
	return fd < 0 ? fd : close_keep_errno((int)fd, 0);
}
static long do_open_suid(const char *made, const char *file, int fd)
{
	return created(syscall(SYS_open, made, O_WRONLY | O_CREAT | O_CLOEXEC, 04755));
}
static long do_openat_sgid(const char *made, const char *file, int fd)
{
	return created(syscall(SYS_openat, AT_FDCWD, made, O_WRONLY | O_CREAT | O_CLOEXEC, 02755));
}
static long do_openat_plain(const char *made, const char *file, int fd)
{
	return created(syscall(SYS_openat, AT_FDCWD, made, O_WRONLY | O_CREAT | O_CLOEXEC, 0755));
}
static long do_creat_suid(const char *made, const char *file, int fd)
{
	return created(syscall(SYS_creat, made, 04700));
}
static long do_mknod_suid(const char *made, const char *file, int fd)
{
	return syscall(SYS_mknod, made, S_IFREG | 04755, 0);
}
static long do_mknodat_sgid(const char *made, const char *file, int fd)
{
	return syscall(SYS_mknodat, AT_FDCWD, made, S_IFREG | 02755, 0);
}
static long do_mknod_fifo(const char *made, const char *file, int fd)
{
	return syscall(SYS_mknod, made, S_IFIFO | 0600, 0);
}
static long do_openat2(const char *made, const char *file, int fd)
{
	/* No struct open_how: EINVAL once past the filter. */
	return syscall(SYS_openat2, AT_FDCWD, file, NULL, 0);
}
static long do_setlease(const char *made, const char *file, int fd)
{
	return syscall(SYS_fcntl, fd, F_SETLEASE, F_RDLCK);
}
static long do_setlease_hi(const char *made, const char *file, int fd)
{
	return syscall(SYS_fcntl, fd, (1UL << 32) | F_SETLEASE, F_RDLCK);
}
static long do_getlease(const char *made, const char *file, int fd)
{
	return syscall(SYS_fcntl, fd, F_GETLEASE);
}
/* Terminal ioctls on a regular file: ENOTTY once past the filter (never the test's terminal). */
static long do_tiocexcl(const char *made, const char *file, int fd)
{
	return syscall(SYS_ioctl, fd, TIOCEXCL);
}
static long do_tiocexcl_hi(const char *made, const char *file, int fd)
{
	return syscall(SYS_ioctl, fd, (1UL << 32) | TIOCEXCL);
}
static long do_tiocsetd(const char *made, const char *file, int fd)
{
	int ldisc = 0;

	return syscall(SYS_ioctl, fd, TIOCSETD, &ldisc);
}
#define TEMP_CALL(fn)                      \
	static long call_##fn(void)        \
	{                                  \
		return with_temp(do_##fn); \
	}
TEMP_CALL(chmod_suid)
TEMP_CALL(chmod_sgid)
TEMP_CALL(chmod_plain)
TEMP_CALL(chmod_hi)
TEMP_CALL(fchmod_suid)
TEMP_CALL(fchmodat_sgid)
TEMP_CALL(fchmodat2_suid)
TEMP_CALL(fchmodat2_plain)
TEMP_CALL(open_suid)
TEMP_CALL(openat_sgid)
TEMP_CALL(openat_plain)
TEMP_CALL(creat_suid)
TEMP_CALL(mknod_suid)
TEMP_CALL(mknodat_sgid)
TEMP_CALL(mknod_fifo)
TEMP_CALL(openat2)
TEMP_CALL(setlease)
TEMP_CALL(setlease_hi)
TEMP_CALL(getlease)
TEMP_CALL(tiocexcl)
TEMP_CALL(tiocexcl_hi)
TEMP_CALL(tiocsetd)

static long call_syslog_size(void)
{
	return syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
}
static long call_sysctl(void)
{
	return syscall(SYS__sysctl, NULL);
}
static long call_settimeofday(void)
{
	/* Neither argument: changes nothing. */
	return syscall(SYS_settimeofday, NULL, NULL);
}
static long call_clock_settime(void)
{
	return syscall(SYS_clock_settime, CLOCK_REALTIME, NULL);
}
static long call_sethostname(void)
{
	/* Longer than a host name may be: EINVAL before anything changes. */
	return syscall(SYS_sethostname, NULL, 65);
}
static long call_setdomainname(void)
{
	return syscall(SYS_setdomainname, NULL, 65);
}
static long call_quotactl_fd(void)
{
	return syscall(SYS_quotactl_fd, -1, 0, 0, NULL);
}
static long call_open_tree_attr(void)
{
	return syscall(467 /* open_tree_attr, Linux 6.15 */, -1, NULL, 0, NULL, 0);
}

struct sc_case {
	const char *name;
	long (*call)(void);
	int want; /* errno, or 0 for success */
	cd_sc_when when;
};

#define BASE  (CD_SC_BASELINE | CD_SC_NET_RESTRICTED)
#define NOPID (BASE | CD_SC_NO_PID_NS)
static const struct sc_case sc_cases[] = {
	{ "ptrace", call_ptrace, EPERM, BASE },
	{ "process_vm_readv", call_pvm_readv, EPERM, BASE },
	{ "io_uring_setup", call_io_uring_setup, EPERM, BASE },
	{ "keyctl", call_keyctl, EPERM, BASE },
	{ "bpf", call_bpf, EPERM, BASE },
	{ "perf_event_open", call_perf, EPERM, BASE },
	{ "userfaultfd", call_userfaultfd, EPERM, BASE },
	{ "mount", call_mount, EPERM, BASE },
	{ "umount2", call_umount2, EPERM, BASE },
	{ "pivot_root", call_pivot_root, EPERM, BASE },
	{ "chroot", call_chroot, EPERM, BASE },
	{ "setns", call_setns, EPERM, BASE },
	{ "unshare(CLONE_NEWUSER)", call_unshare_user, EPERM, BASE },
	{ "unshare(CLONE_NEWNET)", call_unshare_net, EPERM, BASE },
	{ "unshare(CLONE_FILES)", call_unshare_files, 0, BASE },
	{ "clone3", call_clone3, ENOSYS, BASE },
	{ "clone(CLONE_NEWUSER)", call_clone_newuser, EPERM, BASE },
	{ "fork", call_fork, 0, BASE },
	{ "personality(query)", call_pers_query, 0, BASE },
	{ "personality(PER_LINUX)", call_pers_linux, 0, BASE },
	{ "personality(ADDR_NO_RANDOMIZE)", call_pers_norandom, EPERM, BASE },
	{ "personality(1<<32)", call_pers_hi, EPERM, BASE },
	{ "ioctl(TIOCSTI)", call_tiocsti, EPERM, BASE },
	{ "ioctl(TIOCSTI|1<<32)", call_tiocsti_hi, EPERM, BASE },
	{ "ioctl(TIOCLINUX)", call_tioclinux, EPERM, BASE },
	{ "socket(AF_INET)", call_socket_inet, EPERM, BASE },
	{ "socket(AF_INET6)", call_socket_inet6, EPERM, BASE },
	{ "socket(AF_NETLINK)", call_socket_netlink, EPERM, BASE },
	{ "socket(AF_UNIX)", call_socket_unix, 0, BASE },
	{ "socketpair(AF_UNIX)", call_socketpair_unix, 0, BASE },
	{ "socketpair(AF_INET)", call_socketpair_inet, EPERM, BASE },
	/* Unix sockets: no call names a peer, no server. */
	{ "socket(AF_UNIX, SOCK_DGRAM)", call_socket_unix_dgram, EPERM, BASE },
	{ "socket(AF_UNIX, SOCK_SEQPACKET|SOCK_NONBLOCK)", call_socket_unix_seqpacket, 0, BASE },
	{ "socket(AF_UNIX, 1<<32|SOCK_DGRAM)", call_socket_unix_dgram_hi, EPERM, BASE },
	{ "socket(AF_UNIX, 1<<32|SOCK_STREAM)", call_socket_unix_stream_hi, 0, BASE },
	{ "socketpair(AF_UNIX, SOCK_DGRAM)", call_socketpair_unix_dgram, EPERM, BASE },
	{ "socketpair(AF_UNIX, SOCK_SEQPACKET)", call_socketpair_unix_seqpacket, 0, BASE },
	{ "connect(AF_UNIX)", call_connect_unix, EPERM, BASE },
	{ "sendto with an address", call_sendto_addr, EPERM, BASE },
	{ "send/recv on a socketpair", call_send_pair, 0, BASE },
	{ "SCM_RIGHTS on a socketpair", call_scm_rights_pair, 0, BASE },
	{ "bind(AF_UNIX)", call_bind_unix, EPERM, BASE },
	{ "listen(AF_UNIX)", call_listen_unix, EPERM, BASE },
	{ "accept(AF_UNIX)", call_accept_unix, EPERM, BASE },
	{ "accept4(AF_UNIX)", call_accept4_unix, EPERM, BASE },
	/* Network allowed: the socket rules are not in the filter. */
	{ "socket(AF_INET) with network", call_socket_inet, 0, CD_SC_BASELINE },
	{ "socket(AF_INET6) with network", call_socket_inet6, 0, CD_SC_BASELINE },
	/* ... and the unix calls reach the kernel (which fails them on their arguments). */
	{ "socket(AF_UNIX, SOCK_DGRAM) with network", call_socket_unix_dgram, 0, CD_SC_BASELINE },
	{ "socketpair(AF_UNIX, SOCK_DGRAM) with network", call_socketpair_unix_dgram, 0,
	  CD_SC_BASELINE },
	{ "connect(AF_UNIX) with network", call_connect_unix, ENOENT, CD_SC_BASELINE },
	{ "sendto with an address with network", call_sendto_addr, EISCONN, CD_SC_BASELINE },
	{ "bind(AF_UNIX) with network", call_bind_unix, 0, CD_SC_BASELINE },
	{ "listen(AF_UNIX) with network", call_listen_unix, EINVAL, CD_SC_BASELINE },
	{ "accept(AF_UNIX) with network", call_accept_unix, EINVAL, CD_SC_BASELINE },
	{ "accept4(AF_UNIX) with network", call_accept4_unix, EINVAL, CD_SC_BASELINE },
	{ "ptrace with network", call_ptrace, EPERM, CD_SC_BASELINE },
	/* Without a pid namespace: only the caller itself, by 0. */
	{ "prlimit64(getpid())", call_prlimit_pid, EPERM, NOPID },
	{ "prlimit64(0)", call_prlimit_self, 0, NOPID },
	{ "prlimit64(1<<32)", call_prlimit_hi, EPERM, NOPID },
	{ "setpriority(PRIO_PROCESS, getpid())", call_setpriority_pid, EPERM, NOPID },
	{ "setpriority(PRIO_PROCESS, 0)", call_setpriority_self, 0, NOPID },
	{ "setpriority(PRIO_USER, uid)", call_setpriority_user, EPERM, NOPID },
	{ "setpriority(PRIO_PGRP, 0)", call_setpriority_pgrp, EPERM, NOPID },
	{ "ioprio_set(IOPRIO_WHO_PROCESS, getpid())", call_ioprio_pid, EPERM, NOPID },
	{ "ioprio_set(IOPRIO_WHO_PROCESS, 0)", call_ioprio_self, 0, NOPID },
	{ "ioprio_set(IOPRIO_WHO_USER, uid)", call_ioprio_user, EPERM, NOPID },
	{ "sched_setaffinity(getpid())", call_affinity_pid, EPERM, NOPID },
	{ "sched_setaffinity(0)", call_affinity_self, 0, NOPID },
	{ "sched_setscheduler(getpid())", call_setscheduler_pid, EPERM, NOPID },
	{ "sched_setparam(getpid())", call_setparam_pid, EPERM, NOPID },
	{ "sched_setparam(0)", call_setparam_self, 0, NOPID },
	{ "sched_setattr(getpid())", call_setattr_pid, EPERM, NOPID },
	{ "migrate_pages(getpid())", call_migrate_pages_pid, EPERM, NOPID },
	{ "move_pages(getpid())", call_move_pages_pid, EPERM, NOPID },
	{ "get_robust_list(getpid())", call_robust_list_pid, EPERM, NOPID },
	{ "get_robust_list(0)", call_robust_list_self, EFAULT, NOPID },
	{ "kill(-1, 0)", call_kill_all, EPERM, NOPID },
	{ "kill(0xffffffff, 0)", call_kill_all_lo32, EPERM, NOPID },
	{ "kill(getpid(), 0)", call_kill_self, 0, NOPID },
	{ "pidfd_open(getpid())", call_pidfd_open_self, ENOSYS, NOPID },
	{ "process_madvise", call_process_madvise, EPERM, NOPID },
	{ "process_mrelease", call_process_mrelease, EPERM, NOPID },
	{ "kcmp", call_kcmp_self, EPERM, NOPID },
	/* With one (BASE): the kernel decides. */
	{ "prlimit64(getpid()) with a pid namespace", call_prlimit_pid, 0, BASE },
	{ "setpriority(PRIO_USER, uid) with a pid namespace", call_setpriority_user, ESRCH, BASE },
	{ "ioprio_set(IOPRIO_WHO_USER, uid) with a pid namespace", call_ioprio_user, ESRCH, BASE },
	{ "sched_setaffinity(getpid()) with a pid namespace", call_affinity_pid, 0, BASE },
	{ "sched_setattr(getpid()) with a pid namespace", call_setattr_pid, EINVAL, BASE },
	{ "kill(-1, 0) with a pid namespace", call_kill_all, 0, BASE },
	{ "pidfd_open(getpid()) with a pid namespace", call_pidfd_open_self, 0, BASE },
	{ "process_madvise with a pid namespace", call_process_madvise, EBADF, BASE },
	{ "kcmp with a pid namespace", call_kcmp_self, 0, BASE },
	{ "pidfd_getfd", call_pidfd_getfd, EPERM, BASE },
	/* No setuid or setgid modes, by any call. */
	{ "chmod(04755)", call_chmod_suid, EPERM, BASE },
	{ "chmod(02755)", call_chmod_sgid, EPERM, BASE },
	{ "chmod(0755)", call_chmod_plain, 0, BASE },
	{ "chmod(1<<32|0755)", call_chmod_hi, 0, BASE },
	{ "fchmod(04700)", call_fchmod_suid, EPERM, BASE },
	{ "fchmodat(02700)", call_fchmodat_sgid, EPERM, BASE },
	{ "fchmodat2(04755)", call_fchmodat2_suid, EPERM, BASE },
	{ "fchmodat2(0700)", call_fchmodat2_plain, 0, BASE },
	{ "open(O_CREAT, 04755)", call_open_suid, EPERM, BASE },
	{ "openat(O_CREAT, 02755)", call_openat_sgid, EPERM, BASE },
	{ "openat(O_CREAT, 0755)", call_openat_plain, 0, BASE },
	{ "creat(04700)", call_creat_suid, EPERM, BASE },
	{ "mknod(S_IFREG|04755)", call_mknod_suid, EPERM, BASE },
	{ "mknodat(S_IFREG|02755)", call_mknodat_sgid, EPERM, BASE },
	{ "mknod(S_IFIFO|0600)", call_mknod_fifo, 0, BASE },
	{ "openat2", call_openat2, ENOSYS, BASE },
	/* Leases and terminal state that outlive the run. */
	{ "fcntl(F_SETLEASE)", call_setlease, EPERM, BASE },
	{ "fcntl(1<<32|F_SETLEASE)", call_setlease_hi, EPERM, BASE },
	{ "fcntl(F_GETLEASE)", call_getlease, 0, BASE },
	{ "ioctl(TIOCEXCL)", call_tiocexcl, EPERM, BASE },
	{ "ioctl(1<<32|TIOCEXCL)", call_tiocexcl_hi, EPERM, BASE },
	{ "ioctl(TIOCSETD)", call_tiocsetd, EPERM, BASE },
	/* Kernel-global state (no capabilities guard it already: this is the second layer). */
	{ "syslog(SIZE_BUFFER)", call_syslog_size, EPERM, BASE },
	{ "_sysctl", call_sysctl, EPERM, BASE },
	{ "settimeofday(NULL, NULL)", call_settimeofday, EPERM, BASE },
	{ "clock_settime", call_clock_settime, EPERM, BASE },
	{ "sethostname", call_sethostname, EPERM, BASE },
	{ "setdomainname", call_setdomainname, EPERM, BASE },
	{ "quotactl_fd", call_quotactl_fd, EPERM, BASE },
	{ "open_tree_attr (by number)", call_open_tree_attr, EPERM, BASE },
};

static void run_sc_case(const struct sc_case *c, bool runtime)
{
	long r;

	apply_seccomp(c->when, runtime);
	errno = 0;
	r = c->call();
	if (c->want == 0)
		ck_assert_msg(r >= 0, "%s: want success, got %ld errno %d (%s)", c->name, r, errno,
			      strerror(errno));
	else
		ck_assert_msg(r < 0 && errno == c->want, "%s: want errno %d, got %ld errno %d (%s)",
			      c->name, c->want, r, errno, strerror(errno));
}

/* The default path: the program compiled at build time. */
START_TEST(test_seccomp_call)
{
	run_sc_case(&sc_cases[_i], false);
}
END_TEST

/* The run-time fallback (cross builds) must behave the same. */
START_TEST(test_seccomp_call_runtime)
{
	run_sc_case(&sc_cases[_i], true);
}
END_TEST

/* Without a filter the calls above behave differently (so the table can fail). */
START_TEST(test_seccomp_control)
{
	long r;

	errno = 0;
	r = call_pers_norandom();
	ck_assert_msg(r >= 0, "personality without filter: %s", strerror(errno));
	r = call_socket_inet();
	ck_assert_msg(r >= 0, "socket without filter: %s", strerror(errno));
	r = call_clone3();
	ck_assert(!(r < 0 && errno == ENOSYS));
	/* The issue 21 rows: each of these goes through without a filter. */
	r = call_chmod_suid();
	ck_assert_msg(r == 0, "chmod 04755 without filter: %s", strerror(errno));
	r = call_fchmodat2_suid();
	ck_assert_msg(r == 0 || errno == ENOSYS, "fchmodat2 without filter: %s", strerror(errno));
	r = call_open_suid();
	ck_assert_msg(r == 0, "open 04755 without filter: %s", strerror(errno));
	r = call_setlease();
	ck_assert_msg(r == 0, "F_SETLEASE without filter: %s", strerror(errno));
	r = call_tiocexcl();
	ck_assert(r < 0 && errno == ENOTTY);
	r = call_openat2();
	ck_assert(r < 0 && errno == EINVAL);
	r = call_prlimit_pid();
	ck_assert_msg(r == 0, "prlimit64(getpid()) without filter: %s", strerror(errno));
	r = call_prlimit_hi();
	ck_assert_msg(r == 0, "prlimit64(1<<32) without filter: %s", strerror(errno));
}
END_TEST

/* Run fn in a child with the filter loaded (runtime: compiled now); return its wait status. */
static int status_of_filtered(void (*fn)(void), bool runtime)
{
	int status;
	pid_t p = fork();

	ck_assert_int_ge(p, 0);
	if (p == 0) {
		struct cd_linux_plan lp = { .sandboxed = true,
					    .seccomp = true,
					    .sc_when = CD_SC_BASELINE };
		struct cd_backend_state *s = NULL;
		char *err = NULL;

		if (runtime && setenv("CORDON_TEST_DISABLE", "seccomp-precompiled", 1) < 0)
			_exit(98);
		if (fn &&
		    (cd_backend_seccomp.prepare(&lp, &s, &err) < 0 ||
		     cd_seccomp_state_precompiled(s) == runtime || cd_backend_seccomp.apply(s) < 0))
			_exit(99);
		if (fn)
			fn();
		_exit(0);
	}
	ck_assert_int_eq(waitpid(p, &status, 0), p);
	return status;
}

static void do_x32_getpid(void)
{
	/* getpid through the x32 ABI (bit 30 set). */
	syscall(0x40000000 | 39);
}

static void do_i386_getpid(void)
{
#if defined(__x86_64__)
	long ret;

	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	(void)ret;
#endif
}

START_TEST(test_seccomp_x32_killed)
{
#if defined(__x86_64__)
	int st = status_of_filtered(do_x32_getpid, _i);

	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "x32 call: status 0x%x", st);
#endif
}
END_TEST

START_TEST(test_seccomp_i386_killed)
{
#if defined(__x86_64__)
	int st;
	pid_t p = fork();

	/* Does this kernel run int 0x80 at all (IA32 emulation)? */
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		do_i386_getpid();
		_exit(0);
	}
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	if (!WIFEXITED(st)) {
		fprintf(stderr, "test-seccomp: no IA32 emulation (status 0x%x), skipping\n", st);
		return;
	}
	st = status_of_filtered(do_i386_getpid, _i);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "int 0x80: status 0x%x", st);
#endif
}
END_TEST

START_TEST(test_seccomp_disabled_is_noop)
{
	struct cd_linux_plan lp = { .sandboxed = true, .seccomp = false };
	struct cd_backend_state *s = prepare_ok(&cd_backend_seccomp, &lp);

	ck_assert_ptr_null(s);
	ck_assert_int_eq(cd_backend_seccomp.apply(s), 0);
	cd_backend_seccomp.destroy(s);
	ck_assert_int_eq(prctl(PR_GET_SECCOMP, 0, 0, 0, 0), 0);
}
END_TEST

/* The program starts with the arch check and ends with libseccomp's kill action. */
START_TEST(test_seccomp_program_shape)
{
	struct cd_linux_plan lp = { .sandboxed = true, .seccomp = true, .sc_when = BASE };
	struct cd_backend_state *s = prepare_ok(&cd_backend_seccomp, &lp);
	const struct sock_filter *f;
	const void *p;
	size_t n = cd_seccomp_state_insns(s, &p);
	bool kill = false;

	f = p;
	ck_assert_uint_gt(n, 10);
	ck_assert_uint_eq(f[0].code, BPF_LD | BPF_W | BPF_ABS);
	ck_assert_uint_eq(f[0].k, 4); /* offsetof(struct seccomp_data, arch) */
	for (size_t i = 0; i < n; i++)
		if (f[i].code == (BPF_RET | BPF_K) && f[i].k == SECCOMP_RET_KILL_PROCESS)
			kill = true;
	ck_assert(kill);
	ck_assert_uint_eq(cd_seccomp_state_unknown(s), 0);
	ck_assert(cd_seccomp_state_precompiled(s));
	cd_backend_seccomp.destroy(s);
}
END_TEST

/*
 * Runs a classic BPF program on a seccomp_data the way the kernel does
 * (the subset libseccomp and our prologue emit) and counts the
 * instructions executed. Returns the verdict, or 0xdead on anything it
 * does not know (which fails the caller's checks).
 */
static uint32_t bpf_run(const struct sock_filter *f, size_t n, const struct seccomp_data *d,
			unsigned *steps)
{
	uint32_t a = 0;
	size_t pc = 0;

	for (*steps = 0; pc < n; (*steps)++) {
		const struct sock_filter *i = &f[pc++];
		bool t;

		switch (i->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (i->k + 4 > sizeof(*d))
				return 0xdead;
			memcpy(&a, (const char *)d + i->k, 4);
			continue;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= i->k;
			continue;
		case BPF_JMP | BPF_JA:
			pc += i->k;
			continue;
		case BPF_RET | BPF_K:
			(*steps)++;
			return i->k;
		case BPF_JMP | BPF_JEQ | BPF_K:
			t = a == i->k;
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			t = a > i->k;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			t = a >= i->k;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			t = (a & i->k) != 0;
			break;
		default:
			return 0xdead;
		}
		pc += t ? i->jt : i->jf;
	}
	return 0xdead;
}

/*
 * The kernel runs the filter once per system call number when it is
 * loaded (to cache the ones always allowed), and the command runs it on
 * every system call: a linear chain of comparisons cost 80 us per start
 * and up to 50 comparisons per call. libseccomp's binary tree keeps every
 * path short; each number still gets the verdict the rule table says.
 */
START_TEST(test_seccomp_program_short_paths)
{
	struct cd_linux_plan lp = { .sandboxed = true,
				    .seccomp = true,
				    .sc_when = CD_SC_BASELINE | CD_SC_NET_RESTRICTED };
	struct cd_backend_state *s = prepare_ok(&cd_backend_seccomp, &lp);
	const void *p;
	size_t n = cd_seccomp_state_insns(s, &p);
	unsigned worst = 0, steps;
	struct seccomp_data d;

	ck_assert_uint_gt(n, 50);
	for (int nr = 0; nr < 512; nr++) {
		memset(&d, 0, sizeof(d));
		d.arch = seccomp_arch_native();
		d.nr = nr;
		/* A unix stream socket: allowed by the socket rules. */
		d.args[0] = AF_UNIX;
		d.args[1] = SOCK_STREAM;
		uint32_t v = bpf_run(p, n, &d, &steps);
		ck_assert_msg(v != 0xdead, "system call %d: the program did not finish", nr);
		if (steps > worst)
			worst = steps;
		if (nr == SYS_getpid || nr == SYS_read || nr == SYS_openat)
			ck_assert_uint_eq(v, SECCOMP_RET_ALLOW);
		if (nr == SYS_ptrace || nr == SYS_bpf || nr == SYS_connect)
			ck_assert_uint_eq(v, SECCOMP_RET_ERRNO | EPERM);
		if (nr == SYS_clone3)
			ck_assert_uint_eq(v, SECCOMP_RET_ERRNO | ENOSYS);
	}
	ck_assert_msg(worst <= 60, "a system call runs %u instructions (a linear chain?)", worst);
	cd_backend_seccomp.destroy(s);
}
END_TEST

/* ---- the programs compiled at build time ---- */

/* The group sets cd_linux_plan_build() produces. */
static const cd_sc_when group_sets[] = {
	CD_SC_BASELINE,
	CD_SC_BASELINE | CD_SC_NET_RESTRICTED,
	CD_SC_BASELINE | CD_SC_NO_PID_NS,
	CD_SC_BASELINE | CD_SC_NET_RESTRICTED | CD_SC_NO_PID_NS,
	CD_SC_BASELINE | CD_SC_NO_IPC_NS | CD_SC_NO_PID_NS,
	CD_SC_BASELINE | CD_SC_NET_RESTRICTED | CD_SC_NO_IPC_NS | CD_SC_NO_PID_NS,
};

static const struct cd_seccomp_precompiled *precompiled_for(cd_sc_when when)
{
	for (const struct cd_seccomp_precompiled *p = cd_seccomp_precompiled; p->insns; p++)
		if (p->when == when)
			return p;
	return NULL;
}

/*
 * The built-in program is byte for byte what the compiler produces now: a
 * change to cd_sc_rules[] or to the compiler without regenerating fails here.
 */
START_TEST(test_precompiled_matches_runtime)
{
	const struct scmp_version *v = seccomp_version();
	const struct cd_seccomp_precompiled *p = precompiled_for(group_sets[_i]);
	struct sock_filter *insns = NULL;
	size_t n = 0;
	unsigned unknown = 0;
	char *err = NULL;
	int r;

	/* Tests run only in native builds, which always generate the programs. */
	ck_assert_uint_ne(cd_seccomp_precompiled_arch, 0);
	ck_assert_uint_eq(cd_seccomp_precompiled_arch, seccomp_arch_native());
	ck_assert_ptr_nonnull(p);
	if (v->major != cd_seccomp_precompiled_version[0] ||
	    v->minor != cd_seccomp_precompiled_version[1] ||
	    v->micro != cd_seccomp_precompiled_version[2]) {
		/* Another libseccomp may lay out its code differently; nothing to compare. */
		fprintf(stderr,
			"test-seccomp: built with libseccomp %u.%u.%u, running %u.%u.%u: "
			"comparison skipped\n",
			cd_seccomp_precompiled_version[0], cd_seccomp_precompiled_version[1],
			cd_seccomp_precompiled_version[2], v->major, v->minor, v->micro);
		return;
	}
	r = cd_seccomp_compile(group_sets[_i], &insns, &n, &unknown, &err);
	ck_assert_msg(r == 0, "compile: %d %s", r, err ? err : "");
	ck_assert_uint_eq(n, p->n_insns);
	ck_assert_uint_eq(unknown, p->n_unknown);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(
			memcmp(&insns[i], &p->insns[i], sizeof(insns[i])) == 0,
			"sc_when 0x%x: instruction %zu differs: the built-in program is stale",
			(unsigned)group_sets[_i], i);
	free(insns);
}
END_TEST

/* The two group sets give different programs (the network rules are in one only). */
START_TEST(test_precompiled_distinct)
{
	const struct cd_seccomp_precompiled *a = precompiled_for(group_sets[0]);
	const struct cd_seccomp_precompiled *b = precompiled_for(group_sets[1]);

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_gt(b->n_insns, a->n_insns);
}
END_TEST

/* prepare takes the built-in program by default, and compiles when told not to. */
START_TEST(test_prepare_uses_precompiled)
{
	struct cd_linux_plan lp = { .sandboxed = true, .seccomp = true, .sc_when = group_sets[_i] };
	const struct cd_seccomp_precompiled *p = precompiled_for(group_sets[_i]);
	struct cd_backend_state *s;
	const void *insns;
	size_t n;

	ck_assert_ptr_nonnull(p);
	s = prepare_ok(&cd_backend_seccomp, &lp);
	ck_assert(cd_seccomp_state_precompiled(s));
	n = cd_seccomp_state_insns(s, &insns);
	ck_assert_ptr_eq(insns, p->insns);
	ck_assert_uint_eq(n, p->n_insns);
	ck_assert_uint_eq(cd_seccomp_state_unknown(s), p->n_unknown);
	cd_backend_seccomp.destroy(s);

	force_runtime_compile();
	s = prepare_ok(&cd_backend_seccomp, &lp);
	ck_assert(!cd_seccomp_state_precompiled(s));
	n = cd_seccomp_state_insns(s, &insns);
	ck_assert_ptr_ne(insns, p->insns);
	ck_assert_uint_eq(n, p->n_insns);
	cd_backend_seccomp.destroy(s);
}
END_TEST

/* A group set nobody generated is compiled at run time, and works. */
START_TEST(test_prepare_other_groups_compile)
{
	struct cd_linux_plan lp = { .sandboxed = true,
				    .seccomp = true,
				    .sc_when = CD_SC_NET_RESTRICTED };
	struct cd_backend_state *s = prepare_ok(&cd_backend_seccomp, &lp);

	ck_assert_ptr_null(precompiled_for(CD_SC_NET_RESTRICTED));
	ck_assert(!cd_seccomp_state_precompiled(s));
	ck_assert_int_eq(cd_backend_seccomp.apply(s), 0);
	cd_backend_seccomp.destroy(s);
	/* Only the network rules: ptrace is allowed, AF_INET sockets are not. */
	errno = 0;
	ck_assert_int_eq(call_socket_inet(), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_ge(call_socket_unix(), 0);
	ck_assert_int_ge(call_pers_norandom(), 0);
}
END_TEST

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Time 20 prepares of the BASE plan: *cold is the first, the result the best. */
static double time_prepare(double *cold, bool want_precompiled)
{
	struct cd_linux_plan lp = { .sandboxed = true, .seccomp = true, .sc_when = BASE };
	double t0, best = 1e9;

	for (int i = 0; i < 20; i++) {
		struct cd_backend_state *s;
		double d;

		t0 = now_us();
		s = prepare_ok(&cd_backend_seccomp, &lp);
		d = now_us() - t0;
		if (i == 0)
			*cold = d;
		if (d < best)
			best = d;
		ck_assert_int_eq(cd_seccomp_state_precompiled(s), want_precompiled);
		cd_backend_seccomp.destroy(s);
	}
	return best;
}

START_TEST(test_seccomp_prepare_time)
{
	double cold, best, rt_cold, rt_best;

	/* The precompiled path first, so that libseccomp is still cold for the second. */
	best = time_prepare(&cold, true);
	force_runtime_compile();
	rt_best = time_prepare(&rt_cold, false);
	fprintf(stderr,
		"test-seccomp: prepare took %.1f us cold, %.1f us warm (best of 20); "
		"compiling at run time: %.0f us cold, %.0f us warm\n",
		cold, best, rt_cold, rt_best);
	/* Generous bounds: catch a pathological regression, not machine noise. */
	ck_assert(best < 100);
	ck_assert(rt_best < 5000);
}
END_TEST

/* ---- capabilities ---- */

static void assert_caps_zero_n(const char *status_text, size_t n_keys)
{
	static const char *const keys[] = { "CapInh:", "CapPrm:", "CapEff:", "CapAmb:", "CapBnd:" };

	for (size_t k = 0; k < n_keys && k < CD_ARRAY_SIZE(keys); k++) {
		const char *l = strstr(status_text, keys[k]);
		unsigned long long v = 1;

		ck_assert_msg(l, "%s missing", keys[k]);
		ck_assert_int_eq(sscanf(l + strlen(keys[k]), " %llx", &v), 1);
		ck_assert_msg(v == 0, "%s is %llx", keys[k], v);
	}
}

static void assert_caps_zero(const char *status_text)
{
	assert_caps_zero_n(status_text, 5);
}

static void read_fd_all(int fd, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n;

	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = 0;
}

START_TEST(test_caps_dropped)
{
	struct cd_linux_plan lp = { .sandboxed = true };
	struct cd_backend_state *s;
	char buf[8192];
	int fd, pfd[2], st;
	pid_t p;

	s = prepare_ok(&cd_backend_caps, &lp);
	if (geteuid() != 0) {
		/* No CAP_SETPCAP: the bounding set stays; no_new_privs makes that harmless. */
		ck_assert_int_eq(cd_backend_caps.apply(s), 0);
		ck_assert_int_eq(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
		fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		read_fd_all(fd, buf, sizeof(buf));
		close(fd);
		assert_caps_zero_n(buf, 4);
		cd_backend_caps.destroy(s);
		return;
	}
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(cd_backend_caps.apply(s), 0);

	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	read_fd_all(fd, buf, sizeof(buf));
	close(fd);
	assert_caps_zero(buf);

	/* And after exec, as uid 0. */
	ck_assert_int_eq(pipe(pfd), 0);
	p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		dup2(pfd[1], 1);
		execl("/bin/cat", "cat", "/proc/self/status", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	read_fd_all(pfd[0], buf, sizeof(buf));
	close(pfd[0]);
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_caps_zero(buf);
	cd_backend_caps.destroy(s);
}
END_TEST

/* In a user namespace (full capabilities there) everything is dropped, bounding set included. */
START_TEST(test_caps_in_userns)
{
	struct cd_linux_plan lp = { .sandboxed = true, .user_ns = true, .mount_ns = true };
	struct cd_backend_state *ns = prepare_ok(&cd_backend_namespaces, &lp);
	struct cd_backend_state *caps = prepare_ok(&cd_backend_caps, &lp);
	char buf[8192];
	int fd;

	ck_assert_int_eq(cd_backend_namespaces.apply(ns), 0);
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	read_fd_all(fd, buf, sizeof(buf));
	close(fd);
	ck_assert_ptr_null(strstr(buf, "CapEff:\t0000000000000000"));
	ck_assert_int_eq(cd_backend_caps.apply(caps), 0);
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	read_fd_all(fd, buf, sizeof(buf));
	close(fd);
	assert_caps_zero(buf);
	cd_backend_caps.destroy(caps);
	cd_backend_namespaces.destroy(ns);
}
END_TEST

/* ---- namespaces ---- */

struct ns_fixture {
	char dir[64];
	char ro[96], rw[128], ro_file[128], mask[96];
};

static void ns_setup(struct ns_fixture *f)
{
	int fd;

	snprintf(f->dir, sizeof(f->dir), "/tmp/cordon-ns-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(f->ro, sizeof(f->ro), "%s/ro", f->dir);
	snprintf(f->rw, sizeof(f->rw), "%s/ro/rw", f->dir);
	snprintf(f->ro_file, sizeof(f->ro_file), "%s/ro/file", f->dir);
	snprintf(f->mask, sizeof(f->mask), "%s/.git", f->dir);
	ck_assert_int_eq(mkdir(f->ro, 0755), 0);
	ck_assert_int_eq(mkdir(f->rw, 0755), 0);
	fd = open(f->ro_file, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static void ns_cleanup(struct ns_fixture *f)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", f->dir);
}

static int child_checks(const struct ns_fixture *f)
{
	char path[160];
	struct stat st;
	int fd;

	/* Read-only bind: no new file, no writing to an existing one. */
	snprintf(path, sizeof(path), "%s/new", f->ro);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0 || errno != EROFS)
		return 10;
	fd = open(f->ro_file, O_WRONLY | O_CLOEXEC);
	if (fd >= 0 || errno != EROFS)
		return 11;
	/* Writable bind below it. */
	snprintf(path, sizeof(path), "%s/new", f->rw);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return 12;
	close(fd);
	/*
	 * The mask looks missing (a dangling symlink: stat and lookups below
	 * it say ENOENT) and nothing can be made there or through it.
	 */
	if (stat(f->mask, &st) == 0 || errno != ENOENT)
		return 13;
	if (lstat(f->mask, &st) < 0 || !S_ISLNK(st.st_mode))
		return 13;
	snprintf(path, sizeof(path), "%s/config", f->mask);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0 || errno != ENOENT)
		return 14;
	if (mkdir(f->mask, 0755) == 0 || errno != EEXIST)
		return 15;
	if (unlink(f->mask) == 0 || errno != EBUSY)
		return 16;
	if (rename(f->mask, path) == 0)
		return 16;
	/* Creating through the link fails: its target is in procfs' root. */
	fd = open(f->mask, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0)
		return 18;
	if (symlink("/tmp", f->mask) == 0 || errno != EEXIST)
		return 19;
	/* Outside the carve-outs: writable. */
	snprintf(path, sizeof(path), "%s/outside", f->dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return 17;
	close(fd);
	return 0;
}

static void run_ns_test(bool user_ns)
{
	struct ns_fixture f;
	struct cd_mount mounts[3];
	struct cd_linux_plan lp = { .sandboxed = true,
				    .mount_ns = true,
				    .user_ns = user_ns,
				    .mounts = mounts,
				    .n_mounts = 3 };
	struct cd_backend_state *s;
	char path[160];
	struct stat st;
	int st_code, fd;
	pid_t p;

	if (geteuid() != 0 && !user_ns) {
		fprintf(stderr, "test-seccomp: not root, skipping\n");
		return;
	}
	ns_setup(&f);
	mounts[0] = (struct cd_mount){ CD_MOUNT_RO_BIND, f.ro, "test" };
	mounts[1] = (struct cd_mount){ CD_MOUNT_RW_BIND, f.rw, "test" };
	mounts[2] = (struct cd_mount){ CD_MOUNT_MASK, f.mask, "test" };
	s = prepare_ok(&cd_backend_namespaces, &lp);
	ck_assert_ptr_nonnull(s);
	/* prepare created the mask's mount point on the host: a 0444 FIFO. */
	ck_assert_int_eq(lstat(f.mask, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0444);

	p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		int r = cd_backend_namespaces.apply(s);

		if (r < 0) {
			fprintf(stderr, "apply failed at %s: %s\n",
				cd_backend_namespaces.last_step(s), strerror(-r));
			_exit(2);
		}
		_exit(child_checks(&f));
	}
	ck_assert_int_eq(waitpid(p, &st_code, 0), p);
	ck_assert_msg(WIFEXITED(st_code) && WEXITSTATUS(st_code) == 0, "child status 0x%x",
		      st_code);

	/* Nothing leaked to the host: the directory is writable here. */
	snprintf(path, sizeof(path), "%s/host", f.ro);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);

	cd_backend_namespaces.finish(s);
	ck_assert_msg(stat(f.mask, &st) < 0 && errno == ENOENT, "mask not removed");
	cd_backend_namespaces.destroy(s);
	ns_cleanup(&f);
}

START_TEST(test_ns_root)
{
	run_ns_test(false);
}
END_TEST

START_TEST(test_ns_userns)
{
	run_ns_test(true);
}
END_TEST

/* A path replaced between prepare and apply is refused. */
START_TEST(test_ns_swapped_path)
{
	struct ns_fixture f;
	struct cd_mount m;
	struct cd_linux_plan lp = {
		.sandboxed = true, .mount_ns = true, .mounts = &m, .n_mounts = 1
	};
	struct cd_backend_state *s;
	char moved[160];
	int st;
	pid_t p;

	if (geteuid() != 0) {
		fprintf(stderr, "test-seccomp: not root, skipping\n");
		return;
	}
	ns_setup(&f);
	m = (struct cd_mount){ CD_MOUNT_RO_BIND, f.ro, "test" };
	s = prepare_ok(&cd_backend_namespaces, &lp);
	snprintf(moved, sizeof(moved), "%s/moved", f.dir);
	ck_assert_int_eq(rename(f.ro, moved), 0);
	ck_assert_int_eq(mkdir(f.ro, 0755), 0);
	p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0)
		_exit(cd_backend_namespaces.apply(s) == -ESTALE ? 0 : 1);
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cd_backend_namespaces.destroy(s);
	ns_cleanup(&f);
}
END_TEST

/* A mask another run still binds is left in place; one that appeared is refused. */
START_TEST(test_ns_mask_shared)
{
	struct ns_fixture f;
	struct cd_mount m1, m2;
	struct cd_linux_plan lp1 = {
		.sandboxed = true, .mount_ns = true, .mounts = &m1, .n_mounts = 1
	};
	struct cd_linux_plan lp2 = {
		.sandboxed = true, .mount_ns = true, .mounts = &m2, .n_mounts = 1
	};
	struct cd_backend_state *s1, *s2, *s3;
	struct stat st;

	ns_setup(&f);
	m1 = (struct cd_mount){ CD_MOUNT_MASK, f.mask, "test" };
	s1 = prepare_ok(&cd_backend_namespaces, &lp1);
	/* A concurrent run planned the same mask: it shares it instead of failing. */
	s2 = prepare_ok(&cd_backend_namespaces, &lp1);
	/* A run that saw the mask as an existing FIFO masks it too and shares it. */
	m2 = (struct cd_mount){ CD_MOUNT_RO_BIND, f.mask, "test" };
	s3 = prepare_ok(&cd_backend_namespaces, &lp2);
	cd_backend_namespaces.destroy(s1);
	ck_assert_msg(stat(f.mask, &st) == 0, "mask removed while two runs still use it");
	cd_backend_namespaces.destroy(s3);
	ck_assert_msg(stat(f.mask, &st) == 0, "mask removed while one run still uses it");
	/* The last user removes it, whoever made it. */
	cd_backend_namespaces.destroy(s2);
	ck_assert_msg(stat(f.mask, &st) < 0 && errno == ENOENT, "mask left behind by the last run");
	ns_cleanup(&f);
}
END_TEST

/*
 * The masks of one directory are names of one FIFO; a run that shares only
 * some of them, and finishes last, removes all of them.
 */
START_TEST(test_ns_mask_group)
{
	static const char *const names[] = { ".git", ".codex", ".agents" };
	struct ns_fixture f;
	struct cd_mount m1[3], m2[2];
	struct cd_linux_plan lp1 = {
		.sandboxed = true, .mount_ns = true, .mounts = m1, .n_mounts = 3
	};
	struct cd_linux_plan lp2 = {
		.sandboxed = true, .mount_ns = true, .mounts = m2, .n_mounts = 2
	};
	struct cd_backend_state *s1, *s2;
	char paths[3][128];
	struct stat st, first;

	ns_setup(&f);
	for (size_t i = 0; i < 3; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/%s", f.dir, names[i]);
		m1[i] = (struct cd_mount){ CD_MOUNT_MASK, paths[i], "test" };
	}
	s1 = prepare_ok(&cd_backend_namespaces, &lp1);
	ck_assert_int_eq(lstat(paths[0], &first), 0);
	ck_assert(S_ISFIFO(first.st_mode) && (first.st_mode & 07777) == 0444);
	ck_assert_int_eq(first.st_nlink, 3);
	for (size_t i = 1; i < 3; i++) {
		ck_assert_int_eq(lstat(paths[i], &st), 0);
		ck_assert_msg(st.st_ino == first.st_ino && st.st_dev == first.st_dev,
			      "%s is not a name of the first mask", paths[i]);
	}
	/* A concurrent run that masks two of the names shares them. */
	m2[0] = (struct cd_mount){ CD_MOUNT_MASK, paths[0], "test" };
	m2[1] = (struct cd_mount){ CD_MOUNT_RO_BIND, paths[2], "test" };
	s2 = prepare_ok(&cd_backend_namespaces, &lp2);
	cd_backend_namespaces.destroy(s1);
	for (size_t i = 0; i < 3; i++)
		ck_assert_msg(lstat(paths[i], &st) == 0, "%s removed while a run uses it",
			      paths[i]);
	/* The last user removes every name, the one it did not use too. */
	cd_backend_namespaces.destroy(s2);
	for (size_t i = 0; i < 3; i++)
		ck_assert_msg(lstat(paths[i], &st) < 0 && errno == ENOENT, "%s left behind",
			      paths[i]);
	ns_cleanup(&f);
}
END_TEST

START_TEST(test_ns_mask_not_adopted)
{
	/*
	 * A directory, an empty 0444 regular file or a FIFO of another mode
	 * under the name is the user's: never adopted, never removed.
	 */
	struct ns_fixture f;
	struct cd_mount m;
	struct cd_linux_plan lp = {
		.sandboxed = true, .mount_ns = true, .mounts = &m, .n_mounts = 1
	};
	struct cd_backend_state *s = NULL;
	char *err = NULL;
	struct stat st;
	int fd;

	ns_setup(&f);
	ck_assert_int_eq(mkdir(f.mask, 0755), 0);
	m = (struct cd_mount){ CD_MOUNT_MASK, f.mask, "test" };
	ck_assert_int_eq(prepare_all(&cd_backend_namespaces, &lp, &s, &err), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err, "appeared after binding"));
	free(err);
	err = NULL;
	ck_assert_int_eq(rmdir(f.mask), 0);

	/* An empty 0444 regular file: bound read-only, kept. */
	fd = open(f.mask, O_CREAT | O_WRONLY | O_CLOEXEC, 0444);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchmod(fd, 0444), 0);
	close(fd);
	m = (struct cd_mount){ CD_MOUNT_RO_BIND, f.mask, "test" };
	s = prepare_ok(&cd_backend_namespaces, &lp);
	cd_backend_namespaces.destroy(s);
	ck_assert_msg(stat(f.mask, &st) == 0 && S_ISREG(st.st_mode),
		      "an empty 0444 file was removed");
	m = (struct cd_mount){ CD_MOUNT_MASK, f.mask, "test" };
	ck_assert_int_eq(prepare_all(&cd_backend_namespaces, &lp, &s, &err), -EEXIST);
	free(err);
	err = NULL;
	ck_assert_int_eq(unlink(f.mask), 0);

	/* A 0644 FIFO: adoption must not block opening it, and leaves it alone. */
	ck_assert_int_eq(mkfifo(f.mask, 0644), 0);
	ck_assert_int_eq(chmod(f.mask, 0644), 0);
	ck_assert_int_eq(prepare_all(&cd_backend_namespaces, &lp, &s, &err), -EEXIST);
	free(err);
	ck_assert_msg(lstat(f.mask, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was touched");
	ck_assert_int_eq(unlink(f.mask), 0);
	ns_cleanup(&f);
}
END_TEST

/* A mask that its last user is removing right now is not adopted: a new one is made. */
START_TEST(test_ns_mask_being_removed)
{
	struct ns_fixture f;
	struct cd_mount m;
	struct cd_linux_plan lp = {
		.sandboxed = true, .mount_ns = true, .mounts = &m, .n_mounts = 1
	};
	struct cd_backend_state *s;
	struct stat st;
	int pfd[2], st_code;
	char c;

	ns_setup(&f);
	ck_assert_int_eq(pipe(pfd), 0);
	/* The finishing run: holds the mask's exclusive lock, then unlinks it. */
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		int fd = mkfifo(f.mask, 0444) == 0 ? open(f.mask, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
						   : -1;
		if (fd < 0 || fchmod(fd, 0444) < 0 || flock(fd, LOCK_EX) < 0)
			_exit(1);
		if (write(pfd[1], "x", 1) != 1)
			_exit(1);
		usleep(30 * 1000);
		_exit(unlink(f.mask) == 0 ? 0 : 1);
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &c, 1), 1);
	close(pfd[0]);
	/* This run finds the name while the lock is held, waits, and sees it go. */
	m = (struct cd_mount){ CD_MOUNT_MASK, f.mask, "test" };
	s = prepare_ok(&cd_backend_namespaces, &lp);
	ck_assert_int_eq(waitpid(p, &st_code, 0), p);
	ck_assert(WIFEXITED(st_code) && WEXITSTATUS(st_code) == 0);
	/* The old one was unlinked: a mask there now is the new one this run made. */
	ck_assert_msg(lstat(f.mask, &st) == 0 && S_ISFIFO(st.st_mode),
		      "a mask being removed was adopted instead of making a new one");
	cd_backend_namespaces.destroy(s);
	ck_assert_msg(lstat(f.mask, &st) < 0 && errno == ENOENT, "mask left behind");
	ns_cleanup(&f);
}
END_TEST

START_TEST(test_ns_destroy_without_finish)
{
	struct ns_fixture f;
	struct cd_mount m;
	struct cd_linux_plan lp = {
		.sandboxed = true, .mount_ns = true, .mounts = &m, .n_mounts = 1
	};
	struct cd_backend_state *s;
	struct stat st;

	ns_setup(&f);
	m = (struct cd_mount){ CD_MOUNT_MASK, f.mask, "test" };
	s = prepare_ok(&cd_backend_namespaces, &lp);
	ck_assert_int_eq(stat(f.mask, &st), 0);
	cd_backend_namespaces.destroy(s);
	ck_assert_msg(stat(f.mask, &st) < 0 && errno == ENOENT, "mask left behind");
	ns_cleanup(&f);
}
END_TEST

/* Pins: a directory bound on itself cannot be renamed or removed, and stays writable. */
struct pin_fixture {
	char p[96], w[112], git[128], moved[96], file[128];
};

static int pin_child_checks(const struct ns_fixture *f, const struct pin_fixture *x)
{
	char path[160];
	int fd;

	if (rename(x->p, x->moved) == 0 || errno != EBUSY)
		return 10;
	snprintf(path, sizeof(path), "%s/w2", x->p);
	if (rename(x->w, path) == 0 || errno != EBUSY)
		return 11;
	if (rmdir(x->w) == 0 || errno != EBUSY)
		return 12;
	/* The access is unchanged: writable, and the carve-out below is still there. */
	fd = open(x->file, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return 13;
	close(fd);
	snprintf(path, sizeof(path), "%s/config", x->git);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0 || errno != EROFS)
		return 14;
	/* Outside the pins: still renamable. */
	snprintf(path, sizeof(path), "%s/ro-moved", f->dir);
	if (rename(f->ro, path) < 0 || rename(path, f->ro) < 0)
		return 15;
	return 0;
}

static void run_pin_test(bool user_ns)
{
	struct ns_fixture f;
	struct pin_fixture x;
	struct cd_mount mounts[3];
	struct cd_linux_plan lp = { .sandboxed = true,
				    .mount_ns = true,
				    .user_ns = user_ns,
				    .mounts = mounts,
				    .n_mounts = 3 };
	struct cd_backend_state *s;
	struct stat st;
	int st_code;
	pid_t p;

	if (geteuid() != 0 && !user_ns) {
		fprintf(stderr, "test-seccomp: not root, skipping\n");
		return;
	}
	ns_setup(&f);
	snprintf(x.p, sizeof(x.p), "%s/p", f.dir);
	snprintf(x.w, sizeof(x.w), "%s/p/w", f.dir);
	snprintf(x.git, sizeof(x.git), "%s/p/w/.git", f.dir);
	snprintf(x.moved, sizeof(x.moved), "%s/moved", f.dir);
	snprintf(x.file, sizeof(x.file), "%s/p/w/new", f.dir);
	ck_assert_int_eq(mkdir(x.p, 0755), 0);
	ck_assert_int_eq(mkdir(x.w, 0755), 0);
	ck_assert_int_eq(mkdir(x.git, 0755), 0);
	mounts[0] = (struct cd_mount){ CD_MOUNT_PIN, x.p, "test" };
	mounts[1] = (struct cd_mount){ CD_MOUNT_PIN, x.w, "test" };
	mounts[2] = (struct cd_mount){ CD_MOUNT_RO_BIND, x.git, "test" };
	s = prepare_ok(&cd_backend_namespaces, &lp);

	p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		int r = cd_backend_namespaces.apply(s);

		if (r < 0) {
			fprintf(stderr, "apply failed at %s: %s\n",
				cd_backend_namespaces.last_step(s), strerror(-r));
			_exit(2);
		}
		_exit(pin_child_checks(&f, &x));
	}
	ck_assert_int_eq(waitpid(p, &st_code, 0), p);
	ck_assert_msg(WIFEXITED(st_code) && WEXITSTATUS(st_code) == 0, "child status 0x%x",
		      st_code);
	/* The file written through the pin is on the host; the pin is not. */
	ck_assert_int_eq(stat(x.file, &st), 0);
	ck_assert_int_eq(rename(x.p, x.moved), 0);
	cd_backend_namespaces.finish(s);
	cd_backend_namespaces.destroy(s);
	ns_cleanup(&f);
}

START_TEST(test_ns_pin_root)
{
	run_pin_test(false);
}
END_TEST

START_TEST(test_ns_pin_userns)
{
	run_pin_test(true);
}
END_TEST

START_TEST(test_ns_pin_not_a_directory)
{
	/* A pin is only ever planned on a directory; anything else changed since. */
	struct ns_fixture f;
	struct cd_mount m;
	struct cd_linux_plan lp = {
		.sandboxed = true, .mount_ns = true, .mounts = &m, .n_mounts = 1
	};
	struct cd_backend_state *s = NULL;
	char *err = NULL;

	ns_setup(&f);
	m = (struct cd_mount){ CD_MOUNT_PIN, f.ro_file, "test" };
	ck_assert_int_eq(prepare_all(&cd_backend_namespaces, &lp, &s, &err), -ESTALE);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(err, "changed type"));
	free(err);
	ns_cleanup(&f);
}
END_TEST

START_TEST(test_ns_empty_plan)
{
	struct cd_linux_plan lp = { .sandboxed = true };
	struct cd_backend_state *s = prepare_ok(&cd_backend_namespaces, &lp);

	ck_assert_ptr_null(s);
	ck_assert_int_eq(cd_backend_namespaces.apply(s), 0);
	cd_backend_namespaces.finish(s);
	cd_backend_namespaces.destroy(s);
}
END_TEST

START_TEST(test_backends_order)
{
	ck_assert_ptr_eq(cd_backends[0], &cd_backend_namespaces);
	ck_assert_ptr_eq(cd_backends[1], &cd_backend_caps);
	ck_assert_ptr_eq(cd_backends[2], &cd_backend_landlock);
	ck_assert_ptr_eq(cd_backends[3], &cd_backend_seccomp);
	ck_assert_ptr_null(cd_backends[4]);
}
END_TEST

static Suite *seccomp_suite(void)
{
	Suite *s = suite_create("seccomp");
	TCase *tc;

	tc = tcase_create("seccomp");
	tcase_add_loop_test(tc, test_seccomp_call, 0, (int)CD_ARRAY_SIZE(sc_cases));
	tcase_add_loop_test(tc, test_seccomp_call_runtime, 0, (int)CD_ARRAY_SIZE(sc_cases));
	tcase_add_test(tc, test_seccomp_control);
	/* Loop index: 0 = precompiled program, 1 = compiled at run time. */
	tcase_add_loop_test(tc, test_seccomp_x32_killed, 0, 2);
	tcase_add_loop_test(tc, test_seccomp_i386_killed, 0, 2);
	tcase_add_test(tc, test_seccomp_disabled_is_noop);
	tcase_add_test(tc, test_seccomp_program_shape);
	tcase_add_test(tc, test_seccomp_program_short_paths);
	tcase_add_test(tc, test_seccomp_prepare_time);
	suite_add_tcase(s, tc);

	tc = tcase_create("precompiled");
	tcase_add_loop_test(tc, test_precompiled_matches_runtime, 0,
			    (int)CD_ARRAY_SIZE(group_sets));
	tcase_add_test(tc, test_precompiled_distinct);
	tcase_add_loop_test(tc, test_prepare_uses_precompiled, 0, (int)CD_ARRAY_SIZE(group_sets));
	tcase_add_test(tc, test_prepare_other_groups_compile);
	suite_add_tcase(s, tc);

	tc = tcase_create("capabilities");
	tcase_add_test(tc, test_caps_dropped);
	tcase_add_test(tc, test_caps_in_userns);
	suite_add_tcase(s, tc);

	tc = tcase_create("namespaces");
	tcase_add_test(tc, test_ns_root);
	tcase_add_test(tc, test_ns_userns);
	tcase_add_test(tc, test_ns_swapped_path);
	tcase_add_test(tc, test_ns_mask_shared);
	tcase_add_test(tc, test_ns_mask_group);
	tcase_add_test(tc, test_ns_mask_not_adopted);
	tcase_add_test(tc, test_ns_mask_being_removed);
	tcase_add_test(tc, test_ns_destroy_without_finish);
	tcase_add_test(tc, test_ns_empty_plan);
	tcase_add_test(tc, test_ns_pin_root);
	tcase_add_test(tc, test_ns_pin_userns);
	tcase_add_test(tc, test_ns_pin_not_a_directory);
	tcase_add_test(tc, test_backends_order);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(seccomp_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
