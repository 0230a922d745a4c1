/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "serve/budget.h"
#include "serve/proc.h"

static const enum cd_loop_kind kinds[] = { CD_LOOP_EPOLL, CD_LOOP_POLL };
static char *test_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", NULL };

enum ev_type {
	EV_OUT,
	EV_EXIT,
	EV_CLOSE
};

struct ev {
	enum ev_type type;
	uint64_t seq;
	enum cd_stream stream;
	size_t len;
};

struct rec {
	struct ev *evs;
	size_t n, cap;
	struct cd_strbuf data[CD_STREAM_COUNT];
	int exit_code;
	bool denied;
	bool exited, closed;
	/* quit the loop when this much stdout arrived (0 = only on close) */
	size_t quit_at_bytes;
	bool free_in_closed;
};

static void push(struct rec *r, struct ev e)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 64;
		r->evs = cd_xreallocarray(r->evs, r->cap, sizeof(*r->evs));
	}
	r->evs[r->n++] = e;
}

static struct cd_loop *cur_loop;

static void on_output(struct cd_proc *p, const struct cd_chunk *c, void *data)
{
	(void)p;
	struct rec *r = data;
	ck_assert_uint_gt(c->len, 0);
	ck_assert_uint_le(c->len, 8192);
	push(r, (struct ev){ EV_OUT, c->seq, c->stream, c->len });
	cd_strbuf_append_n(&r->data[c->stream], (const char *)c->data, c->len);
	if (r->quit_at_bytes && r->data[c->stream].len >= r->quit_at_bytes)
		cd_loop_quit(cur_loop);
}

static void on_exited(struct cd_proc *p, uint64_t seq, int code, bool denied, void *data)
{
	(void)p;
	struct rec *r = data;
	ck_assert(!r->exited);
	push(r, (struct ev){ EV_EXIT, seq, 0, 0 });
	r->exit_code = code;
	r->denied = denied;
	r->exited = true;
}

static void on_closed(struct cd_proc *p, uint64_t seq, void *data)
{
	struct rec *r = data;
	ck_assert(r->exited);
	ck_assert(!r->closed);
	push(r, (struct ev){ EV_CLOSE, seq, 0, 0 });
	r->closed = true;
	cd_loop_quit(cur_loop);
	if (r->free_in_closed)
		cd_proc_free(p);
}

static void rec_done(struct rec *r)
{
	free(r->evs);
	for (int i = 0; i < CD_STREAM_COUNT; i++)
		cd_strbuf_done(&r->data[i]);
}

static void on_timeout(struct cd_loop *l, void *data)
{
	*(bool *)data = true;
	cd_loop_quit(l);
}

/* Run the loop until it quits (an event asked) or ms passed; false on timeout. */
static bool run_for(struct cd_loop *l, uint64_t ms)
{
	bool timed_out = false;
	struct cd_timer *t = cd_loop_add_timer(l, ms, on_timeout, &timed_out);
	ck_assert_int_eq(cd_loop_run(l), 0);
	if (!timed_out)
		cd_loop_cancel_timer(l, t);
	return !timed_out;
}

static struct cd_proc *start(struct cd_loop *l, struct rec *r, bool tty, bool pipe_stdin,
			     const char *script)
{
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	struct cd_proc_opts o = {
		.argv = argv,
		.envp = test_env,
		.cwd = "/",
		.tty = tty,
		.pipe_stdin = pipe_stdin,
	};
	struct cd_proc_events ev = {
		.data = r,
		.output = on_output,
		.exited = on_exited,
		.closed = on_closed,
	};
	struct cd_proc *p = NULL;
	struct cd_spawn_error err = { 0 };
	int rc = cd_proc_start(l, &o, &ev, &p, &err);
	ck_assert_msg(rc == 0, "start failed: %s", err.msg);
	return p;
}

static struct cd_loop *new_loop(int i)
{
	struct cd_loop *l = cd_loop_new(kinds[i]);
	ck_assert_ptr_nonnull(l);
	cur_loop = l;
	return l;
}

/* Run to closed; checks the seq invariants every process must keep. */
static void run_to_close(struct cd_loop *l, struct rec *r)
{
	ck_assert_msg(run_for(l, 10000), "process did not close in time");
	ck_assert(r->closed);
	/* seqs: 1, 2, 3, ... with no gap and no repeat; close last. */
	for (size_t i = 0; i < r->n; i++)
		ck_assert_uint_eq(r->evs[i].seq, i + 1);
	ck_assert_int_eq(r->evs[r->n - 1].type, EV_CLOSE);
}

/* ---- basics ---- */

START_TEST(test_echo_seq)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false, "echo hello");
	ck_assert_uint_eq(r.n, 0); /* nothing fires inside start */
	run_to_close(l, &r);
	ck_assert_uint_eq(r.n, 3);
	ck_assert_int_eq(r.evs[0].type, EV_OUT);
	ck_assert_uint_eq(r.evs[0].seq, 1);
	ck_assert_int_eq(r.evs[0].stream, CD_STREAM_STDOUT);
	ck_assert_int_eq(r.evs[1].type, EV_EXIT);
	ck_assert_uint_eq(r.evs[1].seq, 2);
	ck_assert_uint_eq(r.evs[2].seq, 3);
	ck_assert_str_eq(r.data[CD_STREAM_STDOUT].buf, "hello\n");
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert(!r.denied);

	struct cd_proc_read rd;
	cd_proc_read(p, 0, SIZE_MAX, &rd);
	ck_assert_uint_eq(rd.n, 1);
	ck_assert_uint_eq(rd.chunks[0].seq, 1);
	ck_assert_int_eq(memcmp(rd.chunks[0].data, "hello\n", 6), 0);
	ck_assert_uint_eq(rd.next_seq, 4);
	ck_assert(rd.exited && rd.closed);
	ck_assert_int_eq(rd.exit_code, 0);
	ck_assert(!rd.sandbox_denied);
	free(rd.chunks);
	cd_proc_read(p, 1, SIZE_MAX, &rd);
	ck_assert_uint_eq(rd.n, 0);
	ck_assert_uint_eq(rd.next_seq, 4);
	free(rd.chunks);
	ck_assert(cd_proc_is_exited(p) && cd_proc_is_closed(p));
	ck_assert(!cd_proc_is_sandboxed(p));
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_no_output)
{
	/* Exit seq 1, close seq 2, nextSeq 3. */
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false, "exit 0");
	run_to_close(l, &r);
	ck_assert_uint_eq(r.n, 2);
	ck_assert_int_eq(r.evs[0].type, EV_EXIT);
	struct cd_proc_read rd;
	cd_proc_read(p, 0, SIZE_MAX, &rd);
	ck_assert_uint_eq(rd.n, 0);
	ck_assert_uint_eq(rd.next_seq, 3);
	free(rd.chunks);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_stdout_stderr)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false, "echo out; echo err >&2; echo out2");
	run_to_close(l, &r);
	ck_assert_str_eq(r.data[CD_STREAM_STDOUT].buf, "out\nout2\n");
	ck_assert_str_eq(r.data[CD_STREAM_STDERR].buf, "err\n");
	ck_assert_ptr_null(r.data[CD_STREAM_PTY].buf);
	ck_assert_str_eq(cd_stream_name(CD_STREAM_STDERR), "stderr");
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

static const struct {
	const char *script;
	int code;
} exits[] = {
	{ "exit 0", 0 },
	{ "exit 3", 3 },
	{ "exit 255", 255 },
	{ "kill -TERM $$", 128 + SIGTERM },
	{ "kill -KILL $$", 128 + SIGKILL },
	{ "exec /nonexistent-cordon-test 2>/dev/null", 127 },
};

START_TEST(test_exit_codes)
{
	for (int k = 0; k < (int)CD_ARRAY_SIZE(kinds); k++) {
		struct cd_loop *l = new_loop(k);
		struct rec r = { 0 };
		struct cd_proc *p = start(l, &r, false, false, exits[_i].script);
		run_to_close(l, &r);
		ck_assert_int_eq(r.exit_code, exits[_i].code);
		struct cd_proc_read rd;
		cd_proc_read(p, 0, SIZE_MAX, &rd);
		ck_assert_int_eq(rd.exit_code, exits[_i].code);
		free(rd.chunks);
		cd_proc_free(p);
		rec_done(&r);
		cd_loop_free(l);
	}
}
END_TEST

START_TEST(test_spawn_failure)
{
	struct cd_loop *l = new_loop(_i);
	char *argv[] = { "cordon-no-such-command", NULL };
	struct cd_proc_opts o = { .argv = argv, .envp = test_env };
	struct cd_proc *p = NULL;
	struct cd_spawn_error err = { 0 };
	ck_assert_int_eq(cd_proc_start(l, &o, NULL, &p, &err), -ENOENT);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(err.exit_code, 127);
	ck_assert_ptr_nonnull(strstr(err.msg, "command not found"));
	cd_loop_free(l);
}
END_TEST

/* ---- volume and the ring ---- */

static char tmpfile_path[64];

static unsigned char *make_file(size_t n)
{
	unsigned char *buf = cd_xmalloc(n);
	uint64_t s = 88172645463325252ull;
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		buf[i] = (unsigned char)s;
	}
	snprintf(tmpfile_path, sizeof(tmpfile_path), "/tmp/cordon-test-proc-XXXXXX");
	int fd = mkstemp(tmpfile_path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
	close(fd);
	return buf;
}

START_TEST(test_5mb_complete)
{
	struct cd_loop *l = new_loop(_i);
	size_t n = 5000000;
	unsigned char *want = make_file(n);
	char script[128];
	snprintf(script, sizeof(script), "cat %s", tmpfile_path);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false, script);
	run_to_close(l, &r);
	unlink(tmpfile_path);
	ck_assert_uint_eq(r.data[CD_STREAM_STDOUT].len, n);
	ck_assert_int_eq(memcmp(r.data[CD_STREAM_STDOUT].buf, want, n), 0);
	ck_assert_int_eq(r.exit_code, 0);

	/* Only the newest 1 MiB is retained, in order, ending at the last chunk. */
	struct cd_proc_read rd;
	cd_proc_read(p, 0, SIZE_MAX, &rd);
	ck_assert_uint_gt(rd.n, 0);
	size_t bytes = 0;
	for (size_t i = 0; i < rd.n; i++) {
		bytes += rd.chunks[i].len;
		if (i)
			ck_assert_uint_eq(rd.chunks[i].seq, rd.chunks[i - 1].seq + 1);
	}
	ck_assert_uint_le(bytes, 1024 * 1024);
	ck_assert_uint_gt(bytes, 1024 * 1024 - 8192);
	ck_assert_uint_gt(rd.chunks[0].seq, 1);
	uint64_t exit_seq = r.evs[r.n - 2].seq;
	ck_assert_uint_eq(rd.chunks[rd.n - 1].seq, exit_seq - 1);
	/* The retained bytes are the tail of the output. */
	size_t off = n - bytes;
	for (size_t i = 0; i < rd.n; i++) {
		ck_assert_int_eq(memcmp(rd.chunks[i].data, want + off, rd.chunks[i].len), 0);
		off += rd.chunks[i].len;
	}
	ck_assert_uint_eq(rd.next_seq, exit_seq + 2);
	free(rd.chunks);
	free(want);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_chunk_count_cap)
{
	/* 60,000 one-line writes through a slow reader are >50,000 chunks at most. */
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false,
				  "i=0; while [ $i -lt 60000 ]; do echo; i=$((i+1)); done");
	run_to_close(l, &r);
	ck_assert_uint_eq(r.data[CD_STREAM_STDOUT].len, 60000);
	struct cd_proc_read rd;
	cd_proc_read(p, 0, SIZE_MAX, &rd);
	ck_assert_uint_le(rd.n, 50000);
	size_t n_out = r.n - 2;
	ck_assert_uint_eq(rd.n, n_out < 50000 ? n_out : 50000);
	free(rd.chunks);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

/* ---- lossless mode and the memory budget ---- */

static bool held_now;
static unsigned held_events;

static uint64_t no_delivery(struct cd_proc *p, void *data)
{
	return 0; /* no connection: only cd_proc_ack acknowledges */
}

static void on_held(struct cd_proc *p, bool held, void *data)
{
	held_now = held;
	held_events += held;
	if (held)
		cd_loop_quit(cur_loop);
}

START_TEST(test_lossless_holds)
{
	/*
	 * Nobody acknowledges: the process is held once CD_PROC_HOLD_BYTES
	 * wait, and nothing is evicted meanwhile. Each acknowledgement lets it
	 * go on, and all 24 MB arrive, every chunk kept until acknowledged.
	 */
	struct cd_loop *l = new_loop(_i);
	size_t n = 24000000;
	unsigned char *want = make_file(n);
	char script[128];
	snprintf(script, sizeof(script), "cat %s", tmpfile_path);
	char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct cd_proc_opts o = { .argv = argv, .envp = test_env, .cwd = "/" };
	struct rec r = { 0 };
	struct cd_proc_events ev = {
		.data = &r,
		.output = on_output,
		.exited = on_exited,
		.closed = on_closed,
		.delivered = no_delivery,
		.held = on_held,
	};
	struct cd_proc *p = NULL;
	struct cd_spawn_error err = { 0 };
	held_now = false;
	held_events = 0;
	ck_assert_int_eq(cd_proc_start(l, &o, &ev, &p, &err), 0);
	cd_proc_set_lossless(p, true);
	ck_assert_msg(run_for(l, 10000), "not held in time");
	ck_assert(held_now && cd_proc_is_held(p));
	size_t got = r.data[CD_STREAM_STDOUT].len;
	ck_assert_uint_ge(got, CD_PROC_HOLD_BYTES);
	ck_assert_uint_lt(got, CD_PROC_HOLD_BYTES + 1024 * 1024);
	/* Everything since seq 1 is still there. */
	struct cd_proc_read rd;
	cd_proc_read(p, 0, SIZE_MAX, &rd);
	ck_assert_uint_eq(rd.chunks[0].seq, 1);
	size_t kept = 0;
	for (size_t i = 0; i < rd.n; i++)
		kept += rd.chunks[i].len;
	ck_assert_uint_eq(kept, got);
	free(rd.chunks);
	while (!r.closed) {
		cd_proc_ack(p, cd_proc_last_seq(p));
		ck_assert(!cd_proc_is_held(p));
		ck_assert_msg(run_for(l, 10000), "no progress");
	}
	ck_assert_uint_ge(held_events, 5);
	ck_assert_uint_eq(r.data[CD_STREAM_STDOUT].len, n);
	ck_assert_int_eq(memcmp(r.data[CD_STREAM_STDOUT].buf, want, n), 0);
	ck_assert_int_eq(r.exit_code, 0);
	unlink(tmpfile_path);
	free(want);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_ring_budget)
{
	/*
	 * A 256 KiB budget: the ring grows past its first 64 KiB only while
	 * it has room, keeps a smaller window, and gives it all back.
	 */
	cd_mem_set_limit(256 * 1024);
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false, "head -c 3000000 /dev/zero");
	run_to_close(l, &r);
	ck_assert_uint_eq(r.data[CD_STREAM_STDOUT].len, 3000000);
	ck_assert_uint_le(cd_mem_peak(), 256 * 1024 + 64 * 1024);
	struct cd_proc_read rd;
	cd_proc_read(p, 0, SIZE_MAX, &rd);
	size_t kept = 0;
	for (size_t i = 0; i < rd.n; i++)
		kept += rd.chunks[i].len;
	free(rd.chunks);
	ck_assert_uint_gt(kept, 0);
	ck_assert_uint_le(kept, 256 * 1024);
	/* Closed: the store shrank to what it keeps. */
	ck_assert_uint_le(cd_mem_used_kind(CD_MEM_RETAINED), kept + 64 * 1024);
	cd_proc_free(p);
	ck_assert_uint_eq(cd_mem_used(), 0);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_max_bytes)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	/* Three chunks of 3, 3 and 5 bytes (sleeps keep them apart). */
	struct cd_proc *p = start(l, &r, false, false,
				  "printf aaa; sleep 0.05; printf bbb; sleep 0.05; printf ccccc");
	run_to_close(l, &r);
	ck_assert_uint_eq(r.n, 5);
	struct cd_proc_read rd;

	/* A budget smaller than the first chunk still returns it. */
	cd_proc_read(p, 0, 1, &rd);
	ck_assert_uint_eq(rd.n, 1);
	ck_assert_uint_eq(rd.chunks[0].len, 3);
	ck_assert_uint_eq(rd.next_seq, 2);
	free(rd.chunks);

	/* Stop before the chunk that would exceed the budget. */
	cd_proc_read(p, 0, 7, &rd);
	ck_assert_uint_eq(rd.n, 2);
	ck_assert_uint_eq(rd.next_seq, 3);
	free(rd.chunks);

	/* Exactly reaching the budget: stop there. */
	cd_proc_read(p, 0, 6, &rd);
	ck_assert_uint_eq(rd.n, 2);
	free(rd.chunks);

	cd_proc_read(p, 1, 100, &rd);
	ck_assert_uint_eq(rd.n, 2);
	ck_assert_uint_eq(rd.chunks[0].seq, 2);
	ck_assert_uint_eq(rd.next_seq, 4); /* last returned + 1, not the process's 6 */
	free(rd.chunks);

	/* Nothing returned: the process's next seq. */
	cd_proc_read(p, 3, 100, &rd);
	ck_assert_uint_eq(rd.n, 0);
	ck_assert_uint_eq(rd.next_seq, 6);
	free(rd.chunks);

	cd_proc_read(p, 0, SIZE_MAX, &rd);
	ck_assert_uint_eq(rd.n, 3);
	ck_assert_uint_eq(rd.next_seq, 6);
	free(rd.chunks);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

/* ---- stdin ---- */

START_TEST(test_write_dedup)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, true, "cat");
	enum cd_write_status st = -1;
	ck_assert_int_eq(cd_proc_write(p, "1", "one\n", 4, &st), 0);
	ck_assert_int_eq(st, CD_WRITE_ACCEPTED);
	st = -1;
	ck_assert_int_eq(cd_proc_write(p, "1", "one\n", 4, &st), 0);
	ck_assert_int_eq(st, CD_WRITE_ACCEPTED);
	ck_assert_int_eq(cd_proc_write(p, "2", "two\n", 4, &st), 0);
	/* An id is only forgotten after 4096 newer ones. */
	ck_assert_int_eq(cd_proc_write(p, "1", "one\n", 4, &st), 0);
	cd_proc_close_stdin(p);
	ck_assert_int_eq(cd_proc_write(p, "3", "x", 1, &st), 0);
	ck_assert_int_eq(st, CD_WRITE_STDIN_CLOSED);
	run_to_close(l, &r);
	ck_assert_str_eq(r.data[CD_STREAM_STDOUT].buf, "one\ntwo\n");
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_write_ids_forgotten)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, true, "wc -c");
	enum cd_write_status st;
	char id[32];
	for (int k = 0; k < 4097; k++) {
		snprintf(id, sizeof(id), "%d", k);
		ck_assert_int_eq(cd_proc_write(p, id, "x", 1, &st), 0);
	}
	/*
	 * "0" is the oldest of 4097: forgotten, so written again (and that
	 * pushes "1" out); "2" is still remembered.
	 */
	ck_assert_int_eq(cd_proc_write(p, "0", "x", 1, &st), 0);
	ck_assert_int_eq(cd_proc_write(p, "2", "x", 1, &st), 0);
	ck_assert_int_eq(cd_proc_write(p, "4096", "x", 1, &st), 0);
	cd_proc_close_stdin(p);
	run_to_close(l, &r);
	ck_assert_int_eq(atoi(r.data[CD_STREAM_STDOUT].buf), 4098);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_write_large_queued)
{
	/* 3 MiB through a 64 KiB pipe: queued and drained by the loop. */
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	/* Not reading for a while: the queue must still hold most of it below. */
	struct cd_proc *p = start(l, &r, false, true, "sleep 0.3; wc -c");
	size_t n = 3u << 20;
	char *buf = cd_xcalloc(1, n);
	enum cd_write_status st;
	ck_assert_int_eq(cd_proc_write(p, "big", buf, n, &st), 0);
	ck_assert_int_eq(st, CD_WRITE_ACCEPTED);
	/* The queue is bounded at 8 MiB. */
	char *huge = cd_xcalloc(1, 8u << 20);
	ck_assert_int_eq(cd_proc_write(p, "huge", huge, 8u << 20, &st), -ENOBUFS);
	cd_proc_close_stdin(p);
	run_to_close(l, &r);
	ck_assert_int_eq(atol(r.data[CD_STREAM_STDOUT].buf), (long)n);
	free(buf);
	free(huge);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_write_no_stdin)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false, "cat; echo done");
	enum cd_write_status st = -1;
	ck_assert_int_eq(cd_proc_write(p, "1", "x", 1, &st), 0);
	ck_assert_int_eq(st, CD_WRITE_STDIN_CLOSED);
	run_to_close(l, &r);
	/* stdin was /dev/null: cat ends at once. */
	ck_assert_str_eq(r.data[CD_STREAM_STDOUT].buf, "done\n");
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_write_epipe)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, true, "exec 0<&-; echo closed; sleep 0.2");
	r.quit_at_bytes = 7;
	ck_assert(run_for(l, 5000));
	/* The reader is gone: accepted and dropped, as by Codex (EPIPE is not an error). */
	enum cd_write_status st = CD_WRITE_STDIN_CLOSED;
	ck_assert_int_eq(cd_proc_write(p, "1", "x", 1, &st), 0);
	ck_assert_int_eq(st, CD_WRITE_ACCEPTED);
	st = CD_WRITE_STDIN_CLOSED;
	ck_assert_int_eq(cd_proc_write(p, "2", "x", 1, &st), 0);
	ck_assert_int_eq(st, CD_WRITE_ACCEPTED);
	r.quit_at_bytes = 0;
	run_to_close(l, &r);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

/* ---- tty ---- */

START_TEST(test_tty)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, true, false, "tty; stty size; echo err >&2");
	run_to_close(l, &r);
	for (size_t i = 0; i < r.n; i++)
		if (r.evs[i].type == EV_OUT)
			ck_assert_int_eq(r.evs[i].stream, CD_STREAM_PTY);
	const char *out = r.data[CD_STREAM_PTY].buf;
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(strncmp(out, "/dev/pts/", 9) == 0, "tty said: %s", out);
	ck_assert_ptr_nonnull(strstr(out, "24 80"));
	ck_assert_ptr_nonnull(strstr(out, "err"));
	ck_assert_ptr_null(r.data[CD_STREAM_STDOUT].buf);
	ck_assert_int_eq(r.exit_code, 0);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_tty_write)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, true, false, "read line; echo \"got:$line\"");
	enum cd_write_status st;
	ck_assert_int_eq(cd_proc_write(p, "1", "abc\n", 4, &st), 0);
	ck_assert_int_eq(st, CD_WRITE_ACCEPTED);
	run_to_close(l, &r);
	ck_assert_ptr_nonnull(strstr(r.data[CD_STREAM_PTY].buf, "got:abc"));
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

/* ---- signals ---- */

START_TEST(test_interrupt)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p =
		start(l, &r, false, false,
		      "trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.01; done");
	r.quit_at_bytes = 6;
	ck_assert(run_for(l, 5000));
	cd_proc_interrupt(p);
	r.quit_at_bytes = 0;
	run_to_close(l, &r);
	ck_assert_str_eq(r.data[CD_STREAM_STDOUT].buf, "ready\ngot-int\n");
	ck_assert_int_eq(r.exit_code, 3);
	cd_proc_interrupt(p); /* no-op after exit */
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_terminate)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, _i == 1, false, "echo ready; exec sleep 30");
	r.quit_at_bytes = 6;
	ck_assert(run_for(l, 5000));
	bool running = false;
	cd_proc_terminate(p, &running);
	ck_assert(running);
	r.quit_at_bytes = 0;
	run_to_close(l, &r);
	ck_assert_int_eq(r.exit_code, 137);
	cd_proc_terminate(p, &running);
	ck_assert(!running);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

/* ---- late output, freeing ---- */

START_TEST(test_late_output)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false, "(sleep 0.1; echo late) & exit 0");
	run_to_close(l, &r);
	ck_assert_uint_eq(r.n, 3);
	ck_assert_int_eq(r.evs[0].type, EV_EXIT);
	ck_assert_uint_eq(r.evs[0].seq, 1);
	ck_assert_int_eq(r.evs[1].type, EV_OUT);
	ck_assert_uint_eq(r.evs[1].seq, 2);
	ck_assert_int_eq(r.evs[2].type, EV_CLOSE);
	ck_assert_uint_eq(r.evs[2].seq, 3);
	ck_assert_str_eq(r.data[CD_STREAM_STDOUT].buf, "late\n");
	struct cd_proc_read rd;
	cd_proc_read(p, 0, SIZE_MAX, &rd);
	ck_assert_uint_eq(rd.next_seq, 4);
	ck_assert(rd.exited && rd.closed);
	free(rd.chunks);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_exit_waits_for_trailing_output)
{
	/* Output written just before exit is ordered before the exit event. */
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, false, false, "head -c 200000 /dev/zero; exit 4");
	run_to_close(l, &r);
	ck_assert_uint_eq(r.data[CD_STREAM_STDOUT].len, 200000);
	ck_assert_int_eq(r.evs[r.n - 2].type, EV_EXIT);
	ck_assert_int_eq(r.exit_code, 4);
	cd_proc_free(p);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

static bool pid_gone(pid_t pid)
{
	return waitpid(pid, NULL, WNOHANG) < 0 && errno == ECHILD && kill(pid, 0) < 0 &&
	       errno == ESRCH;
}

START_TEST(test_free_running)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { 0 };
	struct cd_proc *p = start(l, &r, _i == 1, true, "exec sleep 30");
	pid_t pid = cd_proc_pid(p);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(kill(pid, 0), 0);
	cd_proc_free(p);
	/* Killed and reaped: no zombie, no process. */
	ck_assert(pid_gone(pid));
	ck_assert(!r.exited);
	/* The loop has nothing left of it. */
	ck_assert(!run_for(l, 30));
	ck_assert_uint_eq(r.n, 0);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

START_TEST(test_free_in_callback)
{
	struct cd_loop *l = new_loop(_i);
	struct rec r = { .free_in_closed = true };
	start(l, &r, false, false, "echo x");
	run_to_close(l, &r);
	rec_done(&r);
	cd_loop_free(l);
}
END_TEST

/* ---- speed: the relay hot path (read into the ring, encode) ---- */

struct speed_ctx {
	size_t bytes;
	size_t encoded;
	char enc[8192 / 3 * 4 + 8];
	bool closed;
};

static void speed_output(struct cd_proc *p, const struct cd_chunk *c, void *data)
{
	(void)p;
	struct speed_ctx *s = data;
	s->bytes += c->len;
	s->encoded += cd_base64_encode(c->data, c->len, s->enc);
}

static void speed_closed(struct cd_proc *p, uint64_t seq, void *data)
{
	(void)p;
	(void)seq;
	((struct speed_ctx *)data)->closed = true;
	cd_loop_quit(cur_loop);
}

START_TEST(test_relay_speed)
{
	struct cd_loop *l = new_loop(_i);
	static struct speed_ctx s;
	memset(&s, 0, sizeof(s));
	char *argv[] = { "head", "-c", "50000000", "/dev/zero", NULL };
	struct cd_proc_opts o = { .argv = argv, .envp = test_env };
	struct cd_proc_events ev = { .data = &s, .output = speed_output, .closed = speed_closed };
	struct cd_proc *p = NULL;
	struct cd_spawn_error err;
	uint64_t t0 = cd_loop_now_ms();
	ck_assert_int_eq(cd_proc_start(l, &o, &ev, &p, &err), 0);
	ck_assert(run_for(l, 30000));
	uint64_t dt = cd_loop_now_ms() - t0;
	ck_assert_uint_eq(s.bytes, 50000000);
	ck_assert_uint_eq(s.encoded % 4, 0);
	ck_assert_uint_ge(s.encoded, s.bytes / 3 * 4);
	fprintf(stderr, "proc (%s): relayed 50 MB (read + base64) in %llu ms: %.2f GB/s\n",
		_i ? "poll" : "epoll", (unsigned long long)dt,
		dt ? 50000000.0 / (double)dt / 1e6 : 0.0);
	cd_proc_free(p);
	cd_loop_free(l);
}
END_TEST

/* ---- sandbox denial heuristic ---- */

static const struct {
	bool sandboxed;
	int code;
	const char *out;
	bool want;
} denials[] = {
	{ true, 1, "touch: cannot touch 'x': Permission denied\n", true },
	{ true, 1, "OPERATION NOT PERMITTED", true },
	{ true, 2, "mkdir: Read-only file system", true },
	{ true, 1, "killed by seccomp", true },
	{ true, 1, "the Sandbox said no", true },
	{ true, 1, "landlock", true },
	{ true, 1, "error: failed to write file foo", true },
	{ true, 128 + SIGSYS, "", true },
	{ true, 1, "all fine, just failing", false },
	{ true, 0, "permission denied", false },
	{ false, 1, "permission denied", false },
	{ false, 128 + SIGSYS, "", false },
	{ true, 126, "cannot execute", false },
	{ true, 1, "permission  denied", false },
	{ true, 1, "", false },
};

START_TEST(test_sandbox_denied)
{
	const char *o = denials[_i].out;
	ck_assert_int_eq(cd_sandbox_denied(denials[_i].sandboxed, denials[_i].code, o, strlen(o)),
			 denials[_i].want);
}
END_TEST

static Suite *proc_suite(void)
{
	Suite *s = suite_create("proc");
	int n = (int)CD_ARRAY_SIZE(kinds);

	TCase *tc = tcase_create("basics");
	tcase_add_loop_test(tc, test_echo_seq, 0, n);
	tcase_add_loop_test(tc, test_no_output, 0, n);
	tcase_add_loop_test(tc, test_stdout_stderr, 0, n);
	tcase_add_loop_test(tc, test_exit_codes, 0, (int)CD_ARRAY_SIZE(exits));
	tcase_add_loop_test(tc, test_spawn_failure, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("ring");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_5mb_complete, 0, n);
	tcase_add_loop_test(tc, test_chunk_count_cap, 0, n);
	tcase_add_loop_test(tc, test_max_bytes, 0, n);
	tcase_add_loop_test(tc, test_lossless_holds, 0, n);
	tcase_add_loop_test(tc, test_ring_budget, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("stdin");
	tcase_add_loop_test(tc, test_write_dedup, 0, n);
	tcase_add_loop_test(tc, test_write_ids_forgotten, 0, n);
	tcase_add_loop_test(tc, test_write_large_queued, 0, n);
	tcase_add_loop_test(tc, test_write_no_stdin, 0, n);
	tcase_add_loop_test(tc, test_write_epipe, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("tty");
	tcase_add_loop_test(tc, test_tty, 0, n);
	tcase_add_loop_test(tc, test_tty_write, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("signals");
	tcase_add_loop_test(tc, test_interrupt, 0, n);
	tcase_add_loop_test(tc, test_terminate, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("lifecycle");
	tcase_add_loop_test(tc, test_late_output, 0, n);
	tcase_add_loop_test(tc, test_exit_waits_for_trailing_output, 0, n);
	tcase_add_loop_test(tc, test_free_running, 0, n);
	tcase_add_loop_test(tc, test_free_in_callback, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("speed");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_relay_speed, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("denied");
	tcase_add_loop_test(tc, test_sandbox_denied, 0, (int)CD_ARRAY_SIZE(denials));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(proc_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
