/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cordon on macOS: the Seatbelt front end. It has `check`, `explain`, `run`
 * and `probe` (src/mac/probe.c), and with jansson `serve` (CD_MAC_SERVE:
 * the Linux build's server over spawn-posix.c, src/mac/local.mk). The
 * policy model, the binding and the Seatbelt planner are the very code of
 * the Linux build (src/core, sandbox/seatbelt/sbpl.c), the command line is
 * shared with cordon.exe (src/front/front.h), and this file binds, refuses what
 * Seatbelt cannot enforce, and executes /usr/bin/sandbox-exec with the
 * planned argv. Portable POSIX C: it is built on Linux too, as the test
 * program tests/mac/cordon-macos, whose wrapper path (CD_MAC_SANDBOX_EXEC)
 * is a stand-in set at compile time; nothing in the environment changes it.
 *
 * run executes the wrapper in place of cordon (no fork): sandbox-exec
 * applies the policy and executes the command in turn, so the command's
 * exit status and signals are cordon's own, with nothing to forward.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/plan.h"
#include "core/profile.h"
#include "core/util.h"
#include "front/front.h"
#ifdef CD_MAC_SERVE
int cd_cmd_serve(int argc, char **argv); /* src/cmd-serve.c (src/cli.h) */
#endif
#include "mac/probe.h"
#include "profile-lookup.h"
#include "sandbox/linux/plan.h" /* the managed network's proxy variables (OS-free) */
#include "sandbox/seatbelt/sbpl.h"
#include "shared/fd-util.h"
#include "shared/rlimit.h"

/* The wrapper run executes; the planned argv (explain) always names CD_SEATBELT_EXEC. */
#ifndef CD_MAC_SANDBOX_EXEC
#define CD_MAC_SANDBOX_EXEC CD_SEATBELT_EXEC
#endif

static int read_file(const char *name, char **ret, size_t *ret_len)
{
	FILE *f = fopen(name, "rb");
	if (!f)
		return -errno;
	char *buf = cd_xmalloc(CD_FRONT_FILE_MAX + 1);
	size_t n = fread(buf, 1, CD_FRONT_FILE_MAX + 1, f);
	int e = ferror(f) ? (errno ? errno : EIO) : 0;
	fclose(f);
	if (e || n > CD_FRONT_FILE_MAX) {
		free(buf);
		return e ? -e : -EFBIG;
	}
	buf[n] = '\0';
	*ret = buf;
	*ret_len = n;
	return 0;
}

static const struct cd_front front = {
	.prog = "cordon",
	.read_file = read_file,
	.env_network_option = false,
	.network_proxy_option = true,
	.lookup_profile = cd_profile_lookup,
};

static void help(void)
{
	fputs("Usage: cordon check FILE... | --builtin\n"
	      "       cordon explain [POLICY OPTIONS] [--json]\n"
	      "       cordon run [POLICY OPTIONS] [--] CMD [ARG...]\n"
	      "       cordon probe [--json]\n"
#ifdef CD_MAC_SERVE
	      "       cordon serve [SERVE OPTIONS] (cordon serve --help)\n"
#endif
	      "\n"
	      "The macOS Seatbelt backend: the command runs under " CD_SEATBELT_EXEC " with\n"
	      "the policy planned from the profile (cordon explain shows it). Refused before\n"
	      "anything runs: what Seatbelt cannot enforce (a path the policy language\n"
	      "cannot carry, a managed network without a proxy port). probe tries whether\n"
#ifdef CD_MAC_SERVE
	      "Seatbelt works here. serve runs the exec-server protocol's processes the\n"
	      "same way.\n"
#else
	      "Seatbelt works here. This build has no cordon serve (built without jansson).\n"
#endif
	      "\n"
	      "Policy options:\n"
	      "  --profile NAME|FILE     NAME.json looked up in $CORDON_POLICY_PATH,\n"
	      "                          " CD_SYSCONF_POLICYDIR ",\n"
	      "                          " CD_POLICYDIR ", then among\n"
	      "                          the built-in profiles; or a policy file\n"
	      "                          (default read-only)\n"
	      "  --workspace-root DIR    bind :workspace_roots (repeatable)\n"
	      "  --cwd DIR               the command's directory\n"
	      "  --network MODE          restricted, managed or enabled\n"
	      "  --network-proxy tcp:127.0.0.1:PORT\n"
	      "                          managed: the proxy the command may reach (and nothing\n"
	      "                          else); cordon on macOS starts none of its own\n"
	      "  --limit-NAME VALUE      open-files, file-size or core: rlimits the\n"
	      "                          command inherits (over the profile's \"limits\";\n"
	      "                          refused for root); tasks, memory, swap, cpu,\n"
	      "                          cpu-time and the inotify ones cannot be bounded\n"
	      "                          on macOS: refused\n",
	      stdout);
}

/* ---- the binding, as the Linux build binds for --backend seatbelt ---- */

struct bound {
	struct cd_profile *profile;
	struct cd_plan *plan;
	struct cd_seatbelt_plan *sp;
	char *cwd;
	char **roots;
	char **env; /* a managed network's proxy variables (NAME=VALUE), or NULL */
};

static void bound_done(struct bound *b)
{
	cd_seatbelt_plan_free(b->sp);
	cd_plan_free(b->plan);
	cd_profile_free(b->profile);
	free(b->cwd);
	cd_strv_free(b->roots);
	cd_strv_free(b->env);
}

/* path made absolute against base, tidied (".." is the binding's to resolve). */
static char *absolute_normal(const char *base, const char *path)
{
	if (path[0] == '/')
		return cd_path_tidy(path);
	char *joined = cd_path_join(base, path);
	char *r = cd_path_tidy(joined);
	free(joined);
	return r;
}

/* A directory the options name: 0, or an errno. */
static int dir_error(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return errno;
	return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* Bind and plan: 0, or an exit status with the reason printed (*refusal set if refused). */
static int bind_and_plan(const struct cd_front_opts *o, struct bound *b, char **refusal)
{
	int r = cd_front_load_profile(&front, o, &b->profile);
	if (r)
		return r;
	char here[PATH_MAX];
	if (!getcwd(here, sizeof(here))) {
		*refusal =
			cd_xasprintf("cannot determine the current directory: %s", strerror(errno));
		return CD_FRONT_EXIT_SETUP;
	}
	b->cwd = o->cwd ? absolute_normal(here, o->cwd) : cd_xstrdup(here);
	int e = o->cwd ? dir_error(b->cwd) : 0;
	if (e) {
		*refusal = cd_xasprintf("--cwd '%s': %s", o->cwd, strerror(e));
		return CD_FRONT_EXIT_SETUP;
	}
	for (size_t i = 0; i < o->n_roots; i++) {
		cd_strv_push_take(&b->roots, absolute_normal(b->cwd, o->roots[i]));
		if ((e = dir_error(b->roots[i]))) {
			*refusal =
				cd_xasprintf("--workspace-root '%s': %s", o->roots[i], strerror(e));
			return CD_FRONT_EXIT_SETUP;
		}
	}
	/* :minimal is a section of the Seatbelt policy, not a list of paths to bind. */
	static const char *const no_minimal_paths[] = { NULL };
	const char *tmpdir = getenv("TMPDIR");
	struct cd_fs_dir_cache dirs;
	struct cd_fs_ops ops;
	cd_fs_ops_host_cached(&ops, &dirs);
	struct cd_bind_input in = {
		.cwd = b->cwd,
		.workspace_roots = (const char *const *)b->roots,
		.n_workspace_roots = o->n_roots,
		.tmpdir = tmpdir && *tmpdir ? tmpdir : NULL,
		.minimal_paths = no_minimal_paths,
		.ops = &ops,
	};
	char *err = NULL;
	r = cd_plan_build(b->profile, &in, &b->plan, &err);
	cd_fs_dir_cache_done(&dirs);
	if (r < 0) {
		*refusal = err ? err : cd_xasprintf("binding failed: %s", strerror(-r));
		return CD_FRONT_EXIT_SETUP;
	}
	free(err);
	err = NULL;
	/*
	 * Seatbelt's managed network lets the sandbox reach only a proxy's
	 * loopback port. This front end starts no proxy of its own: without
	 * --network-proxy it refuses rather than run a command that asked for
	 * a network with none.
	 */
	uint16_t port = 0;
	if (b->plan->network == CD_NET_MANAGED) {
		struct cd_proxy_endpoint ep;
		if (!o->network_proxy) {
			*refusal = cd_xstrdup(
				"a managed network needs a filtering proxy on a loopback port, "
				"which "
				"cordon on macOS does not start yet: give one with --network-proxy "
				"tcp:127.0.0.1:PORT, or use --network restricted or enabled");
			return CD_FRONT_EXIT_SETUP;
		}
		/* As the Linux build: rules the proxy given would not apply are refused, not dropped. */
		if (b->profile->netpol) {
			err = cd_xasprintf(
				"the network rules of profile '%s' are for cordon's own "
				"proxy: the proxy given with --network-proxy has its own",
				o->profile);
			r = cd_front_usage(&front, err);
			free(err);
			return r;
		}
		if (cd_proxy_endpoint_parse(o->network_proxy, &ep, &err) < 0)
			return cd_front_usage(&front, err);
		if (ep.is_unix || ep.addr[0] != 127 || ep.addr[1] || ep.addr[2] ||
		    ep.addr[3] != 1) {
			free(err);
			err = cd_xasprintf("--network-proxy %s: Seatbelt lets a sandbox reach a "
					   "proxy only at a loopback TCP port (tcp:127.0.0.1:PORT)",
					   o->network_proxy);
			r = cd_front_usage(&front, err);
			free(err);
			return r;
		}
		port = ep.port;
		b->env = cd_managed_proxy_env_at(port, false);
	} else if (o->network_proxy) {
		return cd_front_usage(&front, "--network-proxy needs a managed network "
					      "(--network managed)");
	}
	struct cd_seatbelt_input si = {
		.proxy_ports = &port,
		.n_proxy_ports = port ? 1 : 0,
		.profile = b->profile,
		.plan = b->plan,
		.workspace_roots = (const char *const *)b->roots,
		.n_workspace_roots = o->n_roots,
		.limits = &b->profile->limits, /* the command line's merged in (front.c) */
	/* On macOS the binding resolved /var and /tmp itself; elsewhere, as macOS would. */
#ifdef __APPLE__
		.macos_paths = false,
#else
		.macos_paths = true,
#endif
	};
	r = cd_seatbelt_plan_build(&si, &b->sp, &err);
	if (r < 0) {
		*refusal = err ? err
			       : cd_xasprintf("cannot build the Seatbelt policy: %s", strerror(-r));
		return CD_FRONT_EXIT_SETUP;
	}
	return 0;
}

/* ---- explain ---- */

static void json_strv(struct cd_strbuf *sb, char *const *v)
{
	cd_strbuf_append_c(sb, '[');
	for (size_t i = 0; v && v[i]; i++) {
		if (i)
			cd_strbuf_append_c(sb, ',');
		cd_strbuf_append_json_cstr(sb, v[i]);
	}
	cd_strbuf_append_c(sb, ']');
}

/* The Linux build's `explain --backend seatbelt --json`, its Linux-only members aside. */
static void explain_json(const struct cd_front_opts *o, const struct bound *b, const char *refusal)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"backend\":\"seatbelt\",\"profile\":");
	if (b->profile) {
		cd_strbuf_append(&sb, "{\"name\":");
		cd_strbuf_append_json_cstr(&sb, o->profile);
		cd_strbuf_append(&sb, ",\"origin\":");
		cd_strbuf_append_json_cstr(&sb, b->profile->origin);
		cd_strbuf_append(&sb, ",\"type\":");
		cd_strbuf_append_json_cstr(&sb, cd_profile_type_name(b->profile->type));
		cd_strbuf_append(&sb, ",\"network\":");
		cd_strbuf_append_json_cstr(
			&sb, cd_network_name(b->plan ? b->plan->network : b->profile->network));
		cd_strbuf_printf(&sb, ",\"fs_unrestricted\":%s}",
				 (b->plan ? b->plan->fs_unrestricted : b->profile->fs_unrestricted)
					 ? "true"
					 : "false");
	} else {
		cd_strbuf_append(&sb, "null");
	}
	cd_strbuf_append(&sb, ",\"cwd\":");
	cd_strbuf_append_json_cstr(&sb, b->plan && b->plan->cwd ? b->plan->cwd : b->cwd);
	cd_strbuf_append(&sb, ",\"paths\":[");
	for (size_t i = 0; b->plan && i < b->plan->n_paths; i++) {
		const struct cd_plan_path *pp = &b->plan->paths[i];
		cd_strbuf_append(&sb, i ? ",{\"path\":" : "{\"path\":");
		cd_strbuf_append_json_cstr(&sb, pp->path);
		cd_strbuf_append(&sb, ",\"access\":");
		cd_strbuf_append_json_cstr(&sb, cd_access_name(pp->access));
		cd_strbuf_append(&sb, ",\"type\":");
		cd_strbuf_append_json_cstr(&sb, cd_file_type_name(pp->type));
		cd_strbuf_append(&sb, ",\"why\":");
		cd_strbuf_append_json_cstr(&sb, pp->why ? pp->why : "");
		cd_strbuf_printf(&sb,
				 ",\"carve_out\":%s,\"origin\":", pp->carve_out ? "true" : "false");
		cd_strbuf_append_json_cstr(&sb, cd_origin_name(pp->origin));
		cd_strbuf_append_c(&sb, '}');
	}
	cd_strbuf_append(&sb, "],\"notes\":");
	json_strv(&sb, b->plan ? b->plan->notes : NULL);
	cd_strbuf_append(&sb, ",\"seatbelt\":");
	const struct cd_seatbelt_plan *sp = b->sp;
	if (sp) {
		cd_strbuf_printf(&sb,
				 "{\"sandboxType\":\"macosSeatbelt\",\"sandboxed\":%s,\"argv\":",
				 sp->sandboxed ? "true" : "false");
		if (sp->argv)
			json_strv(&sb, sp->argv);
		else
			cd_strbuf_append(&sb, "null");
		cd_strbuf_append(&sb, ",\"policy\":");
		cd_strbuf_append_json_cstr(&sb, sp->policy);
		cd_strbuf_append(&sb, ",\"params\":[");
		for (size_t i = 0; i < sp->n_params; i++) {
			cd_strbuf_append(&sb, i ? ",{\"key\":" : "{\"key\":");
			cd_strbuf_append_json_cstr(&sb, sp->params[i].key);
			cd_strbuf_append(&sb, ",\"value\":");
			cd_strbuf_append_json_cstr(&sb, sp->params[i].value);
			cd_strbuf_append_c(&sb, '}');
		}
		cd_strbuf_append(&sb, "],\"notes\":");
		json_strv(&sb, sp->notes);
		/* The rlimits, {key: value in the limit's unit}, as the Linux build's. */
		cd_strbuf_append(&sb, ",\"limits\":{");
		for (int l = 0, n = 0; l < CD_LIMIT_COUNT; l++)
			if (cd_limits_has(&sp->rlimits, (enum cd_limit)l))
				cd_strbuf_printf(&sb, "%s\"%s\":%llu", n++ ? "," : "",
						 cd_limit_info((enum cd_limit)l)->key,
						 (unsigned long long)sp->rlimits.v[l]);
		cd_strbuf_append_c(&sb, '}');
		/* A managed network's variables, {NAME: VALUE}. */
		cd_strbuf_append(&sb, ",\"env\":{");
		for (char **e = b->env; e && *e; e++) {
			const char *eq = strchr(*e, '=');
			if (e != b->env)
				cd_strbuf_append_c(&sb, ',');
			cd_strbuf_append_json_string(&sb, *e, (size_t)(eq - *e));
			cd_strbuf_append_c(&sb, ':');
			cd_strbuf_append_json_cstr(&sb, eq + 1);
		}
		cd_strbuf_append(&sb, "}}");
	} else {
		cd_strbuf_append(&sb, "null");
	}
	cd_strbuf_append(&sb, ",\"refusal\":");
	cd_strbuf_append_json_cstr(&sb, refusal);
	cd_strbuf_append(&sb, "}\n");
	fputs(sb.buf, stdout);
	cd_strbuf_done(&sb);
}

static void explain_text(const struct cd_front_opts *o, const struct bound *b)
{
	const struct cd_plan *plan = b->plan;
	const struct cd_seatbelt_plan *sp = b->sp;
	cleanup_free char *h1 = NULL, *h2 = NULL;

	printf("Profile: %s (%s, network %s)\n", cd_vis(o->profile, &h1),
	       cd_profile_type_name(plan->type), cd_network_name(plan->network));
	printf("  cwd: %s\n\nPaths (the most specific path wins; anything not listed is "
	       "denied):\n",
	       cd_vis(plan->cwd, &h1));
	for (size_t i = 0; i < plan->n_paths; i++)
		printf("  %-5s  %s  %s\n", cd_access_name(plan->paths[i].access),
		       cd_vis(plan->paths[i].path, &h1), cd_vis(plan->paths[i].why, &h2));
	for (char **n = plan->notes; n && *n; n++)
		printf("  note: %s\n", cd_vis(*n, &h1));
	printf("\nmacOS Seatbelt wrapper (sandboxType macosSeatbelt):\n");
	cleanup_free char *limits = cd_seatbelt_limits_text(&sp->rlimits);
	fputs(limits, stdout);
	if (!sp->sandboxed) {
		printf("  none: the profile disables the sandbox (plain exec)\n");
		return;
	}
	printf("  exec: %s -p POLICY%s -- COMMAND...\n", CD_SEATBELT_EXEC,
	       sp->n_params ? " -DKEY=VALUE..." : "");
	for (char **n = sp->notes; n && *n; n++)
		printf("  note: %s\n", cd_vis(*n, &h1));
	printf("  parameters:%s\n", sp->n_params ? "" : " none");
	for (size_t i = 0; i < sp->n_params; i++)
		printf("    -D%s=%s\n", cd_vis(sp->params[i].key, &h1),
		       cd_vis(sp->params[i].value, &h2));
	/* The policy text carries no path but the glob regexes' (escaped). */
	printf("  policy:\n");
	for (const char *l = sp->policy; *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);
		cleanup_free char *line = cd_xstrndup(l, n);
		printf("    %s\n", cd_vis(line, &h1));
		l += n + (nl != NULL);
	}
}

/* ---- run ---- */

/*
 * The plan's rlimits on cordon, soft and hard, before the exec: the wrapper
 * and the command inherit them. 0, or an exit status with the reason said.
 */
static int set_rlimits(const struct cd_limits *L)
{
	/*
	 * Root may raise a hard limit again, and on macOS there is no
	 * capability to drop (Linux drops CAP_SYS_RESOURCE): refused, not
	 * pretended.
	 */
	if (L->set && geteuid() == 0) {
		fprintf(stderr,
			"cordon: resource limits cannot be kept from a command run as root "
			"on macOS (it may raise its rlimits again): run as another user, or "
			"leave them out; nothing was run\n");
		return CD_FRONT_EXIT_SETUP;
	}
	/* The planner kept only limits that are rlimits exactly (sbpl.h). */
	for (int l = 0; l < CD_LIMIT_COUNT; l++) {
		if (!cd_limits_has(L, (enum cd_limit)l))
			continue;
		enum cd_rlimit r = (enum cd_rlimit)cd_limit_rlimit((enum cd_limit)l);
		int res = cd_rlimit_resource(r);
		uint64_t v = L->v[l];
		struct rlimit rl = { .rlim_cur = (rlim_t)v, .rlim_max = (rlim_t)v };
		if ((uint64_t)rl.rlim_cur != v || setrlimit(res, &rl) < 0) {
			int e = (uint64_t)rl.rlim_cur != v ? ERANGE : errno;
			struct rlimit now = { 0 };
			getrlimit(res, &now);
			fprintf(stderr,
				"cordon: cannot set the %s limit to %llu (%s): %s (the hard limit "
				"here is %llu); nothing was run\n",
				cd_limit_info((enum cd_limit)l)->name, (unsigned long long)v,
				cd_rlimit_name(r), strerror(e), (unsigned long long)now.rlim_max);
			return CD_FRONT_EXIT_SETUP;
		}
	}
	return 0;
}

/* Never returns: the command (through the wrapper) replaces cordon, or an exit status. */
static int run(char **cmd, const struct bound *b)
{
	if (chdir(b->plan->cwd) < 0) {
		fprintf(stderr, "cordon: cannot enter '%s': %s\n", b->plan->cwd, strerror(errno));
		return CD_FRONT_EXIT_SETUP;
	}
	int r = set_rlimits(&b->sp->rlimits);
	if (r)
		return r;
	fflush(stdout);
	fflush(stderr);
	if (!b->sp->sandboxed) {
		/* A profile that disables the sandbox: the command as asked. */
		execvp(cmd[0], cmd);
		int e = errno;
		fprintf(stderr, "cordon: %s: %s\n", cmd[0], strerror(e));
		return e == ENOENT ? 127 : 126;
	}
	/* A managed network: the proxy variables name the proxy, over the caller's. */
	for (char **e = b->env; e && *e; e++) {
		char *eq = strchr(*e, '=');
		*eq = '\0';
		int se = setenv(*e, eq + 1, 1);
		*eq = '=';
		if (se < 0) {
			fprintf(stderr, "cordon: cannot set %s: %s\n", *e, strerror(errno));
			return CD_FRONT_EXIT_SETUP;
		}
	}
	char **argv = NULL;
	cd_strv_push(&argv, CD_MAC_SANDBOX_EXEC);
	for (char **a = b->sp->argv + 1; *a; a++)
		cd_strv_push(&argv, *a);
	for (char **a = cmd; *a; a++)
		cd_strv_push(&argv, *a);
	execv(CD_MAC_SANDBOX_EXEC, argv);
	/* Fail closed: without the wrapper there is no sandbox, so nothing runs. */
	fprintf(stderr,
		"cordon: cannot execute %s (Seatbelt, the macOS sandbox): %s; nothing was run\n",
		CD_MAC_SANDBOX_EXEC, strerror(errno));
	cd_strv_free(argv);
	return CD_FRONT_EXIT_SETUP;
}

static int explain_or_run(int argc, char **argv, bool is_run)
{
	struct cd_front_opts o;
	int r = cd_front_parse_opts(&front, argc, argv, is_run, &o);
	if (r)
		return r;
	struct bound b = { 0 };
	char *refusal = NULL;
	r = bind_and_plan(&o, &b, &refusal);
	if (r && !refusal) { /* a usage error, or a profile that does not load: said */
		bound_done(&b);
		return r;
	}
	if (!is_run && o.json)
		explain_json(&o, &b, refusal);
	else if (!is_run && !r)
		explain_text(&o, &b);
	if (refusal)
		fprintf(stderr, "cordon: %s\n", refusal);
	else if (is_run && !r)
		r = run(argv + o.cmd, &b);
	free(refusal);
	bound_done(&b);
	return r;
}

int main(int argc, char **argv)
{
	/* As the Linux build: what cordon opens never becomes a closed 0, 1 or 2. */
	if (cd_std_fds_ensure() < 0)
		return CD_FRONT_EXIT_SETUP; /* nothing may be printed safely: stderr may be missing */
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		help();
		return argc < 2 ? CD_FRONT_EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("cordon %s (macos, seatbelt: %s)\n", PACKAGE_VERSION, CD_MAC_SANDBOX_EXEC);
		return 0;
	}
	if (!strcmp(argv[1], "check"))
		return cd_front_check(&front, argc, argv);
	if (!strcmp(argv[1], "explain"))
		return explain_or_run(argc, argv, false);
	if (!strcmp(argv[1], "run"))
		return explain_or_run(argc, argv, true);
	if (!strcmp(argv[1], "probe"))
		return cd_mac_probe(argc, argv, CD_MAC_SANDBOX_EXEC);
#ifdef CD_MAC_SERVE
	if (!strcmp(argv[1], "serve"))
		return cd_cmd_serve(argc - 1, argv + 1);
#else
	if (!strcmp(argv[1], "serve"))
		return cd_front_usage(&front, "serve is not in this build (built without jansson)");
#endif
#ifdef CD_MAC_SERVE
	char *m =
		cd_xasprintf("unknown command '%s' (check, explain, run, probe or serve)", argv[1]);
#else
	char *m = cd_xasprintf("unknown command '%s' (check, explain, run or probe)", argv[1]);
#endif
	int r = cd_front_usage(&front, m);
	free(m);
	return r;
}
