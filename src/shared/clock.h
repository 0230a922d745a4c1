/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The monotonic clock (POSIX CLOCK_MONOTONIC), for deadlines, windows and
 * latencies: never set back, so a difference of two readings is always
 * elapsed time.
 */

#include <stdint.h>
#include <time.h>

static inline uint64_t cd_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t cd_mono_ms(void)
{
	return cd_mono_ns() / 1000000u;
}
