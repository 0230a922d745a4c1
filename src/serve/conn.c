/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/fs.h"
#include "serve/server.h"
#include "shared/log.h"

/*
 * stdio framing (reference 1.3-1.5). Input is read non-blocking into one
 * buffer and split into lines; lines are handled strictly one after the
 * other, and a long poll stops the handling (not the reading) until it is
 * answered. The buffer holds at most one maximal line plus its '\n'; when
 * it is full the connection stops reading stdin.
 *
 * Output is one queue of complete JSON lines. Appends try a write at once
 * unless a batch is open (a run of requests: one write at the end) or the
 * pipe was full (then the loop watches stdout and writes when it drains, so
 * everything queued in between goes out in one write). A client that does
 * not read makes the queue grow: beyond CD_SERVE_OUT_QUEUE_CAP no further
 * requests are handled and the processes' output is no longer read (their
 * pipes fill and they block) until the queue is down to half the cap. The
 * replies of requests and the exit/close events still queue, bounded by
 * what one request or one process can add.
 */

/* One maximal line, its "\r\n" included. */
#define IN_CAP	    ((size_t)CD_SERVE_MAX_LINE + 2)
#define IN_READ_MIN (64 * 1024)
#define OUT_COMPACT (1024 * 1024)
/* Above this, an emptied outbound buffer is freed rather than kept. */
#define OUT_KEEP_CAP (4 * 1024 * 1024)

static void flush(struct cd_conn *c);
static void update_in_watch(struct cd_conn *c);

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
	c->out.buf[c->out.len] = '\0';
}

static size_t out_queued(const struct cd_conn *c)
{
	return c->out.len - c->out_off;
}

/*
 * Back-pressure: while the client does not read, stop reading the
 * processes' output (their pipes fill and they block) and stop reading
 * requests; resume at half the cap.
 */
static void update_backpressure(struct cd_conn *c)
{
	size_t q = out_queued(c);
	if (!c->output_paused && q > CD_SERVE_OUT_QUEUE_CAP) {
		c->output_paused = true;
		cd_session_pause_output(c->session, true);
	} else if (c->output_paused && q <= CD_SERVE_OUT_QUEUE_CAP / 2) {
		c->output_paused = false;
		cd_session_pause_output(c->session, false);
	}
}

void cd_conn_kick(struct cd_conn *c)
{
	if (c->batch == 0 && !c->out_watching)
		flush(c);
	else
		update_backpressure(c);
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

static void connection_gone(struct cd_conn *c)
{
	c->closing = true;
	cd_server_stop(c->server);
}

/*
 * Write what is queued until it is all out or the fd cannot take more.
 * 0 when the queue is empty, -EAGAIN, or another -errno (-EIO for a write
 * that wrote nothing).
 */
static int write_queued(struct cd_conn *c)
{
	while (out_queued(c) > 0) {
		ssize_t w = write(c->out_fd, c->out.buf + c->out_off, out_queued(c));
		if (w > 0) {
			c->out_off += (size_t)w;
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
static void grow_pipe(struct cd_conn *c)
{
	struct stat st;
	c->pipe_grown = true;
	if (fstat(c->out_fd, &st) < 0 || !S_ISFIFO(st.st_mode))
		return;
	int cur = fcntl(c->out_fd, F_GETPIPE_SZ);
	if (cur >= 0 && cur < CD_SERVE_OUT_PIPE_SIZE)
		(void)fcntl(c->out_fd, F_SETPIPE_SZ, CD_SERVE_OUT_PIPE_SIZE);
}

static void flush(struct cd_conn *c)
{
	bool was_over = out_queued(c) > CD_SERVE_OUT_QUEUE_CAP;

	while (!c->out_broken) {
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
		cd_log_debug("serve: stdout: %s", strerror(-r));
		c->out_broken = true;
		c->out.len = c->out_off = 0;
		connection_gone(c);
		break;
	}
	if (out_queued(c) == 0) {
		c->out.len = c->out_off = 0;
		/* A large answer (fs/readFile) must not stay resident once sent. */
		if (c->out.cap > OUT_KEEP_CAP)
			cd_strbuf_done(&c->out);
		out_watch(c, false);
	} else if (c->out_off >= OUT_COMPACT && c->out_off * 2 >= c->out.len) {
		memmove(c->out.buf, c->out.buf + c->out_off, out_queued(c));
		c->out.len -= c->out_off;
		c->out_off = 0;
	}
	update_backpressure(c);
	/* Requests were held back while the queue was over its cap. */
	if (was_over && out_queued(c) <= CD_SERVE_OUT_QUEUE_CAP)
		cd_conn_schedule_process(c);
}

void cd_conn_final_flush(struct cd_conn *c, int timeout_ms)
{
	uint64_t deadline = cd_loop_now_ms() + (uint64_t)timeout_ms;

	while (!c->out_broken && write_queued(c) == -EAGAIN) {
		uint64_t now = cd_loop_now_ms();
		if (now >= deadline)
			break;
		struct pollfd pfd = { .fd = c->out_fd, .events = POLLOUT };
		(void)poll(&pfd, 1, (int)(deadline - now));
	}
}

/* ---- inbound lines ---- */

static void parse_error(struct cd_conn *c, const char *detail)
{
	struct cd_strbuf sb = { 0 };
	/* The released Codex binary's wording, which clients may match on. */
	cd_strbuf_printf(&sb, "failed to parse JSON-RPC message from exec-server stdio: %s",
			 detail);
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

static void handle_line(struct cd_conn *c, const char *line, size_t len)
{
	static const struct cd_json_limits lim = {
		.max_bytes = CD_SERVE_MAX_LINE,
		.max_values = CD_SERVE_MAX_VALUES,
		.max_depth = CD_SERVE_MAX_DEPTH,
	};
	struct cd_json *v = NULL;
	struct cd_json_error jerr;

	memset(&jerr, 0, sizeof(jerr));
	if (cd_json_parse(line, len, &lim, &v, &jerr) < 0) {
		char detail[256];
		snprintf(detail, sizeof(detail), "%s at line %u column %u", jerr.msg, jerr.line,
			 jerr.col);
		parse_error(c, detail);
		return;
	}
	/* Classified as the reference's untagged JSONRPCMessage enum (1.4). */
	const struct cd_json *method = cd_json_get(v, "method");
	const struct cd_json *id = cd_json_get(v, "id");
	char *idt = id_text(id);
	if (v->type != CD_JSON_OBJECT) {
		parse_error(c, "data did not match any variant of untagged enum JSONRPCMessage");
	} else if (method && method->type == CD_JSON_STRING) {
		if (idt) {
			cd_methods_request(c, idt, method->u.str.s, cd_json_get(v, "params"));
		} else if (!cd_methods_notification(c, method->u.str.s)) {
			cd_log_debug("serve: closing the connection after notification '%s'",
				     method->u.str.s);
			connection_gone(c);
		}
	} else if (!cd_json_get(v, "result") && !cd_json_get(v, "error")) {
		/*
		 * Neither request, notification, response nor error: the
		 * released binary fails to decode it as an error object and
		 * answers like any unparsable message; the connection stays.
		 */
		parse_error(c, "missing field `error`");
	} else {
		/* A response or an error object: the server sends no requests, the connection ends. */
		cd_log_debug("serve: closing the connection after a client %s",
			     cd_json_get(v, "result") ? "response" : "error object");
		connection_gone(c);
	}
	free(idt);
	cd_json_free(v);
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
	fprintf(stderr,
		"cordon: serve: JSON-RPC message from stdio exceeds maximum length of %u bytes\n",
		CD_SERVE_MAX_LINE);
	connection_gone(c);
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

void cd_conn_process(struct cd_conn *c)
{
	c->batch++;
	/*
	 * End of input while a request is still in flight (a long poll) or
	 * while the client does not read our output: the client is gone, so
	 * the request is abandoned and the connection torn down now (Codex
	 * does the same), instead of waiting out waitMs or a full pipe.
	 */
	if (c->in_eof && !c->closing && (c->pending || out_queued(c) > CD_SERVE_OUT_QUEUE_CAP)) {
		cd_log_debug("serve: end of input with a request in flight or output blocked");
		connection_gone(c);
	}
	while (!c->pending && !c->closing && out_queued(c) <= CD_SERVE_OUT_QUEUE_CAP) {
		size_t from = c->in_scan > c->in_start ? c->in_scan : c->in_start;
		char *nl =
			from < c->in_len ? memchr(c->in_buf + from, '\n', c->in_len - from) : NULL;
		if (nl) {
			size_t start = c->in_start;
			size_t end = (size_t)(nl - c->in_buf);
			c->in_start = c->in_scan = end + 1;
			dispatch_line(c, c->in_buf + start, end - start);
			continue;
		}
		c->in_scan = c->in_len;
		/* Too long already, unless the last byte is the '\r' of a "\r\n". */
		size_t pending_len = c->in_len - c->in_start;
		if (pending_len > CD_SERVE_MAX_LINE + 1 ||
		    (pending_len == CD_SERVE_MAX_LINE + 1 && c->in_buf[c->in_len - 1] != '\r')) {
			overflow(c);
			break;
		}
		if (c->in_eof && c->in_len > c->in_start) {
			/* Each message is a line "followed by \n": a cut-off tail is not one. */
			cd_log_debug("serve: ignoring %zu bytes after the last newline",
				     c->in_len - c->in_start);
			c->in_start = c->in_scan = c->in_len;
		}
		if (c->in_eof) {
			cd_log_debug("serve: end of input");
			connection_gone(c);
		}
		break;
	}
	if (c->in_start == c->in_len)
		c->in_start = c->in_len = c->in_scan = 0;
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
		cd_log_debug("serve: stdin: %s", strerror(errno));
		c->in_eof = true;
	}
	return false;
}

static void on_in(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct cd_conn *c = data;
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

struct cd_conn *cd_conn_new(struct cd_server *s, int in_fd, int out_fd)
{
	struct cd_conn *c = cd_xcalloc(1, sizeof(*c));
	c->server = s;
	c->in_fd = in_fd;
	c->out_fd = out_fd;
	int fl = fcntl(in_fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(in_fd, F_SETFL, fl | O_NONBLOCK);
	fl = fcntl(out_fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(out_fd, F_SETFL, fl | O_NONBLOCK);
	update_in_watch(c);
	return c;
}

void cd_conn_free(struct cd_conn *c)
{
	if (!c)
		return;
	struct cd_loop *l = c->server->loop;
	if (c->in_watch)
		cd_loop_del_fd(l, c->in_watch);
	if (c->out_watch)
		cd_loop_del_fd(l, c->out_watch);
	if (c->in_pump)
		cd_loop_cancel_timer(l, c->in_pump);
	if (c->resume)
		cd_loop_cancel_timer(l, c->resume);
	if (c->pending) {
		if (c->pending->timer)
			cd_loop_cancel_timer(l, c->pending->timer);
		cd_pending_free(c->pending);
	}
	/* The descriptors are shared with whoever started us: leave them blocking again. */
	int fl = fcntl(c->in_fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(c->in_fd, F_SETFL, fl & ~O_NONBLOCK);
	fl = fcntl(c->out_fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(c->out_fd, F_SETFL, fl & ~O_NONBLOCK);
	cd_fs_conn_release(c);
	free(c->in_buf);
	cd_strbuf_done(&c->out);
	free(c);
}
