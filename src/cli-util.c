/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "shared/fd-util.h"

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
		if (o->has_arg == CD_CLI_ARG_OPTIONAL)
			return o->id;
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
	/* A pipe, or a file that grows, is still read to its end. */
	int r = cd_read_fd(fd, S_ISREG(st.st_mode) ? (size_t)st.st_size : 0, max, ret, ret_len);
	close(fd);
	return r;
}
