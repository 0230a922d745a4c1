/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-policy.h"
#include "sandbox/backend.h"
#include "sandbox/seatbelt/sbpl.h"
#include "serve/fs-ops.h"
#include "serve/intent.h"
#include "serve/sd-daemon.h"
#include "serve/server.h"
#include "shared/log.h"

/* The event loops, and the default: epoll, or poll where there is none (macOS). */
#ifdef __APPLE__
#define LOOP_DEFAULT "poll"
#define LOOP_USAGE   "poll"
#define LOOP_OPTION  "  --loop poll             "
#else
#define LOOP_DEFAULT "epoll"
#define LOOP_USAGE   "epoll|poll"
#define LOOP_OPTION  "  --loop epoll|poll       "
#endif

enum {
	OPT_HELP = 1,
	OPT_LISTEN,
	OPT_LOOP,
	OPT_MAX_PROCESSES,
	OPT_PID_NAMESPACE,
	OPT_VERBOSE,
	OPT_AUTH_TOKEN_FILE,
	OPT_INSECURE_NO_AUTH,
	OPT_MAX_CONNECTIONS,
	OPT_MAX_SESSIONS,
	OPT_MAX_QUEUED,
	OPT_SESSION_TTL,
	OPT_PING_INTERVAL,
	OPT_STALL_TIMEOUT,
	OPT_UNIX_GROUP,
	OPT_PID_FILE,
	OPT_ALLOW_LOCAL_USERS,
	OPT_ALLOW_LOCAL_GROUP,
	OPT_DEFAULT_LIMITS,
	OPT_MAX_LIMITS,
	OPT_MAX_MEMORY,
	OPT_DETACHED_OUTPUT,
	OPT_RETENTION,
	OPT_DURABLE_WRITES,
	OPT_ALLOW_HTTP_REQUEST,
	OPT_HTTP_ALLOW_LOOPBACK,
};

const struct cd_cli_opt cd_serve_options[] = {
	{ "help", 'h', false, OPT_HELP },
	{ "listen", 0, true, OPT_LISTEN },
	{ "loop", 0, true, OPT_LOOP },
	{ "max-processes", 0, true, OPT_MAX_PROCESSES },
	{ "pid-namespace", 0, true, OPT_PID_NAMESPACE },
	{ "verbose", 'v', false, OPT_VERBOSE },
	{ "auth-token-file", 0, true, OPT_AUTH_TOKEN_FILE },
	{ "insecure-no-auth", 0, false, OPT_INSECURE_NO_AUTH },
	{ "max-connections", 0, true, OPT_MAX_CONNECTIONS },
	{ "max-sessions", 0, true, OPT_MAX_SESSIONS },
	{ "max-queued-bytes", 0, true, OPT_MAX_QUEUED },
	{ "session-ttl", 0, true, OPT_SESSION_TTL },
	{ "ping-interval", 0, true, OPT_PING_INTERVAL },
	{ "stall-timeout", 0, true, OPT_STALL_TIMEOUT },
	{ "unix-group", 0, true, OPT_UNIX_GROUP },
	{ "pid-file", 0, true, OPT_PID_FILE },
	{ "allow-local-users", 0, false, OPT_ALLOW_LOCAL_USERS },
	{ "allow-local-group", 0, true, OPT_ALLOW_LOCAL_GROUP },
	{ "default-limits", 0, true, OPT_DEFAULT_LIMITS },
	{ "max-limits", 0, true, OPT_MAX_LIMITS },
	{ "max-memory", 0, true, OPT_MAX_MEMORY },
	{ "detached-output", 0, true, OPT_DETACHED_OUTPUT },
	{ "retention", 0, true, OPT_RETENTION },
	{ "durable-writes", 0, false, OPT_DURABLE_WRITES },
	{ "allow-http-request", 0, false, OPT_ALLOW_HTTP_REQUEST },
	{ "http-allow-loopback", 0, false, OPT_HTTP_ALLOW_LOOPBACK },
	{ "allow-degraded", 0, true, CD_OPT_ALLOW_DEGRADED },
	{ "min-landlock-abi", 0, true, CD_OPT_MIN_LANDLOCK_ABI },
	{ NULL, 0, false, 0 },
};

static void serve_help(void)
{
	printf("Usage: cordon serve [--listen stdio | ws://IP:PORT | unix:PATH]\n"
	       "                    [--loop " LOOP_USAGE "] [--max-processes N]\n"
	       "                    [--pid-namespace=auto|always|never]\n"
	       "                    [--auth-token-file FILE] [--insecure-no-auth]\n"
	       "                    [--allow-local-users] [--allow-local-group GROUP]\n"
	       "                    [--unix-group GROUP] [--max-connections N]\n"
	       "                    [--max-sessions N] [--max-queued-bytes SIZE]\n"
	       "                    [--max-memory SIZE] [--detached-output pause|drop]\n"
	       "                    [--session-ttl TIME] [--retention TIME]\n"
	       "                    [--ping-interval TIME] [--durable-writes]\n"
	       "                    [--stall-timeout TIME] [--pid-file FILE]\n"
	       "                    [--allow-degraded=FEATURE] [--min-landlock-abi N]\n"
	       "                    [--default-limits LIST] [--max-limits LIST]\n"
	       "                    [--allow-http-request [--http-allow-loopback]]\n"
	       "                    [-v]\n"
	       "\n"
	       "Serve the Codex exec-server protocol: JSON-RPC (without the \"jsonrpc\"\n"
	       "member), at most 64 MiB and 262144 JSON values per message. Clients start,\n"
	       "read, write to, signal and terminate processes; a process/start with a\n"
	       "\"sandbox\" intent runs the command under the same Landlock, seccomp and\n"
	       "namespace sandbox that `cordon run` builds from a profile, and is refused\n"
	       "(-32602) before anything runs when that sandbox cannot be enforced.\n"
	       "\n"
	       "Methods: initialize (then the initialized notification), environment/info,\n"
	       "environment/status, cordon/status (the server's memory budget, connections,\n"
	       "processes and descriptors), process/start, process/read (long poll with\n"
	       "waitMs), process/write, process/signal, process/terminate, fs/*,\n"
	       "http/request (only with --allow-http-request).\n"
	       "Notifications: process/output, process/exited, process/closed,\n"
	       "http/request/bodyDelta. Closed\n"
	       "processes are kept for 30 s (--retention), and while their session can be\n"
	       "resumed. See cordon-protocol(7).\n"
	       "\n"
	       "Transports:\n"
	       "  stdio           one connection, one message per line; its end (or a line\n"
	       "                  over the limit) kills every process and exits 0\n"
	       "  ws://IP:PORT    WebSocket, one message per frame; port 0 picks one, and\n"
	       "                  the bound URL is the first line on stdout; GET /readyz is\n"
	       "                  200; a request with an Origin header is refused (403).\n"
	       "                  On a loopback address without a token, the kernel is\n"
	       "                  asked who owns each client's socket (sock_diag): only\n"
	       "                  our uid (or --allow-local-group) gets in, others and\n"
	       "                  owners that cannot be told are refused (403)\n"
	       "  unix:PATH       a unix socket (mode 0600 in a directory of ours), one\n"
	       "                  message per line; peers must have our uid (or the group)\n"
	       "Under systemd, a listening socket it passes (LISTEN_FDS; --listen is then\n"
	       "refused) is served by its family, unix or ws, with the same rules, and\n"
	       "NOTIFY_SOCKET gets READY=1 and STOPPING=1: see cordon-serve(1), SYSTEMD.\n"
	       "Sandboxed processes of this server (or of another cordon) are refused as\n"
	       "clients, and the server's socket and token file are hidden from them.\n"
	       "On ws and unix many clients share one server: when a connection drops its\n"
	       "session detaches, keeps recording output, and ends (its processes killed)\n"
	       "unless an initialize with resumeSessionId attaches it within the TTL.\n"
	       "SIGTERM, SIGINT or SIGHUP stop accepting, kill every process of every\n"
	       "session, close the connections and exit 0. A server running as root is\n"
	       "the init of its own pid namespace: if it is killed, even with SIGKILL, the\n"
	       "kernel kills every process it started, their descendants included.\n"
	       "\n"
	       "Options:\n"
	       "  --listen URL            stdio (default), ws://IP:PORT or unix:PATH\n"
	       "  --auth-token-file FILE  ws: require \"Authorization: Bearer TOKEN\" on the\n"
	       "                          upgrade (401 otherwise); TOKEN is the file's first\n"
	       "                          line. Required for an address that is not loopback\n"
	       "  --insecure-no-auth      ws: allow a non-loopback address without a token\n"
	       "  --allow-local-users     ws on loopback: admit every user of this host, not\n"
	       "                          only our uid\n"
	       "  --allow-local-group GROUP  ws on loopback: admit the members of GROUP too\n"
	       "                          (by the user and group databases)\n"
	       "  --unix-group GROUP      unix: the socket is mode 0660 and group GROUP, and\n"
	       "                          its members may connect too\n"
	       "  --max-connections N     connections at once (default %u); more are refused\n"
	       "  --max-sessions N        sessions, detached ones included (default %u)\n"
	       "  --max-queued-bytes SIZE outbound bytes a connection may have queued before\n"
	       "                          its processes' output and its requests wait\n"
	       "                          (default 64M; K, M, G suffixes)\n"
	       "  --max-memory SIZE       the server's memory budget for queued output,\n"
	       "                          retained output and fs data in flight, shared\n"
	       "                          by back-pressure (default: 1G, or an eighth of\n"
	       "                          the RAM if less; reported by cordon/status)\n"
	       "  --detached-output pause|drop  what a detached session's processes do once\n"
	       "                          512 KiB of their output waits unread: pause\n"
	       "                          (default: they block until the session is resumed\n"
	       "                          or ends, and a resume loses nothing) or drop (they\n"
	       "                          run on; output past the last 1 MiB is lost)\n"
	       "  --session-ttl TIME      how long a detached session waits to be resumed\n"
	       "                          (default 30s; TIME is N, Ns or Nms)\n"
	       "  --retention TIME        how long a closed process stays readable (default\n"
	       "                          30s; longer while its session is detached)\n"
	       "  --ping-interval TIME    ws: a ping frame this often (default 30s)\n"
	       "  --stall-timeout TIME    a connection under back-pressure (over its cap,\n"
	       "                          until down to half; its processes held for it; an\n"
	       "                          fs/readFile answer waiting for it) that takes\n"
	       "                          nothing for this long is dropped and its session\n"
	       "                          detached (default 60s; not stdio)\n"
	       "  --pid-file FILE         write the server's pid once listening; removed at exit\n"
	       "  --allow-http-request    serve http/request: HTTP(S) requests made by the\n"
	       "                          server itself, outside any sandbox, to public\n"
	       "                          addresses only (loopback, private, link-local and\n"
	       "                          metadata addresses are refused after DNS, on\n"
	       "                          redirects too). Off by default: refused (-32603)\n"
	       "  --http-allow-loopback   with --allow-http-request: loopback addresses too\n"
	       "  --durable-writes        fs/writeFile and fs/copy fsync each file (and its\n"
	       "                          directory) before answering\n" LOOP_OPTION
	       "event loop implementation (default " LOOP_DEFAULT "; also\n"
	       "                          CORDON_LOOP=poll in the environment)\n"
	       "  --max-processes N       processes per session, closed ones included until\n"
	       "                          they are forgotten (default %u)\n"
	       "  --pid-namespace=WHEN    run the server as pid 1 of a new pid namespace so\n"
	       "                          that no descendant outlives it: auto (default:\n"
	       "                          when root), always (exit 125 if it cannot be\n"
	       "                          created: needs CAP_SYS_ADMIN) or never\n"
	       "  --allow-degraded=FEATURE  explicit opt-down for sandboxed processes when user\n"
	       "                          namespaces are unavailable (repeatable): protected-\n"
	       "                          metadata (no mount-namespace carve-outs) or\n"
	       "                          deny-masks (deny entries inside readable paths\n"
	       "                          not enforced) or file-attributes (modes, times\n"
	       "                          and xattrs of read-only files changeable, the\n"
	       "                          host's terminals visible); on any host,\n"
	       "                          nested-repositories (no scan of the workspace\n"
	       "                          roots for nested repositories to protect);\n"
	       "                          and the limits a host may lack: tasks, memory\n"
	       "                          (then RLIMIT_AS per process), swap, cpu,\n"
	       "                          inotify-instances or inotify-watches\n"
	       "  --min-landlock-abi N    refuse sandboxed processes when the kernel's Landlock\n"
	       "                          ABI is below N (default 1)\n"
	       "  --default-limits LIST   resource limits of every process that does not ask\n"
	       "                          for its own: NAME=VALUE,... with NAME tasks,\n"
	       "                          memory, swap, cpu, cpu-time, open-files,\n"
	       "                          file-size, core, private-tmp, inotify-instances\n"
	       "                          or inotify-watches (as cordon run's --limit-NAME\n"
	       "                          and --private-tmp take them)\n"
	       "  --max-limits LIST       the most a process/start may ask (its \"cordon\":\n"
	       "                          {\"limits\":{...}}); a limit with a maximum is\n"
	       "                          always bounded, at the maximum if nothing else\n"
	       "  -v, --verbose           log requests and process events on stderr\n"
	       "  -h, --help              show this help\n"
	       "\n"
	       "Logs go to stderr; under systemd (JOURNAL_STREAM) each line carries its\n"
	       "syslog priority. The environment of a process is exactly its \"env\" unless\n"
	       "\"envPolicy\" is given, which builds it from the server's own environment\n"
	       "(inherit core, all or none; *KEY*, *SECRET*, *TOKEN* dropped unless\n"
	       "ignoreDefaultExcludes).\n",
	       CD_SERVE_DEFAULT_MAX_CONNS, CD_SERVE_DEFAULT_MAX_SESSIONS,
	       CD_SERVE_DEFAULT_MAX_PROCS);
}

/*
 * The group named name: 1 with *gid set, 0 when there is none, -errno.
 * A static cordon cannot use getgrnam(): glibc would load NSS modules
 * built for the shared C library into it (and crashes doing so), so it
 * reads /etc/group itself; a numeric id names any other group.
 */
static int find_group(const char *name, gid_t *gid)
{
#ifdef CD_STATIC_BINARY
	FILE *f = fopen("/etc/group", "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	struct group *gr;
	int r = 0;
	while ((gr = fgetgrent(f)))
		if (cd_streq(gr->gr_name, name)) {
			*gid = gr->gr_gid;
			r = 1;
			break;
		}
	fclose(f);
	return r;
#else
	struct group *gr = getgrnam(name);
	if (!gr)
		return 0;
	*gid = gr->gr_gid;
	return 1;
#endif
}

#if !defined(CD_WEBSOCKET) && defined(CD_WS_HELPER)
/*
 * The WebSocket transport is in cordon-ws, the same server built with it
 * (see src/local.mk): run it with our arguments. Next to this program
 * first (a build tree; an installation keeps it in CD_PKGLIBEXECDIR), so
 * that the tests run the helper they built. Returns only on failure.
 */
static void exec_ws_helper(int argc, char **argv)
{
	struct cd_program ws = { .fd = -1 };
	char *why = NULL;
	if (cd_program_open("cordon-ws", &ws, &why) < 0) {
		fprintf(stderr,
			"cordon: serve: cordon-ws, which serves the WebSocket transport, is "
			"missing: %s\n",
			why);
		free(why);
		return;
	}
	char **av = cd_xcalloc((size_t)argc + 2, sizeof(*av));
	av[0] = (char *)"cordon";
	memcpy(av + 1, argv, (size_t)argc * sizeof(*av));
	execv(ws.path, av);
	fprintf(stderr, "cordon: serve: cannot run %s, which serves the WebSocket transport: %s\n",
		ws.path, strerror(errno));
	free(av);
	cd_program_done(&ws);
}
#endif

/* ws://IP:PORT with a literal address (reference 1.1: no host names). */
static int parse_ws_url(const char *url, struct cd_serve_opts *o)
{
	const char *hp = url + strlen("ws://");
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon;
	uint64_t port;

	if (hp[0] == '[') {
		const char *rb = strchr(hp, ']');
		if (!rb || rb[1] != ':' || (size_t)(rb - hp - 1) >= sizeof(host))
			return -1;
		memcpy(host, hp + 1, (size_t)(rb - hp - 1));
		host[rb - hp - 1] = '\0';
		colon = rb + 1;
	} else {
		colon = strrchr(hp, ':');
		if (!colon || (size_t)(colon - hp) >= sizeof(host))
			return -1;
		memcpy(host, hp, (size_t)(colon - hp));
		host[colon - hp] = '\0';
	}
	if (cd_parse_u64(colon + 1, &port) < 0 || port > 65535)
		return -1;
	memset(&o->ws_addr, 0, sizeof(o->ws_addr));
	struct sockaddr_in *in = (struct sockaddr_in *)&o->ws_addr;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&o->ws_addr;
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		o->ws_addr_len = sizeof(*in);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		o->ws_addr_len = sizeof(*in6);
	} else {
		return -1;
	}
	return 0;
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
	if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return in6->sin6_addr.s6_addr[12] == 127;
	return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

/* --OPT GROUP: a name, or else a number; 0, or -1 with the error printed. */
static int resolve_group(const char *cmd, const char *opt, const char *name, gid_t *ret)
{
	uint64_t gid;
	int found = find_group(name, ret);

	if (found < 0) {
		fprintf(stderr, "cordon: serve: --%s: cannot read the groups: %s\n", opt,
			strerror(-found));
		return -1;
	}
	if (found > 0)
		return 0;
	if (cd_parse_u64(name, &gid) == 0 && gid < UINT32_MAX) {
		*ret = (gid_t)gid;
		return 0;
	}
	cd_cli_usage_error(cmd, "--%s: no group '%s'", opt, name);
	return -1;
}

/*
 * Who may connect to a ws:// listener on a loopback address. Anyone on
 * this host can reach it, and loopback is no boundary between users, so
 * without a token only our uid gets in (o->check_peer_owner: the kernel
 * names each peer's owner), unless --allow-local-users or
 * --allow-local-group widen it. With a token, the token is the rule for
 * everyone (our own uid too: a token is what a root server's sandboxed
 * processes, root like it, cannot read), and these options would add
 * nothing; elsewhere than loopback the token (or --insecure-no-auth) is.
 * -1 after a usage error.
 */
static int check_local_options(const char *cmd, struct cd_serve_opts *o, const char *token_file,
			       const char *local_group)
{
	const char *opt = local_group ? "--allow-local-group" : "--allow-local-users";
	bool loopback = o->listen == CD_LISTEN_WS && is_loopback(&o->ws_addr);

	if (o->allow_local_users && local_group) {
		cd_cli_usage_error(cmd, "--allow-local-users admits every local user already: "
					"--allow-local-group would add nothing");
		return -1;
	}
	if ((o->allow_local_users || local_group) && !loopback) {
		cd_cli_usage_error(cmd, "%s is for --listen ws:// on a loopback address", opt);
		return -1;
	}
	if ((o->allow_local_users || local_group) && token_file) {
		cd_cli_usage_error(cmd,
				   "%s and --auth-token-file contradict each other (with a token, "
				   "every client needs it)",
				   opt);
		return -1;
	}
	if (loopback && o->insecure_no_auth && !token_file) {
		cd_cli_usage_error(cmd,
				   "--insecure-no-auth is for an address that is not loopback; "
				   "on loopback, other local users are admitted by "
				   "--allow-local-users or --allow-local-group");
		return -1;
	}
	o->check_peer_owner = loopback && !token_file && !o->allow_local_users;
	o->check_peer_sandbox = loopback && !token_file;
	return 0;
}

/* N, Ns or Nms: milliseconds in (0, 1 day]. */
static int parse_duration_ms(const char *s, unsigned *ret)
{
	char num[32];
	size_t n = strspn(s, "0123456789");
	uint64_t v, mul;

	if (n == 0 || n >= sizeof(num))
		return -1;
	if (!s[n] || !strcmp(s + n, "s"))
		mul = 1000;
	else if (!strcmp(s + n, "ms"))
		mul = 1;
	else
		return -1;
	memcpy(num, s, n);
	num[n] = '\0';
	if (cd_parse_u64(num, &v) < 0 || v == 0 || v > 86400000ULL / mul)
		return -1;
	*ret = (unsigned)(v * mul);
	return 0;
}

/* Bytes with an optional K, M or G (powers of 1024), within [min, max]. */
static int parse_size_in(const char *s, uint64_t min, uint64_t max, size_t *ret)
{
	char num[32];
	size_t n = strspn(s, "0123456789");
	uint64_t v, mul = 1;

	if (n == 0 || n >= sizeof(num))
		return -1;
	if (s[n] && s[n + 1])
		return -1;
	switch (s[n]) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1024;
		break;
	case 'm':
	case 'M':
		mul = 1024 * 1024;
		break;
	case 'g':
	case 'G':
		mul = 1024 * 1024 * 1024;
		break;
	default:
		return -1;
	}
	memcpy(num, s, n);
	num[n] = '\0';
	if (cd_parse_u64(num, &v) < 0 || v > max / mul || v * mul < min || v * mul > SIZE_MAX)
		return -1;
	*ret = (size_t)(v * mul);
	return 0;
}

/* At least 64 KiB, at most 16 GiB. */
static int parse_size(const char *s, size_t *ret)
{
	return parse_size_in(s, 65536, 16ULL << 30, ret);
}

/* The token: the file's first line, without its end; printable ASCII without spaces. */
static int read_token_file(const char *path, struct cd_serve_opts *o)
{
	char buf[4097];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "cordon: serve: --auth-token-file %s: %s\n", path, strerror(errno));
		return -1;
	}
	ssize_t n = fstat(fd, &st) < 0 ? -1 : read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "cordon: serve: --auth-token-file %s: %s\n", path,
			n < 0 ? strerror(e) : "not a regular file");
		return -1;
	}
	size_t len = 0;
	while (len < (size_t)n && buf[len] != '\n' && buf[len] != '\r')
		len++;
	/* The whole buffer without a line end: the token may go on beyond it. */
	if (len >= sizeof(buf) - 1) {
		fprintf(stderr,
			"cordon: serve: --auth-token-file %s: the token is longer than %zu "
			"bytes\n",
			path, sizeof(buf) - 2);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (buf[i] <= ' ' || buf[i] > '~') {
			fprintf(stderr,
				"cordon: serve: --auth-token-file %s: the token may only hold "
				"printable ASCII without spaces (byte %zu is not)\n",
				path, i + 1);
			return -1;
		}
	}
	if (len < 16) {
		fprintf(stderr,
			"cordon: serve: --auth-token-file %s: the token must be at least 16 "
			"characters (it is %zu); e.g. head -c 32 /dev/urandom | base64\n",
			path, len);
		return -1;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		cd_log_warn("serve: --auth-token-file %s is readable by others (mode %04o): "
			    "chmod 600 it",
			    path, (unsigned)(st.st_mode & 07777));
	free(o->auth_token);
	o->auth_token = cd_xmalloc(len + 1);
	memcpy(o->auth_token, buf, len);
	o->auth_token[len] = '\0';
	o->auth_token_len = len;
	return 0;
}

/*
 * The server's limits: defaults within the maximums, enforceable here at
 * least for a sandboxed process (an unsandboxed one may be refused what
 * needs a sandbox or a user namespace: a private /tmp, RLIMIT_NPROC), and
 * their cgroup arranged now, before the server makes its pid namespace
 * (cordon may move itself into a cgroup of its own: see cgroup.h).
 * 0, or -1 after a message (usage: *ret 2; cannot enforce: 125).
 */
static int check_limits(const char *cmd, const struct cd_serve_opts *o, int *ret)
{
	const struct cd_limits *def = &o->default_limits, *max = &o->max_limits;
	for (int i = 0; i < CD_LIMIT_COUNT; i++) {
		enum cd_limit l = (enum cd_limit)i;
		if (cd_limits_has(def, l) && cd_limits_has(max, l) && def->v[l] > max->v[l]) {
			cleanup_free char *d = cd_limit_format(l, def->v[l]);
			cleanup_free char *m = cd_limit_format(l, max->v[l]);
			cd_cli_usage_error(cmd,
					   "--default-limits %s=%s is more than --max-limits "
					   "allows (%s)",
					   cd_limit_info(l)->name, d, m);
			*ret = CD_EXIT_USAGE;
			return -1;
		}
	}
	struct cd_limits all;
	char *why = NULL;
	(void)cd_limits_merge(NULL, def, max, &all, &why);
	if (!cd_limits_any(&all))
		return 0;
#ifdef __APPLE__
	/* Every limit is an rlimit of each process there, and root could raise it again. */
	struct cd_seatbelt_plan *sp = NULL;
	if (cd_seatbelt_plan_limits(&all, &sp, &why) < 0 ||
	    cd_intent_rlimits_refusal(&sp->rlimits, &why) < 0) {
		fprintf(stderr, "cordon: serve: the server's limits cannot be enforced here: %s\n",
			why);
		free(why);
		cd_seatbelt_plan_free(sp);
		*ret = CD_EXIT_SETUP;
		return -1;
	}
	cd_seatbelt_plan_free(sp);
	return 0;
#else
	struct cd_linux_host host;
	struct cd_limits_plan *p = NULL;
	cd_linux_probe_host(CD_PROBE_ALL, &host);
	cd_linux_probe_limits(&host.lim);
	struct cd_limits_ctx ctx = {
		.is_root = host.lim.uid0,
		.own_userns = !host.is_root && host.userns,
		.pid_init = true,
		.degraded = o->lopts.degraded_limits,
	};
	if (cd_limits_plan_build(&all, &host.lim, &ctx, &p, &why) < 0) {
		fprintf(stderr, "cordon: serve: the server's limits cannot be enforced here: %s\n",
			why);
		free(why);
		*ret = CD_EXIT_SETUP;
		return -1;
	}
	bool cgroup = p && p->cgroup;
	cd_limits_plan_free(p);
	if (cgroup && cd_linux_limits_setup(&why) < 0) {
		fprintf(stderr, "cordon: serve: cannot arrange the sandboxes' cgroups: %s\n", why);
		free(why);
		*ret = CD_EXIT_SETUP;
		return -1;
	}
	return 0;
#endif
}

/* The loops of this host, as usage errors name them. */
#ifdef __APPLE__
#define LOOPS "poll: macOS has no epoll"
#else
#define LOOPS "epoll or poll"
#endif

/* Clear a secret so that the compiler keeps the stores. */
static void wipe(void *p, size_t n)
{
#ifdef __linux__
	explicit_bzero(p, n);
#else
	volatile unsigned char *v = p; /* macOS has memset_s, glibc has not: this is both */
	while (n--)
		*v++ = 0;
#endif
}

static int parse_loop(const char *s, enum cd_loop_kind *ret)
{
#ifndef __APPLE__
	if (cd_streq(s, "epoll")) {
		*ret = CD_LOOP_EPOLL;
		return 0;
	}
#endif
	if (!cd_streq(s, "poll"))
		return -1;
	*ret = CD_LOOP_POLL;
	return 0;
}

/*
 * systemd's environment (sd-daemon.h): a listening socket it passed decides
 * the transport by its family (AF_UNIX: the unix socket transport and its
 * peer rules; TCP: WebSocket, with the token and loopback rules of --listen
 * ws://, its address being the socket's), and --listen is refused beside
 * it: two listeners would be one too many, and silently preferring one
 * would hide a unit's mistake. The variables go from the environment (no
 * command inherits them), the socket becomes close-on-exec. 0, or -1 after
 * a message with *ret set.
 */
static int take_activation(struct cd_cli_args *a, int argc, char **argv, bool listen_given,
			   struct cd_serve_opts *o, int *ret)
{
	struct cd_sd_listen act;
	char *why = NULL;
	int r = cd_sd_listen_fds(&act, &why);

	if (r < 0) {
		fprintf(stderr, "cordon: serve: socket activation: %s\n", why);
		free(why);
		*ret = 1;
		return -1;
	}
	if (r > 0 && listen_given) {
		cd_cli_usage_error(a->cmd,
				   "--listen and a socket passed by systemd (LISTEN_FDS) exclude "
				   "each other: drop --listen from the unit's ExecStart= (the "
				   "socket unit's ListenStream= says where to listen)");
		*ret = CD_EXIT_USAGE;
		return -1;
	}
	if (r > 0 && act.family != AF_UNIX) {
#if !defined(CD_WEBSOCKET) && defined(CD_WS_HELPER)
		/* The same pid and environment: the helper takes the activation over. */
		exec_ws_helper(argc, argv);
		*ret = 1;
		return -1;
#elif !defined(CD_WEBSOCKET)
		fprintf(stderr, "cordon: serve: systemd passed a TCP socket, which cordon serves "
				"with WebSocket, and this cordon was built without the WebSocket "
				"transport (configure found no wslay or nettle)\n");
		*ret = 1;
		return -1;
#endif
	}
	r = cd_sd_listen_done(r > 0 ? &act : NULL);
	if (r < 0) {
		fprintf(stderr, "cordon: serve: socket activation: descriptor %d: %s\n", act.fd,
			strerror(-r));
		*ret = 1;
		return -1;
	}
	r = cd_sd_notify_take(&o->notify_socket, &why);
	if (r < 0) {
		fprintf(stderr, "cordon: serve: %s\n", why);
		free(why);
		*ret = 1;
		return -1;
	}
	if (act.fd < 0)
		return 0;
	o->activated_fd = act.fd;
	snprintf(o->activated_name, sizeof(o->activated_name), "%s", act.name);
	if (act.family == AF_UNIX) {
		o->listen = CD_LISTEN_UNIX;
		return 0;
	}
	o->listen = CD_LISTEN_WS;
	socklen_t len = sizeof(o->ws_addr);
	if (getsockname(act.fd, (struct sockaddr *)&o->ws_addr, &len) < 0) {
		fprintf(stderr,
			"cordon: serve: socket activation: the passed socket's address: "
			"%s\n",
			strerror(errno));
		*ret = 1;
		return -1;
	}
	o->ws_addr_len = len;
	return 0;
}

/*
 * The options of a server that left workers running (cd_serve_workers_left):
 * never freed, and kept here, where a leak checker at exit finds them.
 */
static struct cd_cli_policy left_pol;
static struct cd_serve_opts left_opts;

int cd_cmd_serve(int argc, char **argv)
{
	struct cd_cli_args a = { .cmd = "serve", .argc = argc, .argv = argv, .i = 1 };
	struct cd_cli_policy pol;
	struct cd_serve_opts o = {
#ifdef __APPLE__
		.loop = CD_LOOP_POLL, /* no epoll there */
#else
		.loop = CD_LOOP_EPOLL,
#endif
	};
	const char *loop_arg = NULL, *arg, *token_file = NULL, *group = NULL, *local_group = NULL;
	enum cd_pidns_mode pidns = CD_PIDNS_AUTO;
	int ret = CD_EXIT_USAGE;
	bool verbose = false, listen_given = false;
	int id;

	/* Before any thread: where the umask cannot be read from /proc (fs-ops.h). */
	cd_fs_ops_umask_init();
	cd_serve_opts_init(&o);
	cd_cli_policy_init(&pol);
	while ((id = cd_cli_next(&a, cd_serve_options, &arg)) > 0) {
		switch (id) {
		case OPT_HELP:
			serve_help();
			ret = 0;
			goto out;
		case OPT_LISTEN:
			listen_given = true;
			if (cd_streq(arg, "stdio") || cd_streq(arg, "stdio://")) {
				o.listen = CD_LISTEN_STDIO;
			} else if (cd_startswith(arg, "ws://")) {
#if !defined(CD_WEBSOCKET) && defined(CD_WS_HELPER)
				exec_ws_helper(argc, argv);
				ret = 1; /* could not start (see EXIT STATUS) */
				goto out;
#elif !defined(CD_WEBSOCKET)
				fprintf(stderr, "cordon: serve: this cordon was built without the "
						"WebSocket transport (configure found no wslay or "
						"nettle)\n");
				goto out;
#endif
				if (parse_ws_url(arg, &o) < 0) {
					cd_cli_usage_error(
						a.cmd,
						"--listen '%s': expected ws://IP:PORT with "
						"a literal IPv4 or [IPv6] address and a port",
						arg);
					goto out;
				}
				o.listen = CD_LISTEN_WS;
			} else if (cd_startswith(arg, "unix:") && arg[5]) {
				o.listen = CD_LISTEN_UNIX;
				o.unix_path = arg + 5;
			} else {
				cd_cli_usage_error(a.cmd,
						   "unsupported --listen URL '%s' (expected stdio, "
						   "ws://IP:PORT or unix:PATH)",
						   arg);
				goto out;
			}
			break;
		case OPT_AUTH_TOKEN_FILE:
			token_file = arg;
			break;
		case OPT_INSECURE_NO_AUTH:
			o.insecure_no_auth = true;
			break;
		case OPT_UNIX_GROUP:
			group = arg;
			break;
		case OPT_PID_FILE:
			o.pid_file = arg;
			break;
		case OPT_ALLOW_LOCAL_USERS:
			o.allow_local_users = true;
			break;
		case OPT_ALLOW_LOCAL_GROUP:
			local_group = arg;
			break;
		case OPT_MAX_CONNECTIONS:
		case OPT_MAX_SESSIONS: {
			uint64_t v;
			if (cd_parse_u64(arg, &v) < 0 || v == 0 || v > 65536) {
				cd_cli_usage_error(
					a.cmd, "--%s: '%s' is not a number from 1 to 65536",
					id == OPT_MAX_SESSIONS ? "max-sessions" : "max-connections",
					arg);
				goto out;
			}
			if (id == OPT_MAX_SESSIONS)
				o.max_sessions = (unsigned)v;
			else
				o.max_connections = (unsigned)v;
			break;
		}
		case OPT_MAX_QUEUED:
			if (parse_size(arg, &o.max_queued_bytes) < 0) {
				cd_cli_usage_error(
					a.cmd,
					"--max-queued-bytes: '%s' is not a size from 64K "
					"to 16G (N, NK, NM or NG)",
					arg);
				goto out;
			}
			break;
		case OPT_MAX_MEMORY:
			if (parse_size_in(arg, 16ULL << 20, 1ULL << 40, &o.max_memory) < 0) {
				cd_cli_usage_error(a.cmd,
						   "--max-memory: '%s' is not a size from 16M to "
						   "1024G (N, NK, NM or NG)",
						   arg);
				goto out;
			}
			break;
		case OPT_DETACHED_OUTPUT:
			if (cd_streq(arg, "pause")) {
				o.lossless = true;
			} else if (cd_streq(arg, "drop")) {
				o.lossless = false;
			} else {
				cd_cli_usage_error(
					a.cmd, "--detached-output: '%s' is not pause or drop", arg);
				goto out;
			}
			break;
		case OPT_DURABLE_WRITES:
			o.durable_writes = true;
			break;
		case OPT_ALLOW_HTTP_REQUEST:
#if defined(CD_HTTP)
			o.http_allow = true;
#elif !defined(CD_WEBSOCKET) && defined(CD_HTTP_HELPER)
			/* libcurl lives in cordon-ws (src/local.mk): it serves the request. */
			exec_ws_helper(argc, argv);
			ret = 1;
			goto out;
#else
			fprintf(stderr,
				"cordon: serve: --allow-http-request: this cordon was built "
				"without libcurl (configure found no libcurl >= 7.85, or no "
				"WebSocket helper)\n");
			goto out;
#endif
			break;
		case OPT_HTTP_ALLOW_LOOPBACK:
			o.http_allow_loopback = true;
			break;
		case OPT_SESSION_TTL:
		case OPT_RETENTION:
		case OPT_PING_INTERVAL:
		case OPT_STALL_TIMEOUT: {
			unsigned *dst = id == OPT_SESSION_TTL	  ? &o.session_ttl_ms
					: id == OPT_RETENTION	  ? &o.retention_ms
					: id == OPT_PING_INTERVAL ? &o.ping_ms
								  : &o.stall_ms;
			if (parse_duration_ms(arg, dst) < 0) {
				cd_cli_usage_error(a.cmd,
						   "--%s: '%s' is not a duration (N or Ns seconds, "
						   "Nms milliseconds; at most a day)",
						   id == OPT_SESSION_TTL     ? "session-ttl"
						   : id == OPT_RETENTION     ? "retention"
						   : id == OPT_PING_INTERVAL ? "ping-interval"
									     : "stall-timeout",
						   arg);
				goto out;
			}
			break;
		}
		case OPT_LOOP:
			loop_arg = arg;
			if (parse_loop(arg, &o.loop) < 0) {
				cd_cli_usage_error(a.cmd, "--loop: unknown loop '%s' (" LOOPS ")",
						   arg);
				goto out;
			}
			break;
		case OPT_MAX_PROCESSES: {
			uint64_t v;
			if (cd_parse_u64(arg, &v) < 0 || v == 0 || v > UINT_MAX) {
				cd_cli_usage_error(a.cmd,
						   "--max-processes: '%s' is not a positive number",
						   arg);
				goto out;
			}
			o.max_processes = (unsigned)v;
			break;
		}
		case OPT_PID_NAMESPACE:
			if (cd_streq(arg, "auto")) {
				pidns = CD_PIDNS_AUTO;
			} else if (cd_streq(arg, "always")) {
				pidns = CD_PIDNS_ALWAYS;
			} else if (cd_streq(arg, "never")) {
				pidns = CD_PIDNS_NEVER;
			} else {
				cd_cli_usage_error(
					a.cmd, "--pid-namespace: '%s' is not auto, always or never",
					arg);
				goto out;
			}
			break;
		case OPT_VERBOSE:
			verbose = true;
			break;
		case OPT_DEFAULT_LIMITS:
		case OPT_MAX_LIMITS: {
			char *why = NULL;
			struct cd_limits *dst =
				id == OPT_DEFAULT_LIMITS ? &o.default_limits : &o.max_limits;
			if (cd_limits_parse_list(arg, dst, &why) < 0) {
				cd_cli_usage_error(a.cmd, "--%s: %s",
						   id == OPT_DEFAULT_LIMITS ? "default-limits"
									    : "max-limits",
						   why);
				free(why);
				goto out;
			}
			break;
		}
		default:
			if (cd_cli_policy_option(&pol, a.cmd, id, arg) < 0)
				goto out;
			break;
		}
	}
	if (id < 0)
		goto out;
	if (a.i < argc) {
		cd_cli_usage_error(a.cmd, "unexpected argument '%s'", argv[a.i]);
		goto out;
	}
	if (take_activation(&a, argc, argv, listen_given, &o, &ret) < 0)
		goto out;
	if (!loop_arg) {
		const char *env = getenv("CORDON_LOOP");
		if (env && *env && parse_loop(env, &o.loop) < 0) {
			cd_cli_usage_error(a.cmd, "CORDON_LOOP: unknown loop '%s' (" LOOPS ")",
					   env);
			goto out;
		}
	}
	if (token_file && o.listen != CD_LISTEN_WS) {
		cd_cli_usage_error(a.cmd, "--auth-token-file is for --listen ws:// (a unix socket "
					  "checks the peer's uid instead)");
		goto out;
	}
	if (o.insecure_no_auth && o.listen != CD_LISTEN_WS) {
		cd_cli_usage_error(a.cmd, "--insecure-no-auth is for --listen ws://");
		goto out;
	}
	if (group && o.listen != CD_LISTEN_UNIX) {
		cd_cli_usage_error(a.cmd, "--unix-group is for --listen unix:PATH");
		goto out;
	}
	if (group) {
		if (resolve_group(a.cmd, "unix-group", group, &o.unix_group) < 0)
			goto out;
		o.unix_group_set = true;
	}
	if (check_local_options(a.cmd, &o, token_file, local_group) < 0)
		goto out;
	if (local_group) {
		if (resolve_group(a.cmd, "allow-local-group", local_group, &o.allow_local_group) <
		    0)
			goto out;
		o.allow_local_group_set = true;
	}
	if (o.http_allow_loopback && !o.http_allow) {
		cd_cli_usage_error(a.cmd, "--http-allow-loopback needs --allow-http-request");
		goto out;
	}
	if (token_file && read_token_file(token_file, &o) < 0)
		goto out;
	o.auth_token_file = token_file;
	cd_log_verbosity = verbose ? 2 : 1;
	cd_log_detect_journal();
	if (o.listen == CD_LISTEN_WS && !o.auth_token && !is_loopback(&o.ws_addr)) {
		if (!o.insecure_no_auth) {
			fprintf(stderr,
				"cordon: serve: refusing to listen on a non-loopback address "
				"without "
				"authentication: anyone who reaches it could run commands as uid "
				"%u. "
				"Pass --auth-token-file FILE (clients send \"Authorization: Bearer "
				"TOKEN\"), or --insecure-no-auth if something else guards the "
				"network\n",
				(unsigned)geteuid());
			goto out;
		}
		cd_log_warn("serve: --insecure-no-auth: anyone who reaches this address can run "
			    "commands as uid %u",
			    (unsigned)geteuid());
	}
	if (o.allow_local_users)
		cd_log_warn(
			"serve: --allow-local-users: every user of this host can run commands as "
			"uid %u",
			(unsigned)geteuid());
	if (o.listen == CD_LISTEN_WS && o.auth_token && o.insecure_no_auth) {
		cd_cli_usage_error(a.cmd, "--insecure-no-auth and --auth-token-file contradict "
					  "each other");
		goto out;
	}
	o.pid_file_pid = getpid();
	o.lopts = pol.lopts;
	if (check_limits(a.cmd, &o, &ret) < 0)
		goto out;
	/*
	 * Each sandboxed process gets a pid namespace, as under cordon run, with
	 * cordon-init as its init (server.c): it cannot name, let alone change,
	 * any process outside its sandbox. No network namespace each: the
	 * seccomp socket rules restrict the network alone.
	 */
	o.lopts.no_net_ns = true;
	/* Before the loop and the host probe: the outer process only waits. */
	if (cd_serve_pidns(pidns, o.notify_socket, &ret) < 0)
		goto out;
	ret = cd_serve(&o);
	if (cd_serve_workers_left()) {
		/*
		 * A worker stuck on a hung file system may still read the
		 * options (o.lopts points into pol): nothing is freed, and
		 * the process exits now.
		 */
		left_pol = pol;
		left_opts = o;
		return ret;
	}
out:
	if (o.auth_token)
		wipe(o.auth_token, o.auth_token_len);
	free(o.auth_token);
	free(o.notify_socket);
	cd_cli_policy_done(&pol);
	return ret;
}
