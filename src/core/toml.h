/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A strict TOML reader (1.0.0, plus the 1.1 forms below) and a writer, OS-free. cordon's own: Debian
 * ships no C TOML library (no libtoml/tomlc99/toml11 package in bookworm's
 * main), and the exec-server's environmentConfig/read must parse the
 * executor's config.toml files and hand back parts of them as TOML text.
 *
 * What the toml crate of the Codex binary reads beyond TOML 1.0 is read
 * too (TOML 1.1): the \e and \xHH escapes, newlines, comments and a
 * trailing comma inside inline tables, and times without seconds (written
 * back with ":00"). Fractions of seconds are kept to 9 digits, as the crate
 * keeps nanoseconds; a float literal that overflows to infinity is an error.
 *
 * Strictness: valid UTF-8 only; no control characters except tab outside
 * multi-line strings' newlines; duplicate keys, redefined tables, tables
 * extended through dotted keys of another section, inline tables or static
 * arrays extended afterwards: all errors with line:column (1-based; the
 * column counts characters, as the released Codex binary's messages do).
 * Integers are signed 64-bit (overflow is an error); floats are IEEE
 * doubles; date-times are kept as normalised text (separator 'T', 'Z'
 * upper case) after their fields are checked (month, day of that month,
 * hour, minute, second 0-60, offset).
 *
 * Limits: the input size (the caller's) and the nesting depth of arrays
 * and inline tables: CD_TOML_MAX_DEPTH, as the toml crate Codex uses
 * ("cannot recurse further; max recursion depth met").
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CD_TOML_MAX_DEPTH 80

enum cd_toml_type {
	CD_TOML_STRING,
	CD_TOML_INTEGER,
	CD_TOML_FLOAT,
	CD_TOML_BOOL,
	CD_TOML_DATETIME, /* offset date-time */
	CD_TOML_LOCAL_DATETIME,
	CD_TOML_LOCAL_DATE,
	CD_TOML_LOCAL_TIME,
	CD_TOML_ARRAY,
	CD_TOML_TABLE,
	CD_TOML_TYPE_COUNT,
};

struct cd_toml;

struct cd_toml_kv {
	char *key; /* owned, NUL-terminated; may hold NULs (key_len) */
	size_t key_len;
	struct cd_toml *value; /* owned */
};

struct cd_toml {
	enum cd_toml_type type;
	/* Parser bookkeeping (how a table/array came to be), see toml.c. */
	unsigned flags;
	union {
		struct {
			char *s; /* owned, NUL-terminated; may hold NULs */
			size_t len;
		} str;	   /* STRING, and the date-time types' normalised text */
		int64_t i; /* INTEGER */
		double f;  /* FLOAT */
		bool b;	   /* BOOL */
		struct {
			struct cd_toml **items; /* owned */
			size_t n, cap;
		} arr;
		struct {
			struct cd_toml_kv *kv; /* owned, in document order */
			size_t n, cap;
			size_t *idx; /* owned: a hash index of kv (1-based; 0 free), or NULL */
			size_t idx_cap;
		} tab;
	} u;
};

struct cd_toml_error {
	unsigned line, col; /* 1-based */
	unsigned span;	    /* characters the problem covers from col (>= 1): a key's length */
	char msg[160];
};

/*
 * Parse buf[0..len) (need not be NUL-terminated). On success *ret is the
 * root table, malloc()ed and owned by the caller (cd_toml_free), and 0 is
 * returned; on failure -EINVAL with *err filled and *ret NULL.
 */
int cd_toml_parse(const char *buf, size_t len, struct cd_toml **ret, struct cd_toml_error *err);

/* NULL-safe; returns NULL. */
struct cd_toml *cd_toml_free(struct cd_toml *v);

/* A table's member by key (bytes), or NULL. */
struct cd_toml *cd_toml_get(const struct cd_toml *t, const char *key, size_t key_len);

/*
 * Whether a and b hold the same value: same types, integers, strings and
 * date-times byte for byte, floats equal with the same sign (NaN equals
 * NaN), arrays item by item, tables with the same keys (in any order).
 */
bool cd_toml_equal(const struct cd_toml *a, const struct cd_toml *b);

/* A new empty table (never NULL: aborts on OOM like cd_xmalloc). */
struct cd_toml *cd_toml_new_table(void);
/* Remove key from table t and free its value: true when it was there. */
bool cd_toml_table_remove(struct cd_toml *t, const char *key, size_t key_len);
/* A new empty array; append to it (takes v). */
struct cd_toml *cd_toml_new_array(void);
void cd_toml_array_push(struct cd_toml *a, struct cd_toml *v);
/* Deep copy. */
struct cd_toml *cd_toml_copy(const struct cd_toml *v);
/* Append key -> v to table t (takes v; the key is copied; no duplicate check). */
void cd_toml_table_put(struct cd_toml *t, const char *key, size_t key_len, struct cd_toml *v);

/*
 * Serialise table t as a TOML document into *out (appended, NUL-terminated,
 * malloc()ed; *out_len its length): plain keys first, then sub-tables as
 * [a.b] sections and arrays of tables as [[a.b]], as the toml crate does.
 * The output parses back to the same values.
 */
void cd_toml_write(const struct cd_toml *t, char **out, size_t *out_len);
