/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Streaming reads and writes of `cordon serve` (reference 2.10: fs/open's
 * handles, fs/readBlock, fs/writeBlock, fs/close), between fs.c, which
 * opens the files (on a worker, in a sandboxed helper when asked), and
 * fs-stream.c, which keeps the handles and reads, writes and closes them,
 * on the fs workers too: a pread, a pwrite or a close (FUSE sends FLUSH) on
 * a hung file system holds a worker, never the loop. Loop thread only, but
 * where said.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"

struct cd_conn;
struct cd_server;
struct cd_workq;

/* A handle id is at most this many bytes (reference). */
#define CD_FS_HANDLE_ID_MAX 32
/* Answers are encoded in slices of this many bytes (64 KiB of base64): a multiple of 3. */
#define CD_FS_B64_SLICE (3u * 16384)

/*
 * The server's fs worker pool, made on first use; NULL once the server
 * stops (or when it cannot be made). Defined in fs.c.
 */
struct cd_workq *cd_fs_workq(struct cd_server *s);
/* A u64 member of an object, required: 0, or -EINVAL with *err set. Defined in fs.c. */
int cd_fs_param_u64(const struct cd_json *obj, const char *key, uint64_t *ret, char **err);
/* A file URI member as a path (owned): 0, or -EINVAL with *err set. Defined in fs.c. */
int cd_fs_get_path(const struct cd_json *params, const char *key, char **ret, char **err);
/*
 * Queue request q of c (takes q; performed on a worker, in the helper when
 * params has a sandbox context restricting the file system), with the
 * handle id an fs/open names. Defined in fs.c.
 */
struct cd_fs_req;
void cd_fs_submit(struct cd_conn *c, const char *id, struct cd_fs_req *q,
		  const struct cd_json *params, const char *hid, size_t hid_len);
/*
 * Whether an fs/open of this handle id is queued, or a request deferred
 * behind one: the handle's next requests wait behind it (cd_fs_defer:
 * fn(c, id, text parsed) at its turn; takes text). Defined in fs.c.
 */
bool cd_fs_open_queued(struct cd_conn *c, const char *hid, size_t len);
void cd_fs_defer(struct cd_conn *c, const char *id, const char *hid, size_t len,
		 void (*fn)(struct cd_conn *, const char *, const struct cd_json *), char *text);

/*
 * Close fd on a worker (it may block: FUSE sends FLUSH); nobody waits for
 * it. Once the server stops it is left to the process's exit.
 */
void cd_fs_close_fd(struct cd_server *s, int fd);

/* Whether c has a handle of this id open (its fs/close not handled yet). */
bool cd_fs_stream_exists(struct cd_conn *c, const char *hid, size_t len);
/*
 * Whether an fs/open of this handle id must be refused now (the id is
 * taken, or c has its 128 unfinished streams): true after answering id
 * with the error.
 */
bool cd_fs_stream_open_refused(struct cd_conn *c, const char *id, const char *hid, size_t len);
/* fs/open's file is open (for writing: write): make it a handle and answer id (takes fd). */
void cd_fs_stream_open_finish(struct cd_conn *c, const char *id, const char *hid, size_t len,
			      int fd, bool write);
/*
 * fs/writeBlock of a checked request: data[0..n) at off of handle hid, at
 * its turn among c's block and close requests (takes data).
 */
void cd_fs_stream_write(struct cd_conn *c, const char *id, const char *hid, size_t len,
			uint64_t off, unsigned char *data, size_t n);
/* Answer id with an error (takes msg), after the block and close requests queued before it. */
void cd_fs_stream_error(struct cd_conn *c, const char *id, int code, char *msg);
/* Reads or closes of c are queued or running (answers still to come). */
bool cd_fs_stream_busy(const struct cd_conn *c);
/* c has as many reads and closes waiting as it may: its next messages wait. */
bool cd_fs_stream_input_held(const struct cd_conn *c);
/* Start c's next read or close if it may (its outbound queue is under its cap). */
void cd_fs_stream_pump(struct cd_conn *c);
/*
 * The connection ends: its waiting reads and closes are dropped, its
 * handles closed (on workers), a read or close running on a worker
 * completes and its answer goes nowhere.
 */
void cd_fs_stream_release(struct cd_conn *c);
