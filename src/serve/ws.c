/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <nettle/sha1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "serve/metrics.h"
#include "serve/proc.h"
#include "serve/server.h"
#include "serve/status.h"
#include "shared/log.h"

/*
 * The WebSocket side of a connection (reference 1.2).
 *
 * Before the upgrade the connection speaks HTTP/1.1, one request and then
 * the answer: `GET /readyz` is 200, a request with an Origin header is 403
 * (browsers), `/` is the upgrade, `GET /metrics` and `GET /status` are the
 * operators' (status.h), anything else 404; the answer to anything but an
 * upgrade closes the connection. With --auth-token-file the upgrade
 * needs "Authorization: Bearer TOKEN" (401 otherwise); on loopback without
 * one, a peer whose owner listen.c did not admit gets 403. Statuses and texts
 * follow the released Codex binary (axum) where it has them.
 *
 * After the upgrade wslay does the framing: fragmented messages are
 * reassembled, pings answered, close frames answered; each text or binary
 * message is one JSON-RPC message, handed to conn.c. Outbound, every line
 * of the connection's queue (the writers end each message with '\n') is
 * one text frame; lines move into wslay's own queue only while it holds
 * less than WS_OUT_BATCH bytes, so that the connection's back-pressure
 * still sees what the client has not read. wslay hands each frame's header
 * and payload to the send callback separately; they are gathered in wbuf
 * and written together, so that a burst of small notifications costs one
 * send(2) per WS_WBUF bytes instead of two per message.
 *
 * Lossless sessions (proc.h) need to know what the client has read. TCP
 * cannot tell: its acknowledgement (SIOCOUTQ shrinking) says that the
 * client's kernel has the bytes, not that the client took them, and a
 * client that drops loses what its receive buffer held (autotuning lets
 * that grow to megabytes). WebSocket can: a pong echoes its ping's payload
 * (RFC 6455 5.5.3), and a client handles frames in order, so the pong to a
 * ping that carries the stream position of everything framed before it
 * says that the client has read up to there. Such a ping goes out every
 * ACK_EVERY bytes, and at once while a process of the session is held
 * (until the pong, no byte of its counts as delivered). wslay sends
 * control frames ahead of queued messages, so a ping is queued only when
 * wslay holds nothing else: what is framed before it is then exactly what
 * the connection's queue gave up. A client that never answers pings (RFC
 * 6455 says it must) gets its held processes' output only through
 * process/read, or is dropped by the stall timer while they wait.
 */

#define WS_GUID	     "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_OUT_BATCH (1024 * 1024)
#define WS_WBUF	     (256 * 1024)
/* Stop reading frames while this many messages wait for the socket. */
#define WS_OUT_MSGS 64
/* Stop reading frames while this much inbound is waiting to be handled. */
#define WS_IN_HIGH (1024 * 1024)
/* Lossless sessions: an acknowledging ping after this many bytes. */
#define ACK_EVERY (64 * 1024)
#define ACK_MAGIC "cordon-ack:"
#define ACK_LEN	  (sizeof(ACK_MAGIC) - 1 + 16)

struct cd_ws {
	struct cd_conn *c;
	bool open; /* upgraded */
	char *head;
	size_t head_len;
	char *extra; /* bytes that came after the HTTP head: the first frames */
	size_t extra_len, extra_off;
	wslay_event_context_ptr ctx;
	struct cd_timer *handshake_timer;
	struct cd_timer *ping_timer;
	char *wbuf; /* frames wslay has "sent" that the socket has not taken yet */
	size_t wbuf_len, wbuf_cap;
	bool wbuf_broken; /* a send failed: the peer is gone */
	bool unbounded;	  /* cd_ws_take_pending: wbuf takes all wslay has */
	bool http_out;	  /* not upgraded: wbuf holds an HTTP answer going out (send_answer) */
	/* Lossless sessions: the position the last ack ping carried; the highest echoed. */
	uint64_t ack_pinged, ack_got;
};

/* Room for n more bytes in wbuf (past WS_WBUF only for cd_ws_take_pending). */
static void wbuf_reserve(struct cd_ws *w, size_t n)
{
	if (w->wbuf_len + n <= w->wbuf_cap)
		return;
	size_t cap = w->wbuf_cap ? w->wbuf_cap : WS_WBUF;
	while (cap < w->wbuf_len + n)
		cap *= 2;
	w->wbuf = cd_xrealloc(w->wbuf, cap);
	w->wbuf_cap = cap;
}

/* Write out wbuf: 0 when empty, -EAGAIN when the socket is full, other -errno. */
static int wbuf_flush(struct cd_conn *c)
{
	struct cd_ws *w = c->ws;
	size_t off = 0;
	int r = 0;

	while (off < w->wbuf_len) {
		ssize_t n = send(c->out_fd, w->wbuf + off, w->wbuf_len - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		r = n < 0 && errno == EAGAIN ? -EAGAIN : -EPIPE;
		break;
	}
	memmove(w->wbuf, w->wbuf + off, w->wbuf_len - off);
	w->wbuf_len -= off;
	if (r == -EPIPE)
		w->wbuf_broken = true;
	return r;
}

/* ---- HTTP ---- */

static void http_reply(struct cd_conn *c, const char *status, const char *extra_headers,
		       const char *body)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 %s\r\n%s%scontent-length: %zu\r\nconnection: close\r\n\r\n%s",
			 status, extra_headers ? extra_headers : "",
			 body && *body ? "content-type: text/plain; charset=utf-8\r\n" : "",
			 body ? strlen(body) : 0, body ? body : "");
	if (n > 0 && (size_t)n < sizeof(buf))
		(void)send(c->out_fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	/* Answered: the connection ends (after the messages, of which there are none). */
	c->in_eof = true;
}

static void on_handshake_timeout(struct cd_loop *l, void *data);

/*
 * A 200 answer of any size (GET /metrics, /status): into wbuf, written as
 * the socket takes it (cd_ws_flush), never waiting on the client; the
 * connection ends once it is all out. A client that does not read it is
 * dropped after CD_SERVE_HANDSHAKE_MS, as one that does not send its
 * request.
 */
static void send_answer(struct cd_conn *c, const char *content_type, const struct cd_strbuf *body)
{
	struct cd_ws *w = c->ws;
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %zu\r\n"
			 "cache-control: no-store\r\nconnection: close\r\n\r\n",
			 content_type, body->len);
	/* Its own size, not the frames' WS_WBUF: a scrape is a few KiB. */
	free(w->wbuf);
	w->wbuf_cap = (size_t)n + body->len;
	w->wbuf = cd_xmalloc(w->wbuf_cap);
	memcpy(w->wbuf, head, (size_t)n);
	if (body->len)
		memcpy(w->wbuf + n, body->buf, body->len);
	w->wbuf_len = (size_t)n + body->len;
	w->http_out = true;
	w->handshake_timer =
		cd_loop_add_timer(c->server->loop, CD_SERVE_HANDSHAKE_MS, on_handshake_timeout, c);
	cd_conn_update_watches(c);
}

/* GET /metrics or /status, past the checks of an upgrade. */
static void answer_status(struct cd_conn *c, const char *target)
{
	struct cd_strbuf body = { 0 };
	bool metrics = !strcmp(target, "/metrics");
	if (metrics)
		cd_serve_metrics_text(c->server, &body);
	else
		cd_serve_status_json(c->server, &body);
	if (!metrics)
		cd_strbuf_append_c(&body, '\n');
	send_answer(c, metrics ? CD_METRICS_CONTENT_TYPE : "application/json", &body);
	cd_strbuf_done(&body);
}

struct http_req {
	char *method, *target;
	const char *upgrade, *connection, *key, *version, *origin, *auth;
	unsigned n_auth;
};

/* A comma-separated header value contains token (case-insensitively). */
static bool has_token(const char *v, const char *token)
{
	size_t tl = strlen(token);
	while (v && *v) {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		const char *end = strchr(v, ',');
		size_t n = end ? (size_t)(end - v) : strlen(v);
		while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
			n--;
		if (n == tl && !strncasecmp(v, token, tl))
			return true;
		v = end;
	}
	return false;
}

/* Parse the head in place (NUL-terminated lines); false: malformed. */
static bool parse_head(char *head, struct http_req *r)
{
	char *line = head, *eol = strstr(line, "\r\n");
	if (!eol)
		return false;
	*eol = '\0';
	r->method = line;
	char *sp = strchr(line, ' ');
	if (!sp)
		return false;
	*sp = '\0';
	r->target = sp + 1;
	sp = strchr(r->target, ' ');
	if (!sp || (strcmp(sp + 1, "HTTP/1.1") && strcmp(sp + 1, "HTTP/1.0")))
		return false;
	*sp = '\0';
	if (!*r->method || r->target[0] != '/')
		return false;
	for (line = eol + 2; *line; line = eol + 2) {
		eol = strstr(line, "\r\n");
		if (!eol)
			return false;
		*eol = '\0';
		if (!*line)
			break;
		/* No obsolete line folding, no name without a colon. */
		char *colon = strchr(line, ':');
		if (line[0] == ' ' || line[0] == '\t' || !colon || colon == line)
			return false;
		*colon = '\0';
		char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		for (size_t n = strlen(v); n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'); n--)
			v[n - 1] = '\0';
		if (!strcasecmp(line, "upgrade"))
			r->upgrade = v;
		else if (!strcasecmp(line, "connection"))
			r->connection = v;
		else if (!strcasecmp(line, "sec-websocket-key"))
			r->key = v;
		else if (!strcasecmp(line, "sec-websocket-version"))
			r->version = v;
		else if (!strcasecmp(line, "origin"))
			r->origin = v;
		else if (!strcasecmp(line, "authorization")) {
			r->auth = v;
			r->n_auth++;
		}
	}
	return true;
}

/* Compare in time that depends on the lengths only, never on where they differ. */
static bool token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char d = alen != blen;
	size_t n = alen > blen ? alen : blen;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)((i < alen ? (unsigned char)a[i] : 0) ^
				     (i < blen ? (unsigned char)b[i] : 0));
	return d == 0;
}

static bool authorized(struct cd_conn *c, const struct http_req *r)
{
	const struct cd_serve_opts *o = &c->server->opts;
	if (!o->auth_token)
		return true;
	if (r->n_auth != 1 || strncasecmp(r->auth, "Bearer ", 7))
		return false;
	const char *t = r->auth + 7;
	while (*t == ' ')
		t++;
	return token_equal(t, strlen(t), o->auth_token, o->auth_token_len);
}

static void accept_key(const char *key, char out[29])
{
	struct sha1_ctx sha;
	uint8_t digest[SHA1_DIGEST_SIZE];

	sha1_init(&sha);
	sha1_update(&sha, strlen(key), (const uint8_t *)key);
	sha1_update(&sha, sizeof(WS_GUID) - 1, (const uint8_t *)WS_GUID);
	sha1_digest(&sha, sizeof(digest), digest);
	out[cd_base64_encode(digest, sizeof(digest), out)] = '\0';
}

static bool open_frames(struct cd_conn *c);

/* The whole head is in: answer it. */
static void handle_request(struct cd_conn *c)
{
	struct cd_ws *w = c->ws;
	struct http_req r;

	memset(&r, 0, sizeof(r));
	if (!parse_head(w->head, &r)) {
		http_reply(c, "400 Bad Request", NULL, "malformed HTTP request");
		return;
	}
	char *q = strchr(r.target, '?');
	if (q)
		*q = '\0';
	/* Browsers send Origin; no web page may drive this server (reference 1.2). */
	if (r.origin) {
		cd_log_warn("serve: connection %lu (%s): refused: the request has an Origin header "
			    "(%s)",
			    c->serial, c->peer, r.origin);
		cd_metric_refusal(CD_REFUSAL_ORIGIN);
		http_reply(c, "403 Forbidden", NULL, NULL);
		return;
	}
	if (!strcmp(r.target, "/readyz")) {
		if (strcmp(r.method, "GET") && strcmp(r.method, "HEAD"))
			http_reply(c, "405 Method Not Allowed", "allow: GET,HEAD\r\n", NULL);
		else
			http_reply(c, "200 OK", NULL, NULL);
		return;
	}
	/* The operators' endpoints pass the very checks of an upgrade, then answer. */
	bool status = !strcmp(r.target, "/metrics") || !strcmp(r.target, "/status");
	if (strcmp(r.target, "/") && !status) {
		http_reply(c, "404 Not Found", NULL, NULL);
		return;
	}
	if (!authorized(c, &r)) {
		cd_log_warn("serve: connection %lu (%s): refused: %s bearer token", c->serial,
			    c->peer, r.auth ? "wrong" : "no");
		cd_metric_refusal(CD_REFUSAL_AUTH);
		http_reply(c, "401 Unauthorized", "www-authenticate: Bearer\r\n", NULL);
		return;
	}
	/* Past --max-connections, or (loopback without a token) the peer's owner (listen.c). */
	if (c->refused[0]) {
		if (!c->refused_busy) {
			cd_log_warn("serve: connection %lu (%s): refused: %s", c->serial, c->peer,
				    c->refused);
			/* (One refused as busy was counted when accepted: listen.c.) */
			cd_metric_refusal(CD_REFUSAL_PEER);
		}
		http_reply(c, c->refused_busy ? "503 Service Unavailable" : "403 Forbidden", NULL,
			   c->refused);
		return;
	}
	if (strcmp(r.method, "GET")) {
		http_reply(c, "405 Method Not Allowed", status ? "allow: GET\r\n" : NULL,
			   "Request method must be `GET`");
		return;
	}
	if (status) {
		answer_status(c, r.target);
		return;
	}
	if (!r.connection || !has_token(r.connection, "upgrade")) {
		http_reply(c, "400 Bad Request", NULL,
			   "Connection header did not include 'upgrade'");
		return;
	}
	if (!r.upgrade || !has_token(r.upgrade, "websocket")) {
		http_reply(c, "400 Bad Request", NULL,
			   "`Upgrade` header did not include 'websocket'");
		return;
	}
	if (!r.version || strcmp(r.version, "13")) {
		http_reply(c, "400 Bad Request", NULL,
			   "`Sec-WebSocket-Version` header did not include '13'");
		return;
	}
	if (!r.key || !*r.key || strlen(r.key) > 64) {
		http_reply(c, "400 Bad Request", NULL, "`Sec-WebSocket-Key` header missing");
		return;
	}
	if (cd_listen_established(c->server) >= c->server->opts.max_connections) {
		cd_log_debug("serve: connection %lu (%s): refused: %u connections already (raise "
			     "--max-connections)",
			     c->serial, c->peer, c->server->opts.max_connections);
		cd_metric_refusal(CD_REFUSAL_MAX_CONNECTIONS);
		http_reply(c, "503 Service Unavailable", NULL,
			   "too many connections: raise --max-connections");
		return;
	}
	char acc[29], buf[256];
	accept_key(r.key, acc);
	int n = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\n"
			 "upgrade: websocket\r\nsec-websocket-accept: %s\r\n\r\n",
			 acc);
	/* The socket is fresh: its buffer takes these few bytes at once. */
	if (send(c->out_fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
		c->in_eof = true;
		return;
	}
	if (!open_frames(c))
		c->in_eof = true;
}

/*
 * No control characters in a head but the CRLF line ends and tabs (RFC
 * 9110: field values hold none): no NUL to cut a string short, no bare CR
 * or escape sequence to forge a log line.
 */
static bool head_chars_ok(const char *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)h[i];
		if (ch == '\r' && i + 1 < n && h[i + 1] == '\n')
			i++;
		else if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return false;
	}
	return true;
}

static void read_head(struct cd_conn *c)
{
	struct cd_ws *w = c->ws;

	for (;;) {
		if (w->head_len >= CD_SERVE_MAX_HTTP_HEAD) {
			http_reply(c, "431 Request Header Fields Too Large", NULL, NULL);
			return;
		}
		ssize_t n = recv(c->in_fd, w->head + w->head_len,
				 CD_SERVE_MAX_HTTP_HEAD - w->head_len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			c->in_eof = true;
			return;
		}
		size_t from = w->head_len > 3 ? w->head_len - 3 : 0;
		w->head_len += (size_t)n;
		w->head[w->head_len] = '\0';
		/* What follows the head (the first frames) may hold any byte. */
		char *end = memmem(w->head + from, w->head_len - from, "\r\n\r\n", 4);
		if (!end)
			continue;
		size_t used = (size_t)(end + 4 - w->head);
		if (!head_chars_ok(w->head, used)) {
			http_reply(c, "400 Bad Request", NULL, "malformed HTTP request");
			return;
		}
		if (used < w->head_len) {
			w->extra_len = w->head_len - used;
			w->extra = cd_xmalloc(w->extra_len);
			memcpy(w->extra, w->head + used, w->extra_len);
		}
		/* The head ends with its blank line; parse_head stops there. */
		w->head[used] = '\0';
		if (w->handshake_timer) {
			cd_loop_cancel_timer(c->server->loop, w->handshake_timer);
			w->handshake_timer = NULL;
		}
		handle_request(c);
		free(w->head);
		w->head = NULL;
		return;
	}
}

static void on_handshake_timeout(struct cd_loop *l, void *data)
{
	struct cd_conn *c = data;
	c->ws->handshake_timer = NULL;
	if (c->ws->http_out)
		cd_log_debug("serve: connection %lu (%s): the client did not read its answer "
			     "within %u ms",
			     c->serial, c->peer, CD_SERVE_HANDSHAKE_MS);
	else
		cd_log_debug("serve: connection %lu (%s): no complete HTTP request within %u ms",
			     c->serial, c->peer, CD_SERVE_HANDSHAKE_MS);
	cd_conn_close(c, "handshake timeout");
}

/* ---- frames ---- */

/*
 * Whether to read more frames now. Not while WS_IN_HIGH bytes of messages
 * wait to be handled, nor while the client does not read what it is sent:
 * wslay answers every ping with a pong by itself, so a client that sends
 * pings and reads nothing would otherwise grow the pong queue without end
 * (an empty pong adds no bytes to the queue's length, hence the count).
 */
static bool in_room(const struct cd_conn *c)
{
	const struct cd_ws *w = c->ws;
	return !c->closing && c->in_len - c->in_start < WS_IN_HIGH &&
	       wslay_event_get_queued_msg_count(w->ctx) <= WS_OUT_MSGS &&
	       cd_conn_out_queued(c) <= c->out_cap;
}

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *data)
{
	struct cd_conn *c = data;
	struct cd_ws *w = c->ws;

	if (w->extra_off < w->extra_len) {
		size_t n = w->extra_len - w->extra_off;
		if (n > len)
			n = len;
		memcpy(buf, w->extra + w->extra_off, n);
		w->extra_off += n;
		return (ssize_t)n;
	}
	/* Enough waits to be handled or sent: leave the rest in the socket (back-pressure). */
	if (!in_room(c)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	for (;;) {
		ssize_t n = recv(c->in_fd, buf, len, 0);
		if (n > 0)
			return n;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
			return -1;
		}
		cd_log_debug("serve: connection %lu (%s): %s", c->serial, c->peer,
			     n == 0 ? "the peer closed the TCP connection" : strerror(errno));
		c->in_eof = true;
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		       void *user)
{
	struct cd_conn *c = user;
	struct cd_ws *w = c->ws;

	if (w->unbounded) {
		wbuf_reserve(w, len);
		memcpy(w->wbuf + w->wbuf_len, data, len);
		w->wbuf_len += len;
		return (ssize_t)len;
	}
	if (w->wbuf_len + len > WS_WBUF && wbuf_flush(c) < 0 && w->wbuf_broken) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	size_t room = w->wbuf_len < WS_WBUF ? WS_WBUF - w->wbuf_len : 0;
	if (room == 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (len > room)
		len = room;
	memcpy(w->wbuf + w->wbuf_len, data, len);
	w->wbuf_len += len;
	return (ssize_t)len;
}

/* A pong to an ack ping: the client has read everything framed before the ping. */
static void on_pong(struct cd_conn *c, const uint8_t *msg, size_t len)
{
	struct cd_ws *w = c->ws;
	uint64_t pos = 0;
	size_t m = sizeof(ACK_MAGIC) - 1;

	/* Others (keepalive pongs, unsolicited ones) say nothing of the stream. */
	if (len != ACK_LEN || memcmp(msg, ACK_MAGIC, m) != 0)
		return;
	for (size_t i = m; i < len; i++) {
		int d = msg[i] >= '0' && msg[i] <= '9'	 ? msg[i] - '0'
			: msg[i] >= 'a' && msg[i] <= 'f' ? msg[i] - 'a' + 10
							 : -1;
		if (d < 0)
			return;
		pos = pos << 4 | (uint64_t)d;
	}
	/* Only what a ping of ours carried: a forged pong cannot claim more. */
	if (pos > w->ack_got && pos <= w->ack_pinged)
		w->ack_got = pos;
}

static void ws_on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
		      void *data)
{
	struct cd_conn *c = data;

	switch (a->opcode) {
	case WSLAY_TEXT_FRAME:
	case WSLAY_BINARY_FRAME:
		cd_conn_push_message(c, a->msg, a->msg_length);
		break;
	case WSLAY_CONNECTION_CLOSE:
		/* A close frame is a disconnect (wslay queued the answering close). */
		cd_log_debug("serve: connection %lu (%s): close frame (status %u)", c->serial,
			     c->peer, a->status_code);
		c->in_eof = true;
		break;
	case WSLAY_PONG:
		on_pong(c, a->msg, a->msg_length);
		break;
	default:
		break; /* ping (answered by wslay) */
	}
}

static void on_ping(struct cd_loop *l, void *data)
{
	struct cd_conn *c = data;
	struct cd_ws *w = c->ws;
	struct wslay_event_msg m = { .opcode = WSLAY_PING };

	w->ping_timer = cd_loop_add_timer(l, c->server->opts.ping_ms, on_ping, c);
	if (wslay_event_queue_msg(w->ctx, &m) == 0)
		cd_conn_update_watches(c);
}

static bool open_frames(struct cd_conn *c)
{
	struct cd_ws *w = c->ws;
	wbuf_reserve(w, WS_WBUF);
	static const struct wslay_event_callbacks cb = {
		.recv_callback = ws_recv,
		.send_callback = ws_send,
		.on_msg_recv_callback = ws_on_msg,
	};
	if (wslay_event_context_server_init(&w->ctx, &cb, c) != 0) {
		w->ctx = NULL;
		return false;
	}
	/* The largest message, as on stdio; beyond it wslay answers 1009 and stops reading. */
	wslay_event_config_set_max_recv_msg_length(w->ctx, CD_SERVE_MAX_LINE);
	w->open = true;
	cd_listen_handshake_done(c);
	w->ping_timer = cd_loop_add_timer(c->server->loop, c->server->opts.ping_ms, on_ping, c);
	cd_log_debug("serve: connection %lu (%s): websocket open", c->serial, c->peer);
	return true;
}

void cd_ws_on_input(struct cd_conn *c)
{
	struct cd_ws *w = c->ws;

	if (!w->open) {
		read_head(c);
		if (!w->open)
			return;
	}
	if (!wslay_event_get_read_enabled(w->ctx))
		return;
	if (wslay_event_recv(w->ctx) != 0 || !wslay_event_get_read_enabled(w->ctx)) {
		/* A protocol error (wslay queued a close frame) or the end of the stream. */
		c->in_eof = true;
	}
	/* Pongs and close answers wslay queued go out with the next flush. */
	if (wslay_event_want_write(w->ctx))
		cd_conn_update_watches(c);
}

/*
 * An ack ping is due: the session is lossless and bytes went out since the
 * last one, ACK_EVERY of them, or any while a process waits for them and
 * the queue is all framed.
 */
static bool ack_due(const struct cd_conn *c)
{
	const struct cd_ws *w = c->ws;
	const struct cd_session *se = c->session;
	if (!se || !se->lossless || c->out_consumed <= w->ack_pinged ||
	    !wslay_event_get_write_enabled(w->ctx))
		return false;
	if (c->out_consumed - w->ack_pinged >= ACK_EVERY)
		return true;
	/* Held: once the queue is all framed (one ping per burst, not per message). */
	return se->conn == c && se->n_held > 0 && c->out_off == c->out.len;
}

/* Queue the ack ping; wslay must hold nothing else (it sends control frames first). */
static void ack_ping(struct cd_conn *c)
{
	struct cd_ws *w = c->ws;
	char p[ACK_LEN + 1];
	snprintf(p, sizeof(p), ACK_MAGIC "%016llx", (unsigned long long)c->out_consumed);
	struct wslay_event_msg m = {
		.opcode = WSLAY_PING,
		.msg = (const uint8_t *)p,
		.msg_length = ACK_LEN,
	};
	/* Not queued (closing): nothing more is due either. */
	(void)wslay_event_queue_msg(w->ctx, &m);
	w->ack_pinged = c->out_consumed;
}

uint64_t cd_ws_delivered(const struct cd_conn *c)
{
	return c->ws->ack_got;
}

int cd_ws_flush(struct cd_conn *c)
{
	struct cd_ws *w = c->ws;

	if (!w->open) {
		/* Nothing is framed before the upgrade; nothing can be queued either. */
		c->out_consumed += c->out.len - c->out_off;
		c->out_off = c->out.len;
		if (!w->http_out || w->wbuf_broken)
			return 0;
		/* An HTTP answer (send_answer): once it is all out, the connection ends. */
		int r = wbuf_flush(c);
		if (r == 0) {
			w->http_out = false;
			c->in_eof = true;
			cd_conn_schedule_process(c);
		}
		return r;
	}
	for (;;) {
		size_t before = c->out.len - c->out_off;
		if (!wslay_event_want_write(w->ctx) && ack_due(c))
			ack_ping(c);
		/* An ack ping due waits for wslay to send what it holds. */
		while (c->out_off < c->out.len &&
		       wslay_event_get_queued_msg_length(w->ctx) < WS_OUT_BATCH &&
		       wslay_event_get_write_enabled(w->ctx) &&
		       !(ack_due(c) && wslay_event_want_write(w->ctx))) {
			const char *p = c->out.buf + c->out_off;
			const char *nl = memchr(p, '\n', c->out.len - c->out_off);
			size_t n = nl ? (size_t)(nl - p) : c->out.len - c->out_off;
			struct wslay_event_msg m = {
				.opcode = WSLAY_TEXT_FRAME,
				.msg = (const uint8_t *)p,
				.msg_length = n,
			};
			if (wslay_event_queue_msg(w->ctx, &m) != 0)
				return -EIO;
			c->out_off += n + (nl ? 1 : 0);
			c->out_consumed += n + (nl ? 1 : 0);
		}
		if (!wslay_event_get_write_enabled(w->ctx)) {
			/* closed: nobody will read it */
			c->out_consumed += c->out.len - c->out_off;
			c->out_off = c->out.len;
		}
		if (wslay_event_send(w->ctx) != 0)
			return -EPIPE;
		/* wslay is empty and an ack ping is due: it joins wbuf before the write. */
		if (!wslay_event_want_write(w->ctx) && ack_due(c) && w->wbuf_len < WS_WBUF)
			continue;
		int r = wbuf_flush(c);
		if (r < 0)
			return r;
		if (wslay_event_want_write(w->ctx))
			continue; /* wbuf was full: wslay has more */
		if (ack_due(c))
			continue; /* wslay is empty now: the ping goes next */
		if (c->out_off == c->out.len)
			return 0;
		if (c->out.len - c->out_off == before)
			return -EAGAIN;
	}
}

size_t cd_ws_queued(const struct cd_conn *c)
{
	const struct cd_ws *w = c->ws;
	if (!w->open)
		return w->http_out ? w->wbuf_len : 0;
	return wslay_event_get_queued_msg_length(w->ctx) + w->wbuf_len;
}

bool cd_ws_want_read(const struct cd_conn *c)
{
	const struct cd_ws *w = c->ws;
	/* Its request waits while its peer is looked for in the sandboxes (admit.c). */
	if (!w->open)
		return w->head != NULL && !c->judging;
	return wslay_event_get_read_enabled(w->ctx) && in_room(c);
}

int cd_ws_take_pending(struct cd_conn *c, struct cd_strbuf *raw)
{
	struct cd_ws *w = c->ws;
	if (!w->open || w->wbuf_broken || !wslay_event_get_write_enabled(w->ctx))
		return -1;
	/* Everything wslay holds, framed as it would go to the socket. */
	w->unbounded = true;
	int r = wslay_event_send(w->ctx);
	w->unbounded = false;
	if (r != 0 || wslay_event_want_write(w->ctx))
		return -1;
	*raw = (struct cd_strbuf){ 0 };
	cd_strbuf_append_n(raw, w->wbuf ? w->wbuf : "", w->wbuf_len);
	w->wbuf_len = 0;
	/* Then the lines queued behind, one text frame each. */
	while (c->out_off < c->out.len) {
		const char *p = c->out.buf + c->out_off;
		const char *nl = memchr(p, '\n', c->out.len - c->out_off);
		size_t n = nl ? (size_t)(nl - p) : c->out.len - c->out_off;
		unsigned char h[10];
		size_t hl = 2;
		h[0] = 0x81;
		if (n < 126) {
			h[1] = (unsigned char)n;
		} else if (n < 65536) {
			h[1] = 126;
			h[2] = (unsigned char)(n >> 8);
			h[3] = (unsigned char)n;
			hl = 4;
		} else {
			h[1] = 127;
			for (int i = 0; i < 8; i++)
				h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
			hl = 10;
		}
		cd_strbuf_append_n(raw, (const char *)h, hl);
		cd_strbuf_append_n(raw, p, n);
		c->out_off += n + (nl ? 1 : 0);
	}
	return 0;
}

bool cd_ws_is_open(const struct cd_conn *c)
{
	return c->ws && c->ws->open;
}

void cd_ws_close(struct cd_conn *c)
{
	struct cd_ws *w = c->ws;
	if (!w->open || wslay_event_get_close_sent(w->ctx))
		return;
	(void)wslay_event_queue_close(w->ctx, WSLAY_CODE_GOING_AWAY, NULL, 0);
}

struct cd_ws *cd_ws_new(struct cd_conn *c)
{
	struct cd_ws *w = cd_xcalloc(1, sizeof(*w));
	w->c = c;
	w->head = cd_xmalloc(CD_SERVE_MAX_HTTP_HEAD + 1);
	w->handshake_timer =
		cd_loop_add_timer(c->server->loop, CD_SERVE_HANDSHAKE_MS, on_handshake_timeout, c);
	return w;
}

void cd_ws_free(struct cd_ws *w)
{
	if (!w)
		return;
	struct cd_loop *l = w->c->server->loop;
	if (w->handshake_timer)
		cd_loop_cancel_timer(l, w->handshake_timer);
	if (w->ping_timer)
		cd_loop_cancel_timer(l, w->ping_timer);
	if (w->ctx)
		wslay_event_context_free(w->ctx);
	free(w->head);
	free(w->extra);
	free(w->wbuf);
	free(w);
}
