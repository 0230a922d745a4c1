/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

void cd_cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fputs("cordon: ", stderr);
	if (cmd)
		fprintf(stderr, "%s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (cmd)
		fprintf(stderr, " (see cordon %s --help)\n", cmd);
	else
		fputs(" (see cordon --help)\n", stderr);
}

static const struct cd_cli_opt *find_long(const struct cd_cli_opt *opts, const char *name,
					  size_t len)
{
	for (const struct cd_cli_opt *o = opts; o->name || o->short_name; o++)
		if (o->name && strlen(o->name) == len && strncmp(o->name, name, len) == 0)
			return o;
	return NULL;
}

static const struct cd_cli_opt *find_short(const struct cd_cli_opt *opts, char c)
{
	for (const struct cd_cli_opt *o = opts; o->name || o->short_name; o++)
		if (o->short_name == c)
			return o;
	return NULL;
}

int cd_cli_next(struct cd_cli_args *a, const struct cd_cli_opt *opts, const char **ret_arg)
{
	*ret_arg = NULL;
	if (a->i >= a->argc)
		return 0;
	const char *s = a->argv[a->i];
	if (s[0] != '-' || s[1] == '\0')
		return 0; /* an operand (or "-") */
	if (cd_streq(s, "--")) {
		a->i++;
		return 0;
	}

	if (s[1] == '-') {
		const char *name = s + 2;
		const char *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct cd_cli_opt *o = find_long(opts, name, len);
		if (!o) {
			cd_cli_usage_error(a->cmd, "unknown option --%.*s", (int)len, name);
			return -1;
		}
		a->i++;
		if (!o->has_arg) {
			if (eq) {
				cd_cli_usage_error(a->cmd, "option --%s takes no argument",
						   o->name);
				return -1;
			}
			return o->id;
		}
		if (eq) {
			*ret_arg = eq + 1;
			return o->id;
		}
		if (a->i >= a->argc) {
			cd_cli_usage_error(a->cmd, "option --%s needs an argument", o->name);
			return -1;
		}
		*ret_arg = a->argv[a->i++];
		return o->id;
	}

	/* One short option per word, with its argument attached or following. */
	const struct cd_cli_opt *o = find_short(opts, s[1]);
	if (!o) {
		cd_cli_usage_error(a->cmd, "unknown option %s", s);
		return -1;
	}
	a->i++;
	if (!o->has_arg) {
		if (s[2] != '\0') {
			cd_cli_usage_error(a->cmd, "unknown option %s", s);
			return -1;
		}
		return o->id;
	}
	if (s[2] != '\0') {
		*ret_arg = s + 2;
		return o->id;
	}
	if (a->i >= a->argc) {
		cd_cli_usage_error(a->cmd, "option -%c needs an argument", o->short_name);
		return -1;
	}
	*ret_arg = a->argv[a->i++];
	return o->id;
}

int cd_cli_read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}
	/*
	 * Size the buffer from fstat so a regular file is read in one call; a
	 * pipe or a file that grows is still read to the end (up to max + 1 to
	 * tell "too large" apart).
	 */
	size_t cap =
		S_ISREG(st.st_mode) && (size_t)st.st_size <= max ? (size_t)st.st_size + 1 : 4096;
	char *buf = cd_xmalloc(cap + 1);
	size_t len = 0;
	for (;;) {
		if (len == cap) {
			if (cap > max)
				break;
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			buf = cd_xrealloc(buf, cap + 1);
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		/* A short read of a regular file is its end: spare the extra read(). */
		if (S_ISREG(st.st_mode) && len < cap)
			break;
	}
	close(fd);
	if (len > max) {
		free(buf);
		return -EFBIG;
	}
	buf[len] = '\0';
	*ret = buf;
	if (ret_len)
		*ret_len = len;
	return 0;
}
