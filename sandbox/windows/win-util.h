/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Windows-only helpers of the restricted-token backend (built with mingw-w64
 * for cordon.exe, never on Linux): cordon's path form for Windows and
 * UTF-8 <-> UTF-16.
 *
 * The core binds POSIX-shaped paths ("/" then '/'-separated components).
 * On Windows, "C:\a\b" is bound as "/C:/a/b" and "/" stands above the
 * drives (the whole file system, for :root). cd_windows_path() (plan.h),
 * with no drive, turns "/C:/a/b" back into "C:\a\b".
 */

#include <stdbool.h>
#include <stddef.h>
#include <wchar.h>

/* UTF-8 to a malloc'ed UTF-16 string; NULL on invalid input. */
wchar_t *cd_win_wide(const char *s);
/* UTF-16 to a malloc'ed UTF-8 string (lone surrogates become U+FFFD). */
char *cd_win_utf8(const wchar_t *w);

/* cordon's form ("/C:/a/b") to a Windows path (L"C:\\a\\b"); NULL when not of that form. */
wchar_t *cd_win_native(const char *path);
/* A Windows path ("C:\a\b", "\\?\C:\a", UNC refused) to cordon's form; NULL when not a drive path. */
char *cd_win_internal(const wchar_t *w);

/* The message of a Win32 error, in one line (UTF-8, malloc'ed). */
char *cd_win_error(unsigned long err);
