/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Installed plugins in $CODEX_HOME/plugins/cache, as capabilities/discoverV2
 * lists them (the released Codex 0.169.0, probed side by side): the names
 * of a package's directories (cache/MARKETPLACE/NAME/VERSION), the version
 * chosen among several, the remote-install metadata file and the display
 * name a manifest gives. OS-free: the caller reads the files.
 */

#include <stdbool.h>
#include <stddef.h>

/* The remote-install metadata file in a package's directory, and its limits. */
#define CD_PLUGIN_REMOTE_FILE	  ".codex-remote-plugin-install.json"
#define CD_PLUGIN_REMOTE_MAX	  (16 * 1024) /* bytes of the file */
#define CD_PLUGIN_REMOTE_ID_MAX	  1024	      /* bytes of the id, trimmed */
#define CD_PLUGIN_VERSION_DEFAULT "local"     /* chosen whenever present */

/*
 * A marketplace or plugin directory name the binary lists: ASCII letters,
 * digits, '-', '_' and '.', not empty, with no '.' first or last and no "..".
 */
bool cd_plugin_name_ok(const char *s);

/* A version directory name: not empty, not "." or "..", of ASCII letters, digits, . + _ -. */
bool cd_plugin_version_ok(const char *s);

/*
 * The order of two version names: by Semantic Versioning 2.0.0 precedence
 * (build metadata compared last, as Rust's semver crate orders it) when both
 * parse as versions, bytewise otherwise. <0, 0, >0.
 */
int cd_plugin_version_cmp(const char *a, const char *b);

/*
 * The active version among n valid names: "local" when present, else the
 * greatest by cd_plugin_version_cmp; NULL when n is 0.
 */
const char *cd_plugin_version_pick(const char *const *v, size_t n);

enum {
	CD_PLUGIN_OK = 0,
	CD_PLUGIN_INVALID = -1,	    /* the binary refuses it too (why says how) */
	CD_PLUGIN_UNSUPPORTED = -2, /* cordon cannot tell what the binary does (why) */
};

/*
 * The remote plugin id of a remote-install metadata file's contents (len
 * bytes, at most CD_PLUGIN_REMOTE_MAX): {"schema_version": 1,
 * "remote_plugin_id": S} (or the two as an array, as serde reads a
 * struct), other keys ignored; S with white space trimmed, not empty, at
 * most CD_PLUGIN_REMOTE_ID_MAX bytes. *id is allocated on CD_PLUGIN_OK.
 * Duplicate keys are CD_PLUGIN_UNSUPPORTED (serde takes some of them).
 */
int cd_plugin_remote_id(const char *s, size_t len, char **id, const char **why);

/*
 * The display name of an installed plugin from its manifest (len bytes):
 * interface.displayName trimmed when that leaves text, else "name" as it is
 * when it holds more than white space, else dir_name (the version
 * directory's name). CD_PLUGIN_INVALID when the binary leaves the plugin
 * out: not JSON, "name" not a string, "apps" neither a string nor null,
 * "interface" not an object or null, displayName neither a string nor null.
 * A manifest whose keys repeat, or that is an array, is CD_PLUGIN_UNSUPPORTED.
 */
int cd_plugin_display_name(const char *s, size_t len, const char *dir_name, char **out,
			   const char **why);
