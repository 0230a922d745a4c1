/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_SYS_PIDFD_H
#include <sys/pidfd.h>
#endif

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/linux-util.h"
#include "sandbox/linux/netfence.h"
#include "shared/fd-util.h"
#include "shared/log.h"
#include "spawn-common.h"
#include "spawn.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Scans of /proc before cd_child_kill_namespace gives up (see there). */
#define KILL_NS_ROUNDS 1000

static void kill_tree(pid_t group);

struct cd_child {
	pid_t pid;
	int pidfd; /* owned; -1 until cd_child_pidfd, or unavailable */
	bool pidfd_tried;
	struct cd_backend_state **states; /* owned; parallel to cd_backends[] */
	size_t n_states;
	/* The resource limits' state (cd_backend_limits), or NULL without limits. Owned. */
	struct cd_backend_state *limits;
	bool limits_finished;
	bool waited;
	bool finished;	  /* finish hooks have run */
	bool kill_tree;	  /* kill every remaining descendant when the command exits */
	bool tree_killed; /* kill_tree ran: nothing of the command is left */
	/*
	 * The sandbox's own mount namespace, or -1 when it shares ours (or
	 * finish has run). Held open until finish: the kernel hands a freed
	 * namespace's inode number to the next namespace created anywhere, and
	 * cd_child_kill_namespace kills by that number, so the namespace must
	 * outlive the command and everything it left behind.
	 */
	int mnt_ns_fd;
	ino_t mnt_ns_ino; /* its nsfs inode, when mnt_ns_fd >= 0 */
	/* The managed network's relay process (netfence.h), or 0; stopped once the command exits. */
	pid_t relay_pid;
	/* Its unix proxy socket, pinned before the child exists (cd_relay_start), or -1. */
	int proxy_pin;
};

/*
 * The messages on the error socket (SOCK_SEQPACKET: one per send, struct
 * cd_child_report of init/init.h). Before exec: CD_CHILD_MNT_NS with the
 * mount namespace's fd (SCM_RIGHTS) right after the namespaces backend set
 * it up; CD_CHILD_FAILED when the child cannot exec, just before it exits.
 * End of file once exec succeeded or the child died (and, with a pid
 * namespace, once the init has started the command: see cd_init_run).
 */

#define PIN_STAGE "cannot pin the sandbox's mount namespace"

/*
 * Everything the child needs, computed before fork: after fork the child
 * must not allocate (the parent may be multi-threaded one day, and malloc
 * locks are not fork-safe), so it only reads this.
 */
struct child_ctx {
	const struct cd_spawn_opts *o;
	struct cd_backend_state **states; /* NULL when not sandboxed */
	struct cd_backend_state *limits;  /* NULL without limits */
	/*
	 * The cgroup the child is born in (CLONE_INTO_CGROUP), or -1: the
	 * whole sandbox, its init included, is in it from its first instant.
	 */
	int cgroup_fd;
	pid_t parent;
	int report_fd;
	unsigned long nofile; /* RLIMIT_NOFILE soft limit, for the close-on-exec fallback */
	int close_fd;	      /* the parent's end of the error socket, closed in the child */
	/*
	 * The plan has a mount namespace: send it to the parent once the
	 * namespaces backend has set it up. The parent cannot open it itself
	 * after exec: the command may already have exited, and a zombie has no
	 * namespaces left.
	 */
	bool pin_mnt_ns;
	/*
	 * Managed network: once in its network namespace, listen on the
	 * relay port there and send the socket to the parent (netfence.h).
	 */
	bool relay;
	/* The child is pid 1 of a new pid namespace (getppid() is 0 there). */
	bool new_pid_ns;
	/* create_child makes it with fork semantics (child_is_fork, decided once). */
	bool forked;
	/*
	 * The child is the init of its pid namespace (see cd_init_run): it
	 * executes o->init when given (init_argv), or else runs the init
	 * itself and never exec's, and is then created with fork semantics,
	 * not CLONE_VFORK.
	 */
	bool pid_init;
	/* What cd_init_run and cd_init_exec need. */
	struct cd_init_args args;
	/* cordon-init's arguments (init/init.h), when o->init; its strings below. */
	char **init_argv;
	char init_fd[16];
	char init_flags[4];
	/*
	 * The parent moved us off its CPU (see run_elsewhere): after the
	 * namespaces backend, put back the affinity we were born with, which
	 * is what the command must inherit.
	 */
	bool restore_affinity;
	cpu_set_t affinity;
};

static size_t n_backends(void)
{
	size_t n = 0;
	while (cd_backends[n])
		n++;
	return n;
}

static void finish_states(struct cd_backend_state **states, size_t n)
{
	for (size_t i = n; i-- > 0;)
		if (states[i] && cd_backends[i]->finish)
			cd_backends[i]->finish(states[i]);
}

static void abandon_states(struct cd_backend_state **states, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (states[i] && cd_backends[i]->abandon)
			cd_backends[i]->abandon(states[i]);
}

static void destroy_states(struct cd_backend_state **states, size_t n)
{
	for (size_t i = n; i-- > 0;) {
		if (cd_backends[i]->destroy)
			cd_backends[i]->destroy(states[i]);
		states[i] = NULL;
	}
}

/* ---- child side: async-signal-safe only from here to the end of child_run ---- */

/* One message to the parent, with fd attached when fd >= 0. 0 or -errno. */
static int child_send(const struct child_ctx *c, const struct cd_child_report *r, int fd)
{
	return cd_send_fd(c->report_fd, r, sizeof(*r), fd);
}

static CD_NORETURN void child_fail(const struct child_ctx *c, int code, int err, const char *stage,
				   const char *step)
{
	cd_init_fail(c->report_fd, code, err, stage, step);
}

/* Every fd above 2 marked close-on-exec. */
static void child_fds_above_stdio(const struct child_ctx *c)
{
#ifdef HAVE_CLOSE_RANGE
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
#endif
	/* Older kernels: walking /proc/self/fd needs opendir (malloc), so
	 * visit every possible descriptor instead. */
	for (unsigned long fd = 3; fd < c->nofile && fd <= (unsigned long)INT32_MAX; fd++) {
		int fl = fcntl((int)fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			(void)fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
	}
}

static const char *backend_step(const struct cd_backend *b, struct cd_backend_state *s)
{
	return b->last_step ? b->last_step(s) : NULL;
}

/* Hand the parent a reference to our mount namespace (see struct cd_child). */
static void child_pin_mnt_ns(const struct child_ctx *c)
{
	int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		child_fail(c, CD_EXIT_SETUP, errno, PIN_STAGE, NULL);
	struct cd_child_report r;
	memset(&r, 0, sizeof(r));
	r.kind = CD_CHILD_MNT_NS;
	int e = child_send(c, &r, fd);
	close(fd);
	if (e < 0)
		child_fail(c, CD_EXIT_SETUP, -e, PIN_STAGE, NULL);
}

/* Hand the parent the relay's listening socket, made in our network namespace (netfence.h). */
static void child_send_relay(const struct child_ctx *c)
{
	const char *step = NULL;
	int fd = cd_netfence_listen(&step);
	if (fd < 0)
		child_fail(c, CD_EXIT_SETUP, -fd, "managed network relay", step);
	struct cd_child_report r;
	memset(&r, 0, sizeof(r));
	r.kind = CD_CHILD_RELAY;
	int e = child_send(c, &r, fd);
	close(fd);
	if (e < 0)
		child_fail(c, CD_EXIT_SETUP, -e, "managed network relay", "sending its socket");
}

static void child_apply(const struct child_ctx *c)
{
	bool nnp = false;
	for (size_t i = 0; cd_backends[i]; i++) {
		const struct cd_backend *b = cd_backends[i];
		/*
		 * no_new_privs goes after namespaces and capabilities (which may
		 * still use privileges to mount and drop) and before Landlock and
		 * seccomp, which need it when unprivileged.
		 */
		if (!nnp && b != &cd_backend_namespaces && b != &cd_backend_caps) {
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
				child_fail(c, CD_EXIT_SETUP, errno, "no_new_privs", NULL);
			nnp = true;
		}
		if (!b->apply)
			continue;
		int r = b->apply(c->states[i]);
		if (r < 0)
			child_fail(c, CD_EXIT_SETUP, -r, b->name, backend_step(b, c->states[i]));
		/* The user namespace's own limits, while its capabilities are ours. */
		if (b == &cd_backend_namespaces && c->limits) {
			r = cd_backend_limits.apply_in_userns(c->limits);
			if (r < 0)
				child_fail(c, CD_EXIT_SETUP, -r, cd_backend_limits.name,
					   backend_step(&cd_backend_limits, c->limits));
		}
		if (b == &cd_backend_namespaces && c->restore_affinity &&
		    sched_setaffinity(0, sizeof(c->affinity), &c->affinity) < 0)
			child_fail(c, CD_EXIT_SETUP, errno, "restoring the CPU affinity", NULL);
		if (b == &cd_backend_namespaces && c->pin_mnt_ns)
			child_pin_mnt_ns(c);
		/* With the namespace's capabilities still ours: lo goes up. */
		if (b == &cd_backend_namespaces && c->relay)
			child_send_relay(c);
	}
	if (!nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(c, CD_EXIT_SETUP, errno, "no_new_privs", NULL);
}

/* The socket's other end is closed: the parent is gone. */
static bool parent_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int n;
	do
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	return n < 0 || (p.revents & (POLLHUP | POLLERR));
}

/*
 * Execute o->init as pid 1 (see child_ctx.pid_init). The report socket is
 * the one descriptor that must survive it: the init hands it to the
 * command and closes its own copy.
 */
static CD_NORETURN void child_exec_init(const struct child_ctx *c)
{
	int fl = fcntl(c->report_fd, F_GETFD);
	if (fl < 0 || fcntl(c->report_fd, F_SETFD, fl & ~FD_CLOEXEC) < 0)
		child_fail(c, CD_EXIT_SETUP, errno, "exec the sandbox's init", "report socket");
	syscall(SYS_execveat, c->o->init->fd, "", c->init_argv, c->args.envp, AT_EMPTY_PATH);
	child_fail(c, CD_EXIT_SETUP, errno, "exec the sandbox's init", c->o->init->path);
}

/* Execute o->program (a program of cordon's own) instead of searching for argv[0]. */
static CD_NORETURN void child_exec_program(const struct child_ctx *c)
{
	syscall(SYS_execveat, c->o->program->fd, "", c->args.argv, c->args.envp, AT_EMPTY_PATH);
	int e = errno;
	child_fail(c, e == ENOENT ? CD_EXIT_NOT_FOUND : CD_EXIT_CANNOT_EXEC, e, "exec",
		   c->o->program->path);
}

/*
 * The report socket moved to fd 3 for an unsandboxed exec. The parent waits
 * for its end of file (close-on-exec: the exec went through) and the kernel
 * closes close-on-exec descriptors in ascending order, after the point of
 * no return: everything the child inherited from a busy server (three per
 * process: 18,000 for 6,000 processes, 15 to 45 ms to close here) is then
 * closed after the parent has moved on, not while it waits. The original
 * descriptor is closed, so that only fd 3 holds the socket. Returns the
 * descriptor to report on.
 */
static int child_low_report_fd(const struct child_ctx *c)
{
	if (c->report_fd == 3 || dup3(c->report_fd, 3, O_CLOEXEC) < 0)
		return c->report_fd;
	close(c->report_fd);
	return 3;
}

static CD_NORETURN void child_run(const struct child_ctx *c)
{
	const struct cd_spawn_opts *o = c->o;

	/* Shared with the parent under CLONE_VM: close our copy in our own fd table. */
	close(c->close_fd);

	cd_spawn_child_reset_signals();
	if (setsid() < 0)
		child_fail(c, CD_EXIT_SETUP, errno, "setsid", NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(c, CD_EXIT_SETUP, errno, "pdeathsig", NULL);
	/*
	 * The parent may have died before PDEATHSIG was armed. In a new pid
	 * namespace getppid() is 0 whatever happened (bubblewrap #633), so
	 * ask the error socket instead: the parent holds its other end.
	 */
	if (c->new_pid_ns ? parent_gone(c->report_fd) : getppid() != c->parent)
		_exit(CD_EXIT_SETUP);

	const char *stage;
	int r = cd_spawn_child_stdio(o, &stage);
	if (r < 0)
		child_fail(c, CD_EXIT_SETUP, -r, stage, NULL);
	child_fds_above_stdio(c);

	if (c->states)
		child_apply(c);
	/* The limits last: no setup step may trip over them (a low RLIMIT_NOFILE). */
	if (c->limits) {
		int lr = cd_backend_limits.apply(c->limits);
		if (lr < 0)
			child_fail(c, CD_EXIT_SETUP, -lr, cd_backend_limits.name,
				   backend_step(&cd_backend_limits, c->limits));
	}

	/* After the namespaces: the cwd must resolve in the new mount tree. */
	if (o->cwd && chdir(o->cwd) < 0)
		child_fail(c, CD_EXIT_SETUP, errno, "chdir", o->cwd);

	if (c->pid_init && o->init)
		child_exec_init(c);
	if (c->pid_init)
		cd_init_run(&c->args);
	if (o->program)
		child_exec_program(c);
	if (c->states)
		cd_init_exec(&c->args);
	struct cd_init_args args = c->args;
	args.report_fd = child_low_report_fd(c);
	cd_init_exec(&args);
}

/* ---- parent side ---- */

/* A backend's prepare failed: "<name>: <why>". Frees reterr. */
static void set_backend_error(struct cd_spawn_error *err, const struct cd_backend *b, int r,
			      char *reterr)
{
	const char *why = reterr ? reterr : strerror(-r);
	size_t nl = strlen(b->name);
	/* Backend messages may name the backend already. */
	if (strncmp(why, b->name, nl) == 0 && why[nl] == ':')
		cd_spawn_set_error(err, CD_EXIT_SETUP, "%s", why);
	else
		cd_spawn_set_error(err, CD_EXIT_SETUP, "%s: %s", b->name, why);
	free(reterr);
}

static int prepare_backends(const struct cd_linux_plan *lp, struct cd_backend_state **states,
			    struct cd_spawn_error *err)
{
	for (size_t i = 0; cd_backends[i]; i++) {
		const struct cd_backend *b = cd_backends[i];
		char *reterr = NULL;
		int r = b->prepare ? b->prepare(lp, &states[i], &reterr) : 0;
		if (r < 0) {
			set_backend_error(err, b, r, reterr);
			destroy_states(states, i);
			return r;
		}
		free(reterr);
	}
	return 0;
}

/* One backend's prepare_host; -errno with *err set. */
static int prepare_host_one(const struct cd_backend *b, struct cd_backend_state *state, int fd,
			    struct cd_spawn_error *err)
{
	char *reterr = NULL;
	int r = b->prepare_host(state, fd, &reterr);
	if (r < 0)
		set_backend_error(err, b, r, reterr);
	else
		free(reterr);
	return r;
}

/*
 * The host-side halves (backend.h: prepare_host). When the child is a fork
 * (forked), each backend may defer its half until the child exists; the
 * deferred ones are marked in *ret_deferred (bit i for cd_backends[i]) and
 * the others run now. 0, or -errno with *err set.
 */
static int prepare_host_now(struct cd_backend_state **states, bool forked, int child_fd,
			    uint32_t *ret_deferred, struct cd_spawn_error *err)
{
	*ret_deferred = 0;
	for (size_t i = 0; cd_backends[i]; i++) {
		const struct cd_backend *b = cd_backends[i];
		if (!b->prepare_host || !states[i])
			continue;
		if (forked && i < 32 && b->defer_host && b->defer_host(states[i], child_fd)) {
			*ret_deferred |= 1u << i;
			continue;
		}
		int r = prepare_host_one(b, states[i], -1, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The deferred halves, in the parent while the child builds its namespaces. */
static int prepare_host_deferred(struct cd_backend_state **states, uint32_t deferred, int parent_fd,
				 struct cd_spawn_error *err)
{
	for (size_t i = 0; cd_backends[i] && i < 32; i++) {
		const struct cd_backend *b = cd_backends[i];
		if (!(deferred & (1u << i)))
			continue;
		int r = prepare_host_one(b, states[i], parent_fd, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Namespace flags the backends want created by clone() itself (see backend.h). */
static unsigned long backend_clone_flags(struct cd_backend_state **states)
{
	unsigned long flags = 0;
	for (size_t i = 0; cd_backends[i]; i++)
		if (cd_backends[i]->clone_flags && states[i])
			flags |= cd_backends[i]->clone_flags(states[i]);
	return flags;
}

/* clone3's arguments, up to the cgroup (Linux 5.7: CLONE_ARGS_SIZE_VER2). */
struct clone3_args {
	uint64_t flags;
	uint64_t pidfd;
	uint64_t child_tid;
	uint64_t parent_tid;
	uint64_t exit_signal;
	uint64_t stack;
	uint64_t stack_size;
	uint64_t tls;
	uint64_t set_tid;
	uint64_t set_tid_size;
	uint64_t cgroup;
};

/*
 * fork(), with namespaces: the child goes on here, on a copy of our stack
 * and memory. For the init of a pid namespace (it never exec's, so the
 * parent cannot wait for that as CLONE_VFORK does), and in sanitizer builds
 * (ASan does not follow a switch to a foreign stack). With a cgroup, clone3
 * puts the child in it as it is made (CLONE_INTO_CGROUP), which spares the
 * migration a write to cgroup.procs would be.
 */
static pid_t fork_child(struct child_ctx *ctx)
{
	unsigned long flags = 0;
	long pid;
	if (ctx->states)
		flags |= backend_clone_flags(ctx->states);
	if (ctx->cgroup_fd >= 0) {
		struct clone3_args args = {
			.flags = flags | CLONE_INTO_CGROUP,
			.exit_signal = SIGCHLD,
			.cgroup = (uint64_t)ctx->cgroup_fd,
		};
		pid = syscall(SYS_clone3, &args, sizeof(args));
	} else {
#if defined(__s390__) || defined(__CRIS__)
		/* These take the stack first (see clone(2), "C library/kernel differences"). */
		pid = syscall(SYS_clone, NULL, flags | SIGCHLD, NULL, NULL, 0L);
#else
		pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0L);
#endif
	}
	if (pid == 0)
		child_run(ctx);
	return (pid_t)pid;
}

/*
 * Let the child build its namespaces on another CPU while we make the mask
 * mount points (a deferred prepare_host): the scheduler puts a new child on
 * its parent's CPU and, for work this short, moves neither before the
 * parent sleeps, so the two would otherwise take turns. The child's allowed
 * CPUs become ours minus the one we run on; it restores its own mask right
 * after the namespaces backend, before anything the command inherits.
 * Best effort: when this fails, the child simply shares our CPU.
 *
 * On a 2-CPU machine, workspace-write: 2.33 -> 2.22 ms when idle. Only
 * when nothing else is runnable: pinned to a busy CPU, the child waited for
 * the other task's time slices (5.8 ms instead of 2.5 with one CPU hog).
 */
/*
 * Runnable tasks right now, from /proc/loadavg ("0.00 0.01 0.05 2/150 99":
 * the 2), or -1.
 */
static int runnable_now(void)
{
	char buf[128];
	int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = buf;
	for (int field = 0; field < 3; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -1;
		p++;
	}
	return (int)strtol(p, NULL, 10);
}

static void run_elsewhere(pid_t pid, const cpu_set_t *affinity)
{
	/*
	 * Only onto an idle CPU: on a busy one the child would wait for
	 * another task's time slice, milliseconds. Right after clone, us and
	 * the child are two runnable tasks; a third means a CPU is taken.
	 */
	int runnable = runnable_now();
	if (runnable < 0 || runnable > 2)
		return;
	int cpu = sched_getcpu();
	if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, affinity))
		return;
	cpu_set_t others = *affinity;
	CPU_CLR(cpu, &others);
	(void)sched_setaffinity(pid, sizeof(others), &others);
}

/* Reap a child that failed before exec, and end what it left in its pid namespace. */
static void reap_failed(struct cd_child *c, pid_t pid)
{
	int status;
	cd_spawn_wait_pid(pid, &status);
	c->waited = true;
	if (c->kill_tree) {
		kill_tree(pid);
		c->tree_killed = true;
	}
}

/*
 * clone3 with CLONE_VM on a stack of our own needs a few instructions the C
 * library does not offer (it has no clone3 wrapper): the child starts on
 * the new stack, where no C frame could return. cd_clone3_vm(args, size,
 * fn, arg) returns what the system call returns (the pid, or -errno) in the
 * parent, and runs fn(arg) then exit(2) in the child. Elsewhere, a sandbox
 * with a cgroup is created with fork semantics instead.
 */
#if !defined(CD_SANITIZERS) && (defined(__x86_64__) || defined(__aarch64__))
#define HAVE_CLONE3_VM 1
long cd_clone3_vm(struct clone3_args *args, size_t size, int (*fn)(void *), void *arg)
	__attribute__((visibility("hidden")));
#if defined(__x86_64__)
/* rdi args, rsi size, rdx fn, rcx arg; r8 and r9 survive the system call. */
__asm__(".pushsection .text\n"
	".globl cd_clone3_vm\n"
	".hidden cd_clone3_vm\n"
	".type cd_clone3_vm,@function\n"
	"cd_clone3_vm:\n"
	"	mov %rdx, %r8\n"
	"	mov %rcx, %r9\n"
	"	mov $435, %eax\n" /* SYS_clone3 */
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jnz 1f\n"
	"	xor %ebp, %ebp\n" /* the child: a fresh stack, no frame below */
	"	mov %r9, %rdi\n"
	"	call *%r8\n"
	"	mov %eax, %edi\n"
	"	mov $60, %eax\n" /* SYS_exit */
	"	syscall\n"
	"	hlt\n"
	"1:	ret\n"
	".size cd_clone3_vm, .-cd_clone3_vm\n"
	".popsection\n");
#else
/* x0 args, x1 size, x2 fn, x3 arg: every register but x0 survives the system call. */
__asm__(".pushsection .text\n"
	".globl cd_clone3_vm\n"
	".hidden cd_clone3_vm\n"
	".type cd_clone3_vm,%function\n"
	"cd_clone3_vm:\n"
	"	mov x8, #435\n" /* SYS_clone3 */
	"	svc #0\n"
	"	cbnz x0, 1f\n"
	"	mov x29, xzr\n" /* the child: a fresh stack, no frame below */
	"	mov x30, xzr\n"
	"	mov x0, x3\n"
	"	blr x2\n"
	"	mov x8, #93\n" /* SYS_exit */
	"	svc #0\n"
	"	brk #0\n"
	"1:	ret\n"
	".size cd_clone3_vm, .-cd_clone3_vm\n"
	".popsection\n");
#endif
#endif

/*
 * Whether create_child makes the child with fork semantics (its own copy
 * of memory). Decided once per spawn (child_ctx.forked): the deferred
 * prepare_host depends on it.
 */
static bool child_is_fork(const struct child_ctx *ctx)
{
#ifdef CD_SANITIZERS
	return true;
#else
#ifndef HAVE_CLONE3_VM
	if (ctx->cgroup_fd >= 0)
		return true;
#endif
	return ctx->pid_init && !ctx->o->init;
#endif
}

#ifdef CD_SANITIZERS
static pid_t create_child(struct child_ctx *ctx)
{
	return fork_child(ctx);
}
#else
static int child_entry(void *arg)
{
	child_run(arg);
}

/*
 * The child is created like posix_spawn does it: CLONE_VM|CLONE_VFORK on a
 * stack of its own. No page tables are copied (about 0.1 ms less than fork
 * here), and the parent sleeps until the child has exec'ed or exited, so
 * the child may use the parent's memory as its own read-only context. It
 * must not allocate (it never does: see child_ctx). The stack is static:
 * cd_spawn is not reentrant, and the parent is suspended while it is used.
 * Namespaces come from clone() itself: the kernel refuses
 * unshare(CLONE_NEWUSER) to a process that shares its memory.
 */
static pid_t create_child(struct child_ctx *ctx)
{
	if (ctx->forked)
		return fork_child(ctx);
	/* Sized for the backends' apply paths; the child never recurses. */
	static char stack[256 * 1024] __attribute__((aligned(64)));
	unsigned long flags = CLONE_VM | CLONE_VFORK;
	if (ctx->states)
		flags |= backend_clone_flags(ctx->states);
#ifdef HAVE_CLONE3_VM
	if (ctx->cgroup_fd >= 0) {
		struct clone3_args args = {
			.flags = flags | CLONE_INTO_CGROUP,
			.exit_signal = SIGCHLD,
			.stack = (uint64_t)(uintptr_t)stack,
			.stack_size = sizeof(stack),
			.cgroup = (uint64_t)ctx->cgroup_fd,
		};
		long pid = cd_clone3_vm(&args, sizeof(args), child_entry, ctx);
		if (pid < 0) {
			errno = (int)-pid;
			return -1;
		}
		return (pid_t)pid;
	}
#endif
	return clone(child_entry, stack + sizeof(stack), (int)(flags | SIGCHLD), ctx);
}
#endif

/* What the child said before it exec'ed or exited. */
struct child_replies {
	bool failed;   /* report holds its CD_CHILD_FAILED message */
	bool garbled;  /* a message that is none of ours */
	int recv_err;  /* recvmsg failed with this errno before the end */
	int mnt_ns_fd; /* from CD_CHILD_MNT_NS, or -1 */
	int relay_fd;  /* from CD_CHILD_RELAY, or -1 */
	struct cd_child_report report;
};

/* Read the error socket to its end (every write end closed: exec or exit). */
static void read_replies(int sock, struct child_replies *out)
{
	bool reset_seen = false;
	memset(out, 0, sizeof(*out));
	out->mnt_ns_fd = -1;
	out->relay_fd = -1;
	/* For the tests: a report that cannot be read (see cd_spawn). */
	if (cd_linux_test_disabled("spawn-report")) {
		out->recv_err = EIO;
		return;
	}
	for (;;) {
		struct cd_child_report m;
		int fd, flags = 0;
		ssize_t n = cd_recv_fd(sock, &m, sizeof(m), 0, &fd, &flags);
		if (n == -ECONNRESET && !reset_seen) {
			/*
			 * The child exited without reading what a deferred
			 * prepare_host sent it (it failed first). The kernel says
			 * so once, ahead of the messages the child sent: read on.
			 */
			reset_seen = true;
			continue;
		}
		if (n < 0) {
			out->recv_err = (int)-n;
			return;
		}
		if (n == 0)
			return;
		bool whole = (size_t)n == sizeof(m) && !(flags & (MSG_TRUNC | MSG_CTRUNC));
		if (whole && m.kind == CD_CHILD_MNT_NS && fd >= 0 && out->mnt_ns_fd < 0) {
			out->mnt_ns_fd = fd;
			continue;
		}
		if (whole && m.kind == CD_CHILD_RELAY && fd >= 0 && out->relay_fd < 0) {
			out->relay_fd = fd;
			continue;
		}
		if (fd >= 0)
			close(fd);
		if (whole && m.kind == CD_CHILD_FAILED && !out->failed) {
			out->report = m;
			out->failed = true;
		} else {
			out->garbled = true;
		}
	}
}

/*
 * Keep the child's mount namespace (see struct cd_child). 0, or -errno when
 * the fd does not name a namespace we can use. A namespace that turns out
 * to be ours is not kept: there is nothing to kill by it.
 */
static int keep_mnt_ns(struct cd_child *c, int fd)
{
	struct stat st, own;
	if (fstat(fd, &st) < 0 || stat("/proc/self/ns/mnt", &own) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (st.st_dev == own.st_dev && st.st_ino == own.st_ino) {
		close(fd);
		return 0;
	}
	c->mnt_ns_fd = fd;
	c->mnt_ns_ino = st.st_ino;
	return 0;
}

static void drop_mnt_ns(struct cd_child *c)
{
	if (c->mnt_ns_fd >= 0)
		close(c->mnt_ns_fd);
	c->mnt_ns_fd = -1;
}

int cd_spawn(const struct cd_spawn_opts *o, struct cd_child **ret, struct cd_spawn_error *err)
{
	/* Linux's limits are the plan's (lp->limits), enforced with cgroups where rlimits fall short. */
	if (o->rlimits && cd_limits_any(o->rlimits)) {
		cd_spawn_set_error(
			err, CD_EXIT_SETUP,
			"resource limits on Linux go through the sandbox plan, not as bare "
			"rlimits: not run");
		return -EINVAL;
	}
	size_t n = n_backends();
	bool sandboxed = o->lp && o->lp->sandboxed;
	struct cd_child *c = cd_xcalloc(1, sizeof(*c));
	c->pid = -1;
	c->pidfd = -1;
	c->mnt_ns_fd = -1;
	c->proxy_pin = -1;
	c->n_states = n;
	c->states = cd_xcalloc(n ? n : 1, sizeof(*c->states));
	c->kill_tree = o->kill_tree;
	c->finished = !sandboxed;

	if (sandboxed) {
		int r = prepare_backends(o->lp, c->states, err);
		if (r < 0) {
			c->finished = true;
			cd_child_free(c);
			return r;
		}
	}
	/* The limits, sandbox or not: the cgroup is made here, after the rest is ready. */
	if (o->lp && o->lp->limits) {
		char *reterr = NULL;
		int r = cd_backend_limits.prepare(o->lp, &c->limits, &reterr);
		if (r < 0) {
			set_backend_error(err, &cd_backend_limits, r, reterr);
			cd_child_free(c);
			return r;
		}
		free(reterr);
	}

	size_t argc = cd_strv_length(o->argv);
	cleanup_free char **argv = NULL;
	if (o->arg0) {
		argv = cd_xcalloc(argc + 1, sizeof(*argv));
		memcpy(argv, o->argv, argc * sizeof(*argv));
		argv[0] = (char *)o->arg0;
	}

	bool pid_ns = sandboxed && o->lp->pid_ns;
	struct child_ctx ctx = {
		.o = o,
		.states = sandboxed ? c->states : NULL,
		.limits = c->limits,
		.cgroup_fd = c->limits ? cd_backend_limits.clone_cgroup(c->limits, false) : -1,
		.parent = getpid(),
		.nofile = 1024,
		/*
		 * With kill_tree the subreaper finds every process left, and
		 * with a pid namespace the kernel ends it with its pid 1: no
		 * scan, no pin.
		 */
		.pin_mnt_ns = sandboxed && o->lp->mount_ns && !o->kill_tree && !pid_ns,
		.new_pid_ns = pid_ns,
		.relay = sandboxed && o->lp->net_managed,
		.pid_init = pid_ns && !o->pid1,
		.args = {
			.argv = argv ? argv : o->argv,
			.envp = o->envp,
			.file = o->argv[0],
			.path = strchr(o->argv[0], '/') ? NULL : cd_spawn_env_path(o->envp),
			.tty = o->tty,
		},
	};
	/*
	 * A unix proxy socket is pinned by its inode now, before the command
	 * exists: the command may be able to write where the socket's name
	 * is, and rename another socket (another sandbox's proxy) onto it.
	 */
	if (ctx.relay && o->lp->proxy.is_unix) {
		int r = cd_relay_pin(&o->lp->proxy);
		if (r < 0) {
			cd_spawn_set_error(
				err, CD_EXIT_SETUP,
				"managed network relay: cannot pin the proxy socket %s (a "
				"listening "
				"unix socket, reached through /proc/self/fd): %s",
				o->lp->proxy.path, strerror(-r));
			cd_child_free(c);
			return r;
		}
		c->proxy_pin = r;
	}
	/* For the close-on-exec fallback when close_range is missing at run time. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		ctx.nofile = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;

	/*
	 * A socket rather than a pipe: the namespace fd travels over it, and
	 * the child has an fd table of its own (no CLONE_FILES), so it cannot
	 * just leave the fd there for us.
	 */
	int pfd[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pfd) < 0) {
		int e = errno;
		cd_spawn_set_error(err, CD_EXIT_SETUP, "error socket: %s", strerror(e));
		cd_child_free(c);
		return -e;
	}
	ctx.report_fd = pfd[1];
	ctx.args.report_fd = pfd[1];
	cleanup_free char **init_argv = NULL;
	if (ctx.pid_init && o->init) {
		/* cordon-init's arguments (init/init.h): built here, the child must not allocate. */
		init_argv = cd_xcalloc(CD_INIT_ARGS + argc + 1, sizeof(*init_argv));
		snprintf(ctx.init_fd, sizeof(ctx.init_fd), "%d", pfd[1]);
		snprintf(ctx.init_flags, sizeof(ctx.init_flags), "-%s%s", o->tty ? "t" : "",
			 ctx.args.path ? "p" : "");
		init_argv[0] = (char *)CD_INIT_PROGRAM;
		init_argv[1] = (char *)CD_INIT_MAGIC;
		init_argv[2] = ctx.init_fd;
		init_argv[3] = ctx.init_flags;
		init_argv[4] = (char *)ctx.args.file;
		init_argv[5] = (char *)(ctx.args.path ? ctx.args.path : "-");
		memcpy(init_argv + CD_INIT_ARGS, ctx.args.argv, argc * sizeof(*init_argv));
		ctx.init_argv = init_argv;
	}

	ctx.forked = child_is_fork(&ctx);
	uint32_t deferred = 0;
	if (sandboxed) {
		int r = prepare_host_now(c->states, ctx.forked, pfd[1], &deferred, err);
		if (r < 0) {
			close(pfd[0]);
			close(pfd[1]);
			cd_child_free(c);
			return r;
		}
	}

	/* The child restores it (run_elsewhere): read it before the child exists. */
	if (deferred && sched_getaffinity(0, sizeof(ctx.affinity), &ctx.affinity) == 0 &&
	    CPU_COUNT(&ctx.affinity) > 1)
		ctx.restore_affinity = true;

	/*
	 * Block every signal across fork: the child must not run the parent's
	 * forwarding handlers before it has reset them.
	 */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	ctx.close_fd = pfd[0];
	/* For the tests: a host without clone3 (CORDON_TEST_DISABLE=clone3). */
	bool no_clone3 = ctx.cgroup_fd >= 0 && cd_linux_test_disabled("clone3");
	pid_t pid = no_clone3 ? -1 : create_child(&ctx);
	int fork_errno = no_clone3 ? ENOSYS : errno;
	if (pid < 0 && ctx.cgroup_fd >= 0) {
		/*
		 * No clone3 (ENOSYS: before Linux 5.3, or a container's seccomp
		 * profile), one without CLONE_INTO_CGROUP (E2BIG: before 5.7), or
		 * the cgroup refused: the child is made the old way and moves
		 * itself in, which also says which it was.
		 */
		(void)cd_backend_limits.clone_cgroup(c->limits, true);
		ctx.cgroup_fd = -1;
		pid = create_child(&ctx);
		fork_errno = errno;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		bool ns = sandboxed && (o->lp->user_ns || o->lp->mount_ns || o->lp->pid_ns);
		cd_spawn_set_error(err, CD_EXIT_SETUP, "%s: %s",
				   ns ? "creating the sandbox's namespaces" : "fork",
				   strerror(fork_errno));
		if (err && ns && fork_errno != EAGAIN && fork_errno != ENOMEM)
			err->namespaces = true;
		cd_child_free(c);
		return -fork_errno;
	}
	c->pid = pid;
	c->finished = !sandboxed;

	if (deferred) {
		if (ctx.restore_affinity)
			run_elsewhere(pid, &ctx.affinity);
		int r = prepare_host_deferred(c->states, deferred, pfd[0], err);
		if (r < 0) {
			/* The child waits for what it will now never get: it goes first. */
			(void)kill(pid, SIGKILL);
			close(pfd[0]);
			reap_failed(c, pid);
			cd_child_free(c);
			return r;
		}
	}

	struct child_replies rp;
	read_replies(pfd[0], &rp);
	close(pfd[0]);

	/*
	 * Without the namespace pinned, what the command leaves behind could
	 * not be killed safely when it exits: refuse to run it at all.
	 */
	int pin_err = 0;
	if (rp.mnt_ns_fd >= 0 && rp.failed)
		close(rp.mnt_ns_fd);
	else if (rp.mnt_ns_fd >= 0)
		pin_err = -keep_mnt_ns(c, rp.mnt_ns_fd);
	else if (!rp.failed && !rp.garbled && ctx.pin_mnt_ns)
		pin_err = rp.recv_err ? rp.recv_err : ENOMSG;
	/*
	 * The report could not be read to its end: the child may have
	 * failed (and said why) or exec'ed, and there is no telling which.
	 * Fail closed: it goes, and the caller learns why, rather than a
	 * bare exit status 125 from a failure nobody heard of.
	 */
	int lost_err = !rp.failed && !pin_err ? rp.recv_err : 0;

	/*
	 * Managed network: the relay is the sandbox's only way out, and it
	 * starts now (connections made meanwhile wait in the listening
	 * socket's queue). Without it the command would run with no network
	 * at all, which is not what was asked: refuse instead.
	 */
	int relay_err = 0;
	if (rp.relay_fd >= 0 && (rp.failed || rp.garbled || pin_err || lost_err)) {
		close(rp.relay_fd);
	} else if (rp.relay_fd >= 0) {
		pid_t rpid = cd_relay_start(rp.relay_fd, &o->lp->proxy, c->proxy_pin);
		c->proxy_pin = -1;
		if (rpid < 0)
			relay_err = (int)-rpid;
		else
			c->relay_pid = rpid;
	} else if (ctx.relay && !rp.failed && !rp.garbled && !pin_err && !lost_err) {
		relay_err = rp.recv_err ? rp.recv_err : ENOMSG;
	}

	if (!rp.failed && !rp.garbled && !pin_err && !lost_err && !relay_err) {
		*ret = c;
		return 0;
	}

	/*
	 * The child failed before exec and has exited (or is about to). When
	 * it did not say so, it may have exec'ed: it and its group go, before
	 * the finish hooks. It has not been reaped, so its pid is still its.
	 */
	if (!rp.failed) {
		(void)kill(-pid, SIGKILL);
		(void)kill(pid, SIGKILL);
	}
	reap_failed(c, pid);
	/* Unless it said it failed, cd_child_free kills what it may have left in its namespace. */
	struct cd_child_report rep = rp.report;
	if (!rp.failed) {
		memset(&rep, 0, sizeof(rep));
		rep.exit_code = CD_EXIT_SETUP;
		if (pin_err) {
			rep.err = pin_err;
			cd_spawn_copy_stage(rep.stage, sizeof(rep.stage), PIN_STAGE, NULL);
		} else if (relay_err) {
			rep.err = relay_err;
			cd_spawn_copy_stage(rep.stage, sizeof(rep.stage), "managed network relay",
					    "starting it");
		} else if (lost_err) {
			rep.err = lost_err;
			cd_spawn_copy_stage(rep.stage, sizeof(rep.stage), "child setup",
					    "reading its report");
		} else {
			rep.err = EPIPE;
			cd_spawn_copy_stage(rep.stage, sizeof(rep.stage), "child setup",
					    "truncated report");
		}
	}
	if (err)
		cd_spawn_format_error(err, o->argv[0], &rep);
	cd_child_free(c);
	return -(rep.err > 0 ? rep.err : EIO);
}

pid_t cd_child_pid(const struct cd_child *c)
{
	return c->pid;
}

int cd_child_pidfd(struct cd_child *c)
{
	/*
	 * Opened on first use (cordon run never needs it): the pid names our
	 * child until we reap it, and only cd_child_wait reaps it.
	 */
#ifdef HAVE_PIDFD_OPEN
	if (c->pidfd < 0 && !c->waited && !c->pidfd_tried) {
		c->pidfd_tried = true;
		c->pidfd = pidfd_open(c->pid, 0);
		if (c->pidfd >= 0)
			(void)fcntl(c->pidfd, F_SETFD, FD_CLOEXEC);
	}
#endif
	return c->pidfd;
}

static bool is_pid_name(const char *s)
{
	if (*s < '1' || *s > '9')
		return false;
	while (*++s)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/*
 * The namespace link's text, "mnt:[<inode>]", for the comparisons: a
 * readlink of /proc/<pid>/ns/mnt costs half a stat of it (stat makes the
 * kernel set up an nsfs dentry and inode each time; readlink only formats
 * the number). nsfs is one superblock, so the inode number alone names the
 * namespace.
 */
struct ns_link {
	char text[48];
	size_t len;
};

static void ns_link_init(struct ns_link *l, ino_t ino)
{
	int n = snprintf(l->text, sizeof(l->text), "mnt:[%llu]", (unsigned long long)ino);
	l->len = n > 0 && (size_t)n < sizeof(l->text) ? (size_t)n : 0;
}

/* 1: the link at dirfd/path names the namespace, 0: another, -errno: cannot tell. */
static int link_is(int dirfd, const char *path, const struct ns_link *l)
{
	char buf[sizeof(l->text)];
	ssize_t n = readlinkat(dirfd, path, buf, sizeof(buf));
	if (n < 0)
		return -errno;
	return (size_t)n == l->len && memcmp(buf, l->text, l->len) == 0;
}

/*
 * A thread group whose leader has exited while other threads live on: the
 * leader (a zombie) has no namespaces any more, so /proc/<pid>/ns/mnt is
 * ENOENT, but its threads are still running in the namespace.
 */
static bool threads_in_ns(int piddir, const struct ns_link *l)
{
	int fd = openat(piddir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	bool found = false;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		char path[sizeof(de->d_name) + 8];
		if (!is_pid_name(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/ns/mnt", de->d_name);
		found = link_is(dirfd(d), path, l) == 1;
	}
	closedir(d);
	return found;
}

/*
 * SIGKILL the process of an open /proc/<pid> directory. The directory is
 * used as a pidfd: no pid reuse race, and right even when /proc belongs to
 * another pid namespace than ours (the server as pid 1 of its own whose
 * /proc could not be remounted), where the number in the name is not a pid
 * kill() would understand.
 */
static int kill_piddir(int piddir, const char *name, bool proc_is_ours)
{
#ifdef SYS_pidfd_send_signal
	if (syscall(SYS_pidfd_send_signal, piddir, SIGKILL, NULL, 0) == 0)
		return 0;
	if (errno != ENOSYS && errno != EBADF && errno != EINVAL)
		return errno == ESRCH ? 0 : -errno;
#else
	(void)piddir;
#endif
	if (!proc_is_ours)
		return -ENOSYS;
	if (kill((pid_t)strtol(name, NULL, 10), SIGKILL) < 0 && errno != ESRCH)
		return -errno;
	return 0;
}

/* Whether /proc numbers processes as our pid namespace does. */
static bool proc_is_ours(int procfd)
{
	char buf[32];
	ssize_t n = readlinkat(procfd, "self", buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strtol(buf, NULL, 10) == (long)getpid();
}

/*
 * One pass over /proc: SIGKILL every process in the mount namespace l.
 * Returns how many were signalled (killed or already dying), or -errno
 * when /proc cannot be read; *kill_err keeps the first failed kill.
 */
static int kill_ns_round(const struct ns_link *l, bool *checked_proc, bool *ours, int *kill_err)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	int procfd = dirfd(d);
	if (!*checked_proc) {
		*ours = proc_is_ours(procfd);
		*checked_proc = true;
	}
	int found = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char path[sizeof(de->d_name) + 8];
		if ((de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) || !is_pid_name(de->d_name))
			continue;
		/* The common case (another namespace) costs one readlink. */
		snprintf(path, sizeof(path), "%s/ns/mnt", de->d_name);
		int in = link_is(procfd, path, l);
		/* EACCES or the like: not ours to kill. ENOENT: gone, or a zombie leader. */
		if (in == 0 || (in < 0 && in != -ENOENT))
			continue;
		int piddir = openat(procfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (piddir < 0)
			continue;
		/* Checked again through the directory: the pid may have been reused. */
		in = link_is(piddir, "ns/mnt", l);
		if (in == 1 || (in == -ENOENT && threads_in_ns(piddir, l))) {
			int k = kill_piddir(piddir, de->d_name, *ours);
			if (k == 0)
				found++;
			else if (!*kill_err)
				*kill_err = k;
		}
		close(piddir);
	}
	closedir(d);
	return found;
}

int cd_child_kill_namespace(struct cd_child *c)
{
	if (!c || c->mnt_ns_fd < 0)
		return 0;
	struct ns_link l;
	ns_link_init(&l, c->mnt_ns_ino);
	bool checked = false, ours = false;
	int kill_err = 0;
	for (unsigned round = 0; round < KILL_NS_ROUNDS; round++) {
		int n = kill_ns_round(&l, &checked, &ours, &kill_err);
		if (n < 0)
			return n;
		if (n == 0)
			return kill_err;
		/*
		 * Killed processes stay in the namespace until they have
		 * released their memory and files: after two quick passes, give
		 * them a millisecond rather than spin on /proc.
		 */
		if (round >= 1)
			nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
	}
	return -EBUSY;
}

/* The limits' finish: cgroup.kill, its events read, the cgroup removed. Once. */
static void finish_limits(struct cd_child *c)
{
	if (!c->limits || c->limits_finished)
		return;
	c->limits_finished = true;
	cd_backend_limits.finish(c->limits);
	const char *w = cd_backend_limits.warning(c->limits);
	if (w)
		cd_log_warn("%s", w);
}

static void run_finish(struct cd_child *c)
{
	/*
	 * The sandbox's cgroup first: cgroup.kill ends everything left in it
	 * at once, wherever it went (a daemon out of the command's group, a
	 * process of an unsandboxed command), before the masks go.
	 */
	finish_limits(c);
	if (c->finished)
		return;
	c->finished = true;
	/*
	 * Before the finish hooks remove the mask mount points: that would
	 * detach the masks in the namespace of whatever still runs there (a
	 * daemon that left the command's process group), which could then
	 * create the names they hid. With kill_tree, the subreaper already
	 * killed and reaped every descendant: no /proc scan needed.
	 */
	if (!c->tree_killed) {
		int r = cd_child_kill_namespace(c);
		if (r == 0)
			/*
			 * Nothing runs in the namespace any more: let it go
			 * before the finish hooks unlink the mask mount points,
			 * or each unlink would detach a mount in it, and every
			 * detach waits for an RCU grace period.
			 */
			drop_mnt_ns(c);
		if (r < 0) {
			/*
			 * Something may still run in the namespace: removing the
			 * mask mount points would unmask the protected names for
			 * it. Leave them; a later run adopts and removes them.
			 */
			cd_log_warn("cannot kill what is left of sandboxed process %d: %s; "
				    "leaving its mask directories in place",
				    (int)c->pid, strerror(-r));
			abandon_states(c->states, c->n_states);
		}
	}
	finish_states(c->states, c->n_states);
	drop_mnt_ns(c);
}

/* Read all of /proc/self/task/<tid>/children (it is longer than a page with many children). */
static char *read_children(void)
{
	int fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return NULL;
	size_t cap = 4096, len = 0;
	char *buf = cd_xmalloc(cap);
	for (;;) {
		if (cap - len < 1024)
			buf = cd_xrealloc(buf, cap *= 2);
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

/* PID_MAX_LIMIT on 64-bit: no pid is larger. */
#define PID_LIMIT (4 * 1024 * 1024)

/*
 * Kill and reap every remaining descendant: kill_tree sends the command's
 * process group a SIGKILL, then cd_kill_children loops. Orphans of the command are
 * re-parented to us (the caller made us a child subreaper), so repeatedly
 * killing our direct children reaches the whole tree: a killed process
 * cannot fork any more, and its children come to us in turn. Each round
 * kills the children listed now that were not killed yet, then reaps every
 * child that is already dead, blocking for one only when none was: killing
 * every listed child again per reaped child is quadratic (893,530 kill
 * calls for 1,500 children). A child stays listed until it is reaped, and
 * its pid cannot be reused before that, so "killed" is remembered by pid
 * (a byte per pid, 4 MiB of mostly untouched zero pages, only when there are
 * children) and forgotten when the pid is reaped. Ends when waitpid says
 * there is no child left, or when only children we may not signal are left
 * (a setuid root program an unsandboxed command ran): waiting for those
 * could take forever.
 */
static void kill_tree(pid_t group)
{
	int st;
	/*
	 * No child left at all (the common case): then no descendant is left
	 * either, since every orphan comes to us, and so nobody is left in the
	 * group, which only the command's descendants can be in.
	 */
	if (waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD)
		return;
	(void)kill(-group, SIGKILL);
	cd_kill_children();
}

void cd_kill_children(void)
{
	/* Per pid: bit 0 killed, bit 1 cannot be killed (EPERM: a setuid root program). */
	unsigned char *state = NULL;
	for (;;) {
		char *list = read_children();
		bool killable = false;
		for (char *p = list, *end; p && *p; p = end) {
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			if (pid <= 0 || pid >= PID_LIMIT)
				continue;
			if (!state)
				state = cd_xcalloc(PID_LIMIT, 1);
			if (state[pid] & 2)
				continue;
			killable = true;
			if (state[pid] & 1)
				continue;
			state[pid] |= 1;
			if (kill((pid_t)pid, SIGKILL) < 0 && errno == EPERM)
				state[pid] |= 2;
		}
		free(list);
		int status;
		bool reaped = false;
		pid_t r;
		for (;;) {
			/* Block only while a killed child is still to come. */
			r = waitpid(-1, &status, reaped || !killable ? WNOHANG : 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			reaped = true;
			if (state && r < PID_LIMIT)
				state[r] = 0;
		}
		if (r < 0)
			break; /* ECHILD: the tree is gone */
		/*
		 * Only children we may not kill are left (their exit would wake
		 * us, but nothing says when): leave them rather than hang.
		 */
		if (!reaped && !killable) {
			cd_log_warn("leaving processes that cannot be killed (not permitted: "
				    "setuid programs that became another user)");
			break;
		}
	}
	free(state);
}

static void stop_relay(struct cd_child *c)
{
	if (c->relay_pid > 0)
		cd_relay_stop(c->relay_pid);
	c->relay_pid = 0;
}

int cd_child_wait(struct cd_child *c)
{
	int status = 0;
	if (cd_spawn_wait_pid(c->pid, &status) < 0) {
		/*
		 * No status (a caller that ignores SIGCHLD): whatever the
		 * sandbox left may still run. Kill it all when we can; the
		 * finish hooks then see whether the namespace is empty.
		 */
		stop_relay(c);
		if (c->kill_tree) {
			cd_kill_children();
			c->tree_killed = true;
		}
		run_finish(c);
		return CD_EXIT_SETUP;
	}
	c->waited = true;
	/* Not reaped by kill_tree below: its pid stays ours until this reaps it. */
	stop_relay(c);
	/* Before finish: a survivor must not outlive the masks that confine it. */
	if (c->kill_tree) {
		kill_tree(c->pid);
		c->tree_killed = true;
	}
	run_finish(c);
	return cd_exit_code_from_status(status);
}

struct cd_child *cd_child_free(struct cd_child *c)
{
	if (!c)
		return NULL;
	stop_relay(c);
	if (c->proxy_pin >= 0)
		close(c->proxy_pin);
	run_finish(c);
	drop_mnt_ns(c);
	if (c->pidfd >= 0)
		close(c->pidfd);
	destroy_states(c->states, c->n_states);
	free(c->states);
	cd_backend_limits.destroy(c->limits);
	free(c);
	return NULL;
}

int cd_child_limit_reason(struct cd_child *c, int exit_code, char *buf, size_t size)
{
	if (size)
		buf[0] = '\0';
	if (!c || !c->limits)
		return -1;
	finish_limits(c);
	return cd_backend_limits.exit_reason(c->limits, exit_code, buf, size);
}
