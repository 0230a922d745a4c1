/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Streaming reads (reference 2.10): the handles fs/open made, fs/readBlock
 * and fs/close. Every read and every close of a handle's file is done by an
 * fs worker (workq.h), never on the loop: on a hung network or FUSE file
 * system a pread, or a close (FUSE sends FLUSH and waits for it), blocks
 * for as long as the file system does, and it holds that worker only.
 *
 * Each connection's fs/readBlock and fs/close requests are performed and
 * answered one at a time, in the order they came (a client may pipeline
 * blocks and the close behind them): a FIFO per connection, of which only
 * the head is on a worker. They do not wait for the connection's other fs
 * requests (fs.c's queue), nor do its process/... requests wait for them.
 * At most STREAM_QUEUE_MAX wait; past that the connection's next messages
 * are not read until one is answered (back-pressure, not refusal). The next
 * one does not start while the connection's outbound queue is over its cap.
 *
 * A handle lives on the loop (its id, its descriptor, whether it reached
 * EOF) and is counted: the connection's table, each request that named it,
 * the block read ahead. fs/close takes it out of the table at once (the id
 * is free for a new fs/open), the close itself waits its turn; the
 * descriptor is closed, on a worker, when nothing refers to it any more,
 * never while a worker reads it. A read error closes the handle, as in the
 * reference; a readBlock queued behind it then finds the handle unknown.
 *
 * Read-ahead. A client streams a file one block per request and waits for
 * each answer, so reading the next block is on the critical path. Once
 * half of a block's answer is written, a worker reads the next one (same
 * length, just after) while the loop writes the rest (not sooner: on two
 * cores the worker would take the CPU the client needs to read the
 * answer). The next request is answered from it if the file's identity,
 * size, mtime and ctime are what they were before it was read ahead (else
 * the block is read again), and only for a file unchanged for 50 ms before
 * (file times advance by clock ticks: a write in the same tick as the last
 * one would not change them). That check is made on the loop with the
 * attributes the kernel has cached (AT_STATX_DONT_SYNC), which asks no
 * file system: on a network file system a change made elsewhere shows once
 * the kernel knows of it, as it does for a read served from the page cache.
 * One block per connection.
 *
 * Writes (fs/writeBlock, fs-write.c) take the same road: a handle opened
 * for writing (fs/open "replace") is in the same table and counts against
 * the same 128 (until fs/close: it never reaches EOF); each block is written
 * by a worker (pwrite) at its turn in the connection's FIFO, its data
 * charged to the budget as fs data while it waits; past
 * STREAM_WRITE_BYTES_MAX of such data queued, the connection's next
 * messages wait, as past STREAM_QUEUE_MAX requests. A write error leaves
 * the handle open (reference). Nothing is read ahead on a write handle (a
 * read of one fails with EBADF and closes it, as in the reference).
 *
 * Memory: a connection that streams holds two block buffers (FS_BLOCK_MAX
 * each: the block being answered or read ahead, and a spare), charged to
 * the server's budget as fs data (budget.h), and freed when its last
 * handle closes or the connection ends.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serve/budget.h"
#include "serve/fs-ops.h"
#include "serve/fs-stream.h"
#include "serve/fs.h"
#include "serve/intent.h"
#include "serve/server.h"
#include "serve/testhook.h"
#include "serve/workq.h"
#include "shared/log.h"

#define FS_BLOCK_MAX   (1024u * 1024)
#define FS_MAX_HANDLES 128
/* Per connection: fs/readBlock, fs/writeBlock and fs/close requests waiting for their turn. */
#define STREAM_QUEUE_MAX 64
/* Per connection: the fs/writeBlock data they may hold (past that, input waits). */
#define STREAM_WRITE_BYTES_MAX (16u * 1024 * 1024)

/*
 * A stream that reached EOF no longer counts against the 128 (its capacity
 * is released) but stays readable, as in the reference, where a client may
 * read an earlier block or a grown file after EOF. At most FS_MAX_HANDLES
 * such finished streams are kept; past that the one that finished first
 * is closed.
 */
struct cd_fs_handle {
	char id[CD_FS_HANDLE_ID_MAX];
	size_t id_len;
	int fd;		    /* -1 once handed to its close */
	bool listed;	    /* in the connection's table: its id is taken */
	bool gone;	    /* closed, failed or evicted: later reads find it unknown */
	bool at_eof;	    /* the last block read came short */
	bool write;	    /* opened for writing (fs/open "replace", fs-write.c) */
	uint64_t eof_order; /* when it reached EOF, for eviction */
	unsigned refs;
};

enum sreq_kind {
	SREQ_READ,   /* fs/readBlock of h */
	SREQ_WRITE,  /* fs/writeBlock of h: data[0..len) at off */
	SREQ_CLOSE,  /* fs/close of h (NULL: an unknown handle, answered {}) */
	SREQ_ANSWER, /* an error known at once, answered at its turn */
};

/* A request waiting for its turn. */
struct sreq {
	struct sreq *next;
	enum sreq_kind kind;
	char *id; /* JSON text */
	struct cd_fs_handle *h;
	uint64_t off, len;
	int code;	     /* SREQ_ANSWER */
	char *msg;	     /* SREQ_ANSWER */
	unsigned char *data; /* SREQ_WRITE, owned (charged to the budget) */
};

/* What says a file changed: its identity, size and times. */
struct fstate {
	uint32_t dev_major, dev_minor;
	uint64_t ino, size;
	int64_t mtime_sec, ctime_sec;
	uint32_t mtime_nsec, ctime_nsec;
};

enum sjob_kind {
	SJOB_READ,  /* a request's block */
	SJOB_AHEAD, /* the block after it */
	SJOB_CLOSE, /* a descriptor (a request's fs/close, or nobody's) */
	SJOB_WRITE, /* a request's block, written (req->data) */
};

/* The work a worker does (fields but work and the results are set before submit). */
struct sjob {
	struct cd_work work; /* first: the pool hands this back */
	enum sjob_kind kind;
	struct cd_fs_streams *st; /* NULL: a close nobody waits for */
	struct sreq *req;	  /* READ, CLOSE: the request it answers, or NULL */
	struct cd_fs_handle *h;	  /* AHEAD: a reference (READ: req's) */
	int fd;
	uint64_t off, len;
	unsigned char *buf; /* READ, AHEAD: FS_BLOCK_MAX bytes, owned */
	struct fstate fst;  /* AHEAD: the file before the block was read */
	/* Results. */
	size_t got; /* bytes read */
	bool eof;
	int err; /* READ, WRITE: the read or write failed (errno) */
	bool ok; /* AHEAD: buf holds [off, off + got) */
};

struct cd_fs_streams {
	struct cd_conn *conn; /* NULL once the connection ended */
	struct cd_server *server;
	struct cd_fs_handle **handles; /* the table (2 * FS_MAX_HANDLES) */
	size_t n_handles;
	struct sreq *head, *tail;
	size_t n;
	size_t wbytes;	   /* fs/writeBlock data queued */
	bool held;	   /* input held back: the queue was full */
	bool replying;	   /* an answer is being written: nothing else starts */
	struct sjob *busy; /* the job on a worker, or NULL */
	bool busy_request; /* it answers a request (READ, CLOSE), not AHEAD */
	/* The block read ahead: [ra_off, ra_off + ra_got) of ra_h, when ra_h. */
	struct cd_fs_handle *ra_h;
	uint64_t ra_off, ra_len;
	size_t ra_got;
	bool ra_eof;
	struct fstate ra_st;
	unsigned char *ra_buf;
	unsigned char *spare;
};

static uint64_t eof_clock;

static void pump(struct cd_fs_streams *st);
static void job_done(struct cd_work *w);

/* ---- buffers and references --------------------------------------------- */

static unsigned char *buf_get(struct cd_fs_streams *st)
{
	unsigned char *b = st->spare;
	if (b) {
		st->spare = NULL;
		return b;
	}
	cd_mem_charge(CD_MEM_FILES, FS_BLOCK_MAX);
	return cd_xmalloc(FS_BLOCK_MAX);
}

static void buf_free(unsigned char *b)
{
	if (!b)
		return;
	free(b);
	cd_mem_release(CD_MEM_FILES, FS_BLOCK_MAX);
}

/* Keep b as the spare while the connection lives and streams, else free it. */
static void buf_put(struct cd_fs_streams *st, unsigned char *b)
{
	if (b && st && st->conn && st->n_handles && !st->spare)
		st->spare = b;
	else
		buf_free(b);
}

static struct cd_fs_handle *ref(struct cd_fs_handle *h)
{
	if (h)
		h->refs++;
	return h;
}

static void unref(struct cd_server *s, struct cd_fs_handle *h)
{
	if (!h || --h->refs > 0)
		return;
	if (h->fd >= 0)
		cd_fs_close_fd(s, h->fd);
	free(h);
}

static void ra_drop(struct cd_fs_streams *st)
{
	unref(st->server, st->ra_h);
	st->ra_h = NULL;
	buf_put(st, st->ra_buf);
	st->ra_buf = NULL;
}

static void sreq_free(struct cd_fs_streams *st, struct sreq *q)
{
	if (!q)
		return;
	unref(st->server, q->h);
	free(q->id);
	free(q->msg);
	if (q->data) {
		free(q->data);
		cd_mem_release(CD_MEM_FILES, q->len);
	}
	free(q);
}

/* Take h out of the table: its id is free again. Gives the table's reference to the caller. */
static void unlist(struct cd_fs_streams *st, struct cd_fs_handle *h)
{
	for (size_t i = 0; i < st->n_handles; i++) {
		if (st->handles[i] == h) {
			st->handles[i] = st->handles[--st->n_handles];
			break;
		}
	}
	h->listed = false;
}

/* The connection is gone and nothing runs: free what is left. */
static void streams_free(struct cd_fs_streams *st)
{
	ra_drop(st);
	buf_free(st->spare);
	free(st->handles);
	free(st);
}

static struct cd_fs_streams *streams_of(struct cd_conn *c)
{
	if (!c->fs_streams) {
		struct cd_fs_streams *st = cd_xcalloc(1, sizeof(*st));
		st->conn = c;
		st->server = c->server;
		c->fs_streams = st;
	}
	return c->fs_streams;
}

static struct cd_fs_handle *find(struct cd_fs_streams *st, const char *s, size_t len)
{
	for (size_t i = 0; st && i < st->n_handles; i++)
		if (st->handles[i]->id_len == len && !memcmp(st->handles[i]->id, s, len))
			return st->handles[i];
	return NULL;
}

/* ---- on a worker ---------------------------------------------------------- */

/*
 * The state of fd's file; cached: the attributes the kernel has, without
 * asking the file system (AT_STATX_DONT_SYNC: FUSE, NFS and SMB answer from
 * their caches), so that the loop may look. -errno on error.
 */
static int file_state(int fd, bool cached, struct fstate *ret)
{
#ifdef STATX_INO
	struct statx sx;
	int flags = AT_EMPTY_PATH | (cached ? AT_STATX_DONT_SYNC : AT_STATX_SYNC_AS_STAT);
	unsigned want = STATX_INO | STATX_SIZE | STATX_MTIME | STATX_CTIME;
	if (statx(fd, "", flags, want, &sx) < 0)
		return -errno;
	if ((sx.stx_mask & want) != want)
		return -ENODATA;
	*ret = (struct fstate){
		.dev_major = sx.stx_dev_major,
		.dev_minor = sx.stx_dev_minor,
		.ino = sx.stx_ino,
		.size = sx.stx_size,
		.mtime_sec = sx.stx_mtime.tv_sec,
		.mtime_nsec = sx.stx_mtime.tv_nsec,
		.ctime_sec = sx.stx_ctime.tv_sec,
		.ctime_nsec = sx.stx_ctime.tv_nsec,
	};
#else /* macOS: fstat, which has no cached variant; the whole st_dev as the major */
	(void)cached;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	*ret = (struct fstate){
		.dev_major = (uint32_t)st.st_dev,
		.ino = st.st_ino,
		.size = (uint64_t)st.st_size,
		.mtime_sec = st.st_mtimespec.tv_sec,
		.mtime_nsec = (uint32_t)st.st_mtimespec.tv_nsec,
		.ctime_sec = st.st_ctimespec.tv_sec,
		.ctime_nsec = (uint32_t)st.st_ctimespec.tv_nsec,
	};
#endif
	return 0;
}

static bool same_file_state(const struct fstate *a, const struct fstate *b)
{
	return a->dev_major == b->dev_major && a->dev_minor == b->dev_minor && a->ino == b->ino &&
	       a->size == b->size && a->mtime_sec == b->mtime_sec &&
	       a->mtime_nsec == b->mtime_nsec && a->ctime_sec == b->ctime_sec &&
	       a->ctime_nsec == b->ctime_nsec;
}

static int64_t ms_of(int64_t sec, uint32_t nsec)
{
	return sec * 1000 + nsec / 1000000;
}

/* pwrite all of buf; -errno on error. */
static int pwrite_full(int fd, const unsigned char *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

/* pread until len bytes or EOF; -errno on error. */
static ssize_t pread_full(int fd, unsigned char *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static void job_run(struct cd_work *w)
{
	struct sjob *j = (struct sjob *)w;
	ssize_t n;
	switch (j->kind) {
	case SJOB_READ:
		n = pread_full(j->fd, j->buf, j->len, j->off);
		if (n < 0) {
			j->err = (int)-n;
			return;
		}
		j->got = (size_t)n;
		j->eof = j->got < j->len;
		return;
	case SJOB_AHEAD: {
		struct timespec now;
		if (file_state(j->fd, false, &j->fst) < 0 ||
		    clock_gettime(CLOCK_REALTIME, &now) < 0 ||
		    cd_fs_ms_of(&now) - ms_of(j->fst.mtime_sec, j->fst.mtime_nsec) < 50 ||
		    cd_fs_ms_of(&now) - ms_of(j->fst.ctime_sec, j->fst.ctime_nsec) < 50)
			return;
		n = pread_full(j->fd, j->buf, j->len, j->off);
		if (n < 0)
			return;
		j->got = (size_t)n;
		j->eof = j->got < j->len;
		j->ok = true;
		return;
	}
	case SJOB_CLOSE:
		/* The descriptor is released whatever close says (Linux). */
		(void)close(j->fd);
		return;
	case SJOB_WRITE:
		j->err = -pwrite_full(j->fd, j->req->data, j->len, j->off);
		return;
	}
}

/* ---- answers --------------------------------------------------------------- */

/*
 * {"id":ID,"result":{"chunk":"<base64>","eof":EOF}} written straight into
 * the outbound queue: data is encoded in place, and goes out as it is
 * encoded, in slices of CD_FS_B64_SLICE bytes (64 KiB of base64), one write
 * each (cd_conn_out_push): the client copies a slice out of its socket
 * while the next is encoded. (Slices of 36 or 72 KiB were slightly slower,
 * 96 KiB and more clearly so.) half(arg), if not NULL, is called once half
 * of it is out.
 */
static void reply_chunk(struct cd_conn *c, const char *id, const unsigned char *data, size_t n,
			bool eof, void (*half)(void *), void *arg)
{
	const char *tail = eof ? "\",\"eof\":true}}\n" : "\",\"eof\":false}}\n";
	size_t idlen = strlen(id), tlen = strlen(tail);
	size_t k = n < CD_FS_B64_SLICE ? n : CD_FS_B64_SLICE;
	char *w = cd_conn_out_reserve(c, idlen + cd_base64_encoded_len(k) + tlen + 32);
	char *p = w;
	p += sprintf(p, "{\"id\":%s,\"result\":{\"chunk\":\"", id);
	for (size_t done = 0;;) {
		cd_base64_encode(data + done, k, p);
		p += cd_base64_encoded_len(k);
		done += k;
		if (done == n)
			break;
		cd_conn_out_commit(c, (size_t)(p - w));
		cd_conn_out_push(c);
		if (half && done >= n / 2) {
			half(arg);
			half = NULL;
		}
		k = n - done < CD_FS_B64_SLICE ? n - done : CD_FS_B64_SLICE;
		p = w = cd_conn_out_reserve(c, cd_base64_encoded_len(k) + tlen);
	}
	memcpy(p, tail, tlen);
	p += tlen;
	cd_conn_out_commit(c, (size_t)(p - w));
	cd_conn_kick(c);
	if (half)
		half(arg); /* a block of one slice */
}

static void append_handle_id(struct cd_strbuf *sb, const char *s, size_t len)
{
	cd_strbuf_append_n(sb, s, strnlen(s, len));
}

static char *unknown_handle(const char *s, size_t len)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "unknown file handle `");
	append_handle_id(&sb, s, len);
	cd_strbuf_append(&sb, "`");
	return cd_strbuf_steal(&sb);
}

/* Whether a request of c is queued or on a worker: an answer known now must wait its turn. */
static bool requests_ahead(const struct cd_fs_streams *st)
{
	return st && (st->head || (st->busy && st->busy_request));
}

static void enqueue(struct cd_fs_streams *st, struct sreq *q)
{
	q->next = NULL;
	if (st->tail)
		st->tail->next = q;
	else
		st->head = q;
	st->tail = q;
	if (q->kind == SREQ_WRITE)
		st->wbytes += q->len;
	if (++st->n >= STREAM_QUEUE_MAX || st->wbytes >= STREAM_WRITE_BYTES_MAX)
		st->held = true;
	pump(st);
}

/* Answer id with an error now, or at its turn when requests are ahead of it. */
static void answer_error(struct cd_conn *c, const char *id, int code, char *msg)
{
	struct cd_fs_streams *st = c->fs_streams;
	if (!requests_ahead(st)) {
		cd_conn_error(c, id, code, msg);
		free(msg);
		return;
	}
	struct sreq *q = cd_xcalloc(1, sizeof(*q));
	q->kind = SREQ_ANSWER;
	q->id = cd_xstrdup(id);
	q->code = code;
	q->msg = msg;
	enqueue(st, q);
}

/* ---- the queue ------------------------------------------------------------- */

static struct sjob *job_new(struct cd_fs_streams *st, enum sjob_kind kind)
{
	struct sjob *j = cd_xcalloc(1, sizeof(*j));
	j->kind = kind;
	j->st = st;
	j->fd = -1;
	j->work.run = job_run;
	j->work.done = job_done;
	return j;
}

/* Hand j to a worker; st's (if any) until done. */
static void job_submit(struct cd_server *s, struct sjob *j)
{
	if (j->st) {
		j->st->busy = j;
		j->st->busy_request = j->kind != SJOB_AHEAD;
	}
	struct cd_workq *q = cd_fs_workq(s);
	if (!q && s->stopping) {
		/* Not performed: answered "the server is shutting down" (job_done). */
		j->work.ran = false;
		job_done(&j->work);
		return;
	}
	if (!q || cd_workq_submit(q, &j->work) < 0) {
		/* No worker could be had: performed here, as before there were any. */
		job_run(&j->work);
		j->work.ran = true;
		job_done(&j->work);
	}
}

void cd_fs_close_fd(struct cd_server *s, int fd)
{
	if (fd < 0)
		return;
	if (s->stopping)
		return; /* left to the exit: a close on a hung mount would hold the shutdown */
	struct sjob *j = job_new(NULL, SJOB_CLOSE);
	j->fd = fd;
	job_submit(s, j);
}

/* The block after [off, off + len) of h, read ahead by a worker. */
static void start_ahead(struct cd_fs_streams *st, struct cd_fs_handle *h, uint64_t off,
			uint64_t len)
{
	ra_drop(st);
	struct sjob *j = job_new(st, SJOB_AHEAD);
	j->h = ref(h);
	j->fd = h->fd;
	j->off = off;
	j->len = len;
	j->buf = buf_get(st);
	job_submit(st->server, j);
}

struct ahead_arg {
	struct cd_fs_streams *st;
	struct cd_fs_handle *h;
	uint64_t off, len;
};

static void ahead_cb(void *p)
{
	struct ahead_arg *a = p;
	start_ahead(a->st, a->h, a->off, a->len);
}

/*
 * q's block is read: answer it, and have the next one read ahead meanwhile.
 * Takes buf.
 */
static void answer_block(struct cd_fs_streams *st, struct cd_conn *c, struct sreq *q,
			 unsigned char *buf, size_t got, bool eof, bool hit)
{
	struct cd_fs_handle *h = q->h;
	/* A complete stream no longer counts against the limit (see cd_fs_handle). */
	if (eof && !h->at_eof)
		h->eof_order = ++eof_clock;
	h->at_eof = eof;
	if (cd_testhook_on())
		cd_testhook_event("fs-block conn=%lu id=%s ahead=%d", c->serial, q->id, hit);
	/* The next block is read by a worker while the second half of this one is written. */
	struct ahead_arg a = { st, h, q->off + got, q->len };
	bool more = !eof && !h->gone && !st->server->stopping;
	st->replying = true;
	reply_chunk(c, q->id, buf, got, eof, more ? ahead_cb : NULL, &a);
	st->replying = false;
	buf_put(st, buf);
}

/* Answer q from the block read ahead if it is that block and still true, else read it. */
static void start_read(struct cd_fs_streams *st, struct sreq *q)
{
	struct fstate now;
	if (st->ra_h == q->h && st->ra_off == q->off && st->ra_len == q->len &&
	    file_state(q->h->fd, true, &now) == 0 && same_file_state(&now, &st->ra_st)) {
		unsigned char *buf = st->ra_buf;
		size_t got = st->ra_got;
		bool eof = st->ra_eof;
		st->ra_buf = NULL;
		ra_drop(st);
		answer_block(st, st->conn, q, buf, got, eof, true);
		sreq_free(st, q);
		return;
	}
	ra_drop(st);
	struct sjob *j = job_new(st, SJOB_READ);
	j->req = q;
	j->fd = q->h->fd;
	j->off = q->off;
	j->len = q->len;
	j->buf = buf_get(st);
	job_submit(st->server, j);
}

static struct sreq *pop(struct cd_fs_streams *st)
{
	struct sreq *q = st->head;
	st->head = q->next;
	if (!st->head)
		st->tail = NULL;
	st->n--;
	if (q->kind == SREQ_WRITE)
		st->wbytes -= q->len;
	return q;
}

/* Start what comes next, unless a job runs. */
static void pump(struct cd_fs_streams *st)
{
	struct cd_conn *c;
	if (st->replying)
		return; /* a read ahead done at once (no worker): its caller goes on */
	while ((c = st->conn) && !c->freed && !st->busy && st->head) {
		/* Over its cap: resumed from cd_conn_process once the client read. */
		if (cd_conn_out_queued(c) > c->out_cap)
			break;
		struct sreq *q = pop(st);
		if (q->kind == SREQ_ANSWER) {
			cd_conn_error(c, q->id, q->code, q->msg);
		} else if ((q->kind == SREQ_READ || q->kind == SREQ_WRITE) && q->h->gone) {
			char *msg = unknown_handle(q->h->id, q->h->id_len);
			cd_conn_error(c, q->id, CD_RPC_NOT_FOUND, msg);
			free(msg);
		} else if (q->kind == SREQ_READ) {
			start_read(st, q); /* answered at once, or a job runs */
			continue;
		} else if (q->kind == SREQ_WRITE) {
			struct sjob *j = job_new(st, SJOB_WRITE);
			j->req = q;
			j->fd = q->h->fd;
			j->off = q->off;
			j->len = q->len;
			job_submit(st->server, j);
			continue;
		} else if (!q->h || q->h->gone) {
			/* fs/close is idempotent. */
			cd_conn_result(c, q->id, "{}", 2);
		} else {
			struct cd_fs_handle *h = q->h;
			h->gone = true;
			if (st->ra_h == h)
				ra_drop(st);
			struct sjob *j = job_new(st, SJOB_CLOSE);
			j->req = q;
			j->fd = h->fd;
			h->fd = -1;
			if (!st->n_handles) {
				/* Its last stream: the buffers go. */
				buf_free(st->spare);
				st->spare = NULL;
			}
			job_submit(st->server, j);
			continue;
		}
		sreq_free(st, q);
	}
	if ((c = st->conn) && !c->freed && st->held && st->n < STREAM_QUEUE_MAX &&
	    st->wbytes < STREAM_WRITE_BYTES_MAX) {
		st->held = false;
		cd_conn_schedule_process(c);
	}
}

/* On the loop, once the worker is through (or the pool dropped it at shutdown). */
static void job_done(struct cd_work *w)
{
	struct sjob *j = (struct sjob *)w;
	struct cd_fs_streams *st = j->st;
	if (!st) {
		/* A close nobody waits for; one not performed at shutdown is left to the exit. */
		if (w->ran && cd_testhook_on())
			cd_testhook_event("fs-fd-closed");
		free(j);
		return;
	}
	struct cd_server *s = st->server;
	struct cd_conn *c = st->conn;
	struct sreq *q = j->req;
	st->busy = NULL;
	st->busy_request = false;
	if (c)
		c->batch++;
	if (j->kind == SJOB_AHEAD) {
		if (c && w->ran && j->ok && !j->h->gone) {
			st->ra_h = j->h;
			st->ra_off = j->off;
			st->ra_len = j->len;
			st->ra_got = j->got;
			st->ra_eof = j->eof;
			st->ra_st = j->fst;
			st->ra_buf = j->buf;
			j->h = NULL;
			j->buf = NULL;
		}
		unref(s, j->h);
		buf_put(st, j->buf);
	} else if (!c) {
		buf_free(j->buf);
	} else if (!w->ran) {
		cd_conn_error(c, q->id, CD_RPC_INTERNAL, "the server is shutting down");
		buf_put(st, j->buf);
	} else if (j->kind == SJOB_CLOSE) {
		cd_conn_result(c, q->id, "{}", 2);
	} else if (j->kind == SJOB_WRITE && !j->err) {
		cd_conn_result(c, q->id, "{}", 2);
	} else if (j->kind == SJOB_WRITE) {
		/* A write error leaves the handle open (reference). */
		struct cd_fs_res r = { .fd = -1 };
		cd_fs_res_errno(&r, j->err);
		cd_conn_error(c, q->id, r.code, r.out.buf ? r.out.buf : "error");
		cd_strbuf_done(&r.out);
	} else if (j->err) {
		/* A read error closes the handle (reference). */
		struct cd_fs_handle *h = q->h;
		if (!h->gone) {
			h->gone = true;
			if (st->ra_h == h)
				ra_drop(st);
			if (h->listed) {
				unlist(st, h);
				unref(s, h);
			}
		}
		struct cd_fs_res r = { .fd = -1 };
		cd_fs_res_errno(&r, j->err);
		cd_conn_error(c, q->id, r.code, r.out.buf ? r.out.buf : "error");
		cd_strbuf_done(&r.out);
		buf_put(st, j->buf);
	} else {
		answer_block(st, c, q, j->buf, j->got, j->eof, false);
	}
	sreq_free(st, q);
	free(j);
	if (!c) {
		if (!st->busy)
			streams_free(st);
		return;
	}
	pump(st);
	/* The end of input was waiting for these answers (cd_conn_process). */
	if (!c->freed && c->in_eof && !cd_fs_conn_busy(c))
		cd_conn_schedule_process(c);
	c->batch--;
	cd_conn_kick(c);
}

/* ---- handles ------------------------------------------------------------- */

bool cd_fs_stream_exists(struct cd_conn *c, const char *hid, size_t len)
{
	return find(c->fs_streams, hid, len) != NULL;
}

bool cd_fs_stream_open_refused(struct cd_conn *c, const char *id, const char *hid, size_t len)
{
	struct cd_fs_streams *st = c->fs_streams;
	if (find(st, hid, len)) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "file handle `");
		append_handle_id(&sb, hid, len);
		cd_strbuf_append(&sb, "` already exists");
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST, sb.buf);
		cd_strbuf_done(&sb);
		return true;
	}
	size_t active = 0;
	for (size_t i = 0; st && i < st->n_handles; i++)
		if (!st->handles[i]->at_eof || st->handles[i]->write)
			active++;
	if (active >= FS_MAX_HANDLES) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "at most 128 file handles may be open per connection");
		return true;
	}
	return false;
}

void cd_fs_stream_open_finish(struct cd_conn *c, const char *id, const char *hid, size_t len,
			      int fd, bool write)
{
	/* Checked again: opens queued beside this one may have taken the id or the room. */
	if (cd_fs_stream_open_refused(c, id, hid, len)) {
		cd_fs_close_fd(c->server, fd);
		return;
	}
	struct cd_fs_streams *st = streams_of(c);
	if (!st->handles)
		st->handles = cd_xcalloc(2 * FS_MAX_HANDLES, sizeof(*st->handles));
	if (st->n_handles >= 2 * FS_MAX_HANDLES) {
		/* Full of finished streams: the one that finished first goes. */
		struct cd_fs_handle *oldest = NULL;
		for (size_t i = 0; i < st->n_handles; i++) {
			struct cd_fs_handle *o = st->handles[i];
			if (o->at_eof && (!oldest || o->eof_order < oldest->eof_order))
				oldest = o;
		}
		oldest->gone = true;
		if (st->ra_h == oldest)
			ra_drop(st);
		unlist(st, oldest);
		unref(c->server, oldest);
	}
	struct cd_fs_handle *h = cd_xcalloc(1, sizeof(*h));
	memcpy(h->id, hid, len);
	h->id_len = len;
	h->fd = fd;
	h->write = write;
	h->listed = true;
	h->refs = 1; /* the table's */
	st->handles[st->n_handles++] = h;
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"handleId\":");
	cd_strbuf_append_json_string(&sb, hid, len);
	cd_strbuf_append_c(&sb, '}');
	cd_conn_result(c, id, sb.buf, sb.len);
	cd_strbuf_done(&sb);
}

/* ---- methods ------------------------------------------------------------- */

void cd_fs_read_block(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *hid;
	uint64_t off, len;
	char *err = NULL;

	if (cd_param_object(params, "struct FsReadBlockParams", &err) < 0 ||
	    cd_param_string(params, "handleId", "handleId", true, false, &hid, &err) < 0 ||
	    cd_fs_param_u64(params, "offset", &off, &err) < 0 ||
	    cd_fs_param_u64(params, "len", &len, &err) < 0) {
		answer_error(c, id, CD_RPC_INVALID_PARAMS, err);
		return;
	}
	if (hid->u.str.len > CD_FS_HANDLE_ID_MAX) {
		answer_error(c, id, CD_RPC_INVALID_REQUEST,
			     cd_xstrdup("file handle ID must not exceed 32 bytes"));
		return;
	}
	if (len < 1 || len > FS_BLOCK_MAX) {
		answer_error(c, id, CD_RPC_INVALID_REQUEST,
			     cd_xstrdup("file read block length must be between 1 and 1048576"));
		return;
	}
	struct cd_fs_handle *h = find(c->fs_streams, hid->u.str.s, hid->u.str.len);
	if (!h) {
		answer_error(c, id, CD_RPC_NOT_FOUND, unknown_handle(hid->u.str.s, hid->u.str.len));
		return;
	}
	/*
	 * No range check of our own: an offset past 2^63 - 1 is the kernel's
	 * EINVAL from pread, a read error that closes the handle, as in Codex.
	 */
	struct sreq *q = cd_xcalloc(1, sizeof(*q));
	q->kind = SREQ_READ;
	q->id = cd_xstrdup(id);
	q->h = ref(h);
	q->off = off;
	q->len = len;
	enqueue(c->fs_streams, q);
}

void cd_fs_stream_write(struct cd_conn *c, const char *id, const char *hid, size_t len,
			uint64_t off, unsigned char *data, size_t n)
{
	struct cd_fs_handle *h = find(c->fs_streams, hid, len);
	if (!h) {
		free(data);
		answer_error(c, id, CD_RPC_NOT_FOUND, unknown_handle(hid, len));
		return;
	}
	struct sreq *q = cd_xcalloc(1, sizeof(*q));
	q->kind = SREQ_WRITE;
	q->id = cd_xstrdup(id);
	q->h = ref(h);
	q->off = off;
	q->len = n;
	q->data = data;
	cd_mem_charge(CD_MEM_FILES, n);
	enqueue(c->fs_streams, q);
}

void cd_fs_close(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *hid;
	char *err = NULL;
	if (cd_param_object(params, "struct FsCloseParams", &err) < 0 ||
	    cd_param_string(params, "handleId", "handleId", true, false, &hid, &err) < 0) {
		answer_error(c, id, CD_RPC_INVALID_PARAMS, err);
		return;
	}
	if (hid->u.str.len > CD_FS_HANDLE_ID_MAX) {
		answer_error(c, id, CD_RPC_INVALID_REQUEST,
			     cd_xstrdup("file handle ID must not exceed 32 bytes"));
		return;
	}
	struct cd_fs_streams *st = c->fs_streams;
	struct cd_fs_handle *h = find(st, hid->u.str.s, hid->u.str.len);
	if (!h && !requests_ahead(st)) {
		cd_conn_result(c, id, "{}", 2);
		return;
	}
	struct sreq *q = cd_xcalloc(1, sizeof(*q));
	q->kind = SREQ_CLOSE;
	q->id = cd_xstrdup(id);
	if (h) {
		/* The id is free at once; the table's reference is the request's now. */
		unlist(st, h);
		q->h = h;
	}
	enqueue(st, q);
}

void cd_fs_stream_error(struct cd_conn *c, const char *id, int code, char *msg)
{
	answer_error(c, id, code, msg);
}

bool cd_fs_stream_busy(const struct cd_conn *c)
{
	return requests_ahead(c->fs_streams);
}

bool cd_fs_stream_input_held(const struct cd_conn *c)
{
	return c->fs_streams && c->fs_streams->held;
}

void cd_fs_stream_pump(struct cd_conn *c)
{
	if (c->fs_streams)
		pump(c->fs_streams);
}

void cd_fs_stream_release(struct cd_conn *c)
{
	struct cd_fs_streams *st = c->fs_streams;
	if (!st)
		return;
	c->fs_streams = NULL;
	st->conn = NULL;
	while (st->head)
		sreq_free(st, pop(st));
	ra_drop(st);
	while (st->n_handles) {
		struct cd_fs_handle *h = st->handles[0];
		h->gone = true;
		unlist(st, h);
		unref(st->server, h);
	}
	buf_free(st->spare);
	st->spare = NULL;
	/* A job on a worker: its done frees st. */
	if (!st->busy)
		streams_free(st);
}
