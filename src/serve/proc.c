/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The process engine (proc.h): one spawned command, its pipes or PTY
 * watched by the loop, its output retained in a ring for replay.
 *
 * The ring keeps chunk bytes in one circular byte store and chunk
 * descriptors in a circular array. read(2) goes straight into the store, up
 * to 64 KiB at a time, and the bytes read are cut into chunks of at most
 * 8192 (what the reference emits): fewer reads and wakeups than 8 KiB reads,
 * the same chunks. A read never wraps: when fewer than 64 KiB contiguous
 * bytes are left at the end, it starts at 0 instead. So the only per-byte
 * work on the output path is the kernel's copy. The store starts small and doubles up
 * to a bound that always fits the 1 MiB retention plus the wasted tail
 * and the next read, so only the retention rule ever evicts. Past its
 * first 64 KiB the store grows only while the server's memory budget has
 * room (budget.h): under pressure a process keeps a smaller window.
 *
 * Lossless mode (cd_proc_set_lossless): a chunk stays until the client
 * has it: the chunk's notification (or a process/read answer holding it)
 * was read by the client (cd_proc_chunks_sent records where it ends in the
 * connection's stream; the delivered event says how far the client read,
 * conn.c), or the client asked for what follows it (cd_proc_ack). The ring
 * keeps every such unacknowledged chunk and, besides, the last 1 MiB of
 * acknowledged ones (what a client may have read ahead and not handled
 * when its connection breaks). Once HOLD_BYTES of output
 * are unacknowledged, or the store cannot take the next read without
 * dropping one, the streams are no longer read (the process is "held":
 * its pipes fill and it blocks) until acknowledgements come.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "core/util.h"
#include "serve/budget.h"
#include "serve/metrics.h"
#include "serve/proc.h"
#include "serve/sandboxes.h"
#include "shared/fd-util.h"

#define CHUNK_MAX     8192
#define READ_MAX      (64u * 1024u)
#define RETAIN_BYTES  (1024u * 1024u)
#define RETAIN_CHUNKS 50000u
#define STORE_MIN     (64u * 1024u)
/*
 * Must fit 1 MiB retained + a wasted tail (< 1 read) + the next read.
 * 2 MiB rather than the tighter 1 MiB + 128 KiB: measured twice as fast
 * on the relay path (a huge-page sized buffer).
 */
#define STORE_MAX (2u * 1024u * 1024u)
/*
 * Lossless mode: the retention, HOLD_BYTES unacknowledged, the next read
 * and a wasted tail (the next power of two; grown only within the budget).
 */
#define STORE_MAX_LOSSLESS (8u * 1024u * 1024u)
#define STDIN_QUEUE_MAX	   (8u * 1024u * 1024u)
#define WRITE_IDS	   4096u
#define WRITE_ID_BUCKETS   4096u
#define EXIT_GRACE_MS	   20
/* Reads per readiness callback: bounded so one chatty process cannot starve the rest. */
#define READS_PER_WAKEUP 4
/*
 * Lossless mode: held from this much unacknowledged output, released at
 * half of it. It must exceed what is in flight to a client that reads
 * (over WebSocket, up to its last pong: the server's and both kernels'
 * buffers), or a fast client waits for every pong: output to a loopback
 * client ran at a third of the speed at 512 KiB, at half at 2 MiB, and as
 * fast as when the client's kernel counted as the client at 4 MiB.
 */
#define HOLD_BYTES  CD_PROC_HOLD_BYTES
#define HOLD_CHUNKS (RETAIN_CHUNKS / 2)
/* ring_reserve: no room without dropping an unacknowledged chunk. */
#define NO_ROOM SIZE_MAX

struct desc {
	uint64_t seq;
	uint64_t pos; /* lossless: where its last sending ends in the connection's stream, or 0 */
	uint32_t off;
	uint32_t len;
	enum cd_stream stream;
};

struct ring {
	unsigned char *buf;
	size_t cap;
	size_t charged; /* of the budget: cap */
	struct desc *d; /* circular: d[(head + i) % dcap], i < n */
	size_t dcap, head, n;
	size_t bytes;
	/*
	 * The oldest acked_n chunks are acknowledged (always all of them but in
	 * lossless mode); unacked: the bytes of the others. acked_seq: the
	 * client has every chunk up to it (cd_proc_ack).
	 */
	size_t acked_n, unacked;
	uint64_t acked_seq;
	bool lossless;
};

struct write_id {
	char *id;
	struct write_id *next; /* bucket chain */
	unsigned bucket;
};

struct pstream {
	struct cd_proc *p;
	enum cd_stream kind;
	int fd; /* -1 once closed */
	struct cd_watch *w;
	bool eof;
};

struct cd_proc {
	struct cd_loop *loop;
	struct cd_proc_events ev;
	struct cd_child *child; /* until reaped (or freed) */
	pid_t pid;
	struct cd_sandbox_entry *known; /* in the registry of sandboxes.h until reaped */
	bool sandboxed;
	bool tty;
	bool paused;
	bool held; /* lossless: too much output unacknowledged (see the ring) */

	struct pstream out[2];
	size_t n_out;
	struct cd_child_watch *cw;
	struct cd_timer *grace;

	uint64_t next_seq;
	bool reaped;
	int exit_code;
	bool exit_emitted;
	bool sandbox_denied;
	bool closed_emitted;
	/* The limit the sandbox reached, if any (cd_child_limit_reason), once reaped. */
	int limit;
	char *limit_reason; /* owned */

	struct ring ring;

	/* stdin: a pipe's write end, or (tty) the PTY master shared with out[0]. */
	bool has_stdin;
	int stdin_fd;
	struct cd_watch *stdin_w; /* pipe only */
	bool stdin_closed;	  /* cd_proc_close_stdin */
	bool stdin_broken;	  /* EPIPE/EIO: the reader is gone */
	unsigned char *inq;
	size_t inq_off, inq_len, inq_cap;

	struct write_id **id_buckets;
	struct write_id **id_fifo; /* circular, WRITE_IDS */
	size_t id_head, id_n;

	int busy;
	bool free_pending;
	bool free_async; /* cd_proc_free_async: the loop reaps it later */
};

const char *cd_stream_name(enum cd_stream s)
{
	switch (s) {
	case CD_STREAM_STDOUT:
		return "stdout";
	case CD_STREAM_STDERR:
		return "stderr";
	case CD_STREAM_PTY:
		return "pty";
	case CD_STREAM_COUNT:
		break;
	}
	return "?";
}

/* ---- the ring ---- */

static struct desc *ring_at(struct ring *r, size_t i)
{
	return &r->d[(r->head + i) % r->dcap];
}

/* Charge the budget with the store and the descriptors. */
static void ring_account(struct ring *r)
{
	cd_mem_set(CD_MEM_RETAINED, &r->charged, r->cap + r->dcap * sizeof(*r->d));
}

/* Only an acknowledged chunk is evicted (r->acked_n > 0). */
static void ring_evict_oldest(struct ring *r)
{
	r->bytes -= r->d[r->head].len;
	r->head = (r->head + 1) % r->dcap;
	r->n--;
	r->acked_n--;
}

/* Re-lay the store at a new capacity (at least its bytes), oldest chunk first, without gaps. */
static void ring_grow_store(struct ring *r, size_t cap)
{
	unsigned char *nb = cd_xmalloc(cap);
	size_t off = 0;
	for (size_t i = 0; i < r->n; i++) {
		struct desc *d = ring_at(r, i);
		memcpy(nb + off, r->buf + d->off, d->len);
		d->off = (uint32_t)off;
		off += d->len;
	}
	free(r->buf);
	r->buf = nb;
	r->cap = cap;
	ring_account(r);
}

/*
 * Where the next read can put up to READ_MAX contiguous bytes: the store
 * grows (within the budget past its first size) or its oldest acknowledged
 * chunks go. NO_ROOM when only an unacknowledged chunk could make room.
 */
static size_t ring_reserve(struct ring *r)
{
	for (;;) {
		if (!r->buf)
			ring_grow_store(r, STORE_MIN);
		if (r->n == 0)
			return 0;
		const struct desc *old = ring_at(r, 0), *new = ring_at(r, r->n - 1);
		size_t head = old->off, tail = (size_t) new->off + new->len;
		if (new->off >= old->off) {
			if (r->cap - tail >= READ_MAX)
				return tail;
			if (head >= READ_MAX)
				return 0;
		} else if (head - tail >= READ_MAX) {
			return tail;
		}
		size_t max = r->lossless ? STORE_MAX_LOSSLESS : STORE_MAX;
		size_t grown = r->cap * 2 < max ? r->cap * 2 : max;
		if (r->cap < max && cd_mem_room(grown - r->cap))
			ring_grow_store(r, grown);
		else if (r->acked_n > 0)
			ring_evict_oldest(r);
		else
			return NO_ROOM;
	}
}

static void ring_push(struct ring *r, uint64_t seq, enum cd_stream s, size_t off, size_t len)
{
	if (r->n == r->dcap) {
		size_t ncap = r->dcap ? r->dcap * 2 : 64;
		struct desc *nd = cd_xreallocarray(NULL, ncap, sizeof(*nd));
		for (size_t i = 0; i < r->n; i++)
			nd[i] = *ring_at(r, i);
		free(r->d);
		r->d = nd;
		r->dcap = ncap;
		r->head = 0;
		ring_account(r);
	}
	struct desc *d = &r->d[(r->head + r->n) % r->dcap];
	d->seq = seq;
	d->pos = 0;
	d->off = (uint32_t)off;
	d->len = (uint32_t)len;
	d->stream = s;
	r->n++;
	r->bytes += len;
	if (r->lossless)
		r->unacked += len;
	else
		r->acked_n++;
	/* Retention: 1 MiB and 50,000 chunks, of acknowledged ones beside the rest. */
	while (r->acked_n > 0 && r->n > 1 &&
	       (r->bytes - r->unacked > RETAIN_BYTES || r->n > RETAIN_CHUNKS))
		ring_evict_oldest(r);
}

/*
 * Count as acknowledged the oldest chunks the client has: those up to
 * acked_seq, and those sent on a connection that has written them out
 * (delivered: its stream's position, 0 when no connection is attached).
 */
static void ring_advance(struct ring *r, uint64_t delivered)
{
	while (r->acked_n < r->n) {
		const struct desc *d = ring_at(r, r->acked_n);
		if (d->seq > r->acked_seq && !(d->pos && d->pos <= delivered))
			break;
		r->unacked -= d->len;
		r->acked_n++;
	}
}

/* The process has closed: nothing more comes, the store shrinks to what it retains. */
static void ring_shrink(struct ring *r)
{
	if (r->bytes == 0) {
		free(r->buf);
		r->buf = NULL;
		r->cap = 0;
		ring_account(r);
	} else if (r->bytes < r->cap) {
		ring_grow_store(r, r->bytes);
	}
}

static void ring_free(struct ring *r)
{
	free(r->buf);
	free(r->d);
	*r = (struct ring){ .charged = r->charged };
	ring_account(r);
}

/* Index of the first retained chunk with seq > after (r->n if none). */
static size_t ring_find(struct ring *r, uint64_t after)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ring_at(r, mid)->seq <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- sandbox denial heuristic (reference 8.4) ---- */

static const char *const denial_words[] = {
	"operation not permitted",
	"permission denied",
	"read-only file system",
	"seccomp",
	"sandbox",
	"landlock",
	"failed to write file",
};

static bool contains_ci(const unsigned char *hay, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	if (m > n)
		return false;
	unsigned char first = (unsigned char)needle[0];
	for (size_t i = 0; i + m <= n; i++) {
		unsigned char c = hay[i];
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c + 32);
		if (c != first)
			continue;
		size_t k = 1;
		for (; k < m; k++) {
			unsigned char h = hay[i + k];
			if (h >= 'A' && h <= 'Z')
				h = (unsigned char)(h + 32);
			if (h != (unsigned char)needle[k])
				break;
		}
		if (k == m)
			return true;
	}
	return false;
}

bool cd_sandbox_denied(bool sandboxed, int exit_code, const void *output, size_t len)
{
	if (!sandboxed || exit_code == 0)
		return false;
	for (size_t i = 0; i < CD_ARRAY_SIZE(denial_words); i++)
		if (contains_ci(output, len, denial_words[i]))
			return true;
	return exit_code == CD_EXIT_SIGNAL_BASE + SIGSYS && exit_code != 2 && exit_code != 126 &&
	       exit_code != 127;
}

static bool compute_denied(struct cd_proc *p)
{
	if (!p->sandboxed || p->exit_code == 0)
		return false;
	/* Rare (a sandboxed failure): concatenate so words across chunks count. */
	unsigned char *all = cd_xmalloc(p->ring.bytes + 1);
	size_t off = 0;
	for (size_t i = 0; i < p->ring.n; i++) {
		const struct desc *d = ring_at(&p->ring, i);
		memcpy(all + off, p->ring.buf + d->off, d->len);
		off += d->len;
	}
	bool r = cd_sandbox_denied(true, p->exit_code, all, off);
	free(all);
	return r;
}

/* ---- events ---- */

static bool all_eof(const struct cd_proc *p)
{
	for (size_t i = 0; i < p->n_out; i++)
		if (!p->out[i].eof)
			return false;
	return true;
}

static void emit_exit(struct cd_proc *p)
{
	if (p->grace) {
		cd_loop_cancel_timer(p->loop, p->grace);
		p->grace = NULL;
	}
	p->sandbox_denied = compute_denied(p);
	p->exit_emitted = true;
	uint64_t seq = p->next_seq++;
	if (p->ev.exited && !p->free_pending)
		p->ev.exited(p, seq, p->exit_code, p->sandbox_denied, p->ev.data);
}

static void progress(struct cd_proc *p)
{
	if (p->reaped && !p->exit_emitted && all_eof(p))
		emit_exit(p);
	if (p->exit_emitted && !p->closed_emitted && all_eof(p)) {
		p->closed_emitted = true;
		ring_shrink(&p->ring);
		uint64_t seq = p->next_seq++;
		if (p->ev.closed && !p->free_pending)
			p->ev.closed(p, seq, p->ev.data);
	}
}

static void proc_destroy(struct cd_proc *p);

static void proc_ref(struct cd_proc *p)
{
	p->busy++;
}

static void proc_unref(struct cd_proc *p)
{
	if (--p->busy == 0 && p->free_pending)
		proc_destroy(p);
}

/* ---- stdin ---- */

static void drop_stdin_queue(struct cd_proc *p)
{
	p->inq_off = p->inq_len = 0;
}

static void on_stdin(struct cd_loop *l, int fd, cd_loop_events ev, void *data);

static void update_watches(struct cd_proc *p)
{
	bool want_out = p->inq_len > 0 && !p->stdin_broken && p->stdin_fd >= 0;
	if (p->tty) {
		struct pstream *s = &p->out[0];
		if (!s->w)
			return;
		cd_loop_events ev = (!s->eof && !p->paused && !p->held ? CD_LOOP_IN : 0) |
				    (want_out ? CD_LOOP_OUT : 0);
		(void)cd_loop_mod_fd(p->loop, s->w, ev);
		return;
	}
	for (size_t i = 0; i < p->n_out; i++)
		if (p->out[i].w)
			(void)cd_loop_mod_fd(p->loop, p->out[i].w,
					     p->paused || p->held ? 0 : CD_LOOP_IN);
	if (want_out && !p->stdin_w) {
		p->stdin_w = cd_loop_add_fd(p->loop, p->stdin_fd, CD_LOOP_OUT | CD_LOOP_BULK,
					    on_stdin, p);
	} else if (!want_out && p->stdin_w) {
		cd_loop_del_fd(p->loop, p->stdin_w);
		p->stdin_w = NULL;
	}
}

static void close_stdin_fd(struct cd_proc *p)
{
	if (p->stdin_w) {
		cd_loop_del_fd(p->loop, p->stdin_w);
		p->stdin_w = NULL;
	}
	/* The PTY master is out[0]'s fd; it closes with the stream. */
	if (!p->tty && p->stdin_fd >= 0)
		close(p->stdin_fd);
	p->stdin_fd = -1;
}

/* Write as much of the queue as the fd takes now. */
static void flush_stdin(struct cd_proc *p)
{
	while (p->inq_len > 0 && p->stdin_fd >= 0) {
		ssize_t n = write(p->stdin_fd, p->inq + p->inq_off, p->inq_len);
		if (n > 0) {
			p->inq_off += (size_t)n;
			p->inq_len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		p->stdin_broken = true;
		drop_stdin_queue(p);
		close_stdin_fd(p);
		break;
	}
	if (p->inq_len == 0) {
		p->inq_off = 0;
		if (p->stdin_closed && !p->tty)
			close_stdin_fd(p);
	}
}

static void on_stdin(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	(void)l;
	(void)fd;
	(void)ev;
	struct cd_proc *p = data;
	proc_ref(p);
	flush_stdin(p);
	update_watches(p);
	proc_unref(p);
}

/* ---- output ---- */

static void stream_eof(struct cd_proc *p, struct pstream *s)
{
	s->eof = true;
	if (s->w) {
		cd_loop_del_fd(p->loop, s->w);
		s->w = NULL;
	}
	if (p->tty) {
		/* The terminal is gone: so is the way to the command's stdin. */
		p->stdin_broken = true;
		drop_stdin_queue(p);
		p->stdin_fd = -1;
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	progress(p);
}

static uint64_t delivered_pos(struct cd_proc *p)
{
	return p->ev.delivered ? p->ev.delivered(p, p->ev.data) : 0;
}

static bool over_hold(const struct ring *r, size_t bytes, size_t chunks)
{
	return r->unacked >= bytes || r->n - r->acked_n >= chunks;
}

static void set_held(struct cd_proc *p, bool held)
{
	if (p->held == held)
		return;
	p->held = held;
	if (held)
		cd_metric_pressure(CD_PRESSURE_PROCESS_HELD);
	update_watches(p);
	if (p->ev.held && !p->free_pending)
		p->ev.held(p, held, p->ev.data);
}

static void read_stream(struct cd_proc *p, struct pstream *s)
{
	bool emitted = false;
	for (int i = 0;
	     i < READS_PER_WAKEUP && !s->eof && !p->free_pending && !p->paused && !p->held; i++) {
		if (p->ring.lossless) {
			ring_advance(&p->ring, delivered_pos(p));
			if (over_hold(&p->ring, HOLD_BYTES, HOLD_CHUNKS)) {
				set_held(p, true);
				break;
			}
		}
		size_t off = ring_reserve(&p->ring);
		if (off == NO_ROOM) {
			set_held(p, true);
			break;
		}
		ssize_t n = read(s->fd, p->ring.buf + off, READ_MAX);
		if (n > 0) {
			cd_metrics.output_bytes[s->kind] += (size_t)n;
			for (size_t done = 0; done < (size_t)n;) {
				size_t len =
					(size_t)n - done < CHUNK_MAX ? (size_t)n - done : CHUNK_MAX;
				uint64_t seq = p->next_seq++;
				/* Evicts only older chunks: the bytes just read stay put. */
				ring_push(&p->ring, seq, s->kind, off + done, len);
				if (p->ev.output) {
					struct cd_chunk c = {
						.seq = seq,
						.stream = s->kind,
						.data = p->ring.buf + off + done,
						.len = len,
					};
					p->ev.output(p, &c, p->ev.data);
					emitted = true;
				}
				done += len;
			}
			/* A short read drained the fd: the next wakeup says when there is more. */
			if ((size_t)n < READ_MAX)
				break;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* 0, or EIO from a PTY master whose slave side is all closed. */
		stream_eof(p, s);
		break;
	}
	if (emitted && p->ev.output_end)
		p->ev.output_end(p, p->ev.data);
}

static void on_output(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	(void)l;
	(void)fd;
	struct pstream *s = data;
	struct cd_proc *p = s->p;
	proc_ref(p);
	if (p->tty && (ev & CD_LOOP_OUT)) {
		flush_stdin(p);
		update_watches(p);
	}
	if (ev & (CD_LOOP_IN | CD_LOOP_HUP))
		read_stream(p, s);
	proc_unref(p);
}

/* ---- exit ---- */

static void on_grace(struct cd_loop *l, void *data)
{
	(void)l;
	struct cd_proc *p = data;
	p->grace = NULL;
	proc_ref(p);
	if (!p->exit_emitted)
		emit_exit(p);
	progress(p);
	proc_unref(p);
}

/* A child was reaped: it no longer runs (cordon_processes_running is started - exited). */
static void count_exit(bool sandboxed)
{
	cd_metrics.procs_exited[sandboxed ? CD_METRIC_SANDBOX_NATIVE : CD_METRIC_SANDBOX_NONE]++;
}

static void on_child(struct cd_loop *l, pid_t pid, int status, void *data)
{
	struct cd_proc *p = data;
	p->cw = NULL;
	p->reaped = true;
	count_exit(p->sandboxed);
	p->known = cd_sandboxes_remove(p->known);
	p->exit_code = cd_exit_code_from_status(status);
	/*
	 * A sandbox ends with its command, as with `cordon run` (and bwrap's
	 * pid namespace in the reference): what is left of it is killed before
	 * the finish hooks undo the host-side setup (mask directories) that
	 * still confines it. The group first (one call, the common case);
	 * cd_child_free then kills every process left in the sandbox's mount
	 * namespace, which also reaches daemons that left the group with
	 * setsid(). Output already in the pipes stays readable. Unsandboxed
	 * commands keep their group: late output is allowed.
	 */
	if (p->sandboxed)
		(void)kill(-pid, SIGKILL);
	/* Before the cgroup goes: what it ran into (cgroup.kill first: the counts are final). */
	char reason[256];
	p->limit = cd_child_limit_reason(p->child, p->exit_code, reason, sizeof(reason));
	if (p->limit >= 0)
		p->limit_reason = cd_xstrdup(reason);
	/* Reaped by the loop: this kills the namespace, runs the finish hooks, closes the pidfd. */
	p->child = cd_child_free(p->child);
	proc_ref(p);
	if (all_eof(p))
		progress(p);
	else
		p->grace = cd_loop_add_timer(l, EXIT_GRACE_MS, on_grace, p);
	proc_unref(p);
}

/* ---- start ---- */

static int open_pty(int *master, int *slave, struct cd_spawn_error *err)
{
	char name[128];
	int m = -1, s = -1, e;
	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 ||
	    (errno = ptsname_r(m, name, sizeof(name))) != 0)
		goto fail;
	s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		goto fail;
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	(void)ioctl(s, TIOCSWINSZ, &ws);
	int fl = fcntl(m, F_GETFL);
	if (fl < 0 || fcntl(m, F_SETFL, fl | O_NONBLOCK) < 0)
		goto fail;
	*master = m;
	*slave = s;
	return 0;
fail:
	e = errno;
	if (s >= 0)
		close(s);
	if (m >= 0)
		close(m);
	err->exit_code = CD_EXIT_SETUP;
	snprintf(err->msg, sizeof(err->msg), "cannot open a pseudo-terminal: %s", strerror(e));
	return -e;
}

/* A pipe, close-on-exec at both ends; the parent's end also non-blocking. */
static int open_pipe(int fds[2], int parent_end, struct cd_spawn_error *err)
{
	int e = -cd_pipe2(fds, O_CLOEXEC);
	if (e == 0 &&
	    fcntl(fds[parent_end], F_SETFL, fcntl(fds[parent_end], F_GETFL) | O_NONBLOCK) < 0) {
		e = errno;
		close(fds[0]);
		close(fds[1]);
	}
	if (e) {
		err->exit_code = CD_EXIT_SETUP;
		snprintf(err->msg, sizeof(err->msg), "cannot create a pipe: %s", strerror(e));
		return -e;
	}
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * Out of descriptors (EMFILE, ENFILE), the step that failed ("cannot
 * create a pipe", "error socket") is not what the caller needs to know:
 * say what ran out, and the way out, with that step after.
 */
static void say_what_ran_out(int r, struct cd_spawn_error *err)
{
	struct rlimit rl;
	char step[128];
	if (r != -EMFILE && r != -ENFILE)
		return;
	snprintf(step, sizeof(step), "%.127s", err->msg[0] ? err->msg : strerror(-r));
	if (r == -ENFILE)
		snprintf(err->msg, sizeof(err->msg),
			 "cannot start the process: out of file descriptors: the system's file "
			 "table is full (fs.file-max) (%s)",
			 step);
	else if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		snprintf(err->msg, sizeof(err->msg),
			 "cannot start the process: out of file descriptors: the server has "
			 "reached its limit of %llu open files (RLIMIT_NOFILE); end some processes "
			 "or connections, or raise the limit (ulimit -n, LimitNOFILE=) (%s)",
			 (unsigned long long)rl.rlim_cur, step);
	else
		snprintf(err->msg, sizeof(err->msg),
			 "cannot start the process: out of file descriptors (%s)", step);
}

int cd_proc_start(struct cd_loop *l, const struct cd_proc_opts *o, const struct cd_proc_events *ev,
		  struct cd_proc **ret, struct cd_spawn_error *err)
{
	struct cd_spawn_error dummy;
	if (!err)
		err = &dummy;

	/*
	 * A write to the stdin pipe of a command that is gone must fail with
	 * EPIPE, not kill the server. The spawner resets SIGPIPE in children.
	 */
	struct sigaction sa;
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
		sa.sa_handler = SIG_IGN;
		(void)sigaction(SIGPIPE, &sa, NULL);
	}

	int r = 0;
	int in_c = -1, out_c = -1, err_c = -1; /* the child's ends */
	int in_p = -1, out_p = -1, err_p = -1; /* ours */
	int fds[2];

	if (o->tty) {
		if ((r = open_pty(&out_p, &out_c, err)) < 0)
			return r;
		in_c = err_c = out_c;
	} else {
		if ((r = open_pipe(fds, 0, err)) < 0)
			goto fail;
		out_p = fds[0];
		out_c = fds[1];
		if ((r = open_pipe(fds, 0, err)) < 0)
			goto fail;
		err_p = fds[0];
		err_c = fds[1];
		if (o->pipe_stdin) {
			if ((r = open_pipe(fds, 1, err)) < 0)
				goto fail;
			in_c = fds[0];
			in_p = fds[1];
		} else {
			in_c = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (in_c < 0) {
				r = -errno;
				err->exit_code = CD_EXIT_SETUP;
				snprintf(err->msg, sizeof(err->msg), "cannot open /dev/null: %s",
					 strerror(errno));
				goto fail;
			}
		}
	}

	struct cd_spawn_opts so = {
		.argv = o->argv,
		.arg0 = o->arg0,
		.envp = o->envp,
		.cwd = o->cwd,
		.stdin_fd = in_c,
		.stdout_fd = out_c,
		.stderr_fd = err_c,
		.lp = o->lp,
		.init = o->init,
		.kill_tree = false,
		.tty = o->tty,
		.rlimits = o->rlimits,
	};
	struct cd_child *child = NULL;
	r = cd_spawn(&so, &child, err);
	if (o->tty) {
		close_fd(&out_c);
		in_c = err_c = -1;
	} else {
		close_fd(&in_c);
		close_fd(&out_c);
		close_fd(&err_c);
	}
	if (r < 0)
		goto fail;

	struct cd_proc *p = cd_xcalloc(1, sizeof(*p));
	p->loop = l;
	if (ev)
		p->ev = *ev;
	p->child = child;
	p->pid = cd_child_pid(child);
	bool linux_sandbox = o->lp && o->lp->sandboxed;
	p->sandboxed = linux_sandbox || (!o->lp && o->wrapped);
	cd_metrics
		.procs_started[p->sandboxed ? CD_METRIC_SANDBOX_NATIVE : CD_METRIC_SANDBOX_NONE]++;
	/*
	 * Known before the loop runs again, which is before the server can
	 * accept a connection the command makes: it is judged as what it is.
	 */
	p->known = cd_sandboxes_add(p->pid, p->sandboxed, linux_sandbox && o->lp->pid_ns,
				    linux_sandbox ? !(o->lp->sc_when & CD_SC_NET_RESTRICTED)
						  : p->sandboxed && o->wrapped_network);
	p->tty = o->tty;
	p->next_seq = 1;
	p->stdin_fd = -1;
	p->limit = -1;
	if (o->tty) {
		p->out[0] = (struct pstream){ .p = p, .kind = CD_STREAM_PTY, .fd = out_p };
		p->n_out = 1;
		p->has_stdin = true;
		p->stdin_fd = out_p;
	} else {
		p->out[0] = (struct pstream){ .p = p, .kind = CD_STREAM_STDOUT, .fd = out_p };
		p->out[1] = (struct pstream){ .p = p, .kind = CD_STREAM_STDERR, .fd = err_p };
		p->n_out = 2;
		p->has_stdin = o->pipe_stdin;
		p->stdin_fd = in_p;
	}
	for (size_t i = 0; i < p->n_out; i++) {
		/* Bulk (loop.h): thousands of processes' output must not hold up a client. */
		p->out[i].w = cd_loop_add_fd(l, p->out[i].fd, CD_LOOP_IN | CD_LOOP_BULK, on_output,
					     &p->out[i]);
		if (!p->out[i].w) {
			r = -errno;
			snprintf(err->msg, sizeof(err->msg), "cannot watch the output: %s",
				 strerror(errno));
			goto fail_p;
		}
	}
	p->cw = cd_loop_watch_child(l, p->pid, cd_child_pidfd(child), on_child, p);
	if (!p->cw) {
		r = -errno;
		snprintf(err->msg, sizeof(err->msg), "cannot watch the child: %s", strerror(errno));
		goto fail_p;
	}
	*ret = p;
	return 0;

fail_p:
	err->exit_code = CD_EXIT_SETUP;
	cd_proc_free(p);
	say_what_ran_out(r, err);
	return r;
fail:
	close_fd(&in_c);
	close_fd(&out_c);
	close_fd(&err_c);
	close_fd(&in_p);
	close_fd(&out_p);
	close_fd(&err_p);
	say_what_ran_out(r, err);
	return r;
}

/* ---- read ---- */

void cd_proc_read(struct cd_proc *p, uint64_t after_seq, size_t max_bytes, struct cd_proc_read *ret)
{
	memset(ret, 0, sizeof(*ret));
	struct ring *r = &p->ring;
	size_t first = ring_find(r, after_seq);
	size_t avail = r->n - first;
	ret->chunks = cd_xreallocarray(NULL, avail ? avail : 1, sizeof(*ret->chunks));
	size_t used = 0;
	for (size_t i = first; i < r->n; i++) {
		const struct desc *d = ring_at(r, i);
		if (max_bytes != SIZE_MAX && ret->n > 0 &&
		    (used >= max_bytes || d->len > max_bytes - used))
			break;
		ret->chunks[ret->n++] = (struct cd_chunk){
			.seq = d->seq,
			.stream = d->stream,
			.data = r->buf + d->off,
			.len = d->len,
		};
		used += d->len;
	}
	if (max_bytes != SIZE_MAX && ret->n > 0)
		ret->next_seq = ret->chunks[ret->n - 1].seq + 1;
	else
		ret->next_seq = p->next_seq;
	ret->exited = p->exit_emitted;
	ret->exit_code = p->exit_emitted ? p->exit_code : 0;
	ret->closed = p->closed_emitted;
	ret->sandbox_denied = p->sandbox_denied;
}

/* ---- write ---- */

static unsigned hash_id(const char *s)
{
	/* FNV-1a */
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % WRITE_ID_BUCKETS;
}

static bool id_seen(struct cd_proc *p, const char *id)
{
	if (!p->id_buckets)
		return false;
	for (struct write_id *w = p->id_buckets[hash_id(id)]; w; w = w->next)
		if (cd_streq(w->id, id))
			return true;
	return false;
}

static void id_remember(struct cd_proc *p, const char *id)
{
	if (!p->id_buckets) {
		p->id_buckets = cd_xcalloc(WRITE_ID_BUCKETS, sizeof(*p->id_buckets));
		p->id_fifo = cd_xcalloc(WRITE_IDS, sizeof(*p->id_fifo));
	}
	if (p->id_n == WRITE_IDS) {
		struct write_id *old = p->id_fifo[p->id_head];
		p->id_head = (p->id_head + 1) % WRITE_IDS;
		p->id_n--;
		struct write_id **pp = &p->id_buckets[old->bucket];
		while (*pp != old)
			pp = &(*pp)->next;
		*pp = old->next;
		free(old->id);
		free(old);
	}
	struct write_id *w = cd_xcalloc(1, sizeof(*w));
	w->id = cd_xstrdup(id);
	w->bucket = hash_id(id);
	w->next = p->id_buckets[w->bucket];
	p->id_buckets[w->bucket] = w;
	p->id_fifo[(p->id_head + p->id_n) % WRITE_IDS] = w;
	p->id_n++;
}

int cd_proc_write(struct cd_proc *p, const char *write_id, const void *data, size_t len,
		  enum cd_write_status *ret)
{
	if (!p->has_stdin || p->stdin_closed) {
		*ret = CD_WRITE_STDIN_CLOSED;
		return 0;
	}
	if (write_id && id_seen(p, write_id)) {
		*ret = CD_WRITE_ACCEPTED;
		return 0;
	}
	/*
	 * A reader that is gone (the command exited, or closed its stdin): the
	 * bytes are dropped and the write accepted, as by Codex, whose writer
	 * task outlives the pipe.
	 */
	if (p->stdin_broken || p->stdin_fd < 0) {
		*ret = CD_WRITE_ACCEPTED;
		return 0;
	}
	if (len > STDIN_QUEUE_MAX - p->inq_len)
		return -ENOBUFS;
	if (p->inq_off + p->inq_len + len > p->inq_cap) {
		/* Compact first; grow only when that is not enough. (memmove
		 * with the NULL of an empty queue is undefined, even for 0 bytes.) */
		if (p->inq_len)
			memmove(p->inq, p->inq + p->inq_off, p->inq_len);
		p->inq_off = 0;
		if (p->inq_len + len > p->inq_cap) {
			size_t cap = p->inq_cap ? p->inq_cap : 4096;
			while (cap < p->inq_len + len)
				cap *= 2;
			p->inq = cd_xrealloc(p->inq, cap);
			p->inq_cap = cap;
		}
	}
	if (len)
		memcpy(p->inq + p->inq_off + p->inq_len, data, len);
	cd_metrics.stdin_bytes += len;
	p->inq_len += len;
	flush_stdin(p);
	update_watches(p);
	if (write_id)
		id_remember(p, write_id);
	*ret = CD_WRITE_ACCEPTED;
	return 0;
}

void cd_proc_close_stdin(struct cd_proc *p)
{
	if (!p->has_stdin || p->stdin_closed)
		return;
	p->stdin_closed = true;
	/* A pipe closes once the queue is written; a PTY has no separate stdin to close. */
	if (!p->tty && p->inq_len == 0)
		close_stdin_fd(p);
}

void cd_proc_pause_output(struct cd_proc *p, bool paused)
{
	if (p->paused == paused)
		return;
	p->paused = paused;
	update_watches(p);
}

/* ---- lossless mode ---- */

void cd_proc_set_lossless(struct cd_proc *p, bool on)
{
	struct ring *r = &p->ring;
	if (r->lossless == on)
		return;
	r->lossless = on;
	if (!on) {
		r->acked_n = r->n;
		r->unacked = 0;
		set_held(p, false);
	}
}

void cd_proc_chunks_sent(struct cd_proc *p, uint64_t first, uint64_t last, uint64_t pos)
{
	struct ring *r = &p->ring;
	if (!r->lossless)
		return;
	for (size_t i = ring_find(r, first - 1); i < r->n; i++) {
		struct desc *d = ring_at(r, i);
		if (d->seq > last)
			break;
		d->pos = pos;
	}
}

void cd_proc_recheck(struct cd_proc *p)
{
	struct ring *r = &p->ring;
	if (!p->held)
		return;
	ring_advance(r, delivered_pos(p));
	if (over_hold(r, HOLD_BYTES / 2, HOLD_CHUNKS / 2) || ring_reserve(r) == NO_ROOM)
		return;
	set_held(p, false);
}

void cd_proc_ack(struct cd_proc *p, uint64_t seq)
{
	struct ring *r = &p->ring;
	if (!r->lossless || seq <= r->acked_seq)
		return;
	r->acked_seq = seq;
	ring_advance(r, delivered_pos(p));
	cd_proc_recheck(p);
}

void cd_proc_detached(struct cd_proc *p)
{
	struct ring *r = &p->ring;
	if (!r->lossless)
		return;
	/* What the connection wrote out counts; its positions mean nothing to the next one. */
	ring_advance(r, delivered_pos(p));
	for (size_t i = r->acked_n; i < r->n; i++)
		ring_at(r, i)->pos = 0;
}

uint64_t cd_proc_last_seq(const struct cd_proc *p)
{
	return p->next_seq - 1;
}

bool cd_proc_is_held(const struct cd_proc *p)
{
	return p->held;
}

/* ---- state and signals ---- */

bool cd_proc_is_exited(const struct cd_proc *p)
{
	return p->exit_emitted;
}

bool cd_proc_is_closed(const struct cd_proc *p)
{
	return p->closed_emitted;
}

pid_t cd_proc_pid(const struct cd_proc *p)
{
	return p->pid;
}

bool cd_proc_is_sandboxed(const struct cd_proc *p)
{
	return p->sandboxed;
}

const char *cd_proc_limit_reason(const struct cd_proc *p, int *ret_limit)
{
	if (ret_limit)
		*ret_limit = p->limit_reason ? p->limit : -1;
	return p->limit_reason;
}

void cd_proc_interrupt(struct cd_proc *p)
{
	if (!p->reaped)
		(void)kill(-p->pid, SIGINT);
}

void cd_proc_terminate(struct cd_proc *p, bool *running)
{
	bool r = !p->reaped;
	if (r) {
		(void)kill(-p->pid, SIGKILL);
		/* In case the command moved itself out of its group. */
		(void)kill(p->pid, SIGKILL);
	}
	if (running)
		*running = r;
}

/* ---- free ---- */

/*
 * A process freed (cd_proc_free_async) before it was reaped: killed, then
 * reaped by the loop when it has exited, and only then its sandbox's
 * finish hooks run and it leaves the registry of sandboxes, as a waiting
 * cd_proc_free would have done, without holding the loop meanwhile.
 */
struct zombie {
	struct cd_loop *loop;
	pid_t pid;
	struct cd_child *child;
	struct cd_sandbox_entry *known;
	struct cd_child_watch *cw;
	bool sandboxed;
	struct zombie *prev, *next;
};

static struct zombie *zombies; /* loop thread only */

static void zombie_release(struct zombie *z)
{
	if (z->prev)
		z->prev->next = z->next;
	else
		zombies = z->next;
	if (z->next)
		z->next->prev = z->prev;
	z->known = cd_sandboxes_remove(z->known);
	z->child = cd_child_free(z->child);
	count_exit(z->sandboxed);
	free(z);
}

static void on_zombie(struct cd_loop *l, pid_t pid, int status, void *data)
{
	struct zombie *z = data;
	z->cw = NULL;
	zombie_release(z);
}

/* Hand p's child to the loop (it was killed): false when it cannot be watched. */
static bool zombie_add(struct cd_proc *p)
{
	struct zombie *z = cd_xcalloc(1, sizeof(*z));
	z->loop = p->loop;
	z->pid = p->pid;
	z->sandboxed = p->sandboxed;
	z->cw = cd_loop_watch_child(p->loop, p->pid, cd_child_pidfd(p->child), on_zombie, z);
	if (!z->cw) {
		free(z);
		return false;
	}
	z->child = p->child;
	z->known = p->known;
	p->child = NULL;
	p->known = NULL;
	z->next = zombies;
	if (zombies)
		zombies->prev = z;
	zombies = z;
	return true;
}

void cd_proc_reap_zombies(void)
{
	while (zombies) {
		struct zombie *z = zombies;
		cd_loop_unwatch_child(z->loop, z->cw);
		z->cw = NULL;
		int status;
		pid_t r;
		do
			r = waitpid(z->pid, &status, 0);
		while (r < 0 && errno == EINTR);
		zombie_release(z);
	}
}

static void proc_destroy(struct cd_proc *p)
{
	if (p->cw) {
		cd_loop_unwatch_child(p->loop, p->cw);
		p->cw = NULL;
	}
	if (!p->reaped) {
		(void)kill(-p->pid, SIGKILL);
		(void)kill(p->pid, SIGKILL);
	}
	if (!p->reaped && p->free_async && zombie_add(p)) {
		p->reaped = true;
	} else if (!p->reaped) {
		int status;
		pid_t r;
		do
			r = waitpid(p->pid, &status, 0);
		while (r < 0 && errno == EINTR);
		p->reaped = true;
		count_exit(p->sandboxed);
	} else if (!p->closed_emitted && !p->sandboxed) {
		/* Exited, but something in its group still holds the output open. */
		(void)kill(-p->pid, SIGKILL);
	}
	p->known = cd_sandboxes_remove(p->known);
	p->child = cd_child_free(p->child);
	if (p->grace)
		cd_loop_cancel_timer(p->loop, p->grace);
	close_stdin_fd(p);
	for (size_t i = 0; i < p->n_out; i++) {
		if (p->out[i].w)
			cd_loop_del_fd(p->loop, p->out[i].w);
		if (p->out[i].fd >= 0)
			close(p->out[i].fd);
	}
	if (p->id_fifo) {
		for (size_t i = 0; i < p->id_n; i++) {
			struct write_id *w = p->id_fifo[(p->id_head + i) % WRITE_IDS];
			free(w->id);
			free(w);
		}
	}
	free(p->id_fifo);
	free(p->id_buckets);
	free(p->inq);
	free(p->limit_reason);
	ring_free(&p->ring);
	free(p);
}

struct cd_proc *cd_proc_free_async(struct cd_proc *p)
{
	if (p)
		p->free_async = true;
	return cd_proc_free(p);
}

struct cd_proc *cd_proc_free(struct cd_proc *p)
{
	if (!p)
		return NULL;
	if (p->busy) {
		/* Called from one of p's own callbacks: finish when it returns. */
		p->free_pending = true;
		return NULL;
	}
	proc_destroy(p);
	return NULL;
}
