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
 * Only what the gitlinks need is read: the header, the entries, and the
 * extensions' headers (each extension but "link" is skipped by its size,
 * never read), with reads at offsets through a small window, so the memory
 * used does not grow with the file, nor the time with what lies beyond the
 * entries (a sparse file of hundreds of MiB with a valid header and one
 * unknown extension costs two reads). The bytes read come out of a budget
 * the caller gives (one per plan, across every index it reads).
 *
 * OS-free: the caller reads the files, through struct cd_git_index_src.
 */

#include <stddef.h>
#include <stdint.h>

/*
 * At most this many bytes of git indexes are read for one plan, all of them
 * together (cd_bind_input's limits may lower it): a repository of a million
 * files has about 100 MiB of entries (with names of 40 bytes on average;
 * version 4 indexes, which compress the names, less).
 */
#define CD_GIT_INDEX_BUDGET ((size_t)128 * 1024 * 1024)
/* At most this many gitlinks (submodule entries) in one index (more: refused). */
#define CD_GIT_INDEX_GITLINKS_MAX 65536
/* The longest entry name read (more: does not parse); PATH_MAX is 4096 on Linux. */
#define CD_GIT_INDEX_NAME_MAX ((size_t)64 * 1024)

struct cd_git_index {
	char **gitlinks; /* owned strv: the gitlink paths (relative, '/'-separated), maybe repeated */
	char *shared;	 /* owned: hex name of the shared index of a split index, or NULL */
	/* owned: positions in the shared index of the entries replaced by gitlinks, ascending */
	size_t *replaced;
	size_t n_replaced;
};

/* An index to read: its size, and reads at offsets. */
struct cd_git_index_src {
	void *ctx;
	uint64_t size;
	/* Read exactly len bytes at off (off + len <= size) into buf: 0, or -errno. */
	int (*read_at)(void *ctx, uint64_t off, void *buf, size_t len);
};

/* Free what ix holds and zero it. */
void cd_git_index_done(struct cd_git_index *ix);

/*
 * Read the index src holds into *ret (zeroed first). want[0..n_want)
 * (ascending, may be NULL) are positions of entries whose paths are added to
 * ret->gitlinks whatever their mode: for a shared index, its main file's
 * ret->replaced. Every byte read is taken from *budget. Borrows src and want.
 * 0; -EINVAL when src is not an index cordon can read; -ENOBUFS when the
 * bytes it needs are more than *budget has left (known from the header when
 * the number of entries alone needs more); -E2BIG when it names more than
 * CD_GIT_INDEX_GITLINKS_MAX gitlinks; a read_at() error. On failure *ret is
 * empty and *reterr a malloc()ed reason.
 */
int cd_git_index_read(const struct cd_git_index_src *src, const size_t *want, size_t n_want,
		      size_t *budget, struct cd_git_index *ret, char **reterr);

/* cd_git_index_read() of the index held in buf[0..len), without a budget. */
int cd_git_index_parse(const char *buf, size_t len, const size_t *want, size_t n_want,
		       struct cd_git_index *ret, char **reterr);
