/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Gitlinks of a git index (see gitindex.h). The layout, from git's
 * Documentation/gitformat-index.txt:
 *
 *   header   "DIRC", version (2, 3 or 4), number of entries (32-bit BE each)
 *   entry    ten 32-bit stat fields (ctime, mtime, dev, ino, mode, uid,
 *            gid, size), the object name (20 or 32 bytes), 16-bit flags
 *            (0x4000: a 16-bit extended flags word follows; low 12 bits:
 *            the name's length, 0xfff when longer), then the name:
 *              v2, v3  NUL-terminated, padded with NULs so that the entry
 *                      is a multiple of 8 bytes long (1 to 8 NULs);
 *              v4      a varint N (drop N bytes from the end of the
 *                      previous entry's name) and a NUL-terminated suffix.
 *   extension  4-byte signature, 32-bit size, data; "link" (a split index):
 *            the shared index's object name, then two EWAH bitmaps over
 *            its entries, those deleted and those replaced (by this file's
 *            nameless entries, in order)
 *   trailer  the checksum, one object name long
 *
 * Every entry is checked against its own structure (name length, NULs,
 * bounds) and the extensions must end exactly at the trailer: a file read
 * with the wrong object-name size does not parse, which is how SHA-1 and
 * SHA-256 indexes are told apart.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/gitindex.h"
#include "core/util.h"

#define HEADER_SIZE   12
#define STAT_SIZE     40 /* the ten 32-bit fields before the object name */
#define FLAG_EXTENDED 0x4000u
#define NAME_MASK     0x0fffu
#define MODE_TYPE     0170000u
#define MODE_GITLINK  0160000u

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* git's varint (varint.c): 7 bits a byte, each continuation adding one. -1 on overflow or end. */
static int varint(const unsigned char **pp, const unsigned char *end, size_t *ret)
{
	const unsigned char *p = *pp;
	if (p >= end)
		return -1;
	unsigned char c = *p++;
	uint64_t val = c & 127;
	while (c & 128) {
		val += 1;
		if (!val || (val >> 57) || p >= end)
			return -1;
		c = *p++;
		val = (val << 7) + (c & 127);
	}
	if (val > SIZE_MAX)
		return -1;
	*pp = p;
	*ret = (size_t)val;
	return 0;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static char *hex(const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char *s = cd_xmalloc(2 * n + 1);
	for (size_t i = 0; i < n; i++) {
		s[2 * i] = digits[p[i] >> 4];
		s[2 * i + 1] = digits[p[i] & 15];
	}
	s[2 * n] = '\0';
	return s;
}

static uint64_t be64(const unsigned char *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/*
 * An EWAH bitmap (git's ewah/ewah_io.c: 32-bit size in bits, 32-bit number
 * of 64-bit words, the words, a 32-bit position) at p, at most avail bytes.
 * *used: its length. With pos non-NULL, the set bits' positions, ascending,
 * are appended to *pos (at most max of them: more is an error). Each
 * "running length word" holds a bit (bit 0), a run of that many 64-bit words
 * of it (bits 1-32) and a count of literal words that follow (bits 33-63).
 * -1 when it does not parse.
 */
static int ewah(const unsigned char *p, size_t avail, size_t *used, size_t **pos, size_t *n,
		size_t max)
{
	if (avail < 12)
		return -1;
	uint64_t bits = be32(p), words = be32(p + 4);
	if (words > (avail - 12) / 8)
		return -1;
	*used = 12 + (size_t)words * 8;
	if (!pos)
		return 0;
	const unsigned char *w = p + 8;
	uint64_t at = 0;
	for (uint64_t i = 0; i < words;) {
		uint64_t rlw = be64(w + 8 * i++);
		uint64_t run = ((rlw >> 1) & 0xffffffffu) * 64, lits = rlw >> 33;
		if (rlw & 1) {
			if (run > max - *n || at + run > bits)
				return -1;
			for (uint64_t k = 0; k < run; k++) {
				*pos = cd_xreallocarray(*pos, *n + 1, sizeof(**pos));
				(*pos)[(*n)++] = (size_t)(at + k);
			}
		}
		at += run;
		if (lits > words - i)
			return -1;
		for (uint64_t l = 0; l < lits; l++, at += 64) {
			uint64_t word = be64(w + 8 * i++);
			for (unsigned c = 0; c < 64; c++) {
				if (!(word & (UINT64_C(1) << c)))
					continue;
				if (*n >= max || at + c >= bits)
					return -1;
				*pos = cd_xreallocarray(*pos, *n + 1, sizeof(**pos));
				(*pos)[(*n)++] = (size_t)(at + c);
			}
		}
	}
	return 0;
}

/*
 * Parse with object names of hsz bytes. 0 with *ix filled, or -EINVAL
 * (*ix untouched).
 */
static int parse(const unsigned char *buf, size_t len, size_t hsz, const size_t *want,
		 size_t n_want, struct cd_git_index *ix)
{
	const unsigned char *end, *p;
	struct cd_strbuf name = { 0 }; /* v4: the previous entry's name */
	struct cd_git_index out = { 0 };
	bool *stripped = NULL; /* per nameless entry (split index): is it a gitlink? */
	size_t n_stripped = 0, w = 0, *pos = NULL, n_pos = 0;
	bool linked = false;
	uint32_t version, n;
	int r = -EINVAL;

	if (len < HEADER_SIZE + hsz)
		return -EINVAL;
	end = buf + len - hsz; /* the trailer */
	version = be32(buf + 4);
	n = be32(buf + 8);
	p = buf + HEADER_SIZE;
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *e = p;
		if ((size_t)(end - p) < STAT_SIZE + hsz + 2)
			goto out;
		uint32_t mode = be32(p + 24);
		uint16_t flags = be16(p + STAT_SIZE + hsz);
		size_t declared = flags & NAME_MASK;
		p += STAT_SIZE + hsz + 2;
		if (flags & FLAG_EXTENDED) {
			if (version < 3 || end - p < 2)
				goto out;
			p += 2;
		}
		const char *s;
		size_t slen;
		if (version == 4) {
			size_t strip;
			if (varint(&p, end, &strip) < 0 || strip > name.len)
				goto out;
			const unsigned char *nul = memchr(p, '\0', (size_t)(end - p));
			if (!nul)
				goto out;
			name.len -= strip;
			cd_strbuf_append_n(&name, (const char *)p, (size_t)(nul - p));
			p = nul + 1;
			s = name.buf ? name.buf : "";
			slen = name.len;
		} else {
			const unsigned char *nul = memchr(p, '\0', (size_t)(end - p));
			if (!nul)
				goto out;
			s = (const char *)p;
			slen = (size_t)(nul - p);
			/* 1 to 8 NULs, up to a multiple of 8 from the entry's start. */
			size_t size = ((size_t)(nul - e) + 8) & ~(size_t)7;
			if (size > (size_t)(end - e) || !all_zero(nul, size - (size_t)(nul - e)))
				goto out;
			p = e + size;
		}
		if (declared < NAME_MASK ? slen != declared : slen < NAME_MASK)
			goto out;
		bool gitlink = (mode & MODE_TYPE) == MODE_GITLINK;
		if (slen == 0) {
			/* A split index's replacement: its name is the shared entry's. */
			stripped = cd_xreallocarray(stripped, n_stripped + 1, sizeof(*stripped));
			stripped[n_stripped++] = gitlink;
			continue;
		}
		while (w < n_want && want[w] < i)
			w++;
		if (gitlink || (w < n_want && want[w] == i))
			cd_strv_push_take(&out.gitlinks, cd_xstrndup(s, slen));
	}
	/* Extensions, up to exactly the trailer. */
	while (p < end) {
		if (end - p < 8)
			goto out;
		uint32_t size = be32(p + 4);
		if (size > (size_t)(end - p) - 8)
			goto out;
		if (!memcmp(p, "link", 4)) {
			/* The shared index's name, then the delete and replace bitmaps. */
			const unsigned char *d = p + 8;
			size_t used = 0, left = size;
			if (size < hsz || linked)
				goto out;
			linked = true;
			if (!all_zero(d, hsz))
				out.shared = hex(d, hsz);
			d += hsz;
			left -= hsz;
			if (left > 0) {
				if (ewah(d, left, &used, NULL, NULL, 0) < 0)
					goto out;
				d += used;
				left -= used;
				if (ewah(d, left, &used, &pos, &n_pos, n_stripped) < 0 ||
				    used != left)
					goto out;
			}
		}
		p += 8 + (size_t)size;
	}
	/* Each nameless entry replaces one shared entry, in order. */
	if (n_stripped != n_pos || (n_stripped && !out.shared))
		goto out;
	for (size_t k = 0; k < n_stripped; k++) {
		if (!stripped[k])
			continue;
		out.replaced =
			cd_xreallocarray(out.replaced, out.n_replaced + 1, sizeof(*out.replaced));
		out.replaced[out.n_replaced++] = pos[k];
	}
	*ix = out;
	memset(&out, 0, sizeof(out));
	r = 0;
out:
	cd_strbuf_done(&name);
	cd_git_index_done(&out);
	free(stripped);
	free(pos);
	return r;
}

void cd_git_index_done(struct cd_git_index *ix)
{
	cd_strv_free(ix->gitlinks);
	free(ix->shared);
	free(ix->replaced);
	memset(ix, 0, sizeof(*ix));
}

int cd_git_index_parse(const char *buf, size_t len, const size_t *want, size_t n_want,
		       struct cd_git_index *ret, char **reterr)
{
	const unsigned char *u = (const unsigned char *)buf;
	uint32_t version;

	memset(ret, 0, sizeof(*ret));
	*reterr = NULL;
	if (len < HEADER_SIZE || memcmp(buf, "DIRC", 4)) {
		*reterr = cd_xstrdup("not a git index (no DIRC signature)");
		return -EINVAL;
	}
	version = be32(u + 4);
	if (version < 2 || version > 4) {
		*reterr = cd_xasprintf("git index version %u is not one cordon reads (2 to 4)",
				       version);
		return -EINVAL;
	}
	/* SHA-1 first (git's default), then SHA-256. */
	if (parse(u, len, 20, want, n_want, ret) == 0 || parse(u, len, 32, want, n_want, ret) == 0)
		return 0;
	*reterr = cd_xasprintf("git index (version %u) does not parse with SHA-1 or SHA-256 "
			       "object names: damaged or truncated",
			       version);
	return -EINVAL;
}
