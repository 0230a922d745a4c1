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
	/* Patterns without wildcards match whole names, case-insensitively. */
	{ "{}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":true,\"exclude\":[\"path\",\"OTHE\"],"
	  "\"set\":{},\"includeOnly\":[]}",
	  "API_KEY=k Home=/h my_token=t OTHER=o" },
	/* Patterns of wildcards alone match by length. */
	{ "{}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":true,\"exclude\":[\"????\"],"
	  "\"set\":{},\"includeOnly\":[]}",
	  "API_KEY=k my_token=t OTHER=o" },
	{ "{}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":true,\"exclude\":[\"*?????\"],"
	  "\"set\":{},\"includeOnly\":[]}",
	  "PATH=/bin Home=/h" },
	{ "{}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":true,\"exclude\":[\"**\"],"
	  "\"set\":{\"S\":\"s\"},\"includeOnly\":[\"s\",\"x\\u0000\"]}",
	  "S=s" },
	/* A name set again keeps its place. */
	{ "{\"Home\":\"/y\",\"Z\":\"z\",\"PATH\":\"/x\"}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":true,\"exclude\":[],"
	  "\"set\":{\"OTHER\":\"p\"},\"includeOnly\":[]}",
	  "PATH=/x API_KEY=k Home=/y my_token=t OTHER=p Z=z" },
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
	{ "{\"A\":1}", NULL, "invalid type: number, expected a string" },
	{ "[]", NULL, "invalid type: sequence, expected a map" },
	{ "{\"A=B\":\"1\"}", NULL, "invalid environment variable name \"A=B\" in `env`" },
	{ "{}", "{\"inherit\":\"most\"}",
	  "unknown variant `most`, expected one of `core`, `all`, `none`" },
	{ "{}", "{\"inherit\":\"all\"}", "missing field `ignoreDefaultExcludes`" },
	{ "{}",
	  "{\"inherit\":\"all\",\"ignoreDefaultExcludes\":false,\"exclude\":\"X\",\"set\":{},"
	  "\"includeOnly\":[]}",
	  "invalid type: string \"X\", expected a sequence" },
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

/*
 * Many variables: every name once, in the order first set, the last value
 * winning (a merge that looked each name up in a list took 18 s for 100,000).
 */
START_TEST(test_env_large)
{
	enum {
		N = 50000
	};
	struct cd_strbuf env = { 0 }, pol = { 0 };
	cd_strbuf_append(&env, "{");
	for (int i = 0; i < N; i++)
		cd_strbuf_printf(&env, "%s\"V%d\":\"e%d\"", i ? "," : "", i, i);
	cd_strbuf_append(&env, "}");
	cd_strbuf_append(&pol, "{\"inherit\":\"none\",\"ignoreDefaultExcludes\":true,"
			       "\"exclude\":[],\"set\":{");
	for (int i = 0; i < N; i += 2)
		cd_strbuf_printf(&pol, "%s\"V%d\":\"s%d\"", i ? "," : "", N - 1 - i, i);
	cd_strbuf_append(&pol, "},\"includeOnly\":[]}");
	struct cd_json *e = parse(env.buf), *p = parse(pol.buf);
	char **out = NULL, *err = NULL;
	ck_assert_int_eq(cd_env_build(e, p, NULL, &out, &err), 0);
	ck_assert_uint_eq(cd_strv_length(out), N);
	/* set first (V49999, V49997, ...), then env's other names in order. */
	ck_assert_str_eq(out[0], "V49999=e49999");
	ck_assert_str_eq(out[N / 2 - 1], "V1=e1");
	ck_assert_str_eq(out[N / 2], "V0=e0");
	ck_assert_str_eq(out[N - 1], "V49998=e49998");
	cd_strv_free(out);
	cd_json_free(e);
	cd_json_free(p);
	cd_strbuf_done(&env);
	cd_strbuf_done(&pol);
}
END_TEST

/*
 * Wildcard patterns against many names: counted, and refused past
 * CD_ENV_MATCH_STEPS rather than run for minutes.
 */
START_TEST(test_env_match_budget)
{
	enum {
		N = 2000
	};
	struct cd_strbuf pol = { 0 };
	cd_strbuf_append(&pol, "{\"inherit\":\"none\",\"ignoreDefaultExcludes\":true,"
			       "\"exclude\":[],\"set\":{");
	for (int i = 0; i < N; i++) {
		cd_strbuf_printf(&pol, "%s\"", i ? "," : "");
		for (int k = 0; k < 1000; k++)
			cd_strbuf_append_c(&pol, 'A');
		cd_strbuf_printf(&pol, "%d\":\"x\"", i);
	}
	cd_strbuf_append(&pol, "},\"includeOnly\":[");
	for (int i = 0; i < N; i++)
		cd_strbuf_printf(&pol, "%s\"*a*b%d\"", i ? "," : "", i);
	cd_strbuf_append(&pol, "]}");
	struct cd_json *e = parse("{}"), *p = parse(pol.buf);
	char **out = NULL, *err = NULL;
	ck_assert_int_eq(cd_env_build(e, p, NULL, &out, &err), -EINVAL);
	ck_assert_ptr_null(out);
	ck_assert_str_eq(err, "`envPolicy.includeOnly`: matching 2000 wildcard patterns against "
			      "2000 environment variables takes more than 67108864 steps; use "
			      "fewer or simpler patterns");
	free(err);
	cd_json_free(e);
	cd_json_free(p);
	cd_strbuf_done(&pol);
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
	ck_assert_str_eq(err, "invalid type: null, expected a string");
	free(err);
	ck_assert_int_eq(cd_param_bool(p, "b", "tty", true, false, &b, &err), -EINVAL);
	ck_assert_str_eq(err, "invalid type: string \"no\", expected a boolean");
	free(err);
	ck_assert_int_eq(cd_param_bool(p, "zz", "zz", false, true, &b, &err), 1);
	ck_assert(b);
	ck_assert_int_eq(cd_param_u64(p, "n", "n", 7, &u, &err), 1);
	ck_assert_uint_eq(u, 7);
	ck_assert_int_eq(cd_param_u64(p, "u", "afterSeq", 0, &u, &err), -EINVAL);
	ck_assert_str_eq(err, "invalid number");
	free(err);
	ck_assert_int_eq(cd_param_u64(p, "f", "waitMs", 0, &u, &err), -EINVAL);
	ck_assert_str_eq(err, "invalid number");
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
	tcase_add_test(tc, test_env_large);
	tcase_add_test(tc, test_env_match_budget);
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
