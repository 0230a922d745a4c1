/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The operations of the fs/... methods and the helper's wire (fs-ops.h).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "serve/discover-scan.h"
#include "serve/fs-ops.h"
#include "serve/server.h"
#include "shared/fd-util.h"

#define WALK_MAX_BYTES	   (4u * 1024 * 1024)
#define WALK_ITEM_OVERHEAD 64

__thread atomic_bool *cd_fs_cur_cancel;

bool cd_fs_cancelled(void)
{
	return cd_fs_cur_cancel && atomic_load_explicit(cd_fs_cur_cancel, memory_order_relaxed);
}

/* Here rather than in server.c: the helper program, which has no server, writes them too. */
void cd_json_write_path_uri(struct cd_strbuf *sb, const char *path)
{
	if (!path || path[0] != '/') {
		cd_strbuf_append(sb, "null");
		return;
	}
	char *uri = cd_pathuri_format_posix(path, strlen(path));
	cd_json_write_cstr(sb, uri);
	free(uri);
}

void cd_fs_req_done(struct cd_fs_req *q)
{
	free(q->path);
	free(q->dest);
	free(q->data);
	q->path = q->dest = NULL;
	q->data = NULL;
}

/* ---- results ------------------------------------------------------------ */

static int errno_code(int e)
{
	if (e == ENOENT)
		return CD_RPC_NOT_FOUND;
	if (e == EACCES || e == EPERM || e == EINVAL)
		return CD_RPC_INVALID_REQUEST;
	return CD_RPC_INTERNAL;
}

void cd_fs_res_errno(struct cd_fs_res *r, int e)
{
	r->code = errno_code(e);
	r->err = e;
	r->out.len = 0;
	cd_strbuf_printf(&r->out, "%s (os error %d)", strerror(e), e);
}

void cd_fs_res_error(struct cd_fs_res *r, int code, const char *fmt, ...)
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
static void op_open_regular(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	int fd = open(q->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		cd_fs_res_errno(r, errno);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		cd_fs_res_errno(r, errno);
		close(fd);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		cd_fs_res_error(r, CD_RPC_INVALID_REQUEST, "path `%s` is not a file", q->path);
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
 * Writes that lose nothing (fs/writeFile, and each file fs/copy makes). The
 * new contents go to a new file beside the target (".NAME.cordon-XXXXXX",
 * same directory, so same file system), which is renamed over the target
 * only once complete (with --durable-writes, after an fsync of the file,
 * and the directory is synced after): a full disk, an I/O error, a
 * cancelled request leave the old file as it was and no partial file. The
 * new file gets the old one's mode (without setuid and setgid) and owner;
 * a new path gets the requested mode less the umask. The path is resolved
 * first (symlinks, a dangling one included), so that the symlink stays
 * and its target is what is replaced.
 *
 * In place, as before, where a new file cannot stand for the old one: a
 * file with other hard links outside a sandbox (they keep sharing its
 * contents), one whose owner cannot be given to the new file, one that is
 * a mount point (a bind-mounted file), or when the directory takes no new
 * file (a sandbox that may write the file but not create files beside
 * it). In a sandbox, a file with other hard links is never written in
 * place: the other names may lie outside the allowed roots, and keep the
 * old contents.
 *
 * Never blocks: anything but a regular file is refused (EINVAL, "not a
 * file"; a directory: EISDIR) before it is opened, so a FIFO planted by a
 * sandboxed process cannot hang the server.
 */
struct target {
	int fd;
	char *tmp;  /* the new file, or NULL when writing in place */
	char *real; /* where tmp goes */
	bool durable;
};

#ifdef __linux__
void cd_fs_ops_umask_init(void)
{
}

/* The process's umask, read without changing it (umask() is not thread-safe to query). */
static mode_t current_umask(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	unsigned m = 022;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %o", &m) == 1)
			break;
	if (f)
		fclose(f);
	return (mode_t)m & 0777;
}
#else
/* No /proc to read it from: asked once, before any other thread can create a file. */
static mode_t saved_umask = 022;

void cd_fs_ops_umask_init(void)
{
	mode_t m = umask(0);
	umask(m);
	saved_umask = m & 0777;
}

static mode_t current_umask(void)
{
	return saved_umask;
}
#endif

/* fsync that reaches the disk: on macOS fsync leaves it to the drive's cache (F_FULLFSYNC). */
static int fsync_durable(int fd)
{
#ifdef F_FULLFSYNC
	if (fcntl(fd, F_FULLFSYNC) == 0)
		return 0;
#endif
	return fsync(fd);
}

/*
 * Where a write to path lands: the canonical path of the file it names,
 * following symlinks, a dangling one included (its target, in a directory
 * that exists). NULL with errno set.
 */
static char *resolve_target(const char *path)
{
	char *cur = cd_xstrdup(path);
	for (int hops = 0; hops < 40; hops++) {
		char *real = realpath(cur, NULL);
		if (real) {
			free(cur);
			return real;
		}
		if (errno != ENOENT)
			break;
		struct stat st;
		char *slash = strrchr(cur, '/');
		if (lstat(cur, &st) < 0 || !S_ISLNK(st.st_mode)) {
			/* Missing: its directory's canonical path and the name. */
			if (!slash || !slash[1]) {
				errno = ENOENT;
				break;
			}
			char *dir = slash == cur ? cd_xstrdup("/")
						 : cd_xstrndup(cur, (size_t)(slash - cur));
			char *rdir = realpath(dir, NULL);
			free(dir);
			char *r = rdir ? cd_path_join(rdir, slash + 1) : NULL;
			free(rdir);
			free(cur);
			return r;
		}
		char buf[PATH_MAX];
		ssize_t n = readlink(cur, buf, sizeof(buf) - 1);
		if (n < 0)
			break;
		buf[n] = '\0';
		char *next;
		if (buf[0] == '/' || !slash)
			next = cd_xstrdup(buf);
		else {
			char *dir = cd_xstrndup(cur, (size_t)(slash - cur) + 1);
			next = cd_xasprintf("%s%s", dir, buf);
			free(dir);
		}
		free(cur);
		cur = next;
		errno = ELOOP;
	}
	int e = errno;
	free(cur);
	errno = e;
	return NULL;
}

/* The old way: open the file itself, truncated. */
static int target_open_in_place(const char *path, mode_t mode, struct target *t)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || ftruncate(fd, 0) < 0) {
		int e = S_ISREG(st.st_mode) ? errno : EINVAL;
		close(fd);
		return -e;
	}
	t->fd = fd;
	return 0;
}

static int target_open(const char *path, mode_t mode, bool sandboxed, bool durable,
		       struct target *t)
{
	struct stat st, dst;
	*t = (struct target){ .fd = -1, .durable = durable };
	bool exists = stat(path, &st) == 0;
	if (!exists && errno != ENOENT)
		return -errno;
	if (exists && S_ISDIR(st.st_mode))
		return -EISDIR;
	if (exists && !S_ISREG(st.st_mode))
		return -EINVAL;
	bool linked = exists && st.st_nlink > 1;
	if (linked && !sandboxed)
		return target_open_in_place(path, mode, t);
	char *real = resolve_target(path);
	if (!real)
		return -errno;
	const char *slash = strrchr(real, '/');
	char *dir = slash == real ? cd_xstrdup("/") : cd_xstrndup(real, (size_t)(slash - real));
	const char *name = slash + 1;
	/* A mount point (a file bound from elsewhere) cannot be renamed over. */
	bool mounted = exists && (stat(dir, &dst) < 0 || dst.st_dev != st.st_dev);
	int fd = -1, e = 0;
	char *tmp = NULL;
	if (!mounted) {
		tmp = cd_xasprintf("%s/.%.200s.cordon-XXXXXX", dir, name);
		fd = mkostemp(tmp, O_CLOEXEC);
		e = fd < 0 ? errno : 0;
	}
	if (fd >= 0 && exists) {
		/* The old file's mode and owner (a fchown that changes nothing is skipped). */
		if (fchmod(fd, st.st_mode & 0777 & ~(mode_t)(S_ISUID | S_ISGID)) < 0 ||
		    ((st.st_uid != geteuid() || st.st_gid != getegid()) &&
		     fchown(fd, st.st_uid, st.st_gid) < 0))
			e = EPERM;
	} else if (fd >= 0) {
		if (fchmod(fd, mode & 0777 & ~current_umask()) < 0)
			e = errno;
	}
	free(dir);
	if (fd >= 0 && e) {
		close(fd);
		(void)unlink(tmp);
		fd = -1;
	}
	if (fd >= 0) {
		t->fd = fd;
		t->tmp = tmp;
		t->real = real;
		return 0;
	}
	free(tmp);
	free(real);
	/*
	 * No file beside it: a full disk or quota is the error (writing in
	 * place is what would lose the old contents); a directory that takes
	 * no new file, an owner that cannot be kept, a mount point: in place,
	 * unless other hard links forbid it in a sandbox.
	 */
	if (e == ENOSPC || e == EDQUOT || e == EIO)
		return -e;
	if (linked)
		return -(e ? e : EBUSY);
	return target_open_in_place(path, mode, t);
}

/* Write all of p at the file's offset off. */
static int pwrite_all(int fd, const unsigned char *p, size_t n, off_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		off += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Copy the contents of in into out in place (a rename that cannot be done: EBUSY). */
static int copy_into(int in, const char *path)
{
	struct target t = { .fd = -1 };
	int r = target_open_in_place(path, 0666, &t);
	unsigned char buf[64 * 1024];
	off_t off = 0;
	while (r == 0) {
		ssize_t n = pread(in, buf, sizeof(buf), off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : 0;
			break;
		}
		r = pwrite_all(t.fd, buf, (size_t)n, off);
		off += n;
	}
	if (t.fd >= 0 && close(t.fd) < 0 && r == 0)
		r = -errno;
	return r;
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = fsync_durable(fd) < 0 && errno != EINVAL ? -errno : 0;
	close(fd);
	return r;
}

/* fsync the directory holding path (its new entry). */
static int sync_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = !slash || slash == path ? cd_xstrdup("/")
					    : cd_xstrndup(path, (size_t)(slash - path));
	int r = sync_dir(dir);
	free(dir);
	return r;
}

/* Close the target; with r == 0 put a new file in place. Returns r or the first error. */
static int target_commit(struct target *t, int r)
{
	bool renamed = false;
	if (r == 0 && t->durable && fsync_durable(t->fd) < 0)
		r = -errno;
	if (t->tmp && r == 0) {
		if (rename(t->tmp, t->real) == 0)
			renamed = true;
		else if ((r = -errno) == -EBUSY)
			/* A mount point after all (a bind mount within one file system). */
			r = copy_into(t->fd, t->real);
	}
	if (close(t->fd) < 0 && r == 0)
		r = -errno;
	if (t->tmp) {
		if (renamed && t->durable)
			r = sync_dir_of(t->real);
		/* Not renamed: the new file goes, and the old one stays as it was. */
		if (!renamed)
			(void)unlink(t->tmp);
		free(t->tmp);
		free(t->real);
	}
	*t = (struct target){ .fd = -1 };
	return r;
}

static void op_write_file(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	struct target t;
	int e = target_open(q->path, 0666, q->sandboxed, q->durable, &t);
	if (e == -EINVAL) {
		cd_fs_res_error(r, CD_RPC_INVALID_REQUEST, "path `%s` is not a file", q->path);
		return;
	}
	if (e == 0)
		e = target_commit(&t, pwrite_all(t.fd, q->data, q->data_len, 0));
	if (e)
		cd_fs_res_errno(r, -e);
	else
		cd_strbuf_append(&r->out, "{}");
}

/*
 * fs/open "replace" (fs-write.c): the file, created (0666 less the umask)
 * or truncated, open for writing only; fs/writeBlock writes in place, at
 * the offsets it names. As for fs/writeFile: symlinks are followed, a
 * directory is EISDIR, anything but a regular file is refused before it is
 * opened (a FIFO planted by a sandboxed process cannot hang the server). In
 * a sandbox, a file with other hard links is not truncated in place: the
 * other names may lie outside the allowed roots, and keep the old contents;
 * a new empty file (the old one's mode and owner) takes its name, or the
 * open fails where fs/writeFile fails.
 */
static void op_open_write(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	struct stat st;
	struct target t = { .fd = -1 };
	int e = 0;
	bool exists = stat(q->path, &st) == 0;
	if (!exists && errno != ENOENT)
		e = -errno;
	else if (exists && S_ISDIR(st.st_mode))
		e = -EISDIR;
	else if (exists && !S_ISREG(st.st_mode))
		e = -EINVAL;
	else if (exists && st.st_nlink > 1 && q->sandboxed)
		e = target_open(q->path, 0666, true, false, &t);
	else if ((t.fd = open(q->path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
			      0666)) < 0)
		e = -errno;
	/*
	 * Truncated only once the descriptor says what it is: a name swapped
	 * since the stat (for a link to a file outside the roots) must not be
	 * emptied in place.
	 */
	else if (fstat(t.fd, &st) < 0)
		e = -errno;
	else if (!S_ISREG(st.st_mode))
		e = -EINVAL;
	else if (st.st_nlink > 1 && q->sandboxed) {
		close(t.fd);
		t.fd = -1;
		e = target_open(q->path, 0666, true, false, &t);
	} else if (ftruncate(t.fd, 0) < 0)
		e = -errno;
	if (e == 0 && t.tmp && rename(t.tmp, t.real) < 0) {
		e = -errno;
		(void)unlink(t.tmp);
	}
	if (e == 0 && t.tmp) {
		/* mkostemp's descriptor reads too: the new file, opened again for writing only. */
		struct stat a, b;
		int fd = open(t.real, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &b) < 0 || fstat(t.fd, &a) < 0 || a.st_dev != b.st_dev ||
		    a.st_ino != b.st_ino)
			e = fd < 0 ? -errno : -EBUSY;
		close(t.fd);
		t.fd = fd;
	}
	free(t.tmp);
	free(t.real);
	if (e == 0 && (fstat(t.fd, &st) < 0 || !S_ISREG(st.st_mode)))
		e = -EINVAL; /* swapped for something else since */
	if (e && t.fd >= 0)
		close(t.fd);
	if (e == -EINVAL)
		cd_fs_res_error(r, CD_RPC_INVALID_REQUEST, "path `%s` is not a file", q->path);
	else if (e)
		cd_fs_res_errno(r, -e);
	else
		r->fd = t.fd;
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

static void op_mkdir(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	int e = q->recursive ? -mkdir_p(q->path) : (mkdir(q->path, 0777) < 0 ? errno : 0);
	if (e)
		cd_fs_res_errno(r, e);
	else
		cd_strbuf_append(&r->out, "{}");
}

int64_t cd_fs_ms_of(const struct timespec *ts)
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

static void op_metadata(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	struct stat st, lst;
	int e;
	if (stat(q->path, &st) < 0) {
		cd_fs_res_errno(r, errno);
		return;
	}
	if (q->sandboxed && (e = sandbox_may_read(q->path, &st))) {
		cd_fs_res_errno(r, e);
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
#ifdef __APPLE__
			 (long long)cd_fs_ms_of(&st.st_mtimespec));
#else
			 (long long)cd_fs_ms_of(&st.st_mtim));
#endif
}

static void op_canonicalize(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	char *real = realpath(q->path, NULL);
	if (!real) {
		cd_fs_res_errno(r, errno);
		return;
	}
	struct stat st;
	int e = 0;
	if (q->sandboxed &&
	    (stat(real, &st) < 0 ? (e = errno) : (e = sandbox_may_read(real, &st)))) {
		free(real);
		cd_fs_res_errno(r, e);
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

static void op_read_dir(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	DIR *d = opendir(q->path);
	if (!d) {
		cd_fs_res_errno(r, errno);
		return;
	}
	size_t n = 0;
	cd_strbuf_append(&r->out, "{\"entries\":[");
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno) {
				cd_fs_res_errno(r, errno);
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
		if (++n > CD_FS_MAX_DIR_ENTRIES) {
			closedir(d);
			cd_fs_res_error(r, CD_RPC_INTERNAL,
					"fs/readDirectory returned %zu entries; limit is %d", n,
					CD_FS_MAX_DIR_ENTRIES);
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
	const struct cd_fs_walk_opts *o;
	struct dir_id *seen;
	size_t n_seen, cap_seen; /* open addressing, cap a power of two */
	struct walk_dir *queue;
	size_t n_queue, cap_queue;
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
	size_t cap = 0;
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
		/* Doubling: a directory of n names costs O(n), not O(n^2) (cd_strv_push counts). */
		if (*n + 2 > cap) {
			cap = cap ? 2 * cap : 64;
			*ret = cd_xreallocarray(*ret, cap, sizeof(**ret));
		}
		(*ret)[(*n)++] = cd_xstrdup(de->d_name);
		(*ret)[*n] = NULL;
	}
	if (*n)
		qsort(*ret, *n, sizeof(**ret), cmp_name);
	return 0;
}

static void op_walk(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	struct walk_state w = { .o = &q->walk };
	struct stat st;

	if (lstat(q->path, &st) < 0) {
		cd_fs_res_errno(r, errno);
		return;
	}
	/* A symlinked root is followed when following is asked for. */
	if (S_ISLNK(st.st_mode) && q->walk.follow && stat(q->path, &st) < 0)
		st.st_mode = 0;
	if (S_ISDIR(st.st_mode)) {
		seen_add(&w, st.st_dev, st.st_ino);
		w.cap_queue = 64;
		w.queue = cd_xcalloc(w.cap_queue, sizeof(*w.queue));
		w.queue[w.n_queue++] = (struct walk_dir){ cd_xstrdup(q->path), 0 };
	}
	uint64_t listed = 0;
	for (size_t i = 0; i < w.n_queue && !w.truncated; i++) {
		struct walk_dir cur = w.queue[i];
		if (cd_fs_cancelled()) {
			cd_fs_res_errno(r, ECANCELED);
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
			cd_fs_res_errno(r, e);
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
			if (w.n_queue == w.cap_queue) {
				w.cap_queue = 2 * w.cap_queue;
				w.queue = cd_xreallocarray(w.queue, w.cap_queue, sizeof(*w.queue));
			}
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
		if (cd_fs_cancelled()) {
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

static void op_remove(const struct cd_fs_req *q, struct cd_fs_res *r)
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
		cd_fs_res_errno(r, e);
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

/* Copy [off, end) of in to the same offsets of out (end < 0: to EOF); *ret_end: where it ended. */
static int copy_range(int in, int out, off_t off, off_t end, off_t *ret_end)
{
	/* On the stack: copies run on several worker threads at once. */
	unsigned char buf[128 * 1024];
	while (end < 0 || off < end) {
		if (cd_fs_cancelled())
			return -ECANCELED;
		size_t want = sizeof(buf);
		if (end >= 0 && (off_t)want > end - off)
			want = (size_t)(end - off);
		ssize_t n = pread(in, buf, want, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break; /* the end (it shrank meanwhile, or end < 0) */
		int r = pwrite_all(out, buf, (size_t)n, off);
		if (r < 0)
			return r;
		off += n;
	}
	*ret_end = off;
	return 0;
}

/*
 * Copy a regular file's contents into a new file. A file with holes
 * (fewer blocks than its size says) keeps them: only its data segments
 * (SEEK_DATA, SEEK_HOLE) are copied, and the size is set at the end. Any
 * other file (procfs and sysfs ones report no size) is read to its end.
 */
static int copy_data(int in, int out)
{
	struct stat st;
	off_t end = 0;
	if (fstat(in, &st) < 0)
		return -errno;
	if (st.st_size == 0 || (off_t)st.st_blocks * 512 >= st.st_size)
		return copy_range(in, out, 0, -1, &end);
	for (off_t pos = 0; pos < st.st_size;) {
		off_t data = lseek(in, pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* a hole to the end */
		if (data < 0)  /* no SEEK_DATA here after all */
			return copy_range(in, out, pos, -1, &end);
		off_t hole = lseek(in, data, SEEK_HOLE);
		int r = copy_range(in, out, data, hole < 0 ? -1 : hole, &end);
		if (r < 0)
			return r;
		if (hole < 0 || end < hole)
			break; /* read to its end */
		pos = hole;
	}
	/* A trailing hole. */
	return end < st.st_size && ftruncate(out, st.st_size) < 0 ? -errno : 0;
}

static int copy_regular(const char *src, const char *dst, mode_t mode, const struct cd_fs_req *q)
{
	int in = open(src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return -errno;
	struct target t;
	int r = target_open(dst, mode & 0777, q->sandboxed, q->durable, &t);
	if (r < 0) {
		close(in);
		return r;
	}
	r = copy_data(in, t.fd);
	close(in);
	return target_commit(&t, r);
}

/*
 * A recursive copy is not one operation: each file lands whole (see
 * target_open), but a failure midway leaves what was copied before it.
 * What that is goes into the error message.
 */
struct copy_stats {
	unsigned long files, dirs, links;
	char *failed; /* the source path the copy stopped at */
};

static int copy_dir(const char *src, const char *dst, unsigned depth, const struct cd_fs_req *q,
		    struct copy_stats *cs);

static int copy_tree(const char *src, const char *dst, unsigned depth, const struct cd_fs_req *q,
		     struct copy_stats *cs)
{
	struct stat st;
	int r = 0;
	if (lstat(src, &st) < 0) {
		r = -errno;
	} else if (S_ISLNK(st.st_mode)) {
		r = copy_symlink(src, dst);
		cs->links += r == 0;
	} else if (S_ISREG(st.st_mode)) {
		r = copy_regular(src, dst, st.st_mode, q);
		cs->files += r == 0;
	} else if (S_ISDIR(st.st_mode)) {
		if (depth > 4096)
			r = -ELOOP;
		else if (mkdir(dst, st.st_mode & 07777) == 0)
			cs->dirs++;
		else if (errno != EEXIST)
			r = -errno;
		/* There already: a copy into an existing directory merges. */
		if (r == 0)
			return copy_dir(src, dst, depth, q, cs);
	}
	/* Special files are skipped inside a recursive copy. */
	if (r < 0 && !cs->failed)
		cs->failed = cd_xstrdup(src);
	return r;
}

static int copy_dir(const char *src, const char *dst, unsigned depth, const struct cd_fs_req *q,
		    struct copy_stats *cs)
{
	char **names;
	size_t n;
	int r = list_sorted(src, &names, &n);
	if (r < 0 && !cs->failed)
		cs->failed = cd_xstrdup(src);
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (cd_fs_cancelled()) {
			r = -ECANCELED;
			break;
		}
		char *s = cd_path_join(src, names[i]);
		char *d = cd_path_join(dst, names[i]);
		r = copy_tree(s, d, depth + 1, q, cs);
		free(s);
		free(d);
	}
	cd_strv_free(names);
	if (r == 0 && q->durable)
		r = sync_dir(dst); /* its new entries */
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

static void op_copy(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	struct stat st;
	int e;
	if (lstat(q->path, &st) < 0) {
		cd_fs_res_errno(r, errno);
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!q->recursive) {
			cd_fs_res_error(
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
			cd_fs_res_error(r, CD_RPC_INVALID_REQUEST,
					"fs/copy cannot copy a directory to itself or one of its "
					"descendants");
			return;
		}
		struct copy_stats cs = { 0 };
		e = -copy_tree(q->path, q->dest, 0, q, &cs);
		if (e && (cs.files || cs.dirs || cs.links)) {
			/* Say what is left: the copy is not undone. */
			cd_fs_res_errno(r, e);
			cd_strbuf_printf(
				&r->out,
				"; the copy stopped at `%s`: what it made before is left in "
				"`%s` (%lu file%s, %lu director%s, %lu symlink%s; no file "
				"half written)",
				cs.failed ? cs.failed : q->path, q->dest, cs.files,
				cs.files == 1 ? "" : "s", cs.dirs, cs.dirs == 1 ? "y" : "ies",
				cs.links, cs.links == 1 ? "" : "s");
			free(cs.failed);
			return;
		}
		free(cs.failed);
	} else if (S_ISLNK(st.st_mode)) {
		e = -copy_symlink(q->path, q->dest);
	} else if (S_ISREG(st.st_mode)) {
		e = -copy_regular(q->path, q->dest, st.st_mode, q);
	} else {
		cd_fs_res_error(r, CD_RPC_INVALID_REQUEST,
				"fs/copy only supports regular files, directories, and symlinks");
		return;
	}
	if (!e && q->durable)
		e = -sync_dir_of(q->dest);
	if (e)
		cd_fs_res_errno(r, e);
	else
		cd_strbuf_append(&r->out, "{}");
}

/* Hidden files: none known here (in the helper, the sandbox masks them). */
static void op_discover(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	cd_discover_scan(q->path, NULL, &r->out);
}

static void (*const fs_ops[CD_FS_OP_COUNT])(const struct cd_fs_req *q, struct cd_fs_res *r) = {
	[CD_FS_READ_FILE] = op_open_regular, [CD_FS_OPEN] = op_open_regular,
	[CD_FS_WRITE_FILE] = op_write_file,  [CD_FS_MKDIR] = op_mkdir,
	[CD_FS_METADATA] = op_metadata,	     [CD_FS_CANONICALIZE] = op_canonicalize,
	[CD_FS_READ_DIR] = op_read_dir,	     [CD_FS_WALK] = op_walk,
	[CD_FS_REMOVE] = op_remove,	     [CD_FS_COPY] = op_copy,
	[CD_FS_OPEN_WRITE] = op_open_write,  [CD_FS_DISCOVER] = op_discover,
};

void cd_fs_do(const struct cd_fs_req *q, struct cd_fs_res *r)
{
	fs_ops[q->op](q, r);
}

/* ---- the helper's wire ---- */

struct helper_hdr {
	int32_t code;
	uint32_t has_fd;
	uint64_t len;
};

int cd_fs_res_send(int sock, const struct cd_fs_res *r)
{
	struct helper_hdr hdr = { .code = r->code, .has_fd = r->fd >= 0, .len = r->out.len };
	int e = cd_send_fd(sock, &hdr, sizeof(hdr), r->fd);
	if (e == 0 && r->out.len)
		e = write_all(sock, (const unsigned char *)r->out.buf, r->out.len);
	return e;
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

int cd_fs_res_recv(int sock, struct cd_fs_res *r, bool *timed_out)
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
 * A request: this header, then path, dest and data. The helper trusts
 * nothing of it but the server's word (it only ever runs sandboxed, and
 * only the server starts it), yet checks it whole: a bound on every length.
 */
#define REQ_MAGIC    0x51464443u /* "CDFQ" */
#define REQ_MAX_PATH (1u << 20)
#define REQ_MAX_DATA (1u << 30)

enum {
	REQ_RECURSIVE = 1u << 0,
	REQ_FORCE = 1u << 1,
	REQ_FOLLOW = 1u << 2,
	REQ_PRUNE_HIDDEN = 1u << 3,
	REQ_HAS_DEST = 1u << 4,
	REQ_DURABLE = 1u << 5,
};

struct req_hdr {
	uint32_t magic;
	uint32_t op;
	uint32_t flags;
	uint32_t path_len;
	uint32_t dest_len;
	uint32_t pad;
	uint64_t data_len;
	uint64_t max_depth, max_dirs, max_entries;
};

int cd_fs_req_send(int sock, const struct cd_fs_req *q)
{
	size_t pl = q->path ? strlen(q->path) : 0, dl = q->dest ? strlen(q->dest) : 0;
	if (pl > REQ_MAX_PATH || dl > REQ_MAX_PATH || q->data_len > REQ_MAX_DATA)
		return -E2BIG;
	struct req_hdr h = {
		.magic = REQ_MAGIC,
		.op = (uint32_t)q->op,
		.flags = (q->recursive ? REQ_RECURSIVE : 0) | (q->force ? REQ_FORCE : 0) |
			 (q->walk.follow ? REQ_FOLLOW : 0) |
			 (q->walk.prune_hidden ? REQ_PRUNE_HIDDEN : 0) |
			 (q->dest ? REQ_HAS_DEST : 0) | (q->durable ? REQ_DURABLE : 0),
		.path_len = (uint32_t)pl,
		.dest_len = (uint32_t)dl,
		.data_len = q->data_len,
		.max_depth = q->walk.max_depth,
		.max_dirs = q->walk.max_dirs,
		.max_entries = q->walk.max_entries,
	};
	int e = write_all(sock, (const unsigned char *)&h, sizeof(h));
	if (e == 0 && pl)
		e = write_all(sock, (const unsigned char *)q->path, pl);
	if (e == 0 && dl)
		e = write_all(sock, (const unsigned char *)q->dest, dl);
	if (e == 0 && q->data_len)
		e = write_all(sock, q->data, q->data_len);
	return e;
}

/* n bytes from fd into a new NUL-terminated buffer. */
static int read_string(int fd, size_t n, char **ret)
{
	char *s = cd_xmalloc(n + 1);
	int e = read_full(fd, s, n);
	if (e < 0 || memchr(s, 0, n)) {
		free(s);
		return e < 0 ? e : -EPROTO;
	}
	s[n] = '\0';
	*ret = s;
	return 0;
}

int cd_fs_req_recv(int sock, struct cd_fs_req *q)
{
	struct req_hdr h;
	memset(q, 0, sizeof(*q));
	int e = read_full(sock, &h, sizeof(h));
	if (e < 0)
		return e;
	if (h.magic != REQ_MAGIC || h.op >= CD_FS_OP_COUNT || h.path_len == 0 ||
	    h.path_len > REQ_MAX_PATH || h.dest_len > REQ_MAX_PATH || h.data_len > REQ_MAX_DATA ||
	    (!(h.flags & REQ_HAS_DEST) && h.dest_len))
		return -EPROTO;
	q->op = (enum cd_fs_op)h.op;
	q->recursive = h.flags & REQ_RECURSIVE;
	q->force = h.flags & REQ_FORCE;
	q->durable = h.flags & REQ_DURABLE;
	q->walk = (struct cd_fs_walk_opts){
		.max_depth = h.max_depth,
		.max_dirs = h.max_dirs,
		.max_entries = h.max_entries,
		.follow = h.flags & REQ_FOLLOW,
		.prune_hidden = h.flags & REQ_PRUNE_HIDDEN,
	};
	e = read_string(sock, h.path_len, &q->path);
	if (e == 0 && (h.flags & REQ_HAS_DEST))
		e = read_string(sock, h.dest_len, &q->dest);
	if (e == 0 && h.data_len) {
		q->data = cd_xmalloc(h.data_len);
		q->data_len = h.data_len;
		e = read_full(sock, q->data, h.data_len);
	}
	if (e < 0)
		cd_fs_req_done(q);
	return e;
}

/* A descriptor of O_PATH (Linux), which names a file without opening it. */
static bool is_o_path(int flags)
{
#ifdef O_PATH
	return flags & O_PATH;
#else
	(void)flags;
	return false;
#endif
}

const char *cd_fs_res_flaw(const struct cd_fs_req *q, const struct cd_fs_res *r)
{
	bool wants_fd =
		q->op == CD_FS_READ_FILE || q->op == CD_FS_OPEN || q->op == CD_FS_OPEN_WRITE;
	int mode = q->op == CD_FS_OPEN_WRITE ? O_WRONLY : O_RDONLY;
	if (r->code)
		return r->code == CD_RPC_INVALID_REQUEST || r->code == CD_RPC_INTERNAL ||
				       r->code == CD_RPC_INVALID_PARAMS ||
				       r->code == CD_RPC_NOT_FOUND
			       ? NULL
			       : "an unknown error code";
	if (wants_fd) {
		struct stat st;
		int fl;
		if (r->fd < 0 || r->out.len)
			return "a read without its file";
		if (fstat(r->fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    (fl = fcntl(r->fd, F_GETFL)) < 0 || (fl & O_ACCMODE) != mode || is_o_path(fl))
			return mode == O_RDONLY
				       ? "a descriptor that is not a regular file open for reading"
				       : "a descriptor that is not a regular file open for writing";
		return NULL;
	}
	if (r->fd >= 0)
		return "a descriptor it was not asked for";
	if (!r->out.len || memchr(r->out.buf, '\n', r->out.len))
		return "not one line";
	static const struct cd_json_limits lim = { .max_bytes = 64u << 20 };
	struct cd_json *v = NULL;
	struct cd_json_error jerr;
	memset(&jerr, 0, sizeof(jerr));
	int e = cd_json_parse(r->out.buf, r->out.len, &lim, &v, &jerr);
	bool object = e == 0 && v && v->type == CD_JSON_OBJECT;
	cd_json_free(v);
	return object ? NULL : "not a JSON object";
}

const char *cd_fs_op_params_struct(enum cd_fs_op op)
{
	/* clang-format off */
	static const char *const names[CD_FS_OP_COUNT] = {
		[CD_FS_READ_FILE]   = "struct WireFsReadFileParams",
		[CD_FS_OPEN]        = "struct WireFsOpenParams",
		[CD_FS_WRITE_FILE]  = "struct WireFsWriteFileParams",
		[CD_FS_MKDIR]       = "struct WireFsCreateDirectoryParams",
		[CD_FS_METADATA]    = "struct WireFsGetMetadataParams",
		[CD_FS_CANONICALIZE] = "struct WireFsCanonicalizeParams",
		[CD_FS_READ_DIR]    = "struct WireFsReadDirectoryParams",
		[CD_FS_WALK]        = "struct WireFsWalkParams",
		[CD_FS_REMOVE]      = "struct WireFsRemoveParams",
		[CD_FS_COPY]        = "struct WireFsCopyParams",
		[CD_FS_OPEN_WRITE]  = "struct WireFsOpenParams",
		[CD_FS_DISCOVER]    = "struct WireCapabilityRootsDiscoverParams",
	};
	/* clang-format on */
	return op >= 0 && op < CD_FS_OP_COUNT && names[op] ? names[op] : "params";
}
