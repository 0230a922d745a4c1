/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for the strict JSON reader (src/core/json.c): positions,
 * every refusal with its message and position, limits, hostile inputs.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"

static struct cd_json *parse_ok_n(const char *s, size_t n)
{
	struct cd_json *v = NULL;
	struct cd_json_error err;
	int r = cd_json_parse(s, n, NULL, &v, &err);
	ck_assert_msg(r == 0, "parse of '%.60s' failed (%d): %s at %u:%u", s, r, err.msg, err.line,
		      err.col);
	ck_assert_ptr_nonnull(v);
	return v;
}

static struct cd_json *parse_ok(const char *s)
{
	return parse_ok_n(s, strlen(s));
}

/* Parse with limits, expect failure; returns the error for further checks. */
static struct cd_json_error parse_fail_lim(const char *s, size_t n,
					   const struct cd_json_limits *lim, int want_r,
					   const char *want_msg)
{
	struct cd_json *v = (struct cd_json *)1;
	struct cd_json_error err;
	int r = cd_json_parse(s, n, lim, &v, &err);
	ck_assert_msg(r == want_r, "parse of '%.60s': got %d (%s), want %d", s, r,
		      r < 0 ? err.msg : "ok", want_r);
	ck_assert_ptr_null(v);
	ck_assert_msg(strstr(err.msg, want_msg), "parse of '%.60s': message '%s' lacks '%s'", s,
		      err.msg, want_msg);
	ck_assert_uint_ge(err.line, 1);
	ck_assert_uint_ge(err.col, 1);
	ck_assert_uint_le(err.offset, n);
	return err;
}

/* ---- valid documents and positions ---- */

START_TEST(test_scalars)
{
	static const struct {
		const char *in;
		enum cd_json_type type;
		const char *num;
	} t[] = {
		{ "null", CD_JSON_NULL, NULL },
		{ "true", CD_JSON_TRUE, NULL },
		{ "false", CD_JSON_FALSE, NULL },
		{ "0", CD_JSON_NUMBER, "0" },
		{ "-0", CD_JSON_NUMBER, "-0" },
		{ "123", CD_JSON_NUMBER, "123" },
		{ "-12.5e3", CD_JSON_NUMBER, "-12.5e3" },
		{ "1E+2", CD_JSON_NUMBER, "1E+2" },
		{ "0.0001e-7", CD_JSON_NUMBER, "0.0001e-7" },
		{ " \t\r\n 42 \n\t", CD_JSON_NUMBER, "42" },
		{ "\"\"", CD_JSON_STRING, NULL },
		{ "[]", CD_JSON_ARRAY, NULL },
		{ "{}", CD_JSON_OBJECT, NULL },
		{ "[ \n ]", CD_JSON_ARRAY, NULL },
		{ "{ \t }", CD_JSON_OBJECT, NULL },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(t); i++) {
		struct cd_json *v = parse_ok(t[i].in);
		ck_assert_int_eq(v->type, t[i].type);
		if (t[i].num)
			ck_assert_str_eq(v->u.num.text, t[i].num);
		if (v->type == CD_JSON_STRING)
			ck_assert_uint_eq(v->u.str.len, 0);
		if (v->type == CD_JSON_ARRAY)
			ck_assert_uint_eq(v->u.arr.n, 0);
		if (v->type == CD_JSON_OBJECT)
			ck_assert_uint_eq(v->u.obj.n, 0);
		cd_json_free(v);
	}
}
END_TEST

START_TEST(test_positions)
{
	const char *doc = "{\n"
			  "  \"a\": [1, 2.5e-3, \"x\"],\n"
			  "  \"b\": {\"c\": null, \"d\": true},\n"
			  "\t\"e\": false\n"
			  "}\n";
	struct cd_json *v = parse_ok(doc);
	const struct cd_json_member *m;
	const struct cd_json *a, *b;

	ck_assert_int_eq(v->type, CD_JSON_OBJECT);
	ck_assert_uint_eq(v->line, 1);
	ck_assert_uint_eq(v->col, 1);
	ck_assert_uint_eq(v->u.obj.n, 3);

	m = cd_json_get_member(v, "a");
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->line, 2);
	ck_assert_uint_eq(m->col, 3);
	a = m->value;
	ck_assert_int_eq(a->type, CD_JSON_ARRAY);
	ck_assert_uint_eq(a->line, 2);
	ck_assert_uint_eq(a->col, 8);
	ck_assert_uint_eq(a->u.arr.n, 3);
	ck_assert_uint_eq(a->u.arr.items[0]->col, 9);
	ck_assert_uint_eq(a->u.arr.items[1]->col, 12);
	ck_assert_str_eq(a->u.arr.items[1]->u.num.text, "2.5e-3");
	ck_assert_uint_eq(a->u.arr.items[2]->line, 2);
	ck_assert_uint_eq(a->u.arr.items[2]->col, 20);
	ck_assert_str_eq(a->u.arr.items[2]->u.str.s, "x");

	m = cd_json_get_member(v, "b");
	ck_assert_uint_eq(m->line, 3);
	ck_assert_uint_eq(m->col, 3);
	b = m->value;
	ck_assert_uint_eq(b->line, 3);
	ck_assert_uint_eq(b->col, 8);
	m = cd_json_get_member(b, "d");
	ck_assert_uint_eq(m->line, 3);
	ck_assert_uint_eq(m->col, 20);
	ck_assert_int_eq(m->value->type, CD_JSON_TRUE);
	ck_assert_uint_eq(m->value->col, 25);
	ck_assert_int_eq(cd_json_get(b, "c")->type, CD_JSON_NULL);
	ck_assert_uint_eq(cd_json_get(b, "c")->col, 14);

	/* a tab counts as one byte column */
	m = cd_json_get_member(v, "e");
	ck_assert_uint_eq(m->line, 4);
	ck_assert_uint_eq(m->col, 2);
	ck_assert_uint_eq(m->value->line, 4);
	ck_assert_uint_eq(m->value->col, 7);
	ck_assert_int_eq(m->value->type, CD_JSON_FALSE);

	/* source order is kept */
	ck_assert_str_eq(v->u.obj.members[0].key, "a");
	ck_assert_str_eq(v->u.obj.members[1].key, "b");
	ck_assert_str_eq(v->u.obj.members[2].key, "e");
	cd_json_free(v);

	/* columns count bytes, not characters: "é" is two bytes */
	v = parse_ok("[\"\xc3\xa9\", 1]");
	ck_assert_uint_eq(v->u.arr.items[1]->col, 8);
	cd_json_free(v);

	/* CR alone does not start a line; CRLF counts once */
	v = parse_ok("[\r\n1,\r2]");
	ck_assert_uint_eq(v->u.arr.items[0]->line, 2);
	ck_assert_uint_eq(v->u.arr.items[0]->col, 1);
	ck_assert_uint_eq(v->u.arr.items[1]->line, 2);
	ck_assert_uint_eq(v->u.arr.items[1]->col, 4);
	cd_json_free(v);
}
END_TEST

START_TEST(test_lookup)
{
	struct cd_json *v = parse_ok("{\"a\\u0000\": 1, \"a\": [true], \"\": \"e\"}");
	const struct cd_json *x;

	ck_assert_uint_eq(v->u.obj.members[0].key_len, 2);
	x = cd_json_get(v, "a");
	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(x->type, CD_JSON_ARRAY);
	ck_assert_str_eq(cd_json_get(v, "")->u.str.s, "e");
	ck_assert_ptr_null(cd_json_get(v, "b"));
	ck_assert_ptr_null(cd_json_get(x, "a"));
	ck_assert_ptr_null(cd_json_get(NULL, "a"));
	ck_assert_ptr_null(cd_json_get_member(x->u.arr.items[0], "a"));
	ck_assert_ptr_null(cd_json_free(v));
	ck_assert_ptr_null(cd_json_free(NULL));

	ck_assert_str_eq(cd_json_type_name(CD_JSON_NULL), "null");
	ck_assert_str_eq(cd_json_type_name(CD_JSON_TRUE), "boolean");
	ck_assert_str_eq(cd_json_type_name(CD_JSON_FALSE), "boolean");
	ck_assert_str_eq(cd_json_type_name(CD_JSON_NUMBER), "number");
	ck_assert_str_eq(cd_json_type_name(CD_JSON_STRING), "string");
	ck_assert_str_eq(cd_json_type_name(CD_JSON_ARRAY), "array");
	ck_assert_str_eq(cd_json_type_name(CD_JSON_OBJECT), "object");
}
END_TEST

/* ---- strings ---- */

static const struct {
	const char *in;	  /* JSON text */
	const char *want; /* decoded bytes */
	size_t want_len;
} string_cases[] = {
	{ "\"abc\"", "abc", 3 },
	{ "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8 },
	{ "\"a\\u0000b\"", "a\0b", 3 },
	{ "\"\\u0000\"", "\0", 1 },
	{ "\"\\u0041\\u00e9\\u20AC\\uFFFF\"", "A\xc3\xa9\xe2\x82\xac\xef\xbf\xbf", 9 },
	{ "\"\\uD83D\\uDE00\"", "\xf0\x9f\x98\x80", 4 },
	{ "\"\\ud83d\\ude00x\"", "\xf0\x9f\x98\x80x", 5 },
	{ "\"\\uDBFF\\uDFFF\"", "\xf4\x8f\xbf\xbf", 4 },
	{ "\"\\uD800\\uDC00\"", "\xf0\x90\x80\x80", 4 },
	/* raw UTF-8 at every boundary of Unicode Table 3-7 */
	{ "\"\xc2\x80\xdf\xbf\"", "\xc2\x80\xdf\xbf", 4 },
	{ "\"\xe0\xa0\x80\xef\xbf\xbf\"", "\xe0\xa0\x80\xef\xbf\xbf", 6 },
	{ "\"\xed\x9f\xbf\xee\x80\x80\"", "\xed\x9f\xbf\xee\x80\x80", 6 },
	{ "\"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"", "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 8 },
	{ "\"\x7f~ \"", "\x7f~ ", 3 },
	{ "\"\\\\\"", "\\", 1 },
	{ "\"\\\\\\\"\"", "\\\"", 2 },
};

START_TEST(test_strings)
{
	const char *in = string_cases[_i].in;
	struct cd_json *v = parse_ok(in);

	ck_assert_int_eq(v->type, CD_JSON_STRING);
	ck_assert_uint_eq(v->u.str.len, string_cases[_i].want_len);
	ck_assert_msg(memcmp(v->u.str.s, string_cases[_i].want, string_cases[_i].want_len) == 0,
		      "decoded bytes differ for %s", in);
	ck_assert_int_eq(v->u.str.s[v->u.str.len], '\0');
	ck_assert_int_eq(cd_json_string_has_nul(v),
			 memchr(string_cases[_i].want, 0, string_cases[_i].want_len) != NULL);
	cd_json_free(v);
}
END_TEST

START_TEST(test_huge_string)
{
	const size_t n = 10 * 1024 * 1024;
	char *buf = malloc(n + 2);
	struct cd_json *v;

	ck_assert_ptr_nonnull(buf);
	buf[0] = '"';
	for (size_t i = 1; i <= n; i++)
		buf[i] = (char)('a' + i % 26);
	buf[n + 1] = '"';
	v = parse_ok_n(buf, n + 2);
	ck_assert_uint_eq(v->u.str.len, n);
	ck_assert_int_eq(memcmp(v->u.str.s, buf + 1, n), 0);
	cd_json_free(v);

	/* with escapes and multi-byte sequences throughout: "\n" "é" "\\" */
	const size_t chunks = n / 6;
	for (size_t k = 0; k < chunks; k++)
		memcpy(buf + 1 + 6 * k, "\\n\xc3\xa9\\\\", 6);
	for (size_t i = 1 + 6 * chunks; i <= n; i++)
		buf[i] = 'z';
	v = parse_ok_n(buf, n + 2);
	ck_assert_uint_eq(v->u.str.len, chunks * 4 + (n - 6 * chunks));
	ck_assert_int_eq(memcmp(v->u.str.s, "\n\xc3\xa9\\", 4), 0);
	cd_json_free(v);

	/* unterminated: reported at the opening quote */
	struct cd_json_error e = parse_fail_lim(buf, n + 1, NULL, -EINVAL, "unterminated string");
	ck_assert_uint_eq(e.col, 1);
	free(buf);
}
END_TEST

/* ---- refusals ---- */

static const struct {
	const char *in;
	size_t len; /* 0: strlen(in) */
	const char *msg;
	unsigned line, col;
} bad_cases[] = {
	{ "", 0, "empty document", 1, 1 },
	{ "  \n \t", 0, "empty document", 2, 3 },
	{ "x", 0, "unexpected character 'x'", 1, 1 },
	{ "[1,]", 0, "trailing comma", 1, 3 },
	{ "{\"a\":1,}", 0, "trailing comma", 1, 7 },
	{ "[1,\n\n]", 0, "trailing comma", 1, 3 },
	{ "01", 0, "leading zeros", 1, 1 },
	{ "-01", 0, "leading zeros", 1, 1 },
	{ "[00]", 0, "leading zeros", 1, 2 },
	{ "+1", 0, "unexpected character '+'", 1, 1 },
	{ ".5", 0, "unexpected character '.'", 1, 1 },
	{ "1.", 0, "expected a digit after the decimal point", 1, 3 },
	{ "1.e3", 0, "expected a digit after the decimal point", 1, 3 },
	{ "1e", 0, "expected a digit in the exponent", 1, 3 },
	{ "1e+", 0, "expected a digit in the exponent", 1, 4 },
	{ "-", 0, "expected a digit after '-'", 1, 2 },
	{ "- 1", 0, "expected a digit after '-'", 1, 2 },
	{ "-a", 0, "found character 'a'", 1, 2 },
	{ "1.5.3", 0, "unexpected character '.' after the top-level value", 1, 4 },
	{ "0x10", 0, "unexpected character 'x' after the top-level value", 1, 2 },
	{ "1 2", 0, "unexpected character '2' after the top-level value", 1, 3 },
	{ "[1]]", 0, "unexpected character ']' after the top-level value", 1, 4 },
	{ "{} {}", 0, "after the top-level value", 1, 4 },
	{ "[1 2]", 0, "expected ',' or ']'", 1, 4 },
	{ "{\"a\":1 \"b\":2}", 0, "expected ',' or '}'", 1, 8 },
	{ "[1,,2]", 0, "unexpected character ','", 1, 4 },
	{ "[,1]", 0, "unexpected character ','", 1, 2 },
	{ "{,}", 0, "expected a string key", 1, 2 },
	{ "{1:2}", 0, "expected a string key", 1, 2 },
	{ "{'a':2}", 0, "unexpected character ''', expected a string key", 1, 2 },
	{ "{\"a\" 1}", 0, "expected ':'", 1, 6 },
	{ "{\"a\"", 0, "expected ':'", 1, 5 },
	{ "{\"a\":", 0, "unexpected end of input", 1, 6 },
	{ "{\"a\":}", 0, "unexpected character '}', expected a value", 1, 6 },
	{ "[", 0, "unexpected end of input", 1, 2 },
	{ "[1", 0, "unterminated array (opened at line 1 column 1)", 1, 3 },
	{ "{\"a\":1", 0, "unterminated object", 1, 7 },
	{ "{\n\"a\":[1,\n", 0, "unexpected end of input", 3, 1 },
	{ "\"abc", 0, "unterminated string", 1, 1 },
	{ "[1, \"abc\\\"]", 0, "unterminated string", 1, 5 },
	{ "\"abc\\", 0, "unterminated string", 1, 1 },
	{ "\"a\x01\"", 0, "unescaped control character 0x01 in string", 1, 3 },
	{ "\"a\nb\"", 0, "unescaped control character 0x0A in string", 1, 3 },
	{ "\"a\tb\"", 0, "unescaped control character 0x09 in string", 1, 3 },
	{ "\"\x1f\"", 0, "unescaped control character 0x1F", 1, 2 },
	{ "\"\\x\"", 0, "invalid escape sequence: character 'x'", 1, 2 },
	{ "\"\\U0041\"", 0, "invalid escape sequence", 1, 2 },
	{ "\"\\'\"", 0, "invalid escape sequence", 1, 2 },
	{ "\"ab\\u12\"", 0, "invalid \\u escape", 1, 4 },
	{ "\"\\u12G4\"", 0, "invalid \\u escape", 1, 2 },
	{ "\"\\u 123\"", 0, "invalid \\u escape", 1, 2 },
	{ "\"\\uD800\"", 0, "unpaired UTF-16 surrogate", 1, 2 },
	{ "\"\\uDC00\"", 0, "unpaired UTF-16 surrogate", 1, 2 },
	{ "\"\\uDFFF\\uD800\"", 0, "unpaired UTF-16 surrogate", 1, 2 },
	{ "\"x\\uD800\\u0041\"", 0, "unpaired UTF-16 surrogate", 1, 3 },
	{ "\"\\uD800\\uD800\"", 0, "unpaired UTF-16 surrogate", 1, 2 },
	{ "\"\\uD800\\n\"", 0, "unpaired UTF-16 surrogate", 1, 2 },
	{ "\"\\uD800\"x", 0, "unpaired UTF-16 surrogate", 1, 2 },
	{ "\"\xc0\xaf\"", 0, "invalid UTF-8 in string (overlong encoding)", 1, 2 },
	{ "\"\xc1\xbf\"", 0, "invalid UTF-8 in string (overlong", 1, 2 },
	{ "\"ab\xe0\x80\xaf\"", 0, "invalid UTF-8 in string (overlong", 1, 4 },
	{ "\"\xe0\x9f\xbf\"", 0, "invalid UTF-8 in string (overlong", 1, 2 },
	{ "\"\xf0\x80\x80\xaf\"", 0, "invalid UTF-8 in string (overlong", 1, 2 },
	{ "\"\xf0\x8f\xbf\xbf\"", 0, "invalid UTF-8 in string (overlong", 1, 2 },
	{ "\"\xed\xa0\x80\"", 0, "invalid UTF-8 in string (UTF-16 surrogate", 1, 2 },
	{ "\"\xed\xbf\xbf\"", 0, "invalid UTF-8 in string (UTF-16 surrogate", 1, 2 },
	{ "\"\xf4\x90\x80\x80\"", 0, "invalid UTF-8 in string (code point above U+10FFFF)", 1, 2 },
	{ "\"\xf5\x80\x80\x80\"", 0, "invalid UTF-8 in string (code point above U+10FFFF)", 1, 2 },
	{ "\"\xf8\x88\x80\x80\x80\"", 0, "invalid UTF-8 in string", 1, 2 },
	{ "\"\xff\"", 0, "invalid UTF-8 in string", 1, 2 },
	{ "\"\xc3\"", 0, "invalid UTF-8 in string (truncated", 1, 2 },
	{ "\"\xc3", 0, "invalid UTF-8 in string (truncated", 1, 2 },
	{ "\"\xe2\x82\"", 0, "invalid UTF-8 in string (truncated", 1, 2 },
	{ "\"\xe2\x82x\"", 0, "invalid UTF-8 in string (truncated", 1, 2 },
	{ "\"\xf0\x9f\x98\"", 0, "invalid UTF-8 in string (truncated", 1, 2 },
	{ "\"\x80\"", 0, "invalid UTF-8 in string (unexpected continuation byte)", 1, 2 },
	{ "\"\xbf\"", 0, "invalid UTF-8 in string", 1, 2 },
	{ "{\"k\xc0\x80\":1}", 0, "invalid UTF-8 in string", 1, 4 },
	{ "\xc3\xa9", 0, "unexpected byte 0xC3", 1, 1 },
	{ "\xef\xbb\xbf{}", 0, "unexpected byte 0xEF", 1, 1 },
	{ "\xc2\xa0"
	  "1",
	  0, "unexpected byte 0xC2", 1, 1 },
	{ "\v1", 0, "unexpected byte 0x0B", 1, 1 },
	{ "\f1", 0, "unexpected byte 0x0C", 1, 1 },
	{ "\"a\0b\"", 5, "NUL byte in string", 1, 3 },
	{ "[1,\0]", 5, "unexpected NUL byte", 1, 4 },
	{ "\0", 1, "unexpected NUL byte", 1, 1 },
	{ "1\0", 2, "NUL byte after the top-level value", 1, 2 },
	{ "{\"a\":1}\n\0", 9, "NUL byte after the top-level value", 2, 1 },
	{ "tru", 0, "invalid literal", 1, 1 },
	{ "truex", 0, "invalid literal", 1, 1 },
	{ "True", 0, "unexpected character 'T'", 1, 1 },
	{ "nul", 0, "invalid literal", 1, 1 },
	{ "[nulll]", 0, "invalid literal", 1, 2 },
	{ "NaN", 0, "unexpected character 'N'", 1, 1 },
	{ "-Infinity", 0, "expected a digit after '-'", 1, 2 },
	{ "// c\n1", 0, "unexpected character '/'", 1, 1 },
	{ "[1] /* c */", 0, "unexpected character '/'", 1, 5 },
	{ "{\"a\":1,\"a\":2}", 0, "duplicate object key \"a\"", 1, 8 },
	{ "[{\"k\":1,\"k\":1}]", 0, "duplicate object key \"k\"", 1, 9 },
	{ "{\"a\":1,\"\\u0061\":2}", 0, "duplicate object key \"a\"", 1, 8 },
	{ "{\"a\\u0000\":1,\"a\\u0000\":2}", 0, "duplicate object key \"a\\u0000\"", 1, 14 },
	{ "{\"q\\\"\":1,\"q\\\"\":2}", 0, "duplicate object key \"q\\\"\"", 1, 10 },
	{ "{\n  \"type\": 1,\n  \"x\": {\"type\": 2},\n  \"type\": 3\n}", 0,
	  "duplicate object key \"type\"", 4, 3 },
	{ "{\"a\":{\"b\":1,\"b\":2},\"a\":3}", 0, "duplicate object key \"b\"", 1, 13 },
};

START_TEST(test_bad)
{
	const char *in = bad_cases[_i].in;
	size_t n = bad_cases[_i].len ? bad_cases[_i].len : strlen(in);
	struct cd_json_error e = parse_fail_lim(in, n, NULL, -EINVAL, bad_cases[_i].msg);

	ck_assert_msg(e.line == bad_cases[_i].line && e.col == bad_cases[_i].col,
		      "case %d '%s': error '%s' at %u:%u, want %u:%u", _i, in, e.msg, e.line, e.col,
		      bad_cases[_i].line, bad_cases[_i].col);
	/* the offset agrees with line/col */
	size_t off = 0;
	for (unsigned l = 1; l < e.line; l++)
		off = (size_t)((const char *)memchr(in + off, '\n', n - off) - in) + 1;
	ck_assert_uint_eq(e.offset, off + e.col - 1);
}
END_TEST

START_TEST(test_err_optional)
{
	struct cd_json *v = (struct cd_json *)1;
	struct cd_json_error e;
	/* (NULL, 0) is an empty document */
	ck_assert_int_eq(cd_json_parse(NULL, 0, NULL, &v, &e), -EINVAL);
	ck_assert_ptr_null(v);
	ck_assert_ptr_nonnull(strstr(e.msg, "empty document"));
	/* err may be NULL */
	ck_assert_int_eq(cd_json_parse("[1,]", 4, NULL, &v, NULL), -EINVAL);
	ck_assert_ptr_null(v);
	ck_assert_int_eq(cd_json_parse("[1]", 3, NULL, &v, NULL), 0);
	cd_json_free(v);
	/* buf need not be NUL-terminated: only len bytes are read */
	ck_assert_int_eq(cd_json_parse("[1]]]]", 3, NULL, &v, NULL), 0);
	cd_json_free(v);
	ck_assert_int_eq(cd_json_parse("12345", 2, NULL, &v, NULL), 0);
	ck_assert_str_eq(v->u.num.text, "12");
	cd_json_free(v);
	ck_assert_int_eq(cd_json_parse("\"ab\"", 3, NULL, &v, NULL), -EINVAL);
	ck_assert_int_eq(cd_json_parse("trueee", 4, NULL, &v, NULL), 0);
	ck_assert_int_eq(v->type, CD_JSON_TRUE);
	cd_json_free(v);
}
END_TEST

/* ---- duplicate keys in big objects ---- */

static char *big_object(size_t n, const char *extra)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append_c(&sb, '{');
	for (size_t i = 0; i < n; i++)
		cd_strbuf_printf(&sb, "%s\"k%zu\":%zu", i ? "," : "", i, i);
	cd_strbuf_append(&sb, extra);
	cd_strbuf_append_c(&sb, '}');
	return cd_strbuf_steal(&sb);
}

START_TEST(test_dup_big)
{
	char *s = big_object(100000, "");
	struct cd_json *v = parse_ok(s);
	ck_assert_uint_eq(v->u.obj.n, 100000);
	ck_assert_str_eq(cd_json_get(v, "k99999")->u.num.text, "99999");
	cd_json_free(v);
	free(s);

	/* the repeat is the last key */
	s = big_object(100000, ",\"k0\":0");
	struct cd_json_error e =
		parse_fail_lim(s, strlen(s), NULL, -EINVAL, "duplicate object key \"k0\"");
	ck_assert_uint_eq(e.line, 1);
	ck_assert_uint_eq(e.col, strlen(s) - strlen("\"k0\":0}") + 1);
	ck_assert_uint_eq(e.offset, e.col - 1);
	free(s);

	/* several repeats: the first one in source order is reported */
	s = big_object(100, ",\"k50\":0,\"k3\":1,\"k50\":2");
	parse_fail_lim(s, strlen(s), NULL, -EINVAL, "duplicate object key \"k50\"");
	free(s);
	s = big_object(100, ",\"k99\":0,\"k3\":1");
	parse_fail_lim(s, strlen(s), NULL, -EINVAL, "duplicate object key \"k99\"");
	free(s);

	/* same at the pairwise size (<= 16 members) */
	s = big_object(10, ",\"k9\":0,\"k3\":1");
	parse_fail_lim(s, strlen(s), NULL, -EINVAL, "duplicate object key \"k9\"");
	free(s);

	/* same keys in different objects are fine; keys differing after a NUL differ */
	v = parse_ok("[{\"a\":1},{\"a\":2},{\"a\\u0000b\":1,\"a\\u0000c\":2,\"a\":3}]");
	cd_json_free(v);

	/* long keys are truncated in the message, which stays short */
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"");
	for (int i = 0; i < 500; i++)
		cd_strbuf_append(&sb, "\xc3\xa9");
	cd_strbuf_append(&sb, "\":1,\"");
	for (int i = 0; i < 500; i++)
		cd_strbuf_append(&sb, "\xc3\xa9");
	cd_strbuf_append(&sb, "\":2}");
	e = parse_fail_lim(sb.buf, sb.len, NULL, -EINVAL, "duplicate object key \"\xc3\xa9");
	ck_assert_ptr_nonnull(strstr(e.msg, "...\""));
	ck_assert_uint_lt(strlen(e.msg), sizeof(e.msg) - 1);
	cd_strbuf_done(&sb);
}
END_TEST

/* ---- limits ---- */

static char *nested(size_t depth, char open, char close)
{
	char *s = malloc(2 * depth + 1);
	memset(s, open, depth);
	memset(s + depth, close, depth);
	s[2 * depth] = '\0';
	return s;
}

START_TEST(test_limit_values)
{
	struct cd_json_limits lim = { .max_values = 4 };
	struct cd_json *v;
	struct cd_json_error e;

	ck_assert_int_eq(cd_json_parse("[1,2,3]", 7, &lim, &v, &e), 0);
	cd_json_free(v);
	lim.max_values = 3;
	e = parse_fail_lim("[1,2,3]", 7, &lim, -E2BIG, "too many JSON values (limit 3)");
	ck_assert_uint_eq(e.col, 6);
	/* objects count themselves and each member value, not keys */
	lim.max_values = 2;
	ck_assert_int_eq(cd_json_parse("{\"a\":1}", 7, &lim, &v, &e), 0);
	cd_json_free(v);
	parse_fail_lim("{\"a\":[1]}", 9, &lim, -E2BIG, "too many JSON values (limit 2)");
	lim.max_values = 1;
	ck_assert_int_eq(cd_json_parse("\"x\"", 3, &lim, &v, &e), 0);
	cd_json_free(v);
	e = parse_fail_lim("[[]]", 4, &lim, -E2BIG, "too many JSON values (limit 1)");
	ck_assert_uint_eq(e.col, 2);

	lim.max_values = 262144;
	char *s = big_object(262144, "");
	e = parse_fail_lim(s, strlen(s), &lim, -E2BIG, "too many JSON values (limit 262144)");
	free(s);
	s = big_object(262143, "");
	ck_assert_int_eq(cd_json_parse(s, strlen(s), &lim, &v, &e), 0);
	cd_json_free(v);
	free(s);
}
END_TEST

START_TEST(test_limit_depth)
{
	struct cd_json_limits lim = { .max_depth = 2 };
	struct cd_json *v;
	struct cd_json_error e;
	char *s;

	ck_assert_int_eq(cd_json_parse("[[1]]", 5, &lim, &v, &e), 0);
	cd_json_free(v);
	ck_assert_int_eq(cd_json_parse("{\"a\":{\"b\":1}}", 13, &lim, &v, &e), 0);
	cd_json_free(v);
	e = parse_fail_lim("[[[1]]]", 7, &lim, -E2BIG, "too deeply nested (limit 2)");
	ck_assert_uint_eq(e.col, 3);
	parse_fail_lim("[{\"a\":[]}]", 10, &lim, -E2BIG, "too deeply nested (limit 2)");

	/* default 512 */
	s = nested(512, '[', ']');
	v = parse_ok(s);
	cd_json_free(v);
	free(s);
	s = nested(513, '[', ']');
	e = parse_fail_lim(s, strlen(s), NULL, -E2BIG, "too deeply nested (limit 512)");
	ck_assert_uint_eq(e.col, 513);
	free(s);

	/* 10000 levels: refused with the limit, no crash */
	s = nested(10000, '[', ']');
	lim.max_depth = 64;
	parse_fail_lim(s, strlen(s), &lim, -E2BIG, "too deeply nested (limit 64)");
	lim.max_depth = 0;
	parse_fail_lim(s, strlen(s), &lim, -E2BIG, "too deeply nested (limit 512)");
	/* a truncated deep document fails cleanly too */
	parse_fail_lim(s, 10000, NULL, -E2BIG, "too deeply nested");
	free(s);
}
END_TEST

START_TEST(test_deep_allowed)
{
	/* The parser and cd_json_free are iterative: a deep tree the caller
	 * allowed must not overflow the C stack. */
	const size_t depth = 200000;
	struct cd_json_limits lim = { .max_depth = 1000000 };
	struct cd_json *v;
	struct cd_json_error e;
	struct cd_strbuf sb = { 0 };

	char *s = nested(depth, '[', ']');
	ck_assert_int_eq(cd_json_parse(s, 2 * depth, &lim, &v, &e), 0);
	const struct cd_json *x = v;
	for (size_t i = 1; i < depth; i++)
		x = x->u.arr.items[0];
	ck_assert_uint_eq(x->u.arr.n, 0);
	ck_assert_uint_eq(x->col, depth);
	cd_json_free(v);
	/* error after a deep prefix: the partial tree is freed */
	ck_assert_int_eq(cd_json_parse(s, 2 * depth - 1, &lim, &v, &e), -EINVAL);
	free(s);

	for (size_t i = 0; i < depth; i++)
		cd_strbuf_append(&sb, "{\"a\":");
	cd_strbuf_append(&sb, "1");
	for (size_t i = 0; i < depth; i++)
		cd_strbuf_append_c(&sb, '}');
	ck_assert_int_eq(cd_json_parse(sb.buf, sb.len, &lim, &v, &e), 0);
	cd_json_free(v);
	cd_strbuf_done(&sb);
}
END_TEST

START_TEST(test_limit_bytes)
{
	struct cd_json_limits lim = { .max_bytes = 3 };
	struct cd_json *v;
	struct cd_json_error e;

	ck_assert_int_eq(cd_json_parse("[1]", 3, &lim, &v, &e), 0);
	cd_json_free(v);
	e = parse_fail_lim("[1] ", 4, &lim, -E2BIG, "document too large (limit 3 bytes)");
	ck_assert_uint_eq(e.offset, 3);
	lim.max_bytes = 4;
	e = parse_fail_lim("[\n1,2]", 6, &lim, -E2BIG, "document too large (limit 4 bytes)");
	ck_assert_uint_eq(e.line, 2);
	ck_assert_uint_eq(e.col, 3);
	/* size is checked before syntax */
	parse_fail_lim("xxxxx", 5, &lim, -E2BIG, "document too large");
}
END_TEST

/* ---- hostile inputs ---- */

static const char full_doc[] =
	"{\"a\": [1, -2.5e+3, true, false, null, \"s\\u00e9\\uD83D\\uDE00\\n\xc3\xa9\"],\n"
	" \"b\": {\"c\": {}, \"d\": [], \"e\": 0.5, \"f\": -0},\r\n"
	" \"g\\\"h\": \"\\\\\", \"nul\": \"\\u0000\", \"big\": 123456789012345678901234567890}";

START_TEST(test_truncated_prefixes)
{
	size_t n = strlen(full_doc);
	struct cd_json *v = parse_ok(full_doc);
	ck_assert_uint_eq(v->u.obj.n, 5);
	cd_json_free(v);

	/* every proper prefix of a top-level object is invalid; each must fail cleanly */
	for (size_t i = 0; i < n; i++) {
		/* copy so that a read past len would be caught by ASan/valgrind */
		char *p = malloc(i ? i : 1);
		struct cd_json_error e;
		memcpy(p, full_doc, i);
		v = (struct cd_json *)1;
		int r = cd_json_parse(p, i, NULL, &v, &e);
		ck_assert_msg(r == -EINVAL, "prefix %zu: r=%d", i, r);
		ck_assert_ptr_null(v);
		ck_assert_msg(e.msg[0] != '\0', "prefix %zu: empty message", i);
		ck_assert_uint_le(e.offset, i);
		free(p);
	}
}
END_TEST

/* xorshift: deterministic, seeded */
static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

START_TEST(test_mutations)
{
	/* Random byte flips, insertions and deletions: must never crash or leak,
	 * and a successful parse must yield a tree. */
	static const char interesting[] = "{}[]\",:\\u0\xc3\xed\xa0\x80\xf4\x90 \n-e.1tn";
	size_t n = strlen(full_doc);
	char *buf = malloc(n + 8);
	rng_state = 0x9e3779b97f4a7c15ull;

	for (int iter = 0; iter < 20000; iter++) {
		size_t len = n;
		memcpy(buf, full_doc, n);
		int k = 1 + (int)(rng() % 3);
		for (int j = 0; j < k; j++) {
			size_t at = (size_t)(rng() % len);
			unsigned char c =
				(unsigned char)(rng() % 3 ? interesting[rng() %
									(sizeof(interesting) - 1)]
							  : (char)rng());
			switch (rng() % 3) {
			case 0:
				buf[at] = (char)c;
				break;
			case 1:
				if (len < n + 8) {
					memmove(buf + at + 1, buf + at, len - at);
					buf[at] = (char)c;
					len++;
				}
				break;
			default:
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
			}
		}
		struct cd_json *v = (struct cd_json *)1;
		struct cd_json_error e;
		int r = cd_json_parse(buf, len, NULL, &v, &e);
		if (r == 0)
			ck_assert_ptr_nonnull(v);
		else
			ck_assert_ptr_null(v);
		cd_json_free(v);
	}
	free(buf);
}
END_TEST

/* ---- integers ---- */

static const struct {
	const char *in;
	int r64;
	int64_t v64;
	int ru64;
	uint64_t vu64;
} int_cases[] = {
	{ "0", 0, 0, 0, 0 },
	{ "-0", 0, 0, 0, 0 },
	{ "1", 0, 1, 0, 1 },
	{ "-1", 0, -1, -ERANGE, 0 },
	{ "9223372036854775807", 0, INT64_MAX, 0, INT64_MAX },
	{ "-9223372036854775808", 0, INT64_MIN, -ERANGE, 0 },
	{ "9223372036854775808", -ERANGE, 0, 0, 9223372036854775808ull },
	{ "-9223372036854775809", -ERANGE, 0, -ERANGE, 0 },
	{ "18446744073709551615", -ERANGE, 0, 0, UINT64_MAX },
	{ "18446744073709551616", -ERANGE, 0, -ERANGE, 0 },
	{ "99999999999999999999999", -ERANGE, 0, -ERANGE, 0 },
	{ "1.0", -EINVAL, 0, -EINVAL, 0 },
	{ "1e2", -EINVAL, 0, -EINVAL, 0 },
	{ "1E2", -EINVAL, 0, -EINVAL, 0 },
	{ "-1.5", -EINVAL, 0, -EINVAL, 0 },
	{ "0.0", -EINVAL, 0, -EINVAL, 0 },
	{ "\"1\"", -EINVAL, 0, -EINVAL, 0 },
	{ "true", -EINVAL, 0, -EINVAL, 0 },
	{ "null", -EINVAL, 0, -EINVAL, 0 },
	{ "[1]", -EINVAL, 0, -EINVAL, 0 },
};

START_TEST(test_integers)
{
	struct cd_json *v = parse_ok(int_cases[_i].in);
	int64_t s = 77;
	uint64_t u = 77;
	int r = cd_json_int64(v, &s);

	ck_assert_msg(r == int_cases[_i].r64, "int64(%s) = %d", int_cases[_i].in, r);
	if (r == 0)
		ck_assert_int_eq(s, int_cases[_i].v64);
	else
		ck_assert_int_eq(s, 77);
	r = cd_json_uint64(v, &u);
	ck_assert_msg(r == int_cases[_i].ru64, "uint64(%s) = %d", int_cases[_i].in, r);
	if (r == 0)
		ck_assert_uint_eq(u, int_cases[_i].vu64);
	else
		ck_assert_uint_eq(u, 77);
	cd_json_free(v);
	ck_assert_int_eq(cd_json_int64(NULL, &s), -EINVAL);
	ck_assert_int_eq(cd_json_uint64(NULL, &u), -EINVAL);
}
END_TEST

static Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tc;

	tc = tcase_create("valid");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_scalars);
	tcase_add_test(tc, test_positions);
	tcase_add_test(tc, test_lookup);
	tcase_add_loop_test(tc, test_strings, 0, CD_ARRAY_SIZE(string_cases));
	tcase_add_test(tc, test_huge_string);
	suite_add_tcase(s, tc);

	tc = tcase_create("refusals");
	tcase_add_loop_test(tc, test_bad, 0, CD_ARRAY_SIZE(bad_cases));
	tcase_add_test(tc, test_err_optional);
	suite_add_tcase(s, tc);

	tc = tcase_create("duplicates");
	/* A quadratic duplicate check takes ~17 s on 100k keys here, the real one
	 * ~50 ms: the timeout is what catches a regression to O(n^2). */
	tcase_set_timeout(tc, 8);
	tcase_add_test(tc, test_dup_big);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_limit_values);
	tcase_add_test(tc, test_limit_depth);
	tcase_add_test(tc, test_deep_allowed);
	tcase_add_test(tc, test_limit_bytes);
	suite_add_tcase(s, tc);

	tc = tcase_create("hostile");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_truncated_prefixes);
	tcase_add_test(tc, test_mutations);
	suite_add_tcase(s, tc);

	tc = tcase_create("integers");
	tcase_add_loop_test(tc, test_integers, 0, CD_ARRAY_SIZE(int_cases));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(json_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
