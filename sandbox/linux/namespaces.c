/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Namespaces backend: a private mount namespace (inside a user namespace
 * when not root) with the plan's carve-outs: read-only binds of existing
 * paths, writable binds below them, masks on missing paths (protected
 * names) so that they cannot be created, and pins (directories
 * bound on themselves so that they cannot be renamed away from above the
 * carve-outs).
 *
 * Mounts use the new mount API (open_tree, mount_setattr, fsopen, fsmount,
 * move_mount; Linux 5.12, older than any kernel with Landlock ABI 1, 5.13):
 *  - the source and the target of every mount are one O_PATH fd opened in
 *    the child after unshare and checked against the device and inode the
 *    parent recorded, so a path swapped between prepare and apply is an
 *    error, not a mount of something else;
 *  - a read-only bind is made read-only recursively (AT_RECURSIVE), so a
 *    mount below a protected directory does not stay writable, which the
 *    classic MS_REMOUNT|MS_BIND|MS_RDONLY would only do for the top mount;
 *  - mount_setattr only changes the attributes named, so the flags a user
 *    namespace locks (nosuid, nodev, noexec, atime) are kept as they are,
 *    where a classic remount must restate them or fail with EPERM;
 *  - the clone is made read-only before it is attached: no window.
 *
 * The remaining race is the path walk itself in the child (a component
 * replaced by a symlink between prepare and apply): the final component is
 * opened O_NOFOLLOW and its identity checked; the directories above are the
 * plan's canonical paths. bubblewrap has the same window.
 *
 * A mask needs a mount point on the host: the parent creates a FIFO of
 * mode 0444 under the name and finish removes it. Not a directory: on ext4
 * creating and removing one costs three times as much, and a run makes up
 * to six masks. Not a regular file either: while the run lasts the host
 * sees the name too, and git, finding a .git that is a regular file, stops
 * with "invalid gitfile format" in every directory below (any directory
 * under /tmp, say); a .git that is neither a file nor a directory it walks
 * past, as if it were missing. Tools that walk trees (find, grep -r, rg,
 * tar, cp -r) skip or recreate FIFOs without opening them. The child mounts on it a symlink to a path
 * that cannot exist (MASK_LINK_TARGET, in procfs, which refuses new names):
 * in the sandbox the name looks missing (stat and every lookup below it fail
 * with ENOENT, so git's repository discovery walks past a masked .git), and
 * it cannot be created (EEXIST), written through, removed or renamed (EBUSY).
 *
 * Another sandbox may be able to write the directory a mask is made in, or
 * one above it, and swap it for a symlink at any moment. So the parent never
 * names a mask by its path: it opens the mask's directory without following
 * a symlink on the way, records which directory that is, and makes, links,
 * opens, checks and unlinks the mask by name in that descriptor (mask_dir).
 * A symlink on the way at creation is a refusal; at finish the mask is left
 * where it is (a later run adopts it), never removed from anywhere else.
 *
 * Masks are shared: concurrent runs with the same writable root (two
 * sessions in one workspace, or /tmp) mask the same names. So a mask file
 * is recognised by what it is, not by who made it: a FIFO of mode 0444
 * under a protected name (.git, .codex, .agents). A run that finds
 * one (made by a concurrent run, or left by a run that was killed) adopts
 * it. The parent holds a shared flock on it until finish; finish removes it
 * only if it can take the lock exclusively (no other run still uses it) and
 * it is still the same FIFO. Leftovers from a killed run, or from two
 * runs finishing at the same instant, are thus removed by the next run that
 * touches them.
 *
 * The masks a run makes in one directory (.git, .codex and .agents under a
 * writable root) are hard links of one FIFO: a link costs a directory
 * entry where mknod also allocates an inode, and one open file holds the
 * lock of all of them. The lock is per inode, so a run that shares some of
 * the names takes it as one (never a second open file with a lock of its
 * own, which would keep its own finish from the exclusive lock), and the
 * run that removes the names it used also removes the other protected
 * names of that inode beside them (sweep_group): they were left for the
 * last user by a run that could not take the lock exclusively.
 *
 * The host side (checking what binds mount, making the masks) is split from
 * prepare into prepare_host (backend.h). With a network namespace and a
 * forked child (the pid namespace's init) it is deferred: clone() leaves
 * the network namespace to the child, which creates it (about 0.3 ms of
 * kernel time) while the parent makes the masks, then receives what the
 * parent found (struct ns_fact) before it mounts anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/linux-util.h"

/* The mode of a mask FIFO on the host: with its type, what marks it as one. */
#define MASK_MODE 0444
/*
 * Where a mask's symlink points. procfs refuses to create names in its root,
 * so nothing can appear there, even for a sandbox allowed to write to /.
 */
#define MASK_LINK_TARGET "/proc/.cordon-masked"
#define MASK_LINK_NAME	 "mask"
/* In the same tmpfs: what a deny mask binds over a denied directory or file. */
#define DENY_DIR_NAME  "deny-dir"
#define DENY_FILE_NAME "deny-file"

struct ns_mount {
	enum cd_mount_op op;
	char *path;	 /* owned */
	char *step;	 /* owned, "ro bind '/w/.git'" */
	char *step_mask; /* owned, "mask on '/w/.git'", for a bind that turns out to be a mask */
	dev_t dev;
	ino_t ino;
	mode_t fmt;	  /* S_IFDIR, S_IFREG, ... */
	bool host_rdonly; /* the host mount holding path is read-only */
	bool mask;	  /* a mask file (ours or adopted): finish removes it when last */
	int lock_fd;	  /* O_RDONLY fd holding a LOCK_SH, or -1 */
	/*
	 * A mask that is another name of an inode whose lock an earlier mount
	 * holds (a hard link we made, or a second name of an adopted one):
	 * 1 + that mount's index; 0 when this mount holds its own lock.
	 */
	size_t lock_of;
	bool made; /* we created this FIFO: masks in its directory may link to it */
	/* The directory the mask FIFO is in (see mask_dir), when mask. */
	dev_t dir_dev;
	ino_t dir_ino;
	bool exclusive; /* finish: lock_fd got LOCK_EX, nobody else uses the inode */
	/* A mask FIFO found here may be adopted: a protected name, or a denied path. */
	bool adoptable;
	/* The file that must be at path (cd_mount.has_id): a hidden file of the caller's. */
	bool has_id;
	dev_t want_dev;
	ino_t want_ino;
};

/*
 * What the parent's prepare_host learned about one mount and the child needs
 * (a read-only bind may have turned into a mask), sent over the spawner's
 * socket when prepare_host runs after the child was created.
 */
struct ns_fact {
	uint32_t op; /* enum cd_mount_op */
	uint32_t fmt;
	uint64_t dev;
	uint64_t ino;
	uint32_t host_rdonly;
	uint32_t pad;
};

/* Larger plans prepare everything before the child exists (one message must carry the facts). */
#define MAX_FACTS_BYTES (64 * 1024)

/*
 * Mask directories whose descriptors are kept open while the run lasts, so
 * that finish need not open them again: a workspace-write run makes its masks
 * in two (the workspace and /tmp), or three (a workspace in a directory of
 * /tmp: that directory too). More are opened again at finish.
 */
#define KEPT_DIRS 3

/* A directory of masks: an O_PATH descriptor or -1, a mask path in it (borrowed), its identity. */
struct ns_dir {
	int fd;
	const char *of;
	dev_t dev;
	ino_t ino;
};

struct cd_backend_state {
	bool user_ns;
	bool mount_ns;
	bool pid_ns;  /* we are the init of a new pid namespace: mount its /proc */
	bool net_ns;  /* a new, empty network namespace (its loopback stays down) */
	bool ro_root; /* every mount read-only but the CD_MOUNT_WRITABLE trees (see lp->ro_root) */
	bool ipc_ns;  /* a new IPC namespace */
	bool private_pts;  /* a devpts instance of our own on /dev/pts (see lp->private_pts) */
	char pts_opts[80]; /* its mount options */
	bool private_tmp;  /* a tmpfs of our own on /tmp (see lp->private_tmp) */
	char tmp_opts[80]; /* its mount options */
	char uid_map[64];
	char gid_map[64];
	struct ns_mount *m; /* owned */
	size_t n;
	const char *step;
	int mask_src;  /* child: the detached tmpfs holding the mask symlink, or -1 */
	bool at_clone; /* the spawner creates the namespaces with clone(): apply does not unshare */
	/*
	 * prepare_host runs in the parent after the child was created (see
	 * defer_host in backend.h): apply unshares the network namespace
	 * itself, while the parent makes the mask mount points, and before
	 * mounting receives the facts on facts_fd.
	 */
	bool deferred;
	int facts_fd;			/* child's end of the spawner's socket, when deferred */
	struct ns_fact *facts;		/* owned, n entries, when deferred */
	const struct cd_linux_plan *lp; /* borrowed, from prepare to prepare_host */
	bool finished;
	bool abandoned; /* something may still run in the namespace: finish leaves the masks */
	/*
	 * The directories of masks (see mask_dir): the first KEPT_DIRS from
	 * prepare_host to finish, then one at a time in the last slot. The
	 * current one's descriptor and identity are copied to dir_fd, dir_dev
	 * and dir_ino.
	 */
	struct ns_dir dirs[KEPT_DIRS + 1];
	int dir_fd;
	dev_t dir_dev;
	ino_t dir_ino;
	bool no_openat2; /* for the tests: take open_dir_nofollow's fallback */
	/* The test hook's settings (see test_pause), borrowed from the environment, or NULL. */
	const char *pause;
	const char *pause_fifos;
};

static bool protected_name(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	for (size_t i = 0; cd_protected_names[i]; i++)
		if (cd_streq(base, cd_protected_names[i]))
			return true;
	return false;
}

/* The mount holding the lock of m's inode: m itself, or the one it shares it with. */
static struct ns_mount *lock_holder(struct cd_backend_state *s, struct ns_mount *m)
{
	return m->lock_of ? &s->m[m->lock_of - 1] : m;
}

/* Same directory: equal up to and including the last '/'. */
static bool same_dir(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');

	return sa && sb && sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0;
}

/*
 * openat2(2) (Linux 5.6) as the kernel's uapi has it, carried here for older
 * headers; the number is the same on every architecture (the unified table).
 */
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
struct ns_open_how {
	uint64_t flags;
	uint64_t mode;
	uint64_t resolve;
};
#define NS_RESOLVE_NO_SYMLINKS 0x04 /* and so no magic links (/proc/PID/fd/N) either */

/*
 * Open directory dir (absolute, normal) as an O_PATH descriptor without
 * following a symlink anywhere on the way: openat2 with RESOLVE_NO_SYMLINKS
 * (ELOOP at a symlink); where openat2 is missing (before 5.6, or filtered by
 * a seccomp policy around cordon), or no_openat2 (CORDON_TEST_DISABLE=openat2),
 * one component at a time with O_NOFOLLOW (ENOTDIR at a symlink). -errno.
 */
static int open_dir_nofollow(const char *dir, bool no_openat2)
{
	struct ns_open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = NS_RESOLVE_NO_SYMLINKS,
	};
	char name[NAME_MAX + 1];
	int fd, next;

	fd = no_openat2 ? -1 : (int)syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof(how));
	if (fd >= 0 || (!no_openat2 && errno != ENOSYS && errno != EPERM))
		return fd >= 0 ? fd : -errno;
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (const char *c = dir + 1; *c;) {
		size_t n = strcspn(c, "/");

		if (n > NAME_MAX) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(name, c, n);
		name[n] = '\0';
		next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		cd_close_keep_errno(fd);
		if (next < 0)
			return -errno;
		fd = next;
		c += n;
		if (*c == '/')
			c++;
	}
	return fd;
}

/* Close the mask directories: the last slot only, or all of them. */
static void close_mask_dirs(struct cd_backend_state *s, bool all)
{
	for (size_t i = all ? 0 : KEPT_DIRS; i <= KEPT_DIRS; i++) {
		if (s->dirs[i].fd >= 0)
			close(s->dirs[i].fd);
		s->dirs[i].fd = -1;
		s->dirs[i].of = NULL;
	}
	s->dir_fd = -1;
}

/*
 * The directory holding the mask path, for every host-side operation on the
 * mask (make, link, open, check, unlink): a concurrent sandbox that may write
 * a directory on the way could otherwise swap it for a symlink between two
 * system calls on the path, and have cordon make or remove a name in a
 * directory no sandbox may write (the red team did, issue 21). So the
 * directory is opened without following any symlink (open_dir_nofollow:
 * the plan's paths are canonical, so a symlink on the way is a change) and
 * each operation is an *at call on that descriptor; s->dir_dev and
 * s->dir_ino say which directory it is, and a mask records them: finish
 * removes a mask only from the directory it was made in. The descriptors
 * are owned by s: one directory is opened once for all its masks (the three
 * protected names), and prepare_host keeps the first KEPT_DIRS (keep) until
 * finish, which finds the masks' directories there as they were made, moved
 * or not. Returns the descriptor, with *ret_name the last component of path,
 * or -errno.
 */
static int mask_dir(struct cd_backend_state *s, const char *path, const char **ret_name, bool keep)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	struct ns_dir *d = NULL;
	struct stat st;
	size_t n;
	int fd;

	/* Mount paths are absolute and normal, never "/" (ns_prepare checks). */
	if (!slash || !slash[1])
		return -EINVAL;
	*ret_name = slash + 1;
	for (size_t i = 0; i <= KEPT_DIRS && !d; i++)
		if (s->dirs[i].fd >= 0 && same_dir(s->dirs[i].of, path))
			d = &s->dirs[i];
	if (!d) {
		n = slash == path ? 1 : (size_t)(slash - path);
		if (n >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, n);
		dir[n] = '\0';
		fd = open_dir_nofollow(dir, s->no_openat2);
		if (fd < 0)
			return fd;
		if (fstat(fd, &st) < 0) {
			cd_close_keep_errno(fd);
			return -errno;
		}
		for (size_t i = 0; i < KEPT_DIRS && keep && !d; i++)
			if (s->dirs[i].fd < 0)
				d = &s->dirs[i];
		if (!d) {
			close_mask_dirs(s, false);
			d = &s->dirs[KEPT_DIRS];
		}
		*d = (struct ns_dir){ .fd = fd, .of = path, .dev = st.st_dev, .ino = st.st_ino };
	}
	s->dir_fd = d->fd;
	s->dir_dev = d->dev;
	s->dir_ino = d->ino;
	return d->fd;
}

/* m is a mask in the directory mask_dir() opened last. */
static void set_mask(struct cd_backend_state *s, struct ns_mount *m, dev_t dev, ino_t ino)
{
	m->dev = dev;
	m->ino = ino;
	m->fmt = S_IFIFO;
	m->mask = true;
	m->dir_dev = s->dir_dev;
	m->dir_ino = s->dir_ino;
}

/* The reason for a mask_dir() failure r other than ENOENT, for *reterr. */
static char *dir_changed(const char *path, int r)
{
	return cd_xasprintf("namespaces: cannot reach the directory of '%s' without crossing a "
			    "symlink: %s (it changed since the plan was built; run again)",
			    path, strerror(-r));
}

/*
 * Test hook, for the races on the host side of masks (a concurrent sandbox
 * that swaps a mask's directory for a symlink): CORDON_TEST_PAUSE, a comma
 * list of POINT:PATH, stops the parent at POINT for the mask PATH
 * ("mask-create": before it makes the mask; "mask-unlink": after checking the
 * mask, before unlinking it) until the test lets it go, through two FIFOs in
 * $CORDON_TEST_PAUSE_FIFOS: it opens "paused" for writing and writes POINT
 * there (the test's read of it returns: cordon is at the point), then reads
 * "resume" to its end (the test opens it for writing and closes it). It only
 * ever delays: whatever goes wrong with the FIFOs, cordon carries on as it
 * would have.
 */
static void test_pause(const struct cd_backend_state *s, const char *point, const char *path)
{
	size_t n = strlen(point), plen = strlen(path);
	char fifo[PATH_MAX], buf[64];
	const char *v = s->pause;
	struct stat st;
	bool hit = false;
	int fd;

	while (v && *v && !hit) {
		size_t len = strcspn(v, ",");

		hit = len == n + 1 + plen && strncmp(v, point, n) == 0 && v[n] == ':' &&
		      strncmp(v + n + 1, path, plen) == 0;
		v += len;
		if (*v == ',')
			v++;
	}
	if (!hit || !s->pause_fifos)
		return;
	/* FIFOs only: a file of another kind there is neither written nor waited on. */
	snprintf(fifo, sizeof(fifo), "%s/paused", s->pause_fifos);
	fd = open(fifo, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
		close(fd);
		return;
	}
	(void)!write(fd, point, n);
	(void)!write(fd, "\n", 1);
	close(fd);
	snprintf(fifo, sizeof(fifo), "%s/resume", s->pause_fifos);
	fd = open(fifo, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	while (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

/*
 * Unlink name, in the directory of the mask h, if it is still h's FIFO
 * (dev/ino) and the directory is still the one h was made in. Anything else
 * there, or a directory at that path that is not that one (renamed away and
 * replaced), is not ours: it is left alone (a mask whose directory moved
 * stays in it, a FIFO of mode 0444). Between the check and the unlink only a
 * writer of that directory can change the name, and what it puts there it
 * could remove itself.
 */
static void unlink_if_same(struct cd_backend_state *s, const struct ns_mount *h, const char *name)
{
	const char *ignored;
	struct stat st;
	int dfd;

	dfd = mask_dir(s, h->path, &ignored, false);
	if (dfd < 0 || s->dir_dev != h->dir_dev || s->dir_ino != h->dir_ino)
		return;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISFIFO(st.st_mode) ||
	    st.st_dev != h->dev || st.st_ino != h->ino)
		return;
	if (s->pause) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%.*s/%s", (int)(ignored - 1 - h->path), h->path,
			 name);
		test_pause(s, "mask-unlink", path);
	}
	(void)unlinkat(dfd, name, 0);
}

/*
 * Names of h's inode that none of our mounts had, left in its directory by
 * a run that shared it with us and finished first (it could not take the
 * lock exclusively, so it left them to the last user): the protected names
 * next to h's, which are the only names a run links together.
 */
static void sweep_group(struct cd_backend_state *s, const struct ns_mount *h)
{
	struct stat st;

	if (fstat(h->lock_fd, &st) < 0 || st.st_nlink == 0)
		return;
	for (size_t i = 0; cd_protected_names[i]; i++)
		unlink_if_same(s, h, cd_protected_names[i]);
}

static void ns_finish(struct cd_backend_state *s)
{
	if (!s || s->finished)
		return;
	s->finished = true;
	/* Each inode we use once: the lock of a shared inode is held by one mount. */
	for (size_t i = 0; i < s->n; i++) {
		struct ns_mount *m = &s->m[i];

		m->exclusive = !s->abandoned && m->mask && m->lock_fd >= 0 &&
			       flock(m->lock_fd, LOCK_EX | LOCK_NB) == 0;
	}
	/* Reverse order: a mask below another mount point goes first. */
	for (size_t i = s->n; i-- > 0;) {
		struct ns_mount *m = &s->m[i];

		/* Only while still the same FIFO: anything else there is not ours. */
		if (m->mask && lock_holder(s, m)->exclusive)
			unlink_if_same(s, m, strrchr(m->path, '/') + 1);
	}
	for (size_t i = 0; i < s->n; i++) {
		struct ns_mount *m = &s->m[i];

		if (m->exclusive && protected_name(m->path))
			sweep_group(s, m);
		m->mask = false;
		m->exclusive = false;
		if (m->lock_fd >= 0) {
			close(m->lock_fd);
			m->lock_fd = -1;
		}
	}
	close_mask_dirs(s, true);
}

/*
 * Removing a mask file on the host detaches the mask mounted on it in
 * every namespace, the abandoned one included: leave them to a later run.
 */
static void ns_abandon(struct cd_backend_state *s)
{
	if (s)
		s->abandoned = true;
}

static void ns_destroy(struct cd_backend_state *s)
{
	if (!s)
		return;
	/* A spawn that failed before the child ran still removes its masks. */
	ns_finish(s);
	for (size_t i = 0; i < s->n; i++) {
		free(s->m[i].path);
		free(s->m[i].step);
		free(s->m[i].step_mask);
	}
	free(s->m);
	free(s->facts);
	free(s);
}

static bool type_matches(enum cd_file_type t, mode_t fmt)
{
	switch (t) {
	case CD_FT_DIR:
		return fmt == S_IFDIR;
	case CD_FT_REG:
		return fmt == S_IFREG;
	case CD_FT_OTHER:
		return fmt != S_IFDIR && fmt != S_IFREG && fmt != S_IFLNK;
	case CD_FT_MISSING:
	case CD_FT_SYMLINK:
	case CD_FT_COUNT:
		break;
	}
	return false;
}

/*
 * Take the shared lock on a mask file. A run that is finishing holds it
 * exclusively for as long as it takes to check and unlink the file: wait
 * for that (bounded: the holder could be a stuck or hostile process), then
 * make sure the file was not unlinked meanwhile. 0; -ESTALE when it is gone
 * (make a new one); -EBUSY when the lock never came.
 */
static int lock_mask(int fd)
{
	struct stat st;

	for (int i = 0; flock(fd, LOCK_SH | LOCK_NB) < 0; i++) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (i >= 200)
			return -EBUSY;
		nanosleep(&(struct timespec){ .tv_nsec = 500 * 1000 }, NULL);
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	return st.st_nlink > 0 ? 0 : -ESTALE;
}

/* An earlier mount of ours that holds the lock of the inode dev/ino, or NULL. */
static struct ns_mount *find_holder(struct cd_backend_state *s, const struct ns_mount *m, dev_t dev,
				    ino_t ino)
{
	for (struct ns_mount *o = s->m; o < m; o++)
		if (o->mask && o->lock_fd >= 0 && o->dev == dev && o->ino == ino)
			return o;
	return NULL;
}

/*
 * Make m's mask as another name of a mask FIFO we made in the same
 * directory (a protected name next to another): a hard link costs a
 * directory entry where mknod also allocates an inode (on ext4 a third of
 * the time or less), and the group shares one open file and one lock, so
 * finish closes, and the file system frees, one inode instead of three.
 * Linked through /proc/self/fd: exactly our inode, whatever the name
 * points to now, as name in dfd (mask_dir), the directory it was made in.
 * 0 when made; -EEXIST when the name exists; any other error: make a FIFO of
 * its own instead.
 */
static int link_mask(struct cd_backend_state *s, struct ns_mount *m, int dfd, const char *name)
{
	char src[64];

	if (!protected_name(m->path))
		return -EINVAL;
	for (struct ns_mount *o = s->m; o < m; o++) {
		if (!o->made || o->lock_fd < 0 || !same_dir(o->path, m->path) ||
		    o->dir_dev != s->dir_dev || o->dir_ino != s->dir_ino)
			continue;
		snprintf(src, sizeof(src), "/proc/self/fd/%d", o->lock_fd);
		if (linkat(AT_FDCWD, src, dfd, name, AT_SYMLINK_FOLLOW) < 0)
			return -errno;
		set_mask(s, m, o->dev, o->ino);
		m->lock_of = (size_t)(o - s->m) + 1;
		return 0;
	}
	return -ENOENT;
}

/*
 * Take over an existing mask (see the top comment): a FIFO of mode 0444
 * under a protected name. On success m describes it, holds a shared lock on
 * it and is marked for removal when last. -ENOENT when the path is
 * anything else, -ESTALE when it is gone, a mask_dir() error other than
 * ENOENT (-ELOOP: a symlink on the way), or a lock_mask() error.
 */
static int adopt_mask(struct cd_backend_state *s, struct ns_mount *m)
{
	struct ns_mount *h;
	const char *name;
	struct stat st;
	int dfd, fd, r;

	if (!m->adoptable)
		return -ENOENT;
	dfd = mask_dir(s, m->path, &name, true);
	if (dfd < 0)
		return dfd == -ENOENT ? -ESTALE : dfd;
	/*
	 * O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
	 * Whoever made it: a root run and an unprivileged run share /tmp, and
	 * each must be able to use the other's mask. Removing another user's
	 * 0444 FIFO is harmless (in a sticky directory the kernel refuses it
	 * anyway, and the next run retries).
	 */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESTALE : -ENOENT;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode) || (st.st_mode & 07777) != MASK_MODE) {
		close(fd);
		return -ENOENT;
	}
	/*
	 * Another name of an inode we hold already (a run links the masks of
	 * one directory together): share that lock. A second open file with
	 * its own shared lock would keep finish from ever taking it exclusively.
	 */
	h = find_holder(s, m, st.st_dev, st.st_ino);
	if (h) {
		close(fd);
		m->lock_of = (size_t)(h - s->m) + 1;
		set_mask(s, m, st.st_dev, st.st_ino);
		return 0;
	}
	r = lock_mask(fd);
	if (r < 0) {
		close(fd);
		return r;
	}
	m->lock_fd = fd;
	set_mask(s, m, st.st_dev, st.st_ino);
	return 0;
}

static int prepare_mask(struct cd_backend_state *s, struct ns_mount *m, char **reterr);

/*
 * A hidden file (ns_mount.has_id) that is no longer at its path: a mask
 * there would cover whatever is there now, and leave the file readable
 * wherever it went. The caller's own check said it was there; this is the
 * last look, with no path walk but the one the mount needs anyway.
 */
static char *hidden_gone(const char *path, const char *why)
{
	return cd_xasprintf("namespaces: hidden file '%s' is no longer the file that was "
			    "hidden (%s): the sandbox is not made, since it could reach the "
			    "file where it is now",
			    path, why);
}

/*
 * A hidden regular file with another name (a hard link, made at any time)
 * is readable through it wherever the sandbox may read: a mask covers one
 * name only. (The caller's socket has a wall of its own behind the mask,
 * cordon serve's judgement of its peers.) 0, or -ESTALE with *reterr.
 */
static int hidden_linked(const char *path, const struct stat *st, char **reterr)
{
	if (!S_ISREG(st->st_mode) || st->st_nlink == 1)
		return 0;
	*reterr = cd_xasprintf("namespaces: hidden file '%s' has %ju names (hard links): the "
			       "sandbox is not made, since it could read the file through another; "
			       "remove the other links",
			       path, (uintmax_t)st->st_nlink);
	return -ESTALE;
}

/*
 * A hidden file inside a denied directory (cd_id_check): no mount of its
 * own, but the same last look as a hidden file's mask gets (prepare_bind),
 * since moved out of the directory it would be readable where it went.
 */
static int check_id(const struct cd_id_check *c, char **reterr)
{
	struct stat st;
	int fd, r;

	fd = open(c->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		*reterr = hidden_gone(c->path, strerror(-r));
		return r == -ENOENT || r == -ENOTDIR || r == -ELOOP ? -ESTALE : r;
	}
	close(fd);
	if (st.st_dev != (dev_t)c->dev || st.st_ino != (ino_t)c->ino) {
		*reterr = hidden_gone(c->path, "another file is at its path");
		return -ESTALE;
	}
	return hidden_linked(c->path, &st, reterr);
}

static int prepare_bind(struct cd_backend_state *s, const struct cd_linux_plan *lp,
			struct ns_mount *m, char **reterr)
{
	const struct cd_plan_path *pp;
	struct statvfs sv;
	struct stat st;
	int fd, r;

	fd = open(m->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && m->has_id) {
		/* Never a mask on the missing name: the file itself is elsewhere now. */
		r = -errno;
		*reterr = hidden_gone(m->path, strerror(-r));
		return r == -ENOENT || r == -ENOTDIR || r == -ELOOP ? -ESTALE : r;
	}
	if (fd < 0 && errno == ENOENT && (m->op == CD_MOUNT_RO_BIND || m->op == CD_MOUNT_DENY) &&
	    m->adoptable) {
		/*
		 * The plan saw a protected or denied name that a concurrent run's mask
		 * provided, and that run has removed it since: it is missing
		 * now, so mask it ourselves.
		 */
		m->op = CD_MOUNT_MASK;
		return prepare_mask(s, m, reterr);
	}
	if (fd < 0) {
		r = -errno;
		*reterr = cd_xasprintf("namespaces: cannot open '%s': %s", m->path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0 || fstatvfs(fd, &sv) < 0) {
		r = -errno;
		close(fd);
		*reterr = cd_xasprintf("namespaces: cannot stat '%s': %s", m->path, strerror(-r));
		return r;
	}
	close(fd);
	if (m->has_id && (st.st_dev != m->want_dev || st.st_ino != m->want_ino)) {
		*reterr = hidden_gone(m->path, "another file is at its path");
		return -ESTALE;
	}
	if (m->has_id) {
		r = hidden_linked(m->path, &st, reterr);
		if (r < 0)
			return r;
	}
	m->fmt = st.st_mode & S_IFMT;
	pp = cd_plan_find(lp->plan, m->path);
	if (m->fmt == S_IFLNK || (pp && !type_matches(pp->type, m->fmt)) ||
	    (m->op == CD_MOUNT_PIN && m->fmt != S_IFDIR)) {
		*reterr = cd_xasprintf("namespaces: '%s' changed type since the plan was built",
				       m->path);
		return -ESTALE;
	}
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->host_rdonly = sv.f_flag & ST_RDONLY;
	if ((m->op != CD_MOUNT_RO_BIND && m->op != CD_MOUNT_DENY) || m->fmt != S_IFIFO)
		return 0;
	/*
	 * A mask left by a concurrent or killed run: mask it the same way
	 * (the sandbox sees what it would see had the name been missing) and
	 * share its removal.
	 */
	r = adopt_mask(s, m);
	if (r == -ENOENT)
		return 0; /* a file of the user's: bind it read-only */
	m->op = CD_MOUNT_MASK;
	if (r == 0 && (m->dev != st.st_dev || m->ino != st.st_ino)) {
		/* Replaced since the plan looked: still a mask, but not what it saw. */
		r = -ESTALE;
		if (m->lock_fd >= 0)
			close(m->lock_fd);
		m->lock_fd = -1;
		m->lock_of = 0;
		m->mask = false;
	}
	if (r == -ESTALE) /* removed since: make our own */
		return prepare_mask(s, m, reterr);
	if (r == -ELOOP || r == -ENOTDIR)
		*reterr = dir_changed(m->path, r);
	else if (r < 0)
		*reterr = cd_xasprintf("namespaces: cannot share the mask on '%s': %s", m->path,
				       strerror(-r));
	return r;
}

static int prepare_mask(struct cd_backend_state *s, struct ns_mount *m, char **reterr)
{
	const char *name;
	struct stat st;
	int dfd, r;

	test_pause(s, "mask-create", m->path);
	/* A few rounds: a mask we find may be unlinked by a finishing run as we take it. */
	for (int round = 0;; round++) {
		dfd = mask_dir(s, m->path, &name, true);
		if (dfd < 0) {
			r = dfd;
			break;
		}
		r = link_mask(s, m, dfd, name);
		if (r == 0)
			return 0;
		if (r != -EEXIST && mknodat(dfd, name, S_IFIFO | MASK_MODE, 0) == 0) {
			m->lock_fd =
				openat(dfd, name,
				       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
			if (m->lock_fd >= 0)
				goto made;
			r = -errno;
			(void)unlinkat(dfd, name, 0); /* just made: do not leave it behind */
			*reterr = cd_xasprintf("namespaces: cannot open the mount point '%s': %s",
					       m->path, strerror(-r));
			return r;
		}
		if (r != -EEXIST)
			r = -errno;
		if (r != -EEXIST)
			break;
		/* A concurrent run may have just made the same mask: share it. */
		r = adopt_mask(s, m);
		if (r == 0)
			return 0;
		if (r == -ESTALE && round < 3)
			continue;
		if (r == -ENOENT)
			*reterr = cd_xasprintf("namespaces: '%s' appeared after binding; run again",
					       m->path);
		else if (r == -ELOOP || r == -ENOTDIR)
			*reterr = dir_changed(m->path, r);
		else
			*reterr = cd_xasprintf("namespaces: cannot share the mask on '%s': %s",
					       m->path, strerror(-r));
		return r == -ENOENT ? -EEXIST : r;
	}
	if (r == -ENOENT)
		*reterr = cd_xasprintf("namespaces: cannot mask missing path '%s': the "
				       "directory it would be in does not exist either; "
				       "create that directory or drop the entry",
				       m->path);
	else if (r == -ELOOP || r == -ENOTDIR)
		*reterr = dir_changed(m->path, r);
	else
		*reterr = cd_xasprintf("namespaces: cannot create the mount point '%s' "
				       "that masks the missing path: %s",
				       m->path, strerror(-r));
	return r;

made:
	/* The umask may have taken bits away: the mode is what marks a mask. */
	r = fstat(m->lock_fd, &st) < 0 ? -errno : !S_ISFIFO(st.st_mode) ? -ESTALE : 0;
	if (r == 0 && (st.st_mode & 07777) != MASK_MODE && fchmod(m->lock_fd, MASK_MODE) < 0)
		r = -errno;
	if (r < 0) {
		close(m->lock_fd);
		m->lock_fd = -1;
		/* Replaced between mknod and open (-ESTALE): not ours to remove. */
		if (r != -ESTALE)
			(void)unlinkat(dfd, name, 0);
		*reterr = cd_xasprintf("namespaces: cannot set up the mount point '%s': %s",
				       m->path, strerror(-r));
		return r;
	}
	set_mask(s, m, st.st_dev, st.st_ino);
	m->made = true;
	/*
	 * Until this lock is held, a run that adopted the new FIFO could
	 * finish and unlink it: then fail (the child would not find it anyway).
	 */
	r = lock_mask(m->lock_fd);
	if (r < 0) {
		struct stat now;
		/* Ours and still there (the lock itself failed): do not leave it behind. */
		if (r != -ESTALE && fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_dev == m->dev && now.st_ino == m->ino)
			(void)unlinkat(dfd, name, 0);
		m->mask = false;
		m->made = false;
		*reterr = cd_xasprintf("namespaces: cannot lock '%s': %s", m->path, strerror(-r));
		return r;
	}
	return 0;
}

static int ns_prepare(const struct cd_linux_plan *lp, struct cd_backend_state **ret_state,
		      char **reterr)
{
	struct cd_backend_state *s;
	int r;

	*ret_state = NULL;
	if (!lp->sandboxed || (!lp->mount_ns && !lp->user_ns && !lp->net_ns))
		return 0;
	if ((lp->n_mounts > 0 || lp->n_id_checks > 0) && !lp->mount_ns) {
		*reterr = cd_xasprintf("namespaces: the plan has mounts but no mount namespace");
		return -EINVAL;
	}

	s = cd_xcalloc(1, sizeof(*s));
	s->user_ns = lp->user_ns;
	s->mount_ns = lp->mount_ns;
	s->pid_ns = lp->pid_ns;
	s->net_ns = lp->net_ns;
	s->ro_root = lp->ro_root;
	s->ipc_ns = lp->ipc_ns;
	/* Where the host has no devpts on /dev/pts there are no terminals there to hide. */
	s->private_pts = lp->private_pts && cd_linux_is_devpts("/dev/pts");
	snprintf(s->pts_opts, sizeof(s->pts_opts), "newinstance,ptmxmode=%s,mode=0620,max=%d",
		 lp->private_ptmx ? "0666" : "0000", CD_PRIVATE_PTS_MAX);
	if (lp->private_tmp) {
		struct stat st;
		if (lstat("/tmp", &st) < 0 || !S_ISDIR(st.st_mode)) {
			*reterr = cd_xstrdup("namespaces: a private /tmp needs /tmp to be a "
					     "directory, and it is not (or is missing)");
			ns_destroy(s);
			return -ENOTDIR;
		}
		/*
		 * Inodes bounded too: empty files take no space but kernel memory.
		 * As many as the size has pages, plus some for directories.
		 */
		s->private_tmp = true;
		snprintf(s->tmp_opts, sizeof(s->tmp_opts), "size=%llu,nr_inodes=%llu,mode=1777",
			 (unsigned long long)lp->private_tmp_size,
			 (unsigned long long)(lp->private_tmp_size / 4096 + 1024));
	}
	s->mask_src = -1;
	for (size_t i = 0; i <= KEPT_DIRS; i++)
		s->dirs[i].fd = -1;
	s->dir_fd = -1;
	s->no_openat2 = cd_linux_test_disabled("openat2");
	s->step = "prepare";
	s->pause = getenv("CORDON_TEST_PAUSE");
	s->pause_fifos = getenv("CORDON_TEST_PAUSE_FIFOS");
	if (s->user_ns) {
		/* Map only ourselves: the command keeps its uid and gid, and no others exist. */
		snprintf(s->uid_map, sizeof(s->uid_map), "%u %u 1\n", (unsigned)geteuid(),
			 (unsigned)geteuid());
		snprintf(s->gid_map, sizeof(s->gid_map), "%u %u 1\n", (unsigned)getegid(),
			 (unsigned)getegid());
	}

	s->facts_fd = -1;
	s->lp = lp;
	s->m = cd_xcalloc(lp->n_mounts ? lp->n_mounts : 1, sizeof(*s->m));
	for (size_t i = 0; i < lp->n_mounts; i++) {
		const struct cd_mount *in = &lp->mounts[i];
		struct ns_mount *m = &s->m[s->n++];

		m->op = in->op;
		m->path = cd_xstrdup(in->path);
		m->lock_fd = -1;
		m->has_id = in->has_id;
		m->want_dev = (dev_t)in->dev;
		m->want_ino = (ino_t)in->ino;
		m->adoptable =
			protected_name(m->path) ||
			(lp->plan && cd_plan_access(lp->plan, m->path, NULL) == CD_ACCESS_DENY);
		if (!cd_path_is_normal(m->path) || cd_streq(m->path, "/")) {
			*reterr = cd_xasprintf("namespaces: bad mount path '%s'", m->path);
			r = -EINVAL;
			goto fail;
		}
		switch (in->op) {
		case CD_MOUNT_RO_BIND:
			m->step = cd_xasprintf("read-only bind of '%s'", m->path);
			break;
		case CD_MOUNT_RW_BIND:
			m->step = cd_xasprintf("writable bind of '%s'", m->path);
			break;
		case CD_MOUNT_PIN:
			m->step = cd_xasprintf("pin of '%s'", m->path);
			break;
		case CD_MOUNT_MASK:
			m->step = cd_xasprintf("mask on '%s'", m->path);
			break;
		case CD_MOUNT_DENY:
			m->step = cd_xasprintf("deny mask on '%s'", m->path);
			break;
		case CD_MOUNT_WRITABLE:
			m->step = cd_xasprintf("writable tree at '%s'", m->path);
			break;
		case CD_MOUNT_OP_COUNT:
		default:
			*reterr = cd_xasprintf("namespaces: unknown mount operation %d for '%s'",
					       (int)in->op, m->path);
			r = -EINVAL;
			goto fail;
		}
		/* Made now: prepare_host may run when the child can no longer see new strings. */
		if (in->op == CD_MOUNT_RO_BIND || in->op == CD_MOUNT_DENY)
			m->step_mask = cd_xasprintf("mask on '%s'", m->path);
	}
	*ret_state = s;
	return 0;

fail:
	ns_destroy(s);
	return r;
}

/*
 * Worth it when the child has a network namespace to create meanwhile
 * (clone() would otherwise create it before the child even exists) and
 * there are mounts to prepare.
 */
static bool ns_defer_host(struct cd_backend_state *s, int child_fd)
{
	if (!s || !s->net_ns || s->n == 0 || s->n > MAX_FACTS_BYTES / sizeof(struct ns_fact))
		return false;
	s->facts = cd_xcalloc(s->n, sizeof(*s->facts));
	s->facts_fd = child_fd;
	s->deferred = true;
	return true;
}

/*
 * The host side: open and check what binds mount, make or adopt the mask
 * mount points. When deferred, send the child what it found.
 */
static int ns_prepare_host(struct cd_backend_state *s, int parent_fd, char **reterr)
{
	int r;

	if (!s)
		return 0;
	for (size_t i = 0; s->lp && i < s->lp->n_id_checks; i++) {
		r = check_id(&s->lp->id_checks[i], reterr);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < s->n; i++) {
		struct ns_mount *m = &s->m[i];

		r = m->op == CD_MOUNT_MASK ? prepare_mask(s, m, reterr)
					   : prepare_bind(s, s->lp, m, reterr);
		if (r < 0)
			return r;
	}
	/* The directories beyond the first KEPT_DIRS: finish opens them again. */
	close_mask_dirs(s, false);
	s->lp = NULL;
	if (!s->deferred || parent_fd < 0)
		return 0;
	for (size_t i = 0; i < s->n; i++)
		s->facts[i] = (struct ns_fact){ .op = (uint32_t)s->m[i].op,
						.fmt = (uint32_t)s->m[i].fmt,
						.dev = (uint64_t)s->m[i].dev,
						.ino = (uint64_t)s->m[i].ino,
						.host_rdonly = s->m[i].host_rdonly };
	ssize_t n;
	do
		n = send(parent_fd, s->facts, s->n * sizeof(*s->facts), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	/* A child that is gone already says why on the same socket. */
	if (n < 0 && errno != EPIPE && errno != ECONNRESET) {
		r = -errno;
		*reterr = cd_xasprintf("namespaces: cannot send the mount points to the child: %s",
				       strerror(-r));
		return r;
	}
	return 0;
}

/* ---- child side: system calls only ---- */

static int write_proc(const char *path, const char *data, bool missing_ok)
{
	size_t len = strlen(data);
	ssize_t n;
	int fd, r = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return missing_ok && errno == ENOENT ? 0 : -errno;
	n = write(fd, data, len);
	if (n < 0)
		r = -errno;
	else if ((size_t)n != len)
		r = -EIO;
	close(fd);
	return r;
}

/* Open path again in our namespace and check it is the object the parent saw. */
static int reopen_checked(const struct ns_mount *m)
{
	struct stat st;
	int fd;

	fd = open(m->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		cd_close_keep_errno(fd);
		return -errno;
	}
	if ((st.st_mode & S_IFMT) != m->fmt || st.st_dev != m->dev || st.st_ino != m->ino) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

static int apply_bind(const struct ns_mount *m, int fd)
{
	struct mount_attr attr = { 0 };
	unsigned flags = AT_EMPTY_PATH;
	int tree, r = 0;

	tree = open_tree(fd, "",
			 AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (tree < 0)
		return -errno;
	if (m->op == CD_MOUNT_RO_BIND) {
		attr.attr_set = MOUNT_ATTR_RDONLY;
		flags |= AT_RECURSIVE;
	} else if (m->op == CD_MOUNT_RW_BIND && !m->host_rdonly) {
		/*
		 * Writable again, top mount only: a mount below it keeps its own
		 * state (read-only from an enclosing read-only bind at worst,
		 * which is the safe side). A path on a read-only host mount
		 * stays read-only: we never grant more than the host does.
		 */
		attr.attr_clr = MOUNT_ATTR_RDONLY;
	}
	/*
	 * A pin changes no attribute: only the new mount point matters. The
	 * clone keeps the access it had and, being recursive, its submounts.
	 */
	if ((attr.attr_set || attr.attr_clr) &&
	    mount_setattr(tree, "", flags, &attr, sizeof(attr)) < 0)
		r = -errno;
	if (r == 0 &&
	    move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = -errno;
	close(tree);
	return r;
}

/*
 * One small detached tmpfs per run holding the mask symlink, and the empty
 * directory and file of mode 000 that deny masks bind over denied paths;
 * each mask is a clone of one of them (the symlink itself, with
 * AT_SYMLINK_NOFOLLOW): a superblock per mask would cost several times a
 * clone. The tmpfs is made read-only before any clone is taken, and it is
 * never attached anywhere.
 */
static int mask_source(struct cd_backend_state *s)
{
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	int fs, mnt;

	if (s->mask_src >= 0)
		return s->mask_src;
	fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		cd_close_keep_errno(fs);
		return -errno;
	}
	mnt = fsmount(fs, FSMOUNT_CLOEXEC,
		      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (mnt < 0) {
		cd_close_keep_errno(fs);
		return -errno;
	}
	close(fs);
	/* The deny objects only for a plan with deny masks: five system calls each run. */
	bool deny = false;
	for (size_t i = 0; i < s->n && !deny; i++)
		deny = s->m[i].op == CD_MOUNT_DENY;
	int f = -1;
	if (symlinkat(MASK_LINK_TARGET, mnt, MASK_LINK_NAME) < 0 ||
	    (deny &&
	     (mkdirat(mnt, DENY_DIR_NAME, 0) < 0 ||
	      (f = openat(mnt, DENY_FILE_NAME, O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC, 0)) < 0 ||
	      close(f) < 0 || fchmodat(mnt, DENY_DIR_NAME, 0, 0) < 0 ||
	      fchmodat(mnt, DENY_FILE_NAME, 0, 0) < 0)) ||
	    mount_setattr(mnt, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0) {
		cd_close_keep_errno(mnt);
		return -errno;
	}
	s->mask_src = mnt;
	return mnt;
}

/*
 * Clone one object of the mask tmpfs onto fd: the symlink of a mask (name
 * MASK_LINK_NAME, taken itself with AT_SYMLINK_NOFOLLOW), or the mode-000
 * directory or file of a deny mask.
 */
static int apply_from_mask_source(struct cd_backend_state *s, const char *name, int fd)
{
	int src, tree, r = 0;

	src = mask_source(s);
	if (src < 0)
		return src;
	tree = open_tree(src, name, AT_SYMLINK_NOFOLLOW | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return -errno;
	if (move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = -errno;
	close(tree);
	return r;
}

/*
 * The parent's facts about the mounts (see ns_prepare_host), into our own
 * copy of the state. No allocation: facts was allocated before the fork.
 */
static int receive_facts(struct cd_backend_state *s)
{
	size_t len = s->n * sizeof(*s->facts);
	struct iovec iov = { .iov_base = s->facts, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	do
		n = recvmsg(s->facts_fd, &mh, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE; /* the parent is gone, or failed and will kill us */
	if ((size_t)n != len || (mh.msg_flags & MSG_TRUNC))
		return -EPROTO;
	for (size_t i = 0; i < s->n; i++) {
		const struct ns_fact *f = &s->facts[i];
		struct ns_mount *m = &s->m[i];

		if (f->op >= CD_MOUNT_OP_COUNT)
			return -EPROTO;
		m->op = (enum cd_mount_op)f->op;
		m->fmt = (mode_t)f->fmt;
		m->dev = (dev_t)f->dev;
		m->ino = (ino_t)f->ino;
		m->host_rdonly = f->host_rdonly != 0;
	}
	return 0;
}

static int ns_apply(struct cd_backend_state *s)
{
	int r;

	if (!s)
		return 0;

	/* For the tests: a host that claims namespaces but will not make them. */
	s->step = "setup (CORDON_TEST_DISABLE=namespace-setup)";
	if (cd_linux_test_disabled("namespace-setup"))
		return -EPERM;
	/* unshare(CLONE_NEWPID) would only move our children: it must come from clone(). */
	s->step = "pid namespace (needs clone flags)";
	if (s->pid_ns && !s->at_clone)
		return -EINVAL;
	s->step = "unshare";
	if (!s->at_clone &&
	    unshare((s->mount_ns ? CLONE_NEWNS : 0) | (s->user_ns ? CLONE_NEWUSER : 0) |
		    (s->ipc_ns ? CLONE_NEWIPC : 0) | (s->net_ns ? CLONE_NEWNET : 0)) < 0)
		return -errno;
	/*
	 * Deferred: clone() left the network namespace to us, so that its
	 * creation runs here, alongside the parent's prepare_host. Whoever
	 * creates it, it belongs to our user namespace and is just as empty.
	 *
	 * Its only interface, lo, stays down. The network is restricted, so
	 * the seccomp rules let no socket but AF_UNIX be made, and nothing
	 * could use lo. Bringing it up (as bubblewrap does) cost 35-40 us a
	 * run here: it takes the RTNL lock, gives lo 127.0.0.1 and ::1 with
	 * their routes, and the kernel's cleanup of the namespace has more
	 * to take down.
	 */
	if (s->at_clone && s->deferred && s->net_ns) {
		s->step = "unshare(CLONE_NEWNET)";
		if (unshare(CLONE_NEWNET) < 0)
			return -errno;
	}

	if (s->user_ns) {
		/* Required before an unprivileged gid_map write; absent before Linux 3.19. */
		s->step = "setgroups";
		r = write_proc("/proc/self/setgroups", "deny", true);
		if (r < 0)
			return r;
		s->step = "uid_map";
		r = write_proc("/proc/self/uid_map", s->uid_map, false);
		if (r < 0)
			return r;
		s->step = "gid_map";
		r = write_proc("/proc/self/gid_map", s->gid_map, false);
		if (r < 0)
			return r;
	}

	if (!s->mount_ns)
		return 0;

	/*
	 * Private, not slave: nothing we mount may propagate back to the
	 * host, and nothing the host mounts during the run may come in: a
	 * bind over a workspace or a denied directory would reach the sandbox
	 * without the carve-outs and masks under it.
	 */
	s->step = "make / a private mount";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;

	if (s->deferred) {
		s->step = "receive the mount points from the parent";
		r = receive_facts(s);
		if (r < 0)
			return r;
	}

	/*
	 * Make every mount read-only but the writable regions (ro_root):
	 * clone each writable tree as the host has it, then make the whole
	 * namespace read-only (recursively, so submounts too; adding
	 * read-only is never refused, even for flags a user namespace locks),
	 * then attach the clones in the loop below, in the plan's order. On
	 * our stack: under CLONE_VM the parent's memory is not ours to write.
	 */
	int trees[CD_MAX_WRITABLE_TREES];
	size_t n_trees = 0, next_tree = 0;
	if (s->ro_root) {
		for (size_t i = 0; i < s->n; i++) {
			const struct ns_mount *m = &s->m[i];
			int fd;

			if (m->op != CD_MOUNT_WRITABLE)
				continue;
			s->step = m->step;
			if (n_trees == CD_MAX_WRITABLE_TREES) {
				r = -E2BIG;
				goto out_trees;
			}
			fd = reopen_checked(m);
			if (fd < 0) {
				r = fd;
				goto out_trees;
			}
			trees[n_trees] = open_tree(fd, "",
						   AT_EMPTY_PATH | OPEN_TREE_CLONE |
							   OPEN_TREE_CLOEXEC | AT_RECURSIVE);
			r = trees[n_trees] < 0 ? -errno : 0;
			close(fd);
			if (r < 0)
				goto out_trees;
			n_trees++;
		}
		struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
		s->step = "make every mount read-only but the writable paths";
		if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0) {
			r = -errno;
			goto out_trees;
		}
	}

	for (size_t i = 0; i < s->n; i++) {
		const struct ns_mount *m = &s->m[i];
		int fd;

		s->step = m->op == CD_MOUNT_MASK && m->step_mask ? m->step_mask : m->step;
		/* For the tests: the path vanished since the parent looked (a race). */
		fd = cd_linux_test_disabled("mount-path") ? -ENOENT : reopen_checked(m);
		if (fd < 0) {
			r = fd;
			goto out_trees;
		}
		switch (m->op) {
		case CD_MOUNT_RO_BIND:
		case CD_MOUNT_RW_BIND:
		case CD_MOUNT_PIN:
			r = apply_bind(m, fd);
			break;
		case CD_MOUNT_MASK:
			r = apply_from_mask_source(s, MASK_LINK_NAME, fd);
			break;
		case CD_MOUNT_DENY:
			r = apply_from_mask_source(
				s, m->fmt == S_IFDIR ? DENY_DIR_NAME : DENY_FILE_NAME, fd);
			break;
		case CD_MOUNT_WRITABLE:
			/* Taken in the same order above (none when !ro_root). */
			r = next_tree < n_trees ? 0 : -EINVAL;
			if (r == 0 &&
			    move_mount(trees[next_tree], "", fd, "",
				       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
				r = -errno;
			next_tree++;
			break;
		case CD_MOUNT_OP_COUNT:
		default:
			r = -EINVAL;
			break;
		}
		close(fd);
		if (r < 0)
			goto out_trees;
	}
	/*
	 * The private /tmp (lp->private_tmp): after the read-only remount, so it
	 * stays writable; nothing else is mounted below /tmp.
	 */
	if (s->private_tmp) {
		s->step = "mount a private /tmp";
		if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, s->tmp_opts) < 0) {
			r = -errno;
			goto out_trees;
		}
	}
	/*
	 * The host's terminals out of sight (see lp->private_pts). /dev/ptmx
	 * opens the instance on the pts next to it: this one. At most
	 * CD_PRIVATE_PTS_MAX terminals, so that one sandbox cannot take the
	 * kernel's whole pool (pty.max) from every other. Its own ptmx node is
	 * mode 000 where the plan denies /dev/ptmx (no capability overrides it).
	 */
	if (s->private_pts) {
		s->step = "mount a private /dev/pts";
		if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, s->pts_opts) < 0) {
			r = -errno;
			goto out_trees;
		}
	}
	/*
	 * A /proc of the pid namespace, so that /proc/$$ is the command and
	 * not the host process with its number (and host processes are not
	 * listed). Fails closed: a /proc that lies about pids would be wrong
	 * in ways a command cannot tell.
	 */
	if (s->pid_ns) {
		s->step = "mount a /proc for the pid namespace";
		if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
			r = -errno;
			goto out_trees;
		}
	}
	s->step = "done";
	r = 0;
out_trees:
	for (size_t k = 0; k < n_trees; k++)
		close(trees[k]);
	return r;
}

static unsigned long ns_clone_flags(struct cd_backend_state *s)
{
	if (!s)
		return 0;
	s->at_clone = true;
	return (s->mount_ns ? CLONE_NEWNS : 0) | (s->user_ns ? CLONE_NEWUSER : 0) |
	       (s->ipc_ns ? CLONE_NEWIPC : 0) | (s->pid_ns ? CLONE_NEWPID : 0) |
	       (s->net_ns && !s->deferred ? CLONE_NEWNET : 0);
}

static const char *ns_last_step(struct cd_backend_state *s)
{
	return s ? s->step : NULL;
}

const struct cd_backend cd_backend_namespaces = {
	.name = "namespaces",
	.prepare = ns_prepare,
	.apply = ns_apply,
	.finish = ns_finish,
	.destroy = ns_destroy,
	.last_step = ns_last_step,
	.clone_flags = ns_clone_flags,
	.abandon = ns_abandon,
	.defer_host = ns_defer_host,
	.prepare_host = ns_prepare_host,
};
