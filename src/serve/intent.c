/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "core/profile.h"
#include "sandbox/backend.h"
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
	case CD_JSON_NUMBER: {
		int64_t i;
		uint64_t u;
		bool integer = cd_json_int64(v, &i) == 0 || cd_json_uint64(v, &u) == 0;
		cd_strbuf_printf(sb, "%s `", integer ? "integer" : "floating point");
		append_quoted(sb, v->u.num.text, strlen(v->u.num.text));
		cd_strbuf_append_c(sb, '`');
		break;
	}
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

char *cd_param_missing(const char *field)
{
	return cd_xasprintf("missing field `%s`", field);
}

char *cd_param_invalid(const struct cd_json *v, const char *exp, const char *field)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "invalid type: ");
	describe(&sb, v);
	cd_strbuf_printf(&sb, ", expected %s", exp);
	if (field)
		cd_strbuf_printf(&sb, " for `%s`", field);
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

int cd_param_u64(const struct cd_json *obj, const char *key, const char *field, uint64_t def,
		 uint64_t *ret, char **err)
{
	const struct cd_json *v = member(obj, key);
	*ret = def;
	if (!v || v->type == CD_JSON_NULL)
		return 1;
	if (v->type != CD_JSON_NUMBER || cd_json_uint64(v, ret) < 0) {
		*ret = def;
		*err = cd_param_invalid(v, "u64", field);
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

int cd_intent_limits_only(const struct cd_linux_host *host, const struct cd_linux_opts *lopts,
			  const struct cd_intent_limits *lim, struct cd_cli_bound *b, char **err)
{
	memset(b, 0, sizeof(*b));
	int r = merge_limits(NULL, lim, b, err);
	if (r < 0 || !cd_limits_any(&b->limits))
		return r;
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
	static const char *const levels[] = { "disabled", "restricted-token", "elevated" };
	const struct cd_json *perm, *level, *cwd, *roots_v;
	char **roots = NULL;
	size_t n_roots = 0;
	bool flag;
	int r;

	memset(b, 0, sizeof(*b));
	if (sandbox->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(sandbox, "struct FileSystemSandboxContext", "sandbox");
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
				      "`elevated` for `sandbox.windowsSandboxLevel`");
		*err = cd_strbuf_steal(&sb);
		return -EINVAL;
	}
	r = cd_param_bool(sandbox, "windowsSandboxPrivateDesktop",
			  "sandbox.windowsSandboxPrivateDesktop", false, false, &flag, err);
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

	if (enforce_managed_network) {
		cd_strv_free(roots);
		*err = cd_xstrdup("managed network enforcement is not available in this cordon "
				  "build (no network proxy); refusing rather than running with "
				  "open network");
		return -EINVAL;
	}
	/* Limits bound commands (process/start); an fs helper gets none. */
	if (lim && merge_limits(&b->profile->limits, lim, b, err) < 0) {
		cd_strv_free(roots);
		return -EINVAL;
	}

	r = cd_cli_bind_profile(b, (const char *const *)roots, n_roots, lopts, host);
	cd_strv_free(roots);
	if (r < 0) {
		*err = cd_xstrdup(b->refusal ? b->refusal : "the sandbox cannot be built");
		return -EINVAL;
	}
	return 0;
}

/* ---- environment ---- */

bool cd_env_pattern_match(const char *pattern, const char *name)
{
	const char *p = pattern, *n = name;
	const char *star = NULL, *resume = NULL;

	/* Greedy with one backtrack point: enough for '*' and '?' only. */
	while (*n) {
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

static bool name_matches_any(const struct cd_json *patterns, const char *name)
{
	for (size_t i = 0; patterns && i < patterns->u.arr.n; i++) {
		const struct cd_json *pat = patterns->u.arr.items[i];
		if (!cd_json_string_has_nul(pat) && cd_env_pattern_match(pat->u.str.s, name))
			return true;
	}
	return false;
}

struct envv {
	char **v; /* "NAME=VALUE", NULL-terminated */
	size_t n;
};

static size_t entry_name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');
	return eq ? (size_t)(eq - entry) : strlen(entry);
}

/* Set name to value, replacing an entry of the same (case-sensitive) name. */
static void envv_set(struct envv *e, const char *name, size_t name_len, const char *value)
{
	char *entry = cd_xasprintf("%.*s=%s", (int)name_len, name, value);
	for (size_t i = 0; i < e->n; i++) {
		if (entry_name_len(e->v[i]) == name_len && !memcmp(e->v[i], name, name_len)) {
			free(e->v[i]);
			e->v[i] = entry;
			return;
		}
	}
	e->v = cd_xreallocarray(e->v, e->n + 2, sizeof(*e->v));
	e->v[e->n++] = entry;
	e->v[e->n] = NULL;
}

/* Keep the entries whose name satisfies keep(). */
static void envv_filter(struct envv *e, bool (*keep)(const char *name, const void *arg),
			const void *arg)
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
}

static bool keep_core(const char *name, const void *arg)
{
	static const char *const core[] = { "PATH", "SHELL",  "TMPDIR",	  "TEMP",    "TMP", "HOME",
					    "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "USER" };
	for (size_t i = 0; i < CD_ARRAY_SIZE(core); i++)
		if (!strcasecmp(name, core[i]))
			return true;
	return false;
}

static bool keep_not_default_excluded(const char *name, const void *arg)
{
	return !cd_env_pattern_match("*KEY*", name) && !cd_env_pattern_match("*SECRET*", name) &&
	       !cd_env_pattern_match("*TOKEN*", name);
}

static bool keep_not_matching(const char *name, const void *arg)
{
	return !name_matches_any(arg, name);
}

static bool keep_matching(const char *name, const void *arg)
{
	return name_matches_any(arg, name);
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
			cd_strbuf_append(&sb, "`, expected one of `core`, `all`, `none` for "
					      "`envPolicy.inherit`");
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
		envv_filter(&e, keep_not_matching, exclude);
		envv_overlay(&e, set);
		if (include_only->u.arr.n > 0)
			envv_filter(&e, keep_matching, include_only);
	}
	envv_overlay(&e, env);
	if (!e.v)
		e.v = cd_xcalloc(1, sizeof(*e.v));
	*ret = e.v;
	return 0;
}
