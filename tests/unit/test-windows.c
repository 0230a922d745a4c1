/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Windows restricted-token planner (sandbox/windows/plan.h), on every
 * host: command lines that round-trip through the CommandLineToArgvW rules,
 * the environment block, the token, SIDs and ACEs on plans bound over
 * fakefs.c, the refusals, and a differential check of writes: the bound
 * plan against a simulated Windows access check of the planned ACEs under
 * a WRITE_RESTRICTED token.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "fakefs.h"
#include "sandbox/windows/plan.h"

/* ---- command lines ---- */

static void round_trip(char *const *argv)
{
	char *line = cd_windows_cmdline(argv);
	ck_assert_ptr_nonnull(line);
	char **back = cd_windows_split_cmdline(line);
	size_t n = cd_strv_length(argv);
	ck_assert_msg(cd_strv_length(back) == n, "%s: %zu arguments back, want %zu", line,
		      cd_strv_length(back), n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(cd_streq(back[i], argv[i]), "%s: argument %zu is [%s], want [%s]",
			      line, i, back[i], argv[i]);
	cd_strv_free(back);
	free(line);
}

START_TEST(test_cmdline_cases)
{
	static const char *const cases[][6] = {
		{ "prog", "a", "b c", NULL },
		{ "C:\\Program Files\\x.exe", "", "\"", NULL },
		{ "prog", "a\\", "a\\\\", "a\\\"b", "\\\\server\\share\\", NULL },
		{ "prog", "\"quoted\"", "tab\there", "new\nline", "trailing\\ ", NULL },
		{ "prog", "\\\"", "\\\\\"", "x\\\\y", "", NULL },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(cases); i++)
		round_trip((char *const *)cases[i]);

	char *line = cd_windows_cmdline((char *const[]){ "prog", "a b", "c\\", "d\"e", NULL });
	ck_assert_str_eq(line, "prog \"a b\" c\\ \"d\\\"e\"");
	free(line);
	/* A program name cannot carry a quote: refused, not mangled. */
	ck_assert_ptr_null(cd_windows_cmdline((char *const[]){ "a\"b", NULL }));
	/* Nor be a batch file, whose arguments cmd.exe parses by its own rules. */
	ck_assert_ptr_null(cd_windows_cmdline((char *const[]){ "x.bat", "a&calc", NULL }));
	ck_assert_ptr_null(cd_windows_cmdline((char *const[]){ "C:\\t\\Y.CMD", NULL }));
	line = cd_windows_cmdline((char *const[]){ "cmd.exe", "/c", "x.bat", NULL });
	ck_assert_str_eq(line, "cmd.exe /c x.bat");
	free(line);
}
END_TEST

START_TEST(test_cmdline_random)
{
	static const char alphabet[] = { 'a', ' ', '\t', '"', '\\', 'x', '\\', '"' };
	unsigned seed = 12345;

	for (int round = 0; round < 20000; round++) {
		char *argv[6] = { "prog", NULL };
		size_t n = 1 + (size_t)(seed % 4);
		for (size_t i = 1; i < n + 1; i++) {
			seed = seed * 1103515245u + 12345u;
			size_t len = (seed >> 16) % 7;
			char *a = cd_xcalloc(len + 1, 1);
			for (size_t k = 0; k < len; k++) {
				seed = seed * 1103515245u + 12345u;
				a[k] = alphabet[(seed >> 16) % sizeof(alphabet)];
			}
			argv[i] = a;
		}
		argv[n + 1] = NULL;
		round_trip(argv);
		for (size_t i = 1; argv[i]; i++)
			free(argv[i]);
	}
}
END_TEST

/* ---- the environment block ---- */

START_TEST(test_env_block)
{
	char *err = NULL;
	size_t len = 0;
	unsigned char *b = cd_windows_env_block(
		(char *const[]){ "zeta=1", "Path=C:\\x", "ALPHA=é", "=C:=C:\\w", NULL }, &len,
		&err);

	ck_assert_msg(b != NULL, "%s", err ? err : "?");
	/* Sorted by name without case: "=C:", "ALPHA", "Path", "zeta"; UTF-16LE. */
	static const char *const want[] = { "=C:=C:\\w", "ALPHA=\xe9", "Path=C:\\x", "zeta=1" };
	size_t o = 0;
	for (size_t i = 0; i < CD_ARRAY_SIZE(want); i++) {
		for (const unsigned char *p = (const unsigned char *)want[i]; *p; p++, o += 2) {
			ck_assert_uint_eq(b[o], *p);
			ck_assert_uint_eq(b[o + 1], 0);
		}
		ck_assert_uint_eq(b[o], 0);
		ck_assert_uint_eq(b[o + 1], 0);
		o += 2;
	}
	ck_assert_uint_eq(b[o], 0);
	ck_assert_uint_eq(b[o + 1], 0);
	ck_assert_uint_eq(len, o + 2);
	free(b);

	/* A character beyond the BMP is a surrogate pair. */
	b = cd_windows_env_block((char *const[]){ "E=\xf0\x9f\x98\x80", NULL }, &len, &err);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(len, (4 + 1) * 2 + 2);
	ck_assert_uint_eq(b[4] | b[5] << 8, 0xd83d);
	ck_assert_uint_eq(b[6] | b[7] << 8, 0xde00);
	free(b);

	static const char *const bad[][3] = {
		{ "noequals", NULL },	      { "=", NULL },
		{ "A=\xff", NULL },	      { "A=\xed\xa0\x80", NULL }, /* an encoded surrogate */
		{ "path=1", "PATH=2", NULL },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(bad); i++) {
		err = NULL;
		ck_assert_ptr_null(cd_windows_env_block((char *const *)bad[i], &len, &err));
		ck_assert_ptr_nonnull(err);
		free(err);
	}
}
END_TEST

/* ---- plans ---- */

static char *fake_sid(void *ctx, const char *key)
{
	(void)ctx;
	return cd_windows_sid_derive("test", key);
}

struct fixture {
	struct cd_fakefs *fs;
	struct cd_profile *prof;
	struct cd_plan *plan;
	struct cd_windows_plan *wp;
	const struct cd_limits *limits;
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

static void setup(struct fixture *f, enum cd_network net)
{
	*f = (struct fixture){ 0 };
	f->fs = cd_fakefs_new();
	cd_fakefs_other(f->fs, "/dev/null");
	cd_fakefs_dir(f->fs, "/w/ws/.git");
	cd_fakefs_dir(f->fs, "/w/ws/src");
	cd_fakefs_dir(f->fs, "/w/ws/docs");
	cd_fakefs_dir(f->fs, "/w/extra");
	cd_fakefs_dir(f->fs, "/tmp");
	f->prof = cd_xcalloc(1, sizeof(*f->prof));
	f->prof->type = CD_PROFILE_MANAGED;
	f->prof->network = net;
}

static int plan(struct fixture *f, bool env_net, char **err)
{
	const char *roots[] = { "/w/ws" };
	struct cd_bind_input in = {
		.cwd = "/w/ws",
		.workspace_roots = roots,
		.n_workspace_roots = 1,
		.ops = cd_fakefs_ops(f->fs),
	};
	ck_assert_msg(cd_plan_build(f->prof, &in, &f->plan, err) == 0, "%s", *err ? *err : "?");
	struct cd_windows_input wi = {
		.profile = f->prof,
		.plan = f->plan,
		.drive = "C:",
		.home = "C:\\Users\\me",
		.allow_env_network = env_net,
		.sids = { .sid_for = fake_sid },
		.limits = f->limits,
	};
	return cd_windows_plan_build(&wi, &f->wp, err);
}

static void done(struct fixture *f)
{
	cd_windows_plan_free(f->wp);
	cd_plan_free(f->plan);
	cd_profile_free(f->prof);
	cd_fakefs_free(f->fs);
}

static void workspace_write(struct fixture *f)
{
	add(f->prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add(f->prof, CD_ENTRY_SPECIAL, CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add(f->prof, CD_ENTRY_SPECIAL, CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
}

START_TEST(test_paths_and_sids)
{
	char *p = cd_windows_path("/a/b c/d", "C:");
	ck_assert_str_eq(p, "C:\\a\\b c\\d");
	free(p);
	p = cd_windows_path("/", "D:");
	ck_assert_str_eq(p, "D:\\");
	free(p);
	char *a = cd_windows_sid_derive("s", "root:C:\\w"),
	     *b = cd_windows_sid_derive("s", "root:C:\\w");
	char *c = cd_windows_sid_derive("s", "root:C:\\x");
	ck_assert_str_eq(a, b);
	ck_assert_str_ne(a, c);
	ck_assert(cd_startswith(a, "S-1-5-21-"));
	free(a);
	free(b);
	free(c);
}
END_TEST

START_TEST(test_workspace_write_plan)
{
	struct fixture f;
	char *err = NULL;

	setup(&f, CD_NET_ENABLED);
	workspace_write(&f);
	ck_assert_int_eq(plan(&f, false, &err), 0);
	ck_assert(f.wp->sandboxed);
	ck_assert_str_eq(f.wp->token_flags, "DISABLE_MAX_PRIVILEGE|LUA_TOKEN|WRITE_RESTRICTED");
	/* Restricting SIDs: workspace, one per root (plan order), logon, Everyone. */
	ck_assert_uint_eq(f.wp->n_sids, 5);
	ck_assert_int_eq(f.wp->sids[0].role, CD_WIN_SID_WORKSPACE);
	ck_assert_str_eq(f.wp->sids[0].key, "C:\\w\\ws");
	ck_assert_int_eq(f.wp->sids[1].role, CD_WIN_SID_ROOT);
	ck_assert_str_eq(f.wp->sids[1].key, "C:\\tmp");
	ck_assert_str_eq(f.wp->sids[2].key, "C:\\w\\ws");
	ck_assert_int_eq(f.wp->sids[3].role, CD_WIN_SID_LOGON);
	ck_assert_str_eq(f.wp->sids[4].sid, "S-1-1-0");
	/* The workspace SID and its root SID differ: keyed differently. */
	ck_assert_str_ne(f.wp->sids[0].sid, f.wp->sids[2].sid);
	/* ACEs: allow per root, deny-write on .git (exists) and .codex (made first). */
	bool allow_ws = false, deny_git = false, make_codex = false, nul = false;
	for (size_t i = 0; i < f.wp->n_aces; i++) {
		const struct cd_win_ace *a = &f.wp->aces[i];
		if (a->kind == CD_WIN_ACE_ALLOW && cd_streq(a->path, "C:\\w\\ws"))
			allow_ws = cd_streq(a->sid, f.wp->sids[2].sid);
		if (a->kind == CD_WIN_ACE_DENY_WRITE && cd_streq(a->path, "C:\\w\\ws\\.git"))
			deny_git = !a->create_dir;
		if (a->kind == CD_WIN_ACE_DENY_WRITE && cd_streq(a->path, "C:\\w\\ws\\.codex"))
			make_codex = a->create_dir;
		nul = nul || cd_streq(a->path, "\\\\.\\NUL");
	}
	ck_assert(allow_ws && deny_git && make_codex && nul);
	ck_assert_uint_eq(f.wp->n_env, 0);
	ck_assert_ptr_null(f.wp->degraded);
	done(&f);
}
END_TEST

START_TEST(test_read_only_and_env_network)
{
	struct fixture f;
	char *err = NULL;

	setup(&f, CD_NET_RESTRICTED);
	add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	/* A restricted network is refused without the opt-down ... */
	ck_assert_int_eq(plan(&f, false, &err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "--allow-degraded=network"));
	free(err);
	err = NULL;
	cd_plan_free(f.plan);
	f.plan = NULL;
	/* ... and with it, done by environment and reported as degraded. */
	ck_assert_int_eq(plan(&f, true, &err), 0);
	ck_assert_uint_eq(f.wp->n_sids, 3);
	ck_assert_int_eq(f.wp->sids[0].role, CD_WIN_SID_READONLY);
	bool proxy = false, offline = false;
	for (size_t i = 0; i < f.wp->n_env; i++) {
		proxy = proxy || (cd_streq(f.wp->env[i].name, "HTTPS_PROXY") &&
				  cd_streq(f.wp->env[i].value, "http://127.0.0.1:9"));
		offline = offline || cd_streq(f.wp->env[i].name, "PIP_NO_INDEX");
	}
	ck_assert(proxy && offline);
	/* Windows' names ignore case: the planned variables must make a valid block. */
	char **env = NULL;
	for (size_t i = 0; i < f.wp->n_env; i++)
		cd_strv_push_take(&env,
				  cd_xasprintf("%s=%s", f.wp->env[i].name, f.wp->env[i].value));
	size_t len = 0;
	unsigned char *block = cd_windows_env_block(env, &len, &err);
	ck_assert_msg(block != NULL, "%s", err ? err : "?");
	free(block);
	cd_strv_free(env);
	ck_assert_str_eq(f.wp->path_prepend, "C:\\Users\\me\\.cordon\\denybin");
	ck_assert_uint_eq(cd_strv_length(f.wp->degraded), 1);
	done(&f);
}
END_TEST

/* Any limit is refused, before anything is planned, a disabled profile included. */
START_TEST(test_limits_refused)
{
	for (int l = 0; l < CD_LIMIT_COUNT; l++) {
		for (int disabled = 0; disabled < 2; disabled++) {
			struct cd_limits L = { 0 };
			cd_limits_put(&L, (enum cd_limit)l, 1 << 20);
			struct fixture f;
			char *err = NULL;
			setup(&f, CD_NET_RESTRICTED);
			f.limits = &L;
			if (disabled)
				f.prof->type = CD_PROFILE_DISABLED;
			else
				workspace_write(&f);
			ck_assert_int_eq(plan(&f, false, &err), -EOPNOTSUPP);
			ck_assert_ptr_null(f.wp);
			char *want = cd_xasprintf("enforces no resource limits yet (asked: %s)",
						  cd_limit_info((enum cd_limit)l)->name);
			ck_assert_msg(strstr(err, want), "%s", err);
			free(want);
			free(err);
			done(&f);
		}
	}
	/* Without limits the same profile plans. */
	struct fixture f;
	char *err = NULL;
	setup(&f, CD_NET_RESTRICTED);
	workspace_write(&f);
	ck_assert_int_eq(plan(&f, true, &err), 0);
	done(&f);
}
END_TEST

START_TEST(test_refusals)
{
	static const char *const want[] = { "Restricted read-only access requires the elevated",
					    "Restricted read-only access requires the elevated",
					    "Restricted read-only access requires the elevated",
					    "cannot grant writes to the whole file system",
					    "external profile",
					    "managed network" };
	struct fixture f;
	char *err = NULL;

	setup(&f, CD_NET_ENABLED);
	switch (_i) {
	case 0: /* restricted read */
		add(f.prof, CD_ENTRY_PATH, 0, "/w/ws", CD_ACCESS_WRITE);
		break;
	case 1: /* a deny path */
		workspace_write(&f);
		add(f.prof, CD_ENTRY_PATH, 0, "/w/ws/docs", CD_ACCESS_DENY);
		break;
	case 2: /* a deny glob */
		workspace_write(&f);
		add(f.prof, CD_ENTRY_GLOB, 0, "**/*.pem", CD_ACCESS_DENY);
		break;
	case 3: /* full write */
		add(f.prof, CD_ENTRY_SPECIAL, CD_SPECIAL_ROOT, NULL, CD_ACCESS_WRITE);
		break;
	case 4:
		f.prof->type = CD_PROFILE_EXTERNAL;
		break;
	case 5:
		f.prof->network = CD_NET_MANAGED;
		workspace_write(&f);
		break;
	}
	ck_assert_int_lt(plan(&f, true, &err), 0);
	ck_assert_ptr_null(f.wp);
	ck_assert_msg(strstr(err, want[_i]) != NULL, "%s", err);
	free(err);
	done(&f);
}
END_TEST

/* ---- differential: writes by the bound plan and by a simulated access check ---- */

/*
 * Windows' check for a WRITE_RESTRICTED token, as far as the planned ACEs
 * go: the user may write everywhere (the worst case), so a write is decided
 * by the restricting SIDs alone. ACEs are looked at from the object up
 * through its ancestors (inherited ones, nearest first), deny before allow
 * at each level; the first ACE for a restricting SID that covers the right
 * decides. Nothing granted is denied (no existing ACE grants a capability
 * SID, the logon SID or Everyone a write: the assumption this backend
 * documents). Deleting needs DELETE on the object or FILE_DELETE_CHILD on
 * its parent.
 */
static bool token_has(const struct cd_windows_plan *wp, const char *sid)
{
	for (size_t i = 0; i < wp->n_sids; i++)
		if (cd_streq(wp->sids[i].sid, sid))
			return true;
	return false;
}

enum right {
	R_WRITE,
	R_DELETE,
	R_DELETE_CHILD
};

static bool ace_covers(const struct cd_win_ace *a, enum right r)
{
	const char *rights =
		a->kind == CD_WIN_ACE_ALLOW ? CD_WIN_RIGHTS_ALLOW : CD_WIN_RIGHTS_DENY_WRITE;
	const char *name = r == R_WRITE	   ? "FILE_GENERIC_WRITE"
			   : r == R_DELETE ? "DELETE"
					   : "FILE_DELETE_CHILD";
	for (const char *p = rights; (p = strstr(p, name)); p += strlen(name))
		if ((p == rights || p[-1] == '|') && (p[strlen(name)] == '|' || !p[strlen(name)]))
			return true;
	return false;
}

/* The Windows parent of p ("C:\\a" -> "C:\\", "C:\\" -> NULL), malloc'ed. */
static char *wparent(const char *p)
{
	const char *bs = strrchr(p, '\\');
	if (!bs || (bs == p + 2 && !bs[1]))
		return NULL;
	if (bs == p + 2)
		return cd_xstrndup(p, 3);
	return cd_xstrndup(p, (size_t)(bs - p));
}

static bool access_check(const struct cd_windows_plan *wp, const char *wpath, enum right r)
{
	char *p = cd_xstrdup(wpath);

	while (p) {
		for (int deny = 1; deny >= 0; deny--)
			for (size_t i = 0; i < wp->n_aces; i++) {
				const struct cd_win_ace *a = &wp->aces[i];
				if ((a->kind == CD_WIN_ACE_DENY_WRITE) != deny ||
				    !cd_streq(a->path, p) || !token_has(wp, a->sid) ||
				    !ace_covers(a, r))
					continue;
				free(p);
				return !deny;
			}
		char *up = wparent(p);
		free(p);
		p = up;
	}
	return false;
}

static size_t diff_cases;

static void diff_path(const struct fixture *f, const char *path)
{
	enum cd_access a = cd_plan_access(f->plan, path, NULL);
	char *w = cd_windows_path(path, "C:");
	bool want = a == CD_ACCESS_WRITE;

	ck_assert_msg(access_check(f->wp, w, R_WRITE) == want, "write %s: plan says %s", w,
		      want ? "allowed" : "denied");
	char *parent = cd_path_parent(path);
	bool del = access_check(f->wp, w, R_DELETE);
	if (parent) {
		char *wparent = cd_windows_path(parent, "C:");
		del = del || access_check(f->wp, wparent, R_DELETE_CHILD);
		free(wparent);
	}
	ck_assert_msg(del == want, "delete or rename %s: plan says %s", w,
		      want ? "allowed" : "denied");
	diff_cases += 2;
	free(parent);
	free(w);
}

START_TEST(test_differential)
{
	static const char *const extra[] = {
		"/",
		"/w",
		"/w/ws",
		"/w/ws/src/a.c",
		"/w/ws/.git/config",
		"/w/ws/.gitx",
		"/w/ws/.codex/x",
		"/w/ws/.agents",
		"/w/wsx",
		"/w/extra/f",
		"/tmp/f",
		"/tmp/.git",
		"/tmp/.git/HEAD",
		"/w/ws/docs/readme",
		"/etc/passwd",
		NULL,
	};
	struct fixture f;
	char *err = NULL;

	setup(&f, CD_NET_ENABLED);
	workspace_write(&f);
	if (_i == 1) {
		add(f.prof, CD_ENTRY_PATH, 0, "/w/extra", CD_ACCESS_WRITE);
		add(f.prof, CD_ENTRY_PATH, 0, "/w/ws/docs", CD_ACCESS_READ);
		add(f.prof, CD_ENTRY_PATH, 0, "/w/ws/docs/drafts", CD_ACCESS_WRITE);
	}
	ck_assert_int_eq(plan(&f, false, &err), 0);
	for (size_t i = 0; i < f.plan->n_paths; i++) {
		const char *p = f.plan->paths[i].path;
		if (cd_startswith(p, "/dev/"))
			continue;
		char *below = cd_path_join(p, "x");
		diff_path(&f, p);
		diff_path(&f, below);
		free(below);
	}
	for (const char *const *x = extra; *x; x++)
		diff_path(&f, *x);
	done(&f);
}
END_TEST

START_TEST(test_differential_count)
{
	if (diff_cases)
		fprintf(stderr, "windows differential: %zu (operation, path) cases agree\n",
			diff_cases);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("windows");
	TCase *tc = tcase_create("planner");
	tcase_add_test(tc, test_cmdline_cases);
	tcase_add_test(tc, test_cmdline_random);
	tcase_add_test(tc, test_env_block);
	tcase_add_test(tc, test_paths_and_sids);
	tcase_add_test(tc, test_workspace_write_plan);
	tcase_add_test(tc, test_read_only_and_env_network);
	tcase_add_test(tc, test_limits_refused);
	tcase_add_loop_test(tc, test_refusals, 0, 6);
	tcase_add_loop_test(tc, test_differential, 0, 2);
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
