/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Logging to stderr, prefixed with "cordon: ". Parent side only: the child
 * between fork and exec reports through the error pipe (spawn.h) instead.
 */

#include "core/util.h"

extern int cd_log_verbosity; /* 0 quiet (errors only), 1 default, 2 verbose (-v) */

void cd_log_error(const char *fmt, ...) CD_PRINTF(1, 2);
void cd_log_warn(const char *fmt, ...) CD_PRINTF(1, 2);
void cd_log_info(const char *fmt, ...) CD_PRINTF(1, 2);
void cd_log_debug(const char *fmt, ...) CD_PRINTF(1, 2);
