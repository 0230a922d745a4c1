/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Private helpers shared by the Linux backends: raw Landlock system calls
 * and the uapi structures, carried locally because Debian 12's
 * <linux/landlock.h> stops at ABI 2 (no handled_access_net, no scoped).
 * The names carry a cd_ prefix so that the system header can still be
 * included next to this one without clashing.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

#define CD_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define CD_LANDLOCK_CREATE_RULESET_ERRATA  (1U << 1)
#define CD_LANDLOCK_RULE_PATH_BENEATH	   1

/* struct landlock_ruleset_attr as of ABI 6; older kernels take a prefix of it. */
struct cd_landlock_ruleset_attr {
	uint64_t handled_access_fs;  /* ABI 1 */
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;	     /* ABI 6 */
};

struct cd_landlock_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

static inline int cd_landlock_create_ruleset(const struct cd_landlock_ruleset_attr *attr,
					     size_t size, uint32_t flags)
{
	return (int)syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

static inline int cd_landlock_add_rule(int ruleset_fd, int rule_type, const void *rule_attr,
				       uint32_t flags)
{
	return (int)syscall(SYS_landlock_add_rule, ruleset_fd, rule_type, rule_attr, flags);
}

static inline int cd_landlock_restrict_self(int ruleset_fd, uint32_t flags)
{
	return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, flags);
}

/* The host's Landlock ABI version, 0 when unavailable (ENOSYS, EOPNOTSUPP, ...). */
static inline unsigned cd_landlock_abi(void)
{
	int r = cd_landlock_create_ruleset(NULL, 0, CD_LANDLOCK_CREATE_RULESET_VERSION);

	return r > 0 ? (unsigned)r : 0;
}

/* Size of struct landlock_ruleset_attr a kernel at `abi` understands. */
static inline size_t cd_landlock_attr_size(unsigned abi)
{
	if (abi >= 6)
		return 3 * sizeof(uint64_t);
	if (abi >= 4)
		return 2 * sizeof(uint64_t);
	return sizeof(uint64_t);
}

/* close() that keeps errno, for error paths. */
static inline void cd_close_keep_errno(int fd)
{
	int saved = errno;

	if (fd >= 0)
		close(fd);
	errno = saved;
}

/* Is the directory at path the root of a devpts mount? (false when it cannot be told) */
static inline bool cd_linux_is_devpts(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == 0x1cd1 /* DEVPTS_SUPER_MAGIC */;
}

/* Test hook: is `what` ("landlock", "seccomp", "userns") in $CORDON_TEST_DISABLE? (probe.c) */
int cd_linux_test_disabled(const char *what);

struct cd_backend_state;
/* The compiled seccomp program of a seccomp backend state (struct sock_filter[]), for tests
 * and explain. NULL/0 for a NULL state. Borrowed. */
size_t cd_seccomp_state_insns(const struct cd_backend_state *s, const void **ret_insns);
/* How many rule names this libseccomp/architecture did not know (skipped, not an error). */
unsigned cd_seccomp_state_unknown(const struct cd_backend_state *s);
