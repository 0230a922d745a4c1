/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * glob_pattern expansion (see glob.h). A pattern is split into components
 * and run as a small NFA over path components: the state set is a bit
 * mask (bit i = "components 0..i-1 of the pattern are consumed"), so
 * matching is linear in the path and "**" cannot blow up exponentially.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/glob.h"
#include "core/util.h"

struct comp {
	const char *s;
	size_t len;
	bool globstar; /* exactly "**" */
};

struct pattern {
	char *buf; /* the components, NUL-separated */
	struct comp comps[CD_GLOB_MAX_COMPONENTS];
	size_t n;
};

static bool is_meta(char c)
{
	return c == '*' || c == '?' || c == '[' || c == '\\';
}

static bool has_meta(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (is_meta(s[i]))
			return true;
	return false;
}

/* [:name:] inside a class: 1 when c is in it, 0 when not, -1 for an unknown name. */
static int posix_class(const char *name, size_t len, char ch)
{
	static const struct {
		const char *name;
		int (*fn)(int);
	} classes[] = {
		{ "alnum", isalnum }, { "alpha", isalpha }, { "blank", isblank },
		{ "cntrl", iscntrl }, { "digit", isdigit }, { "graph", isgraph },
		{ "lower", islower }, { "print", isprint }, { "punct", ispunct },
		{ "space", isspace }, { "upper", isupper }, { "xdigit", isxdigit },
	};
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (strlen(classes[i].name) == len && !memcmp(classes[i].name, name, len))
			return classes[i].fn((unsigned char)ch) != 0;
	return -1;
}

/*
 * A bracket class starting just after '['. Returns the length of the class
 * body including the closing ']', or 0 when it is unterminated. *hit says
 * whether c is in the class. With bad (the syntax check), a range that
 * POSIX leaves undefined sets *bad to why: one ending in "[:", "[." or
 * "[=" (glibc's fnmatch reads a class or a collating symbol there, git and
 * ripgrep a '['), or one whose end sorts before its start (ripgrep
 * refuses it, a Seatbelt regex does not compile).
 */
static size_t class_match(const char *p, size_t len, char c, bool *hit, const char **bad)
{
	size_t i = 0;
	bool neg = false, in = false;

	if (i < len && (p[i] == '!' || p[i] == '^')) {
		neg = true;
		i++;
	}
	for (bool first = true; i < len; first = false) {
		if (p[i] == ']' && !first) {
			*hit = in != neg;
			return i + 1;
		}
		if (p[i] == '[' && i + 1 < len && p[i + 1] == ':') {
			size_t k = i + 2;
			while (k + 1 < len && !(p[k] == ':' && p[k + 1] == ']'))
				k++;
			if (k + 1 >= len)
				return 0;
			int m = posix_class(p + i + 2, k - i - 2, c);
			if (m < 0)
				return 0; /* unknown class: refused by the syntax check */
			if (m)
				in = true;
			i = k + 2;
			continue;
		}
		char lo = p[i];
		if (lo == '\\' && i + 1 < len)
			lo = p[++i];
		i++;
		char hi = lo;
		if (i + 1 < len && p[i] == '-' && p[i + 1] != ']') {
			hi = p[i + 1];
			if (bad && hi == '[' && i + 2 < len &&
			    (p[i + 2] == ':' || p[i + 2] == '.' || p[i + 2] == '='))
				*bad = "a range cannot end in \"[:\", \"[.\" or \"[=\"";
			i += 2;
			if (hi == '\\' && i < len)
				hi = p[i++];
			if (bad && !*bad && (unsigned char)hi < (unsigned char)lo)
				*bad = "a range's end sorts before its start";
		}
		if ((unsigned char)c >= (unsigned char)lo && (unsigned char)c <= (unsigned char)hi)
			in = true;
	}
	return 0;
}

/*
 * One component against one name; '*' backtracks to its last position only.
 * Up to plen x len(name) iterations, each counted in *steps.
 */
static bool comp_match(const char *p, size_t plen, const char *s, uint64_t *steps)
{
	size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
	size_t slen = strlen(s);

	while (si < slen) {
		++*steps;
		if (pi < plen) {
			char pc = p[pi];
			if (pc == '*') {
				star_p = ++pi;
				star_s = si;
				continue;
			}
			if (pc == '?') {
				pi++;
				si++;
				continue;
			}
			if (pc == '[') {
				bool hit = false;
				size_t n =
					class_match(p + pi + 1, plen - pi - 1, s[si], &hit, NULL);
				/* A class is read through for each character it is tried on. */
				*steps += n;
				if (n && hit) {
					pi += 1 + n;
					si++;
					continue;
				}
				if (!n && s[si] == '[') { /* unterminated: a literal '[' */
					pi++;
					si++;
					continue;
				}
			} else {
				if (pc == '\\' && pi + 1 < plen)
					pc = p[++pi];
				if (pc == s[si]) {
					pi++;
					si++;
					continue;
				}
			}
		}
		if (star_p == SIZE_MAX)
			return false;
		pi = star_p;
		si = ++star_s;
	}
	while (pi < plen && p[pi] == '*')
		pi++;
	return pi == plen;
}

size_t cd_glob_bracket(const char *p, size_t len, uint8_t set[32])
{
	size_t n = 0;

	memset(set, 0, 32);
	for (unsigned c = 1; c < 256; c++) {
		bool hit = false;
		n = class_match(p + 1, len - 1, (char)c, &hit, NULL);
		if (!n)
			return 0;
		if (hit)
			set[c / 8] |= (uint8_t)(1u << c % 8);
	}
	return n + 1;
}

static void pattern_done(struct pattern *pat)
{
	free(pat->buf);
	pat->buf = NULL;
}

/*
 * Split a pattern (absolute or relative) into components: "" and "." are
 * dropped, ".." is refused, a trailing "**" becomes "**" "*" (one or more
 * components). With ret_static, also count the leading wildcard-free ones.
 */
static int pattern_split(const char *s, struct pattern *pat, size_t *ret_static, char **reterr)
{
	size_t n_static = 0;
	bool in_static = true;

	*pat = (struct pattern){ .buf = cd_xstrdup(s) };
	for (char *p = pat->buf; *p;) {
		char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char *next = end ? end + 1 : p + len;
		if (end)
			*end = '\0';
		if (len == 0 || (len == 1 && p[0] == '.')) {
			p = next;
			continue;
		}
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			*reterr = cd_xasprintf("glob pattern %s: \"..\" components are not allowed",
					       s);
			pattern_done(pat);
			return -EINVAL;
		}
		if (pat->n + 1 >= CD_GLOB_MAX_COMPONENTS) {
			*reterr = cd_xasprintf("glob pattern %s has more than %d components", s,
					       CD_GLOB_MAX_COMPONENTS - 1);
			pattern_done(pat);
			return -EINVAL;
		}
		for (size_t i = 0; i < len; i++) {
			bool hit;
			size_t n;
			if (p[i] == '\\') {
				if (++i < len)
					continue;
				*reterr = cd_xasprintf(
					"glob pattern %s: a component ends in \"\\\"", s);
				pattern_done(pat);
				return -EINVAL;
			}
			if (p[i] != '[')
				continue;
			const char *bad = NULL;
			n = class_match(p + i + 1, len - i - 1, 'x', &hit, &bad);
			if (n && bad) {
				*reterr = cd_xasprintf("glob pattern %s: %s", s, bad);
				pattern_done(pat);
				return -EINVAL;
			}
			if (!n) {
				*reterr = cd_xasprintf(
					"glob pattern %s: unterminated \"[\" or unknown "
					"[:class:]",
					s);
				pattern_done(pat);
				return -EINVAL;
			}
			i += n;
		}
		if (in_static && !has_meta(p, len))
			n_static++;
		else
			in_static = false;
		pat->comps[pat->n++] = (struct comp){
			.s = p,
			.len = len,
			.globstar = len >= 2 && strspn(p, "*") == len,
		};
		p = next;
	}
	if (pat->n && pat->comps[pat->n - 1].globstar)
		pat->comps[pat->n++] = (struct comp){ .s = "*", .len = 1 };
	if (ret_static)
		*ret_static = n_static;
	return 0;
}

static uint64_t closure(const struct pattern *pat, size_t from, uint64_t set)
{
	for (size_t i = from; i < pat->n; i++)
		if ((set >> i & 1) && pat->comps[i].globstar)
			set |= UINT64_C(1) << (i + 1);
	return set;
}

static uint64_t step(const struct pattern *pat, size_t from, uint64_t set, const char *name,
		     uint64_t *steps)
{
	uint64_t next = 0;
	for (size_t i = from; i < pat->n; i++) {
		if (!(set >> i & 1))
			continue;
		if (pat->comps[i].globstar)
			next |= UINT64_C(1) << i;
		else if (comp_match(pat->comps[i].s, pat->comps[i].len, name, steps))
			next |= UINT64_C(1) << (i + 1);
	}
	return closure(pat, from, next);
}

static bool accepts(const struct pattern *pat, uint64_t set)
{
	return set >> pat->n & 1;
}

/* Some state can still consume more components. */
static bool alive(const struct pattern *pat, uint64_t set)
{
	return (set & ((UINT64_C(1) << pat->n) - 1)) != 0;
}

int cd_glob_check(const char *pattern, char **reterr)
{
	struct pattern pat;
	const char *s = pattern;

	*reterr = NULL;
	if (!strncmp(s, CD_GLOB_PROJECT_ROOTS_PREFIX, strlen(CD_GLOB_PROJECT_ROOTS_PREFIX))) {
		s += strlen(CD_GLOB_PROJECT_ROOTS_PREFIX);
		if (s[0] == '/') {
			*reterr =
				cd_xasprintf("glob pattern %s: the part after %s must be relative",
					     pattern, CD_GLOB_PROJECT_ROOTS_PREFIX);
			return -EINVAL;
		}
	}
	int r = pattern_split(s, &pat, NULL, reterr);
	if (r < 0)
		return r;
	if (pat.n == 0) {
		pattern_done(&pat);
		*reterr = cd_xasprintf("glob pattern %s names no path", pattern);
		return -EINVAL;
	}
	pattern_done(&pat);
	return 0;
}

bool cd_glob_match(const char *pattern, const char *path)
{
	struct pattern pat;
	char *err = NULL;
	bool ok = false;

	if (pattern_split(pattern, &pat, NULL, &err) < 0) {
		free(err);
		return false;
	}
	uint64_t set = closure(&pat, 0, 1), steps = 0;
	char *copy = cd_xstrdup(path);
	for (char *c = copy; *c && set;) {
		char *end = strchr(c, '/');
		if (end)
			*end = '\0';
		if (*c)
			set = step(&pat, 0, set, c, &steps);
		c = end ? end + 1 : c + strlen(c);
	}
	ok = accepts(&pat, set);
	free(copy);
	pattern_done(&pat);
	return ok;
}

struct pending {
	char *path; /* absolute */
	unsigned depth;
	uint64_t set;
};

struct walk {
	const struct pattern *pat;
	size_t from; /* first non-static component */
	unsigned max_depth;
	bool depth_set;
	struct cd_glob_budget *budget;
	const char *pattern;
	struct pending *queue;
	size_t n_queue;
	const struct pending *cur;
	char **found; /* grows through cd_strv_append_take */
	size_t n_found;
	char *err;
};

static int walk_entry(void *arg, const char *name, enum cd_file_type type)
{
	struct walk *w = arg;
	const struct pending *cur = w->cur;

	if (++w->budget->visits > CD_GLOB_MAX_VISITS) {
		w->err = cd_xasprintf("glob pattern %s: the scan read more than %d directory "
				      "entries; narrow the pattern or set glob_scan_max_depth",
				      w->pattern, CD_GLOB_MAX_VISITS);
		return -E2BIG;
	}
	/* A symlink gives no access of its own: what it points to is governed by
	 * its own path (and denied if that matches). */
	if (type == CD_FT_SYMLINK)
		return 0;
	uint64_t set = step(w->pat, w->from, cur->set, name, &w->budget->steps);
	if (w->budget->steps > CD_GLOB_MAX_STEPS) {
		w->err = cd_xasprintf("glob pattern %s: matching the names it meets takes more "
				      "than %llu steps; simplify the pattern",
				      w->pattern, (unsigned long long)CD_GLOB_MAX_STEPS);
		return -E2BIG;
	}
	if (!set)
		return 0;
	char *path = cd_path_join(cur->path, name);
	if (accepts(w->pat, set)) {
		if (++w->budget->matches > CD_GLOB_MAX_MATCHES) {
			free(path);
			w->err = cd_xasprintf(
				"glob pattern %s matches more than %d paths, the limit; "
				"narrow the pattern",
				w->pattern, CD_GLOB_MAX_MATCHES);
			return -E2BIG;
		}
		/* A matched directory is denied whole: no need to look inside. */
		cd_strv_append_take(&w->found, &w->n_found, path);
		return 0;
	}
	if (type != CD_FT_DIR || !alive(w->pat, set)) {
		free(path);
		return 0;
	}
	if (cur->depth + 1 >= w->max_depth) {
		free(path);
		if (w->depth_set)
			return 0;
		w->err = cd_xasprintf("glob pattern %s: the tree is deeper than %u levels below "
				      "the pattern's fixed prefix; set glob_scan_max_depth to "
				      "scan a bounded depth",
				      w->pattern, w->max_depth);
		return -E2BIG;
	}
	w->queue = cd_grow_pow2(w->queue, w->n_queue, sizeof(*w->queue));
	w->queue[w->n_queue++] = (struct pending){
		.path = path,
		.depth = cur->depth + 1,
		.set = set,
	};
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int cd_glob_expand(const struct cd_fs_ops *ops, const char *pattern, unsigned max_depth,
		   struct cd_glob_budget *budget, char ***matches, char **reterr)
{
	struct pattern pat;
	size_t n_static;
	int r;

	*reterr = NULL;
	if (pattern[0] != '/') {
		*reterr = cd_xasprintf("glob pattern %s is not absolute", pattern);
		return -EINVAL;
	}
	r = pattern_split(pattern, &pat, &n_static, reterr);
	if (r < 0)
		return r;

	struct cd_strbuf prefix = { 0 };
	for (size_t i = 0; i < n_static; i++) {
		cd_strbuf_append_c(&prefix, '/');
		cd_strbuf_append_n(&prefix, pat.comps[i].s, pat.comps[i].len);
	}
	if (n_static == pat.n) {
		/* No wildcards: the path itself, existing or not (path or subtree). */
		if (++budget->matches > CD_GLOB_MAX_MATCHES) {
			*reterr = cd_xasprintf("glob patterns match more than %d paths, the limit",
					       CD_GLOB_MAX_MATCHES);
			r = -E2BIG;
		} else {
			cd_strv_push_take(matches,
					  prefix.len ? cd_strbuf_steal(&prefix) : cd_xstrdup("/"));
		}
		goto out;
	}
	if (n_static == 0) {
		*reterr = cd_xasprintf("glob pattern %s would scan the whole file system (its "
				       "fixed prefix is /); start it with a directory",
				       pattern);
		r = -EINVAL;
		goto out;
	}

	struct walk w = {
		.pat = &pat,
		.from = n_static,
		.max_depth = max_depth ? max_depth : CD_GLOB_DEFAULT_DEPTH,
		.depth_set = max_depth != 0,
		.budget = budget,
		.pattern = pattern,
	};
	w.queue = cd_grow_pow2(NULL, 0, sizeof(*w.queue));
	w.queue[w.n_queue++] = (struct pending){
		.path = cd_strbuf_steal(&prefix),
		.set = closure(&pat, n_static, UINT64_C(1) << n_static),
	};
	for (size_t i = 0; r >= 0 && i < w.n_queue; i++) {
		/* The callback may grow the queue: keep a copy of the current entry. */
		struct pending cur = w.queue[i];
		w.cur = &cur;
		r = ops->read_dir(ops->ctx, cur.path, walk_entry, &w);
		/* Gone or not a directory: nothing to deny there. */
		if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP) {
			r = 0;
		} else if (r == -EACCES && !w.err) {
			/* Not listable by us, yet maybe enterable (or chmod-able) from
			 * inside: a match may lie below, so deny the directory whole. */
			if (++budget->matches > CD_GLOB_MAX_MATCHES) {
				w.err = cd_xasprintf("glob pattern %s matches more than %d paths, "
						     "the limit; narrow the pattern",
						     pattern, CD_GLOB_MAX_MATCHES);
				r = -E2BIG;
			} else {
				cd_strv_append_take(&w.found, &w.n_found, cd_xstrdup(cur.path));
				r = 0;
			}
		} else if (r < 0 && !w.err)
			w.err = cd_xasprintf("glob pattern %s: cannot list %s: %s", pattern,
					     cur.path, strerror(-r));
	}
	for (size_t i = 0; i < w.n_queue; i++)
		free(w.queue[i].path);
	free(w.queue);
	if (r < 0) {
		*reterr = w.err;
		cd_strv_free(w.found);
	} else {
		size_t n = w.n_found;
		if (n) {
			qsort(w.found, n, sizeof(*w.found), cmp_str);
			/* Appended in one go: pushing each would count *matches each time. */
			size_t have = cd_strv_length(*matches);
			*matches = cd_xreallocarray(*matches, have + n + 1, sizeof(**matches));
			memcpy(*matches + have, w.found, n * sizeof(*w.found));
			(*matches)[have + n] = NULL;
		}
		free(w.found);
		free(w.err);
	}
out:
	cd_strbuf_done(&prefix);
	pattern_done(&pat);
	return r;
}
