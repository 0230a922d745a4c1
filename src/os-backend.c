/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The per-OS backend choice and the Seatbelt launch (os-backend.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "os-backend.h"
#include "sandbox/seatbelt/sbpl.h"

const char *cd_os_backend_name(enum cd_cli_backend b)
{
	static const char *const names[] = { "linux", "seatbelt", "windows" };
	return names[b];
}

const char *cd_os_backend_sandbox_type(enum cd_cli_backend b)
{
	static const char *const types[] = { "linuxSeccomp", "macosSeatbelt",
					     "windowsRestrictedToken" };
	return types[b];
}

const char *cd_seatbelt_stand_in(void)
{
	const char *p = getenv("CORDON_TEST_SEATBELT_EXEC");
	return p && p[0] == '/' ? p : NULL;
}

int cd_seatbelt_wrap(const struct cd_cli_bound *b, const char *exec, char *const *argv,
		     const char *const *hidden, size_t n_hidden, char ***ret_argv, char **reterr)
{
	struct cd_seatbelt_input in = {
		.profile = b->profile,
		.plan = b->plan,
		.workspace_roots = (const char *const *)b->roots,
		.n_workspace_roots = cd_strv_length(b->roots),
		.macos_paths = cd_os_backend_native() != CD_CLI_BACKEND_SEATBELT,
		/* No .limits: the Linux sandbox this test path runs in enforces them. */
		.hidden = hidden,
		.n_hidden = n_hidden,
	};
	struct cd_seatbelt_plan *sp = NULL;
	int r = cd_seatbelt_plan_build(&in, &sp, reterr);
	if (r < 0)
		return r;
	char **out = NULL;
	if (sp->sandboxed) {
		cd_strv_push(&out, exec);
		for (char **a = sp->argv + 1; *a; a++)
			cd_strv_push(&out, *a);
	}
	for (char *const *a = argv; *a; a++)
		cd_strv_push(&out, *a);
	cd_seatbelt_plan_free(sp);
	*ret_argv = out;
	return 0;
}
