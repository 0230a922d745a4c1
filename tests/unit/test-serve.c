/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for the pure parts of `cordon serve`'s intent.c: the env
 * policy (reference 8.1), its wildcard patterns and the params getters'
 * serde-style messages.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "serve/intent.h"

static struct cd_json *parse(const char *s)
{
	struct cd_json *v = NULL;
	struct cd_json_error err;
	ck_assert_int_eq(cd_json_parse(s, strlen(s), NULL, &v, &err), 0);
	return v;
}

static char *join(char **env)
{
	struct cd_strbuf sb = { 0 };
	for (char **e = env; e && *e; e++)
		cd_strbuf_printf(&sb, "%s%s", sb.len ? " " : "", *e);
	return cd_strbuf_steal(&sb);
}

START_TEST(test_pattern)
{
	ck_assert(cd_env_pattern_match("*KEY*", "API_KEY"));
	ck_assert(cd_env_pattern_match("*KEY*", "my_key_file"));
	ck_assert(cd_env_pattern_match("*KEY*", "KEY"));
	ck_assert(!cd_env_pattern_match("*KEY*", "KE"));
	ck_assert(cd_env_pattern_match("A?C", "abc"));
	ck_assert(!cd_env_pattern_match("A?C", "ac"));
	ck_assert(cd_env_pattern_match("*", ""));
	ck_assert(cd_env_pattern_match("A*B*C", "axxbyyc"));
	ck_assert(!cd_env_pattern_match("A*B*C", "axxbyy"));
	ck_assert(!cd_env_pattern_match("PATH", "PATHX"));
}
END_TEST

static const struct {
	const char *env, *policy, *want;
} env_cases[] = {
	/* No policy: exactly env. */
	{ "{\"A\":\"1\"}", "null", "A=1" },
	{ "{}", NULL, "" },
	/* core keeps the core names (case-insensitively), drops the rest. */
	{ "{}",
	  "{\"inherit\":\"core\",\"ignoreDefaultExcludes\":false,\"exclude\":[],\"set\":{},"
	  "\"includeOnly\":[]}",
	  "PATH=/bin Home=/h" },
	{ "{}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":false,\"exclude\":[],\"set\":{},"
	  "\"includeOnly\":[]}",
	  "PATH=/bin Home=/h OTHER=o" },
	{ "{}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":true,\"exclude\":[\"oth*\"],"
	  "\"set\":{\"S\":\"s\"},\"includeOnly\":[]}",
	  "PATH=/bin API_KEY=k Home=/h my_token=t S=s" },
	{ "{\"PATH\":\"/x\",\"N\":\"n\"}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":false,\"exclude\":[],\"set\":{},"
	  "\"includeOnly\":[\"P*\",\"h*\"]}",
	  "PATH=/x Home=/h N=n" },
	{ "{\"A\":\"1\"}",
	  "{\"inherit\":\"none\",\"ignoreDefaultExcludes\":false,\"exclude\":[],"
	  "\"set\":{\"B\":\"2\"},\"includeOnly\":[]}",
	  "B=2 A=1" },
};

START_TEST(test_env)
{
	static char *base[] = {
		"PATH=/bin", "API_KEY=k", "Home=/h", "my_token=t", "OTHER=o", NULL
	};
	struct cd_json *env = parse(env_cases[_i].env);
	struct cd_json *pol = env_cases[_i].policy ? parse(env_cases[_i].policy) : NULL;
	char **out = NULL, *err = NULL;
	ck_assert_int_eq(cd_env_build(env, pol, base, &out, &err), 0);
	char *got = join(out);
	ck_assert_str_eq(got, env_cases[_i].want);
	free(got);
	cd_strv_free(out);
	cd_json_free(env);
	cd_json_free(pol);
}
END_TEST

static const struct {
	const char *env, *policy, *msg;
} env_errors[] = {
	{ "{\"A\":1}", NULL, "invalid type: integer `1`, expected a string for `env.A`" },
	{ "[]", NULL, "invalid type: sequence, expected a map for `env`" },
	{ "{\"A=B\":\"1\"}", NULL, "invalid environment variable name \"A=B\" in `env`" },
	{ "{}", "{\"inherit\":\"most\"}",
	  "unknown variant `most`, expected one of `core`, `all`, `none` for `envPolicy.inherit`" },
	{ "{}", "{\"inherit\":\"all\"}", "missing field `envPolicy.ignoreDefaultExcludes`" },
	{ "{}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":false,\"exclude\":\"X\",\"set\":{},"
	  "\"includeOnly\":[]}",
	  "invalid type: string \"X\", expected a sequence for `envPolicy.exclude`" },
};

START_TEST(test_env_errors)
{
	struct cd_json *env = parse(env_errors[_i].env);
	struct cd_json *pol = env_errors[_i].policy ? parse(env_errors[_i].policy) : NULL;
	char **out = NULL, *err = NULL;
	ck_assert_int_eq(cd_env_build(env, pol, NULL, &out, &err), -EINVAL);
	ck_assert_ptr_null(out);
	ck_assert_str_eq(err, env_errors[_i].msg);
	free(err);
	cd_json_free(env);
	cd_json_free(pol);
}
END_TEST

START_TEST(test_getters)
{
	struct cd_json *p = parse("{\"s\":\"x\",\"b\":\"no\",\"n\":null,\"u\":-1,\"f\":1.5}");
	const struct cd_json *v;
	char *err = NULL;
	bool b;
	uint64_t u;

	ck_assert_int_eq(cd_param_string(p, "s", "s", true, false, &v, &err), 0);
	ck_assert_str_eq(v->u.str.s, "x");
	ck_assert_int_eq(cd_param_string(p, "zz", "zz", false, false, &v, &err), 1);
	ck_assert_int_eq(cd_param_string(p, "zz", "zz", true, false, &v, &err), -EINVAL);
	ck_assert_str_eq(err, "missing field `zz`");
	free(err);
	ck_assert_int_eq(cd_param_string(p, "n", "n", true, true, &v, &err), 1);
	ck_assert_int_eq(cd_param_string(p, "n", "n", true, false, &v, &err), -EINVAL);
	ck_assert_str_eq(err, "invalid type: null, expected a string for `n`");
	free(err);
	ck_assert_int_eq(cd_param_bool(p, "b", "tty", true, false, &b, &err), -EINVAL);
	ck_assert_str_eq(err, "invalid type: string \"no\", expected a boolean for `tty`");
	free(err);
	ck_assert_int_eq(cd_param_bool(p, "zz", "zz", false, true, &b, &err), 1);
	ck_assert(b);
	ck_assert_int_eq(cd_param_u64(p, "n", "n", 7, &u, &err), 1);
	ck_assert_uint_eq(u, 7);
	ck_assert_int_eq(cd_param_u64(p, "u", "afterSeq", 0, &u, &err), -EINVAL);
	ck_assert_str_eq(err, "invalid type: integer `-1`, expected u64 for `afterSeq`");
	free(err);
	ck_assert_int_eq(cd_param_u64(p, "f", "waitMs", 0, &u, &err), -EINVAL);
	ck_assert_str_eq(err, "invalid type: floating point `1.5`, expected u64 for `waitMs`");
	free(err);
	ck_assert_int_eq(cd_param_object(NULL, "struct ExecParams", &err), -EINVAL);
	ck_assert_str_eq(err, "invalid type: null, expected struct ExecParams");
	free(err);
	cd_json_free(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("serve");
	TCase *tc = tcase_create("env");
	tcase_add_test(tc, test_pattern);
	tcase_add_loop_test(tc, test_env, 0, sizeof(env_cases) / sizeof(env_cases[0]));
	tcase_add_loop_test(tc, test_env_errors, 0, sizeof(env_errors) / sizeof(env_errors[0]));
	suite_add_tcase(s, tc);
	tc = tcase_create("params");
	tcase_add_test(tc, test_getters);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
