/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The JSON reader (core/json.c). Beyond "no crash, no leak":
 *  - a tree that parsed, written back out (cd_strbuf_append_json_string
 *    for the strings, the literal text for numbers), parses again to the
 *    same tree: the writer and the reader agree on every string;
 *  - the input under tight limits either parses to the same tree, fails
 *    with -E2BIG, or fails with the same syntax error at the same offset;
 *  - the input taken as one string's bytes and written as a JSON string
 *    parses back; when the reader takes the bytes as valid UTF-8 the
 *    string is unchanged (two UTF-8 validators that must agree);
 *  - errors carry a position inside the input and a terminated message.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"
#include "fuzz.h"

/* What cordon serve allows per message (serve/server.h) and a tight set. */
static const struct cd_json_limits serve_limits = {
	.max_bytes = 64u * 1024 * 1024,
	.max_values = 262144,
	.max_depth = 512,
};
static const struct cd_json_limits tight_limits = {
	.max_values = 24,
	.max_depth = 4,
};

static void emit(struct cd_strbuf *sb, const struct cd_json *v)
{
	switch (v->type) {
	case CD_JSON_NULL:
		cd_strbuf_append(sb, "null");
		break;
	case CD_JSON_FALSE:
		cd_strbuf_append(sb, "false");
		break;
	case CD_JSON_TRUE:
		cd_strbuf_append(sb, "true");
		break;
	case CD_JSON_NUMBER:
		cd_strbuf_append(sb, v->u.num.text);
		break;
	case CD_JSON_STRING:
		cd_strbuf_append_json_string(sb, v->u.str.s, v->u.str.len);
		break;
	case CD_JSON_ARRAY:
		cd_strbuf_append_c(sb, '[');
		for (size_t i = 0; i < v->u.arr.n; i++) {
			if (i)
				cd_strbuf_append_c(sb, ',');
			emit(sb, v->u.arr.items[i]);
		}
		cd_strbuf_append_c(sb, ']');
		break;
	case CD_JSON_OBJECT:
		cd_strbuf_append_c(sb, '{');
		for (size_t i = 0; i < v->u.obj.n; i++) {
			const struct cd_json_member *m = &v->u.obj.members[i];
			if (i)
				cd_strbuf_append_c(sb, ',');
			cd_strbuf_append_json_string(sb, m->key, m->key_len);
			cd_strbuf_append_c(sb, ':');
			emit(sb, m->value);
		}
		cd_strbuf_append_c(sb, '}');
		break;
	case CD_JSON_TYPE_COUNT:
		fuzz_fail("value of type CD_JSON_TYPE_COUNT");
	}
}

static bool same(const struct cd_json *a, const struct cd_json *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case CD_JSON_NUMBER:
		return cd_streq(a->u.num.text, b->u.num.text);
	case CD_JSON_STRING:
		return a->u.str.len == b->u.str.len &&
		       !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
	case CD_JSON_ARRAY:
		if (a->u.arr.n != b->u.arr.n)
			return false;
		for (size_t i = 0; i < a->u.arr.n; i++)
			if (!same(a->u.arr.items[i], b->u.arr.items[i]))
				return false;
		return true;
	case CD_JSON_OBJECT:
		if (a->u.obj.n != b->u.obj.n)
			return false;
		for (size_t i = 0; i < a->u.obj.n; i++) {
			const struct cd_json_member *x = &a->u.obj.members[i];
			const struct cd_json_member *y = &b->u.obj.members[i];
			if (x->key_len != y->key_len || memcmp(x->key, y->key, x->key_len) ||
			    !same(x->value, y->value))
				return false;
		}
		return true;
	case CD_JSON_NULL:
	case CD_JSON_FALSE:
	case CD_JSON_TRUE:
	case CD_JSON_TYPE_COUNT:
		return true;
	}
	return true;
}

/* The accessors every consumer uses, on every node. */
static void walk(const struct cd_json *v, const char *buf, size_t len)
{
	fuzz_assert(v->line >= 1 && v->col >= 1);
	fuzz_assert(cd_json_type_name(v->type) != NULL);
	switch (v->type) {
	case CD_JSON_NUMBER: {
		int64_t i;
		uint64_t u;
		int ri = cd_json_int64(v, &i), ru = cd_json_uint64(v, &u);
		fuzz_assert(ri == 0 || ri == -EINVAL || ri == -ERANGE);
		fuzz_assert(ru == 0 || ru == -EINVAL || ru == -ERANGE);
		/* Both read the same integer where both can. */
		if (ri == 0 && ru == 0)
			fuzz_assert(i >= 0 && (uint64_t)i == u);
		if (ri == 0 && i >= 0)
			fuzz_assert(ru == 0);
		break;
	}
	case CD_JSON_STRING:
		fuzz_assert(v->u.str.s[v->u.str.len] == '\0');
		fuzz_assert(cd_json_string_has_nul(v) == (strlen(v->u.str.s) != v->u.str.len));
		break;
	case CD_JSON_ARRAY:
		for (size_t i = 0; i < v->u.arr.n; i++)
			walk(v->u.arr.items[i], buf, len);
		break;
	case CD_JSON_OBJECT:
		for (size_t i = 0; i < v->u.obj.n; i++) {
			const struct cd_json_member *m = &v->u.obj.members[i];
			fuzz_assert(m->key[m->key_len] == '\0');
			/* Keys are unique: a lookup finds this very member. */
			if (strlen(m->key) == m->key_len) {
				fuzz_assert(cd_json_get_member(v, m->key) == m);
				fuzz_assert(cd_json_get(v, m->key) == m->value);
			}
			walk(m->value, buf, len);
		}
		break;
	case CD_JSON_NULL:
	case CD_JSON_FALSE:
	case CD_JSON_TRUE:
	case CD_JSON_TYPE_COUNT:
		break;
	}
}

static void check_error(const struct cd_json_error *e, size_t len)
{
	fuzz_assert(e->line >= 1 && e->col >= 1);
	fuzz_assert(e->offset <= len);
	fuzz_assert(memchr(e->msg, '\0', sizeof(e->msg)) != NULL);
}

/* The input as one string's bytes: the writer's output must read back. */
static void string_round_trip(const char *buf, size_t len)
{
	struct cd_strbuf sb = { 0 };
	struct cd_json *v = NULL;
	struct cd_json_error err;

	cd_strbuf_append_json_string(&sb, buf, len);
	int r = cd_json_parse(sb.buf, sb.len, NULL, &v, &err);
	if (r < 0)
		fuzz_fail("written string does not read back: %s at %zu", err.msg, err.offset);
	fuzz_assert(v->type == CD_JSON_STRING);
	/* U+FFFD replaces what the writer took as invalid: valid input comes back as is. */
	char *copy = cd_xstrndup(buf, len);
	char *lossy = cd_utf8_lossy(copy);
	if (strlen(copy) == len && cd_streq(lossy, copy))
		fuzz_assert(v->u.str.len == len && !memcmp(v->u.str.s, buf, len));
	free(lossy);
	free(copy);
	cd_json_free(v);
	cd_strbuf_done(&sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct cd_json *v = NULL, *again = NULL, *tight = NULL;
	struct cd_json_error err, terr;

	memset(&err, 0, sizeof(err));
	int r = cd_json_parse(buf, size, &serve_limits, &v, &err);
	memset(&terr, 0, sizeof(terr));
	int rt = cd_json_parse(buf, size, &tight_limits, &tight, &terr);
	if (r < 0) {
		fuzz_assert(r == -EINVAL || r == -E2BIG);
		fuzz_assert(!v);
		check_error(&err, size);
	}
	if (rt < 0) {
		fuzz_assert(rt == -EINVAL || rt == -E2BIG);
		fuzz_assert(!tight);
		check_error(&terr, size);
	}
	if (rt == 0) {
		/* What fits the tight limits fits the wide ones, as the same tree. */
		fuzz_assert(r == 0 && same(v, tight));
	} else if (rt == -EINVAL) {
		/* A syntax error found under the tight limits is found first either way. */
		fuzz_assert(r == -EINVAL && err.offset == terr.offset);
	}
	if (r == 0) {
		struct cd_strbuf sb = { 0 };
		walk(v, buf, size);
		emit(&sb, v);
		r = cd_json_parse(sb.buf, sb.len, &serve_limits, &again, &err);
		if (r < 0)
			fuzz_fail("written tree does not read back: %s at %zu in %s", err.msg,
				  err.offset, sb.buf);
		fuzz_assert(same(v, again));
		cd_strbuf_done(&sb);
	}
	string_round_trip(buf, size);
	cd_json_free(v);
	cd_json_free(again);
	cd_json_free(tight);
	return 0;
}
