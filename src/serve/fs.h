/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The fs/... methods of `cordon serve` (reference 2.10): each handler answers
 * at once. A request with a sandbox context that restricts the file system
 * is performed in a sandboxed helper (see fs.c); streaming reads open the
 * file there and read it here.
 */

#include "core/json.h"

struct cd_conn;

void cd_fs_read_file(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_write_file(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_create_directory(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_get_metadata(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_canonicalize(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_read_directory(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_walk(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_remove(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_copy(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_open(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_read_block(struct cd_conn *c, const char *id, const struct cd_json *params);
void cd_fs_close(struct cd_conn *c, const char *id, const struct cd_json *params);
/* Close every open read handle of the connection (it ends). */
void cd_fs_conn_release(struct cd_conn *c);
