/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sandboxes.h on macOS, where a sandbox is a Seatbelt profile rather than a
 * pid namespace, and there is no /proc to place a process in.
 *
 * A unix client cannot be admitted on what macOS tells of it: LOCAL_PEERPID
 * names the process that last used the client's socket, not one that
 * holds it (a sandboxed client can fork, hand the socket to its child and
 * exit, leaving a pid that anyone may take next), so a pid that is not
 * sandboxed proves nothing. A sandboxed one does prove that a sandbox had
 * the socket: such a client is refused as sandboxed (sandbox_check with no
 * operation, as Activity Monitor's "Sandbox" column asks), every other one
 * as undecided. A sound judgement would find every holder of the socket
 * through libproc and ask sandbox_check of each, as the Linux build looks
 * through /proc for TCP clients; that is not built. This server's own
 * sandboxes cannot reach its socket at all: their policies deny it
 * (cd_seatbelt_input.hidden).
 *
 * A TCP client's process cannot be found either (peer.c has no owner
 * lookup on macOS, and a ws:// listener there needs a token or
 * --allow-local-users). Whether a child was started sandboxed is not
 * what the registry is told on macOS (its sandbox is the Seatbelt wrapper,
 * not the Linux plan proc.c reads), and what a child leaves behind is not
 * contained: once the server has started any process, every TCP client
 * without a token is undecided (refused), for the rest of its life.
 *
 * POSIX but for sandbox_check (libsystem_sandbox, declared here as the
 * projects that use it declare it): built on Linux for its test, which
 * stands in for sandbox_check (tests/unit/test-sandboxes-mac.c).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/util.h"
#include "serve/sandboxes.h"
#include "shared/fd-util.h"

/* 1: pid is sandboxed; 0: it is not; -1 with errno: it cannot be told. */
int sandbox_check(pid_t pid, const char *operation, int type, ...);
#define SANDBOX_FILTER_NONE 0

struct cd_sandbox_entry {
	pid_t pid;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool started_any; /* a child was ever registered (see the top) */

int cd_sandboxes_init(int host, bool adopts)
{
	(void)host, (void)adopts;
	return 0;
}

void cd_sandboxes_done(void)
{
}

struct cd_sandbox_entry *cd_sandboxes_add(pid_t pid, bool sandboxed, bool pid_ns, bool network)
{
	(void)sandboxed, (void)pid_ns, (void)network;
	struct cd_sandbox_entry *e = cd_xcalloc(1, sizeof(*e));
	e->pid = pid;
	pthread_mutex_lock(&lock);
	started_any = true;
	pthread_mutex_unlock(&lock);
	return e;
}

struct cd_sandbox_entry *cd_sandboxes_remove(struct cd_sandbox_entry *e)
{
	free(e);
	return NULL;
}

enum cd_peer_verdict cd_sandboxes_judge_unix(int fd, char *why, size_t size)
{
	struct cd_peer_cred cr;
	int r = cd_peer_cred(fd, &cr);
	why[0] = '\0';
	if (r < 0) {
		snprintf(why, size, "the client's credentials cannot be read: %s", strerror(-r));
		return CD_PEER_UNDECIDED;
	}
	if (cr.pid <= 0) {
		snprintf(why, size, "the client's process is not known (LOCAL_PEERPID)");
		return CD_PEER_UNDECIDED;
	}
	errno = 0;
	int s = sandbox_check(cr.pid, NULL, SANDBOX_FILTER_NONE);
	if (s > 0) {
		snprintf(why, size,
			 "process %d, the last to use its socket, is in a sandbox (Seatbelt)",
			 (int)cr.pid);
		return CD_PEER_SANDBOXED;
	}
	if (s == 0)
		snprintf(why, size,
			 "this host names only the last process to use a client's socket (%d, not "
			 "sandboxed), not every process that holds it",
			 (int)cr.pid);
	else
		snprintf(why, size, "whether process %d is in a sandbox cannot be told: %s",
			 (int)cr.pid, strerror(errno ? errno : ESRCH));
	return CD_PEER_UNDECIDED;
}

bool cd_sandboxes_tcp_exposed(void)
{
	pthread_mutex_lock(&lock);
	bool r = started_any;
	pthread_mutex_unlock(&lock);
	return r;
}

static enum cd_peer_verdict judge_tcp(char *why, size_t size)
{
	why[0] = '\0';
	if (!cd_sandboxes_tcp_exposed())
		return CD_PEER_OUTSIDE;
	snprintf(why, size,
		 "this server has started processes, and this host cannot tell which process "
		 "holds a TCP client's socket");
	return CD_PEER_UNDECIDED;
}

void cd_sandboxes_judge_tcp_many(struct cd_tcp_client *const *clients, size_t n,
				 const atomic_bool *cancel)
{
	(void)cancel;
	for (size_t i = 0; i < n; i++)
		clients[i]->verdict = judge_tcp(clients[i]->why, sizeof(clients[i]->why));
}

enum cd_peer_verdict cd_sandboxes_judge_tcp(uint64_t inode, char *why, size_t size)
{
	(void)inode;
	return judge_tcp(why, size);
}
