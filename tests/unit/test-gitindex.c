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
	size_t declared = n < 0xfff ? n : 0xfff;
	char flags[2] = { (char)(declared >> 8), (char)declared };
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

/* ---- reads at offsets, through the budget ----------------------------- */

/*
 * A file of size bytes: data, then zeros (a sparse file), or -err from
 * every read when err; counts the bytes and the reads asked for.
 */
struct sparse {
	const char *data;
	size_t len;
	uint64_t size;
	int err;
	size_t bytes, reads;
};

static int sparse_read_at(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct sparse *f = ctx;
	ck_assert(off <= f->size && len <= f->size - off);
	if (f->err)
		return -f->err;
	size_t in_data = off < f->len ? f->len - (size_t)off : 0;
	if (in_data > len)
		in_data = len;
	memcpy(buf, f->data + off, in_data);
	memset((char *)buf + in_data, 0, len - in_data);
	f->bytes += len;
	f->reads++;
	return 0;
}

static int read_sparse(struct sparse *f, size_t *budget, struct cd_git_index *ix, char **err)
{
	struct cd_git_index_src src = { .ctx = f, .size = f->size, .read_at = sparse_read_at };
	return cd_git_index_read(&src, NULL, 0, budget, ix, err);
}

/* A header for n entries, version v. */
static void header(struct cd_strbuf *sb, uint32_t v, uint32_t n)
{
	cd_strbuf_append(sb, "DIRC");
	put32(sb, v);
	put32(sb, n);
}

START_TEST(test_extension_skipped)
{
	/*
	 * The red team's index: a valid header, no entries, one extension git
	 * does not know over the rest of a sparse 256 MiB file. Read whole, it
	 * took 0.7 s and 256 MiB of memory; only the first read is needed.
	 */
	struct cd_strbuf sb = { 0 };
	struct sparse f = { .size = (uint64_t)256 << 20 };
	header(&sb, 2, 0);
	cd_strbuf_append(&sb, "ZZZZ");
	put32(&sb, (uint32_t)(f.size - 12 - 8 - 20));
	f.data = sb.buf;
	f.len = sb.len;
	struct cd_git_index ix;
	char *err = NULL;
	size_t budget = 1 << 20;
	ck_assert_int_eq(read_sparse(&f, &budget, &ix, &err), 0);
	ck_assert_ptr_null(ix.gitlinks);
	ck_assert_uint_eq(f.reads, 1);
	ck_assert_uint_le(f.bytes, 4096);
	ck_assert_uint_eq(budget, (1 << 20) - f.bytes);
	cd_git_index_done(&ix);

	/* A TREE extension after real entries: skipped too, by its size. */
	struct cd_strbuf big = { 0 };
	header(&big, 2, 2000);
	for (int i = 0; i < 2000; i++) {
		char name[16];
		snprintf(name, sizeof(name), "dir/f%04d", i);
		entry(&big, i % 500 == 7 ? 0160000 : 0100644, name);
	}
	size_t entries_end = big.len;
	cd_strbuf_append(&big, "TREE");
	put32(&big, 1 << 20);
	f = (struct sparse){ .data = big.buf, .len = big.len, .size = big.len + (1 << 20) + 20 };
	budget = SIZE_MAX;
	ck_assert_int_eq(read_sparse(&f, &budget, &ix, &err), 0);
	ck_assert_uint_eq(cd_strv_length(ix.gitlinks), 4);
	ck_assert_str_eq(ix.gitlinks[3], "dir/f1507");
	/* The entries, and at most the window read ahead past them. */
	ck_assert_uint_le(f.bytes, entries_end + 8 + 256 * 1024);
	cd_git_index_done(&ix);
	cd_strbuf_done(&big);
	cd_strbuf_done(&sb);
}
END_TEST

START_TEST(test_budget)
{
	/* A header counting more entries than the budget holds: refused from the header. */
	struct cd_strbuf sb = { 0 };
	header(&sb, 2, 4u << 20);
	struct sparse f = { .data = sb.buf, .len = sb.len, .size = (uint64_t)512 << 20 };
	struct cd_git_index ix;
	char *err = NULL;
	size_t budget = (size_t)128 << 20;
	ck_assert_int_eq(read_sparse(&f, &budget, &ix, &err), -ENOBUFS);
	ck_assert_ptr_nonnull(strstr(err, "budget for git indexes"));
	ck_assert_ptr_null(ix.gitlinks);
	ck_assert_uint_le(f.bytes, 4096);
	free(err);
	err = NULL;
	/* Zeros as entries (nameless ones) within the budget: read up to it, then refused. */
	f.bytes = f.reads = 0;
	budget = 1 << 20;
	sb.len = 0;
	header(&sb, 2, 16000); /* 1,024,000 bytes of entries at least: within the budget */
	f.data = sb.buf;
	ck_assert_int_eq(read_sparse(&f, &budget, &ix, &err), -ENOBUFS);
	ck_assert_uint_eq(f.bytes, 1 << 20);
	ck_assert_uint_eq(budget, 0);
	free(err);
	err = NULL;
	cd_strbuf_done(&sb);

	/* A real index: everything but the trailer is needed (the trailer is not read). */
	size_t len;
	char *buf = load("v2.idx", &len);
	f = (struct sparse){ .data = buf, .len = len, .size = len };
	budget = len - 20;
	ck_assert_int_eq(read_sparse(&f, &budget, &ix, &err), 0);
	ck_assert_uint_eq(budget, 0);
	cd_git_index_done(&ix);
	budget = len - 21;
	ck_assert_int_eq(read_sparse(&f, &budget, &ix, &err), -ENOBUFS);
	ck_assert_ptr_null(ix.gitlinks);
	free(err);
	err = NULL;
	/* A read error is returned as it is. */
	f.err = EIO;
	budget = SIZE_MAX;
	ck_assert_int_eq(read_sparse(&f, &budget, &ix, &err), -EIO);
	ck_assert_str_eq(err, strerror(EIO));
	free(err);
	free(buf);
}
END_TEST

START_TEST(test_gitlinks_max)
{
	for (uint32_t n = CD_GIT_INDEX_GITLINKS_MAX; n <= CD_GIT_INDEX_GITLINKS_MAX + 1; n++) {
		struct cd_strbuf sb = { 0 };
		header(&sb, 2, n);
		for (uint32_t i = 0; i < n; i++) {
			char name[16];
			snprintf(name, sizeof(name), "s%06u", i);
			entry(&sb, 0160000, name);
		}
		for (int i = 0; i < 5; i++)
			put32(&sb, 0);
		struct cd_git_index ix;
		char *err = NULL;
		int r = cd_git_index_parse(sb.buf, sb.len, NULL, 0, &ix, &err);
		if (n == CD_GIT_INDEX_GITLINKS_MAX) {
			ck_assert_int_eq(r, 0);
			ck_assert_uint_eq(cd_strv_length(ix.gitlinks), n);
			cd_git_index_done(&ix);
		} else {
			ck_assert_int_eq(r, -E2BIG);
			ck_assert_ptr_nonnull(strstr(err, "more than 65536 gitlinks"));
			ck_assert_ptr_null(ix.gitlinks);
			free(err);
		}
		cd_strbuf_done(&sb);
	}
}
END_TEST

START_TEST(test_name_max)
{
	/* A name of CD_GIT_INDEX_NAME_MAX bytes is read, one byte more is refused. */
	for (size_t len = CD_GIT_INDEX_NAME_MAX; len <= CD_GIT_INDEX_NAME_MAX + 1; len++) {
		char *name = cd_xmalloc(len + 1);
		memset(name, 'n', len);
		name[len] = '\0';
		struct cd_strbuf sb = { 0 };
		header(&sb, 2, 1);
		entry(&sb, 0160000, name);
		for (int i = 0; i < 5; i++)
			put32(&sb, 0);
		struct cd_git_index ix;
		char *err = NULL;
		int r = cd_git_index_parse(sb.buf, sb.len, NULL, 0, &ix, &err);
		ck_assert_int_eq(r, len == CD_GIT_INDEX_NAME_MAX ? 0 : -EINVAL);
		if (r == 0)
			ck_assert_uint_eq(strlen(ix.gitlinks[0]), len);
		cd_git_index_done(&ix);
		free(err);
		cd_strbuf_done(&sb);
		free(name);
	}
}
END_TEST

/* A version 4 entry: the part of the previous name to drop, then the rest of this one. */
static void entry_v4(struct cd_strbuf *sb, uint32_t mode, const char *prev, const char *name)
{
	size_t common = 0, n = strlen(name);
	while (prev[common] && prev[common] == name[common])
		common++;
	size_t strip = strlen(prev) - common;
	for (int i = 0; i < 6; i++)
		put32(sb, 0);
	put32(sb, mode);
	for (int i = 0; i < 8; i++)
		put32(sb, 0);
	size_t declared = n < 0xfff ? n : 0xfff;
	char flags[2] = { (char)(declared >> 8), (char)declared };
	cd_strbuf_append_n(sb, flags, 2);
	/* git's varint */
	unsigned char v[16];
	int pos = (int)sizeof(v) - 1;
	v[pos] = strip & 127;
	while (strip >>= 7)
		v[--pos] = 128 | (--strip & 127);
	cd_strbuf_append_n(sb, (const char *)v + pos, sizeof(v) - (size_t)pos);
	cd_strbuf_append(sb, name + common);
	cd_strbuf_append_c(sb, '\0');
}

START_TEST(test_window)
{
	/*
	 * Indexes of a few hundred KiB, so that entries straddle the reads of
	 * the window as it moves and grows: every gitlink is found, in
	 * versions 2 and 4, with names up to a few KiB.
	 */
	for (uint32_t v = 2; v <= 4; v += 2) {
		struct cd_strbuf sb = { 0 };
		char prev[8192] = "", name[8192];
		uint32_t n = 6000;
		size_t want = 0;
		header(&sb, v, n);
		for (uint32_t i = 0; i < n; i++) {
			size_t pad = i % 997 == 3 ? 3000 + i % 5000 : i % 37;
			snprintf(name, sizeof(name), "d%03u/%0*u", i / 100, (int)pad + 1, i);
			bool link = i % 13 == 0;
			want += link;
			if (v == 4)
				entry_v4(&sb, link ? 0160000 : 0100644, prev, name);
			else
				entry(&sb, link ? 0160000 : 0100644, name);
			strcpy(prev, name);
		}
		for (int i = 0; i < 5; i++)
			put32(&sb, 0);
		struct cd_git_index ix;
		char *err = NULL;
		ck_assert_int_eq(cd_git_index_parse(sb.buf, sb.len, NULL, 0, &ix, &err), 0);
		ck_assert_uint_eq(cd_strv_length(ix.gitlinks), want);
		snprintf(name, sizeof(name), "d%03u/%0*u", 5993 / 100, (int)(5993 % 37) + 1, 5993);
		ck_assert_str_eq(ix.gitlinks[want - 1], name);
		cd_git_index_done(&ix);

		/* Flipped bytes here and there: parsed or refused, never out of bounds. */
		uint32_t seed = 1;
		for (int k = 0; k < 300; k++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = seed % sb.len;
			sb.buf[at] ^= (char)(1 << (seed >> 28) % 8);
			int r = cd_git_index_parse(sb.buf, sb.len, NULL, 0, &ix, &err);
			ck_assert(r == 0 || r == -EINVAL || r == -E2BIG);
			cd_git_index_done(&ix);
			free(err);
			err = NULL;
			sb.buf[at] ^= (char)(1 << (seed >> 28) % 8);
		}
		cd_strbuf_done(&sb);
	}
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

	tc = tcase_create("reads");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_extension_skipped);
	tcase_add_test(tc, test_budget);
	tcase_add_test(tc, test_gitlinks_max);
	tcase_add_test(tc, test_name_max);
	tcase_add_test(tc, test_window);
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
