/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fs/... methods (reference 2.10): decoding, the per-connection queues
 * of requests and their worker threads, the sandboxed helper, streaming
 * reads. The operations themselves are in fs-ops.c.
 *
 * A request that carries a sandbox context restricting the file system is
 * performed by the cordon-fs-helper program (fs-helper.c), confined by the
 * plan of that context (the same binding, Landlock rules, seccomp filter,
 * mounts and pid namespace a sandboxed process/start gets): it carries
 * nothing of the server (no memory, environment or descriptor of it a
 * sandboxed process could read through /proc/self). Reads (fs/readFile,
 * fs/open) only open the file in the helper and pass the descriptor back
 * (SCM_RIGHTS): the server reads it outside, so sandboxed streaming works
 * and a large read is not copied through the socket.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "serve/budget.h"
#include "serve/fs-helper.h"
#include "serve/fs-ops.h"
#include "serve/fs-stream.h"
#include "serve/fs.h"
#include "serve/intent.h"
#include "serve/loop.h"
#include "serve/proc.h"
#include "serve/server.h"
#include "serve/testhook.h"
#include "serve/workq.h"
#include "shared/fd-util.h"
#include "shared/log.h"
#include "spawn.h"

#define FS_MAX_READ_FILE (512u * 1024 * 1024)
#define FS_MAX_HANDLE_ID CD_FS_HANDLE_ID_MAX
/* Per connection: fs requests waiting for their turn, and the writeFile bytes they hold. */
#define FS_QUEUE_MAX	   64
#define FS_QUEUE_MAX_BYTES (256u * 1024 * 1024)
/* Worker threads (each runs one connection's fs request at a time). */
#define FS_WORKERS 4
/* At shutdown, how long running fs jobs get to stop once cancelled. */
#define FS_STOP_MS 2000
#define B64_SLICE  CD_FS_B64_SLICE

/* ---- request decoding ---------------------------------------------------- */

int cd_fs_get_path(const struct cd_json *params, const char *key, char **ret, char **err)
{
	const struct cd_json *v;
	if (cd_param_string(params, key, key, true, false, &v, err) < 0)
		return -EINVAL;
	const char *why = NULL;
	if (cd_pathuri_to_posix(v->u.str.s, v->u.str.len, ret, &why) < 0) {
		if ((*err = cd_param_uri_refusal(v->u.str.s, v->u.str.len)))
			return -EINVAL;
		*err = cd_xasprintf("invalid URI for `%s`: %s", key, why ? why : "not a file URI");
		return -EINVAL;
	}
	return 0;
}

int cd_fs_param_u64(const struct cd_json *obj, const char *key, uint64_t *ret, char **err)
{
	const struct cd_json *v = cd_json_get(obj, key);
	if (!v) {
		*err = cd_param_missing(key);
		return -EINVAL;
	}
	if (v->type != CD_JSON_NUMBER || cd_json_uint64(v, ret) < 0) {
		*err = cd_param_bad_u64(v, cd_streq(key, "offset") ? "u64" : "usize", key);
		return -EINVAL;
	}
	return 0;
}

static void reply_res(struct cd_conn *c, const char *id, struct cd_fs_res *r)
{
	if (r->code)
		cd_conn_error(c, id, r->code, r->out.buf ? r->out.buf : "error");
	else
		cd_conn_result(c, id, r->out.buf ? r->out.buf : "{}", r->out.buf ? r->out.len : 2);
}

/* ---- fs requests off the loop ------------------------------------------- */

/*
 * A request is performed on a worker thread (workq.h), its sandbox context
 * bound there too, so that a copy of GiBs, a recursive remove, a sandboxed
 * helper, the binding's scan of a workspace, or any system call on a hung
 * network file system does not stall every other client. (An
 * fs/readBlock or fs/close queued behind its fs/open is handed, at its
 * turn, to the connection's stream queue, whose reads and closes run on
 * the workers too: fs-stream.c.)
 *
 * Each connection has a FIFO of jobs (struct cd_fs_queue) of which only the
 * head runs: its fs requests are performed and answered in the order they
 * came (a writeFile then a readFile of the same file sees the write), while
 * its other requests (process/..., fs/readBlock on an open handle) are
 * answered meanwhile. At most FS_QUEUE_MAX jobs holding FS_QUEUE_MAX_BYTES
 * of writeFile data wait per connection; beyond that a request is refused
 * (-32600), like the other per-connection limits. The next job does not
 * start while the connection's outbound queue is over its cap: a client
 * that does not read holds back its fs requests as it holds back the rest.
 *
 * When the connection ends, the job a worker runs for it completes (a
 * write or a copy is not left half done) and its result is dropped (conn
 * is NULL then); the others, including one handed to the pool that no
 * worker has started, are never performed (queue_release). At shutdown
 * the running ones are cancelled (see cd_fs_cancelled() and fs-helper.c).
 */
typedef void (*fs_method_fn)(struct cd_conn *c, const char *id, const struct cd_json *params);

struct rf_state {
	bool ws;	    /* the stream is a WebSocket: the answer goes in frames */
	bool started;	    /* the file was checked and the buffers made */
	bool begun;	    /* the answer's head is produced: an error now cuts it */
	bool eof;	    /* the file is read to its end */
	bool done;	    /* the answer's tail is produced */
	uint64_t total;	    /* bytes of the file read */
	unsigned char *buf; /* RF_READ bytes of the file */
	size_t buf_len, buf_off;
	struct cd_strbuf pend; /* to write: what the connection had queued, then the answer */
	size_t pend_off;
	bool pipe_grown;
	size_t charged; /* of the memory budget (files) */
};

struct fs_job {
	struct cd_work work;		    /* first: the pool hands this back */
	struct fs_job *next;		    /* the connection's queue */
	struct fs_job *run_prev, *run_next; /* running_jobs */
	struct cd_conn *conn;		    /* NULL once the connection ended */
	struct cd_server *srv;
	char *id;     /* the request's id, JSON text */
	bool offload; /* on a worker; else on the loop at its turn */
	struct cd_fs_req q;
	struct cd_fs_res r;
	/*
	 * The sandbox context (in msg, the request's tree, owned), bound on
	 * the worker with a copy of the server's options: b owns lp.
	 */
	struct cd_json *msg;
	const struct cd_json *sandbox;
	bool has_sandbox;
	/* fs/writeFile: dataBase64 (in msg), decoded on the worker into q.data. */
	const struct cd_json *b64;
	size_t bytes; /* the data it holds, for the queue's cap */
	const struct cd_linux_host *host;
	const struct cd_server *server; /* with a sandbox: its hidden files are checked */
	struct cd_linux_opts lopts;
	struct cd_hidden_path hidden[CD_ARRAY_SIZE(((struct cd_server *)0)->hidden)];
	/* The check's findings (cd_server_hidden_check's ret_why), for the loop to log. */
	bool hidden_checked;
	const char *hidden_why[CD_ARRAY_SIZE(((struct cd_server *)0)->hidden)];
	struct cd_cli_bound b;
	const struct cd_linux_plan *lp;
	char hid[FS_MAX_HANDLE_ID]; /* fs/open: the handle's id */
	size_t hid_len;
	/* fs/readFile: its answer, streamed by a worker (see stream_answer). */
	int out_fd;	     /* the connection's stream, lent (cd_conn_out_lend), or -1 */
	struct rf_state rf;  /* what is written next, and how far the file is read */
	bool opened;	     /* the operation ran (the file is open): only the answer is left */
	size_t data_charged; /* of the memory budget (files): fs/writeFile's data */
	bool answered;	     /* the whole answer went out */
	bool yielded; /* the worker gave up its turn: the client is slow, or it had its slice */
	bool parked;  /* on the loop, waiting for the client to take more (park) */
	struct cd_watch *park;	     /* parked: the stream's writability */
	struct cd_timer *park_stall; /* parked: nothing taken for --stall-timeout */
	char *broken;	     /* why the stream cannot go on, the answer cut or the client gone */
	fs_method_fn method; /* an fs/readBlock or fs/close waiting for its fs/open... */
	char *params;	     /* ...and its params, JSON text */
	atomic_bool cancel;
	struct cd_fs_sandboxed sb; /* when lp: the helper's intermediate */
	char *hook_key;		   /* owned: "conn=N id=ID" for the test hooks (testhook.h) */
};

struct cd_fs_queue {
	struct fs_job *head, *tail;
	size_t n;
	size_t bytes; /* writeFile data held */
	bool running; /* head is on a worker */
};

/* Jobs handed to the pool and not completed (loop thread only): cancelled at shutdown. */
static struct fs_job *running_jobs;

static struct fs_job *job_new(struct cd_conn *c, const char *id)
{
	struct fs_job *j = cd_xcalloc(1, sizeof(*j));
	j->conn = c;
	j->srv = c->server;
	j->id = cd_xstrdup(id);
	j->r.fd = -1;
	j->out_fd = -1;
	atomic_init(&j->cancel, false);
	if (cd_testhook_on())
		j->hook_key = cd_xasprintf("conn=%lu id=%s", c->serial, id);
	return j;
}

/* The method of a job, for the test hooks' events. */
static const char *job_method(const struct fs_job *j)
{
	static const char *const names[CD_FS_OP_COUNT] = {
		[CD_FS_READ_FILE] = "fs/readFile",
		[CD_FS_OPEN] = "fs/open",
		[CD_FS_OPEN_WRITE] = "fs/open",
		[CD_FS_WRITE_FILE] = "fs/writeFile",
		[CD_FS_MKDIR] = "fs/createDirectory",
		[CD_FS_METADATA] = "fs/getMetadata",
		[CD_FS_CANONICALIZE] = "fs/canonicalize",
		[CD_FS_READ_DIR] = "fs/readDirectory",
		[CD_FS_WALK] = "fs/walk",
		[CD_FS_REMOVE] = "fs/remove",
		[CD_FS_COPY] = "fs/copy",
	};
	if (j->method)
		return "deferred"; /* an fs/readBlock or fs/close behind its fs/open */
	return names[j->q.op] ? names[j->q.op] : "?";
}

/* Test hook event NAME about job j (testhook.h). */
static void job_event(const struct fs_job *j, const char *name)
{
	if (j->hook_key)
		cd_testhook_event("%s %s method=%s", name, j->hook_key, job_method(j));
}

/* Free what a decoded request owns: its strings, its data and its bound sandbox. */
static void req_done(struct cd_fs_req *q, struct cd_cli_bound *b)
{
	cd_cli_bound_done(b);
	cd_fs_req_done(q);
}

static void job_free(struct fs_job *j);

/* job_free, then test hook event NAME: what the job held is released by then. */
static void job_free_event(struct fs_job *j, const char *name)
{
	char *key = j->hook_key;
	const char *method = job_method(j);
	j->hook_key = NULL;
	job_free(j);
	if (key)
		cd_testhook_event("%s %s method=%s", name, key, method);
	free(key);
}

static void job_free(struct fs_job *j)
{
	/* An opened file nobody takes (the connection ended): closed by a worker. */
	cd_fs_close_fd(j->srv, j->r.fd);
	cd_strbuf_done(&j->r.out);
	req_done(&j->q, &j->b);
	free(j->id);
	if (j->out_fd >= 0)
		close(j->out_fd);
	free(j->rf.buf);
	cd_strbuf_done(&j->rf.pend);
	cd_mem_set(CD_MEM_FILES, &j->rf.charged, 0);
	cd_mem_set(CD_MEM_FILES, &j->data_charged, 0);
	free(j->broken);
	free(j->params);
	free(j->hook_key);
	cd_json_free(j->msg);
	free(j);
}

/*
 * Bind the request's sandbox context (on the worker: binding resolves
 * paths, scans workspace roots for nested repositories and reads git
 * indexes, which may take long or, on a hung mount, forever). j->lp stays
 * NULL when the operation runs directly: a context that does not restrict
 * the file system (reference: only restricted profiles without full-disk
 * write use the helper). -1 with the refusal in j->r.
 */
static int bind_sandbox(struct fs_job *j)
{
	char *err = NULL;
	/* No params cwd: the server's own, for permissions that need none. */
	int rr = cd_intent_bind(j->sandbox, NULL, false, j->host, &j->lopts, &j->b, &err);
	if (rr < 0) {
		cd_fs_res_error(
			&j->r, rr == -EDESTADDRREQ ? CD_RPC_INVALID_REQUEST : CD_RPC_INVALID_PARAMS,
			"%s", err);
		free(err);
		return -1;
	}
	if (cd_intent_fs_helper_plan(&j->b, &j->lp, &err) < 0) {
		cd_fs_res_error(&j->r, CD_RPC_INVALID_PARAMS, "%s", err);
		free(err);
		return -1;
	}
	return 0;
}

/*
 * fs/readFile's answer, {"id":ID,"result":{"dataBase64":"..."}} and its
 * newline, is written by a worker to the client itself, on every
 * transport: the connection lends it the stream (cd_conn_out_lend), with
 * what it had queued, which goes first. The file is read RF_READ bytes at
 * a time and encoded in slices of B64_SLICE bytes (64 KiB of base64), each
 * written as it is made: memory stays at one block and one slice whatever
 * the size (charged to the budget), those stay in the cache, and the
 * loop never copies the answer. On WebSocket, where a message may come in
 * fragments (RFC 6455 5.4), the head and each slice go in a frame of their
 * own (text, then continuation frames) and the tail in the last one; the
 * client sees one message.
 *
 * A worker writes while the client keeps up. When the stream stays full
 * for LENT_WAIT_MS, or after LENT_MAX_MS of writing, it gives its turn up
 * (yielded): the loop waits for the stream to take more (park), and hands
 * the job to the pool again, behind the others. A client that reads slowly,
 * or not at all, holds no worker, and one that takes nothing for
 * --stall-timeout is dropped. Until the answer is out nothing else is
 * written to the stream: answers and notifications queue (and
 * back-pressure applies as usual).
 *
 * An error before the head is produced is the request's error (r), as
 * usual. After, the stream is in the middle of a message and cannot go
 * on: j->broken says why and the connection ends (the file failed to
 * read, grew past the cap, or the client went away).
 */
#define LENT_WAIT_MS 100
#define LENT_MAX_MS  1000
/* A multiple of B64_SLICE: whole slices but the file's last. */
#define RF_READ (4 * B64_SLICE)
/* Frame header, JSON head and tail, beside a slice. */
#define RF_EXTRA 128

/* A WebSocket frame header (server to client: no mask); its length. */
static size_t ws_frame_header(char *h, bool fin, unsigned opcode, uint64_t len)
{
	h[0] = (char)((fin ? 0x80 : 0) | opcode);
	if (len < 126) {
		h[1] = (char)len;
		return 2;
	}
	if (len < 65536) {
		h[1] = 126;
		h[2] = (char)(len >> 8);
		h[3] = (char)len;
		return 4;
	}
	h[1] = 127;
	for (int i = 0; i < 8; i++)
		h[2 + i] = (char)(len >> (56 - 8 * i));
	return 10;
}

/*
 * Append a piece of the answer to rf->pend: head (if not NULL), the
 * encoding of data[0..n), tail (if not NULL); on WebSocket in one frame,
 * the first (text) if it has the head, the last if it has the tail.
 */
static void rf_put(struct rf_state *rf, const char *head, const unsigned char *data, size_t n,
		   const char *tail)
{
	size_t hl = head ? strlen(head) : 0, tl = tail ? strlen(tail) : 0;
	size_t len = hl + cd_base64_encoded_len(n) + tl;
	struct cd_strbuf *sb = &rf->pend;
	cd_strbuf_reserve(sb, len + 16);
	char *p = sb->buf + sb->len;
	if (rf->ws)
		p += ws_frame_header(p, tail != NULL, head ? 0x1 : 0x0, len);
	memcpy(p, head ? head : "", hl);
	p += hl;
	p += cd_base64_encode(data, n, p);
	memcpy(p, tail ? tail : "", tl);
	p += tl;
	sb->len = (size_t)(p - sb->buf);
	sb->buf[sb->len] = '\0';
}

/*
 * Write what rf->pend holds (on the worker). 0 when it is all out;
 * -EAGAIN when the worker should give its turn up (the stream stayed
 * full for LENT_WAIT_MS, or it has written for LENT_MAX_MS since start);
 * another -errno when the stream failed or the job was cancelled.
 */
static int rf_write(struct fs_job *j, uint64_t start)
{
	struct rf_state *rf = &j->rf;
	while (rf->pend_off < rf->pend.len) {
		if (cd_fs_cancelled())
			return -ECANCELED;
		ssize_t w =
			write(j->out_fd, rf->pend.buf + rf->pend_off, rf->pend.len - rf->pend_off);
		if (w > 0) {
			rf->pend_off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN && !rf->pipe_grown) {
			rf->pipe_grown = true;
			cd_out_grow_pipe(j->out_fd);
			continue;
		}
		if (w < 0 && errno == EAGAIN) {
			uint64_t spent = cd_loop_now_ms() - start;
			if (spent >= LENT_MAX_MS)
				return -EAGAIN;
			int wait = LENT_WAIT_MS;
			if (LENT_MAX_MS - spent < (uint64_t)wait)
				wait = (int)(LENT_MAX_MS - spent);
			struct pollfd pfd = { .fd = j->out_fd, .events = POLLOUT };
			if (poll(&pfd, 1, wait) == 0)
				return -EAGAIN;
			continue;
		}
		return w < 0 ? -errno : -EIO;
	}
	rf->pend.len = rf->pend_off = 0;
	return 0;
}

/*
 * The file is open (r->fd): check it and make the buffers. false when the
 * request fails instead (r holds the error).
 */
static bool rf_start(struct fs_job *j)
{
	struct rf_state *rf = &j->rf;
	struct stat st;
	rf->started = true;
	if (fstat(j->r.fd, &st) < 0) {
		cd_fs_res_errno(&j->r, errno);
		return false;
	}
	if ((uint64_t)st.st_size > FS_MAX_READ_FILE) {
		cd_fs_res_error(&j->r, CD_RPC_INVALID_REQUEST,
				"file is too large to read: limit is %u bytes", FS_MAX_READ_FILE);
		return false;
	}
	rf->buf = cd_xmalloc(RF_READ);
	cd_strbuf_reserve(&rf->pend, cd_base64_encoded_len(B64_SLICE) + RF_EXTRA + strlen(j->id));
	cd_mem_set(CD_MEM_FILES, &rf->charged, RF_READ + rf->pend.cap);
	return true;
}

/* Produce the next piece of the answer into rf->pend. false: an error (r, or j->broken). */
static bool rf_next(struct fs_job *j)
{
	struct rf_state *rf = &j->rf;
	if (rf->buf_off == rf->buf_len && !rf->eof) {
		size_t fill = 0;
		while (fill < RF_READ) {
			ssize_t n = read(j->r.fd, rf->buf + fill, RF_READ - fill);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 || cd_fs_cancelled()) {
				int e = n < 0 ? errno : ECANCELED;
				if (rf->begun)
					j->broken =
						cd_xasprintf("reading a file failed while its "
							     "fs/readFile answer was written: %s",
							     strerror(e));
				else
					cd_fs_res_errno(&j->r, e);
				return false;
			}
			if (n == 0) {
				rf->eof = true;
				break;
			}
			fill += (size_t)n;
		}
		rf->buf_len = fill;
		rf->buf_off = 0;
		rf->total += fill;
		if (rf->total > FS_MAX_READ_FILE) {
			if (rf->begun)
				j->broken = cd_xasprintf(
					"a file grew past the %u bytes fs/readFile can "
					"answer while its answer was written",
					FS_MAX_READ_FILE);
			else
				cd_fs_res_error(&j->r, CD_RPC_INVALID_REQUEST,
						"file is too large to read: limit is %u bytes",
						FS_MAX_READ_FILE);
			return false;
		}
	}
	size_t k = rf->buf_len - rf->buf_off < B64_SLICE ? rf->buf_len - rf->buf_off : B64_SLICE;
	const char *tail = rf->ws ? "\"}}" : "\"}}\n";
	char *head = NULL;
	if (!rf->begun)
		head = cd_xasprintf("{\"id\":%s,\"result\":{\"dataBase64\":\"", j->id);
	bool last = rf->eof && rf->buf_off + k == rf->buf_len;
	/* On WebSocket the tail has a frame of its own, unless that would be the only one. */
	if (rf->ws && last && !head && k) {
		rf_put(rf, NULL, rf->buf + rf->buf_off, k, NULL);
		rf_put(rf, NULL, NULL, 0, tail);
	} else {
		rf_put(rf, head, rf->buf + rf->buf_off, k, last ? tail : NULL);
	}
	free(head);
	rf->begun = true;
	rf->buf_off += k;
	rf->done = last;
	return true;
}

/*
 * On the worker: write what is pending and go on with the answer until it
 * is out (answered), the worker should give its turn up (yielded), or the
 * stream cannot go on (broken). For an fs/readFile that failed, and any
 * other request lent the stream, only what the connection had queued is
 * written: the loop answers.
 */
static void stream_answer(struct fs_job *j)
{
	struct rf_state *rf = &j->rf;
	uint64_t start = cd_loop_now_ms();
	bool answer = j->q.op == CD_FS_READ_FILE && !j->r.code;
	if (answer && !rf->started && !rf_start(j))
		answer = false;
	for (;;) {
		int e = rf_write(j, start);
		if (e == -EAGAIN) {
			j->yielded = true;
			return;
		}
		if (e < 0) {
			j->broken = e == -ECANCELED
					    ? cd_xasprintf("an fs/readFile answer was cut "
							   "(cancelled)")
					    : cd_xasprintf("write failed: %s", strerror(-e));
			return;
		}
		if (!answer || j->r.code)
			return;
		if (rf->done) {
			j->answered = true;
			return;
		}
		if (cd_loop_now_ms() - start >= LENT_MAX_MS) {
			j->yielded = true;
			return;
		}
		if (!rf_next(j)) {
			/* An error before the head: the loop answers it; what was queued went out. */
			return;
		}
	}
}

/*
 * On a worker, right before the helper's sandbox is made: the server's
 * hidden files (cd_server_hidden_check), here because the check walks
 * their paths, which a hung mount holds, and never on the loop. The
 * request may have waited long behind others, and a hidden file replaced
 * meanwhile would be masked at its path while the file itself sits
 * elsewhere, readable; the spawner closes the rest of the window
 * (cd_hidden_path.has_id). 0, or -ESTALE with the answer set.
 */
static int hidden_refused(struct fs_job *j)
{
	char *err = NULL;
	j->hidden_checked = true;
	if (cd_server_hidden_check(j->server, j->hidden_why, &err) == 0)
		return 0;
	cd_fs_res_error(&j->r, CD_RPC_INVALID_PARAMS, "%s", err);
	free(err);
	return -ESTALE;
}

/* On a worker. */
static void job_run(struct cd_work *w)
{
	struct fs_job *j = (struct fs_job *)w;
	cd_fs_cur_cancel = &j->cancel;
	if (!j->opened) {
		if (j->hook_key && cd_testhook_holds(job_method(j)))
			cd_testhook_hold(j->hook_key, job_method(j), &j->cancel);
		job_event(j, "fs-run");
		bool refused = false;
		/* A 64 MiB message's data takes tens of ms to decode: here, not on the loop. */
		if (j->b64 && cd_base64_decode(j->b64->u.str.s, j->b64->u.str.len, &j->q.data,
					       &j->q.data_len) < 0) {
			char *why = cd_base64_refusal(j->b64->u.str.s, j->b64->u.str.len);
			cd_fs_res_error(&j->r, CD_RPC_INVALID_REQUEST,
					"fs/writeFile requires valid base64 dataBase64: %s", why);
			free(why);
			refused = true;
		}
		refused = refused || (j->sandbox && bind_sandbox(j) < 0);
		/* The request's tree is read: freed here too (a large one takes ms). */
		j->b64 = j->sandbox = NULL;
		j->msg = cd_json_free(j->msg);
		j->q.sandboxed = j->lp != NULL;
		j->sb.lp = j->lp;
		if (refused) {
			;
		} else if (j->lp) {
			if (hidden_refused(j) == 0)
				cd_fs_run_sandboxed(&j->sb, &j->q, &j->r);
		} else {
			cd_fs_do(&j->q, &j->r);
		}
		j->opened = true;
	}
	j->yielded = false;
	if (j->out_fd >= 0)
		stream_answer(j);
	if (j->answered || j->broken || j->r.code) {
		if (j->r.fd >= 0 && j->q.op == CD_FS_READ_FILE) {
			close(j->r.fd);
			j->r.fd = -1;
		}
		if (j->hook_key && j->q.op == CD_FS_READ_FILE)
			cd_testhook_event("fs-answer %s lent=%d cut=%d", j->hook_key,
					  j->out_fd >= 0, j->broken != NULL);
	} else if (j->yielded && j->hook_key) {
		cd_testhook_event("fs-yield %s method=%s", j->hook_key, job_method(j));
	}
	cd_fs_cur_cancel = NULL;
}

static void job_reply(struct cd_conn *c, struct fs_job *j)
{
	if (j->answered) {
		/* fs/readFile: the worker wrote it. */
	} else if ((j->q.op == CD_FS_OPEN || j->q.op == CD_FS_OPEN_WRITE) && !j->r.code) {
		cd_fs_stream_open_finish(c, j->id, j->hid, j->hid_len, j->r.fd,
					 j->q.op == CD_FS_OPEN_WRITE);
		j->r.fd = -1;
	} else {
		reply_res(c, j->id, &j->r);
	}
}

/* A job that is not offloaded (a block or close request behind its fs/open), at its turn. */
static void run_on_loop(struct cd_conn *c, struct fs_job *j)
{
	/* An fs/writeBlock's params hold its chunk (fs-write.c). */
	static const struct cd_json_limits lim = { .max_bytes = 2u << 20, .max_values = 16 };
	struct cd_json *v = NULL;
	struct cd_json_error jerr;
	memset(&jerr, 0, sizeof(jerr));
	/* Text this file wrote: it parses. */
	if (cd_json_parse(j->params, strlen(j->params), &lim, &v, &jerr) == 0)
		j->method(c, j->id, v);
	cd_json_free(v);
}

static void queue_pop(struct cd_fs_queue *fq)
{
	struct fs_job *j = fq->head;
	fq->head = j->next;
	if (!fq->head)
		fq->tail = NULL;
	fq->n--;
	fq->bytes -= j->bytes;
}

static void running_add(struct fs_job *j)
{
	j->run_prev = NULL;
	j->run_next = running_jobs;
	if (running_jobs)
		running_jobs->run_prev = j;
	running_jobs = j;
}

static void running_remove(struct fs_job *j)
{
	if (j->run_prev)
		j->run_prev->run_next = j->run_next;
	else if (running_jobs == j)
		running_jobs = j->run_next;
	if (j->run_next)
		j->run_next->run_prev = j->run_prev;
	j->run_prev = j->run_next = NULL;
}

static void pump(struct cd_conn *c);

static void park(struct cd_conn *c, struct fs_job *j);
static void job_done(struct cd_work *w);

/* Hand a job that is already c's running one to the pool (again). */
static void resubmit(struct cd_conn *c, struct fs_job *j)
{
	struct cd_server *s = c->server;
	j->work.run = job_run;
	j->work.done = job_done;
	j->work.ran = false;
	running_add(j);
	if (s->stopping) {
		/* Not performed: answered "the server is shutting down" (job_done). */
		job_done(&j->work);
		return;
	}
	if (!s->fs_workq || cd_workq_submit(s->fs_workq, &j->work) < 0) {
		/* No worker could be had: performed here, as before there were any. */
		job_run(&j->work);
		j->work.ran = true;
		job_done(&j->work);
	}
}

/* On the loop, once the worker is through (or the pool dropped it at shutdown). */
static void job_done(struct cd_work *w)
{
	struct fs_job *j = (struct fs_job *)w;
	struct cd_conn *c = j->conn;
	running_remove(j);
	if (w->ran && j->hidden_checked) {
		cd_server_hidden_note(c ? c->server : (struct cd_server *)j->server, j->hidden_why);
		j->hidden_checked = false; /* once: a parked job completes again */
	}
	if (!c) {
		job_free_event(j, w->ran ? "fs-done" : "fs-dropped");
		return;
	}
	if (!w->ran)
		cd_fs_res_error(&j->r, CD_RPC_INTERNAL, "the server is shutting down");
	/* The worker gave its turn up: the answer goes on once the client takes more. */
	if (w->ran && j->yielded && !j->broken) {
		park(c, j);
		return;
	}
	/* fs/readFile opened while no worker was free to write at once: its answer goes now. */
	if (w->ran && j->q.op == CD_FS_READ_FILE && !j->r.code && !j->broken && j->out_fd < 0) {
		j->out_fd = cd_conn_out_lend(c, &j->rf.pend);
		if (j->out_fd >= 0) {
			j->rf.ws = c->kind == CD_CONN_WS;
			resubmit(c, j);
			return;
		}
		/* The connection ends: there is nobody to answer. */
		cd_fs_res_error(&j->r, CD_RPC_INTERNAL, "the connection is ending");
	}
	/*
	 * A batch, as for requests (cd_conn_process): the answers below are
	 * flushed once, at the end. A flush that fails closes the connection
	 * and releases its fs state (the queue, the read-ahead), which must not
	 * happen under the feet of a deferred fs/readBlock still using them.
	 */
	c->batch++;
	queue_pop(c->fs_queue);
	c->fs_queue->running = false;
	if (j->out_fd >= 0) {
		close(j->out_fd);
		j->out_fd = -1;
		if (j->broken)
			cd_log_warn("serve: connection %lu (%s): %s: ending the connection",
				    c->serial, c->peer, j->broken);
		cd_conn_out_return(c, j->broken);
	}
	if (!j->broken)
		job_reply(c, j);
	job_free_event(j, w->ran ? "fs-done" : "fs-dropped");
	if (!c->freed) {
		pump(c);
		/* The end of input was waiting for these answers (cd_conn_process). */
		if (c->in_eof && !cd_fs_conn_busy(c))
			cd_conn_schedule_process(c);
	}
	c->batch--;
	cd_conn_kick(c);
}

static void unpark(struct cd_loop *l, struct fs_job *j)
{
	if (j->park)
		cd_loop_del_fd(l, j->park);
	if (j->park_stall)
		cd_loop_cancel_timer(l, j->park_stall);
	j->park = NULL;
	j->park_stall = NULL;
	j->parked = false;
}

static void on_park_out(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct fs_job *j = data;
	unpark(l, j);
	resubmit(j->conn, j);
}

static void on_park_stall(struct cd_loop *l, void *data)
{
	struct fs_job *j = data;
	struct cd_conn *c = j->conn;
	j->park_stall = NULL;
	cd_log_warn("serve: connection %lu (%s): the client read nothing for %u ms with an "
		    "fs/readFile answer to take: dropping it",
		    c->serial, c->peer, c->server->opts.stall_ms);
	/* Releases the queue, and this job with it. */
	cd_conn_abort(c, "stalled");
}

/*
 * The worker gave its turn up (stream_answer): wait on the loop for the
 * stream to take more, then queue the job for a worker again. A network
 * client that takes nothing for --stall-timeout is dropped; stdio waits.
 */
static void park(struct cd_conn *c, struct fs_job *j)
{
	struct cd_loop *l = c->server->loop;
	j->parked = true;
	j->park = cd_loop_add_fd(l, j->out_fd, CD_LOOP_OUT, on_park_out, j);
	if (!j->park) {
		/* Not pollable (a regular file): writing to it does not wait anyway. */
		j->parked = false;
		resubmit(c, j);
		return;
	}
	if (c->kind != CD_CONN_STDIO)
		j->park_stall = cd_loop_add_timer(l, c->server->opts.stall_ms, on_park_stall, j);
}

/* Start c's next fs request unless one runs. */
static void pump(struct cd_conn *c)
{
	struct cd_fs_queue *fq;
	while ((fq = c->fs_queue) && fq->head && !fq->running && !c->freed) {
		/* Over its cap: resumed from cd_conn_process once the client read. */
		if (cd_conn_out_queued(c) > c->out_cap)
			return;
		struct fs_job *j = fq->head;
		if (!j->offload) {
			queue_pop(fq);
			run_on_loop(c, j);
			job_free_event(j, "fs-done");
			continue;
		}
		struct cd_server *s = c->server;
		/* None once the server stops (resubmit answers then). */
		(void)cd_fs_workq(s);
		/*
		 * fs/readFile writes its answer itself (stream_answer), if a
		 * worker takes it at once: the stream is not held while it waits
		 * (else it is lent once the file is open, job_done).
		 */
		if (j->q.op == CD_FS_READ_FILE && s->fs_workq && cd_workq_can_start(s->fs_workq)) {
			j->out_fd = cd_conn_out_lend(c, &j->rf.pend);
			j->rf.ws = c->kind == CD_CONN_WS;
		}
		fq->running = true;
		if (j->hook_key && s->fs_workq)
			cd_testhook_event("fs-pool %s method=%s worker=%s", j->hook_key,
					  job_method(j),
					  cd_workq_can_start(s->fs_workq) ? "now" : "wait");
		resubmit(c, j);
		return;
	}
}

static void enqueue(struct cd_conn *c, struct fs_job *j)
{
	struct cd_fs_queue *fq = c->fs_queue;
	if (!fq)
		fq = c->fs_queue = cd_xcalloc(1, sizeof(*fq));
	if (fq->n >= FS_QUEUE_MAX || (fq->n > 0 && fq->bytes + j->bytes > FS_QUEUE_MAX_BYTES)) {
		char *msg =
			cd_xasprintf("too many fs requests waiting on this connection (at most %d, "
				     "with at most %u MiB of data): wait for their answers",
				     FS_QUEUE_MAX, FS_QUEUE_MAX_BYTES >> 20);
		cd_conn_error(c, j->id, CD_RPC_INVALID_REQUEST, msg);
		free(msg);
		job_free(j);
		return;
	}
	j->next = NULL;
	if (fq->tail)
		fq->tail->next = j;
	else
		fq->head = j;
	fq->tail = j;
	fq->n++;
	fq->bytes += j->bytes;
	if (j->hook_key)
		cd_testhook_event("fs-queued %s method=%s ahead=%zu", j->hook_key, job_method(j),
				  fq->n - 1);
	pump(c);
}

/*
 * Queue a decoded request (takes q); performed when nothing is before it.
 * With a sandbox context (in params), the request's tree is taken along.
 */
void cd_fs_submit(struct cd_conn *c, const char *id, struct cd_fs_req *q,
		  const struct cd_json *params, const char *hid, size_t hid_len)
{
	struct cd_server *s = c->server;
	const struct cd_json *sandbox = cd_json_get(params, "sandbox");
	/* The server's hidden files are checked on the worker (job_run), not here. */
	struct fs_job *j = job_new(c, id);
	j->q = *q;
	memset(q, 0, sizeof(*q));
	if (j->q.op == CD_FS_WRITE_FILE) {
		j->b64 = cd_json_get(params, "dataBase64");
		j->bytes = j->b64->u.str.len / 4 * 3;
		j->q.durable = s->opts.durable_writes;
		/* What it will hold once decoded (on the worker). */
		cd_mem_set(CD_MEM_FILES, &j->data_charged, j->bytes);
	}
	if (j->b64 || (sandbox && sandbox->type != CD_JSON_NULL)) {
		j->msg = c->cur_msg;
		c->cur_msg = NULL;
	}
	if (sandbox && sandbox->type != CD_JSON_NULL) {
		j->sandbox = sandbox;
		j->has_sandbox = true;
		j->host = &s->host;
		j->server = s;
		j->lopts = s->fs_lopts;
		for (size_t i = 0; i < j->lopts.n_hidden; i++)
			j->hidden[i] = j->lopts.hidden[i];
		j->lopts.hidden = j->hidden;
		/* Bound on the worker: sb.lp is set there, before the helper runs. */
		cd_fs_sandboxed_init(&j->sb, NULL, &s->fs_helper, &j->cancel);
	}
	/*
	 * Every operation runs on a worker, the cheap ones too (getMetadata,
	 * canonicalize, createDirectory, open: a few system calls, about 20
	 * us more there): on a hung network file system any of them blocks.
	 */
	j->offload = true;
	if (hid) {
		memcpy(j->hid, hid, hid_len);
		j->hid_len = hid_len;
	}
	enqueue(c, j);
}

/* Drop c's queue: the running job's result goes nowhere, the others are never performed. */
static void queue_release(struct cd_conn *c)
{
	struct cd_fs_queue *fq = c->fs_queue;
	if (!fq)
		return;
	c->fs_queue = NULL;
	for (struct fs_job *j = fq->head, *next; j; j = next) {
		next = j->next;
		if (j != fq->head || !fq->running) {
			job_free_event(j, "fs-dropped");
		} else if (c->server->fs_workq && cd_workq_cancel(c->server->fs_workq, &j->work)) {
			/*
			 * Still waiting for a worker (all busy): never performed,
			 * and its memory (a writeFile's data, say) goes now rather
			 * than when a worker gets to it, so that clients that
			 * reconnect cannot pile jobs up past the per-connection caps.
			 */
			running_remove(j);
			job_free_event(j, "fs-dropped");
		} else if (j->parked) {
			/* Its answer waits for the client: cut. */
			unpark(c->server->loop, j);
			job_free_event(j, "fs-dropped");
		} else {
			/*
			 * Running: it finishes (a worker is bounded), and job_done
			 * frees it. An answer the worker writes itself is cut.
			 */
			j->conn = NULL;
			job_event(j, "fs-orphaned");
			if (j->out_fd >= 0)
				atomic_store(&j->cancel, true);
		}
	}
	free(fq);
}

bool cd_fs_conn_busy(const struct cd_conn *c)
{
	return (c->fs_queue && c->fs_queue->head) || cd_fs_stream_busy(c);
}

bool cd_fs_conn_input_held(const struct cd_conn *c)
{
	return cd_fs_stream_input_held(c);
}

void cd_fs_conn_pump(struct cd_conn *c)
{
	pump(c);
	if (!c->freed)
		cd_fs_stream_pump(c);
}

struct cd_workq *cd_fs_workq(struct cd_server *s)
{
	/* None once the server stops: its pool is being freed. */
	if (s->stopping)
		return NULL;
	if (!s->fs_workq)
		s->fs_workq = cd_workq_new(s->loop, FS_WORKERS);
	return s->fs_workq;
}

void cd_fs_server_stop(struct cd_server *s)
{
	for (struct cd_conn *c = s->conns; c; c = c->next) {
		queue_release(c);
		/* Its waiting reads and closes are dropped; one on a worker completes, or not. */
		cd_fs_stream_release(c);
	}
	for (struct fs_job *j = running_jobs; j; j = j->run_next) {
		atomic_store(&j->cancel, true);
		if (j->has_sandbox)
			cd_fs_sandboxed_cancel(&j->sb);
	}
	if (s->fs_workq) {
		if (cd_workq_free(s->fs_workq, FS_STOP_MS, "fs") < 0)
			s->workers_left = true;
		s->fs_workq = NULL;
	}
}

/* ---- handlers ---------------------------------------------------------- */

static void fs_method(struct cd_conn *c, const char *id, const struct cd_json *params,
		      enum cd_fs_op op)
{
	struct cd_fs_req q = { .op = op };
	char *err = NULL;
	const struct cd_json *v;

	if (cd_param_object(params, cd_fs_op_params_struct(op), &err) < 0)
		goto invalid;
	switch (op) {
	case CD_FS_COPY:
		if (cd_fs_get_path(params, "sourcePath", &q.path, &err) < 0 ||
		    cd_fs_get_path(params, "destinationPath", &q.dest, &err) < 0 ||
		    cd_param_bool(params, "recursive", "recursive", true, false, &q.recursive,
				  &err) < 0)
			goto invalid;
		break;
	case CD_FS_WRITE_FILE:
		if (cd_fs_get_path(params, "path", &q.path, &err) < 0 ||
		    cd_param_string(params, "dataBase64", "dataBase64", true, false, &v, &err) < 0)
			goto invalid;
		/* Decoded on the worker (job_run), in the connection's order. */
		break;
	case CD_FS_MKDIR:
		if (cd_fs_get_path(params, "path", &q.path, &err) < 0 ||
		    cd_param_opt_bool(params, "recursive", "recursive", true, &q.recursive, &err) <
			    0)
			goto invalid;
		break;
	case CD_FS_REMOVE:
		if (cd_fs_get_path(params, "path", &q.path, &err) < 0 ||
		    cd_param_opt_bool(params, "recursive", "recursive", true, &q.recursive, &err) <
			    0 ||
		    cd_param_opt_bool(params, "force", "force", true, &q.force, &err) < 0)
			goto invalid;
		break;
	case CD_FS_WALK: {
		if (cd_fs_get_path(params, "path", &q.path, &err) < 0)
			goto invalid;
		const struct cd_json *o = cd_json_get(params, "options");
		if (!o) {
			err = cd_param_missing("options");
			goto invalid;
		}
		if (cd_param_object(o, "struct WalkOptions", &err) < 0 ||
		    cd_fs_param_u64(o, "maxDepth", &q.walk.max_depth, &err) < 0 ||
		    cd_fs_param_u64(o, "maxDirectories", &q.walk.max_dirs, &err) < 0 ||
		    cd_fs_param_u64(o, "maxEntries", &q.walk.max_entries, &err) < 0 ||
		    cd_param_bool(o, "followDirectorySymlinks", "followDirectorySymlinks", true,
				  false, &q.walk.follow, &err) < 0 ||
		    cd_param_bool(o, "pruneHiddenDirectories", "pruneHiddenDirectories", false,
				  false, &q.walk.prune_hidden, &err) < 0)
			goto invalid;
		if (q.walk.max_dirs == 0 || q.walk.max_entries == 0) {
			cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
				      "filesystem walk limits must be greater than zero");
			goto out;
		}
		if (q.walk.max_depth > CD_FS_WALK_MAX_DEPTH ||
		    q.walk.max_dirs > CD_FS_WALK_MAX_DIRS ||
		    q.walk.max_entries > CD_FS_WALK_MAX_ENTRIES) {
			cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
				      "filesystem walk limits exceed maximums: depth=64, "
				      "directories=10000, entries=50000");
			goto out;
		}
		break;
	}
	case CD_FS_READ_FILE:
	case CD_FS_OPEN:
	case CD_FS_OPEN_WRITE:
	case CD_FS_METADATA:
	case CD_FS_CANONICALIZE:
	case CD_FS_READ_DIR:
		if (cd_fs_get_path(params, "path", &q.path, &err) < 0)
			goto invalid;
		break;
	case CD_FS_DISCOVER: /* discover.c's, never a method of its own */
	case CD_FS_OP_COUNT:
		abort();
	}
	cd_fs_submit(c, id, &q, params, NULL, 0);
	goto out;
invalid:
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
out:
	free(err);
	cd_fs_req_done(&q);
}

#define FS_HANDLER(name, op)                                                       \
	void name(struct cd_conn *c, const char *id, const struct cd_json *params) \
	{                                                                          \
		fs_method(c, id, params, op);                                      \
	}

FS_HANDLER(cd_fs_read_file, CD_FS_READ_FILE)
FS_HANDLER(cd_fs_write_file, CD_FS_WRITE_FILE)
FS_HANDLER(cd_fs_create_directory, CD_FS_MKDIR)
FS_HANDLER(cd_fs_get_metadata, CD_FS_METADATA)
FS_HANDLER(cd_fs_canonicalize, CD_FS_CANONICALIZE)
FS_HANDLER(cd_fs_read_directory, CD_FS_READ_DIR)
FS_HANDLER(cd_fs_walk, CD_FS_WALK)
FS_HANDLER(cd_fs_remove, CD_FS_REMOVE)
FS_HANDLER(cd_fs_copy, CD_FS_COPY)

/* ---- streaming (fs-stream.c, fs-write.c) ---------------------------- */

/*
 * An fs/readBlock or fs/close of this handle waits in c's queue behind its
 * fs/open, or (unless deferred_only) an fs/open of it is queued or running.
 */
static bool queued_for(struct cd_conn *c, const char *hid, size_t len, bool deferred_only)
{
	for (struct fs_job *j = c->fs_queue ? c->fs_queue->head : NULL; j; j = j->next)
		if ((j->method ||
		     (!deferred_only && (j->q.op == CD_FS_OPEN || j->q.op == CD_FS_OPEN_WRITE))) &&
		    j->hid_len == len && !memcmp(j->hid, hid, len))
			return true;
	return false;
}

/*
 * fs/readBlock, fs/writeBlock and fs/close of a handle whose fs/open is
 * still queued wait behind it (a client may pipeline them), and so do the
 * later ones while those wait; on any other handle they go to the
 * connection's stream queue (fs-stream.c) at once, whatever its fs queue
 * holds.
 */
bool cd_fs_open_queued(struct cd_conn *c, const char *hid, size_t len)
{
	/* Open: only behind those of it still waiting (the open was answered). */
	return c->fs_queue && queued_for(c, hid, len, cd_fs_stream_exists(c, hid, len));
}

void cd_fs_defer(struct cd_conn *c, const char *id, const char *hid, size_t len,
		 void (*fn)(struct cd_conn *, const char *, const struct cd_json *), char *text)
{
	struct fs_job *j = job_new(c, id);
	j->method = fn;
	j->params = text;
	j->bytes = strlen(text); /* an fs/writeBlock's chunk counts against the queue's cap */
	memcpy(j->hid, hid, len);
	j->hid_len = len;
	enqueue(c, j);
}

static bool defer_behind_open(struct cd_conn *c, const char *id, const struct cd_json *params,
			      fs_method_fn fn, bool block)
{
	const struct cd_json *hid;
	uint64_t off = 0, len = 0;
	char *err = NULL;
	if (!c->fs_queue || cd_param_object(params, "params", &err) < 0 ||
	    cd_param_string(params, "handleId", "handleId", true, false, &hid, &err) < 0 ||
	    (block && (cd_fs_param_u64(params, "offset", &off, &err) < 0 ||
		       cd_fs_param_u64(params, "len", &len, &err) < 0)) ||
	    hid->u.str.len > FS_MAX_HANDLE_ID ||
	    !cd_fs_open_queued(c, hid->u.str.s, hid->u.str.len)) {
		free(err);
		return false;
	}
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"handleId\":");
	cd_strbuf_append_json_string(&sb, hid->u.str.s, hid->u.str.len);
	if (block)
		cd_strbuf_printf(&sb, ",\"offset\":%llu,\"len\":%llu", (unsigned long long)off,
				 (unsigned long long)len);
	cd_strbuf_append_c(&sb, '}');
	cd_fs_defer(c, id, hid->u.str.s, hid->u.str.len, fn, cd_strbuf_steal(&sb));
	return true;
}

void cd_fs_read_block_in_order(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	if (!defer_behind_open(c, id, params, cd_fs_read_block, true))
		cd_fs_read_block(c, id, params);
}

void cd_fs_close_in_order(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	if (!defer_behind_open(c, id, params, cd_fs_close, false))
		cd_fs_close(c, id, params);
}

void cd_fs_conn_release(struct cd_conn *c)
{
	queue_release(c);
	cd_fs_stream_release(c);
}
