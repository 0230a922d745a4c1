/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for the installed-plugin rules of capabilities/discoverV2
 * (src/core/plugincache.c). The names, versions, metadata files and
 * manifests below were put in a $CODEX_HOME/plugins/cache fixture and
 * listed by the released Codex 0.169.0 exec-server: the expected answers
 * are its (the semver orderings follow Rust's semver crate, which it uses).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/plugincache.h"
#include "core/util.h"

START_TEST(test_names)
{
	static const char *const ok[] = { "a", "a.b", "-x", "_x", "Ab", "m-1", "a.b.c" };
	static const char *const bad[] = { "",	  ".h",	 "h.",	     "a..b", "a+b",
					   "a b", "a@b", "\xc3\xa9", ".",    ".." };
	for (size_t i = 0; i < CD_ARRAY_SIZE(ok); i++)
		ck_assert_msg(cd_plugin_name_ok(ok[i]), "%s", ok[i]);
	for (size_t i = 0; i < CD_ARRAY_SIZE(bad); i++)
		ck_assert_msg(!cd_plugin_name_ok(bad[i]), "%s", bad[i]);
	static const char *const vok[] = { "1", "local", "1.0.0+b", ".hidden", "_1", "a-b" };
	static const char *const vbad[] = { "", ".", "..", "v 1", "1/2", "1@2" };
	for (size_t i = 0; i < CD_ARRAY_SIZE(vok); i++)
		ck_assert_msg(cd_plugin_version_ok(vok[i]), "%s", vok[i]);
	for (size_t i = 0; i < CD_ARRAY_SIZE(vbad); i++)
		ck_assert_msg(!cd_plugin_version_ok(vbad[i]), "%s", vbad[i]);
}
END_TEST

/* a < b, in every case. */
static const char *const less[][2] = {
	{ "1.9.0", "1.10.0" },
	{ "1.0.0-rc.1", "1.0.0" },
	{ "1.0.0-alpha", "1.0.0-alpha.1" },
	{ "1.0.0-2", "1.0.0-10" },
	{ "1.0.0-10", "1.0.0-a" },
	{ "1.0.0", "1.0.0+a" },
	{ "1.0.0+a", "1.0.0+b" },
	{ "1.0.0+2", "1.0.0+10" },
	{ "1.0.0+0", "1.0.0+00" },
	{ "1.0.0+1", "1.0.0+a" },
	{ "1.0.0", "abc" },	   /* not a version: bytes */
	{ "01.0.0", "1.0.0" },	   /* a leading zero: not a version */
	{ ".hidden", "_1" },	   /* bytes */
	{ "1.0.0-01", "1.0.0-1" }, /* "-01" is not a version: bytes */
	{ "10.0.0", "9" },	   /* "9" is not a version: bytes */
	{ "18446744073709551615.0.0", "18446744073709551616.0.0" },
};

START_TEST(test_version_cmp)
{
	const char *a = less[_i][0], *b = less[_i][1];
	ck_assert_msg(cd_plugin_version_cmp(a, b) < 0, "%s vs %s", a, b);
	ck_assert_msg(cd_plugin_version_cmp(b, a) > 0, "%s vs %s", b, a);
	ck_assert_int_eq(cd_plugin_version_cmp(a, a), 0);
}
END_TEST

START_TEST(test_pick)
{
	const char *v1[] = { "1.9.0", "1.10.0" };
	ck_assert_str_eq(cd_plugin_version_pick(v1, 2), "1.10.0");
	const char *v2[] = { "9.0.0", "local", "2.0.0" };
	ck_assert_str_eq(cd_plugin_version_pick(v2, 3), "local");
	const char *v3[] = { "abc", "1.0.0" };
	ck_assert_str_eq(cd_plugin_version_pick(v3, 2), "abc");
	ck_assert_ptr_null(cd_plugin_version_pick(NULL, 0));
}
END_TEST

struct rid_case {
	const char *in, *want; /* want NULL: refused */
	int r;
};

static const struct rid_case rid_cases[] = {
	{ "{\"schema_version\":1,\"remote_plugin_id\":\" rid \"}", "rid", CD_PLUGIN_OK },
	{ "{\"schema_version\":1,\"remote_plugin_id\":\"x\",\"extra\":1}", "x", CD_PLUGIN_OK },
	{ "[1,\"arr\"]", "arr", CD_PLUGIN_OK },
	{ "{\"schema_version\":1,\"remote_plugin_id\":\"\\u00a0z\\u3000\"}", "z", CD_PLUGIN_OK },
	{ "{\"schema_version\":2,\"remote_plugin_id\":\"r\"}", NULL, CD_PLUGIN_INVALID },
	{ "{\"schema_version\":1.0,\"remote_plugin_id\":\"r\"}", NULL, CD_PLUGIN_INVALID },
	{ "{\"schema_version\":256,\"remote_plugin_id\":\"r\"}", NULL, CD_PLUGIN_INVALID },
	{ "{\"remote_plugin_id\":\"r\"}", NULL, CD_PLUGIN_INVALID },
	{ "{\"schema_version\":1,\"remote_plugin_id\":\"  \"}", NULL, CD_PLUGIN_INVALID },
	{ "{\"schema_version\":1,\"remote_plugin_id\":5}", NULL, CD_PLUGIN_INVALID },
	{ "{\"schema_version\":1", NULL, CD_PLUGIN_INVALID },
	{ "[1]", NULL, CD_PLUGIN_INVALID },
	{ "{\"schema_version\":1,\"remote_plugin_id\":\"x\",\"remote_plugin_id\":\"y\"}", NULL,
	  CD_PLUGIN_UNSUPPORTED },
};

START_TEST(test_remote_id)
{
	const struct rid_case *c = &rid_cases[_i];
	const char *why = NULL;
	char *id = NULL;
	int r = cd_plugin_remote_id(c->in, strlen(c->in), &id, &why);
	ck_assert_msg(r == c->r, "case %d: %d (%s)", _i, r, why ? why : "");
	if (c->want)
		ck_assert_str_eq(id, c->want);
	else
		ck_assert_ptr_null(id);
	free(id);
}
END_TEST

START_TEST(test_remote_id_limits)
{
	struct cd_strbuf b = { 0 };
	char *id = NULL;
	const char *why;
	cd_strbuf_append(&b, "{\"schema_version\":1,\"remote_plugin_id\":\"");
	for (int i = 0; i < 1024; i++)
		cd_strbuf_append_c(&b, 'x');
	cd_strbuf_append(&b, "\"}");
	ck_assert_int_eq(cd_plugin_remote_id(b.buf, b.len, &id, &why), CD_PLUGIN_OK);
	ck_assert_uint_eq(strlen(id), 1024);
	free(id);
	b.len -= 2;
	cd_strbuf_append(&b, "x\"}");
	ck_assert_int_eq(cd_plugin_remote_id(b.buf, b.len, &id, &why), CD_PLUGIN_INVALID);
	b.len = 0;
	cd_strbuf_append(&b, "{\"schema_version\":1,\"remote_plugin_id\":\"x\",\"pad\":\"");
	while (b.len < CD_PLUGIN_REMOTE_MAX - 1)
		cd_strbuf_append_c(&b, 'p');
	cd_strbuf_append(&b, "\"}");
	ck_assert_int_eq(cd_plugin_remote_id(b.buf, b.len, &id, &why), CD_PLUGIN_INVALID);
	b.len = CD_PLUGIN_REMOTE_MAX - 2;
	cd_strbuf_append(&b, "\"}");
	ck_assert_int_eq(cd_plugin_remote_id(b.buf, b.len, &id, &why), CD_PLUGIN_OK);
	free(id);
	cd_strbuf_done(&b);
}
END_TEST

struct dn_case {
	const char *in, *want; /* want NULL: refused */
	int r;
};

static const struct dn_case dn_cases[] = {
	{ "{\"name\":\"pa\",\"interface\":{\"displayName\":\"Plugin A10\"}}", "Plugin A10",
	  CD_PLUGIN_OK },
	{ "{\"name\":\"x\",\"interface\":{\"displayName\":\" a  b \"}}", "a  b", CD_PLUGIN_OK },
	{ "{\"name\":\" y18 \"}", " y18 ", CD_PLUGIN_OK },
	{ "{}", "DIR", CD_PLUGIN_OK },
	{ "{\"name\":\"  \"}", "DIR", CD_PLUGIN_OK },
	{ "{\"name\":\"x3\",\"interface\":{\"displayName\":\"\"}}", "x3", CD_PLUGIN_OK },
	{ "{\"name\":\"x7\",\"interface\":{\"displayName\":\"  \"}}", "x7", CD_PLUGIN_OK },
	{ "{\"interface\":{\"displayName\":\"I\"}}", "I", CD_PLUGIN_OK },
	{ "{\"name\":\"a\",\"interface\":{\"displayName\":null}}", "a", CD_PLUGIN_OK },
	{ "{\"name\":\"a\",\"interface\":null,\"apps\":null}", "a", CD_PLUGIN_OK },
	{ "{\"name\":\"a\",\"version\":5,\"mcpServers\":5,\"skills\":5,\"apps\":\"./x\"}", "a",
	  CD_PLUGIN_OK },
	{ "{\"name\":\"a\",\"interface\":{\"shortDescription\":5}}", "a", CD_PLUGIN_OK },
	{ "{\"name\":5}", NULL, CD_PLUGIN_INVALID },
	{ "{\"name\":null}", NULL, CD_PLUGIN_INVALID },
	{ "{\"name\":\"a\",\"apps\":5}", NULL, CD_PLUGIN_INVALID },
	{ "{\"name\":\"a\",\"apps\":{}}", NULL, CD_PLUGIN_INVALID },
	{ "{\"name\":\"a\",\"interface\":\"str\"}", NULL, CD_PLUGIN_INVALID },
	{ "{\"name\":\"a\",\"interface\":5}", NULL, CD_PLUGIN_INVALID },
	{ "{\"name\":\"a\",\"interface\":{\"displayName\":5}}", NULL, CD_PLUGIN_INVALID },
	{ "{\"name\":\"x5\",", NULL, CD_PLUGIN_INVALID },
	{ "{\"name\":\"a\"} x", NULL, CD_PLUGIN_INVALID },
	{ "\xef\xbb\xbf{\"name\":\"a\"}", NULL, CD_PLUGIN_INVALID },
	{ "5", NULL, CD_PLUGIN_INVALID },
	{ "[\"n\"]", NULL, CD_PLUGIN_UNSUPPORTED },
	{ "{\"name\":\"a\",\"interface\":[\"D\"]}", NULL, CD_PLUGIN_UNSUPPORTED },
	{ "{\"name\":\"a\",\"name\":\"b\"}", NULL, CD_PLUGIN_UNSUPPORTED },
	{ "{\"name\":\"a\\u0000b\"}", NULL, CD_PLUGIN_UNSUPPORTED },
};

START_TEST(test_display_name)
{
	const struct dn_case *c = &dn_cases[_i];
	const char *why = NULL;
	char *dn = NULL;
	int r = cd_plugin_display_name(c->in, strlen(c->in), "DIR", &dn, &why);
	ck_assert_msg(r == c->r, "case %d: %d (%s)", _i, r, why ? why : "");
	if (c->want)
		ck_assert_str_eq(dn, c->want);
	else
		ck_assert_ptr_null(dn);
	free(dn);
}
END_TEST

static Suite *plugincache_suite(void)
{
	Suite *s = suite_create("plugincache");
	TCase *tc = tcase_create("rules");
	tcase_add_test(tc, test_names);
	tcase_add_loop_test(tc, test_version_cmp, 0, CD_ARRAY_SIZE(less));
	tcase_add_test(tc, test_pick);
	tcase_add_loop_test(tc, test_remote_id, 0, CD_ARRAY_SIZE(rid_cases));
	tcase_add_test(tc, test_remote_id_limits);
	tcase_add_loop_test(tc, test_display_name, 0, CD_ARRAY_SIZE(dn_cases));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(plugincache_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
