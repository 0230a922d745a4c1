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
 * Audit lines go to cordon's stderr.
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

/*
 * Start the proxy with policy pol (copied into its process). Returns 0, or
 * -errno with *reterr set (malloc()ed): nothing is left behind then.
 */
int cd_own_proxy_start(const struct cd_netpolicy *pol, struct cd_own_proxy *ret, char **reterr);

/*
 * Stop it: its audit lines are written when this returns. Returns true if
 * the proxy was still running, false if it had died before (the command
 * then had no network from that moment on). Safe on a zeroed struct with
 * ctl -1.
 */
bool cd_own_proxy_stop(struct cd_own_proxy *p);
