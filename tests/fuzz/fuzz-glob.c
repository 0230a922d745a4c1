/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The glob engine (core/glob.c). Input: a pattern, optionally followed by
 * '\n' and a path to match it against. Every pattern goes through the
 * syntax check and the matcher; a valid one is also expanded over the fake
 * tree (fuzz-tree.c, never the host's), relative ones under /w. Properties
 * of an expansion that succeeded:
 *  - sound: every match is matched by the pattern (cd_glob_match);
 *  - complete: every directory or file of the tree that the pattern
 *    matches is a match or lies below one (a matched directory is denied
 *    whole), symlinks excepted (never matches);
 *  - sorted, and within the budget it reports;
 * and likewise with glob_scan_max_depth set, up to that depth.
 * And the matcher itself agrees with a plain reference: backtracking over
 * components, fnmatch(3) within one, "**" as zero or more components (a
 * trailing one as one or more); not where fnmatch(3) reads POSIX collating
 * symbols, which glob patterns do not have.
 * And the Seatbelt translation of a pattern (a POSIX extended regex, run
 * with regexec(3)) matches a path exactly when the matcher matches the
 * path or a directory above it (a deny covers a subtree), or it is refused
 * with a reason.
 */
#include "config.h"

#include <errno.h>
#include <fnmatch.h>
#include <regex.h>
#include <string.h>

#include "core/glob.h"
#include "core/util.h"
#include "fuzz.h"
#include "sandbox/seatbelt/sbpl.h"

#define REF_MAX 12

struct comps {
	char *buf;
	const char *c[REF_MAX];
	size_t n;
	bool too_many;
};

/* Split at '/', dropping empty components (and "." ones for a pattern). */
static void split(const char *s, bool pattern, struct comps *ret)
{
	*ret = (struct comps){ .buf = cd_xstrdup(s) };
	for (char *p = ret->buf, *next; p; p = next) {
		next = strchr(p, '/');
		if (next)
			*next++ = '\0';
		if (!*p || (pattern && cd_streq(p, ".")))
			continue;
		if (ret->n == REF_MAX - 1) {
			ret->too_many = true;
			return;
		}
		ret->c[ret->n++] = p;
	}
	if (pattern && ret->n && strspn(ret->c[ret->n - 1], "*") == strlen(ret->c[ret->n - 1]) &&
	    strlen(ret->c[ret->n - 1]) >= 2)
		ret->c[ret->n++] = "*";
}

static bool ref_match(const char *const *p, size_t np, const char *const *s, size_t ns)
{
	if (np == 0)
		return ns == 0;
	if (strlen(p[0]) >= 2 && strspn(p[0], "*") == strlen(p[0]))
		return ref_match(p + 1, np - 1, s, ns) ||
		       (ns > 0 && ref_match(p, np, s + 1, ns - 1));
	return ns > 0 && fnmatch(p[0], s[0], 0) == 0 && ref_match(p + 1, np - 1, s + 1, ns - 1);
}

static void check_match(const char *pattern, const char *path)
{
	struct comps p, s;

	/*
	 * fnmatch(3) also knows POSIX collating symbols and equivalence
	 * classes ("[[.a.]]", "[[=a=]]") inside a bracket expression, which
	 * git-style globs do not: there the reference is no reference.
	 */
	if (strchr(pattern, '[') != strrchr(pattern, '[') &&
	    (strstr(pattern, "[.") || strstr(pattern, "[=")))
		return;

	split(pattern, true, &p);
	split(path, false, &s);
	if (!p.too_many && !s.too_many) {
		bool want = ref_match(p.c, p.n, s.c, s.n);
		if (cd_glob_match(pattern, path) != want)
			fuzz_fail("'%s' against '%s': %d, the reference says %d", pattern, path,
				  !want, want);
	}
	free(p.buf);
	free(s.buf);
}

/* abs: the pattern made absolute; path: relative to where the pattern is anchored. */
static void check_seatbelt(const char *pattern, const char *abs, const char *path)
{
	char *err = NULL;
	char *re = cd_seatbelt_glob_regex(FUZZ_WORKSPACE, pattern, &err);
	if (!re) {
		fuzz_assert(err && *err);
		free(err);
		return;
	}
	fuzz_assert(!err);

	struct comps s;
	split(path, false, &s);
	bool plain = s.n > 0 && !s.too_many;
	for (size_t i = 0; i < s.n && plain; i++)
		plain = !cd_streq(s.c[i], ".") && !cd_streq(s.c[i], "..");
	if (plain) {
		struct cd_strbuf full = { 0 };
		bool want = false;
		if (pattern[0] != '/')
			cd_strbuf_append(&full, FUZZ_WORKSPACE);
		for (size_t i = 0; i < s.n; i++) {
			cd_strbuf_append_c(&full, '/');
			cd_strbuf_append(&full, s.c[i]);
			want = want || cd_glob_match(abs + 1, full.buf + 1);
		}
		regex_t rx;
		if (regcomp(&rx, re, REG_EXTENDED | REG_NOSUB))
			fuzz_fail("'%s' became '%s', which is no regex", pattern, re);
		bool got = regexec(&rx, full.buf, 0, NULL, 0) == 0;
		regfree(&rx);
		if (got != want)
			fuzz_fail("'%s' as the regex '%s' against '%s': %d, the matcher says %d",
				  pattern, re, full.buf, got, want);
		cd_strbuf_done(&full);
	}
	free(s.buf);
	free(re);
}

static bool is_wildcard_free(const char *pattern)
{
	return !strpbrk(pattern, "*?[\\");
}

static void check_expansion(const char *abs, char **found, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fuzz_assert(found[i][0] == '/');
		fuzz_assert(i == 0 || strcmp(found[i - 1], found[i]) < 0);
		if (!cd_glob_match(abs + 1, found[i] + 1))
			fuzz_fail("'%s' expanded to '%s', which it does not match", abs, found[i]);
	}
}

/* Every node of the tree and every directory above one (some more than once). */
static size_t depth_of(const char *path)
{
	size_t n = 0;
	for (const char *c = path; *c; c++)
		n += *c == '/';
	return n;
}

/* max_depth: only nodes that many levels below the fixed prefix (at depth base); 0: all. */
static void check_complete(const char *abs, char **found, size_t n, size_t base, unsigned max_depth)
{
	for (const char *const *t = fuzz_tree_paths(); *t; t++) {
		char *p = cd_xstrdup(*t);
		bool skip = fuzz_tree_is_symlink(p);
		for (;;) {
			if (max_depth && depth_of(p) > base + max_depth)
				skip = true;
			if (!skip && cd_glob_match(abs + 1, p + 1)) {
				bool covered = false;
				for (size_t i = 0; i < n && !covered; i++)
					covered = cd_path_is_beneath(p, found[i]);
				if (!covered)
					fuzz_fail("'%s' matches '%s', which its expansion misses",
						  abs, p);
			}
			skip = false;
			char *slash = strrchr(p, '/');
			if (!slash || slash == p)
				break;
			*slash = '\0';
		}
		free(p);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	const char *nl = memchr(buf, '\n', size);
	char *pattern = cd_xstrndup(buf, nl ? (size_t)(nl - buf) : size);
	char *path = nl ? cd_xstrndup(nl + 1, size - (size_t)(nl + 1 - buf)) : NULL;
	char *err = NULL;

	if (path)
		(void)cd_glob_match(pattern, path);
	int r = cd_glob_check(pattern, &err);
	if (r < 0) {
		fuzz_assert(r == -EINVAL && err && *err);
		free(err);
		goto out;
	}
	fuzz_assert(!err);
	if (cd_startswith(pattern, CD_GLOB_PROJECT_ROOTS_PREFIX))
		goto out; /* bound by the plan (fuzz-profile) */
	if (path)
		check_match(pattern, path);

	char *abs = pattern[0] == '/' ? cd_xstrdup(pattern)
				      : cd_xasprintf("%s/%s", FUZZ_WORKSPACE, pattern);
	if (path)
		check_seatbelt(pattern, abs, path);
	struct cd_glob_budget budget = { 0 };
	char **found = NULL;
	r = cd_glob_expand(fuzz_tree_ops(), abs, 0, &budget, &found, &err);
	if (r < 0) {
		fuzz_assert(err && *err && !found);
		free(err);
	} else {
		size_t n = cd_strv_length(found);
		fuzz_assert(!err && budget.matches == n && n <= CD_GLOB_MAX_MATCHES);
		/* Without wildcards the pattern names its one path, existing or not. */
		if (!is_wildcard_free(abs)) {
			check_expansion(abs, found, n);
			check_complete(abs, found, n, 0, 0);
		}
		cd_strv_free(found);
	}

	/*
	 * glob_scan_max_depth set: the walk stops that many levels below the
	 * fixed prefix, silently; what lies within must still be complete.
	 */
	struct comps c;
	split(abs, true, &c);
	size_t base = 0;
	while (base < c.n && is_wildcard_free(c.c[base]))
		base++;
	unsigned depth = 1 + (unsigned)(size % 3);
	if (!c.too_many && base < c.n && base > 0) {
		budget = (struct cd_glob_budget){ 0 };
		found = NULL;
		r = cd_glob_expand(fuzz_tree_ops(), abs, depth, &budget, &found, &err);
		fuzz_assert(r == 0 || r == -E2BIG);
		if (r == 0) {
			size_t n = cd_strv_length(found);
			check_expansion(abs, found, n);
			check_complete(abs, found, n, base, depth);
			cd_strv_free(found);
		}
		free(err);
		err = NULL;
	}
	free(c.buf);
	free(abs);
out:
	free(pattern);
	free(path);
	return 0;
}
