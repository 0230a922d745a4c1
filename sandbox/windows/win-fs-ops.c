/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The file-system shim for binding on Windows (core/plan.h's struct
 * cd_fs_ops over Win32), in cordon's path form ("/C:/a/b", win-util.h),
 * and the UTF-8/UTF-16 helpers. Symlinks and junctions are both links to
 * the binding: a junction redirects a path as a directory symlink does.
 * Windows-only: built with mingw-w64.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>
#include <winioctl.h>

#include "core/plan.h"
#include "core/util.h"
#include "sandbox/windows/win-util.h"

wchar_t *cd_win_wide(const char *s)
{
	int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
	if (n <= 0)
		return NULL;
	wchar_t *w = cd_xcalloc((size_t)n, sizeof(*w));
	MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n);
	return w;
}

char *cd_win_utf8(const wchar_t *w)
{
	int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
	if (n <= 0)
		return cd_xstrdup("");
	char *s = cd_xcalloc((size_t)n, 1);
	WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL);
	return s;
}

static bool is_drive(const char *p)
{
	return ((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z')) && p[1] == ':';
}

wchar_t *cd_win_native(const char *path)
{
	if (path[0] != '/' || !is_drive(path + 1) || (path[3] && path[3] != '/'))
		return NULL;
	char *p = cd_xasprintf("%c:%s", path[1] & ~0x20, path[3] ? path + 3 : "/");
	for (char *q = p; *q; q++)
		if (*q == '/')
			*q = '\\';
	wchar_t *w = cd_win_wide(p);
	free(p);
	return w;
}

char *cd_win_internal(const wchar_t *w)
{
	char *s = cd_win_utf8(w);
	const char *p = s;
	if (!strncmp(p, "\\\\?\\", 4) || !strncmp(p, "\\??\\", 4))
		p += 4;
	if (!is_drive(p) || (p[2] && p[2] != '\\' && p[2] != '/')) {
		free(s);
		return NULL;
	}
	char *r = cd_xasprintf("/%c:%s", p[0] & ~0x20, p[2] ? p + 2 : "");
	for (char *q = r; *q; q++)
		if (*q == '\\')
			*q = '/';
	size_t n = strlen(r);
	while (n > 3 && r[n - 1] == '/')
		r[--n] = '\0';
	free(s);
	return r;
}

char *cd_win_error(unsigned long err)
{
	wchar_t *buf = NULL;
	DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
					 FORMAT_MESSAGE_IGNORE_INSERTS,
				 NULL, err, 0, (LPWSTR)&buf, 0, NULL);
	if (!n || !buf)
		return cd_xasprintf("error %lu", err);
	char *s = cd_win_utf8(buf);
	LocalFree(buf);
	size_t len = strlen(s);
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == '.'))
		s[--len] = '\0';
	return s;
}

static int errno_of(DWORD e)
{
	switch (e) {
	case ERROR_FILE_NOT_FOUND:
	case ERROR_PATH_NOT_FOUND:
	case ERROR_INVALID_NAME:
	case ERROR_BAD_NETPATH:
		return ENOENT;
	case ERROR_ACCESS_DENIED:
	case ERROR_SHARING_VIOLATION:
		return EACCES;
	case ERROR_DIRECTORY:
		return ENOTDIR;
	default:
		return EIO;
	}
}

/* "/" stands above the drives: a directory, never missing. */
static bool is_top(const char *path)
{
	return path[0] == '/' && path[1] == '\0';
}

static int win_lstat_type(void *ctx, const char *path, enum cd_file_type *ret)
{
	(void)ctx;
	if (is_top(path)) {
		*ret = CD_FT_DIR;
		return 0;
	}
	wchar_t *w = cd_win_native(path);
	if (!w) {
		*ret = CD_FT_MISSING;
		return 0;
	}
	DWORD a = GetFileAttributesW(w);
	free(w);
	if (a == INVALID_FILE_ATTRIBUTES) {
		DWORD e = GetLastError();
		if (errno_of(e) == ENOENT) {
			*ret = CD_FT_MISSING;
			return 0;
		}
		return -errno_of(e);
	}
	/* A drive's root is where paths start, never a link to follow (wine marks Z:\ so). */
	if ((a & FILE_ATTRIBUTE_REPARSE_POINT) && strlen(path) > 3)
		*ret = CD_FT_SYMLINK;
	else if (a & FILE_ATTRIBUTE_DIRECTORY)
		*ret = CD_FT_DIR;
	else if (a & FILE_ATTRIBUTE_DEVICE)
		*ret = CD_FT_OTHER;
	else
		*ret = CD_FT_REG;
	return 0;
}

/* The reparse data of symlinks and junctions (ntifs.h's REPARSE_DATA_BUFFER). */
struct reparse {
	ULONG tag;
	USHORT data_len, reserved;
	USHORT sub_off, sub_len, print_off, print_len;
	union {
		struct {
			ULONG flags; /* symlinks: 1 = relative */
			WCHAR buf[1];
		} link;
		struct {
			WCHAR buf[1];
		} mount;
	} u;
};

static int win_readlink(void *ctx, const char *path, char **ret)
{
	(void)ctx;
	wchar_t *w = cd_win_native(path);
	if (!w)
		return -EINVAL;
	HANDLE h = CreateFileW(w, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
			       OPEN_EXISTING,
			       FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_BACKUP_SEMANTICS, NULL);
	free(w);
	if (h == INVALID_HANDLE_VALUE)
		return -errno_of(GetLastError());
	union {
		struct reparse r;
		char raw[MAXIMUM_REPARSE_DATA_BUFFER_SIZE];
	} buf;
	DWORD got = 0;
	BOOL ok =
		DeviceIoControl(h, FSCTL_GET_REPARSE_POINT, NULL, 0, &buf, sizeof(buf), &got, NULL);
	CloseHandle(h);
	if (!ok)
		return -EINVAL;
	const WCHAR *names;
	bool relative = false;
	if (buf.r.tag == IO_REPARSE_TAG_SYMLINK) {
		names = buf.r.u.link.buf;
		relative = buf.r.u.link.flags & 1;
	} else if (buf.r.tag == IO_REPARSE_TAG_MOUNT_POINT) {
		names = buf.r.u.mount.buf;
	} else {
		return -EINVAL; /* another kind of reparse point: not a link to follow */
	}
	size_t n = buf.r.sub_len / sizeof(WCHAR);
	wchar_t *target = cd_xcalloc(n + 1, sizeof(*target));
	memcpy(target, names + buf.r.sub_off / sizeof(WCHAR), n * sizeof(WCHAR));
	char *t;
	if (relative) {
		t = cd_win_utf8(target);
		for (char *q = t; *q; q++)
			if (*q == '\\')
				*q = '/';
	} else {
		t = cd_win_internal(target);
	}
	free(target);
	if (!t)
		return -EINVAL; /* a volume GUID or UNC target: refused as the binding cannot follow */
	*ret = t;
	return 0;
}

static HANDLE open_read(const char *path, int *err)
{
	wchar_t *w = cd_win_native(path);
	if (!w) {
		*err = -ENOENT;
		return INVALID_HANDLE_VALUE;
	}
	HANDLE h =
		CreateFileW(w, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
			    NULL, OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT, NULL);
	free(w);
	if (h == INVALID_HANDLE_VALUE)
		*err = -errno_of(GetLastError());
	return h;
}

static int win_read_file(void *ctx, const char *path, size_t max, char **ret, size_t *ret_len)
{
	(void)ctx;
	int err = 0;
	HANDLE h = open_read(path, &err);
	if (h == INVALID_HANDLE_VALUE)
		return err;
	char *buf = cd_xmalloc(max + 1);
	size_t len = 0;
	while (len < max) {
		DWORD got = 0;
		DWORD want = (DWORD)(max - len > 65536 ? 65536 : max - len);
		if (!ReadFile(h, buf + len, want, &got, NULL)) {
			CloseHandle(h);
			free(buf);
			return -EIO;
		}
		if (!got)
			break;
		len += got;
	}
	CloseHandle(h);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int win_open_file(void *ctx, const char *path, void **ret_file, uint64_t *ret_size)
{
	(void)ctx;
	int err = 0;
	HANDLE h = open_read(path, &err);
	if (h == INVALID_HANDLE_VALUE)
		return err;
	LARGE_INTEGER size;
	if (!GetFileSizeEx(h, &size)) {
		CloseHandle(h);
		return -EIO;
	}
	*ret_file = h;
	*ret_size = (uint64_t)size.QuadPart;
	return 0;
}

static int win_read_at(void *ctx, void *file, uint64_t off, void *buf, size_t len)
{
	(void)ctx;
	char *p = buf;
	while (len) {
		OVERLAPPED ov = { 0 };
		ov.Offset = (DWORD)off;
		ov.OffsetHigh = (DWORD)(off >> 32);
		DWORD got = 0;
		DWORD want = (DWORD)(len > (1u << 20) ? (1u << 20) : len);
		if (!ReadFile((HANDLE)file, p, want, &got, &ov) || !got)
			return -EIO;
		p += got;
		off += got;
		len -= got;
	}
	return 0;
}

static void win_close_file(void *ctx, void *file)
{
	(void)ctx;
	CloseHandle((HANDLE)file);
}

static int win_read_dir(void *ctx, const char *path,
			int (*fn)(void *arg, const char *name, enum cd_file_type type), void *arg)
{
	(void)ctx;
	if (is_top(path)) { /* the drives */
		DWORD mask = GetLogicalDrives();
		for (int d = 0; d < 26; d++) {
			if (!(mask & (1u << d)))
				continue;
			char name[3] = { (char)('A' + d), ':', 0 };
			int r = fn(arg, name, CD_FT_DIR);
			if (r < 0)
				return r;
		}
		return 0;
	}
	char *pattern = cd_xasprintf("%s/*", path);
	wchar_t *w = cd_win_native(pattern);
	free(pattern);
	if (!w)
		return -ENOENT;
	WIN32_FIND_DATAW fd;
	HANDLE h = FindFirstFileExW(w, FindExInfoBasic, &fd, FindExSearchNameMatch, NULL, 0);
	free(w);
	if (h == INVALID_HANDLE_VALUE)
		return -errno_of(GetLastError());
	int r = 0;
	do {
		if (!wcscmp(fd.cFileName, L".") || !wcscmp(fd.cFileName, L".."))
			continue;
		enum cd_file_type t = fd.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT
					      ? CD_FT_SYMLINK
				      : fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY ? CD_FT_DIR
										       : CD_FT_REG;
		char *name = cd_win_utf8(fd.cFileName);
		r = fn(arg, name, t);
		free(name);
	} while (r >= 0 && FindNextFileW(h, &fd));
	FindClose(h);
	return r < 0 ? r : 0;
}

const struct cd_fs_ops cd_fs_ops_host = {
	.lstat_type = win_lstat_type,
	.readlink = win_readlink,
	.read_file = win_read_file,
	.open_file = win_open_file,
	.read_at = win_read_at,
	.close_file = win_close_file,
	.read_dir = win_read_dir,
	.may_create = NULL,
};
