/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The two small protocols of systemd's service manager that cordon serve
 * speaks, implemented here without libsystemd:
 *  - socket activation (sd_listen_fds(3)): the manager binds and listens,
 *    starts us with the sockets from descriptor 3 on and LISTEN_PID,
 *    LISTEN_FDS and optionally LISTEN_FDNAMES in the environment;
 *  - readiness notification (sd_notify(3)): "KEY=VALUE" lines in one
 *    datagram to the AF_UNIX socket named by NOTIFY_SOCKET (a path, or
 *    "@name" for the abstract namespace).
 */

#include <stdbool.h>

/* The first descriptor passed (SD_LISTEN_FDS_START). */
#define CD_SD_LISTEN_FDS_START 3

struct cd_sd_listen {
	int fd;		/* the listening socket */
	int family;	/* AF_UNIX, AF_INET or AF_INET6 */
	char name[256]; /* its LISTEN_FDNAMES entry, or "" */
};

/*
 * The listening socket systemd passed, checked: 1 with *ret filled when
 * this process was socket-activated, 0 when it was not (no LISTEN_PID or
 * LISTEN_FDS, or a LISTEN_PID naming another process: those variables
 * were not meant for us and are ignored), -EINVAL with *reterr malloc()ed
 * (owned by the caller) when the variables are malformed, pass more than
 * one socket, or the socket is not a listening stream socket of a family
 * cordon serves. Changes nothing: see cd_sd_listen_done.
 */
int cd_sd_listen_fds(struct cd_sd_listen *ret, char **reterr);

/*
 * Take the passed socket over (close-on-exec, so that no command inherits
 * it; non-blocking) when act is not NULL, and remove LISTEN_PID, LISTEN_FDS
 * and LISTEN_FDNAMES from the environment in any case, so that no command
 * sees them. 0 or -errno.
 */
int cd_sd_listen_done(const struct cd_sd_listen *act);

/*
 * NOTIFY_SOCKET, checked and removed from the environment (commands must
 * not notify in our name): 1 with *ret_addr malloc()ed (owned by the
 * caller), 0 when it is unset or empty, -EINVAL with *reterr malloc()ed
 * when it is neither an absolute path nor "@name" or is too long.
 */
int cd_sd_notify_take(char **ret_addr, char **reterr);

/*
 * Send state (newline-separated KEY=VALUE assignments) to the notification
 * socket addr (as cd_sd_notify_take returned it). Borrows both. 0 or
 * -errno.
 */
int cd_sd_notify(const char *addr, const char *state);
