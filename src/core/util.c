/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "core/util.h"

#include <errno.h>
#include <stdio.h>

static CD_NORETURN void oom(void)
{
	fputs("cordon: out of memory\n", stderr);
	abort();
}

void cd_cleanup_freep(void *p)
{
	free(*(void **)p);
}

void *cd_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *cd_xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (!p)
		oom();
	return p;
}

void *cd_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *cd_xreallocarray(void *p, size_t nmemb, size_t size)
{
	if (size && nmemb > SIZE_MAX / size)
		oom();
	return cd_xrealloc(p, nmemb * size);
}

char *cd_xstrdup(const char *s)
{
	return cd_xstrndup(s, strlen(s));
}

char *cd_xstrndup(const char *s, size_t n)
{
	char *p = cd_xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *cd_xvasprintf(const char *fmt, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	int n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		oom();
	char *p = cd_xmalloc((size_t)n + 1);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	return p;
}

char *cd_xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *p = cd_xvasprintf(fmt, ap);
	va_end(ap);
	return p;
}

void cd_strbuf_reserve(struct cd_strbuf *sb, size_t extra)
{
	if (extra > SIZE_MAX - sb->len - 1)
		oom();
	size_t need = sb->len + extra + 1;
	if (need <= sb->cap)
		return;
	size_t cap = sb->cap ? sb->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	sb->buf = cd_xrealloc(sb->buf, cap);
	sb->cap = cap;
}

void cd_strbuf_append_n(struct cd_strbuf *sb, const char *s, size_t n)
{
	cd_strbuf_reserve(sb, n);
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void cd_strbuf_append(struct cd_strbuf *sb, const char *s)
{
	cd_strbuf_append_n(sb, s, strlen(s));
}

void cd_strbuf_append_c(struct cd_strbuf *sb, char c)
{
	cd_strbuf_append_n(sb, &c, 1);
}

void cd_strbuf_printf(struct cd_strbuf *sb, const char *fmt, ...)
{
	va_list ap, aq;
	va_start(ap, fmt);
	va_copy(aq, ap);
	int n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		oom();
	cd_strbuf_reserve(sb, (size_t)n);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
	va_end(ap);
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when invalid. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

char *cd_utf8_lossy(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s), i = 0;
	struct cd_strbuf sb = { 0 };

	while (i < n) {
		size_t len = utf8_seq_len(u + i, n - i);
		if (len) {
			cd_strbuf_append_n(&sb, s + i, len);
			i += len;
		} else {
			cd_strbuf_append(&sb, "\xef\xbf\xbd");
			i++;
		}
	}
	return cd_strbuf_steal(&sb);
}

void cd_strbuf_append_json_cstr(struct cd_strbuf *sb, const char *s)
{
	if (s)
		cd_strbuf_append_json_string(sb, s, strlen(s));
	else
		cd_strbuf_append(sb, "null");
}

void cd_strbuf_append_json_string(struct cd_strbuf *sb, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0;

	cd_strbuf_append_c(sb, '"');
	while (i < n) {
		unsigned char c = u[i];
		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != 0x7f) {
			i++;
			continue;
		}
		/* Flush the plain run before i, then handle the special byte. */
		cd_strbuf_append_n(sb, s + run, i - run);
		if (c >= 0x80) {
			size_t len = utf8_seq_len(u + i, n - i);
			if (len) {
				cd_strbuf_append_n(sb, s + i, len);
				i += len;
			} else {
				cd_strbuf_append(sb, "\xef\xbf\xbd");
				i++;
			}
		} else {
			static const char hex[] = "0123456789abcdef";
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			switch (c) {
			case '"':
				cd_strbuf_append_n(sb, "\\\"", 2);
				break;
			case '\\':
				cd_strbuf_append_n(sb, "\\\\", 2);
				break;
			case '\n':
				cd_strbuf_append_n(sb, "\\n", 2);
				break;
			case '\r':
				cd_strbuf_append_n(sb, "\\r", 2);
				break;
			case '\t':
				cd_strbuf_append_n(sb, "\\t", 2);
				break;
			default:
				cd_strbuf_append_n(sb, e, 6);
				break;
			}
			i++;
		}
		run = i;
	}
	cd_strbuf_append_n(sb, s + run, n - run);
	cd_strbuf_append_c(sb, '"');
}

char *cd_strbuf_steal(struct cd_strbuf *sb)
{
	char *p = sb->buf ? sb->buf : cd_xstrdup("");
	sb->buf = NULL;
	sb->len = sb->cap = 0;
	return p;
}

const char *cd_vis(const char *s, char **hold)
{
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t i = 0;

	while (u[i] && u[i] >= 0x20 && u[i] != 0x7f)
		i++;
	if (!u[i])
		return (const char *)u;
	struct cd_strbuf sb = { 0 };
	for (i = 0; u[i]; i++) {
		if (u[i] >= 0x20 && u[i] != 0x7f)
			cd_strbuf_append_c(&sb, (char)u[i]);
		else if (u[i] == '\n')
			cd_strbuf_append(&sb, "\\n");
		else if (u[i] == '\t')
			cd_strbuf_append(&sb, "\\t");
		else if (u[i] == '\r')
			cd_strbuf_append(&sb, "\\r");
		else
			cd_strbuf_printf(&sb, "\\x%02x", u[i]);
	}
	free(*hold);
	*hold = cd_strbuf_steal(&sb);
	return *hold;
}

void cd_strbuf_done(struct cd_strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->cap = 0;
}

size_t cd_strv_length(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

void cd_strv_push_take(char ***v, char *s)
{
	size_t n = cd_strv_length(*v);
	*v = cd_xreallocarray(*v, n + 2, sizeof(char *));
	(*v)[n] = s;
	(*v)[n + 1] = NULL;
}

void *cd_grow_pow2(void *p, size_t n, size_t size)
{
	/* Full exactly when n is 0 or a power of two. */
	if (n == 0 || (n & (n - 1)) == 0)
		p = cd_xreallocarray(p, n ? 2 * n : 1, size);
	return p;
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static char **strset_slot(char **slot, size_t cap, const char *s)
{
	size_t k = str_hash(s) & (cap - 1);
	while (slot[k] && strcmp(slot[k], s) != 0)
		k = (k + 1) & (cap - 1);
	return &slot[k];
}

bool cd_strset_has(const struct cd_strset *set, const char *s)
{
	return set->cap && *strset_slot(set->slot, set->cap, s);
}

bool cd_strset_add(struct cd_strset *set, const char *s)
{
	if (2 * (set->n + 1) > set->cap) {
		size_t cap = set->cap ? 2 * set->cap : 64;
		char **slot = cd_xcalloc(cap, sizeof(*slot));
		for (size_t i = 0; i < set->cap; i++)
			if (set->slot[i])
				*strset_slot(slot, cap, set->slot[i]) = set->slot[i];
		free(set->slot);
		set->slot = slot;
		set->cap = cap;
	}
	char **p = strset_slot(set->slot, set->cap, s);
	if (*p)
		return false;
	*p = cd_xstrdup(s);
	set->n++;
	return true;
}

void cd_strset_done(struct cd_strset *set)
{
	for (size_t i = 0; i < set->cap; i++)
		free(set->slot[i]);
	free(set->slot);
	*set = (struct cd_strset){ 0 };
}

void cd_strv_append_take(char ***v, size_t *n, char *s)
{
	/* n strings and the NULL use n + 1 slots; the capacity is the next power of two. */
	size_t used = *n + 1;
	if (!*v)
		*v = cd_xreallocarray(NULL, 2, sizeof(char *));
	else if ((used & (used - 1)) == 0)
		*v = cd_xreallocarray(*v, 2 * used, sizeof(char *));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

void cd_strv_push(char ***v, const char *s)
{
	cd_strv_push_take(v, cd_xstrdup(s));
}

char **cd_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
	return NULL;
}

int cd_unhex(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int cd_parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;
	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*ret = v;
	return 0;
}

bool cd_path_is_normal(const char *path)
{
	if (!path || path[0] != '/')
		return false;
	if (path[1] == '\0')
		return true;
	const char *p = path;
	while (*p) {
		/* p points at a '/' */
		const char *c = p + 1;
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 0)
			return false; /* "//" or trailing "/" */
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!e)
			break;
		p = e;
	}
	return true;
}

char *cd_path_join(const char *a, const char *b)
{
	size_t la = strlen(a);
	while (la > 0 && a[la - 1] == '/')
		la--;
	while (*b == '/')
		b++;
	if (!*b)
		return la ? cd_xstrndup(a, la) : cd_xstrdup("/");
	return cd_xasprintf("%.*s/%s", (int)la, a, b);
}

size_t cd_path_depth(const char *p)
{
	size_t n = 0;
	if (cd_streq(p, "/"))
		return 0;
	for (; *p; p++)
		if (*p == '/')
			n++;
	return n;
}

char *cd_path_parent(const char *path)
{
	const char *slash = strrchr(path, '/');

	return cd_xstrndup(path, slash && slash > path ? (size_t)(slash - path) : 1);
}

char *cd_path_tidy(const char *path)
{
	struct cd_strbuf sb = { 0 };

	for (const char *p = path; *p;) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n > 0 && (n != 1 || p[0] != '.')) {
			cd_strbuf_append_c(&sb, '/');
			cd_strbuf_append_n(&sb, p, n);
		}
		p += n;
	}
	if (sb.len == 0)
		cd_strbuf_append_c(&sb, '/');
	return cd_strbuf_steal(&sb);
}

bool cd_path_is_beneath(const char *child, const char *parent)
{
	size_t n = strlen(parent);
	/* "/a/" names the same directory as "/a": compare without trailing slashes. */
	while (n > 0 && parent[n - 1] == '/')
		n--;
	if (n == 0)
		return child[0] == '/';
	return strncmp(child, parent, n) == 0 && (child[n] == '\0' || child[n] == '/');
}

size_t cd_utf8_space_len(const unsigned char *s, size_t n)
{
	static const uint32_t wide[] = {
		0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000
	};
	if (s[0] == ' ' || (s[0] >= 0x09 && s[0] <= 0x0d))
		return 1;
	uint32_t c;
	size_t k;
	if ((s[0] & 0xe0) == 0xc0 && n >= 2) {
		c = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
		k = 2;
	} else if ((s[0] & 0xf0) == 0xe0 && n >= 3) {
		c = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
		k = 3;
	} else {
		return 0;
	}
	if (c >= 0x2000 && c <= 0x200a)
		return k;
	for (size_t i = 0; i < CD_ARRAY_SIZE(wide); i++)
		if (c == wide[i])
			return k;
	return 0;
}

void cd_utf8_trim(const char **s, size_t *n)
{
	const unsigned char *p = (const unsigned char *)*s;
	size_t a = 0, b = *n, k;
	while (a < b && (k = cd_utf8_space_len(p + a, b - a)))
		a += k;
	while (b > a) {
		size_t st = b - 1;
		while (st > a && (p[st] & 0xc0) == 0x80)
			st--;
		if (cd_utf8_space_len(p + st, b - st) != b - st)
			break;
		b = st;
	}
	*s += a;
	*n = b - a;
}

bool cd_name_in(const char *s, size_t n, const char *const *list, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const char *w = list[i];
		size_t k = 0;
		while (k < n && w[k]) {
			unsigned char a = (unsigned char)s[k], b = (unsigned char)w[k];
			if ((a >= 'A' && a <= 'Z' ? a + 32 : a) !=
			    (b >= 'A' && b <= 'Z' ? b + 32 : b))
				break;
			k++;
		}
		if (k == n && !w[k])
			return true;
	}
	return false;
}
