/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * glob_pattern deny entries (reference 3.2): git-style globs expanded to a
 * snapshot of existing paths before launch.
 *
 * Syntax, per '/'-separated component:
 *   *        any run of characters within one component (may be empty)
 *   ?        one character within one component
 *   [...]    a class: ranges a-z, [:alpha:] and the other POSIX classes,
 *            negation with ! or ^, ']' first is literal
 *   \c       the character c literally
 *   **       a whole component (or "***"...): zero or more directories ("a/ ** /b" matches
 *            a/b, a/x/b, ...); a trailing "**" matches everything inside
 *            (one or more components), never the directory itself
 * A leading '/' anchors the pattern; otherwise it is relative to a base
 * directory (the sandbox cwd, or a workspace root for
 * "codex-project-roots://"). "." components are dropped; ".." is refused.
 *
 * Expansion walks the "static prefix" (the leading components without
 * wildcards) breadth-first without following symlinks, prunes directories
 * that no match can lie below, and does not descend into a matched
 * directory: denying the directory covers its subtree. Symlinks are never
 * matches (a link gives no access its target's own path does not). A
 * directory that cannot be listed (EACCES) is returned whole: a match may
 * lie below it. A pattern without
 * wildcards names one path (or subtree) and is returned as is, existing or
 * not.
 *
 * Bounds (each refused with a message rather than silently cut):
 *   - a static prefix of "/" (a scan of the whole file system);
 *   - more than CD_GLOB_MAX_MATCHES matches in total over a plan;
 *   - more than CD_GLOB_MAX_VISITS directory entries read in total;
 *   - more than CD_GLOB_MAX_STEPS steps matching names against patterns
 *     in total (a component pattern costs up to its length times the
 *     name's for each name met);
 *   - a pattern with "**" whose tree is deeper than CD_GLOB_DEFAULT_DEPTH
 *     when the profile did not set glob_scan_max_depth (with it set, the
 *     walk stops at that depth, as the caller asked).
 * Paths created after the snapshot are not covered (documented).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/plan.h"

#define CD_GLOB_MAX_MATCHES 8192
#define CD_GLOB_MAX_VISITS  1000000
/* Matching steps over a plan: a few hundred ms; a pattern that needs more is refused. */
#define CD_GLOB_MAX_STEPS	     (128ull * 1024 * 1024)
#define CD_GLOB_DEFAULT_DEPTH	     64
#define CD_GLOB_MAX_COMPONENTS	     63
#define CD_GLOB_PROJECT_ROOTS_PREFIX "codex-project-roots://"

/* Syntax check of a pattern as written in a profile; *reterr says why. */
int cd_glob_check(const char *pattern, char **reterr);

/* Whether a relative path (components separated by '/') matches a relative pattern. */
bool cd_glob_match(const char *pattern, const char *path);

/*
 * The bracket expression at p (p[0] == '[') of a component of len bytes,
 * as the matcher reads it: returns its length through the closing ']' and
 * sets bit c of set (set[c / 8] & 1 << c % 8) for each byte c it matches;
 * returns 0 when it is unterminated (the '[' is then a literal). For
 * translators to other engines (Seatbelt regexes), so that the bytes a
 * class matches are decided in one place.
 */
size_t cd_glob_bracket(const char *p, size_t len, uint8_t set[32]);

struct cd_glob_budget {
	size_t matches; /* in: already used; out: updated */
	size_t visits;
	uint64_t steps; /* of matching names against patterns (CD_GLOB_MAX_STEPS) */
};

/*
 * Expand an absolute pattern. Matches are appended to *matches (a strv),
 * sorted per call. max_depth 0 means "unset" (the default bound applies,
 * and reaching it is an error). Returns 0 or -errno with *reterr set.
 */
int cd_glob_expand(const struct cd_fs_ops *ops, const char *pattern, unsigned max_depth,
		   struct cd_glob_budget *budget, char ***matches, char **reterr);
