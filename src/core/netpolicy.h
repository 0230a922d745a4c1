/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The managed network's policy, as data (OS-free): which host names a
 * sandboxed program may reach through cordon's proxy (src/net/proxy.h),
 * which IP ranges are let through explicitly, and the mode.
 *
 * Domain patterns (allow and deny lists, matched on the normalised name):
 *   example.com     that name only
 *   *.example.com   its subdomains only (a.example.com, a.b.example.com)
 *   **.example.com  the name and its subdomains
 *   *               any name (an IP literal is not a name: it still needs
 *                   a CIDR; the resolved addresses are still checked)
 * No other wildcard is accepted. A deny match wins over any allow match;
 * an empty allow list allows no name at all.
 *
 * Names are normalised before matching: ASCII letters lowered, one
 * trailing dot dropped, labels of letters, digits, '-' and '_' of 1..63
 * bytes, 253 bytes at most. A name with any byte outside ASCII is refused
 * (IDNA: write it in punycode, xn--...), as is a name whose last label is
 * all digits (an IPv4 address in another form, such as 2130706433 or
 * 127.1, which resolvers read as addresses).
 *
 * CIDRs: an address in one is allowed whatever its class (loopback,
 * private...) and an IP literal in one may be asked for directly. They
 * never allow a name, only where a name or a literal leads.
 */

#include <stdbool.h>
#include <stddef.h>

#include "core/netaddr.h"

enum cd_netmode {
	CD_NETMODE_FULL,    /* every method, CONNECT tunnels */
	CD_NETMODE_LIMITED, /* GET, HEAD, OPTIONS on plain HTTP; no CONNECT, no SOCKS5 */
	CD_NETMODE_COUNT,
	CD_NETMODE_INVALID = -22,
};

struct cd_netpolicy {
	char **allow; /* owned, normalised patterns */
	size_t n_allow;
	char **deny; /* owned */
	size_t n_deny;
	struct cd_cidr *cidrs; /* owned */
	size_t n_cidrs;
	enum cd_netmode mode;
	/*
	 * SOCKS5 (socks5h) clients accepted too, on the same port as HTTP.
	 * Off by default; refused with mode limited, which refuses every
	 * tunnel (cd_netpolicy_check).
	 */
	bool socks5;
};

/* "full" or "limited"; CD_NETMODE_INVALID otherwise. */
enum cd_netmode cd_netmode_from_string(const char *s);
const char *cd_netmode_to_string(enum cd_netmode m);

/*
 * Normalise the host name s (n bytes, not NUL-terminated necessarily).
 * 0 with *ret malloc()ed; -EINVAL with *reterr a static string saying why.
 */
int cd_hostname_normalize(const char *s, size_t n, char **ret, const char **reterr);

/* Add a pattern to the allow (deny false) or deny list. Copies @pattern.
 * 0, or -EINVAL with *reterr a static string. */
int cd_netpolicy_add_domain(struct cd_netpolicy *p, const char *pattern, bool deny,
			    const char **reterr);
/* Add a CIDR (cd_cidr_parse). 0 or -EINVAL with *reterr. */
int cd_netpolicy_add_cidr(struct cd_netpolicy *p, const char *s, const char **reterr);
/* Free the contents; p is then an empty policy (no network). */
void cd_netpolicy_done(struct cd_netpolicy *p);
/* Add src's patterns and CIDRs to dst's (copies; the mode and socks5 stay dst's). */
void cd_netpolicy_append(struct cd_netpolicy *dst, const struct cd_netpolicy *src);

/*
 * Whether the normalised name may be asked for. *ret_rule (malloc()ed)
 * names the rule that decided: "allow-domain PATTERN", "deny-domain
 * PATTERN", or why nothing allowed it.
 */
bool cd_netpolicy_allows_name(const struct cd_netpolicy *p, const char *name, char **ret_rule);
/* The CIDR that allows a, or NULL. */
const struct cd_cidr *cd_netpolicy_cidr_for(const struct cd_netpolicy *p,
					    const struct cd_ipaddr *a);
/*
 * Whether the settings go together: 0, or -EINVAL with *reterr a static
 * string (SOCKS5 with mode limited: every SOCKS5 request is a tunnel).
 */
int cd_netpolicy_check(const struct cd_netpolicy *p, const char **reterr);
/* Whether pattern (normalised, as stored) matches name (normalised). */
bool cd_domain_pattern_matches(const char *pattern, const char *name);
