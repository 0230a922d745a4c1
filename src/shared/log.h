/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Logging to stderr, prefixed with "cordon: ". Parent side only: the child
 * between fork and exec reports through the error pipe (spawn.h) instead.
 */

#include <stdbool.h>

#include "core/util.h"

extern int cd_log_verbosity; /* 0 quiet (errors only), 1 default, 2 verbose (-v) */
/* Lines carry a "<N>" syslog priority instead of "cordon: " (stderr is the journal). */
extern bool cd_log_journal;

/* Set cd_log_journal when systemd's JOURNAL_STREAM names our stderr. */
void cd_log_detect_journal(void);

void cd_log_error(const char *fmt, ...) CD_PRINTF(1, 2);
void cd_log_warn(const char *fmt, ...) CD_PRINTF(1, 2);
void cd_log_info(const char *fmt, ...) CD_PRINTF(1, 2);
void cd_log_debug(const char *fmt, ...) CD_PRINTF(1, 2);
/* A record, as info is, but whatever the verbosity: -q silences messages, not audit lines. */
void cd_log_record(const char *fmt, ...) CD_PRINTF(1, 2);
