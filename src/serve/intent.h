/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Decoding the params of `cordon serve`'s methods the way the reference
 * server's serde derives do (required fields, defaults, null handling) with
 * messages that name the field and the expected type; the sandbox intent of
 * process/start (reference 3.1-3.5) bound exactly like `cordon run` binds a
 * profile; and the child environment (envPolicy, reference 8.1).
 *
 * Every function here that fails returns -EINVAL with *err a malloc'ed
 * one-line message for a -32602 reply.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli-policy.h"
#include "core/json.h"

/* ---- params getters ----
 * obj: the params object (NULL-safe: a missing object has no members).
 * field: the name for messages ("sandbox.cwd"); key: the member name.
 * Return 0 when the value was read, 1 when absent (or null where null is
 * allowed) and the default applies, -EINVAL with *err otherwise. */

/* Params must be an object; what: "struct ExecParams" and the like. */
int cd_param_object(const struct cd_json *params, const char *what, char **err);
/* "missing field `x`". */
char *cd_param_missing(const char *field);
/* "invalid type: <value>, expected <exp>" (" for `field`" on cordon's own fields). */
char *cd_param_invalid(const struct cd_json *v, const char *exp, const char *field);
/*
 * The released binary's refusal of a path URI that is relative ("invalid URI:
 * relative URL without a base") or of another scheme ("unsupported path URI
 * scheme `http`"), malloc()ed; NULL for a file: URI (judged by pathuri.h).
 */
char *cd_param_uri_refusal(const char *s, size_t n);
/* A u64 member that is no u64: "invalid number" for a number, else as cd_param_invalid. */
char *cd_param_bad_u64(const struct cd_json *v, const char *exp, const char *field);

int cd_param_string(const struct cd_json *obj, const char *key, const char *field, bool required,
		    bool nullable, const struct cd_json **ret, char **err);
int cd_param_bool(const struct cd_json *obj, const char *key, const char *field, bool required,
		  bool def, bool *ret, char **err);
/* Option<bool> in Codex: absent or null gives def. */
int cd_param_opt_bool(const struct cd_json *obj, const char *key, const char *field, bool def,
		      bool *ret, char **err);
/* Option<u64>: absent or null gives def. */
int cd_param_u64(const struct cd_json *obj, const char *key, const char *field, uint64_t def,
		 uint64_t *ret, char **err);

/* ---- sandbox intent ---- */

/*
 * Bind params.sandbox (a non-null value) for a command whose cwd is
 * params_cwd (absolute native path): the wire profile, the policy cwd
 * (sandbox.cwd, else params_cwd), the workspace roots (an empty list binds
 * :workspace_roots to nothing), then plan + Linux plan through
 * cd_cli_bind_profile with the server's cached host facts. On success b is
 * filled (cd_cli_bound_done it). enforce_managed_network is refused here
 * (no proxy in this build). Refusals and decode errors: -EINVAL, *err.
 * params_cwd NULL (fs/... requests, which have none): without sandbox.cwd
 * the server's own cwd is used, unless the permissions depend on a cwd
 * (cd_profile_depends_on_cwd): then -EDESTADDRREQ, *err the reference's
 * "... requires cwd" message (a -32600 reply).
 */
int cd_intent_bind(const struct cd_json *sandbox, const char *params_cwd,
		   bool enforce_managed_network, const struct cd_linux_host *host,
		   const struct cd_linux_opts *lopts, struct cd_cli_bound *b, char **err);

/* ---- resource limits ---- */

/* What a process/start gets: what it asks (the cordon extension) within the server's bounds. */
struct cd_intent_limits {
	const struct cd_limits *asked;	  /* params.cordon.limits; NULL for none */
	const struct cd_limits *defaults; /* --default-limits; NULL for none */
	const struct cd_limits *max;	  /* --max-limits; NULL for none */
};

/*
 * cd_intent_bind for a process/start: the limits asked (the permission
 * profile's "limits", then lim->asked over them) merged with the server's
 * defaults and maximums (core/limits.h: cd_limits_merge) become b->limits
 * and are planned with the rest. Asking more than a maximum is refused.
 * (the fs methods use cd_intent_bind: their helpers, cordon's own bounded
 * code, get no limits.)
 */
int cd_intent_bind_limited(const struct cd_json *sandbox, const char *params_cwd,
			   bool enforce_managed_network, const struct cd_linux_host *host,
			   const struct cd_linux_opts *lopts, const struct cd_intent_limits *lim,
			   struct cd_cli_bound *b, char **err);

/*
 * The limits of a process/start without a sandbox intent: lim merged, and
 * planned alone (an unsandboxed plan: cgroup and rlimits, no private /tmp).
 * b is filled as cd_intent_bind fills it (b->lp, b->limits; b->lp NULL
 * when no limit applies). -EINVAL with *err on a refusal.
 */
int cd_intent_limits_only(const struct cd_linux_host *host, const struct cd_linux_opts *lopts,
			  const struct cd_intent_limits *lim, struct cd_cli_bound *b, char **err);

/*
 * The rlimits a command gets on macOS (a Seatbelt plan's), or -EINVAL with
 * *err: none when the server runs as root, who could raise them again (no
 * capability to drop there, as cordon run on macOS refuses them), and no
 * open_files above kern.maxfilesperproc, which XNU would refuse at the
 * spawn. 0 for none.
 */
int cd_intent_rlimits_refusal(const struct cd_limits *rl, char **err);

/* The bound context builds a sandbox (b->lp's on Linux, b->sp's on macOS). */
bool cd_intent_sandboxed(const struct cd_cli_bound *b);
/*
 * For the fs methods: the plan of the sandboxed helper that must do the
 * operation when the bound context restricts the file system (reference:
 * only restricted profiles without full-disk write use the helper), or
 * *ret NULL when the server may do it itself. -EOPNOTSUPP with *err when
 * it restricts and this host has no helper (macOS): refused, never done
 * in the server.
 */
int cd_intent_fs_helper_plan(const struct cd_cli_bound *b, const struct cd_linux_plan **ret,
			     char **err);

/*
 * params.cordon, cordon's extension of process/start (absent or null: no
 * limits): an object with "limits" (core/limits.h: cd_limits_from_json),
 * parsed strictly. Fills *ret. -EINVAL with *err.
 */
int cd_param_cordon(const struct cd_json *params, struct cd_limits *ret, char **err);

/* ---- environment ---- */

/* Case-insensitive wildcard match ('*' any run, '?' one byte). */
bool cd_env_pattern_match(const char *pattern, const char *name);

/*
 * envPolicy.exclude and includeOnly: the steps the wildcard patterns (those
 * with '*' or '?' and something else) may take matching the variables of
 * one request, a few hundred ms of CPU at most. Patterns without wildcards
 * and patterns of wildcards alone cost one lookup per variable.
 */
#define CD_ENV_MATCH_STEPS (64ull * 1024 * 1024)

/*
 * The child environment: env (an object of strings, required) and
 * env_policy (NULL/null: the child gets exactly env; else reference 8.1
 * over base, the server's own environment). *ret: NULL-terminated
 * "NAME=VALUE" strings (cd_strv_free). Linear in the number of variables
 * (a hash of names); wildcard matching is bounded by CD_ENV_MATCH_STEPS,
 * past which the request is refused with a message that says so.
 */
int cd_env_build(const struct cd_json *env, const struct cd_json *env_policy, char *const *base,
		 char ***ret, char **err);
