/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <jansson.h>
#include <stdio.h>

#include "cli.h"
#include "os-backend.h"
#include "sandbox/backend.h"

enum {
	OPT_HELP = 1,
	OPT_JSON,
};

const struct cd_cli_opt cd_probe_options[] = {
	{ "help", 'h', false, OPT_HELP },
	{ "json", 0, false, OPT_JSON },
	{ NULL, 0, false, 0 },
};

static void probe_help(void)
{
	fputs("Usage: cordon probe [--json]\n"
	      "\n"
	      "Show the backend this host runs sandboxes under and what it can enforce\n"
	      "(Landlock ABI, seccomp, user, pid and network namespaces, cgroup v2,\n"
	      "no_new_privs) and, for every gap, the fix.\n"
	      "\n"
	      "Options:\n"
	      "  --json                  one JSON object instead of text\n"
	      "  -h, --help              show this help\n",
	      stdout);
}

static json_t *probe_json(const struct cd_probe *p)
{
	json_t *root = json_object();
	json_t *h = json_object();
	json_object_set_new(h, "landlock_abi", json_integer(p->host.landlock_abi));
	json_object_set_new(h, "seccomp", json_boolean(p->host.seccomp));
	json_object_set_new(h, "userns", json_boolean(p->host.userns));
	json_object_set_new(h, "is_root", json_boolean(p->host.is_root));
	json_object_set_new(root, "host", h);
	json_t *items = json_array();
	for (size_t i = 0; i < p->n_items; i++) {
		const struct cd_probe_item *it = &p->items[i];
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(it->name ? it->name : ""));
		json_object_set_new(o, "ok", json_boolean(it->ok));
		json_object_set_new(o, "detail",
				    it->detail ? json_string(it->detail) : json_null());
		json_object_set_new(o, "fix", it->fix ? json_string(it->fix) : json_null());
		json_array_append_new(items, o);
	}
	json_object_set_new(root, "items", items);
	json_t *b = json_object();
	enum cd_cli_backend nb = cd_os_backend_native();
	json_object_set_new(b, "name", json_string(cd_os_backend_name(nb)));
	json_object_set_new(b, "sandboxType", json_string(cd_os_backend_sandbox_type(nb)));
	json_object_set_new(root, "backend", b);
	return root;
}

int cd_cmd_probe(int argc, char **argv)
{
	struct cd_cli_args a = { .cmd = "probe", .argc = argc, .argv = argv, .i = 1 };
	bool json = false;
	int id;
	const char *arg;

	while ((id = cd_cli_next(&a, cd_probe_options, &arg)) > 0) {
		switch (id) {
		case OPT_HELP:
			probe_help();
			return 0;
		case OPT_JSON:
			json = true;
			break;
		default:
			break;
		}
	}
	if (id < 0)
		return CD_EXIT_USAGE;
	if (a.i < argc) {
		cd_cli_usage_error(a.cmd, "unexpected argument '%s'", argv[a.i]);
		return CD_EXIT_USAGE;
	}

	struct cd_probe *p = cd_linux_probe_full();
	if (json) {
		json_t *root = probe_json(p);
		json_dumpf(root, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		json_decref(root);
	} else {
		enum cd_cli_backend nb = cd_os_backend_native();
		printf("ok   backend: %s (sandboxType %s): Landlock, seccomp and namespaces; "
		       "seatbelt and windows are planned by explain --backend\n",
		       cd_os_backend_name(nb), cd_os_backend_sandbox_type(nb));
		for (size_t i = 0; i < p->n_items; i++) {
			const struct cd_probe_item *it = &p->items[i];
			printf("%s%s: %s", it->ok ? "ok   " : "MISSING ", it->name,
			       it->detail ? it->detail : "");
			if (!it->ok && it->fix)
				printf(" \xe2\x80\x94 fix: %s", it->fix);
			putchar('\n');
		}
	}
	cd_probe_free(p);
	return 0;
}
