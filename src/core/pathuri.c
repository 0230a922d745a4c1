/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * file:// URIs for paths on the exec-server wire (see pathuri.h and
 * exec-server-reference.md section 3.6).
 *
 * The parser is deliberately stricter than a general URL parser: a PathUri
 * names a file the sandbox policy will grant or deny, so anything that could
 * make two parties disagree about *which* file is meant is refused rather
 * than normalised (dot segments, encoded separators, NUL bytes, raw
 * backslashes, hosts we cannot interpret). Where refusing costs nothing in
 * compatibility (raw non-ASCII bytes, raw characters the url crate would have
 * escaped) the parser is lenient and decodes them as themselves.
 *
 * The formatter reproduces Url::from_file_path byte for byte for normal
 * absolute paths, with two deliberate differences that keep
 * parse(format(P)) == P for every path:
 * - the path is not normalised the way Rust's Path::components() would
 *   (a trailing slash and empty segments are kept); paths with "." or ".."
 *   segments, which our parser refuses, use the fallback form instead;
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

/*
 * Decode one path segment seg[0..n) into o (room for n bytes). Returns the
 * decoded length or -1 with *reterr set.
 */
static long decode_segment(const char *seg, size_t n, char *o, const char **reterr)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)seg[i];
		if (c != '%') {
			o[k++] = (char)c;
			continue;
		}
		int hi = i + 2 < n ? cd_unhex((unsigned char)seg[i + 1]) : -1;
		int lo = hi >= 0 ? cd_unhex((unsigned char)seg[i + 2]) : -1;
		if (hi < 0 || lo < 0) {
			*reterr = "URI has an invalid percent escape";
			return -1;
		}
		c = (unsigned char)(hi * 16 + lo);
		if (c == 0) {
			/* Only the fallback form may carry NUL; elsewhere it would
			 * silently truncate the path in every C API downstream. */
			*reterr = "URI contains an encoded NUL (%00)";
			return -1;
		}
		if (c == '/') {
			/* An encoded separator would let one URI segment become two
			 * path components after decoding. */
			*reterr = "URI has an encoded '/' (%2F)";
			return -1;
		}
		o[k++] = (char)c;
		i += 2;
	}
	/*
	 * Dot segments, however spelt (".", "%2e", ".%2E", ...), are refused
	 * instead of resolved: URL resolution and the file system disagree
	 * about ".." after a symlink, and a policy path must mean one file.
	 */
	if ((k == 1 && o[0] == '.') || (k == 2 && o[0] == '.' && o[1] == '.')) {
		*reterr = "URI has a '.' or '..' segment";
		return -1;
	}
	return (long)k;
}

int cd_pathuri_parse(const char *uri, size_t len, struct cd_pathuri *ret, const char **reterr)
{
	const char *rest, *end = uri + len, *auth, *auth_end, *path;
	enum cd_path_convention conv = CD_PATH_POSIX;
	bool unc = false, drive = false;
	char *out;
	size_t o = 0;

	*ret = (struct cd_pathuri){ 0 };
	if (len == 0) {
		*reterr = "URI is empty";
		return -EINVAL;
	}
	if (len < 5 || !case_eq(uri, 5, "file:")) {
		*reterr = "only file:// URIs are accepted";
		return -EINVAL;
	}
	if (len < 7 || uri[5] != '/' || uri[6] != '/') {
		/* "file:/x" and "file:x" are valid URLs but not canonical PathUris. */
		*reterr = "file URI must start with file://";
		return -EINVAL;
	}
	rest = uri + 7;

	/*
	 * Whole-string checks first. A query or fragment would be silently
	 * dropped by a path conversion, so the path would not be what was sent.
	 * Raw spaces and controls (including NUL) never occur in a canonical
	 * URI; a raw backslash is a separator to Windows URL parsers but a file
	 * name byte on POSIX, so its meaning is ambiguous.
	 */
	for (const char *p = rest; p < end; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '?') {
			*reterr = "URI has a query";
			return -EINVAL;
		}
		if (c == '#') {
			*reterr = "URI has a fragment";
			return -EINVAL;
		}
		if (c < 0x21 || c == 0x7f) {
			*reterr = "URI contains a space or control character";
			return -EINVAL;
		}
		if (c == '\\') {
			*reterr = "URI contains a raw backslash";
			return -EINVAL;
		}
	}

	auth = rest;
	path = memchr(rest, '/', (size_t)(end - rest));
	auth_end = path ? path : end;
	if (memchr(auth, '@', (size_t)(auth_end - auth))) {
		/* Credentials have no meaning for a local file. */
		*reterr = "URI has userinfo";
		return -EINVAL;
	}
	{
		/* Skip a bracketed IPv6 literal before looking for a port. */
		const char *h = auth;
		if (h < auth_end && *h == '[') {
			const char *rb = memchr(h, ']', (size_t)(auth_end - h));
			h = rb ? rb : auth_end;
		}
		if (memchr(h, ':', (size_t)(auth_end - h))) {
			*reterr = "URI has a port";
			return -EINVAL;
		}
	}
	if (auth_end != auth && !case_eq(auth, (size_t)(auth_end - auth), "localhost")) {
		/* Any other host is a Windows UNC share (\\host\share). */
		conv = CD_PATH_WINDOWS;
		unc = true;
	}
	if (!path) {
		if (auth_end == auth) {
			*reterr = "URI has no path";
			return -EINVAL;
		}
		path = end; /* "file://localhost" is the root */
	}

	/* The fallback form for paths that have no URI form (e.g. with NUL). */
	if (!unc && (size_t)(end - path) >= strlen(FALLBACK_PREFIX) &&
	    memcmp(path, FALLBACK_PREFIX, strlen(FALLBACK_PREFIX)) == 0) {
		const char *b = path + strlen(FALLBACK_PREFIX);
		if (b64url_decode(b, (size_t)(end - b), &ret->path, &ret->len) < 0) {
			*reterr = "URI has an invalid fallback path";
			return -EINVAL;
		}
		ret->convention = CD_PATH_POSIX;
		return 0;
	}

	if (!unc && end - path >= 3 && is_drive_segment(path + 1, 2) &&
	    (end - path == 3 || path[3] == '/')) {
		conv = CD_PATH_WINDOWS;
		drive = true;
	}

	/* Decoding never grows a segment; add room for "\\\\host" and a final separator. */
	out = cd_xmalloc((size_t)(end - path) + (size_t)(auth_end - auth) + 4);
	if (unc) {
		out[o++] = '\\';
		out[o++] = '\\';
		memcpy(out + o, auth, (size_t)(auth_end - auth));
		o += (size_t)(auth_end - auth);
	}
	if (drive) {
		out[o++] = path[1];
		out[o++] = ':';
		path += 3;
		if (path >= end) {
			out[o++] = '\\';
		}
	}
	if (path >= end && !drive) {
		/* "file://host" or "file://localhost": the root. */
		out[o++] = conv == CD_PATH_WINDOWS ? '\\' : '/';
	}
	while (path < end) {
		/* path points at a '/' */
		const char *seg = path + 1;
		const char *seg_end = memchr(seg, '/', (size_t)(end - seg));
		if (!seg_end)
			seg_end = end;
		out[o++] = conv == CD_PATH_WINDOWS ? '\\' : '/';
		long k = decode_segment(seg, (size_t)(seg_end - seg), out + o, reterr);
		if (k < 0) {
			free(out);
			return -EINVAL;
		}
		o += (size_t)k;
		path = seg_end;
	}
	out[o] = '\0';
	ret->convention = conv;
	ret->path = out;
	ret->len = o;
	return 0;
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

	cd_strbuf_append(&sb, "file://");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)path[i];
		/* "/C:/x" must not read back as the Windows drive C:. */
		bool drive_sep =
			i == 2 && is_drive_segment(path + 1, 2) && (len == 3 || path[3] == '/');
		if (must_encode(c) || drive_sep) {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			cd_strbuf_append_n(&sb, e, 3);
		} else {
			cd_strbuf_append_c(&sb, (char)c);
		}
	}
	return cd_strbuf_steal(&sb);
}
