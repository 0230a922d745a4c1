/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shared/log.h"

int cd_log_verbosity = 1;
bool cd_log_journal;

void cd_log_detect_journal(void)
{
	/* systemd sets JOURNAL_STREAM=DEV:INODE when stderr is the journal's stream. */
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;

	if (!js || sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2)
		return;
	if (fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino)
		cd_log_journal = true;
}

static CD_PRINTF(4, 0) void vlog(int level, int prio, const char *prefix, const char *fmt,
				 va_list ap)
{
	char line[4096];
	int n;

	if (level > cd_log_verbosity)
		return;
	/*
	 * One write per line: several connections log at once, and the
	 * journal (or a pipe to a supervisor) must not see pieces of two.
	 * In the journal a "<N>" prefix gives the syslog priority.
	 */
	if (cd_log_journal)
		n = snprintf(line, sizeof(line), "<%d>%s", prio, prefix);
	else
		n = snprintf(line, sizeof(line), "cordon: %s", prefix);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2) {
		/* Cut, and saying so: a reader must not take the part for the whole. */
		static const char mark[] = " [line cut]";
		len = sizeof(line) - 2;
		memcpy(line + len - (sizeof(mark) - 1), mark, sizeof(mark) - 1);
	}
	line[len++] = '\n';
	fflush(stderr);
	for (size_t off = 0; off < len;) {
		ssize_t w = write(STDERR_FILENO, line + off, len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
}

#define DEFINE_LOG(fn, level, prio, prefix)         \
	void fn(const char *fmt, ...)               \
	{                                           \
		va_list ap;                         \
		va_start(ap, fmt);                  \
		vlog(level, prio, prefix, fmt, ap); \
		va_end(ap);                         \
	}

DEFINE_LOG(cd_log_error, 0, 3, "")
DEFINE_LOG(cd_log_warn, 1, 4, "warning: ")
DEFINE_LOG(cd_log_info, 1, 6, "")
DEFINE_LOG(cd_log_debug, 2, 7, "debug: ")
DEFINE_LOG(cd_log_record, 0, 6, "")
