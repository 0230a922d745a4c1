/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The small command line shared by the front ends that sit directly on the
 * OS-free core and one planner: cordon.exe (src/win/main.c, restricted
 * token) and cordon on macOS (src/mac/main.c, Seatbelt). It parses the
 * policy options of `explain` and `run`, loads a profile (a name looked up
 * as the front end says, a built-in name, or a policy file) and runs `check`. Portable C: no OS headers; reading
 * a file is the front end's own function (UTF-16 paths on Windows).
 *
 *   check FILE... | --builtin
 *   explain [POLICY OPTIONS] [--json]
 *   run [POLICY OPTIONS] [--] CMD [ARG...]
 *
 * POLICY OPTIONS: --profile NAME|FILE, --workspace-root DIR (repeatable),
 * --cwd DIR, --network restricted|managed|enabled, --allow-read PATH,
 * --allow-write PATH, --deny PATH, --deny-glob PATTERN (repeatable, as the
 * Linux build's), --limit-NAME VALUE (the Linux build's names and values;
 * the planner refuses what its OS cannot enforce) and, where the front end allows them,
 * --allow-degraded=network and --network-proxy ENDPOINT (parsed by the front
 * end).
 */

#include <stdbool.h>
#include <stddef.h>

#include "core/limits.h"
#include "core/profile.h"

#define CD_FRONT_EXIT_USAGE 2
#define CD_FRONT_EXIT_SETUP 125
#define CD_FRONT_MAX_ROOTS  64
#define CD_FRONT_FILE_MAX   (1024 * 1024)

struct cd_front {
	const char *prog; /* the program's name in "(see PROG --help)" */
	/*
	 * Read the whole file name: 0 with *ret (NUL-terminated, malloc'ed)
	 * and *ret_len, -EFBIG over CD_FRONT_FILE_MAX bytes, else -errno.
	 */
	int (*read_file)(const char *name, char **ret, size_t *ret_len);
	bool env_network_option;   /* accept --allow-degraded=network */
	bool network_proxy_option; /* accept --network-proxy ENDPOINT */
	/*
	 * A path of --allow-read, --allow-write or --deny in cordon's form
	 * (malloc'ed; NULL if it is not a path of this OS), or NULL: the
	 * argument as given (POSIX). Symbolic ones (":workspace_roots/x")
	 * are never passed to it.
	 */
	char *(*host_path)(const char *arg);
	/*
	 * Look a profile NAME up in installed directories
	 * (cd_profile_lookup(), src/profile-lookup.h: 0 with the text and its
	 * origin, 1 for the built-in NAME, -1 with a message), for a --profile
	 * that names no file (no '/', no ".json" at the end); or NULL: a
	 * built-in name or a file, nothing installed (cordon.exe).
	 */
	int (*lookup_profile)(const char *name, char **ret_text, size_t *ret_len, char **ret_origin,
			      char **reterr_msg);
};

struct cd_front_extra {
	const char *arg;
	enum cd_access access; /* READ, WRITE or DENY */
	bool glob;	       /* --deny-glob */
};

struct cd_front_opts {
	const char *profile; /* default "read-only" */
	struct cd_front_extra extra[CD_FRONT_MAX_ROOTS];
	size_t n_extra;
	const char *roots[CD_FRONT_MAX_ROOTS];
	size_t n_roots;
	const char *cwd; /* NULL: the current directory */
	int network;	 /* -1: the profile's */
	bool env_network;
	const char *network_proxy; /* --network-proxy's value, or NULL */
	struct cd_limits limits;   /* --limit-NAME VALUE, over the profile's "limits" */
	bool json;
	int cmd; /* argv index of the command (run) */
};

/* "cordon: MSG" and the pointer to --help on stderr; returns CD_FRONT_EXIT_USAGE. */
int cd_front_usage(const struct cd_front *f, const char *msg);

/* `check` (argv[1]): 0 when every file parses, 1 otherwise, or a usage status. */
int cd_front_check(const struct cd_front *f, int argc, char **argv);

/*
 * The options of `explain` (run false) or `run` (argv[1]) into *o: 0, or an
 * exit status with the reason printed. Borrows argv for the life of *o.
 */
int cd_front_parse_opts(const struct cd_front *f, int argc, char **argv, bool run,
			struct cd_front_opts *o);

/*
 * The profile of o (a built-in name, or a file when the name holds a
 * slash or backslash or is not a built-in one) with o's entries
 * (--allow-read...) and --network applied into *ret, which the caller frees (cd_profile_free): 0, or an exit
 * status (CD_FRONT_EXIT_SETUP, CD_FRONT_EXIT_USAGE) with the reason printed.
 */
int cd_front_load_profile(const struct cd_front *f, const struct cd_front_opts *o,
			  struct cd_profile **ret);
