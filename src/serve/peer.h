/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Who is at the other end of a loopback TCP connection (peer.c).
 *
 * A unix socket tells its peer's credentials (SO_PEERCRED); a TCP socket
 * does not, but on loopback the other end is a socket of this host, and
 * the kernel knows who created it: NETLINK_SOCK_DIAG (inet_diag) looks a
 * TCP socket up by its exact 4-tuple and reports its owner's uid. The
 * owner is the fsuid of the process that created the socket; it stays
 * with the socket when the descriptor is passed on or inherited.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The uid that owns the socket at the other end of fd, an accepted TCP
 * connection, and that socket's inode (what /proc/PID/fd/N of a process
 * holding it links to: "socket:[INODE]"; ret_inode may be NULL). From one
 * thread only (the event loop's): the netlink socket is kept open between
 * calls. Returns 0 with *ret_uid (and *ret_inode) set, or:
 *   -ENOENT     no socket of this host (in our network namespace) has that
 *               4-tuple: the peer is gone already, or is not on this host
 *   -ESTALE     the socket is there but no process holds it any more (it
 *               was closed: the kernel no longer knows whose it was)
 *   -EOVERFLOW  the owner's uid has no mapping in our user namespace (it
 *               reads as the overflow uid, which could be anybody)
 *   -EPROTO     the kernel's answer was not the one asked for
 *   other       -errno of the netlink request (no sock_diag, no tcp_diag)
 */
int cd_peer_tcp_owner(int fd, uid_t *ret_uid, uint64_t *ret_inode);

/*
 * The uid the kernel reports for fd, our own listening TCP socket: run
 * once at start-up, it proves that cd_peer_tcp_owner can work on this
 * host (sock_diag and tcp_diag there, AF_NETLINK not filtered out).
 * Returns as cd_peer_tcp_owner.
 */
int cd_peer_tcp_listener_owner(int fd, uid_t *ret_uid);

/* Close the netlink socket the lookups keep open (the next lookup opens one again). */
void cd_peer_done(void);

/* What a return of the two above means, for logs and answers. */
const char *cd_peer_strerror(int r);

/*
 * Whether the user uid is a member of the group gid by the user and group
 * databases (its primary group, or listed as a member; a static build
 * reads /etc/passwd and /etc/group itself): 1, 0, or -errno when the
 * databases could not be read.
 */
int cd_peer_uid_in_group(uid_t uid, gid_t gid);
