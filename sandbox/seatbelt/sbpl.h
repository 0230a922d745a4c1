/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The macOS Seatbelt planner: from a bound plan (core/plan.h) to the
 * sandbox-exec invocation a macOS host runs,
 *
 *   /usr/bin/sandbox-exec -p POLICY -DKEY=VALUE ... -- COMMAND...
 *
 * Pure: no OS headers, no file system (check-core-portable), so it is
 * built and unit-tested on every host, and `cordon explain --backend
 * seatbelt` shows the exact wrapper anywhere. Only launching it needs
 * macOS.
 *
 * The policy, in order (reference section 5; the text is cordon's own):
 *   1. the base: deny by default; fork, exec, signals and process info
 *      within the sandbox; /dev/null writable; the sysctls, IOKit class,
 *      mach services, POSIX semaphores, OpenMP shared memory, terminals
 *      and preference reads that ordinary programs need;
 *   2. reads: everything (no deny path), everything but the deny paths
 *      (READABLE_ROOT_0 = "/" with READABLE_ROOT_0_EXCLUDED_j), or one
 *      READABLE_ROOT_i per readable region with the deny paths under it
 *      excluded; a region readable again below a deny path is a root of
 *      its own;
 *   3. writes: everything (regex ^/), or one WRITABLE_ROOT_i per writable
 *      region with each narrower path under it (protected .git, .codex,
 *      .agents, gitdir targets, read-only and deny entries, masked
 *      missing names) excluded as literal and subpath, so that a missing
 *      protected directory cannot even be created;
 *   4. the :minimal platform defaults, when the profile grants :minimal
 *      and not all reads: system libraries, frameworks and the files the
 *      loader and libc read, all read-only (unlike Codex's, which also
 *      makes /tmp and /var/tmp writable: cordon's :minimal never grants a
 *      write), minus the profile's deny paths within their reach
 *      (MINIMAL_EXCLUDED_k);
 *   5. the network: restricted adds nothing (deny default), enabled adds
 *      outbound and inbound with the services name resolution and TLS
 *      need; managed is proxy-restricted: outbound only to the proxy's
 *      loopback ports (remote ip "localhost:PORT"), with the same
 *      services, plus local binding (and DNS, when a port is known) if
 *      allowed; with no port it allows no outbound address at all, so it
 *      fails closed (reference section 5);
 *   6. glob deny entries as anchored regexes (deny file-read* and
 *      file-write*), covering matches created later too, with the
 *      canonical-prefix variant when it differs. Last, since the last
 *      matching rule decides: nothing above reopens them.
 *
 * Bound paths reach the policy only as -D parameters (in the order: read
 * roots, write roots, :minimal exclusions), never in its text; only the
 * glob regexes carry their base directory in the text.
 *
 * Paths are macOS paths. On macOS the binding itself resolves /var, /tmp
 * and /etc to /private/...; a plan bound elsewhere (explain on Linux) is
 * rewritten lexically with macos_paths, and each rewrite is noted.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"
#include "core/plan.h"
#include "core/profile.h"

#define CD_SEATBELT_EXEC "/usr/bin/sandbox-exec"

struct cd_seatbelt_param {
	char *key; /* READABLE_ROOT_0, WRITABLE_ROOT_1_EXCLUDED_0, ... */
	char *value;
};

struct cd_seatbelt_plan {
	bool sandboxed; /* false: a DISABLED profile, plain exec */
	char *policy;	/* the SBPL text given to -p; NULL when !sandboxed */
	struct cd_seatbelt_param *params;
	size_t n_params;
	/* The wrapper, NULL-terminated: sandbox-exec, -p, POLICY, -DK=V..., "--". */
	char **argv;
	char **notes; /* NULL-terminated */
	/*
	 * The resource limits the launcher sets as rlimits of the wrapper,
	 * which the command inherits (open_files, file_size, core:
	 * RLIMIT_NOFILE, RLIMIT_FSIZE, RLIMIT_CORE, soft and hard), sandboxed
	 * or not. The others are refused (cd_seatbelt_plan_build): cpu_time
	 * too, since macOS only signals at RLIMIT_CPU and never kills.
	 */
	struct cd_limits rlimits;
};

struct cd_seatbelt_input {
	const struct cd_profile *profile; /* required */
	const struct cd_plan *plan;	  /* required: bound from profile */
	/* Workspace roots as bound (canonical), for codex-project-roots:// globs. */
	const char *const *workspace_roots;
	size_t n_workspace_roots;
	/*
	 * The plan was bound on a host that is not macOS: rewrite /var, /tmp
	 * and /etc (and what is below) to their /private/ targets, as the
	 * macOS binding would have resolved them.
	 */
	bool macos_paths;
	/*
	 * A managed network (plan->network == CD_NET_MANAGED): the loopback
	 * TCP ports of the proxy the command goes through (none: no way out),
	 * and whether it may bind and talk to local addresses
	 * (CODEX_NETWORK_ALLOW_LOCAL_BINDING).
	 */
	const uint16_t *proxy_ports;
	size_t n_proxy_ports;
	bool allow_local_binding;
	/* The limits asked (the profile's with the command line's over them), or NULL: none. */
	const struct cd_limits *limits;
	/*
	 * The caller's own files (cordon serve's unix socket and token file):
	 * denied to the command whatever the profile grants, reads, writes and
	 * connects alike (HIDDEN_i, after everything else).
	 */
	const char *const *hidden;
	size_t n_hidden;
};

/*
 * Build the plan. 0, or -EINVAL (refusal: a path or pattern SBPL cannot
 * carry) or -EOPNOTSUPP (a limit macOS cannot enforce: tasks, memory, swap,
 * cpu, cpu_time, private_tmp, inotify_*) with *reterr a malloc'ed one-line reason
 * naming the fix.
 */
int cd_seatbelt_plan_build(const struct cd_seatbelt_input *in, struct cd_seatbelt_plan **ret,
			   char **reterr);
struct cd_seatbelt_plan *cd_seatbelt_plan_free(struct cd_seatbelt_plan *sp);
/*
 * A plan of limits alone, for a command without a sandbox (cordon serve's
 * process/start without one): not sandboxed, its rlimits from L. 0, or
 * -EOPNOTSUPP with *reterr as cd_seatbelt_plan_build says it.
 */
int cd_seatbelt_plan_limits(const struct cd_limits *L, struct cd_seatbelt_plan **ret,
			    char **reterr);

/*
 * The plan's rlimits as explain's text shows them: a "  limits" line, then
 * one "    NAME  VALUE  RLIMIT_X" line each; "" when there are none.
 * malloc'ed.
 */
char *cd_seatbelt_limits_text(const struct cd_limits *L);

/*
 * A glob pattern (core/glob.h syntax) below base (a normal absolute path)
 * as an anchored SBPL regex body matching each path the pattern matches
 * and everything below it. No '.' in it: in most engines '.' does not
 * match a newline, which a file name may hold; "[^/]" does. NULL with
 * *reterr when the pattern or base holds a character SBPL's string literal
 * cannot carry (a double quote, a control character), or a bracket
 * expression cannot be written so (see put_bracket).
 */
char *cd_seatbelt_glob_regex(const char *base, const char *pattern, char **reterr);

/* Whether :minimal's section grants reading path (a macOS path), deny paths aside. */
bool cd_seatbelt_minimal_reads(const char *path);

/* macOS's own path for path (/var/x -> /private/var/x); a copy. */
char *cd_seatbelt_macos_path(const char *path);
