/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-floor: the kernel work of `cordon run --profile workspace-write`,
 * and nothing else. A yardstick for bench-spawn, NOT a sandbox: it checks
 * no policy, reports no errors beyond a line on stderr, and its seccomp
 * filter denies nothing of use.
 *
 * It makes the same system calls a workspace-write run makes on this kind
 * of host (read from `strace -f cordon run ...`): a child cloned into new
 * mount and pid namespaces (and a user namespace when not root), which
 * creates an empty network namespace while the parent makes the FIFO masks
 * of the six missing protected paths (.git, .codex, .agents in WS and in
 * /tmp), and an IPC namespace; clones /tmp's mount tree, makes every mount
 * read-only and attaches the clone on /tmp again, mounts a detached
 * tmpfs's symlink over each mask, binds WS onto itself, mounts a private
 * /dev/pts and /proc, drops every capability, enforces four Landlock rules, loads
 * a seccomp filter as long as cordon's (144 instructions), and as the
 * namespace's init vforks the command, reaps it and kills what is left.
 * The parent waits and removes the masks.
 *
 * What it leaves out is what cordon does beyond the kernel work: reading
 * and binding the policy, probing the host, the report channel, the
 * checks. bench-spawn times it beside cordon: the difference is what
 * cordon's own code costs, and this program's time is what any tool
 * enforcing the same thing pays on this machine.
 *
 * Usage: bench-floor [--no-netns] WS -- CMD [ARG...]
 */

/* Also built by hand with musl-gcc (make bench), without config.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * The uapi values this needs, spelled out: so that it builds with any C
 * library (musl-gcc does not see the kernel's headers) and on hosts whose
 * headers predate Landlock or the new mount API.
 */
#define LL_CREATE_RULESET_VERSION 1U
#define LL_RULE_PATH_BENEATH	  1
#define LL_FS_EXECUTE		  (1ULL << 0)
#define LL_FS_WRITE_FILE	  (1ULL << 1)
#define LL_FS_READ_FILE		  (1ULL << 2)
#define LL_FS_READ_DIR		  (1ULL << 3)
#define LL_FS_TRUNCATE		  (1ULL << 14)
#define LL_FS_IOCTL_DEV		  (1ULL << 15)
#define FSOPEN_CLOEXEC_		  1U
#define FSCONFIG_SET_STRING_	  1U
#define FSCONFIG_CMD_CREATE_	  6U
#define FSMOUNT_CLOEXEC_	  1U
#define MOUNT_ATTR_NOSUID_	  0x2U
#define MOUNT_ATTR_NODEV_	  0x4U
#define MOUNT_ATTR_NOEXEC_	  0x8U
#define OPEN_TREE_CLONE_	  1U
#define MOVE_MOUNT_F_EMPTY_PATH_  0x4U
#define MOVE_MOUNT_T_EMPTY_PATH_  0x40U
#define MOUNT_ATTR_RDONLY_	  0x1U
#define CAP_VERSION_3		  0x20080522U
#define SECCOMP_SET_MODE_FILTER_  1U
#define SECCOMP_RET_ALLOW_	  0x7fff0000U
#define SECCOMP_RET_ERRNO_	  0x00050000U
#define SECCOMP_RET_KILL_PROCESS_ 0x80000000U
#define AUDIT_ARCH_X86_64_	  0xc000003eU
#define FILTER_LEN		  144
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

struct mount_attr_ {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

struct cap_header {
	uint32_t version;
	int pid;
};

struct cap_data {
	uint32_t effective, permitted, inheritable;
};

struct bpf_insn {
	uint16_t code;
	uint8_t jt, jf;
	uint32_t k;
};

struct bpf_prog {
	unsigned short len;
	struct bpf_insn *filter;
};

#define BPF_LD_W_ABS 0x20 /* BPF_LD | BPF_W | BPF_ABS */
#define BPF_JEQ_K    0x15 /* BPF_JMP | BPF_JEQ | BPF_K */
#define BPF_RET_K    0x06 /* BPF_RET | BPF_K */

static const char *const protected_names[3] = { ".git", ".codex", ".agents" };

static struct {
	const char *ws;
	char **cmd;
	bool net_ns;
	int sync[2]; /* the parent writes a byte once the masks exist */
	char masks[6][4096];
	int ruleset;
	char uid_map[32], gid_map[32];
	int last_cap;
	bool made[6]; /* masks the parent made, to remove (none in the child) */
	/* Per directory (WS, /tmp): the FIFO's shared lock, as cordon holds it. */
	int lock[2];
	struct stat fifo[2];
} g = { .lock = { -1, -1 } };

/*
 * Remove the names we made, as cordon does: only with the FIFO's lock taken
 * exclusively (no concurrent cordon run adopted it) and only while the name
 * is still that FIFO. Unlinking a mask a cordon run uses would detach its
 * mount and fail that run.
 */
static void remove_masks(void)
{
	for (int d = 0; d < 2; d++) {
		bool mine = g.lock[d] >= 0 && flock(g.lock[d], LOCK_EX | LOCK_NB) == 0;

		for (int k = 3 * d; k < 3 * d + 3; k++) {
			struct stat st;

			if (mine && g.made[k] && lstat(g.masks[k], &st) == 0 &&
			    st.st_dev == g.fifo[d].st_dev && st.st_ino == g.fifo[d].st_ino)
				unlink(g.masks[k]);
		}
		if (g.lock[d] >= 0)
			close(g.lock[d]);
		g.lock[d] = -1;
	}
}

static void fail(const char *what)
{
	fprintf(stderr, "bench-floor: %s: %s\n", what, strerror(errno));
	remove_masks();
	_exit(125);
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		fail(path);
	close(fd);
}

static void add_rule(const char *path, uint64_t access)
{
	struct ll_path_beneath_attr pb;
	int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		fail(path);
	pb.allowed_access = access;
	pb.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, g.ruleset, LL_RULE_PATH_BENEATH, &pb, 0) < 0)
		fail("landlock_add_rule");
	close(fd);
}

/* Four rules, as cordon's workspace-write: read /, write /dev/null, /tmp and WS. */
static void make_ruleset(void)
{
	struct ll_ruleset_attr attr = { 0 };
	int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	uint64_t all;

	if (abi < 1)
		fail("Landlock");
	/* 13 rights in ABI 1, then refer (2), truncate (3), ioctl_dev (5). */
	all = (1ULL << 13) - 1;
	if (abi >= 2)
		all |= 1ULL << 13;
	if (abi >= 3)
		all |= LL_FS_TRUNCATE;
	if (abi >= 5)
		all |= LL_FS_IOCTL_DEV;
	attr.handled_access_fs = all;
	if (abi >= 4)
		attr.handled_access_net = 3; /* bind_tcp, connect_tcp */
	if (abi >= 6)
		attr.scoped = 3; /* abstract unix sockets, signals */
	g.ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (g.ruleset < 0)
		fail("landlock_create_ruleset");
	add_rule("/", LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR);
	add_rule("/dev/null", (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE |
			       LL_FS_IOCTL_DEV) &
				      all);
	add_rule("/tmp", all);
	add_rule(g.ws, all);
}

/* Bind what fd_from names at from onto path (the new mount API, as cordon). */
static void bind_onto(int fd_from, const char *from, unsigned flags, const char *path)
{
	int target = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int tree = (int)syscall(SYS_open_tree, fd_from, from, OPEN_TREE_CLONE_ | O_CLOEXEC | flags);

	if (target < 0 || tree < 0 ||
	    syscall(SYS_move_mount, tree, "", target, "",
		    MOVE_MOUNT_F_EMPTY_PATH_ | MOVE_MOUNT_T_EMPTY_PATH_) < 0)
		fail(path);
	close(tree);
	close(target);
}

static void mount_masks(void)
{
	int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC_);
	int mnt;

	if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING_, "mode", "0555", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING_, "size", "4k", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE_, NULL, NULL, 0) < 0)
		fail("tmpfs");
	mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC_,
			   MOUNT_ATTR_NOSUID_ | MOUNT_ATTR_NODEV_ | MOUNT_ATTR_NOEXEC_);
	struct mount_attr_ ro = { MOUNT_ATTR_RDONLY_, 0, 0, 0 };
	if (mnt < 0 || symlinkat("/proc/.masked", mnt, "mask") < 0 ||
	    syscall(SYS_mount_setattr, mnt, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
		fail("tmpfs");
	close(fs);
	for (int i = 0; i < 6; i++)
		bind_onto(mnt, "mask", AT_SYMLINK_NOFOLLOW, g.masks[i]);
	close(mnt);
}

static void drop_caps(void)
{
	struct cap_header h = { CAP_VERSION_3, 0 };
	struct cap_data d[2] = { { 0, 0, 0 }, { 0, 0, 0 } };

	for (int cap = 0; cap <= g.last_cap; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			fail("PR_CAPBSET_DROP");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
	    syscall(SYS_capset, &h, d) < 0)
		fail("capset");
}

/* The architecture check, then a ladder of compares that match no real syscall. */
static void load_filter(void)
{
	static struct bpf_insn f[FILTER_LEN];
	struct bpf_prog prog = { FILTER_LEN, f };
	int n = 0;

	f[n++] = (struct bpf_insn){ BPF_LD_W_ABS, 0, 0, 4 };
	f[n++] = (struct bpf_insn){ BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64_ };
	f[n++] = (struct bpf_insn){ BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS_ };
	f[n++] = (struct bpf_insn){ BPF_LD_W_ABS, 0, 0, 0 };
	while (n < FILTER_LEN - 2) {
		f[n] = (struct bpf_insn){ BPF_JEQ_K, (uint8_t)(FILTER_LEN - 2 - n), 0,
					  100000U + (uint32_t)n };
		n++;
	}
	f[n++] = (struct bpf_insn){ BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW_ };
	f[n++] = (struct bpf_insn){ BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO_ | EPERM };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER_, 0, &prog) < 0)
		fail("seccomp");
}

static void child(void)
{
	char byte;
	int status;
	pid_t pid;

	close(g.sync[1]);
	if (g.net_ns && unshare(CLONE_NEWNET) < 0)
		fail("unshare(CLONE_NEWNET)");
	if (g.uid_map[0]) {
		write_file("/proc/self/setgroups", "deny");
		write_file("/proc/self/uid_map", g.uid_map);
		write_file("/proc/self/gid_map", g.gid_map);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail("private /");
	if (read(g.sync[0], &byte, 1) != 1)
		fail("waiting for the masks");
	{
		/* Everything read-only but the writable region, /tmp (WS is in it). */
		struct mount_attr_ ro = { MOUNT_ATTR_RDONLY_, 0, 0, 0 };
		int tmp = open("/tmp", O_PATH | O_NOFOLLOW | O_CLOEXEC);
		int tree = tmp < 0 ? -1
				   : (int)syscall(SYS_open_tree, tmp, "",
						  OPEN_TREE_CLONE_ | O_CLOEXEC | AT_EMPTY_PATH |
							  AT_RECURSIVE);
		if (tree < 0 ||
		    syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0 ||
		    syscall(SYS_move_mount, tree, "", tmp, "",
			    MOVE_MOUNT_F_EMPTY_PATH_ | MOVE_MOUNT_T_EMPTY_PATH_) < 0)
			fail("read-only mounts");
		close(tree);
		close(tmp);
	}
	mount_masks();
	{
		int ws = open(g.ws, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (ws < 0)
			fail(g.ws);
		bind_onto(ws, "", AT_EMPTY_PATH | AT_RECURSIVE, g.ws);
		close(ws);
	}
	if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		fail("/dev/pts");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		fail("/proc");
	drop_caps();
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_landlock_restrict_self, g.ruleset, 0) < 0)
		fail("landlock_restrict_self");
	close(g.ruleset);
	load_filter();
	if (chdir(g.ws) < 0)
		fail(g.ws);
	pid = vfork();
	if (pid == 0) {
		setpgid(0, 0);
		execvp(g.cmd[0], g.cmd);
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (pid < 0)
		fail("vfork");
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			fail("waitpid");
	kill(-1, SIGKILL);
	while (wait(NULL) > 0 || errno == EINTR)
		;
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

int main(int argc, char **argv)
{
	unsigned long flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | SIGCHLD;
	int i = 1, status;
	long pid;

	g.net_ns = true;
	if (i < argc && strcmp(argv[i], "--no-netns") == 0) {
		g.net_ns = false;
		i++;
	}
	if (argc - i < 3 || strcmp(argv[i + 1], "--") != 0) {
		fprintf(stderr, "usage: bench-floor [--no-netns] WS -- CMD [ARG...]\n");
		return 2;
	}
	g.ws = argv[i];
	g.cmd = argv + i + 2;
	for (int k = 0; k < 3; k++) {
		snprintf(g.masks[k], sizeof(g.masks[k]), "%s/%s", g.ws, protected_names[k]);
		snprintf(g.masks[3 + k], sizeof(g.masks[k]), "/tmp/%s", protected_names[k]);
	}
	if (geteuid() != 0) {
		flags |= CLONE_NEWUSER;
		snprintf(g.uid_map, sizeof(g.uid_map), "%u %u 1\n", (unsigned)geteuid(),
			 (unsigned)geteuid());
		snprintf(g.gid_map, sizeof(g.gid_map), "%u %u 1\n", (unsigned)getegid(),
			 (unsigned)getegid());
	}
	{
		FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
		if (!f || fscanf(f, "%d", &g.last_cap) != 1)
			fail("/proc/sys/kernel/cap_last_cap");
		fclose(f);
	}
	make_ruleset();
	if (pipe2(g.sync, O_CLOEXEC) < 0)
		fail("pipe");
	pid = syscall(SYS_clone, flags, NULL, NULL, NULL, 0L);
	if (pid < 0)
		fail("clone");
	if (pid == 0)
		child();
	close(g.sync[0]);
	/* A child that failed early has closed the pipe: fail on EPIPE, removing the masks. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * One FIFO per directory, hard-linked under the other two names. A
	 * FIFO already there is the mask of a cordon run going on meanwhile:
	 * bind over it as cordon would, and leave it to that run.
	 */
	for (int k = 0; k < 6; k++) {
		struct stat st;
		int r = k % 3 == 0 ? mknod(g.masks[k], S_IFIFO | 0444, 0)
				   : link(g.masks[k - k % 3], g.masks[k]);

		if (r == 0) {
			g.made[k] = true;
		} else if (errno != EEXIST || lstat(g.masks[k], &st) < 0 || !S_ISFIFO(st.st_mode)) {
			kill((pid_t)pid, SIGKILL);
			fail(g.masks[k]);
		}
		/* The directory's FIFO, ours or a concurrent run's: share its lock. */
		if (k % 3 == 0) {
			int d = k / 3;

			g.lock[d] =
				open(g.masks[k], O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
			if (g.lock[d] < 0 || flock(g.lock[d], LOCK_SH) < 0 ||
			    fstat(g.lock[d], &g.fifo[d]) < 0) {
				kill((pid_t)pid, SIGKILL);
				fail(g.masks[k]);
			}
		}
	}
	if (write(g.sync[1], "", 1) != 1)
		fail("pipe");
	close(g.sync[1]);
	while (waitpid((pid_t)pid, &status, 0) < 0)
		if (errno != EINTR)
			fail("waitpid");
	remove_masks();
	return WIFEXITED(status) ? WEXITSTATUS(status) : 125;
}
