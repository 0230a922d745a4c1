/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The Linux wrapper as data: what Landlock rules, seccomp rules, namespaces
 * and mounts a plan needs on a host with given facts. Pure and OS-free, so
 * `cordon explain --backend linux` works on any host and the rules are
 * unit-tested; sandbox/linux/ turns this into kernel objects.
 *
 * Landlock constants are the kernel's uapi values (stable ABI), carried here
 * because Debian 12's <linux/landlock.h> stops at ABI 2.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"
#include "core/plan.h"

/* clang-format off */
#define CD_LL_FS_EXECUTE        (1ULL << 0)
#define CD_LL_FS_WRITE_FILE     (1ULL << 1)
#define CD_LL_FS_READ_FILE      (1ULL << 2)
#define CD_LL_FS_READ_DIR       (1ULL << 3)
#define CD_LL_FS_REMOVE_DIR     (1ULL << 4)
#define CD_LL_FS_REMOVE_FILE    (1ULL << 5)
#define CD_LL_FS_MAKE_CHAR      (1ULL << 6)
#define CD_LL_FS_MAKE_DIR       (1ULL << 7)
#define CD_LL_FS_MAKE_REG       (1ULL << 8)
#define CD_LL_FS_MAKE_SOCK      (1ULL << 9)
#define CD_LL_FS_MAKE_FIFO      (1ULL << 10)
#define CD_LL_FS_MAKE_BLOCK     (1ULL << 11)
#define CD_LL_FS_MAKE_SYM       (1ULL << 12)
#define CD_LL_FS_REFER          (1ULL << 13) /* ABI 2 */
#define CD_LL_FS_TRUNCATE       (1ULL << 14) /* ABI 3 */
#define CD_LL_FS_IOCTL_DEV      (1ULL << 15) /* ABI 5 */
#define CD_LL_NET_BIND_TCP      (1ULL << 0)  /* ABI 4 */
#define CD_LL_NET_CONNECT_TCP   (1ULL << 1)  /* ABI 4 */
#define CD_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define CD_LL_SCOPE_SIGNAL      (1ULL << 1)  /* ABI 6 */
#define CD_LL_MAX_ABI           7
/* clang-format on */

/* Rights the kernel at `abi` knows (0 for abi 0). */
uint64_t cd_ll_fs_rights_for_abi(unsigned abi);
uint64_t cd_ll_net_rights_for_abi(unsigned abi);
uint64_t cd_ll_scopes_for_abi(unsigned abi);
/* Rights that make sense on a non-directory (file) rule. */
#define CD_LL_FS_FILE_RIGHTS                                                               \
	(CD_LL_FS_EXECUTE | CD_LL_FS_WRITE_FILE | CD_LL_FS_READ_FILE | CD_LL_FS_TRUNCATE | \
	 CD_LL_FS_IOCTL_DEV)
#define CD_LL_FS_READ_RIGHTS (CD_LL_FS_EXECUTE | CD_LL_FS_READ_FILE | CD_LL_FS_READ_DIR)
/* Space-separated right names for a mask, e.g. "execute read_file read_dir". Static buffer
 * not used: returns malloc'ed. */
char *cd_ll_fs_rights_names(uint64_t mask);
char *cd_ll_net_rights_names(uint64_t mask);
char *cd_ll_scopes_names(uint64_t mask);

/* Facts about the host the wrapper is built for (from the probe, or assumed by explain). */
struct cd_linux_host {
	unsigned landlock_abi; /* 0 = Landlock unavailable */
	bool seccomp;	       /* seccomp filters available */
	bool userns;	       /* unprivileged (or privileged) user namespaces usable */
	bool is_root;	       /* euid 0 with CAP_SYS_ADMIN: mount ns without a user ns */
	/* For resource limits: cgroups and rlimits (limits.lim.probed: looked at). */
	struct cd_limits_host lim;
};

typedef enum cd_degrade_flags {
	CD_DEGRADE_PROTECTED_METADATA = 1u << 0, /* run without ro carve-outs when no mount ns */
	CD_DEGRADE_PID_ISOLATION = 1u << 1,	 /* run without the pid namespace when no user ns */
	CD_DEGRADE_DENY_MASKS = 1u << 2, /* run with denied paths readable when no mount ns */
	/* run with modes, times, xattrs of read-only files changeable when no mount ns */
	CD_DEGRADE_FILE_ATTRIBUTES = 1u << 3,
	/*
	 * Bind without scanning the workspace roots for nested repositories
	 * (cd_bind_input.skip_nested_scan): for trees past the scan's bounds.
	 */
	CD_DEGRADE_NESTED_REPOSITORIES = 1u << 4,
} cd_degrade_flags;

/* A file of the caller's that sandboxes must not reach (cd_linux_opts.hidden). */
struct cd_hidden_path {
	const char *path; /* absolute, normal */
	const char *why;  /* one line for explain and notes: "cordon serve's unix socket" */
	/*
	 * The caller has no wall of its own behind the mask (cordon serve's
	 * token file: whoever reads it is a client): where it cannot be
	 * hidden and the plan lets the sandbox read it, the plan is refused.
	 */
	bool required;
	/*
	 * The very file (its st_dev and st_ino as the caller found it, with no
	 * path walk since): the deny mask over it carries them (cd_mount.id),
	 * and the spawner refuses the sandbox when another file is at the path
	 * by then (replaced, or moved away), so a check the caller made
	 * earlier cannot be outrun. has_id false: whatever is at the path.
	 */
	bool has_id;
	unsigned long long dev, ino;
};

struct cd_linux_opts {
	unsigned min_landlock_abi; /* refuse below this (default 1) */
	cd_degrade_flags degraded; /* explicit opt-downs */
	/*
	 * The caller contains the process tree itself and does not want a pid
	 * namespace per process: cordon serve, whose own pid namespace (root)
	 * or pair of subreapers outlives and ends every process it starts, and
	 * which kills what a sandboxed command leaves in its mount namespace.
	 * A pid namespace per process would cost a fork of the whole server,
	 * and each init would keep the server's pages copy-on-write.
	 */
	bool no_pid_ns;
	/*
	 * The same for the network namespace of a restricted network: cordon
	 * serve (making one costs about 0.4 ms here, a third of its start
	 * budget; the seccomp socket rules enforce the restriction alone).
	 */
	bool no_net_ns;
	/*
	 * Programs of cordon's own that the sandboxed child executes by
	 * descriptor, each given a Landlock rule to read and execute that one
	 * file, whatever the policy says of its path (a deny mask does not
	 * hide it either: it is not looked up by path). init_program: the
	 * init of a plan's pid namespace (cordon serve's cordon-init), ruled
	 * only when the plan has one. exec_program: executed instead of the
	 * command (the fs helper). NULL for none.
	 */
	const char *init_program;
	const char *exec_program;
	/*
	 * Files of the caller's own that no sandboxed process may reach,
	 * whatever the plan says of their paths (cordon serve: its unix
	 * socket, whose connect() Landlock does not govern, and its token
	 * file). Each is covered by a deny mask (CD_MOUNT_DENY) where the plan
	 * can have a mount namespace, and the directories above it that a
	 * writable parent could rename away are pinned (CD_MOUNT_PIN).
	 * Elsewhere (and below /proc or /dev/pts, which the sandbox gets of its
	 * own) degraded[] says it is not hidden, without a refusal when the
	 * caller has a wall of its own; a required one that the plan lets the
	 * sandbox read is refused. One inside a denied directory is hidden by
	 * that mask already. Absolute, normal paths of existing files (never
	 * directories). Copied into the plan.
	 */
	const struct cd_hidden_path *hidden;
	size_t n_hidden;
	/*
	 * Resource limits to enforce (borrowed; NULL or empty for none): the
	 * plan gets their enforcement (limits), for unsandboxed plans too, and
	 * a private /tmp for CD_LIMIT_PRIVATE_TMP. degraded_limits: bit l
	 * when --allow-degraded names limit l.
	 */
	const struct cd_limits *limits;
	uint32_t degraded_limits;
	/*
	 * The proxy a managed network goes through (borrowed): "unix:PATH"
	 * (an absolute path) or "tcp:A.B.C.D:PORT", parsed by
	 * cd_proxy_endpoint_parse. NULL: a managed network is refused, as
	 * there is nothing to relay to. See lp->net_managed.
	 */
	const char *managed_proxy;
};

/* Where the relay of a managed network listens inside the sandbox's namespace. */
#define CD_RELAY_ADDR	  "127.0.0.1"
#define CD_RELAY_PORT	  3128
#define CD_RELAY_PORT_STR "3128"

/* A managed network's proxy (cd_linux_opts.managed_proxy), parsed. */
struct cd_proxy_endpoint {
	bool is_unix;
	char path[108];	 /* is_unix: absolute, fits sockaddr_un.sun_path with its NUL */
	uint8_t addr[4]; /* !is_unix: IPv4 address, network order */
	uint16_t port;	 /* !is_unix: host order, 1..65535 */
};

/*
 * Parse "unix:/abs/path" or "tcp:A.B.C.D:PORT" strictly. 0, or -EINVAL with
 * *reterr (malloc'ed, one line saying what is wrong).
 */
int cd_proxy_endpoint_parse(const char *s, struct cd_proxy_endpoint *ret, char **reterr);

/*
 * The variables a managed network sets in the command's environment, all
 * pointing at the relay (the contract of Codex's executor-launched proxy):
 * a NULL-terminated static array of {name, value, socks5_value}.
 */
struct cd_env_pair {
	const char *name;
	const char *value;
	const char *socks5_value; /* the value when the proxy takes SOCKS5; NULL: value */
};
extern const struct cd_env_pair cd_managed_proxy_env[];

/*
 * The variables of cd_managed_proxy_env as NAME=VALUE (a NULL-terminated
 * malloc'ed vector), each relay address replaced by 127.0.0.1:port: for a
 * sandbox that reaches the proxy itself on a loopback port (Seatbelt's
 * proxy-restricted mode), not through a relay.
 */
char **cd_managed_proxy_env_at(uint16_t port, bool socks5);

/* e's value when the proxy does (socks5) or does not take SOCKS5. */
static inline const char *cd_env_pair_value(const struct cd_env_pair *e, bool socks5)
{
	return socks5 && e->socks5_value ? e->socks5_value : e->value;
}

struct cd_ll_rule {
	const char *path; /* borrowed from the plan */
	uint64_t allowed; /* already masked by the handled rights and by file/dir */
	bool is_dir;
};

enum cd_sc_action {
	CD_SC_EPERM,
	CD_SC_ENOSYS,
	CD_SC_ACTION_COUNT,
};

enum cd_sc_cmp {
	CD_SC_ALWAYS,	     /* unconditional */
	CD_SC_ARG_MASKED_EQ, /* (arg & mask) == value */
	CD_SC_ARG_NE,	     /* arg != value (full 64-bit compare) */
	CD_SC_ARG_NOT_IN2,   /* arg != value && arg != value2 (two allowed values) */
	/*
	 * (arg & mask) != 0: any of the flag bits in mask is set. libseccomp's
	 * SCMP_CMP_MASKED_EQ cannot say "!= 0" in one comparison, so a backend
	 * compiling this with libseccomp emits one rule per set bit b of mask,
	 * each SCMP_CMP_MASKED_EQ(b, b); the rules are OR-ed by the filter.
	 */
	CD_SC_ARG_MASKED_ANY,
	/*
	 * (arg & mask) != value && (arg & mask) != value2: two allowed values
	 * of a field of the argument (a socket's type without its flags).
	 */
	CD_SC_ARG_MASKED_NOT_IN2,
	CD_SC_CMP_COUNT,
};

/*
 * clone(2)/unshare(2) flags that create namespaces: CLONE_NEWNS,
 * CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
 * CLONE_NEWNET, CLONE_NEWTIME (uapi values, spelled out so the core needs no
 * <linux/sched.h>). A new user namespace would hand the sandboxed side the
 * capabilities to remount or otherwise escape the mount carve-outs.
 */
#define CD_SC_NS_FLAGS                                                                   \
	(0x00020000ULL | 0x02000000ULL | 0x04000000ULL | 0x08000000ULL | 0x10000000ULL | \
	 0x20000000ULL | 0x40000000ULL | 0x00000080ULL)

typedef enum cd_sc_when {
	CD_SC_BASELINE = 1u << 0,	/* every sandboxed (MANAGED/EXTERNAL) run */
	CD_SC_NET_RESTRICTED = 1u << 1, /* only when the network is restricted */
	/* a restricted file system without an IPC namespace (no user namespaces) */
	CD_SC_NO_IPC_NS = 1u << 2,
	/*
	 * No pid namespace (a run degraded with --allow-degraded=pid-isolation,
	 * or a caller that contains the tree itself, cd_linux_opts.no_pid_ns):
	 * the calls that name another process or user by number are kept to
	 * the caller itself. Inside a pid namespace they can name only the
	 * sandbox's own processes (the user-wide forms too: the kernel skips
	 * tasks the caller's namespace cannot see), so they are left alone.
	 */
	CD_SC_NO_PID_NS = 1u << 3,
	/*
	 * Managed network (the fence, lp->net_managed): only IP sockets, so
	 * the command reaches nothing but its own network namespace, whose one
	 * way out is the relay (no unix, netlink, packet, raw or vsock socket).
	 */
	CD_SC_NET_MANAGED = 1u << 4,
} cd_sc_when;

struct cd_sc_rule {
	const char *syscall; /* libseccomp name */
	enum cd_sc_action action;
	enum cd_sc_cmp cmp;
	unsigned arg; /* argument index for the comparison */
	uint64_t mask;
	uint64_t value;
	uint64_t value2;
	cd_sc_when when;
	const char *why; /* one line for explain */
	/*
	 * The call's number in the unified table (Linux 5.1 and later give a
	 * new call one number on every architecture but alpha, ia64 and mips),
	 * used when the libseccomp at hand does not know the name yet; 0: none.
	 */
	int nr_unified;
};

/*
 * The full table (baseline + network rules), terminated by syscall == NULL.
 * Argument indexes are those of the x86_64/aarch64 syscall ABI (clone's
 * flags are arg0 there; a backend for s390/cris, where clone swaps its first
 * two arguments, must remap).
 */
extern const struct cd_sc_rule cd_sc_rules[];

/*
 * The other half of the audit: calls that reach another process, user, mount,
 * key, device or the clock and are allowed on purpose, with why (for explain
 * and cordon-sandbox(7)). An entry applies unless one of the groups in
 * `unless` is in the plan's sc_when (0: always). Terminated by calls == NULL.
 */
struct cd_sc_allowed {
	const char *calls; /* space-separated libseccomp names */
	cd_sc_when unless;
	const char *why; /* one line */
};
extern const struct cd_sc_allowed cd_sc_allowed[];

/* "EPERM", "ENOSYS"; NULL when out of range. */
const char *cd_sc_action_name(enum cd_sc_action a);

enum cd_mount_op {
	CD_MOUNT_RO_BIND, /* bind path on itself read-only (existing path) */
	CD_MOUNT_RW_BIND, /* bind path on itself writable again (under an ro bind) */
	/*
	 * Missing path: create an empty regular file as the mount point (it is
	 * removed after the run) and mount on it a symlink to a path that
	 * cannot exist, so the sandbox sees a dangling symlink: the name looks
	 * missing (lookups below it fail with ENOENT) and cannot be created,
	 * replaced or removed.
	 */
	CD_MOUNT_MASK,
	/*
	 * Existing path denied inside a readable or writable region (a deny
	 * mask): an empty directory or file of mode 000 from a read-only tmpfs
	 * is bound over it, so nothing in it can be listed, read or written.
	 */
	CD_MOUNT_DENY,
	/*
	 * Existing directory: bind it on itself (recursively, attributes
	 * unchanged). The bind makes it a mount point, which cannot be renamed
	 * or removed (EBUSY) in the sandbox's namespace: a directory inside a
	 * writable region that holds carve-outs stays where the carve-outs are.
	 */
	CD_MOUNT_PIN,
	/*
	 * The top of a writable region (see ro_root): its tree, cloned with
	 * the host's attributes before the rest of the namespace is made
	 * read-only, then attached at its own path again.
	 */
	CD_MOUNT_WRITABLE,
	CD_MOUNT_OP_COUNT,
};

/* At most this many terminals in a private /dev/pts (its devpts max=). */
#define CD_PRIVATE_PTS_MAX 256

/* At most this many CD_MOUNT_WRITABLE mounts (the child holds their trees at once). */
#define CD_MAX_WRITABLE_TREES 256

struct cd_mount {
	enum cd_mount_op op;
	const char *path; /* borrowed from the plan (pins: from the linux plan) */
	const char *why;  /* borrowed */
	/*
	 * CD_MOUNT_DENY of a hidden file (cd_hidden_path.has_id): the mount
	 * goes on that very file (st_dev, st_ino) or the sandbox is refused
	 * with -ESTALE, whatever is at the path by the time it is made.
	 */
	bool has_id;
	unsigned long long dev, ino;
};

/*
 * A hidden file (cd_hidden_path.has_id) inside a directory the plan denies
 * whole: that directory's mask hides it, so it gets no mask of its own, but
 * the spawner still makes sure the very file is at its path (st_dev,
 * st_ino) and has no other name, or refuses the sandbox with -ESTALE:
 * moved out of the denied directory, it would be readable where it went.
 * No mount: the child does nothing with it.
 */
struct cd_id_check {
	const char *path; /* owned by the plan (owned[]) */
	const char *why;  /* owned by the plan */
	unsigned long long dev, ino;
};

struct cd_linux_plan {
	const struct cd_plan *plan; /* borrowed */
	bool sandboxed;		    /* false: DISABLED profile, plain spawn */
	/* Landlock */
	bool landlock;	       /* a ruleset is applied */
	unsigned landlock_abi; /* ABI used (the host's, capped at CD_LL_MAX_ABI) */
	uint64_t ll_handled_fs;
	uint64_t ll_handled_net;
	uint64_t ll_scoped;
	struct cd_ll_rule *ll_rules;
	size_t n_ll_rules;
	/* seccomp */
	bool seccomp;
	cd_sc_when sc_when; /* which rule groups apply */
	/* namespaces */
	bool user_ns;  /* unshare(CLONE_NEWUSER) (not root) */
	bool mount_ns; /* unshare(CLONE_NEWNS) */
	/*
	 * A pid namespace whose init (the first child) runs the command, kills
	 * what is left when the command exits, and takes everything with it
	 * when it dies (with cordon, through PR_SET_PDEATHSIG). Implies
	 * mount_ns: the namespace gets a /proc of its own.
	 */
	bool pid_ns;
	/*
	 * Restricted network: an empty network namespace (its loopback left
	 * down) on top of the seccomp socket rules.
	 */
	bool net_ns;
	/*
	 * Managed network (implies net_ns): lo is brought up in the network
	 * namespace, the spawner's child listens on CD_RELAY_ADDR:CD_RELAY_PORT
	 * there before any restriction and hands the listening socket to the
	 * supervisor, whose relay connects each accepted connection to proxy
	 * and to nothing else; seccomp (CD_SC_NET_MANAGED) lets the command
	 * make IP sockets only.
	 */
	bool net_managed;
	struct cd_proxy_endpoint proxy;
	/*
	 * An IPC namespace of its own (with every mount namespace): System V
	 * shared memory, semaphores and message queues, and POSIX message
	 * queues, of the host and of other sandboxes are out of reach. They are
	 * not files: neither Landlock nor the read-only mounts govern them.
	 */
	bool ipc_ns;
	/*
	 * Every mount of the namespace is made read-only, but the writable
	 * regions (CD_MOUNT_WRITABLE). Landlock has no right for changing a
	 * file's attributes: without this the command could chmod (setuid
	 * bits included), chown within its groups, set times, extended
	 * attributes, ACLs and file flags on any file it owns outside the
	 * writable paths (as root: any file of root's). Implies mount_ns.
	 */
	bool ro_root;
	/*
	 * A devpts instance of its own on /dev/pts (where the host has one):
	 * the host's terminals, which a readable /dev would otherwise let the
	 * command open and read (another terminal's keystrokes) are hidden,
	 * and /dev/ptmx makes new ones in the private instance. Wherever a
	 * mount namespace is and the plan lets /dev/pts be read. The
	 * terminals the command is handed on fds 0-2 stay usable through
	 * those descriptors (and /dev/stderr and the like).
	 */
	bool private_pts;
	/* And /dev/ptmx (not denied) makes terminals there (else its ptmx is mode 000). */
	bool private_ptmx;
	struct cd_mount *mounts; /* in the order to perform them */
	size_t n_mounts;
	/* Hidden files covered by a denied directory's mask: checked, not mounted. */
	struct cd_id_check *id_checks;
	size_t n_id_checks;
	/*
	 * A tmpfs of private_tmp_size bytes on /tmp (the private_tmp limit),
	 * mounted after the other mounts, none of which lies under /tmp; the
	 * host's /tmp is out of sight. Landlock grants private_tmp_rights on it
	 * (the plan's access to /tmp), since a rule on the host's /tmp does not
	 * reach through the mount that hides it.
	 */
	bool private_tmp;
	uint64_t private_tmp_size;
	uint64_t private_tmp_rights;
	/* How the resource limits are enforced (owned); NULL when none were asked. */
	struct cd_limits_plan *limits;
	/* Reported degradations, NULL-terminated (e.g. "protected metadata NOT enforced: ...") */
	char **degraded;
	char **notes;
	/* Storage for the paths and reasons of pins (not plan paths); NULL-terminated. */
	char **owned;
	/* Their lengths (they grow through cd_strv_append_take). */
	size_t n_degraded, n_notes, n_owned;
	/* Build state: the mounts by path (plan.c); freed with the plan. */
	struct cd_mount_index *mix;
};

/*
 * The namespaces a plan creates, by their short names ("user", "mount",
 * "ipc", "pid", "network"), in that order, into names[0..4]; returns how
 * many. For
 * explain, cordon run -v and the process/start result.
 */
size_t cd_linux_plan_namespaces(const struct cd_linux_plan *lp, const char *names[5]);

/*
 * Build the Linux wrapper plan. Refusals (return -EOPNOTSUPP with *reterr a
 * malloc'ed one-line reason naming the mechanism and the fix):
 *  - Landlock ABI below opts->min_landlock_abi (including 0) for a plan that
 *    restricts the file system;
 *  - no seccomp for a sandboxed plan;
 *  - carve-outs needing a mount namespace on a host without user namespaces
 *    (and not root), unless CD_DEGRADE_PROTECTED_METADATA;
 *  - any sandboxed plan on such a host, which cannot have its pid namespace,
 *    unless CD_DEGRADE_PID_ISOLATION;
 *  - a readable or writable path inside a denied directory (the deny mask
 *    hides everything below it);
 *  - deny masks on a host without user namespaces (and not root), unless
 *    CD_DEGRADE_DENY_MASKS;
 *  - a restricted file system on such a host, whose read-only mounts
 *    (ro_root) need a mount namespace, unless CD_DEGRADE_FILE_ATTRIBUTES;
 *  - more than CD_MAX_WRITABLE_TREES separate writable regions;
 *  - a path under /dev/pts in a plan with private_pts (hidden by it);
 *  - CD_NET_MANAGED without opts->managed_proxy, or where no network
 *    namespace can be made (no user namespaces, not root);
 *  - a limit that cannot be enforced here (core/limits.h), unless
 *    opts->degraded_limits names it;
 *  - a private /tmp without a sandbox or a mount namespace, or with a path
 *    of the plan (or the cwd) below /tmp, which it would hide.
 *
 * Mounts, in the order to perform them (parents first): read-only binds and
 * masks for read-only carve-outs under writable paths, writable binds for
 * writable paths re-widened inside them, and pins: every directory above a
 * mount target whose parent is writable (so it could be renamed away and
 * replaced, taking the carve-outs with it), up to the top of the writable
 * region. Last (by depth among the rest), the tops of the writable
 * regions when ro_root. Without a mount namespace
 * (CD_DEGRADE_PROTECTED_METADATA) there are no mounts, and degraded[] says
 * what is not enforced.
 */
int cd_linux_plan_build(const struct cd_plan *plan, const struct cd_linux_host *host,
			const struct cd_linux_opts *opts, struct cd_linux_plan **ret,
			char **reterr);
struct cd_linux_plan *cd_linux_plan_free(struct cd_linux_plan *lp);

const char *cd_mount_op_name(enum cd_mount_op op);
