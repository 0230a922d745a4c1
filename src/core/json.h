/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A strict JSON (RFC 8259) reader that keeps the source position of every
 * value and object key, so policy errors can say file:line:column. OS-free.
 *
 * Strictness: one top-level value followed only by whitespace; no comments,
 * no trailing commas, no NaN/Infinity, no leading zeros, no control
 * characters in strings, valid UTF-8 everywhere (overlongs, surrogates
 * encoded in UTF-8 and code points above U+10FFFF refused), \u escapes
 * must pair surrogates correctly. Duplicate keys in one object are refused.
 * "\u0000" is accepted and kept (strings carry a length); callers that need
 * NUL-free text check with cd_json_string_has_nul().
 *
 * Limits (struct cd_json_limits) bound the input size, the number of values
 * (every scalar, array and object counts one) and the nesting depth; the
 * parser never recurses deeper than max_depth.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cd_json_type {
	CD_JSON_NULL,
	CD_JSON_FALSE,
	CD_JSON_TRUE,
	CD_JSON_NUMBER,
	CD_JSON_STRING,
	CD_JSON_ARRAY,
	CD_JSON_OBJECT,
	CD_JSON_TYPE_COUNT,
};

struct cd_json;

struct cd_json_member {
	char *key; /* NUL-terminated; may contain embedded NULs (key_len) */
	size_t key_len;
	unsigned line, col; /* position of the key's opening quote, 1-based */
	struct cd_json *value;
};

struct cd_json {
	enum cd_json_type type;
	unsigned line, col; /* position of the value's first byte, 1-based; col counts bytes */
	union {
		struct {
			char *s; /* NUL-terminated copy, decoded; may contain embedded NULs */
			size_t len;
		} str;
		struct {
			char *text; /* the literal as written, e.g. "-12.5e3" */
		} num;
		struct {
			struct cd_json **items;
			size_t n;
		} arr;
		struct {
			struct cd_json_member *members; /* in source order */
			size_t n;
		} obj;
	} u;
};

struct cd_json_limits {
	size_t max_bytes;   /* 0 = no limit */
	size_t max_values;  /* 0 = no limit */
	unsigned max_depth; /* 0 = default 512 */
};

struct cd_json_error {
	unsigned line, col; /* where the problem is, 1-based */
	size_t offset;	    /* byte offset */
	char msg[192];	    /* e.g. "duplicate object key \"type\"" */
};

/*
 * Parse buf[0..len). On success *ret owns the tree (free with cd_json_free)
 * and 0 is returned. On failure returns -EINVAL (syntax, UTF-8, duplicate
 * key), -E2BIG (a limit was exceeded) and fills *err; *ret is NULL.
 * buf need not be NUL-terminated; an embedded raw NUL byte is a syntax error.
 */
int cd_json_parse(const char *buf, size_t len, const struct cd_json_limits *lim,
		  struct cd_json **ret, struct cd_json_error *err);

/* NULL-safe; returns NULL. */
struct cd_json *cd_json_free(struct cd_json *v);

/* Object lookup by NUL-free key; NULL if v is not an object or has no such key. */
const struct cd_json *cd_json_get(const struct cd_json *v, const char *key);
/* The member record (for key positions), or NULL. */
const struct cd_json_member *cd_json_get_member(const struct cd_json *v, const char *key);

/* Integer value of a NUMBER that is an exact integer (no fraction/exponent
 * unless it still denotes an integer is NOT accepted: "1.0" and "1e2" give
 * -EINVAL). -ERANGE when out of range. */
int cd_json_int64(const struct cd_json *v, int64_t *ret);
int cd_json_uint64(const struct cd_json *v, uint64_t *ret);

bool cd_json_string_has_nul(const struct cd_json *v);
/* "null", "boolean", "number", "string", "array", "object". */
const char *cd_json_type_name(enum cd_json_type t);
