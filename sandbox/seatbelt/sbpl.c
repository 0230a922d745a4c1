/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The macOS Seatbelt planner (sbpl.h). Written from the facts of reference
 * section 5 (what macOS programs need a sandbox to allow, and how the
 * roots are laid out), in cordon's own words; pure C, no OS headers.
 */
#include "sandbox/seatbelt/sbpl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/glob.h"
#include "core/util.h"

/* ---- fixed parts of the policy ---- */

/* The sysctls ordinary programs read: CPU, memory, OS version, limits. */
static const char *const base_sysctls[] = {
	"hw.activecpu",
	"hw.busfrequency_compat",
	"hw.byteorder",
	"hw.cacheconfig",
	"hw.cachelinesize_compat",
	"hw.cpufamily",
	"hw.cpufrequency",
	"hw.cpufrequency_compat",
	"hw.cputype",
	"hw.l1dcachesize_compat",
	"hw.l1icachesize_compat",
	"hw.l2cachesize_compat",
	"hw.l3cachesize_compat",
	"hw.logicalcpu",
	"hw.logicalcpu_max",
	"hw.machine",
	"hw.memsize",
	"hw.model",
	"hw.ncpu",
	"hw.nperflevels",
	"hw.packages",
	"hw.pagesize",
	"hw.pagesize_compat",
	"hw.physicalcpu",
	"hw.physicalcpu_max",
	"hw.tbfrequency_compat",
	"hw.vectorunit",
	"kern.argmax",
	"kern.hostname",
	"kern.maxfilesperproc",
	"kern.maxproc",
	"kern.osproductversion",
	"kern.osrelease",
	"kern.ostype",
	"kern.osvariant_status",
	"kern.osversion",
	"kern.secure_kernel",
	"kern.usrstack64",
	"kern.version",
	"machdep.cpu.brand_string",
	"sysctl.proc_cputype",
	"vm.loadavg",
	NULL,
};

static const char *const base_sysctl_prefixes[] = {
	"hw.optional.arm.", "hw.optional.armv8_", "hw.perflevel", "kern.proc.pgrp.",
	"kern.proc.pid.",   "net.routetable.",	  NULL,
};

/* Mach services of the base: user lookups, power assertions, preferences. */
static const char *const base_services[] = {
	"com.apple.system.opendirectoryd.libinfo",
	"com.apple.PowerManagement.control",
	"com.apple.cfprefsd.daemon",
	"com.apple.cfprefsd.agent",
	NULL,
};

/* What resolving names and checking certificates needs, with the network on. */
static const char *const network_services[] = {
	"com.apple.bsd.dirhelper",
	"com.apple.system.opendirectoryd.membership",
	"com.apple.SecurityServer",
	"com.apple.networkd",
	"com.apple.ocspd",
	"com.apple.trustd.agent",
	"com.apple.SystemConfiguration.DNSConfiguration",
	"com.apple.SystemConfiguration.configd",
	NULL,
};

/* :minimal, read-only: system libraries, tools and configuration. */
static const char *const minimal_read_subpaths[] = {
	"/Applications",
	"/Library/Apple",
	"/Library/Filesystems/NetFSPlugins",
	"/Library/Preferences",
	"/System/Library/Frameworks",
	"/System/Library/PrivateFrameworks",
	"/System/Library/SubFrameworks",
	"/System/iOSSupport/System/Library/Frameworks",
	"/System/iOSSupport/System/Library/PrivateFrameworks",
	"/System/iOSSupport/System/Library/SubFrameworks",
	"/bin",
	"/opt/homebrew/lib",
	"/private/etc",
	"/private/var/db",
	"/sbin",
	"/usr/bin",
	"/usr/lib",
	"/usr/libexec",
	"/usr/local/lib",
	"/usr/sbin",
	"/usr/share",
	NULL,
};

/* :minimal: where the loader may map code from. */
static const char *const minimal_exec_subpaths[] = {
	"/Library/Apple/System/Library/Frameworks",
	"/Library/Apple/System/Library/PrivateFrameworks",
	"/Library/Apple/usr/lib",
	"/System/Library/Extensions",
	"/System/Library/Frameworks",
	"/System/Library/PrivateFrameworks",
	"/System/Library/SubFrameworks",
	"/System/iOSSupport/System/Library/Frameworks",
	"/System/iOSSupport/System/Library/PrivateFrameworks",
	"/System/iOSSupport/System/Library/SubFrameworks",
	"/usr/lib",
	NULL,
};

/* :minimal: single files read at start (the root for getcwd, devices, version). */
static const char *const minimal_read_literals[] = {
	"/",
	"/System/Library/CoreServices",
	"/System/Library/CoreServices/.SystemVersionPlatform.plist",
	"/System/Library/CoreServices/SystemVersion.plist",
	"/dev/autofs_nowait",
	"/dev/random",
	"/dev/urandom",
	"/dev/zero",
	NULL,
};

/* :minimal: the services libc, logging and notifications talk to at start. */
static const char *const minimal_services[] = {
	"com.apple.analyticsd",
	"com.apple.analyticsd.messagetracer",
	"com.apple.appsleep",
	"com.apple.audio.AudioComponentRegistrar",
	"com.apple.audio.audiohald",
	"com.apple.bsd.dirhelper",
	"com.apple.diagnosticd",
	"com.apple.dt.automationmode.reader",
	"com.apple.espd",
	"com.apple.logd",
	"com.apple.logd.events",
	"com.apple.runningboard",
	"com.apple.secinitd",
	"com.apple.system.DirectoryService.libinfo_v1",
	"com.apple.system.logger",
	"com.apple.system.notification_center",
	"com.apple.system.opendirectoryd.membership",
	"com.apple.trustd",
	"com.apple.trustd.agent",
	"com.apple.xpc.activity.unmanaged",
	NULL,
};

/* ---- SBPL text helpers ---- */

static bool sbpl_safe(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '"')
			return false;
	return true;
}

/* s as an SBPL string literal (the caller checked sbpl_safe; backslashes doubled). */
static void put_str(struct cd_strbuf *sb, const char *s)
{
	cd_strbuf_append_c(sb, '"');
	for (; *s; s++) {
		if (*s == '\\')
			cd_strbuf_append_c(sb, '\\');
		cd_strbuf_append_c(sb, *s);
	}
	cd_strbuf_append_c(sb, '"');
}

/*
 * One rule: (allow OPS (FILTER "v1") (FILTER "v2") ...), one filter per
 * line; with exclusions (parameter names, NULL-terminated, may be NULL),
 * (allow OPS (require-all (require-any FILTERS...) (require-not (subpath
 * (param "K")))...)).
 */
static void put_rule_excl(struct cd_strbuf *sb, const char *ops, const char *filter,
			  const char *const *values, char *const *excl)
{
	bool wrap = excl && *excl;
	const char *ind = wrap ? "\n        " : "\n    ";

	cd_strbuf_printf(sb, "(allow %s", ops);
	if (wrap)
		cd_strbuf_append(sb, "\n    (require-all (require-any");
	for (const char *const *v = values; *v; v++) {
		cd_strbuf_printf(sb, "%s(%s ", ind, filter);
		put_str(sb, *v);
		cd_strbuf_append_c(sb, ')');
	}
	if (wrap) {
		cd_strbuf_append_c(sb, ')');
		for (char *const *k = excl; *k; k++)
			cd_strbuf_printf(sb, "%s(require-not (subpath (param \"%s\")))", ind, *k);
		cd_strbuf_append_c(sb, ')');
	}
	cd_strbuf_append(sb, ")\n");
}

static void put_rule(struct cd_strbuf *sb, const char *ops, const char *filter,
		     const char *const *values)
{
	put_rule_excl(sb, ops, filter, values, NULL);
}

/* Whether :minimal's read rules would reach path (a macOS path) or below. */
static bool minimal_overlaps(const char *path)
{
	const char *const *lists[] = { minimal_read_subpaths, minimal_exec_subpaths,
				       minimal_read_literals, NULL };
	for (const char *const *const *l = lists; *l; l++)
		for (const char *const *v = *l; *v; v++)
			if (cd_streq(*v, path) || cd_path_is_beneath(*v, path) ||
			    (*l != minimal_read_literals && cd_path_is_beneath(path, *v)))
				return true;
	return false;
}

bool cd_seatbelt_minimal_reads(const char *path)
{
	for (const char *const *v = minimal_read_literals; *v; v++)
		if (cd_streq(*v, path))
			return true;
	for (const char *const *v = minimal_read_subpaths; *v; v++)
		if (cd_streq(*v, path) || cd_path_is_beneath(path, *v))
			return true;
	return false;
}

static void put_base(struct cd_strbuf *sb)
{
	cd_strbuf_append(
		sb, "(version 1)\n"
		    "; cordon: macOS Seatbelt policy. Nothing is allowed that a rule\n"
		    "; below does not name.\n"
		    "(deny default)\n"
		    "\n"
		    "; Processes: the command and its children, which inherit this policy.\n"
		    "(allow process-fork)\n"
		    "(allow process-exec)\n"
		    "(allow signal (target same-sandbox))\n"
		    "(allow process-info* (target same-sandbox))\n"
		    "\n"
		    "; The null device (the character device only, not a file put there).\n"
		    "(allow file-read* file-write-data\n"
		    "    (require-all (literal \"/dev/null\") (vnode-type CHARACTER-DEVICE)))\n"
		    "\n"
		    "; System facts programs read: CPU, memory, OS version, limits.\n");
	put_rule(sb, "sysctl-read", "sysctl-name", base_sysctls);
	put_rule(sb, "sysctl-read", "sysctl-name-prefix", base_sysctl_prefixes);
	cd_strbuf_append(
		sb, "; Passed a buffer, so counted as a write; it reads the CPU type (Java).\n"
		    "(allow sysctl-write (sysctl-name \"kern.grade_cputype\"))\n"
		    "(allow iokit-open (iokit-registry-entry-class \"RootDomainUserClient\"))\n"
		    "\n"
		    "; User lookups, power assertions, reading preferences.\n");
	put_rule(sb, "mach-lookup", "global-name", base_services);
	cd_strbuf_append(sb,
			 "(allow mach-lookup (local-name \"com.apple.cfprefsd.agent\"))\n"
			 "(allow ipc-posix-shm-read* (ipc-posix-name-prefix \"apple.cfprefs.\"))\n"
			 "(allow user-preference-read)\n"
			 "\n"
			 "; POSIX semaphores (Python's multiprocessing) and the OpenMP\n"
			 "; runtime's registration segments.\n"
			 "(allow ipc-posix-sem)\n"
			 "(allow ipc-posix-shm-read-data ipc-posix-shm-write-create\n"
			 "    ipc-posix-shm-write-unlink\n"
			 "    (ipc-posix-name-regex #\"^/__KMP_REGISTERED_LIB_[0-9]+$\"))\n"
			 "\n"
			 "; Terminals: new ones from /dev/ptmx; ioctls on those opened before.\n"
			 "(allow pseudo-tty)\n"
			 "(allow file-read* file-write* file-ioctl (literal \"/dev/ptmx\"))\n"
			 "(allow file-read* file-write*\n"
			 "    (require-all (regex #\"^/dev/ttys[0-9]+$\")\n"
			 "        (extension \"com.apple.sandbox.pty\")))\n"
			 "(allow file-ioctl (regex #\"^/dev/ttys[0-9]+$\"))\n");
}

/* What name resolution and certificate checks need, with any network. */
static void put_network_services(struct cd_strbuf *sb)
{
	cd_strbuf_append(sb, "(allow system-socket\n"
			     "    (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))\n");
	put_rule(sb, "mach-lookup", "global-name", network_services);
}

static void put_network(struct cd_strbuf *sb)
{
	cd_strbuf_append(sb, "\n; Network: on, with name resolution and certificate checks.\n"
			     "(allow network-outbound)\n"
			     "(allow network-inbound)\n");
	put_network_services(sb);
}

/*
 * A managed network: only the proxy's loopback ports (reference section 5,
 * proxy-restricted). No port: no outbound address is allowed at all.
 */
static void put_proxy_network(struct cd_strbuf *sb, const struct cd_seatbelt_input *in)
{
	cd_strbuf_append(sb, "\n; Network: managed, only through the proxy's loopback ports.\n");
	if (in->allow_local_binding) {
		cd_strbuf_append(sb, "(allow network-bind (local ip \"*:*\"))\n"
				     "(allow network-inbound (local ip \"localhost:*\"))\n"
				     "(allow network-outbound (remote ip \"localhost:*\"))\n");
		if (in->n_proxy_ports)
			cd_strbuf_append(sb, "(allow network-outbound (remote ip \"*:53\"))\n");
	}
	for (size_t i = 0; i < in->n_proxy_ports; i++)
		cd_strbuf_printf(sb, "(allow network-outbound (remote ip \"localhost:%u\"))\n",
				 (unsigned)in->proxy_ports[i]);
	if (!in->n_proxy_ports)
		cd_strbuf_append(sb, "; No proxy port: no outbound address is allowed.\n");
	put_network_services(sb);
}

static void put_minimal(struct cd_strbuf *sb, char *const *excl)
{
	static const char *const tmp_links[] = { "/etc", "/tmp", "/var", "/private/etc/localtime",
						 NULL };
	static const char *const meta_subpaths[] = { "/var", "/private/var", NULL };

	cd_strbuf_append(sb, "\n; :minimal, read-only: the system's libraries, tools and\n"
			     "; configuration. Unlike Codex's set, no temporary directory is\n"
			     "; made writable here: only the profile's write entries write.\n");
	put_rule_excl(sb, "file-read* file-test-existence", "subpath", minimal_read_subpaths, excl);
	put_rule_excl(sb, "file-read* file-test-existence", "literal", minimal_read_literals, excl);
	put_rule_excl(sb, "file-map-executable", "subpath", minimal_exec_subpaths, excl);
	put_rule(sb, "file-read-metadata file-test-existence", "literal", tmp_links);
	put_rule(sb, "file-read-metadata", "subpath", meta_subpaths);
	cd_strbuf_append(
		sb,
		"(allow file-read-metadata file-test-existence\n"
		"    (path-ancestors \"/System/Volumes/Data/private\"))\n"
		"(allow file-read-metadata\n"
		"    (require-all (vnode-type DIRECTORY)\n"
		"        (require-any (literal \"/System/Volumes\")\n"
		"            (literal \"/System/Volumes/Data\")\n"
		"            (literal \"/System/Volumes/Data/Users\"))))\n"
		"(allow file-read-metadata (literal \"/dev\") (regex #\"^/dev/[^/]+$\"))\n"
		"(allow file-read-data file-test-existence file-write-data (subpath \"/dev/fd\"))\n"
		"(allow file-read* file-write* (literal \"/dev/tty\"))\n"
		"(allow file-read* file-test-existence file-write-data file-ioctl\n"
		"    (literal \"/dev/dtracehelper\"))\n"
		"(allow system-mac-syscall (mac-policy-name \"vnguard\"))\n"
		"(allow system-mac-syscall\n"
		"    (require-all (mac-policy-name \"Sandbox\") (mac-syscall-number 67)))\n"
		"(allow system-fsctl (fsctl-command FSIOC_CAS_BSDFLAGS))\n"
		"(allow ipc-posix-shm-read* (ipc-posix-name \"apple.shm.notification_center\"))\n"
		"(allow network-outbound (literal \"/private/var/run/syslog\"))\n");
	put_rule(sb, "mach-lookup", "global-name", minimal_services);
}

/* ---- paths ---- */

char *cd_seatbelt_macos_path(const char *path)
{
	static const char *const linked[] = { "/var", "/tmp", "/etc", NULL };

	for (const char *const *l = linked; *l; l++) {
		size_t n = strlen(*l);
		if (!strncmp(path, *l, n) && (path[n] == '\0' || path[n] == '/'))
			return cd_xasprintf("/private%s", path);
	}
	return cd_xstrdup(path);
}

static bool readable(enum cd_access a)
{
	return a == CD_ACCESS_READ || a == CD_ACCESS_WRITE;
}

/* A region: a root path and the narrower paths under it. */
struct region {
	const struct cd_plan_path *root;
	const struct cd_plan_path **excl;
	size_t n_excl;
};

struct regions {
	struct region *v;
	size_t n;
};

/* Index of the deepest region whose root holds path, or -1. */
static long deepest_region(const struct regions *rs, const char *path)
{
	long best = -1;
	size_t best_depth = 0;

	for (size_t i = 0; i < rs->n; i++) {
		const char *r = rs->v[i].root->path;
		if (!cd_streq(r, path) && !cd_path_is_beneath(path, r))
			continue;
		size_t d = cd_path_depth(r);
		if (best < 0 || d > best_depth) {
			best = (long)i;
			best_depth = d;
		}
	}
	return best;
}

/*
 * Regions for reads (write false) or writes: a root is a path that opens
 * access its parent does not give; an exclusion is one that takes it away
 * again, assigned to the deepest root above it. /dev/null (implicit) is the
 * base's business.
 */
static void collect(const struct cd_plan *plan, bool write, struct regions *rs)
{
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (pp->origin == CD_ORIGIN_IMPLICIT)
			continue;
		bool on = write ? pp->access == CD_ACCESS_WRITE : readable(pp->access);
		bool parent_on =
			write ? pp->parent_access == CD_ACCESS_WRITE : readable(pp->parent_access);
		if (on && !parent_on) {
			rs->v = cd_xreallocarray(rs->v, rs->n + 1, sizeof(*rs->v));
			rs->v[rs->n++] = (struct region){ .root = pp };
		}
	}
	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (pp->origin == CD_ORIGIN_IMPLICIT)
			continue;
		bool on = write ? pp->access == CD_ACCESS_WRITE : readable(pp->access);
		bool parent_on =
			write ? pp->parent_access == CD_ACCESS_WRITE : readable(pp->parent_access);
		if (on || !parent_on)
			continue;
		long r = deepest_region(rs, pp->path);
		if (r < 0)
			continue; /* cannot happen: parent_on means a root holds it */
		struct region *g = &rs->v[r];
		g->excl = cd_xreallocarray(g->excl, g->n_excl + 1, sizeof(*g->excl));
		g->excl[g->n_excl++] = pp;
	}
}

static void regions_done(struct regions *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		free(rs->v[i].excl);
	free(rs->v);
}

struct builder {
	const struct cd_seatbelt_input *in;
	struct cd_seatbelt_plan *sp;
	struct cd_strbuf policy;
	struct cd_strset noted;
	char *err;
	size_t n_pinned; /* PINNED_k */
};

static char *path_for_macos(struct builder *b, const char *path)
{
	if (!b->in->macos_paths)
		return cd_xstrdup(path);
	char *m = cd_seatbelt_macos_path(path);
	if (!cd_streq(m, path)) {
		/* One note per rewritten link (/tmp, /var, /etc), not per path. */
		size_t n = strcspn(path + 1, "/") + 1;
		char *note = cd_xasprintf("%.*s is /private%.*s on macOS: paths below it are "
					  "given as a macOS binding resolves them",
					  (int)n, path, (int)n, path);
		if (cd_strset_add(&b->noted, note))
			cd_strv_push_take(&b->sp->notes, note);
		else
			free(note);
	}
	return m;
}

static bool add_param(struct builder *b, char *key, const char *path)
{
	char *value = path_for_macos(b, path);
	if (!sbpl_safe(value)) {
		b->err = cd_xasprintf("the path '%s' holds a character a Seatbelt parameter "
				      "cannot carry (a control character or '\"'); rename it or "
				      "leave it out of the profile",
				      path);
		free(key);
		free(value);
		return false;
	}
	struct cd_seatbelt_plan *sp = b->sp;
	sp->params = cd_xreallocarray(sp->params, sp->n_params + 1, sizeof(*sp->params));
	sp->params[sp->n_params++] = (struct cd_seatbelt_param){ .key = key, .value = value };
	return true;
}

/* The (allow OP ...) rule for regions, their parameters named PREFIX_i[_EXCLUDED_j]. */
static bool put_regions(struct builder *b, const char *op, const char *prefix,
			const struct regions *rs)
{
	struct cd_strbuf *sb = &b->policy;

	cd_strbuf_printf(sb, "(allow %s", op);
	for (size_t i = 0; i < rs->n; i++) {
		const struct region *g = &rs->v[i];
		char *key = cd_xasprintf("%s_%zu", prefix, i);
		if (!add_param(b, cd_xstrdup(key), g->root->path)) {
			free(key);
			return false;
		}
		if (!g->n_excl) {
			cd_strbuf_printf(sb, "\n    (subpath (param \"%s\"))", key);
			free(key);
			continue;
		}
		cd_strbuf_printf(sb, "\n    (require-all (subpath (param \"%s\"))", key);
		for (size_t j = 0; j < g->n_excl; j++) {
			char *ex = cd_xasprintf("%s_EXCLUDED_%zu", key, j);
			if (!add_param(b, cd_xstrdup(ex), g->excl[j]->path)) {
				free(ex);
				free(key);
				return false;
			}
			cd_strbuf_printf(sb,
					 "\n        (require-not (literal (param \"%s\")))"
					 "\n        (require-not (subpath (param \"%s\")))",
					 ex, ex);
			free(ex);
		}
		cd_strbuf_append_c(sb, ')');
		free(key);
	}
	cd_strbuf_append(sb, ")\n");
	return true;
}

static bool put_files(struct builder *b)
{
	const struct cd_plan *plan = b->in->plan;
	struct cd_strbuf *sb = &b->policy;
	struct regions reads = { 0 }, writes = { 0 };
	bool ok = true;

	cd_strbuf_append(sb, "\n; Reads.\n");
	if (plan->fs_unrestricted) {
		cd_strbuf_append(sb, "(allow file-read*)\n"
				     "\n; Writes.\n"
				     "(allow file-write* (regex #\"^/\"))\n");
		return true;
	}
	collect(plan, false, &reads);
	if (reads.n == 1 && cd_streq(reads.v[0].root->path, "/") && !reads.v[0].n_excl)
		cd_strbuf_append(sb, "(allow file-read*)\n");
	else if (reads.n)
		ok = put_regions(b, "file-read*", "READABLE_ROOT", &reads);
	else
		cd_strbuf_append(sb, "; none\n");

	cd_strbuf_append(sb, "\n; Writes.\n");
	collect(plan, true, &writes);
	if (ok && writes.n)
		ok = put_regions(b, "file-write*", "WRITABLE_ROOT", &writes);
	else if (ok)
		cd_strbuf_append(sb, "; none\n");
	regions_done(&reads);
	regions_done(&writes);
	return ok;
}

/*
 * :minimal grants reads of system paths through rules of its own, which the
 * read roots' exclusions do not narrow: a deny path in reach of them is
 * excluded from each (MINIMAL_EXCLUDED_k).
 */
static bool minimal_exclusions(struct builder *b, char ***ret)
{
	const struct cd_plan *plan = b->in->plan;
	size_t k = 0;

	for (size_t i = 0; i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		if (pp->access != CD_ACCESS_DENY || pp->origin == CD_ORIGIN_IMPLICIT)
			continue;
		char *mac = cd_seatbelt_macos_path(pp->path);
		bool hit = minimal_overlaps(b->in->macos_paths ? mac : pp->path);
		free(mac);
		if (!hit)
			continue;
		char *key = cd_xasprintf("MINIMAL_EXCLUDED_%zu", k++);
		if (!add_param(b, cd_xstrdup(key), pp->path)) {
			free(key);
			return false;
		}
		cd_strv_push_take(ret, key);
	}
	return true;
}

/* ---- globs ---- */

static void put_regex_char(struct cd_strbuf *sb, char c)
{
	if (strchr(".^$|()[]{}*+?\\", c))
		cd_strbuf_append_c(sb, '\\');
	cd_strbuf_append_c(sb, c);
}

static bool byte_in(const uint8_t set[32], unsigned c)
{
	return set[c / 8] >> (c % 8) & 1;
}

static bool bracket_special(unsigned c)
{
	return c == ']' || c == '-' || c == '^' || c == '\\';
}

/*
 * A bracket expression of a glob as a regex bracket expression. The bytes
 * it matches come from the glob matcher itself (cd_glob_bracket), so the
 * regex cannot read a range, an escape or a [:class:] another way. They
 * are written out so that a POSIX regex and one where '\' escapes inside
 * brackets read the same set: ']' first, '-' last, '^' never first, a
 * backslash doubled, runs of three or more as ranges. A set that takes
 * every byte above 0x7f is written as the complement of its ASCII part.
 * Returns NULL, or why the set cannot be carried.
 */
static const char *put_bracket(struct cd_strbuf *sb, const uint8_t matched[32])
{
	uint8_t set[32] = { 0 };
	unsigned high = 0;
	bool empty = true;

	for (unsigned c = 0x80; c < 256; c++)
		high += byte_in(matched, c);
	if (high != 0 && high != 128)
		return "it matches some bytes above 0x7f and not others";
	bool neg = high == 128;
	for (unsigned c = 1; c < 0x80; c++)
		if (c == '/' ? neg : byte_in(matched, c) != neg)
			set[c / 8] |= (uint8_t)(1u << c % 8);
	for (unsigned c = 1; c < 0x80; c++) {
		if (!byte_in(set, c))
			continue;
		if (c < 0x20 || c == 0x7f || c == '"')
			return "it would take a control character or '\"' written in the regex, "
			       "which a Seatbelt regex cannot carry";
		empty = false;
	}
	if (empty)
		return "it matches no character";

	bool caret = byte_in(set, '^'), dash = byte_in(set, '-'), others = false;
	for (unsigned c = 0x20; c < 0x7f; c++)
		others |= byte_in(set, c) && c != '^' && c != '-';
	/* '^' with nothing but perhaps '-' beside it: "\\^" alone, or "[-^]". */
	bool caret_alone = !neg && caret && !others;
	if (caret_alone && !dash) {
		cd_strbuf_append(sb, "\\^");
		return NULL;
	}
	cd_strbuf_append(sb, neg ? "[^" : "[");
	if (byte_in(set, ']'))
		cd_strbuf_append_c(sb, ']');
	for (unsigned c = 0x20; c < 0x7f; c++) {
		if (!byte_in(set, c) || bracket_special(c))
			continue;
		unsigned last = c;
		while (last + 1 < 0x7f && byte_in(set, last + 1) && !bracket_special(last + 1))
			last++;
		if (last - c >= 2) {
			cd_strbuf_append_c(sb, (char)c);
			cd_strbuf_append_c(sb, '-');
			c = last;
		}
		cd_strbuf_append_c(sb, (char)c);
	}
	if (byte_in(set, '\\'))
		cd_strbuf_append(sb, "\\\\");
	if (caret_alone)
		cd_strbuf_append(sb, "-^");
	else if (caret)
		cd_strbuf_append_c(sb, '^');
	if (dash && !caret_alone)
		cd_strbuf_append_c(sb, '-');
	cd_strbuf_append_c(sb, ']');
	return NULL;
}

/* One component of a glob (no '/') as regex; NULL, or why it cannot be. */
static const char *put_component(struct cd_strbuf *sb, const char *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char ch = c[i];
		if (ch == '*') {
			cd_strbuf_append(sb, "[^/]*");
		} else if (ch == '?') {
			cd_strbuf_append(sb, "[^/]");
		} else if (ch == '\\' && i + 1 < n) {
			put_regex_char(sb, c[++i]);
		} else if (ch == '[') {
			uint8_t set[32];
			size_t len = cd_glob_bracket(c + i, n - i, set);
			if (!len) { /* no closing bracket: a literal '[' */
				put_regex_char(sb, ch);
				continue;
			}
			const char *why = put_bracket(sb, set);
			if (why)
				return why;
			i += len - 1;
		} else {
			put_regex_char(sb, ch);
		}
	}
	return NULL;
}

/* A component of n bytes made only of stars, two or more: "**". */
static bool is_globstar(const char *p, size_t n)
{
	return n >= 2 && strspn(p, "*") >= n;
}

/* The next component of a glob at or after p, "" and "." skipped (*n: its length), or NULL. */
static const char *glob_component(const char *p, size_t *n)
{
	for (;;) {
		p += strspn(p, "/");
		if (!*p)
			return NULL;
		*n = strcspn(p, "/");
		if (*n != 1 || p[0] != '.')
			return p;
		p += *n;
	}
}

char *cd_seatbelt_glob_regex(const char *base, const char *pattern, char **reterr)
{
	struct cd_strbuf sb = { 0 };
	bool last_globstar = false;

	if (!sbpl_safe(base) || !sbpl_safe(pattern)) {
		*reterr = cd_xasprintf("the glob '%s' under '%s' holds a character a Seatbelt "
				       "regex cannot carry (a control character or '\"')",
				       pattern, base);
		return NULL;
	}
	if (*pattern == '/')
		base = "/";
	cd_strbuf_append_c(&sb, '^');
	if (!cd_streq(base, "/"))
		for (const char *p = base; *p; p++)
			put_regex_char(&sb, *p);
	bool first = true;
	size_t n, next_n;
	for (const char *p = glob_component(pattern, &n), *next; p; p = next, n = next_n) {
		next = glob_component(p + n, &next_n);
		bool more = next != NULL;
		if (first)
			cd_strbuf_append_c(&sb, '/');
		first = false;
		if (is_globstar(p, n)) {
			/* "**": zero or more directories, or everything inside when last. */
			cd_strbuf_append(&sb, more ? "([^/]*/)*" : "[^/]+(/[^/]*)*");
			last_globstar = !more;
		} else {
			const char *why = put_component(&sb, p, n);
			if (why) {
				*reterr =
					cd_xasprintf("the glob '%s' has a bracket expression that "
						     "cannot be a Seatbelt regex: %s",
						     pattern, why);
				cd_strbuf_done(&sb);
				return NULL;
			}
			if (more)
				cd_strbuf_append_c(&sb, '/');
			last_globstar = false;
		}
	}
	if (first) { /* no component left: the base itself */
		cd_strbuf_done(&sb);
		if (cd_streq(base, "/"))
			return cd_xstrdup("^/[^/]*(/[^/]*)*$");
		cd_strbuf_append_c(&sb, '^');
		for (const char *q = base; *q; q++)
			put_regex_char(&sb, *q);
	}
	if (!last_globstar)
		cd_strbuf_append(&sb, "(/[^/]*)*");
	cd_strbuf_append_c(&sb, '$');
	return cd_strbuf_steal(&sb);
}

static bool put_glob_regex(struct builder *b, const char *base, const char *pattern,
			   struct cd_strset *seen)
{
	char *re = cd_seatbelt_glob_regex(base, pattern, &b->err);
	if (!re)
		return false;
	if (cd_strset_add(seen, re)) {
		cd_strbuf_append(&b->policy, "(deny file-read* file-write* (regex #\"");
		cd_strbuf_append(&b->policy, re);
		cd_strbuf_append(&b->policy, "\"))\n");
	}
	free(re);
	return true;
}

/*
 * A glob under base, and under its macOS name (/private/var, ...). A glob
 * whose first component lies right under / (an absolute one, or one
 * relative to a cwd of /) names /etc, /tmp or /var only through links:
 * Seatbelt sees /private/etc/..., so each of the three its first
 * component matches gets a regex of its own with the rest of the glob.
 */
static bool put_glob(struct builder *b, const char *base, const char *pattern,
		     struct cd_strset *seen)
{
	char *mac = b->in->macos_paths ? cd_seatbelt_macos_path(base) : NULL;
	bool ok = put_glob_regex(b, base, pattern, seen);

	if (ok && mac && !cd_streq(mac, base))
		ok = put_glob_regex(b, mac, pattern, seen);
	free(mac);
	size_t n;
	const char *first = glob_component(pattern, &n);
	if (!ok || !b->in->macos_paths || !first || (*pattern != '/' && !cd_streq(base, "/")) ||
	    is_globstar(first, n))
		return ok; /* "**" first matches /private/etc/... itself */
	static const char *const linked[] = { "etc", "tmp", "var" };
	char *comp = cd_xstrndup(first, n);
	const char *rest = first + n + strspn(first + n, "/");
	for (size_t i = 0; i < CD_ARRAY_SIZE(linked) && ok; i++) {
		if (!cd_glob_match(comp, linked[i]))
			continue;
		char *priv = cd_xasprintf("/private/%s", linked[i]);
		ok = put_glob_regex(b, priv, *rest ? rest : ".", seen);
		free(priv);
	}
	free(comp);
	return ok;
}

/*
 * fn for each deny glob of the profile, with the base its pattern is under:
 * a workspace root for each root (codex-project-roots://), / for an
 * absolute one, else the cwd. set is fn's own. None when the file system is
 * unrestricted (nothing to deny). Stops at the first false.
 */
static bool each_glob(struct builder *b,
		      bool (*fn)(struct builder *b, const char *base, const char *pattern,
				 struct cd_strset *set),
		      struct cd_strset *set)
{
	const struct cd_profile *p = b->in->profile;
	size_t pl = strlen(CD_GLOB_PROJECT_ROOTS_PREFIX);
	bool ok = true;

	if (b->in->plan->fs_unrestricted)
		return true;
	for (size_t i = 0; i < p->n_entries && ok; i++) {
		const char *pat = p->entries[i].path;
		if (p->entries[i].kind != CD_ENTRY_GLOB)
			continue;
		if (!strncmp(pat, CD_GLOB_PROJECT_ROOTS_PREFIX, pl)) {
			for (size_t r = 0; r < b->in->n_workspace_roots && ok; r++)
				ok = fn(b, b->in->workspace_roots[r], pat + pl, set);
		} else {
			ok = fn(b, *pat == '/' ? "/" : b->in->plan->cwd, pat, set);
		}
	}
	return ok;
}

static bool put_globs(struct builder *b)
{
	const struct cd_profile *p = b->in->profile;
	struct cd_strset seen = { 0 };

	for (size_t i = 0; i < p->n_entries && !b->in->plan->fs_unrestricted; i++)
		if (p->entries[i].kind == CD_ENTRY_GLOB) {
			cd_strbuf_append(&b->policy,
					 "\n; Deny globs, for matches made later too.\n");
			break;
		}
	bool ok = each_glob(b, put_glob, &seen);
	cd_strset_done(&seen);
	return ok;
}

/*
 * The caller's own files, last of all: no allow above reopens them. A unix
 * socket is reached by network-outbound, which an enabled network allows
 * whole, so that is denied too.
 */
static bool put_hidden(struct builder *b)
{
	if (!b->in->n_hidden)
		return true;
	cd_strbuf_append(&b->policy, "\n; cordon's own files, hidden from the command.\n");
	for (size_t i = 0; i < b->in->n_hidden; i++) {
		if (!sbpl_safe(b->in->hidden[i])) {
			b->err = cd_xasprintf(
				"cordon serve's own file %s holds a character a Seatbelt "
				"parameter cannot carry (a control character or '\"'), so "
				"it cannot be hidden from the sandbox; give the server a "
				"path without one",
				b->in->hidden[i]);
			return false;
		}
		char *key = cd_xasprintf("HIDDEN_%zu", i);
		cd_strbuf_printf(&b->policy,
				 "(deny file-read* file-write* (literal (param \"%s\")))\n"
				 "(deny network-outbound (literal (param \"%s\")))\n",
				 key, key);
		if (!add_param(b, key, b->in->hidden[i]))
			return false;
	}
	return true;
}

/*
 * Seatbelt's rules name paths, not files: a directory above a narrowed path
 * (a carve-out, a deny glob's fixed part, a hidden file) that the sandbox
 * may rename would take the path out from under its rule, and what lies
 * below would be reached at its new name. Each directory above target (and
 * target itself with self) whose parent is writable is pinned: writes to it
 * denied (a rename or a removal; what is created inside is another path),
 * as the Linux backend pins it with a mount. Each directory once (seen).
 */
static bool pin_above(struct builder *b, const char *target, bool self, struct cd_strset *seen)
{
	char *dir = self ? cd_xstrdup(target) : cd_path_parent(target);
	bool ok = true;

	while (ok && !cd_streq(dir, "/") && cd_strset_add(seen, dir)) {
		char *up = cd_path_parent(dir);
		if (cd_plan_access(b->in->plan, up, NULL) == CD_ACCESS_WRITE) {
			char *key = cd_xasprintf("PINNED_%zu", b->n_pinned++);
			cd_strbuf_printf(&b->policy,
					 "(deny file-write-unlink (literal (param \"%s\")))\n",
					 key);
			ok = add_param(b, key, dir);
		}
		free(dir);
		dir = up;
	}
	free(dir);
	return ok;
}

/* A deny glob's fixed part: base and the leading components without wildcards. */
static char *glob_fixed_dir(const char *base, const char *pattern)
{
	char *dir = cd_xstrdup(*pattern == '/' ? "/" : base);
	size_t n, next_n;
	for (const char *p = glob_component(pattern, &n), *next; p; p = next, n = next_n) {
		next = glob_component(p + n, &next_n);
		if (!next || strcspn(p, "*?[\\") < n)
			break; /* the last component is what is denied, not a directory above it */
		char *comp = cd_xstrndup(p, n);
		char *joined = cd_path_join(dir, comp);
		free(comp);
		free(dir);
		dir = joined;
	}
	return dir;
}

/* pin_above a deny glob's fixed part itself (each_glob's fn). */
static bool pin_glob(struct builder *b, const char *base, const char *pattern,
		     struct cd_strset *seen)
{
	char *dir = glob_fixed_dir(base, pattern);
	bool ok = pin_above(b, dir, true, seen);
	free(dir);
	return ok;
}

/* After every other rule: the directories above what the rules above narrow. */
static bool put_pins(struct builder *b)
{
	const struct cd_plan *plan = b->in->plan;
	struct cd_strset seen = { 0 };
	size_t before = b->policy.len;
	bool ok = true;

	cd_strbuf_append(&b->policy, "\n; Directories above narrowed paths, which a rename "
				     "would take away.\n");
	size_t header = b->policy.len;
	for (size_t i = 0; i < plan->n_paths && ok; i++)
		if (plan->paths[i].carve_out)
			ok = pin_above(b, plan->paths[i].path, false, &seen);
	for (size_t i = 0; i < b->in->n_hidden && ok; i++)
		ok = pin_above(b, b->in->hidden[i], false, &seen);
	ok = ok && each_glob(b, pin_glob, &seen);
	cd_strset_done(&seen);
	if (ok && b->policy.len == header) { /* nothing pinned: no heading either */
		b->policy.len = before;
		b->policy.buf[before] = '\0';
	}
	return ok;
}

/* ---- the plan ---- */

static bool grants_minimal(const struct cd_profile *p)
{
	for (size_t i = 0; i < p->n_entries; i++)
		if (p->entries[i].kind == CD_ENTRY_SPECIAL &&
		    p->entries[i].special == CD_SPECIAL_MINIMAL &&
		    p->entries[i].access != CD_ACCESS_DENY)
			return true;
	return false;
}

struct cd_seatbelt_plan *cd_seatbelt_plan_free(struct cd_seatbelt_plan *sp)
{
	if (!sp)
		return NULL;
	free(sp->policy);
	for (size_t i = 0; i < sp->n_params; i++) {
		free(sp->params[i].key);
		free(sp->params[i].value);
	}
	free(sp->params);
	cd_strv_free(sp->argv);
	cd_strv_free(sp->notes);
	free(sp);
	return NULL;
}

/*
 * Why macOS cannot enforce limit l, or NULL when an rlimit of each process
 * does exactly what it says (as on Linux).
 */
static const char *limit_unenforceable(enum cd_limit l)
{
	switch (l) {
	case CD_LIMIT_CPU_TIME:
		/* Linux kills at the hard limit; xnu signals once and clears its timer. */
		return "macOS sends SIGXCPU once at the limit and never kills, so a command "
		       "that ignores the signal runs on";
	case CD_LIMIT_OPEN_FILES:
	case CD_LIMIT_FILE_SIZE:
	case CD_LIMIT_CORE:
		return NULL;
	case CD_LIMIT_TASKS:
		return "macOS has no cgroups, and RLIMIT_NPROC counts all of the user's "
		       "processes on the host, not the sandbox's";
	case CD_LIMIT_MEMORY:
	case CD_LIMIT_SWAP:
		return "macOS has no cgroups to bound a sandbox's memory (and does not enforce "
		       "RLIMIT_AS)";
	case CD_LIMIT_CPU:
		return "macOS has no cgroups to bound a sandbox's CPU quota";
	case CD_LIMIT_PRIVATE_TMP:
		return "macOS has no mount namespaces to give a sandbox a /tmp of its own";
	case CD_LIMIT_INOTIFY_INSTANCES:
	case CD_LIMIT_INOTIFY_WATCHES:
		return "macOS has no inotify";
	case CD_LIMIT_COUNT:
		break;
	}
	return "unknown limit";
}

/* The limits into sp->rlimits; false with *reterr for the first one macOS cannot enforce. */
static bool plan_limits(const struct cd_limits *L, struct cd_seatbelt_plan *sp, char **reterr)
{
	for (int l = 0; L && l < CD_LIMIT_COUNT; l++) {
		if (!cd_limits_has(L, (enum cd_limit)l))
			continue;
		const char *why = limit_unenforceable((enum cd_limit)l);
		if (why) {
			const struct cd_limit_info *i = cd_limit_info((enum cd_limit)l);
			*reterr = cd_xasprintf(
				"the Seatbelt backend cannot enforce the %s limit: %s; "
				"leave it out (%s%s, or limits.%s in the profile)",
				i->name, why, l == CD_LIMIT_PRIVATE_TMP ? "--" : "--limit-",
				i->name, i->key);
			return false;
		}
		cd_limits_put(&sp->rlimits, (enum cd_limit)l, L->v[l]);
	}
	return true;
}

int cd_seatbelt_plan_limits(const struct cd_limits *L, struct cd_seatbelt_plan **ret, char **reterr)
{
	struct cd_seatbelt_plan *sp = cd_xcalloc(1, sizeof(*sp));
	*ret = NULL;
	if (!plan_limits(L, sp, reterr)) {
		cd_seatbelt_plan_free(sp);
		return -EOPNOTSUPP;
	}
	*ret = sp;
	return 0;
}

char *cd_seatbelt_limits_text(const struct cd_limits *L)
{
	struct cd_strbuf sb = { 0 };
	for (int l = 0; l < CD_LIMIT_COUNT; l++) {
		int rl = cd_limit_rlimit((enum cd_limit)l);
		if (!cd_limits_has(L, (enum cd_limit)l) || rl < 0)
			continue;
		if (!sb.len)
			cd_strbuf_append(&sb, "  limits (rlimits of each process, set before the "
					      "wrapper, which the command inherits):\n");
		char *v = cd_limit_format((enum cd_limit)l, L->v[l]);
		cd_strbuf_printf(&sb, "    %-11s %-10s %s\n", cd_limit_info((enum cd_limit)l)->name,
				 v, cd_rlimit_name((enum cd_rlimit)rl));
		free(v);
	}
	return cd_strbuf_steal(&sb);
}

int cd_seatbelt_plan_build(const struct cd_seatbelt_input *in, struct cd_seatbelt_plan **ret,
			   char **reterr)
{
	struct builder b = { .in = in };
	const struct cd_plan *plan = in->plan;

	*ret = NULL;
	b.sp = cd_xcalloc(1, sizeof(*b.sp));
	/* Before anything else, a disabled profile included: its command would run unbounded. */
	if (!plan_limits(in->limits, b.sp, reterr)) {
		cd_seatbelt_plan_free(b.sp);
		return -EOPNOTSUPP;
	}
	if (plan->type == CD_PROFILE_DISABLED) {
		*ret = b.sp;
		return 0;
	}
	b.sp->sandboxed = true;
	put_base(&b.policy);
	/*
	 * Order matters: the last rule that matches decides. Deny globs come
	 * last, so that nothing allowed above (:minimal included) reopens them.
	 */
	bool ok = put_files(&b);
	if (ok && !plan->fs_unrestricted && !plan->full_read && grants_minimal(in->profile)) {
		char **excl = NULL;
		ok = minimal_exclusions(&b, &excl);
		if (ok)
			put_minimal(&b.policy, excl);
		cd_strv_free(excl);
	}
	if (ok && plan->network == CD_NET_ENABLED)
		put_network(&b.policy);
	else if (ok && plan->network == CD_NET_MANAGED)
		put_proxy_network(&b.policy, in);
	ok = ok && put_globs(&b);
	ok = ok && put_hidden(&b);
	ok = ok && put_pins(&b);
	cd_strset_done(&b.noted);
	if (!ok) {
		*reterr = b.err;
		cd_strbuf_done(&b.policy);
		cd_seatbelt_plan_free(b.sp);
		return -EINVAL;
	}
	b.sp->policy = cd_strbuf_steal(&b.policy);

	cd_strv_push(&b.sp->argv, CD_SEATBELT_EXEC);
	cd_strv_push(&b.sp->argv, "-p");
	cd_strv_push(&b.sp->argv, b.sp->policy);
	for (size_t i = 0; i < b.sp->n_params; i++)
		cd_strv_push_take(&b.sp->argv, cd_xasprintf("-D%s=%s", b.sp->params[i].key,
							    b.sp->params[i].value));
	cd_strv_push(&b.sp->argv, "--");
	*ret = b.sp;
	return 0;
}
