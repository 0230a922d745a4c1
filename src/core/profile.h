/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The portable sandbox intent: a permission profile as the exec-server
 * protocol sends it (exec-server-reference.md 3.2-3.3), the legacy
 * SandboxPolicy forms, and cordon's policy files (the same JSON plus
 * "version" and optional "description"). Pure data; OS-free.
 */

#include <stdbool.h>
#include <stddef.h>

#include "core/json.h"
#include "core/limits.h"
#include "core/netpolicy.h"

/* Ordered by precedence rank for ties: deny > write > read. */
enum cd_access {
	CD_ACCESS_READ,
	CD_ACCESS_WRITE,
	CD_ACCESS_DENY,
	CD_ACCESS_COUNT,
};

enum cd_profile_type {
	CD_PROFILE_MANAGED,  /* cordon builds the sandbox */
	CD_PROFILE_DISABLED, /* no sandbox at all */
	CD_PROFILE_EXTERNAL, /* caller sandboxes the file system; network per profile */
	CD_PROFILE_TYPE_COUNT,
};

enum cd_network {
	CD_NET_RESTRICTED,
	CD_NET_ENABLED,
	CD_NET_MANAGED, /* cordon CLI only (--network managed): proxy-only egress */
	CD_NET_COUNT,
};

enum cd_entry_kind {
	CD_ENTRY_PATH,	  /* absolute native path (from a file:// URI) */
	CD_ENTRY_GLOB,	  /* glob_pattern; deny only */
	CD_ENTRY_SPECIAL, /* symbolic path */
	CD_ENTRY_KIND_COUNT,
};

enum cd_special {
	CD_SPECIAL_ROOT,
	CD_SPECIAL_MINIMAL,
	CD_SPECIAL_PROJECT_ROOTS, /* :workspace_roots, optional subpath */
	CD_SPECIAL_TMPDIR,
	CD_SPECIAL_SLASH_TMP,
	CD_SPECIAL_UNKNOWN, /* kept for forward compatibility, ignored when binding */
	CD_SPECIAL_COUNT,
};

struct cd_fs_entry {
	enum cd_entry_kind kind;
	enum cd_special special; /* CD_ENTRY_SPECIAL only */
	char *path; /* PATH: native absolute path; GLOB: the pattern; UNKNOWN: the token (":foo") */
	char *subpath; /* PROJECT_ROOTS (and UNKNOWN): relative subpath or NULL; never absolute, no ".." */
	enum cd_access access;
	unsigned line, col; /* source position of the entry (0 when built in code) */
};

struct cd_profile {
	enum cd_profile_type type;
	bool fs_unrestricted;	     /* MANAGED: file_system {"type":"unrestricted"} */
	struct cd_fs_entry *entries; /* MANAGED + restricted */
	size_t n_entries;
	unsigned glob_scan_max_depth; /* 0 = unset */
	enum cd_network network;      /* MANAGED and EXTERNAL; DISABLED is ENABLED */
	/*
	 * A policy file's "network" object (a managed network): the rules of
	 * cordon's own proxy. NULL: none given (the string form).
	 */
	struct cd_netpolicy *netpol;
	/*
	 * Resource limits ("limits", core/limits.h), parsed strictly in every
	 * mode: a limit misspelled must never leave a sandbox unbounded.
	 */
	struct cd_limits limits;
	/* Policy-file extras (NULL/0 for wire profiles). */
	unsigned version;
	char *description;
	char *origin; /* "file.json", "builtin:workspace-write", "wire", ... */
};

/* Parse modes. */
typedef enum cd_profile_parse_flags {
	/* Policy file: unknown keys are errors, "version" is required and must be 1,
	 * "description" allowed. Legacy SandboxPolicy forms are accepted too. */
	CD_PROFILE_PARSE_FILE = 1u << 0,
	/* Wire (ExecPermissionProfile inside sandbox.permissions): unknown keys are
	 * ignored as serde does, "version" is not special. */
	CD_PROFILE_PARSE_WIRE = 1u << 1,
	/* Also accept the legacy SandboxPolicy forms ("read-only", "workspace-write",
	 * "danger-full-access", "external-sandbox"). */
	CD_PROFILE_PARSE_LEGACY = 1u << 2,
} cd_profile_parse_flags;

struct cd_parse_error {
	unsigned line, col; /* 0 when unknown */
	char *path;	    /* JSON location, e.g. "file_system.entries[2].access" */
	char *msg;	    /* e.g. "unknown access \"rw\" (expected read, write, deny or none)" */
};
void cd_parse_error_done(struct cd_parse_error *e);

/*
 * Build a profile from a parsed JSON value. 0 on success, -EINVAL with *err
 * filled (caller calls cd_parse_error_done) on any error. Errors name the
 * offending key, its position and what was expected.
 */
int cd_profile_from_json(const struct cd_json *v, cd_profile_parse_flags flags,
			 struct cd_profile **ret, struct cd_parse_error *err);

/*
 * Parse a policy file's bytes (CD_PROFILE_PARSE_FILE|LEGACY with JSON
 * limits 1 MiB, 100,000 values, depth 64). JSON syntax errors are reported
 * in *err with their position too.
 */
int cd_profile_parse_file_text(const char *text, size_t len, const char *origin,
			       struct cd_profile **ret, struct cd_parse_error *err);

struct cd_profile *cd_profile_free(struct cd_profile *p);
/*
 * Whether binding p needs a cwd: a :workspace_roots entry (which falls back
 * to it, reference 3.3) or a relative glob_pattern (which hangs off it).
 */
bool cd_profile_depends_on_cwd(const struct cd_profile *p);
struct cd_profile *cd_profile_dup(const struct cd_profile *p);

/*
 * Whether a --profile argument names a file (it has a '/' or ends in
 * ".json") rather than a profile NAME, on every front end.
 */
bool cd_profile_is_file_arg(const char *arg);

/* Append an entry (copies strings). Used by CLI options (--allow-read ...). */
void cd_profile_add_entry(struct cd_profile *p, const struct cd_fs_entry *e);

/*
 * Parse a CLI symbolic-or-absolute path into an entry: "/abs/path",
 * ":workspace_roots", ":workspace_roots/sub/dir", ":tmpdir", ":slash_tmp",
 * ":root", ":minimal". -EINVAL with *reterr static message otherwise.
 */
int cd_entry_from_cli(const char *arg, enum cd_access access, struct cd_fs_entry *ret,
		      const char **reterr);
void cd_fs_entry_done(struct cd_fs_entry *e);

/* Vocabulary tables: wire names. */
const char *cd_access_name(enum cd_access a);		  /* "read", "write", "deny" */
const char *cd_network_name(enum cd_network n);		  /* "restricted", "enabled", "managed" */
const char *cd_profile_type_name(enum cd_profile_type t); /* "managed", "disabled", "external" */
const char *cd_special_name(enum cd_special s); /* "root", "minimal", "project_roots", ... */
/* The symbolic CLI spelling: ":root", ":workspace_roots", ... */
const char *cd_special_token(enum cd_special s);
int cd_access_from_name(const char *s);	 /* "none" is deny; -EINVAL if unknown */
int cd_network_from_name(const char *s); /* -EINVAL if unknown */
