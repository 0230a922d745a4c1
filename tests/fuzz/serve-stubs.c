/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fake loop and the server stubs of the transport targets (see
 * serve-stubs.h).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"
#include "serve-stubs.h"
#include "serve/fs.h"
#include "serve/http.h"
#include "serve/status.h"
#include "serve/workq.h"

/* Turns of the loop one feed may take before it counts as a busy loop. */
#define MAX_TURNS 100000

struct cd_watch {
	struct cd_watch *next;
	int fd;
	cd_loop_events ev;
	cd_loop_io_fn fn;
	void *data;
	bool dead;
};

struct cd_timer {
	struct cd_timer *next;
	uint64_t ms;
	cd_loop_timer_fn fn;
	void *data;
	bool dead;
};

struct cd_loop {
	struct cd_watch *watches;
	struct cd_timer *timers, **timers_tail;
};

static struct cd_loop fake_loop;
char **fuzz_requests;

/* ---- the loop ---- */

struct cd_watch *cd_loop_add_fd(struct cd_loop *l, int fd, cd_loop_events ev, cd_loop_io_fn fn,
				void *data)
{
	struct cd_watch *w = cd_xcalloc(1, sizeof(*w));
	*w = (struct cd_watch){ .next = l->watches, .fd = fd, .ev = ev, .fn = fn, .data = data };
	l->watches = w;
	return w;
}

int cd_loop_mod_fd(struct cd_loop *l, struct cd_watch *w, cd_loop_events ev)
{
	w->ev = ev;
	return 0;
}

void cd_loop_del_fd(struct cd_loop *l, struct cd_watch *w)
{
	if (w)
		w->dead = true;
}

struct cd_timer *cd_loop_add_timer(struct cd_loop *l, uint64_t ms, cd_loop_timer_fn fn, void *data)
{
	struct cd_timer *t = cd_xcalloc(1, sizeof(*t));
	*t = (struct cd_timer){ .ms = ms, .fn = fn, .data = data };
	*l->timers_tail = t;
	l->timers_tail = &t->next;
	return t;
}

void cd_loop_cancel_timer(struct cd_loop *l, struct cd_timer *t)
{
	if (t)
		t->dead = true;
}

uint64_t cd_loop_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sweep(struct cd_loop *l)
{
	for (struct cd_watch **p = &l->watches; *p;) {
		struct cd_watch *w = *p;
		if (w->dead) {
			*p = w->next;
			free(w);
		} else {
			p = &w->next;
		}
	}
	l->timers_tail = &l->timers;
	for (struct cd_timer **p = &l->timers; *p;) {
		struct cd_timer *t = *p;
		if (t->dead) {
			*p = t->next;
			free(t);
		} else {
			l->timers_tail = &t->next;
			p = &t->next;
		}
	}
}

/* One turn: the due timers as they were when it began, then the ready watches. */
static bool turn(struct cd_loop *l)
{
	bool progress = false;
	struct cd_timer *last = NULL;

	for (struct cd_timer *t = l->timers; t; t = t->next)
		last = t;
	for (struct cd_timer *t = l->timers; t; t = t->next) {
		if (!t->dead && t->ms == 0) {
			t->dead = true;
			t->fn(l, t->data);
			progress = true;
		}
		if (t == last)
			break;
	}
	for (struct cd_watch *w = l->watches; w; w = w->next) {
		if (w->dead)
			continue;
		struct pollfd p = {
			.fd = w->fd,
			.events = (short)((w->ev & CD_LOOP_IN ? POLLIN : 0) |
					  (w->ev & CD_LOOP_OUT ? POLLOUT : 0)),
		};
		if (poll(&p, 1, 0) != 1 || !p.revents)
			continue;
		cd_loop_events ev = 0;
		if (p.revents & POLLIN)
			ev |= CD_LOOP_IN;
		if (p.revents & POLLOUT)
			ev |= CD_LOOP_OUT;
		if (p.revents & (POLLHUP | POLLERR))
			ev |= CD_LOOP_HUP | (w->ev & (CD_LOOP_IN | CD_LOOP_OUT));
		w->fn(l, w->fd, ev, w->data);
		progress = true;
	}
	sweep(l);
	return progress;
}

/* ---- the server ---- */

void fuzz_server_init(struct cd_server *s)
{
	memset(s, 0, sizeof(*s));
	fake_loop = (struct cd_loop){ .timers_tail = &fake_loop.timers };
	s->loop = &fake_loop;
	s->opts.max_connections = CD_SERVE_DEFAULT_MAX_CONNS;
	s->opts.max_sessions = CD_SERVE_DEFAULT_MAX_SESSIONS;
	/* Small, so that back-pressure comes into play. */
	s->opts.max_queued_bytes = 512;
	s->opts.session_ttl_ms = CD_SERVE_DEFAULT_SESSION_TTL;
	s->opts.ping_ms = CD_SERVE_DEFAULT_PING;
	s->opts.stall_ms = CD_SERVE_DEFAULT_STALL;
	s->listen_fd = -1;
	fuzz_requests = cd_strv_free(fuzz_requests);
}

void fuzz_server_done(struct cd_server *s)
{
	fuzz_assert(!s->conns && s->n_conns == 0);
	for (struct cd_watch *w = fake_loop.watches; w; w = w->next)
		w->dead = true;
	for (struct cd_timer *t = fake_loop.timers; t; t = t->next)
		t->dead = true;
	sweep(&fake_loop);
}

/* A small generator (xorshift64) seeded from the data: the same input, the same run. */
static uint64_t next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static bool drain(int fd, struct cd_strbuf *out)
{
	char buf[4096];
	bool any = false;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0) {
			cd_strbuf_append_n(out, buf, (size_t)n);
			any = true;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return any;
	}
}

/* Turn until nothing happens; the client reads now and then, and always before giving up. */
static void settle(struct cd_server *s, int out_fd, struct cd_strbuf *out, uint64_t *rng)
{
	for (unsigned turns = 0;; turns++) {
		if (turns > MAX_TURNS)
			fuzz_fail("the loop does not settle: a busy loop");
		bool progress = turn(s->loop);
		if (!progress || next_rand(rng) % 4 == 0)
			progress = drain(out_fd, out) || progress;
		if (!progress)
			return;
	}
}

void fuzz_serve_feed(struct cd_server *s, int fd, bool shut_wr, int out_fd, const uint8_t *data,
		     size_t size, struct cd_strbuf *out)
{
	uint64_t rng = 0x9e3779b97f4a7c15u ^ size;
	size_t off = 0;

	for (size_t i = 0; i < size && i < 64; i++)
		rng = (rng ^ data[i]) * 0x100000001b3u;
	if (!rng)
		rng = 1;
	while (off < size) {
		size_t n = size - off;
		uint64_t pick = next_rand(&rng);
		if (pick % 4)
			n = 1 + (size_t)(pick >> 8) % (n < 200 ? n : 200);
		ssize_t w = write(fd, data + off, n);
		if (w > 0)
			off += (size_t)w;
		else if (w < 0 && errno != EAGAIN && errno != EINTR)
			break; /* the server closed its end: the rest cannot go */
		settle(s, out_fd, out, &rng);
	}
	if (shut_wr)
		(void)shutdown(fd, SHUT_WR);
	else
		close(fd);
	settle(s, out_fd, out, &rng);
	drain(out_fd, out);
}

/* ---- stubs ---- */

void cd_methods_request(struct cd_conn *c, const char *id, const char *method,
			const struct cd_json *params)
{
	cd_strv_push(&fuzz_requests, method);
	if (!cd_startswith(method, "big")) {
		cd_conn_result(c, id, "{}", 2);
		return;
	}
	/* More than a pipe or a socket buffer holds: partial writes, back-pressure. */
	size_t n = 200000;
	char *big = cd_xmalloc(n + 2);
	memset(big + 1, 'x', n);
	big[0] = big[n + 1] = '"';
	cd_conn_result(c, id, big, n + 2);
	free(big);
}

bool cd_methods_notification(struct cd_conn *c, const char *method)
{
	return cd_streq(method, "initialized");
}

void cd_fs_conn_pump(struct cd_conn *c)
{
}

bool cd_fs_conn_busy(const struct cd_conn *c)
{
	return false;
}

void cd_fs_conn_release(struct cd_conn *c)
{
}

/* /metrics and /status answer a fixed body: the HTTP side is what is fuzzed. */
void cd_serve_status_json(struct cd_server *s, struct cd_strbuf *sb)
{
	cd_strbuf_append(sb, "{}");
}

void cd_serve_metrics_text(struct cd_server *s, struct cd_strbuf *sb)
{
	cd_strbuf_append(sb, "# fuzz\n");
}

/* No http/request: nothing to release or pause with a connection. */
void cd_http_conn_release(struct cd_conn *c)
{
}

void cd_http_conn_paused(struct cd_conn *c, bool paused)
{
}

/* No fs streams: nothing holds a connection's input back. */
bool cd_fs_conn_input_held(const struct cd_conn *c)
{
	return false;
}

/* No workers: large messages are parsed where they come in. */
struct cd_workq *cd_server_prep_workq(struct cd_server *s)
{
	return NULL;
}

int cd_workq_submit(struct cd_workq *q, struct cd_work *w)
{
	fuzz_assert(!q);
	return -ENOSYS;
}

void cd_start_conn_gone(struct cd_start *st, const char *why)
{
	fuzz_assert(!st);
}

void cd_pending_drop(struct cd_conn *c)
{
	fuzz_assert(!c->pending);
}

void cd_server_stop(struct cd_server *s)
{
	s->stopping = true;
}

void cd_session_detach(struct cd_session *se, struct cd_conn *c)
{
}

void cd_session_pause_output(struct cd_session *se, bool paused)
{
}

unsigned cd_listen_established(const struct cd_server *s)
{
	return 0;
}

void cd_session_delivered(struct cd_session *se)
{
}

void cd_listen_handshake_done(struct cd_conn *c)
{
}

void cd_listen_resume(struct cd_server *s)
{
}
