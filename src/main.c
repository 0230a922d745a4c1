/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const char usage[] =
	"Usage: cordon [--version | --help]\n"
	"       cordon run     [POLICY OPTIONS] [RUN OPTIONS] [--] CMD [ARG...]\n"
	"       cordon explain [POLICY OPTIONS] [--backend linux] [--json]\n"
	"       cordon probe   [--json]\n"
	"       cordon check   FILE...\n"
	"       cordon serve   [--listen stdio|ws://IP:PORT|unix:PATH] [SERVE OPTIONS]\n"
	"\n"
	"Commands:\n"
	"  run       run one command under a policy\n"
	"  explain   show the bound policy and the sandbox that would be built\n"
	"  probe     show what this host can enforce\n"
	"  check     validate policy files\n"
	"  serve     serve the exec-server protocol (stdio, WebSocket, unix socket)\n"
	"\n"
	"Run 'cordon COMMAND --help' for the options of a command.\n";

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "run", cd_cmd_run },	   { "explain", cd_cmd_explain }, { "probe", cd_cmd_probe },
	{ "check", cd_cmd_check }, { "serve", cd_cmd_serve },
};

int main(int argc, char **argv)
{
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
	for (size_t i = 0; i < CD_ARRAY_SIZE(commands); i++)
		if (cd_streq(cmd, commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	if (cmd[0] == '-')
		cd_cli_usage_error(NULL, "unknown option %s", cmd);
	else
		cd_cli_usage_error(NULL, "unknown command '%s'", cmd);
	return CD_EXIT_USAGE;
}
