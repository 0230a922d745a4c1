/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * PathUri: the file:// URI form of paths on the exec-server wire
 * (exec-server-reference.md section 3.6), compatible with the Rust url
 * crate's Url::from_file_path / to_file_path. OS-free.
 *
 * Parsing follows what the released Codex exec-server does with a PathUri
 * (the WHATWG URL parser of the url crate, then Url::to_file_path and a
 * lexical normalisation), as probed on Codex 0.169.0:
 * - leading and trailing spaces and C0 controls are dropped, tabs and
 *   newlines anywhere; the scheme is "file" in any case; "file:" may be
 *   followed by any number of slashes, and a backslash separates segments
 *   like a slash;
 * - "." and ".." segments, also percent-encoded ("%2e", ".%2E", ...), are
 *   removed from the URI path before anything is decoded (".." at the root
 *   stays there), then the decoded path is normalised lexically: empty,
 *   "." and ".." components (an encoded "%2F" separates once decoded) and
 *   a trailing slash go. Nothing looks at the file system: "l/.." is the
 *   directory holding l even when l is a symlink;
 * - refused: another scheme, a query or fragment (even empty), userinfo, a
 *   port, a host the URL parser refuses, a decoded NUL outside the
 *   fallback form; a percent sign without two hex digits stays as written;
 * - authority empty or "localhost" (any case) is POSIX; another host (a
 *   Windows UNC server) or a first segment "C:" is Windows;
 * - the fallback form "file:///%00/bad/path/<base64url-no-pad of the raw
 *   bytes>" carries paths that have no URI form (cd_pathuri_to_posix
 *   refuses it: such paths hold a NUL).
 * Decoded bytes need not be UTF-8 (POSIX paths are bytes).
 */

#include <stdbool.h>
#include <stddef.h>

enum cd_path_convention {
	CD_PATH_POSIX,
	CD_PATH_WINDOWS,
};

struct cd_pathuri {
	enum cd_path_convention convention;
	/* Decoded native path, NUL-terminated. A POSIX path starts with '/', except one
	 * from the fallback form, which may hold any bytes (cd_pathuri_to_posix refuses
	 * those that are not absolute). */
	char *path;
	size_t len;    /* may be less than strlen only for the fallback form (embedded NUL) */
	bool fallback; /* it came from the fallback form */
};

/*
 * Parse uri[0..len). 0 on success (free with cd_pathuri_done), -EINVAL on
 * error with *reterr pointing to a static message ("only file:// URIs are
 * accepted", "URI has a query", ...).
 */
int cd_pathuri_parse(const char *uri, size_t len, struct cd_pathuri *ret, const char **reterr);
void cd_pathuri_done(struct cd_pathuri *u);

/*
 * Parse and require a POSIX path without embedded NUL: what every
 * PathUri on a Linux host must be. On error returns -EINVAL and *reterr is a
 * static message; a Windows URI gives "URI is a Windows path, not valid on
 * this host". *ret_path is malloc'ed.
 */
int cd_pathuri_to_posix(const char *uri, size_t len, char **ret_path, const char **reterr);

/*
 * Format an absolute POSIX path (bytes, len may include NULs) as a canonical
 * URI exactly as Url::from_file_path would: bytes outside the url crate's
 * path-segment set are percent-encoded with upper-case hex. Paths that have
 * no URI form (embedded NUL, not absolute) use the fallback form. Always
 * returns a malloc'ed string.
 */
char *cd_pathuri_format_posix(const char *path, size_t len);
