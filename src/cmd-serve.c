/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli-policy.h"
#include "serve/server.h"
#include "shared/log.h"

enum {
	OPT_HELP = 1,
	OPT_LISTEN,
	OPT_LOOP,
	OPT_MAX_PROCESSES,
	OPT_PID_NAMESPACE,
	OPT_VERBOSE,
};

static const struct cd_cli_opt serve_opts[] = {
	{ "help", 'h', false, OPT_HELP },
	{ "listen", 0, true, OPT_LISTEN },
	{ "loop", 0, true, OPT_LOOP },
	{ "max-processes", 0, true, OPT_MAX_PROCESSES },
	{ "pid-namespace", 0, true, OPT_PID_NAMESPACE },
	{ "verbose", 'v', false, OPT_VERBOSE },
	{ "allow-degraded", 0, true, CD_OPT_ALLOW_DEGRADED },
	{ "min-landlock-abi", 0, true, CD_OPT_MIN_LANDLOCK_ABI },
	{ NULL, 0, false, 0 },
};

static void serve_help(void)
{
	printf("Usage: cordon serve [--listen stdio] [--loop epoll|poll] [--max-processes N]\n"
	       "                    [--pid-namespace=auto|always|never]\n"
	       "                    [--allow-degraded=FEATURE] [--min-landlock-abi N]\n"
	       "                    [-v]\n"
	       "\n"
	       "Serve the Codex exec-server protocol: newline-delimited JSON-RPC (without\n"
	       "the \"jsonrpc\" member) on stdin and stdout, one message per line, at most\n"
	       "64 MiB per line and 262144 JSON values per message. Clients start, read,\n"
	       "write to, signal and terminate processes; a process/start with a \"sandbox\"\n"
	       "intent runs the command under the same Landlock, seccomp and namespace\n"
	       "sandbox that `cordon run` builds from a profile, and is refused (-32602)\n"
	       "before anything runs when that sandbox cannot be enforced.\n"
	       "\n"
	       "Methods: initialize (then the initialized notification), environment/info,\n"
	       "environment/status, process/start, process/read (long poll with waitMs),\n"
	       "process/write, process/signal, process/terminate. Notifications:\n"
	       "process/output, process/exited, process/closed. Closed processes are kept\n"
	       "for 30 s. See cordon-protocol(7).\n"
	       "\n"
	       "End of input (or a line over the limit, or SIGTERM, SIGINT or SIGHUP) kills\n"
	       "every process the server started and exits 0. A server running as root is\n"
	       "the init of its own pid namespace: if it is killed, even with SIGKILL, the\n"
	       "kernel kills every process it started, their descendants included.\n"
	       "\n"
	       "Options:\n"
	       "  --listen stdio          transport (default and only one so far; ws://IP:PORT\n"
	       "                          and unix:PATH are planned)\n"
	       "  --loop epoll|poll       event loop implementation (default epoll; also\n"
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
	       "                          not enforced)\n"
	       "  --min-landlock-abi N    refuse sandboxed processes when the kernel's Landlock\n"
	       "                          ABI is below N (default 1)\n"
	       "  -v, --verbose           log requests and process events on stderr\n"
	       "  -h, --help              show this help\n"
	       "\n"
	       "The environment of a process is exactly its \"env\" unless \"envPolicy\" is\n"
	       "given, which builds it from the server's own environment (inherit core, all\n"
	       "or none; *KEY*, *SECRET*, *TOKEN* dropped unless ignoreDefaultExcludes).\n",
	       CD_SERVE_DEFAULT_MAX_PROCS);
}

static int parse_loop(const char *s, enum cd_loop_kind *ret)
{
	if (cd_streq(s, "epoll"))
		*ret = CD_LOOP_EPOLL;
	else if (cd_streq(s, "poll"))
		*ret = CD_LOOP_POLL;
	else
		return -1;
	return 0;
}

int cd_cmd_serve(int argc, char **argv)
{
	struct cd_cli_args a = { .cmd = "serve", .argc = argc, .argv = argv, .i = 1 };
	struct cd_cli_policy pol;
	struct cd_serve_opts o = {
		.loop = CD_LOOP_EPOLL,
		.max_processes = CD_SERVE_DEFAULT_MAX_PROCS,
	};
	const char *loop_arg = NULL, *arg;
	enum cd_pidns_mode pidns = CD_PIDNS_AUTO;
	int ret = CD_EXIT_USAGE;
	bool verbose = false;
	int id;

	cd_cli_policy_init(&pol);
	while ((id = cd_cli_next(&a, serve_opts, &arg)) > 0) {
		switch (id) {
		case OPT_HELP:
			serve_help();
			ret = 0;
			goto out;
		case OPT_LISTEN:
			if (cd_streq(arg, "stdio") || cd_streq(arg, "stdio://"))
				break;
			if (cd_startswith(arg, "ws://") || cd_startswith(arg, "unix:")) {
				fprintf(stderr,
					"cordon: serve: the %s transport is not implemented yet "
					"(planned)\n",
					cd_startswith(arg, "ws://") ? "ws://" : "unix:");
				goto out;
			}
			cd_cli_usage_error(a.cmd,
					   "unsupported --listen URL '%s' (expected stdio, "
					   "ws://IP:PORT or unix:PATH)",
					   arg);
			goto out;
		case OPT_LOOP:
			loop_arg = arg;
			if (parse_loop(arg, &o.loop) < 0) {
				cd_cli_usage_error(
					a.cmd, "--loop: unknown loop '%s' (epoll or poll)", arg);
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
	if (!loop_arg) {
		const char *env = getenv("CORDON_LOOP");
		if (env && *env && parse_loop(env, &o.loop) < 0) {
			cd_cli_usage_error(a.cmd, "CORDON_LOOP: unknown loop '%s' (epoll or poll)",
					   env);
			goto out;
		}
	}
	cd_log_verbosity = verbose ? 2 : 1;
	o.lopts = pol.lopts;
	/* The server contains its processes itself (pidns.c): no pid namespace each. */
	o.lopts.no_pid_ns = true;
	/* Nor a network namespace each: the seccomp socket rules restrict alone. */
	o.lopts.no_net_ns = true;
	/* Before the loop and the host probe: the outer process only waits. */
	if (cd_serve_pidns(pidns, &ret) < 0)
		goto out;
	ret = cd_serve_stdio(&o);
out:
	cd_cli_policy_done(&pol);
	return ret;
}
