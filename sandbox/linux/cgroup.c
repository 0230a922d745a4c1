/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cgroup v2 for the sandboxes' limits: what the host offers (probe: no side
 * effects), the place the sandboxes' cgroups go (arranged once), one cgroup
 * per sandbox. See cgroup.h for where that place is and why.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/linux-util.h"

/* The cgroup cordon moves itself into when it arranges its own cgroup. */
#define SUPERVISOR "supervisor"
/* The cgroup made for the sandboxes elsewhere (as root at the top, or in the user's slice). */
#define SHARED "cordon"
/* An empty sandbox cgroup older than this is what a killed supervisor left. */
#define STALE_SECONDS 60

enum where {
	WHERE_NONE,
	WHERE_OWN,    /* our own cgroup: we move into SUPERVISOR below it */
	WHERE_SHARED, /* SHARED below parent */
};

struct detect {
	enum where where;
	char mnt[PATH_MAX];    /* the cgroup2 mount */
	char own[PATH_MAX];    /* our cgroup's directory */
	char rel[PATH_MAX];    /* our cgroup as the hierarchy names it, for messages */
	char parent[PATH_MAX]; /* WHERE_OWN: own; WHERE_SHARED: the directory SHARED goes in */
	char base[PATH_MAX];   /* where the sandboxes' cgroups go */
	char kind[128];	       /* how that was found, for people */
	struct cd_limits_host host;
};

/*
 * snprintf into a fixed buffer, truncating: paths and reasons here are
 * bounded by PATH_MAX or only shown, and a cut message is still a message.
 */
static void bprintf(char *buf, size_t size, const char *fmt, ...) CD_PRINTF(3, 4);
static void bprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

/* Read a small file whole, NUL-terminated: its length, or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n, len = 0;
	while ((size_t)len + 1 < size && (n = read(fd, buf + len, size - 1 - (size_t)len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	return len;
}

static int write_file_at(int dirfd, const char *file, const char *value)
{
	int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	int r = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return r;
}

/* mountinfo's octal escapes (\040 for a space) undone in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*w++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
}

/*
 * The cgroup2 mount to use (/sys/fs/cgroup when it is one, else the first,
 * such as a hybrid host's /sys/fs/cgroup/unified) and the hierarchy path it
 * shows (its root field). false when there is none.
 */
static bool find_mount(char *mnt, size_t mnt_size, char *root, size_t root_size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	while (getline(&line, &cap, f) > 0) {
		/* id parent dev root mountpoint options [optional...] - fstype source super */
		char *sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		char *save = NULL, *field[5];
		int n = 0;
		*sep = '\0';
		for (char *t = strtok_r(line, " ", &save); t && n < 5;
		     t = strtok_r(NULL, " ", &save))
			field[n++] = t;
		if (n < 5)
			continue;
		unescape(field[3]);
		unescape(field[4]);
		bool preferred = cd_streq(field[4], "/sys/fs/cgroup");
		if (found && !preferred)
			continue;
		bprintf(mnt, mnt_size, "%s", field[4]);
		bprintf(root, root_size, "%s", field[3]);
		found = true;
		if (preferred)
			break;
	}
	free(line);
	fclose(f);
	return found;
}

/* Our cgroup v2 path ("0::/a/b"), or false. */
static bool own_path(char *buf, size_t size)
{
	char data[8192];
	if (read_small("/proc/self/cgroup", data, sizeof(data)) < 0)
		return false;
	for (char *l = data; l && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		if (cd_startswith(l, "0::")) {
			bprintf(buf, size, "%s", l + 3);
			return true;
		}
		l = nl ? nl + 1 : NULL;
	}
	return false;
}

static bool writable(const char *dir)
{
	char p[PATH_MAX + 32];
	if (access(dir, W_OK) < 0)
		return false;
	bprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	if (access(p, W_OK) < 0)
		return false;
	bprintf(p, sizeof(p), "%s/cgroup.subtree_control", dir);
	return access(p, W_OK) == 0;
}

/* We are the only process in the cgroup at dir. */
static bool alone(const char *dir)
{
	char p[PATH_MAX + 32], data[4096];
	bprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	ssize_t n = read_small(p, data, sizeof(data));
	if (n <= 0)
		return false;
	char *end;
	long pid = strtol(data, &end, 10);
	return pid == (long)getpid() && (*end == '\0' || (*end == '\n' && end[1] == '\0'));
}

/* systemd marks the cgroups it delegates (Delegate=yes) with trusted.delegate or user.delegate. */
static bool delegate_mark(const char *dir)
{
	char v[8];
	ssize_t n = getxattr(dir, "trusted.delegate", v, sizeof(v));
	if (n <= 0)
		n = getxattr(dir, "user.delegate", v, sizeof(v));
	return n > 0 && v[0] == '1';
}

/* A controller's name in a space-separated list ("cpu" is not "cpuset"). */
static bool in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

/*
 * Why controller name is not in dir's cgroup.controllers, from /proc/cgroups
 * (its text in cgroups, or "" when unreadable).
 */
static void controller_why(const char *cgroups, const char *name, const char *dir, char *buf,
			   size_t size)
{
	char data[4096];
	bprintf(data, sizeof(data), "%s", cgroups);
	{
		char *save = NULL;
		for (char *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			char sub[64];
			int hier = 0, num = 0, enabled = 1;
			if (sscanf(l, "%63s %d %d %d", sub, &hier, &num, &enabled) != 4 ||
			    !cd_streq(sub, name))
				continue;
			if (!enabled) {
				bprintf(buf, size,
					"disabled at boot (fix: drop cgroup_disable=%s from the "
					"kernel command line)",
					name);
				return;
			}
			if (hier != 0) {
				bprintf(buf, size,
					"bound to a cgroup v1 hierarchy (fix: boot with "
					"systemd.unified_cgroup_hierarchy=1)");
				return;
			}
		}
	}
	bprintf(buf, size,
		"not delegated (not in %s/cgroup.controllers; fix: Delegate=yes, or a "
		"Delegate= that names it)",
		dir);
}

/* Linux 5.14 and later count RLIMIT_NPROC per user namespace (ucounts). */
static bool kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;
	if (uname(&u) < 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

/* Is dir within systemd's user manager of our uid (user@UID.service)? */
static bool in_user_manager(const char *dir)
{
	char needle[64];
	bprintf(needle, sizeof(needle), "/user@%u.service", (unsigned)getuid());
	const char *p = strstr(dir, needle);
	return p && (p[strlen(needle)] == '\0' || p[strlen(needle)] == '/');
}

static void detect(struct detect *d)
{
	struct cd_limits_host *h = &d->host;
	char root[PATH_MAX], own[PATH_MAX];
	bool uid0 = geteuid() == 0;

	memset(d, 0, sizeof(*d));
	h->probed = true;
	h->uid0 = uid0;
	h->nproc_per_userns = kernel_at_least(5, 14);
	if (cd_linux_test_disabled("cgroup")) {
		bprintf(h->why, sizeof(h->why), "disabled by CORDON_TEST_DISABLE=cgroup");
		bprintf(h->fix, sizeof(h->fix), "unset CORDON_TEST_DISABLE");
		return;
	}
	if (!find_mount(d->mnt, sizeof(d->mnt), root, sizeof(root))) {
		bprintf(h->why, sizeof(h->why), "no cgroup v2 hierarchy is mounted");
		bprintf(h->fix, sizeof(h->fix),
			"boot with systemd.unified_cgroup_hierarchy=1, or mount -t cgroup2 none "
			"/sys/fs/cgroup");
		return;
	}
	if (!own_path(own, sizeof(own))) {
		bprintf(h->why, sizeof(h->why),
			"this process has no cgroup v2 path in "
			"/proc/self/cgroup");
		bprintf(h->fix, sizeof(h->fix), "a kernel with cgroup v2");
		return;
	}
	/* Our path as the mount shows it: below its root, or outside what it shows. */
	const char *rel = own;
	if (!cd_streq(root, "/")) {
		if (!cd_path_is_beneath(own, root)) {
			bprintf(h->why, sizeof(h->why),
				"this process's cgroup %s is outside the cgroup v2 tree mounted "
				"at %s",
				own, d->mnt);
			bprintf(h->fix, sizeof(h->fix),
				"mount the whole cgroup v2 hierarchy (or run cordon inside it)");
			return;
		}
		rel = own + strlen(root);
	}
	bprintf(d->own, sizeof(d->own), "%s%s", d->mnt, cd_streq(rel, "/") ? "" : rel);
	bprintf(d->rel, sizeof(d->rel), "%s", own);
	bool top = cd_streq(d->own, d->mnt);

	if (!top && writable(d->own) && alone(d->own) && (!uid0 || delegate_mark(d->own))) {
		d->where = WHERE_OWN;
		bprintf(d->parent, sizeof(d->parent), "%s", d->own);
		bprintf(d->base, sizeof(d->base), "%s", d->own);
		bprintf(d->kind, sizeof(d->kind), "%s",
			uid0			  ? "a unit with Delegate=yes, root"
			: in_user_manager(d->own) ? "the user's own delegated slice"
						  : "delegated to this user");
	} else if (uid0) {
		if (!writable(d->mnt)) {
			bprintf(h->why, sizeof(h->why), "the cgroup v2 tree at %s is read-only",
				d->mnt);
			bprintf(h->fix, sizeof(h->fix),
				"mount it writable (a container needs a writable cgroup "
				"namespace, e.g. --cgroupns=private with a delegated cgroup)");
			return;
		}
		d->where = WHERE_SHARED;
		bprintf(d->parent, sizeof(d->parent), "%s", d->mnt);
		bprintf(d->base, sizeof(d->base), "%s/" SHARED, d->mnt);
		bprintf(d->kind, sizeof(d->kind), "root");
	} else {
		/* The nearest cgroup above ours that is delegated to us. */
		char up[PATH_MAX];
		bprintf(up, sizeof(up), "%s", d->own);
		while (!cd_streq(up, d->mnt)) {
			char *slash = strrchr(up, '/');
			if (!slash || slash == up)
				break;
			*slash = '\0';
			if (cd_streq(up, d->mnt))
				break;
			if (writable(up)) {
				d->where = WHERE_SHARED;
				bprintf(d->parent, sizeof(d->parent), "%s", up);
				bprintf(d->base, sizeof(d->base), "%s/" SHARED, up);
				bprintf(d->kind, sizeof(d->kind), "%s",
					in_user_manager(up) ? "the user's own delegated slice"
							    : "delegated to this user");
				break;
			}
		}
		if (d->where == WHERE_NONE) {
			bool mine = !top && writable(d->own);
			if (mine)
				bprintf(h->why, sizeof(h->why),
					"this process's cgroup %s is delegated to uid %u, but "
					"other processes share it (cordon must be alone in it to "
					"make the sandboxes' cgroups there)",
					d->rel, (unsigned)getuid());
			else
				bprintf(h->why, sizeof(h->why),
					"this process's cgroup %s is not delegated to uid %u",
					d->rel, (unsigned)getuid());
			bprintf(h->fix, sizeof(h->fix),
				"run cordon in a cgroup of its own that is delegated to the "
				"user: systemd-run --user --scope -p Delegate=yes cordon ..., or "
				"a systemd unit with Delegate=yes");
			return;
		}
	}

	h->cgroup = true;
	bprintf(h->where, sizeof(h->where), "%s (%s)", d->base, d->kind);
	/* What the sandboxes' parent can get: from the cgroup above it. */
	char p[PATH_MAX + 32], ctl[1024] = "";
	bprintf(p, sizeof(p), "%s/cgroup.controllers", d->parent);
	if (read_small(p, ctl, sizeof(ctl)) < 0)
		ctl[0] = '\0';
	char cgroups[4096] = "";
	for (unsigned i = 0; i < CD_CG_COUNT; i++) {
		if (in_list(ctl, cd_cg_controller_name(i))) {
			h->controllers |= 1u << i;
			continue;
		}
		if (!cgroups[0] && read_small("/proc/cgroups", cgroups, sizeof(cgroups)) < 0)
			cgroups[0] = '\0';
		controller_why(cgroups, cd_cg_controller_name(i), d->parent, h->ctl_why[i],
			       sizeof(h->ctl_why[i]));
	}
	/*
	 * Swap is accounted unless the kernel was built or booted without it:
	 * a cgroup with the memory controller then has memory.swap.max. The
	 * top cgroup has none, so look in the base when it exists.
	 */
	if (h->controllers & CD_CG_MEMORY) {
		struct stat st;
		bprintf(p, sizeof(p), "%s/memory.swap.max", d->base);
		if (stat(p, &st) == 0) {
			h->swap = true;
		} else {
			char cmd[4096] = "";
			bprintf(p, sizeof(p), "%s/memory.max", d->base);
			bool base_has_memory = stat(p, &st) == 0;
			(void)read_small("/proc/cmdline", cmd, sizeof(cmd));
			h->swap = !base_has_memory && !strstr(cmd, "swapaccount=0") &&
				  !strstr(cmd, "noswap");
		}
	}
}

/*
 * Once per process: the facts do not change under a run, and a server
 * looks at them once at start (so a cgroup delegated later needs a
 * restart).
 */
static const struct detect *detected(void)
{
	static struct detect *d;
	if (!d) {
		d = cd_xcalloc(1, sizeof(*d));
		detect(d);
	}
	return d;
}

void cd_linux_probe_limits(struct cd_limits_host *ret)
{
	*ret = detected()->host;
}

/* ---- the base, arranged once ---- */

static struct {
	bool done;
	int err;
	char base[PATH_MAX];
	char *why;
} setup;

/* Enable the wanted controllers of dir's cgroup.controllers in its subtree_control. */
static int enable_controllers(const char *dir, unsigned want, char **reterr)
{
	char p[PATH_MAX + 32], ctl[1024] = "", sub[1024] = "", w[64] = "";
	if (!want)
		return 0;
	bprintf(p, sizeof(p), "%s/cgroup.controllers", dir);
	(void)read_small(p, ctl, sizeof(ctl));
	bprintf(p, sizeof(p), "%s/cgroup.subtree_control", dir);
	(void)read_small(p, sub, sizeof(sub));
	for (unsigned i = 0; i < CD_CG_COUNT; i++) {
		const char *name = cd_cg_controller_name(i);
		if ((want & (1u << i)) && in_list(ctl, name) && !in_list(sub, name))
			bprintf(w + strlen(w), sizeof(w) - strlen(w), "%s+%s", *w ? " " : "", name);
	}
	if (!*w)
		return 0;
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	int r = fd < 0 ? -errno : 0;
	if (fd >= 0) {
		if (write(fd, w, strlen(w)) != (ssize_t)strlen(w))
			r = -errno;
		close(fd);
	}
	if (r < 0)
		*reterr = cd_xasprintf("cannot enable the %s controller%s in %s: %s%s", w,
				       strchr(w, ' ') ? "s" : "", dir, strerror(-r),
				       r == -EBUSY ? " (processes live in that cgroup)" : "");
	return r;
}

/* Empty sandbox cgroups in base that no supervisor removed: it was killed. */
static void sweep(const char *base)
{
	DIR *dir = opendir(base);
	struct dirent *de;
	time_t now = time(NULL);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		struct stat st;
		char ev[256];
		if (!cd_startswith(de->d_name, "sandbox-") ||
		    fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || now - st.st_ctime < STALE_SECONDS)
			continue;
		char p[PATH_MAX + 300];
		bprintf(p, sizeof(p), "%s/%s/cgroup.events", base, de->d_name);
		if (read_small(p, ev, sizeof(ev)) > 0 && strstr(ev, "populated 0"))
			(void)unlinkat(dirfd(dir), de->d_name, AT_REMOVEDIR);
	}
	closedir(dir);
}

static int do_setup(char **reterr)
{
	const struct detect *d = detected();
	char p[PATH_MAX + 64];
	int r = 0;
	/* Every one of ours that is there: any later sandbox may need it. */
	unsigned want = d->host.controllers;

	if (d->where == WHERE_NONE) {
		*reterr = cd_xasprintf("no cgroup for the sandbox: %s (fix: %s)", d->host.why,
				       d->host.fix);
		r = -EOPNOTSUPP;
		goto out;
	}
	if (d->where == WHERE_OWN) {
		/* Out of our cgroup first: only a cgroup without processes may have children
		 * with controllers. */
		bprintf(p, sizeof(p), "%s/" SUPERVISOR, d->own);
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			*reterr = cd_xasprintf("cannot create the cgroup %s: %s", p, strerror(-r));
			goto out;
		}
		char pid[32];
		bprintf(pid, sizeof(pid), "%d", (int)getpid());
		bprintf(p, sizeof(p), "%s/" SUPERVISOR "/cgroup.procs", d->own);
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		r = fd < 0 ? -errno : 0;
		if (fd >= 0) {
			if (write(fd, pid, strlen(pid)) < 0)
				r = -errno;
			close(fd);
		}
		if (r < 0) {
			*reterr = cd_xasprintf("cannot move cordon into %s/" SUPERVISOR ": %s",
					       d->own, strerror(-r));
			goto out;
		}
		r = enable_controllers(d->own, want, reterr);
		if (r < 0)
			goto out;
	} else {
		r = enable_controllers(d->parent, want, reterr);
		if (r < 0)
			goto out;
		if (mkdir(d->base, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			*reterr = cd_xasprintf("cannot create the cgroup %s: %s", d->base,
					       strerror(-r));
			goto out;
		}
		r = enable_controllers(d->base, want, reterr);
		if (r < 0)
			goto out;
	}
	bprintf(setup.base, sizeof(setup.base), "%s", d->base);
	sweep(d->base);
out:
	return r;
}

int cd_cgroup_base(const char **ret, char **reterr)
{
	if (!setup.done) {
		char *why = NULL;
		setup.err = do_setup(&why);
		setup.why = why;
		setup.done = true;
	}
	if (setup.err < 0) {
		*reterr = cd_xstrdup(setup.why ? setup.why : strerror(-setup.err));
		return setup.err;
	}
	*ret = setup.base;
	return 0;
}

int cd_linux_limits_setup(char **reterr)
{
	const char *base;
	return cd_cgroup_base(&base, reterr);
}

int cd_cgroup_make(int *ret_parent, int *ret_fd, char *name, size_t size, char **reterr)
{
	static unsigned counter;
	const char *base;
	int r = cd_cgroup_base(&base, reterr);
	if (r < 0)
		return r;
	int parent = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0) {
		r = -errno;
		*reterr = cd_xasprintf("cannot open the cgroup %s: %s", base, strerror(-r));
		return r;
	}
	for (unsigned tries = 0;; tries++) {
		bprintf(name, size, "sandbox-%d-%u", (int)getpid(), ++counter);
		if (mkdirat(parent, name, 0755) == 0)
			break;
		r = -errno;
		/* The name of a sandbox of another server in another pid namespace. */
		if (r != -EEXIST || tries == 100) {
			*reterr = cd_xasprintf("cannot create a cgroup in %s: %s", base,
					       strerror(-r));
			close(parent);
			return r;
		}
	}
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		*reterr =
			cd_xasprintf("cannot open the cgroup %s/%s: %s", base, name, strerror(-r));
		(void)unlinkat(parent, name, AT_REMOVEDIR);
		close(parent);
		return r;
	}
	*ret_parent = parent;
	*ret_fd = fd;
	return 0;
}

/* For limits.c: write value to file in the cgroup dirfd; 0 or -errno. */
int cd_cgroup_write(int dirfd, const char *file, const char *value)
{
	return write_file_at(dirfd, file, value);
}
