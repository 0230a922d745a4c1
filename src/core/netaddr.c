/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/netaddr.h"
#include "core/util.h"

static int parse_v4(const char *s, size_t n, unsigned char *out)
{
	size_t i = 0;
	for (int part = 0; part < 4; part++) {
		unsigned v = 0, digits = 0;
		if (part > 0) {
			if (i >= n || s[i] != '.')
				return -EINVAL;
			i++;
		}
		while (i < n && s[i] >= '0' && s[i] <= '9') {
			if (digits > 0 && v == 0)
				return -EINVAL; /* a leading zero: octal to some parsers */
			v = v * 10 + (unsigned)(s[i] - '0');
			if (v > 255)
				return -EINVAL;
			digits++;
			i++;
		}
		if (digits == 0)
			return -EINVAL;
		out[part] = (unsigned char)v;
	}
	return i == n ? 0 : -EINVAL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int parse_v6(const char *s, unsigned char *out)
{
	unsigned char b[16] = { 0 };
	size_t n = strlen(s), i = 0;
	int groups = 0, gap = -1;

	if (n >= 2 && s[0] == ':' && s[1] == ':') {
		gap = 0;
		i = 2;
		if (i == n)
			goto done;
	} else if (n > 0 && s[0] == ':') {
		return -EINVAL;
	}
	for (;;) {
		size_t start = i;
		unsigned v = 0;
		while (i < n && hexval(s[i]) >= 0 && i - start < 4)
			v = v * 16 + (unsigned)hexval(s[i++]);
		if (i < n && s[i] == '.') {
			/* an IPv4 tail: the last 32 bits */
			if (groups > 6 || parse_v4(s + start, n - start, b + groups * 2) < 0)
				return -EINVAL;
			groups += 2;
			break;
		}
		if (i == start || (i < n && hexval(s[i]) >= 0) || groups >= 8)
			return -EINVAL;
		b[groups * 2] = (unsigned char)(v >> 8);
		b[groups * 2 + 1] = (unsigned char)v;
		groups++;
		if (i == n)
			break;
		if (s[i] != ':')
			return -EINVAL;
		i++;
		if (i < n && s[i] == ':') {
			if (gap >= 0)
				return -EINVAL;
			gap = groups;
			i++;
			if (i == n)
				break;
		} else if (i == n) {
			return -EINVAL;
		}
	}
done:
	if (gap < 0 && groups != 8)
		return -EINVAL;
	if (gap >= 0) {
		if (groups > 7)
			return -EINVAL;
		int tail = groups - gap;
		memmove(b + 16 - tail * 2, b + gap * 2, (size_t)tail * 2);
		memset(b + gap * 2, 0, (size_t)(16 - groups * 2));
	}
	memcpy(out, b, 16);
	return 0;
}

int cd_ipaddr_parse(const char *s, struct cd_ipaddr *ret)
{
	struct cd_ipaddr a = { 0 };
	if (strchr(s, ':')) {
		if (parse_v6(s, a.b) < 0)
			return -EINVAL;
		a.family = 6;
	} else {
		if (parse_v4(s, strlen(s), a.b) < 0)
			return -EINVAL;
		a.family = 4;
	}
	*ret = a;
	return 0;
}

char *cd_ipaddr_format(const struct cd_ipaddr *a, char *buf, size_t n)
{
	if (a->family == 4) {
		snprintf(buf, n, "%u.%u.%u.%u", a->b[0], a->b[1], a->b[2], a->b[3]);
		return buf;
	}
	/* RFC 5952: the longest run (of two groups or more) of zero groups is "::". */
	unsigned g[8];
	int best = -1, best_len = 0;
	for (int i = 0; i < 8; i++)
		g[i] = (unsigned)a->b[2 * i] << 8 | a->b[2 * i + 1];
	for (int i = 0; i < 8;) {
		int j = i;
		while (j < 8 && g[j] == 0)
			j++;
		if (j - i > best_len && j - i >= 2) {
			best = i;
			best_len = j - i;
		}
		i = j > i ? j : i + 1;
	}
	size_t o = 0;
	buf[0] = '\0';
	for (int i = 0; i < 8 && o < n; i++) {
		if (i == best) {
			o += (size_t)snprintf(buf + o, n - o, "::");
			i += best_len - 1;
			continue;
		}
		o += (size_t)snprintf(buf + o, n - o, "%s%x",
				      i > 0 && i != best + best_len ? ":" : "", g[i]);
	}
	return buf;
}

bool cd_ipaddr_embedded_v4(const struct cd_ipaddr *a, struct cd_ipaddr *ret)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };
	if (a->family != 6 || (memcmp(a->b, mapped, 12) != 0 && memcmp(a->b, nat64, 12) != 0))
		return false;
	memset(ret, 0, sizeof(*ret));
	ret->family = 4;
	memcpy(ret->b, a->b + 12, 4);
	return true;
}

int cd_cidr_parse(const char *s, struct cd_cidr *ret, const char **reterr)
{
	char buf[64];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	struct cd_cidr c = { 0 };

	if (alen == 0 || alen >= sizeof(buf)) {
		*reterr = "not an IP address";
		return -EINVAL;
	}
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	if (cd_ipaddr_parse(buf, &c.addr) < 0) {
		*reterr = "not an IP address (a dotted quad or an IPv6 address)";
		return -EINVAL;
	}
	unsigned max = c.addr.family == 4 ? 32 : 128;
	c.prefix = max;
	if (slash) {
		const char *p = slash + 1;
		unsigned v = 0;
		if (!*p || (p[0] == '0' && p[1])) {
			*reterr = "the prefix length is not a number";
			return -EINVAL;
		}
		for (; *p; p++) {
			if (*p < '0' || *p > '9' || (v = v * 10 + (unsigned)(*p - '0')) > max) {
				*reterr = c.addr.family == 4 ? "the prefix length is not 0..32"
							     : "the prefix length is not 0..128";
				return -EINVAL;
			}
		}
		c.prefix = v;
	}
	for (unsigned bit = c.prefix; bit < max; bit++)
		if (c.addr.b[bit / 8] & (0x80 >> (bit % 8))) {
			*reterr = "host bits are set after the prefix length";
			return -EINVAL;
		}
	/* A range inside ::ffff:0:0/96 or 64:ff9b::/96 could match nothing (cd_cidr_contains). */
	struct cd_ipaddr v4;
	if (c.addr.family == 6 && c.prefix >= 96 && cd_ipaddr_embedded_v4(&c.addr, &v4)) {
		*reterr = "an IPv4-mapped or NAT64 range, which is judged as the IPv4 address "
			  "inside it: write that IPv4 range";
		return -EINVAL;
	}
	*ret = c;
	return 0;
}

static bool prefix_match(const unsigned char *a, const unsigned char *b, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;
	if (memcmp(a, b, full) != 0)
		return false;
	if (rest == 0)
		return true;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (a[full] & mask) == (b[full] & mask);
}

bool cd_cidr_contains(const struct cd_cidr *c, const struct cd_ipaddr *a)
{
	struct cd_ipaddr v4;
	/*
	 * An IPv4-mapped or NAT64 address reaches the IPv4 address inside it,
	 * and the special ranges judge it as that: so do CIDRs, and only IPv4
	 * ones. An IPv6 range (::/0, ::ffff:0:0/96, 64:ff9b::/96) must not
	 * reopen 127.0.0.1 or 169.254.169.254 through that form.
	 */
	if (cd_ipaddr_embedded_v4(a, &v4))
		return c->addr.family == 4 && prefix_match(c->addr.b, v4.b, c->prefix);
	if (c->addr.family == a->family)
		return prefix_match(c->addr.b, a->b, c->prefix);
	return false;
}

const char *cd_ipv4_special(uint32_t a, bool *ret_loopback)
{
	static const struct {
		uint32_t net, mask;
		const char *why;
	} nets[] = {
		{ 0x00000000, 0xff000000, "a \"this network\" address (0.0.0.0/8)" },
		{ 0x0a000000, 0xff000000, "a private address (10.0.0.0/8)" },
		{ 0x64400000, 0xffc00000, "a shared (carrier-grade NAT) address (100.64.0.0/10)" },
		{ 0xa9fe0000, 0xffff0000,
		  "a link-local address (169.254.0.0/16, where cloud metadata services are)" },
		{ 0xac100000, 0xfff00000, "a private address (172.16.0.0/12)" },
		{ 0xc0000000, 0xffffff00, "an IETF protocol address (192.0.0.0/24)" },
		{ 0xc0000200, 0xffffff00, "a documentation address (192.0.2.0/24)" },
		{ 0xc0a80000, 0xffff0000, "a private address (192.168.0.0/16)" },
		{ 0xc6120000, 0xfffe0000, "a benchmarking address (198.18.0.0/15)" },
		{ 0xc6336400, 0xffffff00, "a documentation address (198.51.100.0/24)" },
		{ 0xcb007100, 0xffffff00, "a documentation address (203.0.113.0/24)" },
		{ 0xe0000000, 0xf0000000, "a multicast address (224.0.0.0/4)" },
		{ 0xf0000000, 0xf0000000, "a reserved or broadcast address (240.0.0.0/4)" },
	};
	if (ret_loopback)
		*ret_loopback = (a & 0xff000000) == 0x7f000000;
	if ((a & 0xff000000) == 0x7f000000)
		return "a loopback address (127.0.0.0/8)";
	for (size_t i = 0; i < CD_ARRAY_SIZE(nets); i++)
		if ((a & nets[i].mask) == nets[i].net)
			return nets[i].why;
	return NULL;
}

const char *cd_ipv6_special(const unsigned char *b, bool *ret_loopback)
{
	static const unsigned char zero[16] = { 0 };
	struct cd_ipaddr a = { .family = 6 }, v4;

	memcpy(a.b, b, 16);
	if (cd_ipaddr_embedded_v4(&a, &v4))
		return cd_ipv4_special((uint32_t)v4.b[0] << 24 | (uint32_t)v4.b[1] << 16 |
					       (uint32_t)v4.b[2] << 8 | v4.b[3],
				       ret_loopback);
	if (ret_loopback)
		*ret_loopback = memcmp(b, zero, 15) == 0 && b[15] == 1;
	if (memcmp(b, zero, 15) == 0 && b[15] == 1)
		return "a loopback address (::1)";
	if (memcmp(b, zero, 12) == 0)
		return "an unspecified or IPv4-compatible address (::/96)";
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return "a link-local address (fe80::/10)";
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
		return "a site-local address (fec0::/10)";
	if ((b[0] & 0xfe) == 0xfc)
		return "a unique local address (fc00::/7, where fd00:ec2::254, a cloud metadata "
		       "service, is)";
	if (b[0] == 0xff)
		return "a multicast address (ff00::/8)";
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
		return "a documentation address (2001:db8::/32)";
	if (b[0] == 0x01 && b[1] == 0 && memcmp(b + 2, zero, 6) == 0)
		return "a discard-only address (100::/64)";
	/*
	 * Transition tunnels: a host with a 6to4 or Teredo interface sends these
	 * to the IPv4 address they embed, which may be an internal one.
	 */
	if (b[0] == 0x20 && b[1] == 0x02)
		return "a 6to4 address (2002::/16), which carries an IPv4 address";
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0)
		return "a Teredo address (2001::/32), which carries an IPv4 address";
	/*
	 * Translators of the network's own: where the IPv4 address sits in a
	 * local-use NAT64 prefix depends on its length (RFC 6052), so the
	 * whole prefix is refused; an IPv4-translated address (SIIT) carries
	 * it in its last 32 bits.
	 */
	if (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1)
		return "a local-use NAT64 address (64:ff9b:1::/48), which carries an IPv4 address";
	if (memcmp(b, zero, 8) == 0 && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0)
		return "an IPv4-translated address (::ffff:0:0:0/96), which carries an IPv4 "
		       "address";
	return NULL;
}

const char *cd_ipaddr_special(const struct cd_ipaddr *a, bool *ret_loopback)
{
	if (a->family == 4)
		return cd_ipv4_special((uint32_t)a->b[0] << 24 | (uint32_t)a->b[1] << 16 |
					       (uint32_t)a->b[2] << 8 | a->b[3],
				       ret_loopback);
	return cd_ipv6_special(a->b, ret_loopback);
}
