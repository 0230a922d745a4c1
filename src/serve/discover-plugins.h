/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The installed plugins of capabilities/discoverV2: the packages of
 * $CODEX_HOME/plugins/cache (cache/MARKETPLACE/NAME/VERSION), each with its
 * active version and remote plugin id, as the released Codex 0.169.0 finds
 * them (see core/plugincache.h for the rules). Read by the server itself,
 * never in a request's sandbox, as the binary does.
 */

#include <stdbool.h>
#include <stddef.h>

#include "serve/discover-scan.h"

#define CD_PLUGIN_MAX_LOCATIONS 512 /* plugins and standalone roots, together */

struct cd_discover_plugin {
	char *id;	 /* "NAME@MARKETPLACE" */
	char *version;	 /* the active version directory's name */
	char *root;	 /* the package's directory joined with version */
	char *remote_id; /* NULL when none */
};

struct cd_discover_plugins {
	struct cd_discover_plugin *v; /* sorted by id */
	size_t n;
	bool warned; /* a location could not be resolved (one warning says so) */
};

/*
 * Find the plugins installed below cache (absolute). 0, or -1 with *err
 * (allocated) when the cache cannot be scanned: the request fails, as the
 * binary's does.
 */
int cd_discover_plugins_find(const char *cache, const struct cd_discover_hidden *hidden,
			     struct cd_discover_plugins *out, char **err);
void cd_discover_plugins_done(struct cd_discover_plugins *p);
