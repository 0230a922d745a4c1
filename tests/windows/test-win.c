/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Tests of the Windows build's own code, run under Windows or wine64 (TAP on
 * stdout; no Check, which mingw-w64 does not package):
 *
 *  - command lines: every argv of a random set, quoted by cd_windows_cmdline,
 *    comes back the same through the system's own CommandLineToArgvW;
 *  - the environment block: a child process started with it sees exactly
 *    the variables (read back with GetEnvironmentVariableW);
 *  - the file-system shim: a directory, a file, a missing name, a drive
 *    root and a directory listing, in cordon's path form;
 *  - the launch: a command under the restricted token runs in its
 *    directory, its exit code comes back, a write in the writable root
 *    lands, the planned ACEs are in the DACLs afterwards (allow to the
 *    root's SID, deny-write on .git), the .codex made for the run is gone,
 *    and a process the command left running dies with the job.
 *
 * What the ACLs enforce is the kernel's business, which wine does not
 * model: the differential test of the planner (tests/unit/test-windows.c)
 * checks the decisions; this checks that the calls are made and succeed.
 */
#include <aclapi.h>
#include <sddl.h>
#include <shellapi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "core/plan.h"
#include "core/util.h"
#include "sandbox/windows/launch.h"
#include "sandbox/windows/plan.h"
#include "sandbox/windows/win-util.h"

static int n_test, n_fail;

static void skip(const char *why, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("ok %d - ", ++n_test);
	vprintf(fmt, ap);
	printf(" # SKIP %s\n", why);
	va_end(ap);
	fflush(stdout);
}

static void ok(bool cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%s %d - ", cond ? "ok" : "not ok", ++n_test);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	n_fail += !cond;
}

/* ---- command lines through the real CommandLineToArgvW ---- */

static bool round_trip(char *const *argv)
{
	char *line = cd_windows_cmdline(argv);
	if (!line)
		return false;
	wchar_t *w = cd_win_wide(line);
	int n = 0;
	wchar_t **back = CommandLineToArgvW(w, &n);
	bool same = back && n == (int)cd_strv_length(argv);
	for (int i = 0; same && i < n; i++) {
		char *a = cd_win_utf8(back[i]);
		same = !strcmp(a, argv[i]);
		if (!same)
			printf("# [%s]: argument %d is [%s], want [%s]\n", line, i, a, argv[i]);
		free(a);
	}
	LocalFree(back);
	free(w);
	free(line);
	return same;
}

static void test_cmdline(void)
{
	static const char alphabet[] = { 'a', ' ', '\t', '"', '\\', 'x', '\\', '"' };
	unsigned seed = 4242;
	int bad = 0;
	for (int round = 0; round < 3000 && bad < 3; round++) {
		char *argv[6] = { "prog.exe", NULL };
		size_t n = 1 + (size_t)(seed % 4);
		for (size_t i = 1; i <= n; i++) {
			seed = seed * 1103515245u + 12345u;
			size_t len = (seed >> 16) % 7;
			char *a = cd_xcalloc(len + 1, 1);
			for (size_t k = 0; k < len; k++) {
				seed = seed * 1103515245u + 12345u;
				a[k] = alphabet[(seed >> 16) % sizeof(alphabet)];
			}
			argv[i] = a;
		}
		argv[n + 1] = NULL;
		bad += !round_trip(argv);
		for (size_t i = 1; argv[i]; i++)
			free(argv[i]);
	}
	ok(!bad, "3,000 random argv come back the same through CommandLineToArgvW");
	char *hard[] = {
		"C:\\Program Files\\x.exe", "",	 "a b", "c\\", "\\\\srv\\share\\", "q\"uote",
		"\xc3\xa9t\xc3\xa9",	    NULL
	};
	ok(round_trip(hard), "empty, spaced, trailing backslash, UNC, quote and UTF-8 arguments");
}

/* ---- the environment block, as a child sees it ---- */

static void test_env_block(const char *self)
{
	char *env[] = { "CORDON_T1=plain", "cordon_t2=\xc3\xa9 with space",
			"SystemRoot=C:\\windows", "PATH=C:\\windows\\system32", NULL };
	size_t len = 0;
	char *err = NULL;
	unsigned char *block = cd_windows_env_block(env, &len, &err);
	ok(block != NULL, "the environment block is built (%s)", err ? err : "");
	if (!block)
		return;
	char *line = cd_xasprintf("\"%s\" env-child", self);
	wchar_t *w = cd_win_wide(line);
	STARTUPINFOW si = { .cb = sizeof(si) };
	PROCESS_INFORMATION pi;
	BOOL started = CreateProcessW(NULL, w, NULL, NULL, FALSE, CREATE_UNICODE_ENVIRONMENT, block,
				      NULL, &si, &pi);
	DWORD code = 99;
	if (started) {
		WaitForSingleObject(pi.hProcess, INFINITE);
		GetExitCodeProcess(pi.hProcess, &code);
		CloseHandle(pi.hProcess);
		CloseHandle(pi.hThread);
	}
	ok(started && code == 0, "a child started with the block sees exactly its variables (%lu)",
	   code);
	free(w);
	free(line);
	free(block);
}

/* The child of test_env_block: 0 when the environment is as given. */
static int env_child(void)
{
	wchar_t buf[256];
	if (!GetEnvironmentVariableW(L"CORDON_T1", buf, 256) || wcscmp(buf, L"plain"))
		return 1;
	if (!GetEnvironmentVariableW(L"CORDON_T2", buf, 256) || wcscmp(buf, L"\u00e9 with space"))
		return 2;
	if (GetEnvironmentVariableW(L"USERNAME", buf, 256))
		return 3; /* not passed: must not be there */
	return 0;
}

/* ---- the file-system shim ---- */

static int count(void *arg, const char *name, enum cd_file_type type)
{
	(void)name;
	(void)type;
	(*(int *)arg)++;
	return 0;
}

static char *tree; /* cordon's form of the test's directory */

static void test_fs_ops(const wchar_t *wdir)
{
	const struct cd_fs_ops *o = &cd_fs_ops_host;
	enum cd_file_type t;
	char *p;

	ok(o->lstat_type(NULL, tree, &t) == 0 && t == CD_FT_DIR,
	   "the test directory is a directory");
	p = cd_xasprintf("%s/file.txt", tree);
	ok(o->lstat_type(NULL, p, &t) == 0 && t == CD_FT_REG, "a file is a regular file");
	char *text = NULL;
	size_t len = 0;
	ok(o->read_file(NULL, p, 100, &text, &len) == 0 && len == 5 && !memcmp(text, "gitd:", 5),
	   "read_file reads it");
	free(text);
	free(p);
	p = cd_xasprintf("%s/missing/deeper", tree);
	ok(o->lstat_type(NULL, p, &t) == 0 && t == CD_FT_MISSING, "a missing path is missing");
	free(p);
	char drive[4] = { '/', tree[1], ':', 0 };
	ok(o->lstat_type(NULL, drive, &t) == 0 && t == CD_FT_DIR, "a drive root is a directory");
	int n = 0;
	int r = o->read_dir(NULL, tree, count, &n);
	ok(r == 0 && n == 2, "read_dir lists it (%d entries: ws, file.txt)", n);
	(void)wdir;
}

/* ---- the launch ---- */

static bool dacl_has(const char *path, const char *sid, BYTE type)
{
	wchar_t *w = cd_win_wide(path), *ws = cd_win_wide(sid);
	PACL dacl = NULL;
	PSECURITY_DESCRIPTOR sd = NULL;
	PSID psid = NULL;
	bool found = false;
	if (ConvertStringSidToSidW(ws, &psid) &&
	    GetNamedSecurityInfoW(w, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, NULL, NULL, &dacl,
				  NULL, &sd) == ERROR_SUCCESS &&
	    dacl) {
		ACL_SIZE_INFORMATION info;
		GetAclInformation(dacl, &info, sizeof(info), AclSizeInformation);
		for (DWORD i = 0; i < info.AceCount && !found; i++) {
			ACE_HEADER *h;
			if (GetAce(dacl, i, (void **)&h) && h->AceType == type)
				found = EqualSid((PSID) & ((ACCESS_ALLOWED_ACE *)h)->SidStart,
						 psid);
		}
	}
	if (psid)
		LocalFree(psid);
	if (sd)
		LocalFree(sd);
	free(w);
	free(ws);
	return found;
}

/*
 * NULL when files under dir keep the ACLs set on them, else why not (wine
 * keeps them only where its file system stores extended attributes).
 */
static const char *acls_kept(const char *dir)
{
	char *p = cd_xasprintf("%s\\acl-probe", dir);
	wchar_t *w = cd_win_wide(p);
	const char *why = NULL;
	CreateDirectoryW(w, NULL);
	PSID sid = NULL;
	ConvertStringSidToSidW(L"S-1-5-21-1-2-3-4", &sid);
	EXPLICIT_ACCESS_W ea = { .grfAccessPermissions = FILE_GENERIC_READ,
				 .grfAccessMode = DENY_ACCESS,
				 .grfInheritance = NO_INHERITANCE,
				 .Trustee = { .TrusteeForm = TRUSTEE_IS_SID,
					      .TrusteeType = TRUSTEE_IS_UNKNOWN,
					      .ptstrName = (LPWSTR)sid } };
	PACL acl = NULL;
	if (SetEntriesInAclW(1, &ea, NULL, &acl) != ERROR_SUCCESS ||
	    SetNamedSecurityInfoW(w, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, NULL, NULL, acl,
				  NULL) != ERROR_SUCCESS ||
	    !dacl_has(p, "S-1-5-21-1-2-3-4", ACCESS_DENIED_ACE_TYPE)) {
		HMODULE nt = GetModuleHandleW(L"ntdll.dll");
		why = nt && GetProcAddress(nt, "wine_get_version")
			      ? "wine: this file system does not keep ACLs (no extended attributes)"
			      : "this file system does not keep ACLs";
	}
	if (acl)
		LocalFree(acl);
	if (sid)
		LocalFree(sid);
	RemoveDirectoryW(w);
	free(w);
	free(p);
	return why;
}

static void test_launch(const char *self)
{
	struct cd_profile *prof = cd_xcalloc(1, sizeof(*prof));
	prof->type = CD_PROFILE_MANAGED;
	prof->network = CD_NET_ENABLED;
	struct cd_fs_entry e[] = {
		{ .kind = CD_ENTRY_SPECIAL, .special = CD_SPECIAL_ROOT, .access = CD_ACCESS_READ },
		{ .kind = CD_ENTRY_SPECIAL,
		  .special = CD_SPECIAL_PROJECT_ROOTS,
		  .access = CD_ACCESS_WRITE },
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(e); i++)
		cd_profile_add_entry(prof, &e[i]);
	char *ws = cd_xasprintf("%s/ws", tree);
	const char *roots[] = { ws };
	static const char *const none[] = { NULL };
	struct cd_bind_input in = { .cwd = ws,
				    .workspace_roots = roots,
				    .n_workspace_roots = 1,
				    .minimal_paths = none,
				    .ops = &cd_fs_ops_host };
	struct cd_plan *plan = NULL;
	char *err = NULL;
	ok(cd_plan_build(prof, &in, &plan, &err) == 0, "the workspace binds (%s)", err ? err : "");
	struct cd_windows_input wi = { .profile = prof,
				       .plan = plan,
				       .sids = cd_win_sid_source_store() };
	struct cd_windows_plan *wp = NULL;
	ok(plan && cd_windows_plan_build(&wi, &wp, &err) == 0, "it plans (%s)", err ? err : "");
	if (!wp)
		return;
	char *wws = cd_windows_path(ws, NULL);
	char *line = cd_xasprintf("%s\\leftover.txt", wws);
	char *argv[] = { (char *)self, "child", wws, NULL };
	int code = -1;
	ok(cd_windows_launch(wp, argv, wws, &code, &err) == 0, "the command runs (%s)",
	   err ? err : "");
	ok(code == 42, "its exit code comes back (%d)", code);
	char *in_ws = cd_xasprintf("%s\\written.txt", wws);
	wchar_t *w = cd_win_wide(in_ws);
	ok(GetFileAttributesW(w) != INVALID_FILE_ATTRIBUTES, "its write in the root landed");
	free(w);
	const char *root_sid = NULL, *ws_sid = NULL;
	for (size_t i = 0; i < wp->n_sids; i++) {
		if (wp->sids[i].role == CD_WIN_SID_ROOT)
			root_sid = wp->sids[i].sid;
		if (wp->sids[i].role == CD_WIN_SID_WORKSPACE)
			ws_sid = wp->sids[i].sid;
	}
	char *git = cd_xasprintf("%s\\.git", wws);
	const char *no_acls = acls_kept(wws);
	if (no_acls) {
		skip(no_acls, "the root's DACL allows its capability SID");
		skip(no_acls, ".git's DACL denies writes to the capability SIDs");
	} else {
		ok(root_sid && dacl_has(wws, root_sid, ACCESS_ALLOWED_ACE_TYPE),
		   "the root's DACL allows its capability SID");
		ok(ws_sid && dacl_has(git, ws_sid, ACCESS_DENIED_ACE_TYPE),
		   ".git's DACL denies writes to the capability SIDs");
	}
	char *codex = cd_xasprintf("%s\\.codex", wws);
	w = cd_win_wide(codex);
	ok(GetFileAttributesW(w) == INVALID_FILE_ATTRIBUTES, "the .codex made for the run is gone");
	free(w);
	/* The grandchild the command left behind died with the job. */
	char *pidfile = cd_xasprintf("%s\\grandchild.pid", wws);
	FILE *f = _wfopen(cd_win_wide(pidfile), L"r");
	DWORD pid = 0;
	if (f) {
		if (fscanf(f, "%lu", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	HANDLE gc = pid ? OpenProcess(SYNCHRONIZE, FALSE, pid) : NULL;
	bool gone = pid && (!gc || WaitForSingleObject(gc, 10000) == WAIT_OBJECT_0);
	if (gc)
		CloseHandle(gc);
	ok(gone, "a process the command left running dies with the job (pid %lu)", pid);
	free(pidfile);
	free(codex);
	free(git);
	free(in_ws);
	free(line);
	free(wws);
	cd_windows_plan_free(wp);
	cd_plan_free(plan);
	cd_profile_free(prof);
	free(ws);
}

/* The command of test_launch: write, start a grandchild that waits, exit 42. */
static int launch_child(const char *dir)
{
	char *p = cd_xasprintf("%s\\written.txt", dir);
	FILE *f = _wfopen(cd_win_wide(p), L"w");
	if (f) {
		fputs("x", f);
		fclose(f);
	}
	free(p);
	wchar_t self[MAX_PATH];
	GetModuleFileNameW(NULL, self, MAX_PATH);
	wchar_t line[MAX_PATH + 32];
	swprintf(line, MAX_PATH + 32, L"\"%ls\" sleep", self);
	STARTUPINFOW si = { .cb = sizeof(si) };
	PROCESS_INFORMATION pi;
	if (CreateProcessW(NULL, line, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) {
		p = cd_xasprintf("%s\\grandchild.pid", dir);
		f = _wfopen(cd_win_wide(p), L"w");
		if (f) {
			fprintf(f, "%lu\n", pi.dwProcessId);
			fclose(f);
		}
		free(p);
		CloseHandle(pi.hProcess);
		CloseHandle(pi.hThread);
	}
	return 42;
}

int main(void)
{
	int argc = 0;
	wchar_t **wargv = CommandLineToArgvW(GetCommandLineW(), &argc);
	char *self = cd_win_utf8(wargv[0]);
	if (argc >= 2 && !wcscmp(wargv[1], L"env-child"))
		return env_child();
	if (argc >= 3 && !wcscmp(wargv[1], L"child"))
		return launch_child(cd_win_utf8(wargv[2]));
	if (argc >= 2 && !wcscmp(wargv[1], L"sleep")) {
		Sleep(60000);
		return 0;
	}
	/* A fresh tree under %TEMP%. */
	wchar_t tmp[MAX_PATH], dir[MAX_PATH];
	GetTempPathW(MAX_PATH, tmp);
	swprintf(dir, MAX_PATH, L"%lscordon-test-%lu", tmp, GetCurrentProcessId());
	CreateDirectoryW(dir, NULL);
	wchar_t sub[MAX_PATH];
	swprintf(sub, MAX_PATH, L"%ls\\ws", dir);
	CreateDirectoryW(sub, NULL);
	swprintf(sub, MAX_PATH, L"%ls\\ws\\.git", dir);
	CreateDirectoryW(sub, NULL);
	swprintf(sub, MAX_PATH, L"%ls\\file.txt", dir);
	FILE *f = _wfopen(sub, L"w");
	if (f) {
		fputs("gitd:", f);
		fclose(f);
	}
	tree = cd_win_internal(dir);

	test_cmdline();
	test_env_block(self);
	test_fs_ops(dir);
	test_launch(self);

	printf("1..%d\n", n_test);
	return n_fail ? 1 : 0;
}
