/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The backend contract (conventions 3.2). A backend turns its part of the
 * Linux wrapper plan (sandbox/linux/plan.h) into kernel objects:
 *
 *   prepare  parent: every allocation, library call and file opening
 *            (Landlock ruleset fd, seccomp BPF, O_PATH fds for mounts,
 *            synthetic mount points). Returns 0 or -errno with *reterr set
 *            (malloc'ed, one line naming the mechanism and the fix).
 *   apply    child, between fork and exec: system calls only, no
 *            allocation, async-signal-safe. Returns 0 or -errno; the
 *            supervisor reports "<backend name>: <strerror>" through the
 *            error pipe and exits 125.
 *   finish   parent, after the child has exited: undo host-side effects
 *            (remove synthetic mount points). NULL-safe state. Optional.
 *   destroy  parent: free the state. NULL-safe.
 *   abandon  parent, instead of a full finish when the sandbox may still
 *            run: keep what confines it. Optional.
 *
 * Backends stack; the supervisor walks cd_backends[] in order for prepare
 * and apply. Order matters: namespaces (mounts need capabilities), then
 * capabilities, then Landlock (needs no_new_privs, set by the supervisor
 * just before), then seccomp last (it forbids mount and friends).
 */

#include "sandbox/linux/plan.h"

struct cd_backend_state;

struct cd_backend {
	const char *name; /* "namespaces", "capabilities", "landlock", "seccomp" */
	int (*prepare)(const struct cd_linux_plan *lp, struct cd_backend_state **ret_state,
		       char **reterr);
	int (*apply)(struct cd_backend_state *s);
	void (*finish)(struct cd_backend_state *s);
	void (*destroy)(struct cd_backend_state *s);
	/*
	 * Optional (may be NULL; NULL-safe state). In the child, after apply
	 * failed: a string naming the step that failed ("unshare", "uid_map",
	 * "ro bind '/w/.git'"), owned by the state, for the error pipe.
	 */
	const char *(*last_step)(struct cd_backend_state *s);
	/*
	 * Optional. Parent, after prepare, just before the child is created:
	 * namespace flags (CLONE_NEW*) the spawner should pass to clone()
	 * itself. A backend that returns flags here will not unshare them in
	 * apply. The spawner creates the child with CLONE_VM|CLONE_VFORK (no
	 * page-table copy, about 0.1 ms less per spawn); the kernel refuses
	 * unshare(CLONE_NEWUSER) to a process that shares its memory, so a
	 * user namespace must come from clone().
	 */
	unsigned long (*clone_flags)(struct cd_backend_state *s);
	/*
	 * Optional (may be NULL; NULL-safe state). Parent, before finish, when
	 * something of the sandbox may still be running (the supervisor could
	 * not kill it): finish and destroy then keep the host-side effects that
	 * still confine it (mask directories) instead of undoing them.
	 */
	void (*abandon)(struct cd_backend_state *s);
	/*
	 * Optional, both or neither: the host-side half of prepare (creating
	 * and opening files on the host: mask mount points), split off so
	 * that it can run in the parent while the child is busy creating its
	 * namespaces (a network namespace alone is about 0.3 ms of kernel
	 * time) instead of before the child exists.
	 *
	 * defer_host: parent, after prepare, before the child is created, and
	 * only when the child is created with fork semantics (its own copy of
	 * memory, so it cannot see what the parent does afterwards). Returns
	 * true when the backend takes the offer: prepare_host then runs after
	 * the child was created and sends the child what apply needs over the
	 * spawner's socket, and apply receives it on child_fd (the child's end
	 * of that socket). Otherwise prepare_host runs at once, before the
	 * child exists, with parent_fd -1.
	 *
	 * prepare_host: parent; same rules as prepare (may allocate, but what
	 * it allocates after the child exists is not visible to the child).
	 * Returns 0 or -errno with *reterr set. When it fails after the child
	 * was created, the spawner kills and reaps the child, then finishes.
	 */
	bool (*defer_host)(struct cd_backend_state *s, int child_fd);
	int (*prepare_host)(struct cd_backend_state *s, int parent_fd, char **reterr);
	/*
	 * Optional. Parent, just before the child is created: a directory fd
	 * of the cgroup the child is to be born in (clone3's
	 * CLONE_INTO_CGROUP), or -1. When the spawner cannot create the child
	 * that way (clone3 missing, or refused by a container's seccomp
	 * profile) it calls again with fallback true, and apply then moves the
	 * child into the cgroup itself (the sandbox's seccomp filter makes
	 * clone3 ENOSYS for the command; the spawner is not under it).
	 */
	int (*clone_cgroup)(struct cd_backend_state *s, bool fallback);
	/*
	 * Optional. Parent, after finish: what the sandbox ran into, in one
	 * line for the caller ("killed: memory limit 512 MiB reached"), given
	 * the command's exit code (128+N for signal N). Returns the limit
	 * (enum cd_limit) or -1 with buf "" when none.
	 */
	int (*exit_reason)(struct cd_backend_state *s, int exit_code, char *buf, size_t size);
	/* Optional. Parent, after finish: a warning for the supervisor to log, or NULL. Owned. */
	const char *(*warning)(struct cd_backend_state *s);
	/*
	 * Optional. Child, right after the namespaces backend's apply, while
	 * the child still has every capability in the sandbox's new user
	 * namespace (its maps written, nothing dropped yet): what belongs to
	 * that namespace (its own inotify limits). Same rules as apply; a
	 * failure is reported under the backend's name and last_step.
	 */
	int (*apply_in_userns)(struct cd_backend_state *s);
};

extern const struct cd_backend cd_backend_namespaces;
extern const struct cd_backend cd_backend_caps;
extern const struct cd_backend cd_backend_landlock;
extern const struct cd_backend cd_backend_seccomp;
/*
 * Resource limits (sandbox/linux/limits.c): the sandbox's cgroup, its
 * rlimits and its user namespace's own limits, from lp->limits. Not in
 * cd_backends[]: it applies to unsandboxed plans too, so the spawner runs
 * it on its own: apply_in_userns right after the namespaces backend, apply
 * after all the others (the rlimits last, so that no setup step trips
 * over them).
 */
extern const struct cd_backend cd_backend_limits;

/* NULL-terminated, in apply order. */
extern const struct cd_backend *const cd_backends[];

/* ---- probing (sandbox/linux/probe.c) ---- */

typedef enum cd_probe_what {
	CD_PROBE_LANDLOCK = 1u << 0,
	CD_PROBE_SECCOMP = 1u << 1,
	CD_PROBE_USERNS = 1u << 2,
	CD_PROBE_ALL = 0x7u, /* the fast facts */
	/*
	 * Also create the namespaces a sandbox needs, and its /proc, in a
	 * forked child (about a millisecond): for explain and a server's start,
	 * which can afford it; cordon run instead retries when they fail.
	 */
	CD_PROBE_NS_TEST = 1u << 3,
} cd_probe_what;

/*
 * Host facts for building a plan: a few syscalls and sysctl reads, no
 * fork, unless CD_PROBE_NS_TEST. Honours the test hook
 * CORDON_TEST_DISABLE=landlock,userns,seccomp (comma list), which can only
 * make features look absent, never present.
 */
void cd_linux_probe_host(cd_probe_what what, struct cd_linux_host *ret);

/*
 * What this host offers for resource limits (sandbox/linux/cgroup.c): the
 * cgroup v2 subtree cordon may use and its controllers, how RLIMIT_NPROC
 * counts. No side effects: nothing is created or moved.
 */
void cd_linux_probe_limits(struct cd_limits_host *ret);
/*
 * Arrange, once per process, where the sandboxes' cgroups go (this may move
 * cordon into a cgroup of its own: see sandbox/linux/cgroup.h). cordon
 * serve calls it at start when it has limits, before it makes its own pid
 * namespace; otherwise it happens with the first sandbox that has limits.
 * 0, or -errno with *reterr (malloc'ed).
 */
int cd_linux_limits_setup(char **reterr);

struct cd_probe_item {
	char *name; /* "landlock", "seccomp", "user namespaces", ... */
	bool ok;
	char *detail; /* "ABI 7 (rights: ...)", "blocked by kernel.apparmor_restrict_unprivileged_userns=1" */
	char *fix; /* NULL when ok */
};

struct cd_probe {
	struct cd_linux_host host;
	struct cd_probe_item *items;
	size_t n_items;
};

/*
 * Full probe for `cordon probe`: Landlock ABI and errata, seccomp (filter
 * and the actions in use), user namespaces (tested for real in a forked
 * child, with the reason when blocked: sysctl, AppArmor, seccomp), pid and
 * network namespaces, cgroup v2, no_new_privs. Never fails; items say what
 * could not be determined.
 */
struct cd_probe *cd_linux_probe_full(void);
struct cd_probe *cd_probe_free(struct cd_probe *p);
