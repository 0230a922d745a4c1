/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for src/core/limits.c: the values' spellings, the JSON
 * object, serve's lists, the merge of defaults and maximums, the plan on
 * hosts with and without cgroups, and the account of a limit reached.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/limits.h"
#include "core/util.h"

#define MIB (1024ULL * 1024ULL)

/* ---- values ---- */

static const struct {
	enum cd_limit l;
	const char *in;
	int rc;
	uint64_t want;
} values[] = {
	{ CD_LIMIT_TASKS, "100", 0, 100 },
	{ CD_LIMIT_TASKS, "0", -EINVAL, 0 },
	{ CD_LIMIT_TASKS, "1k", -EINVAL, 0 },
	{ CD_LIMIT_TASKS, "", -EINVAL, 0 },
	{ CD_LIMIT_TASKS, "99999999999999999999999", -EINVAL, 0 },
	{ CD_LIMIT_MEMORY, "512M", 0, 512 * MIB },
	{ CD_LIMIT_MEMORY, "512m", 0, 512 * MIB },
	{ CD_LIMIT_MEMORY, "512MiB", 0, 512 * MIB },
	{ CD_LIMIT_MEMORY, "1G", 0, 1024 * MIB },
	{ CD_LIMIT_MEMORY, "2GB", 0, 2048 * MIB },
	{ CD_LIMIT_MEMORY, "1048576", 0, MIB },
	{ CD_LIMIT_MEMORY, "1K", -EINVAL, 0 },	 /* below the minimum */
	{ CD_LIMIT_MEMORY, "1.5G", -EINVAL, 0 }, /* sizes are whole */
	{ CD_LIMIT_MEMORY, "5X", -EINVAL, 0 },
	{ CD_LIMIT_MEMORY, "5MiBs", -EINVAL, 0 },
	{ CD_LIMIT_MEMORY, "-5M", -EINVAL, 0 },
	{ CD_LIMIT_MEMORY, "99999999999T", -EINVAL, 0 },
	{ CD_LIMIT_SWAP, "0", 0, 0 },
	{ CD_LIMIT_CPU, "1.5", 0, 1500 },
	{ CD_LIMIT_CPU, "0.5", 0, 500 },
	{ CD_LIMIT_CPU, "2", 0, 2000 },
	{ CD_LIMIT_CPU, "150%", 0, 1500 },
	{ CD_LIMIT_CPU, "0.25", 0, 250 },
	{ CD_LIMIT_CPU, "0.001", -EINVAL, 0 }, /* below 1% */
	{ CD_LIMIT_CPU, "0.0001", -EINVAL, 0 },
	{ CD_LIMIT_CPU, "1.", -EINVAL, 0 },
	{ CD_LIMIT_CPU, ".5", -EINVAL, 0 },
	{ CD_LIMIT_CPU, "1e3", -EINVAL, 0 },
	{ CD_LIMIT_CPU_TIME, "90", 0, 90 },
	{ CD_LIMIT_CPU_TIME, "90s", 0, 90 },
	{ CD_LIMIT_CPU_TIME, "15m", 0, 900 },
	{ CD_LIMIT_CPU_TIME, "2h", 0, 7200 },
	{ CD_LIMIT_CPU_TIME, "0", -EINVAL, 0 },
	{ CD_LIMIT_CPU_TIME, "1d", -EINVAL, 0 },
	{ CD_LIMIT_OPEN_FILES, "64", 0, 64 },
	{ CD_LIMIT_OPEN_FILES, "3", -EINVAL, 0 },
	{ CD_LIMIT_FILE_SIZE, "0", 0, 0 },
	{ CD_LIMIT_FILE_SIZE, "10M", 0, 10 * MIB },
	{ CD_LIMIT_CORE, "0", 0, 0 },
	{ CD_LIMIT_PRIVATE_TMP, "64M", 0, 64 * MIB },
	{ CD_LIMIT_PRIVATE_TMP, "4K", -EINVAL, 0 },
	{ CD_LIMIT_INOTIFY_INSTANCES, "16", 0, 16 },
	{ CD_LIMIT_INOTIFY_INSTANCES, "0", 0, 0 }, /* none at all */
	{ CD_LIMIT_INOTIFY_INSTANCES, "2147483647", 0, 2147483647 },
	{ CD_LIMIT_INOTIFY_INSTANCES, "2147483648", -EINVAL, 0 }, /* the sysctl is an int */
	{ CD_LIMIT_INOTIFY_INSTANCES, "1k", -EINVAL, 0 },
	{ CD_LIMIT_INOTIFY_WATCHES, "8192", 0, 8192 },
	{ CD_LIMIT_INOTIFY_WATCHES, "-1", -EINVAL, 0 },
};

START_TEST(test_parse_value)
{
	uint64_t v = 0;
	char *err = NULL;
	int r = cd_limit_parse(values[_i].l, values[_i].in, &v, &err);
	ck_assert_msg(r == values[_i].rc, "%s '%s': %d", cd_limit_info(values[_i].l)->name,
		      values[_i].in, r);
	if (r == 0) {
		ck_assert_uint_eq(v, values[_i].want);
		ck_assert_ptr_null(err);
	} else {
		/* The message names the limit. */
		ck_assert_ptr_nonnull(err);
		ck_assert_ptr_nonnull(strstr(err, cd_limit_info(values[_i].l)->name));
	}
	free(err);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_int_eq(cd_limit_from_name("open_files"), CD_LIMIT_OPEN_FILES);
	ck_assert_int_eq(cd_limit_from_name("open-files"), CD_LIMIT_OPEN_FILES);
	ck_assert_int_eq(cd_limit_from_name("private-tmp"), CD_LIMIT_PRIVATE_TMP);
	ck_assert_int_eq(cd_limit_from_name("inotify-instances"), CD_LIMIT_INOTIFY_INSTANCES);
	ck_assert_int_eq(cd_limit_from_name("inotify_watches"), CD_LIMIT_INOTIFY_WATCHES);
	ck_assert_int_eq(cd_limit_from_name("memroy"), -EINVAL);
	ck_assert_int_eq(cd_limit_from_name(NULL), -EINVAL);
	for (int l = 0; l < CD_LIMIT_COUNT; l++) {
		ck_assert_ptr_nonnull(cd_limit_info((enum cd_limit)l));
		ck_assert_int_eq(cd_limit_from_name(cd_limit_info((enum cd_limit)l)->key), l);
	}
	ck_assert_ptr_null(cd_limit_info(CD_LIMIT_COUNT));
	ck_assert_str_eq(cd_limit_how_name(CD_LIMIT_HOW_SKIPPED), "not-enforced");
	ck_assert_str_eq(cd_limit_how_name(CD_LIMIT_HOW_USERNS), "userns");
	ck_assert_str_eq(cd_rlimit_name(CD_RLIM_NPROC), "RLIMIT_NPROC");
	ck_assert_str_eq(cd_cg_controller_name(1), "memory");
	/* The limits an rlimit states exactly; tasks and memory only approximate. */
	ck_assert_int_eq(cd_limit_rlimit(CD_LIMIT_CPU_TIME), CD_RLIM_CPU);
	ck_assert_int_eq(cd_limit_rlimit(CD_LIMIT_OPEN_FILES), CD_RLIM_NOFILE);
	ck_assert_int_eq(cd_limit_rlimit(CD_LIMIT_FILE_SIZE), CD_RLIM_FSIZE);
	ck_assert_int_eq(cd_limit_rlimit(CD_LIMIT_CORE), CD_RLIM_CORE);
	ck_assert_int_eq(cd_limit_rlimit(CD_LIMIT_TASKS), -1);
	ck_assert_int_eq(cd_limit_rlimit(CD_LIMIT_MEMORY), -1);
	ck_assert_int_eq(cd_limit_rlimit(CD_LIMIT_PRIVATE_TMP), -1);
}
END_TEST

static const struct {
	enum cd_limit l;
	uint64_t v;
	const char *want;
} formats[] = {
	{ CD_LIMIT_MEMORY, 512 * MIB, "512 MiB" },
	{ CD_LIMIT_MEMORY, 1536 * MIB, "1.5 GiB" },
	{ CD_LIMIT_MEMORY, 1024 * MIB, "1 GiB" },
	{ CD_LIMIT_FILE_SIZE, 0, "0 bytes" },
	{ CD_LIMIT_FILE_SIZE, 1000, "1000 bytes" },
	{ CD_LIMIT_FILE_SIZE, 1024, "1 KiB" },
	{ CD_LIMIT_CPU, 1000, "1 CPU" },
	{ CD_LIMIT_CPU, 1500, "1.5 CPUs" },
	{ CD_LIMIT_CPU, 250, "0.25 CPUs" },
	{ CD_LIMIT_CPU_TIME, 90, "90 s" },
	{ CD_LIMIT_CPU_TIME, 900, "15 min" },
	{ CD_LIMIT_CPU_TIME, 7200, "2 h" },
	{ CD_LIMIT_TASKS, 100, "100" },
};

START_TEST(test_format)
{
	char *s = cd_limit_format(formats[_i].l, formats[_i].v);
	ck_assert_str_eq(s, formats[_i].want);
	free(s);
}
END_TEST

/* ---- lists and JSON ---- */

START_TEST(test_list)
{
	struct cd_limits L = { 0 };
	char *err = NULL;
	ck_assert_int_eq(cd_limits_parse_list("memory=512M,tasks=100,cpu=1.5", &L, &err), 0);
	ck_assert(cd_limits_has(&L, CD_LIMIT_MEMORY));
	ck_assert_uint_eq(L.v[CD_LIMIT_MEMORY], 512 * MIB);
	ck_assert_uint_eq(L.v[CD_LIMIT_TASKS], 100);
	ck_assert_uint_eq(L.v[CD_LIMIT_CPU], 1500);
	ck_assert(!cd_limits_has(&L, CD_LIMIT_SWAP));
	char *s = cd_limits_format(&L);
	ck_assert_str_eq(s, "tasks=100, memory=512 MiB, cpu=1.5 CPUs");
	free(s);
	ck_assert_int_eq(cd_limits_parse_list("inotify-instances=8,inotify_watches=100", &L, &err),
			 0);
	ck_assert_uint_eq(L.v[CD_LIMIT_INOTIFY_INSTANCES], 8);
	ck_assert_uint_eq(L.v[CD_LIMIT_INOTIFY_WATCHES], 100);
	ck_assert_int_eq(cd_limits_parse_list("inotify=8", &L, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "inotify-instances or inotify-watches"));
	free(err);

	static const char *const bad[] = {
		"",	      "memory",	 "memory=",	 "=5", "mem=5M", "memory=5M,memory=6M",
		"memory=5M,", "tasks=0", "open_files=2",
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(bad); i++) {
		struct cd_limits M = { 0 };
		err = NULL;
		ck_assert_msg(cd_limits_parse_list(bad[i], &M, &err) == -EINVAL, "%s", bad[i]);
		ck_assert_ptr_nonnull(err);
		/* Nothing is added from a list that fails. */
		ck_assert_uint_eq(M.set, 0);
		free(err);
	}
}
END_TEST

/* *key: a copy of the offending key (freed by the caller), NULL for none. */
static int from_json(const char *text, struct cd_limits *L, char **err, char **key)
{
	struct cd_json *v = NULL;
	struct cd_json_error jerr;
	const struct cd_json *at = NULL;
	const char *k = NULL;
	ck_assert_int_eq(cd_json_parse(text, strlen(text), NULL, &v, &jerr), 0);
	int r = cd_limits_from_json(v, L, &k, &at, err);
	*key = k ? cd_xstrdup(k) : NULL;
	if (r < 0)
		ck_assert_ptr_nonnull(at);
	cd_json_free(v);
	return r;
}

START_TEST(test_json)
{
	struct cd_limits L = { 0 };
	char *err = NULL, *key = NULL;
	ck_assert_int_eq(from_json("{\"memory\":\"512M\",\"tasks\":100,\"cpu\":0.5,\"cpu_time\":"
				   "60,\"file_size\":1048576,\"swap\":null}",
				   &L, &err, &key),
			 0);
	ck_assert_uint_eq(L.v[CD_LIMIT_MEMORY], 512 * MIB);
	ck_assert_uint_eq(L.v[CD_LIMIT_TASKS], 100);
	ck_assert_uint_eq(L.v[CD_LIMIT_CPU], 500);
	ck_assert_uint_eq(L.v[CD_LIMIT_CPU_TIME], 60);
	ck_assert_uint_eq(L.v[CD_LIMIT_FILE_SIZE], MIB);
	ck_assert(!cd_limits_has(&L, CD_LIMIT_SWAP)); /* null is absent */
	ck_assert_int_eq(
		from_json("{\"inotify_instances\":8,\"inotify_watches\":\"1000\"}", &L, &err, &key),
		0);
	ck_assert_uint_eq(L.v[CD_LIMIT_INOTIFY_INSTANCES], 8);
	ck_assert_uint_eq(L.v[CD_LIMIT_INOTIFY_WATCHES], 1000);

	static const struct {
		const char *text, *key, *msg;
	} bad[] = {
		{ "[]", NULL, "expected an object" },
		{ "{\"memroy\":\"1G\"}", "memroy", "unknown key" },
		{ "{\"open-files\":64}", "open-files", "unknown key" }, /* one JSON spelling */
		{ "{\"tasks\":1.5}", "tasks", "whole number" },
		{ "{\"tasks\":-1}", "tasks", "whole number" },
		{ "{\"tasks\":true}", "tasks", "a number or a string" },
		{ "{\"memory\":\"lots\"}", "memory", "is not a size" },
		{ "{\"memory\":1}", "memory", "must be from" },
		{ "{\"cpu\":1e3}", "cpu", "number of CPUs" },
		{ "{\"tasks\":\"1\\u0000\"}", "tasks", "NUL" },
		{ "{\"inotify-watches\":8}", "inotify-watches", "inotify_watches" },
		{ "{\"inotify_instances\":4294967296}", "inotify_instances", "must be from" },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(bad); i++) {
		struct cd_limits M = { 0 };
		err = NULL;
		key = NULL;
		ck_assert_msg(from_json(bad[i].text, &M, &err, &key) == -EINVAL, "%s", bad[i].text);
		ck_assert_msg(strstr(err, bad[i].msg), "%s: %s", bad[i].text, err);
		if (bad[i].key)
			ck_assert_str_eq(key, bad[i].key);
		else
			ck_assert_ptr_null(key);
		ck_assert_uint_eq(M.set, 0);
		free(err);
		free(key);
	}
}
END_TEST

/* ---- merge ---- */

START_TEST(test_merge)
{
	struct cd_limits def = { 0 }, max = { 0 }, asked = { 0 }, out;
	char *err = NULL;
	cd_limits_put(&def, CD_LIMIT_MEMORY, 256 * MIB);
	cd_limits_put(&def, CD_LIMIT_CPU_TIME, 60);
	cd_limits_put(&max, CD_LIMIT_MEMORY, 1024 * MIB);
	cd_limits_put(&max, CD_LIMIT_TASKS, 500);

	/* Nothing asked: the defaults, and the maximum of what has no default. */
	ck_assert_int_eq(cd_limits_merge(NULL, &def, &max, &out, &err), 0);
	ck_assert_uint_eq(out.v[CD_LIMIT_MEMORY], 256 * MIB);
	ck_assert_uint_eq(out.v[CD_LIMIT_CPU_TIME], 60);
	ck_assert_uint_eq(out.v[CD_LIMIT_TASKS], 500);
	ck_assert(!cd_limits_has(&out, CD_LIMIT_CPU));

	/* Less than the maximum, and a limit of its own. */
	cd_limits_put(&asked, CD_LIMIT_MEMORY, 512 * MIB);
	cd_limits_put(&asked, CD_LIMIT_CPU, 500);
	cd_limits_put(&asked, CD_LIMIT_TASKS, 10);
	ck_assert_int_eq(cd_limits_merge(&asked, &def, &max, &out, &err), 0);
	ck_assert_uint_eq(out.v[CD_LIMIT_MEMORY], 512 * MIB);
	ck_assert_uint_eq(out.v[CD_LIMIT_CPU], 500);
	ck_assert_uint_eq(out.v[CD_LIMIT_TASKS], 10);
	ck_assert_uint_eq(out.v[CD_LIMIT_CPU_TIME], 60);

	/* More than the maximum: refused, naming both. */
	cd_limits_put(&asked, CD_LIMIT_MEMORY, 2048 * MIB);
	ck_assert_int_eq(cd_limits_merge(&asked, &def, &max, &out, &err), -EINVAL);
	ck_assert_str_eq(err, "memory: 2 GiB asked, but this server allows at most 1 GiB");
	free(err);

	/* No server limits at all: what is asked. */
	ck_assert_int_eq(cd_limits_merge(&asked, NULL, NULL, &out, &err), 0);
	ck_assert_uint_eq(out.v[CD_LIMIT_MEMORY], 2048 * MIB);
	ck_assert_int_eq(cd_limits_merge(NULL, NULL, NULL, &out, &err), 0);
	ck_assert(!cd_limits_any(&out));
}
END_TEST

/* ---- plans ---- */

static struct cd_limits_host host_cgroup(unsigned controllers, bool swap)
{
	struct cd_limits_host h = { .probed = true, .cgroup = true, .controllers = controllers };
	h.swap = swap;
	h.nproc_per_userns = true;
	strcpy(h.where, "/sys/fs/cgroup/cordon (root)");
	for (unsigned i = 0; i < CD_CG_COUNT; i++)
		if (!(controllers & (1u << i)))
			strcpy(h.ctl_why[i], "bound to a cgroup v1 hierarchy");
	return h;
}

static struct cd_limits_host host_none(void)
{
	struct cd_limits_host h = { .probed = true, .nproc_per_userns = true };
	strcpy(h.why, "no cgroup v2 hierarchy is mounted");
	strcpy(h.fix, "mount one");
	return h;
}

static const struct cd_rlimit_set *find_rl(const struct cd_limits_plan *p, enum cd_rlimit r)
{
	for (size_t i = 0; i < p->n_rl; i++)
		if (p->rl[i].res == r)
			return &p->rl[i];
	return NULL;
}

static const char *find_cg(const struct cd_limits_plan *p, const char *file)
{
	for (size_t i = 0; i < p->n_cg; i++)
		if (cd_streq(p->cg[i].file, file))
			return p->cg[i].value;
	return NULL;
}

START_TEST(test_plan_nothing)
{
	struct cd_limits none = { 0 };
	struct cd_limits_plan *p = (void *)1;
	char *err = NULL;
	struct cd_limits_host h = host_none();
	ck_assert_int_eq(cd_limits_plan_build(&none, &h, NULL, &p, &err), 0);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(cd_limits_plan_build(NULL, &h, NULL, &p, &err), 0);
	ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_plan_cgroup)
{
	struct cd_limits L = { 0 };
	struct cd_limits_plan *p = NULL;
	char *err = NULL;
	struct cd_limits_host h = host_cgroup(CD_CG_PIDS | CD_CG_MEMORY | CD_CG_CPU, true);
	struct cd_limits_ctx ctx = { .is_root = true, .pid_init = true };
	cd_limits_put(&L, CD_LIMIT_TASKS, 64);
	cd_limits_put(&L, CD_LIMIT_MEMORY, 512 * MIB);
	cd_limits_put(&L, CD_LIMIT_CPU, 1500);
	cd_limits_put(&L, CD_LIMIT_OPEN_FILES, 256);
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
	ck_assert(p->cgroup);
	ck_assert_uint_eq(p->controllers, CD_CG_PIDS | CD_CG_MEMORY | CD_CG_CPU);
	ck_assert_int_eq(p->how[CD_LIMIT_TASKS], CD_LIMIT_HOW_CGROUP);
	ck_assert_int_eq(p->how[CD_LIMIT_MEMORY], CD_LIMIT_HOW_CGROUP);
	ck_assert_int_eq(p->how[CD_LIMIT_CPU], CD_LIMIT_HOW_CGROUP);
	ck_assert_int_eq(p->how[CD_LIMIT_OPEN_FILES], CD_LIMIT_HOW_RLIMIT);
	ck_assert_int_eq(p->how[CD_LIMIT_SWAP], CD_LIMIT_HOW_NONE);
	ck_assert_str_eq(find_cg(p, "pids.max"), "64");
	ck_assert_str_eq(find_cg(p, "memory.max"), "536870912");
	/* A memory limit brings no swap with it. */
	ck_assert_str_eq(find_cg(p, "memory.swap.max"), "0");
	ck_assert_str_eq(find_cg(p, "cpu.max"), "150000 100000");
	ck_assert_uint_eq(find_rl(p, CD_RLIM_NOFILE)->soft, 256);
	ck_assert_ptr_null(find_rl(p, CD_RLIM_NPROC));
	ck_assert_ptr_null(p->degraded);
	struct cd_strbuf sb = { 0 };
	cd_limits_plan_json(p, &sb);
	ck_assert_str_eq(sb.buf,
			 "{\"tasks\":{\"value\":64,\"by\":\"cgroup\"},\"memory\":{\"value\":"
			 "536870912,\"by\":\"cgroup\"},\"cpu\":{\"value\":1.5,\"by\":"
			 "\"cgroup\"},\"open_files\":{\"value\":256,\"by\":\"rlimit\"}}");
	cd_strbuf_done(&sb);
	cd_limits_plan_free(p);

	/* Swap asked: its own value. */
	cd_limits_put(&L, CD_LIMIT_SWAP, 64 * MIB);
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
	ck_assert_str_eq(find_cg(p, "memory.swap.max"), "67108864");
	cd_limits_plan_free(p);

	/* The init needs one task of its own. */
	cd_limits_put(&L, CD_LIMIT_TASKS, 1);
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "init"));
	free(err);
	ctx.pid_init = false;
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
	cd_limits_plan_free(p);
}
END_TEST

START_TEST(test_plan_rlimits)
{
	struct cd_limits L = { 0 };
	struct cd_limits_plan *p = NULL;
	char *err = NULL;
	struct cd_limits_host h = host_none();
	struct cd_limits_ctx ctx = { .own_userns = true, .pid_init = true };
	cd_limits_put(&L, CD_LIMIT_TASKS, 64);
	cd_limits_put(&L, CD_LIMIT_CPU_TIME, 10);
	cd_limits_put(&L, CD_LIMIT_FILE_SIZE, MIB);
	cd_limits_put(&L, CD_LIMIT_CORE, 0);
	cd_limits_put(&L, CD_LIMIT_PRIVATE_TMP, 8 * MIB);
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
	ck_assert(!p->cgroup);
	ck_assert_uint_eq(p->n_cg, 0);
	/* Unprivileged with a user namespace: RLIMIT_NPROC is per sandbox. */
	ck_assert_int_eq(p->how[CD_LIMIT_TASKS], CD_LIMIT_HOW_RLIMIT);
	ck_assert_uint_eq(find_rl(p, CD_RLIM_NPROC)->hard, 64);
	ck_assert_ptr_nonnull(strstr(p->detail[CD_LIMIT_TASKS], "per sandbox"));
	/* SIGXCPU at the limit, SIGKILL a second later. */
	ck_assert_uint_eq(find_rl(p, CD_RLIM_CPU)->soft, 10);
	ck_assert_uint_eq(find_rl(p, CD_RLIM_CPU)->hard, 11);
	ck_assert_uint_eq(find_rl(p, CD_RLIM_FSIZE)->soft, MIB);
	ck_assert_uint_eq(find_rl(p, CD_RLIM_CORE)->hard, 0);
	ck_assert_int_eq(p->how[CD_LIMIT_PRIVATE_TMP], CD_LIMIT_HOW_MOUNT);
	ck_assert_ptr_null(p->degraded);
	cd_limits_plan_free(p);

	/* Root: the kernel does not apply RLIMIT_NPROC to it. */
	ctx = (struct cd_limits_ctx){ .is_root = true, .pid_init = true };
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "does not apply RLIMIT_NPROC to root"));
	ck_assert_ptr_nonnull(strstr(err, "--allow-degraded=tasks"));
	ck_assert_ptr_nonnull(strstr(err, "no cgroup v2 hierarchy is mounted"));
	free(err);
	/* No user namespace: per user. */
	ctx = (struct cd_limits_ctx){ 0 };
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "every process of the user"));
	free(err);
	/* An old kernel counts per user too. */
	ctx = (struct cd_limits_ctx){ .own_userns = true };
	h.nproc_per_userns = false;
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "5.14"));
	free(err);
	/* Opted down: not enforced, and said so. */
	ctx.degraded = 1u << CD_LIMIT_TASKS;
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
	ck_assert_int_eq(p->how[CD_LIMIT_TASKS], CD_LIMIT_HOW_SKIPPED);
	ck_assert_ptr_null(find_rl(p, CD_RLIM_NPROC));
	ck_assert_ptr_nonnull(p->degraded);
	ck_assert_ptr_nonnull(strstr(p->degraded[0], "task limit 64 NOT enforced"));
	cd_limits_plan_free(p);
}
END_TEST

START_TEST(test_plan_refusals)
{
	static const struct {
		enum cd_limit l;
		uint64_t v;
		const char *msg;
		enum cd_limit_how degraded_how;
	} cases[] = {
		{ CD_LIMIT_MEMORY, 512 * MIB, "memory limit 512 MiB cannot be enforced",
		  CD_LIMIT_HOW_RLIMIT_AS },
		{ CD_LIMIT_SWAP, 0, "swap limit 0 bytes cannot be enforced", CD_LIMIT_HOW_SKIPPED },
		{ CD_LIMIT_CPU, 500, "CPU limit 0.5 CPUs cannot be enforced",
		  CD_LIMIT_HOW_SKIPPED },
	};
	/* A cgroup, but without the controllers (a hybrid host), and none at all. */
	struct cd_limits_host hosts[2] = { host_cgroup(0, false), host_none() };
	for (size_t k = 0; k < CD_ARRAY_SIZE(hosts); k++) {
		for (size_t i = 0; i < CD_ARRAY_SIZE(cases); i++) {
			struct cd_limits L = { 0 };
			struct cd_limits_plan *p = NULL;
			char *err = NULL;
			struct cd_limits_ctx ctx = { .own_userns = true };
			cd_limits_put(&L, cases[i].l, cases[i].v);
			ck_assert_int_eq(cd_limits_plan_build(&L, &hosts[k], &ctx, &p, &err),
					 -EOPNOTSUPP);
			ck_assert_msg(strstr(err, cases[i].msg), "%s", err);
			ck_assert_msg(strstr(err, k == 0 ? "bound to a cgroup v1 hierarchy"
							 : "no cgroup v2 hierarchy is mounted"),
				      "%s", err);
			free(err);
			ctx.degraded = 1u << cases[i].l;
			ck_assert_int_eq(cd_limits_plan_build(&L, &hosts[k], &ctx, &p, &err), 0);
			ck_assert_int_eq(p->how[cases[i].l], cases[i].degraded_how);
			ck_assert_ptr_nonnull(p->degraded);
			/* With a cgroup but no controller the sandbox still gets one (kill). */
			ck_assert(p->cgroup == (k == 0));
			ck_assert_uint_eq(p->n_cg, 0);
			if (cases[i].l == CD_LIMIT_MEMORY)
				ck_assert_uint_eq(find_rl(p, CD_RLIM_AS)->soft, 512 * MIB);
			cd_limits_plan_free(p);
		}
	}
}
END_TEST

START_TEST(test_plan_no_swap_accounting)
{
	struct cd_limits L = { 0 };
	struct cd_limits_plan *p = NULL;
	char *err = NULL;
	struct cd_limits_host h = host_cgroup(CD_CG_MEMORY, false);
	cd_limits_put(&L, CD_LIMIT_MEMORY, 64 * MIB);
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, NULL, &p, &err), 0);
	ck_assert_ptr_null(find_cg(p, "memory.swap.max"));
	ck_assert_ptr_nonnull(p->notes);
	ck_assert_ptr_nonnull(strstr(p->notes[0], "not accounted"));
	cd_limits_plan_free(p);
	cd_limits_put(&L, CD_LIMIT_SWAP, 0);
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, NULL, &p, &err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "does not account swap"));
	free(err);
}
END_TEST

/*
 * The inotify limits: the sandbox's own user namespace's maximums where it
 * has one, refused (with the why and the fix) or skipped on request where
 * it has not: root, no user namespaces, no sandbox.
 */
START_TEST(test_plan_inotify)
{
	struct cd_limits L = { 0 };
	struct cd_limits_plan *p = NULL;
	char *err = NULL;
	struct cd_limits_host h = host_none();
	struct cd_limits_ctx ctx = { .own_userns = true, .pid_init = true };
	cd_limits_put(&L, CD_LIMIT_INOTIFY_INSTANCES, 16);
	cd_limits_put(&L, CD_LIMIT_INOTIFY_WATCHES, 1000);
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
	ck_assert_int_eq(p->how[CD_LIMIT_INOTIFY_INSTANCES], CD_LIMIT_HOW_USERNS);
	ck_assert_int_eq(p->how[CD_LIMIT_INOTIFY_WATCHES], CD_LIMIT_HOW_USERNS);
	ck_assert_uint_eq(p->n_userns, 2);
	ck_assert_str_eq(p->userns[0].file, "max_inotify_instances");
	ck_assert_str_eq(p->userns[0].value, "16");
	ck_assert_str_eq(p->userns[1].file, "max_inotify_watches");
	ck_assert_str_eq(p->userns[1].value, "1000");
	ck_assert_ptr_nonnull(
		strstr(p->detail[CD_LIMIT_INOTIFY_INSTANCES],
		       "max_inotify_instances 16 in the sandbox's own user namespace"));
	ck_assert_ptr_nonnull(strstr(p->detail[CD_LIMIT_INOTIFY_INSTANCES], "EMFILE"));
	ck_assert_ptr_nonnull(strstr(p->detail[CD_LIMIT_INOTIFY_WATCHES], "ENOSPC"));
	/* Neither an rlimit nor a cgroup file, and nothing degraded. */
	ck_assert_uint_eq(p->n_rl, 0);
	ck_assert_uint_eq(p->n_cg, 0);
	ck_assert_ptr_null(p->degraded);
	struct cd_strbuf sb = { 0 };
	cd_limits_plan_json(p, &sb);
	ck_assert_str_eq(sb.buf, "{\"inotify_instances\":{\"value\":16,\"by\":\"userns\"},"
				 "\"inotify_watches\":{\"value\":1000,\"by\":\"userns\"}}");
	cd_strbuf_done(&sb);
	cd_limits_plan_free(p);

	/* Without a user namespace of its own: refused, saying why and the fix. */
	static const struct {
		struct cd_limits_ctx ctx;
		const char *why, *fix;
	} no[] = {
		{ { .is_root = true, .pid_init = true },
		  "a sandbox of root's has no user namespace of its own",
		  "fix: run cordon as an ordinary user" },
		{ { .pid_init = false },
		  "user namespaces are unavailable here",
		  "fix: enable user namespaces" },
		{ { .unsandboxed = true },
		  "the command runs without a sandbox",
		  "fix: use a profile with a sandbox" },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(no); i++) {
		ctx = no[i].ctx;
		ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), -EOPNOTSUPP);
		ck_assert_ptr_null(p);
		ck_assert_msg(strstr(err, "inotify instance limit 16 cannot be enforced"), "%s",
			      err);
		ck_assert_msg(strstr(err, no[i].why), "%s", err);
		ck_assert_msg(strstr(err, no[i].fix), "%s", err);
		ck_assert_msg(strstr(err, "--allow-degraded=inotify-instances"), "%s", err);
		free(err);
		/* One opted down: the other one is refused still. */
		ctx.degraded = 1u << CD_LIMIT_INOTIFY_INSTANCES;
		ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), -EOPNOTSUPP);
		ck_assert_msg(strstr(err, "inotify watch limit 1000 cannot be enforced"), "%s",
			      err);
		ck_assert_msg(strstr(err, "--allow-degraded=inotify-watches"), "%s", err);
		free(err);
		/* Both: run without, and say so. */
		ctx.degraded |= 1u << CD_LIMIT_INOTIFY_WATCHES;
		ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
		ck_assert_int_eq(p->how[CD_LIMIT_INOTIFY_INSTANCES], CD_LIMIT_HOW_SKIPPED);
		ck_assert_int_eq(p->how[CD_LIMIT_INOTIFY_WATCHES], CD_LIMIT_HOW_SKIPPED);
		ck_assert_uint_eq(p->n_userns, 0);
		ck_assert_uint_eq(cd_strv_length(p->degraded), 2);
		ck_assert_ptr_nonnull(
			strstr(p->degraded[0], "inotify instance limit 16 NOT enforced"));
		ck_assert_ptr_nonnull(strstr(p->degraded[0], no[i].why));
		ck_assert_ptr_nonnull(
			strstr(p->degraded[1], "inotify watch limit 1000 NOT enforced"));
		ck_assert_ptr_nonnull(strstr(p->detail[CD_LIMIT_INOTIFY_WATCHES],
					     "--allow-degraded=inotify-watches"));
		cd_strbuf_done(&sb);
		cd_limits_plan_json(p, &sb);
		ck_assert_ptr_nonnull(strstr(sb.buf, "\"by\":\"not-enforced\""));
		cd_strbuf_done(&sb);
		cd_limits_plan_free(p);
	}
	/* Nothing they cause is a reason on exit: nothing is killed. */
	ctx = (struct cd_limits_ctx){ .own_userns = true };
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
	struct cd_limits_events ev = { .killed = true };
	char buf[64];
	ck_assert_int_eq(cd_limits_reason(p, &ev, buf, sizeof(buf)), -1);
	cd_limits_plan_free(p);
}
END_TEST

/* ---- reasons ---- */

START_TEST(test_reason)
{
	struct cd_limits L = { 0 };
	struct cd_limits_plan *p = NULL;
	char *err = NULL, buf[256];
	struct cd_limits_host h = host_cgroup(CD_CG_PIDS | CD_CG_MEMORY, true);
	cd_limits_put(&L, CD_LIMIT_MEMORY, 512 * MIB);
	cd_limits_put(&L, CD_LIMIT_TASKS, 100);
	cd_limits_put(&L, CD_LIMIT_CPU_TIME, 60);
	cd_limits_put(&L, CD_LIMIT_FILE_SIZE, MIB);
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, NULL, &p, &err), 0);

	struct cd_limits_events ev = { 0 };
	ck_assert_int_eq(cd_limits_reason(p, &ev, buf, sizeof(buf)), -1);
	ck_assert_str_eq(buf, "");
	ev = (struct cd_limits_events){ .oom_kills = 1, .killed = true };
	ck_assert_int_eq(cd_limits_reason(p, &ev, buf, sizeof(buf)), CD_LIMIT_MEMORY);
	ck_assert_str_eq(buf, "killed: memory limit 512 MiB reached");
	ev = (struct cd_limits_events){ .oom_kills = 2 };
	cd_limits_reason(p, &ev, buf, sizeof(buf));
	ck_assert_str_eq(buf, "memory limit 512 MiB reached: 2 processes killed");
	ev = (struct cd_limits_events){ .pids_max = 37 };
	ck_assert_int_eq(cd_limits_reason(p, &ev, buf, sizeof(buf)), CD_LIMIT_TASKS);
	ck_assert_str_eq(buf, "task limit 100 reached: 37 forks refused");
	ev = (struct cd_limits_events){ .sigxcpu = true };
	ck_assert_int_eq(cd_limits_reason(p, &ev, buf, sizeof(buf)), CD_LIMIT_CPU_TIME);
	ck_assert_str_eq(buf, "killed: CPU time limit 1 min reached");
	ev = (struct cd_limits_events){ .sigxfsz = true, .pids_max = 1 };
	ck_assert_int_eq(cd_limits_reason(p, &ev, buf, sizeof(buf)), CD_LIMIT_TASKS);
	ck_assert_str_eq(buf, "task limit 100 reached: 1 fork refused; killed: file size limit "
			      "1 MiB reached");
	/* Truncated, still terminated. */
	cd_limits_reason(p, &ev, buf, 8);
	ck_assert_str_eq(buf, "task li");
	cd_limits_plan_free(p);

	/* Limits enforced otherwise say nothing from events they did not cause. */
	h = host_none();
	struct cd_limits_ctx ctx = { .own_userns = true };
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), -EOPNOTSUPP);
	free(err);
	ctx.degraded = 1u << CD_LIMIT_MEMORY;
	ck_assert_int_eq(cd_limits_plan_build(&L, &h, &ctx, &p, &err), 0);
	ev = (struct cd_limits_events){ .oom_kills = 1, .pids_max = 3, .killed = true };
	ck_assert_int_eq(cd_limits_reason(p, &ev, buf, sizeof(buf)), -1);
	cd_limits_plan_free(p);
	ck_assert_int_eq(cd_limits_reason(NULL, &ev, buf, sizeof(buf)), -1);
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("values");
	tcase_add_loop_test(tc, test_parse_value, 0, CD_ARRAY_SIZE(values));
	tcase_add_test(tc, test_names);
	tcase_add_loop_test(tc, test_format, 0, CD_ARRAY_SIZE(formats));
	suite_add_tcase(s, tc);

	tc = tcase_create("spellings");
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_json);
	tcase_add_test(tc, test_merge);
	suite_add_tcase(s, tc);

	tc = tcase_create("plan");
	tcase_add_test(tc, test_plan_nothing);
	tcase_add_test(tc, test_plan_cgroup);
	tcase_add_test(tc, test_plan_rlimits);
	tcase_add_test(tc, test_plan_refusals);
	tcase_add_test(tc, test_plan_no_swap_accounting);
	tcase_add_test(tc, test_plan_inotify);
	tcase_add_test(tc, test_reason);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(limits_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
