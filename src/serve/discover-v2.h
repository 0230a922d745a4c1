/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * capabilities/discoverV2: the skills installed outside any plugin
 * ($CODEX_HOME/skills, $HOME/.agents/skills, /etc/codex/skills), each with
 * the name, description and short description of its SKILL.md front
 * matter (core/skillmd.h), within the released binary's limits. The scan
 * runs on a worker of its own pool, never on the loop; with a sandbox
 * context that restricts the file system, each root is scanned by
 * cordon-fs-helper in that sandbox (as capabilityRoots/discoverV1 does).
 *
 * What cordon cannot answer exactly as the released binary does is
 * refused, never approximated: installed plugins ($CODEX_HOME/plugins/
 * cache not empty), a skill's agents/openai.yaml naming dependencies or a
 * policy other than cd_skillmd_policy's form, a plugin manifest inside a
 * skill root cd_skillmd_namespace cannot read, front matter outside the
 * YAML subset.
 */

#include "core/json.h"

struct cd_conn;
struct cd_server;

void cd_discover_v2(struct cd_conn *c, const char *id, const struct cd_json *params);
/* Shutdown: stop the pool (scans are bounded; at most 2 s are waited for). */
void cd_discover_v2_server_stop(struct cd_server *s);
