/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The command-line front end: a tiny option scanner shared by the
 * subcommands (getopt_long prints its own messages and permutes argv, and
 * `cordon run` must stop at the first operand so `cordon run ls -l` works)
 * and the subcommand entry points. Each entry point returns the process
 * exit code.
 */

#include <stdbool.h>

#include "core/util.h"

#define CD_EXIT_USAGE 2

enum {
	CD_CLI_ARG_OPTIONAL = 2, /* has_arg: only --name=VALUE takes one; --name gives NULL */
};

struct cd_cli_opt {
	const char *name;      /* long name without "--", or NULL to end the table */
	char short_name;       /* 0 when none */
	unsigned char has_arg; /* false, true, or CD_CLI_ARG_OPTIONAL */
	int id;		       /* > 0 */
};

struct cd_cli_args {
	const char *cmd; /* subcommand name, for messages */
	int argc;
	char **argv;
	int i; /* next argv index to look at */
};

/*
 * Next option of a->argv. Returns its id with *ret_arg set to the argument
 * (or NULL), 0 when the options end (a->i is then the first operand; a
 * "--" is consumed), or -1 after printing a usage error to stderr.
 * Accepted spellings: --name VALUE, --name=VALUE, -x, -x VALUE, -xVALUE;
 * an optional argument only as --name=VALUE (*ret_arg NULL for --name).
 */
int cd_cli_next(struct cd_cli_args *a, const struct cd_cli_opt *opts, const char **ret_arg);

/* "cordon: CMD: MESSAGE (see cordon CMD --help)" on stderr. */
void cd_cli_usage_error(const char *cmd, const char *fmt, ...) CD_PRINTF(2, 3);

/* Read a whole regular file with as few syscalls as possible (open, fstat, one read).
 * Files larger than max give -EFBIG. *ret is NUL-terminated and malloc'ed. */
int cd_cli_read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/*
 * The subcommands' option tables, for cd_cli_next and for
 * `cordon --list-options COMMAND`, which the shell completions' test
 * compares with the completions' own lists.
 */
extern const struct cd_cli_opt cd_run_options[];
extern const struct cd_cli_opt cd_explain_options[];
extern const struct cd_cli_opt cd_probe_options[];
extern const struct cd_cli_opt cd_check_options[];
extern const struct cd_cli_opt cd_serve_options[];
extern const struct cd_cli_opt cd_proxy_options[];

int cd_cmd_run(int argc, char **argv);
int cd_cmd_explain(int argc, char **argv);
int cd_cmd_probe(int argc, char **argv);
int cd_cmd_check(int argc, char **argv);
int cd_cmd_serve(int argc, char **argv);
/* Internal (tests, benchmarks): the managed network's proxy alone. */
int cd_cmd_proxy(int argc, char **argv);
