/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Landlock backend: the parent builds the ruleset (one path_beneath rule per
 * plan rule), the child only calls landlock_restrict_self().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/linux-util.h"

struct cd_backend_state {
	int ruleset_fd;
	/*
	 * Rules on /proc and below, added again in the child: with a pid
	 * namespace the child mounts a new /proc over the one the parent saw,
	 * and Landlock does not look through a mount that hides another, so
	 * the parent's rules there would cover nothing the command can reach.
	 */
	const struct cd_ll_rule **proc_rules; /* borrowed from the plan */
	size_t n_proc_rules;
	uint64_t handled_fs;
	/* lp->private_pts, with the st_dev of the host's /dev/pts (never granted). */
	bool private_pts;
	bool private_ptmx; /* lp->private_ptmx */
	dev_t host_pts_dev;
	/* lp->private_tmp_rights (0: none), with the st_dev of the host's /tmp. */
	uint64_t tmp_rights;
	dev_t host_tmp_dev;
};

static const char *create_hint(int err)
{
	switch (err) {
	case ENOSYS:
		return "the kernel was built without CONFIG_SECURITY_LANDLOCK";
	case EOPNOTSUPP:
		return "Landlock is built in but not enabled: add landlock to the lsm= boot "
		       "parameter";
	case EINVAL:
	case E2BIG:
		return "the kernel's Landlock ABI is older than the plan expects: re-run `cordon "
		       "probe`";
	default:
		return "check `cordon probe`";
	}
}

static void landlock_destroy(struct cd_backend_state *s)
{
	if (!s)
		return;
	if (s->ruleset_fd >= 0)
		close(s->ruleset_fd);
	free(s->proc_rules);
	free(s);
}

static int add_rule(int ruleset_fd, const struct cd_ll_rule *rule, char **reterr)
{
	struct cd_landlock_path_beneath_attr pb = { .allowed_access = rule->allowed };
	struct stat st;
	int fd, r;

	/* No right granted: a rule would only be rejected by the kernel (ENOMSG). */
	if (rule->allowed == 0)
		return 0;

	/* O_NOFOLLOW: plan paths are canonical; a symlink here was planted after binding. */
	fd = open(rule->path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		r = -errno;
		*reterr = cd_xasprintf("landlock: cannot open '%s': %s", rule->path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		*reterr = cd_xasprintf("landlock: cannot stat '%s': %s", rule->path, strerror(-r));
		return r;
	}
	if (S_ISLNK(st.st_mode) || (!!S_ISDIR(st.st_mode)) != rule->is_dir) {
		close(fd);
		*reterr = cd_xasprintf("landlock: '%s' changed type since the plan was built",
				       rule->path);
		return -ESTALE;
	}
	pb.parent_fd = fd;
	r = cd_landlock_add_rule(ruleset_fd, CD_LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	if (r < 0) {
		r = -errno;
		close(fd);
		*reterr = cd_xasprintf("landlock: cannot add a rule for '%s': %s", rule->path,
				       strerror(-r));
		return r;
	}
	close(fd);
	return 0;
}

static int landlock_prepare(const struct cd_linux_plan *lp, struct cd_backend_state **ret_state,
			    char **reterr)
{
	struct cd_landlock_ruleset_attr attr = {
		.handled_access_fs = lp->ll_handled_fs,
		.handled_access_net = lp->ll_handled_net,
		.scoped = lp->ll_scoped,
	};
	struct cd_backend_state *s;
	size_t size;
	int r;

	*ret_state = NULL;
	if (!lp->sandboxed || !lp->landlock)
		return 0;

	size = cd_landlock_attr_size(lp->landlock_abi);
	/* Never silently drop handled rights a short struct could not carry. */
	if ((size < 16 && attr.handled_access_net) || (size < 24 && attr.scoped)) {
		*reterr =
			cd_xasprintf("landlock: the plan handles network rights or scopes that ABI "
				     "%u cannot express",
				     lp->landlock_abi);
		return -EINVAL;
	}

	s = cd_xcalloc(1, sizeof(*s));
	s->handled_fs = lp->ll_handled_fs;
	if (lp->private_pts && cd_linux_is_devpts("/dev/pts")) {
		struct stat st;
		if (stat("/dev/pts", &st) == 0) {
			s->private_pts = true;
			s->private_ptmx = lp->private_ptmx;
			s->host_pts_dev = st.st_dev;
		}
	}
	if (lp->private_tmp && lp->private_tmp_rights) {
		struct stat st;
		if (stat("/tmp", &st) == 0) {
			s->tmp_rights = lp->private_tmp_rights;
			s->host_tmp_dev = st.st_dev;
		}
	}
	s->ruleset_fd = cd_landlock_create_ruleset(&attr, size, 0);
	if (s->ruleset_fd < 0) {
		r = -errno;
		*reterr = cd_xasprintf("landlock: cannot create the ruleset: %s (%s)", strerror(-r),
				       create_hint(-r));
		landlock_destroy(s);
		return r;
	}

	for (size_t i = 0; i < lp->n_ll_rules; i++) {
		const struct cd_ll_rule *rule = &lp->ll_rules[i];
		r = add_rule(s->ruleset_fd, rule, reterr);
		if (r < 0) {
			landlock_destroy(s);
			return r;
		}
		if (lp->pid_ns && rule->allowed && cd_path_is_beneath(rule->path, "/proc")) {
			if (!s->proc_rules)
				s->proc_rules = cd_xcalloc(lp->n_ll_rules, sizeof(*s->proc_rules));
			s->proc_rules[s->n_proc_rules++] = rule;
		}
	}
	*ret_state = s;
	return 0;
}

/* Child: a rule on what fd holds, for the rights the ruleset handles; 0 or -errno. */
static int add_fd_rule(struct cd_backend_state *s, int fd, uint64_t allowed)
{
	struct cd_landlock_path_beneath_attr pb = {
		.allowed_access = allowed & s->handled_fs,
		.parent_fd = fd,
	};
	if (!pb.allowed_access)
		return 0;
	if (cd_landlock_add_rule(s->ruleset_fd, CD_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return -errno;
	return 0;
}

/* Child: the /proc rules again, on the new /proc (see proc_rules). */
static int add_proc_rules(struct cd_backend_state *s)
{
	for (size_t i = 0; i < s->n_proc_rules; i++) {
		const struct cd_ll_rule *rule = s->proc_rules[i];
		/* Missing in the namespace's /proc (a host pid): then there is nothing to allow. */
		int fd = open(rule->path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		int r = add_fd_rule(s, fd, rule->allowed);
		close(fd);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Child, once fds 0-2 are the command's: a terminal or other character
 * device among them may be opened again by name (/dev/stderr, i.e.
 * /proc/self/fd/2, or /dev/pts/N) for writing if it was handed writable,
 * for reading if readable (O_PATH: neither), with ioctls; and /dev/tty
 * alike when the controlling terminal is one of them (a serve tty
 * process's pty; after cordon run's setsid there is none, and a command
 * that makes a terminal it holds read-only its controlling one gets no
 * more through /dev/tty). The command holds these already, so nothing new
 * is reachable; without it `echo x >/dev/stderr` fails in a terminal.
 * Each rule is bound to the very inode the descriptor holds. Regular
 * files are left out: outside the writable paths their mount is
 * read-only anyway.
 */
static uint64_t fd_rights(int fd, struct stat *st)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_PATH) || fstat(fd, st) < 0 || !S_ISCHR(st->st_mode))
		return 0;
	switch (fl & O_ACCMODE) {
	case O_RDONLY:
		return CD_LL_FS_READ_FILE | CD_LL_FS_IOCTL_DEV;
	case O_WRONLY:
		return CD_LL_FS_WRITE_FILE | CD_LL_FS_IOCTL_DEV;
	case O_RDWR:
		return CD_LL_FS_READ_FILE | CD_LL_FS_WRITE_FILE | CD_LL_FS_IOCTL_DEV;
	default:
		return 0;
	}
}

static int add_stdio_rules(struct cd_backend_state *s)
{
	uint64_t ctty = 0;
	pid_t sid = getsid(0);
	for (int fd = 0; fd <= 2; fd++) {
		struct stat st;
		uint64_t allowed = fd_rights(fd, &st);
		if (!allowed)
			continue;
		int r = add_fd_rule(s, fd, allowed);
		if (r < 0)
			return r;
		if (isatty(fd) && tcgetsid(fd) == sid)
			ctty |= allowed;
	}
	if (!ctty)
		return 0;
	int fd = open("/dev/tty", O_PATH | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0; /* none, or masked: nothing to allow */
	struct stat st;
	int r = 0;
	if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(5, 0))
		r = add_fd_rule(s, fd, ctty);
	close(fd);
	return r;
}

/*
 * Child, after the mounts: the private /dev/pts (lp->private_pts) is the
 * command's to use, as pipes are: read, write and ioctl on its terminals,
 * and /dev/ptmx, which makes new ones there. Never the host's instance: a
 * /dev/pts still on the host's device gets nothing.
 */
static int add_pts_rules(struct cd_backend_state *s)
{
	const uint64_t rights = CD_LL_FS_READ_FILE | CD_LL_FS_WRITE_FILE | CD_LL_FS_IOCTL_DEV;
	struct stat st;
	int r = 0;

	if (!s->private_pts)
		return 0;
	int fd = open("/dev/pts", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_dev == s->host_pts_dev || !cd_linux_is_devpts("/dev/pts"))
		r = -EXDEV;
	else
		r = add_fd_rule(s, fd, rights);
	close(fd);
	if (r < 0)
		return r;
	if (!s->private_ptmx)
		return 0;
	fd = open("/dev/ptmx", O_PATH | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0; /* none (or a symlink to pts/ptmx): nothing more to allow */
	if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(5, 2))
		r = add_fd_rule(s, fd, rights);
	close(fd);
	return r;
}

/*
 * Child, after the mounts: the private /tmp gets the plan's access to /tmp.
 * A rule on the host's /tmp does not reach it (Landlock does not look
 * through the mount point it hides), and only a tmpfs of the namespace's
 * own, never the host's /tmp, is granted it.
 */
static int add_tmp_rule(struct cd_backend_state *s)
{
	struct stat st;
	struct statfs sf;
	int r;

	if (!s->tmp_rights)
		return 0;
	int fd = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_dev == s->host_tmp_dev || fstatfs(fd, &sf) < 0 ||
	    sf.f_type != 0x01021994 /* TMPFS_MAGIC */)
		r = -EXDEV;
	else
		r = add_fd_rule(s, fd, s->tmp_rights);
	close(fd);
	return r;
}

static int landlock_apply(struct cd_backend_state *s)
{
	if (!s)
		return 0;
	int r = add_proc_rules(s);
	if (r < 0)
		return r;
	r = add_stdio_rules(s);
	if (r < 0)
		return r;
	r = add_pts_rules(s);
	if (r < 0)
		return r;
	r = add_tmp_rule(s);
	if (r < 0)
		return r;
	/* Required by landlock_restrict_self() without CAP_SYS_ADMIN; idempotent. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* flags 0: no audit logging flags (ABI 7) by default. */
	if (cd_landlock_restrict_self(s->ruleset_fd, 0) < 0)
		return -errno;
	return 0;
}

const struct cd_backend cd_backend_landlock = {
	.name = "landlock",
	.prepare = landlock_prepare,
	.apply = landlock_apply,
	.finish = NULL,
	.destroy = landlock_destroy,
};
