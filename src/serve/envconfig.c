/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "core/toml.h"
#include "serve/discover-scan.h"
#include "serve/envconfig.h"
#include "serve/intent.h"
#include "serve/server.h"
#include "serve/workq.h"
#include "shared/fd-util.h"

/*
 * The layers, lowest precedence first, as the released Codex exec-server
 * (codex-config's load_local_config_layers) builds them:
 *   system   /etc/codex/config.toml (always a layer; empty when absent)
 *   user     $CODEX_HOME/config.toml (CODEX_HOME must exist when set;
 *            default ~/.codex)
 *   project  <dir>/.codex/config.toml for each dir from the project root
 *            down to cwd, only when the dir or the project root is marked
 *            trust_level = "trusted" in [projects."<path>"] of the merged
 *            system and user config ("untrusted" or no mark: skipped). The
 *            project root is the nearest ancestor of cwd holding one of
 *            project_root_markers (default [".git"]: a git dir with a HEAD,
 *            or a .git file), else cwd itself.
 *   legacy   /etc/codex/managed_config.toml
 * and the requirements stack: /etc/codex/requirements.toml. Each layer is
 * narrowed to the requested key paths (a non-table value on the way is
 * kept whole, so it still overrides lower layers); a layer left empty is
 * dropped, and cloudInsertionIndex counts the kept layers before the
 * position cloud layers go (after the system layer).
 */

#define SYSTEM_DIR    "/etc/codex"
#define MAX_FILE      (16u << 20) /* per file: larger is refused, not truncated */
#define MAX_TOTAL     (64u << 20) /* all files of one request (a deep cwd has many layers) */
#define MAX_SELECTORS 4096
#define WORKERS	      1
#define STOP_MS	      2000
#define LOAD_ERR      "failed to load executor-local config: "

struct sel {
	const struct cd_json *const *seg; /* the request's strings */
	size_t n;
};

struct layer {
	char *source;	      /* owned */
	char *base_dir;	      /* owned, POSIX */
	struct cd_toml *toml; /* owned */
};

struct stack {
	struct layer *l;
	size_t n;
	size_t cloud; /* cloudInsertionIndex before narrowing */
};

struct job {
	struct cd_work w; /* first */
	struct cd_server *server;
	struct cd_conn *conn;
	unsigned long serial;
	char *id;	     /* owned, JSON text */
	struct cd_json *msg; /* owned: the request (the selectors point into it) */
	char *cwd;	     /* owned, POSIX */
	struct sel *csel, *rsel;
	size_t n_csel, n_rsel;
	char *codex_home_env, *home_env;  /* owned copies, or NULL */
	struct cd_discover_hidden hidden; /* the server's hidden files: never read */
	/* The answer. */
	size_t read_total; /* bytes of all files read so far */
	struct cd_strbuf out;
	int code; /* 0, or the JSON-RPC error code with out the message */
};

static struct cd_workq *pool;
static atomic_bool stopping;

static void stack_done(struct stack *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->l[i].source);
		free(s->l[i].base_dir);
		cd_toml_free(s->l[i].toml);
	}
	free(s->l);
	memset(s, 0, sizeof(*s));
}

static void stack_push(struct stack *s, char *source, const char *base_dir, struct cd_toml *t)
{
	s->l = cd_xreallocarray(s->l, s->n + 1, sizeof(*s->l));
	s->l[s->n].source = source;
	s->l[s->n].base_dir = cd_xstrdup(base_dir);
	s->l[s->n].toml = t;
	s->n++;
}

/*
 * Read and parse one TOML file: 0 with *ret (an empty table when the file
 * does not exist), or -1 with *err (malloc()ed, without the prefix).
 */
/*
 * A requirements file's parse error, as the binary words it: the toml
 * crate's report, with the line and a caret under the problem.
 */
static char *req_parse_error(const char *path, const char *buf, size_t len,
			     const struct cd_toml_error *e)
{
	const char *l = buf, *end = buf + len;
	for (unsigned n = 1; n < e->line && l < end; l++)
		if (*l == '\n')
			n++;
	const char *le = l;
	while (le < end && *le != '\n' && *le != '\r')
		le++;
	char num[16];
	int w = snprintf(num, sizeof(num), "%u", e->line);
	struct cd_strbuf sb = { 0 };
	cd_strbuf_printf(&sb,
			 "failed to parse requirements layer %s: TOML parse error at line %u, "
			 "column %u\n%*s |\n%s | ",
			 path, e->line, e->col, w, "", num);
	cd_strbuf_append_n(&sb, l, (size_t)(le - l));
	cd_strbuf_printf(&sb, "\n%*s | %*s", w, "", (int)e->col - 1, "");
	for (unsigned i = 0; i < (e->span ? e->span : 1); i++)
		cd_strbuf_append_c(&sb, '^');
	cd_strbuf_printf(&sb, "\n%s\n", e->msg);
	return cd_strbuf_steal(&sb);
}

static int load_file(struct job *j, const char *path, bool req, struct cd_toml **ret, char **err)
{
	*ret = NULL;
	struct stat st;
	/* A device or FIFO at the path is looked at, never opened. */
	int fd = cd_open_regular(path, &st);
	if (fd == -ENOENT || fd == -ENOTDIR) {
		*ret = cd_toml_new_table();
		return 0;
	}
	if (fd == -EINVAL) {
		*err = cd_xasprintf("%s: %s", path,
				    S_ISDIR(st.st_mode) ? strerror(EISDIR) : "not a regular file");
		return -1;
	}
	if (fd < 0) {
		*err = cd_xasprintf("%s: %s", path, strerror(-fd));
		return -1;
	}
	if (cd_discover_hidden_has(&j->hidden, &st)) {
		*err = cd_xasprintf("%s: one of the server's own files, never read", path);
		close(fd);
		return -1;
	}
	if ((uint64_t)st.st_size > MAX_FILE) {
		*err = cd_xasprintf("%s: larger than the %u-byte limit", path, MAX_FILE);
		close(fd);
		return -1;
	}
	size_t cap = (size_t)st.st_size + 1, len = 0;
	char *buf = cd_xmalloc(cap);
	for (;;) {
		if (len == cap) {
			if (cap > MAX_FILE) {
				*err = cd_xasprintf("%s: larger than the %u-byte limit", path,
						    MAX_FILE);
				goto fail;
			}
			cap *= 2;
			buf = cd_xrealloc(buf, cap);
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = cd_xasprintf("%s: %s", path, strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	j->read_total += len;
	if (j->read_total > MAX_TOTAL) {
		*err = cd_xasprintf("%s: the files read for this request exceed %u bytes", path,
				    MAX_TOTAL);
		free(buf);
		return -1;
	}
	struct cd_toml_error e;
	if (cd_toml_parse(buf, len, ret, &e) < 0) {
		*err = req ? req_parse_error(path, buf, len, &e)
			   : cd_xasprintf("%s:%u:%u: %s", path, e.line, e.col, e.msg);
		free(buf);
		return -1;
	}
	free(buf);
	return 0;
fail:
	free(buf);
	close(fd);
	return -1;
}

/* ---- narrowing ---- */

static bool seg_eq(const struct cd_json *s, const char *k, size_t n)
{
	return s->u.str.len == n && !memcmp(s->u.str.s, k, n);
}

/* v narrowed to the selectors (each with more than depth segments, or exactly depth). */
static struct cd_toml *project(const struct cd_toml *v, const struct sel *const *sel, size_t n,
			       size_t depth)
{
	for (size_t i = 0; i < n; i++)
		if (sel[i]->n == depth)
			return cd_toml_copy(v);
	if (v->type != CD_TOML_TABLE)
		return cd_toml_copy(v);
	struct cd_toml *t = cd_toml_new_table();
	const struct sel **sub = cd_xcalloc(n ? n : 1, sizeof(*sub));
	for (size_t i = 0; i < v->u.tab.n; i++) {
		const struct cd_toml_kv *kv = &v->u.tab.kv[i];
		size_t m = 0;
		for (size_t k = 0; k < n; k++)
			if (seg_eq(sel[k]->seg[depth], kv->key, kv->key_len))
				sub[m++] = sel[k];
		if (m)
			cd_toml_table_put(t, kv->key, kv->key_len,
					  project(kv->value, sub, m, depth + 1));
	}
	free(sub);
	return t;
}

static void narrow(struct stack *s, const struct sel *sel, size_t n)
{
	const struct sel **ps = cd_xcalloc(n ? n : 1, sizeof(*ps));
	for (size_t i = 0; i < n; i++)
		ps[i] = &sel[i];
	size_t kept = 0, cloud = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct cd_toml *t = project(s->l[i].toml, ps, n, 0);
		cd_toml_free(s->l[i].toml);
		s->l[i].toml = NULL;
		if (t->type == CD_TOML_TABLE && !t->u.tab.n) {
			cd_toml_free(t);
			free(s->l[i].source);
			free(s->l[i].base_dir);
			continue;
		}
		if (i < s->cloud)
			cloud++;
		s->l[kept] = s->l[i];
		s->l[kept++].toml = t;
	}
	s->n = kept;
	s->cloud = cloud;
	free(ps);
}

/* ---- discovery ---- */

static const struct cd_toml *tget(const struct cd_toml *t, const char *k)
{
	return cd_toml_get(t, k, strlen(k));
}

/*
 * A top-level key of the config that governs discovery (trust, root
 * markers): the legacy managed config's value wins over the user's, the
 * user's over the system's.
 */
static const struct cd_toml *merged_get(const struct cd_toml *const *layers, const char *k)
{
	for (size_t i = 3; i-- > 0;) {
		const struct cd_toml *v = layers[i] ? tget(layers[i], k) : NULL;
		if (v)
			return v;
	}
	return NULL;
}

static bool marker_at(const char *dir, const char *marker)
{
	char *p = cd_xasprintf("%s%s%s", dir, cd_streq(dir, "/") ? "" : "/", marker);
	struct stat st;
	bool ok = lstat(p, &st) == 0;
	if (ok && cd_streq(marker, ".git") && S_ISDIR(st.st_mode)) {
		/* A git dir, not any directory named .git. */
		char *head = cd_xasprintf("%s/HEAD", p);
		ok = access(head, F_OK) == 0;
		free(head);
	}
	free(p);
	return ok;
}

static char *parent_of(const char *d)
{
	const char *s = strrchr(d, '/');
	if (!s || s == d)
		return cd_xstrdup("/");
	char *p = cd_xmalloc((size_t)(s - d) + 1);
	memcpy(p, d, (size_t)(s - d));
	p[s - d] = '\0';
	return p;
}

static char *project_root(const char *cwd, const struct cd_toml *markers)
{
	char *d = cd_xstrdup(cwd);
	for (;;) {
		if (markers && markers->type == CD_TOML_ARRAY) {
			for (size_t i = 0; i < markers->u.arr.n; i++) {
				const struct cd_toml *m = markers->u.arr.items[i];
				if (m->type == CD_TOML_STRING && m->u.str.len &&
				    strlen(m->u.str.s) == m->u.str.len && marker_at(d, m->u.str.s))
					return d;
			}
		} else if (!markers && marker_at(d, ".git")) {
			return d;
		}
		if (cd_streq(d, "/"))
			break;
		char *p = parent_of(d);
		free(d);
		d = p;
	}
	free(d);
	return cd_xstrdup(cwd);
}

/* The first line of a small file, or NULL. */
static char *first_line(const char *path)
{
	char buf[PATH_MAX + 16];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return cd_xstrdup(buf);
}

/*
 * The checkout's root for trust, as `git rev-parse --git-common-dir` leads
 * the binary to it: the nearest ancestor with a git dir; for a .git file
 * (a worktree, a submodule) the parent of the common dir it names. NULL
 * when cwd is in no checkout.
 */
static char *repo_root(const char *cwd)
{
	char *d = cd_xstrdup(cwd);
	for (;;) {
		char *git = cd_xasprintf("%s%s.git", d, cd_streq(d, "/") ? "" : "/");
		struct stat st;
		if (lstat(git, &st) == 0 && S_ISREG(st.st_mode)) {
			char *l = first_line(git), *gd = NULL, *common = NULL, *res = NULL;
			if (l && cd_startswith(l, "gitdir: "))
				gd = l[8] == '/' ? cd_xstrdup(l + 8)
						 : cd_xasprintf("%s/%s", d, l + 8);
			char *cf = gd ? cd_xasprintf("%s/commondir", gd) : NULL;
			char *c = cf ? first_line(cf) : NULL;
			if (gd)
				common = !c	       ? cd_xstrdup(gd)
					 : c[0] == '/' ? cd_xstrdup(c)
						       : cd_xasprintf("%s/%s", gd, c);
			if (common)
				res = realpath(common, NULL);
			free(l);
			free(gd);
			free(cf);
			free(c);
			free(common);
			free(git);
			free(d);
			if (!res)
				return NULL;
			char *p = parent_of(res);
			free(res);
			return p;
		}
		bool found = marker_at(d, ".git");
		free(git);
		if (found)
			return d;
		if (cd_streq(d, "/"))
			break;
		char *p = parent_of(d);
		free(d);
		d = p;
	}
	free(d);
	return NULL;
}

/*
 * 1 trusted, 0 untrusted, -1 no mark: [projects."DIR"] trust_level of the
 * highest layer that sets it (the tables merge, as the binary merges them).
 */
static int trust_of(const struct cd_toml *const *layers, const char *dir)
{
	for (size_t i = 3; i-- > 0;) {
		const struct cd_toml *projects = layers[i] ? tget(layers[i], "projects") : NULL;
		const struct cd_toml *p = projects ? tget(projects, dir) : NULL;
		const struct cd_toml *lvl = p ? tget(p, "trust_level") : NULL;
		if (lvl && lvl->type == CD_TOML_STRING)
			return cd_streq(lvl->u.str.s, "trusted");
	}
	return -1;
}

/*
 * What a project's own config may not set (it comes with the repository: it
 * must not choose where credentials go or what runs): dropped from project
 * layers, as the released binary drops them (probed on 0.169.0).
 */
static const char *const project_denylist[] = {
	"openai_base_url",
	"chatgpt_base_url",
	"apps_mcp_product_sku",
	"responses_api_metadata",
	"model_provider",
	"model_providers",
	"notify",
	"profile",
	"profiles",
	"experimental_realtime_webrtc_call_base_url",
	"experimental_realtime_ws_base_url",
	"otel",
};

static void sanitize_project(struct cd_toml *t)
{
	for (size_t i = 0; i < CD_ARRAY_SIZE(project_denylist); i++)
		cd_toml_table_remove(t, project_denylist[i], strlen(project_denylist[i]));
	struct cd_toml *f = cd_toml_get(t, "features", strlen("features"));
	if (f)
		cd_toml_table_remove(f, "respect_system_proxy", strlen("respect_system_proxy"));
}

static int add_projects(struct job *j, struct stack *cfg, const struct cd_toml *const *disc,
			const char *codex_home, char **err)
{
	char *root = project_root(j->cwd, merged_get(disc, "project_root_markers"));
	char *repo = repo_root(j->cwd);
	/* A dir's own mark first, then the project root's, then the checkout's. */
	int root_trust = trust_of(disc, root);
	if (root_trust < 0 && repo)
		root_trust = trust_of(disc, repo);
	free(repo);
	size_t rl = strlen(root);
	int r = 0;
	/* From the root down to cwd: each step one more component of cwd. */
	const char *rest = j->cwd + (cd_streq(root, "/") ? 0 : rl);
	for (const char *q = rest;; q++) {
		if (*q && *q != '/')
			continue;
		size_t dl = (size_t)(q - j->cwd);
		char *dir = dl ? cd_xasprintf("%.*s", (int)dl, j->cwd) : cd_xstrdup("/");
		char *dot = cd_xasprintf("%s%s.codex", dir, cd_streq(dir, "/") ? "" : "/");
		struct stat st;
		int t = trust_of(disc, dir);
		if (t < 0)
			t = root_trust;
		if (t > 0 && stat(dot, &st) == 0 && S_ISDIR(st.st_mode) &&
		    !cd_streq(dot, codex_home)) {
			char *file = cd_xasprintf("%s/config.toml", dot);
			struct cd_toml *tm = NULL;
			if (load_file(j, file, false, &tm, err) < 0) {
				r = -1;
			} else if (access(file, F_OK) == 0) {
				sanitize_project(tm);
				stack_push(cfg, cd_xasprintf("project (%s)", file), dot, tm);
				tm = NULL;
			}
			cd_toml_free(tm);
			free(file);
		}
		free(dot);
		free(dir);
		if (r < 0 || !*q)
			break;
	}
	free(root);
	return r;
}

/*
 * The legacy managed config read as requirements, as the binary reads it:
 * approval_policy = P allows only P, sandbox_mode = M allows read-only and
 * M. 0 with *ret (a table, maybe empty), or -1 with *err.
 */
static int legacy_requirements(const struct cd_toml *managed, struct cd_toml **ret, char **err)
{
	static const char *const policies[] = { "untrusted", "on-failure", "on-request", "never" };
	static const char *const modes[] = { "read-only", "workspace-write", "danger-full-access" };
	const struct cd_toml *ap = tget(managed, "approval_policy");
	const struct cd_toml *sm = tget(managed, "sandbox_mode");
	bool ok_ap = !ap, ok_sm = !sm;
	for (size_t i = 0; ap && ap->type == CD_TOML_STRING && i < CD_ARRAY_SIZE(policies); i++)
		ok_ap = ok_ap || cd_streq(ap->u.str.s, policies[i]);
	for (size_t i = 0; sm && sm->type == CD_TOML_STRING && i < CD_ARRAY_SIZE(modes); i++)
		ok_sm = ok_sm || cd_streq(sm->u.str.s, modes[i]);
	if (!ok_ap || !ok_sm) {
		const struct cd_toml *bad = !ok_ap ? ap : sm;
		const char *field = !ok_ap ? "approval_policy" : "sandbox_mode";
		if (bad->type == CD_TOML_STRING)
			*err = cd_xasprintf(
				"Failed to parse config requirements as TOML: unknown variant "
				"`%s`, expected one of %s\nin `%s`\n",
				bad->u.str.s,
				!ok_ap ? "`untrusted`, `on-failure`, `on-request`, "
					 "`granular`, `never`"
				       : "`read-only`, `workspace-write`, `danger-full-access`",
				field);
		else
			*err = cd_xasprintf(
				"Failed to parse config requirements as TOML: %s must be "
				"a string (cordon reads no other form)\nin `%s`\n",
				field, field);
		return -1;
	}
	struct cd_toml *t = cd_toml_new_table();
	if (ap) {
		struct cd_toml *a = cd_toml_new_array();
		cd_toml_array_push(a, cd_toml_copy(ap));
		cd_toml_table_put(t, "allowed_approval_policies",
				  strlen("allowed_approval_policies"), a);
	}
	if (sm) {
		struct cd_toml *a = cd_toml_new_array();
		struct cd_toml *ro = cd_toml_copy(sm);
		free(ro->u.str.s);
		ro->u.str.s = cd_xstrdup("read-only");
		ro->u.str.len = strlen("read-only");
		cd_toml_array_push(a, ro);
		if (!cd_streq(sm->u.str.s, "read-only"))
			cd_toml_array_push(a, cd_toml_copy(sm));
		cd_toml_table_put(t, "allowed_sandbox_modes", strlen("allowed_sandbox_modes"), a);
	}
	*ret = t;
	return 0;
}

static void append_stack(struct cd_strbuf *o, const struct stack *s)
{
	cd_strbuf_append(o, "{\"layers\":[");
	for (size_t i = 0; i < s->n; i++) {
		char *text = NULL, *uri;
		size_t tl = 0;
		if (i)
			cd_strbuf_append_c(o, ',');
		cd_strbuf_append(o, "{\"source\":");
		cd_strbuf_append_json_string(o, s->l[i].source, strlen(s->l[i].source));
		uri = cd_pathuri_format_posix(s->l[i].base_dir, strlen(s->l[i].base_dir));
		cd_strbuf_append(o, ",\"baseDir\":");
		cd_strbuf_append_json_string(o, uri, strlen(uri));
		free(uri);
		cd_toml_write(s->l[i].toml, &text, &tl);
		cd_strbuf_append(o, ",\"toml\":");
		cd_strbuf_append_json_string(o, text, tl);
		free(text);
		cd_strbuf_append_c(o, '}');
	}
	cd_strbuf_printf(o, "],\"cloudInsertionIndex\":%zu}", s->cloud);
}

static void job_fail(struct job *j, int code, char *msg)
{
	cd_strbuf_done(&j->out);
	cd_strbuf_append(&j->out, msg);
	free(msg);
	j->code = code;
}

/* On a worker. */
static void job_run(struct cd_work *w)
{
	struct job *j = (struct job *)w;
	struct stack cfg = { 0 }, req = { 0 };
	struct cd_toml *sys = NULL, *user = NULL, *managed = NULL, *rq = NULL, *legacy = NULL;
	char *codex_home = NULL, *home = NULL, *err = NULL, *file = NULL;

	if (j->codex_home_env && *j->codex_home_env) {
		codex_home = realpath(j->codex_home_env, NULL);
		if (!codex_home) {
			job_fail(j, CD_RPC_INTERNAL,
				 cd_xasprintf("failed to find Codex home: CODEX_HOME points to "
					      "\"%s\", but that path does not exist",
					      j->codex_home_env));
			goto out;
		}
	}
	/* HOME only: getpwuid() would need glibc's NSS modules in a static binary. */
	if (j->home_env && *j->home_env)
		home = cd_xstrdup(j->home_env);
	if (!codex_home) {
		if (!home) {
			job_fail(j, CD_RPC_INTERNAL,
				 cd_xstrdup("failed to find Codex home: could not find home "
					    "directory"));
			goto out;
		}
		codex_home = cd_xasprintf("%s/.codex", home);
	}

	if (load_file(j, SYSTEM_DIR "/config.toml", false, &sys, &err) < 0)
		goto load_err;
	file = cd_xasprintf("%s/config.toml", codex_home);
	if (load_file(j, file, false, &user, &err) < 0)
		goto load_err;
	if (load_file(j, SYSTEM_DIR "/managed_config.toml", false, &managed, &err) < 0)
		goto load_err;
	if (load_file(j, SYSTEM_DIR "/requirements.toml", true, &rq, &err) < 0)
		goto load_err;
	if (legacy_requirements(managed, &legacy, &err) < 0)
		goto load_err;

	stack_push(&cfg, cd_xstrdup("system (" SYSTEM_DIR "/config.toml)"), SYSTEM_DIR,
		   cd_toml_copy(sys));
	stack_push(&cfg, cd_xasprintf("user (%s)", file), codex_home, cd_toml_copy(user));
	cfg.cloud = 1;
	const struct cd_toml *disc[3] = { sys, user, managed };
	if (add_projects(j, &cfg, disc, codex_home, &err) < 0)
		goto load_err;
	if (access(SYSTEM_DIR "/managed_config.toml", F_OK) == 0) {
		stack_push(&cfg,
			   cd_xstrdup("legacy managed_config.toml (" SYSTEM_DIR
				      "/managed_config.toml)"),
			   SYSTEM_DIR, managed);
		managed = NULL;
	}
	if (access(SYSTEM_DIR "/requirements.toml", F_OK) == 0) {
		stack_push(&req, cd_xstrdup(SYSTEM_DIR "/requirements.toml"), SYSTEM_DIR, rq);
		rq = NULL;
		req.cloud = 1;
	}
	if (access(SYSTEM_DIR "/managed_config.toml", F_OK) == 0) {
		stack_push(&req, cd_xstrdup(SYSTEM_DIR "/managed_config.toml"), SYSTEM_DIR, legacy);
		legacy = NULL;
	}
	narrow(&cfg, j->csel, j->n_csel);
	narrow(&req, j->rsel, j->n_rsel);

	char host[256] = "";
	struct cd_strbuf *o = &j->out;
	cd_strbuf_append(o, "{\"userHomeDir\":");
	if (home && home[0] == '/') {
		char *u = cd_pathuri_format_posix(home, strlen(home));
		cd_strbuf_append_json_string(o, u, strlen(u));
		free(u);
	} else {
		cd_strbuf_append(o, "null");
	}
	char *u = cd_pathuri_format_posix(codex_home, strlen(codex_home));
	cd_strbuf_append(o, ",\"codexHomeDir\":");
	cd_strbuf_append_json_string(o, u, strlen(u));
	free(u);
	cd_strbuf_append(o, ",\"hostname\":");
	if (gethostname(host, sizeof(host) - 1) == 0 && host[0])
		cd_strbuf_append_json_string(o, host, strlen(host));
	else
		cd_strbuf_append(o, "null");
	cd_strbuf_append(o, ",\"config\":");
	append_stack(o, &cfg);
	cd_strbuf_append(o, ",\"requirements\":");
	append_stack(o, &req);
	cd_strbuf_append_c(o, '}');
	goto out;
load_err:
	job_fail(j, CD_RPC_INTERNAL, cd_xasprintf(LOAD_ERR "%s", err));
	free(err);
out:
	stack_done(&cfg);
	stack_done(&req);
	cd_toml_free(sys);
	cd_toml_free(user);
	cd_toml_free(managed);
	cd_toml_free(rq);
	cd_toml_free(legacy);
	free(codex_home);
	free(home);
	free(file);
}

static void job_free(struct job *j)
{
	free(j->id);
	free(j->cwd);
	free(j->csel);
	free(j->rsel);
	free(j->codex_home_env);
	free(j->home_env);
	cd_json_free(j->msg);
	cd_strbuf_done(&j->out);
	free(j);
}

/* On the loop: answer, when the connection is still there. */
static void job_done(struct cd_work *w)
{
	struct job *j = (struct job *)w;
	struct cd_conn *c = cd_conn_listed(j->server, j->conn, j->serial);
	if (c) {
		c->n_envconfig--;
		if (c->freed || !w->ran || atomic_load(&stopping))
			c = NULL;
	}
	if (c) {
		if (j->code)
			cd_conn_error(c, j->id, j->code, j->out.buf ? j->out.buf : "error");
		else
			cd_conn_result(c, j->id, j->out.buf, j->out.len);
		if (c->in_eof)
			cd_conn_schedule_process(c);
		cd_conn_kick(c);
	}
	job_free(j);
}

/* The selectors: an array of arrays of strings. */
static int parse_sels(const struct cd_json *v, struct sel **ret, size_t *ret_n, char **err)
{
	if (v->type != CD_JSON_ARRAY) {
		*err = v->type == CD_JSON_NUMBER
			       ? cd_xstrdup("invalid type: number, expected a sequence")
			       : cd_param_invalid(v, "a sequence", NULL);
		return -1;
	}
	*ret = cd_xcalloc(v->u.arr.n ? v->u.arr.n : 1, sizeof(**ret));
	*ret_n = v->u.arr.n;
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct cd_json *p = v->u.arr.items[i];
		if (p->type != CD_JSON_ARRAY) {
			*err = p->type == CD_JSON_NUMBER
				       ? cd_xstrdup("invalid type: number, expected a sequence")
				       : cd_param_invalid(p, "a sequence", NULL);
			return -1;
		}
		for (size_t k = 0; k < p->u.arr.n; k++) {
			const struct cd_json *s = p->u.arr.items[k];
			if (s->type != CD_JSON_STRING) {
				*err = s->type == CD_JSON_NUMBER
					       ? cd_xstrdup("invalid type: number, expected a "
							    "string")
					       : cd_param_invalid(s, "a string", NULL);
				return -1;
			}
		}
		(*ret)[i].seg = (const struct cd_json *const *)p->u.arr.items;
		(*ret)[i].n = p->u.arr.n;
	}
	return 0;
}

/*
 * cwd as the binary's PathUri reads it: its messages for a missing scheme,
 * another scheme and a host; cordon's own for the rest (pathuri.c).
 */
static int parse_cwd(const struct cd_json *cwd, char **ret, char **err)
{
	const char *u = cwd->u.str.s, *why = NULL;
	size_t n = cwd->u.str.len, i = 0;
	if (n && ((u[0] >= 'a' && u[0] <= 'z') || (u[0] >= 'A' && u[0] <= 'Z'))) {
		i = 1;
		while (i < n &&
		       (isalnum((unsigned char)u[i]) || u[i] == '+' || u[i] == '-' || u[i] == '.'))
			i++;
	}
	if (!i || i == n || u[i] != ':') {
		*err = cd_xstrdup("invalid URI: relative URL without a base");
		return -1;
	}
	if (i != 4 || strncasecmp(u, "file", 4) != 0) {
		char *scheme = cd_xmalloc(i + 1);
		for (size_t k = 0; k < i; k++)
			scheme[k] = (char)tolower((unsigned char)u[k]);
		scheme[i] = '\0';
		*err = cd_xasprintf("unsupported path URI scheme `%s`", scheme);
		free(scheme);
		return -1;
	}
	if (n > 7 && !strncmp(u + 5, "//", 2) && u[7] != '/' && strnlen(u, n) == n) {
		*err = cd_xasprintf("'%s' is invalid on 'linux'", u);
		return -1;
	}
	if (cd_pathuri_to_posix(u, n, ret, &why) < 0) {
		*err = cd_xasprintf("invalid URI: %s", why ? why : "not a file URI");
		return -1;
	}
	return 0;
}

void cd_envconfig_read(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct cd_server *s = c->server;
	struct job *j = cd_xcalloc(1, sizeof(*j));
	char *err = NULL;

	if (cd_param_object(params, "struct EnvironmentConfigReadParams", &err) < 0)
		goto invalid;
	const struct cd_json *cwd = cd_json_get(params, "cwd"),
			     *cp = cd_json_get(params, "configPaths"),
			     *rp = cd_json_get(params, "requirementsPaths");
	/* The binary decodes cwd as a URI when it meets it: before a missing field. */
	if (cwd && cwd->type != CD_JSON_STRING) {
		err = cwd->type == CD_JSON_NUMBER
			      ? cd_xstrdup("invalid type: number, expected a string")
			      : cd_param_invalid(cwd, "a string", NULL);
		goto invalid;
	}
	if (cwd && parse_cwd(cwd, &j->cwd, &err) < 0)
		goto invalid;
	if (!cwd || !cp || !rp) {
		err = cd_param_missing(!cwd ? "cwd" : !cp ? "configPaths" : "requirementsPaths");
		goto invalid;
	}
	if (parse_sels(cp, &j->csel, &j->n_csel, &err) < 0 ||
	    parse_sels(rp, &j->rsel, &j->n_rsel, &err) < 0)
		goto invalid;
	if (!j->n_csel && !j->n_rsel) {
		err = cd_xstrdup("at least one config or requirements path is required");
		goto invalid;
	}
	for (size_t i = 0; i < j->n_csel + j->n_rsel; i++) {
		const struct sel *x = i < j->n_csel ? &j->csel[i] : &j->rsel[i - j->n_csel];
		if (!x->n) {
			err = cd_xstrdup("TOML paths must contain at least one key segment");
			goto invalid;
		}
	}
	if (j->n_csel + j->n_rsel > MAX_SELECTORS) {
		err = cd_xasprintf("at most %d TOML selectors are allowed", MAX_SELECTORS);
		goto invalid;
	}
	if (!pool) {
		atomic_store(&stopping, false);
		pool = cd_workq_new(s->loop, WORKERS);
	}
	if (!pool) {
		cd_conn_error(c, id, CD_RPC_INTERNAL, "environment config reads are unavailable");
		job_free(j);
		return;
	}
	const char *e = getenv("CODEX_HOME");
	j->codex_home_env = e ? cd_xstrdup(e) : NULL;
	e = getenv("HOME");
	j->home_env = e ? cd_xstrdup(e) : NULL;
	cd_discover_hidden_snapshot(&j->hidden, s->hidden_fd, s->n_hidden);
	/* The selectors point into the request: it goes along. */
	j->msg = c->cur_msg;
	c->cur_msg = NULL;
	j->server = s;
	j->conn = c;
	j->serial = c->serial;
	j->id = cd_xstrdup(id);
	j->w.run = job_run;
	j->w.done = job_done;
	/* Bounded per connection, as fs requests are: each job holds its request. */
	if (cd_conn_submit_scan(c, id, &c->n_envconfig, pool, &j->w,
				"environment config reads are unavailable") < 0)
		job_free(j);
	return;
invalid:
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
	free(err);
	job_free(j);
}

void cd_envconfig_server_stop(struct cd_server *s)
{
	if (!pool)
		return;
	atomic_store(&stopping, true);
	if (cd_workq_free(pool, STOP_MS, "environment config read") < 0)
		s->workers_left = true;
	pool = NULL;
}
