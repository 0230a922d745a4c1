/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * file:// URIs for paths on the exec-server wire (see pathuri.h and
 * exec-server-reference.md section 3.6).
 *
 * The parser reads a URI as the released Codex exec-server does (see
 * pathuri.h): a client that names a file through "l/../f" or "%2e%2e" gets
 * the file Codex would have used, and a sandbox rule the path Codex would
 * have granted. The removal of dot segments is lexical, done on the URI
 * before any file system lookup, so it cannot follow a symlink's "..": the
 * policy and the file operation see the same, already normalised, path.
 *
 * The formatter reproduces Url::from_file_path byte for byte for normal
 * absolute paths, with two deliberate differences that keep
 * parse(format(P)) == P for every path:
 * - the path is not normalised the way Rust's Path::components() would
 *   (a trailing slash and empty segments are kept, and parse back
 *   normalised away); paths with "." or ".." components, which the parser
 *   would resolve, use the fallback form instead;
 * - a first segment that looks like a Windows drive ("C:", "c|") gets its
 *   second byte percent-encoded, otherwise the URI would be read back as a
 *   Windows path.
 */
#include "core/pathuri.h"

#include <errno.h>
#include <string.h>

#include "core/util.h"

#define FALLBACK_PREFIX "/%00/bad/path/"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static bool ascii_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static unsigned char ascii_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static bool case_eq(const char *s, size_t n, const char *lit)
{
	if (strlen(lit) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (ascii_lower((unsigned char)s[i]) != (unsigned char)lit[i])
			return false;
	return true;
}

static int b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

/* A URI path's first segment "C:" or "C|": the url crate's Windows drive letter. */
static bool is_drive_segment(const char *s, size_t n)
{
	return n == 2 && ascii_alpha((unsigned char)s[0]) && (s[1] == ':' || s[1] == '|');
}

/*
 * Decode base64url without padding. Only canonical encodings are accepted
 * (no stray length, unused trailing bits zero) so each path has exactly one
 * fallback URI.
 */
static int b64url_decode(const char *s, size_t n, char **ret, size_t *ret_len)
{
	char *out, *o;
	unsigned long acc = 0;
	unsigned bits = 0;

	if (n % 4 == 1)
		return -EINVAL;
	out = o = cd_xmalloc(n * 3 / 4 + 1);
	for (size_t i = 0; i < n; i++) {
		int v = b64val((unsigned char)s[i]);
		if (v < 0) {
			free(out);
			return -EINVAL;
		}
		acc = (acc << 6) | (unsigned long)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (char)((acc >> bits) & 0xff);
		}
	}
	if (acc & ((1ul << bits) - 1)) {
		free(out);
		return -EINVAL;
	}
	*o = '\0';
	*ret = out;
	*ret_len = (size_t)(o - out);
	return 0;
}

/* One path segment of the URI, as written (still percent-encoded). */
struct seg {
	const char *p;
	size_t n;
};

static bool is_pct2e(const char *p, size_t n)
{
	return n == 3 && p[0] == '%' && p[1] == '2' && (p[2] == 'e' || p[2] == 'E');
}

/* "." or "%2e" (any case): the URL standard's single-dot segment. */
static bool single_dot(const struct seg *s)
{
	return (s->n == 1 && s->p[0] == '.') || is_pct2e(s->p, s->n);
}

/* "..", ".%2e", "%2e." or "%2e%2e" (any case): a double-dot segment. */
static bool double_dot(const struct seg *s)
{
	const char *p = s->p;
	switch (s->n) {
	case 2:
		return p[0] == '.' && p[1] == '.';
	case 4:
		return (p[0] == '.' && is_pct2e(p + 1, 3)) || (is_pct2e(p, 3) && p[3] == '.');
	case 6:
		return is_pct2e(p, 3) && is_pct2e(p + 3, 3);
	default:
		return false;
	}
}

static bool is_sep(char c)
{
	/* file is a special scheme: a backslash separates like a slash */
	return c == '/' || c == '\\';
}

/*
 * Percent-decode seg into o (room for seg->n bytes), as the url crate's
 * to_file_path does: an escape that is not "%" and two hex digits stays as
 * written. Returns the decoded length.
 */
static size_t decode_segment(const struct seg *sg, char *o)
{
	size_t k = 0;

	for (size_t i = 0; i < sg->n; i++) {
		unsigned char c = (unsigned char)sg->p[i];
		int hi = c == '%' && i + 2 < sg->n ? cd_unhex((unsigned char)sg->p[i + 1]) : -1;
		int lo = hi >= 0 ? cd_unhex((unsigned char)sg->p[i + 2]) : -1;
		if (hi >= 0 && lo >= 0) {
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
		}
		o[k++] = (char)c;
	}
	return k;
}

/*
 * Remove "." and ".." components and empty ones (a doubled or trailing
 * slash) from the absolute path p[0..n) in place, lexically, as Codex's
 * AbsolutePathBuf does: ".." at the root stays at the root. Returns the new
 * length; the result is "/" or has no trailing slash.
 */
static size_t normalize_posix(char *p, size_t n)
{
	size_t o = 0; /* p[0..o) is the result so far, without a trailing slash */

	for (size_t i = 0; i < n;) {
		while (i < n && p[i] == '/')
			i++;
		size_t j = i;
		while (j < n && p[j] != '/')
			j++;
		size_t k = j - i;
		if (k == 0 || (k == 1 && p[i] == '.')) {
			/* nothing */
		} else if (k == 2 && p[i] == '.' && p[i + 1] == '.') {
			while (o > 0 && p[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* the slash before it */
		} else {
			p[o++] = '/';
			memmove(p + o, p + i, k);
			o += k;
		}
		i = j;
	}
	if (o == 0)
		p[o++] = '/';
	p[o] = '\0';
	return o;
}

/* The fallback form, after dot segments were removed: "/%00/bad/path/<base64url>". */
static bool fallback_segments(const struct seg *sg, size_t n)
{
	return n == 4 &&
	       ((sg[0].n == 3 && memcmp(sg[0].p, "%00", 3) == 0) ||
		(sg[0].n == 1 && sg[0].p[0] == '\0')) &&
	       sg[1].n == 3 && memcmp(sg[1].p, "bad", 3) == 0 && sg[2].n == 4 &&
	       memcmp(sg[2].p, "path", 4) == 0 && sg[3].n > 0;
}

/*
 * The host of "file://HOST/...": empty and "localhost" (any case, percent
 * escapes decoded, as the URL host parser does) are this machine; a host
 * the URL parser refuses is refused; any other is a Windows UNC server.
 */
static int check_host(const char *h, size_t n, bool *ret_unc, const char **reterr)
{
	char buf[16];
	size_t k = 0;

	*ret_unc = false;
	if (n == 0)
		return 0;
	if (memchr(h, '@', n)) {
		/* userinfo: the host parser refuses '@' in a file URL's host */
		*reterr = "URI has userinfo";
		return -EINVAL;
	}
	if (h[0] != '[' && memchr(h, ':', n)) {
		*reterr = "URI has a port";
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];
		/* the URL standard's forbidden host code points (tab and newlines are gone) */
		if (c <= 0x20 || c == 0x7f || strchr("#<>?@[\\]^|", c)) {
			if (!(c == '[' && i == 0) && !(c == ']' && i == n - 1)) {
				*reterr = "URI has an invalid host";
				return -EINVAL;
			}
		}
	}
	for (size_t i = 0; i < n && k < sizeof(buf); i++) {
		unsigned char c = (unsigned char)h[i];
		int hi = c == '%' && i + 2 < n ? cd_unhex((unsigned char)h[i + 1]) : -1;
		int lo = hi >= 0 ? cd_unhex((unsigned char)h[i + 2]) : -1;
		if (hi >= 0 && lo >= 0) {
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
		}
		buf[k++] = (char)ascii_lower(c);
	}
	if (k == 9 && memcmp(buf, "localhost", 9) == 0)
		return 0;
	*ret_unc = true;
	return 0;
}

int cd_pathuri_parse(const char *uri, size_t len, struct cd_pathuri *ret, const char **reterr)
{
	char *in = NULL, *out = NULL;
	struct seg *sg = NULL;
	size_t n = 0, i, nseg = 0, o = 0;
	const char *host = NULL;
	size_t host_n = 0;
	bool unc = false, drive = false;
	int r = -EINVAL;

	*ret = (struct cd_pathuri){ 0 };
	/*
	 * As a URL parser reads it: leading and trailing C0 controls and
	 * spaces are dropped, and tabs and newlines anywhere.
	 */
	while (len > 0 && (unsigned char)uri[0] <= 0x20)
		uri++, len--;
	while (len > 0 && (unsigned char)uri[len - 1] <= 0x20)
		len--;
	if (len == 0) {
		*reterr = "URI is empty";
		return -EINVAL;
	}
	in = cd_xmalloc(len + 1);
	for (i = 0; i < len; i++)
		if (uri[i] != '\t' && uri[i] != '\n' && uri[i] != '\r')
			in[n++] = uri[i];
	in[n] = '\0';

	/* The scheme, case-insensitive; without one a URI is relative and has no base. */
	if (n < 5 || !case_eq(in, 5, "file:")) {
		*reterr = "only file:// URIs are accepted";
		goto out;
	}
	i = 5;
	/*
	 * "file:" then any number of slashes (or backslashes). Two start an
	 * authority, unless it is a Windows drive letter ("file://C:/x").
	 */
	if (i + 1 < n && is_sep(in[i]) && is_sep(in[i + 1])) {
		size_t h = i + 2, e = h;
		while (e < n && !is_sep(in[e]) && in[e] != '?' && in[e] != '#')
			e++;
		if (is_drive_segment(in + h, e - h)) {
			i = h; /* a path that starts with the drive */
		} else {
			host = in + h;
			host_n = e - h;
			if (check_host(host, host_n, &unc, reterr) < 0)
				goto out;
			i = e;
			if (i < n && is_sep(in[i]))
				i++; /* the path's leading slash */
		}
	} else if (i < n && is_sep(in[i])) {
		i++;
	}

	/*
	 * The path's segments, dot segments removed as the URL standard says,
	 * before anything is decoded: ".." drops the segment before it (but
	 * not a Windows drive letter), and one at the end leaves an empty last
	 * segment, as "." there does.
	 */
	sg = cd_xcalloc(n - i + 1, sizeof(*sg));
	for (;;) {
		size_t e = i;
		while (e < n && !is_sep(in[e]) && in[e] != '?' && in[e] != '#')
			e++;
		struct seg cur = { in + i, e - i };
		bool last = e >= n || !is_sep(in[e]);
		if (double_dot(&cur)) {
			if (nseg > 0 && !(nseg == 1 && drive))
				nseg--;
			if (last)
				sg[nseg++] = (struct seg){ in + e, 0 };
		} else if (single_dot(&cur)) {
			if (last)
				sg[nseg++] = (struct seg){ in + e, 0 };
		} else {
			if (nseg == 0 && is_drive_segment(cur.p, cur.n))
				drive = true;
			sg[nseg++] = cur;
		}
		i = e;
		if (last)
			break;
		i++;
	}
	if (i < n && in[i] == '?') {
		*reterr = "URI has a query";
		goto out;
	}
	if (i < n && in[i] == '#') {
		*reterr = "URI has a fragment";
		goto out;
	}

	/* The fallback form for paths that have no URI form (e.g. with NUL). */
	if (!unc && fallback_segments(sg, nseg)) {
		if (b64url_decode(sg[3].p, sg[3].n, &ret->path, &ret->len) < 0) {
			*reterr = "URI has an invalid fallback path";
			goto out;
		}
		ret->convention = CD_PATH_POSIX;
		ret->fallback = true;
		r = 0;
		goto out;
	}

	/* Windows: a host (UNC) or a first non-empty segment "C:" ("C|" only when first). */
	for (size_t k = 0; k < nseg && !unc; k++) {
		if (sg[k].n == 0)
			continue;
		drive = (k == 0 && drive) ||
			(sg[k].n == 2 && ascii_alpha((unsigned char)sg[k].p[0]) &&
			 sg[k].p[1] == ':');
		if (drive && k > 0) {
			/* leading empty segments before the drive are dropped */
			memmove(sg, sg + k, (nseg - k) * sizeof(*sg));
			nseg -= k;
		}
		break;
	}
	ret->convention = unc || drive ? CD_PATH_WINDOWS : CD_PATH_POSIX;

	/* Decoding never grows a segment; add room for "\\\\host", separators and NUL. */
	out = cd_xmalloc(n + host_n + nseg + 4);
	if (unc) {
		out[o++] = '\\';
		out[o++] = '\\';
		memcpy(out + o, host, host_n);
		o += host_n;
	}
	for (size_t k = 0; k < nseg; k++) {
		if (ret->convention == CD_PATH_WINDOWS) {
			if (!(drive && k == 0))
				out[o++] = '\\';
		} else {
			out[o++] = '/';
		}
		size_t at = o;
		o += decode_segment(&sg[k], out + o);
		if (memchr(out + at, '\0', o - at)) {
			/* only the fallback form may carry NUL: C APIs would cut the path there */
			*reterr = "URI contains an encoded NUL (%00)";
			goto out;
		}
		if (drive && k == 0) {
			out[at + 1] = ':';
			if (nseg == 1)
				out[o++] = '\\';
		}
	}
	if (o == 0 || (unc && nseg == 0))
		out[o++] = ret->convention == CD_PATH_WINDOWS ? '\\' : '/';
	out[o] = '\0';
	if (ret->convention == CD_PATH_POSIX)
		o = normalize_posix(out, o);
	ret->path = out;
	ret->len = o;
	out = NULL;
	r = 0;
out:
	free(out);
	free(sg);
	free(in);
	return r;
}

void cd_pathuri_done(struct cd_pathuri *u)
{
	if (!u)
		return;
	free(u->path);
	u->path = NULL;
	u->len = 0;
}

int cd_pathuri_to_posix(const char *uri, size_t len, char **ret_path, const char **reterr)
{
	struct cd_pathuri u;
	int r;

	*ret_path = NULL;
	r = cd_pathuri_parse(uri, len, &u, reterr);
	if (r < 0)
		return r;
	if (u.convention != CD_PATH_POSIX) {
		*reterr = "URI is a Windows path, not valid on this host";
		cd_pathuri_done(&u);
		return -EINVAL;
	}
	if (memchr(u.path, '\0', u.len)) {
		*reterr = "path contains a NUL byte";
		cd_pathuri_done(&u);
		return -EINVAL;
	}
	if (u.len == 0 || u.path[0] != '/') {
		/* Only reachable through the fallback form. */
		*reterr = "path is not absolute";
		cd_pathuri_done(&u);
		return -EINVAL;
	}
	if (u.fallback) {
		/*
		 * Without a NUL the path has a URI form of its own, and Codex
		 * takes the fallback only for the path it stands for: refused.
		 */
		*reterr = "URI is the fallback form of a path that has a URI form";
		cd_pathuri_done(&u);
		return -EINVAL;
	}
	*ret_path = u.path;
	return 0;
}

/*
 * Bytes Url::from_file_path percent-encodes inside a segment on POSIX: the
 * url crate's PATH_SEGMENT set (controls, space, " # < > ? ` { } % /) plus
 * backslash, and everything non-ASCII.
 */
static bool must_encode(unsigned char c)
{
	if (c < 0x20 || c >= 0x7f)
		return true;
	switch (c) {
	case ' ':
	case '"':
	case '#':
	case '<':
	case '>':
	case '?':
	case '`':
	case '{':
	case '}':
	case '%':
	case '\\':
		return true;
	default:
		return false;
	}
}

/* True if the path has a "." or ".." component, which our parser would refuse. */
static bool has_dot_segment(const char *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && p[j] != '/')
			j++;
		size_t k = j - i;
		if ((k == 1 && p[i] == '.') || (k == 2 && p[i] == '.' && p[i + 1] == '.'))
			return true;
		i = j + 1;
	}
	return false;
}

static char *format_fallback(const char *path, size_t len)
{
	struct cd_strbuf sb = { 0 };
	unsigned long acc = 0;
	unsigned bits = 0;

	cd_strbuf_append(&sb, "file://" FALLBACK_PREFIX);
	for (size_t i = 0; i < len; i++) {
		acc = (acc << 8) | (unsigned char)path[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			cd_strbuf_append_c(&sb, b64url[(acc >> bits) & 63]);
		}
		acc &= (1ul << bits) - 1;
	}
	if (bits)
		cd_strbuf_append_c(&sb, b64url[(acc << (6 - bits)) & 63]);
	return cd_strbuf_steal(&sb);
}

char *cd_pathuri_format_posix(const char *path, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	struct cd_strbuf sb = { 0 };

	if (len == 0 || path[0] != '/' || memchr(path, '\0', len) || has_dot_segment(path, len))
		return format_fallback(path, len);
	size_t lead = 0;
	while (lead < len && path[lead] == '/')
		lead++;
	bool drive = lead + 2 <= len && is_drive_segment(path + lead, 2) &&
		     (lead + 2 == len || path[lead + 2] == '/');

	cd_strbuf_append(&sb, "file://");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)path[i];
		/* "/C:/x" (or "//C:/x": empty components go) must not read back as the drive C:. */
		bool drive_sep = drive && i == lead + 1;
		if (must_encode(c) || drive_sep) {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			cd_strbuf_append_n(&sb, e, 3);
		} else {
			cd_strbuf_append_c(&sb, (char)c);
		}
	}
	return cd_strbuf_steal(&sb);
}
