/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Gitlinks of git indexes (core/gitindex.h): indexes git itself wrote
 * (tests/data/gitindex, see regen.sh there) in every version, SHA-256, a
 * split index; then every truncation and every flipped byte of them, and
 * hand-made corruptions of the split-index bookkeeping.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gitindex.h"
#include "core/util.h"

#ifndef CD_TEST_DATADIR
#error "CD_TEST_DATADIR must name tests/data"
#endif

static char *load(const char *name, size_t *len)
{
	char *path = cd_xasprintf("%s/gitindex/%s", CD_TEST_DATADIR, name);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f, "cannot open %s", path);
	char *buf = cd_xmalloc(4096);
	*len = fread(buf, 1, 4096, f);
	ck_assert(*len > 0 && *len < 4096);
	fclose(f);
	free(path);
	return buf;
}

/* Parse name (want: see cd_git_index_parse) and compare the gitlinks with want_links. */
static void parse_ok(const char *name, const size_t *want, size_t n_want,
		     const char *const *want_links, struct cd_git_index *ix)
{
	size_t len;
	char *buf = load(name, &len);
	char *err = NULL;
	int r = cd_git_index_parse(buf, len, want, n_want, ix, &err);
	ck_assert_msg(r == 0, "%s: %s", name, err ? err : "?");
	ck_assert_ptr_null(err);
	size_t n = 0;
	for (; want_links[n]; n++) {
		ck_assert_ptr_nonnull(ix->gitlinks);
		ck_assert_msg(ix->gitlinks[n] && cd_streq(ix->gitlinks[n], want_links[n]),
			      "%s: gitlink %zu is %s, not %s", name, n,
			      ix->gitlinks[n] ? ix->gitlinks[n] : "(none)", want_links[n]);
	}
	ck_assert_uint_eq(cd_strv_length(ix->gitlinks), n);
	free(buf);
}

static const char *const versions[] = { "v2.idx", "v3.idx", "v4.idx" };

START_TEST(test_versions)
{
	static const char *const links[] = { "lib/s1", "s2", NULL };
	struct cd_git_index ix;
	parse_ok(versions[_i], NULL, 0, links, &ix);
	ck_assert_ptr_null(ix.shared);
	ck_assert_uint_eq(ix.n_replaced, 0);
	cd_git_index_done(&ix);
	ck_assert_ptr_null(ix.gitlinks);
}
END_TEST

START_TEST(test_sha256)
{
	static const char *const links[] = { "m/sub", NULL };
	struct cd_git_index ix;
	parse_ok("sha256.idx", NULL, 0, links, &ix);
	ck_assert_ptr_null(ix.shared);
	cd_git_index_done(&ix);
}
END_TEST

START_TEST(test_split)
{
	static const char *const none[] = { NULL };
	/* The shared file's own gitlinks and the entries the main file replaces with gitlinks. */
	static const char *const links[] = { "lib/b.txt", "lib/s1", "s2", NULL };
	struct cd_git_index ix, shared;
	parse_ok("split.idx", NULL, 0, none, &ix);
	ck_assert_str_eq(ix.shared, "a8dd3d79dd12bad54f0f97a0b6af7addc6fb72e7");
	/* lib/b.txt (a file in the shared index, a gitlink now) and s2. */
	ck_assert_uint_eq(ix.n_replaced, 2);
	ck_assert_uint_eq(ix.replaced[0], 1);
	ck_assert_uint_eq(ix.replaced[1], 3);
	parse_ok("split-shared.idx", ix.replaced, ix.n_replaced, links, &shared);
	ck_assert_ptr_null(shared.shared);
	cd_git_index_done(&ix);
	cd_git_index_done(&shared);

	/* Without the positions, only the shared file's own gitlinks. */
	static const char *const own[] = { "lib/s1", "s2", NULL };
	parse_ok("split-shared.idx", NULL, 0, own, &shared);
	cd_git_index_done(&shared);
}
END_TEST

static const char *const all[] = { "v2.idx",	"v3.idx",	    "v4.idx",
				   "split.idx", "split-shared.idx", "sha256.idx" };

static void parse_fails(const char *buf, size_t len, const char *what)
{
	struct cd_git_index ix;
	char *err = NULL;
	int r = cd_git_index_parse(buf, len, NULL, 0, &ix, &err);
	ck_assert_msg(r == -EINVAL, "%s: parsed", what);
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_null(ix.gitlinks);
	ck_assert_ptr_null(ix.shared);
	ck_assert_ptr_null(ix.replaced);
	free(err);
}

/* Every strict prefix is refused: the extensions must end at the trailer. */
START_TEST(test_truncated)
{
	size_t len;
	char *buf = load(all[_i], &len);
	for (size_t l = 0; l < len; l++) {
		char *what = cd_xasprintf("%s cut to %zu bytes", all[_i], l);
		/* A copy of exactly l bytes, so that ASan sees any read past it. */
		char *cut = cd_xmalloc(l ? l : 1);
		memcpy(cut, buf, l);
		parse_fails(cut, l, what);
		free(cut);
		free(what);
	}
	free(buf);
}
END_TEST

/* A flipped byte anywhere parses or is refused, never reads out of bounds. */
START_TEST(test_flipped)
{
	size_t len;
	char *buf = load(all[_i], &len);
	for (size_t i = 0; i < len; i++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			char *copy = cd_xmalloc(len);
			memcpy(copy, buf, len);
			copy[i] = (char)(copy[i] ^ (1 << bit));
			struct cd_git_index ix;
			char *err = NULL;
			size_t want[] = { 1, 3 };
			int r = cd_git_index_parse(copy, len, want, 2, &ix, &err);
			ck_assert(r == 0 || r == -EINVAL);
			ck_assert(r == 0 ? !err : !!err);
			cd_git_index_done(&ix);
			free(err);
			free(copy);
		}
	}
	free(buf);
}
END_TEST

START_TEST(test_header)
{
	size_t len;
	char *buf = load("v2.idx", &len);
	buf[3] = 'X'; /* DIRX */
	parse_fails(buf, len, "signature");
	buf[3] = 'C';
	buf[7] = 1; /* version 1 */
	parse_fails(buf, len, "version 1");
	buf[7] = 5;
	parse_fails(buf, len, "version 5");
	buf[7] = 2;
	buf[11] = 5; /* one entry more than there is */
	parse_fails(buf, len, "entry count");
	free(buf);
	parse_fails("DIRC", 4, "header only");
}
END_TEST

/* ---- hand-made indexes -------------------------------------------------- */

static void put32(struct cd_strbuf *sb, uint32_t v)
{
	char b[4] = { (char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v };
	cd_strbuf_append_n(sb, b, 4);
}

static void put64(struct cd_strbuf *sb, uint64_t v)
{
	put32(sb, (uint32_t)(v >> 32));
	put32(sb, (uint32_t)v);
}

/* A version 2 entry with a SHA-1 name of zeros. */
static void entry(struct cd_strbuf *sb, uint32_t mode, const char *name)
{
	size_t start = sb->len, n = strlen(name);
	for (int i = 0; i < 6; i++)
		put32(sb, 0);
	put32(sb, mode);
	for (int i = 0; i < 3; i++)
		put32(sb, 0);
	for (int i = 0; i < 5; i++)
		put32(sb, 0);
	char flags[2] = { (char)(n >> 8), (char)n };
	cd_strbuf_append_n(sb, flags, 2);
	cd_strbuf_append_n(sb, name, n);
	do
		cd_strbuf_append_c(sb, '\0');
	while ((sb->len - start) % 8);
}

/* An EWAH bitmap of bits bits with one literal word. */
static void ewah_literal(struct cd_strbuf *sb, uint32_t bits, uint64_t word)
{
	put32(sb, bits);
	put32(sb, 2);
	put64(sb, UINT64_C(1) << 33); /* no run, one literal word */
	put64(sb, word);
	put32(sb, 0);
}

/*
 * A split index's main file: one nameless gitlink entry (if nameless), a
 * link extension with the given replace bitmap word (none: no bitmaps).
 */
static char *split_main(bool nameless, bool link, uint64_t replace, size_t *len)
{
	struct cd_strbuf sb = { 0 }, ext = { 0 };
	cd_strbuf_append(&sb, "DIRC");
	put32(&sb, 2);
	put32(&sb, nameless ? 2 : 1);
	if (nameless)
		entry(&sb, 0160000, "");
	entry(&sb, 0160000, "top");
	if (link) {
		for (int i = 0; i < 5; i++)
			put32(&ext, 0x01010101); /* the shared index's name */
		ewah_literal(&ext, 64, 0);	 /* deletes nothing */
		ewah_literal(&ext, 64, replace);
		cd_strbuf_append(&sb, "link");
		put32(&sb, (uint32_t)ext.len);
		cd_strbuf_append_n(&sb, ext.buf, ext.len);
	}
	for (int i = 0; i < 5; i++)
		put32(&sb, 0); /* trailer */
	cd_strbuf_done(&ext);
	*len = sb.len;
	return cd_strbuf_steal(&sb);
}

START_TEST(test_split_bookkeeping)
{
	struct cd_git_index ix;
	char *err = NULL;
	size_t len;
	char *buf = split_main(true, true, UINT64_C(1) << 7, &len);
	ck_assert_int_eq(cd_git_index_parse(buf, len, NULL, 0, &ix, &err), 0);
	ck_assert_str_eq(ix.shared, "0101010101010101010101010101010101010101");
	ck_assert_uint_eq(ix.n_replaced, 1);
	ck_assert_uint_eq(ix.replaced[0], 7);
	ck_assert_str_eq(ix.gitlinks[0], "top");
	cd_git_index_done(&ix);
	free(buf);

	/* Two replaced entries for one nameless entry, none, or no link at all. */
	buf = split_main(true, true, 3, &len);
	parse_fails(buf, len, "more replacements than nameless entries");
	free(buf);
	buf = split_main(true, true, 0, &len);
	parse_fails(buf, len, "a nameless entry replacing nothing");
	free(buf);
	buf = split_main(true, false, 0, &len);
	parse_fails(buf, len, "a nameless entry without a shared index");
	free(buf);
	/* A plain index with a bit past the bitmap's size. */
	buf = split_main(false, true, UINT64_C(1) << 63, &len);
	parse_fails(buf, len, "a bit past the bitmap's size");
	free(buf);
	buf = split_main(false, false, 0, &len);
	ck_assert_int_eq(cd_git_index_parse(buf, len, NULL, 0, &ix, &err), 0);
	ck_assert_uint_eq(cd_strv_length(ix.gitlinks), 1);
	cd_git_index_done(&ix);
	free(buf);
}
END_TEST

static Suite *gitindex_suite(void)
{
	Suite *s = suite_create("gitindex");
	TCase *tc = tcase_create("git");
	tcase_add_loop_test(tc, test_versions, 0, (int)CD_ARRAY_SIZE(versions));
	tcase_add_test(tc, test_sha256);
	tcase_add_test(tc, test_split);
	suite_add_tcase(s, tc);

	tc = tcase_create("damaged");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_truncated, 0, (int)CD_ARRAY_SIZE(all));
	tcase_add_loop_test(tc, test_flipped, 0, (int)CD_ARRAY_SIZE(all));
	tcase_add_test(tc, test_header);
	tcase_add_test(tc, test_split_bookkeeping);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(gitindex_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
