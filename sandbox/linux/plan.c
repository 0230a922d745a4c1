/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sandbox/linux/plan.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/*
 * Landlock ABI tables. Each ABI adds rights (or, for ABI 4, 6 and 7, other
 * mechanisms) to the previous one, so a cumulative switch is enough. A newer
 * kernel than cordon knows is treated as the newest ABI cordon knows:
 * handling rights the kernel knows but cordon does not name is impossible,
 * and using only the known ones is what the kernel expects from old binaries.
 */
#define LL_FS_ABI1_RIGHTS ((1ULL << 13) - 1) /* execute .. make_sym */

static unsigned cap_abi(unsigned abi)
{
	return abi > CD_LL_MAX_ABI ? CD_LL_MAX_ABI : abi;
}

uint64_t cd_ll_fs_rights_for_abi(unsigned abi)
{
	uint64_t r = 0;

	switch (cap_abi(abi)) {
	case 7:
	case 6:
	case 5:
		r |= CD_LL_FS_IOCTL_DEV;
		/* fall through */
	case 4:
	case 3:
		r |= CD_LL_FS_TRUNCATE;
		/* fall through */
	case 2:
		r |= CD_LL_FS_REFER;
		/* fall through */
	case 1:
		r |= LL_FS_ABI1_RIGHTS;
		break;
	default:
		break;
	}
	return r;
}

uint64_t cd_ll_net_rights_for_abi(unsigned abi)
{
	return cap_abi(abi) >= 4 ? CD_LL_NET_BIND_TCP | CD_LL_NET_CONNECT_TCP : 0;
}

uint64_t cd_ll_scopes_for_abi(unsigned abi)
{
	return cap_abi(abi) >= 6 ? CD_LL_SCOPE_ABSTRACT_UNIX_SOCKET | CD_LL_SCOPE_SIGNAL : 0;
}

/* Names indexed by bit number, in the kernel's order. */
static const char *const ll_fs_names[] = {
	"execute",   "write_file", "read_file", "read_dir",  "remove_dir", "remove_file",
	"make_char", "make_dir",   "make_reg",	"make_sock", "make_fifo",  "make_block",
	"make_sym",  "refer",	   "truncate",	"ioctl_dev",
};
static const char *const ll_net_names[] = { "bind_tcp", "connect_tcp" };
static const char *const ll_scope_names[] = { "abstract_unix_socket", "signal" };

static char *mask_names(uint64_t mask, const char *const *names, size_t n)
{
	struct cd_strbuf sb = { 0 };
	uint64_t unknown = 0;

	for (unsigned b = 0; b < 64; b++) {
		uint64_t bit = 1ULL << b;
		if (!(mask & bit))
			continue;
		if (b >= n) {
			unknown |= bit;
			continue;
		}
		if (sb.len)
			cd_strbuf_append_c(&sb, ' ');
		cd_strbuf_append(&sb, names[b]);
	}
	/* Bits cordon has no name for are still shown, never silently dropped. */
	if (unknown)
		cd_strbuf_printf(&sb, "%s0x%llx", sb.len ? " " : "", (unsigned long long)unknown);
	return cd_strbuf_steal(&sb);
}

char *cd_ll_fs_rights_names(uint64_t mask)
{
	return mask_names(mask, ll_fs_names, CD_ARRAY_SIZE(ll_fs_names));
}

char *cd_ll_net_rights_names(uint64_t mask)
{
	return mask_names(mask, ll_net_names, CD_ARRAY_SIZE(ll_net_names));
}

char *cd_ll_scopes_names(uint64_t mask)
{
	return mask_names(mask, ll_scope_names, CD_ARRAY_SIZE(ll_scope_names));
}

/*
 * The seccomp deny list. Landlock and the mount carve-outs confine paths;
 * this table closes the doors around them: syscalls that reach other
 * processes' memory, bypass the path and socket checks (io_uring, handles),
 * change the mount table or namespaces the carve-outs live in, or touch
 * kernel-global state. Everything not listed is allowed: cordon runs
 * arbitrary developer tools, so an allow list would break them.
 */
#define DENY(name, why_)                                                       \
	{                                                                      \
		.syscall = (name), .action = CD_SC_EPERM, .cmp = CD_SC_ALWAYS, \
		.when = CD_SC_BASELINE, .why = (why_)                          \
	}

/* The same for a rule that applies only while the network is restricted. */
#define NET_DENY(name, why_)                                                   \
	{                                                                      \
		.syscall = (name), .action = CD_SC_EPERM, .cmp = CD_SC_ALWAYS, \
		.when = CD_SC_NET_RESTRICTED, .why = (why_)                    \
	}

/* The same for a rule that applies only where there is no IPC namespace. */
#define IPC_DENY(name)                                                          \
	{                                                                       \
		.syscall = (name), .action = CD_SC_EPERM, .cmp = CD_SC_ALWAYS,  \
		.when = CD_SC_NO_IPC_NS,                                        \
		.why = "no IPC namespace: the host's IPC objects are not files" \
	}

/*
 * A call kept to the caller itself where there is no pid namespace: denied
 * unless argument arg_ is value_ (0: "this process"). The compare is on all
 * 64 bits, although the kernel reads a pid_t or int argument as its low 32
 * bits only: a rule that allows one value and denies the rest can only err
 * towards denying (a pid of 0 with junk in the upper half, which the kernel
 * would take for the caller, is refused), never let another pid through. The
 * low-32-bit mask is for the opposite kind of rule, "deny this one value"
 * (TIOCSTI, kill(-1)), which junk in the upper half would otherwise slip past.
 */
#define SELF_ONLY(name, arg_, value_, why_)                                                   \
	{                                                                                     \
		.syscall = (name), .action = CD_SC_EPERM, .cmp = CD_SC_ARG_NE, .arg = (arg_), \
		.value = (value_), .when = CD_SC_NO_PID_NS, .why = (why_)                     \
	}

/* Denied outright where there is no pid namespace: the target is out of the filter's sight. */
#define NO_PID_NS_DENY(name, action_, why_)                                  \
	{                                                                    \
		.syscall = (name), .action = (action_), .cmp = CD_SC_ALWAYS, \
		.when = CD_SC_NO_PID_NS, .why = (why_)                       \
	}

/*
 * A mode argument with S_ISUID or S_ISGID (04000, 02000) set. The kernel
 * reads modes as umode_t (16 bits), and these are bits of the low half, so
 * the per-bit compare sees what the kernel sees.
 */
#define SETID_BITS 06000ULL
#define NO_SETID(name, arg_, why_)                                                       \
	{                                                                                \
		.syscall = (name), .action = CD_SC_EPERM, .cmp = CD_SC_ARG_MASKED_ANY,   \
		.arg = (arg_), .mask = SETID_BITS, .when = CD_SC_BASELINE, .why = (why_) \
	}

#define AF_UNIX_VALUE 1ULL
/* socket(2)'s type without SOCK_CLOEXEC and SOCK_NONBLOCK (the kernel's SOCK_TYPE_MASK). */
#define SOCK_TYPE_MASK_VALUE 0xfULL
#define SOCK_STREAM_VALUE    1ULL
#define SOCK_SEQPACKET_VALUE 5ULL
#define SOCK_DGRAM_VALUE     2ULL
#define AF_INET_VALUE	     2ULL
#define AF_INET6_VALUE	     10ULL
#define TIOCSTI_VALUE	     0x5412ULL
#define TIOCLINUX_VALUE	     0x541CULL
#define PER_LINUX_VALUE	     0ULL
#define PER_QUERY_VALUE	     0xffffffffULL
#define TIOCEXCL_VALUE	     0x540CULL
#define TIOCSETD_VALUE	     0x5423ULL
#define F_SETLEASE_VALUE     1024ULL
#define IOPRIO_WHO_PROCESS   1ULL
#define PRIO_PROCESS_VALUE   0ULL
#define PID_MINUS_ONE_LO32   0xffffffffULL

const struct cd_sc_rule cd_sc_rules[] = {
	DENY("ptrace", "debugging other processes"),
	DENY("process_vm_readv", "reading other processes' memory"),
	DENY("process_vm_writev", "writing other processes' memory"),
	DENY("io_uring_setup", "io_uring bypasses socket and path rules"),
	DENY("io_uring_enter", "io_uring bypasses socket and path rules"),
	DENY("io_uring_register", "io_uring bypasses socket and path rules"),
	DENY("keyctl", "kernel keyrings are not namespaced"),
	DENY("add_key", "kernel keyrings are not namespaced"),
	DENY("request_key", "kernel keyrings are not namespaced"),
	DENY("bpf", "loading BPF programs into the kernel"),
	DENY("perf_event_open", "performance monitoring leaks other processes' activity"),
	DENY("userfaultfd", "userfaultfd widens kernel race exploits"),
	DENY("kexec_load", "loading a new kernel"),
	DENY("kexec_file_load", "loading a new kernel"),
	DENY("init_module", "loading kernel modules"),
	DENY("finit_module", "loading kernel modules"),
	DENY("delete_module", "unloading kernel modules"),
	DENY("swapon", "changing system swap"),
	DENY("swapoff", "changing system swap"),
	DENY("reboot", "rebooting the host"),
	DENY("acct", "switching process accounting"),
	DENY("mount", "changing mounts would undo read-only carve-outs"),
	DENY("umount2", "unmounting would expose masked paths"),
	DENY("mount_setattr", "changing mounts would undo read-only carve-outs"),
	DENY("move_mount", "changing mounts would undo read-only carve-outs"),
	DENY("open_tree", "changing mounts would undo read-only carve-outs"),
	DENY("fsopen", "creating mounts"),
	DENY("fsconfig", "creating mounts"),
	DENY("fsmount", "creating mounts"),
	DENY("fspick", "reconfiguring mounts"),
	DENY("pivot_root", "changing the root mount"),
	DENY("chroot", "changing the root directory"),
	DENY("setns", "entering other namespaces"),
	DENY("name_to_handle_at", "file handles bypass path rules"),
	DENY("open_by_handle_at", "file handles bypass path rules"),
	DENY("lookup_dcookie", "resolving kernel directory cookies"),
	DENY("quotactl", "changing disk quotas"),
	DENY("quotactl_fd", "changing disk quotas"),
	/* ptrace's power over a file table: a pidfd of a child would do. */
	DENY("pidfd_getfd", "taking another process's file descriptors"),
	/*
	 * Kernel-global state that having no capabilities already guards
	 * (CAP_SYSLOG, CAP_SYS_RAWIO, CAP_SYS_TTY_CONFIG, CAP_SYS_TIME,
	 * CAP_SYS_ADMIN), denied as well: nothing a sandboxed tool needs, and
	 * syslog() reads the kernel log without any capability where
	 * kernel.dmesg_restrict is 0.
	 */
	DENY("syslog", "reading or clearing the kernel log"),
	DENY("_sysctl", "changing kernel parameters; gone since Linux 5.5"),
	DENY("iopl", "raw I/O port access"),
	DENY("ioperm", "raw I/O port access"),
	DENY("vhangup", "hanging up the terminal"),
	DENY("settimeofday", "setting the host's clock"),
	DENY("clock_settime", "setting the host's clock"),
	DENY("sethostname", "renaming the host"),
	DENY("setdomainname", "renaming the host"),
	{
		/* Linux 6.15: open_tree() and mount_setattr() in one call. */
		.syscall = "open_tree_attr",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ALWAYS,
		.when = CD_SC_BASELINE,
		.why = "changing mounts would undo read-only carve-outs",
		.nr_unified = 467,
	},
	{
		.syscall = "unshare",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_ANY,
		.arg = 0,
		.mask = CD_SC_NS_FLAGS,
		.when = CD_SC_BASELINE,
		.why = "new namespaces would give the power to undo the sandbox",
	},
	{
		.syscall = "clone",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_ANY,
		.arg = 0,
		.mask = CD_SC_NS_FLAGS,
		.when = CD_SC_BASELINE,
		.why = "new namespaces would give the power to undo the sandbox",
	},
	{
		/* clone3 passes its flags in memory, out of seccomp's sight.
		 * ENOSYS (not EPERM) makes glibc and musl fall back to clone. */
		.syscall = "clone3",
		.action = CD_SC_ENOSYS,
		.cmp = CD_SC_ALWAYS,
		.when = CD_SC_BASELINE,
		.why = "clone3 hides its flags from the filter; libc falls back to clone",
	},
	{
		/* Only the default persona and the query are allowed: other
		 * personas (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...) weaken
		 * the process's own exploit mitigations. */
		.syscall = "personality",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_NOT_IN2,
		.arg = 0,
		.value = PER_LINUX_VALUE,
		.value2 = PER_QUERY_VALUE,
		.when = CD_SC_BASELINE,
		.why = "personality flags disable exploit mitigations",
	},
	{
		/* The kernel takes the ioctl command as a 32-bit int, so the
		 * compare must ignore the upper half (CVE-2019-10063). */
		.syscall = "ioctl",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_EQ,
		.arg = 1,
		.mask = 0xffffffffULL,
		.value = TIOCSTI_VALUE,
		.when = CD_SC_BASELINE,
		.why = "TTY input injection (CVE-2017-5226)",
	},
	{
		.syscall = "ioctl",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_EQ,
		.arg = 1,
		.mask = 0xffffffffULL,
		.value = TIOCLINUX_VALUE,
		.when = CD_SC_BASELINE,
		.why = "virtual console input injection (TIOCLINUX)",
	},
	{
		/* Exclusive mode outlives the run: the terminal's other users get EBUSY. */
		.syscall = "ioctl",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_EQ,
		.arg = 1,
		.mask = 0xffffffffULL,
		.value = TIOCEXCL_VALUE,
		.when = CD_SC_BASELINE,
		.why = "exclusive mode on a terminal outlives the run (TIOCEXCL)",
	},
	{
		/*
		 * A line discipline outlives the run too, and the rarely used
		 * ones (n_gsm, n_hdlc) have given local root more than once
		 * (CVE-2017-2636, CVE-2023-6546).
		 */
		.syscall = "ioctl",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_EQ,
		.arg = 1,
		.mask = 0xffffffffULL,
		.value = TIOCSETD_VALUE,
		.when = CD_SC_BASELINE,
		.why = "line disciplines outlive the run and are kernel attack surface (TIOCSETD)",
	},
	/*
	 * A lease makes every other opener of the file wait for the holder
	 * (up to lease-break-time, 45 s): the owner of a file, root for
	 * root's, could stall host writers of files it may only read. fcntl64
	 * is the name on 32-bit architectures.
	 */
	{
		.syscall = "fcntl",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_EQ,
		.arg = 1,
		.mask = 0xffffffffULL,
		.value = F_SETLEASE_VALUE,
		.when = CD_SC_BASELINE,
		.why = "a lease stalls the file's other writers (F_SETLEASE)",
	},
	{
		.syscall = "fcntl64",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_EQ,
		.arg = 1,
		.mask = 0xffffffffULL,
		.value = F_SETLEASE_VALUE,
		.when = CD_SC_BASELINE,
		.why = "a lease stalls the file's other writers (F_SETLEASE)",
	},
	/*
	 * No setuid or setgid files: a setuid-root program left in the
	 * workspace or /tmp by a root sandbox (or a setuid-<user> one by an
	 * unprivileged sandbox) would run with those rights for anyone. Every
	 * call that sets a mode, and every call that creates a file with one
	 * (O_CREAT and O_TMPFILE; mknod makes regular files too). mkdir is not
	 * here: the kernel drops both bits from its mode (a directory is setgid
	 * only by inheritance from a setgid parent), and a setgid directory
	 * gives no one rights, only its group to new files.
	 */
	NO_SETID("chmod", 1, "a setuid or setgid file would run with its owner's rights"),
	NO_SETID("fchmod", 1, "a setuid or setgid file would run with its owner's rights"),
	NO_SETID("fchmodat", 2, "a setuid or setgid file would run with its owner's rights"),
	{
		/* Linux 6.6: fchmodat with flags; glibc 2.39 uses it for AT_SYMLINK_NOFOLLOW. */
		.syscall = "fchmodat2",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_ANY,
		.arg = 2,
		.mask = SETID_BITS,
		.when = CD_SC_BASELINE,
		.why = "a setuid or setgid file would run with its owner's rights",
		.nr_unified = 452,
	},
	NO_SETID("open", 2, "creating a setuid or setgid file"),
	NO_SETID("openat", 3, "creating a setuid or setgid file"),
	NO_SETID("creat", 1, "creating a setuid or setgid file"),
	NO_SETID("mknod", 1, "creating a setuid or setgid file"),
	NO_SETID("mknodat", 2, "creating a setuid or setgid file"),
	{
		/* openat2's mode is in memory, out of seccomp's sight; as for clone3,
		 * ENOSYS makes its users (no libc wrapper calls it) fall back to openat. */
		.syscall = "openat2",
		.action = CD_SC_ENOSYS,
		.cmp = CD_SC_ALWAYS,
		.when = CD_SC_BASELINE,
		.why = "openat2 hides its mode from the filter; callers fall back to openat",
	},
	{
		/* Landlock (ABI 4+) only covers TCP; the socket family check
		 * also stops UDP, raw, netlink, vsock, ... */
		.syscall = "socket",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_NE,
		.arg = 0,
		.value = AF_UNIX_VALUE,
		.when = CD_SC_NET_RESTRICTED,
		.why = "network restricted: only AF_UNIX sockets",
	},
	{
		/* Managed too: a pair's two ends are the caller's own. */
		.syscall = "socketpair",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_NE,
		.arg = 0,
		.value = AF_UNIX_VALUE,
		.when = CD_SC_NET_RESTRICTED | CD_SC_NET_MANAGED,
		.why = "network restricted or managed: only AF_UNIX socket pairs",
	},
	/*
	 * Unix sockets. Landlock (up to ABI 7) does not govern connect() or
	 * sendto() on a pathname socket, so without these rules a sandboxed
	 * process could talk to any socket whose file it can name: docker.sock,
	 * the D-Bus system bus, /dev/log, an ssh or gpg agent. So no call may
	 * name a peer. connect() is denied; sendto() only without an address
	 * (glibc's send()); sendmsg()'s msg_name lies in memory, out of the
	 * filter's sight, so only stream and seqpacket sockets can be made, on
	 * which the kernel refuses (stream) or ignores (seqpacket) a msg_name.
	 * A datagram socket, even one of a socketpair, would send to any name.
	 * What is left is a socketpair() and the fds it gives.
	 */
	NET_DENY("connect", "network restricted: Landlock does not govern unix connect()"),
	{
		/* A NULL address is a plain send() (full 64-bit compare: a pointer). */
		.syscall = "sendto",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_NE,
		.arg = 4,
		.value = 0,
		.when = CD_SC_NET_RESTRICTED,
		.why = "network restricted: a datagram could be sent to any unix socket",
	},
	{
		.syscall = "socket",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_NOT_IN2,
		.arg = 1,
		.mask = SOCK_TYPE_MASK_VALUE,
		.value = SOCK_STREAM_VALUE,
		.value2 = SOCK_SEQPACKET_VALUE,
		.when = CD_SC_NET_RESTRICTED,
		.why = "network restricted: no datagram sockets, which send to any address",
	},
	{
		.syscall = "socketpair",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_NOT_IN2,
		.arg = 1,
		.mask = SOCK_TYPE_MASK_VALUE,
		.value = SOCK_STREAM_VALUE,
		.value2 = SOCK_SEQPACKET_VALUE,
		.when = CD_SC_NET_RESTRICTED | CD_SC_NET_MANAGED,
		.why = "network restricted or managed: no datagram socket pairs, which send to "
		       "any unix name",
	},
	/*
	 * No unix socket server either. Nothing in the sandbox could connect
	 * to it, but something outside could: a host tool that trusts a socket
	 * in the workspace, or (under cordon serve, which makes no network
	 * namespace) any process connecting to an abstract name the sandbox
	 * bound first; Landlock's abstract scope only stops connections out.
	 */
	NET_DENY("bind", "network restricted: a unix server could be reached from outside"),
	NET_DENY("listen", "network restricted: a unix server could be reached from outside"),
	NET_DENY("accept", "network restricted: a unix server could be reached from outside"),
	NET_DENY("accept4", "network restricted: a unix server could be reached from outside"),
	/*
	 * Managed network: the command's network namespace holds only lo, and
	 * its one way out is the relay listening there. IP sockets are all it
	 * may make (a full 64-bit compare: a family with high bits set is
	 * refused, never truncated into an allowed one), of types stream and
	 * datagram (no raw, packet or SCTP). No unix socket could reach a
	 * server on the host (a pathname socket is not confined by the network
	 * namespace), no netlink or vsock socket the kernel or the hypervisor.
	 * socketpair() stays, under the restricted rules above: unix stream
	 * and seqpacket pairs, whose two ends are the caller's own. io_uring
	 * is in the baseline.
	 */
	{
		.syscall = "socket",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_NOT_IN2,
		.arg = 0,
		.value = AF_INET_VALUE,
		.value2 = AF_INET6_VALUE,
		.when = CD_SC_NET_MANAGED,
		.why = "managed network: only IP sockets (no unix, netlink, packet, vsock...)",
	},
	{
		.syscall = "socket",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_NOT_IN2,
		.arg = 1,
		.mask = SOCK_TYPE_MASK_VALUE,
		.value = SOCK_STREAM_VALUE,
		.value2 = SOCK_DGRAM_VALUE,
		.when = CD_SC_NET_MANAGED,
		.why = "managed network: no raw or packet sockets",
	},
	/*
	 * Without an IPC namespace (a host without user namespaces, run with
	 * --allow-degraded), System V IPC and POSIX message queues would be the
	 * host's: no Landlock rule or read-only mount governs them.
	 */
	IPC_DENY("shmget"),
	IPC_DENY("shmat"),
	IPC_DENY("shmctl"),
	IPC_DENY("msgget"),
	IPC_DENY("msgsnd"),
	IPC_DENY("msgrcv"),
	IPC_DENY("msgctl"),
	IPC_DENY("semget"),
	IPC_DENY("semop"),
	IPC_DENY("semtimedop"),
	IPC_DENY("semctl"),
	IPC_DENY("mq_open"),
	IPC_DENY("mq_unlink"),
	IPC_DENY("mq_timedsend"),
	IPC_DENY("mq_timedreceive"),
	IPC_DENY("mq_notify"),
	IPC_DENY("mq_getsetattr"),
	/*
	 * The second wall around other processes, where there is no pid
	 * namespace to hide them: every call that names a process, process
	 * group or user by number and changes it is kept to the caller (pid 0,
	 * PRIO_PROCESS or IOPRIO_WHO_PROCESS with who 0). Unprivileged, the
	 * kernel lets a process change any other of its uid (root: of root)
	 * this way: prlimit --cpu=1:1 on a server kills it, --nofile=3 starves
	 * it, renice -u or ionice reaches every process of the user. The cost:
	 * a thread cannot be named by its tid (pthread_setaffinity_np,
	 * pthread_setschedparam), nor the shell's $$ (renice -p $$).
	 * Signals are left to Landlock's signal scope (ABI 6), but kill(-1),
	 * "every process I may signal", has no use without a pid namespace.
	 */
	SELF_ONLY("prlimit64", 0, 0, "another process's resource limits (a CPU limit kills it)"),
	SELF_ONLY("setpriority", 0, PRIO_PROCESS_VALUE,
		  "process groups' and users' priorities (PRIO_PGRP, PRIO_USER)"),
	SELF_ONLY("setpriority", 1, 0, "another process's priority"),
	SELF_ONLY("ioprio_set", 0, IOPRIO_WHO_PROCESS,
		  "process groups' and users' I/O priorities (IOPRIO_WHO_PGRP, IOPRIO_WHO_USER)"),
	SELF_ONLY("ioprio_set", 1, 0, "another process's I/O priority"),
	SELF_ONLY("sched_setaffinity", 0, 0, "another process's CPU affinity"),
	SELF_ONLY("sched_setscheduler", 0, 0, "another process's scheduling policy"),
	SELF_ONLY("sched_setparam", 0, 0, "another process's scheduling priority"),
	SELF_ONLY("sched_setattr", 0, 0, "another process's scheduling attributes"),
	SELF_ONLY("migrate_pages", 0, 0, "moving another process's memory between NUMA nodes"),
	SELF_ONLY("move_pages", 0, 0, "moving another process's memory between NUMA nodes"),
	SELF_ONLY("get_robust_list", 0, 0, "another process's robust futex list (an address leak)"),
	{
		/* The kernel reads the pid as an int: compare the low 32 bits. */
		.syscall = "kill",
		.action = CD_SC_EPERM,
		.cmp = CD_SC_ARG_MASKED_EQ,
		.arg = 0,
		.mask = 0xffffffffULL,
		.value = PID_MINUS_ONE_LO32,
		.when = CD_SC_NO_PID_NS,
		.why = "kill(-1) signals every process of the user",
	},
	/*
	 * pidfd_open() takes any pid (and 0 is not the caller): ENOSYS, so that
	 * Go, Python's asyncio and systemd fall back to waitpid(). The pidfds
	 * left are those of the caller's own children (clone's CLONE_PIDFD).
	 * The calls below take a pidfd or a pair of pids the filter cannot
	 * tell from the caller's; process_madvise() on another process also
	 * needs CAP_SYS_NICE.
	 */
	NO_PID_NS_DENY("pidfd_open", CD_SC_ENOSYS,
		       "a pidfd of any process; callers fall back to pids and waitpid()"),
	NO_PID_NS_DENY("process_madvise", CD_SC_EPERM, "advice on another process's memory"),
	NO_PID_NS_DENY("process_mrelease", CD_SC_EPERM, "reaping another process's memory"),
	NO_PID_NS_DENY("kcmp", CD_SC_EPERM, "comparing other processes' files and memory"),
	{ .syscall = NULL },
};

/*
 * Allowed on purpose, for explain and cordon-sandbox(7): what each reaches and
 * what confines it instead.
 */
const struct cd_sc_allowed cd_sc_allowed[] = {
	{
		.calls = "prlimit64 setpriority ioprio_set sched_setaffinity sched_setscheduler "
			 "sched_setparam sched_setattr migrate_pages move_pages get_robust_list "
			 "pidfd_open process_madvise process_mrelease kcmp",
		.unless = CD_SC_NO_PID_NS,
		.why = "the pid namespace lets them name only the sandbox's processes; the "
		       "user-wide forms reach only the tasks it can see",
	},
	{
		.calls = "kill tkill tgkill rt_sigqueueinfo rt_tgsigqueueinfo pidfd_send_signal",
		.why = "Landlock ABI 6 scopes signals to the sandbox and a pid namespace hides "
		       "the rest; below ABI 6 without one they reach every process of the uid",
	},
	{
		.calls = "getpriority ioprio_get sched_getaffinity sched_getscheduler "
			 "sched_getparam sched_getattr sched_rr_get_interval getpgid getsid "
			 "capget",
		.why = "they read what /proc/PID shows",
	},
	{
		.calls = "setpgid setsid",
		.why = "the kernel keeps them to the caller and its children",
	},
	{
		.calls = "setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid "
			 "setgroups",
		.why = "another user's ids need CAP_SETUID/CAP_SETGID, which the sandbox lacks",
	},
	{
		.calls = "chown fchown lchown fchownat",
		.why = "giving a file away needs CAP_CHOWN, which the sandbox lacks; a "
		       "change of group clears setuid and setgid bits",
	},
	{
		.calls = "setxattr lsetxattr fsetxattr",
		.why = "file capabilities need CAP_SETFCAP, which the sandbox lacks; outside "
		       "the writable paths the mounts are read-only",
	},
	{
		.calls = "mkdir mkdirat",
		.why = "the kernel drops setuid and setgid bits from a new directory's mode",
	},
	{
		.calls = "adjtimex clock_adjtime",
		.why = "libc reads the clock's state through them; changing it needs "
		       "CAP_SYS_TIME, which the sandbox lacks",
	},
	{
		.calls = "flock",
		.why = "advisory locks bind only programs that ask, and end with the run",
	},
	{
		.calls = "fanotify_init fanotify_mark inotify_add_watch",
		.why = "unprivileged, they watch only files the sandbox may read; mount-wide "
		       "marks need CAP_SYS_ADMIN",
	},
	{
		.calls = "statmount listmount",
		.why = "they show the mounts of the sandbox's own mount namespace, as "
		       "/proc/self/mountinfo does",
	},
	{ .calls = NULL },
};

const char *cd_sc_action_name(enum cd_sc_action a)
{
	switch (a) {
	case CD_SC_EPERM:
		return "EPERM";
	case CD_SC_ENOSYS:
		return "ENOSYS";
	case CD_SC_ACTION_COUNT:
		break;
	}
	return NULL;
}

size_t cd_linux_plan_namespaces(const struct cd_linux_plan *lp, const char *names[5])
{
	size_t n = 0;
	if (lp && lp->sandboxed && lp->user_ns)
		names[n++] = "user";
	if (lp && lp->sandboxed && lp->mount_ns)
		names[n++] = "mount";
	if (lp && lp->sandboxed && lp->ipc_ns)
		names[n++] = "ipc";
	if (lp && lp->sandboxed && lp->pid_ns)
		names[n++] = "pid";
	if (lp && lp->sandboxed && lp->net_ns)
		names[n++] = "network";
	return n;
}

const char *cd_mount_op_name(enum cd_mount_op op)
{
	switch (op) {
	case CD_MOUNT_RO_BIND:
		return "ro-bind";
	case CD_MOUNT_RW_BIND:
		return "rw-bind";
	case CD_MOUNT_MASK:
		return "mask";
	case CD_MOUNT_DENY:
		return "deny";
	case CD_MOUNT_PIN:
		return "pin";
	case CD_MOUNT_WRITABLE:
		return "writable";
	case CD_MOUNT_OP_COUNT:
		break;
	}
	return NULL;
}

struct cd_mount_index {
	size_t *slot; /* mount index + 1; 0 = empty */
	size_t cap;   /* a power of two, at least twice the entries */
	size_t n;     /* lp->mounts[0..n) are indexed */
	bool stale;
};

struct cd_linux_plan *cd_linux_plan_free(struct cd_linux_plan *lp)
{
	if (!lp)
		return NULL;
	if (lp->mix) {
		free(lp->mix->slot);
		free(lp->mix);
	}
	free(lp->ll_rules);
	free(lp->mounts);
	free(lp->id_checks);
	cd_limits_plan_free(lp->limits);
	cd_strv_free(lp->degraded);
	cd_strv_free(lp->notes);
	cd_strv_free(lp->owned);
	free(lp);
	return NULL;
}

static void linux_plan_freep(struct cd_linux_plan **lp)
{
	cd_linux_plan_free(*lp);
}

/* How to get user namespaces, then the opt-down: completed by the feature's name. */
#define ENABLE_USERNS                                                               \
	"enable them (sysctl kernel.unprivileged_userns_clone=1 / "                 \
	"user.max_user_namespaces > 0, or an AppArmor profile allowing userns) or " \
	"pass --allow-degraded="

static int refuse(char **reterr, char *msg)
{
	if (reterr)
		*reterr = msg;
	else
		free(msg);
	return -EOPNOTSUPP;
}

/* First Linux release with each Landlock ABI, for the refusal's hint. */
static const char *ll_abi_kernel(unsigned abi)
{
	static const char *const k[] = { "5.13", "5.13", "5.19", "6.2",
					 "6.7",	 "6.10", "6.12", "6.15" };
	return abi < CD_ARRAY_SIZE(k) ? k[abi] : "?";
}

static int check_landlock(const struct cd_linux_host *host, unsigned min, char **reterr)
{
	/* Capping would quietly give less than asked: no kernel can satisfy it. */
	if (min > CD_LL_MAX_ABI)
		return refuse(
			reterr,
			cd_xasprintf("cordon knows Landlock ABIs up to %u; a minimum Landlock "
				     "ABI of %u (--min-landlock-abi) cannot be satisfied on "
				     "any kernel; lower it to %u or less",
				     CD_LL_MAX_ABI, min, CD_LL_MAX_ABI));
	if (host->landlock_abi == 0)
		return refuse(
			reterr,
			cd_xasprintf("Landlock is not available (ABI 0, cordon needs ABI >= %u): "
				     "boot with lsm=...,landlock or use a kernel >= %s with "
				     "CONFIG_SECURITY_LANDLOCK=y",
				     min, ll_abi_kernel(min)));
	if (host->landlock_abi < min)
		return refuse(
			reterr,
			cd_xasprintf("Landlock ABI %u found, but ABI >= %u is required: use a "
				     "kernel >= %s or lower the minimum Landlock ABI",
				     host->landlock_abi, min, ll_abi_kernel(min)));
	return 0;
}

static void push_mount(struct cd_linux_plan *lp, enum cd_mount_op op, const struct cd_plan_path *pp)
{
	struct cd_mount *m;

	lp->mounts = cd_grow_pow2(lp->mounts, lp->n_mounts, sizeof(*lp->mounts));
	m = &lp->mounts[lp->n_mounts++];
	*m = (struct cd_mount){
		.op = op,
		.path = pp->path,
		.why = pp->why,
	};
}

/* Parents first, so a later mount lands on top of (inside) an earlier one. */
static int mount_cmp(const void *a, const void *b)
{
	const struct cd_mount *x = a, *y = b;
	size_t dx = cd_path_depth(x->path), dy = cd_path_depth(y->path);

	if (dx != dy)
		return dx < dy ? -1 : 1;
	return strcmp(x->path, y->path);
}

/*
 * The mounts by path, so that "is there a mount at P" costs a hash lookup
 * rather than a walk of every mount (with thousands of deny entries, the
 * walks made building the plan quadratic). Indices into lp->mounts, which
 * only grows at its end between two sorts: entries added since the last
 * look are indexed then, and a sort (or a mount changed in place) makes
 * the index stale, rebuilt at the next look (struct cd_mount_index, above).
 */
static uint64_t path_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static void mix_insert(struct cd_mount_index *x, const struct cd_mount *mounts, size_t i)
{
	size_t mask = x->cap - 1;
	size_t k = path_hash(mounts[i].path) & mask;
	while (x->slot[k])
		k = (k + 1) & mask;
	x->slot[k] = i + 1;
}

static void mix_stale(struct cd_linux_plan *lp)
{
	if (lp->mix)
		lp->mix->stale = true;
}

static struct cd_mount_index *mix_get(struct cd_linux_plan *lp)
{
	struct cd_mount_index *x = lp->mix;
	if (!x)
		x = lp->mix = cd_xcalloc(1, sizeof(*x));
	if (x->stale || 2 * (lp->n_mounts + 1) > x->cap) {
		size_t cap = 64;
		while (cap < 2 * (lp->n_mounts + 1))
			cap *= 2;
		free(x->slot);
		x->slot = cd_xcalloc(cap, sizeof(*x->slot));
		x->cap = cap;
		x->n = 0;
		x->stale = false;
	}
	for (; x->n < lp->n_mounts; x->n++)
		mix_insert(x, lp->mounts, x->n);
	return x;
}

/* A mount at path, preferring a read-only one (RO_BIND or MASK) when ro; NULL if none. */
static const struct cd_mount *mount_at(struct cd_linux_plan *lp, const char *path, bool ro)
{
	struct cd_mount_index *x = mix_get(lp);
	const struct cd_mount *any = NULL;
	size_t mask = x->cap - 1;
	for (size_t k = path_hash(path) & mask; x->slot[k]; k = (k + 1) & mask) {
		const struct cd_mount *m = &lp->mounts[x->slot[k] - 1];
		if (!cd_streq(m->path, path))
			continue;
		if (!ro || m->op == CD_MOUNT_RO_BIND || m->op == CD_MOUNT_MASK)
			return m;
		any = m;
	}
	return ro ? NULL : any;
}

/*
 * Innermost read-only mount (RO_BIND or MASK) strictly above path, or NULL:
 * each directory above path, innermost first, looked up.
 */
static const struct cd_mount *ro_mount_above(struct cd_linux_plan *lp, const char *path)
{
	char *dir = cd_xstrdup(path);
	const struct cd_mount *m = NULL;
	while (!m && !cd_streq(dir, "/")) {
		char *slash = strrchr(dir, '/');
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
		m = mount_at(lp, dir, true);
	}
	free(dir);
	return m;
}

/*
 * A writable path whose nearest plan ancestor is read-only and which lies
 * inside a read-only mount: it needs a rw bind (or cannot have one).
 */
static const struct cd_mount *rewidened_in_ro_mount(struct cd_linux_plan *lp,
						    const struct cd_plan_path *pp)
{
	if (pp->access != CD_ACCESS_WRITE || pp->parent_access != CD_ACCESS_READ)
		return NULL;
	return ro_mount_above(lp, pp->path);
}

static bool has_mount(struct cd_linux_plan *lp, const char *path)
{
	return mount_at(lp, path, false) != NULL;
}

/* The first plan path not sorted before key. */
static size_t plan_lower_bound(const struct cd_plan *plan, const char *key)
{
	size_t lo = 0, hi = plan->n_paths;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(plan->paths[mid].path, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * path is a directory for sure: a plan path that is one, or above an
 * existing plan path, or above a missing one whose directory exists (a
 * mask is made in that directory; when it is missing too the plan is
 * refused).
 */
static bool known_dir(const struct cd_plan *plan, const char *path)
{
	const struct cd_plan_path *self = cd_plan_find(plan, path);
	if (self && self->type == CD_FT_DIR)
		return true;
	/*
	 * What lies below path is one run of the sorted plan: the paths that
	 * start with "path/" (none other sorts between two of them). A missing
	 * one tells only when its own directory exists.
	 */
	char *prefix = cd_streq(path, "/") ? cd_xstrdup("/") : cd_xasprintf("%s/", path);
	size_t len = strlen(prefix);
	bool r = false;
	for (size_t i = plan_lower_bound(plan, prefix); !r && i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (strncmp(pp->path, prefix, len) != 0)
			break;
		if (cd_streq(pp->path, path))
			continue;
		r = pp->type != CD_FT_MISSING || !pp->parent_missing;
	}
	free(prefix);
	return r;
}

/*
 * A carve-out is a mount on a dentry; Landlock rules are on inodes. A
 * directory above a carve-out whose parent is writable can be renamed away
 * (the carve-out goes with it) and a fresh one made at its path, which
 * inherits the enclosing writable rule: `mv /tmp/w /tmp/x && mkdir -p
 * /tmp/w/.git/hooks` would plant hooks where the host looks for them. A
 * mount point cannot be renamed or removed in the namespace that has the
 * mount (EBUSY), so each such directory is bound on itself. The top of a
 * writable region needs no pin: its parent is not writable.
 *
 * Pin the directories above target, a mount's path. dirs_exist: every
 * directory above target exists (a hidden file's); else a pin goes only on
 * what the plan knows to be a directory (known_dir). what names what is
 * pinned for, for the reason.
 */
static void pin_above(struct cd_linux_plan *lp, const char *target, bool dirs_exist,
		      const char *what, struct cd_strset *seen)
{
	const struct cd_plan *plan = lp->plan;
	char *dir = cd_path_parent(target);

	/*
	 * A mounted dir's own walk covers (or will cover) everything above it,
	 * and so does the walk that saw a directory first (seen): each
	 * directory is looked at once however many mounts lie below it.
	 */
	while (!cd_streq(dir, "/") && !has_mount(lp, dir) && (!seen || cd_strset_add(seen, dir))) {
		char *up = cd_path_parent(dir);
		const struct cd_plan_path *region = NULL;
		struct cd_mount *m;

		if (cd_plan_access(plan, up, &region) == CD_ACCESS_WRITE &&
		    (dirs_exist || known_dir(plan, dir))) {
			cd_strv_append_take(&lp->owned, &lp->n_owned, cd_xstrdup(dir));
			lp->mounts = cd_grow_pow2(lp->mounts, lp->n_mounts, sizeof(*lp->mounts));
			m = &lp->mounts[lp->n_mounts++];
			*m = (struct cd_mount){ .op = CD_MOUNT_PIN };
			m->path = lp->owned[lp->n_owned - 1];
			cd_strv_append_take(&lp->owned, &lp->n_owned,
					    cd_xasprintf("inside writable %s: pinned so that it "
							 "cannot be renamed away with %s below it",
							 region ? region->path : up, what));
			m->why = lp->owned[lp->n_owned - 1];
		}
		free(dir);
		dir = up;
	}
	free(dir);
}

static void add_pins(struct cd_linux_plan *lp)
{
	size_t n_targets = lp->n_mounts;
	struct cd_strset seen = { 0 };

	/*
	 * Above a mask on a missing name too (known_dir): `mv d d2; mkdir d;
	 * echo x >d/.env` would plant the masked name otherwise.
	 */
	for (size_t i = 0; i < n_targets; i++)
		pin_above(lp, lp->mounts[i].path, false, "the carve-outs", &seen);
	cd_strset_done(&seen);
}

/*
 * The caller's own files (cd_linux_opts.hidden): a deny mask over each,
 * whatever the plan grants around it, since Landlock does not govern
 * connect() on a unix socket (a socket outside every readable path can
 * still be connected to). Without user namespaces (and not root) there is
 * no mount namespace to hide them in: degraded[] says so, and the run goes
 * on when the caller keeps its own wall (cordon serve refuses its
 * sandboxes as clients of its unix socket), or when Landlock keeps the
 * sandbox from reading the file; a required file (cordon serve's token,
 * which is all a client needs) that the sandbox could read refuses the
 * plan. 0, or a refusal. The directories above each mask are pinned as
 * above carve-outs (pin_above): renamed away, a directory would take the
 * mask with it, and the file would be readable at its new path in every
 * sandbox made afterwards. Before the mounts are sorted (mount_cmp keeps
 * parents first).
 */
/*
 * Whether the sandbox may read the file at path as far as Landlock is
 * concerned: a rule on it or on a directory above it grants reading (a
 * deny carve-out below such a rule is a mount, not a Landlock matter).
 */
static bool ll_readable(const struct cd_linux_plan *lp, const char *path)
{
	if (!lp->landlock)
		return true;
	for (size_t i = 0; i < lp->n_ll_rules; i++)
		if ((lp->ll_rules[i].allowed & CD_LL_FS_READ_FILE) &&
		    cd_path_is_beneath(path, lp->ll_rules[i].path))
			return true;
	return false;
}

static void add_id_check(struct cd_linux_plan *lp, const struct cd_hidden_path *h)
{
	struct cd_id_check *c;

	lp->id_checks = cd_grow_pow2(lp->id_checks, lp->n_id_checks, sizeof(*lp->id_checks));
	c = &lp->id_checks[lp->n_id_checks++];
	cd_strv_append_take(&lp->owned, &lp->n_owned, cd_xstrdup(h->path));
	c->path = lp->owned[lp->n_owned - 1];
	cd_strv_append_take(
		&lp->owned, &lp->n_owned,
		cd_xasprintf("hidden by the mask of a denied directory above it: %s", h->why));
	c->why = lp->owned[lp->n_owned - 1];
	c->dev = h->dev;
	c->ino = h->ino;
}

static int add_hidden(struct cd_linux_plan *lp, const struct cd_linux_host *host,
		      const struct cd_linux_opts *opts, char **reterr)
{
	for (size_t i = 0; opts && i < opts->n_hidden; i++) {
		const struct cd_hidden_path *h = &opts->hidden[i];
		const char *why_not = NULL;
		struct cd_mount *same = NULL;
		bool covered = false;

		assert(h->path && h->path[0] == '/' && cd_path_is_normal(h->path));
		if (cd_streq(h->path, "/"))
			continue;
		for (size_t k = 0; k < lp->n_mounts; k++) {
			struct cd_mount *m = &lp->mounts[k];
			const struct cd_plan_path *pp = cd_plan_find(lp->plan, m->path);
			if (cd_streq(m->path, h->path))
				same = m;
			else if (m->op == CD_MOUNT_DENY && pp && pp->type == CD_FT_DIR &&
				 cd_path_is_beneath(h->path, m->path))
				covered = true; /* the mask of a denied directory hides it whole */
		}
		if (same && same->op == CD_MOUNT_DENY) {
			/* The plan's own deny mask on that path: on that very file too. */
			same->has_id = h->has_id;
			same->dev = h->dev;
			same->ino = h->ino;
			continue;
		}
		if (covered) {
			/*
			 * Hidden by the directory's mask; but moved out of it between
			 * the caller's check and the spawn, it would not be: the
			 * spawner checks that it is still there (cd_id_check).
			 * Without a mount namespace there is no mask to check for.
			 */
			if (h->has_id && (host->userns || host->is_root))
				add_id_check(lp, h);
			continue;
		}
		if (!host->userns && !host->is_root)
			why_not = "user namespaces are unavailable: there is no mount namespace to "
				  "hide it in";
		else if (cd_path_is_beneath(h->path, "/proc") ||
			 cd_path_is_beneath(h->path, "/dev/pts"))
			why_not = "it lies where the sandbox gets a file system of its own";
		bool unreadable = !ll_readable(lp, h->path);
		if (why_not && h->required && !unreadable)
			return refuse(
				reterr,
				cd_xasprintf("%s (%s) cannot be hidden from the sandbox, which "
					     "may read it: %s; keep the file out of the "
					     "paths the sandbox may read, or give cordon "
					     "user namespaces (sysctl "
					     "kernel.unprivileged_userns_clone=1 / "
					     "user.max_user_namespaces > 0)",
					     h->path, h->why, why_not));
		if (why_not) {
			cd_strv_append_take(
				&lp->degraded, &lp->n_degraded,
				cd_xasprintf("%s (%s) NOT hidden from the sandbox: %s%s", h->path,
					     h->why, why_not,
					     unreadable ? " (Landlock keeps it unreadable)" : ""));
			continue;
		}
		cd_strv_append_take(&lp->owned, &lp->n_owned, cd_xstrdup(h->path));
		const char *path = lp->owned[lp->n_owned - 1];
		cd_strv_append_take(&lp->owned, &lp->n_owned, cd_xasprintf("hidden: %s", h->why));
		const char *why = lp->owned[lp->n_owned - 1];
		if (same) {
			/* A carve-out of the plan at that very path: the deny mask replaces it. */
			same->op = CD_MOUNT_DENY;
			same->path = path;
			same->why = why;
			same->has_id = h->has_id;
			same->dev = h->dev;
			same->ino = h->ino;
			mix_stale(lp);
		} else {
			lp->mounts = cd_grow_pow2(lp->mounts, lp->n_mounts, sizeof(*lp->mounts));
			lp->mounts[lp->n_mounts++] = (struct cd_mount){
				.op = CD_MOUNT_DENY,
				.path = path,
				.why = why,
				.has_id = h->has_id,
				.dev = h->dev,
				.ino = h->ino,
			};
		}
		/* The file exists (cd_linux_opts.hidden): so does every directory above it. */
		pin_above(lp, path, true, h->why, NULL);
	}
	return 0;
}

/*
 * Landlock governs opening, creating, removing and renaming, but not a
 * file's attributes: chmod, chown, utimensat, setxattr (ACLs included) and
 * the file-flag ioctls need only ownership (or a capability). So the whole
 * namespace is made read-only, which refuses all of them with EROFS, and
 * the top of each writable region is attached again as the host has it:
 * cloned before, with its submounts and their attributes. Regions nested
 * in another need nothing (the clone holds them), nor do regions under a
 * read-only carve-out (their rw-bind re-widens them), nor devices, FIFOs
 * and sockets (writing to one is no change to a file system). None when
 * "/" itself is writable: nothing is left to make read-only.
 * 0, or a refusal.
 */
static int add_writable_trees(struct cd_linux_plan *lp, char **reterr)
{
	const struct cd_plan *plan = lp->plan;
	const struct cd_plan_path *root = cd_plan_find(plan, "/");
	size_t n_trees = 0;

	if (root && root->access == CD_ACCESS_WRITE)
		return 0;
	lp->ro_root = true;
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (pp->access != CD_ACCESS_WRITE || pp->parent_access == CD_ACCESS_WRITE ||
		    (pp->type != CD_FT_DIR && pp->type != CD_FT_REG) ||
		    ro_mount_above(lp, pp->path))
			continue;
		if (++n_trees > CD_MAX_WRITABLE_TREES)
			return refuse(reterr, cd_xasprintf("more than %d separate writable paths; "
							   "allow a common parent instead",
							   CD_MAX_WRITABLE_TREES));
		push_mount(lp, CD_MOUNT_WRITABLE, pp);
	}
	if (lp->n_mounts > 1)
		qsort(lp->mounts, lp->n_mounts, sizeof(*lp->mounts), mount_cmp);
	mix_stale(lp);
	return 0;
}

static void add_mounts(struct cd_linux_plan *lp)
{
	const struct cd_plan *plan = lp->plan;

	/*
	 * Deny carve-outs inside readable or writable regions: Landlock cannot
	 * take rights away below a rule, so a mount hides the path. A missing
	 * one needs a mask only where it could be created.
	 */
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (!pp->carve_out || pp->access != CD_ACCESS_DENY)
			continue;
		if (pp->type != CD_FT_MISSING)
			push_mount(lp, CD_MOUNT_DENY, pp);
		else if (pp->parent_access == CD_ACCESS_WRITE)
			push_mount(lp, CD_MOUNT_MASK, pp);
		else
			/* The command cannot make it, but the host could, mid-run. */
			cd_strv_append_take(&lp->degraded, &lp->n_degraded,
					    cd_xasprintf("%s does not exist and is not masked (the "
							 "command cannot create it): if something "
							 "else creates it during the run, the "
							 "command can read it",
							 pp->path));
	}

	/* Read-only carve-outs inside writable regions: Landlock only adds
	 * rights down the tree, so narrowing needs a read-only mount. */
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (!pp->carve_out || pp->access != CD_ACCESS_READ ||
		    pp->parent_access != CD_ACCESS_WRITE)
			continue;
		push_mount(lp, pp->type == CD_FT_MISSING ? CD_MOUNT_MASK : CD_MOUNT_RO_BIND, pp);
	}

	/* Writable paths re-widened inside a read-only carve-out. A writable
	 * path under a merely read-only Landlock region needs no mount. */
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		const struct cd_mount *above;

		/* Look only at the read-only mounts: rw binds added in this
		 * loop are skipped by ro_mount_above() anyway. */
		above = rewidened_in_ro_mount(lp, pp);
		if (!above)
			continue;
		if (pp->type == CD_FT_MISSING || above->op == CD_MOUNT_MASK) {
			cd_strv_append_take(
				&lp->notes, &lp->n_notes,
				cd_xasprintf("%s does not exist: it cannot be made writable "
					     "inside read-only %s and stays read-only",
					     pp->path, above->path));
			continue;
		}
		push_mount(lp, CD_MOUNT_RW_BIND, pp);
	}

	add_pins(lp);
	if (lp->n_mounts > 1)
		qsort(lp->mounts, lp->n_mounts, sizeof(*lp->mounts), mount_cmp);
	mix_stale(lp);
}

/* "P1, P2, P3, ..." naming the first few carve-outs (pins == false) or pins; NULL if none. */
enum mount_kind {
	MOUNTS_CARVE_OUTS,
	MOUNTS_PINS,
	MOUNTS_DENIED
};

static enum mount_kind mount_kind(const struct cd_linux_plan *lp, const struct cd_mount *m)
{
	/* (Writable trees come after the lists are made: see add_writable_trees.) */
	if (m->op == CD_MOUNT_PIN)
		return MOUNTS_PINS;
	if (m->op == CD_MOUNT_DENY ||
	    (m->op == CD_MOUNT_MASK && cd_plan_access(lp->plan, m->path, NULL) == CD_ACCESS_DENY))
		return MOUNTS_DENIED;
	return MOUNTS_CARVE_OUTS;
}

static char *mount_paths_list(const struct cd_linux_plan *lp, enum mount_kind kind)
{
	struct cd_strbuf sb = { 0 };
	const size_t max = 3;
	size_t n = 0;

	for (size_t i = 0; i < lp->n_mounts; i++) {
		if (mount_kind(lp, &lp->mounts[i]) != kind)
			continue;
		if (n++ == max) {
			cd_strbuf_append(&sb, ", ...");
			break;
		}
		cd_strbuf_printf(&sb, "%s%s", n > 1 ? ", " : "", lp->mounts[i].path);
	}
	if (!n)
		return NULL;
	return cd_strbuf_steal(&sb);
}

static void add_ll_rules(struct cd_linux_plan *lp)
{
	const struct cd_plan *plan = lp->plan;

	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		struct cd_ll_rule *r;
		uint64_t allowed;

		if (pp->access != CD_ACCESS_READ && pp->access != CD_ACCESS_WRITE)
			continue;
		/*
		 * A read carve-out inside a writable region adds no right (Landlock
		 * grants the union along the path): its mount does the narrowing.
		 * No rule, so nothing to open: such a path may be a concurrent
		 * run's mask, gone by the time the ruleset is built.
		 */
		if (pp->carve_out && pp->access == CD_ACCESS_READ &&
		    pp->parent_access == CD_ACCESS_WRITE)
			continue;
		if (pp->type == CD_FT_MISSING) {
			/* Landlock rules need an open fd; a missing path inherits
			 * whatever its nearest existing ancestor grants. Paths
			 * inside read-only mounts got their own note already. */
			if (!pp->carve_out && !rewidened_in_ro_mount(lp, pp))
				cd_strv_append_take(
					&lp->notes, &lp->n_notes,
					cd_xasprintf("%s does not exist: no Landlock rule for it",
						     pp->path));
			continue;
		}
		allowed = pp->access == CD_ACCESS_READ ? CD_LL_FS_READ_RIGHTS : lp->ll_handled_fs;
		allowed &= lp->ll_handled_fs;
		/* The kernel rejects directory-only rights on a file rule. */
		if (pp->type != CD_FT_DIR)
			allowed &= CD_LL_FS_FILE_RIGHTS;

		lp->ll_rules = cd_grow_pow2(lp->ll_rules, lp->n_ll_rules, sizeof(*lp->ll_rules));
		r = &lp->ll_rules[lp->n_ll_rules++];
		r->path = pp->path;
		r->allowed = allowed;
		r->is_dir = pp->type == CD_FT_DIR;
	}
}

/* One Landlock rule: read and execute the program at path (see cd_linux_opts.init_program). */
static void add_program_rule(struct cd_linux_plan *lp, const char *path, const char *what)
{
	cd_strv_append_take(&lp->owned, &lp->n_owned, cd_xstrdup(path));
	lp->ll_rules = cd_grow_pow2(lp->ll_rules, lp->n_ll_rules, sizeof(*lp->ll_rules));
	lp->ll_rules[lp->n_ll_rules++] = (struct cd_ll_rule){
		.path = lp->owned[lp->n_owned - 1],
		.allowed = (CD_LL_FS_EXECUTE | CD_LL_FS_READ_FILE) & lp->ll_handled_fs,
		.is_dir = false,
	};
	cd_strv_append_take(&lp->notes, &lp->n_notes,
			    cd_xasprintf("%s (%s) can be read and executed whatever "
					 "the policy says of its path",
					 path, what));
}

static void add_program_rules(struct cd_linux_plan *lp, const struct cd_linux_opts *opts)
{
	if (!opts || !lp->landlock)
		return;
	if (opts->init_program && lp->pid_ns)
		add_program_rule(lp, opts->init_program, "cordon's init of the pid namespace");
	if (opts->exec_program)
		add_program_rule(lp, opts->exec_program,
				 "cordon's helper, run instead of a command");
}

/*
 * The namespaces every sandboxed plan gets: a pid namespace (see pid_ns in
 * plan.h) with the mount namespace its /proc needs, and a user
 * namespace around them when not root. 0, or a refusal.
 */
static int add_namespaces(struct cd_linux_plan *lp, const struct cd_linux_host *host,
			  const struct cd_linux_opts *opts, char **reterr)
{
	cd_degrade_flags degraded = opts ? opts->degraded : 0;
	if (opts && opts->no_pid_ns) {
		/* Contained by the caller (see cd_linux_opts): nothing to refuse. */
	} else if (host->is_root || host->userns) {
		lp->pid_ns = true;
	} else if (!(degraded & CD_DEGRADE_PID_ISOLATION)) {
		return refuse(
			reterr,
			cd_xstrdup("pid isolation (a pid namespace whose init takes the "
				   "command's whole process tree with it) needs user "
				   "namespaces, which are unavailable on this host; " ENABLE_USERNS
				   "pid-isolation"));
	} else {
		cd_strv_append_take(
			&lp->degraded, &lp->n_degraded,
			cd_xstrdup("pid isolation NOT enforced: user namespaces are "
				   "unavailable; if cordon is killed, the command's "
				   "descendants outlive it (seccomp still keeps the calls "
				   "that change a process by pid to the command itself)"));
	}
	/*
	 * A managed network needs its namespace: without one the command
	 * would share the host's network, and seccomp cannot tell the relay's
	 * port from any other address. No opt-down: there is no honest
	 * weaker form of "only through the proxy".
	 */
	if (lp->net_managed) {
		if (!host->is_root && !host->userns)
			return refuse(reterr,
				      cd_xstrdup("a managed network needs a network namespace "
						 "(the relay to the proxy is its only way out), "
						 "but user namespaces are unavailable on this "
						 "host; enable them (sysctl "
						 "kernel.unprivileged_userns_clone=1, or "
						 "user.max_user_namespaces > 0, or AppArmor's "
						 "kernel.apparmor_restrict_unprivileged_userns=0) "
						 "or use --network restricted"));
		lp->net_ns = true;
	}
	/* A restricted network also gets an empty network namespace, where one can be made. */
	if (lp->plan->network == CD_NET_RESTRICTED && !(opts && opts->no_net_ns)) {
		if (host->is_root || host->userns)
			lp->net_ns = true;
		else
			cd_strv_append_take(
				&lp->degraded, &lp->n_degraded,
				cd_xstrdup("no network namespace: user namespaces are "
					   "unavailable; the seccomp socket rules alone "
					   "restrict the network"));
	}
	/* Without a pid namespace, seccomp keeps the pid- and user-targeting calls to the caller. */
	if (!lp->pid_ns)
		lp->sc_when |= CD_SC_NO_PID_NS;
	lp->mount_ns =
		lp->n_mounts > 0 || lp->pid_ns || lp->ro_root || lp->private_pts || lp->private_tmp;
	/* Made wherever a mount namespace is: about 20 us more. */
	lp->ipc_ns = lp->mount_ns;
	lp->user_ns = (lp->mount_ns || lp->net_ns) && !host->is_root;
	return 0;
}

/*
 * private_pts (see plan.h): for a restricted file system that lets
 * /dev/pts be read but not written (a plan that lets the command write
 * there gives it the host's terminals on purpose). A path the plan names
 * below /dev/pts would be hidden by the new instance: refused, as under
 * /proc. Without user namespaces (a run already opted down with
 * --allow-degraded=file-attributes) the host's terminals stay readable:
 * degraded[] says so. 0, or a refusal.
 */
static int add_private_pts(struct cd_linux_plan *lp, const struct cd_linux_host *host,
			   char **reterr)
{
	const struct cd_plan *plan = lp->plan;

	if (!lp->landlock || cd_plan_access(plan, "/dev/pts", NULL) != CD_ACCESS_READ)
		return 0;
	if (!host->userns && !host->is_root) {
		cd_strv_append_take(&lp->degraded, &lp->n_degraded,
				    cd_xstrdup("terminals NOT hidden: user namespaces are "
					       "unavailable, so there is no private /dev/pts; the "
					       "command can open the user's other terminals and "
					       "read what is typed there"));
		return 0;
	}
	for (size_t i = 0; i < plan->n_paths; i++) {
		const char *path = plan->paths[i].path;
		if (cd_path_is_beneath(path, "/dev/pts") && !cd_streq(path, "/dev/pts"))
			return refuse(reterr,
				      cd_xasprintf("%s is under /dev/pts, which the sandbox "
						   "gets a private one of (the host's "
						   "terminals are hidden): a rule there "
						   "would apply to nothing; remove the entry",
						   path));
	}
	lp->private_pts = true;
	lp->private_ptmx = cd_plan_access(plan, "/dev/ptmx", NULL) != CD_ACCESS_DENY;
	return 0;
}

/*
 * The private /tmp (CD_LIMIT_PRIVATE_TMP, see lp->private_tmp): a tmpfs in
 * the sandbox's mount namespace, so that what the command writes there is
 * bounded and none of the host's /tmp is shared. Whatever the plan names
 * below /tmp would be hidden by it: refused, but for what needs no
 * enforcing in an empty tmpfs of the sandbox's own (the protected names
 * of /tmp itself, deny entries: nothing of the host's is there to read).
 * Its mounts below /tmp go. 0, or a refusal.
 */
static int add_private_tmp(struct cd_linux_plan *lp, const struct cd_linux_host *host,
			   const struct cd_linux_opts *opts, char **reterr)
{
	const struct cd_plan *plan = lp->plan;
	if (!opts || !cd_limits_has(opts->limits, CD_LIMIT_PRIVATE_TMP))
		return 0;
	if (!host->userns && !host->is_root)
		return refuse(reterr, cd_xstrdup("a private /tmp needs a mount namespace, but "
						 "user namespaces are unavailable on this host; "
						 "enable them (sysctl "
						 "kernel.unprivileged_userns_clone=1 / "
						 "user.max_user_namespaces > 0, or an AppArmor "
						 "profile allowing userns) or drop --private-tmp"));
	if (plan->cwd && cd_path_is_beneath(plan->cwd, "/tmp") && !cd_streq(plan->cwd, "/tmp"))
		return refuse(reterr,
			      cd_xasprintf("the working directory %s is under /tmp, which a "
					   "private /tmp replaces with an empty tmpfs: choose "
					   "another --cwd or drop --private-tmp",
					   plan->cwd));
	/* What the policy names first (a workspace), then what protects it. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < plan->n_paths; i++) {
			const struct cd_plan_path *pp = &plan->paths[i];
			if (!cd_path_is_beneath(pp->path, "/tmp") || cd_streq(pp->path, "/tmp") ||
			    pp->access == CD_ACCESS_DENY ||
			    (pp->origin == CD_ORIGIN_PROTECTED) != (pass == 1))
				continue;
			cleanup_free char *dir = cd_path_parent(pp->path);
			if (pp->origin == CD_ORIGIN_PROTECTED && cd_streq(dir, "/tmp"))
				continue;
			return refuse(
				reterr,
				cd_xasprintf("%s, from %s, is under /tmp, which a private "
					     "/tmp replaces with an empty tmpfs: the sandbox "
					     "could not reach it; move it out of /tmp or drop "
					     "--private-tmp",
					     pp->path, pp->why ? pp->why : "a path of the policy"));
		}
	}
	size_t w = 0;
	for (size_t i = 0; i < lp->n_mounts; i++)
		if (!cd_path_is_beneath(lp->mounts[i].path, "/tmp"))
			lp->mounts[w++] = lp->mounts[i];
	lp->n_mounts = w;
	mix_stale(lp);
	lp->private_tmp = true;
	lp->private_tmp_size = opts->limits->v[CD_LIMIT_PRIVATE_TMP];
	if (lp->landlock) {
		enum cd_access a = cd_plan_access(plan, "/tmp", NULL);
		lp->private_tmp_rights = a == CD_ACCESS_WRITE ? lp->ll_handled_fs
					 : a == CD_ACCESS_READ
						 ? CD_LL_FS_READ_RIGHTS & lp->ll_handled_fs
						 : 0;
	}
	return 0;
}

/*
 * How the resource limits are enforced (core/limits.h), for sandboxed and
 * unsandboxed plans alike. Their degradations and notes join the plan's.
 * 0, or a refusal.
 */
static int add_limits(struct cd_linux_plan *lp, const struct cd_linux_host *host,
		      const struct cd_linux_opts *opts, char **reterr)
{
	if (!opts || !cd_limits_any(opts->limits))
		return 0;
	if (!lp->sandboxed && cd_limits_has(opts->limits, CD_LIMIT_PRIVATE_TMP))
		return refuse(reterr, cd_xstrdup("a private /tmp needs a sandbox of cordon's, "
						 "and this one has none (the profile disables "
						 "it): use a managed profile or drop "
						 "--private-tmp"));
	struct cd_limits_ctx ctx = {
		.is_root = host && host->lim.uid0,
		.own_userns = lp->sandboxed && lp->user_ns,
		.unsandboxed = !lp->sandboxed,
		.pid_init = lp->sandboxed && lp->pid_ns,
		.degraded = opts->degraded_limits,
	};
	int r = cd_limits_plan_build(opts->limits, host ? &host->lim : NULL, &ctx, &lp->limits,
				     reterr);
	if (r < 0)
		return r;
	for (char **d = lp->limits ? lp->limits->degraded : NULL; d && *d; d++)
		cd_strv_append_take(&lp->degraded, &lp->n_degraded, cd_xstrdup(*d));
	for (char **n = lp->limits ? lp->limits->notes : NULL; n && *n; n++)
		cd_strv_append_take(&lp->notes, &lp->n_notes, cd_xstrdup(*n));
	return 0;
}

/* The plan's entry at path if it is a denied directory that is masked whole, or NULL. */
static const struct cd_plan_path *masked_dir(const struct cd_plan *plan, const char *path)
{
	const struct cd_plan_path *a = cd_plan_find(plan, path);
	return a && a->access == CD_ACCESS_DENY && a->carve_out && a->type == CD_FT_DIR ? a : NULL;
}

int cd_linux_plan_build(const struct cd_plan *plan, const struct cd_linux_host *host,
			const struct cd_linux_opts *opts, struct cd_linux_plan **ret, char **reterr)
{
	CD_CLEANUP(linux_plan_freep) struct cd_linux_plan *lp = NULL;
	unsigned min_abi = opts && opts->min_landlock_abi ? opts->min_landlock_abi : 1;
	cd_degrade_flags degraded = opts ? opts->degraded : 0;
	bool net_restricted;
	int r;

	assert(ret);
	*ret = NULL;
	if (reterr)
		*reterr = NULL;

	lp = cd_xcalloc(1, sizeof(*lp));
	lp->plan = plan;

	if (!plan || plan->type == CD_PROFILE_DISABLED) {
		r = add_limits(lp, host, opts, reterr);
		if (r < 0)
			return r;
		*ret = cd_steal_pointer(&lp);
		return 0;
	}
	assert(host);
	lp->sandboxed = true;
	/* What the binding left unprotected on request is reported with the rest. */
	for (char **d = plan->degraded; d && *d; d++)
		cd_strv_append_take(&lp->degraded, &lp->n_degraded, cd_xstrdup(*d));

	/* Refusals that no host could satisfy come first. */
	if (plan->network == CD_NET_MANAGED) {
		if (!opts || !opts->managed_proxy)
			return refuse(reterr,
				      cd_xstrdup("managed network needs cordon's network proxy, "
						 "and none was given to relay to (cordon run "
						 "starts its own; --network-proxy names "
						 "another), or use --network restricted or "
						 "enabled"));
		r = cd_proxy_endpoint_parse(opts->managed_proxy, &lp->proxy, reterr);
		if (r < 0)
			return r;
		lp->net_managed = true;
	}
	/*
	 * Inside a deny mask nothing is left to allow: refuse rather than hide
	 * it. The directories above each path are looked up, outermost first
	 * (the order of the sorted plan): O(n depth log n), not every pair.
	 */
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (pp->access == CD_ACCESS_DENY)
			continue;
		const struct cd_plan_path *d = NULL;
		if (!cd_streq(pp->path, "/"))
			d = masked_dir(plan, "/");
		char *above = cd_xstrdup(pp->path);
		for (size_t k = 1; !d && above[k]; k++) {
			if (above[k] != '/')
				continue;
			above[k] = '\0';
			d = masked_dir(plan, above);
			above[k] = '/';
		}
		free(above);
		if (d)
			return refuse(reterr,
				      cd_xasprintf("%s is allowed inside denied directory %s, "
						   "which cordon masks whole; allow the "
						   "parent and deny its other entries instead",
						   pp->path, d->path));
	}

	if (!host->seccomp)
		return refuse(reterr, cd_xstrdup("seccomp is not available on this kernel "
						 "(CONFIG_SECCOMP_FILTER); cordon cannot sandbox "
						 "here"));
	net_restricted = plan->network == CD_NET_RESTRICTED;
	lp->seccomp = true;
	lp->sc_when = CD_SC_BASELINE | (net_restricted ? CD_SC_NET_RESTRICTED : 0) |
		      (lp->net_managed ? CD_SC_NET_MANAGED : 0);

	if (plan->fs_unrestricted) {
		r = add_hidden(lp, host, opts, reterr);
		if (r < 0)
			return r;
		if (lp->n_mounts > 1)
			qsort(lp->mounts, lp->n_mounts, sizeof(*lp->mounts), mount_cmp);
		mix_stale(lp);
		r = add_private_tmp(lp, host, opts, reterr);
		if (r < 0)
			return r;
		r = add_namespaces(lp, host, opts, reterr);
		if (r < 0)
			return r;
		r = add_limits(lp, host, opts, reterr);
		if (r < 0)
			return r;
		*ret = cd_steal_pointer(&lp);
		return 0;
	}

	r = check_landlock(host, min_abi, reterr);
	if (r < 0)
		return r;
	lp->landlock = true;
	lp->landlock_abi = cap_abi(host->landlock_abi);
	lp->ll_handled_fs = cd_ll_fs_rights_for_abi(lp->landlock_abi);
	/* A second layer under the seccomp socket-family rule. */
	lp->ll_handled_net = net_restricted ? cd_ll_net_rights_for_abi(lp->landlock_abi) : 0;
	lp->ll_scoped = cd_ll_scopes_for_abi(lp->landlock_abi);
	/* Mounts first: the rule notes refer to them. */
	add_mounts(lp);
	add_ll_rules(lp);
	if (lp->n_mounts > 0 && !host->userns && !host->is_root) {
		cleanup_free char *list = mount_paths_list(lp, MOUNTS_CARVE_OUTS);
		cleanup_free char *pins = mount_paths_list(lp, MOUNTS_PINS);
		cleanup_free char *denied = mount_paths_list(lp, MOUNTS_DENIED);

		if (denied && !(degraded & CD_DEGRADE_DENY_MASKS))
			return refuse(
				reterr,
				cd_xasprintf("denied paths inside readable or writable ones (%s) "
					     "need a mount namespace, but user namespaces are "
					     "unavailable on this host; " ENABLE_USERNS
					     "deny-masks",
					     denied));
		if (denied)
			cd_strv_append_take(
				&lp->degraded, &lp->n_degraded,
				cd_xasprintf("deny entries NOT enforced: user namespaces are "
					     "unavailable; %s stay as readable and writable "
					     "as what encloses them",
					     denied));
		if ((list || (pins && !denied)) && !(degraded & CD_DEGRADE_PROTECTED_METADATA))
			return refuse(
				reterr,
				cd_xasprintf("protected paths inside writable roots (%s) need a "
					     "mount namespace, but user namespaces are "
					     "unavailable on this host; " ENABLE_USERNS
					     "protected-metadata",
					     list ? list : pins));
		if (list || (pins && !denied))
			cd_strv_append_take(
				&lp->degraded, &lp->n_degraded,
				cd_xasprintf("protected metadata NOT enforced: user namespaces "
					     "are unavailable; .git, .codex and .agents under "
					     "writable roots are writable (%s)",
					     list ? list : pins));
		if (pins)
			cd_strv_append_take(
				&lp->degraded, &lp->n_degraded,
				cd_xasprintf("nested writable roots NOT pinned: without a mount "
					     "namespace the command can rename %s away and make "
					     "new directories in their place",
					     pins));
		free(lp->mounts);
		lp->mounts = NULL;
		lp->n_mounts = 0;
		mix_stale(lp);
	}
	/* The command starts in its cwd: under a deny mask it could not even get there. */
	for (size_t i = 0; plan->cwd && i < lp->n_mounts; i++)
		if (lp->mounts[i].op == CD_MOUNT_DENY &&
		    cd_path_is_beneath(plan->cwd, lp->mounts[i].path))
			return refuse(reterr,
				      cd_xasprintf("the working directory %s is inside denied "
						   "%s, which cordon masks: the command could "
						   "not start there; choose another --cwd or "
						   "drop the entry",
						   plan->cwd, lp->mounts[i].path));
	/* A mask needs its mount point made in the masked name's directory. */
	for (size_t i = 0; i < lp->n_mounts; i++) {
		const struct cd_plan_path *pp = cd_plan_find(plan, lp->mounts[i].path);
		if (lp->mounts[i].op == CD_MOUNT_MASK && pp && pp->parent_missing)
			return refuse(reterr,
				      cd_xasprintf("%s cannot be masked: it does not exist, "
						   "nor does the directory it would be in, "
						   "which the command could create; create "
						   "that directory or drop the entry",
						   pp->path));
	}
	r = add_hidden(lp, host, opts, reterr);
	if (r < 0)
		return r;
	if (host->userns || host->is_root) {
		r = add_writable_trees(lp, reterr);
		if (r < 0)
			return r;
	} else if (!(degraded & CD_DEGRADE_FILE_ATTRIBUTES)) {
		return refuse(reterr,
			      cd_xstrdup("keeping the files outside the writable paths from "
					 "having their modes, owners, times, extended "
					 "attributes and flags changed (which Landlock does not "
					 "govern) needs a mount namespace, but user namespaces "
					 "are unavailable on this host; " ENABLE_USERNS
					 "file-attributes"));
	} else {
		cd_strv_append_take(&lp->degraded, &lp->n_degraded,
				    cd_xstrdup("file attributes NOT protected: user namespaces are "
					       "unavailable; the command can change the modes "
					       "(setuid bits included), times, extended attributes "
					       "and flags of files it owns outside the writable "
					       "paths"));
	}
	r = add_private_pts(lp, host, reterr);
	if (r < 0)
		return r;
	r = add_private_tmp(lp, host, opts, reterr);
	if (r < 0)
		return r;
	r = add_namespaces(lp, host, opts, reterr);
	if (r < 0)
		return r;
	if (!lp->ipc_ns) {
		lp->sc_when |= CD_SC_NO_IPC_NS;
		cd_strv_append_take(&lp->degraded, &lp->n_degraded,
				    cd_xstrdup("no IPC namespace: user namespaces are unavailable; "
					       "System V IPC and POSIX message queues are denied "
					       "instead (they would be the host's)"));
	}
	add_program_rules(lp, opts);
	/* The pid namespace's /proc is mounted over whatever is masked below /proc. */
	for (size_t i = 0; lp->pid_ns && i < lp->n_mounts; i++)
		if (cd_path_is_beneath(lp->mounts[i].path, "/proc"))
			return refuse(reterr,
				      cd_xasprintf("%s is under /proc, which the sandbox gets a "
						   "fresh one of (its pid namespace): a mount "
						   "there would be hidden; remove the entry",
						   lp->mounts[i].path));
	r = add_limits(lp, host, opts, reterr);
	if (r < 0)
		return r;

	*ret = cd_steal_pointer(&lp);
	return 0;
}
