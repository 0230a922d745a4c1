/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cd_spawn (spawn.h) on a host without the Linux backend: macOS, where a
 * sandboxed command is the Seatbelt wrapper's argv (os-backend.h), so that
 * spawning it is a plain POSIX fork and exec. POSIX calls only: it is built
 * on Linux too, for its tests (test-spawn-posix and test-proc-posix run the
 * same checks as against src/spawn.c).
 *
 * What it does, in the child: new session (setsid: the command leads its
 * own process group), stdio, the controlling terminal, every descriptor
 * above 2 marked close-on-exec, chdir, exec (a PATH search in the
 * command's own PATH, with the Linux init's rules: init/init.c). A failure
 * before exec travels to the parent over a close-on-exec pipe, as on Linux.
 *
 * What Linux has and this does not, said in spawn.h's terms:
 *  - No sandbox of its own: a sandboxed Linux plan, or one with resource
 *    limits, is refused (125) before anything runs. The limits macOS can
 *    enforce come as rlimits (cd_spawn_opts.rlimits), set right before the
 *    exec.
 *  - No PR_SET_PDEATHSIG: the command outlives a supervisor that dies
 *    without ending it (cordon serve ends its processes when it stops).
 *  - kill_tree kills the command's process group, not every descendant:
 *    macOS has no child subreaper, so a process that left the group
 *    (setsid, setpgid) is out of reach. The group is killed while the
 *    command is still a zombie, so its id cannot yet name anyone else's.
 *  - Every descriptor above 2 is marked close-on-exec one by one, up to
 *    the descriptor table's size at least (highest_fd): no close_range.
 *  - No pidfd (cd_child_pidfd is -1: the caller watches SIGCHLD), no mount
 *    namespace to empty, no limits to report.
 *  - cd_kill_children kills and reaps the children this file started and
 *    kills their process groups (kept in a list until cd_child_free), not
 *    orphans, which go to launchd.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shared/fd-util.h"
#include "shared/rlimit.h"
#include "spawn-common.h"
#include "spawn.h"

struct cd_child {
	pid_t pid;
	atomic_bool waited; /* reaped: by cd_child_wait, or by cd_kill_children */
	bool killed;	    /* cd_kill_children's SIGKILL reached it (live_lock) */
	bool kill_tree;
	struct cd_child *prev, *next; /* live, for cd_kill_children */
};

/* Every cd_child not yet freed (the fs workers spawn too: locked). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cd_child *live;

/*
 * Everything the child needs, computed before fork: the child must not
 * allocate (other threads may hold malloc's locks at the fork).
 */
struct child_ctx {
	const struct cd_spawn_opts *o;
	char *const *argv;
	/* The files to try in order (NULL-terminated); search: PATH's rules apply. */
	char **files;
	bool search;
	const char *exec_step; /* the stage's step when exec fails: o->program's path */
	/* o->rlimits as setrlimit takes them (none: n_rl 0), computed before the fork. */
	int rl_res[CD_LIMIT_COUNT];
	struct rlimit rl[CD_LIMIT_COUNT];
	const char *rl_name[CD_LIMIT_COUNT];
	size_t n_rl;
	int max_fd; /* the highest the child marks (highest_fd) */
	int report_fd;
	pid_t parent;
};

/*
 * The highest descriptor the child must mark close-on-exec. Every one of
 * cordon's own is close-on-exec already, but on macOS socket(), pipe() and
 * accept() set the flag only with a later fcntl (fd-util.h), so one that
 * another thread opens just before the fork may still lack it. Any
 * descriptor opened from now on is below the size of the descriptor table
 * (getdtablesize: the soft RLIMIT_NOFILE, and on macOS no more than
 * kern.maxfilesperproc, 10,240 by default, so a limit raised to "unlimited"
 * costs a few milliseconds, not a million fcntl calls), and one opened
 * earlier under a higher limit is listed in /dev/fd (on macOS and Linux
 * alike): the larger of the two covers both. Linux's own unlimited table
 * is taken as 2^20 (its default nr_open).
 */
#define MAX_FD_UNLIMITED (1 << 20)

static int highest_fd(void)
{
	int table = getdtablesize();
	int max = table <= 0 || table == INT_MAX ? MAX_FD_UNLIMITED - 1 : table - 1;
	DIR *d = opendir("/dev/fd");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char *end;
		errno = 0;
		long v = strtol(e->d_name, &end, 10);
		if (end != e->d_name && !*end && !errno && v > max && v <= INT_MAX)
			max = (int)v;
	}
	if (d)
		closedir(d);
	return max;
}

/* The candidates for argv[0] in the command's PATH (see cd_init_exec). */
static char **search_files(const char *file, const char *path)
{
	size_t n = 1;
	for (const char *p = path; *p; p++)
		n += *p == ':';
	char **files = cd_xcalloc(n + 1, sizeof(*files));
	size_t i = 0;
	if (!*file)
		return files; /* nothing is named "": not found */
	for (const char *p = path;;) {
		const char *end = p;
		while (*end && *end != ':')
			end++;
		/* An empty element means the current directory (POSIX). */
		if (end == p)
			files[i++] = cd_xasprintf("./%s", file);
		else
			files[i++] = cd_xasprintf("%.*s/%s", (int)(end - p), p, file);
		if (!*end)
			break;
		p = end + 1;
	}
	return files;
}

static CD_NORETURN void child_fail(const struct child_ctx *c, int code, int err, const char *stage,
				   const char *step)
{
	struct cd_child_report r;
	memset(&r, 0, sizeof(r));
	r.kind = CD_CHILD_FAILED;
	r.exit_code = code;
	r.err = err;
	cd_spawn_copy_stage(r.stage, sizeof(r.stage), stage, step);
	/* The only writer, once: the parent reads to the end. */
	for (size_t off = 0; off < sizeof(r);) {
		ssize_t n = write(c->report_fd, (const char *)&r + off, sizeof(r) - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	_exit(code);
}

/* Exec the command: the one file, or the PATH search's first that runs. */
static CD_NORETURN void child_exec(const struct child_ctx *c)
{
	char *const *envp = c->o->envp;
	if (!c->search) {
		execve(c->files[0], c->argv, envp);
		int e = errno;
		child_fail(c, e == ENOENT || e == ENOTDIR ? CD_EXIT_NOT_FOUND : CD_EXIT_CANNOT_EXEC,
			   e, "exec", c->exec_step);
	}
	bool eacces = false;
	int other = 0;
	for (char **f = c->files; *f; f++) {
		execve(*f, c->argv, envp);
		int e = errno;
		enum cd_exec_miss m = cd_exec_miss_of(e);
		if (m == CD_EXEC_DENIED)
			eacces = true;
		else if (m == CD_EXEC_UNRUNNABLE && !other)
			other = e;
	}
	if (other)
		child_fail(c, CD_EXIT_CANNOT_EXEC, other, "exec", NULL);
	if (eacces)
		child_fail(c, CD_EXIT_CANNOT_EXEC, EACCES, "exec", NULL);
	child_fail(c, CD_EXIT_NOT_FOUND, ENOENT, "exec", NULL);
}

static CD_NORETURN void child_run(const struct child_ctx *c)
{
	const struct cd_spawn_opts *o = c->o;
	cd_spawn_child_reset_signals();
	if (setsid() < 0)
		child_fail(c, CD_EXIT_SETUP, errno, "setsid", NULL);
	/* The parent died before the fork returned here: nobody waits for us. */
	if (getppid() != c->parent)
		_exit(CD_EXIT_SETUP);
	const char *stage;
	int r = cd_spawn_child_stdio(o, &stage);
	if (r < 0)
		child_fail(c, CD_EXIT_SETUP, -r, stage, NULL);
	for (long fd = 3; fd <= c->max_fd; fd++) {
		int fl = fcntl((int)fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			(void)fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
	}
	if (o->cwd && chdir(o->cwd) < 0)
		child_fail(c, CD_EXIT_SETUP, errno, "chdir", o->cwd);
	/* Last before the exec: nothing above needs more than the limits allow. */
	for (size_t i = 0; i < c->n_rl; i++)
		if (setrlimit(c->rl_res[i], &c->rl[i]) < 0)
			child_fail(c, CD_EXIT_SETUP, errno, "setrlimit", c->rl_name[i]);
	child_exec(c);
}

/*
 * Read the child's report to its end (exec or exit closed the last write
 * end). 1: it failed and said how (*r); 0: it exec'ed; -errno: unreadable.
 */
static int read_report(int fd, struct cd_child_report *r)
{
	size_t got = 0;
	char extra;
	for (;;) {
		char *to = got < sizeof(*r) ? (char *)r + got : &extra;
		size_t room = got < sizeof(*r) ? sizeof(*r) - got : 1;
		ssize_t n = read(fd, to, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got == 0)
		return 0;
	if (got != sizeof(*r) || r->kind != CD_CHILD_FAILED)
		return -EPIPE;
	return 1;
}

/* Refuse a plan this host cannot carry out (see the top of this file). */
static int refuse_plan(const struct cd_linux_plan *lp, struct cd_spawn_error *err)
{
	if (lp && lp->sandboxed) {
		cd_spawn_set_error(
			err, CD_EXIT_SETUP,
			"the Linux sandbox (Landlock, seccomp, namespaces) cannot be set "
			"up on this host: its sandbox is the Seatbelt wrapper "
			"(/usr/bin/sandbox-exec), not run");
		return -ENOTSUP;
	}
	if (lp && lp->limits) {
		cd_spawn_set_error(err, CD_EXIT_SETUP,
				   "resource limits need Linux's cgroups and cannot be enforced on "
				   "this host: not run");
		return -ENOTSUP;
	}
	return 0;
}

/* o->rlimits into c, each an rlimit exactly; -EINVAL with err for one that is not. */
static int plan_rlimits(const struct cd_limits *L, struct child_ctx *c, struct cd_spawn_error *err)
{
	for (int l = 0; L && l < CD_LIMIT_COUNT; l++) {
		if (!cd_limits_has(L, (enum cd_limit)l))
			continue;
		int rl = cd_limit_rlimit((enum cd_limit)l);
		int res = rl < 0 ? -1 : cd_rlimit_resource((enum cd_rlimit)rl);
		rlim_t v = (rlim_t)L->v[l];
		if (res < 0 || (uint64_t)v != L->v[l]) {
			cd_spawn_set_error(err, CD_EXIT_SETUP,
					   "the %s limit cannot be set as an rlimit here: not run",
					   cd_limit_info((enum cd_limit)l)->name);
			return -EINVAL;
		}
		c->rl_res[c->n_rl] = res;
		c->rl[c->n_rl] = (struct rlimit){ .rlim_cur = v, .rlim_max = v };
		c->rl_name[c->n_rl] = cd_rlimit_name((enum cd_rlimit)rl);
		c->n_rl++;
	}
	return 0;
}

int cd_spawn(const struct cd_spawn_opts *o, struct cd_child **ret, struct cd_spawn_error *err)
{
	int r = refuse_plan(o->lp, err);
	if (r < 0)
		return r;

	size_t argc = cd_strv_length(o->argv);
	cleanup_free char **argv = NULL;
	if (o->arg0) {
		argv = cd_xcalloc(argc + 1, sizeof(*argv));
		memcpy(argv, o->argv, argc * sizeof(*argv));
		argv[0] = (char *)o->arg0;
	}
	char *one[2] = { NULL, NULL };
	char **files = one;
	struct child_ctx ctx = {
		.o = o,
		.argv = argv ? argv : o->argv,
		.parent = getpid(),
	};
	if (o->program) {
		one[0] = o->program->path;
		ctx.exec_step = o->program->path;
	} else if (strchr(o->argv[0], '/')) {
		one[0] = o->argv[0];
	} else {
		files = search_files(o->argv[0], cd_spawn_env_path(o->envp));
		ctx.search = true;
	}
	ctx.files = files;
	ctx.max_fd = highest_fd();
	r = plan_rlimits(o->rlimits, &ctx, err);
	if (r < 0)
		goto out;

	int pfd[2];
	r = cd_pipe2(pfd, O_CLOEXEC);
	if (r < 0) {
		cd_spawn_set_error(err, CD_EXIT_SETUP, "error pipe: %s", strerror(-r));
		goto out;
	}
	ctx.report_fd = pfd[1];

	/* Every signal blocked across fork: the child resets the handlers first. */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		child_run(&ctx);
	}
	int fork_errno = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		r = -fork_errno;
		cd_spawn_set_error(err, CD_EXIT_SETUP, "fork: %s", strerror(fork_errno));
		goto out;
	}

	struct cd_child_report rep;
	int rr = read_report(pfd[0], &rep);
	close(pfd[0]);
	if (rr == 0) {
		struct cd_child *c = cd_xcalloc(1, sizeof(*c));
		c->pid = pid;
		c->kill_tree = o->kill_tree;
		pthread_mutex_lock(&live_lock);
		c->next = live;
		if (live)
			live->prev = c;
		live = c;
		pthread_mutex_unlock(&live_lock);
		*ret = c;
		r = 0;
		goto out;
	}
	/*
	 * It failed (and has exited or is about to), or what it said cannot
	 * be read, when it may have exec'ed: then it and its group go.
	 */
	if (rr < 0) {
		(void)kill(-pid, SIGKILL);
		(void)kill(pid, SIGKILL);
		memset(&rep, 0, sizeof(rep));
		rep.exit_code = CD_EXIT_SETUP;
		rep.err = -rr;
		cd_spawn_copy_stage(rep.stage, sizeof(rep.stage), "child setup",
				    rr == -EPIPE ? "truncated report" : "reading its report");
	}
	int status;
	(void)cd_spawn_wait_pid(pid, &status);
	if (err)
		cd_spawn_format_error(err, o->argv[0], &rep);
	r = -(rep.err > 0 ? rep.err : EIO);
out:
	if (files != one)
		cd_strv_free(files);
	return r;
}

pid_t cd_child_pid(const struct cd_child *c)
{
	return c->pid;
}

int cd_child_pidfd(struct cd_child *c)
{
	(void)c;
	return -1;
}

/*
 * kill_tree's rounds, a millisecond apart: a member of the group that forks
 * while the group is signalled may make a child the signal does not reach
 * (Linux refuses such a fork; whether macOS does is not known), which a
 * later round does. Listing the group (libproc's proc_listpgrppids) until
 * only zombies are left would be exact; it is not built.
 */
#define KILL_GROUP_ROUNDS 3

int cd_child_wait(struct cd_child *c)
{
	int status = 0;
	/*
	 * With kill_tree, the group goes while the command is a zombie: its
	 * pid (the group's id) cannot be anyone else's until it is reaped. A
	 * caller that ignores SIGCHLD gets no zombie (waitid fails): then the
	 * id may be free already, and nothing is sent.
	 */
	if (c->kill_tree) {
		siginfo_t si;
		int w;
		do
			w = waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOWAIT);
		while (w < 0 && errno == EINTR);
		for (int i = 0; w == 0 && i < KILL_GROUP_ROUNDS; i++) {
			if (i)
				nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
			if (kill(-c->pid, SIGKILL) < 0 && errno == ESRCH)
				break;
		}
	}
	/* Reaped by cd_kill_children already, or a caller that ignores SIGCHLD: no status. */
	if (atomic_load(&c->waited) || cd_spawn_wait_pid(c->pid, &status) < 0)
		return CD_EXIT_SETUP;
	atomic_store(&c->waited, true);
	return cd_exit_code_from_status(status);
}

int cd_child_kill_namespace(struct cd_child *c)
{
	(void)c;
	return 0; /* no mount namespace of its own */
}

int cd_child_limit_reason(struct cd_child *c, int exit_code, char *buf, size_t size)
{
	(void)c;
	(void)exit_code;
	if (size)
		buf[0] = '\0';
	return -1;
}

/*
 * The children not yet freed, and their groups (each leads its own:
 * setsid), then each reaped. Only one still unreaped is signalled: a
 * zombie or a live child keeps its pid, and so its group's id, from anyone
 * else; one the caller reaped already (waitid: ECHILD) may have given its
 * number away. Only a child the signal reached is waited for: one that
 * runs a setuid program (EPERM) could hold the lock, and every spawn,
 * for as long as it likes. A later cd_child_wait of one reaped here has
 * no status to give (CD_EXIT_SETUP).
 */
void cd_kill_children(void)
{
	pthread_mutex_lock(&live_lock);
	for (struct cd_child *c = live; c; c = c->next) {
		siginfo_t si;
		int w;
		if (atomic_load(&c->waited))
			continue;
		do
			w = waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT);
		while (w < 0 && errno == EINTR);
		if (w < 0)
			continue;
		(void)kill(-c->pid, SIGKILL);
		c->killed = kill(c->pid, SIGKILL) == 0;
	}
	for (struct cd_child *c = live; c; c = c->next) {
		int st;
		if (c->killed && !atomic_load(&c->waited) && cd_spawn_wait_pid(c->pid, &st) >= 0)
			atomic_store(&c->waited, true);
	}
	pthread_mutex_unlock(&live_lock);
}

struct cd_child *cd_child_free(struct cd_child *c)
{
	if (!c)
		return NULL;
	pthread_mutex_lock(&live_lock);
	if (c->prev)
		c->prev->next = c->next;
	else if (live == c)
		live = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&live_lock);
	free(c);
	return NULL;
}
