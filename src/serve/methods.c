/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/pathuri.h"
#include "os-backend.h"
#include "serve/budget.h"
#include "serve/discover-v2.h"
#include "serve/discover.h"
#include "serve/envconfig.h"
#include "serve/fs-watch.h"
#include "serve/fs.h"
#include "serve/http.h"
#include "serve/intent.h"
#include "serve/managed-route.h"
#include "serve/metrics.h"
#include "serve/netproxy.h"
#include "serve/server.h"
#include "serve/status.h"
#include "serve/testhook.h"
#include "serve/workq.h"
#include "shared/log.h"

extern char **environ;

/*
 * The connection state machine (reference 1.5-1.6) and the handlers of the
 * process methods (2.2-2.7). Every handler answers exactly once: at once,
 * or (a long-poll process/read) later from the process events or its
 * deadline, holding back the requests behind it.
 */

typedef void (*method_fn)(struct cd_conn *c, const char *id, const struct cd_json *params);

static void reply_static(struct cd_conn *c, const char *id, const char *result)
{
	cd_conn_result(c, id, result, strlen(result));
}

static void reply_sb(struct cd_conn *c, const char *id, struct cd_strbuf *sb)
{
	cd_conn_result(c, id, sb->buf ? sb->buf : "{}", sb->buf ? sb->len : 2);
	cd_strbuf_done(sb);
}

/* Reply -32602 with a malloc'ed message and free it. */
static void invalid_params(struct cd_conn *c, const char *id, char *msg)
{
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, msg);
	free(msg);
}

static void invalid_request(struct cd_conn *c, const char *id, char *msg)
{
	cd_conn_error(c, id, CD_RPC_INVALID_REQUEST, msg);
	free(msg);
}

/* A processId in a message: up to its first NUL, at most CD_SERVE_MAX_PROCESS_ID bytes. */
static void append_pid(struct cd_strbuf *sb, const struct cd_json *pid)
{
	size_t n = strnlen(pid->u.str.s, pid->u.str.len);
	cd_strbuf_append_n(sb, pid->u.str.s,
			   n < CD_SERVE_MAX_PROCESS_ID ? n : CD_SERVE_MAX_PROCESS_ID);
	if (n > CD_SERVE_MAX_PROCESS_ID)
		cd_strbuf_append(sb, "...");
}

static char *unknown_process(const struct cd_json *pid)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "unknown process id ");
	append_pid(&sb, pid);
	return cd_strbuf_steal(&sb);
}

/* ---- initialize, environment ---- */

static void m_initialize(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *name, *resume;
	char *err = NULL;

	if (c->initialize_done) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "initialize may only be sent once per connection");
		return;
	}
	if (cd_param_object(params, "struct InitializeParams", &err) < 0 ||
	    cd_param_string(params, "clientName", "clientName", true, false, &name, &err) < 0 ||
	    cd_param_string(params, "resumeSessionId", "resumeSessionId", false, true, &resume,
			    &err) < 0) {
		invalid_params(c, id, err);
		return;
	}
	struct cd_server *s = c->server;
	struct cd_session *se = NULL;
	if (resume) {
		/* stdio has a single connection: there is never a session to resume. */
		if (s->opts.listen != CD_LISTEN_STDIO)
			se = cd_session_lookup(s, resume->u.str.s, resume->u.str.len);
		if (!se) {
			struct cd_strbuf sb = { 0 };
			cd_strbuf_append(&sb, "unknown session id ");
			cd_strbuf_append_n(&sb, resume->u.str.s,
					   strnlen(resume->u.str.s, resume->u.str.len));
			invalid_request(c, id, cd_strbuf_steal(&sb));
			return;
		}
		if (se->conn) {
			char *msg = cd_xasprintf("session %s is already attached to another "
						 "connection",
						 se->id);
			cd_conn_error(c, id, CD_RPC_SESSION_ATTACHED, msg);
			free(msg);
			return;
		}
		cd_session_attach(se, c);
		cd_log_info("serve: connection %lu (%s): resumed session %s", c->serial, c->peer,
			    se->id);
	} else {
		se = cd_session_new(s, c);
		if (!se) {
			cd_metric_refusal(CD_REFUSAL_MAX_SESSIONS);
			invalid_request(c, id,
					cd_xasprintf("too many sessions (limit %u); end some or "
						     "raise --max-sessions",
						     s->opts.max_sessions));
			return;
		}
	}
	c->session = se;
	c->initialize_done = true;
	cd_log_debug("serve: initialize from client '%s': session %s", name->u.str.s, se->id);

	struct cd_strbuf sb = { 0 };
	cd_strbuf_printf(&sb, "{\"sessionId\":\"%s\",\"environmentInfo\":%s}", se->id, s->env_info);
	reply_sb(c, id, &sb);
}

/* No params: the released binary reads them as (): none, null or {}. */
static bool unit_params(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	if (!params || params->type == CD_JSON_NULL ||
	    (params->type == CD_JSON_OBJECT && params->u.obj.n == 0))
		return true;
	invalid_params(c, id, cd_param_invalid(params, "unit", NULL));
	return false;
}

static void m_env_info(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	if (unit_params(c, id, params))
		reply_static(c, id, c->server->env_info);
}

static void m_env_status(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	if (unit_params(c, id, params))
		reply_static(c, id, "{\"status\":\"ready\"}");
}

/*
 * cordon/status (a cordon extension): the server's state, its memory
 * budget and what holds it, the connections, sessions and processes,
 * whether it is short of descriptors, and the counters of cordon/metrics
 * (status.c: GET /status on WebSocket answers the same).
 */
static void m_cordon_status(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct cd_strbuf sb = { 0 };
	cd_serve_status_json(c->server, &sb);
	reply_sb(c, id, &sb);
}

/*
 * cordon/metrics (a cordon extension): the Prometheus text of GET
 * /metrics, for clients of the unix socket and stdio, as a JSON string.
 */
static void m_cordon_metrics(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct cd_strbuf text = { 0 }, sb = { 0 };
	cd_serve_metrics_text(c->server, &text);
	cd_strbuf_append(&sb, "{\"contentType\":\"" CD_METRICS_CONTENT_TYPE "\",\"text\":");
	cd_strbuf_append_json_string(&sb, text.buf, text.len);
	cd_strbuf_append_c(&sb, '}');
	cd_strbuf_done(&text);
	reply_sb(c, id, &sb);
}

/* ---- process/start ---- */

static int get_argv(const struct cd_json *params, char ***ret, char **err)
{
	const struct cd_json *v = cd_json_get(params, "argv");
	*ret = NULL;
	if (!v) {
		*err = cd_param_missing("argv");
		return -EINVAL;
	}
	if (v->type != CD_JSON_ARRAY) {
		*err = cd_param_invalid(v, "a sequence", "argv");
		return -EINVAL;
	}
	char **argv = cd_xcalloc(v->u.arr.n + 1, sizeof(*argv));
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct cd_json *a = v->u.arr.items[i];
		if (a->type != CD_JSON_STRING || cd_json_string_has_nul(a)) {
			char name[32];
			snprintf(name, sizeof(name), "argv[%zu]", i);
			if (a->type != CD_JSON_STRING)
				*err = cd_param_invalid(a, "a string", name);
			else
				*err = cd_xasprintf("`%s` contains a NUL byte", name);
			cd_strv_free(argv);
			return -EINVAL;
		}
		argv[i] = cd_xstrdup(a->u.str.s);
	}
	*ret = argv;
	return 0;
}

/* managedNetwork is accepted for compatibility and only type-checked. */
static int check_managed_network(const struct cd_json *params, char **err)
{
	const struct cd_json *v = cd_json_get(params, "managedNetwork");
	bool b;
	if (!v || v->type == CD_JSON_NULL)
		return 0;
	if (v->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(v, "struct ManagedNetworkContext", "managedNetwork");
		return -EINVAL;
	}
	if (cd_param_bool(v, "allowLocalBinding", "managedNetwork.allowLocalBinding", false, false,
			  &b, err) < 0)
		return -EINVAL;
	const struct cd_json *ports = cd_json_get(v, "loopbackPorts");
	if (!ports)
		return 0;
	if (ports->type != CD_JSON_ARRAY) {
		*err = cd_param_invalid(ports, "a sequence", "managedNetwork.loopbackPorts");
		return -EINVAL;
	}
	for (size_t i = 0; i < ports->u.arr.n; i++) {
		uint64_t port;
		if (ports->u.arr.items[i]->type != CD_JSON_NUMBER ||
		    cd_json_uint64(ports->u.arr.items[i], &port) < 0 || port > 65535) {
			*err = cd_param_invalid(ports->u.arr.items[i], "u16",
						"managedNetwork.loopbackPorts");
			return -EINVAL;
		}
	}
	return 0;
}

static void append_start_result(struct cd_strbuf *sb, const struct cd_pentry *e,
				const struct cd_cli_bound *b, bool has_sandbox, bool seatbelt)
{
	const struct cd_linux_plan *lp = has_sandbox ? b->lp : NULL;
	bool ll = lp && lp->sandboxed; /* the Linux sandbox's fields */
	/* macOS: the Seatbelt wrapper's (seatbelt is set without lp). */
	bool sandboxed = ll || (!b->lp && seatbelt);
	/* A plan for limits alone when there is no sandbox (cd_intent_limits_only). */
	const struct cd_linux_plan *any = b->lp;

	cd_strbuf_append(sb, "{\"processId\":");
	cd_strbuf_append_n(sb, e->id_json, e->id_json_len);
	cd_strbuf_printf(sb, ",\"sandboxType\":\"%s\"",
			 !sandboxed
				 ? "none"
				 : cd_os_backend_sandbox_type(seatbelt ? CD_CLI_BACKEND_SEATBELT
								       : cd_os_backend_native()));
	cd_strbuf_printf(
		sb,
		",\"cordon\":{\"sandboxed\":%s,\"landlockAbi\":%u,\"landlockRules\":%zu,"
		"\"seccomp\":%s,\"network\":\"%s\",\"namespaces\":[",
		sandboxed ? "true" : "false", ll && lp->landlock ? lp->landlock_abi : 0,
		ll && lp->landlock ? lp->n_ll_rules : 0, ll && lp->seccomp ? "true" : "false",
		sandboxed && b->plan->network == CD_NET_RESTRICTED ? "restricted" : "enabled");
	const char *ns[5];
	size_t n_ns = ll ? cd_linux_plan_namespaces(lp, ns) : 0;
	for (size_t i = 0; i < n_ns; i++)
		cd_strbuf_printf(sb, "%s\"%s\"", i ? "," : "", ns[i]);
	cd_strbuf_printf(sb, "],\"mounts\":%zu,\"degraded\":[", ll ? lp->n_mounts : 0);
	for (char **d = any ? any->degraded : NULL; d && *d; d++) {
		if (d != any->degraded)
			cd_strbuf_append_c(sb, ',');
		cd_json_write_cstr(sb, *d);
	}
	cd_strbuf_append_c(sb, ']');
	/* The limits and how each is enforced, only when there are any. */
	if (any && any->limits) {
		cd_strbuf_append(sb, ",\"limits\":");
		cd_limits_plan_json(any->limits, sb);
		if (any->private_tmp)
			cd_strbuf_printf(sb, ",\"privateTmp\":%llu",
					 (unsigned long long)any->private_tmp_size);
	} else if (b->sp && cd_limits_any(&b->sp->rlimits)) {
		/* macOS: every limit it takes is an rlimit of each process. */
		struct cd_limits_plan rl = { .limits = b->sp->rlimits };
		for (int l = 0; l < CD_LIMIT_COUNT; l++)
			if (cd_limits_has(&rl.limits, (enum cd_limit)l))
				rl.how[l] = CD_LIMIT_HOW_RLIMIT;
		cd_strbuf_append(sb, ",\"limits\":");
		cd_limits_plan_json(&rl, sb);
	}
	cd_strbuf_append(sb, "}}");
}

/*
 * process/start in two halves. On the loop, the request is checked (its
 * params but env and sandbox), its process id taken (a second start of it
 * is refused from now on) and the connection's later requests held back,
 * as behind a long poll, so that they are still answered in order. On a
 * worker (cd_server_prep_workq): the child environment, whose patterns can cost up
 * to CD_ENV_MATCH_STEPS, and the binding of the sandbox intent, which
 * resolves paths, scans each workspace root for nested repositories (up to
 * ~0.5 s at its bounds) and reads git indexes, any of which would stall
 * every client on the loop (and hang it on a hung network mount); also a
 * look at the cwd and the program's path, so that a mount that hangs there
 * holds a worker rather than the spawn below. Back on the loop: the spawn
 * (cd_spawn is not reentrant), the answer, and the next requests.
 */
/* At shutdown, how long running preparations get to finish. */
#define START_STOP_MS 2000

struct cd_start {
	struct cd_work work; /* first: the pool hands this back */
	struct cd_server *server;
	struct cd_conn *conn;	 /* answers here; NULL once it ended */
	struct cd_pentry *entry; /* the reserved id; NULL once its session ended */
	char *id;		 /* the request's id, JSON text */
	char *gone_why;		 /* the connection was evicted: its error */
	/* owned: params point into it; freed on the worker once read (a large tree takes ms) */
	struct cd_json *msg;
	const struct cd_json *env, *env_policy, *sandbox;
	char **argv, *cwd, *arg0;
	bool tty, pipe_stdin, enforce, has_sandbox;
	bool seatbelt; /* argv wrapped for the Seatbelt stand-in (test hook, os-backend.h) */
	struct cd_limits asked; /* params.cordon.limits */
	/* The server's options with their own copy of the hidden files (cd_server_hidden_check). */
	struct cd_linux_opts lopts;
	struct cd_hidden_path hidden[CD_ARRAY_SIZE(((struct cd_server *)0)->hidden)];
	char *hook_key; /* owned: CORDON_TEST_HOLD=process/start holds it (testhook.h) */
	/* The worker's results. */
	char **envp;
	char *managed_proxy; /* enforceManagedNetwork: lopts.managed_proxy (cd_managed_route) */
	struct cd_netproxy_cfg *np_cfg; /* networkProxy, decoded (owned) */
	struct cd_netproxy *np; /* its proxy, started by the worker (owned until handed on) */
	bool np_failed;		/* it could not be started: -32603 */
	struct cd_cli_bound b;
	char *err;		 /* a refusal: -32602 */
	enum cd_refusal refusal; /* its kind, for the metrics */
	uint64_t began_ns;	 /* when the request was handled (cd_metric_now_ns) */
	/* The hidden files looked at (cd_server_hidden_check's ret_why), for the loop to log. */
	bool hidden_checked;
	const char *hidden_why[CD_ARRAY_SIZE(((struct cd_server *)0)->hidden)];
	struct cd_start *next; /* starts_running */
};

/* Handed to the pool and not completed (loop thread only). */
static struct cd_start *starts_running;

static void start_free(struct cd_start *st)
{
	for (struct cd_start **pp = &starts_running; *pp; pp = &(*pp)->next) {
		if (*pp == st) {
			*pp = st->next;
			break;
		}
	}
	cd_cli_bound_done(&st->b);
	cd_strv_free(st->argv);
	cd_strv_free(st->envp);
	free(st->managed_proxy);
	cd_netproxy_stop(st->np, true);
	cd_netproxy_cfg_free(st->np_cfg);
	cd_json_free(st->msg);
	free(st->cwd);
	free(st->arg0);
	free(st->id);
	free(st->gone_why);
	free(st->err);
	free(st->hook_key);
	free(st);
}

/* Look at path (stat): a hung mount on the way blocks here, on the worker. */
static void touch(const char *path)
{
	struct stat st;
	(void)stat(path, &st);
}

/* The program's path as the child's PATH search will try it (see spawn.h). */
static void touch_program(const char *file, char *const *envp)
{
	if (strchr(file, '/')) {
		touch(file);
		return;
	}
	const char *path = NULL;
	for (char *const *e = envp; e && *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	struct stat st;
	for (const char *p = path;;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		char *cand = cd_xasprintf("%.*s%s%s", (int)n, p, n ? "/" : "", file);
		bool found = stat(cand, &st) == 0;
		free(cand);
		if (found || !colon)
			break;
		p = colon + 1;
	}
}

/* On a worker: nothing here touches the loop, the connection or the session. */
static void start_run(struct cd_work *w)
{
	struct cd_start *st = (struct cd_start *)w;
	struct cd_server *s = st->server;
	struct cd_intent_limits lim = {
		.asked = &st->asked,
		.defaults = &s->opts.default_limits,
		.max = &s->opts.max_limits,
	};
	int r = cd_env_build(st->env, st->env_policy, environ, &st->envp, &st->err);
	st->refusal = r < 0 ? CD_REFUSAL_INVALID : CD_REFUSAL_SANDBOX;
	/*
	 * networkProxy: cordon's proxy for this process, the only way out
	 * (reference 3.5 step 1), whatever enforceManagedNetwork says.
	 */
	if (r >= 0 && st->np_cfg) {
		r = cd_netproxy_start(st->np_cfg, &st->np, &st->err);
		st->np_failed = r < 0;
		if (r >= 0) {
			cd_netproxy_set_env(&st->envp, st->np_cfg);
			st->lopts.managed_proxy = cd_netproxy_endpoint(st->np);
			st->enforce = true;
		}
	} else if (r >= 0 && st->sandbox && st->enforce) {
		/* Managed network: the proxy the child's variables name, relayed to (reference 4.5). */
		r = cd_managed_route(st->envp, cd_os_backend_native() == CD_CLI_BACKEND_LINUX,
				     &st->managed_proxy, &st->err);
		st->lopts.managed_proxy = st->managed_proxy;
	}
	if (r >= 0 && st->sandbox)
		r = cd_intent_bind_limited(st->sandbox, st->cwd, st->enforce, &s->host, &st->lopts,
					   &lim, &st->b, &st->err);
	else if (r >= 0)
		/* Without a sandbox, a plan of the limits alone (or none). */
		r = cd_intent_limits_only(&s->host, &st->lopts, &lim, &st->b, &st->err);
	st->env = st->env_policy = st->sandbox = NULL;
	st->msg = cd_json_free(st->msg);
	if (r < 0)
		return;
	touch(st->cwd);
	touch_program(st->argv[0], st->envp);
	/*
	 * The server's hidden files, last, right before the start goes back
	 * to the loop: the preparation may have taken long (a client can make
	 * it), and a hidden file replaced meanwhile would be masked at its
	 * path while the file itself sits elsewhere, readable. Here, not on
	 * the loop: the check walks their paths (realpath, lstat), which a
	 * hung mount holds, and the loop must answer every other client
	 * meanwhile. What is left between here and the spawn, the spawner
	 * closes without a walk of its own: the deny mask must go on the very
	 * file found at start (cd_hidden_path.has_id), checked on the
	 * descriptor it opens at the path for the mount anyway, and again by
	 * the child in its namespace. (Doing it all in the child instead
	 * would hold the loop, which waits for the child's exec, on a hung
	 * mount.)
	 */
	if (st->has_sandbox) {
		st->hidden_checked = true;
		if (cd_server_hidden_check(s, st->hidden_why, &st->err) < 0)
			return;
	}
	/*
	 * macOS: the command runs through the Seatbelt wrapper with the policy
	 * planned at binding (cordon serve's own files denied in it). A managed
	 * network's variables are left as the client sent them: they name the
	 * loopback proxy whose port the policy lets the command reach
	 * (cd_managed_route found it there), scheme and NO_PROXY included.
	 */
	if (st->has_sandbox && st->b.sp && st->b.sp->sandboxed) {
		char **wrapped = NULL;
		cd_strv_push(&wrapped, CD_MAC_SANDBOX_EXEC);
		for (char **a = st->b.sp->argv + 1; *a; a++)
			cd_strv_push(&wrapped, *a);
		for (char **a = st->argv; *a; a++)
			cd_strv_push(&wrapped, *a);
		cd_strv_free(st->argv);
		st->argv = wrapped;
		st->seatbelt = true;
	}
	/* Test hook: through the Seatbelt wrapper too, inside the Linux sandbox. */
	const char *stand_in = cd_seatbelt_stand_in();
	if (stand_in && st->has_sandbox && st->b.lp && st->b.lp->sandboxed) {
		char **wrapped = NULL;
		const char *hidden[CD_ARRAY_SIZE(st->hidden)];
		size_t n_hidden = 0;
		for (size_t i = 0; i < st->lopts.n_hidden && i < CD_ARRAY_SIZE(hidden); i++)
			hidden[n_hidden++] = st->lopts.hidden[i].path;
		if (cd_seatbelt_wrap(&st->b, stand_in, st->argv, hidden, n_hidden, &wrapped,
				     &st->err) < 0)
			return;
		cd_strv_free(st->argv);
		st->argv = wrapped;
		st->seatbelt = true;
	}
	if (st->hook_key) {
		static const atomic_bool never = false;
		cd_testhook_hold(st->hook_key, "process/start", &never);
	}
}

/* On the loop: spawn and answer, or answer the refusal; then the requests behind it. */
static void start_done(struct cd_work *w)
{
	struct cd_start *st = (struct cd_start *)w;
	struct cd_conn *c = st->conn;
	struct cd_pentry *e = st->entry;
	struct cd_server *s = st->server;
	int code = CD_RPC_INVALID_PARAMS;
	char *err = NULL;

	if (c)
		c->start = NULL;
	if (e)
		e->starting = NULL;
	if (!w->ran || s->stopping) {
		err = cd_xstrdup("the server is shutting down");
		code = CD_RPC_INTERNAL;
	} else if (e && e->session->ending) {
		err = cd_xstrdup("the session ended");
		code = CD_RPC_INVALID_REQUEST;
	} else if (st->err) {
		err = st->err;
		st->err = NULL;
		if (st->np_failed)
			code = CD_RPC_INTERNAL;
		cd_metric_refusal(st->np_failed ? CD_REFUSAL_SPAWN : st->refusal);
	}
	/* Watched from now on: whatever happens below, it is reaped. */
	if (st->np) {
		char *what = cd_xasprintf("process %s", e ? e->id : "(start cancelled)");
		cd_netproxy_attach(st->np, s->loop, what);
		free(what);
	}
	if (w->ran && st->hidden_checked)
		cd_server_hidden_note(s, st->hidden_why);
	if (err) {
		if (e)
			cd_session_unreserve(e);
	} else if (e) {
		struct cd_proc_opts po = {
			.argv = st->argv,
			/*
			 * The source says a sandboxed arg0 is lost to the
			 * wrapper, but the released binary keeps it, and cordon
			 * has no wrapper program in between: keep it in both cases.
			 */
			.arg0 = st->seatbelt ? NULL : st->arg0, /* the stand-in keeps its name */
			.envp = st->envp,
			.cwd = st->cwd,
			.tty = st->tty,
			.pipe_stdin = st->pipe_stdin && !st->tty,
			.lp = st->b.lp, /* without a sandbox: the limits' plan, or none */
			.init = &s->init,
			/* macOS: the wrapper's argv, and the limits as rlimits (with or without it). */
			.wrapped = !st->b.lp && st->seatbelt,
			.wrapped_network = st->b.plan && st->b.plan->network != CD_NET_RESTRICTED,
			.rlimits = st->b.sp ? &st->b.sp->rlimits : NULL,
		};
		if (cd_session_start(e, &po, &code, &err) < 0) {
			cd_log_debug("serve: process %s: %s", st->argv[0], err);
			cd_metric_refusal(CD_REFUSAL_SPAWN);
			e = NULL;
		} else {
			/* cd_spawn returns once the child has exec'd (or failed to). */
			cd_metric_start_latency(cd_metric_now_ns() - st->began_ns);
			/* The entry stops it at closed. */
			e->netproxy = st->np;
			st->np = NULL;
			cd_log_debug("serve: started process %s (pid %d, %s)", e->id,
				     (int)cd_proc_pid(e->proc),
				     cd_proc_is_sandboxed(e->proc) ? "sandboxed" : "unsandboxed");
			for (char **d = st->b.lp ? st->b.lp->degraded : NULL; d && *d; d++)
				cd_log_debug("serve: process %s: %s", e->id, *d);
		}
	}
	if (c && !c->freed) {
		if (err) {
			cd_conn_error(c, st->id, code, err);
		} else if (e) {
			struct cd_strbuf sb = { 0 };
			append_start_result(&sb, e, &st->b, st->has_sandbox, st->seatbelt);
			reply_sb(c, st->id, &sb);
		}
		cd_conn_schedule_process(c);
	}
	/* Not started, or refused: its proxy is stopped (and reaped by the loop). */
	cd_netproxy_stop(st->np, s->stopping);
	st->np = NULL;
	free(err);
	start_free(st);
}

void cd_start_orphan(struct cd_start *st)
{
	st->entry = NULL;
}

void cd_start_conn_gone(struct cd_start *st, const char *why)
{
	struct cd_conn *c = st->conn;
	if (!c)
		return;
	if (why && !c->freed)
		cd_conn_error(c, st->id, CD_RPC_INVALID_REQUEST, why);
	c->start = NULL;
	st->conn = NULL;
}

void cd_start_server_stop(struct cd_server *s)
{
	/* Detached first: what its completions do must not find it (cd_server_prep_workq). */
	struct cd_workq *q = s->prep_workq;
	s->prep_workq = NULL;
	if (cd_workq_free(q, START_STOP_MS, "preparation") < 0)
		s->workers_left = true;
}

static void m_start(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct cd_server *s = c->server;
	struct cd_session *se = c->session;
	const struct cd_json *pid, *cwd_v, *env, *arg0, *proxy;
	struct cd_netproxy_cfg *np_cfg = NULL;
	bool tty, pipe_stdin, enforce;
	char **argv = NULL, *cwd = NULL, *err = NULL;
	struct cd_limits asked;
	uint64_t began_ns = cd_metric_now_ns();

	if (cd_param_object(params, "struct WireExecParams", &err) < 0 ||
	    cd_param_string(params, "processId", "processId", true, false, &pid, &err) < 0 ||
	    get_argv(params, &argv, &err) < 0 ||
	    cd_param_string(params, "cwd", "cwd", true, false, &cwd_v, &err) < 0 ||
	    cd_param_bool(params, "tty", "tty", true, false, &tty, &err) < 0 ||
	    cd_param_bool(params, "pipeStdin", "pipeStdin", false, false, &pipe_stdin, &err) < 0 ||
	    cd_param_string(params, "arg0", "arg0", false, true, &arg0, &err) < 0 ||
	    cd_param_bool(params, "enforceManagedNetwork", "enforceManagedNetwork", false, false,
			  &enforce, &err) < 0 ||
	    check_managed_network(params, &err) < 0 || cd_param_cordon(params, &asked, &err) < 0)
		goto invalid;
	env = cd_json_get(params, "env");
	if (!env) {
		err = cd_param_missing("env");
		goto invalid;
	}
	const struct cd_json *sandbox = cd_json_get(params, "sandbox");
	if (sandbox && sandbox->type == CD_JSON_NULL)
		sandbox = NULL;
	proxy = cd_json_get(params, "networkProxy");

	if (!argv[0]) {
		err = cd_xstrdup("argv must not be empty");
		goto invalid;
	}
	/* It is repeated in every notification of the process: bounded. */
	if (pid->u.str.len > CD_SERVE_MAX_PROCESS_ID) {
		cd_metric_refusal(CD_REFUSAL_INVALID);
		invalid_request(c, id,
				cd_xasprintf("processId must not exceed %d bytes (it has %zu)",
					     CD_SERVE_MAX_PROCESS_ID, pid->u.str.len));
		goto out;
	}
	const char *why = NULL;
	if (cd_pathuri_to_posix(cwd_v->u.str.s, cwd_v->u.str.len, &cwd, &why) < 0) {
		if ((err = cd_param_uri_refusal(cwd_v->u.str.s, cwd_v->u.str.len)))
			goto invalid;
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "cwd URI `");
		cd_strbuf_append_n(&sb, cwd_v->u.str.s, strnlen(cwd_v->u.str.s, cwd_v->u.str.len));
		cd_strbuf_printf(&sb, "` is not valid on this exec-server host: %s",
				 why ? why : "invalid URI");
		err = cd_strbuf_steal(&sb);
		goto invalid;
	}
	if (proxy && proxy->type != CD_JSON_NULL) {
		if (cd_netproxy_parse(proxy, &np_cfg, &err) < 0)
			goto invalid;
#ifdef __APPLE__
		/* It runs as `cordon proxy`, which macOS's program has not (initialize says so). */
		err = cd_xstrdup(
			"networkProxy is not available on this executor: cordon's proxy "
			"runs on Linux only so far (capabilities.networkProxyLaunch is false); "
			"send enforceManagedNetwork with a proxy of your own on 127.0.0.1");
		goto invalid;
#endif
		/* Its proxy is only enforced by the sandbox's fence: without one, refused. */
		if (!sandbox) {
			err = cd_xstrdup(
				"networkProxy requires `sandbox` on this executor: cordon's "
				"proxy is only the way out of a sandbox's network, and an "
				"unsandboxed process could go around it");
			goto invalid;
		}
	}
	if (arg0 && cd_json_string_has_nul(arg0)) {
		err = cd_xstrdup("`arg0` contains a NUL byte");
		goto invalid;
	}

	if (cd_session_has(se, pid->u.str.s, pid->u.str.len)) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "process ");
		append_pid(&sb, pid);
		cd_strbuf_append(&sb, " already exists");
		cd_metric_refusal(CD_REFUSAL_INVALID);
		invalid_request(c, id, cd_strbuf_steal(&sb));
		goto out;
	}
	if (se->n_procs >= s->opts.max_processes) {
		cd_metric_refusal(CD_REFUSAL_MAX_PROCESSES);
		invalid_request(c, id,
				cd_xasprintf("too many processes (limit %u); wait for some to "
					     "close or raise --max-processes",
					     s->opts.max_processes));
		goto out;
	}
	struct cd_start *st = cd_xcalloc(1, sizeof(*st));
	st->server = s;
	st->began_ns = began_ns;
	st->id = cd_xstrdup(id);
	st->msg = c->cur_msg;
	c->cur_msg = NULL;
	st->env = env;
	st->env_policy = cd_json_get(params, "envPolicy");
	st->sandbox = sandbox;
	st->has_sandbox = st->sandbox != NULL;
	st->argv = argv;
	st->cwd = cwd;
	argv = NULL;
	cwd = NULL;
	st->arg0 = arg0 ? cd_xstrdup(arg0->u.str.s) : NULL;
	st->tty = tty;
	st->pipe_stdin = pipe_stdin;
	st->enforce = enforce;
	st->np_cfg = np_cfg;
	np_cfg = NULL;
	st->asked = asked;
	st->lopts = s->opts.lopts;
	for (size_t i = 0; i < st->lopts.n_hidden; i++)
		st->hidden[i] = st->lopts.hidden[i];
	st->lopts.hidden = st->hidden;
	st->work.run = start_run;
	st->work.done = start_done;
	if (cd_testhook_holds("process/start"))
		st->hook_key = cd_xasprintf("conn=%lu id=%s", c->serial, id);

	st->entry = cd_session_reserve(se, pid->u.str.s, pid->u.str.len);
	st->entry->starting = st;
	if (st->np_cfg)
		cd_netproxy_cfg_tag(st->np_cfg, pid->u.str.s, pid->u.str.len);
	st->conn = c;
	c->start = st;
	st->next = starts_running;
	starts_running = st;
	struct cd_workq *q = cd_server_prep_workq(s);
	if (!q || cd_workq_submit(q, &st->work) < 0) {
		/* No worker could be had: prepared here, as before there were any. */
		start_run(&st->work);
		st->work.ran = true;
		start_done(&st->work);
	}
	goto out;

invalid:
	cd_metric_refusal(CD_REFUSAL_INVALID);
	invalid_params(c, id, err);
out:
	cd_netproxy_cfg_free(np_cfg);
	cd_strv_free(argv);
	free(cwd);
}

/* ---- process/read, write, signal, terminate ---- */

static void on_read_deadline(struct cd_loop *l, void *data)
{
	struct cd_conn *c = data;
	if (!c->pending)
		return;
	c->pending->timer = NULL;
	(void)cd_pending_try_complete(c, true);
}

static void m_read(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *pid;
	uint64_t after, max, wait;
	char *err = NULL;

	if (cd_param_object(params, "struct ReadParams", &err) < 0 ||
	    cd_param_string(params, "processId", "processId", true, false, &pid, &err) < 0 ||
	    cd_param_u64(params, "afterSeq", "afterSeq", 0, &after, &err) < 0 ||
	    cd_param_u64(params, "maxBytes", "maxBytes", UINT64_MAX, &max, &err) < 0 ||
	    cd_param_u64(params, "waitMs", "waitMs", 0, &wait, &err) < 0) {
		invalid_params(c, id, err);
		return;
	}
	struct cd_pentry *e = cd_session_find(c->session, pid->u.str.s, pid->u.str.len);
	if (!e) {
		invalid_request(c, id, unknown_process(pid));
		return;
	}
	size_t max_bytes = max >= SIZE_MAX ? SIZE_MAX : (size_t)max;
	/* The client has everything up to afterSeq: lossless mode need not keep it. */
	cd_proc_ack(e->proc, after);
	struct cd_proc_read r;
	memset(&r, 0, sizeof(r));
	cd_proc_read(e->proc, after, max_bytes, &r);
	if (wait == 0 || cd_read_is_ready(&r, after)) {
		cd_reply_read(c, id, e, &r);
		free(r.chunks);
		return;
	}
	free(r.chunks);

	struct cd_pending_read *p = cd_xcalloc(1, sizeof(*p));
	p->req_id = cd_xstrdup(id);
	p->entry = e;
	p->after_seq = after;
	p->max_bytes = max_bytes;
	p->timer = cd_loop_add_timer(c->server->loop, wait, on_read_deadline, c);
	c->pending = p;
	cd_testhook_event("read-wait conn=%lu id=%s", c->serial, id);
}

static void m_write(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *pid, *chunk, *wid;
	char *err = NULL;

	if (cd_param_object(params, "struct WriteParams", &err) < 0 ||
	    cd_param_string(params, "processId", "processId", true, false, &pid, &err) < 0 ||
	    cd_param_string(params, "chunk", "chunk", true, false, &chunk, &err) < 0 ||
	    cd_param_string(params, "writeId", "writeId", true, false, &wid, &err) < 0) {
		invalid_params(c, id, err);
		return;
	}
	if (wid->u.str.len == 0) {
		invalid_params(c, id, cd_xstrdup("writeId must not be empty"));
		return;
	}
	unsigned char *data = NULL;
	size_t len = 0;
	if (cd_base64_decode(chunk->u.str.s, chunk->u.str.len, &data, &len) < 0) {
		invalid_params(c, id, cd_base64_refusal(chunk->u.str.s, chunk->u.str.len));
		return;
	}
	struct cd_pentry *e = cd_session_find(c->session, pid->u.str.s, pid->u.str.len);
	if (!e) {
		free(data);
		reply_static(c, id, "{\"status\":\"unknownProcess\"}");
		return;
	}
	enum cd_write_status st = CD_WRITE_STDIN_CLOSED;
	int r = cd_proc_write(e->proc, wid->u.str.s, data, len, &st);
	free(data);
	if (r == -ENOBUFS) {
		cd_conn_error(c, id, CD_RPC_INTERNAL,
			      "failed to write to process stdin: more than 8 MiB queued");
		return;
	}
	if (r < 0) {
		cd_conn_error(c, id, CD_RPC_INTERNAL, "failed to write to process stdin");
		return;
	}
	switch (st) {
	case CD_WRITE_ACCEPTED:
		reply_static(c, id, "{\"status\":\"accepted\"}");
		break;
	case CD_WRITE_STDIN_CLOSED:
		reply_static(c, id, "{\"status\":\"stdinClosed\"}");
		break;
	}
}

static void m_signal(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *pid, *sig;
	char *err = NULL;

	sig = cd_json_get(params, "signal");
	if (cd_param_object(params, "struct SignalParams", &err) < 0 ||
	    cd_param_string(params, "processId", "processId", true, false, &pid, &err) < 0) {
		invalid_params(c, id, err);
		return;
	}
	/* An enum to the released binary: a string, or a map of one unit variant. */
	const char *name;
	size_t len;
	if (!sig) {
		invalid_params(c, id, cd_param_missing("signal"));
		return;
	} else if (sig->type == CD_JSON_STRING) {
		name = sig->u.str.s;
		len = sig->u.str.len;
	} else if (sig->type == CD_JSON_OBJECT && sig->u.obj.n == 1) {
		name = sig->u.obj.members[0].key;
		len = sig->u.obj.members[0].key_len;
	} else if (sig->type == CD_JSON_OBJECT) {
		invalid_params(c, id,
			       cd_xstrdup("invalid value: map, expected map with a single key"));
		return;
	} else {
		invalid_params(c, id, cd_param_invalid(sig, "string or map", NULL));
		return;
	}
	if (len != 9 || memcmp(name, "interrupt", 9) != 0) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "unknown variant `");
		cd_strbuf_append_n(&sb, name, strnlen(name, len));
		cd_strbuf_append(&sb, "`, expected `interrupt`");
		invalid_params(c, id, cd_strbuf_steal(&sb));
		return;
	}
	if (sig->type == CD_JSON_OBJECT && sig->u.obj.members[0].value->type != CD_JSON_NULL) {
		invalid_params(c, id, cd_param_invalid(sig->u.obj.members[0].value, "unit", NULL));
		return;
	}
	struct cd_pentry *e = cd_session_find(c->session, pid->u.str.s, pid->u.str.len);
	if (e)
		cd_proc_interrupt(e->proc);
	reply_static(c, id, "{}");
}

static void m_terminate(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	const struct cd_json *pid;
	char *err = NULL;
	bool running = false;

	if (cd_param_object(params, "struct TerminateParams", &err) < 0 ||
	    cd_param_string(params, "processId", "processId", true, false, &pid, &err) < 0) {
		invalid_params(c, id, err);
		return;
	}
	struct cd_pentry *e = cd_session_find(c->session, pid->u.str.s, pid->u.str.len);
	if (e)
		cd_proc_terminate(e->proc, &running);
	reply_static(c, id, running ? "{\"running\":true}" : "{\"running\":false}");
}

/* ---- dispatch ---- */

static const struct {
	const char *name;
	const char *category; /* for the handshake errors; NULL: initialize */
	method_fn fn;
} methods[] = {
	{ "initialize", NULL, m_initialize },
	{ "environment/info", "environment info", m_env_info },
	{ "environment/status", "environment status", m_env_status },
	{ "cordon/status", "environment status", m_cordon_status },
	{ "cordon/metrics", "environment status", m_cordon_metrics },
	{ "process/start", "exec", m_start },
	{ "process/read", "exec", m_read },
	{ "process/write", "exec", m_write },
	{ "process/signal", "exec", m_signal },
	{ "process/terminate", "exec", m_terminate },
	{ "fs/readFile", "filesystem", cd_fs_read_file },
	{ "fs/writeFile", "filesystem", cd_fs_write_file },
	{ "fs/createDirectory", "filesystem", cd_fs_create_directory },
	{ "fs/getMetadata", "filesystem", cd_fs_get_metadata },
	{ "fs/canonicalize", "filesystem", cd_fs_canonicalize },
	{ "fs/readDirectory", "filesystem", cd_fs_read_directory },
	{ "fs/walk", "filesystem", cd_fs_walk },
	{ "fs/remove", "filesystem", cd_fs_remove },
	{ "fs/copy", "filesystem", cd_fs_copy },
	{ "capabilityRoots/discoverV1", "capability discovery", cd_discover_roots_v1 },
	{ "capabilities/discoverV2", "capability discovery", cd_discover_v2 },
	{ "fs/open", "filesystem", cd_fs_open },
	{ "fs/readBlock", "filesystem", cd_fs_read_block_in_order },
	{ "fs/close", "filesystem", cd_fs_close_in_order },
	{ "fs/writeBlock", "filesystem", cd_fs_write_block_in_order },
	{ "http/request", "http", cd_http_request },
	{ "fs/watchMissing", "filesystem", cd_fs_watch_missing },
	{ "environmentConfig/read", "environment config", cd_envconfig_read },
};

/* Requests handled, per entry of methods[] (loop thread only). */
static uint64_t method_counts[CD_ARRAY_SIZE(methods)];

bool cd_methods_counter(size_t i, const char **ret_name, uint64_t *ret_count)
{
	if (i >= CD_ARRAY_SIZE(methods))
		return false;
	*ret_name = methods[i].name;
	*ret_count = method_counts[i];
	return true;
}

void cd_methods_request(struct cd_conn *c, const char *id, const char *method,
			const struct cd_json *params)
{
	for (size_t i = 0; i < CD_ARRAY_SIZE(methods); i++) {
		if (!cd_streq(methods[i].name, method))
			continue;
		cd_log_debug("serve: request %s %s", id, method);
		if (methods[i].category && !c->initialize_done) {
			invalid_request(c, id,
					cd_xasprintf("client must call initialize before using %s "
						     "methods",
						     methods[i].category));
			return;
		}
		if (methods[i].category && c->evicted) {
			cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
				      "session has been resumed by another connection");
			return;
		}
		if (methods[i].category && !c->initialized) {
			invalid_request(c, id,
					cd_xasprintf("client must send initialized before using %s "
						     "methods",
						     methods[i].category));
			return;
		}
		method_counts[i]++;
		methods[i].fn(c, id, params);
		return;
	}
	struct cd_strbuf sb = { 0 };
	cd_strbuf_printf(&sb, "exec-server stub does not implement `%s` yet", method);
	cd_conn_error(c, id, CD_RPC_METHOD_NOT_FOUND, sb.buf);
	cd_strbuf_done(&sb);
}

bool cd_methods_notification(struct cd_conn *c, const char *method)
{
	if (cd_streq(method, "initialized") && c->initialize_done) {
		c->initialized = true;
		return true;
	}
	return false;
}
