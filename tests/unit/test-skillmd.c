/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for the SKILL.md front-matter reader (src/core/skillmd.c).
 * Every accepted and refused case below was put in a CODEX_HOME/skills
 * fixture and read by the released Codex 0.169.0 exec-server's
 * capabilities/discoverV2: the expected name, description and short
 * description are its answer, and each INVALID case is one it skipped.
 * UNSUPPORTED cases are YAML outside cordon's subset (refused, not guessed).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/skillmd.h"
#include "core/util.h"

struct ok_case {
	const char *dir, *in, *name, *desc, *sd;
};

static const struct ok_case ok_cases[] = {
	{ "a", "---\nname: alpha\ndescription: The alpha skill\n---\nbody\n", "alpha",
	  "The alpha skill", NULL },
	{ "c",
	  "---\nname: c\ndescription: \"quoted: yes\"\nmetadata:\n  short-description: short "
	  "c\n---\n",
	  "c", "quoted: yes", "short c" },
	{ "d", "---\ndescription: d desc\n---\n", "d", "d desc", NULL },
	{ "my  sk", "---\ndescription: spaced\n---\n", "my sk", "spaced", NULL },
	{ "n123", "---\nname: 123\ndescription: d\n---\n", "123", "d", NULL },
	{ "ntrue", "---\nname: true\ndescription: d\n---\n", "true", "d", NULL },
	{ "nnull", "---\nname: ~\ndescription: d\n---\n", "nnull", "d", NULL },
	{ "dyes", "---\nname: dyes\ndescription: yes\n---\n", "dyes", "yes", NULL },
	{ "colon", "---\nname: colon\ndescription: Build for AWS: ECS\n---\n", "colon",
	  "Build for AWS: ECS", NULL },
	{ "sq", "---\nname: 'sq'\ndescription: 'it''s'\n---\n", "sq", "it's", NULL },
	{ "dqesc", "---\nname: \"dq\\tx\"\ndescription: \"a\\u00e9\\nb\"\n---\n", "dq x",
	  "a\xc3\xa9 b", NULL },
	{ "block", "---\nname: block\ndescription: |\n  line1\n  line2\n---\n", "block",
	  "line1 line2", NULL },
	{ "folded", "---\nname: folded\ndescription: >\n  f1\n  f2\n---\n", "folded", "f1 f2",
	  NULL },
	{ "multi", "---\nname: multi\ndescription: first\n  continued\n---\n", "multi",
	  "first continued", NULL },
	{ "extra", "---\nname: extra\ndescription: d\nlicense: MIT\nallowed-tools: [a, b]\n---\n",
	  "extra", "d", NULL },
	{ "comment", "---\n# c\nname: comment # trailing\ndescription: d\n---\n", "comment", "d",
	  NULL },
	{ "crlf", "---\r\nname: crlf\r\ndescription: d\r\n---\r\n", "crlf", "d", NULL },
	{ "indent", "  ---  \nname: indent\ndescription: d\n  ---\n", "indent", "d", NULL },
	{ "tab", "---\nname:\tx\tz\ndescription: d\n---\n", "x z", "d", NULL },
	{ "mq",
	  "---\nname: mq\ndescription: d\nmetadata:\n  short-description: \"  s  s \"\n  other: "
	  "1\n---\n",
	  "mq", "d", "s s" },
	{ "mn", "---\nname: mn\ndescription: d\nmetadata:\n---\n", "mn", "d", NULL },
	{ "sde", "---\nname: sde\ndescription: d\nmetadata:\n  short-description: \"\"\n---\n",
	  "sde", "d", NULL },
	{ "nb", "---\nname: nb\xc2\xa0sp\ndescription: d\n---\n", "nb sp", "d", NULL },
	{ "y64",
	  "---\nname: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\n"
	  "description: d\n---\n",
	  "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy", "d", NULL },
	{ " \t ", "---\nname: \"\"\ndescription: d\n---\n", "skill", "d", NULL },
};

START_TEST(test_ok)
{
	const struct ok_case *c = &ok_cases[_i];
	struct cd_skillmd m;
	const char *why = NULL;
	int r = cd_skillmd_parse(c->in, strlen(c->in), c->dir, &m, &why);
	ck_assert_msg(r == CD_SKILLMD_OK, "%s: %d %s", c->dir, r, why ? why : "");
	ck_assert_str_eq(m.name, c->name);
	ck_assert_str_eq(m.description, c->desc);
	if (c->sd)
		ck_assert_str_eq(m.short_description, c->sd);
	else
		ck_assert_ptr_null(m.short_description);
	cd_skillmd_done(&m);
}
END_TEST

struct bad_case {
	const char *in;
	int rc;
	const char *why; /* for INVALID */
};

static const struct bad_case bad_cases[] = {
	{ "no front matter\n", CD_SKILLMD_INVALID, "missing YAML frontmatter delimited by ---" },
	{ "---\n---\n", CD_SKILLMD_INVALID, "missing YAML frontmatter delimited by ---" },
	{ "---\nname: noclose\ndescription: d\n", CD_SKILLMD_INVALID,
	  "missing YAML frontmatter delimited by ---" },
	{ "---\nname: dempty\ndescription: \"\"\n---\n", CD_SKILLMD_INVALID,
	  "missing field `description`" },
	{ "---\nname: x\n---\n", CD_SKILLMD_INVALID, "missing field `description`" },
	{ "---\nname: dup\nname: dup2\ndescription: d\n---\n", CD_SKILLMD_INVALID,
	  "duplicate key" },
	{ "---\nname: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"
	  "description: d\n---\n",
	  CD_SKILLMD_INVALID, "invalid name: exceeds maximum length of 64 characters" },
	/* Valid YAML the subset does not read: refused, never guessed. */
	{ "---\n{name: flow, description: d}\n---\n", CD_SKILLMD_UNSUPPORTED, NULL },
	{ "---\nname: &a anchor\ndescription: *a\n---\n", CD_SKILLMD_UNSUPPORTED, NULL },
	{ "---\nname: !!str x\ndescription: d\n---\n", CD_SKILLMD_UNSUPPORTED, NULL },
	{ "---\nname: x\ndescription: \"two\n  lines\"\n---\n", CD_SKILLMD_UNSUPPORTED, NULL },
	{ "---\nname: x\ndescription:\n  - a\n---\n", CD_SKILLMD_UNSUPPORTED, NULL },
	{ "---\nname: x\ndescription: d\nmetadata: {short-description: s}\n---\n",
	  CD_SKILLMD_UNSUPPORTED, NULL },
	{ "---\nname: x\ndescription: |2\n   d\n---\n", CD_SKILLMD_UNSUPPORTED, NULL },
	{ "---\n\tname: x\ndescription: d\n---\n", CD_SKILLMD_UNSUPPORTED, NULL },
	{ "---\nname: x\ndescription: d\x80\n---\n", CD_SKILLMD_UNSUPPORTED, NULL },
};

START_TEST(test_bad)
{
	const struct bad_case *c = &bad_cases[_i];
	struct cd_skillmd m;
	const char *why = NULL;
	int r = cd_skillmd_parse(c->in, strlen(c->in), "dir", &m, &why);
	ck_assert_msg(r == c->rc, "case %d: %d (%s)", _i, r, why ? why : "");
	ck_assert_ptr_nonnull(why);
	if (c->why)
		ck_assert_str_eq(why, c->why);
	ck_assert_ptr_null(m.name);
}
END_TEST

/* A NUL inside: not text (the binary reads SKILL.md as UTF-8 text). */
START_TEST(test_nul)
{
	static const char in[] = "---\nname: a\0b\ndescription: d\n---\n";
	struct cd_skillmd m;
	const char *why = NULL;
	ck_assert_int_eq(cd_skillmd_parse(in, sizeof(in) - 1, "d", &m, &why),
			 CD_SKILLMD_UNSUPPORTED);
}
END_TEST

/* Hostile: big and odd inputs neither crash nor take long. */
START_TEST(test_hostile)
{
	size_t n = 1 << 20;
	char *s = cd_xmalloc(n + 32);
	memcpy(s, "---\ndescription: ", 17);
	memset(s + 17, 'a', n);
	memcpy(s + 17 + n, "\n---\n", 6);
	struct cd_skillmd m;
	const char *why = NULL;
	ck_assert_int_eq(cd_skillmd_parse(s, strlen(s), "d", &m, &why), CD_SKILLMD_OK);
	ck_assert_uint_eq(strlen(m.description), n);
	cd_skillmd_done(&m);
	for (size_t i = 0; i < n; i++)
		s[i] = "-\n: '\"#|>[{ ~\t"[i % 14];
	(void)cd_skillmd_parse(s, n, "d", &m, &why);
	cd_skillmd_done(&m);
	free(s);
}
END_TEST

/*
 * agents/openai.yaml: its dependencies and policy. Every OK and INVALID
 * case was read by the binary (INVALID: it gives null for both);
 * UNSUPPORTED is YAML outside cordon's subset.
 */
static const struct {
	const char *in, *deps, *policy;
	int r;
} agents_cases[] = {
	{ "policy:\n  allow_implicit_invocation: false\n", NULL,
	  "{\"allowImplicitInvocation\":false,\"products\":[]}", CD_SKILLMD_OK },
	{ "# c\r\n\npolicy:\r\n    allow_implicit_invocation: True\r\n  # c\n", NULL,
	  "{\"allowImplicitInvocation\":true,\"products\":[]}", CD_SKILLMD_OK },
	{ "policy:\n  allow_implicit_invocation: TRUE\n", NULL,
	  "{\"allowImplicitInvocation\":true,\"products\":[]}", CD_SKILLMD_OK },
	{ "policy:\n  allow_implicit_invocation: ~\n", NULL,
	  "{\"allowImplicitInvocation\":null,\"products\":[]}", CD_SKILLMD_OK },
	{ "policy:\n  allow_implicit_invocation:\n", NULL,
	  "{\"allowImplicitInvocation\":null,\"products\":[]}", CD_SKILLMD_OK },
	{ "policy:\n  allow_implicit_invocation: false # c\n", NULL,
	  "{\"allowImplicitInvocation\":false,\"products\":[]}", CD_SKILLMD_OK },
	{ "policy:\n  products: [codex, chatgpt, atlas, codex]\n", NULL,
	  "{\"allowImplicitInvocation\":null,\"products\":[\"codex\",\"chatgpt\",\"atlas\","
	  "\"codex\"]}",
	  CD_SKILLMD_OK },
	{ "policy:\n  products: ['codex']\n  allow_implicit_invocation: true\n", NULL,
	  "{\"allowImplicitInvocation\":true,\"products\":[\"codex\"]}", CD_SKILLMD_OK },
	{ "policy:\n  products:\n  - codex\n", NULL,
	  "{\"allowImplicitInvocation\":null,\"products\":[\"codex\"]}", CD_SKILLMD_OK },
	{ "policy:\n  products: []\n  other: 1\n", NULL,
	  "{\"allowImplicitInvocation\":null,\"products\":[]}", CD_SKILLMD_OK },
	{ "policy: {}\n", NULL, "{\"allowImplicitInvocation\":null,\"products\":[]}",
	  CD_SKILLMD_OK },
	{ "policy:\n", NULL, NULL, CD_SKILLMD_OK },
	{ "policy: null\n", NULL, NULL, CD_SKILLMD_OK },
	{ "interface:\n  display_name: 5\n  icon_small: /abs.png\nother: 1\npolicy:\n  "
	  "allow_implicit_invocation: false\n",
	  NULL, "{\"allowImplicitInvocation\":false,\"products\":[]}", CD_SKILLMD_OK },
	{ "dependencies:\n  tools:\n    - type: mcp\n      value: srv\n      description: A "
	  "server\n      transport: stdio\n      command: run-it\n      url: https://x\n",
	  "{\"tools\":[{\"type\":\"mcp\",\"value\":\"srv\",\"description\":\"A "
	  "server\",\"transport\":\"stdio\",\"command\":\"run-it\",\"url\":\"https://"
	  "x\",\"oauthCallbackPort\":null}]}",
	  NULL, CD_SKILLMD_OK },
	{ "dependencies:\n  tools:\n  - type: ' mcp '\n    value: 12\n    description: ''\n    "
	  "bogus: 1\n  - type: b\n  other: x\n",
	  "{\"tools\":[{\"type\":\"mcp\",\"value\":\"12\",\"description\":null,\"transport\":null,"
	  "\"command\":null,\"url\":null,\"oauthCallbackPort\":null}]}",
	  NULL, CD_SKILLMD_OK },
	{ "dependencies:\n  tools:\n    - type: true\n      value: ~\n", NULL, NULL,
	  CD_SKILLMD_OK },
	{ "dependencies:\n  tools: []\n", NULL, NULL, CD_SKILLMD_OK },
	{ "dependencies: {}\n", NULL, NULL, CD_SKILLMD_OK },
	{ "policy:\n  allow_implicit_invocation: yes\n", NULL, NULL, CD_SKILLMD_INVALID },
	{ "policy:\n  allow_implicit_invocation: 'true'\n", NULL, NULL, CD_SKILLMD_INVALID },
	{ "policy:\n  products: [bogus]\n", NULL, NULL, CD_SKILLMD_INVALID },
	{ "policy:\n  products: [Codex]\n", NULL, NULL, CD_SKILLMD_INVALID },
	{ "policy:\n  products: ~\n", NULL, NULL, CD_SKILLMD_INVALID },
	{ "policy:\n  products: codex\n", NULL, NULL, CD_SKILLMD_INVALID },
	{ "policy:\n  allow_implicit_invocation: true\n  allow_implicit_invocation: false\n", NULL,
	  NULL, CD_SKILLMD_INVALID },
	{ "policy:\n  allow_implicit_invocation: true\npolicy:\n  allow_implicit_invocation: "
	  "false\n",
	  NULL, NULL, CD_SKILLMD_INVALID },
	{ "interface: 5\npolicy:\n  allow_implicit_invocation: false\n", NULL, NULL,
	  CD_SKILLMD_INVALID },
	{ "interface:\n  display_name: {a: 1}\npolicy:\n  allow_implicit_invocation: true\n", NULL,
	  NULL, CD_SKILLMD_INVALID },
	{ "dependencies:\n  tools:\n", NULL, NULL, CD_SKILLMD_INVALID },
	{ "dependencies: 5\n", NULL, NULL, CD_SKILLMD_INVALID },
	{ "dependencies:\n  tools:\n    - type: mcp\n      value: a\n      type: b\n", NULL, NULL,
	  CD_SKILLMD_INVALID },
	{ "policy: &a\n  allow_implicit_invocation: true\n", NULL, NULL, CD_SKILLMD_UNSUPPORTED },
	{ "policy:\n\tallow_implicit_invocation: false\n", NULL, NULL, CD_SKILLMD_UNSUPPORTED },
	{ "policy:\n  allow_implicit_invocation: !!bool true\n", NULL, NULL,
	  CD_SKILLMD_UNSUPPORTED },
	{ "dependencies:\n  tools:\n    - foo\n", NULL, NULL, CD_SKILLMD_UNSUPPORTED },
	{ "---\npolicy:\n  allow_implicit_invocation: true\n", NULL, NULL, CD_SKILLMD_UNSUPPORTED },
	{ "other:\n  nested: 1\n", NULL, NULL, CD_SKILLMD_UNSUPPORTED },
	{ "policy:\n  description: |\n    text\n", NULL, NULL, CD_SKILLMD_UNSUPPORTED },
};

START_TEST(test_agents)
{
	const char *in = agents_cases[_i].in, *why = NULL;
	char *deps = NULL, *pol = NULL;
	int r = cd_skillmd_agents(in, strlen(in), &deps, &pol, &why);
	ck_assert_msg(r == agents_cases[_i].r, "case %d: %d (%s)", _i, r, why ? why : "");
	if (r != CD_SKILLMD_OK) {
		ck_assert_ptr_nonnull(why);
		ck_assert_ptr_null(deps);
		ck_assert_ptr_null(pol);
		return;
	}
	if (agents_cases[_i].deps)
		ck_assert_str_eq(deps, agents_cases[_i].deps);
	else
		ck_assert_ptr_null(deps);
	if (agents_cases[_i].policy)
		ck_assert_str_eq(pol, agents_cases[_i].policy);
	else
		ck_assert_ptr_null(pol);
	free(deps);
	free(pol);
}
END_TEST

/* Plugin manifest namespaces, as the binary reads them (probed). */
static const struct {
	const char *in, *want; /* want: the namespace, or "SKIP", or NULL (unsupported) */
} ns_cases[] = {
	{ "{\"name\":\"p\"}", "p" },
	{ "{\"version\":\"1\"}", "dir" },
	{ "{\"name\":\"\"}", "dir" },
	{ "{\"name\":\" \\t\\u3000\\u00a0\\u2009\"}", "dir" },
	{ "{\"name\":\" p \"}", " p " },
	{ "{\"name\":\"\\u00e9\"}", "\xc3\xa9" },
	{ "{\"name\":\"p\",\"version\":5,\"skills\":\"./x\"}", "p" },
	{ "{\"name\":null}", "SKIP" },
	{ "{\"name\":5}", "SKIP" },
	{ "{\"name\":true}", "SKIP" },
	{ "{\"name\":\"p\",\"name\":\"q\"}", NULL },
	{ "{\"name\":", NULL },
	{ "[]", NULL },
	{ "[1]", NULL },
	{ "{\"name\":\"a\\u0000\"}", NULL },
};

START_TEST(test_namespace)
{
	const char *in = ns_cases[_i].in, *want = ns_cases[_i].want, *why = NULL;
	char *ns = NULL;
	int r = cd_skillmd_namespace(in, strlen(in), "dir", &ns, &why);
	if (!want) {
		ck_assert_msg(r == CD_SKILLMD_UNSUPPORTED, "case %d", _i);
		ck_assert_ptr_nonnull(why);
	} else if (!strcmp(want, "SKIP")) {
		ck_assert_msg(r == CD_SKILLMD_NS_SKIP, "case %d", _i);
	} else {
		ck_assert_msg(r == CD_SKILLMD_OK, "case %d", _i);
		ck_assert_str_eq(ns, want);
	}
	free(ns);
}
END_TEST

static Suite *skillmd_suite(void)
{
	Suite *s = suite_create("skillmd");
	TCase *tc = tcase_create("read");
	tcase_add_loop_test(tc, test_ok, 0, CD_ARRAY_SIZE(ok_cases));
	tcase_add_loop_test(tc, test_bad, 0, CD_ARRAY_SIZE(bad_cases));
	tcase_add_test(tc, test_nul);
	tcase_add_loop_test(tc, test_agents, 0, CD_ARRAY_SIZE(agents_cases));
	tcase_add_loop_test(tc, test_namespace, 0, CD_ARRAY_SIZE(ns_cases));
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hostile);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(skillmd_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
