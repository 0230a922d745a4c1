/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve/sandboxes.h"
#include "serve/server.h"
#include "serve/workq.h"
#include "shared/log.h"

/*
 * Whether a loopback TCP client of the server's uid is a sandboxed process
 * is told by looking for its socket among the processes' descriptors
 * (sandboxes.h): a look whose cost a sandbox sets (a million descriptors
 * took seconds), so it runs on a thread of its own, never on the event
 * loop. Meanwhile the connection is held in its handshake: nothing it
 * sends is read (cd_ws_want_read) until the verdict, which sets c->refused
 * unless the client is outside every sandbox; its request is answered
 * after that (ws.c), with 403 when refused. The handshake timeout still
 * runs.
 *
 * Clients that arrive while a look runs wait for the next one, which
 * takes them all at once: a sandbox connecting again and again costs a
 * look per batch, not one per connection. Each client's deadline counts
 * from its accept (CD_SANDBOXES_JUDGE_MS), waiting included. A judgement
 * names its connection by serial number, which is never reused: a
 * connection that ended meanwhile is simply not found.
 */

struct request {
	struct request *next;
	unsigned long serial;
	struct cd_tcp_client client;
};

struct batch {
	struct cd_work work; /* first: the pool hands it back */
	struct cd_admit *admit;
	struct request *reqs;
	size_t n;
};

struct cd_admit {
	struct cd_server *server;
	struct cd_workq *q;
	char *hold; /* test hook: $CORDON_TEST_JUDGE_HOLD, a FIFO (owned) */
	struct request *waiting, **waiting_tail;
	bool running; /* a batch is with the worker */
	bool stopping;
	atomic_bool cancel;
};

/*
 * Test hook (CORDON_TEST_JUDGE_HOLD=FIFO): each batch waits for a line on
 * the FIFO before it looks, so that a test can hold a judgement open for
 * as long as it takes to show that the loop serves others meanwhile:
 * "go" judges, "expire" judges as if the deadlines had passed.
 */
static void hold(struct batch *b)
{
	char line[16] = "";
	int fd = open(b->admit->hold, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n > 0 && strncmp(line, "expire", 6) == 0)
		for (struct request *r = b->reqs; r; r = r->next)
			r->client.deadline_ms = 0;
}

static void batch_run(struct cd_work *w)
{
	struct batch *b = (struct batch *)w;
	struct cd_tcp_client **cl = cd_xcalloc(b->n, sizeof(*cl));
	size_t i = 0;

	if (b->admit->hold)
		hold(b);
	for (struct request *r = b->reqs; r; r = r->next)
		cl[i++] = &r->client;
	cd_sandboxes_judge_tcp_many(cl, b->n, &b->admit->cancel);
	free(cl);
}

static struct cd_conn *conn_of(struct cd_server *s, unsigned long serial)
{
	for (struct cd_conn *c = s->conns; c; c = c->next)
		if (c->serial == serial && !c->freed)
			return c;
	return NULL;
}

static void submit(struct cd_admit *a);

static void batch_done(struct cd_work *w)
{
	struct batch *b = (struct batch *)w;
	struct cd_admit *a = b->admit;

	for (struct request *r = b->reqs, *next; r; r = next) {
		next = r->next;
		struct cd_conn *c = conn_of(a->server, r->serial);
		if (c && c->judging) {
			const struct cd_tcp_client *cl = &r->client;
			if (!w->ran)
				snprintf(c->refused, sizeof(c->refused),
					 "cannot tell whether the client is a sandboxed process: "
					 "the server is shutting down");
			else if (cl->verdict == CD_PEER_SANDBOXED)
				snprintf(c->refused, sizeof(c->refused),
					 "the client is a sandboxed process: %s", cl->why);
			else if (cl->verdict == CD_PEER_UNDECIDED)
				snprintf(
					c->refused, sizeof(c->refused),
					"cannot tell whether the client is a sandboxed process: %s",
					cl->why);
			cd_log_debug("serve: connection %lu (%s): %s", c->serial, c->peer,
				     c->refused[0] ? c->refused : "outside every sandbox");
			c->judging = false;
			cd_conn_update_watches(c);
		}
		free(r);
	}
	free(b);
	a->running = false;
	submit(a);
}

/* Hand what waits to the worker, unless a batch is there already. */
static void submit(struct cd_admit *a)
{
	if (a->running || a->stopping || !a->waiting)
		return;
	struct batch *b = cd_xcalloc(1, sizeof(*b));
	b->work.run = batch_run;
	b->work.done = batch_done;
	b->admit = a;
	b->reqs = a->waiting;
	for (struct request *r = b->reqs; r; r = r->next)
		b->n++;
	a->waiting = NULL;
	a->waiting_tail = &a->waiting;
	int r = cd_workq_submit(a->q, &b->work);
	if (r < 0) {
		/* No thread to look with: refused, as undecided (fail closed). */
		for (struct request *q = b->reqs; q; q = q->next) {
			q->client.verdict = CD_PEER_UNDECIDED;
			snprintf(q->client.why, sizeof(q->client.why),
				 "the server cannot start a thread to look for the client's "
				 "socket: %s",
				 strerror(-r));
		}
		b->work.ran = true;
		a->running = true;
		batch_done(&b->work);
		return;
	}
	a->running = true;
}

void cd_admit_tcp(struct cd_conn *c, uint64_t inode)
{
	struct cd_server *s = c->server;
	struct cd_admit *a = s->admit;

	if (!a) {
		a = cd_xcalloc(1, sizeof(*a));
		a->server = s;
		a->waiting_tail = &a->waiting;
		atomic_init(&a->cancel, false);
		const char *h = getenv("CORDON_TEST_JUDGE_HOLD");
		a->hold = h && *h ? cd_xstrdup(h) : NULL;
		a->q = cd_workq_new(s->loop, 1);
		if (!a->q)
			cd_log_warn(
				"serve: cannot make the thread that tells sandboxed TCP clients "
				"apart: %s; such clients are refused",
				strerror(errno));
		s->admit = a;
	}
	struct request *r = cd_xcalloc(1, sizeof(*r));
	r->serial = c->serial;
	r->client.inode = inode;
	r->client.deadline_ms = cd_loop_now_ms() + CD_SANDBOXES_JUDGE_MS;
	c->judging = true;
	cd_conn_update_watches(c);
	if (!a->q) {
		c->judging = false;
		snprintf(c->refused, sizeof(c->refused),
			 "cannot tell whether the client is a sandboxed process: the server "
			 "cannot make a worker to look for its socket");
		cd_conn_update_watches(c);
		free(r);
		return;
	}
	*a->waiting_tail = r;
	a->waiting_tail = &r->next;
	submit(a);
}

void cd_admit_stop(struct cd_server *s)
{
	struct cd_admit *a = s->admit;

	if (!a)
		return;
	a->stopping = true;
	atomic_store(&a->cancel, true);
	/* The look notices the cancel at its next 256 descriptors. */
	if (a->q && cd_workq_free(a->q, 5000, "admission") < 0) {
		s->workers_left = true; /* still running: left to the process's exit */
		return;
	}
	for (struct request *r = a->waiting, *next; r; r = next) {
		next = r->next;
		free(r);
	}
	free(a->hold);
	free(a);
	s->admit = NULL;
}
