/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin-profiles.h"
#include "core/util.h"
#include "profile-lookup.h"
#include "shared/fd-util.h"

int cd_profile_dirs(char ***ret_dirs, char **reterr_msg)
{
	char **dirs = NULL;
	size_t n = 0;
	const char *env = getenv("CORDON_POLICY_PATH");

	/*
	 * Empty elements of $CORDON_POLICY_PATH are skipped and relative ones
	 * refused: either would be looked up from the current directory, where
	 * an untrusted checkout's NAME.json would replace the profile NAME.
	 */
	for (const char *p = env; p && *p;) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > 0 && p[0] != '/') {
			cleanup_free char *elem = cd_xstrndup(p, len), *h = NULL;
			const char *shown = cd_vis(elem, &h);
			*reterr_msg = cd_xasprintf(
				"CORDON_POLICY_PATH: '%s' is not an absolute directory; a "
				"relative one would be looked up from the current directory, "
				"so it is refused: give absolute directories (e.g. "
				"\"$PWD/%s\")",
				shown, shown);
			cd_strv_free(dirs);
			return -EINVAL;
		}
		if (len > 0)
			cd_strv_append_take(&dirs, &n, cd_xstrndup(p, len));
		p = end ? end + 1 : p + len;
	}
	cd_strv_append_take(&dirs, &n, cd_xstrdup(CD_SYSCONF_POLICYDIR));
	cd_strv_append_take(&dirs, &n, cd_xstrdup(CD_POLICYDIR));
	*ret_dirs = dirs;
	return 0;
}

int cd_profile_find_entry(char *const *dirs, const char *name, char **ret_path, struct stat *ret_st,
			  int *ret_err)
{
	for (char *const *d = dirs; *d; d++) {
		char *path = cd_xasprintf("%s/%s.json", *d, name);
		int e = lstat(path, ret_st) < 0 ? errno : 0;
		if (e == ENOENT || e == ENOTDIR) {
			free(path);
			continue;
		}
		*ret_path = path;
		*ret_err = e;
		return 0;
	}
	return -ENOENT;
}

static const char *file_kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "not a regular file";
}

static char *not_regular(const char *path, mode_t m)
{
	return cd_xasprintf("profile '%s' is %s, not a regular file: remove it or put the "
			    "profile there (an entry of the lookup path is never passed over)",
			    path, file_kind(m));
}

/*
 * Read the entry cd_profile_find_entry() found at path, st its lstat. Only
 * a regular file, or a symbolic link to one, is read; anything else is
 * refused, never passed over. O_NONBLOCK: a FIFO put there after the stat
 * must not block the lookup in open(2) (fstat then refuses it). 0 with
 * *text and *len set, or -1 with *reterr_msg.
 */
static int read_entry(const char *path, struct stat *st, char **text, size_t *len,
		      char **reterr_msg)
{
	/* The messages show path (and a link's target) with control characters escaped. */
	cleanup_free char *h1 = NULL, *h2 = NULL;
	const char *shown = cd_vis(path, &h1);
	if (S_ISLNK(st->st_mode) && stat(path, st) < 0) {
		int e = errno;
		char target[PATH_MAX];
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (e == ENOENT && n >= 0) {
			target[n] = '\0';
			*reterr_msg = cd_xasprintf("profile '%s' is a dangling symbolic link (to "
						   "'%s'): fix or remove it (an entry of the "
						   "lookup path is never passed over)",
						   shown, cd_vis(target, &h2));
		} else {
			*reterr_msg =
				cd_xasprintf("cannot read profile '%s': %s", shown, strerror(e));
		}
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		*reterr_msg = not_regular(shown, st->st_mode);
		return -1;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		*reterr_msg = cd_xasprintf("cannot read profile '%s': %s", shown, strerror(errno));
		return -1;
	}
	int r = fstat(fd, st) < 0 ? -errno : 0;
	if (r == 0 && !S_ISREG(st->st_mode)) {
		close(fd);
		*reterr_msg = not_regular(shown, st->st_mode);
		return -1;
	}
	if (r == 0)
		r = cd_read_fd(fd, (size_t)st->st_size, CD_PROFILE_MAX_BYTES, text, len);
	close(fd);
	if (r == -EFBIG)
		*reterr_msg = cd_xasprintf("profile '%s': file is larger than 1 MiB", shown);
	else if (r < 0)
		*reterr_msg = cd_xasprintf("cannot read profile '%s': %s", shown, strerror(-r));
	return r < 0 ? -1 : 0;
}

static char *not_found(const char *name, char *const *dirs)
{
	struct cd_strbuf sb = { 0 };
	cleanup_free char *h1 = NULL, *h2 = NULL;
	const char *shown = cd_vis(name, &h2);
	for (char *const *d = dirs; *d; d++)
		cd_strbuf_printf(&sb, "%s, ", cd_vis(*d, &h1));
	cd_strbuf_append(&sb, "then the built-in profiles:");
	for (const struct cd_builtin_profile *p = cd_builtin_profiles; p->name; p++)
		cd_strbuf_printf(&sb, "%s %s", p == cd_builtin_profiles ? "" : ",", p->name);
	char *msg = cd_xasprintf("no such profile '%s' (searched %s); give a policy file path or "
				 "install %s.json in one of these directories",
				 shown, sb.buf, shown);
	cd_strbuf_done(&sb);
	return msg;
}

int cd_profile_lookup(const char *name, char **ret_text, size_t *ret_len, char **ret_origin,
		      char **reterr_msg)
{
	cleanup_free char *h1 = NULL;
	if (name[0] == '.' || !*name) {
		*reterr_msg = cd_xasprintf("no such profile '%s'", cd_vis(name, &h1));
		return -1;
	}
	char **dirs = NULL;
	if (cd_profile_dirs(&dirs, reterr_msg) < 0)
		return -1;
	/*
	 * The directories first, in order, so that an admin's or a user's
	 * NAME.json replaces the built-in NAME; whatever is at DIR/NAME.json
	 * but cannot be used is refused, never passed over.
	 */
	char *path = NULL;
	struct stat st;
	int e;
	if (cd_profile_find_entry(dirs, name, &path, &st, &e) < 0) {
		bool builtin = cd_builtin_profile_find(name) != NULL;
		if (builtin)
			*ret_origin = cd_xstrdup(CD_BUILTIN_ORIGIN);
		else
			*reterr_msg = not_found(name, dirs);
		cd_strv_free(dirs);
		return builtin ? 1 : -1;
	}
	cd_strv_free(dirs);
	if (e) {
		*reterr_msg = cd_xasprintf("cannot read profile '%s': %s", cd_vis(path, &h1),
					   strerror(e));
		free(path);
		return -1;
	}
	if (read_entry(path, &st, ret_text, ret_len, reterr_msg) < 0) {
		free(path);
		return -1;
	}
	*ret_origin = path;
	return 0;
}
