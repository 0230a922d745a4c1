/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * enforceManagedNetwork without networkProxy (reference 4.5): the child's
 * proxy variables name the loopback proxy it must go through. cordon's
 * fence relays to one endpoint, so every such variable must name the same
 * one; each is rewritten to the relay inside the sandbox, keeping its
 * scheme and path. No proxy variable, none parseable or several distinct
 * endpoints: refused, never run with an open network.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"
#include "sandbox/linux/plan.h"
#include "serve/managed-route.h"

/* The keys Codex's proxy routing looks at, matched case-insensitively. */
static const char *const proxy_keys[] = {
	"HTTP_PROXY",
	"HTTPS_PROXY",
	"ALL_PROXY",
	"FTP_PROXY",
	"YARN_HTTP_PROXY",
	"YARN_HTTPS_PROXY",
	"NPM_CONFIG_HTTP_PROXY",
	"NPM_CONFIG_HTTPS_PROXY",
	"NPM_CONFIG_PROXY",
	"BUNDLE_HTTP_PROXY",
	"BUNDLE_HTTPS_PROXY",
	"PIP_PROXY",
	"DOCKER_HTTP_PROXY",
	"DOCKER_HTTPS_PROXY",
};

#define ATTRIBUTION_VAR "CODEX_NETWORK_PROXY_ATTRIBUTION"

static bool is_proxy_key(const char *kv, size_t n)
{
	return cd_name_in(kv, n, proxy_keys, CD_ARRAY_SIZE(proxy_keys));
}

/* A decimal port 1..65535 of exactly n bytes. */
static int parse_port(const char *s, size_t n, unsigned *ret)
{
	unsigned v = 0;
	if (n == 0 || n > 5)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* A dotted IPv4 address in 127.0.0.0/8, exactly n bytes. */
static bool is_loopback_v4(const char *s, size_t n, uint8_t ret[4])
{
	size_t i = 0;
	for (int part = 0; part < 4; part++) {
		unsigned v = 0, digits = 0;
		while (i < n && s[i] >= '0' && s[i] <= '9' && digits < 3) {
			v = v * 10 + (unsigned)(s[i] - '0');
			i++;
			digits++;
		}
		if (!digits || v > 255)
			return false;
		ret[part] = (uint8_t)v;
		if (part < 3) {
			if (i >= n || s[i] != '.')
				return false;
			i++;
		}
	}
	return i == n && ret[0] == 127;
}

/*
 * "[scheme://][user[:pw]@]host:port[/path]" with a loopback IPv4 host or
 * "localhost": the address, the port and where the authority starts and
 * ends in value. -EINVAL otherwise (IPv6 included: the relay speaks IPv4).
 */
static int parse_loopback(const char *value, uint8_t addr[4], unsigned *port, size_t *auth_start,
			  size_t *auth_end)
{
	const char *p = strstr(value, "://");
	size_t start = p ? (size_t)(p - value) + 3 : 0;
	size_t end = start + strcspn(value + start, "/?#");
	const char *at = memchr(value + start, '@', end - start);
	size_t host = at ? (size_t)(at - value) + 1 : start;
	const char *colon = NULL;
	for (size_t i = host; i < end; i++)
		if (value[i] == ':')
			colon = value + i;
	if (!colon || value[host] == '[')
		return -EINVAL;
	size_t hlen = (size_t)(colon - value) - host;
	if (parse_port(colon + 1, end - (size_t)(colon + 1 - value), port) < 0)
		return -EINVAL;
	if (hlen == 9 && strncasecmp(value + host, "localhost", 9) == 0) {
		addr[0] = 127;
		addr[1] = addr[2] = 0;
		addr[3] = 1;
	} else if (!is_loopback_v4(value + host, hlen, addr)) {
		return -EINVAL;
	}
	*auth_start = start;
	*auth_end = end;
	return 0;
}

int cd_managed_route(char **envp, bool relay, char **ret_endpoint, char **err)
{
	bool any = false, have = false;
	uint8_t addr[4] = { 0 };
	unsigned port = 0;
	char *first = NULL;

	for (char **e = envp; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || !is_proxy_key(*e, (size_t)(eq - *e)))
			continue;
		any = true;
		uint8_t a[4];
		unsigned p;
		size_t s, t;
		if (parse_loopback(eq + 1, a, &p, &s, &t) < 0)
			continue;
		if (have && (memcmp(a, addr, 4) != 0 || p != port)) {
			*err = cd_xasprintf("managed proxy mode: the proxy environment variables "
					    "name more than one loopback proxy (%s and %.*s); "
					    "cordon relays to one: make them name the same proxy",
					    first, (int)(t - s), eq + 1 + s);
			free(first);
			return -EINVAL;
		}
		if (!have)
			first = cd_xasprintf("%.*s", (int)(t - s), eq + 1 + s);
		have = true;
		memcpy(addr, a, 4);
		port = p;
	}
	free(first);
	if (!any) {
		*err = cd_xstrdup("managed proxy mode requires proxy environment variables");
		return -EINVAL;
	}
	if (!have) {
		*err = cd_xstrdup("managed proxy mode requires parseable loopback proxy endpoints");
		return -EINVAL;
	}

	*ret_endpoint =
		cd_xasprintf("tcp:%u.%u.%u.%u:%u", addr[0], addr[1], addr[2], addr[3], port);
	if (!relay)
		return 0;
	/* Every loopback variable now names the relay; the others stay (they reach nothing). */
	for (char **e = envp; *e; e++) {
		const char *eq = strchr(*e, '=');
		uint8_t a[4];
		unsigned p;
		size_t s, t;
		if (!eq || !is_proxy_key(*e, (size_t)(eq - *e)) ||
		    parse_loopback(eq + 1, a, &p, &s, &t) < 0)
			continue;
		size_t k = (size_t)(eq - *e) + 1;
		char *nv = cd_xasprintf("%.*s%.*s" CD_RELAY_ADDR ":" CD_RELAY_PORT_STR "%s", (int)k,
					*e, (int)s, eq + 1, eq + 1 + t);
		free(*e);
		*e = nv;
	}
	/* Cordon's relay frames no attribution header: the variable is not passed on. */
	char **w = envp;
	for (char **e = envp; *e; e++) {
		if (strncmp(*e, ATTRIBUTION_VAR "=", sizeof(ATTRIBUTION_VAR)) == 0) {
			free(*e);
			continue;
		}
		*w++ = *e;
	}
	*w = NULL;
	return 0;
}
