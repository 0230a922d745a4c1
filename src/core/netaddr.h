/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * IP addresses as data, OS-free: strict literal parsing, CIDR ranges and
 * the classification of the addresses that a program asking for "the
 * internet" must not reach (loopback, private, link-local and cloud
 * metadata, carrier-grade NAT, multicast, reserved, documentation...).
 * Shared by http/request (src/serve/http.c) and the managed network's
 * proxy (src/net/proxy.c). IPv4-mapped (::ffff:0:0/96) and NAT64
 * (64:ff9b::/96) addresses are judged by the IPv4 address they carry.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cd_ipaddr {
	unsigned char family; /* 4 or 6 */
	unsigned char b[16];  /* network order; IPv4 in b[0..3] */
};

struct cd_cidr {
	struct cd_ipaddr addr; /* host bits zero */
	unsigned prefix;       /* 0..32 or 0..128 */
};

/* A dotted quad (exactly four decimal parts, no leading zeros) or an
 * RFC 4291 IPv6 text form (no zone, no brackets). 0 or -EINVAL. */
int cd_ipaddr_parse(const char *s, struct cd_ipaddr *ret);
/* Text form into buf (at least 46 bytes). Returns buf. */
char *cd_ipaddr_format(const struct cd_ipaddr *a, char *buf, size_t n);
/* The IPv4 address an IPv4-mapped or NAT64 IPv6 address carries: true and
 * *ret set, else false. */
bool cd_ipaddr_embedded_v4(const struct cd_ipaddr *a, struct cd_ipaddr *ret);

/* "ADDR/PREFIX" or a bare address (a host: /32, /128). Host bits set are
 * an error (say what you mean), and so is a range inside ::ffff:0:0/96 or
 * 64:ff9b::/96 (write the IPv4 range). 0, or -EINVAL with *reterr a static
 * string. */
int cd_cidr_parse(const char *s, struct cd_cidr *ret, const char **reterr);
/* Whether a is in c. An IPv4-mapped or NAT64 address is matched as the IPv4
 * address inside it, by IPv4 ranges only. */
bool cd_cidr_contains(const struct cd_cidr *c, const struct cd_ipaddr *a);

/*
 * Why an address is not an ordinary public one (a static string naming
 * the range), or NULL. *ret_loopback (may be NULL) tells whether it is a
 * loopback address, which some callers let through on an opt-in.
 */
const char *cd_ipaddr_special(const struct cd_ipaddr *a, bool *ret_loopback);
/* The same for a host-order IPv4 address and for 16 IPv6 bytes. */
const char *cd_ipv4_special(uint32_t a, bool *ret_loopback);
const char *cd_ipv6_special(const unsigned char *b, bool *ret_loopback);
