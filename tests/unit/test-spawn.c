/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The contract of spawn.h without a sandbox, checked against both of its
 * implementations: built with src/spawn.c (test-spawn, Linux) and with
 * src/spawn-posix.c (test-spawn-posix, what macOS runs; -DCD_TEST_SPAWN_POSIX).
 * The command is this program itself in its probe mode (argv[1] "probe"),
 * which says what it was given.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/linux/plan.h"
#include "spawn.h"

extern char **environ;

static char self[PATH_MAX];
static char tmpdir[64];
static char *plain_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", NULL };

/* ---- the probe ---- */

static int probe(int argc, char **argv)
{
	const char *what = argc > 2 ? argv[2] : "";
	if (strcmp(what, "exit") == 0 && argc > 3)
		return atoi(argv[3]);
	if (strcmp(what, "signal") == 0 && argc > 3) {
		raise(atoi(argv[3]));
		return 99;
	}
	if (strcmp(what, "cat") == 0) {
		char buf[4096];
		ssize_t n;
		while ((n = read(0, buf, sizeof(buf))) > 0)
			if (write(1, buf, (size_t)n) != n)
				return 98;
		return n < 0 ? 97 : 0;
	}
	if (strcmp(what, "orphan") == 0) {
		/*
		 * Leave a process behind in our group: it prints its pid and
		 * closes its output, then waits to be killed. We exit once it has
		 * printed (the sync pipe's end of file).
		 */
		int sync[2];
		if (pipe(sync) < 0)
			return 96;
		pid_t pid = fork();
		if (pid < 0)
			return 95;
		if (pid == 0) {
			close(sync[0]);
			printf("%d\n", (int)getpid());
			fflush(stdout);
			close(1);
			close(2);
			close(sync[1]);
			for (;;)
				pause();
		}
		close(sync[1]);
		char c;
		while (read(sync[0], &c, 1) > 0)
			;
		return 0;
	}
	if (strcmp(what, "rlimits") == 0) {
		struct rlimit nofile, fsize;
		if (getrlimit(RLIMIT_NOFILE, &nofile) < 0 || getrlimit(RLIMIT_FSIZE, &fsize) < 0)
			return 94;
		printf("nofile=%llu/%llu fsize=%llu/%llu\n", (unsigned long long)nofile.rlim_cur,
		       (unsigned long long)nofile.rlim_max, (unsigned long long)fsize.rlim_cur,
		       (unsigned long long)fsize.rlim_max);
		return 0;
	}
	/* "info": what the command was given. */
	printf("arg0=%s\n", argv[0]);
	char cwd[PATH_MAX];
	printf("cwd=%s\n", getcwd(cwd, sizeof(cwd)) ? cwd : "?");
	printf("leader=%d\n", getsid(0) == getpid() && getpgrp() == getpid());
	printf("fds=");
	for (int fd = 3; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			printf("%d,", fd);
	printf("\n");
	for (char **e = environ; *e; e++)
		printf("env=%s\n", *e);
	return 0;
}

/* ---- helpers ---- */

struct run {
	int rc;		/* cd_spawn's */
	int code;	/* the exit code, or the error's */
	char out[8192]; /* the command's stdout */
	struct cd_spawn_error err;
};

/* Spawn o with stdout to a pipe, read it to the end, wait. */
static void run(struct cd_spawn_opts *o, struct run *r)
{
	memset(r, 0, sizeof(*r));
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	o->stdout_fd = p[1];
	if (!o->envp)
		o->envp = plain_env;
	struct cd_child *c = NULL;
	r->rc = cd_spawn(o, &c, &r->err);
	close(p[1]);
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], r->out + len, sizeof(r->out) - 1 - len)) > 0)
		len += (size_t)n;
	close(p[0]);
	r->out[len] = '\0';
	if (r->rc < 0) {
		ck_assert_ptr_null(c);
		r->code = r->err.exit_code;
		return;
	}
	r->code = cd_child_wait(c);
	cd_child_free(c);
}

static void run_probe(const char *what, const char *arg, struct cd_spawn_opts *o, struct run *r)
{
	char *argv[] = { self, "probe", (char *)what, (char *)arg, NULL };
	o->argv = argv;
	o->stdin_fd = o->stderr_fd = -1;
	run(o, r);
}

static void assert_no_child(void)
{
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
}

/* The spawn failed before exec as expected: its return, exit code and exact message. */
static void assert_failed(const struct run *r, int rc, int code, const char *msg)
{
	ck_assert_int_eq(r->rc, rc);
	ck_assert_int_eq(r->code, code);
	ck_assert_str_eq(r->err.msg, msg);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(chmod(path, mode), 0);
}

/* What prog_dir puts in its directory under the name cd-prog. */
enum prog {
	PROG_NO_X,    /* a script without an x bit: EACCES, root too */
	PROG_GARBAGE, /* executable, but no program: ENOEXEC */
	PROG_PROBE,   /* this program (a symlink) */
};

/* tmpdir/name, made, with cd-prog in it as kind says; dir gets its path. */
static void prog_dir(char *dir, size_t size, const char *name, enum prog kind)
{
	char f[PATH_MAX];
	snprintf(dir, size, "%s/%s", tmpdir, name);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	snprintf(f, sizeof(f), "%s/cd-prog", dir);
	if (kind == PROG_NO_X)
		write_file(f, "#!/bin/sh\nexit 1\n", 0644);
	else if (kind == PROG_GARBAGE)
		write_file(f, "\x01\x02 not a program\n", 0755);
	else
		ck_assert_int_eq(symlink(self, f), 0);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cordon-test-spawn-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* ---- exit codes ---- */

START_TEST(test_exit_codes)
{
	struct cd_spawn_opts o = { 0 };
	struct run r;
	run_probe("exit", "0", &o, &r);
	ck_assert_int_eq(r.rc, 0);
	ck_assert_int_eq(r.code, 0);
	run_probe("exit", "7", &o, &r);
	ck_assert_int_eq(r.code, 7);
	/* Signals are reset to their default in the child: SIGTERM kills it. */
	run_probe("signal", "15", &o, &r);
	ck_assert_int_eq(r.code, 128 + SIGTERM);
	assert_no_child();
}
END_TEST

/* ---- what the command is given ---- */

START_TEST(test_given)
{
	char *env[] = { "A=1", "B=two words", NULL };
	struct cd_spawn_opts o = { .arg0 = "renamed", .envp = env, .cwd = tmpdir };
	struct run r;
	run_probe("info", NULL, &o, &r);
	ck_assert_int_eq(r.code, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "arg0=renamed\n"));
	char want[128];
	snprintf(want, sizeof(want), "cwd=%s\n", tmpdir);
	ck_assert_ptr_nonnull(strstr(r.out, want));
	/* Its own session and process group. */
	ck_assert_ptr_nonnull(strstr(r.out, "leader=1\n"));
	/* Exactly the given environment. */
	ck_assert_ptr_nonnull(strstr(r.out, "\nenv=A=1\nenv=B=two words\n"));
	ck_assert_ptr_null(strstr(r.out, "env=PATH="));
	ck_assert_ptr_nonnull(strstr(r.out, "fds=\n"));
}
END_TEST

/* Descriptors the caller holds without close-on-exec stay with the caller. */
START_TEST(test_fds_not_inherited)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(dup2(p[0], 200), 200);
	struct cd_spawn_opts o = { 0 };
	struct run r;
	run_probe("info", NULL, &o, &r);
	ck_assert_int_eq(r.code, 0);
	ck_assert_msg(strstr(r.out, "fds=\n"), "inherited: %s", r.out);
	close(200);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_stdin_stdout)
{
	int in[2];
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(write(in[1], "hello\n", 6), 6);
	close(in[1]);
	struct cd_spawn_opts o = { 0 };
	char *argv[] = { self, "probe", "cat", NULL };
	o.argv = argv;
	o.stdin_fd = in[0];
	o.stderr_fd = -1;
	struct run r;
	run(&o, &r);
	close(in[0]);
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.out, "hello\n");
}
END_TEST

/* A program of cordon's own: executed as found, under the name it is given. */
START_TEST(test_program)
{
	struct cd_program prog = { .fd = -1 };
	ck_assert_int_eq(cd_program_open("test-spawn" CD_TEST_SUFFIX, &prog, NULL), 0);
	ck_assert_str_eq(prog.path, self);
	char *argv[] = { "some-name", "probe", "info", NULL };
	struct cd_spawn_opts o = {
		.argv = argv, .stdin_fd = -1, .stderr_fd = -1, .program = &prog
	};
	struct run r;
	run(&o, &r);
	ck_assert_int_eq(r.code, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "arg0=some-name\n"));
	cd_program_done(&prog);
}
END_TEST

/* ---- finding the command ---- */

/* A name is searched in the command's PATH, not in the caller's. */
START_TEST(test_path_is_the_commands)
{
	char link[128], env_path[160];
	snprintf(link, sizeof(link), "%s/cd-spawn-probe", tmpdir);
	ck_assert_int_eq(symlink(self, link), 0);
	snprintf(env_path, sizeof(env_path), "PATH=/nonexistent::%s", tmpdir);
	char *env[] = { env_path, NULL };
	char *argv[] = { "cd-spawn-probe", "probe", "exit", "3", NULL };
	struct cd_spawn_opts o = { .argv = argv, .envp = env, .stdin_fd = -1, .stderr_fd = -1 };
	struct run r;
	run(&o, &r);
	ck_assert_int_eq(r.rc, 0);
	ck_assert_int_eq(r.code, 3);

	/* sh is in the caller's PATH, not in the command's. */
	char *noenv[] = { "PATH=/nonexistent", NULL };
	char *sh[] = { "sh", "-c", "exit 0", NULL };
	struct cd_spawn_opts o2 = { .argv = sh, .envp = noenv, .stdin_fd = -1, .stderr_fd = -1 };
	run(&o2, &r);
	assert_failed(&r, -ENOENT, 127, "sh: command not found");
	assert_no_child();
}
END_TEST

/* A file that may not be executed (no x bit: root too) is passed over for a later one. */
START_TEST(test_path_eacces)
{
	char d1[128], d2[128], env_path[300];
	prog_dir(d1, sizeof(d1), "a", PROG_NO_X);
	prog_dir(d2, sizeof(d2), "b", PROG_PROBE);
	snprintf(env_path, sizeof(env_path), "PATH=%s:%s", d1, d2);
	char *env[] = { env_path, NULL };
	char *argv[] = { "cd-prog", "probe", "exit", "4", NULL };
	struct cd_spawn_opts o = { .argv = argv, .envp = env, .stdin_fd = -1, .stderr_fd = -1 };
	struct run r;
	run(&o, &r);
	ck_assert_int_eq(r.code, 4);
}
END_TEST

/* ... and reported when there is none. */
START_TEST(test_path_eacces_alone)
{
	char d1[128], d2[128], env_path[300];
	prog_dir(d1, sizeof(d1), "a", PROG_NO_X);
	snprintf(env_path, sizeof(env_path), "PATH=%s", d1);
	char *env[] = { env_path, NULL };
	char *argv[] = { "cd-prog", NULL };
	struct cd_spawn_opts o = { .argv = argv, .envp = env, .stdin_fd = -1, .stderr_fd = -1 };
	struct run r;
	run(&o, &r);
	assert_failed(&r, -EACCES, 126, "cd-prog: cannot execute: Permission denied");

	/* A file found that is no program says more than one that may not run. */
	prog_dir(d2, sizeof(d2), "b", PROG_GARBAGE);
	snprintf(env_path, sizeof(env_path), "PATH=%s:%s", d1, d2);
	run(&o, &r);
	assert_failed(&r, -ENOEXEC, 126, "cd-prog: cannot execute: Exec format error");
	assert_no_child();
}
END_TEST

START_TEST(test_by_path_failures)
{
	char d[128], f[160];
	prog_dir(d, sizeof(d), "g", PROG_GARBAGE);
	snprintf(f, sizeof(f), "%s/cd-prog", d);
	char *argv[] = { f, NULL };
	struct cd_spawn_opts o = { .argv = argv, .stdin_fd = -1, .stderr_fd = -1 };
	struct run r;
	run(&o, &r);
	char msg[256];
	snprintf(msg, sizeof(msg), "%s: cannot execute: Exec format error", f);
	assert_failed(&r, -ENOEXEC, 126, msg);

	char *missing[] = { "/nonexistent/cd-prog", NULL };
	o.argv = missing;
	run(&o, &r);
	assert_failed(&r, -ENOENT, 127, "/nonexistent/cd-prog: command not found");
	assert_no_child();
}
END_TEST

START_TEST(test_chdir_failure)
{
	struct cd_spawn_opts o = { .cwd = "/nonexistent/dir" };
	struct run r;
	run_probe("exit", "0", &o, &r);
	assert_failed(&r, -ENOENT, 125, "chdir: /nonexistent/dir: No such file or directory");
	assert_no_child();
}
END_TEST

/* ---- what the command leaves behind ---- */

/* Run the orphan probe; its orphan's pid. The caller is a subreaper: it comes to us. */
static pid_t run_orphan(bool kill_tree)
{
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	struct cd_spawn_opts o = { .kill_tree = kill_tree };
	struct run r;
	run_probe("orphan", NULL, &o, &r);
	ck_assert_int_eq(r.code, 0);
	int pid = atoi(r.out);
	ck_assert_int_gt(pid, 1);
	return pid;
}

START_TEST(test_kill_tree)
{
	pid_t orphan = run_orphan(true);
	int st;
	pid_t w = waitpid(orphan, &st, 0);
	if (w < 0) {
		/* src/spawn.c reaps every descendant itself (cd_kill_children). */
		ck_assert_int_eq(errno, ECHILD);
	} else {
		ck_assert_int_eq(w, orphan);
		ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	}
	assert_no_child();
}
END_TEST

START_TEST(test_no_kill_tree)
{
	pid_t orphan = run_orphan(false);
	/* Still running: not reaped, not dead. */
	ck_assert_int_eq(waitpid(orphan, NULL, WNOHANG), 0);
	ck_assert_int_eq(kill(orphan, SIGKILL), 0);
	int st;
	ck_assert_int_eq(waitpid(orphan, &st, 0), orphan);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}
END_TEST

/* Limits as rlimits: set before the exec by spawn-posix (macOS), refused by the Linux spawn. */
START_TEST(test_rlimits)
{
	struct cd_limits L = { 0 };
	cd_limits_put(&L, CD_LIMIT_OPEN_FILES, 64);
	cd_limits_put(&L, CD_LIMIT_FILE_SIZE, 4096);
	struct cd_spawn_opts o = { .rlimits = &L };
	struct run r;
	run_probe("rlimits", NULL, &o, &r);
#ifdef CD_TEST_SPAWN_POSIX
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.out, "nofile=64/64 fsize=4096/4096\n");
	/* Only rlimits: what is none is refused, and nothing runs. */
	cd_limits_put(&L, CD_LIMIT_TASKS, 5);
	run_probe("rlimits", NULL, &o, &r);
	assert_failed(&r, -EINVAL, 125, "the tasks limit cannot be set as an rlimit here: not run");
#else
	assert_failed(&r, -EINVAL, 125,
		      "resource limits on Linux go through the sandbox plan, not as bare rlimits: "
		      "not run");
#endif
	assert_no_child();
}
END_TEST

#ifdef CD_TEST_SPAWN_POSIX
/* cd_kill_children: every child spawned and not yet waited for, killed and reaped. */
START_TEST(test_kill_children)
{
	int in[2];
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	char *argv[] = { self, "probe", "cat", NULL };
	struct cd_spawn_opts o = {
		.argv = argv, .envp = plain_env, .stdin_fd = in[0], .stdout_fd = -1, .stderr_fd = -1
	};
	struct cd_child *a = NULL, *b = NULL;
	struct cd_spawn_error err;
	ck_assert_int_eq(cd_spawn(&o, &a, &err), 0);
	ck_assert_int_eq(cd_spawn(&o, &b, &err), 0);
	close(in[0]);
	/* Both wait on stdin, which stays open: only the kill ends them. */
	cd_kill_children();
	/* Reaped there: killed, and nothing is left to wait for. */
	assert_no_child();
	ck_assert_int_eq(cd_child_wait(a), 125);
	ck_assert_int_eq(cd_child_wait(b), 125);
	cd_child_free(a);
	cd_child_free(b);
	close(in[1]);
	cd_kill_children(); /* none left: nothing to do */
	assert_no_child();
}
END_TEST

/*
 * Another thread opens a descriptor without close-on-exec between the
 * spawn's look at the descriptors and its fork (macOS's socket() and
 * pipe() get the flag only afterwards): the fork (linked with
 * -Wl,--wrap=fork) does it here.
 */
pid_t __real_fork(void);
pid_t __wrap_fork(void);
static int fork_opens = -1;

pid_t __wrap_fork(void)
{
	if (fork_opens >= 0) {
		int p[2];
		if (pipe(p) == 0) {
			(void)dup2(p[0], fork_opens);
			close(p[0]);
			close(p[1]);
		}
	}
	return __real_fork();
}

START_TEST(test_fd_opened_before_fork)
{
	/* A table of 512, and above it a descriptor opened while the limit was higher. */
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(dup2(p[0], 600), 600);
	close(p[0]);
	close(p[1]);
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = 512;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	struct cd_spawn_opts o = { 0 };
	struct run r;
	run_probe("info", NULL, &o, &r);
	ck_assert_int_eq(r.code, 0);
	ck_assert_msg(strstr(r.out, "fds=\n"), "inherited: %s", r.out);
	close(600);

	/* None above the table: one opened at its top just before the fork. */
	fork_opens = 511;
	run_probe("info", NULL, &o, &r);
	ck_assert_int_eq(fcntl(511, F_GETFD), 0); /* it was there, inheritable */
	fork_opens = -1;
	ck_assert_int_eq(r.code, 0);
	ck_assert_msg(strstr(r.out, "fds=\n"), "inherited: %s", r.out);
}
END_TEST

/* What only Linux can do is refused before anything runs. */
START_TEST(test_linux_plan_refused)
{
	struct cd_linux_plan lp = { .sandboxed = true };
	struct cd_spawn_opts o = { .lp = &lp };
	struct run r;
	run_probe("exit", "0", &o, &r);
	ck_assert_int_eq(r.rc, -ENOTSUP);
	ck_assert_int_eq(r.code, 125);
	ck_assert_ptr_nonnull(strstr(r.err.msg, "the Linux sandbox (Landlock, seccomp, namespaces) "
						"cannot be set up on this host"));
	assert_no_child();

	struct cd_linux_plan limited = { .limits = (struct cd_limits_plan *)&limited };
	o.lp = &limited;
	run_probe("exit", "0", &o, &r);
	ck_assert_int_eq(r.rc, -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(r.err.msg, "resource limits need Linux's cgroups"));
	assert_no_child();

	/* An unsandboxed plan without limits is a plain spawn. */
	struct cd_linux_plan plain = { 0 };
	o.lp = &plain;
	run_probe("exit", "5", &o, &r);
	ck_assert_int_eq(r.code, 5);
}
END_TEST
#endif

static Suite *spawn_suite(void)
{
	Suite *s = suite_create("spawn");
	TCase *tc = tcase_create("spawn");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_exit_codes);
	tcase_add_test(tc, test_given);
	tcase_add_test(tc, test_fds_not_inherited);
	tcase_add_test(tc, test_stdin_stdout);
	tcase_add_test(tc, test_program);
	tcase_add_test(tc, test_path_is_the_commands);
	tcase_add_test(tc, test_path_eacces);
	tcase_add_test(tc, test_path_eacces_alone);
	tcase_add_test(tc, test_by_path_failures);
	tcase_add_test(tc, test_chdir_failure);
	tcase_add_test(tc, test_kill_tree);
	tcase_add_test(tc, test_no_kill_tree);
	tcase_add_test(tc, test_rlimits);
#ifdef CD_TEST_SPAWN_POSIX
	tcase_add_test(tc, test_kill_children);
	tcase_add_test(tc, test_fd_opened_before_fork);
	tcase_add_test(tc, test_linux_plan_refused);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "probe") == 0)
		return probe(argc, argv);
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 99;
	self[n] = '\0';
	SRunner *sr = srunner_create(spawn_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
