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

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/toml.h"
#include "core/util.h"
#include "fuzz.h"

static bool same(const struct cd_toml *a, const struct cd_toml *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case CD_TOML_INTEGER:
		return a->u.i == b->u.i;
	case CD_TOML_FLOAT:
		if (isnan(a->u.f))
			return isnan(b->u.f);
		return a->u.f == b->u.f && signbit(a->u.f) == signbit(b->u.f);
	case CD_TOML_BOOL:
		return a->u.b == b->u.b;
	case CD_TOML_ARRAY:
		if (a->u.arr.n != b->u.arr.n)
			return false;
		for (size_t i = 0; i < a->u.arr.n; i++)
			if (!same(a->u.arr.items[i], b->u.arr.items[i]))
				return false;
		return true;
	case CD_TOML_TABLE:
		if (a->u.tab.n != b->u.tab.n)
			return false;
		for (size_t i = 0; i < a->u.tab.n; i++) {
			const struct cd_toml_kv *kv = &a->u.tab.kv[i];
			const struct cd_toml *o = cd_toml_get(b, kv->key, kv->key_len);
			if (!o || !same(kv->value, o))
				return false;
		}
		return true;
	case CD_TOML_STRING:
	case CD_TOML_DATETIME:
	case CD_TOML_LOCAL_DATETIME:
	case CD_TOML_LOCAL_DATE:
	case CD_TOML_LOCAL_TIME:
		return a->u.str.len == b->u.str.len &&
		       !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
	case CD_TOML_TYPE_COUNT:
		break;
	}
	return false;
}

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
	fuzz_assert(same(t, again));
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
