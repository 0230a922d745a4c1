/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The per-OS backends behind one choice: which one runs a sandbox on this
 * host (`cordon probe` says it, `process/start` reports its sandboxType),
 * and the Seatbelt launch.
 *
 *   linux     Landlock + seccomp + namespaces (sandbox/linux/, planner in
 *             sandbox/linux/plan.h); sandboxType linuxSeccomp
 *   seatbelt  /usr/bin/sandbox-exec with the policy of sandbox/seatbelt/;
 *             sandboxType macosSeatbelt
 *   windows   a restricted token with the ACEs of sandbox/windows/;
 *             sandboxType windowsRestrictedToken
 *
 * Each planner is pure and built on every host (explain --backend plans
 * for any of them); launching needs the OS itself. This build launches
 * under the Linux backend only.
 *
 * Test hook: CORDON_TEST_SEATBELT_EXEC=PROGRAM makes `cordon run` and
 * `cordon serve` launch every sandboxed command through the Seatbelt
 * wrapper as well, with PROGRAM standing in for /usr/bin/sandbox-exec
 * (it receives "-p POLICY -DK=V... -- CMD..." and runs CMD), and report
 * sandboxType macosSeatbelt. The Linux sandbox still confines the stand-in
 * and the command: the hook adds a wrapper to test the path from an
 * intent to the wrapper's argv; it never takes a confinement away.
 */

#include "cli-policy.h"
#include "sandbox/seatbelt/sbpl.h"

/*
 * The wrapper a macOS build executes: /usr/bin/sandbox-exec, or for the
 * tests of a build made to look like a Mac (.ci/darwin-like.sh) a stand-in
 * fixed at compile time, never taken from the environment.
 */
#ifndef CD_MAC_SANDBOX_EXEC
#define CD_MAC_SANDBOX_EXEC CD_SEATBELT_EXEC
#endif

/* Inline: the serve engine's binding (intent.c) asks it without linking the launch. */
static inline enum cd_cli_backend cd_os_backend_native(void)
{
#if defined(__APPLE__)
	return CD_CLI_BACKEND_SEATBELT;
#elif defined(_WIN32)
	return CD_CLI_BACKEND_WINDOWS;
#else
	return CD_CLI_BACKEND_LINUX;
#endif
}
const char *cd_os_backend_name(enum cd_cli_backend b);	       /* "linux", ... */
const char *cd_os_backend_sandbox_type(enum cd_cli_backend b); /* "linuxSeccomp", ... */

/* The stand-in of CORDON_TEST_SEATBELT_EXEC (absolute), or NULL. */
const char *cd_seatbelt_stand_in(void);

/*
 * The command argv wrapped for Seatbelt: exec, "-p", POLICY, "-DK=V"...,
 * "--", argv... (NULL-terminated, malloc'ed), planned from b (its profile,
 * plan and workspace roots) with its paths as a macOS binding would give
 * them, and hidden (n_hidden paths: cordon serve's socket and token file)
 * denied whatever the profile grants. 0, or -EINVAL with *reterr. A
 * disabled profile gives argv unwrapped.
 */
int cd_seatbelt_wrap(const struct cd_cli_bound *b, const char *exec, char *const *argv,
		     const char *const *hidden, size_t n_hidden, char ***ret_argv, char **reterr);
