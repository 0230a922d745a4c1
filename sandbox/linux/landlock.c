/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Landlock backend: the parent builds the ruleset (one path_beneath rule per
 * plan rule), the child only calls landlock_restrict_self().
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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

/* Child: the /proc rules again, on the new /proc (see proc_rules). */
static int add_proc_rules(struct cd_backend_state *s)
{
	for (size_t i = 0; i < s->n_proc_rules; i++) {
		const struct cd_ll_rule *rule = s->proc_rules[i];
		struct cd_landlock_path_beneath_attr pb = { .allowed_access = rule->allowed };
		/* Missing in the namespace's /proc (a host pid): then there is nothing to allow. */
		int fd = open(rule->path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		pb.parent_fd = fd;
		int r = cd_landlock_add_rule(s->ruleset_fd, CD_LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
		int e = errno;
		close(fd);
		if (r < 0)
			return -e;
	}
	return 0;
}

static int landlock_apply(struct cd_backend_state *s)
{
	if (!s)
		return 0;
	int r = add_proc_rules(s);
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
