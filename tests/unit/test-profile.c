/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Permission profiles: every accepted wire, policy-file and legacy form
 * checked field by field, and every refusal checked for its message, its
 * position and its JSON location.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/profile.h"
#include "core/util.h"

#ifndef CD_TEST_POLICYDIR
#error "CD_TEST_POLICYDIR must name the policies directory"
#endif

/* ---- helpers ------------------------------------------------------------ */

static struct cd_profile *prof;
static struct cd_parse_error perr;

static void teardown(void)
{
	prof = cd_profile_free(prof);
	cd_parse_error_done(&perr);
}

/* Parse JSON text and convert with flags; the JSON itself must be valid. */
static int convert(const char *text, cd_profile_parse_flags flags)
{
	struct cd_json *v = NULL;
	struct cd_json_error jerr;
	int r = cd_json_parse(text, strlen(text), NULL, &v, &jerr);
	ck_assert_msg(r == 0, "test JSON invalid at %u:%u: %s", jerr.line, jerr.col, jerr.msg);
	prof = cd_profile_free(prof);
	cd_parse_error_done(&perr);
	r = cd_profile_from_json(v, flags, &prof, &perr);
	cd_json_free(v);
	return r;
}

static void wire_ok(const char *text)
{
	int r = convert(text, CD_PROFILE_PARSE_WIRE);
	ck_assert_msg(r == 0, "refused: %u:%u %s: %s", perr.line, perr.col, perr.path, perr.msg);
	ck_assert_ptr_nonnull(prof);
	ck_assert_str_eq(prof->origin, "wire");
	ck_assert_uint_eq(prof->version, 0);
}

static void file_ok(const char *text)
{
	prof = cd_profile_free(prof);
	cd_parse_error_done(&perr);
	int r = cd_profile_parse_file_text(text, strlen(text), "test.json", &prof, &perr);
	ck_assert_msg(r == 0, "refused: %u:%u %s: %s", perr.line, perr.col, perr.path, perr.msg);
	ck_assert_ptr_nonnull(prof);
	ck_assert_str_eq(prof->origin, "test.json");
	ck_assert_uint_eq(prof->version, 1);
}

static void check_entry(size_t i, enum cd_entry_kind kind, enum cd_special special,
			const char *path, const char *subpath, enum cd_access access)
{
	ck_assert_uint_lt(i, prof->n_entries);
	const struct cd_fs_entry *e = &prof->entries[i];
	ck_assert_int_eq(e->kind, kind);
	if (kind == CD_ENTRY_SPECIAL)
		ck_assert_int_eq(e->special, special);
	if (path)
		ck_assert_str_eq(e->path, path);
	else
		ck_assert_ptr_null(e->path);
	if (subpath)
		ck_assert_str_eq(e->subpath, subpath);
	else
		ck_assert_ptr_null(e->subpath);
	ck_assert_int_eq(e->access, access);
}

static void check_pos(size_t i, unsigned line, unsigned col)
{
	ck_assert_uint_eq(prof->entries[i].line, line);
	ck_assert_uint_eq(prof->entries[i].col, col);
}

/* Column (1-based) of the first occurrence of needle in a one-line text. */
static unsigned col_of(const char *text, const char *needle)
{
	const char *p = strstr(text, needle);
	ck_assert_msg(p, "needle '%s' not in '%s'", needle, text);
	return (unsigned)(p - text) + 1;
}

#define SP CD_ENTRY_SPECIAL
#define PA CD_ENTRY_PATH
#define GL CD_ENTRY_GLOB
#define R  CD_ACCESS_READ
#define W  CD_ACCESS_WRITE
#define D  CD_ACCESS_DENY

/* ---- accepted: wire ----------------------------------------------------- */

START_TEST(test_wire_managed_restricted)
{
	const char *t =
		"{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\",\"entries\":["
		/* as Codex: dot segments in the URI removed lexically */
		"{\"path\":{\"type\":\"path\",\"path\":\"file:///y/%2e%2e/x/.\"},\"access\":"
		"\"read\"},"
		"{\"path\":{\"type\":\"glob_pattern\",\"pattern\":\"**/"
		"*.env\"},\"access\":\"deny\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"project_roots\",\"subpath\":"
		"\".git\"}},\"access\":\"read\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},\"access\":"
		"\"write\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"minimal\"}},\"access\":"
		"\"none\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"tmpdir\"}},\"access\":"
		"\"write\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"slash_tmp\"}},\"access\":"
		"\"write\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"project_roots\"}},"
		"\"access\":"
		"\"write\"}"
		"],\"glob_scan_max_depth\":3},\"network\":\"restricted\"}";
	wire_ok(t);
	ck_assert_int_eq(prof->type, CD_PROFILE_MANAGED);
	ck_assert(!prof->fs_unrestricted);
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);
	ck_assert_uint_eq(prof->glob_scan_max_depth, 3);
	ck_assert_ptr_null(prof->description);
	ck_assert_uint_eq(prof->n_entries, 8);
	check_entry(0, PA, 0, "/x", NULL, R);
	check_entry(1, GL, 0, "**/*.env", NULL, D);
	check_entry(2, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".git", R);
	check_entry(3, SP, CD_SPECIAL_ROOT, NULL, NULL, W);
	check_entry(4, SP, CD_SPECIAL_MINIMAL, NULL, NULL, D);
	check_entry(5, SP, CD_SPECIAL_TMPDIR, NULL, NULL, W);
	check_entry(6, SP, CD_SPECIAL_SLASH_TMP, NULL, NULL, W);
	check_entry(7, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, NULL, W);
	/* Each entry records where its object starts. */
	check_pos(0, 1, col_of(t, "{\"path\":{\"type\":\"path\""));
	check_pos(1, 1, col_of(t, "{\"path\":{\"type\":\"glob"));
}
END_TEST

START_TEST(test_wire_other_types)
{
	wire_ok("{\"type\":\"managed\",\"file_system\":{\"type\":\"unrestricted\"},"
		"\"network\":\"enabled\"}");
	ck_assert_int_eq(prof->type, CD_PROFILE_MANAGED);
	ck_assert(prof->fs_unrestricted);
	ck_assert_int_eq(prof->network, CD_NET_ENABLED);
	ck_assert_uint_eq(prof->n_entries, 0);

	wire_ok("{\"type\":\"disabled\"}");
	ck_assert_int_eq(prof->type, CD_PROFILE_DISABLED);
	ck_assert_int_eq(prof->network, CD_NET_ENABLED);

	wire_ok("{\"type\":\"external\",\"network\":\"restricted\"}");
	ck_assert_int_eq(prof->type, CD_PROFILE_EXTERNAL);
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);
	wire_ok("{\"type\":\"external\",\"network\":\"enabled\"}");
	ck_assert_int_eq(prof->network, CD_NET_ENABLED);

	/* Empty entries are fine (deny everything). */
	wire_ok("{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\",\"entries\":[]},"
		"\"network\":\"restricted\"}");
	ck_assert_uint_eq(prof->n_entries, 0);
	ck_assert_uint_eq(prof->glob_scan_max_depth, 0);
}
END_TEST

START_TEST(test_wire_ignores_unknown_keys)
{
	wire_ok("{\"type\":\"managed\",\"x\":1,\"version\":\"whatever\",\"file_system\":"
		"{\"type\":\"restricted\",\"y\":[],\"entries\":[{\"z\":null,\"path\":{\"type\":"
		"\"special\",\"w\":true,\"value\":{\"kind\":\"root\",\"subpath\":\"ignored\",\"v\":"
		"{}}},\"access\":\"read\"}]},\"network\":\"restricted\"}");
	ck_assert_uint_eq(prof->n_entries, 1);
	check_entry(0, SP, CD_SPECIAL_ROOT, NULL, NULL, R);
}
END_TEST

START_TEST(test_wire_special_forms)
{
	wire_ok("{\"type\":\"managed\",\"network\":\"restricted\",\"file_system\":{\"type\":"
		"\"restricted\",\"entries\":["
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"current_working_directory\","
		"\"subpath\":\"a//b/\"}},\"access\":\"write\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"project_roots\",\"subpath\":"
		"null}},\"access\":\"read\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"future_kind\",\"extra\":1}},"
		"\"access\":\"read\"},"
		"{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"unknown\",\"path\":\":tok\","
		"\"subpath\":\"x/y\"}},\"access\":\"deny\"},"
		"{\"path\":{\"type\":\"path\",\"path\":\"file:///a%20b/c/\"},\"access\":\"read\"},"
		"{\"path\":{\"type\":\"path\",\"path\":\"file://localhost/"
		"srv\"},\"access\":\"read\"}"
		"]}}");
	ck_assert_uint_eq(prof->n_entries, 6);
	check_entry(0, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, "a/b", W);
	check_entry(1, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, NULL, R);
	check_entry(2, SP, CD_SPECIAL_UNKNOWN, ":future_kind", NULL, R);
	check_entry(3, SP, CD_SPECIAL_UNKNOWN, ":tok", "x/y", D);
	check_entry(4, PA, 0, "/a b/c", NULL, R);
	check_entry(5, PA, 0, "/srv", NULL, R);
}
END_TEST

/* ---- accepted: files ---------------------------------------------------- */

START_TEST(test_file_forms)
{
	const char *t = "{\n"
			"  \"version\": 1,\n"
			"  \"description\": \"my policy\",\n"
			"  \"type\": \"managed\",\n"
			"  \"file_system\": {\n"
			"    \"type\": \"restricted\",\n"
			"    \"entries\": [\n"
			"      {\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"root\"}},"
			" \"access\": \"read\"}\n"
			"    ]\n"
			"  },\n"
			"  \"network\": \"managed\"\n"
			"}\n";
	file_ok(t);
	ck_assert_str_eq(prof->description, "my policy");
	ck_assert_int_eq(prof->network, CD_NET_MANAGED);
	ck_assert_uint_eq(prof->n_entries, 1);
	check_entry(0, SP, CD_SPECIAL_ROOT, NULL, NULL, R);
	check_pos(0, 8, 7);

	/* The network object: the rules of cordon's own proxy. */
	file_ok("{\"version\":1,\"type\":\"managed\",\"file_system\":{\"type\":"
		"\"unrestricted\"},\"network\":{\"mode\":\"managed\",\"allow_domains\":["
		"\"**.Example.COM\",\"*\"],\"deny_domains\":[\"bad.example.com\"],"
		"\"allow_cidrs\":[\"10.0.0.0/8\"],\"proxy_mode\":\"limited\"}}");
	ck_assert_int_eq(prof->network, CD_NET_MANAGED);
	ck_assert_ptr_nonnull(prof->netpol);
	ck_assert_uint_eq(prof->netpol->n_allow, 2);
	ck_assert_str_eq(prof->netpol->allow[0], "**.example.com");
	ck_assert_str_eq(prof->netpol->deny[0], "bad.example.com");
	ck_assert_uint_eq(prof->netpol->n_cidrs, 1);
	ck_assert_int_eq(prof->netpol->mode, CD_NETMODE_LIMITED);
	{
		struct cd_profile *d = cd_profile_dup(prof);
		ck_assert_ptr_nonnull(d->netpol);
		ck_assert_ptr_ne(d->netpol, prof->netpol);
		ck_assert_str_eq(d->netpol->allow[1], "*");
		ck_assert_int_eq(d->netpol->mode, CD_NETMODE_LIMITED);
		cd_profile_free(d);
	}
	file_ok("{\"version\":1,\"type\":\"managed\",\"file_system\":{\"type\":"
		"\"unrestricted\"},\"network\":{\"mode\":\"managed\"}}");
	ck_assert_ptr_nonnull(prof->netpol);
	ck_assert_uint_eq(prof->netpol->n_allow, 0);
	ck_assert_int_eq(prof->netpol->mode, CD_NETMODE_FULL);
	ck_assert(!prof->netpol->socks5); /* off unless asked for */
	file_ok("{\"version\":1,\"type\":\"managed\",\"file_system\":{\"type\":"
		"\"unrestricted\"},\"network\":{\"mode\":\"managed\",\"socks5\":true}}");
	ck_assert(prof->netpol->socks5);
	{
		struct cd_profile *d = cd_profile_dup(prof);
		ck_assert(d->netpol->socks5);
		cd_profile_free(d);
	}

	file_ok("{\"version\":1,\"type\":\"disabled\"}");
	ck_assert_int_eq(prof->type, CD_PROFILE_DISABLED);
	ck_assert_ptr_null(prof->description);
	file_ok("{\"type\":\"external\",\"network\":\"enabled\",\"version\":1,\"description\":"
		"\"\"}");
	ck_assert_int_eq(prof->type, CD_PROFILE_EXTERNAL);
	ck_assert_str_eq(prof->description, "");
	ck_assert(!cd_limits_any(&prof->limits));

	/* Limits in each form, the legacy ones included. */
	file_ok("{\"version\":1,\"type\":\"disabled\",\"limits\":{\"memory\":\"1G\","
		"\"tasks\":64,\"cpu\":0.5,\"private_tmp\":\"64M\"}}");
	ck_assert_uint_eq(prof->limits.v[CD_LIMIT_MEMORY], 1024ULL * 1024 * 1024);
	ck_assert_uint_eq(prof->limits.v[CD_LIMIT_TASKS], 64);
	ck_assert_uint_eq(prof->limits.v[CD_LIMIT_CPU], 500);
	ck_assert_uint_eq(prof->limits.v[CD_LIMIT_PRIVATE_TMP], 64ULL * 1024 * 1024);
	file_ok("{\"version\":1,\"type\":\"workspace-write\",\"limits\":{\"open_files\":"
		"128}}");
	ck_assert_uint_eq(prof->limits.v[CD_LIMIT_OPEN_FILES], 128);
	file_ok("{\"version\":1,\"type\":\"read-only\",\"limits\":{}}");
	ck_assert(!cd_limits_any(&prof->limits));
	wire_ok("{\"type\":\"external\",\"network\":\"enabled\",\"limits\":{\"core\":0}}");
	ck_assert(cd_limits_has(&prof->limits, CD_LIMIT_CORE));
	struct cd_profile *d = cd_profile_dup(prof);
	ck_assert(cd_limits_has(&d->limits, CD_LIMIT_CORE));
	cd_profile_free(d);
}
END_TEST

/* ---- accepted: legacy SandboxPolicy ------------------------------------- */

START_TEST(test_legacy_read_only)
{
	ck_assert_int_eq(convert("{\"type\":\"read-only\"}",
				 CD_PROFILE_PARSE_WIRE | CD_PROFILE_PARSE_LEGACY),
			 0);
	ck_assert_int_eq(prof->type, CD_PROFILE_MANAGED);
	ck_assert(!prof->fs_unrestricted);
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);
	ck_assert_uint_eq(prof->n_entries, 1);
	check_entry(0, SP, CD_SPECIAL_ROOT, NULL, NULL, R);

	ck_assert_int_eq(convert("{\"type\":\"read-only\",\"network_access\":true}",
				 CD_PROFILE_PARSE_WIRE | CD_PROFILE_PARSE_LEGACY),
			 0);
	ck_assert_int_eq(prof->network, CD_NET_ENABLED);
	file_ok("{\"version\":1,\"type\":\"read-only\",\"network_access\":false}");
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);
}
END_TEST

START_TEST(test_legacy_workspace_write)
{
	ck_assert_int_eq(convert("{\"type\":\"workspace-write\"}",
				 CD_PROFILE_PARSE_WIRE | CD_PROFILE_PARSE_LEGACY),
			 0);
	ck_assert_int_eq(prof->type, CD_PROFILE_MANAGED);
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);
	ck_assert_uint_eq(prof->n_entries, 7);
	check_entry(0, SP, CD_SPECIAL_ROOT, NULL, NULL, R);
	check_entry(1, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, NULL, W);
	check_entry(2, SP, CD_SPECIAL_SLASH_TMP, NULL, NULL, W);
	check_entry(3, SP, CD_SPECIAL_TMPDIR, NULL, NULL, W);
	check_entry(4, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".git", R);
	check_entry(5, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".agents", R);
	check_entry(6, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".codex", R);

	const char *t = "{\"version\":1,\"type\":\"workspace-write\",\"writable_roots\":"
			"[\"file:///data/a\",\"/data//b/./c/../d/\"],\"network_access\":true,"
			"\"exclude_tmpdir_env_var\":true,\"exclude_slash_tmp\":true}";
	file_ok(t);
	ck_assert_int_eq(prof->network, CD_NET_ENABLED);
	ck_assert_uint_eq(prof->n_entries, 7);
	check_entry(0, SP, CD_SPECIAL_ROOT, NULL, NULL, R);
	check_entry(1, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, NULL, W);
	check_entry(2, PA, 0, "/data/a", NULL, W);
	check_entry(3, PA, 0, "/data/b/c/../d", NULL, W);
	check_entry(4, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".git", R);
	check_pos(2, 1, col_of(t, "\"file:///data/a\""));

	file_ok("{\"version\":1,\"type\":\"workspace-write\",\"exclude_slash_tmp\":true}");
	ck_assert_uint_eq(prof->n_entries, 6);
	check_entry(2, SP, CD_SPECIAL_TMPDIR, NULL, NULL, W);
	file_ok("{\"version\":1,\"type\":\"workspace-write\",\"exclude_tmpdir_env_var\":true}");
	ck_assert_uint_eq(prof->n_entries, 6);
	check_entry(2, SP, CD_SPECIAL_SLASH_TMP, NULL, NULL, W);
	check_entry(3, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".git", R);
}
END_TEST

START_TEST(test_legacy_other)
{
	cd_profile_parse_flags f = CD_PROFILE_PARSE_WIRE | CD_PROFILE_PARSE_LEGACY;
	ck_assert_int_eq(convert("{\"type\":\"danger-full-access\"}", f), 0);
	ck_assert_int_eq(prof->type, CD_PROFILE_DISABLED);
	ck_assert_int_eq(prof->network, CD_NET_ENABLED);
	ck_assert_int_eq(
		convert("{\"type\":\"external-sandbox\",\"network_access\":\"enabled\"}", f), 0);
	ck_assert_int_eq(prof->type, CD_PROFILE_EXTERNAL);
	ck_assert_int_eq(prof->network, CD_NET_ENABLED);
	ck_assert_int_eq(
		convert("{\"type\":\"external-sandbox\",\"network_access\":\"restricted\"}", f), 0);
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);
	ck_assert_int_eq(convert("{\"type\":\"external-sandbox\"}", f), 0);
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);

	/* Without the legacy flag these are unknown types. */
	ck_assert_int_eq(convert("{\"type\":\"read-only\"}", CD_PROFILE_PARSE_WIRE), -EINVAL);
	ck_assert_ptr_nonnull(strstr(perr.msg, "unknown profile type \"read-only\""));
	ck_assert_ptr_null(prof);
}
END_TEST

/* ---- refusals ----------------------------------------------------------- */

struct refusal {
	cd_profile_parse_flags flags; /* 0: cd_profile_parse_file_text */
	const char *text;
	const char *at; /* first occurrence gives the column (line 1) */
	const char *path;
	const char *msg;
};

#define FILE_ 0
#define WIRE_ CD_PROFILE_PARSE_WIRE
/* A managed file profile around an entries array body. */
#define FM(entries)                                                                        \
	"{\"version\":1,\"type\":\"managed\",\"network\":\"restricted\",\"file_system\":{" \
	"\"type\":"                                                                        \
	"\"restricted\",\"entries\":[" entries "]}}"
#define WM(entries)                                                                   \
	"{\"type\":\"managed\",\"network\":\"restricted\",\"file_system\":{\"type\":" \
	"\"restricted\",\"entries\":[" entries "]}}"
#define SPECIAL(v) "{\"path\":{\"type\":\"special\",\"value\":" v "},\"access\":\"read\"}"

static const struct refusal refusals[] = {
	/* Top level. */
	{ FILE_, "[]", "[", "", "expected an object for the profile, got array" },
	{ WIRE_, "\"managed\"", "\"", "", "expected an object for the profile, got string" },
	{ FILE_, "{\"version\":1}", "{", "type", "missing required key \"type\"" },
	{ FILE_, "{\"version\":1,\"type\":7}", "7", "type",
	  "expected a string for \"type\", got number" },
	{ FILE_, "{\"version\":1,\"type\":\"managed2\"}", "\"managed2\"", "type",
	  "unknown profile type \"managed2\"" },
	{ WIRE_, "{\"type\":\"danger-full-access\"}", "\"danger", "type",
	  "(expected managed, disabled or external)" },
	{ FILE_, "{\"version\":1,\"type\":\"disabled\",\"extra\":1}", "\"extra\"", "extra",
	  "unknown key \"extra\" (expected one of: type, version, description, limits)" },
	{ FILE_, "{\"version\":1,\"type\":\"disabled\",\"network\":\"enabled\"}", "\"network\"",
	  "network", "unknown key \"network\"" },
	/* Version. */
	{ FILE_, "{\"type\":\"disabled\"}", "{", "version", "missing required key \"version\"" },
	{ FILE_, "{\"type\":\"disabled\",\"version\":2}", "2", "version",
	  "unsupported policy version 2 (this cordon reads version 1)" },
	{ FILE_, "{\"type\":\"disabled\",\"version\":0}", "0", "version",
	  "unsupported policy version 0" },
	{ FILE_, "{\"type\":\"disabled\",\"version\":\"1\"}", "\"1\"", "version",
	  "expected an integer for \"version\", got string" },
	{ FILE_, "{\"type\":\"disabled\",\"version\":1.0}", "1.0", "version",
	  "expected an integer for \"version\", got 1.0" },
	{ FILE_, "{\"type\":\"disabled\",\"version\":null}", "null", "version",
	  "expected an integer for \"version\", got null" },
	{ FILE_, "{\"type\":\"disabled\",\"version\":1,\"description\":5}", "5", "description",
	  "expected a string for \"description\", got number" },
	/* Managed and external. */
	{ FILE_, "{\"version\":1,\"type\":\"managed\",\"file_system\":{\"type\":\"unrestricted\"}}",
	  "{", "network", "missing required key \"network\"" },
	{ WIRE_, "{\"type\":\"managed\",\"network\":\"enabled\"}", "{", "file_system",
	  "missing required key \"file_system\"" },
	{ WIRE_, "{\"type\":\"external\"}", "{", "network", "missing required key \"network\"" },
	{ WIRE_, "{\"type\":\"external\",\"network\":true}", "true", "network",
	  "expected a string for \"network\", got boolean" },
	{ WIRE_, "{\"type\":\"external\",\"network\":\"open\"}", "\"open\"", "network",
	  "unknown network mode \"open\" (expected restricted or enabled)" },
/* The network object: policy files only, strict. */
#define NETOBJ(x)                                                                          \
	"{\"version\":1,\"type\":\"managed\",\"file_system\":{\"type\":\"unrestricted\"}," \
	"\"network\":{" x "}}"
	{ FILE_, NETOBJ("\"allow_domains\":[]"), "{\"allow", "network.mode",
	  "missing required key \"mode\"" },
	{ FILE_, NETOBJ("\"mode\":\"enabled\""), "\"enabled\"", "network.mode",
	  "the network object is for a managed network" },
	{ FILE_, NETOBJ("\"mode\":\"managed\",\"socks\":true"), "\"socks\"", "network.socks",
	  "unknown key \"socks\" (expected one of: mode, allow_domains, deny_domains, "
	  "allow_cidrs, proxy_mode, socks5)" },
	{ FILE_, NETOBJ("\"mode\":\"managed\",\"socks5\":\"yes\""), "\"yes\"", "network.socks5",
	  "expected a boolean for \"socks5\", got string" },
	{ FILE_, NETOBJ("\"mode\":\"managed\",\"proxy_mode\":\"limited\",\"socks5\":true"), "true",
	  "network.socks5", "SOCKS5 carries only tunnels, which proxy mode limited refuses" },
	{ FILE_, NETOBJ("\"mode\":\"managed\",\"allow_domains\":[\"ok.test\",\"a..b\"]"),
	  "\"a..b\"", "network.allow_domains[1]", "domain pattern \"a..b\": " },
	{ FILE_, NETOBJ("\"mode\":\"managed\",\"deny_domains\":\"x.test\""), "\"x.test\"",
	  "network.deny_domains", "expected an array for \"deny_domains\", got string" },
	{ FILE_, NETOBJ("\"mode\":\"managed\",\"allow_cidrs\":[\"10.0.0.1/8\"]"), "\"10.0.0.1/8\"",
	  "network.allow_cidrs[0]", "CIDR \"10.0.0.1/8\": " },
	{ FILE_, NETOBJ("\"mode\":\"managed\",\"proxy_mode\":\"ro\""), "\"ro\"",
	  "network.proxy_mode", "unknown proxy mode \"ro\" (expected full or limited)" },
	{ WIRE_,
	  "{\"type\":\"managed\",\"file_system\":{\"type\":\"unrestricted\"},"
	  "\"network\":{\"mode\":\"managed\"}}",
	  "{\"mode\"", "network", "expected a string for \"network\", got object" },
#undef NETOBJ
	/* "managed" networking is a policy-file (CLI) notion only. */
	{ WIRE_, "{\"type\":\"external\",\"network\":\"managed\"}", "\"managed\"}", "network",
	  "unknown network mode \"managed\"" },
	{ FILE_, "{\"version\":1,\"type\":\"external\",\"network\":\"x\"}", "\"x\"", "network",
	  "(expected restricted, enabled or managed)" },
	{ WIRE_, "{\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":\"restricted\"}",
	  "\"restricted\"", "file_system", "expected an object for \"file_system\", got string" },
	{ WIRE_, "{\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{}}", "{}",
	  "file_system.type", "missing required key \"type\"" },
	{ WIRE_,
	  "{\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{\"type\":\"partial\"}}",
	  "\"partial\"", "file_system.type", "unknown file_system type \"partial\"" },
	{ WIRE_,
	  "{\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{\"type\":\"restricted\"}"
	  "}",
	  "{\"type\":\"restricted\"", "file_system.entries", "missing required key \"entries\"" },
	{ WIRE_,
	  "{\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{\"type\":\"restricted\","
	  "\"entries\":{}}}",
	  "{}}", "file_system.entries", "expected an array for \"entries\", got object" },
	{ FILE_,
	  "{\"version\":1,\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{\"type\":"
	  "\"unrestricted\",\"entries\":[]}}",
	  "\"entries\"", "file_system.entries", "unknown key \"entries\" (expected one of: type)" },
	{ FILE_,
	  "{\"version\":1,\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{\"type\":"
	  "\"restricted\",\"entries\":[],\"glob_depth\":2}}",
	  "\"glob_depth\"", "file_system.glob_depth", "unknown key \"glob_depth\"" },
	{ WIRE_,
	  "{\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{\"type\":\"restricted\","
	  "\"entries\":[],\"glob_scan_max_depth\":0}}",
	  "0}", "file_system.glob_scan_max_depth",
	  "glob_scan_max_depth must be an integer of at least 1, got 0" },
	{ WIRE_,
	  "{\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{\"type\":\"restricted\","
	  "\"entries\":[],\"glob_scan_max_depth\":2.5}}",
	  "2.5", "file_system.glob_scan_max_depth", "got 2.5" },
	{ WIRE_,
	  "{\"type\":\"managed\",\"network\":\"enabled\",\"file_system\":{\"type\":\"restricted\","
	  "\"entries\":[],\"glob_scan_max_depth\":\"3\"}}",
	  "\"3\"", "file_system.glob_scan_max_depth",
	  "expected an integer for \"glob_scan_max_depth\", got string" },
	/* Entries. */
	{ WIRE_, WM("1"), "1]", "file_system.entries[0]",
	  "expected an object for \"entries[0]\", got number" },
	{ WIRE_, WM("{\"access\":\"read\"}"), "{\"access\"", "file_system.entries[0].path",
	  "missing required key \"path\"" },
	{ WIRE_, WM("{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}}}"), "{\"path\"",
	  "file_system.entries[0].access", "missing required key \"access\"" },
	{ WIRE_,
	  WM(SPECIAL("{\"kind\":\"root\"}") "," SPECIAL(
		  "{\"kind\":\"tmpdir\"}") ","
					   "{\"path\":{\"type\":\"special\",\"value\":{\"kind\":"
					   "\"root\"}},\"access\":\"rw\"}"),
	  "\"rw\"", "file_system.entries[2].access",
	  "unknown access \"rw\" (expected read, write, deny or none)" },
	{ WIRE_, WM("{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},\"access\":1}"),
	  "1}", "file_system.entries[0].access", "expected a string for \"access\", got number" },
	{ FILE_,
	  FM("{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},\"access\":\"read\","
	     "\"mode\":1}"),
	  "\"mode\"", "file_system.entries[0].mode",
	  "unknown key \"mode\" (expected one of: path, access)" },
	{ WIRE_, WM("{\"path\":\"file:///x\",\"access\":\"read\"}"), "\"file:///x\"",
	  "file_system.entries[0].path", "expected an object for \"path\", got string" },
	{ WIRE_, WM("{\"path\":{\"path\":\"file:///x\"},\"access\":\"read\"}"), "{\"path\":\"file",
	  "file_system.entries[0].path.type", "missing required key \"type\"" },
	{ WIRE_, WM("{\"path\":{\"type\":\"file\",\"path\":\"file:///x\"},\"access\":\"read\"}"),
	  "\"file\"", "file_system.entries[0].path.type",
	  "unknown path type \"file\" (expected path, glob_pattern or special)" },
	/* Path entries. */
	{ WIRE_, WM("{\"path\":{\"type\":\"path\"},\"access\":\"read\"}"), "{\"type\":\"path\"",
	  "file_system.entries[0].path.path", "missing required key \"path\"" },
	{ WIRE_, WM("{\"path\":{\"type\":\"path\",\"path\":5},\"access\":\"read\"}"), "5}",
	  "file_system.entries[0].path.path", "expected a string for \"path\", got number" },
	{ WIRE_, WM("{\"path\":{\"type\":\"path\",\"path\":\"/etc\"},\"access\":\"read\"}"),
	  "\"/etc\"", "file_system.entries[0].path.path",
	  "expected a file:// URI for \"path\", got the native path \"/etc\"" },
	{ WIRE_, WM("{\"path\":{\"type\":\"path\",\"path\":\"http://h/x\"},\"access\":\"read\"}"),
	  "\"http:", "file_system.entries[0].path.path",
	  "invalid path URI \"http://h/x\": only file:// URIs are accepted" },
	{ WIRE_,
	  WM("{\"path\":{\"type\":\"path\",\"path\":\"file:///a/../b?\"},\"access\":\"read\"}"),
	  "\"file:", "file_system.entries[0].path.path",
	  "invalid path URI \"file:///a/../b?\": URI has a query" },
	{ WIRE_, WM("{\"path\":{\"type\":\"path\",\"path\":\"file:///C:/x\"},\"access\":\"read\"}"),
	  "\"file:", "file_system.entries[0].path.path", "Windows path" },
	{ WIRE_,
	  WM("{\"path\":{\"type\":\"path\",\"path\":\"file:///a\\u0000b\"},\"access\":\"read\"}"),
	  "\"file:", "file_system.entries[0].path.path", "contains a NUL character" },
	{ FILE_,
	  FM("{\"path\":{\"type\":\"path\",\"path\":\"file:///x\",\"glob\":1},\"access\":"
	     "\"read\"}"),
	  "\"glob\"", "file_system.entries[0].path.glob", "unknown key \"glob\"" },
	/* Globs. */
	{ WIRE_,
	  WM("{\"path\":{\"type\":\"glob_pattern\",\"pattern\":\"*.env\"},\"access\":\"write\"}"),
	  "\"write\"", "file_system.entries[0].access", "glob_pattern entries may only deny" },
	{ WIRE_,
	  WM("{\"path\":{\"type\":\"glob_pattern\",\"pattern\":\"*.env\"},\"access\":\"read\"}"),
	  "\"read\"", "file_system.entries[0].access", "glob_pattern entries may only deny" },
	{ WIRE_, WM("{\"path\":{\"type\":\"glob_pattern\"},\"access\":\"deny\"}"),
	  "{\"type\":\"glob", "file_system.entries[0].path.pattern",
	  "missing required key \"pattern\"" },
	{ WIRE_, WM("{\"path\":{\"type\":\"glob_pattern\",\"pattern\":[]},\"access\":\"deny\"}"),
	  "[]}", "file_system.entries[0].path.pattern",
	  "expected a string for \"pattern\", got array" },
	{ WIRE_, WM("{\"path\":{\"type\":\"glob_pattern\",\"pattern\":\"\"},\"access\":\"deny\"}"),
	  "\"\"}", "file_system.entries[0].path.pattern", "glob pattern must not be empty" },
	/* Special paths. */
	{ WIRE_, WM("{\"path\":{\"type\":\"special\"},\"access\":\"read\"}"),
	  "{\"type\":\"special\"", "file_system.entries[0].path.value",
	  "missing required key \"value\"" },
	{ WIRE_, WM(SPECIAL("\"root\"")), "\"root\"", "file_system.entries[0].path.value",
	  "expected an object for \"value\", got string" },
	{ WIRE_, WM(SPECIAL("{}")), "{}", "file_system.entries[0].path.value.kind",
	  "missing required key \"kind\"" },
	{ WIRE_, WM(SPECIAL("{\"kind\":3}")), "3}", "file_system.entries[0].path.value.kind",
	  "expected a string for \"kind\", got number" },
	{ WIRE_, WM(SPECIAL("{\"kind\":\"project_roots\",\"subpath\":\"../x\"}")), "\"../x\"",
	  "file_system.entries[0].path.value.subpath",
	  "invalid subpath \"../x\": subpath must not contain \".\" or \"..\" components" },
	{ WIRE_, WM(SPECIAL("{\"kind\":\"project_roots\",\"subpath\":\"a/./b\"}")), "\"a/./b\"",
	  "file_system.entries[0].path.value.subpath", "must not contain \".\"" },
	{ WIRE_, WM(SPECIAL("{\"kind\":\"project_roots\",\"subpath\":\"/abs\"}")), "\"/abs\"",
	  "file_system.entries[0].path.value.subpath",
	  "invalid subpath \"/abs\": subpath must be relative" },
	{ WIRE_, WM(SPECIAL("{\"kind\":\"project_roots\",\"subpath\":\"\"}")), "\"\"}",
	  "file_system.entries[0].path.value.subpath", "subpath must not be empty" },
	{ WIRE_, WM(SPECIAL("{\"kind\":\"project_roots\",\"subpath\":\"a\\u0000b\"}")), "\"a\\u",
	  "file_system.entries[0].path.value.subpath", "subpath contains a NUL byte" },
	{ WIRE_, WM(SPECIAL("{\"kind\":\"project_roots\",\"subpath\":7}")), "7}",
	  "file_system.entries[0].path.value.subpath",
	  "expected a string for \"subpath\", got number" },
	{ WIRE_, WM(SPECIAL("{\"kind\":\"unknown\"}")), "{\"kind\":\"unknown\"",
	  "file_system.entries[0].path.value.path", "missing required key \"path\"" },
	{ FILE_, FM(SPECIAL("{\"kind\":\"root\",\"subpath\":\"x\"}")), "\"subpath\"",
	  "file_system.entries[0].path.value.subpath",
	  "unknown key \"subpath\" (expected one of: kind)" },
	{ FILE_, FM(SPECIAL("{\"kind\":\"project_root\"}")), "\"project_root\"",
	  "file_system.entries[0].path.value.kind",
	  "unknown special path kind \"project_root\" (expected root, minimal, project_roots" },
	{ FILE_, FM(SPECIAL("{\"kind\":\"project_roots\",\"sub\":\"x\"}")), "\"sub\"",
	  "file_system.entries[0].path.value.sub",
	  "unknown key \"sub\" (expected one of: kind, subpath)" },
	/* Legacy. */
	{ FILE_, "{\"version\":1,\"type\":\"read-only\",\"network_access\":\"yes\"}", "\"yes\"",
	  "network_access", "expected a boolean for \"network_access\", got string" },
	{ FILE_, "{\"version\":1,\"type\":\"read-only\",\"writable_roots\":[]}",
	  "\"writable_roots\"", "writable_roots", "unknown key \"writable_roots\"" },
	{ FILE_, "{\"version\":1,\"type\":\"workspace-write\",\"writable_roots\":\"/x\"}", "\"/x\"",
	  "writable_roots", "expected an array for \"writable_roots\", got string" },
	{ FILE_, "{\"version\":1,\"type\":\"workspace-write\",\"writable_roots\":[\"/a\",1]}", "1]",
	  "writable_roots[1]", "expected a string for \"writable_roots[1]\", got number" },
	{ FILE_, "{\"version\":1,\"type\":\"workspace-write\",\"writable_roots\":[\"rel/x\"]}",
	  "\"rel/x\"", "writable_roots[0]",
	  "invalid path URI \"rel/x\": only file:// URIs are accepted" },
	{ FILE_, "{\"version\":1,\"type\":\"workspace-write\",\"exclude_slash_tmp\":1}", "1}",
	  "exclude_slash_tmp", "expected a boolean for \"exclude_slash_tmp\", got number" },
	{ FILE_, "{\"version\":1,\"type\":\"workspace-write\",\"exclude_tmpdir_env_var\":\"no\"}",
	  "\"no\"", "exclude_tmpdir_env_var", "expected a boolean" },
	{ FILE_, "{\"version\":1,\"type\":\"workspace-write\",\"network_access\":\"enabled\"}",
	  "\"enabled\"", "network_access", "expected a boolean" },
	{ FILE_, "{\"version\":1,\"type\":\"workspace-write\",\"writable_root\":[]}",
	  "\"writable_root\"", "writable_root", "unknown key \"writable_root\"" },
	{ FILE_, "{\"version\":1,\"type\":\"external-sandbox\",\"network_access\":true}", "true",
	  "network_access", "expected a string for \"network_access\", got boolean" },
	{ FILE_, "{\"version\":1,\"type\":\"danger-full-access\",\"x\":true}", "\"x\"", "x",
	  "unknown key \"x\"" },
	/* JSON-level errors reach the caller with their position. */
	{ FILE_, "{\"version\":1,\"type\":\"disabled\",\"type\":\"managed\"}", "\"type\":\"managed",
	  "", "duplicate object key \"type\"" },
	{ FILE_, "{\"version\":1,\"type\":\"disabled\",}", ",}", "", "trailing comma" },
	{ FILE_, "", NULL, "", "empty document" },
	{ FILE_, "{\"version\":1,\"type\":\"dis\xff\"}", "\xff", "", "invalid UTF-8" },
	/* Limits: strict in every mode, positioned at the key or the value. */
	{ FILE_, "{\"version\":1,\"type\":\"disabled\",\"limits\":[]}", "[]", "limits",
	  "expected an object for \"limits\", got array" },
	{ FILE_, "{\"version\":1,\"type\":\"disabled\",\"limits\":{\"memroy\":\"1G\"}}",
	  "\"memroy\"", "limits.memroy", "unknown key \"memroy\"" },
	{ WIRE_, "{\"type\":\"disabled\",\"limits\":{\"memroy\":\"1G\"}}", "\"memroy\"",
	  "limits.memroy", "unknown key \"memroy\"" },
	{ FILE_, "{\"version\":1,\"type\":\"disabled\",\"limits\":{\"tasks\":0}}", "0}",
	  "limits.tasks", "tasks must be from 1 to" },
	{ WIRE_, "{\"type\":\"external\",\"network\":\"enabled\",\"limits\":{\"memory\":\"lots\"}}",
	  "\"lots\"", "limits.memory", "memory: 'lots' is not a size" },
};

START_TEST(test_refusals)
{
	const struct refusal *t = &refusals[_i];
	size_t len = strlen(t->text);
	int r;
	if (t->flags) {
		r = convert(t->text, t->flags);
	} else {
		r = cd_profile_parse_file_text(t->text, len, "bad.json", &prof, &perr);
	}
	ck_assert_msg(r == -EINVAL, "case %d (%s) accepted", _i, t->text);
	ck_assert_ptr_null(prof);
	ck_assert_ptr_nonnull(perr.msg);
	ck_assert_msg(strstr(perr.msg, t->msg), "case %d: message '%s' lacks '%s'", _i, perr.msg,
		      t->msg);
	ck_assert_ptr_nonnull(perr.path);
	ck_assert_msg(cd_streq(perr.path, t->path), "case %d: location '%s', want '%s'", _i,
		      perr.path, t->path);
	ck_assert_uint_eq(perr.line, 1);
	unsigned col = t->at ? col_of(t->text, t->at) : 1;
	ck_assert_msg(perr.col == col, "case %d: column %u, want %u (%s)", _i, perr.col, col,
		      perr.msg);
}
END_TEST

START_TEST(test_refusal_multiline)
{
	const char *t =
		"{\n"
		"  \"version\": 1,\n"
		"  \"type\": \"managed\",\n"
		"  \"network\": \"restricted\",\n"
		"  \"file_system\": {\n"
		"    \"type\": \"restricted\",\n"
		"    \"entries\": [\n"
		"      {\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"root\"}},\n"
		"       \"access\": \"read\", \"acess\": \"write\"}\n"
		"    ]\n"
		"  }\n"
		"}\n";
	ck_assert_int_eq(cd_profile_parse_file_text(t, strlen(t), "x", &prof, &perr), -EINVAL);
	ck_assert_uint_eq(perr.line, 9);
	ck_assert_uint_eq(perr.col, 26);
	ck_assert_str_eq(perr.path, "file_system.entries[0].acess");
	ck_assert_ptr_nonnull(strstr(perr.msg, "unknown key \"acess\""));
}
END_TEST

START_TEST(test_hostile_inputs)
{
	/* Raw NUL bytes. */
	static const char nul[] = "{\"version\":1,\0\"type\":\"disabled\"}";
	ck_assert_int_eq(cd_profile_parse_file_text(nul, sizeof(nul) - 1, "x", &prof, &perr),
			 -EINVAL);
	ck_assert_uint_eq(perr.line, 1);
	ck_assert_uint_eq(perr.col, 14);
	ck_assert_ptr_null(prof);
	cd_parse_error_done(&perr);

	/* A NUL byte inside a key, written as an escape: unknown key in file mode. */
	const char *k = "{\"version\":1,\"type\":\"disabled\",\"ty\\u0000pe\":1}";
	ck_assert_int_eq(cd_profile_parse_file_text(k, strlen(k), "x", &prof, &perr), -EINVAL);
	ck_assert_ptr_nonnull(strstr(perr.msg, "unknown key"));
	cd_parse_error_done(&perr);

	/* Just over 1 MiB of whitespace around a valid profile. */
	size_t big = 1024 * 1024 + 1;
	char *buf = cd_xmalloc(big);
	memset(buf, ' ', big);
	memcpy(buf, "{\"version\":1,\"type\":\"disabled\"}", 31);
	ck_assert_int_eq(cd_profile_parse_file_text(buf, big, "x", &prof, &perr), -EINVAL);
	ck_assert_ptr_nonnull(strstr(perr.msg, "too large"));
	ck_assert_ptr_null(prof);
	cd_parse_error_done(&perr);
	/* Exactly 1 MiB is fine. */
	ck_assert_int_eq(cd_profile_parse_file_text(buf, big - 1, "x", &prof, &perr), 0);
	prof = cd_profile_free(prof);
	free(buf);

	/* Deep nesting is stopped by the parser, not by the stack. */
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"version\":1,\"type\":\"disabled\",\"x\":");
	for (int i = 0; i < 100000; i++)
		cd_strbuf_append_c(&sb, '[');
	ck_assert_int_eq(cd_profile_parse_file_text(sb.buf, sb.len, "x", &prof, &perr), -EINVAL);
	ck_assert_ptr_nonnull(strstr(perr.msg, "nested"));
	cd_strbuf_done(&sb);
	cd_parse_error_done(&perr);

	/* Too many values. */
	cd_strbuf_append(&sb, "{\"version\":1,\"type\":\"disabled\",\"x\":[");
	for (int i = 0; i < 100001; i++)
		cd_strbuf_append(&sb, "0,");
	cd_strbuf_append(&sb, "0]}");
	ck_assert_int_eq(cd_profile_parse_file_text(sb.buf, sb.len, "x", &prof, &perr), -EINVAL);
	ck_assert_ptr_nonnull(strstr(perr.msg, "too many"));
	cd_strbuf_done(&sb);
}
END_TEST

/* ---- shipped policies --------------------------------------------------- */

static struct cd_profile *load_policy(const char *name)
{
	char *path = cd_xasprintf("%s/%s", CD_TEST_POLICYDIR, name);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f, "cannot open %s", path);
	char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf), f);
	ck_assert(feof(f));
	fclose(f);
	struct cd_profile *p = NULL;
	struct cd_parse_error e = { 0 };
	int r = cd_profile_parse_file_text(buf, n, path, &p, &e);
	ck_assert_msg(r == 0, "%s:%u:%u: %s: %s", path, e.line, e.col, e.path, e.msg);
	ck_assert_str_eq(p->origin, path);
	ck_assert_ptr_nonnull(p->description);
	ck_assert_uint_eq(p->version, 1);
	free(path);
	return p;
}

START_TEST(test_policy_files_all_load)
{
	DIR *d = opendir(CD_TEST_POLICYDIR);
	ck_assert_ptr_nonnull(d);
	unsigned n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 5 || !cd_streq(de->d_name + l - 5, ".json"))
			continue;
		cd_profile_free(load_policy(de->d_name));
		n++;
	}
	closedir(d);
	ck_assert_uint_ge(n, 3);
}
END_TEST

START_TEST(test_policy_builtins)
{
	prof = load_policy("read-only.json");
	ck_assert_int_eq(prof->type, CD_PROFILE_MANAGED);
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);
	ck_assert_uint_eq(prof->n_entries, 1);
	check_entry(0, SP, CD_SPECIAL_ROOT, NULL, NULL, R);
	prof = cd_profile_free(prof);

	prof = load_policy("workspace-write.json");
	ck_assert_int_eq(prof->type, CD_PROFILE_MANAGED);
	ck_assert(!prof->fs_unrestricted);
	ck_assert_int_eq(prof->network, CD_NET_RESTRICTED);
	ck_assert_uint_eq(prof->n_entries, 7);
	check_entry(0, SP, CD_SPECIAL_ROOT, NULL, NULL, R);
	check_entry(1, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, NULL, W);
	check_entry(2, SP, CD_SPECIAL_SLASH_TMP, NULL, NULL, W);
	check_entry(3, SP, CD_SPECIAL_TMPDIR, NULL, NULL, W);
	check_entry(4, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".git", R);
	check_entry(5, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".codex", R);
	check_entry(6, SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".agents", R);
	ck_assert_uint_gt(prof->entries[0].line, 1);
	prof = cd_profile_free(prof);

	prof = load_policy("full-access.json");
	ck_assert_int_eq(prof->type, CD_PROFILE_DISABLED);
	ck_assert_int_eq(prof->network, CD_NET_ENABLED);
	ck_assert_uint_eq(prof->n_entries, 0);
}
END_TEST

/* ---- CLI entries, vocabulary, copies ------------------------------------ */

static const struct {
	const char *arg;
	enum cd_entry_kind kind;
	enum cd_special special;
	const char *path;
	const char *subpath;
} cli_ok[] = {
	{ "/", PA, 0, "/", NULL },
	{ "/usr/lib", PA, 0, "/usr/lib", NULL },
	/* ".." stays: the plan resolves it after the symlink before it. */
	{ "//usr/./lib/../share/", PA, 0, "/usr/lib/../share", NULL },
	{ "/..", PA, 0, "/..", NULL },
	{ ":root", SP, CD_SPECIAL_ROOT, NULL, NULL },
	{ ":minimal", SP, CD_SPECIAL_MINIMAL, NULL, NULL },
	{ ":workspace_roots", SP, CD_SPECIAL_PROJECT_ROOTS, NULL, NULL },
	{ ":workspace_roots/.git", SP, CD_SPECIAL_PROJECT_ROOTS, NULL, ".git" },
	{ ":workspace_roots/a//b/", SP, CD_SPECIAL_PROJECT_ROOTS, NULL, "a/b" },
	{ ":tmpdir", SP, CD_SPECIAL_TMPDIR, NULL, NULL },
	{ ":slash_tmp", SP, CD_SPECIAL_SLASH_TMP, NULL, NULL },
};

START_TEST(test_cli_ok)
{
	struct cd_fs_entry e;
	const char *msg = NULL;
	ck_assert_int_eq(cd_entry_from_cli(cli_ok[_i].arg, CD_ACCESS_WRITE, &e, &msg), 0);
	ck_assert_int_eq(e.kind, cli_ok[_i].kind);
	if (e.kind == SP)
		ck_assert_int_eq(e.special, cli_ok[_i].special);
	if (cli_ok[_i].path)
		ck_assert_str_eq(e.path, cli_ok[_i].path);
	else
		ck_assert_ptr_null(e.path);
	if (cli_ok[_i].subpath)
		ck_assert_str_eq(e.subpath, cli_ok[_i].subpath);
	else
		ck_assert_ptr_null(e.subpath);
	ck_assert_int_eq(e.access, CD_ACCESS_WRITE);
	ck_assert_uint_eq(e.line, 0);
	cd_fs_entry_done(&e);
	ck_assert_ptr_null(e.path);
}
END_TEST

static const struct {
	const char *arg;
	const char *msg;
} cli_bad[] = {
	{ "", "empty path" },
	{ "relative/path", "must be absolute" },
	{ ":home", "unknown symbolic path" },
	{ ":workspace_roots/../x", "must not contain" },
	{ ":workspace_roots//abs", "must be relative" },
	{ ":workspace_roots/", "must not be empty" },
	{ ":workspace_rootsx", "unknown symbolic path" },
	{ ":project_roots", "unknown symbolic path" },
};

START_TEST(test_cli_bad)
{
	struct cd_fs_entry e;
	const char *msg = NULL;
	ck_assert_int_eq(cd_entry_from_cli(cli_bad[_i].arg, CD_ACCESS_READ, &e, &msg), -EINVAL);
	ck_assert_ptr_nonnull(msg);
	ck_assert_msg(strstr(msg, cli_bad[_i].msg), "'%s': '%s'", cli_bad[_i].arg, msg);
	ck_assert_ptr_null(e.path);
	ck_assert_ptr_null(e.subpath);
}
END_TEST

START_TEST(test_vocabulary)
{
	ck_assert_str_eq(cd_access_name(CD_ACCESS_READ), "read");
	ck_assert_str_eq(cd_access_name(CD_ACCESS_WRITE), "write");
	ck_assert_str_eq(cd_access_name(CD_ACCESS_DENY), "deny");
	ck_assert_ptr_null(cd_access_name(CD_ACCESS_COUNT));
	ck_assert_str_eq(cd_network_name(CD_NET_RESTRICTED), "restricted");
	ck_assert_str_eq(cd_network_name(CD_NET_ENABLED), "enabled");
	ck_assert_str_eq(cd_network_name(CD_NET_MANAGED), "managed");
	ck_assert_str_eq(cd_profile_type_name(CD_PROFILE_MANAGED), "managed");
	ck_assert_str_eq(cd_profile_type_name(CD_PROFILE_DISABLED), "disabled");
	ck_assert_str_eq(cd_profile_type_name(CD_PROFILE_EXTERNAL), "external");
	ck_assert_str_eq(cd_special_name(CD_SPECIAL_PROJECT_ROOTS), "project_roots");
	ck_assert_str_eq(cd_special_name(CD_SPECIAL_SLASH_TMP), "slash_tmp");
	ck_assert_str_eq(cd_special_token(CD_SPECIAL_PROJECT_ROOTS), ":workspace_roots");
	ck_assert_str_eq(cd_special_token(CD_SPECIAL_TMPDIR), ":tmpdir");
	ck_assert_str_eq(cd_special_token(CD_SPECIAL_ROOT), ":root");
	ck_assert_int_eq(cd_access_from_name("read"), CD_ACCESS_READ);
	ck_assert_int_eq(cd_access_from_name("write"), CD_ACCESS_WRITE);
	ck_assert_int_eq(cd_access_from_name("deny"), CD_ACCESS_DENY);
	ck_assert_int_eq(cd_access_from_name("none"), CD_ACCESS_DENY);
	ck_assert_int_eq(cd_access_from_name("Read"), -EINVAL);
	ck_assert_int_eq(cd_access_from_name(NULL), -EINVAL);
	ck_assert_int_eq(cd_network_from_name("enabled"), CD_NET_ENABLED);
	ck_assert_int_eq(cd_network_from_name("managed"), CD_NET_MANAGED);
	ck_assert_int_eq(cd_network_from_name("on"), -EINVAL);
	/* Names round-trip. */
	for (int a = 0; a < CD_ACCESS_COUNT; a++)
		ck_assert_int_eq(cd_access_from_name(cd_access_name(a)), a);
	for (int n = 0; n < CD_NET_COUNT; n++)
		ck_assert_int_eq(cd_network_from_name(cd_network_name(n)), n);
}
END_TEST

/* :workspace_roots and relative globs need a cwd; absolute and per-root globs do not. */
START_TEST(test_depends_on_cwd)
{
	struct cd_profile p = { .type = CD_PROFILE_MANAGED };
	ck_assert(!cd_profile_depends_on_cwd(&p));
	ck_assert(!cd_profile_depends_on_cwd(NULL));
	struct cd_fs_entry root = { .kind = CD_ENTRY_SPECIAL,
				    .special = CD_SPECIAL_ROOT,
				    .access = CD_ACCESS_READ };
	cd_profile_add_entry(&p, &root);
	struct cd_fs_entry g = { .kind = CD_ENTRY_GLOB,
				 .path = (char *)"/abs/*.env",
				 .access = CD_ACCESS_DENY };
	cd_profile_add_entry(&p, &g);
	g.path = (char *)"codex-project-roots://**/*.env";
	cd_profile_add_entry(&p, &g);
	ck_assert(!cd_profile_depends_on_cwd(&p));
	g.path = (char *)"**/*.env";
	cd_profile_add_entry(&p, &g);
	ck_assert(cd_profile_depends_on_cwd(&p));
	p.n_entries--;
	free(p.entries[p.n_entries].path);
	struct cd_fs_entry ws = { .kind = CD_ENTRY_SPECIAL,
				  .special = CD_SPECIAL_PROJECT_ROOTS,
				  .access = CD_ACCESS_WRITE };
	cd_profile_add_entry(&p, &ws);
	ck_assert(cd_profile_depends_on_cwd(&p));
	for (size_t i = 0; i < p.n_entries; i++)
		cd_fs_entry_done(&p.entries[i]);
	free(p.entries);
}
END_TEST

START_TEST(test_dup_and_add)
{
	file_ok("{\"version\":1,\"description\":\"d\",\"type\":\"workspace-write\","
		"\"writable_roots\":[\"/w\"]}");
	struct cd_profile *d = cd_profile_dup(prof);
	ck_assert_ptr_ne(d, prof);
	ck_assert_uint_eq(d->n_entries, prof->n_entries);
	ck_assert_ptr_ne(d->entries, prof->entries);
	ck_assert_str_eq(d->description, "d");
	ck_assert_ptr_ne(d->description, prof->description);
	ck_assert_str_eq(d->origin, "test.json");
	for (size_t i = 0; i < d->n_entries; i++) {
		ck_assert_int_eq(d->entries[i].kind, prof->entries[i].kind);
		ck_assert_int_eq(d->entries[i].access, prof->entries[i].access);
		if (prof->entries[i].path) {
			ck_assert_str_eq(d->entries[i].path, prof->entries[i].path);
			ck_assert_ptr_ne(d->entries[i].path, prof->entries[i].path);
		}
		if (prof->entries[i].subpath)
			ck_assert_ptr_ne(d->entries[i].subpath, prof->entries[i].subpath);
	}
	/* The copy survives the original. */
	prof = cd_profile_free(prof);
	ck_assert_str_eq(d->entries[4].path, "/w");

	char p[] = "/added";
	struct cd_fs_entry e = { .kind = CD_ENTRY_PATH, .path = p, .access = CD_ACCESS_DENY };
	cd_profile_add_entry(d, &e);
	p[1] = 'X';
	ck_assert_str_eq(d->entries[d->n_entries - 1].path, "/added");
	ck_assert_ptr_null(cd_profile_free(d));
	ck_assert_ptr_null(cd_profile_free(NULL));
	ck_assert_ptr_null(cd_profile_dup(NULL));
}
END_TEST

/* ---- runner ------------------------------------------------------------- */

static Suite *profile_suite(void)
{
	Suite *s = suite_create("profile");
	TCase *tc;

	tc = tcase_create("wire");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_wire_managed_restricted);
	tcase_add_test(tc, test_wire_other_types);
	tcase_add_test(tc, test_wire_ignores_unknown_keys);
	tcase_add_test(tc, test_wire_special_forms);
	suite_add_tcase(s, tc);

	tc = tcase_create("file");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_file_forms);
	suite_add_tcase(s, tc);

	tc = tcase_create("legacy");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_legacy_read_only);
	tcase_add_test(tc, test_legacy_workspace_write);
	tcase_add_test(tc, test_legacy_other);
	suite_add_tcase(s, tc);

	tc = tcase_create("refusals");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_loop_test(tc, test_refusals, 0, (int)CD_ARRAY_SIZE(refusals));
	tcase_add_test(tc, test_refusal_multiline);
	tcase_add_test(tc, test_hostile_inputs);
	suite_add_tcase(s, tc);

	tc = tcase_create("policies");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_policy_files_all_load);
	tcase_add_test(tc, test_policy_builtins);
	suite_add_tcase(s, tc);

	tc = tcase_create("cli");
	tcase_add_loop_test(tc, test_cli_ok, 0, (int)CD_ARRAY_SIZE(cli_ok));
	tcase_add_loop_test(tc, test_cli_bad, 0, (int)CD_ARRAY_SIZE(cli_bad));
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_vocabulary);
	tcase_add_test(tc, test_dup_and_add);
	tcase_add_test(tc, test_depends_on_cwd);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(profile_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
