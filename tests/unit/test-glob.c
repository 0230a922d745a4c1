/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * glob_pattern syntax, matching and bounded expansion (core/glob.h),
 * against the in-memory tree of fakefs.c.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/glob.h"
#include "core/util.h"
#include "fakefs.h"

/* ---- matching ---------------------------------------------------------- */

static const struct {
	const char *pattern, *path;
	bool match;
} matches[] = {
	{ "*.env", "a.env", true },
	{ "*.env", ".env", true },
	{ "*.env", "dir/a.env", false }, /* '*' stays in one component */
	{ "*", "", false },
	{ "a?c", "abc", true },
	{ "a?c", "ac", false },
	{ "a?c", "a/c", false },
	{ "[ab]x", "bx", true },
	{ "[ab]x", "cx", false },
	{ "[!ab]x", "cx", true },
	{ "[^ab]x", "ax", false },
	{ "[a-c]", "b", true },
	{ "[a-c]", "d", false },
	{ "[]]", "]", true },
	{ "[!]]", "x", true },
	{ "[a\\-]", "-", true },
	{ "\\*", "*", true },
	{ "\\*", "x", false },
	{ "a*b*c", "aXbYc", true },
	{ "a*b*c", "aXbY", false },
	{ "*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false },
	{ "**/.env", ".env", true },
	{ "**/.env", "a/b/c/.env", true },
	{ "**/.env", "a/b/c/.envx", false },
	{ "a/**/b", "a/b", true },
	{ "a/**/b", "a/x/y/b", true },
	{ "a/**/b", "a/x/y/c", false },
	{ "a/**", "a", false }, /* trailing ** is what lies inside */
	{ "a/**", "a/x", true },
	{ "a/**", "a/x/y", true },
	{ "**/**/**/**/**/**/**/**/**/x", "a/b/c/d/e/f/g/h/i/j/k/l/m/n/y", false },
	{ "./a//b", "a/b", true },
	{ "a/b", "a/b/c", false },
	{ "x**y", "xaby", true }, /* "**" inside a component is two '*' */
	{ "x**y", "xa/by", false },
	{ "key[[:digit:]]", "key1", true },
	{ "key[[:digit:]]", "key:]", false },
	{ "[[:upper:][:digit:]_]*", "_x", true },
	{ "[![:alpha:]]", "a", false },
	{ "s/***/*.key", "s/a/b/id.key", true }, /* all-star components are "**" */
};

START_TEST(test_match)
{
	ck_assert_msg(cd_glob_match(matches[_i].pattern, matches[_i].path) == matches[_i].match,
		      "%s vs %s: want %d", matches[_i].pattern, matches[_i].path,
		      matches[_i].match);
}
END_TEST

/* ---- syntax ------------------------------------------------------------ */

static const struct {
	const char *pattern, *err; /* err NULL: valid */
} syntax[] = {
	{ "**/*.env", NULL },
	{ "/abs/[a-z]*", NULL },
	{ "codex-project-roots://**/*.pem", NULL },
	{ "[[]", NULL },
	{ "\\[x", NULL },
	{ "a/[bc", "unterminated \"[\"" },
	{ "[[:nope:]]", "unknown [:class:]" },
	{ "[[:alpha]", "unterminated" },
	{ "[a-z0-9_-]", NULL },
	{ "[]a-]", NULL },
	{ "[!--.]", NULL },
	{ "[x-[:space:]]", "a range cannot end in \"[:\"" },
	{ "[]dex-[:space:]pcodex-pr]", "a range cannot end in \"[:\"" },
	{ "[A-[.z.]]", "a range cannot end in \"[:\", \"[.\" or \"[=\"" },
	{ "[A-[=z=]]", "a range cannot end in" },
	{ "a/[z-a]", "a range's end sorts before its start" },
	{ "[x-[]", "a range's end sorts before its start" },
	{ "[a-\\\\]", "a range's end sorts before its start" },
	{ "[[-a]", NULL },
	{ "a/../b", "\"..\" components are not allowed" },
	{ "a\\", "a component ends in \"\\\"" },
	{ "/", "names no path" },
	{ "./.", "names no path" },
	{ "codex-project-roots:///etc/x", "must be relative" },
};

START_TEST(test_syntax)
{
	char *err = NULL;
	int r = cd_glob_check(syntax[_i].pattern, &err);
	if (!syntax[_i].err) {
		ck_assert_msg(r == 0, "%s: %s", syntax[_i].pattern, err ? err : "?");
	} else {
		ck_assert_int_eq(r, -EINVAL);
		ck_assert_ptr_nonnull(err);
		ck_assert_msg(strstr(err, syntax[_i].err), "%s: got %s", syntax[_i].pattern, err);
	}
	free(err);
}
END_TEST

START_TEST(test_syntax_too_deep)
{
	struct cd_strbuf sb = { 0 };
	char *err = NULL;
	for (int i = 0; i < CD_GLOB_MAX_COMPONENTS; i++)
		cd_strbuf_append(&sb, "a/");
	ck_assert_int_eq(cd_glob_check(sb.buf, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "components"));
	free(err);
	cd_strbuf_done(&sb);
}
END_TEST

/* ---- expansion --------------------------------------------------------- */

static struct cd_fakefs *fs;
static char **found;
static char *err;
static struct cd_glob_budget budget;

static void setup(void)
{
	fs = cd_fakefs_new();
	cd_fakefs_file(fs, "/w/.env", NULL);
	cd_fakefs_file(fs, "/w/src/.env.local", NULL);
	cd_fakefs_file(fs, "/w/src/main.c", NULL);
	cd_fakefs_file(fs, "/w/src/deep/er/.env", NULL);
	cd_fakefs_dir(fs, "/w/secrets/inner");
	cd_fakefs_file(fs, "/w/secrets/inner/.env", NULL);
	cd_fakefs_symlink(fs, "/w/link", "/outside");
	cd_fakefs_file(fs, "/outside/.env", NULL);
	found = NULL;
	err = NULL;
	budget = (struct cd_glob_budget){ 0 };
}

static void teardown(void)
{
	cd_strv_free(found);
	free(err);
	cd_fakefs_free(fs);
}

static int expand(const char *pattern, unsigned depth)
{
	return cd_glob_expand(cd_fakefs_ops(fs), pattern, depth, &budget, &found, &err);
}

static void assert_found(const char *const *want)
{
	size_t n = 0;
	for (; want[n]; n++) {
		ck_assert_msg(found && found[n], "missing %s", want[n]);
		ck_assert_str_eq(found[n], want[n]);
	}
	ck_assert_msg(!found || !found[n], "unexpected %s", found ? found[n] : "");
}

START_TEST(test_expand_globstar)
{
	ck_assert_int_eq(expand("/w/**/.env*", 0), 0);
	/* Sorted, symlinks not followed (nothing under /w/link). */
	assert_found((const char *const[]){ "/w/.env", "/w/secrets/inner/.env", "/w/src/.env.local",
					    "/w/src/deep/er/.env", NULL });
	ck_assert_uint_eq(budget.matches, 4);
}
END_TEST

/* A matched directory is returned whole; nothing inside it is listed. */
START_TEST(test_expand_directory_match)
{
	ck_assert_int_eq(expand("/w/secret*", 0), 0);
	assert_found((const char *const[]){ "/w/secrets", NULL });
}
END_TEST

/* Without "**" the walk stops at the pattern's depth: /w/src/deep is not read. */
START_TEST(test_expand_pruned)
{
	cd_fakefs_fail(fs, "/w/src/deep", EIO);
	ck_assert_int_eq(expand("/w/*/*.c", 0), 0);
	assert_found((const char *const[]){ "/w/src/main.c", NULL });
	/* And only directories whose name can lead to a match are read. */
	cd_fakefs_fail(fs, "/w/secrets", EIO);
	ck_assert_int_eq(expand("/w/s[r]c/*.local", 0), 0);
	assert_found((const char *const[]){ "/w/src/main.c", "/w/src/.env.local", NULL });
}
END_TEST

START_TEST(test_expand_literal_and_missing)
{
	ck_assert_int_eq(expand("/w/not/there", 0), 0);
	assert_found((const char *const[]){ "/w/not/there", NULL });
	ck_assert_int_eq(expand("/nowhere/**/x", 0), 0);
	assert_found((const char *const[]){ "/w/not/there", NULL });
	/* A directory we cannot list may hide a match: it is denied whole. */
	cd_fakefs_fail(fs, "/w/secrets", EACCES);
	ck_assert_int_eq(expand("/w/secrets/**", 0), 0);
	assert_found((const char *const[]){ "/w/not/there", "/w/secrets", NULL });
}
END_TEST

/* Symlinks are never matches: /w/link points outside and is left alone. */
START_TEST(test_expand_symlinks_skipped)
{
	ck_assert_int_eq(expand("/w/l*", 0), 0);
	ck_assert_ptr_null(found);
	ck_assert_int_eq(expand("/w/**/.env", 0), 0);
	assert_found((const char *const[]){ "/w/.env", "/w/secrets/inner/.env",
					    "/w/src/deep/er/.env", NULL });
}
END_TEST

START_TEST(test_expand_errors)
{
	ck_assert_int_eq(expand("relative/*", 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "is not absolute"));
	free(err);
	err = NULL;
	ck_assert_int_eq(expand("/**/x", 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "would scan the whole file system"));
	free(err);
	err = NULL;
	cd_fakefs_fail(fs, "/w/src", EIO);
	ck_assert_int_eq(expand("/w/**/x", 0), -EIO);
	ck_assert_ptr_nonnull(strstr(err, "cannot list /w/src"));
	ck_assert_ptr_null(found);
}
END_TEST

static void deep_tree(unsigned levels)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "/d");
	for (unsigned i = 0; i < levels; i++)
		cd_strbuf_append(&sb, "/x");
	cd_fakefs_dir(fs, sb.buf);
	cd_strbuf_done(&sb);
}

/* The default depth bound refuses; an explicit one stops quietly. */
START_TEST(test_expand_depth)
{
	deep_tree(CD_GLOB_DEFAULT_DEPTH + 2);
	cd_fakefs_file(fs, "/d/x/x/k.pem", NULL);
	ck_assert_int_eq(expand("/d/**/*.pem", 0), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err, "deeper than 64 levels"));
	ck_assert_ptr_nonnull(strstr(err, "glob_scan_max_depth"));
	free(err);
	err = NULL;
	ck_assert_int_eq(expand("/d/**/*.pem", 2), 0);
	ck_assert_ptr_null(found);
	ck_assert_int_eq(expand("/d/**/*.pem", 3), 0);
	assert_found((const char *const[]){ "/d/x/x/k.pem", NULL });
}
END_TEST

/* More than 8,192 matches over a whole plan is refused. */
START_TEST(test_expand_match_limit)
{
	char path[64];
	for (int i = 0; i < 5000; i++) {
		snprintf(path, sizeof(path), "/m/a/%d.key", i);
		cd_fakefs_file(fs, path, NULL);
		snprintf(path, sizeof(path), "/m/b/%d.key", i);
		cd_fakefs_file(fs, path, NULL);
	}
	ck_assert_int_eq(expand("/m/a/*.key", 0), 0);
	ck_assert_uint_eq(budget.matches, 5000);
	ck_assert_int_eq(expand("/m/b/*.key", 0), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err, "matches more than 8192 paths"));
	ck_assert_uint_eq(cd_strv_length(found), 5000);
}
END_TEST

/*
 * A component pattern costs up to its length times each name's: counted
 * over the plan, and refused past CD_GLOB_MAX_STEPS rather than run for
 * hours (a component of 100,000 '*' against each of 2,000 names), and so
 * does a long character class.
 */
START_TEST(test_expand_step_limit)
{
	char path[300], name[260];
	memset(name, 'a', 250);
	for (int i = 0; i < 2000; i++) {
		snprintf(name + 250, sizeof(name) - 250, "%04d", i);
		snprintf(path, sizeof(path), "/s/%s", name);
		cd_fakefs_file(fs, path, NULL);
	}
	struct cd_strbuf pat = { 0 };
	cd_strbuf_append(&pat, "/s/");
	for (int i = 0; i < 100000; i++)
		cd_strbuf_append_c(&pat, '*');
	cd_strbuf_append(&pat, "b");
	ck_assert_int_eq(expand(pat.buf, 0), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err, "takes more than 134217728 steps"));
	ck_assert_uint_gt(budget.steps, CD_GLOB_MAX_STEPS);
	cd_strbuf_done(&pat);
	free(err);
	err = NULL;
	budget.steps = 0;
	cd_strbuf_append(&pat, "/s/a[");
	for (int i = 0; i < 100000; i++)
		cd_strbuf_append_c(&pat, 'x');
	cd_strbuf_append(&pat, "]*");
	ck_assert_int_eq(expand(pat.buf, 0), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err, "takes more than 134217728 steps"));
	cd_strbuf_done(&pat);
	/* An ordinary pattern over the same names costs little. */
	free(err);
	err = NULL;
	budget.steps = 0;
	ck_assert_int_eq(expand("/s/a*9", 0), 0);
	ck_assert_uint_lt(budget.steps, 2000 * 300);
}
END_TEST

static Suite *glob_suite(void)
{
	Suite *s = suite_create("glob");
	TCase *tc = tcase_create("match");
	tcase_add_loop_test(tc, test_match, 0, CD_ARRAY_SIZE(matches));
	tcase_add_loop_test(tc, test_syntax, 0, CD_ARRAY_SIZE(syntax));
	tcase_add_test(tc, test_syntax_too_deep);
	suite_add_tcase(s, tc);

	tc = tcase_create("expand");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_expand_globstar);
	tcase_add_test(tc, test_expand_directory_match);
	tcase_add_test(tc, test_expand_pruned);
	tcase_add_test(tc, test_expand_literal_and_missing);
	tcase_add_test(tc, test_expand_errors);
	tcase_add_test(tc, test_expand_symlinks_skipped);
	tcase_add_test(tc, test_expand_depth);
	tcase_add_test(tc, test_expand_match_limit);
	tcase_add_test(tc, test_expand_step_limit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(glob_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
