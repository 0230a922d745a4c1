/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The submodule paths a git index names: its gitlink entries (mode 160000).
 * They, not .gitmodules, are what `git status`, `git diff` and the other
 * porcelain recurse into: a gitlink whose directory holds a .git is treated
 * as a checked-out submodule, its repository opened and its configuration
 * (core.fsmonitor, hooks) honoured, whatever .gitmodules says. .gitmodules
 * lies in the work tree; the index lies in the (protected) git directory.
 *
 * Formats read: versions 2, 3 and 4 (prefix-compressed names), SHA-1 and
 * SHA-256 object names (told apart by which one makes the whole file parse:
 * the index does not record it), and split indexes: the "link" extension
 * names a shared index ("sharedindex.<name>" in the git directory) holding
 * most entries, and replaces some of them with entries of the main file,
 * which then have no name of their own (an EWAH bitmap says which). The
 * trailing checksum is not verified (a protected file; git checks it).
 *
 * OS-free: the caller reads the files.
 */

#include <stddef.h>

/* At most this many bytes of an index are read (larger: refused). */
#define CD_GIT_INDEX_MAX ((size_t)256 * 1024 * 1024)

struct cd_git_index {
	char **gitlinks; /* owned strv: the gitlink paths (relative, '/'-separated), maybe repeated */
	char *shared;	 /* owned: hex name of the shared index of a split index, or NULL */
	/* owned: positions in the shared index of the entries replaced by gitlinks, ascending */
	size_t *replaced;
	size_t n_replaced;
};

/* Free what ix holds and zero it. */
void cd_git_index_done(struct cd_git_index *ix);

/*
 * Parse an index held in buf[0..len) into *ret (zeroed first). want[0..n_want)
 * (ascending, may be NULL) are positions of entries whose paths are added to
 * ret->gitlinks whatever their mode: for a shared index, its main file's
 * ret->replaced. 0, or -EINVAL when buf is not an index cordon can read
 * (*ret empty, *reterr a malloc()ed reason).
 */
int cd_git_index_parse(const char *buf, size_t len, const size_t *want, size_t n_want,
		       struct cd_git_index *ret, char **reterr);
