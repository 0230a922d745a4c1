/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/skillmd.h"
#include "core/util.h"

struct line {
	const char *s;
	size_t n;
};

struct fm {
	struct line *l;
	size_t n;
	const char *why;
};

#define UNSUP(f, msg)                          \
	do {                                   \
		(f)->why = (msg);              \
		return CD_SKILLMD_UNSUPPORTED; \
	} while (0)

/* One UTF-8 character at s (n bytes left): its length, or 0 when malformed. */
static size_t utf8_next(const char *s, size_t n, uint32_t *cp)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len;
	uint32_t c;
	if (u[0] < 0x80) {
		*cp = u[0];
		return 1;
	} else if ((u[0] & 0xe0) == 0xc0) {
		len = 2;
		c = u[0] & 0x1f;
	} else if ((u[0] & 0xf0) == 0xe0) {
		len = 3;
		c = u[0] & 0x0f;
	} else if ((u[0] & 0xf8) == 0xf0) {
		len = 4;
		c = u[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((u[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (u[i] & 0x3f);
	}
	if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Rust's char::is_whitespace (Unicode White_Space). */
static bool uni_space(uint32_t c)
{
	return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
	       c == 0x205f || c == 0x3000;
}

/* Whitespace runs of s collapsed to one space, none at either end (s is valid UTF-8). */
static char *collapse(const char *s, size_t n)
{
	struct cd_strbuf b = { 0 };
	bool pending = false;
	cd_strbuf_append(&b, "");
	for (size_t i = 0; i < n;) {
		uint32_t c;
		size_t k = utf8_next(s + i, n - i, &c);
		if (!k)
			k = 1; /* not reached: the contents were checked */
		if (uni_space(c)) {
			pending = b.len > 0;
		} else {
			if (pending)
				cd_strbuf_append_c(&b, ' ');
			pending = false;
			cd_strbuf_append_n(&b, s + i, k);
		}
		i += k;
	}
	return cd_strbuf_steal(&b);
}

static bool blank_or_comment(struct line l)
{
	size_t i = 0;
	while (i < l.n && (l.s[i] == ' ' || l.s[i] == '\t'))
		i++;
	return i == l.n || l.s[i] == '#';
}

static size_t indent_of(struct line l)
{
	size_t i = 0;
	while (i < l.n && l.s[i] == ' ')
		i++;
	return i;
}

/* Trailing spaces and tabs off, and a comment (a '#' after a blank, or first). */
static size_t strip_comment(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
			n = i;
			break;
		}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	return n;
}

static bool is_null_word(const char *s, size_t n)
{
	static const char *const w[] = { "~", "null", "Null", "NULL" };
	for (size_t i = 0; i < CD_ARRAY_SIZE(w); i++)
		if (n == strlen(w[i]) && !memcmp(s, w[i], n))
			return true;
	return false;
}

static void put_utf8(struct cd_strbuf *b, uint32_t c)
{
	char u[4];
	size_t k;
	if (c < 0x80) {
		u[0] = (char)c;
		k = 1;
	} else if (c < 0x800) {
		u[0] = (char)(0xc0 | c >> 6);
		u[1] = (char)(0x80 | (c & 0x3f));
		k = 2;
	} else if (c < 0x10000) {
		u[0] = (char)(0xe0 | c >> 12);
		u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[2] = (char)(0x80 | (c & 0x3f));
		k = 3;
	} else {
		u[0] = (char)(0xf0 | c >> 18);
		u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[3] = (char)(0x80 | (c & 0x3f));
		k = 4;
	}
	cd_strbuf_append_n(b, u, k);
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

/* After a closing quote: blanks, then nothing or a comment. */
static bool tail_ok(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i == n || (i > 0 && s[i] == '#');
}

/* A quoted scalar closed on its line: s[0] is the quote. */
static int quoted(struct fm *f, const char *s, size_t n, struct cd_strbuf *out)
{
	char q = s[0];
	size_t i = 1;
	for (;;) {
		if (i >= n)
			UNSUP(f, "quoted scalar not closed on its line");
		char c = s[i];
		if (q == '\'' && c == '\'') {
			if (i + 1 < n && s[i + 1] == '\'') {
				cd_strbuf_append_c(out, '\'');
				i += 2;
				continue;
			}
			break;
		}
		if (q == '"' && c == '"')
			break;
		if (q == '"' && c == '\\') {
			if (i + 1 >= n)
				UNSUP(f, "escape at the end of a line");
			char e = s[i + 1];
			const char *simple = "0abtnvfre \"/\\";
			const char *repl = "\0\a\b\t\n\v\f\r\x1b \"/\\";
			const char *p = e ? strchr(simple, e) : NULL;
			if (p && e != '0') {
				cd_strbuf_append_c(out, repl[p - simple]);
				i += 2;
				continue;
			}
			uint32_t cp = 0;
			int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
			if (e == 'N' || e == '_' || e == 'L' || e == 'P') {
				cp = e == 'N' ? 0x85 : e == '_' ? 0xa0 : e == 'L' ? 0x2028 : 0x2029;
			} else if (digits) {
				if (i + 2 + (size_t)digits > n)
					UNSUP(f, "short escape");
				for (int d = 0; d < digits; d++) {
					int h = hexval(s[i + 2 + d]);
					if (h < 0)
						UNSUP(f, "bad escape");
					cp = cp << 4 | (uint32_t)h;
				}
			} else {
				UNSUP(f, "escape outside the subset");
			}
			if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
				UNSUP(f, "escaped character outside the subset");
			put_utf8(out, cp);
			i += 2 + (size_t)digits;
			continue;
		}
		cd_strbuf_append_c(out, c);
		i++;
	}
	if (!tail_ok(s + i + 1, n - i - 1))
		UNSUP(f, "text after a quoted scalar");
	return CD_SKILLMD_OK;
}

/* A plain scalar's first-character rules (YAML indicators). */
static bool plain_start_ok(const char *s, size_t n)
{
	if (!n)
		return true;
	if (strchr("[]{},&*!|>'\"%@`#", s[0]))
		return false;
	if ((s[0] == '-' || s[0] == '?' || s[0] == ':') && (n == 1 || s[1] == ' ' || s[1] == '\t'))
		return false;
	return true;
}

/* A simple flow sequence of plain words: [a, b c, d-e]. */
static bool simple_flow_seq(const char *s, size_t n)
{
	if (n < 2 || s[0] != '[' || s[n - 1] != ']')
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (strchr("[]{}&*!|>'\"%@`#:?", s[i]))
			return false;
	return true;
}

/*
 * The value of the key on line *li, starting at v (vn bytes) on that line;
 * continuation lines are those indented more than parent. Leaves *li on the
 * value's last line. *null when the value is null. keep: the value is wanted
 * as a string (otherwise only checked to be within the subset).
 */
static int value(struct fm *f, size_t *li, size_t parent, const char *v, size_t vn, bool keep,
		 struct cd_strbuf *out, bool *null)
{
	*null = false;
	while (vn && (*v == ' ' || *v == '\t')) {
		v++;
		vn--;
	}
	if (vn && (*v == '"' || *v == '\''))
		return quoted(f, v, vn, out);
	if (vn && (*v == '|' || *v == '>')) {
		size_t h = strip_comment(v, vn);
		if (h > 2 || (h == 2 && v[1] != '-' && v[1] != '+'))
			UNSUP(f, "block scalar header outside the subset");
		size_t block = 0;
		while (*li + 1 < f->n) {
			struct line l = f->l[*li + 1];
			size_t ind = indent_of(l);
			bool empty = ind == l.n;
			if (!empty && ind <= parent)
				break;
			if (!empty && l.s[ind] == '\t')
				UNSUP(f, "tab in a block scalar's indentation");
			if (!empty && !block)
				block = ind;
			if (!empty && ind < block)
				UNSUP(f, "block scalar less indented than its first line");
			(*li)++;
			cd_strbuf_append_n(out, l.s, l.n);
			cd_strbuf_append_c(out, '\n');
		}
		return CD_SKILLMD_OK;
	}
	vn = strip_comment(v, vn);
	if (!keep && simple_flow_seq(v, vn))
		return CD_SKILLMD_OK;
	if (!plain_start_ok(v, vn))
		UNSUP(f, "value outside the subset");
	cd_strbuf_append_n(out, v, vn);
	/* Continuation lines, folded. */
	while (*li + 1 < f->n) {
		struct line l = f->l[*li + 1];
		size_t ind = indent_of(l);
		if (ind == l.n || l.s[ind] == '\t') {
			if (ind == l.n && *li + 2 < f->n && indent_of(f->l[*li + 2]) > parent &&
			    indent_of(f->l[*li + 2]) < f->l[*li + 2].n)
				UNSUP(f, "blank line inside a plain scalar");
			if (ind != l.n)
				UNSUP(f, "tab in indentation");
			break;
		}
		if (ind <= parent)
			break;
		if (!vn)
			UNSUP(f, "nested value outside the subset");
		size_t cn = l.n - ind;
		const char *c = l.s + ind;
		if (c[0] == '#' || memmem(c, cn, ": ", 2) || (cn && c[cn - 1] == ':') ||
		    memmem(c, cn, " #", 2))
			UNSUP(f, "plain scalar continuation outside the subset");
		cd_strbuf_append_c(out, ' ');
		cd_strbuf_append_n(out, c, cn);
		(*li)++;
	}
	if (!vn || is_null_word(v, vn))
		*null = out->len == vn;
	return CD_SKILLMD_OK;
}

/* "key:" at s (indentation skipped): the key's length, the value's start in *v. */
static int key_of(struct fm *f, const char *s, size_t n, size_t *kn, size_t *v)
{
	if (!plain_start_ok(s, n) || s[0] == '-' || s[0] == '?' || s[0] == ':')
		UNSUP(f, "key outside the subset");
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '#' && i && (s[i - 1] == ' ' || s[i - 1] == '\t'))
			break;
		if (s[i] == ':' && (i + 1 == n || s[i + 1] == ' ' || s[i + 1] == '\t')) {
			*kn = i;
			while (*kn && (s[*kn - 1] == ' ' || s[*kn - 1] == '\t'))
				(*kn)--;
			*v = i + 1;
			if (!*kn)
				UNSUP(f, "empty key");
			return CD_SKILLMD_OK;
		}
	}
	UNSUP(f, "line outside the subset (not \"key: value\")");
}

struct seen {
	const char *k[64];
	size_t kn[64];
	size_t n;
};

/* 1: a duplicate; -1: too many keys for the subset. */
static int seen_add(struct seen *s, const char *k, size_t kn)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->kn[i] == kn && !memcmp(s->k[i], k, kn))
			return 1;
	if (s->n == CD_ARRAY_SIZE(s->k))
		return -1;
	s->k[s->n] = k;
	s->kn[s->n++] = kn;
	return 0;
}

#define KEY_IS(k, kn, lit) ((kn) == sizeof(lit) - 1 && !memcmp((k), (lit), (kn)))

static int mapping(struct fm *f, size_t *li, size_t ind, bool top, struct cd_strbuf *name,
		   bool *has_name, struct cd_strbuf *desc, bool *has_desc, struct cd_strbuf *sd,
		   bool *has_sd)
{
	struct seen seen = { .n = 0 };
	size_t i = *li;
	for (; i < f->n; i++) {
		struct line l = f->l[i];
		if (blank_or_comment(l)) {
			if (indent_of(l) < l.n && l.s[indent_of(l)] == '\t')
				UNSUP(f, "tab in indentation");
			continue;
		}
		size_t in = indent_of(l);
		if (l.s[in] == '\t')
			UNSUP(f, "tab in indentation");
		if (!top && in < ind)
			break;
		if (in != ind)
			UNSUP(f, "indentation outside the subset");
		size_t kn, v;
		int r = key_of(f, l.s + in, l.n - in, &kn, &v);
		if (r)
			return r;
		const char *k = l.s + in;
		int d = seen_add(&seen, k, kn);
		if (d > 0) {
			f->why = "duplicate key";
			return CD_SKILLMD_INVALID;
		}
		if (d < 0)
			UNSUP(f, "too many keys");
		struct cd_strbuf *dst = NULL;
		bool *has = NULL;
		if (top && KEY_IS(k, kn, "name")) {
			dst = name;
			has = has_name;
		} else if (top && KEY_IS(k, kn, "description")) {
			dst = desc;
			has = has_desc;
		} else if (!top && KEY_IS(k, kn, "short-description")) {
			dst = sd;
			has = has_sd;
		}
		const char *vs = l.s + in + v;
		size_t vn = l.n - in - v;
		size_t rest = strip_comment(vs, vn);
		size_t lead = 0;
		while (lead < rest && (vs[lead] == ' ' || vs[lead] == '\t'))
			lead++;
		bool nested = lead == rest && i + 1 < f->n;
		if (nested) {
			/* A nested block follows when the next non-blank line is indented more. */
			size_t j = i + 1;
			while (j < f->n && blank_or_comment(f->l[j]))
				j++;
			nested = j < f->n && indent_of(f->l[j]) > ind;
			if (nested && dst)
				UNSUP(f, "nested value for a kept key");
			if (nested && top && KEY_IS(k, kn, "metadata")) {
				size_t sub = indent_of(f->l[j]);
				i = j;
				r = mapping(f, &i, sub, false, NULL, NULL, NULL, NULL, sd, has_sd);
				if (r)
					return r;
				i--;
				continue;
			}
			if (nested) {
				/* Not kept: a sequence of plain scalars, or key: scalar lines. */
				size_t sub = indent_of(f->l[j]);
				for (i = j; i < f->n; i++) {
					struct line m = f->l[i];
					if (blank_or_comment(m))
						continue;
					size_t mi = indent_of(m);
					if (mi <= ind)
						break;
					if (mi != sub)
						UNSUP(f, "nesting outside the subset");
					const char *ms = m.s + mi;
					size_t mn = m.n - mi;
					struct cd_strbuf tmp = { 0 };
					bool nl;
					if (mn >= 2 && ms[0] == '-' && ms[1] == ' ') {
						r = value(f, &i, sub, ms + 1, mn - 1, false, &tmp,
							  &nl);
					} else {
						size_t kn2, v2;
						r = key_of(f, ms, mn, &kn2, &v2);
						if (!r)
							r = value(f, &i, sub, ms + v2, mn - v2,
								  false, &tmp, &nl);
					}
					cd_strbuf_done(&tmp);
					if (r)
						return r;
				}
				i--;
				continue;
			}
		}
		if (top && KEY_IS(k, kn, "metadata")) {
			/* metadata: with a scalar on its line: only null is within the subset. */
			if (lead != rest && !is_null_word(vs + lead, rest - lead))
				UNSUP(f, "metadata is not a mapping");
			continue;
		}
		struct cd_strbuf tmp = { 0 };
		bool nl;
		r = value(f, &i, ind, vs, vn, dst != NULL, dst ? dst : &tmp, &nl);
		cd_strbuf_done(&tmp);
		if (r)
			return r;
		if (has)
			*has = !nl;
		if (dst && nl)
			dst->len = 0;
	}
	*li = i;
	return CD_SKILLMD_OK;
}

/* Trim Unicode whitespace on both ends, then compare with "---". */
static bool is_fence(const char *s, size_t n)
{
	size_t a = 0, b = n;
	while (a < b) {
		uint32_t c;
		size_t k = utf8_next(s + a, b - a, &c);
		if (!k || !uni_space(c))
			break;
		a += k;
	}
	/* Trailing: step back over whole characters. */
	while (b > a) {
		size_t st = b - 1;
		while (st > a && ((unsigned char)s[st] & 0xc0) == 0x80)
			st--;
		uint32_t c;
		if (utf8_next(s + st, b - st, &c) != b - st || !uni_space(c))
			break;
		b = st;
	}
	return b - a == 3 && !memcmp(s + a, "---", 3);
}

int cd_skillmd_parse(const char *contents, size_t len, const char *default_name,
		     struct cd_skillmd *out, const char **why)
{
	struct fm f = { 0 };
	int r = CD_SKILLMD_OK;
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < len;) {
		uint32_t c;
		size_t k = utf8_next(contents + i, len - i, &c);
		if (!k || c == 0) {
			*why = "not UTF-8 text";
			return CD_SKILLMD_UNSUPPORTED;
		}
		i += k;
	}
	/* Lines as Rust's str::lines: "\n" or "\r\n" ends one. */
	size_t cap = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(contents + i, '\n', len - i);
		size_t e = nl ? (size_t)(nl - contents) : len;
		size_t n = e - i;
		if (nl && n && contents[e - 1] == '\r')
			n--;
		if (f.n == cap) {
			cap = cap ? cap * 2 : 16;
			f.l = cd_xreallocarray(f.l, cap, sizeof(*f.l));
		}
		f.l[f.n++] = (struct line){ contents + i, n };
		i = nl ? e + 1 : len;
	}
	size_t close = 0;
	if (f.n && is_fence(f.l[0].s, f.l[0].n))
		for (close = 1; close < f.n && !is_fence(f.l[close].s, f.l[close].n); close++)
			;
	if (!f.n || !is_fence(f.l[0].s, f.l[0].n) || close >= f.n || close == 1) {
		free(f.l);
		*why = "missing YAML frontmatter delimited by ---";
		return CD_SKILLMD_INVALID;
	}
	struct fm body = { .l = f.l + 1, .n = close - 1 };
	struct cd_strbuf name = { 0 }, desc = { 0 }, sd = { 0 };
	bool has_name = false, has_desc = false, has_sd = false;
	size_t li = 0;
	r = mapping(&body, &li, 0, true, &name, &has_name, &desc, &has_desc, &sd, &has_sd);
	if (r)
		goto out;
	out->name = has_name ? collapse(name.buf ? name.buf : "", name.len) : NULL;
	if (!out->name || !*out->name) {
		free(out->name);
		out->name = collapse(default_name ? default_name : "",
				     default_name ? strlen(default_name) : 0);
		if (!*out->name) {
			free(out->name);
			out->name = cd_xstrdup("skill");
		}
	}
	out->description = collapse(has_desc && desc.buf ? desc.buf : "", has_desc ? desc.len : 0);
	out->short_description = has_sd ? collapse(sd.buf ? sd.buf : "", sd.len) : NULL;
	if (out->short_description && !*out->short_description) {
		free(out->short_description);
		out->short_description = NULL;
	}
	size_t chars = 0;
	for (const char *p = out->name; *p; p++)
		chars += ((unsigned char)*p & 0xc0) != 0x80;
	if (chars > CD_SKILLMD_MAX_NAME) {
		r = CD_SKILLMD_INVALID;
		body.why = "invalid name: exceeds maximum length of 64 characters";
	} else if (!*out->description) {
		r = CD_SKILLMD_INVALID;
		body.why = "missing field `description`";
	}
out:
	cd_strbuf_done(&name);
	cd_strbuf_done(&desc);
	cd_strbuf_done(&sd);
	free(f.l);
	if (r) {
		cd_skillmd_done(out);
		*why = body.why;
	}
	return r;
}

void cd_skillmd_done(struct cd_skillmd *m)
{
	free(m->name);
	free(m->description);
	free(m->short_description);
	memset(m, 0, sizeof(*m));
}

int cd_skillmd_namespace(const char *contents, size_t len, const char *dir_name, char **ns,
			 const char **why)
{
	struct cd_json *v = NULL;
	struct cd_json_error je;
	struct cd_json_limits lim = { 0 };
	int r = CD_SKILLMD_UNSUPPORTED;

	*ns = NULL;
	*why = "the manifest is not a JSON object cordon reads as serde does";
	if (cd_json_parse(contents, len, &lim, &v, &je) < 0 || v->type != CD_JSON_OBJECT)
		goto out;
	const struct cd_json *name = cd_json_get(v, "name");
	if (name && name->type != CD_JSON_STRING) {
		r = CD_SKILLMD_NS_SKIP;
		goto out;
	}
	const unsigned char *s = name ? (const unsigned char *)name->u.str.s : NULL;
	size_t n = name ? name->u.str.len : 0, i = 0, k;
	while (i < n && (k = cd_utf8_space_len(s + i, n - i)))
		i += k;
	if (memchr(s ? (const char *)s : "", '\0', n)) {
		*why = "the manifest's name holds a NUL";
		goto out;
	}
	*ns = i < n ? cd_xstrndup((const char *)s, n) : cd_xstrdup(dir_name);
	r = CD_SKILLMD_OK;
out:
	cd_json_free(v);
	return r;
}

/* ---- agents/openai.yaml: dependencies and policy ---- */

struct ay {
	struct fm f;
	size_t i;    /* the current line */
	int invalid; /* the binary gives null for both: the why */
	const char *ivwhy;
};

#define INVALID(a, msg)                    \
	do {                               \
		(a)->ivwhy = (msg);        \
		return CD_SKILLMD_INVALID; \
	} while (0)

/* The next line that is not blank or a comment, from a->i; false at the end. */
static bool ay_next(struct ay *a)
{
	while (a->i < a->f.n && blank_or_comment(a->f.l[a->i]))
		a->i++;
	return a->i < a->f.n;
}

/*
 * A scalar value at s (n bytes, leading blanks allowed) on one line:
 * *null when empty or a null word; otherwise out holds its text. "{}"
 * and "[]" and other collections are not scalars: *coll is set for them
 * (nothing parsed).
 */
static int ay_scalar(struct ay *a, const char *s, size_t n, struct cd_strbuf *out, bool *null,
		     bool *coll)
{
	*null = false;
	*coll = false;
	while (n && *s == ' ') {
		s++;
		n--;
	}
	if (n && (*s == '"' || *s == '\'')) {
		int r = quoted(&a->f, s, n, out);
		if (r)
			return r;
		cd_strbuf_append(out, "");
		return CD_SKILLMD_OK;
	}
	n = strip_comment(s, n);
	if (!n || is_null_word(s, n)) {
		*null = true;
		return CD_SKILLMD_OK;
	}
	if (s[0] == '[' || s[0] == '{') {
		*coll = true;
		return CD_SKILLMD_OK;
	}
	if (!plain_start_ok(s, n) || memmem(s, n, ": ", 2) || s[n - 1] == ':')
		UNSUP(&a->f, "value outside the subset");
	cd_strbuf_append_n(out, s, n);
	return CD_SKILLMD_OK;
}

/* The text after "key:" on the line, stripped: empty when a block may follow. */
static bool ay_value_empty(const char *v, size_t vn)
{
	vn = strip_comment(v, vn);
	for (size_t i = 0; i < vn; i++)
		if (v[i] != ' ')
			return false;
	return true;
}

/* The indentation of the next content line when it is deeper than ind, else 0. */
static size_t ay_child_indent(struct ay *a, size_t ind, bool seq_same)
{
	size_t save = a->i;
	a->i++;
	size_t r = 0;
	if (ay_next(a)) {
		struct line l = a->f.l[a->i];
		size_t in = indent_of(l);
		if (in > ind)
			r = in;
		else if (seq_same && in == ind && l.n > in + 1 && l.s[in] == '-' &&
			 l.s[in + 1] == ' ')
			r = in; /* a sequence may sit at its key's indentation */
	}
	a->i = save;
	return r;
}

struct ay_tool {
	struct cd_strbuf f[6]; /* type, value, description, transport, command, url */
	bool set[6];
};

static const char *const tool_keys[6] = { "type",      "value",	  "description",
					  "transport", "command", "url" };
static const size_t tool_max[6] = { 64, 1024, 1024, 64, 1024, 1024 };

static size_t ay_chars(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

/* The mapping lines of one tool: "- k: v" at ind, then "k: v" at ind + 2. */
static int ay_tool(struct ay *a, size_t ind, struct ay_tool *t)
{
	bool first = true;
	while (ay_next(a)) {
		struct line l = a->f.l[a->i];
		size_t in = indent_of(l);
		const char *s = l.s + in;
		size_t n = l.n - in;
		if (first) {
			s += 2;
			n -= 2;
			while (n && *s == ' ') {
				s++;
				n--;
			}
			if (!n)
				UNSUP(&a->f, "an empty sequence item");
		} else if (in != ind + 2) {
			if (in <= ind)
				return CD_SKILLMD_OK;
			UNSUP(&a->f, "indentation outside the subset");
		}
		size_t kn, v;
		int r = key_of(&a->f, s, n, &kn, &v);
		if (r)
			return r;
		int k = -1;
		for (int x = 0; x < 6; x++)
			if (kn == strlen(tool_keys[x]) && !memcmp(s, tool_keys[x], kn))
				k = x;
		struct cd_strbuf tmp = { 0 };
		bool null, coll;
		r = ay_scalar(a, s + v, n - v, k >= 0 ? &t->f[k] : &tmp, &null, &coll);
		cd_strbuf_done(&tmp);
		if (r)
			return r;
		if (coll || (ay_value_empty(s + v, n - v) && ay_child_indent(a, ind + 2, false)))
			INVALID(a, "a tool's field is not a string");
		if (k >= 0) {
			if (t->set[k])
				INVALID(a, "a tool's field repeats");
			t->set[k] = true;
			if (null)
				cd_strbuf_done(&t->f[k]); /* None */
		}
		first = false;
		a->i++;
	}
	return CD_SKILLMD_OK;
}

static void ay_tool_json(struct cd_strbuf *out, struct ay_tool *t, size_t *n_out)
{
	const char *v[6];
	size_t vn[6];
	for (int k = 0; k < 6; k++) {
		v[k] = t->f[k].buf;
		vn[k] = t->f[k].len;
		if (v[k])
			cd_utf8_trim(&v[k], &vn[k]);
		if (!v[k] || !vn[k] || ay_chars(v[k], vn[k]) > tool_max[k])
			v[k] = NULL;
	}
	if (!v[0] || !v[1])
		return; /* a tool without a type or a value is dropped */
	cd_strbuf_append(out, *n_out ? "," : "");
	cd_strbuf_append_c(out, '{');
	static const char *const names[6] = { "type",	   "value",   "description",
					      "transport", "command", "url" };
	for (int k = 0; k < 6; k++) {
		cd_strbuf_printf(out, "%s\"%s\":", k ? "," : "", names[k]);
		if (v[k])
			cd_strbuf_append_json_string(out, v[k], vn[k]);
		else
			cd_strbuf_append(out, "null");
	}
	cd_strbuf_append(out, ",\"oauthCallbackPort\":null}");
	(*n_out)++;
}

/* dependencies: a mapping whose "tools" is a sequence of tool mappings. */
static int ay_dependencies(struct ay *a, size_t ind, struct cd_strbuf *out)
{
	bool seen_tools = false;
	size_t n_tools = 0;
	struct cd_strbuf tools = { 0 };
	int r = CD_SKILLMD_OK;
	while (ay_next(a)) {
		struct line l = a->f.l[a->i];
		size_t in = indent_of(l);
		if (in < ind)
			break;
		if (in != ind) {
			r = CD_SKILLMD_UNSUPPORTED;
			a->f.why = "indentation outside the subset";
			goto out;
		}
		size_t kn, v;
		if ((r = key_of(&a->f, l.s + in, l.n - in, &kn, &v)))
			goto out;
		const char *vs = l.s + in + v;
		size_t vn = l.n - in - v;
		if (!KEY_IS(l.s + in, kn, "tools")) {
			struct cd_strbuf tmp = { 0 };
			bool null, coll;
			r = ay_scalar(a, vs, vn, &tmp, &null, &coll);
			cd_strbuf_done(&tmp);
			if (!r && (coll || (null && ay_child_indent(a, in, true)))) {
				r = CD_SKILLMD_UNSUPPORTED;
				a->f.why = "a nested value outside the subset";
			}
			if (r)
				goto out;
			a->i++;
			continue;
		}
		if (seen_tools) {
			r = CD_SKILLMD_INVALID;
			a->ivwhy = "tools repeats";
			goto out;
		}
		seen_tools = true;
		size_t sub = ay_value_empty(vs, vn) ? ay_child_indent(a, in, true) : 0;
		if (!sub) {
			size_t sn = strip_comment(vs, vn);
			while (sn && *vs == ' ') {
				vs++;
				sn--;
			}
			if (sn == 2 && !memcmp(vs, "[]", 2)) {
				a->i++;
				continue;
			}
			r = CD_SKILLMD_INVALID; /* null or a scalar: not a sequence */
			a->ivwhy = "tools is not a sequence";
			if (sn && (vs[0] == '[' || vs[0] == '{')) {
				r = CD_SKILLMD_UNSUPPORTED;
				a->f.why = "a flow collection outside the subset";
			}
			goto out;
		}
		a->i++;
		while (ay_next(a)) {
			struct line m = a->f.l[a->i];
			size_t mi = indent_of(m);
			if (mi < sub || (mi == sub && sub == in && m.s[mi] != '-'))
				break;
			if (mi != sub || m.n < mi + 2 || m.s[mi] != '-' || m.s[mi + 1] != ' ') {
				r = CD_SKILLMD_UNSUPPORTED;
				a->f.why = "a tool outside the subset";
				goto out;
			}
			struct ay_tool t = { 0 };
			r = ay_tool(a, sub, &t);
			if (!r)
				ay_tool_json(&tools, &t, &n_tools);
			for (int k = 0; k < 6; k++)
				cd_strbuf_done(&t.f[k]);
			if (r)
				goto out;
		}
	}
	if (n_tools) {
		cd_strbuf_append(out, "{\"tools\":[");
		cd_strbuf_append_n(out, tools.buf, tools.len);
		cd_strbuf_append(out, "]}");
	}
out:
	cd_strbuf_done(&tools);
	return r;
}

static int ay_product(struct ay *a, const char *s, size_t n, struct cd_strbuf *out, size_t *np)
{
	static const char *const products[] = { "codex", "chatgpt", "atlas" };
	struct cd_strbuf w = { 0 };
	bool null, coll;
	int r = ay_scalar(a, s, n, &w, &null, &coll);
	if (r) {
		cd_strbuf_done(&w);
		return r;
	}
	bool ok = false;
	for (size_t i = 0; !null && !coll && i < CD_ARRAY_SIZE(products); i++)
		ok |= w.len == strlen(products[i]) && !memcmp(w.buf, products[i], w.len);
	if (ok) {
		cd_strbuf_append(out, (*np)++ ? ",\"" : "\"");
		cd_strbuf_append_n(out, w.buf, w.len);
		cd_strbuf_append_c(out, '"');
	}
	cd_strbuf_done(&w);
	if (coll)
		UNSUP(&a->f, "a nested product list");
	if (!ok)
		INVALID(a, "a product the binary does not know");
	return CD_SKILLMD_OK;
}

/* policy: allow_implicit_invocation (a boolean) and products (known names). */
static int ay_policy(struct ay *a, size_t ind, struct cd_strbuf *out)
{
	static const char *const bools[] = { "false", "true", "False", "True", "FALSE", "TRUE" };
	int allow = -1, r = CD_SKILLMD_OK;
	bool seen_allow = false, seen_products = false;
	struct cd_strbuf prod = { 0 };
	size_t np = 0;
	while (ay_next(a)) {
		struct line l = a->f.l[a->i];
		size_t in = indent_of(l);
		if (in < ind)
			break;
		if (in != ind) {
			r = CD_SKILLMD_UNSUPPORTED;
			a->f.why = "indentation outside the subset";
			goto out;
		}
		size_t kn, v;
		if ((r = key_of(&a->f, l.s + in, l.n - in, &kn, &v)))
			goto out;
		const char *k = l.s + in, *vs = l.s + in + v;
		size_t vn = l.n - in - v;
		if (KEY_IS(k, kn, "allow_implicit_invocation")) {
			if (seen_allow) {
				r = CD_SKILLMD_INVALID;
				a->ivwhy = "allow_implicit_invocation repeats";
				goto out;
			}
			seen_allow = true;
			size_t sn = strip_comment(vs, vn);
			while (sn && *vs == ' ') {
				vs++;
				sn--;
			}
			if (!sn || is_null_word(vs, sn)) {
				if (!sn && ay_child_indent(a, in, true)) {
					r = CD_SKILLMD_UNSUPPORTED;
					a->f.why = "a nested value outside the subset";
					goto out;
				}
				a->i++;
				continue;
			}
			for (size_t b = 0; b < CD_ARRAY_SIZE(bools); b++)
				if (sn == strlen(bools[b]) && !memcmp(vs, bools[b], sn))
					allow = (int)(b % 2);
			if (allow < 0) {
				/* yes, no, 1, 'true': YAML 1.2 has no such boolean. */
				r = CD_SKILLMD_INVALID;
				a->ivwhy = "allow_implicit_invocation is not a boolean";
				if (vs[0] == '[' || vs[0] == '{' || vs[0] == '&' || vs[0] == '*' ||
				    vs[0] == '!' || vs[0] == '|' || vs[0] == '>') {
					r = CD_SKILLMD_UNSUPPORTED;
					a->f.why = "a value outside the subset";
				}
				goto out;
			}
			a->i++;
			continue;
		}
		if (KEY_IS(k, kn, "products")) {
			if (seen_products) {
				r = CD_SKILLMD_INVALID;
				a->ivwhy = "products repeats";
				goto out;
			}
			seen_products = true;
			size_t sn = strip_comment(vs, vn);
			while (sn && *vs == ' ') {
				vs++;
				sn--;
			}
			if (sn && vs[0] == '[') {
				if (vs[sn - 1] != ']') {
					r = CD_SKILLMD_UNSUPPORTED;
					a->f.why = "a flow sequence outside the subset";
					goto out;
				}
				const char *p = vs + 1, *e = vs + sn - 1;
				while (p < e && *p == ' ')
					p++;
				while (p < e) {
					const char *c = memchr(p, ',', (size_t)(e - p));
					const char *end = c ? c : e;
					if (memchr(p, '[', (size_t)(end - p)) ||
					    memchr(p, '{', (size_t)(end - p)) ||
					    memchr(p, '#', (size_t)(end - p))) {
						r = CD_SKILLMD_UNSUPPORTED;
						a->f.why = "a flow sequence outside the subset";
						goto out;
					}
					size_t wn = (size_t)(end - p);
					while (wn && p[wn - 1] == ' ')
						wn--;
					if (!wn) {
						r = CD_SKILLMD_UNSUPPORTED;
						a->f.why = "an empty flow item";
						goto out;
					}
					if ((r = ay_product(a, p, wn, &prod, &np)))
						goto out;
					p = c ? c + 1 : e;
					while (p < e && *p == ' ')
						p++;
				}
				a->i++;
				continue;
			}
			size_t sub = !sn ? ay_child_indent(a, in, true) : 0;
			if (!sub) {
				/* null or a scalar: not a sequence */
				r = CD_SKILLMD_INVALID;
				a->ivwhy = "products is not a sequence";
				if (sn && (vs[0] == '{' || vs[0] == '&' || vs[0] == '*' ||
					   vs[0] == '!' || vs[0] == '|' || vs[0] == '>')) {
					r = CD_SKILLMD_UNSUPPORTED;
					a->f.why = "a value outside the subset";
				}
				goto out;
			}
			a->i++;
			while (ay_next(a)) {
				struct line m = a->f.l[a->i];
				size_t mi = indent_of(m);
				if (mi < sub ||
				    (mi == sub && sub == in && !(m.n > mi + 1 && m.s[mi] == '-')))
					break;
				if (mi != sub || m.n < mi + 2 || m.s[mi] != '-' ||
				    m.s[mi + 1] != ' ') {
					r = CD_SKILLMD_UNSUPPORTED;
					a->f.why = "a product outside the subset";
					goto out;
				}
				if ((r = ay_product(a, m.s + mi + 2, m.n - mi - 2, &prod, &np)))
					goto out;
				a->i++;
			}
			continue;
		}
		/* Another key: a scalar, passed over. */
		struct cd_strbuf tmp = { 0 };
		bool null, coll;
		r = ay_scalar(a, vs, vn, &tmp, &null, &coll);
		cd_strbuf_done(&tmp);
		if (!r && (coll || (null && ay_child_indent(a, in, true)))) {
			r = CD_SKILLMD_UNSUPPORTED;
			a->f.why = "a nested value outside the subset";
		}
		if (r)
			goto out;
		a->i++;
	}
	cd_strbuf_printf(out, "{\"allowImplicitInvocation\":%s,\"products\":[",
			 allow < 0 ? "null"
			 : allow   ? "true"
				   : "false");
	if (prod.len)
		cd_strbuf_append_n(out, prod.buf, prod.len);
	cd_strbuf_append(out, "]}");
out:
	cd_strbuf_done(&prod);
	return r;
}

/* interface: a mapping of scalars (any other value makes the file invalid). */
static int ay_interface(struct ay *a, size_t ind)
{
	struct seen seen = { .n = 0 };
	while (ay_next(a)) {
		struct line l = a->f.l[a->i];
		size_t in = indent_of(l);
		if (in < ind)
			break;
		if (in != ind)
			UNSUP(&a->f, "indentation outside the subset");
		size_t kn, v;
		int r = key_of(&a->f, l.s + in, l.n - in, &kn, &v);
		if (r)
			return r;
		int d = seen_add(&seen, l.s + in, kn);
		if (d > 0)
			INVALID(a, "a key repeats");
		if (d < 0)
			UNSUP(&a->f, "too many keys");
		struct cd_strbuf tmp = { 0 };
		bool null, coll;
		r = ay_scalar(a, l.s + in + v, l.n - in - v, &tmp, &null, &coll);
		cd_strbuf_done(&tmp);
		if (r)
			return r;
		if (coll || (null && ay_child_indent(a, in, true)))
			INVALID(a, "an interface field is not a string");
		a->i++;
	}
	return CD_SKILLMD_OK;
}

int cd_skillmd_agents(const char *contents, size_t len, char **deps, char **policy,
		      const char **why)
{
	struct ay a = { 0 };
	struct cd_strbuf d = { 0 }, p = { 0 };
	bool seen[3] = { false, false, false };
	int r = CD_SKILLMD_OK;

	*deps = *policy = NULL;
	for (size_t i = 0; i < len;) {
		uint32_t c;
		size_t k = utf8_next(contents + i, len - i, &c);
		if (!k || c == 0 || c == '\t') {
			*why = "not UTF-8 text without tabs";
			return CD_SKILLMD_UNSUPPORTED;
		}
		i += k;
	}
	size_t cap = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(contents + i, '\n', len - i);
		size_t e = nl ? (size_t)(nl - contents) : len;
		size_t n = e - i;
		if (nl && n && contents[e - 1] == '\r')
			n--;
		if (a.f.n == cap) {
			cap = cap ? cap * 2 : 16;
			a.f.l = cd_xreallocarray(a.f.l, cap, sizeof(*a.f.l));
		}
		a.f.l[a.f.n++] = (struct line){ contents + i, n };
		i = nl ? e + 1 : len;
	}
	while (!r && ay_next(&a)) {
		struct line l = a.f.l[a.i];
		size_t in = indent_of(l), kn, v;
		if (in || (l.n >= 3 && !memcmp(l.s, "---", 3)) ||
		    (l.n >= 3 && !memcmp(l.s, "...", 3))) {
			r = CD_SKILLMD_UNSUPPORTED;
			a.f.why = "a line outside the subset";
			break;
		}
		if ((r = key_of(&a.f, l.s, l.n, &kn, &v)))
			break;
		static const char *const keys[3] = { "interface", "dependencies", "policy" };
		int k = -1;
		for (int x = 0; x < 3; x++)
			if (kn == strlen(keys[x]) && !memcmp(l.s, keys[x], kn))
				k = x;
		const char *vs = l.s + v;
		size_t vn = l.n - v, sn = strip_comment(vs, vn);
		while (sn && *vs == ' ') {
			vs++;
			sn--;
		}
		if (k < 0) {
			struct cd_strbuf tmp = { 0 };
			bool null, coll;
			r = ay_scalar(&a, l.s + v, l.n - v, &tmp, &null, &coll);
			cd_strbuf_done(&tmp);
			if (!r && (coll || (null && ay_child_indent(&a, 0, true)))) {
				r = CD_SKILLMD_UNSUPPORTED;
				a.f.why = "a nested value outside the subset";
			}
			a.i++;
			continue;
		}
		if (seen[k]) {
			r = CD_SKILLMD_INVALID;
			a.ivwhy = "a key repeats";
			break;
		}
		seen[k] = true;
		size_t sub = !sn ? ay_child_indent(&a, 0, false) : 0;
		if (!sub) {
			/* null, "{}" (an empty mapping), or a scalar (the file is invalid). */
			a.i++;
			if (!sn || is_null_word(vs, sn))
				continue;
			if (sn == 2 && !memcmp(vs, "{}", 2)) {
				if (k == 2)
					cd_strbuf_append(&p, "{\"allowImplicitInvocation\":null,"
							     "\"products\":[]}");
				continue;
			}
			if (vs[0] == '{' || vs[0] == '[' || vs[0] == '&' || vs[0] == '*' ||
			    vs[0] == '!' || vs[0] == '|' || vs[0] == '>') {
				r = CD_SKILLMD_UNSUPPORTED;
				a.f.why = "a value outside the subset";
			} else {
				r = CD_SKILLMD_INVALID;
				a.ivwhy = "a section is not a mapping";
			}
			break;
		}
		a.i++;
		if (k == 0)
			r = ay_interface(&a, sub);
		else if (k == 1)
			r = ay_dependencies(&a, sub, &d);
		else
			r = ay_policy(&a, sub, &p);
	}
	free(a.f.l);
	if (r == CD_SKILLMD_OK) {
		*deps = d.len ? cd_strbuf_steal(&d) : NULL;
		*policy = p.len ? cd_strbuf_steal(&p) : NULL;
	} else {
		*why = r == CD_SKILLMD_INVALID ? a.ivwhy : a.f.why;
	}
	cd_strbuf_done(&d);
	cd_strbuf_done(&p);
	return r;
}
