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
 *  - sorted, and within the budget it reports.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "core/glob.h"
#include "core/util.h"
#include "fuzz.h"

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
static void check_complete(const char *abs, char **found, size_t n)
{
	for (const char *const *t = fuzz_tree_paths(); *t; t++) {
		char *p = cd_xstrdup(*t);
		bool skip = fuzz_tree_is_symlink(p);
		for (;;) {
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

	char *abs = pattern[0] == '/' ? cd_xstrdup(pattern)
				      : cd_xasprintf("%s/%s", FUZZ_WORKSPACE, pattern);
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
			check_complete(abs, found, n);
		}
		cd_strv_free(found);
	}
	free(abs);
out:
	free(pattern);
	free(path);
	return 0;
}
