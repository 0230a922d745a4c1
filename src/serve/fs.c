/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fs/... methods (reference 2.10), with the released binary's messages,
 * codes and limits.
 *
 * Each request is decoded in the server, then performed either directly
 * or, when it carries a sandbox context that restricts the file system,
 * in a helper: a fork of the server made by cd_spawn with the plan of that
 * context (the same binding, Landlock rules, seccomp filter and mounts a
 * sandboxed process/start gets), which performs the operation and sends
 * back the result over a socket. Reads (fs/readFile, fs/open) only open
 * the file in the helper and pass the descriptor back (SCM_RIGHTS): the
 * server reads it outside, so sandboxed streaming works and a large read
 * is not copied through the socket.
 *
 * Errors: ENOENT is -32004, EACCES/EPERM/EINVAL -32600, other errnos
 * -32603, all as "<strerror> (os error N)".
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "serve/fs.h"
#include "serve/intent.h"
#include "serve/loop.h"
#include "serve/proc.h"
#include "serve/server.h"
#include "shared/fd-util.h"
#include "shared/log.h"
#include "spawn.h"

#define FS_MAX_READ_FILE    (512u * 1024 * 1024)
#define FS_BLOCK_MAX	    (1024u * 1024)
#define FS_MAX_HANDLES	    128
#define FS_MAX_HANDLE_ID    32
#define FS_MAX_DIR_ENTRIES  50000
#define WALK_MAX_DEPTH	    64
#define WALK_MAX_DIRS	    10000
#define WALK_MAX_ENTRIES    50000
#define WALK_MAX_BYTES	    (4u * 1024 * 1024)
#define WALK_ITEM_OVERHEAD  64
#define FS_HELPER_TIMEOUT_S 30
#define RPC_NOT_FOUND	    (-32004)
/* A multiple of 3: no slice but the last is padded (see reply_b64). */
#define B64_SLICE (3u * 16384)

enum fs_op {
	OP_READ_FILE,
	OP_OPEN,
	OP_WRITE_FILE,
	OP_MKDIR,
	OP_METADATA,
	OP_CANONICALIZE,
	OP_READ_DIR,
	OP_WALK,
	OP_REMOVE,
	OP_COPY,
};

struct walk_opts {
	uint64_t max_depth, max_dirs, max_entries;
	bool follow, prune_hidden;
};

struct fs_req {
	enum fs_op op;
	char *path, *dest;
	unsigned char *data;
	size_t data_len;
	bool recursive, force;
	bool sandboxed; /* performed in the helper */
	struct walk_opts walk;
};

struct fs_res {
	int code;	      /* 0 or a JSON-RPC error code */
	struct cd_strbuf out; /* the result's JSON text, or the error message */
	int fd;		      /* OP_READ_FILE, OP_OPEN: the opened file */
};

/*
 * A stream that reached EOF no longer counts against the 128 (its capacity
 * is released) but stays readable, as in the reference, where a client may
 * read an earlier block or a grown file after EOF. At most FS_MAX_HANDLES
 * such finished streams are kept; past that the one that finished first
 * is closed.
 */
struct cd_fs_handle {
	char id[FS_MAX_HANDLE_ID];
	size_t id_len;
	int fd;
	bool at_eof;
	uint64_t eof_order; /* when it reached EOF, for eviction */
};

static uint64_t eof_clock;

/* ---- results ------------------------------------------------------------ */

static int errno_code(int e)
{
	if (e == ENOENT)
		return RPC_NOT_FOUND;
	if (e == EACCES || e == EPERM || e == EINVAL)
		return CD_RPC_INVALID_REQUEST;
	return CD_RPC_INTERNAL;
}

static void res_errno(struct fs_res *r, int e)
{
	r->code = errno_code(e);
	r->out.len = 0;
	cd_strbuf_printf(&r->out, "%s (os error %d)", strerror(e), e);
}

static void res_error(struct fs_res *r, int code, const char *fmt, ...) CD_PRINTF(3, 4);
static void res_error(struct fs_res *r, int code, const char *fmt, ...)
{
	va_list ap;
	r->code = code;
	r->out.len = 0;
	va_start(ap, fmt);
	char *s = cd_xvasprintf(fmt, ap);
	va_end(ap);
	cd_strbuf_append(&r->out, s);
	free(s);
}

static const char *bool_str(bool b)
{
	return b ? "true" : "false";
}

/* ---- the operations (in the server, or in the helper) -------------------- */

/* A regular file opened for reading; FIFOs and devices refused without blocking. */
static void op_open_regular(const struct fs_req *q, struct fs_res *r)
{
	int fd = open(q->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		res_errno(r, errno);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		res_errno(r, errno);
		close(fd);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		res_error(r, CD_RPC_INVALID_REQUEST, "path `%s` is not a file", q->path);
		return;
	}
	r->fd = fd;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * A file opened for writing from scratch. Never blocks: a FIFO without a
 * reader fails (ENXIO) and anything but a regular file is refused
 * (EINVAL, "not a file"), so a FIFO planted by a sandboxed process cannot
 * hang the server. In a sandbox, a file with other hard links may be one
 * whose other name lies outside the allowed roots: then a new file is
 * made beside it (random name) and renamed over its real path when
 * finished (target_commit), so the other names keep the old contents. The
 * decision is taken on the opened descriptor, not on a name that could
 * change under us.
 */
struct target {
	int fd;
	char *tmp;  /* the new file, or NULL when writing in place */
	char *real; /* where tmp goes */
};

static int target_open(const char *path, mode_t mode, bool sandboxed, struct target *t)
{
	struct stat st;
	*t = (struct target){ .fd = -1 };
	int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = errno;
		close(fd);
		return S_ISREG(st.st_mode) ? -e : -EINVAL;
	}
	if (!sandboxed || st.st_nlink <= 1) {
		if (ftruncate(fd, 0) < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		t->fd = fd;
		return 0;
	}
	close(fd);
	t->real = realpath(path, NULL);
	if (!t->real)
		return -errno;
	t->tmp = cd_xasprintf("%s.cordon-XXXXXX", t->real);
	t->fd = mkostemp(t->tmp, O_CLOEXEC);
	if (t->fd < 0 || fchmod(t->fd, st.st_mode & 0777) < 0) {
		int e = errno;
		if (t->fd >= 0) {
			close(t->fd);
			(void)unlink(t->tmp);
		}
		free(t->tmp);
		free(t->real);
		*t = (struct target){ .fd = -1 };
		return -e;
	}
	return 0;
}

/* Close the target; with r == 0 put a new file in place. Returns r or the first error. */
static int target_commit(struct target *t, int r)
{
	if (close(t->fd) < 0 && r == 0)
		r = -errno;
	if (t->tmp) {
		if (r == 0 && rename(t->tmp, t->real) < 0)
			r = -errno;
		if (r < 0)
			(void)unlink(t->tmp);
		free(t->tmp);
		free(t->real);
	}
	*t = (struct target){ .fd = -1 };
	return r;
}

static void op_write_file(const struct fs_req *q, struct fs_res *r)
{
	struct target t;
	int e = target_open(q->path, 0666, q->sandboxed, &t);
	if (e == -EINVAL) {
		res_error(r, CD_RPC_INVALID_REQUEST, "path `%s` is not a file", q->path);
		return;
	}
	if (e == 0)
		e = target_commit(&t, write_all(t.fd, q->data, q->data_len));
	if (e)
		res_errno(r, -e);
	else
		cd_strbuf_append(&r->out, "{}");
}

static int mkdir_p(const char *path)
{
	char *p = cd_xstrdup(path);
	int r = 0;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0777) < 0 && errno != EEXIST) {
			r = -errno;
			break;
		}
		if (!c) {
			struct stat st;
			if (stat(p, &st) < 0)
				r = -errno;
			else if (!S_ISDIR(st.st_mode))
				r = -EEXIST;
			break;
		}
		*s = c;
	}
	free(p);
	return r;
}

static void op_mkdir(const struct fs_req *q, struct fs_res *r)
{
	int e = q->recursive ? -mkdir_p(q->path) : (mkdir(q->path, 0777) < 0 ? errno : 0);
	if (e)
		res_errno(r, e);
	else
		cd_strbuf_append(&r->out, "{}");
}

static int64_t ms_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

/*
 * Landlock does not govern stat() or path resolution: in the helper, a
 * path's metadata or canonical form is only given out when the sandbox may
 * read it. A regular file or a directory must open for reading; anything
 * else (never opened: a device may act on open) needs its directory to
 * list. Returns 0 or an errno.
 */
static int sandbox_may_read(const char *path, const struct stat *st)
{
	int fd;
	char *real = realpath(path, NULL);
	if (!real)
		return errno;
	path = real;
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) {
		fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
					(S_ISDIR(st->st_mode) ? O_DIRECTORY : 0));
	} else {
		const char *slash = strrchr(path, '/');
		char *dir = !slash || slash == path ? cd_xstrdup("/")
						    : cd_xstrndup(path, (size_t)(slash - path));
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		free(dir);
	}
	int e = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	free(real);
	return e;
}

static void op_metadata(const struct fs_req *q, struct fs_res *r)
{
	struct stat st, lst;
	int e;
	if (stat(q->path, &st) < 0) {
		res_errno(r, errno);
		return;
	}
	if (q->sandboxed && (e = sandbox_may_read(q->path, &st))) {
		res_errno(r, e);
		return;
	}
	bool is_link = lstat(q->path, &lst) == 0 && S_ISLNK(lst.st_mode);
	int64_t created = 0;
#ifdef STATX_BTIME
	struct statx sx;
	if (statx(AT_FDCWD, q->path, 0, STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME))
		created = (int64_t)sx.stx_btime.tv_sec * 1000 + sx.stx_btime.tv_nsec / 1000000;
#endif
	cd_strbuf_printf(&r->out,
			 "{\"isDirectory\":%s,\"isFile\":%s,\"isSymlink\":%s,\"size\":%llu,"
			 "\"createdAtMs\":%lld,\"modifiedAtMs\":%lld}",
			 bool_str(S_ISDIR(st.st_mode)), bool_str(S_ISREG(st.st_mode)),
			 bool_str(is_link), (unsigned long long)st.st_size, (long long)created,
			 (long long)ms_of(&st.st_mtim));
}

static void op_canonicalize(const struct fs_req *q, struct fs_res *r)
{
	char *real = realpath(q->path, NULL);
	if (!real) {
		res_errno(r, errno);
		return;
	}
	struct stat st;
	int e = 0;
	if (q->sandboxed &&
	    (stat(real, &st) < 0 ? (e = errno) : (e = sandbox_may_read(real, &st)))) {
		free(real);
		res_errno(r, e);
		return;
	}
	cd_strbuf_append(&r->out, "{\"path\":");
	cd_json_write_path_uri(&r->out, real);
	cd_strbuf_append_c(&r->out, '}');
	free(real);
}

static bool dot_or_dotdot(const char *n)
{
	return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2]));
}

static void op_read_dir(const struct fs_req *q, struct fs_res *r)
{
	DIR *d = opendir(q->path);
	if (!d) {
		res_errno(r, errno);
		return;
	}
	size_t n = 0;
	cd_strbuf_append(&r->out, "{\"entries\":[");
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno) {
				res_errno(r, errno);
				closedir(d);
				return;
			}
			break;
		}
		if (dot_or_dotdot(de->d_name))
			continue;
		struct stat st;
		/* Follows symlinks; an entry that cannot be stat'ed is skipped. */
		if (fstatat(dirfd(d), de->d_name, &st, 0) < 0)
			continue;
		if (++n > FS_MAX_DIR_ENTRIES) {
			closedir(d);
			res_error(r, CD_RPC_INTERNAL,
				  "fs/readDirectory returned %zu entries; limit is %d", n,
				  FS_MAX_DIR_ENTRIES);
			return;
		}
		if (n > 1)
			cd_strbuf_append_c(&r->out, ',');
		cd_strbuf_append(&r->out, "{\"fileName\":");
		cd_json_write_cstr(&r->out, de->d_name);
		cd_strbuf_printf(&r->out, ",\"isDirectory\":%s,\"isFile\":%s}",
				 bool_str(S_ISDIR(st.st_mode)), bool_str(S_ISREG(st.st_mode)));
	}
	closedir(d);
	cd_strbuf_append(&r->out, "]}");
}

/* ---- fs/walk ---- */

struct dir_id {
	dev_t dev;
	ino_t ino;
};

struct walk_dir {
	char *path;
	uint64_t depth;
};

struct walk_state {
	const struct walk_opts *o;
	struct dir_id *seen;
	size_t n_seen, cap_seen; /* open addressing, cap a power of two */
	struct walk_dir *queue;
	size_t n_queue;
	struct cd_strbuf entries, errors;
	size_t n_entries, n_errors, bytes;
	bool truncated;
};

static size_t id_hash(struct dir_id id, size_t cap)
{
	uint64_t h = (uint64_t)id.ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)id.dev;
	return (size_t)(h ^ h >> 29) & (cap - 1);
}

/* Insert; false when it was there already. */
static bool seen_add(struct walk_state *w, dev_t dev, ino_t ino)
{
	struct dir_id id = { dev, ino };
	if ((w->n_seen + 1) * 2 > w->cap_seen) {
		size_t cap = w->cap_seen ? w->cap_seen * 2 : 64;
		struct dir_id *t = cd_xcalloc(cap, sizeof(*t));
		for (size_t i = 0; i < w->cap_seen; i++) {
			if (!w->seen[i].ino && !w->seen[i].dev)
				continue;
			size_t k = id_hash(w->seen[i], cap);
			while (t[k].ino || t[k].dev)
				k = (k + 1) & (cap - 1);
			t[k] = w->seen[i];
		}
		free(w->seen);
		w->seen = t;
		w->cap_seen = cap;
	}
	size_t k = id_hash(id, w->cap_seen);
	for (; w->seen[k].ino || w->seen[k].dev; k = (k + 1) & (w->cap_seen - 1))
		if (w->seen[k].ino == ino && w->seen[k].dev == dev)
			return false;
	w->seen[k] = id;
	w->n_seen++;
	return true;
}

/* Room for one more item of this size; sets truncated when there is none. */
static bool walk_room(struct walk_state *w, size_t item)
{
	if (w->n_entries >= w->o->max_entries ||
	    w->bytes + item + WALK_ITEM_OVERHEAD > WALK_MAX_BYTES) {
		w->truncated = true;
		return false;
	}
	w->bytes += item + WALK_ITEM_OVERHEAD;
	return true;
}

static bool walk_add(struct walk_state *w, const char *path, bool dir)
{
	char *uri = cd_pathuri_format_posix(path, strlen(path));
	bool ok = walk_room(w, strlen(uri));
	if (ok) {
		if (w->n_entries++)
			cd_strbuf_append_c(&w->entries, ',');
		cd_strbuf_append(&w->entries, "{\"path\":");
		cd_json_write_cstr(&w->entries, uri);
		cd_strbuf_printf(&w->entries, ",\"kind\":\"%s\"}", dir ? "directory" : "file");
	}
	free(uri);
	return ok;
}

static void walk_error(struct walk_state *w, const char *path, int e)
{
	char *uri = cd_pathuri_format_posix(path, strlen(path));
	char *msg = cd_xasprintf("%s (os error %d)", strerror(e), e);
	if (w->bytes + strlen(uri) + strlen(msg) + WALK_ITEM_OVERHEAD > WALK_MAX_BYTES) {
		w->truncated = true;
	} else {
		w->bytes += strlen(uri) + strlen(msg) + WALK_ITEM_OVERHEAD;
		if (w->n_errors++)
			cd_strbuf_append_c(&w->errors, ',');
		cd_strbuf_append(&w->errors, "{\"path\":");
		cd_json_write_cstr(&w->errors, uri);
		cd_strbuf_append(&w->errors, ",\"message\":");
		cd_json_write_cstr(&w->errors, msg);
		cd_strbuf_append_c(&w->errors, '}');
	}
	free(uri);
	free(msg);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of a directory, or -errno. */
static int list_sorted(const char *path, char ***ret, size_t *n)
{
	DIR *d = opendir(path);
	*ret = NULL;
	*n = 0;
	if (!d)
		return -errno;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			int e = errno;
			closedir(d);
			if (e) {
				cd_strv_free(*ret);
				*ret = NULL;
				return -e;
			}
			break;
		}
		if (dot_or_dotdot(de->d_name))
			continue;
		cd_strv_push(ret, de->d_name);
		(*n)++;
	}
	if (*n)
		qsort(*ret, *n, sizeof(**ret), cmp_name);
	return 0;
}

static void op_walk(const struct fs_req *q, struct fs_res *r)
{
	struct walk_state w = { .o = &q->walk };
	struct stat st;

	if (lstat(q->path, &st) < 0) {
		res_errno(r, errno);
		return;
	}
	/* A symlinked root is followed when following is asked for. */
	if (S_ISLNK(st.st_mode) && q->walk.follow && stat(q->path, &st) < 0)
		st.st_mode = 0;
	if (S_ISDIR(st.st_mode)) {
		seen_add(&w, st.st_dev, st.st_ino);
		w.queue = cd_xcalloc(1, sizeof(*w.queue));
		w.queue[w.n_queue++] = (struct walk_dir){ cd_xstrdup(q->path), 0 };
	}
	uint64_t listed = 0;
	for (size_t i = 0; i < w.n_queue && !w.truncated; i++) {
		struct walk_dir cur = w.queue[i];
		if (listed >= q->walk.max_dirs) {
			w.truncated = true;
			break;
		}
		listed++;
		char **names;
		size_t n;
		int e = -list_sorted(cur.path, &names, &n);
		if (e && i == 0) {
			res_errno(r, e);
			goto out;
		}
		if (e)
			walk_error(&w, cur.path, e);
		for (size_t k = 0; k < n && !w.truncated; k++) {
			char *child = cd_path_join(cur.path, names[k]);
			struct stat cst;
			bool dir = false, descend = false;
			if (lstat(child, &cst) < 0) {
				walk_error(&w, child, errno);
			} else if (S_ISLNK(cst.st_mode)) {
				struct stat tst;
				if (q->walk.follow && stat(child, &tst) == 0 &&
				    S_ISDIR(tst.st_mode)) {
					dir = true;
					descend = seen_add(&w, tst.st_dev, tst.st_ino);
				} else {
					free(child);
					continue; /* skipped, as the reference does */
				}
			} else if (S_ISDIR(cst.st_mode)) {
				dir = true;
				descend = seen_add(&w, cst.st_dev, cst.st_ino);
			} else if (!S_ISREG(cst.st_mode)) {
				free(child);
				continue; /* neither a file nor a directory */
			}
			if (!walk_add(&w, child, dir) || !dir || !descend ||
			    cur.depth >= q->walk.max_depth ||
			    (q->walk.prune_hidden && names[k][0] == '.')) {
				free(child);
				continue;
			}
			w.queue = cd_xreallocarray(w.queue, w.n_queue + 1, sizeof(*w.queue));
			w.queue[w.n_queue++] = (struct walk_dir){ child, cur.depth + 1 };
		}
		cd_strv_free(names);
	}
	cd_strbuf_append(&r->out, "{\"entries\":[");
	if (w.entries.len)
		cd_strbuf_append_n(&r->out, w.entries.buf, w.entries.len);
	cd_strbuf_append(&r->out, "],\"errors\":[");
	if (w.errors.len)
		cd_strbuf_append_n(&r->out, w.errors.buf, w.errors.len);
	cd_strbuf_printf(&r->out, "],\"truncated\":%s}", bool_str(w.truncated));
out:
	for (size_t i = 0; i < w.n_queue; i++)
		free(w.queue[i].path);
	free(w.queue);
	free(w.seen);
	cd_strbuf_done(&w.entries);
	cd_strbuf_done(&w.errors);
}

/* ---- fs/remove ---- */

/* Remove name in dirfd and everything below it, never following a symlink. */
static int remove_tree(int at, const char *name, unsigned depth)
{
	struct stat st;
	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (depth > 4096)
		return -ELOOP;
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	int r = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno)
				r = -errno;
			break;
		}
		if (dot_or_dotdot(de->d_name))
			continue;
		r = remove_tree(dirfd(d), de->d_name, depth + 1);
		if (r < 0)
			break;
	}
	closedir(d);
	if (r == 0 && unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r;
}

static void op_remove(const struct fs_req *q, struct fs_res *r)
{
	struct stat st;
	int e = 0;
	/* Decided on lstat: a symlink is removed itself, never what it points to. */
	if (lstat(q->path, &st) < 0) {
		e = errno;
		if (e == ENOENT && q->force)
			e = 0;
	} else if (!S_ISDIR(st.st_mode)) {
		e = unlink(q->path) < 0 ? errno : 0;
	} else if (!q->recursive) {
		e = rmdir(q->path) < 0 ? errno : 0;
	} else {
		e = -remove_tree(AT_FDCWD, q->path, 0);
	}
	if (e)
		res_errno(r, e);
	else
		cd_strbuf_append(&r->out, "{}");
}

/* ---- fs/copy ---- */

static int copy_symlink(const char *src, const char *dst)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(src, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return symlink(buf, dst) < 0 ? -errno : 0;
}

static int copy_regular(const char *src, const char *dst, mode_t mode, bool sandboxed)
{
	int in = open(src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return -errno;
	struct target t;
	int r = target_open(dst, mode & 0777, sandboxed, &t);
	if (r < 0) {
		close(in);
		return r;
	}
	int out = t.fd;
	static unsigned char buf[128 * 1024];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		r = write_all(out, buf, (size_t)n);
		if (r < 0)
			break;
	}
	close(in);
	return target_commit(&t, r);
}

static int copy_tree(const char *src, const char *dst, unsigned depth, bool sandboxed)
{
	struct stat st;
	if (lstat(src, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return copy_symlink(src, dst);
	if (S_ISREG(st.st_mode))
		return copy_regular(src, dst, st.st_mode, sandboxed);
	if (!S_ISDIR(st.st_mode))
		return 0; /* special files are skipped inside a recursive copy */
	if (depth > 4096)
		return -ELOOP;
	if (mkdir(dst, st.st_mode & 07777) < 0 && errno != EEXIST)
		return -errno;
	char **names;
	size_t n;
	int r = list_sorted(src, &names, &n);
	for (size_t i = 0; r == 0 && i < n; i++) {
		char *s = cd_path_join(src, names[i]);
		char *d = cd_path_join(dst, names[i]);
		r = copy_tree(s, d, depth + 1, sandboxed);
		free(s);
		free(d);
	}
	cd_strv_free(names);
	return r;
}

/* Canonical form of a path that may not exist yet: its parent's, plus the name. */
static char *canonical_maybe_missing(const char *path)
{
	char *real = realpath(path, NULL);
	if (real)
		return real;
	const char *slash = strrchr(path, '/');
	if (!slash)
		return NULL;
	char *parent = slash == path ? cd_xstrdup("/") : cd_xstrndup(path, (size_t)(slash - path));
	char *preal = canonical_maybe_missing(parent);
	free(parent);
	if (!preal)
		return NULL;
	char *r = cd_path_join(preal, slash + 1);
	free(preal);
	return r;
}

static void op_copy(const struct fs_req *q, struct fs_res *r)
{
	struct stat st;
	int e;
	if (lstat(q->path, &st) < 0) {
		res_errno(r, errno);
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!q->recursive) {
			res_error(
				r, CD_RPC_INVALID_REQUEST,
				"fs/copy requires recursive: true when sourcePath is a directory");
			return;
		}
		char *s = realpath(q->path, NULL);
		char *d = canonical_maybe_missing(q->dest);
		bool inside = s && d && (cd_streq(s, d) || cd_path_is_beneath(d, s));
		free(s);
		free(d);
		if (inside) {
			res_error(r, CD_RPC_INVALID_REQUEST,
				  "fs/copy cannot copy a directory to itself or one of its "
				  "descendants");
			return;
		}
		e = -copy_tree(q->path, q->dest, 0, q->sandboxed);
	} else if (S_ISLNK(st.st_mode)) {
		e = -copy_symlink(q->path, q->dest);
	} else if (S_ISREG(st.st_mode)) {
		e = -copy_regular(q->path, q->dest, st.st_mode, q->sandboxed);
	} else {
		res_error(r, CD_RPC_INVALID_REQUEST,
			  "fs/copy only supports regular files, directories, and symlinks");
		return;
	}
	if (e)
		res_errno(r, e);
	else
		cd_strbuf_append(&r->out, "{}");
}

static void (*const fs_ops[])(const struct fs_req *q, struct fs_res *r) = {
	[OP_READ_FILE] = op_open_regular, [OP_OPEN] = op_open_regular,
	[OP_WRITE_FILE] = op_write_file,  [OP_MKDIR] = op_mkdir,
	[OP_METADATA] = op_metadata,	  [OP_CANONICALIZE] = op_canonicalize,
	[OP_READ_DIR] = op_read_dir,	  [OP_WALK] = op_walk,
	[OP_REMOVE] = op_remove,	  [OP_COPY] = op_copy,
};

static void fs_do(const struct fs_req *q, struct fs_res *r)
{
	fs_ops[q->op](q, r);
}

/* ---- the sandboxed helper ------------------------------------------------ */

struct helper_hdr {
	int32_t code;
	uint32_t has_fd;
	uint64_t len;
};

/* In the child: perform the request (arg), then send the header (with the fd) and the payload. */
static int helper_main(void *arg)
{
	struct fs_res r = { .fd = -1 };
	fs_do(arg, &r);
	struct helper_hdr hdr = { .code = r.code, .has_fd = r.fd >= 0, .len = r.out.len };
	if (cd_send_fd(STDOUT_FILENO, &hdr, sizeof(hdr), r.fd) < 0)
		return 3;
	if (r.out.len && write_all(STDOUT_FILENO, (const unsigned char *)r.out.buf, r.out.len) < 0)
		return 3;
	return 0;
}

static int read_full(int fd, void *buf, size_t n)
{
	unsigned char *p = buf;
	while (n) {
		ssize_t k = read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EPIPE;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void run_in_helper(const struct cd_linux_plan *lp, const struct fs_req *q, struct fs_res *r)
{
	int sv[2] = { -1, -1 };
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		res_error(r, CD_RPC_INTERNAL, "fs sandbox helper: %s", strerror(errno));
		if (devnull >= 0)
			close(devnull);
		return;
	}
	static char *const helper_argv[] = { (char *)"cordon-fs-helper", NULL };
	static char *const no_env[] = { NULL };
	struct cd_spawn_opts o = {
		.argv = helper_argv,
		.envp = no_env,
		.stdin_fd = devnull,
		.stdout_fd = sv[1],
		.stderr_fd = -1,
		.lp = lp,
		.run = helper_main,
		.run_arg = (void *)q,
	};
	struct cd_child *child = NULL;
	struct cd_spawn_error err;
	memset(&err, 0, sizeof(err));
	int rr = cd_spawn(&o, &child, &err);
	close(sv[1]);
	close(devnull);
	if (rr < 0) {
		close(sv[0]);
		/* The sandbox could not be set up: nothing was done. */
		res_error(r, CD_RPC_INTERNAL, "fs sandbox helper failed: %s", err.msg);
		return;
	}
	/*
	 * The server waits for the helper (fs operations are synchronous), but
	 * not forever: a file lease or a stuck file system must not freeze it.
	 */
	struct timeval tv = { .tv_sec = FS_HELPER_TIMEOUT_S };
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct helper_hdr hdr;
	int fd, flags = 0;
	ssize_t n = cd_recv_fd(sv[0], &hdr, sizeof(hdr), MSG_WAITALL, &fd, &flags);
	bool timed_out = n == -EAGAIN || n == -EWOULDBLOCK;
	bool ok = n == (ssize_t)sizeof(hdr) && !(flags & MSG_CTRUNC) &&
		  (hdr.has_fd != 0) == (fd >= 0) && hdr.len < (64u << 20);
	if (ok) {
		r->code = hdr.code;
		r->out.len = 0;
		if (hdr.len) {
			char *buf = cd_xmalloc(hdr.len);
			int e = read_full(sv[0], buf, hdr.len);
			ok = e == 0;
			timed_out = e == -EAGAIN || e == -EWOULDBLOCK;
			if (ok)
				cd_strbuf_append_n(&r->out, buf, hdr.len);
			free(buf);
		}
		r->fd = fd;
	}
	close(sv[0]);
	if (timed_out)
		(void)kill(cd_child_pid(child), SIGKILL);
	int status = cd_child_wait(child);
	cd_child_free(child);
	if (!ok || status != 0) {
		if (fd >= 0)
			close(fd);
		r->fd = -1;
		if (timed_out)
			res_error(r, CD_RPC_INTERNAL, "fs sandbox helper timed out after %d s",
				  FS_HELPER_TIMEOUT_S);
		else
			res_error(r, CD_RPC_INTERNAL, "fs sandbox helper failed with status %d",
				  status);
	}
}

/* ---- request decoding ---------------------------------------------------- */

static int get_path(const struct cd_json *params, const char *key, char **ret, char **err)
{
	const struct cd_json *v;
	if (cd_param_string(params, key, key, true, false, &v, err) < 0)
		return -EINVAL;
	const char *why = NULL;
	if (cd_pathuri_to_posix(v->u.str.s, v->u.str.len, ret, &why) < 0) {
		*err = cd_xasprintf("invalid URI for `%s`: %s", key, why ? why : "not a file URI");
		return -EINVAL;
	}
	return 0;
}

static int get_u64_required(const struct cd_json *obj, const char *key, const char *field,
			    uint64_t *ret, char **err)
{
	const struct cd_json *v = cd_json_get(obj, key);
	if (!v) {
		*err = cd_param_missing(field);
		return -EINVAL;
	}
	if (v->type != CD_JSON_NUMBER || cd_json_uint64(v, ret) < 0) {
		*err = cd_param_invalid(v, "u64", field);
		return -EINVAL;
	}
	return 0;
}

/*
 * Bind params.sandbox when present. *ret_lp stays NULL when the operation
 * runs directly: no context, or one that does not restrict the file system
 * (reference: only restricted profiles without full-disk write use the
 * helper). -1 after replying with the error.
 */
static int bind_sandbox(struct cd_conn *c, const char *id, const struct cd_json *params,
			struct cd_cli_bound *b, const struct cd_linux_plan **ret_lp)
{
	const struct cd_json *sandbox = cd_json_get(params, "sandbox");
	char *err = NULL;
	*ret_lp = NULL;
	if (!sandbox || sandbox->type == CD_JSON_NULL)
		return 0;
	/* No params cwd: the server's own, for permissions that need none. */
	struct cd_server *s = c->server;
	int rr = cd_intent_bind(sandbox, NULL, false, &s->host, &s->opts.lopts, b, &err);
	if (rr < 0) {
		cd_conn_error(c, id,
			      rr == -EDESTADDRREQ ? CD_RPC_INVALID_REQUEST : CD_RPC_INVALID_PARAMS,
			      err);
		free(err);
		return -1;
	}
	const struct cd_linux_plan *lp = b->lp;
	if (lp && lp->sandboxed && !lp->plan->fs_unrestricted &&
	    lp->plan->type == CD_PROFILE_MANAGED)
		*ret_lp = lp;
	return 0;
}

static void reply_res(struct cd_conn *c, const char *id, struct fs_res *r)
{
	if (r->code)
		cd_conn_error(c, id, r->code, r->out.buf ? r->out.buf : "error");
	else
		cd_conn_result(c, id, r->out.buf ? r->out.buf : "{}", r->out.buf ? r->out.len : 2);
}

/* Perform q directly or in the helper. */
static void perform(struct cd_conn *c, const struct cd_linux_plan *lp, struct fs_req *q,
		    struct fs_res *r)
{
	q->sandboxed = lp != NULL;
	if (lp)
		run_in_helper(lp, q, r);
	else
		fs_do(q, r);
}

/* The whole of a regular file, base64'd into {"dataBase64":...}. */
/*
 * A result {"KEY":"<base64>"TAIL} written straight into the outbound queue:
 * data is encoded in place, so a large payload is not copied through
 * intermediate buffers. It goes out as it is encoded, in slices of
 * B64_SLICE bytes (64 KiB of base64), one write each (cd_conn_out_push),
 * between(c) (if not NULL) called between two: streaming a file went from 2,300 to 2,600
 * MB/s here with the next block read ahead there. Slices of 36 or 72 KiB
 * were slightly slower, 96 KiB and more clearly so.
 */
static void reply_b64(struct cd_conn *c, const char *id, const char *key, const unsigned char *data,
		      size_t n, const char *tail, void (*between)(struct cd_conn *c))
{
	size_t idlen = strlen(id), klen = strlen(key), tlen = strlen(tail);
	size_t k = n < B64_SLICE ? n : B64_SLICE;
	char *w = cd_conn_out_reserve(c, idlen + klen + cd_base64_encoded_len(k) + tlen + 32);
	char *p = w;
	p += sprintf(p, "{\"id\":%s,\"result\":{\"%s\":\"", id, key);
	for (size_t done = 0;;) {
		cd_base64_encode(data + done, k, p);
		p += cd_base64_encoded_len(k);
		done += k;
		if (done == n)
			break;
		cd_conn_out_commit(c, (size_t)(p - w));
		cd_conn_out_push(c);
		if (between)
			between(c);
		k = n - done < B64_SLICE ? n - done : B64_SLICE;
		p = w = cd_conn_out_reserve(c, cd_base64_encoded_len(k) + tlen + 4);
	}
	memcpy(p, tail, tlen);
	p += tlen;
	memcpy(p, "}}\n", 3);
	p += 3;
	cd_conn_out_commit(c, (size_t)(p - w));
	cd_conn_kick(c);
}

/*
 * An answer of many MiB is encoded into fresh memory: the queue is freed
 * once a large answer is sent (conn.c), so every big fs/readFile faults its
 * whole answer in again, one 4 KiB page at a time, and those faults took a
 * third of the server's time, more than reading and encoding. Transparent
 * huge pages on the 2 MiB-aligned part of it (a hint: nothing changes where
 * THP is off) made fs/readFile of 100 MiB 1.7x faster here. Prefaulting it
 * all (MADV_POPULATE_WRITE) on top gained nothing more.
 */
#define HUGE_PAGE (2u * 1024 * 1024)
static void advise_huge(char *p, size_t n)
{
	uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
	uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)(HUGE_PAGE - 1);
	if (n >= 4 * HUGE_PAGE && e > a)
		(void)madvise((void *)a, e - a, MADV_HUGEPAGE);
}

/*
 * fs/readFile's answer from the opened file; false with r set on an error
 * (nothing sent then). The file is read in blocks of a multiple of 3 bytes,
 * each encoded straight into the outbound queue: no copy of the whole file
 * is made besides its encoding.
 */
static bool reply_read_file(struct cd_conn *c, const char *id, int fd, struct fs_res *r)
{
	static unsigned char buf[3 * 349525]; /* just under 1 MiB */
	static const char key[] = "\"result\":{\"dataBase64\":\"";
	struct stat st;
	if (fstat(fd, &st) < 0) {
		res_errno(r, errno);
		return false;
	}
	if ((uint64_t)st.st_size > FS_MAX_READ_FILE)
		goto too_large;
	/* Encoded after the queue's current end; committed only when complete. */
	size_t idlen = strlen(id);
	size_t head = 7 + idlen + sizeof(key) - 1;
	size_t used = head, cap = head + cd_base64_encoded_len((size_t)st.st_size) + 64;
	size_t total = 0;
	char *w = cd_conn_out_reserve(c, cap);
	advise_huge(w, cap);
	sprintf(w, "{\"id\":%s,%s", id, key);
	for (;;) {
		size_t fill = 0;
		while (fill < sizeof(buf)) {
			ssize_t n = read(fd, buf + fill, sizeof(buf) - fill);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				res_errno(r, errno);
				return false;
			}
			if (n == 0)
				break;
			fill += (size_t)n;
		}
		total += fill;
		if (total > FS_MAX_READ_FILE)
			goto too_large;
		if (used + cd_base64_encoded_len(fill) + 8 > cap) {
			/* The file grew since fstat: make room (the queue may move). */
			cap = used + cd_base64_encoded_len(fill) + cap / 2 + 64;
			w = cd_conn_out_reserve(c, cap);
		}
		used += cd_base64_encode(buf, fill, w + used);
		if (fill < sizeof(buf))
			break;
	}
	memcpy(w + used, "\"}}\n", 4);
	cd_conn_out_commit(c, used + 4);
	cd_conn_kick(c);
	return true;
too_large:
	res_error(r, CD_RPC_INVALID_REQUEST, "file is too large to read: limit is %u bytes",
		  FS_MAX_READ_FILE);
	return false;
}

/* ---- handlers ---------------------------------------------------------- */

static void req_done(struct fs_req *q, struct fs_res *r, struct cd_cli_bound *b)
{
	if (r->fd >= 0)
		close(r->fd);
	cd_strbuf_done(&r->out);
	cd_cli_bound_done(b);
	free(q->path);
	free(q->dest);
	free(q->data);
}

static void fs_method(struct cd_conn *c, const char *id, const struct cd_json *params,
		      enum fs_op op)
{
	struct fs_req q = { .op = op };
	struct fs_res r = { .fd = -1 };
	struct cd_cli_bound b;
	const struct cd_linux_plan *lp = NULL;
	char *err = NULL;
	const struct cd_json *v;

	memset(&b, 0, sizeof(b));
	if (cd_param_object(params, "params", &err) < 0)
		goto invalid;
	switch (op) {
	case OP_COPY:
		if (get_path(params, "sourcePath", &q.path, &err) < 0 ||
		    get_path(params, "destinationPath", &q.dest, &err) < 0 ||
		    cd_param_bool(params, "recursive", "recursive", true, false, &q.recursive,
				  &err) < 0)
			goto invalid;
		break;
	case OP_WRITE_FILE:
		if (get_path(params, "path", &q.path, &err) < 0 ||
		    cd_param_string(params, "dataBase64", "dataBase64", true, false, &v, &err) < 0)
			goto invalid;
		if (cd_base64_decode(v->u.str.s, v->u.str.len, &q.data, &q.data_len) < 0) {
			cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
				      "fs/writeFile requires valid base64 dataBase64: invalid "
				      "base64 input");
			goto out;
		}
		break;
	case OP_MKDIR:
		if (get_path(params, "path", &q.path, &err) < 0 ||
		    cd_param_bool(params, "recursive", "recursive", false, true, &q.recursive,
				  &err) < 0)
			goto invalid;
		break;
	case OP_REMOVE:
		if (get_path(params, "path", &q.path, &err) < 0 ||
		    cd_param_bool(params, "recursive", "recursive", false, true, &q.recursive,
				  &err) < 0 ||
		    cd_param_bool(params, "force", "force", false, true, &q.force, &err) < 0)
			goto invalid;
		break;
	case OP_WALK: {
		if (get_path(params, "path", &q.path, &err) < 0)
			goto invalid;
		const struct cd_json *o = cd_json_get(params, "options");
		if (!o) {
			err = cd_param_missing("options");
			goto invalid;
		}
		if (cd_param_object(o, "struct FileSystemWalkOptions", &err) < 0 ||
		    get_u64_required(o, "maxDepth", "maxDepth", &q.walk.max_depth, &err) < 0 ||
		    get_u64_required(o, "maxDirectories", "maxDirectories", &q.walk.max_dirs,
				     &err) < 0 ||
		    get_u64_required(o, "maxEntries", "maxEntries", &q.walk.max_entries, &err) <
			    0 ||
		    cd_param_bool(o, "followDirectorySymlinks", "followDirectorySymlinks", true,
				  false, &q.walk.follow, &err) < 0 ||
		    cd_param_bool(o, "pruneHiddenDirectories", "pruneHiddenDirectories", false,
				  false, &q.walk.prune_hidden, &err) < 0)
			goto invalid;
		if (q.walk.max_dirs == 0 || q.walk.max_entries == 0) {
			cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
				      "filesystem walk limits must be greater than zero");
			goto out;
		}
		if (q.walk.max_depth > WALK_MAX_DEPTH || q.walk.max_dirs > WALK_MAX_DIRS ||
		    q.walk.max_entries > WALK_MAX_ENTRIES) {
			cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
				      "filesystem walk limits exceed maximums: depth=64, "
				      "directories=10000, entries=50000");
			goto out;
		}
		break;
	}
	case OP_READ_FILE:
	case OP_OPEN:
	case OP_METADATA:
	case OP_CANONICALIZE:
	case OP_READ_DIR:
		if (get_path(params, "path", &q.path, &err) < 0)
			goto invalid;
		break;
	}
	if (bind_sandbox(c, id, params, &b, &lp) < 0)
		goto out;
	perform(c, lp, &q, &r);
	if (op == OP_READ_FILE && !r.code) {
		bool done = reply_read_file(c, id, r.fd, &r);
		close(r.fd);
		r.fd = -1;
		if (done)
			goto out;
	}
	reply_res(c, id, &r);
	goto out;
invalid:
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
out:
	free(err);
	req_done(&q, &r, &b);
}

#define FS_HANDLER(name, op)                                                       \
	void name(struct cd_conn *c, const char *id, const struct cd_json *params) \
	{                                                                          \
		fs_method(c, id, params, op);                                      \
	}

FS_HANDLER(cd_fs_read_file, OP_READ_FILE)
FS_HANDLER(cd_fs_write_file, OP_WRITE_FILE)
FS_HANDLER(cd_fs_create_directory, OP_MKDIR)
FS_HANDLER(cd_fs_get_metadata, OP_METADATA)
FS_HANDLER(cd_fs_canonicalize, OP_CANONICALIZE)
FS_HANDLER(cd_fs_read_directory, OP_READ_DIR)
FS_HANDLER(cd_fs_walk, OP_WALK)
FS_HANDLER(cd_fs_remove, OP_REMOVE)
FS_HANDLER(cd_fs_copy, OP_COPY)

/* ---- streaming reads ---------------------------------------------------- */

static struct cd_fs_handle *find_handle(struct cd_conn *c, const char *s, size_t len)
{
	for (size_t i = 0; i < c->n_fs_handles; i++)
		if (c->fs_handles[i].id_len == len && !memcmp(c->fs_handles[i].id, s, len))
			return &c->fs_handles[i];
	return NULL;
}

static void drop_handle(struct cd_conn *c, struct cd_fs_handle *h)
{
	close(h->fd);
	*h = c->fs_handles[--c->n_fs_handles];
}

static void append_handle_id(struct cd_strbuf *sb, const char *s, size_t len)
{
	cd_strbuf_append_n(sb, s, strnlen(s, len));
}

void cd_fs_open(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct fs_req q = { .op = OP_OPEN };
	struct fs_res r = { .fd = -1 };
	struct cd_cli_bound b;
	const struct cd_linux_plan *lp = NULL;
	const struct cd_json *hid;
	char *err = NULL;

	memset(&b, 0, sizeof(b));
	if (cd_param_object(params, "params", &err) < 0 ||
	    cd_param_string(params, "handleId", "handleId", true, false, &hid, &err) < 0 ||
	    get_path(params, "path", &q.path, &err) < 0) {
		cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
		goto out;
	}
	if (hid->u.str.len > FS_MAX_HANDLE_ID) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "file handle ID must not exceed 32 bytes");
		goto out;
	}
	if (find_handle(c, hid->u.str.s, hid->u.str.len)) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "file handle `");
		append_handle_id(&sb, hid->u.str.s, hid->u.str.len);
		cd_strbuf_append(&sb, "` already exists");
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST, sb.buf);
		cd_strbuf_done(&sb);
		goto out;
	}
	size_t active = 0;
	struct cd_fs_handle *oldest = NULL;
	for (size_t i = 0; i < c->n_fs_handles; i++) {
		struct cd_fs_handle *o = &c->fs_handles[i];
		if (!o->at_eof)
			active++;
		else if (!oldest || o->eof_order < oldest->eof_order)
			oldest = o;
	}
	if (active >= FS_MAX_HANDLES) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "at most 128 file reads may be open per connection");
		goto out;
	}
	if (bind_sandbox(c, id, params, &b, &lp) < 0)
		goto out;
	/* Opened inside the confinement (when there is one), read outside. */
	perform(c, lp, &q, &r);
	if (r.code) {
		reply_res(c, id, &r);
		goto out;
	}
	if (!c->fs_handles)
		c->fs_handles = cd_xcalloc(2 * FS_MAX_HANDLES, sizeof(*c->fs_handles));
	if (c->n_fs_handles >= 2 * FS_MAX_HANDLES && oldest)
		drop_handle(c, oldest);
	struct cd_fs_handle *h = &c->fs_handles[c->n_fs_handles++];
	*h = (struct cd_fs_handle){ .id_len = hid->u.str.len, .fd = r.fd };
	memcpy(h->id, hid->u.str.s, hid->u.str.len);
	r.fd = -1;
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"handleId\":");
	cd_strbuf_append_json_string(&sb, hid->u.str.s, hid->u.str.len);
	cd_strbuf_append_c(&sb, '}');
	cd_conn_result(c, id, sb.buf, sb.len);
	cd_strbuf_done(&sb);
out:
	free(err);
	req_done(&q, &r, &b);
}

/*
 * Read-ahead. A client streams a file one block per request and waits for
 * each answer, so reading the next block is all on the critical path.
 * While a block's answer is written, slice by slice, the server reads the
 * next one (same length, just after) a piece per slice, while the client
 * copies the slice out of the pipe; the next request is then encoded from
 * it, but only if the file's identity, size, mtime and ctime are what they
 * were before it was read (else it is read again), and only for a file
 * unchanged for 50 ms before (see readahead_start). One block per
 * connection. The block being answered is in the connection's buffer or
 * in the spare one, and the next is read into the other; the loop answers
 * one request at a time, so one spare serves every connection.
 */
struct cd_fs_readahead {
	char id[FS_MAX_HANDLE_ID];
	size_t id_len;
	uint64_t off, len;
	bool ready;   /* data holds [off, off + got) */
	bool filling; /* next is being read: [off, off + got) so far */
	bool eof;     /* a read came short: the file ends at off + got */
	size_t got;
	int fd;
	struct stat st;
	unsigned char *data; /* owned, FS_BLOCK_MAX bytes */
	unsigned char *next; /* data or spare_block while filling */
};

static unsigned char *spare_block; /* FS_BLOCK_MAX bytes */

static bool same_file_state(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* pread until len bytes or EOF; -errno on error. */
static ssize_t pread_full(int fd, unsigned char *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * Begin reading [off, off + len) of h ahead, if the file has been left
 * alone, into whichever buffer does not hold busy (the block being answered).
 */
static void readahead_start(struct cd_conn *c, const struct cd_fs_handle *h, uint64_t off,
			    uint64_t len, const unsigned char *busy)
{
	struct cd_fs_readahead *ra = c->fs_readahead;
	ra->ready = false;
	if (fstat(h->fd, &ra->st) < 0)
		return;
	/*
	 * File times advance by clock ticks: a write in the same tick as the
	 * last one would not change them. Only a file left alone for a while
	 * is read ahead, so that any later write shows in mtime or ctime.
	 */
	struct timespec now;
	if (clock_gettime(CLOCK_REALTIME, &now) < 0 || ms_of(&now) - ms_of(&ra->st.st_mtim) < 50 ||
	    ms_of(&now) - ms_of(&ra->st.st_ctim) < 50)
		return;
	memcpy(ra->id, h->id, h->id_len);
	ra->id_len = h->id_len;
	ra->off = off;
	ra->len = len;
	ra->fd = h->fd;
	ra->got = 0;
	ra->eof = false;
	ra->next = busy == ra->data ? spare_block : ra->data;
	ra->filling = true;
}

/* Read the next piece ahead (between two slices of an answer). */
static void readahead_step(struct cd_conn *c)
{
	struct cd_fs_readahead *ra = c->fs_readahead;
	if (!ra || !ra->filling || ra->eof || ra->got == ra->len)
		return;
	size_t want = ra->len - ra->got < B64_SLICE ? ra->len - ra->got : B64_SLICE;
	ssize_t n = pread_full(ra->fd, ra->next + ra->got, want, ra->off + ra->got);
	if (n < 0) {
		ra->filling = false;
		return;
	}
	ra->got += (size_t)n;
	ra->eof = (size_t)n < want;
}

/* Read what is left of the block ahead once its predecessor is answered. */
static void readahead_finish(struct cd_conn *c)
{
	struct cd_fs_readahead *ra = c->fs_readahead;
	if (!ra->filling)
		return;
	ra->filling = false;
	if (!ra->eof) {
		ssize_t n = pread_full(ra->fd, ra->next + ra->got, ra->len - ra->got,
				       ra->off + ra->got);
		if (n < 0)
			return;
		ra->got += (size_t)n;
	}
	if (ra->next == spare_block) {
		spare_block = ra->data;
		ra->data = ra->next;
	}
	ra->ready = true;
}

/* The read-ahead block for this request, if it is still what a read would give. */
static bool take_readahead(struct cd_conn *c, const struct cd_fs_handle *h, uint64_t off,
			   uint64_t len)
{
	struct cd_fs_readahead *ra = c->fs_readahead;
	struct stat st;
	if (!ra || !ra->ready)
		return false;
	ra->ready = false;
	return ra->id_len == h->id_len && !memcmp(ra->id, h->id, h->id_len) && ra->off == off &&
	       ra->len == len && fstat(h->fd, &st) == 0 && same_file_state(&st, &ra->st);
}

void cd_fs_read_block(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *hid;
	uint64_t off, len;
	char *err = NULL;

	if (cd_param_object(params, "params", &err) < 0 ||
	    cd_param_string(params, "handleId", "handleId", true, false, &hid, &err) < 0 ||
	    get_u64_required(params, "offset", "offset", &off, &err) < 0 ||
	    get_u64_required(params, "len", "len", &len, &err) < 0) {
		cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
		free(err);
		return;
	}
	if (len < 1 || len > FS_BLOCK_MAX) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "file read block length must be between 1 and 1048576");
		return;
	}
	struct cd_fs_handle *h = find_handle(c, hid->u.str.s, hid->u.str.len);
	if (!h) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "unknown file handle `");
		append_handle_id(&sb, hid->u.str.s, hid->u.str.len);
		cd_strbuf_append(&sb, "`");
		cd_conn_error(c, id, RPC_NOT_FOUND, sb.buf);
		cd_strbuf_done(&sb);
		return;
	}
	if (off > (uint64_t)INT64_MAX - len) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST, "file read offset is out of range");
		return;
	}
	if (!spare_block)
		spare_block = cd_xmalloc(FS_BLOCK_MAX);
	struct cd_fs_readahead *ra = c->fs_readahead;
	if (!ra) {
		ra = c->fs_readahead = cd_xcalloc(1, sizeof(*ra));
		ra->data = cd_xmalloc(FS_BLOCK_MAX);
	}
	const unsigned char *data;
	size_t got;
	if (take_readahead(c, h, off, len)) {
		data = ra->data;
		got = ra->got;
	} else {
		ssize_t n = pread_full(h->fd, spare_block, len, off);
		if (n < 0) {
			/* A read error closes the handle. */
			struct fs_res r = { .fd = -1 };
			res_errno(&r, (int)-n);
			drop_handle(c, h);
			reply_res(c, id, &r);
			cd_strbuf_done(&r.out);
			return;
		}
		data = spare_block;
		got = (size_t)n;
	}
	bool eof = got < len;
	/* A complete stream no longer counts against the limit (see cd_fs_handle). */
	if (eof && !h->at_eof)
		h->eof_order = ++eof_clock;
	h->at_eof = eof;
	if (!eof)
		readahead_start(c, h, off + got, len, data);
	reply_b64(c, id, "chunk", data, got, eof ? "\",\"eof\":true" : "\",\"eof\":false",
		  readahead_step);
	readahead_finish(c);
}

void cd_fs_close(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *hid;
	char *err = NULL;
	if (cd_param_object(params, "params", &err) < 0 ||
	    cd_param_string(params, "handleId", "handleId", true, false, &hid, &err) < 0) {
		cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
		free(err);
		return;
	}
	struct cd_fs_handle *h = find_handle(c, hid->u.str.s, hid->u.str.len);
	if (h)
		drop_handle(c, h);
	cd_conn_result(c, id, "{}", 2);
}

void cd_fs_conn_release(struct cd_conn *c)
{
	struct cd_fs_readahead *ra = c->fs_readahead;
	if (ra) {
		free(ra->data);
		free(ra);
		c->fs_readahead = NULL;
	}
	while (c->n_fs_handles)
		drop_handle(c, &c->fs_handles[0]);
	free(c->fs_handles);
	c->fs_handles = NULL;
}
