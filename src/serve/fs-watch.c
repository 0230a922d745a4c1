/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs/watchMissing {watchId, missing: [uri...], present?: uri} ->
 * {watching}, and the notification fs/missingChanged {watchId}: the
 * semantics read off the released Codex exec-server (0.169.0), which has
 * no sandbox context for it.
 *
 *  - One watch per session. A watchId not greater than every one the
 *    session sent before (answered or not) is stale: {"watching":false}
 *    and nothing changes. Any other request replaces the session's watch
 *    (the old one ends silently), then arms the new one when it can.
 *  - {"watching":false}, and no watch, when: missing is empty or holds more
 *    than 64 paths; a missing path exists (lstat: a dangling symlink
 *    exists); its nearest existing ancestor is not a directory (a file, a
 *    symlink); present does not exist; a path is a Windows one (a URI with
 *    a host); the kernel has no watch left for us (ENOSPC: logged once,
 *    with the fix) or the server's own bound is reached.
 *  - Armed, it fires once, then ends: when a missing path's nearest
 *    existing ancestor gets the next component (created, renamed into
 *    place, a symlink, a directory, a file where a directory was expected)
 *    or is itself removed or renamed; when present is removed or renamed
 *    (not when something inside it changes).
 *
 * Each missing path is watched in its nearest existing ancestor for the
 * name of the next component, present in itself: one kernel watch per
 * such inode, shared by every target on it (inotify gives one watch
 * descriptor per inode and instance), removed when no armed target uses
 * it any more. The walks (lstat up the path, inotify_add_watch, a second
 * lstat that closes the window between the two) run on a worker
 * (cd_server_prep_workq): a hung network mount holds that worker, never
 * the loop. Events the loop reads while walks are in flight are kept
 * (EVENTS_KEPT; past that every watch armed from then on fires at once,
 * which costs the client one extra fs/getMetadata, never a missed change)
 * and applied to a watch armed from a walk that began before them.
 *
 * A detached session keeps its watch; what fires meanwhile is sent when
 * it is resumed. The session's end releases everything.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/inotify.h>
#else
/*
 * macOS has no inotify, and a kqueue (EVFILT_VNODE) port is not built: no
 * instance is ever made there (inotify_fd), so every watch answers
 * {"watching":false} and initialize says fsWatchMissing false. What the
 * code below names of inotify is declared for it to build.
 */
#include <stdint.h>
struct inotify_event {
	int wd;
	uint32_t mask, cookie, len;
	char name[];
};
#define IN_CREATE      0x100u
#define IN_DELETE_SELF 0x400u
#define IN_MOVE_SELF   0x800u
#define IN_UNMOUNT     0x2000u
#define IN_Q_OVERFLOW  0x4000u
#define IN_IGNORED     0x8000u
#define IN_MOVED_TO    0x80u
#define IN_DONT_FOLLOW 0x2000000u
static int inotify_add_watch(int fd, const char *path, uint32_t mask)
{
	(void)fd, (void)path, (void)mask;
	errno = ENOSYS;
	return -1;
}
static int inotify_rm_watch(int fd, int wd)
{
	(void)fd, (void)wd;
	errno = ENOSYS;
	return -1;
}
#endif
#include <sys/stat.h>
#include <unistd.h>

#include "core/pathuri.h"
#include "serve/budget.h"
#include "serve/fs-watch.h"
#include "serve/intent.h"
#include "serve/server.h"
#include "serve/testhook.h"
#include "serve/workq.h"
#include "shared/log.h"

/* What the released binary watches at most per request (65: {"watching":false}). */
#define WATCH_MAX_PATHS 64
/* Targets (paths being watched) per server, over every session. */
#define WATCH_MAX_TARGETS 4096
/*
 * Walks on the preparation workers at once, over every session (they share
 * them with process/start: walks stuck on a hung mount leave it some), and
 * per session one; the others wait their turn, in order.
 */
#define WALKS_RUNNING 2
/* Events kept while walks are in flight. */
#define EVENTS_KEPT 256

#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
#define GONE_MASK  (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)

struct target {
	int wd;
	/* Missing: the next component awaited in the watched directory; NULL: present itself. */
	char *name;
};

struct armed {
	uint64_t id;
	size_t n;
	struct target *t;
	size_t charged;
};

struct wjob;

struct cd_fs_watch_state {
	struct cd_session *se;
	bool any_id;
	uint64_t last_id;
	struct armed *armed;
	bool undelivered; /* fired while detached: sent on resume */
	uint64_t undelivered_id;
	struct cd_timer *resumed; /* sends it once the resume's answer is out */
	bool walking;		  /* one of its jobs is on a worker */
	struct wjob *jobs;
};

struct wjob {
	struct cd_work work;	      /* first: the pool hands this back */
	struct cd_fs_watch_state *st; /* NULL once the session ended */
	struct wjob *next;	      /* st->jobs */
	struct wjob *qnext;	      /* fsw.queue while it waits for a worker, then fsw.running */
	bool queued;
	struct cd_conn *conn; /* answers here; NULL once it no longer drives the session */
	char *req_id;
	uint64_t id;
	uint64_t events_mark; /* events seen from here on may concern it */
	int ifd;
	size_t n_paths;
	char **paths;	  /* [0] is present when has_present */
	bool has_present; /* paths[0] */
	bool unwatchable; /* decided on the loop: {"watching":false} without a walk */
	/* CORDON_TEST_HOLD=fs/watchMissing: "conn=N id=ID" (owned), held once walked. */
	char *hook_key;
	atomic_bool cancel; /* never set: a test that holds a walk releases it */
	size_t charged;
	/* results */
	bool watching;
	bool enospc;
	size_t n_t;
	struct target *t; /* the kernel watches added (wd >= 0), armed or released */
};

struct kept_event {
	uint64_t seq;
	int wd;
	uint32_t mask;
	char *name;
};

static struct {
	struct cd_server *server;
	int fd; /* inotify; -1: not made yet */
	bool unavailable;
	struct cd_watch *w;
	unsigned n_targets;		  /* armed targets plus those of walks to come */
	unsigned n_inflight;		  /* walks on a worker */
	struct wjob *queue, **queue_tail; /* walks waiting for one */
	struct wjob *running;		  /* walks on a worker */
	/* The watch descriptors added and not removed. */
	int *held;
	size_t n_held, cap_held;
	/* Events read while walks were in flight. */
	struct kept_event kept[EVENTS_KEPT];
	size_t n_kept;
	uint64_t event_seq; /* events read so far */
	uint64_t lost_last; /* the last event that could not be kept (0: none) */
	bool logged_enospc, logged_cap;
} fsw = { .fd = -1, .queue_tail = &fsw.queue };

unsigned cd_fs_watch_count(void)
{
	return (unsigned)fsw.n_held;
}

/* ---- the kernel watches ---- */

static void held_add(int wd)
{
	for (size_t i = 0; i < fsw.n_held; i++)
		if (fsw.held[i] == wd)
			return;
	if (fsw.n_held == fsw.cap_held) {
		fsw.cap_held = fsw.cap_held ? 2 * fsw.cap_held : 16;
		fsw.held = cd_xreallocarray(fsw.held, fsw.cap_held, sizeof(*fsw.held));
	}
	fsw.held[fsw.n_held++] = wd;
}

static void held_drop(int wd)
{
	for (size_t i = 0; i < fsw.n_held; i++)
		if (fsw.held[i] == wd) {
			fsw.held[i] = fsw.held[--fsw.n_held];
			return;
		}
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/*
 * Remove the kernel watches no armed target uses. Not while walks are in
 * flight: one may just have been given the same descriptor (same inode).
 */
static void sweep(void)
{
	if (fsw.n_inflight || !fsw.n_held || fsw.fd < 0)
		return;
	size_t n = 0;
	int *used = NULL;
	for (struct cd_session *se = fsw.server->sessions; se; se = se->next) {
		struct armed *a = se->fs_watch ? se->fs_watch->armed : NULL;
		for (size_t i = 0; a && i < a->n; i++) {
			if (a->t[i].wd < 0)
				continue;
			used = cd_xreallocarray(used, n + 1, sizeof(*used));
			used[n++] = a->t[i].wd;
		}
	}
	if (n)
		qsort(used, n, sizeof(*used), cmp_int);
	for (size_t i = 0; i < fsw.n_held;) {
		int wd = fsw.held[i];
		if (n && bsearch(&wd, used, n, sizeof(*used), cmp_int)) {
			i++;
			continue;
		}
		(void)inotify_rm_watch(fsw.fd, wd);
		fsw.held[i] = fsw.held[--fsw.n_held];
	}
	free(used);
}

static void targets_free(struct target *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(t[i].name);
	free(t);
}

static void armed_free(struct armed *a)
{
	if (!a)
		return;
	fsw.n_targets -= (unsigned)a->n;
	cd_mem_set(CD_MEM_FILES, &a->charged, 0);
	targets_free(a->t, a->n);
	free(a);
}

/* ---- notifications ---- */

static void send_changed(struct cd_conn *c, uint64_t id)
{
	char line[96];
	int n = snprintf(
		line, sizeof(line),
		"{\"method\":\"fs/missingChanged\",\"params\":{\"watchId\":%" PRIu64 "}}\n", id);
	memcpy(cd_conn_out_reserve(c, (size_t)n), line, (size_t)n);
	cd_conn_out_commit(c, (size_t)n);
	cd_conn_kick(c);
}

static bool conn_usable(const struct cd_conn *c)
{
	return c && !c->freed && !c->out_broken && !c->evicted;
}

/* The session's watch fired: it ends, and the client hears of it (now, or on resume). */
static void fire(struct cd_fs_watch_state *st)
{
	struct armed *a = st->armed;
	uint64_t id = a->id;
	st->armed = NULL;
	armed_free(a);
	struct cd_conn *c = st->se->conn;
	cd_log_debug("serve: session %s: fs/missingChanged %" PRIu64 "%s", st->se->id, id,
		     conn_usable(c) ? "" : " (sent on resume)");
	if (conn_usable(c)) {
		send_changed(c, id);
	} else {
		st->undelivered = true;
		st->undelivered_id = id;
	}
}

static bool event_hits(const struct target *t, int wd, uint32_t mask, const char *name)
{
	if (t->wd != wd)
		return false;
	if (mask & GONE_MASK)
		return true;
	return t->name && name && (mask & (IN_CREATE | IN_MOVED_TO)) && !strcmp(t->name, name);
}

static bool armed_hit(const struct armed *a, int wd, uint32_t mask, const char *name)
{
	for (size_t i = 0; i < a->n; i++)
		if (event_hits(&a->t[i], wd, mask, name))
			return true;
	return false;
}

/* ---- reading events ---- */

static void keep_event(int wd, uint32_t mask, const char *name)
{
	if (fsw.n_kept == EVENTS_KEPT) {
		fsw.lost_last = fsw.event_seq;
		return;
	}
	struct kept_event *k = &fsw.kept[fsw.n_kept++];
	k->seq = fsw.event_seq;
	k->wd = wd;
	k->mask = mask;
	k->name = name ? cd_xstrdup(name) : NULL;
}

static void forget_events(void)
{
	for (size_t i = 0; i < fsw.n_kept; i++)
		free(fsw.kept[i].name);
	fsw.n_kept = 0;
	fsw.lost_last = 0;
}

/* Drop the kept events that came before every walk on a worker began: they concern none. */
static void prune_events(void)
{
	if (!fsw.running) {
		forget_events();
		return;
	}
	uint64_t oldest = UINT64_MAX;
	for (struct wjob *j = fsw.running; j; j = j->qnext)
		if (j->events_mark < oldest)
			oldest = j->events_mark;
	size_t k = 0;
	for (size_t i = 0; i < fsw.n_kept; i++) {
		if (fsw.kept[i].seq <= oldest)
			free(fsw.kept[i].name);
		else
			fsw.kept[k++] = fsw.kept[i];
	}
	fsw.n_kept = k;
	if (fsw.lost_last <= oldest)
		fsw.lost_last = 0;
}

static void handle_event(int wd, uint32_t mask, const char *name)
{
	fsw.event_seq++;
	if (fsw.n_inflight)
		keep_event(wd, mask, name);
	for (struct cd_session *se = fsw.server->sessions; se; se = se->next) {
		struct cd_fs_watch_state *st = se->fs_watch;
		if (!st || !st->armed)
			continue;
		/* The queue overflowed: whatever was lost may concern any watch. */
		if ((mask & IN_Q_OVERFLOW) || armed_hit(st->armed, wd, mask, name))
			fire(st);
	}
	if (mask & IN_IGNORED)
		held_drop(wd); /* the kernel removed it (the inode is gone, or we did) */
}

static void on_inotify(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (int round = 0; round < 16; round++) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)p;
			handle_event(e->wd, e->mask, e->len ? e->name : NULL);
			p += sizeof(*e) + e->len;
		}
	}
	sweep();
}

/* The inotify instance, made on first use; -1 when the host has none. */
static int inotify_fd(struct cd_server *s)
{
	if (fsw.fd >= 0 || fsw.unavailable)
		return fsw.fd;
	fsw.server = s;
#ifndef __linux__
	(void)on_inotify; /* built on every host (the event handling with it), used on Linux */
	cd_log_debug("serve: fs/watchMissing: this host has no inotify: every watch answers "
		     "{\"watching\":false}");
	fsw.unavailable = true;
	return -1;
#else
	fsw.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fsw.fd < 0) {
		cd_log_warn("serve: fs/watchMissing: inotify_init1: %s: every watch answers "
			    "{\"watching\":false} (clients poll fs/getMetadata instead); raise "
			    "fs.inotify.max_user_instances if that is the limit",
			    strerror(errno));
		fsw.unavailable = true;
		return -1;
	}
	fsw.w = cd_loop_add_fd(s->loop, fsw.fd, CD_LOOP_IN, on_inotify, NULL);
	if (!fsw.w) {
		cd_log_warn("serve: fs/watchMissing: cannot watch the inotify descriptor: %s",
			    strerror(errno));
		close(fsw.fd);
		fsw.fd = -1;
		fsw.unavailable = true;
	}
	return fsw.fd;
#endif
}

/* ---- the walk, on a worker ---- */

static bool add_target(struct wjob *j, const char *watch_path, const char *name)
{
	int wd = inotify_add_watch(j->ifd, watch_path, WATCH_MASK | IN_DONT_FOLLOW);
	if (wd < 0) {
		j->enospc = errno == ENOSPC;
		return false;
	}
	j->t[j->n_t].wd = wd;
	j->t[j->n_t].name = name ? cd_xstrdup(name) : NULL;
	j->n_t++;
	return true;
}

/* A missing path: still missing, its nearest existing ancestor a directory, watched there. */
static bool walk_missing(struct wjob *j, const char *path)
{
	struct stat st;
	if (lstat(path, &st) == 0 || errno != ENOENT)
		return false;
	size_t end = strlen(path);
	bool ok = false;
	while (end > 0) {
		/* The ancestor is path[0..a) ("/" when a is 0); the next component starts at a + 1. */
		size_t a = end - 1;
		while (a > 0 && path[a] != '/')
			a--;
		if (path[a] != '/')
			break; /* not absolute: cannot happen */
		char *anc = a ? cd_xstrndup(path, a) : cd_xstrdup("/");
		if (lstat(anc, &st) < 0) {
			free(anc);
			if (errno != ENOENT)
				break;
			end = a;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			const char *comp = path + a + 1;
			const char *slash = strchr(comp, '/');
			char *name = slash ? cd_xstrndup(comp, (size_t)(slash - comp))
					   : cd_xstrdup(comp);
			if (add_target(j, anc, name)) {
				/* What appeared between the walk and the watch is seen here. */
				char *next = cd_xasprintf("%s/%s", a ? anc : "", name);
				ok = lstat(next, &st) < 0 && errno == ENOENT &&
				     lstat(anc, &st) == 0 && S_ISDIR(st.st_mode);
				free(next);
			}
			free(name);
		}
		free(anc);
		break;
	}
	return ok;
}

static bool walk_present(struct wjob *j, const char *path)
{
	struct stat st, st2;
	if (lstat(path, &st) < 0 || !add_target(j, path, NULL))
		return false;
	return lstat(path, &st2) == 0 && st2.st_dev == st.st_dev && st2.st_ino == st.st_ino;
}

static void job_run(struct cd_work *w)
{
	struct wjob *j = (struct wjob *)w;
	j->t = cd_xcalloc(j->n_paths ? j->n_paths : 1, sizeof(*j->t));
	j->watching = !j->unwatchable;
	for (size_t i = 0; j->watching && i < j->n_paths; i++) {
		if (i == 0 && j->has_present)
			j->watching = walk_present(j, j->paths[i]);
		else
			j->watching = walk_missing(j, j->paths[i]);
	}
	/*
	 * The tests hold the walk here, its kernel watches added and looked
	 * past: what happens now is only in the events the loop keeps.
	 */
	if (j->hook_key)
		cd_testhook_hold(j->hook_key, "fs/watchMissing", &j->cancel);
}

/* ---- requests ---- */

static void job_free(struct wjob *j)
{
	for (size_t i = 0; i < j->n_paths; i++)
		free(j->paths[i]);
	free(j->paths);
	free(j->req_id);
	free(j->hook_key);
	cd_mem_set(CD_MEM_FILES, &j->charged, 0);
	free(j);
}

static void job_unlink(struct wjob *j)
{
	struct cd_fs_watch_state *st = j->st;
	if (!st)
		return;
	for (struct wjob **pp = &st->jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	j->st = NULL;
}

static void queue_remove(struct wjob *j)
{
	if (!j->queued)
		return;
	for (struct wjob **pp = &fsw.queue; *pp; pp = &(*pp)->qnext)
		if (*pp == j) {
			*pp = j->qnext;
			if (fsw.queue_tail == &j->qnext)
				fsw.queue_tail = pp;
			break;
		}
	j->queued = false;
}

/* A walk that never ran (replaced while it waited, or its session ended): answered false. */
static void job_drop(struct wjob *j)
{
	queue_remove(j);
	job_unlink(j);
	fsw.n_targets -= (unsigned)j->n_paths;
	if (conn_usable(j->conn))
		cd_conn_result(j->conn, j->req_id, "{\"watching\":false}", 18);
	job_free(j);
}

static void job_done(struct cd_work *w);

/* Hand waiting walks to workers, in order, one per session, WALKS_RUNNING at most. */
static void pump(void)
{
	struct wjob **pp = &fsw.queue;
	while (*pp && fsw.n_inflight < WALKS_RUNNING) {
		struct wjob *j = *pp;
		if (j->st && j->st->walking) {
			pp = &j->qnext;
			continue;
		}
		*pp = j->qnext;
		if (fsw.queue_tail == &j->qnext)
			fsw.queue_tail = pp;
		j->queued = false;
		if (!j->st || fsw.server->stopping) {
			job_drop(j);
			continue;
		}
		j->st->walking = true;
		j->events_mark = fsw.event_seq;
		j->qnext = fsw.running;
		fsw.running = j;
		fsw.n_inflight++;
		struct cd_workq *q = cd_server_prep_workq(fsw.server);
		if (!q || cd_workq_submit(q, &j->work) < 0) {
			/* No worker to be had: the walk is done here (it may block the loop). */
			j->work.ran = true;
			job_run(&j->work);
			job_done(&j->work);
			pp = &fsw.queue; /* job_done pumped: start over */
		}
	}
}

/* Whether an event kept since the walk began concerns the new watch. */
static bool missed_while_walking(const struct wjob *j, const struct armed *a)
{
	if (fsw.lost_last > j->events_mark)
		return true;
	for (size_t i = 0; i < fsw.n_kept; i++) {
		const struct kept_event *k = &fsw.kept[i];
		if (k->seq > j->events_mark &&
		    ((k->mask & IN_Q_OVERFLOW) || armed_hit(a, k->wd, k->mask, k->name)))
			return true;
	}
	return false;
}

static void job_done(struct cd_work *w)
{
	struct wjob *j = (struct wjob *)w;
	struct cd_fs_watch_state *st = j->st;
	bool fired = false;

	fsw.n_inflight--;
	for (struct wjob **pp = &fsw.running; *pp; pp = &(*pp)->qnext)
		if (*pp == j) {
			*pp = j->qnext;
			break;
		}
	if (st)
		st->walking = false;
	fsw.n_targets -= (unsigned)j->n_paths;
	for (size_t i = 0; i < j->n_t; i++)
		held_add(j->t[i].wd);
	if (j->enospc && !fsw.logged_enospc) {
		fsw.logged_enospc = true;
		cd_log_warn("serve: fs/watchMissing: the kernel has no inotify watch left for this "
			    "user (ENOSPC): such watches answer {\"watching\":false} and clients "
			    "poll instead; raise fs.inotify.max_user_watches (sysctl)");
	}
	job_unlink(j);
	bool current = st && st->last_id == j->id && !fsw.server->stopping && w->ran;
	if (!w->ran)
		j->watching = false;
	if (current && j->watching) {
		struct armed *a = cd_xcalloc(1, sizeof(*a));
		a->id = j->id;
		a->n = j->n_t;
		a->t = j->t;
		j->t = NULL;
		fsw.n_targets += (unsigned)a->n;
		a->charged = 0;
		cd_mem_set(CD_MEM_FILES, &a->charged, a->n * (sizeof(*a->t) + NAME_MAX));
		st->armed = a;
		fired = missed_while_walking(j, a);
	}
	if (j->t)
		targets_free(j->t, j->n_t);
	j->t = NULL;
	if (conn_usable(j->conn))
		cd_conn_result(j->conn, j->req_id,
			       j->watching ? "{\"watching\":true}" : "{\"watching\":false}",
			       j->watching ? 17 : 18);
	if (fired)
		fire(st);
	prune_events();
	sweep();
	job_free(j);
	pump();
}

/* A path param: 0 with *ret (NULL for a Windows path: not watchable here), or -EINVAL. */
static int param_path(const struct cd_json *v, const char *field, char **ret, char **err)
{
	struct cd_pathuri u;
	const char *why = NULL;
	*ret = NULL;
	if (v->type != CD_JSON_STRING) {
		*err = cd_param_invalid(v, "a string", field);
		return -EINVAL;
	}
	if (cd_pathuri_parse(v->u.str.s, v->u.str.len, &u, &why) < 0) {
		*err = cd_xasprintf("invalid URI for `%s`: %s", field,
				    why ? why : "not a file URI");
		return -EINVAL;
	}
	/* Like the released binary: a host names a Windows share, no file of this host. */
	if (u.convention == CD_PATH_POSIX && !u.fallback && u.path[0] == '/' &&
	    strlen(u.path) == u.len) {
		*ret = u.path;
		u.path = NULL;
	} else if (u.convention == CD_PATH_POSIX) {
		cd_pathuri_done(&u);
		*err = cd_xasprintf("invalid URI for `%s`: not a path of this host", field);
		return -EINVAL;
	}
	cd_pathuri_done(&u);
	return 0;
}

static struct cd_fs_watch_state *state_of(struct cd_session *se)
{
	if (!se->fs_watch) {
		se->fs_watch = cd_xcalloc(1, sizeof(*se->fs_watch));
		se->fs_watch->se = se;
	}
	return se->fs_watch;
}

void cd_fs_watch_missing(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct cd_server *s = c->server;
	const struct cd_json *wid, *missing, *present;
	uint64_t watch_id;
	char *err = NULL;

	fsw.server = s;
	if (cd_param_object(params, "struct FsWatchMissingParams", &err) < 0)
		goto invalid;
	wid = cd_json_get(params, "watchId");
	if (!wid) {
		err = cd_param_missing("watchId");
		goto invalid;
	}
	if (wid->type != CD_JSON_NUMBER) {
		err = cd_param_invalid(wid, "u64", "watchId");
		goto invalid;
	}
	if (cd_json_uint64(wid, &watch_id) < 0) {
		/* The binary's words for a negative, fractional or too large number. */
		err = cd_xasprintf("invalid number for `watchId`");
		goto invalid;
	}
	missing = cd_json_get(params, "missing");
	if (!missing) {
		err = cd_param_missing("missing");
		goto invalid;
	}
	if (missing->type != CD_JSON_ARRAY) {
		err = cd_param_invalid(missing, "a sequence", "missing");
		goto invalid;
	}
	if (cd_param_string(params, "present", "present", false, true, &present, &err) < 0)
		goto invalid;

	/* Every path is checked before anything changes, as the binary parses them first. */
	size_t n = missing->u.arr.n + (present ? 1 : 0);
	char **paths = cd_xcalloc(n ? n : 1, sizeof(*paths));
	bool unwatchable = false;
	size_t k = 0, bytes = 0;
	if (present) {
		if (param_path(present, "present", &paths[k], &err) < 0)
			goto invalid_paths;
		unwatchable |= !paths[k];
		k++;
	}
	for (size_t i = 0; i < missing->u.arr.n; i++, k++) {
		char field[40];
		snprintf(field, sizeof(field), "missing[%zu]", i);
		if (param_path(missing->u.arr.items[i], field, &paths[k], &err) < 0)
			goto invalid_paths;
		unwatchable |= !paths[k];
	}
	for (size_t i = 0; i < n; i++)
		bytes += paths[i] ? strlen(paths[i]) + 1 : 0;

	struct cd_fs_watch_state *st = state_of(c->session);
	if (st->any_id && watch_id <= st->last_id) {
		/* Stale: a newer watch was asked for. Nothing changes. */
		for (size_t i = 0; i < n; i++)
			free(paths[i]);
		free(paths);
		cd_conn_result(c, id, "{\"watching\":false}", 18);
		return;
	}
	/* A walk still waiting for a worker is replaced before it starts. */
	for (struct wjob *q = st->jobs, *next; q; q = next) {
		next = q->next;
		if (q->queued)
			job_drop(q);
	}
	st->any_id = true;
	st->last_id = watch_id;
	if (st->armed) {
		armed_free(st->armed);
		st->armed = NULL;
	}
	/* A watch that fired while detached and was replaced is no news any more. */
	st->undelivered = false;

	if (missing->u.arr.n == 0 || missing->u.arr.n > WATCH_MAX_PATHS)
		unwatchable = true;
	if (!unwatchable && fsw.n_targets + n > WATCH_MAX_TARGETS) {
		if (!fsw.logged_cap) {
			fsw.logged_cap = true;
			cd_log_warn(
				"serve: fs/watchMissing: the server watches %u paths, its limit "
				"(%u): further watches answer {\"watching\":false} until some "
				"end",
				fsw.n_targets, WATCH_MAX_TARGETS);
		}
		unwatchable = true;
	}
	int ifd = unwatchable ? -1 : inotify_fd(s);
	if (ifd < 0)
		unwatchable = true;

	struct wjob *j = cd_xcalloc(1, sizeof(*j));
	j->work.run = job_run;
	j->work.done = job_done;
	j->st = st;
	j->conn = c;
	j->req_id = cd_xstrdup(id);
	if (cd_testhook_holds("fs/watchMissing"))
		j->hook_key = cd_xasprintf("conn=%lu id=%s", c->serial, id);
	j->id = watch_id;
	j->ifd = ifd;
	j->n_paths = unwatchable ? 0 : n;
	j->paths = paths;
	j->has_present = present != NULL;
	j->unwatchable = unwatchable;
	if (unwatchable) {
		for (size_t i = 0; i < n; i++)
			free(paths[i]);
		bytes = 0;
	}
	cd_mem_set(CD_MEM_FILES, &j->charged, bytes + n * sizeof(*paths));
	j->next = st->jobs;
	st->jobs = j;
	if (unwatchable) {
		/* Nothing to walk: answered at once. */
		job_unlink(j);
		cd_conn_result(c, id, "{\"watching\":false}", 18);
		job_free(j);
		return;
	}
	fsw.n_targets += (unsigned)j->n_paths;
	j->queued = true;
	*fsw.queue_tail = j;
	fsw.queue_tail = &j->qnext;
	pump();
	return;

invalid_paths:
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
invalid:
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
	free(err);
}

/* ---- sessions ---- */

static void on_resumed(struct cd_loop *l, void *data)
{
	struct cd_fs_watch_state *st = data;
	st->resumed = NULL;
	if (!st->undelivered || !conn_usable(st->se->conn))
		return;
	st->undelivered = false;
	send_changed(st->se->conn, st->undelivered_id);
}

void cd_fs_watch_session_attached(struct cd_session *se)
{
	struct cd_fs_watch_state *st = se->fs_watch;
	/* From a fresh iteration: after the answer to the initialize that resumed it. */
	if (st && st->undelivered && !st->resumed)
		st->resumed = cd_loop_add_timer(se->server->loop, 0, on_resumed, st);
}

void cd_fs_watch_session_detached(struct cd_session *se, struct cd_conn *c)
{
	struct cd_fs_watch_state *st = se->fs_watch;
	for (struct wjob *j = st ? st->jobs : NULL; j; j = j->next)
		if (j->conn == c)
			j->conn = NULL;
}

void cd_fs_watch_session_free(struct cd_session *se)
{
	struct cd_fs_watch_state *st = se->fs_watch;
	if (!st)
		return;
	/* Walks on a worker complete into nothing (their watches are released then). */
	while (st->jobs) {
		struct wjob *j = st->jobs;
		j->conn = NULL;
		if (j->queued)
			job_drop(j);
		else
			job_unlink(j);
	}
	armed_free(st->armed);
	if (st->resumed)
		cd_loop_cancel_timer(se->server->loop, st->resumed);
	free(st);
	se->fs_watch = NULL;
	sweep();
}

void cd_fs_watch_server_stop(struct cd_server *s)
{
	while (fsw.queue)
		job_drop(fsw.queue);
	if (fsw.w)
		cd_loop_del_fd(s->loop, fsw.w);
	fsw.w = NULL;
	if (fsw.fd >= 0)
		close(fsw.fd);
	fsw.fd = -1;
	forget_events();
	free(fsw.held);
	fsw.held = NULL;
	fsw.n_held = fsw.cap_held = 0;
}
