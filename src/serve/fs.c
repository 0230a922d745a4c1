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
 * Errors: ENOENT is -32004, EACCES/EPERM/EINVAL -32600 (and EROFS in the
 * helper, where the sandbox's read-only mounts give it), other errnos
 * -32603, all as "<strerror> (os error N)".
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_SYS_PIDFD_H
#include <sys/pidfd.h>
#endif

#include "core/pathuri.h"
#include "serve/fs.h"
#include "serve/intent.h"
#include "serve/loop.h"
#include "serve/proc.h"
#include "serve/server.h"
#include "serve/workq.h"
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
/* Per connection: fs requests waiting for their turn, and the writeFile bytes they hold. */
#define FS_QUEUE_MAX	   64
#define FS_QUEUE_MAX_BYTES (256u * 1024 * 1024)
/* Worker threads (each runs one connection's fs request at a time). */
#define FS_WORKERS 4
/* At shutdown, how long running fs jobs get to stop once cancelled. */
#define FS_STOP_MS    2000
#define RPC_NOT_FOUND (-32004)
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
	int err;	      /* the errno behind res_errno's error, or 0 */
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

/*
 * The cancel flag of the job this worker thread runs (NULL on the loop and
 * in helpers). Long operations look at it between two steps (a block
 * copied or read, a directory entry), so that a shutdown does not wait
 * for a copy of GiBs to finish: the bound is one such step.
 */
static __thread atomic_bool *cur_cancel;

static bool cancelled(void)
{
	return cur_cancel && atomic_load_explicit(cur_cancel, memory_order_relaxed);
}

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
	r->err = e;
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
		if (cancelled()) {
			res_errno(r, ECANCELED);
			goto out;
		}
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
		if (cancelled()) {
			r = -ECANCELED;
			break;
		}
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
	/* On the stack: copies run on several worker threads at once. */
	unsigned char buf[128 * 1024];
	for (;;) {
		if (cancelled()) {
			r = -ECANCELED;
			break;
		}
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
		if (cancelled()) {
			r = -ECANCELED;
			break;
		}
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

/* A result over a socket: the header (with the fd), then the payload. 0 or -errno. */
static int send_res(int sock, const struct fs_res *r)
{
	struct helper_hdr hdr = { .code = r->code, .has_fd = r->fd >= 0, .len = r->out.len };
	int e = cd_send_fd(sock, &hdr, sizeof(hdr), r->fd);
	if (e == 0 && r->out.len)
		e = write_all(sock, (const unsigned char *)r->out.buf, r->out.len);
	return e;
}

/* In the child: perform the request (arg), then send the result. */
static int helper_main(void *arg)
{
	struct fs_res r = { .fd = -1 };
	fs_do(arg, &r);
	/*
	 * In the sandbox everything outside the writable paths is a read-only
	 * mount: EROFS there is the policy's denial, as EACCES from Landlock
	 * is, and is answered alike (the message still says which).
	 */
	if (r.code && r.err == EROFS)
		r.code = CD_RPC_INVALID_REQUEST;
	return send_res(STDOUT_FILENO, &r) < 0 ? 3 : 0;
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

/*
 * What send_res sent, into r (code, payload, fd). 0, or -errno with *timed_out
 * when the socket's receive timeout expired first.
 */
static int recv_res(int sock, struct fs_res *r, bool *timed_out)
{
	struct helper_hdr hdr;
	int fd, flags = 0;
	ssize_t n = cd_recv_fd(sock, &hdr, sizeof(hdr), MSG_WAITALL, &fd, &flags);
	*timed_out = n == -EAGAIN || n == -EWOULDBLOCK;
	bool ok = n == (ssize_t)sizeof(hdr) && !(flags & MSG_CTRUNC) &&
		  (hdr.has_fd != 0) == (fd >= 0) && hdr.len < (64u << 20);
	if (ok) {
		r->code = hdr.code;
		r->out.len = 0;
		if (hdr.len) {
			char *buf = cd_xmalloc(hdr.len);
			int e = read_full(sock, buf, hdr.len);
			ok = e == 0;
			*timed_out = e == -EAGAIN || e == -EWOULDBLOCK;
			if (ok)
				cd_strbuf_append_n(&r->out, buf, hdr.len);
			free(buf);
		}
	}
	if (!ok) {
		if (fd >= 0)
			close(fd);
		return n < 0 ? (int)n : -EPROTO;
	}
	r->fd = fd;
	return 0;
}

/*
 * In the intermediate (see run_sandboxed): the helper to kill when the
 * server cancels the job (SIGTERM), and whether it did. Process-wide, but
 * only the intermediate, a single-threaded fork, sets them.
 */
static volatile sig_atomic_t helper_pid, helper_cancelled;

static void on_cancel(int sig)
{
	int e = errno;
	helper_cancelled = 1;
	if (helper_pid > 0)
		(void)kill(helper_pid, SIGKILL);
	errno = e;
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
	 * The intermediate waits for the helper, but not forever: a file lease
	 * or a stuck file system must not hold a worker and the connection's
	 * fs requests.
	 */
	helper_pid = cd_child_pid(child);
	if (helper_cancelled)
		(void)kill(helper_pid, SIGKILL);
	struct timeval tv = { .tv_sec = FS_HELPER_TIMEOUT_S };
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	bool timed_out;
	bool ok = recv_res(sv[0], r, &timed_out) == 0;
	close(sv[0]);
	if (timed_out)
		(void)kill(cd_child_pid(child), SIGKILL);
	int status = cd_child_wait(child);
	helper_pid = 0;
	cd_child_free(child);
	if (!ok || status != 0) {
		if (r->fd >= 0)
			close(r->fd);
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
 * An answer built whole (over WebSocket, see read_file_answer) is encoded
 * into fresh memory: the queue is freed once a large answer is sent
 * (conn.c), so every big fs/readFile faults its whole answer in again, one
 * 4 KiB page at a time, and those faults took a third of the server's time,
 * more than reading and encoding. Transparent
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

/* ---- fs requests off the loop ------------------------------------------- */

/*
 * A request is performed on a worker thread (workq.h), or, when it is cheap
 * (see cheap_op), on the loop at its turn, so that a copy of GiBs, a
 * recursive remove or a sandboxed helper does not stall every other client.
 *
 * Each connection has a FIFO of jobs (struct cd_fs_queue) of which only the
 * head runs: its fs requests are performed and answered in the order they
 * came (a writeFile then a readFile of the same file sees the write), while
 * its other requests (process/..., fs/readBlock on an open handle) are
 * answered meanwhile. At most FS_QUEUE_MAX jobs holding FS_QUEUE_MAX_BYTES
 * of writeFile data wait per connection; beyond that a request is refused
 * (-32600), like the other per-connection limits. The next job does not
 * start while the connection's outbound queue is over its cap: a client
 * that does not read holds back its fs requests as it holds back the rest.
 *
 * When the connection ends, the job a worker runs for it completes (a
 * write or a copy is not left half done) and its result is dropped (conn
 * is NULL then); the others, including one handed to the pool that no
 * worker has started, are never performed (queue_release). At shutdown
 * the running ones are cancelled (see cancelled() and run_sandboxed).
 */
typedef void (*fs_method_fn)(struct cd_conn *c, const char *id, const struct cd_json *params);

struct fs_job {
	struct cd_work work;		    /* first: the pool hands this back */
	struct fs_job *next;		    /* the connection's queue */
	struct fs_job *run_prev, *run_next; /* running_jobs */
	struct cd_conn *conn;		    /* NULL once the connection ended */
	char *id;			    /* the request's id, JSON text */
	bool offload;			    /* on a worker; else on the loop at its turn */
	struct fs_req q;
	struct fs_res r;
	struct cd_cli_bound b; /* owns lp */
	const struct cd_linux_plan *lp;
	char hid[FS_MAX_HANDLE_ID]; /* fs/open: the handle's id */
	size_t hid_len;
	/*
	 * fs/readFile (see read_file_answer). rest: what the loop queues, the
	 * answer built whole or, on a lent stream, what the worker left
	 * unwritten (then it goes before anything queued meanwhile).
	 */
	struct cd_strbuf rest;
	int out_fd;		     /* the connection's stream, lent (cd_conn_out_lend), or -1 */
	struct cd_strbuf out_before; /* what the connection had queued: written first */
	uint64_t lent_start;	     /* when the worker began to write (cd_loop_now_ms) */
	bool pipe_grown;
	bool answered;	     /* the whole answer went out, or is in rest */
	char *broken;	     /* why the stream cannot go on, the answer cut or the client gone */
	fs_method_fn method; /* an fs/readBlock or fs/close waiting for its fs/open... */
	char *params;	     /* ...and its params, JSON text */
	atomic_bool cancel;
	int pidfd; /* the intermediate while it runs, under helper_lock */
	pid_t pid;
};

struct cd_fs_queue {
	struct fs_job *head, *tail;
	size_t n;
	size_t bytes; /* writeFile data held */
	bool running; /* head is on a worker */
};

/* Jobs handed to the pool and not completed (loop thread only): cancelled at shutdown. */
static struct fs_job *running_jobs;
/* Guards fs_job.pidfd and .pid between their worker and the loop's cancel. */
static pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;

static struct cd_fs_handle *find_handle(struct cd_conn *c, const char *s, size_t len);
static void open_finish(struct cd_conn *c, const char *id, const char *hid, size_t hid_len, int fd);

/*
 * Unsandboxed metadata, canonical paths, mkdir and open cost a few system
 * calls: a worker's round trip would cost them more than it saves.
 */
static bool cheap_op(enum fs_op op)
{
	return op == OP_METADATA || op == OP_CANONICALIZE || op == OP_MKDIR || op == OP_OPEN;
}

static struct fs_job *job_new(struct cd_conn *c, const char *id)
{
	struct fs_job *j = cd_xcalloc(1, sizeof(*j));
	j->conn = c;
	j->id = cd_xstrdup(id);
	j->r.fd = -1;
	j->pidfd = -1;
	j->out_fd = -1;
	atomic_init(&j->cancel, false);
	return j;
}

/* Free what a decoded request owns: its strings, its data and its bound sandbox. */
static void req_done(struct fs_req *q, struct cd_cli_bound *b)
{
	cd_cli_bound_done(b);
	free(q->path);
	free(q->dest);
	free(q->data);
}

static void job_free(struct fs_job *j)
{
	if (j->r.fd >= 0)
		close(j->r.fd);
	cd_strbuf_done(&j->r.out);
	req_done(&j->q, &j->b);
	free(j->id);
	if (j->out_fd >= 0)
		close(j->out_fd);
	cd_strbuf_done(&j->out_before);
	cd_strbuf_done(&j->rest);
	free(j->broken);
	free(j->params);
	free(j);
}

/* Signal the job's intermediate, if one runs (helper_lock held). */
static void signal_job(struct fs_job *j, int sig)
{
#ifdef SYS_pidfd_send_signal
	/*
	 * With a pidfd, only through it: when it fails, the intermediate is
	 * gone (and may have been reaped by the orphan reaper, its pid free
	 * for another process).
	 */
	if (j->pidfd >= 0) {
		(void)syscall(SYS_pidfd_send_signal, j->pidfd, sig, NULL, 0);
		return;
	}
#endif
	if (j->pid > 0)
		(void)kill(j->pid, sig);
}

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/*
 * The intermediate of a sandboxed request: a fork of the worker thread that
 * runs run_in_helper as the loop used to, and sends back its result.
 *
 * Why not spawn the helper from the worker directly: the helper is made
 * with a raw clone() (for its namespaces), which does not take the
 * allocator's locks the way fork() does, and it then performs the request
 * with malloc. In a process with several threads, another thread may hold
 * such a lock at that instant, and the helper would hang on it. fork()
 * makes malloc safe in its child (glibc, and the sanitizers, take their
 * locks across it); the intermediate has a single thread, so its own
 * cd_spawn is the one the single-threaded server used to make.
 *
 * SIGTERM (a cancel at shutdown) kills the helper; the intermediate then
 * reaps it, runs the backends' finish hooks (mask mount points) and exits.
 */
static CD_NORETURN void intermediate_main(struct fs_job *j, int sock, pid_t parent)
{
	/* Nothing of the server's stays open here: a client would not see its socket end. */
	if (sock <= STDERR_FILENO)
		sock = fcntl(sock, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (sock < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0)
		_exit(3);
	for (int fd = STDERR_FILENO + 1; fd < sock; fd++)
		(void)close(fd);
#ifdef HAVE_CLOSE_RANGE
	if (close_range((unsigned)sock + 1, ~0U, 0) < 0)
#endif
		for (int fd = sock + 1; fd < 65536; fd++)
			(void)close(fd);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(3);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_cancel;
	sigemptyset(&sa.sa_mask);
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigprocmask(SIG_UNBLOCK, &term, NULL) < 0)
		_exit(3);
	/* Go: the worker holds a pidfd for us now (see run_sandboxed). */
	char go = 0;
	if (read(sock, &go, 1) != 1 || !go || helper_cancelled)
		_exit(0);
	struct fs_res r = { .fd = -1 };
	run_in_helper(j->lp, &j->q, &r);
	_exit(send_res(sock, &r) < 0 ? 3 : 0);
}

/* On a worker: j's request through an intermediate (see intermediate_main). */
static void run_sandboxed(struct fs_job *j)
{
	struct fs_res *r = &j->r;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		res_error(r, CD_RPC_INTERNAL, "fs sandbox helper: %s", strerror(errno));
		return;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		intermediate_main(j, sv[1], parent);
	int e = errno;
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		res_error(r, CD_RPC_INTERNAL, "fs sandbox helper: fork: %s", strerror(e));
		return;
	}
	/*
	 * Reaped through a pidfd taken before it may exit (it waits for the
	 * go byte): a pid-1 server reaps exited children it does not watch,
	 * so by pid this one might have been reaped and the pid reused.
	 */
	int pidfd = -1;
#ifdef HAVE_PIDFD_OPEN
	pidfd = pidfd_open(pid, 0);
#endif
	pthread_mutex_lock(&helper_lock);
	j->pid = pid;
	j->pidfd = pidfd;
	char go = !atomic_load(&j->cancel);
	pthread_mutex_unlock(&helper_lock);
	(void)!write(sv[0], &go, 1);
	/* A backstop over the intermediate's own timeout for its helper. */
	struct timeval tv = { .tv_sec = FS_HELPER_TIMEOUT_S + 10 };
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	bool timed_out;
	int rr = recv_res(sv[0], r, &timed_out);
	close(sv[0]);
	pthread_mutex_lock(&helper_lock);
	if (rr < 0)
		signal_job(j, SIGKILL);
	j->pid = 0;
	j->pidfd = -1;
	pthread_mutex_unlock(&helper_lock);
	if (pidfd >= 0) {
		siginfo_t si;
		/* ECHILD: reaped by the loop's orphan reaper already. */
		while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
		close(pidfd);
	} else {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (rr < 0 && atomic_load(&j->cancel))
		res_errno(r, ECANCELED);
	else if (rr < 0 && timed_out)
		res_error(r, CD_RPC_INTERNAL, "fs sandbox helper timed out after %d s",
			  FS_HELPER_TIMEOUT_S);
	else if (rr < 0)
		res_error(r, CD_RPC_INTERNAL, "fs sandbox helper failed: %s", strerror(-rr));
}

/*
 * How long a worker writes an answer to a client itself (see
 * read_file_answer): while the client keeps up. A wait of LENT_WAIT_MS for
 * a full pipe or socket, or LENT_MAX_MS in all, and the rest is handed
 * back to the loop, which queues it like any other answer: a client that
 * reads slowly, or not at all, does not hold a worker and every other
 * connection's fs requests behind it.
 */
#define LENT_WAIT_MS 100
#define LENT_MAX_MS  1000

/*
 * Write to the lent stream (on the worker). 0 when all of p went out;
 * -EAGAIN when the client is too slow (above), with *done what did go
 * out; another -errno when the stream failed or the job was cancelled
 * (the connection ended, the server stops).
 */
static int lent_write(struct fs_job *j, const char *p, size_t n, size_t *done)
{
	*done = 0;
	while (*done < n) {
		if (cancelled())
			return -ECANCELED;
		ssize_t w = write(j->out_fd, p + *done, n - *done);
		if (w > 0) {
			*done += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN && !j->pipe_grown) {
			j->pipe_grown = true;
			cd_out_grow_pipe(j->out_fd);
			continue;
		}
		if (w < 0 && errno == EAGAIN) {
			uint64_t spent = cd_loop_now_ms() - j->lent_start;
			if (spent >= LENT_MAX_MS)
				return -EAGAIN;
			int wait = LENT_WAIT_MS;
			if (LENT_MAX_MS - spent < (uint64_t)wait)
				wait = (int)(LENT_MAX_MS - spent);
			struct pollfd pfd = { .fd = j->out_fd, .events = POLLOUT };
			int rr = poll(&pfd, 1, wait);
			if (rr == 0)
				return -EAGAIN;
			continue;
		}
		return w < 0 ? -errno : -EIO;
	}
	return 0;
}

/*
 * Write p to the lent stream, after what the connection had queued (the
 * first time). false when it did not all go out: the stream failed
 * (j->broken says why), or the client is slow and j->rest holds, in
 * order, what did not go out (the loop writes it first, job_done).
 */
static bool lent_send(struct fs_job *j, const char *p, size_t n)
{
	size_t done = 0;
	int e = 0;
	if (j->out_before.len) {
		e = lent_write(j, j->out_before.buf, j->out_before.len, &done);
		if (e == -EAGAIN) {
			j->rest = j->out_before;
			j->out_before = (struct cd_strbuf){ 0 };
			j->rest.len -= done;
			memmove(j->rest.buf, j->rest.buf + done, j->rest.len);
			if (n)
				cd_strbuf_append_n(&j->rest, p, n);
			return false;
		}
		cd_strbuf_done(&j->out_before);
	}
	if (e == 0 && n) {
		e = lent_write(j, p, n, &done);
		if (e == -EAGAIN) {
			cd_strbuf_append_n(&j->rest, p + done, n - done);
			return false;
		}
	}
	if (e == -ECANCELED)
		j->broken = cd_xasprintf("an fs/readFile answer was cut (cancelled)");
	else if (e < 0)
		j->broken = cd_xasprintf("write failed: %s", strerror(-e));
	return e == 0;
}

/*
 * fs/readFile's answer, {"id":ID,"result":{"dataBase64":"..."}} and its
 * newline, from the opened file (on a worker). The file is read in blocks
 * of a multiple of 3 bytes, each encoded straight into the output.
 *
 * On stdio and unix sockets the worker writes the answer to the client
 * itself (the connection lent it the stream), one 64 KiB slice at a time
 * as it is encoded: memory stays at a few slices whatever the size, and
 * those stay in the cache. Built whole instead, as over WebSocket, where a
 * frame holds one whole message, a 100 MiB answer is 140 MB of fresh
 * memory each time; once the worker moved the encoding off the loop
 * thread, the pages were faulted in on one CPU and freed on another, and
 * the zeroing of pages the host had taken back made one run in four 5x
 * slower (fs/readFile of 100 MiB: 1,400 or 280 MB/s; written here, 2,300
 * to 2,500 MB/s in every run, and the server's RSS does not grow).
 *
 * A client too slow for that (see LENT_WAIT_MS) gets the rest of the
 * answer built here and handed back (j->rest) for the loop to write first.
 *
 * An error before any of it is written is the request's error (r), as
 * usual. After, the stream is in the middle of a JSON line and cannot go
 * on: j->broken says why and the connection ends (the file failed to
 * read, grew past the cap, or the client went away).
 */
static void read_file_answer(struct fs_job *j)
{
	static const size_t block = 3 * 349525; /* just under 1 MiB */
	static const char key[] = "\"result\":{\"dataBase64\":\"";
	static const char tail[] = "\"}}\n";
	struct fs_res *r = &j->r;
	bool lent = j->out_fd >= 0;
	struct stat st;
	if (fstat(r->fd, &st) < 0) {
		res_errno(r, errno);
		return;
	}
	size_t head = 7 + strlen(j->id) + sizeof(key) - 1;
	size_t cap = head + sizeof(tail) + 64;
	if ((uint64_t)st.st_size <= FS_MAX_READ_FILE)
		cap += cd_base64_encoded_len(lent ? B64_SLICE : (size_t)st.st_size);
	char *w = cd_xmalloc(cap);
	unsigned char *buf = cd_xmalloc(block);
	if (!lent)
		advise_huge(w, cap);
	size_t used = (size_t)sprintf(w, "{\"id\":%s,%s", j->id, key);
	uint64_t total = (uint64_t)st.st_size;
	bool begun = false;
	int err = 0;
	if (total > FS_MAX_READ_FILE)
		goto too_large;
	for (total = 0;;) {
		size_t fill = 0;
		while (fill < block) {
			ssize_t n = read(r->fd, buf + fill, block - fill);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 || cancelled()) {
				err = n < 0 ? errno : ECANCELED;
				goto fail;
			}
			if (n == 0)
				break;
			fill += (size_t)n;
		}
		total += fill;
		if (total > FS_MAX_READ_FILE)
			goto too_large;
		size_t done = 0;
		while (lent && done < fill) {
			size_t k = fill - done < B64_SLICE ? fill - done : B64_SLICE;
			used += cd_base64_encode(buf + done, k, w + used);
			done += k;
			begun = true;
			if (lent_send(j, w, used)) {
				used = 0;
				continue;
			}
			if (j->broken)
				goto out;
			/* Too slow: the rest of the answer goes to j->rest (built as unlent). */
			lent = false;
			free(w);
			used = j->rest.len;
			cap = j->rest.cap;
			w = cd_strbuf_steal(&j->rest);
			uint64_t more =
				(uint64_t)st.st_size > total ? (uint64_t)st.st_size - total : 0;
			size_t need = used + cd_base64_encoded_len(fill - done + (size_t)more) +
				      sizeof(tail) + 64;
			if (need > cap) {
				cap = need;
				w = cd_xrealloc(w, cap);
			}
		}
		if (!lent && done < fill) {
			if (used + cd_base64_encoded_len(fill - done) + sizeof(tail) > cap) {
				/* The file grew since fstat: make room. */
				cap = used + cd_base64_encoded_len(fill - done) + cap / 2 + 64;
				w = cd_xrealloc(w, cap);
			}
			used += cd_base64_encode(buf + done, fill - done, w + used);
		}
		if (fill < block)
			break;
	}
	memcpy(w + used, tail, sizeof(tail));
	used += sizeof(tail) - 1;
	free(buf);
	if (lent) {
		/* What does not go out now is in j->rest. */
		(void)lent_send(j, w, used);
		j->answered = !j->broken;
		free(w);
	} else {
		/* The whole answer or, handed back, its rest. */
		j->rest = (struct cd_strbuf){ .buf = w, .len = used, .cap = cap };
		j->answered = true;
	}
	return;
too_large:
	if (begun)
		j->broken = cd_xasprintf("a file grew past the %u bytes fs/readFile can answer "
					 "while its answer was written",
					 FS_MAX_READ_FILE);
	else
		res_error(r, CD_RPC_INVALID_REQUEST, "file is too large to read: limit is %u bytes",
			  FS_MAX_READ_FILE);
	goto out;
fail:
	if (begun)
		j->broken = cd_xasprintf("reading a file failed while its fs/readFile answer "
					 "was written: %s",
					 strerror(err));
	else
		res_errno(r, err);
out:
	free(buf);
	free(w);
}

/* On a worker. */
static void job_run(struct cd_work *w)
{
	struct fs_job *j = (struct fs_job *)w;
	cur_cancel = &j->cancel;
	j->q.sandboxed = j->lp != NULL;
	if (j->lp)
		run_sandboxed(j);
	else
		fs_do(&j->q, &j->r);
	j->lent_start = cd_loop_now_ms();
	if (j->q.op == OP_READ_FILE && !j->r.code) {
		read_file_answer(j);
		close(j->r.fd);
		j->r.fd = -1;
	}
	/* An error to answer (by the loop): what the connection had queued goes first. */
	if (j->out_fd >= 0 && !j->answered && !j->broken)
		(void)lent_send(j, NULL, 0);
	cur_cancel = NULL;
}

static void job_reply(struct cd_conn *c, struct fs_job *j)
{
	if (j->answered) {
		/* fs/readFile; on a lent stream cd_conn_out_return took the rest already. */
		if (j->rest.len)
			cd_conn_out_adopt(c, j->rest.buf, j->rest.len, j->rest.cap);
		j->rest = (struct cd_strbuf){ 0 };
	} else if (j->q.op == OP_OPEN && !j->r.code) {
		open_finish(c, j->id, j->hid, j->hid_len, j->r.fd);
		j->r.fd = -1;
	} else {
		reply_res(c, j->id, &j->r);
	}
}

/* A job that is not offloaded, at its turn. */
static void run_on_loop(struct cd_conn *c, struct fs_job *j)
{
	if (j->method) {
		static const struct cd_json_limits lim = { .max_bytes = 4096, .max_values = 16 };
		struct cd_json *v = NULL;
		struct cd_json_error jerr;
		memset(&jerr, 0, sizeof(jerr));
		/* Text this file wrote: it parses. */
		if (cd_json_parse(j->params, strlen(j->params), &lim, &v, &jerr) == 0)
			j->method(c, j->id, v);
		cd_json_free(v);
		return;
	}
	j->q.sandboxed = false;
	fs_do(&j->q, &j->r);
	job_reply(c, j);
}

static void queue_pop(struct cd_fs_queue *fq)
{
	struct fs_job *j = fq->head;
	fq->head = j->next;
	if (!fq->head)
		fq->tail = NULL;
	fq->n--;
	fq->bytes -= j->q.data_len;
}

static void running_add(struct fs_job *j)
{
	j->run_prev = NULL;
	j->run_next = running_jobs;
	if (running_jobs)
		running_jobs->run_prev = j;
	running_jobs = j;
}

static void running_remove(struct fs_job *j)
{
	if (j->run_prev)
		j->run_prev->run_next = j->run_next;
	else if (running_jobs == j)
		running_jobs = j->run_next;
	if (j->run_next)
		j->run_next->run_prev = j->run_prev;
	j->run_prev = j->run_next = NULL;
}

static void pump(struct cd_conn *c);

/* On the loop, once the worker is through (or the pool dropped it at shutdown). */
static void job_done(struct cd_work *w)
{
	struct fs_job *j = (struct fs_job *)w;
	struct cd_conn *c = j->conn;
	running_remove(j);
	if (!c) {
		job_free(j);
		return;
	}
	if (!w->ran)
		res_error(&j->r, CD_RPC_INTERNAL, "the server is shutting down");
	/*
	 * A batch, as for requests (cd_conn_process): the answers below are
	 * flushed once, at the end. A flush that fails closes the connection
	 * and releases its fs state (the queue, the read-ahead), which must not
	 * happen under the feet of a deferred fs/readBlock still using them.
	 */
	c->batch++;
	queue_pop(c->fs_queue);
	c->fs_queue->running = false;
	if (j->out_fd >= 0) {
		close(j->out_fd);
		j->out_fd = -1;
		if (j->broken)
			cd_log_warn("serve: connection %lu (%s): %s: ending the connection",
				    c->serial, c->peer, j->broken);
		cd_conn_out_return(c, j->broken, &j->rest);
	}
	if (!j->broken)
		job_reply(c, j);
	job_free(j);
	if (!c->freed) {
		pump(c);
		/* The end of input was waiting for these answers (cd_conn_process). */
		if (c->in_eof && !cd_fs_conn_busy(c))
			cd_conn_schedule_process(c);
	}
	c->batch--;
	cd_conn_kick(c);
}

/* Start c's next fs request unless one runs. */
static void pump(struct cd_conn *c)
{
	struct cd_fs_queue *fq;
	while ((fq = c->fs_queue) && fq->head && !fq->running && !c->freed) {
		/* Over its cap: resumed from cd_conn_process once the client read. */
		if (cd_conn_out_queued(c) > c->out_cap)
			return;
		struct fs_job *j = fq->head;
		if (!j->offload) {
			queue_pop(fq);
			run_on_loop(c, j);
			job_free(j);
			continue;
		}
		struct cd_server *s = c->server;
		if (!s->fs_workq)
			s->fs_workq = cd_workq_new(s->loop, FS_WORKERS);
		/*
		 * fs/readFile writes its answer itself (read_file_answer), if a
		 * worker takes it at once: the stream is not held while it waits.
		 */
		if (j->q.op == OP_READ_FILE && s->fs_workq && cd_workq_can_start(s->fs_workq)) {
			j->out_fd = cd_conn_out_lend(c, &j->out_before);
		}
		fq->running = true;
		j->work.run = job_run;
		j->work.done = job_done;
		running_add(j);
		if (!s->fs_workq || cd_workq_submit(s->fs_workq, &j->work) < 0) {
			/* No worker could be had: performed here, as before there were any. */
			if (j->out_fd >= 0) {
				close(j->out_fd);
				j->out_fd = -1;
				cd_conn_out_return(c, NULL, &j->out_before);
			}
			job_run(&j->work);
			j->work.ran = true;
			job_done(&j->work);
		}
		return;
	}
}

static void enqueue(struct cd_conn *c, struct fs_job *j)
{
	struct cd_fs_queue *fq = c->fs_queue;
	if (!fq)
		fq = c->fs_queue = cd_xcalloc(1, sizeof(*fq));
	if (fq->n >= FS_QUEUE_MAX ||
	    (fq->n > 0 && fq->bytes + j->q.data_len > FS_QUEUE_MAX_BYTES)) {
		char *msg =
			cd_xasprintf("too many fs requests waiting on this connection (at most %d, "
				     "with at most %u MiB of data): wait for their answers",
				     FS_QUEUE_MAX, FS_QUEUE_MAX_BYTES >> 20);
		cd_conn_error(c, j->id, CD_RPC_INVALID_REQUEST, msg);
		free(msg);
		job_free(j);
		return;
	}
	j->next = NULL;
	if (fq->tail)
		fq->tail->next = j;
	else
		fq->head = j;
	fq->tail = j;
	fq->n++;
	fq->bytes += j->q.data_len;
	pump(c);
}

/* Queue a decoded request (takes q and b); performed now when nothing is before it. */
static void submit(struct cd_conn *c, const char *id, struct fs_req *q, struct cd_cli_bound *b,
		   const struct cd_linux_plan *lp, const char *hid, size_t hid_len)
{
	struct fs_job *j = job_new(c, id);
	j->q = *q;
	memset(q, 0, sizeof(*q));
	j->b = *b;
	memset(b, 0, sizeof(*b));
	j->lp = lp;
	j->offload = lp || !cheap_op(j->q.op);
	if (hid) {
		memcpy(j->hid, hid, hid_len);
		j->hid_len = hid_len;
	}
	enqueue(c, j);
}

/* Drop c's queue: the running job's result goes nowhere, the others are never performed. */
static void queue_release(struct cd_conn *c)
{
	struct cd_fs_queue *fq = c->fs_queue;
	if (!fq)
		return;
	c->fs_queue = NULL;
	for (struct fs_job *j = fq->head, *next; j; j = next) {
		next = j->next;
		if (j != fq->head || !fq->running) {
			job_free(j);
		} else if (c->server->fs_workq && cd_workq_cancel(c->server->fs_workq, &j->work)) {
			/*
			 * Still waiting for a worker (all busy): never performed,
			 * and its memory (a writeFile's data, say) goes now rather
			 * than when a worker gets to it, so that clients that
			 * reconnect cannot pile jobs up past the per-connection caps.
			 */
			running_remove(j);
			job_free(j);
		} else {
			/*
			 * Running: it finishes (a worker is bounded), and job_done
			 * frees it. An answer the worker writes itself is cut.
			 */
			j->conn = NULL;
			if (j->out_fd >= 0)
				atomic_store(&j->cancel, true);
		}
	}
	free(fq);
}

bool cd_fs_conn_busy(const struct cd_conn *c)
{
	return c->fs_queue && c->fs_queue->head;
}

void cd_fs_conn_pump(struct cd_conn *c)
{
	pump(c);
}

void cd_fs_server_stop(struct cd_server *s)
{
	for (struct cd_conn *c = s->conns; c; c = c->next)
		queue_release(c);
	pthread_mutex_lock(&helper_lock);
	for (struct fs_job *j = running_jobs; j; j = j->run_next) {
		atomic_store(&j->cancel, true);
		signal_job(j, SIGTERM);
	}
	pthread_mutex_unlock(&helper_lock);
	if (s->fs_workq) {
		(void)cd_workq_free(s->fs_workq, FS_STOP_MS);
		s->fs_workq = NULL;
	}
}

/* ---- handlers ---------------------------------------------------------- */

static void fs_method(struct cd_conn *c, const char *id, const struct cd_json *params,
		      enum fs_op op)
{
	struct fs_req q = { .op = op };
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
	submit(c, id, &q, &b, lp, NULL, 0);
	goto out;
invalid:
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
out:
	free(err);
	req_done(&q, &b);
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

/*
 * Why an fs/open of this handle id must be refused now (it exists, or the
 * connection has its 128 streams), after replying; false when it may go
 * on. *oldest: the stream that finished first, to evict when the table is
 * full.
 */
static bool open_refused(struct cd_conn *c, const char *id, const char *hid, size_t hid_len,
			 struct cd_fs_handle **oldest)
{
	if (find_handle(c, hid, hid_len)) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "file handle `");
		append_handle_id(&sb, hid, hid_len);
		cd_strbuf_append(&sb, "` already exists");
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST, sb.buf);
		cd_strbuf_done(&sb);
		return true;
	}
	size_t active = 0;
	*oldest = NULL;
	for (size_t i = 0; i < c->n_fs_handles; i++) {
		struct cd_fs_handle *o = &c->fs_handles[i];
		if (!o->at_eof)
			active++;
		else if (!*oldest || o->eof_order < (*oldest)->eof_order)
			*oldest = o;
	}
	if (active >= FS_MAX_HANDLES) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "at most 128 file reads may be open per connection");
		return true;
	}
	return false;
}

/* The file of an fs/open is open: make it a handle and answer (takes fd). */
static void open_finish(struct cd_conn *c, const char *id, const char *hid, size_t hid_len, int fd)
{
	struct cd_fs_handle *oldest;
	/* Checked again: opens queued beside this one may have taken the id or the room. */
	if (open_refused(c, id, hid, hid_len, &oldest)) {
		close(fd);
		return;
	}
	if (!c->fs_handles)
		c->fs_handles = cd_xcalloc(2 * FS_MAX_HANDLES, sizeof(*c->fs_handles));
	if (c->n_fs_handles >= 2 * FS_MAX_HANDLES && oldest)
		drop_handle(c, oldest);
	struct cd_fs_handle *h = &c->fs_handles[c->n_fs_handles++];
	*h = (struct cd_fs_handle){ .id_len = hid_len, .fd = fd };
	memcpy(h->id, hid, hid_len);
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"handleId\":");
	cd_strbuf_append_json_string(&sb, hid, hid_len);
	cd_strbuf_append_c(&sb, '}');
	cd_conn_result(c, id, sb.buf, sb.len);
	cd_strbuf_done(&sb);
}

void cd_fs_open(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct fs_req q = { .op = OP_OPEN };
	struct cd_cli_bound b;
	const struct cd_linux_plan *lp = NULL;
	const struct cd_json *hid;
	struct cd_fs_handle *oldest;
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
	if (open_refused(c, id, hid->u.str.s, hid->u.str.len, &oldest))
		goto out;
	if (bind_sandbox(c, id, params, &b, &lp) < 0)
		goto out;
	/* Opened inside the confinement (when there is one), read outside. */
	submit(c, id, &q, &b, lp, hid->u.str.s, hid->u.str.len);
out:
	free(err);
	req_done(&q, &b);
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
	if (!ra || !ra->filling)
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

/* An fs/open of this handle is queued (or running) on c. */
static bool open_pending(struct cd_conn *c, const char *hid, size_t len)
{
	for (struct fs_job *j = c->fs_queue ? c->fs_queue->head : NULL; j; j = j->next)
		if (!j->method && j->q.op == OP_OPEN && j->hid_len == len &&
		    !memcmp(j->hid, hid, len))
			return true;
	return false;
}

/*
 * fs/readBlock and fs/close of a handle whose fs/open is still queued wait
 * behind it (a client may pipeline them); on any other handle they are
 * answered at once, whatever the connection's fs queue holds. True when
 * queued.
 */
static bool defer_behind_open(struct cd_conn *c, const char *id, const struct cd_json *params,
			      fs_method_fn fn, bool block)
{
	const struct cd_json *hid;
	uint64_t off = 0, len = 0;
	char *err = NULL;
	if (!c->fs_queue || cd_param_object(params, "params", &err) < 0 ||
	    cd_param_string(params, "handleId", "handleId", true, false, &hid, &err) < 0 ||
	    (block && (get_u64_required(params, "offset", "offset", &off, &err) < 0 ||
		       get_u64_required(params, "len", "len", &len, &err) < 0)) ||
	    find_handle(c, hid->u.str.s, hid->u.str.len) ||
	    !open_pending(c, hid->u.str.s, hid->u.str.len)) {
		free(err);
		return false;
	}
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"handleId\":");
	cd_strbuf_append_json_string(&sb, hid->u.str.s, hid->u.str.len);
	if (block)
		cd_strbuf_printf(&sb, ",\"offset\":%llu,\"len\":%llu", (unsigned long long)off,
				 (unsigned long long)len);
	cd_strbuf_append_c(&sb, '}');
	struct fs_job *j = job_new(c, id);
	j->method = fn;
	j->params = cd_strbuf_steal(&sb);
	enqueue(c, j);
	return true;
}

void cd_fs_read_block_in_order(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	if (!defer_behind_open(c, id, params, cd_fs_read_block, true))
		cd_fs_read_block(c, id, params);
}

void cd_fs_close_in_order(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	if (!defer_behind_open(c, id, params, cd_fs_close, false))
		cd_fs_close(c, id, params);
}

void cd_fs_conn_release(struct cd_conn *c)
{
	queue_release(c);
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
