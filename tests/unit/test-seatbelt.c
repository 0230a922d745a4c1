/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The macOS Seatbelt planner (sandbox/seatbelt/sbpl.h) on plans bound over
 * the in-memory tree of fakefs.c: roots and exclusions, parameters and
 * their order, the network modes, :minimal, globs as regexes, refusals and
 * the sandbox-exec argv. Runs on every host: the planner is pure.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/glob.h"
#include "core/util.h"
#include "fakefs.h"
#include "sandbox/linux/plan.h"
#include "sandbox/seatbelt/sbpl.h"
#include "sbpl-eval.h"

/* ---- glob patterns as regexes ---- */

static const struct {
	const char *base, *pattern, *want;
} glob_cases[] = {
	{ "/w", "*.pem", "^/w/[^/]*\\.pem(/[^/]*)*$" },
	{ "/w", "secret?", "^/w/secret[^/](/[^/]*)*$" },
	{ "/w", "**/id_rsa", "^/w/([^/]*/)*id_rsa(/[^/]*)*$" },
	{ "/w", "a/**/b.txt", "^/w/a/([^/]*/)*b\\.txt(/[^/]*)*$" },
	{ "/w", "keys/**", "^/w/keys/[^/]+(/[^/]*)*$" },
	{ "/w", "[!a-c]x", "^/w/[^/a-c]x(/[^/]*)*$" },
	{ "/w", "[]a]", "^/w/[]a](/[^/]*)*$" },
	{ "/w", "[[:digit:]]*", "^/w/[0-9][^/]*(/[^/]*)*$" },
	/* The set the matcher reads, written so that no engine reads it otherwise. */
	{ "/w", "[!-a]x", "^/w/[^/a-]x(/[^/]*)*$" },
	{ "/w", "[!]a]", "^/w/[^]/a](/[^/]*)*$" },
	{ "/w", "[\\]]", "^/w/[]](/[^/]*)*$" },
	{ "/w", "[\\\\x]", "^/w/[x\\\\](/[^/]*)*$" },
	{ "/w", "[\\^]", "^/w/\\^(/[^/]*)*$" },
	{ "/w", "[-^]", "^/w/[-^](/[^/]*)*$" },
	{ "/w", "[!^]", "^/w/[^/^](/[^/]*)*$" },
	{ "/w", "[^a-]", "^/w/[^/a-](/[^/]*)*$" },
	{ "/w", "[[]", "^/w/[[](/[^/]*)*$" },
	{ "/w", "[a-cx-z_]", "^/w/[_a-cx-z](/[^/]*)*$" },
	{ "/w", "[ab]", "^/w/[ab](/[^/]*)*$" },
	{ "/w", "\\*literal", "^/w/\\*literal(/[^/]*)*$" },
	{ "/w", "./.env", "^/w/\\.env(/[^/]*)*$" },
	{ "/w", "a/.", "^/w/a(/[^/]*)*$" },
	{ "/w", "**/x/./", "^/w/([^/]*/)*x(/[^/]*)*$" },
	{ "/w", "a(b)+c", "^/w/a\\(b\\)\\+c(/[^/]*)*$" },
	{ "/w", "[unclosed", "^/w/\\[unclosed(/[^/]*)*$" },
	{ "/x/y", "/etc/*.conf", "^/etc/[^/]*\\.conf(/[^/]*)*$" },
	{ "/", "/**", "^/[^/]+(/[^/]*)*$" },
	{ "/w.d", ".", "^/w\\.d(/[^/]*)*$" },
	{ "/", ".", "^/[^/]*(/[^/]*)*$" },
};

START_TEST(test_glob_regex)
{
	char *err = NULL;
	char *got = cd_seatbelt_glob_regex(glob_cases[_i].base, glob_cases[_i].pattern, &err);

	ck_assert_msg(got != NULL, "%s", err ? err : "?");
	ck_assert_msg(cd_streq(got, glob_cases[_i].want), "%s under %s: got %s, want %s",
		      glob_cases[_i].pattern, glob_cases[_i].base, got, glob_cases[_i].want);
	free(got);
}
END_TEST

START_TEST(test_evaluator_lint)
{
	const char *err = NULL, *unused = NULL;
	/* The evaluator refuses the mistake it exists to catch: a kind filter as an alternative. */
	ck_assert_ptr_null(sbpl_parse("(version 1)\n(deny default)\n(allow file-read-metadata "
				      "(vnode-type DIRECTORY) (literal \"/x\"))\n",
				      NULL, NULL, 0, &err, &unused));
	ck_assert_ptr_nonnull(strstr(err, "alternative"));
	struct sbpl_policy *p =
		sbpl_parse("(version 1)\n(deny default)\n(allow file-read* "
			   "(require-all (vnode-type DIRECTORY) (literal \"/x\")))\n",
			   NULL, NULL, 0, &err, &unused);
	ck_assert_ptr_nonnull(p);
	ck_assert(!sbpl_allows(p, "file-read-data", "/x"));
	sbpl_free(p);
}
END_TEST

START_TEST(test_glob_regex_refused)
{
	char *err = NULL;

	ck_assert_ptr_null(cd_seatbelt_glob_regex("/w", "a\"b", &err));
	ck_assert_ptr_nonnull(strstr(err, "cannot carry"));
	free(err);
	err = NULL;
	ck_assert_ptr_null(cd_seatbelt_glob_regex("/w\n", "a", &err));
	free(err);

	static const struct {
		const char *pattern, *why;
	} classes[] = {
		{ "[[:space:]]", "a control character" },
		{ "[![:punct:]]", "a control character" },
		{ "[[:punct:]]", "'\"'" },
		{ "x/[\xc3\xa9]", "some bytes above 0x7f" },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(classes); i++) {
		err = NULL;
		ck_assert_ptr_null(cd_seatbelt_glob_regex("/w", classes[i].pattern, &err));
		ck_assert_msg(strstr(err, "cannot be a Seatbelt regex") &&
				      strstr(err, classes[i].why),
			      "%s: %s", classes[i].pattern, err);
		free(err);
	}
}
END_TEST

START_TEST(test_macos_path)
{
	static const char *const cases[][2] = {
		{ "/var/folders/x", "/private/var/folders/x" },
		{ "/tmp", "/private/tmp" },
		{ "/etc/hosts", "/private/etc/hosts" },
		{ "/variable", "/variable" },
		{ "/tmpfoo/x", "/tmpfoo/x" },
		{ "/Users/me", "/Users/me" },
		{ "/", "/" },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(cases); i++) {
		char *got = cd_seatbelt_macos_path(cases[i][0]);
		ck_assert_str_eq(got, cases[i][1]);
		free(got);
	}
}
END_TEST

/* ---- plans ---- */

struct fixture {
	struct cd_fakefs *fs;
	struct cd_profile *prof;
	struct cd_plan *plan;
	struct cd_seatbelt_plan *sp;
	const char *roots[2];
	size_t n_roots;
	bool minimal; /* the profile grants :minimal */
	/* A managed network's proxy ports and local binding. */
	const uint16_t *ports;
	size_t n_ports;
	bool local_binding;
	const struct cd_limits *limits;
	const char *const *hidden;
	size_t n_hidden;
};

static void add(struct cd_profile *p, enum cd_entry_kind kind, enum cd_special special,
		const char *path, enum cd_access access)
{
	struct cd_fs_entry e = {
		.kind = kind,
		.special = special,
		.path = (char *)path, /* cd_profile_add_entry copies it */
		.access = access,
	};
	cd_profile_add_entry(p, &e);
}

static struct cd_profile *profile(enum cd_network net)
{
	struct cd_profile *p = cd_xcalloc(1, sizeof(*p));
	p->type = CD_PROFILE_MANAGED;
	p->network = net;
	return p;
}

static struct cd_fakefs *tree(void)
{
	struct cd_fakefs *fs = cd_fakefs_new();
	cd_fakefs_other(fs, "/dev/null");
	cd_fakefs_dir(fs, "/tmp/ws/.git");
	cd_fakefs_dir(fs, "/tmp/ws/src");
	cd_fakefs_dir(fs, "/tmp/ws/secrets/public");
	cd_fakefs_dir(fs, "/usr/lib");
	cd_fakefs_dir(fs, "/Users/me/extra");
	return fs;
}

/* Bind f->prof over f->fs in /tmp/ws and plan it; returns the planner's result. */
static int plan(struct fixture *f, bool macos_paths, char **err)
{
	f->roots[0] = "/tmp/ws";
	f->n_roots = 1;
	static const char *const no_minimal[] = { NULL };
	struct cd_bind_input in = {
		.cwd = "/tmp/ws",
		.workspace_roots = f->roots,
		.n_workspace_roots = f->n_roots,
		.minimal_paths = no_minimal,
		.ops = cd_fakefs_ops(f->fs),
	};
	ck_assert_msg(cd_plan_build(f->prof, &in, &f->plan, err) == 0, "%s", *err ? *err : "?");
	struct cd_seatbelt_input si = {
		.profile = f->prof,
		.plan = f->plan,
		.workspace_roots = f->roots,
		.n_workspace_roots = f->n_roots,
		.macos_paths = macos_paths,
		.proxy_ports = f->ports,
		.n_proxy_ports = f->n_ports,
		.allow_local_binding = f->local_binding,
		.limits = f->limits,
		.hidden = f->hidden,
		.n_hidden = f->n_hidden,
	};
	return cd_seatbelt_plan_build(&si, &f->sp, err);
}

static void done(struct fixture *f)
{
	cd_seatbelt_plan_free(f->sp);
	cd_plan_free(f->plan);
	cd_profile_free(f->prof);
	cd_fakefs_free(f->fs);
}

static const char *param(const struct cd_seatbelt_plan *sp, const char *key)
{
	for (size_t i = 0; i < sp->n_params; i++)
		if (cd_streq(sp->params[i].key, key))
			return sp->params[i].value;
	return NULL;
}

/* Parentheses balance outside string and regex literals, and never go negative. */
static void check_balanced(const char *policy)
{
	long depth = 0;
	bool in_str = false, in_comment = false;

	for (const char *p = policy; *p; p++) {
		if (in_comment) {
			in_comment = *p != '\n';
			continue;
		}
		if (in_str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				in_str = false;
			continue;
		}
		if (*p == ';')
			in_comment = true;
		else if (*p == '"')
			in_str = true;
		else if (*p == '(')
			depth++;
		else if (*p == ')')
			ck_assert_msg(--depth >= 0, "unbalanced at %.40s", p);
	}
	ck_assert(!in_str);
	ck_assert_int_eq(depth, 0);
}

static void check_argv(const struct cd_seatbelt_plan *sp)
{
	size_t n = cd_strv_length(sp->argv);

	ck_assert_uint_eq(n, 4 + sp->n_params);
	ck_assert_str_eq(sp->argv[0], "/usr/bin/sandbox-exec");
	ck_assert_str_eq(sp->argv[1], "-p");
	ck_assert_str_eq(sp->argv[2], sp->policy);
	for (size_t i = 0; i < sp->n_params; i++) {
		char *want = cd_xasprintf("-D%s=%s", sp->params[i].key, sp->params[i].value);
		ck_assert_str_eq(sp->argv[3 + i], want);
		free(want);
	}
	ck_assert_str_eq(sp->argv[n - 1], "--");
	check_balanced(sp->policy);
}

START_TEST(test_workspace_write)
{
	struct fixture f = { .fs = tree(), .prof = profile(CD_NET_RESTRICTED) };
	char *err = NULL;

	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add(f.prof, CD_ENTRY_PATH, 0, "/Users/me/extra", CD_ACCESS_WRITE);
	ck_assert_int_eq(plan(&f, true, &err), 0);
	ck_assert(f.sp->sandboxed);
	/* Full read, no deny: one plain rule, no read parameters. */
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "\n(allow file-read*)\n"));
	ck_assert_ptr_null(param(f.sp, "READABLE_ROOT_0"));
	/* Write roots in plan order, macOS paths, protected names excluded. */
	ck_assert_str_eq(f.sp->params[0].key, "WRITABLE_ROOT_0");
	ck_assert_str_eq(f.sp->params[0].value, "/Users/me/extra");
	ck_assert_str_eq(param(f.sp, "WRITABLE_ROOT_1"), "/private/tmp/ws");
	ck_assert_str_eq(param(f.sp, "WRITABLE_ROOT_1_EXCLUDED_0"), "/private/tmp/ws/.agents");
	ck_assert_str_eq(param(f.sp, "WRITABLE_ROOT_1_EXCLUDED_1"), "/private/tmp/ws/.codex");
	ck_assert_str_eq(param(f.sp, "WRITABLE_ROOT_1_EXCLUDED_2"), "/private/tmp/ws/.git");
	/* Protected names under every writable path, not only the workspace. */
	ck_assert_str_eq(param(f.sp, "WRITABLE_ROOT_0_EXCLUDED_2"), "/Users/me/extra/.git");
	/* The missing .codex is excluded as a subpath too: it cannot be created. */
	ck_assert_ptr_nonnull(strstr(
		f.sp->policy, "(require-not (literal (param \"WRITABLE_ROOT_1_EXCLUDED_1\")))\n"
			      "        (require-not (subpath (param "
			      "\"WRITABLE_ROOT_1_EXCLUDED_1\")))"));
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "(subpath (param \"WRITABLE_ROOT_0\"))"));
	/* Restricted network: no network rule at all. */
	ck_assert_ptr_null(strstr(f.sp->policy, "network-outbound"));
	ck_assert_ptr_null(strstr(f.sp->policy, ":minimal"));
	/* The rewrite is noted. */
	ck_assert_uint_eq(cd_strv_length(f.sp->notes), 1);
	ck_assert_ptr_nonnull(strstr(f.sp->notes[0], "/tmp is /private/tmp on macOS"));
	check_argv(f.sp);
	done(&f);
}
END_TEST

START_TEST(test_restricted_read)
{
	struct fixture f = { .fs = tree(), .prof = profile(CD_NET_ENABLED) };
	char *err = NULL;

	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_MINIMAL, NULL, CD_ACCESS_READ);
	add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws", CD_ACCESS_READ);
	add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/secrets", CD_ACCESS_DENY);
	add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/secrets/public", CD_ACCESS_READ);
	ck_assert_int_eq(plan(&f, false, &err), 0);
	/* Read-again below a deny path is a root of its own. */
	ck_assert_str_eq(param(f.sp, "READABLE_ROOT_0"), "/tmp/ws");
	ck_assert_str_eq(param(f.sp, "READABLE_ROOT_0_EXCLUDED_0"), "/tmp/ws/secrets");
	ck_assert_str_eq(param(f.sp, "READABLE_ROOT_1"), "/tmp/ws/secrets/public");
	ck_assert_ptr_null(param(f.sp, "READABLE_ROOT_1_EXCLUDED_0"));
	ck_assert_ptr_null(param(f.sp, "WRITABLE_ROOT_0"));
	ck_assert_ptr_null(strstr(f.sp->policy, "(allow file-read*)\n"));
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "; Writes.\n; none\n"));
	/* Without macos_paths nothing is rewritten. */
	ck_assert_ptr_null(f.sp->notes);
	/* :minimal: the platform's read-only defaults, and never a temporary dir writable. */
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "(subpath \"/usr/lib\")"));
	ck_assert_ptr_null(strstr(f.sp->policy, "\"/private/tmp\""));
	ck_assert_ptr_null(strstr(f.sp->policy, "\"/var/tmp\""));
	/* Network enabled: outbound, inbound and the services TLS and DNS need. */
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "(allow network-outbound)\n"));
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "com.apple.trustd.agent"));
	check_argv(f.sp);
	done(&f);
}
END_TEST

START_TEST(test_deny_under_full_read)
{
	struct fixture f = { .fs = tree(), .prof = profile(CD_NET_RESTRICTED) };
	char *err = NULL;

	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_MINIMAL, NULL, CD_ACCESS_READ);
	add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/secrets", CD_ACCESS_DENY);
	add(f.prof, CD_ENTRY_GLOB, 0, "**/*.pem", CD_ACCESS_DENY);
	add(f.prof, CD_ENTRY_GLOB, 0, "codex-project-roots://.env", CD_ACCESS_DENY);
	ck_assert_int_eq(plan(&f, true, &err), 0);
	ck_assert_str_eq(param(f.sp, "READABLE_ROOT_0"), "/");
	/* A glob without wildcards is bound as a path: excluded like the deny entry. */
	ck_assert_str_eq(param(f.sp, "READABLE_ROOT_0_EXCLUDED_0"), "/private/tmp/ws/.env");
	ck_assert_str_eq(param(f.sp, "READABLE_ROOT_0_EXCLUDED_1"), "/private/tmp/ws/secrets");
	ck_assert_ptr_null(param(f.sp, "READABLE_ROOT_1"));
	/* :minimal adds nothing to a full read. */
	ck_assert_ptr_null(strstr(f.sp->policy, "(subpath \"/usr/lib\")"));
	/* Globs: the bound base and its macOS form, read and write denied. */
	ck_assert_ptr_nonnull(
		strstr(f.sp->policy,
		       "(deny file-read* file-write* (regex #\"^/tmp/ws/([^/]*/)*[^/]*\\.pem"));
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "#\"^/private/tmp/ws/([^/]*/)*[^/]*\\.pem"));
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "#\"^/private/tmp/ws/\\.env(/[^/]*)*$\""));
	check_argv(f.sp);
	done(&f);
}
END_TEST

/* Absolute globs: /etc, /tmp and /var are links on macOS, which Seatbelt sees through. */
START_TEST(test_absolute_globs_private)
{
	struct fixture f = { .fs = tree(), .prof = profile(CD_NET_RESTRICTED) };
	char *err = NULL;

	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add(f.prof, CD_ENTRY_GLOB, 0, "/etc/ssh/*_key", CD_ACCESS_DENY);
	add(f.prof, CD_ENTRY_GLOB, 0, "/tmp/x?", CD_ACCESS_DENY);
	add(f.prof, CD_ENTRY_GLOB, 0, "/usr/*.so", CD_ACCESS_DENY);
	ck_assert_int_eq(plan(&f, true, &err), 0);
	const char *p = f.sp->policy;
	ck_assert_ptr_nonnull(strstr(p, "#\"^/etc/ssh/[^/]*_key(/[^/]*)*$\""));
	ck_assert_ptr_nonnull(strstr(p, "#\"^/private/etc/ssh/[^/]*_key(/[^/]*)*$\""));
	ck_assert_ptr_nonnull(strstr(p, "#\"^/tmp/x[^/](/[^/]*)*$\""));
	ck_assert_ptr_nonnull(strstr(p, "#\"^/private/tmp/x[^/](/[^/]*)*$\""));
	ck_assert_ptr_null(strstr(p, "/private/etc/x"));
	ck_assert_ptr_null(strstr(p, "/private/var"));
	/* /usr is no link. */
	ck_assert_ptr_nonnull(strstr(p, "#\"^/usr/[^/]*\\.so(/[^/]*)*$\""));
	ck_assert_ptr_null(strstr(p, "/private/usr"));
	done(&f);

	/* Without macos_paths (planning for a Mac whose paths were given as is): none. */
	f = (struct fixture){ .fs = tree(), .prof = profile(CD_NET_RESTRICTED) };
	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add(f.prof, CD_ENTRY_GLOB, 0, "/etc/ssh/*_key", CD_ACCESS_DENY);
	ck_assert_int_eq(plan(&f, false, &err), 0);
	ck_assert_ptr_null(strstr(f.sp->policy, "/private/etc"));
	done(&f);
}
END_TEST

/* cordon serve's own files: denied last, whatever the profile grants. */
START_TEST(test_hidden_files)
{
	static const char *const hidden[] = { "/tmp/ws/secrets/tok", "/run/cordon/serve.sock" };
	struct fixture f = {
		.fs = tree(), .prof = profile(CD_NET_ENABLED), .hidden = hidden, .n_hidden = 2
	};
	char *err = NULL;

	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws", CD_ACCESS_WRITE);
	add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/src/deep/secret", CD_ACCESS_DENY);
	add(f.prof, CD_ENTRY_GLOB, 0, "keys/*.pem", CD_ACCESS_DENY);
	ck_assert_int_eq(plan(&f, true, &err), 0);
	const struct cd_seatbelt_plan *sp = f.sp;
	ck_assert_str_eq(param(sp, "HIDDEN_0"), "/private/tmp/ws/secrets/tok");
	ck_assert_str_eq(param(sp, "HIDDEN_1"), "/run/cordon/serve.sock");
	/* After every allow, connects too (an enabled network allows them all). */
	const char *deny =
		strstr(sp->policy, "(deny network-outbound (literal (param \"HIDDEN_1\")))");
	ck_assert_ptr_nonnull(deny);
	ck_assert_ptr_null(strstr(deny, "(allow"));
	ck_assert_ptr_null(strstr(sp->policy, "/private/tmp/ws/secrets"));

	const char *keys[32], *values[32];
	ck_assert_uint_le(sp->n_params, CD_ARRAY_SIZE(keys));
	for (size_t i = 0; i < sp->n_params; i++) {
		keys[i] = sp->params[i].key;
		values[i] = sp->params[i].value;
	}
	const char *perr = NULL, *punused = NULL;
	struct sbpl_policy *pol =
		sbpl_parse(sp->policy, keys, values, sp->n_params, &perr, &punused);
	ck_assert_msg(pol != NULL, "%s", perr ? perr : "?");
	ck_assert_ptr_null(punused);
	ck_assert(!sbpl_allows(pol, "file-read-data", "/private/tmp/ws/secrets/tok"));
	ck_assert(!sbpl_allows(pol, "file-write-data", "/private/tmp/ws/secrets/tok"));
	ck_assert(!sbpl_allows(pol, "file-write-unlink", "/private/tmp/ws/secrets/tok"));
	ck_assert(!sbpl_allows(pol, "file-read-data", "/run/cordon/serve.sock"));
	ck_assert(sbpl_allows(pol, "file-write-data", "/private/tmp/ws/secrets/tok2"));
	ck_assert(sbpl_allows(pol, "file-read-data", "/run/cordon/other"));
	/*
	 * The directories above, in the writable workspace, cannot be renamed
	 * away with the file (the review's "mv secrets s2; cat s2/tok"), nor
	 * those above a deny entry or a deny glob's fixed part; what is made
	 * inside them, or beside, is another path.
	 */
	ck_assert(!sbpl_allows(pol, "file-write-unlink", "/private/tmp/ws/secrets"));
	ck_assert(sbpl_allows(pol, "file-write-create", "/private/tmp/ws/secrets/new"));
	ck_assert(sbpl_allows(pol, "file-write-create", "/private/tmp/ws/s2"));
	ck_assert(!sbpl_allows(pol, "file-write-unlink", "/private/tmp/ws/src/deep"));
	ck_assert(!sbpl_allows(pol, "file-write-unlink", "/private/tmp/ws/src"));
	ck_assert(!sbpl_allows(pol, "file-write-unlink", "/private/tmp/ws/keys"));
	ck_assert(sbpl_allows(pol, "file-write-unlink", "/private/tmp/ws/other"));
	ck_assert(sbpl_allows(pol, "file-write-data", "/private/tmp/ws/src/main.c"));
	/* Four: secrets, src/deep, src, keys; /tmp/ws's parent and /run are not writable. */
	ck_assert_ptr_nonnull(param(sp, "PINNED_3"));
	ck_assert_ptr_null(param(sp, "PINNED_4"));
	sbpl_free(pol);
	done(&f);

	/* A name no parameter can carry: refused, naming the server's file, not the profile. */
	static const char *const odd[] = { "/tmp/ws/to\"k" };
	f = (struct fixture){
		.fs = tree(), .prof = profile(CD_NET_RESTRICTED), .hidden = odd, .n_hidden = 1
	};
	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	err = NULL;
	ck_assert_int_eq(plan(&f, true, &err), -EINVAL);
	ck_assert_msg(strstr(err, "cordon serve's own file /tmp/ws/to\"k"), "%s", err);
	free(err);
	done(&f);
}
END_TEST

START_TEST(test_unrestricted_and_disabled)
{
	struct fixture f = { .fs = tree(), .prof = profile(CD_NET_RESTRICTED) };
	char *err = NULL;

	f.prof->fs_unrestricted = true;
	ck_assert_int_eq(plan(&f, true, &err), 0);
	ck_assert_ptr_nonnull(strstr(f.sp->policy, "(allow file-write* (regex #\"^/\"))"));
	ck_assert_uint_eq(f.sp->n_params, 0);
	ck_assert_ptr_null(strstr(f.sp->policy, "network-outbound"));
	check_argv(f.sp);
	done(&f);

	struct fixture g = { .fs = tree(), .prof = profile(CD_NET_ENABLED) };
	g.prof->type = CD_PROFILE_DISABLED;
	ck_assert_int_eq(plan(&g, true, &err), 0);
	ck_assert(!g.sp->sandboxed);
	ck_assert_ptr_null(g.sp->policy);
	ck_assert_ptr_null(g.sp->argv);
	done(&g);
}
END_TEST

/* How many times needle occurs in s. */
static size_t count_of(const char *s, const char *needle)
{
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/*
 * A managed network is proxy-restricted (reference section 5): outbound only
 * to each proxy port on localhost, never any other address; with no port,
 * no outbound address at all; local binding (and DNS with a port) only when
 * allowed.
 */
START_TEST(test_managed_network)
{
	static const uint16_t ports[] = { 8080, 1080 };
	char *err = NULL;

	struct fixture f = {
		.fs = tree(), .prof = profile(CD_NET_MANAGED), .ports = ports, .n_ports = 2
	};
	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	ck_assert_int_eq(plan(&f, true, &err), 0);
	ck_assert(f.sp->sandboxed);
	const char *pol = f.sp->policy;
	ck_assert_ptr_nonnull(
		strstr(pol, "(allow network-outbound (remote ip \"localhost:8080\"))"));
	ck_assert_ptr_nonnull(
		strstr(pol, "(allow network-outbound (remote ip \"localhost:1080\"))"));
	ck_assert_uint_eq(count_of(pol, "network-outbound"), 2);
	ck_assert_ptr_null(strstr(pol, "network-inbound"));
	ck_assert_ptr_null(strstr(pol, "network-bind"));
	ck_assert_ptr_null(strstr(pol, "*:53"));
	ck_assert_ptr_nonnull(strstr(pol, "com.apple.trustd.agent"));
	check_argv(f.sp);
	done(&f);

	/* No port: fails closed, no outbound address allowed at all. */
	struct fixture g = { .fs = tree(), .prof = profile(CD_NET_MANAGED) };
	add(g.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	ck_assert_int_eq(plan(&g, true, &err), 0);
	ck_assert_ptr_null(strstr(g.sp->policy, "network-outbound"));
	ck_assert_ptr_nonnull(strstr(g.sp->policy, "No proxy port"));
	check_argv(g.sp);
	done(&g);

	/* Local binding: bind, and loopback both ways; DNS only with a port. */
	struct fixture h = { .fs = tree(),
			     .prof = profile(CD_NET_MANAGED),
			     .ports = ports,
			     .n_ports = 1,
			     .local_binding = true };
	add(h.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	ck_assert_int_eq(plan(&h, true, &err), 0);
	pol = h.sp->policy;
	ck_assert_ptr_nonnull(strstr(pol, "(allow network-bind (local ip \"*:*\"))"));
	ck_assert_ptr_nonnull(strstr(pol, "(allow network-inbound (local ip \"localhost:*\"))"));
	ck_assert_ptr_nonnull(strstr(pol, "(allow network-outbound (remote ip \"localhost:*\"))"));
	ck_assert_ptr_nonnull(strstr(pol, "(allow network-outbound (remote ip \"*:53\"))"));
	ck_assert_ptr_null(strstr(pol, "localhost:1080"));
	check_argv(h.sp);
	done(&h);

	struct fixture k = { .fs = tree(), .prof = profile(CD_NET_MANAGED), .local_binding = true };
	add(k.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	ck_assert_int_eq(plan(&k, true, &err), 0);
	ck_assert_ptr_null(strstr(k.sp->policy, "*:53"));
	ck_assert_ptr_nonnull(strstr(k.sp->policy, "network-bind"));
	done(&k);
}
END_TEST

START_TEST(test_refusals)
{
	char *err = NULL;
	struct fixture g = { .fs = tree(), .prof = profile(CD_NET_RESTRICTED) };
	cd_fakefs_dir(g.fs, "/tmp/ws/a\"b");
	add(g.prof, CD_ENTRY_PATH, 0, "/tmp/ws/a\"b", CD_ACCESS_WRITE);
	ck_assert_int_eq(plan(&g, false, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "cannot carry"));
	free(err);
	done(&g);
}
END_TEST

/* open_files, file_size and core are rlimits of the wrapper; the rest is refused. */
START_TEST(test_limits)
{
	char *err = NULL;
	struct cd_limits L = { 0 };
	cd_limits_put(&L, CD_LIMIT_OPEN_FILES, 64);
	cd_limits_put(&L, CD_LIMIT_FILE_SIZE, 1 << 20);
	cd_limits_put(&L, CD_LIMIT_CORE, 0);
	struct fixture f = { .fs = tree(), .prof = profile(CD_NET_RESTRICTED), .limits = &L };
	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	ck_assert_int_eq(plan(&f, false, &err), 0);
	ck_assert_uint_eq(f.sp->rlimits.set, L.set);
	ck_assert(f.sp->rlimits.v[CD_LIMIT_OPEN_FILES] == 64);
	ck_assert(f.sp->rlimits.v[CD_LIMIT_FILE_SIZE] == 1 << 20);
	char *text = cd_seatbelt_limits_text(&f.sp->rlimits);
	ck_assert_ptr_nonnull(strstr(text, "    open-files  64         RLIMIT_NOFILE\n"));
	ck_assert_ptr_nonnull(strstr(text, "    core        0 bytes    RLIMIT_CORE\n"));
	free(text);
	/* The policy is the same with or without them: they are not Seatbelt's. */
	char *with = cd_xstrdup(f.sp->policy);
	done(&f);
	f = (struct fixture){ .fs = tree(), .prof = profile(CD_NET_RESTRICTED) };
	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	ck_assert_int_eq(plan(&f, false, &err), 0);
	ck_assert_str_eq(f.sp->policy, with);
	ck_assert_uint_eq(f.sp->rlimits.set, 0);
	text = cd_seatbelt_limits_text(&f.sp->rlimits);
	ck_assert_str_eq(text, "");
	free(text);
	free(with);
	done(&f);

	static const struct {
		enum cd_limit l;
		const char *why;
	} refused[] = {
		{ CD_LIMIT_TASKS, "RLIMIT_NPROC counts all of the user's processes" },
		{ CD_LIMIT_MEMORY, "no cgroups to bound a sandbox's memory" },
		{ CD_LIMIT_SWAP, "no cgroups to bound a sandbox's memory" },
		{ CD_LIMIT_CPU, "CPU quota" },
		{ CD_LIMIT_CPU_TIME, "sends SIGXCPU once at the limit and never kills" },
		{ CD_LIMIT_PRIVATE_TMP, "no mount namespaces" },
		{ CD_LIMIT_INOTIFY_INSTANCES, "no inotify" },
		{ CD_LIMIT_INOTIFY_WATCHES, "no inotify" },
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		/* A disabled profile too: its command would run unbounded. */
		for (int disabled = 0; disabled < 2; disabled++) {
			struct cd_limits one = L;
			cd_limits_put(&one, refused[i].l, 1 << 20);
			f = (struct fixture){ .fs = tree(),
					      .prof = profile(CD_NET_RESTRICTED),
					      .limits = &one };
			if (disabled)
				f.prof->type = CD_PROFILE_DISABLED;
			else
				add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL,
				    CD_ACCESS_READ);
			err = NULL;
			ck_assert_int_eq(plan(&f, false, &err), -EOPNOTSUPP);
			ck_assert_ptr_null(f.sp);
			char *want = cd_xasprintf("cannot enforce the %s limit: ",
						  cd_limit_info(refused[i].l)->name);
			ck_assert_msg(strstr(err, want) && strstr(err, refused[i].why), "%s", err);
			free(want);
			free(err);
			done(&f);
		}
	}
	/* A disabled profile keeps its rlimits: the launcher sets them before the plain exec. */
	f = (struct fixture){ .fs = tree(), .prof = profile(CD_NET_RESTRICTED), .limits = &L };
	f.prof->type = CD_PROFILE_DISABLED;
	ck_assert_int_eq(plan(&f, false, &err), 0);
	ck_assert(!f.sp->sandboxed);
	ck_assert_uint_eq(f.sp->rlimits.set, L.set);
	done(&f);
}
END_TEST

/* ---- differential: the bound policy against the generated SBPL, evaluated ---- */

/* Whether path lies at or below a match of a deny glob (the profile's intent). */
static bool glob_denies(const struct fixture *f, const char *path)
{
	for (size_t i = 0; i < f->prof->n_entries; i++) {
		const struct cd_fs_entry *e = &f->prof->entries[i];
		if (e->kind != CD_ENTRY_GLOB)
			continue;
		const char *pat = e->path;
		const char *bases[4] = { 0 };
		size_t nb = 0;
		size_t pl = strlen(CD_GLOB_PROJECT_ROOTS_PREFIX);
		if (!strncmp(pat, CD_GLOB_PROJECT_ROOTS_PREFIX, pl)) {
			pat += pl;
			for (size_t r = 0; r < f->n_roots; r++)
				bases[nb++] = f->roots[r];
		} else if (*pat == '/') {
			bases[nb++] = "/";
			pat++;
		} else {
			bases[nb++] = f->plan->cwd;
		}
		for (size_t b = 0; b < nb; b++) {
			size_t bl = cd_streq(bases[b], "/") ? 0 : strlen(bases[b]);
			if (strncmp(path, bases[b], bl) || path[bl] != '/')
				continue;
			/* Each prefix of the relative path: a match denies its subtree. */
			char *rel = cd_xstrdup(path + bl + 1);
			bool hit = false;
			for (char *q = rel; !hit;) {
				char *slash = strchr(q, '/');
				if (slash)
					*slash = '\0';
				hit = cd_glob_match(pat, rel);
				if (!slash)
					break;
				*slash = '/';
				q = slash + 1;
			}
			free(rel);
			if (hit)
				return true;
		}
	}
	return false;
}

static size_t diff_cases, diff_linux_cases;

/*
 * The Linux plan's decision, simulated: Landlock grants the union of the
 * rights of the rules on the path and its ancestors; then the deepest
 * mount around the path (pins aside) decides: a deny mount hides it (a
 * missing name's mask keeps it missing: nothing can be made there), a
 * read-only bind takes writes away, a writable region or a writable
 * bind gives them back; with a read-only root, what no writable mount holds
 * is read-only.
 */
static int linux_allows(const struct cd_linux_plan *lp, bool write, const char *path)
{
	if (!lp->sandboxed)
		return 1;
	uint64_t rights = lp->landlock ? 0 : ~0ull;
	for (size_t i = 0; lp->landlock && i < lp->n_ll_rules; i++) {
		const struct cd_ll_rule *r = &lp->ll_rules[i];
		if (cd_streq(r->path, path) || cd_path_is_beneath(path, r->path))
			rights |= r->allowed;
	}
	bool ll = rights & (write ? CD_LL_FS_WRITE_FILE : CD_LL_FS_READ_FILE);
	const struct cd_mount *m = NULL;
	for (size_t i = 0; i < lp->n_mounts; i++) {
		const struct cd_mount *x = &lp->mounts[i];
		if (x->op == CD_MOUNT_PIN ||
		    !(cd_streq(x->path, path) || cd_path_is_beneath(path, x->path)))
			continue;
		if (!m || cd_path_depth(x->path) >= cd_path_depth(m->path))
			m = x;
	}
	bool mount_write = !lp->ro_root;
	if (m && m->op == CD_MOUNT_DENY)
		return false;
	/* A missing name masked: it stays missing, so a read finds nothing whatever the
	 * plan says (-1: moot), and nothing can be made there. */
	if (m && m->op == CD_MOUNT_MASK)
		return write ? 0 : -1;
	if (m && m->op == CD_MOUNT_RO_BIND)
		mount_write = false;
	if (m && (m->op == CD_MOUNT_RW_BIND || m->op == CD_MOUNT_WRITABLE))
		mount_write = true;
	return write ? ll && mount_write : ll;
}

static const struct cd_linux_plan *diff_lp;

/* Whether dir is a proper ancestor of path (or path itself with self). */
static bool above(const char *dir, const char *path, bool self)
{
	return (self && cd_streq(dir, path)) ||
	       (cd_path_is_beneath(path, dir) && !cd_streq(dir, path));
}

/* A glob's fixed directory: its base and the leading wildcard-free components but the last. */
static char *fixed_dir(const char *base, const char *pat)
{
	char *dir = cd_xstrdup(*pat == '/' ? "/" : base);
	char *copy = cd_xstrdup(pat), *save = NULL;
	const char *comps[32];
	size_t n = 0;
	for (char *c = strtok_r(copy, "/", &save); c && n < 32; c = strtok_r(NULL, "/", &save))
		if (!cd_streq(c, "."))
			comps[n++] = c;
	for (size_t i = 0; i + 1 < n && !strpbrk(comps[i], "*?[\\"); i++) {
		char *j = cd_path_join(dir, comps[i]);
		free(dir);
		dir = j;
	}
	free(copy);
	return dir;
}

/*
 * A directory the sandbox may not remove or rename, as Linux pins it with a
 * mount: its parent is writable, and a carve-out, a hidden file or a deny
 * glob's fixed directory lies below it (or is it, for the glob).
 */
static bool pinned(const struct fixture *f, const char *path)
{
	char *up = cd_path_parent(path);
	bool w = up && !cd_streq(path, "/") && cd_plan_access(f->plan, up, NULL) == CD_ACCESS_WRITE;
	free(up);
	if (!w)
		return false;
	for (size_t i = 0; i < f->plan->n_paths; i++)
		if (f->plan->paths[i].carve_out && above(path, f->plan->paths[i].path, false))
			return true;
	for (size_t i = 0; i < f->n_hidden; i++)
		if (above(path, f->hidden[i], false))
			return true;
	bool hit = false;
	for (size_t i = 0; i < f->prof->n_entries && !hit; i++) {
		const struct cd_fs_entry *e = &f->prof->entries[i];
		if (e->kind != CD_ENTRY_GLOB || f->plan->fs_unrestricted)
			continue;
		size_t pl = strlen(CD_GLOB_PROJECT_ROOTS_PREFIX);
		bool roots = !strncmp(e->path, CD_GLOB_PROJECT_ROOTS_PREFIX, pl);
		for (size_t r = 0; r < (roots ? f->n_roots : 1) && !hit; r++) {
			char *d = roots ? fixed_dir(f->roots[r], e->path + pl)
					: fixed_dir(f->plan->cwd, e->path);
			hit = above(path, d, true);
			free(d);
		}
	}
	return hit;
}

static void diff_path(const struct fixture *f, const struct sbpl_policy *pol, const char *path)
{
	static const char *const read_ops[] = { "file-read-data", "file-read-metadata", NULL };
	static const char *const write_ops[] = { "file-write-data", "file-write-create",
						 "file-write-unlink", NULL };
	const struct cd_plan_path *rule = NULL;
	enum cd_access a = cd_plan_access(f->plan, path, &rule);
	bool denied = glob_denies(f, path);
	bool want_read = !denied && (a == CD_ACCESS_READ || a == CD_ACCESS_WRITE);
	bool want_write = !denied && a == CD_ACCESS_WRITE;
	char *mac = cd_seatbelt_macos_path(path);
	/* :minimal is macOS's own set of system paths (the binding bound none), minus denies. */
	bool explicit_deny = rule && rule->access == CD_ACCESS_DENY;
	if (f->minimal && !explicit_deny && !denied && cd_seatbelt_minimal_reads(mac))
		want_read = true;

	/*
	 * The Linux plan agrees with the bound plan itself (its globs are the
	 * matches that exist at start: a later match is Seatbelt's alone).
	 */
	if (diff_lp) {
		bool lr = a == CD_ACCESS_READ || a == CD_ACCESS_WRITE, lw = a == CD_ACCESS_WRITE;
		int got = linux_allows(diff_lp, false, path);
		ck_assert_msg(got < 0 || got == lr, "linux read %s: plan says %s", path,
			      lr ? "allowed" : "denied");
		ck_assert_msg(linux_allows(diff_lp, true, path) == lw,
			      "linux write %s: plan says %s", path, lw ? "allowed" : "denied");
		diff_linux_cases += 2;
	}
	for (const char *const *op = read_ops; *op; op++, diff_cases++)
		ck_assert_msg(sbpl_allows(pol, *op, mac) == want_read, "%s %s: plan says %s", *op,
			      mac, want_read ? "allowed" : "denied");
	bool pin = pinned(f, path);
	for (const char *const *op = write_ops; *op; op++, diff_cases++) {
		bool want = want_write && !(pin && cd_streq(*op, "file-write-unlink"));
		ck_assert_msg(sbpl_allows(pol, *op, mac) == want, "%s %s: plan says %s", *op, mac,
			      want ? "allowed" : "denied");
	}
	free(mac);
}

/* The plan's paths, what lies below and beside them, and the given extra paths. */
static void differential(struct fixture *f, const char *const *extra)
{
	const struct cd_seatbelt_plan *sp = f->sp;
	const char **keys = cd_xcalloc(sp->n_params + 1, sizeof(*keys));
	const char **values = cd_xcalloc(sp->n_params + 1, sizeof(*values));
	const char *err = NULL, *unused = NULL;

	for (size_t i = 0; i < sp->n_params; i++) {
		keys[i] = sp->params[i].key;
		values[i] = sp->params[i].value;
	}
	/* Structure: (version 1) then (deny default) first; params all defined, all used. */
	const char *body = sp->policy;
	ck_assert(cd_startswith(body, "(version 1)\n"));
	const char *dd = strstr(body, "\n(deny default)\n");
	ck_assert_ptr_nonnull(dd);
	for (const char *q = body + strlen("(version 1)\n"); q < dd + 1; q++)
		ck_assert_msg(*q != '(', "a rule before (deny default)");
	struct sbpl_policy *pol = sbpl_parse(sp->policy, keys, values, sp->n_params, &err, &unused);
	ck_assert_msg(pol != NULL, "SBPL does not parse: %s", err ? err : "?");
	ck_assert_msg(unused == NULL, "-D%s is never used", unused ? unused : "");
	/* No bound path is written into the policy text: they travel as -D parameters. */
	for (size_t i = 0; i < f->plan->n_paths; i++) {
		char *needle = cd_xasprintf("\"%s\"", f->plan->paths[i].path);
		if (!cd_streq(f->plan->paths[i].path, "/dev/null"))
			ck_assert_msg(!strstr(sp->policy, needle), "%s in the text", needle);
		free(needle);
	}

	for (size_t i = 0; i < f->plan->n_paths; i++) {
		const char *p = f->plan->paths[i].path;
		if (cd_startswith(p, "/dev/"))
			continue;
		char *below = cd_path_join(p, "x");
		char *deeper = cd_path_join(p, "x/y");
		char *beside = cd_xasprintf("%s2", p);
		diff_path(f, pol, p);
		diff_path(f, pol, below);
		diff_path(f, pol, deeper);
		if (!cd_streq(p, "/"))
			diff_path(f, pol, beside);
		char *up = cd_path_parent(p);
		if (up)
			diff_path(f, pol, up);
		free(up);
		free(below);
		free(deeper);
		free(beside);
	}
	for (const char *const *x = extra; *x; x++)
		diff_path(f, pol, *x);
	sbpl_free(pol);
	free(keys);
	free(values);
}

static const char *const diff_extra[] = {
	"/",
	"/etc/passwd",
	"/Users/me/other",
	"/Users/me/extra/.git/config",
	"/tmp/ws/new.pem",
	"/tmp/ws/a/b/c.pem",
	"/tmp/ws/a/b/c.pem/inside",
	"/tmp/ws/x.pemx",
	"/tmp/ws/.env",
	"/tmp/ws/.env/x",
	"/tmp/ws/.envrc",
	"/tmp/ws/.codex/config.toml",
	"/tmp/ws/.git/config",
	"/tmp/ws/.gitx",
	"/tmp/ws/src/main.c",
	"/tmp/ws/secrets/public/x",
	"/tmp/ws/secrets/key",
	"/tmp/ws/out/log",
	"/tmp/other",
	"/tmp/.git/HEAD",
	"/usr/lib/libc.dylib",
	"/usr/lib/secret/x",
	"/usr/share/a/b.key",
	"/usr/share/a/b.txt",
	"/etc/ssh/ssh_host_key",
	"/etc/hosts",
	"/bin/sh",
	NULL,
};

START_TEST(test_differential)
{
	struct fixture f = { .fs = tree(), .prof = profile(CD_NET_RESTRICTED) };
	char *err = NULL;

	cd_fakefs_dir(f.fs, "/tmp/ws/out");
	cd_fakefs_dir(f.fs, "/tmp/ws/v/n/.git");
	cd_fakefs_file(f.fs, "/tmp/ws/k.pem", "k");
	switch (_i) {
	case 0: /* workspace-write, with an extra root */
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
		add(f.prof, CD_ENTRY_PATH, 0, "/Users/me/extra", CD_ACCESS_WRITE);
		break;
	case 1: /* restricted read, a deny, read again below it, a writable subdirectory */
		f.minimal = true;
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_MINIMAL, NULL, CD_ACCESS_READ);
		/* Denies within :minimal's reach: its rules exclude them. */
		add(f.prof, CD_ENTRY_PATH, 0, "/usr/lib/secret", CD_ACCESS_DENY);
		add(f.prof, CD_ENTRY_PATH, 0, "/etc/ssh", CD_ACCESS_DENY);
		add(f.prof, CD_ENTRY_GLOB, 0, "/usr/share/**/*.key", CD_ACCESS_DENY);
		add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws", CD_ACCESS_READ);
		add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/secrets", CD_ACCESS_DENY);
		add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/secrets/public", CD_ACCESS_READ);
		add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/out", CD_ACCESS_WRITE);
		break;
	case 2: /* full read, deny paths and globs, the workspace writable */
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
		add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/secrets", CD_ACCESS_DENY);
		add(f.prof, CD_ENTRY_GLOB, 0, "**/*.pem", CD_ACCESS_DENY);
		add(f.prof, CD_ENTRY_GLOB, 0, "codex-project-roots://.env", CD_ACCESS_DENY);
		break;
	case 3: /* read-only */
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
		break;
	case 4: /* "/" writable with narrower entries */
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_WRITE);
		add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/secrets", CD_ACCESS_DENY);
		add(f.prof, CD_ENTRY_PATH, 0, "/etc", CD_ACCESS_READ);
		break;
	case 5: /* nothing but one writable directory */
		add(f.prof, CD_ENTRY_PATH, 0, "/tmp/ws/out", CD_ACCESS_WRITE);
		break;
	}
	ck_assert_int_eq(plan(&f, true, &err), 0);
	static const struct cd_linux_host host = { .landlock_abi = 7,
						   .seccomp = true,
						   .userns = true };
	struct cd_linux_plan *lp = NULL;
	/*
	 * Where Linux cannot express the policy it refuses it (case 1: a path
	 * readable again below a deny path it masks whole): no difference, a
	 * refusal. Seatbelt expresses it, and is compared still.
	 */
	int lr = cd_linux_plan_build(f.plan, &host, NULL, &lp, &err);
	ck_assert_msg(lr == 0 || _i == 1, "%s", err ? err : "?");
	if (lr < 0) {
		ck_assert_ptr_nonnull(strstr(err, "inside denied directory"));
		free(err);
		err = NULL;
	}
	diff_lp = lp;
	differential(&f, diff_extra);
	diff_lp = NULL;
	cd_linux_plan_free(lp);
	done(&f);
}
END_TEST

START_TEST(test_differential_count)
{
	/* Runs after the loop above in the same process (CK_NOFORK) or reports 0. */
	if (diff_cases)
		fprintf(stderr,
			"differential: %zu (operation, path) cases, bound policy = Seatbelt "
			"policy; "
			"%zu, bound policy = Linux plan\n",
			diff_cases, diff_linux_cases);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("seatbelt");
	TCase *tc = tcase_create("planner");
	tcase_add_loop_test(tc, test_glob_regex, 0, CD_ARRAY_SIZE(glob_cases));
	tcase_add_test(tc, test_glob_regex_refused);
	tcase_add_test(tc, test_evaluator_lint);
	tcase_add_test(tc, test_macos_path);
	tcase_add_test(tc, test_workspace_write);
	tcase_add_test(tc, test_restricted_read);
	tcase_add_test(tc, test_deny_under_full_read);
	tcase_add_test(tc, test_absolute_globs_private);
	tcase_add_test(tc, test_hidden_files);
	tcase_add_test(tc, test_unrestricted_and_disabled);
	tcase_add_test(tc, test_managed_network);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_limits);
	tcase_add_loop_test(tc, test_differential, 0, 6);
	tcase_add_test(tc, test_differential_count);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
