/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef __APPLE__
#include <sys/sysctl.h>
#endif

#include "core/pathuri.h"
#include "core/profile.h"
#include "os-backend.h"
#include "sandbox/backend.h"
#include "sandbox/seatbelt/sbpl.h"
#include "serve/intent.h"

/* Longest piece of a client string quoted back in a message. */
#define QUOTE_MAX 96

/* ---- params getters ---- */

/* Append at most QUOTE_MAX bytes of s, cut on a UTF-8 boundary. */
static void append_quoted(struct cd_strbuf *sb, const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	bool cut = len > QUOTE_MAX;
	if (cut) {
		len = QUOTE_MAX;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	cd_strbuf_append_n(sb, s, len);
	if (cut)
		cd_strbuf_append(sb, "...");
}

static void describe(struct cd_strbuf *sb, const struct cd_json *v)
{
	switch (v->type) {
	case CD_JSON_NULL:
		cd_strbuf_append(sb, "null");
		break;
	case CD_JSON_FALSE:
		cd_strbuf_append(sb, "boolean `false`");
		break;
	case CD_JSON_TRUE:
		cd_strbuf_append(sb, "boolean `true`");
		break;
	case CD_JSON_NUMBER:
		/* The released binary names no number's value here. */
		cd_strbuf_append(sb, "number");
		break;
	case CD_JSON_STRING:
		cd_strbuf_append(sb, "string \"");
		append_quoted(sb, v->u.str.s, v->u.str.len);
		cd_strbuf_append_c(sb, '"');
		break;
	case CD_JSON_ARRAY:
		cd_strbuf_append(sb, "sequence");
		break;
	case CD_JSON_OBJECT:
		cd_strbuf_append(sb, "map");
		break;
	case CD_JSON_TYPE_COUNT:
		break;
	}
}

/*
 * The released binary's messages name neither the field nor its path; only
 * cordon's own extension ("cordon...") keeps the path, having no Codex wording.
 */
static bool cordon_field(const char *field)
{
	return field && strncmp(field, "cordon", 6) == 0;
}

char *cd_param_missing(const char *field)
{
	const char *dot = strrchr(field, '.');
	return cd_xasprintf("missing field `%s`", dot && !cordon_field(field) ? dot + 1 : field);
}

char *cd_param_invalid(const struct cd_json *v, const char *exp, const char *field)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "invalid type: ");
	describe(&sb, v);
	cd_strbuf_printf(&sb, ", expected %s", exp);
	if (cordon_field(field))
		cd_strbuf_printf(&sb, " for `%s`", field);
	return cd_strbuf_steal(&sb);
}

char *cd_param_bad_u64(const struct cd_json *v, const char *exp, const char *field)
{
	/* A number that is not a u64 (negative, fractional, too big): serde_json's words. */
	if (v->type == CD_JSON_NUMBER)
		return cd_xstrdup("invalid number");
	return cd_param_invalid(v, exp, field);
}

char *cd_param_uri_refusal(const char *s, size_t n)
{
	/* As the url crate reads it: C0 controls and spaces around are no part of it. */
	size_t a = 0, i;
	while (a < n && (unsigned char)s[a] <= 0x20)
		a++;
	for (i = a; i < n; i++) {
		char ch = s[i];
		bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
		if (!alpha && (i == a || !((ch >= '0' && ch <= '9') || strchr("+-.", ch))))
			break;
	}
	if (i == a || i >= n || s[i] != ':')
		return cd_xstrdup("invalid URI: relative URL without a base");
	if (i - a == 4 && strncasecmp(s + a, "file", 4) == 0)
		return NULL;
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "unsupported path URI scheme `");
	for (size_t k = a; k < i && k - a < QUOTE_MAX; k++)
		cd_strbuf_append_c(&sb, (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]));
	cd_strbuf_append_c(&sb, '`');
	return cd_strbuf_steal(&sb);
}

int cd_param_object(const struct cd_json *params, const char *what, char **err)
{
	static const struct cd_json null_value = { .type = CD_JSON_NULL };
	if (params && params->type == CD_JSON_OBJECT)
		return 0;
	*err = cd_param_invalid(params ? params : &null_value, what, NULL);
	return -EINVAL;
}

static const struct cd_json *member(const struct cd_json *obj, const char *key)
{
	return obj ? cd_json_get(obj, key) : NULL;
}

int cd_param_string(const struct cd_json *obj, const char *key, const char *field, bool required,
		    bool nullable, const struct cd_json **ret, char **err)
{
	const struct cd_json *v = member(obj, key);
	*ret = NULL;
	if (!v) {
		if (!required)
			return 1;
		*err = cd_param_missing(field);
		return -EINVAL;
	}
	if (v->type == CD_JSON_NULL && nullable)
		return 1;
	if (v->type != CD_JSON_STRING) {
		*err = cd_param_invalid(v, "a string", field);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

int cd_param_bool(const struct cd_json *obj, const char *key, const char *field, bool required,
		  bool def, bool *ret, char **err)
{
	const struct cd_json *v = member(obj, key);
	*ret = def;
	if (!v) {
		if (!required)
			return 1;
		*err = cd_param_missing(field);
		return -EINVAL;
	}
	if (v->type != CD_JSON_TRUE && v->type != CD_JSON_FALSE) {
		*err = cd_param_invalid(v, "a boolean", field);
		return -EINVAL;
	}
	*ret = v->type == CD_JSON_TRUE;
	return 0;
}

int cd_param_opt_bool(const struct cd_json *obj, const char *key, const char *field, bool def,
		      bool *ret, char **err)
{
	const struct cd_json *v = member(obj, key);
	*ret = def;
	if (v && v->type == CD_JSON_NULL)
		return 1;
	return cd_param_bool(obj, key, field, false, def, ret, err);
}

int cd_param_u64(const struct cd_json *obj, const char *key, const char *field, uint64_t def,
		 uint64_t *ret, char **err)
{
	const struct cd_json *v = member(obj, key);
	*ret = def;
	if (!v || v->type == CD_JSON_NULL)
		return 1;
	if (v->type != CD_JSON_NUMBER || cd_json_uint64(v, ret) < 0) {
		*ret = def;
		*err = cd_param_bad_u64(v, cd_streq(key, "maxBytes") ? "usize" : "u64", field);
		return -EINVAL;
	}
	return 0;
}

/* A string array member; absent gives an empty list when !required. */
static int param_string_array(const struct cd_json *obj, const char *key, const char *field,
			      bool required, const struct cd_json **ret, char **err)
{
	const struct cd_json *v = member(obj, key);
	*ret = NULL;
	if (!v) {
		if (!required)
			return 1;
		*err = cd_param_missing(field);
		return -EINVAL;
	}
	if (v->type != CD_JSON_ARRAY) {
		*err = cd_param_invalid(v, "a sequence", field);
		return -EINVAL;
	}
	for (size_t i = 0; i < v->u.arr.n; i++) {
		if (v->u.arr.items[i]->type != CD_JSON_STRING) {
			char name[128];
			snprintf(name, sizeof(name), "%s[%zu]", field, i);
			*err = cd_param_invalid(v->u.arr.items[i], "a string", name);
			return -EINVAL;
		}
	}
	*ret = v;
	return 0;
}

/* ---- sandbox intent ---- */

static char *uri_error(const char *what, const struct cd_json *uri, const char *why)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_printf(&sb, "%s URI `", what);
	append_quoted(&sb, uri->u.str.s, uri->u.str.len);
	cd_strbuf_printf(&sb, "` is not valid on this exec-server host: %s", why);
	return cd_strbuf_steal(&sb);
}

int cd_intent_bind(const struct cd_json *sandbox, const char *params_cwd,
		   bool enforce_managed_network, const struct cd_linux_host *host,
		   const struct cd_linux_opts *lopts, struct cd_cli_bound *b, char **err)
{
	return cd_intent_bind_limited(sandbox, params_cwd, enforce_managed_network, host, lopts,
				      NULL, b, err);
}

/* b->limits: what the profile asks, what the request asks over it, within the server's. */
static int merge_limits(const struct cd_limits *profile, const struct cd_intent_limits *lim,
			struct cd_cli_bound *b, char **err)
{
	struct cd_limits asked = profile ? *profile : (struct cd_limits){ 0 };
	for (int l = 0; lim && lim->asked && l < CD_LIMIT_COUNT; l++)
		if (cd_limits_has(lim->asked, (enum cd_limit)l))
			cd_limits_put(&asked, (enum cd_limit)l, lim->asked->v[l]);
	char *why = NULL;
	if (cd_limits_merge(&asked, lim ? lim->defaults : NULL, lim ? lim->max : NULL, &b->limits,
			    &why) < 0) {
		*err = cd_xasprintf("limits: %s", why);
		free(why);
		return -EINVAL;
	}
	return 0;
}

int cd_intent_rlimits_refusal(const struct cd_limits *rl, char **err)
{
	if (!rl || !cd_limits_any(rl))
		return 0;
	if (geteuid() == 0) {
		*err = cd_xstrdup("resource limits cannot be kept from a command run as root on "
				  "macOS (it may raise its rlimits again): run the server as "
				  "another user, or leave them out");
		return -EINVAL;
	}
#ifdef __APPLE__
	/* XNU refuses an RLIMIT_NOFILE above kern.maxfilesperproc: said now, not at the spawn. */
	int maxf = 0;
	size_t len = sizeof(maxf);
	if (cd_limits_has(rl, CD_LIMIT_OPEN_FILES) &&
	    sysctlbyname("kern.maxfilesperproc", &maxf, &len, NULL, 0) == 0 && maxf > 0 &&
	    rl->v[CD_LIMIT_OPEN_FILES] > (uint64_t)maxf) {
		*err = cd_xasprintf("limits: open_files %llu is more than this host lets a "
				    "process have (kern.maxfilesperproc %d)",
				    (unsigned long long)rl->v[CD_LIMIT_OPEN_FILES], maxf);
		return -EINVAL;
	}
#endif
	return 0;
}

static int rlimits_refusal(const struct cd_cli_bound *b, char **err)
{
	return b->sp ? cd_intent_rlimits_refusal(&b->sp->rlimits, err) : 0;
}

int cd_intent_limits_only(const struct cd_linux_host *host, const struct cd_linux_opts *lopts,
			  const struct cd_intent_limits *lim, struct cd_cli_bound *b, char **err)
{
	memset(b, 0, sizeof(*b));
	int r = merge_limits(NULL, lim, b, err);
	if (r < 0 || !cd_limits_any(&b->limits))
		return r;
#ifdef __APPLE__
	(void)host, (void)lopts;
	b->backend = CD_CLI_BACKEND_SEATBELT;
	char *why = NULL;
	if (cd_seatbelt_plan_limits(&b->limits, &b->sp, &why) < 0) {
		*err = why;
		return -EINVAL;
	}
	return rlimits_refusal(b, err);
#else
	struct cd_linux_opts lo = *lopts;
	lo.limits = &b->limits;
	b->host = *host;
	if (!b->host.lim.probed)
		cd_linux_probe_limits(&b->host.lim);
	char *why = NULL;
	r = cd_linux_plan_build(NULL, &b->host, &lo, &b->lp, &why);
	if (r < 0) {
		*err = why ? why : cd_xstrdup("the limits cannot be enforced");
		return -EINVAL;
	}
	free(why);
	return 0;
#endif
}

int cd_param_cordon(const struct cd_json *params, struct cd_limits *ret, char **err)
{
	const struct cd_json *c = cd_json_get(params, "cordon");
	*ret = (struct cd_limits){ 0 };
	if (!c || c->type == CD_JSON_NULL)
		return 0;
	if (c->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(c, "cordon's extension (an object)", "cordon");
		return -EINVAL;
	}
	/* Strict, unlike the reference's fields: a misspelled limit must not go unnoticed. */
	for (size_t i = 0; i < c->u.obj.n; i++) {
		const struct cd_json_member *m = &c->u.obj.members[i];
		if (strlen(m->key) != m->key_len || !cd_streq(m->key, "limits")) {
			struct cd_strbuf sb = { 0 };
			cd_strbuf_append(&sb, "unknown field `");
			append_quoted(&sb, m->key, m->key_len);
			cd_strbuf_append(&sb, "`, expected `limits` for `cordon`");
			*err = cd_strbuf_steal(&sb);
			return -EINVAL;
		}
	}
	const struct cd_json *v = cd_json_get(c, "limits");
	if (!v || v->type == CD_JSON_NULL)
		return 0;
	const char *key = NULL;
	const struct cd_json *at = NULL;
	char *why = NULL;
	if (cd_limits_from_json(v, ret, &key, &at, &why) < 0) {
		*err = cd_xasprintf("invalid `cordon.limits%s%s`: %s", key ? "." : "",
				    key ? key : "", why);
		free(why);
		*ret = (struct cd_limits){ 0 };
		return -EINVAL;
	}
	return 0;
}

int cd_intent_bind_limited(const struct cd_json *sandbox, const char *params_cwd,
			   bool enforce_managed_network, const struct cd_linux_host *host,
			   const struct cd_linux_opts *lopts, const struct cd_intent_limits *lim,
			   struct cd_cli_bound *b, char **err)
{
	/* Windows levels, the released binary's four; Linux selects nothing by them. */
	static const char *const levels[] = { "disabled", "restricted-token", "elevated", "mxc" };
	const struct cd_json *perm, *level, *cwd, *roots_v;
	char **roots = NULL;
	size_t n_roots = 0;
	bool flag;
	int r;

	memset(b, 0, sizeof(*b));
	if (sandbox->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(sandbox, "struct WireFileSystemSandboxContext", "sandbox");
		return -EINVAL;
	}
	perm = cd_json_get(sandbox, "permissions");
	if (!perm) {
		*err = cd_param_missing("sandbox.permissions");
		return -EINVAL;
	}
	r = cd_param_string(sandbox, "windowsSandboxLevel", "sandbox.windowsSandboxLevel", true,
			    false, &level, err);
	if (r < 0)
		return r;
	bool known = false;
	for (size_t i = 0; i < CD_ARRAY_SIZE(levels); i++)
		known = known || cd_streq(level->u.str.s, levels[i]);
	if (!known || cd_json_string_has_nul(level)) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "unknown variant `");
		append_quoted(&sb, level->u.str.s, level->u.str.len);
		cd_strbuf_append(&sb, "`, expected one of `disabled`, `restricted-token`, "
				      "`elevated`, `mxc`");
		*err = cd_strbuf_steal(&sb);
		return -EINVAL;
	}
	r = cd_param_opt_bool(sandbox, "windowsSandboxPrivateDesktop",
			      "sandbox.windowsSandboxPrivateDesktop", false, &flag, err);
	if (r < 0)
		return r;
	/* Linux only has one path here: the legacy switch selects nothing else. */
	r = cd_param_bool(sandbox, "useLegacyLandlock", "sandbox.useLegacyLandlock", false, false,
			  &flag, err);
	if (r < 0)
		return r;
	r = cd_param_string(sandbox, "cwd", "sandbox.cwd", false, true, &cwd, err);
	if (r < 0)
		return r;
	r = param_string_array(sandbox, "workspaceRoots", "sandbox.workspaceRoots", false, &roots_v,
			       err);
	if (r < 0)
		return r;

	struct cd_parse_error perr = { 0 };
	r = cd_profile_from_json(perm, CD_PROFILE_PARSE_WIRE, &b->profile, &perr);
	if (r < 0) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_printf(&sb, "invalid sandbox permissions: %s",
				 perr.msg ? perr.msg : strerror(-r));
		cd_strbuf_printf(&sb, " (at sandbox.permissions%s%s)",
				 perr.path && *perr.path ? "." : "", perr.path ? perr.path : "");
		cd_parse_error_done(&perr);
		*err = cd_strbuf_steal(&sb);
		return -EINVAL;
	}

	if (cwd) {
		const char *why = NULL;
		if (cd_pathuri_to_posix(cwd->u.str.s, cwd->u.str.len, &b->cwd, &why) < 0) {
			*err = uri_error("sandbox cwd", cwd, why ? why : "invalid URI");
			return -EINVAL;
		}
	} else if (params_cwd) {
		b->cwd = cd_xstrdup(params_cwd);
	} else if (cd_profile_depends_on_cwd(b->profile)) {
		*err = cd_xstrdup(
			"file system sandbox context with dynamic permissions requires cwd");
		return -EDESTADDRREQ;
	} else {
		char here[PATH_MAX];
		b->cwd = cd_xstrdup(getcwd(here, sizeof(here)) ? here : "/");
	}

	if (roots_v) {
		roots = cd_xcalloc(roots_v->u.arr.n + 1, sizeof(*roots));
		for (size_t i = 0; i < roots_v->u.arr.n; i++) {
			const struct cd_json *u = roots_v->u.arr.items[i];
			const char *why = NULL;
			if (cd_pathuri_to_posix(u->u.str.s, u->u.str.len, &roots[n_roots], &why) <
			    0) {
				*err = uri_error("sandbox workspace root", u,
						 why ? why : "invalid URI");
				cd_strv_free(roots);
				return -EINVAL;
			}
			n_roots++;
		}
	}

	/*
	 * Proxy-only egress whatever the permissions say, through the relay to
	 * the proxy the caller found (cd_managed_route); without one, refused.
	 */
	if (enforce_managed_network) {
		if (!lopts->managed_proxy) {
			cd_strv_free(roots);
			*err = cd_xstrdup(
				"managed proxy mode requires proxy environment variables");
			return -EINVAL;
		}
		b->profile->network = CD_NET_MANAGED;
	}
	/* Limits bound commands (process/start); an fs helper gets none. */
	if (lim && merge_limits(&b->profile->limits, lim, b, err) < 0) {
		cd_strv_free(roots);
		return -EINVAL;
	}

	/* This host's backend: Seatbelt on macOS (b->sp), else Linux (b->lp). */
	b->backend = cd_os_backend_native();
	r = cd_cli_bind_profile(b, (const char *const *)roots, n_roots, lopts, host);
	cd_strv_free(roots);
	if (r < 0) {
		*err = cd_xstrdup(b->refusal ? b->refusal : "the sandbox cannot be built");
		return -EINVAL;
	}
	if (rlimits_refusal(b, err) < 0)
		return -EINVAL;
	/*
	 * Codex confines a managed network under every profile; a profile
	 * cordon builds no sandbox for (disabled) would leave it open: refused.
	 */
	bool confined = b->lp ? b->lp->sandboxed && b->lp->net_managed
			      : b->sp && b->sp->sandboxed && b->plan->network == CD_NET_MANAGED;
	if (enforce_managed_network && !confined) {
		*err = cd_xasprintf("managed network enforcement needs a sandbox, and this "
				    "permission profile (type %s) builds none: the command would "
				    "run with an open network; send a managed or external profile",
				    cd_profile_type_name(b->profile->type));
		return -EINVAL;
	}
	return 0;
}

/* ---- environment ---- */

/*
 * The greedy matcher with one backtrack point: enough for '*' and '?'. It
 * costs up to len(pattern) x len(name) steps, each counted in *steps, and
 * stops (no match) once *steps passes limit.
 */
static bool pattern_match(const char *pattern, const char *name, uint64_t *steps, uint64_t limit)
{
	const char *p = pattern, *n = name;
	const char *star = NULL, *resume = NULL;

	while (*n) {
		if (++*steps > limit)
			return false;
		if (*p == '*') {
			star = p++;
			resume = n;
		} else if (*p && (*p == '?' || (*p >= 'A' && *p <= 'Z' ? *p + 32 : *p) ==
						       (*n >= 'A' && *n <= 'Z' ? *n + 32 : *n))) {
			p++;
			n++;
		} else if (star) {
			p = star + 1;
			n = ++resume;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

bool cd_env_pattern_match(const char *pattern, const char *name)
{
	uint64_t steps = 0;
	return pattern_match(pattern, name, &steps, UINT64_MAX);
}

/* ---- a hash index of names (open addressing, FNV-1a) ---- */

struct name_index {
	size_t *slot; /* entry index + 1; 0 = empty */
	size_t cap;   /* power of two, at least twice the entries */
};

static uint64_t name_hash(const char *s, size_t n, bool fold)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (fold && c >= 'A' && c <= 'Z')
			c = (unsigned char)(c + 32);
		h = (h ^ c) * 0x100000001b3ULL;
	}
	return h;
}

static void index_done(struct name_index *x)
{
	free(x->slot);
	*x = (struct name_index){ 0 };
}

/* Empty, with room for n names. */
static void index_reset(struct name_index *x, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n + 2)
		cap *= 2;
	free(x->slot);
	x->slot = cd_xcalloc(cap, sizeof(*x->slot));
	x->cap = cap;
}

/* ---- the child environment ---- */

struct envv {
	char **v; /* "NAME=VALUE", NULL-terminated */
	size_t n, cap;
	struct name_index ix; /* by name; stale while ix_stale */
	bool ix_stale;
};

static size_t entry_name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');
	return eq ? (size_t)(eq - entry) : strlen(entry);
}

static bool same_name(const char *entry, const char *name, size_t name_len)
{
	return entry_name_len(entry) == name_len && !memcmp(entry, name, name_len);
}

/* The slot for name: its entry's, or the empty one where it would go. */
static size_t *envv_slot(struct envv *e, const char *name, size_t name_len)
{
	size_t mask = e->ix.cap - 1;
	for (size_t i = name_hash(name, name_len, false) & mask;; i = (i + 1) & mask) {
		size_t *s = &e->ix.slot[i];
		if (!*s || same_name(e->v[*s - 1], name, name_len))
			return s;
	}
}

static void envv_reindex(struct envv *e)
{
	index_reset(&e->ix, e->cap);
	for (size_t i = 0; i < e->n; i++) {
		size_t *s = envv_slot(e, e->v[i], entry_name_len(e->v[i]));
		/* Names are unique: every entry was set through envv_set. */
		*s = i + 1;
	}
	e->ix_stale = false;
}

/*
 * Set name to value, replacing an entry of the same (case-sensitive) name:
 * one hash lookup, so that merging n variables costs O(n), not O(n^2).
 */
static void envv_set(struct envv *e, const char *name, size_t name_len, const char *value)
{
	char *entry = cd_xasprintf("%.*s=%s", (int)name_len, name, value);
	if (e->n + 2 > e->cap) {
		e->cap = e->cap ? 2 * e->cap : 64;
		e->v = cd_xreallocarray(e->v, e->cap, sizeof(*e->v));
		e->ix_stale = true;
	}
	if (e->ix_stale || !e->ix.slot)
		envv_reindex(e);
	size_t *s = envv_slot(e, name, name_len);
	if (*s) {
		free(e->v[*s - 1]);
		e->v[*s - 1] = entry;
		return;
	}
	*s = e->n + 1;
	e->v[e->n++] = entry;
	e->v[e->n] = NULL;
}

/*
 * A list of patterns (envPolicy.exclude, includeOnly), sorted for matching
 * many names: patterns without wildcards in a hash set (case-insensitive),
 * patterns of only '*' and '?' as lengths, the rest tried one by one. The
 * last kind costs patterns x names x pattern steps, which a client can make
 * quadratic in the size of its request: the steps are counted against
 * CD_ENV_MATCH_STEPS per request, and past it the request is refused.
 */
struct patterns {
	const struct cd_json *list; /* the JSON array (strings) */
	struct name_index literal;  /* of list items without '*' or '?', folded */
	size_t min_len_star;	    /* a pattern of only '*'s and n '?'s: n; SIZE_MAX if none */
	size_t *exact_len;	    /* patterns of only '?'s: their lengths, sorted */
	size_t n_exact;
	const char **wild; /* the others */
	size_t n_wild;
	uint64_t *steps; /* shared by the request's lists */
	bool exhausted;	 /* the budget ran out */
};

static const struct cd_json *pattern_at(const struct patterns *ps, size_t i)
{
	return ps->list->u.arr.items[i];
}

static bool fold_eq(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
		if ((x >= 'A' && x <= 'Z' ? x + 32 : x) != (y >= 'A' && y <= 'Z' ? y + 32 : y))
			return false;
	}
	return true;
}

/* The literal slot for name (folded): a list index + 1, or the empty slot. */
static size_t *literal_slot(const struct patterns *ps, const char *name, size_t len)
{
	size_t mask = ps->literal.cap - 1;
	for (size_t i = name_hash(name, len, true) & mask;; i = (i + 1) & mask) {
		size_t *s = &ps->literal.slot[i];
		if (!*s)
			return s;
		const struct cd_json *p = pattern_at(ps, *s - 1);
		if (p->u.str.len == len && fold_eq(p->u.str.s, name, len))
			return s;
	}
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

static void patterns_init(struct patterns *ps, const struct cd_json *list, uint64_t *steps)
{
	size_t n = list ? list->u.arr.n : 0;
	*ps = (struct patterns){ .list = list, .min_len_star = SIZE_MAX, .steps = steps };
	index_reset(&ps->literal, n);
	ps->exact_len = cd_xcalloc(n + 1, sizeof(*ps->exact_len));
	ps->wild = cd_xcalloc(n + 1, sizeof(*ps->wild));
	for (size_t i = 0; i < n; i++) {
		const struct cd_json *p = pattern_at(ps, i);
		const char *s = p->u.str.s;
		size_t len = p->u.str.len, q = 0;
		bool star = false, lit = false;
		if (cd_json_string_has_nul(p))
			continue; /* matches nothing */
		for (size_t k = 0; k < len; k++) {
			star = star || s[k] == '*';
			q += s[k] == '?';
			lit = lit || (s[k] != '*' && s[k] != '?');
		}
		if (!star && q == 0) {
			size_t *slot = literal_slot(ps, s, len);
			if (!*slot)
				*slot = i + 1;
		} else if (!lit && star) {
			if (q < ps->min_len_star)
				ps->min_len_star = q;
		} else if (!lit) {
			ps->exact_len[ps->n_exact++] = q;
		} else {
			ps->wild[ps->n_wild++] = s;
		}
	}
	qsort(ps->exact_len, ps->n_exact, sizeof(*ps->exact_len), cmp_size);
}

static void patterns_done(struct patterns *ps)
{
	index_done(&ps->literal);
	free(ps->exact_len);
	free(ps->wild);
}

static bool patterns_match(struct patterns *ps, const char *name)
{
	size_t len = strlen(name);
	if (*literal_slot(ps, name, len))
		return true;
	if (len >= ps->min_len_star)
		return true;
	if (ps->n_exact && bsearch(&len, ps->exact_len, ps->n_exact, sizeof(len), cmp_size))
		return true;
	for (size_t i = 0; i < ps->n_wild; i++) {
		if (pattern_match(ps->wild[i], name, ps->steps, CD_ENV_MATCH_STEPS))
			return true;
		if (*ps->steps > CD_ENV_MATCH_STEPS) {
			ps->exhausted = true;
			return false;
		}
	}
	return false;
}

/* Keep the entries whose name satisfies keep(). */
static void envv_filter(struct envv *e, bool (*keep)(const char *name, void *arg), void *arg)
{
	size_t w = 0;
	for (size_t i = 0; i < e->n; i++) {
		size_t len = entry_name_len(e->v[i]);
		char *name = cd_xstrndup(e->v[i], len);
		if (keep(name, arg))
			e->v[w++] = e->v[i];
		else
			free(e->v[i]);
		free(name);
	}
	e->n = w;
	if (e->v)
		e->v[w] = NULL;
	e->ix_stale = true;
}

static bool keep_core(const char *name, void *arg)
{
	static const char *const core[] = { "PATH", "SHELL",  "TMPDIR",	  "TEMP",    "TMP", "HOME",
					    "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "USER" };
	for (size_t i = 0; i < CD_ARRAY_SIZE(core); i++)
		if (!strcasecmp(name, core[i]))
			return true;
	return false;
}

static bool keep_not_default_excluded(const char *name, void *arg)
{
	return !cd_env_pattern_match("*KEY*", name) && !cd_env_pattern_match("*SECRET*", name) &&
	       !cd_env_pattern_match("*TOKEN*", name);
}

static bool keep_not_matching(const char *name, void *arg)
{
	return !patterns_match(arg, name);
}

static bool keep_matching(const char *name, void *arg)
{
	return patterns_match(arg, name);
}

/* A list's matching ran out of steps: the message for the refusal. */
static int too_much_matching(const struct patterns *ps, const char *field, size_t names, char **err)
{
	*err = cd_xasprintf("`%s`: matching %zu wildcard patterns against %zu environment "
			    "variables takes more than %llu steps; use fewer or simpler "
			    "patterns",
			    field, ps->n_wild, names, (unsigned long long)CD_ENV_MATCH_STEPS);
	return -EINVAL;
}

/* An object of strings usable as variables: no NUL, names non-empty without '='. */
static int check_env_object(const struct cd_json *v, const char *field, char **err)
{
	if (v->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(v, "a map", field);
		return -EINVAL;
	}
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct cd_json_member *m = &v->u.obj.members[i];
		if (m->value->type != CD_JSON_STRING) {
			char *name = cd_xasprintf("%s.%s", field, m->key);
			*err = cd_param_invalid(m->value, "a string", name);
			free(name);
			return -EINVAL;
		}
		if (m->key_len == 0 || strlen(m->key) != m->key_len || strchr(m->key, '=')) {
			struct cd_strbuf sb = { 0 };
			cd_strbuf_append(&sb, "invalid environment variable name \"");
			append_quoted(&sb, m->key, m->key_len);
			cd_strbuf_printf(&sb, "\" in `%s`", field);
			*err = cd_strbuf_steal(&sb);
			return -EINVAL;
		}
		if (cd_json_string_has_nul(m->value)) {
			*err = cd_xasprintf("the value of `%s.%s` contains a NUL byte", field,
					    m->key);
			return -EINVAL;
		}
	}
	return 0;
}

static void envv_overlay(struct envv *e, const struct cd_json *obj)
{
	for (size_t i = 0; i < obj->u.obj.n; i++) {
		const struct cd_json_member *m = &obj->u.obj.members[i];
		envv_set(e, m->key, m->key_len, m->value->u.str.s);
	}
}

static void envv_done(struct envv *e)
{
	index_done(&e->ix);
	cd_strv_free(e->v);
	e->v = NULL;
}

int cd_env_build(const struct cd_json *env, const struct cd_json *policy, char *const *base,
		 char ***ret, char **err)
{
	struct envv e = { 0 };
	int r;

	*ret = NULL;
	r = check_env_object(env, "env", err);
	if (r < 0)
		return r;

	if (policy && policy->type != CD_JSON_NULL) {
		const struct cd_json *inherit, *exclude, *include_only;
		const struct cd_json *set;
		bool ignore_defaults;

		if (policy->type != CD_JSON_OBJECT) {
			*err = cd_param_invalid(policy, "struct ExecEnvPolicy", "envPolicy");
			return -EINVAL;
		}
		r = cd_param_string(policy, "inherit", "envPolicy.inherit", true, false, &inherit,
				    err);
		if (r < 0)
			return r;
		if (!cd_streq(inherit->u.str.s, "core") && !cd_streq(inherit->u.str.s, "all") &&
		    !cd_streq(inherit->u.str.s, "none")) {
			struct cd_strbuf sb = { 0 };
			cd_strbuf_append(&sb, "unknown variant `");
			append_quoted(&sb, inherit->u.str.s, inherit->u.str.len);
			cd_strbuf_append(&sb, "`, expected one of `core`, `all`, `none`");
			*err = cd_strbuf_steal(&sb);
			return -EINVAL;
		}
		r = cd_param_bool(policy, "ignoreDefaultExcludes",
				  "envPolicy.ignoreDefaultExcludes", true, false, &ignore_defaults,
				  err);
		if (r < 0)
			return r;
		r = param_string_array(policy, "exclude", "envPolicy.exclude", true, &exclude, err);
		if (r < 0)
			return r;
		set = cd_json_get(policy, "set");
		if (!set) {
			*err = cd_param_missing("envPolicy.set");
			return -EINVAL;
		}
		r = check_env_object(set, "envPolicy.set", err);
		if (r < 0)
			return r;
		r = param_string_array(policy, "includeOnly", "envPolicy.includeOnly", true,
				       &include_only, err);
		if (r < 0)
			return r;

		if (!cd_streq(inherit->u.str.s, "none")) {
			for (char *const *p = base; p && *p; p++) {
				const char *eq = strchr(*p, '=');
				if (eq && eq != *p)
					envv_set(&e, *p, (size_t)(eq - *p), eq + 1);
			}
		}
		if (cd_streq(inherit->u.str.s, "core"))
			envv_filter(&e, keep_core, NULL);
		if (!ignore_defaults)
			envv_filter(&e, keep_not_default_excluded, NULL);
		uint64_t steps = 0;
		struct patterns ps;
		patterns_init(&ps, exclude, &steps);
		size_t names = e.n;
		envv_filter(&e, keep_not_matching, &ps);
		bool exhausted = ps.exhausted;
		if (exhausted)
			r = too_much_matching(&ps, "envPolicy.exclude", names, err);
		patterns_done(&ps);
		if (exhausted) {
			envv_done(&e);
			return r;
		}
		envv_overlay(&e, set);
		if (include_only->u.arr.n > 0) {
			patterns_init(&ps, include_only, &steps);
			names = e.n;
			envv_filter(&e, keep_matching, &ps);
			exhausted = ps.exhausted;
			if (exhausted)
				r = too_much_matching(&ps, "envPolicy.includeOnly", names, err);
			patterns_done(&ps);
			if (exhausted) {
				envv_done(&e);
				return r;
			}
		}
	}
	envv_overlay(&e, env);
	if (!e.v)
		e.v = cd_xcalloc(1, sizeof(*e.v));
	index_done(&e.ix);
	*ret = e.v;
	return 0;
}

bool cd_intent_sandboxed(const struct cd_cli_bound *b)
{
	return b->lp ? b->lp->sandboxed : b->sp && b->sp->sandboxed;
}

int cd_intent_fs_helper_plan(const struct cd_cli_bound *b, const struct cd_linux_plan **ret,
			     char **err)
{
	*ret = NULL;
	if (!cd_intent_sandboxed(b) || b->plan->fs_unrestricted ||
	    b->plan->type != CD_PROFILE_MANAGED)
		return 0;
	if (!b->lp) {
		/* Never in the server: that would drop the sandbox the request asks for. */
		*err = cd_xstrdup("a file-system request under a sandbox that restricts the file "
				  "system runs in cordon's fs helper, which does not run under "
				  "Seatbelt yet (macOS): not done; send it without such a sandbox "
				  "context, or serve from Linux");
		return -EOPNOTSUPP;
	}
	*ret = b->lp;
	return 0;
}
