/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The process engine of `cordon serve`: one spawned command (sandboxed or
 * not) driven by the event loop, with its output retained for replay.
 * JSON-free: the server maps these calls and events onto the protocol
 * (exec-server-reference.md 2.3-2.9).
 *
 *  - stdout and stderr are separate non-blocking pipes, read in pieces of
 *    at most 8192 bytes; in tty mode one PTY (24x80) gives the "pty" stream.
 *  - stdin is a pipe when pipe_stdin (non-tty), the PTY in tty mode, else
 *    /dev/null.
 *  - One sequence counter per process starting at 1, shared by output
 *    chunks, the exit event and the close event; close is always last.
 *  - Retained output: a ring of at most 1 MiB and 50,000 chunks; the oldest
 *    chunks are evicted. Its store (up to 2 MiB) is charged to the server's
 *    memory budget (budget.h) and grows past 64 KiB only while the budget
 *    has room. In lossless mode (cd_proc_set_lossless) chunks the client
 *    does not have yet are never evicted: the process is held instead.
 *  - Exit: 128+N for signal N. The exit event is emitted once the exit is
 *    known and either both output streams reached EOF or 20 ms have passed
 *    (trailing output); sandbox_denied is computed then (reference 8.4).
 *    Close is emitted once the exit is known and every stream hit EOF.
 *  - The child runs in its own session/process group; interrupt sends
 *    SIGINT and terminate SIGKILL to the group.
 *  - When a sandboxed command exits, the rest of its group is killed before
 *    the sandbox's finish hooks run (a survivor must not outlive the mask
 *    directories that confine it; the reference's bwrap pid namespace ends
 *    the same way). Unsandboxed commands keep their group: output after
 *    exit (a grandchild holding the pipes) gets later seqs.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/loop.h"
#include "spawn.h"

enum cd_stream {
	CD_STREAM_STDOUT,
	CD_STREAM_STDERR,
	CD_STREAM_PTY,
	CD_STREAM_COUNT,
};
const char *cd_stream_name(enum cd_stream s); /* "stdout", "stderr", "pty" */

struct cd_proc;

struct cd_chunk {
	uint64_t seq;
	enum cd_stream stream;
	/*
	 * borrowed: valid until the loop runs again or the process reads more
	 * output (the next output event); copy or encode it right away
	 */
	const unsigned char *data;
	size_t len;
};

/* Events; every callback is optional. They run from the loop. */
struct cd_proc_events {
	void *data;
	void (*output)(struct cd_proc *p, const struct cd_chunk *c, void *data);
	/* Optional: after a burst of output calls (one readiness callback). */
	void (*output_end)(struct cd_proc *p, void *data);
	void (*exited)(struct cd_proc *p, uint64_t seq, int exit_code, bool sandbox_denied,
		       void *data);
	void (*closed)(struct cd_proc *p, uint64_t seq, void *data);
	/*
	 * Lossless mode: how far the attached connection has written its
	 * stream out (0 when none is attached; positions as given to
	 * cd_proc_chunks_sent), and a change of the held state.
	 */
	uint64_t (*delivered)(struct cd_proc *p, void *data);
	void (*held)(struct cd_proc *p, bool held, void *data);
};

struct cd_proc_opts {
	char *const *argv; /* non-empty */
	const char *arg0;  /* NULL = argv[0] */
	char *const *envp; /* exact */
	const char *cwd;
	bool tty;
	bool pipe_stdin;
	const struct cd_linux_plan *lp; /* NULL: unsandboxed; borrowed only during start */
	/*
	 * Another backend's sandbox (macOS): argv is its wrapper's already
	 * (/usr/bin/sandbox-exec -p POLICY ... -- CMD) and the command counts
	 * as sandboxed, with the network given; rlimits: the limits it gets
	 * (cd_spawn_opts.rlimits), or NULL. Only without lp.
	 */
	bool wrapped;
	bool wrapped_network;
	const struct cd_limits *rlimits;
	/* The init of a sandbox's pid namespace (cd_spawn_opts.init); borrowed. */
	const struct cd_program *init;
};

/*
 * Spawn. Also sets SIGPIPE to ignored if it was at its default, so that a
 * write to a gone stdin reader fails with EPIPE instead of killing the
 * server (the spawner gives children the default back). 0 on success
 * (*ret owned by the caller: cd_proc_free); on failure -errno with err
 * filled (its msg is the one-line reason). Output events can fire only
 * from later loop iterations, never from inside this call.
 */
int cd_proc_start(struct cd_loop *l, const struct cd_proc_opts *o, const struct cd_proc_events *ev,
		  struct cd_proc **ret, struct cd_spawn_error *err);

struct cd_proc_read {
	struct cd_chunk *chunks; /* malloc'ed array (free it); data pointers borrowed */
	size_t n;
	uint64_t next_seq;
	bool exited;
	int exit_code; /* valid when exited */
	bool closed;
	bool sandbox_denied;
};

/*
 * Retained chunks with seq > after_seq, in order. max_bytes (SIZE_MAX =
 * unlimited): at least one chunk is returned when one is available; stop
 * before a chunk that would exceed the budget. next_seq: without a budget,
 * the next seq the process would allocate; with one, last returned seq + 1
 * (or the process's next seq when nothing was returned).
 */
void cd_proc_read(struct cd_proc *p, uint64_t after_seq, size_t max_bytes,
		  struct cd_proc_read *ret);

enum cd_write_status {
	CD_WRITE_ACCEPTED,
	CD_WRITE_STDIN_CLOSED,
};
/*
 * Queue bytes for stdin (pipe or PTY). write_id: the last 4096 accepted ids
 * are remembered; a repeated id is accepted without writing again. When the
 * stdin channel is gone the bytes are dropped and the write accepted, as by
 * Codex. Queued bytes are bounded (8 MiB): beyond that -ENOBUFS.
 */
int cd_proc_write(struct cd_proc *p, const char *write_id, const void *data, size_t len,
		  enum cd_write_status *ret);
/* Close stdin (EOF to the process). */
void cd_proc_close_stdin(struct cd_proc *p);

/*
 * Stop (true) or resume reading the command's output, for back-pressure
 * when the client does not keep up: the pipes fill and the command blocks.
 * Exit is still noticed; the exit event waits for EOF or the 20 ms grace.
 */
void cd_proc_pause_output(struct cd_proc *p, bool paused);

/* Lossless mode: a process is held once this much output awaits acknowledgement. */
#define CD_PROC_HOLD_BYTES (4u * 1024u * 1024u)

/*
 * Lossless mode (off by default): chunks stay in the ring until the client
 * has them, and the process is held (its output not read) once
 * CD_PROC_HOLD_BYTES of output await acknowledgement or the ring cannot take more without
 * dropping such a chunk. A chunk is acknowledged once its sending (the
 * position where it ends in the connection's stream, cd_proc_chunks_sent)
 * is delivered (events.delivered), or when the client has asked for what
 * follows it (cd_proc_ack). Besides those, the last 1 MiB of acknowledged
 * chunks is kept, as without the mode.
 */
void cd_proc_set_lossless(struct cd_proc *p, bool on);
/* Chunks first..last (seqs) were queued to the attached connection, ending at pos. */
void cd_proc_chunks_sent(struct cd_proc *p, uint64_t first, uint64_t last, uint64_t pos);
/* The client has every chunk up to seq (a process/read with afterSeq = seq, or a release). */
void cd_proc_ack(struct cd_proc *p, uint64_t seq);
/* The connection went: what it wrote out counts, what it did not is unacknowledged again. */
void cd_proc_detached(struct cd_proc *p);
/* More was delivered: release the hold if the process is under half the threshold again. */
void cd_proc_recheck(struct cd_proc *p);
/* The last seq allocated (0: none yet). */
uint64_t cd_proc_last_seq(const struct cd_proc *p);
bool cd_proc_is_held(const struct cd_proc *p);

bool cd_proc_is_exited(const struct cd_proc *p);
bool cd_proc_is_closed(const struct cd_proc *p);
pid_t cd_proc_pid(const struct cd_proc *p);
bool cd_proc_is_sandboxed(const struct cd_proc *p);
/*
 * Once the exit is known: the limit the command ran into, in one line
 * ("killed: memory limit 512 MiB reached"), and which (enum cd_limit) in
 * *ret_limit; NULL (and -1) when none. Borrowed.
 */
const char *cd_proc_limit_reason(const struct cd_proc *p, int *ret_limit);

/* SIGINT to the process group (no-op once exited). */
void cd_proc_interrupt(struct cd_proc *p);
/* SIGKILL to the process group; *running says whether it was still running. */
void cd_proc_terminate(struct cd_proc *p, bool *running);

/*
 * Kill the group if still running (and wait for it: no zombie), run the
 * sandbox's finish hooks, release fds and watches, free. NULL-safe. Safe
 * inside p's own event callbacks (the release then happens on return, and
 * no further events fire).
 */
struct cd_proc *cd_proc_free(struct cd_proc *p);
/*
 * The same without waiting: a process still running is killed and reaped
 * later by the loop (its sandbox's finish hooks then run), so that ending
 * thousands of processes, or one stuck in the kernel on a hung file system,
 * does not hold the loop. NULL-safe.
 */
struct cd_proc *cd_proc_free_async(struct cd_proc *p);
/* Shutdown, once the loop no longer runs: wait for those and finish them. */
void cd_proc_reap_zombies(void);

/*
 * The sandboxDenied heuristic (reference 8.4), pure: true when sandboxed,
 * exit_code != 0, and the output contains (case-insensitively) one of the
 * denial phrases, or exit_code is 128+SIGSYS.
 */
bool cd_sandbox_denied(bool sandboxed, int exit_code, const void *output, size_t len);

/* Standard base64 with padding (RFC 4648), used for every byte field. */
size_t cd_base64_encoded_len(size_t n);
/* Append the encoding of data[0..n) to out (no NUL); returns bytes written. */
size_t cd_base64_encode(const unsigned char *data, size_t n, char *out);
/* Strict decode (padding required, no whitespace); -EINVAL on bad input. *ret malloc'ed. */
int cd_base64_decode(const char *s, size_t len, unsigned char **ret, size_t *ret_len);
/*
 * The encoder and decoder pick the fastest implementation this CPU supports
 * ("avx512vbmi", "avx2", "ssse3" on x86-64; "scalar" everywhere) on first
 * use. For tests and benchmarks: use @name instead (NULL: back to the best);
 * -EOPNOTSUPP if this CPU or build lacks it, -EINVAL for an unknown name.
 * Not thread-safe, like the rest of the serve engine.
 */
int cd_base64_use_impl(const char *name);
/* The name of the implementation in use (static string). */
const char *cd_base64_impl(void);
