/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Strict RFC 8259 reader with source positions (see json.h for the contract).
 *
 * Design notes:
 * - The parser is an explicit state machine with a heap-allocated stack of
 *   open containers, so hostile nesting can never exhaust the C stack; the
 *   depth limit only bounds memory and what callers must walk afterwards.
 * - Every value is linked into its parent the moment it is created, so on
 *   any error freeing the root releases everything built so far.
 * - Strings are scanned in two passes: a memchr() pass finds the closing
 *   quote (an upper bound for the decoded size, since decoding never
 *   expands), then a decoding pass validates and copies runs of plain ASCII
 *   with memcpy(). No per-byte function calls in the hot loops.
 * - Duplicate keys are checked when an object closes: pairwise for small
 *   objects, by sorting for large ones. Sorting is O(n log n) in the worst
 *   case, unlike an unkeyed hash table, which a peer could flood with
 *   colliding keys.
 * - Only '\n' starts a new line for positions; columns count bytes.
 */
#include "core/json.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define DEFAULT_MAX_DEPTH 512u
/* Objects up to this size are checked for duplicates pairwise. */
#define SMALL_OBJECT 16u

struct frame {
	struct cd_json *node; /* ARRAY or OBJECT being filled */
	size_t cap;	      /* allocated items/members */
};

struct parser {
	const unsigned char *buf, *p, *end;
	const unsigned char *line_start; /* first byte of the current line */
	unsigned line;

	size_t nvalues, max_values;
	unsigned max_depth;

	struct cd_json *root;
	struct frame *stack;
	size_t depth, stack_cap;

	struct cd_json_error *err;
};

struct pos {
	unsigned line, col;
	size_t offset;
};

static unsigned clamp_u(size_t v)
{
	return v > UINT_MAX ? UINT_MAX : (unsigned)v;
}

/* Position of a byte on the current line. */
static struct pos pos_at(const struct parser *ps, const unsigned char *p)
{
	return (struct pos){
		.line = ps->line,
		.col = clamp_u((size_t)(p - ps->line_start) + 1),
		.offset = (size_t)(p - ps->buf),
	};
}

static int CD_PRINTF(4, 5) fail(struct parser *ps, int r, struct pos at, const char *fmt, ...)
{
	if (ps->err) {
		va_list ap;
		va_start(ap, fmt);
		ps->err->line = at.line;
		ps->err->col = at.col;
		ps->err->offset = at.offset;
		vsnprintf(ps->err->msg, sizeof(ps->err->msg), fmt, ap);
		va_end(ap);
	}
	return r;
}

/* Human description of an unexpected byte; always ASCII so messages stay valid UTF-8. */
static const char *describe_byte(unsigned char c, char *buf, size_t n)
{
	if (c == 0)
		snprintf(buf, n, "NUL byte");
	else if (c > 0x20 && c < 0x7f)
		snprintf(buf, n, "character '%c'", c);
	else
		snprintf(buf, n, "byte 0x%02X", c);
	return buf;
}

/*
 * Quote a decoded key for an error message: printable ASCII and complete
 * UTF-8 sequences verbatim, '"' and '\' escaped, other bytes (including NUL
 * from "\u0000") as \u00XX. Truncated with "..." so the result fits and is
 * still valid UTF-8 (keys were validated when decoded).
 */
static void quote_key(const char *key, size_t len, char *out, size_t outsz)
{
	static const char hex[] = "0123456789ABCDEF";
	const size_t budget = outsz > 64 ? 64 : outsz - 4; /* room for "..." + NUL */
	size_t o = 0;

	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)key[i];
		size_t n = 1, w;
		enum {
			VERBATIM,
			BACKSLASH,
			UESCAPE
		} how = VERBATIM;
		if (c >= 0xf0)
			n = 4;
		else if (c >= 0xe0)
			n = 3;
		else if (c >= 0xc0)
			n = 2;
		if (c < 0x20 || c == 0x7f) {
			how = UESCAPE;
			w = 6;
		} else if (c == '"' || c == '\\') {
			how = BACKSLASH;
			w = 2;
		} else {
			w = n;
		}
		if (o + w > budget || i + n > len) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (how == UESCAPE) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[c >> 4];
			out[o + 5] = hex[c & 15];
		} else if (how == BACKSLASH) {
			out[o] = '\\';
			out[o + 1] = (char)c;
		} else {
			memcpy(out + o, key + i, n);
		}
		o += w;
		i += n;
	}
	out[o] = '\0';
}

static inline void skip_ws(struct parser *ps)
{
	const unsigned char *p = ps->p, *end = ps->end;

	while (p < end) {
		unsigned char c = *p;
		if (c == ' ' || c == '\t' || c == '\r') {
			p++;
		} else if (c == '\n') {
			p++;
			ps->line++;
			ps->line_start = p;
		} else {
			break;
		}
	}
	ps->p = p;
}

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* Four hex digits at p (caller checked they are in bounds); -1 if not hex. */
static long hex4(const unsigned char *p)
{
	long v = 0;
	for (int i = 0; i < 4; i++) {
		int h = cd_unhex(p[i]);
		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

static size_t put_utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Length of the valid UTF-8 sequence starting at p (lead byte >= 0x80), or
 * 0 with *why set. Follows Unicode Table 3-7 ("well-formed byte sequences"):
 * the second-byte ranges after E0, ED, F0 and F4 are what exclude overlongs,
 * UTF-16 surrogates (U+D800..U+DFFF) and code points above U+10FFFF.
 */
static size_t utf8_seq(const unsigned char *p, const unsigned char *limit, const char **why)
{
	unsigned char c = p[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0xc0) {
		*why = "unexpected continuation byte";
		return 0;
	}
	if (c < 0xc2) {
		*why = "overlong encoding";
		return 0;
	}
	if (c < 0xe0) {
		n = 2;
	} else if (c < 0xf0) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c < 0xf5) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		*why = c < 0xf8 ? "code point above U+10FFFF" : "invalid byte";
		return 0;
	}

	if ((size_t)(limit - p) < 2 || p[1] < 0x80 || p[1] > 0xbf) {
		*why = "truncated sequence";
		return 0;
	}
	if (p[1] < lo || p[1] > hi) {
		if (c == 0xed)
			*why = "UTF-16 surrogate encoded in UTF-8";
		else if (c == 0xf4)
			*why = "code point above U+10FFFF";
		else
			*why = "overlong encoding";
		return 0;
	}
	for (size_t i = 2; i < n; i++) {
		if ((size_t)(limit - p) <= i || p[i] < 0x80 || p[i] > 0xbf) {
			*why = "truncated sequence";
			return 0;
		}
	}
	return n;
}

/*
 * Parse the string whose opening quote is at ps->p. On success the decoded,
 * NUL-terminated copy is returned in *ret (length *ret_len) and ps->p is past
 * the closing quote.
 */
static int parse_string(struct parser *ps, char **ret, size_t *ret_len)
{
	const unsigned char *start = ps->p + 1, *end = ps->end, *limit, *p;
	struct pos open = pos_at(ps, ps->p);
	char *out, *o, whybuf[32];
	const char *why;

	/*
	 * Pass 1: find the closing quote. A quote is escaped iff it is preceded
	 * by an odd run of backslashes; pass 2 follows the same grammar, so
	 * both agree, and pass 2 is additionally bounded by `limit`.
	 */
	limit = end;
	for (p = start; p < end;) {
		const unsigned char *q = memchr(p, '"', (size_t)(end - p));
		if (!q)
			break;
		size_t bs = 0;
		while (q - bs > start && q[-(ptrdiff_t)bs - 1] == '\\')
			bs++;
		if (bs % 2 == 0) {
			limit = q;
			break;
		}
		p = q + 1;
	}

	out = o = cd_xmalloc((size_t)(limit - start) + 1);

	/* Pass 2: validate and decode. */
	for (p = start;;) {
		const unsigned char *run = p;
		while (p < limit && *p >= 0x20 && *p < 0x80 && *p != '\\')
			p++;
		memcpy(o, run, (size_t)(p - run));
		o += p - run;

		if (p >= limit)
			break;
		unsigned char c = *p;
		if (c == '\\') {
			if (limit - p < 2) {
				/* only possible when limit == end */
				free(out);
				return fail(ps, -EINVAL, open, "unterminated string");
			}
			switch (p[1]) {
			case '"':
			case '\\':
			case '/':
				*o++ = (char)p[1];
				break;
			case 'b':
				*o++ = '\b';
				break;
			case 'f':
				*o++ = '\f';
				break;
			case 'n':
				*o++ = '\n';
				break;
			case 'r':
				*o++ = '\r';
				break;
			case 't':
				*o++ = '\t';
				break;
			case 'u': {
				long cp = limit - p >= 6 ? hex4(p + 2) : -1;
				if (cp < 0) {
					free(out);
					return fail(ps, -EINVAL, pos_at(ps, p),
						    "invalid \\u escape (expected 4 hex digits)");
				}
				if (cp >= 0xd800 && cp <= 0xdbff) {
					/* A high surrogate must be followed by an escaped low one. */
					long lo = -1;
					if (limit - p >= 12 && p[6] == '\\' && p[7] == 'u')
						lo = hex4(p + 8);
					if (lo < 0xdc00 || lo > 0xdfff) {
						free(out);
						return fail(
							ps, -EINVAL, pos_at(ps, p),
							"unpaired UTF-16 surrogate in \\u escape");
					}
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					p += 6;
				} else if (cp >= 0xdc00 && cp <= 0xdfff) {
					free(out);
					return fail(ps, -EINVAL, pos_at(ps, p),
						    "unpaired UTF-16 surrogate in \\u escape");
				}
				/* \u0000 is kept: strings carry their length. */
				o += put_utf8(o, (unsigned long)cp);
				p += 4;
				break;
			}
			default:
				free(out);
				return fail(ps, -EINVAL, pos_at(ps, p),
					    "invalid escape sequence: %s after '\\'",
					    describe_byte(p[1], whybuf, sizeof(whybuf)));
			}
			p += 2;
		} else if (c < 0x20) {
			/* RFC 8259 section 7: control characters must be escaped. */
			free(out);
			if (c == 0)
				return fail(ps, -EINVAL, pos_at(ps, p), "NUL byte in string");
			return fail(ps, -EINVAL, pos_at(ps, p),
				    "unescaped control character 0x%02X in string", c);
		} else {
			size_t n = utf8_seq(p, limit, &why);
			if (!n) {
				free(out);
				return fail(ps, -EINVAL, pos_at(ps, p),
					    "invalid UTF-8 in string (%s)", why);
			}
			memcpy(o, p, n);
			o += n;
			p += n;
		}
	}

	if (limit == end) {
		free(out);
		return fail(ps, -EINVAL, open, "unterminated string");
	}
	*o = '\0';
	*ret = out;
	*ret_len = (size_t)(o - out);
	ps->p = limit + 1;
	return 0;
}

/* RFC 8259 section 6 grammar; the literal text is kept as written. */
static int parse_number(struct parser *ps, char **ret)
{
	const unsigned char *start = ps->p, *p = ps->p, *end = ps->end;
	char buf[32];

	if (*p == '-')
		p++;
	if (p >= end)
		return fail(ps, -EINVAL, pos_at(ps, p),
			    "unexpected end of input, invalid number: expected a digit after '-'");
	if (!is_digit(*p))
		return fail(ps, -EINVAL, pos_at(ps, p),
			    "invalid number: expected a digit after '-', found %s",
			    describe_byte(*p, buf, sizeof(buf)));
	if (*p == '0') {
		p++;
		if (p < end && is_digit(*p))
			return fail(ps, -EINVAL, pos_at(ps, start),
				    "invalid number: leading zeros are not allowed");
	} else {
		while (p < end && is_digit(*p))
			p++;
	}
	if (p < end && *p == '.') {
		p++;
		if (p >= end || !is_digit(*p))
			return fail(ps, -EINVAL, pos_at(ps, p),
				    "invalid number: expected a digit after the decimal point");
		while (p < end && is_digit(*p))
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (p >= end || !is_digit(*p))
			return fail(ps, -EINVAL, pos_at(ps, p),
				    "invalid number: expected a digit in the exponent");
		while (p < end && is_digit(*p))
			p++;
	}
	*ret = cd_xstrndup((const char *)start, (size_t)(p - start));
	ps->p = p;
	return 0;
}

/* Create a value at the current position and link it into the open container. */
static struct cd_json *new_value(struct parser *ps, enum cd_json_type t, struct pos at)
{
	struct cd_json *v = cd_xcalloc(1, sizeof(*v));

	v->type = t;
	v->line = at.line;
	v->col = at.col;
	if (ps->depth == 0) {
		ps->root = v;
		return v;
	}
	struct frame *f = &ps->stack[ps->depth - 1];
	if (f->node->type == CD_JSON_ARRAY) {
		struct cd_json *a = f->node;
		if (a->u.arr.n == f->cap) {
			f->cap = f->cap ? f->cap * 2 : 4;
			a->u.arr.items =
				cd_xreallocarray(a->u.arr.items, f->cap, sizeof(*a->u.arr.items));
		}
		a->u.arr.items[a->u.arr.n++] = v;
	} else {
		/* the member was pushed when its key was read */
		f->node->u.obj.members[f->node->u.obj.n - 1].value = v;
	}
	return v;
}

static int member_cmp(const void *a, const void *b)
{
	const struct cd_json_member *x = *(const struct cd_json_member *const *)a;
	const struct cd_json_member *y = *(const struct cd_json_member *const *)b;

	if (x->key_len != y->key_len)
		return x->key_len < y->key_len ? -1 : 1;
	int c = memcmp(x->key, y->key, x->key_len);
	if (c)
		return c;
	/* Ties in source order, so each group's second entry is its first repeat. */
	return x < y ? -1 : x > y;
}

static bool same_key(const struct cd_json_member *x, const struct cd_json_member *y)
{
	return x->key_len == y->key_len && memcmp(x->key, y->key, x->key_len) == 0;
}

/*
 * Refuse duplicate keys. Reports the earliest member (in source order) that
 * repeats an earlier key, whichever method is used.
 */
static int check_duplicates(struct parser *ps, const struct cd_json *obj)
{
	const struct cd_json_member *m = obj->u.obj.members, *dup = NULL;
	size_t n = obj->u.obj.n;
	char q[80];

	if (n < 2)
		return 0;
	if (n <= SMALL_OBJECT) {
		for (size_t j = 1; j < n && !dup; j++)
			for (size_t i = 0; i < j; i++)
				if (same_key(&m[i], &m[j])) {
					dup = &m[j];
					break;
				}
	} else {
		const struct cd_json_member **v = cd_xreallocarray(NULL, n, sizeof(*v));
		for (size_t i = 0; i < n; i++)
			v[i] = &m[i];
		qsort(v, n, sizeof(*v), member_cmp);
		for (size_t i = 1; i < n; i++) {
			/* v[i] repeats v[i-1]; only a group's second entry can be earliest */
			if (same_key(v[i - 1], v[i]) && (i < 2 || !same_key(v[i - 2], v[i - 1])) &&
			    (!dup || v[i] < dup))
				dup = v[i];
		}
		free(v);
	}
	if (!dup)
		return 0;
	quote_key(dup->key, dup->key_len, q, sizeof(q));
	/* Members store no offset; cd_json_parse() derives it from line/col (SIZE_MAX marks it). */
	return fail(ps, -EINVAL,
		    (struct pos){ .line = dup->line, .col = dup->col, .offset = SIZE_MAX },
		    "duplicate object key \"%s\"", q);
}

static int push_frame(struct parser *ps, struct cd_json *node)
{
	if (ps->depth == ps->stack_cap) {
		ps->stack_cap = ps->stack_cap ? ps->stack_cap * 2 : 16;
		ps->stack = cd_xreallocarray(ps->stack, ps->stack_cap, sizeof(*ps->stack));
	}
	ps->stack[ps->depth++] = (struct frame){ .node = node, .cap = 0 };
	return 0;
}

/*
 * Parse states: expecting a value, expecting an object key, or having just
 * finished a value (expecting ',' / a closing bracket / end of input).
 */
enum state {
	ST_VALUE,
	ST_KEY,
	ST_AFTER,
};

static int parse_document(struct parser *ps)
{
	enum state st = ST_VALUE;
	char cb[32];
	int r;

	for (;;) {
		switch (st) {
		case ST_VALUE: {
			skip_ws(ps);
			const unsigned char *p = ps->p;
			struct pos at = pos_at(ps, p);
			if (p >= ps->end) {
				if (!ps->root)
					return fail(ps, -EINVAL, at,
						    "empty document (expected a JSON value)");
				return fail(ps, -EINVAL, at,
					    "unexpected end of input, expected a value");
			}
			unsigned char c = *p;
			/* Every scalar, array and object counts against max_values. */
			if (ps->max_values && ps->nvalues >= ps->max_values)
				return fail(ps, -E2BIG, at, "too many JSON values (limit %zu)",
					    ps->max_values);

			if (c == '{' || c == '[') {
				if (ps->depth >= ps->max_depth)
					return fail(ps, -E2BIG, at, "too deeply nested (limit %u)",
						    ps->max_depth);
				ps->nvalues++;
				struct cd_json *v = new_value(
					ps, c == '{' ? CD_JSON_OBJECT : CD_JSON_ARRAY, at);
				push_frame(ps, v);
				ps->p++;
				skip_ws(ps);
				if (ps->p < ps->end && *ps->p == (c == '{' ? '}' : ']')) {
					/* empty container: close right away */
					ps->p++;
					ps->depth--;
					st = ST_AFTER;
				} else {
					st = c == '{' ? ST_KEY : ST_VALUE;
				}
				break;
			}

			ps->nvalues++;
			if (c == '"') {
				char *s = NULL;
				size_t n = 0;
				r = parse_string(ps, &s, &n);
				if (r < 0)
					return r;
				struct cd_json *v = new_value(ps, CD_JSON_STRING, at);
				v->u.str.s = s;
				v->u.str.len = n;
			} else if (c == '-' || is_digit(c)) {
				char *text = NULL;
				r = parse_number(ps, &text);
				if (r < 0)
					return r;
				new_value(ps, CD_JSON_NUMBER, at)->u.num.text = text;
			} else if (c == 't' || c == 'f' || c == 'n') {
				static const struct {
					const char *text;
					enum cd_json_type type;
				} lits[] = {
					{ "true", CD_JSON_TRUE },
					{ "false", CD_JSON_FALSE },
					{ "null", CD_JSON_NULL },
				};
				/* The whole run of letters must be the literal: "truex" is not
				 * "true" followed by garbage, it is a bad literal. */
				const unsigned char *q = p;
				while (q < ps->end &&
				       ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
					is_digit(*q) || *q == '_'))
					q++;
				size_t n = (size_t)(q - p);
				size_t i;
				for (i = 0; i < CD_ARRAY_SIZE(lits); i++)
					if (strlen(lits[i].text) == n &&
					    memcmp(lits[i].text, p, n) == 0)
						break;
				if (i == CD_ARRAY_SIZE(lits))
					return fail(
						ps, -EINVAL, at,
						"invalid literal (expected true, false or null)");
				new_value(ps, lits[i].type, at);
				ps->p = q;
			} else {
				return fail(ps, -EINVAL, at, "unexpected %s, expected a value",
					    describe_byte(c, cb, sizeof(cb)));
			}
			st = ST_AFTER;
			break;
		}

		case ST_KEY: {
			/* ws already skipped */
			const unsigned char *p = ps->p;
			struct pos at = pos_at(ps, p);
			if (p >= ps->end)
				return fail(ps, -EINVAL, at,
					    "unexpected end of input in object, expected a key");
			if (*p != '"')
				return fail(ps, -EINVAL, at, "unexpected %s, expected a string key",
					    describe_byte(*p, cb, sizeof(cb)));
			char *key = NULL;
			size_t n = 0;
			r = parse_string(ps, &key, &n);
			if (r < 0)
				return r;
			struct frame *f = &ps->stack[ps->depth - 1];
			struct cd_json *o = f->node;
			if (o->u.obj.n == f->cap) {
				f->cap = f->cap ? f->cap * 2 : 4;
				o->u.obj.members = cd_xreallocarray(o->u.obj.members, f->cap,
								    sizeof(*o->u.obj.members));
			}
			o->u.obj.members[o->u.obj.n++] = (struct cd_json_member){
				.key = key,
				.key_len = n,
				.line = at.line,
				.col = at.col,
			};
			skip_ws(ps);
			if (ps->p >= ps->end)
				return fail(ps, -EINVAL, pos_at(ps, ps->p),
					    "unexpected end of input, expected ':'");
			if (*ps->p != ':')
				return fail(ps, -EINVAL, pos_at(ps, ps->p),
					    "unexpected %s, expected ':' after object key",
					    describe_byte(*ps->p, cb, sizeof(cb)));
			ps->p++;
			st = ST_VALUE;
			break;
		}

		case ST_AFTER: {
			skip_ws(ps);
			if (ps->depth == 0) {
				if (ps->p < ps->end)
					return fail(ps, -EINVAL, pos_at(ps, ps->p),
						    "unexpected %s after the top-level value",
						    describe_byte(*ps->p, cb, sizeof(cb)));
				return 0;
			}
			struct cd_json *node = ps->stack[ps->depth - 1].node;
			bool is_obj = node->type == CD_JSON_OBJECT;
			char close = is_obj ? '}' : ']';
			if (ps->p >= ps->end)
				return fail(ps, -EINVAL, pos_at(ps, ps->p),
					    "unexpected end of input, unterminated %s (opened at "
					    "line %u column %u)",
					    is_obj ? "object" : "array", node->line, node->col);
			unsigned char c = *ps->p;
			if (c == ',') {
				struct pos comma = pos_at(ps, ps->p);
				ps->p++;
				skip_ws(ps);
				if (ps->p < ps->end && *ps->p == close)
					return fail(ps, -EINVAL, comma, "trailing comma");
				st = is_obj ? ST_KEY : ST_VALUE;
			} else if (c == (unsigned char)close) {
				ps->p++;
				if (is_obj) {
					r = check_duplicates(ps, node);
					if (r < 0)
						return r;
				}
				ps->depth--;
				st = ST_AFTER;
			} else {
				return fail(ps, -EINVAL, pos_at(ps, ps->p),
					    "unexpected %s, expected ',' or '%c'",
					    describe_byte(c, cb, sizeof(cb)), close);
			}
			break;
		}
		}
	}
}

int cd_json_parse(const char *buf, size_t len, const struct cd_json_limits *lim,
		  struct cd_json **ret, struct cd_json_error *err)
{
	/* (NULL, 0) is an empty document; avoid arithmetic on a null pointer */
	const unsigned char *b = buf ? (const unsigned char *)buf : (const unsigned char *)"";
	struct parser ps = {
		.buf = b,
		.p = b,
		.end = b + (buf ? len : 0),
		.line_start = b,
		.line = 1,
		.max_values = lim ? lim->max_values : 0,
		.max_depth = lim && lim->max_depth ? lim->max_depth : DEFAULT_MAX_DEPTH,
		.err = err,
	};
	int r;

	*ret = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	if (!buf && len)
		return fail(&ps, -EINVAL, pos_at(&ps, b), "no input buffer");

	if (lim && lim->max_bytes && len > lim->max_bytes) {
		/* Point at the first byte beyond the limit. */
		const unsigned char *q = ps.buf, *stop = ps.buf + lim->max_bytes, *nl;
		while ((nl = memchr(q, '\n', (size_t)(stop - q)))) {
			ps.line++;
			q = nl + 1;
		}
		ps.line_start = q;
		return fail(&ps, -E2BIG, pos_at(&ps, stop), "document too large (limit %zu bytes)",
			    lim->max_bytes);
	}

	r = parse_document(&ps);
	free(ps.stack);
	if (r < 0) {
		/* Duplicate-key errors know only line/col; derive the offset. */
		if (err && err->offset == SIZE_MAX) {
			const unsigned char *q = ps.buf, *nl;
			for (unsigned l = 1;
			     l < err->line && (nl = memchr(q, '\n', (size_t)(ps.end - q))); l++)
				q = nl + 1;
			err->offset = (size_t)(q - ps.buf) + err->col - 1;
		}
		cd_json_free(ps.root);
		return r;
	}
	*ret = ps.root;
	return 0;
}

static void free_scalar(struct cd_json *v)
{
	if (v->type == CD_JSON_STRING)
		free(v->u.str.s);
	else if (v->type == CD_JSON_NUMBER)
		free(v->u.num.text);
	free(v);
}

/*
 * Iterative so that a deep tree (max_depth is caller-chosen) cannot
 * overflow the C stack: containers are emptied from the back, children
 * pushed on an explicit stack.
 */
struct cd_json *cd_json_free(struct cd_json *v)
{
	struct cd_json **stack = NULL;
	size_t n = 0, cap = 0;

	if (!v)
		return NULL;
	if (v->type != CD_JSON_ARRAY && v->type != CD_JSON_OBJECT) {
		free_scalar(v);
		return NULL;
	}
	stack = cd_xreallocarray(NULL, cap = 16, sizeof(*stack));
	stack[n++] = v;
	while (n) {
		struct cd_json *top = stack[n - 1], *child;
		if (top->type == CD_JSON_ARRAY && top->u.arr.n) {
			child = top->u.arr.items[--top->u.arr.n];
		} else if (top->type == CD_JSON_OBJECT && top->u.obj.n) {
			struct cd_json_member *m = &top->u.obj.members[--top->u.obj.n];
			free(m->key);
			child = m->value;
		} else {
			if (top->type == CD_JSON_ARRAY)
				free(top->u.arr.items);
			else
				free(top->u.obj.members);
			free(top);
			n--;
			continue;
		}
		if (!child)
			continue; /* member whose value was never parsed */
		if (child->type == CD_JSON_ARRAY || child->type == CD_JSON_OBJECT) {
			if (n == cap)
				stack = cd_xreallocarray(stack, cap *= 2, sizeof(*stack));
			stack[n++] = child;
		} else {
			free_scalar(child);
		}
	}
	free(stack);
	return NULL;
}

const struct cd_json_member *cd_json_get_member(const struct cd_json *v, const char *key)
{
	if (!v || v->type != CD_JSON_OBJECT || !key)
		return NULL;
	size_t n = strlen(key);
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct cd_json_member *m = &v->u.obj.members[i];
		if (m->key_len == n && memcmp(m->key, key, n) == 0)
			return m;
	}
	return NULL;
}

const struct cd_json *cd_json_get(const struct cd_json *v, const char *key)
{
	const struct cd_json_member *m = cd_json_get_member(v, key);
	return m ? m->value : NULL;
}

/*
 * Only plain integer literals: '-'? digits. The grammar was checked by the
 * parser; here a fraction or exponent means "not an integer" even when the
 * value is integral ("1.0", "1e2"), because policy numbers must be exact.
 */
static int integer_magnitude(const struct cd_json *v, bool *neg, uint64_t *mag)
{
	const char *s;
	uint64_t m = 0;

	if (!v || v->type != CD_JSON_NUMBER || !v->u.num.text)
		return -EINVAL;
	s = v->u.num.text;
	*neg = *s == '-';
	if (*neg)
		s++;
	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		unsigned d = (unsigned)(*s - '0');
		if (m > (UINT64_MAX - d) / 10)
			return -ERANGE;
		m = m * 10 + d;
	}
	*mag = m;
	return 0;
}

int cd_json_int64(const struct cd_json *v, int64_t *ret)
{
	bool neg;
	uint64_t m;
	int r = integer_magnitude(v, &neg, &m);

	if (r < 0)
		return r;
	if (neg) {
		if (m > (uint64_t)INT64_MAX + 1)
			return -ERANGE;
		/* m == 2^63 maps to INT64_MIN without signed overflow */
		*ret = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
	} else {
		if (m > (uint64_t)INT64_MAX)
			return -ERANGE;
		*ret = (int64_t)m;
	}
	return 0;
}

int cd_json_uint64(const struct cd_json *v, uint64_t *ret)
{
	bool neg;
	uint64_t m;
	int r = integer_magnitude(v, &neg, &m);

	if (r < 0)
		return r;
	if (neg && m != 0) /* "-0" is zero */
		return -ERANGE;
	*ret = m;
	return 0;
}

bool cd_json_string_has_nul(const struct cd_json *v)
{
	return v && v->type == CD_JSON_STRING && memchr(v->u.str.s, '\0', v->u.str.len);
}

const char *cd_json_type_name(enum cd_json_type t)
{
	static const char *const names[CD_JSON_TYPE_COUNT] = {
		[CD_JSON_NULL] = "null",     [CD_JSON_FALSE] = "boolean",
		[CD_JSON_TRUE] = "boolean",  [CD_JSON_NUMBER] = "number",
		[CD_JSON_STRING] = "string", [CD_JSON_ARRAY] = "array",
		[CD_JSON_OBJECT] = "object",
	};
	if ((unsigned)t >= CD_JSON_TYPE_COUNT)
		return "invalid";
	return names[t];
}
