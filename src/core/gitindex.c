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
/* The window's first read, and the most it reads ahead as it goes on. */
#define WINDOW_MIN ((size_t)4096)
#define WINDOW_MAX ((size_t)256 * 1024)

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

/* An array of positions, grown by doubling. */
struct positions {
	size_t *v; /* owned */
	size_t n, cap;
};

static void positions_push(struct positions *ps, size_t pos)
{
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? 2 * ps->cap : 16;
		ps->v = cd_xreallocarray(ps->v, ps->cap, sizeof(*ps->v));
	}
	ps->v[ps->n++] = pos;
}

/*
 * An EWAH bitmap (git's ewah/ewah_io.c: 32-bit size in bits, 32-bit number
 * of 64-bit words, the words, a 32-bit position) at p, at most avail bytes.
 * *used: its length. With ps non-NULL, the set bits' positions, ascending,
 * are appended to ps (at most max of them: more is an error). Each "running
 * length word" holds a bit (bit 0), a run of that many 64-bit words of it
 * (bits 1-32) and a count of literal words that follow (bits 33-63). -1 when
 * it does not parse.
 */
static int ewah(const unsigned char *p, size_t avail, size_t *used, struct positions *ps,
		size_t max)
{
	if (avail < 12)
		return -1;
	uint64_t bits = be32(p), words = be32(p + 4);
	if (words > (avail - 12) / 8)
		return -1;
	*used = 12 + (size_t)words * 8;
	if (!ps)
		return 0;
	const unsigned char *w = p + 8;
	uint64_t at = 0;
	for (uint64_t i = 0; i < words;) {
		uint64_t rlw = be64(w + 8 * i++);
		uint64_t run = ((rlw >> 1) & 0xffffffffu) * 64, lits = rlw >> 33;
		if (rlw & 1) {
			if (run > max - ps->n || at + run > bits)
				return -1;
			for (uint64_t k = 0; k < run; k++)
				positions_push(ps, (size_t)(at + k));
		}
		at += run;
		if (lits > words - i)
			return -1;
		for (uint64_t l = 0; l < lits; l++, at += 64) {
			uint64_t word = be64(w + 8 * i++);
			for (unsigned c = 0; c < 64; c++) {
				if (!(word & (UINT64_C(1) << c)))
					continue;
				if (ps->n >= max || at + c >= bits)
					return -1;
				positions_push(ps, (size_t)(at + c));
			}
		}
	}
	return 0;
}

/*
 * The file, read through a window: bytes [base, base + len) of it are in
 * buf. need() moves the window forward, keeping the bytes still wanted, and
 * reads ahead: WINDOW_MIN at first and after a jump (an extension skipped),
 * twice as much on each read that goes on from the window's end, up to
 * WINDOW_MAX. So the memory is the window (or the largest single thing
 * asked for: an entry, the link extension), and the bytes read are about
 * those asked for.
 */
struct cursor {
	const struct cd_git_index_src *src;
	size_t *budget;
	unsigned char *buf; /* owned */
	size_t cap;
	uint64_t base;
	size_t len;
	size_t ahead;
	int err; /* a read error or -ENOBUFS (the budget), sticky; or 0 */
};

/*
 * Bytes [off, off + n) of the file: a pointer into the window, valid until
 * the next call, or NULL: past the end of the file (c->err 0: the index does
 * not parse), or c->err set.
 */
static const unsigned char *need(struct cursor *c, uint64_t off, size_t n)
{
	uint64_t size = c->src->size;
	size_t keep = 0, more;

	if (c->err || off > size || n > size - off)
		return NULL;
	if (off >= c->base && off - c->base <= c->len && n <= c->len - (size_t)(off - c->base))
		return c->buf + (off - c->base);
	if (c->len > 0 && off >= c->base && off - c->base <= c->len) {
		keep = c->len - (size_t)(off - c->base);
		memmove(c->buf, c->buf + (off - c->base), keep);
		if (c->ahead < WINDOW_MAX)
			c->ahead *= 2;
	} else {
		c->ahead = WINDOW_MIN;
	}
	c->base = off;
	c->len = keep;
	more = (n > c->ahead ? n : c->ahead) - keep;
	if (more > size - off - keep)
		more = (size_t)(size - off - keep);
	if (more > *c->budget) {
		/* Read ahead only as far as the budget goes, and fail only for what is needed. */
		if (n - keep > *c->budget) {
			c->err = -ENOBUFS;
			return NULL;
		}
		more = *c->budget;
	}
	if (keep + more > c->cap) {
		c->cap = keep + more;
		c->buf = cd_xrealloc(c->buf, c->cap);
	}
	int r = c->src->read_at(c->src->ctx, off + keep, c->buf + keep, more);
	if (r < 0) {
		c->err = r;
		return NULL;
	}
	*c->budget -= more;
	c->len = keep + more;
	return c->buf;
}

/*
 * The NUL-terminated name at e + pos, ending before limit and at most
 * CD_GIT_INDEX_NAME_MAX long: *ret points at e in the window, *ret_len is
 * the name's length. -1 when there is none (or c->err).
 */
static int name_at(struct cursor *c, uint64_t e, size_t pos, uint64_t limit,
		   const unsigned char **ret, size_t *ret_len)
{
	size_t look = 64;

	if (limit <= e || limit - e <= pos)
		return -1;
	uint64_t room = limit - e - pos;
	for (;;) {
		size_t n = room < look ? (size_t)room : look;
		const unsigned char *b = need(c, e, pos + n);
		if (!b)
			return -1;
		size_t have = c->len - (size_t)(e - c->base) - pos;
		if (have > room)
			have = (size_t)room;
		if (have > CD_GIT_INDEX_NAME_MAX + 1)
			have = CD_GIT_INDEX_NAME_MAX + 1;
		const unsigned char *nul = memchr(b + pos, '\0', have);
		if (nul) {
			*ret = b;
			*ret_len = (size_t)(nul - (b + pos));
			return 0;
		}
		if (have >= room || have > CD_GIT_INDEX_NAME_MAX)
			return -1;
		look = 2 * have;
	}
}

/*
 * The smallest entry: the fixed part and an empty name (a split index's
 * replacement) with its NUL, padded to 8 bytes (versions 2 and 3), or with
 * a one-byte varint before it (version 4).
 */
static size_t entry_min(size_t hsz, uint32_t version)
{
	size_t fixed = STAT_SIZE + hsz + 2;

	return version == 4 ? fixed + 2 : (fixed + 1 + 7) & ~(size_t)7;
}

/* The gitlinks found, grown by doubling, NULL-terminated when taken. */
struct links {
	char **v; /* owned */
	size_t n, cap;
};

static void links_push(struct links *l, char *s)
{
	if (l->n + 1 >= l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->v = cd_xreallocarray(l->v, l->cap, sizeof(*l->v));
	}
	l->v[l->n++] = s;
	l->v[l->n] = NULL;
}

/*
 * Parse with object names of hsz bytes. 0 with *ix filled; -EINVAL when it
 * does not parse, -E2BIG for too many gitlinks, c->err; *ix untouched.
 */
static int parse(struct cursor *c, size_t hsz, const size_t *want, size_t n_want,
		 struct cd_git_index *ix)
{
	const uint64_t size = c->src->size;
	const unsigned char *b;
	struct cd_strbuf name = { 0 }; /* v4: the previous entry's name */
	struct links links = { 0 };
	struct cd_git_index out = { 0 };
	bool *stripped = NULL; /* per nameless entry (split index): is it a gitlink? */
	size_t n_stripped = 0, cap_stripped = 0, w = 0;
	struct positions pos = { 0 }, replaced = { 0 };
	bool linked = false;
	uint32_t version, n;
	uint64_t end, p;
	int r = -EINVAL;

	if (size < HEADER_SIZE + hsz)
		return -EINVAL;
	end = size - hsz; /* the trailer */
	b = need(c, 0, HEADER_SIZE);
	if (!b)
		return c->err ? c->err : -EINVAL;
	version = be32(b + 4);
	n = be32(b + 8);
	/* What the entries alone take at least: known before reading them. */
	if ((uint64_t)n * entry_min(hsz, version) > end - HEADER_SIZE)
		return -EINVAL;
	if ((uint64_t)n * entry_min(hsz, version) > (uint64_t)*c->budget + c->len)
		return c->err = -ENOBUFS;
	p = HEADER_SIZE;
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t e = p;
		size_t fixed = STAT_SIZE + hsz + 2, at = fixed, slen;
		if (end - e < fixed || !(b = need(c, e, fixed)))
			goto out;
		uint32_t mode = be32(b + 24);
		uint16_t flags = be16(b + fixed - 2);
		size_t declared = flags & NAME_MASK;
		if (flags & FLAG_EXTENDED) {
			if (version < 3)
				goto out;
			at += 2;
		}
		if (version == 4) {
			/* A varint of at most 10 bytes, then the name's suffix. */
			size_t strip, vn;
			if (end - e <= at)
				goto out;
			vn = end - e - at < 10 ? (size_t)(end - e - at) : 10;
			if (!(b = need(c, e, at + vn)))
				goto out;
			const unsigned char *v = b + at;
			if (varint(&v, b + at + vn, &strip) < 0 || strip > name.len)
				goto out;
			at = (size_t)(v - b);
			if (name_at(c, e, at, end, &b, &slen) < 0)
				goto out;
			name.len -= strip;
			if (name.len + slen > CD_GIT_INDEX_NAME_MAX)
				goto out;
			cd_strbuf_append_n(&name, (const char *)b + at, slen);
			p = e + at + slen + 1;
			slen = name.len;
		} else {
			if (name_at(c, e, at, end, &b, &slen) < 0)
				goto out;
			/* 1 to 8 NULs, up to a multiple of 8 from the entry's start. */
			size_t esize = (at + slen + 8) & ~(size_t)7;
			if (esize > end - e || !(b = need(c, e, esize)) ||
			    !all_zero(b + at + slen, esize - at - slen))
				goto out;
			p = e + esize;
		}
		if (declared < NAME_MASK ? slen != declared : slen < NAME_MASK)
			goto out;
		bool gitlink = (mode & MODE_TYPE) == MODE_GITLINK;
		if (slen == 0) {
			/* A split index's replacement: its name is the shared entry's. */
			if (n_stripped == cap_stripped) {
				cap_stripped = cap_stripped ? 2 * cap_stripped : 16;
				stripped =
					cd_xreallocarray(stripped, cap_stripped, sizeof(*stripped));
			}
			stripped[n_stripped++] = gitlink;
			continue;
		}
		while (w < n_want && want[w] < i)
			w++;
		if (!gitlink && !(w < n_want && want[w] == i))
			continue;
		if (links.n == CD_GIT_INDEX_GITLINKS_MAX) {
			r = -E2BIG;
			goto out;
		}
		/* The name: the v4 buffer's, or in the window at e. */
		links_push(&links, version == 4 ? cd_xstrndup(name.buf, slen)
						: cd_xstrndup((const char *)b + at, slen));
	}
	/* Extensions, up to exactly the trailer; only "link" is read. */
	while (p < end) {
		if (end - p < 8 || !(b = need(c, p, 8)))
			goto out;
		uint32_t esize = be32(b + 4);
		if (esize > end - p - 8)
			goto out;
		if (!memcmp(b, "link", 4)) {
			/* The shared index's name, then the delete and replace bitmaps. */
			size_t used = 0, left = esize;
			if (esize < hsz || linked || !(b = need(c, p + 8, esize)))
				goto out;
			linked = true;
			if (!all_zero(b, hsz))
				out.shared = hex(b, hsz);
			b += hsz;
			left -= hsz;
			if (left > 0) {
				if (ewah(b, left, &used, NULL, 0) < 0)
					goto out;
				b += used;
				left -= used;
				if (ewah(b, left, &used, &pos, n_stripped) < 0 || used != left)
					goto out;
			}
		}
		p += 8 + (uint64_t)esize;
	}
	/* Each nameless entry replaces one shared entry, in order. */
	if (n_stripped != pos.n || (n_stripped && !out.shared))
		goto out;
	for (size_t k = 0; k < n_stripped; k++)
		if (stripped[k])
			positions_push(&replaced, pos.v[k]);
	out.replaced = replaced.v;
	out.n_replaced = replaced.n;
	replaced.v = NULL;
	out.gitlinks = links.v;
	links.v = NULL;
	*ix = out;
	memset(&out, 0, sizeof(out));
	r = 0;
out:
	if (r == -EINVAL && c->err)
		r = c->err;
	cd_strbuf_done(&name);
	cd_strv_free(links.v);
	cd_git_index_done(&out);
	free(stripped);
	free(pos.v);
	free(replaced.v);
	return r;
}

void cd_git_index_done(struct cd_git_index *ix)
{
	cd_strv_free(ix->gitlinks);
	free(ix->shared);
	free(ix->replaced);
	memset(ix, 0, sizeof(*ix));
}

/* Why cd_git_index_read() failed with r (not -EINVAL), for *reterr. */
static char *failure(int r, size_t budget)
{
	if (r == -ENOBUFS)
		return cd_xasprintf("reading it takes more than the %zu bytes left of the budget "
				    "for git indexes",
				    budget);
	if (r == -E2BIG)
		return cd_xasprintf("it names more than %d gitlinks", CD_GIT_INDEX_GITLINKS_MAX);
	return cd_xstrdup(strerror(-r));
}

int cd_git_index_read(const struct cd_git_index_src *src, const size_t *want, size_t n_want,
		      size_t *budget, struct cd_git_index *ret, char **reterr)
{
	struct cursor c = { .src = src, .budget = budget, .ahead = WINDOW_MIN };
	const unsigned char *h;
	uint32_t version = 0;
	int r;

	memset(ret, 0, sizeof(*ret));
	*reterr = NULL;
	h = need(&c, 0, HEADER_SIZE);
	if (!h && c.err) {
		r = c.err;
	} else if (!h || memcmp(h, "DIRC", 4)) {
		*reterr = cd_xstrdup("not a git index (no DIRC signature)");
		r = -EINVAL;
	} else if ((version = be32(h + 4)) < 2 || version > 4) {
		*reterr = cd_xasprintf("git index version %u is not one cordon reads (2 to 4)",
				       version);
		r = -EINVAL;
	} else {
		/* SHA-1 first (git's default), then SHA-256. */
		r = parse(&c, 20, want, n_want, ret);
		if (r == -EINVAL)
			r = parse(&c, 32, want, n_want, ret);
		if (r == -EINVAL)
			*reterr = cd_xasprintf("git index (version %u) does not parse with SHA-1 "
					       "or SHA-256 object names: damaged or truncated",
					       version);
	}
	if (r < 0 && !*reterr)
		*reterr = failure(r, *budget);
	free(c.buf);
	return r;
}

/* A source over memory. */
struct mem_src {
	const char *buf;
};

static int mem_read_at(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct mem_src *m = ctx;
	memcpy(buf, m->buf + off, len);
	return 0;
}

int cd_git_index_parse(const char *buf, size_t len, const size_t *want, size_t n_want,
		       struct cd_git_index *ret, char **reterr)
{
	struct mem_src m = { .buf = buf };
	struct cd_git_index_src src = { .ctx = &m, .size = len, .read_at = mem_read_at };
	size_t budget = SIZE_MAX;

	return cd_git_index_read(&src, want, n_want, &budget, ret, reterr);
}
