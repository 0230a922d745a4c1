/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cd_peer_uid_in_group (peer.h): whether a user is a member of a group, by
 * the user and group databases. Portable: macOS has the same lookups.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "core/util.h"
#include "serve/peer.h"

#ifdef CD_STATIC_BINARY
/*
 * A static glibc cannot load NSS modules (see passwd_home in server.c):
 * the files themselves. 1 with *ret_name (malloc()ed) and *ret_gid, 0 when
 * uid has no entry, -errno.
 */
static int find_user(uid_t uid, char **ret_name, gid_t *ret_gid)
{
	FILE *f = fopen("/etc/passwd", "re");
	struct passwd *pw;
	int r = 0;

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while ((pw = fgetpwent(f)))
		if (pw->pw_uid == uid) {
			*ret_name = cd_xstrdup(pw->pw_name);
			*ret_gid = pw->pw_gid;
			r = 1;
			break;
		}
	fclose(f);
	return r;
}

static int group_lists(gid_t gid, const char *name)
{
	FILE *f = fopen("/etc/group", "re");
	struct group *gr;
	int r = 0;

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	/* Every entry with that number counts (a group may be split across lines). */
	while (!r && (gr = fgetgrent(f)))
		if (gr->gr_gid == gid)
			for (char **m = gr->gr_mem; m && *m && !r; m++)
				r = cd_streq(*m, name);
	fclose(f);
	return r;
}
#else
/* The reentrant lookups want a buffer: grown until the entry fits (1 MiB at most). */
static int find_user(uid_t uid, char **ret_name, gid_t *ret_gid)
{
	struct passwd pw, *res = NULL;
	int e = ERANGE;

	for (size_t size = 16384; e == ERANGE && size <= (1u << 20); size *= 2) {
		char *buf = cd_xmalloc(size);
		e = getpwuid_r(uid, &pw, buf, size, &res);
		if (e == 0 && res) {
			*ret_name = cd_xstrdup(pw.pw_name);
			*ret_gid = pw.pw_gid;
		}
		free(buf);
	}
	if (e)
		return -e;
	return res ? 1 : 0;
}

static int group_lists(gid_t gid, const char *name)
{
	struct group gr, *res = NULL;
	int e = ERANGE, r = 0;

	for (size_t size = 16384; e == ERANGE && size <= (1u << 20); size *= 2) {
		char *buf = cd_xmalloc(size);
		e = getgrgid_r(gid, &gr, buf, size, &res);
		if (e == 0 && res)
			for (char **m = gr.gr_mem; m && *m && !r; m++)
				r = cd_streq(*m, name);
		free(buf);
	}
	return e ? -e : r;
}
#endif

int cd_peer_uid_in_group(uid_t uid, gid_t gid)
{
	char *name = NULL;
	gid_t primary = 0;

	int r = find_user(uid, &name, &primary);
	if (r <= 0)
		return r; /* no such user: a member of nothing */
	r = primary == gid ? 1 : group_lists(gid, name);
	free(name);
	return r;
}
