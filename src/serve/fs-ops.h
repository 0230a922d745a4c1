/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The file system operations of the fs/... methods (reference 2.10), with
 * the released binary's messages, codes and limits: performed by the
 * server itself when the request has no sandbox context, and by the
 * cordon-fs-helper program when it has one (fs-helper-main.c), which gets
 * the request and gives back the result over a socket (the wire format
 * below). Results are JSON text (the "result" member) or an error.
 *
 * Errors: ENOENT is -32004, EACCES/EPERM/EINVAL -32600, other errnos
 * -32603, all as "<strerror> (os error N)".
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/util.h"

#define CD_FS_MAX_DIR_ENTRIES  50000
#define CD_FS_WALK_MAX_DEPTH   64
#define CD_FS_WALK_MAX_DIRS    10000
#define CD_FS_WALK_MAX_ENTRIES 50000
/* The helper program, and its one argument (it refuses to run without). */
#define CD_FS_HELPER_PROGRAM "cordon-fs-helper"
#define CD_FS_HELPER_MAGIC   "cordon-fs-helper/1"
/* Reference 2.13: the code of "not found". */
#define CD_RPC_NOT_FOUND (-32004)

enum cd_fs_op {
	CD_FS_READ_FILE, /* open a regular file for reading: the result is its fd */
	CD_FS_OPEN,	 /* the same, for a streaming read */
	CD_FS_WRITE_FILE,
	CD_FS_MKDIR,
	CD_FS_METADATA,
	CD_FS_CANONICALIZE,
	CD_FS_READ_DIR,
	CD_FS_WALK,
	CD_FS_REMOVE,
	CD_FS_COPY,
	CD_FS_OPEN_WRITE, /* fs/open "replace": created or truncated, the result is its fd */
	CD_FS_DISCOVER,	  /* one root of capabilityRoots/discoverV1 (discover-scan.h) */
	CD_FS_OP_COUNT,
};

/* The name the released binary gives the params of @op ("struct WireFsCopyParams"). */
const char *cd_fs_op_params_struct(enum cd_fs_op op);

struct cd_fs_walk_opts {
	uint64_t max_depth, max_dirs, max_entries;
	bool follow, prune_hidden;
};

struct cd_fs_req {
	enum cd_fs_op op;
	char *path, *dest;   /* owned */
	unsigned char *data; /* owned, CD_FS_WRITE_FILE */
	size_t data_len;
	bool recursive, force;
	bool sandboxed; /* performed in the helper: what a sandbox may not read is not given out */
	bool durable;	/* writes: fsync the file and its directory before answering */
	struct cd_fs_walk_opts walk;
};

struct cd_fs_res {
	int code;	      /* 0 or a JSON-RPC error code */
	struct cd_strbuf out; /* the result's JSON text, or the error message */
	int fd;		      /* READ_FILE, OPEN, OPEN_WRITE: the opened file, else -1 */
	int err;	      /* the errno behind cd_fs_res_errno's error, or 0 */
};

/*
 * The cancel flag of the job this thread runs (NULL on the loop and in the
 * helper). Long operations look at it between two steps (a block copied
 * or read, a directory entry), so that a shutdown does not wait for a
 * copy of GiBs to finish: the bound is one such step.
 */
extern __thread atomic_bool *cd_fs_cur_cancel;
bool cd_fs_cancelled(void);

/* Perform q (r zeroed but r->fd = -1 before). */
void cd_fs_do(const struct cd_fs_req *q, struct cd_fs_res *r);
/*
 * Once, while the process has one thread: where there is no /proc to read
 * the umask from (macOS), it is asked now, and new files get it. Linux
 * reads it at each write and needs nothing.
 */
void cd_fs_ops_umask_init(void);
/* r becomes the error of errno e. */
void cd_fs_res_errno(struct cd_fs_res *r, int e);
void cd_fs_res_error(struct cd_fs_res *r, int code, const char *fmt, ...) CD_PRINTF(3, 4);
/* Free what q owns (its strings and data). */
void cd_fs_req_done(struct cd_fs_req *q);
/* ms since the epoch of a timespec. */
int64_t cd_fs_ms_of(const struct timespec *ts);

/* ---- the helper's wire (a SOCK_STREAM socket) ---- */

/* Send q. 0 or -errno. */
int cd_fs_req_send(int sock, const struct cd_fs_req *q);
/*
 * Receive what cd_fs_req_send sent into *q (owned by the caller then:
 * cd_fs_req_done). 0, or -errno (-EPROTO for anything malformed).
 */
int cd_fs_req_recv(int sock, struct cd_fs_req *q);
/* Send r: a header with its fd (SCM_RIGHTS) when it has one, then the text. 0 or -errno. */
int cd_fs_res_send(int sock, const struct cd_fs_res *r);
/*
 * Receive what cd_fs_res_send sent into r (code, text, fd). 0, or -errno
 * with *timed_out when the socket's receive timeout expired first.
 */
int cd_fs_res_recv(int sock, struct cd_fs_res *r, bool *timed_out);
/*
 * What is wrong with the helper's answer r to q, or NULL when nothing is.
 * The helper is cordon's own code, but it runs in the sandbox over what the
 * sandbox could prepare (files, directories, file systems): its answer is
 * not trusted. A result's text is written into the client's stream as it
 * is, so it must be one JSON object on one line; an error must carry a
 * known code (its message is escaped when written); a descriptor comes only
 * with the opens, and must be a regular file open for reading only (for
 * writing only: CD_FS_OPEN_WRITE), which the server can use without
 * blocking.
 */
const char *cd_fs_res_flaw(const struct cd_fs_req *q, const struct cd_fs_res *r);
