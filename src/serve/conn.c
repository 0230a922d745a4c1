/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#ifdef __linux__
#include <linux/sockios.h>
#endif
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/budget.h"
#include "serve/fs.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/server.h"
#include "serve/testhook.h"
#include "serve/workq.h"
#include "shared/log.h"

/*
 * A connection (reference 1.3-1.5). On stdio and unix sockets input is
 * read non-blocking into one buffer and split into lines; on WebSocket,
 * ws.c appends each complete message to the same buffer behind a 4-byte
 * length. Messages are handled strictly one after the other, and a long
 * poll stops the handling (not the reading) until it is answered. The
 * buffer holds at most one maximal message plus its framing; when it is
 * full the connection stops reading.
 *
 * Output is one queue of complete JSON lines. Appends try a write at once
 * unless a batch is open (a run of requests: one write at the end) or the
 * pipe was full (then the loop watches stdout and writes when it drains, so
 * everything queued in between goes out in one write). A client that does
 * not read makes the queue grow: beyond the connection's cap no further
 * requests are handled and the processes' output is no longer read (their
 * pipes fill and they block) until the queue is down to half the cap. The
 * cap is --max-queued-bytes, or the connection's share of the server's
 * memory budget when that is less (update_cap); and while the server is
 * over its budget no queue grows past 256 KiB. The replies of requests and the
 * exit/close events still queue, bounded by what one request or one
 * process can add. A network connection that takes nothing for
 * --stall-timeout while back-pressure is on (from over its cap until down
 * to half of it) is dropped (its session detaches and records on); stdio
 * waits, since its end would end the server.
 *
 * On a socket both directions use one descriptor: out_fd is a dup of
 * in_fd so that each direction has its own watch (epoll registers a
 * descriptor once).
 */

/* One maximal line, its "\r\n" included. */
#define IN_CAP	    ((size_t)CD_SERVE_MAX_LINE + 2)
#define IN_READ_MIN (64 * 1024)
/* Above this, an emptied inbound buffer is freed rather than kept. */
#define IN_KEEP_CAP (1024 * 1024)
#define OUT_COMPACT (1024 * 1024)
/* Above this, an emptied outbound buffer is freed rather than kept. */
#define OUT_KEEP_CAP (4 * 1024 * 1024)
/* Held processes whose output is all in the kernel: how often to look whether the peer read it. */
#define UNREAD_POLL_MS 10
/* However many connections share the budget, each may queue this much. */
#define QUEUE_FLOOR (256 * 1024)

static void flush(struct cd_conn *c);
static void update_in_watch(struct cd_conn *c);
static void connection_gone(struct cd_conn *c, const char *why);
static bool peer_closed(const struct cd_conn *c);
static void out_watch(struct cd_conn *c, bool on);

/* ---- JSON writers ---- */

size_t cd_fmt_u64(char *buf, uint64_t v)
{
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

/* ---- outbound queue ---- */

char *cd_conn_out_reserve(struct cd_conn *c, size_t n)
{
	struct cd_strbuf *sb = &c->out;
	size_t need = sb->len + n + 1;
	if (need > sb->cap) {
		size_t cap = sb->cap ? sb->cap : 64 * 1024;
		while (cap < need)
			cap *= 2;
		sb->buf = cd_xrealloc(sb->buf, cap);
		sb->cap = cap;
	}
	return sb->buf + sb->len;
}

void cd_conn_out_commit(struct cd_conn *c, size_t n)
{
	if (c->out_broken)
		return; /* nobody reads: drop it */
	c->out.len += n;
	c->out_committed += n;
	c->out.buf[c->out.len] = '\0';
}

static size_t out_queued(const struct cd_conn *c)
{
	return c->out.len - c->out_off;
}

size_t cd_conn_out_queued(const struct cd_conn *c)
{
#ifdef CD_WEBSOCKET
	if (c->ws)
		return out_queued(c) + cd_ws_queued(c);
#endif
	return out_queued(c);
}

/*
 * Lossless mode (proc.h): how far the client has taken the stream. On a
 * unix socket, what left the queue less what the kernel still holds for
 * the peer (SIOCOUTQ, as of the last write or look: the peer has not read
 * it). Over WebSocket, what the client's pongs say it read (ws.c): TCP's
 * SIOCOUTQ only says what the peer's kernel acknowledged, and a client
 * that drops loses what its receive buffer held.
 */
uint64_t cd_conn_delivered(const struct cd_conn *c)
{
	if (c->delivered_frozen)
		return c->delivered_final;
#ifdef CD_WEBSOCKET
	if (c->ws)
		return cd_ws_delivered(c);
#endif
	/* Lent: what the worker writes (the queue first) counts once it is back. */
	uint64_t d = c->out_lent ? c->lent_from : c->out_consumed;
	size_t q = c->kernel_unread;
	return d > q ? d - q : 0;
}

/* Lossless mode: bytes written out that the peer may not have read yet. */
static bool peer_unread(const struct cd_conn *c)
{
	return c->kernel_unread > 0 ||
	       (c->ws && !c->freed && cd_conn_delivered(c) < c->out_consumed);
}

/*
 * What the kernel holds unread for the peer (lossless sessions only: one
 * ioctl per write). It only goes down while the peer is there: a peer that
 * closed or reset the connection makes the kernel drop what it held, which
 * the peer never read.
 */
/*
 * Linux: what the kernel holds in the socket for the peer (SIOCOUTQ).
 * macOS has no such count for a unix socket (its data goes straight to
 * the peer's receive buffer, and SO_NWRITE stays 0): 0 there, so the
 * lossless mode's promise over a unix socket is Linux's until the macOS
 * port of cordon serve gives it another ground (issue 17).
 */
static size_t unread_bytes(int fd)
{
	int n = 0;
#ifdef __linux__
	if (ioctl(fd, SIOCOUTQ, &n) < 0)
		n = 0;
#else
	(void)fd;
#endif
	return n > 0 ? (size_t)n : 0;
}

#ifdef POLLRDHUP
#define PEER_GONE_EVENTS POLLRDHUP
#else
#define POLLRDHUP	 0
#define PEER_GONE_EVENTS POLLIN /* macOS: asks for nothing at 0, and hang-up comes with it */
#endif

static void note_kernel_unread(struct cd_conn *c)
{
	if (c->kind != CD_CONN_UNIX || !c->session || !c->session->lossless || c->out_lent)
		return;
	size_t now = unread_bytes(c->out_fd);
	if (now < c->kernel_unread) {
		struct pollfd p = { .fd = c->out_fd, .events = PEER_GONE_EVENTS };
		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return;
	}
	c->kernel_unread = now;
}

static void on_unread_poll(struct cd_loop *l, void *data)
{
	struct cd_conn *c = data;
	size_t before = c->kernel_unread;
	c->unread_poll = NULL;
	note_kernel_unread(c);
	if (c->kernel_unread < before)
		cd_conn_out_progress(c); /* the peer read: held processes may go on */
	else
		cd_conn_kick(c);
}

/*
 * The connection's cap: --max-queued-bytes, or its share of the budget
 * when that is less. The share is what the rest of the server's memory
 * (retained output, fs data, inbound buffers, everything but the queues)
 * leaves of --max-memory, split evenly among the connections, never below
 * QUEUE_FLOOR. Computed afresh at each change of the queue: a connection
 * that comes or goes moves the others' caps at their next write.
 */
static void update_cap(struct cd_conn *c)
{
	size_t max = c->server->opts.max_queued_bytes;
	size_t limit = cd_mem_limit();
	size_t q = cd_mem_used_kind(CD_MEM_QUEUED), t = cd_mem_used();
	size_t others = t > q ? t - q : 0;
	size_t avail = limit > others ? limit - others : 0;
	size_t share = avail / (c->server->n_live ? c->server->n_live : 1);
	if (share < QUEUE_FLOOR)
		share = QUEUE_FLOOR;
	c->out_cap = share < max ? share : max;
}

/* Charge the budget with what the connection holds now. */
static void account(struct cd_conn *c)
{
	cd_mem_set(CD_MEM_QUEUED, &c->mem_queued, c->freed ? 0 : cd_conn_out_queued(c));
	cd_mem_set(CD_MEM_INBOUND, &c->mem_inbound, c->freed ? 0 : c->in_cap);
}

void cd_conn_abort(struct cd_conn *c, const char *why)
{
	/*
	 * What the kernel still holds for this client goes with it (a reset,
	 * not a FIN stuck behind data nobody reads): the client sees at once
	 * that it was dropped, and the socket's buffers are freed.
	 */
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	if (c->kind == CD_CONN_WS)
		(void)setsockopt(c->in_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	c->out_broken = true;
	c->out.len = c->out_off = 0;
	connection_gone(c, why);
}

static void on_stall(struct cd_loop *l, void *data)
{
	struct cd_conn *c = data;
	c->stall = NULL;
	cd_metric_pressure(CD_PRESSURE_STALLED);
	if (cd_conn_out_queued(c) == 0 && c->ws)
		/*
		 * Its kernel took everything, and no pong confirmed it (ws.c:
		 * ack pings): it stopped reading, or it answers no ping.
		 */
		cd_log_warn("serve: connection %lu (%s): the client read nothing for %u ms, as "
			    "far as its pongs tell (%llu bytes sent are unconfirmed: it stopped "
			    "reading, or it answers no ping, which RFC 6455 requires): dropping it",
			    c->serial, c->peer, c->server->opts.stall_ms,
			    (unsigned long long)(c->out_consumed - cd_conn_delivered(c)));
	else
		cd_log_warn("serve: connection %lu (%s): the client read nothing for %u ms with "
			    "%zu bytes queued: dropping it",
			    c->serial, c->peer, c->server->opts.stall_ms, cd_conn_out_queued(c));
	cd_conn_abort(c, "stalled");
}

/*
 * Back-pressure: while the client does not read, stop reading the
 * processes' output (their pipes fill and they block) and stop reading
 * requests; resume at half the cap. progress: bytes left the queue since
 * the last call (restarts the stall timer).
 */
static void update_backpressure(struct cd_conn *c, bool progress)
{
	size_t q = cd_conn_out_queued(c);
	account(c);
	update_cap(c);
	/*
	 * Held processes look again whenever the client took more, or the
	 * measure of what it read moved (a process can be held on a measure
	 * that a write or a look at the socket has since brought up to date).
	 */
	uint64_t d = c->session && c->session->lossless ? cd_conn_delivered(c) : 0;
	if (d != c->delivered_seen) {
		c->delivered_seen = d;
		progress = true;
	}
	if (progress && c->session && c->session->conn == c)
		cd_session_delivered(c->session);
	/*
	 * Processes held for a client whose output all went to the kernel:
	 * no write will come to say when the peer has read it, so look again
	 * every UNREAD_POLL_MS while that lasts.
	 */
	bool waiting = c->session && c->session->conn == c && c->session->n_held > 0 && q == 0 &&
		       c->kernel_unread > 0 && !c->freed;
	if (waiting && !c->unread_poll)
		c->unread_poll =
			cd_loop_add_timer(c->server->loop, UNREAD_POLL_MS, on_unread_poll, c);
	/*
	 * Over the whole budget, every queue past QUEUE_FLOOR stops growing
	 * too: shares computed when there were fewer connections (or less
	 * retained output) do not add up past the limit.
	 */
	bool over_budget = cd_mem_used() > cd_mem_limit();
	if (!c->output_paused && (q > c->out_cap || (over_budget && q > QUEUE_FLOOR))) {
		c->output_paused = true;
		cd_metric_pressure(CD_PRESSURE_OUTPUT_PAUSED);
		if (c->out_cap < c->server->opts.max_queued_bytes || q <= c->out_cap) {
			cd_mem_note_pressure();
			cd_log_debug(
				"serve: connection %lu (%s): %zu bytes queued, over its share of "
				"the memory budget (%zu of %zu in use): output paused",
				c->serial, c->peer, q, cd_mem_used(), cd_mem_limit());
		}
		cd_session_pause_output(c->session, true);
		cd_http_conn_paused(c, true);
		cd_testhook_event("output-paused conn=%lu on=1", c->serial);
	} else if (c->output_paused && q <= c->out_cap / 2 &&
		   (!over_budget || q <= QUEUE_FLOOR / 2)) {
		c->output_paused = false;
		cd_session_pause_output(c->session, false);
		cd_http_conn_paused(c, false);
		cd_testhook_event("output-paused conn=%lu on=0", c->serial);
	}
	if (c->kind == CD_CONN_STDIO || c->freed)
		return;
	/*
	 * The timer runs for as long as back-pressure is on, from over the cap
	 * down to half of it, or while processes of the session are held
	 * (lossless mode: their output waits for this client to take what is
	 * queued): a client that read a little and then stopped leaves the
	 * queue in between, and would otherwise hold its session's processes
	 * blocked for good.
	 * Lent: the queue cannot drain; the worker's answer has a timer of its
	 * own (fs.c), and this one runs as usual once it is out.
	 */
	bool held = c->session && c->session->conn == c && c->session->n_held > 0 &&
		    (q > 0 || peer_unread(c));
	if ((c->output_paused || held) && !c->out_lent) {
		if (c->stall && progress) {
			cd_loop_cancel_timer(c->server->loop, c->stall);
			c->stall = NULL;
		}
		if (!c->stall)
			c->stall = cd_loop_add_timer(c->server->loop, c->server->opts.stall_ms,
						     on_stall, c);
	} else if (c->stall) {
		cd_loop_cancel_timer(c->server->loop, c->stall);
		c->stall = NULL;
	}
}

void cd_conn_out_progress(struct cd_conn *c)
{
	update_backpressure(c, true);
}

void cd_conn_kick(struct cd_conn *c)
{
	if (c->batch == 0 && !c->out_watching)
		flush(c);
	else
		update_backpressure(c, false);
}

int cd_conn_out_lend(struct cd_conn *c, struct cd_strbuf *pending)
{
	if (c->out_broken || c->freed || c->closing || c->out_lent)
		return -1;
	/* Its own descriptor: the connection may close its own while the worker writes. */
	int fd = fcntl(c->out_fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
	if (fd < 0)
		return -1;
	size_t n = out_queued(c);
#ifdef CD_WEBSOCKET
	if (c->ws) {
		cd_strbuf_done(pending);
		if (cd_ws_take_pending(c, pending) < 0) {
			close(fd);
			return -1;
		}
		cd_strbuf_done(&c->out);
	} else
#endif
	{
		cd_strbuf_done(pending);
		*pending = c->out;
		if (n && c->out_off)
			memmove(pending->buf, pending->buf + c->out_off, n);
		pending->len = n;
	}
	c->out = (struct cd_strbuf){ 0 };
	c->out_off = 0;
	c->lent_from = c->out_consumed;
	c->out_consumed += n; /* the worker writes them first */
	c->out_lent = true;
	out_watch(c, false);
	update_backpressure(c, n > 0);
	return fd;
}

void cd_conn_out_return(struct cd_conn *c, const char *broken)
{
	if (!c->out_lent || c->freed)
		return;
	if (broken) {
		/* What the worker had to write may not have reached the peer: none of it counts. */
		c->delivered_final = cd_conn_delivered(c);
		c->delivered_frozen = true;
	}
	c->out_lent = false;
	if (broken) {
		c->out_broken = true;
		c->out.len = c->out_off = 0;
		connection_gone(c, broken);
		return;
	}
	cd_conn_kick(c);
}

static void out_append(struct cd_conn *c, const char *s, size_t n)
{
	memcpy(cd_conn_out_reserve(c, n), s, n);
	cd_conn_out_commit(c, n);
}

static void append_id_line_start(struct cd_strbuf *sb, const char *id)
{
	cd_strbuf_append(sb, "{\"id\":");
	cd_strbuf_append(sb, id);
}

void cd_conn_result(struct cd_conn *c, const char *id, const char *result, size_t len)
{
	size_t idlen = strlen(id);
	char *w = cd_conn_out_reserve(c, idlen + len + 20);
	char *p = w;
	memcpy(p, "{\"id\":", 6);
	p += 6;
	memcpy(p, id, idlen);
	p += idlen;
	memcpy(p, ",\"result\":", 10);
	p += 10;
	memcpy(p, result, len);
	p += len;
	memcpy(p, "}\n", 2);
	p += 2;
	cd_conn_out_commit(c, (size_t)(p - w));
	cd_conn_kick(c);
}

void cd_conn_error(struct cd_conn *c, const char *id, int code, const char *msg)
{
	struct cd_strbuf sb = { 0 };
	append_id_line_start(&sb, id);
	cd_strbuf_printf(&sb, ",\"error\":{\"code\":%d,\"message\":", code);
	cd_json_write_cstr(&sb, msg);
	cd_strbuf_append(&sb, "}}\n");
	out_append(c, sb.buf, sb.len);
	cd_strbuf_done(&sb);
	cd_conn_kick(c);
}

static void on_out(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	flush(data);
}

static void out_watch(struct cd_conn *c, bool on)
{
	if (on == c->out_watching)
		return;
	if (on) {
		c->out_watch = cd_loop_add_fd(c->server->loop, c->out_fd, CD_LOOP_OUT, on_out, c);
		if (!c->out_watch) {
			/* Not pollable (regular file): such writes do not block anyway. */
			c->out_is_file = true;
			return;
		}
	} else {
		cd_loop_del_fd(c->server->loop, c->out_watch);
		c->out_watch = NULL;
	}
	c->out_watching = on;
}

static void connection_gone(struct cd_conn *c, const char *why)
{
	if (c->kind == CD_CONN_STDIO) {
		c->closing = true;
		cd_server_stop(c->server);
		return;
	}
	cd_conn_close(c, why);
}

/*
 * Write what is queued until it is all out or the fd cannot take more.
 * 0 when the queue is empty, -EAGAIN, or another -errno (-EIO for a write
 * that wrote nothing).
 */
static int write_queued(struct cd_conn *c)
{
	/* A worker writes to the stream (cd_conn_out_lend): nothing may come in between. */
	if (c->out_lent)
		return -EAGAIN;
#ifdef CD_WEBSOCKET
	if (c->ws)
		return cd_ws_flush(c);
#endif
	while (out_queued(c) > 0) {
		ssize_t w = write(c->out_fd, c->out.buf + c->out_off, out_queued(c));
		if (w > 0) {
			c->out_off += (size_t)w;
			c->out_consumed += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		return w < 0 ? -errno : -EIO;
	}
	return 0;
}

/*
 * A pipe to the client holds 64 KiB by default: less than one burst of
 * notifications (64 KiB of output is 88 KB of JSON), so a relaying server
 * stalls on EAGAIN and wakes up again for every burst. 1 MiB (the default
 * pipe-max-size, allowed without privileges) doubles the relay rate here.
 * The kernel charges pipe buffers to the user (pipe-user-pages-soft, 64
 * MiB by default; past it every new pipe of the user gets two pages), so
 * only a server that has actually filled its pipe grows it: the first
 * EAGAIN. Best effort, once per connection, never shrinks it.
 */
void cd_out_grow_pipe(int fd)
{
#ifdef F_SETPIPE_SZ /* macOS sizes its pipes itself (up to 64 KiB) */
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
		return;
	int cur = fcntl(fd, F_GETPIPE_SZ);
	if (cur >= 0 && cur < CD_SERVE_OUT_PIPE_SIZE)
		(void)fcntl(fd, F_SETPIPE_SZ, CD_SERVE_OUT_PIPE_SIZE);
#else
	(void)fd;
#endif
}

static void grow_pipe(struct cd_conn *c)
{
	c->pipe_grown = true;
	cd_out_grow_pipe(c->out_fd);
}

/*
 * Write what the queue holds now, the head of a message still being encoded
 * included, and return as soon as the fd takes no more: the client never
 * holds the loop. A pipe's writer and reader copy under one lock, so a
 * 1.4 MB fs/readBlock answer written at its end kept the client waiting
 * for all of it, and was copied in from a buffer already out of the cache.
 * Written in slices as it is encoded, the client copies one slice out
 * while the next is made. A byte stream does not care where a write cuts a
 * line; a WebSocket frame must hold one whole message, so there this does
 * nothing. Errors, the watch for a full fd and back-pressure are left to
 * the flush after the message.
 */
void cd_conn_out_push(struct cd_conn *c)
{
	if (c->kind == CD_CONN_WS || c->out_broken || c->freed || c->out_lent)
		return;
	while (out_queued(c) > 0) {
		ssize_t w = write(c->out_fd, c->out.buf + c->out_off, out_queued(c));
		if (w > 0) {
			c->out_off += (size_t)w;
			c->out_consumed += (size_t)w;
		} else if (w < 0 && errno == EAGAIN && !c->pipe_grown)
			grow_pipe(c);
		else if (!(w < 0 && errno == EINTR))
			break;
	}
	/* The next slice goes where this one was, still in the cache. */
	if (out_queued(c) == 0)
		c->out.len = c->out_off = 0;
}

static void flush(struct cd_conn *c)
{
	size_t before = cd_conn_out_queued(c);
	bool was_over = before > c->out_cap;

	if (c->out_lent) {
		/* A worker writes to the stream: what comes meanwhile waits (cd_conn_out_return). */
		update_backpressure(c, false);
		return;
	}

	while (!c->out_broken && !c->freed) {
		int r = write_queued(c);
		if (r == 0)
			break;
		if (r == -EAGAIN && !c->pipe_grown) {
			grow_pipe(c);
			continue;
		}
		if (r == -EAGAIN && !c->out_is_file) {
			out_watch(c, true);
			/* Not return: a partial write may have brought the queue under
			 * its cap, and the held-back requests below must be resumed. */
			if (c->out_watching)
				break;
			continue;
		}
		cd_log_debug("serve: connection %lu (%s): write: %s", c->serial, c->peer,
			     strerror(-r));
		c->out_broken = true;
		c->out.len = c->out_off = 0;
		connection_gone(c, "write failed");
		break;
	}
	if (c->freed)
		return;
	note_kernel_unread(c);
	if (out_queued(c) == 0) {
		c->out.len = c->out_off = 0;
		/* A large answer (fs/readFile) must not stay resident once sent. */
		if (c->out.cap > OUT_KEEP_CAP)
			cd_strbuf_done(&c->out);
		/* ws: the frames handed to wslay may still be waiting for the socket. */
		if (cd_conn_out_queued(c) == 0)
			out_watch(c, false);
	} else if (c->out_off >= OUT_COMPACT && c->out_off * 2 >= c->out.len) {
		memmove(c->out.buf, c->out.buf + c->out_off, out_queued(c));
		c->out.len -= c->out_off;
		c->out_off = 0;
	}
	update_backpressure(c, cd_conn_out_queued(c) < before);
	/* ws stops reading while its output is backed up (cd_ws_want_read). */
	if (c->ws)
		update_in_watch(c);
	/*
	 * Requests were held back while the queue was over its cap; a unix
	 * client at the end of its input waited for its queue to empty.
	 */
	if ((was_over && cd_conn_out_queued(c) <= c->out_cap) ||
	    (c->in_eof && c->kind == CD_CONN_UNIX && before > 0 && cd_conn_out_queued(c) == 0))
		cd_conn_schedule_process(c);
}

void cd_conn_final_flush(struct cd_conn *c, int timeout_ms)
{
	uint64_t deadline = cd_loop_now_ms() + (uint64_t)timeout_ms;

	/* A worker's answer was cut at shutdown: the stream ends in its middle. */
	if (c->out_lent)
		return;

	while (!c->out_broken && write_queued(c) == -EAGAIN) {
		uint64_t now = cd_loop_now_ms();
		if (now >= deadline)
			break;
		struct pollfd pfd = { .fd = c->out_fd, .events = POLLOUT };
		(void)poll(&pfd, 1, (int)(deadline - now));
	}
}

/* ---- inbound lines ---- */

static const char *transport_name(const struct cd_conn *c)
{
	switch (c->kind) {
	case CD_CONN_STDIO:
		return "stdio";
	case CD_CONN_UNIX:
		return "unix socket";
	case CD_CONN_WS:
		return "websocket";
	}
	return "?";
}

static void parse_error(struct cd_conn *c, const char *detail)
{
	struct cd_strbuf sb = { 0 };
	/* The released Codex binary's wording, which clients may match on. */
	if (c->kind == CD_CONN_WS)
		cd_strbuf_printf(&sb,
				 "failed to parse websocket JSON-RPC message from exec-server "
				 "websocket %s: %s",
				 c->ws_addr, detail);
	else
		cd_strbuf_printf(&sb, "failed to parse JSON-RPC message from exec-server %s: %s",
				 transport_name(c), detail);
	cd_conn_error(c, "-1", CD_RPC_INVALID_REQUEST, sb.buf);
	cd_strbuf_done(&sb);
}

/* The JSON text of a valid request id (string or i64), or NULL. */
static char *id_text(const struct cd_json *id)
{
	if (!id)
		return NULL;
	if (id->type == CD_JSON_STRING) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append_json_string(&sb, id->u.str.s, id->u.str.len);
		return cd_strbuf_steal(&sb);
	}
	int64_t v;
	if (id->type == CD_JSON_NUMBER && cd_json_int64(id, &v) == 0)
		return cd_xasprintf("%" PRId64, v);
	return NULL;
}

/*
 * Why an "id" that is not a valid RequestId (a string or an integer that
 * fits i64) was refused, in the released binary's words (probed on Codex
 * 0.169.0). Its decoder buffers the id before matching the variants, and
 * that buffer takes integers up to u128/i128 but refuses wider ones as
 * floats; an integer it cannot buffer draws a distinct message naming it:
 *   2^63 .. 2^64-1          "did not match any variant" (a u64, not an i64)
 *   2^64 .. 2^128-1         "invalid type: integer `N` as u128, ..."
 *   -2^127 .. -2^63-1       "invalid type: integer `N` as i128, ..."
 *   wider, fractions, exponents, null, booleans, arrays, objects:
 *                           "did not match any variant"
 * JSON integers have no leading zeros, so N is the literal as written.
 */
static void bad_id_detail(const struct cd_json *id, char *buf, size_t size)
{
	static const char u64_max[] = "18446744073709551615";
	static const char u128_max[] = "340282366920938463463374607431768211455";
	static const char i128_min_mag[] = "170141183460469231731687303715884105728";
	const char *s = id->type == CD_JSON_NUMBER ? id->u.num.text : NULL;
	bool neg = s && *s == '-';
	const char *digits = s ? s + neg : NULL;

	if (digits && *digits && strspn(digits, "0123456789") == strlen(digits)) {
		/* An integer outside i64 (id_text took those inside). */
		size_t n = strlen(digits);
		bool in_u64 = n < sizeof(u64_max) - 1 ||
			      (n == sizeof(u64_max) - 1 && strcmp(digits, u64_max) <= 0);
		const char *lim = neg ? i128_min_mag : u128_max;
		size_t lim_n = strlen(lim);
		bool in_128 = n < lim_n || (n == lim_n && strcmp(digits, lim) <= 0);
		if (neg && in_128) {
			snprintf(buf, size,
				 "invalid type: integer `%s` as i128, expected any value", s);
			return;
		}
		if (!neg && in_128 && !in_u64) {
			snprintf(buf, size,
				 "invalid type: integer `%s` as u128, expected any value", s);
			return;
		}
	}
	snprintf(buf, size, "data did not match any variant of untagged enum RequestId");
}

/*
 * The message-level decoder of the released binary (Codex 0.169.0), as
 * probed: an object is a request or notification when it has "method", a
 * response when it has "result", an error object otherwise, and each is
 * then decoded as a struct, its members in the order they were sent, the
 * first member of the wrong type ending it with the decoder's words; missing
 * members are named afterwards. Members no struct knows are ignored, and
 * numbers of any kind are named "number".
 */

/* serde's name for the value a field did not expect; a string is quoted as Rust's Debug does. */
static void serde_unexpected(const struct cd_json *v, struct cd_strbuf *sb)
{
	switch (v->type) {
	case CD_JSON_NULL:
		cd_strbuf_append(sb, "null");
		return;
	case CD_JSON_FALSE:
		cd_strbuf_append(sb, "boolean `false`");
		return;
	case CD_JSON_TRUE:
		cd_strbuf_append(sb, "boolean `true`");
		return;
	case CD_JSON_NUMBER:
		cd_strbuf_append(sb, "number");
		return;
	case CD_JSON_STRING:
		cd_strbuf_append(sb, "string \"");
		for (size_t i = 0; i < v->u.str.len; i++) {
			unsigned char ch = (unsigned char)v->u.str.s[i];
			if (ch == '"' || ch == '\\')
				cd_strbuf_printf(sb, "\\%c", ch);
			else if (ch == '\n')
				cd_strbuf_append(sb, "\\n");
			else if (ch == '\r')
				cd_strbuf_append(sb, "\\r");
			else if (ch == '\t')
				cd_strbuf_append(sb, "\\t");
			else if (ch == 0)
				cd_strbuf_append(sb, "\\0");
			else if (ch < 0x20 || ch == 0x7f)
				cd_strbuf_printf(sb, "\\u{%x}", ch);
			else
				cd_strbuf_append_c(sb, (char)ch);
		}
		cd_strbuf_append_c(sb, '"');
		return;
	case CD_JSON_ARRAY:
		cd_strbuf_append(sb, "sequence");
		return;
	case CD_JSON_OBJECT:
	case CD_JSON_TYPE_COUNT:
		break;
	}
	cd_strbuf_append(sb, "map");
}

static void invalid_type(struct cd_strbuf *sb, const struct cd_json *v, const char *expected)
{
	cd_strbuf_append(sb, "invalid type: ");
	serde_unexpected(v, sb);
	cd_strbuf_printf(sb, ", expected %s", expected);
}

static bool is_request_id(const struct cd_json *id)
{
	int64_t x;
	return id->type == CD_JSON_STRING ||
	       (id->type == CD_JSON_NUMBER && cd_json_int64(id, &x) == 0);
}

/* An i64 field (the error code): other numbers are "invalid number". */
static bool check_i64(const struct cd_json *v, struct cd_strbuf *sb)
{
	int64_t x;
	if (v->type == CD_JSON_NUMBER) {
		if (cd_json_int64(v, &x) == 0)
			return true;
		cd_strbuf_append(sb, "invalid number");
		return false;
	}
	invalid_type(sb, v, "i64");
	return false;
}

static bool check_string(const struct cd_json *v, struct cd_strbuf *sb)
{
	if (v->type == CD_JSON_STRING)
		return true;
	invalid_type(sb, v, "a string");
	return false;
}

/*
 * The "error" member of an error object: the struct {code: i64, data:
 * optional, message: string}, from an object or, serde allowing it, from an
 * array holding code, data and message in that order.
 */
static bool check_error_struct(const struct cd_json *e, struct cd_strbuf *sb)
{
	static const char what[] = "struct JSONRPCErrorError with 3 elements";

	if (e->type == CD_JSON_ARRAY) {
		size_t n = e->u.arr.n;
		if (n == 0) {
			cd_strbuf_printf(sb, "invalid length 0, expected %s", what);
			return false;
		}
		if (!check_i64(e->u.arr.items[0], sb))
			return false;
		if (n < 3) {
			/* data may be absent, message may not: it is element 2 */
			cd_strbuf_printf(sb, "invalid length 2, expected %s", what);
			return false;
		}
		if (!check_string(e->u.arr.items[2], sb))
			return false;
		if (n > 3) {
			cd_strbuf_printf(sb, "invalid length %zu, expected fewer elements in array",
					 n);
			return false;
		}
		return true;
	}
	if (e->type != CD_JSON_OBJECT) {
		invalid_type(sb, e, "struct JSONRPCErrorError");
		return false;
	}
	bool code = false, message = false;
	for (size_t i = 0; i < e->u.obj.n; i++) {
		const struct cd_json_member *m = &e->u.obj.members[i];
		if (strcmp(m->key, "code") == 0) {
			if (!check_i64(m->value, sb))
				return false;
			code = true;
		} else if (strcmp(m->key, "message") == 0) {
			if (!check_string(m->value, sb))
				return false;
			message = true;
		}
	}
	if (!code || !message) {
		cd_strbuf_printf(sb, "missing field `%s`", !code ? "code" : "message");
		return false;
	}
	return true;
}

enum envelope {
	ENVELOPE_INVALID, /* the detail says why */
	ENVELOPE_REQUEST,
	ENVELOPE_NOTIFICATION,
	ENVELOPE_RESPONSE, /* a result or an error object from the client */
};

/*
 * Classify a parsed message; for ENVELOPE_INVALID, *sb holds the detail of
 * the id -1 answer.
 */
static enum envelope classify(const struct cd_json *v, struct cd_strbuf *sb)
{
	if (v->type != CD_JSON_OBJECT) {
		cd_strbuf_append(sb, "expected a JSON-RPC object");
		return ENVELOPE_INVALID;
	}
	bool has_method = cd_json_get(v, "method") != NULL;
	bool has_result = cd_json_get(v, "result") != NULL;
	bool has_error = false, has_id = false;

	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct cd_json_member *m = &v->u.obj.members[i];
		if (strcmp(m->key, "id") == 0) {
			has_id = true;
			if (!is_request_id(m->value)) {
				char detail[160];
				bad_id_detail(m->value, detail, sizeof(detail));
				cd_strbuf_append(sb, detail);
				return ENVELOPE_INVALID;
			}
		} else if (has_method && strcmp(m->key, "method") == 0) {
			if (!check_string(m->value, sb))
				return ENVELOPE_INVALID;
		} else if (!has_method && !has_result && strcmp(m->key, "error") == 0) {
			has_error = true;
			if (!check_error_struct(m->value, sb))
				return ENVELOPE_INVALID;
		}
	}
	if (has_method)
		return has_id ? ENVELOPE_REQUEST : ENVELOPE_NOTIFICATION;
	if (!has_result && !has_error) {
		cd_strbuf_append(sb, "missing field `error`");
		return ENVELOPE_INVALID;
	}
	if (!has_id) {
		cd_strbuf_append(sb, "missing field `id`");
		return ENVELOPE_INVALID;
	}
	return ENVELOPE_RESPONSE;
}

/*
 * Messages larger than this are parsed on a worker (cd_server_prep_workq):
 * the parser reads about 200-350 MB/s of long strings here, and as little
 * as 60 MB/s of small values, so a 64 MiB message took 200-320 ms of the
 * loop (and freeing its tree up to 40 ms more), and 1 MiB of short strings
 * up to 50 ms; 256 KiB costs at most a few ms. The
 * connection's later messages wait (as behind a long poll), so they are
 * still handled in order; other connections carry on meanwhile.
 */
#define PARSE_OFF_LOOP (256 * 1024)

struct cd_parse {
	struct cd_work work;  /* first: the pool hands this back */
	struct cd_conn *conn; /* NULL once it ended */
	char *text;	      /* owned: a copy (the input buffer moves on) */
	size_t len;
	int r;
	struct cd_json *v; /* owned */
	struct cd_json_error err;
	char *hook_key; /* owned: CORDON_TEST_HOLD=parse holds it (testhook.h) */
};

static const struct cd_json_limits msg_limits = {
	.max_bytes = CD_SERVE_MAX_LINE,
	.max_values = CD_SERVE_MAX_VALUES,
	.max_depth = CD_SERVE_MAX_DEPTH,
};

/* A large message's tree, freed off the loop (a job that only frees). */
struct tree_free {
	struct cd_work work;
	struct cd_json *v;
};

static void tree_free_run(struct cd_work *w)
{
	struct tree_free *t = (struct tree_free *)w;
	t->v = cd_json_free(t->v);
}

static void tree_free_done(struct cd_work *w)
{
	struct tree_free *t = (struct tree_free *)w;
	cd_json_free(t->v);
	free(t);
}

/* The message parsed (or not): classify it and dispatch (reference 1.4). */
static void handle_parsed(struct cd_conn *c, int r, struct cd_json *v,
			  const struct cd_json_error *jerr, bool large)
{
	if (r < 0) {
		char detail[256];
		snprintf(detail, sizeof(detail), "%s at line %u column %u", jerr->msg, jerr->line,
			 jerr->col);
		parse_error(c, detail);
		return;
	}
	/* A handler may take the tree (process/start prepares off the loop). */
	c->cur_msg = v;
	/* Classified as the released binary does (see classify). */
	struct cd_strbuf detail = { 0 };
	const struct cd_json *method = cd_json_get(v, "method");
	char *idt = NULL;
	switch (classify(v, &detail)) {
	case ENVELOPE_INVALID:
		parse_error(c, detail.buf);
		break;
	case ENVELOPE_REQUEST:
		idt = id_text(cd_json_get(v, "id"));
		cd_methods_request(c, idt, method->u.str.s, cd_json_get(v, "params"));
		break;
	case ENVELOPE_NOTIFICATION:
		if (!cd_methods_notification(c, method->u.str.s)) {
			cd_log_debug("serve: closing the connection after notification '%s'",
				     method->u.str.s);
			connection_gone(c, "unexpected notification");
		}
		break;
	case ENVELOPE_RESPONSE:
		/* The server sends no requests: the connection ends. */
		cd_log_debug("serve: closing the connection after a client %s",
			     cd_json_get(v, "result") ? "response" : "error object");
		connection_gone(c, "client sent a response");
		break;
	}
	cd_strbuf_done(&detail);
	free(idt);
	struct cd_json *left = c->cur_msg;
	c->cur_msg = NULL;
	struct cd_workq *q = large && left ? cd_server_prep_workq(c->server) : NULL;
	if (q) {
		struct tree_free *t = cd_xcalloc(1, sizeof(*t));
		t->work.run = tree_free_run;
		t->work.done = tree_free_done;
		t->v = left;
		if (cd_workq_submit(q, &t->work) == 0)
			return;
		free(t);
	}
	cd_json_free(left);
}

static void parse_run(struct cd_work *w)
{
	struct cd_parse *p = (struct cd_parse *)w;
	static const atomic_bool never = false;
	if (p->hook_key)
		cd_testhook_hold(p->hook_key, "parse", &never);
	memset(&p->err, 0, sizeof(p->err));
	p->r = cd_json_parse(p->text, p->len, &msg_limits, &p->v, &p->err);
	free(p->text);
	p->text = NULL;
}

static void parse_done(struct cd_work *w)
{
	struct cd_parse *p = (struct cd_parse *)w;
	struct cd_conn *c = p->conn;
	if (c && w->ran) {
		c->parsing = NULL;
		struct cd_json *v = p->v;
		p->v = NULL;
		/* Nor once the server stops (the pool's pending completions run then). */
		if (!c->freed && !c->closing && !c->server->stopping) {
			c->batch++;
			handle_parsed(c, p->r, v, &p->err, true);
			c->batch--;
			cd_conn_kick(c);
		} else {
			cd_json_free(v);
		}
		cd_conn_schedule_process(c);
	} else if (c) {
		c->parsing = NULL;
	}
	free(p->text);
	free(p->hook_key);
	cd_json_free(p->v);
	free(p);
}

static void handle_line(struct cd_conn *c, const char *line, size_t len)
{
	struct cd_json *v = NULL;
	struct cd_json_error jerr;
	struct cd_workq *q = len > PARSE_OFF_LOOP ? cd_server_prep_workq(c->server) : NULL;

	if (q) {
		struct cd_parse *p = cd_xcalloc(1, sizeof(*p));
		p->work.run = parse_run;
		p->work.done = parse_done;
		p->conn = c;
		if (cd_testhook_holds("parse"))
			p->hook_key = cd_xasprintf("conn=%lu id=parse", c->serial);
		p->text = cd_xmalloc(len);
		memcpy(p->text, line, len);
		p->len = len;
		if (cd_workq_submit(q, &p->work) == 0) {
			c->parsing = p;
			return;
		}
		free(p->text);
		free(p->hook_key);
		free(p);
	}
	memset(&jerr, 0, sizeof(jerr));
	int r = cd_json_parse(line, len, &msg_limits, &v, &jerr);
	handle_parsed(c, r, v, &jerr, false);
}

static bool is_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

static void overflow(struct cd_conn *c)
{
	if (c->kind == CD_CONN_STDIO)
		fprintf(stderr,
			"cordon: serve: JSON-RPC message from stdio exceeds maximum length of %u "
			"bytes\n",
			CD_SERVE_MAX_LINE);
	else
		cd_log_warn("serve: connection %lu (%s): JSON-RPC message exceeds maximum length "
			    "of %u bytes",
			    c->serial, c->peer, CD_SERVE_MAX_LINE);
	connection_gone(c, "message too long");
}

static void dispatch_line(struct cd_conn *c, const char *line, size_t len)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len > CD_SERVE_MAX_LINE) {
		overflow(c);
		return;
	}
	if (is_blank(line, len))
		return;
	handle_line(c, line, len);
}

void cd_conn_push_message(struct cd_conn *c, const void *msg, size_t len)
{
	uint32_t n = (uint32_t)len;

	if (c->closing)
		return;
	if (c->in_start > 0 && c->in_start == c->in_len)
		c->in_start = c->in_len = c->in_scan = 0;
	size_t need = c->in_len + sizeof(n) + len;
	if (need > c->in_cap) {
		/* Compact first: processed records are dead weight. */
		if (c->in_start > 0)
			memmove(c->in_buf, c->in_buf + c->in_start, c->in_len - c->in_start);
		c->in_len -= c->in_start;
		c->in_start = c->in_scan = 0;
		need = c->in_len + sizeof(n) + len;
		if (need > c->in_cap) {
			size_t cap = c->in_cap ? c->in_cap : 2 * IN_READ_MIN;
			while (cap < need)
				cap *= 2;
			c->in_buf = cd_xrealloc(c->in_buf, cap);
			c->in_cap = cap;
		}
	}
	memcpy(c->in_buf + c->in_len, &n, sizeof(n));
	if (len > 0)
		memcpy(c->in_buf + c->in_len + sizeof(n), msg, len);
	c->in_len += sizeof(n) + len;
}

/* The next framed message of a ws connection; false when none is queued. */
static bool next_record(struct cd_conn *c, const char **msg, size_t *len)
{
	uint32_t n;

	if (c->in_len - c->in_start < sizeof(n))
		return false;
	memcpy(&n, c->in_buf + c->in_start, sizeof(n));
	*msg = c->in_buf + c->in_start + sizeof(n);
	*len = n;
	c->in_start += sizeof(n) + n;
	return true;
}

/* Handle the next message; false when there is none (or the connection ends). */
static bool next_line(struct cd_conn *c)
{
	size_t from = c->in_scan > c->in_start ? c->in_scan : c->in_start;
	char *nl = from < c->in_len ? memchr(c->in_buf + from, '\n', c->in_len - from) : NULL;
	if (nl) {
		size_t start = c->in_start;
		size_t end = (size_t)(nl - c->in_buf);
		c->in_start = c->in_scan = end + 1;
		dispatch_line(c, c->in_buf + start, end - start);
		return true;
	}
	c->in_scan = c->in_len;
	/* Too long already, unless the last byte is the '\r' of a "\r\n". */
	size_t pending_len = c->in_len - c->in_start;
	if (pending_len > CD_SERVE_MAX_LINE + 1 ||
	    (pending_len == CD_SERVE_MAX_LINE + 1 && c->in_buf[c->in_len - 1] != '\r')) {
		overflow(c);
		return false;
	}
	if (c->in_eof && c->in_len > c->in_start) {
		/* Each message is a line "followed by \n": a cut-off tail is not one. */
		cd_log_debug("serve: ignoring %zu bytes after the last newline",
			     c->in_len - c->in_start);
		c->in_start = c->in_scan = c->in_len;
	}
	return false;
}

/* Requests performed off the loop and not answered yet: fs requests, a process/start. */
static bool requests_running(const struct cd_conn *c)
{
	return c->start || c->parsing || cd_fs_conn_busy(c) || c->n_discover || c->n_envconfig;
}

/* How long one connection's messages are handled before the loop takes a turn. */
#define PROCESS_SLICE_MS 10

void cd_conn_process(struct cd_conn *c)
{
	if (c->freed)
		return;
	c->batch++;
	/* Its fs requests stop while the queue is over its cap, like the lines below. */
	cd_fs_conn_pump(c);
	/*
	 * End of input while a request is still in flight (a long poll) or
	 * while the client does not read our output. Output blocked: the
	 * client is gone. A long poll on stdio: the request is abandoned and
	 * the connection torn down now (Codex does the same), instead of
	 * waiting out waitMs; the same on WebSocket, where the end of input
	 * has been answered with a close frame. On a unix socket the client
	 * may only have shut its sending side: the session detaches at once
	 * (it may be resumed elsewhere, which evicts this connection) and the
	 * answer still goes out before the connection closes; such a client
	 * still reads, so its queue is not a sign that it left, and the
	 * connection ends once everything queued is out (or the stall timer
	 * drops it). While a worker writes an answer the queue cannot drain
	 * (cd_conn_out_lend): that is not a blocked client either.
	 */
	bool half_closed = c->in_eof && c->kind == CD_CONN_UNIX && !peer_closed(c);
	if (c->in_eof && !c->closing && !c->out_lent && !half_closed &&
	    cd_conn_out_queued(c) > c->out_cap) {
		cd_log_debug("serve: end of input with output blocked");
		connection_gone(c, "end of input");
	} else if (c->in_eof && !c->closing && c->pending) {
		if (c->kind != CD_CONN_UNIX) {
			cd_log_debug("serve: end of input with a request in flight");
			connection_gone(c, "end of input");
		} else if (c->session && c->session->conn == c) {
			cd_session_detach(c->session, c);
		}
	} else if (c->in_eof && !c->closing && c->kind != CD_CONN_STDIO && requests_running(c)) {
		/*
		 * fs requests or a process/start still running (stdio waits
		 * for their answers, so that `printf ... | cordon serve` gets
		 * them). A WebSocket client is gone, and so is a unix client
		 * that closed its socket: their fs requests are dropped (those
		 * not started are never performed; a process/start accepted
		 * still starts). A unix client that only shut its sending
		 * side waits for the answers; its session detaches now, so that
		 * it can be resumed elsewhere at once rather than when a copy of
		 * GiBs ends.
		 */
		if (c->kind == CD_CONN_WS || peer_closed(c)) {
			cd_log_debug("serve: end of input with requests running");
			connection_gone(c, "end of input");
		} else if (c->session && c->session->conn == c) {
			cd_session_detach(c->session, c);
		}
	} else if (c->in_eof && !c->closing && half_closed && cd_conn_out_queued(c) > 0 &&
		   c->session && c->session->conn == c) {
		cd_session_detach(c->session, c);
	}
	uint64_t began = cd_loop_now_ms();
	while (!c->pending && !c->start && !c->parsing && !c->closing &&
	       cd_conn_out_queued(c) <= c->out_cap && !cd_fs_conn_input_held(c)) {
		/*
		 * A turn of the loop per slice: a client that pipelines
		 * thousands of requests (10,000 process/starts of 4 ms each)
		 * must not hold every other client for all of them.
		 */
		if (cd_loop_now_ms() - began >= PROCESS_SLICE_MS) {
			cd_conn_schedule_process(c);
			break;
		}
		if (c->kind == CD_CONN_WS) {
			const char *msg;
			size_t len;
			if (next_record(c, &msg, &len)) {
				handle_line(c, msg, len);
				continue;
			}
		} else if (next_line(c)) {
			continue;
		}
		/*
		 * Not before the answers of its fs requests (fs.c calls back),
		 * nor, half-closed, before they are out (flush calls back).
		 */
		if (c->in_eof && !c->closing && !requests_running(c) &&
		    !(half_closed && cd_conn_out_queued(c) > 0)) {
			cd_log_debug("serve: connection %lu (%s): end of input", c->serial,
				     c->peer);
			connection_gone(c, "end of input");
		}
		break;
	}
	if (c->in_start == c->in_len) {
		c->in_start = c->in_len = c->in_scan = 0;
		/* A large message is handled: its buffer goes rather than stay resident. */
		if (c->in_cap > IN_KEEP_CAP) {
			free(c->in_buf);
			c->in_buf = NULL;
			c->in_cap = 0;
		}
	}
	c->batch--;
	update_in_watch(c);
	cd_conn_kick(c);
}

static void on_resume(struct cd_loop *l, void *data)
{
	struct cd_conn *c = data;
	c->resume = NULL;
	cd_conn_process(c);
}

void cd_conn_schedule_process(struct cd_conn *c)
{
	if (!c->resume && !c->closing)
		c->resume = cd_loop_add_timer(c->server->loop, 0, on_resume, c);
}

/* Read what stdin has; false when nothing more can be read now. */
static bool read_input(struct cd_conn *c)
{
	if (c->in_start > 0 && (c->in_len == c->in_cap || c->in_start >= c->in_cap / 2)) {
		memmove(c->in_buf, c->in_buf + c->in_start, c->in_len - c->in_start);
		c->in_len -= c->in_start;
		c->in_scan -= c->in_scan >= c->in_start ? c->in_start : c->in_scan;
		c->in_start = 0;
	}
	if (c->in_cap - c->in_len < IN_READ_MIN && c->in_cap < IN_CAP) {
		size_t cap = c->in_cap ? c->in_cap * 2 : 2 * IN_READ_MIN;
		if (cap > IN_CAP)
			cap = IN_CAP;
		c->in_buf = cd_xrealloc(c->in_buf, cap);
		c->in_cap = cap;
	}
	if (c->in_len == c->in_cap)
		return false;
	ssize_t n = read(c->in_fd, c->in_buf + c->in_len, c->in_cap - c->in_len);
	if (n > 0) {
		c->in_len += (size_t)n;
		return true;
	}
	if (n == 0) {
		c->in_eof = true;
		return false;
	}
	if (errno == EINTR)
		return true;
	if (errno != EAGAIN) {
		cd_log_debug("serve: connection %lu (%s): read: %s", c->serial, c->peer,
			     strerror(errno));
		c->in_eof = true;
	}
	return false;
}

/*
 * A unix peer that closed its socket, not only shut its sending side: the
 * kernel then marks ours shut both ways (POLLHUP), where a half-close
 * only ends our input.
 */
static bool peer_closed(const struct cd_conn *c)
{
	struct pollfd p = { .fd = c->out_fd, .events = POLLOUT };
	return c->kind == CD_CONN_UNIX && poll(&p, 1, 0) == 1 && (p.revents & POLLHUP);
}

static void on_in(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct cd_conn *c = data;
#ifdef CD_WEBSOCKET
	if (c->ws) {
		cd_ws_on_input(c);
		/* A pong said the client read further: held processes may go on. */
		if (!c->freed && cd_conn_delivered(c) != c->delivered_seen)
			update_backpressure(c, false);
	} else
#endif
		(void)read_input(c);
	cd_conn_process(c);
}

static void on_in_pump(struct cd_loop *l, void *data)
{
	struct cd_conn *c = data;
	c->in_pump = NULL;
	(void)read_input(c);
	cd_conn_process(c);
}

static void update_in_watch(struct cd_conn *c)
{
	/*
	 * Keep reading while output is congested: lines are not processed
	 * then (cd_conn_process stops), but the end of input must be seen.
	 */
	bool want = !c->in_eof && !c->closing && c->in_len - c->in_start < IN_CAP;
#ifdef CD_WEBSOCKET
	if (c->ws)
		want = !c->in_eof && !c->closing && cd_ws_want_read(c);
#endif

	if (c->in_pump)
		return; /* the pump reads and comes back here */
	if (want && !c->in_watch) {
		if (!c->in_is_file)
			c->in_watch =
				cd_loop_add_fd(c->server->loop, c->in_fd, CD_LOOP_IN, on_in, c);
		if (!c->in_watch) {
			/* A regular file cannot be polled: read it from a timer. */
			c->in_is_file = true;
			c->in_pump = cd_loop_add_timer(c->server->loop, 0, on_in_pump, c);
		}
	} else if (!want && c->in_watch) {
		cd_loop_del_fd(c->server->loop, c->in_watch);
		c->in_watch = NULL;
	}
}

void cd_conn_update_watches(struct cd_conn *c)
{
	update_in_watch(c);
	/* ws: wslay may want to send what has no length (a ping, a pong, a close). */
	if (!c->freed && !c->out_watching && c->batch == 0 && (c->ws || cd_conn_out_queued(c) > 0))
		flush(c);
}

static void set_nonblocking(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

int cd_conn_submit_scan(struct cd_conn *c, const char *id, unsigned *waiting, struct cd_workq *pool,
			struct cd_work *w, const char *unavailable)
{
	if (*waiting >= CD_CONN_SCANS_MAX) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "too many discovery and configuration requests waiting on this "
			      "connection (at most 16): wait for their answers");
		return -1;
	}
	(*waiting)++;
	if (cd_workq_submit(pool, w) < 0) {
		(*waiting)--;
		cd_conn_error(c, id, CD_RPC_INTERNAL, unavailable);
		return -1;
	}
	return 0;
}

struct cd_conn *cd_conn_listed(struct cd_server *s, struct cd_conn *c, unsigned long serial)
{
	for (struct cd_conn *x = s->conns; x; x = x->next)
		if (x == c && x->serial == serial)
			return x;
	return NULL;
}

struct cd_conn *cd_conn_new(struct cd_server *s, enum cd_conn_kind kind, int in_fd, int out_fd)
{
	struct cd_conn *c = cd_xcalloc(1, sizeof(*c));
	c->server = s;
	c->kind = kind;
	c->serial = ++s->next_serial;
	c->in_fd = in_fd;
	c->out_fd = out_fd;
	c->out_cap = s->opts.max_queued_bytes;
	snprintf(c->peer, sizeof(c->peer), "%s", kind == CD_CONN_STDIO ? "stdio" : "?");
	set_nonblocking(in_fd, true);
	set_nonblocking(out_fd, true);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	s->n_live++;
	cd_metrics.conns_accepted[kind]++;
#ifdef CD_WEBSOCKET
	if (kind == CD_CONN_WS)
		c->ws = cd_ws_new(c);
#endif
	update_in_watch(c);
	static const char *const kinds[] = {
		[CD_CONN_STDIO] = "stdio", [CD_CONN_UNIX] = "unix", [CD_CONN_WS] = "ws"
	};
	cd_testhook_event("conn-open conn=%lu kind=%s", c->serial, kinds[kind]);
	return c;
}

/* Drop the watches and the timers: nothing calls back into c any more. */
static void quiesce(struct cd_conn *c)
{
	struct cd_loop *l = c->server->loop;
	if (c->in_watch)
		cd_loop_del_fd(l, c->in_watch);
	if (c->out_watch)
		cd_loop_del_fd(l, c->out_watch);
	c->in_watch = c->out_watch = NULL;
	c->out_watching = false;
	if (c->in_pump)
		cd_loop_cancel_timer(l, c->in_pump);
	if (c->resume)
		cd_loop_cancel_timer(l, c->resume);
	if (c->stall)
		cd_loop_cancel_timer(l, c->stall);
	if (c->unread_poll)
		cd_loop_cancel_timer(l, c->unread_poll);
	c->in_pump = c->resume = c->stall = c->unread_poll = NULL;
	cd_pending_drop(c);
}

static void on_reap(struct cd_loop *l, void *data)
{
	struct cd_conn *c = data;
	c->reaper = NULL;
	cd_conn_free(c);
}

void cd_conn_close(struct cd_conn *c, const char *why)
{
	if (c->freed)
		return;
	cd_log_debug("serve: connection %lu (%s) closed: %s", c->serial, c->peer, why);
	cd_testhook_event("conn-closed conn=%lu", c->serial);
	/* What it writes from now on nobody may read: its session must not count it as delivered. */
	c->delivered_final = cd_conn_delivered(c);
	c->delivered_frozen = true;
	/*
	 * Whatever the socket takes now (an eviction's error reply, a close
	 * frame); nothing while a worker writes an answer to it (cut now).
	 */
	if (!c->out_broken && !c->out_lent) {
#ifdef CD_WEBSOCKET
		if (c->ws)
			cd_ws_close(c);
#endif
		(void)write_queued(c);
	}
	c->freed = true;
	c->closing = true;
	c->server->n_live--;
	cd_listen_handshake_done(c);
	quiesce(c);
	account(c); /* freed: nothing it holds counts any more */
	if (c->session) {
		struct cd_session *se = c->session;
		/* Detaching also resumes the output this connection's back-pressure paused. */
		if (se->conn == c || se->linger == c)
			cd_session_detach(se, c);
		c->session = NULL;
	}
	c->output_paused = false;
	if (c->start)
		cd_start_conn_gone(c->start, NULL);
	if (c->parsing) {
		c->parsing->conn = NULL;
		c->parsing = NULL;
	}
	/* Connection-scoped state (reference 1.7): the fs/open handles go now. */
	cd_fs_conn_release(c);
	cd_http_conn_release(c);
	c->reaper = cd_loop_add_timer(c->server->loop, 0, on_reap, c);
}

void cd_conn_free(struct cd_conn *c)
{
	if (!c)
		return;
	struct cd_server *s = c->server;
	quiesce(c);
	if (c->reaper)
		cd_loop_cancel_timer(s->loop, c->reaper);
	if (!c->freed) {
		s->n_live--;
		cd_listen_handshake_done(c);
	}
	if (c->session && (c->session->conn == c || c->session->linger == c))
		cd_session_detach(c->session, c);
	if (c->prev)
		c->prev->next = c->next;
	else if (s->conns == c)
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
#ifdef CD_WEBSOCKET
	cd_ws_free(c->ws);
#endif
	if (c->kind == CD_CONN_STDIO) {
		/* The descriptors are shared with whoever started us: leave them blocking again. */
		set_nonblocking(c->in_fd, false);
		set_nonblocking(c->out_fd, false);
	} else {
		close(c->in_fd);
		close(c->out_fd);
	}
	if (c->start)
		cd_start_conn_gone(c->start, NULL);
	if (c->parsing)
		c->parsing->conn = NULL;
	cd_fs_conn_release(c);
	cd_http_conn_release(c);
	cd_json_free(c->cur_msg);
	free(c->in_buf);
	cd_strbuf_done(&c->out);
	cd_testhook_event("conn-freed conn=%lu", c->serial);
	cd_mem_set(CD_MEM_QUEUED, &c->mem_queued, 0);
	cd_mem_set(CD_MEM_INBOUND, &c->mem_inbound, 0);
	free(c);
	/* Its descriptors are free: a listener that ran out may accept again. */
	if (s->accept_paused)
		cd_listen_resume(s);
}
