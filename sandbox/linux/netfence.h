/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The managed network's fence (lp->net_managed): the relay between the
 * sandbox's network namespace and the proxy outside.
 *
 * Design. The spawner's child, once in its new network namespace and still
 * holding that namespace's capabilities (right after the namespaces
 * backend, before anything is dropped), brings lo up and listens on
 * CD_RELAY_ADDR:CD_RELAY_PORT; it hands that listening socket to the
 * supervisor over the report socket (SCM_RIGHTS) and closes its own copy.
 * A socket stays in the namespace it was made in wherever its descriptor
 * goes, so the supervisor's relay process, which lives in the host's
 * network and mount namespaces, accepts the sandbox's connections there
 * and connects each one to the proxy endpoint (a unix socket path or a
 * TCP address of the host), and to nothing else. Nothing of the relay runs
 * inside the sandbox: the command can neither kill nor ptrace it, and
 * needs no unix socket of its own (seccomp refuses it any).
 *
 * Fail closed: when the proxy is gone, the relay's connect fails and it
 * closes the sandbox's connection; it never tries another address. When
 * the relay is gone (killed, or cordon gone), the listening socket is
 * closed with it and connecting to the relay port is refused.
 */

#include <sys/types.h>

#include "sandbox/linux/plan.h"

/*
 * Child, after the namespaces backend (system calls only): bring lo up in
 * the current network namespace and listen on the relay port. A
 * close-on-exec listening socket, or -errno; *step names the failed step.
 */
int cd_netfence_listen(const char **step);

/*
 * Parent, before the sandboxed child exists: pin e's unix socket by its
 * inode (an O_PATH fd, which the relay connects through /proc/self/fd), so
 * that renaming another socket onto e->path later changes nothing. A
 * close-on-exec fd, or -errno (no such socket; /proc not mounted).
 */
int cd_relay_pin(const struct cd_proxy_endpoint *e);

/*
 * The relay's process name (its comm, and its connections'): it runs
 * outside the sandbox but connects where the sandbox asks, so a server
 * that judges its clients (cordon serve's sandboxes.c) takes a socket it
 * holds for the sandbox's, as it does cordon's proxy's.
 */
#define CD_RELAY_NAME "cordon-relay"

/*
 * Parent: fork the relay process (named CD_RELAY_NAME), which accepts on
 * listen_fd and forwards each connection to e: a unix one through pin_fd
 * (cd_relay_pin), -1 for TCP. Both fds are taken (closed in the caller in
 * every case). Returns its pid, or -errno.
 */
pid_t cd_relay_start(int listen_fd, const struct cd_proxy_endpoint *e, int pin_fd);

/* Parent: kill and reap the relay (pid > 0; a pid it has not reaped yet). */
void cd_relay_stop(pid_t pid);
