/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * cordon run's own filtering proxy (src/net/proxy.h), for a managed network
 * without --network-proxy. It listens on a unix socket in a directory of
 * its own (mkdtemp: mode 0700, so only this user reaches it) and runs in a
 * process of its own, started before the command and outside its process
 * tree: the sandbox's kill of everything the command left behind does not
 * reach it, and a proxy that dies takes the network with it (the relay has
 * nowhere else to go). Cordon holds one end of a socket pair whose other
 * end the proxy watches: at its end of the pair (cordon stops it, or dies)
 * the proxy closes its connections, writes their audit lines and exits.
 * Audit lines go to cordon's stderr, or where opts say.
 *
 * Before it reads a client's byte the proxy confines itself
 * (sandbox/linux/confine.h): as root it changes to opts->uid/gid, it keeps
 * no capability, sets no_new_privs, reads only the resolver's files
 * (Landlock) and makes only the system calls it needs (seccomp). A step
 * that fails where the kernel has the mechanism stops it from starting.
 * Its parent, a keeper that reads nothing, waits for it and removes the
 * socket and the directory, which the confined proxy cannot.
 */

#include <stdbool.h>
#include <sys/types.h>

#include "core/netpolicy.h"

struct cd_own_proxy {
	pid_t pid;    /* the proxy process */
	int ctl;      /* our end of the pair, or -1 */
	char dir[64]; /* the private directory */
	char endpoint
		[128]; /* "unix:DIR/proxy.sock", as --network-proxy spells it (sun_path fits) */
};

/* The uid and gid cordon's proxy runs as when cordon runs as root: nobody, nogroup. */
#define CD_OWN_PROXY_UID 65534
#define CD_OWN_PROXY_GID 65534

struct cd_own_proxy_opts {
	bool json_audit; /* audit lines as JSON objects, one a line */
	int audit_fd;	 /* where audit lines go (borrowed; the proxy gets a copy), -1: stderr */
	uid_t uid;	 /* as root: the user the proxy runs as */
	gid_t gid;
};

/* Defaults: text audit on stderr, nobody:nogroup as root. */
void cd_own_proxy_opts_init(struct cd_own_proxy_opts *o);

/*
 * Start the proxy with policy pol (copied into its process). Returns 0, or
 * -errno with *reterr set (malloc()ed): nothing is left behind then. The
 * proxy's own reason for not starting (a confinement step) is on stderr.
 */
int cd_own_proxy_start(const struct cd_netpolicy *pol, const struct cd_own_proxy_opts *opts,
		       struct cd_own_proxy *ret, char **reterr);

/*
 * Stop it: its audit lines are written when this returns. Returns true if
 * the proxy was still running, false if it had died before (the command
 * then had no network from that moment on). Safe on a zeroed struct with
 * ctl -1.
 */
bool cd_own_proxy_stop(struct cd_own_proxy *p);
