/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * cgroup v2 for the sandboxes' limits (cgroup.c), private to the Linux
 * backends: where this process may make cgroups, arranging that place once,
 * and one cgroup per sandbox. Parent side only (allocates, opens files),
 * from the spawning thread: what it finds is kept in statics, unlocked
 * (cordon serve spawns limited processes from its loop only; its fs
 * helpers, spawned by workers, have no limits).
 *
 * Where the sandboxes' cgroups go, in this order:
 *  - the cgroup cordon runs in, when cordon is the only process in it and
 *    it is delegated (owned by cordon's uid; as root: systemd's
 *    trusted.delegate mark, i.e. a unit with Delegate=yes): cordon moves
 *    itself into a "supervisor" cgroup below it (no process may live in a
 *    cgroup that has children with controllers) and the sandboxes go next
 *    to it, so the unit's own accounting and stop cover them;
 *  - as root otherwise: "cordon" at the top of the hierarchy;
 *  - unprivileged otherwise: "cordon" in the nearest cgroup above cordon's
 *    own that is delegated to its uid (the user's own slice: systemd's
 *    user@UID.service and what is below it);
 *  - nowhere: no cgroup v2 mounted, or none delegated (probe says which).
 */

/*
 * The directory the sandboxes' cgroups are made in, arranged on first use
 * (moving cordon into its supervisor cgroup, creating the "cordon" cgroup,
 * enabling the pids, memory and cpu controllers that are available there)
 * and remembered: 0 with *ret (a static string), or -errno with *reterr
 * (malloc'ed) every time after a failure. Empty cgroups of sandboxes whose
 * supervisor died are removed once, on the way.
 */
int cd_cgroup_base(const char **ret, char **reterr);

/*
 * A new, empty cgroup for one sandbox in the base: "sandbox-PID-N".
 * *ret_parent: the base, opened O_PATH (for the removal); *ret_fd: the new
 * cgroup's directory (for CLONE_INTO_CGROUP and its files); name (size
 * bytes) its name. 0, or -errno with *reterr.
 */
int cd_cgroup_make(int *ret_parent, int *ret_fd, char *name, size_t size, char **reterr);

/* Write value to file in the cgroup directory dirfd: 0 or -errno. */
int cd_cgroup_write(int dirfd, const char *file, const char *value);
