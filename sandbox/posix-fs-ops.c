/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The real file-system shim for plan binding (core/plan.h): lstat, readlink,
 * a bounded read of regular files (".git" pointer files), reads at offsets
 * (git indexes), directory listings (glob expansion, the nested-repository
 * scan) and whether the caller could create a name in a directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include "core/plan.h"
#include "core/util.h"

static enum cd_file_type type_of_mode(mode_t mode)
{
	if (S_ISDIR(mode))
		return CD_FT_DIR;
	if (S_ISREG(mode))
		return CD_FT_REG;
	if (S_ISLNK(mode))
		return CD_FT_SYMLINK;
	return CD_FT_OTHER;
}

static int host_lstat_type(void *ctx, const char *path, enum cd_file_type *ret)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR) {
			*ret = CD_FT_MISSING;
			return 0;
		}
		return -errno;
	}
	*ret = type_of_mode(st.st_mode);
	return 0;
}

static int host_readlink(void *ctx, const char *path, char **ret)
{
	size_t size = 256;

	for (;;) {
		char *buf = cd_xmalloc(size);
		ssize_t n = readlink(path, buf, size);

		if (n < 0) {
			int r = -errno;

			free(buf);
			return r;
		}
		if ((size_t)n < size) {
			buf[n] = 0;
			*ret = buf;
			return 0;
		}
		/* Possibly truncated: try again with more room. */
		free(buf);
		if (size >= 1024 * 1024)
			return -ENAMETOOLONG;
		size *= 2;
	}
}

static int host_read_file(void *ctx, const char *path, size_t max, char **ret, size_t *ret_len)
{
	struct stat st;
	size_t len = 0;
	char *buf;
	int fd, r;

	/* O_NONBLOCK: a fifo planted in place of a file must not hang us. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	/*
	 * Room for the file as it is now (max can be large: a git index is
	 * read with a bound of hundreds of MiB), grown if it grows meanwhile.
	 */
	size_t cap = (uintmax_t)st.st_size < max ? (size_t)st.st_size : max;
	if (cap < 64)
		cap = max < 64 ? max : 64;
	buf = cd_xmalloc(cap + 1);
	while (len < max) {
		if (len == cap) {
			cap = cap > max / 2 ? max : cap * 2;
			buf = cd_xrealloc(buf, cap + 1);
		}
		ssize_t n = read(fd, buf + len, cap - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			free(buf);
			close(fd);
			return r;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = 0;
	*ret = buf;
	if (ret_len)
		*ret_len = len;
	return 0;
}

/* The descriptor travels as the handle, plus one so that it is never NULL. */
static int host_open_file(void *ctx, const char *path, void **ret_file, uint64_t *ret_size)
{
	struct stat st;
	int fd;

	/* O_NONBLOCK: a fifo planted in place of a file must not hang us. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	*ret_file = (void *)((intptr_t)fd + 1);
	*ret_size = (uint64_t)st.st_size;
	return 0;
}

static int host_read_at(void *ctx, void *file, uint64_t off, void *buf, size_t len)
{
	int fd = (int)((intptr_t)file - 1);

	for (size_t done = 0; done < len;) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shorter than its size said: truncated meanwhile */
		done += (size_t)n;
	}
	return 0;
}

static void host_close_file(void *ctx, void *file)
{
	close((int)((intptr_t)file - 1));
}

#ifdef __linux__
/* getdents64's record (the kernel's struct linux_dirent64). */
struct dirent64_rec {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/*
 * Straight getdents64 on the descriptor: opendir() would add an fstat and
 * two fcntl calls per directory, which the nested-repository scan of a
 * workspace (tens of thousands of directories) pays for every plan.
 */
static int host_read_dir(void *ctx, const char *path,
			 int (*fn)(void *arg, const char *name, enum cd_file_type type), void *arg)
{
	enum {
		BUF_SIZE = 32 * 1024
	};
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	char *buf = cd_xmalloc(BUF_SIZE);
	int r = 0;
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, BUF_SIZE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		for (long off = 0; r >= 0 && off < n;) {
			const struct dirent64_rec *de = (const void *)(buf + off);
			off += de->d_reclen;
			const char *nm = de->d_name;
			if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
				continue;
			enum cd_file_type type;
			switch (de->d_type) {
			case DT_DIR:
				type = CD_FT_DIR;
				break;
			case DT_REG:
				type = CD_FT_REG;
				break;
			case DT_LNK:
				type = CD_FT_SYMLINK;
				break;
			case DT_UNKNOWN: {
				/* Some file systems do not say: ask. */
				struct stat st;
				if (fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW) < 0) {
					if (errno == ENOENT)
						continue;
					r = -errno;
					continue;
				}
				type = type_of_mode(st.st_mode);
				break;
			}
			default:
				type = CD_FT_OTHER;
				break;
			}
			r = fn(arg, nm, type);
		}
		if (r < 0)
			break;
	}
	free(buf);
	close(fd);
	return r;
}
#else
/*
 * Elsewhere (the macOS front end, src/mac/): readdir(3). The d_type of
 * macOS's file systems is filled; DT_UNKNOWN is asked about as above.
 */
static int host_read_dir(void *ctx, const char *path,
			 int (*fn)(void *arg, const char *name, enum cd_file_type type), void *arg)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	int r = 0;
	struct dirent *de;
	for (errno = 0; r >= 0 && (de = readdir(d)); errno = 0) {
		const char *nm = de->d_name;
		if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
			continue;
		enum cd_file_type type = de->d_type == DT_DIR	? CD_FT_DIR
					 : de->d_type == DT_REG ? CD_FT_REG
					 : de->d_type == DT_LNK ? CD_FT_SYMLINK
								: CD_FT_OTHER;
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;
			if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno != ENOENT)
					r = -errno;
				continue;
			}
			type = type_of_mode(st.st_mode);
		}
		r = fn(arg, nm, type);
	}
	if (r >= 0 && errno)
		r = -errno;
	closedir(d);
	return r;
}
#endif

static int host_may_create(void *ctx, const char *path, bool *ret)
{
	struct stat st;

	/* Effective ids, supplementary groups, ACLs and capabilities, as the kernel checks. */
	if (faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) == 0) {
		*ret = true;
		return 0;
	}
	if (errno == EROFS) {
		*ret = false; /* the sandbox's mounts keep the host's read-only ones */
		return 0;
	}
	if (errno != EACCES && errno != EPERM)
		return -errno;
	/* Its owner could make it writable (a sandbox running as the owner too). */
	if (stat(path, &st) < 0)
		return -errno;
	*ret = st.st_uid == geteuid();
	return 0;
}

const struct cd_fs_ops cd_fs_ops_host = {
	.ctx = NULL,
	.lstat_type = host_lstat_type,
	.readlink = host_readlink,
	.read_file = host_read_file,
	.open_file = host_open_file,
	.read_at = host_read_at,
	.close_file = host_close_file,
	.read_dir = host_read_dir,
	.may_create = host_may_create,
};

/*
 * Binding one plan walks the same parents again for every entry (/tmp, the
 * workspace and the directories above it, four or five times each): a
 * directory seen once is taken as a directory for the rest of the bind.
 * Only directories: a missing name (a protected one, say) is asked again.
 * prepare and apply check every path they mount on again anyway.
 */
static int cached_lstat_type(void *ctx, const char *path, enum cd_file_type *ret)
{
	struct cd_fs_dir_cache *c = ctx;

	for (size_t i = 0; i < c->n; i++) {
		if (cd_streq(c->dirs[i], path)) {
			*ret = CD_FT_DIR;
			return 0;
		}
	}
	int r = host_lstat_type(NULL, path, ret);
	if (r == 0 && *ret == CD_FT_DIR && c->n < CD_ARRAY_SIZE(c->dirs))
		c->dirs[c->n++] = cd_xstrdup(path);
	return r;
}

void cd_fs_ops_host_cached(struct cd_fs_ops *ret, struct cd_fs_dir_cache *cache)
{
	memset(cache, 0, sizeof(*cache));
	*ret = cd_fs_ops_host;
	ret->ctx = cache;
	ret->lstat_type = cached_lstat_type;
}

void cd_fs_dir_cache_done(struct cd_fs_dir_cache *cache)
{
	for (size_t i = 0; i < cache->n; i++)
		free(cache->dirs[i]);
	cache->n = 0;
}
