/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Self-confinement of cordon's own helpers: see confine.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/confine.h"
#include "sandbox/linux/linux-util.h"
#include "sandbox/linux/plan.h"

/*
 * Found by tracing a lookup of a name in /etc/hosts and of one that goes
 * to DNS (strace -f, Debian 12's glibc 2.36): static glibc has the files
 * and dns services built in and loads no NSS library for them; other
 * services named in nsswitch.conf (mdns, myhostname, resolve...) would be
 * loaded by a static dlopen, which the confinement refuses (no file access,
 * no executable mapping): they count as unavailable and the lookup goes on
 * with the next service. gai.conf is read to sort several addresses.
 */
const char *const cd_confine_resolver_files[] = {
	"/etc/nsswitch.conf", "/etc/host.conf", "/etc/resolv.conf",
	"/etc/hosts",	      "/etc/gai.conf",	NULL,
};

/* clang-format off */
/* Every system call allowed without a condition on its arguments. */
static const char *const plain_syscalls[] = {
	/* memory, threads, signals, time */
	"brk", "munmap", "mremap", "madvise", "futex", "set_robust_list", "get_robust_list",
	"rseq", "set_tid_address", "exit", "exit_group", "gettid", "getpid", "getppid",
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "tgkill", "tkill",
	"restart_syscall", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
	"gettimeofday", "time", "getrandom", "uname", "sched_getaffinity", "sched_yield",
	"getrlimit", "prlimit64", "membarrier",
	/* files: Landlock decides which */
	"read", "readv", "pread64", "write", "writev", "close", "fstat", "newfstatat", "stat",
	"lstat", "statx", "lseek", "openat", "open", "fcntl", "dup", "dup2", "dup3",
	/* the event loop */
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd2",
	"timerfd_create", "timerfd_settime", "timerfd_gettime", "poll", "ppoll", "select",
	"pselect6",
	/* sockets it has, or makes below */
	"accept", "accept4", "connect", "bind", "shutdown", "getsockname", "getpeername",
	"setsockopt", "getsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
	"recvmmsg",
	NULL,
};
/* clang-format on */

static char *fail(int e, const char *step)
{
	return cd_xasprintf("%s: %s", step, strerror(e));
}

static int add(scmp_filter_ctx ctx, const char *name, unsigned n, const struct scmp_arg_cmp *cmp)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		return 0; /* not on this architecture */
	return seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, n, cmp);
}

static int build_seccomp(scmp_filter_ctx ctx)
{
	int r;

	for (const char *const *s = plain_syscalls; *s; s++)
		if ((r = add(ctx, *s, 0, NULL)) < 0)
			return r;
	/* No executable mapping: nothing new to run, and no static dlopen of an NSS module. */
	struct scmp_arg_cmp noexec = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
	if ((r = add(ctx, "mmap", 1, &noexec)) < 0 || (r = add(ctx, "mprotect", 1, &noexec)) < 0)
		return r;
	/* Threads (the lookups' workers), never a process; clone3's flags are out of reach. */
	struct scmp_arg_cmp thread = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD);
	if ((r = add(ctx, "clone", 1, &thread)) < 0)
		return r;
	int nr = seccomp_syscall_resolve_name("clone3");
	/* ENOSYS: glibc then falls back to clone, which is checked. */
	if (nr != __NR_SCMP_ERROR && (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0)) < 0)
		return r;
	/* FIONREAD (the resolver), FIONBIO. */
	static const unsigned long ioctls[] = { FIONREAD, FIONBIO };
	for (size_t i = 0; i < CD_ARRAY_SIZE(ioctls); i++) {
		struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_EQ, ioctls[i]);
		if ((r = add(ctx, "ioctl", 1, &c)) < 0)
			return r;
	}
	/*
	 * Sockets: TCP and UDP (upstreams, DNS) and a routing netlink socket
	 * (getifaddrs, AI_ADDRCONFIG). No raw or packet socket, and no new
	 * unix socket: Landlock does not govern connecting to a named one, and
	 * the user's (docker.sock, an ssh agent) are no business of a proxy.
	 * glibc's attempt to reach nscd fails, and it looks the name up itself.
	 */
	static const struct {
		int domain, type, protocol; /* protocol -1: any */
	} socks[] = {
		{ AF_INET, SOCK_STREAM, -1 },
		{ AF_INET, SOCK_DGRAM, -1 },
		{ AF_INET6, SOCK_STREAM, -1 },
		{ AF_INET6, SOCK_DGRAM, -1 },
		{ AF_NETLINK, SOCK_RAW, NETLINK_ROUTE },
		{ AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(socks); i++) {
		struct scmp_arg_cmp c[3] = {
			SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)socks[i].domain),
			/* the type without SOCK_NONBLOCK and SOCK_CLOEXEC */
			SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)socks[i].type),
			SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)socks[i].protocol),
		};
		if ((r = add(ctx, "socket", socks[i].protocol < 0 ? 2 : 3, c)) < 0)
			return r;
	}
	return 0;
}

static int load_seccomp(char **reterr)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	int r;

	if (!ctx) {
		*reterr = fail(ENOMEM, "seccomp");
		return -ENOMEM;
	}
	/* Another architecture's calls (x32 and i386 on x86-64 included) end the process. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* A binary tree of the numbers: the tunnel's read and write do not walk the whole list. */
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r == 0)
		r = build_seccomp(ctx);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r < 0)
		*reterr = fail(-r, "seccomp (fix: a kernel with CONFIG_SECCOMP_FILTER)");
	return r < 0 ? r : 0;
}

/* A ruleset allowing reads of the files given, or -errno. */
static int build_landlock(unsigned abi, const char *const *files, char **reterr)
{
	struct cd_landlock_ruleset_attr attr = {
		.handled_access_fs = cd_ll_fs_rights_for_abi(abi),
		/* No TCP bind; connect is the proxy's job, to any port. */
		.handled_access_net = cd_ll_net_rights_for_abi(abi) & CD_LL_NET_BIND_TCP,
		.scoped = cd_ll_scopes_for_abi(abi),
	};
	int fd = cd_landlock_create_ruleset(&attr, cd_landlock_attr_size(abi), 0);
	if (fd < 0) {
		*reterr = fail(errno, "landlock_create_ruleset");
		return -errno;
	}
	for (const char *const *f = files; f && *f; f++) {
		int pfd = open(*f, O_PATH | O_CLOEXEC);
		if (pfd < 0 && (errno == ENOENT || errno == ENOTDIR))
			continue;
		struct cd_landlock_path_beneath_attr pb = {
			.allowed_access = CD_LL_FS_READ_FILE,
			.parent_fd = pfd,
		};
		if (pfd < 0 ||
		    cd_landlock_add_rule(fd, CD_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
			int e = errno;
			cd_close_keep_errno(pfd);
			close(fd);
			*reterr = cd_xasprintf("landlock: %s: %s", *f, strerror(e));
			return -e;
		}
		close(pfd);
	}
	return fd;
}

static int drop_user(uid_t uid, gid_t gid, char **reterr)
{
	if (geteuid() != 0) {
		*reterr = cd_xstrdup("changing user needs root");
		return -EPERM;
	}
	/* The bounding set first: emptying it needs CAP_SETPCAP, which setuid takes away. */
	for (unsigned c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
			*reterr = fail(errno, "emptying the capability bounding set");
			return -errno;
		}
	}
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0) {
		int e = errno;
		*reterr = cd_xasprintf("changing to gid %u: %s (fix: --proxy-user UID:GID with "
				       "ids this host maps)",
				       (unsigned)gid, strerror(e));
		return -e;
	}
	if (setresuid(uid, uid, uid) < 0) {
		int e = errno;
		*reterr = cd_xasprintf("changing to uid %u: %s (fix: --proxy-user UID:GID with "
				       "ids this host maps)",
				       (unsigned)uid, strerror(e));
		return -e;
	}
	/* Never back: a uid 0 left anywhere would be a way home. */
	uid_t r, e, s;
	if (getresuid(&r, &e, &s) < 0 || r != uid || e != uid || s != uid || setuid(0) == 0) {
		*reterr = cd_xstrdup("changing user: uid 0 still reachable");
		return -EPERM;
	}
	return 0;
}

int cd_confine_self(const struct cd_confine_opts *o, unsigned *ret_landlock_abi, char **reterr)
{
	struct rlimit rl = { 0, 0 };
	struct cd_backend_state *caps = NULL;
	struct cd_linux_plan caps_plan = { .sandboxed = true };
	int ll_fd = -1, r;

	*reterr = NULL;
	*ret_landlock_abi = 0;
	if (o->drop_user && o->uid == 0) {
		*reterr = cd_xstrdup("changing user: uid 0 is not a drop");
		return -EINVAL;
	}
	if (setrlimit(RLIMIT_CORE, &rl) < 0) {
		*reterr = fail(errno, "RLIMIT_CORE");
		return -errno;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		*reterr = fail(errno, "PR_SET_DUMPABLE");
		return -errno;
	}

	/* Opened before the user changes: the files' own modes decide nothing more then. */
	unsigned abi = cd_linux_test_disabled("landlock") ? 0 : cd_landlock_abi();
	if (abi > CD_LL_MAX_ABI)
		abi = CD_LL_MAX_ABI;
	if (abi > 0 && (ll_fd = build_landlock(abi, o->read_files, reterr)) < 0)
		return ll_fd;

	if (o->drop_user && (r = drop_user(o->uid, o->gid, reterr)) < 0)
		goto out;
	/* Ambient and the three sets cleared, no_new_privs: the sandbox's own step. */
	if ((r = cd_backend_caps.prepare(&caps_plan, &caps, reterr)) < 0)
		goto out;
	if ((r = cd_backend_caps.apply(caps)) < 0) {
		*reterr = fail(-r, "dropping capabilities, no_new_privs");
		goto out;
	}
	if (ll_fd >= 0 && cd_landlock_restrict_self(ll_fd, 0) < 0) {
		r = -errno;
		*reterr = fail(errno, "landlock_restrict_self");
		goto out;
	}
	r = load_seccomp(reterr);
	if (r == 0)
		*ret_landlock_abi = abi;
out:
	cd_backend_caps.destroy(caps);
	cd_close_keep_errno(ll_fd);
	return r;
}
