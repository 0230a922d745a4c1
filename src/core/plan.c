/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Binding and precedence: turn a profile and the host's facts into a plan
 * of canonical paths. All file-system questions go through struct
 * cd_fs_ops so every rule here runs against a fake tree in the unit tests.
 *
 * Why canonicalise by hand instead of realpath(): the walk must see every
 * symlink it crosses, because a symlink that a sandboxed process can write
 * could redirect the next run's binds (the "planted symlink" attack), and a
 * missing tail must survive as a literal path (protected names that do not
 * exist yet are still masked).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gitindex.h"
#include "core/glob.h"
#include "core/plan.h"
#include "core/util.h"

/* Same bound as the kernel's MAXSYMLINKS. */
#define MAX_LINKS 40
/* A ".git" pointer file or "commondir" is one short line; more is not git's. */
#define GITFILE_MAX 4096

const char *const cd_minimal_paths_linux[] = {
	"/bin", "/sbin", "/usr", "/etc", "/lib", "/lib64", "/nix/store", "/run/current-system/sw",
	NULL,
};

/* clang-format off */
static const char *const file_type_names[CD_FT_COUNT] = {
	[CD_FT_MISSING] = "missing",
	[CD_FT_DIR]     = "directory",
	[CD_FT_REG]     = "file",
	[CD_FT_SYMLINK] = "symlink",
	[CD_FT_OTHER]   = "other",
};

static const char *const origin_names[CD_ORIGIN_COUNT] = {
	[CD_ORIGIN_ENTRY]     = "entry",
	[CD_ORIGIN_PROTECTED] = "protected",
	[CD_ORIGIN_GITDIR]    = "gitdir",
	[CD_ORIGIN_IMPLICIT]  = "implicit",
	[CD_ORIGIN_NESTED]    = "nested",
	[CD_ORIGIN_SUBMODULE] = "submodule",
};
/* clang-format on */

const char *cd_file_type_name(enum cd_file_type t)
{
	return (unsigned)t < CD_FT_COUNT ? file_type_names[t] : NULL;
}

const char *cd_origin_name(enum cd_origin o)
{
	return (unsigned)o < CD_ORIGIN_COUNT ? origin_names[o] : NULL;
}

/* Permissiveness, for carve-outs: write > read > deny. */
static int permissiveness(enum cd_access a)
{
	switch (a) {
	case CD_ACCESS_WRITE:
		return 2;
	case CD_ACCESS_READ:
		return 1;
	case CD_ACCESS_DENY:
	case CD_ACCESS_COUNT:
		break;
	}
	return 0;
}

/* Tie rank for the same path: deny > write > read (the enum order). */
static int tie_rank(enum cd_access a)
{
	return (int)a;
}

/* ---- canonicalisation --------------------------------------------------- */

/* Drop the last component of a canonical path held in sb ("" stands for "/"). */
static void sb_pop(struct cd_strbuf *sb)
{
	while (sb->len > 0 && sb->buf[sb->len - 1] != '/')
		sb->len--;
	if (sb->len > 0)
		sb->len--;
	if (sb->buf)
		sb->buf[sb->len] = '\0';
}

int cd_canonicalize(const struct cd_fs_ops *ops, const char *path, char **ret, char ***ret_links,
		    enum cd_file_type *ret_type)
{
	if (!path || path[0] != '/')
		return -EINVAL;

	struct cd_strbuf res = { 0 };  /* canonical prefix; "" is "/" */
	char *rest = cd_xstrdup(path); /* what is left to walk */
	char **links = NULL;
	unsigned n_links = 0;
	/* Components appended literally after a missing or non-directory one. */
	size_t literal = 0;
	enum cd_file_type type = CD_FT_DIR;
	int r = 0;

	const char *p = rest;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		const char *next = p + n;

		if (n == 1 && p[0] == '.') {
			p = next;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			sb_pop(&res);
			if (literal > 0)
				literal--;
			/* Back in the real tree (or still in the literal tail). */
			type = literal ? CD_FT_MISSING : CD_FT_DIR;
			p = next;
			continue;
		}
		size_t old_len = res.len;
		cd_strbuf_append_c(&res, '/');
		cd_strbuf_append_n(&res, p, n);
		if (literal) {
			literal++;
			type = CD_FT_MISSING;
			p = next;
			continue;
		}
		enum cd_file_type t = CD_FT_MISSING;
		r = ops->lstat_type(ops->ctx, res.buf, &t);
		if (r < 0)
			goto fail;
		if (t == CD_FT_SYMLINK) {
			if (++n_links > MAX_LINKS) {
				r = -ELOOP;
				goto fail;
			}
			char *target = NULL;
			r = ops->readlink(ops->ctx, res.buf, &target);
			if (r < 0)
				goto fail;
			if (!*target) {
				free(target);
				r = -ENOENT;
				goto fail;
			}
			cd_strv_push(&links, res.buf);
			/* Relative targets resolve against the link's directory. */
			res.len = old_len;
			res.buf[res.len] = '\0';
			if (target[0] == '/') {
				res.len = 0;
				res.buf[0] = '\0';
			}
			char *nrest = cd_xasprintf("%s/%s", target, next);
			free(target);
			free(rest);
			rest = nrest;
			p = rest;
			continue;
		}
		type = t;
		if (t == CD_FT_MISSING) {
			literal = 1;
		} else if (t != CD_FT_DIR) {
			/* Anything after a non-directory cannot exist. */
			const char *q = next;
			while (*q == '/')
				q++;
			if (*q)
				literal = 1;
		}
		p = next;
	}

	free(rest);
	if (res.len == 0)
		cd_strbuf_append_c(&res, '/');
	*ret = cd_strbuf_steal(&res);
	if (ret_type)
		*ret_type = type;
	if (ret_links) {
		if (!links)
			links = cd_xcalloc(1, sizeof(char *));
		*ret_links = links;
	} else {
		cd_strv_free(links);
	}
	return 0;
fail:
	free(rest);
	cd_strbuf_done(&res);
	cd_strv_free(links);
	return r;
}

/* ---- plan building ------------------------------------------------------ */

struct bound {
	char *raw; /* the path as named before canonicalisation */
	char *canon;
	char **links;	  /* symlinks crossed on the way */
	bool write_entry; /* bound by an entry with write access */
};

/* A repository whose .git is protected: its index names the submodules. */
struct repo {
	char *worktree; /* owned; where the gitlinks' paths start */
	char *gitdir;	/* owned; where the index is */
};

struct builder {
	const struct cd_profile *profile;
	const struct cd_bind_input *in;
	struct cd_plan *plan;
	size_t cap;
	/*
	 * While the plan is built, its paths are appended (a sorted insertion
	 * moved the array each time: quadratic in the entries) and found
	 * through a hash of them (ix); they are sorted when something walks
	 * them in order (plan_sort), and once at the end.
	 */
	size_t *ix;	/* path index + 1; 0 = empty */
	size_t ix_cap;	/* a power of two, at least twice the paths */
	bool unsorted;	/* paths appended since the last sort */
	size_t n_notes; /* plan->notes grows through cd_strv_append_take (note) */
	/* The raw paths of the write entries bound (named_by_write_entry). */
	struct cd_strset write_raw;
	/* Every directory strictly above a writable plan path (writable_below); stale: rebuild. */
	struct cd_strset above_writable;
	bool above_writable_stale;
	struct bound *bound; /* every canonicalised bind, for the symlink check */
	size_t n_bound, cap_bound;
	struct cd_glob_budget glob_budget; /* shared by every glob entry of the plan */
	char **roots;			   /* the workspace roots that are directories, canonical */
	size_t n_roots;
	struct repo *repos; /* repositories whose gitlinks are to be protected */
	size_t n_repos;
	size_t repos_done; /* repos[0..repos_done) have had their gitlinks protected */
	size_t n_nested;   /* nested repositories protected */
	size_t n_gitlinks; /* gitlinks protected */
	struct cd_nested_limits limits;
	size_t index_budget; /* bytes of git indexes still to be read (limits.index_bytes) */
	char *err;
};

static void bound_done(struct bound *b)
{
	free(b->raw);
	free(b->canon);
	cd_strv_free(b->links);
}

static int fail(struct builder *b, int r, const char *fmt, ...) CD_PRINTF(3, 4);
static int fail(struct builder *b, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	free(b->err);
	b->err = cd_xvasprintf(fmt, ap);
	va_end(ap);
	return r;
}

static void note(struct builder *b, const char *fmt, ...) CD_PRINTF(2, 3);
static void note(struct builder *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cd_strv_append_take(&b->plan->notes, &b->n_notes, cd_xvasprintf(fmt, ap));
	va_end(ap);
}

/* Index of path in the sorted plan, or where it would go (*found false). */
static size_t find_slot(const struct cd_plan *plan, const char *path, bool *found)
{
	size_t lo = 0, hi = plan->n_paths;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(plan->paths[mid].path, path);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static uint64_t path_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* The index slot of path: its entry's, or the empty one where it would go. */
static size_t *ix_slot(const struct builder *b, const char *path)
{
	size_t mask = b->ix_cap - 1;
	for (size_t k = path_hash(path) & mask;; k = (k + 1) & mask) {
		size_t *slot = &b->ix[k];
		if (!*slot || cd_streq(b->plan->paths[*slot - 1].path, path))
			return slot;
	}
}

/* (Re)index every path, with room for cap paths. */
static void ix_rebuild(struct builder *b, size_t cap)
{
	size_t n = 16;
	while (n < 2 * cap + 2)
		n *= 2;
	free(b->ix);
	b->ix = cd_xcalloc(n, sizeof(*b->ix));
	b->ix_cap = n;
	for (size_t i = 0; i < b->plan->n_paths; i++)
		*ix_slot(b, b->plan->paths[i].path) = i + 1;
}

static int cmp_plan_path(const void *x, const void *y)
{
	return strcmp(((const struct cd_plan_path *)x)->path,
		      ((const struct cd_plan_path *)y)->path);
}

/* Sort what was appended (before walking the paths in order, and at the end). */
static void plan_sort(struct builder *b)
{
	if (!b->unsorted)
		return;
	qsort(b->plan->paths, b->plan->n_paths, sizeof(*b->plan->paths), cmp_plan_path);
	ix_rebuild(b, b->cap);
	b->unsorted = false;
}

static struct cd_plan_path *lookup(const struct cd_plan *plan, const char *path)
{
	bool found;
	size_t i = find_slot(plan, path, &found);
	return found ? &plan->paths[i] : NULL;
}

/* lookup() while the plan is built (it may be unsorted). */
static struct cd_plan_path *blookup(const struct builder *b, const char *path)
{
	size_t *slot = b->ix ? ix_slot(b, path) : NULL;
	return slot && *slot ? &b->plan->paths[*slot - 1] : NULL;
}

const struct cd_plan_path *cd_plan_find(const struct cd_plan *plan, const char *path)
{
	return plan ? lookup(plan, path) : NULL;
}

/*
 * Add a path; a path bound twice keeps the entry that wins the tie rule
 * (deny > write > read), the first one on equal access. Takes why.
 */
static void plan_add(struct builder *b, const char *path, enum cd_access access,
		     enum cd_file_type type, enum cd_origin origin, int entry_index, char *why)
{
	struct cd_plan *plan = b->plan;
	if (!b->ix)
		ix_rebuild(b, 16);
	if (access == CD_ACCESS_WRITE)
		b->above_writable_stale = true;
	size_t *slot = ix_slot(b, path);
	if (*slot) {
		struct cd_plan_path *pp = &plan->paths[*slot - 1];
		if (tie_rank(access) > tie_rank(pp->access)) {
			pp->access = access;
			pp->origin = origin;
			pp->entry_index = entry_index;
			free(pp->why);
			pp->why = why;
		} else {
			free(why);
		}
		return;
	}
	if (plan->n_paths == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 16;
		plan->paths = cd_xreallocarray(plan->paths, b->cap, sizeof(*plan->paths));
	}
	size_t i = plan->n_paths;
	if (2 * (i + 2) > b->ix_cap) {
		ix_rebuild(b, b->cap);
		slot = ix_slot(b, path);
	}
	*slot = i + 1;
	b->unsorted = b->unsorted || (i > 0 && strcmp(plan->paths[i - 1].path, path) > 0);
	plan->paths[i] = (struct cd_plan_path){
		.path = cd_xstrdup(path),
		.access = access,
		.type = type,
		.origin = origin,
		.entry_index = entry_index,
		.why = why,
		.parent_access = CD_ACCESS_DENY,
	};
	if (type == CD_FT_MISSING && !cd_streq(path, "/")) {
		char *dir = cd_path_parent(path);
		enum cd_file_type t = CD_FT_MISSING;

		/* path is canonical: dir has no symlink, and lstat says what it is. */
		if (b->in->ops->lstat_type(b->in->ops->ctx, dir, &t) < 0 || t != CD_FT_DIR)
			plan->paths[i].parent_missing = true;
		free(dir);
	}
	plan->n_paths++;
}

/* Nearest plan path at or above path (path must be normal), or NULL. */
static const struct cd_plan_path *nearest(const struct cd_plan *plan, const char *path,
					  bool strict_ancestor)
{
	char *buf = cd_xstrdup(path);
	const struct cd_plan_path *pp = NULL;
	bool first = true;
	for (;;) {
		if (!(first && strict_ancestor))
			pp = lookup(plan, buf);
		first = false;
		if (pp || cd_streq(buf, "/"))
			break;
		char *slash = strrchr(buf, '/');
		if (slash == buf)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	free(buf);
	return pp;
}

enum cd_access cd_plan_access(const struct cd_plan *plan, const char *path,
			      const struct cd_plan_path **ret_rule)
{
	if (ret_rule)
		*ret_rule = NULL;
	if (plan->fs_unrestricted)
		return CD_ACCESS_WRITE;
	if (!path || path[0] != '/')
		return CD_ACCESS_DENY;
	const struct cd_plan_path *pp = nearest(plan, path, false);
	if (ret_rule)
		*ret_rule = pp;
	return pp ? pp->access : CD_ACCESS_DENY;
}

/* nearest() and cd_plan_access() while the plan is built (it may be unsorted). */
static const struct cd_plan_path *bnearest(const struct builder *b, const char *path)
{
	char *buf = cd_xstrdup(path);
	const struct cd_plan_path *pp = NULL;
	for (;;) {
		pp = blookup(b, buf);
		if (pp || cd_streq(buf, "/"))
			break;
		char *slash = strrchr(buf, '/');
		if (slash == buf)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	free(buf);
	return pp;
}

static enum cd_access baccess(const struct builder *b, const char *path,
			      const struct cd_plan_path **ret_rule)
{
	if (ret_rule)
		*ret_rule = NULL;
	if (b->plan->fs_unrestricted)
		return CD_ACCESS_WRITE;
	if (!path || path[0] != '/')
		return CD_ACCESS_DENY;
	const struct cd_plan_path *pp = bnearest(b, path);
	if (ret_rule)
		*ret_rule = pp;
	return pp ? pp->access : CD_ACCESS_DENY;
}

static const char *strerror_short(int r)
{
	return r == -ELOOP ? "too many levels of symbolic links" : strerror(-r);
}

/* Canonicalise raw and remember the symlinks it crossed. *ret stays owned by the builder. */
static int resolve(struct builder *b, const char *raw, char **ret, enum cd_file_type *ret_type,
		   bool write_entry)
{
	char *canon = NULL;
	char **links = NULL;
	int r = cd_canonicalize(b->in->ops, raw, &canon, &links, ret_type);
	if (r < 0)
		return fail(b, r, "cannot resolve %s: %s", raw, strerror_short(r));
	if (b->n_bound == b->cap_bound) {
		b->cap_bound = b->cap_bound ? 2 * b->cap_bound : 16;
		b->bound = cd_xreallocarray(b->bound, b->cap_bound, sizeof(*b->bound));
	}
	b->bound[b->n_bound++] = (struct bound){
		.raw = cd_xstrdup(raw),
		.canon = canon,
		.links = links,
		.write_entry = write_entry,
	};
	*ret = canon;
	return 0;
}

static char *entry_label(const struct cd_fs_entry *e)
{
	switch (e->kind) {
	case CD_ENTRY_PATH:
	case CD_ENTRY_GLOB:
		return cd_xstrdup(e->path ? e->path : "?");
	case CD_ENTRY_SPECIAL:
	case CD_ENTRY_KIND_COUNT:
		break;
	}
	const char *tok = e->special == CD_SPECIAL_UNKNOWN && e->path
				  ? e->path
				  : cd_special_token(e->special);
	if (e->subpath)
		return cd_xasprintf("%s/%s", tok ? tok : "?", e->subpath);
	return cd_xstrdup(tok ? tok : "?");
}

static int bind_path(struct builder *b, size_t idx, const char *raw, const char *label,
		     bool need_dir)
{
	const struct cd_fs_entry *e = &b->profile->entries[idx];
	char *canon;
	enum cd_file_type type;
	int r = resolve(b, raw, &canon, &type, e->access == CD_ACCESS_WRITE);
	if (r < 0)
		return r;
	if (need_dir && type != CD_FT_DIR) {
		/* Not bound after all: its symlinks do not matter. */
		bound_done(&b->bound[--b->n_bound]);
		return 0;
	}
	if (e->access == CD_ACCESS_WRITE)
		(void)cd_strset_add(&b->write_raw, raw);
	plan_add(b, canon, e->access, type, CD_ORIGIN_ENTRY, (int)idx,
		 cd_xasprintf("entry %zu (%s, %s)", idx, label, cd_access_name(e->access)));
	return 0;
}

/*
 * A glob_pattern deny entry becomes one deny path per match, bound like a
 * path entry (so a match that is a symlink denies what it points to, and
 * the symlink checks apply). Relative patterns hang off the cwd,
 * "codex-project-roots://" ones off each workspace root.
 */
static int bind_glob(struct builder *b, size_t idx, const char *label)
{
	const struct cd_fs_entry *e = &b->profile->entries[idx];
	const struct cd_bind_input *in = b->in;
	const char *pat = e->path;
	const char *const *bases;
	size_t n_bases = 1;
	const char *one[1];
	char **matches = NULL;
	int r = 0;

	if (!strncmp(pat, CD_GLOB_PROJECT_ROOTS_PREFIX, strlen(CD_GLOB_PROJECT_ROOTS_PREFIX))) {
		pat += strlen(CD_GLOB_PROJECT_ROOTS_PREFIX);
		bases = (const char *const *)in->workspace_roots;
		n_bases = in->n_workspace_roots;
		if (n_bases == 0)
			note(b,
			     "glob entry %zu (%s) binds to nothing: no workspace roots were given",
			     idx, label);
	} else {
		one[0] = pat[0] == '/' ? NULL : in->cwd;
		bases = one;
	}
	for (size_t i = 0; r >= 0 && i < n_bases; i++) {
		char *full = bases[i] ? cd_path_join(bases[i], pat) : cd_xstrdup(pat);
		char *err = NULL;
		size_t before = cd_strv_length(matches);
		r = cd_glob_expand(in->ops, full, b->profile->glob_scan_max_depth, &b->glob_budget,
				   &matches, &err);
		if (r < 0)
			r = fail(b, r, "entry %zu: %s", idx, err ? err : strerror_short(r));
		else if (cd_strv_length(matches) == before)
			note(b, "glob entry %zu (%s) matches nothing under %s today", idx, label,
			     full);
		free(err);
		free(full);
	}
	for (size_t i = 0; r >= 0 && matches && matches[i]; i++)
		r = bind_path(b, idx, matches[i], label, false);
	cd_strv_free(matches);
	return r;
}

static int bind_entry(struct builder *b, size_t idx)
{
	const struct cd_fs_entry *e = &b->profile->entries[idx];
	const struct cd_bind_input *in = b->in;
	char *label = entry_label(e);
	int r = 0;

	if (e->kind == CD_ENTRY_PATH) {
		if (!e->path || e->path[0] != '/')
			r = fail(b, -EINVAL, "entry %zu: path is not absolute", idx);
		else
			r = bind_path(b, idx, e->path, label, false);
	} else if (e->kind == CD_ENTRY_GLOB) {
		b->plan->has_globs = true;
		r = bind_glob(b, idx, label);
	} else {
		switch (e->special) {
		case CD_SPECIAL_ROOT:
			r = bind_path(b, idx, "/", label, false);
			break;
		case CD_SPECIAL_MINIMAL: {
			const char *const *m =
				in->minimal_paths ? in->minimal_paths : cd_minimal_paths_linux;
			for (size_t i = 0; r >= 0 && m[i]; i++)
				r = bind_path(b, idx, m[i], label, true);
			break;
		}
		case CD_SPECIAL_PROJECT_ROOTS:
			if (in->n_workspace_roots == 0)
				note(b,
				     "%s entry %zu binds to nothing: no workspace roots were given",
				     label, idx);
			for (size_t i = 0; r >= 0 && i < in->n_workspace_roots; i++) {
				char *p = e->subpath
						  ? cd_path_join(in->workspace_roots[i], e->subpath)
						  : cd_xstrdup(in->workspace_roots[i]);
				r = bind_path(b, idx, p, label, false);
				free(p);
			}
			break;
		case CD_SPECIAL_TMPDIR:
			if (!in->tmpdir || !*in->tmpdir)
				note(b, ":tmpdir entry %zu skipped: TMPDIR is not set", idx);
			else if (in->tmpdir[0] != '/')
				note(b, ":tmpdir entry %zu skipped: TMPDIR '%s' is not absolute",
				     idx, in->tmpdir);
			else
				r = bind_path(b, idx, in->tmpdir, label, false);
			break;
		case CD_SPECIAL_SLASH_TMP: {
			char *canon = NULL;
			enum cd_file_type t = CD_FT_MISSING;
			r = cd_canonicalize(in->ops, "/tmp", &canon, NULL, &t);
			free(canon);
			if (r < 0)
				r = fail(b, r, "cannot resolve /tmp: %s", strerror_short(r));
			else if (t != CD_FT_DIR)
				note(b, ":slash_tmp entry %zu skipped: /tmp is not a directory",
				     idx);
			else
				r = bind_path(b, idx, "/tmp", label, false);
			break;
		}
		case CD_SPECIAL_UNKNOWN:
		case CD_SPECIAL_COUNT:
			note(b, "unknown special path %s ignored", label);
			break;
		}
	}
	free(label);
	return r;
}

/* ---- protected metadata ------------------------------------------------- */

/*
 * A git pointer file (".git" holding "gitdir: X", or a worktree's
 * "commondir") read the way git reads it, or NULL: the whole file, its
 * trailing CRs and LFs dropped (nothing else: spaces, tabs and inner
 * newlines are part of the path), then up to its first NUL. Anything
 * looser would protect a decoy while git used the real target.
 */
static char *read_pointer(struct builder *b, const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	if (b->in->ops->read_file(b->in->ops->ctx, path, GITFILE_MAX, &buf, &len) < 0)
		return NULL;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	buf[len] = '\0';
	return buf;
}

/* Resolve a git pointer relative to dir; protect it if it is writable. */
static int protect_git_target(struct builder *b, const char *dir, const char *target,
			      const char *what, char **ret_canon)
{
	char *raw = target[0] == '/' ? cd_xstrdup(target) : cd_path_join(dir, target);
	char *canon;
	enum cd_file_type type;
	*ret_canon = NULL;
	int r = resolve(b, raw, &canon, &type, false);
	free(raw);
	if (r < 0)
		return r;
	*ret_canon = cd_xstrdup(canon);
	if (blookup(b, canon))
		return 0; /* an entry already decides it */
	if (baccess(b, canon, NULL) != CD_ACCESS_WRITE)
		return 0; /* not writable anyway */
	plan_add(b, canon, CD_ACCESS_READ, type, CD_ORIGIN_GITDIR, -1,
		 cd_xasprintf("%s named by %s", what, dir));
	return 0;
}

/*
 * Protect what a ".git" file points to ("gitdir: X") and, for a linked
 * worktree, X's "commondir". *ret_gitdir: X canonical (malloc()ed), or
 * NULL when the file is no pointer.
 */
static int protect_gitfile(struct builder *b, const char *dotgit, char **ret_gitdir)
{
	char *line = read_pointer(b, dotgit);
	*ret_gitdir = NULL;
	/* Exactly git's prefix, one space included: "gitdir:X" is no pointer. */
	if (!line || !cd_startswith(line, "gitdir: ")) {
		free(line);
		return 0;
	}
	const char *t = line + strlen("gitdir: ");
	char *dir = cd_path_parent(dotgit);
	char *gitdir = NULL;
	int r = 0;
	if (*t) {
		char *why = cd_xasprintf("gitdir of %s", dotgit);
		r = protect_git_target(b, dir, t, why, &gitdir);
		free(why);
	}
	free(line);
	free(dir);
	if (r < 0 || !gitdir) {
		free(gitdir);
		return r;
	}

	/* A linked worktree's gitdir shares refs and objects through "commondir". */
	char *cpath = cd_path_join(gitdir, "commondir");
	enum cd_file_type ct = CD_FT_MISSING;
	if (b->in->ops->lstat_type(b->in->ops->ctx, cpath, &ct) >= 0 && ct == CD_FT_REG) {
		char *c = read_pointer(b, cpath);
		if (c && *c) {
			char *common = NULL;
			char *why = cd_xasprintf("commondir of %s", gitdir);
			r = protect_git_target(b, gitdir, c, why, &common);
			free(why);
			free(common);
		}
		free(c);
	}
	free(cpath);
	if (r < 0)
		free(gitdir);
	else
		*ret_gitdir = gitdir;
	return r;
}

/* Does a write entry name q itself (before canonicalisation)? */
static bool named_by_write_entry(const struct builder *b, const char *q)
{
	return cd_strset_has(&b->write_raw, q);
}

/*
 * Writable through a rule other than "/" itself: with "/" writable the
 * command can change the user's own configuration anyway, and protecting
 * names there would protect nothing (and mask names all over the tree).
 */
static bool writable(const struct builder *b, const char *path)
{
	const struct cd_plan_path *rule = NULL;
	return baccess(b, path, &rule) == CD_ACCESS_WRITE && rule && !cd_streq(rule->path, "/");
}

/*
 * Some plan path strictly below dir is writable. Asked for every directory
 * the nested-repository scan meets: the directories above writable paths
 * are collected once (again after a writable path was added), so that each
 * question is a lookup rather than a walk of the whole plan.
 */
static bool writable_below(struct builder *b, const char *dir)
{
	if (b->above_writable_stale || !b->above_writable.cap) {
		cd_strset_done(&b->above_writable);
		for (size_t i = 0; i < b->plan->n_paths; i++) {
			const struct cd_plan_path *pp = &b->plan->paths[i];
			if (pp->access != CD_ACCESS_WRITE || cd_streq(pp->path, "/"))
				continue;
			char *up = cd_path_parent(pp->path);
			/* Above it, up to / (or where an earlier path's walk went already). */
			while (cd_strset_add(&b->above_writable, up) && !cd_streq(up, "/")) {
				char *next = cd_path_parent(up);
				free(up);
				up = next;
			}
			free(up);
		}
		b->above_writable_stale = false;
		/* Not empty, so that it is not rebuilt at each question. */
		(void)cd_strset_add(&b->above_writable, "");
	}
	return cd_strset_has(&b->above_writable, dir);
}

/*
 * Whether the missing path could be created by anything running as the
 * caller (the sandbox included): if not, it needs no mask, which could not
 * be made there anyway. *ret false comes with a note.
 */
static int creatable(struct builder *b, const char *path, bool *ret)
{
	char *dir = cd_path_parent(path);
	int r = 0;

	*ret = true;
	if (b->in->ops->may_create)
		r = b->in->ops->may_create(b->in->ops->ctx, dir, ret);
	if (r == -ENOENT || r == -ENOTDIR) {
		*ret = true; /* the plan refuses to mask below a missing directory */
		r = 0;
	} else if (r < 0) {
		r = fail(b, r, "cannot inspect %s: %s", dir, strerror_short(r));
	} else if (!*ret) {
		note(b,
		     "%s is not masked: the caller cannot create names in %s, nor can the "
		     "sandbox",
		     path, dir);
	}
	free(dir);
	return r;
}

/* Queue a repository for its gitlinks (once per git directory). Copies both. */
static void add_repo(struct builder *b, const char *worktree, const char *gitdir)
{
	for (size_t i = 0; i < b->n_repos; i++)
		if (cd_streq(b->repos[i].gitdir, gitdir))
			return;
	b->repos = cd_xreallocarray(b->repos, b->n_repos + 1, sizeof(*b->repos));
	b->repos[b->n_repos++] = (struct repo){
		.worktree = cd_xstrdup(worktree),
		.gitdir = cd_xstrdup(gitdir),
	};
}

/*
 * dotgit (worktree/.git, of type t) is protected (or named by a read or
 * deny entry): protect what a "gitdir:" file points to, and queue the
 * repository for its gitlinks.
 */
static int queue_repo(struct builder *b, const char *worktree, const char *dotgit,
		      enum cd_file_type t)
{
	char *gitdir = NULL;
	int r = 0;

	if (t == CD_FT_DIR)
		add_repo(b, worktree, dotgit);
	if (t != CD_FT_REG)
		return 0;
	r = protect_gitfile(b, dotgit, &gitdir);
	if (r >= 0 && gitdir)
		add_repo(b, worktree, gitdir);
	free(gitdir);
	return r;
}

const char *const cd_protected_names[] = { ".git", ".codex", ".agents", NULL };

/* Protect .git, .codex and .agents in dir (read-only, or masked when missing). Copies why. */
static int protect_names(struct builder *b, const char *dir, const char *why)
{
	int r = 0;

	for (size_t k = 0; r >= 0 && cd_protected_names[k]; k++) {
		char *q = cd_path_join(dir, cd_protected_names[k]);
		/* An entry naming it (write: exempt; read/deny: already a carve-out) decides. */
		const struct cd_plan_path *named = blookup(b, q);
		if (named || named_by_write_entry(b, q)) {
			/*
			 * ...but a read or deny entry on .git (the workspace-write
			 * profile names :workspace_roots/.git read) protects only
			 * the name, not the repository a "gitdir:" file points to,
			 * nor the submodules its index names: protect those too.
			 */
			if (k == 0 && named && named->access != CD_ACCESS_WRITE)
				r = queue_repo(b, dir, q, named->type);
			free(q);
			continue;
		}
		enum cd_file_type t = CD_FT_MISSING;
		bool can = true;
		r = b->in->ops->lstat_type(b->in->ops->ctx, q, &t);
		if (r < 0) {
			r = fail(b, r, "cannot inspect %s: %s", q, strerror_short(r));
		} else if (t == CD_FT_SYMLINK) {
			r = fail(b, -EINVAL,
				 "protected path %s is a symlink, which the sandbox could "
				 "redirect; replace it with a directory or a \"gitdir:\" "
				 "file",
				 q);
		} else if (t == CD_FT_MISSING && ((r = creatable(b, q, &can)) < 0 || !can)) {
			/* Nothing can create it (or the error is set). */
		} else {
			plan_add(b, q, CD_ACCESS_READ, t, CD_ORIGIN_PROTECTED, -1, cd_xstrdup(why));
			if (k == 0)
				r = queue_repo(b, dir, q, t);
		}
		free(q);
	}
	return r;
}

/*
 * Under every writable directory of the plan, in every writable workspace
 * root, and in every writable directory above either: git (and agents
 * looking for their configuration) walk up from where they run, so a
 * repository planted above a workspace is the one a host `git status` in
 * it opens.
 */
static int protect_metadata(struct builder *b)
{
	char **anchors = NULL; /* writable directories whose names are protected */
	size_t n_anchors = 0;
	struct cd_strset done = { 0 }; /* directories whose names are protected */
	int r = 0;

	/* Snapshot, in order: protecting adds paths to the plan while we walk. */
	plan_sort(b);
	for (size_t i = 0; i < b->plan->n_paths; i++) {
		const struct cd_plan_path *pp = &b->plan->paths[i];
		if (pp->access == CD_ACCESS_WRITE && !cd_streq(pp->path, "/") &&
		    pp->type == CD_FT_DIR)
			cd_strv_append_take(&anchors, &n_anchors, cd_xstrdup(pp->path));
	}
	for (size_t w = 0; r >= 0 && anchors && anchors[w]; w++) {
		char *why = cd_xasprintf("protected metadata under writable %s", anchors[w]);
		r = protect_names(b, anchors[w], why);
		free(why);
		(void)cd_strset_add(&done, anchors[w]);
	}
	/* A workspace root writable through a wider entry (say /tmp) is not a plan path. */
	for (size_t i = 0; r >= 0 && i < b->n_roots; i++) {
		const char *root = b->roots[i];
		if (blookup(b, root) || !writable(b, root))
			continue;
		char *why =
			cd_xasprintf("protected metadata under writable workspace root %s", root);
		r = protect_names(b, root, why);
		free(why);
		cd_strv_append_take(&anchors, &n_anchors, cd_xstrdup(root));
		(void)cd_strset_add(&done, root);
	}
	for (size_t w = 0; r >= 0 && anchors && anchors[w]; w++) {
		char *dir = cd_path_parent(anchors[w]);
		while (r >= 0 && !cd_streq(dir, "/")) {
			if (!cd_strset_has(&done, dir) && writable(b, dir)) {
				char *why = cd_xasprintf("protected metadata above writable %s, "
							 "where repository discovery looks",
							 anchors[w]);
				r = protect_names(b, dir, why);
				free(why);
				(void)cd_strset_add(&done, dir);
			}
			char *up = cd_path_parent(dir);
			free(dir);
			dir = up;
		}
		free(dir);
	}
	cd_strv_free(anchors);
	cd_strset_done(&done);
	return r;
}

/* ---- nested repositories ------------------------------------------------ */

struct scan_item {
	char *path; /* owned */
	unsigned depth;
	bool writable; /* writable(path) */
};

struct scan {
	struct builder *b;
	const char *root;
	struct scan_item *queue; /* breadth-first: entries before next are listed (and freed) */
	size_t n_queue, cap;
	const struct scan_item *cur;
	size_t dirs, entries;
	bool found_git; /* cur holds a ".git", of type git_type */
	enum cd_file_type git_type;
};

#define NESTED_FIX                                                                         \
	"name a narrower workspace root, or pass --allow-degraded=nested-repositories to " \
	"leave the repositories nested in it unprotected"

static int scan_entry(void *arg, const char *name, enum cd_file_type type)
{
	struct scan *s = arg;
	struct builder *b = s->b;
	const struct scan_item *cur = s->cur;

	if (++s->entries > b->limits.entries)
		return fail(b, -E2BIG,
			    "the workspace roots hold more than %zu entries, which cordon lists "
			    "to find the nested repositories (.git) to protect; " NESTED_FIX,
			    b->limits.entries);
	if (cd_streq(name, ".git")) {
		/* Never entered: a repository's own files are protected with it. */
		s->found_git = true;
		s->git_type = type;
		return 0;
	}
	if (type != CD_FT_DIR)
		return 0; /* symlinks are not followed */
	char *path = cd_path_join(cur->path, name);
	const struct cd_plan_path *pp = blookup(b, path);
	bool w = pp ? pp->access == CD_ACCESS_WRITE : cur->writable;
	/* Nothing the command can change lies in it. */
	if (!w && !writable_below(b, path)) {
		free(path);
		return 0;
	}
	if ((size_t)cur->depth + 1 > b->limits.depth) {
		int r = fail(
			b, -E2BIG,
			"%s is more than %zu directories below workspace root %s, deeper "
			"than cordon looks for nested repositories (.git) to protect; " NESTED_FIX,
			path, b->limits.depth, s->root);
		free(path);
		return r;
	}
	if (++s->dirs > b->limits.dirs) {
		free(path);
		return fail(b, -E2BIG,
			    "the workspace roots hold more than %zu directories, which cordon "
			    "lists to find the nested repositories (.git) to protect; " NESTED_FIX,
			    b->limits.dirs);
	}
	if (s->n_queue == s->cap) {
		s->cap *= 2;
		s->queue = cd_xreallocarray(s->queue, s->cap, sizeof(*s->queue));
	}
	s->queue[s->n_queue++] = (struct scan_item){
		.path = path,
		.depth = cur->depth + 1,
		.writable = w,
	};
	return 0;
}

/* A .git of type t found in dir by the scan: protect it (once). */
static int protect_nested(struct scan *s, const char *dir, enum cd_file_type t)
{
	struct builder *b = s->b;
	char *q = cd_path_join(dir, ".git");
	int r = 0;

	if (blookup(b, q) || named_by_write_entry(b, q)) {
		/* Protected already (the top of a writable path) or named by an entry. */
	} else if (t == CD_FT_SYMLINK) {
		r = fail(b, -EINVAL,
			 "nested repository %s is a symlink, which the sandbox could redirect; "
			 "replace it with a directory or a \"gitdir:\" file, or pass "
			 "--allow-degraded=nested-repositories",
			 q);
	} else if (++b->n_nested > b->limits.repos) {
		r = fail(b, -E2BIG,
			 "more than %zu nested repositories (.git) below workspace root %s to "
			 "protect, each with a mount; " NESTED_FIX,
			 b->limits.repos, s->root);
	} else {
		plan_add(b, q, CD_ACCESS_READ, t, CD_ORIGIN_NESTED, -1,
			 cd_xasprintf("nested repository below workspace root %s", s->root));
		r = queue_repo(b, dir, q, t);
	}
	free(q);
	return r;
}

/*
 * Breadth-first over one workspace root: each directory listed once (its
 * entries' types come with the listing), ".git" never entered, symlinks
 * never followed, and no directory entered that holds nothing writable.
 */
static int scan_root(struct builder *b, const char *root, struct scan *s)
{
	int r = 0;

	s->root = root;
	s->cap = 64;
	s->queue = cd_xcalloc(s->cap, sizeof(*s->queue));
	s->n_queue = 1;
	s->queue[0] = (struct scan_item){ .path = cd_xstrdup(root), .writable = writable(b, root) };
	for (size_t i = 0; r >= 0 && i < s->n_queue; i++) {
		/* The callback may grow the queue: keep a copy of the current entry. */
		struct scan_item cur = s->queue[i];
		s->cur = &cur;
		s->found_git = false;
		r = b->in->ops->read_dir(b->in->ops->ctx, cur.path, scan_entry, s);
		if (r == -ENOENT || r == -ENOTDIR) {
			r = 0; /* gone since it was listed: nothing to protect there */
		} else if (r == -EACCES && i > 0) {
			/*
			 * Not listable by us. Unless we own it (the command could
			 * chmod it), nor can the command create anything there: no
			 * repository it plants there. One that is there already is
			 * not ours: say so.
			 */
			bool can = true;
			int rr = b->in->ops->may_create
					 ? b->in->ops->may_create(b->in->ops->ctx, cur.path, &can)
					 : 0;
			if (rr < 0) {
				r = fail(b, rr, "cannot inspect %s: %s", cur.path,
					 strerror_short(rr));
			} else if (can) {
				r = fail(b, -EACCES,
					 "cannot list %s to find nested repositories: %s; make it "
					 "readable, or pass --allow-degraded=nested-repositories",
					 cur.path, strerror(EACCES));
			} else {
				note(b,
				     "%s cannot be listed: a repository already there is not "
				     "protected",
				     cur.path);
				r = 0;
			}
		} else if (r < 0 && !b->err) {
			r = fail(b, r, "cannot list %s to find nested repositories: %s", cur.path,
				 strerror_short(r));
		}
		if (r >= 0 && s->found_git && cur.writable)
			r = protect_nested(s, cur.path, s->git_type);
		free(cur.path);
		s->queue[i].path = NULL;
	}
	for (size_t i = 0; i < s->n_queue; i++)
		free(s->queue[i].path);
	free(s->queue);
	s->queue = NULL;
	s->n_queue = 0;
	return r;
}

static int scan_nested(struct builder *b)
{
	struct scan s = { .b = b };
	int r = 0;

	for (size_t i = 0; r >= 0 && i < b->n_roots; i++) {
		const char *root = b->roots[i];
		bool inner = false;
		/* A root inside another is scanned with it. */
		for (size_t k = 0; !inner && k < b->n_roots; k++)
			inner = k != i && cd_path_is_beneath(root, b->roots[k]) &&
				(!cd_streq(root, b->roots[k]) || k < i);
		if (inner || (!writable(b, root) && !writable_below(b, root)))
			continue;
		if (b->in->skip_nested_scan) {
			cd_strv_push_take(
				&b->plan->degraded,
				cd_xasprintf("nested repositories NOT protected (as "
					     "--allow-degraded=nested-repositories asks): "
					     "the .git of a repository below %s, other "
					     "than a submodule's, stays writable",
					     root));
			continue;
		}
		r = scan_root(b, root, &s);
	}
	return r;
}

/* ---- submodules ---------------------------------------------------------- */

/*
 * A gitlink path git itself would check out: relative, no empty, "." or
 * ".." component and no ".git" one (git's verify_path). Anything else only
 * an index written by something other than git holds; git does not create
 * or enter it on checkout.
 */
static bool gitlink_path_ok(const char *p)
{
	if (!*p || *p == '/')
		return false;
	for (const char *c = p; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.') ||
		    (n == 4 && !strncmp(c, ".git", 4)))
			return false;
		c += n;
		if (*c == '/')
			c++;
		if (!*c && c[-1] == '/')
			return false;
	}
	return true;
}

/*
 * Protect one gitlink path of the repository whose work tree is worktree
 * (index: the file that names it): the submodule's .git read-only (masked
 * when missing), or, where a directory on the way is missing or is no
 * directory, that path kept as it is (denied when missing: masked), so
 * that no directory holding a repository can appear at the gitlink's path.
 */
static int protect_gitlink(struct builder *b, const char *worktree, const char *index,
			   const char *rel)
{
	char *full = cd_path_join(worktree, rel);
	char *q = cd_path_join(full, ".git");
	struct cd_strbuf cur = { 0 };
	int r = 0;

	if (!writable(b, q))
		goto out; /* nothing the command can make there */
	if (++b->n_gitlinks > b->limits.gitlinks) {
		r = fail(b, -E2BIG,
			 "more than %zu submodules (gitlinks of the protected indexes, such as "
			 "%s) to protect, each with a mount; name a narrower workspace root",
			 b->limits.gitlinks, index);
		goto out;
	}
	/* Each directory on the way: the command could make or replace any missing one. */
	cd_strbuf_append(&cur, worktree);
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/");
		cd_strbuf_append_c(&cur, '/');
		cd_strbuf_append_n(&cur, c, n);
		c += n;
		if (*c == '/')
			c++;
		const struct cd_plan_path *pp = blookup(b, cur.buf);
		if (pp && pp->access != CD_ACCESS_WRITE)
			goto out; /* read-only or denied already: nothing can appear below */
		enum cd_file_type t = CD_FT_MISSING;
		r = b->in->ops->lstat_type(b->in->ops->ctx, cur.buf, &t);
		if (r < 0) {
			r = fail(b, r, "cannot inspect %s: %s", cur.buf, strerror_short(r));
			goto out;
		}
		switch (t) {
		case CD_FT_DIR:
			continue;
		case CD_FT_MISSING: {
			bool can = true;
			r = creatable(b, cur.buf, &can);
			if (r < 0 || !can)
				goto out;
			plan_add(b, cur.buf, CD_ACCESS_DENY, t, CD_ORIGIN_SUBMODULE, -1,
				 cd_xasprintf("missing submodule path %s (a gitlink in %s): masked "
					      "so that no repository can be planted there",
					      full, index));
			goto out;
		}
		case CD_FT_SYMLINK:
			r = fail(b, -EINVAL,
				 "submodule path %s (a gitlink in %s) crosses symlink %s, which "
				 "the sandbox could replace with a directory holding a "
				 "repository; replace it with the submodule's directory, or drop "
				 "the gitlink (git rm --cached)",
				 full, index, cur.buf);
			goto out;
		case CD_FT_REG:
		case CD_FT_OTHER:
		case CD_FT_COUNT:
			/*
			 * Not a directory: kept as it is, so that it cannot be
			 * replaced by one. Something other than a file is denied
			 * rather than read-only: it may be a concurrent run's mask
			 * on a missing path, which is shared only as a deny.
			 */
			plan_add(
				b, cur.buf, t == CD_FT_REG ? CD_ACCESS_READ : CD_ACCESS_DENY, t,
				CD_ORIGIN_SUBMODULE, -1,
				cd_xasprintf("submodule path %s (a gitlink in %s) is no directory: "
					     "kept so that no repository can be planted there",
					     full, index));
			goto out;
		}
	}
	if (blookup(b, q))
		goto out;
	enum cd_file_type t = CD_FT_MISSING;
	bool can = true;
	r = b->in->ops->lstat_type(b->in->ops->ctx, q, &t);
	if (r < 0) {
		r = fail(b, r, "cannot inspect %s: %s", q, strerror_short(r));
	} else if (t == CD_FT_SYMLINK) {
		r = fail(b, -EINVAL,
			 "submodule repository %s is a symlink, which the sandbox could "
			 "redirect; replace it with a directory or a \"gitdir:\" file",
			 q);
	} else if (t == CD_FT_MISSING && ((r = creatable(b, q, &can)) < 0 || !can)) {
		/* Nothing can create it (or the error is set). */
	} else {
		plan_add(b, q, CD_ACCESS_READ, t, CD_ORIGIN_SUBMODULE, -1,
			 t == CD_FT_MISSING
				 ? cd_xasprintf("uninitialized submodule %s (a gitlink in %s): "
						"masked so that no repository can be made there",
						full, index)
				 : cd_xasprintf("submodule repository of %s (a gitlink in %s)",
						full, index));
		r = queue_repo(b, full, q, t);
	}
out:
	cd_strbuf_done(&cur);
	free(full);
	free(q);
	return r;
}

/* An open index file, for cd_git_index_read(). */
struct index_file {
	const struct cd_fs_ops *ops;
	void *file;
};

static int index_read_at(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct index_file *f = ctx;
	return f->ops->read_at(f->ops->ctx, f->file, off, buf, len);
}

#define INDEX_BUDGET_FIX                                                                       \
	"remove the repositories that should not be there (a sandboxed command may have made " \
	"them), name a narrower workspace root, or pass --allow-degraded=nested-repositories " \
	"so that nested repositories are not looked for"

/*
 * Read and parse one index file (want: see cd_git_index_read), out of the
 * plan's budget. 0, also when there is none or when we cannot read it (then
 * neither can git run as us: *ix stays empty), or a refusal.
 */
static int read_index(struct builder *b, const char *path, const size_t *want, size_t n_want,
		      struct cd_git_index *ix)
{
	const struct cd_fs_ops *ops = b->in->ops;
	struct index_file f = { .ops = ops };
	struct cd_git_index_src src = { .ctx = &f, .read_at = index_read_at };
	char *why = NULL;
	int r;

	memset(ix, 0, sizeof(*ix));
	r = ops->open_file(ops->ctx, path, &f.file, &src.size);
	if (r == -ENOENT)
		return 0;
	if (r == -EACCES || r == -EPERM) {
		note(b, "%s cannot be read: the submodules it names are not protected", path);
		return 0;
	}
	if (r < 0)
		return fail(b, r, "cannot read the git index %s to protect its submodules: %s",
			    path, strerror_short(r));
	r = cd_git_index_read(&src, want, n_want, &b->index_budget, ix, &why);
	ops->close_file(ops->ctx, f.file);
	if (r == -ENOBUFS && b->limits.index_bytes % (1024 * 1024) == 0)
		r = fail(b, -E2BIG,
			 "reading the git indexes that name the submodules to protect takes more "
			 "than %zu MiB, the most cordon reads for one run (reached at "
			 "%s); " INDEX_BUDGET_FIX,
			 b->limits.index_bytes >> 20, path);
	else if (r == -ENOBUFS)
		r = fail(b, -E2BIG,
			 "reading the git indexes that name the submodules to protect takes more "
			 "than %zu bytes, the most cordon reads for one run (reached at "
			 "%s); " INDEX_BUDGET_FIX,
			 b->limits.index_bytes, path);
	else if (r == -E2BIG)
		r = fail(b, r,
			 "the git index %s names more than %d submodules (gitlinks), more than "
			 "cordon protects; name a narrower workspace root",
			 path, CD_GIT_INDEX_GITLINKS_MAX);
	else if (r == -EINVAL)
		r = fail(b, r,
			 "cannot read the git index %s to protect the submodules it names: %s; "
			 "`git status` rewrites it",
			 path, why);
	else if (r < 0)
		r = fail(b, r, "cannot read the git index %s to protect its submodules: %s", path,
			 strerror_short(r));
	free(why);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The gitlinks of one repository (b->repos[idx]). */
static int protect_repo_gitlinks(struct builder *b, size_t idx)
{
	/* Copies: protecting may queue repositories, moving b->repos. */
	char *worktree = cd_xstrdup(b->repos[idx].worktree);
	char *index = cd_path_join(b->repos[idx].gitdir, "index");
	struct cd_git_index ix = { 0 }, shared = { 0 };
	char **links = NULL;
	int r = 0;

	/* Nothing the command can change lies in the work tree: spare the read. */
	if (!writable(b, worktree) && !writable_below(b, worktree))
		goto out;
	r = read_index(b, index, NULL, 0, &ix);
	if (r >= 0 && ix.shared) {
		/*
		 * A split index keeps most entries in a shared file: its
		 * gitlinks, and the entries the main file replaces with
		 * gitlinks. (One the main file deletes is protected anyway.)
		 */
		char *name = cd_xasprintf("sharedindex.%s", ix.shared);
		char *spath = cd_path_join(b->repos[idx].gitdir, name);
		free(name);
		r = read_index(b, spath, ix.replaced, ix.n_replaced, &shared);
		if (r >= 0 && (shared.shared || shared.n_replaced))
			r = fail(b, -EINVAL, "the shared git index %s is split itself", spath);
		free(spath);
	}
	links = ix.gitlinks;
	ix.gitlinks = NULL;
	for (size_t i = 0; shared.gitlinks && shared.gitlinks[i]; i++)
		cd_strv_push(&links, shared.gitlinks[i]);
	size_t n = cd_strv_length(links);
	if (n > 1)
		qsort(links, n, sizeof(*links), cmp_str);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		if (i > 0 && cd_streq(links[i], links[i - 1]))
			continue; /* conflict stages, or both files of a split index */
		if (gitlink_path_ok(links[i]))
			r = protect_gitlink(b, worktree, index, links[i]);
	}
out:
	cd_git_index_done(&ix);
	cd_git_index_done(&shared);
	cd_strv_free(links);
	free(worktree);
	free(index);
	return r;
}

/* Every repository queued since the last call, and those their submodules add. */
static int protect_submodules(struct builder *b)
{
	int r = 0;
	for (; r >= 0 && b->repos_done < b->n_repos; b->repos_done++)
		r = protect_repo_gitlinks(b, b->repos_done);
	return r;
}

/*
 * A bind that crossed a symlink the sandboxed side can rewrite would follow
 * whatever that side planted there on the next run.
 */
static int check_symlinks(struct builder *b)
{
	for (size_t i = 0; i < b->n_bound; i++) {
		const struct bound *bd = &b->bound[i];
		for (size_t k = 0; bd->links && bd->links[k]; k++) {
			const struct cd_plan_path *rule = NULL;
			if (baccess(b, bd->links[k], &rule) == CD_ACCESS_WRITE)
				return fail(b, -EINVAL,
					    "cannot bind %s: it crosses symlink %s inside writable "
					    "root "
					    "%s, which a sandboxed process could have planted",
					    bd->raw, bd->links[k], rule ? rule->path : "/");
		}
	}
	return 0;
}

static void finish(struct cd_plan *plan)
{
	const struct cd_plan_path *root = lookup(plan, "/");
	bool narrower = false;
	for (size_t i = 0; i < plan->n_paths; i++) {
		struct cd_plan_path *pp = &plan->paths[i];
		const struct cd_plan_path *parent = nearest(plan, pp->path, true);
		pp->parent_access = parent ? parent->access : CD_ACCESS_DENY;
		pp->carve_out = permissiveness(pp->access) < permissiveness(pp->parent_access);
		if (pp->carve_out) {
			plan->has_carve_outs = true;
			if (pp->access == CD_ACCESS_DENY)
				plan->has_deny_carve_outs = true;
		}
		if (pp->access != CD_ACCESS_WRITE)
			narrower = true;
	}
	plan->full_read = root && root->access != CD_ACCESS_DENY;
	if (root && root->access == CD_ACCESS_WRITE && !narrower)
		plan->fs_unrestricted = true;
}

static void builder_done(struct builder *b)
{
	free(b->ix);
	cd_strset_done(&b->above_writable);
	cd_strset_done(&b->write_raw);
	for (size_t i = 0; i < b->n_bound; i++)
		bound_done(&b->bound[i]);
	free(b->bound);
	cd_strv_free(b->roots);
	for (size_t i = 0; i < b->n_repos; i++) {
		free(b->repos[i].worktree);
		free(b->repos[i].gitdir);
	}
	free(b->repos);
}

int cd_plan_build(const struct cd_profile *p, const struct cd_bind_input *in, struct cd_plan **ret,
		  char **reterr)
{
	struct builder b = {
		.profile = p,
		.in = in,
		.limits = {
			.dirs = CD_NESTED_SCAN_MAX_DIRS,
			.entries = CD_NESTED_SCAN_MAX_ENTRIES,
			.depth = CD_NESTED_SCAN_MAX_DEPTH,
			.repos = CD_NESTED_REPOS_MAX,
			.gitlinks = CD_SUBMODULES_MAX,
			.index_bytes = CD_GIT_INDEX_BUDGET,
		},
	};
	int r = 0;
	*ret = NULL;
	if (reterr)
		*reterr = NULL;

	if (!p || !in || !in->ops || !in->cwd)
		return -EINVAL;
	if (in->limits)
		b.limits = *in->limits;
	b.index_budget = b.limits.index_bytes;
	b.plan = cd_xcalloc(1, sizeof(*b.plan));
	b.plan->type = p->type;
	b.plan->network = p->type == CD_PROFILE_DISABLED ? CD_NET_ENABLED : p->network;

	if (in->cwd[0] != '/') {
		r = fail(&b, -EINVAL, "cwd %s is not an absolute path", in->cwd);
		goto out;
	}
	for (size_t i = 0; i < in->n_workspace_roots; i++) {
		const char *w = in->workspace_roots[i];
		if (!w || w[0] != '/') {
			r = fail(&b, -EINVAL, "workspace root %s is not an absolute path",
				 w ? w : "(null)");
			goto out;
		}
	}
	r = cd_canonicalize(in->ops, in->cwd, &b.plan->cwd, NULL, NULL);
	if (r < 0) {
		r = fail(&b, r, "cannot resolve cwd %s: %s", in->cwd, strerror_short(r));
		goto out;
	}

	if (p->type != CD_PROFILE_MANAGED || p->fs_unrestricted) {
		b.plan->fs_unrestricted = true;
		b.plan->full_read = true;
		goto out;
	}

	for (size_t i = 0; i < in->n_workspace_roots; i++) {
		char *canon = NULL;
		enum cd_file_type t = CD_FT_MISSING;
		r = cd_canonicalize(in->ops, in->workspace_roots[i], &canon, NULL, &t);
		if (r < 0) {
			r = fail(&b, r, "cannot resolve workspace root %s: %s",
				 in->workspace_roots[i], strerror_short(r));
			goto out;
		}
		if (t == CD_FT_DIR) {
			cd_strv_push_take(&b.roots, canon);
			b.n_roots++;
		} else {
			free(canon);
		}
	}

	for (size_t i = 0; r >= 0 && i < p->n_entries; i++)
		r = bind_entry(&b, i);
	if (r < 0)
		goto out;

	/* Every process needs a bit bucket; a deny entry naming it still wins the tie. */
	enum cd_file_type nt = CD_FT_MISSING;
	r = in->ops->lstat_type(in->ops->ctx, "/dev/null", &nt);
	if (r < 0) {
		r = fail(&b, r, "cannot inspect /dev/null: %s", strerror_short(r));
		goto out;
	}
	plan_add(&b, "/dev/null", CD_ACCESS_WRITE, nt == CD_FT_SYMLINK ? CD_FT_OTHER : nt,
		 CD_ORIGIN_IMPLICIT, -1, cd_xstrdup("implicit: /dev/null is always writable"));

	/* Submodules before the scan, which then finds them protected (and says why). */
	r = protect_metadata(&b);
	if (r >= 0)
		r = protect_submodules(&b);
	if (r >= 0)
		r = scan_nested(&b);
	if (r >= 0)
		r = protect_submodules(&b);
	if (r < 0)
		goto out;
	r = check_symlinks(&b);
	if (r < 0)
		goto out;
	plan_sort(&b);
	finish(b.plan);
out:
	/* Sorted, also as far as a refused build got (explain shows it). */
	plan_sort(&b);
	if (!b.plan->notes)
		b.plan->notes = cd_xcalloc(1, sizeof(char *));
	builder_done(&b);
	if (r < 0) {
		cd_plan_free(b.plan);
		if (reterr)
			*reterr = b.err;
		else
			free(b.err);
		return r;
	}
	free(b.err);
	*ret = b.plan;
	return 0;
}

struct cd_plan *cd_plan_free(struct cd_plan *plan)
{
	if (!plan)
		return NULL;
	for (size_t i = 0; i < plan->n_paths; i++) {
		free(plan->paths[i].path);
		free(plan->paths[i].why);
	}
	free(plan->paths);
	free(plan->cwd);
	cd_strv_free(plan->notes);
	cd_strv_free(plan->degraded);
	free(plan);
	return NULL;
}
