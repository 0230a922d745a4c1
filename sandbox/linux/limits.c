/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The resource limits backend (backend.h: cd_backend_limits): the parent
 * makes the sandbox's cgroup and writes its limits; the child is born in it
 * (CLONE_INTO_CGROUP) or moves in, writes the limits of its own user
 * namespace (its inotify maximums) while it still has the capabilities
 * there, and sets its rlimits; when the command is done, the parent reads
 * what the cgroup ran into (memory.events, pids.events), kills whatever is
 * left in it (cgroup.kill: the kernel's last word on leftovers, daemons and
 * escaped process groups included), waits for it to be empty and removes
 * it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/linux-util.h"
#include "shared/rlimit.h"

/* How long finish waits for a killed cgroup to empty (a process stuck in D state). */
#define EMPTY_WAIT_MS 5000

struct rl {
	int resource;
	struct rlimit value;
	const char *name;
};

/* A file of /proc/sys/user to write in the sandbox's user namespace (plan->userns). */
struct us {
	char path[64];
	char value[24];
	char step[96]; /* "max_inotify_instances 64 in the sandbox's user namespace" */
};

struct cd_backend_state {
	/* The plan's limits and how each is enforced (no owned strings). */
	struct cd_limits_plan plan;
	struct rl rl[CD_RLIM_COUNT];
	size_t n_rl;
	struct us us[2];
	size_t n_us;
	bool us_fail;  /* the test hook CORDON_TEST_DISABLE=userns-limits */
	int parent_fd; /* O_PATH of the base the cgroup is in, or -1 */
	int cg_fd;     /* the sandbox's cgroup, or -1 */
	int procs_fd;  /* its cgroup.procs, for a child that moves in itself */
	char name[64];
	bool join_in_child; /* clone_cgroup(fallback): apply moves the child in */
	bool finished;
	struct cd_limits_events ev;
	const char *step; /* for last_step */
	char *warning;	  /* owned */
};

/* A counter of a flat-keyed file such as memory.events ("oom_kill 3"). 0 when absent. */
static uint64_t read_counter(int dirfd, const char *file, const char *key)
{
	char buf[1024];
	int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	size_t klen = strlen(key);
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, key, klen) == 0 && l[klen] == ' ')
			return strtoull(l + klen + 1, NULL, 10);
	return 0;
}

/* Whether cgroup.events (fd, read from the start) says populated 0; -errno when unreadable. */
static int is_empty(int fd)
{
	char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return strstr(buf, "populated 0") != NULL;
}

static void set_warning(struct cd_backend_state *s, const char *fmt, ...) CD_PRINTF(2, 3);
static void set_warning(struct cd_backend_state *s, const char *fmt, ...)
{
	va_list ap;
	if (s->warning)
		return;
	va_start(ap, fmt);
	s->warning = cd_xvasprintf(fmt, ap);
	va_end(ap);
}

/*
 * Kill what is left in the cgroup and wait until it is empty. cgroup.kill
 * (Linux 5.14) signals every process in it at once, new ones included; on
 * older kernels each listed process is killed until none is left. The wait
 * is on cgroup.events, which the kernel flags (POLLPRI) when populated
 * changes: no polling loop on a clock.
 */
static int kill_and_wait(struct cd_backend_state *s)
{
	int ev = openat(s->cg_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
	if (ev < 0)
		return -errno;
	int r = is_empty(ev);
	if (r == 1 || r < 0)
		goto out;
	if (cd_cgroup_write(s->cg_fd, "cgroup.kill", "1") < 0) {
		/* Before 5.14: one by one, as cgroup.procs lists them. */
		char buf[4096];
		int pf = openat(s->cg_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
		ssize_t n = pf < 0 ? -1 : read(pf, buf, sizeof(buf) - 1);
		if (pf >= 0)
			close(pf);
		buf[n > 0 ? n : 0] = '\0';
		for (char *p = buf, *end; *p; p = end) {
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			if (pid > 0)
				(void)kill((pid_t)pid, SIGKILL);
		}
	}
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		r = is_empty(ev);
		if (r != 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long spent = (now.tv_sec - start.tv_sec) * 1000 +
			     (now.tv_nsec - start.tv_nsec) / 1000000;
		if (spent >= EMPTY_WAIT_MS) {
			r = -EBUSY;
			break;
		}
		struct pollfd p = { .fd = ev, .events = POLLPRI };
		/* Bounded slices: a kernel without the notification still gets looked at. */
		(void)poll(&p, 1, 100);
	}
out:
	close(ev);
	return r < 0 ? r : 0;
}

static void limits_finish(struct cd_backend_state *s)
{
	if (!s || s->finished)
		return;
	s->finished = true;
	if (s->cg_fd < 0)
		return;
	int r = kill_and_wait(s);
	/* After everything in it has ended: the counts are final. */
	s->ev.oom_kills = read_counter(s->cg_fd, "memory.events", "oom_kill");
	s->ev.pids_max = read_counter(s->cg_fd, "pids.events", "max");
	if (r < 0) {
		set_warning(s,
			    "the sandbox's cgroup %s still holds processes after cgroup.kill "
			    "(%s); leaving it in place",
			    s->name, strerror(-r));
	} else if (unlinkat(s->parent_fd, s->name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		set_warning(s, "cannot remove the sandbox's cgroup %s: %s", s->name,
			    strerror(errno));
	}
	close(s->cg_fd);
	s->cg_fd = -1;
}

static void limits_destroy(struct cd_backend_state *s)
{
	if (!s)
		return;
	/* Never leave a cgroup behind, even when the spawn failed before finish. */
	limits_finish(s);
	if (s->procs_fd >= 0)
		close(s->procs_fd);
	if (s->parent_fd >= 0)
		close(s->parent_fd);
	free(s->warning);
	free(s);
}

static int limits_prepare(const struct cd_linux_plan *lp, struct cd_backend_state **ret_state,
			  char **reterr)
{
	const struct cd_limits_plan *p = lp ? lp->limits : NULL;
	struct cd_backend_state *s;
	int r;

	*ret_state = NULL;
	if (!p)
		return 0;
	s = cd_xcalloc(1, sizeof(*s));
	s->parent_fd = s->cg_fd = s->procs_fd = -1;
	s->finished = true; /* nothing to finish until the cgroup exists */
	s->plan.limits = p->limits;
	memcpy(s->plan.how, p->how, sizeof(s->plan.how));

	/*
	 * A limit only lowers: where cordon's own hard limit is lower than
	 * asked, that stays (an unprivileged process cannot raise it anyway).
	 */
	for (size_t i = 0; i < p->n_rl; i++) {
		struct rl *x = &s->rl[s->n_rl];
		struct rlimit cur;
		x->resource = cd_rlimit_resource(p->rl[i].res);
		x->name = cd_rlimit_name(p->rl[i].res);
		x->value.rlim_cur = (rlim_t)p->rl[i].soft;
		x->value.rlim_max = (rlim_t)p->rl[i].hard;
		if (x->resource < 0)
			continue;
		if (getrlimit(x->resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY) {
			if (x->value.rlim_max > cur.rlim_max)
				x->value.rlim_max = cur.rlim_max;
			if (x->value.rlim_cur > x->value.rlim_max)
				x->value.rlim_cur = x->value.rlim_max;
		}
		s->n_rl++;
	}

	/*
	 * The sysctls of /proc/sys/user are those of the writer's user
	 * namespace: the plan asks them only of a sandbox with one of its own.
	 */
	if (p->n_userns && !(lp->sandboxed && lp->user_ns)) {
		*reterr = cd_xstrdup("limits: the plan sets limits of the sandbox's user "
				     "namespace, but the sandbox has none of its own");
		r = -EINVAL;
		goto fail;
	}
	for (size_t i = 0; i < p->n_userns && i < CD_ARRAY_SIZE(s->us); i++) {
		struct us *u = &s->us[s->n_us++];
		snprintf(u->path, sizeof(u->path), "/proc/sys/user/%s", p->userns[i].file);
		snprintf(u->value, sizeof(u->value), "%s", p->userns[i].value);
		snprintf(u->step, sizeof(u->step), "%s %s in the sandbox's user namespace",
			 p->userns[i].file, p->userns[i].value);
	}
	s->us_fail = s->n_us && cd_linux_test_disabled("userns-limits");

	if (p->cgroup) {
		r = cd_cgroup_make(&s->parent_fd, &s->cg_fd, s->name, sizeof(s->name), reterr);
		if (r < 0)
			goto fail;
		s->finished = false;
		for (size_t i = 0; i < p->n_cg; i++) {
			r = cd_cgroup_write(s->cg_fd, p->cg[i].file, p->cg[i].value);
			if (r < 0) {
				*reterr = cd_xasprintf(
					"cannot set %s to %s in the sandbox's cgroup "
					"%s: %s",
					p->cg[i].file, p->cg[i].value, s->name, strerror(-r));
				goto fail;
			}
		}
		s->procs_fd = openat(s->cg_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
		if (s->procs_fd < 0) {
			r = -errno;
			*reterr = cd_xasprintf("cannot open cgroup.procs of the sandbox's cgroup "
					       "%s: %s",
					       s->name, strerror(-r));
			goto fail;
		}
	}
	*ret_state = s;
	return 0;
fail:
	limits_destroy(s);
	return r;
}

static int limits_clone_cgroup(struct cd_backend_state *s, bool fallback)
{
	if (!s || s->cg_fd < 0)
		return -1;
	if (fallback) {
		s->join_in_child = true;
		return -1;
	}
	return s->cg_fd;
}

/* Child: system calls only. */
static int limits_apply(struct cd_backend_state *s)
{
	if (!s)
		return 0;
	if (s->join_in_child && s->procs_fd >= 0) {
		s->step = "moving into the sandbox's cgroup";
		if (write(s->procs_fd, "0", 1) != 1)
			return -errno;
	}
	for (size_t i = 0; i < s->n_rl; i++) {
		s->step = s->rl[i].name;
		if (setrlimit(s->rl[i].resource, &s->rl[i].value) < 0)
			return -errno;
	}
	s->step = "done";
	return 0;
}

/*
 * Child, with every capability in the sandbox's new user namespace: its
 * own maximums. The kernel picks the set of /proc/sys/user by the writer's
 * user namespace, whichever procfs it goes through; writing needs
 * CAP_SYS_RESOURCE there, which the command will not have. System calls
 * only.
 */
static int limits_apply_in_userns(struct cd_backend_state *s)
{
	if (!s)
		return 0;
	for (size_t i = 0; i < s->n_us; i++) {
		const struct us *u = &s->us[i];
		size_t len = strlen(u->value);
		s->step = u->step;
		/* For the tests: a host that refuses the write (a read-only /proc/sys). */
		if (s->us_fail)
			return -EROFS;
		int fd = open(u->path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		ssize_t n = write(fd, u->value, len);
		int e = n < 0 ? errno : (size_t)n != len ? EIO : 0;
		close(fd);
		if (e)
			return -e;
	}
	return 0;
}

static const char *limits_last_step(struct cd_backend_state *s)
{
	return s ? s->step : NULL;
}

static int limits_exit_reason(struct cd_backend_state *s, int exit_code, char *buf, size_t size)
{
	if (size)
		buf[0] = '\0';
	if (!s)
		return -1;
	limits_finish(s);
	struct cd_limits_events ev = s->ev;
	ev.killed = exit_code == 128 + SIGKILL;
	ev.sigxcpu = exit_code == 128 + SIGXCPU;
	ev.sigxfsz = exit_code == 128 + SIGXFSZ;
	return cd_limits_reason(&s->plan, &ev, buf, size);
}

static const char *limits_warning(struct cd_backend_state *s)
{
	return s ? s->warning : NULL;
}

const struct cd_backend cd_backend_limits = {
	.name = "limits",
	.prepare = limits_prepare,
	.apply = limits_apply,
	.apply_in_userns = limits_apply_in_userns,
	.finish = limits_finish,
	.destroy = limits_destroy,
	.last_step = limits_last_step,
	.clone_cgroup = limits_clone_cgroup,
	.exit_reason = limits_exit_reason,
	.warning = limits_warning,
};
