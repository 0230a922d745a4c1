/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "core/netaddr.h"

/*
 * Whether the kernel delivers a connection to a on this host: the route
 * it picks for a is a local one (RTN_LOCAL). That covers the addresses of
 * this host's interfaces, and also what an interface list does not show:
 * a local route over a whole range (`ip route add local 10.9.0.0/16 dev
 * lo`, "AnyIP"), whose every address reaches services bound to 0.0.0.0.
 * An IPv4-mapped or NAT64 address is asked as the IPv4 address inside it.
 * 1 local, 0 not (another route, or none), -errno when the kernel could
 * not be asked (take that for local: the caller cannot tell). Linux
 * (rtnetlink); one request, answered at once.
 */
int cd_route_is_local(const struct cd_ipaddr *a);
