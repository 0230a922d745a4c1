/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "shared/fd-util.h"

static const char usage[] =
	"Usage: cordon [--version | --help]\n"
	"       cordon run     [POLICY OPTIONS] [RUN OPTIONS] [--] CMD [ARG...]\n"
	"       cordon explain [POLICY OPTIONS] [--backend linux] [--json]\n"
	"       cordon probe   [--json]\n"
	"       cordon check   [--builtin] FILE...\n"
	"       cordon serve   [--listen stdio|ws://IP:PORT|unix:PATH] [SERVE OPTIONS]\n"
	"\n"
	"Commands:\n"
	"  run       run one command under a policy\n"
	"  explain   show the bound policy and the sandbox that would be built\n"
	"  probe     show what this host can enforce\n"
	"  check     validate policy files\n"
	"  serve     serve the exec-server protocol (stdio, WebSocket, unix socket)\n"
	"\n"
	"Options:\n"
	"  -V, --version  print the version and exit\n"
	"  -h, --help     show this help\n"
	"\n"
	"Run 'cordon COMMAND --help' for the options of a command.\n";

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const struct cd_cli_opt *opts;
} commands[] = {
	{ "run", cd_cmd_run, cd_run_options },
	{ "explain", cd_cmd_explain, cd_explain_options },
	{ "probe", cd_cmd_probe, cd_probe_options },
	{ "check", cd_cmd_check, cd_check_options },
	{ "serve", cd_cmd_serve, cd_serve_options },
};

/* The options of cordon itself, for --list-options. */
static const struct cd_cli_opt main_options[] = {
	{ "help", 'h', false, 1 },
	{ "version", 'V', false, 2 },
	{ NULL, 0, false, 0 },
};

/*
 * `cordon --list-options [COMMAND]`: not for people (so not in --help),
 * for the shell completions' test, which checks that their option lists
 * are this table. Without COMMAND, cordon's own options and then the
 * commands. One word a line: --NAME, --NAME= (takes a value), --NAME[=]
 * (an optional value, only as --NAME=VALUE), -X, -X= likewise.
 */
static int list_options(int argc, char **argv)
{
	const struct cd_cli_opt *opts = main_options;

	if (argc > 3) {
		cd_cli_usage_error(NULL, "--list-options takes at most one command");
		return CD_EXIT_USAGE;
	}
	if (argc == 3) {
		opts = NULL;
		for (size_t i = 0; i < CD_ARRAY_SIZE(commands); i++)
			if (cd_streq(argv[2], commands[i].name))
				opts = commands[i].opts;
		if (!opts) {
			cd_cli_usage_error(NULL, "unknown command '%s'", argv[2]);
			return CD_EXIT_USAGE;
		}
	}
	for (const struct cd_cli_opt *o = opts; o->name; o++) {
		const char *arg = o->has_arg == CD_CLI_ARG_OPTIONAL ? "[=]" : o->has_arg ? "=" : "";
		printf("--%s%s\n", o->name, arg);
		if (o->short_name)
			printf("-%c%s\n", o->short_name, arg);
	}
	if (argc == 2)
		for (size_t i = 0; i < CD_ARRAY_SIZE(commands); i++)
			printf("%s\n", commands[i].name);
	return 0;
}

int main(int argc, char **argv)
{
	/*
	 * Started with stdin (or stdout, stderr) closed, as CI runners and
	 * some daemons do: /dev/null takes its place before anything else is
	 * opened, or the first socket would become the command's stdin.
	 */
	int e = cd_std_fds_ensure();
	if (e < 0) {
		/* Nothing may be printed safely: stderr may be what is missing. */
		return 125;
	}
	if (argc < 2) {
		fputs(usage, stderr);
		return CD_EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (cd_streq(cmd, "--help") || cd_streq(cmd, "-h")) {
		fputs(usage, stdout);
		return 0;
	}
	if (cd_streq(cmd, "--version") || cd_streq(cmd, "-V")) {
		printf("cordon %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (cd_streq(cmd, "--list-options"))
		return list_options(argc, argv);
	/* Internal, so not in the table (--help, the completions). */
	if (cd_streq(cmd, "proxy"))
		return cd_cmd_proxy(argc - 1, argv + 1);
	for (size_t i = 0; i < CD_ARRAY_SIZE(commands); i++)
		if (cd_streq(cmd, commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	if (cmd[0] == '-')
		cd_cli_usage_error(NULL, "unknown option %s", cmd);
	else
		cd_cli_usage_error(NULL, "unknown command '%s'", cmd);
	return CD_EXIT_USAGE;
}
