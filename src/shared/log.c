/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "shared/log.h"

#include <stdio.h>

int cd_log_verbosity = 1;

static CD_PRINTF(3, 0) void vlog(int level, const char *prefix, const char *fmt, va_list ap)
{
	if (level > cd_log_verbosity)
		return;
	fprintf(stderr, "cordon: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

#define DEFINE_LOG(fn, level, prefix)         \
	void fn(const char *fmt, ...)         \
	{                                     \
		va_list ap;                   \
		va_start(ap, fmt);            \
		vlog(level, prefix, fmt, ap); \
		va_end(ap);                   \
	}

DEFINE_LOG(cd_log_error, 0, "")
DEFINE_LOG(cd_log_warn, 1, "warning: ")
DEFINE_LOG(cd_log_info, 1, "")
DEFINE_LOG(cd_log_debug, 2, "debug: ")
