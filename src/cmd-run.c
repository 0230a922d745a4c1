/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cli-policy.h"
#include "os-backend.h"
#include "own-proxy.h"
#include "shared/log.h"
#include "spawn.h"

extern char **environ;

enum {
	OPT_HELP = 1,
	OPT_CLEAR_ENV,
	OPT_SETENV,
	OPT_UNSETENV,
	OPT_VERBOSE,
	OPT_QUIET,
	OPT_JSON_AUDIT,
	OPT_AUDIT_FILE,
	OPT_PROXY_USER,
};

const struct cd_cli_opt cd_run_options[] = {
	{ "help", 'h', false, OPT_HELP },
	{ "clear-env", 0, false, OPT_CLEAR_ENV },
	{ "setenv", 0, true, OPT_SETENV },
	{ "unsetenv", 0, true, OPT_UNSETENV },
	{ "verbose", 'v', false, OPT_VERBOSE },
	{ "quiet", 'q', false, OPT_QUIET },
	{ "json-audit", 0, false, OPT_JSON_AUDIT },
	{ "audit-file", 0, true, OPT_AUDIT_FILE },
	{ "proxy-user", 0, true, OPT_PROXY_USER },
	CD_CLI_POLICY_OPTIONS,
	{ NULL, 0, false, 0 },
};

static void run_help(void)
{
	printf("Usage: cordon run [POLICY OPTIONS] [RUN OPTIONS] [--] CMD [ARG...]\n"
	       "\n"
	       "Run one command under a policy. stdin, stdout and stderr pass straight\n"
	       "through; the exit status is the command's (128+N when killed by signal N;\n"
	       "125 when cordon refused or failed before exec; 126 cannot execute; 127 not\n"
	       "found).\n"
	       "\n"
	       "%s"
	       "\n"
	       "Run options:\n"
	       "  --clear-env             start the command with an empty environment\n"
	       "  --setenv NAME=VALUE     set a variable (repeatable)\n"
	       "  --unsetenv NAME         remove a variable (repeatable)\n"
	       "  -v, --verbose           print what is enforced before running\n"
	       "  -q, --quiet             no warnings\n"
	       "  --json-audit            cordon's proxy writes its audit lines as JSON\n"
	       "  --audit-file PATH       ... to PATH (appended) instead of stderr\n"
	       "  --proxy-user UID[:GID]  as root: the ids cordon's proxy runs as\n"
	       "                          (default 65534:65534, nobody)\n"
	       "  -h, --help              show this help\n",
	       cd_cli_policy_help);
}

/* ---- signal forwarding ---- */

static volatile sig_atomic_t fwd_pid;
static volatile sig_atomic_t fwd_pending[NSIG];
static const int fwd_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

static void forward_signal(int sig)
{
	int saved = errno;
	pid_t pid = fwd_pid;
	if (pid > 0)
		(void)kill(-pid, sig);
	else if (sig > 0 && sig < NSIG)
		fwd_pending[sig] = 1;
	errno = saved;
}

static void install_forwarders(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward_signal;
	/* No SA_RESTART: waitpid() returns EINTR and is retried by the spawner. */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < CD_ARRAY_SIZE(fwd_signals); i++)
		(void)sigaction(fwd_signals[i], &sa, NULL);
	/*
	 * An inherited SIGCHLD SIG_IGN would make the kernel reap the command
	 * on its own: waitpid() could not report its status, and the end of
	 * the run would not know whether anything of the sandbox is left.
	 */
	sa.sa_handler = SIG_DFL;
	(void)sigaction(SIGCHLD, &sa, NULL);
}

static void start_forwarding(pid_t pid)
{
	fwd_pid = pid;
	for (size_t i = 0; i < CD_ARRAY_SIZE(fwd_signals); i++) {
		int sig = fwd_signals[i];
		if (fwd_pending[sig]) {
			fwd_pending[sig] = 0;
			(void)kill(-pid, sig);
		}
	}
}

/* ---- environment ---- */

struct env_op {
	bool set;
	const char *arg; /* NAME=VALUE or NAME */
};

static bool env_name_matches(const char *entry, const char *name, size_t n)
{
	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static char **build_env(bool clear, const struct env_op *ops, size_t n_ops)
{
	char **env = NULL;
	size_t len = 0;
	if (!clear)
		for (char **e = environ; e && *e; e++)
			len++;
	env = cd_xcalloc(len + n_ops + 1, sizeof(*env));
	if (!clear)
		memcpy(env, environ, len * sizeof(*env));
	for (size_t i = 0; i < n_ops; i++) {
		const char *eq = strchr(ops[i].arg, '=');
		size_t n = ops[i].set ? (size_t)(eq - ops[i].arg) : strlen(ops[i].arg);
		size_t w = 0;
		for (size_t j = 0; j < len; j++)
			if (!env_name_matches(env[j], ops[i].arg, n))
				env[w++] = env[j];
		len = w;
		if (ops[i].set)
			env[len++] = (char *)ops[i].arg;
		env[len] = NULL;
	}
	env[len] = NULL;
	return env;
}

/* ---- cordon's proxy ---- */

/* "UID" or "UID:GID", decimal, neither 0 (GID defaults to UID). */
static int parse_proxy_user(const char *arg, struct cd_own_proxy_opts *o)
{
	unsigned long v[2];
	const char *s = arg;
	char *end;

	for (int i = 0; i < 2; i++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		errno = 0;
		v[i] = strtoul(s, &end, 10);
		if (errno || v[i] == 0 || v[i] >= (unsigned long)(uid_t)-1)
			return -EINVAL;
		if (i == 0 && *end == '\0') {
			v[1] = v[0];
			break;
		}
		if (*end != (i == 0 ? ':' : '\0'))
			return -EINVAL;
		s = end + 1;
	}
	o->uid = (uid_t)v[0];
	o->gid = (gid_t)v[1];
	return 0;
}

/* ---- -v ---- */

static void print_enforced(const struct cd_cli_bound *b)
{
	const struct cd_linux_plan *lp = b->lp;
	const struct cd_plan *plan = b->plan;

	fprintf(stderr, "cordon: profile '%s' (%s, network %s)\n", b->profile_name,
		cd_profile_type_name(plan->type), cd_network_name(plan->network));
	if (!lp->sandboxed) {
		fputs("cordon: no sandbox: the profile disables it\n", stderr);
		return;
	}
	if (lp->landlock)
		fprintf(stderr, "cordon: landlock ABI %u: %zu rules\n", lp->landlock_abi,
			lp->n_ll_rules);
	else
		fputs("cordon: landlock: not used (file system unrestricted)\n", stderr);
	if (lp->seccomp) {
		size_t n = 0;
		for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++)
			if (r->when & lp->sc_when)
				n++;
		fprintf(stderr, "cordon: seccomp: %zu rules (network %s)\n", n,
			lp->sc_when & CD_SC_NET_RESTRICTED ? "restricted"
			: lp->sc_when & CD_SC_NET_MANAGED  ? "managed: IP sockets only"
							   : "not restricted");
		if (lp->net_managed)
			fputs("cordon: managed network: a relay on " CD_RELAY_ADDR
			      ":" CD_RELAY_PORT_STR " in the network namespace, to the proxy\n",
			      stderr);
	} else {
		fputs("cordon: seccomp: not used\n", stderr);
	}
	const char *ns[5];
	size_t n_ns = cd_linux_plan_namespaces(lp, ns);
	fputs("cordon: namespaces:", stderr);
	for (size_t i = 0; i < n_ns; i++)
		fprintf(stderr, "%s %s", i ? "," : "", ns[i]);
	if (n_ns)
		fprintf(stderr, "; %zu mounts\n", lp->n_mounts);
	else
		fputs(" none\n", stderr);
	fputs("cordon: no_new_privs, all capabilities dropped, new session\n", stderr);
}

/* -v: the limits and how each is enforced (sandboxed or not). */
static void print_limits(const struct cd_linux_plan *lp)
{
	const struct cd_limits_plan *p = lp ? lp->limits : NULL;
	if (!p)
		return;
	for (int l = 0; l < CD_LIMIT_COUNT; l++) {
		if (!cd_limits_has(&p->limits, (enum cd_limit)l))
			continue;
		cleanup_free char *v = cd_limit_format((enum cd_limit)l, p->limits.v[l]);
		fprintf(stderr, "cordon: limit %s %s: %s\n", cd_limit_info((enum cd_limit)l)->name,
			v, p->detail[l] ? p->detail[l] : "");
	}
	if (p->cgroup)
		fputs("cordon: the sandbox gets a cgroup of its own; cgroup.kill ends what is left "
		      "of it\n",
		      stderr);
}

/*
 * An audit trail the command can rewrite is no record of what it did: say
 * so when the plan lets the sandbox write the --audit-file (a full-access
 * profile, or a file inside a writable root). A warning, not a refusal:
 * under full access no place would do.
 */
static void warn_audit_writable(const struct cd_plan *plan, const char *file)
{
	char *abs = NULL, *canon = NULL, *cwd = NULL;

	if (file[0] == '/') {
		abs = cd_xstrdup(file);
	} else if ((cwd = getcwd(NULL, 0))) {
		abs = cd_xasprintf("%s/%s", cwd, file);
	}
	if (abs && cd_canonicalize(&cd_fs_ops_host, abs, &canon, NULL, NULL) == 0) {
		const struct cd_plan_path *rule = NULL;
		char *h1 = NULL, *h2 = NULL;
		if (cd_plan_access(plan, canon, &rule) == CD_ACCESS_WRITE)
			cd_log_warn("--audit-file '%s' is writable inside the sandbox (%s): the "
				    "command can rewrite its own audit trail; put it where the "
				    "profile gives no write access",
				    cd_vis(canon, &h1),
				    rule && rule->why ? cd_vis(rule->why, &h2) : "full access");
		free(h1);
		free(h2);
	}
	free(canon);
	free(abs);
	free(cwd);
}

int cd_cmd_run(int argc, char **argv)
{
	struct cd_cli_args a = { .cmd = "run", .argc = argc, .argv = argv, .i = 1 };
	struct cd_cli_policy pol;
	struct env_op *ops = NULL;
	size_t n_ops = 0;
	char **env = NULL;	 /* the array only; the strings are borrowed */
	char **wrapped = NULL;	 /* the command in the Seatbelt stand-in (test hook) */
	char **owned_env = NULL; /* NAME=VALUE strings of ours in env */
	size_t n_owned_env = 0;
	bool clear_env = false, verbose = false, quiet = false;
	struct cd_own_proxy own = { .pid = 0, .ctl = -1 };
	struct cd_own_proxy_opts own_opts;
	const char *audit_file = NULL, *proxy_opt = NULL;
	int audit_fd = -1;
	int ret = CD_EXIT_USAGE;
	int id;
	const char *arg;

	cd_cli_policy_init(&pol);
	cd_own_proxy_opts_init(&own_opts);
	while ((id = cd_cli_next(&a, cd_run_options, &arg)) > 0) {
		switch (id) {
		case OPT_HELP:
			run_help();
			ret = 0;
			goto out;
		case OPT_CLEAR_ENV:
			clear_env = true;
			break;
		case OPT_SETENV:
		case OPT_UNSETENV: {
			const char *eq = strchr(arg, '=');
			if (id == OPT_SETENV && (!eq || eq == arg)) {
				cd_cli_usage_error(a.cmd, "--setenv needs NAME=VALUE, got '%s'",
						   arg);
				goto out;
			}
			if (id == OPT_UNSETENV && (eq || !*arg)) {
				cd_cli_usage_error(a.cmd, "--unsetenv needs a NAME, got '%s'", arg);
				goto out;
			}
			ops = cd_xreallocarray(ops, n_ops + 1, sizeof(*ops));
			ops[n_ops++] = (struct env_op){ .set = id == OPT_SETENV, .arg = arg };
			break;
		}
		case OPT_VERBOSE:
			verbose = true;
			break;
		case OPT_QUIET:
			quiet = true;
			break;
		case OPT_JSON_AUDIT:
			own_opts.json_audit = true;
			proxy_opt = "--json-audit";
			break;
		case OPT_AUDIT_FILE:
			if (!*arg) {
				cd_cli_usage_error(a.cmd, "--audit-file needs a PATH");
				goto out;
			}
			audit_file = arg;
			proxy_opt = "--audit-file";
			break;
		case OPT_PROXY_USER:
			if (parse_proxy_user(arg, &own_opts) < 0) {
				cd_cli_usage_error(a.cmd,
						   "--proxy-user needs UID or UID:GID, decimal and "
						   "not 0, got '%s'",
						   arg);
				goto out;
			}
			if (geteuid() != 0) {
				cd_cli_usage_error(a.cmd, "--proxy-user needs root (cordon's proxy "
							  "runs as you otherwise)");
				goto out;
			}
			proxy_opt = "--proxy-user";
			break;
		default:
			if (cd_cli_policy_option(&pol, a.cmd, id, arg) < 0)
				goto out;
			break;
		}
	}
	if (id < 0)
		goto out;
	if (a.i >= argc) {
		cd_cli_usage_error(a.cmd, "no command given");
		goto out;
	}
	cd_log_verbosity = quiet ? 0 : verbose ? 2 : 1;

	/* Forward from now on, so a ^C during setup reaches the command too. */
	install_forwarders();

	struct cd_cli_bound b;
	int r = cd_cli_policy_bind(&pol, a.cmd, &b);
	if (r == CD_BIND_USAGE) {
		cd_cli_bound_done(&b);
		goto out;
	}
	if (r == CD_BIND_REFUSED) {
		cd_log_error("%s", b.refusal);
		cd_cli_bound_done(&b);
		ret = CD_EXIT_SETUP;
		goto out;
	}

	if (proxy_opt && !(b.own_proxy && b.lp && b.lp->net_managed)) {
		cd_cli_usage_error(a.cmd,
				   "%s is about cordon's own proxy: it needs a managed network "
				   "(--network managed) and no --network-proxy",
				   proxy_opt);
		cd_cli_bound_done(&b);
		goto out;
	}
	/* A managed network with no proxy given: cordon's own, for this run. */
	if (b.own_proxy && b.lp && b.lp->net_managed) {
		char *perr = NULL;
		if (audit_file) {
			warn_audit_writable(b.plan, audit_file);
			audit_fd = open(audit_file,
					O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
			if (audit_fd < 0) {
				cd_log_error("--audit-file: cannot open '%s': %s", audit_file,
					     strerror(errno));
				ret = CD_EXIT_SETUP;
				cd_cli_bound_done(&b);
				goto out;
			}
			own_opts.audit_fd = audit_fd;
		}
		if (cd_own_proxy_start(b.netpol, &own_opts, &own, &perr) < 0) {
			cd_log_error("%s", perr);
			free(perr);
			ret = CD_EXIT_SETUP;
			cd_cli_bound_done(&b);
			goto out;
		}
		if (cd_proxy_endpoint_parse(own.endpoint, &b.lp->proxy, NULL) < 0)
			abort(); /* cd_own_proxy_start made it: always valid */
		pol.lopts.managed_proxy = own.endpoint;
		if (getenv("CORDON_TEST_PROXY_RESOLVE"))
			cd_log_warn("test hook CORDON_TEST_PROXY_RESOLVE: cordon's proxy resolves "
				    "names from it, not DNS (its rules still judge every name and "
				    "address)");
		if (b.netpol->n_allow == 0)
			cd_log_warn("managed network: no domain is allowed (--allow-domain): the "
				    "command has no network");
		if (verbose) {
			fprintf(stderr, "cordon: managed network: cordon's proxy, pid %ld, on %s\n",
				(long)own.pid, own.endpoint);
			fprintf(stderr,
				"cordon: managed network: cordon's proxy runs as uid %u gid %u, "
				"no capability, no_new_privs, Landlock (the resolver's files; "
				"where the kernel has it), a seccomp allow-list\n",
				geteuid() == 0 ? (unsigned)own_opts.uid : (unsigned)geteuid(),
				geteuid() == 0 ? (unsigned)own_opts.gid : (unsigned)getegid());
		}
	}

	if (verbose) {
		print_enforced(&b);
		print_limits(b.lp);
	}
	for (char **d = b.lp->degraded; d && *d; d++)
		cd_log_warn("%s", *d);

	/*
	 * A managed network: every proxy variable names the relay, over
	 * whatever the environment and --setenv said (nothing else is
	 * reachable from the sandbox anyway).
	 */
	if (b.lp->net_managed) {
		bool socks5 = b.own_proxy && b.netpol && b.netpol->socks5;
		for (const struct cd_env_pair *e = cd_managed_proxy_env; e->name; e++) {
			char *kv = cd_xasprintf("%s=%s", e->name, cd_env_pair_value(e, socks5));
			ops = cd_xreallocarray(ops, n_ops + 1, sizeof(*ops));
			ops[n_ops++] = (struct env_op){ .set = true, .arg = kv };
			cd_strv_append_take(&owned_env, &n_owned_env, kv);
		}
	}
	if (clear_env || n_ops)
		env = build_env(clear_env, ops, n_ops);

	/* Test hook: the Seatbelt wrapper too, its stand-in confined like the command. */
	const char *stand_in = cd_seatbelt_stand_in();
	if (stand_in && b.lp->sandboxed) {
		char *werr = NULL;
		if (cd_seatbelt_wrap(&b, stand_in, argv + a.i, NULL, 0, &wrapped, &werr) < 0) {
			cd_log_error("%s", werr);
			free(werr);
			ret = CD_EXIT_SETUP;
			cd_cli_bound_done(&b);
			goto out;
		}
		cd_log_warn("test hook CORDON_TEST_SEATBELT_EXEC: the command runs through %s "
			    "(standing in for %s), inside the Linux sandbox",
			    stand_in, CD_SEATBELT_EXEC);
	}

	struct cd_spawn_opts so = {
		.argv = wrapped ? wrapped : argv + a.i,
		.arg0 = NULL,
		.envp = env ? env : environ,
		.cwd = b.plan->cwd ? b.plan->cwd : b.cwd,
		.stdin_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.lp = b.lp,
		/*
		 * A sandbox ends with its command: anything the command left
		 * behind is killed (it could otherwise outlive the masks that
		 * confine it). Orphans come back to us as the subreaper.
		 */
		.kill_tree = b.lp && b.lp->sandboxed,
	};
	if (so.kill_tree && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
		cd_log_error("cannot become a child subreaper: %s", strerror(errno));
		ret = CD_EXIT_SETUP;
		cd_cli_bound_done(&b);
		goto out;
	}
	/* Interrupted while setting up: do not start the command at all. */
	for (size_t i = 0; i < CD_ARRAY_SIZE(fwd_signals); i++) {
		if (fwd_pending[fwd_signals[i]]) {
			ret = CD_EXIT_SIGNAL_BASE + fwd_signals[i];
			cd_cli_bound_done(&b);
			goto out;
		}
	}

	struct cd_child *child = NULL;
	struct cd_spawn_error err = { 0 };
	r = cd_spawn(&so, &child, &err);
	if (r < 0 && err.namespaces) {
		/*
		 * The host looked able to make the namespaces but is not (see
		 * cd_spawn_error.namespaces): plan again as if it had no user
		 * namespaces, which keeps what Landlock and seccomp enforce
		 * alone and refuses the rest unless the caller opted down for
		 * exactly that (--allow-degraded), naming the options.
		 */
		char *why = cd_xstrdup(err.msg);
		struct cd_linux_host h = b.host;
		struct cd_linux_plan *lp = NULL;
		char *reterr = NULL;
		h.userns = false;
		h.is_root = false;
		struct cd_linux_opts lo = pol.lopts;
		lo.limits = &b.limits;
		if (cd_linux_plan_build(b.plan, &h, &lo, &lp, &reterr) < 0) {
			cd_log_error("%s; this host cannot create the sandbox's namespaces after "
				     "all (a container's seccomp profile, systemd's "
				     "RestrictNamespaces=, user.max_*_namespaces, or a /proc with "
				     "masked paths), and without them: %s",
				     why, reterr ? reterr : "refused");
			free(reterr);
			free(why);
			ret = CD_EXIT_SETUP;
			cd_cli_bound_done(&b);
			goto out;
		}
		free(reterr);
		cd_log_warn("%s: running without the sandbox's namespaces, as allowed by "
			    "--allow-degraded",
			    why);
		free(why);
		cd_linux_plan_free(b.lp);
		b.lp = lp;
		for (char **d = b.lp->degraded; d && *d; d++)
			cd_log_warn("%s", *d);
		so.lp = b.lp;
		so.kill_tree = b.lp->sandboxed;
		memset(&err, 0, sizeof(err));
		r = cd_spawn(&so, &child, &err);
	}
	if (r < 0) {
		cd_log_error("%s", err.msg);
		ret = err.exit_code ? err.exit_code : CD_EXIT_SETUP;
		cd_cli_bound_done(&b);
		goto out;
	}
	start_forwarding(cd_child_pid(child));
	ret = cd_child_wait(child);
	/* The process group may be reused from here on: forward nothing more. */
	fwd_pid = -1;
	/* What a limit did to the command, in one line: "killed: memory limit 512 MiB reached". */
	char reason[256];
	if (cd_child_limit_reason(child, ret, reason, sizeof(reason)) >= 0)
		cd_log_error("%s", reason);
	cd_child_free(child);
	cd_cli_bound_done(&b);
out:
	if (own.ctl >= 0 && !cd_own_proxy_stop(&own))
		cd_log_warn("managed network: cordon's proxy stopped during the run: the command "
			    "had no network from then on");
	if (audit_fd >= 0)
		close(audit_fd);
	cd_strv_free(wrapped);
	free(env);
	cd_strv_free(owned_env);
	free(ops);
	cd_cli_policy_done(&pol);
	return ret;
}
