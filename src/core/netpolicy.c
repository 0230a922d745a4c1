/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/netpolicy.h"
#include "core/util.h"

static const char *const mode_names[CD_NETMODE_COUNT] = {
	[CD_NETMODE_FULL] = "full",
	[CD_NETMODE_LIMITED] = "limited",
};

enum cd_netmode cd_netmode_from_string(const char *s)
{
	for (int i = 0; i < CD_NETMODE_COUNT; i++)
		if (cd_streq(s, mode_names[i]))
			return (enum cd_netmode)i;
	return CD_NETMODE_INVALID;
}

const char *cd_netmode_to_string(enum cd_netmode m)
{
	return m >= 0 && m < CD_NETMODE_COUNT ? mode_names[m] : NULL;
}

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int cd_hostname_normalize(const char *s, size_t n, char **ret, const char **reterr)
{
	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0) {
		*reterr = "an empty host name";
		return -EINVAL;
	}
	if (n > 253) {
		*reterr = "a host name longer than 253 bytes";
		return -EINVAL;
	}
	char *h = cd_xstrndup(s, n);
	size_t label = 0;
	bool digits_only = true;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];
		if (c >= 0x80) {
			free(h);
			*reterr = "a host name that is not ASCII (write it in punycode: xn--...)";
			return -EINVAL;
		}
		if (c >= 'A' && c <= 'Z')
			h[i] = (char)(c - 'A' + 'a');
		if (h[i] == '.') {
			if (label == 0) {
				free(h);
				*reterr = "a host name with an empty label";
				return -EINVAL;
			}
			label = 0;
			digits_only = true;
			continue;
		}
		if (!label_char(h[i])) {
			free(h);
			*reterr = "a host name with a character other than letters, digits, '-', "
				  "'_' and '.'";
			return -EINVAL;
		}
		if (h[i] < '0' || h[i] > '9')
			digits_only = false;
		if (++label > 63) {
			free(h);
			*reterr = "a host name with a label longer than 63 bytes";
			return -EINVAL;
		}
	}
	if (label == 0) {
		free(h);
		*reterr = "a host name with an empty label";
		return -EINVAL;
	}
	if (digits_only) {
		free(h);
		*reterr = "a numeric host name (an IP address is written as a dotted quad or in "
			  "IPv6 form)";
		return -EINVAL;
	}
	*ret = h;
	return 0;
}

int cd_netpolicy_add_domain(struct cd_netpolicy *p, const char *pattern, bool deny,
			    const char **reterr)
{
	const char *prefix = "";
	const char *rest = pattern;
	char *norm = NULL;

	if (cd_streq(pattern, "*")) {
		norm = cd_xstrdup("*");
	} else {
		if (cd_startswith(pattern, "**.")) {
			prefix = "**.";
			rest = pattern + 3;
		} else if (cd_startswith(pattern, "*.")) {
			prefix = "*.";
			rest = pattern + 2;
		}
		if (strchr(rest, '*')) {
			*reterr = "a '*' other than a leading '*.' or '**.' or a bare '*'";
			return -EINVAL;
		}
		if (rest[0] && rest[strlen(rest) - 1] == '.') {
			*reterr = "a pattern ending in '.'";
			return -EINVAL;
		}
		struct cd_ipaddr ip;
		if (cd_ipaddr_parse(rest, &ip) == 0) {
			*reterr = "an IP address (domain patterns match names; use a CIDR)";
			return -EINVAL;
		}
		char *name = NULL;
		if (cd_hostname_normalize(rest, strlen(rest), &name, reterr) < 0)
			return -EINVAL;
		norm = cd_xasprintf("%s%s", prefix, name);
		free(name);
	}
	char ***list = deny ? &p->deny : &p->allow;
	size_t *n = deny ? &p->n_deny : &p->n_allow;
	*list = cd_xreallocarray(*list, *n + 1, sizeof(**list));
	(*list)[(*n)++] = norm;
	return 0;
}

int cd_netpolicy_add_cidr(struct cd_netpolicy *p, const char *s, const char **reterr)
{
	struct cd_cidr c;
	if (cd_cidr_parse(s, &c, reterr) < 0)
		return -EINVAL;
	p->cidrs = cd_xreallocarray(p->cidrs, p->n_cidrs + 1, sizeof(*p->cidrs));
	p->cidrs[p->n_cidrs++] = c;
	return 0;
}

void cd_netpolicy_done(struct cd_netpolicy *p)
{
	for (size_t i = 0; i < p->n_allow; i++)
		free(p->allow[i]);
	for (size_t i = 0; i < p->n_deny; i++)
		free(p->deny[i]);
	free(p->allow);
	free(p->deny);
	free(p->cidrs);
	*p = (struct cd_netpolicy){ 0 };
}

void cd_netpolicy_append(struct cd_netpolicy *dst, const struct cd_netpolicy *src)
{
	dst->allow =
		cd_xreallocarray(dst->allow, dst->n_allow + src->n_allow + 1, sizeof(*dst->allow));
	for (size_t i = 0; i < src->n_allow; i++)
		dst->allow[dst->n_allow++] = cd_xstrdup(src->allow[i]);
	dst->deny = cd_xreallocarray(dst->deny, dst->n_deny + src->n_deny + 1, sizeof(*dst->deny));
	for (size_t i = 0; i < src->n_deny; i++)
		dst->deny[dst->n_deny++] = cd_xstrdup(src->deny[i]);
	dst->cidrs =
		cd_xreallocarray(dst->cidrs, dst->n_cidrs + src->n_cidrs + 1, sizeof(*dst->cidrs));
	for (size_t i = 0; i < src->n_cidrs; i++)
		dst->cidrs[dst->n_cidrs++] = src->cidrs[i];
}

int cd_netpolicy_check(const struct cd_netpolicy *p, const char **reterr)
{
	if (p->socks5 && p->mode == CD_NETMODE_LIMITED) {
		*reterr = "SOCKS5 carries only tunnels, which proxy mode limited refuses (plain "
			  "HTTP GET, HEAD and OPTIONS only): use proxy mode full, or leave SOCKS5 "
			  "off";
		return -EINVAL;
	}
	return 0;
}

/* Whether name is a strict subdomain of base. */
static bool subdomain_of(const char *name, const char *base)
{
	size_t n = strlen(name), b = strlen(base);
	return n > b + 1 && name[n - b - 1] == '.' && memcmp(name + n - b, base, b) == 0;
}

bool cd_domain_pattern_matches(const char *pattern, const char *name)
{
	if (cd_streq(pattern, "*"))
		return true;
	if (cd_startswith(pattern, "**."))
		return cd_streq(name, pattern + 3) || subdomain_of(name, pattern + 3);
	if (cd_startswith(pattern, "*."))
		return subdomain_of(name, pattern + 2);
	return cd_streq(name, pattern);
}

bool cd_netpolicy_allows_name(const struct cd_netpolicy *p, const char *name, char **ret_rule)
{
	for (size_t i = 0; i < p->n_deny; i++)
		if (cd_domain_pattern_matches(p->deny[i], name)) {
			*ret_rule = cd_xasprintf("deny-domain %s", p->deny[i]);
			return false;
		}
	for (size_t i = 0; i < p->n_allow; i++)
		if (cd_domain_pattern_matches(p->allow[i], name)) {
			*ret_rule = cd_xasprintf("allow-domain %s", p->allow[i]);
			return true;
		}
	*ret_rule = cd_xstrdup(p->n_allow == 0 ? "no allow-domain (an empty allow list is no "
						 "network)"
					       : "no allow-domain pattern matches");
	return false;
}

const struct cd_cidr *cd_netpolicy_cidr_for(const struct cd_netpolicy *p, const struct cd_ipaddr *a)
{
	for (size_t i = 0; i < p->n_cidrs; i++)
		if (cd_cidr_contains(&p->cidrs[i], a))
			return &p->cidrs[i];
	return NULL;
}
