/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The front matter of a SKILL.md, as capabilities/discoverV2 reads it: the
 * block between a first line "---" and the next "---" line, a YAML mapping
 * of which name, description and metadata.short-description are kept.
 *
 * Only a strict subset of YAML is read: block mappings (top level, and one
 * level below a key), plain scalars (continued on more indented lines),
 * single- and double-quoted scalars on one line, literal and folded block
 * scalars, simple flow sequences of plain words for keys that are not kept,
 * and comments. Anything else (flow mappings, anchors, aliases, tags,
 * multi-line quoted scalars, deeper nesting, tabs as indentation) is
 * CD_SKILLMD_UNSUPPORTED, never guessed: the caller reports it rather than
 * answer differently from a full YAML reader.
 */

#include <stddef.h>

enum {
	CD_SKILLMD_OK = 0,
	CD_SKILLMD_INVALID = -1,     /* the Codex binary refuses it too (why says how) */
	CD_SKILLMD_UNSUPPORTED = -2, /* outside the subset (why says where) */
};

struct cd_skillmd {
	char *name;		 /* whitespace runs collapsed; the default when absent */
	char *description;	 /* whitespace runs collapsed; never empty */
	char *short_description; /* NULL when absent or empty */
};

/*
 * Parse contents (len bytes, UTF-8). default_name is the SKILL.md's
 * directory name, used when the front matter names none (its whitespace
 * runs collapsed; "skill" when that leaves nothing). On success fills *out
 * (free with cd_skillmd_done); otherwise *why is a static message.
 */
int cd_skillmd_parse(const char *contents, size_t len, const char *default_name,
		     struct cd_skillmd *out, const char **why);
void cd_skillmd_done(struct cd_skillmd *m);

/* The maximum length of a name, in characters (Unicode scalar values). */
#define CD_SKILLMD_MAX_NAME 64

enum {
	CD_SKILLMD_NS_SKIP = 1, /* a manifest the binary skips: look further up */
};

/*
 * The namespace a plugin manifest (.codex-plugin/plugin.json and its
 * siblings) gives the skills below its plugin directory, whose name is
 * dir_name: its "name" when that holds more than white space, dir_name when
 * it is absent or only white space (as Rust's str::trim sees it). On
 * CD_SKILLMD_OK, *ns is allocated. A "name" of another type is
 * CD_SKILLMD_NS_SKIP (the binary skips that manifest and uses the next one
 * above). Contents that are not one JSON object cordon parses are
 * CD_SKILLMD_UNSUPPORTED (serde reads some of them differently: an array as
 * a struct, duplicate keys it ignores), *why saying so.
 */
int cd_skillmd_namespace(const char *contents, size_t len, const char *dir_name, char **ns,
			 const char **why);

/*
 * The dependencies and policy of an agents/openai.yaml beside a SKILL.md,
 * as the released Codex 0.169.0 reads them: on CD_SKILLMD_OK, *deps is
 * {"tools":[{type,value,description,transport,command,url,oauthCallbackPort}]}
 * or NULL (no tool with a type and a value: null), *policy is
 * {"allowImplicitInvocation":B|null,"products":[...]} or NULL, as JSON
 * text (free both). CD_SKILLMD_INVALID: the binary gives null for both
 * (a section of another type, a repeated key, a value of another type, an
 * unknown product). Only a strict YAML subset is read (block mappings and
 * sequences, one-line plain and quoted scalars, [] {} and flow lists of
 * products, comments); anything else is CD_SKILLMD_UNSUPPORTED.
 */
int cd_skillmd_agents(const char *contents, size_t len, char **deps, char **policy,
		      const char **why);
