/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * PathUri parsing and formatting (core/pathuri.c). Properties:
 *  - the input as a URI: what parses is a terminated path; a POSIX one formats to a canonical URI that parses back
 *    to the same bytes; cd_pathuri_to_posix accepts exactly the POSIX
 *    results that are absolute, without NUL and not of the fallback form,
 *    with the same path;
 *  - the input as a path's bytes: its URI (any non-empty bytes have one,
 *    the fallback form for those without a plain one) is printable ASCII
 *    and parses back to the same bytes (a plain one: normalised, as a URL
 *    path is: without empty components or a trailing slash).
 */
#include "config.h"

#include <string.h>

#include "core/pathuri.h"
#include "core/util.h"
#include "fuzz.h"

/*
 * What a plain absolute path reads back as: a URL path drops empty
 * components and a trailing slash (the root stays "/"). n: its length.
 */
static char *normalised(const char *path, size_t len, size_t *n)
{
	char *out = cd_xmalloc(len + 1);
	size_t o = 0;
	for (size_t i = 0; i < len; i++)
		if (path[i] != '/' || o == 0 || out[o - 1] != '/')
			out[o++] = path[i];
	if (o > 1 && out[o - 1] == '/')
		o--;
	out[o] = '\0';
	*n = o;
	return out;
}

/*
 * uri formats path[0..len) and must read back as those bytes: exactly for
 * the fallback form (any bytes: NULs, a relative path, dot segments),
 * normalised for a plain absolute path.
 */
static void check_formatted(const char *uri, const char *path, size_t len)
{
	struct cd_pathuri u;
	const char *why = NULL;
	size_t n = len;
	char *want = NULL;

	for (const char *p = uri; *p; p++)
		fuzz_assert(*p > 0x20 && *p < 0x7f);
	if (cd_pathuri_parse(uri, strlen(uri), &u, &why) < 0)
		fuzz_fail("formatted URI '%s' does not parse: %s", uri, why ? why : "?");
	fuzz_assert(u.convention == CD_PATH_POSIX);
	if (!u.fallback)
		path = want = normalised(path, len, &n);
	if (u.len != n || memcmp(u.path, path, n))
		fuzz_fail("formatted URI '%s' reads back as another path", uri);
	free(want);
	cd_pathuri_done(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct cd_pathuri u;
	const char *why = NULL, *why2 = NULL;
	char *posix = NULL;

	memset(&u, 0, sizeof(u));
	int r = cd_pathuri_parse(buf, size, &u, &why);
	int r2 = cd_pathuri_to_posix(buf, size, &posix, &why2);
	if (r < 0) {
		fuzz_assert(why != NULL && r2 < 0 && why2 != NULL && !posix);
	} else {
		fuzz_assert(u.path && u.path[u.len] == '\0' && strlen(u.path) <= u.len);
		if (u.convention == CD_PATH_POSIX) {
			char *again = cd_pathuri_format_posix(u.path, u.len);
			check_formatted(again, u.path, u.len);
			free(again);
		} else {
			fuzz_assert(u.convention == CD_PATH_WINDOWS);
		}
		/*
		 * The fallback form may carry any bytes: NULs, a relative path.
		 * cd_pathuri_to_posix takes none of it: a path it could carry
		 * without a NUL has a URI of its own (as in Codex).
		 */
		bool plain = u.convention == CD_PATH_POSIX && !u.fallback &&
			     strlen(u.path) == u.len && u.path[0] == '/';
		fuzz_assert((r2 == 0) == plain);
		if (plain)
			fuzz_assert(cd_streq(posix, u.path));
		cd_pathuri_done(&u);
	}
	free(posix);

	/* The input as a path (the empty path has no URI: none is ever sent). */
	if (size == 0)
		return 0;
	char *uri = cd_pathuri_format_posix(buf, size);
	check_formatted(uri, buf, size);
	free(uri);
	return 0;
}
