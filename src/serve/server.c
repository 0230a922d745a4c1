/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#ifdef __linux__
#include <malloc.h> /* mallopt: glibc's */
#endif
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "os-backend.h"
#include "sandbox/backend.h"
#include "serve/budget.h"
#include "serve/discover-v2.h"
#include "serve/discover.h"
#include "serve/envconfig.h"
#include "serve/fs-ops.h"
#include "serve/fs-watch.h"
#include "serve/fs.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/netproxy.h"
#include "serve/sandboxes.h"
#include "serve/server.h"
#include "serve/testhook.h"
#include "serve/workq.h"
#include "shared/log.h"
#include "shared/random.h"
#include "spawn.h"

/* ---- session: the process table ---- */

static uint64_t hash_id(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static void uuid_v4(char out[37])
{
	unsigned char b[16];
	if (!cd_random_bytes(b, sizeof(b))) {
		/* No random source: still unique enough for one stdio session. */
		uint64_t t = cd_loop_now_ms() ^ ((uint64_t)getpid() << 32);
		memset(b, 0, sizeof(b));
		memcpy(b, &t, sizeof(t));
		memcpy(b + 8, &t, sizeof(t));
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

struct cd_session *cd_session_new(struct cd_server *s, struct cd_conn *c)
{
	if (s->n_sessions >= s->opts.max_sessions)
		return NULL;
	struct cd_session *se = cd_xcalloc(1, sizeof(*se));
	se->server = s;
	uuid_v4(se->id);
	se->n_buckets = 64;
	se->buckets = cd_xcalloc(se->n_buckets, sizeof(*se->buckets));
	se->next = s->sessions;
	if (s->sessions)
		s->sessions->prev = se;
	s->sessions = se;
	s->n_sessions++;
	se->conn = c;
	cd_testhook_event("session-attached session=%s conn=%lu", se->id, c->serial);
	/* stdio never detaches: its end is the server's. */
	se->lossless = s->opts.lossless && s->opts.listen != CD_LISTEN_STDIO;
	return se;
}

struct cd_session *cd_session_lookup(struct cd_server *s, const char *id, size_t len)
{
	for (struct cd_session *se = s->sessions; se; se = se->next)
		if (len == strlen(se->id) && !memcmp(se->id, id, len))
			return se;
	return NULL;
}

static void on_ttl(struct cd_loop *l, void *data)
{
	struct cd_session *se = data;
	se->ttl = NULL;
	cd_log_info("serve: session %s: not resumed within %u ms: ending its %zu process(es)",
		    se->id, se->server->opts.session_ttl_ms, se->n_procs);
	cd_testhook_event("session-expired session=%s", se->id);
	cd_session_free(se);
}

/* fn on each process of se; not on an id reserved by a process/start still being prepared. */
static void for_each_entry(struct cd_session *se, void (*fn)(struct cd_pentry *e))
{
	for (size_t i = 0; i < se->n_buckets; i++)
		for (struct cd_pentry *e = se->buckets[i], *next; e; e = next) {
			next = e->next;
			if (e->proc)
				fn(e);
		}
}

static void entry_detached(struct cd_pentry *e)
{
	cd_proc_detached(e->proc);
}

void cd_session_detach(struct cd_session *se, struct cd_conn *c)
{
	struct cd_server *s = se->server;

	cd_fs_watch_session_detached(se, c);

	if (se->conn == c) {
		/* Before the connection goes: what it wrote out is acknowledged. */
		if (se->lossless)
			for_each_entry(se, entry_detached);
		if (se->replay) {
			cd_loop_cancel_timer(s->loop, se->replay);
			se->replay = NULL;
		}
		se->conn = NULL;
		/*
		 * Still answering a long poll or fs requests: the answers (or
		 * the eviction, if the session is resumed elsewhere) come later.
		 */
		if ((c->pending || c->start || cd_fs_conn_busy(c)) && !c->freed)
			se->linger = c;
		/* Nobody reads now: the processes record into their rings instead. */
		cd_session_pause_output(se, false);
		cd_log_debug("serve: session %s detached from connection %lu", se->id, c->serial);
		cd_testhook_event("session-detached session=%s conn=%lu", se->id, c->serial);
	} else if (se->linger == c) {
		se->linger = NULL;
	}
	if (s->opts.listen == CD_LISTEN_STDIO || se->conn || se->ttl || s->stopping)
		return;
	se->ttl = cd_loop_add_timer(s->loop, s->opts.session_ttl_ms, on_ttl, se);
}

static void on_retention(struct cd_loop *l, void *data);

/* Resumed: a process forgotten meanwhile but kept (on_retention) gets its retention again. */
static void entry_attached(struct cd_pentry *e)
{
	struct cd_server *s = e->session->server;
	e->attach_seq = cd_proc_last_seq(e->proc);
	if (e->expired) {
		e->expired = false;
		e->retention = cd_loop_add_timer(s->loop, s->opts.retention_ms, on_retention, e);
	}
}

static void entry_replayed(struct cd_pentry *e)
{
	cd_proc_ack(e->proc, e->attach_seq);
}

/*
 * --session-ttl after a resume: output from before it that the client has
 * not asked for (process/read) is no longer kept for it, and processes
 * held for it go on. A client that resumes reads what it missed at once.
 */
static void on_replay(struct cd_loop *l, void *data)
{
	struct cd_session *se = data;
	se->replay = NULL;
	if (se->n_held)
		cd_log_debug("serve: session %s: output from before its resume not read within "
			     "%u ms: no longer kept",
			     se->id, se->server->opts.session_ttl_ms);
	for_each_entry(se, entry_replayed);
}

void cd_session_attach(struct cd_session *se, struct cd_conn *c)
{
	struct cd_conn *old = se->linger;
	struct cd_server *s = se->server;

	if (se->ttl) {
		cd_loop_cancel_timer(se->server->loop, se->ttl);
		se->ttl = NULL;
	}
	se->conn = c;
	se->linger = NULL;
	for_each_entry(se, entry_attached);
	if (se->lossless && !se->replay)
		se->replay = cd_loop_add_timer(s->loop, s->opts.session_ttl_ms, on_replay, se);
	cd_testhook_event("session-attached session=%s conn=%lu", se->id, c->serial);
	cd_fs_watch_session_attached(se);
	if (old) {
		/* Reference 1.7: the request in flight on the old connection fails, and it ends. */
		old->evicted = true;
		if (old->pending) {
			cd_conn_error(old, old->pending->req_id, CD_RPC_INVALID_REQUEST,
				      "session has been resumed by another connection");
			cd_pending_drop(old);
		}
		/* A start in flight still starts its process, in the session; no answer. */
		if (old->start)
			cd_start_conn_gone(old->start,
					   "session has been resumed by another connection");
		old->session = NULL;
		cd_conn_close(old, "connection evicted after session resume");
	}
}

static struct cd_pentry **bucket_of(struct cd_session *se, const char *id, size_t len)
{
	return &se->buckets[hash_id(id, len) & (se->n_buckets - 1)];
}

static struct cd_pentry *find_entry(struct cd_session *se, const char *id, size_t len)
{
	if (!se)
		return NULL;
	for (struct cd_pentry *e = *bucket_of(se, id, len); e; e = e->next)
		if (e->id_len == len && !memcmp(e->id, id, len))
			return e;
	return NULL;
}

struct cd_pentry *cd_session_find(struct cd_session *se, const char *id, size_t len)
{
	struct cd_pentry *e = find_entry(se, id, len);
	return e && e->proc ? e : NULL;
}

bool cd_session_has(struct cd_session *se, const char *id, size_t len)
{
	return find_entry(se, id, len) != NULL;
}

static void table_insert(struct cd_session *se, struct cd_pentry *e)
{
	if (se->n_procs + 1 > se->n_buckets) {
		size_t n = se->n_buckets * 2;
		struct cd_pentry **nb = cd_xcalloc(n, sizeof(*nb));
		for (size_t i = 0; i < se->n_buckets; i++) {
			for (struct cd_pentry *x = se->buckets[i], *next; x; x = next) {
				next = x->next;
				struct cd_pentry **b = &nb[hash_id(x->id, x->id_len) & (n - 1)];
				x->next = *b;
				*b = x;
			}
		}
		free(se->buckets);
		se->buckets = nb;
		se->n_buckets = n;
	}
	struct cd_pentry **b = bucket_of(se, e->id, e->id_len);
	e->next = *b;
	*b = e;
	se->n_procs++;
}

static void table_remove(struct cd_session *se, struct cd_pentry *e)
{
	for (struct cd_pentry **p = bucket_of(se, e->id, e->id_len); *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			se->n_procs--;
			return;
		}
	}
}

static void entry_free(struct cd_pentry *e)
{
	struct cd_loop *l = e->session->server->loop;
	if (e->starting)
		cd_start_orphan(e->starting);
	cd_netproxy_stop(e->netproxy, e->session->server->stopping);
	if (e->retention)
		cd_loop_cancel_timer(l, e->retention);
	if (e->proc && cd_proc_is_held(e->proc))
		e->session->n_held--;
	/* While the loop runs, a process still running is reaped later, not waited for. */
	if (e->session->server->stopping)
		cd_proc_free(e->proc);
	else
		cd_proc_free_async(e->proc);
	free(e->id);
	free(e->id_json);
	free(e);
}

/* Processes of an ended session freed per loop iteration (each kill and close costs ~50 us). */
#define SESSION_DRAIN 256

/* Free up to max entries of an ended session; true once it is empty (then it is freed). */
static bool session_drain(struct cd_session *se, size_t max)
{
	for (size_t n = 0; n < max && se->n_procs > 0;) {
		struct cd_pentry **b = &se->buckets[se->drain_bucket];
		if (!*b) {
			se->drain_bucket++;
			continue;
		}
		struct cd_pentry *e = *b;
		*b = e->next;
		se->n_procs--;
		entry_free(e);
		n++;
	}
	if (se->n_procs > 0)
		return false;
	struct cd_server *s = se->server;
	for (struct cd_session **pp = &s->draining; *pp; pp = &(*pp)->drain_next) {
		if (*pp == se) {
			*pp = se->drain_next;
			break;
		}
	}
	if (se->drain)
		cd_loop_cancel_timer(s->loop, se->drain);
	free(se->buckets);
	free(se);
	return true;
}

static void on_drain(struct cd_loop *l, void *data)
{
	struct cd_session *se = data;
	se->drain = NULL;
	if (!session_drain(se, SESSION_DRAIN))
		se->drain = cd_loop_add_timer(l, 0, on_drain, se);
}

void cd_session_free(struct cd_session *se)
{
	if (!se || se->ending)
		return;
	struct cd_server *s = se->server;
	if (se->ttl)
		cd_loop_cancel_timer(s->loop, se->ttl);
	se->ttl = NULL;
	if (se->replay)
		cd_loop_cancel_timer(s->loop, se->replay);
	se->replay = NULL;
	/* A connection still answering a long poll of this session: the entry goes away. */
	for (struct cd_conn *c = s->conns; c; c = c->next) {
		if (c->session != se)
			continue;
		cd_pending_drop(c);
		c->session = NULL;
		if (c->kind != CD_CONN_STDIO)
			cd_conn_close(c, "session ended");
	}
	if (se->prev)
		se->prev->next = se->next;
	else if (s->sessions == se)
		s->sessions = se->next;
	if (se->next)
		se->next->prev = se->prev;
	s->n_sessions--;
	se->conn = se->linger = NULL;
	cd_fs_watch_session_free(se);
	se->ending = true;
	se->drain_next = s->draining;
	s->draining = se;
	if (!session_drain(se, s->stopping ? SIZE_MAX : SESSION_DRAIN))
		se->drain = cd_loop_add_timer(s->loop, 0, on_drain, se);
}

void cd_session_drain_all(struct cd_server *s)
{
	while (s->draining)
		(void)session_drain(s->draining, SIZE_MAX);
}

void cd_session_pause_output(struct cd_session *se, bool paused)
{
	for (size_t i = 0; se && i < se->n_buckets; i++)
		for (struct cd_pentry *e = se->buckets[i]; e; e = e->next)
			if (e->proc)
				cd_proc_pause_output(e->proc, paused);
}

static void entry_recheck(struct cd_pentry *e)
{
	cd_proc_recheck(e->proc);
}

void cd_session_delivered(struct cd_session *se)
{
	if (se->n_held)
		for_each_entry(se, entry_recheck);
}

static uint64_t on_delivered(struct cd_proc *p, void *data)
{
	struct cd_pentry *e = data;
	return e->session->conn ? cd_conn_delivered(e->session->conn) : 0;
}

static void on_held(struct cd_proc *p, bool held, void *data)
{
	struct cd_pentry *e = data;
	struct cd_session *se = e->session;
	if (held)
		se->n_held++;
	else
		se->n_held--;
	cd_log_debug("serve: process %s: %s", e->id,
		     held ? (se->conn ? "output held until the client has what was sent"
				      : "output held until the session is resumed")
			  : "output read again");
	cd_testhook_event("output-held proc=%s on=%d", e->id, held);
	/* The client's stall timer runs while the session's processes wait for it. */
	if (held && se->conn)
		cd_conn_kick(se->conn);
}

/* ---- process events ---- */

static void check_pending(struct cd_pentry *e)
{
	struct cd_conn *c = e->session->conn;
	if (c && c->pending && c->pending->entry == e)
		(void)cd_pending_try_complete(c, false);
	c = e->session->linger;
	if (c && c->pending && c->pending->entry == e)
		(void)cd_pending_try_complete(c, false);
}

#define OUTPUT_HEAD "{\"method\":\"process/output\",\"params\":{\"processId\":"

static void on_output(struct cd_proc *p, const struct cd_chunk *ch, void *data)
{
	struct cd_pentry *e = data;
	struct cd_conn *c = e->session->conn;

	if (c && !c->out_broken) {
		/* The hot path: format straight into the queue, base64 included. */
		const char *stream = cd_stream_name(ch->stream);
		size_t slen = strlen(stream);
		size_t b64 = cd_base64_encoded_len(ch->len);
		size_t need = sizeof(OUTPUT_HEAD) + e->id_json_len + 64 + slen + b64;
		char *w = cd_conn_out_reserve(c, need);
		char *q = w;
		memcpy(q, OUTPUT_HEAD, sizeof(OUTPUT_HEAD) - 1);
		q += sizeof(OUTPUT_HEAD) - 1;
		memcpy(q, e->id_json, e->id_json_len);
		q += e->id_json_len;
		memcpy(q, ",\"seq\":", 7);
		q += 7;
		q += cd_fmt_u64(q, ch->seq);
		memcpy(q, ",\"stream\":\"", 11);
		q += 11;
		memcpy(q, stream, slen);
		q += slen;
		memcpy(q, "\",\"chunk\":\"", 11);
		q += 11;
		q += cd_base64_encode(ch->data, ch->len, q);
		memcpy(q, "\"}}\n", 4);
		q += 4;
		cd_conn_out_commit(c, (size_t)(q - w));
		cd_proc_chunks_sent(p, ch->seq, ch->seq, c->out_committed);
		/* No flush yet: on_output_end writes the whole burst at once. */
	}
	check_pending(e);
}

static void on_output_end(struct cd_proc *p, void *data)
{
	struct cd_pentry *e = data;
	struct cd_conn *c = e->session->conn;

	if (c && !c->out_broken)
		cd_conn_kick(c);
}

static void on_exited(struct cd_proc *p, uint64_t seq, int exit_code, bool sandbox_denied,
		      void *data)
{
	struct cd_pentry *e = data;
	struct cd_conn *c = e->session->conn;

	cd_log_debug("serve: process %s exited with %d%s", e->id, exit_code,
		     sandbox_denied ? " (sandbox denied)" : "");
	if (c && !c->out_broken) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "{\"method\":\"process/exited\",\"params\":{\"processId\":");
		cd_strbuf_append_n(&sb, e->id_json, e->id_json_len);
		cd_strbuf_printf(&sb, ",\"seq\":%" PRIu64 ",\"exitCode\":%d,\"sandboxDenied\":%s",
				 seq, exit_code, sandbox_denied ? "true" : "false");
		/* cordon's extension: the limit the command ran into, when one did. */
		int limit;
		const char *reason = cd_proc_limit_reason(p, &limit);
		if (reason) {
			cd_strbuf_printf(&sb, ",\"cordon\":{\"limit\":\"%s\",\"reason\":",
					 cd_limit_info((enum cd_limit)limit)->key);
			cd_json_write_cstr(&sb, reason);
			cd_strbuf_append_c(&sb, '}');
		}
		cd_strbuf_append(&sb, "}}\n");
		memcpy(cd_conn_out_reserve(c, sb.len), sb.buf, sb.len);
		cd_conn_out_commit(c, sb.len);
		cd_strbuf_done(&sb);
		cd_conn_kick(c);
	}
	check_pending(e);
}

static void on_retention(struct cd_loop *l, void *data)
{
	struct cd_pentry *e = data;
	struct cd_session *se = e->session;
	struct cd_server *s = se->server;
	e->retention = NULL;
	/*
	 * Its session is detached: a client may still resume it and ask for
	 * this process, so it stays until then (and gets its retention again),
	 * or until the session ends.
	 */
	if (!se->conn && s->opts.listen != CD_LISTEN_STDIO && !s->stopping) {
		e->expired = true;
		cd_log_debug("serve: process %s: closed %u ms ago, kept while its session can be "
			     "resumed",
			     e->id, s->opts.retention_ms);
		return;
	}
	cd_log_debug("serve: forgetting process %s", e->id);
	table_remove(e->session, e);
	entry_free(e);
}

static void on_closed(struct cd_proc *p, uint64_t seq, void *data)
{
	struct cd_pentry *e = data;
	struct cd_conn *c = e->session->conn;

	if (c && !c->out_broken) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "{\"method\":\"process/closed\",\"params\":{\"processId\":");
		cd_strbuf_append_n(&sb, e->id_json, e->id_json_len);
		cd_strbuf_printf(&sb, ",\"seq\":%" PRIu64 "}}\n", seq);
		memcpy(cd_conn_out_reserve(c, sb.len), sb.buf, sb.len);
		cd_conn_out_commit(c, sb.len);
		cd_strbuf_done(&sb);
		cd_conn_kick(c);
	}
	/* Nothing of the process is left to use its proxy (reference 3.5 step 1). */
	cd_netproxy_stop(e->netproxy, false);
	e->netproxy = NULL;
	if (!e->retention && !e->expired)
		e->retention =
			cd_loop_add_timer(e->session->server->loop,
					  e->session->server->opts.retention_ms, on_retention, e);
	check_pending(e);
}

struct cd_pentry *cd_session_reserve(struct cd_session *se, const char *id, size_t id_len)
{
	struct cd_pentry *e = cd_xcalloc(1, sizeof(*e));
	struct cd_strbuf sb = { 0 };

	e->session = se;
	e->id = cd_xmalloc(id_len + 1);
	memcpy(e->id, id, id_len);
	e->id[id_len] = '\0';
	e->id_len = id_len;
	cd_strbuf_append_json_string(&sb, id, id_len);
	e->id_json_len = sb.len;
	e->id_json = cd_strbuf_steal(&sb);
	table_insert(se, e);
	return e;
}

void cd_session_unreserve(struct cd_pentry *e)
{
	e->starting = NULL;
	table_remove(e->session, e);
	entry_free(e);
}

int cd_session_start(struct cd_pentry *e, const struct cd_proc_opts *o, int *ret_code, char **err)
{
	struct cd_session *se = e->session;
	struct cd_spawn_error serr;

	struct cd_proc_events ev = {
		.data = e,
		.output = on_output,
		.output_end = on_output_end,
		.exited = on_exited,
		.closed = on_closed,
		.delivered = on_delivered,
		.held = on_held,
	};
	memset(&serr, 0, sizeof(serr));
	int r = cd_proc_start(se->server->loop, o, &ev, &e->proc, &serr);
	if (r < 0) {
		*ret_code = CD_RPC_INTERNAL;
		*err = cd_xstrdup(serr.msg[0] ? serr.msg : strerror(-r));
		e->proc = NULL;
		cd_session_unreserve(e);
		return -1;
	}
	cd_proc_set_lossless(e->proc, se->lossless);
	if (se->conn && se->conn->output_paused)
		cd_proc_pause_output(e->proc, true);
	return 0;
}

/* ---- process/read and long polls ---- */

bool cd_read_is_ready(const struct cd_proc_read *r, uint64_t after_seq)
{
	return r->n > 0 || r->closed || (r->exited && after_seq + 1 < r->next_seq);
}

void cd_reply_read(struct cd_conn *c, const char *req_id, struct cd_pentry *e,
		   const struct cd_proc_read *r)
{
	size_t idlen = strlen(req_id);
	size_t need = idlen + 256;
	for (size_t i = 0; i < r->n; i++)
		need += 64 + cd_base64_encoded_len(r->chunks[i].len);
	char *w = cd_conn_out_reserve(c, need);
	char *q = w;

#define PUT(s)                               \
	do {                                 \
		memcpy(q, s, sizeof(s) - 1); \
		q += sizeof(s) - 1;          \
	} while (0)

	PUT("{\"id\":");
	memcpy(q, req_id, idlen);
	q += idlen;
	PUT(",\"result\":{\"chunks\":[");
	for (size_t i = 0; i < r->n; i++) {
		const struct cd_chunk *ch = &r->chunks[i];
		const char *stream = cd_stream_name(ch->stream);
		if (i)
			*q++ = ',';
		PUT("{\"seq\":");
		q += cd_fmt_u64(q, ch->seq);
		PUT(",\"stream\":\"");
		memcpy(q, stream, strlen(stream));
		q += strlen(stream);
		PUT("\",\"chunk\":\"");
		q += cd_base64_encode(ch->data, ch->len, q);
		PUT("\"}");
	}
	PUT("],\"nextSeq\":");
	q += cd_fmt_u64(q, r->next_seq);
	if (r->exited) {
		PUT(",\"exited\":true,\"exitCode\":");
		q += (size_t)snprintf(q, 16, "%d", r->exit_code);
	} else {
		PUT(",\"exited\":false,\"exitCode\":null");
	}
	if (r->closed)
		PUT(",\"closed\":true");
	else
		PUT(",\"closed\":false");
	PUT(",\"failure\":null");
	if (r->sandbox_denied)
		PUT(",\"sandboxDenied\":true}}\n");
	else
		PUT(",\"sandboxDenied\":false}}\n");
#undef PUT
	cd_conn_out_commit(c, (size_t)(q - w));
	if (r->n && c == e->session->conn)
		cd_proc_chunks_sent(e->proc, r->chunks[0].seq, r->chunks[r->n - 1].seq,
				    c->out_committed);
	cd_conn_kick(c);
}

static void pending_free(struct cd_pending_read *p)
{
	if (!p)
		return;
	free(p->req_id);
	free(p);
}

void cd_pending_drop(struct cd_conn *c)
{
	struct cd_pending_read *p = c->pending;
	if (!p)
		return;
	if (p->timer)
		cd_loop_cancel_timer(c->server->loop, p->timer);
	c->pending = NULL;
	pending_free(p);
}

bool cd_pending_try_complete(struct cd_conn *c, bool deadline)
{
	struct cd_pending_read *p = c->pending;
	struct cd_proc_read r;

	memset(&r, 0, sizeof(r));
	cd_proc_read(p->entry->proc, p->after_seq, p->max_bytes, &r);
	if (!deadline && !cd_read_is_ready(&r, p->after_seq)) {
		free(r.chunks);
		return false;
	}
	cd_reply_read(c, p->req_id, p->entry, &r);
	free(r.chunks);
	cd_pending_drop(c);
	/* Not from here: this may run inside a process callback. */
	cd_conn_schedule_process(c);
	return true;
}

/* ---- environment info ---- */

/*
 * The home directory of uid from the password database, for when $HOME is
 * unset. A static glibc can only reach NSS (getpwuid) through the shared
 * libraries of the very glibc it was built with, so the static cordon reads
 * /etc/passwd itself; users that only NSS knows (LDAP) need $HOME set.
 */
static const char *passwd_home(uid_t uid, char *buf, size_t size)
{
	const char *home = NULL;
#ifdef CD_STATIC_BINARY
	FILE *f = fopen("/etc/passwd", "re");
	struct passwd *pw = NULL;
	while (f && (pw = fgetpwent(f)) && pw->pw_uid != uid)
		;
	if (pw)
		home = pw->pw_dir;
#else
	struct passwd *pw = getpwuid(uid);
	if (pw)
		home = pw->pw_dir;
#endif
	if (home && home[0] == '/' && strlen(home) < size)
		home = strcpy(buf, home);
	else
		home = NULL;
#ifdef CD_STATIC_BINARY
	if (f)
		fclose(f);
#endif
	return home;
}

/* initialize's capabilities that only the Linux build honours so far. */
#ifdef __linux__
#define LINUX_ONLY "true"
#else
#define LINUX_ONLY "false"
#endif

static char *build_env_info(void)
{
	char home_buf[PATH_MAX];
	struct cd_strbuf sb = { 0 };
	const char *shell = getenv("SHELL");
	const char *home = getenv("HOME");
	const char *tmp = getenv("TMPDIR");
	char cwd[PATH_MAX];

	if (!shell || shell[0] != '/')
		shell = "/bin/sh";
	const char *name = strrchr(shell, '/') + 1;
	if (!home || home[0] != '/')
		home = passwd_home(getuid(), home_buf, sizeof(home_buf));
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";

	cd_strbuf_append(&sb, "{\"shell\":{\"name\":");
	cd_json_write_cstr(&sb, *name ? name : "sh");
	cd_strbuf_append(&sb, ",\"path\":");
	cd_json_write_cstr(&sb, shell);
	cd_strbuf_append(&sb, "},\"executorVersion\":\"cordon " PACKAGE_VERSION "\"");
	cd_strbuf_append(&sb, ",\"providerId\":\"cordon\",\"cwd\":");
	cd_json_write_path_uri(&sb, getcwd(cwd, sizeof(cwd)) ? cwd : NULL);
	cd_strbuf_append(&sb, ",\"userHomeDir\":");
	cd_json_write_path_uri(&sb, home);
	/* Rust's std::env::consts::OS, as the released binary names its host. */
#ifdef __APPLE__
	cd_strbuf_append(&sb, ",\"platformOs\":\"macos\"");
#else
	cd_strbuf_append(&sb, ",\"platformOs\":\"linux\"");
#endif
	cd_strbuf_append(&sb, ",\"prependPathDirs\":[],\"temporaryDirectories\":[");
	cd_json_write_path_uri(&sb, tmp);
	cd_strbuf_append(&sb, "],\"tempDir\":");
	cd_json_write_path_uri(&sb, tmp);
	/*
	 * The released binary's 15 flags, in its order; true only for what
	 * cordon honours (cordon-protocol(7) says why for each). On macOS the
	 * sandboxed fs helper, the path watches and the managed network's
	 * local-route check are not built yet.
	 */
	cd_strbuf_append(&sb, ",\"capabilities\":{\"networkProxyLaunch\":" LINUX_ONLY ","
			      "\"networkProxyReviewDomains\":false,"
			      "\"credentialMasking\":false,"
			      "\"credentialMaskingCustomProviders\":false,"
			      "\"capabilityDiscoverySandbox\":" LINUX_ONLY ","
			      "\"fsWatchMissing\":" LINUX_ONLY ","
			      "\"capabilityDiscoveryV2\":true,"
			      "\"environmentConfigRead\":true,"
			      "\"httpHeaderEnvVars\":false,"
			      "\"sandboxedFileStreaming\":" LINUX_ONLY ","
			      "\"fileWriteStreaming\":true,"
			      "\"shellSnapshotV2\":false,"
			      "\"windowsMxc\":false,"
			      "\"linuxRootWritePreservesDevices\":false,"
			      "\"linuxApprovedRootWritePreservesRestrictions\":false}}");
	return cd_strbuf_steal(&sb);
}

/* ---- the server's own files, hidden from its sandboxes ---- */

/*
 * Remember path (what it names now, as a canonical path: the mask goes on
 * the file, wherever a symlink on the way points; a socket, ours, is no
 * symlink itself: only its directory is resolved) if it is a socket or a
 * regular file, with an O_PATH descriptor of the file: while it is open the
 * file's inode number cannot go to another file, so that cd_server_hidden_check
 * can tell the very file from anything put in its place later. One that
 * cannot be found is left out with a warning: a sandbox can reach only
 * what exists.
 */
static void hide_file(struct cd_server *s, const char *path, bool is_socket, const char *why)
{
	const char *slash = strrchr(path, '/');
	char *canon = NULL;
	struct stat st;
	int fd = -1;

	if (is_socket) {
		char *dir = !slash	    ? cd_xstrdup(".")
			    : slash == path ? cd_xstrdup("/")
					    : cd_xstrndup(path, (size_t)(slash - path));
		char *rdir = realpath(dir, NULL);
		if (rdir)
			canon = cd_path_join(rdir, slash ? slash + 1 : path);
		free(rdir);
		free(dir);
	} else {
		canon = realpath(path, NULL);
	}
	bool found = false;
#ifdef O_PATH
	if (canon)
		fd = open(canon, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	found = fd >= 0 && fstat(fd, &st) == 0;
#else
	/*
	 * macOS: no O_PATH, and no open(2) of a socket. The token is held by
	 * a descriptor for reading (the server's own file); the socket is
	 * known by its identity alone (hidden_moved), which no other file can
	 * have while it exists.
	 */
	if (canon && is_socket)
		found = lstat(canon, &st) == 0;
	else if (canon)
		fd = open(canon, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		found = fstat(fd, &st) == 0;
#endif
	if (!found || !(S_ISSOCK(st.st_mode) || S_ISREG(st.st_mode))) {
		cd_log_warn("serve: %s %s is not hidden from the sandboxes: %s", why, path,
			    !found ? strerror(errno) : "not a socket or a regular file");
		if (fd >= 0)
			close(fd);
		free(canon);
		return;
	}
	if (S_ISREG(st.st_mode) && st.st_nlink != 1)
		cd_log_warn("serve: %s %s has %ju names (hard links), and a sandbox could read it "
			    "through another: sandboxed requests are refused until it has one; "
			    "remove the other links",
			    why, canon, (uintmax_t)st.st_nlink);
	/*
	 * The token is all a client needs: no sandbox that could read it is
	 * made. The socket has a wall of its own (its peers are judged).
	 */
	s->hidden[s->n_hidden] = (struct cd_hidden_path){
		.path = canon,
		.why = why,
		.required = !is_socket,
		.has_id = true,
		.dev = (unsigned long long)st.st_dev,
		.ino = (unsigned long long)st.st_ino,
	};
	s->hidden_fd[s->n_hidden] = fd;
	s->n_hidden++;
}

/* hidden_moved's answer for a file with another name (a hard link). */
static const char HIDDEN_LINKED[] = "it has other names (hard links), through which a sandbox "
				    "could read it";

/*
 * Whether hidden file i is still where it was found, and the same file:
 * its canonical path is still its path (no directory above it was renamed
 * and replaced, by a symlink either), and names the inode the descriptor
 * holds, which has no other name if it is a regular file (a mask covers
 * one: made at any time, a hard link elsewhere would be readable; the
 * socket has a wall of its own, its peers are judged, and a link to it
 * gets a sandbox nothing). NULL, or why not (a static string).
 */
static const char *hidden_moved(const struct cd_server *s, size_t i)
{
	const char *path = s->hidden[i].path;
	struct stat now, then;

	/* Held by a descriptor (not a socket on macOS: see hide_file), it is known to be gone. */
	if (s->hidden_fd[i] >= 0) {
		if (fstat(s->hidden_fd[i], &then) < 0)
			return "it cannot be looked at";
		if (then.st_nlink == 0)
			return "it was removed, or replaced by another file";
	}
	char *canon = realpath(path, NULL);
	bool same = canon && cd_streq(canon, path);
	free(canon);
	if (!same || lstat(path, &now) < 0)
		return "it, or a directory above it, was moved or removed";
	if ((unsigned long long)now.st_dev != s->hidden[i].dev ||
	    (unsigned long long)now.st_ino != s->hidden[i].ino)
		return "it was replaced by another file";
	if (S_ISREG(now.st_mode) && now.st_nlink != 1)
		return HIDDEN_LINKED;
	return NULL;
}

static char *hidden_refusal(const struct cd_server *s, size_t i, const char *why)
{
	if (why == HIDDEN_LINKED)
		return cd_xasprintf("%s '%s' cannot be hidden from the sandbox (%s): sandboxed "
				    "requests are refused while it has more than one name; remove "
				    "the other links",
				    s->hidden[i].why, s->hidden[i].path, why);
	return cd_xasprintf("%s '%s' is no longer the file the server started with (%s): "
			    "sandboxed requests are refused until it is back (a sandbox could "
			    "reach it where it is now); move it back, or restart the server",
			    s->hidden[i].why, s->hidden[i].path, why);
}

int cd_server_hidden_check(const struct cd_server *s, const char **ret_why, char **reterr)
{
	int r = 0;

	/*
	 * A hidden file that is no longer at its path cannot be masked there,
	 * and masking whatever is there now would leave the file itself
	 * readable wherever it went (in /tmp, say, which a sandbox may list):
	 * no sandbox is made until it is back. Only what hide_file set and
	 * never changes is read: any thread may call this.
	 */
	for (size_t i = 0; i < s->n_hidden; i++) {
		const char *why = hidden_moved(s, i);
		if (ret_why)
			ret_why[i] = why;
		if (why && r == 0) {
			*reterr = hidden_refusal(s, i, why);
			r = -ESTALE;
		}
	}
	return r;
}

void cd_server_hidden_note(struct cd_server *s, const char *const *why)
{
	for (size_t i = 0; i < s->n_hidden; i++) {
		if (why[i] == HIDDEN_LINKED && !s->hidden_lost[i])
			cd_log_error("serve: %s '%s' cannot be hidden from the sandboxes (%s): "
				     "refusing every sandboxed request while it has more than "
				     "one name; remove the other links",
				     s->hidden[i].why, s->hidden[i].path, why[i]);
		else if (why[i] && !s->hidden_lost[i])
			cd_log_error("serve: %s '%s' is no longer the file the server started with "
				     "(%s): refusing every sandboxed request until it is back, "
				     "since a sandbox could reach it where it is now; move it "
				     "back, or restart the server",
				     s->hidden[i].why, s->hidden[i].path, why[i]);
		else if (!why[i] && s->hidden_lost[i])
			cd_log_info("serve: %s '%s' is the file the server started with again, "
				    "with one name: serving sandboxed requests again",
				    s->hidden[i].why, s->hidden[i].path);
		s->hidden_lost[i] = why[i] != NULL;
	}
}

/* ---- lifecycle ---- */

/*
 * Started as needed: one is what the loop usually has to hand over at a
 * time. Four, so that a few bindings stuck on a hung mount (each holds its
 * worker until the mount answers) leave the other clients' starts and
 * large messages a worker.
 */
#define PREP_WORKERS 4

struct cd_workq *cd_server_prep_workq(struct cd_server *s)
{
	/* None once the server stops: what comes then is refused or done in place. */
	if (!s->prep_workq && !s->stopping)
		s->prep_workq = cd_workq_new(s->loop, PREP_WORKERS);
	return s->prep_workq;
}

void cd_server_stop(struct cd_server *s)
{
	s->stopping = true;
	cd_loop_quit(s->loop);
}

void cd_serve_opts_init(struct cd_serve_opts *o)
{
	o->max_processes = CD_SERVE_DEFAULT_MAX_PROCS;
	o->activated_fd = -1;
	o->max_connections = CD_SERVE_DEFAULT_MAX_CONNS;
	o->max_sessions = CD_SERVE_DEFAULT_MAX_SESSIONS;
	o->max_queued_bytes = CD_SERVE_OUT_QUEUE_CAP;
	o->max_memory = cd_mem_default_limit();
	o->lossless = true;
	o->retention_ms = CD_SERVE_RETENTION_MS;
	o->session_ttl_ms = CD_SERVE_DEFAULT_SESSION_TTL;
	o->ping_ms = CD_SERVE_DEFAULT_PING;
	o->stall_ms = CD_SERVE_DEFAULT_STALL;
}

static void on_stop_signal(struct cd_loop *l, int signo, void *data)
{
	struct cd_server *s = data;
	cd_log_debug("serve: %s: shutting down", strsignal(signo));
	cd_testhook_event("server-stopping signal=%d", signo);
	cd_server_stop(s);
}

/*
 * systemd's readiness protocol (Type=notify; sd-daemon.h): READY=1 once the
 * listener is up and every check passed, with the pid systemd started (the
 * outer process of pidns.c, which exits with the server's status) and a
 * STATUS= line; STOPPING=1 when the shutdown begins. Handed to the outer
 * (cd_serve_notify_fd), which sends them as the main process. There is no
 * reload (SIGHUP stops the server), so RELOADING=1 is never sent.
 */
static void notify(struct cd_server *s, const char *msg)
{
	if (cd_serve_notify_fd < 0)
		return;
	/* One packet (O_DIRECT pipe), at most PIPE_BUF bytes: written whole or not at all. */
	ssize_t n = write(cd_serve_notify_fd, msg, strlen(msg));
	if (n != (ssize_t)strlen(msg))
		cd_log_warn("serve: cannot hand a notification for systemd over: %s",
			    n < 0 ? strerror(errno) : "short write");
}

static void notify_ready(struct cd_server *s)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%d\nSTATUS=Serving on %s",
		 (int)s->opts.pid_file_pid, s->where[0] ? s->where : "stdio");
	notify(s, msg);
	s->notified_ready = true;
}

static void notify_stopping(struct cd_server *s)
{
	if (!s->notified_ready)
		return;
	notify(s, "STOPPING=1\nSTATUS=Stopping: ending every process");
	s->notified_ready = false;
}

static void noop_handler(int sig)
{
}

bool cd_serve_sighup_ignored(void)
{
	struct sigaction sa;
	return sigaction(SIGHUP, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

/* The signals that end the server: SIGTERM, SIGINT, and SIGHUP unless nohup'ed. */
static const int stop_signals[] = { SIGTERM, SIGINT, SIGHUP };

#ifdef __linux__
/*
 * Whether this server's user could change what p executes (the very file
 * found, executed by descriptor): it may write it, or owns it and so may
 * make it writable (chmod), which Landlock does not govern.
 */
static bool program_writable(const struct cd_program *p)
{
	char fdpath[64];
	struct stat st;
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", p->fd);
	if (access(fdpath, W_OK) == 0 || errno != EACCES)
		return true;
	return fstat(p->fd, &st) < 0 || st.st_uid == geteuid();
}

/*
 * Find a program the server executes in its sandboxes and seal a copy of it
 * in memory: the file may lie where a sandbox can write (a build tree in a
 * workspace, a copy in /tmp), and a sandbox that changed it would run code
 * in every later one. Without a sealed copy, only a file the server cannot
 * change itself (and so no sandbox of it) will do. 0, or -1 after logging.
 */
static int open_program(const char *name, struct cd_program *p)
{
	char *why = NULL;
	if (cd_program_open(name, p, &why) < 0) {
		cd_log_error("serve: %s", why);
		free(why);
		return -1;
	}
	if (cd_program_seal(p, &why) == 0)
		return 0;
	if (program_writable(p)) {
		cd_log_error("serve: %s, and the file can be changed by this server's user (it "
			     "may write it, or owns it), so its sandboxes could change it; install "
			     "cordon where only root can write, or allow executable memfds "
			     "(vm.memfd_noexec)",
			     why);
		free(why);
		return -1;
	}
	cd_log_warn("serve: %s; executing it from its file", why);
	free(why);
	return 0;
}
#endif

static bool workers_left;

bool cd_serve_workers_left(void)
{
	return workers_left;
}

int cd_serve(const struct cd_serve_opts *o)
{
	/*
	 * Static, not on this stack: a worker left stuck at shutdown (see
	 * workers_left below) reads the server's state, and may resume after
	 * this function returned.
	 */
	static struct cd_server srv;
	int ret = 0;

	memset(&srv, 0, sizeof(srv));
	if (cd_testhook_init() < 0)
		return 1;
	srv.opts = *o;
	cd_mem_set_limit(o->max_memory);
	cd_metrics.started_ms = cd_loop_now_ms();
	srv.listen_fd = -1;
	srv.reserve_fd = -1;
	struct rlimit nofile;
	srv.nofile_limit = getrlimit(RLIMIT_NOFILE, &nofile) == 0 ? nofile.rlim_cur : 0;
	srv.init.fd = -1;
	srv.fs_helper.fd = -1;
	/*
	 * Every sandboxed process gets a pid namespace whose init is
	 * cordon-init (init/init.h), and sandboxed fs requests run in
	 * cordon-fs-helper (fs.c), both executed by descriptor: found once,
	 * here, so that a broken installation fails now, not at each request.
	 */
	/*
	 * macOS has no pid namespaces, so no cordon-init, and the fs helper
	 * does not run under sandbox-exec yet: a sandboxed fs request is
	 * refused there (fs-helper.c). Once it does, its policies must deny
	 * writing the helper and pin the directories above it, as they do for
	 * the token (cd_seatbelt_input.hidden): there it runs by its path.
	 */
#ifdef __linux__
	if (open_program(CD_INIT_PROGRAM, &srv.init) < 0 ||
	    open_program(CD_FS_HELPER_PROGRAM, &srv.fs_helper) < 0) {
		cd_program_done(&srv.init);
		return 1;
	}
#endif
	/* A sealed copy needs no Landlock rule: see cd_program_seal. */
	srv.opts.lopts.init_program = srv.init.sealed ? NULL : srv.init.path;
	srv.fs_lopts = srv.opts.lopts;
	srv.fs_lopts.init_program = NULL;
	srv.fs_lopts.exec_program = srv.fs_helper.sealed ? NULL : srv.fs_helper.path;
	srv.loop = cd_loop_new(o->loop);
	if (!srv.loop) {
		cd_log_error("serve: cannot create the event loop: %s", strerror(errno));
		cd_program_done(&srv.init);
		cd_program_done(&srv.fs_helper);
		return 1;
	}
#ifndef __APPLE__ /* Seatbelt plans need no host facts */
	/* Once per server: every sandboxed start reuses these facts. */
	cd_linux_probe_host(CD_PROBE_ALL | CD_PROBE_NS_TEST, &srv.host);
	/* Where the limits of a process/start would go (a few reads, nothing made). */
	cd_linux_probe_limits(&srv.host.lim);
#endif
	/*
	 * Large messages are parsed, decoded and freed on worker threads,
	 * whose allocations live in arenas of their own: with glibc's sliding
	 * mmap threshold (raised to the size of each large block freed, up to
	 * 32 MiB), an 11 MB string came from such an arena and stayed in the
	 * server's RSS once freed (six 8 MiB fs/writeFiles of clients that
	 * left: +58 MiB; malloc_trim does not reach the top of a thread's
	 * arena). A fixed threshold keeps every block of 4 MiB and more in a
	 * mapping of its own, given back to the kernel when freed. Not lower:
	 * at 256 KiB the relay of output, whose buffers are of 1-2 MiB, was
	 * twice as slow.
	 */
#ifdef M_MMAP_THRESHOLD
	(void)mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
#endif
	srv.env_info = build_env_info();
	/* libcurl's set-up (its TLS library reads its configuration) now, not on the loop later. */
	if (srv.opts.http_allow) {
		char *herr = NULL;
		if (cd_http_server_start(&srv, &herr) < 0) {
			cd_log_error("serve: %s", herr ? herr : "http/request cannot be served");
			free(herr);
			cd_loop_free(srv.loop);
			cd_program_done(&srv.init);
			cd_program_done(&srv.fs_helper);
			return 1;
		}
	}

	/*
	 * A reader that went away must show up as EPIPE, not kill us. A handler
	 * rather than SIG_IGN: exec resets it, so no child inherits an ignored
	 * SIGPIPE (the spawner resets it too).
	 */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = noop_handler;
	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGPIPE, &sa, NULL);
	/* The loop delivers them, with a handler each (see cd_loop_watch_signals). */
	int sigs[CD_ARRAY_SIZE(stop_signals)];
	size_t n_sigs = 0;
	for (size_t i = 0; i < CD_ARRAY_SIZE(stop_signals); i++)
		if (stop_signals[i] != SIGHUP || !cd_serve_sighup_ignored())
			sigs[n_sigs++] = stop_signals[i];
	int r_sig = cd_loop_watch_signals(srv.loop, sigs, n_sigs, on_stop_signal, &srv);
	if (r_sig < 0) {
		cd_log_error("serve: cannot watch signals: %s", strerror(-r_sig));
		ret = 1;
		goto out;
	}
	/*
	 * The init of a pid namespace, or a child subreaper (pidns.c), inherits
	 * every orphaned descendant: reap them.
	 */
	int subreaper = 0, r0;
#ifdef __linux__
	(void)prctl(PR_GET_CHILD_SUBREAPER, &subreaper, 0, 0, 0);
#endif
	srv.adopts_orphans = getpid() == 1 || subreaper;
	if (srv.adopts_orphans && (errno = -cd_loop_reap_orphans(srv.loop, true)) != 0) {
		cd_log_error("serve: cannot reap orphaned processes: %s", strerror(errno));
		ret = 1;
		goto out;
	}

	/*
	 * Who the clients are (sandboxes.h): the host's /proc is handed over.
	 * Stdio has one client, its parent: a socket's clients could be
	 * sandboxed processes of ours, which only /proc tells apart.
	 */
	r0 = cd_sandboxes_init(cd_serve_host_proc, srv.adopts_orphans);
	cd_serve_host_proc = -1;
	if (r0 < 0 && o->listen != CD_LISTEN_STDIO) {
		cd_log_error("serve: cannot open /proc (%s), where the server tells its own "
			     "sandboxed processes from other clients; mount procfs on /proc",
			     strerror(-r0));
		ret = 1;
		goto out;
	}

	struct cd_conn *stdio = NULL;
	if (o->listen == CD_LISTEN_STDIO) {
		stdio = cd_conn_new(&srv, CD_CONN_STDIO, STDIN_FILENO, STDOUT_FILENO);
		cd_log_debug("serve: listening on stdio (%s loop)",
			     cd_loop_kind(srv.loop) == CD_LOOP_EPOLL ? "epoll" : "poll");
	} else if (cd_listen_start(&srv) < 0) {
		ret = 1;
		goto out;
	}
	/* Its sandboxes do not even see the server's socket and token (cd_server_hidden_check). */
	if (srv.unix_bound)
		hide_file(&srv, srv.unix_bound, true, "cordon serve's unix socket");
	if (srv.unix_activated)
		hide_file(&srv, srv.unix_activated, true, "cordon serve's unix socket");
	if (o->auth_token_file)
		hide_file(&srv, o->auth_token_file, false, "cordon serve's token file");
	/* Masked in every sandbox; each request checks them first (cd_server_hidden_check). */
	srv.opts.lopts.hidden = srv.fs_lopts.hidden = srv.hidden;
	srv.opts.lopts.n_hidden = srv.fs_lopts.n_hidden = srv.n_hidden;
	cd_testhook_event("serve-ready");
	notify_ready(&srv);
	/*
	 * Said once now rather than discovered at each refusal. (No warning
	 * for a file below a directory the server's user may write, the usual
	 * place: the pins and the checks keep it hidden there.)
	 */
	if (o->auth_token_file && !srv.host.userns && !srv.host.is_root &&
	    cd_os_backend_native() == CD_CLI_BACKEND_LINUX) /* Seatbelt denies it by a rule */
		cd_log_warn(
			"serve: without user namespaces the token file '%s' cannot be hidden "
			"from the sandboxes: a sandboxed request that could read it is refused; "
			"keep it out of the paths sandboxes may read",
			o->auth_token_file);
	int r = cd_loop_run(srv.loop);
	if (r < 0) {
		cd_log_error("serve: event loop failed: %s", strerror(-r));
		ret = 1;
	}
	srv.stopping = true;
	notify_stopping(&srv);
	/* Stop accepting first: nobody new comes in while everything ends. */
	cd_listen_stop(&srv);
	cd_admit_stop(&srv);
	/* Before the processes: a sandboxed fs request's helper must end before cd_kill_children. */
	cd_fs_server_stop(&srv);
	cd_discover_server_stop(&srv);
	cd_discover_v2_server_stop(&srv);
	cd_envconfig_server_stop(&srv);
	cd_start_server_stop(&srv);
	cd_http_server_stop(&srv);
	workers_left = srv.workers_left;
	if (workers_left)
		cd_testhook_event("server-workers-left");

	/* Every connection is over: abandon the long polls, then end every process. */
	for (struct cd_conn *c = srv.conns; c; c = c->next)
		cd_pending_drop(c);
	while (srv.sessions) {
		struct cd_session *se = srv.sessions;
		if (se->conn)
			se->conn->session = NULL;
		se->conn = NULL;
		cd_session_free(se);
	}
	/* And those ended while the loop ran: not all freed, or not reaped yet. */
	cd_session_drain_all(&srv);
	cd_fs_watch_server_stop(&srv);
	cd_proc_reap_zombies();
	/*
	 * What left its process group and came back to us as an orphan was
	 * started by us too: it does not outlive the server. (As pid 1 the
	 * kernel does this when we exit; doing it here is the same.)
	 */
	if (srv.adopts_orphans)
		cd_kill_children();
	if (stdio && !stdio->freed)
		cd_conn_final_flush(stdio, 2000);
	/*
	 * A worker still stuck in a system call (a hung mount) resumes the
	 * instant the file system lets go, and reads what its job points to:
	 * the connections (the descriptor an fs/readFile answer is written
	 * to), the hidden files' paths and descriptors, the programs, the
	 * options, this server. From here on nothing is freed or closed (the
	 * sessions above hold nothing a running job reads): the process's
	 * exit, right after, releases it all, and the clients see their
	 * connections end then. Only the signals go back (the socket file
	 * and the pid file went with cd_listen_stop above).
	 */
	if (workers_left) {
		cd_loop_unwatch_signals(srv.loop);
		return ret;
	}
	while (srv.conns) {
		struct cd_conn *c = srv.conns;
		if (c != stdio && !c->freed)
			cd_conn_close(c, "server shutting down");
		cd_conn_free(c);
	}
out:
	cd_listen_stop(&srv);
	cd_admit_stop(&srv);
	cd_loop_unwatch_signals(srv.loop);
	free(srv.env_info);
	for (size_t i = 0; i < srv.n_hidden; i++) {
		free((char *)srv.hidden[i].path);
		if (srv.hidden_fd[i] >= 0)
			close(srv.hidden_fd[i]);
	}
	cd_sandboxes_done();
	cd_loop_free(srv.loop);
	cd_program_done(&srv.init);
	cd_program_done(&srv.fs_helper);
	return ret;
}
