/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * `cordon serve`: the exec-server protocol (exec-server-reference.md 1-2)
 * over newline-delimited JSON on stdin/stdout, over WebSocket (one message
 * per frame) or over a unix socket (newline-delimited, one connection per
 * client).
 *
 * Pieces, one file each:
 *   server.c   lifecycle, signals, the session registry, sessions and their
 *              process tables, the process events (notifications, long
 *              polls, retention)
 *   listen.c   the listeners: TCP for ws://, the unix socket, accepting,
 *              peer credentials, the pid file
 *   peer.c     the owner of a loopback TCP peer (inet_diag)
 *   admit.c    whether a loopback TCP peer is a sandboxed process, judged
 *              off the loop (sandboxes.c does the looking)
 *   conn.c     a connection: inbound messages (lines, or frames from ws.c),
 *              the outbound queue and its back-pressure, the JSON writers
 *              for replies and notifications
 *   ws.c       the WebSocket side of a connection: the HTTP upgrade (or
 *              /readyz), authentication, frames through wslay
 *   methods.c  the connection state machine and the method handlers
 *   intent.c   params decoding, the sandbox intent and the env policy
 *
 * A session (the process table) is kept apart from the connection that
 * drives it (reference 1.7): when a network connection ends, its session
 * detaches, keeps recording, and dies after the TTL unless an initialize
 * with resumeSessionId attaches it again. On stdio there is exactly one of
 * each and the end of the connection ends the server.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/json.h"
#include "core/util.h"
#include "sandbox/linux/plan.h"
#include "serve/loop.h"
#include "serve/proc.h"

/* Limits (reference 1.3, 1.4, 2.9). */
#define CD_SERVE_MAX_LINE     (64u * 1024 * 1024)
#define CD_SERVE_MAX_VALUES   262144
#define CD_SERVE_MAX_DEPTH    512
#define CD_SERVE_RETENTION_MS 30000
/* At most this many bytes in a processId (a longer one is refused). */
#define CD_SERVE_MAX_PROCESS_ID 1024
#define CD_SERVE_OUT_QUEUE_CAP	(64u * 1024 * 1024)
/* What a pipe to the client is grown to (see grow_pipe in conn.c). */
#define CD_SERVE_OUT_PIPE_SIZE	   (1024 * 1024)
#define CD_SERVE_DEFAULT_MAX_PROCS 256
/* Network transports (reference 1.2, 1.7). */
#define CD_SERVE_DEFAULT_MAX_CONNS    256
#define CD_SERVE_DEFAULT_MAX_SESSIONS 256
#define CD_SERVE_DEFAULT_SESSION_TTL  30000
#define CD_SERVE_DEFAULT_PING	      30000
#define CD_SERVE_DEFAULT_STALL	      60000
#define CD_SERVE_MAX_HTTP_HEAD	      16384
#define CD_SERVE_HANDSHAKE_MS	      10000
/* Reference 1.7: the code of "already attached to another connection". */
#define CD_RPC_SESSION_ATTACHED (-32010)

/* JSON-RPC error codes (reference 2.13). */
enum {
	CD_RPC_INVALID_REQUEST = -32600,
	CD_RPC_METHOD_NOT_FOUND = -32601,
	CD_RPC_INVALID_PARAMS = -32602,
	CD_RPC_INTERNAL = -32603,
};

enum cd_listen_kind {
	CD_LISTEN_STDIO,
	CD_LISTEN_WS,
	CD_LISTEN_UNIX,
};

struct cd_serve_opts {
	enum cd_loop_kind loop;
	unsigned max_processes;
	struct cd_linux_opts lopts;

	enum cd_listen_kind listen;
	struct sockaddr_storage ws_addr; /* ws: the address to bind */
	socklen_t ws_addr_len;
	const char *unix_path; /* unix: the socket's path */
	/*
	 * A listening socket passed by systemd (sd-daemon.h), -1: none. Then
	 * listen is CD_LISTEN_UNIX or CD_LISTEN_WS by its family (ws_addr is
	 * its address) and nothing is bound or removed.
	 */
	int activated_fd;
	char activated_name[256]; /* its LISTEN_FDNAMES entry, or "" */
	char *notify_socket;	  /* NOTIFY_SOCKET (owned; used by pidns.c), NULL: none */
	bool unix_group_set;	  /* unix: members of unix_group may connect too */
	gid_t unix_group;
	char *auth_token;	     /* ws: the bearer token (NULL: none) */
	const char *auth_token_file; /* where it was read: hidden from every sandbox */
	size_t auth_token_len;
	bool insecure_no_auth;
	/*
	 * ws on a loopback address without a token: admit only peers whose
	 * socket is owned by our uid (peer.c), or by a member of
	 * allow_local_group; allow_local_users admits every local user.
	 */
	bool check_peer_owner;
	/*
	 * ws on a loopback address without a token (check_peer_owner or
	 * --allow-local-users): look each peer's socket up, so that a process
	 * of one of our sandboxes, our uid, is refused (sandboxes.h).
	 */
	bool check_peer_sandbox;
	bool allow_local_users;
	bool allow_local_group_set;
	gid_t allow_local_group;
	unsigned max_connections;
	unsigned max_sessions;
	size_t max_queued_bytes; /* per connection */
	size_t max_memory;	 /* the memory budget (budget.h) */
	bool lossless;		 /* --detached-output=pause: lossless resume (server.c) */
	unsigned retention_ms;	 /* a closed process is kept this long (at least) */
	bool durable_writes;	 /* fs writes fsync'ed (fs-ops.c) */
	unsigned session_ttl_ms; /* a detached session lives this long */
	unsigned ping_ms;	 /* ws: a ping this often */
	unsigned stall_ms;	 /* a connection over its queue cap that writes nothing this
				      long is dropped */
	const char *pid_file;	 /* written once listening, removed at exit */
	pid_t pid_file_pid;	 /* the pid it holds (the outer process of pidns.c) */
	/*
	 * Resource limits (core/limits.h) for every process/start: the
	 * defaults of what a request does not ask, and the maximums it may
	 * ask (a limit with a maximum is always bounded). Empty: none.
	 */
	struct cd_limits default_limits;
	struct cd_limits max_limits;
	/*
	 * http/request (http.h): served only with --allow-http-request, and to
	 * loopback addresses only with --http-allow-loopback as well.
	 */
	bool http_allow;
	bool http_allow_loopback;
};

/* Fill the defaults of everything but loop, lopts and the transport. */
void cd_serve_opts_init(struct cd_serve_opts *o);

/*
 * Run the server until stdin ends (stdio) or a signal (SIGTERM, SIGINT,
 * SIGHUP); the exit code.
 */
int cd_serve(const struct cd_serve_opts *o);
/*
 * After cd_serve: a worker did not stop at shutdown (a system call stuck
 * on a hung file system) and may still run. The caller must free nothing
 * it gave cd_serve (the options and what they point to), and exit.
 */
bool cd_serve_workers_left(void);

/* SIGHUP was ignored when cordon started (nohup): the server leaves it ignored. */
bool cd_serve_sighup_ignored(void);

/* --pid-namespace (pidns.c) */
enum cd_pidns_mode {
	CD_PIDNS_AUTO,	 /* when running as root, if the kernel allows it */
	CD_PIDNS_ALWAYS, /* or fail */
	CD_PIDNS_NEVER,
};

/*
 * Make the server the init (pid 1) of a new pid namespace, so that nothing
 * it started outlives it, under an outer process that forwards SIGTERM,
 * SIGINT and SIGHUP and reports the server's exit status. Call before the
 * loop exists (one fork). With notify_socket (borrowed), the outer relays the
 * server's sd_notify messages to it (cd_serve_notify_fd). Returns 0 in the
 * process that goes on to serve
 * (the namespace's init, or the only process when none is made), -1 on
 * failure (message printed, *exit_code: 125). The outer does not return: it
 * exits with the server's status (128+N for signal N) once the server ended.
 */
int cd_serve_pidns(enum cd_pidns_mode mode, const char *notify_socket, int *exit_code);
/*
 * With a NOTIFY_SOCKET (sd-daemon.h): in the server, the packet pipe
 * (O_DIRECT) through which it hands its sd_notify messages to the outer
 * process of cd_serve_pidns, which sends them to systemd. The outer is the
 * process systemd started (the main pid), so the units need no
 * NotifyAccess=all, and no command the server runs can notify in its name.
 * -1: none.
 */
extern int cd_serve_notify_fd;

/* ---- internals shared by the serve sources ---- */

struct cd_server;
struct cd_session;
struct cd_conn;
struct cd_workq;
struct cd_work;
struct cd_admit;
struct cd_start;
struct cd_parse;
struct cd_fs_watch_state;
struct cd_netproxy;

/* One process of a session: the table entry around a struct cd_proc. */
struct cd_pentry {
	struct cd_session *session;
	struct cd_pentry *next; /* hash chain */
	char *id;		/* the client's processId, decoded (may hold NULs) */
	size_t id_len;
	char *id_json; /* the id as a JSON string literal, ready to paste */
	size_t id_json_len;
	struct cd_proc *proc;	    /* NULL while starting */
	struct cd_timer *retention; /* armed once closed: removes the entry */
	/*
	 * A process/start accepted and being prepared off the loop (methods.c):
	 * the id is taken, the process does not exist yet.
	 */
	struct cd_start *starting;
	/* networkProxy: its proxy, until the process is closed (netproxy.h) */
	struct cd_netproxy *netproxy;
	bool expired;	     /* its retention ended while the session was detached */
	uint64_t attach_seq; /* its last seq when the session was last attached */
};

struct cd_session {
	struct cd_server *server;
	struct cd_session *prev, *next; /* the registry */
	char id[37];			/* UUID v4 */
	struct cd_conn *conn;	/* attached connection, or NULL (notifications are dropped) */
	struct cd_conn *linger; /* a detached connection still answering a long poll */
	struct cd_timer *ttl;	/* armed while detached: the session ends */
	struct cd_pentry **buckets;
	size_t n_buckets; /* power of two */
	size_t n_procs;
	/*
	 * Ended (cd_session_free): out of the registry, its processes freed a
	 * slice per loop iteration (drain), on the server's draining list.
	 */
	bool ending;
	struct cd_timer *drain;
	size_t drain_bucket;
	struct cd_session *drain_next;
	bool lossless;		 /* its processes are held rather than lose output (server.c) */
	unsigned n_held;	 /* processes held (cd_proc_is_held) */
	struct cd_timer *replay; /* after a resume: output from before it stops being kept */
	struct cd_fs_watch_state *fs_watch; /* fs/watchMissing (fs-watch.c), NULL: never used */
};

/* A long-poll process/read waiting for its process or its deadline. */
struct cd_pending_read {
	char *req_id; /* JSON text of the request id */
	struct cd_pentry *entry;
	uint64_t after_seq;
	size_t max_bytes;
	struct cd_timer *timer;
};

enum cd_conn_kind {
	CD_CONN_STDIO,
	CD_CONN_UNIX, /* lines, like stdio */
	CD_CONN_WS,   /* messages are frames (ws.c) */
};

struct cd_ws;

/* Where a WebSocket connection is in its handshake (listen.c counts them). */
enum cd_handshake {
	CD_HANDSHAKE_NONE,     /* upgraded, or not WebSocket */
	CD_HANDSHAKE_ADMITTED, /* waiting for its request; takes a --max-connections slot */
	CD_HANDSHAKE_REFUSED,  /* its peer is refused (403 when its request comes) */
};

/*
 * Discovery scans (capabilityRoots/discoverV1, capabilities/discoverV2) and
 * environmentConfig/read requests waiting on one connection, each counter:
 * each holds its parsed request, and their workers are few.
 */
#define CD_CONN_SCANS_MAX 16
_Static_assert(CD_CONN_SCANS_MAX == 16, "the refusals in discover*.c and envconfig.c say 16");

struct cd_conn {
	struct cd_server *server;
	struct cd_conn *prev, *next; /* the server's connections */
	enum cd_conn_kind kind;
	unsigned long serial; /* "connection N" in logs */
	char peer[80];	      /* who it is, for logs */
	char ws_addr[64];     /* WebSocket: the client's address alone, as wire messages name it */
	char refused[512];    /* ws: why its peer is not admitted (403), or empty */
	bool judging;	      /* ws: its peer is being looked for in the sandboxes */
	enum cd_handshake handshake;
	bool refused_busy;	    /* ws: refused because of --max-connections (503, not 403) */
	struct cd_session *session; /* set by a successful initialize */
	bool initialize_done;	    /* initialize succeeded */
	bool initialized;	    /* the initialized notification arrived */
	struct cd_parse *parsing;   /* a large message parsed off the loop: the rest waits */
	bool evicted;		    /* its session was resumed by another connection */
	bool freed;		    /* cd_conn_close ran: the free is scheduled */

	int in_fd, out_fd;
	struct cd_watch *in_watch, *out_watch;
	struct cd_timer *in_pump; /* stdin is a regular file: read from a timer */
	bool in_is_file;	  /* stdin cannot be polled */
	bool out_watching;	  /* out_watch has OUT enabled (data queued, fd was full) */
	bool out_is_file;	  /* stdout cannot be polled: write synchronously */
	bool pipe_grown;	  /* grow_pipe ran (conn.c) */
	bool in_eof;
	bool out_broken;    /* write failed: the client is gone */
	bool out_lent;	    /* a worker writes one answer to out_fd itself (cd_conn_out_lend) */
	bool closing;	    /* the connection ends: no more lines are processed */
	int batch;	    /* > 0: appends do not flush (flushed once at the end) */
	bool output_paused; /* the queue is over its cap: process output is not read */

	char *in_buf;
	size_t in_start, in_len, in_cap; /* unprocessed bytes are in_buf[in_start..in_len) */
	size_t in_scan;			 /* no '\n' in in_buf[in_start..in_scan) */

	struct cd_strbuf out;
	size_t out_off; /* bytes of out already written */

	struct cd_pending_read *pending;
	/* A process/start being prepared off the loop: the requests behind it wait. */
	struct cd_start *start;
	struct cd_timer *resume; /* deferred line processing after a long poll ended */
	/* The message being handled (handle_line): a handler may take it (owned). */
	struct cd_json *cur_msg;

	/* fs/open's handles, their reads and closes (fs-stream.c) */
	struct cd_fs_streams *fs_streams;
	struct cd_fs_queue *fs_queue; /* fs requests queued or running (fs.c) */
	unsigned n_discover;	      /* capabilityRoots/discoverV1 not answered (discover.c) */
	unsigned n_envconfig;	      /* environmentConfig/read not answered (envconfig.c) */

	size_t out_cap;		/* back-pressure above this many queued bytes (update_cap) */
	size_t mem_queued;	/* charged to the budget: the queue */
	size_t mem_inbound;	/* charged to the budget: in_buf */
	uint64_t out_committed; /* bytes ever queued: the stream's position */
	uint64_t out_consumed;	/* bytes ever taken from the queue (written, or framed) */
	size_t kernel_unread;	/* lossless: SIOCOUTQ after the last write */
	bool delivered_frozen;	/* closing: cd_conn_delivered is delivered_final */
	uint64_t delivered_final;
	uint64_t delivered_seen; /* lossless: cd_conn_delivered when held processes last looked */
	uint64_t lent_from;	 /* out_consumed when the stream was lent (cd_conn_out_lend) */
	struct cd_timer *unread_poll; /* lossless: looks at kernel_unread again */
	struct cd_timer *stall;	      /* over the cap: nothing was written for stall_ms */
	struct cd_timer *reaper;      /* frees a closed connection from a fresh iteration */
	struct cd_ws *ws;	      /* CD_CONN_WS */
};

struct cd_server {
	struct cd_loop *loop;
	struct cd_serve_opts opts;
	struct cd_linux_host host; /* probed once at start */
	char *env_info;		   /* environmentInfo object, JSON text */
	bool adopts_orphans;	   /* pid 1 or a child subreaper: orphans come to us */
	bool stopping;		   /* a signal or the end of stdio: the loop quits */
	/*
	 * At shutdown, a pool of workers did not stop in time (a job stuck on
	 * a hung file system; cd_workq_free): nothing is freed from then on.
	 */
	bool workers_left;
	struct cd_conn *conns;
	unsigned n_conns;
	unsigned n_live;		 /* connections not closed (n_conns: not yet freed) */
	unsigned n_handshakes;		 /* of those, ws ones in their handshake... */
	unsigned n_refused_handshakes;	 /* ...and ones whose peer is refused (listen.c) */
	int reserve_fd;			 /* given up to answer a connection when out of fds */
	bool accept_paused;		 /* out of descriptors: the listener is not watched */
	struct cd_timer *fd_retry;	 /* listen again then */
	unsigned long fd_shortages;	 /* accept() found no descriptor (times) */
	unsigned long fd_refused;	 /* connections refused for it */
	uint64_t fd_logged_at;		 /* when that was last logged */
	unsigned long long nofile_limit; /* RLIMIT_NOFILE (soft) at start */
	unsigned long busy_refused;	 /* connections refused for --max-connections */
	uint64_t busy_logged_at;	 /* when that was last logged */
	unsigned long next_serial;
	struct cd_session *sessions;
	unsigned n_sessions;
	struct cd_session *draining; /* ended sessions whose processes are being freed */
	int listen_fd;
	struct cd_watch *listen_watch;
	char *unix_bound;	   /* the socket path we created (removed at exit) */
	char *unix_activated;	   /* the path of a socket systemd passed (hidden, kept) */
	char where[160];	   /* what we listen on, for systemd's STATUS= */
	bool notified_ready;	   /* READY=1 was sent (then STOPPING=1 at the end) */
	struct cd_workq *fs_workq; /* fs.c's worker threads, started on first use */
	struct cd_admit *admit;	   /* admit.c: TCP clients judged off the loop */
	/*
	 * Work of the loop's own done elsewhere (cd_server_prep_workq): parsing
	 * large messages (conn.c), process/start's env and binding (methods.c).
	 */
	struct cd_workq *prep_workq;
	/* cordon-init, the init of every sandboxed process's pid namespace (opts.lopts names it). */
	struct cd_program init;
	/* cordon-fs-helper, which performs sandboxed fs requests (fs.c), and their plans' options. */
	struct cd_program fs_helper;
	struct cd_linux_opts fs_lopts;
	/*
	 * The server's own files, masked in every sandbox it makes (the unix
	 * socket, the token file), as the plans' cd_linux_opts.hidden: see
	 * cd_server_hidden_check. Paths owned.
	 */
	struct cd_hidden_path hidden[2];
	int hidden_fd[2];    /* O_PATH: the very file found at start (-1: a socket on macOS) */
	bool hidden_lost[2]; /* no longer there as found (logged once) */
	size_t n_hidden;
	bool pid_file_written;
	int exit_code;
};

/* server.c */
/* A new session in the registry, attached to c; NULL when the registry is full. */
struct cd_session *cd_session_new(struct cd_server *s, struct cd_conn *c);
/*
 * Remove from the registry and end every process: while the loop runs, a
 * slice at a time (SESSION_DRAIN in server.c), so that a session of 10,000
 * processes does not hold the loop; at shutdown, all at once.
 */
void cd_session_free(struct cd_session *se);
/* Shutdown: finish the sessions still being drained. */
void cd_session_drain_all(struct cd_server *s);
struct cd_session *cd_session_lookup(struct cd_server *s, const char *id, size_t len);
/* Attach a detached session to c (cancels its TTL, evicts a lingering connection). */
void cd_session_attach(struct cd_session *se, struct cd_conn *c);
/* c no longer drives se: notifications stop, the TTL starts (stdio: nothing). */
void cd_session_detach(struct cd_session *se, struct cd_conn *c);
/* A started process by id (NULL also while it is being started). */
struct cd_pentry *cd_session_find(struct cd_session *se, const char *id, size_t len);
/* Whether the id is taken: a process started or being started. */
bool cd_session_has(struct cd_session *se, const char *id, size_t len);
/* Take id for a process about to be started (counts against --max-processes). */
struct cd_pentry *cd_session_reserve(struct cd_session *se, const char *id, size_t id_len);
/* Give a reserved id back (its start failed or was dropped); frees e. */
void cd_session_unreserve(struct cd_pentry *e);
/*
 * Start the process of a reserved entry. 0; or -1 with *err the message
 * (the caller frees) and *ret_code the JSON-RPC code, the entry freed.
 */
int cd_session_start(struct cd_pentry *e, const struct cd_proc_opts *o, int *ret_code, char **err);
/* Stop or resume reading every process's output (back-pressure). */
void cd_session_pause_output(struct cd_session *se, bool paused);
/* The attached connection wrote more out: processes held in lossless mode may go on. */
void cd_session_delivered(struct cd_session *se);
/* Answer a long poll now if it can be answered; true when answered (p is freed then). */
bool cd_pending_try_complete(struct cd_conn *c, bool deadline);
/* Drop c's long poll, if any, unanswered (its deadline timer too). */
void cd_pending_drop(struct cd_conn *c);
/* Write a ReadResponse for (entry, after, max) as the result of request req_id. */
void cd_reply_read(struct cd_conn *c, const char *req_id, struct cd_pentry *e,
		   const struct cd_proc_read *r);
/* The conditions under which a read returns without waiting (reference 2.4). */
bool cd_read_is_ready(const struct cd_proc_read *r, uint64_t after_seq);
/*
 * The pool of workers for the loop's own heavy steps (started on first
 * use), or NULL when none can be had: the caller then does the work itself.
 */
struct cd_workq *cd_server_prep_workq(struct cd_server *s);
/* End the server (connection gone, signal): quits the loop. */
void cd_server_stop(struct cd_server *s);
/*
 * Whether the server's own files (hidden[], masked in every sandbox it
 * makes) are each still the file found at start, at the same canonical
 * path: 0, or -ESTALE with *reterr (malloc()ed, for the client) when one is
 * not (moved, replaced, removed), and the sandbox must not be made (a mask
 * on the path would no longer cover the file). ret_why (NULL, or
 * n_hidden entries): per file, NULL or why not (static strings), for
 * cd_server_hidden_note. Path walks (realpath, lstat) that a hung mount
 * holds: never on the loop. Any thread: reads only what is set at start.
 * The spawner checks again, without a walk of its own, that the mask
 * goes on the very file (cd_hidden_path.has_id).
 */
int cd_server_hidden_check(const struct cd_server *s, const char **ret_why, char **reterr);
/* On the loop: log each change a check found (ret_why above), once. */
void cd_server_hidden_note(struct cd_server *s, const char *const *why);
/*
 * The host's /proc, opened by pidns.c before the server's own pid
 * namespace got a /proc of its own, or -1: the sandbox judgements of
 * clients outside that namespace need it (sandboxes.h).
 */
extern int cd_serve_host_proc;

/* conn.c */
/*
 * The connection c, if it is still in the server's list with that serial
 * (a worker's job remembers both: the memory of a connection freed since
 * may hold another), freed or not; else NULL.
 */
struct cd_conn *cd_conn_listed(struct cd_server *s, struct cd_conn *c, unsigned long serial);
/*
 * Submit w, a discovery or configuration job of c holding its request, to
 * pool: at most CD_CONN_SCANS_MAX wait per connection, counted in *waiting
 * (the job's done callback decrements it). 0, or -1 with the error answered
 * to id (-32600 past the bound, -32603 unavailable); the caller frees w.
 */
int cd_conn_submit_scan(struct cd_conn *c, const char *id, unsigned *waiting, struct cd_workq *pool,
			struct cd_work *w, const char *unavailable);
/* A connection over in_fd/out_fd (kind STDIO), or over a socket (both fds its own). */
struct cd_conn *cd_conn_new(struct cd_server *s, enum cd_conn_kind kind, int in_fd, int out_fd);
void cd_conn_free(struct cd_conn *c);
/* The connection is over: detach its session and free it from a fresh loop iteration. */
void cd_conn_close(struct cd_conn *c, const char *why);
/* A client that stopped reading is dropped: nothing more is written, the socket is reset. */
void cd_conn_abort(struct cd_conn *c, const char *why);
/* A complete inbound message (ws.c): queued, processed in order. */
void cd_conn_push_message(struct cd_conn *c, const void *msg, size_t len);
/* Bytes queued in the outbound queue and not yet written. */
size_t cd_conn_out_queued(const struct cd_conn *c);
/* The position in the outbound stream (out_committed) up to which everything was written. */
uint64_t cd_conn_delivered(const struct cd_conn *c);
/* The outbound queue made progress (ws.c): back-pressure and the stall timer. */
void cd_conn_out_progress(struct cd_conn *c);
/* Re-evaluate what the connection watches (after ws.c changed its wants). */
void cd_conn_update_watches(struct cd_conn *c);

/* ws.c (only with CD_WEBSOCKET) */
struct cd_ws *cd_ws_new(struct cd_conn *c);
void cd_ws_free(struct cd_ws *w);
/* The socket is readable: the HTTP head, then frames. */
void cd_ws_on_input(struct cd_conn *c);
/* Frame and send what the outbound queue holds: 0 all out, -EAGAIN, other -errno. */
int cd_ws_flush(struct cd_conn *c);
/* Bytes handed to wslay and not yet sent. */
size_t cd_ws_queued(const struct cd_conn *c);
/* Lossless sessions: how far the client has read, as its pongs to ack pings say. */
uint64_t cd_ws_delivered(const struct cd_conn *c);
/* Whether reading the socket is wanted now (handshake, frames, not over the inbound cap). */
bool cd_ws_want_read(const struct cd_conn *c);
/* Whether the upgrade happened (JSON-RPC messages may flow). */
bool cd_ws_is_open(const struct cd_conn *c);
/* Queue a close frame (going away) and try to send it. */
void cd_ws_close(struct cd_conn *c);
/*
 * For cd_conn_out_lend: everything wslay holds and the lines queued in
 * c->out, as the raw frames they make, into raw (c->out is emptied). -1
 * when the stream cannot be lent (not upgraded, closing, or broken).
 */
int cd_ws_take_pending(struct cd_conn *c, struct cd_strbuf *raw);

/* listen.c */
/* Bind and listen (ws: TCP; unix: the socket), print the ws URL, write the pid file. */
int cd_listen_start(struct cd_server *s);
void cd_listen_stop(struct cd_server *s);
/* Connections past their handshake (ws), or all (unix). */
unsigned cd_listen_established(const struct cd_server *s);

/* admit.c */
/*
 * Look for c's TCP peer (its socket's inode) in the sandboxes, off the
 * event loop (sandboxes.h): c->judging holds c in its handshake until the
 * verdict, which fills c->refused unless the peer is outside every sandbox.
 */
void cd_admit_tcp(struct cd_conn *c, uint64_t inode);
/* At shutdown, before cd_sandboxes_done: stop the look, drop what waits. */
void cd_admit_stop(struct cd_server *s);
/* c leaves its handshake (upgraded, or closed): it no longer counts as one. */
void cd_listen_handshake_done(struct cd_conn *c);
/* A descriptor was freed: accept again if out-of-descriptors paused it. */
void cd_listen_resume(struct cd_server *s);
/* Reply helpers: one complete JSON line each. */
void cd_conn_result(struct cd_conn *c, const char *id, const char *result, size_t len);
void cd_conn_error(struct cd_conn *c, const char *id, int code, const char *msg);
/* Reserve n bytes at the end of the outbound queue; commit what was written. */
char *cd_conn_out_reserve(struct cd_conn *c, size_t n);
void cd_conn_out_commit(struct cd_conn *c, size_t n);
/*
 * Write what is queued, even a partial message, without blocking, on a
 * byte-stream transport (nothing on WebSocket). An emptied queue starts
 * over: reserve again after it.
 */
void cd_conn_out_push(struct cd_conn *c);
/*
 * Lend the stream to a worker that writes one whole answer to it itself
 * (fs/readFile): a dup of out_fd, with what the queue held unwritten
 * moved into *pending (on WebSocket as the raw frames it makes), which
 * the worker writes first. Until cd_conn_out_return nothing else is
 * written: answers and notifications queue (and back-pressure applies as
 * usual). -1 when the connection is ending.
 */
int cd_conn_out_lend(struct cd_conn *c, struct cd_strbuf *pending);
/*
 * The worker is through with the stream (its answer is all out). broken:
 * why the stream cannot go on (the client is gone, or an answer was left
 * unfinished), and the connection ends.
 */
void cd_conn_out_return(struct cd_conn *c, const char *broken);
/* Best effort: a pipe to the client is grown to CD_SERVE_OUT_PIPE_SIZE (see conn.c). */
void cd_out_grow_pipe(int fd);
/* Flush now if allowed (not batching, not blocked); called after appends. */
void cd_conn_kick(struct cd_conn *c);
/* Process buffered lines (after a long poll ended). */
void cd_conn_process(struct cd_conn *c);
/* Schedule cd_conn_process from a fresh loop iteration. */
void cd_conn_schedule_process(struct cd_conn *c);
/* Best-effort bounded blocking flush at shutdown. */
void cd_conn_final_flush(struct cd_conn *c, int timeout_ms);

/* JSON text writers. */
/* An absolute path as a file:// URI string; anything else (NULL, relative) as null. */
void cd_json_write_path_uri(struct cd_strbuf *sb, const char *path);
/* A JSON string (cd_strbuf_append_json_string: invalid UTF-8 becomes U+FFFD). */
static inline void cd_json_write_cstr(struct cd_strbuf *sb, const char *s)
{
	cd_strbuf_append_json_string(sb, s, strlen(s));
}
/* Decimal u64 into buf (at least 20 bytes); returns the length. */
size_t cd_fmt_u64(char *buf, uint64_t v);

/* methods.c */
/* The entry of a start in flight is gone (its session ended): the start is dropped. */
void cd_start_orphan(struct cd_start *st);
/*
 * The connection of a start in flight no longer answers it (it ends, or
 * its session was resumed elsewhere: why, the error it gets then, or
 * NULL): the process still starts, unanswered, in its session.
 */
void cd_start_conn_gone(struct cd_start *st, const char *why);
/* Shutdown: wait for the preparations running (at most 2 s), drop the others. */
void cd_start_server_stop(struct cd_server *s);
/* One request: id is the JSON text of the id; params may be NULL (missing). */
void cd_methods_request(struct cd_conn *c, const char *id, const char *method,
			const struct cd_json *params);
/* A notification; returns false when the connection must close. */
bool cd_methods_notification(struct cd_conn *c, const char *method);
/*
 * The i-th method of the table, and how many requests of it were handled
 * (past the handshake's checks); false past the end. Loop thread only.
 */
bool cd_methods_counter(size_t i, const char **ret_name, uint64_t *ret_count);
