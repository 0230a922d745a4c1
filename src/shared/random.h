/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Bytes from the system's random source (getrandom on Linux, arc4random on macOS). */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#ifdef __linux__
#include <sys/random.h>
#endif

/* Fill buf; false when there is no source (a seccomp profile that refuses getrandom). */
static inline bool cd_random_bytes(void *buf, size_t n)
{
#ifdef __linux__
	for (size_t got = 0; got < n;) {
		ssize_t r = getrandom((char *)buf + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
#else
	arc4random_buf(buf, n);
#endif
	return true;
}
