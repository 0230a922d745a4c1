/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The scan of one root of capabilityRoots/discoverV1 (discover.c), done by
 * the server itself, or by cordon-fs-helper in the root's sandbox (the
 * CD_FS_DISCOVER operation of fs-ops.h).
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/util.h"

/* Files never read, by identity (the server's hidden files). */
struct cd_discover_hidden {
	dev_t dev[4];
	ino_t ino[4];
	size_t n;
};

/*
 * The identities (device, inode) of the n files open at fds (-1: none) into
 * *h, as many as it holds: a scan then reads none of them, wherever it
 * meets them.
 */
void cd_discover_hidden_snapshot(struct cd_discover_hidden *h, const int *fds, size_t n);
/* Whether st is one of the files of h (NULL: none). */
bool cd_discover_hidden_has(const struct cd_discover_hidden *h, const struct stat *st);

/*
 * Scan the directory at path (absolute, normalised) and append to out the
 * root's result without its id and path: {"plugin":...,"skills":[...],
 * "namespaceManifests":[...],"warnings":[...],"error":...}, one line.
 * hidden may be NULL. A cancelled scan (cd_fs_cancelled) stops early.
 */
void cd_discover_scan(const char *path, const struct cd_discover_hidden *hidden,
		      struct cd_strbuf *out);
