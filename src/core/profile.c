/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Permission profiles: the exec-server wire shape (snake_case, tagged by
 * "type"), the legacy SandboxPolicy forms and cordon's policy files.
 *
 * Wire mode behaves like serde: unknown keys are ignored. File mode is
 * strict: a misspelled key in a sandbox policy must be an error, never a
 * silent allow. Every error carries the position and the JSON location of
 * the offending value so a user can fix a policy file without guessing.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/glob.h"
#include "core/json.h"
#include "core/pathuri.h"
#include "core/profile.h"
#include "core/util.h"

/* Policy files are small; these bound what a hostile file can cost. */
#define POLICY_MAX_BYTES  (1024 * 1024)
#define POLICY_MAX_VALUES 100000
#define POLICY_MAX_DEPTH  64

/* clang-format off */
static const char *const access_names[CD_ACCESS_COUNT] = {
	[CD_ACCESS_READ]  = "read",
	[CD_ACCESS_WRITE] = "write",
	[CD_ACCESS_DENY]  = "deny",
};

static const char *const network_names[CD_NET_COUNT] = {
	[CD_NET_RESTRICTED] = "restricted",
	[CD_NET_ENABLED]    = "enabled",
	[CD_NET_MANAGED]    = "managed",
};

static const char *const profile_type_names[CD_PROFILE_TYPE_COUNT] = {
	[CD_PROFILE_MANAGED]  = "managed",
	[CD_PROFILE_DISABLED] = "disabled",
	[CD_PROFILE_EXTERNAL] = "external",
};

static const char *const special_names[CD_SPECIAL_COUNT] = {
	[CD_SPECIAL_ROOT]          = "root",
	[CD_SPECIAL_MINIMAL]       = "minimal",
	[CD_SPECIAL_PROJECT_ROOTS] = "project_roots",
	[CD_SPECIAL_TMPDIR]        = "tmpdir",
	[CD_SPECIAL_SLASH_TMP]     = "slash_tmp",
	[CD_SPECIAL_UNKNOWN]       = "unknown",
};

static const char *const special_tokens[CD_SPECIAL_COUNT] = {
	[CD_SPECIAL_ROOT]          = ":root",
	[CD_SPECIAL_MINIMAL]       = ":minimal",
	[CD_SPECIAL_PROJECT_ROOTS] = ":workspace_roots",
	[CD_SPECIAL_TMPDIR]        = ":tmpdir",
	[CD_SPECIAL_SLASH_TMP]     = ":slash_tmp",
	[CD_SPECIAL_UNKNOWN]       = ":unknown",
};
/* clang-format on */

const char *cd_access_name(enum cd_access a)
{
	return (unsigned)a < CD_ACCESS_COUNT ? access_names[a] : NULL;
}

const char *cd_network_name(enum cd_network n)
{
	return (unsigned)n < CD_NET_COUNT ? network_names[n] : NULL;
}

const char *cd_profile_type_name(enum cd_profile_type t)
{
	return (unsigned)t < CD_PROFILE_TYPE_COUNT ? profile_type_names[t] : NULL;
}

const char *cd_special_name(enum cd_special s)
{
	return (unsigned)s < CD_SPECIAL_COUNT ? special_names[s] : NULL;
}

const char *cd_special_token(enum cd_special s)
{
	return (unsigned)s < CD_SPECIAL_COUNT ? special_tokens[s] : NULL;
}

int cd_access_from_name(const char *s)
{
	if (!s)
		return -EINVAL;
	for (int i = 0; i < CD_ACCESS_COUNT; i++)
		if (cd_streq(s, access_names[i]))
			return i;
	/* The protocol accepts "none" on input as another spelling of deny. */
	if (cd_streq(s, "none"))
		return CD_ACCESS_DENY;
	return -EINVAL;
}

int cd_network_from_name(const char *s)
{
	if (!s)
		return -EINVAL;
	for (int i = 0; i < CD_NET_COUNT; i++)
		if (cd_streq(s, network_names[i]))
			return i;
	return -EINVAL;
}

void cd_parse_error_done(struct cd_parse_error *e)
{
	if (!e)
		return;
	free(e->path);
	free(e->msg);
	e->path = e->msg = NULL;
	e->line = e->col = 0;
}

void cd_fs_entry_done(struct cd_fs_entry *e)
{
	if (!e)
		return;
	free(e->path);
	free(e->subpath);
	e->path = e->subpath = NULL;
}

struct cd_profile *cd_profile_free(struct cd_profile *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n_entries; i++)
		cd_fs_entry_done(&p->entries[i]);
	free(p->entries);
	free(p->description);
	free(p->origin);
	if (p->netpol) {
		cd_netpolicy_done(p->netpol);
		free(p->netpol);
	}
	free(p);
	return NULL;
}

static char *strdup_or_null(const char *s)
{
	return s ? cd_xstrdup(s) : NULL;
}

/*
 * Room for one more entry. The array only grows here, to the next power of
 * two, so its capacity is implied by n_entries: appending n entries costs
 * O(n), not one reallocation (and maybe a copy) each.
 */
static void entries_grow(struct cd_profile *p)
{
	size_t n = p->n_entries;
	if (n == 0 || (n & (n - 1)) == 0)
		p->entries = cd_xreallocarray(p->entries, n ? 2 * n : 1, sizeof(*p->entries));
}

void cd_profile_add_entry(struct cd_profile *p, const struct cd_fs_entry *e)
{
	entries_grow(p);
	struct cd_fs_entry *n = &p->entries[p->n_entries++];
	*n = *e;
	n->path = strdup_or_null(e->path);
	n->subpath = strdup_or_null(e->subpath);
}

bool cd_profile_is_file_arg(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n >= 5 && cd_streq(s + n - 5, ".json"));
}

bool cd_profile_depends_on_cwd(const struct cd_profile *p)
{
	for (size_t i = 0; p && i < p->n_entries; i++) {
		const struct cd_fs_entry *e = &p->entries[i];
		if (e->kind == CD_ENTRY_SPECIAL && e->special == CD_SPECIAL_PROJECT_ROOTS)
			return true;
		if (e->kind == CD_ENTRY_GLOB && e->path && e->path[0] != '/' &&
		    strncmp(e->path, CD_GLOB_PROJECT_ROOTS_PREFIX,
			    strlen(CD_GLOB_PROJECT_ROOTS_PREFIX)) != 0)
			return true;
	}
	return false;
}

struct cd_profile *cd_profile_dup(const struct cd_profile *p)
{
	if (!p)
		return NULL;
	struct cd_profile *d = cd_xcalloc(1, sizeof(*d));
	*d = *p;
	d->entries = NULL;
	d->n_entries = 0;
	for (size_t i = 0; i < p->n_entries; i++)
		cd_profile_add_entry(d, &p->entries[i]);
	d->description = strdup_or_null(p->description);
	d->origin = strdup_or_null(p->origin);
	if (p->netpol) {
		d->netpol = cd_xcalloc(1, sizeof(*d->netpol));
		d->netpol->mode = p->netpol->mode;
		d->netpol->socks5 = p->netpol->socks5;
		cd_netpolicy_append(d->netpol, p->netpol);
	}
	return d;
}

/*
 * Tidy an absolute path (cd_path_tidy). ".." stays: it is resolved with the
 * file system, after any symlink before it, when the plan canonicalises the
 * path ("/a/link/../f" is the f next to the link's target, as the kernel
 * sees it, not /a/f). Returns NULL if the input is not absolute or has a NUL.
 */
static char *normalize_abs(const char *in, size_t len)
{
	if (len == 0 || in[0] != '/' || memchr(in, '\0', len))
		return NULL;
	char *copy = cd_xstrndup(in, len);
	char *tidy = cd_path_tidy(copy);
	free(copy);
	return tidy;
}

/*
 * Check and normalise a :workspace_roots subpath: relative, non-empty, no
 * "." or ".." component, no NUL. "a//b/" becomes "a/b". Static message on
 * error.
 */
static int normalize_subpath(const char *in, size_t len, char **ret, const char **reterr)
{
	if (memchr(in, '\0', len)) {
		*reterr = "subpath contains a NUL byte";
		return -EINVAL;
	}
	if (len > 0 && in[0] == '/') {
		*reterr = "subpath must be relative";
		return -EINVAL;
	}
	struct cd_strbuf sb = { 0 };
	size_t i = 0;
	while (i < len) {
		size_t s = i;
		while (i < len && in[i] != '/')
			i++;
		size_t n = i - s;
		while (i < len && in[i] == '/')
			i++;
		if (n == 0)
			continue;
		if ((n == 1 && in[s] == '.') || (n == 2 && in[s] == '.' && in[s + 1] == '.')) {
			cd_strbuf_done(&sb);
			*reterr = "subpath must not contain \".\" or \"..\" components";
			return -EINVAL;
		}
		if (sb.len)
			cd_strbuf_append_c(&sb, '/');
		cd_strbuf_append_n(&sb, in + s, n);
	}
	if (sb.len == 0) {
		cd_strbuf_done(&sb);
		*reterr = "subpath must not be empty";
		return -EINVAL;
	}
	*ret = cd_strbuf_steal(&sb);
	return 0;
}

int cd_entry_from_cli(const char *arg, enum cd_access access, struct cd_fs_entry *ret,
		      const char **reterr)
{
	const char *dummy;
	if (!reterr)
		reterr = &dummy;
	*ret = (struct cd_fs_entry){ .access = access };
	if (!arg || !*arg) {
		*reterr = "empty path";
		return -EINVAL;
	}
	if (arg[0] == '/') {
		ret->kind = CD_ENTRY_PATH;
		ret->path = normalize_abs(arg, strlen(arg));
		return 0;
	}
	if (arg[0] != ':') {
		*reterr = "path must be absolute or one of :root, :minimal, "
			  ":workspace_roots[/SUBPATH], "
			  ":tmpdir, :slash_tmp";
		return -EINVAL;
	}
	static const struct {
		const char *token;
		enum cd_special special;
	} tokens[] = {
		{ ":root", CD_SPECIAL_ROOT },
		{ ":minimal", CD_SPECIAL_MINIMAL },
		{ ":workspace_roots", CD_SPECIAL_PROJECT_ROOTS },
		{ ":tmpdir", CD_SPECIAL_TMPDIR },
		{ ":slash_tmp", CD_SPECIAL_SLASH_TMP },
	};
	ret->kind = CD_ENTRY_SPECIAL;
	for (size_t i = 0; i < CD_ARRAY_SIZE(tokens); i++) {
		if (cd_streq(arg, tokens[i].token)) {
			ret->special = tokens[i].special;
			return 0;
		}
	}
	const char *wr = ":workspace_roots/";
	if (cd_startswith(arg, wr)) {
		const char *sub = arg + strlen(wr);
		int r = normalize_subpath(sub, strlen(sub), &ret->subpath, reterr);
		if (r < 0)
			return r;
		ret->special = CD_SPECIAL_PROJECT_ROOTS;
		return 0;
	}
	*reterr = "unknown symbolic path (expected :root, :minimal, :workspace_roots[/SUBPATH], "
		  ":tmpdir or :slash_tmp)";
	return -EINVAL;
}

/* ---- JSON conversion ---------------------------------------------------- */

struct conv {
	cd_profile_parse_flags flags;
	struct cd_parse_error *err;
	struct cd_strbuf loc; /* JSON location of the value being converted */
};

static bool strict(const struct conv *c)
{
	return c->flags & CD_PROFILE_PARSE_FILE;
}

/* Enter a member or an array item; returns the length to restore with loc_pop(). */
static size_t loc_push_key(struct conv *c, const char *key)
{
	size_t old = c->loc.len;
	if (c->loc.len)
		cd_strbuf_append_c(&c->loc, '.');
	cd_strbuf_append(&c->loc, key);
	return old;
}

static size_t loc_push_index(struct conv *c, size_t i)
{
	size_t old = c->loc.len;
	cd_strbuf_printf(&c->loc, "[%zu]", i);
	return old;
}

static void loc_pop(struct conv *c, size_t old)
{
	c->loc.len = old;
	if (c->loc.buf)
		c->loc.buf[old] = '\0';
}

static int fail_at(struct conv *c, unsigned line, unsigned col, const char *fmt, ...)
	CD_PRINTF(4, 5);

static int fail_at(struct conv *c, unsigned line, unsigned col, const char *fmt, ...)
{
	if (c->err) {
		va_list ap;
		va_start(ap, fmt);
		c->err->msg = cd_xvasprintf(fmt, ap);
		va_end(ap);
		c->err->line = line;
		c->err->col = col;
		c->err->path = cd_xstrdup(c->loc.buf ? c->loc.buf : "");
	}
	return -EINVAL;
}

/* A human name for the value at the current location. */
static const char *loc_name(const struct conv *c)
{
	if (!c->loc.len)
		return "the profile";
	const char *dot = strrchr(c->loc.buf, '.');
	return dot ? dot + 1 : c->loc.buf;
}

static int expect_type(struct conv *c, const struct cd_json *v, enum cd_json_type t,
		       const char *what)
{
	if (v->type == t || (t == CD_JSON_TRUE && v->type == CD_JSON_FALSE))
		return 0;
	if (c->loc.len)
		return fail_at(c, v->line, v->col, "expected %s for \"%s\", got %s", what,
			       loc_name(c), cd_json_type_name(v->type));
	return fail_at(c, v->line, v->col, "expected %s for the profile, got %s", what,
		       cd_json_type_name(v->type));
}

static int expect_object(struct conv *c, const struct cd_json *v)
{
	return expect_type(c, v, CD_JSON_OBJECT, "an object");
}

/* A string without embedded NUL. */
static int expect_string(struct conv *c, const struct cd_json *v)
{
	int r = expect_type(c, v, CD_JSON_STRING, "a string");
	if (r < 0)
		return r;
	if (cd_json_string_has_nul(v))
		return fail_at(c, v->line, v->col, "\"%s\" contains a NUL character", loc_name(c));
	return 0;
}

/*
 * In file mode every key must be one we know. Wire mode ignores unknown
 * keys, as serde does for the Rust peer.
 */
static int check_keys(struct conv *c, const struct cd_json *obj, const char *const *allowed)
{
	if (!strict(c))
		return 0;
	for (size_t i = 0; i < obj->u.obj.n; i++) {
		const struct cd_json_member *m = &obj->u.obj.members[i];
		bool ok = false;
		for (size_t k = 0; allowed[k]; k++)
			if (strlen(m->key) == m->key_len && cd_streq(m->key, allowed[k]))
				ok = true;
		if (ok)
			continue;
		struct cd_strbuf exp = { 0 };
		for (size_t k = 0; allowed[k]; k++)
			cd_strbuf_printf(&exp, "%s%s", k ? ", " : "", allowed[k]);
		size_t old = loc_push_key(c, m->key);
		int r;
		if (exp.len)
			r = fail_at(c, m->line, m->col, "unknown key \"%s\" (expected one of: %s)",
				    m->key, exp.buf);
		else
			r = fail_at(c, m->line, m->col,
				    "unknown key \"%s\" (no other keys allowed)", m->key);
		loc_pop(c, old);
		cd_strbuf_done(&exp);
		return r;
	}
	return 0;
}

/* Required member: error at the enclosing object's position when missing. */
static const struct cd_json *require(struct conv *c, const struct cd_json *obj, const char *key,
				     int *r)
{
	const struct cd_json *v = cd_json_get(obj, key);
	if (!v) {
		size_t old = loc_push_key(c, key);
		*r = fail_at(c, obj->line, obj->col, "missing required key \"%s\"", key);
		loc_pop(c, old);
	}
	return v;
}

/* Optional member; JSON null counts as absent, as for serde's Option. */
static const struct cd_json *optional(const struct cd_json *obj, const char *key)
{
	const struct cd_json *v = cd_json_get(obj, key);
	return v && v->type == CD_JSON_NULL ? NULL : v;
}

static int conv_access(struct conv *c, const struct cd_json *v, enum cd_access *ret)
{
	int r = expect_string(c, v);
	if (r < 0)
		return r;
	r = cd_access_from_name(v->u.str.s);
	if (r < 0)
		return fail_at(c, v->line, v->col,
			       "unknown access \"%s\" (expected read, write, deny or none)",
			       v->u.str.s);
	*ret = (enum cd_access)r;
	return 0;
}

static int conv_network(struct conv *c, const struct cd_json *v, enum cd_network *ret)
{
	int r = expect_string(c, v);
	if (r < 0)
		return r;
	r = cd_network_from_name(v->u.str.s);
	/* "managed" (proxy-only egress) is cordon's own; the wire does not know it. */
	if (r < 0 || (r == CD_NET_MANAGED && !strict(c)))
		return fail_at(
			c, v->line, v->col, "unknown network mode \"%s\" (expected %s)", v->u.str.s,
			strict(c) ? "restricted, enabled or managed" : "restricted or enabled");
	*ret = (enum cd_network)r;
	return 0;
}

static int conv_bool(struct conv *c, const struct cd_json *v, bool *ret)
{
	int r = expect_type(c, v, CD_JSON_TRUE, "a boolean");
	if (r < 0)
		return r;
	*ret = v->type == CD_JSON_TRUE;
	return 0;
}

/* Run f on member key of obj with the location extended. */
#define WITH_KEY(c, key, expr)                          \
	({                                              \
		size_t _old = loc_push_key((c), (key)); \
		int _r = (expr);                        \
		loc_pop((c), _old);                     \
		_r;                                     \
	})

/* A list of domain patterns or CIDRs ("allow_domains"...), each checked as the proxy does. */
static int conv_net_list(struct conv *c, const struct cd_json *v, struct cd_netpolicy *np, int kind)
{
	int r = expect_type(c, v, CD_JSON_ARRAY, "an array");
	if (r < 0)
		return r;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct cd_json *e = v->u.arr.items[i];
		const char *why = NULL;
		size_t old = loc_push_index(c, i);
		r = expect_string(c, e);
		if (r >= 0) {
			r = kind == 2 ? cd_netpolicy_add_cidr(np, e->u.str.s, &why)
				      : cd_netpolicy_add_domain(np, e->u.str.s, kind == 1, &why);
			if (r < 0)
				r = fail_at(c, e->line, e->col, "%s \"%s\": %s",
					    kind == 2 ? "CIDR" : "domain pattern", e->u.str.s, why);
		}
		loc_pop(c, old);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * "network" as an object (policy files only): {"mode": "managed",
 * "allow_domains": [...], "deny_domains": [...], "allow_cidrs": [...],
 * "proxy_mode": "full"|"limited", "socks5": BOOL}, the rules of cordon's
 * own proxy.
 */
static int conv_network_object(struct conv *c, const struct cd_json *v, enum cd_network *ret,
			       struct cd_netpolicy **ret_np)
{
	static const char *const keys[] = { "mode",	   "allow_domains", "deny_domains",
					    "allow_cidrs", "proxy_mode",    "socks5",
					    NULL };
	const struct cd_json *f;
	int r = check_keys(c, v, keys);
	if (r < 0)
		return r;
	const struct cd_json *mode = require(c, v, "mode", &r);
	if (!mode)
		return r;
	r = WITH_KEY(c, "mode", expect_string(c, mode));
	if (r < 0)
		return r;
	if (!cd_streq(mode->u.str.s, "managed"))
		return WITH_KEY(c, "mode",
				fail_at(c, mode->line, mode->col,
					"the network object is for a managed network (\"mode\": "
					"\"managed\"), got \"%s\"; write other modes as a string",
					mode->u.str.s));
	struct cd_netpolicy *np = cd_xcalloc(1, sizeof(*np));
	static const char *const lists[] = { "allow_domains", "deny_domains", "allow_cidrs" };
	for (int k = 0; k < 3 && r >= 0; k++)
		if ((f = optional(v, lists[k])))
			r = WITH_KEY(c, lists[k], conv_net_list(c, f, np, k));
	if (r >= 0 && (f = optional(v, "proxy_mode"))) {
		r = WITH_KEY(c, "proxy_mode", expect_string(c, f));
		if (r >= 0) {
			np->mode = cd_netmode_from_string(f->u.str.s);
			if (np->mode == CD_NETMODE_INVALID)
				r = WITH_KEY(c, "proxy_mode",
					     fail_at(c, f->line, f->col,
						     "unknown proxy mode \"%s\" (expected full or "
						     "limited)",
						     f->u.str.s));
		}
	}
	if (r >= 0 && (f = optional(v, "socks5"))) {
		r = WITH_KEY(c, "socks5", conv_bool(c, f, &np->socks5));
		const char *why = NULL;
		if (r >= 0 && cd_netpolicy_check(np, &why) < 0)
			r = WITH_KEY(c, "socks5", fail_at(c, f->line, f->col, "%s", why));
	}
	if (r < 0) {
		cd_netpolicy_done(np);
		free(np);
		return r;
	}
	*ret = CD_NET_MANAGED;
	*ret_np = np;
	return 0;
}

static int conv_uri(struct conv *c, const struct cd_json *v, char **ret)
{
	int r = expect_string(c, v);
	if (r < 0)
		return r;
	if (v->u.str.s[0] == '/')
		return fail_at(c, v->line, v->col,
			       "expected a file:// URI for \"%s\", got the native path \"%s\"",
			       loc_name(c), v->u.str.s);
	const char *reterr = NULL;
	char *path = NULL;
	r = cd_pathuri_to_posix(v->u.str.s, v->u.str.len, &path, &reterr);
	if (r < 0)
		return fail_at(c, v->line, v->col, "invalid path URI \"%s\": %s", v->u.str.s,
			       reterr ? reterr : "not a valid file:// URI");
	*ret = normalize_abs(path, strlen(path));
	free(path);
	if (!*ret)
		return fail_at(c, v->line, v->col, "path URI \"%s\" is not an absolute path",
			       v->u.str.s);
	return 0;
}

static int conv_subpath(struct conv *c, const struct cd_json *value, char **ret)
{
	const struct cd_json *v = optional(value, "subpath");
	if (!v)
		return 0;
	size_t old = loc_push_key(c, "subpath");
	int r = expect_type(c, v, CD_JSON_STRING, "a string");
	if (r >= 0) {
		const char *reterr = NULL;
		r = normalize_subpath(v->u.str.s, v->u.str.len, ret, &reterr);
		if (r < 0)
			r = fail_at(c, v->line, v->col, "invalid subpath \"%s\": %s", v->u.str.s,
				    reterr);
	}
	loc_pop(c, old);
	return r;
}

static int conv_special(struct conv *c, const struct cd_json *value, struct cd_fs_entry *e)
{
	static const char *const keys_plain[] = { "kind", NULL };
	static const char *const keys_sub[] = { "kind", "subpath", NULL };
	static const char *const keys_unknown[] = { "kind", "path", "subpath", NULL };
	int r = expect_object(c, value);
	if (r < 0)
		return r;
	const struct cd_json *kind = require(c, value, "kind", &r);
	if (!kind)
		return r;
	r = WITH_KEY(c, "kind", expect_string(c, kind));
	if (r < 0)
		return r;
	const char *k = kind->u.str.s;
	e->kind = CD_ENTRY_SPECIAL;
	if (cd_streq(k, "root") || cd_streq(k, "minimal") || cd_streq(k, "tmpdir") ||
	    cd_streq(k, "slash_tmp")) {
		e->special = cd_streq(k, "root")      ? CD_SPECIAL_ROOT
			     : cd_streq(k, "minimal") ? CD_SPECIAL_MINIMAL
			     : cd_streq(k, "tmpdir")  ? CD_SPECIAL_TMPDIR
						      : CD_SPECIAL_SLASH_TMP;
		return check_keys(c, value, keys_plain);
	}
	if (cd_streq(k, "project_roots") || cd_streq(k, "current_working_directory")) {
		e->special = CD_SPECIAL_PROJECT_ROOTS;
		r = check_keys(c, value, keys_sub);
		if (r < 0)
			return r;
		return conv_subpath(c, value, &e->subpath);
	}
	e->special = CD_SPECIAL_UNKNOWN;
	if (cd_streq(k, "unknown")) {
		/* The explicit forward-compatibility form carries its own token. */
		r = check_keys(c, value, keys_unknown);
		if (r < 0)
			return r;
		const struct cd_json *p = require(c, value, "path", &r);
		if (!p)
			return r;
		r = WITH_KEY(c, "path", expect_string(c, p));
		if (r < 0)
			return r;
		e->path = cd_xstrdup(p->u.str.s);
		return conv_subpath(c, value, &e->subpath);
	}
	/*
	 * A kind this version does not know. On the wire, keep it (it is
	 * ignored when binding) so a newer peer's profile still parses. A
	 * policy file is written for this cordon, so there it is far more
	 * likely a typo ("project_root") than a newer kind: refuse it.
	 */
	if (strict(c))
		return WITH_KEY(c, "kind",
				fail_at(c, kind->line, kind->col,
					"unknown special path kind \"%s\" (expected root, minimal, "
					"project_roots, tmpdir, slash_tmp or unknown)",
					k));
	e->path = cd_xasprintf(":%s", k);
	return 0;
}

static int conv_entry(struct conv *c, const struct cd_json *v, struct cd_fs_entry *e)
{
	static const char *const keys[] = { "path", "access", NULL };
	static const char *const keys_path[] = { "type", "path", NULL };
	static const char *const keys_glob[] = { "type", "pattern", NULL };
	static const char *const keys_special[] = { "type", "value", NULL };
	int r = expect_object(c, v);
	if (r < 0)
		return r;
	e->line = v->line;
	e->col = v->col;
	r = check_keys(c, v, keys);
	if (r < 0)
		return r;
	const struct cd_json *path = require(c, v, "path", &r);
	if (!path)
		return r;
	const struct cd_json *access = require(c, v, "access", &r);
	if (!access)
		return r;
	r = WITH_KEY(c, "access", conv_access(c, access, &e->access));
	if (r < 0)
		return r;

	size_t old = loc_push_key(c, "path");
	r = expect_object(c, path);
	if (r < 0)
		goto out;
	const struct cd_json *type = require(c, path, "type", &r);
	if (!type)
		goto out;
	r = WITH_KEY(c, "type", expect_string(c, type));
	if (r < 0)
		goto out;
	const char *t = type->u.str.s;
	if (cd_streq(t, "path")) {
		e->kind = CD_ENTRY_PATH;
		r = check_keys(c, path, keys_path);
		if (r < 0)
			goto out;
		const struct cd_json *p = require(c, path, "path", &r);
		if (!p)
			goto out;
		r = WITH_KEY(c, "path", conv_uri(c, p, &e->path));
	} else if (cd_streq(t, "glob_pattern")) {
		e->kind = CD_ENTRY_GLOB;
		r = check_keys(c, path, keys_glob);
		if (r < 0)
			goto out;
		const struct cd_json *p = require(c, path, "pattern", &r);
		if (!p)
			goto out;
		r = WITH_KEY(c, "pattern", expect_string(c, p));
		if (r < 0)
			goto out;
		if (p->u.str.len == 0) {
			r = WITH_KEY(c, "pattern",
				     fail_at(c, p->line, p->col, "glob pattern must not be empty"));
			goto out;
		}
		char *why = NULL;
		if (cd_glob_check(p->u.str.s, &why) < 0) {
			r = WITH_KEY(c, "pattern", fail_at(c, p->line, p->col, "%s", why));
			free(why);
			goto out;
		}
		e->path = cd_xstrdup(p->u.str.s);
		/* Globs are expanded to a snapshot of matches: only denying is sound. */
		if (e->access != CD_ACCESS_DENY) {
			loc_pop(c, old);
			return WITH_KEY(c, "access",
					fail_at(c, access->line, access->col,
						"glob_pattern entries may only deny (got \"%s\")",
						access->u.str.s));
		}
	} else if (cd_streq(t, "special")) {
		r = check_keys(c, path, keys_special);
		if (r < 0)
			goto out;
		const struct cd_json *val = require(c, path, "value", &r);
		if (!val)
			goto out;
		r = WITH_KEY(c, "value", conv_special(c, val, e));
	} else {
		r = WITH_KEY(
			c, "type",
			fail_at(c, type->line, type->col,
				"unknown path type \"%s\" (expected path, glob_pattern or special)",
				t));
	}
out:
	loc_pop(c, old);
	return r;
}

static int conv_file_system(struct conv *c, const struct cd_json *fs, struct cd_profile *p)
{
	static const char *const keys_restricted[] = { "type", "entries", "glob_scan_max_depth",
						       NULL };
	static const char *const keys_unrestricted[] = { "type", NULL };
	int r = expect_object(c, fs);
	if (r < 0)
		return r;
	const struct cd_json *type = require(c, fs, "type", &r);
	if (!type)
		return r;
	r = WITH_KEY(c, "type", expect_string(c, type));
	if (r < 0)
		return r;
	if (cd_streq(type->u.str.s, "unrestricted")) {
		p->fs_unrestricted = true;
		return check_keys(c, fs, keys_unrestricted);
	}
	if (!cd_streq(type->u.str.s, "restricted"))
		return WITH_KEY(c, "type",
				fail_at(c, type->line, type->col,
					"unknown file_system type \"%s\" (expected restricted or "
					"unrestricted)",
					type->u.str.s));
	r = check_keys(c, fs, keys_restricted);
	if (r < 0)
		return r;
	const struct cd_json *depth = optional(fs, "glob_scan_max_depth");
	if (depth) {
		size_t old = loc_push_key(c, "glob_scan_max_depth");
		uint64_t d = 0;
		r = expect_type(c, depth, CD_JSON_NUMBER, "an integer");
		if (r >= 0 && (cd_json_uint64(depth, &d) < 0 || d < 1 || d > UINT32_MAX))
			r = fail_at(c, depth->line, depth->col,
				    "glob_scan_max_depth must be an integer of at least 1, got %s",
				    depth->u.num.text);
		loc_pop(c, old);
		if (r < 0)
			return r;
		p->glob_scan_max_depth = (unsigned)d;
	}
	const struct cd_json *entries = require(c, fs, "entries", &r);
	if (!entries)
		return r;
	size_t old = loc_push_key(c, "entries");
	r = expect_type(c, entries, CD_JSON_ARRAY, "an array");
	for (size_t i = 0; r >= 0 && i < entries->u.arr.n; i++) {
		struct cd_fs_entry e = { 0 };
		size_t o2 = loc_push_index(c, i);
		r = conv_entry(c, entries->u.arr.items[i], &e);
		loc_pop(c, o2);
		if (r >= 0) {
			/* Ownership of the strings moves into the profile. */
			entries_grow(p);
			p->entries[p->n_entries++] = e;
		} else {
			cd_fs_entry_done(&e);
		}
	}
	loc_pop(c, old);
	return r;
}

static void push_special(struct cd_profile *p, enum cd_special s, const char *subpath,
			 enum cd_access a, const struct cd_json *at)
{
	struct cd_fs_entry e = {
		.kind = CD_ENTRY_SPECIAL,
		.special = s,
		.subpath = (char *)subpath,
		.access = a,
		.line = at->line,
		.col = at->col,
	};
	cd_profile_add_entry(p, &e);
}

/* A legacy writable_roots item: a file:// URI or an absolute native path. */
static int conv_writable_root(struct conv *c, const struct cd_json *v, char **ret)
{
	int r = expect_string(c, v);
	if (r < 0)
		return r;
	if (v->u.str.s[0] == '/') {
		*ret = normalize_abs(v->u.str.s, v->u.str.len);
		return 0;
	}
	return conv_uri(c, v, ret);
}

static int conv_legacy_workspace_write(struct conv *c, const struct cd_json *v,
				       struct cd_profile *p)
{
	const struct cd_json *f;
	bool net = false, no_tmpdir = false, no_slash_tmp = false;
	int r = 0;
	char **roots = NULL;
	const struct cd_json **root_vals = NULL;
	size_t n_roots = 0;

	if ((f = optional(v, "network_access")))
		r = WITH_KEY(c, "network_access", conv_bool(c, f, &net));
	if (r >= 0 && (f = optional(v, "exclude_tmpdir_env_var")))
		r = WITH_KEY(c, "exclude_tmpdir_env_var", conv_bool(c, f, &no_tmpdir));
	if (r >= 0 && (f = optional(v, "exclude_slash_tmp")))
		r = WITH_KEY(c, "exclude_slash_tmp", conv_bool(c, f, &no_slash_tmp));
	if (r >= 0 && (f = optional(v, "writable_roots"))) {
		size_t old = loc_push_key(c, "writable_roots");
		r = expect_type(c, f, CD_JSON_ARRAY, "an array");
		if (r >= 0) {
			roots = cd_xcalloc(f->u.arr.n + 1, sizeof(char *));
			root_vals = cd_xcalloc(f->u.arr.n + 1, sizeof(*root_vals));
		}
		for (size_t i = 0; r >= 0 && i < f->u.arr.n; i++) {
			size_t o2 = loc_push_index(c, i);
			r = conv_writable_root(c, f->u.arr.items[i], &roots[i]);
			root_vals[i] = f->u.arr.items[i];
			loc_pop(c, o2);
			if (r >= 0)
				n_roots++;
		}
		loc_pop(c, old);
	}
	if (r >= 0) {
		p->type = CD_PROFILE_MANAGED;
		p->network = net ? CD_NET_ENABLED : CD_NET_RESTRICTED;
		push_special(p, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ, v);
		push_special(p, CD_SPECIAL_PROJECT_ROOTS, NULL, CD_ACCESS_WRITE, v);
		if (!no_slash_tmp)
			push_special(p, CD_SPECIAL_SLASH_TMP, NULL, CD_ACCESS_WRITE, v);
		if (!no_tmpdir)
			push_special(p, CD_SPECIAL_TMPDIR, NULL, CD_ACCESS_WRITE, v);
		for (size_t i = 0; i < n_roots; i++) {
			struct cd_fs_entry e = {
				.kind = CD_ENTRY_PATH,
				.path = roots[i],
				.access = CD_ACCESS_WRITE,
				.line = root_vals[i]->line,
				.col = root_vals[i]->col,
			};
			cd_profile_add_entry(p, &e);
		}
		push_special(p, CD_SPECIAL_PROJECT_ROOTS, ".git", CD_ACCESS_READ, v);
		push_special(p, CD_SPECIAL_PROJECT_ROOTS, ".agents", CD_ACCESS_READ, v);
		push_special(p, CD_SPECIAL_PROJECT_ROOTS, ".codex", CD_ACCESS_READ, v);
	}
	cd_strv_free(roots);
	free(root_vals);
	return r;
}

/*
 * The "limits" object (core/limits.h), in every form of profile and in
 * wire mode too: a key cordon knows must not be ignored as serde ignores
 * unknown ones, since dropping it would run the command unbounded.
 */
static int conv_limits(struct conv *c, const struct cd_json *v, struct cd_profile *p)
{
	const struct cd_json *lim = optional(v, "limits");
	if (!lim)
		return 0;
	const char *key = NULL;
	const struct cd_json *at = NULL;
	char *msg = NULL;
	size_t old = loc_push_key(c, "limits");
	int r = cd_limits_from_json(lim, &p->limits, &key, &at, &msg);
	if (r < 0) {
		const struct cd_json_member *m = key ? cd_json_get_member(lim, key) : NULL;
		size_t o2 = key ? loc_push_key(c, key) : c->loc.len;
		/* An unknown key is shown where the key is; a bad value where the value is. */
		bool unknown = m && cd_startswith(msg, "unknown key");
		unsigned line = unknown ? m->line : at ? at->line : lim->line;
		unsigned col = unknown ? m->col : at ? at->col : lim->col;
		r = fail_at(c, line, col, "%s", msg);
		loc_pop(c, o2);
		free(msg);
	}
	loc_pop(c, old);
	return r;
}

static int conv_profile_type(struct conv *c, const struct cd_json *v, struct cd_profile *p);

static int conv_profile(struct conv *c, const struct cd_json *v, struct cd_profile *p)
{
	int r = conv_profile_type(c, v, p);
	if (r < 0)
		return r;
	return conv_limits(c, v, p);
}

static int conv_profile_type(struct conv *c, const struct cd_json *v, struct cd_profile *p)
{
	static const char *const keys_managed[] = {
		"type", "file_system", "network", "version", "description", "limits", NULL,
	};
	static const char *const keys_external[] = {
		"type", "network", "version", "description", "limits", NULL,
	};
	static const char *const keys_plain[] = { "type", "version", "description", "limits",
						  NULL };
	static const char *const keys_ro[] = {
		"type", "network_access", "version", "description", "limits", NULL,
	};
	static const char *const keys_ww[] = {
		"type",
		"writable_roots",
		"network_access",
		"exclude_tmpdir_env_var",
		"exclude_slash_tmp",
		"version",
		"description",
		"limits",
		NULL,
	};
	/* external-sandbox: network_access is a mode string here, not a boolean. */
	static const char *const keys_ext_legacy[] = {
		"type", "network_access", "version", "description", "limits", NULL,
	};
	bool legacy = c->flags & CD_PROFILE_PARSE_LEGACY;
	int r = expect_object(c, v);
	if (r < 0)
		return r;

	if (strict(c)) {
		const struct cd_json *ver = require(c, v, "version", &r);
		if (!ver)
			return r;
		size_t old = loc_push_key(c, "version");
		int64_t n = 0;
		r = expect_type(c, ver, CD_JSON_NUMBER, "an integer");
		if (r >= 0 && cd_json_int64(ver, &n) < 0)
			r = fail_at(c, ver->line, ver->col,
				    "expected an integer for \"version\", got %s", ver->u.num.text);
		else if (r >= 0 && n != 1)
			r = fail_at(c, ver->line, ver->col,
				    "unsupported policy version %s (this cordon reads version 1)",
				    ver->u.num.text);
		loc_pop(c, old);
		if (r < 0)
			return r;
		p->version = 1;
		const struct cd_json *d = optional(v, "description");
		if (d) {
			r = WITH_KEY(c, "description", expect_string(c, d));
			if (r < 0)
				return r;
			p->description = cd_xstrdup(d->u.str.s);
		}
	}

	const struct cd_json *type = require(c, v, "type", &r);
	if (!type)
		return r;
	r = WITH_KEY(c, "type", expect_string(c, type));
	if (r < 0)
		return r;
	const char *t = type->u.str.s;
	const struct cd_json *f;

	if (cd_streq(t, "managed")) {
		p->type = CD_PROFILE_MANAGED;
		r = check_keys(c, v, keys_managed);
		if (r < 0)
			return r;
		const struct cd_json *fs = require(c, v, "file_system", &r);
		if (!fs)
			return r;
		const struct cd_json *net = require(c, v, "network", &r);
		if (!net)
			return r;
		r = WITH_KEY(c, "file_system", conv_file_system(c, fs, p));
		if (r < 0)
			return r;
		if (net->type == CD_JSON_OBJECT && strict(c))
			return WITH_KEY(c, "network",
					conv_network_object(c, net, &p->network, &p->netpol));
		return WITH_KEY(c, "network", conv_network(c, net, &p->network));
	}
	if (cd_streq(t, "disabled")) {
		p->type = CD_PROFILE_DISABLED;
		p->network = CD_NET_ENABLED;
		return check_keys(c, v, keys_plain);
	}
	if (cd_streq(t, "external")) {
		p->type = CD_PROFILE_EXTERNAL;
		r = check_keys(c, v, keys_external);
		if (r < 0)
			return r;
		const struct cd_json *net = require(c, v, "network", &r);
		if (!net)
			return r;
		return WITH_KEY(c, "network", conv_network(c, net, &p->network));
	}
	if (legacy && cd_streq(t, "read-only")) {
		bool on = false;
		r = check_keys(c, v, keys_ro);
		if (r >= 0 && (f = optional(v, "network_access")))
			r = WITH_KEY(c, "network_access", conv_bool(c, f, &on));
		if (r < 0)
			return r;
		p->type = CD_PROFILE_MANAGED;
		p->network = on ? CD_NET_ENABLED : CD_NET_RESTRICTED;
		push_special(p, CD_SPECIAL_ROOT, NULL, CD_ACCESS_READ, v);
		return 0;
	}
	if (legacy && cd_streq(t, "workspace-write")) {
		r = check_keys(c, v, keys_ww);
		if (r < 0)
			return r;
		return conv_legacy_workspace_write(c, v, p);
	}
	if (legacy && cd_streq(t, "danger-full-access")) {
		p->type = CD_PROFILE_DISABLED;
		p->network = CD_NET_ENABLED;
		return check_keys(c, v, keys_plain);
	}
	if (legacy && cd_streq(t, "external-sandbox")) {
		r = check_keys(c, v, keys_ext_legacy);
		if (r < 0)
			return r;
		p->type = CD_PROFILE_EXTERNAL;
		p->network = CD_NET_RESTRICTED;
		if ((f = optional(v, "network_access")))
			r = WITH_KEY(c, "network_access", conv_network(c, f, &p->network));
		return r;
	}
	return WITH_KEY(c, "type",
			fail_at(c, type->line, type->col,
				"unknown profile type \"%s\" (expected %s)", t,
				legacy ? "managed, disabled, external, read-only, workspace-write, "
					 "danger-full-access or external-sandbox"
				       : "managed, disabled or external"));
}

int cd_profile_from_json(const struct cd_json *v, cd_profile_parse_flags flags,
			 struct cd_profile **ret, struct cd_parse_error *err)
{
	struct conv c = { .flags = flags, .err = err };
	struct cd_profile *p = cd_xcalloc(1, sizeof(*p));
	if (err)
		*err = (struct cd_parse_error){ 0 };
	*ret = NULL;
	int r = conv_profile(&c, v, p);
	cd_strbuf_done(&c.loc);
	if (r < 0) {
		cd_profile_free(p);
		return r;
	}
	if (!strict(&c))
		p->origin = cd_xstrdup("wire");
	*ret = p;
	return 0;
}

int cd_profile_parse_file_text(const char *text, size_t len, const char *origin,
			       struct cd_profile **ret, struct cd_parse_error *err)
{
	const struct cd_json_limits lim = {
		.max_bytes = POLICY_MAX_BYTES,
		.max_values = POLICY_MAX_VALUES,
		.max_depth = POLICY_MAX_DEPTH,
	};
	struct cd_json *v = NULL;
	struct cd_json_error jerr = { 0 };
	*ret = NULL;
	if (err)
		*err = (struct cd_parse_error){ 0 };
	int r = cd_json_parse(text, len, &lim, &v, &jerr);
	if (r < 0) {
		if (err) {
			err->line = jerr.line;
			err->col = jerr.col;
			err->path = cd_xstrdup("");
			err->msg = cd_xstrdup(jerr.msg[0] ? jerr.msg : "invalid JSON");
		}
		return -EINVAL;
	}
	r = cd_profile_from_json(v, CD_PROFILE_PARSE_FILE | CD_PROFILE_PARSE_LEGACY, ret, err);
	cd_json_free(v);
	if (r < 0)
		return r;
	free((*ret)->origin);
	(*ret)->origin = origin ? cd_xstrdup(origin) : NULL;
	return 0;
}
