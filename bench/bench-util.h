/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Helpers shared by the benchmark programs. */

#include <stddef.h>
#include <sys/stat.h>

#define BENCH_DEFAULT_N 300

/* Monotonic time in milliseconds. */
double bench_now_ms(void);
/* Nearest-rank percentile (pct 0..100) of v[0..n); sorts v. 0 when n is 0. */
double bench_percentile(double *v, size_t n, unsigned pct);
/* BENCH_N from the environment (1..1000000), or BENCH_DEFAULT_N; exits 2 when invalid. */
unsigned long bench_parse_n(const char *prog);
/* Remove a whole temporary directory tree (best effort; reports failures on stderr). */
void bench_rm_tree(const char *prog, const char *dir);
