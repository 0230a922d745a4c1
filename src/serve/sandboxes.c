/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/linux/netfence.h"
#include "serve/sandboxes.h"
#include "shared/clock.h"
#include "shared/fd-util.h"

/*
 * See sandboxes.h for the rules. Everything here reads /proc through
 * directory descriptors: a /proc/PID directory opened once stays that
 * process's (lookups in it fail once the process is gone, whoever gets the
 * number next), so a judgement never mixes two processes that shared a pid.
 * A process's parent is taken only when, with the parent's directory open,
 * the child still names it as its parent: had the parent died meanwhile,
 * the child would have been handed to a subreaper or an init, whose pid is
 * another.
 *
 * Only /proc/PID/status is read about a client (its parent, its name, and
 * NSpid: its pid in each pid namespace from the one /proc shows down to its
 * own), never its namespace links or descriptors: those need ptrace access,
 * which a process that made itself non-dumpable (the Codex CLI does) denies
 * to an unprivileged server of the same uid. The first process of a pid
 * namespace is the one whose last NSpid is 1; every process of a namespace
 * descends from it (orphans go to it), so a walk up the parents from any
 * of them finds it. A sandbox of this server is a namespace whose first
 * process is a child of the server that the registry knows: our unreaped
 * child, its pid cannot be another's. Every process of that namespace is
 * gone before it can be reaped (the kernel kills them all first), and the
 * entry is removed once it is reaped.
 */

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/* Parent links followed by one walk before it gives up (undecided). */
#define MAX_HOPS 4096
/* Tries to read a parent that keeps changing under us (it died, or was re-parented). */
#define MAX_PARENT_TRIES 16
/* Descriptors one pass of TCP judgements reads before it gives up (undecided). */
#define MAX_FDS_SCANNED (1u << 20)
/* Pid namespaces nest 32 deep at most (MAX_PID_NS_LEVEL), plus the one /proc shows. */
#define MAX_NS_LEVELS 33

/* The names cordon gives the first process of each sandbox's pid namespace (init.c, fs helper). */
static const char *const cordon_inits[] = { "cordon-init", "cordon-fs-helper" };
/*
 * The name of a managed network's proxy (cmd-proxy.c, own-proxy.c). It
 * runs outside the sandbox but connects where the sandbox asks: a socket
 * it holds is the sandbox's, whatever its uid and pid namespace say.
 */
#define CORDON_PROXY_NAME "cordon-proxy"
/* The same holds for the managed network's relay (netfence.h): a client it
 * connects for is the sandbox's (a loopback proxy port the caller named may
 * be this very server's). */
static const char *const cordon_for_sandbox[] = { CORDON_PROXY_NAME, CD_RELAY_NAME };

struct cd_sandbox_entry {
	struct cd_sandbox_entry *prev, *next;
	pid_t pid; /* in the server's pid namespace */
	bool sandboxed;
	bool pid_ns;
	bool network;
};

/* The registry, shared with the fs workers. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cd_sandbox_entry *entries;
static unsigned n_network; /* live sandboxes that may open network sockets */
/*
 * A sandbox without a pid namespace was started: what it left behind may
 * live on in the server's own pid namespace after it was reaped (and, with
 * an open network, hold TCP sockets). Never reset.
 */
static bool degraded_seen, degraded_network_seen;

/* Set by cd_sandboxes_init; read on the event loop's thread only. */
static int own_proc = -1;  /* the server's /proc */
static int host_proc = -1; /* the host's, when the server is in a pid namespace of its own */
static bool proc_ok;	   /* own_proc shows the server's own pid namespace */
static bool adopts_orphans;
static pid_t host_self = -1; /* the server's pid in host_proc */
static int host_level;	     /* how deep the server's pid namespace lies in host_proc's (1: same) */

/* What /proc/PID/status says of a process. */
struct pstatus {
	pid_t ppid;
	int levels;		    /* NSpid entries */
	pid_t nspid[MAX_NS_LEVELS]; /* its pid in each namespace, the one /proc shows first */
	char name[32];		    /* comm, as status escapes it */
	unsigned fdsize;	    /* the size of its descriptor table */
};

static int read_status(int dir, struct pstatus *st)
{
	char buf[4096];
	int fd = openat(dir, "status", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	memset(st, 0, sizeof(*st));
	st->ppid = -1;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "Name:\t", 6) == 0) {
			snprintf(st->name, sizeof(st->name), "%s", line + 6);
		} else if (strncmp(line, "PPid:\t", 6) == 0) {
			st->ppid = atoi(line + 6);
		} else if (strncmp(line, "FDSize:\t", 8) == 0) {
			st->fdsize = (unsigned)strtoul(line + 8, NULL, 10);
		} else if (strncmp(line, "NSpid:", 6) == 0) {
			char *p = line + 6, *end;
			while (st->levels < MAX_NS_LEVELS) {
				long v = strtol(p, &end, 10);
				if (end == p)
					break;
				st->nspid[st->levels++] = (pid_t)v;
				p = end;
			}
			break; /* after Name, PPid and FDSize */
		}
	}
	if (st->ppid < 0 || st->levels == 0)
		return -EPROTO; /* NSpid: Linux 4.1 */
	return 0;
}

static int open_pid(int proc, pid_t pid)
{
	char name[24];

	snprintf(name, sizeof(name), "%d", (int)pid);
	return openat(proc, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/*
 * The parent of the process whose directory is dir: its directory in
 * *ret_dir and its status in *ret (ret->ppid is dir's parent's parent),
 * or *ret_dir -1 when dir is the first process of proc's pid namespace.
 * 0, or -errno (the process is gone).
 */
static int parent_of(int proc, int dir, int *ret_dir, struct pstatus *ret)
{
	for (int tries = 0; tries < MAX_PARENT_TRIES; tries++) {
		struct pstatus now;
		int r = read_status(dir, &now);
		if (r < 0)
			return r;
		if (now.ppid <= 0) {
			*ret_dir = -1;
			return 0;
		}
		int pdir = open_pid(proc, now.ppid);
		/* Still its parent with that directory open: the directory is the parent's. */
		struct pstatus again;
		r = read_status(dir, &again);
		if (r < 0) {
			if (pdir >= 0)
				close(pdir);
			return r;
		}
		if (pdir >= 0 && again.ppid == now.ppid && read_status(pdir, ret) == 0) {
			*ret_dir = pdir;
			return 0;
		}
		if (pdir >= 0)
			close(pdir);
	}
	return -EAGAIN;
}

static struct cd_sandbox_entry *find_pid(pid_t pid)
{
	for (struct cd_sandbox_entry *e = entries; e; e = e->next)
		if (e->pid == pid)
			return e;
	return NULL;
}

int cd_sandboxes_init(int host, bool adopts)
{
	char buf[32];
	ssize_t n;

	cd_sandboxes_done();
	host_proc = host;
	adopts_orphans = adopts;
	own_proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (own_proc < 0)
		return -errno;
	/* A /proc of another pid namespace (pidns.c could not mount ours) lies about pids. */
	n = readlinkat(own_proc, "self", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		proc_ok = atoi(buf) == (int)getpid();
	}
	if (host_proc >= 0) {
		struct pstatus st;
		int dir = openat(host_proc, "self", O_PATH | O_DIRECTORY | O_CLOEXEC);
		n = readlinkat(host_proc, "self", buf, sizeof(buf) - 1);
		if (dir < 0 || n <= 0 || read_status(dir, &st) < 0) {
			/* Without it, clients outside our pid namespace are judged without /proc. */
			if (dir >= 0)
				close(dir);
			close(host_proc);
			host_proc = -1;
		} else {
			close(dir);
			buf[n] = '\0';
			host_self = atoi(buf);
			host_level = st.levels;
		}
	}
	return 0;
}

void cd_sandboxes_done(void)
{
	if (own_proc >= 0)
		close(own_proc);
	if (host_proc >= 0)
		close(host_proc);
	own_proc = host_proc = -1;
	proc_ok = false;
}

struct cd_sandbox_entry *cd_sandboxes_add(pid_t pid, bool sandboxed, bool pid_ns, bool network)
{
	struct cd_sandbox_entry *e = cd_xcalloc(1, sizeof(*e));

	e->pid = pid;
	e->sandboxed = sandboxed;
	e->pid_ns = sandboxed && pid_ns;
	e->network = sandboxed && network;
	pthread_mutex_lock(&lock);
	e->next = entries;
	if (entries)
		entries->prev = e;
	entries = e;
	if (e->network)
		n_network++;
	if (sandboxed && !e->pid_ns) {
		degraded_seen = true;
		degraded_network_seen = degraded_network_seen || e->network;
	}
	pthread_mutex_unlock(&lock);
	return e;
}

struct cd_sandbox_entry *cd_sandboxes_remove(struct cd_sandbox_entry *e)
{
	if (!e)
		return NULL;
	pthread_mutex_lock(&lock);
	if (e->prev)
		e->prev->next = e->next;
	else
		entries = e->next;
	if (e->next)
		e->next->prev = e->prev;
	if (e->network)
		n_network--;
	pthread_mutex_unlock(&lock);
	free(e);
	return NULL;
}

static bool degraded(void)
{
	pthread_mutex_lock(&lock);
	bool r = degraded_seen;
	pthread_mutex_unlock(&lock);
	return r;
}

/* What the registry says of our child pid (in our pid namespace): -1 unknown, 0, 1 sandboxed. */
static int known_child(pid_t pid, bool *ret_pid_ns)
{
	pthread_mutex_lock(&lock);
	struct cd_sandbox_entry *e = find_pid(pid);
	int kind = !e ? -1 : e->sandboxed ? 1 : 0;
	*ret_pid_ns = e && e->pid_ns;
	pthread_mutex_unlock(&lock);
	return kind;
}

/*
 * A process in the server's own pid namespace while sandboxes without one
 * of their own may live there: up its parent chain to the child of the
 * server it descends from. Orphans come back to the server (pid 1 or a
 * subreaper), so every descendant of a sandbox stays below the sandbox or
 * below an orphan the server adopted; which of the two an adopted orphan
 * was, nothing tells.
 */
static enum cd_peer_verdict walk_own(int dir, pid_t pid, char *why, size_t size)
{
	pid_t self = getpid(), cur_pid = pid;
	int cur = dup(dir);

	if (cur < 0) {
		snprintf(why, size, "process %d cannot be looked at: %s", (int)pid,
			 strerror(errno));
		return CD_PEER_UNDECIDED;
	}
	for (int hop = 0; hop < MAX_HOPS; hop++) {
		struct pstatus pst;
		int pdir = -1, r = parent_of(own_proc, cur, &pdir, &pst);
		if (r < 0) {
			close(cur);
			snprintf(why, size, "the parents of process %d cannot be followed: %s",
				 (int)pid, strerror(-r));
			return CD_PEER_UNDECIDED;
		}
		if (pdir < 0) {
			close(cur);
			if (adopts_orphans)
				return CD_PEER_OUTSIDE; /* not the server's descendant */
			snprintf(
				why, size,
				"process %d does not descend from the server, which does not adopt "
				"orphans: it may be what a sandbox without a pid namespace left",
				(int)pid);
			return CD_PEER_UNDECIDED;
		}
		if (pst.nspid[0] == self) {
			close(pdir);
			close(cur);
			bool pid_ns;
			int kind = known_child(cur_pid, &pid_ns);
			if (kind == 0)
				return CD_PEER_OUTSIDE;
			if (kind == 1)
				snprintf(why, size,
					 "process %d is in one of this server's sandboxes (below "
					 "process %d)",
					 (int)pid, (int)cur_pid);
			else
				snprintf(
					why, size,
					"process %d descends from process %d, an orphan the server "
					"adopted: a sandbox without a pid namespace may have left "
					"it",
					(int)pid, (int)cur_pid);
			return kind == 1 ? CD_PEER_SANDBOXED : CD_PEER_UNDECIDED;
		}
		close(cur);
		cur = pdir;
		cur_pid = pst.nspid[0];
	}
	close(cur);
	snprintf(why, size, "the parent chain of process %d is too long", (int)pid);
	return CD_PEER_UNDECIDED;
}

/*
 * Where the process whose directory in proc (own_proc or host_proc) is
 * dir, and whose pid there is pid, lives.
 */
static enum cd_peer_verdict classify(int proc, int dir, pid_t pid, char *why, size_t size)
{
	pid_t self = proc == own_proc ? getpid() : host_self;
	int level = proc == own_proc ? 1 : host_level; /* NSpid entries of ours there */
	struct pstatus st;
	int r = read_status(dir, &st);

	if (r < 0) {
		snprintf(why, size, "process %d cannot be looked at: %s", (int)pid, strerror(-r));
		return CD_PEER_UNDECIDED;
	}
	for (size_t i = 0; i < CD_ARRAY_SIZE(cordon_for_sandbox); i++)
		if (cd_streq(st.name, cordon_for_sandbox[i])) {
			snprintf(why, size,
				 "process %d is a sandbox's network %s (%s): it connects for the "
				 "sandbox",
				 (int)pid, i == 0 ? "proxy" : "relay", st.name);
			return CD_PEER_SANDBOXED;
		}
	if (st.levels == 1) {
		/* The namespace /proc shows: ours, or (host_proc) the one ours is in. */
		if (proc == own_proc && degraded())
			return walk_own(dir, pid, why, size);
		return CD_PEER_OUTSIDE;
	}
	/* Up to the first process of its pid namespace. */
	int cur = dup(dir);
	for (int hop = 0; cur >= 0 && st.nspid[st.levels - 1] != 1; hop++) {
		struct pstatus pst;
		int pdir = -1;
		r = hop < MAX_HOPS ? parent_of(proc, cur, &pdir, &pst) : -ELOOP;
		close(cur);
		cur = -1;
		if (r < 0 || pdir < 0 || pst.levels != st.levels) {
			if (pdir >= 0)
				close(pdir);
			snprintf(why, size, "the parents of process %d cannot be followed: %s",
				 (int)pid, r < 0 ? strerror(-r) : "they leave its pid namespace");
			return CD_PEER_UNDECIDED;
		}
		cur = pdir;
		st = pst;
	}
	if (cur < 0) {
		snprintf(why, size, "process %d cannot be looked at: %s", (int)pid,
			 strerror(errno));
		return CD_PEER_UNDECIDED;
	}
	close(cur);
	pid_t init = st.nspid[0];
	if (init == self) {
		/* host_proc: the server is the first process of its namespace, ours. */
		if (!degraded())
			return CD_PEER_OUTSIDE;
		snprintf(why, size,
			 "process %d cannot be placed: sandboxes without a pid namespace ran, and "
			 "the server's /proc does not show it",
			 (int)pid);
		return CD_PEER_UNDECIDED;
	}
	if (st.ppid == self && st.levels == level + 1) {
		/* A pid namespace the server made: a sandbox it knows of? */
		bool pid_ns;
		int kind = known_child(st.nspid[level - 1], &pid_ns);
		if (kind == 1 && pid_ns) {
			snprintf(why, size, "process %d is in one of this server's sandboxes",
				 (int)pid);
			return CD_PEER_SANDBOXED;
		}
		snprintf(why, size,
			 "process %d is in a pid namespace the server made but does not know of",
			 (int)pid);
		return CD_PEER_UNDECIDED;
	}
	for (size_t i = 0; i < CD_ARRAY_SIZE(cordon_inits); i++)
		if (cd_streq(st.name, cordon_inits[i])) {
			snprintf(why, size,
				 "process %d is in a cordon sandbox (the first process of its pid "
				 "namespace is %s)",
				 (int)pid, st.name);
			return CD_PEER_SANDBOXED;
		}
	return CD_PEER_OUTSIDE;
}

/* The pid, in host_proc's namespace, of the process pidfd refers to (its fdinfo). */
static pid_t host_pid_of(int pidfd)
{
	char name[48], buf[1024];

	snprintf(name, sizeof(name), "self/fdinfo/%d", pidfd);
	int fd = openat(host_proc, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = strstr(buf, "\nPid:");
	return p ? (pid_t)atoi(p + 5) : -1;
}

enum cd_peer_verdict cd_sandboxes_judge_unix(int fd, char *why, size_t size)
{
	struct cd_peer_cred cr;
	int pidfd = -1, proc = own_proc, r = cd_peer_cred(fd, &cr);
	pid_t pid;

	why[0] = '\0';
	if (r < 0) {
		snprintf(why, size, "the client's credentials cannot be read: %s", strerror(-r));
		return CD_PEER_UNDECIDED;
	}
	/* The process that connected, pinned: a pid alone could be another's by now. */
	socklen_t len = sizeof(pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
		pidfd = -1;
		if (errno == ESRCH) {
			snprintf(why, size, "the client's process (pid %d) is gone", (int)cr.pid);
			return CD_PEER_UNDECIDED;
		}
		/* ENOPROTOOPT, EINVAL: before Linux 6.5; the pid is all there is. */
	}
	pid = cr.pid;
	if (pid <= 0 && pidfd >= 0 && host_proc >= 0) {
		/* Outside the server's pid namespace: the host's /proc names it. */
		pid = host_pid_of(pidfd);
		proc = host_proc;
		if (pid <= 0) {
			close(pidfd);
			snprintf(why, size, "the client's process is gone");
			return CD_PEER_UNDECIDED;
		}
	} else if (pid <= 0) {
		/* Not in our pid namespace, below which every sandbox of ours is. */
		if (pidfd >= 0)
			close(pidfd);
		return CD_PEER_OUTSIDE;
	}
	enum cd_peer_verdict v = CD_PEER_UNDECIDED;
	int dir = proc == own_proc && !proc_ok ? -1 : open_pid(proc, pid);
	if (dir < 0)
		snprintf(why, size, "process %d cannot be looked at: %s", (int)pid,
			 proc == own_proc && !proc_ok
				 ? "the server's /proc does not show its pid namespace"
				 : strerror(errno));
	else
		v = classify(proc, dir, pid, why, size);
	if (dir >= 0)
		close(dir);
	/*
	 * Still running after the reads: the directory was the client's, not a
	 * successor's (a pidfd polls readable once its process has exited).
	 */
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	if (pidfd >= 0 && v != CD_PEER_UNDECIDED && poll(&pfd, 1, 0) != 0) {
		snprintf(why, size, "the client's process (pid %d) ended while it was looked at",
			 (int)pid);
		v = CD_PEER_UNDECIDED;
	}
	if (pidfd >= 0)
		close(pidfd);
	return v;
}

bool cd_sandboxes_tcp_exposed(void)
{
	pthread_mutex_lock(&lock);
	bool r = n_network > 0 || degraded_network_seen;
	pthread_mutex_unlock(&lock);
	return r;
}

/* ---- TCP clients: who holds the connecting socket ---- */

/* A process to look through, from the listing of /proc. */
struct candidate {
	pid_t pid;
	bool inner;	 /* below the namespace /proc shows (or anywhere, degraded) */
	unsigned fdsize; /* its descriptor table's size (status FDSize): the cost */
};

/* Inner ones first; in each group the small tables first. */
static int candidate_cmp(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	if (x->inner != y->inner)
		return x->inner ? -1 : 1;
	if (x->fdsize != y->fdsize)
		return x->fdsize < y->fdsize ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/*
 * The processes whose descriptors we may read, into *ret (malloc()ed, *n):
 * processes of other users are passed over unless we are root (their
 * descriptors are not ours to read, and a sandbox of ours runs as us).
 * 0, or -errno when /proc cannot be listed.
 */
static int list_candidates(int proc, bool all_inner, struct candidate **ret, size_t *n)
{
	int all = openat(proc, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = all < 0 ? NULL : fdopendir(all);
	pid_t self = proc == own_proc ? getpid() : host_self;
	uid_t me = geteuid();
	struct candidate *c = NULL;
	size_t len = 0, cap = 0;
	struct dirent *de;

	if (!d) {
		int e = errno;
		if (all >= 0)
			close(all);
		return -e;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid_t pid = atoi(de->d_name);
		if (pid == self)
			continue; /* our own end of the connection is another socket */
		int dir = openat(proc, de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct stat st;
		struct pstatus ps;
		if (dir < 0)
			continue;
		bool ok = (me == 0 || (fstat(dir, &st) == 0 && st.st_uid == me)) &&
			  read_status(dir, &ps) == 0;
		close(dir);
		if (!ok)
			continue; /* gone, or not ours */
		if (len == cap) {
			cap = cap ? cap * 2 : 256;
			c = cd_xreallocarray(c, cap, sizeof(*c));
		}
		c[len++] = (struct candidate){
			.pid = pid,
			.inner = all_inner || ps.levels > 1,
			.fdsize = ps.fdsize,
		};
	}
	closedir(d);
	if (len > 1)
		qsort(c, len, sizeof(*c), candidate_cmp);
	*ret = c;
	*n = len;
	return 0;
}

/* One client of the batch, as the scan goes. */
struct judging {
	struct cd_tcp_client *client;
	bool decided;
	pid_t outside; /* a holder found outside every sandbox, or 0 */
};

static void decide(struct judging *j, enum cd_peer_verdict v)
{
	j->client->verdict = v;
	j->decided = true;
}

/* "socket:[INODE]": the inode, or 0. */
static uint64_t socket_inode(const char *link, ssize_t n)
{
	static const char pre[] = "socket:[";
	uint64_t v = 0;

	if (n < (ssize_t)sizeof(pre) + 1 || memcmp(link, pre, sizeof(pre) - 1) ||
	    link[n - 1] != ']')
		return 0;
	for (ssize_t i = sizeof(pre) - 1; i < n - 1; i++) {
		if (link[i] < '0' || link[i] > '9' || v > UINT64_MAX / 10)
			return 0;
		v = v * 10 + (uint64_t)(link[i] - '0');
	}
	return v;
}

struct scan {
	int proc;
	struct judging *js;
	size_t n, left;	 /* left: not decided yet */
	size_t fds;	 /* descriptors read so far */
	bool inner_done; /* every inner candidate has been looked through */
	const atomic_bool *cancel;
};

/* Decide what is past its deadline (or everything, cancelled); whether any is left. */
static bool expire(struct scan *sc)
{
	uint64_t now = cd_mono_ms();
	bool cancelled = sc->cancel && atomic_load(sc->cancel);

	for (size_t i = 0; i < sc->n; i++) {
		struct judging *j = &sc->js[i];
		if (j->decided || (!cancelled && now < j->client->deadline_ms))
			continue;
		if (cancelled)
			snprintf(j->client->why, sizeof(j->client->why),
				 "the server is shutting down");
		else
			snprintf(j->client->why, sizeof(j->client->why),
				 "the holder of the client's socket was not found within %u ms "
				 "(%zu descriptors looked at; a process, maybe in a sandbox, "
				 "holds very many)",
				 (unsigned)CD_SANDBOXES_JUDGE_MS, sc->fds);
		decide(j, CD_PEER_UNDECIDED);
		sc->left--;
	}
	return sc->left > 0;
}

/*
 * The process pid (its directory dir) holds the socket of client j: where is
 * it (placed once per process: *placed, *where)?
 */
static void found(struct scan *sc, struct judging *j, int dir, pid_t pid, int *placed, char *where,
		  size_t size)
{
	if (*placed < 0)
		*placed = (int)classify(sc->proc, dir, pid, where, size);
	if (*placed == CD_PEER_OUTSIDE) {
		j->outside = pid;
		/* Admitted at once only when no sandboxed process is left to look at. */
		if (sc->inner_done) {
			decide(j, CD_PEER_OUTSIDE);
			sc->left--;
		}
		return;
	}
	snprintf(j->client->why, sizeof(j->client->why),
		 "the client's socket is held by a process %s: %s",
		 *placed == CD_PEER_SANDBOXED ? "inside a sandbox" : "that cannot be placed",
		 where);
	decide(j, (enum cd_peer_verdict) * placed);
	sc->left--;
}

/* Look through the descriptors of process pid; false when the scan must stop. */
static bool look_through(struct scan *sc, pid_t pid)
{
	char name[24], buf[64], where[256];
	int placed = -1;

	snprintf(name, sizeof(name), "%d", (int)pid);
	int dir = openat(sc->proc, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return true; /* gone */
	int fds = openat(dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fds < 0 ? NULL : fdopendir(fds);
	if (!d) {
		if (fds >= 0)
			close(fds);
		close(dir);
		return true; /* its descriptors cannot be read */
	}
	struct dirent *de;
	bool go_on = true;
	while (go_on && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		/* The clock every 256 descriptors: a table of millions must not outlast us. */
		if ((++sc->fds & 255) == 0 && !expire(sc)) {
			go_on = false;
			break;
		}
		if (sc->fds > MAX_FDS_SCANNED) {
			for (size_t i = 0; i < sc->n; i++) {
				if (sc->js[i].decided)
					continue;
				snprintf(sc->js[i].client->why, sizeof(sc->js[i].client->why),
					 "more than %u descriptors to look through for the "
					 "client's socket",
					 MAX_FDS_SCANNED);
				decide(&sc->js[i], CD_PEER_UNDECIDED);
			}
			sc->left = 0;
			go_on = false;
			break;
		}
		ssize_t n = readlinkat(dirfd(d), de->d_name, buf, sizeof(buf));
		uint64_t ino = socket_inode(buf, n);
		if (!ino)
			continue;
		for (size_t i = 0; i < sc->n; i++) {
			struct judging *j = &sc->js[i];
			if (!j->decided && j->client->inode == ino)
				found(sc, j, dir, pid, &placed, where, sizeof(where));
		}
		go_on = sc->left > 0;
	}
	closedir(d);
	close(dir);
	return go_on;
}

void cd_sandboxes_judge_tcp_many(struct cd_tcp_client *const *clients, size_t n,
				 const atomic_bool *cancel)
{
	struct scan sc = { .cancel = cancel, .n = n, .left = n };
	struct candidate *cand = NULL;
	size_t n_cand = 0;

	for (size_t i = 0; i < n; i++) {
		clients[i]->verdict = CD_PEER_UNDECIDED;
		clients[i]->why[0] = '\0';
	}
	if (!cd_sandboxes_tcp_exposed()) {
		for (size_t i = 0; i < n; i++)
			clients[i]->verdict = CD_PEER_OUTSIDE; /* no sandbox can open one */
		return;
	}
	sc.proc = host_proc >= 0 ? host_proc : own_proc;
	if (sc.proc < 0 || (sc.proc == own_proc && !proc_ok)) {
		for (size_t i = 0; i < n; i++)
			snprintf(clients[i]->why, sizeof(clients[i]->why),
				 "the holder of the client's socket cannot be looked for: the "
				 "server's /proc does not show its pid namespace");
		return;
	}
	/*
	 * Sandboxes without a pid namespace may have left processes anywhere
	 * in ours (and only walk_own places them): then every process is
	 * looked through before anyone is admitted.
	 */
	int r = list_candidates(sc.proc, sc.proc == own_proc && degraded(), &cand, &n_cand);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			snprintf(clients[i]->why, sizeof(clients[i]->why),
				 "/proc cannot be listed: %s", strerror(-r));
		return;
	}
	sc.js = cd_xcalloc(n ? n : 1, sizeof(*sc.js));
	for (size_t i = 0; i < n; i++)
		sc.js[i].client = clients[i];
	/*
	 * The inner processes first (every sandbox's are among them): a
	 * sandboxed client is refused as soon as its socket turns up there,
	 * and once they are all looked through, the first holder found
	 * outside admits a client without a look at the rest.
	 */
	bool go_on = expire(&sc);
	for (size_t k = 0; go_on && k < n_cand; k++) {
		if (!cand[k].inner && !sc.inner_done) {
			sc.inner_done = true;
			for (size_t i = 0; i < n; i++) {
				if (!sc.js[i].decided && sc.js[i].outside) {
					decide(&sc.js[i], CD_PEER_OUTSIDE);
					sc.left--;
				}
			}
			go_on = sc.left > 0;
			if (!go_on)
				break;
		}
		go_on = look_through(&sc, cand[k].pid) && expire(&sc);
	}
	for (size_t i = 0; i < n; i++) {
		struct judging *j = &sc.js[i];
		if (j->decided)
			continue;
		if (j->outside) {
			decide(j, CD_PEER_OUTSIDE);
			continue;
		}
		snprintf(j->client->why, sizeof(j->client->why),
			 "while a sandbox of this server has network access, a client is admitted "
			 "only once its socket is found in a process outside the sandboxes, and "
			 "no process whose descriptors the server may read holds it (it was "
			 "passed on, or its process is not dumpable)");
		decide(j, CD_PEER_UNDECIDED);
	}
	free(sc.js);
	free(cand);
}

enum cd_peer_verdict cd_sandboxes_judge_tcp(uint64_t inode, char *why, size_t size)
{
	struct cd_tcp_client c = { .inode = inode,
				   .deadline_ms = cd_mono_ms() + CD_SANDBOXES_JUDGE_MS };
	struct cd_tcp_client *one = &c;

	cd_sandboxes_judge_tcp_many(&one, 1, NULL);
	snprintf(why, size, "%s", c.why);
	return c.verdict;
}
