/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * PathUri: the file:// URI form of paths on the exec-server wire
 * (exec-server-reference.md section 3.6), compatible with the Rust url
 * crate's Url::from_file_path / to_file_path. OS-free.
 *
 * Parsing rules: scheme "file" only (case-insensitive); no userinfo, port,
 * query or fragment; authority empty or "localhost" (POSIX) or a host name
 * (Windows UNC); %00 refused except in the fallback form
 * "file:///%00/bad/path/<base64url-no-pad of the raw bytes>"; "." and ".."
 * segments (also percent-encoded) refused; an encoded '/' (%2F) refused; a
 * raw backslash refused; invalid percent escapes refused. Decoded bytes need
 * not be UTF-8 (POSIX paths are bytes).
 *
 * Convention: an authority other than localhost, or a first segment like
 * "C:" / "c|", makes it a Windows path; everything else is POSIX.
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
	size_t len; /* may be less than strlen only for the fallback form (embedded NUL) */
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
