/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Wire intents (serve/intent.c): the input is the JSON params of a
 * process/start. "sandbox" goes through cd_intent_bind (permissions,
 * windowsSandboxLevel, cwd and workspaceRoots as PathUris) and is bound
 * over the fake tree; "env" and "envPolicy" through cd_env_build over a
 * fixed server environment; the params getters read a few more members.
 *
 * intent.c binds through cli-policy.c's cd_cli_bind_profile, which walks
 * the host's file system and probes the kernel; it is not linked here:
 * the one below binds over fuzz-tree.c's tree with fuzz_host instead, the
 * same pipeline (cd_plan_build, then cd_linux_plan_build) on fake facts.
 * Properties: a refusal has a message (and is -EINVAL, or -EDESTADDRREQ
 * for a missing cwd); a bound intent has a normal absolute cwd and a plan;
 * the child environment has one NAME=VALUE per name.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli-policy.h"
#include "core/json.h"
#include "core/util.h"
#include "fuzz.h"
#include "sandbox/backend.h"
#include "serve/intent.h"

int cd_cli_bind_profile(struct cd_cli_bound *b, const char *const *roots, size_t n_roots,
			const struct cd_linux_opts *lopts, const struct cd_linux_host *host)
{
	struct cd_bind_input in = {
		.cwd = b->cwd,
		.workspace_roots = roots,
		.n_workspace_roots = n_roots,
		.tmpdir = FUZZ_TMPDIR,
		.ops = fuzz_tree_ops(),
	};
	char *err = NULL;

	fuzz_assert(host != NULL); /* serve passes the facts it probed at start */
	if (cd_plan_build(b->profile, &in, &b->plan, &err) < 0) {
		b->refusal = err ? err : cd_xstrdup("binding failed");
		return CD_BIND_REFUSED;
	}
	free(err);
	err = NULL;
	b->host = *host;
	b->probed = true;
	if (cd_linux_plan_build(b->plan, &b->host, lopts, &b->lp, &err) < 0) {
		b->refusal = err ? err : cd_xstrdup("cannot build the Linux sandbox");
		return CD_BIND_REFUSED;
	}
	free(err);
	return CD_BIND_OK;
}

/*
 * The limits' host facts, probed in sandbox/linux/ on a real host: here a
 * fixed host without a delegated cgroup, where RLIMIT_NPROC counts per user
 * namespace (so a limits plan is built, or refused, without touching /sys).
 */
void cd_linux_probe_limits(struct cd_limits_host *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->probed = true;
	ret->nproc_per_userns = true;
	snprintf(ret->why, sizeof(ret->why), "no cgroup v2 hierarchy in the fuzz target");
}

void cd_cli_bound_done(struct cd_cli_bound *b)
{
	cd_linux_plan_free(b->lp);
	cd_plan_free(b->plan);
	cd_profile_free(b->profile);
	free(b->profile_path);
	free(b->cwd);
	free(b->refusal);
	memset(b, 0, sizeof(*b));
}

static char *const server_env[] = {
	"PATH=/usr/bin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"TERM=xterm",
	"SECRET_TOKEN=hunter2",
	"AWS_SECRET_ACCESS_KEY=x",
	"TMPDIR=/tmp/t",
	"LD_PRELOAD=/x.so",
	"EMPTY=",
	NULL,
};

static void check_env(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++) {
		const char *eq = strchr(envp[i], '=');
		fuzz_assert(eq && eq != envp[i]);
		size_t n = (size_t)(eq - envp[i]) + 1;
		for (size_t j = 0; j < i; j++)
			if (!strncmp(envp[i], envp[j], n))
				fuzz_fail("the child environment has '%.*s' twice", (int)n - 1,
					  envp[i]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct cd_json_limits lim = {
		.max_bytes = 64u * 1024 * 1024,
		.max_values = 262144,
		.max_depth = 512,
	};
	struct cd_json *v = NULL;
	struct cd_json_error jerr;
	char *err = NULL;

	if (cd_json_parse((const char *)data, size, &lim, &v, &jerr) < 0)
		return 0;

	const struct cd_json *sandbox = cd_json_get(v, "sandbox");
	if (sandbox && sandbox->type != CD_JSON_NULL) {
		/* "cwd": null stands for an fs/... request, which has no cwd. */
		const struct cd_json *cwd = cd_json_get(v, "cwd");
		const char *params_cwd = cwd && cwd->type == CD_JSON_NULL ? NULL : FUZZ_CWD;
		const struct cd_json *enforce = cd_json_get(v, "enforceManagedNetwork");
		struct cd_linux_opts lopts = { .min_landlock_abi = 1, .no_pid_ns = true };
		struct cd_cli_bound b;
		int r = cd_intent_bind(sandbox, params_cwd,
				       enforce && enforce->type == CD_JSON_TRUE, &fuzz_host, &lopts,
				       &b, &err);
		if (r < 0) {
			fuzz_assert(r == -EINVAL || r == -EDESTADDRREQ);
			fuzz_assert(err && *err);
			free(err);
			err = NULL;
		} else {
			fuzz_assert(!err && b.profile && b.plan && b.lp);
			fuzz_assert(b.cwd && b.cwd[0] == '/');
		}
		cd_cli_bound_done(&b);
	}

	const struct cd_json *env = cd_json_get(v, "env");
	if (env) {
		char **envp = NULL;
		if (cd_env_build(env, cd_json_get(v, "envPolicy"), server_env, &envp, &err) < 0) {
			fuzz_assert(err && *err && !envp);
			free(err);
			err = NULL;
		} else {
			check_env(envp);
			cd_strv_free(envp);
		}
	}

	/* The getters every method decodes its params with. */
	const struct cd_json *s = NULL;
	bool flag;
	uint64_t u;
	if (cd_param_object(v, "struct ExecParams", &err) < 0) {
		free(err);
		err = NULL;
	}
	if (cd_param_string(v, "processId", "processId", true, false, &s, &err) < 0) {
		fuzz_assert(err && *err);
		free(err);
		err = NULL;
	} else {
		fuzz_assert(s && s->type == CD_JSON_STRING);
	}
	if (cd_param_bool(v, "tty", "tty", false, false, &flag, &err) < 0) {
		free(err);
		err = NULL;
	}
	if (cd_param_u64(v, "maxBytes", "maxBytes", 7, &u, &err) < 0) {
		free(err);
		err = NULL;
	}
	cd_json_free(v);
	return 0;
}
