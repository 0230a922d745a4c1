/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * capabilityRoots/discoverV1 (reference 2.12): for each root the client
 * names, the plugin manifest, its MCP and apps files, the plugin manifests
 * below it (and the nearest one above it), and every SKILL.md with its
 * agents/openai.yaml, read as UTF-8 text, within the released binary's
 * limits. The scan runs on a worker thread of its own pool, never on the
 * loop; the answer is dropped when the connection is gone by then.
 */

#include "core/json.h"

struct cd_conn;
struct cd_server;

void cd_discover_roots_v1(struct cd_conn *c, const char *id, const struct cd_json *params);
/* Shutdown: stop the pool (running scans are bounded; at most 2 s are waited for). */
void cd_discover_server_stop(struct cd_server *s);
