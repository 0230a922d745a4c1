/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Resource limits as data (limits.h): the vocabulary, its spellings, the
 * merge of a server's defaults and maximums, the plan and the account of
 * a limit reached.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"

#define KIB (1024ULL)
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)
#define TIB (1024ULL * GIB)
#define PIB (1024ULL * TIB)

/* cpu.max's period: the quota is a share of it (the kernel's default period). */
#define CPU_PERIOD_US ((uint64_t)100000)
/* What /proc/sys/user/max_inotify_* accept (an int, 0 to INT_MAX). */
#define SYSCTL_INT_MAX ((uint64_t)2147483647)

/* clang-format off */
static const struct cd_limit_info limit_info[CD_LIMIT_COUNT] = {
	[CD_LIMIT_TASKS]       = { "tasks",       "tasks",       "task",        CD_UNIT_NUMBER,    1,   4194304 },
	[CD_LIMIT_MEMORY]      = { "memory",      "memory",      "memory",      CD_UNIT_BYTES,     MIB, PIB },
	[CD_LIMIT_SWAP]        = { "swap",        "swap",        "swap",        CD_UNIT_BYTES,     0,   PIB },
	[CD_LIMIT_CPU]         = { "cpu",         "cpu",         "CPU",         CD_UNIT_MILLICPUS, 10,  1000000 },
	[CD_LIMIT_CPU_TIME]    = { "cpu_time",    "cpu-time",    "CPU time",    CD_UNIT_SECONDS,   1,   1ULL << 32 },
	[CD_LIMIT_OPEN_FILES]  = { "open_files",  "open-files",  "open file",   CD_UNIT_NUMBER,    4,   1ULL << 30 },
	[CD_LIMIT_FILE_SIZE]   = { "file_size",   "file-size",   "file size",   CD_UNIT_BYTES,     0,   PIB },
	[CD_LIMIT_CORE]        = { "core",        "core",        "core dump",   CD_UNIT_BYTES,     0,   PIB },
	[CD_LIMIT_PRIVATE_TMP] = { "private_tmp", "private-tmp", "private /tmp", CD_UNIT_BYTES,    MIB, PIB },
	[CD_LIMIT_INOTIFY_INSTANCES] = { "inotify_instances", "inotify-instances", "inotify instance",
					 CD_UNIT_NUMBER, 0, SYSCTL_INT_MAX },
	[CD_LIMIT_INOTIFY_WATCHES]   = { "inotify_watches", "inotify-watches", "inotify watch",
					 CD_UNIT_NUMBER, 0, SYSCTL_INT_MAX },
};

static const char *const how_names[CD_LIMIT_HOW_COUNT] = {
	[CD_LIMIT_HOW_NONE]      = "none",
	[CD_LIMIT_HOW_CGROUP]    = "cgroup",
	[CD_LIMIT_HOW_RLIMIT]    = "rlimit",
	[CD_LIMIT_HOW_RLIMIT_AS] = "rlimit-as",
	[CD_LIMIT_HOW_MOUNT]     = "mount",
	[CD_LIMIT_HOW_SKIPPED]   = "not-enforced",
	[CD_LIMIT_HOW_USERNS]    = "userns",
};

static const char *const rlimit_names[CD_RLIM_COUNT] = {
	[CD_RLIM_NPROC]  = "RLIMIT_NPROC",
	[CD_RLIM_AS]     = "RLIMIT_AS",
	[CD_RLIM_CPU]    = "RLIMIT_CPU",
	[CD_RLIM_NOFILE] = "RLIMIT_NOFILE",
	[CD_RLIM_FSIZE]  = "RLIMIT_FSIZE",
	[CD_RLIM_CORE]   = "RLIMIT_CORE",
};

static const char *const cg_names[CD_CG_COUNT] = { "pids", "memory", "cpu" };
/* clang-format on */

const struct cd_limit_info *cd_limit_info(enum cd_limit l)
{
	return (unsigned)l < CD_LIMIT_COUNT ? &limit_info[l] : NULL;
}

int cd_limit_from_name(const char *s)
{
	for (int l = 0; s && l < CD_LIMIT_COUNT; l++)
		if (cd_streq(s, limit_info[l].key) || cd_streq(s, limit_info[l].name))
			return l;
	return -EINVAL;
}

const char *cd_limit_how_name(enum cd_limit_how h)
{
	return (unsigned)h < CD_LIMIT_HOW_COUNT ? how_names[h] : NULL;
}

const char *cd_rlimit_name(enum cd_rlimit r)
{
	return (unsigned)r < CD_RLIM_COUNT ? rlimit_names[r] : NULL;
}

int cd_limit_rlimit(enum cd_limit l)
{
	switch (l) {
	case CD_LIMIT_CPU_TIME:
		return CD_RLIM_CPU;
	case CD_LIMIT_OPEN_FILES:
		return CD_RLIM_NOFILE;
	case CD_LIMIT_FILE_SIZE:
		return CD_RLIM_FSIZE;
	case CD_LIMIT_CORE:
		return CD_RLIM_CORE;
	case CD_LIMIT_TASKS:
	case CD_LIMIT_MEMORY:
	case CD_LIMIT_SWAP:
	case CD_LIMIT_CPU:
	case CD_LIMIT_PRIVATE_TMP:
	case CD_LIMIT_INOTIFY_INSTANCES:
	case CD_LIMIT_INOTIFY_WATCHES:
	case CD_LIMIT_COUNT:
		break;
	}
	return -1;
}

const char *cd_cg_controller_name(unsigned index)
{
	return index < CD_CG_COUNT ? cg_names[index] : NULL;
}

/* ---- values ---- */

/* Leading decimal digits of s as a number: how many digits, 0 on none or overflow. */
static size_t digits(const char *s, uint64_t *ret)
{
	uint64_t v = 0;
	size_t n = 0;
	for (; s[n] >= '0' && s[n] <= '9'; n++) {
		unsigned d = (unsigned)(s[n] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return 0;
		v = v * 10 + d;
	}
	*ret = v;
	return n;
}

static int parse_bytes(const char *s, uint64_t *ret)
{
	uint64_t v, mul = 1;
	size_t n = digits(s, &v);
	if (!n)
		return -EINVAL;
	const char *u = s + n;
	switch (*u) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = KIB;
		break;
	case 'm':
	case 'M':
		mul = MIB;
		break;
	case 'g':
	case 'G':
		mul = GIB;
		break;
	case 't':
	case 'T':
		mul = TIB;
		break;
	default:
		return -EINVAL;
	}
	if (*u && u[1] && !cd_streq(u + 1, "iB") && !cd_streq(u + 1, "B"))
		return -EINVAL;
	if (v > UINT64_MAX / mul)
		return -ERANGE;
	*ret = v * mul;
	return 0;
}

/* "1.5" (at most three decimals) or "150%": thousandths of a CPU. */
static int parse_cpus(const char *s, uint64_t *ret)
{
	uint64_t whole, frac = 0;
	size_t n = digits(s, &whole);
	if (!n)
		return -EINVAL;
	const char *p = s + n;
	if (*p == '%') {
		if (p[1] || whole > UINT64_MAX / 10)
			return -EINVAL;
		*ret = whole * 10;
		return 0;
	}
	if (*p == '.') {
		size_t k = 0;
		p++;
		for (; p[k] >= '0' && p[k] <= '9'; k++) {
			if (k == 3)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(p[k] - '0');
		}
		if (k == 0)
			return -EINVAL;
		for (size_t i = k; i < 3; i++)
			frac *= 10;
		p += k;
	}
	if (*p || whole > (UINT64_MAX - frac) / 1000)
		return -EINVAL;
	*ret = whole * 1000 + frac;
	return 0;
}

static int parse_seconds(const char *s, uint64_t *ret)
{
	uint64_t v, mul = 1;
	size_t n = digits(s, &v);
	if (!n)
		return -EINVAL;
	const char *u = s + n;
	if (cd_streq(u, "m"))
		mul = 60;
	else if (cd_streq(u, "h"))
		mul = 3600;
	else if (*u && !cd_streq(u, "s"))
		return -EINVAL;
	if (v > UINT64_MAX / mul)
		return -ERANGE;
	*ret = v * mul;
	return 0;
}

static const char *unit_expected(enum cd_limit_unit u)
{
	switch (u) {
	case CD_UNIT_NUMBER:
		return "a whole number";
	case CD_UNIT_BYTES:
		return "a size: N bytes, or N with K, M, G or T (powers of 1024)";
	case CD_UNIT_MILLICPUS:
		return "a number of CPUs (at most three decimals: 0.5, 2) or a percentage of one "
		       "(150%)";
	case CD_UNIT_SECONDS:
		return "a duration: N seconds, or N with s, m or h";
	}
	return "a value";
}

/* v within the limit's bounds: 0, or -ERANGE with *reterr. */
static int check_range(enum cd_limit l, uint64_t v, char **reterr)
{
	const struct cd_limit_info *i = &limit_info[l];
	if (v >= i->min && v <= i->max)
		return 0;
	char *lo = cd_limit_format(l, i->min), *hi = cd_limit_format(l, i->max);
	*reterr = cd_xasprintf("%s must be from %s to %s", i->name, lo, hi);
	free(lo);
	free(hi);
	return -ERANGE;
}

int cd_limit_parse(enum cd_limit l, const char *s, uint64_t *ret, char **reterr)
{
	const struct cd_limit_info *i = cd_limit_info(l);
	uint64_t v = 0;
	int r;

	if (!i) {
		*reterr = cd_xstrdup("unknown limit");
		return -EINVAL;
	}
	switch (i->unit) {
	case CD_UNIT_NUMBER:
		r = cd_parse_u64(s, &v);
		break;
	case CD_UNIT_BYTES:
		r = parse_bytes(s, &v);
		break;
	case CD_UNIT_MILLICPUS:
		r = parse_cpus(s, &v);
		break;
	case CD_UNIT_SECONDS:
		r = parse_seconds(s, &v);
		break;
	default:
		r = -EINVAL;
		break;
	}
	if (r < 0) {
		*reterr = cd_xasprintf("%s: '%s' is not %s", i->name, s, unit_expected(i->unit));
		return -EINVAL;
	}
	if (check_range(l, v, reterr) < 0)
		return -EINVAL;
	*ret = v;
	return 0;
}

int cd_limits_parse_list(const char *s, struct cd_limits *ret, char **reterr)
{
	if (!s || !*s) {
		*reterr = cd_xstrdup("an empty list (expected NAME=VALUE[,NAME=VALUE...])");
		return -EINVAL;
	}
	struct cd_limits seen = { 0 };
	for (const char *p = s;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		cleanup_free char *item = cd_xstrndup(p, len);
		char *eq = strchr(item, '=');
		if (!eq || eq == item || !eq[1]) {
			*reterr = cd_xasprintf("'%s' is not NAME=VALUE", item);
			return -EINVAL;
		}
		*eq = '\0';
		int l = cd_limit_from_name(item);
		if (l < 0) {
			*reterr =
				cd_xasprintf("unknown limit '%s' (tasks, memory, swap, cpu, "
					     "cpu-time, open-files, file-size, core, private-tmp, "
					     "inotify-instances or inotify-watches)",
					     item);
			return -EINVAL;
		}
		if (cd_limits_has(&seen, (enum cd_limit)l)) {
			*reterr = cd_xasprintf("%s is given twice", limit_info[l].name);
			return -EINVAL;
		}
		uint64_t v;
		if (cd_limit_parse((enum cd_limit)l, eq + 1, &v, reterr) < 0)
			return -EINVAL;
		cd_limits_put(&seen, (enum cd_limit)l, v);
		if (!end)
			break;
		p = end + 1;
	}
	for (int l = 0; l < CD_LIMIT_COUNT; l++)
		if (cd_limits_has(&seen, (enum cd_limit)l))
			cd_limits_put(ret, (enum cd_limit)l, seen.v[l]);
	return 0;
}

int cd_limits_from_json(const struct cd_json *v, struct cd_limits *ret, const char **reterr_key,
			const struct cd_json **reterr_at, char **reterr)
{
	*reterr_key = NULL;
	*reterr_at = v;
	if (v->type != CD_JSON_OBJECT) {
		*reterr = cd_xasprintf("expected an object for \"limits\", got %s",
				       cd_json_type_name(v->type));
		return -EINVAL;
	}
	struct cd_limits got = { 0 };
	for (size_t k = 0; k < v->u.obj.n; k++) {
		const struct cd_json_member *m = &v->u.obj.members[k];
		int l = -EINVAL;
		/* One spelling in JSON, the snake_case one. */
		for (int i = 0; i < CD_LIMIT_COUNT && strlen(m->key) == m->key_len; i++)
			if (cd_streq(m->key, limit_info[i].key))
				l = i;
		*reterr_key = m->key;
		*reterr_at = m->value;
		if (l < 0) {
			*reterr =
				cd_xasprintf("unknown key \"%s\" (expected one of: tasks, memory, "
					     "swap, cpu, cpu_time, open_files, file_size, core, "
					     "private_tmp, inotify_instances, inotify_watches)",
					     m->key);
			return -EINVAL;
		}
		const struct cd_json *x = m->value;
		const struct cd_limit_info *i = &limit_info[l];
		uint64_t val = 0;
		int r;
		if (x->type == CD_JSON_NULL)
			continue;
		if (x->type == CD_JSON_STRING) {
			if (cd_json_string_has_nul(x)) {
				*reterr = cd_xasprintf("\"%s\" contains a NUL character", i->key);
				return -EINVAL;
			}
			r = cd_limit_parse((enum cd_limit)l, x->u.str.s, &val, reterr);
			if (r < 0)
				return r;
		} else if (x->type == CD_JSON_NUMBER) {
			/* Numbers are in the limit's own unit: bytes, seconds, CPUs. */
			if (i->unit == CD_UNIT_MILLICPUS)
				r = parse_cpus(x->u.num.text, &val);
			else
				r = cd_json_uint64(x, &val);
			if (r < 0) {
				*reterr = cd_xasprintf(
					"%s: %s is not %s", i->key, x->u.num.text,
					i->unit == CD_UNIT_MILLICPUS
						? "a number of CPUs (at most three decimals)"
					: i->unit == CD_UNIT_BYTES   ? "a whole number of bytes"
					: i->unit == CD_UNIT_SECONDS ? "a whole number of seconds"
								     : "a whole number");
				return -EINVAL;
			}
			if (check_range((enum cd_limit)l, val, reterr) < 0)
				return -EINVAL;
		} else {
			*reterr = cd_xasprintf("expected a number or a string for \"%s\", got %s",
					       i->key, cd_json_type_name(x->type));
			return -EINVAL;
		}
		cd_limits_put(&got, (enum cd_limit)l, val);
	}
	for (int l = 0; l < CD_LIMIT_COUNT; l++)
		if (cd_limits_has(&got, (enum cd_limit)l))
			cd_limits_put(ret, (enum cd_limit)l, got.v[l]);
	*reterr_key = NULL;
	*reterr_at = NULL;
	return 0;
}

/* "1.5" for 1500 thousandths: the decimals that are not zero. */
static void fmt_thousandths(struct cd_strbuf *sb, uint64_t v)
{
	cd_strbuf_printf(sb, "%" PRIu64, v / 1000);
	unsigned frac = (unsigned)(v % 1000);
	if (!frac)
		return;
	char d[4];
	snprintf(d, sizeof(d), "%03u", frac);
	for (int i = 2; i > 0 && d[i] == '0'; i--)
		d[i] = '\0';
	cd_strbuf_printf(sb, ".%s", d);
}

char *cd_limit_format(enum cd_limit l, uint64_t v)
{
	const struct cd_limit_info *i = cd_limit_info(l);
	struct cd_strbuf sb = { 0 };

	switch (i ? i->unit : CD_UNIT_NUMBER) {
	case CD_UNIT_NUMBER:
		cd_strbuf_printf(&sb, "%" PRIu64, v);
		break;
	case CD_UNIT_BYTES: {
		static const struct {
			uint64_t mul;
			const char *name;
		} units[] = { { PIB, "PiB" },
			      { TIB, "TiB" },
			      { GIB, "GiB" },
			      { MIB, "MiB" },
			      { KIB, "KiB" } };
		size_t u = 0;
		while (u < CD_ARRAY_SIZE(units) && v < units[u].mul)
			u++;
		if (v == 0 || u == CD_ARRAY_SIZE(units)) {
			cd_strbuf_printf(&sb, "%" PRIu64 " bytes", v);
		} else if (v % units[u].mul == 0) {
			cd_strbuf_printf(&sb, "%" PRIu64 " %s", v / units[u].mul, units[u].name);
		} else {
			/* Not a whole number of the unit: three decimals at most, rounded down. */
			uint64_t thousandths =
				v / units[u].mul * 1000 + (v % units[u].mul) * 1000 / units[u].mul;
			fmt_thousandths(&sb, thousandths);
			cd_strbuf_printf(&sb, " %s", units[u].name);
		}
		break;
	}
	case CD_UNIT_MILLICPUS:
		fmt_thousandths(&sb, v);
		cd_strbuf_append(&sb, v == 1000 ? " CPU" : " CPUs");
		break;
	case CD_UNIT_SECONDS:
		if (v && v % 3600 == 0)
			cd_strbuf_printf(&sb, "%" PRIu64 " h", v / 3600);
		else if (v && v % 60 == 0)
			cd_strbuf_printf(&sb, "%" PRIu64 " min", v / 60);
		else
			cd_strbuf_printf(&sb, "%" PRIu64 " s", v);
		break;
	}
	return cd_strbuf_steal(&sb);
}

char *cd_limits_format(const struct cd_limits *L)
{
	struct cd_strbuf sb = { 0 };
	for (int l = 0; l < CD_LIMIT_COUNT; l++) {
		if (!cd_limits_has(L, (enum cd_limit)l))
			continue;
		cleanup_free char *v = cd_limit_format((enum cd_limit)l, L->v[l]);
		cd_strbuf_printf(&sb, "%s%s=%s", sb.len ? ", " : "", limit_info[l].name, v);
	}
	return cd_strbuf_steal(&sb);
}

int cd_limits_merge(const struct cd_limits *asked, const struct cd_limits *defaults,
		    const struct cd_limits *max, struct cd_limits *ret, char **reterr)
{
	struct cd_limits out = { 0 };
	for (int i = 0; i < CD_LIMIT_COUNT; i++) {
		enum cd_limit l = (enum cd_limit)i;
		if (cd_limits_has(asked, l)) {
			if (cd_limits_has(max, l) && asked->v[l] > max->v[l]) {
				cleanup_free char *a = cd_limit_format(l, asked->v[l]);
				cleanup_free char *m = cd_limit_format(l, max->v[l]);
				*reterr = cd_xasprintf("%s: %s asked, but this server allows at "
						       "most %s",
						       limit_info[l].key, a, m);
				return -EINVAL;
			}
			cd_limits_put(&out, l, asked->v[l]);
		} else if (cd_limits_has(defaults, l)) {
			uint64_t v = defaults->v[l];
			/* Defaults above the maximum are refused at start; clamp anyway. */
			if (cd_limits_has(max, l) && v > max->v[l])
				v = max->v[l];
			cd_limits_put(&out, l, v);
		} else if (cd_limits_has(max, l)) {
			cd_limits_put(&out, l, max->v[l]);
		}
	}
	*ret = out;
	return 0;
}

/* ---- the plan ---- */

struct cd_limits_plan *cd_limits_plan_free(struct cd_limits_plan *p)
{
	if (!p)
		return NULL;
	for (int l = 0; l < CD_LIMIT_COUNT; l++)
		free(p->detail[l]);
	cd_strv_free(p->degraded);
	cd_strv_free(p->notes);
	free(p);
	return NULL;
}

static void plan_freep(struct cd_limits_plan **p)
{
	cd_limits_plan_free(*p);
}

static void add_cg(struct cd_limits_plan *p, unsigned ctl, const char *file, const char *fmt, ...)
	CD_PRINTF(4, 5);
static void add_cg(struct cd_limits_plan *p, unsigned ctl, const char *file, const char *fmt, ...)
{
	struct cd_cg_write *w = &p->cg[p->n_cg++];
	va_list ap;
	w->file = file;
	va_start(ap, fmt);
	vsnprintf(w->value, sizeof(w->value), fmt, ap);
	va_end(ap);
	p->controllers |= ctl;
}

static void add_rl(struct cd_limits_plan *p, enum cd_rlimit res, uint64_t soft, uint64_t hard)
{
	p->rl[p->n_rl++] = (struct cd_rlimit_set){ .res = res, .soft = soft, .hard = hard };
}

static void add_userns(struct cd_limits_plan *p, const char *file, uint64_t v)
{
	struct cd_userns_write *w = &p->userns[p->n_userns++];
	w->file = file;
	snprintf(w->value, sizeof(w->value), "%" PRIu64, v);
}

static unsigned ctl_index(unsigned ctl)
{
	return ctl == CD_CG_PIDS ? 0 : ctl == CD_CG_MEMORY ? 1 : 2;
}

/* Why the controller ctl cannot be used here, for refusals and degradations. */
static char *no_controller(const struct cd_limits_host *h, unsigned ctl)
{
	const char *name = cg_names[ctl_index(ctl)];
	if (!h || !h->probed)
		return cd_xasprintf("the host's cgroups were not looked at (for the %s "
				    "controller)",
				    name);
	if (!h->cgroup)
		return cd_xasprintf("there is no cgroup v2 %s controller cordon may use: %s "
				    "(fix: %s)",
				    name, h->why, h->fix);
	const char *why = h->ctl_why[ctl_index(ctl)];
	return cd_xasprintf("there is no cgroup v2 %s controller in %s%s%s", name, h->where,
			    *why ? ": " : "", why);
}

static int refuse_limit(char **reterr, enum cd_limit l, uint64_t v, const char *why,
			const char *instead)
{
	cleanup_free char *val = cd_limit_format(l, v);
	*reterr = cd_xasprintf("%s limit %s cannot be enforced: %s; or pass --allow-degraded=%s "
			       "(%s)",
			       limit_info[l].what, val, why, limit_info[l].name, instead);
	return -EOPNOTSUPP;
}

/* Why RLIMIT_NPROC does not bound this sandbox alone, or NULL when it does. */
static const char *nproc_not_per_sandbox(const struct cd_limits_host *h,
					 const struct cd_limits_ctx *c)
{
	if (c->is_root)
		return "the kernel does not apply RLIMIT_NPROC to root";
	if (!c->own_userns)
		return "without a user namespace of the sandbox's own, RLIMIT_NPROC counts every "
		       "process of the user, not the sandbox's";
	if (!h || !h->nproc_per_userns)
		return "this kernel (before Linux 5.14) counts RLIMIT_NPROC per user, not per "
		       "user namespace";
	return NULL;
}

/*
 * Why a limit of the sandbox's user namespace (the inotify ones) cannot
 * bound this sandbox, with the fix in *ret_fix; NULL when it can. Static
 * strings.
 */
static const char *userns_why(const struct cd_limits_ctx *c, const char **ret_fix)
{
	if (c->own_userns) {
		*ret_fix = NULL;
		return NULL;
	}
	if (c->unsandboxed) {
		*ret_fix = "use a profile with a sandbox";
		return "the command runs without a sandbox, so in no user namespace of its own, "
		       "and the kernel counts inotify instances and watches per user per user "
		       "namespace: the count would be the user's on the whole host";
	}
	if (c->is_root) {
		*ret_fix = "run cordon as an ordinary user, whose sandboxes get a user namespace "
			   "of their own";
		return "a sandbox of root's has no user namespace of its own, and the kernel "
		       "counts inotify instances and watches per user per user namespace: the "
		       "count would be every root process's on the host";
	}
	*ret_fix = "enable user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
		   "user.max_user_namespaces > 0, or an AppArmor profile allowing userns)";
	return "the sandbox has no user namespace of its own (user namespaces are unavailable "
	       "here), and the kernel counts inotify instances and watches per user per user "
	       "namespace: the count would be the user's on the whole host";
}

int cd_limits_plan_build(const struct cd_limits *asked, const struct cd_limits_host *host,
			 const struct cd_limits_ctx *ctx, struct cd_limits_plan **ret,
			 char **reterr)
{
	static const struct cd_limits_ctx no_ctx = { 0 };
	CD_CLEANUP(plan_freep) struct cd_limits_plan *p = NULL;
	const struct cd_limits_host *h = host;
	const struct cd_limits_ctx *c = ctx ? ctx : &no_ctx;
	unsigned ctl = h && h->probed && h->cgroup ? h->controllers : 0;

	*ret = NULL;
	if (reterr)
		*reterr = NULL;
	if (!cd_limits_any(asked))
		return 0;
	p = cd_xcalloc(1, sizeof(*p));
	p->limits = *asked;

	for (int i = 0; i < CD_LIMIT_COUNT; i++) {
		enum cd_limit l = (enum cd_limit)i;
		uint64_t v = asked->v[l];
		bool degrade = c->degraded & (1u << l);
		cleanup_free char *val = NULL;
		cleanup_free char *why = NULL;

		if (!cd_limits_has(asked, l))
			continue;
		val = cd_limit_format(l, v);
		switch (l) {
		case CD_LIMIT_TASKS:
			if (c->pid_init && v < 2) {
				*reterr = cd_xasprintf("tasks must be at least 2 here: the "
						       "sandbox's init (pid 1 of its pid "
						       "namespace) is one of them");
				return -EOPNOTSUPP;
			}
			if (ctl & CD_CG_PIDS) {
				p->how[l] = CD_LIMIT_HOW_CGROUP;
				add_cg(p, CD_CG_PIDS, "pids.max", "%" PRIu64, v);
				p->detail[l] =
					cd_xasprintf("cgroup pids.max %" PRIu64 ": every "
						     "process and thread of the sandbox%s",
						     v, c->pid_init ? ", its init included" : "");
				break;
			}
			why = no_controller(h, CD_CG_PIDS);
			if (!nproc_not_per_sandbox(h, c)) {
				p->how[l] = CD_LIMIT_HOW_RLIMIT;
				add_rl(p, CD_RLIM_NPROC, v, v);
				p->detail[l] = cd_xasprintf(
					"RLIMIT_NPROC %" PRIu64 ": processes and threads of the "
					"sandbox%s, counted in its own user namespace, so per "
					"sandbox (%s)",
					v, c->pid_init ? ", its init included" : "", why);
				break;
			}
			if (!degrade) {
				cleanup_free char *both =
					cd_xasprintf("%s; nor can RLIMIT_NPROC stand in: %s", why,
						     nproc_not_per_sandbox(h, c));
				return refuse_limit(reterr, l, v, both, "it is then not enforced");
			}
			p->how[l] = CD_LIMIT_HOW_SKIPPED;
			p->detail[l] = cd_xasprintf("NOT enforced (--allow-degraded=tasks): %s",
						    nproc_not_per_sandbox(h, c));
			cd_strv_push_take(&p->degraded,
					  cd_xasprintf("task limit %s NOT enforced: %s; and %s",
						       val, why, nproc_not_per_sandbox(h, c)));
			break;
		case CD_LIMIT_MEMORY:
			if (ctl & CD_CG_MEMORY) {
				p->how[l] = CD_LIMIT_HOW_CGROUP;
				add_cg(p, CD_CG_MEMORY, "memory.max", "%" PRIu64, v);
				p->detail[l] = cd_xasprintf(
					"cgroup memory.max %" PRIu64 ": the memory of the whole "
					"sandbox (the kernel's OOM killer ends a process of it "
					"at the limit)",
					v);
				break;
			}
			why = no_controller(h, CD_CG_MEMORY);
			if (!degrade)
				return refuse_limit(reterr, l, v, why,
						    "each process's address space is then limited "
						    "instead, RLIMIT_AS");
			p->how[l] = CD_LIMIT_HOW_RLIMIT_AS;
			add_rl(p, CD_RLIM_AS, v, v);
			p->detail[l] =
				cd_xasprintf("RLIMIT_AS %" PRIu64 " on each process (--allow-"
					     "degraded=memory): its address space, reserved "
					     "memory included, not the sandbox's memory",
					     v);
			cd_strv_push_take(&p->degraded,
					  cd_xasprintf("memory limit %s NOT enforced for the "
						       "sandbox as a whole: %s; each process's "
						       "address space is limited to %s instead "
						       "(RLIMIT_AS): several processes together "
						       "can use more, and programs that reserve "
						       "more address space than they use may fail",
						       val, why, val));
			break;
		case CD_LIMIT_SWAP:
			if ((ctl & CD_CG_MEMORY) && h->swap) {
				p->how[l] = CD_LIMIT_HOW_CGROUP;
				add_cg(p, CD_CG_MEMORY, "memory.swap.max", "%" PRIu64, v);
				p->detail[l] = cd_xasprintf("cgroup memory.swap.max %" PRIu64
							    ": the swap of the whole sandbox",
							    v);
				break;
			}
			why = (ctl & CD_CG_MEMORY) ? cd_xstrdup("this kernel does not account "
								"swap (no memory.swap.max)")
						   : no_controller(h, CD_CG_MEMORY);
			if (!degrade)
				return refuse_limit(reterr, l, v, why, "it is then not enforced");
			p->how[l] = CD_LIMIT_HOW_SKIPPED;
			p->detail[l] =
				cd_xasprintf("NOT enforced (--allow-degraded=swap): %s", why);
			cd_strv_push_take(&p->degraded, cd_xasprintf("swap limit %s NOT "
								     "enforced: %s",
								     val, why));
			break;
		case CD_LIMIT_CPU:
			if (ctl & CD_CG_CPU) {
				p->how[l] = CD_LIMIT_HOW_CGROUP;
				add_cg(p, CD_CG_CPU, "cpu.max", "%" PRIu64 " %" PRIu64,
				       v * CPU_PERIOD_US / 1000, CPU_PERIOD_US);
				p->detail[l] =
					cd_xasprintf("cgroup cpu.max %" PRIu64 " %" PRIu64
						     ": the whole sandbox gets "
						     "at most %s of CPU time per wall-clock second",
						     v * CPU_PERIOD_US / 1000, CPU_PERIOD_US, val);
				break;
			}
			why = no_controller(h, CD_CG_CPU);
			if (!degrade)
				return refuse_limit(reterr, l, v, why,
						    "it is then not enforced; no rlimit bounds a "
						    "rate of CPU use");
			p->how[l] = CD_LIMIT_HOW_SKIPPED;
			p->detail[l] = cd_xasprintf("NOT enforced (--allow-degraded=cpu): %s", why);
			cd_strv_push_take(&p->degraded, cd_xasprintf("CPU quota %s NOT "
								     "enforced: %s",
								     val, why));
			break;
		case CD_LIMIT_CPU_TIME:
			/* SIGXCPU at the limit (it ends the process unless handled), SIGKILL 1 s on. */
			p->how[l] = CD_LIMIT_HOW_RLIMIT;
			add_rl(p, CD_RLIM_CPU, v, v + 1);
			p->detail[l] = cd_xasprintf("RLIMIT_CPU %" PRIu64 ": CPU seconds of each "
						    "process (SIGXCPU at %s, SIGKILL a second "
						    "later), not of the sandbox as a whole",
						    v, val);
			break;
		case CD_LIMIT_OPEN_FILES:
			p->how[l] = CD_LIMIT_HOW_RLIMIT;
			add_rl(p, CD_RLIM_NOFILE, v, v);
			p->detail[l] = cd_xasprintf("RLIMIT_NOFILE %" PRIu64 ": descriptors "
						    "each process may have open",
						    v);
			break;
		case CD_LIMIT_FILE_SIZE:
			p->how[l] = CD_LIMIT_HOW_RLIMIT;
			add_rl(p, CD_RLIM_FSIZE, v, v);
			p->detail[l] = cd_xasprintf("RLIMIT_FSIZE %" PRIu64 ": the size any one "
						    "file may be written to (SIGXFSZ, then "
						    "EFBIG), not the total written",
						    v);
			break;
		case CD_LIMIT_CORE:
			p->how[l] = CD_LIMIT_HOW_RLIMIT;
			add_rl(p, CD_RLIM_CORE, v, v);
			p->detail[l] = v ? cd_xasprintf("RLIMIT_CORE %" PRIu64 ": the size of a "
							"core dump",
							v)
					 : cd_xstrdup("RLIMIT_CORE 0: no core dumps");
			break;
		case CD_LIMIT_PRIVATE_TMP:
			p->how[l] = CD_LIMIT_HOW_MOUNT;
			p->detail[l] = cd_xasprintf("a tmpfs of %s on /tmp in the sandbox's mount "
						    "namespace (the host's /tmp is out of sight)",
						    val);
			break;
		case CD_LIMIT_INOTIFY_INSTANCES:
		case CD_LIMIT_INOTIFY_WATCHES: {
			bool inst = l == CD_LIMIT_INOTIFY_INSTANCES;
			const char *file = inst ? "max_inotify_instances" : "max_inotify_watches";
			const char *fix = NULL;
			const char *no = userns_why(c, &fix);
			if (!no) {
				p->how[l] = CD_LIMIT_HOW_USERNS;
				add_userns(p, file, v);
				p->detail[l] = cd_xasprintf(
					"%s %" PRIu64 " in the sandbox's own user namespace: "
					"the inotify %s of the whole sandbox (%s then fails "
					"with %s; nothing is killed); they count against the "
					"user's own limit on the host too",
					file, v, inst ? "instances" : "watches",
					inst ? "inotify_init1" : "inotify_add_watch",
					inst ? "EMFILE" : "ENOSPC");
				break;
			}
			if (!degrade) {
				cleanup_free char *both = cd_xasprintf("%s (fix: %s)", no, fix);
				return refuse_limit(reterr, l, v, both, "it is then not enforced");
			}
			p->how[l] = CD_LIMIT_HOW_SKIPPED;
			p->detail[l] = cd_xasprintf("NOT enforced (--allow-degraded=%s): %s",
						    limit_info[l].name, no);
			cd_strv_push_take(&p->degraded, cd_xasprintf("%s limit %s NOT enforced: %s",
								     limit_info[l].what, val, no));
			break;
		}
		case CD_LIMIT_COUNT:
			break;
		}
	}

	/*
	 * A memory limit means memory: without a swap limit, swapping out
	 * would let the sandbox use as much again of the host's swap.
	 */
	if (p->how[CD_LIMIT_MEMORY] == CD_LIMIT_HOW_CGROUP &&
	    !cd_limits_has(asked, CD_LIMIT_SWAP)) {
		if (h->swap) {
			add_cg(p, CD_CG_MEMORY, "memory.swap.max", "0");
			cd_strv_push_take(&p->notes, cd_xstrdup("swap: none (memory.swap.max 0): a "
								"memory limit includes no swap "
								"unless a swap limit is given"));
		} else {
			cd_strv_push_take(
				&p->notes,
				cd_xstrdup("swap is not accounted on this host (no "
					   "memory.swap.max): if it has swap, the sandbox "
					   "may swap out beyond its memory limit"));
		}
	}
	/* Any limit: a cgroup of its own where there is one, for cgroup.kill at the end. */
	p->cgroup = h && h->probed && h->cgroup;
	*ret = cd_steal_pointer(&p);
	return 0;
}

void cd_limits_plan_json(const struct cd_limits_plan *p, struct cd_strbuf *sb)
{
	bool first = true;
	cd_strbuf_append_c(sb, '{');
	for (int i = 0; p && i < CD_LIMIT_COUNT; i++) {
		enum cd_limit l = (enum cd_limit)i;
		if (!cd_limits_has(&p->limits, l))
			continue;
		cd_strbuf_printf(sb, "%s\"%s\":{\"value\":", first ? "" : ",", limit_info[l].key);
		if (limit_info[l].unit == CD_UNIT_MILLICPUS)
			fmt_thousandths(sb, p->limits.v[l]);
		else
			cd_strbuf_printf(sb, "%" PRIu64, p->limits.v[l]);
		cd_strbuf_printf(sb, ",\"by\":\"%s\"}", how_names[p->how[l]]);
		first = false;
	}
	cd_strbuf_append_c(sb, '}');
}

int cd_limits_reason(const struct cd_limits_plan *p, const struct cd_limits_events *ev, char *buf,
		     size_t size)
{
	struct cd_strbuf sb = { 0 };
	int first = -1;

	if (size)
		buf[0] = '\0';
	if (!p || !ev)
		return -1;
	if (ev->oom_kills && p->how[CD_LIMIT_MEMORY] == CD_LIMIT_HOW_CGROUP) {
		cleanup_free char *v =
			cd_limit_format(CD_LIMIT_MEMORY, p->limits.v[CD_LIMIT_MEMORY]);
		if (ev->killed)
			cd_strbuf_printf(&sb, "killed: memory limit %s reached", v);
		else
			cd_strbuf_printf(&sb,
					 "memory limit %s reached: %" PRIu64 " process%s killed", v,
					 ev->oom_kills, ev->oom_kills == 1 ? "" : "es");
		first = CD_LIMIT_MEMORY;
	}
	if (ev->pids_max && p->how[CD_LIMIT_TASKS] == CD_LIMIT_HOW_CGROUP) {
		cd_strbuf_printf(&sb,
				 "%stask limit %" PRIu64 " reached: %" PRIu64 " fork%s refused",
				 sb.len ? "; " : "", p->limits.v[CD_LIMIT_TASKS], ev->pids_max,
				 ev->pids_max == 1 ? "" : "s");
		if (first < 0)
			first = CD_LIMIT_TASKS;
	}
	if (ev->sigxcpu && p->how[CD_LIMIT_CPU_TIME] == CD_LIMIT_HOW_RLIMIT) {
		cleanup_free char *v =
			cd_limit_format(CD_LIMIT_CPU_TIME, p->limits.v[CD_LIMIT_CPU_TIME]);
		cd_strbuf_printf(&sb, "%skilled: CPU time limit %s reached", sb.len ? "; " : "", v);
		if (first < 0)
			first = CD_LIMIT_CPU_TIME;
	}
	if (ev->sigxfsz && p->how[CD_LIMIT_FILE_SIZE] == CD_LIMIT_HOW_RLIMIT) {
		cleanup_free char *v =
			cd_limit_format(CD_LIMIT_FILE_SIZE, p->limits.v[CD_LIMIT_FILE_SIZE]);
		cd_strbuf_printf(&sb, "%skilled: file size limit %s reached", sb.len ? "; " : "",
				 v);
		if (first < 0)
			first = CD_LIMIT_FILE_SIZE;
	}
	if (sb.len && size) {
		size_t n = sb.len < size - 1 ? sb.len : size - 1;
		memcpy(buf, sb.buf, n);
		buf[n] = '\0';
	}
	cd_strbuf_done(&sb);
	return first;
}
