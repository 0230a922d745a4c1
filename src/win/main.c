/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cordon.exe: the Windows build (mingw-w64), with the restricted-token
 * backend. It has `check`, `explain` and `run`; `serve` and `probe` are
 * POSIX-only for now. The policy model, the binding and the planner are the
 * very code of the Linux build (src/core, sandbox/windows/plan.c); this
 * file is the command line around them, and JSON is written by hand (the
 * Linux build's jansson is not packaged for mingw, and `explain --json` is
 * a writer's job only).
 *
 *   cordon.exe check FILE... | --builtin
 *   cordon.exe explain [POLICY OPTIONS] [--json]
 *   cordon.exe run [POLICY OPTIONS] [--] CMD [ARG...]
 *
 * POLICY OPTIONS (src/front/front.h, shared with cordon on macOS):
 * --profile NAME|FILE.json, --workspace-root DIR (repeatable), --cwd DIR,
 * --network restricted|enabled|managed, --allow-read/--allow-write/--deny
 * PATH, --deny-glob PATTERN, --allow-degraded=network (and --limit-NAME,
 * which the planner refuses: no resource limit is enforced here yet).
 * Exit status: 0, 2 for usage, 125 when the sandbox is refused, else the
 * command's.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "core/plan.h"
#include "core/profile.h"
#include "core/util.h"
#include "front/front.h"
#include "sandbox/windows/launch.h"
#include "sandbox/windows/plan.h"
#include "sandbox/windows/win-util.h"

#define EXIT_USAGE  CD_FRONT_EXIT_USAGE
#define EXIT_SETUP  CD_FRONT_EXIT_SETUP
#define PROFILE_MAX CD_FRONT_FILE_MAX

static void help(void)
{
	fputs("Usage: cordon.exe check FILE... | --builtin\n"
	      "       cordon.exe explain [POLICY OPTIONS] [--json]\n"
	      "       cordon.exe run [POLICY OPTIONS] [--] CMD [ARG...]\n"
	      "\n"
	      "The Windows restricted-token backend: writes are confined to the\n"
	      "profile's writable roots (their .git, .codex and .agents kept read-only);\n"
	      "reads are not narrowed, and profiles that narrow them are refused.\n"
	      "\n"
	      "Policy options:\n"
	      "  --profile NAME|FILE     a built-in profile or a policy file (default read-only)\n"
	      "  --workspace-root DIR    bind :workspace_roots (repeatable)\n"
	      "  --cwd DIR               the command's directory\n"
	      "  --network MODE          restricted, managed or enabled\n"
	      "  --allow-read PATH, --allow-write PATH, --deny PATH, --deny-glob PATTERN\n"
	      "                          add an entry to a managed profile (repeatable)\n"
	      "  --allow-degraded=network  accept a restricted network kept by environment\n"
	      "                          variables only (this backend has no network fence)\n"
	      "  --limit-NAME VALUE      refused, as a profile's \"limits\" are: this\n"
	      "                          backend enforces no resource limits yet\n",
	      stdout);
}

static int read_file(const char *name, char **ret, size_t *ret_len)
{
	wchar_t *w = cd_win_wide(name);
	FILE *f = w ? _wfopen(w, L"rb") : NULL;
	free(w);
	if (!f)
		return -ENOENT;
	char *buf = cd_xmalloc(PROFILE_MAX + 1);
	size_t n = fread(buf, 1, PROFILE_MAX + 1, f);
	fclose(f);
	if (n > PROFILE_MAX) {
		free(buf);
		return -EFBIG;
	}
	buf[n] = '\0';
	*ret = buf;
	*ret_len = n;
	return 0;
}

/* ---- the binding ---- */

/* A Windows path (relative to the current directory or absolute) in cordon's form. */
static char *internal(const char *path)
{
	wchar_t *w = cd_win_wide(path), full[32768];
	if (!w)
		return NULL;
	DWORD n = GetFullPathNameW(w, 32768, full, NULL);
	free(w);
	if (!n || n >= 32768)
		return NULL;
	return cd_win_internal(full);
}

static const struct cd_front front = {
	.prog = "cordon.exe",
	.read_file = read_file,
	.env_network_option = true,
	.host_path = internal,
};

/* explain shows stand-in SIDs: it must not add keys to the persistent store. */
static char *stand_in_sid(void *ctx, const char *key)
{
	(void)ctx;
	return cd_windows_sid_derive("cordon explain", key);
}

/* Bind and plan. 0, or an exit status (the reason printed). */
static int bind_and_plan(const struct cd_front_opts *o, bool stand_in_sids,
			 struct cd_profile **ret_prof, struct cd_plan **ret_plan,
			 struct cd_windows_plan **ret_wp)
{
	struct cd_profile *prof = NULL;
	int r = cd_front_load_profile(&front, o, &prof);
	if (r)
		return r;
	char *cwd = internal(o->cwd ? o->cwd : ".");
	char *roots[64] = { 0 };
	char *tmp = NULL;
	char tmpbuf[MAX_PATH + 1];
	DWORD tn = GetTempPathA(sizeof(tmpbuf), tmpbuf);
	if (tn && tn < sizeof(tmpbuf))
		tmp = internal(tmpbuf);
	if (!cwd) {
		fprintf(stderr, "cordon: the working directory is not on a drive\n");
		r = EXIT_SETUP;
		goto out;
	}
	for (size_t i = 0; i < o->n_roots; i++)
		if (!(roots[i] = internal(o->roots[i]))) {
			fprintf(stderr, "cordon: --workspace-root '%s': not a drive path\n",
				o->roots[i]);
			r = EXIT_SETUP;
			goto out;
		}
	static const char *const no_minimal[] = { NULL };
	struct cd_bind_input in = {
		.cwd = cwd,
		.workspace_roots = (const char *const *)roots,
		.n_workspace_roots = o->n_roots,
		.tmpdir = tmp,
		.minimal_paths = no_minimal,
		.ops = &cd_fs_ops_host,
	};
	char *err = NULL;
	if (cd_plan_build(prof, &in, ret_plan, &err) < 0) {
		fprintf(stderr, "cordon: %s\n", err ? err : "binding failed");
		free(err);
		r = EXIT_SETUP;
		goto out;
	}
	char home[MAX_PATH];
	DWORD hn = GetEnvironmentVariableA("USERPROFILE", home, sizeof(home));
	struct cd_windows_input wi = {
		.profile = prof,
		.plan = *ret_plan,
		.drive = NULL,
		.home = hn && hn < sizeof(home) ? home : NULL,
		.allow_env_network = o->env_network,
		.sids = cd_win_sid_source_store(),
		.limits = &prof->limits, /* the command line's merged in (front.c) */
	};
	if (stand_in_sids)
		wi.sids.sid_for = stand_in_sid;
	if (cd_windows_plan_build(&wi, ret_wp, &err) < 0) {
		fprintf(stderr, "cordon: %s\n", err ? err : "refused");
		free(err);
		r = EXIT_SETUP;
	}
out:
	for (size_t i = 0; i < o->n_roots; i++)
		free(roots[i]);
	free(cwd);
	free(tmp);
	*ret_prof = prof;
	return r;
}

/* ---- explain ---- */

static const char *role_name(enum cd_win_sid_role r)
{
	static const char *const names[] = { "readonly", "workspace", "writable root", "logon",
					     "everyone" };
	return names[r];
}

static void json_str(struct cd_strbuf *sb, const char *s)
{
	cd_strbuf_append_json_string(sb, s ? s : "", s ? strlen(s) : 0);
}

static void explain_json(const struct cd_plan *plan, const struct cd_windows_plan *wp)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"backend\":\"windows\",\"cwd\":");
	json_str(&sb, plan->cwd);
	cd_strbuf_append(&sb, ",\"paths\":[");
	bool first = true;
	for (size_t i = 0; i < plan->n_paths; i++) {
		if (plan->paths[i].origin == CD_ORIGIN_IMPLICIT)
			continue;
		char *w = cd_windows_path(plan->paths[i].path, NULL);
		cd_strbuf_append(&sb, first ? "{\"path\":" : ",{\"path\":");
		first = false;
		json_str(&sb, w);
		cd_strbuf_append(&sb, ",\"access\":");
		json_str(&sb, cd_access_name(plan->paths[i].access));
		cd_strbuf_append(&sb, ",\"why\":");
		json_str(&sb, plan->paths[i].why);
		cd_strbuf_append_c(&sb, '}');
		free(w);
	}
	cd_strbuf_printf(&sb,
			 "],\"windows\":{\"sandboxType\":\"windowsRestrictedToken\","
			 "\"sandboxed\":%s,\"tokenFlags\":",
			 wp->sandboxed ? "true" : "false");
	json_str(&sb, wp->token_flags);
	cd_strbuf_append(&sb, ",\"restrictingSids\":[");
	for (size_t i = 0; i < wp->n_sids; i++) {
		cd_strbuf_append(&sb, i ? ",{\"sid\":" : "{\"sid\":");
		json_str(&sb, wp->sids[i].sid);
		cd_strbuf_append(&sb, ",\"role\":");
		json_str(&sb, role_name(wp->sids[i].role));
		cd_strbuf_append(&sb, ",\"key\":");
		if (wp->sids[i].key)
			json_str(&sb, wp->sids[i].key);
		else
			cd_strbuf_append(&sb, "null");
		cd_strbuf_append_c(&sb, '}');
	}
	cd_strbuf_append(&sb, "],\"aces\":[");
	for (size_t i = 0; i < wp->n_aces; i++) {
		const struct cd_win_ace *a = &wp->aces[i];
		cd_strbuf_append(&sb, i ? ",{\"path\":" : "{\"path\":");
		json_str(&sb, a->path);
		cd_strbuf_printf(&sb, ",\"kind\":\"%s\",\"sid\":",
				 a->kind == CD_WIN_ACE_ALLOW ? "allow" : "deny-write");
		json_str(&sb, a->sid);
		cd_strbuf_printf(&sb,
				 ",\"createDir\":%s,\"why\":", a->create_dir ? "true" : "false");
		json_str(&sb, a->why);
		cd_strbuf_append_c(&sb, '}');
	}
	cd_strbuf_append(&sb, "],\"env\":{");
	for (size_t i = 0; i < wp->n_env; i++) {
		if (i)
			cd_strbuf_append_c(&sb, ',');
		json_str(&sb, wp->env[i].name);
		cd_strbuf_append_c(&sb, ':');
		json_str(&sb, wp->env[i].value);
	}
	cd_strbuf_append(&sb, "},\"degraded\":[");
	for (char **d = wp->degraded; d && *d; d++) {
		if (d != wp->degraded)
			cd_strbuf_append_c(&sb, ',');
		json_str(&sb, *d);
	}
	cd_strbuf_append(&sb, "]}}\n");
	fputs(sb.buf, stdout);
	cd_strbuf_done(&sb);
}

static void explain_text(const struct cd_profile *prof, const struct cd_plan *plan,
			 const struct cd_windows_plan *wp)
{
	printf("Profile: %s (%s, network %s)\n", prof->origin ? prof->origin : "?",
	       cd_profile_type_name(plan->type), cd_network_name(plan->network));
	printf("Paths (the most specific path wins):\n");
	for (size_t i = 0; i < plan->n_paths; i++) {
		if (plan->paths[i].origin == CD_ORIGIN_IMPLICIT)
			continue; /* the core's /dev/null: NUL is the backend's business */
		char *w = cd_windows_path(plan->paths[i].path, NULL);
		printf("  %-5s  %s  %s\n", cd_access_name(plan->paths[i].access), w,
		       plan->paths[i].why ? plan->paths[i].why : "");
		free(w);
	}
	printf("\nWindows restricted token (sandboxType windowsRestrictedToken):\n");
	if (!wp->sandboxed) {
		printf("  none: the profile disables the sandbox\n");
		return;
	}
	printf("  token: CreateRestrictedToken(%s)\n", wp->token_flags);
	for (size_t i = 0; i < wp->n_sids; i++)
		printf("  SID %s %s%s%s\n", wp->sids[i].sid, role_name(wp->sids[i].role),
		       wp->sids[i].key ? " " : "", wp->sids[i].key ? wp->sids[i].key : "");
	for (size_t i = 0; i < wp->n_aces; i++)
		printf("  %-10s %s to %s%s\n",
		       wp->aces[i].kind == CD_WIN_ACE_ALLOW ? "allow" : "deny-write",
		       wp->aces[i].path, wp->aces[i].sid,
		       wp->aces[i].create_dir ? " (made first)" : "");
	for (size_t i = 0; i < wp->n_env; i++)
		printf("  env %s=%s\n", wp->env[i].name, wp->env[i].value);
	for (char **d = wp->degraded; d && *d; d++)
		printf("  degraded: %s\n", *d);
	printf("  (capability SIDs are stand-ins here; run uses the persisted ones)\n");
}

static int cmd_explain_or_run(int argc, char **argv, bool run)
{
	struct cd_front_opts o;
	int r = cd_front_parse_opts(&front, argc, argv, run, &o);
	if (r)
		return r;
	struct cd_profile *prof = NULL;
	struct cd_plan *plan = NULL;
	struct cd_windows_plan *wp = NULL;
	r = bind_and_plan(&o, !run, &prof, &plan, &wp);
	if (!r && !run) {
		if (o.json)
			explain_json(plan, wp);
		else
			explain_text(prof, plan, wp);
	} else if (!r) {
		char *err = NULL;
		int code = 0;
		char *cwd = cd_windows_path(plan->cwd, NULL);
		if (!wp->sandboxed) {
			/* A disabled profile: the command runs as asked, without a sandbox. */
			char *line = cd_windows_cmdline(argv + o.cmd);
			STARTUPINFOA si = { .cb = sizeof(si) };
			PROCESS_INFORMATION pi;
			if (!line ||
			    !CreateProcessA(NULL, line, NULL, NULL, TRUE, 0, NULL, cwd, &si, &pi)) {
				fprintf(stderr, "cordon: cannot start %s\n", argv[o.cmd]);
				r = EXIT_SETUP;
			} else {
				DWORD c = 1;
				WaitForSingleObject(pi.hProcess, INFINITE);
				GetExitCodeProcess(pi.hProcess, &c);
				CloseHandle(pi.hProcess);
				CloseHandle(pi.hThread);
				r = (int)c;
			}
			free(line);
		} else if (cd_windows_launch(wp, argv + o.cmd, cwd, &code, &err) < 0) {
			fprintf(stderr, "cordon: %s\n", err ? err : "refused");
			free(err);
			r = EXIT_SETUP;
		} else {
			for (char **d = wp->degraded; d && *d; d++)
				fprintf(stderr, "cordon: warning: %s\n", *d);
			r = code;
		}
		free(cwd);
	}
	cd_windows_plan_free(wp);
	cd_plan_free(plan);
	cd_profile_free(prof);
	return r;
}

int main(void)
{
	/* The command line as UTF-16, to UTF-8: the C runtime's argv is in the ANSI code page. */
	int argc = 0;
	wchar_t **wargv = CommandLineToArgvW(GetCommandLineW(), &argc);
	char **argv = cd_xcalloc((size_t)argc + 1, sizeof(*argv));
	for (int i = 0; i < argc; i++)
		argv[i] = cd_win_utf8(wargv[i]);
	LocalFree(wargv);
	SetConsoleOutputCP(CP_UTF8);

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		help();
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("cordon %s (windows, restricted token)\n", PACKAGE_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "check"))
		return cd_front_check(&front, argc, argv);
	if (!strcmp(argv[1], "explain"))
		return cmd_explain_or_run(argc, argv, false);
	if (!strcmp(argv[1], "run"))
		return cmd_explain_or_run(argc, argv, true);
	if (!strcmp(argv[1], "serve") || !strcmp(argv[1], "probe"))
		return cd_front_usage(&front, "serve and probe are not in the Windows build yet");
	return cd_front_usage(&front, "unknown command");
}
