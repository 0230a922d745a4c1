/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Where `--profile NAME` finds NAME, for every POSIX build of cordon (the
 * Linux program, src/cli-policy.c, and the macOS front end, src/mac/main.c):
 * each directory of $CORDON_POLICY_PATH (absolute only), then
 * $(sysconfdir)/cordon/policies and $(datadir)/cordon/policies, then the
 * built-in profiles. The first DIR/NAME.json that is there at all is the
 * one: anything there that cannot be used (a directory, a FIFO, a dangling
 * link, a file over 1 MiB, an unreadable one) is refused, never passed over
 * to a later directory or the built-in of that name. An argument with a '/'
 * or ending in ".json" is a file, read as given.
 *
 * cordon.exe (src/win/main.c) has no installed directories: it takes a
 * built-in name or a file.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#define CD_PROFILE_MAX_BYTES (1024 * 1024)

/*
 * The directories of the lookup, in order (the built-ins come after
 * them). Returns 0 with *ret_dirs a NULL-terminated vector, malloc()ed and
 * owned by the caller (cd_strv_free); or -EINVAL when an element of
 * $CORDON_POLICY_PATH is not absolute (it would be looked up from the
 * current directory), with *reterr_msg malloc()ed and owned by the caller.
 * Empty elements are skipped.
 */
int cd_profile_dirs(char ***ret_dirs, char **reterr_msg);

/*
 * Where the lookup of NAME stops: the first DIR/NAME.json that is there at
 * all (lstat(2): a dangling symbolic link, a FIFO or a directory is there
 * too), or that cannot be told absent (a directory that cannot be
 * searched, say). Only "no such entry" (ENOENT, or ENOTDIR for a DIR that is
 * not a directory) moves on to the next directory. Returns 0 with
 * *ret_path malloc()ed and owned by the caller, *ret_st its lstat and
 * *ret_err lstat's errno (0 when it succeeded); or -ENOENT when no
 * directory has one. Borrows @dirs for the call.
 */
int cd_profile_find_entry(char *const *dirs, const char *name, char **ret_path, struct stat *ret_st,
			  int *ret_err);

/*
 * The whole lookup of a NAME (not a file argument). Returns:
 *   0 with *ret_text (NUL-terminated) and *ret_len, and *ret_origin the
 *     file read (all malloc()ed, owned by the caller);
 *   1 when no directory has NAME.json and NAME is a built-in profile
 *     (*ret_origin is then CD_BUILTIN_ORIGIN, malloc()ed; no text: the
 *     caller parses the built-in's in place);
 *   -1 with *reterr_msg malloc()ed: no such profile anywhere (the message
 *     lists the directories and the built-ins), a refused entry, or a bad
 *     $CORDON_POLICY_PATH.
 */
int cd_profile_lookup(const char *name, char **ret_text, size_t *ret_len, char **ret_origin,
		      char **reterr_msg);
