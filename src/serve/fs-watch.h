/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * fs/watchMissing and its notification fs/missingChanged (fs-watch.c): a
 * session asks to be told, once, when paths it found missing may have
 * appeared (and when a path it found present went away), instead of
 * polling fs/getMetadata. One watch per session; a larger watchId replaces
 * it, a smaller or equal one is stale. Built on one inotify instance for
 * the server, read on the event loop; the path walks run on workers.
 */

#include <stdbool.h>

#include "core/json.h"

struct cd_conn;
struct cd_server;
struct cd_session;

void cd_fs_watch_missing(struct cd_conn *c, const char *id, const struct cd_json *params);
/* se was resumed: a notification it missed while detached is sent now. */
void cd_fs_watch_session_attached(struct cd_session *se);
/* c no longer drives se: answers of its requests in flight go nowhere. */
void cd_fs_watch_session_detached(struct cd_session *se, struct cd_conn *c);
/* se ends: its watch and its requests in flight are released. */
void cd_fs_watch_session_free(struct cd_session *se);
/* Shutdown, once every session is freed and no worker runs: the inotify instance goes. */
void cd_fs_watch_server_stop(struct cd_server *s);
/* The kernel watches the server holds (cordon/status). */
unsigned cd_fs_watch_count(void);
