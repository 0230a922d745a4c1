/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The in-memory tree the binding targets (profile, intent, glob) work on:
 * never the host's file system, so an input cannot make a target scan a
 * real tree or read a FIFO. Small (fakefs.c looks nodes up linearly) but
 * with what the plan and the glob walk treat specially: a workspace with
 * .git as a directory and as a "gitdir:" file, names made of glob
 * metacharacters, symlinks inside and out of the workspace, a link loop,
 * a device.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "fuzz.h"
#include "tests/unit/fakefs.h"

const struct cd_linux_host fuzz_host = {
	.landlock_abi = 6,
	.seccomp = true,
	.userns = true,
	.is_root = false,
};

static const struct {
	char kind; /* d(ir), f(ile), l(ink), o(ther) */
	const char *path, *data;
} nodes[] = {
	{ 'd', "/w/src/deep/er/est", NULL },
	{ 'f', "/w/src/main.c", "int main;" },
	{ 'f', "/w/src/.env", NULL },
	{ 'f', "/w/src/deep/er/.env", NULL },
	{ 'f', "/w/src/deep/id.pem", NULL },
	{ 'd', "/w/.git/modules/sub", NULL },
	{ 'f', "/w/.git/config", NULL },
	{ 'f', "/w/sub/.git", "gitdir: ../.git/modules/sub\n" },
	{ 'f', "/w/.git/modules/sub/commondir", "../..\n" },
	{ 'f', "/w/[x]/*", NULL },
	{ 'f', "/w/a?b/\\c", NULL },
	{ 'd', "/w/.codex", NULL },
	{ 'l', "/w/link", "/outside" },
	{ 'l', "/w/src/up", ".." },
	{ 'l', "/w/loop", "/w/loop" },
	{ 'l', "/w/.agents", "/etc" },
	{ 'f', "/outside/.env", NULL },
	{ 'd', "/tmp/t", NULL },
	{ 'f', "/etc/passwd", "root:x:0:0::/root:/bin/sh\n" },
	{ 'd', "/usr/bin", NULL },
	{ 'd', "/usr/lib", NULL },
	{ 'l', "/bin", "usr/bin" },
	{ 'o', "/dev/null", NULL },
	{ 'd', "/home/u/.ssh", NULL },
	{ 'f', "/home/u/.ssh/id_ed25519", NULL },
	{ 'd', "/proc/self", NULL },
};

static struct cd_fakefs *tree;
static const char **paths;

static void build(void)
{
	size_t n = 0;

	if (tree)
		return;
	tree = cd_fakefs_new();
	paths = cd_xcalloc(CD_ARRAY_SIZE(nodes) + 1, sizeof(*paths));
	for (size_t i = 0; i < CD_ARRAY_SIZE(nodes); i++) {
		switch (nodes[i].kind) {
		case 'd':
			cd_fakefs_dir(tree, nodes[i].path);
			break;
		case 'f':
			cd_fakefs_file(tree, nodes[i].path, nodes[i].data);
			break;
		case 'l':
			cd_fakefs_symlink(tree, nodes[i].path, nodes[i].data);
			break;
		default:
			cd_fakefs_other(tree, nodes[i].path);
			break;
		}
		paths[n++] = nodes[i].path;
	}
}

const struct cd_fs_ops *fuzz_tree_ops(void)
{
	build();
	return cd_fakefs_ops(tree);
}

const char *const *fuzz_tree_paths(void)
{
	build();
	return paths;
}

bool fuzz_tree_is_symlink(const char *path)
{
	for (size_t i = 0; i < CD_ARRAY_SIZE(nodes); i++)
		if (nodes[i].kind == 'l' && cd_streq(nodes[i].path, path))
			return true;
	return false;
}

void fuzz_bind_check(const struct cd_profile *p, const char *cwd, const char *const *roots,
		     size_t n_roots)
{
	struct cd_bind_input in = {
		.cwd = cwd,
		.workspace_roots = roots,
		.n_workspace_roots = n_roots,
		.tmpdir = FUZZ_TMPDIR,
		.ops = fuzz_tree_ops(),
	};
	struct cd_plan *plan = NULL;
	char *err = NULL;

	if (cd_plan_build(p, &in, &plan, &err) < 0) {
		fuzz_assert(!plan);
		free(err);
		return;
	}
	free(err);
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		fuzz_assert(cd_path_is_normal(pp->path));
		fuzz_assert(pp->access < CD_ACCESS_COUNT);
		fuzz_assert(pp->type != CD_FT_SYMLINK && pp->type < CD_FT_COUNT);
		fuzz_assert(i == 0 || strcmp(plan->paths[i - 1].path, pp->path) < 0);
		fuzz_assert(cd_plan_find(plan, pp->path) == pp);
		(void)cd_plan_access(plan, pp->path, NULL);
	}
	struct cd_linux_opts lopts = { .min_landlock_abi = 1 };
	struct cd_linux_plan *lp = NULL;
	err = NULL;
	if (cd_linux_plan_build(plan, &fuzz_host, &lopts, &lp, &err) == 0)
		cd_linux_plan_free(lp);
	free(err);
	cd_plan_free(plan);
}
