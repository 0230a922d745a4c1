/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * POLICY OPTIONS shared by `cordon run` and `cordon explain`: option
 * parsing, profile lookup and loading, CLI entries, binding (cd_plan_build
 * over the host file system), the host probe and the Linux wrapper plan.
 */

#include <stdbool.h>

#include "cli.h"
#include "core/netpolicy.h"
#include "core/plan.h"
#include "core/profile.h"
#include "sandbox/linux/plan.h"
#include "sandbox/seatbelt/sbpl.h"
#include "sandbox/windows/plan.h"

enum cd_cli_backend {
	CD_CLI_BACKEND_LINUX,
	CD_CLI_BACKEND_SEATBELT,
	CD_CLI_BACKEND_WINDOWS,
};

/* Option ids of the POLICY OPTIONS (the subcommands use ids below 100). */
enum {
	CD_OPT_PROFILE = 100,
	CD_OPT_WORKSPACE_ROOT,
	CD_OPT_CWD,
	CD_OPT_ALLOW_READ,
	CD_OPT_ALLOW_WRITE,
	CD_OPT_DENY,
	CD_OPT_DENY_GLOB,
	CD_OPT_NETWORK,
	CD_OPT_ALLOW_DEGRADED,
	CD_OPT_MIN_LANDLOCK_ABI,
	CD_OPT_NETWORK_PROXY,
	CD_OPT_ALLOW_DOMAIN,
	CD_OPT_DENY_DOMAIN,
	CD_OPT_ALLOW_CIDR,
	CD_OPT_PROXY_MODE,
	CD_OPT_SOCKS5,
	/* --limit-NAME (and --private-tmp): this plus the enum cd_limit. */
	CD_OPT_LIMIT_BASE = 120,
};

/* --private-tmp without a size. */
#define CD_PRIVATE_TMP_DEFAULT (1024ULL * 1024 * 1024)

/* Table rows to splice into a subcommand's option table. */
/* clang-format off */
#define CD_CLI_POLICY_OPTIONS \
	{ "profile", 0, true, CD_OPT_PROFILE }, \
	{ "workspace-root", 0, true, CD_OPT_WORKSPACE_ROOT }, \
	{ "cwd", 0, true, CD_OPT_CWD }, \
	{ "allow-read", 0, true, CD_OPT_ALLOW_READ }, \
	{ "allow-write", 0, true, CD_OPT_ALLOW_WRITE }, \
	{ "deny", 0, true, CD_OPT_DENY }, \
	{ "deny-glob", 0, true, CD_OPT_DENY_GLOB }, \
	{ "network", 0, true, CD_OPT_NETWORK }, \
	{ "allow-degraded", 0, true, CD_OPT_ALLOW_DEGRADED }, \
	{ "min-landlock-abi", 0, true, CD_OPT_MIN_LANDLOCK_ABI }, \
	{ "network-proxy", 0, true, CD_OPT_NETWORK_PROXY }, \
	{ "allow-domain", 0, true, CD_OPT_ALLOW_DOMAIN }, \
	{ "deny-domain", 0, true, CD_OPT_DENY_DOMAIN }, \
	{ "allow-cidr", 0, true, CD_OPT_ALLOW_CIDR }, \
	{ "proxy-mode", 0, true, CD_OPT_PROXY_MODE }, \
	{ "socks5", 0, false, CD_OPT_SOCKS5 }, \
	CD_CLI_LIMIT_OPTIONS

/* The resource limits alone (cordon serve has lists instead). */
#define CD_CLI_LIMIT_OPTIONS \
	{ "limit-tasks", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_TASKS }, \
	{ "limit-memory", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_MEMORY }, \
	{ "limit-swap", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_SWAP }, \
	{ "limit-cpu", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_CPU }, \
	{ "limit-cpu-time", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_CPU_TIME }, \
	{ "limit-open-files", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_OPEN_FILES }, \
	{ "limit-file-size", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_FILE_SIZE }, \
	{ "limit-core", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_CORE }, \
	{ "private-tmp", 0, CD_CLI_ARG_OPTIONAL, CD_OPT_LIMIT_BASE + CD_LIMIT_PRIVATE_TMP }, \
	{ "limit-inotify-instances", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_INOTIFY_INSTANCES }, \
	{ "limit-inotify-watches", 0, true, CD_OPT_LIMIT_BASE + CD_LIMIT_INOTIFY_WATCHES }
/* clang-format on */

/* Help text for the POLICY OPTIONS, for the subcommands' --help. */
extern const char cd_cli_policy_help[];

struct cd_cli_extra {
	enum cd_access access;
	bool glob;	 /* --deny-glob */
	const char *arg; /* borrowed from argv */
};

struct cd_cli_policy {
	const char *profile; /* borrowed; NULL = read-only */
	const char **roots;  /* owned array of borrowed strings */
	size_t n_roots;
	const char *cwd;	    /* borrowed; NULL = the current directory */
	struct cd_cli_extra *extra; /* owned array */
	size_t n_extra;
	int network;		 /* enum cd_network, or -1 for the profile's */
	struct cd_limits limits; /* --limit-*, over the profile's */
	struct cd_linux_opts lopts;
	/* Add CD_PROBE_NS_TEST to the host probe (explain: what a run would really get). */
	bool test_namespaces;
	/*
	 * The backend to plan for (explain --backend): this host's Linux one,
	 * or macOS Seatbelt or the Windows restricted token, planned from
	 * here (no host probe, no Linux plan; Seatbelt binds with macOS's
	 * :minimal, a policy section, not paths).
	 */
	enum cd_cli_backend backend;
	/* --allow-degraded=network: Windows may restrict the network by environment only. */
	bool allow_env_network;
	/*
	 * The domain policy of cordon's own proxy (--allow-domain,
	 * --deny-domain, --allow-cidr, --proxy-mode, --socks5), for a managed
	 * network without --network-proxy. net_rules: one of them was given.
	 */
	struct cd_netpolicy netpol;
	bool net_rules;
	bool proxy_mode_given;
};

void cd_cli_policy_init(struct cd_cli_policy *p);
void cd_cli_policy_done(struct cd_cli_policy *p);

/*
 * Handle one POLICY OPTION (id >= CD_OPT_PROFILE) with its argument.
 * Returns 0, or -1 after printing a usage error for cmd.
 */
int cd_cli_policy_option(struct cd_cli_policy *p, const char *cmd, int id, const char *arg);

/*
 * Print every profile NAME that --profile NAME finds, one per line as
 * "NAME<TAB>ORIGIN" (the entry DIR/NAME.json where the lookup stops, even
 * one it then refuses, or "built-in"), sorted by name; a name shadowed by
 * an earlier directory is listed once, with the entry that wins. Names
 * with control characters, and names ending in ".json" (--profile takes
 * those as files), are left out. Directories that cannot be read are
 * passed over silently (each listed name's origin still comes from the
 * lookup itself). Returns 0, or cd_profile_dirs()'s error (src/profile-lookup.h).
 */
int cd_cli_list_profiles(char **reterr_msg);

/* Everything the pipeline produced, as far as it got. All owned. */
struct cd_cli_bound {
	char *profile_path;	  /* the file the profile came from */
	const char *profile_name; /* borrowed: the --profile argument or "read-only" */
	struct cd_profile *profile;
	/*
	 * The resource limits to enforce: the profile's with the command
	 * line's over them (cordon serve: what a request gets, merged with
	 * the server's defaults and maximums). cd_cli_bind_profile plans them.
	 */
	struct cd_limits limits;
	char *cwd;    /* absolute cwd handed to the binding */
	char **roots; /* the workspace roots handed to it (NULL-terminated, or NULL) */
	struct cd_plan *plan;
	bool probed;
	struct cd_linux_host host;
	struct cd_linux_plan *lp;
	/* Input: the backend whose plan to build (lp, sp or wp). */
	enum cd_cli_backend backend;
	bool allow_env_network;
	struct cd_seatbelt_plan *sp;
	/* sp with a managed network: the proxy variables the command gets (NAME=VALUE). */
	char **sp_env;
	struct cd_windows_plan *wp;
	char *refusal; /* one line, set when refused (exit 125) */
	/*
	 * A managed network without --network-proxy: cordon starts its own
	 * proxy with this policy (borrowed from the cd_cli_policy) for the
	 * run (src/own-proxy.h); lp->proxy is a placeholder until then.
	 */
	bool own_proxy;
#define CD_OWN_PROXY_PLACEHOLDER "unix:/run/cordon-own-proxy.sock"
	/* The profile's network rules, then the command line's (mode: the latter's if given). */
	struct cd_netpolicy own_netpol;
	const struct cd_netpolicy *netpol; /* &own_netpol when own_proxy, else NULL */
};

enum {
	CD_BIND_OK = 0,
	CD_BIND_USAGE = -1,   /* usage error printed; exit 2 */
	CD_BIND_REFUSED = -2, /* b->refusal set; exit 125 */
};

/*
 * Run the pipeline: find and parse the profile, apply the CLI entries and
 * network override, bind, probe the host and build the Linux wrapper plan.
 * Returns CD_BIND_OK, CD_BIND_USAGE or CD_BIND_REFUSED; on refusal the
 * fields reached so far stay filled (explain shows them). Free with
 * cd_cli_bound_done in any case.
 */
int cd_cli_policy_bind(const struct cd_cli_policy *p, const char *cmd, struct cd_cli_bound *b);
void cd_cli_bound_done(struct cd_cli_bound *b);

/*
 * The second half of the pipeline, shared with `cordon serve`: bind
 * b->profile at b->cwd (absolute) to the given absolute workspace roots and
 * $TMPDIR over the host file system, take the host facts (host: facts
 * probed earlier, or NULL to probe now; a disabled profile needs none) and
 * build the Linux wrapper plan, with b->limits (the host's cgroups are
 * looked at when there are any and host has not). Fills b->plan, b->host,
 * b->probed, b->lp; returns CD_BIND_OK or CD_BIND_REFUSED with b->refusal
 * set.
 */
int cd_cli_bind_profile(struct cd_cli_bound *b, const char *const *roots, size_t n_roots,
			const struct cd_linux_opts *lopts, const struct cd_linux_host *host);
