/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "builtin-profiles.h"
#include "cli.h"
#include "core/profile.h"

#define CHECK_MAX_BYTES (1024 * 1024)

enum {
	OPT_HELP = 1,
	OPT_BUILTIN,
};

const struct cd_cli_opt cd_check_options[] = {
	{ "help", 'h', false, OPT_HELP },
	{ "builtin", 0, false, OPT_BUILTIN },
	{ NULL, 0, false, 0 },
};

static void check_help(void)
{
	fputs("Usage: cordon check FILE...\n"
	      "       cordon check --builtin [FILE...]\n"
	      "\n"
	      "Validate policy files strictly: unknown keys, wrong types, bad URIs, invalid\n"
	      "or duplicate JSON and a missing \"version\" are errors. Prints \"FILE: ok\" for\n"
	      "each good file and \"FILE:LINE:COL: error: MESSAGE (at LOCATION)\" for each bad\n"
	      "one. Exit status: 0 all good, 1 any bad, 2 usage error.\n"
	      "\n"
	      "Options:\n"
	      "  --builtin               also validate the profiles built into cordon, each\n"
	      "                          reported as \"built-in:NAME\"\n"
	      "  -h, --help              show this help\n",
	      stdout);
}

/* 0 good, 1 bad (reported). name says where the text comes from. */
static int check_text(const char *name, const char *text, size_t len)
{
	struct cd_profile *p = NULL;
	struct cd_parse_error e = { 0 };
	int r = cd_profile_parse_file_text(text, len, name, &p, &e);
	if (r < 0) {
		if (e.line)
			fprintf(stderr, "%s:%u:%u: error: %s", name, e.line, e.col,
				e.msg ? e.msg : strerror(-r));
		else
			fprintf(stderr, "%s: error: %s", name, e.msg ? e.msg : strerror(-r));
		if (e.path && *e.path)
			fprintf(stderr, " (at %s)", e.path);
		fputc('\n', stderr);
		cd_parse_error_done(&e);
		return 1;
	}
	cd_profile_free(p);
	printf("%s: ok\n", name);
	return 0;
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
	r = check_text(file, text, len);
	free(text);
	return r;
}

/* Every built-in profile, as "built-in:NAME". */
static int check_builtin(void)
{
	int bad = 0;
	for (const struct cd_builtin_profile *bp = cd_builtin_profiles; bp->name; bp++) {
		cleanup_free char *name = cd_xasprintf(CD_BUILTIN_ORIGIN ":%s", bp->name);
		bad |= check_text(name, bp->text, bp->len);
	}
	return bad;
}

int cd_cmd_check(int argc, char **argv)
{
	struct cd_cli_args a = { .cmd = "check", .argc = argc, .argv = argv, .i = 1 };
	int id;
	const char *arg;
	bool builtin = false;

	while ((id = cd_cli_next(&a, cd_check_options, &arg)) > 0) {
		if (id == OPT_HELP) {
			check_help();
			return 0;
		}
		if (id == OPT_BUILTIN)
			builtin = true;
	}
	if (id < 0)
		return CD_EXIT_USAGE;
	if (a.i >= argc && !builtin) {
		cd_cli_usage_error(a.cmd, "no policy files given");
		return CD_EXIT_USAGE;
	}
	int bad = builtin ? check_builtin() : 0;
	for (int i = a.i; i < argc; i++)
		bad |= check_one(argv[i]);
	return bad ? 1 : 0;
}
