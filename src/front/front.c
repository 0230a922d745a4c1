/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The command line of the front ends on the core alone (front.h). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin-profiles.h"
#include "core/glob.h"
#include "core/util.h"
#include "front/front.h"

int cd_front_usage(const struct cd_front *f, const char *msg)
{
	fprintf(stderr, "cordon: %s\n(see %s --help)\n", msg, f->prog);
	return CD_FRONT_EXIT_USAGE;
}

static int usagef(const struct cd_front *f, const char *fmt, ...) CD_PRINTF(2, 3);
static int usagef(const struct cd_front *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *m = cd_xvasprintf(fmt, ap);
	va_end(ap);
	int r = cd_front_usage(f, m);
	free(m);
	return r;
}

static struct cd_profile *parse(const char *origin, const char *text, size_t len)
{
	struct cd_profile *p = NULL;
	struct cd_parse_error e = { 0 };
	if (cd_profile_parse_file_text(text, len, origin, &p, &e) < 0) {
		fprintf(stderr, "%s:%u:%u: error: %s", origin, e.line, e.col, e.msg ? e.msg : "?");
		if (e.path && *e.path)
			fprintf(stderr, " (at %s)", e.path);
		fputc('\n', stderr);
		cd_parse_error_done(&e);
		return NULL;
	}
	return p;
}

static const char *read_error(int r)
{
	return r == -EFBIG ? "file is larger than 1 MiB" : strerror(-r);
}

int cd_front_check(const struct cd_front *f, int argc, char **argv)
{
	int bad = 0, n = 0;
	for (int i = 2; i < argc; i++, n++) {
		if (!strcmp(argv[i], "--builtin")) {
			for (const struct cd_builtin_profile *bp = cd_builtin_profiles; bp->name;
			     bp++) {
				char *name = cd_xasprintf(CD_BUILTIN_ORIGIN ":%s", bp->name);
				struct cd_profile *p = parse(name, bp->text, bp->len);
				if (p)
					printf("%s: ok\n", name);
				bad |= !p;
				cd_profile_free(p);
				free(name);
			}
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1])
			return usagef(f, "check: unknown option: %s", argv[i]);
		char *text = NULL;
		size_t len = 0;
		int r = f->read_file(argv[i], &text, &len);
		if (r < 0) {
			fprintf(stderr, "%s: error: %s\n", argv[i], read_error(r));
			bad = 1;
			continue;
		}
		struct cd_profile *p = parse(argv[i], text, len);
		if (p)
			printf("%s: ok\n", argv[i]);
		bad |= !p;
		cd_profile_free(p);
		free(text);
	}
	if (!n)
		return cd_front_usage(f, "check: give FILE... or --builtin");
	return bad;
}

static bool takes_value(const char *a)
{
	static const char *const with_value[] = { "--profile", "--cwd",	       "--workspace-root",
						  "--network", "--allow-read", "--allow-write",
						  "--deny",    "--deny-glob",  "--network-proxy",
						  NULL };
	for (const char *const *w = with_value; *w; w++)
		if (!strcmp(a, *w))
			return true;
	return false;
}

/*
 * The limit of a --limit-NAME[=VALUE] argument (NAME as the Linux build
 * spells it: dashes; its --private-tmp is no --limit-), or -1.
 */
static int limit_option(const char *a)
{
	if (strncmp(a, "--limit-", 8))
		return -1;
	const char *eq = strchr(a, '=');
	char *name = eq ? cd_xstrndup(a + 8, (size_t)(eq - a - 8)) : cd_xstrdup(a + 8);
	int l = strchr(name, '_') ? -1 : cd_limit_from_name(name);
	free(name);
	return l == CD_LIMIT_PRIVATE_TMP ? -1 : l;
}

int cd_front_parse_opts(const struct cd_front *f, int argc, char **argv, bool run,
			struct cd_front_opts *o)
{
	*o = (struct cd_front_opts){ .profile = "read-only", .network = -1 };
	int i = 2, l;
	for (; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-')
			break;
		if (!strcmp(a, "--json") && !run) {
			o->json = true;
		} else if (!strcmp(a, "--allow-degraded=network") && f->env_network_option) {
			o->env_network = true;
		} else if (!strcmp(a, "--profile") && v) {
			if (!*v) /* the Linux build's words for it */
				return usagef(f, "--profile needs a name or a file");
			o->profile = v;
			i++;
		} else if (!strcmp(a, "--cwd") && v) {
			o->cwd = v;
			i++;
		} else if (!strcmp(a, "--workspace-root") && v) {
			if (o->n_roots == CD_FRONT_MAX_ROOTS)
				return cd_front_usage(f, "too many --workspace-root (64 at most)");
			o->roots[o->n_roots++] = v;
			i++;
		} else if ((!strcmp(a, "--allow-read") || !strcmp(a, "--allow-write") ||
			    !strcmp(a, "--deny") || !strcmp(a, "--deny-glob")) &&
			   v) {
			if (o->n_extra == CD_FRONT_MAX_ROOTS)
				return usagef(f, "too many %s (64 entries at most)", a);
			o->extra[o->n_extra++] = (struct cd_front_extra){
				.arg = v,
				.access = a[2] == 'd'	? CD_ACCESS_DENY
					  : a[8] == 'r' ? CD_ACCESS_READ
							: CD_ACCESS_WRITE,
				.glob = !strcmp(a, "--deny-glob"),
			};
			i++;
		} else if (!strcmp(a, "--network-proxy") && v && f->network_proxy_option) {
			o->network_proxy = v;
			i++;
		} else if (!strcmp(a, "--network") && v) {
			o->network = cd_network_from_name(v);
			if (o->network < 0)
				return usagef(
					f,
					"--network: unknown mode '%s' (restricted, managed or "
					"enabled)",
					v);
			i++;
		} else if ((l = limit_option(a)) >= 0) {
			/* The Linux build's --limit-NAME VALUE or --limit-NAME=VALUE. */
			const char *eq = strchr(a, '=');
			int len = eq ? (int)(eq - a) : (int)strlen(a);
			if (eq)
				v = eq + 1;
			else if (!v)
				return usagef(f, "%s needs a value", a);
			else
				i++;
			uint64_t n;
			char *err = NULL;
			if (cd_limit_parse((enum cd_limit)l, v, &n, &err) < 0) {
				int r = usagef(f, "%.*s: %s", len, a, err);
				free(err);
				return r;
			}
			cd_limits_put(&o->limits, (enum cd_limit)l, n);
		} else if (takes_value(a) && !v &&
			   (strcmp(a, "--network-proxy") || f->network_proxy_option)) {
			return usagef(f, "%s needs a value", a);
		} else {
			return usagef(f, "unknown option: %s", a);
		}
	}
	o->cmd = i;
	if (run && i >= argc)
		return cd_front_usage(f, "run: no command given");
	if (!run && i < argc)
		return usagef(f, "explain: unexpected argument '%s'", argv[i]);
	return 0;
}

/* The command line's entries onto p, as the Linux build adds them (cli-policy.c). */
static int add_entries(const struct cd_front *f, const struct cd_front_opts *o,
		       struct cd_profile *p)
{
	if (o->n_extra && (p->type != CD_PROFILE_MANAGED || p->fs_unrestricted))
		return usagef(f,
			      "--allow-read, --allow-write, --deny and --deny-glob need a managed "
			      "profile with a restricted file system ('%s' is %s%s)",
			      o->profile, cd_profile_type_name(p->type),
			      p->fs_unrestricted ? " with an unrestricted file system" : "");
	for (size_t i = 0; i < o->n_extra; i++) {
		const struct cd_front_extra *x = &o->extra[i];
		struct cd_fs_entry e;
		memset(&e, 0, sizeof(e));
		if (x->glob) {
			char *gerr = NULL;
			if (cd_glob_check(x->arg, &gerr) < 0) {
				int r = usagef(f, "--deny-glob: %s", gerr);
				free(gerr);
				return r;
			}
			e = (struct cd_fs_entry){ .kind = CD_ENTRY_GLOB,
						  .path = (char *)x->arg,
						  .access = CD_ACCESS_DENY };
			cd_profile_add_entry(p, &e);
			continue;
		}
		const char *why = NULL;
		cleanup_free char *conv = NULL;
		if (f->host_path && x->arg[0] != ':' && !(conv = f->host_path(x->arg)))
			why = "not a path of this system";
		if (why || cd_entry_from_cli(conv ? conv : x->arg, x->access, &e, &why) < 0)
			return usagef(f, "--%s '%s': %s",
				      x->access == CD_ACCESS_READ    ? "allow-read"
				      : x->access == CD_ACCESS_WRITE ? "allow-write"
								     : "deny",
				      x->arg, why ? why : "invalid path");
		cd_profile_add_entry(p, &e);
		cd_fs_entry_done(&e);
	}
	return 0;
}

int cd_front_load_profile(const struct cd_front *f, const struct cd_front_opts *o,
			  struct cd_profile **ret)
{
	const char *name = o->profile;
	const struct cd_builtin_profile *bp = cd_builtin_profile_find(name);
	struct cd_profile *p;
	if (f->lookup_profile && !cd_profile_is_file_arg(name)) {
		char *text = NULL, *origin = NULL, *err = NULL;
		size_t len = 0;
		int r = f->lookup_profile(name, &text, &len, &origin, &err);
		if (r < 0) {
			fprintf(stderr, "cordon: %s\n", err);
			free(err);
			return CD_FRONT_EXIT_SETUP;
		}
		if (r == 1) {
			char *o2 = cd_xasprintf(CD_BUILTIN_ORIGIN ":%s", name);
			p = parse(o2, bp->text, bp->len);
			free(o2);
		} else {
			p = parse(origin, text, len);
		}
		free(text);
		free(origin);
	} else if (bp && !strchr(name, '\\') && !strchr(name, '/')) {
		char *origin = cd_xasprintf(CD_BUILTIN_ORIGIN ":%s", name);
		p = parse(origin, bp->text, bp->len);
		free(origin);
	} else {
		char *text = NULL;
		size_t len = 0;
		int r = f->read_file(name, &text, &len);
		if (r < 0) {
			fprintf(stderr, "cordon: profile '%s': %s\n", name,
				r == -ENOENT ? "no such built-in profile or file" : read_error(r));
			return CD_FRONT_EXIT_SETUP;
		}
		p = parse(name, text, len);
		free(text);
	}
	if (!p)
		return CD_FRONT_EXIT_SETUP;
	int r = add_entries(f, o, p);
	if (r) {
		cd_profile_free(p);
		return r;
	}
	/* As the Linux build: a disabled profile has the whole network, and only that. */
	if (o->network >= 0 && p->type == CD_PROFILE_DISABLED && o->network != CD_NET_ENABLED) {
		cd_profile_free(p);
		return usagef(f,
			      "--network %s needs a managed or external profile ('%s' disables "
			      "the sandbox)",
			      cd_network_name((enum cd_network)o->network), name);
	}
	if (o->network >= 0)
		p->network = (enum cd_network)o->network;
	/* The command line's limits over the profile's, one by one, as the Linux build. */
	for (int l = 0; l < CD_LIMIT_COUNT; l++)
		if (cd_limits_has(&o->limits, (enum cd_limit)l))
			cd_limits_put(&p->limits, (enum cd_limit)l, o->limits.v[l]);
	*ret = p;
	return 0;
}
