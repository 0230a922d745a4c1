/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the libFuzzer targets in tests/fuzz/ (`make fuzz`). Each target
 * is one fuzz-<name>.c defining LLVMFuzzerTestOneInput; libFuzzer supplies
 * main(). A target checks properties beyond "no crash" where it can (a
 * round trip, a reference model) and calls fuzz_fail() when one breaks,
 * which aborts: libFuzzer saves the input as a crash artifact.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/plan.h"
#include "core/profile.h"
#include "sandbox/linux/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Print "fuzz: <message>" and abort (a property of the code under test broke). */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define fuzz_assert(cond)                                                  \
	do {                                                               \
		if (!(cond))                                               \
			fuzz_fail("%s:%d: %s", __FILE__, __LINE__, #cond); \
	} while (0)

/* The in-memory tree every binding target works on (fuzz-tree.c). */
#define FUZZ_WORKSPACE "/w"
#define FUZZ_CWD       "/w/src"
#define FUZZ_TMPDIR    "/tmp/t"

/* The shim over the tree, built on first use and kept for the whole run. */
const struct cd_fs_ops *fuzz_tree_ops(void);
/* Every node of the tree, as created (NULL-terminated); symlinks included. */
const char *const *fuzz_tree_paths(void);
/* Whether a tree path is a symlink. */
bool fuzz_tree_is_symlink(const char *path);

/* A host with every mechanism (Landlock ABI 6, seccomp, user namespaces, not root). */
extern const struct cd_linux_host fuzz_host;

/*
 * Bind p over the tree like `cordon run` does (cd_plan_build, then
 * cd_linux_plan_build), and check the plan's own invariants: sorted and
 * unique normal paths, every access a known one. Refusals are fine.
 */
void fuzz_bind_check(const struct cd_profile *p, const char *cwd, const char *const *roots,
		     size_t n_roots);
