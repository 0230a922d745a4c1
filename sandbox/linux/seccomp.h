/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The seccomp filter compiler and the filters it produced at build time.
 *
 * The filter depends only on the native architecture and on the rule groups
 * in use (cd_sc_when), so seccomp-gen runs cd_seccomp_compile() once per
 * group set while building and writes the programs into a generated C file
 * (seccomp-filters.c). The backend takes a program from there and calls no
 * libseccomp at all on the `cordon run` path; it compiles at run time only
 * when no precompiled program fits (cross builds, a group set not
 * generated, or CORDON_TEST_DISABLE=seccomp-precompiled).
 */

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/linux/plan.h"

/*
 * Compile the rules of cd_sc_rules[] whose groups intersect `when` into a
 * seccomp BPF program for the native architecture: the hand-written prologue
 * for two-value rules followed by libseccomp's program. Other architectures
 * and x32 numbers are killed (KILL_PROCESS). Rules for calls the
 * architecture does not have (fcntl64 on 64-bit ones) are skipped; names this
 * libseccomp does not know are compiled by their unified number where the rule
 * has one (cd_sc_rule.nr_unified), else skipped and counted in *ret_unknown.
 * Returns 0 with *ret a malloc'ed array of *ret_len instructions, or -errno
 * with *reterr a malloc'ed one-line message. Parent side (or build time).
 */
int cd_seccomp_compile(cd_sc_when when, struct sock_filter **ret, size_t *ret_len,
		       unsigned *ret_unknown, char **reterr);

/* One program compiled at build time; the table ends with an entry whose insns is NULL. */
struct cd_seccomp_precompiled {
	cd_sc_when when; /* exact group set it was compiled for */
	const struct sock_filter *insns;
	size_t n_insns;
	unsigned n_unknown;
};

/*
 * Generated (seccomp-filters.c). When cross compiling nothing is generated:
 * the table holds only its terminator and the architecture is 0.
 */
extern const struct cd_seccomp_precompiled cd_seccomp_precompiled[];
/* AUDIT_ARCH_* of the programs (seccomp_arch_native() of the generator), 0 when none. */
extern const uint32_t cd_seccomp_precompiled_arch;
/* The libseccomp the generator ran with (seccomp_version()); zeros when none. */
extern const unsigned cd_seccomp_precompiled_version[3];

struct cd_backend_state;
/* Test hook: does this seccomp backend state use a precompiled program? false for NULL. */
bool cd_seccomp_state_precompiled(const struct cd_backend_state *s);
