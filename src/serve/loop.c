/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The event loop behind loop.h, in two flavours sharing the bookkeeping:
 *
 *  - epoll: fds through epoll (the watch pointer is the epoll cookie), every
 *    timer through one timerfd armed (absolute, CLOCK_MONOTONIC) for the
 *    earliest deadline, children through their pidfd, or for children
 *    without one a signalfd for SIGCHLD (blocked while such a loop lives).
 *  - poll: poll() over an array rebuilt when the watches change, the timeout
 *    computed from the earliest deadline, children through a SIGCHLD handler
 *    writing to a self-pipe. Nothing Linux-specific.
 *
 * Timers live in a binary min-heap ordered by (deadline, creation order), so
 * timers with one deadline fire in the order they were added.
 *
 * Removal inside callbacks: a removed fd watch or child watch is only
 * marked and unlinked from the kernel at once; its memory is released after
 * the dispatch round, so pending events that still point at it are skipped.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#endif

#include "core/util.h"
#include "serve/loop.h"
#include "shared/clock.h"
#include "shared/fd-util.h"

struct cd_watch {
	struct cd_loop *loop;
	int fd;
	cd_loop_events ev;
	cd_loop_io_fn fn;
	void *data;
	bool deleted;
	bool registered;	      /* epoll: currently in its epoll set */
	bool bulk;		      /* CD_LOOP_BULK: in bulk_epfd's set, or the pfds' tail */
	struct cd_watch *prev, *next; /* l->watches, or l->dead_watches once deleted */
};

struct cd_timer {
	uint64_t deadline_ns;
	uint64_t order;
	size_t heap_idx; /* SIZE_MAX when not in the heap */
	cd_loop_timer_fn fn;
	void *data;
};

struct cd_child_watch {
	pid_t pid;
	int pidfd;	      /* borrowed; -1 = SIGCHLD path */
	struct cd_watch *fdw; /* epoll: the pidfd watch */
	cd_loop_child_fn fn;
	void *data;
	bool deleted;
	struct cd_child_watch *prev, *next; /* l->children, or l->dead_children */
	struct cd_child_watch *hnext;	    /* l->child_hash (live ones) */
};

struct cd_loop {
	enum cd_loop_kind kind;
	bool quit;
	bool dispatching;

	/*
	 * Live watches; those deleted during a dispatch round wait in
	 * dead_watches until it ends (pending events may still point at them),
	 * so that freeing them costs what was deleted, not every watch.
	 */
	struct cd_watch *watches;
	struct cd_watch *dead_watches;

	struct cd_timer **heap;
	size_t n_timers, cap_timers;
	uint64_t timer_order;

	struct cd_child_watch *children;      /* live */
	struct cd_child_watch *dead_children; /* unwatched or reaped, freed after the round */
	/* Live children by pid: an exited child is found without walking them all. */
	struct cd_child_watch **child_hash;
	size_t child_hash_cap, n_children;
	size_t n_sigchld_children; /* live ones without a pidfd (the SIGCHLD path) */
	/* SIGCHLD-path children may have exited: reap before sleeping. */
	bool sigchld_pending;
	bool sigchld_setup;
	bool reap_orphans; /* also reap exited children nobody watches */

	/* epoll */
	int epfd;
	/*
	 * The bulk watches' own epoll set (made with the first), itself watched
	 * in epfd: its events are taken a batch per round, after epfd's.
	 */
	int bulk_epfd;
	struct cd_watch *bulk_watch;
	bool bulk_ready;
	int tfd;
	uint64_t armed_ns; /* deadline the timerfd is armed for; 0 = disarmed */
	struct cd_watch *tfd_watch;
	int sfd;
	struct cd_watch *sfd_watch;
	sigset_t old_mask;

	/* poll */
	struct pollfd *pfds;
	struct cd_watch **pwatch; /* parallel to pfds */
	size_t n_pfds, cap_pfds;
	bool pfds_dirty;
	size_t n_pfds_first; /* the watches that are not bulk: pfds[0..n_pfds_first) */
	size_t bulk_cursor;  /* where the next round's bulk events are looked for first */
	int selfpipe[2];
	struct cd_watch *selfpipe_watch;

	/* cd_loop_watch_signals */
	struct {
		bool on;
		int signals[CD_LOOP_MAX_SIGNALS];
		struct sigaction old[CD_LOOP_MAX_SIGNALS];
		size_t n;
		sigset_t blocked;   /* epoll: what watching blocked (it was not before) */
		sigset_t unblocked; /* poll: what watching unblocked (it was blocked) */
		int fd;		    /* epoll: the signalfd; poll: the self-pipe's read end */
		int wfd;	    /* poll: its write end */
		struct cd_watch *watch;
		cd_loop_signal_fn fn;
		void *data;
	} sig;
};

#ifdef __WALL
#define WAIT_ALL_KINDS __WALL /* clone children too */
#else
#define WAIT_ALL_KINDS 0 /* macOS has no other kind */
#endif

/* ---- time ---- */

uint64_t cd_loop_now_ms(void)
{
	return cd_mono_ns() / 1000000u;
}

/* ---- SIGCHLD self-pipe (poll flavour) ---- */

/*
 * A signal handler has no context pointer, so the write ends of every poll
 * loop that waits for SIGCHLD sit in a small table. Slots are written
 * before the handler can see them and cleared before the fd is closed.
 */
#define MAX_SIGCHLD_LOOPS 16
static volatile int sigchld_fds[MAX_SIGCHLD_LOOPS] = { -1, -1, -1, -1, -1, -1, -1, -1,
						       -1, -1, -1, -1, -1, -1, -1, -1 };
static int sigchld_users;
static struct sigaction sigchld_old;

static void sigchld_handler(int sig)
{
	(void)sig;
	int saved = errno;
	for (size_t i = 0; i < MAX_SIGCHLD_LOOPS; i++) {
		int fd = sigchld_fds[i];
		if (fd >= 0) {
			char c = 0;
			/* Non-blocking: a full pipe already says "look". */
			ssize_t r = write(fd, &c, 1);
			(void)r;
		}
	}
	errno = saved;
}

/* ---- fd watches: flavour-specific registration ---- */

#ifdef __linux__
static uint32_t to_epoll(cd_loop_events ev)
{
	uint32_t e = 0;
	if (ev & CD_LOOP_IN)
		e |= EPOLLIN;
	if (ev & CD_LOOP_OUT)
		e |= EPOLLOUT;
	return e;
}

/*
 * A watch that wants nothing is taken out of the epoll set: epoll always
 * reports HUP and ERR, and level-triggered that would spin.
 */
static int epoll_sync(struct cd_loop *l, struct cd_watch *w)
{
	bool want = (w->ev & (CD_LOOP_IN | CD_LOOP_OUT)) && !w->deleted;
	if (!want) {
		if (w->registered) {
			(void)epoll_ctl(w->bulk ? l->bulk_epfd : l->epfd, EPOLL_CTL_DEL, w->fd,
					NULL);
			w->registered = false;
		}
		return 0;
	}
	struct epoll_event e = { .events = to_epoll(w->ev), .data.ptr = w };
	int ep = w->bulk ? l->bulk_epfd : l->epfd;
	if (epoll_ctl(ep, w->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, w->fd, &e) < 0)
		return -errno;
	w->registered = true;
	return 0;
}

static void on_bulk_ready(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	(void)fd;
	(void)ev;
	(void)data;
	l->bulk_ready = true;
}

/* The bulk watches' epoll set, watched in the loop's own. 0 or -errno. */
static int bulk_setup(struct cd_loop *l)
{
	if (l->bulk_epfd >= 0)
		return 0;
	l->bulk_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->bulk_epfd < 0)
		return -errno;
	l->bulk_watch = cd_loop_add_fd(l, l->bulk_epfd, CD_LOOP_IN, on_bulk_ready, NULL);
	if (!l->bulk_watch) {
		int e = errno;
		close(l->bulk_epfd);
		l->bulk_epfd = -1;
		return -e;
	}
	return 0;
}
#endif

struct cd_watch *cd_loop_add_fd(struct cd_loop *l, int fd, cd_loop_events ev, cd_loop_io_fn fn,
				void *data)
{
	struct cd_watch *w = cd_xcalloc(1, sizeof(*w));
	w->loop = l;
	w->fd = fd;
	w->ev = ev & (CD_LOOP_IN | CD_LOOP_OUT);
	w->bulk = ev & CD_LOOP_BULK;
	w->fn = fn;
	w->data = data;
#ifdef __linux__
	if (l->kind == CD_LOOP_EPOLL) {
		int r = w->bulk ? bulk_setup(l) : 0;
		if (r == 0)
			r = epoll_sync(l, w);
		if (r < 0) {
			free(w);
			errno = -r;
			return NULL;
		}
	}
#endif
	w->next = l->watches;
	if (l->watches)
		l->watches->prev = w;
	l->watches = w;
	l->pfds_dirty = true;
	return w;
}

int cd_loop_mod_fd(struct cd_loop *l, struct cd_watch *w, cd_loop_events ev)
{
	if (!w || w->deleted)
		return -EINVAL;
	w->ev = ev & (CD_LOOP_IN | CD_LOOP_OUT);
#ifdef __linux__
	if (l->kind == CD_LOOP_EPOLL)
		return epoll_sync(l, w);
#endif
	l->pfds_dirty = true;
	return 0;
}

static void unlink_watch(struct cd_loop *l, struct cd_watch *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		l->watches = w->next;
	if (w->next)
		w->next->prev = w->prev;
}

void cd_loop_del_fd(struct cd_loop *l, struct cd_watch *w)
{
	if (!w || w->deleted)
		return;
	w->deleted = true;
#ifdef __linux__
	if (l->kind == CD_LOOP_EPOLL)
		(void)epoll_sync(l, w);
#endif
	l->pfds_dirty = true;
	unlink_watch(l, w);
	if (l->dispatching) {
		w->prev = NULL;
		w->next = l->dead_watches;
		l->dead_watches = w;
		return;
	}
	free(w);
}

static void free_deleted_watches(struct cd_loop *l)
{
	while (l->dead_watches) {
		struct cd_watch *w = l->dead_watches;
		l->dead_watches = w->next;
		free(w);
	}
	while (l->dead_children) {
		struct cd_child_watch *c = l->dead_children;
		l->dead_children = c->next;
		free(c);
	}
}

/* ---- timers ---- */

static bool timer_before(const struct cd_timer *a, const struct cd_timer *b)
{
	if (a->deadline_ns != b->deadline_ns)
		return a->deadline_ns < b->deadline_ns;
	return a->order < b->order;
}

static void heap_set(struct cd_loop *l, size_t i, struct cd_timer *t)
{
	l->heap[i] = t;
	t->heap_idx = i;
}

static void heap_up(struct cd_loop *l, size_t i)
{
	struct cd_timer *t = l->heap[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!timer_before(t, l->heap[parent]))
			break;
		heap_set(l, i, l->heap[parent]);
		i = parent;
	}
	heap_set(l, i, t);
}

static void heap_down(struct cd_loop *l, size_t i)
{
	struct cd_timer *t = l->heap[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= l->n_timers)
			break;
		if (c + 1 < l->n_timers && timer_before(l->heap[c + 1], l->heap[c]))
			c++;
		if (!timer_before(l->heap[c], t))
			break;
		heap_set(l, i, l->heap[c]);
		i = c;
	}
	heap_set(l, i, t);
}

static void heap_remove(struct cd_loop *l, struct cd_timer *t)
{
	size_t i = t->heap_idx;
	t->heap_idx = SIZE_MAX;
	l->n_timers--;
	if (i == l->n_timers)
		return;
	struct cd_timer *moved = l->heap[l->n_timers];
	heap_set(l, i, moved);
	heap_up(l, i);
	heap_down(l, moved->heap_idx);
}

#ifdef __linux__
/* Arm the timerfd for the earliest deadline (only when it changed). */
static void epoll_arm(struct cd_loop *l)
{
	uint64_t want = l->n_timers ? l->heap[0]->deadline_ns : 0;
	if (want == l->armed_ns)
		return;
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (want) {
		its.it_value.tv_sec = (time_t)(want / 1000000000u);
		its.it_value.tv_nsec = (long)(want % 1000000000u);
	}
	(void)timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	l->armed_ns = want;
}
#endif

struct cd_timer *cd_loop_add_timer(struct cd_loop *l, uint64_t ms, cd_loop_timer_fn fn, void *data)
{
	struct cd_timer *t = cd_xcalloc(1, sizeof(*t));
	/* A deadline of 0 means "disarmed" to the timerfd bookkeeping. */
	t->deadline_ns = cd_mono_ns() + ms * 1000000u;
	if (t->deadline_ns == 0)
		t->deadline_ns = 1;
	t->order = l->timer_order++;
	t->fn = fn;
	t->data = data;
	if (l->n_timers == l->cap_timers) {
		l->cap_timers = l->cap_timers ? 2 * l->cap_timers : 16;
		l->heap = cd_xreallocarray(l->heap, l->cap_timers, sizeof(*l->heap));
	}
	heap_set(l, l->n_timers++, t);
	heap_up(l, t->heap_idx);
	return t;
}

void cd_loop_cancel_timer(struct cd_loop *l, struct cd_timer *t)
{
	if (!t)
		return;
	/* Not in the heap: it is firing right now; run_timers frees it. */
	if (t->heap_idx == SIZE_MAX) {
		t->fn = NULL;
		return;
	}
	heap_remove(l, t);
	free(t);
}

static void run_timers(struct cd_loop *l)
{
	uint64_t now = cd_mono_ns();
	while (l->n_timers && l->heap[0]->deadline_ns <= now) {
		struct cd_timer *t = l->heap[0];
		heap_remove(l, t);
		if (t->fn)
			t->fn(l, t->data);
		free(t);
		if (l->quit)
			break;
	}
}

/* ---- children ---- */

static size_t pid_bucket(const struct cd_loop *l, pid_t pid)
{
	return ((size_t)pid * 2654435761u) & (l->child_hash_cap - 1);
}

static void child_link(struct cd_loop *l, struct cd_child_watch *c)
{
	if (l->n_children + 1 > l->child_hash_cap / 2) {
		size_t cap = l->child_hash_cap ? 2 * l->child_hash_cap : 64;
		struct cd_child_watch **old = l->child_hash;
		size_t old_cap = l->child_hash_cap;
		l->child_hash = cd_xcalloc(cap, sizeof(*l->child_hash));
		l->child_hash_cap = cap;
		for (size_t i = 0; i < old_cap; i++) {
			for (struct cd_child_watch *x = old[i], *next; x; x = next) {
				next = x->hnext;
				size_t b = pid_bucket(l, x->pid);
				x->hnext = l->child_hash[b];
				l->child_hash[b] = x;
			}
		}
		free(old);
	}
	size_t b = pid_bucket(l, c->pid);
	c->hnext = l->child_hash[b];
	l->child_hash[b] = c;
	c->prev = NULL;
	c->next = l->children;
	if (l->children)
		l->children->prev = c;
	l->children = c;
	l->n_children++;
	if (!c->fdw)
		l->n_sigchld_children++;
}

/* Out of the live list and the hash, into dead_children (freed after the round). */
static void child_retire(struct cd_loop *l, struct cd_child_watch *c)
{
	c->deleted = true;
	for (struct cd_child_watch **pp = &l->child_hash[pid_bucket(l, c->pid)]; *pp;
	     pp = &(*pp)->hnext) {
		if (*pp == c) {
			*pp = c->hnext;
			break;
		}
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		l->children = c->next;
	if (c->next)
		c->next->prev = c->prev;
	l->n_children--;
	if (!c->fdw)
		l->n_sigchld_children--;
	if (c->fdw) {
		cd_loop_del_fd(l, c->fdw);
		c->fdw = NULL;
	}
	c->prev = NULL;
	c->next = l->dead_children;
	l->dead_children = c;
}

static void child_done(struct cd_loop *l, struct cd_child_watch *c, int status)
{
	child_retire(l, c);
	c->fn(l, c->pid, status, c->data);
}

static void reap_one(struct cd_loop *l, struct cd_child_watch *c)
{
	int status;
	pid_t r;
	do
		r = waitpid(c->pid, &status, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == c->pid)
		child_done(l, c, status);
	else if (r < 0 && errno == ECHILD)
		/* Somebody else reaped it: report it as lost rather than hang. */
		child_done(l, c, 0xff << 8);
}

static struct cd_child_watch *find_child_watch(struct cd_loop *l, pid_t pid)
{
	if (!l->child_hash_cap)
		return NULL;
	for (struct cd_child_watch *c = l->child_hash[pid_bucket(l, pid)]; c; c = c->hnext)
		if (c->pid == pid)
			return c;
	return NULL;
}

/*
 * Orphans: peek at the next exited child without reaping it (WNOWAIT), and
 * reap it here only when no watch owns it; a watched one is reaped through
 * its watch now (its callback gets the status), as waitid(P_ALL) would
 * otherwise report that same zombie again and hide the ones behind it.
 */
/* Children reaped per round: 10,000 that exit at once must not hold the loop for all of them. */
#define REAPS_PER_ROUND 64

static void reap_orphans(struct cd_loop *l)
{
	for (unsigned n = 0;; n++) {
		if (n == REAPS_PER_ROUND) {
			/* The rest in the next round, after the other events. */
			l->sigchld_pending = true;
			return;
		}
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | WAIT_ALL_KINDS) < 0) {
			if (errno == EINTR)
				continue;
			return; /* ECHILD: no children at all */
		}
		if (si.si_pid <= 0)
			return; /* children, but none exited */
		struct cd_child_watch *c = find_child_watch(l, si.si_pid);
		if (c) {
			reap_one(l, c);
			if (!c->deleted)
				return; /* not reapable as a watched child: leave it */
			continue;
		}
		int status;
		pid_t r;
		do
			r = waitpid(si.si_pid, &status, WNOHANG | WAIT_ALL_KINDS);
		while (r < 0 && errno == EINTR);
		if (r <= 0)
			return;
	}
}

static void reap_sigchld_children(struct cd_loop *l)
{
	l->sigchld_pending = false;
	/*
	 * Only the children without a pidfd need a look (with epoll and
	 * pidfds, none). Their pids first: a callback may unwatch others.
	 */
	if (l->n_sigchld_children) {
		size_t n = 0;
		pid_t *pids = cd_xreallocarray(NULL, l->n_sigchld_children, sizeof(*pids));
		for (struct cd_child_watch *c = l->children; c && n < l->n_sigchld_children;
		     c = c->next)
			if (!c->fdw)
				pids[n++] = c->pid;
		for (size_t i = 0; i < n && !l->quit; i++) {
			struct cd_child_watch *c = find_child_watch(l, pids[i]);
			if (c && !c->fdw)
				reap_one(l, c);
		}
		free(pids);
	}
	if (l->reap_orphans && !l->quit)
		reap_orphans(l);
}

#ifdef __linux__
static void on_pidfd(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	(void)fd;
	(void)ev;
	reap_one(l, data);
}

static void on_signalfd(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	(void)ev;
	(void)data;
	struct signalfd_siginfo si[8];
	while (read(fd, si, sizeof(si)) > 0)
		;
	l->sigchld_pending = true;
}

static void on_timerfd(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	(void)l;
	(void)ev;
	(void)data;
	uint64_t n;
	ssize_t r = read(fd, &n, sizeof(n));
	(void)r;
	/* The timerfd is now expired: run_timers re-arms it for what is left. */
	l->armed_ns = 0;
}
#endif

static void on_selfpipe(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	(void)ev;
	(void)data;
	char buf[64];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	l->sigchld_pending = true;
}

static int setup_sigchld(struct cd_loop *l)
{
	if (l->sigchld_setup)
		return 0;
#ifdef __linux__
	if (l->kind == CD_LOOP_EPOLL) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGCHLD);
		l->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
		if (l->sfd < 0)
			return -errno;
		sigprocmask(SIG_BLOCK, &set, &l->old_mask);
		l->sfd_watch = cd_loop_add_fd(l, l->sfd, CD_LOOP_IN, on_signalfd, NULL);
		if (!l->sfd_watch)
			return -errno;
		l->sigchld_setup = true;
		return 0;
	}
#endif
	size_t slot = 0;
	while (slot < MAX_SIGCHLD_LOOPS && sigchld_fds[slot] >= 0)
		slot++;
	if (slot == MAX_SIGCHLD_LOOPS)
		return -EMFILE;
	int r = cd_pipe2(l->selfpipe, O_NONBLOCK | O_CLOEXEC);
	if (r < 0)
		return r;
	l->selfpipe_watch = cd_loop_add_fd(l, l->selfpipe[0], CD_LOOP_IN, on_selfpipe, NULL);
	if (!l->selfpipe_watch)
		return -errno;
	sigchld_fds[slot] = l->selfpipe[1];
	if (sigchld_users++ == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = sigchld_handler;
		sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGCHLD, &sa, &sigchld_old);
	}
	l->sigchld_setup = true;
	return 0;
}

static void teardown_sigchld(struct cd_loop *l)
{
	if (!l->sigchld_setup)
		return;
#ifdef __linux__
	if (l->kind == CD_LOOP_EPOLL) {
		cd_loop_del_fd(l, l->sfd_watch);
		close(l->sfd);
		/* Discard a SIGCHLD still pending before unblocking: its default is ignore. */
		sigprocmask(SIG_SETMASK, &l->old_mask, NULL);
		return;
	}
#endif
	for (size_t i = 0; i < MAX_SIGCHLD_LOOPS; i++)
		if (sigchld_fds[i] == l->selfpipe[1])
			sigchld_fds[i] = -1;
	if (--sigchld_users == 0)
		sigaction(SIGCHLD, &sigchld_old, NULL);
	cd_loop_del_fd(l, l->selfpipe_watch);
	close(l->selfpipe[0]);
	close(l->selfpipe[1]);
}

/* ---- signals (cd_loop_watch_signals) ---- */

/* The poll flavour's self-pipe; -1 with the epoll flavour, whose signals stay blocked. */
static volatile int sigwatch_fd = -1;
static volatile pid_t sigwatch_pid; /* the process that watches */
static bool sigwatch_taken;

static void sigwatch_handler(int sig)
{
	int saved = errno;
	int fd = sigwatch_fd;
	/*
	 * Not in a child forked by the watching process before it reset its
	 * handlers (it holds the pipe until it executes): its signals are its own.
	 */
	if (fd >= 0 && getpid() == sigwatch_pid) {
		unsigned char c = (unsigned char)sig;
		/* Non-blocking: with the pipe full, enough signals are waiting already. */
		ssize_t r = write(fd, &c, 1);
		(void)r;
	}
	errno = saved;
}

static void on_sigwatch(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	(void)ev;
	(void)data;
#ifdef __linux__
	if (l->kind == CD_LOOP_EPOLL) {
		struct signalfd_siginfo si;
		while (l->sig.on && read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			l->sig.fn(l, (int)si.ssi_signo, l->sig.data);
		return;
	}
#endif
	unsigned char c;
	while (l->sig.on && read(fd, &c, 1) == 1)
		l->sig.fn(l, c, l->sig.data);
}

int cd_loop_watch_signals(struct cd_loop *l, const int *signals, size_t n, cd_loop_signal_fn fn,
			  void *data)
{
	if (l->sig.on || sigwatch_taken)
		return -EBUSY;
	if (n > CD_LOOP_MAX_SIGNALS)
		return -E2BIG;
	sigset_t mask;
	sigemptyset(&mask);
	for (size_t i = 0; i < n; i++) {
		if (signals[i] == SIGCHLD || signals[i] == SIGKILL || signals[i] == SIGSTOP ||
		    sigaddset(&mask, signals[i]) < 0)
			return -EINVAL;
	}
	int fds[2] = { -1, -1 }, r = 0;
#ifdef __linux__
	if (l->kind == CD_LOOP_EPOLL) {
		fds[0] = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
		if (fds[0] < 0)
			return -errno;
	}
#endif
	if (fds[0] < 0 && (r = cd_pipe2(fds, O_NONBLOCK | O_CLOEXEC)) < 0)
		return r;
	l->sig.watch = cd_loop_add_fd(l, fds[0], CD_LOOP_IN, on_sigwatch, NULL);
	if (!l->sig.watch) {
		r = -errno;
		goto fail;
	}
	l->sig.fd = fds[0];
	l->sig.wfd = fds[1];
	l->sig.fn = fn;
	l->sig.data = data;
	l->sig.n = n;
	sigwatch_pid = getpid();
	sigwatch_fd = fds[1];
	sigwatch_taken = true;
	sigemptyset(&l->sig.blocked);
	sigemptyset(&l->sig.unblocked);
	/*
	 * epoll: blocked before the handler goes in, so that none is taken by
	 * the handler (which writes nowhere then). poll: unblocked after it.
	 */
	sigset_t old;
	if (l->kind == CD_LOOP_EPOLL) {
		sigprocmask(SIG_BLOCK, &mask, &old);
		for (size_t i = 0; i < n; i++)
			if (!sigismember(&old, signals[i]))
				sigaddset(&l->sig.blocked, signals[i]);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sigwatch_handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < n; i++) {
		l->sig.signals[i] = signals[i];
		(void)sigaction(signals[i], &sa, &l->sig.old[i]);
	}
	if (l->kind != CD_LOOP_EPOLL) {
		sigprocmask(SIG_UNBLOCK, &mask, &old);
		for (size_t i = 0; i < n; i++)
			if (sigismember(&old, signals[i]))
				sigaddset(&l->sig.unblocked, signals[i]);
	}
	l->sig.on = true;
	return 0;
fail:
	close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	return r;
}

void cd_loop_unwatch_signals(struct cd_loop *l)
{
	if (!l->sig.on)
		return;
	l->sig.on = false;
	/*
	 * The handler writes nowhere from now on, and a signal still pending
	 * (epoll) meets it when unblocked: it is dropped, not given to the
	 * default action. Then the caller's handlers are back.
	 */
	sigwatch_fd = -1;
	sigprocmask(SIG_UNBLOCK, &l->sig.blocked, NULL);
	sigprocmask(SIG_BLOCK, &l->sig.unblocked, NULL);
	for (size_t i = 0; i < l->sig.n; i++)
		(void)sigaction(l->sig.signals[i], &l->sig.old[i], NULL);
	sigwatch_taken = false;
	cd_loop_del_fd(l, l->sig.watch);
	close(l->sig.fd);
	if (l->sig.wfd >= 0)
		close(l->sig.wfd);
}

struct cd_child_watch *cd_loop_watch_child(struct cd_loop *l, pid_t pid, int pidfd,
					   cd_loop_child_fn fn, void *data)
{
	struct cd_child_watch *c = cd_xcalloc(1, sizeof(*c));
	c->pid = pid;
	c->pidfd = l->kind == CD_LOOP_EPOLL ? pidfd : -1;
	c->fn = fn;
	c->data = data;
#ifdef __linux__
	if (c->pidfd >= 0) {
		/* Processes end in floods (a session's, a mass terminate): bulk. */
		c->fdw = cd_loop_add_fd(l, c->pidfd, CD_LOOP_IN | CD_LOOP_BULK, on_pidfd, c);
		if (!c->fdw) {
			free(c);
			return NULL;
		}
	} else
#endif
	{
		int r = setup_sigchld(l);
		if (r < 0) {
			free(c);
			errno = -r;
			return NULL;
		}
		/* It may have exited before SIGCHLD was being watched. */
		l->sigchld_pending = true;
	}
	child_link(l, c);
	return c;
}

int cd_loop_reap_orphans(struct cd_loop *l, bool on)
{
	if (on) {
		int r = setup_sigchld(l);
		if (r < 0)
			return r;
		/* Orphans may have exited before SIGCHLD was watched. */
		l->sigchld_pending = true;
	}
	l->reap_orphans = on;
	return 0;
}

void cd_loop_unwatch_child(struct cd_loop *l, struct cd_child_watch *c)
{
	if (!c || c->deleted)
		return;
	child_retire(l, c);
	if (!l->dispatching)
		free_deleted_watches(l);
}

/* ---- create / free ---- */

struct cd_loop *cd_loop_new(enum cd_loop_kind kind)
{
	struct cd_loop *l = cd_xcalloc(1, sizeof(*l));
	int e;
	l->kind = kind;
	l->epfd = l->tfd = l->sfd = l->bulk_epfd = -1;
	l->selfpipe[0] = l->selfpipe[1] = -1;
	if (kind == CD_LOOP_EPOLL) {
#ifdef __linux__
		l->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (l->epfd < 0)
			goto fail;
		l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (l->tfd < 0)
			goto fail;
		l->tfd_watch = cd_loop_add_fd(l, l->tfd, CD_LOOP_IN, on_timerfd, NULL);
		if (!l->tfd_watch)
			goto fail;
#else
		errno = EOPNOTSUPP;
		goto fail;
#endif
	} else if (kind != CD_LOOP_POLL) {
		errno = EINVAL;
		goto fail;
	}
	return l;
fail:
	e = errno;
	cd_loop_free(l);
	errno = e;
	return NULL;
}

void cd_loop_free(struct cd_loop *l)
{
	if (!l)
		return;
	l->dispatching = false;
	cd_loop_unwatch_signals(l);
	teardown_sigchld(l);
	for (struct cd_child_watch *c = l->children, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	free(l->child_hash);
	for (struct cd_watch *w = l->watches, *next; w; w = next) {
		next = w->next;
		free(w);
	}
	free_deleted_watches(l);
	for (size_t i = 0; i < l->n_timers; i++)
		free(l->heap[i]);
	free(l->heap);
	free(l->pfds);
	free(l->pwatch);
	if (l->tfd >= 0)
		close(l->tfd);
	if (l->bulk_epfd >= 0)
		close(l->bulk_epfd);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l);
}

enum cd_loop_kind cd_loop_kind(const struct cd_loop *l)
{
	return l->kind;
}

void cd_loop_quit(struct cd_loop *l)
{
	l->quit = true;
}

/* ---- the rounds ---- */

static cd_loop_events mask_for(const struct cd_watch *w, cd_loop_events got)
{
	/* A watch modified earlier in this round only hears what it still wants. */
	return got & (w->ev | CD_LOOP_HUP);
}

#ifdef __linux__
static void dispatch_epoll(struct cd_loop *l, const struct epoll_event *evs, int n)
{
	for (int i = 0; i < n && !l->quit; i++) {
		struct cd_watch *w = evs[i].data.ptr;
		if (w->deleted)
			continue;
		cd_loop_events got = 0;
		if (evs[i].events & EPOLLIN)
			got |= CD_LOOP_IN;
		if (evs[i].events & EPOLLOUT)
			got |= CD_LOOP_OUT;
		if (evs[i].events & (EPOLLHUP | EPOLLERR))
			got |= CD_LOOP_HUP;
		cd_loop_events ev = mask_for(w, got);
		if (ev)
			w->fn(l, w->fd, ev, w->data);
	}
}

static int round_epoll(struct cd_loop *l)
{
	epoll_arm(l);
	struct epoll_event evs[CD_LOOP_BULK_BATCH > 64 ? CD_LOOP_BULK_BATCH : 64];
	int timeout = l->sigchld_pending ? 0 : -1;
	int n = epoll_wait(l->epfd, evs, 64, timeout);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		return -errno;
	}
	l->dispatching = true;
	dispatch_epoll(l, evs, n);
	/*
	 * Then one batch of bulk events (the epoll set reports its ready fds in
	 * turn): while more are ready, bulk_epfd stays readable and the next
	 * round takes the next batch, after whatever else came meanwhile.
	 */
	if (l->bulk_ready && !l->quit) {
		l->bulk_ready = false;
		n = epoll_wait(l->bulk_epfd, evs, CD_LOOP_BULK_BATCH, 0);
		if (n > 0)
			dispatch_epoll(l, evs, n);
	}
	return 0;
}
#endif

static void rebuild_pfds(struct cd_loop *l)
{
	size_t n = 0;
	for (struct cd_watch *w = l->watches; w; w = w->next)
		if (!w->deleted)
			n++;
	if (n > l->cap_pfds) {
		l->cap_pfds = n + 16;
		l->pfds = cd_xreallocarray(l->pfds, l->cap_pfds, sizeof(*l->pfds));
		l->pwatch = cd_xreallocarray(l->pwatch, l->cap_pfds, sizeof(*l->pwatch));
	}
	/* The watches that are not bulk first, then the bulk ones (round_poll). */
	size_t i = 0;
	for (int bulk = 0; bulk < 2; bulk++) {
		if (bulk)
			l->n_pfds_first = i;
		for (struct cd_watch *w = l->watches; w; w = w->next) {
			if (w->deleted || w->bulk != (bool)bulk)
				continue;
			short e = 0;
			if (w->ev & CD_LOOP_IN)
				e |= POLLIN;
			if (w->ev & CD_LOOP_OUT)
				e |= POLLOUT;
			/* Wanting nothing: a negative fd makes poll skip it (no HUP spin). */
			l->pfds[i].fd = e ? w->fd : -1;
			l->pfds[i].events = e;
			l->pfds[i].revents = 0;
			l->pwatch[i] = w;
			i++;
		}
	}
	l->n_pfds = n;
	l->pfds_dirty = false;
}

/* pfds[i]'s events to its watch: whether there were any. */
static bool dispatch_pfd(struct cd_loop *l, size_t i)
{
	short re = l->pfds[i].revents;
	if (!re)
		return false;
	struct cd_watch *w = l->pwatch[i];
	if (w->deleted)
		return true;
	cd_loop_events got = 0;
	if (re & POLLIN)
		got |= CD_LOOP_IN;
	if (re & POLLOUT)
		got |= CD_LOOP_OUT;
	if (re & (POLLHUP | POLLERR | POLLNVAL))
		got |= CD_LOOP_HUP;
	cd_loop_events ev = mask_for(w, got);
	if (ev)
		w->fn(l, w->fd, ev, w->data);
	return true;
}

static int round_poll(struct cd_loop *l)
{
	if (l->pfds_dirty)
		rebuild_pfds(l);
	int timeout = -1;
	if (l->sigchld_pending) {
		timeout = 0;
	} else if (l->n_timers) {
		uint64_t now = cd_mono_ns(), dl = l->heap[0]->deadline_ns;
		uint64_t ms = dl > now ? (dl - now + 999999u) / 1000000u : 0;
		timeout = ms > INT32_MAX ? INT32_MAX : (int)ms;
	}
	int n = poll(l->pfds, (nfds_t)l->n_pfds, timeout);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		return -errno;
	}
	l->dispatching = true;
	/* Callbacks only mark the array dirty; it is rebuilt at the next round. */
	size_t first = l->n_pfds_first, count = l->n_pfds;
	for (size_t i = 0; i < first && !l->quit; i++)
		(void)dispatch_pfd(l, i);
	/*
	 * Then at most a batch of bulk events, from where the last round's
	 * batch ended: what is left is still ready at the next poll.
	 */
	size_t nb = count - first, done = 0, k = 0;
	for (; k < nb && done < CD_LOOP_BULK_BATCH && !l->quit; k++)
		done += dispatch_pfd(l, first + (l->bulk_cursor + k) % nb);
	l->bulk_cursor = nb ? (l->bulk_cursor + k) % nb : 0;
	return 0;
}

int cd_loop_run(struct cd_loop *l)
{
	int r = 0;
	while (!l->quit) {
		if (l->sigchld_pending) {
			l->dispatching = true;
			reap_sigchld_children(l);
			l->dispatching = false;
			free_deleted_watches(l);
			if (l->quit)
				break;
		}
#ifdef __linux__
		if (l->kind == CD_LOOP_EPOLL)
			r = round_epoll(l);
		else
#endif
			r = round_poll(l);
		if (r < 0)
			break;
		if (!l->quit) {
			l->dispatching = true;
			run_timers(l);
		}
		l->dispatching = false;
		free_deleted_watches(l);
	}
	l->quit = false;
	return r;
}
