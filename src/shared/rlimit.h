/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The POSIX resource of each rlimit cordon sets (core/limits.h's enum
 * cd_rlimit), for every build that applies them: the Linux backend
 * (sandbox/linux/limits.c) and the macOS front end (src/mac/main.c).
 */

#include <sys/resource.h>

#include "core/limits.h"

/* RLIMIT_NOFILE for CD_RLIM_NOFILE, ...; -1 for none. */
static inline int cd_rlimit_resource(enum cd_rlimit r)
{
	switch (r) {
	case CD_RLIM_NPROC:
		return RLIMIT_NPROC;
	case CD_RLIM_AS:
		return RLIMIT_AS;
	case CD_RLIM_CPU:
		return RLIMIT_CPU;
	case CD_RLIM_NOFILE:
		return RLIMIT_NOFILE;
	case CD_RLIM_FSIZE:
		return RLIMIT_FSIZE;
	case CD_RLIM_CORE:
		return RLIMIT_CORE;
	case CD_RLIM_COUNT:
		break;
	}
	return -1;
}
