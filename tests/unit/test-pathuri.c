/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for PathUri parsing and formatting (src/core/pathuri.c):
 * accepted forms, every refusal with its message, the NUL fallback form and
 * seeded round-trip properties over random byte paths. The "as Codex" rows
 * were read off the released Codex exec-server (0.169.0): the file its
 * fs/readFile and process/start cwd used, or its refusal.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pathuri.h"
#include "core/util.h"

#define S(lit) lit, sizeof(lit) - 1

/* ---- accepted ---- */

static const struct {
	const char *uri;
	size_t uri_len;
	enum cd_path_convention conv;
	const char *path;
	size_t path_len;
} good[] = {
	{ S("file:///"), CD_PATH_POSIX, S("/") },
	{ S("file:///etc/passwd"), CD_PATH_POSIX, S("/etc/passwd") },
	{ S("file:///home/u/my%20repo"), CD_PATH_POSIX, S("/home/u/my repo") },
	{ S("file:///tmp/%C3%BC"), CD_PATH_POSIX, S("/tmp/\xc3\xbc") },
	{ S("file:///tmp/%c3%bc"), CD_PATH_POSIX, S("/tmp/\xc3\xbc") },
	{ S("file:///tmp/\xc3\xbc"), CD_PATH_POSIX, S("/tmp/\xc3\xbc") },
	{ S("file:///tmp/%FF%FE%80"), CD_PATH_POSIX, S("/tmp/\xff\xfe\x80") },
	{ S("file://localhost/etc/passwd"), CD_PATH_POSIX, S("/etc/passwd") },
	{ S("file://LocalHost/etc"), CD_PATH_POSIX, S("/etc") },
	{ S("file://localhost"), CD_PATH_POSIX, S("/") },
	{ S("file://localhost/"), CD_PATH_POSIX, S("/") },
	{ S("FILE:///etc"), CD_PATH_POSIX, S("/etc") },
	{ S("File:///etc"), CD_PATH_POSIX, S("/etc") },
	/* as Codex: a trailing slash and empty segments are normalised away */
	{ S("file:///a/b/"), CD_PATH_POSIX, S("/a/b") },
	{ S("file:///a//b"), CD_PATH_POSIX, S("/a/b") },
	{ S("file:////a/b"), CD_PATH_POSIX, S("/a/b") },
	/* as Codex: dot segments, however spelt, removed lexically from the URI */
	{ S("file:///w/l/../f"), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///w/./f"), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///w/%2e%2e/f"), CD_PATH_POSIX, S("/f") },
	{ S("file:///w/%2E%2E/w/f"), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///w/.%2e/f"), CD_PATH_POSIX, S("/f") },
	{ S("file:///w/%2e./f"), CD_PATH_POSIX, S("/f") },
	{ S("file:///w/%2E/f"), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///../f"), CD_PATH_POSIX, S("/f") },
	{ S("file:///../../f"), CD_PATH_POSIX, S("/f") },
	{ S("file:///w/f/.."), CD_PATH_POSIX, S("/w") },
	{ S("file:///w/f/."), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///w/.."), CD_PATH_POSIX, S("/") },
	{ S("file:///.."), CD_PATH_POSIX, S("/") },
	{ S("file:///."), CD_PATH_POSIX, S("/") },
	{ S("file:///a/./"), CD_PATH_POSIX, S("/a") },
	{ S("file:///a/.%2E"), CD_PATH_POSIX, S("/") },
	{ S("file://localhost/w/../f"), CD_PATH_POSIX, S("/f") },
	{ S("file:///w/%2e%2ex"), CD_PATH_POSIX, S("/w/..x") },
	/* as Codex: an encoded '/' separates once decoded, and the path is then normalised */
	{ S("file:///w%2ff"), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///w%2Ff"), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///w/%2e%2e%2ff"), CD_PATH_POSIX, S("/f") },
	/* ... but URI dot segments go first: ".." drops the whole "x%2fb" */
	{ S("file:///w/x%2fb/../f"), CD_PATH_POSIX, S("/w/f") },
	/* as Codex: a backslash separates */
	{ S("file:///w\\f"), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///w\\..\\f"), CD_PATH_POSIX, S("/f") },
	{ S("file:///w/a\\b"), CD_PATH_POSIX, S("/w/a/b") },
	{ S("file:\\\\\\w/f"), CD_PATH_POSIX, S("/w/f") },
	/* as Codex: spaces and C0 controls trimmed at the ends, tab and newlines dropped */
	{ S(" file:///x"), CD_PATH_POSIX, S("/x") },
	{ S("file:///x \n"), CD_PATH_POSIX, S("/x") },
	{ S("file:///w/\tf"), CD_PATH_POSIX, S("/w/f") },
	{ S("file:///a\nb\r"), CD_PATH_POSIX, S("/ab") },
	/* as Codex: raw spaces and controls inside are bytes of the name */
	{ S("file:///w/x y"), CD_PATH_POSIX, S("/w/x y") },
	{ S("file:///a\x7f\x01"
	    "b"),
	  CD_PATH_POSIX,
	  S("/a\x7f\x01"
	    "b") },
	/* as Codex: a '%' without two hex digits stays as written */
	{ S("file:///w/a%b"), CD_PATH_POSIX, S("/w/a%b") },
	{ S("file:///x%4"), CD_PATH_POSIX, S("/x%4") },
	{ S("file:///x%4/y"), CD_PATH_POSIX, S("/x%4/y") },
	{ S("file:///x%zz"), CD_PATH_POSIX, S("/x%zz") },
	{ S("file:///x%"), CD_PATH_POSIX, S("/x%") },
	{ S("file:///x%%41"), CD_PATH_POSIX, S("/x%A") },
	/* as Codex: "file:" with fewer slashes, or none */
	{ S("file:"), CD_PATH_POSIX, S("/") },
	{ S("file://"), CD_PATH_POSIX, S("/") },
	{ S("file:/tmp/x"), CD_PATH_POSIX, S("/tmp/x") },
	{ S("file:tmp"), CD_PATH_POSIX, S("/tmp") },
	{ S("file://%6cocalhost/w"), CD_PATH_POSIX, S("/w") },
	{ S("file://LOCALHOST/w"), CD_PATH_POSIX, S("/w") },
	/* "C|" is a drive only as the first segment */
	{ S("file:////C|/x"), CD_PATH_POSIX, S("/C|/x") },
	{ S("file:///a%5Cb"), CD_PATH_POSIX, S("/a\\b") },
	{ S("file:///a%25b%3Fc%23d"), CD_PATH_POSIX, S("/a%b?c#d") },
	{ S("file:///.a/..b/.../b./a.."), CD_PATH_POSIX, S("/.a/..b/.../b./a..") },
	{ S("file:///%2e%2e%2e"), CD_PATH_POSIX, S("/...") },
	{ S("file:///!$&'()*+,;=:@[]^|~"), CD_PATH_POSIX, S("/!$&'()*+,;=:@[]^|~") },
	/* characters the url crate would escape are read as themselves */
	{ S("file:///a\"<>`{}"), CD_PATH_POSIX, S("/a\"<>`{}") },
	/* not Windows drives */
	{ S("file:///C%3A/x"), CD_PATH_POSIX, S("/C:/x") },
	{ S("file:///C:x/y"), CD_PATH_POSIX, S("/C:x/y") },
	{ S("file:///CC:/y"), CD_PATH_POSIX, S("/CC:/y") },
	{ S("file:///1:/y"), CD_PATH_POSIX, S("/1:/y") },
	/* Windows convention */
	{ S("file:///C:/Users/u/repo"), CD_PATH_WINDOWS, S("C:\\Users\\u\\repo") },
	{ S("file:///c|/x%20y"), CD_PATH_WINDOWS, S("c:\\x y") },
	{ S("file:///C:"), CD_PATH_WINDOWS, S("C:\\") },
	{ S("file:///C:/"), CD_PATH_WINDOWS, S("C:\\") },
	{ S("file://localhost/D:/x"), CD_PATH_WINDOWS, S("D:\\x") },
	{ S("file://server/share/dir"), CD_PATH_WINDOWS, S("\\\\server\\share\\dir") },
	{ S("file://server"), CD_PATH_WINDOWS, S("\\\\server\\") },
	{ S("file:\\\\x"), CD_PATH_WINDOWS, S("\\\\x\\") },
	{ S("file:///C:/a/../b"), CD_PATH_WINDOWS, S("C:\\b") },
	{ S("file:///C:/../x"), CD_PATH_WINDOWS, S("C:\\x") },
	{ S("file:////C:/x"), CD_PATH_WINDOWS, S("C:\\x") },
	{ S("file://server/share/.."), CD_PATH_WINDOWS, S("\\\\server\\") },
	/* fallback form */
	{ S("file:///%00/bad/path/L2EAYg"), CD_PATH_POSIX, S("/a\0b") },
	{ S("file:///%00/bad/path/LwA"), CD_PATH_POSIX, S("/\0") },
	{ S("file:///%00/bad/path/AP_-"), CD_PATH_POSIX, S("\0\xff\xfe") },
	{ S("file://localhost/%00/bad/path/cmVs"), CD_PATH_POSIX, S("rel") },
	/* as Codex: dot segments go before the fallback form is recognised */
	{ S("file:///a/../%00/bad/path/L2EAYg"), CD_PATH_POSIX, S("/a\0b") },
};

START_TEST(test_good)
{
	struct cd_pathuri u;
	const char *err = NULL;
	int r = cd_pathuri_parse(good[_i].uri, good[_i].uri_len, &u, &err);

	ck_assert_msg(r == 0, "%s: %s", good[_i].uri, err);
	ck_assert_msg(u.convention == good[_i].conv, "%s: convention %d", good[_i].uri,
		      u.convention);
	ck_assert_msg(u.len == good[_i].path_len && memcmp(u.path, good[_i].path, u.len) == 0,
		      "%s: got '%s' (%zu)", good[_i].uri, u.path, u.len);
	ck_assert_int_eq(u.path[u.len], '\0');
	cd_pathuri_done(&u);
	ck_assert_ptr_null(u.path);
	cd_pathuri_done(&u); /* idempotent */
}
END_TEST

/* ---- refused ---- */

static const struct {
	const char *uri;
	size_t len;
	const char *msg;
} bad[] = {
	{ S(""), "URI is empty" },
	{ S(" \t "), "URI is empty" },
	{ S("http://x/y"), "only file:// URIs are accepted" },
	{ S("https:///etc"), "only file:// URIs are accepted" },
	{ S("/tmp/x"), "only file:// URIs are accepted" },
	{ S("fil"), "only file:// URIs are accepted" },
	{ S("files:///x"), "only file:// URIs are accepted" },
	/* as Codex: userinfo, ports and hosts the URL parser refuses */
	{ S("file://user@host/x"), "URI has userinfo" },
	{ S("file://user:pw@localhost/x"), "URI has userinfo" },
	{ S("file://@/x"), "URI has userinfo" },
	{ S("file://localhost:8080/x"), "URI has a port" },
	{ S("file://:80/x"), "URI has a port" },
	{ S("file://localhost:/x"), "URI has a port" },
	{ S("file://[::1]:22/x"), "URI has an invalid host" },
	{ S("file://a b/x"), "URI has an invalid host" },
	{ S("file://a<b/x"), "URI has an invalid host" },
	/* as Codex: a query or a fragment, even empty */
	{ S("file:///x?y"), "URI has a query" },
	{ S("file:///x?"), "URI has a query" },
	{ S("file://host?/x"), "URI has a query" },
	{ S("file:///x/..?y"), "URI has a query" },
	{ S("file:///x?y#z"), "URI has a query" },
	{ S("file:///x#y"), "URI has a fragment" },
	{ S("file:///x#"), "URI has a fragment" },
	{ S("file:///x/%2e#"), "URI has a fragment" },
	/* as Codex: a NUL outside the fallback form */
	{ S("file:///x%00y"), "URI contains an encoded NUL (%00)" },
	{ S("file:///%00"), "URI contains an encoded NUL (%00)" },
	{ S("file:///%00/bad"), "URI contains an encoded NUL (%00)" },
	{ S("file:///%00/bad/path"), "URI contains an encoded NUL (%00)" },
	{ S("file:///%00/bad/path/"), "URI contains an encoded NUL (%00)" },
	{ S("file:///%00/bad/path/L2E/Yg"), "URI contains an encoded NUL (%00)" },
	{ S("file:///a\0b"), "URI contains an encoded NUL (%00)" },
	{ S("file:///w/f%00"), "URI contains an encoded NUL (%00)" },
	{ S("file:///%00/bad/path/!!"), "URI has an invalid fallback path" },
	{ S("file:///%00/bad/path/A"), "URI has an invalid fallback path" },
	{ S("file:///%00/bad/path/AB"), "URI has an invalid fallback path" },
	{ S("file:///%00/bad/path/L2E=="), "URI has an invalid fallback path" },
	{ S("file:///%00/bad/path/L2E+"), "URI has an invalid fallback path" },
	{ S("file:///%00/bad/path/L2E%41"), "URI has an invalid fallback path" },
};

START_TEST(test_bad)
{
	struct cd_pathuri u = { .path = (char *)1 };
	const char *err = NULL;
	char *p = (char *)1;
	int r = cd_pathuri_parse(bad[_i].uri, bad[_i].len, &u, &err);

	ck_assert_msg(r == -EINVAL, "%s: accepted as '%s'", bad[_i].uri, r == 0 ? u.path : "?");
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, bad[_i].msg), "%s: message '%s', want '%s'", bad[_i].uri, err,
		      bad[_i].msg);
	ck_assert_ptr_null(u.path);
	cd_pathuri_done(&u);

	err = NULL;
	ck_assert_int_eq(cd_pathuri_to_posix(bad[_i].uri, bad[_i].len, &p, &err), -EINVAL);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(strstr(err, bad[_i].msg));
}
END_TEST

static const struct {
	const char *uri;
	size_t len;
	const char *msg;
} posix_refused[] = {
	{ S("file:///C:/x"), "URI is a Windows path, not valid on this host" },
	{ S("file:///c|"), "URI is a Windows path, not valid on this host" },
	{ S("file://server/share/dir"), "URI is a Windows path, not valid on this host" },
	{ S("file://127.0.0.1/x"), "URI is a Windows path, not valid on this host" },
	{ S("file://[::1]/x"), "URI is a Windows path, not valid on this host" },
	{ S("file://host/w/f"), "URI is a Windows path, not valid on this host" },
	{ S("file:///%00/bad/path/L2EAYg"), "path contains a NUL byte" },
	{ S("file:///%00/bad/path/cmVs"), "path is not absolute" },
	/* as Codex: "/a/../b" has a URI of its own */
	{ S("file:///%00/bad/path/L2EvLi4vYg"),
	  "URI is the fallback form of a path that has a URI form" },
};

START_TEST(test_posix_refused)
{
	char *p = (char *)1;
	const char *err = NULL;
	struct cd_pathuri u;

	/* parse itself accepts these */
	ck_assert_int_eq(cd_pathuri_parse(posix_refused[_i].uri, posix_refused[_i].len, &u, &err),
			 0);
	cd_pathuri_done(&u);
	ck_assert_int_eq(
		cd_pathuri_to_posix(posix_refused[_i].uri, posix_refused[_i].len, &p, &err),
		-EINVAL);
	ck_assert_ptr_null(p);
	ck_assert_str_eq(err, posix_refused[_i].msg);
}
END_TEST

START_TEST(test_to_posix)
{
	char *p = NULL;
	const char *err = NULL;

	ck_assert_int_eq(cd_pathuri_to_posix(S("file:///home/u/my%20repo"), &p, &err), 0);
	ck_assert_str_eq(p, "/home/u/my repo");
	free(p);
	ck_assert_int_eq(cd_pathuri_to_posix(S("file://localhost/"), &p, &err), 0);
	ck_assert_str_eq(p, "/");
	free(p);
	/* removal of dot segments is lexical: "/w/l/.." is "/w" whatever l is */
	ck_assert_int_eq(cd_pathuri_to_posix(S("file:///w/l/.."), &p, &err), 0);
	ck_assert_str_eq(p, "/w");
	free(p);
	ck_assert_int_eq(cd_pathuri_to_posix(NULL, 0, &p, &err), -EINVAL);
	ck_assert_str_eq(err, "URI is empty");
	ck_assert_ptr_null(p);
	/* only len bytes are read */
	ck_assert_int_eq(cd_pathuri_to_posix("file:///etc#frag", 11, &p, &err), 0);
	ck_assert_str_eq(p, "/etc");
	free(p);
}
END_TEST

START_TEST(test_long)
{
	const size_t n = 1024 * 1024;
	struct cd_strbuf sb = { 0 };
	char *p = NULL;
	const char *err = NULL;

	cd_strbuf_append(&sb, "file://");
	for (size_t i = 0; i < n / 8; i++)
		cd_strbuf_append(&sb, "/ab%20cd");
	ck_assert_int_eq(cd_pathuri_to_posix(sb.buf, sb.len, &p, &err), 0);
	ck_assert_uint_eq(strlen(p), n / 8 * 6);
	ck_assert_int_eq(memcmp(p, "/ab cd/ab cd", 12), 0);
	char *back = cd_pathuri_format_posix(p, strlen(p));
	ck_assert_str_eq(back, sb.buf);
	free(back);
	free(p);

	/* a long refused URI fails at the end, cleanly */
	cd_strbuf_append(&sb, "/x?");
	ck_assert_int_eq(cd_pathuri_to_posix(sb.buf, sb.len, &p, &err), -EINVAL);
	ck_assert_str_eq(err, "URI has a query");
	cd_strbuf_done(&sb);

	/* a 1 MiB single segment */
	cd_strbuf_append(&sb, "file:///");
	for (size_t i = 0; i < n; i++)
		cd_strbuf_append_c(&sb, 'x');
	ck_assert_int_eq(cd_pathuri_to_posix(sb.buf, sb.len, &p, &err), 0);
	ck_assert_uint_eq(strlen(p), n + 1);
	free(p);
	cd_strbuf_done(&sb);
}
END_TEST

/* ---- formatting ---- */

static const struct {
	const char *path;
	size_t len;
	const char *uri;
	const char *back; /* what it parses back to, if not path: normalised */
} fmt[] = {
	{ S("/"), "file:///" },
	{ S("/etc/passwd"), "file:///etc/passwd" },
	{ S("/home/u/my repo"), "file:///home/u/my%20repo" },
	{ S("/tmp/\xc3\xbc"), "file:///tmp/%C3%BC" },
	{ S("/a/b/"), "file:///a/b/", "/a/b" },
	{ S("/a//b"), "file:///a//b", "/a/b" },
	{ S("/ \"#<>?`{}%\\"), "file:///%20%22%23%3C%3E%3F%60%7B%7D%25%5C" },
	{ S("/!$&'()*+,;=:@[]^|~-._"), "file:///!$&'()*+,;=:@[]^|~-._" },
	{ S("/\x01\x1f\x7f\x80\xff"), "file:///%01%1F%7F%80%FF" },
	{ S("/.a/..b/.../c."), "file:///.a/..b/.../c." },
	/* first segments that would read back as a Windows drive */
	{ S("/C:/x"), "file:///C%3A/x" },
	{ S("/c|"), "file:///c%7C" },
	{ S("/z:"), "file:///z%3A" },
	{ S("/C:x"), "file:///C:x" },
	{ S("/x/C:/y"), "file:///x/C:/y" },
	/* empty components go, so a drive after them is the first segment too */
	{ S("//C:///Etc"), "file:////C%3A///Etc", "/C:/Etc" },
	{ S("///z|"), "file://///z%7C", "/z|" },
	/* no URI form: fallback */
	{ S(""), "file:///%00/bad/path/", "!" }, /* as in Codex, it does not parse */
	{ S("rel"), "file:///%00/bad/path/cmVs" },
	{ S("/a\0b"), "file:///%00/bad/path/L2EAYg" },
	{ S("/\0"), "file:///%00/bad/path/LwA" },
	{ S("\0\xff\xfe"), "file:///%00/bad/path/AP_-" },
	{ S("/a/../b"), "file:///%00/bad/path/L2EvLi4vYg" },
	{ S("/a/."), "file:///%00/bad/path/L2EvLg" },
};

START_TEST(test_format)
{
	char *u = cd_pathuri_format_posix(fmt[_i].path, fmt[_i].len);
	ck_assert_str_eq(u, fmt[_i].uri);

	/* and back */
	struct cd_pathuri pu;
	const char *err = NULL;
	if (fmt[_i].back && strcmp(fmt[_i].back, "!") == 0) {
		ck_assert_int_eq(cd_pathuri_parse(u, strlen(u), &pu, &err), -EINVAL);
		free(u);
		return;
	}
	const char *want = fmt[_i].back ? fmt[_i].back : fmt[_i].path;
	size_t want_len = fmt[_i].back ? strlen(fmt[_i].back) : fmt[_i].len;
	ck_assert_msg(cd_pathuri_parse(u, strlen(u), &pu, &err) == 0, "%s: %s", u, err);
	ck_assert_int_eq(pu.convention, CD_PATH_POSIX);
	ck_assert_uint_eq(pu.len, want_len);
	ck_assert_int_eq(memcmp(pu.path, want, pu.len), 0);
	cd_pathuri_done(&pu);
	free(u);
}
END_TEST

static const char *const canonical[] = {
	"file:///",
	"file:///etc",
	"file:///home/u/my%20repo",
	"file:///tmp/%C3%BC%FF",
	"file:///a/%25/%5C/%3F%23",
	"file:///C%3A/x",
	"file:///%00/bad/path/L2EAYg",
	"file:///%00/bad/path/cmVs",
};

START_TEST(test_canonical_roundtrip)
{
	const char *uri = canonical[_i];
	struct cd_pathuri pu;
	const char *err = NULL;

	ck_assert_int_eq(cd_pathuri_parse(uri, strlen(uri), &pu, &err), 0);
	char *back = cd_pathuri_format_posix(pu.path, pu.len);
	ck_assert_str_eq(back, uri);
	free(back);
	cd_pathuri_done(&pu);
}
END_TEST

/* xorshift64, seeded: failures reproduce */
static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static unsigned char rand_byte(void)
{
	static const char common[] = "aZ09 .-_%#?\\:|\"<>`{}~";
	switch (rng() % 4) {
	case 0:
		return (unsigned char)common[rng() % (sizeof(common) - 1)];
	case 1:
		return (unsigned char)(0x80 + rng() % 0x80);
	default:
		return (unsigned char)(1 + rng() % 255);
	}
}

/*
 * A random absolute path without NUL and without ".", ".." or empty
 * segments, nor a trailing slash: a normalised path, with a URI form.
 */
static size_t rand_uri_path(char *buf)
{
	size_t len = 0;
	unsigned nseg = (unsigned)(rng() % 6);

	for (unsigned s = 0; s < nseg; s++) {
		size_t start;
		do {
			start = len;
			buf[len++] = '/';
			size_t n = 1 + rng() % (rng() % 4 ? 3 : 20);
			for (size_t i = 0; i < n; i++) {
				unsigned char c = rand_byte();
				buf[len++] = (char)(c == '/' ? 'x' : c);
			}
			size_t k = len - start - 1;
			if ((k == 1 && buf[start + 1] == '.') ||
			    (k == 2 && buf[start + 1] == '.' && buf[start + 2] == '.'))
				len = start; /* a dot segment: draw again */
		} while (len == start);
	}
	if (len == 0)
		buf[len++] = '/';
	return len;
}

START_TEST(test_roundtrip_random)
{
	char path[256];
	rng_state = 0x243f6a8885a308d3ull;

	for (int iter = 0; iter < 10000; iter++) {
		size_t len = rand_uri_path(path);
		char *uri = cd_pathuri_format_posix(path, len);
		/* canonical form, not the fallback */
		ck_assert_msg(strncmp(uri, "file:///%00/", 12) != 0, "iteration %d: fallback %s",
			      iter, uri);
		for (const char *q = uri; *q; q++)
			ck_assert_msg((unsigned char)*q > 0x20 && (unsigned char)*q < 0x7f,
				      "non-ASCII or control byte in %s", uri);

		char *back = NULL;
		const char *err = NULL;
		int r = cd_pathuri_to_posix(uri, strlen(uri), &back, &err);
		ck_assert_msg(r == 0, "iteration %d: %s: %s", iter, uri, err);
		ck_assert_msg(strlen(back) == len && memcmp(back, path, len) == 0,
			      "iteration %d: %s did not round-trip", iter, uri);

		char *again = cd_pathuri_format_posix(back, strlen(back));
		ck_assert_str_eq(again, uri);
		free(again);
		free(back);
		free(uri);
	}
}
END_TEST

START_TEST(test_roundtrip_any_bytes)
{
	/* Every byte string, absolute or not, with NUL or dots, survives
	 * format then parse (through the fallback when needed), normalised
	 * when it has a URI form. */
	char path[64];
	rng_state = 0x13198a2e03707344ull;

	for (int iter = 0; iter < 10000; iter++) {
		size_t len = 1 + (size_t)(rng() % (sizeof(path) - 1)); /* "" has no URI */
		for (size_t i = 0; i < len; i++) {
			uint64_t k = rng() % 8;
			path[i] = k == 0 ? '/' : k == 1 ? '.' : k == 2 ? '\0' : (char)rand_byte();
		}
		if (len && rng() % 2)
			path[0] = '/';
		char *uri = cd_pathuri_format_posix(path, len);
		struct cd_pathuri pu;
		const char *err = NULL;
		int r = cd_pathuri_parse(uri, strlen(uri), &pu, &err);
		ck_assert_msg(r == 0, "iteration %d: %s: %s", iter, uri, err);
		ck_assert_int_eq(pu.convention, CD_PATH_POSIX);
		/* a URI form reads back normalised: doubled and trailing slashes go */
		size_t nlen = len;
		if (!pu.fallback) {
			nlen = 0;
			for (size_t i = 0; i < len; i++)
				if (path[i] != '/' || (i + 1 < len && path[i + 1] != '/'))
					path[nlen++] = path[i];
			if (nlen == 0)
				path[nlen++] = '/';
		}
		ck_assert_msg(pu.len == nlen && memcmp(pu.path, path, nlen) == 0,
			      "iteration %d: %s did not round-trip", iter, uri);
		cd_pathuri_done(&pu);
		free(uri);
	}
}
END_TEST

START_TEST(test_parse_fuzz)
{
	/* Random URIs from URI-ish pieces: never crash; successes are sane. */
	static const char *const pieces[] = {
		"file://", "/",	 "%", "%2e",  "%2F",	       "%00",  "%41", "%C3%BC",
		".",	   "..", "a", "C:",   "localhost",     "@",    ":",   "?",
		"#",	   "\\", " ", "\xc3", "%00/bad/path/", "AP_-", "=",
	};
	char buf[128];
	rng_state = 0xa4093822299f31d0ull;

	for (int iter = 0; iter < 20000; iter++) {
		size_t len = 0;
		if (rng() % 4)
			len = (size_t)snprintf(buf, sizeof(buf), "file://");
		unsigned n = (unsigned)(rng() % 8);
		for (unsigned i = 0; i < n; i++) {
			const char *pc = pieces[rng() % CD_ARRAY_SIZE(pieces)];
			size_t pl = strlen(pc);
			if (len + pl >= sizeof(buf))
				break;
			memcpy(buf + len, pc, pl);
			len += pl;
		}
		struct cd_pathuri pu;
		const char *err = NULL;
		if (cd_pathuri_parse(buf, len, &pu, &err) == 0) {
			ck_assert_ptr_nonnull(pu.path);
			ck_assert_int_eq(pu.path[pu.len], '\0');
			if (pu.convention == CD_PATH_POSIX && !pu.fallback) {
				/* anything accepted formats to something that reads back the same */
				char *u = cd_pathuri_format_posix(pu.path, pu.len);
				char *p2 = NULL;
				ck_assert_int_eq(cd_pathuri_to_posix(u, strlen(u), &p2, &err), 0);
				ck_assert_str_eq(p2, pu.path);
				free(p2);
				free(u);
			}
			cd_pathuri_done(&pu);
		} else {
			ck_assert_ptr_nonnull(err);
			ck_assert_ptr_null(pu.path);
		}
	}
}
END_TEST

static Suite *pathuri_suite(void)
{
	Suite *s = suite_create("pathuri");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_loop_test(tc, test_good, 0, CD_ARRAY_SIZE(good));
	tcase_add_loop_test(tc, test_bad, 0, CD_ARRAY_SIZE(bad));
	tcase_add_loop_test(tc, test_posix_refused, 0, CD_ARRAY_SIZE(posix_refused));
	tcase_add_test(tc, test_to_posix);
	tcase_add_test(tc, test_long);
	suite_add_tcase(s, tc);

	tc = tcase_create("format");
	tcase_add_loop_test(tc, test_format, 0, CD_ARRAY_SIZE(fmt));
	tcase_add_loop_test(tc, test_canonical_roundtrip, 0, CD_ARRAY_SIZE(canonical));
	suite_add_tcase(s, tc);

	tc = tcase_create("properties");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_roundtrip_random);
	tcase_add_test(tc, test_roundtrip_any_bytes);
	tcase_add_test(tc, test_parse_fuzz);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pathuri_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
