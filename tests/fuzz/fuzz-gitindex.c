/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Git indexes (core/gitindex.c), read at offsets through its window.
 * Properties:
 *  - without a budget, the input parses or is refused with a reason; what
 *    parses names at most CD_GIT_INDEX_GITLINKS_MAX gitlinks, each a
 *    non-empty string of at most CD_GIT_INDEX_NAME_MAX bytes, and replaced
 *    positions in ascending order;
 *  - with a budget (from the first byte), the reads stay within the file
 *    and take exactly what the budget lost, and the result is the same as
 *    without one, or -ENOBUFS: a budget changes whether, never what, it
 *    reads;
 *  - the input followed by zeros up to 64 MiB (a sparse file's holes) is
 *    read within a budget of 64 KiB, whatever its header says.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/gitindex.h"
#include "core/util.h"
#include "fuzz.h"

struct src {
	const uint8_t *data;
	size_t len;
	uint64_t size; /* len, or more: zeros after data */
	size_t bytes;
};

static int src_read_at(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct src *s = ctx;
	fuzz_assert(off <= s->size && len <= s->size - off);
	size_t in_data = off < s->len ? s->len - (size_t)off : 0;
	if (in_data > len)
		in_data = len;
	memcpy(buf, s->data + off, in_data);
	memset((char *)buf + in_data, 0, len - in_data);
	s->bytes += len;
	return 0;
}

static int read_with(struct src *s, size_t budget, const size_t *want, size_t n_want,
		     struct cd_git_index *ix, char **err)
{
	struct cd_git_index_src gs = { .ctx = s, .size = s->size, .read_at = src_read_at };
	size_t left = budget;
	int r = cd_git_index_read(&gs, want, n_want, &left, ix, err);
	fuzz_assert(left <= budget && budget - left == s->bytes);
	fuzz_assert(r == 0 ? !*err : !!*err);
	return r;
}

static bool same(const struct cd_git_index *a, const struct cd_git_index *b)
{
	size_t n = cd_strv_length(a->gitlinks);
	if (n != cd_strv_length(b->gitlinks) || a->n_replaced != b->n_replaced ||
	    !a->shared != !b->shared || (a->shared && strcmp(a->shared, b->shared)))
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(a->gitlinks[i], b->gitlinks[i]))
			return false;
	for (size_t i = 0; i < a->n_replaced; i++)
		if (a->replaced[i] != b->replaced[i])
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t want[] = { 0, 1, 3, 7 };
	/* The first byte: the budget (a multiple of 64 bytes) and whether to want positions. */
	size_t budget = size ? (size_t)(data[0] >> 1) * 64 : 0;
	size_t n_want = size && (data[0] & 1) ? 4 : 0;
	struct src s = { .data = data, .len = size, .size = size };
	struct cd_git_index ix, ixb;
	char *err = NULL, *errb = NULL;

	int r = read_with(&s, SIZE_MAX, want, n_want, &ix, &err);
	fuzz_assert(r == 0 || r == -EINVAL || r == -E2BIG);
	if (r == 0) {
		size_t n = cd_strv_length(ix.gitlinks);
		fuzz_assert(n <= CD_GIT_INDEX_GITLINKS_MAX);
		for (size_t i = 0; i < n; i++)
			fuzz_assert(*ix.gitlinks[i] &&
				    strlen(ix.gitlinks[i]) <= CD_GIT_INDEX_NAME_MAX);
		for (size_t i = 1; i < ix.n_replaced; i++)
			fuzz_assert(ix.replaced[i - 1] < ix.replaced[i]);
	}

	s.bytes = 0;
	int rb = read_with(&s, budget, want, n_want, &ixb, &errb);
	fuzz_assert(rb == r || rb == -ENOBUFS);
	if (rb == 0)
		fuzz_assert(same(&ix, &ixb));
	cd_git_index_done(&ixb);
	free(errb);
	errb = NULL;

	/* Holes after it: a sparse file of 64 MiB, read within a budget of 64 KiB. */
	s = (struct src){ .data = data, .len = size, .size = (uint64_t)64 << 20 };
	rb = read_with(&s, 64 << 10, want, n_want, &ixb, &errb);
	fuzz_assert(rb == 0 || rb == -EINVAL || rb == -E2BIG || rb == -ENOBUFS);
	cd_git_index_done(&ixb);
	free(errb);

	cd_git_index_done(&ix);
	free(err);
	return 0;
}
