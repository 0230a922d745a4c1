/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The fs/... methods of `cordon serve` (reference 2.10). A request that may
 * take long (a copy, a remove, a walk, reading or writing a file, anything
 * sandboxed) is performed on a worker thread and answered from the loop
 * when done; a connection's fs requests are performed and answered in the
 * order they came, its other requests meanwhile. A request with a sandbox
 * context that restricts the file system is performed in a sandboxed
 * helper (see fs.c); streaming reads open the file there and read it here,
 * on the workers too (fs-stream.c).
 */

#include <stdbool.h>

#include "core/json.h"

struct cd_conn;
struct cd_server;

void cd_fs_read_file(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_write_file(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_create_directory(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_get_metadata(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_canonicalize(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_read_directory(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_walk(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_remove(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_copy(struct cd_conn *c, const char *id, const struct cd_json *params);
/* fs/open, with its modes, and fs/writeBlock: fs-write.c. */
void cd_fs_open(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_write_block(struct cd_conn *c, const char *id, const struct cd_json *params);
/*
 * Why the released binary refuses base64 text s (its message: "Invalid symbol
 * 33, offset 0."), for text cd_base64_decode refused. malloc()ed.
 */
char *cd_base64_refusal(const char *s, size_t len);
void cd_fs_write_block_in_order(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_read_block(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_close(struct cd_conn *c, const char *id, const struct cd_json *params);
/* fs/readBlock and fs/close, behind an fs/open of the same handle that is still queued. */
void cd_fs_read_block_in_order(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_close_in_order(struct cd_conn *c, const char *id, const struct cd_json *params);
/*
 * Close every open file handle of the connection (it ends) and drop its fs
 * requests: the running one's answer is discarded, the queued ones are not
 * performed.
 */
void cd_fs_conn_release(struct cd_conn *c);
/* Fs requests of c are queued or running (the end of its input waits for their answers). */
bool cd_fs_conn_busy(const struct cd_conn *c);
/*
 * c has as many fs/readBlock and fs/close requests waiting as it may: its
 * next messages are not handled until one is answered (cd_conn_process is
 * scheduled then).
 */
bool cd_fs_conn_input_held(const struct cd_conn *c);
/* Start c's next queued fs requests if they may (its outbound queue is under its cap again). */
void cd_fs_conn_pump(struct cd_conn *c);
/*
 * Shutdown: drop every connection's queued fs requests, cancel the running
 * ones and wait for them, at most 2 s (see FS_STOP_MS in fs.c).
 */
void cd_fs_server_stop(struct cd_server *s);
