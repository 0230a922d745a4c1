/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_SYS_PIDFD_H
#include <sys/pidfd.h>
#endif
#include <sys/syscall.h>

#include "core/util.h"
#include "serve/loop.h"

/* Every test runs once per loop kind (_i). */
static const enum cd_loop_kind kinds[] = { CD_LOOP_EPOLL, CD_LOOP_POLL };

static struct cd_loop *new_loop(int i)
{
	struct cd_loop *l = cd_loop_new(kinds[i]);
	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(cd_loop_kind(l), kinds[i]);
	return l;
}

/* A safety net: no test may hang the loop forever. */
static void on_deadline(struct cd_loop *l, void *data)
{
	*(bool *)data = true;
	cd_loop_quit(l);
}

/* ---- fd readiness ---- */

struct io_ctx {
	int reads;
	char buf[64];
	size_t len;
	cd_loop_events last;
	struct cd_watch *w;
	bool del_in_cb;
	int calls;
};

static void on_readable(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct io_ctx *c = data;
	c->calls++;
	c->last = ev;
	ssize_t n = read(fd, c->buf + c->len, sizeof(c->buf) - c->len);
	if (n > 0)
		c->len += (size_t)n;
	if (n == 0 || c->len >= 5) {
		cd_loop_del_fd(l, c->w);
		cd_loop_quit(l);
	}
}

START_TEST(test_fd_readable)
{
	struct cd_loop *l = new_loop(_i);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	struct io_ctx c = { 0 };
	c.w = cd_loop_add_fd(l, p[0], CD_LOOP_IN, on_readable, &c);
	ck_assert_ptr_nonnull(c.w);
	ck_assert_int_eq(write(p[1], "hello", 5), 5);
	bool timed_out = false;
	struct cd_timer *t = cd_loop_add_timer(l, 5000, on_deadline, &timed_out);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert(!timed_out);
	ck_assert_uint_eq(c.len, 5);
	ck_assert_int_eq(memcmp(c.buf, "hello", 5), 0);
	ck_assert(c.last & CD_LOOP_IN);
	cd_loop_cancel_timer(l, t);
	close(p[0]);
	close(p[1]);
	cd_loop_free(l);
}
END_TEST

static void on_hup(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct io_ctx *c = data;
	(void)fd;
	c->calls++;
	c->last = ev;
	cd_loop_del_fd(l, c->w);
	cd_loop_quit(l);
}

START_TEST(test_fd_hup)
{
	struct cd_loop *l = new_loop(_i);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	struct io_ctx c = { 0 };
	c.w = cd_loop_add_fd(l, p[0], CD_LOOP_IN, on_hup, &c);
	close(p[1]);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert_int_eq(c.calls, 1);
	ck_assert(c.last & CD_LOOP_HUP);
	close(p[0]);
	cd_loop_free(l);
}
END_TEST

struct wr_ctx {
	struct cd_watch *w;
	int out_calls;
	int in_calls;
};

static void on_writable(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct wr_ctx *c = data;
	(void)fd;
	if (ev & CD_LOOP_OUT)
		c->out_calls++;
	if (ev & CD_LOOP_IN)
		c->in_calls++;
	/* Switch to IN only: the (never readable) write end goes quiet. */
	ck_assert_int_eq(cd_loop_mod_fd(l, c->w, CD_LOOP_IN), 0);
}

static void quit_timer(struct cd_loop *l, void *data)
{
	(void)data;
	cd_loop_quit(l);
}

START_TEST(test_fd_writable_and_mod)
{
	struct cd_loop *l = new_loop(_i);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	struct wr_ctx c = { 0 };
	c.w = cd_loop_add_fd(l, p[1], CD_LOOP_OUT, on_writable, &c);
	cd_loop_add_timer(l, 50, quit_timer, NULL);
	ck_assert_int_eq(cd_loop_run(l), 0);
	/* Once: after the mod nothing more is reported (no busy loop). */
	ck_assert_int_eq(c.out_calls, 1);
	ck_assert_int_eq(c.in_calls, 0);
	/* A watch that wants nothing: not even HUP when the reader goes. */
	ck_assert_int_eq(cd_loop_mod_fd(l, c.w, 0), 0);
	close(p[0]);
	cd_loop_add_timer(l, 30, quit_timer, NULL);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert_int_eq(c.out_calls, 1);
	cd_loop_del_fd(l, c.w);
	close(p[1]);
	cd_loop_free(l);
}
END_TEST

/* Two watches ready in one round; the first deletes the second. */
struct pair_ctx {
	struct cd_loop *l;
	struct cd_watch *w[2];
	int calls[2];
	int p[2][2];
};

static void on_pair(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct pair_ctx *c = data;
	(void)ev;
	int me = fd == c->p[0][0] ? 0 : 1;
	c->calls[me]++;
	char b[8];
	ck_assert_int_gt(read(fd, b, sizeof(b)), 0);
	/* Delete both, including the other one whose event may be pending. */
	cd_loop_del_fd(l, c->w[0]);
	cd_loop_del_fd(l, c->w[1]);
	cd_loop_add_timer(l, 20, quit_timer, NULL);
}

START_TEST(test_delete_inside_callback)
{
	struct cd_loop *l = new_loop(_i);
	struct pair_ctx c = { .l = l };
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(pipe2(c.p[k], O_CLOEXEC | O_NONBLOCK), 0);
		c.w[k] = cd_loop_add_fd(l, c.p[k][0], CD_LOOP_IN, on_pair, &c);
		ck_assert_int_eq(write(c.p[k][1], "x", 1), 1);
	}
	ck_assert_int_eq(cd_loop_run(l), 0);
	/* Exactly one of the two callbacks ran, once. */
	ck_assert_int_eq(c.calls[0] + c.calls[1], 1);
	for (int k = 0; k < 2; k++) {
		close(c.p[k][0]);
		close(c.p[k][1]);
	}
	cd_loop_free(l);
}
END_TEST

/* ---- bulk watches ---- */

#define N_BULK 300

struct bulk_ctx {
	int p[N_BULK][2];
	struct cd_watch *w[N_BULK];
	int calls[N_BULK];
	int bulk_calls; /* bulk callbacks so far */
	int seen_at;	/* bulk_calls when the other watch was served, or -1 */
	int left;	/* bulk watches still to be served (drain: then quit) */
	bool drain;	/* each bulk callback reads its byte and goes */
	int stop_after; /* !drain: quit after that many bulk callbacks */
};

/* The ctx of the bulk watches; each one's data is its calls[k], which gives k. */
static struct bulk_ctx *bulk_of;

static void on_bulk_k(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct bulk_ctx *c = bulk_of;
	size_t k = (size_t)((char *)data - (char *)c->calls) / sizeof(c->calls[0]);
	(void)ev;
	c->calls[k]++;
	c->bulk_calls++;
	if (c->drain) {
		char b;
		(void)read(fd, &b, 1);
		cd_loop_del_fd(l, c->w[k]);
		if (--c->left == 0)
			cd_loop_quit(l);
	} else if (c->bulk_calls >= c->stop_after) {
		cd_loop_quit(l);
	}
}

static void on_first(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct bulk_ctx *c = data;
	char b;
	(void)ev;
	(void)read(fd, &b, 1);
	if (c->seen_at < 0)
		c->seen_at = c->bulk_calls;
	(void)l;
}

static struct bulk_ctx *bulk_setup_ctx(struct cd_loop *l)
{
	struct bulk_ctx *c = cd_xcalloc(1, sizeof(*c));
	bulk_of = c;
	c->seen_at = -1;
	for (int k = 0; k < N_BULK; k++) {
		ck_assert_int_eq(pipe2(c->p[k], O_CLOEXEC | O_NONBLOCK), 0);
		c->w[k] = cd_loop_add_fd(l, c->p[k][0], CD_LOOP_IN | CD_LOOP_BULK, on_bulk_k,
					 &c->calls[k]);
		ck_assert_ptr_nonnull(c->w[k]);
		ck_assert_int_eq(write(c->p[k][1], "x", 1), 1);
	}
	return c;
}

static void bulk_free_ctx(struct bulk_ctx *c)
{
	for (int k = 0; k < N_BULK; k++) {
		close(c->p[k][0]);
		close(c->p[k][1]);
	}
	free(c);
	bulk_of = NULL;
}

/*
 * Hundreds of bulk watches ready at once (processes ending together) and
 * one other (a client's request): the other is served before a second
 * batch of them, not after all.
 */
START_TEST(test_bulk_after_the_others)
{
	struct cd_loop *l = new_loop(_i);
	struct bulk_ctx *c = bulk_setup_ctx(l);
	int q[2];
	c->drain = true;
	c->left = N_BULK;
	ck_assert_int_eq(pipe2(q, O_CLOEXEC | O_NONBLOCK), 0);
	struct cd_watch *w = cd_loop_add_fd(l, q[0], CD_LOOP_IN, on_first, c);
	ck_assert_ptr_nonnull(w);
	ck_assert_int_eq(write(q[1], "x", 1), 1);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert_int_eq(c->bulk_calls, N_BULK);
	ck_assert_int_ge(c->seen_at, 0);
	ck_assert_int_le(c->seen_at, CD_LOOP_BULK_BATCH);
	cd_loop_del_fd(l, w);
	close(q[0]);
	close(q[1]);
	bulk_free_ctx(c);
	cd_loop_free(l);
}
END_TEST

/*
 * Bulk watches that stay ready (a process writing all the time) are served
 * in turn: a batch per round, and after as many rounds as batches every
 * one of them has been served.
 */
START_TEST(test_bulk_in_turn)
{
	struct cd_loop *l = new_loop(_i);
	struct bulk_ctx *c = bulk_setup_ctx(l);
	int rounds = (N_BULK + CD_LOOP_BULK_BATCH - 1) / CD_LOOP_BULK_BATCH;
	c->stop_after = rounds * CD_LOOP_BULK_BATCH;
	ck_assert_int_eq(cd_loop_run(l), 0);
	for (int k = 0; k < N_BULK; k++)
		ck_assert_msg(c->calls[k] >= 1, "bulk watch %d never served in %d calls", k,
			      c->bulk_calls);
	bulk_free_ctx(c);
	cd_loop_free(l);
}
END_TEST

/* ---- timers ---- */

struct tm_ctx {
	int order[16];
	int n;
	struct cd_timer *victim;
	struct cd_loop *l;
};

struct tm_arg {
	struct tm_ctx *c;
	int id;
};

static void on_tm(struct cd_loop *l, void *data)
{
	struct tm_arg *a = data;
	a->c->order[a->c->n++] = a->id;
	if (a->id == 1 && a->c->victim) {
		/* Cancel a timer that is also due in this round. */
		cd_loop_cancel_timer(l, a->c->victim);
		a->c->victim = NULL;
	}
	if (a->id == 9)
		cd_loop_quit(l);
}

START_TEST(test_timer_order_and_cancel)
{
	struct cd_loop *l = new_loop(_i);
	struct tm_ctx c = { .l = l };
	struct tm_arg a[10];
	for (int k = 0; k < 10; k++)
		a[k] = (struct tm_arg){ &c, k };
	uint64_t t0 = cd_loop_now_ms();
	/* Added out of order; 3 and 4 share a deadline: insertion order. */
	cd_loop_add_timer(l, 40, on_tm, &a[5]);
	cd_loop_add_timer(l, 10, on_tm, &a[1]);
	cd_loop_add_timer(l, 30, on_tm, &a[3]);
	cd_loop_add_timer(l, 30, on_tm, &a[4]);
	cd_loop_add_timer(l, 20, on_tm, &a[2]);
	struct cd_timer *gone = cd_loop_add_timer(l, 25, on_tm, &a[7]);
	c.victim = cd_loop_add_timer(l, 35, on_tm, &a[8]);
	cd_loop_add_timer(l, 60, on_tm, &a[9]);
	cd_loop_cancel_timer(l, gone);
	ck_assert_int_eq(cd_loop_run(l), 0);
	uint64_t dt = cd_loop_now_ms() - t0;
	int want[] = { 1, 2, 3, 4, 5, 9 };
	ck_assert_int_eq(c.n, 6);
	for (int k = 0; k < 6; k++)
		ck_assert_int_eq(c.order[k], want[k]);
	/* Never early; how late depends on the host's load (Check's timeout bounds it). */
	ck_assert_uint_ge(dt, 60);
	cd_loop_free(l);
}
END_TEST

static void on_zero(struct cd_loop *l, void *data)
{
	(*(int *)data)++;
	cd_loop_quit(l);
}

START_TEST(test_timer_zero_and_not_early)
{
	struct cd_loop *l = new_loop(_i);
	int n = 0;
	cd_loop_add_timer(l, 0, on_zero, &n);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert_int_eq(n, 1);
	/* A timer never fires early, even across millisecond boundaries. */
	for (int k = 0; k < 5; k++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		cd_loop_add_timer(l, 3, on_zero, &n);
		ck_assert_int_eq(cd_loop_run(l), 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		int64_t us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
		ck_assert_int_ge(us, 3000);
	}
	ck_assert_int_eq(n, 6);
	cd_loop_free(l);
}
END_TEST

static void on_self_cancel(struct cd_loop *l, void *data)
{
	struct cd_timer **self = data;
	cd_loop_cancel_timer(l, *self); /* allowed: no-op for a firing timer */
	*self = NULL;
	cd_loop_quit(l);
}

START_TEST(test_timer_cancel_self)
{
	struct cd_loop *l = new_loop(_i);
	struct cd_timer *t = NULL;
	t = cd_loop_add_timer(l, 1, on_self_cancel, &t);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert_ptr_null(t);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_free_with_pending)
{
	/* Freeing a loop with live timers and watches releases them (valgrind/asan). */
	struct cd_loop *l = new_loop(_i);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	cd_loop_add_fd(l, p[0], CD_LOOP_IN, on_readable, NULL);
	cd_loop_add_timer(l, 100000, quit_timer, NULL);
	cd_loop_free(l);
	close(p[0]);
	close(p[1]);
}
END_TEST

/* ---- children ---- */

struct ch_ctx {
	pid_t pid;
	int status;
	int calls;
};

static void on_child(struct cd_loop *l, pid_t pid, int status, void *data)
{
	struct ch_ctx *c = data;
	c->pid = pid;
	c->status = status;
	c->calls++;
	cd_loop_quit(l);
}

static pid_t fork_exit(int code, int delay_ms)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (delay_ms)
			usleep((useconds_t)delay_ms * 1000);
		_exit(code);
	}
	return pid;
}

static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	return -1;
#endif
}

static void child_case(int kind, bool use_pidfd, int delay_ms)
{
	struct cd_loop *l = new_loop(kind);
	pid_t pid = fork_exit(7, delay_ms);
	int pidfd = use_pidfd ? open_pidfd(pid) : -1;
	/* valgrind does not know pidfd_open: the SIGCHLD path then. */
	if (use_pidfd && pidfd < 0)
		ck_assert_int_eq(errno, ENOSYS);
	struct ch_ctx c = { 0 };
	ck_assert_ptr_nonnull(cd_loop_watch_child(l, pid, pidfd, on_child, &c));
	bool timed_out = false;
	struct cd_timer *t = cd_loop_add_timer(l, 5000, on_deadline, &timed_out);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert(!timed_out);
	ck_assert_int_eq(c.calls, 1);
	ck_assert_int_eq(c.pid, pid);
	ck_assert(WIFEXITED(c.status));
	ck_assert_int_eq(WEXITSTATUS(c.status), 7);
	/* Reaped by the loop. */
	ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
	cd_loop_cancel_timer(l, t);
	if (pidfd >= 0)
		close(pidfd);
	cd_loop_free(l);
}

START_TEST(test_child_pidfd)
{
	child_case(_i, true, 30);
}
END_TEST

START_TEST(test_child_sigchld)
{
	child_case(_i, false, 30);
}
END_TEST

START_TEST(test_child_already_exited)
{
	/* Exited (a zombie) before the watch: still reported. */
	struct cd_loop *l = new_loop(_i);
	pid_t pid = fork_exit(3, 0);
	siginfo_t si;
	ck_assert_int_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	struct ch_ctx c = { 0 };
	cd_loop_watch_child(l, pid, -1, on_child, &c);
	bool timed_out = false;
	cd_loop_add_timer(l, 5000, on_deadline, &timed_out);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert(!timed_out);
	ck_assert_int_eq(c.calls, 1);
	ck_assert_int_eq(WEXITSTATUS(c.status), 3);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_child_many_and_unwatch)
{
	/* Several children on the SIGCHLD path, one unwatched: the rest all reported. */
	struct cd_loop *l = new_loop(_i);
	struct ch_ctx c[4] = { { 0 } };
	struct cd_child_watch *w[4];
	pid_t pids[4];
	for (int k = 0; k < 4; k++) {
		pids[k] = fork_exit(10 + k, 10 * k);
		w[k] = cd_loop_watch_child(l, pids[k], k % 2 ? open_pidfd(pids[k]) : -1, on_child,
					   &c[k]);
	}
	cd_loop_unwatch_child(l, w[2]);
	bool timed_out = false;
	cd_loop_add_timer(l, 5000, on_deadline, &timed_out);
	while (!timed_out && (!c[0].calls || !c[1].calls || !c[3].calls))
		ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert(!timed_out);
	for (int k = 0; k < 4; k++)
		if (k != 2) {
			ck_assert_int_eq(c[k].calls, 1);
			ck_assert_int_eq(WEXITSTATUS(c[k].status), 10 + k);
		}
	ck_assert_int_eq(c[2].calls, 0);
	/* Never reaped by the loop since nobody watched it. */
	int st;
	ck_assert_int_eq(waitpid(pids[2], &st, 0), pids[2]);
	ck_assert_int_eq(WEXITSTATUS(st), 12);
	cd_loop_free(l);
}
END_TEST

/* ---- quit ---- */

static int quit_calls;
static void on_quit_now(struct cd_loop *l, void *data)
{
	(void)data;
	quit_calls++;
	cd_loop_quit(l);
}

START_TEST(test_quit_and_rerun)
{
	struct cd_loop *l = new_loop(_i);
	quit_calls = 0;
	cd_loop_add_timer(l, 5, on_quit_now, NULL);
	cd_loop_add_timer(l, 40, on_quit_now, NULL);
	/* Even when both are due at once (a busy host): the first quits, the second waits. */
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert_int_eq(quit_calls, 1);
	/* The loop can run again: the second timer ends it. */
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert_int_eq(quit_calls, 2);
	/* quit before run: returns at once. */
	cd_loop_quit(l);
	ck_assert_int_eq(cd_loop_run(l), 0);
	cd_loop_free(l);
}
END_TEST

static void on_child_noquit(struct cd_loop *l, pid_t pid, int status, void *data)
{
	struct ch_ctx *c = data;
	(void)l;
	c->pid = pid;
	c->status = status;
	c->calls++;
}

/* Reaped (by the loop): waitid no longer knows it; a zombie or a running child it does. */
static bool reaped(pid_t pid)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
}

struct reap_poll {
	pid_t pids[4];
	const struct ch_ctx *c;
};

/* Quit once the watch was called and every child is reaped; else look again in 5 ms. */
static void on_reap_poll(struct cd_loop *l, void *data)
{
	struct reap_poll *p = data;
	bool all = p->c->calls == 1;
	for (size_t i = 0; i < CD_ARRAY_SIZE(p->pids); i++)
		all = all && reaped(p->pids[i]);
	if (all)
		cd_loop_quit(l);
	else
		ck_assert_ptr_nonnull(cd_loop_add_timer(l, 5, on_reap_poll, p));
}

static void wait_zombie(pid_t pid)
{
	siginfo_t si;
	ck_assert_int_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
}

/*
 * As a subreaper (a pid-1 server in miniature): orphans and unwatched
 * children are reaped, a watched one only through its watch, with its own
 * status, even when it is a zombie next to the orphans. _i: kind, pidfd.
 */
START_TEST(test_reap_orphans)
{
	int kind = _i % 2;
	bool use_pidfd = _i / 2;
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	struct cd_loop *l = new_loop(kind);
	ck_assert_int_eq(cd_loop_reap_orphans(l, true), 0);

	pid_t unwatched = fork_exit(5, 0);
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t middle = fork();
	ck_assert_int_ge(middle, 0);
	if (middle == 0) {
		pid_t g = fork();
		if (g == 0) {
			usleep(50 * 1000);
			_exit(9);
		}
		ssize_t n = write(pfd[1], &g, sizeof(g));
		_exit(n == sizeof(g) ? 0 : 1);
	}
	pid_t orphan;
	ck_assert_int_eq(read(pfd[0], &orphan, sizeof(orphan)), (ssize_t)sizeof(orphan));
	close(pfd[0]);
	close(pfd[1]);
	pid_t watched = fork_exit(7, 0);
	wait_zombie(watched);
	wait_zombie(unwatched);
	wait_zombie(middle);
	int pidfd = use_pidfd ? open_pidfd(watched) : -1;
	struct ch_ctx c = { 0 };
	ck_assert_ptr_nonnull(cd_loop_watch_child(l, watched, pidfd, on_child_noquit, &c));
	/* Until the orphan (it exits 50 ms in) is reaped on its SIGCHLD, and the rest. */
	struct reap_poll rp = { { unwatched, middle, orphan, watched }, &c };
	cd_loop_add_timer(l, 5, on_reap_poll, &rp);
	ck_assert_int_eq(cd_loop_run(l), 0);

	ck_assert_int_eq(c.calls, 1);
	ck_assert_int_eq(c.pid, watched);
	ck_assert(WIFEXITED(c.status));
	ck_assert_int_eq(WEXITSTATUS(c.status), 7);
	pid_t gone[] = { unwatched, middle, orphan, watched };
	for (size_t i = 0; i < CD_ARRAY_SIZE(gone); i++) {
		errno = 0;
		ck_assert_int_eq(waitpid(gone[i], NULL, WNOHANG), -1);
		ck_assert_int_eq(errno, ECHILD);
	}
	if (pidfd >= 0)
		close(pidfd);
	cd_loop_free(l);
}
END_TEST

/* Off (the default): a child nobody watches is left to its owner. */
START_TEST(test_no_reap_orphans_by_default)
{
	struct cd_loop *l = new_loop(_i);
	pid_t unwatched = fork_exit(5, 0);
	wait_zombie(unwatched);
	pid_t watched = fork_exit(7, 20);
	struct ch_ctx c = { 0 };
	ck_assert_ptr_nonnull(cd_loop_watch_child(l, watched, -1, on_child, &c));
	bool timed_out = false;
	cd_loop_add_timer(l, 5000, on_deadline, &timed_out);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert(!timed_out);
	ck_assert_int_eq(c.calls, 1);
	int status;
	ck_assert_int_eq(waitpid(unwatched, &status, WNOHANG), unwatched);
	ck_assert_int_eq(WEXITSTATUS(status), 5);
	cd_loop_free(l);
}
END_TEST

/* ---- signals ---- */

struct sig_ctx {
	int got[4];
	size_t n;
};

static void on_sig(struct cd_loop *l, int signo, void *data)
{
	struct sig_ctx *c = data;
	if (c->n < CD_ARRAY_SIZE(c->got))
		c->got[c->n++] = signo;
	if (c->n == 2)
		cd_loop_quit(l);
}

static void callers_handler(int sig)
{
	(void)sig;
}

START_TEST(test_signals)
{
	struct cd_loop *l = new_loop(_i);
	struct sig_ctx c = { 0 };
	const int sigs[] = { SIGUSR1, SIGUSR2 };

	/* The caller's handler of SIGUSR2, and SIGUSR1 blocked: both are back afterwards. */
	struct sigaction sa = { .sa_handler = callers_handler };
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, &usr1, NULL), 0);

	ck_assert_int_eq(cd_loop_watch_signals(l, (const int[]){ SIGCHLD }, 1, on_sig, &c),
			 -EINVAL);
	ck_assert_int_eq(cd_loop_watch_signals(l, (const int[]){ SIGKILL }, 1, on_sig, &c),
			 -EINVAL);
	ck_assert_int_eq(cd_loop_watch_signals(l, (const int[]){ SIGSTOP }, 1, on_sig, &c),
			 -EINVAL);
	ck_assert_int_eq(cd_loop_watch_signals(l, sigs, 2, on_sig, &c), 0);
	/* One loop of the process at a time. */
	struct cd_loop *other = new_loop(_i);
	ck_assert_int_eq(cd_loop_watch_signals(other, sigs, 1, on_sig, &c), -EBUSY);
	cd_loop_free(other);
	ck_assert_int_eq(cd_loop_watch_signals(l, sigs, 1, on_sig, &c), -EBUSY);

	ck_assert_int_eq(kill(getpid(), SIGUSR1), 0);
	ck_assert_int_eq(kill(getpid(), SIGUSR2), 0);
	bool late = false;
	cd_loop_add_timer(l, 60000, on_deadline, &late);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert(!late);
	ck_assert_int_eq(c.n, 2);
	ck_assert(c.got[0] != c.got[1]);
	for (size_t i = 0; i < 2; i++)
		ck_assert(c.got[i] == SIGUSR1 || c.got[i] == SIGUSR2);

	cd_loop_unwatch_signals(l);
	sigset_t now;
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, NULL, &now), 0);
	ck_assert(sigismember(&now, SIGUSR1));
	ck_assert(!sigismember(&now, SIGUSR2));
	struct sigaction cur;
	ck_assert_int_eq(sigaction(SIGUSR2, NULL, &cur), 0);
	ck_assert(cur.sa_handler == callers_handler);

	/*
	 * A signal that came while nobody ran the loop is dropped when the
	 * watch ends, not given to its default action (SIGTERM's would end
	 * this test's process). Another loop may watch then.
	 */
	struct sigaction dfl = { .sa_handler = SIG_DFL }, checks;
	sigemptyset(&dfl.sa_mask);
	ck_assert_int_eq(sigaction(SIGTERM, &dfl, &checks), 0);
	struct cd_loop *next = new_loop(_i);
	ck_assert_int_eq(cd_loop_watch_signals(next, (const int[]){ SIGTERM }, 1, on_sig, &c), 0);
	ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
	cd_loop_free(next);
	ck_assert_int_eq(sigaction(SIGTERM, NULL, &cur), 0);
	ck_assert(cur.sa_handler == SIG_DFL);
	ck_assert_int_eq(sigaction(SIGTERM, &checks, NULL), 0);
	ck_assert_int_eq(c.n, 2);
	cd_loop_free(l);
}
END_TEST

static void on_first_sig(struct cd_loop *l, int signo, void *data)
{
	if (!*(int *)data)
		*(int *)data = signo;
	cd_loop_quit(l);
}

/* A forked child's signals are its own, even before it resets its handlers. */
START_TEST(test_signals_child)
{
	struct cd_loop *l = new_loop(_i);
	int first = 0;
	const int sigs[] = { SIGUSR1, SIGUSR2 };

	ck_assert_int_eq(cd_loop_watch_signals(l, sigs, 2, on_first_sig, &first), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		sigset_t usr1;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		sigprocmask(SIG_UNBLOCK, &usr1, NULL); /* as a child about to reset them */
		kill(getpid(), SIGUSR1);
		_exit(0);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* What the loop gets first is ours, sent after the child's ended. */
	ck_assert_int_eq(kill(getpid(), SIGUSR2), 0);
	bool late = false;
	cd_loop_add_timer(l, 60000, on_deadline, &late);
	ck_assert_int_eq(cd_loop_run(l), 0);
	ck_assert(!late);
	ck_assert_int_eq(first, SIGUSR2);
	cd_loop_free(l);
}
END_TEST

static Suite *loop_suite(void)
{
	Suite *s = suite_create("loop");
	int n = (int)CD_ARRAY_SIZE(kinds);

	TCase *tc = tcase_create("fd");
	tcase_add_loop_test(tc, test_fd_readable, 0, n);
	tcase_add_loop_test(tc, test_fd_hup, 0, n);
	tcase_add_loop_test(tc, test_fd_writable_and_mod, 0, n);
	tcase_add_loop_test(tc, test_delete_inside_callback, 0, n);
	tcase_add_loop_test(tc, test_bulk_after_the_others, 0, n);
	tcase_add_loop_test(tc, test_bulk_in_turn, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("timer");
	tcase_add_loop_test(tc, test_timer_order_and_cancel, 0, n);
	tcase_add_loop_test(tc, test_timer_zero_and_not_early, 0, n);
	tcase_add_loop_test(tc, test_timer_cancel_self, 0, n);
	tcase_add_loop_test(tc, test_free_with_pending, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("child");
	tcase_add_loop_test(tc, test_child_pidfd, 0, n);
	tcase_add_loop_test(tc, test_child_sigchld, 0, n);
	tcase_add_loop_test(tc, test_child_already_exited, 0, n);
	tcase_add_loop_test(tc, test_child_many_and_unwatch, 0, n);
	tcase_add_loop_test(tc, test_reap_orphans, 0, 2 * n);
	tcase_add_loop_test(tc, test_no_reap_orphans_by_default, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("signals");
	tcase_add_loop_test(tc, test_signals, 0, n);
	tcase_add_loop_test(tc, test_signals_child, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("quit");
	tcase_add_loop_test(tc, test_quit_and_rerun, 0, n);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(loop_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
