/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for src/core/util.c: string buffer, JSON string escaping,
 * string vectors, cd_parse_u64 and the pure path helpers.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"

/* ---- allocation helpers ---- */

START_TEST(test_alloc)
{
	char *p = cd_xstrndup("abcdef", 3);
	ck_assert_str_eq(p, "abc");
	free(p);
	/* cd_xstrndup copies exactly n bytes, embedded NULs included */
	p = cd_xstrndup("a\0b", 3);
	ck_assert_int_eq(memcmp(p, "a\0b\0", 4), 0);
	free(p);
	p = cd_xasprintf("%s-%d-%05.1f", "x", -3, 2.25);
	ck_assert_str_eq(p, "x--3-002.2");
	free(p);
	p = cd_xmalloc(0);
	ck_assert_ptr_nonnull(p);
	p = cd_xrealloc(p, 0);
	ck_assert_ptr_nonnull(p);
	free(p);
	int *v = cd_xreallocarray(NULL, 1000, sizeof(int));
	v[999] = 1;
	free(v);
	v = cd_xcalloc(10, sizeof(int));
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(v[i], 0);
	free(v);

	ck_assert(cd_streq("a", "a"));
	ck_assert(!cd_streq("a", "ab"));
	ck_assert(cd_startswith("abc", "ab"));
	ck_assert(cd_startswith("abc", ""));
	ck_assert(!cd_startswith("ab", "abc"));
}
END_TEST

START_TEST(test_cleanup)
{
	cleanup_free char *a = cd_xstrdup("x");
	char *stolen;
	{
		cleanup_free char *b = cd_xstrdup("y");
		stolen = cd_steal_pointer(&b);
		ck_assert_ptr_null(b);
	}
	ck_assert_str_eq(stolen, "y");
	free(stolen);
	ck_assert_str_eq(a, "x");
}
END_TEST

/* ---- strbuf ---- */

START_TEST(test_strbuf)
{
	struct cd_strbuf sb = { 0 };
	char *s;

	/* an untouched buffer steals as "" */
	s = cd_strbuf_steal(&sb);
	ck_assert_str_eq(s, "");
	free(s);

	cd_strbuf_append(&sb, "ab");
	cd_strbuf_append_c(&sb, 'c');
	cd_strbuf_append_n(&sb, "d\0e", 3);
	ck_assert_uint_eq(sb.len, 6);
	ck_assert_int_eq(memcmp(sb.buf, "abcd\0e", 7), 0);
	ck_assert_uint_ge(sb.cap, sb.len + 1);
	cd_strbuf_printf(&sb, "[%d:%s]", 42, "z");
	ck_assert_uint_eq(sb.len, 12);
	ck_assert_str_eq(sb.buf + 6, "[42:z]");
	cd_strbuf_printf(&sb, "%s", "");
	ck_assert_uint_eq(sb.len, 12);

	s = cd_strbuf_steal(&sb);
	ck_assert_ptr_null(sb.buf);
	ck_assert_uint_eq(sb.len, 0);
	ck_assert_uint_eq(sb.cap, 0);
	ck_assert_int_eq(memcmp(s, "abcd\0e[42:z]", 13), 0);
	free(s);

	/* growth across many reallocations keeps contents and termination */
	for (int i = 0; i < 100000; i++)
		cd_strbuf_printf(&sb, "%d,", i % 10);
	ck_assert_uint_eq(sb.len, 200000);
	ck_assert_int_eq(sb.buf[sb.len], '\0');
	ck_assert_int_eq(memcmp(sb.buf + 199990, "5,6,7,8,9,", 10), 0);
	/* one big printf */
	char *big = malloc(100001);
	memset(big, 'q', 100000);
	big[100000] = '\0';
	cd_strbuf_printf(&sb, "<%s>", big);
	ck_assert_uint_eq(sb.len, 300002);
	ck_assert_int_eq(sb.buf[200000], '<');
	ck_assert_int_eq(sb.buf[300001], '>');
	ck_assert_int_eq(sb.buf[300002], '\0');
	free(big);
	cd_strbuf_done(&sb);
	ck_assert_ptr_null(sb.buf);
	ck_assert_uint_eq(sb.len, 0);
	cd_strbuf_done(&sb); /* idempotent */

	/* printf as the first operation */
	cd_strbuf_printf(&sb, "%s", "");
	ck_assert_ptr_nonnull(sb.buf);
	ck_assert_str_eq(sb.buf, "");
	cd_strbuf_done(&sb);
}
END_TEST

static const struct {
	const char *in;
	size_t len;
	const char *out;
} json_esc[] = {
	{ "", 0, "\"\"" },
	{ "plain text", 10, "\"plain text\"" },
	{ "q\"b\\s/", 6, "\"q\\\"b\\\\s/\"" },
	{ "\n\r\t", 3, "\"\\n\\r\\t\"" },
	{ "\b\f", 2, "\"\\u0008\\u000c\"" },
	{ "a\0b", 3, "\"a\\u0000b\"" },
	{ "\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"" },
	{ "\xc3\xa9\xf0\x9f\x98\x80", 6, "\"\xc3\xa9\xf0\x9f\x98\x80\"" },
	{ "</script>", 9, "\"</script>\"" },
};

/* Bytes that are not UTF-8 become U+FFFD: the output stays valid JSON. */
static const struct {
	const char *in;
	size_t len;
	const char *out;
} json_lossy[] = {
	{ "a\xff"
	  "b",
	  3,
	  "\"a\xef\xbf\xbd"
	  "b\"" },
	{ "\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"" },		   /* overlong '/' */
	{ "\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" }, /* surrogate */
	{ "\xc3", 1, "\"\xef\xbf\xbd\"" },				   /* truncated */
};

START_TEST(test_json_string_lossy)
{
	struct cd_strbuf sb = { 0 };
	struct cd_json *v = NULL;
	struct cd_json_error err;

	cd_strbuf_append_json_string(&sb, json_lossy[_i].in, json_lossy[_i].len);
	ck_assert_str_eq(sb.buf, json_lossy[_i].out);
	ck_assert_int_eq(cd_json_parse(sb.buf, sb.len, NULL, &v, &err), 0);
	cd_json_free(v);
	cd_strbuf_done(&sb);
}
END_TEST

/* cd_utf8_lossy: the same substitutions, without quotes or escapes. */
START_TEST(test_utf8_lossy)
{
	for (size_t i = 0; i < CD_ARRAY_SIZE(json_lossy); i++) {
		char in[8] = { 0 };
		memcpy(in, json_lossy[i].in, json_lossy[i].len);
		char *got = cd_utf8_lossy(in);
		/* The JSON form is the lossy string in quotes (no escapes here). */
		size_t n = strlen(json_lossy[i].out);
		ck_assert_uint_eq(strlen(got), n - 2);
		ck_assert_int_eq(memcmp(got, json_lossy[i].out + 1, n - 2), 0);
		free(got);
	}
	char *same = cd_utf8_lossy("plain \xc3\xa9 \n");
	ck_assert_str_eq(same, "plain \xc3\xa9 \n");
	free(same);
	char *empty = cd_utf8_lossy("");
	ck_assert_str_eq(empty, "");
	free(empty);
}
END_TEST

START_TEST(test_json_string)
{
	struct cd_strbuf sb = { 0 };
	struct cd_json *v = NULL;
	struct cd_json_error err;

	cd_strbuf_append(&sb, "x=");
	cd_strbuf_append_json_string(&sb, json_esc[_i].in, json_esc[_i].len);
	ck_assert_str_eq(sb.buf + 2, json_esc[_i].out);

	/* the output reads back to the same bytes with the strict parser */
	ck_assert_int_eq(cd_json_parse(sb.buf + 2, sb.len - 2, NULL, &v, &err), 0);
	ck_assert_int_eq(v->type, CD_JSON_STRING);
	ck_assert_uint_eq(v->u.str.len, json_esc[_i].len);
	ck_assert_int_eq(memcmp(v->u.str.s, json_esc[_i].in, json_esc[_i].len), 0);
	cd_json_free(v);
	cd_strbuf_done(&sb);
}
END_TEST

START_TEST(test_json_string_all_ascii)
{
	/* every byte 0..127 survives an escape/parse round trip */
	char in[128];
	struct cd_strbuf sb = { 0 };
	struct cd_json *v = NULL;
	struct cd_json_error err;

	for (int i = 0; i < 128; i++)
		in[i] = (char)i;
	cd_strbuf_append_json_string(&sb, in, sizeof(in));
	for (size_t i = 0; i < sb.len; i++)
		ck_assert_msg((unsigned char)sb.buf[i] >= 0x20 && (unsigned char)sb.buf[i] < 0x7f,
			      "raw byte 0x%02x in output", (unsigned char)sb.buf[i]);
	ck_assert_int_eq(cd_json_parse(sb.buf, sb.len, NULL, &v, &err), 0);
	ck_assert_uint_eq(v->u.str.len, sizeof(in));
	ck_assert_int_eq(memcmp(v->u.str.s, in, sizeof(in)), 0);
	cd_json_free(v);
	cd_strbuf_done(&sb);
}
END_TEST

/* ---- strv ---- */

START_TEST(test_strv)
{
	char **v = NULL;

	ck_assert_uint_eq(cd_strv_length(NULL), 0);
	cd_strv_push(&v, "a");
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(cd_strv_length(v), 1);
	ck_assert_ptr_null(v[1]);
	char *own = cd_xstrdup("b");
	cd_strv_push_take(&v, own);
	ck_assert_ptr_eq(v[1], own);
	const char *lit = "c";
	cd_strv_push(&v, lit);
	ck_assert_ptr_ne(v[2], lit); /* a copy */
	ck_assert_uint_eq(cd_strv_length(v), 3);
	ck_assert_str_eq(v[0], "a");
	ck_assert_str_eq(v[1], "b");
	ck_assert_str_eq(v[2], "c");
	ck_assert_ptr_null(v[3]);
	for (int i = 0; i < 1000; i++)
		cd_strv_push(&v, "x");
	ck_assert_uint_eq(cd_strv_length(v), 1003);
	ck_assert_ptr_null(cd_strv_free(v));
	ck_assert_ptr_null(cd_strv_free(NULL));
}
END_TEST

/* ---- cd_parse_u64 ---- */

static const struct {
	const char *in;
	int r;
	uint64_t v;
} u64_cases[] = {
	{ "0", 0, 0 },
	{ "1", 0, 1 },
	{ "007", 0, 7 },
	{ "4294967296", 0, 4294967296ull },
	{ "18446744073709551615", 0, UINT64_MAX },
	{ "18446744073709551616", -ERANGE, 0 },
	{ "18446744073709551620", -ERANGE, 0 },
	{ "99999999999999999999", -ERANGE, 0 },
	{ "100000000000000000000000", -ERANGE, 0 },
	{ "", -EINVAL, 0 },
	{ "-1", -EINVAL, 0 },
	{ "-0", -EINVAL, 0 },
	{ "+1", -EINVAL, 0 },
	{ " 1", -EINVAL, 0 },
	{ "1 ", -EINVAL, 0 },
	{ "0x10", -EINVAL, 0 },
	{ "1e3", -EINVAL, 0 },
	{ "1.0", -EINVAL, 0 },
	{ "12a", -EINVAL, 0 },
};

START_TEST(test_parse_u64)
{
	uint64_t v = 12345;
	int r = cd_parse_u64(u64_cases[_i].in, &v);

	ck_assert_msg(r == u64_cases[_i].r, "'%s': %d", u64_cases[_i].in, r);
	/* the output is written only on success */
	ck_assert_uint_eq(v, r == 0 ? u64_cases[_i].v : 12345);
}
END_TEST

START_TEST(test_parse_u64_null)
{
	uint64_t v = 5;
	ck_assert_int_eq(cd_parse_u64(NULL, &v), -EINVAL);
	ck_assert_uint_eq(v, 5);
}
END_TEST

/* ---- path helpers ---- */

static const struct {
	const char *p;
	bool normal;
	size_t depth; /* for normal paths */
} paths[] = {
	{ "/", true, 0 },	  { "/a", true, 1 },
	{ "/a/b", true, 2 },	  { "/usr/lib/x86_64-linux-gnu", true, 3 },
	{ "/.a", true, 1 },	  { "/..a", true, 1 },
	{ "/a.", true, 1 },	  { "/...", true, 1 },
	{ "/a/.b/c..", true, 3 }, { "/a b/\xc3\xa9", true, 2 },
	{ "", false, 0 },	  { "a", false, 0 },
	{ "a/b", false, 0 },	  { "./a", false, 0 },
	{ "//", false, 0 },	  { "//a", false, 0 },
	{ "/a/", false, 0 },	  { "/a//b", false, 0 },
	{ "/.", false, 0 },	  { "/..", false, 0 },
	{ "/a/.", false, 0 },	  { "/a/..", false, 0 },
	{ "/a/./b", false, 0 },	  { "/a/../b", false, 0 },
	{ "/./a", false, 0 },
};

START_TEST(test_path_normal)
{
	ck_assert_msg(cd_path_is_normal(paths[_i].p) == paths[_i].normal, "'%s'", paths[_i].p);
	if (paths[_i].normal)
		ck_assert_uint_eq(cd_path_depth(paths[_i].p), paths[_i].depth);
	ck_assert(!cd_path_is_normal(NULL));
}
END_TEST

static const struct {
	const char *a, *b, *out;
} joins[] = {
	{ "/a", "b", "/a/b" },	   { "/a/", "b", "/a/b" },    { "/a", "/b", "/a/b" },
	{ "/a//", "//b", "/a/b" }, { "/a", "b/c", "/a/b/c" }, { "/a", "b/", "/a/b/" },
	{ "/", "b", "/b" },	   { "/", "/b", "/b" },	      { "/", "", "/" },
	{ "/", "/", "/" },	   { "/a", "", "/a" },	      { "/a/", "/", "/a" },
	{ "a", "b", "a/b" },	   { "", "b", "/b" },
};

/* cd_path_tidy: "." and empty components go, ".." stays (only the file system resolves it). */
static const struct {
	const char *in, *out;
} tidies[] = {
	{ "/", "/" },
	{ "//", "/" },
	{ "/.", "/" },
	{ "/a/./b/", "/a/b" },
	{ "//usr/./lib/../share/", "/usr/lib/../share" },
	{ "/..", "/.." },
	{ "/a/..", "/a/.." },
	{ "/a/.b/..c", "/a/.b/..c" },
	{ "/a//b///c", "/a/b/c" },
};

START_TEST(test_path_tidy)
{
	char *t = cd_path_tidy(tidies[_i].in);
	ck_assert_str_eq(t, tidies[_i].out);
	free(t);
}
END_TEST

START_TEST(test_json_cstr)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append_json_cstr(&sb, NULL);
	cd_strbuf_append_c(&sb, ',');
	cd_strbuf_append_json_cstr(&sb, "a\"b\n");
	ck_assert_str_eq(sb.buf, "null,\"a\\\"b\\n\"");
	cd_strbuf_done(&sb);
}
END_TEST

START_TEST(test_vis)
{
	char *hold = NULL;
	const char *clean = "/a b/\xc3\xa9";
	ck_assert_ptr_eq(cd_vis(clean, &hold), clean); /* unchanged: no copy */
	ck_assert_ptr_null(hold);
	ck_assert_str_eq(cd_vis(NULL, &hold), "");
	ck_assert_str_eq(cd_vis("a\nb\tc\rd\x1b[2J\x7f", &hold), "a\\nb\\tc\\rd\\x1b[2J\\x7f");
	ck_assert_ptr_nonnull(hold);
	ck_assert_str_eq(cd_vis("\x01", &hold), "\\x01"); /* the previous copy freed */
	free(hold);
}
END_TEST

START_TEST(test_path_parent)
{
	static const struct {
		const char *in, *out;
	} parents[] = { { "/a/b", "/a" }, { "/a", "/" }, { "/", "/" }, { "/a/b/c", "/a/b" } };
	for (size_t i = 0; i < CD_ARRAY_SIZE(parents); i++) {
		char *d = cd_path_parent(parents[i].in);
		ck_assert_str_eq(d, parents[i].out);
		free(d);
	}
}
END_TEST

START_TEST(test_path_join)
{
	char *j = cd_path_join(joins[_i].a, joins[_i].b);
	ck_assert_msg(cd_streq(j, joins[_i].out), "join('%s', '%s') = '%s', want '%s'", joins[_i].a,
		      joins[_i].b, j, joins[_i].out);
	free(j);
}
END_TEST

static const struct {
	const char *child, *parent;
	bool beneath;
} beneath[] = {
	{ "/a/b", "/a", true },
	{ "/a", "/a", true },
	{ "/a/b/c", "/a", true },
	{ "/a/b/c", "/a/b", true },
	{ "/x", "/", true },
	{ "/", "/", true },
	{ "/ab", "/a", false },
	{ "/a", "/ab", false },
	{ "/a", "/a/b", false },
	{ "/", "/a", false },
	{ "/b/a", "/a", false },
	{ "/a.b", "/a", false },
	{ "/a-b/c", "/a", false },
	/* a trailing slash on the parent names the same directory */
	{ "/a/b", "/a/", true },
	{ "/a", "/a/", true },
	{ "/ab", "/a/", false },
	{ "a", "/", false },
};

START_TEST(test_path_beneath)
{
	ck_assert_msg(cd_path_is_beneath(beneath[_i].child, beneath[_i].parent) ==
			      beneath[_i].beneath,
		      "is_beneath('%s', '%s') != %d", beneath[_i].child, beneath[_i].parent,
		      beneath[_i].beneath);
}
END_TEST

START_TEST(test_name_in)
{
	static const char *const names[] = { "connection", "x-http-method", "te" };
	const size_t k = CD_ARRAY_SIZE(names);
	ck_assert(cd_name_in("Connection: close", 10, names, k));
	ck_assert(cd_name_in("X-HTTP-Method", 13, names, k));
	ck_assert(cd_name_in("TE", 2, names, k));
	/* the whole of one name, not a prefix of it, nor one that goes on */
	ck_assert(!cd_name_in("connectio", 9, names, k));
	ck_assert(!cd_name_in("x-http-method-override", 22, names, k));
	ck_assert(!cd_name_in("t", 1, names, k));
	ck_assert(!cd_name_in("", 0, names, k));
	/* only ASCII letters fold: '@' is not '`', nor a byte past 0x7f a letter */
	static const char *const odd[] = { "a`b" };
	ck_assert(!cd_name_in("A@B", 3, odd, 1));
	ck_assert(cd_name_in("A`B", 3, odd, 1));
	ck_assert(!cd_name_in("x", 1, names, 0));
}
END_TEST

static Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc;

	tc = tcase_create("memory");
	tcase_add_test(tc, test_alloc);
	tcase_add_test(tc, test_cleanup);
	suite_add_tcase(s, tc);

	tc = tcase_create("strbuf");
	tcase_add_test(tc, test_strbuf);
	tcase_add_loop_test(tc, test_json_string, 0, CD_ARRAY_SIZE(json_esc));
	tcase_add_loop_test(tc, test_json_string_lossy, 0, CD_ARRAY_SIZE(json_lossy));
	tcase_add_test(tc, test_utf8_lossy);
	tcase_add_test(tc, test_json_string_all_ascii);
	suite_add_tcase(s, tc);

	tc = tcase_create("strv");
	tcase_add_test(tc, test_strv);
	suite_add_tcase(s, tc);

	tc = tcase_create("parse_u64");
	tcase_add_loop_test(tc, test_parse_u64, 0, CD_ARRAY_SIZE(u64_cases));
	tcase_add_test(tc, test_parse_u64_null);
	suite_add_tcase(s, tc);

	tc = tcase_create("paths");
	tcase_add_loop_test(tc, test_path_normal, 0, CD_ARRAY_SIZE(paths));
	tcase_add_loop_test(tc, test_path_join, 0, CD_ARRAY_SIZE(joins));
	tcase_add_loop_test(tc, test_path_tidy, 0, CD_ARRAY_SIZE(tidies));
	tcase_add_test(tc, test_json_cstr);
	tcase_add_test(tc, test_vis);
	tcase_add_test(tc, test_name_in);
	tcase_add_test(tc, test_path_parent);
	tcase_add_loop_test(tc, test_path_beneath, 0, CD_ARRAY_SIZE(beneath));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(util_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
