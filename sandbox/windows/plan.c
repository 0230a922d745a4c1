/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Windows restricted-token planner (plan.h): the token, the capability
 * SIDs, the ACEs, the environment-only network and the refusals, from the
 * bound plan; plus the command line and environment block encodings.
 * Pure C, no OS headers.
 */
#include "sandbox/windows/plan.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define TOKEN_FLAGS "DISABLE_MAX_PRIVILEGE|LUA_TOKEN|WRITE_RESTRICTED"

/* ---- paths and SIDs ---- */

char *cd_windows_path(const char *posix, const char *drive)
{
	if (!drive) {
		/* Bound on Windows: "/C:/a/b" is C:\a\b (win-util.h). */
		const char *p = posix;
		bool letter = (p[1] >= 'A' && p[1] <= 'Z') || (p[1] >= 'a' && p[1] <= 'z');
		if (p[0] != '/' || !letter || p[2] != ':' || (p[3] && p[3] != '/'))
			return cd_xstrdup(posix);
		char *w = cd_xasprintf("%c:%s", p[1], p[3] ? p + 3 : "\\");
		for (char *q = w; *q; q++)
			if (*q == '/')
				*q = '\\';
		return w;
	}
	char *w = cd_xasprintf("%s%s", drive, posix);
	for (char *p = w + strlen(drive); *p; p++)
		if (*p == '/')
			*p = '\\';
	return w;
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	h ^= 0xff; /* a separator, so ("ab","c") and ("a","bc") differ */
	h *= 0x100000001b3ull;
	return h;
}

char *cd_windows_sid_derive(const char *seed, const char *key)
{
	uint64_t a = fnv1a(fnv1a(0xcbf29ce484222325ull, seed), key);
	uint64_t b = fnv1a(fnv1a(a ^ 0x9e3779b97f4a7c15ull, key), seed);
	return cd_xasprintf("S-1-5-21-%u-%u-%u-%u", (unsigned)(a >> 32), (unsigned)a,
			    (unsigned)(b >> 32), (unsigned)b);
}

/* ---- the plan ---- */

struct builder {
	const struct cd_windows_input *in;
	struct cd_windows_plan *wp;
};

static char *wpath(const struct builder *b, const char *path)
{
	return cd_windows_path(path, b->in->drive);
}

static void add_sid(struct builder *b, enum cd_win_sid_role role, char *sid, const char *key)
{
	struct cd_windows_plan *wp = b->wp;
	wp->sids = cd_xreallocarray(wp->sids, wp->n_sids + 1, sizeof(*wp->sids));
	wp->sids[wp->n_sids++] = (struct cd_win_sid){
		.role = role,
		.sid = sid,
		.key = key ? cd_xstrdup(key) : NULL,
	};
}

static void add_ace(struct builder *b, const char *path, enum cd_win_ace_kind kind, const char *sid,
		    bool create_dir, char *why)
{
	struct cd_windows_plan *wp = b->wp;
	wp->aces = cd_xreallocarray(wp->aces, wp->n_aces + 1, sizeof(*wp->aces));
	wp->aces[wp->n_aces++] = (struct cd_win_ace){
		.path = cd_xstrdup(path),
		.kind = kind,
		.sid = cd_xstrdup(sid),
		.create_dir = create_dir,
		.why = why,
	};
}

static void add_env(struct builder *b, const char *name, const char *value)
{
	struct cd_windows_plan *wp = b->wp;
	wp->env = cd_xreallocarray(wp->env, wp->n_env + 1, sizeof(*wp->env));
	wp->env[wp->n_env++] =
		(struct cd_win_env){ .name = cd_xstrdup(name), .value = cd_xstrdup(value) };
}

struct cd_windows_plan *cd_windows_plan_free(struct cd_windows_plan *wp)
{
	if (!wp)
		return NULL;
	for (size_t i = 0; i < wp->n_sids; i++) {
		free(wp->sids[i].sid);
		free(wp->sids[i].key);
	}
	free(wp->sids);
	for (size_t i = 0; i < wp->n_aces; i++) {
		free(wp->aces[i].path);
		free(wp->aces[i].sid);
		free(wp->aces[i].why);
	}
	free(wp->aces);
	for (size_t i = 0; i < wp->n_env; i++) {
		free(wp->env[i].name);
		free(wp->env[i].value);
	}
	free(wp->env);
	free(wp->path_prepend);
	cd_strv_free(wp->notes);
	cd_strv_free(wp->degraded);
	free(wp);
	return NULL;
}

static int refuse(struct builder *b, char **reterr, int err, char *msg)
{
	*reterr = msg;
	b->wp = cd_windows_plan_free(b->wp);
	return err;
}

/* The writable roots: paths that write where their parent does not. */
static bool is_root(const struct cd_plan_path *pp)
{
	return pp->origin != CD_ORIGIN_IMPLICIT && pp->access == CD_ACCESS_WRITE &&
	       pp->parent_access != CD_ACCESS_WRITE;
}

/* Narrower than the writable region around it. */
static bool is_exclusion(const struct cd_plan_path *pp)
{
	return pp->origin != CD_ORIGIN_IMPLICIT && pp->access != CD_ACCESS_WRITE &&
	       pp->parent_access == CD_ACCESS_WRITE;
}

/* Reads this backend cannot narrow: a reason, or NULL when reads are the whole disk. */
static char *read_narrowing(const struct cd_profile *prof, const struct cd_plan *plan)
{
	if (!plan->full_read)
		return cd_xstrdup("the profile does not read the whole file system");
	for (size_t i = 0; i < prof->n_entries; i++)
		if (prof->entries[i].kind == CD_ENTRY_GLOB)
			return cd_xasprintf("deny glob '%s'", prof->entries[i].path);
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		/* A missing denied path only keeps it from being made: a deny-write does that. */
		if (pp->access == CD_ACCESS_DENY && pp->type != CD_FT_MISSING)
			return cd_xasprintf("deny path %s", pp->path);
	}
	return NULL;
}

static void env_network(struct builder *b)
{
	/* Windows' variable names ignore case: http_proxy is HTTP_PROXY. */
	static const char *const proxies[] = { "HTTP_PROXY",	 "HTTPS_PROXY",	    "ALL_PROXY",
					       "GIT_HTTP_PROXY", "GIT_HTTPS_PROXY", NULL };
	for (const char *const *p = proxies; *p; p++)
		add_env(b, *p, "http://127.0.0.1:9");
	add_env(b, "NO_PROXY", "localhost,127.0.0.1,::1");
	add_env(b, "SBX_NONET_ACTIVE", "1");
	add_env(b, "PIP_NO_INDEX", "1");
	add_env(b, "NPM_CONFIG_OFFLINE", "true");
	add_env(b, "CARGO_NET_OFFLINE", "true");
	add_env(b, "GIT_SSH_COMMAND", "cmd /c exit 1");
	add_env(b, "GIT_ALLOW_PROTOCOLS", "");
	add_env(b, "PATHEXT", ".BAT;.CMD;.COM;.EXE;.VBS;.VBE;.JS;.JSE;.WSF;.WSH;.MSC");
	b->wp->path_prepend =
		cd_xasprintf("%s\\.cordon\\denybin", b->in->home ? b->in->home : "%USERPROFILE%");
	cd_strv_push(&b->wp->degraded,
		     "network: restricted only through the environment (proxy variables to a "
		     "dead port, offline flags, ssh and scp stubs); a program that ignores "
		     "them reaches the network");
}

int cd_windows_plan_build(const struct cd_windows_input *in, struct cd_windows_plan **ret,
			  char **reterr)
{
	const struct cd_plan *plan = in->plan;
	const struct cd_profile *prof = in->profile;
	struct builder b = { .in = in };

	*ret = NULL;
	b.wp = cd_xcalloc(1, sizeof(*b.wp));
	/*
	 * Before anything else, a disabled profile included: its command would
	 * run unbounded. A job object could bound memory, processes and CPU
	 * time; cordon.exe does not set those yet.
	 */
	for (int l = 0; in->limits && l < CD_LIMIT_COUNT; l++)
		if (cd_limits_has(in->limits, (enum cd_limit)l))
			return refuse(
				&b, reterr, -EOPNOTSUPP,
				cd_xasprintf("the restricted-token backend enforces no resource "
					     "limits yet (asked: %s); leave them out",
					     cd_limit_info((enum cd_limit)l)->name));
	if (plan->type == CD_PROFILE_DISABLED) {
		*ret = b.wp;
		return 0;
	}
	if (plan->network == CD_NET_MANAGED)
		return refuse(&b, reterr, -EINVAL,
			      cd_xstrdup("managed network needs cordon's network proxy, which "
					 "this build does not have yet; use --network "
					 "restricted or enabled"));
	if (plan->type == CD_PROFILE_EXTERNAL)
		return refuse(&b, reterr, -EOPNOTSUPP,
			      cd_xstrdup("an external profile leaves the file system to the "
					 "caller, and the restricted-token backend has no "
					 "network fence of its own: it would run unsandboxed; "
					 "use a managed profile, or a disabled one to run "
					 "without a sandbox"));
	if (plan->fs_unrestricted || cd_plan_access(plan, "/", NULL) == CD_ACCESS_WRITE)
		return refuse(&b, reterr, -EOPNOTSUPP,
			      cd_xstrdup("the restricted-token backend cannot grant writes to "
					 "the whole file system (it would run unsandboxed); "
					 "give the writable directories instead, or use a "
					 "disabled profile to run without a sandbox"));
	char *narrow = read_narrowing(prof, plan);
	if (narrow) {
		char *msg = cd_xasprintf("Restricted read-only access requires the elevated "
					 "Windows sandbox backend (%s); cordon has the "
					 "restricted-token backend only, which narrows writes, "
					 "not reads: drop the read restriction",
					 narrow);
		free(narrow);
		return refuse(&b, reterr, -EOPNOTSUPP, msg);
	}
	if (plan->network == CD_NET_RESTRICTED && !in->allow_env_network)
		return refuse(&b, reterr, -EOPNOTSUPP,
			      cd_xstrdup("the restricted-token backend has no network fence: a "
					 "restricted network would rest on environment variables "
					 "a program can ignore; accept that with "
					 "--allow-degraded=network, or use --network enabled"));

	b.wp->sandboxed = true;
	b.wp->token_flags = TOKEN_FLAGS;

	/* Capability SIDs: readonly, or the workspace's and one per writable root. */
	size_t n_roots = 0;
	for (size_t i = 0; i < plan->n_paths; i++)
		n_roots += is_root(&plan->paths[i]);
	if (!n_roots) {
		add_sid(&b, CD_WIN_SID_READONLY, in->sids.sid_for(in->sids.ctx, "readonly"), NULL);
	} else {
		char *wcwd = wpath(&b, plan->cwd);
		char *key = cd_xasprintf("workspace:%s", wcwd);
		add_sid(&b, CD_WIN_SID_WORKSPACE, in->sids.sid_for(in->sids.ctx, key), wcwd);
		free(key);
		free(wcwd);
		for (size_t i = 0; i < plan->n_paths; i++) {
			if (!is_root(&plan->paths[i]))
				continue;
			char *w = wpath(&b, plan->paths[i].path);
			key = cd_xasprintf("root:%s", w);
			add_sid(&b, CD_WIN_SID_ROOT, in->sids.sid_for(in->sids.ctx, key), w);
			free(key);
			free(w);
		}
	}
	size_t n_caps = b.wp->n_sids;
	for (size_t k = 0; k < n_caps; k++)
		if (!b.wp->sids[k].sid)
			return refuse(&b, reterr, -EIO,
				      cd_xstrdup("cannot read or extend the store of capability "
						 "SIDs (%LOCALAPPDATA%\\cordon\\cap-sids): check "
						 "that the directory is writable"));
	add_sid(&b, CD_WIN_SID_LOGON, cd_xstrdup("logon"), NULL);
	add_sid(&b, CD_WIN_SID_EVERYONE, cd_xstrdup("S-1-1-0"), NULL);

	/* ACEs: allow on each root to its SID; deny-write on what narrows it, to every cap. */
	size_t r = n_caps > 1 ? 1 : n_caps; /* the first root SID (after the workspace's) */
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (!is_root(pp))
			continue;
		char *w = wpath(&b, pp->path);
		add_ace(&b, w, CD_WIN_ACE_ALLOW, b.wp->sids[r++].sid, false,
			cd_xstrdup(pp->why ? pp->why : "writable root"));
		free(w);
	}
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (!is_exclusion(pp))
			continue;
		bool missing = pp->type == CD_FT_MISSING;
		if (missing && pp->parent_missing)
			return refuse(&b, reterr, -EOPNOTSUPP,
				      cd_xasprintf("%s cannot be protected: it does not exist, "
						   "nor does the directory it would be in, which "
						   "the command could create; create that "
						   "directory or drop the entry",
						   pp->path));
		char *w = wpath(&b, pp->path);
		for (size_t k = 0; k < n_caps; k++)
			add_ace(&b, w, CD_WIN_ACE_DENY_WRITE, b.wp->sids[k].sid, missing,
				cd_xstrdup(pp->why ? pp->why : "narrower than its writable root"));
		free(w);
	}
	for (size_t k = 0; k < n_caps; k++)
		add_ace(&b, "\\\\.\\NUL", CD_WIN_ACE_ALLOW, b.wp->sids[k].sid, false,
			cd_xstrdup("the null device stays usable"));

	if (plan->network == CD_NET_RESTRICTED)
		env_network(&b);
	if (in->drive)
		cd_strv_push_take(&b.wp->notes,
				  cd_xasprintf("planned off Windows: POSIX paths are shown on "
					       "drive %s, and the capability SIDs are stand-ins "
					       "(on Windows they are random and persisted)",
					       in->drive));
	*ret = b.wp;
	return 0;
}

/* ---- the command line ---- */

static bool needs_quotes(const char *a)
{
	return !*a || strpbrk(a, " \t\n\v\"") != NULL;
}

char *cd_windows_cmdline(char *const *argv)
{
	struct cd_strbuf sb = { 0 };

	for (size_t i = 0; argv[i]; i++) {
		const char *a = argv[i];
		if (i)
			cd_strbuf_append_c(&sb, ' ');
		if (i == 0) {
			/*
			 * The program name has no escapes: it cannot hold a quote. A
			 * batch file is run by cmd.exe, which splits and expands its
			 * arguments by other rules (& | % ^): no quoting here is safe.
			 */
			size_t al = strlen(a);
			bool batch = al >= 4 && a[al - 4] == '.' &&
				     ((tolower((unsigned char)a[al - 3]) == 'b' &&
				       tolower((unsigned char)a[al - 2]) == 'a' &&
				       tolower((unsigned char)a[al - 1]) == 't') ||
				      (tolower((unsigned char)a[al - 3]) == 'c' &&
				       tolower((unsigned char)a[al - 2]) == 'm' &&
				       tolower((unsigned char)a[al - 1]) == 'd'));
			if (strchr(a, '"') || !*a || batch) {
				cd_strbuf_done(&sb);
				return NULL;
			}
			if (strpbrk(a, " \t")) {
				cd_strbuf_append_c(&sb, '"');
				cd_strbuf_append(&sb, a);
				cd_strbuf_append_c(&sb, '"');
			} else {
				cd_strbuf_append(&sb, a);
			}
			continue;
		}
		if (!needs_quotes(a)) {
			cd_strbuf_append(&sb, a);
			continue;
		}
		cd_strbuf_append_c(&sb, '"');
		for (const char *p = a;; p++) {
			size_t bs = 0;
			while (*p == '\\') {
				bs++;
				p++;
			}
			/* Backslashes count double before a quote, ours or the argument's. */
			size_t n = !*p || *p == '"' ? 2 * bs + (*p == '"') : bs;
			for (size_t k = 0; k < n; k++)
				cd_strbuf_append_c(&sb, '\\');
			if (!*p)
				break;
			cd_strbuf_append_c(&sb, *p);
		}
		cd_strbuf_append_c(&sb, '"');
	}
	return sb.buf ? cd_strbuf_steal(&sb) : cd_xstrdup("");
}

char **cd_windows_split_cmdline(const char *s)
{
	char **argv = NULL;
	struct cd_strbuf sb = { 0 };

	/* The program name: up to white space, or between quotes, no escapes. */
	if (*s == '"') {
		const char *e = strchr(s + 1, '"');
		size_t n = e ? (size_t)(e - s - 1) : strlen(s + 1);
		cd_strv_push_take(&argv, cd_xstrndup(s + 1, n));
		s = e ? e + 1 : s + 1 + n;
	} else {
		size_t n = strcspn(s, " \t");
		cd_strv_push_take(&argv, cd_xstrndup(s, n));
		s += n;
	}
	for (;;) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			break;
		bool quoted = false;
		cd_strbuf_append(&sb, "");
		while (*s && (quoted || (*s != ' ' && *s != '\t'))) {
			size_t bs = 0;
			while (*s == '\\') {
				bs++;
				s++;
			}
			if (*s == '"') {
				for (size_t k = 0; k < bs / 2; k++)
					cd_strbuf_append_c(&sb, '\\');
				if (bs % 2) {
					cd_strbuf_append_c(&sb, '"');
					s++;
				} else if (quoted && s[1] == '"') {
					/* "" inside quotes: a literal quote (2008 rule). */
					cd_strbuf_append_c(&sb, '"');
					s += 2;
				} else {
					quoted = !quoted;
					s++;
				}
				continue;
			}
			for (size_t k = 0; k < bs; k++)
				cd_strbuf_append_c(&sb, '\\');
			if (*s && (quoted || (*s != ' ' && *s != '\t')))
				cd_strbuf_append_c(&sb, *s++);
		}
		cd_strv_push_take(&argv, cd_strbuf_steal(&sb));
	}
	return argv;
}

/* ---- the environment block ---- */

/* Decode UTF-8 to UTF-16 units; -1 on invalid input. */
static long utf16_units(const char *s, uint16_t *out)
{
	long n = 0;
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		uint32_t c;
		int len;
		if (*p < 0x80) {
			c = *p;
			len = 1;
		} else if ((*p & 0xe0) == 0xc0) {
			c = *p & 0x1f;
			len = 2;
		} else if ((*p & 0xf0) == 0xe0) {
			c = *p & 0x0f;
			len = 3;
		} else if ((*p & 0xf8) == 0xf0) {
			c = *p & 0x07;
			len = 4;
		} else {
			return -1;
		}
		for (int k = 1; k < len; k++) {
			if ((p[k] & 0xc0) != 0x80)
				return -1;
			c = (c << 6) | (p[k] & 0x3f);
		}
		static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
		if (c < min[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return -1;
		if (c >= 0x10000) {
			c -= 0x10000;
			if (out) {
				out[n] = (uint16_t)(0xd800 + (c >> 10));
				out[n + 1] = (uint16_t)(0xdc00 + (c & 0x3ff));
			}
			n += 2;
		} else {
			if (out)
				out[n] = (uint16_t)c;
			n++;
		}
		p += len;
	}
	return n;
}

struct env_entry {
	uint16_t *units; /* NAME=VALUE */
	long n;
	long name_len;
};

static uint16_t upper(uint16_t u)
{
	return u >= 'a' && u <= 'z' ? (uint16_t)(u - 32) : u;
}

static int cmp_names(const void *a, const void *b)
{
	const struct env_entry *x = a, *y = b;
	for (long i = 0; i < x->name_len && i < y->name_len; i++) {
		uint16_t p = upper(x->units[i]), q = upper(y->units[i]);
		if (p != q)
			return p < q ? -1 : 1;
	}
	return (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

unsigned char *cd_windows_env_block(char *const *env, size_t *ret_len, char **reterr)
{
	size_t n = cd_strv_length(env);
	struct env_entry *e = cd_xcalloc(n + 1, sizeof(*e));
	unsigned char *block = NULL;
	size_t total = 1;

	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(env[i], '=');
		/* A leading '=' belongs to the name (Windows' per-drive "=C:=C:\x"). */
		if (eq == env[i] && eq)
			eq = strchr(env[i] + 1, '=');
		long len = utf16_units(env[i], NULL);
		if (!eq || eq == env[i] || len < 0) {
			*reterr = cd_xasprintf("environment entry '%s': %s", env[i],
					       len < 0 ? "not valid UTF-8" : "no NAME=VALUE");
			goto out;
		}
		e[i].units = cd_xcalloc((size_t)len + 1, sizeof(uint16_t));
		e[i].n = utf16_units(env[i], e[i].units);
		char *name = cd_xstrndup(env[i], (size_t)(eq - env[i]));
		e[i].name_len = utf16_units(name, NULL);
		free(name);
		total += (size_t)e[i].n + 1;
	}
	qsort(e, n, sizeof(*e), cmp_names);
	for (size_t i = 1; i < n; i++)
		if (!cmp_names(&e[i - 1], &e[i])) {
			*reterr = cd_xstrdup("two environment names differ only in case");
			goto out;
		}
	block = cd_xmalloc(total * 2);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		for (long k = 0; k <= e[i].n; k++) { /* with the terminating NUL */
			uint16_t u = k < e[i].n ? e[i].units[k] : 0;
			block[o++] = (unsigned char)(u & 0xff);
			block[o++] = (unsigned char)(u >> 8);
		}
	}
	block[o++] = 0;
	block[o++] = 0;
	if (!n) { /* an empty block is two NULs */
		block = cd_xrealloc(block, 4);
		block[o++] = 0;
		block[o++] = 0;
	}
	*ret_len = o;
out:
	for (size_t i = 0; i < n; i++)
		free(e[i].units);
	free(e);
	return block;
}
