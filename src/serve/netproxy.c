/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * process/start's networkProxy: cordon's proxy per process (netproxy.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/netpolicy.h"
#include "core/util.h"
#include "sandbox/linux/plan.h"
#include "serve/intent.h"
#include "serve/loop.h"
#include "serve/netproxy.h"
#include "shared/fd-util.h"
#include "shared/log.h"

extern char **environ;

struct cd_netproxy_cfg {
	char **argv; /* owned: `cordon proxy ...` */
	bool local_binding;
	bool socks5; /* the proxy takes SOCKS5 too: ALL_PROXY names socks5h:// */
};

struct cd_netproxy {
	pid_t pid;
	int pidfd; /* or -1 */
	int ctl;   /* our end of the pair, or -1 once stopped */
	char dir[64];
	char endpoint[128]; /* "unix:DIR/proxy.sock" */
	struct cd_loop *loop;
	struct cd_child_watch *cw;
	struct cd_timer *kill_timer;
	char *what; /* owned: "process ID", for the logs */
	bool stopping, exited;
};

/*
 * allowLocalBinding: Codex's proxy then lets names lead to loopback and
 * private addresses. The link-local range (where the cloud metadata
 * services answer) stays refused: nothing local needs it.
 */
static const char *const local_cidrs[] = {
	"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7",
};

/* One of the variants (a unit enum): index, or -1 with *err (serde's words). */
static int parse_variant(const struct cd_json *v, const char *enum_name,
			 const char *const *variants, size_t n, const char *expected, char **err)
{
	(void)enum_name;
	if (v->type != CD_JSON_STRING) {
		/* serde's words for an enum given anything else */
		*err = cd_param_invalid(v, "string or map", NULL);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (strlen(variants[i]) == v->u.str.len && !strcmp(v->u.str.s, variants[i]))
			return (int)i;
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "unknown variant `");
	cd_strbuf_append_n(&sb, v->u.str.s, strnlen(v->u.str.s, v->u.str.len));
	cd_strbuf_printf(&sb, "`, expected %s", expected);
	*err = cd_strbuf_steal(&sb);
	return -1;
}

/* An optional map (absent or null: none). */
static int opt_map(const struct cd_json *obj, const char *key, const struct cd_json **ret,
		   char **err)
{
	const struct cd_json *v = cd_json_get(obj, key);
	*ret = NULL;
	if (!v || v->type == CD_JSON_NULL)
		return 0;
	if (v->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(v, "a map", NULL);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

/* Option<String> members of the launch config: type-checked, not used. */
static int opt_strings(const struct cd_json *obj, const char *const *keys, size_t n, char **err)
{
	for (size_t i = 0; i < n; i++) {
		const struct cd_json *s;
		if (cd_param_string(obj, keys[i], keys[i], false, true, &s, err) < 0)
			return -EINVAL;
	}
	return 0;
}

enum {
	DOMAIN_NONE,
	DOMAIN_ALLOW,
	DOMAIN_DENY
};

int cd_netproxy_parse(const struct cd_json *v, struct cd_netproxy_cfg **ret, char **err)
{
	static const char *const audit_keys[] = {
		"conversationId", "appVersion",	  "userAccountId", "authMode", "originator",
		"userEmail",	  "terminalType", "model",	   "slug",
	};
	static const char *const id_keys[] = { "environmentId", "executionId" };
	static const char *const modes[] = { "limited", "full" };
	static const char *const domain_perms[] = { "none", "allow", "deny" };
	static const char *const socket_perms[] = { "allow", "deny" };
	bool enabled, socks5, socks5_udp, upstream, all_unix, local;
	const struct cd_json *p, *mode_v, *domains, *sockets, *audit;
	uint64_t timeout;

	*ret = NULL;
	if (v->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(v, "struct RemoteNetworkProxyLaunchConfig", NULL);
		return -EINVAL;
	}
	p = cd_json_get(v, "proxy");
	if (!p) {
		*err = cd_param_missing("proxy");
		return -EINVAL;
	}
	if (p->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(p, "struct RemoteNetworkProxyConfig", NULL);
		return -EINVAL;
	}
	audit = cd_json_get(v, "auditMetadata");
	if (audit && audit->type != CD_JSON_NULL && audit->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(audit, "struct NetworkProxyAuditMetadata", NULL);
		return -EINVAL;
	}
	if ((audit && audit->type == CD_JSON_OBJECT &&
	     opt_strings(audit, audit_keys, CD_ARRAY_SIZE(audit_keys), err) < 0) ||
	    opt_strings(v, id_keys, CD_ARRAY_SIZE(id_keys), err) < 0 ||
	    cd_param_u64(v, "policyDecisionTimeoutMs", "policyDecisionTimeoutMs", 0, &timeout,
			 err) < 0)
		return -EINVAL;

	if (cd_param_bool(p, "enabled", "enabled", true, false, &enabled, err) < 0 ||
	    cd_param_bool(p, "enableSocks5", "enableSocks5", true, false, &socks5, err) < 0 ||
	    cd_param_bool(p, "enableSocks5Udp", "enableSocks5Udp", true, false, &socks5_udp, err) <
		    0 ||
	    cd_param_bool(p, "allowUpstreamProxy", "allowUpstreamProxy", true, false, &upstream,
			  err) < 0 ||
	    cd_param_bool(p, "dangerouslyAllowAllUnixSockets", "dangerouslyAllowAllUnixSockets",
			  true, false, &all_unix, err) < 0)
		return -EINVAL;
	mode_v = cd_json_get(p, "mode");
	if (!mode_v) {
		*err = cd_param_missing("mode");
		return -EINVAL;
	}
	int mode = parse_variant(mode_v, "NetworkMode", modes, CD_ARRAY_SIZE(modes),
				 "`limited` or `full`", err);
	if (mode < 0 || opt_map(p, "domains", &domains, err) < 0 ||
	    opt_map(p, "unixSockets", &sockets, err) < 0 ||
	    cd_param_bool(p, "allowLocalBinding", "allowLocalBinding", true, false, &local, err) <
		    0)
		return -EINVAL;
	/* Every value's type first (serde decodes the whole config before it is judged). */
	for (size_t i = 0; domains && i < domains->u.obj.n; i++)
		if (parse_variant(domains->u.obj.members[i].value, "NetworkDomainPermission",
				  domain_perms, CD_ARRAY_SIZE(domain_perms),
				  "one of `none`, `allow`, `deny`", err) < 0)
			return -EINVAL;
	for (size_t i = 0; sockets && i < sockets->u.obj.n; i++)
		if (parse_variant(sockets->u.obj.members[i].value, "NetworkUnixSocketPermission",
				  socket_perms, CD_ARRAY_SIZE(socket_perms), "`allow` or `deny`",
				  err) < 0)
			return -EINVAL;

	/* The released binary's own refusals. */
	if (!enabled) {
		*err = cd_xstrdup("invalid network proxy config: executor-local network proxy "
				  "launch requires an enabled proxy");
		return -EINVAL;
	}
	size_t n_allowed_sockets = 0;
	for (size_t i = 0; sockets && i < sockets->u.obj.n; i++) {
		const struct cd_json_member *m = &sockets->u.obj.members[i];
		if (strcmp(m->value->u.str.s, "allow") != 0)
			continue;
		if (m->key[0] != '/' || strlen(m->key) != m->key_len) {
			char *idx = cd_xasprintf("%zu", n_allowed_sockets);
			struct cd_strbuf sb = { 0 };
			cd_strbuf_append_json_string(&sb, m->key, m->key_len);
			*err = cd_xasprintf("invalid network proxy config: invalid "
					    "network.allow_unix_sockets[%s]: expected a NUL-free "
					    "absolute path for Linux, got %s",
					    idx, sb.buf);
			free(idx);
			cd_strbuf_done(&sb);
			return -EINVAL;
		}
		n_allowed_sockets++;
	}

	/* What cordon cannot enforce: refused, never started with less than was asked. */
	if (all_unix || n_allowed_sockets) {
		*err = cd_xstrdup("networkProxy: unix sockets cannot be allowed by this executor "
				  "(proxy.dangerouslyAllowAllUnixSockets, or an \"allow\" in "
				  "proxy.unixSockets): the managed network's sandbox refuses every "
				  "new unix socket so that its relay cannot be bypassed");
		return -EINVAL;
	}
	size_t n_domains = domains ? domains->u.obj.n : 0;
	if (n_domains > CD_NETPROXY_MAX_DOMAINS) {
		*err = cd_xasprintf("networkProxy: proxy.domains has %zu patterns; this executor "
				    "takes at most %d",
				    n_domains, CD_NETPROXY_MAX_DOMAINS);
		return -EINVAL;
	}

	struct cd_netproxy_cfg *c = cd_xcalloc(1, sizeof(*c));
	struct cd_netpolicy pol = { 0 };
	c->local_binding = local;
	c->socks5 = socks5;
	cd_strv_push(&c->argv, "cordon");
	cd_strv_push(&c->argv, "proxy");
	cd_strv_push(&c->argv, "--listen-fd");
	cd_strv_push(&c->argv, "3");
	cd_strv_push(&c->argv, "--ctl-fd");
	cd_strv_push(&c->argv, "4");
	cd_strv_push(&c->argv, "--mode");
	cd_strv_push(&c->argv, modes[mode]);
	/*
	 * SOCKS5 on the same socket (the proxy tells it by its first byte). In
	 * limited mode each SOCKS5 request is refused by the proxy, a tunnel
	 * being what limited mode refuses: Codex's defaults ask for SOCKS5, so
	 * it is taken and refused per request rather than the whole start.
	 */
	if (socks5)
		cd_strv_push(&c->argv, "--socks5");
	for (size_t i = 0; i < n_domains; i++) {
		const struct cd_json_member *m = &domains->u.obj.members[i];
		int perm = parse_variant(m->value, "", domain_perms, CD_ARRAY_SIZE(domain_perms),
					 "", err);
		const char *why = NULL;
		if (perm == DOMAIN_NONE)
			continue;
		/* Checked here, so that a bad pattern is this request's error, not the proxy's. */
		if (strlen(m->key) != m->key_len ||
		    cd_netpolicy_add_domain(&pol, m->key, perm == DOMAIN_DENY, &why) < 0) {
			struct cd_strbuf sb = { 0 };
			cd_strbuf_append_json_string(&sb, m->key, m->key_len);
			*err = cd_xasprintf("invalid network proxy config: domain pattern %s: %s",
					    sb.buf, why ? why : "contains a NUL byte");
			cd_strbuf_done(&sb);
			cd_netpolicy_done(&pol);
			cd_netproxy_cfg_free(c);
			return -EINVAL;
		}
		cd_strv_push(&c->argv, perm == DOMAIN_DENY ? "--deny-domain" : "--allow-domain");
		cd_strv_push(&c->argv, m->key);
	}
	cd_netpolicy_done(&pol);
	for (size_t i = 0; local && i < CD_ARRAY_SIZE(local_cidrs); i++) {
		cd_strv_push(&c->argv, "--allow-cidr");
		cd_strv_push(&c->argv, local_cidrs[i]);
	}
	(void)socks5_udp; /* UDP ASSOCIATE is refused (reply 7): the sandbox has no UDP */
	(void)upstream;	  /* cordon's proxy connects directly: an allowance not used */
	*ret = c;
	return 0;
}

struct cd_netproxy_cfg *cd_netproxy_cfg_free(struct cd_netproxy_cfg *c)
{
	if (c) {
		cd_strv_free(c->argv);
		free(c);
	}
	return NULL;
}

void cd_netproxy_cfg_tag(struct cd_netproxy_cfg *c, const char *id, size_t len)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "process ");
	size_t i = 0;
	/*
	 * Cut by the text written, within `cordon proxy`'s 200 bytes. Only
	 * letters, digits and "-_.:@+=/" as they are: a client's ID holding
	 * "): allow GET ..." must not pass for a second decision in the line.
	 */
	for (; i < len && sb.len <= 190; i++) {
		unsigned char u = (unsigned char)id[i];
		if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
		    (u && strchr("-_.:@+=/", u)))
			cd_strbuf_append_c(&sb, (char)u);
		else
			cd_strbuf_printf(&sb, "\\x%02x", u);
	}
	if (i < len)
		cd_strbuf_append(&sb, "...");
	cd_strv_push(&c->argv, "--audit-tag");
	cd_strv_push_take(&c->argv, cd_strbuf_steal(&sb));
}

bool cd_netproxy_cfg_local_binding(const struct cd_netproxy_cfg *c)
{
	return c->local_binding;
}

static int fail(char **err, int e, const char *what)
{
	*err = cd_xasprintf("networkProxy: cordon's proxy: %s: %s", what, strerror(e));
	return -e;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void remove_dir(const struct cd_netproxy *np)
{
	char path[sizeof(np->dir) + 16];
	snprintf(path, sizeof(path), "%s/proxy.sock", np->dir);
	(void)unlink(path);
	(void)rmdir(np->dir);
}

/* The child of the fork: async-signal-safe calls only, then exec. Never returns. */
static _Noreturn void child(int lfd, int ctl, int report, char *const *argv)
{
	struct sigaction dfl;
	sigset_t none;
	int e;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	/* Out of the server's session: a terminal's ^C is the server's to handle. */
	(void)setsid();
	/* Out of the way of 3 and 4 first, where it could be. */
	report = fcntl(report, F_DUPFD_CLOEXEC, 10);
	if (report < 0)
		_exit(127);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
	    dup2(lfd, 3) < 0 || dup2(ctl, 4) < 0)
		goto fail;
	/*
	 * Nothing else of the server's: what it inherited without
	 * close-on-exec (its caller's files) is not for a proxy that parses
	 * what the sandbox sends.
	 */
	int keep[] = { 3, 4, report };
	if ((e = cd_close_fds_except(keep, CD_ARRAY_SIZE(keep))) < 0) {
		errno = -e;
		goto fail;
	}
	/*
	 * This very program, by the kernel's link to it: the file installed
	 * may have been replaced since the server started, its image not.
	 * No PR_SET_PDEATHSIG: it fires when the forking thread (a worker)
	 * ends; the end of the pair is what stops the proxy.
	 */
	execve("/proc/self/exe", argv, environ);
fail:
	e = errno;
	(void)!write(report, &e, sizeof(e));
	_exit(127);
}

int cd_netproxy_start(const struct cd_netproxy_cfg *cfg, struct cd_netproxy **ret, char **err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = -1, pair[2] = { -1, -1 }, hi_l = -1, hi_c = -1, e = 0;
	const char *tmp = getenv("TMPDIR");
	struct cd_netproxy *np = cd_xcalloc(1, sizeof(*np));

	np->ctl = np->pidfd = -1;
	*ret = NULL;
	/* A short, absolute TMPDIR, else /tmp: the socket path must fit sun_path. */
	if (!tmp || tmp[0] != '/' || strlen(tmp) > 40)
		tmp = "/tmp";
	snprintf(np->dir, sizeof(np->dir), "%s/cordon-netproxy-XXXXXX", tmp);
	if (!mkdtemp(np->dir)) {
		e = fail(err, errno, "cannot make its directory");
		free(np);
		return e;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/proxy.sock", np->dir);
	snprintf(np->endpoint, sizeof(np->endpoint), "unix:%s", sa.sun_path);

	lfd = cd_socket(AF_UNIX, SOCK_STREAM, 0, false);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0) {
		e = fail(err, errno, "cannot listen on its socket");
		goto out;
	}
	if (cd_socketpair(AF_UNIX, SOCK_STREAM, 0, false, pair) < 0) {
		e = fail(err, errno, "socketpair");
		goto out;
	}
	/* Above 4: dup2 onto 3 and 4 in the child then always makes copies without CLOEXEC. */
	hi_l = fcntl(lfd, F_DUPFD_CLOEXEC, 10);
	hi_c = hi_l < 0 ? -1 : fcntl(pair[1], F_DUPFD_CLOEXEC, 10);
	if (hi_c < 0) {
		e = fail(err, errno, "fcntl");
		goto out;
	}

	/*
	 * fork and exec at once: the child makes only async-signal-safe
	 * calls (the server has threads). An exec failure comes back over a
	 * close-on-exec pipe; its end without a byte means the exec happened.
	 */
	int ep[2] = { -1, -1 };
	if ((e = -cd_pipe2(ep, O_CLOEXEC)) != 0) {
		e = fail(err, e, "pipe");
		goto out;
	}
	np->pid = fork();
	if (np->pid == 0)
		child(hi_l, hi_c, ep[1], cfg->argv);
	int fork_errno = errno;
	close(ep[1]);
	if (np->pid < 0) {
		close(ep[0]);
		e = fail(err, fork_errno, "fork");
		goto out;
	}
	int child_errno = 0;
	ssize_t n;
	do
		n = read(ep[0], &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n > 0) {
		int st;
		while (waitpid(np->pid, &st, 0) < 0 && errno == EINTR)
			;
		e = fail(err, child_errno ? child_errno : EIO, "cannot execute `cordon proxy`");
		goto out;
	}
#ifdef SYS_pidfd_open
	np->pidfd = (int)syscall(SYS_pidfd_open, np->pid, 0);
	if (np->pidfd >= 0)
		(void)fcntl(np->pidfd, F_SETFD, FD_CLOEXEC);
#endif
	np->ctl = pair[0];
	pair[0] = -1;
	if (getenv("CORDON_TEST_PROXY_RESOLVE"))
		cd_log_warn("serve: test hook CORDON_TEST_PROXY_RESOLVE: networkProxy's proxy "
			    "(pid %d) resolves names from it, not DNS (its rules still judge every "
			    "name and address)",
			    (int)np->pid);
	*ret = np;
out:
	/* The proxy holds the listening socket alone: when it is gone, nobody listens. */
	close_fd(&lfd);
	close_fd(&hi_l);
	close_fd(&hi_c);
	close_fd(&pair[0]);
	close_fd(&pair[1]);
	if (e < 0) {
		remove_dir(np);
		free(np);
	}
	return e;
}

const char *cd_netproxy_endpoint(const struct cd_netproxy *np)
{
	return np->endpoint;
}

int cd_netproxy_pid(const struct cd_netproxy *np)
{
	return (int)np->pid;
}

static void np_free(struct cd_netproxy *np)
{
	if (np->kill_timer)
		cd_loop_cancel_timer(np->loop, np->kill_timer);
	close_fd(&np->ctl);
	close_fd(&np->pidfd);
	free(np->what);
	free(np);
}

static void on_exit_proxy(struct cd_loop *l, pid_t pid, int status, void *data)
{
	struct cd_netproxy *np = data;
	char how[64];
	(void)l;
	np->cw = NULL;
	np->exited = true;
	if (WIFSIGNALED(status))
		snprintf(how, sizeof(how), "killed by signal %d", WTERMSIG(status));
	else
		snprintf(how, sizeof(how), "status %d", WEXITSTATUS(status));
	/* Its own exit removes nothing: the directory is the server's to remove. */
	remove_dir(np);
	if (!np->stopping) {
		/* Fail closed: nobody listens on its socket any more, the relay reaches nothing. */
		cd_log_warn("serve: %s: its network proxy (pid %d) ended (%s) before the process "
			    "closed: the process has no network from now on",
			    np->what, (int)pid, how);
		return;
	}
	cd_log_debug("serve: %s: its network proxy (pid %d) stopped (%s)", np->what, (int)pid, how);
	np_free(np);
}

void cd_netproxy_attach(struct cd_netproxy *np, struct cd_loop *l, const char *what)
{
	np->loop = l;
	np->what = cd_xstrdup(what);
	np->cw = cd_loop_watch_child(l, np->pid, np->pidfd, on_exit_proxy, np);
	if (!np->cw) {
		/* Cannot be watched: not left running unreaped (the loop's SIGCHLD path reaps). */
		cd_log_warn("serve: %s: cannot watch its network proxy (pid %d): %s; stopping it",
			    what, (int)np->pid, strerror(errno));
		(void)kill(np->pid, SIGKILL);
	}
	cd_log_debug("serve: %s: network proxy pid %d on %s", what, (int)np->pid, np->endpoint);
}

static void on_kill(struct cd_loop *l, void *data)
{
	struct cd_netproxy *np = data;
	(void)l;
	np->kill_timer = NULL;
	/* Not reaped yet (its watch has not fired): the pid is still its own. */
	cd_log_warn("serve: %s: its network proxy (pid %d) did not stop; killing it", np->what,
		    (int)np->pid);
	(void)kill(np->pid, SIGKILL);
}

void cd_netproxy_stop(struct cd_netproxy *np, bool detach)
{
	if (!np)
		return;
	np->stopping = true;
	/* The end of its pair: it closes its connections, writes their audit lines, exits. */
	close_fd(&np->ctl);
	if (np->exited || !np->cw) {
		if (!np->exited)
			remove_dir(np);
		if (np->cw)
			cd_loop_unwatch_child(np->loop, np->cw);
		np_free(np);
		return;
	}
	if (detach) {
		/* The loop ends: it exits at the end of its pair by itself, orphaned. */
		cd_loop_unwatch_child(np->loop, np->cw);
		np->cw = NULL;
		remove_dir(np);
		np_free(np);
		return;
	}
	np->kill_timer = cd_loop_add_timer(np->loop, CD_NETPROXY_STOP_MS, on_kill, np);
}

/* Replace NAME's value in the NULL-terminated *envp, or append NAME=value. */
static void setenv_in(char ***envp, const char *name, const char *value)
{
	size_t n = strlen(name);
	char *kv = cd_xasprintf("%s=%s", name, value);
	for (char **e = *envp; e && *e; e++) {
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
			free(*e);
			*e = kv;
			return;
		}
	}
	cd_strv_push_take(envp, kv);
}

void cd_netproxy_set_env(char ***envp, const struct cd_netproxy_cfg *cfg)
{
	for (const struct cd_env_pair *e = cd_managed_proxy_env; e->name; e++)
		setenv_in(envp, e->name, cd_env_pair_value(e, cfg->socks5));
	setenv_in(envp, "CODEX_NETWORK_ALLOW_LOCAL_BINDING", cfg->local_binding ? "1" : "0");
}
