/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The managed network's filtering proxy, on cordon's event loop: an
 * HTTP/1.1 forward proxy (CONNECT tunnels, absolute-form plain HTTP) and,
 * when enabled, a SOCKS5 proxy (CONNECT with a domain name, socks5h) on
 * the same listening socket (the first byte tells them apart). Every
 * request is judged by a cd_netpolicy (core/netpolicy.h): the name first,
 * then every address the proxy's own DNS lookup returned (on a worker
 * thread, never on the loop); the connection goes to the checked address
 * itself, so a second lookup cannot rebind the name. Refused: loopback,
 * private, link-local and cloud metadata, carrier-grade NAT, multicast and
 * reserved addresses (core/netaddr.h) and this host's own addresses,
 * unless a CIDR of the policy covers them; the proxy's own listening
 * address always.
 *
 * One request per HTTP connection (the request goes upstream with
 * "Connection: close"). Refusals: 400 (malformed or ambiguous requests:
 * smuggling forms, obs-fold, a Host that disagrees with the target), 403
 * with the rule, 408 (head not complete in time), 411 (a request body
 * without Content-Length), 431 (head larger than the limit), 502 (the
 * name does not resolve, the upstream refuses), 503 (connection cap), 504
 * (connect timeout). SOCKS5 (core/socks5.h): CONNECT only, no
 * authentication; the same decision as an HTTP CONNECT, with reply 2 for
 * a policy refusal, 4 (lookup), 5 (refused), 6 (timeout), 7 (BIND, UDP
 * ASSOCIATE), 8 (address type), 1 (malformed, header timeout). Mode
 * limited refuses every SOCKS5 request (a tunnel). One audit line per
 * connection at its close (src/net/audit.h).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/netpolicy.h"

struct cd_loop;
struct cd_workq;
struct cd_proxy;

struct cd_proxy_opts {
	const struct cd_netpolicy *policy; /* borrowed for the proxy's life */
	bool socks5;			   /* accept SOCKS5 clients too */
	bool json_audit;		   /* audit lines as JSON on stdout, else text on stderr */
	const char *audit_tag;		   /* named in every audit line, or NULL; borrowed */
	size_t max_header;		   /* request head bytes (431 past it) */
	unsigned header_timeout_ms;	   /* accept to complete head (408) */
	unsigned connect_timeout_ms;	   /* lookup and connect (504) */
	unsigned idle_timeout_ms;	   /* a tunnel with no byte either way is closed */
	unsigned max_conns;		   /* client connections at once (503 past it) */
	/*
	 * Test hook (CORDON_TEST_PROXY_RESOLVE): "NAME=ADDR[+ADDR...],..." is
	 * the whole DNS: a name not listed does not resolve. It only replaces
	 * the lookup: the policy still judges the name and every address.
	 * Borrowed. NULL: getaddrinfo.
	 */
	const char *resolve_map;
};

/* Defaults for the limits (policy NULL: set it). */
void cd_proxy_opts_init(struct cd_proxy_opts *o);

/*
 * A proxy serving listen_fd (bound, listening, non-blocking; stays the
 * caller's). NULL with errno set. Borrows l and q.
 */
struct cd_proxy *cd_proxy_new(struct cd_loop *l, struct cd_workq *q, int listen_fd,
			      const struct cd_proxy_opts *o);
/* Close every connection (their audit lines are written) and free. NULL-safe. */
void cd_proxy_free(struct cd_proxy *p);
/* Client connections open now. */
unsigned cd_proxy_connections(const struct cd_proxy *p);
