/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "core/plugincache.h"
#include "core/skillmd.h"
#include "serve/budget.h"
#include "serve/discover-plugins.h"
#include "serve/discover-scan.h"
#include "serve/discover-v2.h"
#include "serve/fs-helper.h"
#include "serve/fs-ops.h"
#include "serve/intent.h"
#include "serve/server.h"
#include "serve/testhook.h"
#include "serve/workq.h"

/*
 * The released binary (0.169.0), probed side by side: the cwd is parsed
 * and otherwise unused (project skills are not looked for); the standalone
 * roots are scanned in this order, each as capabilityRoots/discoverV1
 * scans a root (discover-scan.c: its walk, limits and hidden files), and
 * their skills come in the scan's order. A root that is missing, not a
 * directory or not readable adds nothing; a root with a skill whose front
 * matter the binary refuses, or a scan warning, adds one warning. Skills
 * are not deduplicated. The answer holds at most 2,048 skills and 4 MiB.
 */

#define WORKERS	      1
#define STOP_MS	      2000
#define MAX_CAPS      2048
#define MAX_BYTES     (4 * 1024 * 1024)
#define MAX_WARNINGS  64
#define W_METADATA    "some capability metadata could not be loaded; discovery may be incomplete"
#define W_SIZE	      "capability discovery size limit reached"
#define W_LOCATIONS   "some capability locations could not be resolved; discovery may be incomplete"
#define METHOD	      "capabilities/discoverV2"
#define SYSTEM_SKILLS "/etc/codex/skills"

struct job {
	struct cd_work w; /* first */
	struct cd_server *server;
	struct cd_conn *conn;
	unsigned long serial;
	char *id;	     /* owned, JSON text */
	struct cd_json *msg; /* owned when there is a sandbox context */
	const struct cd_json *sandbox;
	char *codex_home, *home; /* owned copies of the environment's, or NULL */
	struct cd_discover_hidden hidden;
	struct cd_linux_opts lopts;
	struct cd_hidden_path hid[CD_ARRAY_SIZE(((struct cd_server *)0)->hidden)];
	struct cd_cli_bound b;		/* the sandbox context, bound */
	const struct cd_linux_plan *lp; /* when it restricts the file system: scans go in it */
	/* The answer: the result, or an error. */
	struct cd_strbuf skills; /* the skills' JSON objects, comma-separated */
	size_t *skill_end;	 /* skills.len before each skill (its comma included) */
	size_t n_skills, bytes;
	size_t caps;	/* skills and plugins admitted */
	char **plugins; /* the plugins' JSON objects, admitted, sorted by id */
	size_t n_plugins;
	char *warnings[MAX_WARNINGS];
	size_t n_warnings;
	bool truncated;
	int err_code;
	char *err;
	struct cd_strbuf out;
	size_t charged;
};

static struct cd_workq *pool;
static atomic_bool stopping;
/* The sandboxed scan running now, for the shutdown to kill its helper. */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cd_fs_sandboxed *running;

static void warn(struct job *j, const char *w)
{
	if (j->n_warnings < MAX_WARNINGS)
		j->warnings[j->n_warnings++] = cd_xstrdup(w);
}

static void fail(struct job *j, int code, char *msg)
{
	if (!j->err) {
		j->err_code = code;
		j->err = msg;
	} else {
		free(msg);
	}
}

static const char *str_of(const struct cd_json *o, const char *k, size_t *n)
{
	const struct cd_json *v = o ? cd_json_get(o, k) : NULL;
	if (!v || v->type != CD_JSON_STRING)
		return NULL;
	*n = v->u.str.len;
	return v->u.str.s;
}

/*
 * agents/openai.yaml: one that mentions neither word gives no policy nor dependencies
 * (as the binary answers); one that does is read only in the form cd_skillmd_policy reads.
 */
static bool metadata_plain(const char *s, size_t n)
{
	static const char *const words[] = { "dependencies", "policy", "\\" };
	for (size_t i = 0; i < CD_ARRAY_SIZE(words); i++)
		if (memmem(s, n, words[i], strlen(words[i])))
			return false;
	return true;
}

/* A skill's JSON object; root_id NULL for a plugin's skill (no discoveryRoot). */
static void skill_json(struct cd_strbuf *e, const char *root_id, const char *root_uri,
		       const struct cd_skillmd *m, const char *path_uri, size_t path_len,
		       const char *deps, const char *policy)
{
	cd_strbuf_append(e, "{\"name\":");
	cd_strbuf_append_json_string(e, m->name, strlen(m->name));
	cd_strbuf_append(e, ",\"description\":");
	cd_strbuf_append_json_string(e, m->description, strlen(m->description));
	cd_strbuf_append(e, ",\"shortDescription\":");
	if (m->short_description)
		cd_strbuf_append_json_string(e, m->short_description, strlen(m->short_description));
	else
		cd_strbuf_append(e, "null");
	cd_strbuf_append(e, ",\"path\":");
	cd_strbuf_append_json_string(e, path_uri, path_len);
	if (root_id) {
		cd_strbuf_printf(e, ",\"discoveryRoot\":{\"id\":\"%s\",\"path\":", root_id);
		cd_strbuf_append_json_string(e, root_uri, strlen(root_uri));
		cd_strbuf_append_c(e, '}');
	}
	cd_strbuf_append(e, ",\"dependencies\":");
	cd_strbuf_append(e, deps ? deps : "null");
	cd_strbuf_append(e, ",\"policy\":");
	cd_strbuf_append(e, policy ? policy : "null");
	cd_strbuf_append_c(e, '}');
}

/* A standalone skill, admitted within the limits or left out. */
static void admit_skill(struct job *j, const char *e, size_t n)
{
	if (j->caps == MAX_CAPS || j->bytes + n > MAX_BYTES) {
		j->truncated = true; /* a smaller one later may still fit, as the binary's */
		return;
	}
	j->skill_end = cd_xreallocarray(j->skill_end, j->n_skills + 1, sizeof(*j->skill_end));
	j->skill_end[j->n_skills] = j->skills.len;
	if (j->n_skills)
		cd_strbuf_append_c(&j->skills, ',');
	cd_strbuf_append_n(&j->skills, e, n);
	j->n_skills++;
	j->caps++;
	j->bytes += n;
}

/* A plugin manifest in a skill root: its plugin directory and the namespace it gives. */
struct ns {
	char *dir;
	char *name; /* NULL: a manifest the binary skips */
};

static void ns_free(struct ns *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].dir);
		free(v[i].name);
	}
	free(v);
}

/*
 * The manifests the scan found (the root's, or the nearest above it, then those
 * below): each one's plugin directory (the manifest's directory's parent) and
 * namespace. What cordon cannot read as the binary does fails the request.
 */
static int load_namespaces(struct job *j, const struct cd_json *ns, const char *root_uri,
			   struct ns **ret, size_t *n_ret)
{
	size_t n = ns && ns->type == CD_JSON_ARRAY ? ns->u.arr.n : 0;
	struct ns *v = n ? cd_xcalloc(n, sizeof(*v)) : NULL;
	const char *why = NULL;
	for (size_t i = 0; i < n; i++) {
		size_t pn = 0, cn = 0;
		const char *pu = str_of(ns->u.arr.items[i], "path", &pn);
		const char *ct = str_of(ns->u.arr.items[i], "contents", &cn);
		char *p = NULL, *slash;
		*n_ret = i + 1;
		if (!pu || cd_pathuri_to_posix(pu, pn, &p, &why) < 0 || !(slash = strrchr(p, '/')))
			why = "no path";
		else if (!ct)
			why = "not read";
		else
			why = NULL;
		if (!why) {
			*slash = '\0';
			slash = strrchr(p, '/');
			if (slash && slash != p)
				*slash = '\0';
			else
				why = "no plugin directory";
		}
		if (!why) {
			const char *base = strrchr(p, '/') + 1;
			int r = cd_skillmd_namespace(ct, cn, base, &v[i].name, &why);
			if (r == CD_SKILLMD_OK || r == CD_SKILLMD_NS_SKIP)
				why = NULL;
		}
		v[i].dir = p;
		if (why) {
			fail(j, CD_RPC_INTERNAL,
			     cd_xasprintf("cordon cannot read the plugin manifest %s in skill root "
					  "%s: %s (refused rather than answered differently)",
					  pu ? pu : "?", root_uri, why));
			*ret = v;
			return -1;
		}
	}
	*ret = v;
	*n_ret = n;
	return 0;
}

/* The namespace of the skill in directory dir: the nearest manifest's that the binary reads. */
static const char *namespace_of(const struct ns *v, size_t n, const char *dir)
{
	const char *best = NULL;
	size_t best_len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(v[i].dir);
		if (!v[i].name || strncmp(dir, v[i].dir, l) || (dir[l] != '/' && dir[l] != '\0'))
			continue;
		if (!best || l > best_len) {
			best = v[i].name;
			best_len = l;
		}
	}
	return best;
}

/* A list of JSON objects (a root's skills). */
struct objs {
	char **v;
	size_t *len, n, cap;
};

static void objs_add(struct objs *o, struct cd_strbuf *e)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? 2 * o->cap : 16;
		o->v = cd_xreallocarray(o->v, o->cap, sizeof(*o->v));
		o->len = cd_xreallocarray(o->len, o->cap, sizeof(*o->len));
	}
	o->len[o->n] = e->len;
	o->v[o->n++] = cd_strbuf_steal(e);
}

static void objs_done(struct objs *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->v[i]);
	free(o->v);
	free(o->len);
	memset(o, 0, sizeof(*o));
}

/*
 * Scan the root at path (a directory) as discoverV1 scans one, in the
 * sandbox when the request restricts the file system: its parsed result,
 * or NULL with the request failed.
 */
static struct cd_json *scan_root(struct job *j, const char *path, const char *root_uri)
{
	struct cd_strbuf body = { 0 };
	struct cd_json *v = NULL;
	struct cd_json_error je;
	struct cd_json_limits lim = { 0 };

	if (j->lp) {
		/* In the sandbox, by cordon-fs-helper (as discoverV1's sandboxed roots). */
		struct cd_fs_sandboxed sb;
		struct cd_fs_req q = { .op = CD_FS_DISCOVER,
				       .path = (char *)path,
				       .sandboxed = true };
		struct cd_fs_res r = { .fd = -1 };
		char *e = NULL;
		if (cd_server_hidden_check(j->server, NULL, &e) < 0) {
			fail(j, CD_RPC_INTERNAL, e);
			goto out;
		}
		cd_fs_sandboxed_init(&sb, j->lp, &j->server->fs_helper, &stopping);
		pthread_mutex_lock(&running_lock);
		running = &sb;
		pthread_mutex_unlock(&running_lock);
		if (!atomic_load(&stopping))
			cd_fs_run_sandboxed(&sb, &q, &r);
		else
			cd_fs_res_errno(&r, ECANCELED);
		pthread_mutex_lock(&running_lock);
		running = NULL;
		pthread_mutex_unlock(&running_lock);
		const char *flaw = r.code ? NULL : cd_fs_res_flaw(&q, &r);
		if (r.code || flaw)
			fail(j, CD_RPC_INTERNAL,
			     cd_xasprintf("failed to scan capability root %s: %s", root_uri,
					  flaw	      ? flaw
					  : r.out.buf ? r.out.buf
						      : "error"));
		else
			cd_strbuf_append_n(&body, r.out.buf, r.out.len);
		if (r.fd >= 0)
			close(r.fd);
		cd_strbuf_done(&r.out);
		if (j->err)
			goto out;
	} else {
		cd_discover_scan(path, &j->hidden, &body);
	}
	if (cd_json_parse(body.buf ? body.buf : "", body.len, &lim, &v, &je) < 0 ||
	    v->type != CD_JSON_OBJECT) {
		v = cd_json_free(v);
		fail(j, CD_RPC_INTERNAL,
		     cd_xasprintf("failed to scan capability root %s", root_uri));
	}
out:
	cd_strbuf_done(&body);
	return v;
}

/*
 * A root the scan could not inspect because it is missing, not a directory
 * or not permitted (in the sandbox): the binary adds nothing for it, no
 * warning either.
 */
static bool root_absent(const struct cd_json *v)
{
	static const char *const why[] = { "(os error 2)", "(os error 13)", "(os error 1)",
					   "(os error 20)" };
	const struct cd_json *er = cd_json_get(v, "error");
	if (!er || er->type != CD_JSON_STRING)
		return false;
	const char *e = er->u.str.s;
	if (!strncmp(e, "capability root ", 16) && strstr(e, " is not a directory"))
		return true;
	if (strncmp(e, "failed to inspect capability root ", 34))
		return false;
	for (size_t i = 0; i < CD_ARRAY_SIZE(why); i++)
		if (strstr(e, why[i]))
			return true;
	return false;
}

/*
 * The skills of a scanned root, into out (root_id NULL: a plugin's). Sets
 * *warned when the root adds the metadata warning. False when the request fails.
 */
static bool root_skills(struct job *j, const struct cd_json *v, const char *root_id,
			const char *root_uri, struct objs *out, bool *warned)
{
	struct ns *nss = NULL;
	size_t n_nss = 0;
	const struct cd_json *ns = cd_json_get(v, "namespaceManifests");
	if (load_namespaces(j, ns, root_uri, &nss, &n_nss) < 0)
		goto out;
	const struct cd_json *ws = cd_json_get(v, "warnings"), *er = cd_json_get(v, "error");
	if ((ws && ws->type == CD_JSON_ARRAY && ws->u.arr.n) || (er && er->type != CD_JSON_NULL))
		*warned = true;
	const struct cd_json *sk = cd_json_get(v, "skills");
	for (size_t i = 0; sk && sk->type == CD_JSON_ARRAY && i < sk->u.arr.n; i++) {
		const struct cd_json *in = cd_json_get(sk->u.arr.items[i], "instructions");
		const struct cd_json *md = cd_json_get(sk->u.arr.items[i], "metadata");
		size_t pn = 0, cn = 0, mn = 0;
		const char *pu = str_of(in, "path", &pn), *ct = str_of(in, "contents", &cn);
		const char *mc =
			md && md->type == CD_JSON_OBJECT ? str_of(md, "contents", &mn) : NULL;
		char *p = NULL;
		const char *why = NULL;
		if (!pu || !ct || cd_pathuri_to_posix(pu, pn, &p, &why) < 0) {
			fail(j, CD_RPC_INTERNAL,
			     cd_xasprintf("failed to scan capability root %s", root_uri));
			free(p);
			break;
		}
		char *deps = NULL, *pol = NULL;
		const char *pwhy = NULL;
		if (mc && !metadata_plain(mc, mn) &&
		    cd_skillmd_agents(mc, mn, &deps, &pol, &pwhy) == CD_SKILLMD_UNSUPPORTED) {
			fail(j, CD_RPC_INTERNAL,
			     cd_xasprintf("cordon cannot read the agents/openai.yaml beside %s: %s "
					  "(YAML outside the subset cordon reads; "
					  "refused rather than answered differently)",
					  pu, pwhy));
			free(p);
			break;
		}
		/* The default name: the SKILL.md's directory's. */
		char *slash = strrchr(p, '/');
		if (slash)
			*slash = '\0';
		slash = strrchr(p, '/');
		struct cd_skillmd m;
		int r = cd_skillmd_parse(ct, cn, slash ? slash + 1 : p, &m, &why);
		const char *prefix = r == CD_SKILLMD_OK ? namespace_of(nss, n_nss, p) : NULL;
		free(p);
		if (prefix) {
			char *q = cd_xasprintf("%s:%s", prefix, m.name);
			free(m.name);
			m.name = q;
		}
		if (r != CD_SKILLMD_OK) {
			free(deps);
			free(pol);
		}
		if (r == CD_SKILLMD_INVALID) {
			*warned = true;
			continue;
		}
		if (r == CD_SKILLMD_UNSUPPORTED) {
			fail(j, CD_RPC_INTERNAL,
			     cd_xasprintf("cordon cannot read the front matter of %s: %s "
					  "(YAML outside the subset cordon reads; "
					  "refused rather than answered differently)",
					  pu, why));
			break;
		}
		struct cd_strbuf e = { 0 };
		skill_json(&e, root_id, root_uri, &m, pu, pn, deps, pol);
		free(deps);
		free(pol);
		objs_add(out, &e);
		cd_skillmd_done(&m);
	}
out:
	ns_free(nss, n_nss);
	return !j->err;
}

static void scan_location(struct job *j, const char *root_id, const char *path)
{
	struct stat st;
	char *root_uri = cd_pathuri_format_posix(path, strlen(path));
	struct cd_json *v = NULL;
	struct objs sk = { 0 };
	bool warned = false;

	if (stat(path, &st) < 0) {
		if (errno != ENOENT && errno != EACCES && errno != EPERM && errno != ENOTDIR) {
			/* "could not inspect capability root ...": reported as the binary does. */
			warned = true;
		}
		goto out;
	}
	if (!S_ISDIR(st.st_mode))
		goto out;
	if (!(v = scan_root(j, path, root_uri)) || root_absent(v))
		goto out;
	if (root_skills(j, v, root_id, root_uri, &sk, &warned))
		for (size_t i = 0; i < sk.n; i++)
			admit_skill(j, sk.v[i], sk.len[i]);
out:
	if (warned)
		warn(j, W_METADATA);
	objs_done(&sk);
	cd_json_free(v);
	free(root_uri);
}

/* The text file object {path, contents} of a scan, or null. */
static void text_json(struct cd_strbuf *e, const struct cd_json *t)
{
	size_t pn = 0, cn = 0;
	const char *p = str_of(t, "path", &pn), *c = str_of(t, "contents", &cn);
	if (!p || !c) {
		cd_strbuf_append(e, "null");
		return;
	}
	cd_strbuf_append(e, "{\"path\":");
	cd_strbuf_append_json_string(e, p, pn);
	cd_strbuf_append(e, ",\"contents\":");
	cd_strbuf_append_json_string(e, c, cn);
	cd_strbuf_append_c(e, '}');
}

/* A file the manifest names ("./...") that the scan did not read: the binary warns. */
static bool declared_missing(const char *mc, size_t mn, const struct cd_json *files)
{
	static const char *const keys[][2] = { { "mcpServers", "mcpConfig" },
					       { "apps", "appsConfig" } };
	struct cd_json *m = NULL;
	struct cd_json_error je;
	bool missing = false;
	if (cd_json_parse(mc, mn, NULL, &m, &je) < 0)
		return false;
	for (size_t i = 0; i < CD_ARRAY_SIZE(keys); i++) {
		const struct cd_json *d = cd_json_get(m, keys[i][0]);
		const struct cd_json *f = cd_json_get(files, keys[i][1]);
		if (d && d->type == CD_JSON_STRING && d->u.str.len > 2 &&
		    !strncmp(d->u.str.s, "./", 2) && (!f || f->type == CD_JSON_NULL))
			missing = true;
	}
	cd_json_free(m);
	return missing;
}

/*
 * An installed plugin: its version's directory scanned as a root. One
 * without a manifest the binary reads is left out with the metadata
 * warning ("installed plugin at ... has no readable manifest").
 */
static void scan_plugin(struct job *j, const struct cd_discover_plugin *pl)
{
	char *root_uri = cd_pathuri_format_posix(pl->root, strlen(pl->root));
	struct cd_json *v = scan_root(j, pl->root, root_uri);
	struct objs sk = { 0 };
	struct cd_strbuf e = { 0 };
	bool warned = false;
	char *dn = NULL;

	if (!v || root_absent(v))
		goto out;
	const struct cd_json *files = cd_json_get(v, "plugin");
	const struct cd_json *mf = files ? cd_json_get(files, "manifest") : NULL;
	size_t mn = 0;
	const char *mc = str_of(mf, "contents", &mn), *why = NULL;
	const char *base = strrchr(pl->root, '/') + 1;
	int r = mc ? cd_plugin_display_name(mc, mn, base, &dn, &why) : CD_PLUGIN_INVALID;
	if (r == CD_PLUGIN_UNSUPPORTED) {
		fail(j, CD_RPC_INTERNAL,
		     cd_xasprintf("cordon cannot read the manifest of the installed plugin at "
				  "%s: %s (refused rather than answered differently)",
				  root_uri, why));
		goto out;
	}
	if (r != CD_PLUGIN_OK) {
		warned = true;
		goto out;
	}
	if (declared_missing(mc, mn, files))
		warned = true;
	if (!root_skills(j, v, NULL, root_uri, &sk, &warned))
		goto out;
	/* The plugin counts as one capability: its skills are cut to the room left. */
	size_t room = MAX_CAPS - j->caps;
	if (!room) {
		j->truncated = true;
		goto out;
	}
	size_t n_sk = sk.n;
	if (n_sk > room - 1) {
		j->truncated = true;
		n_sk = room - 1;
	}
	cd_strbuf_append(&e, "{\"id\":");
	cd_strbuf_append_json_string(&e, pl->id, strlen(pl->id));
	cd_strbuf_append(&e, ",\"displayName\":");
	cd_strbuf_append_json_string(&e, dn, strlen(dn));
	cd_strbuf_append(&e, ",\"remotePluginId\":");
	if (pl->remote_id)
		cd_strbuf_append_json_string(&e, pl->remote_id, strlen(pl->remote_id));
	else
		cd_strbuf_append(&e, "null");
	cd_strbuf_append(&e, ",\"version\":");
	cd_strbuf_append_json_string(&e, pl->version, strlen(pl->version));
	cd_strbuf_append(&e, ",\"root\":");
	cd_strbuf_append_json_string(&e, root_uri, strlen(root_uri));
	cd_strbuf_append(&e, ",\"files\":{\"manifest\":");
	text_json(&e, mf);
	cd_strbuf_append(&e, ",\"mcpConfig\":");
	text_json(&e, cd_json_get(files, "mcpConfig"));
	cd_strbuf_append(&e, ",\"appsConfig\":");
	text_json(&e, cd_json_get(files, "appsConfig"));
	cd_strbuf_append(&e, "},\"skills\":[");
	for (size_t i = 0; i < n_sk; i++) {
		if (i)
			cd_strbuf_append_c(&e, ',');
		cd_strbuf_append_n(&e, sk.v[i], sk.len[i]);
	}
	cd_strbuf_append(&e, "]}");
	if (j->caps + 1 + n_sk > MAX_CAPS || j->bytes + e.len > MAX_BYTES) {
		j->truncated = true;
		goto out;
	}
	j->caps += 1 + n_sk;
	j->bytes += e.len;
	j->plugins = cd_xreallocarray(j->plugins, j->n_plugins + 1, sizeof(*j->plugins));
	j->plugins[j->n_plugins++] = cd_strbuf_steal(&e);
out:
	if (warned)
		warn(j, W_METADATA);
	cd_strbuf_done(&e);
	objs_done(&sk);
	free(dn);
	cd_json_free(v);
	free(root_uri);
}

/* Bind the sandbox context: false with the refusal in j->err. */
static bool bind_sandbox(struct job *j)
{
	char *e = NULL;
	int rr = cd_intent_bind(j->sandbox, NULL, false, &j->server->host, &j->lopts, &j->b, &e);
	/*
	 * The binary's context for this method requires its cwd: serde names
	 * the missing fields in declaration order (permissions, cwd,
	 * windowsSandboxLevel), after any error in those present.
	 */
	if (!cd_json_get(j->sandbox, "cwd") &&
	    (rr == 0 || (e && !strcmp(e, "missing field `windowsSandboxLevel`")))) {
		free(e);
		e = cd_xstrdup("missing field `cwd`");
		rr = -EINVAL;
	}
	if (rr < 0) {
		fail(j, rr == -EDESTADDRREQ ? CD_RPC_INVALID_REQUEST : CD_RPC_INVALID_PARAMS, e);
		return false;
	}
	if (cd_intent_fs_helper_plan(&j->b, &j->lp, &e) < 0) {
		fail(j, CD_RPC_INVALID_PARAMS, e);
		return false;
	}
	return true;
}

/* Full (2,048 capabilities or exactly 4 MiB) with locations left: the binary stops. */
static bool stop_early(struct job *j, bool more)
{
	if ((j->caps == MAX_CAPS || j->bytes == MAX_BYTES) && more) {
		j->truncated = true;
		return true;
	}
	return false;
}

static void finish(struct job *j)
{
	struct cd_strbuf *o = &j->out;
	bool size_warned = false;
	for (;;) {
		o->len = 0;
		cd_strbuf_append(o, "{\"plugins\":[");
		for (size_t i = 0; i < j->n_plugins; i++) {
			if (i)
				cd_strbuf_append_c(o, ',');
			cd_strbuf_append(o, j->plugins[i]);
		}
		cd_strbuf_append(o, "],\"skills\":[");
		if (j->skills.len)
			cd_strbuf_append_n(o, j->skills.buf, j->skills.len);
		cd_strbuf_append(o, "],\"warnings\":[");
		for (size_t i = 0; i < j->n_warnings; i++) {
			if (i)
				cd_strbuf_append_c(o, ',');
			cd_strbuf_append_json_string(o, j->warnings[i], strlen(j->warnings[i]));
		}
		cd_strbuf_append(o, "]}");
		if (!j->truncated && o->len <= MAX_BYTES)
			return;
		if (!size_warned) {
			/* The limit warning goes first, the others after it (63 at most). */
			if (j->n_warnings == MAX_WARNINGS)
				free(j->warnings[--j->n_warnings]);
			memmove(j->warnings + 1, j->warnings, j->n_warnings * sizeof(char *));
			j->warnings[0] = cd_xstrdup(W_SIZE);
			j->n_warnings++;
			j->truncated = true;
			size_warned = true;
			continue;
		}
		if (o->len <= MAX_BYTES)
			return;
		if (j->n_warnings > 1) {
			while (j->n_warnings > 1)
				free(j->warnings[--j->n_warnings]);
		} else if (j->n_skills) {
			/* Drop the last skill, where it began (its text may hold any brace). */
			j->skills.len = j->skill_end[--j->n_skills];
		} else if (j->n_plugins) {
			free(j->plugins[--j->n_plugins]);
		} else {
			return;
		}
	}
}

static void job_run(struct cd_work *w)
{
	struct job *j = (struct job *)w;
	cd_fs_cur_cancel = &stopping;
	if (cd_testhook_holds(METHOD)) {
		char *key = cd_xasprintf("conn=%lu id=%s", j->serial, j->id);
		cd_testhook_hold(key, METHOD, &stopping);
		free(key);
	}
	if (j->sandbox && !bind_sandbox(j))
		goto out;
	char *codex_home = NULL;
	if (j->codex_home && *j->codex_home)
		codex_home = realpath(j->codex_home, NULL);
	if (!codex_home && j->home && !(j->codex_home && *j->codex_home))
		codex_home = cd_xasprintf("%s/.codex", j->home);
	if (!codex_home) {
		fail(j, CD_RPC_INTERNAL, cd_xstrdup("failed to find Codex home"));
		goto out;
	}
	/*
	 * The locations, in the binary's order: the installed plugins (sorted by
	 * id), then the standalone roots that are directories, 512 at most. A
	 * location that could not be resolved adds one warning, first.
	 */
	struct cd_discover_plugins pls;
	char *perr = NULL, *cache = cd_xasprintf("%s/plugins/cache", codex_home);
	if (cd_discover_plugins_find(cache, &j->hidden, &pls, &perr) < 0)
		fail(j, CD_RPC_INTERNAL, perr);
	free(cache);
	char *roots[3] = { cd_xasprintf("%s/skills", codex_home),
			   j->home && *j->home ? cd_xasprintf("%s/.agents/skills", j->home) : NULL,
			   cd_xstrdup(SYSTEM_SKILLS) };
	static const char *const ids[3] = { "codex-home-skills", "user-agent-skills",
					    "system-skills" };
	size_t n_loc = pls.n;
	bool loc_warned = pls.warned, is_dir[3] = { false, false, false };
	for (size_t i = 0; i < 3; i++) {
		struct stat st;
		if (!roots[i] || stat(roots[i], &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		is_dir[i] = true;
		if (n_loc == CD_PLUGIN_MAX_LOCATIONS) {
			/* "capability discovery reached its 512-location limit" */
			loc_warned = true;
			free(roots[i]);
			roots[i] = NULL;
			continue;
		}
		n_loc++;
	}
	if (loc_warned && !j->err)
		warn(j, W_LOCATIONS);
	size_t done = 0;
	for (size_t i = 0; i < pls.n && !j->err; i++) {
		scan_plugin(j, &pls.v[i]);
		if (stop_early(j, ++done < n_loc))
			break;
	}
	for (size_t i = 0; i < 3 && !j->err; i++) {
		if (!roots[i])
			continue;
		/* A root that is not a directory is no location; its scan may still warn. */
		scan_location(j, ids[i], roots[i]);
		if (is_dir[i] && stop_early(j, ++done < n_loc))
			break;
	}
	for (size_t i = 0; i < 3; i++)
		free(roots[i]);
	cd_discover_plugins_done(&pls);
	free(codex_home);
	if (!j->err && !cd_fs_cancelled())
		finish(j);
	cd_mem_set(CD_MEM_FILES, &j->charged, j->out.len + j->skills.len);
out:
	cd_fs_cur_cancel = NULL;
}

static void job_free(struct job *j)
{
	free(j->id);
	cd_cli_bound_done(&j->b);
	cd_json_free(j->msg);
	free(j->codex_home);
	free(j->home);
	for (size_t i = 0; i < j->n_warnings; i++)
		free(j->warnings[i]);
	free(j->err);
	cd_strbuf_done(&j->skills);
	free(j->skill_end);
	for (size_t i = 0; i < j->n_plugins; i++)
		free(j->plugins[i]);
	free(j->plugins);
	cd_strbuf_done(&j->out);
	cd_mem_set(CD_MEM_FILES, &j->charged, 0);
	free(j);
}

static void job_done(struct cd_work *w)
{
	struct job *j = (struct job *)w;
	struct cd_conn *c = cd_conn_listed(j->server, j->conn, j->serial);
	if (c) {
		c->n_discover--;
		if (c->freed || !w->ran || atomic_load(&stopping))
			c = NULL;
	}
	if (c) {
		if (j->err)
			cd_conn_error(c, j->id, j->err_code, j->err);
		else if (!cd_mem_room(0))
			cd_conn_error(c, j->id, CD_RPC_INTERNAL,
				      "capability discovery result exceeds the server's memory "
				      "budget (--max-memory)");
		else
			cd_conn_result(c, j->id, j->out.buf, j->out.len);
		if (c->in_eof)
			cd_conn_schedule_process(c);
		cd_conn_kick(c);
	}
	job_free(j);
}

void cd_discover_v2(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct cd_server *s = c->server;
	char *err = NULL;

	const struct cd_json *cwd, *sb;
	if (params && params->type == CD_JSON_ARRAY) {
		/* serde reads a struct from a sequence too: [cwd, sandbox?]. */
		size_t n = params->u.arr.n;
		if (n == 0) {
			err = cd_xstrdup("invalid length 0, expected struct "
					 "DiscoverV2CapabilitiesRequest with 2 elements");
			goto invalid;
		}
		if (n > 2) {
			err = cd_xasprintf("invalid length %zu, expected fewer elements in array",
					   n);
			goto invalid;
		}
		cwd = params->u.arr.items[0];
		sb = n > 1 ? params->u.arr.items[1] : NULL;
	} else {
		if (cd_param_object(params, "struct DiscoverV2CapabilitiesRequest", &err) < 0)
			goto invalid;
		cwd = cd_json_get(params, "cwd");
		sb = cd_json_get(params, "sandbox");
	}
	if (!cwd) {
		err = cd_param_missing("cwd");
		goto invalid;
	}
	if (cwd->type != CD_JSON_STRING) {
		err = cwd->type == CD_JSON_NUMBER
			      ? cd_xstrdup("invalid type: number, expected a string")
			      : cd_param_invalid(cwd, "a string", NULL);
		goto invalid;
	}
	char *path = NULL;
	const char *why = NULL;
	if (cd_pathuri_to_posix(cwd->u.str.s, cwd->u.str.len, &path, &why) < 0) {
		if ((err = cd_param_uri_refusal(cwd->u.str.s, cwd->u.str.len)))
			goto invalid;
		err = cd_xasprintf("invalid URI: %s", why ? why : "not a file URI");
		goto invalid;
	}
	free(path); /* the binary parses the cwd and does not use it */
	if (sb && sb->type == CD_JSON_ARRAY && !sb->u.arr.n) {
		err = cd_xstrdup(
			"invalid length 0, expected struct FileSystemSandboxContext with 9 "
			"elements");
		goto invalid;
	}
	if (sb && sb->type != CD_JSON_NULL && sb->type != CD_JSON_OBJECT) {
		err = sb->type == CD_JSON_NUMBER
			      ? cd_xstrdup("invalid type: number, expected struct "
					   "FileSystemSandboxContext")
			      : cd_param_invalid(sb, "struct FileSystemSandboxContext", NULL);
		goto invalid;
	}
	if (!pool) {
		atomic_store(&stopping, false);
		pool = cd_workq_new(s->loop, WORKERS);
	}
	if (!pool) {
		cd_conn_error(c, id, CD_RPC_INTERNAL, "capability discovery is unavailable");
		return;
	}
	struct job *j = cd_xcalloc(1, sizeof(*j));
	j->server = s;
	j->conn = c;
	j->serial = c->serial;
	j->id = cd_xstrdup(id);
	const char *e = getenv("CODEX_HOME");
	j->codex_home = e ? cd_xstrdup(e) : NULL;
	e = getenv("HOME");
	j->home = e ? cd_xstrdup(e) : NULL;
	cd_discover_hidden_snapshot(&j->hidden, s->hidden_fd, s->n_hidden);
	if (sb && sb->type == CD_JSON_OBJECT) {
		/* Bound on the worker (binding may read the file system): the tree goes along. */
		j->msg = c->cur_msg;
		c->cur_msg = NULL;
		j->sandbox = sb;
		j->lopts = s->fs_lopts;
		for (size_t i = 0; i < j->lopts.n_hidden && i < CD_ARRAY_SIZE(j->hid); i++)
			j->hid[i] = j->lopts.hidden[i];
		j->lopts.hidden = j->hid;
	}
	j->w.run = job_run;
	j->w.done = job_done;
	/* Bounded per connection, as fs requests are: each job holds its request. */
	if (cd_conn_submit_scan(c, id, &c->n_discover, pool, &j->w,
				"capability discovery is unavailable") < 0)
		job_free(j);
	return;
invalid:
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
	free(err);
}

void cd_discover_v2_server_stop(struct cd_server *s)
{
	if (!pool)
		return;
	atomic_store(&stopping, true);
	pthread_mutex_lock(&running_lock);
	if (running)
		cd_fs_sandboxed_cancel(running);
	pthread_mutex_unlock(&running_lock);
	if (cd_workq_free(pool, STOP_MS, "capability discovery") < 0)
		s->workers_left = true;
	pool = NULL;
}
