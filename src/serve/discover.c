/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "serve/budget.h"
#include "serve/discover-scan.h"
#include "serve/discover.h"
#include "serve/fs-helper.h"
#include "serve/fs-ops.h"
#include "serve/intent.h"
#include "serve/server.h"
#include "serve/testhook.h"
#include "serve/workq.h"

/*
 * A root without a sandbox context is scanned by the server (as its user:
 * the client may read those files with fs/readFile anyway); the server's
 * own hidden files (the auth token file, its sockets) are never read,
 * wherever a name leads to them. A root with one is bound like an fs/...
 * request's: when it restricts the file system, cordon-fs-helper scans it
 * in that sandbox (where the hidden files are masked), and its answer is
 * checked before it is used (cd_fs_res_flaw).
 */

#define MAX_ROOTS 128
/* Scans at once, server-wide: the others wait; fs requests never do. */
#define DISCOVER_WORKERS 2
#define STOP_MS		 2000
#define METHOD		 "capabilityRoots/discoverV1"

struct root {
	char *id; /* owned, decoded (may hold NULs) */
	size_t id_len;
	char *path;		       /* owned, POSIX, normalised */
	const struct cd_json *sandbox; /* in the job's msg, or NULL */
};

struct job {
	struct cd_work w; /* first */
	struct cd_server *server;
	struct cd_conn *conn;
	unsigned long serial;
	char *id;	     /* owned, JSON text */
	struct cd_json *msg; /* owned: the request, when a root has a sandbox */
	struct root *roots;
	size_t n_roots;
	struct cd_discover_hidden hidden;
	struct cd_linux_opts lopts; /* the server's fs_lopts, hidden files copied */
	struct cd_hidden_path hid[CD_ARRAY_SIZE(((struct cd_server *)0)->hidden)];
	struct cd_strbuf out; /* the result */
	size_t charged;	      /* of out, to the memory budget (files) */
	bool over_budget;     /* out grew past the budget: the answer is an error */
};

static struct cd_workq *pool;
/* Set at shutdown: the running scans stop at their next step (the walk's, or a file). */
static atomic_bool stopping;
/* The sandboxed scans running now, for the shutdown to kill their helpers. */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cd_fs_sandboxed *running[DISCOVER_WORKERS];

static void running_set(struct cd_fs_sandboxed *sb, bool on)
{
	pthread_mutex_lock(&running_lock);
	for (size_t i = 0; i < DISCOVER_WORKERS; i++) {
		if (on ? !running[i] : running[i] == sb) {
			running[i] = on ? sb : NULL;
			break;
		}
	}
	pthread_mutex_unlock(&running_lock);
}

/* The root's result body, scanned in its sandbox; or NULL with *err. */
static void scan_sandboxed(struct job *j, const struct root *rt, const char *root_uri,
			   struct cd_strbuf *body, char **err)
{
	struct cd_cli_bound b;
	char *e = NULL;
	memset(&b, 0, sizeof(b));
	/* No params cwd: the server's own, for permissions that need none (as fs/...). */
	if (cd_intent_bind(rt->sandbox, NULL, false, &j->server->host, &j->lopts, &b, &e) < 0) {
		*err = e;
		goto out;
	}
	const struct cd_linux_plan *lp;
	if (cd_intent_fs_helper_plan(&b, &lp, &e) < 0) {
		*err = e;
		goto out;
	}
	if (!lp) {
		cd_discover_scan(rt->path, &j->hidden, body);
		goto out;
	}
	if (cd_server_hidden_check(j->server, NULL, &e) < 0) {
		*err = e;
		goto out;
	}
	struct cd_fs_sandboxed sb;
	struct cd_fs_req q = { .op = CD_FS_DISCOVER, .path = (char *)rt->path, .sandboxed = true };
	struct cd_fs_res r = { .fd = -1 };
	cd_fs_sandboxed_init(&sb, lp, &j->server->fs_helper, &stopping);
	running_set(&sb, true);
	if (!atomic_load(&stopping))
		cd_fs_run_sandboxed(&sb, &q, &r);
	else
		cd_fs_res_errno(&r, ECANCELED);
	running_set(&sb, false);
	const char *flaw = r.code ? NULL : cd_fs_res_flaw(&q, &r);
	if (r.code || flaw)
		*err = cd_xasprintf("failed to scan capability root %s: %s", root_uri,
				    flaw	? flaw
				    : r.out.buf ? r.out.buf
						: "error");
	else
		cd_strbuf_append_n(body, r.out.buf, r.out.len);
	if (r.fd >= 0)
		close(r.fd);
	cd_strbuf_done(&r.out);
out:
	cd_cli_bound_done(&b);
}

static void scan_root(struct job *j, const struct root *rt)
{
	struct cd_strbuf body = { 0 };
	char *uri = cd_pathuri_format_posix(rt->path, strlen(rt->path)), *err = NULL;

	if (rt->sandbox)
		scan_sandboxed(j, rt, uri, &body, &err);
	else
		cd_discover_scan(rt->path, &j->hidden, &body);
	cd_strbuf_append(&j->out, "{\"id\":");
	cd_strbuf_append_json_string(&j->out, rt->id, rt->id_len);
	cd_strbuf_append(&j->out, ",\"path\":");
	cd_strbuf_append_json_string(&j->out, uri, strlen(uri));
	if (err) {
		cd_strbuf_append(&j->out,
				 ",\"plugin\":null,\"skills\":[],\"namespaceManifests\":[],"
				 "\"warnings\":[],\"error\":");
		cd_strbuf_append_json_string(&j->out, err, strlen(err));
		cd_strbuf_append_c(&j->out, '}');
	} else if (body.len > 2) {
		/* An object (the helper's answer was checked): its members follow ours. */
		cd_strbuf_append_c(&j->out, ',');
		cd_strbuf_append_n(&j->out, body.buf + 1, body.len - 1);
	} else {
		cd_strbuf_append_c(&j->out, '}');
	}
	cd_strbuf_done(&body);
	free(uri);
	free(err);
}

static void job_free(struct job *j)
{
	for (size_t i = 0; i < j->n_roots; i++) {
		free(j->roots[i].id);
		free(j->roots[i].path);
	}
	free(j->roots);
	free(j->id);
	cd_json_free(j->msg);
	cd_strbuf_done(&j->out);
	cd_mem_set(CD_MEM_FILES, &j->charged, 0);
	free(j);
}

/* On a worker. */
static void job_run(struct cd_work *w)
{
	struct job *j = (struct job *)w;
	cd_fs_cur_cancel = &stopping;
	if (cd_testhook_holds(METHOD)) {
		char *key = cd_xasprintf("conn=%lu id=%s", j->serial, j->id);
		cd_testhook_hold(key, METHOD, &stopping);
		free(key);
	}
	cd_strbuf_append(&j->out, "{\"roots\":[");
	for (size_t i = 0; i < j->n_roots; i++) {
		if (i)
			cd_strbuf_append_c(&j->out, ',');
		scan_root(j, &j->roots[i]);
		/*
		 * 128 roots of 16 MiB each would be 2 GiB: the result counts as
		 * fs data in flight, and one past the server's budget is not sent.
		 */
		cd_mem_set(CD_MEM_FILES, &j->charged, j->out.len);
		if (!cd_mem_room(0)) {
			j->over_budget = true;
			break;
		}
	}
	cd_strbuf_append(&j->out, "]}");
	cd_fs_cur_cancel = NULL;
}

/* On the loop: answer, when the connection is still there. */
static void job_done(struct cd_work *w)
{
	struct job *j = (struct job *)w;
	struct cd_conn *c = cd_conn_listed(j->server, j->conn, j->serial);
	if (c) {
		c->n_discover--;
		if (c->freed || !w->ran || atomic_load(&stopping))
			c = NULL;
	}
	if (c) {
		if (j->over_budget)
			cd_conn_error(c, j->id, CD_RPC_INTERNAL,
				      "capability discovery result exceeds the server's memory "
				      "budget (--max-memory)");
		else
			cd_conn_result(c, j->id, j->out.buf, j->out.len);
		/* The end of input was waiting for this answer (cd_conn_process). */
		if (c->in_eof)
			cd_conn_schedule_process(c);
		cd_conn_kick(c);
	}
	job_free(j);
}

/* The binary decodes through a JSON value first: a number is only "number" there. */
static char *invalid_type(const struct cd_json *v, const char *exp)
{
	if (v->type == CD_JSON_NUMBER)
		return cd_xasprintf("invalid type: number, expected %s", exp);
	return cd_param_invalid(v, exp, NULL);
}

void cd_discover_roots_v1(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct cd_server *s = c->server;
	struct job *j = NULL;
	char *err = NULL;

	if (cd_param_object(params, "struct WireCapabilityRootsDiscoverParams", &err) < 0)
		goto invalid;
	const struct cd_json *roots = cd_json_get(params, "roots");
	if (!roots) {
		err = cd_param_missing("roots");
		goto invalid;
	}
	if (roots->type != CD_JSON_ARRAY) {
		err = invalid_type(roots, "a sequence");
		goto invalid;
	}
	bool has_sandbox = false;
	j = cd_xcalloc(1, sizeof(*j));
	j->roots = cd_xcalloc(roots->u.arr.n + 1, sizeof(*j->roots));
	for (size_t i = 0; i < roots->u.arr.n; i++) {
		const struct cd_json *r = roots->u.arr.items[i], *v, *p, *sb;
		if (r->type != CD_JSON_OBJECT) {
			err = invalid_type(r, "struct WireCapabilityRootDiscoverRequest");
			goto invalid;
		}
		v = cd_json_get(r, "id");
		p = cd_json_get(r, "path");
		sb = cd_json_get(r, "sandbox");
		if (!v || !p) {
			err = cd_param_missing(v ? "path" : "id");
			goto invalid;
		}
		if (v->type != CD_JSON_STRING || p->type != CD_JSON_STRING) {
			err = invalid_type(v->type != CD_JSON_STRING ? v : p, "a string");
			goto invalid;
		}
		if (sb && sb->type != CD_JSON_NULL && sb->type != CD_JSON_OBJECT) {
			err = invalid_type(sb, "struct WireFileSystemSandboxContext");
			goto invalid;
		}
		struct root *rt = &j->roots[j->n_roots++];
		const char *why = NULL;
		if (cd_pathuri_to_posix(p->u.str.s, p->u.str.len, &rt->path, &why) < 0) {
			if ((err = cd_param_uri_refusal(p->u.str.s, p->u.str.len)))
				goto invalid;
			err = cd_xasprintf("invalid URI: %s", why ? why : "not a file URI");
			goto invalid;
		}
		rt->id = cd_xmalloc(v->u.str.len + 1);
		memcpy(rt->id, v->u.str.s, v->u.str.len + 1);
		rt->id_len = v->u.str.len;
		rt->sandbox = sb && sb->type != CD_JSON_NULL ? sb : NULL;
		has_sandbox = has_sandbox || rt->sandbox;
	}
	if (j->n_roots > MAX_ROOTS) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "capability root discovery accepts at most 128 roots");
		job_free(j);
		return;
	}
	if (!pool) {
		atomic_store(&stopping, false);
		pool = cd_workq_new(s->loop, DISCOVER_WORKERS);
	}
	if (!pool) {
		cd_conn_error(c, id, CD_RPC_INTERNAL, "capability discovery is unavailable");
		job_free(j);
		return;
	}
	j->server = s;
	j->conn = c;
	j->serial = c->serial;
	j->id = cd_xstrdup(id);
	cd_discover_hidden_snapshot(&j->hidden, s->hidden_fd, s->n_hidden);
	if (has_sandbox) {
		/* The roots' sandbox contexts are bound on the worker: the tree goes along. */
		j->msg = c->cur_msg;
		c->cur_msg = NULL;
		j->lopts = s->fs_lopts;
		for (size_t i = 0; i < j->lopts.n_hidden && i < CD_ARRAY_SIZE(j->hid); i++)
			j->hid[i] = j->lopts.hidden[i];
		j->lopts.hidden = j->hid;
	}
	j->w.run = job_run;
	j->w.done = job_done;
	/* Bounded per connection, as fs requests are: each job holds its request. */
	if (cd_conn_submit_scan(c, id, &c->n_discover, pool, &j->w,
				"capability discovery is unavailable") < 0)
		job_free(j);
	return;
invalid:
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
	free(err);
	if (j)
		job_free(j);
}

void cd_discover_server_stop(struct cd_server *s)
{
	if (!pool)
		return;
	atomic_store(&stopping, true);
	pthread_mutex_lock(&running_lock);
	for (size_t i = 0; i < DISCOVER_WORKERS; i++)
		if (running[i])
			cd_fs_sandboxed_cancel(running[i]);
	pthread_mutex_unlock(&running_lock);
	if (cd_workq_free(pool, STOP_MS, "capability discovery") < 0)
		s->workers_left = true;
	pool = NULL;
}
