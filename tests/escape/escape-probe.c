/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * escape-probe NAME [ARGS]: attempt one escape from the sandbox, run inside
 * it by tests/escape/escape.sh. Every probe knows what "denied" looks like
 * for its attempt, so the verdict is its exit status:
 *
 *   0  denied (prints "denied: WHAT: WHY")
 *   1  ESCAPED (prints "ESCAPED: WHAT")
 *   2  usage or setup error: the probe could not try (prints why)
 *
 * Probes whose name starts with "allowed-" check the opposite: that
 * something the sandbox must permit works (0 = it worked).
 *
 * One program rather than one per probe: one thing to build and copy (the
 * unprivileged run copies it for another user), and each probe stays a
 * small function attempting exactly one thing.
 *
 * Outside the sandbox, "escape-probe listen DIR INSIDE" binds a pathname
 * unix stream socket (DIR/sock), a unix datagram socket (DIR/dgram), a
 * stream socket at INSIDE (a path in the workspace), an abstract one and a
 * TCP port on 127.0.0.1, writes the names to DIR/abstract and
 * DIR/tcp-port, and waits to be killed: the targets of the connect and
 * send probes. "escape-probe host-i386", also outside, says whether this
 * host runs i386 system calls at all (exit 0) or not (2, and how it
 * failed): a kernel without a working 32-bit entry refuses int 0x80 to
 * everyone, and the sandbox's denial cannot be told apart from that.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shared/fd-util.h"

#ifndef CD_ARRAY_SIZE
#define CD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define SYS_fchmodat2_NR      452
#define IOPRIO_WHO_PROCESS_NR 1
#define IOPRIO_WHO_USER_NR    3
#ifndef TIOCGEXCL
#define TIOCGEXCL _IOR('T', 0x40, int)
#endif

static const char *probe;

/* One verdict line, "LABEL: PROBE: details"; returns code (the exit status). */
static int verdict(int code, const char *label, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static int verdict(int code, const char *label, const char *fmt, va_list ap)
{
	printf("%s: %s: ", label, probe);
	vprintf(fmt, ap);
	putchar('\n');
	return code;
}

#define VERDICT_FN(name, code, label)                                                \
	static int name(const char *fmt, ...) __attribute__((format(printf, 1, 2))); \
	static int name(const char *fmt, ...)                                        \
	{                                                                            \
		va_list ap;                                                          \
		va_start(ap, fmt);                                                   \
		int r = verdict(code, label, fmt, ap);                               \
		va_end(ap);                                                          \
		return r;                                                            \
	}
VERDICT_FN(denied, 0, "denied")
VERDICT_FN(escaped, 1, "ESCAPED")
VERDICT_FN(setup_error, 2, "cannot try")

/* The errnos by which the sandbox says no (Landlock, seccomp, read-only mounts, DAC). */
static bool is_denial(int e)
{
	return e == EPERM || e == EACCES || e == EROFS;
}

/* A failed call's verdict: denied for a denial errno, a setup error otherwise. */
static int verdict_errno(int e, const char *what)
{
	if (is_denial(e))
		return denied("%s: %s", what, strerror(e));
	return setup_error("%s failed with %s, which is not a denial", what, strerror(e));
}

/* ---- file system ---- */

static int p_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return verdict_errno(errno, "open for writing");
	bool wrote = write(fd, "x", 1) == 1;
	close(fd);
	return wrote ? escaped("wrote to %s", path) : escaped("opened %s for writing", path);
}

/* Writes that may end in ENOENT too: a masked name, a dangling link target. */
static int p_write_or_missing(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == EEXIST || errno == ELOOP))
		return denied("open for writing: %s", strerror(errno));
	if (fd < 0)
		return verdict_errno(errno, "open for writing");
	close(fd);
	return escaped("created or opened %s for writing", path);
}

static int p_mkdir(const char *path)
{
	if (mkdir(path, 0755) == 0)
		return escaped("created the directory %s", path);
	if (errno == EEXIST || errno == ENOENT || errno == ENOTDIR)
		return denied("mkdir: %s", strerror(errno));
	return verdict_errno(errno, "mkdir");
}

static int p_symlink(const char *target, const char *path)
{
	if (symlink(target, path) == 0)
		return escaped("made %s a symlink to %s", path, target);
	if (errno == EEXIST || errno == EBUSY)
		return denied("symlink: %s", strerror(errno));
	return verdict_errno(errno, "symlink");
}

static int p_rename(const char *from, const char *to)
{
	if (rename(from, to) == 0)
		return escaped("renamed %s to %s", from, to);
	if (errno == EBUSY || errno == EXDEV)
		return denied("rename: %s", strerror(errno));
	return verdict_errno(errno, "rename");
}

static int p_unlink(const char *path)
{
	if (unlink(path) == 0 || (errno == EISDIR && rmdir(path) == 0))
		return escaped("removed %s", path);
	if (errno == EBUSY || errno == ENOTEMPTY)
		return denied("unlink: %s", strerror(errno));
	return verdict_errno(errno, "unlink");
}

/* A hard link of an outside file into the workspace, then a write through it. */
static int p_hardlink(const char *outside, const char *inside)
{
	if (link(outside, inside) < 0) {
		if (errno == EXDEV)
			return denied("link: %s", strerror(errno));
		return verdict_errno(errno, "link");
	}
	int fd = open(inside, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		(void)unlink(inside);
		return is_denial(e)
			       ? escaped("linked %s into the workspace (not writable through it)",
					 outside)
			       : setup_error("open: %s", strerror(e));
	}
	close(fd);
	return escaped("linked %s into the workspace and opened it for writing", outside);
}

static int p_truncate(const char *path)
{
	if (truncate(path, 0) == 0)
		return escaped("truncated %s", path);
	return verdict_errno(errno, "truncate");
}

static int p_mknod_char(const char *path)
{
	if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) == 0)
		return escaped("made a device node at %s", path);
	return verdict_errno(errno, "mknod");
}

static int p_mkfifo(const char *path)
{
	if (mkfifo(path, 0600) == 0)
		return escaped("made a FIFO at %s", path);
	return verdict_errno(errno, "mkfifo");
}

static int p_bind_unix(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sun.sun_path))
		return setup_error("path too long");
	strcpy(sun.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return setup_error("socket: %s", strerror(errno));
	int r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	int e = errno;
	close(fd);
	if (r == 0)
		return escaped("bound a unix socket at %s", path);
	return verdict_errno(e, "bind");
}

/* Reopen a read-only fd for writing through /proc/self/fd. */
static int p_proc_fd_reopen(const char *path)
{
	char link[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return setup_error("open %s for reading: %s", path, strerror(errno));
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	int w = open(link, O_WRONLY | O_APPEND | O_CLOEXEC);
	int e = errno;
	close(fd);
	if (w >= 0) {
		close(w);
		return escaped("reopened %s for writing through %s", path, link);
	}
	return verdict_errno(e, "reopen through /proc/self/fd");
}

static int p_read(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return verdict_errno(errno, "open for reading");
	ssize_t n = read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n >= 0)
		return escaped("read %s", path);
	return verdict_errno(e, "read");
}

/* ---- processes ---- */

/*
 * For a probe aimed at a process outside: ESRCH or ENOENT (/proc/PID) means
 * it cannot even be named from the sandbox's own pid namespace.
 */
static int verdict_pid_errno(int e, const char *what)
{
	if (e == ESRCH || e == ENOENT)
		return denied("%s: %s (not visible from the sandbox's pid namespace)", what,
			      strerror(e));
	return verdict_errno(e, what);
}

/* A pid, or "parent": the process that started us (cordon, from inside the sandbox). */
static pid_t arg_pid(const char *s)
{
	char *end;
	if (strcmp(s, "parent") == 0)
		return getppid();
	long v = strtol(s, &end, 10);
	return *end || v <= 1 ? -1 : (pid_t)v;
}

static int p_ptrace_attach(pid_t pid)
{
	if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0) {
		(void)ptrace(PTRACE_DETACH, pid, NULL, NULL);
		return escaped("attached to %d", (int)pid);
	}
	return verdict_pid_errno(errno, "PTRACE_ATTACH");
}

static int p_proc_mem(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return verdict_pid_errno(errno, "open /proc/PID/mem");
	close(fd);
	return escaped("opened %s", path);
}

static int p_proc_environ(pid_t pid)
{
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return verdict_pid_errno(errno, "open /proc/PID/environ");
	ssize_t n = read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n >= 0)
		return escaped("read %s", path);
	return verdict_errno(e, "read");
}

static int p_pidfd_getfd(pid_t pid)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return verdict_pid_errno(errno, "pidfd_open");
	int fd = (int)syscall(SYS_pidfd_getfd, pfd, 0, 0);
	int e = errno;
	close(pfd);
	if (fd >= 0) {
		close(fd);
		return escaped("took fd 0 of %d", (int)pid);
	}
	return verdict_errno(e, "pidfd_getfd");
}

static int p_signal(pid_t pid)
{
	if (kill(pid, SIGTERM) == 0)
		return escaped("sent SIGTERM to %d", (int)pid);
	return verdict_pid_errno(errno, "kill");
}

/*
 * ---- processes by number: the second wall ----
 *
 * Each probe reads the target's current setting and writes it back
 * unchanged: reaching the kernel is the escape, and nothing is changed if
 * it gets there (the suite runs on shared machines). Denied: EPERM (the
 * filter), ESRCH (not visible in the sandbox's pid namespace), ENOSYS.
 */
static int verdict_target_errno(int e, const char *what)
{
	if (e == ENOSYS)
		return denied("%s: %s", what, strerror(e));
	return verdict_pid_errno(e, what);
}

static int p_prlimit(pid_t pid)
{
	struct rlimit rl;

	if (prlimit(pid, RLIMIT_CORE, NULL, &rl) < 0)
		return verdict_target_errno(errno, "prlimit (read)");
	if (prlimit(pid, RLIMIT_CORE, &rl, NULL) < 0)
		return verdict_target_errno(errno, "prlimit");
	return escaped("set the resource limits of %d", (int)pid);
}

static int p_setpriority(pid_t pid)
{
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, (id_t)pid);
	if (cur == -1 && errno)
		return verdict_target_errno(errno, "getpriority");
	if (setpriority(PRIO_PROCESS, (id_t)pid, cur) < 0)
		return verdict_target_errno(errno, "setpriority");
	return escaped("set the priority of %d", (int)pid);
}

static int p_ioprio(pid_t pid)
{
	long cur = syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS_NR, pid);
	if (cur < 0)
		return verdict_target_errno(errno, "ioprio_get");
	if (syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS_NR, pid, cur) < 0)
		return verdict_target_errno(errno, "ioprio_set");
	return escaped("set the I/O priority of %d", (int)pid);
}

static int p_affinity(pid_t pid)
{
	cpu_set_t set;

	if (sched_getaffinity(pid, sizeof(set), &set) < 0)
		return verdict_target_errno(errno, "sched_getaffinity");
	if (sched_setaffinity(pid, sizeof(set), &set) < 0)
		return verdict_target_errno(errno, "sched_setaffinity");
	return escaped("set the CPU affinity of %d", (int)pid);
}

static int p_scheduler(pid_t pid)
{
	struct sched_param sp;
	int policy = sched_getscheduler(pid);

	if (policy < 0 || sched_getparam(pid, &sp) < 0)
		return verdict_target_errno(errno, "sched_getscheduler");
	if (sched_setscheduler(pid, policy, &sp) < 0)
		return verdict_target_errno(errno, "sched_setscheduler");
	return escaped("set the scheduling policy of %d", (int)pid);
}

static int p_pidfd_open(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return verdict_target_errno(errno, "pidfd_open");
	close(fd);
	return escaped("opened a pidfd of %d", (int)pid);
}

/*
 * renice -u: PRIO_USER with who 0 (the caller's uid) at nice -20, which
 * without CAP_SYS_NICE the kernel refuses for every process not at -20
 * already (EACCES), so that reaching it changes nothing.
 */
static int p_renice_user(void)
{
	if (setpriority(PRIO_USER, 0, -20) == 0 || errno == EACCES)
		return escaped("setpriority(PRIO_USER) reached every process of the user");
	return verdict_errno(errno, "setpriority(PRIO_USER)");
}

/* ionice -u: IOPRIO_WHO_USER with an invalid class, which the kernel refuses (EINVAL). */
static int p_ionice_user(void)
{
	if (syscall(SYS_ioprio_set, IOPRIO_WHO_USER_NR, 0, 7 << 13) == 0 || errno == EINVAL)
		return escaped("ioprio_set(IOPRIO_WHO_USER) reached the kernel");
	return verdict_errno(errno, "ioprio_set(IOPRIO_WHO_USER)");
}

/*
 * kill(-1) with signal 0: only the permission check. It succeeds even when
 * every target refuses (Landlock's signal scope), so success means only that
 * it got past the filter; below Landlock ABI 6 it reaches every process of
 * the user.
 */
static int p_kill_all(void)
{
	if (kill(-1, 0) == 0)
		return escaped("kill(-1) got past the filter");
	return verdict_pid_errno(errno, "kill(-1)");
}

/*
 * What a pid namespace leaves to its processes: their own children's limits,
 * priorities and affinity (renice -p, taskset -p), and their own.
 */
static int p_allowed_own_processes(void)
{
	struct rlimit rl;
	cpu_set_t set;
	const char *failed = NULL;
	int st, e = 0, cur;
	pid_t child = fork();

	if (child < 0)
		return setup_error("fork: %s", strerror(errno));
	if (child == 0) {
		pause();
		_exit(0);
	}
	if (prlimit(child, RLIMIT_CORE, NULL, &rl) < 0 ||
	    prlimit(child, RLIMIT_CORE, &rl, NULL) < 0)
		failed = "prlimit";
	/* One step nicer than it is: raising a priority needs CAP_SYS_NICE, and the test
	 * may itself run under nice. */
	else if ((errno = 0, cur = getpriority(PRIO_PROCESS, (id_t)child)) == -1 && errno)
		failed = "getpriority";
	else if (setpriority(PRIO_PROCESS, (id_t)child, cur < 19 ? cur + 1 : 19) < 0)
		failed = "setpriority";
	else if (sched_getaffinity(child, sizeof(set), &set) < 0 ||
		 sched_setaffinity(child, sizeof(set), &set) < 0)
		failed = "sched_setaffinity";
	e = errno;
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	if (failed)
		return escaped("(wrongly denied) %s on its child: %s", failed, strerror(e));
	printf("allowed: limits, priority and affinity of its child\n");
	return 0;
}

/* The caller's own limits and priorities, in a run without a pid namespace. */
static int p_allowed_self(void)
{
	struct rlimit rl;
	cpu_set_t set;
	long io;

	if (prlimit(0, RLIMIT_CORE, NULL, &rl) < 0 || prlimit(0, RLIMIT_CORE, &rl, NULL) < 0)
		return escaped("(wrongly denied) prlimit(0): %s", strerror(errno));
	if (setrlimit(RLIMIT_CORE, &rl) < 0)
		return escaped("(wrongly denied) setrlimit: %s", strerror(errno));
	/* Its own nice value again: lowering it needs CAP_SYS_NICE (the test may run niced). */
	errno = 0;
	int prio = getpriority(PRIO_PROCESS, 0);
	if ((prio == -1 && errno) || setpriority(PRIO_PROCESS, 0, prio) < 0)
		return escaped("(wrongly denied) setpriority(PRIO_PROCESS, 0): %s",
			       strerror(errno));
	if (sched_getaffinity(0, sizeof(set), &set) < 0 ||
	    sched_setaffinity(0, sizeof(set), &set) < 0)
		return escaped("(wrongly denied) sched_setaffinity(0): %s", strerror(errno));
	io = syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS_NR, 0);
	if (io < 0 || syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS_NR, 0, io) < 0)
		return escaped("(wrongly denied) ioprio_set on itself: %s", strerror(errno));
	printf("allowed: its own limits, priority, affinity and I/O priority\n");
	return 0;
}

/* ---- setuid and setgid files ---- */

/*
 * setuid WAY PATH: make PATH (absent) a setuid (or setgid) file one way.
 * Escaped if PATH ends up with either bit, which is then cleared and the
 * file removed.
 */
static int p_setuid(const char *way, const char *path)
{
	struct stat st;
	struct open_how how = { .flags = O_WRONLY | O_CREAT | O_CLOEXEC, .mode = 04755 };
	int r = -1, fd;

	/* The ways that change a mode need a plain file first. */
	if (strncmp(way, "chmod", 5) == 0 || strncmp(way, "fchmod", 6) == 0) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
		if (fd < 0)
			return setup_error("create %s: %s", path, strerror(errno));
		if (strcmp(way, "fchmod") == 0)
			r = fchmod(fd, 04755);
		close(fd);
		if (strcmp(way, "chmod") == 0)
			r = chmod(path, 04755);
		else if (strcmp(way, "chmod-setgid") == 0)
			r = chmod(path, 02755);
		else if (strcmp(way, "fchmodat") == 0)
			r = fchmodat(AT_FDCWD, path, 04755, 0);
		else if (strcmp(way, "fchmodat2") == 0)
			r = (int)syscall(SYS_fchmodat2_NR, AT_FDCWD, path, 04755, 0);
		else if (strcmp(way, "fchmod") != 0)
			return setup_error("unknown way '%s'", way);
	} else if (strcmp(way, "open") == 0 || strcmp(way, "creat") == 0 ||
		   strcmp(way, "openat2") == 0) {
		if (strcmp(way, "open") == 0)
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 04755);
		else if (strcmp(way, "creat") == 0)
			fd = creat(path, 02755);
		else
			fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
		r = fd < 0 ? -1 : 0;
		if (fd >= 0)
			close(fd);
	} else if (strcmp(way, "mknod") == 0) {
		r = mknod(path, S_IFREG | 04755, 0);
	} else {
		return setup_error("unknown way '%s'", way);
	}
	int e = errno;
	if (stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID))) {
		(void)chmod(path, 0644);
		(void)unlink(path);
		return escaped("made %s %s (owner uid %u) with %s", path,
			       st.st_mode & S_ISUID ? "setuid" : "setgid", (unsigned)st.st_uid,
			       way);
	}
	(void)unlink(path);
	if (r == 0)
		return setup_error("%s succeeded but left no setuid or setgid bit", way);
	if (e == ENOSYS)
		return denied("%s: %s (callers fall back to a call the filter sees)", way,
			      strerror(e));
	return verdict_errno(e, way);
}

static int p_allowed_chmod(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return escaped("(wrongly denied) create %s: %s", path, strerror(errno));
	close(fd);
	if (chmod(path, 0755) < 0 || chmod(path, 01777) < 0)
		return escaped("(wrongly denied) chmod %s: %s", path, strerror(errno));
	(void)unlink(path);
	printf("allowed: chmod 0755 and 01777 in the workspace\n");
	return 0;
}

/* ---- leases and terminals ---- */

/* A read lease on a file outside the writable paths: its writers would wait for us. */
static int p_lease(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return setup_error("open %s: %s", path, strerror(errno));
	int r = fcntl(fd, F_SETLEASE, F_RDLCK);
	int e = errno;
	if (r == 0)
		(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	close(fd);
	if (r == 0)
		return escaped("took a lease on %s", path);
	return verdict_errno(e, "F_SETLEASE");
}

/* Terminal ioctls on fd 0, which on-pty makes a terminal of the caller's. */
static int p_tiocexcl(void)
{
	if (!isatty(STDIN_FILENO))
		return setup_error("stdin is not a terminal");
	if (ioctl(STDIN_FILENO, TIOCEXCL) == 0)
		return escaped("put the caller's terminal in exclusive mode");
	return verdict_errno(errno, "TIOCEXCL");
}

static int p_tiocsetd(void)
{
	int ldisc = 0; /* N_TTY, what it has: a no-op if it gets through */

	if (!isatty(STDIN_FILENO))
		return setup_error("stdin is not a terminal");
	if (ioctl(STDIN_FILENO, TIOCSETD, &ldisc) == 0)
		return escaped("set the line discipline of the caller's terminal");
	return verdict_errno(errno, "TIOCSETD");
}

/*
 * on-pty CMD [ARGS]: outside the sandbox, run CMD with a new terminal as its
 * stdin (the caller's terminal, for what runs inside) and exit with its
 * status, or 1 when the terminal is left in exclusive mode after it.
 */
static int run_on_pty(char **argv)
{
	int st, excl = 0;
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0)
		return setup_error("no terminal: %s", strerror(errno));
	const char *name = ptsname(master);
	int slave = name ? open(name, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
	if (slave < 0)
		return setup_error("open %s: %s", name ? name : "the terminal", strerror(errno));
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return setup_error("fork: %s", strerror(errno));
	if (pid == 0) {
		if (dup2(slave, STDIN_FILENO) < 0)
			_exit(2);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return setup_error("waitpid: %s", strerror(errno));
	if (ioctl(slave, TIOCGEXCL, &excl) == 0 && excl)
		return escaped("the terminal is still in exclusive mode after the run");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}

/* Run fn in a child: a seccomp kill shows as death by SIGSYS. */
static int killed_by_sigsys(void (*fn)(void), const char *what)
{
	pid_t pid = fork();
	if (pid < 0)
		return setup_error("fork: %s", strerror(errno));
	if (pid == 0) {
		fn();
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return setup_error("waitpid: %s", strerror(errno));
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
		return denied("%s: killed by SIGSYS", what);
	if (WIFSIGNALED(st))
		return setup_error("%s: killed by signal %d", what, WTERMSIG(st));
	return escaped("%s ran", what);
}

#if defined(__x86_64__)
static void x32_getpid(void)
{
	/* getpid through the x32 ABI: the syscall number with bit 30 set. */
	(void)syscall(0x40000000L | SYS_getpid);
}

static long i386_getpid_ret(void)
{
	long ret;
	/* getpid (20) through the i386 entry point. */
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

static void i386_getpid(void)
{
	(void)i386_getpid_ret();
}

/* Outside any sandbox: does int 0x80 work here at all? */
static int host_i386(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return setup_error("fork: %s", strerror(errno));
	if (pid == 0)
		_exit(i386_getpid_ret() == (long)getpid() ? 0 : 1);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return setup_error("waitpid: %s", strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		printf("works: %s: getpid through int 0x80 returned the pid\n", probe);
		return 0;
	}
	if (WIFSIGNALED(st))
		return setup_error("getpid through int 0x80 outside any sandbox: killed by signal "
				   "%d (%s)",
				   WTERMSIG(st), strsignal(WTERMSIG(st)));
	return setup_error("getpid through int 0x80 outside any sandbox: wrong result");
}
#endif

/* ---- IPC and network ---- */

static int connect_unix(const char *path, bool abstract)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	if (n + 1 >= sizeof(sun.sun_path))
		return setup_error("name too long");
	memcpy(sun.sun_path + (abstract ? 1 : 0), path, n);
	socklen_t len =
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verdict_errno(errno, "socket(AF_UNIX)");
	int r = connect(fd, (struct sockaddr *)&sun, len);
	int e = errno;
	close(fd);
	if (r == 0)
		return escaped("connected to the %s unix socket %s",
			       abstract ? "abstract" : "pathname", path);
	/* Abstract names live in a network namespace: the listener is not in ours. */
	if (abstract && e == ECONNREFUSED)
		return denied("connect: %s (not in the sandbox's network namespace)", strerror(e));
	return verdict_errno(e, "connect");
}

/* A socket of this kind cannot even be created. */
static int p_socket(int domain, int type, int proto, const char *what)
{
	int fd = socket(domain, type | SOCK_CLOEXEC, proto);
	if (fd >= 0) {
		close(fd);
		return escaped("created a %s socket", what);
	}
	/* The filter answers EPERM; EAFNOSUPPORT means the kernel lacks it (no way out either). */
	if (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)
		return denied("socket(%s): %s (not even in this kernel)", what, strerror(errno));
	return verdict_errno(errno, what);
}

static int p_connect_tcp(const char *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	sin.sin_port = htons((uint16_t)atoi(port));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verdict_errno(errno, "socket(AF_INET)");
	int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	int e = errno;
	close(fd);
	if (r == 0)
		return escaped("connected to 127.0.0.1:%s", port);
	return verdict_errno(e, "connect");
}

static int p_udp_dns(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	sin.sin_port = htons(53);
	sin.sin_addr.s_addr = htonl(0x7f000035); /* 127.0.0.53 */
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verdict_errno(errno, "socket(AF_INET, SOCK_DGRAM)");
	ssize_t n = sendto(fd, "q", 1, 0, (struct sockaddr *)&sin, sizeof(sin));
	close(fd);
	return n == 1 ? escaped("sent a UDP datagram to port 53") : escaped("created a UDP socket");
}

/*
 * A managed network's fence (no route but lo, nothing listening there): a
 * connection or a reply from ADDR:PORT is an escape; the kernel saying the
 * network or the port is unreachable, or refusing the socket, is the fence.
 */
static bool is_unreachable(int e)
{
	return is_denial(e) || e == ENETUNREACH || e == EHOSTUNREACH || e == ECONNREFUSED;
}

static int reach(const char *addr, const char *port, int type)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	sin.sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		return setup_error("bad IPv4 address '%s'", addr);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verdict_errno(errno, "socket(AF_INET)");
	int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	if (r == 0 && type == SOCK_DGRAM) {
		/* A DNS query for "." (type A): any answer at all is an escape. */
		static const char q[] = "\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
					"\x00\x00\x01\x00\x01";
		char buf[512];
		r = send(fd, q, sizeof(q) - 1, 0) < 0 ? -1 : (int)recv(fd, buf, sizeof(buf), 0);
		if (r >= 0)
			r = 0;
	}
	int e = errno;
	close(fd);
	if (r == 0)
		return escaped("%s %s:%s answered", type == SOCK_DGRAM ? "UDP" : "TCP", addr, port);
	if (is_unreachable(e))
		return denied("%s:%s: %s", addr, port, strerror(e));
	return setup_error("%s:%s failed with %s, which is not the fence", addr, port, strerror(e));
}

static int p_reach_tcp(const char *addr, const char *port)
{
	return reach(addr, port, SOCK_STREAM);
}

static int p_reach_udp(const char *addr, const char *port)
{
	return reach(addr, port, SOCK_DGRAM);
}

static int p_io_uring(void)
{
	char params[120] = { 0 }; /* struct io_uring_params */
	long fd = syscall(425 /* io_uring_setup */, 8, params);
	if (fd >= 0) {
		close((int)fd);
		return escaped("io_uring_setup made a ring");
	}
	return verdict_errno(errno, "io_uring_setup");
}

static int unix_addr(const char *path, struct sockaddr_un *sun)
{
	*sun = (struct sockaddr_un){ .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sun->sun_path))
		return -1;
	strcpy(sun->sun_path, path);
	return 0;
}

/* A datagram to a pathname socket, named in sendto(): no connect() needed. */
static int p_sendto_unix(const char *path)
{
	struct sockaddr_un sun;
	if (unix_addr(path, &sun) < 0)
		return setup_error("path too long");
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return verdict_errno(errno, "socket(AF_UNIX, SOCK_DGRAM)");
	ssize_t n = sendto(fd, "x", 1, MSG_DONTWAIT, (struct sockaddr *)&sun, sizeof(sun));
	int e = errno;
	close(fd);
	if (n == 1)
		return escaped("sent a datagram to %s", path);
	return verdict_errno(e, "sendto");
}

/*
 * sendmsg() with msg_name from one end of a socketpair of TYPE (dgram,
 * seqpacket, stream): msg_name is in memory, where seccomp cannot look, so
 * what keeps the message from reaching PATH is the socket's type. The
 * kernel refuses a msg_name on a stream socket and ignores it on a
 * seqpacket one (the message goes to the peer, which is checked here);
 * a datagram socket would honour it, so it must not exist.
 */
static int p_sendmsg_name(const char *type_name, const char *path)
{
	static const struct {
		const char *name;
		int type;
	} types[] = {
		{ "dgram", SOCK_DGRAM },
		{ "seqpacket", SOCK_SEQPACKET },
		{ "stream", SOCK_STREAM },
	};
	struct sockaddr_un sun;
	int type = -1, sv[2];
	char c = 0;

	for (size_t i = 0; i < CD_ARRAY_SIZE(types); i++)
		if (strcmp(type_name, types[i].name) == 0)
			type = types[i].type;
	if (type < 0)
		return setup_error("unknown socket type '%s'", type_name);
	if (unix_addr(path, &sun) < 0)
		return setup_error("path too long");
	if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) < 0)
		return verdict_errno(errno, "socketpair");
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };
	struct msghdr mh = {
		.msg_name = &sun,
		.msg_namelen = sizeof(sun),
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};
	ssize_t n = sendmsg(sv[0], &mh, MSG_DONTWAIT);
	int e = errno;
	bool to_peer = n == 1 && recv(sv[1], &c, 1, MSG_DONTWAIT) == 1 && c == 'x';
	close(sv[0]);
	close(sv[1]);
	if (to_peer)
		return denied(
			"sendmsg: msg_name ignored, the message went to the socketpair's peer");
	if (n == 1)
		return escaped("sent a message to %s from a %s socketpair", path, type_name);
	if (e == EISCONN || e == EOPNOTSUPP || e == ENOTCONN)
		return denied("sendmsg: %s (the kernel refuses a msg_name here)", strerror(e));
	return verdict_errno(e, "sendmsg");
}

/* A unix socket server: a client outside could connect to it. */
static int p_listen_unix(const char *path)
{
	struct sockaddr_un sun;
	if (unix_addr(path, &sun) < 0)
		return setup_error("path too long");
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* A managed network refuses the socket itself. */
	if (fd < 0)
		return verdict_errno(errno, "socket(AF_UNIX)");
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int e = errno;
		close(fd);
		return verdict_errno(e, "bind");
	}
	int r = listen(fd, 1);
	int e = errno;
	close(fd);
	(void)unlink(path);
	if (r == 0)
		return escaped("listening on %s", path);
	return verdict_errno(e, "listen");
}

/* ---- allowed operations ---- */

static int p_allowed_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return escaped("(wrongly denied) cannot write %s: %s", path, strerror(errno));
	bool ok = write(fd, "ok\n", 3) == 3;
	close(fd);
	if (!ok)
		return escaped("(wrongly denied) write to %s failed", path);
	printf("allowed: wrote %s\n", path);
	return 0;
}

static int p_allowed_unix_pair(void)
{
	int sv[2];
	char c = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return escaped("(wrongly denied) socketpair: %s", strerror(errno));
	bool ok = write(sv[0], "y", 1) == 1 && read(sv[1], &c, 1) == 1 && c == 'y';
	close(sv[0]);
	close(sv[1]);
	if (!ok)
		return escaped("(wrongly denied) socketpair I/O failed");
	printf("allowed: a unix socketpair works\n");
	return 0;
}

/* send() and recv(): glibc's send() is sendto() without an address. */
static int p_allowed_unix_pair_send(void)
{
	int sv[2];
	char c = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return escaped("(wrongly denied) socketpair: %s", strerror(errno));
	ssize_t n = send(sv[0], "s", 1, MSG_NOSIGNAL);
	int e = errno;
	bool ok = n == 1 && recv(sv[1], &c, 1, 0) == 1 && c == 's';
	close(sv[0]);
	close(sv[1]);
	if (!ok)
		return escaped("(wrongly denied) send/recv over a socketpair: %s",
			       n < 0 ? strerror(e) : "no data");
	printf("allowed: send() and recv() over a unix socketpair work\n");
	return 0;
}

/*
 * An fd passed over a seqpacket socketpair (SCM_RIGHTS), with the very
 * helpers cordon's sandboxed fs helper uses (src/shared/fd-util.c).
 */
static int p_allowed_pass_fd(void)
{
	int sv[2], got = -1;
	char c = 0;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return escaped("(wrongly denied) socketpair(SOCK_SEQPACKET): %s", strerror(errno));
	int r = cd_send_fd(sv[0], "f", 1, STDOUT_FILENO);
	ssize_t n = r < 0 ? r : cd_recv_fd(sv[1], &c, 1, 0, &got, NULL);
	close(sv[0]);
	close(sv[1]);
	if (got < 0)
		return escaped("(wrongly denied) passing an fd over a socketpair: %s",
			       n < 0 ? strerror((int)-n) : "no fd arrived");
	close(got);
	printf("allowed: an fd passes over a unix socketpair\n");
	return 0;
}

/* Only 0, 1 and 2 are open (the directory fd used to look is not counted). */
static int p_allowed_fds(void)
{
	char path[64], seen[256] = "";
	int n = 0;
	for (int fd = 0; fd < 1024; fd++) {
		if (fcntl(fd, F_GETFD) < 0)
			continue;
		n++;
		snprintf(path, sizeof(path), "%s%d", *seen ? " " : "", fd);
		strncat(seen, path, sizeof(seen) - strlen(seen) - 1);
	}
	if (n != 3 || fcntl(0, F_GETFD) < 0 || fcntl(1, F_GETFD) < 0 || fcntl(2, F_GETFD) < 0)
		return escaped("fds open in the sandbox: %s (want 0 1 2)", seen);
	printf("allowed: only fds 0 1 2 are open\n");
	return 0;
}

/* No capability in any set, no_new_privs set: a setuid program can gain nothing. */
static int p_allowed_no_caps(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");
	bool nnp = false;
	int zero = 0;
	if (!f)
		return setup_error("/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;
		if (sscanf(line, "NoNewPrivs: %llu", &v) == 1)
			nnp = v == 1;
		if ((sscanf(line, "CapInh: %llx", &v) == 1 ||
		     sscanf(line, "CapPrm: %llx", &v) == 1 ||
		     sscanf(line, "CapEff: %llx", &v) == 1 ||
		     sscanf(line, "CapBnd: %llx", &v) == 1 ||
		     sscanf(line, "CapAmb: %llx", &v) == 1)) {
			if (v != 0) {
				fclose(f);
				return escaped("%.*s", (int)strcspn(line, "\n"), line);
			}
			zero++;
		}
	}
	fclose(f);
	if (!nnp || zero != 5)
		return escaped("NoNewPrivs %d, %d empty capability sets of 5", nnp, zero);
	printf("allowed: no capabilities, no_new_privs\n");
	return 0;
}

/* ---- the listeners, outside the sandbox ---- */

/*
 * A pathname unix socket of `type` at path, listening unless a datagram
 * socket. Its fd stays open (unreferenced) for the listener's life.
 */
static int bind_unix(int type, const char *path)
{
	struct sockaddr_un sun;
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return setup_error("socket: %s", strerror(errno));
	if (unix_addr(path, &sun) < 0)
		return setup_error("socket path too long: %s", path);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    (type != SOCK_DGRAM && listen(fd, 64) < 0))
		return setup_error("bind %s: %s", path, strerror(errno));
	return 0;
}

static int listen_all(const char *dir, const char *inside)
{
	char path[512], name[64];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int s2 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int s3 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s2 < 0 || s3 < 0)
		return setup_error("socket: %s", strerror(errno));

	snprintf(path, sizeof(path), "%s/sock", dir);
	if (bind_unix(SOCK_STREAM, path) != 0)
		return 2;
	snprintf(path, sizeof(path), "%s/dgram", dir);
	if (bind_unix(SOCK_DGRAM, path) != 0)
		return 2;
	if (bind_unix(SOCK_STREAM, inside) != 0)
		return 2;

	snprintf(name, sizeof(name), "cordon-escape-%d", (int)getpid());
	memset(sun.sun_path, 0, sizeof(sun.sun_path));
	memcpy(sun.sun_path + 1, name, strlen(name));
	if (bind(s2, (struct sockaddr *)&sun,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))) < 0 ||
	    listen(s2, 64) < 0)
		return setup_error("bind @%s: %s", name, strerror(errno));

	struct sockaddr_in sin = { .sin_family = AF_INET };
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t sl = sizeof(sin);
	if (bind(s3, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(s3, 64) < 0 ||
	    getsockname(s3, (struct sockaddr *)&sin, &sl) < 0)
		return setup_error("bind 127.0.0.1: %s", strerror(errno));

	snprintf(path, sizeof(path), "%s/abstract", dir);
	FILE *f = fopen(path, "we");
	if (!f)
		return setup_error("%s: %s", path, strerror(errno));
	fprintf(f, "%s\n", name);
	fclose(f);
	snprintf(path, sizeof(path), "%s/tcp-port", dir);
	f = fopen(path, "we");
	if (!f)
		return setup_error("%s: %s", path, strerror(errno));
	fprintf(f, "%u\n", (unsigned)ntohs(sin.sin_port));
	fclose(f);
	/* The parent waits for "ready" before it runs probes. */
	puts("ready");
	fflush(stdout);
	for (;;)
		pause();
}

/* Sockets that must not even be created: name, domain, type, protocol, what. */
static const struct {
	const char *name;
	int domain, type, proto;
	const char *what;
} probes_socket[] = {
	{ "socket-netlink", AF_NETLINK, SOCK_RAW, 0, "AF_NETLINK" },
	{ "socket-packet", AF_PACKET, SOCK_RAW, 0, "AF_PACKET" },
	{ "socket-raw", AF_INET, SOCK_RAW, IPPROTO_ICMP, "raw AF_INET" },
	{ "socket-ping", AF_INET, SOCK_DGRAM, IPPROTO_ICMP, "ICMP datagram" },
	{ "socket-vsock", AF_VSOCK, SOCK_STREAM, 0, "AF_VSOCK" },
	{ "socket-mptcp", AF_INET, SOCK_STREAM, IPPROTO_MPTCP, "MPTCP" },
	{ "socket-sctp", AF_INET, SOCK_STREAM, IPPROTO_SCTP, "SCTP" },
	{ "socket-udp6", AF_INET6, SOCK_DGRAM, 0, "UDP over IPv6" },
};

static int p_connect_abstract(const char *name)
{
	return connect_unix(name, true);
}
static int p_connect_unix(const char *path)
{
	return connect_unix(path, false);
}
#if defined(__x86_64__)
static int p_x32(void)
{
	return killed_by_sigsys(x32_getpid, "getpid through the x32 ABI");
}
static int p_i386(void)
{
	return killed_by_sigsys(i386_getpid, "getpid through int 0x80");
}
#endif

static const struct {
	const char *name;
	int (*fn)(void);
} probes0[] = {
	{ "udp-dns", p_udp_dns },
	{ "io-uring", p_io_uring },
#if defined(__x86_64__)
	{ "x32", p_x32 },
	{ "i386", p_i386 },
	{ "host-i386", host_i386 },
#endif
	{ "allowed-unix-pair", p_allowed_unix_pair },
	{ "allowed-unix-pair-send", p_allowed_unix_pair_send },
	{ "allowed-pass-fd", p_allowed_pass_fd },
	{ "allowed-fds", p_allowed_fds },
	{ "allowed-no-caps", p_allowed_no_caps },
	{ "renice-user", p_renice_user },
	{ "ionice-user", p_ionice_user },
	{ "kill-all", p_kill_all },
	{ "tiocexcl", p_tiocexcl },
	{ "tiocsetd", p_tiocsetd },
	{ "allowed-own-processes", p_allowed_own_processes },
	{ "allowed-self", p_allowed_self },
};

static const struct {
	const char *name;
	int (*fn)(const char *);
} probes1[] = {
	{ "write", p_write },
	{ "write-or-missing", p_write_or_missing },
	{ "mkdir", p_mkdir },
	{ "unlink", p_unlink },
	{ "truncate", p_truncate },
	{ "mknod-char", p_mknod_char },
	{ "mkfifo", p_mkfifo },
	{ "bind-unix", p_bind_unix },
	{ "proc-fd-reopen", p_proc_fd_reopen },
	{ "read", p_read },
	{ "connect-abstract", p_connect_abstract },
	{ "connect-unix", p_connect_unix },
	{ "connect-tcp", p_connect_tcp },
	{ "sendto-unix", p_sendto_unix },
	{ "listen-unix", p_listen_unix },
	{ "allowed-write", p_allowed_write },
	{ "lease", p_lease },
	{ "allowed-chmod", p_allowed_chmod },
};

static const struct {
	const char *name;
	int (*fn)(const char *, const char *);
} probes2[] = {
	{ "listen", listen_all },     { "sendmsg-name", p_sendmsg_name }, { "symlink", p_symlink },
	{ "rename", p_rename },	      { "hardlink", p_hardlink },	  { "setuid", p_setuid },
	{ "reach-tcp", p_reach_tcp }, { "reach-udp", p_reach_udp },
};

/* Probes aimed at a process: PID, or "parent". */
static const struct {
	const char *name;
	int (*fn)(pid_t);
} probes_pid[] = {
	{ "ptrace-attach", p_ptrace_attach },
	{ "proc-mem", p_proc_mem },
	{ "proc-environ", p_proc_environ },
	{ "pidfd-getfd", p_pidfd_getfd },
	{ "signal", p_signal },
	{ "prlimit", p_prlimit },
	{ "setpriority", p_setpriority },
	{ "ioprio", p_ioprio },
	{ "affinity", p_affinity },
	{ "scheduler", p_scheduler },
	{ "pidfd-open", p_pidfd_open },
};

static int usage(const char *why)
{
	fprintf(stderr, "escape-probe: %s\n", why);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage("usage: escape-probe NAME [ARGS]");
	probe = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	int nargs = argc - 2;

	if (strcmp(probe, "on-pty") == 0)
		return nargs >= 1 ? run_on_pty(argv + 2) : usage("on-pty needs a command");
	for (size_t i = 0; i < CD_ARRAY_SIZE(probes_socket); i++)
		if (strcmp(probe, probes_socket[i].name) == 0)
			return p_socket(probes_socket[i].domain, probes_socket[i].type,
					probes_socket[i].proto, probes_socket[i].what);
	for (size_t i = 0; i < CD_ARRAY_SIZE(probes0); i++)
		if (strcmp(probe, probes0[i].name) == 0)
			return probes0[i].fn();
	for (size_t i = 0; i < CD_ARRAY_SIZE(probes1); i++)
		if (strcmp(probe, probes1[i].name) == 0)
			return nargs >= 1 ? probes1[i].fn(argv[2]) : usage("needs 1 argument");
	for (size_t i = 0; i < CD_ARRAY_SIZE(probes2); i++)
		if (strcmp(probe, probes2[i].name) == 0)
			return nargs >= 2 ? probes2[i].fn(argv[2], argv[3])
					  : usage("needs 2 arguments");
	for (size_t i = 0; i < CD_ARRAY_SIZE(probes_pid); i++) {
		if (strcmp(probe, probes_pid[i].name) != 0)
			continue;
		if (nargs < 1)
			return usage("needs a pid");
		pid_t pid = arg_pid(argv[2]);
		if (pid < 0)
			return setup_error("bad pid '%s'", argv[2]);
		return probes_pid[i].fn(pid);
	}
	fprintf(stderr, "escape-probe: unknown probe '%s'\n", probe);
	return 2;
}
