/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "cli.h"
#include "core/profile.h"

#define CHECK_MAX_BYTES (1024 * 1024)

enum {
	OPT_HELP = 1,
};

static const struct cd_cli_opt check_opts[] = {
	{ "help", 'h', false, OPT_HELP },
	{ NULL, 0, false, 0 },
};

static void check_help(void)
{
	fputs("Usage: cordon check FILE...\n"
	      "\n"
	      "Validate policy files strictly: unknown keys, wrong types, bad URIs, invalid\n"
	      "or duplicate JSON and a missing \"version\" are errors. Prints \"FILE: ok\" for\n"
	      "each good file and \"FILE:LINE:COL: error: MESSAGE (at LOCATION)\" for each bad\n"
	      "one. Exit status: 0 all good, 1 any bad, 2 usage error.\n"
	      "\n"
	      "Options:\n"
	      "  -h, --help              show this help\n",
	      stdout);
}

/* 0 good, 1 bad (reported). */
static int check_one(const char *file)
{
	char *text = NULL;
	size_t len = 0;
	int r = cd_cli_read_file(file, CHECK_MAX_BYTES, &text, &len);
	if (r == -EFBIG) {
		fprintf(stderr, "%s: error: file is larger than 1 MiB\n", file);
		return 1;
	}
	if (r < 0) {
		fprintf(stderr, "%s: error: %s\n", file, strerror(-r));
		return 1;
	}

	struct cd_profile *p = NULL;
	struct cd_parse_error e = { 0 };
	r = cd_profile_parse_file_text(text, len, file, &p, &e);
	free(text);
	if (r < 0) {
		if (e.line)
			fprintf(stderr, "%s:%u:%u: error: %s", file, e.line, e.col,
				e.msg ? e.msg : strerror(-r));
		else
			fprintf(stderr, "%s: error: %s", file, e.msg ? e.msg : strerror(-r));
		if (e.path && *e.path)
			fprintf(stderr, " (at %s)", e.path);
		fputc('\n', stderr);
		cd_parse_error_done(&e);
		return 1;
	}
	cd_profile_free(p);
	printf("%s: ok\n", file);
	return 0;
}

int cd_cmd_check(int argc, char **argv)
{
	struct cd_cli_args a = { .cmd = "check", .argc = argc, .argv = argv, .i = 1 };
	int id;
	const char *arg;

	while ((id = cd_cli_next(&a, check_opts, &arg)) > 0) {
		if (id == OPT_HELP) {
			check_help();
			return 0;
		}
	}
	if (id < 0)
		return CD_EXIT_USAGE;
	if (a.i >= argc) {
		cd_cli_usage_error(a.cmd, "no policy files given");
		return CD_EXIT_USAGE;
	}
	int bad = 0;
	for (int i = a.i; i < argc; i++)
		bad |= check_one(argv[i]);
	return bad ? 1 : 0;
}
