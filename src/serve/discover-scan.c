/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "core/pathuri.h"
#include "serve/discover-scan.h"
#include "serve/fs-ops.h"
#include "shared/fd-util.h"

void cd_discover_hidden_snapshot(struct cd_discover_hidden *h, const int *fds, size_t n)
{
	for (size_t i = 0; i < n && h->n < CD_ARRAY_SIZE(h->dev); i++) {
		struct stat st;
		if (fds[i] >= 0 && fstat(fds[i], &st) == 0) {
			h->dev[h->n] = st.st_dev;
			h->ino[h->n++] = st.st_ino;
		}
	}
}

/*
 * The released binary's limits (reference 2.12), its messages, and its
 * choices on symlinks: the walk (fs/walk's) follows directory symlinks
 * (inside the root or not, each directory once), a symlink to a file found
 * by the walk is not taken as a SKILL.md, and the files read by name (the
 * manifests, .mcp.json, agents/openai.yaml, the files a manifest declares)
 * are read through symlinks — with one difference of cordon's: a file whose
 * real path leaves the directory it was looked for in (the root, or for the
 * manifest inherited from above, the directory it was found in) is not read,
 * and a warning says so. The root may be a workspace a sandboxed command
 * writes: a symlink planted there must not make the server read, with its
 * own rights, a file that command was denied.
 */

#define MAX_DEPTH   6
#define MAX_DIRS    2000
#define MAX_ENTRIES 20000
#define MAX_FILE    (1024 * 1024)
#define MAX_BUNDLE  (16 * 1024 * 1024)

static const char *const manifest_dirs[] = { ".codex-plugin", ".claude-plugin", ".cursor-plugin" };

/* One root's scan. */
struct scan {
	const struct cd_discover_hidden *hid;
	const char *root;
	char *base_real; /* realpath of the directory files are looked for in (owned), or NULL */
	size_t budget;
	struct cd_strbuf warnings;
	size_t n_warnings;
};

struct text {
	char *path; /* owned, POSIX */
	char *data; /* owned */
	size_t len;
};

static void text_done(struct text *t)
{
	free(t->path);
	free(t->data);
	*t = (struct text){ 0 };
}

static void warn(struct scan *s, const char *fmt, ...) CD_PRINTF(2, 3);
static void warn(struct scan *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = cd_xvasprintf(fmt, ap);
	va_end(ap);
	if (s->n_warnings++)
		cd_strbuf_append_c(&s->warnings, ',');
	cd_strbuf_append_json_string(&s->warnings, msg, strlen(msg));
	free(msg);
}

static char *uri_of(const char *path)
{
	return cd_pathuri_format_posix(path, strlen(path));
}

static char *os_error(int e)
{
	return cd_xasprintf("%s (os error %d)", strerror(e), e);
}

/*
 * Rust's Utf8Error text for s[0..n), or NULL when it is UTF-8 (what
 * String::from_utf8 accepts: no surrogates, no overlongs, <= U+10FFFF).
 */
static char *utf8_error(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char b = s[i];
		size_t need, k;
		unsigned char lo = 0x80, hi = 0xbf;
		if (b < 0x80) {
			i++;
			continue;
		} else if (b >= 0xc2 && b <= 0xdf) {
			need = 1;
		} else if (b >= 0xe0 && b <= 0xef) {
			need = 2;
			if (b == 0xe0)
				lo = 0xa0;
			else if (b == 0xed)
				hi = 0x9f;
		} else if (b >= 0xf0 && b <= 0xf4) {
			need = 3;
			if (b == 0xf0)
				lo = 0x90;
			else if (b == 0xf4)
				hi = 0x8f;
		} else {
			return cd_xasprintf("invalid utf-8 sequence of 1 bytes from index %zu", i);
		}
		for (k = 1; k <= need; k++) {
			if (i + k >= n)
				return cd_xasprintf("incomplete utf-8 byte sequence from index %zu",
						    i);
			unsigned char c = s[i + k];
			if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xbf))
				return cd_xasprintf("invalid utf-8 sequence of %zu bytes from "
						    "index %zu",
						    k, i);
		}
		i += need + 1;
	}
	return NULL;
}

bool cd_discover_hidden_has(const struct cd_discover_hidden *h, const struct stat *st)
{
	for (size_t i = 0; h && i < h->n; i++)
		if (h->dev[i] == st->st_dev && h->ino[i] == st->st_ino)
			return true;
	return false;
}

/*
 * Whether the file open as st (at path) really lies in s->base_real: its
 * real path is below it and names that very file (a link swapped since the
 * open is caught by the inode).
 */
static bool inside_base(const struct scan *s, const char *path, const struct stat *st)
{
	if (!s->base_real)
		return false; /* the directory could not be resolved: nothing is read from it */
	char *rp = realpath(path, NULL);
	struct stat rst;
	bool ok = rp && cd_path_is_beneath(rp, s->base_real) && stat(rp, &rst) == 0 &&
		  rst.st_dev == st->st_dev && rst.st_ino == st->st_ino;
	free(rp);
	return ok;
}

/* read_optional_text_file: 0 with *t, or -1 (absent, or a warning said why). */
static int read_text(struct scan *s, const char *path, struct text *t)
{
	struct stat st;
	char *uri = uri_of(path), *e = NULL;
	int fd = -1, r = -1;
	unsigned char *buf = NULL;
	size_t len = 0;

	if (stat(path, &st) < 0) {
		if (errno != ENOENT) {
			e = os_error(errno);
			warn(s, "failed to inspect capability file %s: %s", uri, e);
		}
		goto out;
	}
	if (!S_ISREG(st.st_mode))
		goto out;
	if (st.st_size > MAX_FILE) {
		warn(s, "capability file %s exceeds the %d-byte limit", uri, MAX_FILE);
		goto out;
	}
	if (s->budget + (size_t)st.st_size > MAX_BUNDLE) {
		warn(s, "capability root bundle exceeds the %d-byte limit", MAX_BUNDLE);
		goto out;
	}
	/* What was put in the file's place since the stat is looked at, not opened. */
	fd = cd_open_regular(path, &st);
	if (fd == -EINVAL)
		goto out;
	if (fd < 0) {
		e = os_error(-fd);
		warn(s, "failed to read capability file %s: %s", uri, e);
		goto out;
	}
	if (cd_discover_hidden_has(s->hid, &st)) {
		e = os_error(EACCES);
		warn(s, "failed to read capability file %s: %s", uri, e);
		goto out;
	}
	if (!inside_base(s, path, &st)) {
		warn(s, "capability file %s leads out of %s through a symbolic link: not read", uri,
		     s->base_real ? s->base_real : "its directory");
		goto out;
	}
	if (!S_ISREG(st.st_mode))
		goto out;
	buf = cd_xmalloc(MAX_FILE + 1);
	for (;;) {
		ssize_t n = read(fd, buf + len, MAX_FILE + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = os_error(errno);
			warn(s, "failed to read capability file %s: %s", uri, e);
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > MAX_FILE || s->budget + len > MAX_BUNDLE) {
			warn(s, "capability file %s exceeded its read limit", uri);
			goto out;
		}
	}
	e = utf8_error(buf, len);
	if (e) {
		warn(s, "capability file %s is not UTF-8: %s", uri, e);
		goto out;
	}
	s->budget += len;
	t->path = cd_xstrdup(path);
	t->data = cd_xreallocarray(buf, len + 1, 1);
	t->data[len] = '\0';
	t->len = len;
	buf = NULL;
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(e);
	free(uri);
	return r;
}

static void write_text(struct cd_strbuf *sb, const struct text *t)
{
	if (!t->path) {
		cd_strbuf_append(sb, "null");
		return;
	}
	char *uri = uri_of(t->path);
	cd_strbuf_append(sb, "{\"path\":");
	cd_strbuf_append_json_string(sb, uri, strlen(uri));
	cd_strbuf_append(sb, ",\"contents\":");
	cd_strbuf_append_json_string(sb, t->data, t->len);
	cd_strbuf_append_c(sb, '}');
	free(uri);
}

/* dir + "/" + rel (rel relative; "" and "." components dropped). */
static char *join(const char *dir, const char *rel)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, strcmp(dir, "/") ? dir : "");
	for (const char *p = rel; *p;) {
		size_t n = strcspn(p, "/");
		if (n && !(n == 1 && p[0] == '.')) {
			cd_strbuf_append_c(&sb, '/');
			cd_strbuf_append_n(&sb, p, n);
		}
		p += n;
		p += *p == '/';
	}
	if (!sb.len)
		cd_strbuf_append_c(&sb, '/');
	return cd_strbuf_steal(&sb);
}

/* The directory holding path (a normalised absolute path), or NULL for "/". */
static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!strcmp(path, "/") || !slash)
		return NULL;
	if (slash == path)
		return cd_xstrdup("/");
	char *p = cd_xstrdup(path);
	p[slash - path] = '\0';
	return p;
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static int read_first_manifest(struct scan *s, const char *dir, struct text *t)
{
	for (size_t i = 0; i < CD_ARRAY_SIZE(manifest_dirs); i++) {
		char *rel = cd_xasprintf("%s/plugin.json", manifest_dirs[i]);
		char *p = join(dir, rel);
		int r = read_text(s, p, t);
		free(rel);
		free(p);
		if (r == 0)
			return 0;
	}
	return -1;
}

/* Index in manifest_dirs of a plugin manifest's directory, or -1. */
static int manifest_priority(const char *path)
{
	if (strcmp(base_of(path), "plugin.json"))
		return -1;
	char *dir = parent_of(path);
	int r = -1;
	for (size_t i = 0; dir && i < CD_ARRAY_SIZE(manifest_dirs); i++)
		if (!strcmp(base_of(dir), manifest_dirs[i]))
			r = (int)i;
	free(dir);
	return r;
}

/* The plugin root of a manifest: the directory above its manifest directory. */
static char *plugin_root_of(const char *path)
{
	char *dir = parent_of(path), *root = dir ? parent_of(dir) : NULL;
	free(dir);
	return root;
}

struct found {
	char *path;   /* owned, POSIX */
	char *key;    /* owned: the URI sorted on (skills), or the plugin root's */
	int priority; /* manifests */
};

static int cmp_found(const void *a, const void *b)
{
	const struct found *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : (x->priority > y->priority) - (x->priority < y->priority);
}

static void found_free(struct found *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].path);
		free(f[i].key);
	}
	free(f);
}

/* declared_file_path: the file a manifest's field names, or NULL (a warning may say why). */
static char *declared_path(struct scan *s, const char *field, const struct cd_json *v,
			   const char *manifest)
{
	if (!v || v->type != CD_JSON_STRING)
		return NULL;
	char *muri = uri_of(manifest);
	char *ret = NULL;
	const char *p = v->u.str.s;
	if (v->u.str.len < 2 || strncmp(p, "./", 2) || cd_json_string_has_nul(v)) {
		if (v->u.str.len < 2 || strncmp(p, "./", 2))
			warn(s, "ignoring %s in %s: path must start with `./`", field, muri);
		goto out;
	}
	const char *rel = p + 2;
	bool dotdot = !*rel;
	for (const char *q = rel; *q && !dotdot;) {
		size_t n = strcspn(q, "/\\");
		dotdot = n == 2 && q[0] == '.' && q[1] == '.';
		q += n;
		q += *q != '\0';
	}
	if (dotdot) {
		warn(s, "ignoring %s in %s: path must remain below the capability root", field,
		     muri);
		goto out;
	}
	ret = join(s->root, rel);
out:
	free(muri);
	return ret;
}

void cd_discover_scan(const char *path, const struct cd_discover_hidden *hidden,
		      struct cd_strbuf *out)
{
	struct scan s = { .hid = hidden, .root = path };
	struct cd_strbuf skills = { 0 }, namespaces = { 0 }, plugin = { 0 };
	struct text manifest = { 0 }, inherited = { 0 };
	struct found *sk = NULL, *mf = NULL;
	size_t n_sk = 0, n_mf = 0, n_ns = 0, n_skills = 0;
	char *root_uri = uri_of(path), *error = NULL, *e = NULL;
	struct cd_fs_req q = { .op = CD_FS_WALK };
	struct cd_fs_res r = { .fd = -1 };
	struct cd_json *walk = NULL;
	struct stat st;

	if (stat(path, &st) < 0) {
		e = os_error(errno);
		error = cd_xasprintf("failed to inspect capability root %s: %s", root_uri, e);
		goto emit;
	}
	if (!S_ISDIR(st.st_mode)) {
		error = cd_xasprintf("capability root %s is not a directory", root_uri);
		goto emit;
	}
	q.path = cd_xstrdup(path);
	q.walk = (struct cd_fs_walk_opts){ MAX_DEPTH, MAX_DIRS, MAX_ENTRIES, true, false };
	cd_fs_do(&q, &r);
	struct cd_json_error jerr;
	if (r.code) {
		error = cd_xasprintf("failed to scan capability root %s: %s", root_uri,
				     r.out.buf ? r.out.buf : "error");
		goto emit;
	}
	if (cd_json_parse(r.out.buf, r.out.len, NULL, &walk, &jerr) < 0) {
		error = cd_xasprintf("failed to scan capability root %s: %s", root_uri, jerr.msg);
		goto emit;
	}
	const struct cd_json *errs = cd_json_get(walk, "errors");
	for (size_t i = 0; errs && i < errs->u.arr.n; i++) {
		const struct cd_json *p = cd_json_get(errs->u.arr.items[i], "path");
		const struct cd_json *m = cd_json_get(errs->u.arr.items[i], "message");
		warn(&s, "failed to scan capability path %s: %s", p->u.str.s, m->u.str.s);
	}
	const struct cd_json *trunc = cd_json_get(walk, "truncated");
	if (trunc && trunc->type == CD_JSON_TRUE)
		warn(&s, "capability scan reached its traversal limit (root: %s)", root_uri);
	const struct cd_json *ents = cd_json_get(walk, "entries");
	size_t n_ents = ents ? ents->u.arr.n : 0;
	sk = cd_xcalloc(n_ents + 1, sizeof(*sk));
	mf = cd_xcalloc(n_ents + 1, sizeof(*mf));
	for (size_t i = 0; i < n_ents; i++) {
		const struct cd_json *p = cd_json_get(ents->u.arr.items[i], "path");
		const struct cd_json *k = cd_json_get(ents->u.arr.items[i], "kind");
		char *fpath = NULL;
		if (!p || !k || strcmp(k->u.str.s, "file") ||
		    cd_pathuri_to_posix(p->u.str.s, p->u.str.len, &fpath, NULL) < 0) {
			free(fpath);
			continue;
		}
		if (!strcmp(base_of(fpath), "SKILL.md"))
			sk[n_sk++] = (struct found){ cd_xstrdup(fpath), cd_xstrdup(p->u.str.s), 0 };
		int prio = manifest_priority(fpath);
		if (prio >= 0) {
			char *pr = plugin_root_of(fpath);
			if (pr) {
				mf[n_mf++] = (struct found){ cd_xstrdup(fpath), uri_of(pr), prio };
				free(pr);
			}
		}
		free(fpath);
	}
	if (n_sk)
		qsort(sk, n_sk, sizeof(*sk), cmp_found);
	if (n_mf)
		qsort(mf, n_mf, sizeof(*mf), cmp_found);

	s.base_real = realpath(path, NULL);
	bool have_root = read_first_manifest(&s, path, &manifest) == 0;
	char *seen_root = NULL; /* the inherited manifest's plugin root, as a URI */
	if (have_root) {
		seen_root = root_uri ? cd_xstrdup(root_uri) : NULL;
		write_text(&namespaces, &manifest);
		n_ns++;
	} else {
		char *root_real = s.base_real;
		for (char *a = parent_of(path); a;) {
			s.base_real = realpath(a, NULL);
			int got = read_first_manifest(&s, a, &inherited);
			free(s.base_real);
			s.base_real = NULL;
			char *next = got == 0 ? NULL : parent_of(a);
			free(a);
			a = next;
			if (got == 0)
				break;
		}
		s.base_real = root_real;
		if (inherited.path) {
			char *pr = plugin_root_of(inherited.path);
			seen_root = pr ? uri_of(pr) : NULL;
			free(pr);
			write_text(&namespaces, &inherited);
			n_ns++;
		}
	}
	/* Sorted by plugin root: the duplicates of one root are next to each other. */
	const char *prev = seen_root;
	for (size_t i = 0; i < n_mf; i++) {
		if ((seen_root && !strcmp(mf[i].key, seen_root)) ||
		    (prev && !strcmp(mf[i].key, prev)))
			continue;
		prev = mf[i].key;
		struct text t = { 0 };
		if (read_text(&s, mf[i].path, &t) == 0) {
			if (n_ns++)
				cd_strbuf_append_c(&namespaces, ',');
			write_text(&namespaces, &t);
		}
		text_done(&t);
	}
	free(seen_root);

	if (have_root) {
		struct cd_json *decl = NULL;
		char *mcp = NULL, *apps = NULL;
		bool inline_mcp = false;
		if (cd_json_parse(manifest.data, manifest.len, NULL, &decl, &jerr) == 0 &&
		    decl->type == CD_JSON_OBJECT) {
			const struct cd_json *m = cd_json_get(decl, "mcpServers");
			const struct cd_json *a = cd_json_get(decl, "apps");
			mcp = declared_path(&s, "mcpServers", m, manifest.path);
			inline_mcp = m && m->type == CD_JSON_OBJECT;
			apps = declared_path(&s, "apps", a, manifest.path);
		}
		cd_json_free(decl);
		if (!mcp && !inline_mcp)
			mcp = join(path, ".mcp.json");
		struct text tm = { 0 }, ta = { 0 };
		if (mcp)
			(void)read_text(&s, mcp, &tm);
		if (apps)
			(void)read_text(&s, apps, &ta);
		cd_strbuf_append(&plugin, "{\"manifest\":");
		write_text(&plugin, &manifest);
		cd_strbuf_append(&plugin, ",\"mcpConfig\":");
		write_text(&plugin, &tm);
		cd_strbuf_append(&plugin, ",\"appsConfig\":");
		write_text(&plugin, &ta);
		cd_strbuf_append_c(&plugin, '}');
		text_done(&tm);
		text_done(&ta);
		free(mcp);
		free(apps);
	}

	for (size_t i = 0; i < n_sk; i++) {
		struct text ti = { 0 }, tmeta = { 0 };
		if (cd_fs_cancelled())
			break;
		if (read_text(&s, sk[i].path, &ti) < 0)
			continue;
		char *dir = parent_of(sk[i].path);
		char *meta = dir ? join(dir, "agents/openai.yaml") : NULL;
		if (meta)
			(void)read_text(&s, meta, &tmeta);
		if (n_skills++)
			cd_strbuf_append_c(&skills, ',');
		cd_strbuf_append(&skills, "{\"instructions\":");
		write_text(&skills, &ti);
		cd_strbuf_append(&skills, ",\"metadata\":");
		write_text(&skills, &tmeta);
		cd_strbuf_append_c(&skills, '}');
		text_done(&ti);
		text_done(&tmeta);
		free(dir);
		free(meta);
	}

emit:
	cd_strbuf_append(out, "{\"plugin\":");
	if (plugin.len)
		cd_strbuf_append_n(out, plugin.buf, plugin.len);
	else
		cd_strbuf_append(out, "null");
	cd_strbuf_append(out, ",\"skills\":[");
	if (skills.len)
		cd_strbuf_append_n(out, skills.buf, skills.len);
	cd_strbuf_append(out, "],\"namespaceManifests\":[");
	if (namespaces.len)
		cd_strbuf_append_n(out, namespaces.buf, namespaces.len);
	cd_strbuf_append(out, "],\"warnings\":[");
	if (s.warnings.len)
		cd_strbuf_append_n(out, s.warnings.buf, s.warnings.len);
	cd_strbuf_append(out, "],\"error\":");
	if (error)
		cd_strbuf_append_json_string(out, error, strlen(error));
	else
		cd_strbuf_append(out, "null");
	cd_strbuf_append_c(out, '}');

	cd_json_free(walk);
	cd_fs_req_done(&q);
	cd_strbuf_done(&r.out);
	found_free(sk, n_sk);
	found_free(mf, n_mf);
	text_done(&manifest);
	text_done(&inherited);
	cd_strbuf_done(&skills);
	cd_strbuf_done(&namespaces);
	cd_strbuf_done(&plugin);
	cd_strbuf_done(&s.warnings);
	free(s.base_real);
	free(root_uri);
	free(error);
	free(e);
}
