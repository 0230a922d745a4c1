/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Confine the calling process for good: a helper of cordon's own that holds
 * the network and parses hostile input (the managed network's proxy), once
 * it has opened every socket and file it listens on and before it reads a
 * byte of a client.
 *
 * In this order: no core dumps, not dumpable, RLIMIT_CORE 0, RLIMIT_NOFILE's
 * soft limit raised to the hard one; as root, every supplementary group
 * dropped, the gid and uid set to o->uid/o->gid (real, effective, saved) and
 * the bounding set emptied; every capability dropped (permitted, effective,
 * inheritable, ambient); no_new_privs; Landlock (when the kernel has it):
 * read access to o->read_files only, no file right elsewhere, no TCP bind
 * (ABI 4), no abstract unix socket or signal outside (ABI 6); a seccomp
 * allow-list (confine.c): new sockets only TCP, UDP and NETLINK_ROUTE
 * (getifaddrs, the lookup's AI_ADDRCONFIG), no new unix socket, no
 * executable mapping, threads but no new process, no exec, ptrace, mount,
 * setuid...: anything else fails with EPERM.
 *
 * Call it single-threaded (Landlock confines the calling thread; threads
 * made afterwards inherit everything). It allocates (libseccomp).
 *
 * Returns 0, or -errno with *reterr a malloc()ed one-line reason naming
 * the step (and a fix where there is one); the process is then partly
 * confined and must not go on. A kernel without Landlock is not an error:
 * *ret_landlock_abi says 0. Test hook: CORDON_TEST_DISABLE=landlock.
 */

#include <stdbool.h>
#include <sys/types.h>

struct cd_confine_opts {
	bool drop_user;		       /* change to uid/gid (only root can; refused otherwise) */
	uid_t uid;		       /* when drop_user */
	gid_t gid;		       /* when drop_user */
	const char *const *read_files; /* NULL-terminated; ones that do not exist are skipped */
};

/* The files a getaddrinfo() of static glibc reads (files and dns services). */
extern const char *const cd_confine_resolver_files[];

int cd_confine_self(const struct cd_confine_opts *o, unsigned *ret_landlock_abi, char **reterr);
