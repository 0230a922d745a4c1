/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The TOML reader and writer (core/toml.c). Beyond "no crash, no leak":
 *  - a document that parsed, written back (cd_toml_write), parses again to
 *    the same values: the writer emits only what the reader takes, and
 *    loses nothing (keys and strings with any bytes, floats, date-times,
 *    arrays of tables, nesting up to the limit);
 *  - the written text is stable: writing the re-read document gives the
 *    same bytes;
 *  - errors carry a position (line and column from 1) and a message.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/toml.h"
#include "core/util.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cd_toml *t = NULL, *again = NULL, *third = NULL;
	struct cd_toml_error err;
	char *out = NULL, *out2 = NULL;
	size_t n = 0, n2 = 0;

	if (cd_toml_parse((const char *)data, size, &t, &err) < 0) {
		fuzz_assert(!t);
		fuzz_assert(err.line >= 1 && err.col >= 1);
		fuzz_assert(err.msg[0] && memchr(err.msg, '\0', sizeof(err.msg)));
		return 0;
	}
	cd_toml_write(t, &out, &n);
	if (cd_toml_parse(out, n, &again, &err) < 0)
		fuzz_fail("written text does not read back: %u:%u: %s\n%s", err.line, err.col,
			  err.msg, out);
	fuzz_assert(cd_toml_equal(t, again));
	cd_toml_write(again, &out2, &n2);
	fuzz_assert(n == n2 && !memcmp(out, out2, n));
	fuzz_assert(cd_toml_parse(out2, n2, &third, &err) == 0);
	cd_toml_free(third);
	free(out2);
	free(out);
	cd_toml_free(again);
	cd_toml_free(t);
	return 0;
}
