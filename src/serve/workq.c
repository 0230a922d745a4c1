/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "serve/loop.h"
#include "serve/workq.h"
#include "shared/fd-util.h"
#include "shared/log.h"

struct cd_workq {
	struct cd_loop *loop;
	int done_pipe[2]; /* a byte in it wakes the loop for completions */
	struct cd_watch *watch;
	pthread_mutex_t lock;
	pthread_cond_t wake;   /* a job was queued, or stop */
	pthread_cond_t exited; /* a worker ended (cd_workq_free waits on it) */
	struct cd_work *todo, **todo_tail;
	size_t n_todo; /* jobs in todo */
	struct cd_work *done, **done_tail;
	unsigned max_threads, n_threads, n_idle, n_running;
	unsigned n_started; /* entries of threads[] */
	unsigned n_pending; /* submitted and not completed nor cancelled (loop thread only) */
	bool stop;
	pthread_t *threads;
	struct cd_workq *next_left; /* left: on the list below */
};

/*
 * Pools whose workers did not stop (cd_workq_free's -ETIMEDOUT): never
 * freed, and kept reachable from here, so that a leak checker at exit
 * does not take them for lost. Loop thread only.
 */
static struct cd_workq *left_pools;

static void push(struct cd_work ***tail, struct cd_work *w)
{
	w->next = NULL;
	**tail = w;
	*tail = &w->next;
}

static void *worker(void *arg)
{
	struct cd_workq *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->todo && !q->stop)
			pthread_cond_wait(&q->wake, &q->lock);
		if (q->stop)
			break;
		struct cd_work *w = q->todo;
		q->todo = w->next;
		q->n_todo--;
		if (!q->todo)
			q->todo_tail = &q->todo;
		q->n_idle--;
		q->n_running++;
		pthread_mutex_unlock(&q->lock);

		w->run(w);
		w->ran = true;

		pthread_mutex_lock(&q->lock);
		q->n_running--;
		q->n_idle++;
		push(&q->done_tail, w);
		/* Only wakes the loop: with the pipe full (EAGAIN) it is awake already. */
		(void)!write(q->done_pipe[1], "", 1);
	}
	q->n_threads--;
	q->n_idle--;
	pthread_cond_broadcast(&q->exited);
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

/* Completions, in the order the jobs finished. */
static void run_done(struct cd_workq *q)
{
	pthread_mutex_lock(&q->lock);
	struct cd_work *list = q->done;
	q->done = NULL;
	q->done_tail = &q->done;
	pthread_mutex_unlock(&q->lock);
	while (list) {
		struct cd_work *w = list;
		list = w->next;
		q->n_pending--;
		w->done(w);
	}
}

static void on_event(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	char buf[64];
	while (read(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		;
	run_done(data);
}

struct cd_workq *cd_workq_new(struct cd_loop *l, unsigned max_threads)
{
	/* A pipe rather than an eventfd, which macOS lacks: one code for both. */
	int wake[2];
	if (cd_pipe2(wake, O_NONBLOCK | O_CLOEXEC) < 0)
		return NULL;
	struct cd_workq *q = cd_xcalloc(1, sizeof(*q));
	q->loop = l;
	q->done_pipe[0] = wake[0];
	q->done_pipe[1] = wake[1];
	q->max_threads = max_threads ? max_threads : 1;
	q->threads = cd_xcalloc(q->max_threads, sizeof(*q->threads));
	q->todo_tail = &q->todo;
	q->done_tail = &q->done;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->wake, NULL);
	pthread_cond_init(&q->exited, NULL);
	q->watch = cd_loop_add_fd(l, wake[0], CD_LOOP_IN, on_event, q);
	if (!q->watch) {
		int e = errno;
		(void)cd_workq_free(q, 0, "no");
		errno = e;
		return NULL;
	}
	return q;
}

/* Called with the lock held. */
static int start_thread(struct cd_workq *q)
{
	sigset_t all, old;
	/* Every signal blocked: a process-directed SIGTERM must reach the loop's signalfd. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&q->threads[q->n_started], NULL, worker, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return -r;
	q->n_started++;
	q->n_threads++;
	q->n_idle++;
	return 0;
}

bool cd_workq_can_start(struct cd_workq *q)
{
	pthread_mutex_lock(&q->lock);
	bool r = q->n_idle > q->n_todo || q->n_started < q->max_threads;
	pthread_mutex_unlock(&q->lock);
	return r;
}

int cd_workq_submit(struct cd_workq *q, struct cd_work *w)
{
	int r = 0;
	w->ran = false;
	pthread_mutex_lock(&q->lock);
	/* One more thread when every one is busy (queued jobs count as busy). */
	if (q->n_idle <= q->n_todo && q->n_started < q->max_threads) {
		r = start_thread(q);
		if (r < 0 && q->n_threads > 0)
			r = 0; /* the others will get to it */
		else if (r < 0)
			cd_log_warn("serve: cannot start a worker thread: %s", strerror(-r));
	}
	if (r == 0) {
		push(&q->todo_tail, w);
		q->n_todo++;
		pthread_cond_signal(&q->wake);
	}
	pthread_mutex_unlock(&q->lock);
	if (r == 0)
		q->n_pending++;
	return r;
}

bool cd_workq_cancel(struct cd_workq *q, struct cd_work *w)
{
	bool found = false;
	pthread_mutex_lock(&q->lock);
	for (struct cd_work **pp = &q->todo; *pp; pp = &(*pp)->next) {
		if (*pp != w)
			continue;
		*pp = w->next;
		if (q->todo_tail == &w->next)
			q->todo_tail = pp;
		w->next = NULL;
		q->n_todo--;
		found = true;
		break;
	}
	pthread_mutex_unlock(&q->lock);
	if (found)
		q->n_pending--;
	return found;
}

unsigned cd_workq_pending(const struct cd_workq *q)
{
	return q ? q->n_pending : 0;
}

int cd_workq_free(struct cd_workq *q, unsigned timeout_ms, const char *what)
{
	if (!q)
		return 0;
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (deadline.tv_nsec >= 1000000000) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000;
	}

	pthread_mutex_lock(&q->lock);
	q->stop = true;
	/* Not started: never run, only completed (freed) below. */
	while (q->todo) {
		struct cd_work *w = q->todo;
		q->todo = w->next;
		push(&q->done_tail, w);
	}
	q->todo_tail = &q->todo;
	q->n_todo = 0;
	pthread_cond_broadcast(&q->wake);
	int r = 0;
	while (q->n_threads > 0 && r == 0)
		r = pthread_cond_timedwait(&q->exited, &q->lock, &deadline);
	bool stuck = q->n_threads > 0;
	pthread_mutex_unlock(&q->lock);
	if (stuck) {
		/*
		 * A job blocked in the kernel (a hung file system): the process
		 * is about to exit, which ends the thread. The pool is never
		 * freed (its lock and lists stay valid until then), and its
		 * jobs' done callbacks never run: the jobs stay as they are.
		 */
		cd_log_warn("serve: %u %s job(s) did not stop within %u ms; exiting anyway",
			    q->n_running, what, timeout_ms);
		q->next_left = left_pools;
		left_pools = q;
		return -ETIMEDOUT;
	}
	for (unsigned i = 0; i < q->n_started; i++)
		pthread_join(q->threads[i], NULL);
	run_done(q);
	if (q->watch)
		cd_loop_del_fd(q->loop, q->watch);
	close(q->done_pipe[0]);
	close(q->done_pipe[1]);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->wake);
	pthread_cond_destroy(&q->exited);
	free(q->threads);
	free(q);
	return 0;
}
