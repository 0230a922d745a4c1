/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Resource limits of a sandbox, as data: what may be asked (tasks, memory,
 * swap, CPU quota and time, open files, file size, core dumps, a private
 * /tmp of a given size, inotify instances and watches), how each is
 * spelled (command-line values, the policy's "limits" object, cordon
 * serve's lists), how a server's defaults and maximums combine with what a
 * request asks, how each limit is enforced on a host with given facts (the
 * plan), and how a limit that was reached is told to the caller. Pure and
 * OS-free: the Linux side (sandbox/linux/limits.c, cgroup.c) turns the
 * plan into a cgroup, rlimits and the user namespace's own limits, and
 * reads back what happened.
 *
 * Enforcement, per limit (cd_limits_plan_build):
 *  - tasks: the sandbox's cgroup (pids.max). Otherwise RLIMIT_NPROC, which
 *    the kernel counts per user namespace and real uid (Linux 5.14 and
 *    later): exact for a sandbox with a user namespace of its own (an
 *    unprivileged one); never applied to root; per user, not per sandbox,
 *    without a user namespace. Those last two are refused.
 *  - memory, swap, cpu: the sandbox's cgroup only (memory.max,
 *    memory.swap.max, cpu.max). Without it, refused, unless the caller
 *    opts down: memory then becomes RLIMIT_AS on each process (its address
 *    space, not the sandbox's memory), swap and cpu are not enforced.
 *  - cpu_time, open_files, file_size, core: rlimits, exact for what they
 *    say, each per process (RLIMIT_CPU, RLIMIT_NOFILE, RLIMIT_FSIZE,
 *    RLIMIT_CORE).
 *  - private_tmp: a tmpfs of that size on /tmp in the sandbox's mount
 *    namespace (sandbox/linux/plan.h does that part).
 *  - inotify_instances, inotify_watches: the kernel counts them per user
 *    per user namespace, charged at every level up to the host's, each
 *    level against its own namespace's maximum (/proc/sys/user/
 *    max_inotify_instances, max_inotify_watches; INT_MAX in a new one).
 *    So a sandbox with a user namespace of its own (an unprivileged one)
 *    is bounded exactly, as a whole, by writing those two in it before its
 *    capabilities are dropped; it cannot raise them (no CAP_SYS_RESOURCE
 *    left, and a nested namespace is still charged at the sandbox's
 *    level). Reached: inotify_init1 fails with EMFILE, inotify_add_watch
 *    with ENOSPC; nothing is killed. Root's sandboxes and unsandboxed
 *    commands have no user namespace of their own: there the count would
 *    be the user's on the whole host, not the sandbox's. Refused.
 * Any limit asked makes the sandbox get a cgroup of its own where the host
 * offers one (cgroup.kill then ends whatever the sandbox leaves behind).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/util.h"

enum cd_limit {
	CD_LIMIT_TASKS,		    /* processes and threads in the sandbox at once */
	CD_LIMIT_MEMORY,	    /* bytes of memory of the whole sandbox */
	CD_LIMIT_SWAP,		    /* bytes of swap of the whole sandbox */
	CD_LIMIT_CPU,		    /* CPU quota, thousandths of a CPU */
	CD_LIMIT_CPU_TIME,	    /* seconds of CPU time, per process */
	CD_LIMIT_OPEN_FILES,	    /* open files, per process */
	CD_LIMIT_FILE_SIZE,	    /* bytes, per file written */
	CD_LIMIT_CORE,		    /* bytes of a core dump (0: none) */
	CD_LIMIT_PRIVATE_TMP,	    /* bytes of a private tmpfs on /tmp */
	CD_LIMIT_INOTIFY_INSTANCES, /* inotify instances of the sandbox at once */
	CD_LIMIT_INOTIFY_WATCHES,   /* inotify watches of the sandbox at once */
	CD_LIMIT_COUNT,
};

enum cd_limit_unit {
	CD_UNIT_NUMBER,	   /* "100" */
	CD_UNIT_BYTES,	   /* "512M", powers of 1024 */
	CD_UNIT_MILLICPUS, /* "1.5" CPUs or "150%" */
	CD_UNIT_SECONDS,   /* "90", "90s", "15m", "2h" */
};

struct cd_limit_info {
	const char *key;  /* in a policy and on the wire: "open_files" */
	const char *name; /* on the command line and in lists: "open-files" */
	const char *what; /* in messages: "open files" */
	enum cd_limit_unit unit;
	uint64_t min, max; /* accepted values, inclusive */
};

/* The table row of l (never NULL for l < CD_LIMIT_COUNT). */
const struct cd_limit_info *cd_limit_info(enum cd_limit l);
/* The limit named s (either spelling: "open_files" or "open-files"), or -EINVAL. */
int cd_limit_from_name(const char *s);

/* A set of limits: bit l of set says v[l] holds one. Zero-initialise for none. */
struct cd_limits {
	uint32_t set;
	uint64_t v[CD_LIMIT_COUNT];
};

static inline bool cd_limits_has(const struct cd_limits *L, enum cd_limit l)
{
	return L && (L->set & (1u << l));
}

static inline bool cd_limits_any(const struct cd_limits *L)
{
	return L && L->set != 0;
}

static inline void cd_limits_put(struct cd_limits *L, enum cd_limit l, uint64_t v)
{
	L->set |= 1u << l;
	L->v[l] = v;
}

/*
 * One value of limit l as written on the command line or in a list: a
 * number, a size (N, NK, NM, NG, NT; powers of 1024; "KiB" and the like
 * too), CPUs ("0.5", "2", "150%"; at most three decimals) or a duration
 * (N seconds, Ns, Nm, Nh). 0, or -EINVAL with *reterr (malloc'ed: what
 * was wrong and what is expected).
 */
int cd_limit_parse(enum cd_limit l, const char *s, uint64_t *ret, char **reterr);

/*
 * A list as cordon serve's --default-limits and --max-limits take it:
 * NAME=VALUE[,NAME=VALUE...]. Every name at most once. Adds to *ret.
 * 0, or -EINVAL with *reterr.
 */
int cd_limits_parse_list(const char *s, struct cd_limits *ret, char **reterr);

/*
 * The "limits" object of a policy file or of the cordon extension of
 * process/start: strict (an unknown key is an error: a misspelled limit
 * must never leave a sandbox unbounded). Numbers are JSON integers (sizes
 * in bytes, times in seconds; cpu may be a decimal) or the strings the
 * command line takes; null is the same as absent. Adds to *ret. 0, or
 * -EINVAL with *reterr_key (the offending key, or NULL for the object
 * itself; borrowed from v) and *reterr (malloc'ed message); *reterr_at is
 * the offending value, for its position.
 */
int cd_limits_from_json(const struct cd_json *v, struct cd_limits *ret, const char **reterr_key,
			const struct cd_json **reterr_at, char **reterr);

/* A value for people: "512 MiB", "1.5 CPUs", "90 s", "100". malloc'ed. */
char *cd_limit_format(enum cd_limit l, uint64_t v);
/* Every limit of L as NAME=VALUE, comma-separated, values for people; "" for none. */
char *cd_limits_format(const struct cd_limits *L);

/*
 * What a request gets from a server's defaults and maximums: what it asks,
 * then the default of each limit it does not ask, then the maximum of each
 * limit still unset (a limit with a maximum is always bounded). A value
 * asked above the maximum is refused: -EINVAL with *reterr ("memory:
 * 2 GiB asked, this server allows at most 1 GiB"). asked, defaults and max
 * may be NULL.
 */
int cd_limits_merge(const struct cd_limits *asked, const struct cd_limits *defaults,
		    const struct cd_limits *max, struct cd_limits *ret, char **reterr);

/* The cgroup v2 controllers cordon uses. */
enum cd_cg_controller {
	CD_CG_PIDS = 1u << 0,
	CD_CG_MEMORY = 1u << 1,
	CD_CG_CPU = 1u << 2,
};
#define CD_CG_COUNT 3
/* "pids", "memory", "cpu" for the bit index 0..2. */
const char *cd_cg_controller_name(unsigned index);

/* What a host offers for limits (sandbox/linux/cgroup.c finds out). Plain data: copyable. */
struct cd_limits_host {
	bool probed;
	/*
	 * A cgroup v2 subtree cordon may make the sandboxes' cgroups in: the
	 * whole tree (root), or one delegated to this user (a systemd unit with
	 * Delegate=yes, the user's own slice).
	 */
	bool cgroup;
	unsigned controllers; /* CD_CG_* usable for the sandboxes' cgroups */
	bool swap;	      /* memory.swap.max exists (swap is accounted) */
	/* RLIMIT_NPROC counts per user namespace (Linux 5.14 and later). */
	bool nproc_per_userns;
	/* cordon runs as uid 0: its sandboxes are root, which RLIMIT_NPROC never applies to. */
	bool uid0;
	char where[256]; /* "/sys/fs/cgroup/cordon (root)", when cgroup */
	char why[256];	 /* when !cgroup: "no cgroup v2 hierarchy is mounted" */
	char fix[256];	 /* when !cgroup */
	/* Why each controller (bit index) is missing, when cgroup: "bound to cgroup v1". */
	char ctl_why[CD_CG_COUNT][160];
};

/* How a limit of a plan is enforced. */
enum cd_limit_how {
	CD_LIMIT_HOW_NONE,	/* not asked */
	CD_LIMIT_HOW_CGROUP,	/* the sandbox's cgroup: the whole sandbox */
	CD_LIMIT_HOW_RLIMIT,	/* an rlimit on every process, exact for what the limit says */
	CD_LIMIT_HOW_RLIMIT_AS, /* degraded memory: RLIMIT_AS on every process */
	CD_LIMIT_HOW_MOUNT,	/* the private /tmp's size */
	CD_LIMIT_HOW_SKIPPED,	/* degraded: not enforced */
	CD_LIMIT_HOW_USERNS,	/* a limit of the sandbox's own user namespace */
	CD_LIMIT_HOW_COUNT,
};
/* "none", "cgroup", "rlimit", "rlimit-as", "mount", "not-enforced", "userns". */
const char *cd_limit_how_name(enum cd_limit_how h);

/* The rlimits cordon sets (the backend maps them to RLIMIT_*). */
enum cd_rlimit {
	CD_RLIM_NPROC,
	CD_RLIM_AS,
	CD_RLIM_CPU,
	CD_RLIM_NOFILE,
	CD_RLIM_FSIZE,
	CD_RLIM_CORE,
	CD_RLIM_COUNT,
};
/* "RLIMIT_NPROC", ... */
const char *cd_rlimit_name(enum cd_rlimit r);
/*
 * The rlimit that is limit l exactly, per process (cpu_time, open_files,
 * file_size, core: CD_RLIM_CPU, NOFILE, FSIZE, CORE), or -1 for a limit no
 * rlimit states (tasks and memory only approximate: see the plan).
 */
int cd_limit_rlimit(enum cd_limit l);

struct cd_limits_plan {
	struct cd_limits limits; /* what is enforced (or skipped on request) */
	enum cd_limit_how how[CD_LIMIT_COUNT];
	char *detail[CD_LIMIT_COUNT]; /* owned: how, in one line, for explain */
	/* The sandbox gets a cgroup of its own, with these controllers enabled. */
	bool cgroup;
	unsigned controllers;
	/* Files to write in it, in order ("pids.max", "100"). */
	struct cd_cg_write {
		const char *file; /* static */
		char value[48];
	} cg[4];
	size_t n_cg;
	/* Rlimits to set on the first process (inherited by the rest). */
	struct cd_rlimit_set {
		enum cd_rlimit res;
		uint64_t soft, hard;
	} rl[CD_RLIM_COUNT];
	size_t n_rl;
	/*
	 * Files to write under /proc/sys/user in the sandbox's own user
	 * namespace, in order ("max_inotify_instances", "64"): by its first
	 * process, once the namespace's maps are written and before the
	 * capabilities it has there are dropped.
	 */
	struct cd_userns_write {
		const char *file; /* static */
		char value[24];
	} userns[2];
	size_t n_userns;
	char **degraded; /* NULL-terminated: what is not enforced, on request */
	char **notes;	 /* NULL-terminated */
};

/* What the rest of the sandbox's plan says, for the limits'. */
struct cd_limits_ctx {
	bool is_root;	  /* the sandbox runs as root (no user namespace maps it) */
	bool own_userns;  /* the sandbox has a user namespace of its own */
	bool unsandboxed; /* the command runs without a sandbox of cordon's */
	bool pid_init;	  /* an init of cordon's runs in the sandbox (a task of its own) */
	/* Bit l: --allow-degraded names limit l (run without it, or RLIMIT_AS for memory). */
	uint32_t degraded;
};

/*
 * Plan how each limit of asked is enforced (see the top of this file).
 * private_tmp is only recorded (CD_LIMIT_HOW_MOUNT): the Linux plan makes
 * the mount and refuses what it cannot. 0, or -EOPNOTSUPP with *reterr a
 * malloc'ed one-line refusal naming the limit, the missing mechanism, the
 * fix and the --allow-degraded= name. *ret is NULL when nothing is asked.
 */
int cd_limits_plan_build(const struct cd_limits *asked, const struct cd_limits_host *host,
			 const struct cd_limits_ctx *ctx, struct cd_limits_plan **ret,
			 char **reterr);
struct cd_limits_plan *cd_limits_plan_free(struct cd_limits_plan *p);

/*
 * The plan as a JSON object for the process/start result:
 * {"memory":{"value":536870912,"by":"cgroup"},...} (values as numbers in
 * the limit's unit: bytes, seconds, thousandths of a CPU). Appends to sb.
 */
void cd_limits_plan_json(const struct cd_limits_plan *p, struct cd_strbuf *sb);

/* What the sandbox ran into, as the backend reads it once the command has exited. */
struct cd_limits_events {
	uint64_t oom_kills; /* memory.events oom_kill */
	uint64_t pids_max;  /* pids.events max: forks refused */
	bool killed;	    /* the command ended by SIGKILL */
	bool sigxcpu;	    /* ... by SIGXCPU */
	bool sigxfsz;	    /* ... by SIGXFSZ */
};

/*
 * The limits the sandbox reached, for the caller: "killed: memory limit
 * 512 MiB reached", "task limit 100 reached: 37 forks refused", "killed:
 * CPU time limit 60 s reached", "killed: file size limit 1 MiB reached";
 * several joined with "; ". Written to buf (always NUL-terminated).
 * Returns the first limit reached, or -1 (buf "") when none.
 */
int cd_limits_reason(const struct cd_limits_plan *p, const struct cd_limits_events *ev, char *buf,
		     size_t size);
