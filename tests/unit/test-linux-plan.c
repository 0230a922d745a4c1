/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Linux wrapper plan as data: Landlock ABI tables, the seccomp table and
 * cd_linux_plan_build() on hand-built plans (no file system involved), and
 * on plans bound over the in-memory tree of fakefs.c.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "fakefs.h"
#include "sandbox/linux/plan.h"

/* ---- Landlock ABI tables ---- */

/* clang-format off */
static const uint64_t fs_by_abi[] = {
	0, 0x1fff, 0x3fff, 0x7fff, 0x7fff, 0xffff, 0xffff, 0xffff, 0xffff,
};
static const uint64_t net_by_abi[] = { 0, 0, 0, 0, 3, 3, 3, 3, 3 };
static const uint64_t scopes_by_abi[] = { 0, 0, 0, 0, 0, 0, 3, 3, 3 };
/* clang-format on */

START_TEST(test_abi_tables)
{
	unsigned abi = (unsigned)_i;

	ck_assert_uint_eq(cd_ll_fs_rights_for_abi(abi), fs_by_abi[abi]);
	ck_assert_uint_eq(cd_ll_net_rights_for_abi(abi), net_by_abi[abi]);
	ck_assert_uint_eq(cd_ll_scopes_for_abi(abi), scopes_by_abi[abi]);
}
END_TEST

START_TEST(test_abi_tables_named_bits)
{
	ck_assert(!(cd_ll_fs_rights_for_abi(1) & CD_LL_FS_REFER));
	ck_assert(cd_ll_fs_rights_for_abi(2) & CD_LL_FS_REFER);
	ck_assert(!(cd_ll_fs_rights_for_abi(2) & CD_LL_FS_TRUNCATE));
	ck_assert(cd_ll_fs_rights_for_abi(3) & CD_LL_FS_TRUNCATE);
	ck_assert(!(cd_ll_fs_rights_for_abi(4) & CD_LL_FS_IOCTL_DEV));
	ck_assert(cd_ll_fs_rights_for_abi(5) & CD_LL_FS_IOCTL_DEV);
	ck_assert_uint_eq(cd_ll_net_rights_for_abi(4), CD_LL_NET_BIND_TCP | CD_LL_NET_CONNECT_TCP);
	ck_assert_uint_eq(cd_ll_scopes_for_abi(6),
			  CD_LL_SCOPE_ABSTRACT_UNIX_SOCKET | CD_LL_SCOPE_SIGNAL);
	/* Far-future kernels behave as the newest ABI cordon knows. */
	ck_assert_uint_eq(cd_ll_fs_rights_for_abi(1000), cd_ll_fs_rights_for_abi(CD_LL_MAX_ABI));
	ck_assert_uint_eq(cd_ll_scopes_for_abi(~0u), cd_ll_scopes_for_abi(CD_LL_MAX_ABI));
}
END_TEST

static void check_names(char *got, const char *want)
{
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

START_TEST(test_rights_names)
{
	check_names(cd_ll_fs_rights_names(cd_ll_fs_rights_for_abi(CD_LL_MAX_ABI)),
		    "execute write_file read_file read_dir remove_dir remove_file make_char "
		    "make_dir make_reg make_sock make_fifo make_block make_sym refer truncate "
		    "ioctl_dev");
	check_names(cd_ll_fs_rights_names(CD_LL_FS_READ_RIGHTS), "execute read_file read_dir");
	check_names(cd_ll_fs_rights_names(0), "");
	check_names(cd_ll_fs_rights_names(CD_LL_FS_TRUNCATE | (1ULL << 20)), "truncate 0x100000");
	check_names(cd_ll_net_rights_names(CD_LL_NET_BIND_TCP | CD_LL_NET_CONNECT_TCP),
		    "bind_tcp connect_tcp");
	check_names(cd_ll_net_rights_names(CD_LL_NET_CONNECT_TCP), "connect_tcp");
	check_names(cd_ll_net_rights_names(0), "");
	check_names(cd_ll_scopes_names(CD_LL_SCOPE_ABSTRACT_UNIX_SOCKET | CD_LL_SCOPE_SIGNAL),
		    "abstract_unix_socket signal");
	check_names(cd_ll_scopes_names(CD_LL_SCOPE_SIGNAL), "signal");
}
END_TEST

/* ---- seccomp table ---- */

static size_t sc_count(const char *name)
{
	size_t n = 0;
	for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++)
		n += cd_streq(r->syscall, name);
	return n;
}

static const struct cd_sc_rule *sc_find(const char *name, uint64_t value)
{
	for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++)
		if (cd_streq(r->syscall, name) && r->value == value)
			return r;
	return NULL;
}

START_TEST(test_sc_sanity)
{
	size_t n = 0;

	for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++, n++) {
		ck_assert_msg(*r->syscall, "rule %zu has an empty name", n);
		ck_assert_msg(r->why && *r->why, "%s has no why", r->syscall);
		ck_assert_msg(!strchr(r->why, '\n'), "%s: why is not one line", r->syscall);
		ck_assert_int_lt(r->action, CD_SC_ACTION_COUNT);
		ck_assert_int_lt(r->cmp, CD_SC_CMP_COUNT);
		ck_assert_msg(r->when == CD_SC_BASELINE || r->when == CD_SC_NET_RESTRICTED ||
				      r->when == CD_SC_NO_IPC_NS || r->when == CD_SC_NO_PID_NS ||
				      r->when == CD_SC_NET_MANAGED ||
				      r->when == (CD_SC_NET_RESTRICTED | CD_SC_NET_MANAGED),
			      "%s: bad when %u", r->syscall, (unsigned)r->when);
		/* A unified number is one of the calls added since Linux 5.1 (424 on). */
		ck_assert(r->nr_unified == 0 || (r->nr_unified >= 424 && r->nr_unified < 1000));
		ck_assert_uint_lt(r->arg, 6);
		if (r->cmp == CD_SC_ARG_MASKED_EQ)
			ck_assert_uint_eq(r->value & ~r->mask, 0);
		if (r->cmp == CD_SC_ARG_MASKED_ANY)
			ck_assert_uint_ne(r->mask, 0);
		if (r->cmp == CD_SC_ARG_MASKED_NOT_IN2) {
			/* A value with bits outside the mask could never be allowed. */
			ck_assert_uint_ne(r->mask, 0);
			ck_assert_uint_eq(r->value & ~r->mask, 0);
			ck_assert_uint_eq(r->value2 & ~r->mask, 0);
		}
		/* No exact duplicates. */
		for (const struct cd_sc_rule *q = cd_sc_rules; q != r; q++)
			ck_assert_msg(!(cd_streq(q->syscall, r->syscall) && q->cmp == r->cmp &&
					q->arg == r->arg && q->mask == r->mask &&
					q->value == r->value && q->value2 == r->value2),
				      "duplicate rule for %s", r->syscall);
	}
	ck_assert_uint_ge(n, 45);
	ck_assert_str_eq(cd_sc_action_name(CD_SC_EPERM), "EPERM");
	ck_assert_str_eq(cd_sc_action_name(CD_SC_ENOSYS), "ENOSYS");
	ck_assert_ptr_null(cd_sc_action_name(CD_SC_ACTION_COUNT));
}
END_TEST

static const char *const required_unconditional[] = {
	"ptrace",
	"process_vm_readv",
	"process_vm_writev",
	"io_uring_setup",
	"io_uring_enter",
	"io_uring_register",
	"keyctl",
	"add_key",
	"request_key",
	"bpf",
	"perf_event_open",
	"userfaultfd",
	"kexec_load",
	"kexec_file_load",
	"init_module",
	"finit_module",
	"delete_module",
	"swapon",
	"swapoff",
	"reboot",
	"acct",
	"mount",
	"umount2",
	"mount_setattr",
	"move_mount",
	"open_tree",
	"fsopen",
	"fsconfig",
	"fsmount",
	"fspick",
	"pivot_root",
	"chroot",
	"setns",
	"name_to_handle_at",
	"open_by_handle_at",
	"lookup_dcookie",
	"quotactl",
	/* The audit of issue 21. */
	"quotactl_fd",
	"pidfd_getfd",
	"syslog",
	"_sysctl",
	"iopl",
	"ioperm",
	"vhangup",
	"settimeofday",
	"clock_settime",
	"sethostname",
	"setdomainname",
	"open_tree_attr",
};

START_TEST(test_sc_required)
{
	const char *name = required_unconditional[_i];
	const struct cd_sc_rule *r = sc_find(name, 0);

	ck_assert_msg(r, "%s missing from cd_sc_rules", name);
	ck_assert_uint_eq(sc_count(name), 1);
	ck_assert_int_eq(r->action, CD_SC_EPERM);
	ck_assert_int_eq(r->cmp, CD_SC_ALWAYS);
	ck_assert_uint_eq(r->when, CD_SC_BASELINE);
}
END_TEST

START_TEST(test_sc_conditional)
{
	const struct cd_sc_rule *r;
	static const char *const ns_calls[] = { "unshare", "clone" };

	ck_assert_uint_eq(CD_SC_NS_FLAGS, 0x7e020080ULL);
	for (size_t i = 0; i < CD_ARRAY_SIZE(ns_calls); i++) {
		ck_assert_uint_eq(sc_count(ns_calls[i]), 1);
		r = sc_find(ns_calls[i], 0);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(r->action, CD_SC_EPERM);
		ck_assert_int_eq(r->cmp, CD_SC_ARG_MASKED_ANY);
		ck_assert_uint_eq(r->arg, 0);
		ck_assert_uint_eq(r->mask, CD_SC_NS_FLAGS);
		ck_assert_uint_eq(r->when, CD_SC_BASELINE);
	}

	ck_assert_uint_eq(sc_count("clone3"), 1);
	r = sc_find("clone3", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->action, CD_SC_ENOSYS);
	ck_assert_int_eq(r->cmp, CD_SC_ALWAYS);
	ck_assert_uint_eq(r->when, CD_SC_BASELINE);

	ck_assert_uint_eq(sc_count("personality"), 1);
	r = sc_find("personality", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->action, CD_SC_EPERM);
	ck_assert_int_eq(r->cmp, CD_SC_ARG_NOT_IN2);
	ck_assert_uint_eq(r->arg, 0);
	ck_assert_uint_eq(r->value2, 0xffffffffULL);

	/* TIOCSTI, TIOCLINUX, TIOCEXCL and TIOCSETD, compared on the low 32 bits only. */
	ck_assert_uint_eq(sc_count("ioctl"), 4);
	static const uint64_t tty_ioctls[] = { 0x5412, 0x541c, 0x540c, 0x5423 };
	for (size_t i = 0; i < CD_ARRAY_SIZE(tty_ioctls); i++) {
		r = sc_find("ioctl", tty_ioctls[i]);
		ck_assert_msg(r, "no ioctl rule for 0x%x", (unsigned)tty_ioctls[i]);
		ck_assert_int_eq(r->cmp, CD_SC_ARG_MASKED_EQ);
		ck_assert_uint_eq(r->arg, 1);
		ck_assert_uint_eq(r->mask, 0xffffffffULL);
		ck_assert_int_eq(r->action, CD_SC_EPERM);
		ck_assert_uint_eq(r->when, CD_SC_BASELINE);
	}
	r = sc_find("ioctl", 0x5412);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->cmp, CD_SC_ARG_MASKED_EQ);
	ck_assert_uint_eq(r->arg, 1);
	ck_assert_uint_eq(r->mask, 0xffffffffULL);
	ck_assert_int_eq(r->action, CD_SC_EPERM);
	ck_assert_uint_eq(r->when, CD_SC_BASELINE);
	ck_assert_ptr_nonnull(strstr(r->why, "CVE-2017-5226"));
	r = sc_find("ioctl", 0x541c);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->cmp, CD_SC_ARG_MASKED_EQ);
	ck_assert_uint_eq(r->arg, 1);
	ck_assert_uint_eq(r->mask, 0xffffffffULL);
	ck_assert_uint_eq(r->when, CD_SC_BASELINE);
}
END_TEST

static const struct cd_sc_rule *sc_find_cmp(const char *name, enum cd_sc_cmp cmp)
{
	for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++)
		if (cd_streq(r->syscall, name) && r->cmp == cmp)
			return r;
	return NULL;
}

static const struct cd_sc_rule *sc_find_arg(const char *name, unsigned arg)
{
	for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++)
		if (cd_streq(r->syscall, name) && r->arg == arg)
			return r;
	return NULL;
}

/* No setuid or setgid bit through any call that sets or creates a mode (issue 21). */
static const struct {
	const char *name;
	unsigned arg; /* the mode */
	int nr_unified;
} setid_calls[] = {
	{ "chmod", 1, 0 },	 { "fchmod", 1, 0 }, { "fchmodat", 2, 0 },
	{ "fchmodat2", 2, 452 }, { "open", 2, 0 },   { "openat", 3, 0 },
	{ "creat", 1, 0 },	 { "mknod", 1, 0 },  { "mknodat", 2, 0 },
};

START_TEST(test_sc_setid)
{
	const struct cd_sc_rule *r;

	for (size_t i = 0; i < CD_ARRAY_SIZE(setid_calls); i++) {
		ck_assert_uint_eq(sc_count(setid_calls[i].name), 1);
		r = sc_find(setid_calls[i].name, 0);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(r->action, CD_SC_EPERM);
		ck_assert_int_eq(r->cmp, CD_SC_ARG_MASKED_ANY);
		ck_assert_uint_eq(r->arg, setid_calls[i].arg);
		ck_assert_uint_eq(r->mask, 06000);
		ck_assert_uint_eq(r->when, CD_SC_BASELINE);
		ck_assert_int_eq(r->nr_unified, setid_calls[i].nr_unified);
	}
	/* openat2's mode is in memory: ENOSYS, so callers fall back to openat. */
	r = sc_find("openat2", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->action, CD_SC_ENOSYS);
	ck_assert_int_eq(r->cmp, CD_SC_ALWAYS);
	ck_assert_uint_eq(r->when, CD_SC_BASELINE);
	/* mkdir keeps neither bit (the kernel drops them): allowed, and said so. */
	ck_assert_uint_eq(sc_count("mkdir"), 0);
	ck_assert_uint_eq(sc_count("mkdirat"), 0);
	/* Leases (F_SETLEASE, 1024) on fcntl and its 32-bit name, low 32 bits. */
	static const char *const fcntls[] = { "fcntl", "fcntl64" };
	for (size_t i = 0; i < CD_ARRAY_SIZE(fcntls); i++) {
		ck_assert_uint_eq(sc_count(fcntls[i]), 1);
		r = sc_find(fcntls[i], 1024);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(r->cmp, CD_SC_ARG_MASKED_EQ);
		ck_assert_uint_eq(r->arg, 1);
		ck_assert_uint_eq(r->mask, 0xffffffffULL);
		ck_assert_uint_eq(r->when, CD_SC_BASELINE);
	}
}
END_TEST

/* The second wall: calls kept to the caller where there is no pid namespace. */
static const struct {
	const char *name;
	unsigned arg;
	uint64_t self; /* the only value allowed */
} self_only[] = {
	{ "prlimit64", 0, 0 },		{ "setpriority", 0, 0 /* PRIO_PROCESS */ },
	{ "setpriority", 1, 0 },	{ "ioprio_set", 0, 1 /* IOPRIO_WHO_PROCESS */ },
	{ "ioprio_set", 1, 0 },		{ "sched_setaffinity", 0, 0 },
	{ "sched_setscheduler", 0, 0 }, { "sched_setparam", 0, 0 },
	{ "sched_setattr", 0, 0 },	{ "migrate_pages", 0, 0 },
	{ "move_pages", 0, 0 },		{ "get_robust_list", 0, 0 },
};

START_TEST(test_sc_no_pid_ns)
{
	static const char *const denied[] = { "process_madvise", "process_mrelease", "kcmp" };
	const struct cd_sc_rule *r;
	size_t n = 0;

	for (size_t i = 0; i < CD_ARRAY_SIZE(self_only); i++) {
		r = sc_find_arg(self_only[i].name, self_only[i].arg);
		ck_assert_msg(r, "%s: no rule on arg%u", self_only[i].name, self_only[i].arg);
		/* "Deny unless equal" on all 64 bits: junk in the upper half is denied too. */
		ck_assert_int_eq(r->cmp, CD_SC_ARG_NE);
		ck_assert_uint_eq(r->value, self_only[i].self);
		ck_assert_int_eq(r->action, CD_SC_EPERM);
		ck_assert_uint_eq(r->when, CD_SC_NO_PID_NS);
	}
	ck_assert_uint_eq(sc_count("setpriority"), 2);
	ck_assert_uint_eq(sc_count("ioprio_set"), 2);
	for (size_t i = 0; i < CD_ARRAY_SIZE(denied); i++) {
		ck_assert_uint_eq(sc_count(denied[i]), 1);
		r = sc_find(denied[i], 0);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(r->cmp, CD_SC_ALWAYS);
		ck_assert_int_eq(r->action, CD_SC_EPERM);
		ck_assert_uint_eq(r->when, CD_SC_NO_PID_NS);
	}
	/* pidfd_open: ENOSYS, so that callers fall back to pids. */
	r = sc_find("pidfd_open", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->action, CD_SC_ENOSYS);
	ck_assert_int_eq(r->cmp, CD_SC_ALWAYS);
	ck_assert_uint_eq(r->when, CD_SC_NO_PID_NS);
	/* kill(-1), on the low 32 bits (the kernel reads an int). */
	ck_assert_uint_eq(sc_count("kill"), 1);
	r = sc_find("kill", 0xffffffffULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->cmp, CD_SC_ARG_MASKED_EQ);
	ck_assert_uint_eq(r->mask, 0xffffffffULL);
	ck_assert_uint_eq(r->arg, 0);
	ck_assert_uint_eq(r->when, CD_SC_NO_PID_NS);
	/* Nothing else depends on the pid namespace. */
	for (const struct cd_sc_rule *q = cd_sc_rules; q->syscall; q++)
		n += q->when == CD_SC_NO_PID_NS;
	ck_assert_uint_eq(n, CD_ARRAY_SIZE(self_only) + CD_ARRAY_SIZE(denied) + 2);
}
END_TEST

/* The allowed-on-purpose half of the audit: well formed, never a denied call's twin. */
START_TEST(test_sc_allowed)
{
	size_t n = 0;
	bool pid_entry = false;

	for (const struct cd_sc_allowed *a = cd_sc_allowed; a->calls; a++, n++) {
		ck_assert_msg(*a->calls && a->why && *a->why && !strchr(a->why, '\n'),
			      "allowed entry %zu", n);
		ck_assert(a->unless == 0 || a->unless == CD_SC_NO_PID_NS);
		char *calls = cd_xstrdup(a->calls), *save = NULL;
		for (char *w = strtok_r(calls, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
			/*
			 * Listed as allowed: no rule denies it whole in the same
			 * group sets (a form of it may be: kill(-1)).
			 */
			for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++)
				ck_assert_msg(!cd_streq(r->syscall, w) || r->cmp != CD_SC_ALWAYS ||
						      (r->when & a->unless),
					      "%s is both denied and allowed", w);
			if (a->unless == CD_SC_NO_PID_NS)
				ck_assert_msg(sc_count(w) > 0,
					      "%s: allowed in a pid namespace, "
					      "but denied nowhere",
					      w);
		}
		free(calls);
		pid_entry |= a->unless == CD_SC_NO_PID_NS;
	}
	ck_assert(pid_entry);
	ck_assert_uint_ge(n, 10);
}
END_TEST

START_TEST(test_sc_network)
{
	static const char *const pairs[] = { "socket", "socketpair" };
	/* No connecting to a unix socket, and no unix socket server. */
	static const char *const always[] = { "connect", "bind", "listen", "accept", "accept4" };
	const struct cd_sc_rule *r;
	size_t n_net = 0;

	for (size_t i = 0; i < CD_ARRAY_SIZE(pairs); i++) {
		/* socket: two more for a managed network (test_managed_network). */
		ck_assert_uint_eq(sc_count(pairs[i]), i == 0 ? 4 : 2);
		/* The family: AF_UNIX only, compared on all 64 bits. */
		r = sc_find_cmp(pairs[i], CD_SC_ARG_NE);
		ck_assert_ptr_nonnull(r);
		ck_assert_uint_eq(r->arg, 0);
		ck_assert_uint_eq(r->value, 1);
		ck_assert_int_eq(r->action, CD_SC_EPERM);
		ck_assert(r->when & CD_SC_NET_RESTRICTED);
		/* The type without SOCK_CLOEXEC/SOCK_NONBLOCK: SOCK_STREAM or SOCK_SEQPACKET. */
		r = sc_find_cmp(pairs[i], CD_SC_ARG_MASKED_NOT_IN2);
		ck_assert_ptr_nonnull(r);
		ck_assert_uint_eq(r->arg, 1);
		ck_assert_uint_eq(r->mask, 0xf);
		ck_assert_uint_eq(r->value, 1);
		ck_assert_uint_eq(r->value2, 5);
		ck_assert_int_eq(r->action, CD_SC_EPERM);
		ck_assert(r->when & CD_SC_NET_RESTRICTED);
	}
	for (size_t i = 0; i < CD_ARRAY_SIZE(always); i++) {
		ck_assert_uint_eq(sc_count(always[i]), 1);
		r = sc_find(always[i], 0);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(r->cmp, CD_SC_ALWAYS);
		ck_assert_int_eq(r->action, CD_SC_EPERM);
		ck_assert_uint_eq(r->when, CD_SC_NET_RESTRICTED);
	}
	/* sendto with a destination address (arg4, a pointer: all 64 bits); send() passes NULL. */
	ck_assert_uint_eq(sc_count("sendto"), 1);
	r = sc_find("sendto", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->cmp, CD_SC_ARG_NE);
	ck_assert_uint_eq(r->arg, 4);
	ck_assert_int_eq(r->action, CD_SC_EPERM);
	ck_assert_uint_eq(r->when, CD_SC_NET_RESTRICTED);
	/* sendmsg cannot be filtered (msg_name is in memory): the socket types cover it. */
	ck_assert_uint_eq(sc_count("sendmsg"), 0);
	/* Nothing else depends on the network setting. */
	for (const struct cd_sc_rule *q = cd_sc_rules; q->syscall; q++)
		n_net += (q->when & CD_SC_NET_RESTRICTED) != 0;
	ck_assert_uint_eq(n_net, 2 * CD_ARRAY_SIZE(pairs) + CD_ARRAY_SIZE(always) + 1);
}
END_TEST

START_TEST(test_mount_op_names)
{
	ck_assert_str_eq(cd_mount_op_name(CD_MOUNT_RO_BIND), "ro-bind");
	ck_assert_str_eq(cd_mount_op_name(CD_MOUNT_RW_BIND), "rw-bind");
	ck_assert_str_eq(cd_mount_op_name(CD_MOUNT_MASK), "mask");
	ck_assert_str_eq(cd_mount_op_name(CD_MOUNT_PIN), "pin");
	ck_assert_ptr_null(cd_mount_op_name(CD_MOUNT_OP_COUNT));
}
END_TEST

/* ---- plan building on hand-built plans ---- */

#define PP(p, acc, ft, parent, co)                                                             \
	{                                                                                      \
		.path = (char *)(p), .access = (acc), .type = (ft), .origin = CD_ORIGIN_ENTRY, \
		.entry_index = -1, .why = (char *)"why " p, .parent_access = (parent),         \
		.carve_out = (co)                                                              \
	}

#define R CD_ACCESS_READ
#define W CD_ACCESS_WRITE
#define D CD_ACCESS_DENY

static struct cd_plan_path ro_paths[] = {
	PP("/", R, CD_FT_DIR, D, false),
	PP("/dev/null", W, CD_FT_OTHER, R, false),
	PP("/nonexistent", R, CD_FT_MISSING, R, false),
};

static struct cd_plan make_plan(struct cd_plan_path *paths, size_t n, enum cd_network net)
{
	struct cd_plan p = {
		.type = CD_PROFILE_MANAGED,
		.network = net,
		.full_read = true,
		.cwd = (char *)"/",
		.paths = paths,
		.n_paths = n,
	};
	for (size_t i = 0; i < n; i++)
		p.has_carve_outs |= paths[i].carve_out;
	return p;
}

static const struct cd_linux_host host_full = {
	.landlock_abi = 7,
	.seccomp = true,
	.userns = true,
	.is_root = false,
};

static struct cd_linux_plan *build_ok(const struct cd_plan *plan, const struct cd_linux_host *h,
				      const struct cd_linux_opts *o)
{
	struct cd_linux_plan *lp = NULL;
	char *err = NULL;
	int r = cd_linux_plan_build(plan, h, o, &lp, &err);

	ck_assert_msg(r == 0, "build failed: %d %s", r, err ? err : "(null)");
	ck_assert_ptr_null(err);
	ck_assert_ptr_nonnull(lp);
	ck_assert_ptr_eq(lp->plan, plan);
	return lp;
}

/* Build, expect a refusal whose message contains every given substring. */
static void build_refused(const struct cd_plan *plan, const struct cd_linux_host *h,
			  const struct cd_linux_opts *o, const char *const *subs)
{
	struct cd_linux_plan *lp = (struct cd_linux_plan *)1;
	char *err = NULL;
	int r = cd_linux_plan_build(plan, h, o, &lp, &err);

	ck_assert_int_eq(r, -EOPNOTSUPP);
	ck_assert_ptr_null(lp);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(!strchr(err, '\n'), "multi-line reason: %s", err);
	for (; *subs; subs++)
		ck_assert_msg(strstr(err, *subs), "\"%s\" not in \"%s\"", *subs, err);
	free(err);
}

static const struct cd_ll_rule *rule_for(const struct cd_linux_plan *lp, const char *path)
{
	for (size_t i = 0; i < lp->n_ll_rules; i++)
		if (cd_streq(lp->ll_rules[i].path, path))
			return &lp->ll_rules[i];
	return NULL;
}

START_TEST(test_build_disabled)
{
	struct cd_plan plan = make_plan(NULL, 0, CD_NET_ENABLED);
	/* No host facts are needed to run unsandboxed, not even seccomp. */
	struct cd_linux_host none = { 0 };
	struct cd_linux_plan *lp;

	plan.type = CD_PROFILE_DISABLED;
	plan.fs_unrestricted = true;
	lp = build_ok(&plan, &none, NULL);
	ck_assert(!lp->sandboxed);
	ck_assert(!lp->landlock);
	ck_assert(!lp->seccomp);
	ck_assert(!lp->pid_ns);
	ck_assert(!lp->mount_ns);
	ck_assert(!lp->user_ns);
	ck_assert_uint_eq(lp->n_ll_rules, 0);
	ck_assert_uint_eq(lp->n_mounts, 0);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 0);
	cd_linux_plan_free(lp);
}
END_TEST

static const unsigned ro_abis[] = { 1, 3, 5, 7 };

static void check_read_only(unsigned abi, enum cd_network net)
{
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), net);
	struct cd_linux_host h = host_full;
	struct cd_linux_plan *lp;
	const struct cd_ll_rule *root, *null;
	uint64_t fs = cd_ll_fs_rights_for_abi(abi);

	h.landlock_abi = abi;
	lp = build_ok(&plan, &h, NULL);
	ck_assert(lp->sandboxed);
	ck_assert(lp->landlock);
	ck_assert(lp->seccomp);
	ck_assert_uint_eq(lp->landlock_abi, abi);
	ck_assert_uint_eq(lp->ll_handled_fs, fs);
	if (net == CD_NET_RESTRICTED) {
		/* With a pid namespace: no CD_SC_NO_PID_NS. */
		ck_assert_uint_eq(lp->sc_when, CD_SC_BASELINE | CD_SC_NET_RESTRICTED);
		ck_assert_uint_eq(lp->ll_handled_net,
				  abi >= 4 ? CD_LL_NET_BIND_TCP | CD_LL_NET_CONNECT_TCP : 0);
	} else {
		ck_assert_uint_eq(lp->sc_when, CD_SC_BASELINE);
		ck_assert_uint_eq(lp->ll_handled_net, 0);
	}
	ck_assert_uint_eq(lp->ll_scoped,
			  abi >= 6 ? CD_LL_SCOPE_ABSTRACT_UNIX_SOCKET | CD_LL_SCOPE_SIGNAL : 0);

	/* The missing path gets no rule (and a note). */
	ck_assert_uint_eq(lp->n_ll_rules, 2);
	ck_assert_ptr_null(rule_for(lp, "/nonexistent"));
	ck_assert_uint_eq(cd_strv_length(lp->notes), 1);
	ck_assert_ptr_nonnull(strstr(lp->notes[0], "/nonexistent"));

	root = rule_for(lp, "/");
	ck_assert_ptr_nonnull(root);
	ck_assert(root->is_dir);
	ck_assert_uint_eq(root->allowed, CD_LL_FS_EXECUTE | CD_LL_FS_READ_FILE | CD_LL_FS_READ_DIR);
	ck_assert_ptr_eq(root->path, ro_paths[0].path);

	/* A writable device: file rights only, as many as the ABI handles. */
	null = rule_for(lp, "/dev/null");
	ck_assert_ptr_nonnull(null);
	ck_assert(!null->is_dir);
	ck_assert_uint_eq(null->allowed, fs & CD_LL_FS_FILE_RIGHTS);
	ck_assert(null->allowed & CD_LL_FS_WRITE_FILE);
	ck_assert(!(null->allowed & CD_LL_FS_READ_DIR));
	ck_assert(!(null->allowed & CD_LL_FS_MAKE_REG));
	ck_assert(!!(null->allowed & CD_LL_FS_TRUNCATE) == (abi >= 3));
	ck_assert(!!(null->allowed & CD_LL_FS_IOCTL_DEV) == (abi >= 5));

	/* No mounts, but a pid namespace, its /proc's mount namespace, a user namespace. */
	ck_assert(lp->pid_ns);
	ck_assert(lp->mount_ns);
	ck_assert(lp->user_ns);
	ck_assert_uint_eq(lp->n_mounts, 0);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 0);
	cd_linux_plan_free(lp);
}

START_TEST(test_build_read_only)
{
	check_read_only(ro_abis[_i], CD_NET_RESTRICTED);
	check_read_only(ro_abis[_i], CD_NET_ENABLED);
}
END_TEST

START_TEST(test_build_abi_capped)
{
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;
	struct cd_linux_plan *lp;

	h.landlock_abi = CD_LL_MAX_ABI + 5;
	lp = build_ok(&plan, &h, NULL);
	ck_assert_uint_eq(lp->landlock_abi, CD_LL_MAX_ABI);
	ck_assert_uint_eq(lp->ll_handled_fs, cd_ll_fs_rights_for_abi(CD_LL_MAX_ABI));
	cd_linux_plan_free(lp);
}
END_TEST

/*
 * The mounts other than the writable trees (CD_MOUNT_WRITABLE, checked on
 * their own), in plan order, into out[]; returns how many.
 */
static size_t carve_outs(const struct cd_linux_plan *lp, const struct cd_mount **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < lp->n_mounts; i++)
		if (lp->mounts[i].op != CD_MOUNT_WRITABLE && n < max)
			out[n++] = &lp->mounts[i];
	return n;
}

/* The paths of the writable trees, in plan order, joined by spaces. */
static char *writable_trees(const struct cd_linux_plan *lp)
{
	struct cd_strbuf sb = { 0 };

	for (size_t i = 0; i < lp->n_mounts; i++)
		if (lp->mounts[i].op == CD_MOUNT_WRITABLE)
			cd_strbuf_printf(&sb, "%s%s", sb.len ? " " : "", lp->mounts[i].path);
	return cd_strbuf_steal(&sb);
}

static void check_trees(const struct cd_linux_plan *lp, const char *want)
{
	char *got = writable_trees(lp);

	ck_assert_str_eq(got, want);
	/* Trees are only taken for a read-only root. */
	ck_assert(lp->ro_root || *want == '\0');
	free(got);
}

START_TEST(test_build_read_file_rule)
{
	/* Read on a regular file: execute and read_file only. */
	struct cd_plan_path paths[] = {
		PP("/etc/hosts", R, CD_FT_REG, D, false),
		PP("/w", W, CD_FT_DIR, D, false),
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_ENABLED);
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);
	const struct cd_ll_rule *r = rule_for(lp, "/etc/hosts");

	ck_assert_ptr_nonnull(r);
	ck_assert(!r->is_dir);
	ck_assert_uint_eq(r->allowed, CD_LL_FS_EXECUTE | CD_LL_FS_READ_FILE);
	r = rule_for(lp, "/w");
	ck_assert_ptr_nonnull(r);
	ck_assert(r->is_dir);
	ck_assert_uint_eq(r->allowed, cd_ll_fs_rights_for_abi(7));
	/* No carve-out: only the writable tree of /w. */
	check_trees(lp, "/w");
	ck_assert_uint_eq(lp->n_mounts, 1);
	cd_linux_plan_free(lp);
}
END_TEST

/*
 * A workspace-write plan with two roots; strcmp order of the plan differs
 * from depth order (/a/long/w/.git sorts before /b/.codex).
 */
static struct cd_plan_path ww_paths[] = {
	PP("/", R, CD_FT_DIR, D, false),
	PP("/a/long/w", W, CD_FT_DIR, R, false),
	PP("/a/long/w/.agents", R, CD_FT_MISSING, W, true),
	PP("/a/long/w/.codex", R, CD_FT_MISSING, W, true),
	PP("/a/long/w/.git", R, CD_FT_DIR, W, true),
	PP("/b", W, CD_FT_DIR, R, false),
	PP("/b/.codex", R, CD_FT_MISSING, W, true),
	PP("/b/.git", R, CD_FT_REG, W, true),
	PP("/dev/null", W, CD_FT_OTHER, R, false),
};

static void check_ww_mounts(const struct cd_linux_plan *lp)
{
	static const struct {
		enum cd_mount_op op;
		const char *path;
	} want[] = {
		{ CD_MOUNT_MASK, "/b/.codex" },		{ CD_MOUNT_RO_BIND, "/b/.git" },
		{ CD_MOUNT_MASK, "/a/long/w/.agents" }, { CD_MOUNT_MASK, "/a/long/w/.codex" },
		{ CD_MOUNT_RO_BIND, "/a/long/w/.git" },
	};

	const struct cd_mount *m[16];

	ck_assert_uint_eq(carve_outs(lp, m, 16), CD_ARRAY_SIZE(want));
	for (size_t i = 0; i < CD_ARRAY_SIZE(want); i++) {
		ck_assert_str_eq(m[i]->path, want[i].path);
		ck_assert_msg(m[i]->op == want[i].op, "%s: %s", want[i].path,
			      cd_mount_op_name(m[i]->op));
		ck_assert_ptr_nonnull(m[i]->why);
		ck_assert_ptr_nonnull(strstr(m[i]->why, want[i].path));
	}
	/* Both roots are writable trees (first: shallower); /dev/null needs none. */
	check_trees(lp, "/b /a/long/w");
	ck_assert(lp->ro_root);
}

START_TEST(test_build_workspace_write)
{
	struct cd_plan plan = make_plan(ww_paths, CD_ARRAY_SIZE(ww_paths), CD_NET_RESTRICTED);
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);
	const struct cd_ll_rule *r;

	check_ww_mounts(lp);
	ck_assert(lp->mount_ns);
	ck_assert(lp->user_ns);
	ck_assert(lp->landlock);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 0);
	/*
	 * Read carve-outs inside writable regions get no Landlock rule: it would
	 * add no right (the mounts narrow them). /, the two roots, /dev/null.
	 */
	ck_assert_uint_eq(lp->n_ll_rules, 4);
	ck_assert_ptr_null(rule_for(lp, "/a/long/w/.git"));
	ck_assert_ptr_null(rule_for(lp, "/b/.git"));
	ck_assert_ptr_null(rule_for(lp, "/b/.codex"));
	r = rule_for(lp, "/b");
	ck_assert_ptr_nonnull(r);
	ck_assert(r->is_dir);
	/* Missing carve-outs are masked, not reported as notes. */
	ck_assert_uint_eq(cd_strv_length(lp->notes), 0);
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_build_workspace_write_root)
{
	/* Root without user namespaces: a mount namespace alone is enough. */
	struct cd_plan plan = make_plan(ww_paths, CD_ARRAY_SIZE(ww_paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;
	struct cd_linux_plan *lp;

	h.is_root = true;
	h.userns = false;
	lp = build_ok(&plan, &h, NULL);
	check_ww_mounts(lp);
	ck_assert(lp->mount_ns);
	ck_assert(!lp->user_ns);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 0);
	cd_linux_plan_free(lp);

	h.userns = true;
	lp = build_ok(&plan, &h, NULL);
	ck_assert(lp->mount_ns);
	ck_assert(!lp->user_ns);
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_build_rewiden)
{
	/* Write re-widened inside a read-only carve-out needs a rw bind on
	 * top of the ro bind; a missing one cannot be and is noted. */
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/w", W, CD_FT_DIR, R, false),
		PP("/w/.codex", R, CD_FT_MISSING, W, true),
		PP("/w/.codex/x", W, CD_FT_MISSING, R, false),
		PP("/w/.git", R, CD_FT_DIR, W, true),
		PP("/w/.git/gone", W, CD_FT_MISSING, R, false),
		PP("/w/.git/hooks", W, CD_FT_DIR, R, false),
		PP("/w/.git/hooks/ro", R, CD_FT_DIR, W, true),
		PP("/x", W, CD_FT_DIR, R, false),
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_ENABLED);
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);
	const struct cd_ll_rule *r;

	const struct cd_mount *m[8];
	ck_assert_uint_eq(carve_outs(lp, m, 8), 4);
	ck_assert_str_eq(m[0]->path, "/w/.codex");
	ck_assert_int_eq(m[0]->op, CD_MOUNT_MASK);
	ck_assert_str_eq(m[1]->path, "/w/.git");
	ck_assert_int_eq(m[1]->op, CD_MOUNT_RO_BIND);
	ck_assert_str_eq(m[2]->path, "/w/.git/hooks");
	ck_assert_int_eq(m[2]->op, CD_MOUNT_RW_BIND);
	ck_assert_str_eq(m[3]->path, "/w/.git/hooks/ro");
	ck_assert_int_eq(m[3]->op, CD_MOUNT_RO_BIND);
	/* The re-widened hooks are not a tree of their own: their rw-bind does it. */
	check_trees(lp, "/w /x");
	/* /x is writable under a read-only Landlock region: no mount needed. */
	ck_assert(lp->mount_ns);

	r = rule_for(lp, "/w/.git/hooks");
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->allowed, cd_ll_fs_rights_for_abi(7));
	ck_assert_ptr_nonnull(rule_for(lp, "/x"));

	ck_assert_uint_eq(cd_strv_length(lp->notes), 2);
	ck_assert_ptr_nonnull(strstr(lp->notes[0], "/w/.codex/x"));
	ck_assert_ptr_nonnull(strstr(lp->notes[1], "/w/.git/gone"));
	cd_linux_plan_free(lp);
}
END_TEST

/* A private /dev/pts where the plan lets it be read, not where it denies or grants writing. */
START_TEST(test_build_private_pts)
{
	struct cd_plan_path ro[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/dev/null", W, CD_FT_OTHER, R, false),
	};
	struct cd_plan plan = make_plan(ro, CD_ARRAY_SIZE(ro), CD_NET_ENABLED);
	struct cd_linux_opts o = { .no_pid_ns = true };
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, &o);
	ck_assert(lp->private_pts && lp->private_ptmx && lp->mount_ns);
	cd_linux_plan_free(lp);

	/* /dev/ptmx denied: terminals hidden, none made. */
	struct cd_plan_path noptmx[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/dev/ptmx", D, CD_FT_OTHER, R, true),
	};
	plan = make_plan(noptmx, CD_ARRAY_SIZE(noptmx), CD_NET_ENABLED);
	lp = build_ok(&plan, &host_full, &o);
	ck_assert(lp->private_pts && !lp->private_ptmx);
	cd_linux_plan_free(lp);

	/* "/" writable but /dev read-only (a carve-out): private too. */
	struct cd_plan_path rw[] = {
		PP("/", W, CD_FT_DIR, D, false),
		PP("/dev", R, CD_FT_DIR, W, true),
	};
	plan = make_plan(rw, CD_ARRAY_SIZE(rw), CD_NET_ENABLED);
	lp = build_ok(&plan, &host_full, &o);
	ck_assert(lp->private_pts && lp->mount_ns && !lp->ro_root);
	cd_linux_plan_free(lp);

	/* Writable /dev/pts (all of "/" here): the host's terminals, as the plan says. */
	plan = make_plan(rw, 1, CD_NET_ENABLED);
	lp = build_ok(&plan, &host_full, &o);
	ck_assert(!lp->private_pts && !lp->mount_ns);
	cd_linux_plan_free(lp);

	/* Denied /dev: nothing there to see, nothing to mount. */
	struct cd_plan_path denied[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/dev", D, CD_FT_DIR, R, true),
	};
	plan = make_plan(denied, CD_ARRAY_SIZE(denied), CD_NET_ENABLED);
	lp = build_ok(&plan, &host_full, NULL);
	ck_assert(!lp->private_pts);
	cd_linux_plan_free(lp);

	/* A rule below /dev/pts would be hidden by the private instance. */
	struct cd_plan_path below[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/dev/pts/3", W, CD_FT_OTHER, R, false),
	};
	plan = make_plan(below, CD_ARRAY_SIZE(below), CD_NET_ENABLED);
	build_refused(
		&plan, &host_full, NULL,
		(const char *const[]){ "/dev/pts/3 is under /dev/pts", "remove the entry", NULL });

	/* An unrestricted file system hides nothing. */
	plan = make_plan(ro, CD_ARRAY_SIZE(ro), CD_NET_ENABLED);
	plan.fs_unrestricted = true;
	lp = build_ok(&plan, &host_full, NULL);
	ck_assert(!lp->private_pts);
	cd_linux_plan_free(lp);
}
END_TEST

/* Everything read-only but the writable regions: which trees are taken. */
START_TEST(test_build_ro_root)
{
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/dev/null", W, CD_FT_OTHER, R, false),   /* a device: no tree */
		PP("/etc/app.conf", W, CD_FT_REG, R, false), /* a file: a tree */
		PP("/gone", W, CD_FT_MISSING, R, false),     /* missing: nothing to take */
		PP("/w", W, CD_FT_DIR, R, false),	     /* a top */
		PP("/w/inner", W, CD_FT_DIR, W, false),	     /* inside /w: no tree */
		PP("/w/ro", R, CD_FT_DIR, W, true),	     /* carve-out */
		PP("/w/ro/again", W, CD_FT_DIR, R, false),   /* its rw-bind does it */
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_ENABLED);
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);

	ck_assert(lp->ro_root && lp->mount_ns);
	check_trees(lp, "/w /etc/app.conf");
	cd_linux_plan_free(lp);

	/* "/" writable: nothing is left to make read-only. */
	struct cd_plan_path all[] = {
		PP("/", W, CD_FT_DIR, D, false),
		PP("/etc", R, CD_FT_DIR, W, true),
	};
	plan = make_plan(all, CD_ARRAY_SIZE(all), CD_NET_ENABLED);
	lp = build_ok(&plan, &host_full, NULL);
	ck_assert(!lp->ro_root);
	check_trees(lp, "");
	cd_linux_plan_free(lp);

	/* A read-only plan: read-only root, no tree at all. */
	struct cd_plan_path ro[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/dev/null", W, CD_FT_OTHER, R, false),
	};
	plan = make_plan(ro, CD_ARRAY_SIZE(ro), CD_NET_ENABLED);
	lp = build_ok(&plan, &host_full, NULL);
	ck_assert(lp->ro_root && lp->mount_ns);
	ck_assert_uint_eq(lp->n_mounts, 0);
	cd_linux_plan_free(lp);

	/* More separate writable regions than the child can hold: refused. */
	size_t n = CD_MAX_WRITABLE_TREES + 2;
	struct cd_plan_path *many = cd_xcalloc(n, sizeof(*many));
	char **names = cd_xcalloc(n, sizeof(*names));
	many[0] = (struct cd_plan_path)PP("/", R, CD_FT_DIR, D, false);
	for (size_t i = 1; i < n; i++) {
		names[i] = cd_xasprintf("/w%04zu", i);
		many[i] = (struct cd_plan_path){ .path = names[i],
						 .access = W,
						 .type = CD_FT_DIR,
						 .origin = CD_ORIGIN_ENTRY,
						 .entry_index = -1,
						 .why = names[i],
						 .parent_access = R };
	}
	plan = make_plan(many, n, CD_NET_ENABLED);
	build_refused(&plan, &host_full, NULL,
		      (const char *const[]){ "more than 256 separate writable paths", NULL });
	n--; /* exactly the limit */
	plan = make_plan(many, n, CD_NET_ENABLED);
	lp = build_ok(&plan, &host_full, NULL);
	ck_assert_uint_eq(lp->n_mounts, CD_MAX_WRITABLE_TREES);
	cd_linux_plan_free(lp);
	for (size_t i = 0; i < n + 1; i++)
		free(names[i]);
	free(names);
	free(many);
}
END_TEST

START_TEST(test_build_fs_unrestricted)
{
	struct cd_plan plan = make_plan(NULL, 0, CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;
	struct cd_linux_plan *lp;

	plan.fs_unrestricted = true;
	/* Landlock is not needed, so its absence is no reason to refuse. */
	h.landlock_abi = 0;
	lp = build_ok(&plan, &h, NULL);
	ck_assert(lp->sandboxed);
	ck_assert(!lp->landlock);
	ck_assert(lp->seccomp);
	ck_assert_uint_eq(lp->sc_when, CD_SC_BASELINE | CD_SC_NET_RESTRICTED);
	ck_assert_uint_eq(lp->n_ll_rules, 0);
	ck_assert_uint_eq(lp->ll_handled_fs, 0);
	/* Still isolated: the pid namespace does not depend on the file system. */
	ck_assert(lp->pid_ns);
	ck_assert(lp->mount_ns);
	ck_assert_uint_eq(lp->n_mounts, 0);
	cd_linux_plan_free(lp);

	/* No user namespaces: refused, or run without pid isolation when asked. */
	h.userns = false;
	build_refused(&plan, &h, NULL,
		      (const char *const[]){ "pid isolation", "needs user namespaces",
					     "--allow-degraded=pid-isolation", NULL });
	struct cd_linux_opts o = { .degraded = CD_DEGRADE_PID_ISOLATION };
	lp = build_ok(&plan, &h, &o);
	ck_assert(!lp->pid_ns);
	ck_assert(!lp->mount_ns);
	ck_assert(!lp->user_ns);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 2); /* + no network namespace */
	ck_assert_ptr_nonnull(strstr(lp->degraded[0], "pid isolation NOT enforced"));
	cd_linux_plan_free(lp);
	/* Root needs no user namespace for any of it. */
	h.is_root = true;
	lp = build_ok(&plan, &h, NULL);
	ck_assert(lp->pid_ns && lp->mount_ns && !lp->user_ns);
	cd_linux_plan_free(lp);
	/* A restricted network gets an empty network namespace too; an enabled one not. */
	h.is_root = false;
	h.userns = true;
	plan.network = CD_NET_RESTRICTED;
	lp = build_ok(&plan, &h, NULL);
	ck_assert(lp->net_ns && lp->user_ns);
	const char *names[5];
	ck_assert_uint_eq(cd_linux_plan_namespaces(lp, names), 5);
	ck_assert_str_eq(names[2], "ipc");
	ck_assert_str_eq(names[4], "network");
	ck_assert(lp->ipc_ns);
	cd_linux_plan_free(lp);
	plan.network = CD_NET_ENABLED;
	lp = build_ok(&plan, &h, NULL);
	ck_assert(!lp->net_ns);
	cd_linux_plan_free(lp);
	plan.network = CD_NET_RESTRICTED;
	struct cd_linux_opts no_net = { .no_net_ns = true };
	lp = build_ok(&plan, &h, &no_net);
	ck_assert(!lp->net_ns && lp->pid_ns);
	cd_linux_plan_free(lp);

	/* A caller that contains the tree itself (cordon serve) gets none of it. */
	h.is_root = false;
	struct cd_linux_opts own = { .no_pid_ns = true, .no_net_ns = true };
	lp = build_ok(&plan, &h, &own);
	ck_assert(!lp->pid_ns && !lp->mount_ns && !lp->user_ns && !lp->ipc_ns);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 0);
	/* Its processes still cannot name others: the seccomp second wall. */
	ck_assert(lp->sc_when & CD_SC_NO_PID_NS);
	cd_linux_plan_free(lp);
	h.is_root = false;
	h.userns = true;

	plan.type = CD_PROFILE_EXTERNAL;
	plan.network = CD_NET_ENABLED;
	lp = build_ok(&plan, &h, NULL);
	ck_assert(lp->sandboxed);
	ck_assert(!lp->landlock);
	ck_assert(lp->seccomp);
	ck_assert_uint_eq(lp->sc_when, CD_SC_BASELINE);
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_refuse_landlock)
{
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;
	struct cd_linux_opts o = { 0 };
	struct cd_linux_plan *lp;

	h.landlock_abi = 0;
	build_refused(&plan, &h, NULL,
		      (const char *const[]){ "Landlock is not available (ABI 0", ">= 1",
					     "lsm=", "5.13", "CONFIG_SECURITY_LANDLOCK=y", NULL });

	h.landlock_abi = 3;
	o.min_landlock_abi = 4;
	build_refused(&plan, &h, &o,
		      (const char *const[]){ "Landlock ABI 3", ">= 4", "6.7", NULL });

	/* At the minimum exactly: fine. */
	o.min_landlock_abi = 3;
	lp = build_ok(&plan, &h, &o);
	ck_assert_uint_eq(lp->landlock_abi, 3);
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_refuse_landlock_unknown_abi)
{
	/* A minimum above what cordon knows: no kernel helps, and "?" is no hint. */
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;
	struct cd_linux_opts o = { .min_landlock_abi = CD_LL_MAX_ABI + 2 };
	const char *const msg[] = { "cordon knows Landlock ABIs up to 7",
				    "minimum Landlock ABI of 9", "--min-landlock-abi",
				    "cannot be satisfied", NULL };
	struct cd_linux_plan *lp = NULL;
	char *err = NULL;

	build_refused(&plan, &h, &o, msg);
	h.landlock_abi = 0;
	build_refused(&plan, &h, &o, msg);
	/* A future kernel does not help either: cordon would use only ABI 7. */
	h.landlock_abi = CD_LL_MAX_ABI + 5;
	o.min_landlock_abi = CD_LL_MAX_ABI + 1;
	build_refused(&plan, &h, &o, (const char *const[]){ "up to 7", "of 8", NULL });
	ck_assert_int_eq(cd_linux_plan_build(&plan, &h, &o, &lp, &err), -EOPNOTSUPP);
	ck_assert_ptr_null(strchr(err, '?'));
	free(err);
	/* The newest known ABI as the minimum is fine. */
	o.min_landlock_abi = CD_LL_MAX_ABI;
	lp = build_ok(&plan, &h, &o);
	ck_assert_uint_eq(lp->landlock_abi, CD_LL_MAX_ABI);
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_refuse_seccomp)
{
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;

	h.seccomp = false;
	build_refused(
		&plan, &h, NULL,
		(const char *const[]){ "seccomp is not available", "CONFIG_SECCOMP_FILTER", NULL });
	/* Even without any file-system restriction. */
	plan.fs_unrestricted = true;
	build_refused(&plan, &h, NULL, (const char *const[]){ "seccomp is not available", NULL });
}
END_TEST

START_TEST(test_refuse_managed_network)
{
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), CD_NET_MANAGED);

	build_refused(&plan, &host_full, NULL,
		      (const char *const[]){ "managed network needs cordon's network proxy",
					     "--network restricted or enabled", NULL });
}
END_TEST

/* The fence of a managed network (netfence.h): its namespace, its socket rules, no opt-down. */
START_TEST(test_managed_network)
{
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), CD_NET_MANAGED);
	struct cd_linux_opts o = { .min_landlock_abi = 1, .managed_proxy = "unix:/run/p.sock" };
	struct cd_linux_host h = host_full;
	struct cd_linux_plan *lp = build_ok(&plan, &h, &o);
	const char *ns[5];
	size_t n;
	bool family = false, type = false, unix_pair = false;

	ck_assert(lp->net_managed);
	ck_assert(lp->net_ns);
	ck_assert(lp->proxy.is_unix);
	ck_assert_str_eq(lp->proxy.path, "/run/p.sock");
	ck_assert(lp->sc_when & CD_SC_NET_MANAGED);
	ck_assert(!(lp->sc_when & CD_SC_NET_RESTRICTED));
	/* Connections inside the namespace are the kernel's business, not Landlock's. */
	ck_assert_uint_eq(lp->ll_handled_net, 0);
	n = cd_linux_plan_namespaces(lp, ns);
	ck_assert_str_eq(ns[n - 1], "network");
	for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++) {
		if (!(r->when & CD_SC_NET_MANAGED))
			continue;
		if (cd_streq(r->syscall, "socket") && r->cmp == CD_SC_ARG_NOT_IN2)
			family = r->arg == 0 && r->value == 2 && r->value2 == 10;
		if (cd_streq(r->syscall, "socket") && r->cmp == CD_SC_ARG_MASKED_NOT_IN2)
			type = r->arg == 1 && r->value == 1 && r->value2 == 2;
		if (cd_streq(r->syscall, "socketpair") && r->cmp == CD_SC_ARG_NE)
			unix_pair = r->value == 1 && (r->when & CD_SC_NET_RESTRICTED);
	}
	ck_assert(family && type && unix_pair);
	cd_linux_plan_free(lp);

	/* The caller's "no network namespace" (cordon serve) does not apply to it. */
	o.no_net_ns = true;
	lp = build_ok(&plan, &h, &o);
	ck_assert(lp->net_ns);
	cd_linux_plan_free(lp);
	o.no_net_ns = false;

	/* A TCP endpoint. */
	o.managed_proxy = "tcp:127.0.0.1:3129";
	lp = build_ok(&plan, &h, &o);
	ck_assert(!lp->proxy.is_unix);
	ck_assert_uint_eq(lp->proxy.port, 3129);
	ck_assert_uint_eq(lp->proxy.addr[0], 127);
	ck_assert_uint_eq(lp->proxy.addr[3], 1);
	cd_linux_plan_free(lp);

	/* No user namespaces: refused, whatever is opted down. */
	h.userns = false;
	o.degraded = CD_DEGRADE_PROTECTED_METADATA | CD_DEGRADE_PID_ISOLATION |
		     CD_DEGRADE_DENY_MASKS | CD_DEGRADE_FILE_ATTRIBUTES;
	build_refused(&plan, &h, &o,
		      (const char *const[]){ "managed network needs a network namespace",
					     "user namespaces are unavailable", NULL });
	/* Root makes its namespace without them. */
	h.is_root = true;
	lp = build_ok(&plan, &h, &o);
	ck_assert(lp->net_ns && !lp->user_ns);
	cd_linux_plan_free(lp);

	/* A bad endpoint never gets to a plan. */
	char *err = NULL;
	o.managed_proxy = "unix:p.sock";
	lp = (struct cd_linux_plan *)1;
	ck_assert_int_eq(cd_linux_plan_build(&plan, &host_full, &o, &lp, &err), -EINVAL);
	ck_assert_ptr_null(lp);
	ck_assert_ptr_nonnull(strstr(err, "must be absolute"));
	free(err);
}
END_TEST

START_TEST(test_proxy_endpoint)
{
	struct cd_proxy_endpoint e;
	char *err = NULL;
	char longp[130];
	const char *bad[] = { "",
			      "unix:",
			      "unix:rel",
			      "tcp:",
			      "tcp:localhost:80",
			      "tcp:1.2.3:80",
			      "tcp:1.2.3.4",
			      "tcp:1.2.3.4:",
			      "tcp:1.2.3.4:0",
			      "tcp:1.2.3.4:65536",
			      "tcp:256.1.1.1:80",
			      "tcp:01.2.3.4:80",
			      "tcp:1.2.3.4:80x",
			      "tcp:1.2.3.4:+80",
			      "tcp:[::1]:80",
			      "http://127.0.0.1:3128",
			      "127.0.0.1:3128",
			      NULL };

	ck_assert_int_eq(cd_proxy_endpoint_parse("unix:/a/b.sock", &e, &err), 0);
	ck_assert(e.is_unix);
	ck_assert_str_eq(e.path, "/a/b.sock");
	ck_assert_int_eq(cd_proxy_endpoint_parse("tcp:10.0.0.255:65535", &e, &err), 0);
	ck_assert(!e.is_unix);
	ck_assert_uint_eq(e.port, 65535);
	ck_assert_uint_eq(e.addr[0], 10);
	ck_assert_uint_eq(e.addr[3], 255);
	for (size_t i = 0; bad[i]; i++) {
		ck_assert_msg(cd_proxy_endpoint_parse(bad[i], &e, &err) == -EINVAL, "%s", bad[i]);
		ck_assert_ptr_nonnull(err);
		ck_assert_ptr_null(strchr(err, '\n'));
		free(err);
		err = NULL;
	}
	/* sun_path holds 107 bytes and the NUL. */
	memset(longp, 'a', sizeof(longp));
	memcpy(longp, "unix:/", 6);
	longp[5 + 107] = '\0';
	ck_assert_int_eq(cd_proxy_endpoint_parse(longp, &e, &err), 0);
	longp[5 + 107] = 'a';
	longp[5 + 108] = '\0';
	ck_assert_int_eq(cd_proxy_endpoint_parse(longp, &e, &err), -EINVAL);
	free(err);
}
END_TEST

/* The proxy variables: Codex's set, each once, all naming the relay or the exclusions. */
START_TEST(test_managed_proxy_env)
{
	size_t n = 0, n_socks = 0;

	for (const struct cd_env_pair *p = cd_managed_proxy_env; p->name; p++, n++) {
		for (const struct cd_env_pair *q = p + 1; q->name; q++)
			ck_assert_str_ne(p->name, q->name);
		if (strstr(p->name, "NO_PROXY") || strstr(p->name, "no_proxy") ||
		    strstr(p->name, "NOPROXY") || strstr(p->name, "noproxy"))
			ck_assert_str_eq(p->value, "localhost,127.0.0.1,::1,10.0.0.0/8,"
						   "172.16.0.0/12,192.168.0.0/16");
		else if (!cd_streq(p->name, "ELECTRON_GET_USE_PROXY") &&
			 !cd_streq(p->name, "NODE_USE_ENV_PROXY") && strncmp(p->name, "CODEX_", 6))
			ck_assert_str_eq(p->value, "http://127.0.0.1:3128");
		/* SOCKS5 on: the all-protocol and FTP variables name it, on the same port */
		bool socks = cd_streq(p->name, "ALL_PROXY") || cd_streq(p->name, "all_proxy") ||
			     cd_streq(p->name, "FTP_PROXY") || cd_streq(p->name, "ftp_proxy");
		ck_assert_str_eq(cd_env_pair_value(p, true),
				 socks ? "socks5h://127.0.0.1:3128" : p->value);
		ck_assert_str_eq(cd_env_pair_value(p, false), p->value);
		n_socks += socks;
	}
	ck_assert_uint_eq(n, 35);
	ck_assert_uint_eq(n_socks, 4);
}
END_TEST

/* Deny carve-outs: masks over existing paths, masks where a missing one could be made. */
START_TEST(test_deny_masks)
{
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/etc/secret", D, CD_FT_REG, R, true),
		PP("/home/u/.ssh", D, CD_FT_DIR, R, true),
		PP("/nowhere", D, CD_FT_MISSING, R, true),
		PP("/w", W, CD_FT_DIR, R, false),
		PP("/w/.env", D, CD_FT_REG, W, true),
		PP("/w/keys", D, CD_FT_MISSING, W, true),
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;
	struct cd_linux_plan *lp = build_ok(&plan, &h, NULL);
	const struct {
		enum cd_mount_op op;
		const char *path;
	} want[] = {
		{ CD_MOUNT_DENY, "/etc/secret" },
		{ CD_MOUNT_DENY, "/home/u/.ssh" },
		{ CD_MOUNT_DENY, "/w/.env" },
		{ CD_MOUNT_MASK, "/w/keys" },
	};
	const struct cd_mount *m[8];
	ck_assert_uint_eq(carve_outs(lp, m, 8), CD_ARRAY_SIZE(want));
	check_trees(lp, "/w");
	for (size_t i = 0; i < CD_ARRAY_SIZE(want); i++) {
		bool found = false;
		for (size_t k = 0; k < lp->n_mounts; k++)
			if (lp->mounts[k].op == want[i].op &&
			    cd_streq(lp->mounts[k].path, want[i].path))
				found = true;
		ck_assert_msg(found, "no %s mount on %s", cd_mount_op_name(want[i].op),
			      want[i].path);
	}
	ck_assert_str_eq(cd_mount_op_name(CD_MOUNT_DENY), "deny");
	/*
	 * Missing and not creatable by the command (its parent is read-only):
	 * not masked, and said so as a degradation (the host could create it).
	 */
	bool noted = false;
	for (char **n = lp->degraded; n && *n; n++)
		noted |= strstr(*n, "/nowhere does not exist and is not masked") != NULL;
	ck_assert(noted);
	ck_assert(lp->mount_ns && lp->user_ns);
	cd_linux_plan_free(lp);

	/* Without user namespaces: refused, naming the opt-down; or run degraded. */
	h.userns = false;
	build_refused(&plan, &h, NULL,
		      (const char *const[]){ "denied paths inside readable or writable ones",
					     "/etc/secret", "--allow-degraded=deny-masks", NULL });
	struct cd_linux_opts o = { .degraded = CD_DEGRADE_DENY_MASKS | CD_DEGRADE_PID_ISOLATION |
					       CD_DEGRADE_FILE_ATTRIBUTES };
	lp = build_ok(&plan, &h, &o);
	ck_assert_uint_eq(lp->n_mounts, 0);
	ck_assert(!lp->ro_root);
	bool said = false;
	for (char **d = lp->degraded; d && *d; d++)
		said |= strstr(*d, "deny entries NOT enforced") != NULL;
	ck_assert(said);
	cd_linux_plan_free(lp);

	/* Under /proc: the pid namespace's own /proc would hide the mask. */
	struct cd_plan_path procs[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/proc/cpuinfo", D, CD_FT_REG, R, true),
	};
	struct cd_plan pplan = make_plan(procs, CD_ARRAY_SIZE(procs), CD_NET_RESTRICTED);
	build_refused(&pplan, &host_full, NULL,
		      (const char *const[]){ "/proc/cpuinfo is under /proc", NULL });

	/* The command could not even start in a working directory under a deny mask. */
	plan.cwd = (char *)"/home/u/.ssh/keys";
	build_refused(&plan, &host_full, NULL,
		      (const char *const[]){ "the working directory /home/u/.ssh/keys is inside "
					     "denied /home/u/.ssh",
					     "choose another --cwd", NULL });
}
END_TEST

/* The mount on path, or NULL. */
static const struct cd_mount *mount_on(const struct cd_linux_plan *lp, const char *path)
{
	for (size_t i = 0; i < lp->n_mounts; i++)
		if (cd_streq(lp->mounts[i].path, path))
			return &lp->mounts[i];
	return NULL;
}

/* The index of the mount on path (it must be there). */
static size_t mount_index(const struct cd_linux_plan *lp, const char *path)
{
	const struct cd_mount *m = mount_on(lp, path);
	ck_assert_msg(m != NULL, "no mount on %s", path);
	return (size_t)(m - lp->mounts);
}

static bool is_pin(const struct cd_linux_plan *lp, const char *path)
{
	const struct cd_mount *m = mount_on(lp, path);
	return m && m->op == CD_MOUNT_PIN;
}

/*
 * A hidden file's identity (cd_hidden_path.has_id) travels with its deny
 * mask, for the spawner to check that the mask goes on that very file:
 * on a mask of its own, on a carve-out of the plan it replaces, and on the
 * plan's own deny mask of that path. No other mount carries one.
 */
START_TEST(test_hidden_identity)
{
	/* clang-format off */
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/tmp", W, CD_FT_DIR, R, false),
		PP("/w", W, CD_FT_DIR, R, false),
		PP("/w/token", R, CD_FT_REG, W, true),
		PP("/w/denied", D, CD_FT_REG, W, true),
	};
	/* clang-format on */
	const struct cd_hidden_path hidden[] = {
		{ "/tmp/rt/tokdir/token", "the token", true, true, 11, 101 },
		{ "/w/token", "the token", true, true, 12, 102 },
		{ "/w/denied", "the token", true, true, 13, 103 },
		{ "/run/s.sock", "the socket", false, false, 0, 0 },
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_ENABLED);
	struct cd_linux_opts o = { .hidden = hidden, .n_hidden = CD_ARRAY_SIZE(hidden) };
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, &o);

	for (size_t i = 0; i < CD_ARRAY_SIZE(hidden); i++) {
		const struct cd_mount *m = mount_on(lp, hidden[i].path);
		ck_assert_msg(m && m->op == CD_MOUNT_DENY, "%s is not masked", hidden[i].path);
		ck_assert_msg(m->has_id == hidden[i].has_id, "%s: has_id", hidden[i].path);
		ck_assert_uint_eq(m->dev, hidden[i].dev);
		ck_assert_uint_eq(m->ino, hidden[i].ino);
	}
	size_t with_id = 0;
	for (size_t i = 0; i < lp->n_mounts; i++)
		with_id += lp->mounts[i].has_id;
	ck_assert_uint_eq(with_id, 3);
	cd_linux_plan_free(lp);
}
END_TEST

/*
 * A hidden file inside a directory the plan denies whole is hidden by that
 * directory's mask: no mask of its own, but an identity check for the
 * spawner (cd_id_check), so that moved out of the directory it refuses
 * the sandbox. Not for a file without an identity.
 */
START_TEST(test_hidden_covered)
{
	/* clang-format off */
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/w", W, CD_FT_DIR, R, false),
		PP("/w/secret", D, CD_FT_DIR, W, true),
	};
	/* clang-format on */
	const struct cd_hidden_path hidden[] = {
		{ "/w/secret/token", "the token", true, true, 21, 201 },
		{ "/w/secret/deep/s.sock", "the socket", false, false, 0, 0 },
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_ENABLED);
	struct cd_linux_opts o = { .hidden = hidden, .n_hidden = CD_ARRAY_SIZE(hidden) };
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, &o);

	ck_assert_ptr_null(mount_on(lp, "/w/secret/token"));
	ck_assert_ptr_null(mount_on(lp, "/w/secret/deep/s.sock"));
	ck_assert_uint_eq(lp->n_id_checks, 1);
	ck_assert_str_eq(lp->id_checks[0].path, "/w/secret/token");
	ck_assert_uint_eq(lp->id_checks[0].dev, 21);
	ck_assert_uint_eq(lp->id_checks[0].ino, 201);
	ck_assert_ptr_nonnull(strstr(lp->id_checks[0].why, "the token"));
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_hidden)
{
	/* cordon serve's socket and token: masked whatever the plan says of them. */
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/run/user/1/secret", D, CD_FT_DIR, R, true),
		PP("/tmp", W, CD_FT_DIR, R, false),
		PP("/w", W, CD_FT_DIR, R, false),
		PP("/w/token", R, CD_FT_REG, W, true),
	};
	const struct cd_hidden_path hidden[] = {
		{ "/run/user/1/cordon.sock", "the socket" },   /* readable region */
		{ "/tmp/s/serve.sock", "the socket" },	       /* inside a writable tree */
		{ "/opt/nowhere/x.sock", "the socket" },       /* outside every rule */
		{ "/w/token", "the token" },		       /* a read-only carve-out there */
		{ "/tmp/rt/tokdir/token", "the token" },       /* deeper in the writable tree */
		{ "/run/user/1/secret/s.sock", "the socket" }, /* inside a denied directory */
		{ "/proc/self/x", "the socket" },	       /* under the fresh /proc */
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_ENABLED);
	struct cd_linux_opts o = { .hidden = hidden, .n_hidden = CD_ARRAY_SIZE(hidden) };
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, &o);

	/*
	 * Every directory above a hidden file that a writable parent could
	 * rename away (taking the mask with it, so that the next sandbox
	 * reads the file at its new path) is pinned; the top of the writable
	 * region (/tmp: its parent is read-only) needs none, nor do
	 * directories in read-only regions.
	 */
	static const char *const pinned[] = { "/tmp/s", "/tmp/rt", "/tmp/rt/tokdir" };
	for (size_t i = 0; i < CD_ARRAY_SIZE(pinned); i++) {
		ck_assert_msg(is_pin(lp, pinned[i]), "%s is not pinned", pinned[i]);
		const struct cd_mount *pin = mount_on(lp, pinned[i]);
		const char *why = pin ? pin->why : "";
		ck_assert_ptr_nonnull(strstr(why, "inside writable /tmp"));
		ck_assert(strstr(why, "with the token below") ||
			  strstr(why, "with the socket below"));
		/* A pin goes on before what it holds (parents first). */
		ck_assert_uint_lt(mount_index(lp, "/tmp"), mount_index(lp, pinned[i]));
	}
	ck_assert_uint_lt(mount_index(lp, "/tmp/rt/tokdir"),
			  mount_index(lp, "/tmp/rt/tokdir/token"));
	ck_assert_uint_lt(mount_index(lp, "/tmp/s"), mount_index(lp, "/tmp/s/serve.sock"));
	static const char *const not_pinned[] = {
		"/run", "/run/user", "/run/user/1", "/opt", "/opt/nowhere", "/w",
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(not_pinned); i++)
		ck_assert_msg(!is_pin(lp, not_pinned[i]), "%s is pinned", not_pinned[i]);
	for (size_t i = 0; i < 5; i++) {
		const struct cd_mount *m = mount_on(lp, hidden[i].path);
		ck_assert_msg(m && m->op == CD_MOUNT_DENY, "%s is not masked", hidden[i].path);
		/* Copies: the caller's strings may go. */
		ck_assert_ptr_ne(m->path, hidden[i].path);
		ck_assert_ptr_nonnull(strstr(m->why, hidden[i].why));
	}
	/* Attached after the writable tree that holds it, or the tree would cover it. */
	ck_assert_uint_lt(mount_index(lp, "/tmp"), mount_index(lp, "/tmp/s/serve.sock"));
	ck_assert_ptr_null(mount_on(lp, "/run/user/1/secret/s.sock")); /* hidden already */
	ck_assert_ptr_null(mount_on(lp, "/proc/self/x"));
	bool noted = false;
	for (char **n = lp->degraded; n && *n; n++)
		noted |= strstr(*n, "/proc/self/x (the socket) NOT hidden") != NULL;
	ck_assert(noted);
	cd_linux_plan_free(lp);

	/* Without a mount namespace there is nothing to hide them in: said, not refused. */
	struct cd_linux_host h = host_full;
	h.userns = false;
	struct cd_plan_path ro[] = { PP("/", R, CD_FT_DIR, D, false) };
	struct cd_plan rplan = make_plan(ro, 1, CD_NET_ENABLED);
	o.degraded = CD_DEGRADE_PID_ISOLATION | CD_DEGRADE_FILE_ATTRIBUTES;
	lp = build_ok(&rplan, &h, &o);
	ck_assert_uint_eq(lp->n_mounts, 0);
	noted = false;
	for (char **n = lp->degraded; n && *n; n++)
		noted |= strstr(*n, "/run/user/1/cordon.sock (the socket) NOT hidden") != NULL;
	ck_assert(noted);
	cd_linux_plan_free(lp);

	/*
	 * The token file (required: whoever reads it is a client, no other
	 * wall) where it cannot be hidden: refused when the sandbox could
	 * read it, said (not refused) when Landlock keeps it unreadable.
	 */
	const struct cd_hidden_path token[] = {
		{ "/srv/cordon/token", "the token", .required = true },
	};
	struct cd_linux_opts to = {
		.hidden = token,
		.n_hidden = 1,
		.degraded = CD_DEGRADE_PID_ISOLATION | CD_DEGRADE_FILE_ATTRIBUTES,
	};
	build_refused(&rplan, &h, &to,
		      (const char *const[]){ "/srv/cordon/token (the token) cannot be hidden",
					     "keep the file out of the paths the sandbox may read",
					     NULL });
	struct cd_plan_path narrow[] = {
		PP("/usr", R, CD_FT_DIR, D, false),
		PP("/srv/w", W, CD_FT_DIR, D, false),
	};
	struct cd_plan nplan = make_plan(narrow, CD_ARRAY_SIZE(narrow), CD_NET_ENABLED);
	lp = build_ok(&nplan, &h, &to);
	noted = false;
	for (char **n = lp->degraded; n && *n; n++)
		noted |= strstr(*n, "/srv/cordon/token (the token) NOT hidden") &&
			 strstr(*n, "Landlock keeps it unreadable");
	ck_assert(noted);
	cd_linux_plan_free(lp);
	/* With a mount namespace it is masked like the others. */
	lp = build_ok(&rplan, &host_full, &to);
	ck_assert(mount_on(lp, "/srv/cordon/token") &&
		  mount_on(lp, "/srv/cordon/token")->op == CD_MOUNT_DENY);
	cd_linux_plan_free(lp);

	/* A plan that does not restrict the file system still gets the masks. */
	struct cd_plan uplan = make_plan(NULL, 0, CD_NET_ENABLED);
	uplan.fs_unrestricted = true;
	o.degraded = 0;
	lp = build_ok(&uplan, &host_full, &o);
	ck_assert_ptr_nonnull(mount_on(lp, "/tmp/s/serve.sock"));
	ck_assert(lp->mount_ns && lp->pid_ns);
	/* Every directory is writable there: each one above a hidden file is pinned. */
	static const char *const all_pinned[] = {
		"/tmp", "/tmp/s", "/run", "/run/user", "/run/user/1", "/w",
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(all_pinned); i++)
		ck_assert_msg(is_pin(lp, all_pinned[i]), "%s is not pinned", all_pinned[i]);
	cd_linux_plan_free(lp);
	/* ... and where it cannot have them, the token, readable there, refuses it. */
	to.degraded = CD_DEGRADE_PID_ISOLATION;
	build_refused(
		&uplan, &h, &to,
		(const char *const[]){ "/srv/cordon/token (the token) cannot be hidden", NULL });
}
END_TEST

START_TEST(test_refuse_deny)
{
	/* Something allowed inside a denied directory: the mask would hide it. */
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/secret", D, CD_FT_DIR, R, true),
		PP("/secret/public", R, CD_FT_REG, D, false),
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_RESTRICTED);

	build_refused(&plan, &host_full, NULL,
		      (const char *const[]){ "/secret/public is allowed inside denied directory "
					     "/secret",
					     "deny its other entries instead", NULL });
}
END_TEST

START_TEST(test_refuse_no_userns)
{
	struct cd_plan plan = make_plan(ww_paths, CD_ARRAY_SIZE(ww_paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;

	h.userns = false;
	build_refused(&plan, &h, NULL,
		      (const char *const[]){ "protected paths inside writable roots (/b/.codex, "
					     "/b/.git, /a/long/w/.agents, ...)",
					     "need a mount namespace",
					     "kernel.unprivileged_userns_clone=1",
					     "--allow-degraded=protected-metadata", NULL });
}
END_TEST

START_TEST(test_degraded)
{
	struct cd_plan plan = make_plan(ww_paths, CD_ARRAY_SIZE(ww_paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;
	struct cd_linux_opts o = { .degraded = CD_DEGRADE_PROTECTED_METADATA };
	struct cd_linux_plan *lp;

	h.userns = false;
	/* One opt-down is not the other: read-only mounts need a mount namespace, */
	build_refused(&plan, &h, &o,
		      (const char *const[]){ "modes, owners, times, extended attributes",
					     "Landlock does not govern",
					     "--allow-degraded=file-attributes", NULL });
	o.degraded |= CD_DEGRADE_FILE_ATTRIBUTES;
	/* and pid isolation a user namespace. */
	build_refused(
		&plan, &h, &o,
		(const char *const[]){ "pid isolation", "--allow-degraded=pid-isolation", NULL });
	o.degraded |= CD_DEGRADE_PID_ISOLATION;
	lp = build_ok(&plan, &h, &o);
	ck_assert(lp->sandboxed);
	ck_assert(lp->landlock);
	ck_assert(lp->seccomp);
	ck_assert_uint_eq(lp->n_mounts, 0);
	ck_assert_ptr_null(lp->mounts);
	ck_assert(!lp->pid_ns);
	ck_assert(!lp->mount_ns);
	ck_assert(!lp->user_ns);
	ck_assert_uint_eq(lp->n_ll_rules, 4);
	ck_assert(!lp->ro_root);
	/* + the host's terminals, no network namespace, no IPC namespace (its seccomp rules) */
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 6);
	ck_assert(!lp->ipc_ns && (lp->sc_when & CD_SC_NO_IPC_NS));
	/* No pid namespace: seccomp keeps the pid- and user-targeting calls to the caller. */
	ck_assert_uint_eq(lp->sc_when, CD_SC_BASELINE | CD_SC_NET_RESTRICTED | CD_SC_NO_IPC_NS |
					       CD_SC_NO_PID_NS);
	ck_assert(!lp->private_pts);
	ck_assert_ptr_nonnull(strstr(lp->degraded[5], "no IPC namespace"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[0], "protected metadata NOT enforced"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[0], "user namespaces are unavailable"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[1], "file attributes NOT protected"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[2], "terminals NOT hidden"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[3], "pid isolation NOT enforced"));
	cd_linux_plan_free(lp);

	/* The opt-down changes nothing on a host that can enforce. */
	lp = build_ok(&plan, &host_full, &o);
	check_ww_mounts(lp);
	ck_assert(lp->user_ns);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 0);
	cd_linux_plan_free(lp);
}
END_TEST

/* ---- pins: directories above carve-outs that a writable parent could rename ---- */

/* A workspace /tmp/a/b/w under writable /tmp (the reviewer's case). */
static struct cd_plan_path tmp_ws_paths[] = {
	PP("/", R, CD_FT_DIR, D, false),
	PP("/dev/null", W, CD_FT_OTHER, R, false),
	PP("/tmp", W, CD_FT_DIR, R, false),
	PP("/tmp/.agents", R, CD_FT_MISSING, W, true),
	PP("/tmp/.codex", R, CD_FT_MISSING, W, true),
	PP("/tmp/.git", R, CD_FT_MISSING, W, true),
	PP("/tmp/a/b/w", W, CD_FT_DIR, W, false),
	PP("/tmp/a/b/w/.agents", R, CD_FT_MISSING, W, true),
	PP("/tmp/a/b/w/.codex", R, CD_FT_MISSING, W, true),
	PP("/tmp/a/b/w/.git", R, CD_FT_DIR, W, true),
};

struct want_mount {
	enum cd_mount_op op;
	const char *path;
};

/* The carve-outs and pins (writable trees aside: see check_trees). */
static void check_mounts(const struct cd_linux_plan *lp, const struct want_mount *want, size_t n)
{
	const struct cd_mount *m[32];
	size_t got = carve_outs(lp, m, 32);

	for (size_t i = 0; i < got && i < n; i++) {
		ck_assert_msg(cd_streq(m[i]->path, want[i].path) && m[i]->op == want[i].op,
			      "mount %zu: got %s %s, want %s %s", i, cd_mount_op_name(m[i]->op),
			      m[i]->path, cd_mount_op_name(want[i].op), want[i].path);
		ck_assert_ptr_nonnull(m[i]->why);
	}
	ck_assert_uint_eq(got, n);
	/* Parents first: nothing is mounted over a mount made before it. */
	for (size_t i = 0; i < lp->n_mounts; i++)
		for (size_t j = i + 1; j < lp->n_mounts; j++)
			ck_assert_msg(!cd_path_is_beneath(lp->mounts[i].path, lp->mounts[j].path),
				      "%s is mounted before its parent %s", lp->mounts[i].path,
				      lp->mounts[j].path);
}

static const struct cd_mount *mount_for(const struct cd_linux_plan *lp, const char *path)
{
	for (size_t i = 0; i < lp->n_mounts; i++)
		if (cd_streq(lp->mounts[i].path, path))
			return &lp->mounts[i];
	return NULL;
}

static const char *why_of(const struct cd_linux_plan *lp, const char *path)
{
	const struct cd_mount *m = mount_for(lp, path);

	ck_assert_msg(m, "no mount on %s", path);
	return m ? m->why : "";
}

START_TEST(test_pin_workspace_in_tmp)
{
	static const struct want_mount want[] = {
		{ CD_MOUNT_MASK, "/tmp/.agents" },
		{ CD_MOUNT_MASK, "/tmp/.codex" },
		{ CD_MOUNT_MASK, "/tmp/.git" },
		{ CD_MOUNT_PIN, "/tmp/a" },
		{ CD_MOUNT_PIN, "/tmp/a/b" },
		{ CD_MOUNT_PIN, "/tmp/a/b/w" },
		{ CD_MOUNT_MASK, "/tmp/a/b/w/.agents" },
		{ CD_MOUNT_MASK, "/tmp/a/b/w/.codex" },
		{ CD_MOUNT_RO_BIND, "/tmp/a/b/w/.git" },
	};
	struct cd_plan plan =
		make_plan(tmp_ws_paths, CD_ARRAY_SIZE(tmp_ws_paths), CD_NET_RESTRICTED);
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);

	check_mounts(lp, want, CD_ARRAY_SIZE(want));
	/* The top of the writable region: its parent (/) is read-only. No pin,
	 * only its writable tree (the workspace inside it needs none). */
	const struct cd_mount *top = mount_for(lp, "/tmp");
	ck_assert(top && top->op == CD_MOUNT_WRITABLE);
	check_trees(lp, "/tmp");
	ck_assert_ptr_nonnull(strstr(why_of(lp, "/tmp/a/b/w"), "inside writable /tmp"));
	ck_assert_ptr_nonnull(strstr(why_of(lp, "/tmp/a/b/w"), "cannot be renamed away"));
	/* Pins are mounts: no Landlock rule, no note, nothing degraded. */
	ck_assert_ptr_null(rule_for(lp, "/tmp/a"));
	ck_assert_uint_eq(cd_strv_length(lp->notes), 0);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 0);
	ck_assert(lp->mount_ns);
	ck_assert(lp->user_ns);
	cd_linux_plan_free(lp);

	/* Root: the same mounts without a user namespace. */
	struct cd_linux_host h = host_full;
	h.is_root = true;
	h.userns = false;
	lp = build_ok(&plan, &h, NULL);
	check_mounts(lp, want, CD_ARRAY_SIZE(want));
	ck_assert(lp->mount_ns);
	ck_assert(!lp->user_ns);
	cd_linux_plan_free(lp);
}
END_TEST

/* ---- a private /tmp and the resource limits ---- */

/* /tmp writable with its protected names, a workspace elsewhere. */
static struct cd_plan_path tmp_paths[] = {
	PP("/", R, CD_FT_DIR, D, false),
	PP("/dev/null", W, CD_FT_OTHER, R, false),
	PP("/tmp", W, CD_FT_DIR, R, false),
	PP("/tmp/.agents", R, CD_FT_MISSING, W, true),
	PP("/tmp/.codex", R, CD_FT_MISSING, W, true),
	PP("/tmp/.git", R, CD_FT_MISSING, W, true),
	PP("/w", W, CD_FT_DIR, R, false),
	PP("/w/.git", R, CD_FT_DIR, W, true),
};

START_TEST(test_private_tmp)
{
	for (size_t i = 3; i <= 5; i++)
		tmp_paths[i].origin = CD_ORIGIN_PROTECTED;
	struct cd_plan plan = make_plan(tmp_paths, CD_ARRAY_SIZE(tmp_paths), CD_NET_RESTRICTED);
	struct cd_limits lim = { 0 };
	cd_limits_put(&lim, CD_LIMIT_PRIVATE_TMP, 64ULL << 20);
	struct cd_linux_opts o = { .limits = &lim };

	/* Without: /tmp's masks and its writable tree. */
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);
	ck_assert_ptr_nonnull(mount_for(lp, "/tmp/.git"));
	ck_assert_ptr_nonnull(mount_for(lp, "/tmp"));
	ck_assert(!lp->private_tmp);
	cd_linux_plan_free(lp);

	/* With: nothing is mounted under /tmp but the tmpfs, which gets /tmp's access. */
	lp = build_ok(&plan, &host_full, &o);
	ck_assert(lp->private_tmp);
	ck_assert_uint_eq(lp->private_tmp_size, 64ULL << 20);
	ck_assert_uint_eq(lp->private_tmp_rights, lp->ll_handled_fs);
	for (size_t i = 0; i < lp->n_mounts; i++)
		ck_assert_msg(!cd_path_is_beneath(lp->mounts[i].path, "/tmp"), "%s",
			      lp->mounts[i].path);
	ck_assert_ptr_nonnull(mount_for(lp, "/w/.git"));
	ck_assert(lp->mount_ns);
	ck_assert_ptr_nonnull(lp->limits);
	ck_assert_int_eq(lp->limits->how[CD_LIMIT_PRIVATE_TMP], CD_LIMIT_HOW_MOUNT);
	cd_linux_plan_free(lp);

	/* /tmp only readable: the tmpfs is read-only to Landlock too. */
	tmp_paths[2].access = R;
	for (size_t i = 3; i <= 5; i++)
		tmp_paths[i].carve_out = false;
	lp = build_ok(&plan, &host_full, &o);
	ck_assert_uint_eq(lp->private_tmp_rights, CD_LL_FS_READ_RIGHTS);
	cd_linux_plan_free(lp);
	tmp_paths[2].access = W;
	for (size_t i = 3; i <= 5; i++)
		tmp_paths[i].carve_out = true;

	/* Root: no user namespace needed. */
	struct cd_linux_host h = host_full;
	h.userns = false;
	h.is_root = true;
	lp = build_ok(&plan, &h, &o);
	ck_assert(lp->private_tmp && !lp->user_ns);
	cd_linux_plan_free(lp);
	/* Neither: no mount namespace for it. */
	h.is_root = false;
	o.degraded = CD_DEGRADE_PROTECTED_METADATA | CD_DEGRADE_PID_ISOLATION |
		     CD_DEGRADE_FILE_ATTRIBUTES;
	build_refused(&plan, &h, &o,
		      (const char *const[]){ "private /tmp needs a mount namespace", NULL });

	/* A workspace under /tmp would be hidden: refused, naming it first. */
	static const size_t protected_idx[] = { 3, 4, 5, 7, 8, 9 };
	for (size_t i = 0; i < CD_ARRAY_SIZE(protected_idx); i++)
		tmp_ws_paths[protected_idx[i]].origin = CD_ORIGIN_PROTECTED;
	struct cd_plan ws = make_plan(tmp_ws_paths, CD_ARRAY_SIZE(tmp_ws_paths), CD_NET_RESTRICTED);
	o.degraded = 0;
	build_refused(&ws, &host_full, &o,
		      (const char *const[]){ "/tmp/a/b/w, from why /tmp/a/b/w, is under /tmp",
					     "drop --private-tmp", NULL });
	/* So would the cwd. */
	plan.cwd = (char *)"/tmp/x";
	build_refused(&plan, &host_full, &o,
		      (const char *const[]){ "working directory /tmp/x is under /tmp", NULL });
	plan.cwd = (char *)"/";
	/* And a disabled profile has no sandbox to put it in. */
	plan.type = CD_PROFILE_DISABLED;
	build_refused(&plan, &host_full, &o, (const char *const[]){ "needs a sandbox", NULL });
}
END_TEST

START_TEST(test_limits_plan)
{
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), CD_NET_RESTRICTED);
	struct cd_limits lim = { 0 };
	cd_limits_put(&lim, CD_LIMIT_TASKS, 32);
	cd_limits_put(&lim, CD_LIMIT_OPEN_FILES, 64);
	struct cd_linux_opts o = { .limits = &lim };
	struct cd_linux_host h = host_full;
	h.lim.probed = true;
	h.lim.nproc_per_userns = true;
	strcpy(h.lim.why, "no cgroup v2 hierarchy is mounted");

	/* Unprivileged, a user namespace of its own: RLIMIT_NPROC per sandbox. */
	struct cd_linux_plan *lp = build_ok(&plan, &h, &o);
	ck_assert_ptr_nonnull(lp->limits);
	ck_assert_int_eq(lp->limits->how[CD_LIMIT_TASKS], CD_LIMIT_HOW_RLIMIT);
	ck_assert_int_eq(lp->limits->how[CD_LIMIT_OPEN_FILES], CD_LIMIT_HOW_RLIMIT);
	ck_assert(!lp->limits->cgroup);
	cd_linux_plan_free(lp);

	/* Root: refused, unless degraded (and then reported with the plan's). */
	h.userns = false;
	h.is_root = true;
	h.lim.uid0 = true;
	build_refused(&plan, &h, &o,
		      (const char *const[]){ "does not apply RLIMIT_NPROC to root", NULL });
	o.degraded_limits = 1u << CD_LIMIT_TASKS;
	lp = build_ok(&plan, &h, &o);
	ck_assert_int_eq(lp->limits->how[CD_LIMIT_TASKS], CD_LIMIT_HOW_SKIPPED);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 1);
	cd_linux_plan_free(lp);

	/* Unsandboxed (a disabled profile, or no plan at all): limits alone. */
	o.degraded_limits = 0;
	h = host_full;
	h.lim.probed = true;
	h.lim.cgroup = true;
	h.lim.controllers = CD_CG_PIDS;
	plan.type = CD_PROFILE_DISABLED;
	lp = build_ok(&plan, &h, &o);
	ck_assert(!lp->sandboxed);
	ck_assert_int_eq(lp->limits->how[CD_LIMIT_TASKS], CD_LIMIT_HOW_CGROUP);
	ck_assert(lp->limits->cgroup);
	cd_linux_plan_free(lp);
	char *err = NULL;
	ck_assert_int_eq(cd_linux_plan_build(NULL, &h, &o, &lp, &err), 0);
	ck_assert(!lp->sandboxed && lp->limits && !lp->plan);
	cd_linux_plan_free(lp);
	/* Without a sandbox there is no user namespace: RLIMIT_NPROC would be per user. */
	h.lim.cgroup = false;
	ck_assert_int_eq(cd_linux_plan_build(NULL, &h, &o, &lp, &err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "every process of the user"));
	free(err);
	/* No limits: no limits plan. */
	o.limits = NULL;
	lp = build_ok(&plan, &h, &o);
	ck_assert_ptr_null(lp->limits);
	cd_linux_plan_free(lp);
}
END_TEST

/*
 * The inotify limits ride on the sandbox's own user namespace: there for an
 * unprivileged sandbox, absent for root's and without a sandbox.
 */
START_TEST(test_limits_inotify)
{
	struct cd_plan plan = make_plan(ro_paths, CD_ARRAY_SIZE(ro_paths), CD_NET_RESTRICTED);
	struct cd_limits lim = { 0 };
	cd_limits_put(&lim, CD_LIMIT_INOTIFY_INSTANCES, 8);
	struct cd_linux_opts o = { .limits = &lim };
	struct cd_linux_host h = host_full;
	h.lim.probed = true;

	struct cd_linux_plan *lp = build_ok(&plan, &h, &o);
	ck_assert(lp->user_ns);
	ck_assert_int_eq(lp->limits->how[CD_LIMIT_INOTIFY_INSTANCES], CD_LIMIT_HOW_USERNS);
	ck_assert_uint_eq(lp->limits->n_userns, 1);
	cd_linux_plan_free(lp);

	/* Root: no user namespace of the sandbox's own. */
	h.userns = false;
	h.is_root = true;
	h.lim.uid0 = true;
	build_refused(&plan, &h, &o,
		      (const char *const[]){ "inotify instance limit 8 cannot be enforced",
					     "a sandbox of root's has no user namespace",
					     "--allow-degraded=inotify-instances", NULL });
	o.degraded_limits = 1u << CD_LIMIT_INOTIFY_INSTANCES;
	lp = build_ok(&plan, &h, &o);
	ck_assert_int_eq(lp->limits->how[CD_LIMIT_INOTIFY_INSTANCES], CD_LIMIT_HOW_SKIPPED);
	ck_assert_uint_eq(lp->limits->n_userns, 0);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 1);
	ck_assert_ptr_nonnull(strstr(lp->degraded[0], "inotify instance limit 8 NOT enforced"));
	cd_linux_plan_free(lp);

	/* No sandbox (a disabled profile): none either, whoever runs it. */
	o.degraded_limits = 0;
	h = host_full;
	plan.type = CD_PROFILE_DISABLED;
	build_refused(&plan, &h, &o,
		      (const char *const[]){ "inotify instance limit 8 cannot be enforced",
					     "runs without a sandbox", NULL });
}
END_TEST

/* An index naming the given gitlinks (version 2, SHA-1 names of zeros). */
static void git_index(struct cd_fakefs *fs, const char *path, const char *const *links)
{
	struct cd_strbuf sb = { 0 };
	size_t n = 0;
	while (links[n])
		n++;
	cd_strbuf_append_n(&sb, "DIRC\0\0\0\2", 8);
	for (int shift = 24; shift >= 0; shift -= 8)
		cd_strbuf_append_c(&sb, (char)(n >> shift));
	for (size_t i = 0; i < n; i++) {
		size_t start = sb.len, len = strlen(links[i]);
		for (int k = 0; k < 60; k++)
			cd_strbuf_append_c(&sb, k == 26 ? '\340' : '\0'); /* mode 0160000 */
		cd_strbuf_append_c(&sb, (char)(len >> 8));
		cd_strbuf_append_c(&sb, (char)len);
		cd_strbuf_append(&sb, links[i]);
		do
			cd_strbuf_append_c(&sb, '\0');
		while ((sb.len - start) % 8);
	}
	for (int k = 0; k < 20; k++)
		cd_strbuf_append_c(&sb, '\0');
	cd_fakefs_file_bytes(fs, path, sb.buf, sb.len);
	cd_strbuf_done(&sb);
}

/*
 * A workspace nested in /tmp, with submodules and a nested repository,
 * bound by the plan: the directories above get masks and pins, the
 * submodules and nested repository read-only binds and masks.
 */
START_TEST(test_git_nested_mounts)
{
	static const char *const links[] = { "sub", "gone", NULL };
	static const struct want_mount want[] = {
		{ CD_MOUNT_MASK, "/tmp/.agents" },
		{ CD_MOUNT_MASK, "/tmp/.codex" },
		{ CD_MOUNT_MASK, "/tmp/.git" },
		{ CD_MOUNT_PIN, "/tmp/x" },
		{ CD_MOUNT_MASK, "/tmp/x/.agents" },
		{ CD_MOUNT_MASK, "/tmp/x/.codex" },
		{ CD_MOUNT_MASK, "/tmp/x/.git" },
		{ CD_MOUNT_PIN, "/tmp/x/ws" },
		{ CD_MOUNT_MASK, "/tmp/x/ws/.agents" },
		{ CD_MOUNT_MASK, "/tmp/x/ws/.codex" },
		{ CD_MOUNT_RO_BIND, "/tmp/x/ws/.git" },
		{ CD_MOUNT_MASK, "/tmp/x/ws/gone" },
		{ CD_MOUNT_PIN, "/tmp/x/ws/sub" },
		{ CD_MOUNT_PIN, "/tmp/x/ws/v" },
		{ CD_MOUNT_MASK, "/tmp/x/ws/sub/.git" },
		{ CD_MOUNT_PIN, "/tmp/x/ws/v/n" },
		{ CD_MOUNT_RO_BIND, "/tmp/x/ws/v/n/.git" },
	};
	struct cd_fakefs *fs = cd_fakefs_new();
	cd_fakefs_other(fs, "/dev/null");
	cd_fakefs_dir(fs, "/tmp/x/ws/.git");
	cd_fakefs_dir(fs, "/tmp/x/ws/sub");
	cd_fakefs_dir(fs, "/tmp/x/ws/v/n/.git");
	git_index(fs, "/tmp/x/ws/.git/index", links);
	struct cd_profile *prof = cd_xcalloc(1, sizeof(*prof));
	prof->type = CD_PROFILE_MANAGED;
	prof->network = CD_NET_RESTRICTED;
	static const enum cd_special specials[] = { CD_SPECIAL_ROOT, CD_SPECIAL_PROJECT_ROOTS,
						    CD_SPECIAL_SLASH_TMP };
	for (size_t i = 0; i < CD_ARRAY_SIZE(specials); i++) {
		struct cd_fs_entry e = {
			.kind = CD_ENTRY_SPECIAL,
			.special = specials[i],
			.access = i ? CD_ACCESS_WRITE : CD_ACCESS_READ,
		};
		cd_profile_add_entry(prof, &e);
	}
	const char *roots[] = { "/tmp/x/ws" };
	struct cd_bind_input in = {
		.cwd = "/tmp/x/ws",
		.workspace_roots = roots,
		.n_workspace_roots = 1,
		.ops = cd_fakefs_ops(fs),
	};
	struct cd_plan *plan = NULL;
	char *err = NULL;
	ck_assert_msg(cd_plan_build(prof, &in, &plan, &err) == 0, "%s", err ? err : "?");
	struct cd_linux_plan *lp = build_ok(plan, &host_full, NULL);
	check_mounts(lp, want, CD_ARRAY_SIZE(want));
	ck_assert_ptr_nonnull(strstr(why_of(lp, "/tmp/x/.git"), "above writable /tmp/x/ws"));
	ck_assert_ptr_nonnull(strstr(why_of(lp, "/tmp/x/ws/gone"), "missing submodule path"));
	ck_assert_ptr_nonnull(strstr(why_of(lp, "/tmp/x/ws/sub/.git"), "uninitialized submodule"));
	ck_assert_ptr_nonnull(strstr(why_of(lp, "/tmp/x/ws/v/n/.git"), "nested repository"));
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 0);
	cd_linux_plan_free(lp);

	/* Without user namespaces: refused, naming what needs them. */
	struct cd_linux_host h = host_full;
	h.userns = false;
	ck_assert_int_eq(cd_linux_plan_build(plan, &h, NULL, &lp, &err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "/tmp/x/ws/gone"));
	free(err);
	err = NULL;
	plan = cd_plan_free(plan);

	/* The scan skipped on request: reported with the other degradations. */
	in.skip_nested_scan = true;
	ck_assert_int_eq(cd_plan_build(prof, &in, &plan, &err), 0);
	lp = build_ok(plan, &host_full, NULL);
	ck_assert_ptr_null(mount_for(lp, "/tmp/x/ws/v/n/.git"));
	ck_assert_ptr_nonnull(mount_for(lp, "/tmp/x/ws/sub/.git"));
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 1);
	ck_assert_ptr_nonnull(strstr(lp->degraded[0], "nested repositories NOT protected"));
	cd_linux_plan_free(lp);
	cd_plan_free(plan);
	cd_profile_free(prof);
	cd_fakefs_free(fs);
}
END_TEST

START_TEST(test_pin_none_under_readonly_parent)
{
	/* /home/u/w's parent is read-only: it cannot be renamed, nothing to pin. */
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/home/u/w", W, CD_FT_DIR, R, false),
		PP("/home/u/w/.codex", R, CD_FT_MISSING, W, true),
		PP("/home/u/w/.git", R, CD_FT_DIR, W, true),
		PP("/tmp", W, CD_FT_DIR, R, false),
		PP("/tmp/.git", R, CD_FT_MISSING, W, true),
	};
	static const struct want_mount want[] = {
		{ CD_MOUNT_MASK, "/tmp/.git" },
		{ CD_MOUNT_MASK, "/home/u/w/.codex" },
		{ CD_MOUNT_RO_BIND, "/home/u/w/.git" },
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_RESTRICTED);
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);

	check_mounts(lp, want, CD_ARRAY_SIZE(want));
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_pin_nested_root)
{
	/*
	 * A root nested in another (/w/sub/x inside /w), a gitdir target deep
	 * in /w, and carve-outs below a writable bind inside a read-only one.
	 */
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/w", W, CD_FT_DIR, R, false),
		PP("/w/.git", R, CD_FT_REG, W, true),
		PP("/w/repo/gitdir", R, CD_FT_DIR, W, true),
		PP("/w/repo/gitdir/hooks", W, CD_FT_DIR, R, false),
		PP("/w/repo/gitdir/hooks/a/b", W, CD_FT_DIR, W, false),
		PP("/w/repo/gitdir/hooks/a/b/.git", R, CD_FT_DIR, W, true),
		PP("/w/sub/x", W, CD_FT_DIR, W, false),
		PP("/w/sub/x/.codex", R, CD_FT_MISSING, W, true),
	};
	static const struct want_mount want[] = {
		{ CD_MOUNT_RO_BIND, "/w/.git" },
		{ CD_MOUNT_PIN, "/w/repo" },
		{ CD_MOUNT_PIN, "/w/sub" },
		{ CD_MOUNT_RO_BIND, "/w/repo/gitdir" },
		{ CD_MOUNT_PIN, "/w/sub/x" },
		{ CD_MOUNT_RW_BIND, "/w/repo/gitdir/hooks" },
		{ CD_MOUNT_MASK, "/w/sub/x/.codex" },
		{ CD_MOUNT_PIN, "/w/repo/gitdir/hooks/a" },
		{ CD_MOUNT_PIN, "/w/repo/gitdir/hooks/a/b" },
		{ CD_MOUNT_RO_BIND, "/w/repo/gitdir/hooks/a/b/.git" },
	};
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_RESTRICTED);
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);

	check_mounts(lp, want, CD_ARRAY_SIZE(want));
	ck_assert_ptr_nonnull(strstr(why_of(lp, "/w/sub"), "inside writable /w:"));
	ck_assert_ptr_nonnull(strstr(why_of(lp, "/w/repo/gitdir/hooks/a"),
				     "inside writable /w/repo/gitdir/hooks:"));
	/* A pin is not a read-only mount: the writable paths need no notes. */
	ck_assert_uint_eq(cd_strv_length(lp->notes), 0);
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_pin_only_known_directories)
{
	/*
	 * A missing workspace: its mask could not be made (nothing to make it
	 * in), and the command could create both: refused at plan time, so
	 * that explain says so too. Nothing is pinned on a guess.
	 */
	struct cd_plan_path paths[] = {
		PP("/", R, CD_FT_DIR, D, false),
		PP("/tmp", W, CD_FT_DIR, R, false),
		PP("/tmp/m/w", W, CD_FT_MISSING, W, false),
		PP("/tmp/m/w/.git", R, CD_FT_MISSING, W, true),
		PP("/tmp/n/w", W, CD_FT_DIR, W, false),
		PP("/tmp/n/w/.git", R, CD_FT_MISSING, W, true),
		/* A missing denied name in an existing directory (a gitdir: target). */
		PP("/tmp/n/w/sub/.env", D, CD_FT_MISSING, W, true),
	};
	paths[2].parent_missing = true;
	paths[3].parent_missing = true;
	struct cd_plan plan = make_plan(paths, CD_ARRAY_SIZE(paths), CD_NET_RESTRICTED);
	build_refused(&plan, &host_full, NULL,
		      (const char *const[]){ "/tmp/m/w/.git cannot be masked",
					     "nor does the directory it would be in",
					     "create that directory", NULL });

	/*
	 * Without it: a mask's directory exists, so everything above it is a
	 * directory, pinned up to the top of the writable region: renaming
	 * sub away and making a new one would plant the masked name.
	 */
	struct cd_plan_path head[] = { paths[0], paths[1], paths[4], paths[5], paths[6] };
	plan = make_plan(head, CD_ARRAY_SIZE(head), CD_NET_RESTRICTED);
	static const struct want_mount want[] = {
		{ CD_MOUNT_PIN, "/tmp/n" },
		{ CD_MOUNT_PIN, "/tmp/n/w" },
		{ CD_MOUNT_MASK, "/tmp/n/w/.git" },
		{ CD_MOUNT_PIN, "/tmp/n/w/sub" },
		{ CD_MOUNT_MASK, "/tmp/n/w/sub/.env" },
	};
	struct cd_linux_plan *lp = build_ok(&plan, &host_full, NULL);

	check_mounts(lp, want, CD_ARRAY_SIZE(want));
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_pin_degraded)
{
	struct cd_plan plan =
		make_plan(tmp_ws_paths, CD_ARRAY_SIZE(tmp_ws_paths), CD_NET_RESTRICTED);
	struct cd_linux_host h = host_full;
	struct cd_linux_opts o = { .degraded = CD_DEGRADE_PROTECTED_METADATA |
					       CD_DEGRADE_PID_ISOLATION |
					       CD_DEGRADE_FILE_ATTRIBUTES };
	struct cd_linux_plan *lp;

	h.userns = false;
	/* The refusal names the protected paths, not the pins. */
	build_refused(&plan, &h, NULL,
		      (const char *const[]){ "protected paths inside writable roots (/tmp/.agents, "
					     "/tmp/.codex, /tmp/.git, ...)",
					     "--allow-degraded=protected-metadata", NULL });

	lp = build_ok(&plan, &h, &o);
	ck_assert_uint_eq(lp->n_mounts, 0);
	ck_assert(!lp->mount_ns);
	ck_assert(!lp->user_ns);
	/* + file attributes, terminals, pid isolation, no network, no IPC namespace */
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 7);
	ck_assert_ptr_nonnull(strstr(lp->degraded[0], "protected metadata NOT enforced"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[0], "/tmp/.agents"));
	ck_assert_ptr_null(strstr(lp->degraded[0], "/tmp/a,"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[1], "nested writable roots NOT pinned"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[1], "/tmp/a, /tmp/a/b, /tmp/a/b/w"));
	ck_assert_ptr_null(strchr(lp->degraded[1], '\n'));
	cd_linux_plan_free(lp);

	/* Without anything to pin, no pins line: protected metadata and pid isolation. */
	plan.n_paths = 6; /* up to /tmp/.git */
	lp = build_ok(&plan, &h, &o);
	ck_assert_uint_eq(cd_strv_length(lp->degraded), 6); /* + terminals, network, IPC */
	ck_assert_ptr_nonnull(strstr(lp->degraded[1], "file attributes NOT protected"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[2], "terminals NOT hidden"));
	ck_assert_ptr_nonnull(strstr(lp->degraded[3], "pid isolation NOT enforced"));
	cd_linux_plan_free(lp);
}
END_TEST

START_TEST(test_free_null)
{
	ck_assert_ptr_null(cd_linux_plan_free(NULL));
}
END_TEST

static Suite *linux_plan_suite(void)
{
	Suite *s = suite_create("linux-plan");
	TCase *tc;

	tc = tcase_create("landlock-abi");
	tcase_add_loop_test(tc, test_abi_tables, 0, (int)CD_ARRAY_SIZE(fs_by_abi));
	tcase_add_test(tc, test_abi_tables_named_bits);
	tcase_add_test(tc, test_rights_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("seccomp-table");
	tcase_add_test(tc, test_sc_sanity);
	tcase_add_loop_test(tc, test_sc_required, 0, (int)CD_ARRAY_SIZE(required_unconditional));
	tcase_add_test(tc, test_sc_conditional);
	tcase_add_test(tc, test_sc_network);
	tcase_add_test(tc, test_sc_setid);
	tcase_add_test(tc, test_sc_no_pid_ns);
	tcase_add_test(tc, test_sc_allowed);
	tcase_add_test(tc, test_mount_op_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("build");
	tcase_add_test(tc, test_build_disabled);
	tcase_add_loop_test(tc, test_build_read_only, 0, (int)CD_ARRAY_SIZE(ro_abis));
	tcase_add_test(tc, test_build_abi_capped);
	tcase_add_test(tc, test_build_read_file_rule);
	tcase_add_test(tc, test_build_workspace_write);
	tcase_add_test(tc, test_build_workspace_write_root);
	tcase_add_test(tc, test_build_rewiden);
	tcase_add_test(tc, test_build_ro_root);
	tcase_add_test(tc, test_build_private_pts);
	tcase_add_test(tc, test_build_fs_unrestricted);
	tcase_add_test(tc, test_degraded);
	tcase_add_test(tc, test_free_null);
	suite_add_tcase(s, tc);

	tc = tcase_create("pins");
	tcase_add_test(tc, test_pin_workspace_in_tmp);
	tcase_add_test(tc, test_private_tmp);
	tcase_add_test(tc, test_limits_plan);
	tcase_add_test(tc, test_limits_inotify);
	tcase_add_test(tc, test_pin_none_under_readonly_parent);
	tcase_add_test(tc, test_pin_nested_root);
	tcase_add_test(tc, test_pin_only_known_directories);
	tcase_add_test(tc, test_pin_degraded);
	tcase_add_test(tc, test_git_nested_mounts);
	suite_add_tcase(s, tc);

	tc = tcase_create("refusals");
	tcase_add_test(tc, test_refuse_landlock);
	tcase_add_test(tc, test_refuse_landlock_unknown_abi);
	tcase_add_test(tc, test_refuse_seccomp);
	tcase_add_test(tc, test_refuse_managed_network);
	tcase_add_test(tc, test_refuse_deny);
	tcase_add_test(tc, test_managed_network);
	tcase_add_test(tc, test_proxy_endpoint);
	tcase_add_test(tc, test_managed_proxy_env);
	tcase_add_test(tc, test_deny_masks);
	tcase_add_test(tc, test_hidden);
	tcase_add_test(tc, test_hidden_identity);
	tcase_add_test(tc, test_hidden_covered);
	tcase_add_test(tc, test_refuse_no_userns);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(linux_plan_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
