/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "bench-util.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_percentile(double *v, size_t n, unsigned pct)
{
	size_t rank;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	rank = (n * pct + 99) / 100;
	return v[rank ? rank - 1 : 0];
}

unsigned long bench_parse_n(const char *prog)
{
	const char *s = getenv("BENCH_N");
	unsigned long n;
	char *end;

	if (!s || !*s)
		return BENCH_DEFAULT_N;
	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno || *end || n == 0 || n > 1000000) {
		fprintf(stderr, "%s: BENCH_N must be a positive integer, not \"%s\"\n", prog, s);
		exit(2);
	}
	return n;
}

static const char *rm_prog;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0)
		fprintf(stderr, "%s: cannot remove %s: %s\n", rm_prog, path, strerror(errno));
	return 0;
}

void bench_rm_tree(const char *prog, const char *dir)
{
	rm_prog = prog;
	if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
		fprintf(stderr, "%s: cannot remove %s: %s\n", prog, dir, strerror(errno));
}
