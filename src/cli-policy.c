/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin-profiles.h"
#include "cli-policy.h"
#include "core/glob.h"
#include "profile-lookup.h"
#include "sandbox/backend.h"
#include "shared/fd-util.h"

#define DEFAULT_PROFILE "read-only"

const char cd_cli_policy_help[] =
	"Policy options:\n"
	"  --profile NAME|FILE     a profile name, looked up as NAME.json in\n"
	"                          $CORDON_POLICY_PATH, " CD_SYSCONF_POLICYDIR ",\n"
	"                          " CD_POLICYDIR ", then among the built-in\n"
	"                          profiles; or a policy file; default: read-only\n"
	"  --workspace-root DIR    what :workspace_roots binds to (repeatable)\n"
	"  --cwd DIR               the command's working directory (default: current)\n"
	"  --allow-read PATH       add a read entry (absolute or :root, :minimal,\n"
	"                          :workspace_roots[/SUB], :tmpdir, :slash_tmp)\n"
	"  --allow-write PATH      add a write entry\n"
	"  --deny PATH             add a deny entry\n"
	"  --deny-glob PATTERN     add a glob_pattern deny entry (relative to --cwd, or\n"
	"                          codex-project-roots://PATTERN per workspace root)\n"
	"  --network MODE          restricted, managed or enabled (overrides the profile)\n"
	"  --network-proxy ENDPOINT  the proxy you run that a managed network goes\n"
	"                          through: unix:/PATH or tcp:A.B.C.D:PORT; without\n"
	"                          it, cordon runs its own proxy with these rules:\n"
	"  --allow-domain PATTERN  allow a name: NAME, *.NAME (subdomains only),\n"
	"                          **.NAME (the name and subdomains), * (any name);\n"
	"                          repeatable; none allowed: no network at all\n"
	"  --deny-domain PATTERN   deny a name (wins over allow; repeatable)\n"
	"  --allow-cidr ADDR[/LEN] allow IP literals and addresses in a range that\n"
	"                          are refused otherwise (loopback, private...)\n"
	"  --proxy-mode MODE       full (default) or limited (GET, HEAD, OPTIONS on\n"
	"                          plain HTTP only; no CONNECT)\n"
	"  --socks5                cordon's proxy takes SOCKS5 (socks5h) too, on the\n"
	"                          relay's port; ALL_PROXY and FTP_PROXY name it\n"
	"  --allow-degraded=FEATURE  explicit opt-down (repeatable); FEATURE:\n"
	"                          protected-metadata, pid-isolation, deny-masks,\n"
	"                          file-attributes, nested-repositories, network (the\n"
	"                          Windows backend: a restricted network by environment\n"
	"                          only); or a limit\n"
	"                          that cannot be enforced here: tasks, memory (then\n"
	"                          RLIMIT_AS per process), swap, cpu,\n"
	"                          inotify-instances or inotify-watches\n"
	"  --min-landlock-abi N    refuse when the kernel's Landlock ABI is below N (default 1)\n"
	"\n"
	"Resource limits (over the profile's \"limits\"; refused when they cannot be\n"
	"enforced, see cordon probe):\n"
	"  --limit-tasks N         processes and threads in the sandbox at once\n"
	"  --limit-memory SIZE     memory of the whole sandbox (N, NK, NM, NG, NT)\n"
	"  --limit-swap SIZE       swap of the whole sandbox (0 with a memory limit)\n"
	"  --limit-cpu CPUS        CPU quota: 0.5, 2, 150%\n"
	"  --limit-cpu-time TIME   CPU time of each process (N, Ns, Nm, Nh)\n"
	"  --limit-open-files N    open files of each process\n"
	"  --limit-file-size SIZE  the largest file a process may write\n"
	"  --limit-core SIZE       the largest core dump (0: none)\n"
	"  --private-tmp[=SIZE]    a private tmpfs on /tmp (default size 1G)\n"
	"  --limit-inotify-instances N\n"
	"                          the whole sandbox's inotify instances (EMFILE past it)\n"
	"  --limit-inotify-watches N\n"
	"                          the whole sandbox's inotify watches (ENOSPC past it)\n";

void cd_cli_policy_init(struct cd_cli_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->network = -1;
	p->lopts.min_landlock_abi = 1;
}

void cd_cli_policy_done(struct cd_cli_policy *p)
{
	cd_netpolicy_done(&p->netpol);
	free(p->roots);
	free(p->extra);
	memset(p, 0, sizeof(*p));
}

int cd_cli_policy_option(struct cd_cli_policy *p, const char *cmd, int id, const char *arg)
{
	switch (id) {
	case CD_OPT_PROFILE:
		if (!*arg) {
			cd_cli_usage_error(cmd, "--profile needs a name or a file");
			return -1;
		}
		p->profile = arg;
		return 0;
	case CD_OPT_WORKSPACE_ROOT:
		if (!*arg) {
			cd_cli_usage_error(cmd, "--workspace-root needs a directory");
			return -1;
		}
		p->roots = cd_xreallocarray(p->roots, p->n_roots + 1, sizeof(*p->roots));
		p->roots[p->n_roots++] = arg;
		return 0;
	case CD_OPT_CWD:
		if (!*arg) {
			cd_cli_usage_error(cmd, "--cwd needs a directory");
			return -1;
		}
		p->cwd = arg;
		return 0;
	case CD_OPT_ALLOW_READ:
	case CD_OPT_ALLOW_WRITE:
	case CD_OPT_DENY:
	case CD_OPT_DENY_GLOB:
		p->extra = cd_xreallocarray(p->extra, p->n_extra + 1, sizeof(*p->extra));
		p->extra[p->n_extra] = (struct cd_cli_extra){
			.access = id == CD_OPT_ALLOW_READ    ? CD_ACCESS_READ
				  : id == CD_OPT_ALLOW_WRITE ? CD_ACCESS_WRITE
							     : CD_ACCESS_DENY,
			.glob = id == CD_OPT_DENY_GLOB,
			.arg = arg,
		};
		p->n_extra++;
		return 0;
	case CD_OPT_NETWORK: {
		int n = cd_network_from_name(arg);
		if (n < 0) {
			cd_cli_usage_error(
				cmd,
				"--network: unknown mode '%s' (restricted, managed or enabled)",
				arg);
			return -1;
		}
		p->network = n;
		return 0;
	}
	case CD_OPT_NETWORK_PROXY: {
		struct cd_proxy_endpoint e;
		char *why = NULL;
		if (cd_proxy_endpoint_parse(arg, &e, &why) < 0) {
			cd_cli_usage_error(cmd, "--network-proxy: %s", why);
			free(why);
			return -1;
		}
		p->lopts.managed_proxy = arg;
		return 0;
	}
	case CD_OPT_ALLOW_DOMAIN:
	case CD_OPT_DENY_DOMAIN: {
		const char *why = NULL;
		bool deny = id == CD_OPT_DENY_DOMAIN;
		if (cd_netpolicy_add_domain(&p->netpol, arg, deny, &why) < 0) {
			cd_cli_usage_error(cmd, "--%s '%s': %s",
					   deny ? "deny-domain" : "allow-domain", arg, why);
			return -1;
		}
		p->net_rules = true;
		return 0;
	}
	case CD_OPT_ALLOW_CIDR: {
		const char *why = NULL;
		if (cd_netpolicy_add_cidr(&p->netpol, arg, &why) < 0) {
			cd_cli_usage_error(cmd, "--allow-cidr '%s': %s", arg, why);
			return -1;
		}
		p->net_rules = true;
		return 0;
	}
	case CD_OPT_PROXY_MODE: {
		enum cd_netmode m = cd_netmode_from_string(arg);
		if (m == CD_NETMODE_INVALID) {
			cd_cli_usage_error(cmd, "--proxy-mode: unknown mode '%s' (full or limited)",
					   arg);
			return -1;
		}
		p->netpol.mode = m;
		p->net_rules = true;
		p->proxy_mode_given = true;
		return 0;
	}
	case CD_OPT_SOCKS5:
		p->netpol.socks5 = true;
		p->net_rules = true;
		return 0;
	case CD_OPT_ALLOW_DEGRADED:
		/* Repeatable: each names one feature. */
		if (cd_streq(arg, "protected-metadata")) {
			p->lopts.degraded |= CD_DEGRADE_PROTECTED_METADATA;
			return 0;
		}
		if (cd_streq(arg, "pid-isolation")) {
			p->lopts.degraded |= CD_DEGRADE_PID_ISOLATION;
			return 0;
		}
		if (cd_streq(arg, "deny-masks")) {
			p->lopts.degraded |= CD_DEGRADE_DENY_MASKS;
			return 0;
		}
		if (cd_streq(arg, "file-attributes")) {
			p->lopts.degraded |= CD_DEGRADE_FILE_ATTRIBUTES;
			return 0;
		}
		if (cd_streq(arg, "network")) {
			p->allow_env_network = true;
			return 0;
		}
		if (cd_streq(arg, "nested-repositories")) {
			p->lopts.degraded |= CD_DEGRADE_NESTED_REPOSITORIES;
			return 0;
		}
		/*
		 * The limits that may be out of reach on a host: cgroups,
		 * RLIMIT_NPROC, a user namespace of the sandbox's own.
		 */
		if (cd_streq(arg, "tasks") || cd_streq(arg, "memory") || cd_streq(arg, "swap") ||
		    cd_streq(arg, "cpu") || cd_streq(arg, "inotify-instances") ||
		    cd_streq(arg, "inotify-watches")) {
			p->lopts.degraded_limits |= 1u << cd_limit_from_name(arg);
			return 0;
		}
		cd_cli_usage_error(cmd,
				   "--allow-degraded: unknown feature '%s' (protected-metadata, "
				   "pid-isolation, deny-masks, file-attributes, "
				   "nested-repositories, network, tasks, memory, swap, cpu, "
				   "inotify-instances or inotify-watches)",
				   arg);
		return -1;
	case CD_OPT_MIN_LANDLOCK_ABI: {
		uint64_t v;
		if (cd_parse_u64(arg, &v) < 0 || v > UINT_MAX) {
			cd_cli_usage_error(cmd, "--min-landlock-abi: '%s' is not a number", arg);
			return -1;
		}
		p->lopts.min_landlock_abi = (unsigned)v;
		return 0;
	}
	default:
		break;
	}
	if (id >= CD_OPT_LIMIT_BASE && id < CD_OPT_LIMIT_BASE + CD_LIMIT_COUNT) {
		enum cd_limit l = (enum cd_limit)(id - CD_OPT_LIMIT_BASE);
		uint64_t v = CD_PRIVATE_TMP_DEFAULT;
		char *err = NULL;
		if (arg && cd_limit_parse(l, arg, &v, &err) < 0) {
			cd_cli_usage_error(cmd, "--%s%s: %s",
					   l == CD_LIMIT_PRIVATE_TMP ? "" : "limit-",
					   cd_limit_info(l)->name, err);
			free(err);
			return -1;
		}
		cd_limits_put(&p->limits, l, v);
		return 0;
	}
	cd_cli_usage_error(cmd, "internal error: unhandled option %d", id);
	return -1;
}

void cd_cli_bound_done(struct cd_cli_bound *b)
{
	cd_netpolicy_done(&b->own_netpol);
	cd_linux_plan_free(b->lp);
	cd_seatbelt_plan_free(b->sp);
	cd_strv_free(b->sp_env);
	cd_windows_plan_free(b->wp);
	cd_plan_free(b->plan);
	cd_profile_free(b->profile);
	free(b->profile_path);
	free(b->cwd);
	cd_strv_free(b->roots);
	free(b->refusal);
	memset(b, 0, sizeof(*b));
}

static int refuse(struct cd_cli_bound *b, char *msg)
{
	/*
	 * The test hook makes features look absent; a refusal it caused must
	 * not send an admin chasing a kernel option.
	 */
	const char *hook = getenv("CORDON_TEST_DISABLE");
	if (hook && *hook) {
		char *m = cd_xasprintf("%s (note: CORDON_TEST_DISABLE=%s is set)", msg, hook);
		free(msg);
		msg = m;
	}
	free(b->refusal);
	b->refusal = msg;
	return CD_BIND_REFUSED;
}

/* Parse a profile's text; origin names it ("built-in" or the file) in b->profile. */
static int parse_profile(struct cd_cli_bound *b, const char *text, size_t len, const char *origin)
{
	struct cd_parse_error perr = { 0 };
	int r = cd_profile_parse_file_text(text, len, origin, &b->profile, &perr);
	if (r < 0) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, origin);
		if (perr.line)
			cd_strbuf_printf(&sb, ":%u:%u", perr.line, perr.col);
		cd_strbuf_printf(&sb, ": error: %s", perr.msg ? perr.msg : strerror(-r));
		if (perr.path && *perr.path)
			cd_strbuf_printf(&sb, " (at %s)", perr.path);
		cd_parse_error_done(&perr);
		return refuse(b, cd_strbuf_steal(&sb));
	}
	return CD_BIND_OK;
}

struct listed {
	char *name;   /* owned */
	char *origin; /* owned */
};

static int listed_cmp(const void *a, const void *b)
{
	return strcmp(((const struct listed *)a)->name, ((const struct listed *)b)->name);
}

static bool listed_has(const struct listed *l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (cd_streq(l[i].name, name))
			return true;
	return false;
}

/* A name that --profile NAME looks up as NAME.json (not a file argument). */
static bool plain_name(const char *s, size_t n)
{
	if (n == 0 || s[0] == '.' || (n >= 5 && !memcmp(s + n - 5, ".json", 5)))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

/* Add name to l with the origin the lookup takes (or refuses); a name found nowhere is left out. */
static void list_add(struct listed **l, size_t *n, char *const *dirs, const char *name)
{
	char *path = NULL;
	struct stat st;
	int e;

	if (listed_has(*l, *n, name))
		return;
	if (cd_profile_find_entry(dirs, name, &path, &st, &e) < 0) {
		if (!cd_builtin_profile_find(name))
			return;
		path = cd_xstrdup(CD_BUILTIN_ORIGIN);
	}
	*l = cd_xreallocarray(*l, *n + 1, sizeof(**l));
	(*l)[*n].origin = path;
	(*l)[(*n)++].name = cd_xstrdup(name);
}

int cd_cli_list_profiles(char **reterr_msg)
{
	struct listed *l = NULL;
	size_t n = 0;
	char **dirs = NULL;
	int r = cd_profile_dirs(&dirs, reterr_msg);
	if (r < 0)
		return r;

	/*
	 * The names are what the directories hold and the built-ins; each
	 * one's origin is where the lookup itself stops, so that the list
	 * and --profile agree even for a directory that can be searched but
	 * not read.
	 */
	for (char **d = dirs; *d; d++) {
		DIR *dir = opendir(*d);
		if (!dir)
			continue;
		struct dirent *de;
		while ((de = readdir(dir))) {
			size_t len = strlen(de->d_name);
			/* Whatever the lookup would take, even if it then refuses it. */
			if (len <= 5 || !cd_streq(de->d_name + len - 5, ".json") ||
			    !plain_name(de->d_name, len - 5))
				continue;
			cleanup_free char *name = cd_xstrndup(de->d_name, len - 5);
			list_add(&l, &n, dirs, name);
		}
		closedir(dir);
	}
	for (const struct cd_builtin_profile *bp = cd_builtin_profiles; bp->name; bp++)
		list_add(&l, &n, dirs, bp->name);
	cd_strv_free(dirs);
	if (n)
		qsort(l, n, sizeof(*l), listed_cmp);
	for (size_t i = 0; i < n; i++) {
		printf("%s\t%s\n", l[i].name, l[i].origin);
		free(l[i].name);
		free(l[i].origin);
	}
	free(l);
	return 0;
}

static int load_profile(struct cd_cli_bound *b, const char *arg)
{
	cleanup_free char *text = NULL;
	size_t len = 0;
	const char *origin;
	int r;

	b->profile_name = arg;
	if (cd_profile_is_file_arg(arg)) {
		/* A file named on the command line may be a pipe (/dev/stdin). */
		b->profile_path = cd_xstrdup(arg);
		r = cd_cli_read_file(arg, CD_PROFILE_MAX_BYTES, &text, &len);
		if (r == -EFBIG)
			return refuse(b,
				      cd_xasprintf("profile '%s': file is larger than 1 MiB", arg));
		if (r < 0)
			return refuse(
				b, cd_xasprintf("cannot read profile '%s': %s", arg, strerror(-r)));
		origin = b->profile_path;
	} else {
		char *err = NULL;
		r = cd_profile_lookup(arg, &text, &len, &b->profile_path, &err);
		if (r < 0)
			return refuse(b, err);
		if (r == 1) {
			/* Parsed in place: the text is the binary's own. */
			const struct cd_builtin_profile *bp = cd_builtin_profile_find(arg);
			return parse_profile(b, bp->text, bp->len, CD_BUILTIN_ORIGIN);
		}
		origin = b->profile_path;
	}
	return parse_profile(b, text, len, origin);
}

/*
 * Make path absolute against base and tidy it (cd_path_tidy).
 * ".." stays for the binding, which resolves it after the symlink before
 * it, as chdir() and open() do (not as a shell's `cd` does), so that a
 * path means the file the kernel would reach through it; the binding also
 * decides whether following a symlink is safe.
 */
static char *absolute_normal(const char *base, const char *path)
{
	if (path[0] == '/')
		return cd_path_tidy(path);
	cleanup_free char *joined = cd_path_join(base, path);
	return cd_path_tidy(joined);
}

static char *current_dir(void)
{
	char buf[PATH_MAX];
	if (getcwd(buf, sizeof(buf)))
		return cd_xstrdup(buf);
	return NULL;
}

int cd_cli_policy_bind(const struct cd_cli_policy *p, const char *cmd, struct cd_cli_bound *b)
{
	int r;

	memset(b, 0, sizeof(*b));
	b->backend = p->backend;
	b->allow_env_network = p->allow_env_network;
	r = load_profile(b, p->profile ? p->profile : DEFAULT_PROFILE);
	if (r < 0)
		return r;
	struct cd_profile *prof = b->profile;
	/* The command line's limits over the profile's, one by one. */
	b->limits = prof->limits;
	for (int l = 0; l < CD_LIMIT_COUNT; l++)
		if (cd_limits_has(&p->limits, (enum cd_limit)l))
			cd_limits_put(&b->limits, (enum cd_limit)l, p->limits.v[l]);

	if (p->n_extra > 0 && (prof->type != CD_PROFILE_MANAGED || prof->fs_unrestricted)) {
		cd_cli_usage_error(
			cmd,
			"--allow-read, --allow-write, --deny and --deny-glob need a managed "
			"profile "
			"with a restricted file system ('%s' is %s%s)",
			b->profile_name, cd_profile_type_name(prof->type),
			prof->fs_unrestricted ? " with an unrestricted file system" : "");
		return CD_BIND_USAGE;
	}
	for (size_t i = 0; i < p->n_extra; i++) {
		struct cd_fs_entry e;
		const char *why = NULL;
		memset(&e, 0, sizeof(e));
		if (p->extra[i].glob) {
			char *gerr = NULL;
			if (cd_glob_check(p->extra[i].arg, &gerr) < 0) {
				cd_cli_usage_error(cmd, "--deny-glob: %s", gerr);
				free(gerr);
				return CD_BIND_USAGE;
			}
			e = (struct cd_fs_entry){ .kind = CD_ENTRY_GLOB,
						  .path = (char *)p->extra[i].arg,
						  .access = CD_ACCESS_DENY };
			cd_profile_add_entry(prof, &e);
			continue;
		}
		if (cd_entry_from_cli(p->extra[i].arg, p->extra[i].access, &e, &why) < 0) {
			cd_cli_usage_error(cmd, "--%s '%s': %s",
					   p->extra[i].access == CD_ACCESS_READ	   ? "allow-read"
					   : p->extra[i].access == CD_ACCESS_WRITE ? "allow-write"
										   : "deny",
					   p->extra[i].arg, why ? why : "invalid path");
			return CD_BIND_USAGE;
		}
		cd_profile_add_entry(prof, &e);
		cd_fs_entry_done(&e);
	}
	if (p->network >= 0) {
		if (prof->type == CD_PROFILE_DISABLED && p->network != CD_NET_ENABLED) {
			cd_cli_usage_error(cmd,
					   "--network %s needs a managed or external profile ('%s' "
					   "disables the sandbox)",
					   cd_network_name(p->network), b->profile_name);
			return CD_BIND_USAGE;
		}
		prof->network = (enum cd_network)p->network;
	}
	if (p->lopts.managed_proxy && prof->network != CD_NET_MANAGED) {
		cd_cli_usage_error(cmd,
				   "--network-proxy needs a managed network (--network "
				   "managed), not %s",
				   cd_network_name(prof->network));
		return CD_BIND_USAGE;
	}
	if (p->net_rules && prof->network != CD_NET_MANAGED) {
		cd_cli_usage_error(cmd,
				   "--allow-domain, --deny-domain, --allow-cidr, --proxy-mode and "
				   "--socks5 need a managed network (--network managed), not %s",
				   cd_network_name(prof->network));
		return CD_BIND_USAGE;
	}
	if (p->net_rules && p->lopts.managed_proxy) {
		cd_cli_usage_error(
			cmd, "--allow-domain, --deny-domain, --allow-cidr, "
			     "--proxy-mode and --socks5 are the rules of cordon's own proxy: the "
			     "proxy given with --network-proxy has its own");
		return CD_BIND_USAGE;
	}
	/*
	 * A managed network with no proxy given: cordon runs its own (cordon
	 * run starts it; the plan names a placeholder until then).
	 */
	if (prof->netpol && prof->network == CD_NET_MANAGED && p->lopts.managed_proxy) {
		cd_cli_usage_error(cmd,
				   "the network rules of profile '%s' are for cordon's own proxy: "
				   "the proxy given with --network-proxy has its own",
				   b->profile_name);
		return CD_BIND_USAGE;
	}
	struct cd_linux_opts lopts = p->lopts;
	if (prof->network == CD_NET_MANAGED && !lopts.managed_proxy) {
		lopts.managed_proxy = CD_OWN_PROXY_PLACEHOLDER;
		b->own_proxy = true;
		/* The profile's rules, then the command line's on top. */
		if (prof->netpol) {
			b->own_netpol.mode = prof->netpol->mode;
			b->own_netpol.socks5 = prof->netpol->socks5;
			cd_netpolicy_append(&b->own_netpol, prof->netpol);
		}
		if (p->proxy_mode_given)
			b->own_netpol.mode = p->netpol.mode;
		if (p->netpol.socks5)
			b->own_netpol.socks5 = true;
		cd_netpolicy_append(&b->own_netpol, &p->netpol);
		b->netpol = &b->own_netpol;
		const char *why = NULL;
		if (cd_netpolicy_check(b->netpol, &why) < 0) {
			cd_cli_usage_error(cmd, "cordon's proxy: %s", why);
			return CD_BIND_USAGE;
		}
	}

	cleanup_free char *here = current_dir();
	if (!here)
		return refuse(b, cd_xasprintf("cannot determine the current directory: %s",
					      strerror(errno)));
	if (p->cwd) {
		b->cwd = absolute_normal(here, p->cwd);
		struct stat st;
		if (stat(b->cwd, &st) < 0)
			return refuse(b, cd_xasprintf("--cwd '%s': %s", p->cwd, strerror(errno)));
		if (!S_ISDIR(st.st_mode))
			return refuse(b, cd_xasprintf("--cwd '%s': %s", p->cwd, strerror(ENOTDIR)));
	} else {
		b->cwd = cd_steal_pointer(&here);
	}

	char **roots = cd_xcalloc(p->n_roots + 1, sizeof(*roots));
	for (size_t i = 0; i < p->n_roots; i++) {
		roots[i] = absolute_normal(b->cwd, p->roots[i]);
		/* As for --cwd: a root that is not there is a mistake, said plainly. */
		struct stat st;
		int e = stat(roots[i], &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
		if (e) {
			cd_strv_free(roots);
			return refuse(b, cd_xasprintf("--workspace-root '%s': %s", p->roots[i],
						      strerror(e)));
		}
	}
	struct cd_linux_host host;
	if (p->backend != CD_CLI_BACKEND_LINUX) {
		r = cd_cli_bind_profile(b, (const char *const *)roots, p->n_roots, &lopts, NULL);
		cd_strv_free(roots);
		return r;
	}
#ifndef __APPLE__ /* there, cd_cli_bind_profile refuses a Linux plan */
	if (p->test_namespaces && b->profile->type != CD_PROFILE_DISABLED)
		cd_linux_probe_host(CD_PROBE_ALL | CD_PROBE_NS_TEST, &host);
#endif
	r = cd_cli_bind_profile(
		b, (const char *const *)roots, p->n_roots, &lopts,
		p->test_namespaces && b->profile->type != CD_PROFILE_DISABLED ? &host : NULL);
	cd_strv_free(roots);
	return r;
}

static char *explain_sid(void *ctx, const char *key)
{
	(void)ctx;
	return cd_windows_sid_derive("cordon explain", key);
}

/*
 * A managed network under Seatbelt: no network namespace and no relay, so
 * the sandbox may reach only the proxy's own loopback TCP port, and the
 * proxy variables name it. That port must be given (--network-proxy
 * tcp:127.0.0.1:PORT): cordon's own proxy starts only on Linux so far.
 */
static int seatbelt_proxy_port(struct cd_cli_bound *b, const struct cd_linux_opts *lopts,
			       uint16_t *ret)
{
	struct cd_proxy_endpoint ep;
	char *err = NULL;

	if (b->own_proxy || !lopts || !lopts->managed_proxy)
		return refuse(b, cd_xstrdup("the Seatbelt backend's managed network goes "
					    "through a proxy on a loopback TCP port: give it "
					    "with --network-proxy tcp:127.0.0.1:PORT (cordon "
					    "starts its own proxy only on Linux so far)"));
	if (cd_proxy_endpoint_parse(lopts->managed_proxy, &ep, &err) < 0)
		return refuse(b, err);
	if (ep.is_unix || ep.addr[0] != 127 || ep.addr[1] != 0 || ep.addr[2] != 0 ||
	    ep.addr[3] != 1)
		return refuse(b, cd_xasprintf("the Seatbelt backend lets a sandbox reach a proxy "
					      "only at a loopback TCP port (remote ip "
					      "\"localhost:PORT\"), not %s: give "
					      "--network-proxy tcp:127.0.0.1:PORT (cordon serve: "
					      "name a proxy at 127.0.0.1 in the proxy variables)",
					      lopts->managed_proxy));
	*ret = ep.port;
	/* The variables Linux points at its relay, pointing at the proxy itself. */
	b->sp_env = cd_managed_proxy_env_at(ep.port, false);
	return 0;
}

/* The Windows restricted-token plan, from a host that is not Windows (explain). */
static int bind_windows(struct cd_cli_bound *b)
{
	struct cd_windows_input wi = {
		.profile = b->profile,
		.plan = b->plan,
		.drive = "C:",
		.home = NULL,
		.allow_env_network = b->allow_env_network,
		.sids = { .sid_for = explain_sid },
		.limits = &b->limits,
	};
	char *reterr = NULL;
	int r = cd_windows_plan_build(&wi, &b->wp, &reterr);
	if (r < 0)
		return refuse(b, reterr ? reterr
					: cd_xasprintf("cannot build the Windows plan: %s",
						       strerror(-r)));
	return CD_BIND_OK;
}

int cd_cli_bind_profile(struct cd_cli_bound *b, const char *const *roots, size_t n_roots,
			const struct cd_linux_opts *lopts, const struct cd_linux_host *host)
{
	const struct cd_profile *prof = b->profile;
	const char *tmpdir = getenv("TMPDIR");
	for (size_t i = 0; i < n_roots; i++)
		cd_strv_push(&b->roots, roots[i]);
	struct cd_fs_dir_cache dirs;
	struct cd_fs_ops ops;
	cd_fs_ops_host_cached(&ops, &dirs);
	struct cd_bind_input in = {
		.cwd = b->cwd,
		.workspace_roots = roots,
		.n_workspace_roots = n_roots,
		.tmpdir = tmpdir && *tmpdir ? tmpdir : NULL,
		.minimal_paths = NULL,
		.ops = &ops,
		.skip_nested_scan = lopts && (lopts->degraded & CD_DEGRADE_NESTED_REPOSITORIES),
	};
	/* macOS's :minimal is a section of the Seatbelt policy, not a list of paths. */
	static const char *const no_minimal_paths[] = { NULL };
	if (b->backend == CD_CLI_BACKEND_SEATBELT)
		in.minimal_paths = no_minimal_paths;
	char *reterr = NULL;
	int r = cd_plan_build(prof, &in, &b->plan, &reterr);
	cd_fs_dir_cache_done(&dirs);
	if (r < 0)
		return refuse(b,
			      reterr ? reterr : cd_xasprintf("binding failed: %s", strerror(-r)));
	free(reterr);
	if (b->backend == CD_CLI_BACKEND_WINDOWS)
		return bind_windows(b);
	if (b->backend == CD_CLI_BACKEND_SEATBELT) {
		uint16_t port = 0;
		if (prof->network == CD_NET_MANAGED) {
			r = seatbelt_proxy_port(b, lopts, &port);
			if (r < 0)
				return r;
		}
		/* cordon serve's own files (its socket and token): denied whatever is granted. */
		const char *hidden[8];
		size_t n_hidden = 0;
		for (size_t i = 0; lopts && i < lopts->n_hidden; i++) {
			if (n_hidden == CD_ARRAY_SIZE(hidden))
				return refuse(b,
					      cd_xstrdup("too many files to hide from a sandbox"));
			hidden[n_hidden++] = lopts->hidden[i].path;
		}
		/* Planned for macOS from this host: rewrite as a macOS binding would resolve. */
		struct cd_seatbelt_input si = {
			.hidden = hidden,
			.n_hidden = n_hidden,
			.proxy_ports = &port,
			.n_proxy_ports = port ? 1 : 0,
			.profile = prof,
			.plan = b->plan,
			.workspace_roots = roots,
			.n_workspace_roots = n_roots,
			.limits = &b->limits,
#ifdef __APPLE__
			.macos_paths = false,
#else
			.macos_paths = true,
#endif
		};
		reterr = NULL;
		r = cd_seatbelt_plan_build(&si, &b->sp, &reterr);
		if (r < 0)
			return refuse(b,
				      reterr ? reterr
					     : cd_xasprintf("cannot build the Seatbelt policy: %s",
							    strerror(-r)));
		return CD_BIND_OK;
	}

#ifdef __APPLE__
	/* No Linux host facts to plan with: a Linux sandbox is never planned here. */
	(void)host;
	return refuse(b, cd_xstrdup("the Linux sandbox cannot be planned on macOS, whose "
				    "sandbox is Seatbelt"));
#else
	/* A disabled profile needs no host facts: spare the probe on that path. */
	if (prof->type != CD_PROFILE_DISABLED) {
		if (host)
			b->host = *host;
		else
			cd_linux_probe_host(CD_PROBE_ALL, &b->host);
		b->probed = true;
	}
	/* Limits need the host's cgroups, looked at only then (cordon run without limits
	 * pays nothing for them). */
	struct cd_linux_opts lo = lopts ? *lopts : (struct cd_linux_opts){ .min_landlock_abi = 1 };
	lo.limits = &b->limits;
	if (cd_limits_any(&b->limits)) {
		if (host && host->lim.probed)
			b->host.lim = host->lim;
		else
			cd_linux_probe_limits(&b->host.lim);
	}
	reterr = NULL;
	r = cd_linux_plan_build(b->plan, &b->host, &lo, &b->lp, &reterr);
	if (r < 0)
		return refuse(b, reterr ? reterr
					: cd_xasprintf("cannot build the Linux sandbox: %s",
						       strerror(-r)));
	free(reterr);
	return CD_BIND_OK;
#endif
}
