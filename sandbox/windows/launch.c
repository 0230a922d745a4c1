/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The restricted-token launch (launch.h). Windows-only: built with mingw-w64. */
#include "sandbox/windows/launch.h"

#include <aclapi.h>
#include <sddl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "core/util.h"
#include "sandbox/windows/win-util.h"

/* ---- the capability SID store ---- */

/* RtlGenRandom, exported by advapi32 as SystemFunction036. */
BOOLEAN NTAPI SystemFunction036(PVOID buf, ULONG len);

static wchar_t *store_path(void)
{
	wchar_t dir[MAX_PATH];
	DWORD n = GetEnvironmentVariableW(L"LOCALAPPDATA", dir, MAX_PATH);
	if (!n || n >= MAX_PATH - 32)
		return NULL;
	wcscat(dir, L"\\cordon");
	CreateDirectoryW(dir, NULL);
	wchar_t *p = cd_xcalloc(MAX_PATH, sizeof(*p));
	wcscpy(p, dir);
	wcscat(p, L"\\cap-sids");
	return p;
}

static char *store_sid_for(void *ctx, const char *key)
{
	(void)ctx;
	wchar_t *path = store_path();
	if (!path || strchr(key, '\n') || strchr(key, '\t'))
		return free(path), NULL;
	HANDLE h =
		CreateFileW(path, GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
			    NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
	free(path);
	if (h == INVALID_HANDLE_VALUE)
		return NULL;
	OVERLAPPED ov = { 0 };
	char *sid = NULL;
	if (!LockFileEx(h, LOCKFILE_EXCLUSIVE_LOCK, 0, MAXDWORD, MAXDWORD, &ov)) {
		CloseHandle(h);
		return NULL;
	}
	/* Read it all (it is small: a line per key), look the key up. */
	struct cd_strbuf sb = { 0 };
	char chunk[4096];
	DWORD got;
	while (ReadFile(h, chunk, sizeof(chunk), &got, NULL) && got)
		cd_strbuf_append_n(&sb, chunk, got);
	size_t klen = strlen(key);
	for (char *line = sb.buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (!strncmp(line, key, klen) && line[klen] == '\t') {
			char *v = line + klen + 1;
			size_t vlen = nl ? (size_t)(nl - v) : strlen(v);
			if (vlen && v[vlen - 1] == '\r')
				vlen--;
			sid = cd_xstrndup(v, vlen);
			break;
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!sid) {
		uint32_t r[4];
		if (SystemFunction036(r, sizeof(r))) {
			sid = cd_xasprintf("S-1-5-21-%u-%u-%u-%u", r[0], r[1], r[2], r[3]);
			char *line = cd_xasprintf("%s\t%s\n", key, sid);
			DWORD put = 0;
			SetFilePointer(h, 0, NULL, FILE_END);
			if (!WriteFile(h, line, (DWORD)strlen(line), &put, NULL) ||
			    put != strlen(line)) {
				free(sid);
				sid = NULL;
			}
			free(line);
		}
	}
	cd_strbuf_done(&sb);
	UnlockFileEx(h, 0, MAXDWORD, MAXDWORD, &ov);
	CloseHandle(h);
	return sid;
}

struct cd_win_sid_source cd_win_sid_source_store(void)
{
	return (struct cd_win_sid_source){ .sid_for = store_sid_for };
}

/* ---- failures ---- */

static int fail(char **reterr, const char *what, DWORD err)
{
	char *m = cd_win_error(err);
	*reterr = cd_xasprintf("restricted-token sandbox: %s failed: %s", what, m);
	free(m);
	return -1;
}

/* ---- ACEs ---- */

static DWORD rights_of(enum cd_win_ace_kind k)
{
	if (k == CD_WIN_ACE_ALLOW)
		return FILE_GENERIC_READ | FILE_GENERIC_WRITE | FILE_GENERIC_EXECUTE | DELETE;
	return FILE_GENERIC_WRITE | FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_EA |
	       FILE_WRITE_ATTRIBUTES | GENERIC_WRITE | DELETE | FILE_DELETE_CHILD;
}

/* Whether dacl already holds this ACE (same type, SID, inheritance, and at least the rights). */
static bool has_ace(PACL dacl, BYTE type, PSID sid, DWORD mask)
{
	ACL_SIZE_INFORMATION info;
	if (!dacl || !GetAclInformation(dacl, &info, sizeof(info), AclSizeInformation))
		return false;
	for (DWORD i = 0; i < info.AceCount; i++) {
		ACE_HEADER *h;
		if (!GetAce(dacl, i, (void **)&h) || h->AceType != type ||
		    (h->AceFlags & (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE)) !=
			    (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE) ||
		    (h->AceFlags & INHERITED_ACE))
			continue;
		ACCESS_ALLOWED_ACE *a = (ACCESS_ALLOWED_ACE *)h; /* same layout as denied */
		if (EqualSid((PSID)&a->SidStart, sid) && (a->Mask & mask) == mask)
			return true;
	}
	return false;
}

static int apply_ace(const struct cd_win_ace *ace, char **reterr)
{
	PSID sid = NULL;
	wchar_t *wsid = cd_win_wide(ace->sid), *path = cd_win_wide(ace->path);
	PACL dacl = NULL, fresh = NULL;
	PSECURITY_DESCRIPTOR sd = NULL;
	int r = 0;

	if (!wsid || !path || !ConvertStringSidToSidW(wsid, &sid)) {
		r = fail(reterr, "ConvertStringSidToSid", GetLastError());
		goto out;
	}
	DWORD e = GetNamedSecurityInfoW(path, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, NULL, NULL,
					&dacl, NULL, &sd);
	if (e != ERROR_SUCCESS) {
		char *what = cd_xasprintf("reading the ACL of %s", ace->path);
		r = fail(reterr, what, e);
		free(what);
		goto out;
	}
	BYTE type =
		ace->kind == CD_WIN_ACE_ALLOW ? ACCESS_ALLOWED_ACE_TYPE : ACCESS_DENIED_ACE_TYPE;
	DWORD mask = rights_of(ace->kind);
	if (has_ace(dacl, type, sid, mask & ~GENERIC_WRITE))
		goto out;
	EXPLICIT_ACCESS_W ea = {
		.grfAccessPermissions = mask,
		.grfAccessMode = ace->kind == CD_WIN_ACE_ALLOW ? GRANT_ACCESS : DENY_ACCESS,
		.grfInheritance = SUB_CONTAINERS_AND_OBJECTS_INHERIT,
		.Trustee = { .TrusteeForm = TRUSTEE_IS_SID,
			     .TrusteeType = TRUSTEE_IS_UNKNOWN,
			     .ptstrName = (LPWSTR)sid },
	};
	e = SetEntriesInAclW(1, &ea, dacl, &fresh);
	if (e == ERROR_SUCCESS)
		e = SetNamedSecurityInfoW(path, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, NULL,
					  NULL, fresh, NULL);
	if (e != ERROR_SUCCESS) {
		char *what = cd_xasprintf("setting the ACL of %s", ace->path);
		r = fail(reterr, what, e);
		free(what);
	}
out:
	if (sid)
		LocalFree(sid);
	if (fresh)
		LocalFree(fresh);
	if (sd)
		LocalFree(sd);
	free(wsid);
	free(path);
	return r;
}

/* ---- the token ---- */

static PSID logon_sid(HANDLE token)
{
	DWORD n = 0;
	GetTokenInformation(token, TokenGroups, NULL, 0, &n);
	TOKEN_GROUPS *g = cd_xmalloc(n ? n : 1);
	PSID copy = NULL;
	if (GetTokenInformation(token, TokenGroups, g, n, &n))
		for (DWORD i = 0; i < g->GroupCount; i++)
			if ((g->Groups[i].Attributes & SE_GROUP_LOGON_ID) == SE_GROUP_LOGON_ID) {
				DWORD len = GetLengthSid(g->Groups[i].Sid);
				copy = cd_xmalloc(len);
				CopySid(len, copy, g->Groups[i].Sid);
				break;
			}
	free(g);
	return copy;
}

/* The restricting SIDs of wp as PSIDs (the logon SID resolved); NULL entries on failure. */
static PSID *sids_of(const struct cd_windows_plan *wp, PSID logon, char **reterr)
{
	PSID *v = cd_xcalloc(wp->n_sids + 1, sizeof(*v));
	for (size_t i = 0; i < wp->n_sids; i++) {
		if (wp->sids[i].role == CD_WIN_SID_LOGON) {
			DWORD len = GetLengthSid(logon);
			v[i] = LocalAlloc(LMEM_FIXED, len);
			CopySid(len, v[i], logon);
			continue;
		}
		wchar_t *w = cd_win_wide(wp->sids[i].sid);
		if (!w || !ConvertStringSidToSidW(w, &v[i])) {
			free(w);
			fail(reterr, "ConvertStringSidToSid", GetLastError());
			for (size_t k = 0; k < i; k++)
				LocalFree(v[k]);
			free(v);
			return NULL;
		}
		free(w);
	}
	return v;
}

static int make_token(const struct cd_windows_plan *wp, HANDLE *ret, char **reterr)
{
	HANDLE self = NULL, rt = NULL;
	if (!OpenProcessToken(GetCurrentProcess(),
			      TOKEN_DUPLICATE | TOKEN_QUERY | TOKEN_ASSIGN_PRIMARY |
				      TOKEN_ADJUST_DEFAULT | TOKEN_ADJUST_SESSIONID,
			      &self))
		return fail(reterr, "OpenProcessToken", GetLastError());
	PSID logon = logon_sid(self);
	if (!logon) {
		CloseHandle(self);
		*reterr = cd_xstrdup("restricted-token sandbox: this process's token has no logon "
				     "SID (a service account?): run cordon in a logon session");
		return -1;
	}
	PSID *sids = sids_of(wp, logon, reterr);
	if (!sids) {
		free(logon);
		CloseHandle(self);
		return -1;
	}
	SID_AND_ATTRIBUTES *sa = cd_xcalloc(wp->n_sids, sizeof(*sa));
	for (size_t i = 0; i < wp->n_sids; i++)
		sa[i].Sid = sids[i];
	int r = 0;
	if (!CreateRestrictedToken(self, DISABLE_MAX_PRIVILEGE | LUA_TOKEN | WRITE_RESTRICTED, 0,
				   NULL, 0, NULL, (DWORD)wp->n_sids, sa, &rt)) {
		r = fail(reterr, "CreateRestrictedToken", GetLastError());
		goto out;
	}
	/* The default DACL: what the command creates (pipes, objects) it can use again. */
	EXPLICIT_ACCESS_W *ea = cd_xcalloc(wp->n_sids, sizeof(*ea));
	for (size_t i = 0; i < wp->n_sids; i++)
		ea[i] = (EXPLICIT_ACCESS_W){
			.grfAccessPermissions = GENERIC_ALL,
			.grfAccessMode = GRANT_ACCESS,
			.grfInheritance = NO_INHERITANCE,
			.Trustee = { .TrusteeForm = TRUSTEE_IS_SID,
				     .TrusteeType = TRUSTEE_IS_UNKNOWN,
				     .ptstrName = (LPWSTR)sids[i] },
		};
	PACL dacl = NULL;
	DWORD e = SetEntriesInAclW((ULONG)wp->n_sids, ea, NULL, &dacl);
	free(ea);
	TOKEN_DEFAULT_DACL tdd = { .DefaultDacl = dacl };
	if (e != ERROR_SUCCESS || !SetTokenInformation(rt, TokenDefaultDacl, &tdd, sizeof(tdd))) {
		r = fail(reterr, "setting the token's default DACL",
			 e != ERROR_SUCCESS ? e : GetLastError());
		CloseHandle(rt);
		rt = NULL;
	}
	if (dacl)
		LocalFree(dacl);
out:
	for (size_t i = 0; i < wp->n_sids; i++)
		LocalFree(sids[i]);
	free(sids);
	free(sa);
	free(logon);
	CloseHandle(self);
	*ret = rt;
	return r;
}

/* ---- the environment ---- */

static bool name_is(const char *entry, const char *name)
{
	size_t n = strlen(name);
	return !_strnicmp(entry, name, n) && entry[n] == '=';
}

static char **environment(const struct cd_windows_plan *wp)
{
	char **env = NULL;
	wchar_t *block = GetEnvironmentStringsW();
	const char *path_old = "";
	char *path_keep = NULL;

	for (wchar_t *w = block; w && *w; w += wcslen(w) + 1) {
		char *e = cd_win_utf8(w);
		bool over = name_is(e, "PATH");
		for (size_t i = 0; i < wp->n_env && !over; i++)
			over = name_is(e, wp->env[i].name);
		if (name_is(e, "PATH"))
			path_keep = cd_xstrdup(e + 5);
		if (!over) {
			const char *v = strchr(e + 1, '=');
			if (v && !strcmp(v + 1, "/dev/null")) {
				char *nul = cd_xasprintf("%.*sNUL", (int)(v + 1 - e), e);
				free(e);
				e = nul;
			}
			if (!name_is(e, "PAGER") && !name_is(e, "GIT_PAGER"))
				cd_strv_push(&env, e);
		}
		free(e);
	}
	if (block)
		FreeEnvironmentStringsW(block);
	if (path_keep)
		path_old = path_keep;
	for (size_t i = 0; i < wp->n_env; i++)
		cd_strv_push_take(&env, cd_xasprintf("%s=%s", wp->env[i].name, wp->env[i].value));
	if (wp->path_prepend)
		cd_strv_push_take(&env, cd_xasprintf("PATH=%s;%s", wp->path_prepend, path_old));
	else
		cd_strv_push_take(&env, cd_xasprintf("PATH=%s", path_old));
	cd_strv_push(&env, "PAGER=more.com");
	cd_strv_push(&env, "GIT_PAGER=more.com");
	free(path_keep);
	return env;
}

/* ssh and scp stubs that fail, in the directory put first on PATH. */
static void write_stubs(const char *dir)
{
	static const char *const names[] = { "ssh.bat", "ssh.cmd", "scp.bat", "scp.cmd", NULL };
	char *parent = cd_xstrdup(dir);
	char *bs = strrchr(parent, '\\');
	if (bs) {
		*bs = '\0';
		wchar_t *w = cd_win_wide(parent);
		if (w)
			CreateDirectoryW(w, NULL);
		free(w);
	}
	free(parent);
	wchar_t *wd = cd_win_wide(dir);
	if (wd)
		CreateDirectoryW(wd, NULL);
	free(wd);
	for (const char *const *n = names; *n; n++) {
		char *p = cd_xasprintf("%s\\%s", dir, *n);
		wchar_t *w = cd_win_wide(p);
		HANDLE h = w ? CreateFileW(w, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS,
					   FILE_ATTRIBUTE_NORMAL, NULL)
			     : INVALID_HANDLE_VALUE;
		if (h != INVALID_HANDLE_VALUE) {
			static const char body[] =
				"@echo cordon: no network in this sandbox 1>&2\r\n@exit /b 1\r\n";
			DWORD put;
			WriteFile(h, body, sizeof(body) - 1, &put, NULL);
			CloseHandle(h);
		}
		free(w);
		free(p);
	}
}

/* ---- the launch ---- */

int cd_windows_launch(const struct cd_windows_plan *wp, char *const *argv, const char *cwd,
		      int *ret_exit, char **reterr)
{
	wchar_t **made = cd_xcalloc(wp->n_aces + 1, sizeof(*made));
	size_t n_made = 0;
	HANDLE token = NULL, job = NULL;
	LPPROC_THREAD_ATTRIBUTE_LIST attrs = NULL;
	char **env = NULL;
	unsigned char *block = NULL;
	wchar_t *cmdline = NULL, *wcwd = NULL;
	PROCESS_INFORMATION pi = { 0 };
	int r = -1;

	if (!wp->sandboxed) {
		*reterr = cd_xstrdup("cd_windows_launch: the plan has no sandbox");
		goto out;
	}
	char *line = cd_windows_cmdline(argv);
	if (!line) {
		*reterr = cd_xasprintf(
			"the program name '%s' cannot be run safely: a double quote "
			"cannot be carried on a Windows command line, and a batch file "
			"(.bat, .cmd) has cmd.exe parse its arguments by other rules; run "
			"cmd.exe /c with the command explicitly",
			argv[0]);
		goto out;
	}
	cmdline = cd_win_wide(line);
	free(line);
	if (!cmdline || (cwd && !(wcwd = cd_win_wide(cwd)))) {
		*reterr = cd_xstrdup("the command or its directory is not valid UTF-8");
		goto out;
	}

	/* 2. the ACEs (missing protected names made first, remembered). */
	for (size_t i = 0; i < wp->n_aces; i++) {
		const struct cd_win_ace *a = &wp->aces[i];
		if (a->create_dir) {
			wchar_t *w = cd_win_wide(a->path);
			if (w && CreateDirectoryW(w, NULL)) {
				made[n_made++] = w;
			} else {
				DWORD e = GetLastError();
				free(w);
				if (e != ERROR_ALREADY_EXISTS) {
					char *what = cd_xasprintf("making %s", a->path);
					fail(reterr, what, e);
					free(what);
					goto out;
				}
			}
		}
		/* The null device's ACL is the system's: a refusal there is not ours to fix. */
		if (apply_ace(a, reterr) < 0) {
			if (!strcmp(a->path, "\\\\.\\NUL")) {
				free(*reterr);
				*reterr = NULL;
				continue;
			}
			goto out;
		}
	}
	/* 3. the token. */
	if (make_token(wp, &token, reterr) < 0)
		goto out;
	/* 4. the environment. */
	if (wp->path_prepend)
		write_stubs(wp->path_prepend);
	env = environment(wp);
	size_t block_len = 0;
	block = cd_windows_env_block(env, &block_len, reterr);
	if (!block)
		goto out;
	/* 5. the job, the handle list, the process. */
	job = CreateJobObjectW(NULL, NULL);
	JOBOBJECT_EXTENDED_LIMIT_INFORMATION li = { 0 };
	li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
	if (!job ||
	    !SetInformationJobObject(job, JobObjectExtendedLimitInformation, &li, sizeof(li))) {
		fail(reterr, "creating the job object", GetLastError());
		goto out;
	}
	HANDLE std[3] = { GetStdHandle(STD_INPUT_HANDLE), GetStdHandle(STD_OUTPUT_HANDLE),
			  GetStdHandle(STD_ERROR_HANDLE) };
	HANDLE list[3];
	size_t n_list = 0;
	for (int i = 0; i < 3; i++) {
		if (!std[i] || std[i] == INVALID_HANDLE_VALUE)
			continue;
		bool dup = false;
		for (size_t k = 0; k < n_list; k++)
			dup = dup || list[k] == std[i];
		if (dup)
			continue;
		SetHandleInformation(std[i], HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
		list[n_list++] = std[i];
	}
	SIZE_T size = 0;
	InitializeProcThreadAttributeList(NULL, 1, 0, &size);
	attrs = cd_xmalloc(size);
	if (!InitializeProcThreadAttributeList(attrs, 1, 0, &size) ||
	    (n_list && !UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, list,
						  n_list * sizeof(HANDLE), NULL, NULL))) {
		fail(reterr, "the handle list", GetLastError());
		free(attrs);
		attrs = NULL;
		goto out;
	}
	STARTUPINFOEXW six = { 0 };
	six.StartupInfo.cb = sizeof(six);
	six.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
	six.StartupInfo.hStdInput = std[0];
	six.StartupInfo.hStdOutput = std[1];
	six.StartupInfo.hStdError = std[2];
	six.lpAttributeList = attrs;
	if (!CreateProcessAsUserW(token, NULL, cmdline, NULL, NULL, n_list > 0,
				  CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT |
					  CREATE_SUSPENDED,
				  block, wcwd, &six.StartupInfo, &pi)) {
		fail(reterr, "CreateProcessAsUser", GetLastError());
		goto out;
	}
	if (!AssignProcessToJobObject(job, pi.hProcess)) {
		fail(reterr, "AssignProcessToJobObject", GetLastError());
		TerminateProcess(pi.hProcess, 125);
		goto out;
	}
	ResumeThread(pi.hThread);
	WaitForSingleObject(pi.hProcess, INFINITE);
	DWORD code = 1;
	GetExitCodeProcess(pi.hProcess, &code);
	*ret_exit = (int)code;
	r = 0;
out:
	/* 6. the job takes what the command left with it; made directories go if empty. */
	if (pi.hThread)
		CloseHandle(pi.hThread);
	if (pi.hProcess)
		CloseHandle(pi.hProcess);
	if (job)
		CloseHandle(job);
	if (token)
		CloseHandle(token);
	if (attrs) {
		DeleteProcThreadAttributeList(attrs);
		free(attrs);
	}
	for (size_t i = 0; i < n_made; i++) {
		RemoveDirectoryW(made[i]);
		free(made[i]);
	}
	free(made);
	free(block);
	cd_strv_free(env);
	free(cmdline);
	free(wcwd);
	return r;
}
