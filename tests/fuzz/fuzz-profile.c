/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The profile parser on policy files (core/profile.c): the input is a
 * file's bytes, read as `cordon run --profile FILE` reads it. A profile
 * that parses is copied, and bound over the fake tree (fuzz-tree.c) with a
 * workspace root and without, as run and serve bind it. The same JSON is
 * also converted in the wire modes. Properties:
 *  - errors name a message; a refusal leaves no profile;
 *  - what a policy file accepts, the wire (serde-like, legacy forms on)
 *    accepts too, as the same profile: a file is the stricter reading
 *    (but for network "managed", which only cordon's own files and CLI
 *    know);
 *  - a copy (cd_profile_dup) is the same profile.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "core/json.h"
#include "core/profile.h"
#include "core/util.h"
#include "fuzz.h"

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && cd_streq(a, b));
}

/* The rules of cordon's proxy (a policy file's network object). */
static bool same_netpol(const struct cd_netpolicy *a, const struct cd_netpolicy *b)
{
	if (!a || !b)
		return !a && !b;
	if (a->mode != b->mode || a->n_allow != b->n_allow || a->n_deny != b->n_deny ||
	    a->n_cidrs != b->n_cidrs)
		return false;
	for (size_t i = 0; i < a->n_allow; i++)
		if (!cd_streq(a->allow[i], b->allow[i]))
			return false;
	for (size_t i = 0; i < a->n_deny; i++)
		if (!cd_streq(a->deny[i], b->deny[i]))
			return false;
	for (size_t i = 0; i < a->n_cidrs; i++)
		if (memcmp(&a->cidrs[i], &b->cidrs[i], sizeof(a->cidrs[i])) != 0)
			return false;
	return true;
}

static bool same_profile(const struct cd_profile *a, const struct cd_profile *b)
{
	if (!same_netpol(a->netpol, b->netpol))
		return false;
	if (a->type != b->type || a->fs_unrestricted != b->fs_unrestricted ||
	    a->n_entries != b->n_entries || a->network != b->network ||
	    a->glob_scan_max_depth != b->glob_scan_max_depth)
		return false;
	for (size_t i = 0; i < a->n_entries; i++) {
		const struct cd_fs_entry *x = &a->entries[i], *y = &b->entries[i];
		if (x->kind != y->kind || x->access != y->access ||
		    (x->kind == CD_ENTRY_SPECIAL && x->special != y->special) ||
		    !same_str(x->path, y->path) || !same_str(x->subpath, y->subpath))
			return false;
	}
	return true;
}

static void check_error(int r, const struct cd_parse_error *e)
{
	fuzz_assert(r == -EINVAL);
	fuzz_assert(e->msg && *e->msg);
}

static void check_profile(const struct cd_profile *p)
{
	static const char *const roots[] = { FUZZ_WORKSPACE };

	fuzz_assert(p->type < CD_PROFILE_TYPE_COUNT && p->network < CD_NET_COUNT);
	for (size_t i = 0; i < p->n_entries; i++) {
		const struct cd_fs_entry *e = &p->entries[i];
		fuzz_assert(e->kind < CD_ENTRY_KIND_COUNT && e->access < CD_ACCESS_COUNT);
		if (e->kind == CD_ENTRY_PATH)
			fuzz_assert(e->path && e->path[0] == '/');
		if (e->kind == CD_ENTRY_GLOB)
			fuzz_assert(e->path && e->access == CD_ACCESS_DENY);
		if (e->subpath)
			fuzz_assert(e->subpath[0] != '/');
	}
	struct cd_profile *copy = cd_profile_dup(p);
	fuzz_assert(same_profile(p, copy));
	cd_profile_free(copy);
	(void)cd_profile_depends_on_cwd(p);
	fuzz_bind_check(p, FUZZ_CWD, roots, 1);
	fuzz_bind_check(p, FUZZ_CWD, NULL, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct cd_profile *file = NULL, *wire = NULL;
	struct cd_parse_error err = { 0 };

	int r = cd_profile_parse_file_text(buf, size, "fuzz.json", &file, &err);
	if (r < 0) {
		check_error(r, &err);
		fuzz_assert(!file);
	} else {
		fuzz_assert(file && !err.msg);
		check_profile(file);
	}
	cd_parse_error_done(&err);

	struct cd_json *v = NULL;
	struct cd_json_error jerr;
	if (cd_json_parse(buf, size, NULL, &v, &jerr) == 0) {
		static const cd_profile_parse_flags modes[] = {
			CD_PROFILE_PARSE_WIRE | CD_PROFILE_PARSE_LEGACY,
			CD_PROFILE_PARSE_WIRE,
		};
		for (size_t i = 0; i < CD_ARRAY_SIZE(modes); i++) {
			r = cd_profile_from_json(v, modes[i], &wire, &err);
			if (r < 0) {
				check_error(r, &err);
				fuzz_assert(!wire);
				/* A policy file is read more strictly than the wire. */
				if (file && i == 0 && file->network != CD_NET_MANAGED)
					fuzz_fail("a policy file parses, the wire refuses it: %s",
						  err.msg);
			} else {
				if (file && i == 0 && !same_profile(file, wire))
					fuzz_fail("a policy file and the wire read different "
						  "profiles");
				if (!file)
					check_profile(wire);
				wire = cd_profile_free(wire);
			}
			cd_parse_error_done(&err);
		}
		cd_json_free(v);
	}
	cd_profile_free(file);
	return 0;
}
