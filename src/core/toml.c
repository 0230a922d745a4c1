/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "core/toml.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/*
 * How a table or an array came to be, which decides what may extend it
 * later (TOML 1.0 "Table" and "Array of Tables"):
 *  - F_DEFINED: named by a [header] (a second [header] is a redefinition);
 *  - F_IMPLICIT: created as the parent of a [header] (a later [header] may
 *    define it once);
 *  - F_DOTTED: created by a dotted key (more dotted keys of the same
 *    section may add to it; no [header] may name it);
 *  - F_INLINE: an inline table, or a table inside one: closed for good;
 *  - F_AOT: an array made by [[header]] (static arrays never extend).
 */
#define F_DEFINED  1u
#define F_IMPLICIT 2u
#define F_DOTTED   4u
#define F_INLINE   8u
#define F_AOT	   16u

struct key {
	char *s; /* owned */
	size_t len;
};

struct keys {
	struct key *k;
	size_t n, cap;
};

struct parser {
	const char *s, *cur, *end;
	const char *line_start;
	unsigned line;
	unsigned depth;
	struct cd_toml_error *err;
};

static unsigned col_of(const struct parser *p, const char *at)
{
	unsigned col = 1;
	for (const char *q = p->line_start; q < at; q++)
		if (((unsigned char)*q & 0xc0) != 0x80)
			col++;
	return col;
}

static int CD_PRINTF(3, 4) fail_at(struct parser *p, const char *at, const char *fmt, ...)
{
	if (p->err && !p->err->msg[0]) {
		va_list ap;
		p->err->line = p->line;
		p->err->col = col_of(p, at);
		p->err->span = 1;
		va_start(ap, fmt);
		vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

#define fail(p, ...) fail_at((p), (p)->cur, __VA_ARGS__)

/* A failure about the key written at [start, end): its position and length. */
static int fail_key(struct parser *p, const char *start, const char *end, const char *msg)
{
	fail_at(p, start, "%s", msg);
	if (p->err && end > start)
		p->err->span = col_of(p, end) - col_of(p, start);
	return -EINVAL;
}

/* ---- values ---- */

static struct cd_toml *new_value(enum cd_toml_type t)
{
	struct cd_toml *v = cd_xmalloc(sizeof(*v));
	memset(v, 0, sizeof(*v));
	v->type = t;
	return v;
}

struct cd_toml *cd_toml_new_table(void)
{
	return new_value(CD_TOML_TABLE);
}

static bool has_text(enum cd_toml_type t)
{
	return t == CD_TOML_STRING || t == CD_TOML_DATETIME || t == CD_TOML_LOCAL_DATETIME ||
	       t == CD_TOML_LOCAL_DATE || t == CD_TOML_LOCAL_TIME;
}

struct cd_toml *cd_toml_free(struct cd_toml *v)
{
	if (!v)
		return NULL;
	if (has_text(v->type)) {
		free(v->u.str.s);
	} else if (v->type == CD_TOML_ARRAY) {
		for (size_t i = 0; i < v->u.arr.n; i++)
			cd_toml_free(v->u.arr.items[i]);
		free(v->u.arr.items);
	} else if (v->type == CD_TOML_TABLE) {
		for (size_t i = 0; i < v->u.tab.n; i++) {
			free(v->u.tab.kv[i].key);
			cd_toml_free(v->u.tab.kv[i].value);
		}
		free(v->u.tab.kv);
		free(v->u.tab.idx);
	}
	free(v);
	return NULL;
}

/* Tables past this many keys get a hash index: a file of a million keys stays linear. */
#define INDEX_FROM 16

static size_t hash_key(const char *k, size_t n)
{
	size_t h = 1469598103934665603ull & SIZE_MAX;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * (1099511628211ull & SIZE_MAX);
	return h;
}

static void index_put(struct cd_toml *t, size_t i)
{
	size_t m = t->u.tab.idx_cap - 1;
	size_t h = hash_key(t->u.tab.kv[i].key, t->u.tab.kv[i].key_len) & m;
	while (t->u.tab.idx[h])
		h = (h + 1) & m;
	t->u.tab.idx[h] = i + 1;
}

static void index_grow(struct cd_toml *t)
{
	free(t->u.tab.idx);
	t->u.tab.idx_cap = t->u.tab.idx_cap ? 2 * t->u.tab.idx_cap : 4 * INDEX_FROM;
	t->u.tab.idx = cd_xcalloc(t->u.tab.idx_cap, sizeof(*t->u.tab.idx));
	for (size_t i = 0; i < t->u.tab.n; i++)
		index_put(t, i);
}

struct cd_toml *cd_toml_get(const struct cd_toml *t, const char *key, size_t key_len)
{
	if (!t || t->type != CD_TOML_TABLE)
		return NULL;
	if (t->u.tab.idx) {
		size_t m = t->u.tab.idx_cap - 1;
		for (size_t h = hash_key(key, key_len) & m; t->u.tab.idx[h]; h = (h + 1) & m) {
			const struct cd_toml_kv *kv = &t->u.tab.kv[t->u.tab.idx[h] - 1];
			if (kv->key_len == key_len && !memcmp(kv->key, key, key_len))
				return kv->value;
		}
		return NULL;
	}
	for (size_t i = 0; i < t->u.tab.n; i++)
		if (t->u.tab.kv[i].key_len == key_len && !memcmp(t->u.tab.kv[i].key, key, key_len))
			return t->u.tab.kv[i].value;
	return NULL;
}

void cd_toml_table_put(struct cd_toml *t, const char *key, size_t key_len, struct cd_toml *v)
{
	if (t->u.tab.n == t->u.tab.cap) {
		t->u.tab.cap = t->u.tab.cap ? 2 * t->u.tab.cap : 4;
		t->u.tab.kv = cd_xreallocarray(t->u.tab.kv, t->u.tab.cap, sizeof(*t->u.tab.kv));
	}
	struct cd_toml_kv *kv = &t->u.tab.kv[t->u.tab.n++];
	kv->key = cd_xmalloc(key_len + 1);
	memcpy(kv->key, key, key_len);
	kv->key[key_len] = '\0';
	kv->key_len = key_len;
	kv->value = v;
	if (t->u.tab.n > INDEX_FROM) {
		if (2 * t->u.tab.n > t->u.tab.idx_cap)
			index_grow(t);
		else
			index_put(t, t->u.tab.n - 1);
	}
}

bool cd_toml_table_remove(struct cd_toml *t, const char *key, size_t key_len)
{
	if (!t || t->type != CD_TOML_TABLE)
		return false;
	for (size_t i = 0; i < t->u.tab.n; i++) {
		struct cd_toml_kv *kv = &t->u.tab.kv[i];
		if (kv->key_len != key_len || memcmp(kv->key, key, key_len))
			continue;
		free(kv->key);
		cd_toml_free(kv->value);
		memmove(kv, kv + 1, (t->u.tab.n - i - 1) * sizeof(*kv));
		t->u.tab.n--;
		if (t->u.tab.idx) {
			/* Positions moved: index again (same size). */
			memset(t->u.tab.idx, 0, t->u.tab.idx_cap * sizeof(*t->u.tab.idx));
			for (size_t k = 0; k < t->u.tab.n; k++)
				index_put(t, k);
		}
		return true;
	}
	return false;
}

static void array_push(struct cd_toml *a, struct cd_toml *v)
{
	if (a->u.arr.n == a->u.arr.cap) {
		a->u.arr.cap = a->u.arr.cap ? 2 * a->u.arr.cap : 4;
		a->u.arr.items = cd_xreallocarray(a->u.arr.items, a->u.arr.cap, sizeof(v));
	}
	a->u.arr.items[a->u.arr.n++] = v;
}

struct cd_toml *cd_toml_new_array(void)
{
	return new_value(CD_TOML_ARRAY);
}

void cd_toml_array_push(struct cd_toml *a, struct cd_toml *v)
{
	array_push(a, v);
}

struct cd_toml *cd_toml_copy(const struct cd_toml *v)
{
	struct cd_toml *c = new_value(v->type);
	c->flags = v->flags;
	if (has_text(v->type)) {
		c->u.str.s = cd_xmalloc(v->u.str.len + 1);
		memcpy(c->u.str.s, v->u.str.s, v->u.str.len + 1);
		c->u.str.len = v->u.str.len;
	} else if (v->type == CD_TOML_ARRAY) {
		for (size_t i = 0; i < v->u.arr.n; i++)
			array_push(c, cd_toml_copy(v->u.arr.items[i]));
	} else if (v->type == CD_TOML_TABLE) {
		for (size_t i = 0; i < v->u.tab.n; i++)
			cd_toml_table_put(c, v->u.tab.kv[i].key, v->u.tab.kv[i].key_len,
					  cd_toml_copy(v->u.tab.kv[i].value));
	} else {
		c->u = v->u;
	}
	return c;
}

static void set_text(struct cd_toml *v, struct cd_strbuf *sb)
{
	v->u.str.len = sb->len;
	v->u.str.s = cd_strbuf_steal(sb);
}

/* ---- lexing ---- */

static bool at_end(const struct parser *p)
{
	return p->cur >= p->end;
}

static bool peek_is(const struct parser *p, const char *lit)
{
	size_t n = strlen(lit);
	return (size_t)(p->end - p->cur) >= n && !memcmp(p->cur, lit, n);
}

static void skip_ws(struct parser *p)
{
	while (!at_end(p) && (*p->cur == ' ' || *p->cur == '\t'))
		p->cur++;
}

static bool is_newline(const struct parser *p)
{
	return peek_is(p, "\n") || peek_is(p, "\r\n");
}

static void take_newline(struct parser *p)
{
	p->cur += *p->cur == '\r' ? 2 : 1;
	p->line++;
	p->line_start = p->cur;
}

/* A character allowed in a comment or a literal string: not a control but tab. */
static bool is_control(unsigned char c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

static int skip_comment(struct parser *p)
{
	p->cur++; /* '#' */
	while (!at_end(p) && !is_newline(p)) {
		if (is_control((unsigned char)*p->cur))
			return fail(p, "control character in a comment");
		p->cur++;
	}
	return 0;
}

/* Whitespace, newlines and comments (inside arrays). */
static int skip_ws_nl(struct parser *p)
{
	for (;;) {
		skip_ws(p);
		if (at_end(p))
			return 0;
		if (*p->cur == '#') {
			if (skip_comment(p) < 0)
				return -EINVAL;
		} else if (is_newline(p)) {
			take_newline(p);
		} else {
			return 0;
		}
	}
}

/* After a key/value or a header: whitespace, an optional comment, then a newline or the end. */
static int end_of_line(struct parser *p)
{
	skip_ws(p);
	if (!at_end(p) && *p->cur == '#' && skip_comment(p) < 0)
		return -EINVAL;
	if (at_end(p))
		return 0;
	if (!is_newline(p))
		return fail(p, "expected newline, `#`");
	take_newline(p);
	return 0;
}

static void put_utf8(struct cd_strbuf *sb, uint32_t c)
{
	if (c < 0x80) {
		cd_strbuf_append_c(sb, (char)c);
	} else if (c < 0x800) {
		cd_strbuf_append_c(sb, (char)(0xc0 | (c >> 6)));
		cd_strbuf_append_c(sb, (char)(0x80 | (c & 0x3f)));
	} else if (c < 0x10000) {
		cd_strbuf_append_c(sb, (char)(0xe0 | (c >> 12)));
		cd_strbuf_append_c(sb, (char)(0x80 | ((c >> 6) & 0x3f)));
		cd_strbuf_append_c(sb, (char)(0x80 | (c & 0x3f)));
	} else {
		cd_strbuf_append_c(sb, (char)(0xf0 | (c >> 18)));
		cd_strbuf_append_c(sb, (char)(0x80 | ((c >> 12) & 0x3f)));
		cd_strbuf_append_c(sb, (char)(0x80 | ((c >> 6) & 0x3f)));
		cd_strbuf_append_c(sb, (char)(0x80 | (c & 0x3f)));
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* At a backslash in a basic string. */
static int escape(struct parser *p, struct cd_strbuf *sb)
{
	const char *at = p->cur;
	p->cur++;
	if (at_end(p))
		return fail_at(p, at, "invalid escape sequence");
	char c = *p->cur++;
	switch (c) {
	case 'b':
		cd_strbuf_append_c(sb, '\b');
		return 0;
	case 't':
		cd_strbuf_append_c(sb, '\t');
		return 0;
	case 'n':
		cd_strbuf_append_c(sb, '\n');
		return 0;
	case 'f':
		cd_strbuf_append_c(sb, '\f');
		return 0;
	case 'r':
		cd_strbuf_append_c(sb, '\r');
		return 0;
	case '"':
		cd_strbuf_append_c(sb, '"');
		return 0;
	case '\\':
		cd_strbuf_append_c(sb, '\\');
		return 0;
	case 'e': /* TOML 1.1, which the toml crate reads */
		cd_strbuf_append_c(sb, '\x1b');
		return 0;
	case 'x':
	case 'u':
	case 'U': {
		int n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
		uint32_t v = 0;
		for (int i = 0; i < n; i++) {
			int h = at_end(p) ? -1 : hexval(*p->cur);
			if (h < 0)
				return fail_at(p, at,
					       "invalid unicode escape: expected %d hex digits", n);
			v = v * 16 + (uint32_t)h;
			p->cur++;
		}
		if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
			return fail_at(p, at, "invalid unicode escape: not a Unicode scalar value");
		put_utf8(sb, v);
		return 0;
	}
	default:
		return fail_at(p, at, "invalid escape sequence");
	}
}

/* A string of any of the four kinds; p->cur at its first quote. */
static int string(struct parser *p, struct cd_strbuf *sb, bool allow_multi)
{
	const char q = *p->cur;
	const bool basic = q == '"';
	const char *start = p->cur;
	const char *triple = basic ? "\"\"\"" : "'''";
	if (allow_multi && peek_is(p, triple)) {
		p->cur += 3;
		if (is_newline(p))
			take_newline(p);
		for (;;) {
			if (at_end(p))
				return fail_at(p, start, "unterminated multi-line string");
			if (*p->cur == q) {
				size_t run = 0;
				while (p->cur + run < p->end && p->cur[run] == q)
					run++;
				if (run >= 3) {
					if (run > 5)
						return fail(
							p,
							"too many quotes at the end of a string");
					for (size_t i = 0; i < run - 3; i++)
						cd_strbuf_append_c(sb, q);
					p->cur += run;
					return 0;
				}
				for (size_t i = 0; i < run; i++)
					cd_strbuf_append_c(sb, q);
				p->cur += run;
			} else if (is_newline(p)) {
				cd_strbuf_append_n(sb, p->cur, *p->cur == '\r' ? 2 : 1);
				take_newline(p);
			} else if (basic && *p->cur == '\\') {
				/* A line-ending backslash eats the whitespace up to the next text. */
				const char *q2 = p->cur + 1;
				while (q2 < p->end && (*q2 == ' ' || *q2 == '\t'))
					q2++;
				if (q2 < p->end &&
				    (*q2 == '\n' ||
				     (*q2 == '\r' && q2 + 1 < p->end && q2[1] == '\n'))) {
					p->cur = q2;
					while (!at_end(p)) {
						if (is_newline(p))
							take_newline(p);
						else if (*p->cur == ' ' || *p->cur == '\t')
							p->cur++;
						else
							break;
					}
				} else if (escape(p, sb) < 0) {
					return -EINVAL;
				}
			} else if (is_control((unsigned char)*p->cur)) {
				return fail(p, "control character in a string");
			} else {
				cd_strbuf_append_c(sb, *p->cur++);
			}
		}
	}
	p->cur++;
	for (;;) {
		if (at_end(p) || is_newline(p))
			return fail(p, basic ? "invalid basic string, expected `\"`"
					     : "invalid literal string, expected `'`");
		char c = *p->cur;
		if (c == q) {
			p->cur++;
			return 0;
		}
		if (basic && c == '\\') {
			if (escape(p, sb) < 0)
				return -EINVAL;
		} else if (is_control((unsigned char)c)) {
			return fail(p, "control character in a string");
		} else {
			cd_strbuf_append_c(sb, c);
			p->cur++;
		}
	}
}

static bool is_bare(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

static void keys_done(struct keys *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->k[i].s);
	free(k->k);
	memset(k, 0, sizeof(*k));
}

/* A dotted key: segments separated by '.', whitespace allowed around the dots. */
static int parse_key(struct parser *p, struct keys *k)
{
	for (;;) {
		struct cd_strbuf sb = { 0 };
		if (at_end(p))
			return fail(p, "expected a key");
		if (*p->cur == '"' || *p->cur == '\'') {
			if (string(p, &sb, false) < 0) {
				cd_strbuf_done(&sb);
				return -EINVAL;
			}
		} else if (is_bare(*p->cur)) {
			while (!at_end(p) && is_bare(*p->cur))
				cd_strbuf_append_c(&sb, *p->cur++);
		} else {
			return fail(p, "invalid key");
		}
		if (k->n == CD_TOML_MAX_DEPTH) {
			cd_strbuf_done(&sb);
			return fail(p, "cannot recurse further; max recursion depth met");
		}
		if (k->n == k->cap) {
			k->cap = k->cap ? 2 * k->cap : 4;
			k->k = cd_xreallocarray(k->k, k->cap, sizeof(*k->k));
		}
		k->k[k->n].len = sb.len;
		k->k[k->n].s = sb.buf ? cd_strbuf_steal(&sb) : cd_xstrdup("");
		k->n++;
		skip_ws(p);
		if (at_end(p) || *p->cur != '.')
			return 0;
		p->cur++;
		skip_ws(p);
	}
}

/* ---- numbers and dates ---- */

static bool digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static int num2(const char *s)
{
	return (s[0] - '0') * 10 + (s[1] - '0');
}

static bool leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* YYYY-MM-DD at s (10 bytes available). */
static bool valid_date(const char *s)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	if (!digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2))
		return false;
	int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + num2(s + 2);
	int m = num2(s + 5), d = num2(s + 8);
	if (m < 1 || m > 12 || d < 1)
		return false;
	return d <= mdays[m - 1] + (m == 2 && leap(y));
}

/*
 * HH:MM[:SS[.frac]] at s[0..n) (seconds optional: TOML 1.1, as the toml
 * crate reads it), appended to out normalised (":00" added, the fraction cut
 * to nanoseconds as the crate keeps it): the length used, or 0 when it is
 * not one.
 */
static size_t valid_time(const char *s, size_t n, struct cd_strbuf *out)
{
	if (n < 5 || !digits(s, 2) || s[2] != ':' || !digits(s + 3, 2))
		return 0;
	if (num2(s) > 23 || num2(s + 3) > 59)
		return 0;
	if (n < 8 || s[5] != ':') {
		cd_strbuf_append_n(out, s, 5);
		cd_strbuf_append(out, ":00");
		return 5;
	}
	if (!digits(s + 6, 2) || num2(s + 6) > 60)
		return 0;
	cd_strbuf_append_n(out, s, 8);
	size_t i = 8;
	if (i < n && s[i] == '.') {
		i++;
		size_t f = i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == f)
			return 0;
		cd_strbuf_append_n(out, s + f - 1, (i - f > 9 ? 9 : i - f) + 1);
	}
	return i;
}

/* The token of a number or a date at p->cur: up to a delimiter. */
static size_t token_len(const struct parser *p)
{
	const char *q = p->cur;
	while (q < p->end && (is_bare(*q) || *q == '+' || *q == '.' || *q == ':'))
		q++;
	/* A date-time may separate its date and time with one space. */
	if (q - p->cur == 10 && q + 3 < p->end && q[0] == ' ' && q[1] >= '0' && q[1] <= '9' &&
	    q[2] >= '0' && q[2] <= '9' && q[3] == ':' && valid_date(p->cur)) {
		q++;
		while (q < p->end && (is_bare(*q) || *q == '+' || *q == '.' || *q == ':'))
			q++;
	}
	return (size_t)(q - p->cur);
}

static int datetime(struct parser *p, size_t n, struct cd_toml **ret)
{
	const char *s = p->cur;
	struct cd_strbuf sb = { 0 };
	enum cd_toml_type t;
	if (n >= 10 && s[4] == '-') {
		if (digits(s + 5, 2) && (num2(s + 5) < 1 || num2(s + 5) > 12))
			return fail(p, "invalid date, expected month between 01 and 12");
		if (!valid_date(s))
			return fail(p, "invalid date");
		cd_strbuf_append_n(&sb, s, 10);
		if (n == 10) {
			t = CD_TOML_LOCAL_DATE;
		} else {
			if (s[10] != 'T' && s[10] != 't' && s[10] != ' ')
				goto bad;
			cd_strbuf_append_c(&sb, 'T');
			size_t tl = valid_time(s + 11, n - 11, &sb);
			if (!tl)
				goto bad;
			size_t i = 11 + tl;
			if (i == n) {
				t = CD_TOML_LOCAL_DATETIME;
			} else if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
				cd_strbuf_append_c(&sb, 'Z');
				t = CD_TOML_DATETIME;
			} else if (i + 6 == n && (s[i] == '+' || s[i] == '-') &&
				   digits(s + i + 1, 2) && s[i + 3] == ':' &&
				   digits(s + i + 4, 2) && num2(s + i + 1) <= 23 &&
				   num2(s + i + 4) <= 59) {
				cd_strbuf_append_n(&sb, s + i, 6);
				t = CD_TOML_DATETIME;
			} else {
				goto bad;
			}
		}
	} else {
		if (valid_time(s, n, &sb) != n)
			goto bad;
		t = CD_TOML_LOCAL_TIME;
	}
	*ret = new_value(t);
	set_text(*ret, &sb);
	p->cur += n;
	return 0;
bad:
	cd_strbuf_done(&sb);
	return fail(p, "invalid date-time");
}

/* Digits of base with single underscores between them; copied without them to out. */
static bool digit_run(const char *s, size_t n, int base, struct cd_strbuf *out)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '_') {
			if (i == 0 || i + 1 == n || s[i - 1] == '_')
				return false;
			continue;
		}
		int h = hexval(s[i]);
		if (h < 0 || h >= base)
			return false;
		cd_strbuf_append_c(out, s[i]);
	}
	return true;
}

static int number(struct parser *p, size_t n, struct cd_toml **ret)
{
	const char *s = p->cur;
	struct cd_strbuf sb = { 0 };
	const char *at = s;
	size_t i = 0;
	bool neg = false;
	if (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-';
		cd_strbuf_append_c(&sb, s[0]);
		i = 1;
	}
	if (n - i == 3 && (!memcmp(s + i, "inf", 3) || !memcmp(s + i, "nan", 3))) {
		*ret = new_value(CD_TOML_FLOAT);
		(*ret)->u.f = s[i] == 'i' ? (neg ? -INFINITY : INFINITY) : (neg ? -NAN : NAN);
		p->cur += n;
		cd_strbuf_done(&sb);
		return 0;
	}
	if (i == 0 && n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b')) {
		int base = s[1] == 'x' ? 16 : s[1] == 'o' ? 8 : 2;
		uint64_t v = 0;
		if (!digit_run(s + 2, n - 2, base, &sb))
			goto bad;
		for (size_t k = 0; k < sb.len; k++) {
			uint64_t d = (uint64_t)hexval(sb.buf[k]);
			if (v > ((uint64_t)INT64_MAX - d) / (uint64_t)base) {
				cd_strbuf_done(&sb);
				return fail_at(p, at, "number too large to fit in target type");
			}
			v = v * (uint64_t)base + d;
		}
		*ret = new_value(CD_TOML_INTEGER);
		(*ret)->u.i = (int64_t)v;
		p->cur += n;
		cd_strbuf_done(&sb);
		return 0;
	}
	/* Decimal: int part, then an optional fraction and exponent. */
	size_t j = i;
	while (j < n && s[j] != '.' && s[j] != 'e' && s[j] != 'E')
		j++;
	if (!digit_run(s + i, j - i, 10, &sb))
		goto bad;
	if (s[i] == '0' && j - i > 1) {
		cd_strbuf_done(&sb);
		return fail_at(p, at, "unexpected leading zero, expected nothing");
	}
	bool is_float = j < n;
	if (j < n && s[j] == '.') {
		size_t k = j + 1;
		while (k < n && s[k] != 'e' && s[k] != 'E')
			k++;
		cd_strbuf_append_c(&sb, '.');
		if (!digit_run(s + j + 1, k - j - 1, 10, &sb))
			goto bad;
		j = k;
	}
	if (j < n) {
		cd_strbuf_append_c(&sb, 'e');
		j++;
		if (j < n && (s[j] == '+' || s[j] == '-'))
			cd_strbuf_append_c(&sb, s[j++]);
		if (!digit_run(s + j, n - j, 10, &sb))
			goto bad;
	}
	if (is_float) {
		char *endp = NULL;
		double d = strtod(sb.buf, &endp);
		if (!endp || *endp)
			goto bad;
		if (isinf(d)) {
			cd_strbuf_done(&sb);
			return fail_at(p, at, "floating-point number overflowed");
		}
		*ret = new_value(CD_TOML_FLOAT);
		(*ret)->u.f = d;
	} else {
		uint64_t v = 0;
		const char *q = sb.buf + (sb.buf[0] == '+' || sb.buf[0] == '-');
		uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
		for (; *q; q++) {
			uint64_t d = (uint64_t)(*q - '0');
			if (v > (lim - d) / 10) {
				cd_strbuf_done(&sb);
				return fail_at(p, at, "number too large to fit in target type");
			}
			v = v * 10 + d;
		}
		*ret = new_value(CD_TOML_INTEGER);
		(*ret)->u.i = neg ? (int64_t)(0 - v) : (int64_t)v;
	}
	cd_strbuf_done(&sb);
	p->cur += n;
	return 0;
bad:
	cd_strbuf_done(&sb);
	return fail_at(p, at, "invalid number");
}

/* ---- tables ---- */

static int keyval(struct parser *p, struct cd_toml *table);

static void freeze(struct cd_toml *v)
{
	if (v->type == CD_TOML_TABLE) {
		v->flags |= F_INLINE;
		for (size_t i = 0; i < v->u.tab.n; i++)
			freeze(v->u.tab.kv[i].value);
	} else if (v->type == CD_TOML_ARRAY) {
		for (size_t i = 0; i < v->u.arr.n; i++)
			freeze(v->u.arr.items[i]);
	}
}

static int value(struct parser *p, struct cd_toml **ret);

static int array(struct parser *p, struct cd_toml **ret)
{
	struct cd_toml *a = new_value(CD_TOML_ARRAY);
	p->cur++;
	for (;;) {
		if (skip_ws_nl(p) < 0)
			goto err;
		if (at_end(p)) {
			fail(p, "unclosed array, expected `]`");
			goto err;
		}
		if (*p->cur == ']')
			break;
		struct cd_toml *v = NULL;
		if (value(p, &v) < 0)
			goto err;
		array_push(a, v);
		if (skip_ws_nl(p) < 0)
			goto err;
		if (!at_end(p) && *p->cur == ',') {
			p->cur++;
			continue;
		}
		if (at_end(p) || *p->cur != ']') {
			fail(p, "expected `,` or `]`");
			goto err;
		}
		break;
	}
	p->cur++;
	freeze(a);
	*ret = a;
	return 0;
err:
	cd_toml_free(a);
	return -EINVAL;
}

/* TOML 1.1 (the toml crate's): newlines, comments and a trailing comma allowed inside. */
static int inline_table(struct parser *p, struct cd_toml **ret)
{
	struct cd_toml *t = cd_toml_new_table();
	p->cur++;
	for (;;) {
		if (skip_ws_nl(p) < 0)
			goto err;
		if (!at_end(p) && *p->cur == '}')
			break;
		if (keyval(p, t) < 0)
			goto err;
		if (skip_ws_nl(p) < 0)
			goto err;
		if (!at_end(p) && *p->cur == ',') {
			p->cur++;
			continue;
		}
		if (at_end(p) || *p->cur != '}') {
			fail(p, "expected `,` or `}`");
			goto err;
		}
		break;
	}
	p->cur++;
	freeze(t);
	*ret = t;
	return 0;
err:
	cd_toml_free(t);
	return -EINVAL;
}

static int value(struct parser *p, struct cd_toml **ret)
{
	if (at_end(p) || is_newline(p))
		return fail(p, "expected a value");
	char c = *p->cur;
	if (c == '"' || c == '\'') {
		struct cd_strbuf sb = { 0 };
		if (string(p, &sb, true) < 0) {
			cd_strbuf_done(&sb);
			return -EINVAL;
		}
		*ret = new_value(CD_TOML_STRING);
		if (!sb.buf)
			cd_strbuf_append(&sb, "");
		set_text(*ret, &sb);
		return 0;
	}
	if (c == '[' || c == '{') {
		if (p->depth >= CD_TOML_MAX_DEPTH)
			return fail(p, "cannot recurse further; max recursion depth met");
		p->depth++;
		int r = c == '[' ? array(p, ret) : inline_table(p, ret);
		p->depth--;
		return r;
	}
	size_t n = token_len(p);
	if (n == 4 && peek_is(p, "true")) {
		*ret = new_value(CD_TOML_BOOL);
		(*ret)->u.b = true;
		p->cur += 4;
		return 0;
	}
	if (n == 5 && peek_is(p, "false")) {
		*ret = new_value(CD_TOML_BOOL);
		p->cur += 5;
		return 0;
	}
	if (n == 0)
		return fail(p, "invalid string, expected `\"`, `'`");
	if (n >= 5 && ((p->cur[2] == ':' && p->cur[0] >= '0' && p->cur[0] <= '9') ||
		       (n >= 10 && p->cur[4] == '-' && digits(p->cur, 4))))
		return datetime(p, n, ret);
	if (c == '+' || c == '-' || (c >= '0' && c <= '9') || c == 'i' || c == 'n')
		return number(p, n, ret);
	if (c == 't' || c == 'f')
		return fail(p, c == 't' ? "invalid boolean, expected `true`"
					: "invalid boolean, expected `false`");
	return fail(p, "invalid string, expected `\"`, `'`");
}

/* The toml crate's names, for its "cannot extend" message. */
static const char *type_name(enum cd_toml_type t)
{
	switch (t) {
	case CD_TOML_STRING:
		return "string";
	case CD_TOML_INTEGER:
		return "integer";
	case CD_TOML_FLOAT:
		return "float";
	case CD_TOML_BOOL:
		return "boolean";
	case CD_TOML_DATETIME:
	case CD_TOML_LOCAL_DATETIME:
	case CD_TOML_LOCAL_DATE:
	case CD_TOML_LOCAL_TIME:
		return "datetime";
	case CD_TOML_ARRAY:
		return "array";
	case CD_TOML_TABLE:
	case CD_TOML_TYPE_COUNT:
		break;
	}
	return "table";
}

static int keyval(struct parser *p, struct cd_toml *table)
{
	struct keys k = { 0 };
	const char *start = p->cur;
	int r = parse_key(p, &k);
	if (r < 0)
		goto out;
	const char *kend = p->cur;
	while (kend > start && (kend[-1] == ' ' || kend[-1] == '\t'))
		kend--;
	if (at_end(p) || *p->cur != '=') {
		r = fail(p, "expected `.`, `=`");
		goto out;
	}
	p->cur++;
	skip_ws(p);
	struct cd_toml *v = NULL;
	r = value(p, &v);
	if (r < 0)
		goto out;
	struct cd_toml *t = table;
	for (size_t i = 0; i + 1 < k.n; i++) {
		struct cd_toml *c = cd_toml_get(t, k.k[i].s, k.k[i].len);
		if (!c) {
			c = cd_toml_new_table();
			c->flags = F_DOTTED;
			cd_toml_table_put(t, k.k[i].s, k.k[i].len, c);
		} else if (c->type != CD_TOML_TABLE) {
			cd_toml_free(v);
			r = fail_at(p, start, "cannot extend value of type %s with a dotted key",
				    type_name(c->type));
			goto out;
		} else if (!(c->flags & F_DOTTED) || (c->flags & F_INLINE)) {
			cd_toml_free(v);
			r = fail_key(p, start, kend, "duplicate key");
			goto out;
		}
		t = c;
	}
	if (cd_toml_get(t, k.k[k.n - 1].s, k.k[k.n - 1].len)) {
		cd_toml_free(v);
		r = fail_key(p, start, kend, "duplicate key");
		goto out;
	}
	cd_toml_table_put(t, k.k[k.n - 1].s, k.k[k.n - 1].len, v);
out:
	keys_done(&k);
	return r;
}

/* [a.b] or [[a.b]]: the table the following key/values go into. */
static int header(struct parser *p, struct cd_toml *root, struct cd_toml **cur)
{
	bool aot = peek_is(p, "[[");
	p->cur += aot ? 2 : 1;
	skip_ws(p);
	const char *start = p->cur;
	struct keys k = { 0 };
	int r = parse_key(p, &k);
	if (r < 0)
		goto out;
	const char *kend = p->cur;
	while (kend > start && (kend[-1] == ' ' || kend[-1] == '\t'))
		kend--;
	if (aot ? !peek_is(p, "]]") : !peek_is(p, "]")) {
		r = fail(p, aot ? "expected `.`, `]]`" : "expected `.`, `]`");
		goto out;
	}
	p->cur += aot ? 2 : 1;
	struct cd_toml *t = root;
	for (size_t i = 0; i + 1 < k.n; i++) {
		struct cd_toml *c = cd_toml_get(t, k.k[i].s, k.k[i].len);
		if (!c) {
			c = cd_toml_new_table();
			c->flags = F_IMPLICIT;
			cd_toml_table_put(t, k.k[i].s, k.k[i].len, c);
		} else if (c->type == CD_TOML_ARRAY && (c->flags & F_AOT) && c->u.arr.n) {
			c = c->u.arr.items[c->u.arr.n - 1];
		} else if (c->type != CD_TOML_TABLE || (c->flags & F_INLINE)) {
			r = fail_key(p, start, kend, "duplicate key");
			goto out;
		}
		t = c;
	}
	const struct key *last = &k.k[k.n - 1];
	struct cd_toml *c = cd_toml_get(t, last->s, last->len);
	if (aot) {
		if (!c) {
			c = new_value(CD_TOML_ARRAY);
			c->flags = F_AOT;
			cd_toml_table_put(t, last->s, last->len, c);
		} else if (c->type != CD_TOML_ARRAY || !(c->flags & F_AOT)) {
			r = fail_key(p, start, kend, "duplicate key");
			goto out;
		}
		struct cd_toml *e = cd_toml_new_table();
		e->flags = F_DEFINED;
		array_push(c, e);
		*cur = e;
	} else {
		if (!c) {
			c = cd_toml_new_table();
			c->flags = F_DEFINED;
			cd_toml_table_put(t, last->s, last->len, c);
		} else if (c->type != CD_TOML_TABLE || !(c->flags & F_IMPLICIT) ||
			   (c->flags & (F_DEFINED | F_DOTTED | F_INLINE))) {
			r = fail_key(p, start, kend, "duplicate key");
			goto out;
		} else {
			c->flags |= F_DEFINED;
		}
		*cur = c;
	}
out:
	keys_done(&k);
	return r;
}

/* The whole input must be UTF-8 (no overlongs, surrogates, or code points past U+10FFFF). */
static int check_utf8(struct parser *p)
{
	const unsigned char *s = (const unsigned char *)p->s, *e = (const unsigned char *)p->end;
	while (s < e) {
		unsigned char c = *s;
		size_t n;
		uint32_t cp;
		if (c < 0x80) {
			if (c == '\n') {
				p->line++;
				p->line_start = (const char *)s + 1;
			}
			s++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 2;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 3;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 4;
			cp = c & 0x07;
		} else {
			goto bad;
		}
		if ((size_t)(e - s) < n)
			goto bad;
		for (size_t i = 1; i < n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				goto bad;
			cp = (cp << 6) | (s[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			goto bad;
		s += n;
		continue;
	bad:
		return fail_at(p, (const char *)s, "invalid UTF-8");
	}
	p->line = 1;
	p->line_start = p->s;
	return 0;
}

int cd_toml_parse(const char *buf, size_t len, struct cd_toml **ret, struct cd_toml_error *err)
{
	struct parser p = {
		.s = buf,
		.cur = buf,
		.end = buf + len,
		.line_start = buf,
		.line = 1,
		.err = err,
	};
	if (err)
		memset(err, 0, sizeof(*err));
	*ret = NULL;
	if (check_utf8(&p) < 0)
		return -EINVAL;
	struct cd_toml *root = cd_toml_new_table();
	struct cd_toml *cur = root;
	/* A UTF-8 byte order mark may open the document. */
	if (peek_is(&p, "\xef\xbb\xbf"))
		p.cur += 3;
	for (;;) {
		skip_ws(&p);
		if (at_end(&p))
			break;
		int r = 0;
		if (*p.cur == '#') {
			r = skip_comment(&p);
		} else if (is_newline(&p)) {
			take_newline(&p);
			continue;
		} else if (*p.cur == '[') {
			r = header(&p, root, &cur);
			if (r >= 0)
				r = end_of_line(&p);
		} else {
			r = keyval(&p, cur);
			if (r >= 0)
				r = end_of_line(&p);
		}
		if (r < 0) {
			cd_toml_free(root);
			return -EINVAL;
		}
	}
	*ret = root;
	return 0;
}

/* ---- writer ---- */

static void write_key(struct cd_strbuf *sb, const char *k, size_t n)
{
	bool bare = n > 0;
	for (size_t i = 0; i < n && bare; i++)
		bare = is_bare(k[i]);
	if (bare) {
		cd_strbuf_append_n(sb, k, n);
		return;
	}
	cd_strbuf_append_c(sb, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)k[i];
		switch (c) {
		case '"':
			cd_strbuf_append(sb, "\\\"");
			break;
		case '\\':
			cd_strbuf_append(sb, "\\\\");
			break;
		case '\b':
			cd_strbuf_append(sb, "\\b");
			break;
		case '\t':
			cd_strbuf_append(sb, "\\t");
			break;
		case '\n':
			cd_strbuf_append(sb, "\\n");
			break;
		case '\f':
			cd_strbuf_append(sb, "\\f");
			break;
		case '\r':
			cd_strbuf_append(sb, "\\r");
			break;
		default:
			if (c < 0x20 || c == 0x7f)
				cd_strbuf_printf(sb, "\\u%04X", c);
			else
				cd_strbuf_append_c(sb, (char)c);
		}
	}
	cd_strbuf_append_c(sb, '"');
}

static void write_string(struct cd_strbuf *sb, const char *s, size_t n)
{
	/* Always quoted: a key's rules give the same escapes, bare never applies. */
	if (n == 0) {
		cd_strbuf_append(sb, "\"\"");
		return;
	}
	bool bare = true;
	for (size_t i = 0; i < n && bare; i++)
		bare = is_bare(s[i]);
	if (bare) {
		cd_strbuf_append_c(sb, '"');
		cd_strbuf_append_n(sb, s, n);
		cd_strbuf_append_c(sb, '"');
		return;
	}
	write_key(sb, s, n);
}

static void write_float(struct cd_strbuf *sb, double d)
{
	if (isnan(d)) {
		cd_strbuf_append(sb, signbit(d) ? "-nan" : "nan");
		return;
	}
	if (isinf(d)) {
		cd_strbuf_append(sb, d < 0 ? "-inf" : "inf");
		return;
	}
	char buf[40];
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	cd_strbuf_append(sb, buf);
	if (!strpbrk(buf, ".en"))
		cd_strbuf_append(sb, ".0");
}

static void write_inline(struct cd_strbuf *sb, const struct cd_toml *v)
{
	switch (v->type) {
	case CD_TOML_STRING:
		write_string(sb, v->u.str.s, v->u.str.len);
		break;
	case CD_TOML_INTEGER:
		cd_strbuf_printf(sb, "%" PRId64, v->u.i);
		break;
	case CD_TOML_FLOAT:
		write_float(sb, v->u.f);
		break;
	case CD_TOML_BOOL:
		cd_strbuf_append(sb, v->u.b ? "true" : "false");
		break;
	case CD_TOML_DATETIME:
	case CD_TOML_LOCAL_DATETIME:
	case CD_TOML_LOCAL_DATE:
	case CD_TOML_LOCAL_TIME:
		cd_strbuf_append_n(sb, v->u.str.s, v->u.str.len);
		break;
	case CD_TOML_ARRAY:
		cd_strbuf_append_c(sb, '[');
		for (size_t i = 0; i < v->u.arr.n; i++) {
			if (i)
				cd_strbuf_append(sb, ", ");
			write_inline(sb, v->u.arr.items[i]);
		}
		cd_strbuf_append_c(sb, ']');
		break;
	case CD_TOML_TABLE:
		if (!v->u.tab.n) {
			cd_strbuf_append(sb, "{}");
			break;
		}
		cd_strbuf_append(sb, "{ ");
		for (size_t i = 0; i < v->u.tab.n; i++) {
			if (i)
				cd_strbuf_append(sb, ", ");
			write_key(sb, v->u.tab.kv[i].key, v->u.tab.kv[i].key_len);
			cd_strbuf_append(sb, " = ");
			write_inline(sb, v->u.tab.kv[i].value);
		}
		cd_strbuf_append(sb, " }");
		break;
	case CD_TOML_TYPE_COUNT:
		break;
	}
}

/* A non-empty array whose items are all tables: written as [[...]] sections. */
static bool is_table_array(const struct cd_toml *v)
{
	if (v->type != CD_TOML_ARRAY || !v->u.arr.n)
		return false;
	for (size_t i = 0; i < v->u.arr.n; i++)
		if (v->u.arr.items[i]->type != CD_TOML_TABLE)
			return false;
	return true;
}

static bool is_section(const struct cd_toml *v)
{
	return v->type == CD_TOML_TABLE || is_table_array(v);
}

struct path {
	const char *k[CD_TOML_MAX_DEPTH * 2 + 2];
	size_t len[CD_TOML_MAX_DEPTH * 2 + 2];
	size_t n;
};

static void write_header(struct cd_strbuf *sb, const struct path *path, bool aot)
{
	if (sb->len)
		cd_strbuf_append_c(sb, '\n');
	cd_strbuf_append(sb, aot ? "[[" : "[");
	for (size_t i = 0; i < path->n; i++) {
		if (i)
			cd_strbuf_append_c(sb, '.');
		write_key(sb, path->k[i], path->len[i]);
	}
	cd_strbuf_append(sb, aot ? "]]\n" : "]\n");
}

static void write_body(struct cd_strbuf *sb, const struct cd_toml *t, struct path *path)
{
	/* Past the path's room (deeper than a parsed document gets), inline is still TOML. */
	const bool flat = path->n == CD_ARRAY_SIZE(path->k);
	for (size_t i = 0; i < t->u.tab.n; i++) {
		const struct cd_toml_kv *kv = &t->u.tab.kv[i];
		if (!flat && is_section(kv->value))
			continue;
		write_key(sb, kv->key, kv->key_len);
		cd_strbuf_append(sb, " = ");
		write_inline(sb, kv->value);
		cd_strbuf_append_c(sb, '\n');
	}
	for (size_t i = 0; i < t->u.tab.n && !flat; i++) {
		const struct cd_toml_kv *kv = &t->u.tab.kv[i];
		if (!is_section(kv->value))
			continue;
		path->k[path->n] = kv->key;
		path->len[path->n++] = kv->key_len;
		if (kv->value->type == CD_TOML_TABLE) {
			const struct cd_toml *c = kv->value;
			bool plain = c->u.tab.n == 0 || path->n == CD_ARRAY_SIZE(path->k);
			for (size_t j = 0; j < c->u.tab.n && !plain; j++)
				plain = !is_section(c->u.tab.kv[j].value);
			if (plain)
				write_header(sb, path, false);
			write_body(sb, c, path);
		} else {
			for (size_t j = 0; j < kv->value->u.arr.n; j++) {
				write_header(sb, path, true);
				write_body(sb, kv->value->u.arr.items[j], path);
			}
		}
		path->n--;
	}
}

void cd_toml_write(const struct cd_toml *t, char **out, size_t *out_len)
{
	struct cd_strbuf sb = { 0 };
	struct path *path = cd_xmalloc(sizeof(*path));
	path->n = 0;
	write_body(&sb, t, path);
	free(path);
	*out_len = sb.len;
	*out = cd_strbuf_steal(&sb);
}

bool cd_toml_equal(const struct cd_toml *a, const struct cd_toml *b)
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
			if (!cd_toml_equal(a->u.arr.items[i], b->u.arr.items[i]))
				return false;
		return true;
	case CD_TOML_TABLE:
		if (a->u.tab.n != b->u.tab.n)
			return false;
		for (size_t i = 0; i < a->u.tab.n; i++) {
			const struct cd_toml_kv *kv = &a->u.tab.kv[i];
			const struct cd_toml *o = cd_toml_get(b, kv->key, kv->key_len);
			if (!o || !cd_toml_equal(kv->value, o))
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
