/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli-policy.h"
#include "shared/log.h"
#include "spawn.h"

enum {
	OPT_HELP = 1,
	OPT_BACKEND,
	OPT_JSON,
	OPT_LIST_PROFILES,
};

const struct cd_cli_opt cd_explain_options[] = {
	{ "help", 'h', false, OPT_HELP },
	{ "backend", 0, true, OPT_BACKEND },
	{ "json", 0, false, OPT_JSON },
	{ "list-profiles", 0, false, OPT_LIST_PROFILES },
	CD_CLI_POLICY_OPTIONS,
	{ NULL, 0, false, 0 },
};

static void explain_help(void)
{
	printf("Usage: cordon explain [POLICY OPTIONS] [--backend linux|seatbelt|windows] "
	       "[--json]\n"
	       "       cordon explain --list-profiles\n"
	       "\n"
	       "Show the bound policy (every path with its access, type and reason) and the\n"
	       "wrapper the backend would build: Landlock rules, seccomp rules, namespaces,\n"
	       "mounts and degradations. Exit status 125 when the plan would be refused.\n"
	       "\n"
	       "%s"
	       "\n"
	       "Explain options:\n"
	       "  --backend NAME          the backend to explain: linux (this host's), or\n"
	       "                          seatbelt (the macOS sandbox-exec policy and argv\n"
	       "                          a macOS host would run, planned from here) or\n"
	       "                          windows (the restricted token, its SIDs and ACEs)\n"
	       "  --json                  one JSON object instead of text\n"
	       "  --list-profiles         list the profile names --profile finds, each with\n"
	       "                          the file it comes from or \"built-in\", and exit\n"
	       "  -h, --help              show this help\n",
	       cd_cli_policy_help);
}

static char *sc_condition(const struct cd_sc_rule *r)
{
	switch (r->cmp) {
	case CD_SC_ALWAYS:
		return cd_xstrdup("always");
	case CD_SC_ARG_MASKED_EQ:
		return cd_xasprintf("(arg%u & 0x%" PRIx64 ") == 0x%" PRIx64, r->arg, r->mask,
				    r->value);
	case CD_SC_ARG_NE:
		return cd_xasprintf("arg%u != %" PRIu64, r->arg, r->value);
	case CD_SC_ARG_NOT_IN2:
		return cd_xasprintf("arg%u not in {%" PRIu64 ", %" PRIu64 "}", r->arg, r->value,
				    r->value2);
	case CD_SC_ARG_MASKED_ANY:
		return cd_xasprintf("(arg%u & 0x%" PRIx64 ") != 0", r->arg, r->mask);
	case CD_SC_ARG_MASKED_NOT_IN2:
		return cd_xasprintf("(arg%u & 0x%" PRIx64 ") not in {%" PRIu64 ", %" PRIu64 "}",
				    r->arg, r->mask, r->value, r->value2);
	case CD_SC_CMP_COUNT:
		break;
	}
	return cd_xstrdup("?");
}

static const char *action_name(enum cd_sc_action a)
{
	const char *n = cd_sc_action_name(a);
	return n ? n : "?";
}

static bool sc_rule_applies(const struct cd_linux_plan *lp, const struct cd_sc_rule *r)
{
	return lp->seccomp && (r->when & lp->sc_when);
}

/* An allowed-on-purpose entry of the audit that holds for this plan. */
static bool sc_allowed_applies(const struct cd_linux_plan *lp, const struct cd_sc_allowed *a)
{
	return lp->seccomp && !(a->unless & lp->sc_when);
}

/* ---- text ---- */

/* The resource limits of the plan, each with how it is enforced here. */
static void print_limits(const struct cd_cli_bound *b, const struct cd_linux_plan *lp)
{
	const struct cd_limits_plan *p = lp->limits;
	const struct cd_limits_host *h = &b->host.lim;
	if (!p)
		return;
	printf("  limits:\n");
	/* The names' column as wide as the longest name shown (11 at least). */
	int width = 11;
	for (int l = 0; l < CD_LIMIT_COUNT; l++)
		if (cd_limits_has(&p->limits, (enum cd_limit)l) &&
		    (int)strlen(cd_limit_info((enum cd_limit)l)->name) > width)
			width = (int)strlen(cd_limit_info((enum cd_limit)l)->name);
	for (int l = 0; l < CD_LIMIT_COUNT; l++) {
		if (!cd_limits_has(&p->limits, (enum cd_limit)l))
			continue;
		cleanup_free char *v = cd_limit_format((enum cd_limit)l, p->limits.v[l]);
		printf("    %-*s %-10s %s\n", width, cd_limit_info((enum cd_limit)l)->name, v,
		       p->detail[l] ? p->detail[l] : "");
	}
	if (p->cgroup)
		printf("    the sandbox gets a cgroup of its own in %s; cgroup.kill ends whatever "
		       "is left in it when the command exits\n",
		       h->where);
	else if (h->probed)
		printf("    no cgroup: %s\n", h->why);
	if (lp->private_tmp)
		printf("    private /tmp: nothing under the host's /tmp is visible; the sandbox "
		       "gets %s to it\n",
		       !lp->landlock		     ? "whatever the file system allows"
		       : lp->private_tmp_rights == 0 ? "no access"
		       : lp->private_tmp_rights & CD_LL_FS_WRITE_FILE ? "write access"
								      : "read access");
}

/* The Seatbelt wrapper: what a macOS host would exec before the command. */
static void print_seatbelt(const struct cd_seatbelt_plan *sp, char *const *env)
{
	cleanup_free char *h1 = NULL, *h2 = NULL;

	printf("\nmacOS Seatbelt wrapper (sandboxType macosSeatbelt):\n");
	cleanup_free char *limits = cd_seatbelt_limits_text(&sp->rlimits);
	fputs(limits, stdout);
	if (!sp->sandboxed) {
		printf("  none: the profile disables the sandbox (plain exec)\n");
		return;
	}
	printf("  exec: %s -p POLICY%s -- COMMAND...\n", CD_SEATBELT_EXEC,
	       sp->n_params ? " -DKEY=VALUE..." : "");
	for (char **n = sp->notes; n && *n; n++)
		printf("  note: %s\n", cd_vis(*n, &h1));
	printf("  parameters:%s\n", sp->n_params ? "" : " none");
	for (size_t i = 0; i < sp->n_params; i++)
		printf("    -D%s=%s\n", cd_vis(sp->params[i].key, &h1),
		       cd_vis(sp->params[i].value, &h2));
	if (env) {
		printf("  environment (the managed network's proxy variables):\n");
		for (char *const *e = env; *e; e++)
			printf("    %s\n", cd_vis(*e, &h1));
	}
	printf("  policy:\n");
	for (const char *l = sp->policy; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) : strlen(l);
		printf("    %.*s\n", (int)n, l);
		l += n + (e != NULL);
	}
}

static const char *sid_role(enum cd_win_sid_role r)
{
	static const char *const names[] = { "readonly", "workspace", "writable root", "logon",
					     "everyone" };
	return names[r];
}

/* The Windows restricted token: what a Windows host would create and set. */
static void print_windows(const struct cd_windows_plan *wp)
{
	cleanup_free char *h1 = NULL, *h2 = NULL;

	printf("\nWindows restricted token (sandboxType windowsRestrictedToken):\n");
	if (!wp->sandboxed) {
		printf("  none: the profile disables the sandbox (plain CreateProcess)\n");
		return;
	}
	for (char **n = wp->notes; n && *n; n++)
		printf("  note: %s\n", cd_vis(*n, &h1));
	printf("  token: CreateRestrictedToken(%s)\n", wp->token_flags);
	printf("  restricting SIDs, in order:\n");
	for (size_t i = 0; i < wp->n_sids; i++)
		printf("    %-45s %s%s%s\n", wp->sids[i].sid, sid_role(wp->sids[i].role),
		       wp->sids[i].key ? " " : "",
		       wp->sids[i].key ? cd_vis(wp->sids[i].key, &h1) : "");
	printf("  ACEs (inheritable; they stay after the run):\n");
	for (size_t i = 0; i < wp->n_aces; i++) {
		const struct cd_win_ace *a = &wp->aces[i];
		printf("    %-10s %s to %s%s: %s\n",
		       a->kind == CD_WIN_ACE_ALLOW ? "allow" : "deny-write", cd_vis(a->path, &h1),
		       a->sid, a->create_dir ? " (made first, removed after if empty)" : "",
		       cd_vis(a->why, &h2));
	}
	printf("    rights: allow %s; deny-write %s\n", CD_WIN_RIGHTS_ALLOW,
	       CD_WIN_RIGHTS_DENY_WRITE);
	if (wp->n_env || wp->path_prepend)
		printf("  environment:\n");
	for (size_t i = 0; i < wp->n_env; i++)
		printf("    %s=%s\n", wp->env[i].name, cd_vis(wp->env[i].value, &h1));
	if (wp->path_prepend)
		printf("    PATH: %s first (ssh and scp stubs that fail)\n",
		       cd_vis(wp->path_prepend, &h1));
	printf("  degraded: %s\n", wp->degraded && wp->degraded[0] ? "" : "none");
	for (char **d = wp->degraded; d && *d; d++)
		printf("    - %s\n", cd_vis(*d, &h1));
}

/* The proxy endpoint of a managed network, as --network-proxy spells it. */
static char *proxy_endpoint_str(const struct cd_proxy_endpoint *e)
{
	if (e->is_unix)
		return cd_xasprintf("unix:%s", e->path);
	return cd_xasprintf("tcp:%u.%u.%u.%u:%u", e->addr[0], e->addr[1], e->addr[2], e->addr[3],
			    e->port);
}

/* The rules of cordon's own proxy (a managed network without --network-proxy). */
static void print_own_proxy(const struct cd_netpolicy *np)
{
	cleanup_free char *h = NULL;

	printf("  proxy: cordon's own, started for the run on a unix socket in a private "
	       "0700 directory, stopped when the command ends; one audit line per "
	       "connection on stderr\n");
	printf("    mode: %s%s\n", cd_netmode_to_string(np->mode),
	       np->mode == CD_NETMODE_LIMITED
		       ? " (GET, HEAD and OPTIONS on plain HTTP only; no CONNECT)"
		       : " (CONNECT tunnels and plain HTTP)");
	if (np->socks5)
		printf("    socks5: on (socks5h: CONNECT to a name, judged as an HTTP CONNECT is; "
		       "same relay port)\n");
	else
		printf("    socks5: off (--socks5)\n");
	if (np->n_allow == 0)
		printf("    allow: nothing: no domain is allowed, so the command has no network "
		       "(--allow-domain)\n");
	for (size_t i = 0; i < np->n_allow; i++)
		printf("    allow: %s\n", cd_vis(np->allow[i], &h));
	for (size_t i = 0; i < np->n_deny; i++)
		printf("    deny:  %s (wins over allow)\n", cd_vis(np->deny[i], &h));
	for (size_t i = 0; i < np->n_cidrs; i++) {
		char a[64];
		printf("    allow addresses: %s/%u\n",
		       cd_ipaddr_format(&np->cidrs[i].addr, a, sizeof(a)), np->cidrs[i].prefix);
	}
	printf("    refused unless a CIDR above allows them: IP literals, and names that "
	       "resolve to loopback, private, link-local, metadata or this host's "
	       "addresses\n");
}

static void print_text(const struct cd_cli_bound *b)
{
	const struct cd_profile *prof = b->profile;
	const struct cd_plan *plan = b->plan;
	const struct cd_linux_plan *lp = b->lp;
	/* Copies made by cd_vis(), each holder reused line after line. */
	cleanup_free char *h1 = NULL, *h2 = NULL;

	if (prof) {
		printf("Profile: %s\n", cd_vis(b->profile_name, &h1));
		printf("  origin:  %s\n",
		       cd_vis(prof->origin ? prof->origin : b->profile_path, &h1));
		if (prof->description)
			printf("  about:   %s\n", cd_vis(prof->description, &h1));
		printf("  type:    %s%s\n", cd_profile_type_name(prof->type),
		       prof->type == CD_PROFILE_MANAGED && prof->fs_unrestricted
			       ? " (file system unrestricted)"
			       : "");
		printf("  network: %s\n", cd_network_name(plan ? plan->network : prof->network));
	}
	if (plan) {
		printf("  cwd:     %s\n", cd_vis(plan->cwd ? plan->cwd : b->cwd, &h1));
		printf("\nPaths (the most specific path wins; anything not listed is denied):\n");
		if (plan->fs_unrestricted)
			printf("  (file system unrestricted: every path is writable)\n");
		size_t wp = 4, wt = 4;
		for (size_t i = 0; i < plan->n_paths; i++) {
			size_t n = strlen(cd_vis(plan->paths[i].path, &h1));
			wp = n > wp ? n : wp;
			n = strlen(cd_file_type_name(plan->paths[i].type));
			wt = n > wt ? n : wt;
		}
		for (size_t i = 0; i < plan->n_paths; i++) {
			const struct cd_plan_path *pp = &plan->paths[i];
			printf("  %-5s  %-*s  %-*s  %s%s\n", cd_access_name(pp->access), (int)wt,
			       cd_file_type_name(pp->type), (int)wp, cd_vis(pp->path, &h1),
			       cd_vis(pp->why ? pp->why : "", &h2),
			       pp->carve_out ? " [carve-out]" : "");
		}
		bool any = plan->notes && plan->notes[0];
		if (any) {
			printf("\nNotes:\n");
			for (char **n = plan->notes; *n; n++)
				printf("  - %s\n", cd_vis(*n, &h1));
		}
	}

	if (b->sp)
		print_seatbelt(b->sp, b->sp_env);
	if (b->wp)
		print_windows(b->wp);
	if (b->probed || lp)
		printf("\nLinux wrapper:\n");
	if (b->probed)
		printf("  host: Landlock ABI %u, seccomp %s, user namespaces %s, root %s\n",
		       b->host.landlock_abi, b->host.seccomp ? "yes" : "no",
		       b->host.userns ? "yes" : "no", b->host.is_root ? "yes" : "no");
	if (b->host.lim.probed) {
		const struct cd_limits_host *l = &b->host.lim;
		if (!l->cgroup) {
			printf("  cgroups: none for the sandboxes: %s\n", cd_vis(l->why, &h1));
		} else {
			printf("  cgroups: the sandboxes' go in %s; controllers:",
			       cd_vis(l->where, &h1));
			for (unsigned i = 0; i < CD_CG_COUNT; i++)
				if (l->controllers & (1u << i))
					printf(" %s", cd_cg_controller_name(i));
			printf("%s\n", l->controllers ? "" : " none");
		}
	}
	if (lp) {
		if (!lp->sandboxed) {
			printf("  not sandboxed: the profile disables the sandbox\n");
		} else {
			if (lp->landlock) {
				cleanup_free char *fs = cd_ll_fs_rights_names(lp->ll_handled_fs);
				cleanup_free char *net = cd_ll_net_rights_names(lp->ll_handled_net);
				cleanup_free char *sc = cd_ll_scopes_names(lp->ll_scoped);
				printf("  Landlock ABI %u\n", lp->landlock_abi);
				printf("    handled fs:  %s\n", *fs ? fs : "(none)");
				printf("    handled net: %s\n", *net ? net : "(none)");
				printf("    scoped:      %s\n", *sc ? sc : "(none)");
				printf("    rules (%zu):\n", lp->n_ll_rules);
				for (size_t i = 0; i < lp->n_ll_rules; i++) {
					cleanup_free char *rr =
						cd_ll_fs_rights_names(lp->ll_rules[i].allowed);
					printf("      %s%s: %s\n",
					       cd_vis(lp->ll_rules[i].path, &h1),
					       lp->ll_rules[i].is_dir ? "" : " (file)", rr);
				}
				printf("    at spawn: a terminal or other device on fds 0-2, with "
				       "the access it was opened with (and /dev/tty for the "
				       "controlling terminal)%s\n",
				       !lp->private_pts	  ? ""
				       : lp->private_ptmx ? "; the private /dev/pts and /dev/ptmx"
							  : "; the private /dev/pts");
			} else {
				printf("  Landlock: not used (the file system is unrestricted)\n");
			}
			if (lp->seccomp) {
				size_t n = 0, w = 7;
				for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++)
					if (sc_rule_applies(lp, r)) {
						n++;
						w = strlen(r->syscall) > w ? strlen(r->syscall) : w;
					}
				printf("  seccomp: %zu rules\n", n);
				for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++) {
					if (!sc_rule_applies(lp, r))
						continue;
					cleanup_free char *cond = sc_condition(r);
					printf("    %-*s  %-6s  %s  (%s)\n", (int)w, r->syscall,
					       action_name(r->action), cond, r->why ? r->why : "");
				}
				printf("  seccomp allows on purpose (see cordon-sandbox(7)):\n");
				for (const struct cd_sc_allowed *a = cd_sc_allowed; a->calls; a++)
					if (sc_allowed_applies(lp, a))
						printf("    %s\n      (%s)\n", a->calls, a->why);
			} else {
				printf("  seccomp: not used\n");
			}
			const char *ns[5];
			size_t n_ns = cd_linux_plan_namespaces(lp, ns);
			printf("  namespaces:");
			for (size_t i = 0; i < n_ns; i++)
				printf("%s %s", i ? "," : "", ns[i]);
			printf("%s\n", n_ns ? "" : " none");
			if (lp->ro_root)
				printf("  read-only mounts: everything but the writable paths, so "
				       "that modes, owners, times, extended attributes and flags "
				       "of files outside them cannot be changed\n");
			if (lp->private_pts)
				printf("  terminals: a private /dev/pts, so the host's terminals "
				       "cannot be opened; /dev/ptmx makes new ones there\n");
			if (lp->pid_ns)
				printf("  pid namespace: the command runs under an init that kills "
				       "what is left when it exits, and everything dies with "
				       "cordon\n");
			if (lp->net_managed) {
				cleanup_free char *ep = b->own_proxy
								? cd_xstrdup("cordon's own (below)")
								: proxy_endpoint_str(&lp->proxy);
				printf("  managed network: only lo in the network namespace; a "
				       "relay on " CD_RELAY_ADDR ":" CD_RELAY_PORT_STR
				       " there, outside the sandbox, connects each connection "
				       "to the proxy %s and nothing else\n",
				       ep);
				if (b->own_proxy)
					print_own_proxy(b->netpol);
				printf("  proxy variables set:\n");
				bool socks5 = b->own_proxy && b->netpol->socks5;
				for (const struct cd_env_pair *e = cd_managed_proxy_env; e->name;
				     e++)
					printf("    %s=%s\n", e->name,
					       cd_env_pair_value(e, socks5));
			}
			if (lp->n_mounts) {
				printf("  mounts:\n");
				for (size_t i = 0; i < lp->n_mounts; i++)
					printf("    %-9s %s  (%s)\n",
					       cd_mount_op_name(lp->mounts[i].op),
					       cd_vis(lp->mounts[i].path, &h1),
					       cd_vis(lp->mounts[i].why ? lp->mounts[i].why : "",
						      &h2));
			}
		}
		print_limits(b, lp);
		printf("  degraded: %s\n", lp->degraded && lp->degraded[0] ? "" : "none");
		for (char **d = lp->degraded; d && *d; d++)
			printf("    - %s\n", cd_vis(*d, &h1));
		for (char **n = lp->notes; n && *n; n++)
			printf("  note: %s\n", cd_vis(*n, &h1));
	}
	if (b->refusal)
		printf("%sRefused: %s\n", prof ? "\n" : "", cd_vis(b->refusal, &h1));
}

/* ---- JSON ---- */

/*
 * A JSON string for s, never NULL for a non-NULL s. Paths are bytes, and
 * jansson's json_string() returns NULL for anything that is not UTF-8,
 * which json_object_set_new() would silently drop, key and all (a refusal
 * naming such a path would vanish). Invalid bytes become U+FFFD, as on the
 * wire.
 */
static json_t *jstr(const char *s)
{
	json_t *j = json_string(s);

	if (!j && s) {
		char *l = cd_utf8_lossy(s);
		j = json_string(l);
		free(l);
	}
	return j;
}

static json_t *strv_json(char **v)
{
	json_t *a = json_array();
	for (char **s = v; s && *s; s++)
		json_array_append_new(a, jstr(*s));
	return a;
}

/* "a b c" -> ["a", "b", "c"] (takes s). */
static json_t *words_json(char *s)
{
	json_t *a = json_array();
	char *save = NULL;
	for (char *w = strtok_r(s, " ", &save); w; w = strtok_r(NULL, " ", &save))
		json_array_append_new(a, jstr(w));
	free(s);
	return a;
}

/*
 * {"tasks": {"value": 20, "by": "rlimit", "detail": "..."}, ..., "cgroup": true},
 * values in the limit's unit (bytes, seconds; cpu in CPUs), or null without limits.
 */
static json_t *limits_json(const struct cd_limits_plan *p)
{
	if (!p)
		return json_null();
	json_t *o = json_object();
	for (int l = 0; l < CD_LIMIT_COUNT; l++) {
		if (!cd_limits_has(&p->limits, (enum cd_limit)l))
			continue;
		const struct cd_limit_info *i = cd_limit_info((enum cd_limit)l);
		json_t *x = json_object();
		json_object_set_new(x, "value",
				    i->unit == CD_UNIT_MILLICPUS
					    ? json_real((double)p->limits.v[l] / 1000.0)
					    : json_integer((json_int_t)p->limits.v[l]));
		json_object_set_new(x, "by", jstr(cd_limit_how_name(p->how[l])));
		json_object_set_new(x, "detail", jstr(p->detail[l] ? p->detail[l] : ""));
		json_object_set_new(o, i->key, x);
	}
	json_object_set_new(o, "cgroup", json_boolean(p->cgroup));
	return o;
}

static json_t *own_proxy_json(const struct cd_netpolicy *np)
{
	json_t *o = json_object(), *al = json_array(), *de = json_array(), *ci = json_array();
	char a[64];

	json_object_set_new(o, "mode", jstr(cd_netmode_to_string(np->mode)));
	for (size_t i = 0; i < np->n_allow; i++)
		json_array_append_new(al, jstr(np->allow[i]));
	for (size_t i = 0; i < np->n_deny; i++)
		json_array_append_new(de, jstr(np->deny[i]));
	for (size_t i = 0; i < np->n_cidrs; i++) {
		cleanup_free char *c =
			cd_xasprintf("%s/%u", cd_ipaddr_format(&np->cidrs[i].addr, a, sizeof(a)),
				     np->cidrs[i].prefix);
		json_array_append_new(ci, jstr(c));
	}
	json_object_set_new(o, "allow_domains", al);
	json_object_set_new(o, "deny_domains", de);
	json_object_set_new(o, "allow_cidrs", ci);
	json_object_set_new(o, "network", json_boolean(np->n_allow > 0));
	json_object_set_new(o, "socks5", json_boolean(np->socks5));
	return o;
}

static json_t *linux_json(const struct cd_linux_plan *lp, bool b_own,
			  const struct cd_netpolicy *b_netpol)
{
	json_t *l = json_object();
	json_object_set_new(l, "sandboxed", json_boolean(lp->sandboxed));

	json_t *ll = json_object();
	json_object_set_new(ll, "enabled", json_boolean(lp->landlock));
	json_object_set_new(ll, "abi", json_integer(lp->landlock_abi));
	json_object_set_new(ll, "handled_fs", words_json(cd_ll_fs_rights_names(lp->ll_handled_fs)));
	json_object_set_new(ll, "handled_net",
			    words_json(cd_ll_net_rights_names(lp->ll_handled_net)));
	json_object_set_new(ll, "scoped", words_json(cd_ll_scopes_names(lp->ll_scoped)));
	json_t *rules = json_array();
	for (size_t i = 0; i < lp->n_ll_rules; i++) {
		json_t *r = json_object();
		json_object_set_new(r, "path", jstr(lp->ll_rules[i].path));
		json_object_set_new(r, "is_dir", json_boolean(lp->ll_rules[i].is_dir));
		json_object_set_new(r, "rights",
				    words_json(cd_ll_fs_rights_names(lp->ll_rules[i].allowed)));
		json_array_append_new(rules, r);
	}
	json_object_set_new(ll, "rules", rules);
	json_object_set_new(l, "landlock", ll);

	json_t *sc = json_object();
	json_object_set_new(sc, "enabled", json_boolean(lp->seccomp));
	json_t *scr = json_array();
	for (const struct cd_sc_rule *r = cd_sc_rules; r->syscall; r++) {
		if (!sc_rule_applies(lp, r))
			continue;
		cleanup_free char *cond = sc_condition(r);
		json_t *o = json_object();
		json_object_set_new(o, "syscall", jstr(r->syscall));
		json_object_set_new(o, "action", jstr(action_name(r->action)));
		json_object_set_new(o, "condition", jstr(cond));
		json_object_set_new(o, "why", jstr(r->why ? r->why : ""));
		json_array_append_new(scr, o);
	}
	json_object_set_new(sc, "rules", scr);
	json_t *sca = json_array();
	for (const struct cd_sc_allowed *a = cd_sc_allowed; a->calls; a++) {
		if (!sc_allowed_applies(lp, a))
			continue;
		json_t *o = json_object();
		json_object_set_new(o, "syscalls", words_json(cd_xstrdup(a->calls)));
		json_object_set_new(o, "why", jstr(a->why));
		json_array_append_new(sca, o);
	}
	json_object_set_new(sc, "allowed", sca);
	json_object_set_new(l, "seccomp", sc);

	json_t *ns = json_object();
	json_object_set_new(ns, "user", json_boolean(lp->user_ns));
	json_object_set_new(ns, "mount", json_boolean(lp->mount_ns));
	json_object_set_new(ns, "ipc", json_boolean(lp->ipc_ns));
	json_object_set_new(ns, "pid", json_boolean(lp->pid_ns));
	json_object_set_new(ns, "network", json_boolean(lp->net_ns));
	json_object_set_new(l, "namespaces", ns);
	if (lp->net_managed) {
		json_t *mn = json_object(), *env = json_object();
		cleanup_free char *ep = proxy_endpoint_str(&lp->proxy);
		json_object_set_new(mn, "relay", jstr(CD_RELAY_ADDR ":" CD_RELAY_PORT_STR));
		json_object_set_new(mn, "proxy", b_own ? json_null() : jstr(ep));
		if (b_own)
			json_object_set_new(mn, "own_proxy", own_proxy_json(b_netpol));
		bool socks5 = b_own && b_netpol->socks5;
		for (const struct cd_env_pair *e = cd_managed_proxy_env; e->name; e++)
			json_object_set_new(env, e->name, jstr(cd_env_pair_value(e, socks5)));
		json_object_set_new(mn, "env", env);
		json_object_set_new(l, "managed_network", mn);
	}
	json_object_set_new(l, "read_only_root", json_boolean(lp->ro_root));
	json_object_set_new(l, "private_pts", json_boolean(lp->private_pts));

	json_t *m = json_array();
	for (size_t i = 0; i < lp->n_mounts; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "op", jstr(cd_mount_op_name(lp->mounts[i].op)));
		json_object_set_new(o, "path", jstr(lp->mounts[i].path));
		json_object_set_new(o, "why", jstr(lp->mounts[i].why ? lp->mounts[i].why : ""));
		json_array_append_new(m, o);
	}
	json_object_set_new(l, "mounts", m);
	json_object_set_new(l, "degraded", strv_json(lp->degraded));
	json_object_set_new(l, "notes", strv_json(lp->notes));
	json_object_set_new(l, "private_tmp",
			    lp->private_tmp ? json_integer((json_int_t)lp->private_tmp_size)
					    : json_null());
	json_object_set_new(l, "limits", limits_json(lp->limits));
	return l;
}

/* argv is the exact wrapper (null when the profile disables the sandbox). */
static json_t *seatbelt_json(const struct cd_seatbelt_plan *sp, char *const *env)
{
	json_t *o = json_object();
	json_object_set_new(o, "sandboxType", jstr("macosSeatbelt"));
	json_object_set_new(o, "sandboxed", json_boolean(sp->sandboxed));
	json_object_set_new(o, "argv", sp->argv ? strv_json(sp->argv) : json_null());
	json_object_set_new(o, "policy", sp->policy ? jstr(sp->policy) : json_null());
	json_t *params = json_array();
	for (size_t i = 0; i < sp->n_params; i++) {
		json_t *p = json_object();
		json_object_set_new(p, "key", jstr(sp->params[i].key));
		json_object_set_new(p, "value", jstr(sp->params[i].value));
		json_array_append_new(params, p);
	}
	json_object_set_new(o, "params", params);
	json_object_set_new(o, "notes", strv_json(sp->notes));
	/* The rlimits the launcher sets, {key: value in the limit's unit}. */
	json_t *lim = json_object();
	for (int l = 0; l < CD_LIMIT_COUNT; l++)
		if (cd_limits_has(&sp->rlimits, (enum cd_limit)l))
			json_object_set_new(lim, cd_limit_info((enum cd_limit)l)->key,
					    json_integer((json_int_t)sp->rlimits.v[l]));
	json_object_set_new(o, "limits", lim);
	/* A managed network: the variables the command gets, {NAME: VALUE}. */
	json_t *jenv = json_object();
	for (char *const *e = env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		char *name = cd_xstrndup(*e, (size_t)(eq - *e));
		json_object_set_new(jenv, name, jstr(eq + 1));
		free(name);
	}
	json_object_set_new(o, "env", jenv);
	return o;
}

static json_t *windows_json(const struct cd_windows_plan *wp)
{
	json_t *o = json_object();
	json_object_set_new(o, "sandboxType", jstr("windowsRestrictedToken"));
	json_object_set_new(o, "sandboxed", json_boolean(wp->sandboxed));
	json_object_set_new(o, "tokenFlags", wp->token_flags ? jstr(wp->token_flags) : json_null());
	json_t *sids = json_array();
	for (size_t i = 0; i < wp->n_sids; i++) {
		json_t *s = json_object();
		json_object_set_new(s, "sid", jstr(wp->sids[i].sid));
		json_object_set_new(s, "role", jstr(sid_role(wp->sids[i].role)));
		json_object_set_new(s, "key",
				    wp->sids[i].key ? jstr(wp->sids[i].key) : json_null());
		json_array_append_new(sids, s);
	}
	json_object_set_new(o, "restrictingSids", sids);
	json_t *aces = json_array();
	for (size_t i = 0; i < wp->n_aces; i++) {
		const struct cd_win_ace *a = &wp->aces[i];
		json_t *x = json_object();
		json_object_set_new(x, "path", jstr(a->path));
		json_object_set_new(x, "kind",
				    jstr(a->kind == CD_WIN_ACE_ALLOW ? "allow" : "deny-write"));
		json_object_set_new(x, "sid", jstr(a->sid));
		json_object_set_new(x, "rights",
				    jstr(a->kind == CD_WIN_ACE_ALLOW ? CD_WIN_RIGHTS_ALLOW
								     : CD_WIN_RIGHTS_DENY_WRITE));
		json_object_set_new(x, "createDir", json_boolean(a->create_dir));
		json_object_set_new(x, "why", jstr(a->why));
		json_array_append_new(aces, x);
	}
	json_object_set_new(o, "aces", aces);
	json_t *env = json_object();
	for (size_t i = 0; i < wp->n_env; i++)
		json_object_set_new(env, wp->env[i].name, jstr(wp->env[i].value));
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "pathPrepend",
			    wp->path_prepend ? jstr(wp->path_prepend) : json_null());
	json_object_set_new(o, "degraded", strv_json(wp->degraded));
	json_object_set_new(o, "notes", strv_json(wp->notes));
	return o;
}

static json_t *explain_json(const struct cd_cli_bound *b)
{
	json_t *root = json_object();
	const struct cd_profile *prof = b->profile;
	const struct cd_plan *plan = b->plan;

	if (prof) {
		json_t *p = json_object();
		json_object_set_new(p, "name", jstr(b->profile_name));
		json_object_set_new(p, "origin",
				    jstr(prof->origin ? prof->origin : b->profile_path));
		json_object_set_new(p, "type", jstr(cd_profile_type_name(prof->type)));
		json_object_set_new(p, "network",
				    jstr(cd_network_name(plan ? plan->network : prof->network)));
		json_object_set_new(
			p, "fs_unrestricted",
			json_boolean(plan ? plan->fs_unrestricted : prof->fs_unrestricted));
		json_object_set_new(root, "profile", p);
	} else {
		json_object_set_new(root, "profile", json_null());
	}

	json_object_set_new(root, "cwd",
			    plan && plan->cwd ? jstr(plan->cwd)
			    : b->cwd	      ? jstr(b->cwd)
					      : json_null());
	json_t *paths = json_array();
	for (size_t i = 0; plan && i < plan->n_paths; i++) {
		const struct cd_plan_path *pp = &plan->paths[i];
		json_t *o = json_object();
		json_object_set_new(o, "path", jstr(pp->path));
		json_object_set_new(o, "access", jstr(cd_access_name(pp->access)));
		json_object_set_new(o, "type", jstr(cd_file_type_name(pp->type)));
		json_object_set_new(o, "why", jstr(pp->why ? pp->why : ""));
		json_object_set_new(o, "carve_out", json_boolean(pp->carve_out));
		json_object_set_new(o, "origin", jstr(cd_origin_name(pp->origin)));
		json_array_append_new(paths, o);
	}
	json_object_set_new(root, "paths", paths);
	json_object_set_new(root, "notes", strv_json(plan ? plan->notes : NULL));

	if (b->probed) {
		json_t *h = json_object();
		json_object_set_new(h, "landlock_abi", json_integer(b->host.landlock_abi));
		json_object_set_new(h, "seccomp", json_boolean(b->host.seccomp));
		json_object_set_new(h, "userns", json_boolean(b->host.userns));
		json_object_set_new(h, "is_root", json_boolean(b->host.is_root));
		json_object_set_new(root, "host", h);
	}
	/* With limits: what the host offers them (cgroup.c), looked at only then. */
	if (b->host.lim.probed) {
		const struct cd_limits_host *l = &b->host.lim;
		json_t *h = json_object_get(root, "host");
		if (!h) {
			h = json_object();
			json_object_set_new(root, "host", h);
		}
		json_t *cg = json_object();
		json_object_set_new(cg, "available", json_boolean(l->cgroup));
		json_object_set_new(cg, "where", l->cgroup ? jstr(l->where) : json_null());
		json_object_set_new(cg, "why", l->cgroup ? json_null() : jstr(l->why));
		json_t *ctl = json_array();
		for (unsigned i = 0; i < CD_CG_COUNT; i++)
			if (l->controllers & (1u << i))
				json_array_append_new(ctl, jstr(cd_cg_controller_name(i)));
		json_object_set_new(cg, "controllers", ctl);
		json_object_set_new(h, "cgroup", cg);
	}
	static const char *const names[] = { "linux", "seatbelt", "windows" };
	json_object_set_new(root, "backend", jstr(names[b->backend]));
	json_object_set_new(root, "linux",
			    b->lp ? linux_json(b->lp, b->own_proxy, b->netpol) : json_null());
	if (b->backend == CD_CLI_BACKEND_SEATBELT)
		json_object_set_new(root, "seatbelt",
				    b->sp ? seatbelt_json(b->sp, b->sp_env) : json_null());
	if (b->backend == CD_CLI_BACKEND_WINDOWS)
		json_object_set_new(root, "windows", b->wp ? windows_json(b->wp) : json_null());
	json_object_set_new(root, "refusal", b->refusal ? jstr(b->refusal) : json_null());
	return root;
}

int cd_cmd_explain(int argc, char **argv)
{
	struct cd_cli_args a = { .cmd = "explain", .argc = argc, .argv = argv, .i = 1 };
	struct cd_cli_policy pol;
	bool json = false, list = false;
	int ret = CD_EXIT_USAGE;
	int id;
	const char *arg;

	cd_cli_policy_init(&pol);
	while ((id = cd_cli_next(&a, cd_explain_options, &arg)) > 0) {
		switch (id) {
		case OPT_HELP:
			explain_help();
			ret = 0;
			goto out;
		case OPT_BACKEND:
			if (cd_streq(arg, "linux")) {
				pol.backend = CD_CLI_BACKEND_LINUX;
				break;
			}
			if (cd_streq(arg, "seatbelt")) {
				pol.backend = CD_CLI_BACKEND_SEATBELT;
				break;
			}
			if (cd_streq(arg, "windows")) {
				pol.backend = CD_CLI_BACKEND_WINDOWS;
				break;
			}
			cd_cli_usage_error(
				a.cmd, "unknown backend '%s' (linux, seatbelt or windows)", arg);
			goto out;
		case OPT_JSON:
			json = true;
			break;
		case OPT_LIST_PROFILES:
			list = true;
			break;
		default:
			if (cd_cli_policy_option(&pol, a.cmd, id, arg) < 0)
				goto out;
			break;
		}
	}
	if (id < 0)
		goto out;
	if (a.i < argc) {
		cd_cli_usage_error(a.cmd, "unexpected argument '%s'", argv[a.i]);
		goto out;
	}
	if (list) {
		/* Only the lookup path counts: any other option would be ignored, so refuse it. */
		if (argc != 2) {
			cd_cli_usage_error(a.cmd, "--list-profiles takes no other option");
			goto out;
		}
		char *err = NULL;
		if (cd_cli_list_profiles(&err) < 0) {
			cd_log_error("%s", err);
			free(err);
			ret = CD_EXIT_SETUP;
			goto out;
		}
		ret = 0;
		goto out;
	}

	struct cd_cli_bound b;
	/* Say what a run would really get: try the namespaces, not only the sysctls. */
	pol.test_namespaces = true;
	int r = cd_cli_policy_bind(&pol, a.cmd, &b);
	if (r == CD_BIND_USAGE) {
		cd_cli_bound_done(&b);
		goto out;
	}
	if (json) {
		json_t *root = explain_json(&b);
		json_dumpf(root, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		json_decref(root);
	} else {
		print_text(&b);
	}
	fflush(stdout);
	if (r == CD_BIND_REFUSED) {
		cd_log_error("%s", b.refusal);
		ret = CD_EXIT_SETUP;
	} else {
		ret = 0;
	}
	cd_cli_bound_done(&b);
out:
	cd_cli_policy_done(&pol);
	return ret;
}
