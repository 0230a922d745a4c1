/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * environmentConfig/read: the executor's own config.toml layers (system,
 * user, trusted project .codex/ folders, legacy managed config) and its
 * requirements.toml, each narrowed to the key paths the client asks for and
 * written back as TOML. Files are read on a worker thread, never on the
 * loop; the server's hidden files are never read.
 */

#include "core/json.h"

struct cd_conn;
struct cd_server;

void cd_envconfig_read(struct cd_conn *c, const char *id, const struct cd_json *params);
/* Shutdown: stop the pool (a read is bounded; at most 2 s are waited for). */
void cd_envconfig_server_stop(struct cd_server *s);
