/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The OS-free half of the managed network's fence: the proxy endpoint a
 * relay may connect to, and the proxy variables the command gets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "sandbox/linux/plan.h"

#define RELAY_URL      "http://" CD_RELAY_ADDR ":" CD_RELAY_PORT_STR
#define RELAY_SOCKS    "socks5h://" CD_RELAY_ADDR ":" CD_RELAY_PORT_STR
#define NO_PROXY_VALUE "localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"

/*
 * Codex's executor-launched proxy contract (exec-server reference 4.6; the
 * list of its network-proxy crate): every proxy variable, upper and lower
 * case where tools read both, names the relay. With SOCKS5 on, ALL_PROXY,
 * all_proxy, FTP_PROXY and ftp_proxy carry the socks5h:// URL (as Codex
 * sets them), else the HTTP URL. One relay port serves both: cordon's
 * proxy tells SOCKS5 from HTTP by the first byte (5 is no HTTP method
 * character), so the fence opens nothing more for SOCKS5. Local binding:
 * the command may listen inside its own namespace only, which nothing
 * outside reaches; Codex's default (0) says not to count on it.
 */
const struct cd_env_pair cd_managed_proxy_env[] = {
	{ "CODEX_NETWORK_PROXY_ACTIVE", "1", NULL },
	{ "CODEX_NETWORK_ALLOW_LOCAL_BINDING", "0", NULL },
	{ "HTTP_PROXY", RELAY_URL, NULL },
	{ "HTTPS_PROXY", RELAY_URL, NULL },
	{ "http_proxy", RELAY_URL, NULL },
	{ "https_proxy", RELAY_URL, NULL },
	{ "YARN_HTTP_PROXY", RELAY_URL, NULL },
	{ "YARN_HTTPS_PROXY", RELAY_URL, NULL },
	{ "npm_config_http_proxy", RELAY_URL, NULL },
	{ "npm_config_https_proxy", RELAY_URL, NULL },
	{ "npm_config_proxy", RELAY_URL, NULL },
	{ "NPM_CONFIG_HTTP_PROXY", RELAY_URL, NULL },
	{ "NPM_CONFIG_HTTPS_PROXY", RELAY_URL, NULL },
	{ "NPM_CONFIG_PROXY", RELAY_URL, NULL },
	{ "BUNDLE_HTTP_PROXY", RELAY_URL, NULL },
	{ "BUNDLE_HTTPS_PROXY", RELAY_URL, NULL },
	{ "PIP_PROXY", RELAY_URL, NULL },
	{ "DOCKER_HTTP_PROXY", RELAY_URL, NULL },
	{ "DOCKER_HTTPS_PROXY", RELAY_URL, NULL },
	{ "WS_PROXY", RELAY_URL, NULL },
	{ "WSS_PROXY", RELAY_URL, NULL },
	{ "ws_proxy", RELAY_URL, NULL },
	{ "wss_proxy", RELAY_URL, NULL },
	{ "ALL_PROXY", RELAY_URL, RELAY_SOCKS },
	{ "all_proxy", RELAY_URL, RELAY_SOCKS },
	{ "FTP_PROXY", RELAY_URL, RELAY_SOCKS },
	{ "ftp_proxy", RELAY_URL, RELAY_SOCKS },
	{ "NO_PROXY", NO_PROXY_VALUE, NULL },
	{ "no_proxy", NO_PROXY_VALUE, NULL },
	{ "npm_config_noproxy", NO_PROXY_VALUE, NULL },
	{ "NPM_CONFIG_NOPROXY", NO_PROXY_VALUE, NULL },
	{ "YARN_NO_PROXY", NO_PROXY_VALUE, NULL },
	{ "BUNDLE_NO_PROXY", NO_PROXY_VALUE, NULL },
	{ "ELECTRON_GET_USE_PROXY", "true", NULL },
	{ "NODE_USE_ENV_PROXY", "1", NULL },
	{ NULL, NULL, NULL },
};

static int bad(char **reterr, const char *s, const char *why)
{
	if (reterr)
		*reterr = cd_xasprintf(
			"invalid proxy endpoint '%s': %s (expected unix:/ABSOLUTE/PATH "
			"or tcp:A.B.C.D:PORT)",
			s, why);
	return -EINVAL;
}

/* A decimal number of 1 to maxdigits digits, no sign, no leading zero (but "0"). */
static bool parse_num(const char **p, unsigned maxdigits, unsigned long *ret)
{
	const char *q = *p;
	unsigned long v = 0;
	unsigned n = 0;

	while (*q >= '0' && *q <= '9' && n < maxdigits + 1) {
		v = v * 10 + (unsigned long)(*q - '0');
		q++;
		n++;
	}
	if (n == 0 || n > maxdigits || (n > 1 && **p == '0'))
		return false;
	*p = q;
	*ret = v;
	return true;
}

int cd_proxy_endpoint_parse(const char *s, struct cd_proxy_endpoint *ret, char **reterr)
{
	struct cd_proxy_endpoint e;

	memset(&e, 0, sizeof(e));
	if (reterr)
		*reterr = NULL;
	if (!s)
		return bad(reterr, "", "empty");
	if (strncmp(s, "unix:", 5) == 0) {
		const char *path = s + 5;
		size_t len = strlen(path);

		if (path[0] != '/')
			return bad(reterr, s, "the socket path must be absolute");
		if (len >= sizeof(e.path))
			return bad(reterr, s, "the socket path is longer than 107 bytes");
		e.is_unix = true;
		memcpy(e.path, path, len + 1);
	} else if (strncmp(s, "tcp:", 4) == 0) {
		const char *p = s + 4;
		unsigned long v;

		for (int i = 0; i < 4; i++) {
			if (!parse_num(&p, 3, &v) || v > 255)
				return bad(reterr, s, "not a dotted IPv4 address");
			e.addr[i] = (uint8_t)v;
			if (*p != (i < 3 ? '.' : ':'))
				return bad(reterr, s,
					   i < 3 ? "not a dotted IPv4 address"
						 : "no :PORT after the address");
			p++;
		}
		if (!parse_num(&p, 5, &v) || v == 0 || v > 65535 || *p)
			return bad(reterr, s, "the port must be 1 to 65535");
		e.port = (uint16_t)v;
	} else {
		return bad(reterr, s, "unknown kind");
	}
	*ret = e;
	return 0;
}

char **cd_managed_proxy_env_at(uint16_t port, bool socks5)
{
	static const char relay[] = CD_RELAY_ADDR ":" CD_RELAY_PORT_STR;
	char **env = NULL;
	char *at_port = cd_xasprintf("127.0.0.1:%u", (unsigned)port);

	for (const struct cd_env_pair *e = cd_managed_proxy_env; e->name; e++) {
		const char *v = cd_env_pair_value(e, socks5);
		const char *at = strstr(v, relay);
		if (at)
			cd_strv_push_take(&env, cd_xasprintf("%s=%.*s%s%s", e->name, (int)(at - v),
							     v, at_port, at + strlen(relay)));
		else
			cd_strv_push_take(&env, cd_xasprintf("%s=%s", e->name, v));
	}
	free(at_port);
	return env;
}
