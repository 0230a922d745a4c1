/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "core/pathuri.h"
#include "core/plugincache.h"
#include "serve/discover-plugins.h"
#include "serve/fs-ops.h"
#include "shared/fd-util.h"

/* The binary's walk of the cache: marketplaces and their packages. */
#define WALK_DEPTH   1
#define WALK_DIRS    2000
#define WALK_ENTRIES 20000

static int cmp_plugin(const void *a, const void *b)
{
	const struct cd_discover_plugin *x = a, *y = b;
	return strcmp(x->id, y->id);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The active version of the package at dir: its directories (not symlinks)
 * with valid names. A package directory of more than WALK_ENTRIES entries
 * is not read to its end (the cache walk's own bound): NULL, *truncated.
 */
static char *active_version(const char *dir, bool *truncated)
{
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	char **v = NULL;
	size_t n = 0, cap = 0, seen = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (++seen > WALK_ENTRIES) {
			*truncated = true;
			break;
		}
		bool is_dir = e->d_type == DT_DIR;
		if (e->d_type == DT_UNKNOWN) {
			struct stat st;
			is_dir = fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISDIR(st.st_mode);
		}
		if (!is_dir || !cd_plugin_version_ok(e->d_name))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			v = cd_xreallocarray(v, cap, sizeof(*v));
		}
		v[n++] = cd_xstrdup(e->d_name);
	}
	closedir(d);
	/* Sorted first: the pick does not depend on the directory's order. */
	if (n)
		qsort(v, n, sizeof(*v), cmp_str);
	const char *best = *truncated ? NULL : cd_plugin_version_pick((const char *const *)v, n);
	char *ret = best ? cd_xstrdup(best) : NULL;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	return ret;
}

/*
 * The remote plugin id in the package at dir: 0 with *id (NULL when there
 * is no metadata file), -1 when it cannot be read as the binary reads it
 * (a warning), -2 with *why when cordon cannot tell (the request fails).
 * cordon's rule: a file whose real path leaves the package is not read.
 */
static int remote_id(const char *dir, const struct cd_discover_hidden *hidden, char **id,
		     const char **why)
{
	char *path = cd_path_join(dir, CD_PLUGIN_REMOTE_FILE), *real = NULL, *base = NULL;
	struct cd_strbuf b = { 0 };
	int r = -1, fd = -1;
	struct stat st;

	*id = NULL;
	fd = cd_open_regular(path, &st); /* a device there is never opened */
	if (fd < 0) {
		r = fd == -ENOENT ? 0 : -1;
		goto out;
	}
	if (cd_discover_hidden_has(hidden, &st))
		goto out;
	real = realpath(path, NULL);
	base = realpath(dir, NULL);
	size_t bn = base ? strlen(base) : 0;
	if (!real || !base || strncmp(real, base, bn) || real[bn] != '/')
		goto out;
	for (;;) {
		char buf[4096];
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			goto out;
		if (!k)
			break;
		cd_strbuf_append_n(&b, buf, (size_t)k);
		if (b.len > CD_PLUGIN_REMOTE_MAX)
			break;
	}
	int pr = cd_plugin_remote_id(b.buf ? b.buf : "", b.len, id, why);
	r = pr == CD_PLUGIN_OK ? 0 : pr == CD_PLUGIN_INVALID ? -1 : -2;
out:
	if (fd >= 0)
		close(fd);
	cd_strbuf_done(&b);
	free(path);
	free(real);
	free(base);
	return r;
}

int cd_discover_plugins_find(const char *cache, const struct cd_discover_hidden *hidden,
			     struct cd_discover_plugins *out, char **err)
{
	struct cd_fs_req q = { .op = CD_FS_WALK };
	struct cd_fs_res r = { .fd = -1 };
	struct cd_json *walk = NULL;
	struct cd_json_error je;
	struct stat st;
	size_t cap = 0, clen = strlen(cache);
	int ret = 0;

	memset(out, 0, sizeof(*out));
	*err = NULL;
	if (stat(cache, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		*err = cd_xasprintf("failed to inspect plugin cache %s: %s", cache,
				    strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	q.path = cd_xstrdup(cache);
	q.walk = (struct cd_fs_walk_opts){ WALK_DEPTH, WALK_DIRS, WALK_ENTRIES, true, false };
	cd_fs_do(&q, &r);
	if (r.code) {
		if (r.err != ENOENT) {
			*err = cd_xasprintf("failed to scan plugin cache %s: %s", cache,
					    r.out.buf ? r.out.buf : "error");
			ret = -1;
		}
		goto out;
	}
	if (cd_json_parse(r.out.buf, r.out.len, NULL, &walk, &je) < 0) {
		*err = cd_xasprintf("failed to scan plugin cache %s: %s", cache, je.msg);
		ret = -1;
		goto out;
	}
	const struct cd_json *errs = cd_json_get(walk, "errors");
	if (errs && errs->type == CD_JSON_ARRAY && errs->u.arr.n) {
		/* A partial inventory is not answered, as the binary's is not. */
		const struct cd_json *p = cd_json_get(errs->u.arr.items[0], "path");
		const struct cd_json *m = cd_json_get(errs->u.arr.items[0], "message");
		*err = cd_xasprintf("failed to scan plugin cache path %s: %s",
				    p && p->type == CD_JSON_STRING ? p->u.str.s : "?",
				    m && m->type == CD_JSON_STRING ? m->u.str.s : "error");
		ret = -1;
		goto out;
	}
	const struct cd_json *tr = cd_json_get(walk, "truncated");
	if (tr && tr->type == CD_JSON_TRUE)
		out->warned = true; /* "plugin cache traversal limit reached" */
	const struct cd_json *ents = cd_json_get(walk, "entries");
	for (size_t i = 0; ents && ents->type == CD_JSON_ARRAY && i < ents->u.arr.n; i++) {
		const struct cd_json *p = cd_json_get(ents->u.arr.items[i], "path");
		const struct cd_json *k = cd_json_get(ents->u.arr.items[i], "kind");
		char *path = NULL;
		if (!p || !k || p->type != CD_JSON_STRING || k->type != CD_JSON_STRING ||
		    strcmp(k->u.str.s, "directory") ||
		    cd_pathuri_to_posix(p->u.str.s, p->u.str.len, &path, NULL) < 0 ||
		    strncmp(path, cache, clen) || path[clen] != '/') {
			free(path);
			continue;
		}
		/* MARKETPLACE/NAME, both names the binary takes. */
		char *mkt = path + clen + 1, *name = strchr(mkt, '/');
		if (!name || strchr(name + 1, '/')) {
			free(path);
			continue;
		}
		*name++ = '\0';
		if (!cd_plugin_name_ok(mkt) || !cd_plugin_name_ok(name)) {
			free(path);
			continue;
		}
		char *id = cd_xasprintf("%s@%s", name, mkt);
		name[-1] = '/';
		if (out->n == cap) {
			cap = cap ? 2 * cap : 16;
			out->v = cd_xreallocarray(out->v, cap, sizeof(*out->v));
		}
		out->v[out->n++] = (struct cd_discover_plugin){ .id = id, .root = path };
	}
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), cmp_plugin);
	/* The active version of each; at most 512 (the location limit) are kept. */
	size_t kept = 0;
	for (size_t i = 0; i < out->n; i++) {
		struct cd_discover_plugin *pl = &out->v[i];
		bool truncated = false;
		char *ver = ret == 0 ? active_version(pl->root, &truncated) : NULL;
		if (truncated)
			out->warned = true; /* left out: "discovery may be incomplete" */
		if (ver && kept == CD_PLUGIN_MAX_LOCATIONS) {
			/* "plugin cache reached its 512-location limit" */
			out->warned = true;
			free(ver);
			ver = NULL;
			ret = 1;
		}
		if (!ver) {
			free(pl->id);
			free(pl->root);
			continue;
		}
		const char *why = NULL;
		char *rid = NULL;
		int rr = remote_id(pl->root, hidden, &rid, &why);
		if (rr == -2 && !*err)
			*err = cd_xasprintf("cordon cannot read the remote installation metadata "
					    "of %s: %s (refused rather than answered differently)",
					    pl->id, why);
		if (rr == -1)
			out->warned = true;
		char *root = cd_path_join(pl->root, ver);
		free(pl->root);
		out->v[kept++] = (struct cd_discover_plugin){
			.id = pl->id, .version = ver, .root = root, .remote_id = rid
		};
	}
	out->n = kept;
	ret = 0;
	if (*err) {
		cd_discover_plugins_done(out);
		ret = -1;
	}
out:
	cd_json_free(walk);
	cd_fs_req_done(&q);
	cd_strbuf_done(&r.out);
	return ret;
}

void cd_discover_plugins_done(struct cd_discover_plugins *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->v[i].id);
		free(p->v[i].version);
		free(p->v[i].root);
		free(p->v[i].remote_id);
	}
	free(p->v);
	memset(p, 0, sizeof(*p));
}
