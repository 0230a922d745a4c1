/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for the TOML reader and writer (src/core/toml.c): the TOML
 * spec's examples, every refusal with its position, the TOML 1.1 forms the
 * Codex binary's toml crate reads, the nesting limit, a big table's
 * duplicate check, hostile inputs, and that what the writer emits reads
 * back to the same values.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/toml.h"
#include "core/util.h"

static struct cd_toml *parse_ok(const char *s)
{
	struct cd_toml *t = NULL;
	struct cd_toml_error e;
	int r = cd_toml_parse(s, strlen(s), &t, &e);
	ck_assert_msg(r == 0, "parse of '%.80s' failed: %u:%u: %s", s, e.line, e.col, e.msg);
	return t;
}

/* Parse, write, parse the output: the same values. */
static void round_trip(const char *s)
{
	struct cd_toml *a = parse_ok(s), *b;
	char *out = NULL;
	size_t n = 0;
	cd_toml_write(a, &out, &n);
	ck_assert_uint_eq(strlen(out), n);
	b = parse_ok(out);
	ck_assert_msg(cd_toml_equal(a, b), "'%.80s' wrote '%s', which reads differently", s, out);
	free(out);
	cd_toml_free(a);
	cd_toml_free(b);
}

/* ---- the TOML spec's examples (toml.io, v1.0.0) ---- */

static const char *const valid_docs[] = {
	"# This is a TOML document\n\ntitle = \"TOML Example\"\n\n[owner]\nname = \"Tom "
	"Preston-Werner\"\ndob = 1979-05-27T07:32:00-08:00\n\n[database]\nenabled = true\nports "
	"= [ 8000, 8001, 8002 ]\ndata = [ [\"delta\", \"phi\"], [3.14] ]\ntemp_targets = { cpu = "
	"79.5, case = 72.0 }\n\n[servers]\n\n[servers.alpha]\nip = \"10.0.0.1\"\nrole = "
	"\"frontend\"\n\n[servers.beta]\nip = \"10.0.0.2\"\nrole = \"backend\"\n",
	"key = \"value\"\nbare_key = \"value\"\nbare-key = \"value\"\n1234 = \"value\"\n"
	"\"127.0.0.1\" = \"value\"\n\"character encoding\" = "
	"\"value\"\n\"\xca\x8e\xc7\x9d\xca\x9e\" "
	"= \"value\"\n'key2' = \"value\"\n'quoted \"value\"' = \"value\"\n\"\" = \"blank\"\n",
	"name = \"Orange\"\nphysical.color = \"orange\"\nphysical.shape = \"round\"\n"
	"site.\"google.com\" = true\nfruit. color = \"yellow\"\nfruit . flavor = \"banana\"\n",
	"apple.type = \"fruit\"\norange.type = \"fruit\"\napple.skin = \"thin\"\n",
	"3.14159 = \"pi\"\n",
	"str = \"I'm a string. \\\"You can quote me\\\". Name\\tJos\\u00E9\\nLocation\\tSF.\"\n",
	"str1 = \"\"\"\nRoses are red\nViolets are blue\"\"\"\nstr2 = \"\"\"\nThe quick brown "
	"\\\n\n\n"
	"  fox jumps over \\\n    the lazy dog.\"\"\"\n",
	"str4 = \"\"\"Here are two quotation marks: \"\". Simple enough.\"\"\"\n"
	"str7 = \"\"\"\"This,\" she said, \"is just a pointless statement.\"\"\"\"\n",
	"winpath  = 'C:\\Users\\nodejs\\templates'\nregex2 = '''I [dw]on't need \\d{2} apples'''\n"
	"lines  = '''\nThe first newline is\ntrimmed in raw strings.\n'''\n"
	"str = ''''That,' she said, 'is still pointless.''''\n",
	"int1 = +99\nint4 = -17\nint5 = 1_000\nhex3 = 0xdead_beef\noct1 = 0o01234567\n"
	"bin1 = 0b11010110\nmax = 9223372036854775807\nmin = -9223372036854775808\n",
	"flt1 = +1.0\nflt4 = 5e+22\nflt5 = 1e06\nflt6 = -2E-2\nflt8 = 224_617.445_991_228\n"
	"sf1 = inf\nsf3 = -inf\nsf4 = nan\nsf6 = -nan\nz = -0.0\ntiny = 5e-324\n",
	"odt1 = 1979-05-27T07:32:00Z\nodt3 = 1979-05-27T00:32:00.999999-07:00\n"
	"odt4 = 1979-05-27 07:32:00Z\nldt1 = 1979-05-27T07:32:00\nld1 = 1979-05-27\n"
	"lt1 = 07:32:00\nlt2 = 00:32:00.999999\nleap = 2000-02-29\n",
	"integers = [ 1, 2, 3 ]\nnested_mixed_array = [ [ 1, 2 ], [\"a\", \"b\", \"c\"] ]\n"
	"contributors = [\n  \"Foo Bar <foo@example.com>\",\n  { name = \"Baz Qux\", email = "
	"\"bazqux@example.com\" }\n]\nintegers3 = [\n  1,\n  2, # this is ok\n]\ne = []\n",
	"[dog.\"tater.man\"]\ntype.name = \"pug\"\n",
	"[a.b.c]\n[ d.e.f ]\n[ g .  h  . i ]\n[ j . \"\xca\x9e\" . 'l' ]\n",
	"[x.y.z.w]\n[x]\n",
	"[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n\n[fruit.apple.texture]\n"
	"smooth = true\n",
	"name = { first = \"Tom\", last = \"Preston-Werner\" }\nanimal = { type.name = \"pug\" }\n",
	"[[products]]\nname = \"Hammer\"\n\n[[products]]\n\n[[products]]\nname = \"Nail\"\n",
	"[[fruits]]\nname = \"apple\"\n\n[fruits.physical]\ncolor = \"red\"\n\n"
	"[[fruits.varieties]]\nname = \"red delicious\"\n\n[[fruits.varieties]]\nname = "
	"\"granny smith\"\n\n[[fruits]]\nname = \"banana\"\n\n[[fruits.varieties]]\nname = "
	"\"plantain\"\n",
	"points = [ { x = 1, y = 2, z = 3 },\n           { x = 7, y = 8, z = 9 } ]\n",
	/* Keys and strings that need quoting and escapes when written back. */
	"\"we\\\"ird key\" = 1\n\"a.b\" = { \"\" = 2 }\nx = \"\\\"\\\\\\b\\f\\r\\n\\t\\u0001 "
	"\\u007f\"\n\"\\u0000\" = \"nul\\u0000inside\"\n",
	/* A table array below a table array, and a table below its last element. */
	"[[a]]\n[[a.b]]\n[a.b.c]\nd = 1\n[[a]]\n",
	/* BOM, CRLF. */
	"\xef\xbb\xbf"
	"a = 1\r\nb = \"\"\"x\r\ny\"\"\"\r\n",
};

START_TEST(test_valid)
{
	round_trip(valid_docs[_i]);
}
END_TEST

START_TEST(test_values)
{
	struct cd_toml *t = parse_ok("i = -0\nh = 0xFF\no = 0o17\nb = 0b101\nf = 1_0.2_5e1_0\n"
				     "s = 'a\\b'\nd = 1979-05-27t07:32:00.123z\nt = 07:32\n"
				     "e = \"\\e\\x41\"\nu = \"\\U0001F600\"\n");
	ck_assert_int_eq(cd_toml_get(t, "i", 1)->u.i, 0);
	ck_assert_int_eq(cd_toml_get(t, "h", 1)->u.i, 255);
	ck_assert_int_eq(cd_toml_get(t, "o", 1)->u.i, 15);
	ck_assert_int_eq(cd_toml_get(t, "b", 1)->u.i, 5);
	ck_assert(cd_toml_get(t, "f", 1)->u.f == 10.25e10);
	ck_assert_str_eq(cd_toml_get(t, "s", 1)->u.str.s, "a\\b");
	ck_assert_str_eq(cd_toml_get(t, "d", 1)->u.str.s, "1979-05-27T07:32:00.123Z");
	ck_assert_int_eq(cd_toml_get(t, "d", 1)->type, CD_TOML_DATETIME);
	ck_assert_str_eq(cd_toml_get(t, "t", 1)->u.str.s, "07:32:00");
	ck_assert_int_eq(cd_toml_get(t, "t", 1)->type, CD_TOML_LOCAL_TIME);
	ck_assert_str_eq(cd_toml_get(t, "e", 1)->u.str.s, "\x1b"
							  "A");
	ck_assert_str_eq(cd_toml_get(t, "u", 1)->u.str.s, "\xf0\x9f\x98\x80");
	cd_toml_free(t);

	/* TOML 1.1 inline tables, as the toml crate reads them. */
	t = parse_ok("a = {\n  b = 1, # one\n  c = 2,\n}\n");
	ck_assert_uint_eq(cd_toml_get(t, "a", 1)->u.tab.n, 2);
	cd_toml_free(t);

	/* Fractions kept to nanoseconds. */
	t = parse_ok("a = 1979-05-27T07:32:00.123456789123Z\n");
	ck_assert_str_eq(cd_toml_get(t, "a", 1)->u.str.s, "1979-05-27T07:32:00.123456789Z");
	cd_toml_free(t);
}
END_TEST

/* ---- refusals, with their position ---- */

static const struct {
	const char *in;
	unsigned line, col;
	const char *msg;
} bad_cases[] = {
	{ "a = 1\na = 2\n", 2, 1, "duplicate key" },
	{ "spelling = 1\n\"spelling\" = 2\n", 2, 1, "duplicate key" },
	{ "fruit.apple = 1\nfruit.apple.smooth = true\n", 2, 1,
	  "cannot extend value of type integer" },
	{ "a = 1.5\na.b = 2\n", 2, 1, "cannot extend value of type float" },
	{ "[fruit]\napple = 1\n[fruit]\n", 3, 2, "duplicate key" },
	{ "[fruit]\napple = \"red\"\n[fruit.apple]\n", 3, 2, "duplicate key" },
	{ "[fruit]\napple.color = \"red\"\n[fruit.apple]\n", 3, 2, "duplicate key" },
	{ "a.b = 1\n[a]\n", 2, 2, "duplicate key" },
	{ "[a.b.c]\nz = 9\n[a]\nb.c.t = 9\n", 4, 1, "duplicate key" },
	{ "[product]\ntype = { name = \"Nail\" }\ntype.edible = false\n", 3, 1, "duplicate key" },
	{ "[product]\ntype.name = \"Nail\"\ntype = { edible = false }\n", 3, 1, "duplicate key" },
	{ "[fruit.physical]\n[[fruit]]\n", 2, 3, "duplicate key" },
	{ "fruits = []\n[[fruits]]\n", 2, 3, "duplicate key" },
	{ "[[fruits]]\n[[fruits.varieties]]\n[fruits.varieties]\n", 3, 2, "duplicate key" },
	{ "[[fruits]]\n[fruits.physical]\n[[fruits.physical]]\n", 3, 3, "duplicate key" },
	{ "a = { b = 1 }\n[a.c]\n", 2, 2, "duplicate key" },
	{ "a = [{ b = 1 }]\n[[a]]\n", 2, 3, "duplicate key" },
	{ "a = \"x\n", 1, 7, "invalid basic string, expected `\"`" },
	{ "a = 'x\n", 1, 7, "invalid literal string" },
	{ "a = \"\"\"x\n", 2, 1, "unterminated multi-line string" },
	{ "a = \"\\q\"\n", 1, 6, "invalid escape" },
	{ "a = \"\\uD800\"\n", 1, 6, "not a Unicode scalar value" },
	{ "a = \"\\u12\"\n", 1, 6, "expected 4 hex digits" },
	{ "a = 'x\x01'\n", 1, 7, "control character" },
	{ "# c\x7f\n", 1, 4, "control character in a comment" },
	{ "a = 1 b = 2\n", 1, 7, "expected newline" },
	{ "a = \n", 1, 5, "expected a value" },
	{ " = 1\n", 1, 2, "invalid key" },
	{ "[]\n", 1, 2, "invalid key" },
	{ "[a.]\n", 1, 4, "invalid key" },
	{ "[a\n", 1, 3, "expected `.`, `]`" },
	{ "a = [1,,2]\n", 1, 8, "invalid string" },
	{ "a = [1 2]\n", 1, 8, "expected `,` or `]`" },
	{ "a = [1\n", 2, 1, "expected `,` or `]`" },
	{ "a = {b = 1 c = 2}\n", 1, 12, "expected `,` or `}`" },
	{ "a = .7\n", 1, 5, "invalid string" },
	{ "a = 7.\n", 1, 5, "invalid number" },
	{ "a = 3.e+20\n", 1, 5, "invalid number" },
	{ "a = 01\n", 1, 5, "unexpected leading zero" },
	{ "a = 1__0\n", 1, 5, "invalid number" },
	{ "a = 1_\n", 1, 5, "invalid number" },
	{ "a = +0x1\n", 1, 5, "invalid number" },
	{ "a = 0x\n", 1, 5, "invalid number" },
	{ "a = 0b2\n", 1, 5, "invalid number" },
	{ "a = 9223372036854775808\n", 1, 5, "too large" },
	{ "a = -9223372036854775809\n", 1, 5, "too large" },
	{ "a = 0x8000000000000000\n", 1, 5, "too large" },
	{ "a = 1e1000\n", 1, 5, "overflowed" },
	{ "a = tru\n", 1, 5, "invalid boolean, expected `true`" },
	{ "a = fals\n", 1, 5, "invalid boolean, expected `false`" },
	{ "a = 1979-02-29\n", 1, 5, "invalid date" },
	{ "a = 1979-13-01\n", 1, 5, "expected month between 01 and 12" },
	{ "a = 1979-05-27T25:00:00\n", 1, 5, "invalid date-time" },
	{ "a = 1979-05-27T07:32:00.Z\n", 1, 5, "invalid date-time" },
	{ "a = 1979-05-27T07:32:00+24:00\n", 1, 5, "invalid date-time" },
	{ "\xc3\x28 = 1\n", 1, 1, "invalid UTF-8" },
	{ "a = \"\xed\xa0\x80\"\n", 1, 6, "invalid UTF-8" },
	{ "a = \"\xc0\xaf\"\n", 1, 6, "invalid UTF-8" },
	{ "a = 1\rb = 2\n", 1, 6, "expected newline" },
	{ "k = \"\"\"a\"\"\"\"\"\"\n", 1, 9, "too many quotes" },
};

START_TEST(test_bad)
{
	struct cd_toml *t = (struct cd_toml *)1;
	struct cd_toml_error e;
	const char *in = bad_cases[_i].in;
	int r = cd_toml_parse(in, strlen(in), &t, &e);
	ck_assert_msg(r == -EINVAL, "'%s' was accepted", in);
	ck_assert_ptr_null(t);
	ck_assert_msg(strstr(e.msg, bad_cases[_i].msg), "'%s': message '%s' lacks '%s'", in, e.msg,
		      bad_cases[_i].msg);
	ck_assert_msg(e.line == bad_cases[_i].line && e.col == bad_cases[_i].col,
		      "'%s': at %u:%u, want %u:%u (%s)", in, e.line, e.col, bad_cases[_i].line,
		      bad_cases[_i].col, e.msg);
}
END_TEST

START_TEST(test_span)
{
	/* A duplicate key's error covers the key, as the crate's caret line does. */
	static const char in[] = "a = 1\n\"x y\" . z = 2\n[t]\n[ t ]\n";
	struct cd_toml *t = NULL;
	struct cd_toml_error e;
	ck_assert_int_eq(cd_toml_parse("abc = 1\nabc = 2\n", 16, &t, &e), -EINVAL);
	ck_assert_uint_eq(e.span, 3);
	ck_assert_int_eq(cd_toml_parse(in, sizeof(in) - 1, &t, &e), -EINVAL);
	ck_assert_uint_eq(e.line, 4);
	ck_assert_uint_eq(e.col, 3);
	ck_assert_uint_eq(e.span, 1);
}
END_TEST

START_TEST(test_nul_refused)
{
	static const char in[] = "a = 1 # x\0y\n";
	struct cd_toml *t = NULL;
	struct cd_toml_error e;
	ck_assert_int_eq(cd_toml_parse(in, sizeof(in) - 1, &t, &e), -EINVAL);
	ck_assert_uint_eq(e.col, 10);
	ck_assert_ptr_null(cd_toml_free(NULL));
}
END_TEST

/* ---- limits ---- */

static char *nested(unsigned depth, const char *open, const char *close)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "a = ");
	for (unsigned i = 0; i < depth; i++)
		cd_strbuf_append(&sb, open);
	if (*open == '{')
		cd_strbuf_append(&sb, "1");
	for (unsigned i = 0; i < depth; i++)
		cd_strbuf_append(&sb, close);
	cd_strbuf_append_c(&sb, '\n');
	return cd_strbuf_steal(&sb);
}

START_TEST(test_depth)
{
	/* The toml crate's limit: 80 levels read, the 81st refused where it opens. */
	char *s = nested(CD_TOML_MAX_DEPTH, "[", "]");
	round_trip(s);
	free(s);
	s = nested(CD_TOML_MAX_DEPTH, "{b=", "}");
	round_trip(s);
	free(s);

	struct cd_toml *t = NULL;
	struct cd_toml_error e;
	s = nested(CD_TOML_MAX_DEPTH + 1, "[", "]");
	ck_assert_int_eq(cd_toml_parse(s, strlen(s), &t, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "cannot recurse further; max recursion depth met");
	ck_assert_uint_eq(e.line, 1);
	ck_assert_uint_eq(e.col, 5 + CD_TOML_MAX_DEPTH);
	free(s);
	s = nested(100000, "{b=", "}");
	ck_assert_int_eq(cd_toml_parse(s, strlen(s), &t, &e), -EINVAL);
	free(s);
}
END_TEST

START_TEST(test_big_table)
{
	/* 200k keys in one table, then a duplicate of an early one: found, and fast. */
	struct cd_strbuf sb = { 0 };
	for (unsigned i = 0; i < 200000; i++)
		cd_strbuf_printf(&sb, "k%u = %u\n", i, i);
	cd_strbuf_append(&sb, "k7 = 1\n");
	struct cd_toml *t = NULL;
	struct cd_toml_error e;
	ck_assert_int_eq(cd_toml_parse(sb.buf, sb.len, &t, &e), -EINVAL);
	ck_assert_uint_eq(e.line, 200001);
	ck_assert_str_eq(e.msg, "duplicate key");
	cd_strbuf_done(&sb);
}
END_TEST

/* ---- hostile inputs: every prefix and single-byte mutation of a rich document ---- */

static const char rich[] = "a.b = [1, 2.5, 'x', \"\\u00e9\", { c = 1979-05-27T07:32:00Z }]\n"
			   "[t]\nk = \"\"\"m\\\n  l\"\"\"\n[[u.v]]\nw = 0x_1f\n";

START_TEST(test_hostile)
{
	static const char bytes[] = "[]{}=.,\"'\\\n#0x_:-+ \xff";
	size_t n = sizeof(rich) - 1;
	for (size_t i = 0; i <= n; i++) {
		struct cd_toml *t = NULL;
		struct cd_toml_error e;
		if (cd_toml_parse(rich, i, &t, &e) == 0)
			t = cd_toml_free(t);
		char *m = cd_xmalloc(n);
		for (size_t k = 0; k + 1 < sizeof(bytes) && i < n; k++) {
			memcpy(m, rich, n);
			m[i] = bytes[k];
			if (cd_toml_parse(m, n, &t, &e) == 0) {
				char *out = NULL;
				size_t ol = 0;
				cd_toml_write(t, &out, &ol);
				struct cd_toml *b = NULL;
				ck_assert_msg(cd_toml_parse(out, ol, &b, &e) == 0,
					      "output of a mutation does not read: %s", out);
				ck_assert(cd_toml_equal(t, b));
				cd_toml_free(b);
				free(out);
				t = cd_toml_free(t);
			}
		}
		free(m);
	}
}
END_TEST

static Suite *toml_suite(void)
{
	Suite *s = suite_create("toml");
	TCase *tc = tcase_create("valid");
	tcase_add_loop_test(tc, test_valid, 0, CD_ARRAY_SIZE(valid_docs));
	tcase_add_test(tc, test_values);
	suite_add_tcase(s, tc);

	tc = tcase_create("refusals");
	tcase_add_loop_test(tc, test_bad, 0, CD_ARRAY_SIZE(bad_cases));
	tcase_add_test(tc, test_nul_refused);
	tcase_add_test(tc, test_span);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	/* A quadratic duplicate check takes minutes on 200k keys; the index, ~0.1 s. */
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_big_table);
	suite_add_tcase(s, tc);

	tc = tcase_create("hostile");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_hostile);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(toml_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
