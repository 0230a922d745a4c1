/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "serve/sandboxes.h"

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
/* Descriptors one TCP judgement reads before it gives up (undecided). */
#define MAX_FDS_SCANNED (1u << 20)
/* Pid namespaces nest 32 deep at most (MAX_PID_NS_LEVEL), plus the one /proc shows. */
#define MAX_NS_LEVELS 33

/* The names cordon gives the first process of each sandbox's pid namespace (init.c, fs helper). */
static const char *const cordon_inits[] = { "cordon-init", "cordon-fs-helper" };

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
		} else if (strncmp(line, "NSpid:", 6) == 0) {
			char *p = line + 6, *end;
			while (st->levels < MAX_NS_LEVELS) {
				long v = strtol(p, &end, 10);
				if (end == p)
					break;
				st->nspid[st->levels++] = (pid_t)v;
				p = end;
			}
			break; /* after PPid and Name */
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
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int pidfd = -1, proc = own_proc;
	pid_t pid;

	why[0] = '\0';
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		snprintf(why, size, "the client's credentials cannot be read: %s", strerror(errno));
		return CD_PEER_UNDECIDED;
	}
	/* The process that connected, pinned: a pid alone could be another's by now. */
	len = sizeof(pidfd);
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

/*
 * Whether the process whose directory is dir has a descriptor whose link
 * is want ("socket:[INODE]"): 1, 0 (or its descriptors cannot be read), or
 * -E2BIG when *budget ran out.
 */
static int holds(int dir, const char *want, size_t *budget)
{
	int fds = openat(dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fds < 0)
		return 0;
	DIR *d = fdopendir(fds);
	if (!d) {
		close(fds);
		return 0;
	}
	size_t want_len = strlen(want);
	int r = 0;
	struct dirent *de;
	char buf[64];
	while (r == 0 && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if ((*budget)-- == 0) {
			r = -E2BIG;
			break;
		}
		ssize_t n = readlinkat(dirfd(d), de->d_name, buf, sizeof(buf));
		r = n == (ssize_t)want_len && memcmp(buf, want, want_len) == 0;
	}
	closedir(d);
	return r;
}

/*
 * Every process whose descriptors we may read, for the holders of the
 * socket: each is placed (classify); one inside a sandbox, or one that
 * cannot be placed, refuses the client; at least one outside is needed to
 * admit it. Processes of other users are passed over unless we are root:
 * their descriptors are not ours to read, and a sandbox of ours runs as us.
 */
static enum cd_peer_verdict scan(int proc, const char *want, char *why, size_t size)
{
	int all = openat(proc, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = all < 0 ? NULL : fdopendir(all);
	pid_t self = proc == own_proc ? getpid() : host_self, outside = 0;
	size_t budget = MAX_FDS_SCANNED;
	uid_t me = geteuid();
	enum cd_peer_verdict v = CD_PEER_UNDECIDED;
	struct dirent *de;

	if (!d) {
		if (all >= 0)
			close(all);
		snprintf(why, size, "/proc cannot be listed: %s", strerror(errno));
		return CD_PEER_UNDECIDED;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid_t pid = atoi(de->d_name);
		if (pid == self)
			continue; /* our own end of the connection is another socket */
		int dir = openat(proc, de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct stat st;
		if (dir < 0)
			continue;
		if (me != 0 && (fstat(dir, &st) < 0 || st.st_uid != me)) {
			close(dir);
			continue;
		}
		int h = holds(dir, want, &budget);
		if (h == 1) {
			char w[256];
			enum cd_peer_verdict c = classify(proc, dir, pid, w, sizeof(w));
			if (c == CD_PEER_OUTSIDE) {
				outside = pid;
			} else {
				snprintf(why, size,
					 "the client's socket is held by a process %s: %s",
					 c == CD_PEER_SANDBOXED ? "inside a sandbox"
								: "that cannot be placed",
					 w);
				v = c;
				close(dir);
				goto out;
			}
		}
		close(dir);
		if (h == -E2BIG) {
			snprintf(why, size,
				 "more than %u descriptors to look through for the client's socket",
				 MAX_FDS_SCANNED);
			goto out;
		}
	}
	if (outside > 0)
		v = CD_PEER_OUTSIDE;
	else
		snprintf(why, size,
			 "while a sandbox of this server has network access, a client is admitted "
			 "only once its socket is found in a process outside the sandboxes, and "
			 "no process whose descriptors the server may read holds it (it was "
			 "passed on, or its process is not dumpable)");
out:
	closedir(d);
	return v;
}

enum cd_peer_verdict cd_sandboxes_judge_tcp(uint64_t inode, char *why, size_t size)
{
	why[0] = '\0';
	if (!cd_sandboxes_tcp_exposed())
		return CD_PEER_OUTSIDE; /* no sandbox of ours can open a TCP socket */
	int proc = host_proc >= 0 ? host_proc : own_proc;
	if (proc < 0 || (proc == own_proc && !proc_ok)) {
		snprintf(why, size,
			 "the holder of the client's socket cannot be looked for: the server's "
			 "/proc does not show its pid namespace");
		return CD_PEER_UNDECIDED;
	}
	char want[48];
	snprintf(want, sizeof(want), "socket:[%" PRIu64 "]", inode);
	return scan(proc, want, why, size);
}
