/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A small evaluator of the SBPL subset cordon's Seatbelt planner emits, for
 * tests: it answers "would Seatbelt allow operation OP on PATH" for the
 * file operations, from the policy text and its -D parameters, as Seatbelt
 * decides: the last rule that matches wins, and (deny default) decides
 * when none does.
 *
 * Understood: (version 1), (deny default), (allow|deny OP... FILTER...)
 * with the filters literal, subpath, regex (#"..." raw strings, POSIX
 * extended syntax), require-all, require-any, require-not, and (param
 * "K") as a filter's argument. A rule with several filters matches when
 * any does; one without filters matches every object. Filters about other
 * objects (sysctl-name, global-name, target, vnode-type, extension,
 * path-ancestors, ...) never match a plain path: the evaluator is
 * conservative, so a path allowed only through them reads as denied.
 *
 * An operation name in a rule ending in '*' matches every operation it is
 * a prefix of ("file-read*" matches "file-read-data").
 */

#include <stdbool.h>
#include <stddef.h>

struct sbpl_policy;

/*
 * Parse text with the parameters (keys[i] = values[i]). NULL with *err (a
 * static string) on a syntax error, an unknown form, or a (param) that no
 * parameter defines; *unused_param is set to the first parameter no rule
 * uses (NULL when all are used).
 */
struct sbpl_policy *sbpl_parse(const char *text, const char *const *keys, const char *const *values,
			       size_t n, const char **err, const char **unused_param);
void sbpl_free(struct sbpl_policy *p);

/* Whether op ("file-read-data", "file-write-create", ...) on path is allowed. */
bool sbpl_allows(const struct sbpl_policy *p, const char *op, const char *path);
