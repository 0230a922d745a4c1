/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * In-memory file tree for unit tests (see fakefs.h). A flat list of nodes
 * keyed by their literal path is plenty for trees of a few dozen nodes; the
 * lookups walk component by component so symlinks behave as in the kernel.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "fakefs.h"

struct node {
	char *path;
	enum cd_file_type type;
	char *data; /* file contents or symlink target */
	size_t len;
	uint64_t holes; /* a sparse file: this many zero bytes follow data */
	bool locked;	/* a directory the caller may not create names in */
};

struct failure {
	char *path;
	int err;
};

struct cd_fakefs {
	struct cd_fs_ops ops;
	struct node *nodes;
	size_t n_nodes;
	struct failure *fails;
	size_t n_fails;
	unsigned calls;
	size_t bytes_read; /* by read_at */
	int open_files;	   /* open_file calls not closed yet */
};

static void die(const char *what, const char *path)
{
	fprintf(stderr, "fakefs: %s: %s\n", what, path);
	abort();
}

static struct node *find(struct cd_fakefs *fs, const char *path)
{
	for (size_t i = 0; i < fs->n_nodes; i++)
		if (cd_streq(fs->nodes[i].path, path))
			return &fs->nodes[i];
	return NULL;
}

static struct node *add(struct cd_fakefs *fs, const char *path, enum cd_file_type type)
{
	fs->nodes = cd_xreallocarray(fs->nodes, fs->n_nodes + 1, sizeof(*fs->nodes));
	struct node *n = &fs->nodes[fs->n_nodes++];
	*n = (struct node){ .path = cd_xstrdup(path), .type = type };
	return n;
}

/* Create the parent directories of path (literal, no symlink following). */
static void mkparents(struct cd_fakefs *fs, const char *path)
{
	if (path[0] != '/' || !cd_path_is_normal(path))
		die("not a normal absolute path", path);
	char *buf = cd_xstrdup(path);
	for (char *s = strchr(buf + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		struct node *n = find(fs, buf);
		if (!n)
			add(fs, buf, CD_FT_DIR);
		else if (n->type != CD_FT_DIR)
			die("parent is not a directory", buf);
		*s = '/';
	}
	free(buf);
}

static struct node *create(struct cd_fakefs *fs, const char *path, enum cd_file_type type)
{
	mkparents(fs, path);
	struct node *n = find(fs, path);
	if (n && n->type != type)
		die("exists with another type", path);
	return n ? n : add(fs, path, type);
}

struct cd_fakefs *cd_fakefs_new(void)
{
	struct cd_fakefs *fs = cd_xcalloc(1, sizeof(*fs));
	add(fs, "/", CD_FT_DIR);
	return fs;
}

struct cd_fakefs *cd_fakefs_free(struct cd_fakefs *fs)
{
	if (!fs)
		return NULL;
	for (size_t i = 0; i < fs->n_nodes; i++) {
		free(fs->nodes[i].path);
		free(fs->nodes[i].data);
	}
	for (size_t i = 0; i < fs->n_fails; i++)
		free(fs->fails[i].path);
	free(fs->nodes);
	free(fs->fails);
	free(fs);
	return NULL;
}

void cd_fakefs_dir(struct cd_fakefs *fs, const char *path)
{
	if (cd_streq(path, "/"))
		return;
	create(fs, path, CD_FT_DIR);
}

static void set_data(struct node *n, const char *s)
{
	free(n->data);
	n->len = s ? strlen(s) : 0;
	n->data = cd_xstrdup(s ? s : "");
}

void cd_fakefs_file(struct cd_fakefs *fs, const char *path, const char *contents)
{
	set_data(create(fs, path, CD_FT_REG), contents);
}

void cd_fakefs_file_bytes(struct cd_fakefs *fs, const char *path, const void *data, size_t len)
{
	struct node *n = create(fs, path, CD_FT_REG);
	free(n->data);
	n->data = cd_xmalloc(len + 1);
	memcpy(n->data, data, len);
	n->data[len] = '\0';
	n->len = len;
	n->holes = 0;
}

void cd_fakefs_file_sparse(struct cd_fakefs *fs, const char *path, const void *data, size_t len,
			   uint64_t size)
{
	if (size < len)
		die("sparse file shorter than its data", path);
	cd_fakefs_file_bytes(fs, path, data, len);
	struct node *n = find(fs, path);
	if (!n)
		die("sparse file not made", path);
	n->holes = size - len;
}

void cd_fakefs_symlink(struct cd_fakefs *fs, const char *path, const char *target)
{
	set_data(create(fs, path, CD_FT_SYMLINK), target);
}

void cd_fakefs_other(struct cd_fakefs *fs, const char *path)
{
	create(fs, path, CD_FT_OTHER);
}

void cd_fakefs_lock_dir(struct cd_fakefs *fs, const char *path)
{
	struct node *n = find(fs, path);
	if (!n || n->type != CD_FT_DIR)
		die("not a directory", path);
	n->locked = true;
}

void cd_fakefs_fail(struct cd_fakefs *fs, const char *path, int err)
{
	fs->fails = cd_xreallocarray(fs->fails, fs->n_fails + 1, sizeof(*fs->fails));
	fs->fails[fs->n_fails++] = (struct failure){ .path = cd_xstrdup(path), .err = err };
}

unsigned cd_fakefs_calls(const struct cd_fakefs *fs)
{
	return fs->calls;
}

size_t cd_fakefs_bytes_read(const struct cd_fakefs *fs)
{
	return fs->bytes_read;
}

int cd_fakefs_open_files(const struct cd_fakefs *fs)
{
	return fs->open_files;
}

static int injected(struct cd_fakefs *fs, const char *path)
{
	fs->calls++;
	for (size_t i = 0; i < fs->n_fails; i++)
		if (cd_streq(fs->fails[i].path, path))
			return -fs->fails[i].err;
	return 0;
}

/*
 * Walk path like the kernel's lookup: *ret is the node reached or NULL when
 * missing (ENOENT/ENOTDIR). The final symlink is followed only if follow.
 */
static int resolve(struct cd_fakefs *fs, const char *path, bool follow, struct node **ret)
{
	struct cd_strbuf cur = { 0 };
	char *rest = cd_xstrdup(path);
	const char *p = rest;
	unsigned links = 0;
	int r = 0;
	struct node *n = find(fs, "/");

	*ret = NULL;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		size_t len = strcspn(p, "/");
		const char *next = p + len;
		const char *q = next;
		while (*q == '/')
			q++;
		bool last = !*q;
		if (len == 1 && p[0] == '.') {
			p = next;
			continue;
		}
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			while (cur.len && cur.buf[cur.len - 1] != '/')
				cur.len--;
			if (cur.len)
				cur.len--;
			if (cur.buf)
				cur.buf[cur.len] = '\0';
			n = find(fs, cur.len ? cur.buf : "/");
			p = next;
			continue;
		}
		size_t old = cur.len;
		cd_strbuf_append_c(&cur, '/');
		cd_strbuf_append_n(&cur, p, len);
		n = find(fs, cur.buf);
		if (!n)
			goto out;
		if (n->type == CD_FT_SYMLINK && (!last || follow)) {
			if (++links > 40) {
				r = -ELOOP;
				goto out;
			}
			cur.len = n->data[0] == '/' ? 0 : old;
			cur.buf[cur.len] = '\0';
			char *nrest = cd_xasprintf("%s/%s", n->data, next);
			free(rest);
			rest = nrest;
			p = rest;
			n = find(fs, cur.len ? cur.buf : "/");
			continue;
		}
		if (!last && n->type != CD_FT_DIR) {
			n = NULL;
			goto out;
		}
		p = next;
	}
	*ret = n;
out:
	free(rest);
	cd_strbuf_done(&cur);
	return r;
}

static int fake_lstat_type(void *ctx, const char *path, enum cd_file_type *ret)
{
	struct cd_fakefs *fs = ctx;
	struct node *n;
	int r = injected(fs, path);
	if (r < 0)
		return r;
	r = resolve(fs, path, false, &n);
	if (r < 0)
		return r;
	*ret = n ? n->type : CD_FT_MISSING;
	return 0;
}

/* Injected failures first, then the lookup; a missing node is -ENOENT. */
static int lookup_existing(struct cd_fakefs *fs, const char *path, bool follow, struct node **ret)
{
	int r = injected(fs, path);
	if (r < 0)
		return r;
	r = resolve(fs, path, follow, ret);
	if (r < 0)
		return r;
	return *ret ? 0 : -ENOENT;
}

static int fake_readlink(void *ctx, const char *path, char **ret)
{
	struct cd_fakefs *fs = ctx;
	struct node *n;
	int r = lookup_existing(fs, path, false, &n);
	if (r < 0)
		return r;
	if (n->type != CD_FT_SYMLINK)
		return -EINVAL;
	*ret = cd_xstrdup(n->data);
	return 0;
}

static int fake_read_file(void *ctx, const char *path, size_t max, char **ret, size_t *ret_len)
{
	struct cd_fakefs *fs = ctx;
	struct node *n;
	int r = lookup_existing(fs, path, true, &n);
	if (r < 0)
		return r;
	if (n->type == CD_FT_DIR)
		return -EISDIR;
	if (n->type != CD_FT_REG)
		return -EINVAL;
	size_t len = n->len < max ? n->len : max;
	*ret = cd_xmalloc(len + 1);
	memcpy(*ret, n->data, len);
	(*ret)[len] = '\0';
	*ret_len = len;
	return 0;
}

/* The handle is the node; reads copy from its contents as they are then. */
static int fake_open_file(void *ctx, const char *path, void **ret_file, uint64_t *ret_size)
{
	struct cd_fakefs *fs = ctx;
	struct node *n;
	int r = lookup_existing(fs, path, true, &n);
	if (r < 0)
		return r;
	if (n->type == CD_FT_DIR)
		return -EISDIR;
	if (n->type != CD_FT_REG)
		return -EINVAL;
	*ret_file = n;
	*ret_size = n->len + n->holes;
	fs->open_files++;
	return 0;
}

static int fake_read_at(void *ctx, void *file, uint64_t off, void *buf, size_t len)
{
	struct cd_fakefs *fs = ctx;
	const struct node *n = file;
	fs->calls++;
	if (off > n->len + n->holes || len > n->len + n->holes - off)
		return -EIO;
	size_t in_data = off < n->len ? n->len - (size_t)off : 0;
	if (in_data > len)
		in_data = len;
	if (in_data)
		memcpy(buf, n->data + off, in_data);
	memset((char *)buf + in_data, 0, len - in_data);
	fs->bytes_read += len;
	return 0;
}

static void fake_close_file(void *ctx, void *file)
{
	struct cd_fakefs *fs = ctx;
	fs->open_files--;
}

static int fake_read_dir(void *ctx, const char *path,
			 int (*fn)(void *arg, const char *name, enum cd_file_type type), void *arg)
{
	struct cd_fakefs *fs = ctx;
	struct node *n;
	int r = lookup_existing(fs, path, true, &n);
	if (r < 0)
		return r;
	if (n->type != CD_FT_DIR)
		return -ENOTDIR;
	/* Copy the directory's path: fn must not see a node array being reused. */
	char *dir = cd_xstrdup(cd_streq(n->path, "/") ? "" : n->path);
	size_t dlen = strlen(dir);
	for (size_t i = 0; r >= 0 && i < fs->n_nodes; i++) {
		const char *c = fs->nodes[i].path;
		if (strncmp(c, dir, dlen) || c[dlen] != '/' || !c[dlen + 1] ||
		    strchr(c + dlen + 1, '/'))
			continue;
		r = fn(arg, c + dlen + 1, fs->nodes[i].type);
	}
	free(dir);
	return r < 0 ? r : 0;
}

/* Injected failures do not apply: they stand for a listing or a read refused. */
static int fake_may_create(void *ctx, const char *path, bool *ret)
{
	struct cd_fakefs *fs = ctx;
	struct node *n;
	fs->calls++;
	int r = resolve(fs, path, true, &n);
	if (r < 0)
		return r;
	if (!n)
		return -ENOENT;
	*ret = !n->locked;
	return 0;
}

const struct cd_fs_ops *cd_fakefs_ops(struct cd_fakefs *fs)
{
	fs->ops = (struct cd_fs_ops){
		.ctx = fs,
		.lstat_type = fake_lstat_type,
		.readlink = fake_readlink,
		.read_file = fake_read_file,
		.open_file = fake_open_file,
		.read_at = fake_read_at,
		.close_file = fake_close_file,
		.read_dir = fake_read_dir,
		.may_create = fake_may_create,
	};
	return &fs->ops;
}
