/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Binding and precedence: a profile plus this host's facts (cwd, workspace
 * roots, $TMPDIR, a file-system shim) becomes a plan: a sorted list of
 * canonical absolute paths, each with its effective access and the reason.
 * OS-free: every file-system question goes through struct cd_fs_ops, so the
 * rules are unit-tested against a fake tree.
 *
 * Rules (design.md 3, reference 3.3 and 3.5):
 *  - :workspace_roots binds only to the given roots (none given: the entries
 *    vanish, with a note); :tmpdir to $TMPDIR when set, non-empty, absolute;
 *    :slash_tmp to /tmp when it is a directory; :root to "/"; :minimal to the
 *    platform's existing system directories; unknown kinds are ignored with
 *    a note.
 *  - Every bound path is canonicalised by walking it one component at a time
 *    (lstat + readlink through the shim, at most 40 links). The walk records
 *    every symlink it crosses. If a crossed symlink lies inside a region the
 *    plan makes writable, the sandboxed side could have planted it: the plan
 *    is refused ("crosses symlink L inside writable root W").
 *  - Most specific entry wins (more components); ties deny > write > read;
 *    no match is deny.
 *  - Protected metadata: under every writable path other than "/", the names
 *    .git, .codex and .agents are read-only unless an entry with write access
 *    names that exact path; a ".git" file holding "gitdir: X" protects X (and
 *    X's "commondir" target) too. Missing names are protected as well
 *    (type CD_FT_MISSING: the backend masks them so they cannot be created).
 *    A protected name that is a symlink is refused. A missing name in a
 *    directory the caller could not create it in (ops->may_create) is left
 *    alone: neither can the sandbox, which runs as the caller (and the mask
 *    would need its mount point made there). "Writable" here means
 *    writable through a rule other than "/" itself (with "/" writable the
 *    names would protect nothing).
 *  - The same names are protected in each writable workspace root, and in
 *    every writable directory above a writable path or workspace root (up to,
 *    not including, "/"): git's repository discovery walks up from where it
 *    runs, so a repository planted in /tmp/x above a workspace /tmp/x/ws
 *    would be the one a host `git status` in the workspace opens.
 *  - Nested repositories: below each workspace root, every existing ".git"
 *    (directory, "gitdir:" file or other) in a writable directory is
 *    read-only too (CD_ORIGIN_NESTED). The scan lists directories (no stat:
 *    the listing's types), follows no symlink, does not enter ".git" or a
 *    directory nothing writable lies in, and is bounded: more than
 *    CD_NESTED_SCAN_MAX_DIRS directories or CD_NESTED_SCAN_MAX_ENTRIES
 *    entries listed, a tree deeper than CD_NESTED_SCAN_MAX_DEPTH or more than
 *    CD_NESTED_REPOS_MAX repositories found is refused, unless the input asks
 *    to skip the scan (skip_nested_scan; reported in plan->degraded). A
 *    nested ".git" that is a symlink is refused.
 *  - Submodules: for every repository whose .git is protected, the gitlinks
 *    of its index (core/gitindex.h; what git recurses into) are protected
 *    where writable (CD_ORIGIN_SUBMODULE): an existing <path>/.git is
 *    read-only, a missing one masked; a missing <path> (or the first missing
 *    directory on the way) is denied, so that no directory holding a
 *    repository can appear there; a symlink on the way is refused. Repeated
 *    for the submodules' own repositories. At most CD_SUBMODULES_MAX gitlinks
 *    protected, and CD_GIT_INDEX_BUDGET bytes of git indexes read for the
 *    whole plan (core/gitindex.h reads only the entries and the headers of
 *    the extensions); past either, and for an index that does not parse, the
 *    plan is refused; an index the caller cannot read is skipped with a note
 *    (git run as the caller cannot read it either). .gitmodules is not
 *    read: it lies in the work tree, where the sandbox can rewrite it, and
 *    git recurses into the index's gitlinks whatever it says.
 *  - An implicit "/dev/null" write path is always present in MANAGED plans.
 *  - glob_pattern deny entries are expanded now (core/glob.h) and each match
 *    is bound like a deny path entry; relative patterns hang off the cwd,
 *    "codex-project-roots://" ones off each workspace root.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/profile.h"

enum cd_file_type {
	CD_FT_MISSING,
	CD_FT_DIR,
	CD_FT_REG,
	CD_FT_SYMLINK,
	CD_FT_OTHER, /* device, fifo, socket */
	CD_FT_COUNT,
};

/* File-system shim. All paths are absolute. */
struct cd_fs_ops {
	void *ctx;
	/* Type of path without following a final symlink. A missing path (ENOENT
	 * or ENOTDIR) is success with CD_FT_MISSING. Other errors: -errno. */
	int (*lstat_type)(void *ctx, const char *path, enum cd_file_type *ret);
	/* Target of a symlink, malloc'ed. -errno on failure. */
	int (*readlink)(void *ctx, const char *path, char **ret);
	/* Read at most max bytes of a regular file, malloc'ed, NUL-terminated. */
	int (*read_file)(void *ctx, const char *path, size_t max, char **ret, size_t *ret_len);
	/*
	 * Open a regular file for reads at offsets (a git index, of which only
	 * the parts that matter are read): *ret_file is for read_at and
	 * close_file, *ret_size the file's size. The errors of read_file.
	 */
	int (*open_file)(void *ctx, const char *path, void **ret_file, uint64_t *ret_size);
	/* Read exactly len bytes at off: 0, or -errno (-EIO: the file is shorter now). */
	int (*read_at)(void *ctx, void *file, uint64_t off, void *buf, size_t len);
	void (*close_file)(void *ctx, void *file);
	/* Each entry of a directory but "." and "..", with its type as lstat sees
	 * it, passed to fn in no particular order. A negative return from fn stops
	 * the listing and is returned. -errno when path cannot be listed. */
	int (*read_dir)(void *ctx, const char *path,
			int (*fn)(void *arg, const char *name, enum cd_file_type type), void *arg);
	/*
	 * Whether the caller, and so a sandbox running as it, could create a
	 * name in directory path: it may write and search there, or it owns
	 * the directory (and could chmod it). NULL: assume it could.
	 */
	int (*may_create)(void *ctx, const char *path, bool *ret);
};

/* The real shim over lstat/readlink/open (lives outside core: sandbox/posix-fs-ops.c). */
extern const struct cd_fs_ops cd_fs_ops_host;

/*
 * cd_fs_ops_host for one bind, remembering the directories it has seen
 * (sandbox/posix-fs-ops.c): *ret borrows cache, which cd_fs_dir_cache_done
 * empties afterwards.
 */
struct cd_fs_dir_cache {
	char *dirs[32]; /* owned */
	size_t n;
};
void cd_fs_ops_host_cached(struct cd_fs_ops *ret, struct cd_fs_dir_cache *cache);
void cd_fs_dir_cache_done(struct cd_fs_dir_cache *cache);

enum cd_origin {
	CD_ORIGIN_ENTRY,     /* a profile entry (entry_index says which) */
	CD_ORIGIN_PROTECTED, /* protected metadata under a writable path */
	CD_ORIGIN_GITDIR,    /* target of a "gitdir:" pointer (or its commondir) */
	CD_ORIGIN_IMPLICIT,  /* /dev/null */
	CD_ORIGIN_NESTED,    /* a nested repository's .git found below a workspace root */
	CD_ORIGIN_SUBMODULE, /* a submodule path (a gitlink of a protected index) or its .git */
	CD_ORIGIN_COUNT,
};

struct cd_plan_path {
	char *path; /* canonical, absolute, normal (cd_path_is_normal) */
	enum cd_access
		access; /* effective access for this path and below, until a more specific one */
	enum cd_file_type type; /* at bind time: MISSING, DIR, REG or OTHER (never SYMLINK) */
	enum cd_origin origin;
	int entry_index; /* index into profile->entries, -1 when not from an entry */
	char *why;	 /* human reason, e.g. "entry 2 (:workspace_roots, write)" or
				  "protected metadata under writable /w" */
	/* Access of the nearest enclosing plan path (CD_ACCESS_DENY when none:
	 * no match is deny). */
	enum cd_access parent_access;
	/* The path narrows its parent (parent write -> read/deny, parent read ->
	 * deny): Landlock cannot express it; it needs a mount-namespace carve-out. */
	bool carve_out;
	/* MISSING only: the directory it would be in is missing too (or is not
	 * a directory), so nothing can be mounted where it would appear. */
	bool parent_missing;
};

struct cd_plan {
	enum cd_profile_type type;
	enum cd_network network;
	/* No file-system restriction at all: DISABLED, EXTERNAL, MANAGED with
	 * file_system unrestricted, or "/" writable with nothing narrower. */
	bool fs_unrestricted;
	bool full_read;		    /* "/" is readable (read or write) */
	char *cwd;		    /* canonical command cwd */
	struct cd_plan_path *paths; /* sorted by path (strcmp), unique */
	size_t n_paths;
	char **notes; /* NULL-terminated; human notes (skipped entries, ...) */
	bool has_carve_outs;
	bool has_deny_carve_outs; /* a deny path under a readable/writable region */
	bool has_globs;		  /* glob_pattern entries present (expanded to their matches) */
	/* What the binding left unprotected on request (skip_nested_scan); NULL-terminated. */
	char **degraded;
};

/* Bounds of the nested-repository scan (per plan, over every workspace root). */
#define CD_NESTED_SCAN_MAX_DIRS	   100000
#define CD_NESTED_SCAN_MAX_ENTRIES 1000000
#define CD_NESTED_SCAN_MAX_DEPTH   64
#define CD_NESTED_REPOS_MAX	   1024
/*
 * At most this many gitlinks protected per plan: each missing one is a mask,
 * whose mount point the parent keeps open (and locked) while the run lasts,
 * under the usual limit of 1,024 descriptors.
 */
#define CD_SUBMODULES_MAX 512

struct cd_nested_limits {
	size_t dirs, entries, depth, repos, gitlinks;
	size_t index_bytes; /* bytes of git indexes read (CD_GIT_INDEX_BUDGET) */
};

struct cd_bind_input {
	const char *cwd;		    /* absolute; required */
	const char *const *workspace_roots; /* absolute; may be empty */
	size_t n_workspace_roots;
	const char *tmpdir;		  /* $TMPDIR or NULL */
	const char *const *minimal_paths; /* platform defaults, NULL-terminated; NULL = Linux set */
	const struct cd_fs_ops *ops;	  /* required */
	/* Do not scan the workspace roots for nested repositories (an explicit opt-down). */
	bool skip_nested_scan;
	/*
	 * The bounds of the scan and of the submodules; NULL: the CD_NESTED_*,
	 * CD_SUBMODULES_MAX and CD_GIT_INDEX_BUDGET defaults (tests make them small).
	 */
	const struct cd_nested_limits *limits;
};

/* The protected metadata names, NULL-terminated; ".git" first. */
extern const char *const cd_protected_names[];

/* Linux's :minimal set (only existing ones are bound). */
extern const char *const cd_minimal_paths_linux[];

/*
 * Bind and resolve. 0 on success; -EINVAL (refusal: symlink crossing, bad
 * root, protected symlink, ...) or -ELOOP/-errno with *reterr a malloc'ed
 * one-line reason.
 */
int cd_plan_build(const struct cd_profile *p, const struct cd_bind_input *in, struct cd_plan **ret,
		  char **reterr);
struct cd_plan *cd_plan_free(struct cd_plan *plan);

/*
 * Effective access of an arbitrary canonical absolute path under the plan
 * (nearest enclosing plan path; deny when none). fs_unrestricted plans give
 * write. If ret_rule is not NULL it receives the deciding plan path or NULL.
 */
enum cd_access cd_plan_access(const struct cd_plan *plan, const char *path,
			      const struct cd_plan_path **ret_rule);

/* The plan path that is exactly path (canonical), or NULL. */
const struct cd_plan_path *cd_plan_find(const struct cd_plan *plan, const char *path);

/*
 * Canonicalise an absolute path through the shim (exposed for tests and for
 * the CLI's --cwd handling). The result is normal; a missing tail is kept
 * literally. *ret_links receives a NULL-terminated list of the symlinks
 * crossed (their own paths), may be NULL. -ELOOP after 40 links.
 */
int cd_canonicalize(const struct cd_fs_ops *ops, const char *path, char **ret, char ***ret_links,
		    enum cd_file_type *ret_type);

const char *cd_file_type_name(enum cd_file_type t); /* "missing", "directory", "file", ... */
const char *cd_origin_name(enum cd_origin o);
