/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `cordon proxy`: the managed network's filtering proxy alone, for the
 * tests and the benchmark (internal: not in `cordon --help`; cordon run
 * and cordon serve start the same component themselves). Prints the
 * address it listens on ("IP:PORT", one line on stdout) once it accepts,
 * then serves until killed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "core/netpolicy.h"
#include "net/proxy.h"
#include "own-proxy.h"
#include "sandbox/linux/confine.h"
#include "serve/loop.h"
#include "serve/workq.h"
#include "shared/log.h"

enum {
	OPT_HELP = 1,
	OPT_LISTEN,
	OPT_ALLOW_DOMAIN,
	OPT_DENY_DOMAIN,
	OPT_ALLOW_CIDR,
	OPT_MODE,
	OPT_SOCKS5,
	OPT_JSON_AUDIT,
	OPT_MAX_CONNECTIONS,
	OPT_MAX_HEADER,
	OPT_HEADER_TIMEOUT,
	OPT_CONNECT_TIMEOUT,
	OPT_IDLE_TIMEOUT,
	OPT_LISTEN_FD,
	OPT_CTL_FD,
	OPT_AUDIT_TAG,
};

const struct cd_cli_opt cd_proxy_options[] = {
	{ "help", 'h', false, OPT_HELP },
	{ "listen", 0, true, OPT_LISTEN },
	{ "allow-domain", 0, true, OPT_ALLOW_DOMAIN },
	{ "deny-domain", 0, true, OPT_DENY_DOMAIN },
	{ "allow-cidr", 0, true, OPT_ALLOW_CIDR },
	{ "mode", 0, true, OPT_MODE },
	{ "socks5", 0, false, OPT_SOCKS5 },
	{ "json-audit", 0, false, OPT_JSON_AUDIT },
	{ "max-connections", 0, true, OPT_MAX_CONNECTIONS },
	{ "max-header-bytes", 0, true, OPT_MAX_HEADER },
	{ "header-timeout-ms", 0, true, OPT_HEADER_TIMEOUT },
	{ "connect-timeout-ms", 0, true, OPT_CONNECT_TIMEOUT },
	{ "idle-timeout-ms", 0, true, OPT_IDLE_TIMEOUT },
	{ "listen-fd", 0, true, OPT_LISTEN_FD },
	{ "ctl-fd", 0, true, OPT_CTL_FD },
	{ "audit-tag", 0, true, OPT_AUDIT_TAG },
	{ NULL, 0, false, 0 },
};

static void proxy_help(void)
{
	fputs("Usage: cordon proxy [--listen IP:PORT] [OPTIONS]\n"
	      "\n"
	      "Internal: the managed network's filtering proxy alone (for tests and\n"
	      "benchmarks). Prints IP:PORT once listening; serves until killed.\n"
	      "\n"
	      "Options:\n"
	      "  --listen IP:PORT          where to listen (default 127.0.0.1:0)\n"
	      "  --allow-domain PATTERN    allow a name: NAME, *.NAME (subdomains),\n"
	      "                            **.NAME (the name and subdomains), * (any)\n"
	      "  --deny-domain PATTERN     deny a name (wins over allow)\n"
	      "  --allow-cidr ADDR[/LEN]   allow addresses in a range (IP literals,\n"
	      "                            loopback, private...)\n"
	      "  --mode full|limited       limited: GET, HEAD, OPTIONS on plain HTTP only\n"
	      "  --socks5                  accept SOCKS5 clients too\n"
	      "  --json-audit              audit lines as JSON on stdout\n"
	      "  --audit-tag TEXT          whose proxy, in every audit line (printable\n"
	      "                            ASCII, at most 200 bytes)\n"
	      "  --max-connections N       clients at once (default 512)\n"
	      "  --max-header-bytes N      request head size (default 32768)\n"
	      "  --header-timeout-ms N     default 10000\n"
	      "  --connect-timeout-ms N    default 10000\n"
	      "  --idle-timeout-ms N       default 300000\n"
	      "  --listen-fd N             serve this inherited listening socket instead\n"
	      "                            (nothing is printed)\n"
	      "  --ctl-fd N                exit when this inherited descriptor reaches its\n"
	      "                            end (the one who started it is done, or gone)\n"
	      "  -h, --help                show this help\n"
	      "\n"
	      "CORDON_TEST_PROXY_RESOLVE=NAME=ADDR[+ADDR],... replaces DNS (tests).\n",
	      stdout);
}

/* The end of --ctl-fd (or anything written on it): whoever started us is done. */
static void on_ctl(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	char buf[64];
	(void)ev;
	(void)data;
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	cd_loop_quit(l);
}

static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[64];
	const char *colon;
	const char *h = s;
	size_t hl;
	uint64_t port;

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= sizeof(host) || cd_parse_u64(colon + 1, &port) < 0 || port > 65535)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
		return 0;
	}
	return -EINVAL;
}

static int parse_uint(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *ret)
{
	if (cd_parse_u64(arg, ret) < 0 || *ret < min || *ret > max) {
		cd_cli_usage_error("proxy", "--%s: '%s' is not a number in %llu..%llu", opt, arg,
				   (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	return 0;
}

int cd_cmd_proxy(int argc, char **argv)
{
	struct cd_cli_args a = { .cmd = "proxy", .argc = argc, .argv = argv, .i = 1 };
	struct cd_netpolicy pol = { 0 };
	struct cd_proxy_opts o;
	const char *listen_at = "127.0.0.1:0";
	int listen_fd = -1, ctl_fd = -1;
	const char *err = NULL;
	uint64_t v;
	int id, rc = 125;
	const char *arg;

	cd_log_detect_journal();
	cd_proxy_opts_init(&o);
	while ((id = cd_cli_next(&a, cd_proxy_options, &arg)) > 0) {
		switch (id) {
		case OPT_HELP:
			proxy_help();
			return 0;
		case OPT_LISTEN:
			listen_at = arg;
			break;
		case OPT_ALLOW_DOMAIN:
		case OPT_DENY_DOMAIN:
			if (cd_netpolicy_add_domain(&pol, arg, id == OPT_DENY_DOMAIN, &err) < 0) {
				cd_cli_usage_error("proxy", "--%s '%s': %s",
						   id == OPT_DENY_DOMAIN ? "deny-domain"
									 : "allow-domain",
						   arg, err);
				goto usage;
			}
			break;
		case OPT_ALLOW_CIDR:
			if (cd_netpolicy_add_cidr(&pol, arg, &err) < 0) {
				cd_cli_usage_error("proxy", "--allow-cidr '%s': %s", arg, err);
				goto usage;
			}
			break;
		case OPT_MODE:
			pol.mode = cd_netmode_from_string(arg);
			if (pol.mode == CD_NETMODE_INVALID) {
				cd_cli_usage_error("proxy", "--mode '%s': full or limited", arg);
				goto usage;
			}
			break;
		case OPT_SOCKS5:
			o.socks5 = true;
			break;
		case OPT_JSON_AUDIT:
			o.json_audit = true;
			break;
		case OPT_AUDIT_TAG: {
			/* It goes into log lines as it is: nothing a terminal or a parser reads twice. */
			size_t n = strlen(arg);
			bool ok = n > 0 && n <= 200;
			for (size_t i = 0; ok && i < n; i++)
				ok = arg[i] >= 0x20 && arg[i] < 0x7f;
			if (!ok) {
				cd_cli_usage_error(
					"proxy", "--audit-tag: 1 to 200 bytes of printable ASCII");
				goto usage;
			}
			o.audit_tag = arg;
			break;
		}
		case OPT_MAX_CONNECTIONS:
			if (parse_uint("max-connections", arg, 1, 1000000, &v) < 0)
				goto usage;
			o.max_conns = (unsigned)v;
			break;
		case OPT_MAX_HEADER:
			if (parse_uint("max-header-bytes", arg, 1024, 1 << 20, &v) < 0)
				goto usage;
			o.max_header = (size_t)v;
			break;
		case OPT_HEADER_TIMEOUT:
		case OPT_CONNECT_TIMEOUT:
		case OPT_IDLE_TIMEOUT:
			if (parse_uint(id == OPT_HEADER_TIMEOUT	   ? "header-timeout-ms"
				       : id == OPT_CONNECT_TIMEOUT ? "connect-timeout-ms"
								   : "idle-timeout-ms",
				       arg, 1, 86400000, &v) < 0)
				goto usage;
			if (id == OPT_HEADER_TIMEOUT)
				o.header_timeout_ms = (unsigned)v;
			else if (id == OPT_CONNECT_TIMEOUT)
				o.connect_timeout_ms = (unsigned)v;
			else
				o.idle_timeout_ms = (unsigned)v;
			break;
		case OPT_LISTEN_FD:
		case OPT_CTL_FD:
			/* Past stdio: 0..2 keep their meaning. */
			if (parse_uint(id == OPT_LISTEN_FD ? "listen-fd" : "ctl-fd", arg, 3,
				       INT_MAX, &v) < 0)
				goto usage;
			if (id == OPT_LISTEN_FD)
				listen_fd = (int)v;
			else
				ctl_fd = (int)v;
			break;
		default:
			goto usage;
		}
	}
	if (id < 0)
		goto usage;
	if (listen_fd >= 0 && listen_fd == ctl_fd) {
		cd_cli_usage_error("proxy", "--listen-fd and --ctl-fd name the same descriptor");
		goto usage;
	}
	if (a.i < argc) {
		cd_cli_usage_error("proxy", "unexpected argument '%s'", argv[a.i]);
		goto usage;
	}
	struct sockaddr_storage ss;
	socklen_t len;
	if (parse_listen(listen_at, &ss, &len) < 0) {
		cd_cli_usage_error("proxy", "--listen '%s': IP:PORT expected", listen_at);
		goto usage;
	}
	o.policy = &pol;
	o.resolve_map = getenv("CORDON_TEST_PROXY_RESOLVE");

	/* as many descriptors as allowed: two per client connection */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}

	int fd;
	if (listen_fd >= 0) {
		/* Inherited (cordon serve's networkProxy): it listens already. */
		int type = 0, acc = 0;
		socklen_t tl = sizeof(type), al = sizeof(acc);
		fd = listen_fd;
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 ||
		    type != SOCK_STREAM || !acc || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
		    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
			cd_log_error("proxy: --listen-fd %d: not a listening stream socket%s%s", fd,
				     errno ? ": " : "", errno ? strerror(errno) : "");
			goto out;
		}
	} else {
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		int one = 1;
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 4096) < 0) {
			cd_log_error("proxy: cannot listen on %s: %s", listen_at, strerror(errno));
			goto out;
		}
	}
	if (ctl_fd >= 0 && fcntl(ctl_fd, F_SETFD, FD_CLOEXEC) < 0) {
		cd_log_error("proxy: --ctl-fd %d: %s", ctl_fd, strerror(errno));
		goto out;
	}
	if (ctl_fd >= 0)
		(void)prctl(PR_SET_NAME, "cordon-proxy", 0, 0, 0);
	struct cd_loop *l = cd_loop_new(CD_LOOP_EPOLL);
	struct cd_workq *q = l ? cd_workq_new(l, 8) : NULL;
	struct cd_proxy *p = q ? cd_proxy_new(l, q, fd, &o) : NULL;
	struct cd_watch *w = NULL;
	if (p && ctl_fd >= 0)
		w = cd_loop_add_fd(l, ctl_fd, CD_LOOP_IN, on_ctl, NULL);
	if (!p || (ctl_fd >= 0 && !w)) {
		cd_log_error("proxy: cannot start: %s", strerror(errno));
		goto out;
	}
	/*
	 * Confined as cordon run's own proxy is (own-proxy.h), so that the
	 * tests and the benchmark see the proxy that managed runs get. Not in
	 * a sanitizer build: LeakSanitizer's check at exit needs ptrace and
	 * /proc, which the confinement refuses, and this is where the suite
	 * checks the proxy's code for leaks (cordon run's proxy, which ends
	 * with _exit and so has no leak check, is confined in every build).
	 */
#if !defined(__SANITIZE_ADDRESS__)
	struct cd_confine_opts co = {
		.drop_user = geteuid() == 0,
		.uid = CD_OWN_PROXY_UID,
		.gid = CD_OWN_PROXY_GID,
		.read_files = cd_confine_resolver_files,
	};
	char *why = NULL;
	unsigned abi;
	if (cd_confine_self(&co, &abi, &why) < 0) {
		cd_log_error("proxy: cannot confine itself: %s", why);
		free(why);
		cd_proxy_free(p);
		cd_workq_free(q, 1000, "proxy lookups");
		cd_loop_free(l);
		goto out;
	}
#endif
	if (listen_fd >= 0)
		goto serve;
	len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	char ip[INET6_ADDRSTRLEN] = "";
	unsigned port;
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		printf("%s:%u\n", ip, port);
	} else {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof(ip));
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		printf("[%s]:%u\n", ip, port);
	}
	fflush(stdout);
serve:
	rc = cd_loop_run(l) < 0 ? 125 : 0;
	if (w)
		cd_loop_del_fd(l, w);
	cd_proxy_free(p);
	cd_workq_free(q, 1000, "proxy lookups");
	cd_loop_free(l);
out:
	if (fd >= 0)
		close(fd);
	cd_netpolicy_done(&pol);
	return rc;
usage:
	cd_netpolicy_done(&pol);
	return CD_EXIT_USAGE;
}
