/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Binding, canonicalisation, precedence and protected metadata, against
 * the in-memory tree of fakefs.c.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gitindex.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/util.h"
#include "fakefs.h"

/* ---- fixtures ----------------------------------------------------------- */

static struct cd_fakefs *fs;
static struct cd_profile *prof;
static struct cd_plan *plan;
static char *err;
static const char *roots[4];
static struct cd_bind_input in;

/* A small Debian-like tree with one git workspace. */
static void setup(void)
{
	fs = cd_fakefs_new();
	cd_fakefs_dir(fs, "/usr/lib64");
	cd_fakefs_dir(fs, "/usr/bin");
	cd_fakefs_dir(fs, "/etc");
	cd_fakefs_symlink(fs, "/bin", "usr/bin");
	cd_fakefs_symlink(fs, "/lib64", "usr/lib64");
	cd_fakefs_dir(fs, "/tmp");
	cd_fakefs_other(fs, "/dev/null");
	cd_fakefs_dir(fs, "/home/u/ws/.git");
	cd_fakefs_dir(fs, "/home/u/ws/src");
	cd_fakefs_dir(fs, "/home/u/other");
	prof = cd_xcalloc(1, sizeof(*prof));
	prof->type = CD_PROFILE_MANAGED;
	prof->network = CD_NET_RESTRICTED;
	roots[0] = "/home/u/ws";
	in = (struct cd_bind_input){
		.cwd = "/home/u/ws",
		.workspace_roots = roots,
		.n_workspace_roots = 1,
		.tmpdir = NULL,
		.ops = cd_fakefs_ops(fs),
	};
	plan = NULL;
	err = NULL;
}

static void teardown(void)
{
	cd_plan_free(plan);
	cd_profile_free(prof);
	cd_fakefs_free(fs);
	free(err);
}

static void add_special(enum cd_special s, const char *subpath, enum cd_access a)
{
	struct cd_fs_entry e = {
		.kind = CD_ENTRY_SPECIAL,
		.special = s,
		.subpath = (char *)subpath,
		.access = a,
	};
	cd_profile_add_entry(prof, &e);
}

static void add_path(const char *path, enum cd_access a)
{
	struct cd_fs_entry e = { .kind = CD_ENTRY_PATH, .path = (char *)path, .access = a };
	cd_profile_add_entry(prof, &e);
}

static void build_ok(void)
{
	int r = cd_plan_build(prof, &in, &plan, &err);
	ck_assert_msg(r == 0, "plan refused (%d): %s", r, err ? err : "(no message)");
	ck_assert_ptr_nonnull(plan);
	ck_assert_ptr_nonnull(plan->notes);
	for (size_t i = 1; i < plan->n_paths; i++)
		ck_assert_int_lt(strcmp(plan->paths[i - 1].path, plan->paths[i].path), 0);
	for (size_t i = 0; i < plan->n_paths; i++) {
		ck_assert(cd_path_is_normal(plan->paths[i].path));
		ck_assert_int_ne(plan->paths[i].type, CD_FT_SYMLINK);
		ck_assert_ptr_nonnull(plan->paths[i].why);
	}
}

static void build_fails(int want, const char *substr)
{
	int r = cd_plan_build(prof, &in, &plan, &err);
	ck_assert_int_eq(r, want);
	ck_assert_ptr_null(plan);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, substr), "message '%s' lacks '%s'", err, substr);
}

static const struct cd_plan_path *find(const char *path)
{
	for (size_t i = 0; i < plan->n_paths; i++)
		if (cd_streq(plan->paths[i].path, path))
			return &plan->paths[i];
	return NULL;
}

static const struct cd_plan_path *get(const char *path)
{
	const struct cd_plan_path *pp = find(path);
	ck_assert_msg(pp, "plan lacks %s", path);
	return pp;
}

static bool has_note(const char *substr)
{
	for (size_t i = 0; plan->notes[i]; i++)
		if (strstr(plan->notes[i], substr))
			return true;
	return false;
}

static size_t count_origin(enum cd_origin o)
{
	size_t n = 0;
	for (size_t i = 0; i < plan->n_paths; i++)
		n += plan->paths[i].origin == o;
	return n;
}

/* ---- canonicalisation --------------------------------------------------- */

static void canon_ok(const char *path, const char *want, enum cd_file_type want_type,
		     size_t want_links)
{
	char *out = NULL, **links = NULL;
	enum cd_file_type t = CD_FT_COUNT;
	int r = cd_canonicalize(in.ops, path, &out, &links, &t);
	ck_assert_msg(r == 0, "%s: %d", path, r);
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(t, want_type);
	ck_assert_uint_eq(cd_strv_length(links), want_links);
	free(out);
	cd_strv_free(links);
}

START_TEST(test_canon_plain)
{
	canon_ok("/", "/", CD_FT_DIR, 0);
	canon_ok("/home/u/ws", "/home/u/ws", CD_FT_DIR, 0);
	canon_ok("//home/./u//ws/", "/home/u/ws", CD_FT_DIR, 0);
	canon_ok("/home/u/ws/../other", "/home/u/other", CD_FT_DIR, 0);
	canon_ok("/..", "/", CD_FT_DIR, 0);
	canon_ok("/dev/null", "/dev/null", CD_FT_OTHER, 0);
}
END_TEST

START_TEST(test_canon_missing)
{
	canon_ok("/home/u/nope/a/b", "/home/u/nope/a/b", CD_FT_MISSING, 0);
	/* Going back up out of the missing part reaches real directories again. */
	canon_ok("/home/u/nope/../ws", "/home/u/ws", CD_FT_DIR, 0);
	cd_fakefs_file(fs, "/home/u/f", "x");
	canon_ok("/home/u/f", "/home/u/f", CD_FT_REG, 0);
	/* A file in the middle makes the rest unreachable: missing. */
	canon_ok("/home/u/f/x/y", "/home/u/f/x/y", CD_FT_MISSING, 0);
}
END_TEST

START_TEST(test_canon_links)
{
	char *out = NULL, **links = NULL;
	enum cd_file_type t;
	cd_fakefs_symlink(fs, "/home/u/abs", "/etc");
	cd_fakefs_symlink(fs, "/home/u/rel", "ws/src");
	cd_fakefs_symlink(fs, "/home/u/up", "../u/./ws");
	cd_fakefs_symlink(fs, "/home/u/chain", "rel");
	cd_fakefs_symlink(fs, "/home/u/dangling", "/nowhere/x");
	canon_ok("/home/u/abs", "/etc", CD_FT_DIR, 1);
	canon_ok("/home/u/rel/z", "/home/u/ws/src/z", CD_FT_MISSING, 1);
	canon_ok("/home/u/up/.git", "/home/u/ws/.git", CD_FT_DIR, 1);
	canon_ok("/home/u/dangling", "/nowhere/x", CD_FT_MISSING, 1);
	canon_ok("/lib64", "/usr/lib64", CD_FT_DIR, 1);

	ck_assert_int_eq(cd_canonicalize(in.ops, "/home/u/chain/..", &out, &links, &t), 0);
	ck_assert_str_eq(out, "/home/u/ws");
	/* The links crossed, by their own paths, in walk order. */
	ck_assert_uint_eq(cd_strv_length(links), 2);
	ck_assert_str_eq(links[0], "/home/u/chain");
	ck_assert_str_eq(links[1], "/home/u/rel");
	free(out);
	cd_strv_free(links);

	/* Callers may skip the optional outputs. */
	ck_assert_int_eq(cd_canonicalize(in.ops, "/bin", &out, NULL, NULL), 0);
	ck_assert_str_eq(out, "/usr/bin");
	free(out);
}
END_TEST

START_TEST(test_canon_errors)
{
	char *out = NULL;
	char name[32], target[32];
	ck_assert_int_eq(cd_canonicalize(in.ops, "rel/path", &out, NULL, NULL), -EINVAL);
	ck_assert_int_eq(cd_canonicalize(in.ops, "", &out, NULL, NULL), -EINVAL);

	cd_fakefs_symlink(fs, "/loop", "/loop");
	ck_assert_int_eq(cd_canonicalize(in.ops, "/loop", &out, NULL, NULL), -ELOOP);
	cd_fakefs_symlink(fs, "/pa", "/pb");
	cd_fakefs_symlink(fs, "/pb", "pa/x");
	ck_assert_int_eq(cd_canonicalize(in.ops, "/pa", &out, NULL, NULL), -ELOOP);

	/* A chain of exactly 40 links resolves; 41 does not. */
	for (int i = 0; i < 41; i++) {
		snprintf(name, sizeof(name), "/c%d", i);
		snprintf(target, sizeof(target), "c%d", i + 1);
		cd_fakefs_symlink(fs, name, target);
	}
	cd_fakefs_dir(fs, "/c41");
	ck_assert_int_eq(cd_canonicalize(in.ops, "/c1", &out, NULL, NULL), 0);
	ck_assert_str_eq(out, "/c41");
	free(out);
	ck_assert_int_eq(cd_canonicalize(in.ops, "/c0", &out, NULL, NULL), -ELOOP);

	cd_fakefs_fail(fs, "/etc", EACCES);
	ck_assert_int_eq(cd_canonicalize(in.ops, "/etc/x", &out, NULL, NULL), -EACCES);
}
END_TEST

/* ---- binding ------------------------------------------------------------ */

START_TEST(test_bind_workspace_roots)
{
	cd_fakefs_dir(fs, "/srv/b");
	roots[1] = "/srv/b";
	roots[2] = "/srv/c"; /* missing: bound as missing */
	in.n_workspace_roots = 3;
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, "src/gen", CD_ACCESS_DENY);
	build_ok();
	const struct cd_plan_path *p = get("/home/u/ws");
	ck_assert_int_eq(p->access, CD_ACCESS_WRITE);
	ck_assert_int_eq(p->origin, CD_ORIGIN_ENTRY);
	ck_assert_int_eq(p->entry_index, 0);
	ck_assert_int_eq(p->type, CD_FT_DIR);
	ck_assert_ptr_nonnull(strstr(p->why, ":workspace_roots"));
	ck_assert_int_eq(get("/srv/b")->access, CD_ACCESS_WRITE);
	ck_assert_int_eq(get("/srv/c")->type, CD_FT_MISSING);
	p = get("/home/u/ws/src/gen");
	ck_assert_int_eq(p->access, CD_ACCESS_DENY);
	ck_assert_int_eq(p->entry_index, 1);
	ck_assert_ptr_nonnull(strstr(p->why, ":workspace_roots/src/gen"));
	ck_assert_int_eq(get("/srv/b/src/gen")->type, CD_FT_MISSING);
	ck_assert_str_eq(plan->cwd, "/home/u/ws");
	ck_assert_ptr_null(plan->notes[0]);
}
END_TEST

START_TEST(test_bind_no_workspace_roots)
{
	in.n_workspace_roots = 0;
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	/* Never falls back to the cwd. */
	ck_assert_ptr_null(find("/home/u/ws"));
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/x", NULL), CD_ACCESS_READ);
	ck_assert(has_note(
		":workspace_roots entry 1 binds to nothing: no workspace roots were given"));
	/* Only "/" and /dev/null. */
	ck_assert_uint_eq(plan->n_paths, 2);
}
END_TEST

START_TEST(test_bind_tmpdir)
{
	add_special(CD_SPECIAL_TMPDIR, NULL, CD_ACCESS_WRITE);
	cd_fakefs_dir(fs, "/var/tmp/me");
	in.tmpdir = "/var/tmp/me/";
	build_ok();
	ck_assert_int_eq(get("/var/tmp/me")->access, CD_ACCESS_WRITE);
	ck_assert_ptr_null(plan->notes[0]);
	plan = cd_plan_free(plan);

	in.tmpdir = NULL;
	build_ok();
	ck_assert(has_note(":tmpdir entry 0 skipped: TMPDIR is not set"));
	ck_assert_ptr_null(find("/var/tmp/me"));
	plan = cd_plan_free(plan);

	in.tmpdir = "";
	build_ok();
	ck_assert(has_note("TMPDIR is not set"));
	plan = cd_plan_free(plan);

	in.tmpdir = "var/tmp";
	build_ok();
	ck_assert(has_note("TMPDIR 'var/tmp' is not absolute"));
	ck_assert_uint_eq(plan->n_paths, 1); /* /dev/null only */
}
END_TEST

START_TEST(test_bind_slash_tmp)
{
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/tmp")->access, CD_ACCESS_WRITE);
	ck_assert_ptr_nonnull(strstr(get("/tmp")->why, ":slash_tmp"));
	plan = cd_plan_free(plan);

	cd_fakefs_free(fs);
	fs = cd_fakefs_new();
	in.ops = cd_fakefs_ops(fs);
	cd_fakefs_dir(fs, "/home/u/ws");
	build_ok();
	ck_assert_ptr_null(find("/tmp"));
	ck_assert(has_note(":slash_tmp entry 0 skipped: /tmp is not a directory"));
	plan = cd_plan_free(plan);

	cd_fakefs_file(fs, "/tmp", "not a dir");
	build_ok();
	ck_assert_ptr_null(find("/tmp"));
	ck_assert(has_note("/tmp is not a directory"));
}
END_TEST

START_TEST(test_bind_minimal)
{
	static const char *const mins[] = { "/usr", "/etc", "/nix/store", "/lib64", "/bin", NULL };
	cd_fakefs_file(fs, "/opt", "a file, not a directory");
	add_special(CD_SPECIAL_MINIMAL, NULL, CD_ACCESS_READ);
	in.minimal_paths = mins;
	build_ok();
	ck_assert_int_eq(get("/usr")->access, CD_ACCESS_READ);
	ck_assert_int_eq(get("/etc")->access, CD_ACCESS_READ);
	/* Symlinked ones bind by their target. */
	ck_assert_int_eq(get("/usr/lib64")->access, CD_ACCESS_READ);
	ck_assert_int_eq(get("/usr/bin")->access, CD_ACCESS_READ);
	ck_assert_ptr_null(find("/nix/store"));
	ck_assert_ptr_null(find("/lib64"));
	ck_assert(!plan->full_read);
	ck_assert_uint_eq(plan->n_paths, 5);
	plan = cd_plan_free(plan);

	/* The Linux default set, of which this tree has /usr, /etc, /bin, /lib64. */
	in.minimal_paths = NULL;
	build_ok();
	ck_assert_ptr_nonnull(find("/usr"));
	ck_assert_ptr_nonnull(find("/etc"));
	ck_assert_ptr_null(find("/lib"));
	ck_assert_ptr_null(find("/sbin"));
	ck_assert_uint_eq(plan->n_paths, 5);
}
END_TEST

START_TEST(test_bind_unknown_and_glob)
{
	struct cd_fs_entry e = {
		.kind = CD_ENTRY_SPECIAL,
		.special = CD_SPECIAL_UNKNOWN,
		.path = (char *)":future_thing",
		.access = CD_ACCESS_WRITE,
	};
	cd_profile_add_entry(prof, &e);
	e = (struct cd_fs_entry){ .kind = CD_ENTRY_GLOB,
				  .path = (char *)"**/*.env",
				  .access = CD_ACCESS_DENY };
	cd_profile_add_entry(prof, &e);
	build_ok();
	ck_assert(has_note("unknown special path :future_thing ignored"));
	ck_assert(plan->has_globs);
	ck_assert(has_note("glob entry 1 (**/*.env) matches nothing under /home/u/ws/**/*.env"));
	ck_assert_uint_eq(plan->n_paths, 1);
}
END_TEST

static void add_glob(const char *pattern)
{
	struct cd_fs_entry e = { .kind = CD_ENTRY_GLOB,
				 .path = (char *)pattern,
				 .access = CD_ACCESS_DENY };
	cd_profile_add_entry(prof, &e);
}

/* Matches become deny paths with the entry's reason; relative = under cwd. */
START_TEST(test_bind_glob_matches)
{
	cd_fakefs_file(fs, "/home/u/ws/.env", "S=1");
	cd_fakefs_file(fs, "/home/u/ws/src/app/.env.local", "S=2");
	cd_fakefs_file(fs, "/home/u/ws/src/app/main.c", NULL);
	cd_fakefs_file(fs, "/home/u/other/.env", "S=3");
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_glob("**/.env*");
	build_ok();
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/.env", NULL), CD_ACCESS_DENY);
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/src/app/.env.local", NULL),
			 CD_ACCESS_DENY);
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/src/app/main.c", NULL), CD_ACCESS_WRITE);
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/other/.env", NULL), CD_ACCESS_READ);
	const struct cd_plan_path *pp = find("/home/u/ws/.env");
	ck_assert_ptr_nonnull(pp);
	ck_assert_str_eq(pp->why, "entry 2 (**/.env*, deny)");
	ck_assert(!plan->fs_unrestricted);
}
END_TEST

/* codex-project-roots:// expands once per workspace root, none with none. */
START_TEST(test_bind_glob_project_roots)
{
	cd_fakefs_file(fs, "/home/u/ws/a.key", NULL);
	cd_fakefs_file(fs, "/home/u/other/b.key", NULL);
	cd_fakefs_file(fs, "/home/u/other/sub/c.key", NULL);
	roots[1] = "/home/u/other";
	in.n_workspace_roots = 2;
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_glob("codex-project-roots://*.key");
	build_ok();
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/a.key", NULL), CD_ACCESS_DENY);
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/other/b.key", NULL), CD_ACCESS_DENY);
	/* '*' stays within one component. */
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/other/sub/c.key", NULL), CD_ACCESS_READ);
	plan = cd_plan_free(plan);

	in.n_workspace_roots = 0;
	build_ok();
	ck_assert(has_note("glob entry 1 (codex-project-roots://*.key) binds to nothing"));
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/a.key", NULL), CD_ACCESS_READ);
}
END_TEST

/* A literal pattern names one path, even a missing one; errors name the entry. */
START_TEST(test_bind_glob_literal_and_errors)
{
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_glob("/home/u/ws/not-yet");
	build_ok();
	const struct cd_plan_path *pp = find("/home/u/ws/not-yet");
	ck_assert_ptr_nonnull(pp);
	ck_assert_int_eq(pp->type, CD_FT_MISSING);
	ck_assert_int_eq(pp->access, CD_ACCESS_DENY);
	plan = cd_plan_free(plan);

	add_glob("/*/secret");
	build_fails(-EINVAL, "entry 2: glob pattern /*/secret would scan the whole file system");
}
END_TEST

/*
 * A symlink that matches is not a match: one a sandboxed process planted
 * in the workspace must neither refuse later runs nor redirect a deny.
 */
START_TEST(test_bind_glob_symlink_match)
{
	cd_fakefs_symlink(fs, "/home/u/ws/key.pem", "/etc/ssl-key");
	cd_fakefs_file(fs, "/etc/ssl-key", NULL);
	cd_fakefs_file(fs, "/home/u/ws/real.pem", NULL);
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_glob("*.pem");
	build_ok();
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/real.pem", NULL), CD_ACCESS_DENY);
	ck_assert_int_eq(cd_plan_access(plan, "/etc/ssl-key", NULL), CD_ACCESS_READ);
	ck_assert_ptr_null(find("/home/u/ws/key.pem"));
}
END_TEST

START_TEST(test_bind_input_errors)
{
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	in.cwd = "relative";
	build_fails(-EINVAL, "cwd relative is not an absolute path");
	free(err);
	err = NULL;
	in.cwd = "/";
	roots[0] = "ws";
	build_fails(-EINVAL, "workspace root ws is not an absolute path");
}
END_TEST

START_TEST(test_bind_cwd_canonical)
{
	cd_fakefs_symlink(fs, "/w", "home/u/ws");
	in.cwd = "/w/src";
	build_ok();
	ck_assert_str_eq(plan->cwd, "/home/u/ws/src");
}
END_TEST

/*
 * Many entries, in reverse order and repeated: sorted, one path each, the
 * tie rule as if each had been added in turn (deny > write > read, the
 * first on equal access). Entries are appended and sorted once, not
 * inserted one by one (20,000 took seconds).
 */
START_TEST(test_bind_many_entries)
{
	enum {
		N = 20000
	};
	char path[64];
	for (int i = N - 1; i >= 0; i--) {
		snprintf(path, sizeof(path), "/home/u/other/e%05d", i);
		add_path(path, CD_ACCESS_READ);
	}
	/* e00007: read, then write, then read again: write wins, from the second entry. */
	add_path("/home/u/other/e00007", CD_ACCESS_WRITE);
	add_path("/home/u/other/e00007", CD_ACCESS_READ);
	/* e00009: deny wins over an earlier read. */
	add_path("/home/u/other/e00009", CD_ACCESS_DENY);
	/* e00011: read twice: the first entry stays. */
	add_path("/home/u/other/e00011", CD_ACCESS_READ);
	build_ok();
	size_t n = 0;
	for (size_t i = 0; i < plan->n_paths; i++)
		n += cd_startswith(plan->paths[i].path, "/home/u/other/e");
	ck_assert_uint_eq(n, N);
	ck_assert_int_eq(get("/home/u/other/e00007")->access, CD_ACCESS_WRITE);
	ck_assert_int_eq(get("/home/u/other/e00007")->entry_index, N);
	ck_assert_int_eq(get("/home/u/other/e00009")->access, CD_ACCESS_DENY);
	ck_assert_int_eq(get("/home/u/other/e00009")->entry_index, N + 2);
	ck_assert_int_eq(get("/home/u/other/e00011")->access, CD_ACCESS_READ);
	ck_assert_int_eq(get("/home/u/other/e00011")->entry_index, N - 1 - 11);
	ck_assert_ptr_eq(cd_plan_find(plan, "/home/u/other/e19999"), get("/home/u/other/e19999"));
}
END_TEST

START_TEST(test_bind_dev_null)
{
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	build_ok();
	const struct cd_plan_path *p = get("/dev/null");
	ck_assert_int_eq(p->access, CD_ACCESS_WRITE);
	ck_assert_int_eq(p->origin, CD_ORIGIN_IMPLICIT);
	ck_assert_int_eq(p->entry_index, -1);
	ck_assert_int_eq(p->type, CD_FT_OTHER);
	plan = cd_plan_free(plan);

	/* An explicit deny still wins the tie. */
	add_path("/dev/null", CD_ACCESS_DENY);
	build_ok();
	p = get("/dev/null");
	ck_assert_int_eq(p->access, CD_ACCESS_DENY);
	ck_assert_int_eq(p->origin, CD_ORIGIN_ENTRY);
}
END_TEST

START_TEST(test_bind_errors_propagate)
{
	cd_fakefs_symlink(fs, "/home/u/loop", "loop");
	add_path("/home/u/loop/x", CD_ACCESS_READ);
	build_fails(-ELOOP, "cannot resolve /home/u/loop/x: too many levels of symbolic links");
	free(err);
	err = NULL;

	cd_profile_free(prof);
	prof = cd_xcalloc(1, sizeof(*prof));
	add_path("/etc/secret", CD_ACCESS_READ);
	cd_fakefs_fail(fs, "/etc/secret", EACCES);
	build_fails(-EACCES, "/etc/secret");
}
END_TEST

/* ---- precedence --------------------------------------------------------- */

START_TEST(test_precedence_nested)
{
	cd_fakefs_dir(fs, "/a/b/c");
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_path("/a/b/c", CD_ACCESS_READ);
	add_path("/a", CD_ACCESS_WRITE);
	add_path("/a/b", CD_ACCESS_DENY);
	build_ok();
	static const struct {
		const char *path;
		enum cd_access want;
		const char *rule;
	} table[] = {
		{ "/", CD_ACCESS_READ, "/" },
		{ "/etc/passwd", CD_ACCESS_READ, "/" },
		{ "/a", CD_ACCESS_WRITE, "/a" },
		{ "/a/x/y", CD_ACCESS_WRITE, "/a" },
		{ "/ab", CD_ACCESS_READ, "/" }, /* component-wise, not by prefix */
		{ "/a/b", CD_ACCESS_DENY, "/a/b" },
		{ "/a/b/d", CD_ACCESS_DENY, "/a/b" },
		{ "/a/b/c", CD_ACCESS_READ, "/a/b/c" },
		{ "/a/b/c/d/e", CD_ACCESS_READ, "/a/b/c" },
		{ "/dev/null", CD_ACCESS_WRITE, "/dev/null" },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(table); i++) {
		const struct cd_plan_path *rule = NULL;
		ck_assert_msg(cd_plan_access(plan, table[i].path, &rule) == table[i].want, "%s",
			      table[i].path);
		ck_assert_ptr_nonnull(rule);
		ck_assert_str_eq(rule->path, table[i].rule);
	}
	ck_assert_int_eq(get("/a")->parent_access, CD_ACCESS_READ);
	ck_assert_int_eq(get("/a/b")->parent_access, CD_ACCESS_WRITE);
	ck_assert_int_eq(get("/a/b/c")->parent_access, CD_ACCESS_DENY);
	ck_assert_int_eq(get("/")->parent_access, CD_ACCESS_DENY);
	ck_assert(!get("/a")->carve_out);
	ck_assert(get("/a/b")->carve_out);
	ck_assert(!get("/a/b/c")->carve_out);
	ck_assert(plan->has_carve_outs);
	ck_assert(plan->has_deny_carve_outs);
	ck_assert(plan->full_read);
	ck_assert(!plan->fs_unrestricted);
}
END_TEST

START_TEST(test_precedence_no_match)
{
	cd_fakefs_dir(fs, "/data");
	add_path("/data", CD_ACCESS_READ);
	build_ok();
	const struct cd_plan_path *rule = (const void *)1;
	ck_assert_int_eq(cd_plan_access(plan, "/etc", &rule), CD_ACCESS_DENY);
	ck_assert_ptr_null(rule);
	ck_assert_int_eq(cd_plan_access(plan, "/", NULL), CD_ACCESS_DENY);
	ck_assert_int_eq(cd_plan_access(plan, "/data/x", NULL), CD_ACCESS_READ);
	ck_assert_int_eq(get("/data")->parent_access, CD_ACCESS_DENY);
	ck_assert(!get("/data")->carve_out);
	ck_assert(!plan->full_read);
	ck_assert(!plan->has_carve_outs);
	ck_assert(!plan->has_deny_carve_outs);
}
END_TEST

/* Same path bound by several entries: deny > write > read, whatever the order. */
static const enum cd_access tie_orders[][3] = {
	{ CD_ACCESS_READ, CD_ACCESS_WRITE, CD_ACCESS_DENY },
	{ CD_ACCESS_DENY, CD_ACCESS_WRITE, CD_ACCESS_READ },
	{ CD_ACCESS_WRITE, CD_ACCESS_DENY, CD_ACCESS_READ },
	{ CD_ACCESS_READ, CD_ACCESS_WRITE, CD_ACCESS_READ },
	{ CD_ACCESS_WRITE, CD_ACCESS_READ, CD_ACCESS_READ },
	{ CD_ACCESS_READ, CD_ACCESS_READ, CD_ACCESS_READ },
};

START_TEST(test_precedence_ties)
{
	enum cd_access want = CD_ACCESS_READ;
	int want_index = 0;
	cd_fakefs_dir(fs, "/data");
	/* The same directory, named directly, through a symlink and via a workspace root. */
	cd_fakefs_symlink(fs, "/etc/data-link", "/data");
	roots[0] = "/data";
	add_path("/data", tie_orders[_i][0]);
	add_path("/etc/data-link", tie_orders[_i][1]);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, tie_orders[_i][2]);
	for (int k = 2; k >= 0; k--) {
		if ((int)tie_orders[_i][k] >= (int)want) {
			want = tie_orders[_i][k];
			want_index = k;
		}
	}
	build_ok();
	const struct cd_plan_path *p = get("/data");
	ck_assert_int_eq(p->access, want);
	/* The winner's reason is kept (the first entry among equals). */
	ck_assert_int_eq(p->entry_index, want_index);
	char *why = cd_xasprintf("entry %d ", want_index);
	ck_assert_ptr_nonnull(strstr(p->why, why));
	free(why);
	ck_assert_uint_eq(plan->n_paths, 2 + (want == CD_ACCESS_WRITE ? 3 : 0));
}
END_TEST

START_TEST(test_plan_access_unrestricted)
{
	prof->type = CD_PROFILE_DISABLED;
	build_ok();
	ck_assert_int_eq(cd_plan_access(plan, "/anything", NULL), CD_ACCESS_WRITE);
}
END_TEST

/* ---- protected metadata ------------------------------------------------- */

START_TEST(test_protected_basic)
{
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	const struct cd_plan_path *p = get("/home/u/ws/.git");
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert_int_eq(p->origin, CD_ORIGIN_PROTECTED);
	ck_assert_int_eq(p->type, CD_FT_DIR);
	ck_assert_int_eq(p->entry_index, -1);
	ck_assert_int_eq(p->parent_access, CD_ACCESS_WRITE);
	ck_assert(p->carve_out);
	ck_assert_ptr_nonnull(strstr(p->why, "protected metadata under writable /home/u/ws"));
	/* Missing ones are protected too, so they cannot be created. */
	p = get("/home/u/ws/.codex");
	ck_assert_int_eq(p->type, CD_FT_MISSING);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert_int_eq(get("/home/u/ws/.agents")->type, CD_FT_MISSING);
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/.git/config", NULL), CD_ACCESS_READ);
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/src/x.c", NULL), CD_ACCESS_WRITE);
	ck_assert(plan->has_carve_outs);
	ck_assert(!plan->has_deny_carve_outs);
	ck_assert_uint_eq(count_origin(CD_ORIGIN_PROTECTED), 3);
}
END_TEST

START_TEST(test_protected_not_under_root_or_files)
{
	cd_fakefs_file(fs, "/home/u/notes.txt", "x");
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_WRITE);
	add_path("/home/u/notes.txt", CD_ACCESS_WRITE);
	cd_fakefs_dir(fs, "/.git");
	build_ok();
	ck_assert_uint_eq(count_origin(CD_ORIGIN_PROTECTED), 0);
	ck_assert_ptr_null(find("/.git"));
	/* "/" writable with nothing narrower: no restriction at all. */
	ck_assert(plan->fs_unrestricted);
	ck_assert(plan->full_read);
}
END_TEST

START_TEST(test_protected_explicit_entries)
{
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	/* An explicit write exempts .git; an explicit deny on .codex stays a deny. */
	add_special(CD_SPECIAL_PROJECT_ROOTS, ".git", CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, ".codex", CD_ACCESS_DENY);
	build_ok();
	const struct cd_plan_path *p = get("/home/u/ws/.git");
	ck_assert_int_eq(p->access, CD_ACCESS_WRITE);
	ck_assert_int_eq(p->origin, CD_ORIGIN_ENTRY);
	ck_assert(!p->carve_out);
	p = get("/home/u/ws/.codex");
	ck_assert_int_eq(p->access, CD_ACCESS_DENY);
	ck_assert_int_eq(p->origin, CD_ORIGIN_ENTRY);
	ck_assert(plan->has_deny_carve_outs);
	ck_assert_int_eq(get("/home/u/ws/.agents")->origin, CD_ORIGIN_PROTECTED);
	/* .git is a writable directory now, so it gets protected names of its own. */
	ck_assert_int_eq(get("/home/u/ws/.git/.git")->origin, CD_ORIGIN_PROTECTED);
}
END_TEST

START_TEST(test_protected_workspace_write_shape)
{
	/* The built-in workspace-write entries: read entries for the names. */
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, ".git", CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, ".codex", CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, ".agents", CD_ACCESS_READ);
	build_ok();
	ck_assert_int_eq(get("/home/u/ws/.git")->origin, CD_ORIGIN_ENTRY);
	ck_assert_int_eq(get("/home/u/ws/.git")->entry_index, 3);
	ck_assert_int_eq(get("/home/u/ws/.codex")->type, CD_FT_MISSING);
	/* /tmp is writable too and gets its own protected names. */
	ck_assert_int_eq(get("/tmp/.git")->origin, CD_ORIGIN_PROTECTED);
	ck_assert_int_eq(get("/tmp/.codex")->type, CD_FT_MISSING);
	ck_assert_uint_eq(count_origin(CD_ORIGIN_PROTECTED), 3);
}
END_TEST

START_TEST(test_protected_gitdir)
{
	/* A linked worktree: .git is a file pointing into the main repo. */
	cd_fakefs_dir(fs, "/home/u/main/.git/worktrees/wt");
	cd_fakefs_file(fs, "/home/u/main/.git/worktrees/wt/commondir", "../..\n");
	cd_fakefs_dir(fs, "/home/u/wt");
	cd_fakefs_file(fs, "/home/u/wt/.git", "gitdir: ../main/.git/worktrees/wt\n");
	roots[0] = "/home/u/wt";
	roots[1] = "/home/u/main";
	in.n_workspace_roots = 2;
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_path("/home/u/wt", CD_ACCESS_WRITE);
	add_path("/home/u/main/.git/worktrees", CD_ACCESS_WRITE);
	build_ok();
	const struct cd_plan_path *p = get("/home/u/wt/.git");
	ck_assert_int_eq(p->type, CD_FT_REG);
	ck_assert_int_eq(p->origin, CD_ORIGIN_PROTECTED);
	p = get("/home/u/main/.git/worktrees/wt");
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert_int_eq(p->origin, CD_ORIGIN_GITDIR);
	ck_assert_int_eq(p->type, CD_FT_DIR);
	ck_assert(p->carve_out);
	/* commondir ("../..") resolves to /home/u/main/.git: not writable, so not added. */
	ck_assert_ptr_null(find("/home/u/main/.git"));
	ck_assert_uint_eq(count_origin(CD_ORIGIN_GITDIR), 1);
}
END_TEST

/* The pointer is read as git reads it: the target it protects is git's. */
START_TEST(test_protected_gitdir_like_git)
{
	static const struct {
		const char *content;
		const char *want; /* protected target, NULL: not a pointer */
	} cases[] = {
		{ "gitdir: /g/store \n", "/g/store " },	   /* a trailing space is kept */
		{ "gitdir:  /g/decoy\n", "/w/ /g/decoy" }, /* relative: " /g/decoy" */
		{ "gitdir: /g/crlf\r\n\r\n", "/g/crlf" },  /* CRs and LFs go */
		{ "gitdir: /g/tab\t\n", "/g/tab\t" },	   /* a tab stays */
		{ "gitdir:/g/nospace\n", NULL },	   /* no space: not git's format */
		{ "gitdir: /g/a\nmore\n", "/g/a\nmore" },  /* one path, newline and all */
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(cases); i++) {
		teardown();
		setup();
		cd_fakefs_dir(fs, "/g");
		cd_fakefs_dir(fs, "/w");
		cd_fakefs_file(fs, "/w/.git", cases[i].content);
		roots[0] = "/w";
		in.n_workspace_roots = 1;
		add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
		add_path("/w", CD_ACCESS_WRITE);
		add_path("/g", CD_ACCESS_WRITE);
		build_ok();
		if (!cases[i].want) {
			ck_assert_uint_eq(count_origin(CD_ORIGIN_GITDIR), 0);
			continue;
		}
		const struct cd_plan_path *p = find(cases[i].want);
		ck_assert_msg(p && p->origin == CD_ORIGIN_GITDIR, "case %zu: %s not protected", i,
			      cases[i].want);
		ck_assert_int_eq(p->access, CD_ACCESS_READ);
		ck_assert_uint_eq(count_origin(CD_ORIGIN_GITDIR), 1);
	}
}
END_TEST

START_TEST(test_protected_gitdir_commondir)
{
	cd_fakefs_dir(fs, "/w/repo/.git/worktrees/wt");
	cd_fakefs_file(fs, "/w/repo/.git/worktrees/wt/commondir", "../..");
	cd_fakefs_file(fs, "/w/wt/.git", "gitdir: /w/repo/.git/worktrees/wt");
	roots[0] = "/w";
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_path("/w/wt", CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/w/wt/.git")->type, CD_FT_REG);
	const struct cd_plan_path *p = get("/w/repo/.git/worktrees/wt");
	ck_assert_int_eq(p->origin, CD_ORIGIN_GITDIR);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	p = get("/w/repo/.git");
	ck_assert_int_eq(p->origin, CD_ORIGIN_GITDIR);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert_ptr_nonnull(strstr(p->why, "commondir"));
	ck_assert_int_eq(cd_plan_access(plan, "/w/repo/.git/objects/ab", NULL), CD_ACCESS_READ);
	ck_assert_int_eq(cd_plan_access(plan, "/w/repo/src", NULL), CD_ACCESS_WRITE);
}
END_TEST

START_TEST(test_protected_gitdir_named_read)
{
	/*
	 * The built-in workspace-write profile names :workspace_roots/.git with
	 * read access. That entry must not stop the gitdir: target (a bare
	 * repository beside the worktree, as in the "bare + worktree" layout)
	 * and its commondir from being protected too.
	 */
	cd_fakefs_dir(fs, "/w/.bare/hooks");
	cd_fakefs_dir(fs, "/w/.bare/worktrees/main");
	cd_fakefs_file(fs, "/w/.bare/worktrees/main/commondir", "../..\n");
	cd_fakefs_file(fs, "/w/.git", "gitdir: ./.bare/worktrees/main\n");
	roots[0] = "/w";
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, ".git", CD_ACCESS_READ);
	build_ok();
	const struct cd_plan_path *p = get("/w/.git");
	ck_assert_int_eq(p->origin, CD_ORIGIN_ENTRY);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	p = get("/w/.bare/worktrees/main");
	ck_assert_int_eq(p->origin, CD_ORIGIN_GITDIR);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	p = get("/w/.bare");
	ck_assert_int_eq(p->origin, CD_ORIGIN_GITDIR);
	ck_assert(p->carve_out);
	ck_assert_int_eq(cd_plan_access(plan, "/w/.bare/hooks/pre-commit", NULL), CD_ACCESS_READ);
	ck_assert_int_eq(cd_plan_access(plan, "/w/src/main.c", NULL), CD_ACCESS_WRITE);

	/* A write entry naming .git exempts it, and with it what it points to. */
	prof->entries[2].access = CD_ACCESS_WRITE;
	plan = cd_plan_free(plan);
	build_ok();
	ck_assert_uint_eq(count_origin(CD_ORIGIN_GITDIR), 0);
}
END_TEST

START_TEST(test_protected_gitfile_not_pointer)
{
	cd_fakefs_file(fs, "/w/.git", "something else\n");
	roots[0] = "/w";
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/w/.git")->type, CD_FT_REG);
	ck_assert_uint_eq(count_origin(CD_ORIGIN_GITDIR), 0);
}
END_TEST

static const char *const protected_names[] = { ".git", ".codex", ".agents" };

START_TEST(test_protected_symlink_refused)
{
	char *link = cd_xasprintf("/home/u/ws/%s", protected_names[_i]);
	char *want = cd_xasprintf("protected path %s is a symlink", link);
	if (_i == 0) {
		cd_fakefs_free(fs);
		fs = cd_fakefs_new();
		in.ops = cd_fakefs_ops(fs);
		cd_fakefs_dir(fs, "/home/u/ws");
	}
	cd_fakefs_dir(fs, "/elsewhere");
	cd_fakefs_symlink(fs, link, "/elsewhere");
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_fails(-EINVAL, want);
	ck_assert_ptr_nonnull(strstr(err, "replace it with a directory"));
	free(err);
	err = NULL;

	/*
	 * Granting it write explicitly lifts the protection, but the bind then
	 * crosses a symlink the sandbox can rewrite: still refused, for that.
	 */
	char *sub = cd_xstrdup(protected_names[_i]);
	add_special(CD_SPECIAL_PROJECT_ROOTS, sub, CD_ACCESS_WRITE);
	free(sub);
	free(want);
	want = cd_xasprintf("crosses symlink %s inside writable root /home/u/ws", link);
	build_fails(-EINVAL, want);
	free(err);
	err = NULL;

	/* Write through a link in a read-only place is fine (fresh tree, no protected link). */
	prof->entries[1].access = CD_ACCESS_READ;
	add_path("/ro/link", CD_ACCESS_WRITE);
	cd_fakefs_free(fs);
	fs = cd_fakefs_new();
	in.ops = cd_fakefs_ops(fs);
	cd_fakefs_dir(fs, "/home/u/ws");
	cd_fakefs_dir(fs, "/ro/real");
	cd_fakefs_symlink(fs, "/ro/link", "real");
	build_ok();
	ck_assert_int_eq(get("/ro/real")->access, CD_ACCESS_WRITE);
	ck_assert_int_eq(get("/ro/real/.git")->type, CD_FT_MISSING);
	free(link);
	free(want);
}
END_TEST

/* ---- symlink safety ----------------------------------------------------- */

START_TEST(test_symlink_planted_in_writable)
{
	/* /tmp is writable, so /tmp/ws -> /etc could have been planted by the sandbox. */
	cd_fakefs_symlink(fs, "/tmp/ws", "/etc");
	roots[0] = "/tmp/ws";
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_fails(-EINVAL, "cannot bind /tmp/ws: it crosses symlink /tmp/ws inside writable root "
			     "/tmp, which a sandboxed process could have planted");
}
END_TEST

START_TEST(test_symlink_planted_deny_path)
{
	/* A read-only carve-out reached through a link in the writable root is unsafe too. */
	cd_fakefs_dir(fs, "/home/u/ws/real");
	cd_fakefs_symlink(fs, "/home/u/ws/l", "real");
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_path("/home/u/ws/l/secret", CD_ACCESS_DENY);
	build_fails(-EINVAL, "crosses symlink /home/u/ws/l inside writable root /home/u/ws");
}
END_TEST

START_TEST(test_symlink_in_readonly_allowed)
{
	/* /home/link lives in a read-only region: the sandbox cannot replace it. */
	cd_fakefs_symlink(fs, "/home/link", "u/ws");
	roots[0] = "/home/link";
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/home/u/ws")->access, CD_ACCESS_WRITE);
	ck_assert_ptr_null(find("/home/link"));
	ck_assert_int_eq(get("/home/u/ws/.git")->origin, CD_ORIGIN_PROTECTED);
}
END_TEST

START_TEST(test_symlink_in_readonly_carve_out_allowed)
{
	/* A link inside a read-only carve-out of a writable root cannot be rewritten. */
	cd_fakefs_dir(fs, "/home/u/ws/vendor/real");
	cd_fakefs_symlink(fs, "/home/u/ws/vendor/l", "real");
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_path("/home/u/ws/vendor", CD_ACCESS_READ);
	add_path("/home/u/ws/vendor/l/x", CD_ACCESS_DENY);
	build_ok();
	ck_assert_int_eq(get("/home/u/ws/vendor/real/x")->access, CD_ACCESS_DENY);
}
END_TEST

/* ---- protection above nested workspaces --------------------------------- */

START_TEST(test_above_nested_workspace)
{
	/* /tmp/x/y/ws under a writable /tmp: git looks in /tmp/x/y and /tmp/x too. */
	cd_fakefs_dir(fs, "/tmp/x/y/ws/src");
	cd_fakefs_dir(fs, "/tmp/x/.git");
	roots[0] = "/tmp/x/y/ws";
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	build_ok();
	const struct cd_plan_path *p = get("/tmp/x/y/.git");
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert_int_eq(p->type, CD_FT_MISSING);
	ck_assert_int_eq(p->origin, CD_ORIGIN_PROTECTED);
	ck_assert(p->carve_out);
	ck_assert_ptr_nonnull(strstr(p->why, "above writable /tmp/x/y/ws"));
	ck_assert_int_eq(get("/tmp/x/y/.codex")->type, CD_FT_MISSING);
	ck_assert_int_eq(get("/tmp/x/y/.agents")->type, CD_FT_MISSING);
	/* An existing repository up there is read-only, not masked. */
	p = get("/tmp/x/.git");
	ck_assert_int_eq(p->type, CD_FT_DIR);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert_int_eq(cd_plan_access(plan, "/tmp/x/.git/config", NULL), CD_ACCESS_READ);
	/* /tmp itself is the top of its region; "/" and /home are not writable. */
	ck_assert_ptr_nonnull(strstr(get("/tmp/.git")->why, "under writable /tmp"));
	ck_assert_ptr_null(find("/.git"));
	/* Three names in each of /tmp, /tmp/x, /tmp/x/y and the workspace. */
	ck_assert_uint_eq(count_origin(CD_ORIGIN_PROTECTED), 12);
}
END_TEST

START_TEST(test_above_only_writable)
{
	/* /w writable, /w/a/ro read-only, /w/a/ro/rw writable again. */
	cd_fakefs_dir(fs, "/w/a/ro/rw");
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_path("/w", CD_ACCESS_WRITE);
	add_path("/w/a/ro", CD_ACCESS_READ);
	add_path("/w/a/ro/rw", CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/w/a/ro/rw/.git")->origin, CD_ORIGIN_PROTECTED);
	/* Read-only: nothing can be planted there, and nothing is mounted. */
	ck_assert_ptr_null(find("/w/a/ro/.git"));
	/* Above the read-only gap, /w/a is writable: git walks up through it. */
	ck_assert_ptr_nonnull(strstr(get("/w/a/.git")->why, "above writable /w/a/ro/rw"));
	ck_assert_ptr_nonnull(strstr(get("/w/.git")->why, "under writable /w"));
	/* /home/u/ws (the workspace root) is read-only here: nothing there. */
	ck_assert_ptr_null(find("/home/u/ws/.codex"));
}
END_TEST

START_TEST(test_above_workspace_root_not_bound)
{
	/* A profile writing /tmp and not the workspace: the root is writable all the same. */
	cd_fakefs_dir(fs, "/tmp/x/ws");
	roots[0] = "/tmp/x/ws";
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	build_ok();
	const struct cd_plan_path *p = get("/tmp/x/ws/.git");
	ck_assert_int_eq(p->type, CD_FT_MISSING);
	ck_assert_ptr_nonnull(strstr(p->why, "under writable workspace root /tmp/x/ws"));
	ck_assert_ptr_nonnull(strstr(get("/tmp/x/.agents")->why, "above writable /tmp/x/ws"));
}
END_TEST

START_TEST(test_above_not_under_writable_slash)
{
	/* With "/" itself writable, names protect nothing: none above the workspace. */
	cd_fakefs_dir(fs, "/tmp/x/ws");
	roots[0] = "/tmp/x/ws";
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_path("/etc", CD_ACCESS_READ);
	build_ok();
	ck_assert_int_eq(get("/tmp/x/ws/.git")->origin, CD_ORIGIN_PROTECTED);
	ck_assert_ptr_null(find("/tmp/x/.git"));
	ck_assert_ptr_null(find("/tmp/.git"));
	ck_assert_uint_eq(count_origin(CD_ORIGIN_PROTECTED), 3);
}
END_TEST

START_TEST(test_above_uncreatable)
{
	/* Names the caller cannot create (nor the sandbox, running as it) are not masked. */
	cd_fakefs_dir(fs, "/tmp/x/ws");
	cd_fakefs_lock_dir(fs, "/tmp/x");
	roots[0] = "/tmp/x/ws";
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_ptr_null(find("/tmp/x/.git"));
	ck_assert(has_note("/tmp/x/.git is not masked: the caller cannot create names in /tmp/x"));
	/* An existing one is still made read-only. */
	cd_fakefs_dir(fs, "/tmp/x/.codex");
	plan = cd_plan_free(plan);
	build_ok();
	ck_assert_int_eq(get("/tmp/x/.codex")->type, CD_FT_DIR);
	ck_assert_ptr_null(find("/tmp/x/.agents"));
	ck_assert_int_eq(get("/tmp/x/ws/.agents")->type, CD_FT_MISSING);
}
END_TEST

/* ---- nested repositories ------------------------------------------------ */

static struct cd_nested_limits limits;

static void use_limits(size_t dirs, size_t entries, size_t depth, size_t repos, size_t gitlinks)
{
	limits = (struct cd_nested_limits){ dirs,  entries,  depth,
					    repos, gitlinks, CD_GIT_INDEX_BUDGET };
	in.limits = &limits;
}

START_TEST(test_nested_found)
{
	cd_fakefs_dir(fs, "/home/u/ws/vendor/a/.git/x/.git"); /* never entered */
	cd_fakefs_file(fs, "/home/u/ws/tools/b/.git", "gitdir: ../../.git/modules/b\n");
	cd_fakefs_dir(fs, "/home/u/ws/.git/modules/b");
	cd_fakefs_other(fs, "/home/u/ws/c/.git"); /* a concurrent run's mask, say */
	cd_fakefs_dir(fs, "/elsewhere/d/.git");
	cd_fakefs_symlink(fs, "/home/u/ws/link", "/elsewhere"); /* not followed */
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	const struct cd_plan_path *p = get("/home/u/ws/vendor/a/.git");
	ck_assert_int_eq(p->origin, CD_ORIGIN_NESTED);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert_int_eq(p->type, CD_FT_DIR);
	ck_assert(p->carve_out);
	ck_assert_ptr_nonnull(strstr(p->why, "nested repository below workspace root /home/u/ws"));
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/vendor/a/.git/config", NULL),
			 CD_ACCESS_READ);
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/vendor/a/src.c", NULL), CD_ACCESS_WRITE);
	ck_assert_ptr_null(find("/home/u/ws/vendor/a/.git/x/.git"));
	p = get("/home/u/ws/tools/b/.git");
	ck_assert_int_eq(p->origin, CD_ORIGIN_NESTED);
	ck_assert_int_eq(p->type, CD_FT_REG);
	/* Its gitdir lies in the read-only top .git: nothing more to add. */
	ck_assert_ptr_null(find("/home/u/ws/.git/modules/b"));
	ck_assert_int_eq(get("/home/u/ws/c/.git")->type, CD_FT_OTHER);
	ck_assert_ptr_null(find("/elsewhere/d/.git"));
	ck_assert_uint_eq(count_origin(CD_ORIGIN_NESTED), 3);
	/* The top one is the protected name it always was. */
	ck_assert_int_eq(get("/home/u/ws/.git")->origin, CD_ORIGIN_PROTECTED);
}
END_TEST

START_TEST(test_nested_gitdir_target)
{
	/* A nested worktree whose git directory lies elsewhere in the workspace. */
	cd_fakefs_dir(fs, "/home/u/ws/store/repo.git");
	cd_fakefs_file(fs, "/home/u/ws/wt/.git", "gitdir: /home/u/ws/store/repo.git\n");
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/home/u/ws/wt/.git")->origin, CD_ORIGIN_NESTED);
	const struct cd_plan_path *p = get("/home/u/ws/store/repo.git");
	ck_assert_int_eq(p->origin, CD_ORIGIN_GITDIR);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
}
END_TEST

START_TEST(test_nested_pruned)
{
	/* Read-only and denied subtrees are not listed (a listing would fail here). */
	cd_fakefs_dir(fs, "/home/u/ws/ro/x/.git");
	cd_fakefs_dir(fs, "/home/u/ws/ro/rw/y/.git");
	cd_fakefs_dir(fs, "/home/u/ws/secret/z/.git");
	cd_fakefs_fail(fs, "/home/u/ws/ro/x", EIO);
	cd_fakefs_fail(fs, "/home/u/ws/secret/z", EIO);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_path("/home/u/ws/ro", CD_ACCESS_READ);
	add_path("/home/u/ws/ro/rw", CD_ACCESS_WRITE);
	add_path("/home/u/ws/secret", CD_ACCESS_DENY);
	build_ok();
	ck_assert_ptr_null(find("/home/u/ws/ro/x/.git"));
	ck_assert_ptr_null(find("/home/u/ws/secret/z/.git"));
	/* A writable path inside the read-only one is scanned. */
	ck_assert_int_eq(get("/home/u/ws/ro/rw/y/.git")->origin, CD_ORIGIN_NESTED);
}
END_TEST

START_TEST(test_nested_symlink_refused)
{
	cd_fakefs_dir(fs, "/elsewhere/.git");
	cd_fakefs_symlink(fs, "/home/u/ws/sub/.git", "/elsewhere/.git");
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_fails(-EINVAL, "nested repository /home/u/ws/sub/.git is a symlink");
	ck_assert_ptr_nonnull(strstr(err, "--allow-degraded=nested-repositories"));
}
END_TEST

START_TEST(test_nested_bounds)
{
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	cd_fakefs_dir(fs, "/home/u/ws/a/b/c/d");
	cd_fakefs_dir(fs, "/home/u/ws/e/.git");
	cd_fakefs_dir(fs, "/home/u/ws/f/.git");
	/* Exactly at the bounds: 7 directories (src, a..d, e, f), 10 entries, depth 4. */
	use_limits(7, 10, 4, 2, 0);
	build_ok();
	ck_assert_uint_eq(count_origin(CD_ORIGIN_NESTED), 2);
	plan = cd_plan_free(plan);

	use_limits(6, 10, 4, 2, 0);
	build_fails(-E2BIG, "the workspace roots hold more than 6 directories");
	ck_assert_ptr_nonnull(strstr(err, "name a narrower workspace root, or pass "
					  "--allow-degraded=nested-repositories"));
	free(err);
	err = NULL;
	use_limits(7, 9, 4, 2, 0);
	build_fails(-E2BIG, "the workspace roots hold more than 9 entries");
	free(err);
	err = NULL;
	use_limits(7, 10, 3, 2, 0);
	build_fails(-E2BIG, "/home/u/ws/a/b/c/d is more than 3 directories below workspace "
			    "root /home/u/ws");
	free(err);
	err = NULL;
	use_limits(7, 10, 4, 1, 0);
	build_fails(-E2BIG, "more than 1 nested repositories (.git) below workspace root");
	free(err);
	err = NULL;

	/* The opt-down skips the scan, and says so. */
	in.skip_nested_scan = true;
	use_limits(1, 1, 1, 1, 0);
	build_ok();
	ck_assert_uint_eq(count_origin(CD_ORIGIN_NESTED), 0);
	ck_assert_ptr_nonnull(plan->degraded);
	ck_assert_ptr_nonnull(strstr(plan->degraded[0], "nested repositories NOT protected"));
	ck_assert_ptr_null(plan->degraded[1]);
}
END_TEST

START_TEST(test_nested_unlistable)
{
	cd_fakefs_dir(fs, "/home/u/ws/locked/x/.git");
	cd_fakefs_fail(fs, "/home/u/ws/locked", EACCES);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	/* Ours (or writable by us): the command could plant there, so refuse. */
	build_fails(-EACCES, "cannot list /home/u/ws/locked to find nested repositories");
	free(err);
	err = NULL;
	/* Not: neither can the command make anything there. */
	cd_fakefs_lock_dir(fs, "/home/u/ws/locked");
	build_ok();
	ck_assert(has_note("/home/u/ws/locked cannot be listed"));
	ck_assert_uint_eq(count_origin(CD_ORIGIN_NESTED), 0);
}
END_TEST

START_TEST(test_nested_inner_roots)
{
	/* Two roots, one inside the other: listed once. */
	cd_fakefs_dir(fs, "/home/u/ws/src/x/.git");
	roots[1] = "/home/u/ws/src";
	in.n_workspace_roots = 2;
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	use_limits(3, 100, 10, 10, 0); /* src, src/x and nothing more */
	build_ok();
	ck_assert_int_eq(get("/home/u/ws/src/x/.git")->origin, CD_ORIGIN_NESTED);
}
END_TEST

/* ---- submodules ---------------------------------------------------------- */

static void put32(struct cd_strbuf *sb, uint32_t v)
{
	char b[4] = { (char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v };
	cd_strbuf_append_n(sb, b, 4);
}

/* A version 2 entry (SHA-1 names of zeros); a name of "" is a split index's replacement. */
static void index_entry(struct cd_strbuf *sb, uint32_t mode, const char *name)
{
	size_t start = sb->len, n = strlen(name);
	for (int i = 0; i < 6; i++)
		put32(sb, 0);
	put32(sb, mode);
	for (int i = 0; i < 8; i++)
		put32(sb, 0);
	char flags[2] = { (char)(n >> 8), (char)n };
	cd_strbuf_append_n(sb, flags, 2);
	cd_strbuf_append_n(sb, name, n);
	do
		cd_strbuf_append_c(sb, '\0');
	while ((sb->len - start) % 8);
}

/*
 * A sparse index of size bytes at path: a header for n entries and, when n
 * is 0, one extension git does not know spanning the rest (as a sandbox can
 * plant in a repository of its own for the next run to read).
 */
static void sparse_index(const char *path, uint32_t n, uint64_t size)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "DIRC");
	put32(&sb, 2);
	put32(&sb, n);
	if (n == 0) {
		cd_strbuf_append(&sb, "ZZZZ");
		put32(&sb, (uint32_t)(size - 12 - 8 - 20));
	}
	cd_fakefs_file_sparse(fs, path, sb.buf, sb.len, size);
	cd_strbuf_done(&sb);
}

/* An index at path of n files (no gitlinks), n * 72 + 32 bytes. */
static void files_index(const char *path, size_t n)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "DIRC");
	put32(&sb, 2);
	put32(&sb, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		char name[8];
		snprintf(name, sizeof(name), "f%05zu", i % 100000);
		index_entry(&sb, 0100644, name);
	}
	for (int i = 0; i < 5; i++)
		put32(&sb, 0);
	cd_fakefs_file_bytes(fs, path, sb.buf, sb.len);
	cd_strbuf_done(&sb);
}

/* An index at path naming the given gitlinks (NULL-terminated), and a file "README". */
static void git_index(const char *path, const char *const *gitlinks)
{
	struct cd_strbuf sb = { 0 };
	size_t n = 0;
	while (gitlinks[n])
		n++;
	cd_strbuf_append(&sb, "DIRC");
	put32(&sb, 2);
	put32(&sb, (uint32_t)n + 1);
	index_entry(&sb, 0100644, "README");
	for (size_t i = 0; i < n; i++)
		index_entry(&sb, 0160000, gitlinks[i]);
	for (int i = 0; i < 5; i++)
		put32(&sb, 0);
	cd_fakefs_file_bytes(fs, path, sb.buf, sb.len);
	cd_strbuf_done(&sb);
}

START_TEST(test_submodules)
{
	static const char *const links[] = { "uninit",	 "populated", "pointer",  "gone/deep/sub",
					     "lib/file", "../out",    "a/.git/b", NULL };
	git_index("/home/u/ws/.git/index", links);
	cd_fakefs_dir(fs, "/home/u/ws/uninit");
	cd_fakefs_dir(fs, "/home/u/ws/populated/.git");
	cd_fakefs_file(fs, "/home/u/ws/pointer/.git", "gitdir: ../.git/modules/pointer\n");
	cd_fakefs_dir(fs, "/home/u/ws/.git/modules/pointer");
	cd_fakefs_file(fs, "/home/u/ws/lib/file", "x");
	/* .gitmodules (a work-tree file the sandbox may edit) is not what counts. */
	cd_fakefs_file(fs, "/home/u/ws/.gitmodules", "[submodule \"decoy\"]\n\tpath = decoy\n");
	cd_fakefs_dir(fs, "/home/u/ws/decoy");
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, ".git", CD_ACCESS_READ); /* as workspace-write */
	build_ok();
	const struct cd_plan_path *p = get("/home/u/ws/uninit/.git");
	ck_assert_int_eq(p->origin, CD_ORIGIN_SUBMODULE);
	ck_assert_int_eq(p->type, CD_FT_MISSING);
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert(p->carve_out);
	ck_assert_ptr_nonnull(strstr(p->why, "uninitialized submodule /home/u/ws/uninit (a "
					     "gitlink in /home/u/ws/.git/index)"));
	p = get("/home/u/ws/populated/.git");
	ck_assert_int_eq(p->origin, CD_ORIGIN_SUBMODULE);
	ck_assert_int_eq(p->type, CD_FT_DIR);
	ck_assert_int_eq(get("/home/u/ws/pointer/.git")->type, CD_FT_REG);
	/* The first missing directory on the way is denied: nothing can appear below. */
	p = get("/home/u/ws/gone");
	ck_assert_int_eq(p->access, CD_ACCESS_DENY);
	ck_assert_int_eq(p->type, CD_FT_MISSING);
	ck_assert(p->carve_out);
	ck_assert_ptr_nonnull(strstr(p->why, "missing submodule path /home/u/ws/gone/deep/sub"));
	ck_assert_ptr_null(find("/home/u/ws/gone/deep/sub/.git"));
	/* A file where the path needs a directory stays that file. */
	p = get("/home/u/ws/lib/file");
	ck_assert_int_eq(p->access, CD_ACCESS_READ);
	ck_assert_int_eq(p->type, CD_FT_REG);
	/* Paths git would not check out are left alone; so is .gitmodules. */
	ck_assert_ptr_null(find("/home/u/out"));
	ck_assert_ptr_null(find("/home/u/out/.git"));
	ck_assert_ptr_null(find("/home/u/ws/a"));
	ck_assert_ptr_null(find("/home/u/ws/decoy/.git"));
	ck_assert_uint_eq(count_origin(CD_ORIGIN_SUBMODULE), 5);
	ck_assert_uint_eq(count_origin(CD_ORIGIN_NESTED), 0);
}
END_TEST

START_TEST(test_submodules_recursive)
{
	/* A submodule's own submodules, through its git directory's index. */
	static const char *const top[] = { "sub", NULL };
	static const char *const inner[] = { "inner", NULL };
	git_index("/home/u/ws/.git/index", top);
	cd_fakefs_file(fs, "/home/u/ws/sub/.git", "gitdir: ../.git/modules/sub\n");
	git_index("/home/u/ws/.git/modules/sub/index", inner);
	cd_fakefs_dir(fs, "/home/u/ws/sub/inner");
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/home/u/ws/sub/.git")->origin, CD_ORIGIN_SUBMODULE);
	const struct cd_plan_path *p = get("/home/u/ws/sub/inner/.git");
	ck_assert_int_eq(p->origin, CD_ORIGIN_SUBMODULE);
	ck_assert_int_eq(p->type, CD_FT_MISSING);
	ck_assert_ptr_nonnull(strstr(p->why, "/home/u/ws/.git/modules/sub/index"));
}
END_TEST

START_TEST(test_submodules_of_nested_and_above)
{
	/* The repository above a nested workspace, and one nested in it, have gitlinks too. */
	static const char *const links[] = { "ws/m", NULL };
	static const char *const nested[] = { "n", NULL };
	cd_fakefs_dir(fs, "/tmp/x/ws/m");
	git_index("/tmp/x/.git/index", links);
	cd_fakefs_dir(fs, "/tmp/x/ws/v/.git");
	cd_fakefs_dir(fs, "/tmp/x/ws/v/n");
	git_index("/tmp/x/ws/v/.git/index", nested);
	roots[0] = "/tmp/x/ws";
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/tmp/x/.git")->type, CD_FT_DIR);
	ck_assert_int_eq(get("/tmp/x/ws/m/.git")->origin, CD_ORIGIN_SUBMODULE);
	ck_assert_int_eq(get("/tmp/x/ws/v/.git")->origin, CD_ORIGIN_NESTED);
	ck_assert_int_eq(get("/tmp/x/ws/v/n/.git")->origin, CD_ORIGIN_SUBMODULE);
}
END_TEST

START_TEST(test_submodules_refusals)
{
	static const char *const links[] = { "a/sub", NULL };
	git_index("/home/u/ws/.git/index", links);
	cd_fakefs_dir(fs, "/elsewhere/sub/.git");
	cd_fakefs_symlink(fs, "/home/u/ws/a", "/elsewhere");
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_fails(-EINVAL, "submodule path /home/u/ws/a/sub (a gitlink in "
			     "/home/u/ws/.git/index) crosses symlink /home/u/ws/a");
	free(err);
	err = NULL;

	/* A damaged index is refused: its submodules could not be protected. */
	cd_fakefs_file(fs, "/home/u/ws/.git/index", "DIRC\1\2");
	build_fails(-EINVAL, "cannot read the git index /home/u/ws/.git/index");
	free(err);
	err = NULL;

	/* One we cannot read, git run as us cannot either. */
	cd_fakefs_fail(fs, "/home/u/ws/.git/index", EACCES);
	build_ok();
	ck_assert(has_note("/home/u/ws/.git/index cannot be read"));
	plan = cd_plan_free(plan);

	/* Past the bound. */
	static const char *const two[] = { "s1", "s2", NULL };
	cd_fakefs_free(fs);
	fs = cd_fakefs_new();
	in.ops = cd_fakefs_ops(fs);
	cd_fakefs_other(fs, "/dev/null");
	cd_fakefs_dir(fs, "/home/u/ws/s1");
	cd_fakefs_dir(fs, "/home/u/ws/s2");
	git_index("/home/u/ws/.git/index", two);
	use_limits(100, 100, 10, 10, 1);
	build_fails(-E2BIG, "more than 1 submodules");
}
END_TEST

START_TEST(test_submodules_index_budget)
{
	/*
	 * Twenty repositories a sandbox planted, each with a sparse 256 MiB
	 * index: a header and one unknown extension. Only the header and the
	 * extension's are read (within the first read of each).
	 */
	for (int i = 0; i < 20; i++) {
		char *p = cd_xasprintf("/home/u/ws/r%d/.git/index", i);
		sparse_index(p, 0, (uint64_t)256 << 20);
		free(p);
	}
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/home/u/ws/r7/.git")->origin, CD_ORIGIN_NESTED);
	ck_assert_uint_le(cd_fakefs_bytes_read(fs), 20 * 4096);
	ck_assert_int_eq(cd_fakefs_open_files(fs), 0);
	plan = cd_plan_free(plan);

	/* One whose header counts more entries than the budget could hold: refused unread. */
	size_t before = cd_fakefs_bytes_read(fs);
	sparse_index("/home/u/ws/r3/.git/index", 4u << 20, (uint64_t)512 << 20);
	build_fails(-E2BIG, "takes more than 128 MiB, the most cordon reads for one run "
			    "(reached at /home/u/ws/r3/.git/index); remove the repositories");
	ck_assert_uint_le(cd_fakefs_bytes_read(fs) - before, 20 * 4096);
	ck_assert_int_eq(cd_fakefs_open_files(fs), 0);
	free(err);
	err = NULL;
}
END_TEST

START_TEST(test_submodules_index_budget_shared)
{
	/* The budget is the plan's, across every index it reads: three of 7,232 bytes. */
	files_index("/home/u/ws/.git/index", 100);
	files_index("/home/u/ws/a/.git/index", 100);
	files_index("/home/u/ws/b/.git/index", 100);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	use_limits(100, 100, 10, 10, 10);
	limits.index_bytes = 1 << 20;
	build_ok();
	ck_assert_uint_eq(cd_fakefs_bytes_read(fs), 3 * 7232);
	plan = cd_plan_free(plan);
	limits.index_bytes = 3 * 7232;
	build_ok();
	plan = cd_plan_free(plan);
	limits.index_bytes = 3 * 7000;
	build_fails(-E2BIG, "takes more than 21000 bytes, the most cordon reads for one run "
			    "(reached at /home/u/ws/");
	ck_assert_int_eq(cd_fakefs_open_files(fs), 0);
	free(err);
	err = NULL;
	/* Without the nested scan, only the workspace's own index is read. */
	in.skip_nested_scan = true;
	build_ok();
}
END_TEST

START_TEST(test_submodules_not_writable)
{
	/* Nothing writable in the work tree: the index is not even read. */
	static const char *const links[] = { "sub", NULL };
	git_index("/home/u/ws/.git/index", links);
	cd_fakefs_fail(fs, "/home/u/ws/.git/index", EIO);
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ);
	add_special(CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE);
	add_path("/home/u/ws/.git", CD_ACCESS_READ);
	build_ok();
	ck_assert_uint_eq(count_origin(CD_ORIGIN_SUBMODULE), 0);
	/* A write entry naming .git: the user gave the repository away. */
	plan = cd_plan_free(plan);
	prof->entries[2].access = CD_ACCESS_WRITE;
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_uint_eq(count_origin(CD_ORIGIN_SUBMODULE), 0);
}
END_TEST

START_TEST(test_submodules_split_index)
{
	/* The main file replaces shared entry 1 ("lib", a file there) with a gitlink. */
	struct cd_strbuf sb = { 0 }, ext = { 0 };
	cd_strbuf_append(&sb, "DIRC");
	put32(&sb, 2);
	put32(&sb, 1);
	index_entry(&sb, 0160000, "");
	for (int i = 0; i < 5; i++)
		put32(&ext, 0xabababab);
	for (int bitmap = 0; bitmap < 2; bitmap++) {
		put32(&ext, 64);
		put32(&ext, 2);
		put32(&ext, 2); /* a word with one literal word after it */
		put32(&ext, 0);
		put32(&ext, 0);
		put32(&ext, bitmap ? 2 : 0); /* replaces bit 1; deletes nothing */
		put32(&ext, 0);
	}
	cd_strbuf_append(&sb, "link");
	put32(&sb, (uint32_t)ext.len);
	cd_strbuf_append_n(&sb, ext.buf, ext.len);
	for (int i = 0; i < 5; i++)
		put32(&sb, 0);
	cd_fakefs_file_bytes(fs, "/home/u/ws/.git/index", sb.buf, sb.len);
	cd_strbuf_done(&sb);
	cd_strbuf_done(&ext);
	static const char *const shared[] = { "lib", "sub", NULL };
	git_index("/home/u/ws/.git/sharedindex.abababababababababababababababababababab", shared);
	cd_fakefs_dir(fs, "/home/u/ws/lib");
	cd_fakefs_dir(fs, "/home/u/ws/sub");
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	build_ok();
	ck_assert_int_eq(get("/home/u/ws/lib/.git")->origin, CD_ORIGIN_SUBMODULE);
	ck_assert_int_eq(get("/home/u/ws/sub/.git")->origin, CD_ORIGIN_SUBMODULE);
}
END_TEST

/* ---- whole-plan flags --------------------------------------------------- */

START_TEST(test_unrestricted_types)
{
	prof->type = CD_PROFILE_DISABLED;
	prof->network = CD_NET_RESTRICTED;
	build_ok();
	ck_assert(plan->fs_unrestricted);
	ck_assert(plan->full_read);
	ck_assert_int_eq(plan->network, CD_NET_ENABLED);
	ck_assert_uint_eq(plan->n_paths, 0);
	plan = cd_plan_free(plan);

	prof->type = CD_PROFILE_EXTERNAL;
	build_ok();
	ck_assert(plan->fs_unrestricted);
	ck_assert_int_eq(plan->type, CD_PROFILE_EXTERNAL);
	ck_assert_int_eq(plan->network, CD_NET_RESTRICTED);
	plan = cd_plan_free(plan);

	prof->type = CD_PROFILE_MANAGED;
	prof->fs_unrestricted = true;
	prof->network = CD_NET_ENABLED;
	build_ok();
	ck_assert(plan->fs_unrestricted);
	ck_assert_int_eq(plan->network, CD_NET_ENABLED);
	plan = cd_plan_free(plan);

	prof->fs_unrestricted = false;
	add_special(CD_SPECIAL_ROOT, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE);
	add_special(CD_SPECIAL_TMPDIR, NULL, CD_ACCESS_WRITE);
	in.tmpdir = "/tmp";
	build_ok();
	/* The workspace root brings protected read names: narrower than write. */
	ck_assert(!plan->fs_unrestricted);
	ck_assert(plan->full_read);
	plan = cd_plan_free(plan);

	in.n_workspace_roots = 0;
	in.tmpdir = NULL;
	build_ok();
	ck_assert(plan->fs_unrestricted);
	ck_assert_int_eq(cd_plan_access(plan, "/etc", NULL), CD_ACCESS_WRITE);
	ck_assert(has_note(":tmpdir entry 2 skipped"));
	ck_assert(has_note(":workspace_roots entry 1 binds to nothing"));
	plan = cd_plan_free(plan);

	/* A glob deny that matches is enforced: the plan is no longer unrestricted. */
	cd_fakefs_file(fs, "/home/u/ws/src/.env", NULL);
	struct cd_fs_entry e = { .kind = CD_ENTRY_GLOB,
				 .path = (char *)"/home/u/ws/**/.env",
				 .access = CD_ACCESS_DENY };
	cd_profile_add_entry(prof, &e);
	build_ok();
	ck_assert(plan->has_globs);
	ck_assert(!plan->fs_unrestricted);
	ck_assert(plan->full_read);
	ck_assert_int_eq(cd_plan_access(plan, "/home/u/ws/src/.env", NULL), CD_ACCESS_DENY);
}
END_TEST

START_TEST(test_flags_read_under_deny)
{
	add_path("/home/u/ws", CD_ACCESS_READ);
	add_path("/home/u/ws/src", CD_ACCESS_DENY);
	add_path("/home/u/ws/src/pub", CD_ACCESS_READ);
	build_ok();
	ck_assert(get("/home/u/ws/src")->carve_out);
	ck_assert(!get("/home/u/ws/src/pub")->carve_out);
	ck_assert_int_eq(get("/home/u/ws/src/pub")->parent_access, CD_ACCESS_DENY);
	ck_assert(plan->has_deny_carve_outs);
	ck_assert(!plan->full_read);
	ck_assert(!plan->fs_unrestricted);
	/* Read-only regions get no protected names. */
	ck_assert_uint_eq(count_origin(CD_ORIGIN_PROTECTED), 0);
}
END_TEST

/* ---- runner ------------------------------------------------------------- */

static Suite *plan_suite(void)
{
	Suite *s = suite_create("plan");
	TCase *tc;

	tc = tcase_create("canonicalize");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_canon_plain);
	tcase_add_test(tc, test_canon_missing);
	tcase_add_test(tc, test_canon_links);
	tcase_add_test(tc, test_canon_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("bind");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_bind_workspace_roots);
	tcase_add_test(tc, test_bind_no_workspace_roots);
	tcase_add_test(tc, test_bind_tmpdir);
	tcase_add_test(tc, test_bind_slash_tmp);
	tcase_add_test(tc, test_bind_minimal);
	tcase_add_test(tc, test_bind_unknown_and_glob);
	tcase_add_test(tc, test_bind_glob_matches);
	tcase_add_test(tc, test_bind_glob_project_roots);
	tcase_add_test(tc, test_bind_glob_literal_and_errors);
	tcase_add_test(tc, test_bind_glob_symlink_match);
	tcase_add_test(tc, test_bind_input_errors);
	tcase_add_test(tc, test_bind_cwd_canonical);
	tcase_add_test(tc, test_bind_dev_null);
	tcase_add_test(tc, test_bind_many_entries);
	tcase_add_test(tc, test_bind_errors_propagate);
	suite_add_tcase(s, tc);

	tc = tcase_create("precedence");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_precedence_nested);
	tcase_add_test(tc, test_precedence_no_match);
	tcase_add_loop_test(tc, test_precedence_ties, 0, (int)CD_ARRAY_SIZE(tie_orders));
	tcase_add_test(tc, test_plan_access_unrestricted);
	suite_add_tcase(s, tc);

	tc = tcase_create("protected");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_protected_basic);
	tcase_add_test(tc, test_protected_not_under_root_or_files);
	tcase_add_test(tc, test_protected_explicit_entries);
	tcase_add_test(tc, test_protected_workspace_write_shape);
	tcase_add_test(tc, test_protected_gitdir);
	tcase_add_test(tc, test_protected_gitdir_commondir);
	tcase_add_test(tc, test_protected_gitdir_like_git);
	tcase_add_test(tc, test_protected_gitdir_named_read);
	tcase_add_test(tc, test_protected_gitfile_not_pointer);
	tcase_add_loop_test(tc, test_protected_symlink_refused, 0,
			    (int)CD_ARRAY_SIZE(protected_names));
	suite_add_tcase(s, tc);

	tc = tcase_create("nested");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_above_nested_workspace);
	tcase_add_test(tc, test_above_only_writable);
	tcase_add_test(tc, test_above_workspace_root_not_bound);
	tcase_add_test(tc, test_above_not_under_writable_slash);
	tcase_add_test(tc, test_above_uncreatable);
	tcase_add_test(tc, test_nested_found);
	tcase_add_test(tc, test_nested_gitdir_target);
	tcase_add_test(tc, test_nested_pruned);
	tcase_add_test(tc, test_nested_symlink_refused);
	tcase_add_test(tc, test_nested_bounds);
	tcase_add_test(tc, test_nested_unlistable);
	tcase_add_test(tc, test_nested_inner_roots);
	tcase_add_test(tc, test_submodules);
	tcase_add_test(tc, test_submodules_recursive);
	tcase_add_test(tc, test_submodules_of_nested_and_above);
	tcase_add_test(tc, test_submodules_refusals);
	tcase_add_test(tc, test_submodules_not_writable);
	tcase_add_test(tc, test_submodules_split_index);
	tcase_add_test(tc, test_submodules_index_budget);
	tcase_add_test(tc, test_submodules_index_budget_shared);
	suite_add_tcase(s, tc);

	tc = tcase_create("symlinks");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_symlink_planted_in_writable);
	tcase_add_test(tc, test_symlink_planted_deny_path);
	tcase_add_test(tc, test_symlink_in_readonly_allowed);
	tcase_add_test(tc, test_symlink_in_readonly_carve_out_allowed);
	suite_add_tcase(s, tc);

	tc = tcase_create("flags");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_unrestricted_types);
	tcase_add_test(tc, test_flags_read_under_deny);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(plan_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
