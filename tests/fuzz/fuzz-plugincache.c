/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The installed-plugin rules (core/plugincache.c). The first byte picks
 * the reader: the remote-install metadata, a manifest's display name, or
 * two version names (split at the first NUL). Beyond "no crash, no leak":
 * an accepted id is trimmed, not empty and within its limit; a display
 * name holds no NUL; the version order is antisymmetric and names equal
 * only to themselves; the pick is one of the names.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/plugincache.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	const char *s = (const char *)data + 1;
	size_t n = size - 1;
	const char *why = NULL;
	char *out = NULL;
	switch (data[0] % 3) {
	case 0: {
		int r = cd_plugin_remote_id(s, n, &out, &why);
		if (r == CD_PLUGIN_OK) {
			size_t k = strlen(out);
			fuzz_assert(k > 0 && k <= CD_PLUGIN_REMOTE_ID_MAX && out[0] != ' ' &&
				    out[k - 1] != ' ');
		} else {
			fuzz_assert(!out && why && why[0]);
		}
		break;
	}
	case 1: {
		int r = cd_plugin_display_name(s, n, "dir", &out, &why);
		if (r == CD_PLUGIN_OK)
			fuzz_assert(out[0] != '\0');
		else
			fuzz_assert(!out && why && why[0]);
		break;
	}
	default: {
		char *a = strndup(s, n);
		size_t an = strlen(a);
		char *b = strndup(an < n ? s + an + 1 : "", an < n ? n - an - 1 : 0);
		if (cd_plugin_version_ok(a) && cd_plugin_version_ok(b)) {
			int x = cd_plugin_version_cmp(a, b), y = cd_plugin_version_cmp(b, a);
			fuzz_assert((x > 0) == (y < 0) && (x == 0) == (y == 0));
			fuzz_assert(cd_plugin_version_cmp(a, a) == 0);
			const char *v[2] = { a, b };
			const char *p = cd_plugin_version_pick(v, 2);
			fuzz_assert(p == a || p == b);
		}
		free(a);
		free(b);
		break;
	}
	}
	free(out);
	return 0;
}
